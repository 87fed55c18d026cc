/* Reduction emitter (see reduction_emitter.h). */
#include "compiler/codegen/reduction_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"

static bool red_on_path(const kiln_red_state_t *rs, const kiln_hlo_instruction_t *x);

/* The reductions and their epilogues are computed by the kernel itself (caller_emits). */
static bool red_emits(void *user, const kiln_hlo_instruction_t *instr) {
  return red_on_path(user, instr) || kiln_red_index(user, instr) >= 0;
}

kiln_status kiln_red_emit_begin(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                                const int64_t block[3], const int64_t grid[3],
                                kiln_codegen_kernel_t *out) {
  return kiln_hero_emit_begin_ex(h, c, opts, kiln_red_is_root, rs, block, grid, true, red_emits,
                                 out);
}

int kiln_red_index(const kiln_red_state_t *rs, const kiln_hlo_instruction_t *x) {
  for (int j = 0; j < rs->nred; j++)
    if (rs->reds[j] == x) return j;
  return -1;
}

static int path_position(const kiln_red_state_t *rs, const kiln_hlo_instruction_t *x) {
  for (int i = 0; i < rs->npath; i++)
    if (rs->path[i] == x) return i;
  return -1;
}

static bool red_on_path(const kiln_red_state_t *rs, const kiln_hlo_instruction_t *x) {
  return path_position(rs, x) >= 0;
}

static bool red_mark_path(kiln_red_state_t *rs, const kiln_hlo_instruction_t *x, const kiln_hlo_instruction_t *hero) {
  if (red_on_path(rs, x)) return true;
  bool reaches = x == hero;
  if (!reaches && x->opcode != KILN_OP_PARAMETER && x->opcode != KILN_OP_REDUCE)
    for (int i = 0; i < x->num_operands; i++) reaches |= red_mark_path(rs, x->operands[i], hero);
  if (reaches && rs->npath < 256) rs->path[rs->npath++] = x;
  return reaches;
}

/* Reduce inputs head their own functions (they are read at the input's indexing). */
bool kiln_red_is_root(void *user, const kiln_hlo_instruction_t *instr) {
  kiln_red_state_t *rs = user;
  for (int j = 0; j < rs->nred; j++) {
    const kiln_hlo_instruction_t *r = rs->reds[j];
    for (int i = 0; i < r->num_operands / 2; i++)
      if (r->operands[i] == instr) return true;
  }
  if (red_on_path(rs, instr)) return false;
  for (int i = 0; i < rs->npath; i++) {
    const kiln_hlo_instruction_t *p = rs->path[i];
    if (kiln_red_index(rs, p) >= 0) continue;
    for (int k = 0; k < p->num_operands; k++)
      if (p->operands[k] == instr) return true;
  }
  return false;
}

/* Logical indices of `s` for the physical linear index value `lin`. */
bool kiln_red_index_of(kiln_hero_emit_t *h, const kiln_shape_t *s, kiln_kir_value_t *lin, kiln_kir_value_t **idx) {
  if (s->rank == 0) return true;
  kiln_kir_module_t *m = h->out->kir;
  int64_t hi = kiln_shape_num_elements(s) - 1;
  const char *dn = "lin";
  kiln_indexing_map_t *map = kiln_hero_map(m, 1, &dn, &hi, 0, NULL);
  kiln_affine_expr_t *ex[KILN_KIR_MAX_RANK];
  kiln_hero_delinearize_physical(m->ctx, s, kiln_affine_dim(m->ctx, 0), ex);
  for (int i = 0; i < s->rank; i++) kiln_indexing_map_add_result(map, ex[i]);
  kiln_indexing_map_simplify(map);
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(&h->b, map, &lin, 1, NULL, 0);
  if (!ap) return false;
  for (int i = 0; i < s->rank; i++) idx[i] = kiln_kir_op_result(ap, (size_t)i);
  return true;
}

/* The logical index of epilogue node x (on a path) for its reduce's output index `oidx`
 * (output shape hero_out): oidx itself, or the index of the same memory position, as x's
 * path_mode says. */
static bool red_epilogue_index(kiln_hero_emit_t *h, const kiln_red_state_t *rs,
                               const kiln_hlo_instruction_t *x, kiln_kir_value_t *const *oidx,
                               const kiln_shape_t *hero_out, kiln_kir_value_t **idx) {
  int i = path_position(rs, x);
  unsigned mode = i >= 0 ? rs->path_mode[i] : 0;
  const kiln_shape_t *s = x->shape;
  if ((mode & KILN_HERO_BY_LOGICAL) && oidx && hero_out && s->rank == hero_out->rank &&
      !memcmp(s->dims, hero_out->dims, sizeof(int64_t) * (size_t)s->rank)) {
    for (int k = 0; k < s->rank; k++) idx[k] = oidx[k];
    return true;
  }
  if ((mode & KILN_HERO_BY_PHYSICAL) && oidx && hero_out) {
    if (kiln_hero_bitcast_index(h, hero_out, oidx, s, idx)) return true;
    kiln_elemental_fail(
        &h->fn, KILN_ERR_UNIMPLEMENTED("%s: a reduction epilogue across a tiled layout", x->name));
    return false;
  }
  kiln_elemental_fail(&h->fn,
                      KILN_ERR_UNIMPLEMENTED("%s: a reduction epilogue whose index is neither its "
                                             "reduce's output index nor the same physical position "
                                             "(a bitcast or reshape across layouts)",
                                             x->name));
  return false;
}

/* Value of epilogue node x at its reduce's output index `oidx` from the final accumulators
 * (operands read at red_epilogue_index). */
static kiln_kir_value_t *red_eval_path(kiln_hero_emit_t *h, kiln_red_state_t *rs,
                                       const kiln_hlo_instruction_t *x,
                                       kiln_kir_value_t *const *oidx, const kiln_shape_t *hero_out,
                                       kiln_kir_value_t *const *acc) {
  int j = kiln_red_index(rs, x);
  if (j >= 0) return acc[rs->acc_first[j]];
  if (x->opcode == KILN_OP_GET_TUPLE_ELEMENT && kiln_red_index(rs, x->operands[0]) >= 0)
    return acc[rs->acc_first[kiln_red_index(rs, x->operands[0])] + x->tuple_index];
  if (x->opcode == KILN_OP_BITCAST || x->opcode == KILN_OP_RESHAPE)
    return red_eval_path(h, rs, x->operands[0], oidx, hero_out, acc);
  if (!kiln_hlo_opcode_is_elementwise(x->opcode) || x->num_operands > 8) {
    kiln_elemental_fail(&h->fn, KILN_ERR_UNIMPLEMENTED("%s: %s in a reduction epilogue", x->name,
                                                       kiln_hlo_opcode_name(x->opcode)));
    return NULL;
  }
  kiln_kir_value_t *args[8], *idx[KILN_KIR_MAX_RANK];
  bool have_idx = false; /* off-path operands (same dims) are read at x's logical index */
  for (int k = 0; k < x->num_operands; k++) {
    const kiln_hlo_instruction_t *op = x->operands[k];
    if (red_on_path(rs, op)) {
      args[k] = red_eval_path(h, rs, op, oidx, hero_out, acc);
    } else {
      if (!have_idx && !red_epilogue_index(h, rs, x, oidx, hero_out, idx)) return NULL;
      have_idx = true;
      args[k] = kiln_hero_emit_value(h, op, idx);
    }
    if (!args[k]) return NULL;
  }
  return kiln_elemental_scalar_op(&h->fn, x, args, x->num_operands);
}

/* A side output: a root that is neither a reduce nor an epilogue (shaped like the input). */
bool kiln_red_is_side_output(const kiln_red_state_t *rs, const kiln_hlo_instruction_t *root) {
  return kiln_red_index(rs, root) < 0 && !red_on_path(rs, root);
}

/* Combines accumulators a (nacc values) with b through each reduce's reducer. */
bool kiln_red_combine(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t **a, kiln_kir_value_t *const *b) {
  for (int j = 0; j < rs->nred; j++) {
    const kiln_hlo_instruction_t *r = rs->reds[j];
    int n = r->num_operands / 2, f = rs->acc_first[j];
    if (rs->complex_add[j]) {
      for (int p = 0; p < 2; p++) a[f + p] = kiln_kir_binary(&h->b, KILN_KIR_ADD, a[f + p], b[f + p]);
      continue;
    }
    const kiln_hlo_computation_t *reducer = kiln_hlo_instruction_called(r, "to_apply");
    if (!reducer) return kiln_elemental_fail(&h->fn, KILN_ERR_INVALID("%s: no to_apply", r->name));
    kiln_kir_value_t *args[2 * KILN_RED_MAX_ACC], *res[KILN_RED_MAX_ACC];
    for (int k = 0; k < n; k++) args[k] = a[f + k], args[n + k] = b[f + k];
    if (kiln_elemental_emit_scalar_computation(&h->fn, reducer, args, 2 * n, res) != n)
      return false;
    for (int k = 0; k < n; k++) a[f + k] = res[k];
  }
  return true;
}

void kiln_red_shuffle_tree(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t **acc, int from) {
  for (int off = from; off >= 1; off /= 2) {
    kiln_kir_value_t *other[KILN_RED_MAX_ACC];
    for (int k = 0; k < rs->nacc; k++) other[k] = kiln_kir_shuffle(&h->b, KILN_KIR_SHUFFLE_DOWN, acc[k], off, 32);
    kiln_red_combine(h, rs, acc, other);
  }
}

/* Initial values of every accumulator, emitted at the builder's position. */
bool kiln_red_init_values(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t **init) {
  for (int j = 0; j < rs->nred; j++) {
    const kiln_hlo_instruction_t *r = rs->reds[j];
    int n = r->num_operands / 2;
    for (int k = 0; k < n; k++) {
      const kiln_hlo_instruction_t *iv = r->operands[n + k];
      if (!(iv->opcode == KILN_OP_CONSTANT || iv->opcode == KILN_OP_PARAMETER) || iv->shape->rank != 0)
        return kiln_elemental_fail(
            &h->fn,
            KILN_ERR_UNIMPLEMENTED("%s: init value %s is not a scalar constant or parameter",
                                   r->name, iv->name));
      if (kiln_hero_emit_values(h, iv, NULL, &init[rs->acc_first[j] + k]) < 0) return false;
    }
  }
  return true;
}

/* Whether a and b have the same dimensions in the same physical order (element types aside):
 * an element's logical index is then the same in both for one physical linear index. */
static bool same_placement(const kiln_shape_t *a, const kiln_shape_t *b) {
  if (a->rank != b->rank || memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank))
    return false;
  bool da = kiln_hero_has_default_layout(a), db = kiln_hero_has_default_layout(b);
  if (da || db) return da == db;
  return !memcmp(a->layout.minor_to_major, b->layout.minor_to_major,
                 sizeof(int64_t) * (size_t)a->rank);
}

/* Physical position -> logical dim of shape s. */
static int phys_logical(const kiln_shape_t *s, int k) {
  return kiln_hero_has_default_layout(s) ? k : (int)s->layout.minor_to_major[s->rank - 1 - k];
}

/* The accumulation loop over this thread's input elements: `lin` is the physical linear
 * index of the reduce input as an expression of the map's dims and symbols. */
/* Indices of shape `s` for lin = outer * extent + inner (0 <= inner < extent): when the
 * shape's minor physical dimensions make up exactly `extent` elements, the major ones are
 * delinearized from `outer` and the minor ones from `inner`; otherwise from `lin`. */
static void delinearize_split(kiln_affine_ctx_t *x, const kiln_shape_t *s, kiln_affine_expr_t *lin,
                              kiln_affine_expr_t *outer, int64_t extent, kiln_affine_expr_t **out) {
  int n = s->rank, k = n;
  int64_t pdims[KILN_KIR_MAX_RANK], prod = 1;
  int plog[KILN_KIR_MAX_RANK];
  bool dflt = kiln_hero_has_default_layout(s);
  for (int i = 0; i < n; i++) {
    plog[i] = dflt ? i : (int)s->layout.minor_to_major[n - 1 - i];
    pdims[i] = s->dims[plog[i]];
  }
  while (k > 0 && prod < extent) prod *= pdims[--k];
  if (!outer || n == 0 || prod != extent || k == n) {
    kiln_hero_delinearize_physical(x, s, lin, out);
    return;
  }
  kiln_affine_expr_t *inner = kiln_affine_add(x, lin, kiln_affine_mul_const(x, outer, -extent));
  kiln_affine_expr_t *tmp[KILN_KIR_MAX_RANK];
  if (k > 0) kiln_affine_delinearize(x, outer, pdims, (size_t)k, tmp);
  kiln_affine_delinearize(x, inner, pdims + k, (size_t)(n - k), tmp + k);
  for (int i = 0; i < n; i++) out[plog[i]] = tmp[i];
}

int kiln_red_add_input_indices(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_indexing_map_t *map,
                                kiln_affine_expr_t *lin, int *off) {
  kiln_affine_ctx_t *x = h->out->kir->ctx;
  int total = 0;
  for (int j = 0; j < rs->nred; j++) {
    const kiln_shape_t *sj = rs->reds[j]->operands[0]->shape;
    off[j] = -1;
    for (int i = 0; i < j && off[j] < 0; i++)
      if (kiln_shape_equal(rs->reds[i]->operands[0]->shape, sj, true)) off[j] = off[i];
    if (off[j] >= 0) continue;
    off[j] = total;
    kiln_affine_expr_t *res[KILN_KIR_MAX_RANK];
    delinearize_split(x, sj, lin, rs->lin_outer, rs->lin_inner_extent, res);
    for (int i = 0; i < sj->rank; i++) kiln_indexing_map_add_result(map, res[i]);
    total += sj->rank;
  }
  return total;
}

bool kiln_red_input_values(kiln_hero_emit_t *h, kiln_red_state_t *rs, int j, kiln_kir_value_t *const *idx,
                           kiln_kir_value_t **x) {
  const kiln_hlo_instruction_t *r = rs->reds[j];
  int at = rs->acc_first[j];
  for (int k = 0; k < r->num_operands / 2; k++) {
    int nv = kiln_hero_emit_values(h, r->operands[k], idx, &x[at]);
    if (nv < 0) return false;
    at += nv;
  }
  return true;
}

kiln_kir_op_t *kiln_red_accumulate(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_indexing_map_t *map,
                                 kiln_affine_expr_t *lin, kiln_kir_value_t *const *ids, int nids,
                                 kiln_kir_value_t **init) {
  int off[KILN_HERO_MAX_ROOTS];
  int nidx = kiln_red_add_input_indices(h, rs, map, lin, off);
  kiln_indexing_map_add_result(map, lin);
  kiln_indexing_map_simplify(map);
  kiln_kir_value_t *inits[KILN_RED_MAX_ACC + KILN_HERO_MAX_ROOTS];
  int side[KILN_HERO_MAX_ROOTS], nside = 0;
  for (int k = 0; k < rs->nacc; k++) inits[k] = init[k];
  for (int o = 0; o < h->part.num_outputs; o++)
    if (kiln_red_is_side_output(rs, h->part.outputs[o].instr)) {
      side[nside] = o;
      inits[rs->nacc + nside++] = h->outs[o];
    }
  kiln_kir_op_t *loop = kiln_kir_loop(&h->b, map, ids, (size_t)nids, inits, (size_t)(rs->nacc + nside));
  if (!loop) return NULL;
  kiln_kir_builder_enter(&h->b, kiln_kir_op_region(loop, 0));
  size_t mark;
  kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
  kiln_kir_value_t *acc[KILN_RED_MAX_ACC], *x[KILN_RED_MAX_ACC];
  for (int k = 0; k < rs->nacc; k++) acc[k] = kiln_kir_loop_iter_arg(loop, (size_t)k);
  for (int j = 0; j < rs->nred; j++) {
    const kiln_hlo_instruction_t *r = rs->reds[j];
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
    for (int i = 0; i < r->operands[0]->shape->rank; i++) idx[i] = kiln_kir_loop_index(loop, (size_t)(off[j] + i));
    if (!kiln_red_input_values(h, rs, j, idx, x))
      for (int k = 0; k < rs->nacc; k++) x[k] = NULL;
  }
  for (int k = 0; k < rs->nacc; k++)
    if (!x[k]) {
      kiln_elemental_exit(&h->fn, mark);
      kiln_kir_builder_exit(&h->b);
      return NULL;
    }
  kiln_kir_value_t *ys[KILN_RED_MAX_ACC + KILN_HERO_MAX_ROOTS];
  bool ok = true;
  kiln_kir_value_t *linv = kiln_kir_loop_index(loop, (size_t)nidx);
  for (int k = 0; k < nside && ok; k++) {
    const kiln_hlo_instruction_t *r = h->part.outputs[side[k]].instr;
    kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK];
    /* Laid out like a reduce's input, the side output's index is that input's: the values
     * both read are then emitted once (not again through a delinearized linear index). */
    int like = -1;
    for (int j = 0; j < rs->nred && like < 0; j++)
      if (same_placement(rs->reds[j]->operands[0]->shape, r->shape)) like = j;
    if (like >= 0)
      for (int i = 0; i < r->shape->rank; i++)
        sidx[i] = kiln_kir_loop_index(loop, (size_t)(off[like] + i));
    bool have = like >= 0 || kiln_red_index_of(h, r->shape, linv, sidx);
    kiln_kir_value_t *v = have ? kiln_hero_emit_value(h, r, sidx) : NULL;
    ok = v != NULL;
    if (ok)
      ys[rs->nacc + k] = kiln_hero_insert_output(
          h, &v, 1, kiln_kir_loop_iter_arg(loop, (size_t)(rs->nacc + k)), r->shape, sidx);
  }
  ok = ok && kiln_red_combine(h, rs, acc, x);
  for (int k = 0; k < rs->nacc; k++) ys[k] = acc[k];
  kiln_elemental_exit(&h->fn, mark);
  if (ok) kiln_kir_yield(&h->b, ys, (size_t)(rs->nacc + nside));
  kiln_kir_builder_exit(&h->b);
  if (ok)
    for (int k = 0; k < nside; k++) h->outs[side[k]] = kiln_kir_op_result(loop, (size_t)(rs->nacc + k));
  return ok ? loop : NULL;
}

/* Output indices of reduce r0 for the kept physical linear index `kept`: the kept input
 * dims (in physical order) delinearized, in logical order. Returns their count, or -1. */
static int reduce_out_index(kiln_hero_emit_t *h, const kiln_hlo_instruction_t *r0, kiln_kir_value_t *kept,
                            kiln_kir_value_t **oidx) {
  kiln_kir_module_t *m = h->out->kir;
  const kiln_shape_t *in = r0->operands[0]->shape;
  bool red[KILN_KIR_MAX_RANK] = {0};
  for (int i = 0; i < r0->dimensions.n; i++) red[r0->dimensions.v[i]] = true;
  int kept_log[KILN_KIR_MAX_RANK], nk = 0;
  int64_t kdims[KILN_KIR_MAX_RANK];
  for (int k = 0; k < in->rank; k++) {
    int d = phys_logical(in, k);
    if (!red[d]) kept_log[nk] = d, kdims[nk++] = in->dims[d];
  }
  kiln_kir_value_t *val_of_in_dim[KILN_KIR_MAX_RANK] = {0};
  if (nk > 0) {
    int64_t hi = 1;
    for (int k = 0; k < nk; k++) hi *= kdims[k];
    hi -= 1;
    const char *dn = "kept";
    kiln_indexing_map_t *map = kiln_hero_map(m, 1, &dn, &hi, 0, NULL);
    kiln_affine_expr_t *ex[KILN_KIR_MAX_RANK];
    kiln_affine_delinearize(m->ctx, kiln_affine_dim(m->ctx, 0), kdims, (size_t)nk, ex);
    for (int k = 0; k < nk; k++) kiln_indexing_map_add_result(map, ex[k]);
    kiln_indexing_map_simplify(map);
    kiln_kir_op_t *ap = kiln_kir_apply_indexing(&h->b, map, &kept, 1, NULL, 0);
    if (!ap) return -1;
    for (int k = 0; k < nk; k++) val_of_in_dim[kept_log[k]] = kiln_kir_op_result(ap, (size_t)k);
  }
  /* Output logical dim i is the i-th kept input dim in logical order. */
  int no = 0;
  for (int d = 0; d < in->rank; d++)
    if (!red[d]) oidx[no++] = val_of_in_dim[d];
  return no;
}

/* Writes the final accumulators into every output at kept physical index `kept` (an index
 * value), inside an if on `cond`. */
void kiln_red_write_outputs(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t *cond,
                          kiln_kir_value_t *kept, kiln_kir_value_t **acc) {
  int nout = h->part.num_outputs;
  const kiln_kir_type_t *types[KILN_HERO_MAX_ROOTS];
  for (int o = 0; o < nout; o++) types[o] = h->outs[o]->type;
  kiln_kir_op_t *iff = kiln_kir_if(&h->b, cond, types, (size_t)nout);
  if (!iff) return;
  kiln_kir_builder_enter(&h->b, kiln_kir_op_region(iff, 0));
  /* Output indices of each reduce (reduces over inputs of the same shape share them). */
  kiln_kir_value_t *oidx_of[KILN_HERO_MAX_ROOTS][KILN_KIR_MAX_RANK];
  int no_of[KILN_HERO_MAX_ROOTS];
  for (int j = 0; j < rs->nred; j++) {
    int same = -1;
    for (int i = 0; i < j && same < 0; i++)
      if (kiln_shape_equal(rs->reds[i]->operands[0]->shape, rs->reds[j]->operands[0]->shape, true) &&
          rs->reds[i]->dimensions.n == rs->reds[j]->dimensions.n &&
          !memcmp(rs->reds[i]->dimensions.v, rs->reds[j]->dimensions.v, sizeof(int64_t) * (size_t)rs->reds[j]->dimensions.n))
        same = i;
    if (same >= 0) {
      no_of[j] = no_of[same];
      memcpy(oidx_of[j], oidx_of[same], sizeof(oidx_of[j]));
    } else if ((no_of[j] = reduce_out_index(h, rs->reds[j], kept, oidx_of[j])) < 0) {
      return;
    }
  }
  kiln_kir_value_t *res[KILN_HERO_MAX_ROOTS];
  for (int o = 0; o < nout; o++) {
    const kiln_partition_output_t *po = &h->part.outputs[o];
    int j = kiln_red_index(rs, po->instr);
    if (j < 0 && kiln_red_is_side_output(rs, po->instr)) {
      res[o] = h->outs[o];
      continue;
    }
    if (j < 0) {
      const kiln_shape_t *rsh = po->instr->shape;
      int hj = -1;
      for (int i = 0; i < rs->ha.num_roots && hj < 0; i++)
        if (rs->ha.roots[i] == po->instr) hj = kiln_red_index(rs, rs->ha.heroes[i]);
      const kiln_shape_t *hsh = NULL;
      if (hj >= 0) {
        hsh = rs->reds[hj]->shape;
        if (kiln_shape_is_tuple(hsh)) hsh = hsh->num_elements > 0 ? hsh->elements[0] : NULL;
      }
      kiln_kir_value_t *const *hidx = hj >= 0 && hsh && hsh->rank == no_of[hj] ? oidx_of[hj] : NULL;
      kiln_kir_value_t *v = red_eval_path(h, rs, po->instr, hidx, hsh, acc),
                       *ridx[KILN_KIR_MAX_RANK];
      if (!v || !red_epilogue_index(h, rs, po->instr, hidx, hsh, ridx)) return;
      res[o] = kiln_hero_insert_output(h, &v, 1, h->outs[o], rsh, ridx);
      continue;
    }
    kiln_kir_value_t *const *val = &acc[rs->acc_first[j] + po->output_index];
    int nv = rs->complex_add[j] ? 2 : 1;
    const kiln_shape_t *osh = kiln_shape_is_tuple(po->instr->shape) ? po->instr->shape->elements[po->output_index]
                                                                    : po->instr->shape;
    if (osh->rank != no_of[j]) {
      kiln_elemental_fail(&h->fn, KILN_ERR_INTERNAL("%s: output rank %d, %d kept dims",
                                                    po->instr->name, osh->rank, no_of[j]));
      return;
    }
    if (rs->atomic_writes) {
      /* Complex adds: one atomic add per part. */
      kiln_kir_value_t *pidx[KILN_KIR_MAX_RANK + 1];
      kiln_elemental_physical_index(osh, oidx_of[j], pidx);
      res[o] = h->outs[o];
      for (int p = 0; p < nv && res[o]; p++) {
        if (nv > 1) pidx[no_of[j]] = kiln_kir_const_index(&h->b, p);
        res[o] = kiln_red_atomic_combine(h, rs, j, val[p], res[o], pidx, no_of[j] + (nv > 1));
      }
    } else {
      res[o] = kiln_hero_insert_output(h, val, nv, h->outs[o], osh, oidx_of[j]);
    }
  }
  kiln_kir_yield(&h->b, res, (size_t)nout);
  kiln_kir_builder_exit(&h->b);
  kiln_kir_builder_enter(&h->b, kiln_kir_op_region(iff, 1));
  kiln_kir_yield(&h->b, h->outs, (size_t)nout);
  kiln_kir_builder_exit(&h->b);
  for (int o = 0; o < nout; o++) h->outs[o] = kiln_kir_op_result(iff, (size_t)o);
}

/* path_mode of every path node, operands before users (the order red_mark_path adds them):
 * an op's mode is kiln_hero_epilogue_step's over every operand on a path. */
static void red_path_modes(kiln_red_state_t *rs) {
  for (int i = 0; i < rs->npath; i++) {
    const kiln_hlo_instruction_t *x = rs->path[i];
    const kiln_hlo_instruction_t *r = x->opcode == KILN_OP_GET_TUPLE_ELEMENT ? x->operands[0] : x;
    if (kiln_red_index(rs, r) >= 0) {
      rs->path_mode[i] = kiln_hero_reduce_output_mode(x, r);
      continue;
    }
    unsigned mode = KILN_HERO_BY_LOGICAL | KILN_HERO_BY_PHYSICAL;
    bool any = false;
    for (int k = 0; k < x->num_operands; k++) {
      int j = path_position(rs, x->operands[k]);
      if (j < 0) continue;
      any = true;
      mode &= kiln_hero_epilogue_step(x, x->operands[k], rs->path_mode[j]);
    }
    rs->path_mode[i] = any ? mode : 0;
  }
}

static kiln_status check_supported(const kiln_hlo_computation_t *c, kiln_red_state_t *rs) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_analyze(c, &rs->ha));
  if (rs->ha.emitter != KILN_HERO_EMITTER_REDUCTION)
    return KILN_ERR_INVALID("%s: not a reduction fusion (%s)", c->name, kiln_hero_emitter_name(rs->ha.emitter));
  for (int i = 0; i < rs->ha.num_roots; i++) {
    const kiln_hlo_instruction_t *root = rs->ha.roots[i], *r = rs->ha.heroes[i];
    if (r->opcode != KILN_OP_REDUCE) {
      if (kiln_shape_is_tuple(root->shape))
        return KILN_ERR_UNIMPLEMENTED("%s: tuple-shaped side output %s", c->name, root->name);
      continue; /* a side output, written while reading the input */
    }
    if (root != r && !red_mark_path(rs, root, r))
      return KILN_ERR_INTERNAL("%s: root %s does not reach its hero", c->name, root->name);
    bool dup = false;
    for (int j = 0; j < rs->nred; j++) dup |= rs->reds[j] == r;
    if (dup) continue;
    int n = r->num_operands / 2;
    bool cplx = false;
    for (int k = 0; k < n; k++) cplx |= kiln_elem_type_is_complex(r->operands[k]->shape->type);
    if (cplx && !kiln_reduction_of_complex_ok(r))
      return KILN_ERR_UNIMPLEMENTED("%s: complex reduction %s other than a single-input add (only complex adds "
                                    "keep their (re, im) parts apart)", c->name, r->name);
    if (cplx && root != r)
      return KILN_ERR_UNIMPLEMENTED("%s: complex reduction %s with an epilogue (%s)", c->name, r->name, root->name);
    if (rs->nacc + n + cplx > KILN_RED_MAX_ACC)
      return KILN_ERR_UNIMPLEMENTED("%s: more than %d reduced values", c->name, KILN_RED_MAX_ACC);
    for (int k = 0; k < n; k++) {
      /* Inputs of other shapes must have the same [R0, K, R2] form (each is indexed through
       * its own physical delinearization); a variadic reduce's inputs share one shape. */
      kiln_reduction_dims_t rd;
      bool same = kiln_reduction_dims_of(r, &rd) && rd.is_row == rs->ha.reduction.is_row &&
                  !memcmp(rd.dims, rs->ha.reduction.dims, sizeof(rd.dims)) &&
                  kiln_shape_num_elements(r->operands[k]->shape) ==
                      kiln_shape_num_elements(r->operands[0]->shape);
      if (!same)
        return KILN_ERR_UNIMPLEMENTED("%s: reduce inputs of different shapes", c->name);
    }
    rs->acc_first[rs->nred] = rs->nacc;
    rs->complex_add[rs->nred] = cplx;
    for (int k = 0; k < n + cplx; k++) rs->acc_red[rs->nacc++] = rs->nred;
    rs->reds[rs->nred++] = r;
  }
  red_path_modes(rs);
  return NULL;
}

static int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void kiln_red_write_guarded(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t *cond,
                            kiln_kir_value_t *bounded, int64_t bound, kiln_kir_value_t *kept,
                            kiln_kir_value_t **acc) {
  if (!bounded) {
    kiln_red_write_outputs(h, rs, cond, kept, acc);
    return;
  }
  kiln_kir_builder_t *b = &h->b;
  int nout = h->part.num_outputs;
  const kiln_kir_type_t *types[KILN_HERO_MAX_ROOTS] = {0};
  kiln_kir_value_t *saved[KILN_HERO_MAX_ROOTS] = {0};
  for (int o = 0; o < nout; o++) types[o] = h->outs[o]->type, saved[o] = h->outs[o];
  kiln_kir_op_t *outer = kiln_kir_if(b, cond, types, (size_t)nout);
  if (!outer) return;
  kiln_kir_builder_enter(b, kiln_kir_op_region(outer, 0));
  kiln_kir_value_t *in = kiln_kir_cmp(b, KILN_KIR_CMP_LT, bounded, kiln_kir_const_index(b, bound));
  kiln_red_write_outputs(h, rs, in, kept, acc);
  kiln_kir_yield(b, h->outs, (size_t)nout);
  kiln_kir_builder_exit(b);
  kiln_kir_builder_enter(b, kiln_kir_op_region(outer, 1));
  kiln_kir_yield(b, saved, (size_t)nout);
  kiln_kir_builder_exit(b);
  for (int o = 0; o < nout; o++) h->outs[o] = kiln_kir_op_result(outer, (size_t)o);
}

/* Row reduction with XLA's RowReductionFusion parameters (see kiln_reduction_plan_t):
 * block (threads_reduced x, threads_kept y), grid (kept blocks x, splits of the reduced
 * extent y). Thread (tx, ty) of block (bx, by) reduces row bx * tk + ty over major rows
 * r0 = (by / splits) * r0_chunk + s0 and minor elements
 * r2 = (by % splits) * split_size + (s1 * tr + tx) * vec + v. */
static kiln_status emit_row(const kiln_hlo_computation_t *c,
                            const kiln_codegen_compile_options_t *opts,
                            const kiln_reduction_options_t *ropts, kiln_red_state_t *rs,
                            kiln_codegen_kernel_t *out) {
  const kiln_reduction_plan_t *pl = &rs->plan;
  int64_t R0 = rs->ha.reduction.dims[0], K = rs->ha.reduction.dims[1], R2 = rs->ha.reduction.dims[2];
  int64_t splits = pl->splits, chunk = pl->split_size, r0s = pl->r0_splits, r0c = pl->r0_chunk;
  int64_t vec = ropts && ropts->vector_size > 0 ? ropts->vector_size : pl->vector_size;
  /* On the host the threads of a warp are the vector lanes: one element per thread makes
   * each lane's loads contiguous across threads (plain vector loads). Adjacent elements per
   * thread, the GPU's 64-bit loads, became gathers for f32 and, for 16-bit inputs (4 per
   * thread), a loop LLVM did not vectorize across threads at all: a bf16 [1024,32000] exp-sum
   * took 5.7x the f32 one. */
  if (opts && opts->host_target && !(ropts && ropts->vector_size > 0)) vec = 1;
  if (vec < 1 || R2 % vec || chunk % vec) vec = 1;
  int64_t tr = pl->threads_reduced, tk = pl->threads_kept;
  if (ropts && ropts->max_threads > 0) {
    tr = round_up(ceil_div(chunk, vec), 32);
    if (tr > round_up(ropts->max_threads, 32)) tr = round_up(ropts->max_threads, 32);
    tk = 1;
  }
  int64_t iters = ceil_div(ceil_div(chunk, vec), tr);
  int64_t kb = ceil_div(K, tk), by = splits * r0s;
  if (kb > 2147483647 || by > 65535)
    return KILN_ERR_UNIMPLEMENTED("%s: row reduction grid %lld x %lld", c->name, (long long)kb, (long long)by);
  int64_t block[3] = {tr, tk, 1}, grid[3] = {kb, by, 1};
  kiln_hero_emit_t h;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_red_emit_begin(&h, c, opts, rs, block, grid, out));
  kiln_kir_module_t *m = out->kir;
  kiln_affine_ctx_t *x = m->ctx;
  kiln_kir_builder_t *b = &h.b;
  const char *dn[4] = {"th_x", "th_y", "bl_x", "bl_y"};
  kiln_kir_value_t *ids[4] = {kiln_kir_thread_id(b, 0, 0, tr - 1), kiln_kir_thread_id(b, 1, 0, tk - 1),
                              kiln_kir_block_id(b, 0, 0, kb - 1), kiln_kir_block_id(b, 1, 0, by - 1)};
  for (int i = 0; i < 4; i++) kiln_kir_value_set_name(ids[i], dn[i]);
  kiln_kir_value_t *th = ids[0];
  kiln_kir_value_t *init[KILN_RED_MAX_ACC];
  kiln_status st = NULL;
  if (!kiln_red_init_values(&h, rs, init)) goto done;
  {
    int64_t dhi[4] = {tr - 1, tk - 1, kb - 1, by - 1}, shi[3] = {r0c - 1, iters - 1, vec - 1};
    kiln_affine_expr_t *d_tx = kiln_affine_dim(x, 0), *d_ty = kiln_affine_dim(x, 1), *d_bx = kiln_affine_dim(x, 2),
                       *d_by = kiln_affine_dim(x, 3);
    kiln_affine_expr_t *row = kiln_affine_add(x, kiln_affine_mul_const(x, d_bx, tk), d_ty);
    kiln_affine_expr_t *in_chunk = kiln_affine_add(
        x, kiln_affine_mul_const(x, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_sym(x, 1), tr), d_tx), vec),
        kiln_affine_sym(x, 2));
    kiln_affine_expr_t *r2 = in_chunk, *r0 = kiln_affine_sym(x, 0);
    if (splits > 1)
      r2 = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_mod(x, d_by, kiln_affine_const(x, splits)), chunk), in_chunk);
    if (r0s > 1)
      r0 = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_floordiv(x, d_by, kiln_affine_const(x, splits)), r0c), r0);
    kiln_affine_expr_t *outer = kiln_affine_add(x, kiln_affine_mul_const(x, r0, K), row);
    kiln_affine_expr_t *lin = kiln_affine_add(x, kiln_affine_mul_const(x, outer, R2), r2);
    /* When the chunk is not a multiple of tr * vec, the iterations s1 < full need no bounds
     * check: they run as a loop of their own, the last ones with the check (both targets; a
     * thread still accumulates its elements in the same order). With major chunks (r0c > 1)
     * the s0 loop is outermost, so the check stays on every iteration. */
    int64_t full = tr * vec * iters > chunk && r0c == 1 ? chunk / (tr * vec) : iters;
    kiln_kir_value_t *acc[KILN_RED_MAX_ACC];
    for (int k = 0; k < rs->nacc; k++) acc[k] = init[k];
    for (int part = 0; part < 2; part++) {
      int64_t lo = part == 0 ? 0 : full, hi = part == 0 ? full - 1 : iters - 1;
      if (lo > hi) continue;
      kiln_indexing_map_t *map = kiln_hero_map(m, 4, dn, dhi, 3, shi);
      kiln_indexing_map_set_name(map, KILN_INDEXING_SYM, 2, "v");
      kiln_indexing_map_set_bounds(map, KILN_INDEXING_SYM, 1, lo, hi);
      if (kb * tk > K) kiln_indexing_map_add_constraint(map, row, 0, K - 1);
      if (tr * vec * (hi + 1) > chunk) kiln_indexing_map_add_constraint(map, in_chunk, 0, chunk - 1);
      if (splits * chunk > R2) kiln_indexing_map_add_constraint(map, r2, 0, R2 - 1);
      if (r0s * r0c > R0) kiln_indexing_map_add_constraint(map, r0, 0, R0 - 1);
      rs->lin_outer = outer;
      rs->lin_inner_extent = R2;
      kiln_kir_op_t *loop = kiln_red_accumulate(&h, rs, map, lin, ids, 4, acc);
      rs->lin_outer = NULL;
      if (!loop) goto done;
      for (int k = 0; k < rs->nacc; k++) acc[k] = kiln_kir_op_result(loop, (size_t)k);
    }
    kiln_red_shuffle_tree(&h, rs, acc, 16);
    kiln_kir_value_t *lane = kiln_kir_binary(b, KILN_KIR_AND, th, kiln_kir_const_index(b, 31));
    if (tr > 32) {
      /* Lane 0 of each warp writes its partial to tile[ty][warp] (one entry of padding); the
       * first warp of each row reads the row's partials back and reduces them. */
      kiln_reduction_plan_t run = *pl; /* as launched: the options may change the block */
      run.threads_reduced = tr;
      run.threads_kept = tk;
      int64_t nw = tr / 32, sdims[2];
      kiln_reduction_tile_dims(&run, &rs->ha.reduction, sdims);
      kiln_kir_value_t *shm[KILN_RED_MAX_ACC];
      const kiln_kir_type_t *stypes[KILN_RED_MAX_ACC];
      for (int k = 0; k < rs->nacc; k++) {
        shm[k] = kiln_kir_alloc_shared(b, init[k]->type->elem, 2, sdims);
        kiln_kir_value_set_name(shm[k], "shmem");
        stypes[k] = shm[k] ? shm[k]->type : NULL;
      }
      const char *dn1 = "th_x";
      int64_t thi = tr - 1;
      kiln_indexing_map_t *wm = kiln_hero_map(m, 1, &dn1, &thi, 0, NULL);
      kiln_indexing_map_add_result(wm, kiln_affine_floordiv(x, kiln_affine_dim(x, 0), kiln_affine_const(x, 32)));
      kiln_kir_value_t *warp = kiln_kir_apply_indexing1(b, wm, &th, 1);
      kiln_kir_value_t *is_lane0 = kiln_kir_cmp(b, KILN_KIR_CMP_EQ, lane, kiln_kir_const_index(b, 0));
      kiln_kir_op_t *w0 = kiln_kir_if(b, is_lane0, stypes, (size_t)rs->nacc);
      if (!w0) goto done;
      kiln_kir_builder_enter(b, kiln_kir_op_region(w0, 0));
      kiln_kir_value_t *ins[KILN_RED_MAX_ACC], *widx[2] = {ids[1], warp};
      for (int k = 0; k < rs->nacc; k++) ins[k] = kiln_kir_insert(b, acc[k], shm[k], widx, 2);
      kiln_kir_yield(b, ins, (size_t)rs->nacc);
      kiln_kir_builder_exit(b);
      kiln_kir_builder_enter(b, kiln_kir_op_region(w0, 1));
      kiln_kir_yield(b, shm, (size_t)rs->nacc);
      kiln_kir_builder_exit(b);
      kiln_kir_value_t *shm1[KILN_RED_MAX_ACC];
      for (int k = 0; k < rs->nacc; k++) shm1[k] = kiln_kir_op_result(w0, (size_t)k);
      kiln_kir_op_t *bar = kiln_kir_barrier(b, shm1, (size_t)rs->nacc);
      if (!bar) goto done;
      kiln_kir_value_t *in_range = kiln_kir_cmp(b, KILN_KIR_CMP_LT, lane, kiln_kir_const_index(b, nw));
      const kiln_kir_type_t *atypes[KILN_RED_MAX_ACC];
      for (int k = 0; k < rs->nacc; k++) atypes[k] = init[k]->type;
      kiln_kir_op_t *rd = kiln_kir_if(b, in_range, atypes, (size_t)rs->nacc);
      if (!rd) goto done;
      kiln_kir_builder_enter(b, kiln_kir_op_region(rd, 0));
      kiln_kir_value_t *v[KILN_RED_MAX_ACC], *ridx[2] = {ids[1], lane};
      for (int k = 0; k < rs->nacc; k++) v[k] = kiln_kir_extract(b, kiln_kir_op_result(bar, (size_t)k), ridx, 2);
      kiln_kir_yield(b, v, (size_t)rs->nacc);
      kiln_kir_builder_exit(b);
      kiln_kir_builder_enter(b, kiln_kir_op_region(rd, 1));
      kiln_kir_yield(b, init, (size_t)rs->nacc);
      kiln_kir_builder_exit(b);
      for (int k = 0; k < rs->nacc; k++) acc[k] = kiln_kir_op_result(rd, (size_t)k);
      int from = 1;
      while (from * 2 < nw) from *= 2;
      kiln_red_shuffle_tree(&h, rs, acc, from);
    }
    kiln_kir_value_t *is_t0 = kiln_kir_cmp(b, KILN_KIR_CMP_EQ, th, kiln_kir_const_index(b, 0));
    const char *kn[2] = {"th_y", "bl_x"};
    int64_t khi[2] = {tk - 1, kb - 1};
    kiln_indexing_map_t *km = kiln_hero_map(m, 2, kn, khi, 0, NULL);
    kiln_indexing_map_add_result(km, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), tk), kiln_affine_dim(x, 0)));
    kiln_kir_value_t *kargs[2] = {ids[1], ids[2]};
    kiln_kir_value_t *kept = kiln_kir_apply_indexing1(b, km, kargs, 2);
    kiln_red_write_guarded(&h, rs, is_t0, kb * tk > K ? kept : NULL, K, kept, acc);
    kiln_kir_return(b, h.outs, (size_t)h.part.num_outputs);
  }
done:
  return kiln_hero_emit_finish(&h, st, opts);
}

/* Column reduction: 32 x 32 threads, each thread with vec lanes (adjacent columns, XLA's
 * column vector size); the reduced rows of one block are split `splits` ways over grid y
 * (by = m * splits + split). Thread (tx, ty) lane v accumulates column (bx * 32 + tx) * vec
 * + v over rows ty, ty + 32, ...; tile[ty][tx * vec + v] of a 32 x (32 * vec + 1) shared
 * tile (on the host: column bx * 32 * vec + v * 32 + tx, tile[ty][v * 32 + tx]), a barrier, then
 * warp ty reads tile[tx][ty * vec + v]: the 32 partials of local column ty * vec + v, reduced by
 * shuffles and written by lane 0. */
static kiln_status emit_column(const kiln_hlo_computation_t *c,
                               const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                               kiln_codegen_kernel_t *out) {
  int64_t M = rs->ha.reduction.dims[0], R = rs->ha.reduction.dims[1], N = rs->ha.reduction.dims[2];
  int64_t splits = rs->plan.splits, chunk = rs->plan.split_size, vec = rs->plan.vector_size;
  if (vec < 1 || N % vec || rs->nacc * vec > KILN_RED_MAX_ACC * KILN_RED_MAX_LANES) vec = 1;
  /* On the host the threads of a warp are the vector lanes: lane v of thread tx then takes
   * column v * 32 + tx of the block's strip, so each lane's loads are contiguous across
   * threads (adjacent columns per thread, the GPU's 64-bit loads, would need a deinterleave
   * shuffle per vector: two on AVX2). Only when the strips divide the columns evenly. */
  bool strided = opts && opts->host_target && vec > 1 && N % (32 * vec) == 0;
  int64_t lane_stride = strided ? 32 : 1, thread_cols = strided ? 1 : vec;
  int64_t bx = (N + 32 * vec - 1) / (32 * vec), iters = (chunk + 31) / 32, by = M * splits;
  if (by > 65535) return KILN_ERR_UNIMPLEMENTED("%s: %lld major kept rows x %lld splits", c->name, (long long)M, (long long)splits);
  int64_t block[3] = {32, 32, 1}, grid[3] = {bx, by, 1};
  kiln_hero_emit_t h;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_red_emit_begin(&h, c, opts, rs, block, grid, out));
  kiln_kir_module_t *m = out->kir;
  kiln_affine_ctx_t *x = m->ctx;
  kiln_kir_builder_t *b = &h.b;
  kiln_kir_value_t *ids[4] = {kiln_kir_thread_id(b, 0, 0, 31), kiln_kir_thread_id(b, 1, 0, 31),
                              kiln_kir_block_id(b, 0, 0, bx - 1), kiln_kir_block_id(b, 1, 0, by - 1)};
  const char *dn[4] = {"th_x", "th_y", "bl_x", "bl_y"};
  for (int i = 0; i < 4; i++) kiln_kir_value_set_name(ids[i], dn[i]);
  kiln_kir_value_t *init[KILN_RED_MAX_ACC];
  kiln_status st = NULL;
  if (!kiln_red_init_values(&h, rs, init)) goto done;
  {
    int64_t dhi[4] = {31, 31, bx - 1, by - 1}, shi[1] = {iters - 1};
    kiln_indexing_map_t *map = kiln_hero_map(m, 4, dn, dhi, 1, shi);
    kiln_affine_expr_t *d_by = kiln_affine_dim(x, 3), *mm = d_by;
    kiln_affine_expr_t *n =
        kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 2), 32 * vec),
                        kiln_affine_mul_const(x, kiln_affine_dim(x, 0), thread_cols));
    kiln_affine_expr_t *rin = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_sym(x, 0), 32), kiln_affine_dim(x, 1));
    kiln_affine_expr_t *r = rin;
    if (splits > 1) {
      mm = kiln_affine_floordiv(x, d_by, kiln_affine_const(x, splits));
      r = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_mod(x, d_by, kiln_affine_const(x, splits)), chunk), rin);
    }
    if (bx * 32 * vec > N) kiln_indexing_map_add_constraint(map, n, 0, N - 1);
    if (iters * 32 > chunk) kiln_indexing_map_add_constraint(map, rin, 0, chunk - 1);
    if (splits * chunk > R) kiln_indexing_map_add_constraint(map, r, 0, R - 1);
    kiln_affine_expr_t *outer = kiln_affine_add(x, kiln_affine_mul_const(x, mm, R), r);
    kiln_affine_expr_t *lin = kiln_affine_add(x, kiln_affine_mul_const(x, outer, N), n);
    kiln_kir_value_t *acc[KILN_RED_MAX_ACC * KILN_RED_MAX_LANES], *tile[KILN_RED_MAX_ACC];
    rs->lin_outer = outer;
    rs->lin_inner_extent = N;
    bool accumulated =
        kiln_red_accumulate_lanes(&h, rs, map, lin, (int)vec, lane_stride, ids, 4, init, acc);
    rs->lin_outer = NULL;
    if (!accumulated) goto done;
    kiln_reduction_plan_t run = rs->plan; /* as launched: vec may have dropped to 1 */
    run.vector_size = (int)vec;
    int64_t tdims[2];
    kiln_reduction_tile_dims(&run, &rs->ha.reduction, tdims);
    const char *tn[2] = {"th_x", "th_y"};
    int64_t thi[2] = {31, 31};
    /* Write (ty, tx * vec + v) and read (tx, ty * vec + v) positions of every lane. */
    kiln_indexing_map_t *tm = kiln_hero_map(m, 2, tn, thi, 0, NULL);
    for (int v = 0; v < vec; v++) {
      kiln_indexing_map_add_result(
          tm, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 0), thread_cols),
                              kiln_affine_const(x, v * lane_stride)));
      kiln_indexing_map_add_result(tm, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), vec), kiln_affine_const(x, v)));
    }
    kiln_kir_op_t *tap = kiln_kir_apply_indexing(b, tm, ids, 2, NULL, 0);
    if (!tap) goto done;
    for (int k = 0; k < rs->nacc; k++) {
      tile[k] = kiln_kir_alloc_shared(b, init[k] ? init[k]->type->elem : KILN_F32, 2, tdims);
      kiln_kir_value_set_name(tile[k], "tile");
      for (int v = 0; v < vec; v++) {
        kiln_kir_value_t *wi[2] = {ids[1], kiln_kir_op_result(tap, (size_t)(2 * v))};
        tile[k] = kiln_kir_insert(b, acc[k * vec + v], tile[k], wi, 2);
      }
    }
    kiln_kir_op_t *bar = kiln_kir_barrier(b, tile, (size_t)rs->nacc);
    if (!bar) goto done;
    kiln_kir_value_t *is_l0 = kiln_kir_cmp(b, KILN_KIR_CMP_EQ, ids[0], kiln_kir_const_index(b, 0));
    int64_t khi[4] = {31, 31, bx - 1, by - 1};
    kiln_indexing_map_t *km = kiln_hero_map(m, 4, dn, khi, 1, &(int64_t){vec - 1});
    kiln_affine_expr_t *col = kiln_affine_add(
        x, kiln_affine_mul_const(x, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 2), 32), kiln_affine_dim(x, 1)), vec),
        kiln_affine_sym(x, 0));
    kiln_affine_expr_t *mo = splits > 1 ? kiln_affine_floordiv(x, kiln_affine_dim(x, 3), kiln_affine_const(x, splits))
                                        : kiln_affine_dim(x, 3);
    kiln_indexing_map_add_result(km, kiln_affine_add(x, kiln_affine_mul_const(x, mo, N), col));
    kiln_indexing_map_add_result(km, col);
    for (int v = 0; v < vec; v++) {
      kiln_kir_value_t *red[KILN_RED_MAX_ACC];
      kiln_kir_value_t *ri[2] = {ids[0], kiln_kir_op_result(tap, (size_t)(2 * v + 1))};
      for (int k = 0; k < rs->nacc; k++) red[k] = kiln_kir_extract(b, kiln_kir_op_result(bar, (size_t)k), ri, 2);
      kiln_red_shuffle_tree(&h, rs, red, 16);
      /* Lane 0 of warp ty holds column (bl_x * 32 + ty) * vec + v. */
      kiln_kir_value_t *vv = kiln_kir_const_index(b, v);
      kiln_kir_op_t *kap = kiln_kir_apply_indexing(b, km, ids, 4, &vv, 1);
      if (!kap) goto done;
      /* The column bound depends on the block: checked inside the lane-0 thread loop. */
      kiln_red_write_guarded(&h, rs, is_l0, bx * 32 * vec > N ? kiln_kir_op_result(kap, 1) : NULL, N,
                             kiln_kir_op_result(kap, 0), red);
    }
    kiln_kir_return(b, h.outs, (size_t)h.part.num_outputs);
  }
done:
  return kiln_hero_emit_finish(&h, st, opts);
}

static kiln_status emit_main(const kiln_hlo_computation_t *c,
                             const kiln_codegen_compile_options_t *opts,
                             const kiln_reduction_options_t *ropts, kiln_red_state_t *rs,
                             kiln_codegen_kernel_t *out) {
  switch (rs->plan.kind) {
    case KILN_REDUCTION_ROW: return emit_row(c, opts, ropts, rs, out);
    case KILN_REDUCTION_MULTI_ROW: return kiln_red_emit_multirow(c, opts, rs, out);
    case KILN_REDUCTION_COLUMN: return emit_column(c, opts, rs, out);
    case KILN_REDUCTION_SMALL_COLUMN: return kiln_red_emit_small_column(c, opts, rs, out);
  }
  return KILN_ERR_INTERNAL("%s: unknown reduction kind", c->name);
}

kiln_status kiln_reduction_kernel_emit(const kiln_hlo_computation_t *c,
                                       const kiln_codegen_compile_options_t *opts,
                                       const kiln_reduction_options_t *ropts,
                                       kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("reduction emitter: no computation");
  kiln_red_state_t *rs = kiln_calloc(1, sizeof(*rs));
  kiln_status s = check_supported(c, rs);
  if (!s) {
    int64_t cores = opts && opts->device ? opts->device->core_count : 0;
    if (opts && opts->deterministic)
      s = kiln_hero_reduction_plan_deterministic(c, &rs->ha, cores, opts->host_target, &rs->plan);
    else if (opts && opts->host_target)
      s = kiln_hero_reduction_plan_host(c, &rs->ha, cores, &rs->plan);
    else
      s = kiln_hero_reduction_plan(c, &rs->ha, cores, &rs->plan);
  }
  if (!s && rs->plan.splits * rs->plan.r0_splits > 1) {
    /* Several blocks per output: an initializing kernel, then the reduction with atomics. */
    rs->atomic_writes = true;
    kiln_codegen_kernel_t *main_k = kiln_calloc(1, sizeof(*main_k));
    kiln_codegen_compile_options_t o2 = opts ? *opts : (kiln_codegen_compile_options_t){0};
    char name[160];
    snprintf(name, sizeof(name), "%s_init", opts && opts->kernel_name ? opts->kernel_name : c->name);
    o2.kernel_name = name;
    s = kiln_red_emit_init(c, &o2, rs, out);
    if (!s) s = emit_main(c, opts, ropts, rs, main_k);
    if (s) {
      kiln_codegen_kernel_free(out);
      kiln_free(main_k);
    } else {
      out->next = main_k;
    }
  } else if (!s) {
    s = emit_main(c, opts, ropts, rs, out);
  }
  kiln_free(rs);
  return s;
}
