/* tree_reduction: XLA's TreeReductionRewriter. A reduce whose reduced extent is past the
 * race-free bounds (kiln_reduction_is_race_free: a row of more than 16,384 elements or more
 * than 8 major reduced rows, a column of more than 4,096 rows) cannot be done by one block per
 * output; the reduction emitter would cut it into chunks whose blocks combine their partial
 * results into the output atomically, in whatever order they finish, so the same inputs gave
 * other floating-point results from run to run (an f16 sum of 2^20 elements: 288.75, 289.25,
 * 289.5 in four runs on the host). Each such single-value reduce of a sequential computation
 * becomes two reduces, each within the bounds or nearer them (the pass goes round again until
 * every one is), in physical order (the pass runs after layout normalization:
 * default layouts only; others are left):
 *
 *   row [R0, K, R2], R2 past the bound: the row padded with the init value to outer * inner
 *     (inner about sqrt(R2), a multiple of 32, at most the bound), reduced over inner, then
 *     over R0 and outer;
 *   row with R0 past its bound: reduced over R2, then over R0 as a column;
 *   column [M, R, N], R past the bound: padded to outer * inner rows, reduced over inner,
 *     then over outer.
 *
 * The reshapes move no bytes (bitcasts after simplify_layout). Padding with the init value is
 * exact for any reducer whose init value is its identity, which XLA's semantics assume (the
 * reduction emitter's split chunks did the same). Variadic reduces (argmax-like) are left:
 * the emitter never split them, it runs them in one block per output, deterministic. */
#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "compiler/analysis/reduction_rule.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_RANK 64

typedef struct tree_ctx {
  kiln_hlo_computation_t **seq; /* the sequential computations (fused ones are left) */
  size_t num_seq;
} tree_ctx_t;

static bool is_sequential(const tree_ctx_t *t, const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < t->num_seq; i++)
    if (t->seq[i] == c) return true;
  return false;
}

static bool default_layout(const kiln_shape_t *s) {
  return !s->has_layout || kiln_layout_is_default(&s->layout);
}

/* The inner chunk of a reduced extent n past `bound`: about sqrt(n), a multiple of 32, at
 * most the bound (then the outer extent may still be past it: the next round splits it). */
static int64_t inner_size(int64_t n, int64_t bound) {
  int64_t k = (int64_t)ceil(sqrt((double)n));
  k = (k + 31) / 32 * 32;
  return k < bound ? k : bound;
}

/* x3 (rank 3) padded at the end of dimension `dim` with `init` up to outer * inner elements,
 * then reshaped to rank 4 with that dimension split into [outer, inner]. */
static kiln_hlo_instruction_t *split_dim(kiln_builder_t *b, kiln_hlo_instruction_t *x3,
                                         kiln_hlo_instruction_t *init, int dim, int64_t outer,
                                         int64_t inner) {
  int64_t n = x3->shape->dims[dim];
  if (outer * inner != n) {
    int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0}, interior[3] = {0, 0, 0};
    hi[dim] = outer * inner - n;
    x3 = kiln_builder_pad(b, x3, init, lo, hi, interior);
    if (!x3) return NULL;
  }
  int64_t dims[4];
  for (int d = 0, o = 0; d < 3; d++) {
    if (d == dim) {
      dims[o++] = outer;
      dims[o++] = inner;
    } else {
      dims[o++] = x3->shape->dims[d];
    }
  }
  return kiln_builder_reshape(b, x3, 4, dims);
}

/* The second reduce, straight into r's shape: `part` (the first reduce's result, [lead, K,
 * tail] with K r's elements in r's order) reshaped to [lead, r's dims..., tail] — or, for a
 * column ([M, outer, N]: K split by outer), to [r's first dims making M, outer, the others] —
 * then reduced over the rest (no reshape after it: a kernel of its own where it is not a
 * bitcast, as for complex results). */
static kiln_hlo_instruction_t *finish(kiln_builder_t *b, const kiln_hlo_instruction_t *r,
                                      kiln_hlo_instruction_t *part, kiln_hlo_instruction_t *init,
                                      kiln_hlo_computation_t *fn, bool column) {
  if (!part) return NULL;
  const kiln_shape_t *rs = r->shape, *ps = part->shape;
  int64_t dims[MAX_RANK + 2], red[2];
  int rank = 0, nred = 0;
  if (column) { /* ps = [M, outer, N]: r's dims up to M, then outer, then the rest */
    int j = 0;
    for (int64_t m = 1; m < ps->dims[0] && j < rs->rank; j++) m *= rs->dims[j];
    for (int d = 0; d < j; d++) dims[rank++] = rs->dims[d];
    red[nred++] = rank;
    dims[rank++] = ps->dims[1];
    for (int d = j; d < rs->rank; d++) dims[rank++] = rs->dims[d];
  } else { /* ps = [R0, K] or [R0, K, outer] */
    red[nred++] = 0;
    dims[rank++] = ps->dims[0];
    for (int d = 0; d < rs->rank; d++) dims[rank++] = rs->dims[d];
    if (ps->rank == 3) red[nred++] = rank, dims[rank++] = ps->dims[2];
  }
  kiln_hlo_instruction_t *y =
      kiln_builder_reduce(b, kiln_builder_reshape(b, part, rank, dims), init, nred, red, fn);
  if (y) y->shape = r->shape; /* the same dims; r's layout */
  return y;
}

static kiln_hlo_instruction_t *rewrite(kiln_builder_t *b, kiln_hlo_instruction_t *r, void *ctx) {
  const tree_ctx_t *t = ctx;
  if (!is_sequential(t, b->c) || r->num_operands != 2 || !kiln_shape_is_array(r->shape))
    return NULL;
  kiln_hlo_instruction_t *x = r->operands[0], *init = r->operands[1];
  const kiln_shape_t *xs = x->shape;
  /* (an empty input has nothing to split) */
  if (!kiln_shape_is_array(xs) || xs->rank > MAX_RANK || kiln_shape_is_dynamic(xs) ||
      kiln_shape_is_dynamic(r->shape) || !default_layout(xs) || !default_layout(r->shape) ||
      init->shape->type != r->shape->type || kiln_shape_num_elements(xs) == 0)
    return NULL;
  kiln_hlo_computation_t *fn = kiln_hlo_instruction_called(r, "to_apply");
  kiln_reduction_dims_t rd;
  if (!fn || !kiln_reduction_dims_of(r, &rd) || kiln_reduction_is_race_free(&rd)) return NULL;
  /* An input of another float type than the init (bf16 summed into f32, which shape inference
   * accepts) is converted first, as the reducer converts each element: padding and the first
   * reduce then have the init's type (the convert fuses into the first reduce). */
  if (xs->type != init->shape->type) x = kiln_builder_convert(b, x, init->shape->type);
  kiln_hlo_instruction_t *x3 = kiln_builder_reshape(b, x, 3, rd.dims);
  if (rd.is_row && rd.dims[2] > KILN_REDUCTION_ROW_RACE_FREE_BOUND) {
    int64_t inner = inner_size(rd.dims[2], KILN_REDUCTION_ROW_RACE_FREE_BOUND);
    int64_t outer = (rd.dims[2] + inner - 1) / inner;
    const int64_t d3[1] = {3};
    kiln_hlo_instruction_t *x4 = split_dim(b, x3, init, 2, outer, inner);
    return finish(b, r, kiln_builder_reduce(b, x4, init, 1, d3, fn), init, fn, false);
  }
  if (rd.is_row) { /* R0 past its bound: the rows first, then R0 as a column */
    const int64_t d2[1] = {2};
    return finish(b, r, kiln_builder_reduce(b, x3, init, 1, d2, fn), init, fn, false);
  }
  int64_t inner = inner_size(rd.dims[1], KILN_REDUCTION_COLUMN_RACE_FREE_BOUND);
  int64_t outer = (rd.dims[1] + inner - 1) / inner;
  const int64_t d2[1] = {2};
  kiln_hlo_instruction_t *x4 = split_dim(b, x3, init, 1, outer, inner);
  return finish(b, r, kiln_builder_reduce(b, x4, init, 1, d2, fn), init, fn, true);
}

kiln_status kiln_pass_tree_reduction(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                     bool *changed) {
  (void)opts;
  tree_ctx_t t = {0};
  t.seq = kiln_fusion_sequential_computations(m, &t.num_seq);
  /* Again while a round split something: a second reduce may still be past a bound (a row
   * of more than 2^28 elements, more than 8 major rows beside a long row). */
  bool any = false, again = true;
  kiln_status s = NULL;
  for (int round = 0; round < 8 && again && !s; round++) {
    again = false;
    s = kiln_builder_expand_all(m, KILN_OP_REDUCE, rewrite, &t, "tree_reduction", &again);
    any |= again;
  }
  kiln_free(t.seq);
  if (changed) *changed = any;
  return s;
}
