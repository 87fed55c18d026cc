/* triangular_solve_expander: triangular-solve(a, b) -> a while loop of row-by-row forward
 * substitution over plain HLO (dynamic-slice, broadcast, multiply, reduce, divide,
 * dynamic-update-slice), so the loop, reduction and in-place emitters compile it.
 *
 * Semantics are the evaluator's (eval_linalg.c): solve op(T) x = b (left_side) or
 * x op(T) = b, T = the triangle of a named by `lower` (the other triangle is never read),
 * op = identity / transpose / adjoint, a unit diagonal not read when unit_diagonal.
 * Every case is brought to one form, "L y = r" with L lower triangular, by data movement:
 *   op(T)      = conj and/or transpose a  (transposing flips lower/upper);
 *   right side = x M = b  <=>  M^T x^T = b^T (transpose M and b; flips again);
 *   upper      = reverse M along both matrix dims and r along its rows (P U P is lower).
 * Batch dimensions are flattened into one. The loop (i = 0 .. m-1) computes row i of y as
 *   (r[i, :] - sum_k select(k < i, L[i, k], 0) * y[k, :]) / L[i, i]
 * with y's rows >= i still zero. f64, c64 and c128 compute in their type; f16, bf16 and f32
 * in f32 (rounded once at the end).
 *
 * Left alone (as the evaluator would reject them, or nothing to loop over): shapes that do
 * not fit, unknown transpose_a, empty arrays, integer types. */
#include <string.h>

#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_RANK 64

static kiln_elem_type_t compute_type(kiln_elem_type_t t) {
  return t == KILN_F64 || t == KILN_C64 || t == KILN_C128 ? t : KILN_F32;
}

/* The real type sums are reduced in (complex sums reduce their parts separately). */
static kiln_elem_type_t sum_type(kiln_elem_type_t ct) {
  return ct == KILN_C128 ? KILN_F64 : ct == KILN_C64 ? KILN_F32 : ct;
}

static bool is_float_or_complex(kiln_elem_type_t t) {
  return kiln_elem_type_is_float(t) || kiln_elem_type_is_complex(t);
}

static bool supported(const kiln_hlo_instruction_t *in, bool *trans, bool *conj) {
  if (in->num_operands != 2) return false;
  const kiln_shape_t *as = in->operands[0]->shape, *bs = in->operands[1]->shape;
  if (!kiln_shape_is_array(as) || !kiln_shape_is_array(bs) || as->rank < 2 || as->rank != bs->rank ||
      as->rank > MAX_RANK || kiln_shape_is_dynamic(as) || kiln_shape_is_dynamic(bs))
    return false;
  int r = as->rank;
  int64_t m = as->dims[r - 1];
  if (as->dims[r - 2] != m || m <= 0) return false;
  for (int d = 0; d < r - 2; d++)
    if (as->dims[d] != bs->dims[d]) return false;
  if ((in->left_side ? bs->dims[r - 2] : bs->dims[r - 1]) != m) return false;
  if (kiln_shape_num_elements(bs) <= 0 || kiln_shape_num_elements(as) <= 0) return false;
  if (!is_float_or_complex(bs->type) || !is_float_or_complex(as->type) || as->type != bs->type) return false;
  if (!kiln_shape_compatible(in->shape, bs)) return false;
  const char *ta = in->transpose_a ? in->transpose_a : "NO_TRANSPOSE";
  if (!strcmp(ta, "NO_TRANSPOSE")) *trans = *conj = false;
  else if (!strcmp(ta, "TRANSPOSE")) *trans = true, *conj = false;
  else if (!strcmp(ta, "ADJOINT")) *trans = *conj = true;
  else return false;
  return true;
}

/* Forward substitution: L [B, m, m] (lower; only k < i and, unless unit, the diagonal are
 * read), R [B, m, n] -> Y [B, m, n], built as a while loop in `b`'s computation. */
static kiln_hlo_instruction_t *forward_substitution(kiln_builder_t *b, kiln_hlo_instruction_t *L,
                                                    kiln_hlo_instruction_t *R, bool unit, kiln_hlo_computation_t *add) {
  kiln_hlo_module_t *m = b->m;
  int64_t B = L->shape->dims[0], M = L->shape->dims[1], N = R->shape->dims[2];
  kiln_elem_type_t t = L->shape->type;
  kiln_hlo_instruction_t *zero_t = kiln_builder_const_f64(b, t, 0);
  kiln_hlo_instruction_t *init[4] = {kiln_builder_const_u64(b, KILN_S32, 0), L, R,
                                     kiln_builder_splat(b, zero_t, R)};
  kiln_hlo_instruction_t *tup = kiln_builder_tuple(b, 4, init);
  if (!tup) return NULL;
  kiln_hlo_computation_t *cond = kiln_builder_counter_below(m, "trisolve_cond", tup->shape, M, b->layouts);

  kiln_hlo_instruction_t *p = NULL;
  kiln_hlo_computation_t *body = kiln_builder_computation(m, "trisolve_body", tup->shape, &p);
  if (!body || !cond) return NULL;
  kiln_builder_t bb;
  kiln_builder_init(&bb, body, NULL, b->layouts);
  kiln_hlo_instruction_t *i = kiln_builder_gte(&bb, p, 0), *Lp = kiln_builder_gte(&bb, p, 1);
  kiln_hlo_instruction_t *Rp = kiln_builder_gte(&bb, p, 2), *Y = kiln_builder_gte(&bb, p, 3);
  kiln_hlo_instruction_t *z = kiln_builder_const_u64(&bb, KILN_S32, 0);
  kiln_hlo_instruction_t *s3[3] = {z, i, z};
  int64_t row_sz[3] = {B, 1, M}, row2[2] = {B, M};
  kiln_hlo_instruction_t *row = kiln_builder_reshape(&bb, kiln_builder_dynamic_slice(&bb, Lp, s3, row_sz), 2, row2);
  kiln_hlo_instruction_t *k = kiln_builder_iota(&bb, KILN_S32, 2, row2, 1);
  kiln_hlo_instruction_t *below = kiln_builder_compare(&bb, KILN_CMP_LT, k, kiln_builder_splat(&bb, i, k));
  kiln_hlo_instruction_t *zero_b = kiln_builder_const_f64(&bb, t, 0);
  kiln_hlo_instruction_t *masked = kiln_builder_select(&bb, below, row, kiln_builder_splat(&bb, zero_b, row));
  int64_t d3[3] = {B, M, N}, map[2] = {0, 1}, red = 1;
  kiln_hlo_instruction_t *prod = kiln_builder_binary(&bb, KILN_OP_MULTIPLY, kiln_builder_broadcast(&bb, masked, 3, d3, map), Y);
  kiln_hlo_instruction_t *sum = kiln_builder_sum(&bb, prod, 1, &red, add);
  int64_t r_sz[3] = {B, 1, N}, r2[2] = {B, N};
  kiln_hlo_instruction_t *rrow = kiln_builder_reshape(&bb, kiln_builder_dynamic_slice(&bb, Rp, s3, r_sz), 2, r2);
  kiln_hlo_instruction_t *v = kiln_builder_binary(&bb, KILN_OP_SUBTRACT, rrow, sum);
  if (!unit) {
    kiln_hlo_instruction_t *s2[2] = {z, i};
    int64_t d_sz[2] = {B, 1}, one = B, map0 = 0;
    kiln_hlo_instruction_t *diag = kiln_builder_reshape(&bb, kiln_builder_dynamic_slice(&bb, row, s2, d_sz), 1, &one);
    v = kiln_builder_binary(&bb, KILN_OP_DIVIDE, v, kiln_builder_broadcast(&bb, diag, 2, r2, &map0));
  }
  kiln_hlo_instruction_t *Y2 = kiln_builder_set_slice(&bb, Y, v, 1, i);
  kiln_hlo_instruction_t *i1 = kiln_builder_binary(&bb, KILN_OP_ADD, i, kiln_builder_const_u64(&bb, KILN_S32, 1));
  kiln_hlo_instruction_t *next[4] = {i1, Lp, Rp, Y2};
  body->root = kiln_builder_tuple(&bb, 4, next);
  if (bb.failed || !body->root) return NULL;
  kiln_hlo_computation_sort_post_order(body);
  return kiln_builder_gte(b, kiln_builder_while(b, tup, cond, body), 3);
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in, bool trans, bool conj,
                                      kiln_hlo_computation_t *add) {
  const kiln_shape_t *as = in->operands[0]->shape, *bs = in->operands[1]->shape;
  int r = as->rank;
  kiln_elem_type_t ct = compute_type(bs->type);
  int64_t batch = 1;
  for (int d = 0; d < r - 2; d++) batch *= as->dims[d];
  int64_t m = as->dims[r - 1];
  int64_t a3[3] = {batch, m, m}, b3[3] = {batch, bs->dims[r - 2], bs->dims[r - 1]};
  kiln_hlo_instruction_t *A = in->operands[0], *R = in->operands[1];
  if (A->shape->type != ct) A = kiln_builder_convert(b, A, ct);
  if (R->shape->type != ct) R = kiln_builder_convert(b, R, ct);
  A = kiln_builder_reshape(b, A, 3, a3);
  R = kiln_builder_reshape(b, R, 3, b3);
  static const int64_t swap[3] = {0, 2, 1}, rows[1] = {1}, both[2] = {1, 2};
  bool lower = in->lower;
  if (conj) A = kiln_builder_conj(b, A);
  if (trans) A = kiln_builder_transpose(b, A, swap), lower = !lower;
  if (!in->left_side) {
    A = kiln_builder_transpose(b, A, swap), lower = !lower;
    R = kiln_builder_transpose(b, R, swap);
  }
  if (!lower) {
    A = kiln_builder_reverse(b, A, 2, both);
    R = kiln_builder_reverse(b, R, 1, rows);
  }
  kiln_hlo_instruction_t *Y = A && R ? forward_substitution(b, A, R, in->unit_diagonal, add) : NULL;
  if (!Y) return NULL;
  if (!lower) Y = kiln_builder_reverse(b, Y, 1, rows);
  if (!in->left_side) Y = kiln_builder_transpose(b, Y, swap);
  Y = kiln_builder_reshape(b, Y, bs->rank, bs->dims);
  if (Y && Y->shape->type != in->shape->type) Y = kiln_builder_convert(b, Y, in->shape->type);
  if (Y) {
    Y = kiln_builder_unary(b, KILN_OP_COPY, Y); /* the result, with the instruction's exact shape */
    if (Y) Y->shape = in->shape;
  }
  return Y;
}

/* ctx: the adders made so far, by element type. */
static kiln_hlo_instruction_t *expand_one(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  kiln_hlo_computation_t **adders = ctx;
  bool trans = false, conj = false;
  if (!supported(in, &trans, &conj)) return NULL;
  kiln_elem_type_t t = sum_type(compute_type(in->operands[1]->shape->type));
  if (!adders[t]) adders[t] = kiln_builder_scalar_computation(b->m, "trisolve_add", KILN_OP_ADD, t);
  kiln_hlo_instruction_t *r = adders[t] ? expand(b, in, trans, conj, adders[t]) : NULL;
  if (!r) b->failed = true;
  return r;
}

kiln_status kiln_pass_triangular_solve_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  kiln_hlo_computation_t *adders[KILN_ELEM_TYPE_COUNT] = {0};
  return kiln_builder_expand_all(m, KILN_OP_TRIANGULAR_SOLVE, expand_one, adders, "triangular_solve_expander",
                                 changed);
}
