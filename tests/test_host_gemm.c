/* The host gemm (runtime/host/host_blas.c) for every element-type combination of
 * kiln_gemm_desc_t — f32, f64, c64, c128, bf16/f16 -> bf16/f16/f32, s8 -> s32 — with every
 * transpose, batches, sizes of 1 and primes, alpha/beta, on the library and on the C kernel,
 * with and without a pool, against a naive loop (host_gemm_test_util.h); the converted
 * panels of one batch too large for the scratch; s8 sums that wrap; and whole modules whose
 * dots of these types become gemm thunks on the host (and kernels for the CUDA target),
 * matching the evaluator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "status_test_util.h"

#include "compiler/eval/eval.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/thunks/compile.h"
#include "host_gemm_test_util.h"
#include "runtime/executable.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

static kiln_host_pool_t *g_pool;
static kiln_device_t *g_dev;

static int setup(void **state) {
  (void)state;
  if (kiln_host_pool_create(3, &g_pool)) return -1;
  return kiln_host_device_create(2, &g_dev) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  kiln_host_pool_destroy(g_pool);
  kiln_device_destroy(g_dev);
  return 0;
}

typedef struct combo {
  kiln_gemm_dtype_t in, out;
} combo_t;

static const combo_t kCombos[] = {
    {KILN_GEMM_F32, KILN_GEMM_SAME}, {KILN_GEMM_F64, KILN_GEMM_SAME},
    {KILN_GEMM_C64, KILN_GEMM_SAME}, {KILN_GEMM_C128, KILN_GEMM_SAME},
    {KILN_GEMM_BF16, KILN_GEMM_F32}, {KILN_GEMM_BF16, KILN_GEMM_BF16},
    {KILN_GEMM_BF16, KILN_GEMM_F16}, {KILN_GEMM_F16, KILN_GEMM_F16},
    {KILN_GEMM_F16, KILN_GEMM_F32},  {KILN_GEMM_S8, KILN_GEMM_S32},
};

/* batch, m, n, k: ones, primes (up to 128 multiply-adds the C kernel runs them even with a
 * library), and a batch of small library gemms the pool runs in parallel. */
static const int64_t kShapes[][4] = {
    {1, 1, 1, 1},    {1, 1, 7, 13},   {3, 13, 1, 7},  {1, 7, 13, 1},
    {2, 31, 17, 67}, {1, 67, 31, 17}, {40, 9, 8, 10},
};

static void test_every_type_transpose_and_shape_matches_the_naive_loop(void **state) {
  (void)state;
  const char *tried = NULL;
  const char *lib = kiln_host_blas_library(&tried);
  printf("[  INFO    ] host BLAS: %s (tried: %s)\n", lib ? lib : "none, C kernel", tried);
  /* f32 through the library here (the packed-panel test below runs it on the kernel) */
  kiln_host_gemm_f32_set_kernel(0);
  int failures = 0, runs = 0;
  for (size_t c = 0; c < sizeof(kCombos) / sizeof(kCombos[0]); c++)
    for (size_t s = 0; s < sizeof(kShapes) / sizeof(kShapes[0]); s++)
      for (int t = 0; t < 4; t++)
        for (int choice = 0; choice < 2; choice++)
          for (int pooled = 0; pooled < 2; pooled++)
            for (int scaled = 0; scaled < 2; scaled++) {
              if (scaled && kCombos[c].in == KILN_GEMM_S8) continue; /* alpha 1, beta 0 only */
              kiln_gemm_desc_t g = {kCombos[c].in,  kShapes[s][0],           kShapes[s][1],
                                    kShapes[s][2],  kShapes[s][3],           (t & 1) != 0,
                                    (t & 2) != 0,   scaled ? -0.5 : 1,       scaled ? 0.25 : 0,
                                    kCombos[c].out, KILN_GEMM_EPILOGUE_NONE, 0};
              ASSERT_OK(kiln_gemm_desc_check(&g, NULL, NULL, NULL));
              failures += !hg_check(&g, (kiln_host_blas_choice_t)choice, pooled ? g_pool : NULL);
              runs++;
            }
  printf("[  INFO    ] %d gemms, %d mismatched\n", runs, failures);
  kiln_host_gemm_f32_set_kernel(-1);
  assert_int_equal(failures, 0);
}

/* One batch whose converted operands exceed the scratch (4 Mi elements a panel): k panels
 * (all rows and columns, C summed in f32 over 2 panels of k), or with those off row panels of
 * op(A) (6 + 1 rows; 2 + 1) and column panels of op(B) (14 + 6 columns; 4 + 2), plain and both
 * transposed, beta folded in through the panels of C; all of op(B) in one column panel (8
 * columns), converted once and reused by the row panels, in all four transpose forms. */
static void test_converted_panels_of_one_large_batch_cover_every_element(void **state) {
  (void)state;
  for (int kp = 1; kp >= 0; kp--) {
    kiln_host_gemm_set_k_panels(kp != 0);
    for (int t = 0; t < 4; t += 3) {
      kiln_gemm_desc_t g = {KILN_GEMM_BF16,
                            1,
                            7,
                            20,
                            600000,
                            (t & 1) != 0,
                            (t & 2) != 0,
                            2.0,
                            0.5,
                            KILN_GEMM_BF16,
                            KILN_GEMM_EPILOGUE_NONE,
                            0};
      assert_true(hg_check(&g, KILN_HOST_BLAS_AUTO, g_pool));
    }
    kiln_gemm_desc_t g = {
        KILN_GEMM_F16,           1, 3, 6, 1 << 21, false, true, 1, 0, KILN_GEMM_F32,
        KILN_GEMM_EPILOGUE_NONE, 0};
    assert_true(hg_check(&g, KILN_HOST_BLAS_AUTO, NULL));
    for (int t = 0; t < 4; t++) {
      kiln_gemm_desc_t h = {KILN_GEMM_BF16,
                            1,
                            7,
                            8,
                            600000,
                            (t & 1) != 0,
                            (t & 2) != 0,
                            1,
                            0.5,
                            KILN_GEMM_BF16,
                            KILN_GEMM_EPILOGUE_NONE,
                            0};
      assert_true(hg_check(&h, KILN_HOST_BLAS_AUTO, t & 1 ? NULL : g_pool));
    }
  }
  kiln_host_gemm_set_k_panels(true);
}

/* Library gemms of 2^18 multiply-adds or more run as tiles of C spread over the pool, one
 * library call each (kiln_host_gemm_set_pool_tiles): batches of 100 x 96 . 96 x 48 and
 * 200 x 64 . 64 x 64 (row panels below 2^18: 2 and 4 of 50 rows per batch), one 64 x 256 . 256 x
 * 2048 (column tiles: 6 of 352 on the 3-worker pool, the last 288) and one 1000 x 80 . 80 x 40 (row
 * tiles: 6 of 176, the last 120), every library type, transpose and alpha/beta, against the naive
 * loop, with the tiles on and off (the library's threads); and an f32 bias + ReLU epilogue on the
 * column tiles (each tile's bias from its own first column), equal to one call. */
static void test_library_gemms_run_in_tiles_over_the_pool(void **state) {
  (void)state;
  if (!kiln_host_blas_library(NULL)) skip(); /* the C kernel has no tiles */
  static const int64_t shapes[][4] = {
      {6, 100, 48, 96}, {4, 200, 64, 64}, {1, 64, 2048, 256}, {1, 1000, 40, 80}};
  enum { kNumShapes = sizeof(shapes) / sizeof(shapes[0]) };
  static const int64_t kTiles[kNumShapes] = {6 * 2, 4 * 4, 6, 6};
  kiln_host_gemm_f32_set_kernel(0);
  /* The library's own thread count (OpenBLAS's) is set to one while the tiles run, and comes
   * back after: 3 here, a count of the caller's choosing. */
  void *set_sym = kiln_host_blas_symbol("openblas_set_num_threads");
  void *get_sym = kiln_host_blas_symbol("openblas_get_num_threads");
  void (*set_threads)(int) = NULL;
  int (*get_threads)(void) = NULL;
  memcpy(&set_threads, &set_sym, sizeof set_sym);
  memcpy(&get_threads, &get_sym, sizeof get_sym);
  const int threads_before = get_threads ? get_threads() : 0;
  if (set_threads && get_threads) set_threads(3);
  int failures = 0, runs = 0;
  for (int tiles = 1; tiles >= 0; tiles--) {
    kiln_host_gemm_set_pool_tiles(tiles != 0);
    for (size_t c = 0; c < 4; c++)
      for (size_t sh = 0; sh < kNumShapes; sh++)
        for (int t = 0; t < 4; t++) {
          const bool scaled = t % 2 == 1;
          kiln_gemm_desc_t g = {kCombos[c].in,  shapes[sh][0],           shapes[sh][1],
                                shapes[sh][2],  shapes[sh][3],           (t & 1) != 0,
                                (t & 2) != 0,   scaled ? -0.5 : 1,       scaled ? 0.25 : 0,
                                kCombos[c].out, KILN_GEMM_EPILOGUE_NONE, 0};
          const int64_t before = kiln_host_gemm_tiles_run();
          failures += !hg_check(&g, KILN_HOST_BLAS_AUTO, g_pool);
          const int64_t ran = kiln_host_gemm_tiles_run() - before;
          /* 6 tiles (for 3 workers) but at least one per batch; none when off */
          const int64_t want = !tiles ? 0 : kTiles[sh];
          if (ran != want)
            fail_msg("%s shape %zu: %lld tiles, expected %lld", kiln_gemm_dtype_name(kCombos[c].in),
                     sh, (long long)ran, (long long)want);
          runs++;
        }
  }
  printf("[  INFO    ] %d gemms, %d mismatched\n", runs, failures);
  assert_int_equal(failures, 0);
  if (set_threads && get_threads) {
    assert_int_equal(get_threads(), 3);
    set_threads(threads_before);
  }
  /* the epilogue: tiles on and off give the same values (within the library's reordering) */
  const int64_t m = 64, n = 2048, k = 256;
  float *a = kiln_malloc((size_t)(m * k) * 4), *b = kiln_malloc((size_t)(k * n) * 4);
  float *bias = kiln_malloc((size_t)n * 4), *c[2];
  hg_fill(KILN_GEMM_F32, a, m * k, 1, false);
  hg_fill(KILN_GEMM_F32, b, k * n, 2, false);
  hg_fill(KILN_GEMM_F32, bias, n, 3, false);
  for (int64_t j = 0; j < n; j++) bias[j] += (float)(j % 7) - 3; /* no two tiles alike */
  kiln_gemm_desc_t g = {KILN_GEMM_F32,
                        1,
                        m,
                        n,
                        k,
                        false,
                        true,
                        1,
                        0,
                        KILN_GEMM_SAME,
                        KILN_GEMM_EPILOGUE_RELU,
                        (kiln_devptr_t)(uintptr_t)bias};
  int zeros = 0;
  for (int tiles = 0; tiles < 2; tiles++) {
    kiln_host_gemm_set_pool_tiles(tiles != 0);
    c[tiles] = kiln_malloc((size_t)(m * n) * 4);
    ASSERT_OK(kiln_host_gemm(&g, a, b, c[tiles], KILN_HOST_BLAS_AUTO, g_pool));
  }
  for (int64_t i = 0; i < m * n; i++) {
    zeros += c[1][i] == 0;
    if (fabsf(c[1][i] - c[0][i]) > 1e-5f * (1 + fabsf(c[0][i])))
      fail_msg("element %lld: %g in tiles, %g in one call", (long long)i, c[1][i], c[0][i]);
  }
  assert_true(zeros > 0 && zeros < m * n); /* the ReLU cut some */
  kiln_host_gemm_set_pool_tiles(true);
  kiln_host_gemm_f32_set_kernel(-1);
  kiln_free(a), kiln_free(b), kiln_free(bias), kiln_free(c[0]), kiln_free(c[1]);
}

/* Every combo x shape ({batch, m, n, k}) x transpose, with and without the pool, alpha/beta
 * on every other case, against the naive loop: the mismatches; *runs counts the gemms. */
static int half_cases_check(const combo_t *combos, size_t ncombos, const int64_t (*shapes)[4],
                            size_t nshapes, int *runs) {
  int failures = 0;
  for (size_t c = 0; c < ncombos; c++)
    for (size_t s = 0; s < nshapes; s++)
      for (int t = 0; t < 4; t++)
        for (int pooled = 0; pooled < 2; pooled++) {
          const bool scaled = ((size_t)t + s) % 2 == 1;
          kiln_gemm_desc_t g = {combos[c].in,
                                shapes[s][0],
                                shapes[s][1],
                                shapes[s][2],
                                shapes[s][3],
                                (t & 1) != 0,
                                (t & 2) != 0,
                                scaled ? -0.5 : 1,
                                scaled ? 0.25 : 0,
                                combos[c].out,
                                KILN_GEMM_EPILOGUE_NONE,
                                0};
          failures += !hg_check(&g, KILN_HOST_BLAS_AUTO, pooled ? g_pool : NULL);
          (*runs)++;
        }
  return failures;
}

/* bf16/f16 gemms of up to 128 rows take the packed-panel kernel (kiln_host_gemm_half_kernel:
 * AVX-512 where the CPU has it; ctest's test_host_gemm_half_base runs the portable copy):
 * several k blocks (128 each), full and partial 32-column strips, full and partial 8-row
 * blocks, batches, every transpose, alpha/beta, every output type, with and without a pool;
 * more rows but at most 128 columns (transposed: C^T = op(B)^T op(A)^T), and 130 x 129 (the
 * panel path again). */
static void test_half_kernel_covers_strips_row_blocks_and_k_blocks(void **state) {
  (void)state;
  printf("[  INFO    ] bf16/f16 kernel: %s\n", kiln_host_gemm_half_kernel());
  static const combo_t combos[] = {{KILN_GEMM_BF16, KILN_GEMM_BF16},
                                   {KILN_GEMM_BF16, KILN_GEMM_F32},
                                   {KILN_GEMM_BF16, KILN_GEMM_F16},
                                   {KILN_GEMM_F16, KILN_GEMM_F16},
                                   {KILN_GEMM_F16, KILN_GEMM_F32}};
  static const int64_t shapes[][4] = {
      {1, 1, 200, 300},
      {1, 8, 64, 128},
      {3, 13, 70, 257},
      {2, 128, 33, 129},
      {1, 129, 40, 150},
      {2, 300, 1, 160},
      {1, 250, 128, 64},
      {1, 130, 129, 20},
      /* more than 128 rows and columns: blocks of 128 rows (the last one short) */
      {1, 300, 150, 40},
      {2, 260, 200, 130},
      /* tasks of 4 strips (the last group short), with the pool too */
      {2, 130, 520, 48},
  };
  int runs = 0;
  int failures = half_cases_check(combos, sizeof(combos) / sizeof(combos[0]), shapes,
                                  sizeof(shapes) / sizeof(shapes[0]), &runs);
  printf("[  INFO    ] %d gemms, %d mismatched\n", runs, failures);
  assert_int_equal(failures, 0);
  /* f32 on the kernel (X read in place where its rows run along k, else copied), whatever
   * auto picks on this machine */
  const char *why = NULL;
  const char *f32_kernel = kiln_host_gemm_f32_kernel(&why);
  printf("[  INFO    ] f32 gemms: %s (%s)\n", f32_kernel, why ? why : "");
  if (strcmp(kiln_host_gemm_half_kernel(), "panels") != 0) {
    static const combo_t f32[] = {{KILN_GEMM_F32, KILN_GEMM_F32}};
    kiln_host_gemm_f32_set_kernel(1);
    runs = 0;
    failures = half_cases_check(f32, 1, shapes, sizeof(shapes) / sizeof(shapes[0]), &runs);
    kiln_host_gemm_f32_set_kernel(-1);
    printf("[  INFO    ] f32 on the kernel: %d gemms, %d mismatched\n", runs, failures);
    assert_int_equal(failures, 0);
  }
  /* bf16 on the f32 kernel too where the pairs kernel took it above */
  if (kiln_host_gemm_half_set_bf16_dot(false)) {
    runs = 0;
    failures = half_cases_check(combos, 3, shapes, sizeof(shapes) / sizeof(shapes[0]), &runs);
    printf("[  INFO    ] bf16 on the f32 kernel: %d gemms, %d mismatched\n", runs, failures);
    assert_int_equal(failures, 0);
  }
  kiln_host_gemm_half_set_bf16_dot(true);
}

/* The vdpbf16ps kernel treats subnormal bf16 inputs as zero (the instruction's DAZ, as
 * README's Dots section says); the f32 kernel keeps them. A 1 x 32 x 64 gemm whose every
 * product is 2^-129 (a subnormal times 1; 64 of them sum to 2^-123, a normal f32). */
static void test_bf16_dot_kernel_treats_subnormal_inputs_as_zero(void **state) {
  (void)state;
  if (!kiln_host_gemm_half_set_bf16_dot(true)) skip();
  enum { K = 64, N = 32 };
  uint16_t a[K], b[K * N];
  float c[N];
  for (int i = 0; i < K; i++) a[i] = 0x0010;     /* 16 * 2^-133 = 2^-129 */
  for (int i = 0; i < K * N; i++) b[i] = 0x3f80; /* 1 */
  kiln_gemm_desc_t g = {KILN_GEMM_BF16,          1, 1, N, K, false, false, 1, 0, KILN_GEMM_F32,
                        KILN_GEMM_EPILOGUE_NONE, 0};
  ASSERT_OK(kiln_host_gemm(&g, a, b, c, KILN_HOST_BLAS_AUTO, NULL));
  for (int j = 0; j < N; j++) assert_true(c[j] == 0.0f);
  kiln_host_gemm_half_set_bf16_dot(false);
  ASSERT_OK(kiln_host_gemm(&g, a, b, c, KILN_HOST_BLAS_AUTO, NULL));
  kiln_host_gemm_half_set_bf16_dot(true);
  for (int j = 0; j < N; j++)
    if (c[j] != ldexpf(1.0f, -123)) fail_msg("c[%d] = %a", j, (double)c[j]);
}

/* B^T (a j-major op(B)) with more than 128 rows and columns (not transposed into one block):
 * the vdpbf16ps kernel packs op(B)'s pairs once for every block of rows; the same bits as each
 * block packing its own (odd k, a short last step and strip, batches, passes over k, with and
 * without the pool). */
static void test_bf16_b_transposed_packed_once_matches_per_block(void **state) {
  (void)state;
  if (!kiln_host_gemm_half_set_bf16_dot(true)) skip();
  static const int64_t shapes[][4] = {
      {1, 300, 170, 333}, {2, 260, 140, 1000}, {1, 520, 200, 130}, {1, 129, 129, 4096}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int passes = 0; passes < 2; passes++)
      for (int pooled = 0; pooled < 2; pooled++) {
        const int64_t batch = shapes[s][0], m = shapes[s][1], n = shapes[s][2], k = shapes[s][3];
        kiln_gemm_desc_t g = {
            KILN_GEMM_BF16,          batch, m, n, k, passes != 0, true, 1, 0, KILN_GEMM_F32,
            KILN_GEMM_EPILOGUE_NONE, 0};
        uint16_t *a = kiln_malloc((size_t)(batch * m * k) * 2);
        uint16_t *b = kiln_malloc((size_t)(batch * n * k) * 2);
        float *c0 = kiln_malloc((size_t)(batch * m * n) * 4);
        float *c1 = kiln_malloc((size_t)(batch * m * n) * 4);
        for (int64_t i = 0; i < batch * m * k; i++)
          hg_store(KILN_GEMM_BF16, a, i, hg_value(KILN_GEMM_BF16, i, 1), 0);
        for (int64_t i = 0; i < batch * n * k; i++)
          hg_store(KILN_GEMM_BF16, b, i, hg_value(KILN_GEMM_BF16, i, 2), 0);
        /* passes: A^T packs X in passes of kc values of k under a small bound (one batch) */
        if (passes) {
          if (batch > 1) g.batch = 1;
          kiln_host_gemm_half_set_max_x_elems(12800);
        }
        kiln_host_pool_t *pool = pooled ? g_pool : NULL;
        ASSERT_OK(kiln_host_gemm(&g, a, b, c0, KILN_HOST_BLAS_AUTO, pool));
        kiln_host_gemm_half_set_ypack(false);
        ASSERT_OK(kiln_host_gemm(&g, a, b, c1, KILN_HOST_BLAS_AUTO, pool));
        kiln_host_gemm_half_set_ypack(true);
        kiln_host_gemm_half_set_max_x_elems(0);
        if (memcmp(c0, c1, (size_t)(g.batch * m * n) * 4))
          fail_msg("%lldx%lldx%lldx%lld (passes %d, pool %d): packed once differs",
                   (long long)g.batch, (long long)m, (long long)n, (long long)k, passes, pooled);
        kiln_free(a);
        kiln_free(b);
        kiln_free(c0);
        kiln_free(c1);
      }
}

/* When X's f32 copy would pass the scratch bound, one-batch gemms run the packed-panel kernel
 * in passes over k (C's partial sums kept in f32 between them, one rounding at the end): a
 * bound of 12,800 elements here makes these shapes take 2-8 passes (full and short ones,
 * transposed and not, row blocks), every transpose, alpha/beta, every output type, with and
 * without a pool. A batch of two over the bound converts panels for the library instead. */
static void test_half_kernel_runs_large_k_in_passes(void **state) {
  (void)state;
  if (strcmp(kiln_host_gemm_half_kernel(), "panels") == 0) skip();
  static const combo_t combos[] = {{KILN_GEMM_BF16, KILN_GEMM_BF16},
                                   {KILN_GEMM_BF16, KILN_GEMM_F32},
                                   {KILN_GEMM_F16, KILN_GEMM_F16}};
  static const int64_t shapes[][4] = {
      {1, 300, 40, 500}, {1, 100, 150, 300}, {1, 64, 70, 1000},
      {1, 1, 33, 20000}, {1, 96, 520, 400},  {2, 50, 40, 300},
  };
  kiln_host_gemm_half_set_max_x_elems(12800);
  /* the pairs kernel reads X in place where it can (no passes): first the f32 kernel */
  const bool dot = kiln_host_gemm_half_set_bf16_dot(false);
  int64_t passes0 = kiln_host_gemm_half_k_passes();
  int runs = 0;
  int failures = half_cases_check(combos, sizeof(combos) / sizeof(combos[0]), shapes,
                                  sizeof(shapes) / sizeof(shapes[0]), &runs);
  const int64_t passes = kiln_host_gemm_half_k_passes() - passes0;
  kiln_host_gemm_half_set_bf16_dot(true);
  if (dot) { /* bf16 pairs packed in passes (A^T, B), or read in place (one pass) */
    passes0 = kiln_host_gemm_half_k_passes();
    int runs2 = 0;
    failures += half_cases_check(combos, 2, shapes, sizeof(shapes) / sizeof(shapes[0]), &runs2);
    const int64_t dot_passes = kiln_host_gemm_half_k_passes() - passes0;
    printf("[  INFO    ] bf16 pairs kernel: %d gemms, %lld passes over k\n", runs2,
           (long long)dot_passes);
    /* 2 types x 2 (pool or not) x the 2 transposes of 4 that pack X (A^T; B when
     * transposed), each in as many passes as on the f32 kernel; X read in place (the other
     * two, and 1x33x20000's A^T: one row is contiguous along k) runs in one, not counted */
    assert_int_equal(dot_passes, 2 * 2 * 2 * (2 + 3 + 8 + 4));
  }
  kiln_host_gemm_half_set_max_x_elems(0);
  printf("[  INFO    ] %d gemms, %d mismatched, %lld passes over k\n", runs, failures,
         (long long)passes);
  assert_int_equal(failures, 0);
  /* 3 types x 4 transposes x 2 (pool or not) of: 300x40x500 transposed (40 rows: kc 256, 2
   * passes), 100x150x300 (kc 128, 3), 64x70x1000 (kc 128, 8), 1x33x20000 (kc 12800, 2),
   * 96x520x400 (kc 128, 4; tasks of 4 strips without the pool). */
  assert_int_equal(passes, 3 * 4 * 2 * (2 + 3 + 8 + 2 + 4));
}

/* The packed-panel kernel's rounding of its f32 sums (vectorized on AVX-512) gives the bits
 * runtime/half.h (and compiler/hlo/numeric.h) give, for every bf16 bit pattern scaled by
 * alpha = 1/3 and 1 + 2^-8, to bf16 and to f16 (ties, subnormals, overflow to inf, NaN). */
static void test_half_kernel_rounds_as_runtime_half_bit_for_bit(void **state) {
  (void)state;
  enum { N = 65536 };
  uint16_t *b = kiln_malloc(N * 2), *c = kiln_malloc(N * 2), one = 0x3f80; /* bf16 1.0 */
  for (int i = 0; i < N; i++) b[i] = (uint16_t)i;
  /* 1/3: inexact everywhere; 1 + 2^-8: x + x * 2^-8, half of them exact ties for bf16. */
  const double alphas[] = {1.0 / 3, 1.00390625};
  for (int o = 0; o < 4; o++) {
    kiln_gemm_dtype_t out = o & 1 ? KILN_GEMM_F16 : KILN_GEMM_BF16;
    const float alpha = (float)alphas[o / 2];
    kiln_gemm_desc_t g = {KILN_GEMM_BF16,          1, 1, N, 1, false, false, alphas[o / 2], 0, out,
                          KILN_GEMM_EPILOGUE_NONE, 0};
    ASSERT_OK(kiln_host_gemm(&g, &one, b, c, KILN_HOST_BLAS_AUTO, g_pool));
    int bad = 0;
    for (int i = 0; i < N; i++) {
      float v = alpha * (0.0f + kiln_bf16_to_f32((uint16_t)i)); /* a sum from +0: -0 is +0 */
      uint16_t want = o & 1 ? kiln_f32_to_f16(v) : kiln_f32_to_bf16(v);
      if (c[i] != want && bad++ < 5)
        fprintf(stderr, "%s: bf16 0x%04x * %g: got 0x%04x, want 0x%04x\n",
                kiln_gemm_dtype_name(out), i, (double)alpha, c[i], want);
    }
    assert_int_equal(bad, 0);
  }
  kiln_free(b);
  kiln_free(c);
}

/* s8 x s8 -> s32 past k = 1024 sums in f64 (f32 would round); past 2^31 it wraps as XLA's
 * s32 accumulation does. */
static void test_s8_gemm_is_exact_past_f32_range_and_wraps_past_s32(void **state) {
  (void)state;
  kiln_gemm_desc_t g = {
      KILN_GEMM_S8, 2, 3, 4, 5000, false, true, 1, 0, KILN_GEMM_S32, KILN_GEMM_EPILOGUE_NONE, 0};
  assert_true(hg_check(&g, KILN_HOST_BLAS_AUTO, g_pool));
  assert_true(hg_check(&g, KILN_HOST_BLAS_FALLBACK, g_pool));
  const int64_t k = 140000; /* 140000 * 128 * 128 > 2^31 */
  int8_t *a = kiln_malloc((size_t)k), *b = kiln_malloc((size_t)k);
  memset(a, 0x80, (size_t)k); /* -128 */
  memset(b, 0x80, (size_t)k);
  int32_t c = 7;
  kiln_gemm_desc_t w = {
      KILN_GEMM_S8, 1, 1, 1, k, false, false, 1, 0, KILN_GEMM_S32, KILN_GEMM_EPILOGUE_NONE, 0};
  ASSERT_OK(kiln_host_gemm(&w, a, b, &c, KILN_HOST_BLAS_AUTO, NULL));
  assert_int_equal(c, (int32_t)(uint32_t)(k * 16384));
  assert_true(c < 0);
  kiln_free(a);
  kiln_free(b);
}

static void test_desc_check_takes_the_listed_type_pairs_only(void **state) {
  (void)state;
  kiln_gemm_desc_t g = {KILN_GEMM_BF16,          1, 2, 2, 2, false, false, 1, 0, KILN_GEMM_F32,
                        KILN_GEMM_EPILOGUE_NONE, 0};
  size_t a, b, c;
  ASSERT_OK(kiln_gemm_desc_check(&g, &a, &b, &c));
  assert_int_equal(a, 8);
  assert_int_equal(c, 16);
  g.out_dtype = KILN_GEMM_F64;
  assert_code(kiln_gemm_desc_check(&g, NULL, NULL, NULL), KILN_INVALID_ARGUMENT);
  g.dtype = KILN_GEMM_S8;
  g.out_dtype = KILN_GEMM_F32; /* integer operands give integer results only */
  assert_code(kiln_gemm_desc_check(&g, NULL, NULL, NULL), KILN_INVALID_ARGUMENT);
  g.out_dtype = KILN_GEMM_SAME; /* s8 -> s8: wrapping, as XLA's s8 dot */
  ASSERT_OK(kiln_gemm_desc_check(&g, NULL, NULL, NULL));
  g.dtype = KILN_GEMM_U16;
  g.out_dtype = KILN_GEMM_S32;
  ASSERT_OK(kiln_gemm_desc_check(&g, NULL, NULL, NULL));
  g.dtype = KILN_GEMM_S8;
  ASSERT_OK(kiln_gemm_desc_check(&g, NULL, NULL, NULL));
  g.beta = 1; /* integer gemms take alpha 1, beta 0 */
  assert_code(kiln_gemm_desc_check(&g, NULL, NULL, NULL), KILN_INVALID_ARGUMENT);
  g.dtype = KILN_GEMM_F32;
  g.beta = 0;
  assert_code(kiln_gemm_desc_check(&g, NULL, NULL, NULL), KILN_INVALID_ARGUMENT);
}

/* ---- whole modules ----------------------------------------------------------------------- */

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) {
    kiln_status_report(s, "parse");
    fail();
  }
  return m;
}

/* The dot of `text` (its root) runs as a gemm thunk on the host and matches the evaluator. */
static void check_module_dot_is_a_gemm(const char *text) {
  kiln_hlo_module_t *m = parse(text);
  assert_true(kiln_fusion_wrapper_is_gemm(m->entry->root, NULL));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *want = NULL, *got = NULL;
  int n = 0;
  ASSERT_OK(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  ASSERT_OK(kiln_eval_module(m, NULL, n, args, &arena, &want));
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = g_dev;
  o.repeat = 2;
  kiln_device_run_report_t rep;
  ASSERT_OK(kiln_device_run_module(m, args, n, &o, &arena, &got, &rep));
  assert_int_equal(rep.compile.emit.gemms, 1);
  assert_int_equal(rep.compile.emit.kernels, 0);
  kiln_compare_report_t cr;
  memset(&cr, 0, sizeof cr);
  if (!kiln_compare_literals(want, got, NULL, &cr)) {
    fprintf(stderr, "%s\nmismatch: %s\n", text, cr.first);
    fail();
  }
  assert_true(cr.elements > 0);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static void test_dots_of_every_gemm_type_run_as_gemm_thunks_and_match_the_evaluator(void **state) {
  (void)state;
  /* The corpus's dot_bf16 form (bf16 x bf16 -> f32, lhs contracting first). */
  check_module_dot_is_a_gemm(
      "HloModule d\nENTRY e {\n  a = bf16[96,61] parameter(0)\n  b = bf16[5,96] parameter(1)\n"
      "  ROOT d = f32[61,5] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={1}\n}\n");
  /* The corpus's mha_block form: batched bf16 -> bf16. */
  check_module_dot_is_a_gemm(
      "HloModule d\nENTRY e {\n  a = bf16[12,33,64] parameter(0)\n  b = bf16[12,64,33] "
      "parameter(1)\n"
      "  ROOT d = bf16[12,33,33] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n");
  check_module_dot_is_a_gemm(
      "HloModule d\nENTRY e {\n  a = f16[15,19] parameter(0)\n  b = f16[19,17] parameter(1)\n"
      "  ROOT d = f16[15,17] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  check_module_dot_is_a_gemm(
      "HloModule d\nENTRY e {\n  a = s8[3,40,29] parameter(0)\n  b = s8[3,23,29] parameter(1)\n"
      "  ROOT d = s32[3,40,23] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={2}\n}\n");
  check_module_dot_is_a_gemm(
      "HloModule d\nENTRY e {\n  a = c64[7,11] parameter(0)\n  b = c64[11,13] parameter(1)\n"
      "  ROOT d = c64[7,13] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  check_module_dot_is_a_gemm(
      "HloModule d\nENTRY e {\n  a = c128[11,7] parameter(0)\n  b = c128[13,11] parameter(1)\n"
      "  ROOT d = c128[7,13] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={1}\n}\n");
}

/* For the CUDA target (cuBLAS: f32 and f64) the same dots need kernels; f32 stays a gemm. */
static void test_cuda_pipeline_keeps_non_f32_dots_as_kernels(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse(
      "HloModule d\nENTRY e {\n  a = bf16[8,16] parameter(0)\n  b = bf16[16,4] parameter(1)\n"
      "  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  kiln_pass_options_t host = {.verify = -1};
  kiln_pass_options_t cuda = {.verify = -1, .gemm_f32_f64_only = true};
  assert_false(kiln_fusion_wrapper_needs_kernel(m->entry->root, &host));
  assert_true(kiln_fusion_wrapper_needs_kernel(m->entry->root, &cuda));
  kiln_hlo_module_destroy(m);
  m = parse(
      "HloModule d\nENTRY e {\n  a = f32[8,16] parameter(0)\n  b = f32[16,4] parameter(1)\n"
      "  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  assert_false(kiln_fusion_wrapper_needs_kernel(m->entry->root, &cuda));
  kiln_hlo_module_destroy(m);
}

int main(void) {
  /* test_host_gemm_half_avx2 asks for the AVX2 copy: without AVX2 it would test nothing new */
  const char *half = getenv("KILN_HOST_GEMM_HALF");
  if (half && !strcmp(half, "avx2") && strcmp(kiln_host_gemm_half_kernel(), "avx2") != 0) {
    printf("skipped: KILN_HOST_GEMM_HALF=avx2 but this CPU has no AVX2 + FMA + F16C (kernel: %s)\n",
           kiln_host_gemm_half_kernel());
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type_transpose_and_shape_matches_the_naive_loop),
      cmocka_unit_test(test_converted_panels_of_one_large_batch_cover_every_element),
      cmocka_unit_test(test_library_gemms_run_in_tiles_over_the_pool),
      cmocka_unit_test(test_half_kernel_covers_strips_row_blocks_and_k_blocks),
      cmocka_unit_test(test_half_kernel_rounds_as_runtime_half_bit_for_bit),
      cmocka_unit_test(test_bf16_b_transposed_packed_once_matches_per_block),
      cmocka_unit_test(test_half_kernel_runs_large_k_in_passes),
      cmocka_unit_test(test_bf16_dot_kernel_treats_subnormal_inputs_as_zero),
      cmocka_unit_test(test_s8_gemm_is_exact_past_f32_range_and_wraps_past_s32),
      cmocka_unit_test(test_desc_check_takes_the_listed_type_pairs_only),
      cmocka_unit_test(test_dots_of_every_gemm_type_run_as_gemm_thunks_and_match_the_evaluator),
      cmocka_unit_test(test_cuda_pipeline_keeps_non_f32_dots_as_kernels),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
