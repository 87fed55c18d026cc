/* cuBLASLt without a GPU: the plan of every element type and transpose form (types, compute
 * and scale types, layouts, batch strides), checked by interpreting the plan the way
 * cuBLASLt does (column-major, ld, strides) on kiln's row-major buffers and comparing with a
 * plain row-major gemm; TF32 only when allowed; fp8's TN form, scales and refusals; and a
 * missing library reported as UNAVAILABLE naming every name tried. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "status_test_util.h"

#include "base/status.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/device.h"
#include "tests/skip_util.h"

/* ---- the plan computes what kiln asks ------------------------------------------------------ */

/* Element (r, c) of column-major layout `l`, matrix `bi`, read through op `t`. */
static double lt_at(const double *buf, const kiln_lt_layout_t *l, int32_t t, int bi, uint64_t r,
                    uint64_t c) {
  if (t == KILN_CUBLAS_OP_T) {
    uint64_t x = r;
    r = c;
    c = x;
  }
  assert_true(r < l->rows && c < l->cols);
  return buf[(int64_t)bi * l->stride + (int64_t)c * l->ld + (int64_t)r];
}

/* D = op(A) op(B) as cuBLASLt computes it from `p`: A is p->a over `lt_a`, B is p->b over
 * `lt_b`, D column-major in p->c. */
static void lt_reference(const kiln_lt_plan_t *p, const double *lt_a, const double *lt_b,
                         double *d) {
  const uint64_t rows = p->c.rows, cols = p->c.cols;
  const uint64_t k = p->trans_a == KILN_CUBLAS_OP_T ? p->a.rows : p->a.cols;
  assert_int_equal(p->trans_b == KILN_CUBLAS_OP_T ? p->b.cols : p->b.rows, k);
  for (int bi = 0; bi < p->c.batch; bi++)
    for (uint64_t r = 0; r < rows; r++)
      for (uint64_t c = 0; c < cols; c++) {
        double acc = 0;
        for (uint64_t q = 0; q < k; q++)
          acc +=
              lt_at(lt_a, &p->a, p->trans_a, bi, r, q) * lt_at(lt_b, &p->b, p->trans_b, bi, q, c);
        d[(int64_t)bi * p->c.stride + (int64_t)c * p->c.ld + (int64_t)r] = acc;
      }
}

static void check_form(kiln_gemm_dtype_t t, bool ta, bool tb) {
  enum { B = 2, M = 5, N = 3, K = 4 };
  kiln_gemm_desc_t g = {t, B, M, N, K, ta, tb, 1.0, 0.0, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_NONE,
                        0};
  kiln_lt_plan_t p;
  ASSERT_OK(kiln_cublaslt_plan(&g, NULL, &p));
  double a[B * M * K], b[B * K * N], want[B * M * N], got[B * M * N];
  for (int i = 0; i < B * M * K; i++) a[i] = (i * 7) % 11 - 5;
  for (int i = 0; i < B * K * N; i++) b[i] = (i * 5) % 13 - 6;
  /* kiln's row-major meaning: A[bi] is M x K (K x M when trans_a), B[bi] K x N (N x K). */
  for (int bi = 0; bi < B; bi++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double acc = 0;
        for (int q = 0; q < K; q++)
          acc += a[bi * M * K + (ta ? q * M + i : i * K + q)] *
                 b[bi * K * N + (tb ? j * K + q : q * N + j)];
        want[bi * M * N + i * N + j] = acc;
      }
  /* cuBLASLt's A is kiln's B and the other way round; its D is kiln's C, unchanged. */
  lt_reference(&p, b, a, got);
  for (int i = 0; i < B * M * N; i++)
    if (got[i] != want[i])
      fail_msg("%s ta=%d tb=%d: C[%d] = %g, want %g", kiln_gemm_dtype_name(t), ta, tb, i, got[i],
               want[i]);
  assert_int_equal(p.c.rows, N);
  assert_int_equal(p.c.cols, M);
  assert_int_equal(p.c.ld, N);
  assert_int_equal(p.a.stride, K * N);
  assert_int_equal(p.b.stride, M * K);
  assert_int_equal(p.c.stride, M * N);
  assert_int_equal(p.a.batch, B);
  assert_int_equal(p.b.batch, B);
  assert_int_equal(p.c.batch, B);
  assert_int_equal(p.epilogue, KILN_CUBLASLT_EPILOGUE_DEFAULT);
}

static void test_every_transpose_form_computes_the_row_major_gemm(void **state) {
  (void)state;
  for (int form = 0; form < 4; form++) {
    check_form(KILN_GEMM_F32, form & 1, form & 2);
    check_form(KILN_GEMM_BF16, form & 1, form & 2);
  }
}

/* ---- types -------------------------------------------------------------------------------- */

static void test_types_for_every_element_type(void **state) {
  (void)state;
  const struct {
    kiln_gemm_dtype_t in, out;
    int32_t ab, c, compute, scale;
  } cases[] = {
      {KILN_GEMM_F32, KILN_GEMM_SAME, KILN_CUDA_R_32F, KILN_CUDA_R_32F, KILN_CUBLAS_COMPUTE_32F,
       KILN_CUDA_R_32F},
      {KILN_GEMM_F64, KILN_GEMM_SAME, KILN_CUDA_R_64F, KILN_CUDA_R_64F, KILN_CUBLAS_COMPUTE_64F,
       KILN_CUDA_R_64F},
      {KILN_GEMM_C64, KILN_GEMM_SAME, KILN_CUDA_C_32F, KILN_CUDA_C_32F, KILN_CUBLAS_COMPUTE_32F,
       KILN_CUDA_C_32F},
      {KILN_GEMM_C128, KILN_GEMM_SAME, KILN_CUDA_C_64F, KILN_CUDA_C_64F, KILN_CUBLAS_COMPUTE_64F,
       KILN_CUDA_C_64F},
      {KILN_GEMM_BF16, KILN_GEMM_SAME, KILN_CUDA_R_16BF, KILN_CUDA_R_16BF, KILN_CUBLAS_COMPUTE_32F,
       KILN_CUDA_R_32F},
      {KILN_GEMM_BF16, KILN_GEMM_F32, KILN_CUDA_R_16BF, KILN_CUDA_R_32F, KILN_CUBLAS_COMPUTE_32F,
       KILN_CUDA_R_32F},
      {KILN_GEMM_F16, KILN_GEMM_SAME, KILN_CUDA_R_16F, KILN_CUDA_R_16F, KILN_CUBLAS_COMPUTE_32F,
       KILN_CUDA_R_32F},
      {KILN_GEMM_F16, KILN_GEMM_F32, KILN_CUDA_R_16F, KILN_CUDA_R_32F, KILN_CUBLAS_COMPUTE_32F,
       KILN_CUDA_R_32F},
      {KILN_GEMM_S8, KILN_GEMM_S32, KILN_CUDA_R_8I, KILN_CUDA_R_32I, KILN_CUBLAS_COMPUTE_32I,
       KILN_CUDA_R_32I},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kiln_gemm_desc_t g = {cases[i].in,
                          1,
                          64,
                          32,
                          16,
                          false,
                          false,
                          1.0,
                          0.0,
                          cases[i].out,
                          KILN_GEMM_EPILOGUE_NONE,
                          0};
    kiln_lt_plan_t p;
    ASSERT_OK(kiln_cublaslt_plan(&g, NULL, &p));
    assert_int_equal(p.a.type, cases[i].ab);
    assert_int_equal(p.b.type, cases[i].ab);
    assert_int_equal(p.c.type, cases[i].c);
    assert_int_equal(p.compute_type, cases[i].compute);
    assert_int_equal(p.scale_type, cases[i].scale);
    assert_false(p.fp8);
  }
  /* A combination kiln_gemm_desc_t does not allow is refused before cuBLASLt sees it. */
  kiln_gemm_desc_t bad = {
      KILN_GEMM_F32,           1, 4, 4, 4, false, false, 1.0, 0.0, KILN_GEMM_BF16,
      KILN_GEMM_EPILOGUE_NONE, 0};
  kiln_lt_plan_t p;
  assert_code(kiln_cublaslt_plan(&bad, NULL, &p), KILN_INVALID_ARGUMENT);
  kiln_gemm_desc_t zero = {
      KILN_GEMM_F32,           1, 0, 4, 4, false, false, 1.0, 0.0, KILN_GEMM_SAME,
      KILN_GEMM_EPILOGUE_NONE, 0};
  assert_code(kiln_cublaslt_plan(&zero, NULL, &p), KILN_INVALID_ARGUMENT);
}

static void test_tf32_only_where_the_precision_allows_it(void **state) {
  (void)state;
  kiln_gemm_desc_t g = {
      KILN_GEMM_F32,           1, 64, 32, 16, false, true, 1.0, 0.0, KILN_GEMM_SAME,
      KILN_GEMM_EPILOGUE_NONE, 0};
  kiln_lt_plan_t exact, fast;
  ASSERT_OK(kiln_cublaslt_plan(&g, NULL, &exact));
  kiln_cublaslt_options_t o = {.allow_tf32 = true};
  ASSERT_OK(kiln_cublaslt_plan(&g, &o, &fast));
  assert_int_equal(exact.compute_type, KILN_CUBLAS_COMPUTE_32F);
  assert_int_equal(fast.compute_type, KILN_CUBLAS_COMPUTE_32F_FAST_TF32);
  /* Different plans: the algorithm cache keeps them apart. */
  assert_true(memcmp(&exact, &fast, sizeof(exact)) != 0);
  /* TF32 applies to f32 only. */
  g.dtype = KILN_GEMM_F64;
  ASSERT_OK(kiln_cublaslt_plan(&g, &o, &fast));
  assert_int_equal(fast.compute_type, KILN_CUBLAS_COMPUTE_64F);
}

static void test_fp8_takes_the_tn_form_with_scales(void **state) {
  (void)state;
  /* x (m x k) times w^T (w stored n x k): the form of a linear layer. */
  kiln_gemm_desc_t g = {
      KILN_GEMM_BF16,          4, 128, 64, 32, false, true, 1.0, 0.0, KILN_GEMM_BF16,
      KILN_GEMM_EPILOGUE_NONE, 0};
  kiln_cublaslt_options_t o = {
      .fp8_a = KILN_LT_FP8_E4M3, .fp8_b = KILN_LT_FP8_E5M2, .a_scale = 0x1000, .b_scale = 0x2000};
  kiln_lt_plan_t p;
  ASSERT_OK(kiln_cublaslt_plan(&g, &o, &p));
  assert_true(p.fp8);
  /* cuBLASLt's A is kiln's B (e5m2), read transposed; its B is kiln's A (e4m3). */
  assert_int_equal(p.trans_a, KILN_CUBLAS_OP_T);
  assert_int_equal(p.trans_b, KILN_CUBLAS_OP_N);
  assert_int_equal(p.a.type, KILN_CUDA_R_8F_E5M2);
  assert_int_equal(p.b.type, KILN_CUDA_R_8F_E4M3);
  assert_int_equal(p.c.type, KILN_CUDA_R_16BF);
  assert_int_equal(p.a.ld, 32);
  assert_int_equal(p.b.ld, 32);
  assert_int_equal(p.compute_type, KILN_CUBLAS_COMPUTE_32F);
  assert_int_equal(p.scale_type, KILN_CUDA_R_32F);
  /* KILN_GEMM_SAME writes f32. */
  g.out_dtype = KILN_GEMM_SAME;
  ASSERT_OK(kiln_cublaslt_plan(&g, &o, &p));
  assert_int_equal(p.c.type, KILN_CUDA_R_32F);
  /* Refusals, each saying what to do. */
  kiln_gemm_desc_t nn = g;
  nn.trans_b = false;
  kiln_status s = kiln_cublaslt_plan(&nn, &o, &p);
  assert_non_null(strstr(kiln_status_message(s), "transpose the operand"));
  assert_code(s, KILN_UNIMPLEMENTED);
  kiln_gemm_desc_t odd_k = g;
  odd_k.k = 24;
  assert_code(kiln_cublaslt_plan(&odd_k, &o, &p), KILN_UNIMPLEMENTED);
  kiln_cublaslt_options_t both_e5 = {.fp8_a = KILN_LT_FP8_E5M2, .fp8_b = KILN_LT_FP8_E5M2};
  assert_code(kiln_cublaslt_plan(&g, &both_e5, &p), KILN_UNIMPLEMENTED);
  kiln_cublaslt_options_t one = {.fp8_a = KILN_LT_FP8_E4M3};
  assert_code(kiln_cublaslt_plan(&g, &one, &p), KILN_UNIMPLEMENTED);
  kiln_gemm_desc_t f64_out = g;
  f64_out.out_dtype = KILN_GEMM_F64;
  assert_code(kiln_cublaslt_plan(&f64_out, &o, &p), KILN_UNIMPLEMENTED);
}

/* Equal descriptors give byte-equal plans (the cache compares plans with memcmp); a
 * different shape or transpose gives a different plan. */
/* ---- epilogues ------------------------------------------------------------------------------ */

/* kiln's per-column bias (n elements) is cuBLASLt's vector along D's rows (D is kiln's C
 * transposed: n rows); each activation with and without a bias maps onto its epilogue; the
 * bias type is C's; alpha/beta stay scalars; fp8 and integer gemms refuse an epilogue. */
static void test_epilogues_map_onto_cublaslt_bias_relu_gelu(void **state) {
  (void)state;
  const struct {
    kiln_gemm_dtype_t in, out;
    kiln_gemm_epilogue_t act;
    bool bias;
    uint32_t want;
    int32_t bias_type;
  } cases[] = {
      {KILN_GEMM_F32, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_NONE, true, KILN_CUBLASLT_EPILOGUE_BIAS,
       KILN_CUDA_R_32F},
      {KILN_GEMM_F32, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_RELU, true,
       KILN_CUBLASLT_EPILOGUE_RELU_BIAS, KILN_CUDA_R_32F},
      {KILN_GEMM_F32, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_RELU, false, KILN_CUBLASLT_EPILOGUE_RELU,
       0},
      {KILN_GEMM_BF16, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_GELU_TANH, true,
       KILN_CUBLASLT_EPILOGUE_GELU_BIAS, KILN_CUDA_R_16BF},
      {KILN_GEMM_BF16, KILN_GEMM_F32, KILN_GEMM_EPILOGUE_GELU_TANH, false,
       KILN_CUBLASLT_EPILOGUE_GELU, 0},
      {KILN_GEMM_F16, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_RELU, true,
       KILN_CUBLASLT_EPILOGUE_RELU_BIAS, KILN_CUDA_R_16F},
      {KILN_GEMM_F64, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_NONE, true, KILN_CUBLASLT_EPILOGUE_BIAS,
       KILN_CUDA_R_64F},
      {KILN_GEMM_F16, KILN_GEMM_F32, KILN_GEMM_EPILOGUE_NONE, false, KILN_CUBLASLT_EPILOGUE_DEFAULT,
       0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kiln_gemm_desc_t g = {cases[i].in,  3,
                          64,           48,
                          32,           false,
                          true,         0.5,
                          1.0,          cases[i].out,
                          cases[i].act, cases[i].bias ? (kiln_devptr_t)0x1000 : 0};
    kiln_lt_plan_t p;
    ASSERT_OK(kiln_cublaslt_plan(&g, NULL, &p));
    assert_int_equal(p.epilogue, cases[i].want);
    assert_int_equal(p.bias, cases[i].bias);
    assert_int_equal(p.bias_type, cases[i].bias_type);
    /* The bias runs along D's rows: D is n x m column-major, so its length n is D's rows. */
    assert_int_equal(p.c.rows, g.n);
    assert_int_equal(p.c.batch, 3);
    /* bf16/f16 keep f32 accumulation and f32 scalars with an epilogue too. */
    if (cases[i].in == KILN_GEMM_BF16 || cases[i].in == KILN_GEMM_F16) {
      assert_int_equal(p.compute_type, KILN_CUBLAS_COMPUTE_32F);
      assert_int_equal(p.scale_type, KILN_CUDA_R_32F);
    }
  }
  /* The bias address is not part of the plan (the algorithm cache key). */
  kiln_gemm_desc_t g1 = {
      KILN_GEMM_F32,           1,     8, 8, 8, false, false, 1.0, 0.0, KILN_GEMM_SAME,
      KILN_GEMM_EPILOGUE_RELU, 0x1000};
  kiln_gemm_desc_t g2 = g1;
  g2.bias = 0x2000;
  kiln_lt_plan_t p1, p2;
  ASSERT_OK(kiln_cublaslt_plan(&g1, NULL, &p1));
  ASSERT_OK(kiln_cublaslt_plan(&g2, NULL, &p2));
  assert_memory_equal(&p1, &p2, sizeof(p1));
  /* Integer results take no epilogue; fp8 gemms get none planned. */
  kiln_gemm_desc_t s8 = {
      KILN_GEMM_S8, 1, 8, 8, 16, false, false, 1.0, 0.0, KILN_GEMM_S32, KILN_GEMM_EPILOGUE_RELU, 0};
  assert_code(kiln_cublaslt_plan(&s8, NULL, &p1), KILN_INVALID_ARGUMENT);
  kiln_gemm_desc_t f8 = {
      KILN_GEMM_BF16,          1,     16, 16, 16, false, true, 1.0, 0.0, KILN_GEMM_F32,
      KILN_GEMM_EPILOGUE_NONE, 0x1000};
  kiln_cublaslt_options_t o = {.fp8_a = KILN_LT_FP8_E4M3, .fp8_b = KILN_LT_FP8_E4M3};
  assert_code(kiln_cublaslt_plan(&f8, &o, &p1), KILN_UNIMPLEMENTED);
  kiln_gemm_desc_t bad = g1;
  bad.epilogue = (kiln_gemm_epilogue_t)7;
  assert_code(kiln_cublaslt_plan(&bad, NULL, &p1), KILN_INVALID_ARGUMENT);
}

static void test_plans_compare_by_value(void **state) {
  (void)state;
  kiln_gemm_desc_t g = {
      KILN_GEMM_F16,           3, 96, 48, 64, true, false, 2.0, 1.0, KILN_GEMM_F32,
      KILN_GEMM_EPILOGUE_NONE, 0};
  kiln_lt_plan_t p1, p2;
  memset(&p2, 0xAB, sizeof(p2));
  ASSERT_OK(kiln_cublaslt_plan(&g, NULL, &p1));
  ASSERT_OK(kiln_cublaslt_plan(&g, NULL, &p2));
  assert_memory_equal(&p1, &p2, sizeof(p1));
  g.trans_b = true;
  ASSERT_OK(kiln_cublaslt_plan(&g, NULL, &p2));
  assert_true(memcmp(&p1, &p2, sizeof(p1)) != 0);
}

/* ---- a missing library ---------------------------------------------------------------------- */

static void test_missing_library_is_unavailable_naming_every_name(void **state) {
  (void)state;
  const char *names[] = {"/nonexistent/libcublasLt.so.13", "/nonexistent/libcublasLt.so.12"};
  kiln_cublaslt_t *lt = (kiln_cublaslt_t *)(uintptr_t)1;
  kiln_status s = kiln_cublaslt_open(names, 2, &lt);
  assert_null(lt);
  assert_non_null(strstr(kiln_status_message(s), "/nonexistent/libcublasLt.so.13"));
  assert_non_null(strstr(kiln_status_message(s), "/nonexistent/libcublasLt.so.12"));
  assert_non_null(strstr(kiln_status_message(s), "cuBLASLt not found"));
  assert_code(s, KILN_UNAVAILABLE);
  /* A library that opens but is no cuBLASLt: the missing symbol is named. */
  const char *libm[] = {"libm.so.6"};
  s = kiln_cublaslt_open(libm, 1, &lt);
  assert_null(lt);
  assert_non_null(strstr(kiln_status_message(s), "cublasLtCreate not found"));
  assert_code(s, KILN_UNAVAILABLE);
  /* The default names: cuBLAS 13 then 12. */
  size_t n = 0;
  const char *const *def = kiln_cublaslt_library_names(&n);
  assert_int_equal(n, 2);
  assert_string_equal(def[0], "libcublasLt.so.13");
  assert_string_equal(def[1], "libcublasLt.so.12");
  assert_string_equal(kiln_cublas_status_name(15), "CUBLAS_STATUS_NOT_SUPPORTED");
  assert_string_equal(kiln_cublas_status_name(12345), "unknown cuBLAS status");
}

/* The real library where the CUDA toolkit has one (not on the loader's path here): every
 * entry point kiln declares resolves; without a GPU cublasLtCreate fails, which is INTERNAL
 * (a library that is there but does not work), never UNAVAILABLE. Not under AddressSanitizer:
 * the library's own allocations at load would count as leaks. */
static void test_the_toolkits_library_provides_every_entry_point(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  KILN_SKIP("not under AddressSanitizer (cuBLASLt's allocations at load)");
#else
  static const char *const candidates[] = {"/usr/local/cuda/lib64/libcublasLt.so.13",
                                           "/usr/local/cuda/lib/libcublasLt.so.13",
                                           "/usr/local/cuda/lib64/libcublasLt.so.12"};
  const char *path = NULL;
  for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && !path; i++) {
    FILE *f = fopen(candidates[i], "rb");
    if (f) {
      fclose(f);
      path = candidates[i];
    }
  }
  if (!path) KILN_SKIP("no libcublasLt under /usr/local/cuda");
  kiln_cublaslt_t *lt = NULL;
  kiln_status s = kiln_cublaslt_open(&path, 1, &lt);
  if (s) {
    printf("%s\n", kiln_status_message(s));
    assert_null(strstr(kiln_status_message(s), "not found"));
    assert_non_null(strstr(kiln_status_message(s), "cublasLtCreate"));
    assert_code(s, KILN_INTERNAL);
    assert_null(lt);
  } else {
    assert_int_equal(kiln_cublaslt_cache_size(lt), 0);
    kiln_cublaslt_destroy(lt, NULL);
  }
#endif
}

/* The probe behind kiln_thunk_emit_options_t.cublaslt (the plugin's CUDA client and
 * kiln-run --backend=cuda): false for names that do not open and for a library without
 * cublasLtMatmul, true for the toolkit's library where it has one; the once-per-process
 * answer is stable and equals a probe of the default names. */
static void test_probe_says_whether_cublaslt_loads(void **state) {
  (void)state;
  const char *missing[] = {"/nonexistent/libcublasLt.so.13"};
  assert_false(kiln_cublaslt_probe(missing, 1));
  const char *libm[] = {"libm.so.6"};
  assert_false(kiln_cublaslt_probe(libm, 1));
#if defined(__SANITIZE_ADDRESS__)
  printf(
      "not under AddressSanitizer: loading cuBLASLt (on the loader's path here) leaks at load\n");
#else
  bool first = kiln_cublaslt_available();
  assert_true(kiln_cublaslt_available() == first);
  assert_true(kiln_cublaslt_probe(NULL, 0) == first);
  static const char *const toolkit[] = {"/usr/local/cuda/lib64/libcublasLt.so.13",
                                        "/usr/local/cuda/lib64/libcublasLt.so.12"};
  FILE *f = fopen(toolkit[0], "rb");
  if (!f) f = fopen(toolkit[1], "rb");
  if (f) {
    fclose(f);
    assert_true(kiln_cublaslt_probe(toolkit, 2));
  } else {
    printf("no libcublasLt under /usr/local/cuda/lib64: the positive probe is not checked\n");
  }
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_transpose_form_computes_the_row_major_gemm),
      cmocka_unit_test(test_types_for_every_element_type),
      cmocka_unit_test(test_tf32_only_where_the_precision_allows_it),
      cmocka_unit_test(test_fp8_takes_the_tn_form_with_scales),
      cmocka_unit_test(test_epilogues_map_onto_cublaslt_bias_relu_gelu),
      cmocka_unit_test(test_plans_compare_by_value),
      cmocka_unit_test(test_missing_library_is_unavailable_naming_every_name),
      cmocka_unit_test(test_the_toolkits_library_provides_every_entry_point),
      cmocka_unit_test(test_probe_says_whether_cublaslt_loads),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
