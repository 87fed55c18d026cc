/* Elemental emitter: subgraph functions, data movement through indexing maps, and the
 * loops of reductions and dots inside loop fusions (see elemental.h). The scalar math of
 * each elementwise opcode is in elemental_ops.c. */
#include "compiler/codegen/elemental.h"

#include <stdio.h>
#include <string.h>

#include "base/vec.h"
#include "compiler/analysis/hlo_indexing.h"
#include "compiler/codegen/elemental_internal.h"

#define MAX_OUTS KILN_ELEM_MAX_OUTPUTS

/* ---- helpers ---- */

bool kiln_elemental_fail(kiln_elemental_fn_t *f, kiln_status s) {
  if (!f->err)
    f->err = s;
  else
    kiln_status_free(s);
  return false;
}

int kiln_elemental_num_outputs(const kiln_hlo_instruction_t *instr) {
  return kiln_shape_is_tuple(instr->shape) ? instr->shape->num_elements : 1;
}

kiln_elem_type_t kiln_elemental_output_type(const kiln_hlo_instruction_t *instr, int k) {
  const kiln_shape_t *s = instr->shape;
  if (kiln_shape_is_tuple(s)) s = k < s->num_elements ? s->elements[k] : s->elements[0];
  return s->type;
}

static const kiln_shape_t *output_shape(const kiln_hlo_instruction_t *instr, int k) {
  const kiln_shape_t *s = instr->shape;
  if (kiln_shape_is_tuple(s)) s = k < s->num_elements ? s->elements[k] : NULL;
  return s;
}

int kiln_elemental_vals_per(kiln_elem_type_t t) {
  return kiln_elem_type_is_complex(t) ? 2 : 1;
}

kiln_elem_type_t kiln_elemental_part_type(kiln_elem_type_t t) {
  return t == KILN_C64 ? KILN_F32 : t == KILN_C128 ? KILN_F64 : t;
}

int kiln_elemental_num_values(const kiln_hlo_instruction_t *instr) {
  int n = 0;
  for (int k = 0; k < kiln_elemental_num_outputs(instr); k++)
    n += kiln_elemental_vals_per(kiln_elemental_output_type(instr, k));
  return n;
}

bool kiln_elemental_physical_order(const kiln_shape_t *s, int *perm) {
  bool permuted = false;
  bool laid = s->has_layout && s->layout.rank == s->rank && s->layout.minor_to_major &&
              s->rank > 1 && s->rank <= KILN_KIR_MAX_RANK;
  unsigned seen = 0;
  for (int j = 0; laid && j < s->rank; j++) {
    int64_t d = s->layout.minor_to_major[j];
    laid = d >= 0 && d < s->rank && !(seen & (1u << d));
    if (laid) seen |= 1u << d;
  }
  for (int j = 0; j < s->rank; j++) {
    perm[j] = laid ? (int)s->layout.minor_to_major[s->rank - 1 - j] : j;
    if (perm[j] != j) permuted = true;
  }
  return permuted;
}

void kiln_elemental_physical_index(const kiln_shape_t *s, kiln_kir_value_t *const *idx,
                                   kiln_kir_value_t **out) {
  int perm[KILN_KIR_MAX_RANK];
  kiln_elemental_physical_order(s, perm);
  for (int j = 0; j < s->rank; j++) out[j] = idx[perm[j]];
}

const kiln_kir_type_t *kiln_elemental_tensor_type(kiln_kir_module_t *m, const kiln_shape_t *s) {
  int64_t dims[KILN_KIR_MAX_RANK + 1];
  int perm[KILN_KIR_MAX_RANK];
  if (s->rank > KILN_KIR_MAX_RANK) return NULL;
  kiln_elemental_physical_order(s, perm);
  for (int i = 0; i < s->rank; i++) dims[i] = s->dims[perm[i]];
  if (!kiln_elem_type_is_complex(s->type))
    return kiln_kir_type_tensor(m, s->type, s->rank, dims, KILN_KIR_SPACE_GLOBAL);
  dims[s->rank] = 2;
  return kiln_kir_type_tensor(m, kiln_elemental_part_type(s->type), s->rank + 1, dims,
                              KILN_KIR_SPACE_GLOBAL);
}

kiln_status kiln_elemental_check_type(kiln_elem_type_t t) {
  if (!kiln_elem_type_is_array(t))
    return KILN_ERR_UNIMPLEMENTED("element type %s is not supported by the kernel IR",
                                  kiln_elem_type_name(t));
  return NULL;
}

/* Element types and ranks of every value. Layouts matter only where memory is touched
 * (tensor leaves and outputs, see check_memory_layout): inside the fusion values are
 * logical, and bitcasts' indexing maps already read both layouts. */
static kiln_status check_shape(const kiln_hlo_instruction_t *instr, const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      KILN_RETURN_IF_ERROR_PLAIN(check_shape(instr, s->elements[i]));
    return NULL;
  }
  if (s->type == KILN_TOKEN) return NULL;
  kiln_status st = kiln_elemental_check_type(s->type);
  if (st) return kiln_status_annotate(st, "in %s", instr->name);
  if (s->rank > KILN_KIR_MAX_RANK)
    return KILN_ERR_UNIMPLEMENTED("%s: rank %d", instr->name, s->rank);
  return NULL;
}

/* A tensor in memory: untiled, minor_to_major a permutation (E(n) element sizes are fine:
 * kiln stores sub-byte elements one per byte). Sets *permuted for a non-default order. */
static kiln_status check_memory_layout(const kiln_hlo_instruction_t *instr, const kiln_shape_t *s,
                                       bool *permuted) {
  *permuted = false;
  if (!s->has_layout || s->rank <= 1) return NULL;
  if (s->layout.num_tiles != 0) return KILN_ERR_UNIMPLEMENTED("%s: tiled layout", instr->name);
  if (s->layout.rank != s->rank || !s->layout.minor_to_major)
    return KILN_ERR_UNIMPLEMENTED("%s: layout rank differs from the shape's", instr->name);
  bool seen[KILN_KIR_MAX_RANK] = {false};
  for (int i = 0; i < s->rank; i++) {
    int64_t d = s->layout.minor_to_major[i];
    if (d < 0 || d >= s->rank || seen[d])
      return KILN_ERR_INVALID("%s: minor_to_major is not a permutation", instr->name);
    seen[d] = true;
    if (d != s->rank - 1 - i) *permuted = true;
  }
  return NULL;
}

/* ---- cache of emitted values, scoped by region ---- */

static int cache_find(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                      kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out) {
  for (size_t i = f->cache.len; i-- > 0;) {
    kiln_elemental_cache_t *c = &f->cache.data[i];
    if (c->instr != instr || c->nidx != nidx) continue;
    bool eq = true;
    for (int k = 0; k < nidx && eq; k++) eq = c->idx[k] == idx[k];
    if (!eq) continue;
    for (int k = 0; k < c->nvals; k++) out[k] = c->vals[k];
    return c->nvals;
  }
  return -1;
}

static void cache_put(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                      kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t *const *vals,
                      int nvals) {
  kiln_elemental_cache_t c = {0};
  c.instr = instr;
  c.nidx = nidx;
  for (int k = 0; k < nidx; k++) c.idx[k] = idx[k];
  c.nvals = nvals;
  for (int k = 0; k < nvals; k++) c.vals[k] = vals[k];
  kiln_vec_push(&f->cache, c);
}

void kiln_elemental_enter(kiln_elemental_fn_t *f, kiln_kir_region_t *r, size_t *mark) {
  kiln_kir_builder_enter(f->b, r);
  *mark = f->cache.len;
}

void kiln_elemental_exit(kiln_elemental_fn_t *f, size_t mark) {
  kiln_kir_builder_exit(f->b);
  f->cache.len = mark;
}

/* ---- indexing maps applied to values ---- */

/* Applies `map` to dims, syms and runtime values (rts become extra dims). Results go to
 * out (num_results values). */
static bool apply_map(kiln_elemental_fn_t *f, const kiln_indexing_map_t *map,
                      kiln_kir_value_t *const *dims, kiln_kir_value_t *const *syms,
                      kiln_kir_value_t *const *rts, kiln_kir_value_t **out) {
  size_t nd = kiln_indexing_map_num_dims(map), ns = kiln_indexing_map_num_syms(map);
  size_t nr = kiln_indexing_map_num_rts(map), nres = kiln_indexing_map_num_results(map);
  if (nres == 0) return true;
  kiln_affine_ctx_t *ctx = f->e->m->ctx;
  kiln_indexing_map_t *m2 = kiln_indexing_map_create(ctx, nd + nr, ns, 0);
  kiln_affine_expr_t *rep[KILN_KIR_MAX_RANK * 2];
  for (size_t i = 0; i < nd; i++) {
    kiln_interval_t b = map->vars[KILN_INDEXING_DIM].data[i].bounds;
    kiln_indexing_map_set_bounds(m2, KILN_INDEXING_DIM, i, b.lo, b.hi);
  }
  for (size_t i = 0; i < ns; i++) {
    kiln_interval_t b = map->vars[KILN_INDEXING_SYM].data[i].bounds;
    kiln_indexing_map_set_bounds(m2, KILN_INDEXING_SYM, i, b.lo, b.hi);
  }
  for (size_t i = 0; i < nr && i < KILN_KIR_MAX_RANK * 2; i++) {
    kiln_interval_t b = map->vars[KILN_INDEXING_RT].data[i].bounds;
    kiln_indexing_map_set_bounds(m2, KILN_INDEXING_DIM, nd + i, b.lo, b.hi);
    rep[i] = kiln_affine_dim(ctx, (int64_t)(nd + i));
  }
  for (size_t i = 0; i < nres; i++)
    kiln_indexing_map_add_result(
        m2, kiln_affine_replace(ctx, map->results.data[i], NULL, 0, NULL, 0, rep, nr));
  kiln_kir_value_t *dv[KILN_KIR_MAX_RANK * 3];
  for (size_t i = 0; i < nd; i++) dv[i] = dims[i];
  for (size_t i = 0; i < nr; i++) dv[nd + i] = rts[i];
  kiln_kir_op_t *op = kiln_kir_apply_indexing(f->b, m2, dv, nd + nr, syms, ns);
  kiln_indexing_map_free(m2);
  if (!op) return false;
  for (size_t i = 0; i < nres; i++) out[i] = kiln_kir_op_result(op, i);
  return true;
}

/* The predicate "the point satisfies every constraint of `map`", or NULL when there are
 * none (always true). *never is set for a map whose domain is known empty. */
static kiln_kir_value_t *range_check(kiln_elemental_fn_t *f, kiln_kir_value_t *v, int64_t lo,
                                     int64_t hi) {
  kiln_kir_value_t *t = NULL;
  if (lo != INT64_MIN) t = kiln_kir_cmp(f->b, KILN_KIR_CMP_GE, v, kiln_kir_const_index(f->b, lo));
  if (hi != INT64_MAX) {
    kiln_kir_value_t *h = kiln_kir_cmp(f->b, KILN_KIR_CMP_LE, v, kiln_kir_const_index(f->b, hi));
    t = t ? kiln_kir_binary(f->b, KILN_KIR_AND, t, h) : h;
  }
  return t;
}

/* `out_shape` (may be NULL) gives the range the dims take: a dim interval narrower than it
 * (the simplifier folds single-dim constraints into intervals) is checked too. */
static kiln_kir_value_t *in_domain(kiln_elemental_fn_t *f, const kiln_indexing_map_t *map,
                                   const kiln_shape_t *out_shape, kiln_kir_value_t *const *dims,
                                   kiln_kir_value_t *const *syms, kiln_kir_value_t *const *rts,
                                   bool *never) {
  *never = map->known_empty;
  if (*never) return NULL;
  kiln_affine_ctx_t *ctx = f->e->m->ctx;
  kiln_kir_value_t *cond = NULL;
  if (out_shape) {
    for (size_t i = 0; i < kiln_indexing_map_num_dims(map) && (int)i < out_shape->rank; i++) {
      kiln_interval_t b = map->vars[KILN_INDEXING_DIM].data[i].bounds;
      if (b.lo > b.hi) {
        *never = true;
        return NULL;
      }
      if (b.lo > 0 || b.hi < out_shape->dims[i] - 1) {
        kiln_kir_value_t *t = range_check(f, dims[i], b.lo > 0 ? b.lo : INT64_MIN,
                                          b.hi < out_shape->dims[i] - 1 ? b.hi : INT64_MAX);
        if (t) cond = cond ? kiln_kir_binary(f->b, KILN_KIR_AND, cond, t) : t;
      }
    }
  }
  for (size_t c = 0; c < map->constraints.len; c++) {
    const kiln_indexing_constraint_t *k = &map->constraints.data[c];
    kiln_indexing_map_t *one = kiln_indexing_map_clone(map);
    kiln_vec_clear(&one->results);
    kiln_vec_clear(&one->constraints);
    kiln_indexing_map_add_result(one, k->expr);
    kiln_kir_value_t *v = NULL;
    bool ok = apply_map(f, one, dims, syms, rts, &v);
    kiln_indexing_map_free(one);
    if (!ok) return NULL;
    kiln_kir_value_t *t = range_check(f, v, k->range.lo, k->range.hi);
    if (t) cond = cond ? kiln_kir_binary(f->b, KILN_KIR_AND, cond, t) : t;
  }
  (void)ctx;
  return cond;
}

/* Runtime values of `oi`'s runtime variables: each read from its source operand, converted
 * to index and clamped into the variable's interval. */
static bool runtime_values(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                           const kiln_hlo_operand_indexing_t *oi, kiln_kir_value_t *const *idx,
                           kiln_kir_value_t **rts) {
  for (int j = 0; j < oi->num_rts; j++) {
    const kiln_hlo_rt_source_t *src = &oi->rts[j];
    if (src->operand < 0 || src->operand >= instr->num_operands || !src->map)
      return kiln_elemental_fail(
          f, KILN_ERR_UNIMPLEMENTED("%s: runtime value without a source", instr->name));
    kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK];
    if (!apply_map(f, src->map, idx, NULL, NULL, sidx)) return false;
    kiln_kir_value_t *v[MAX_OUTS];
    const kiln_hlo_instruction_t *op = instr->operands[src->operand];
    int nv = kiln_elemental_emit(f, op, sidx, (int)kiln_indexing_map_num_results(src->map), v);
    if (nv < 1) return false;
    kiln_kir_value_t *x = kiln_kir_convert(f->b, v[0], kiln_kir_type_index(f->e->m));
    kiln_interval_t b = oi->map->vars[KILN_INDEXING_RT].data[j].bounds;
    if (b.hi != INT64_MAX)
      x = kiln_kir_binary(f->b, KILN_KIR_MIN, x, kiln_kir_const_index(f->b, b.hi));
    if (b.lo != INT64_MIN)
      x = kiln_kir_binary(f->b, KILN_KIR_MAX, x, kiln_kir_const_index(f->b, b.lo));
    rts[j] = x;
  }
  return true;
}

/* ---- data movement ---- */

static int emit_through_map(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                            int operand, const kiln_hlo_operand_indexing_t *oi,
                            kiln_kir_value_t *const *idx, kiln_kir_value_t **out) {
  kiln_kir_value_t *rts[KILN_KIR_MAX_RANK * 2];
  if (oi->num_rts > KILN_KIR_MAX_RANK * 2) {
    kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: too many runtime values", instr->name));
    return -1;
  }
  if (!runtime_values(f, instr, oi, idx, rts)) return -1;
  kiln_kir_value_t *oidx[KILN_KIR_MAX_RANK];
  if (!apply_map(f, oi->map, idx, NULL, rts, oidx)) return -1;
  return kiln_elemental_emit(f, instr->operands[operand], oidx,
                             (int)kiln_indexing_map_num_results(oi->map), out);
}

/* The KIR types of one element of `t`: one scalar, or the two parts of a complex value.
 * Returns the count. */
static int value_types(kiln_elemental_fn_t *f, kiln_elem_type_t t, const kiln_kir_type_t **out) {
  bool cplx = kiln_elem_type_is_complex(t);
  out[0] = kiln_kir_type_scalar(f->e->m, cplx ? kiln_elemental_part_type(t) : t);
  out[1] = out[0];
  return cplx ? 2 : 1;
}

/* Concatenate over the operands live[lo..hi) (those not empty along the dimension), whose
 * elements start at starts[lo..hi) of it: a binary search on the concatenated index,
 * `if (i < starts[mid]) lower half else upper half`, so an element costs log2(n) compares
 * (im2col concatenates one operand per window offset: 49 for a 7x7 window). Writes the
 * element's values (2 for complex) and returns their count. */
static int emit_concat_range(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                             const kiln_hlo_indexing_t *ix, const int *live, const int64_t *starts,
                             int lo, int hi, kiln_kir_value_t *const *idx, kiln_kir_value_t **out) {
  if (hi - lo == 1) return emit_through_map(f, instr, live[lo], &ix->operands[live[lo]], idx, out);
  int mid = lo + (hi - lo) / 2;
  kiln_kir_value_t *cond = range_check(f, idx[instr->dimensions.v[0]], INT64_MIN, starts[mid] - 1);
  const kiln_kir_type_t *rt[2];
  int nv = value_types(f, instr->shape->type, rt);
  kiln_kir_op_t *iff = cond ? kiln_kir_if(f->b, cond, rt, (size_t)nv) : NULL;
  if (!iff) return -1;
  for (int half = 0; half < 2; half++) {
    size_t mark;
    kiln_kir_value_t *v[MAX_OUTS];
    kiln_elemental_enter(f, kiln_kir_op_region(iff, (size_t)half), &mark);
    int n = half ? emit_concat_range(f, instr, ix, live, starts, mid, hi, idx, v)
                 : emit_concat_range(f, instr, ix, live, starts, lo, mid, idx, v);
    if (n == nv) kiln_kir_yield(f->b, v, (size_t)nv);
    kiln_elemental_exit(f, mark);
    if (n != nv) return -1;
  }
  for (int i = 0; i < nv; i++) out[i] = kiln_kir_op_result(iff, (size_t)i);
  return nv;
}

static int emit_concat(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                       const kiln_hlo_indexing_t *ix, kiln_kir_value_t *const *idx,
                       kiln_kir_value_t **out) {
  int n = ix->num_operands;
  int *live = kiln_try_malloc(sizeof(int) * (size_t)(n ? n : 1));
  int64_t *starts = kiln_try_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  int nlive = 0, r = -1;
  if (!live || !starts) {
    kiln_elemental_fail(f, KILN_ERR_EXHAUSTED("%s: out of memory", instr->name));
  } else if (instr->num_operands != n || !instr->has_dimensions || instr->dimensions.n != 1) {
    kiln_elemental_fail(f, KILN_ERR_INVALID("%s: concatenate needs one dimension", instr->name));
  } else {
    int64_t d = instr->dimensions.v[0], at = 0;
    for (int k = 0; k < n; k++) {
      int64_t size = instr->operands[k]->shape->dims[d];
      if (size > 0 && !ix->operands[k].map->known_empty) live[nlive] = k, starts[nlive++] = at;
      at += size;
    }
    if (nlive)
      r = emit_concat_range(f, instr, ix, live, starts, 0, nlive, idx, out);
    else
      r = emit_through_map(f, instr, n - 1, &ix->operands[n - 1], idx,
                           out); /* no element reaches it */
  }
  kiln_free(live);
  kiln_free(starts);
  return r;
}

static int emit_pad(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                    const kiln_hlo_indexing_t *ix, kiln_kir_value_t *const *idx,
                    kiln_kir_value_t **out) {
  kiln_kir_value_t *padv[MAX_OUTS];
  const kiln_kir_type_t *rt[2];
  int nv = value_types(f, instr->shape->type, rt);
  if (kiln_elemental_emit(f, instr->operands[1], NULL, 0, padv) != nv) return -1;
  bool never = false;
  kiln_kir_value_t *cond = in_domain(f, ix->operands[0].map, instr->shape, idx, NULL, NULL, &never);
  if (f->err) return -1;
  if (never) {
    for (int i = 0; i < nv; i++) out[i] = padv[i];
    return nv;
  }
  if (!cond) return emit_through_map(f, instr, 0, &ix->operands[0], idx, out);
  kiln_kir_op_t *iff = kiln_kir_if(f->b, cond, rt, (size_t)nv);
  if (!iff) return -1;
  size_t mark;
  kiln_kir_value_t *v[MAX_OUTS];
  kiln_elemental_enter(f, kiln_kir_op_region(iff, 0), &mark);
  int n = emit_through_map(f, instr, 0, &ix->operands[0], idx, v);
  if (n == nv) kiln_kir_yield(f->b, v, (size_t)nv);
  kiln_elemental_exit(f, mark);
  if (n != nv) return -1;
  kiln_elemental_enter(f, kiln_kir_op_region(iff, 1), &mark);
  kiln_kir_yield(f->b, padv, (size_t)nv);
  kiln_elemental_exit(f, mark);
  for (int i = 0; i < nv; i++) out[i] = kiln_kir_op_result(iff, (size_t)i);
  return nv;
}

/* dynamic-update-slice, elementally (XLA's loop emitter for a DUS that cannot be done in
 * place): the update's element where the output index falls in the window at the clamped
 * start indices, the operand's elsewhere; only the chosen side is read. */
static int emit_dus(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                    const kiln_hlo_indexing_t *ix, kiln_kir_value_t *const *idx,
                    kiln_kir_value_t **out) {
  const kiln_hlo_operand_indexing_t *ui = &ix->operands[1];
  kiln_kir_value_t *rts[KILN_KIR_MAX_RANK * 2];
  if (ui->num_rts > KILN_KIR_MAX_RANK * 2) {
    kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: too many runtime values", instr->name));
    return -1;
  }
  if (!runtime_values(f, instr, ui, idx, rts)) return -1;
  bool never = false;
  kiln_kir_value_t *cond = in_domain(f, ui->map, instr->shape, idx, NULL, rts, &never);
  if (f->err) return -1;
  int rank = instr->shape->rank;
  if (never) return kiln_elemental_emit(f, instr->operands[0], idx, rank, out);
  kiln_kir_value_t *uidx[KILN_KIR_MAX_RANK];
  if (!cond) {
    if (!apply_map(f, ui->map, idx, NULL, rts, uidx)) return -1;
    return kiln_elemental_emit(f, instr->operands[1], uidx, rank, out);
  }
  const kiln_kir_type_t *rt[2];
  int nv = value_types(f, instr->shape->type, rt);
  kiln_kir_op_t *iff = kiln_kir_if(f->b, cond, rt, (size_t)nv);
  if (!iff) return -1;
  size_t mark;
  kiln_kir_value_t *v[MAX_OUTS];
  for (int side = 0; side < 2; side++) {
    kiln_elemental_enter(f, kiln_kir_op_region(iff, (size_t)side), &mark);
    int n = -1;
    if (side == 1)
      n = kiln_elemental_emit(f, instr->operands[0], idx, rank, v);
    else if (apply_map(f, ui->map, idx, NULL, rts, uidx))
      n = kiln_elemental_emit(f, instr->operands[1], uidx, rank, v);
    if (n == nv) kiln_kir_yield(f->b, v, (size_t)nv);
    kiln_elemental_exit(f, mark);
    if (n != nv) {
      if (n >= 0)
        kiln_elemental_fail(f, KILN_ERR_INTERNAL("%s: %d values, want %d", instr->name, n, nv));
      return -1;
    }
  }
  for (int i = 0; i < nv; i++) out[i] = kiln_kir_op_result(iff, (size_t)i);
  return nv;
}

/* ---- reductions: reduce, reduce-window, dot ---- */

typedef struct red_ctx {
  const kiln_hlo_instruction_t *instr;
  const kiln_hlo_indexing_t *ix;
  kiln_kir_value_t *const *idx;
  int n;    /* accumulator values (a complex one is two: re, im) */
  int nout; /* reduce: outputs (operands / 2) */
  kiln_kir_value_t *syms[KILN_KIR_MAX_RANK * 2];
  const kiln_indexing_map_t *map; /* the symbol domain (operand 0's map) */
  bool dot;
  kiln_elem_type_t acc_type;
  int order[KILN_KIR_MAX_RANK * 2]; /* loop level -> symbol (outermost first) */
} red_ctx_t;

/* Operand values `v` (cnt: 1 real, 2 complex) converted as XLA's dot/convolution do: first
 * to the result type, then to the accumulation type (both parts for a complex result). */
static void dot_operand(kiln_elemental_fn_t *f, const red_ctx_t *r, kiln_kir_value_t *const *v,
                        int cnt, kiln_kir_value_t **out) {
  kiln_elem_type_t rt = r->instr->shape->type;
  kiln_kir_module_t *m = f->e->m;
  if (kiln_elem_type_is_complex(rt)) {
    const kiln_kir_type_t *pt = kiln_kir_type_scalar(m, kiln_elemental_part_type(rt));
    out[0] = kiln_kir_convert(f->b, v[0], pt);
    out[1] = cnt > 1 ? kiln_kir_convert(f->b, v[1], pt)
                     : kiln_kir_const_float(f->b, kiln_elemental_part_type(rt), 0.0);
    return;
  }
  const kiln_kir_type_t *res_t = kiln_kir_type_scalar(m, rt);
  const kiln_kir_type_t *acc_t = kiln_kir_type_scalar(m, r->acc_type);
  out[0] = kiln_kir_convert(f->b, kiln_kir_convert(f->b, v[0], res_t), acc_t);
}

/* One step of a dot or convolution: accs + lhs * rhs at the current symbols (pred: or of
 * ands; complex: (re, im) accumulators). */
static bool dot_body(kiln_elemental_fn_t *f, red_ctx_t *r, kiln_kir_value_t **accs,
                     kiln_kir_value_t **out) {
  const kiln_hlo_instruction_t *instr = r->instr;
  kiln_kir_value_t *x[2] = {NULL, NULL}, *y[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    kiln_kir_value_t *oidx[KILN_KIR_MAX_RANK], *v[MAX_OUTS];
    const kiln_indexing_map_t *m = r->ix->operands[k].map;
    if (!apply_map(f, m, r->idx, r->syms, NULL, oidx)) return false;
    int cnt =
        kiln_elemental_emit(f, instr->operands[k], oidx, (int)kiln_indexing_map_num_results(m), v);
    if (cnt < 1) return false;
    dot_operand(f, r, v, cnt, k ? y : x);
  }
  kiln_kir_builder_t *b = f->b;
  if (r->n == 2) {
    kiln_kir_value_t *re =
        kiln_kir_binary(b, KILN_KIR_SUB, kiln_kir_binary(b, KILN_KIR_MUL, x[0], y[0]),
                        kiln_kir_binary(b, KILN_KIR_MUL, x[1], y[1]));
    kiln_kir_value_t *im =
        kiln_kir_binary(b, KILN_KIR_ADD, kiln_kir_binary(b, KILN_KIR_MUL, x[0], y[1]),
                        kiln_kir_binary(b, KILN_KIR_MUL, x[1], y[0]));
    out[0] = kiln_kir_binary(b, KILN_KIR_ADD, accs[0], re);
    out[1] = kiln_kir_binary(b, KILN_KIR_ADD, accs[1], im);
    return out[0] && out[1];
  }
  if (r->acc_type == KILN_PRED)
    out[0] = kiln_kir_binary(b, KILN_KIR_OR, accs[0], kiln_kir_binary(b, KILN_KIR_AND, x[0], y[0]));
  else
    out[0] =
        kiln_kir_binary(b, KILN_KIR_ADD, accs[0], kiln_kir_binary(b, KILN_KIR_MUL, x[0], y[0]));
  return out[0] != NULL;
}

/* The body at one point of the symbol box: new accumulator values. */
static bool red_body(kiln_elemental_fn_t *f, red_ctx_t *r, kiln_kir_value_t **accs,
                     kiln_kir_value_t **out) {
  const kiln_hlo_instruction_t *instr = r->instr;
  if (r->dot) return dot_body(f, r, accs, out);
  /* the reducer's arguments, flat: accumulators, then the operands' values */
  kiln_kir_value_t *args[MAX_OUTS * 2];
  int na = r->n;
  for (int k = 0; k < r->n; k++) args[k] = accs[k];
  for (int k = 0; k < r->nout; k++) {
    kiln_kir_value_t *oidx[KILN_KIR_MAX_RANK], *v[MAX_OUTS];
    const kiln_indexing_map_t *m = r->ix->operands[k].map;
    if (!apply_map(f, m, r->idx, r->syms, NULL, oidx)) return false;
    int cnt =
        kiln_elemental_emit(f, instr->operands[k], oidx, (int)kiln_indexing_map_num_results(m), v);
    if (cnt < 1 || na + cnt > MAX_OUTS * 2)
      return cnt < 1 ? false
                     : kiln_elemental_fail(
                           f, KILN_ERR_UNIMPLEMENTED("%s: too many values", instr->name));
    for (int j = 0; j < cnt; j++) args[na++] = v[j];
  }
  const kiln_hlo_computation_t *reducer = kiln_hlo_instruction_called(instr, "to_apply");
  if (!reducer)
    return kiln_elemental_fail(f, KILN_ERR_INVALID("%s: no to_apply computation", instr->name));
  return kiln_elemental_emit_scalar_computation(f, reducer, args, na, out) == r->n;
}

/* Loops over symbol `level` and deeper; accs in, new accs out. */
static bool red_loops(kiln_elemental_fn_t *f, red_ctx_t *r, size_t level, kiln_kir_value_t **accs,
                      kiln_kir_value_t **out) {
  size_t ns = kiln_indexing_map_num_syms(r->map);
  if (level == ns) {
    bool never = false;
    kiln_kir_value_t *cond =
        in_domain(f, r->map, output_shape(r->instr, 0), r->idx, r->syms, NULL, &never);
    if (f->err) return false;
    if (never) {
      for (int k = 0; k < r->n; k++) out[k] = accs[k];
      return true;
    }
    if (!cond) return red_body(f, r, accs, out);
    const kiln_kir_type_t *types[MAX_OUTS];
    for (int k = 0; k < r->n; k++) types[k] = accs[k]->type;
    kiln_kir_op_t *iff = kiln_kir_if(f->b, cond, types, (size_t)r->n);
    if (!iff) return false;
    size_t mark;
    kiln_kir_value_t *nv[MAX_OUTS];
    kiln_elemental_enter(f, kiln_kir_op_region(iff, 0), &mark);
    bool ok = red_body(f, r, accs, nv);
    if (ok) kiln_kir_yield(f->b, nv, (size_t)r->n);
    kiln_elemental_exit(f, mark);
    if (!ok) return false;
    kiln_elemental_enter(f, kiln_kir_op_region(iff, 1), &mark);
    kiln_kir_yield(f->b, accs, (size_t)r->n);
    kiln_elemental_exit(f, mark);
    for (int k = 0; k < r->n; k++) out[k] = kiln_kir_op_result(iff, (size_t)k);
    return true;
  }
  int sym = r->order[level];
  kiln_interval_t b = r->map->vars[KILN_INDEXING_SYM].data[sym].bounds;
  if (b.lo == INT64_MIN || b.hi == INT64_MAX)
    return kiln_elemental_fail(f,
                               KILN_ERR_UNIMPLEMENTED("%s: unbounded loop symbol", r->instr->name));
  kiln_kir_op_t *loop =
      kiln_kir_for(f->b, kiln_kir_const_index(f->b, b.lo), kiln_kir_const_index(f->b, b.hi + 1),
                   kiln_kir_const_index(f->b, 1), accs, (size_t)r->n);
  if (!loop) return false;
  size_t mark;
  kiln_elemental_enter(f, kiln_kir_op_region(loop, 0), &mark);
  r->syms[sym] = kiln_kir_region_arg(kiln_kir_op_region(loop, 0), 0);
  kiln_kir_value_t *inner[MAX_OUTS], *nv[MAX_OUTS];
  for (int k = 0; k < r->n; k++)
    inner[k] = kiln_kir_region_arg(kiln_kir_op_region(loop, 0), (size_t)k + 1);
  bool ok = red_loops(f, r, level + 1, inner, nv);
  if (ok) kiln_kir_yield(f->b, nv, (size_t)r->n);
  kiln_elemental_exit(f, mark);
  if (!ok) return false;
  for (int k = 0; k < r->n; k++) out[k] = kiln_kir_op_result(loop, (size_t)k);
  return true;
}

static int emit_reduction(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                          const kiln_hlo_indexing_t *ix, kiln_kir_value_t *const *idx,
                          kiln_kir_value_t **out) {
  red_ctx_t r = {0};
  r.instr = instr;
  r.ix = ix;
  r.idx = idx;
  r.dot = instr->opcode == KILN_OP_DOT || instr->opcode == KILN_OP_CONVOLUTION;
  kiln_kir_value_t *accs[MAX_OUTS];
  if (r.dot) {
    /* Accumulate as the evaluator does: f32 for narrow floats, f64 for f64, the result type
     * for integers and pred, (re, im) parts for complex results. */
    kiln_elem_type_t rt = instr->shape->type;
    r.n = kiln_elemental_vals_per(rt);
    r.acc_type = kiln_elem_type_is_complex(rt) ? kiln_elemental_part_type(rt)
                 : kiln_elem_type_is_float(rt) ? (rt == KILN_F64 ? KILN_F64 : KILN_F32)
                                               : rt;
    if (ix->num_operands != 2 || !ix->operands[0].map || !ix->operands[1].map ||
        kiln_indexing_map_num_syms(ix->operands[0].map) !=
            kiln_indexing_map_num_syms(ix->operands[1].map)) {
      kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: %s indexing", instr->name,
                                                    kiln_hlo_opcode_name(instr->opcode)));
      return -1;
    }
    kiln_kir_const_t zero = {0};
    for (int k = 0; k < r.n; k++)
      accs[k] = kiln_kir_const(f->b, kiln_kir_type_scalar(f->e->m, r.acc_type), zero);
  } else {
    r.nout = instr->num_operands / 2;
    if (r.nout < 1 || r.nout > MAX_OUTS) {
      kiln_elemental_fail(f,
                          KILN_ERR_UNIMPLEMENTED("%s: %d reduced operands", instr->name, r.nout));
      return -1;
    }
    /* accumulators flat: (re, im) for a complex init value */
    r.n = 0;
    for (int k = 0; k < r.nout; k++) {
      kiln_kir_value_t *v[MAX_OUTS];
      int cnt = kiln_elemental_emit(f, instr->operands[r.nout + k], NULL, 0, v);
      if (cnt < 1) return -1;
      if (r.n + cnt > MAX_OUTS) {
        kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: too many values", instr->name));
        return -1;
      }
      for (int j = 0; j < cnt; j++) accs[r.n++] = v[j];
    }
  }
  r.map = ix->operands[0].map;
  if (!r.map || kiln_indexing_map_num_rts(r.map) > 0 ||
      kiln_indexing_map_num_syms(r.map) > KILN_KIR_MAX_RANK * 2) {
    kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: reduction indexing", instr->name));
    return -1;
  }
  /* Summation order as the evaluator's: symbols in order, except that a convolution walks
   * the window (symbols 1..) outside the input features (symbol 0). */
  int ns = (int)kiln_indexing_map_num_syms(r.map);
  bool conv = instr->opcode == KILN_OP_CONVOLUTION && ns > 0;
  for (int l = 0; l < ns; l++) r.order[l] = conv ? (l + 1) % ns : l;
  kiln_kir_value_t *res[MAX_OUTS];
  if (!red_loops(f, &r, 0, accs, res)) return -1;
  if (r.dot && r.n == 1)
    res[0] = kiln_kir_convert(f->b, res[0], kiln_kir_type_scalar(f->e->m, instr->shape->type));
  for (int k = 0; k < r.n; k++) out[k] = res[k];
  return r.n;
}

/* ---- the recursive emitter ---- */

static int emit_leaf(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                     kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out) {
  const kiln_elemental_t *e = f->e;
  for (int t = 0; t < e->num_tensors; t++) {
    if (e->tensors[t] != instr) continue;
    if (nidx != instr->shape->rank) {
      kiln_elemental_fail(f, KILN_ERR_INTERNAL("%s read with %d indices", instr->name, nidx));
      return -1;
    }
    /* Tensors are stored in their layout's physical order. */
    kiln_kir_value_t *pidx[KILN_KIR_MAX_RANK];
    kiln_elemental_physical_index(instr->shape, idx, pidx);
    idx = pidx;
    if (kiln_elem_type_is_complex(instr->shape->type)) {
      /* Complex tensors are real tensors with a trailing (re, im) dimension. */
      kiln_kir_value_t *cidx[KILN_KIR_MAX_RANK + 1];
      for (int i = 0; i < nidx; i++) cidx[i] = idx[i];
      for (int part = 0; part < 2; part++) {
        cidx[nidx] = kiln_kir_const_index(f->b, part);
        out[part] = kiln_kir_extract(f->b, f->tensors[t], cidx, (size_t)nidx + 1);
        if (!out[part]) return -1;
      }
      return 2;
    }
    out[0] = kiln_kir_extract(f->b, f->tensors[t], idx, (size_t)nidx);
    return out[0] ? 1 : -1;
  }
  kiln_elemental_fail(f, KILN_ERR_INTERNAL("%s is not a tensor of the fusion", instr->name));
  return -1;
}

static int emit_call(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                     const kiln_partition_subgraph_t *sg, kiln_kir_value_t *const *idx, int nidx,
                     kiln_kir_value_t **out) {
  int first = kiln_elemental_root_result(f->e, sg->id, instr);
  if (first < 0 || nidx != sg->rank) {
    kiln_elemental_fail(f, KILN_ERR_INTERNAL("%s: not a root of %s (or rank %d != %d)", instr->name,
                                             sg->name, nidx, sg->rank));
    return -1;
  }
  kiln_kir_op_t *call = kiln_elemental_call(f->e, f->b, sg->id, f->tensors, idx);
  if (!call) {
    kiln_elemental_fail(
        f, KILN_ERR_INTERNAL("%s: function %s was not emitted (its emitter computes %s itself)",
                             f->e->comp->name, sg->name, instr->name));
    return -1;
  }
  int n = kiln_elemental_num_values(instr);
  for (int k = 0; k < n; k++) out[k] = kiln_kir_op_result(call, (size_t)(first + k));
  return n;
}

int kiln_elemental_emit(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                        kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out) {
  if (f->err) return -1;
  int n = cache_find(f, instr, idx, nidx, out);
  if (n >= 0) return n;
  if (kiln_partition_is_tensor_leaf(instr)) {
    n = emit_leaf(f, instr, idx, nidx, out);
  } else {
    const kiln_partition_subgraph_t *sg = kiln_partition_subgraph_of(f->e->part, instr);
    if (!sg) {
      kiln_elemental_fail(
          f, KILN_ERR_UNIMPLEMENTED("%s (%s) is not emitted by any function", instr->name,
                                    kiln_hlo_opcode_name(instr->opcode)));
      return -1;
    }
    if (sg->id != f->sg)
      n = emit_call(f, instr, sg, idx, nidx, out);
    else
      n = kiln_elemental_emit_instr(f, instr, idx, nidx, out);
  }
  if (n < 0) {
    if (!f->err) kiln_elemental_fail(f, kiln_kir_builder_take_status(f->b));
    if (!f->err) f->err = KILN_ERR_INTERNAL("emitting %s failed", instr->name);
    return -1;
  }
  for (int k = 0; k < n; k++)
    if (!out[k]) {
      kiln_status bs = kiln_kir_builder_take_status(f->b);
      kiln_elemental_fail(f, bs ? kiln_status_annotate(bs, "while emitting %s", instr->name)
                                : KILN_ERR_INTERNAL("emitting %s gave no value", instr->name));
      return -1;
    }
  cache_put(f, instr, idx, nidx, out, n);
  return n;
}

/* Emits an instruction of the current function (not a tensor, not in another function). */
int kiln_elemental_emit_instr(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                              kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out) {
  kiln_hlo_opcode_t op = instr->opcode;
  if (op == KILN_OP_CONSTANT) {
    if (kiln_elem_type_is_complex(instr->shape->type)) {
      if (!instr->literal || instr->literal->unknown) {
        kiln_elemental_fail(f, kiln_hlo_elided_constant_error(instr));
        return -1;
      }
      double re = 0, im = 0;
      kiln_literal_get_c128(instr->literal, 0, &re, &im);
      kiln_elem_type_t pt = kiln_elemental_part_type(instr->shape->type);
      out[0] = kiln_kir_const_float(f->b, pt, re);
      out[1] = kiln_kir_const_float(f->b, pt, im);
      return out[0] && out[1] ? 2 : -1;
    }
    out[0] = kiln_elemental_constant(f, instr->literal, 0);
    return out[0] ? 1 : -1;
  }
  if (op == KILN_OP_IOTA) {
    int64_t d = instr->iota_dimension;
    if (d < 0 || d >= nidx) {
      kiln_elemental_fail(f, KILN_ERR_INVALID("%s: iota dimension out of range", instr->name));
      return -1;
    }
    out[0] = kiln_kir_convert(f->b, idx[d], kiln_kir_type_scalar(f->e->m, instr->shape->type));
    return out[0] ? 1 : -1;
  }
  if (op == KILN_OP_GET_TUPLE_ELEMENT) {
    kiln_kir_value_t *v[MAX_OUTS];
    if (kiln_elemental_num_values(instr->operands[0]) !=
        kiln_elemental_num_outputs(instr->operands[0])) {
      kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: complex tuple elements", instr->name));
      return -1;
    }
    int n = kiln_elemental_emit(f, instr->operands[0], idx, nidx, v);
    if (n < 0) return -1;
    if (instr->tuple_index < 0 || instr->tuple_index >= n) {
      kiln_elemental_fail(f, KILN_ERR_INVALID("%s: tuple index out of range", instr->name));
      return -1;
    }
    out[0] = v[instr->tuple_index];
    return 1;
  }
  if (op == KILN_OP_BITCAST_CONVERT && kiln_shape_is_array(instr->operands[0]->shape) &&
      (instr->operands[0]->shape->rank != instr->shape->rank ||
       kiln_elem_type_is_complex(instr->shape->type) ||
       kiln_elem_type_is_complex(instr->operands[0]->shape->type))) {
    return kiln_elemental_bitcast_convert(f, instr, idx, nidx, out);
  }
  if (kiln_hlo_opcode_is_elementwise(op) || op == KILN_OP_COPY || op == KILN_OP_MAP ||
      op == KILN_OP_BITCAST_CONVERT) {
    kiln_kir_value_t *args[8], *cargs[8][2];
    int cnt[8];
    bool cplx = kiln_elem_type_is_complex(instr->shape->type);
    if (instr->num_operands > 8) {
      kiln_elemental_fail(
          f, KILN_ERR_UNIMPLEMENTED("%s: %d operands", instr->name, instr->num_operands));
      return -1;
    }
    for (int k = 0; k < instr->num_operands; k++) {
      kiln_kir_value_t *v[MAX_OUTS];
      const kiln_hlo_instruction_t *o = instr->operands[k];
      bool scalar = kiln_shape_is_array(o->shape) && o->shape->rank == 0 && nidx > 0;
      cnt[k] = kiln_elemental_emit(f, o, scalar ? NULL : idx, scalar ? 0 : nidx, v);
      if (cnt[k] < 1) return -1;
      args[k] = v[0];
      cargs[k][0] = v[0];
      cargs[k][1] = cnt[k] > 1 ? v[1] : NULL;
      if (cnt[k] > 1) cplx = true;
    }
    if (cplx) return kiln_elemental_complex_op(f, instr, cargs, cnt, instr->num_operands, out);
    out[0] = kiln_elemental_scalar_op(f, instr, args, instr->num_operands);
    return out[0] ? 1 : -1;
  }
  switch (op) {
    case KILN_OP_BROADCAST:
    case KILN_OP_TRANSPOSE:
    case KILN_OP_RESHAPE:
    case KILN_OP_BITCAST:
    case KILN_OP_SLICE:
    case KILN_OP_REVERSE:
    case KILN_OP_DYNAMIC_SLICE:
    case KILN_OP_GATHER:
    case KILN_OP_PAD:
    case KILN_OP_CONCATENATE:
    case KILN_OP_REDUCE:
    case KILN_OP_REDUCE_WINDOW:
    case KILN_OP_DOT:
    case KILN_OP_CONVOLUTION:
    case KILN_OP_DYNAMIC_UPDATE_SLICE:
      break;
    default:
      kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("elemental emitter: opcode %s (%s)",
                                                    kiln_hlo_opcode_name(op), instr->name));
      return -1;
  }
  kiln_hlo_indexing_t ix = {0};
  kiln_status s = kiln_hlo_indexing_output_to_input(f->e->m->ctx, instr, 0, &ix);
  if (s) {
    kiln_elemental_fail(f, s);
    return -1;
  }
  int n = -1;
  for (int k = 0; k < ix.num_operands; k++)
    if (!ix.operands[k].map) {
      kiln_elemental_fail(f,
                          KILN_ERR_UNIMPLEMENTED("%s: no indexing for operand %d", instr->name, k));
      goto done;
    }
  if (op == KILN_OP_PAD) {
    n = emit_pad(f, instr, &ix, idx, out);
  } else if (op == KILN_OP_DYNAMIC_UPDATE_SLICE) {
    n = emit_dus(f, instr, &ix, idx, out);
  } else if (op == KILN_OP_CONCATENATE) {
    n = emit_concat(f, instr, &ix, idx, out);
  } else if (op == KILN_OP_REDUCE || op == KILN_OP_REDUCE_WINDOW || op == KILN_OP_DOT ||
             op == KILN_OP_CONVOLUTION) {
    n = emit_reduction(f, instr, &ix, idx, out);
  } else {
    if (ix.num_operands < 1 || kiln_indexing_map_num_syms(ix.operands[0].map) > 0) {
      kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: indexing with loop symbols", instr->name));
      goto done;
    }
    n = emit_through_map(f, instr, 0, &ix.operands[0], idx, out);
    if (n > 0) n = kiln_elemental_num_values(instr);
    /* A bitcast may also reinterpret the element type (same width). */
    if (n == 1 && op == KILN_OP_BITCAST && out[0]->type->elem != instr->shape->type) {
      const kiln_kir_type_t *rt = kiln_kir_type_scalar(f->e->m, instr->shape->type);
      if (kiln_kir_type_bits(out[0]->type) != kiln_kir_type_bits(rt)) {
        kiln_elemental_fail(
            f, KILN_ERR_UNIMPLEMENTED("%s: bitcast between element widths", instr->name));
        n = -1;
      } else {
        out[0] = kiln_kir_bitcast(f->b, out[0], rt);
      }
    }
  }
done:
  kiln_hlo_indexing_free(&ix);
  return n;
}

/* ---- functions ---- */

static kiln_status collect_tensors(kiln_elemental_t *e) {
  const kiln_hlo_computation_t *c = e->comp;
  int n = c->num_parameters;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (in->opcode == KILN_OP_CONSTANT && kiln_partition_is_tensor_leaf(in)) n++;
  }
  e->tensors = kiln_calloc((size_t)n + 1, sizeof(*e->tensors));
  e->tensor_types = kiln_calloc((size_t)n + 1, sizeof(*e->tensor_types));
  int k = 0;
  for (int i = 0; i < c->num_parameters; i++) e->tensors[k++] = c->parameters[i];
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (in->opcode == KILN_OP_CONSTANT && kiln_partition_is_tensor_leaf(in)) {
      if (!in->literal || in->literal->unknown) return kiln_hlo_elided_constant_error(in);
      e->tensors[k++] = in;
    }
  }
  e->num_tensors = k;
  for (int i = 0; i < k; i++) {
    const kiln_shape_t *s = e->tensors[i] ? e->tensors[i]->shape : NULL;
    if (!s || !kiln_shape_is_array(s) || kiln_shape_is_tuple(s))
      return KILN_ERR_UNIMPLEMENTED("parameter %d of %s is not an array", i, c->name);
    bool permuted = false;
    KILN_RETURN_IF_ERROR_PLAIN(check_memory_layout(e->tensors[i], s, &permuted));
    if (permuted && !e->permuted_tensor) e->permuted_tensor = e->tensors[i];
    e->tensor_types[i] = kiln_elemental_tensor_type(e->m, s);
  }
  return NULL;
}

/* Outputs in a non-default order are written by emitters that ask for it (see
 * kiln_elemental_t.physical_layouts); remember the first one. */
static kiln_status check_outputs(kiln_elemental_t *e) {
  for (int o = 0; o < e->part->num_outputs; o++) {
    const kiln_partition_output_t *po = &e->part->outputs[o];
    const kiln_shape_t *s = po->instr->shape;
    if (kiln_shape_is_tuple(s)) {
      if (po->output_index < 0 || po->output_index >= s->num_elements) continue;
      s = s->elements[po->output_index];
    }
    bool permuted = false;
    KILN_RETURN_IF_ERROR_PLAIN(check_memory_layout(po->instr, s, &permuted));
    if (permuted && !e->permuted_output) e->permuted_output = po->instr;
  }
  return NULL;
}

kiln_status kiln_elemental_init(kiln_elemental_t *e, kiln_kir_module_t *m,
                                const kiln_hlo_computation_t *c, const kiln_partition_t *p) {
  memset(e, 0, sizeof(*e));
  e->m = m;
  e->comp = c;
  e->part = p;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    KILN_RETURN_IF_ERROR(check_shape(in, in->shape), "in fusion %s", c->name);
  }
  KILN_RETURN_IF_ERROR(collect_tensors(e), "in fusion %s", c->name);
  KILN_RETURN_IF_ERROR(check_outputs(e), "in fusion %s", c->name);
  e->funcs = kiln_calloc((size_t)p->num_subgraphs + 1, sizeof(*e->funcs));
  return NULL;
}

void kiln_elemental_free(kiln_elemental_t *e) {
  if (!e) return;
  kiln_free(e->tensors);
  kiln_free(e->tensor_types);
  kiln_free(e->funcs);
  memset(e, 0, sizeof(*e));
}

const kiln_hlo_instruction_t *kiln_elemental_tensor_instr(const kiln_elemental_t *e, int i) {
  return i >= 0 && i < e->num_tensors ? e->tensors[i] : NULL;
}

int kiln_elemental_root_result(const kiln_elemental_t *e, int sg,
                               const kiln_hlo_instruction_t *instr) {
  if (sg < 0 || sg >= e->part->num_subgraphs) return -1;
  const kiln_partition_subgraph_t *g = &e->part->subgraphs[sg];
  int off = 0;
  for (int r = 0; r < g->num_roots; r++) {
    if (g->roots[r] == instr) return off;
    off += kiln_elemental_num_values(g->roots[r]);
  }
  return -1;
}

static kiln_status declare(kiln_elemental_t *e, int sgi) {
  const kiln_partition_subgraph_t *sg = &e->part->subgraphs[sgi];
  size_t np = (size_t)e->num_tensors + (size_t)sg->rank;
  const kiln_kir_type_t **pt = kiln_calloc(np + 1, sizeof(*pt));
  const char **pn = kiln_calloc(np + 1, sizeof(*pn));
  char **names = kiln_calloc(np + 1, sizeof(*names));
  for (int i = 0; i < e->num_tensors; i++) {
    pt[i] = e->tensor_types[i];
    names[i] = kiln_strdup(e->tensors[i]->name);
    for (char *q = names[i]; *q; q++)
      if (*q == '.' || *q == '-') *q = '_';
    pn[i] = names[i];
  }
  for (int i = 0; i < sg->rank; i++) {
    pt[e->num_tensors + i] = kiln_kir_type_index(e->m);
    char buf[16];
    snprintf(buf, sizeof(buf), "i%d", i);
    names[e->num_tensors + i] = kiln_strdup(buf);
    pn[e->num_tensors + i] = names[e->num_tensors + i];
  }
  int nres = 0;
  for (int r = 0; r < sg->num_roots; r++) nres += kiln_elemental_num_values(sg->roots[r]);
  const kiln_kir_type_t **rt = kiln_calloc((size_t)nres + 1, sizeof(*rt));
  int k = 0;
  for (int r = 0; r < sg->num_roots; r++)
    for (int o = 0; o < kiln_elemental_num_outputs(sg->roots[r]); o++) {
      kiln_elem_type_t t = kiln_elemental_output_type(sg->roots[r], o);
      for (int part = 0; part < kiln_elemental_vals_per(t); part++)
        rt[k++] = kiln_kir_type_scalar(e->m, kiln_elemental_part_type(t));
    }
  e->funcs[sgi] =
      kiln_kir_func_create(e->m, sg->name, KILN_KIR_FUNC_SUBGRAPH, pt, pn, np, rt, (size_t)nres);
  for (size_t i = 0; i < np; i++) kiln_free(names[i]);
  kiln_free(names);
  kiln_free(pn);
  kiln_free(pt);
  kiln_free(rt);
  if (!e->funcs[sgi]) return KILN_ERR_INTERNAL("could not create function %s", sg->name);
  return NULL;
}

static kiln_status emit_body(kiln_elemental_t *e, int sgi) {
  const kiln_partition_subgraph_t *sg = &e->part->subgraphs[sgi];
  kiln_kir_func_t *fn = e->funcs[sgi];
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, e->m, kiln_kir_func_body(fn));
  kiln_elemental_fn_t f = {0};
  f.e = e;
  f.b = &b;
  f.sg = sgi;
  f.tensors = kiln_calloc((size_t)e->num_tensors + 1, sizeof(*f.tensors));
  for (int i = 0; i < e->num_tensors; i++) f.tensors[i] = kiln_kir_func_param(fn, (size_t)i);
  kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
  for (int i = 0; i < sg->rank; i++) idx[i] = kiln_kir_func_param(fn, (size_t)(e->num_tensors + i));
  KILN_VEC(kiln_kir_value_t *) results = {0};
  for (int r = 0; r < sg->num_roots && !f.err; r++) {
    kiln_kir_value_t *v[MAX_OUTS];
    const kiln_hlo_instruction_t *root = sg->roots[r];
    const kiln_shape_t *s = output_shape(root, 0);
    int n = kiln_elemental_emit(&f, root, idx, s ? s->rank : sg->rank, v);
    for (int k = 0; k < n; k++) kiln_vec_push(&results, v[k]);
  }
  if (!f.err) kiln_kir_return(&b, results.data, results.len);
  kiln_status s = f.err;
  if (!s) s = kiln_kir_builder_take_status(&b);
  kiln_kir_builder_finish(&b);
  kiln_vec_free(&results);
  kiln_vec_free(&f.cache);
  kiln_free(f.tensors);
  if (s) return kiln_status_annotate(s, "while emitting function %s", sg->name);
  return NULL;
}

kiln_status kiln_elemental_emit_functions(kiln_elemental_t *e) {
  if (!e->physical_layouts && (e->permuted_tensor || e->permuted_output))
    return KILN_ERR_UNIMPLEMENTED(
        "%s: non-default layout of an %s (this emitter indexes memory in logical order); in "
        "fusion %s",
        e->permuted_output ? e->permuted_output->name : e->permuted_tensor->name,
        e->permuted_output ? "output" : "input", e->comp->name);
  int n = e->part->num_subgraphs;
  bool *skip = kiln_calloc((size_t)n + 1, sizeof(*skip));
  for (int i = 0; i < n && e->caller_emits; i++) {
    const kiln_partition_subgraph_t *sg = &e->part->subgraphs[i];
    skip[i] = sg->num_roots > 0;
    for (int r = 0; r < sg->num_roots; r++)
      skip[i] &= e->caller_emits(e->caller_user, sg->roots[r]);
  }
  /* ... unless an emitted function reads one of their roots. */
  for (bool changed = e->caller_emits != NULL; changed;) {
    changed = false;
    for (int i = 0; i < n; i++) {
      const kiln_partition_subgraph_t *sg = &e->part->subgraphs[i];
      for (int k = 0; k < sg->num_instrs && !skip[i]; k++)
        for (int o = 0; o < sg->instrs[k]->num_operands; o++) {
          const kiln_partition_subgraph_t *u =
              kiln_partition_subgraph_of(e->part, sg->instrs[k]->operands[o]);
          if (u && skip[u->id]) skip[u->id] = false, changed = true;
        }
    }
  }
  kiln_status s = NULL;
  for (int i = 0; i < n && !s; i++)
    if (!skip[i]) s = declare(e, i);
  for (int i = 0; i < n && !s; i++)
    if (!skip[i]) s = emit_body(e, i);
  kiln_free(skip);
  return s;
}

kiln_kir_op_t *kiln_elemental_call(kiln_elemental_t *e, kiln_kir_builder_t *b, int sg,
                                   kiln_kir_value_t *const *tensors,
                                   kiln_kir_value_t *const *indices) {
  if (sg < 0 || sg >= e->part->num_subgraphs || !e->funcs[sg]) return NULL;
  int rank = e->part->subgraphs[sg].rank;
  size_t n = (size_t)e->num_tensors + (size_t)rank;
  kiln_kir_value_t **args = kiln_calloc(n + 1, sizeof(*args));
  for (int i = 0; i < e->num_tensors; i++) args[i] = tensors[i];
  for (int i = 0; i < rank; i++) args[e->num_tensors + i] = indices[i];
  kiln_kir_op_t *op = kiln_kir_call(b, e->funcs[sg], args, n);
  kiln_free(args);
  return op;
}
