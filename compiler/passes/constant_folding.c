/* Constant folding: an instruction whose operands are all constants is evaluated with the
 * reference evaluator and replaced by a constant holding the result.
 *
 * Left alone:
 *   - instructions without operands (iota stays cheap to generate; parameters, constants),
 *   - broadcast (folding it would turn a scalar into a large constant; XLA does the same),
 *   - anything with a side effect (rng, collectives, custom-calls marked so, ...), calls,
 *     while loops, conditionals, fusions, custom-calls, tuples and token/ordering ops,
 *   - results that are not arrays, results of more than KILN_FOLD_MAX_RESULT_ELEMENTS
 *     elements, and instructions whose estimated work exceeds KILN_FOLD_MAX_WORK
 *     element-operations (dots and convolutions count their multiply-adds),
 *   - instructions with control dependencies, elided constants `constant({...})`,
 *   - anything the evaluator refuses (the instruction simply stays). */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "compiler/eval/eval.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

#define KILN_FOLD_MAX_RESULT_ELEMENTS 100000
#define KILN_FOLD_MAX_WORK 1.0e7

static bool foldable_opcode(kiln_hlo_opcode_t op) {
  switch (op) {
    case KILN_OP_BROADCAST:
    case KILN_OP_IOTA:
    case KILN_OP_PARAMETER:
    case KILN_OP_CONSTANT:
    case KILN_OP_RNG:
    case KILN_OP_RNG_BIT_GENERATOR:
    case KILN_OP_RNG_GET_AND_UPDATE_STATE:
    case KILN_OP_CALL:
    case KILN_OP_WHILE:
    case KILN_OP_CONDITIONAL:
    case KILN_OP_FUSION:
    case KILN_OP_CUSTOM_CALL:
    case KILN_OP_TUPLE:
    case KILN_OP_AFTER_ALL:
    case KILN_OP_ADD_DEPENDENCY:
    case KILN_OP_DOMAIN:
    case KILN_OP_OPTIMIZATION_BARRIER:
    case KILN_OP_PARTITION_ID:
    case KILN_OP_REPLICA_ID:
    case KILN_OP_GET_DIMENSION_SIZE:
    case KILN_OP_SET_DIMENSION_SIZE:
    case KILN_OP_DYNAMIC_RESHAPE:
      return false;
    default:
      return true;
  }
}

static double elements(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    double n = 0;
    for (int i = 0; i < s->num_elements; i++) n += elements(s->elements[i]);
    return n;
  }
  return kiln_shape_is_array(s) ? (double)kiln_shape_num_elements(s) : 0;
}

/* Rough element-operation count of evaluating `in`. */
static double work_estimate(const kiln_hlo_instruction_t *in) {
  double out = elements(in->shape), ins = 0;
  for (int i = 0; i < in->num_operands; i++) ins += elements(in->operands[i]->shape);
  double w = out + ins;
  if (in->opcode == KILN_OP_DOT) {
    const kiln_shape_t *lhs = in->operands[0]->shape;
    double k = 1;
    for (int i = 0; i < in->dot_dnums.lhs_contracting.n; i++) {
      int64_t d = in->dot_dnums.lhs_contracting.v[i];
      if (d >= 0 && d < lhs->rank) k *= (double)lhs->dims[d];
    }
    w += out * k;
  } else if (in->opcode == KILN_OP_CONVOLUTION) {
    w += out * elements(in->operands[1]->shape);
  } else if (in->num_window_dims) {
    double win = 1;
    for (int i = 0; i < in->num_window_dims; i++) win *= (double)in->window[i].size;
    w += (out + ins) * win;
  } else if (in->opcode == KILN_OP_SORT) {
    w *= 64;
  }
  return w;
}

static bool should_fold(const kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  if (in->num_operands == 0 || !foldable_opcode(in->opcode)) return false;
  /* A collective's value depends on the other participants, which this folder cannot see. */
  if (kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  if (!in->shape || !kiln_shape_is_array(in->shape)) return false;
  for (int i = 0; i < in->num_operands; i++) {
    const kiln_hlo_instruction_t *op = in->operands[i];
    if (op->opcode != KILN_OP_CONSTANT || !op->literal || op->literal->unknown) return false;
  }
  if (kiln_shape_num_elements(in->shape) > KILN_FOLD_MAX_RESULT_ELEMENTS) return false;
  if (work_estimate(in) > KILN_FOLD_MAX_WORK) return false;
  return !kiln_pass_effects_instruction(effects, in);
}

/* Evaluates `in` on its constant operands in a scratch module; the result literal is
 * copied into the module's arena. NULL when the evaluator refuses. */
static kiln_literal_t *evaluate(kiln_hlo_instruction_t *in) {
  kiln_hlo_module_t *m = in->parent->module;
  kiln_hlo_module_t *tm = kiln_hlo_module_create("constant_folding");
  kiln_hlo_computation_t *c = kiln_hlo_computation_create(tm, "fold");
  if (!c) {
    kiln_hlo_module_destroy(tm);
    return NULL;
  }
  c->is_entry = true;
  tm->entry = c;
  kiln_hlo_instruction_t *ops[64];
  int n = in->num_operands;
  if (n > 64) {
    kiln_hlo_module_destroy(tm);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "operand.%d", i);
    ops[i] = kiln_hlo_instruction_create(c, KILN_OP_CONSTANT, in->operands[i]->shape, name);
    if (!ops[i]) {
      kiln_hlo_module_destroy(tm);
      return NULL;
    }
    ops[i]->literal = in->operands[i]->literal; /* borrowed, read-only */
  }
  /* Attribute arrays and called computations stay shared with `m`, which outlives `tm`. */
  c->root = kiln_hlo_instruction_clone(c, in, "folded", n, ops);
  kiln_literal_t *result = NULL, *copy = NULL;
  kiln_arena_t out;
  kiln_arena_init(&out);
  kiln_eval_options_t eo = {0};
  eo.max_while_iterations = 1 << 20;
  kiln_status s = c->root ? kiln_eval_module(tm, &eo, 0, NULL, &out, &result) : NULL;
  if (s) {
    KILN_LOG_D("constant folding: '%s' stays: %s", in->name, kiln_status_message(s));
    kiln_status_free(s);
  } else if (result && kiln_shape_is_array(result->shape) && !result->unknown &&
             kiln_shape_compatible(result->shape, in->shape)) {
    copy = kiln_eval_literal_clone(&m->arena, result);
    if (copy) copy->shape = in->shape;
  }
  kiln_arena_destroy(&out);
  kiln_hlo_module_destroy(tm);
  return copy;
}

kiln_status kiln_pass_constant_folding(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                       bool *changed) {
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    size_t n = 0;
    kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
    bool comp_changed = false;
    for (size_t i = 0; i < n; i++) {
      kiln_hlo_instruction_t *in = order[i];
      if (!should_fold(in, &effects)) continue;
      kiln_literal_t *lit = evaluate(in);
      if (!lit) continue;
      kiln_hlo_instruction_t *k = kiln_hlo_instruction_create(
          c, KILN_OP_CONSTANT, in->shape, kiln_hlo_module_unique_name(m, "constant"));
      if (!k) continue;
      k->literal = lit;
      kiln_pass_replace_instruction(in, k, &effects);
      comp_changed = true;
    }
    kiln_free(order);
    if (comp_changed) {
      kiln_hlo_computation_sort_post_order(c);
      *changed = true;
    }
  }
  kiln_pass_effects_free(&effects);
  return NULL;
}
