/* Scatter emitter (see scatter_emitter.h). */
#include "compiler/codegen/scatter_emitter.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "compiler/codegen/hero_split.h"

/* ---- scatter ---- */

typedef enum sc_mode {
  SC_PLAIN = 0, /* unique indices, overwrite, or serial: read-combine-write */
  SC_RMW,       /* atomic_rmw */
  SC_CAS,       /* compare-and-swap loop around the combiner */
} sc_mode_t;

typedef enum sc_comb {
  SC_COMB_CALL = 0,
  SC_COMB_ADD,
  SC_COMB_MIN,
  SC_COMB_MAX,
  SC_COMB_OVERWRITE,
  SC_COMB_KEEP,
} sc_comb_t;

#define SC_MAX_OPS 8

typedef struct sc_info {
  const kiln_hlo_instruction_t *sc;
  const kiln_hlo_computation_t *comb;
  int nop;
  const kiln_shape_t *os, *us, *is;
  int64_t ivd;
  int idx_rank; /* indices rank with the implicit trailing index-vector dim */
  int nwin;
  int64_t win_operand_dim[KILN_KIR_MAX_RANK]; /* window dim j -> operand dim */
  int upd_win_j[KILN_KIR_MAX_RANK];           /* update dim -> window dim j or -1 */
  int64_t upd_to_idx_dim[KILN_KIR_MAX_RANK];  /* update dim -> indices dim or -1 */
  int64_t win_size[KILN_KIR_MAX_RANK];        /* per operand dim */
  sc_comb_t comb_kind;
  sc_mode_t mode;
  bool serial, sorted;
  /* Serial scatters: update dims whose window spans the whole operand dim or that no index
   * addresses (the window can only start at 0 there, so the update coordinate is the output
   * coordinate), and the number of their elements. When npar > 1 each thread owns some of those
   * coordinates and walks every other update coordinate in order (sc_emit_split): no two threads
   * write one element, and each element sees its updates in the serial order. */
  bool par[KILN_KIR_MAX_RANK];
  int64_t npar;
} sc_info_t;

static _Atomic bool g_no_split; /* kiln_scatter_emitter_set_split */

void kiln_scatter_emitter_set_split(bool on) {
  atomic_store(&g_no_split, !on);
}

static bool has(const kiln_i64_list_t *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

static int find(const kiln_i64_list_t *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return i;
  return -1;
}

/* (a, b) -> op(a, b) on parameters of the element type; overwrite / keep. */
static sc_comb_t classify_combiner(const kiln_hlo_computation_t *c, kiln_elem_type_t t) {
  if (!c || c->num_parameters != 2 || !c->root) return SC_COMB_CALL;
  const kiln_hlo_instruction_t *r = c->root;
  if (!kiln_shape_is_array(r->shape) || r->shape->rank != 0 || r->shape->type != t) return SC_COMB_CALL;
  if (r->opcode == KILN_OP_PARAMETER) return r->parameter_number == 1 ? SC_COMB_OVERWRITE : SC_COMB_KEEP;
  if (r->num_operands != 2) return SC_COMB_CALL;
  const kiln_hlo_instruction_t *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != KILN_OP_PARAMETER || b->opcode != KILN_OP_PARAMETER || a->parameter_number == b->parameter_number)
    return SC_COMB_CALL;
  if (t == KILN_PRED) return SC_COMB_CALL;
  switch (r->opcode) {
    case KILN_OP_ADD: return SC_COMB_ADD;
    case KILN_OP_MINIMUM: return SC_COMB_MIN;
    case KILN_OP_MAXIMUM: return SC_COMB_MAX;
    default: return SC_COMB_CALL;
  }
}

/* serial_if_order_matters: the host, or deterministic ops on any target. */
static kiln_status sc_analyze(const kiln_hlo_computation_t *c, bool serial_if_order_matters,
                              sc_info_t *si) {
  memset(si, 0, sizeof(*si));
  const kiln_hlo_instruction_t *sc = c->root;
  if (!sc || sc->opcode != KILN_OP_SCATTER)
    return KILN_ERR_UNIMPLEMENTED("%s: scatter fusion whose root is not the scatter", c->name);
  si->sc = sc;
  if (!sc->has_scatter_dnums || sc->num_operands < 3 || sc->num_operands % 2 == 0)
    return KILN_ERR_INVALID("%s: malformed scatter %s", c->name, sc->name);
  si->nop = (sc->num_operands - 1) / 2;
  if (si->nop > SC_MAX_OPS) return KILN_ERR_UNIMPLEMENTED("%s: scatter of %d operands", c->name, si->nop);
  si->os = sc->operands[0]->shape;
  si->is = sc->operands[si->nop]->shape;
  si->us = sc->operands[si->nop + 1]->shape;
  const kiln_scatter_dnums_t *dn = &sc->scatter_dnums;
  if (!kiln_shape_is_array(si->is) || !kiln_elem_type_is_integral(si->is->type))
    return KILN_ERR_INVALID("%s: scatter indices must be integers", sc->name);
  for (int i = 0; i < si->nop; i++) {
    const kiln_shape_t *a = sc->operands[i]->shape, *u = sc->operands[si->nop + 1 + i]->shape;
    if (!kiln_shape_is_array(a) || !kiln_shape_is_array(u) || a->rank != si->os->rank || u->rank != si->us->rank)
      return KILN_ERR_INVALID("%s: scatter operands / updates differ in rank", sc->name);
    if (kiln_elem_type_is_complex(a->type))
      return KILN_ERR_UNIMPLEMENTED("%s: scatter of %s", sc->name, kiln_elem_type_name(a->type));
  }
  if (si->os->rank > KILN_KIR_MAX_RANK || si->us->rank > KILN_KIR_MAX_RANK || si->is->rank >= KILN_KIR_MAX_RANK)
    return KILN_ERR_UNIMPLEMENTED("%s: scatter rank too large", sc->name);
  si->ivd = dn->index_vector_dim;
  if (si->ivd < 0 || si->ivd > si->is->rank) return KILN_ERR_INVALID("%s: bad index_vector_dim", sc->name);
  si->idx_rank = si->is->rank + (si->ivd == si->is->rank ? 1 : 0);
  int64_t nvec = si->ivd < si->is->rank ? si->is->dims[si->ivd] : 1;
  if (nvec != dn->scatter_dims_to_operand_dims.n)
    return KILN_ERR_INVALID("%s: index vector of %lld for %d scatter dims", sc->name, (long long)nvec,
                            dn->scatter_dims_to_operand_dims.n);
  for (int k = 0; k < dn->scatter_dims_to_operand_dims.n; k++)
    if (dn->scatter_dims_to_operand_dims.v[k] < 0 || dn->scatter_dims_to_operand_dims.v[k] >= si->os->rank)
      return KILN_ERR_INVALID("%s: bad scatter_dims_to_operand_dims", sc->name);
  if (dn->input_batching_dims.n != dn->scatter_indices_batching_dims.n)
    return KILN_ERR_INVALID("%s: batching dim lists differ", sc->name);
  for (int d = 0; d < si->os->rank; d++) {
    si->win_size[d] = 1;
    if (!has(&dn->inserted_window_dims, d) && !has(&dn->input_batching_dims, d)) {
      if (si->nwin >= KILN_KIR_MAX_RANK) break;
      si->win_operand_dim[si->nwin++] = d;
    }
  }
  if (si->nwin != dn->update_window_dims.n)
    return KILN_ERR_INVALID("%s: %d update_window_dims for %d window dims", sc->name, dn->update_window_dims.n, si->nwin);
  int b = 0;
  for (int d = 0; d < si->us->rank; d++) {
    int j = find(&dn->update_window_dims, d);
    si->upd_win_j[d] = j;
    si->upd_to_idx_dim[d] = -1;
    if (j >= 0) {
      int64_t od = si->win_operand_dim[j];
      si->win_size[od] = si->us->dims[d];
      if (si->us->dims[d] > si->os->dims[od]) return KILN_ERR_INVALID("%s: update window larger than operand", sc->name);
    } else {
      int64_t id = b < si->ivd ? b : b + 1;
      b++;
      if (id >= si->idx_rank) return KILN_ERR_INVALID("%s: too many update scatter dims", sc->name);
      si->upd_to_idx_dim[d] = id;
    }
  }
  if (b != si->idx_rank - 1) return KILN_ERR_INVALID("%s: update scatter dims do not match the indices", sc->name);
  for (int k = 0; k < dn->scatter_indices_batching_dims.n; k++) {
    int64_t id = dn->scatter_indices_batching_dims.v[k];
    bool found = false;
    for (int d = 0; d < si->us->rank; d++) found |= si->upd_to_idx_dim[d] == id;
    if (!found || dn->input_batching_dims.v[k] < 0 || dn->input_batching_dims.v[k] >= si->os->rank)
      return KILN_ERR_INVALID("%s: bad batching dims", sc->name);
  }
  si->comb = kiln_hlo_instruction_called(sc, "to_apply");
  if (!si->comb || si->comb->num_parameters != 2 * si->nop)
    return KILN_ERR_INVALID("%s: scatter computation must take %d scalars", sc->name, 2 * si->nop);

  /* Strategy. */
  kiln_elem_type_t t = si->os->type;
  int bits = kiln_elem_type_bits(t);
  si->comb_kind = si->nop == 1 ? classify_combiner(si->comb, t) : SC_COMB_CALL;
  bool fp = kiln_elem_type_is_float(t);
  /* Whether updates landing on one element combine to the same value in any order: integer
   * add / min / max (exact), float min / max. Float adds round differently, an overwrite keeps
   * whichever comes last, another combiner need not commute. */
  bool order_free = si->comb_kind == SC_COMB_MIN || si->comb_kind == SC_COMB_MAX ||
                    (!fp && si->comb_kind == SC_COMB_ADD);
  if (serial_if_order_matters && !sc->unique_indices && !order_free &&
      kiln_shape_num_elements(si->us) > 0) {
    /* Updates in their order on one thread, as XLA:CPU runs a scatter: the same result every
     * run (atomics from several threads combined them in whatever order the threads came).
     * On the host always; on a GPU only with deterministic ops (else atomics, as XLA:GPU). */
    si->mode = SC_PLAIN;
    si->serial = true;
  } else if (sc->unique_indices || si->comb_kind == SC_COMB_OVERWRITE) {
    si->mode = SC_PLAIN;
  } else if (si->nop == 1 && (bits == 32 || bits == 64) &&
             (si->comb_kind == SC_COMB_ADD ||
              (!fp && (si->comb_kind == SC_COMB_MIN || si->comb_kind == SC_COMB_MAX)))) {
    si->mode = SC_RMW;
  } else if (si->nop == 1 && (bits == 16 || bits == 32 || bits == 64)) {
    si->mode = SC_CAS;
  } else {
    si->mode = SC_PLAIN;
    si->serial = true;
  }
  si->sorted = sc->indices_are_sorted && !sc->unique_indices && !si->serial && si->comb_kind != SC_COMB_OVERWRITE;
  si->npar = 1;
  for (int d = 0; d < si->us->rank && si->serial && !atomic_load(&g_no_split); d++) {
    int j = si->upd_win_j[d];
    int64_t od = j >= 0 ? si->win_operand_dim[j] : -1;
    si->par[d] = od >= 0 && (si->us->dims[d] == si->os->dims[od] ||
                             !has(&dn->scatter_dims_to_operand_dims, od));
    if (si->par[d]) si->npar *= si->us->dims[d];
  }
  return NULL;
}

/* Operand start position for update element `u` (update indices), written to start[]. */
static bool sc_start(kiln_hero_split_t *s, const sc_info_t *si, kiln_kir_value_t *const *u, kiln_kir_value_t **start) {
  kiln_kir_builder_t *b = &s->h.b;
  const kiln_scatter_dnums_t *dn = &si->sc->scatter_dnums;
  const kiln_hlo_instruction_t *indices = si->sc->operands[si->nop];
  kiln_kir_value_t *zero = kiln_kir_const_index(b, 0);
  for (int d = 0; d < si->os->rank; d++) start[d] = zero;
  kiln_kir_value_t *iidx[KILN_KIR_MAX_RANK + 1];
  for (int d = 0; d < si->idx_rank; d++) iidx[d] = zero;
  for (int d = 0; d < si->us->rank; d++)
    if (si->upd_to_idx_dim[d] >= 0) iidx[si->upd_to_idx_dim[d]] = u[d];
  const kiln_kir_type_t *it = kiln_kir_type_index(s->h.out->kir);
  for (int k = 0; k < dn->scatter_dims_to_operand_dims.n; k++) {
    if (si->ivd < si->is->rank) iidx[si->ivd] = kiln_kir_const_index(b, k);
    kiln_kir_value_t *v = kiln_hero_split_value(s, indices, iidx);
    if (!v) return false;
    start[dn->scatter_dims_to_operand_dims.v[k]] = kiln_kir_convert(b, v, it);
  }
  for (int k = 0; k < dn->input_batching_dims.n; k++) {
    for (int d = 0; d < si->us->rank; d++)
      if (si->upd_to_idx_dim[d] == dn->scatter_indices_batching_dims.v[k]) start[dn->input_batching_dims.v[k]] = u[d];
  }
  return true;
}

/* Whether the whole window starting at `start` fits in the operand. */
static kiln_kir_value_t *sc_in_bounds(kiln_kir_builder_t *b, const sc_info_t *si, kiln_kir_value_t *const *start) {
  kiln_kir_value_t *ok = NULL;
  kiln_kir_value_t *zero = kiln_kir_const_index(b, 0);
  for (int d = 0; d < si->os->rank; d++) {
    kiln_kir_value_t *c = kiln_kir_binary(b, KILN_KIR_AND, kiln_kir_cmp(b, KILN_KIR_CMP_GE, start[d], zero),
                                          kiln_kir_cmp(b, KILN_KIR_CMP_LE, start[d],
                                                       kiln_kir_const_index(b, si->os->dims[d] - si->win_size[d])));
    ok = ok ? kiln_kir_binary(b, KILN_KIR_AND, ok, c) : c;
  }
  return ok ? ok : kiln_kir_const_int(b, KILN_PRED, 1);
}

static void sc_out_index(kiln_kir_builder_t *b, const sc_info_t *si, kiln_kir_value_t *const *start,
                         kiln_kir_value_t *const *u, kiln_kir_value_t **oidx) {
  for (int d = 0; d < si->os->rank; d++) oidx[d] = start[d];
  for (int d = 0; d < si->us->rank; d++)
    if (si->upd_win_j[d] >= 0) {
      int64_t od = si->win_operand_dim[si->upd_win_j[d]];
      oidx[od] = kiln_kir_binary(b, KILN_KIR_ADD, start[od], u[d]);
    }
}

/* Combines update values `upd` (nop values) into the outputs at oidx; returns false on error.
 * outs[] are updated to the new tensor values. */
static bool sc_combine_into(kiln_hero_split_t *s, const sc_info_t *si, kiln_kir_value_t **outs,
                            kiln_kir_value_t *const *oidx, kiln_kir_value_t *const *upd) {
  kiln_kir_builder_t *b = &s->h.b;
  size_t rank = (size_t)si->os->rank;
  /* Output i is stored in its own physical dimension order. */
  kiln_kir_value_t *pidx[SC_MAX_OPS][KILN_KIR_MAX_RANK];
  for (int i = 0; i < si->nop; i++) kiln_elemental_physical_index(s->outputs[i], oidx, pidx[i]);
  if (si->mode == SC_RMW) {
    kiln_kir_atomic_t k = si->comb_kind == SC_COMB_ADD ? KILN_KIR_ATOMIC_ADD
                          : si->comb_kind == SC_COMB_MIN ? KILN_KIR_ATOMIC_MIN
                                                          : KILN_KIR_ATOMIC_MAX;
    outs[0] = kiln_kir_atomic_rmw(b, k, upd[0], outs[0], pidx[0], rank);
    return outs[0] != NULL;
  }
  if (si->mode == SC_CAS) {
    outs[0] = kiln_hero_atomic_cas_combine(&s->h, si->comb, upd[0], outs[0], pidx[0], rank);
    return outs[0] != NULL;
  }
  if (si->comb_kind == SC_COMB_OVERWRITE) {
    outs[0] = kiln_kir_insert(b, upd[0], outs[0], pidx[0], rank);
    return outs[0] != NULL;
  }
  kiln_kir_value_t *args[2 * SC_MAX_OPS], *res[SC_MAX_OPS];
  for (int i = 0; i < si->nop; i++) {
    args[i] = kiln_kir_extract(b, outs[i], pidx[i], rank);
    args[si->nop + i] = upd[i];
  }
  int n = kiln_elemental_emit_scalar_computation(&s->h.fn, si->comb, args, 2 * si->nop, res);
  if (n != si->nop) {
    if (n >= 0)
      kiln_elemental_fail(
          &s->h.fn, KILN_ERR_INVALID("%s: scatter computation gives %d values", si->sc->name, n));
    return false;
  }
  for (int i = 0; i < si->nop; i++) {
    outs[i] = kiln_kir_insert(b, res[i], outs[i], pidx[i], rank);
    if (!outs[i]) return false;
  }
  return true;
}

/* Emits `if (cond) { combine } ` threading the outputs; outs[] get the if's results. */
static bool sc_guarded_combine(kiln_hero_split_t *s, const sc_info_t *si, kiln_kir_value_t *cond,
                               kiln_kir_value_t **outs, kiln_kir_value_t *const *oidx, kiln_kir_value_t *const *upd) {
  kiln_kir_builder_t *b = &s->h.b;
  const kiln_kir_type_t *rt[SC_MAX_OPS];
  for (int i = 0; i < si->nop; i++) rt[i] = outs[i] ? outs[i]->type : NULL;
  if (!cond) return false;
  kiln_kir_op_t *iff = kiln_kir_if(b, cond, rt, (size_t)si->nop);
  if (!iff) return false;
  kiln_kir_value_t *then_outs[SC_MAX_OPS];
  for (int i = 0; i < si->nop; i++) then_outs[i] = outs[i];
  kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 0));
  size_t mark;
  kiln_elemental_enter(&s->h.fn, kiln_kir_op_region(iff, 0), &mark);
  bool ok = sc_combine_into(s, si, then_outs, oidx, upd);
  kiln_elemental_exit(&s->h.fn, mark);
  if (ok) kiln_kir_yield(b, then_outs, (size_t)si->nop);
  kiln_kir_builder_exit(b);
  kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 1));
  kiln_kir_yield(b, outs, (size_t)si->nop);
  kiln_kir_builder_exit(b);
  if (!ok) return false;
  for (int i = 0; i < si->nop; i++) outs[i] = kiln_kir_op_result(iff, (size_t)i);
  return true;
}

/* The body for one update element at update index u (one thread, or one step of the serial
 * loop). */
static bool sc_update_one(kiln_hero_split_t *s, const sc_info_t *si, kiln_kir_value_t **outs, kiln_kir_value_t *const *u) {
  kiln_kir_value_t *start[KILN_KIR_MAX_RANK], *oidx[KILN_KIR_MAX_RANK], *upd[SC_MAX_OPS];
  if (!sc_start(s, si, u, start)) return false;
  kiln_kir_value_t *cond = sc_in_bounds(&s->h.b, si, start);
  sc_out_index(&s->h.b, si, start, u, oidx);
  for (int i = 0; i < si->nop; i++) {
    upd[i] = kiln_hero_split_value(s, si->sc->operands[si->nop + 1 + i], u);
    if (!upd[i]) return false;
  }
  return sc_guarded_combine(s, si, cond, outs, oidx, upd);
}

/* ---- the sorted-indices path ---- */

#define SC_RUN 8 /* scatter indices per thread */

/* The row-major indices in dims[0..rank) of the linear index value `v` in [0, n). */
static bool delinearize_value(kiln_hero_emit_t *h, kiln_kir_value_t *v, int64_t n, const int64_t *dims, int rank,
                              kiln_kir_value_t **out) {
  if (rank == 0) return true;
  kiln_shape_t from = {0}, to = {0};
  from.type = to.type = KILN_S32;
  from.rank = 1;
  from.dims = &n;
  to.rank = rank;
  to.dims = (int64_t *)dims;
  return kiln_hero_reshape_index(h, &from, &v, &to, out);
}

/* Update kernel for sorted indices: thread (w, r) handles window element w of the scatter
 * indices [r * RUN, r * RUN + RUN): consecutive indices landing on the same output element
 * are combined in registers, each run's result written once. */
static bool sc_emit_sorted(kiln_hero_split_t *s, const sc_info_t *si, const kiln_launch_grid_t *g,
                           int64_t nscat, int64_t nwin_elems) {
  kiln_hero_emit_t *h = &s->h;
  kiln_kir_builder_t *b = &h->b;
  kiln_kir_module_t *m = h->out->kir;
  int64_t nruns = (nscat + SC_RUN - 1) / SC_RUN;
  /* Grid "shape" [nruns, nwin_elems]: loop indices (run, w). */
  int64_t gdims[2] = {nruns, nwin_elems};
  kiln_shape_t gshape = {0};
  gshape.type = si->os->type;
  gshape.rank = 2;
  gshape.dims = gdims;
  kiln_kir_op_t *loop = kiln_hero_grid_loop(h, g, &gshape, h->outs, 1);
  if (!loop) return false;
  kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
  size_t mark;
  kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
  kiln_kir_value_t *run = kiln_kir_loop_index(loop, 0), *w = kiln_kir_loop_index(loop, 1);
  kiln_kir_value_t *out = kiln_kir_loop_iter_arg(loop, 0);
  /* Window element w -> update window indices (row-major over the window dims). */
  int nsd = 0, nwd = 0;
  int64_t sdims[KILN_KIR_MAX_RANK], wdims[KILN_KIR_MAX_RANK];
  for (int d = 0; d < si->us->rank; d++) {
    if (si->upd_win_j[d] >= 0) wdims[nwd++] = si->us->dims[d];
    else sdims[nsd++] = si->us->dims[d];
  }
  kiln_kir_value_t *wi[KILN_KIR_MAX_RANK];
  if (!delinearize_value(h, w, nwin_elems, wdims, nwd, wi)) goto fail;
  /* for j in [run*RUN, min(run*RUN + RUN, nscat)): carried (acc, have, oidx...). */
  {
    const kiln_kir_type_t *et = kiln_kir_type_scalar(m, si->os->type);
    int rank = si->os->rank;
    kiln_kir_value_t *lb = kiln_kir_binary(b, KILN_KIR_MUL, run, kiln_kir_const_index(b, SC_RUN));
    kiln_kir_value_t *ub = kiln_kir_binary(b, KILN_KIR_MIN, kiln_kir_binary(b, KILN_KIR_ADD, lb, kiln_kir_const_index(b, SC_RUN)),
                                           kiln_kir_const_index(b, nscat));
    kiln_kir_value_t *inits[3 + KILN_KIR_MAX_RANK];
    kiln_kir_const_t zc = {0};
    inits[0] = out;
    inits[1] = kiln_kir_const(b, et, zc);           /* acc */
    inits[2] = kiln_kir_const_int(b, KILN_PRED, 0); /* have a pending run */
    for (int d = 0; d < rank; d++) inits[3 + d] = kiln_kir_const_index(b, -1);
    kiln_kir_op_t *fo = kiln_kir_for(b, lb, ub, kiln_kir_const_index(b, 1), inits, (size_t)(3 + rank));
    if (!fo) goto fail;
    kiln_kir_region_t *fr = kiln_kir_op_region(fo, 0);
    kiln_kir_builder_enter(b, fr);
    size_t mark2;
    kiln_elemental_enter(&h->fn, fr, &mark2);
    kiln_kir_value_t *j = kiln_kir_region_arg(fr, 0);
    kiln_kir_value_t *cur_out = kiln_kir_region_arg(fr, 1), *acc = kiln_kir_region_arg(fr, 2),
                     *have = kiln_kir_region_arg(fr, 3);
    kiln_kir_value_t *prev[KILN_KIR_MAX_RANK];
    for (int d = 0; d < rank; d++) prev[d] = kiln_kir_region_arg(fr, (size_t)(4 + d));
    /* j -> update scatter indices. */
    kiln_kir_value_t *u[KILN_KIR_MAX_RANK], *sj[KILN_KIR_MAX_RANK];
    if (!delinearize_value(h, j, nscat, sdims, nsd, sj)) goto fail;
    for (int d = 0, a = 0, c = 0; d < si->us->rank; d++) u[d] = si->upd_win_j[d] >= 0 ? wi[a++] : sj[c++];
    kiln_kir_value_t *start[KILN_KIR_MAX_RANK], *oidx[KILN_KIR_MAX_RANK];
    if (!sc_start(s, si, u, start)) goto fail;
    kiln_kir_value_t *inb = sc_in_bounds(b, si, start);
    sc_out_index(b, si, start, u, oidx);
    /* An out-of-bounds element gets the position -1 so it never extends a run. */
    kiln_kir_value_t *minus1 = kiln_kir_const_index(b, -1);
    for (int d = 0; d < rank; d++) oidx[d] = kiln_kir_select(b, inb, oidx[d], minus1);
    kiln_kir_value_t *same = have;
    for (int d = 0; d < rank; d++) same = kiln_kir_binary(b, KILN_KIR_AND, same, kiln_kir_cmp(b, KILN_KIR_CMP_EQ, oidx[d], prev[d]));
    kiln_kir_value_t *upd = kiln_hero_split_value(s, si->sc->operands[si->nop + 1], u);
    if (!upd) goto fail;
    /* Flush the pending run when this element does not extend it. */
    kiln_kir_value_t *flush = kiln_kir_binary(b, KILN_KIR_AND, have, kiln_kir_unary(b, KILN_KIR_NOT, same));
    kiln_kir_value_t *outs1[1] = {cur_out};
    if (!sc_guarded_combine(s, si, flush, outs1, prev, &acc)) goto fail;
    /* acc = same ? combine(acc, upd) : upd */
    kiln_kir_value_t *cargs[2] = {acc, upd}, *cres[1] = {NULL};
    if (kiln_elemental_emit_scalar_computation(&h->fn, si->comb, cargs, 2, cres) != 1) goto fail;
    kiln_kir_value_t *nacc = kiln_kir_select(b, same, cres[0], upd);
    kiln_kir_value_t *ys[3 + KILN_KIR_MAX_RANK];
    ys[0] = outs1[0];
    ys[1] = nacc;
    ys[2] = inb;
    for (int d = 0; d < rank; d++) ys[3 + d] = oidx[d];
    kiln_elemental_exit(&h->fn, mark2);
    kiln_kir_yield(b, ys, (size_t)(3 + rank));
    kiln_kir_builder_exit(b);
    /* Flush the last run. */
    kiln_kir_value_t *fin[1] = {kiln_kir_op_result(fo, 0)};
    kiln_kir_value_t *last[KILN_KIR_MAX_RANK];
    for (int d = 0; d < rank; d++) last[d] = kiln_kir_op_result(fo, (size_t)(3 + d));
    kiln_kir_value_t *lacc = kiln_kir_op_result(fo, 1);
    if (!sc_guarded_combine(s, si, kiln_kir_op_result(fo, 2), fin, last, &lacc)) goto fail;
    kiln_elemental_exit(&h->fn, mark);
    kiln_kir_yield(b, fin, 1);
    kiln_kir_builder_exit(b);
    h->outs[0] = kiln_kir_op_result(loop, 0);
    return true;
  }
fail:
  kiln_elemental_exit(&h->fn, mark);
  kiln_kir_builder_exit(b);
  return false;
}

/* ---- the split serial path ---- */

/* A serial scatter whose window spans whole operand dims, or dims no index moves (si->npar >
 * 1): the grid covers the coordinates of those dims, and every thread walks the other update
 * coordinates in row-major order, a top-level `for` (the host lowering runs it outside the thread
 * loops, so the threads stay innermost): for j in [0, nser): grid over p: update element (p, j)
 * Every output element belongs to one thread and sees its updates in the order of the single
 * thread's walk, so the result is the serial kernel's, bit for bit. */
static bool sc_emit_split(kiln_hero_split_t *s, const sc_info_t *si, const kiln_launch_grid_t *g) {
  kiln_hero_emit_t *h = &s->h;
  kiln_kir_builder_t *b = &h->b;
  int npd = 0, nsd = 0;
  int64_t pdims[KILN_KIR_MAX_RANK], sdims[KILN_KIR_MAX_RANK];
  for (int d = 0; d < si->us->rank; d++) {
    if (si->par[d])
      pdims[npd++] = si->us->dims[d];
    else
      sdims[nsd++] = si->us->dims[d];
  }
  int64_t nser = kiln_shape_num_elements(si->us) / si->npar;
  kiln_kir_op_t *fo = kiln_kir_for(b, kiln_kir_const_index(b, 0), kiln_kir_const_index(b, nser),
                                   kiln_kir_const_index(b, 1), h->outs, (size_t)si->nop);
  if (!fo) return false;
  kiln_kir_region_t *fr = kiln_kir_op_region(fo, 0);
  kiln_kir_builder_enter(b, fr);
  size_t mark;
  kiln_elemental_enter(&h->fn, fr, &mark);
  bool ok = false;
  kiln_kir_value_t *outs[SC_MAX_OPS], *sj[KILN_KIR_MAX_RANK];
  for (int i = 0; i < si->nop; i++) outs[i] = kiln_kir_region_arg(fr, (size_t)(1 + i));
  kiln_shape_t pshape = {0};
  pshape.type = si->os->type;
  pshape.rank = npd;
  pshape.dims = pdims;
  kiln_kir_op_t *loop = NULL;
  if (delinearize_value(h, kiln_kir_region_arg(fr, 0), nser, sdims, nsd, sj))
    loop = kiln_hero_grid_loop(h, g, &pshape, outs, si->nop);
  if (loop) {
    kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
    size_t mark2;
    kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark2);
    kiln_kir_value_t *u[KILN_KIR_MAX_RANK], *louts[SC_MAX_OPS];
    for (int d = 0, a = 0, c = 0; d < si->us->rank; d++)
      u[d] = si->par[d] ? kiln_kir_loop_index(loop, (size_t)a++) : sj[c++];
    for (int i = 0; i < si->nop; i++) louts[i] = kiln_kir_loop_iter_arg(loop, (size_t)i);
    ok = sc_update_one(s, si, louts, u);
    kiln_elemental_exit(&h->fn, mark2);
    if (ok) kiln_kir_yield(b, louts, (size_t)si->nop);
    kiln_kir_builder_exit(b);
    for (int i = 0; i < si->nop && ok; i++) outs[i] = kiln_kir_op_result(loop, (size_t)i);
  }
  kiln_elemental_exit(&h->fn, mark);
  if (ok) kiln_kir_yield(b, outs, (size_t)si->nop);
  kiln_kir_builder_exit(b);
  for (int i = 0; i < si->nop && ok; i++) h->outs[i] = kiln_kir_op_result(fo, (size_t)i);
  return ok;
}

/* The grid of the split path: one thread per parallel coordinate. On the host a block is
 * a task of the worker pool and its threads a vector loop run for each update in turn:
 * blocks of 64 to 128 threads, about two per core (cores <= 0: 16, as the host reduction
 * plans). Narrower blocks walk the indices and the rows more often for less work
 * (`bench_heroes`' scatter rows: 32 columns ran 1.4x the time of 64 on 2 workers). */
static kiln_status sc_split_grid(const sc_info_t *si, const kiln_codegen_compile_options_t *opts,
                                 kiln_launch_grid_t *g) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_linear_grid(si->npar, g));
  if (!opts || !opts->host_target) return NULL;
  int64_t cores = opts->device && opts->device->core_count > 0 ? opts->device->core_count : 16;
  int64_t t = (si->npar + 2 * cores - 1) / (2 * cores);
  t = (t + 31) / 32 * 32;
  if (t < 64) t = 64;
  if (t > 128) t = 128;
  if (t > si->npar) t = si->npar;
  g->threads = t;
  g->blocks_x = (si->npar + t - 1) / t;
  return NULL;
}

/* ---- kernels ---- */

static kiln_status sc_emit_init(const kiln_hlo_computation_t *c, const sc_info_t *si,
                                const kiln_codegen_compile_options_t *opts,
                                kiln_codegen_kernel_t *out) {
  kiln_launch_grid_t g;
  KILN_RETURN_IF_ERROR(kiln_hero_linear_grid(kiln_shape_num_elements(si->os), &g),
                       "launch grid of %s", c->name);
  int64_t block[3], grid[3];
  kiln_hero_grid_dims(&g, block, grid);
  kiln_hero_split_t s;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_split_begin(&s, c, (const kiln_hlo_instruction_t *const *)si->sc->operands,
                                                   si->nop, opts, NULL, block, grid, out));
  kiln_hero_emit_t *h = &s.h;
  kiln_kir_op_t *loop = kiln_hero_grid_loop(h, &g, si->os, h->outs, si->nop);
  if (loop) {
    kiln_kir_builder_enter(&h->b, kiln_kir_op_region(loop, 0));
    size_t mark;
    kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK], *ys[SC_MAX_OPS];
    for (int d = 0; d < si->os->rank; d++) idx[d] = kiln_kir_loop_index(loop, (size_t)d);
    bool ok = true;
    for (int i = 0; i < si->nop && ok; i++) {
      kiln_kir_value_t *v = kiln_hero_split_value(&s, si->sc->operands[i], idx);
      ys[i] = kiln_hero_insert_output(h, &v, 1, kiln_kir_loop_iter_arg(loop, (size_t)i),
                                      s.outputs[i], idx);
      ok = ys[i] != NULL;
    }
    kiln_elemental_exit(&h->fn, mark);
    if (ok) kiln_kir_yield(&h->b, ys, (size_t)si->nop);
    kiln_kir_builder_exit(&h->b);
    if (ok) {
      for (int i = 0; i < si->nop; i++) h->outs[i] = kiln_kir_op_result(loop, (size_t)i);
      kiln_kir_return(&h->b, h->outs, (size_t)si->nop);
    }
  }
  return kiln_hero_split_finish(&s, NULL, opts);
}

static kiln_status sc_emit_update(const kiln_hlo_computation_t *c, const sc_info_t *si,
                                  const kiln_codegen_compile_options_t *opts,
                                  kiln_codegen_kernel_t *out) {
  int64_t nupd = kiln_shape_num_elements(si->us);
  int64_t nwin_elems = 1;
  for (int d = 0; d < si->us->rank; d++)
    if (si->upd_win_j[d] >= 0) nwin_elems *= si->us->dims[d];
  int64_t nscat = nwin_elems > 0 ? nupd / nwin_elems : 0;
  kiln_launch_grid_t g;
  int64_t block[3] = {1, 1, 1}, grid[3] = {1, 1, 1};
  bool split = si->serial && si->npar > 1;
  if (split) {
    KILN_RETURN_IF_ERROR(sc_split_grid(si, opts, &g), "launch grid of %s", c->name);
    kiln_hero_grid_dims(&g, block, grid);
  } else if (si->serial) {
    memset(&g, 0, sizeof(g));
  } else {
    int64_t work = si->sorted ? ((nscat + SC_RUN - 1) / SC_RUN) * nwin_elems : nupd;
    KILN_RETURN_IF_ERROR(kiln_hero_linear_grid(work, &g), "launch grid of %s", c->name);
    kiln_hero_grid_dims(&g, block, grid);
  }
  const kiln_hlo_instruction_t *vals[1 + SC_MAX_OPS];
  for (int i = 0; i <= si->nop; i++) vals[i] = si->sc->operands[si->nop + i];
  kiln_hero_split_t s;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_split_begin(&s, c, vals, si->nop + 1, opts, "_update", block, grid, out));
  kiln_hero_emit_t *h = &s.h;
  kiln_kir_builder_t *b = &h->b;
  kiln_kir_module_t *m = out->kir;
  if (si->sorted || split) {
    bool ok = split ? sc_emit_split(&s, si, &g) : sc_emit_sorted(&s, si, &g, nscat, nwin_elems);
    if (ok) kiln_kir_return(b, h->outs, (size_t)si->nop);
    return kiln_hero_split_finish(&s, NULL, opts);
  }
  kiln_kir_op_t *loop;
  if (si->serial) {
    /* One thread walks every update element in row-major order. */
    const char *dn = "th_x";
    int64_t dhi = 0, shi = nupd > 0 ? nupd - 1 : 0;
    kiln_indexing_map_t *map = kiln_hero_map(m, 1, &dn, &dhi, 1, &shi);
    /* row-major over the logical dimensions, whatever the updates' layout: duplicate
     * indices combine in the evaluator's order */
    kiln_affine_expr_t *ex[KILN_KIR_MAX_RANK];
    kiln_affine_delinearize(m->ctx, kiln_affine_sym(m->ctx, 0), si->us->dims, (size_t)si->us->rank,
                            ex);
    for (int d = 0; d < si->us->rank; d++) kiln_indexing_map_add_result(map, ex[d]);
    kiln_indexing_map_simplify(map);
    kiln_kir_value_t *th = kiln_kir_thread_id(b, 0, 0, 0);
    loop = kiln_kir_loop(b, map, &th, 1, h->outs, (size_t)si->nop);
  } else {
    loop = kiln_hero_grid_loop(h, &g, si->us, h->outs, si->nop);
  }
  if (loop) {
    kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
    size_t mark;
    kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
    kiln_kir_value_t *u[KILN_KIR_MAX_RANK], *outs[SC_MAX_OPS];
    for (int d = 0; d < si->us->rank; d++) u[d] = kiln_kir_loop_index(loop, (size_t)d);
    for (int i = 0; i < si->nop; i++) outs[i] = kiln_kir_loop_iter_arg(loop, (size_t)i);
    bool ok = sc_update_one(&s, si, outs, u);
    kiln_elemental_exit(&h->fn, mark);
    if (ok) kiln_kir_yield(b, outs, (size_t)si->nop);
    kiln_kir_builder_exit(b);
    if (ok) {
      for (int i = 0; i < si->nop; i++) h->outs[i] = kiln_kir_op_result(loop, (size_t)i);
      kiln_kir_return(b, h->outs, (size_t)si->nop);
    }
  }
  return kiln_hero_split_finish(&s, NULL, opts);
}

kiln_status kiln_scatter_kernel_emit(const kiln_hlo_computation_t *c,
                                     const kiln_codegen_compile_options_t *opts,
                                     kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("scatter emitter: no computation");
  sc_info_t si;
  KILN_RETURN_IF_ERROR_PLAIN(
      sc_analyze(c, opts && (opts->host_target || opts->deterministic), &si));
  KILN_RETURN_IF_ERROR_PLAIN(sc_emit_init(c, &si, opts, out));
  /* output i = operand i: an identity copy when each operand is a parameter */
  kiln_codegen_kernel_mark_identity(out, si.nop,
                                    (const kiln_hlo_instruction_t *const *)si.sc->operands);
  if (si.comb_kind == SC_COMB_KEEP || kiln_shape_num_elements(si.us) == 0) return NULL;
  kiln_codegen_kernel_t *upd = kiln_calloc(1, sizeof(*upd));
  kiln_status st = sc_emit_update(c, &si, opts, upd);
  if (st) {
    kiln_free(upd);
    kiln_codegen_kernel_free(out);
    return st;
  }
  /* The chain's argument list is the head's. */
  out->next = upd;
  return NULL;
}
