/* The custom calls the host runtime implements itself (compiler/thunks/builtin_custom_call.c):
 * LAPACK's QR through runtime/host/host_lapack.c against kiln's Householder loop and against
 * the defining identities (A = Q R, Q^T Q = I, R upper triangular), then __onednn$layernorm,
 * GetRngSeed, cusolver_geqrf / cusolver_orgqr in HLO modules (any result layout) against
 * values computed by hand and against the evaluator. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/householder.h"
#include "base/status.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/device.h"
#include "runtime/host/host_device.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"

#include "host_device_fixture.h"

static void expect_ok(kiln_status s) {
  if (s) fail_msg("%s", kiln_status_message(s));
}

/* A deterministic pseudo-random value in [-1, 1). */
static double rnd(uint32_t *x) {
  *x = *x * 1664525u + 1013904223u;
  return (double)(*x >> 8) / (double)(1u << 23) - 1.0;
}

/* ---- QR on the host: LAPACK (when loaded) and the fallback ------------------------------- */

/* Checks that the factored batch (column-major, lda = m) with its tau reproduces `orig`: R
 * from the upper triangle, Q from orgqr; Q^T Q = I. tol relative to the matrix's size. */
static void check_qr(bool f64, int64_t batch, int64_t m, int64_t n, const double *orig,
                     const void *fac, const void *tau, kiln_host_blas_choice_t choice, double tol) {
  size_t es = f64 ? 8 : 4;
  void *q = malloc(es * (size_t)(batch * m * n));
  memcpy(q, fac, es * (size_t)(batch * m * n));
  expect_ok(kiln_host_orgqr(f64, batch, m, n, n, q, tau, choice));
  for (int64_t b = 0; b < batch; b++) {
#define E(p, i, j)                                      \
  (f64 ? ((const double *)(p))[b * m * n + (i) + (j)*m] \
       : ((const float *)(p))[b * m * n + (i) + (j)*m])
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double qr = 0;
        for (int64_t l = 0; l <= j; l++) qr += E(q, i, l) * E(fac, l, j);
        double want = orig[b * m * n + i + j * m];
        if (fabs(qr - want) > tol)
          fail_msg("batch %lld (%lld, %lld): QR %g, A %g", (long long)b, (long long)i, (long long)j,
                   qr, want);
      }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double d = 0;
        for (int64_t l = 0; l < m; l++) d += E(q, l, i) * E(q, l, j);
        if (fabs(d - (i == j)) > tol)
          fail_msg("Q^T Q (%lld, %lld) = %g", (long long)i, (long long)j, d);
      }
#undef E
  }
  free(q);
}

static void test_host_qr_matches_the_identities_and_the_fallback(void **state) {
  (void)state;
  enum { B = 3, M = 9, N = 5 };
  double orig[B * M * N], a64[B * M * N], tau64[B * N], f64fb[B * M * N], taufb[B * N];
  float a32[B * M * N], tau32[B * N];
  uint32_t x = 7;
  for (int i = 0; i < B * M * N; i++) orig[i] = rnd(&x);
  /* A zero column below the diagonal: tau 0 there (H = I), LAPACK's convention. */
  for (int i = 1; i < M; i++) orig[i + 0 * M] = 0;
  const char *lib = kiln_host_blas_library(NULL);
  printf("LAPACK from: %s\n", lib ? lib : "(none: the fallback serves both)");
  for (int i = 0; i < B * M * N; i++) a32[i] = (float)orig[i];
  memcpy(a64, orig, sizeof orig);
  memcpy(f64fb, orig, sizeof orig);
  expect_ok(kiln_host_geqrf(false, B, M, N, a32, tau32, KILN_HOST_BLAS_AUTO));
  expect_ok(kiln_host_geqrf(true, B, M, N, a64, tau64, KILN_HOST_BLAS_AUTO));
  expect_ok(kiln_host_geqrf(true, B, M, N, f64fb, taufb, KILN_HOST_BLAS_FALLBACK));
  assert_true(tau64[0] == 0 && taufb[0] == 0);
  check_qr(false, B, M, N, orig, a32, tau32, KILN_HOST_BLAS_AUTO, 1e-5);
  check_qr(true, B, M, N, orig, a64, tau64, KILN_HOST_BLAS_AUTO, 1e-12);
  check_qr(true, B, M, N, orig, f64fb, taufb, KILN_HOST_BLAS_FALLBACK, 1e-12);
  /* The same conventions: LAPACK's factors equal the fallback's. */
  for (int i = 0; i < B * M * N; i++) assert_true(fabs(a64[i] - f64fb[i]) < 1e-12);
  for (int i = 0; i < B * N; i++) assert_true(fabs(tau64[i] - taufb[i]) < 1e-12);
  /* Errors a caller can provoke. */
  kiln_status s = kiln_host_orgqr(true, 1, 3, 4, 2, a64, tau64, KILN_HOST_BLAS_AUTO);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "k <= n <= m"));
  kiln_status_free(s);
  s = kiln_host_geqrf(true, 1, (int64_t)1 << 32, 2, a64, tau64, KILN_HOST_BLAS_AUTO);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
}

/* ---- HLO modules ----------------------------------------------------------------------- */

/* Parses `hlo`, fills parameter i with args[i] (f64 values; NULL: rnd), runs it on the host
 * (rng_seed 42) and with the evaluator; *got / *want receive the results. */
static void run(const char *hlo, const double *const *args, kiln_arena_t *arena,
                kiln_literal_t **got, kiln_literal_t **want) {
  kiln_hlo_module_t *m = NULL;
  expect_ok(kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m));
  int n = m->entry->num_parameters;
  kiln_literal_t *lits[4];
  uint32_t x = 11;
  for (int i = 0; i < n; i++) {
    lits[i] = kiln_literal_make(arena, m->entry->parameters[i]->shape);
    for (int64_t k = 0; k < lits[i]->num_elements; k++)
      kiln_literal_set_f64(lits[i], k, args && args[i] ? args[i][k] : rnd(&x));
  }
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = g_dev;
  o.rng_seed = 42;
  o.repeat = 2;
  expect_ok(kiln_device_run_module(m, lits, n, &o, arena, got, NULL));
  kiln_eval_options_t eo;
  memset(&eo, 0, sizeof eo);
  eo.rng_seed = 42;
  expect_ok(kiln_eval_module(m, &eo, n, lits, arena, want));
  kiln_hlo_module_destroy(m);
}

static void test_onednn_layer_norm_normalizes_the_last_dimension(void **state) {
  (void)state;
  /* epsilon_typed 1065353216 = 1.0f: row (1, 3): mean 2, variance 1, (x - 2) / sqrt(2). The
   * input's layout {0,1} is column-major, the result row-major. */
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  x = f32[2,2]{0,1} parameter(0)\n"
      "  s = f32[2] parameter(1)\n"
      "  b = f32[2] parameter(2)\n"
      "  ROOT ln = f32[2,2]{1,0} custom-call(x, s, b), custom_call_target=\"__onednn$layernorm\",\n"
      "    "
      "backend_config=\"{\\\"onednn_layer_norm_config\\\":{\\\"rescale\\\":\\\"SCALE_AND_SHIFT\\\","
      "\\\"epsilon_typed\\\":1065353216}}\"\n"
      "}\n";
  const double x[4] = {1, 3, 5, 5}, s[2] = {2, 10}, b[2] = {0.5, -1};
  const double *args[3] = {x, s, b};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got, *want;
  run(hlo, args, &arena, &got, &want);
  const double r = 1 / sqrt(2.0);
  const double expect[4] = {-r * 2 + 0.5, r * 10 - 1, 0.5, -1};
  for (int i = 0; i < 4; i++) {
    assert_true(fabs(kiln_literal_get_f64(got, i) - expect[i]) < 1e-5);
    assert_true(fabs(kiln_literal_get_f64(want, i) - expect[i]) < 1e-6);
  }
  kiln_arena_destroy(&arena);
}

static void test_get_rng_seed_returns_the_runs_seed(void **state) {
  (void)state;
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  ROOT s = u64[] custom-call(), custom_call_target=\"GetRngSeed\"\n"
      "}\n";
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got, *want;
  run(hlo, NULL, &arena, &got, &want);
  assert_int_equal(kiln_literal_get_s64(got, 0), 42);
  assert_int_equal(kiln_literal_get_s64(want, 0), 42);
  kiln_arena_destroy(&arena);
}

static void test_cusolver_qr_runs_on_the_host_like_the_evaluator(void **state) {
  (void)state;
  /* jaxlib's QR lowering: geqrf then orgqr, results column-major per matrix ({1,2,0}) as
   * jaxlib asks, the operand row-major. */
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[2,6,4] parameter(0)\n"
      "  g = (f32[2,6,4]{1,2,0}, f32[2,4]{1,0}, s32[2]{0}, f32[64]{0}) custom-call(a),\n"
      "    custom_call_target=\"cusolver_geqrf\", api_version=API_VERSION_STATUS_RETURNING\n"
      "  f = f32[2,6,4]{1,2,0} get-tuple-element(g), index=0\n"
      "  t = f32[2,4]{1,0} get-tuple-element(g), index=1\n"
      "  o = (f32[2,6,4]{1,2,0}, s32[2]{0}, f32[32]{0}) custom-call(f, t),\n"
      "    custom_call_target=\"cusolver_orgqr\", api_version=API_VERSION_STATUS_RETURNING\n"
      "  q = f32[2,6,4]{1,2,0} get-tuple-element(o), index=0\n"
      "  i = s32[2]{0} get-tuple-element(g), index=2\n"
      "  ROOT r = (f32[2,6,4], f32[2,6,4], f32[2,4], s32[2]) tuple(f, q, t, i)\n"
      "}\n";
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got, *want;
  run(hlo, NULL, &arena, &got, &want);
  kiln_compare_report_t cr;
  if (!kiln_compare_literals(want, got, NULL, &cr)) fail_msg("differs: %s", cr.first);
  /* Q R = A from the results themselves: Q (leaf 1) times the upper triangle of leaf 0. */
  kiln_literal_t *f = got->tuple_elements[0], *q = got->tuple_elements[1];
  uint32_t x = 11;
  for (int64_t b = 0; b < 2; b++)
    for (int64_t i = 0; i < 6; i++)
      for (int64_t j = 0; j < 4; j++) {
        double qr = 0;
        for (int64_t l = 0; l <= j; l++)
          qr += kiln_literal_get_f64(q, (b * 6 + i) * 4 + l) *
                kiln_literal_get_f64(f, (b * 6 + l) * 4 + j);
        double a = rnd(&x);
        assert_true(fabs(qr - a) < 1e-5);
      }
  kiln_arena_destroy(&arena);
}

/* Runs one-parameter module `hlo` on a zeroed argument on the host (*dev_s) and with the
 * evaluator (*eval_s, when not NULL); the statuses are the caller's. */
static void run_refused(const char *hlo, kiln_status *dev_s, kiln_status *eval_s) {
  kiln_hlo_module_t *m = NULL;
  expect_ok(kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *arg = kiln_literal_make(&arena, m->entry->parameters[0]->shape), *got = NULL;
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = g_dev;
  *dev_s = kiln_device_run_module(m, &arg, 1, &o, &arena, &got, NULL);
  if (eval_s) {
    kiln_eval_options_t eo;
    memset(&eo, 0, sizeof eo);
    *eval_s = kiln_eval_module(m, &eo, 1, &arg, &arena, &got);
  }
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static void test_builtin_target_with_unsupported_shapes_names_the_call(void **state) {
  (void)state;
  kiln_status s;
  run_refused(
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = s32[3,2] parameter(0)\n"
      "  ROOT g = (s32[3,2], s32[2], s32[], f32[4]) custom-call(a), "
      "custom_call_target=\"cusolver_geqrf\"\n"
      "}\n",
      &s, NULL);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "custom call g (cusolver_geqrf)"));
  kiln_status_free(s);
}

/* SPMDShardToFullShape from a shard to the full shape is the SPMD partitioner's work: both the
 * compiler and the evaluator refuse it naming the call, its shapes and what to do. */
static void test_shard_to_full_shape_that_reshapes_names_the_partitioner(void **state) {
  (void)state;
  kiln_status s[2];
  run_refused(
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = s32[3,2] parameter(0)\n"
      "  ROOT f = s32[6,2] custom-call(a), custom_call_target=\"SPMDShardToFullShape\", "
      "sharding={devices=[2,1]0,1}\n"
      "}\n",
      &s[0], &s[1]);
  for (int i = 0; i < 2; i++) {
    assert_non_null(s[i]);
    assert_int_equal(kiln_status_code(s[i]), KILN_UNIMPLEMENTED);
    const char *msg = kiln_status_message(s[i]);
    assert_non_null(strstr(msg, "custom call f (SPMDShardToFullShape) takes s32[3,2] to s32[6,2]"));
    assert_non_null(strstr(msg, "SPMD partitioner"));
    kiln_status_free(s[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_qr_matches_the_identities_and_the_fallback),
      cmocka_unit_test(test_onednn_layer_norm_normalizes_the_last_dimension),
      cmocka_unit_test(test_get_rng_seed_returns_the_runs_seed),
      cmocka_unit_test(test_cusolver_qr_runs_on_the_host_like_the_evaluator),
      cmocka_unit_test(test_builtin_target_with_unsupported_shapes_names_the_call),
      cmocka_unit_test(test_shard_to_full_shape_that_reshapes_names_the_partitioner),
  };
  return cmocka_run_group_tests(tests, host_device_setup, host_device_teardown);
}
