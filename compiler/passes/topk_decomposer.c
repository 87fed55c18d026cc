/* topk_decomposer (XLA's TopkDecomposer): topk(x), k, largest -> a stable sort of (x, iota)
 * along the last dimension, then the first k of both:
 *
 *   s = (T[..., n], s32[..., n]) sort(x, iota(last dim)), dimensions={last}, is_stable=true,
 *         to_apply=(a, b, i, j) -> compare(a, b), direction=GT (LT for largest=false),
 *         type=TOTALORDER for floats
 *   topk = tuple(slice(gte(s, 0)), slice(gte(s, 1)))   [..., 0:k]
 *
 * The sort emitter then compiles it. This is what the reference evaluator's topk computes
 * (eval_sort.c): floats ordered by the total order (NaN above inf), ties kept in index
 * order (the stable sort), integers by value. Forms the evaluator rejects (complex values,
 * rank 0, a result that is not (values, integer indices) of the right dims) are left as
 * they are. */
#include <stdio.h>
#include <string.h>

#include "compiler/passes/expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

static bool decomposable(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_TOPK || in->num_operands != 1) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  const kiln_shape_t *x = in->operands[0]->shape, *r = in->shape;
  if (!kiln_shape_is_array(x) || x->rank < 1 || kiln_shape_is_dynamic(x)) return false;
  if (kiln_elem_type_is_complex(x->type)) return false;
  if (!kiln_shape_is_tuple(r) || r->num_elements != 2) return false;
  const kiln_shape_t *vs = r->elements[0], *is = r->elements[1];
  if (!kiln_shape_is_array(vs) || !kiln_shape_is_array(is) || vs->type != x->type ||
      !kiln_elem_type_is_integral(is->type) || vs->rank != x->rank || is->rank != x->rank)
    return false;
  int64_t n = x->dims[x->rank - 1];
  if (in->k < 0 || in->k > n) return false;
  for (int d = 0; d < x->rank; d++) {
    int64_t want = d == x->rank - 1 ? in->k : x->dims[d];
    if (vs->dims[d] != want || is->dims[d] != want) return false;
  }
  return true;
}

/* (a: T[], b: T[], i: I[], j: I[]) -> pred[] { ROOT compare(a, b) } */
static kiln_hlo_computation_t *comparator(kiln_hlo_module_t *m, kiln_elem_type_t t,
                                          kiln_elem_type_t index_type, bool largest) {
  kiln_hlo_computation_t *c =
      kiln_hlo_computation_create(m, kiln_hlo_module_unique_name(m, "topk_compare"));
  kiln_hlo_instruction_t **params =
      c ? kiln_arena_alloc(&m->arena, sizeof(kiln_hlo_instruction_t *) * 4) : NULL;
  if (!params) return NULL;
  static const char *const names[4] = {"a", "b", "i", "j"};
  for (int k = 0; k < 4; k++) {
    kiln_shape_t *s = kiln_shape_make_scalar(&m->arena, k < 2 ? t : index_type);
    params[k] = s ? kiln_hlo_instruction_create(c, KILN_OP_PARAMETER, s, names[k]) : NULL;
    if (!params[k]) return NULL;
    params[k]->parameter_number = k;
  }
  c->parameters = params;
  c->num_parameters = 4;
  kiln_shape_t *ps = kiln_shape_make_scalar(&m->arena, KILN_PRED);
  kiln_hlo_instruction_t *cmp =
      ps ? kiln_hlo_instruction_create(c, KILN_OP_COMPARE, ps, "before") : NULL;
  if (!cmp) return NULL;
  kiln_hlo_instruction_set_operands(cmp, 2, params);
  cmp->comparison_direction = largest ? KILN_CMP_GT : KILN_CMP_LT;
  if (kiln_elem_type_is_float(t)) cmp->comparison_type = KILN_CMP_TYPE_TOTALORDER;
  c->root = cmp;
  return c;
}

static kiln_status decompose(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  kiln_hlo_module_t *m = in->parent->module;
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, in->name, in->operands[0]->shape->has_layout);
  kiln_hlo_instruction_t *x = in->operands[0];
  const kiln_shape_t *xs = x->shape;
  kiln_elem_type_t index_type = in->shape->elements[1]->type;
  int last = xs->rank - 1;
  kiln_hlo_computation_t *cmp = comparator(m, xs->type, index_type, in->largest);
  kiln_hlo_instruction_t *iota = kiln_builder_iota(&b, index_type, xs->rank, xs->dims, last);
  kiln_hlo_instruction_t *ops[2] = {x, iota};
  kiln_hlo_instruction_t *sort = NULL;
  if (cmp && iota) {
    kiln_shape_t *shapes[2] = {kiln_builder_shape(&b, xs->type, xs->rank, xs->dims), iota->shape};
    kiln_shape_t *ts = shapes[0] ? kiln_shape_make_tuple(&m->arena, 2, shapes) : NULL;
    sort = ts ? kiln_builder_op(&b, KILN_OP_SORT, ts, 2, ops) : NULL;
  }
  if (sort) {
    int64_t *dims = kiln_arena_alloc(&m->arena, sizeof(int64_t));
    if (dims) {
      dims[0] = last;
      sort->has_dimensions = true;
      sort->dimensions.n = 1;
      sort->dimensions.v = dims;
      sort->is_stable = true;
      kiln_hlo_instruction_add_called(sort, "to_apply", false, 1, &cmp);
    } else {
      sort = NULL;
    }
  }
  kiln_hlo_instruction_t *vals =
      kiln_builder_slice_dim(&b, kiln_builder_gte(&b, sort, 0), last, 0, in->k);
  kiln_hlo_instruction_t *idxs =
      kiln_builder_slice_dim(&b, kiln_builder_gte(&b, sort, 1), last, 0, in->k);
  kiln_hlo_instruction_t *outs[2] = {vals, idxs};
  kiln_hlo_instruction_t *t = vals && idxs ? kiln_builder_tuple(&b, 2, outs) : NULL;
  if (!t || b.failed)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "topk_decomposer: out of memory expanding '%s'", in->name);
  vals->shape = in->shape->elements[0]; /* the result's shapes, layouts included */
  idxs->shape = in->shape->elements[1];
  t->shape = in->shape;
  kiln_pass_replace_instruction(in, t, effects);
  return NULL;
}

kiln_status kiln_pass_topk_decomposer(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                      bool *changed) {
  return kiln_expander_run(m, decomposable, decompose, changed);
}
