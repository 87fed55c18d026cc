/* The evaluator's custom calls: XLA's well-known targets computed directly (the compiler
 * rewrites the same targets into HLO: compiler/passes/custom_call_rewrite.c, so the two
 * check each other), then whatever the caller's options->custom_call implements. */
#include <string.h>

#include "compiler/eval/eval.h"

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

static kiln_status threefry(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                            kiln_literal_t *const *ops, kiln_literal_t **out) {
  if (in->num_operands != 4 || !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 2)
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "custom call %s (cuda_threefry2x32): expected 4 operands and a pair",
                            in->name);
  int64_t n = ops[0]->num_elements;
  for (int i = 0; i < 4; i++)
    if (ops[i]->shape->type != KILN_U32 || ops[i]->num_elements != n)
      return kiln_status_make(KILN_INVALID_ARGUMENT,
                              "custom call %s (cuda_threefry2x32): operands must be u32 of one "
                              "size",
                              in->name);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *y0 = (*out)->tuple_elements[0], *y1 = (*out)->tuple_elements[1];
  if (y0->num_elements != n || y1->num_elements != n)
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "custom call %s (cuda_threefry2x32): results differ in size", in->name);
  const uint32_t *k0 = ops[0]->data, *k1 = ops[1]->data, *x0 = ops[2]->data, *x1 = ops[3]->data;
  uint32_t *o0 = y0->data, *o1 = y1->data;
  for (int64_t i = 0; i < n; i++) {
    uint32_t k[2] = {k0[i], k1[i]}, c[2] = {x0[i], x1[i]}, o[2];
    kiln_eval_threefry2x32(k, c, o);
    o0[i] = o[0];
    o1[i] = o[1];
  }
  return NULL;
}

kiln_status kiln_eval_custom_call(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                  kiln_literal_t *const *ops, kiln_literal_t **out) {
  const char *t = in->custom_call_target ? in->custom_call_target : "";
  if (is_identity_target(t) && in->num_operands == 1 && kiln_shape_is_array(in->shape) &&
      kiln_shape_is_array(ops[0]->shape) && kiln_shape_compatible(in->shape, ops[0]->shape))
    return kiln_eval_literal_view(ctx, in->shape, ops[0], out);
  if ((!strcmp(t, "AllocateBuffer") || !strcmp(t, "CreateBuffer")) && in->num_operands == 0)
    return kiln_eval_literal_alloc(ctx, in->shape, out);
  if (!strncmp(t, "xla_builder.", 12)) {
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "called_computations");
    if (c) return kiln_eval_computation(ctx, c, in->num_operands, ops, out);
  }
  if (!strcmp(t, "cuda_threefry2x32")) return threefry(ctx, in, ops, out);
  if (ctx->opts && ctx->opts->custom_call) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
    KILN_RETURN_IF_ERROR(ctx->opts->custom_call(ctx->opts->custom_call_user, in, ops, *out),
                         "in custom call %s (%s)", in->name, t);
    return NULL;
  }
  return kiln_status_make(KILN_UNIMPLEMENTED,
                          "custom call %s: the evaluator does not implement target '%s'", in->name,
                          t);
}
