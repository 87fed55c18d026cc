/* Host gemm (host_device.h): a CBLAS library through dlopen, else a blocked C kernel.
 *
 * Library: the runtime options' host_blas ($KILN_HOST_BLAS at the edges) when set (a path or
 * soname; "none": no library; one that cannot be used is logged and the C kernel runs: an explicit
 * choice is never replaced by another library), else the first of libopenblas.so.0 (Debian's
 * libopenblas0-pthread), libopenblas.so, libblis.so.4, libmkl_rt.so that exports cblas_sgemm and
 * cblas_dgemm. The reference BLAS (libblas.so.3) is not a candidate: its loops are no faster than
 * the C kernel. cblas_cgemm / cblas_zgemm are optional (complex gemms use the C kernel without
 * them); openblas_set/get_num_threads (or MKL_Set_Num_Threads / MKL_Get_Max_Threads) are
 * optional and, when present, set the library to one thread while kiln's gemms run: kiln
 * splits large gemms over its pool itself (mm_run). A library without them is taken to run on
 * the calling thread (BLIS's default).
 *
 * Every element type of kiln_gemm_desc_t runs through one of four compute types (f32, f64,
 * c64, c128): f32/f64/c64/c128 gemms directly on the operands; bf16/f16 operands are
 * converted to f32 panels (f32 products and sums, the result rounded once); integer gemms
 * run on kiln's own kernels (host_gemm_int.c). Converted
 * operands take at most kScratchElems elements each: groups of whole batches when a batch
 * fits, else row/column panels of one batch (3 * kScratchElems in all); conversions run
 * their rows on the pool, and one scratch buffer is kept for the next gemm (fresh pages
 * fault on first touch). A batch of small gemms (m*n*k below OpenBLAS's own threading
 * threshold) runs its gemms in parallel on the pool, one library call each; larger ones are
 * split into tiles of C, one library call each, spread over the pool. The C kernel runs its
 * rows on the pool. */
#include <complex.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/half.h"
#include "runtime/host/host_device.h"
#include "runtime/runtime_options.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                               const float *a, int lda, const float *b, int ldb, float beta,
                               float *c, int ldc);
typedef void (*cblas_dgemm_fn)(int order, int ta, int tb, int m, int n, int k, double alpha,
                               const double *a, int lda, const double *b, int ldb, double beta,
                               double *c, int ldc);
/* cblas_cgemm / cblas_zgemm: alpha and beta by address. */
typedef void (*cblas_xgemm_fn)(int order, int ta, int tb, int m, int n, int k, const void *alpha,
                               const void *a, int lda, const void *b, int ldb, const void *beta,
                               void *c, int ldc);
typedef void (*set_threads_fn)(int n);
typedef int (*get_threads_fn)(void);

static struct {
  pthread_once_t once;
  void *handle;
  const char *library;
  cblas_sgemm_fn sgemm;
  cblas_dgemm_fn dgemm;
  cblas_xgemm_fn cgemm, zgemm; /* optional */
  set_threads_fn set_threads;  /* optional, with get_threads */
  get_threads_fn get_threads;
  /* kiln's gemms running with the library set to one thread, and the count to restore */
  pthread_mutex_t threads_mu;
  int threads_users, threads_saved;
  char tried[2048];
} g_blas = {.once = PTHREAD_ONCE_INIT, .threads_mu = PTHREAD_MUTEX_INITIALIZER};

static void tried_append(const char *what) {
  size_t len = strlen(g_blas.tried);
  snprintf(g_blas.tried + len, sizeof(g_blas.tried) - len, "%s%s", len ? "; " : "", what);
}

/* dlsym returns data pointers; POSIX guarantees they convert to function pointers. */
#define RESOLVE(h, field, sym)              \
  do {                                      \
    void *p_ = dlsym((h), (sym));           \
    memcpy(&g_blas.field, &p_, sizeof(p_)); \
  } while (0)

static bool try_library(const char *name) {
  char line[512];
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *err = dlerror();
    snprintf(line, sizeof(line), "%s: cannot open (%s)", name, err ? err : "?");
    tried_append(line);
    return false;
  }
  void *s = dlsym(h, "cblas_sgemm"), *d = dlsym(h, "cblas_dgemm");
  if (!s || !d) {
    snprintf(line, sizeof(line), "%s: symbol cblas_%cgemm not found", name, s ? 'd' : 's');
    tried_append(line);
    dlclose(h);
    return false;
  }
  g_blas.handle = h;
  g_blas.library = name;
  RESOLVE(h, sgemm, "cblas_sgemm");
  RESOLVE(h, dgemm, "cblas_dgemm");
  RESOLVE(h, cgemm, "cblas_cgemm");
  RESOLVE(h, zgemm, "cblas_zgemm");
  RESOLVE(h, set_threads, "openblas_set_num_threads");
  RESOLVE(h, get_threads, "openblas_get_num_threads");
  if (!g_blas.set_threads || !g_blas.get_threads) {
    RESOLVE(h, set_threads, "MKL_Set_Num_Threads");
    RESOLVE(h, get_threads, "MKL_Get_Max_Threads");
  }
  if (!g_blas.get_threads) g_blas.set_threads = NULL;
  return true;
}

static void load_blas(void) {
  static const char *const candidates[] = {"libopenblas.so.0", "libopenblas.so", "libblis.so.4",
                                           "libmkl_rt.so"};
  const char *env = kiln_runtime_options().host_blas;
  if (env && !strcmp(env, "none")) {
    tried_append("KILN_HOST_BLAS=none");
    KILN_LOG_I("host gemm: KILN_HOST_BLAS=none; using the built-in C kernel");
    return;
  }
  if (env && *env) {
    if (!try_library(env))
      KILN_LOG_W(
          "host gemm: KILN_HOST_BLAS=%s cannot be used (%s); using the built-in C "
          "kernel (much slower: name a CBLAS library such as libopenblas.so.0)",
          env, g_blas.tried);
  } else {
    bool ok = false;
    for (size_t i = 0; !ok && i < sizeof(candidates) / sizeof(candidates[0]); i++)
      ok = try_library(candidates[i]);
    if (!ok)
      KILN_LOG_W(
          "host gemm: no CBLAS library found (%s); using the built-in C kernel (much "
          "slower: install libopenblas0-pthread)",
          g_blas.tried);
  }
  if (g_blas.library)
    KILN_LOG_I("host gemm: using %s%s", g_blas.library,
               g_blas.cgemm && g_blas.zgemm ? ""
                                            : " (no cblas_cgemm/zgemm: complex gemms use "
                                              "the C kernel)");
}

const char *kiln_host_blas_library(const char **tried) {
  kiln_once(&g_blas.once, load_blas);
  if (tried) *tried = g_blas.tried;
  return g_blas.library;
}

void *kiln_host_blas_symbol(const char *name) {
  kiln_once(&g_blas.once, load_blas);
  return g_blas.handle ? dlsym(g_blas.handle, name) : NULL;
}

/* ---- one strided-batched gemm in a compute type ------------------------------------------ */

typedef enum compute_type { CT_F32, CT_F64, CT_C64, CT_C128 } compute_type_t;
struct epi;

static const size_t kComputeSize[] = {4, 8, 8, 16};

/* C[b] = alpha op(A[b]) op(B[b]) + beta C[b] with leading dimensions and batch strides in
 * elements of the compute type. */
typedef struct mm {
  compute_type_t ct;
  bool ta, tb, use_blas;
  int64_t m, n, k, lda, ldb, ldc, sa, sb, sc, batch;
  double alpha, beta;
  const void *a, *b;
  void *c;
  /* The epilogue applied to C right after each block is computed (NULL: none; the converting
   * path applies it while rounding instead), and the column of the whole C that column 0 of
   * this C is (the bias index of a column panel). */
  const struct epi *epi;
  int64_t j0;
} mm_t;

/* Bias and activation (kiln_gemm_desc_t's epilogue). */
typedef struct epi {
  kiln_gemm_epilogue_t act;
  const void *bias;            /* NULL: none */
  kiln_gemm_dtype_t bias_type; /* C's type */
} epi_t;

/* Applies `e` to rows x cols of compute-type (f32 or f64) `c` (leading dimension ldc) whose
 * column 0 is column j0 of the result. */
static void epilogue_apply(const epi_t *e, compute_type_t ct, void *c, int64_t ldc, int64_t rows,
                           int64_t cols, int64_t j0);

/* The built-in kernel, rows [i0, i1) of one batch: blocked over k and j so the rows of B and C
 * being combined stay in cache. */
#define DEFINE_FALLBACK(NAME, T)                                                          \
  static void NAME(const mm_t *p, const T *A, const T *B, T *C, int64_t i0, int64_t i1) { \
    const int64_t n = p->n, k = p->k;                                                     \
    const T alpha = (T)p->alpha, beta = (T)p->beta;                                       \
    enum { KB = 128, JB = 512 };                                                          \
    for (int64_t i = i0; i < i1; i++)                                                     \
      for (int64_t j = 0; j < n; j++)                                                     \
        C[i * p->ldc + j] = p->beta == 0 ? (T)0 : C[i * p->ldc + j] * beta;               \
    for (int64_t p0 = 0; p0 < k; p0 += KB) {                                              \
      int64_t p1 = p0 + KB < k ? p0 + KB : k;                                             \
      for (int64_t j0 = 0; j0 < n; j0 += JB) {                                            \
        int64_t j1 = j0 + JB < n ? j0 + JB : n;                                           \
        for (int64_t i = i0; i < i1; i++) {                                               \
          T *c = C + i * p->ldc;                                                          \
          for (int64_t q = p0; q < p1; q++) {                                             \
            T a = alpha * (p->ta ? A[q * p->lda + i] : A[i * p->lda + q]);                \
            if (!p->tb) {                                                                 \
              const T *b = B + q * p->ldb;                                                \
              for (int64_t j = j0; j < j1; j++) c[j] += a * b[j];                         \
            } else {                                                                      \
              for (int64_t j = j0; j < j1; j++) c[j] += a * B[j * p->ldb + q];            \
            }                                                                             \
          }                                                                               \
        }                                                                                 \
      }                                                                                   \
    }                                                                                     \
  }

DEFINE_FALLBACK(fallback_f32, float)
DEFINE_FALLBACK(fallback_f64, double)
DEFINE_FALLBACK(fallback_c64, float _Complex)
DEFINE_FALLBACK(fallback_c128, double _Complex)

/* Whether the library runs this compute type. */
static bool blas_has(compute_type_t ct) {
  switch (ct) {
    case CT_F32:
      return g_blas.sgemm != NULL;
    case CT_F64:
      return g_blas.dgemm != NULL;
    case CT_C64:
      return g_blas.cgemm != NULL;
    case CT_C128:
      return g_blas.zgemm != NULL;
  }
  return false;
}

/* Rows [i0, i1) and columns [j0, j1) of batch bi through the library (row i of op(A): row i
 * of A, or column i of the stored A^T; column j of op(B): column j of B, or row j of the
 * stored B^T). */
static void blas_tile(const mm_t *p, int64_t bi, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const size_t es = kComputeSize[p->ct];
  const char *A = (const char *)p->a + (size_t)(bi * p->sa + (p->ta ? i0 : i0 * p->lda)) * es;
  const char *B = (const char *)p->b + (size_t)(bi * p->sb + (p->tb ? j0 * p->ldb : j0)) * es;
  char *C = (char *)p->c + (size_t)(bi * p->sc + i0 * p->ldc + j0) * es;
  const int ta = p->ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = p->tb ? CBLAS_TRANS : CBLAS_NO_TRANS;
  const int m = (int)(i1 - i0), n = (int)(j1 - j0), k = (int)p->k;
  const int lda = (int)p->lda, ldb = (int)p->ldb, ldc = (int)p->ldc;
  switch (p->ct) {
    case CT_F32:
      g_blas.sgemm(CBLAS_ROW_MAJOR, ta, tb, m, n, k, (float)p->alpha, (const float *)A, lda,
                   (const float *)B, ldb, (float)p->beta, (float *)C, ldc);
      return;
    case CT_F64:
      g_blas.dgemm(CBLAS_ROW_MAJOR, ta, tb, m, n, k, p->alpha, (const double *)A, lda,
                   (const double *)B, ldb, p->beta, (double *)C, ldc);
      return;
    case CT_C64: {
      float al[2] = {(float)p->alpha, 0}, be[2] = {(float)p->beta, 0};
      g_blas.cgemm(CBLAS_ROW_MAJOR, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
      return;
    }
    case CT_C128: {
      double al[2] = {p->alpha, 0}, be[2] = {p->beta, 0};
      g_blas.zgemm(CBLAS_ROW_MAJOR, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
      return;
    }
  }
}

static void blas_rows(const mm_t *p, int64_t bi, int64_t i0, int64_t i1) {
  blas_tile(p, bi, i0, i1, 0, p->n);
}

/* Output elements per library call when an epilogue follows and the gemm is one call (16 MiB
 * of f32: most dense layers in one call). Smaller panels (1 MiB, so the epilogue reads them
 * back from cache) measured slower on 2 cores (bench_dots --only x: fused / unfused geomean
 * 0.93x with 1 MiB panels vs 0.98-1.04x with 16 MiB): each call packs all of B again, which
 * costs more than reading the result back once. At least kEpiloguePanelRows rows per call. */
static const int64_t kEpiloguePanel = (int64_t)1 << 22;
static const int64_t kEpiloguePanelRows = 256;

/* The epilogue on rows [i0, i1) and columns [j0, j1) of batch bi (computed in the compute type
 * already). */
static void tile_epilogue(const mm_t *p, int64_t bi, int64_t i0, int64_t i1, int64_t j0,
                          int64_t j1) {
  if (!p->epi) return;
  const size_t es = kComputeSize[p->ct];
  epilogue_apply(p->epi, p->ct, (char *)p->c + (size_t)(bi * p->sc + i0 * p->ldc + j0) * es, p->ldc,
                 i1 - i0, j1 - j0, p->j0 + j0);
}

static void rows_epilogue(const mm_t *p, int64_t bi, int64_t i0, int64_t i1) {
  tile_epilogue(p, bi, i0, i1, 0, p->n);
}

/* args: the mm_t and {bi, i0}; blocks are rows from i0. */
static void pool_epilogue_rows(void **args, int64_t b, int64_t e) {
  const int64_t *at = args[1];
  rows_epilogue(args[0], at[0], at[1] + b, at[1] + e);
}

/* rows_epilogue spread over the pool when the block is large enough to be worth it. */
static kiln_status rows_epilogue_pooled(const mm_t *p, int64_t bi, int64_t i0, int64_t i1,
                                        kiln_host_pool_t *pool) {
  if (!p->epi) return NULL;
  if (pool && kiln_host_pool_num_workers(pool) > 1 && (i1 - i0) * p->n >= 16384) {
    int64_t at[2] = {bi, i0};
    void *args[2] = {(void *)p, at};
    int64_t chunk = p->n >= 4096 ? 1 : 4096 / p->n;
    return kiln_host_pool_launch(pool, pool_epilogue_rows, args, i1 - i0, chunk);
  }
  rows_epilogue(p, bi, i0, i1);
  return NULL;
}

/* One small batch through the library and its epilogue (on the calling thread: a pool task). */
static void blas_one(const mm_t *p, int64_t bi) {
  blas_rows(p, bi, 0, p->m);
  rows_epilogue(p, bi, 0, p->m);
}

/* One batch through the library: in one call, or with an epilogue in row panels each
 * followed by the epilogue (on the pool) while the panel is cache-hot. */
static kiln_status blas_batch(const mm_t *p, int64_t bi, kiln_host_pool_t *pool) {
  if (!p->epi) {
    blas_rows(p, bi, 0, p->m);
    return NULL;
  }
  int64_t rows = kEpiloguePanel / (p->n > 0 ? p->n : 1);
  if (rows < kEpiloguePanelRows) rows = kEpiloguePanelRows;
  for (int64_t i0 = 0; i0 < p->m; i0 += rows) {
    int64_t i1 = i0 + rows < p->m ? i0 + rows : p->m;
    blas_rows(p, bi, i0, i1);
    KILN_RETURN_IF_ERROR_PLAIN(rows_epilogue_pooled(p, bi, i0, i1, pool));
  }
  return NULL;
}

static void fallback_rows(const mm_t *p, int64_t bi, int64_t i0, int64_t i1) {
  const size_t es = kComputeSize[p->ct];
  const void *A = (const char *)p->a + (size_t)(bi * p->sa) * es;
  const void *B = (const char *)p->b + (size_t)(bi * p->sb) * es;
  void *C = (char *)p->c + (size_t)(bi * p->sc) * es;
  switch (p->ct) {
    case CT_F32:
      fallback_f32(p, A, B, C, i0, i1);
      return;
    case CT_F64:
      fallback_f64(p, A, B, C, i0, i1);
      return;
    case CT_C64:
      fallback_c64(p, A, B, C, i0, i1);
      return;
    case CT_C128:
      fallback_c128(p, A, B, C, i0, i1);
      return;
  }
}

/* Rows of the C kernel per pool block. */
enum { kFallbackRows = 16 };
/* Below this m*n*k OpenBLAS runs a gemm on the calling thread (its SMP threshold), so several
 * can run at once on the pool; at or above it, a gemm is split into tiles of at least this
 * many multiply-adds. */
static const int64_t kSmallGemm = 65536 * 4;
/* At most this m*n*k a gemm runs on the C kernel even with a library: the C kernel sums each
 * result over k in order, as the reference evaluator does (and XLA's CPU backend, whose tiny
 * dots are loops rather than Eigen calls), while the library's blocked, FMA-contracted order
 * leaves a cancelling sum (the StableHLO corpus's 4x3 * 3x6 c128 dot) beyond the 3 ulp of
 * the interpreter's result its check allows. Kept small because the C kernel is slow: at 72
 * multiply-adds it takes 130 ns (f32) / 290 ns (c128), at 1,024 already 4.7x (f32) / 19x
 * (c128) the library's time. Large dots cannot keep the reference's order anyway. */
static const int64_t kTinyGemm = 128;

static void pool_blas_batches(void **args, int64_t b, int64_t e) {
  const mm_t *p = args[0];
  for (int64_t i = b; i < e; i++) blas_one(p, i);
}

/* Library gemms of kSmallGemm multiply-adds or more run as tiles of C spread over the host
 * pool, each tile one library call on the pool thread that takes it, the library set to one
 * thread meanwhile (library_threads_take), as XLA:CPU runs its contractions on its own thread
 * pool. Left to the library's threads, each call handed work to threads that wait for the
 * scheduler when the cores are shared, then spin for up to ~0.1 s (OpenBLAS's default
 * timeout) on the cores the next kernels run on. The f32 training step (examples/transformer,
 * 2 cores, runs 2-4 of 5, three alternations): with one busy loop beside it, median 950 ->
 * 795 ms; with two, 2,888 -> 910 ms; quiet, 498 -> 514 ms (min 441 -> 443: noise there; the
 * vocabulary gemms lost some of that to the tiles and the kernels after gemms gained it).
 * Batches of 64 x 128 x 32 . 32 x 128 beside two busy loops: 340 ms in calls per batch, 2.6 in
 * row panels (session 42). How C is cut: plan_tiles. */
enum { kTilesPerWorker = 2, kTileAlign = 16 };
static _Atomic bool g_pool_tiles = true;

void kiln_host_gemm_set_pool_tiles(bool on) {
  atomic_store(&g_pool_tiles, on);
}

/* Tiles of `rows` x `cols` of each batch's C (the last ones in a row or column smaller). */
typedef struct tiling {
  int64_t rows, cols;
} tiling_t;

static int64_t tiles_per_batch(const mm_t *p, tiling_t t) {
  return ((p->m + t.rows - 1) / t.rows) * ((p->n + t.cols - 1) / t.cols);
}

/* Batches of several gemms: row panels of at most kSmallGemm multiply-adds (OpenBLAS's
 * unpacked small-matrix kernels take those) when a panel keeps at least kPanelMinRows rows:
 * 32 batches of 128 x 128 . 128 x 64 ran at 163-208 GFLOP/s in panels of 32 rows, 65-132 in
 * a tile per batch. Else (and for one gemm) tiles along the longer of m and n, at most
 * kTilesPerWorker per worker, each of at least kSmallGemm multiply-adds. */
enum { kPanelMinRows = 16 };

static tiling_t plan_tiles(const mm_t *p, int workers) {
  tiling_t t = {p->m > 0 ? p->m : 1, p->n > 0 ? p->n : 1};
  const int64_t nk = p->n * p->k;
  if (p->batch > 1 && nk > 0 && kSmallGemm / nk >= kPanelMinRows) {
    const int64_t most = kSmallGemm / nk, panels = (p->m + most - 1) / most;
    t.rows = (p->m + panels - 1) / panels;
    return t;
  }
  int64_t want = p->batch * (p->m * p->n * p->k / kSmallGemm);
  if (want > (int64_t)kTilesPerWorker * workers) want = (int64_t)kTilesPerWorker * workers;
  const int64_t per = (want + p->batch - 1) / p->batch;
  if (per <= 1) return t;
  /* A tile packs the other operand again: the shorter side repeats. */
  int64_t *len = p->n >= p->m ? &t.cols : &t.rows;
  int64_t size = (*len + per - 1) / per;
  size = (size + kTileAlign - 1) / kTileAlign * kTileAlign;
  if (size < *len) *len = size;
  return t;
}

typedef void (*tile_fn)(const mm_t *p, int64_t bi, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

/* Pool blocks [b, e) of tiles `t` (block = one tile of one batch, row-major within the
 * batch): `gemm` on each tile, then the epilogue while it is in cache. */
static void run_tiles(const mm_t *p, tiling_t t, int64_t b, int64_t e, tile_fn gemm) {
  const int64_t across = (p->n + t.cols - 1) / t.cols, per = tiles_per_batch(p, t);
  for (int64_t blk = b; blk < e; blk++) {
    const int64_t bi = blk / per, r = blk % per;
    const int64_t i0 = r / across * t.rows, j0 = r % across * t.cols;
    const int64_t i1 = i0 + t.rows < p->m ? i0 + t.rows : p->m;
    const int64_t j1 = j0 + t.cols < p->n ? j0 + t.cols : p->n;
    gemm(p, bi, i0, i1, j0, j1);
    tile_epilogue(p, bi, i0, i1, j0, j1);
  }
}

static _Atomic int64_t g_tiles_run; /* library tiles run on the pool (for tests) */

int64_t kiln_host_gemm_tiles_run(void) {
  return atomic_load(&g_tiles_run);
}

/* args: the mm_t and its tiling_t. */
static void pool_blas_tiles(void **args, int64_t b, int64_t e) {
  run_tiles(args[0], *(const tiling_t *)args[1], b, e, blas_tile);
  atomic_fetch_add(&g_tiles_run, e - b);
}

/* The C kernel's tiles are whole rows (j0 = 0, j1 = n). */
static void fallback_tile(const mm_t *p, int64_t bi, int64_t i0, int64_t i1, int64_t j0,
                          int64_t j1) {
  (void)j0, (void)j1;
  fallback_rows(p, bi, i0, i1);
}

static void pool_fallback_rows(void **args, int64_t b, int64_t e) {
  const mm_t *p = args[0];
  run_tiles(p, (tiling_t){kFallbackRows, p->n > 0 ? p->n : 1}, b, e, fallback_tile);
}

/* Many batches of at most this m*n*k run on the C kernel, each a pool block, not one library
 * call each: the calls' own cost dominates there (dlrm's 6,272 batches of 6 x 8 . 8 x 6). */
static const int64_t kTinyBatched = 1024;
static const int64_t kTinyBatchedMin = 64;

/* While kiln's gemms run their tiles, the library runs on one thread per call; the count it
 * had (the user's, or its default) comes back when the last of them ends. The setting is the
 * library's, for the whole process: a caller of the same library on another thread meanwhile
 * (numpy through libblas.so.3 is OpenBLAS too) runs on one thread as well. */
static void library_threads_take(void) {
  if (!g_blas.set_threads) return;
  kiln_mutex_lock(&g_blas.threads_mu);
  if (g_blas.threads_users++ == 0) {
    g_blas.threads_saved = g_blas.get_threads();
    if (g_blas.threads_saved != 1) g_blas.set_threads(1);
  }
  kiln_mutex_unlock(&g_blas.threads_mu);
}

static void library_threads_give(void) {
  if (!g_blas.set_threads) return;
  kiln_mutex_lock(&g_blas.threads_mu);
  if (--g_blas.threads_users == 0 && g_blas.threads_saved > 1)
    g_blas.set_threads(g_blas.threads_saved);
  kiln_mutex_unlock(&g_blas.threads_mu);
}

/* The library's gemms of p: small batches each a pool block; with `tiles`, tiles over the
 * pool (the library on one thread); else a call per batch on the library's threads. */
static kiln_status blas_run(const mm_t *p, kiln_host_pool_t *pool, int workers, bool tiles) {
  void *args[1] = {(void *)p};
  if (workers > 1 && p->batch > 1 && p->m * p->n * p->k < kSmallGemm)
    return kiln_host_pool_launch(pool, pool_blas_batches, args, p->batch, 0);
  if (tiles && workers > 1) {
    tiling_t t = plan_tiles(p, workers);
    const int64_t blocks = p->batch * tiles_per_batch(p, t);
    void *targs[2] = {(void *)p, &t};
    if (blocks > 1) return kiln_host_pool_launch(pool, pool_blas_tiles, targs, blocks, 0);
  }
  for (int64_t bi = 0; bi < p->batch; bi++) KILN_RETURN_IF_ERROR_PLAIN(blas_batch(p, bi, pool));
  return NULL;
}

static kiln_status mm_run(const mm_t *p, kiln_host_pool_t *pool) {
  void *args[1] = {(void *)p};
  const int workers = pool ? kiln_host_pool_num_workers(pool) : 1;
  const bool parallel = workers > 1;
  const int64_t macs = p->m * p->n * p->k;
  const bool tiny_batches = p->batch >= kTinyBatchedMin && macs <= kTinyBatched;
  if (p->use_blas && blas_has(p->ct) && macs > kTinyGemm && !tiny_batches) {
    if (!atomic_load(&g_pool_tiles)) return blas_run(p, pool, workers, false);
    library_threads_take();
    kiln_status st = blas_run(p, pool, workers, true);
    library_threads_give();
    return st;
  }
  int64_t blocks = p->batch * ((p->m + kFallbackRows - 1) / kFallbackRows);
  if (parallel) return kiln_host_pool_launch(pool, pool_fallback_rows, args, blocks, 0);
  pool_fallback_rows(args, 0, blocks);
  return NULL;
}

/* ---- element conversions ----------------------------------------------------------------- */

/* One conversion of a rows x cols block: operands in (`src` of type `t` at element `off` ->
 * compute-type `dst`) or results out (compute-type `src` -> `dst` of type `t` at element
 * `off`), each with its leading dimension. */
typedef struct conv {
  bool out;
  kiln_gemm_dtype_t t;
  compute_type_t ct;
  const void *src;
  void *dst;
  int64_t off, src_ld, dst_ld, rows, cols;
  /* Results out: the epilogue applied to each row before it is rounded (NULL: none), and
   * the result column of column 0. */
  const epi_t *epi;
  int64_t j0;
} conv_t;

/* Rows [r0, r1) of an operand conversion into f32. */
static void convert_in_rows(const conv_t *c, int64_t r0, int64_t r1) {
  const kiln_gemm_dtype_t t = c->t;
  const void *src = c->src;
  void *dst = c->dst;
  const int64_t cols = c->cols;
  for (int64_t r = r0; r < r1; r++) {
    int64_t s0 = c->off + r * c->src_ld;
    float *d = (float *)dst + r * c->dst_ld;
    switch (t) {
      case KILN_GEMM_BF16: {
        const uint16_t *s = (const uint16_t *)src + s0;
        for (int64_t j = 0; j < cols; j++) d[j] = kiln_bf16_to_f32(s[j]);
        break;
      }
      case KILN_GEMM_F16: {
        const uint16_t *s = (const uint16_t *)src + s0;
        for (int64_t j = 0; j < cols; j++) d[j] = kiln_f16_to_f32(s[j]);
        break;
      }
      default: { /* f32: a copy */
        const float *s = (const float *)src + s0;
        memcpy(d, s, (size_t)cols * sizeof(float));
        break;
      }
    }
  }
}

/* Rows [r0, r1) of a result conversion from the compute type. */
static void convert_out_rows(const conv_t *c, int64_t r0, int64_t r1) {
  const kiln_gemm_dtype_t t = c->t;
  const void *src = c->src;
  void *dst = c->dst;
  const int64_t cols = c->cols;
  for (int64_t r = r0; r < r1; r++) {
    int64_t d0 = c->off + r * c->dst_ld;
    /* The epilogue on 8 rows at a time (the bias converted once for them, the rows still in
     * L1/L2 when they are rounded). */
    if (c->epi && (r - r0) % 8 == 0)
      epilogue_apply(c->epi, CT_F32, (float *)src + r * c->src_ld, c->src_ld,
                     r1 - r < 8 ? r1 - r : 8, cols, c->j0);
    const float *s = (const float *)src + r * c->src_ld;
    switch (t) {
      case KILN_GEMM_BF16: {
        uint16_t *d = (uint16_t *)dst + d0;
        for (int64_t j = 0; j < cols; j++) d[j] = kiln_f32_to_bf16(s[j]);
        break;
      }
      case KILN_GEMM_F16: {
        uint16_t *d = (uint16_t *)dst + d0;
        for (int64_t j = 0; j < cols; j++) d[j] = kiln_f32_to_f16(s[j]);
        break;
      }
      default: {
        float *d = (float *)dst + d0;
        memcpy(d, s, (size_t)cols * sizeof(float));
        break;
      }
    }
  }
}

static void pool_convert(void **args, int64_t b, int64_t e) {
  const conv_t *c = args[0];
  if (c->out)
    convert_out_rows(c, b, e);
  else
    convert_in_rows(c, b, e);
}

/* Runs a conversion, its rows spread over the pool when it is large (conversions are
 * memory-bound; one thread does not saturate memory). */
static kiln_status convert(const conv_t *c, kiln_host_pool_t *pool) {
  void *args[1] = {(void *)c};
  if (pool && kiln_host_pool_num_workers(pool) > 1 && c->rows > 1 && c->rows * c->cols >= 65536) {
    int64_t chunk = c->cols >= 16384 ? 1 : 16384 / c->cols;
    return kiln_host_pool_launch(pool, pool_convert, args, c->rows, chunk);
  }
  pool_convert(args, 0, c->rows);
  return NULL;
}

/* Operand block (rows x cols of `src`, type `t`, from element `off`, leading dimension
 * src_ld) into the compute-type `dst` (leading dimension dst_ld). */
static kiln_status convert_in(kiln_gemm_dtype_t t, const void *src, int64_t off, int64_t src_ld,
                              int64_t rows, int64_t cols, compute_type_t ct, void *dst,
                              int64_t dst_ld, kiln_host_pool_t *pool) {
  conv_t c = {false, t, ct, src, dst, off, src_ld, dst_ld, rows, cols, NULL, 0};
  return convert(&c, pool);
}

/* Result block (rows x cols of compute-type `src`, leading dimension src_ld) into `dst` of
 * type `t` from element `off` (leading dimension dst_ld). */
static kiln_status convert_out(compute_type_t ct, const void *src, int64_t src_ld, int64_t rows,
                               int64_t cols, kiln_gemm_dtype_t t, void *dst, int64_t off,
                               int64_t dst_ld, const epi_t *epi, int64_t j0,
                               kiln_host_pool_t *pool) {
  conv_t c = {true, t, ct, src, dst, off, src_ld, dst_ld, rows, cols, epi, j0};
  return convert(&c, pool);
}

/* ---- the epilogue ------------------------------------------------------------------------ */

/* GCC's -O2 vectorizes only loops that need no cost check, and a float-to-int conversion
 * (which may trap) keeps a loop from being if-converted: the epilogue's loops (the GELU's
 * polynomial and division above all) are worth both. The helpers it inlines take the same
 * options (GCC inlines only between functions with equal ones). */
#if defined(__GNUC__) && !defined(__clang__)
#define EPILOGUE_VECTORIZE \
  __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")))
#else
#define EPILOGUE_VECTORIZE
#endif

/* The f32 kernel twice: for baseline x86-64 (SSE2, what the runtime is built for) and, where
 * the CPU has them, AVX2 + FMA (what the JIT'd loop kernels use on the same machine: 8 lanes
 * and fused multiply-adds in the GELU's polynomial). Chosen once per process. */
#define EPI_NAME(x) x##_base
#define EPI_ATTR EPILOGUE_VECTORIZE
#include "runtime/host/host_epilogue_f32.inc"
#undef EPI_NAME
#undef EPI_ATTR
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define KILN_EPILOGUE_AVX2 1
#define EPI_NAME(x) x##_avx2
#if defined(__clang__)
#define EPI_ATTR __attribute__((target("avx2,fma")))
#else
#define EPI_ATTR                     \
  __attribute__((target("avx2,fma"), \
                 optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")))
#endif
#include "runtime/host/host_epilogue_f32.inc"
#undef EPI_NAME
#undef EPI_ATTR
#endif

typedef void (*epilogue_rows_f32_fn)(kiln_gemm_epilogue_t act, const float *restrict bias, float *c,
                                     int64_t ldc, int64_t rows, int64_t nj);
static epilogue_rows_f32_fn g_epilogue_rows_f32;
static pthread_once_t g_epilogue_once = PTHREAD_ONCE_INIT;

static void pick_epilogue(void) {
  g_epilogue_rows_f32 = epilogue_rows_f32_base;
#ifdef KILN_EPILOGUE_AVX2
  /* "base": the SSE2 copy (tests) */
  const char *isa = kiln_runtime_options().host_epilogue_isa;
  __builtin_cpu_init();
  if (!(isa && strcmp(isa, "base") == 0) && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    g_epilogue_rows_f32 = epilogue_rows_f32_avx2;
#endif
}

const char *kiln_host_epilogue_isa(void) {
  kiln_once(&g_epilogue_once, pick_epilogue);
#ifdef KILN_EPILOGUE_AVX2
  if (g_epilogue_rows_f32 == epilogue_rows_f32_avx2) return "avx2+fma";
#endif
  return "base";
}

static inline double gelu_tanh_f64(double x) {
  return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static inline double bias_at(const epi_t *e, int64_t j) {
  switch (e->bias_type) {
    case KILN_GEMM_F64:
      return ((const double *)e->bias)[j];
    case KILN_GEMM_BF16:
      return kiln_bf16_to_f32(((const uint16_t *)e->bias)[j]);
    case KILN_GEMM_F16:
      return kiln_f16_to_f32(((const uint16_t *)e->bias)[j]);
    default:
      return ((const float *)e->bias)[j];
  }
}

EPILOGUE_VECTORIZE static void epilogue_apply(const epi_t *e, compute_type_t ct, void *c,
                                              int64_t ldc, int64_t rows, int64_t cols, int64_t j0) {
  float bias_f[256];
  if (ct == CT_F64) {
    for (int64_t i = 0; i < rows; i++) {
      double *r = (double *)c + i * ldc;
      for (int64_t j = 0; j < cols; j++) {
        double v = r[j] + (e->bias ? bias_at(e, j0 + j) : 0.0);
        if (e->act == KILN_GEMM_EPILOGUE_RELU) v = v > 0 ? v : (v == v ? 0.0 : v);
        if (e->act == KILN_GEMM_EPILOGUE_GELU_TANH) v = gelu_tanh_f64(v);
        r[j] = v;
      }
    }
    return;
  }
  /* f32: the bias converted once per block of 256 columns. */
  kiln_once(&g_epilogue_once, pick_epilogue);
  for (int64_t jb = 0; jb < cols; jb += 256) {
    const int64_t nj = cols - jb < 256 ? cols - jb : 256;
    for (int64_t j = 0; j < nj; j++) bias_f[j] = e->bias ? (float)bias_at(e, j0 + jb + j) : 0.0f;
    g_epilogue_rows_f32(e->act, bias_f, (float *)c + jb, ldc, rows, nj);
  }
}

/* ---- the entry point --------------------------------------------------------------------- */

/* Elements of the compute type per converted operand buffer (A, B and C panels each). */
static const int64_t kScratchElems = (int64_t)1 << 22;

/* The compute type of a descriptor, and whether its operands / result need converting. */
static compute_type_t compute_type_of(const kiln_gemm_desc_t *g, bool *convert_ab,
                                      bool *convert_c) {
  kiln_gemm_dtype_t out = kiln_gemm_desc_out_dtype(g);
  compute_type_t ct = CT_F32;
  switch (g->dtype) {
    case KILN_GEMM_F64:
      ct = CT_F64;
      break;
    case KILN_GEMM_C64:
      ct = CT_C64;
      break;
    case KILN_GEMM_C128:
      ct = CT_C128;
      break;
    default:
      ct = CT_F32;
      break;
  }
  *convert_ab = g->dtype == KILN_GEMM_BF16 || g->dtype == KILN_GEMM_F16;
  *convert_c = out == KILN_GEMM_BF16 || out == KILN_GEMM_F16;
  return ct;
}

/* One spare scratch buffer kept between gemms: fresh pages cost a fault each on first touch,
 * which on a busy machine made a large converted gemm several times slower. A gemm takes the
 * spare when it is large enough (else allocates) and gives its buffer back, the larger of
 * the two staying; at most 3 * kScratchElems * 8 bytes are kept. */
static struct {
  pthread_mutex_t mu;
  void *p;
  size_t size;
} g_spare = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A buffer of at least `*size` bytes (NULL when none can be allocated); *size becomes its
 * size. */
static void *scratch_take(size_t *size) {
  void *p = NULL;
  kiln_mutex_lock(&g_spare.mu);
  if (g_spare.p && g_spare.size >= *size) {
    p = g_spare.p;
    *size = g_spare.size;
    g_spare.p = NULL;
    g_spare.size = 0;
  }
  kiln_mutex_unlock(&g_spare.mu);
  return p ? p : malloc(*size);
}

static void scratch_give(void *p, size_t size) {
  kiln_mutex_lock(&g_spare.mu);
  if (!g_spare.p || g_spare.size < size) {
    void *old = g_spare.p;
    g_spare.p = p;
    g_spare.size = size;
    p = old;
  }
  kiln_mutex_unlock(&g_spare.mu);
  free(p);
}

static _Atomic bool g_k_panels = true;

void kiln_host_gemm_set_k_panels(bool on) {
  atomic_store(&g_k_panels, on);
}

/* The converting path: converted copies of whole batches (as many as fit), or of row and
 * column panels of one batch when one does not fit — or, when C (in f32) fits but op(A) does
 * not, of k panels: all rows of op(A) and all columns of op(B) for kc values of k at a time,
 * summed into C by the library (beta 1 after the first), the epilogue and the rounding once
 * at the end. A bf16 1024 x 256 x 32000 gemm took 8 row panels of 131 rows before, each
 * library call packing all of B again. */
static kiln_status gemm_converted(const kiln_gemm_desc_t *g, const mm_t *base, bool convert_c,
                                  kiln_host_pool_t *pool) {
  const int64_t m = g->m, n = g->n, k = g->k;
  const kiln_gemm_dtype_t in = g->dtype, out = kiln_gemm_desc_out_dtype(g);
  const size_t es = kComputeSize[base->ct];
  const bool load_c = g->beta != 0;
  int64_t per_batch = m * k > k * n ? m * k : k * n;
  if (convert_c && m * n > per_batch) per_batch = m * n;
  int64_t group = per_batch <= kScratchElems ? kScratchElems / per_batch : 0;
  if (group > g->batch) group = g->batch;
  /* Panels: mc rows of op(A) and nc columns of op(B) per step, the A, B (and C) panels
   * within 3 * kScratchElems together; what A leaves goes to B's columns. */
  int64_t mc = m, nc = n, kc = 0;
  if (!group) {
    mc = kScratchElems / k > 0 ? kScratchElems / k : 1;
    if (mc > m) mc = m;
    nc = (3 * kScratchElems - mc * k) / (k + (convert_c ? mc : 0));
    if (nc < 1) nc = 1;
    if (nc > n) nc = n;
    /* (An f32 result with an epilogue keeps the row panels, which apply it per panel.) */
    if (mc < m && m * n <= kScratchElems && (convert_c || !base->epi) && atomic_load(&g_k_panels)) {
      kc = (3 * kScratchElems - (convert_c ? m * n : 0)) / (m + n);
      if (kc > k) kc = k;
      if (kc < 64) kc = 0; /* too thin to pay for the passes over C */
    }
  }
  int64_t a_elems = group ? group * m * k : kc ? m * kc : mc * k;
  int64_t b_elems = group ? group * k * n : kc ? kc * n : k * nc;
  int64_t c_elems = !convert_c ? 0 : group ? group * m * n : kc ? m * n : mc * nc;
  size_t scratch_bytes = (size_t)(a_elems + b_elems + c_elems) * es;
  char *scratch = scratch_take(&scratch_bytes);
  if (!scratch)
    return kiln_status_make(
        KILN_RESOURCE_EXHAUSTED, "host gemm: cannot allocate %lld bytes for converted %s panels",
        (long long)((a_elems + b_elems + c_elems) * (int64_t)es), kiln_gemm_dtype_name(in));
  void *sa = scratch, *sb = scratch + (size_t)a_elems * es,
       *sc = scratch + (size_t)(a_elems + b_elems) * es;
  kiln_status st = NULL;
  mm_t p = *base;
  /* A rounded result takes the epilogue while it is rounded; an f32 one right after the
   * gemm wrote it. */
  const epi_t *epi = base->epi;
  if (convert_c) p.epi = NULL;
  if (group) {
    /* Whole batches are contiguous: the rows of the stored matrices, back to back. */
    const int64_t acols = g->trans_a ? m : k, bcols = g->trans_b ? k : n;
    p.lda = acols;
    p.ldb = bcols;
    p.ldc = n;
    p.sa = m * k;
    p.sb = k * n;
    p.sc = m * n;
    p.a = sa;
    p.b = sb;
    for (int64_t b0 = 0; b0 < g->batch && !st; b0 += group) {
      const int64_t nb = g->batch - b0 < group ? g->batch - b0 : group;
      p.batch = nb;
      p.c = convert_c ? sc : (char *)base->c + (size_t)(b0 * m * n) * es;
      st = convert_in(in, base->a, b0 * m * k, acols, nb * m * k / acols, acols, p.ct, sa, acols,
                      pool);
      if (!st)
        st = convert_in(in, base->b, b0 * k * n, bcols, nb * k * n / bcols, bcols, p.ct, sb, bcols,
                        pool);
      if (!st && convert_c && load_c)
        st = convert_in(out, base->c, b0 * m * n, n, nb * m, n, p.ct, sc, n, pool);
      if (!st) st = mm_run(&p, pool);
      if (!st && convert_c)
        st = convert_out(p.ct, sc, n, nb * m, n, out, base->c, b0 * m * n, n, epi, 0, pool);
    }
  } else if (kc) {
    p.batch = 1;
    p.a = sa;
    p.b = sb;
    p.lda = g->trans_a ? m : kc;
    p.ldb = g->trans_b ? kc : n;
    p.c = convert_c ? sc : NULL;
    p.ldc = n;
    for (int64_t bi = 0; bi < g->batch && !st; bi++) {
      const int64_t a0 = bi * m * k, b0 = bi * k * n, c0 = bi * m * n;
      if (!convert_c) p.c = (char *)base->c + (size_t)c0 * es;
      if (convert_c && load_c) st = convert_in(out, base->c, c0, n, m, n, p.ct, sc, n, pool);
      for (int64_t k0 = 0; k0 < k && !st; k0 += kc) {
        const int64_t depth = k - k0 < kc ? k - k0 : kc;
        /* Columns k0.. of op(A) (of A, or rows of the stored k x m A^T); rows k0.. of op(B)
         * (of B, or columns of the stored n x k B^T). */
        p.k = depth;
        if (!g->trans_a) p.lda = depth;
        if (g->trans_b) p.ldb = depth;
        p.beta = k0 == 0 ? base->beta : 1.0;
        st = g->trans_a ? convert_in(in, base->a, a0 + k0 * m, m, depth, m, p.ct, sa, m, pool)
                        : convert_in(in, base->a, a0 + k0, k, m, depth, p.ct, sa, depth, pool);
        if (!st)
          st = g->trans_b ? convert_in(in, base->b, b0 + k0, k, n, depth, p.ct, sb, depth, pool)
                          : convert_in(in, base->b, b0 + k0 * n, n, depth, n, p.ct, sb, n, pool);
        if (!st) st = mm_run(&p, pool);
      }
      if (!st && convert_c) st = convert_out(p.ct, sc, n, m, n, out, base->c, c0, n, epi, 0, pool);
    }
  } else {
    p.batch = 1;
    p.a = sa;
    p.b = sb;
    for (int64_t bi = 0; bi < g->batch && !st; bi++) {
      const int64_t a0 = bi * m * k, b0 = bi * k * n, c0 = bi * m * n;
      for (int64_t i0 = 0; i0 < m && !st; i0 += mc) {
        const int64_t rows = m - i0 < mc ? m - i0 : mc;
        /* Rows i0.. of op(A): rows of A, or columns of the stored k x m A^T. */
        p.m = rows;
        p.lda = g->trans_a ? rows : k;
        st = g->trans_a ? convert_in(in, base->a, a0 + i0, m, k, rows, p.ct, sa, rows, pool)
                        : convert_in(in, base->a, a0 + i0 * k, k, rows, k, p.ct, sa, k, pool);
        for (int64_t j0 = 0; j0 < n && !st; j0 += nc) {
          /* Columns j0.. of op(B): columns of B, or rows of the stored n x k B^T. */
          const int64_t cols = n - j0 < nc ? n - j0 : nc, at = c0 + i0 * n + j0;
          p.n = cols;
          p.ldb = g->trans_b ? k : cols;
          p.c = convert_c ? sc : (char *)base->c + (size_t)at * es;
          p.ldc = convert_c ? cols : n;
          p.j0 = j0;
          /* All of op(B) in one panel: converted once per batch, kept for every row panel
           * (a bf16 1024 x 256 x 32000 gemm converted B eight times). */
          if (nc < n || i0 == 0)
            st = g->trans_b ? convert_in(in, base->b, b0 + j0 * k, k, cols, k, p.ct, sb, k, pool)
                            : convert_in(in, base->b, b0 + j0, n, k, cols, p.ct, sb, cols, pool);
          if (!st && convert_c && load_c)
            st = convert_in(out, base->c, at, n, rows, cols, p.ct, sc, cols, pool);
          if (!st) st = mm_run(&p, pool);
          if (!st && convert_c)
            st = convert_out(p.ct, sc, cols, rows, cols, out, base->c, at, n, epi, j0, pool);
        }
      }
    }
  }
  scratch_give(scratch, scratch_bytes);
  return st;
}

/* ---- bf16/f16 gemms with few rows: B converted in cache-sized packed panels ------------- */

/* A bf16/f16 gemm with few rows of op(A) (the skinny shapes: decode-time projections,
 * per-device llama slices, attention blocks) is bound by reading B: converting B whole to f32
 * first (the panel path above) writes and re-reads twice its bytes again. Here A is converted
 * once, and B one kHalfKc x kHalfNr block at a time into a packed f32 panel that stays in L1
 * while every row of a block of A passes over it; each pool task owns kHalfNr result columns
 * of at most kHalfMaxRows rows (all of k; B's panels packed again for each block of rows,
 * but a j-major op(B)'s bf16 pairs, packed once: ypack),
 * summed in f32 registers, then alpha, beta, bias and activation applied and the block
 * rounded once to C's type. A gemm with many rows but at most kHalfMaxRows columns runs
 * transposed (C^T = op(B)^T op(A)^T: op(B) converted
 * once, op(A) packed; each strip transposed back before its epilogue). The AVX-512 copy of
 * the kernel runs where the CPU has AVX-512F, the AVX2 copy where it has AVX2, FMA and F16C
 * (up to ~768 rows, columns or k: past that the panel path), elsewhere the panel path (the
 * portable copy, KILN_HOST_GEMM_HALF=base, exists for tests, =avx2 picks the AVX2 copy on an
 * AVX-512 CPU; =panels turns this path off).
 * When the f32 copy of X does not fit the scratch (a 1024-row bf16 gemm over k = 32000, the
 * logits' gradient times the embedding), X is converted kc columns of k at a time, every strip
 * runs over those, and the partial sums of C wait in an f32 copy of C between the passes
 * (one rounding at the end, as before); it took whole f32 panels for the library before. */
enum { kHalfNr = 32, kHalfMr = 8, kHalfKc = 128, kHalfMaxRows = 128, kHalfGroup = 4 };

/* The product computed: rows x cols over k, X (rows x k, converted to f32: element (i, p) at
 * x32[i * xrs + p * xcs]) times Y (k x cols, bf16/f16: element (p, j) at y[p * ld + j], or
 * at y[j * ld + p] when y_jmajor). Not swapped: X = op(A), Y = op(B), C's rows are rows;
 * swapped: X = op(B)^T, Y = op(A)^T, C's rows are cols. */
typedef struct half_job {
  const kiln_gemm_desc_t *g;
  bool swapped, y_jmajor;
  int64_t rows, cols, xrs, xcs, ld;
  int64_t x_batch, y_batch; /* elements per batch */
  const float *x32;         /* X's columns [k_lo, k_hi) (all of k when acc is NULL) */
  const void *y;
  void *c;
  const epi_t *epi;
  int64_t strips_per_batch, blocks; /* blocks: of kHalfMaxRows rows per strip */
  int64_t group;                    /* strips per task (1..kHalfGroup) */
  int64_t k_lo, k_hi;               /* the pass over k */
  float *acc; /* (a pass of several) C's partial sums, rows x cols (X's rows, Y's columns) */
  /* bf16 pairs (the vdpbf16ps kernel; NULL: the f32 kernel on x32): X's values (i, 2q) and
   * (i, 2q + 1) of the pass side by side at x2[i * x2rs + q * x2cs] (bf16 elements; 0 past
   * k), in the operand itself when its rows run along an even k, else packed */
  const uint16_t *x2;
  int64_t x2rs, x2cs, x2_batch;
  /* (x2 only) Y's pairs packed once for every block of rows (NULL: each task packs its own):
   * strip s of batch b, pair q of the pass at ypk[((b * strips_per_batch + s) * ypk_pairs + q)
   * * kHalfNr] */
  const uint32_t *ypk;
  int64_t ypk_pairs;
} half_job_t;

/* Micro-kernel: cs[i][0..kHalfNr) (+)= sum_p X[i*xrs + p*xcs] * pk[p][0..kHalfNr) for
 * `rows` <= kHalfMr rows, over kc values of p; `first` starts from zero. */
typedef void (*half_micro_fn)(const float *x, int64_t xrs, int64_t xcs, const float *pk, int64_t kc,
                              float *cs, int rows, bool first);
/* Packs Y[p0 .. p0+kc)[j0 .. j0+nj) of one batch (from `y`) into pk (kc x kHalfNr, zero past
 * nj). */
typedef void (*half_pack_fn)(const half_job_t *J, const void *y, int64_t p0, int64_t kc, int64_t j0,
                             int64_t nj, float *pk);

/* Rounds `len` f32 values to C's type `t` (bf16, f16 or f32: a copy) at `dst`. */
typedef void (*half_store_fn)(kiln_gemm_dtype_t t, const float *v, void *dst, int64_t len);

/* bf16 pairs: cs[i][0..kHalfNr) (+)= sum_q X2(i, q) . pk[q][0..kHalfNr) for `rows` <= kHalfMr
 * rows over kq pairs of k, X2(i, q) the two bf16 values at x2[i * xrs + q * xcs], pk[q][j] the
 * pair (Y(2q, j), Y(2q + 1, j)) as one 32-bit word, the even one in the low half. */
typedef void (*half_dp_fn)(const uint16_t *x2, int64_t xrs, int64_t xcs, const uint32_t *pk,
                           int64_t kq, float *cs, int rows, bool first);
/* Packs Y[p0 .. p0+kc)[j0 .. j0+nj) of one bf16 batch into pairs: pk[q][j] for q <
 * ceil(kc / 2) (zero past kc and past nj). */
typedef void (*half_pack2_fn)(const half_job_t *J, const void *y, int64_t p0, int64_t kc,
                              int64_t j0, int64_t nj, uint32_t *pk);

static inline uint16_t half_bits(const void *p, int64_t i) {
  return ((const uint16_t *)p)[i];
}

static void half_pack2_base(const half_job_t *J, const void *y, int64_t p0, int64_t kc, int64_t j0,
                            int64_t nj, uint32_t *pk) {
  const int64_t ld = J->ld;
  for (int64_t q = 0; q < (kc + 1) / 2; q++) {
    uint32_t *d = pk + q * kHalfNr;
    for (int64_t j = 0; j < nj; j++) {
      const int64_t p = p0 + 2 * q, col = j0 + j;
      const uint32_t lo = half_bits(y, J->y_jmajor ? col * ld + p : p * ld + col);
      const uint32_t hi =
          2 * q + 1 < kc ? half_bits(y, J->y_jmajor ? col * ld + p + 1 : (p + 1) * ld + col) : 0;
      d[j] = lo | hi << 16;
    }
    for (int64_t j = nj; j < kHalfNr; j++) d[j] = 0;
  }
}

static void half_store_base(kiln_gemm_dtype_t t, const float *v, void *dst, int64_t len) {
  conv_t cv = {true, t, CT_F32, v, dst, 0, len, len, 1, len, NULL, 0};
  convert_out_rows(&cv, 0, 1);
}

static void half_micro_base(const float *x, int64_t xrs, int64_t xcs, const float *pk, int64_t kc,
                            float *cs, int rows, bool first) {
  for (int i = 0; i < rows; i++) {
    float acc[kHalfNr];
    for (int j = 0; j < kHalfNr; j++) acc[j] = first ? 0.0f : cs[i * kHalfNr + j];
    for (int64_t p = 0; p < kc; p++) {
      const float v = x[i * xrs + p * xcs];
      for (int j = 0; j < kHalfNr; j++) acc[j] += v * pk[p * kHalfNr + j];
    }
    for (int j = 0; j < kHalfNr; j++) cs[i * kHalfNr + j] = acc[j];
  }
}

static inline float half_load(kiln_gemm_dtype_t t, const void *p, int64_t i) {
  if (t == KILN_GEMM_F32) return ((const float *)p)[i];
  const uint16_t h = ((const uint16_t *)p)[i];
  return t == KILN_GEMM_BF16 ? kiln_bf16_to_f32(h) : kiln_f16_to_f32(h);
}

static void half_pack_base(const half_job_t *J, const void *y, int64_t p0, int64_t kc, int64_t j0,
                           int64_t nj, float *pk) {
  const kiln_gemm_dtype_t t = J->g->dtype;
  const int64_t ld = J->ld;
  for (int64_t p = 0; p < kc; p++) {
    float *d = pk + p * kHalfNr;
    for (int64_t j = 0; j < nj; j++)
      d[j] = half_load(t, y, J->y_jmajor ? (j0 + j) * ld + p0 + p : (p0 + p) * ld + j0 + j);
    for (int64_t j = nj; j < kHalfNr; j++) d[j] = 0.0f;
  }
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define KILN_HALF_AVX512 1
#define HALF_AVX512 __attribute__((target("avx512f")))

/* The micro-kernels' accumulators: R rows of kHalfNr sums, zero or from cs. */
HALF_AVX512 static inline __attribute__((always_inline)) void half_acc_load(__m512 *c0, __m512 *c1,
                                                                            const float *cs, int R,
                                                                            bool first) {
#pragma GCC unroll 8
  for (int i = 0; i < R; i++) {
    c0[i] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(cs + i * kHalfNr);
    c1[i] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(cs + i * kHalfNr + 16);
  }
}

HALF_AVX512 static inline __attribute__((always_inline)) void half_acc_store(const __m512 *c0,
                                                                             const __m512 *c1,
                                                                             float *cs, int R) {
#pragma GCC unroll 8
  for (int i = 0; i < R; i++) {
    _mm512_storeu_ps(cs + i * kHalfNr, c0[i]);
    _mm512_storeu_ps(cs + i * kHalfNr + 16, c1[i]);
  }
}

/* `R` rows (a constant after inlining: the accumulators stay in registers). */
HALF_AVX512 static inline __attribute__((always_inline)) void half_micro_rows(
    const float *x, int64_t xrs, int64_t xcs, const float *pk, int64_t kc, float *cs, int R,
    bool first) {
  __m512 c0[kHalfMr], c1[kHalfMr];
  half_acc_load(c0, c1, cs, R, first);
  for (int64_t p = 0; p < kc; p++) {
    const __m512 b0 = _mm512_loadu_ps(pk + p * kHalfNr),
                 b1 = _mm512_loadu_ps(pk + p * kHalfNr + 16);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
      const __m512 v = _mm512_set1_ps(x[i * xrs + p * xcs]);
      c0[i] = _mm512_fmadd_ps(v, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(v, b1, c1[i]);
    }
  }
  half_acc_store(c0, c1, cs, R);
}

/* Calls fn(args..., R, first) with R = rows (1..kHalfMr) a constant: each row count gets its
 * own copy of the always-inline micro-kernel, its accumulators in registers. */
#define HALF_ROWS_DISPATCH(fn, ...) \
  do {                              \
    switch (rows) {                 \
      case 8:                       \
        fn(__VA_ARGS__, 8, first);  \
        return;                     \
      case 7:                       \
        fn(__VA_ARGS__, 7, first);  \
        return;                     \
      case 6:                       \
        fn(__VA_ARGS__, 6, first);  \
        return;                     \
      case 5:                       \
        fn(__VA_ARGS__, 5, first);  \
        return;                     \
      case 4:                       \
        fn(__VA_ARGS__, 4, first);  \
        return;                     \
      case 3:                       \
        fn(__VA_ARGS__, 3, first);  \
        return;                     \
      case 2:                       \
        fn(__VA_ARGS__, 2, first);  \
        return;                     \
      default:                      \
        fn(__VA_ARGS__, 1, first);  \
        return;                     \
    }                               \
  } while (0)

HALF_AVX512 static void half_micro_avx512(const float *x, int64_t xrs, int64_t xcs, const float *pk,
                                          int64_t kc, float *cs, int rows, bool first) {
  HALF_ROWS_DISPATCH(half_micro_rows, x, xrs, xcs, pk, kc, cs);
}

/* r[i][j] becomes r[j][i] (32-bit elements): pairs of rows interleaved by 32 then 64 bits,
 * so that u[4a + c]'s 128-bit lane l holds column 4l + c of rows 4a .. 4a + 3; lanes then
 * gathered across registers (vshufi32x4) into whole columns. */
HALF_AVX512 static inline void transpose16x16_epi32(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int a = 0; a < 4; a++) {
    u[4 * a] = _mm512_unpacklo_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 1] = _mm512_unpackhi_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 2] = _mm512_unpacklo_epi64(t[4 * a + 1], t[4 * a + 3]);
    u[4 * a + 3] = _mm512_unpackhi_epi64(t[4 * a + 1], t[4 * a + 3]);
  }
  for (int c = 0; c < 4; c++) {
    /* lanes 0, 1 (0x44) and 2, 3 (0xee) of rows 0-3 and 4-7, then of 8-11 and 12-15 */
    const __m512i v01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i v23 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i w01 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i w23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(v01, w01, 0x88);      /* lane 0 of each: column c */
    r[4 + c] = _mm512_shuffle_i32x4(v01, w01, 0xdd);  /* lane 1: column 4 + c */
    r[8 + c] = _mm512_shuffle_i32x4(v23, w23, 0x88);  /* lane 2: column 8 + c */
    r[12 + c] = _mm512_shuffle_i32x4(v23, w23, 0xdd); /* lane 3: column 12 + c */
  }
}

/* Elements i .. i + 16 of y (f32, or bf16 / f16 to f32: bf16 the bits shifted up, f16
 * vcvtph2ps, exact). */
HALF_AVX512 static inline __m512 half16_to_f32(kiln_gemm_dtype_t t, const void *y, int64_t i) {
  if (t == KILN_GEMM_F32) return _mm512_loadu_ps((const float *)y + i);
  const uint16_t *s = (const uint16_t *)y + i;
  const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)s);
  if (t == KILN_GEMM_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

HALF_AVX512 static void half_pack_avx512(const half_job_t *J, const void *y, int64_t p0, int64_t kc,
                                         int64_t j0, int64_t nj, float *pk) {
  const kiln_gemm_dtype_t t = J->g->dtype;
  const int64_t ld = J->ld;
  if (nj != kHalfNr || kc % 16 != 0) {
    half_pack_base(J, y, p0, kc, j0, nj, pk);
    return;
  }
  if (!J->y_jmajor) {
    for (int64_t p = 0; p < kc; p++) {
      const int64_t at = (p0 + p) * ld + j0;
      _mm512_storeu_ps(pk + p * kHalfNr, half16_to_f32(t, y, at));
      _mm512_storeu_ps(pk + p * kHalfNr + 16, half16_to_f32(t, y, at + 16));
    }
    return;
  }
  /* Column j of the panel is contiguous along p in Y: 16 values of 16 columns converted at a
   * time, then transposed in registers. */
  for (int64_t q = 0; q < kc; q += 16)
    for (int h = 0; h < kHalfNr; h += 16) {
      __m512i r[16];
      for (int j = 0; j < 16; j++)
        r[j] = _mm512_castps_si512(half16_to_f32(t, y, (j0 + h + j) * ld + p0 + q));
      transpose16x16_epi32(r);
      for (int p = 0; p < 16; p++) _mm512_storeu_si512(pk + (q + p) * kHalfNr + h, r[p]);
    }
}

/* f32 to bf16 (round to nearest even, NaN quieted) or f16 (vcvtps2ph, the same rounding),
 * 16 at a time, as runtime/half.h rounds. */
HALF_AVX512 static void half_store_avx512(kiln_gemm_dtype_t t, const float *v, void *dst,
                                          int64_t len) {
  if (t != KILN_GEMM_BF16 && t != KILN_GEMM_F16) {
    half_store_base(t, v, dst, len);
    return;
  }
  uint16_t *d = dst;
  int64_t j = 0;
  for (; j + 16 <= len; j += 16) {
    const __m512 x = _mm512_loadu_ps(v + j);
    __m256i h;
    if (t == KILN_GEMM_F16) {
      h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
      const __m512i u = _mm512_castps_si512(x);
      const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
      __m512i r = _mm512_srli_epi32(
          _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(
          _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
      r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
      h = _mm512_cvtepi32_epi16(r);
    }
    _mm256_storeu_si256((__m256i *)(void *)(d + j), h);
  }
  if (j < len) half_store_base(t, v + j, d + j, len - j);
}

/* bf16 gemms where the CPU has AVX512_BF16: vdpbf16ps multiplies 32 pairs of bf16 values and
 * adds each pair's two products into an f32 lane, twice the multiply-adds of an f32 FMA per
 * instruction. Each product is exact in f32 and added with one rounding, the odd value of k
 * before the even one (an f32 sum in another order); the instruction treats subnormal inputs
 * and results as zero, whatever MXCSR says (as oneDNN's bf16 gemms on such CPUs). */
#define KILN_HALF_BF16DOT 1
#define HALF_BF16DOT __attribute__((target("avx512f,avx512bw,avx512bf16")))

HALF_BF16DOT static inline __attribute__((always_inline)) void half_dp_rows(
    const uint16_t *x2, int64_t xrs, int64_t xcs, const uint32_t *pk, int64_t kq, float *cs, int R,
    bool first) {
  __m512 c0[kHalfMr], c1[kHalfMr];
  half_acc_load(c0, c1, cs, R, first);
  for (int64_t q = 0; q < kq; q++) {
    const __m512i b0 = _mm512_loadu_si512(pk + q * kHalfNr),
                  b1 = _mm512_loadu_si512(pk + q * kHalfNr + 16);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
      uint32_t w;
      memcpy(&w, x2 + i * xrs + q * xcs, sizeof w);
      const __m512i v = _mm512_set1_epi32((int)w);
      c0[i] = _mm512_dpbf16_ps(c0[i], (__m512bh)v, (__m512bh)b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], (__m512bh)v, (__m512bh)b1);
    }
  }
  half_acc_store(c0, c1, cs, R);
}

HALF_BF16DOT static void half_dp_avx512(const uint16_t *x2, int64_t xrs, int64_t xcs,
                                        const uint32_t *pk, int64_t kq, float *cs, int rows,
                                        bool first) {
  HALF_ROWS_DISPATCH(half_dp_rows, x2, xrs, xcs, pk, kq, cs);
}

/* Rows of Y along j: rows 2q and 2q + 1 interleaved by 16-bit element (vpermt2w); Y^T (j
 * major, pairs already adjacent): 16 pairs of each of the 32 columns at a time, transposed
 * through L1. */
HALF_BF16DOT static void half_pack2_avx512(const half_job_t *J, const void *y, int64_t p0,
                                           int64_t kc, int64_t j0, int64_t nj, uint32_t *pk) {
  const int64_t ld = J->ld;
  const uint16_t *s = y;
  if (nj != kHalfNr || (J->y_jmajor && kc % 32 != 0)) {
    half_pack2_base(J, y, p0, kc, j0, nj, pk);
    return;
  }
  if (!J->y_jmajor) {
    __m512i lo_idx, hi_idx;
    {
      int16_t lo[32], hi[32];
      for (int j = 0; j < 16; j++) {
        lo[2 * j] = (int16_t)j, lo[2 * j + 1] = (int16_t)(32 + j);
        hi[2 * j] = (int16_t)(16 + j), hi[2 * j + 1] = (int16_t)(48 + j);
      }
      lo_idx = _mm512_loadu_si512(lo);
      hi_idx = _mm512_loadu_si512(hi);
    }
    for (int64_t q = 0; q < (kc + 1) / 2; q++) {
      const __m512i r0 = _mm512_loadu_si512(s + (p0 + 2 * q) * ld + j0);
      const __m512i r1 = 2 * q + 1 < kc ? _mm512_loadu_si512(s + (p0 + 2 * q + 1) * ld + j0)
                                        : _mm512_setzero_si512();
      _mm512_storeu_si512(pk + q * kHalfNr, _mm512_permutex2var_epi16(r0, lo_idx, r1));
      _mm512_storeu_si512(pk + q * kHalfNr + 16, _mm512_permutex2var_epi16(r0, hi_idx, r1));
    }
    return;
  }
  for (int64_t q0 = 0; q0 < kc / 2; q0 += 16)
    for (int h = 0; h < kHalfNr; h += 16) {
      __m512i r[16];
      for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_si512(s + (j0 + h + j) * ld + p0 + 2 * q0);
      transpose16x16_epi32(r);
      for (int q = 0; q < 16; q++) _mm512_storeu_si512(pk + (q0 + q) * kHalfNr + h, r[q]);
    }
}
#endif

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
/* The AVX2 copy (CPUs with AVX2, FMA and F16C but no AVX-512: Zen 1-3, Haswell to Comet Lake):
 * sixteen 8-lane registers hold at most 6 rows x 16 columns of sums (12) with the panel's two
 * vectors and a broadcast, so a micro call covers its kHalfNr columns in two halves and its
 * rows in blocks of at most 6. */
#define KILN_HALF_AVX2 1
#define HALF_AVX2 __attribute__((target("avx2,fma,f16c")))

/* `R` rows (a constant after inlining) x 16 columns from column h of the panel. */
HALF_AVX2 static inline __attribute__((always_inline)) void half_micro_avx2_rows(
    const float *x, int64_t xrs, int64_t xcs, const float *pk, int64_t kc, float *cs, int h, int R,
    bool first) {
  __m256 c0[6], c1[6];
#pragma GCC unroll 6
  for (int i = 0; i < R; i++) {
    c0[i] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(cs + i * kHalfNr + h);
    c1[i] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(cs + i * kHalfNr + h + 8);
  }
  for (int64_t p = 0; p < kc; p++) {
    const __m256 b0 = _mm256_loadu_ps(pk + p * kHalfNr + h),
                 b1 = _mm256_loadu_ps(pk + p * kHalfNr + h + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
      const __m256 v = _mm256_broadcast_ss(x + i * xrs + p * xcs);
      c0[i] = _mm256_fmadd_ps(v, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(v, b1, c1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; i++) {
    _mm256_storeu_ps(cs + i * kHalfNr + h, c0[i]);
    _mm256_storeu_ps(cs + i * kHalfNr + h + 8, c1[i]);
  }
}

/* Both halves of `R` rows. */
HALF_AVX2 static inline __attribute__((always_inline)) void half_micro_avx2_block(
    const float *x, int64_t xrs, int64_t xcs, const float *pk, int64_t kc, float *cs, int R,
    bool first) {
  half_micro_avx2_rows(x, xrs, xcs, pk, kc, cs, 0, R, first);
  half_micro_avx2_rows(x, xrs, xcs, pk, kc, cs, 16, R, first);
}

HALF_AVX2 static void half_micro_avx2(const float *x, int64_t xrs, int64_t xcs, const float *pk,
                                      int64_t kc, float *cs, int rows, bool first) {
  /* 8 rows as 4 + 4, 7 as 6 + 1 (blocks of at most 6) */
  if (rows > 6) {
    const int top = rows == 8 ? 4 : 6;
    half_micro_avx2(x, xrs, xcs, pk, kc, cs, top, first);
    half_micro_avx2(x + top * xrs, xrs, xcs, pk, kc, cs + top * kHalfNr, rows - top, first);
    return;
  }
  switch (rows) {
    case 6:
      half_micro_avx2_block(x, xrs, xcs, pk, kc, cs, 6, first);
      return;
    case 5:
      half_micro_avx2_block(x, xrs, xcs, pk, kc, cs, 5, first);
      return;
    case 4:
      half_micro_avx2_block(x, xrs, xcs, pk, kc, cs, 4, first);
      return;
    case 3:
      half_micro_avx2_block(x, xrs, xcs, pk, kc, cs, 3, first);
      return;
    case 2:
      half_micro_avx2_block(x, xrs, xcs, pk, kc, cs, 2, first);
      return;
    default:
      half_micro_avx2_block(x, xrs, xcs, pk, kc, cs, 1, first);
      return;
  }
}

/* Elements i .. i + 8 of y as f32 (bf16: the bits shifted up; f16: vcvtph2ps; both exact). */
HALF_AVX2 static inline __m256 half8_to_f32(kiln_gemm_dtype_t t, const void *y, int64_t i) {
  if (t == KILN_GEMM_F32) return _mm256_loadu_ps((const float *)y + i);
  const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)y + i));
  if (t == KILN_GEMM_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* r[i][j] becomes r[j][i] (8 x 8, 32-bit elements). */
HALF_AVX2 static inline void transpose8x8_ps(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int a = 0; a < 2; a++) {
    u[4 * a] = _mm256_shuffle_ps(t[4 * a], t[4 * a + 2], 0x44);
    u[4 * a + 1] = _mm256_shuffle_ps(t[4 * a], t[4 * a + 2], 0xee);
    u[4 * a + 2] = _mm256_shuffle_ps(t[4 * a + 1], t[4 * a + 3], 0x44);
    u[4 * a + 3] = _mm256_shuffle_ps(t[4 * a + 1], t[4 * a + 3], 0xee);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

HALF_AVX2 static void half_pack_avx2(const half_job_t *J, const void *y, int64_t p0, int64_t kc,
                                     int64_t j0, int64_t nj, float *pk) {
  const kiln_gemm_dtype_t t = J->g->dtype;
  const int64_t ld = J->ld;
  if (nj != kHalfNr || kc % 8 != 0) {
    half_pack_base(J, y, p0, kc, j0, nj, pk);
    return;
  }
  if (!J->y_jmajor) {
    for (int64_t p = 0; p < kc; p++) {
      const int64_t at = (p0 + p) * ld + j0;
      for (int h = 0; h < kHalfNr; h += 8)
        _mm256_storeu_ps(pk + p * kHalfNr + h, half8_to_f32(t, y, at + h));
    }
    return;
  }
  /* Column j of the panel is contiguous along p in Y: 8 values of 8 columns at a time,
   * transposed in registers. */
  for (int64_t q = 0; q < kc; q += 8)
    for (int h = 0; h < kHalfNr; h += 8) {
      __m256 r[8];
      for (int j = 0; j < 8; j++) r[j] = half8_to_f32(t, y, (j0 + h + j) * ld + p0 + q);
      transpose8x8_ps(r);
      for (int p = 0; p < 8; p++) _mm256_storeu_ps(pk + (q + p) * kHalfNr + h, r[p]);
    }
}

/* f32 to bf16 (round to nearest even, NaN quieted) or f16 (vcvtps2ph), 8 at a time, as
 * runtime/half.h rounds. */
HALF_AVX2 static void half_store_avx2(kiln_gemm_dtype_t t, const float *v, void *dst, int64_t len) {
  if (t != KILN_GEMM_BF16 && t != KILN_GEMM_F16) {
    half_store_base(t, v, dst, len);
    return;
  }
  uint16_t *d = dst;
  int64_t j = 0;
  for (; j + 8 <= len; j += 8) {
    const __m256 x = _mm256_loadu_ps(v + j);
    __m128i h;
    if (t == KILN_GEMM_F16) {
      h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
      const __m256i u = _mm256_castps_si256(x);
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
      const __m256i rounded = _mm256_srli_epi32(
          _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
      /* |x| above infinity's bits (a signed compare: the sign bit is masked off) */
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                             _mm256_set1_epi32(0x7f800000));
      const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
      const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
      /* 32-bit lanes (each <= 0xffff) to 16 bits: packus works per 128-bit half */
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
      h = _mm256_castsi256_si128(packed);
    }
    _mm_storeu_si128((__m128i *)(void *)(d + j), h);
  }
  if (j < len) half_store_base(t, v + j, d + j, len - j);
}
#endif

static struct {
  pthread_once_t once;
  half_micro_fn micro; /* NULL: the panel path */
  half_store_fn store;
  half_pack_fn pack;
  half_dp_fn dp; /* bf16 pairs; NULL: bf16 on the f32 kernel too */
  half_pack2_fn pack2;
  const char *name;
} g_half = {.once = PTHREAD_ONCE_INIT, .name = "panels"};

/* Whether bf16 gemms may take the pairs kernel (kiln_host_gemm_half_set_bf16_dot). */
static _Atomic bool g_half_dp_on = true;

static void pick_half(void) {
  /* "panels", "base" (tests), else auto */
  const char *env = kiln_runtime_options().host_gemm_half;
  if (env && !strcmp(env, "panels")) return;
  if (env && !strcmp(env, "base")) {
    g_half.micro = half_micro_base;
    g_half.pack = half_pack_base;
    g_half.store = half_store_base;
    g_half.name = "base";
    return;
  }
#ifdef KILN_HALF_AVX2
  /* "avx2": the AVX2 copy on a CPU with AVX-512 too (tests, benchmarks) */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    g_half.micro = half_micro_avx2;
    g_half.pack = half_pack_avx2;
    g_half.store = half_store_avx2;
    g_half.name = "avx2";
  }
  if (env && !strcmp(env, "avx2")) return;
#endif
#ifdef KILN_HALF_AVX512
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    g_half.micro = half_micro_avx512;
    g_half.pack = half_pack_avx512;
    g_half.store = half_store_avx512;
    g_half.name = "avx512";
#ifdef KILN_HALF_BF16DOT
    /* "avx512": the f32 kernel for bf16 too (benchmarks compare the two) */
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16") &&
        !(env && !strcmp(env, "avx512"))) {
      g_half.dp = half_dp_avx512;
      g_half.pack2 = half_pack2_avx512;
      g_half.name = "avx512bf16";
    }
#endif
  }
#endif
}

bool kiln_host_gemm_half_set_bf16_dot(bool on) {
  kiln_once(&g_half.once, pick_half);
  atomic_store(&g_half_dp_on, on);
  return g_half.dp != NULL;
}

const char *kiln_host_gemm_half_kernel(void) {
  kiln_once(&g_half.once, pick_half);
  return g_half.name;
}

/* The finished sums cs (rows x nj, row stride kHalfNr) of the strip at column j0 of row block
 * rb0 of batch bi: kept for the next pass over k (J->acc) or, after the last, transposed back
 * when swapped, alpha, beta * C, bias and activation, and one rounding into C. */
static void half_strip_finish(const half_job_t *J, int64_t bi, int64_t rb0, int64_t rows,
                              int64_t j0, int64_t nj, float *cs) {
  const kiln_gemm_desc_t *g = J->g;
  const int64_t m = g->m, n = g->n, k = g->k;
  const kiln_gemm_dtype_t out = kiln_gemm_desc_out_dtype(g);
  const size_t out_es = kiln_gemm_dtype_size(out);
  if (J->acc) {
    /* One pass of several: add the earlier passes' sums; keep them for the next pass. */
    float *acc = J->acc + (bi * J->rows + rb0) * J->cols + j0;
    if (J->k_lo > 0)
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < nj; j++) cs[i * kHalfNr + j] += acc[i * J->cols + j];
    if (J->k_hi < k) {
      for (int64_t i = 0; i < rows; i++)
        memcpy(acc + i * J->cols, cs + i * kHalfNr, (size_t)nj * sizeof(float));
      return;
    }
  }
  /* The block of C: ci x cj from row r0, column c0 (swapped: the strip transposed). */
  float ct[kHalfNr * kHalfMaxRows];
  float *v = cs;
  int64_t ci = rows, cj = nj, ldv = kHalfNr, r0 = rb0, c0 = j0;
  if (J->swapped) {
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < nj; j++) ct[j * kHalfMaxRows + i] = cs[i * kHalfNr + j];
    v = ct, ci = nj, cj = rows, ldv = kHalfMaxRows, r0 = j0, c0 = 0;
  }
  /* alpha, beta * C, then bias and activation, then one rounding. */
  char *c = (char *)J->c + (size_t)(bi * m * n + r0 * n + c0) * out_es;
  if (g->alpha != 1 || g->beta != 0)
    for (int64_t i = 0; i < ci; i++)
      for (int64_t j = 0; j < cj; j++) {
        float w = (float)g->alpha * v[i * ldv + j];
        if (g->beta != 0) {
          float old = out == KILN_GEMM_F32 ? ((const float *)(const void *)c)[i * n + j]
                                           : half_load(out, c, i * n + j);
          w += (float)g->beta * old;
        }
        v[i * ldv + j] = w;
      }
  if (J->epi) epilogue_apply(J->epi, CT_F32, v, ldv, ci, cj, c0);
  for (int64_t i = 0; i < ci; i++) g_half.store(out, v + i * ldv, c + (size_t)(i * n) * out_es, cj);
}

/* Prefetches `bytes` from p into the cache, a line at a time. */
static inline void prefetch_span(const void *p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)p + o);
}

/* Asks for the next step's operands (values pn .. pn + kc of k) while this one computes. The
 * rows of X and of a j-major Y (or the k rows of a row-major Y) lie a row of the operand apart,
 * a few lines each: too many short streams for the hardware prefetcher (B^T of k = 32,000 ran
 * ~1.5x slower than B before). X only where its pairs are read in place or packed (x2). */
static void half_prefetch_step(const half_job_t *J, const void *y, const uint16_t *x2, int64_t rows,
                               int64_t j0, int64_t nj, int64_t pn, int64_t kc) {
  const size_t es = kiln_gemm_dtype_size(J->g->dtype);
  if (x2 && J->x2cs == 2)
    for (int64_t i = 0; i < rows; i++) prefetch_span(x2 + i * J->x2rs, kc * 2);
  const char *yb = y;
  if (J->ypk) return; /* Y's packed panels are read in order */
  if (J->y_jmajor) {
    for (int64_t j = j0; j < j0 + nj; j++)
      prefetch_span(yb + (size_t)(j * J->ld + pn) * es, kc * (int64_t)es);
  } else {
    for (int64_t p = pn; p < pn + kc; p++)
      prefetch_span(yb + (size_t)(p * J->ld + j0) * es, nj * (int64_t)es);
  }
}

/* Tasks [s0, s1) of the job: task t is row block t % blocks of strip group t / blocks, up to
 * J->group strips of kHalfNr columns of one batch. Per kHalfKc values of k (the next ones
 * prefetched), each strip of the group packs its panel of Y (or finds it packed by ypack) and
 * the block's rows pass over it: the block's kHalfMaxRows x
 * kHalfKc piece of X (64 KiB) is read from cache by every strip of the group, not from memory
 * once per strip (a 1024 x 4096 pass of X is 16 MiB). */
static void half_strips(void **args, int64_t s0, int64_t s1) {
  const half_job_t *J = args[0];
  float cs[kHalfGroup][kHalfMaxRows * kHalfNr];
  float pk[kHalfKc * kHalfNr];
  uint32_t pk2[kHalfKc / 2 * kHalfNr];
  const int64_t groups_per_batch = (J->strips_per_batch + J->group - 1) / J->group;
  for (int64_t t = s0; t < s1; t++) {
    const int64_t gi = t / J->blocks, rb0 = (t % J->blocks) * kHalfMaxRows;
    const int64_t rows = J->rows - rb0 < kHalfMaxRows ? J->rows - rb0 : kHalfMaxRows;
    const int64_t bi = gi / groups_per_batch, first = (gi % groups_per_batch) * J->group;
    const int64_t count =
        J->strips_per_batch - first < J->group ? J->strips_per_batch - first : J->group;
    const void *y =
        (const char *)J->y + (size_t)(bi * J->y_batch) * kiln_gemm_dtype_size(J->g->dtype);
    for (int64_t p0 = J->k_lo; p0 < J->k_hi; p0 += kHalfKc) {
      const int64_t kc = J->k_hi - p0 < kHalfKc ? J->k_hi - p0 : kHalfKc;
      const int64_t pn = p0 + kHalfKc, kn = J->k_hi - pn < kHalfKc ? J->k_hi - pn : kHalfKc;
      if (kn > 0) {
        const int64_t j0 = first * kHalfNr, cols = count * kHalfNr;
        const int64_t nj = J->cols - j0 < cols ? J->cols - j0 : cols;
        const uint16_t *xn =
            J->x2 ? J->x2 + bi * J->x2_batch + rb0 * J->x2rs + (pn - J->k_lo) / 2 * J->x2cs : NULL;
        half_prefetch_step(J, y, xn, rows, j0, nj, pn, kn);
      }
      for (int64_t q = 0; q < count; q++) {
        const int64_t j0 = (first + q) * kHalfNr;
        const int64_t nj = J->cols - j0 < kHalfNr ? J->cols - j0 : kHalfNr;
        if (J->x2) { /* (p0 - k_lo is a multiple of kHalfKc: even) */
          const uint16_t *x2 =
              J->x2 + bi * J->x2_batch + rb0 * J->x2rs + (p0 - J->k_lo) / 2 * J->x2cs;
          const uint32_t *panel = pk2;
          if (J->ypk)
            panel = J->ypk +
                    ((bi * J->strips_per_batch + first + q) * J->ypk_pairs + (p0 - J->k_lo) / 2) *
                        kHalfNr;
          else
            g_half.pack2(J, y, p0, kc, j0, nj, pk2);
          for (int64_t i0 = 0; i0 < rows; i0 += kHalfMr)
            g_half.dp(x2 + i0 * J->x2rs, J->x2rs, J->x2cs, panel, (kc + 1) / 2,
                      cs[q] + i0 * kHalfNr, (int)(rows - i0 < kHalfMr ? rows - i0 : kHalfMr),
                      p0 == J->k_lo);
          continue;
        }
        const float *x = J->x32 + bi * J->x_batch + rb0 * J->xrs;
        g_half.pack(J, y, p0, kc, j0, nj, pk);
        for (int64_t i0 = 0; i0 < rows; i0 += kHalfMr)
          g_half.micro(x + i0 * J->xrs + (p0 - J->k_lo) * J->xcs, J->xrs, J->xcs, pk, kc,
                       cs[q] + i0 * kHalfNr, (int)(rows - i0 < kHalfMr ? rows - i0 : kHalfMr),
                       p0 == J->k_lo);
      }
    }
    for (int64_t q = 0; q < count; q++) {
      const int64_t j0 = (first + q) * kHalfNr;
      const int64_t nj = J->cols - j0 < kHalfNr ? J->cols - j0 : kHalfNr;
      half_strip_finish(J, bi, rb0, rows, j0, nj, cs[q]);
    }
  }
}

/* The most rows (of op(A), or of op(B)^T when transposed) a gemm may have to take the
 * packed-panel path (kiln_host_gemm_half_set_max_rows). */
static _Atomic int64_t g_half_max_rows = INT64_MAX;

void kiln_host_gemm_half_set_max_rows(int64_t rows) {
  atomic_store(&g_half_max_rows, rows > 0 ? rows : INT64_MAX);
}

/* The most X elements converted to f32 at once (kiln_host_gemm_half_set_max_x_elems). */
static _Atomic int64_t g_half_x_elems = kScratchElems;
static _Atomic int64_t g_half_k_passes; /* passes of gemms run in several (for tests) */

int64_t kiln_host_gemm_half_k_passes(void) {
  return atomic_load(&g_half_k_passes);
}

void kiln_host_gemm_half_set_max_x_elems(int64_t elems) {
  atomic_store(&g_half_x_elems, elems > 0 ? elems : kScratchElems);
}

/* bf16 gemms with at least this k take the pairs kernel (where the CPU has it). */
enum { kHalfDpMinK = 32 };

/* X's layout in its operand: element (i, p) at x[i * xrs + p * xcs] (see half_job_t). */
static void half_x_strides(const kiln_gemm_desc_t *g, bool swapped, int64_t *xrs, int64_t *xcs) {
  if (!swapped) {
    *xrs = g->trans_a ? 1 : g->k, *xcs = g->trans_a ? g->m : 1;
  } else {
    *xrs = g->trans_b ? g->k : 1, *xcs = g->trans_b ? 1 : g->n;
  }
}

/* 0: the f32 kernel; 1: bf16 pairs packed from X; 2: bf16 pairs read from X itself (its rows
 * run along an even k: no copy, so no passes over k either). */
static int half_pairs_mode(const kiln_gemm_desc_t *g, bool swapped) {
  if (g->dtype != KILN_GEMM_BF16 || !g_half.dp || g->k < kHalfDpMinK || !atomic_load(&g_half_dp_on))
    return 0;
  int64_t xrs, xcs;
  half_x_strides(g, swapped, &xrs, &xcs);
  return xcs == 1 && g->k % 2 == 0 ? 2 : 1;
}

/* Elements of X's packed pairs for `w` values of k over `batches` batches. */
static int64_t pairs_elems(const half_job_t *J, int64_t w, int64_t batches) {
  return batches * J->rows * 2 * ((w + 1) / 2);
}

typedef struct pairs_job {
  const half_job_t *J;
  const uint16_t *x;
  uint16_t *dst;
  int64_t k0, w, kq;
} pairs_job_t;

/* Pack tasks: one per batch and row of X (rows along k) or per batch and pair (k-major). */
static void pairs_pack_tasks(void **args, int64_t t0, int64_t t1) {
  const pairs_job_t *P = args[0];
  const half_job_t *J = P->J;
  const int64_t rows = J->rows, kq = P->kq;
  const bool k_major = J->xcs != 1;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t per = k_major ? kq : rows, bi = t / per, r = t % per;
    const uint16_t *x = P->x + bi * J->x_batch;
    uint16_t *d = P->dst + bi * rows * 2 * kq;
    if (k_major) { /* pair r: X(i, k0 + 2r) at x[(k0 + 2r) * rows + i]; stored q-major */
      const uint16_t *lo = x + (P->k0 + 2 * r) * rows, *hi = lo + rows;
      const bool has_hi = 2 * r + 1 < P->w;
      uint16_t *o = d + r * 2 * rows;
      for (int64_t i = 0; i < rows; i++) {
        o[2 * i] = lo[i];
        o[2 * i + 1] = has_hi ? hi[i] : 0;
      }
    } else { /* row r: X(r, p) at x[r * k + p]; stored row-major */
      const uint16_t *src = x + r * J->xrs + P->k0;
      uint16_t *o = d + r * 2 * kq;
      memcpy(o, src, (size_t)P->w * sizeof(uint16_t));
      if (P->w % 2) o[P->w] = 0;
    }
  }
}

/* X's values k0 .. k0 + w of `batches` batches as bf16 pairs in dst; sets J's x2 fields. */
static kiln_status pairs_pack(half_job_t *J, const void *x, int64_t k0, int64_t w, int64_t batches,
                              uint16_t *dst, kiln_host_pool_t *pool) {
  const bool k_major = J->xcs != 1;
  pairs_job_t P = {J, x, dst, k0, w, (w + 1) / 2};
  void *args[1] = {&P};
  const int64_t tasks = batches * (k_major ? P.kq : J->rows);
  kiln_status st = NULL;
  if (pool && kiln_host_pool_num_workers(pool) > 1 && tasks > 1)
    st = kiln_host_pool_launch(pool, pairs_pack_tasks, args, tasks, 0);
  else
    pairs_pack_tasks(args, 0, tasks);
  J->x2 = dst;
  J->x2rs = k_major ? 2 : 2 * P.kq;
  J->x2cs = k_major ? 2 * J->rows : 2;
  J->x2_batch = J->rows * 2 * P.kq;
  return st;
}

/* The most bytes of Y's pairs packed once for all blocks of rows (ypack). */
static const int64_t kYPackBytes = (int64_t)64 << 20;
static _Atomic bool g_ypack_on = true;

void kiln_host_gemm_half_set_ypack(bool on) {
  atomic_store(&g_ypack_on, on);
}
enum { kYPackSteps = 16 }; /* kHalfKc steps per pack task */

typedef struct ypack_job {
  const half_job_t *J;
  uint32_t *dst;
  int64_t chunks; /* tasks per strip */
} ypack_job_t;

/* Pack tasks: task t packs kYPackSteps steps of kHalfKc values of one strip of one batch. */
static void ypack_tasks(void **args, int64_t t0, int64_t t1) {
  const ypack_job_t *P = args[0];
  const half_job_t *J = P->J;
  const size_t es = kiln_gemm_dtype_size(J->g->dtype);
  for (int64_t t = t0; t < t1; t++) {
    const int64_t strip = t / P->chunks, chunk = t % P->chunks;
    const int64_t bi = strip / J->strips_per_batch, j0 = (strip % J->strips_per_batch) * kHalfNr;
    const int64_t nj = J->cols - j0 < kHalfNr ? J->cols - j0 : kHalfNr;
    const void *y = (const char *)J->y + (size_t)(bi * J->y_batch) * es;
    for (int64_t s = 0; s < kYPackSteps; s++) {
      const int64_t p0 = J->k_lo + (chunk * kYPackSteps + s) * kHalfKc;
      if (p0 >= J->k_hi) break;
      const int64_t kc = J->k_hi - p0 < kHalfKc ? J->k_hi - p0 : kHalfKc;
      g_half.pack2(J, y, p0, kc, j0, nj,
                   P->dst + (strip * J->ypk_pairs + (p0 - J->k_lo) / 2) * kHalfNr);
    }
  }
}

/* Packs Y's pairs for the pass [k_lo, k_hi) once, where several blocks of rows would each pack
 * them again from a j-major Y (a transpose of rows a row of Y apart: dot.526 of the bf16
 * training step, B^T with k = 32,000, spent a fifth of its time there) and the copy fits
 * kYPackBytes; sets J->ypk (NULL: each task packs its own). A row-major Y's pack is a cheap
 * stream the tasks keep doing (a packed copy through memory cost more than it saved). */
static kiln_status ypack(half_job_t *J, int64_t batches, uint32_t **buf, size_t *cap,
                         kiln_host_pool_t *pool) {
  J->ypk = NULL;
  if (J->blocks < 2 || !J->y_jmajor || !atomic_load(&g_ypack_on)) return NULL;
  J->ypk_pairs = (J->k_hi - J->k_lo + 1) / 2;
  size_t bytes =
      (size_t)(batches * J->strips_per_batch * J->ypk_pairs * kHalfNr) * sizeof(uint32_t);
  if ((int64_t)bytes > kYPackBytes) return NULL;
  if (bytes > *cap) {
    if (*buf) scratch_give(*buf, *cap);
    *buf = scratch_take(&bytes);
    *cap = *buf ? bytes : 0;
    if (!*buf) return NULL; /* each task packs its own */
  }
  const int64_t steps = (J->k_hi - J->k_lo + kHalfKc - 1) / kHalfKc;
  ypack_job_t P = {J, *buf, (steps + kYPackSteps - 1) / kYPackSteps};
  void *args[1] = {&P};
  const int64_t tasks = batches * J->strips_per_batch * P.chunks;
  kiln_status st = NULL;
  if (pool && kiln_host_pool_num_workers(pool) > 1 && tasks > 1)
    st = kiln_host_pool_launch(pool, ypack_tasks, args, tasks, 0);
  else
    ypack_tasks(args, 0, tasks);
  if (!st) J->ypk = *buf;
  return st;
}

/* f32 gemms on the packed-panel kernel (kiln_host_gemm_f32_set_kernel): -1 auto, 0 the
 * library, 1 the kernel. */
static _Atomic int g_f32_kernel = -1;
static struct {
  pthread_once_t once;
  bool on;
  const char *why;
} g_f32 = {.once = PTHREAD_ONCE_INIT};

/* Auto: the kernel where the CPU has AVX-512F and the library's own kernel for it is narrower
 * — no library, or OpenBLAS on a core type without AVX-512 (Debian's 0.3.21 runs its AVX2
 * "Haswell" kernel on AMD's Zen 4 and 5: the kernel's 8 x 32 AVX-512 tiles measured 1.7x its
 * sgemm on Zen 5) — and the library elsewhere (BLIS, MKL, OpenBLAS's SkylakeX, Cooperlake
 * and SapphireRapids kernels). */
static void pick_f32(void) {
  kiln_once(&g_half.once, pick_half);
  const char *env = kiln_runtime_options().host_gemm_f32;
  if (env && !strcmp(env, "library")) {
    g_f32.why = "KILN_HOST_GEMM_F32=library";
    return;
  }
  if (env && !strcmp(env, "kernel") && g_half.micro) {
    g_f32.on = true;
    g_f32.why = "KILN_HOST_GEMM_F32=kernel";
    return;
  }
#ifdef KILN_HALF_AVX512
  if (g_half.micro != half_micro_avx512) {
    g_f32.why = "no AVX-512 kernel";
    return;
  }
#else
  g_f32.why = "no AVX-512 kernel";
  return;
#endif
  const char *lib = kiln_host_blas_library(NULL);
  if (!lib) {
    g_f32.on = true;
    g_f32.why = "no CBLAS library";
    return;
  }
  const char *(*corename)(void) = NULL;
  void *sym = kiln_host_blas_symbol("openblas_get_corename");
  memcpy(&corename, &sym, sizeof sym);
  const char *core = corename ? corename() : NULL;
  if (!core) {
    g_f32.why = "the library is not OpenBLAS";
    return;
  }
  static const char *const wide[] = {"skylakex", "cooperlake", "sapphirerapids"};
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    if (!strcasecmp(core, wide[i])) {
      g_f32.why = "OpenBLAS runs an AVX-512 kernel";
      return;
    }
  g_f32.on = true;
  g_f32.why = "OpenBLAS runs a kernel without AVX-512 on this CPU";
  KILN_LOG_I("host gemm: f32 gemms on kiln's AVX-512 kernel (%s's core type is %s)", lib, core);
}

static bool f32_on_kernel(void) {
  const int forced = atomic_load(&g_f32_kernel);
  kiln_once(&g_f32.once, pick_f32);
  if (forced >= 0) return forced == 1 && g_half.micro != NULL;
  return g_f32.on;
}

const char *kiln_host_gemm_f32_kernel(const char **why) {
  kiln_once(&g_f32.once, pick_f32);
  if (why) *why = g_f32.why;
  if (!f32_on_kernel()) return "library";
  return strcmp(g_half.name, "avx512bf16") ? g_half.name : "avx512"; /* (f32 FMAs) */
}

void kiln_host_gemm_f32_set_kernel(int mode) {
  atomic_store(&g_f32_kernel, mode < 0 ? -1 : mode > 0 ? 1 : 0);
}

/* An f32 gemm whose X rows run along k: the kernel reads X itself (no copy, no passes). */
static bool f32_in_place(const kiln_gemm_desc_t *g, bool swapped) {
  if (g->dtype != KILN_GEMM_F32) return false;
  int64_t xrs, xcs;
  half_x_strides(g, swapped, &xrs, &xcs);
  return xcs == 1;
}

/* Whether gemm `g` takes the path above (decided per gemm; the kernel once per process), and
 * whether transposed. */
static bool half_path_takes(const kiln_gemm_desc_t *g, bool *swapped) {
  if (g->dtype != KILN_GEMM_BF16 && g->dtype != KILN_GEMM_F16 &&
      !(g->dtype == KILN_GEMM_F32 && f32_on_kernel()))
    return false;
  kiln_once(&g_half.once, pick_half);
  if (!g_half.micro) return false;
  /* Up to kTinyGemm multiply-adds the C kernel's in-order sums stay (see kTinyGemm). */
  if (g->m * g->n * g->k <= kTinyGemm) return false;
  /* Transposed when op(A) has more rows than a block and op(B) few columns; else blocks of
   * rows when there are more than kHalfMaxRows. */
  *swapped = g->m > kHalfMaxRows && g->n <= kHalfMaxRows;
  const int64_t rows = *swapped ? g->n : g->m;
  if (rows > atomic_load(&g_half_max_rows)) return false;
#ifdef KILN_HALF_AVX2
  /* The AVX2 copy packs B again for each block of rows: from ~768 in every dimension,
   * OpenBLAS's Haswell kernel on f32 panels ran 1.0-1.12x faster on a Zen 3 (session 39; the
   * AVX2 copy 1.04-1.22x faster below that, and on skinny shapes by up to 2x). */
  if (g_half.micro == half_micro_avx2 && g->dtype != KILN_GEMM_F32 && !*swapped && g->m >= 768 &&
      g->n >= 768 && g->k >= 768 && kiln_host_blas_library(NULL))
    return false;
#endif
  if (half_pairs_mode(g, *swapped) == 2 || f32_in_place(g, *swapped)) return true; /* no copy */
  const int64_t x_elems = atomic_load(&g_half_x_elems);
  if (g->batch * rows * g->k <= x_elems) return true;
  /* Passes over k: one batch whose X takes kHalfKc columns at a time and whose f32 C fits. */
  return g->batch == 1 && rows * kHalfKc <= x_elems && g->m * g->n <= kScratchElems;
}

static kiln_status gemm_half(const kiln_gemm_desc_t *g, bool swapped, const void *a, const void *b,
                             void *c, const epi_t *epi, kiln_host_pool_t *pool) {
  const int64_t m = g->m, n = g->n, k = g->k;
  half_job_t J = {.g = g, .swapped = swapped, .c = c, .epi = epi};
  const void *x;
  half_x_strides(g, swapped, &J.xrs, &J.xcs);
  if (!swapped) { /* X = op(A), Y = op(B) */
    J.rows = m, J.cols = n, x = a, J.y = b;
    J.y_jmajor = g->trans_b, J.ld = g->trans_b ? k : n;
  } else { /* X = op(B)^T, Y = op(A)^T */
    J.rows = n, J.cols = m, x = b, J.y = a;
    J.y_jmajor = !g->trans_a, J.ld = g->trans_a ? m : k;
  }
  J.x_batch = J.rows * k, J.y_batch = J.cols * k;
  J.strips_per_batch = (J.cols + kHalfNr - 1) / kHalfNr;
  J.blocks = (J.rows + kHalfMaxRows - 1) / kHalfMaxRows; /* swapped: 1 */
  /* X whole, or (one batch, half_path_takes) kc columns of k per pass. */
  const int pairs = half_pairs_mode(g, swapped);
  const bool f32_x = f32_in_place(g, swapped); /* f32 X read in place */
  const bool in_place = pairs == 2 || f32_x;
  const int64_t x_elems = atomic_load(&g_half_x_elems);
  int64_t kc = k;
  if (!in_place && g->batch * J.x_batch > x_elems) {
    kc = x_elems / J.rows / kHalfKc * kHalfKc;
    if (kc < kHalfKc) kc = kHalfKc; /* (the bound changed since half_path_takes) */
  }
  const bool k_major = J.xcs != 1; /* X stored k x rows (op(A) = A^T, or op(B)^T = B) */
  /* X's f32 copy, its bf16 pairs, or nothing (pairs in place) */
  const int64_t batches = kc == k ? g->batch : 1;
  const int64_t nx = in_place ? 0 : pairs ? pairs_elems(&J, kc, batches) : batches * J.rows * kc;
  size_t bytes = (size_t)nx * (pairs ? sizeof(uint16_t) : sizeof(float));
  float *x32 = nx ? scratch_take(&bytes) : NULL;
  float *acc = kc < k ? malloc((size_t)(J.rows * J.cols) * sizeof(float)) : NULL;
  if ((nx && !x32) || (kc < k && !acc)) {
    if (x32) scratch_give(x32, bytes);
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "host gemm: cannot allocate %lld bytes for a converted %s operand",
                            (long long)bytes, kiln_gemm_dtype_name(g->dtype));
  }
  J.x32 = x32;
  J.acc = acc;
  void *args[1] = {&J};
  /* Groups of kHalfGroup strips while that leaves at least 4 tasks per worker. */
  const int workers = pool ? kiln_host_pool_num_workers(pool) : 1;
  J.group = 1;
  if (g->batch * J.blocks * (J.strips_per_batch / kHalfGroup) >= 4 * (int64_t)workers)
    J.group = kHalfGroup;
  const int64_t strips =
      g->batch * J.blocks * ((J.strips_per_batch + J.group - 1) / J.group); /* tasks */
  kiln_status st = NULL;
  uint32_t *ypk = NULL; /* Y's pairs packed once (ypack) */
  size_t ypk_cap = 0;
  for (int64_t k0 = 0; k0 < k && !st; k0 += kc) {
    const int64_t w = k - k0 < kc ? k - k0 : kc;
    J.k_lo = k0, J.k_hi = k0 + w;
    if (f32_x) {
      J.x32 = (const float *)x;
    } else if (in_place) {
      J.x2 = (const uint16_t *)x + k0, J.x2rs = k, J.x2cs = 2, J.x2_batch = J.x_batch;
    } else if (pairs) {
      st = pairs_pack(&J, x, k0, w, batches, (uint16_t *)(void *)x32, pool);
    } else if (kc == k) { /* the stored operand, flat (its layout stays) */
      st = convert_in(g->dtype, x, 0, k, nx / k, k, CT_F32, x32, k, pool);
    } else if (k_major) { /* rows k0.. of the stored k x rows matrix */
      st = convert_in(g->dtype, x, k0 * J.rows, J.rows, w, J.rows, CT_F32, x32, J.rows, pool);
    } else { /* columns k0.. of the stored rows x k matrix */
      st = convert_in(g->dtype, x, k0, k, J.rows, w, CT_F32, x32, w, pool);
      J.xrs = w;
    }
    if (!st && pairs) st = ypack(&J, batches, &ypk, &ypk_cap, pool);
    if (st) break;
    if (kc < k) atomic_fetch_add(&g_half_k_passes, 1);
    if (pool && kiln_host_pool_num_workers(pool) > 1 && strips > 1)
      st = kiln_host_pool_launch(pool, half_strips, args, strips, 0);
    else
      half_strips(args, 0, strips);
  }
  free(acc);
  if (ypk) scratch_give(ypk, ypk_cap);
  if (x32) scratch_give(x32, bytes);
  return st;
}

kiln_status kiln_host_gemm(const kiln_gemm_desc_t *g, const void *a, const void *b, void *c,
                           kiln_host_blas_choice_t choice, kiln_host_pool_t *pool) {
  if (kiln_gemm_dtype_is_int(g->dtype)) return kiln_host_gemm_int(g, a, b, c, pool);
  bool use_blas = choice == KILN_HOST_BLAS_AUTO && kiln_host_blas_library(NULL) != NULL;
  bool convert_ab = false, convert_c = false;
  mm_t p = {0};
  p.ct = compute_type_of(g, &convert_ab, &convert_c);
  p.use_blas = use_blas;
  p.ta = g->trans_a;
  p.tb = g->trans_b;
  p.m = g->m;
  p.n = g->n;
  p.k = g->k;
  p.lda = g->trans_a ? g->m : g->k;
  p.ldb = g->trans_b ? g->k : g->n;
  p.ldc = g->n;
  p.sa = g->m * g->k;
  p.sb = g->k * g->n;
  p.sc = g->m * g->n;
  p.batch = g->batch;
  p.alpha = g->alpha;
  p.beta = g->beta;
  p.a = a;
  p.b = b;
  p.c = c;
  epi_t epi = {g->epilogue, (const void *)(uintptr_t)g->bias, kiln_gemm_desc_out_dtype(g)};
  if (g->epilogue != KILN_GEMM_EPILOGUE_NONE || g->bias) p.epi = &epi;
  bool swapped = false;
  if (choice == KILN_HOST_BLAS_AUTO && half_path_takes(g, &swapped))
    return gemm_half(g, swapped, a, b, c, p.epi, pool);
  if (!convert_ab && !convert_c) return mm_run(&p, pool);
  return gemm_converted(g, &p, convert_c, pool);
}
