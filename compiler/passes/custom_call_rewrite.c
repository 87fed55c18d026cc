/* custom_call_rewrite: XLA's well-known custom-call targets that kiln implements itself,
 * rewritten into plain HLO before the pipeline (the evaluator implements the same targets
 * directly: compiler/eval/eval_custom_call.c):
 *   Sharding, SPMDFullToShardShape, SPMDShardToFullShape (one device), MoveToHost,
 *   MoveToDevice, Pin, Unpin, annotate_device_placement   -> a copy of the operand (identity;
 *       only where the result has the operand's element type and dims);
 *   AllocateBuffer, CreateBuffer                           -> zeros (the contents are
 *       unspecified; the evaluator gives zeros too);
 *   xla_builder.* with one called computation              -> a call of it (call_inline then
 *       inlines it: the call carries its own decomposition);
 *   cuda_threefry2x32 (k0, k1, x0, x1 -> (y0, y1), u32)    -> Threefry2x32, 20 rounds, as
 *       elementwise u32 HLO.
 * Anything else stays a custom call: thunk emission looks for a handler in the FFI registry. */
#include <string.h>

#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

static bool is_identity_target(const char *t) {
  static const char *const kNames[] = {"Sharding",
                                       "SPMDFullToShardShape",
                                       "SPMDShardToFullShape",
                                       "MoveToHost",
                                       "MoveToDevice",
                                       "Pin",
                                       "Unpin",
                                       "annotate_device_placement"};
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; i++)
    if (!strcmp(t, kNames[i])) return true;
  return false;
}

static bool same_array(const kiln_shape_t *a, const kiln_shape_t *b) {
  return kiln_shape_is_array(a) && kiln_shape_is_array(b) && kiln_shape_compatible(a, b);
}

static kiln_hlo_instruction_t *splat_u32(kiln_builder_t *b, uint32_t v,
                                         const kiln_hlo_instruction_t *like) {
  return kiln_builder_splat(b, kiln_builder_const_u64(b, KILN_U32, v), like);
}

#define BIN(op, x, y) kiln_builder_binary(b, KILN_OP_##op, (x), (y))

static kiln_hlo_instruction_t *rotl(kiln_builder_t *b, kiln_hlo_instruction_t *x, int k) {
  return BIN(OR, BIN(SHIFT_LEFT, x, splat_u32(b, (uint32_t)k, x)),
             BIN(SHIFT_RIGHT_LOGICAL, x, splat_u32(b, (uint32_t)(32 - k), x)));
}

/* Threefry2x32 (20 rounds) with per-element keys, as jax's cuda_threefry2x32 kernel. */
static kiln_hlo_instruction_t *threefry(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  if (in->num_operands != 4 || !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 2)
    return NULL;
  const kiln_shape_t *s = in->operands[0]->shape;
  for (int i = 0; i < 4; i++)
    if (!same_array(in->operands[i]->shape, s) || in->operands[i]->shape->type != KILN_U32)
      return NULL;
  for (int i = 0; i < 2; i++)
    if (!same_array(in->shape->elements[i], s)) return NULL;
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  kiln_hlo_instruction_t *ks[3];
  ks[0] = in->operands[0];
  ks[1] = in->operands[1];
  ks[2] = BIN(XOR, BIN(XOR, splat_u32(b, 0x1BD11BDAu, ks[0]), ks[0]), ks[1]);
  kiln_hlo_instruction_t *x0 = BIN(ADD, in->operands[2], ks[0]);
  kiln_hlo_instruction_t *x1 = BIN(ADD, in->operands[3], ks[1]);
  for (int group = 0; group < 5; group++) {
    for (int k = 0; k < 4; k++) {
      x0 = BIN(ADD, x0, x1);
      x1 = BIN(XOR, rotl(b, x1, rot[(group % 2) * 4 + k]), x0);
    }
    int j = group + 1;
    x0 = BIN(ADD, x0, ks[j % 3]);
    x1 = BIN(ADD, BIN(ADD, x1, ks[(j + 1) % 3]), splat_u32(b, (uint32_t)j, x1));
  }
  if (!x0 || !x1) return NULL;
  x0->shape = in->shape->elements[0];
  x1->shape = in->shape->elements[1];
  kiln_hlo_instruction_t *outs[2] = {x0, x1};
  kiln_hlo_instruction_t *t = kiln_builder_tuple(b, 2, outs);
  if (t) t->shape = in->shape;
  return t;
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  (void)ctx;
  const char *t = in->custom_call_target;
  if (!t) return NULL;
  if (is_identity_target(t)) {
    if (in->num_operands != 1 || !same_array(in->operands[0]->shape, in->shape)) return NULL;
    /* An annotation marked side-effecting would outlive its replacement: it goes. */
    kiln_hlo_instruction_set_raw_attr(in, "custom_call_has_side_effect", "false");
    kiln_hlo_instruction_t *op = in->operands[0];
    return kiln_builder_op(b, KILN_OP_COPY, in->shape, 1, &op);
  }
  if (!strcmp(t, "AllocateBuffer") || !strcmp(t, "CreateBuffer")) {
    if (in->num_operands != 0 || !kiln_shape_is_array(in->shape)) return NULL;
    kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, in->shape->type, 0);
    if (!zero) return NULL;
    kiln_hlo_instruction_t *r = kiln_builder_op(b, KILN_OP_BROADCAST, in->shape, 1, &zero);
    return r;
  }
  if (!strncmp(t, "xla_builder.", 12)) {
    kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(in, "called_computations");
    if (!callee || callee->num_parameters != in->num_operands) return NULL;
    kiln_hlo_instruction_t *call =
        kiln_builder_op(b, KILN_OP_CALL, in->shape, in->num_operands, in->operands);
    if (call) kiln_hlo_instruction_add_called(call, "to_apply", false, 1, &callee);
    return call;
  }
  if (!strcmp(t, "cuda_threefry2x32")) return threefry(b, in);
  return NULL;
}

kiln_status kiln_pass_custom_call_rewrite(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  (void)opts;
  return kiln_builder_expand_all(m, KILN_OP_CUSTOM_CALL, expand, NULL, "custom_call_rewrite",
                                 changed);
}
