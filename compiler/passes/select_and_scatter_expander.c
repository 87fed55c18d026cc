/* select_and_scatter_expander: select-and-scatter(operand, source, init) -> HLO the rest of
 * kiln compiles, computing what the reference evaluator computes (eval_reduce.c): for each
 * source element, the window's elements are visited in row-major order skipping padding, the
 * first one is chosen, and a later candidate replaces the choice when select(choice,
 * candidate) is false; then result[choice] = scatter(source, result[choice]), starting from
 * init, source element by source element.
 *
 * Two expansions. Windows of at most 64 offsets whose select is a compare of its parameters
 * (or of one and a scalar constant) and whose scatter is add, multiply, maximum or minimum of
 * its parameters, or its parameter 1 (the current value: the result is init), unroll into
 * elementwise HLO that fuses. With W window offsets o (each a multi-index into the window),
 * in source coordinates:
 *   v_o = strided slice of pad(operand) at o,  valid_o = the same of pad(true, false)
 *   take = valid_o & (!have | !select(cur, v_o));  cur = take ? v_o : cur
 *   idx = take ? o : idx;  have |= valid_o
 * then, in padded operand coordinates, for each o in order:
 *   hit = pad(have & idx == o) placed at o with interior stride - 1
 *   acc = hit ? scatter(acc, pad(source)) : acc       (acc starts as broadcast(init))
 * and the result is acc without the padding (source contributions are combined offset by
 * offset rather than in source order: only rounding differs, for add and multiply).
 *
 * Every other window (any size) and any select / scatter computation takes the general form:
 * a variadic reduce-window over (operand, its linear index, valid) whose reducer keeps the
 * current (value, index) unless it is invalid, or the candidate is valid and
 * select(current, candidate) is false, which picks each source element's choice (a window
 * with no operand element keeps the out-of-range index N); then a scatter of the source into
 * broadcast(init) flattened to [N] at those indices, with scatter's parameters swapped
 * (scatter runs to_apply(current, update)), which skips the out-of-range ones and combines in
 * source order. An empty operand or source is broadcast(init). Left alone: window dilation (the
 * evaluator refuses it too), window reversal, dynamic shapes. */
#include <string.h>

#include "compiler/passes/expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

#define MAX_OFFSETS 64
#define MAX_RANK 16

/* Operand `k` of select's compare: parameter 0 (current), 1 (candidate) or a constant. */
static bool select_operand_ok(const kiln_hlo_instruction_t *x) {
  if (x->opcode == KILN_OP_PARAMETER) return x->parameter_number == 0 || x->parameter_number == 1;
  return x->opcode == KILN_OP_CONSTANT && x->literal && kiln_shape_is_array(x->shape) && x->shape->rank == 0;
}

static bool computations_ok(const kiln_hlo_instruction_t *in, kiln_elem_type_t t) {
  const kiln_hlo_computation_t *sel = kiln_hlo_instruction_called(in, "select");
  const kiln_hlo_computation_t *sc = kiln_hlo_instruction_called(in, "scatter");
  if (!sel || !sc || sel->num_parameters != 2 || sc->num_parameters != 2 || !sel->root || !sc->root) return false;
  const kiln_hlo_instruction_t *r = sel->root;
  if (r->opcode != KILN_OP_COMPARE || r->num_operands != 2 || !select_operand_ok(r->operands[0]) ||
      !select_operand_ok(r->operands[1]) || r->operands[0]->shape->type != t || r->operands[1]->shape->type != t)
    return false;
  const kiln_hlo_instruction_t *s = sc->root;
  if (s->opcode == KILN_OP_PARAMETER) return s->parameter_number == 1;
  if (s->opcode != KILN_OP_ADD && s->opcode != KILN_OP_MULTIPLY && s->opcode != KILN_OP_MAXIMUM &&
      s->opcode != KILN_OP_MINIMUM)
    return false;
  return s->num_operands == 2 && s->operands[0]->opcode == KILN_OP_PARAMETER &&
         s->operands[1]->opcode == KILN_OP_PARAMETER &&
         s->operands[0]->parameter_number != s->operands[1]->parameter_number;
}

/* The window's offset count, or -1 when the window is not one the expansions take. */
static int64_t window_offsets(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_SELECT_AND_SCATTER || in->num_operands != 3) return -1;
  if (in->num_control_predecessors || in->control_successors.len) return -1;
  const kiln_shape_t *xs = in->operands[0]->shape, *ss = in->operands[1]->shape, *is = in->operands[2]->shape;
  if (!kiln_shape_is_array(xs) || !kiln_shape_is_array(ss) || !kiln_shape_is_array(is) ||
      !kiln_shape_is_array(in->shape) || kiln_shape_is_dynamic(xs) || kiln_shape_is_dynamic(ss))
    return -1;
  kiln_elem_type_t t = xs->type;
  if (ss->type != t || is->type != t || in->shape->type != t || is->rank != 0 || xs->rank > MAX_RANK ||
      ss->rank != xs->rank || in->num_window_dims != xs->rank || !kiln_shape_compatible(xs, in->shape))
    return -1;
  int64_t w = 1;
  for (int d = 0; d < xs->rank; d++) {
    const kiln_window_dim_t *wd = &in->window[d];
    if (wd->size < 1 || wd->stride < 1 || wd->pad_lo < 0 || wd->pad_hi < 0 || wd->lhs_dilate > 1 ||
        wd->rhs_dilate > 1 || wd->reversal)
      return -1;
    int64_t p = xs->dims[d] + wd->pad_lo + wd->pad_hi;
    if (ss->dims[d] != (p < wd->size ? 0 : (p - wd->size) / wd->stride + 1)) return -1;
    if (w > INT64_MAX / wd->size) return -1;
    w *= wd->size;
  }
  return w;
}

/* Whether `c` is a computation (T[], T[]) -> R[] for element types t and r. */
static bool scalar_binary(const kiln_hlo_computation_t *c, kiln_elem_type_t t, kiln_elem_type_t r) {
  if (!c || c->num_parameters != 2 || !c->root || !kiln_shape_is_array(c->root->shape) ||
      c->root->shape->rank != 0 || c->root->shape->type != r)
    return false;
  for (int i = 0; i < 2; i++) {
    const kiln_shape_t *p = c->parameters[i] ? c->parameters[i]->shape : NULL;
    if (!p || !kiln_shape_is_array(p) || p->rank != 0 || p->type != t) return false;
  }
  return true;
}

static bool unrollable(const kiln_hlo_instruction_t *in) {
  int64_t w = window_offsets(in);
  kiln_elem_type_t t = in->operands[0]->shape->type;
  return w >= 0 && w <= MAX_OFFSETS && !kiln_elem_type_is_complex(t) && computations_ok(in, t);
}

static bool expandable(const kiln_hlo_instruction_t *in) {
  if (window_offsets(in) < 0) return false;
  kiln_elem_type_t t = in->operands[0]->shape->type;
  return scalar_binary(kiln_hlo_instruction_called(in, "select"), t, KILN_PRED) &&
         scalar_binary(kiln_hlo_instruction_called(in, "scatter"), t, t);
}

/* select's compare operand for current `cur` / candidate `cand` (or a broadcast constant). */
static kiln_hlo_instruction_t *select_operand(kiln_builder_t *b, const kiln_hlo_instruction_t *x,
                                              kiln_hlo_instruction_t *cur, kiln_hlo_instruction_t *cand) {
  if (x->opcode == KILN_OP_PARAMETER) return x->parameter_number == 0 ? cur : cand;
  kiln_hlo_instruction_t *c = kiln_builder_op(b, KILN_OP_CONSTANT, kiln_builder_shape(b, x->shape->type, 0, NULL), 0, NULL);
  if (c) c->literal = x->literal; /* literals are immutable; the module's arena owns both */
  return kiln_builder_splat(b, c, cur);
}

/* A call of `fn` on (x, y) in b's computation. */
static kiln_hlo_instruction_t *call2(kiln_builder_t *b, kiln_hlo_computation_t *fn,
                                     kiln_hlo_instruction_t *x, kiln_hlo_instruction_t *y) {
  kiln_hlo_instruction_t *args[2] = {x, y};
  kiln_hlo_instruction_t *c = kiln_builder_op(b, KILN_OP_CALL, fn->root->shape, 2, args);
  if (c) kiln_hlo_instruction_add_called(c, "to_apply", false, 1, &fn);
  return c;
}

/* The reduce-window reducer over (value, index, valid) pairs: (a, b) -> a when a is valid and
 * b is not or select(a.value, b.value) holds, b otherwise. */
static kiln_hlo_computation_t *choice_reducer(kiln_builder_t *outer, kiln_hlo_computation_t *sel,
                                              kiln_elem_type_t t, kiln_elem_type_t it) {
  kiln_shape_t *shapes[6];
  kiln_elem_type_t types[3] = {t, it, KILN_PRED};
  for (int i = 0; i < 6; i++) shapes[i] = kiln_builder_shape(outer, types[i % 3], 0, NULL);
  kiln_hlo_instruction_t *p[6];
  kiln_hlo_computation_t *c =
      kiln_builder_computation_n(outer->m, "select_choice", "choice", 6, shapes, p);
  if (!c) return NULL;
  kiln_builder_t b;
  kiln_builder_init(&b, c, NULL, outer->layouts);
  kiln_hlo_instruction_t *keep = kiln_builder_binary(
      &b, KILN_OP_AND, p[2],
      kiln_builder_binary(&b, KILN_OP_OR, kiln_builder_unary(&b, KILN_OP_NOT, p[5]),
                          call2(&b, sel, p[0], p[3])));
  kiln_hlo_instruction_t *out[3] = {kiln_builder_select(&b, keep, p[0], p[3]),
                                    kiln_builder_select(&b, keep, p[1], p[4]),
                                    kiln_builder_binary(&b, KILN_OP_OR, p[2], p[5])};
  c->root = kiln_builder_tuple(&b, 3, out);
  if (b.failed || !c->root) return NULL;
  kiln_hlo_computation_sort_post_order(c);
  return c;
}

/* scatter's to_apply(current, update) = the select-and-scatter's scatter(update, current). */
static kiln_hlo_computation_t *swapped(kiln_builder_t *outer, kiln_hlo_computation_t *sc,
                                       kiln_elem_type_t t) {
  kiln_shape_t *shapes[2] = {kiln_builder_shape(outer, t, 0, NULL),
                             kiln_builder_shape(outer, t, 0, NULL)};
  kiln_hlo_instruction_t *p[2];
  kiln_hlo_computation_t *c =
      kiln_builder_computation_n(outer->m, "scatter_update", "arg", 2, shapes, p);
  if (!c) return NULL;
  kiln_builder_t b;
  kiln_builder_init(&b, c, NULL, outer->layouts);
  c->root = call2(&b, sc, p[1], p[0]);
  if (b.failed || !c->root) return NULL;
  kiln_hlo_computation_sort_post_order(c);
  return c;
}

static kiln_hlo_instruction_t *expand_general(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  kiln_hlo_instruction_t *x = in->operands[0], *src = in->operands[1], *init = in->operands[2];
  const kiln_shape_t *xs = x->shape, *ss = src->shape;
  kiln_elem_type_t t = xs->type;
  int64_t n = kiln_shape_num_elements(xs), ns = kiln_shape_num_elements(ss);
  kiln_elem_type_t it = n < INT32_MAX ? KILN_S32 : KILN_S64;
  kiln_hlo_computation_t *reducer =
      choice_reducer(b, kiln_hlo_instruction_called(in, "select"), t, it);
  kiln_hlo_computation_t *update = swapped(b, kiln_hlo_instruction_called(in, "scatter"), t);
  if (!reducer || !update) {
    b->failed = true;
    return NULL;
  }
  kiln_hlo_instruction_t *ops[6] = {
      x,
      kiln_builder_reshape(b, kiln_builder_iota(b, it, 1, &n, 0), xs->rank, xs->dims),
      kiln_builder_splat(b, kiln_builder_const_u64(b, KILN_PRED, 1), x),
      init,
      kiln_builder_const_u64(b, it, (uint64_t)n),
      kiln_builder_const_u64(b, KILN_PRED, 0),
  };
  kiln_shape_t *parts[3] = {kiln_builder_shape(b, t, ss->rank, ss->dims),
                            kiln_builder_shape(b, it, ss->rank, ss->dims),
                            kiln_builder_shape(b, KILN_PRED, ss->rank, ss->dims)};
  kiln_shape_t *ts =
      parts[0] && parts[1] && parts[2] ? kiln_shape_make_tuple(&b->m->arena, 3, parts) : NULL;
  kiln_window_dim_t *win =
      kiln_arena_alloc(&b->m->arena, sizeof *win * (size_t)(xs->rank ? xs->rank : 1));
  kiln_hlo_instruction_t *rw =
      ts && win ? kiln_builder_op(b, KILN_OP_REDUCE_WINDOW, ts, 6, ops) : NULL;
  if (!rw) {
    b->failed = true;
    return NULL;
  }
  if (xs->rank) memcpy(win, in->window, sizeof *win * (size_t)xs->rank);
  rw->window = win;
  rw->num_window_dims = xs->rank;
  kiln_hlo_instruction_add_called(rw, "to_apply", false, 1, &reducer);
  kiln_hlo_instruction_t *sops[3] = {
      kiln_builder_broadcast(b, init, 1, &n, NULL),
      kiln_builder_reshape(b, kiln_builder_gte(b, rw, 1), 1, &ns),
      kiln_builder_reshape(b, src, 1, &ns),
  };
  kiln_hlo_instruction_t *sc =
      kiln_builder_op(b, KILN_OP_SCATTER, kiln_builder_shape(b, t, 1, &n), 3, sops);
  int64_t zero = 0;
  if (!sc || !kiln_builder_list(b, &sc->scatter_dnums.update_window_dims, 0, NULL) ||
      !kiln_builder_list(b, &sc->scatter_dnums.inserted_window_dims, 1, &zero) ||
      !kiln_builder_list(b, &sc->scatter_dnums.scatter_dims_to_operand_dims, 1, &zero) ||
      !kiln_builder_list(b, &sc->scatter_dnums.input_batching_dims, 0, NULL) ||
      !kiln_builder_list(b, &sc->scatter_dnums.scatter_indices_batching_dims, 0, NULL))
    return NULL;
  sc->has_scatter_dnums = true;
  sc->scatter_dnums.index_vector_dim = 1;
  kiln_hlo_instruction_add_called(sc, "to_apply", false, 1, &update);
  return kiln_builder_reshape(b, sc, xs->rank, xs->dims);
}

static kiln_hlo_instruction_t *expand_unrolled(kiln_builder_t *bp, kiln_hlo_instruction_t *in) {
  kiln_builder_t b = *bp;
  kiln_hlo_instruction_t *x = in->operands[0], *src = in->operands[1], *init = in->operands[2];
  const kiln_shape_t *xs = x->shape, *ss = src->shape;
  int r = xs->rank;
  kiln_elem_type_t t = xs->type;
  const kiln_hlo_instruction_t *cmp = kiln_hlo_instruction_called(in, "select")->root;
  const kiln_hlo_instruction_t *sroot = kiln_hlo_instruction_called(in, "scatter")->root;
  int64_t lo[MAX_RANK] = {0}, hi[MAX_RANK] = {0}, zero[MAX_RANK] = {0}, one[MAX_RANK] = {0};
  int64_t stride[MAX_RANK] = {0}, size[MAX_RANK] = {0};
  int64_t num_offsets = 1;
  for (int d = 0; d < r; d++) {
    lo[d] = in->window[d].pad_lo, hi[d] = in->window[d].pad_hi, zero[d] = 0, one[d] = 1;
    stride[d] = in->window[d].stride, size[d] = in->window[d].size;
    num_offsets *= size[d];
  }
  kiln_hlo_instruction_t *result;
  if (sroot->opcode == KILN_OP_PARAMETER) { /* scatter keeps the current value */
    result = kiln_builder_splat(&b, init, x);
  } else {
    kiln_hlo_instruction_t *fill = kiln_builder_const_u64(&b, t, 0);
    kiln_hlo_instruction_t *px = kiln_builder_pad(&b, x, fill, lo, hi, zero);
    kiln_hlo_instruction_t *yes = kiln_builder_const_u64(&b, KILN_PRED, 1), *no = kiln_builder_const_u64(&b, KILN_PRED, 0);
    kiln_hlo_instruction_t *pvalid =
        kiln_builder_pad(&b, kiln_builder_splat(&b, yes, x), no, lo, hi, zero);
    kiln_hlo_instruction_t *cur = NULL, *idx = NULL, *have = NULL;
    int64_t o[MAX_RANK] = {0};
    for (int64_t k = 0; k < num_offsets && !b.failed; k++) {
      kiln_hlo_instruction_t *v = kiln_builder_strided_slice(&b, px, o, ss->dims, stride);
      kiln_hlo_instruction_t *valid = kiln_builder_strided_slice(&b, pvalid, o, ss->dims, stride);
      kiln_hlo_instruction_t *kc = kiln_builder_splat(&b, kiln_builder_const_u64(&b, KILN_S32, (uint64_t)k), src);
      if (!k) {
        cur = v, have = valid;
        idx = kc;
      } else {
        kiln_hlo_instruction_t *keep = kiln_builder_compare(&b, cmp->comparison_direction,
                                                            select_operand(&b, cmp->operands[0], cur, v),
                                                            select_operand(&b, cmp->operands[1], cur, v));
        if (keep) keep->comparison_type = cmp->comparison_type;
        kiln_hlo_instruction_t *take = kiln_builder_binary(
            &b, KILN_OP_AND, valid,
            kiln_builder_binary(&b, KILN_OP_OR, kiln_builder_unary(&b, KILN_OP_NOT, have),
                                kiln_builder_unary(&b, KILN_OP_NOT, keep)));
        cur = kiln_builder_select(&b, take, v, cur);
        idx = kiln_builder_select(&b, take, kc, idx);
        have = kiln_builder_binary(&b, KILN_OP_OR, have, valid);
      }
      for (int d = r - 1; d >= 0; d--) {
        if (++o[d] < size[d]) break;
        o[d] = 0;
      }
    }
    kiln_hlo_instruction_t *acc = px ? kiln_builder_splat(&b, init, px) : NULL;
    int64_t interior[MAX_RANK] = {0}, phi[MAX_RANK] = {0};
    for (int d = 0; d < r; d++) interior[d] = stride[d] - 1;
    memset(o, 0, sizeof o);
    for (int64_t k = 0; k < num_offsets && !b.failed; k++) {
      for (int d = 0; d < r; d++)
        phi[d] = px->shape->dims[d] - o[d] - (ss->dims[d] ? (ss->dims[d] - 1) * stride[d] + 1 : 0);
      kiln_hlo_instruction_t *kc = kiln_builder_splat(&b, kiln_builder_const_u64(&b, KILN_S32, (uint64_t)k), src);
      kiln_hlo_instruction_t *chosen =
          kiln_builder_binary(&b, KILN_OP_AND, have, kiln_builder_compare(&b, KILN_CMP_EQ, idx, kc));
      kiln_hlo_instruction_t *hit = kiln_builder_pad(&b, chosen, no, o, phi, interior);
      kiln_hlo_instruction_t *val = kiln_builder_pad(&b, src, fill, o, phi, interior);
      acc = kiln_builder_select(&b, hit, kiln_builder_binary(&b, sroot->opcode, acc, val), acc);
      for (int d = r - 1; d >= 0; d--) {
        if (++o[d] < size[d]) break;
        o[d] = 0;
      }
    }
    result = kiln_builder_strided_slice(&b, acc, lo, xs->dims, one);
  }
  bp->failed = b.failed;
  return result;
}

static kiln_status expand(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, in->name, in->shape->has_layout);
  kiln_hlo_instruction_t *result;
  if (!kiln_shape_num_elements(in->operands[0]->shape) ||
      !kiln_shape_num_elements(in->operands[1]->shape))
    result = kiln_builder_splat(&b, in->operands[2], in->operands[0]); /* nothing is scattered */
  else
    result = unrollable(in) ? expand_unrolled(&b, in) : expand_general(&b, in);
  if (!result || b.failed)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "select_and_scatter_expander: out of memory expanding '%s'",
                            in->name);
  result->shape = in->shape;
  kiln_pass_replace_instruction(in, result, effects);
  return NULL;
}

kiln_status kiln_pass_select_and_scatter_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                                  bool *changed) {
  bool any = false;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_expander_run(m, expandable, expand, &any));
  if (changed) *changed = any;
  if (!any) return KILN_STATUS_OK;
  bool inlined = false; /* the general form's reducer and scatter call the computations */
  return kiln_pass_call_inline(m, opts, &inlined);
}
