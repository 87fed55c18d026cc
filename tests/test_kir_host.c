/* Kernel IR on the host: the kernels lower to phase/thread-loop code, JIT, run on the worker
 * pool and match plain C: bit for bit for the reduction (same summation order as the GPU
 * algorithm), the transpose and integer/f32 elementwise code; within bf16 rounding for GELU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <llvm-c/Core.h>

#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/numeric.h"
#include "tests/kir_test_kernels.h"

static kiln_host_pool_t *g_pool;

static int setup(void **state) {
  (void)state;
  return kiln_host_pool_create(4, &g_pool) ? -1 : 0;
}
static int teardown(void **state) {
  (void)state;
  kiln_host_pool_destroy(g_pool);
  return 0;
}

static float gelu_ref(float x) {
  return x * 0.5f * (1.0f + tanhf(0.79785f * (x + 0.044708f * x * x * x)));
}

/* GELU as the kernel computes it for bf16: each op in f32, rounded to bf16. */
static float bf(float x) { return kiln_bf16_to_f32(kiln_f32_to_bf16(x)); }
static float gelu_bf16_ref(float x) {
  float c05 = bf(0.5f), c1 = bf(1.0f), c2 = bf(0.79785f), c3 = bf(0.044708f);
  float sq = bf(x * x), cube = bf(sq * x), m3 = bf(cube * c3), a1 = bf(x + m3);
  float m2 = bf(a1 * c2), th = bf(tanhf(m2)), a0 = bf(th + c1), m1 = bf(a0 * c05);
  return bf(x * m1);
}

static void test_gelu_f32_matches_c_within_a_few_ulp(void **state) {
  (void)state;
  int64_t dims[3] = {4, 16, 256};
  int n = 4 * 16 * 256;
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_F32, dims, 4);
  kiln_host_jit_t *jit;
  kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
  float *in = malloc(sizeof(float) * (size_t)n), *out = calloc((size_t)n, sizeof(float));
  for (int i = 0; i < n; i++) in[i] = (float)((i * 7919) % 2001 - 1000) * 0.006f;
  void *args[2] = {in, out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  for (int i = 0; i < n; i++) {
    float r = gelu_ref(in[i]);
    float tol = 4.0f * nextafterf(fabsf(r), INFINITY) - 4.0f * fabsf(r) + 1e-37f;
    if (fabsf(out[i] - r) > tol + 1e-7f) {
      fprintf(stderr, "x=%g got %.9g want %.9g\n", in[i], out[i], r);
      fail();
    }
  }
  free(in);
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

static void test_gelu_bf16_partial_grid_matches_c_within_bf16_rounding(void **state) {
  (void)state;
  int64_t dims[3] = {3, 5, 70};
  int n = 3 * 5 * 70;
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_BF16, dims, 4);
  kiln_host_jit_t *jit;
  kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
  uint16_t *in = malloc(2 * (size_t)n + 64), *out = calloc((size_t)n + 32, 2);
  for (int i = 0; i < n + 32; i++) out[i] = 0xBEEF;
  for (int i = 0; i < n; i++) in[i] = kiln_f32_to_bf16((float)(i % 97) * 0.07f - 3.0f);
  void *args[2] = {in, out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  for (int i = 0; i < n; i++) {
    float x = kiln_bf16_to_f32(in[i]);
    float r = gelu_bf16_ref(x), got = kiln_bf16_to_f32(out[i]);
    /* the same bf16 rounding after every op; tanh may differ by an f32 ulp, which can move
     * one bf16 rounding: allow one bf16 ulp */
    float tol = ldexpf(1.0f, (int)floorf(log2f(fabsf(r) + 1e-30f)) - 7);
    if (fabsf(got - r) > tol) {
      fprintf(stderr, "i=%d x=%g got %g want %g\n", i, x, got, r);
      fail();
    }
  }
  for (int i = n; i < n + 32; i++) assert_int_equal(out[i], 0xBEEF); /* nothing past the end */
  free(in);
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

static void test_row_reduce_equals_gpu_order_sum_bit_for_bit(void **state) {
  (void)state;
  int64_t rows = 37, cols = 1024;
  kiln_kir_module_t *m = kir_test_build_row_reduce(rows, cols);
  kiln_host_jit_t *jit;
  kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
  float *in = malloc(sizeof(float) * (size_t)(rows * cols)), *out = calloc((size_t)rows, sizeof(float));
  for (int64_t i = 0; i < rows * cols; i++) in[i] = (float)((i * 2654435761u) % 10007) / 997.0f - 5.0f;
  void *args[2] = {in, out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  for (int64_t r = 0; r < rows; r++) {
    float want = kir_test_row_reduce_ref(in + r * cols, cols);
    if (memcmp(&want, &out[r], sizeof(float)) != 0) {
      fprintf(stderr, "row %lld: got %.9g want %.9g\n", (long long)r, out[r], want);
      fail();
    }
  }
  free(in);
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

static void test_transpose_through_shared_tile_is_exact(void **state) {
  (void)state;
  int64_t h = 96, w = 160;
  kiln_kir_module_t *m = kir_test_build_transpose(h, w);
  kiln_host_jit_t *jit;
  kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
  float *in = malloc(sizeof(float) * (size_t)(h * w)), *out = calloc((size_t)(h * w), sizeof(float));
  for (int64_t i = 0; i < h * w; i++) in[i] = (float)i;
  void *args[2] = {in, out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  for (int64_t r = 0; r < w; r++)
    for (int64_t c = 0; c < h; c++) assert_true(out[r * h + c] == in[c * w + r]);
  free(in);
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

static void test_twice_called_subgraph_int32_and_f32_exact(void **state) {
  (void)state;
  int64_t dims[3] = {3, 7, 50};
  int n = 3 * 7 * 50;
  for (int pass = 0; pass < 2; pass++) {
    kiln_elem_type_t et = pass ? KILN_F32 : KILN_S32;
    kiln_kir_module_t *m = kir_test_build_twice(et, dims);
    kiln_host_jit_t *jit;
    kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
    int32_t *ai = malloc(4 * (size_t)n), *bi = malloc(4 * (size_t)n), *oi = calloc((size_t)n, 4);
    for (int i = 0; i < n; i++) {
      int32_t x = (int32_t)(i * 40503u) - 1000000, y = (int32_t)(i * 2654435761u);
      if (pass) {
        float fx = (float)x / 7.0f, fy = (float)y / 1e6f;
        memcpy(&ai[i], &fx, 4);
        memcpy(&bi[i], &fy, 4);
      } else {
        ai[i] = x;
        bi[i] = y;
      }
    }
    void *args[3] = {ai, bi, oi};
    assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
    for (int i = 0; i < n; i++) {
      if (pass) {
        float x, y, got;
        memcpy(&x, &ai[i], 4);
        memcpy(&y, &bi[i], 4);
        memcpy(&got, &oi[i], 4);
        float want = (x * 3.0f - y) + (y * 3.0f - x);
        assert_true(memcmp(&got, &want, 4) == 0);
      } else {
        uint32_t want = ((uint32_t)ai[i] * 3u - (uint32_t)bi[i]) + ((uint32_t)bi[i] * 3u - (uint32_t)ai[i]);
        assert_int_equal((uint32_t)oi[i], want);
      }
    }
    free(ai);
    free(bi);
    free(oi);
    kiln_host_jit_destroy(jit);
    kiln_kir_module_destroy(m);
  }
}

/* out[0] += in[i] with atomics from every thread of every block, on 4 workers. */
static void test_atomic_add_from_all_blocks_sums_exactly(void **state) {
  (void)state;
  kiln_kir_module_t *m = kiln_kir_module_create("atomics", NULL);
  int64_t n = 64 * 128, one = 1;
  const kiln_kir_type_t *tin = kiln_kir_type_tensor(m, KILN_S32, 1, &n, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *tout = kiln_kir_type_tensor(m, KILN_S32, 1, &one, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *ps[2] = {tin, tout};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "atomics", KILN_KIR_FUNC_KERNEL, ps, NULL, 2, &tout, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {128, 1, 1}, grid[3] = {64, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, 127), kiln_kir_block_id(&b, 0, 0, 63)};
  kiln_kir_value_t *i = kiln_kir_apply_indexing1(
      &b, kir_test_map(m, "(th, bl) -> (bl * 128 + th), domain: th in [0, 127], bl in [0, 63]"), ids, 2);
  kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), &i, 1);
  kiln_kir_value_t *z = kiln_kir_const_index(&b, 0);
  kiln_kir_value_t *r = kiln_kir_atomic_rmw(&b, KILN_KIR_ATOMIC_ADD, x, kiln_kir_func_param(k, 1), &z, 1);
  kiln_kir_return(&b, &r, 1);
  m = kir_test_finish(&b, m);
  kiln_host_jit_t *jit;
  kiln_kir_host_kernel_t kk = kir_test_compile_host(m, &jit);
  int32_t *in = malloc(4 * (size_t)n), out = 0, want = 0;
  for (int64_t q = 0; q < n; q++) {
    in[q] = (int32_t)(q % 1000) - 300;
    want += in[q];
  }
  void *args[2] = {in, &out};
  for (int rep = 0; rep < 3; rep++) {
    out = 0;
    assert_null(kiln_kir_host_kernel_run(&kk, g_pool, args));
    assert_int_equal(out, want);
  }
  free(in);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

/* A loop body may open with barriers (the sort's step loop: the host runs such a loop's
 * iterations outside its thread loops); a barrier after other work in the body is refused. */
static void test_host_rejects_barrier_inside_a_loop_after_other_ops(void **state) {
  (void)state;
  kiln_kir_module_t *m = kiln_kir_module_create("nested_barrier", NULL);
  int64_t n = 32;
  const kiln_kir_type_t *t = kiln_kir_type_tensor(m, KILN_F32, 1, &n, KILN_KIR_SPACE_GLOBAL);
  kiln_kir_func_t *k = kiln_kir_func_create(m, "nb", KILN_KIR_FUNC_KERNEL, &t, NULL, 1, &t, 1);
  kiln_kir_func_set_written(k, 0, true);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *sh = kiln_kir_alloc_shared(&b, KILN_F32, 1, &n);
  kiln_kir_op_t *f = kiln_kir_for(&b, kiln_kir_const_index(&b, 0), kiln_kir_const_index(&b, 2),
                                  kiln_kir_const_index(&b, 1), &sh, 1);
  kiln_kir_builder_enter(&b, kiln_kir_op_region(f, 0));
  kiln_kir_value_t *arg = kiln_kir_region_arg(kiln_kir_op_region(f, 0), 1);
  kiln_kir_value_t *zero = kiln_kir_const_index(&b, 0);
  kiln_kir_const_t one = {.f = 1.0};
  kiln_kir_value_t *w = kiln_kir_insert(
      &b, kiln_kir_const(&b, kiln_kir_type_scalar(m, KILN_F32), one), arg, &zero, 1);
  kiln_kir_value_t *s2 = kiln_kir_op_result(kiln_kir_barrier(&b, &w, 1), 0);
  kiln_kir_yield(&b, &s2, 1);
  kiln_kir_builder_exit(&b);
  kiln_kir_value_t *p = kiln_kir_func_param(k, 0);
  kiln_kir_return(&b, &p, 1);
  m = kir_test_finish(&b, m);
  assert_non_null(m);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  kiln_status s = kiln_kir_lower_host(m, ctx, &mod);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "top level"));
  kiln_status_free(s);
  LLVMContextDispose(ctx);
  kiln_kir_module_destroy(m);
}

/* out = convert(in) between f32 and `et` over f32[n] or et[n]. */
static kiln_kir_module_t *build_convert(kiln_elem_type_t from, kiln_elem_type_t to, int64_t n) {
  kiln_kir_module_t *m = kiln_kir_module_create("convert", NULL);
  const kiln_kir_type_t *ti = kiln_kir_type_tensor(m, from, 1, &n, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *to_t = kiln_kir_type_tensor(m, to, 1, &n, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *ps[2] = {ti, to_t};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "convert", KILN_KIR_FUNC_KERNEL, ps, NULL, 2, &to_t, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {128, 1, 1}, grid[3] = {n / 128, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, 127), kiln_kir_block_id(&b, 0, 0, n / 128 - 1)};
  char text[160];
  snprintf(text, sizeof(text), "(th, bl) -> (bl * 128 + th), domain: th in [0, 127], bl in [0, %lld]",
           (long long)(n / 128 - 1));
  kiln_kir_value_t *i = kiln_kir_apply_indexing1(&b, kir_test_map(m, text), ids, 2);
  kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), &i, 1);
  kiln_kir_value_t *y = kiln_kir_convert(&b, x, kiln_kir_type_scalar(m, to));
  kiln_kir_value_t *r = kiln_kir_insert(&b, y, kiln_kir_func_param(k, 1), &i, 1);
  kiln_kir_return(&b, &r, 1);
  return kir_test_finish(&b, m);
}

static void test_narrow_float_conversions_match_numeric_h_bit_for_bit(void **state) {
  (void)state;
  static const kiln_elem_type_t kTypes[] = {
      KILN_BF16,        KILN_F16,           KILN_F8E5M2,       KILN_F8E4M3,
      KILN_F8E4M3FN,    KILN_F8E4M3B11FNUZ, KILN_F8E5M2FNUZ,   KILN_F8E4M3FNUZ,
      KILN_F8E3M4,      KILN_F8E8M0FNU,     KILN_F4E2M1FN};
  const int64_t n = 1 << 16;
  float *in = malloc(sizeof(float) * (size_t)n);
  /* a sweep over magnitudes, signs, ties, subnormals, inf and NaN */
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)(i * 65599u) ^ (uint32_t)(i << 20);
    if (i % 7 == 0) u = (uint32_t)((i / 7) << 13) | (i & 1 ? 0x1000u : 0); /* exact ties */
    memcpy(&in[i], &u, 4);
  }
  in[0] = INFINITY;
  in[1] = -INFINITY;
  in[2] = NAN;
  in[3] = 0.0f;
  in[4] = -0.0f;
  in[5] = 1e-45f;
  in[6] = -NAN;
  for (size_t t = 0; t < sizeof(kTypes) / sizeof(kTypes[0]); t++) {
    kiln_elem_type_t et = kTypes[t];
    size_t sb = kiln_elem_type_storage_bytes(et);
    kiln_kir_module_t *m = build_convert(KILN_F32, et, n);
    kiln_host_jit_t *jit;
    kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
    uint8_t *out = calloc((size_t)n, sb);
    void *args[2] = {in, out};
    assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
    for (int64_t i = 0; i < n; i++) {
      uint32_t got = sb == 2 ? ((uint16_t *)out)[i] : out[i];
      uint32_t want = et == KILN_BF16 ? kiln_f32_to_bf16(in[i])
                      : et == KILN_F16 ? kiln_f32_to_f16(in[i])
                                       : kiln_narrow_from_f64(et, (double)in[i]);
      if (got != want) {
        fprintf(stderr, "%s(%.9g = 0x%08x): got 0x%x want 0x%x\n", kiln_elem_type_name(et), in[i],
                *(uint32_t *)&in[i], got, want);
        fail();
      }
    }
    free(out);
    kiln_host_jit_destroy(jit);
    kiln_kir_module_destroy(m);
    if (sb != 1) continue;
    /* every code back to f32 */
    m = build_convert(et, KILN_F32, 256);
    k = kir_test_compile_host(m, &jit);
    uint8_t codes[256];
    float back[256];
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    void *args2[2] = {codes, back};
    assert_null(kiln_kir_host_kernel_run(&k, g_pool, args2));
    int bits = kiln_elem_type_bits(et);
    for (int i = 0; i < (1 << bits); i++) {
      double want = kiln_narrow_to_f64(et, (uint32_t)i);
      if (isnan(want)) assert_true(isnan(back[i]));
      else if (!((double)back[i] == want && !signbit(back[i]) == !signbit(want))) {
        fprintf(stderr, "%s code 0x%x: got %g want %g\n", kiln_elem_type_name(et), i, back[i], want);
        fail();
      }
    }
    kiln_host_jit_destroy(jit);
    kiln_kir_module_destroy(m);
  }
  free(in);
}

static int g_calls;
static void count_blocks(void **args, int64_t b, int64_t e) {
  __atomic_add_fetch((int64_t *)args[0], e - b, __ATOMIC_RELAXED);
  __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
}

static void test_pool_runs_every_block_once_for_any_worker_count(void **state) {
  (void)state;
  int counts[] = {1, 2, 3, 8};
  for (size_t c = 0; c < 4; c++) {
    kiln_host_pool_t *p;
    assert_null(kiln_host_pool_create(counts[c], &p));
    assert_int_equal(kiln_host_pool_num_workers(p), counts[c]);
    for (int64_t nb = 0; nb < 300; nb += 37) {
      int64_t total = 0;
      void *args[1] = {&total};
      assert_null(kiln_host_pool_launch(p, count_blocks, args, nb, 0));
      assert_int_equal(total, nb);
    }
    kiln_host_pool_destroy(p);
  }
  kiln_status s = kiln_host_pool_launch(NULL, NULL, NULL, 3, 0);
  assert_non_null(s);
  kiln_status_free(s);
}

/* A kernel of one-thread blocks on grid `g` writing each block's (x, y, z) block ids as s32 at
 * out[((z * gy + y) * gx + x) * 3 + 0..2]. */
static kiln_kir_module_t *build_block_ids(const int64_t g[3]) {
  kiln_kir_module_t *m = kiln_kir_module_create("block_ids", NULL);
  int64_t n = g[0] * g[1] * g[2] * 3;
  const kiln_kir_type_t *tout = kiln_kir_type_tensor(m, KILN_S32, 1, &n, KILN_KIR_SPACE_GLOBAL);
  const char *kn[1] = {"out"};
  kiln_kir_func_t *k =
      kiln_kir_func_create(m, "block_ids", KILN_KIR_FUNC_KERNEL, &tout, kn, 1, &tout, 1);
  kiln_kir_func_set_written(k, 0, true);
  int64_t block[3] = {1, 1, 1};
  kiln_kir_func_set_launch(k, block, g);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[3];
  for (int a = 0; a < 3; a++) ids[a] = kiln_kir_block_id(&b, a, 0, g[a] - 1);
  char text[320];
  snprintf(text, sizeof(text),
           "(bl_x, bl_y, bl_z)[c] -> (((bl_z * %lld + bl_y) * %lld + bl_x) * 3 + c), domain: "
           "bl_x in [0, %lld], bl_y in [0, %lld], bl_z in [0, %lld], c in [0, 2]",
           (long long)g[1], (long long)g[0], (long long)(g[0] - 1), (long long)(g[1] - 1),
           (long long)(g[2] - 1));
  const kiln_kir_type_t *s32 = kiln_kir_type_scalar(m, KILN_S32);
  kiln_kir_value_t *out = kiln_kir_func_param(k, 0);
  for (int c = 0; c < 3; c++) {
    kiln_kir_value_t *cv = kiln_kir_const_index(&b, c);
    kiln_kir_op_t *ix = kiln_kir_apply_indexing(&b, kir_test_map(m, text), ids, 3, &cv, 1);
    kiln_kir_value_t *idx = kiln_kir_op_result(ix, 0);
    out = kiln_kir_insert(&b, kiln_kir_convert(&b, ids[c], s32), out, &idx, 1);
  }
  kiln_kir_return(&b, &out, 1);
  return kir_test_finish(&b, m);
}

/* How often `what` occurs in `text`. */
/* Runs the pipeline on `m` and returns its host LLVM IR as text (kiln_free). */
static char *host_ir_of(kiln_kir_module_t *m) {
  assert_null(kiln_kir_pipeline_run(m, NULL));
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef lm = NULL;
  assert_null(kiln_kir_lower_host(m, ctx, &lm));
  char *text = LLVMPrintModuleToString(lm);
  char *ir = kiln_strdup(text);
  LLVMDisposeMessage(text);
  LLVMDisposeModule(lm);
  LLVMContextDispose(ctx);
  return ir;
}

static int count_of(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

/* Host kernels run blocks [0, gx * gy * gz) (x fastest): the lowering derives the block ids
 * without a modulo that cannot wrap (x is the linear block when y = z = 1, y the quotient by
 * x when z = 1), and every grid shape still gives each block its own ids. */
static void test_block_ids_of_every_grid_shape_without_needless_modulo(void **state) {
  (void)state;
  const int64_t grids[][3] = {{13, 1, 1}, {5, 3, 1}, {4, 3, 2}, {1, 6, 1},
                              {1, 1, 4},  {1, 3, 2}, {1, 1, 1}, {7, 1, 3}};
  for (size_t gi = 0; gi < sizeof(grids) / sizeof(grids[0]); gi++) {
    const int64_t *g = grids[gi];
    kiln_kir_module_t *m = build_block_ids(g);
    assert_non_null(m);
    char *ir = host_ir_of(m);
    /* the division and modulo the ids need, and no other */
    int urem = (g[0] > 1 && g[1] * g[2] > 1) + (g[1] > 1 && g[2] > 1);
    int udiv = (g[1] > 1 && g[0] > 1) + (g[2] > 1);
    if (count_of(ir, " urem ") != urem || count_of(ir, " udiv ") != udiv) {
      fprintf(stderr, "grid %lld x %lld x %lld: %d urem (want %d), %d udiv (want %d)\n",
              (long long)g[0], (long long)g[1], (long long)g[2], count_of(ir, " urem "), urem,
              count_of(ir, " udiv "), udiv);
      fail();
    }
    kiln_free(ir);
    kiln_host_jit_t *jit;
    assert_null(kiln_host_jit_create(NULL, &jit));
    kiln_kir_host_kernel_t k;
    assert_null(kiln_kir_compile_host(m, jit, &k));
    int64_t n = g[0] * g[1] * g[2];
    int32_t *out = malloc((size_t)n * 3 * sizeof(int32_t));
    for (int64_t i = 0; i < n * 3; i++) out[i] = -1;
    void *args[1] = {out};
    assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
    for (int64_t z = 0; z < g[2]; z++)
      for (int64_t y = 0; y < g[1]; y++)
        for (int64_t x = 0; x < g[0]; x++) {
          const int32_t *o = out + ((z * g[1] + y) * g[0] + x) * 3;
          assert_int_equal(o[0], x);
          assert_int_equal(o[1], y);
          assert_int_equal(o[2], z);
        }
    free(out);
    kiln_host_jit_destroy(jit);
    kiln_kir_module_destroy(m);
  }
}

/* Block 128 over rows of 64: out[bl * 128 + th] = (th floordiv 64) * 100000 + (th mod 64) *
 * 1000 + (th floordiv 16) * 100 + (th mod 16) * 4 + (th floordiv 48) + bl * 1000000. */
static kiln_kir_module_t *build_split_rows(int64_t blocks) {
  kiln_kir_module_t *m = kiln_kir_module_create("split_rows", NULL);
  int64_t n = blocks * 128;
  const kiln_kir_type_t *t = kiln_kir_type_tensor(m, KILN_S32, 1, &n, KILN_KIR_SPACE_GLOBAL);
  kiln_kir_func_t *k =
      kiln_kir_func_create(m, "split_rows", KILN_KIR_FUNC_KERNEL, &t, NULL, 1, &t, 1);
  kiln_kir_func_set_written(k, 0, true);
  int64_t block[3] = {128, 1, 1}, grid[3] = {blocks, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, 127),
                              kiln_kir_block_id(&b, 0, 0, blocks - 1)};
  char map[320];
  snprintf(map, sizeof map,
           "(th, bl) -> ((th floordiv 64) * 100000 + (th mod 64) * 1000 + (th floordiv 16) * 100 + "
           "(th mod 16) * 4 + th floordiv 48 + bl * 1000000, bl * 128 + th), "
           "domain: th in [0, 127], bl in [0, %lld]",
           (long long)(blocks - 1));
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(&b, kir_test_map(m, map), ids, 2, NULL, 0);
  kiln_kir_value_t *v =
      kiln_kir_convert(&b, kiln_kir_op_result(ap, 0), kiln_kir_type_scalar(m, KILN_S32));
  kiln_kir_value_t *oi = kiln_kir_op_result(ap, 1);
  kiln_kir_value_t *o = kiln_kir_insert(&b, v, kiln_kir_func_param(k, 0), &oi, 1);
  kiln_kir_return(&b, &o, 1);
  return kir_test_finish(&b, m);
}

/* A block covering two rows of a 64-wide innermost dimension runs its x thread loop as rows
 * (txq) around columns (txr), the row and column read from the loop variables; every
 * division of the thread id still gives the right value. */
static void test_x_thread_loop_splits_by_the_row_width(void **state) {
  (void)state;
  const int64_t blocks = 5;
  kiln_kir_module_t *m = build_split_rows(blocks);
  assert_non_null(m);
  char *ir = host_ir_of(m);
  assert_non_null(strstr(ir, "%txq"));
  assert_non_null(strstr(ir, "%txr"));
  /* only th floordiv 48 divides the thread id; 64 and 16 read the loop variables */
  assert_int_equal(count_of(ir, "udiv i64 %tx, 48"), 1);
  assert_int_equal(count_of(ir, "udiv i64 %tx,"), 1);
  assert_int_equal(count_of(ir, "urem i64 %tx,"), 0);
  assert_int_equal(count_of(ir, "udiv i64 %txr"), 1); /* (th mod 64) floordiv 16 */
  kiln_free(ir);
  kiln_host_jit_t *jit;
  assert_null(kiln_host_jit_create(NULL, &jit));
  kiln_kir_host_kernel_t k;
  assert_null(kiln_kir_compile_host(m, jit, &k));
  int32_t *out = malloc((size_t)blocks * 128 * sizeof(int32_t));
  for (int64_t i = 0; i < blocks * 128; i++) out[i] = -1;
  void *args[1] = {out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  for (int64_t bl = 0; bl < blocks; bl++)
    for (int64_t th = 0; th < 128; th++) {
      int64_t want =
          th / 64 * 100000 + th % 64 * 1000 + th / 16 * 100 + th % 16 * 4 + th / 48 + bl * 1000000;
      assert_int_equal(out[bl * 128 + th], want);
    }
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_f32_matches_c_within_a_few_ulp),
      cmocka_unit_test(test_gelu_bf16_partial_grid_matches_c_within_bf16_rounding),
      cmocka_unit_test(test_row_reduce_equals_gpu_order_sum_bit_for_bit),
      cmocka_unit_test(test_transpose_through_shared_tile_is_exact),
      cmocka_unit_test(test_twice_called_subgraph_int32_and_f32_exact),
      cmocka_unit_test(test_atomic_add_from_all_blocks_sums_exactly),
      cmocka_unit_test(test_narrow_float_conversions_match_numeric_h_bit_for_bit),
      cmocka_unit_test(test_host_rejects_barrier_inside_a_loop_after_other_ops),
      cmocka_unit_test(test_pool_runs_every_block_once_for_any_worker_count),
      cmocka_unit_test(test_block_ids_of_every_grid_shape_without_needless_modulo),
      cmocka_unit_test(test_x_thread_loop_splits_by_the_row_width),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
