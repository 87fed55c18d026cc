/* while_loop_unroll (XLA's WhileLoopUnroller unrolling in full, and the part of
 * WhileLoopSimplifier that removes loops of zero or one trip): a while loop whose trip count
 * is known when it compiles becomes that many copies of its body in sequence, each reading
 * the tuple the one before made, the first the loop's initial value; the loop's users read the
 * last copy's tuple (the initial value itself when the loop runs no step). Later passes of the
 * group fold the state tuples away, the counter into constants, and fusion then sees one
 * straight computation: a threefry hash (JAX's rolled loop of five rounds) becomes a few kernels
 * instead of five steps of small kernels and state copies, each step a trip through the
 * runtime's loop.
 *
 * The trip count is known when one state element is a counter: its initial value (the loop's
 * initial tuple's operand) is an integer constant, the body's next value is
 * add(get-tuple-element(param, i), constant step) (either order), and the condition's root
 * compares get-tuple-element(param, i) with a constant (either order, any direction). The
 * count is found by stepping the counter as the loop would (wrapping in its type), up to
 * kMaxTrips.
 *
 * Loops of zero or one trip go whatever their body holds (a single copy keeps the order of its
 * side effects; no copy runs none). Longer loops are unrolled when the copies add at most
 * kMaxCopiedInstructions instructions, the body calls no loop, conditional or call (their
 * computations would be shared between copies; the pass runs to a fixed point, so an inner
 * loop unrolled first leaves the outer loop plain), and nothing in it has a side effect or
 * is a collective (copies of either would run in an order no data dependency fixes). The
 * condition must have no side effect (it is dropped) and the loop no control edges. Loops that
 * share a body (a function inlined twice) are each unrolled: the body is only read. */
#include <stdint.h>

#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

/* XLA's WhileLoopUnroller thresholds for a full unroll are 64 trips and 800 instructions per
 * body; the product kiln allows is smaller, since every copy's kernels are compiled. */
enum { kMaxTrips = 64, kMaxCopiedInstructions = 2000 };

/* A counter value of an integer type, kept in 64 bits: unsigned types zero-extended, signed
 * ones sign-extended from their width, so a step wraps as the loop's add would. */
static uint64_t wrap(uint64_t v, kiln_elem_type_t t) {
  const int bits = kiln_elem_type_bits(t);
  if (bits >= 64) return v;
  const uint64_t mask = (UINT64_C(1) << bits) - 1;
  v &= mask;
  if (kiln_elem_type_is_signed_int(t) && (v >> (bits - 1)) & 1) v |= ~mask;
  return v;
}

static bool holds(uint64_t a, uint64_t b, kiln_cmp_dir_t dir, bool is_signed) {
  const int c =
      is_signed ? ((int64_t)a > (int64_t)b) - ((int64_t)a < (int64_t)b) : (a > b) - (a < b);
  switch (dir) {
    case KILN_CMP_EQ:
      return c == 0;
    case KILN_CMP_NE:
      return c != 0;
    case KILN_CMP_LT:
      return c < 0;
    case KILN_CMP_LE:
      return c <= 0;
    case KILN_CMP_GT:
      return c > 0;
    case KILN_CMP_GE:
      return c >= 0;
    default:
      return false;
  }
}

/* The value of an integer scalar constant of type `t`. */
static bool int_constant(const kiln_hlo_instruction_t *in, kiln_elem_type_t t, uint64_t *v) {
  if (in->opcode != KILN_OP_CONSTANT || !in->literal || in->literal->unknown ||
      in->shape->type != t || in->shape->rank != 0)
    return false;
  *v = wrap(kiln_elem_type_is_signed_int(t) ? (uint64_t)kiln_literal_get_s64(in->literal, 0)
                                            : kiln_literal_get_u64(in->literal, 0),
            t);
  return true;
}

static bool reads_element(const kiln_hlo_instruction_t *in, const kiln_hlo_instruction_t *param,
                          int64_t *index) {
  if (in->opcode != KILN_OP_GET_TUPLE_ELEMENT || in->operands[0] != param) return false;
  *index = in->tuple_index;
  return true;
}

static kiln_cmp_dir_t mirrored(kiln_cmp_dir_t d) {
  switch (d) {
    case KILN_CMP_LT:
      return KILN_CMP_GT;
    case KILN_CMP_LE:
      return KILN_CMP_GE;
    case KILN_CMP_GT:
      return KILN_CMP_LT;
    case KILN_CMP_GE:
      return KILN_CMP_LE;
    default:
      return d;
  }
}

/* The loop's trip count when a counter decides it and it is at most kMaxTrips; -1 otherwise. */
static int64_t trip_count(const kiln_hlo_instruction_t *w, const kiln_hlo_computation_t *body,
                          const kiln_hlo_computation_t *cond) {
  const kiln_hlo_instruction_t *cmp = cond->root, *init = w->operands[0], *root = body->root;
  if (!cmp || cmp->opcode != KILN_OP_COMPARE || cmp->num_operands != 2 ||
      init->opcode != KILN_OP_TUPLE || !root || root->opcode != KILN_OP_TUPLE ||
      body->num_parameters != 1 || cond->num_parameters != 1)
    return -1;
  /* counter <dir> bound, or bound <dir> counter */
  int64_t i;
  int side = reads_element(cmp->operands[0], cond->parameters[0], &i)   ? 0
             : reads_element(cmp->operands[1], cond->parameters[0], &i) ? 1
                                                                        : -1;
  if (side < 0 || i < 0 || i >= init->num_operands || i >= root->num_operands) return -1;
  const kiln_elem_type_t t = cmp->operands[side]->shape->type;
  if (!kiln_elem_type_is_integral(t) || cmp->operands[side]->shape->rank != 0) return -1;
  const bool is_signed = kiln_elem_type_is_signed_int(t);
  if ((cmp->comparison_type == KILN_CMP_TYPE_SIGNED && !is_signed) ||
      (cmp->comparison_type == KILN_CMP_TYPE_UNSIGNED && is_signed) ||
      cmp->comparison_type == KILN_CMP_TYPE_FLOAT ||
      cmp->comparison_type == KILN_CMP_TYPE_TOTALORDER)
    return -1;
  const kiln_cmp_dir_t dir =
      side == 0 ? cmp->comparison_direction : mirrored(cmp->comparison_direction);
  uint64_t bound, start, step;
  if (!int_constant(cmp->operands[1 - side], t, &bound) ||
      !int_constant(init->operands[i], t, &start))
    return -1;
  /* next = counter + step */
  const kiln_hlo_instruction_t *next = root->operands[i];
  if (next->opcode != KILN_OP_ADD) return -1;
  int64_t j;
  int counter_side = reads_element(next->operands[0], body->parameters[0], &j) && j == i   ? 0
                     : reads_element(next->operands[1], body->parameters[0], &j) && j == i ? 1
                                                                                           : -1;
  if (counter_side < 0 || !int_constant(next->operands[1 - counter_side], t, &step)) return -1;
  int64_t trips = 0;
  for (uint64_t v = start; holds(v, bound, dir, is_signed); v = wrap(v + step, t))
    if (++trips > kMaxTrips) return -1;
  return trips;
}

/* Whether copies of the body may run in sequence outside a loop, trips >= 2 of them. */
static bool copies_may_repeat(const kiln_hlo_computation_t *body, int64_t trips,
                              kiln_pass_effects_t *effects) {
  int64_t n = 0;
  for (size_t k = 0; k < body->instructions.len; k++) {
    const kiln_hlo_instruction_t *in = body->instructions.data[k];
    if (!in || in->opcode == KILN_OP_PARAMETER) continue;
    switch (in->opcode) {
      case KILN_OP_WHILE:
      case KILN_OP_CONDITIONAL:
      case KILN_OP_CALL:
        return false;
      default:
        break;
    }
    if ((kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) ||
        kiln_pass_effects_instruction(effects, in))
      return false;
    n++;
  }
  return n * trips <= kMaxCopiedInstructions;
}

static bool cond_has_effects(const kiln_hlo_computation_t *cond, kiln_pass_effects_t *effects) {
  for (size_t k = 0; k < cond->instructions.len; k++) {
    const kiln_hlo_instruction_t *in = cond->instructions.data[k];
    if (in && kiln_pass_effects_instruction(effects, in)) return true;
  }
  return false;
}

/* Replaces `w` by `trips` copies of its body; false when it does not take the loop or the
 * arena refused memory (copies made by then stay unused for DCE). */
static bool unroll(kiln_hlo_instruction_t *w, kiln_pass_effects_t *effects) {
  if (w->num_operands != 1 || w->num_control_predecessors || w->control_successors.len)
    return false;
  kiln_hlo_computation_t *body = kiln_hlo_instruction_called(w, "body");
  kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(w, "condition");
  if (!body || !cond || body == cond || body == w->parent || cond == w->parent) return false;
  const int64_t trips = trip_count(w, body, cond);
  if (trips < 0 || cond_has_effects(cond, effects)) return false;
  if (trips >= 2 && !copies_may_repeat(body, trips, effects)) return false;
  kiln_hlo_instruction_t *state = w->operands[0];
  for (int64_t k = 0; k < trips && state; k++) state = kiln_pass_copy_body(w->parent, body, &state);
  if (!state) return false;
  /* The loop goes even when its body has side effects: they live in the copies now. */
  kiln_hlo_instruction_t *init = w->operands[0];
  kiln_hlo_instruction_replace_all_uses(w, state);
  kiln_status_free(kiln_hlo_instruction_remove(w));
  kiln_pass_remove_if_dead(init, effects);
  return true;
}

kiln_status kiln_pass_while_loop_unroll(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                        bool *changed) {
  (void)opts;
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  bool any = false;
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    if (!kiln_pass_count_opcode(c, KILN_OP_WHILE, 1)) continue;
    /* Loops found first: unrolling adds instructions to the computation. */
    KILN_VEC(kiln_hlo_instruction_t *) loops = {0};
    for (size_t i = 0; i < c->instructions.len; i++)
      if (c->instructions.data[i] && c->instructions.data[i]->opcode == KILN_OP_WHILE)
        kiln_vec_push(&loops, c->instructions.data[i]);
    bool here = false;
    for (size_t i = 0; i < loops.len; i++) here |= unroll(loops.data[i], &effects);
    kiln_vec_free(&loops);
    if (here) kiln_hlo_computation_sort_post_order(c);
    any |= here;
  }
  kiln_pass_effects_free(&effects);
  /* The unrolled loops' bodies and conditions. */
  if (any) kiln_pass_remove_unreachable_computations(m);
  *changed |= any;
  return NULL;
}
