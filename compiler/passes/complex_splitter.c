/* complex_splitter: sort and scatter over complex operands -> the same op over their real and
 * imaginary parts, as separate real operands. The sort and scatter emitters move real values
 * only (a c64 sort or scatter did not compile); a variadic sort or scatter moves all of its
 * operands together, so the two parts of an element always travel as one.
 *
 * Every complex operand x becomes real(x), imag(x), in its place. The comparator (sort) or
 * combiner (scatter) is wrapped in a new computation over the split parameters: it rebuilds
 * complex(re, im) for each split parameter, calls the original, and (scatter) returns the
 * parts of each complex result. The result's complex values are complex(re, im) of the new
 * op's parts. The calls are inlined when the pass is done (call_inline).
 *
 * Sort: operands x_0..x_{n-1}, comparator parameters (lhs_0, rhs_0, lhs_1, rhs_1, ...).
 * Scatter: operands x_0..x_{n-1}, indices, updates u_0..u_{n-1}; combiner parameters
 * (a_0..a_{n-1}, b_0..b_{n-1}) returning n values (one array, not a tuple, when n = 1).
 *
 * Left as they are: sorts and scatters without a complex operand, and ones whose shapes do
 * not have the form above (the verifier and the emitters report those). */
#include <string.h>

#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_VALUES 64

/* Where a value of the original op went: its new index `at` (the real part's when split), and
 * `im`, the imaginary part's (-1: not split). */
typedef struct place {
  int at, im;
} place_t;

static bool is_complex_array(const kiln_shape_t *s) {
  return s && kiln_shape_is_array(s) && kiln_elem_type_is_complex(s->type);
}

/* The new places of n values whose complex-ness is cplx[i]; returns how many new values. */
static int place_values(const bool *cplx, int n, place_t *out) {
  int at = 0;
  for (int i = 0; i < n; i++) {
    out[i] = (place_t){at, cplx[i] ? at + 1 : -1};
    at += cplx[i] ? 2 : 1;
  }
  return at;
}

/* The shape of a split value's parts (`split`), or of an unsplit value. */
static kiln_shape_t *part_shape(kiln_builder_t *b, const kiln_shape_t *s, bool split) {
  kiln_elem_type_t t = s->type;
  if (split) t = t == KILN_C128 ? KILN_F64 : KILN_F32;
  return kiln_builder_shape(b, t, s->rank, s->dims);
}

/* Wraps `fn` (parameters p_0..p_{k-1}, each at new place pl[i]) into a computation over the
 * new_k split parameters; `split_results` (scatter combiners): return the parts of each complex
 * result (a tuple), else fn's result as it is (sort comparators). NULL on failure. */
static kiln_hlo_computation_t *wrap(kiln_hlo_module_t *m, kiln_hlo_computation_t *fn,
                                    const place_t *pl, int k, int new_k, bool split_results,
                                    bool layouts) {
  kiln_shape_t *shapes[4 * MAX_VALUES];
  kiln_hlo_instruction_t *params[4 * MAX_VALUES], *args[2 * MAX_VALUES];
  kiln_builder_t b0;
  kiln_builder_init(&b0, fn, NULL, layouts); /* for shapes only: nothing is appended to fn */
  for (int i = 0; i < k; i++) {
    const kiln_shape_t *s = fn->parameters[i]->shape;
    shapes[pl[i].at] = part_shape(&b0, s, pl[i].im >= 0);
    if (pl[i].im >= 0) shapes[pl[i].im] = shapes[pl[i].at];
  }
  if (b0.failed) return NULL;
  kiln_hlo_computation_t *c =
      kiln_builder_computation_n(m, "complex_parts", "part", new_k, shapes, params);
  if (!c) return NULL;
  kiln_builder_t bb;
  kiln_builder_t *b = &bb;
  kiln_builder_init(b, c, NULL, layouts);
  for (int i = 0; i < k; i++)
    args[i] = pl[i].im >= 0 ? kiln_builder_complex(b, params[pl[i].at], params[pl[i].im])
                            : params[pl[i].at];
  kiln_hlo_instruction_t *call = kiln_builder_op(b, KILN_OP_CALL, fn->root->shape, k, args);
  if (!call) return NULL;
  kiln_hlo_instruction_add_called(call, "to_apply", false, 1, &fn);
  c->root = call;
  if (split_results) {
    const kiln_shape_t *r = fn->root->shape;
    int nr = r->type == KILN_TUPLE ? r->num_elements : 1;
    kiln_hlo_instruction_t *outs[2 * MAX_VALUES];
    int no = 0;
    for (int j = 0; j < nr && j < MAX_VALUES; j++) {
      kiln_hlo_instruction_t *v = r->type == KILN_TUPLE ? kiln_builder_gte(b, call, j) : call;
      if (v && kiln_elem_type_is_complex(v->shape->type)) {
        outs[no++] = kiln_builder_real(b, v);
        outs[no++] = kiln_builder_imag(b, v);
      } else {
        outs[no++] = v;
      }
    }
    c->root = kiln_builder_tuple(b, no, outs);
  }
  if (b->failed || !c->root) return NULL;
  kiln_hlo_computation_sort_post_order(c);
  return c;
}

/* The split operands of `xs` (n of them, placed by pl) into out[]. */
static void split_operands(kiln_builder_t *b, kiln_hlo_instruction_t *const *xs, int n,
                           const place_t *pl, kiln_hlo_instruction_t **out) {
  for (int i = 0; i < n; i++) {
    if (pl[i].im < 0) {
      out[pl[i].at] = xs[i];
      continue;
    }
    out[pl[i].at] = kiln_builder_real(b, xs[i]);
    out[pl[i].im] = kiln_builder_imag(b, xs[i]);
  }
}

/* The original result (n values placed by pl, shaped like `shape`) from the new op `r`. */
static kiln_hlo_instruction_t *join_results(kiln_builder_t *b, kiln_hlo_instruction_t *r, int n,
                                            const place_t *pl, kiln_shape_t *shape) {
  kiln_hlo_instruction_t *vals[MAX_VALUES];
  for (int i = 0; i < n; i++) {
    vals[i] = kiln_builder_gte(b, r, pl[i].at);
    if (pl[i].im >= 0) vals[i] = kiln_builder_complex(b, vals[i], kiln_builder_gte(b, r, pl[i].im));
  }
  return kiln_builder_result(b, shape, n, vals);
}

/* The tuple shape of the new op's results: the new operands' shapes. */
static kiln_shape_t *tuple_of(kiln_builder_t *b, kiln_hlo_instruction_t *const *xs, int n) {
  kiln_shape_t *el[2 * MAX_VALUES];
  for (int i = 0; i < n; i++) {
    if (!xs[i]) return NULL;
    el[i] = xs[i]->shape;
  }
  kiln_shape_t *t = kiln_shape_make_tuple(&b->m->arena, n, el);
  if (!t) b->failed = true;
  return t;
}

static kiln_hlo_instruction_t *split_sort(kiln_builder_t *b, kiln_hlo_instruction_t *in,
                                          void *ctx) {
  (void)ctx;
  int n = in->num_operands;
  kiln_hlo_computation_t *cmp = kiln_hlo_instruction_called(in, "to_apply");
  if (n < 1 || n > MAX_VALUES || !cmp || !cmp->root || cmp->num_parameters != 2 * n) return NULL;
  bool cplx[MAX_VALUES], any = false;
  for (int i = 0; i < n; i++) {
    cplx[i] = is_complex_array(in->operands[i]->shape);
    any |= cplx[i];
  }
  if (!any) return NULL;
  place_t pl[MAX_VALUES], ppl[2 * MAX_VALUES];
  int new_n = place_values(cplx, n, pl);
  /* The new comparator takes (lhs_j, rhs_j) of each new operand j at 2j, 2j + 1: a split
   * operand's lhs parts sit at 2j (re) and 2j + 2 (im), its rhs parts at 2j + 1 and 2j + 3. */
  for (int i = 0; i < n; i++) {
    int j = pl[i].at;
    ppl[2 * i] = (place_t){2 * j, cplx[i] ? 2 * j + 2 : -1};
    ppl[2 * i + 1] = (place_t){2 * j + 1, cplx[i] ? 2 * j + 3 : -1};
  }
  kiln_hlo_computation_t *w = wrap(b->m, cmp, ppl, 2 * n, 2 * new_n, false, b->layouts);
  if (!w) {
    b->failed = true;
    return NULL;
  }
  kiln_hlo_instruction_t *ops[2 * MAX_VALUES];
  split_operands(b, in->operands, n, pl, ops);
  kiln_shape_t *ts = tuple_of(b, ops, new_n);
  kiln_hlo_instruction_t *s = ts ? kiln_builder_op(b, KILN_OP_SORT, ts, new_n, ops) : NULL;
  if (!s) return NULL;
  s->has_dimensions = in->has_dimensions;
  s->dimensions = in->dimensions;
  s->is_stable = in->is_stable;
  kiln_hlo_instruction_add_called(s, "to_apply", false, 1, &w);
  return join_results(b, s, n, pl, in->shape);
}

static kiln_hlo_instruction_t *split_scatter(kiln_builder_t *b, kiln_hlo_instruction_t *in,
                                             void *ctx) {
  (void)ctx;
  int n = (in->num_operands - 1) / 2;
  kiln_hlo_computation_t *fn = kiln_hlo_instruction_called(in, "to_apply");
  if (n < 1 || n > MAX_VALUES || in->num_operands != 2 * n + 1 || !fn || !fn->root ||
      fn->num_parameters != 2 * n || !in->has_scatter_dnums)
    return NULL;
  bool cplx[MAX_VALUES], any = false;
  const kiln_shape_t *rs = fn->root->shape;
  if ((n == 1) != (rs->type != KILN_TUPLE) || (n > 1 && rs->num_elements != n)) return NULL;
  for (int i = 0; i < n; i++) {
    cplx[i] = is_complex_array(in->operands[i]->shape);
    any |= cplx[i];
    const kiln_shape_t *ri = n == 1 ? rs : rs->elements[i];
    if (cplx[i] != is_complex_array(in->operands[n + 1 + i]->shape) ||
        cplx[i] != is_complex_array(ri))
      return NULL;
  }
  if (!any) return NULL;
  place_t pl[MAX_VALUES], ppl[2 * MAX_VALUES] = {{0}};
  int new_n = place_values(cplx, n, pl);
  for (int i = 0; i < n; i++) {
    ppl[i] = pl[i];
    ppl[n + i] = (place_t){new_n + pl[i].at, cplx[i] ? new_n + pl[i].im : -1};
  }
  kiln_hlo_computation_t *w = wrap(b->m, fn, ppl, 2 * n, 2 * new_n, true, b->layouts);
  if (!w) {
    b->failed = true;
    return NULL;
  }
  kiln_hlo_instruction_t *ops[4 * MAX_VALUES + 1];
  split_operands(b, in->operands, n, pl, ops);
  ops[new_n] = in->operands[n];
  split_operands(b, in->operands + n + 1, n, pl, ops + new_n + 1);
  kiln_shape_t *ts = tuple_of(b, ops, new_n);
  kiln_hlo_instruction_t *s =
      ts ? kiln_builder_op(b, KILN_OP_SCATTER, ts, 2 * new_n + 1, ops) : NULL;
  if (!s) return NULL;
  s->has_scatter_dnums = true;
  s->scatter_dnums = in->scatter_dnums;
  s->indices_are_sorted = in->indices_are_sorted;
  s->unique_indices = in->unique_indices;
  kiln_hlo_instruction_add_called(s, "to_apply", false, 1, &w);
  return join_results(b, s, n, pl, in->shape);
}

kiln_status kiln_pass_complex_splitter(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                       bool *changed) {
  bool c1 = false, c2 = false;
  KILN_RETURN_IF_ERROR_PLAIN(
      kiln_builder_expand_all(m, KILN_OP_SORT, split_sort, NULL, "complex_splitter", &c1));
  KILN_RETURN_IF_ERROR_PLAIN(
      kiln_builder_expand_all(m, KILN_OP_SCATTER, split_scatter, NULL, "complex_splitter", &c2));
  *changed = c1 || c2;
  if (!*changed) return KILN_STATUS_OK;
  bool inlined = false;
  return kiln_pass_call_inline(m, opts, &inlined);
}
