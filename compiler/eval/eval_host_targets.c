/* The evaluator's side of the custom calls kiln's host runtime implements itself
 * (compiler/thunks/builtin_custom_call.c): XLA:CPU's `__onednn$layernorm` and `GetRngSeed`,
 * jaxlib's `cusolver_geqrf` / `cusolver_orgqr` and `lapack_{s,d}geqrf_ffi` / `orgqr_ffi`
 * (LAPACK's conventions, base/householder.h; the c / z forms base/zlinalg.h), LAPACK's
 * ?syevd / ?heevd, ?gesdd (base/jacobi_eigh.h, base/zlinalg.h) and ?gtsv (base/gtsv.h). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/gtsv.h"
#include "base/householder.h"
#include "base/jacobi_eigh.h"
#include "base/zlinalg.h"
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

bool kiln_eval_solver_matrix_type(kiln_elem_type_t t) {
  return t == KILN_F32 || t == KILN_F64 || t == KILN_C64 || t == KILN_C128;
}

kiln_elem_type_t kiln_eval_real_part_type(kiln_elem_type_t t) {
  return t == KILN_C64 ? KILN_F32 : t == KILN_C128 ? KILN_F64 : t;
}

bool kiln_eval_is_qr_target(const char *t, bool *orgqr) {
  if (!t) return false;
  if (!strcmp(t, "cusolver_geqrf") || !strcmp(t, "cusolver_orgqr")) {
    *orgqr = t[9] == 'o';
    return true;
  }
  /* lapack_<s|d|c|z><geqrf|orgqr|ungqr>_ffi */
  if (strncmp(t, "lapack_", 7) != 0 || !strchr("sdcz", t[7]) || t[7] == 0) return false;
  const char *f = t + 8;
  if (!strcmp(f, "geqrf_ffi"))
    *orgqr = false;
  else if (!strcmp(f, "orgqr_ffi") || !strcmp(f, "ungqr_ffi"))
    *orgqr = true;
  else
    return false;
  return true;
}

bool kiln_eval_qr_shapes(const kiln_hlo_instruction_t *in, bool orgqr, int64_t *batch, int64_t *m,
                         int64_t *n, int64_t *k) {
  const kiln_shape_t *a = in->num_operands >= 1 ? in->operands[0]->shape : NULL;
  if (in->num_operands != (orgqr ? 2 : 1) || !a || !kiln_shape_is_array(a) || a->rank < 2 ||
      !kiln_eval_solver_matrix_type(a->type))
    return false;
  /* the factored matrix (or q), geqrf's tau, and an info when the form has one */
  bool tuple = kiln_shape_is_tuple(in->shape);
  int nres = tuple ? in->shape->num_elements : 1, info_at = orgqr ? 1 : 2;
  if (nres < (orgqr ? 1 : 2)) return false;
  *m = a->dims[a->rank - 2];
  *n = a->dims[a->rank - 1];
  *batch = 1;
  for (int i = 0; i < a->rank - 2; i++) *batch *= a->dims[i];
  const kiln_shape_t *tau = orgqr ? in->operands[1]->shape : in->shape->elements[1];
  *k = kiln_shape_is_array(tau) && tau->rank == a->rank - 1 ? tau->dims[tau->rank - 1] : -1;
  if (*k < 0 || tau->type != a->type || (!orgqr && *k != (*m < *n ? *m : *n))) return false;
  if (orgqr && (*n > *m || *k > *n)) return false;
  const kiln_shape_t *r0 = tuple ? in->shape->elements[0] : in->shape;
  const kiln_shape_t *info = nres > info_at ? in->shape->elements[info_at] : NULL;
  return kiln_shape_is_array(r0) && kiln_shape_compatible(r0, a) &&
         (!info ||
          (kiln_shape_is_array(info) && (info->type == KILN_S32 || info->type == KILN_S64)));
}

/* qr's complex form (ungqr for orgqr), into the allocated a and tau. */
static kiln_status zqr(const kiln_hlo_instruction_t *in, bool orgqr, kiln_literal_t *const *ops,
                       kiln_literal_t *a, kiln_literal_t *tau, int64_t m, int64_t n, int64_t k) {
  int64_t batch = m && n ? ops[0]->num_elements / (m * n) : 0;
  double complex *w = kiln_try_malloc(sizeof(double complex) * (size_t)(m * n + k + 1));
  if (!w) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  double complex *t = w + m * n;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        w[i + j * m] = kiln_eval_get_complex(ops[0], (b * m + i) * n + j);
    if (orgqr) {
      for (int64_t j = 0; j < k; j++) t[j] = kiln_eval_get_complex(tau, b * k + j);
      kiln_householder_zungqr(m, n, k, w, m, t);
    } else {
      kiln_householder_zgeqrf(m, n, w, m, t);
      for (int64_t j = 0; j < k; j++) kiln_eval_set_complex(tau, b * k + j, t[j]);
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) kiln_eval_set_complex(a, (b * m + i) * n + j, w[i + j * m]);
  }
  kiln_free(w);
  return NULL;
}

/* geqrf: (a) -> (factored a, tau, info, workspace...); orgqr: (a, tau) -> (q, info,
 * workspace...). info is 0 (the loops cannot fail); workspaces are zeros. */
static kiln_status qr(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in, bool orgqr,
                      kiln_literal_t *const *ops, kiln_literal_t **out) {
  int64_t batch, m, n, k;
  if (!kiln_eval_qr_shapes(in, orgqr, &batch, &m, &n, &k))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "custom call %s (%s): unsupported operands or results (kiln takes "
                            "f32/f64/c64/c128 [..., m, n] matrices%s)",
                            in->name, in->custom_call_target, orgqr ? ", n <= m" : "");
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *a = kiln_shape_is_tuple(in->shape) ? (*out)->tuple_elements[0] : *out;
  kiln_literal_t *tau = orgqr ? ops[1] : (*out)->tuple_elements[1];
  if (kiln_elem_type_is_complex(ops[0]->shape->type)) return zqr(in, orgqr, ops, a, tau, m, n, k);
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

bool kiln_eval_is_eigh_target(const char *t) {
  return t && !strncmp(t, "lapack_", 7) && t[7] && strchr("sdcz", t[7]) &&
         (!strcmp(t + 8, "syevd_ffi") || !strcmp(t + 8, "heevd_ffi"));
}

bool kiln_eval_eigh_config(const kiln_hlo_instruction_t *in, bool *lower, bool *vectors,
                           int64_t *batch, int64_t *n) {
  if (!kiln_eval_is_eigh_target(in->custom_call_target) || in->num_operands != 1 ||
      !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 3)
    return false;
  const char *cfg = in->backend_config ? in->backend_config : "";
  int mode = kiln_eval_dict_flag(cfg, "mode"), uplo = kiln_eval_dict_flag(cfg, "uplo");
  if ((mode != 'V' && mode != 'N') || (uplo != 'L' && uplo != 'U')) return false;
  *vectors = mode == 'V';
  *lower = uplo == 'L';
  const kiln_shape_t *a = in->operands[0]->shape, *v = in->shape->elements[0],
                     *w = in->shape->elements[1], *info = in->shape->elements[2];
  if (!kiln_shape_is_array(a) || a->rank < 2 || !kiln_eval_solver_matrix_type(a->type) ||
      a->dims[a->rank - 1] != a->dims[a->rank - 2] || !kiln_shape_is_array(v) ||
      !kiln_shape_compatible(v, a) || !kiln_shape_is_array(w) ||
      w->type != kiln_eval_real_part_type(a->type) || w->rank != a->rank - 1 ||
      !kiln_shape_is_array(info) || (info->type != KILN_S32 && info->type != KILN_S64) ||
      info->rank != a->rank - 2)
    return false;
  *n = a->dims[a->rank - 1];
  *batch = 1;
  for (int i = 0; i < a->rank - 2; i++) {
    if (w->dims[i] != a->dims[i] || info->dims[i] != a->dims[i]) return false;
    *batch *= a->dims[i];
  }
  return w->dims[a->rank - 2] == *n;
}

bool kiln_eval_is_svd_target(const char *t) {
  /* gesvd (jax's SvdAlgorithm.QR) has gesdd's operands, results and mode flag */
  return t && !strncmp(t, "lapack_", 7) && t[7] && strchr("sdcz", t[7]) &&
         (!strcmp(t + 8, "gesdd_ffi") || !strcmp(t + 8, "gesvd_ffi"));
}

bool kiln_eval_svd_config(const kiln_hlo_instruction_t *in, bool *vectors, int64_t *batch,
                          int64_t *m, int64_t *n, int64_t *ucols, int64_t *vrows) {
  if (!kiln_eval_is_svd_target(in->custom_call_target) || in->num_operands != 1 ||
      !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 5)
    return false;
  int mode = kiln_eval_dict_flag(in->backend_config ? in->backend_config : "", "mode");
  if (mode != 'A' && mode != 'S' && mode != 'N') return false;
  const kiln_shape_t *a = in->operands[0]->shape;
  kiln_shape_t *const *r = in->shape->elements;
  if (!kiln_shape_is_array(a) || a->rank < 2 || !kiln_eval_solver_matrix_type(a->type))
    return false;
  int rank = a->rank;
  *m = a->dims[rank - 2];
  *n = a->dims[rank - 1];
  int64_t k = *m < *n ? *m : *n;
  *vectors = mode != 'N';
  /* a, s, u, vt, info: batch dims first, then (m, n), (k), (m, ucols), (vrows, n), () */
  const int tails[5] = {2, 1, 2, 2, 0};
  for (int i = 0; i < 5; i++) {
    if (!kiln_shape_is_array(r[i]) || r[i]->rank != rank - 2 + tails[i]) return false;
    if (r[i]->type != (i == 4 ? r[4]->type : i == 1 ? kiln_eval_real_part_type(a->type) : a->type))
      return false;
    for (int d = 0; d < rank - 2; d++)
      if (r[i]->dims[d] != a->dims[d]) return false;
  }
  if ((r[4]->type != KILN_S32 && r[4]->type != KILN_S64) || !kiln_shape_compatible(r[0], a) ||
      r[1]->dims[rank - 2] != k)
    return false;
  *ucols = r[2]->dims[rank - 1];
  *vrows = r[3]->dims[rank - 2];
  if (r[2]->dims[rank - 2] != *m || r[3]->dims[rank - 1] != *n) return false;
  if (mode == 'A' && (*ucols != *m || *vrows != *n)) return false;
  if (mode == 'S' && (*ucols != k || *vrows != k)) return false;
  if (mode == 'N' && (*ucols > *m || *vrows > *n)) return false;
  *batch = 1;
  for (int d = 0; d < rank - 2; d++) *batch *= a->dims[d];
  return true;
}

/* gesdd: each matrix's singular values and vectors (zeros without them), a passed through,
 * info 0 or 1 (no convergence, or a NaN or infinity). */
static kiln_status svd(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                       kiln_literal_t *const *ops, kiln_literal_t **out) {
  bool vectors;
  int64_t batch, m, n, uc, vr;
  if (!kiln_eval_svd_config(in, &vectors, &batch, &m, &n, &uc, &vr))
    return kiln_eval_solver_refusal(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *const *r = (*out)->tuple_elements;
  bool cplx = kiln_elem_type_is_complex(ops[0]->shape->type);
  int64_t k = m < n ? m : n;
  /* a, u and vt (double complex for a complex matrix, else double), then s */
  size_t es = cplx ? sizeof(double complex) : sizeof(double);
  char *buf =
      kiln_try_malloc(es * (size_t)(m * n + m * uc + vr * n) + sizeof(double) * (size_t)(k + 1));
  if (!buf) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  char *u = buf + es * (size_t)(m * n), *vt = u + es * (size_t)(m * uc);
  double *s = (double *)(vt + es * (size_t)(vr * n));
  double *ra = (double *)buf, *ru = (double *)u, *rvt = (double *)vt;
  double complex *za = (double complex *)buf, *zu = (double complex *)u,
                 *zvt = (double complex *)vt;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < m * n; i++) {
      double complex x = kiln_eval_get_complex(ops[0], b * m * n + i);
      kiln_eval_set_complex(r[0], b * m * n + i, x);
      if (cplx)
        za[i] = x;
      else
        ra[i] = creal(x);
    }
    int bad = cplx
                  ? kiln_jacobi_zsvd(m, n, za, s, vectors ? zu : NULL, uc, vectors ? zvt : NULL, vr)
                  : kiln_jacobi_svd(m, n, ra, s, vectors ? ru : NULL, uc, vectors ? rvt : NULL, vr);
    if (bad < 0) {
      kiln_free(buf);
      return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
    }
    for (int64_t i = 0; i < k; i++) kiln_literal_set_f64(r[1], b * k + i, s[i]);
    for (int64_t i = 0; i < m * uc; i++)
      kiln_eval_set_complex(r[2], b * m * uc + i, !vectors ? 0.0 : cplx ? zu[i] : ru[i]);
    for (int64_t i = 0; i < vr * n; i++)
      kiln_eval_set_complex(r[3], b * vr * n + i, !vectors ? 0.0 : cplx ? zvt[i] : rvt[i]);
    kiln_literal_set_s64(r[4], b, bad);
  }
  kiln_free(buf);
  return NULL;
}

bool kiln_eval_is_gtsv_target(const char *t) {
  return t && !strncmp(t, "lapack_", 7) && t[7] && strchr("sdcz", t[7]) &&
         !strcmp(t + 8, "gtsv_ffi");
}

bool kiln_eval_gtsv_config(const kiln_hlo_instruction_t *in, int64_t *batch, int64_t *n,
                           int64_t *nrhs) {
  if (!kiln_eval_is_gtsv_target(in->custom_call_target) || in->num_operands != 4 ||
      !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 5)
    return false;
  const kiln_shape_t *b = in->operands[3]->shape, *info = in->shape->elements[4];
  if (!kiln_shape_is_array(b) || b->rank < 2 || !kiln_eval_solver_matrix_type(b->type))
    return false;
  int rank = b->rank;
  *n = b->dims[rank - 2];
  *nrhs = b->dims[rank - 1];
  for (int i = 0; i < 3; i++) { /* the diagonals: b's dims without the last */
    const kiln_shape_t *d = in->operands[i]->shape;
    if (!kiln_shape_is_array(d) || d->type != b->type || d->rank != rank - 1 ||
        !kiln_shape_is_array(in->shape->elements[i]) ||
        !kiln_shape_compatible(in->shape->elements[i], d))
      return false;
    for (int k = 0; k < rank - 1; k++)
      if (d->dims[k] != b->dims[k]) return false;
  }
  if (!kiln_shape_is_array(in->shape->elements[3]) ||
      !kiln_shape_compatible(in->shape->elements[3], b) || !kiln_shape_is_array(info) ||
      (info->type != KILN_S32 && info->type != KILN_S64) || info->rank != rank - 2)
    return false;
  *batch = 1;
  for (int k = 0; k < rank - 2; k++) {
    if (info->dims[k] != b->dims[k]) return false;
    *batch *= b->dims[k];
  }
  return true;
}

/* gtsv: the diagonals passed through, x and info per system (base/gtsv.h; complex systems
 * base/zlinalg.h's kiln_zgtsv). */
static kiln_status gtsv(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                        kiln_literal_t *const *ops, kiln_literal_t **out) {
  int64_t batch, n, k;
  if (!kiln_eval_gtsv_config(in, &batch, &n, &k)) return kiln_eval_solver_refusal(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *const *r = (*out)->tuple_elements;
  bool cplx = kiln_elem_type_is_complex(ops[3]->shape->type);
  size_t es = cplx ? sizeof(double complex) : sizeof(double);
  void *buf = kiln_try_malloc(es * (size_t)(3 * n + n * k + 1));
  if (!buf) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  double *sub = buf, *diag = sub + n, *sup = diag + n, *x = sup + n;
  double complex *zsub = buf, *zdiag = zsub + n, *zsup = zdiag + n, *zx = zsup + n;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < n; i++) {
      for (int d = 0; d < 3; d++)
        kiln_eval_set_complex(r[d], b * n + i, kiln_eval_get_complex(ops[d], b * n + i));
      /* dl[i + 1] is A[i + 1][i] */
      double complex s = i + 1 < n ? kiln_eval_get_complex(ops[0], b * n + i + 1) : 0;
      double complex dg = kiln_eval_get_complex(ops[1], b * n + i);
      double complex sp = kiln_eval_get_complex(ops[2], b * n + i);
      if (cplx) {
        zsub[i] = s;
        zdiag[i] = dg;
        zsup[i] = sp;
      } else {
        sub[i] = creal(s);
        diag[i] = creal(dg);
        sup[i] = creal(sp);
      }
    }
    for (int64_t i = 0; i < n * k; i++) {
      double complex v = kiln_eval_get_complex(ops[3], b * n * k + i);
      if (cplx)
        zx[i] = v;
      else
        x[i] = creal(v);
    }
    int64_t bad =
        cplx ? kiln_zgtsv(n, k, zsub, zdiag, zsup, zx) : kiln_gtsv(n, k, sub, diag, sup, x);
    for (int64_t i = 0; i < n * k; i++)
      kiln_eval_set_complex(r[3], b * n * k + i, cplx ? zx[i] : x[i]);
    kiln_literal_set_s64(r[4], b, bad);
  }
  kiln_free(buf);
  return NULL;
}

bool kiln_eval_is_geev_target(const char *t) {
  return t && !strncmp(t, "lapack_", 7) && t[7] && strchr("sdcz", t[7]) &&
         !strcmp(t + 8, "geev_ffi");
}

bool kiln_eval_geev_config(const kiln_hlo_instruction_t *in, bool *left, bool *right,
                           int64_t *batch, int64_t *n) {
  if (!kiln_eval_is_geev_target(in->custom_call_target) || in->num_operands != 1 ||
      !kiln_shape_is_tuple(in->shape))
    return false;
  const char *cfg = in->backend_config ? in->backend_config : "";
  int l = kiln_eval_dict_flag(cfg, "compute_left"), r = kiln_eval_dict_flag(cfg, "compute_right");
  if ((l != 'V' && l != 'N') || (r != 'V' && r != 'N')) return false;
  *left = l == 'V';
  *right = r == 'V';
  const kiln_shape_t *a = in->operands[0]->shape;
  if (!kiln_shape_is_array(a) || a->rank < 2 || !kiln_eval_solver_matrix_type(a->type) ||
      a->dims[a->rank - 1] != a->dims[a->rank - 2])
    return false;
  bool cplx = kiln_elem_type_is_complex(a->type);
  int rank = a->rank, nres = cplx ? 4 : 5;
  if (in->shape->num_elements != nres) return false;
  kiln_elem_type_t ct = a->type == KILN_F32 ? KILN_C64 : a->type == KILN_F64 ? KILN_C128 : a->type;
  for (int i = 0; i < nres; i++) { /* the values (one or two), vl, vr, info */
    const kiln_shape_t *r = in->shape->elements[i];
    int values = nres - 3, tail = i < values ? 1 : i < nres - 1 ? 2 : 0;
    kiln_elem_type_t want = i < values ? a->type : ct;
    if (!kiln_shape_is_array(r) || r->rank != rank - 2 + tail) return false;
    if (i == nres - 1 ? (r->type != KILN_S32 && r->type != KILN_S64) : r->type != want)
      return false;
    for (int d = 0; d < r->rank; d++)
      if (r->dims[d] != a->dims[d]) return false;
  }
  *n = a->dims[rank - 1];
  *batch = 1;
  for (int d = 0; d < rank - 2; d++) *batch *= a->dims[d];
  return true;
}

bool kiln_eval_is_gees_target(const char *t) {
  return t && !strncmp(t, "lapack_", 7) && t[7] && strchr("sdcz", t[7]) &&
         !strcmp(t + 8, "gees_ffi");
}

bool kiln_eval_gees_config(const kiln_hlo_instruction_t *in, bool *vectors, int64_t *batch,
                           int64_t *n) {
  if (!kiln_eval_is_gees_target(in->custom_call_target) || in->num_operands != 1 ||
      !kiln_shape_is_tuple(in->shape))
    return false;
  const char *cfg = in->backend_config ? in->backend_config : "";
  int mode = kiln_eval_dict_flag(cfg, "mode"), sort = kiln_eval_dict_flag(cfg, "sort");
  if ((mode != 'V' && mode != 'N') || sort != 'N') return false;
  *vectors = mode == 'V';
  const kiln_shape_t *a = in->operands[0]->shape;
  if (!kiln_shape_is_array(a) || a->rank < 2 || !kiln_eval_solver_matrix_type(a->type) ||
      a->dims[a->rank - 1] != a->dims[a->rank - 2])
    return false;
  /* t, vs, w (or wr and wi), sdim, info */
  bool cplx = kiln_elem_type_is_complex(a->type);
  int rank = a->rank, nres = cplx ? 5 : 6, values = cplx ? 1 : 2;
  if (in->shape->num_elements != nres) return false;
  for (int i = 0; i < nres; i++) {
    const kiln_shape_t *r = in->shape->elements[i];
    int tail = i < 2 ? 2 : i < 2 + values ? 1 : 0;
    if (!kiln_shape_is_array(r) || r->rank != rank - 2 + tail) return false;
    if (tail ? r->type != a->type : (r->type != KILN_S32 && r->type != KILN_S64)) return false;
    for (int d = 0; d < r->rank; d++)
      if (r->dims[d] != a->dims[d]) return false;
  }
  *n = a->dims[rank - 1];
  *batch = 1;
  for (int d = 0; d < rank - 2; d++) *batch *= a->dims[d];
  return true;
}

bool kiln_eval_is_gehrd_target(const char *t) {
  return t && !strncmp(t, "lapack_", 7) && t[7] && strchr("sdcz", t[7]) &&
         !strcmp(t + 8, "gehrd_ffi");
}

bool kiln_eval_is_sytrd_target(const char *t) {
  return t && !strncmp(t, "lapack_", 7) && t[7] && strchr("sdcz", t[7]) &&
         (!strcmp(t + 8, "sytrd_ffi") || !strcmp(t + 8, "hetrd_ffi"));
}

/* Whether `in` (one operand a [..., n, n] of a solver matrix type) has `nres` results of the
 * given trailing ranks (sizes n, or n - 1 where `minus` says), each of a's type, its real part
 * type (`real`), or s32 / s64 (rank 0 tails: info); sets *batch and *n. */
static bool reduction_form(const kiln_hlo_instruction_t *in, int nres, const int *tails,
                           const bool *minus, const bool *real, int64_t *batch, int64_t *n) {
  const kiln_shape_t *a = in->num_operands == 1 ? in->operands[0]->shape : NULL;
  if (!a || !kiln_shape_is_array(a) || a->rank < 2 || !kiln_eval_solver_matrix_type(a->type) ||
      a->dims[a->rank - 1] != a->dims[a->rank - 2] || !kiln_shape_is_tuple(in->shape) ||
      in->shape->num_elements != nres)
    return false;
  int rank = a->rank;
  *n = a->dims[rank - 1];
  for (int i = 0; i < nres; i++) {
    const kiln_shape_t *r = in->shape->elements[i];
    if (!kiln_shape_is_array(r) || r->rank != rank - 2 + tails[i]) return false;
    kiln_elem_type_t want = real[i] ? kiln_eval_real_part_type(a->type) : a->type;
    if (tails[i] ? r->type != want : (r->type != KILN_S32 && r->type != KILN_S64)) return false;
    for (int d = 0; d < r->rank; d++) {
      int64_t size = d < rank - 2 ? a->dims[d] : minus[i] ? *n - 1 : *n;
      if (r->dims[d] != (size < 0 ? 0 : size)) return false;
    }
  }
  *batch = 1;
  for (int d = 0; d < rank - 2; d++) *batch *= a->dims[d];
  return true;
}

bool kiln_eval_gehrd_config(const kiln_hlo_instruction_t *in, int64_t *lo, int64_t *hi,
                            int64_t *batch, int64_t *n) {
  static const int tails[3] = {2, 1, 0};
  static const bool minus[3] = {false, true, false}, real[3] = {false, false, false};
  const char *cfg = in->backend_config ? in->backend_config : "";
  int64_t low, high;
  if (!kiln_eval_is_gehrd_target(in->custom_call_target) ||
      !reduction_form(in, 3, tails, minus, real, batch, n) ||
      !kiln_eval_dict_int(cfg, "low", &low) || !kiln_eval_dict_int(cfg, "high", &high))
    return false;
  /* LAPACK: 1 <= ilo <= ihi <= n, or ilo = 1 and ihi = 0 when n = 0 */
  if (*n == 0) return low == 1 && high == 0;
  if (low < 1 || high < low || high > *n) return false;
  *lo = low - 1;
  *hi = high - 1;
  return true;
}

bool kiln_eval_sytrd_config(const kiln_hlo_instruction_t *in, bool *lower, int64_t *batch,
                            int64_t *n) {
  static const int tails[5] = {2, 1, 1, 1, 0};
  static const bool minus[5] = {false, false, true, true, false},
                    real[5] = {false, true, true, false, false};
  int uplo = kiln_eval_dict_flag(in->backend_config ? in->backend_config : "", "uplo");
  *lower = uplo == 'L';
  return kiln_eval_is_sytrd_target(in->custom_call_target) && (uplo == 'L' || uplo == 'U') &&
         reduction_form(in, 5, tails, minus, real, batch, n);
}

/* gehrd and sytrd: per matrix, the reduction of base/zlinalg.h in double complex. */
static kiln_status reduction(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in, bool sytrd,
                             kiln_literal_t *const *ops, kiln_literal_t **out) {
  bool lower = false;
  int64_t batch, n, lo = 0, hi = 0;
  if (sytrd ? !kiln_eval_sytrd_config(in, &lower, &batch, &n)
            : !kiln_eval_gehrd_config(in, &lo, &hi, &batch, &n))
    return kiln_eval_solver_refusal(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *const *r = (*out)->tuple_elements;
  size_t nn = (size_t)(n * n);
  double complex *a = kiln_try_malloc(sizeof(double complex) * (2 * nn + 2 * (size_t)n + 1) +
                                      sizeof(double) * (2 * (size_t)n + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  double complex *tau = a + nn, *scratch = tau + n;
  double *d = (double *)(scratch + nn + n), *e = d + n;
  kiln_literal_t *tau_out = r[sytrd ? 3 : 1];
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < n; i++) /* column-major */
      for (int64_t j = 0; j < n; j++)
        a[i + j * n] = kiln_eval_get_complex(ops[0], (b * n + i) * n + j);
    if (sytrd)
      kiln_householder_zhetrd(n, lower, a, d, e, tau, scratch);
    else
      kiln_householder_zgehrd(n, lo, hi, a, tau, scratch);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++)
        kiln_eval_set_complex(r[0], (b * n + i) * n + j, a[i + j * n]);
    for (int64_t i = 0; i + 1 < n; i++) kiln_eval_set_complex(tau_out, b * (n - 1) + i, tau[i]);
    for (int64_t i = 0; sytrd && i < n; i++) {
      kiln_literal_set_f64(r[1], b * n + i, d[i]);
      if (i + 1 < n) kiln_literal_set_f64(r[2], b * (n - 1) + i, e[i]);
    }
    kiln_literal_set_s64(r[sytrd ? 4 : 2], b, 0);
  }
  kiln_free(a);
  return NULL;
}

/* gees: per matrix T, the Schur vectors (zeros without mode 'V'), the eigenvalues (T's
 * diagonal; a real T's blocks as wr and wi), sdim 0 (no sorting) and info. */
static kiln_status gees(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                        kiln_literal_t *const *ops, kiln_literal_t **out) {
  bool vectors;
  int64_t batch, n;
  if (!kiln_eval_gees_config(in, &vectors, &batch, &n))
    return kiln_status_make(KILN_UNIMPLEMENTED, "custom call %s (%s): %s", in->name,
                            in->custom_call_target, KILN_EVAL_GEES_FORMS);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *const *r = (*out)->tuple_elements;
  size_t nn = (size_t)(n * n);
  bool cplx = kiln_elem_type_is_complex(ops[0]->shape->type);
  int values = cplx ? 1 : 2;
  /* complex: a, t, z, w; real: the same room as doubles for a, t, z, wr, wi */
  double complex *a = kiln_try_malloc(sizeof(double complex) * (3 * nn + 2 * (size_t)n + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  double complex *t = a + nn, *z = t + nn, *w = z + nn;
  double *ra = (double *)a, *rt = ra + nn, *rz = rt + nn, *wr = rz + nn, *wi = wr + n;
  kiln_status st = NULL;
  for (int64_t b = 0; b < batch; b++) {
    int64_t base = b * (int64_t)nn;
    int bad;
    if (cplx) {
      for (size_t i = 0; i < nn; i++) a[i] = kiln_eval_get_complex(ops[0], base + (int64_t)i);
      bad = kiln_zgees(n, a, t, vectors ? z : NULL, w);
    } else {
      for (size_t i = 0; i < nn; i++) ra[i] = kiln_literal_get_f64(ops[0], base + (int64_t)i);
      bad = kiln_real_gees(n, ra, rt, vectors ? rz : NULL, wr, wi);
    }
    if (bad < 0) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
      break;
    }
    for (size_t i = 0; i < nn; i++) {
      kiln_eval_set_complex(r[0], base + (int64_t)i, cplx ? t[i] : rt[i]);
      kiln_eval_set_complex(r[1], base + (int64_t)i, !vectors ? 0.0 : cplx ? z[i] : rz[i]);
    }
    for (int64_t i = 0; i < n; i++) {
      if (cplx) {
        kiln_eval_set_complex(r[2], b * n + i, w[i]);
      } else {
        kiln_literal_set_f64(r[2], b * n + i, wr[i]);
        kiln_literal_set_f64(r[3], b * n + i, wi[i]);
      }
    }
    kiln_literal_set_s64(r[2 + values], b, 0);
    kiln_literal_set_s64(r[3 + values], b, bad);
  }
  kiln_free(a);
  return st;
}

/* geev: per matrix the eigenvalues (real and imaginary parts for a real matrix) and the
 * vectors asked for (zeros otherwise), info 0 or 1. */
static kiln_status geev(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                        kiln_literal_t *const *ops, kiln_literal_t **out) {
  bool left, right;
  int64_t batch, n;
  if (!kiln_eval_geev_config(in, &left, &right, &batch, &n)) return kiln_eval_solver_refusal(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *const *r = (*out)->tuple_elements;
  bool cplx = kiln_elem_type_is_complex(ops[0]->shape->type);
  int values = cplx ? 1 : 2;
  size_t nn = (size_t)(n * n);
  /* a (complex), vl, vr, w; then a real matrix's copy, wr and wi */
  double complex *buf = kiln_try_malloc(sizeof(double complex) * (3 * nn + (size_t)n + 1) +
                                        sizeof(double) * (nn + 2 * (size_t)n + 1));
  if (!buf) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  double complex *a = buf, *vl = a + nn, *vr = vl + nn, *w = vr + nn;
  double *ra = (double *)(w + n), *wr = ra + nn, *wi = wr + n;
  kiln_status st = NULL;
  for (int64_t b = 0; b < batch; b++) {
    int64_t base = b * (int64_t)nn;
    int bad;
    if (cplx) {
      for (size_t i = 0; i < nn; i++) a[i] = kiln_eval_get_complex(ops[0], base + (int64_t)i);
      bad = kiln_zgeev(n, a, w, left ? vl : NULL, right ? vr : NULL);
    } else {
      for (size_t i = 0; i < nn; i++) ra[i] = kiln_literal_get_f64(ops[0], base + (int64_t)i);
      bad = kiln_real_geev(n, ra, wr, wi, left ? vl : NULL, right ? vr : NULL);
    }
    if (bad < 0) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
      break;
    }
    for (int64_t i = 0; i < n; i++) {
      if (cplx) {
        kiln_eval_set_complex(r[0], b * n + i, w[i]);
      } else {
        kiln_literal_set_f64(r[0], b * n + i, wr[i]);
        kiln_literal_set_f64(r[1], b * n + i, wi[i]);
      }
    }
    for (size_t i = 0; i < nn; i++) {
      kiln_eval_set_complex(r[values], base + (int64_t)i, left ? vl[i] : 0.0);
      kiln_eval_set_complex(r[values + 1], base + (int64_t)i, right ? vr[i] : 0.0);
    }
    kiln_literal_set_s64(r[values + 2], b, bad);
  }
  kiln_free(buf);
  return st;
}

/* syevd: each matrix's eigenvalues ascending and eigenvectors (zeros without mode 'V'), info 0
 * or 1 (no convergence, or a NaN or infinity in the matrix). */
static kiln_status eigh(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                        kiln_literal_t *const *ops, kiln_literal_t **out) {
  bool lower, vectors;
  int64_t batch, n;
  if (!kiln_eval_eigh_config(in, &lower, &vectors, &batch, &n)) return kiln_eval_solver_refusal(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *v = (*out)->tuple_elements[0], *w = (*out)->tuple_elements[1],
                 *info = (*out)->tuple_elements[2];
  bool cplx = kiln_elem_type_is_complex(ops[0]->shape->type);
  /* the matrix and the vectors (complex when the matrix is), then the values */
  size_t es = cplx ? sizeof(double complex) : sizeof(double);
  double *buf = kiln_try_malloc(es * (size_t)(2 * n * n) + sizeof(double) * (size_t)(n + 1));
  if (!buf) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory", in->name);
  double complex *za = (double complex *)buf, *zv = za + n * n;
  double *vecs = buf + n * n, *vals = cplx ? (double *)(zv + n * n) : vecs + n * n;
  for (int64_t b = 0; b < batch; b++) {
    int bad;
    if (cplx) {
      for (int64_t i = 0; i < n * n; i++) za[i] = kiln_eval_get_complex(ops[0], b * n * n + i);
      bad = kiln_jacobi_zheev(n, za, lower, vals, vectors ? zv : NULL);
    } else {
      for (int64_t i = 0; i < n * n; i++) buf[i] = kiln_literal_get_f64(ops[0], b * n * n + i);
      bad = kiln_jacobi_eigh(n, buf, lower, vals, vectors ? vecs : NULL);
    }
    for (int64_t i = 0; i < n * n; i++)
      kiln_eval_set_complex(v, b * n * n + i, !vectors ? 0.0 : cplx ? zv[i] : vecs[i]);
    for (int64_t i = 0; i < n; i++) kiln_literal_set_f64(w, b * n + i, vals[i]);
    kiln_literal_set_s64(info, b, bad);
  }
  kiln_free(buf);
  return NULL;
}

kiln_status kiln_eval_host_target(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                  kiln_literal_t *const *ops, kiln_literal_t **out, bool *handled) {
  const char *t = in->custom_call_target ? in->custom_call_target : "";
  *handled = true;
  if (!strcmp(t, "__onednn$layernorm")) return layer_norm(ctx, in, ops, out);
  bool orgqr;
  if (kiln_eval_is_qr_target(t, &orgqr)) return qr(ctx, in, orgqr, ops, out);
  if (kiln_eval_is_eigh_target(t)) return eigh(ctx, in, ops, out);
  if (kiln_eval_is_svd_target(t)) return svd(ctx, in, ops, out);
  if (kiln_eval_is_gtsv_target(t)) return gtsv(ctx, in, ops, out);
  if (kiln_eval_is_geev_target(t)) return geev(ctx, in, ops, out);
  if (kiln_eval_is_gees_target(t)) return gees(ctx, in, ops, out);
  if (kiln_eval_is_gehrd_target(t)) return reduction(ctx, in, false, ops, out);
  if (kiln_eval_is_sytrd_target(t)) return reduction(ctx, in, true, ops, out);
  if (!strcmp(t, "GetRngSeed") && in->num_operands == 0 && kiln_shape_is_array(in->shape) &&
      in->shape->rank == 0 && in->shape->type == KILN_U64) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
    kiln_literal_set_u64(*out, 0, ctx->opts ? ctx->opts->rng_seed : 0);
    return NULL;
  }
  *handled = false;
  return NULL;
}
