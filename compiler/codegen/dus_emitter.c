/* In-place dynamic-update-slice emitter (see dus_emitter.h). */
#include "compiler/codegen/dus_emitter.h"

#include <string.h>

#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/hero_split.h"

#define DUS_MAX_ROOTS KILN_HERO_MAX_ROOTS

typedef struct dus_info {
  int nroots;
  const kiln_hlo_instruction_t *roots[DUS_MAX_ROOTS];
  const kiln_hlo_instruction_t *dus[DUS_MAX_ROOTS]; /* the root's DUS, or NULL */
} dus_info_t;

static const kiln_hlo_instruction_t *through_bitcasts(const kiln_hlo_instruction_t *x) {
  while ((x->opcode == KILN_OP_BITCAST || x->opcode == KILN_OP_RESHAPE) && x->num_operands == 1) x = x->operands[0];
  return x;
}

/* Whether the chain from root x down to d (bitcasts and reshapes) maps logical row-major
 * positions onto each other, as kiln_hero_reshape_index assumes: a reshape always does; a
 * bitcast (the same bytes) only between default layouts. */
static bool row_major_chain(const kiln_hlo_instruction_t *x, const kiln_hlo_instruction_t *d) {
  bool bitcast = false, dflt = kiln_hero_has_default_layout(d->shape);
  for (; x != d; x = x->operands[0]) {
    bitcast |= x->opcode == KILN_OP_BITCAST;
    dflt &= kiln_hero_has_default_layout(x->shape);
  }
  return !bitcast || dflt;
}

static bool depends_on_dus(const kiln_hlo_instruction_t *x, int depth) {
  if (x->opcode == KILN_OP_DYNAMIC_UPDATE_SLICE) return true;
  if (depth > 512) return true;
  for (int i = 0; i < x->num_operands; i++)
    if (depends_on_dus(x->operands[i], depth + 1)) return true;
  return false;
}

static kiln_status dus_analyze(const kiln_hlo_computation_t *c, dus_info_t *di) {
  memset(di, 0, sizeof(*di));
  const kiln_hlo_instruction_t *r = c->root;
  if (r->opcode == KILN_OP_TUPLE) {
    if (r->num_operands > DUS_MAX_ROOTS) return KILN_ERR_UNIMPLEMENTED("%s: %d roots", c->name, r->num_operands);
    for (int i = 0; i < r->num_operands; i++) di->roots[di->nroots++] = r->operands[i];
  } else {
    di->roots[di->nroots++] = r;
  }
  int ndus = 0;
  for (int i = 0; i < di->nroots; i++) {
    const kiln_hlo_instruction_t *x = di->roots[i];
    if (!kiln_shape_is_array(x->shape))
      return KILN_ERR_UNIMPLEMENTED("%s: nested tuple root", c->name);
    const kiln_hlo_instruction_t *d = through_bitcasts(x);
    if (d->opcode == KILN_OP_DYNAMIC_UPDATE_SLICE) {
      if (d->num_operands != 2 + d->shape->rank || d->operands[1]->shape->rank != d->shape->rank ||
          kiln_shape_num_elements(x->shape) != kiln_shape_num_elements(d->shape))
        return KILN_ERR_INVALID("%s: malformed dynamic-update-slice %s", c->name, d->name);
      for (int k = 0; k < d->num_operands; k++)
        if (depends_on_dus(d->operands[k], 0))
          return KILN_ERR_UNIMPLEMENTED("%s: %s reads another dynamic-update-slice", c->name, d->name);
      if (!row_major_chain(x, d))
        return KILN_ERR_UNIMPLEMENTED(
            "%s: root %s bitcasts dynamic-update-slice %s between non-default layouts", c->name,
            x->name, d->name);
      di->dus[i] = d;
      ndus++;
    } else if (depends_on_dus(x, 0)) {
      return KILN_ERR_UNIMPLEMENTED("%s: root %s computes on a dynamic-update-slice (XLA's loop emitter case)",
                                    c->name, x->name);
    }
  }
  if (ndus == 0) return KILN_ERR_INVALID("%s: no dynamic-update-slice root", c->name);
  return NULL;
}

/* Value of `instr` (an instruction of the original fusion) at logical index idx: one value,
 * or a complex one's (re, im) parts. Returns how many, -1 on error. */
static int dus_values(kiln_hero_split_t *s, const kiln_hlo_instruction_t *instr,
                      kiln_kir_value_t *const *idx, kiln_kir_value_t **out) {
  const kiln_hlo_instruction_t *cl = kiln_ptrmap_get(&s->clone_of, instr);
  if (!cl) {
    kiln_elemental_fail(&s->h.fn, KILN_ERR_INTERNAL("%s is not read by this kernel", instr->name));
    return -1;
  }
  return kiln_hero_emit_values(&s->h, cl, idx, out);
}

/* Kernel 1: every output written: DUS roots get operand 0, others their own value. */
static kiln_status dus_emit_copy(const kiln_hlo_computation_t *c, const dus_info_t *di,
                                 const kiln_codegen_compile_options_t *opts,
                                 kiln_codegen_kernel_t *out) {
  int64_t nmax = 1;
  const kiln_hlo_instruction_t *vals[DUS_MAX_ROOTS];
  for (int i = 0; i < di->nroots; i++) {
    int64_t n = kiln_shape_num_elements(di->roots[i]->shape);
    if (n > nmax) nmax = n;
    vals[i] = di->dus[i] ? di->dus[i]->operands[0] : di->roots[i];
  }
  kiln_launch_grid_t g;
  KILN_RETURN_IF_ERROR(kiln_hero_linear_grid(nmax, &g), "launch grid of %s", c->name);
  int64_t block[3], grid[3];
  kiln_hero_grid_dims(&g, block, grid);
  kiln_hero_split_t s;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_split_begin(&s, c, vals, di->nroots, opts, NULL, block, grid, out));
  kiln_hero_emit_t *h = &s.h;
  bool ok = true;
  for (int i = 0; i < di->nroots && ok; i++) {
    const kiln_shape_t *vs = vals[i]->shape, *rs = di->roots[i]->shape;
    kiln_kir_op_t *loop = kiln_hero_grid_loop(h, &g, vs, &h->outs[i], 1);
    if (!loop) break;
    kiln_kir_builder_enter(&h->b, kiln_kir_op_region(loop, 0));
    size_t mark;
    kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK], *oidx[KILN_KIR_MAX_RANK], *v[2], *y = NULL;
    for (int d = 0; d < vs->rank; d++) idx[d] = kiln_kir_loop_index(loop, (size_t)d);
    int nv = dus_values(&s, vals[i], idx, v);
    ok = nv > 0 && kiln_hero_reshape_index(h, vs, idx, rs, oidx);
    if (ok) y = kiln_hero_insert_output(h, v, nv, kiln_kir_loop_iter_arg(loop, 0), rs, oidx);
    ok = ok && y;
    kiln_elemental_exit(&h->fn, mark);
    if (ok) kiln_kir_yield(&h->b, &y, 1);
    kiln_kir_builder_exit(&h->b);
    if (ok) h->outs[i] = kiln_kir_op_result(loop, 0);
  }
  if (ok) kiln_kir_return(&h->b, h->outs, (size_t)di->nroots);
  return kiln_hero_split_finish(&s, NULL, opts);
}

/* Kernel 2: one thread per update element of each DUS root, writing the updated window. */
static kiln_status dus_emit_update(const kiln_hlo_computation_t *c, const dus_info_t *di,
                                   const kiln_codegen_compile_options_t *opts,
                                   kiln_codegen_kernel_t *out) {
  int64_t nmax = 1;
  const kiln_hlo_instruction_t *vals[DUS_MAX_ROOTS * (2 + KILN_KIR_MAX_RANK)];
  int nv = 0;
  for (int i = 0; i < di->nroots; i++) {
    const kiln_hlo_instruction_t *d = di->dus[i];
    if (!d) continue;
    int64_t n = kiln_shape_num_elements(d->operands[1]->shape);
    if (n > nmax) nmax = n;
    for (int k = 1; k < d->num_operands; k++) vals[nv++] = d->operands[k];
  }
  kiln_launch_grid_t g;
  KILN_RETURN_IF_ERROR(kiln_hero_linear_grid(nmax, &g), "launch grid of %s", c->name);
  int64_t block[3], grid[3];
  kiln_hero_grid_dims(&g, block, grid);
  kiln_hero_split_t s;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_split_begin(&s, c, vals, nv, opts, "_update", block, grid, out));
  kiln_hero_emit_t *h = &s.h;
  kiln_kir_builder_t *b = &h->b;
  const kiln_kir_type_t *it = kiln_kir_type_index(out->kir);
  bool ok = true;
  for (int i = 0; i < di->nroots && ok; i++) {
    const kiln_hlo_instruction_t *d = di->dus[i];
    if (!d) continue;
    const kiln_shape_t *us = d->operands[1]->shape, *os = d->shape, *rs = di->roots[i]->shape;
    if (kiln_shape_num_elements(us) == 0) continue;
    /* Clamped starts, computed once per thread before the loop. */
    kiln_kir_value_t *start[KILN_KIR_MAX_RANK];
    for (int k = 0; k < os->rank && ok; k++) {
      kiln_kir_value_t *v = kiln_hero_split_value(&s, d->operands[2 + k], NULL);
      ok = v != NULL;
      if (!ok) break;
      v = kiln_kir_convert(b, v, it);
      v = kiln_kir_binary(b, KILN_KIR_MIN, v, kiln_kir_const_index(b, os->dims[k] - us->dims[k]));
      start[k] = kiln_kir_binary(b, KILN_KIR_MAX, v, kiln_kir_const_index(b, 0));
    }
    if (!ok) break;
    kiln_kir_op_t *loop = kiln_hero_grid_loop(h, &g, us, &h->outs[i], 1);
    if (!loop) break;
    kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
    size_t mark;
    kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
    kiln_kir_value_t *u[KILN_KIR_MAX_RANK], *pos[KILN_KIR_MAX_RANK], *oidx[KILN_KIR_MAX_RANK],
        *v[2], *y = NULL;
    for (int k = 0; k < us->rank; k++) {
      u[k] = kiln_kir_loop_index(loop, (size_t)k);
      pos[k] = kiln_kir_binary(b, KILN_KIR_ADD, start[k], u[k]);
    }
    int nv = dus_values(&s, d->operands[1], u, v);
    ok = nv > 0 && kiln_hero_reshape_index(h, os, pos, rs, oidx);
    if (ok) y = kiln_hero_insert_output(h, v, nv, kiln_kir_loop_iter_arg(loop, 0), rs, oidx);
    ok = ok && y;
    kiln_elemental_exit(&h->fn, mark);
    if (ok) kiln_kir_yield(b, &y, 1);
    kiln_kir_builder_exit(b);
    if (ok) h->outs[i] = kiln_kir_op_result(loop, 0);
  }
  if (ok) kiln_kir_return(b, h->outs, (size_t)di->nroots);
  return kiln_hero_split_finish(&s, NULL, opts);
}

kiln_status kiln_dus_kernel_emit(const kiln_hlo_computation_t *c,
                                 const kiln_codegen_compile_options_t *opts,
                                 kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("dynamic-update-slice emitter: no computation");
  dus_info_t di;
  KILN_RETURN_IF_ERROR_PLAIN(dus_analyze(c, &di));
  KILN_RETURN_IF_ERROR_PLAIN(dus_emit_copy(c, &di, opts, out));
  /* The copy kernel is an identity copy when every root is a dynamic-update-slice itself (no
   * bitcast after it) of a parameter. */
  const kiln_hlo_instruction_t *operands[DUS_MAX_ROOTS];
  bool plain = true;
  for (int i = 0; i < di.nroots && plain; i++) {
    plain = di.dus[i] && di.dus[i] == di.roots[i];
    if (plain) operands[i] = di.dus[i]->operands[0];
  }
  if (plain) kiln_codegen_kernel_mark_identity(out, di.nroots, operands);
  kiln_codegen_kernel_t *upd = kiln_calloc(1, sizeof(*upd));
  kiln_status st = dus_emit_update(c, &di, opts, upd);
  if (st) {
    kiln_free(upd);
    kiln_codegen_kernel_free(out);
    return st;
  }
  out->next = upd;
  return NULL;
}
