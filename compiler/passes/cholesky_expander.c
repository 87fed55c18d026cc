/* cholesky_expander: cholesky(a) -> a while loop over columns (unblocked Cholesky-Crout)
 * in plain HLO (dynamic-slice, broadcast, multiply, reduce, sqrt, select,
 * dynamic-update-slice), so the loop, reduction and in-place emitters compile it.
 *
 * Semantics are the evaluator's (eval_linalg.c): batched over leading dims; only the
 * triangle named by `lower` (default true) is read; the factor is written there and the
 * other triangle is zero; a matrix that is not positive definite (a pivot that is not > 0,
 * NaN included) gives a matrix full of NaN.
 *
 * With A the lower-read matrix (A = a, or conj(a^T) when upper) and L starting at zero,
 * iteration j computes column j:
 *   v[i] = A[i, j] - sum_k L[i, k] * conj(L[j, k])   (L's columns >= j are still zero)
 *   d = real(v[j]); first = j + 1 if !(d > 0) and first is 0; L[j, j] = sqrt(d);
 *   L[i, j] = v[i] / sqrt(d) for i > j
 * then the result is select(first != 0, NaN, L), conj-transposed back for upper
 * (kiln_cholesky_factor, cholesky_expander.h, gives the loop's L and first as they are:
 * custom_call_rewrite's LAPACK potrf reports first as its info). f64, c64 and c128
 * compute in their type; f16, bf16 and f32 in f32 (rounded once at the end).
 *
 * Left alone: shapes the evaluator rejects (not [..., n, n], non-float types) and empty
 * arrays. */
#include <math.h>
#include <string.h>

#include "compiler/passes/cholesky_expander.h"
#include "compiler/passes/pass.h"

#define MAX_RANK 64

static kiln_elem_type_t compute_type(kiln_elem_type_t t) {
  return t == KILN_F64 || t == KILN_C64 || t == KILN_C128 ? t : KILN_F32;
}

/* The real type sums are reduced in (complex sums reduce their parts separately). */
static kiln_elem_type_t sum_type(kiln_elem_type_t ct) {
  return ct == KILN_C128 ? KILN_F64 : ct == KILN_C64 ? KILN_F32 : ct;
}

static bool supported(const kiln_hlo_instruction_t *in) {
  if (in->num_operands != 1) return false;
  const kiln_shape_t *s = in->operands[0]->shape;
  if (!kiln_shape_is_array(s) || s->rank < 2 || s->rank > MAX_RANK || kiln_shape_is_dynamic(s)) return false;
  if (s->dims[s->rank - 1] != s->dims[s->rank - 2] || kiln_shape_num_elements(s) <= 0) return false;
  if (!kiln_elem_type_is_float(s->type) && !kiln_elem_type_is_complex(s->type)) return false;
  return kiln_shape_is_array(in->shape) && in->shape->type == s->type && kiln_shape_compatible(in->shape, s);
}

/* The loop body on (j, A, L, first); see the file comment. */
static kiln_hlo_computation_t *column_step(kiln_hlo_module_t *m, kiln_shape_t *state, int64_t B, int64_t n,
                                           kiln_elem_type_t t, kiln_hlo_computation_t *add, bool layouts) {
  kiln_hlo_instruction_t *p = NULL;
  kiln_hlo_computation_t *body = kiln_builder_computation(m, "cholesky_body", state, &p);
  if (!body) return NULL;
  kiln_builder_t bb;
  kiln_builder_t *b = &bb;
  kiln_builder_init(b, body, NULL, layouts);
  bool cplx = kiln_elem_type_is_complex(t);
  kiln_hlo_instruction_t *j = kiln_builder_gte(b, p, 0), *A = kiln_builder_gte(b, p, 1);
  kiln_hlo_instruction_t *L = kiln_builder_gte(b, p, 2), *bad = kiln_builder_gte(b, p, 3);
  kiln_hlo_instruction_t *z = kiln_builder_const_u64(b, KILN_S32, 0);
  kiln_hlo_instruction_t *row_start[3] = {z, j, z}, *col_start[3] = {z, z, j};
  int64_t row_sz[3] = {B, 1, n}, col_sz[3] = {B, n, 1}, v2[2] = {B, n}, d3[3] = {B, n, n};
  /* dot[i] = sum_k L[i, k] * conj(L[j, k]) */
  kiln_hlo_instruction_t *Lj = kiln_builder_reshape(b, kiln_builder_dynamic_slice(b, L, row_start, row_sz), 2, v2);
  int64_t map_row[2] = {0, 2}, red = 2;
  kiln_hlo_instruction_t *prod =
      kiln_builder_binary(b, KILN_OP_MULTIPLY, L, kiln_builder_broadcast(b, kiln_builder_conj(b, Lj), 3, d3, map_row));
  kiln_hlo_instruction_t *dot = kiln_builder_sum(b, prod, 1, &red, add);
  kiln_hlo_instruction_t *acol = kiln_builder_reshape(b, kiln_builder_dynamic_slice(b, A, col_start, col_sz), 2, v2);
  kiln_hlo_instruction_t *v = kiln_builder_binary(b, KILN_OP_SUBTRACT, acol, dot);
  /* the pivot */
  kiln_hlo_instruction_t *s2[2] = {z, j};
  int64_t d_sz[2] = {B, 1}, one = B, map0 = 0;
  kiln_hlo_instruction_t *d = kiln_builder_reshape(b, kiln_builder_dynamic_slice(b, v, s2, d_sz), 1, &one);
  if (cplx) d = kiln_builder_real(b, d);
  kiln_hlo_instruction_t *dz = kiln_builder_const_f64(b, d ? d->shape->type : t, 0);
  kiln_hlo_instruction_t *ok = kiln_builder_compare(b, KILN_CMP_GT, d, kiln_builder_splat(b, dz, d));
  /* first: 1 + the first column whose pivot failed, 0 while none has */
  kiln_hlo_instruction_t *fresh =
      kiln_builder_binary(b, KILN_OP_AND, kiln_builder_unary(b, KILN_OP_NOT, ok),
                          kiln_builder_compare(b, KILN_CMP_EQ, bad, kiln_builder_splat(b, z, bad)));
  kiln_hlo_instruction_t *bad2 = kiln_builder_select(
      b, fresh,
      kiln_builder_splat(
          b, kiln_builder_binary(b, KILN_OP_ADD, j, kiln_builder_const_u64(b, KILN_S32, 1)), bad),
      bad);
  kiln_hlo_instruction_t *djj = kiln_builder_unary(b, KILN_OP_SQRT, d);
  if (cplx) djj = kiln_builder_complex(b, djj, kiln_builder_splat(b, dz, djj));
  kiln_hlo_instruction_t *djj2 = kiln_builder_broadcast(b, djj, 2, v2, &map0);
  /* column j: 0 above the diagonal, sqrt(d) on it, v / sqrt(d) below */
  kiln_hlo_instruction_t *i = kiln_builder_iota(b, KILN_S32, 2, v2, 1);
  kiln_hlo_instruction_t *jj = kiln_builder_splat(b, j, i);
  kiln_hlo_instruction_t *zero = kiln_builder_splat(b, kiln_builder_const_f64(b, t, 0), v);
  kiln_hlo_instruction_t *col = kiln_builder_select(
      b, kiln_builder_compare(b, KILN_CMP_GT, i, jj), kiln_builder_binary(b, KILN_OP_DIVIDE, v, djj2),
      kiln_builder_select(b, kiln_builder_compare(b, KILN_CMP_EQ, i, jj), djj2, zero));
  kiln_hlo_instruction_t *L2 = kiln_builder_set_slice(b, L, col, 2, j);
  kiln_hlo_instruction_t *j1 = kiln_builder_binary(b, KILN_OP_ADD, j, kiln_builder_const_u64(b, KILN_S32, 1));
  kiln_hlo_instruction_t *next[4] = {j1, A, L2, bad2};
  body->root = kiln_builder_tuple(b, 4, next);
  if (b->failed || !body->root) return NULL;
  kiln_hlo_computation_sort_post_order(body);
  return body;
}

kiln_hlo_instruction_t *kiln_cholesky_factor(kiln_builder_t *b, kiln_hlo_instruction_t *a,
                                             bool lower, kiln_hlo_computation_t *add,
                                             kiln_hlo_instruction_t **first) {
  *first = NULL;
  if (!a || !kiln_shape_is_array(a->shape) || a->shape->rank < 2) return NULL;
  const kiln_shape_t *s = a->shape;
  int r = s->rank;
  int64_t n = s->dims[r - 1], B = kiln_shape_num_elements(s) / (n * n);
  kiln_elem_type_t t = compute_type(s->type);
  static const int64_t swap[3] = {0, 2, 1};
  int64_t d3[3] = {B, n, n};
  kiln_hlo_instruction_t *A = a;
  if (A->shape->type != t) A = kiln_builder_convert(b, A, t);
  A = kiln_builder_reshape(b, A, 3, d3);
  if (!lower) A = kiln_builder_conj(b, kiln_builder_transpose(b, A, swap));
  kiln_hlo_instruction_t *init[4] = {
      kiln_builder_const_u64(b, KILN_S32, 0), A,
      kiln_builder_splat(b, kiln_builder_const_f64(b, t, 0), A),
      kiln_builder_broadcast(b, kiln_builder_const_u64(b, KILN_S32, 0), 1, &B, NULL)};
  kiln_hlo_instruction_t *tup = kiln_builder_tuple(b, 4, init);
  if (!tup) return NULL;
  kiln_hlo_computation_t *cond = kiln_builder_counter_below(b->m, "cholesky_cond", tup->shape, n, b->layouts);
  kiln_hlo_computation_t *body = column_step(b->m, tup->shape, B, n, t, add, b->layouts);
  if (!cond || !body) return NULL;
  kiln_hlo_instruction_t *w = kiln_builder_while(b, tup, cond, body);
  kiln_hlo_instruction_t *L = kiln_builder_gte(b, w, 2);
  *first = kiln_builder_gte(b, w, 3);
  return L;
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in,
                                      kiln_hlo_computation_t *add) {
  const kiln_shape_t *s = in->operands[0]->shape;
  int r = s->rank;
  int64_t n = s->dims[r - 1], B = kiln_shape_num_elements(s) / (n * n);
  kiln_elem_type_t t = compute_type(s->type);
  bool lower = in->has_lower ? in->lower : true;
  static const int64_t swap[3] = {0, 2, 1};
  int64_t d3[3] = {B, n, n};
  kiln_hlo_instruction_t *first;
  kiln_hlo_instruction_t *L = kiln_cholesky_factor(b, in->operands[0], lower, add, &first);
  if (!L) return NULL;
  kiln_hlo_instruction_t *bad = kiln_builder_compare(
      b, KILN_CMP_NE, first, kiln_builder_splat(b, kiln_builder_const_u64(b, KILN_S32, 0), first));
  int64_t map0 = 0;
  kiln_hlo_instruction_t *nan = kiln_builder_const_f64(b, t, NAN);
  if (kiln_elem_type_is_complex(t)) {
    kiln_hlo_instruction_t *nr = kiln_builder_const_f64(b, t == KILN_C128 ? KILN_F64 : KILN_F32, NAN);
    nan = kiln_builder_complex(b, nr, nr);
  }
  L = kiln_builder_select(b, kiln_builder_broadcast(b, bad, 3, d3, &map0), kiln_builder_splat(b, nan, L), L);
  if (!lower) L = kiln_builder_conj(b, kiln_builder_transpose(b, L, swap));
  L = kiln_builder_reshape(b, L, r, s->dims);
  if (L && L->shape->type != in->shape->type) L = kiln_builder_convert(b, L, in->shape->type);
  L = kiln_builder_unary(b, KILN_OP_COPY, L); /* the result, with the instruction's exact shape */
  if (L) L->shape = in->shape;
  return L;
}

/* ctx: the adders made so far, by element type. */
static kiln_hlo_instruction_t *expand_one(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  kiln_hlo_computation_t **adders = ctx;
  if (!supported(in)) return NULL;
  kiln_elem_type_t t = sum_type(compute_type(in->shape->type));
  if (!adders[t]) adders[t] = kiln_builder_scalar_computation(b->m, "cholesky_add", KILN_OP_ADD, t);
  kiln_hlo_instruction_t *r = adders[t] ? expand(b, in, adders[t]) : NULL;
  if (!r) b->failed = true;
  return r;
}

kiln_status kiln_pass_cholesky_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  kiln_hlo_computation_t *adders[KILN_ELEM_TYPE_COUNT] = {0};
  return kiln_builder_expand_all(m, KILN_OP_CHOLESKY, expand_one, adders, "cholesky_expander", changed);
}
