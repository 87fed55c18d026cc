/* The host device: memory is host memory, a stream is an in-order queue drained by its own
 * worker thread, kernels (kiln_host_kernel_fn) run their blocks on the device's persistent
 * worker pool, events are sequence numbers, and command buffers are recorded command lists
 * replayed as one queue entry (host_device.c). Gemm goes to OpenBLAS (or BLIS, MKL) when one
 * can be dlopen'ed, else to a blocked C kernel on the pool (host_blas.c). */
#ifndef KILN_RUNTIME_HOST_HOST_DEVICE_H_
#define KILN_RUNTIME_HOST_HOST_DEVICE_H_

#include <stdbool.h>

#include "base/host_pool.h"
#include "base/status.h"
#include "runtime/device.h"

/* Creates the host device with a pool of `num_threads` workers (0: one per core, or
 * $KILN_HOST_THREADS). The caller owns *out (kiln_device_destroy). */
kiln_status kiln_host_device_create(int num_threads, kiln_device_t **out);

/* ---- gemm ------------------------------------------------------------------------------ */

typedef enum kiln_host_blas_choice {
  KILN_HOST_BLAS_AUTO = 0,     /* CBLAS when found, else the C kernel */
  KILN_HOST_BLAS_FALLBACK = 1, /* the C kernel */
} kiln_host_blas_choice_t;

/* Row-major gemm on host memory (see kiln_gemm_desc_t; every element-type combination it
 * lists). The descriptor must be valid (kiln_gemm_desc_check). `pool` (may be NULL: the
 * calling thread does all) runs the C kernel's rows and batches of small gemms in parallel,
 * and its size becomes the library's thread count on the first call given one. Returns
 * RESOURCE_EXHAUSTED when the converted panels of a bf16/f16 gemm cannot be allocated.
 * Thread-safe. */
kiln_status kiln_host_gemm(const kiln_gemm_desc_t *g, const void *a, const void *b, void *c,
                           kiln_host_blas_choice_t choice, kiln_host_pool_t *pool);

/* An integer gemm (kiln_host_gemm passes them here; host_gemm_int.c): kiln's own packed-panel
 * kernels, products and sums modulo 2^32, the result truncated to C's type (see
 * kiln_gemm_desc_t). INVALID_ARGUMENT for a non-integer descriptor; RESOURCE_EXHAUSTED when
 * the converted rows cannot be allocated. Thread-safe. */
kiln_status kiln_host_gemm_int(const kiln_gemm_desc_t *g, const void *a, const void *b, void *c,
                               kiln_host_pool_t *pool);
/* The integer gemm's kernel set: "avx512vnni" (s8 x s8 through vpdpbusd, the rest through
 * 32-bit AVX-512 multiplies), "avx512", "avx2" (s8, u8, s16 through vpmaddwd on s16 pairs, the
 * rest through 32-bit multiplies) or "base" (portable C); the best the CPU runs, picked on
 * first use. */
const char *kiln_host_gemm_int_kernel(void);
/* Makes every later integer gemm use kernel set `name` (one of the above; NULL: the best the
 * CPU runs): UNIMPLEMENTED when the CPU lacks it (nothing changes). For tests and benchmarks;
 * not for use while integer gemms run on other threads. */
kiln_status kiln_host_gemm_int_set_kernel(const char *name);

/* The kernel of bf16/f16 gemms with few rows (host_blas.c: B converted in L1-sized packed
 * panels, A once): "avx512bf16" (bf16 gemms with k >= 32 through AVX512_BF16's vdpbf16ps on
 * pairs of bf16 values, f16 ones as "avx512"), "avx512" (f32 FMAs; host_gemm_half "avx512"
 * picks it where the CPU has both), "avx2" (AVX2 + FMA + F16C without AVX-512F, or
 * host_gemm_half "avx2"; also "avx512" on a CPU without AVX-512F), "base" (the portable copy;
 * runtime options' host_gemm_half "base") or "panels" (off: every bf16/f16 gemm converts whole
 * operand panels to f32 for the library; no AVX2, or host_gemm_half "panels"; the edges set it from
 * KILN_HOST_GEMM_HALF). */
const char *kiln_host_gemm_half_kernel(void);
/* Where f32 gemms run: `g_half`'s kernel name ("avx512": the packed-panel kernel's f32 FMAs,
 * X read in place when its rows run along k; "avx2" only when forced, below) or "library"
 * (the CBLAS library, else the C kernel); *why (optional) says why auto picked it. Auto: the kernel
 * where the CPU has AVX-512F and the library's own kernel for it is narrower (none found, or
 * OpenBLAS on a core type without AVX-512), the library elsewhere. */
const char *kiln_host_gemm_f32_kernel(const char **why);
/* Forces f32 gemms onto the kernel (mode 1), the library (0) or back to auto (-1). For tests
 * and benchmarks; thread-safe. */
void kiln_host_gemm_f32_set_kernel(int mode);
/* Turns the vdpbf16ps kernel for bf16 gemms on (the default) or off (their f32 kernel); returns
 * whether the process has that kernel. For tests and benchmarks comparing the two;
 * thread-safe. */
bool kiln_host_gemm_half_set_bf16_dot(bool on);
/* Turns on (the default) or off the vdpbf16ps kernel's one packing of a j-major op(B) (B^T)
 * for every block of 128 rows; off, each block packs its own. The same sums either way. For
 * tests and benchmarks; thread-safe. */
void kiln_host_gemm_half_set_ypack(bool on);
/* Limits that kernel to gemms of at most `rows` rows (of op(A), or columns of op(B) when
 * op(A) has more than 128 rows and op(B) at most 128 columns); larger ones convert whole
 * panels to f32 for the library. Default (and rows <= 0): no limit. For benchmarks comparing
 * the two paths; thread-safe. */
void kiln_host_gemm_half_set_max_rows(int64_t rows);
/* The most elements of op(A) (or op(B)^T) that kernel converts to f32 at once (default, and
 * elems <= 0: 4 Mi); a one-batch gemm with more runs in passes over k. For tests (small
 * gemms in several passes); thread-safe. */
void kiln_host_gemm_half_set_max_x_elems(int64_t elems);
/* Passes over k that kernel ran for gemms run in several, since the process started (for
 * tests). */
int64_t kiln_host_gemm_half_k_passes(void);
/* Converted gemms (bf16/f16 for the library) whose op(A) does not fit the scratch in one piece
 * but whose f32 C does split k (A and B panels of all rows and columns, C accumulated in f32,
 * one rounding) instead of rows of A (each panel a library call that packs all of B again).
 * On by default; off brings back the row panels (for tests of both); thread-safe. */
void kiln_host_gemm_set_k_panels(bool on);
/* Library gemms of kSmallGemm (2^18) multiply-adds or more split into tiles of C spread over
 * the host pool, each one library call with the library set to one thread while they run (its
 * count restored after), instead of one call per batch on the library's own threads. On by
 * default; off brings back the library's threads (for tests and benchmarks of both);
 * thread-safe, but a gemm running while it is switched may run either way. */
void kiln_host_gemm_set_pool_tiles(bool on);
/* Library tiles run over the pool since the process started (for tests). */
int64_t kiln_host_gemm_tiles_run(void);
/* The CBLAS library in use (a path or soname), or NULL when the C kernel is used. Loads it on
 * the first call: the runtime options' host_blas (the edges' $KILN_HOST_BLAS) names the
 * library to use ("none": none; one that cannot be
 * loaded is logged as a warning and the C kernel is used), else OpenBLAS, BLIS or MKL,
 * whichever is found first (never the reference BLAS).
 * `tried` (may be NULL) receives the libraries tried with their dlerror() text. */
const char *kiln_host_blas_library(const char **tried);

/* The instruction set the gemm epilogue (bias, ReLU, GELU in f32) runs with: "avx2+fma" where
 * the CPU has both, else "base" (x86-64's SSE2 or the build's target); chosen once per
 * process (the runtime options' host_epilogue_isa "base", the edges' KILN_HOST_EPILOGUE_ISA,
 * forces the baseline copy). Thread-safe. */
const char *kiln_host_epilogue_isa(void);
/* A symbol of that library (LAPACK's Fortran entry points, which OpenBLAS and MKL ship), or
 * NULL when there is no library or it lacks the symbol. Thread-safe. */
void *kiln_host_blas_symbol(const char *name);

/* ---- eigh and SVD (LAPACK dsyevd / dgesdd) ---------------------------------------------- */

/* LAPACK's Fortran entry points for them (every argument by address, 32-bit integers). */
typedef void (*kiln_lapack_dsyevd_fn)(const char *jobz, const char *uplo, const int *n, double *a,
                                      const int *lda, double *w, double *work, const int *lwork,
                                      int *iwork, const int *liwork, int *info);
typedef void (*kiln_lapack_dgesdd_fn)(const char *jobz, const int *m, const int *n, double *a,
                                      const int *lda, double *s, double *u, const int *ldu,
                                      double *vt, const int *ldvt, double *work, const int *lwork,
                                      int *iwork, int *info);

/* kiln_jacobi_eigh's contract (base/jacobi_eigh.h: row-major, the `lower` triangle read,
 * eigenvalues ascending, each eigenvector's largest component positive, 0 or 1) computed by
 * LAPACK's dsyevd when the library above has it (100x faster than Jacobi at n = 256), else by
 * the Jacobi code. Results agree with the evaluator's Jacobi ones to rounding, not to the bit
 * (and, for repeated eigenvalues, only up to the choice of basis of the eigenspace). */
int kiln_host_eigh(int64_t n, double *a, bool lower, double *w, double *v);
/* kiln_jacobi_svd's contract, by LAPACK's dgesdd when available (reduced, full or no
 * vectors); the vectors completing a full basis are LAPACK's, not the Jacobi code's. */
int kiln_host_svd(int64_t m, int64_t n, const double *a, double *s, double *u, int64_t ucols,
                  double *vt, int64_t vrows);

/* ---- QR (LAPACK ?geqrf / ?orgqr) ------------------------------------------------------- */

/* Householder QR of `batch` column-major m x n matrices (`a`, consecutive, lda = m) in f32
 * (`f64` false) or f64, in place, with the reflectors' scalars in `tau` (min(m, n) per
 * matrix): LAPACK's ?geqrf from the CBLAS library above when it has one (choice AUTO), else
 * kiln's own unblocked loop (base/householder.h, in f64), which KILN_HOST_BLAS_FALLBACK
 * forces. m, n and m * n must fit LAPACK's 32-bit integers (else INVALID_ARGUMENT);
 * RESOURCE_EXHAUSTED when scratch cannot be allocated. Thread-safe. */
kiln_status kiln_host_geqrf(bool f64, int64_t batch, int64_t m, int64_t n, void *a, void *tau,
                            kiln_host_blas_choice_t choice);
/* Overwrites each m x n matrix of `a` (n <= m; its first k <= n columns holding reflectors
 * as kiln_host_geqrf leaves them, k scalars per matrix in `tau`) with the first n columns of
 * Q: LAPACK's ?orgqr, or the fallback as above. Thread-safe. */
kiln_status kiln_host_orgqr(bool f64, int64_t batch, int64_t m, int64_t n, int64_t k, void *a,
                            const void *tau, kiln_host_blas_choice_t choice);

#endif /* KILN_RUNTIME_HOST_HOST_DEVICE_H_ */
