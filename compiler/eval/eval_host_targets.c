/* The evaluator's side of the custom calls kiln's host runtime implements itself
 * (compiler/thunks/builtin_custom_call.c): XLA:CPU's `__onednn$layernorm` and `GetRngSeed`,
 * jaxlib's `cusolver_geqrf` / `cusolver_orgqr` (LAPACK's conventions, base/householder.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/householder.h"
#include "compiler/eval/eval.h"

/* The value of JSON key `key` (quoted) in `json`: the first character after its ':' and
 * blanks, or NULL when the key is absent. */
static const char *json_value(const char *json, const char *key) {
  size_t len = strlen(key);
  for (const char *p = json ? strchr(json, '"') : NULL; p; p = strchr(p + 1, '"')) {
    if (strncmp(p + 1, key, len) || p[len + 1] != '"') continue;
    const char *v = p + len + 2;
    while (*v == ' ' || *v == '\t' || *v == '\n') v++;
    if (*v != ':') continue;
    v++;
    while (*v == ' ' || *v == '\t' || *v == '\n') v++;
    return v;
  }
  return NULL;
}

bool kiln_eval_layer_norm_config(const kiln_hlo_instruction_t *in, float *epsilon,
                                 const char **why) {
  *epsilon = 0;
  *why = NULL;
  const char *cfg = in->backend_config ? in->backend_config : "";
  if (in->num_operands != 3 || !kiln_shape_is_array(in->shape) || in->shape->rank < 1 ||
      (in->shape->type != KILN_F32 && in->shape->type != KILN_F64)) {
    *why = "kiln takes (input, scale, shift) of f32 or f64 with one result";
    return false;
  }
  for (int i = 0; i < 3; i++) {
    const kiln_shape_t *s = in->operands[i]->shape;
    int64_t last = in->shape->dims[in->shape->rank - 1];
    bool ok = kiln_shape_is_array(s) && s->type == in->shape->type &&
              (i == 0 ? kiln_shape_compatible(s, in->shape) : s->rank == 1 && s->dims[0] == last);
    if (!ok) {
      *why = "the input must have the result's shape, scale and shift its last dimension";
      return false;
    }
  }
  const char *r = json_value(cfg, "rescale");
  if (r && strncmp(r, "\"SCALE_AND_SHIFT\"", 17) && strncmp(r, "0", 1)) {
    *why = "only rescale SCALE_AND_SHIFT is implemented";
    return false;
  }
  /* epsilon_typed holds the f32's bits (XLA reinterprets the integer; absent reads 0). */
  const char *e = json_value(cfg, "epsilon_typed");
  if (e) {
    char *end = NULL;
    unsigned long long bits = strtoull(*e == '"' ? e + 1 : e, &end, 10);
    if (end == e || bits > 0xffffffffull) {
      *why = "epsilon_typed is not a 32-bit integer";
      return false;
    }
    uint32_t b32 = (uint32_t)bits;
    memcpy(epsilon, &b32, sizeof b32);
  }
  return true;
}

static kiln_status layer_norm(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                              kiln_literal_t *const *ops, kiln_literal_t **out) {
  float eps;
  const char *why;
  if (!kiln_eval_layer_norm_config(in, &eps, &why))
    return kiln_status_make(KILN_UNIMPLEMENTED, "custom call %s (%s): %s", in->name,
                            in->custom_call_target, why);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  int64_t c = in->shape->dims[in->shape->rank - 1];
  for (int64_t base = 0; c && base < ops[0]->num_elements; base += c) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; j++) mean += kiln_literal_get_f64(ops[0], base + j);
    mean /= (double)c;
    for (int64_t j = 0; j < c; j++) {
      double d = kiln_literal_get_f64(ops[0], base + j) - mean;
      var += d * d;
    }
    double inv = 1 / sqrt(var / (double)c + eps);
    for (int64_t j = 0; j < c; j++)
      kiln_literal_set_f64(
          *out, base + j,
          (kiln_literal_get_f64(ops[0], base + j) - mean) * inv * kiln_literal_get_f64(ops[1], j) +
              kiln_literal_get_f64(ops[2], j));
  }
  return NULL;
}

bool kiln_eval_qr_shapes(const kiln_hlo_instruction_t *in, bool orgqr, int64_t *batch, int64_t *m,
                         int64_t *n, int64_t *k) {
  const kiln_shape_t *a = in->num_operands >= 1 ? in->operands[0]->shape : NULL;
  int nres = orgqr ? 3 : 4;
  if (in->num_operands != (orgqr ? 2 : 1) || !a || !kiln_shape_is_array(a) || a->rank < 2 ||
      (a->type != KILN_F32 && a->type != KILN_F64) || !kiln_shape_is_tuple(in->shape) ||
      in->shape->num_elements < nres - 1)
    return false;
  *m = a->dims[a->rank - 2];
  *n = a->dims[a->rank - 1];
  *batch = 1;
  for (int i = 0; i < a->rank - 2; i++) *batch *= a->dims[i];
  const kiln_shape_t *tau = orgqr ? in->operands[1]->shape : in->shape->elements[1];
  *k = kiln_shape_is_array(tau) && tau->rank == a->rank - 1 ? tau->dims[tau->rank - 1] : -1;
  if (*k < 0 || tau->type != a->type || (!orgqr && *k != (*m < *n ? *m : *n))) return false;
  if (orgqr && (*n > *m || *k > *n)) return false;
  const kiln_shape_t *r0 = in->shape->elements[0];
  const kiln_shape_t *info = in->shape->elements[orgqr ? 1 : 2];
  return kiln_shape_is_array(r0) && kiln_shape_compatible(r0, a) && kiln_shape_is_array(info) &&
         (info->type == KILN_S32 || info->type == KILN_S64);
}

/* geqrf: (a) -> (factored a, tau, info, workspace...); orgqr: (a, tau) -> (q, info,
 * workspace...). info is 0 (the loops cannot fail); workspaces are zeros. */
static kiln_status qr(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in, bool orgqr,
                      kiln_literal_t *const *ops, kiln_literal_t **out) {
  int64_t batch, m, n, k;
  if (!kiln_eval_qr_shapes(in, orgqr, &batch, &m, &n, &k))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "custom call %s (%s): unsupported operands or results (kiln takes "
                            "f32/f64 [..., m, n] matrices%s)",
                            in->name, in->custom_call_target, orgqr ? ", n <= m" : "");
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *a = (*out)->tuple_elements[0];
  kiln_literal_t *tau = orgqr ? ops[1] : (*out)->tuple_elements[1];
  double *w = kiln_try_malloc(sizeof(double) * (size_t)(m * n + k + 1));
  if (!w) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  double *t = w + m * n;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        w[i + j * m] = kiln_literal_get_f64(ops[0], (b * m + i) * n + j);
    if (orgqr) {
      for (int64_t j = 0; j < k; j++) t[j] = kiln_literal_get_f64(tau, b * k + j);
      kiln_householder_orgqr(m, n, k, w, m, t);
    } else {
      kiln_householder_geqrf(m, n, w, m, t);
      for (int64_t j = 0; j < k; j++) kiln_literal_set_f64(tau, b * k + j, t[j]);
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) kiln_literal_set_f64(a, (b * m + i) * n + j, w[i + j * m]);
  }
  kiln_free(w);
  return NULL;
}

kiln_status kiln_eval_host_target(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                  kiln_literal_t *const *ops, kiln_literal_t **out, bool *handled) {
  const char *t = in->custom_call_target ? in->custom_call_target : "";
  *handled = true;
  if (!strcmp(t, "__onednn$layernorm")) return layer_norm(ctx, in, ops, out);
  if (!strcmp(t, "cusolver_geqrf")) return qr(ctx, in, false, ops, out);
  if (!strcmp(t, "cusolver_orgqr")) return qr(ctx, in, true, ops, out);
  if (!strcmp(t, "GetRngSeed") && in->num_operands == 0 && kiln_shape_is_array(in->shape) &&
      in->shape->rank == 0 && in->shape->type == KILN_U64) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
    kiln_literal_set_u64(*out, 0, ctx->opts ? ctx->opts->rng_seed : 0);
    return NULL;
  }
  *handled = false;
  return NULL;
}
