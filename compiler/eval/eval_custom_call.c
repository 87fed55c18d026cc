/* The evaluator's custom calls: XLA's well-known targets computed directly (the compiler
 * rewrites the same targets into HLO: compiler/passes/custom_call_rewrite.c, so the two
 * check each other), then whatever the caller's options->custom_call implements. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/eval/eval.h"

bool kiln_eval_is_identity_target(const char *t) {
  static const char *const kNames[] = {"Sharding",
                                       "SPMDFullToShardShape",
                                       "SPMDShardToFullShape",
                                       "MoveToHost",
                                       "MoveToDevice",
                                       "Pin",
                                       "Unpin",
                                       "annotate_device_placement",
                                       "SetBound"};
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

bool kiln_eval_is_gemm_target(const char *t) {
  return t && (!strcmp(t, "__cublas$gemm") || !strcmp(t, "__cublas$lt$matmul"));
}

/* The number after "key": in `json` (def when absent). */
static bool json_number(const char *json, const char *key, double def, double *out) {
  const char *p = strstr(json, key);
  *out = def;
  if (!p) return true;
  p += strlen(key);
  while (*p == ' ' || *p == ':') p++;
  if (*p == '"') p++;
  char *end;
  double v = strtod(p, &end);
  if (end == p) return false;
  *out = v;
  return true;
}

/* "key":["1","2"] (or [1,2]) into dims[*at...]; sets the list. */
static bool json_list(const char *json, const char *key, kiln_gemm_config_t *g, int *at,
                      kiln_i64_list_t *list) {
  list->n = 0;
  list->v = g->dims + *at;
  const char *p = strstr(json, key);
  if (!p) return true;
  p = strchr(p + strlen(key), '[');
  if (!p) return false;
  p++;
  for (;;) {
    while (*p == ' ' || *p == '"' || *p == ',') p++;
    if (*p == ']') return true;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || *at >= 32 || list->n >= 8) return false;
    g->dims[(*at)++] = v;
    list->n++;
    p = end;
  }
}

bool kiln_eval_gemm_config(const char *json, kiln_gemm_config_t *g) {
  memset(g, 0, sizeof(*g));
  if (!json) return false;
  double imag;
  if (!json_number(json, "\"alpha_real\"", 1.0, &g->alpha) ||
      !json_number(json, "\"alpha_imag\"", 0.0, &imag) ||
      !json_number(json, "\"beta\"", 0.0, &g->beta) || imag != 0.0)
    return false;
  int at = 0;
  if (!json_list(json, "\"lhs_contracting_dimensions\"", g, &at, &g->dnums.lhs_contracting) ||
      !json_list(json, "\"rhs_contracting_dimensions\"", g, &at, &g->dnums.rhs_contracting) ||
      !json_list(json, "\"lhs_batch_dimensions\"", g, &at, &g->dnums.lhs_batch) ||
      !json_list(json, "\"rhs_batch_dimensions\"", g, &at, &g->dnums.rhs_batch))
    return false;
  const char *e = strstr(json, "\"epilogue\"");
  if (e) {
    e = strchr(e + 10, ':');
    if (!e) return false;
    while (*e == ':' || *e == ' ' || *e == '"') e++;
    if (!strncmp(e, "RELU\"", 5))
      g->relu = true;
    else if (strncmp(e, "DEFAULT\"", 8))
      return false;
  }
  return true;
}

/* A gemm custom call as the dot it is, then alpha, beta * c and the epilogue. */
static kiln_status gemm(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                        kiln_literal_t *const *ops, kiln_literal_t **out) {
  kiln_gemm_config_t g;
  const kiln_shape_t *rs = kiln_shape_is_tuple(in->shape) && in->shape->num_elements > 0
                               ? in->shape->elements[0]
                               : in->shape;
  if (!kiln_eval_gemm_config(in->backend_config, &g) || in->num_operands < 2 ||
      !kiln_shape_is_array(rs))
    return kiln_status_make(KILN_UNIMPLEMENTED, "custom call %s (%s): unsupported gemm config",
                            in->name, in->custom_call_target);
  kiln_hlo_instruction_t dot = *in;
  dot.opcode = KILN_OP_DOT;
  dot.has_dot_dnums = true;
  dot.dot_dnums = g.dnums;
  dot.num_operands = 2;
  dot.shape = (kiln_shape_t *)rs;
  dot.num_operand_precision = 0;
  kiln_literal_t *d;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_dot_conv(ctx, &dot, ops, &d));
  bool add_c = g.beta != 0.0 && in->num_operands >= 3;
  for (int64_t i = 0; i < d->num_elements; i++) {
    double v = g.alpha * kiln_literal_get_f64(d, i);
    if (add_c) v += g.beta * kiln_literal_get_f64(ops[2], i);
    if (g.relu && v < 0) v = 0;
    kiln_literal_set_f64(d, i, v);
  }
  if (!kiln_shape_is_tuple(in->shape)) {
    *out = d;
    return NULL;
  }
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  (*out)->tuple_elements[0] = d; /* the workspace stays zeros */
  return NULL;
}

/* xla_builder.math.* on real floats, from libm (double, rounded to the type). */
static bool math_fn(const char *name, double (**out)(double)) {
  static const struct {
    const char *name;
    double (*fn)(double);
  } kFns[] = {{"Acos", acos},   {"Asin", asin},   {"Atan", atan},
              {"Acosh", acosh}, {"Asinh", asinh}, {"Cosh", cosh}};
  for (size_t i = 0; i < sizeof kFns / sizeof kFns[0]; i++)
    if (!strcmp(name, kFns[i].name)) {
      *out = kFns[i].fn;
      return true;
    }
  return false;
}

/* The same functions on complex numbers, from C99's <complex.h>. */
static bool cmath_fn(const char *name, double complex (**out)(double complex)) {
  static const struct {
    const char *name;
    double complex (*fn)(double complex);
  } kFns[] = {{"Acos", cacos},   {"Asin", casin},   {"Atan", catan},
              {"Acosh", cacosh}, {"Asinh", casinh}, {"Cosh", ccosh}};
  for (size_t i = 0; i < sizeof kFns / sizeof kFns[0]; i++)
    if (!strcmp(name, kFns[i].name)) {
      *out = kFns[i].fn;
      return true;
    }
  return false;
}

kiln_status kiln_eval_custom_call(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                  kiln_literal_t *const *ops, kiln_literal_t **out) {
  const char *t = in->custom_call_target ? in->custom_call_target : "";
  if (kiln_eval_is_identity_target(t) && in->num_operands == 1 && kiln_shape_is_array(in->shape) &&
      kiln_shape_is_array(ops[0]->shape) && kiln_shape_compatible(in->shape, ops[0]->shape))
    return kiln_eval_literal_view(ctx, in->shape, ops[0], out);
  if ((!strcmp(t, "AllocateBuffer") || !strcmp(t, "CreateBuffer")) && in->num_operands == 0)
    return kiln_eval_literal_alloc(ctx, in->shape, out);
  if (!strncmp(t, "xla_builder.", 12)) {
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "called_computations");
    if (c) return kiln_eval_computation(ctx, c, in->num_operands, ops, out);
    double (*fn)(double);
    if (!strncmp(t, "xla_builder.math.", 17) && math_fn(t + 17, &fn) && in->num_operands == 1 &&
        kiln_shape_is_array(in->shape) && kiln_elem_type_is_float(in->shape->type) &&
        kiln_shape_compatible(in->shape, ops[0]->shape)) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
      for (int64_t i = 0; i < ops[0]->num_elements; i++)
        kiln_literal_set_f64(*out, i, fn(kiln_literal_get_f64(ops[0], i)));
      return NULL;
    }
    double complex (*cfn)(double complex);
    if (!strncmp(t, "xla_builder.math.", 17) && cmath_fn(t + 17, &cfn) && in->num_operands == 1 &&
        kiln_shape_is_array(in->shape) && kiln_elem_type_is_complex(in->shape->type) &&
        kiln_shape_compatible(in->shape, ops[0]->shape)) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
      for (int64_t i = 0; i < ops[0]->num_elements; i++) {
        double re, im;
        kiln_literal_get_c128(ops[0], i, &re, &im);
        double complex w = cfn(re + im * I);
        kiln_literal_set_c128(*out, i, creal(w), cimag(w));
      }
      return NULL;
    }
  }
  if (!strcmp(t, "cuda_threefry2x32")) return threefry(ctx, in, ops, out);
  if (kiln_eval_is_gemm_target(t)) return gemm(ctx, in, ops, out);
  if (ctx->opts && ctx->opts->custom_call) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
    KILN_RETURN_IF_ERROR(ctx->opts->custom_call(ctx->opts->custom_call_user, in, ops, *out),
                         "in custom call %s (%s)", in->name, t);
    return NULL;
  }
  return kiln_status_make(KILN_UNIMPLEMENTED,
                          "evaluator does not support opcode 'custom-call' (instruction '%s') "
                          "with target '%s'",
                          in->name, t);
}
