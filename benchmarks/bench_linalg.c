/* kiln's Jacobi eigh and SVD (base/jacobi_eigh.h: what the evaluator runs for
 * lapack_{s,d}syevd_ffi and gesdd_ffi, and the host when it has no LAPACK) against LAPACK's
 * dsyevd / dgesdd from the library the host gemm loads (OpenBLAS, when installed; what the
 * host runs then, runtime/host/host_lapack.c), on the same seeded f64 matrices in the same
 * run: the median wall time of `--reps` calls for n = 8 .. 256, and Jacobi's over LAPACK's
 * (the baseline). Without a LAPACK library only the Jacobi times print. Single thread on both sides
 * (OpenBLAS's threads are its own: set OPENBLAS_NUM_THREADS=1 for a like-for-like figure).
 * Usage: bench_linalg [--reps 5] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/jacobi_eigh.h"
#include "runtime/host/host_device.h"

static double rnd(unsigned long long *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*x >> 11) / 9007199254740992.0 * 2 - 1;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kiln_clock_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* LAPACK's eigh (vectors) of the n x n symmetric `a`; false on failure. */
static int lapack_eigh(kiln_lapack_dsyevd_fn f, int n, const double *a, double *w) {
  double *c = malloc(sizeof(double) * (size_t)n * (size_t)n), q;
  memcpy(c, a, sizeof(double) * (size_t)n * (size_t)n);
  int lwork = -1, liwork = -1, iq, info;
  f("V", "L", &n, c, &n, w, &q, &lwork, &iq, &liwork, &info);
  lwork = (int)q;
  liwork = iq;
  double *work = malloc(sizeof(double) * (size_t)lwork);
  int *iwork = malloc(sizeof(int) * (size_t)liwork);
  f("V", "L", &n, c, &n, w, work, &lwork, iwork, &liwork, &info);
  free(work);
  free(iwork);
  free(c);
  return info;
}

static int lapack_svd(kiln_lapack_dgesdd_fn f, int n, const double *a, double *s) {
  size_t nn = (size_t)n * (size_t)n;
  double *c = malloc(sizeof(double) * nn * 3), *u = c + nn, *vt = u + nn, q;
  memcpy(c, a, sizeof(double) * nn);
  int lwork = -1, info, *iwork = malloc(sizeof(int) * 8 * (size_t)n);
  f("A", &n, &n, c, &n, s, u, &n, vt, &n, &q, &lwork, iwork, &info);
  lwork = (int)q;
  double *work = malloc(sizeof(double) * (size_t)lwork);
  f("A", &n, &n, c, &n, s, u, &n, vt, &n, work, &lwork, iwork, &info);
  free(work);
  free(iwork);
  free(c);
  return info;
}

int main(int argc, char **argv) {
  int reps = 5;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
  if (reps < 1 || reps > 1000) reps = 5;
  kiln_lapack_dsyevd_fn syevd = (kiln_lapack_dsyevd_fn)kiln_host_blas_symbol("dsyevd_");
  kiln_lapack_dgesdd_fn gesdd = (kiln_lapack_dgesdd_fn)kiln_host_blas_symbol("dgesdd_");
  const char *lib = kiln_host_blas_library(NULL);
  printf("LAPACK baseline: %s\n", syevd && gesdd ? (lib ? lib : "?") : "none loaded");
  printf("%-6s %5s %12s %12s %8s\n", "op", "n", "Jacobi ms", "LAPACK ms", "ratio");
  static const int sizes[] = {8, 32, 64, 128, 256};
  for (int op = 0; op < 2; op++) {
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      int n = sizes[si];
      size_t nn = (size_t)n * (size_t)n;
      double *a = malloc(sizeof(double) * nn * 4), *work = a + nn, *v = work + nn, *u = v + nn;
      double *w = malloc(sizeof(double) * (size_t)n);
      unsigned long long seed = 11 + (unsigned long long)n;
      for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) a[i * n + j] = a[j * n + i] = rnd(&seed);
      double *tk = malloc(sizeof(double) * (size_t)reps * 2), *tl = tk + reps;
      int bad = 0;
      for (int r = 0; r < reps; r++) {
        double t0 = kiln_clock_ms();
        if (op == 0) {
          memcpy(work, a, sizeof(double) * nn);
          bad |= kiln_jacobi_eigh(n, work, true, w, v);
        } else {
          bad |= kiln_jacobi_svd(n, n, a, w, u, n, v, n);
        }
        tk[r] = kiln_clock_ms() - t0;
        t0 = kiln_clock_ms();
        if (op == 0 && syevd) bad |= lapack_eigh(syevd, n, a, w) != 0;
        if (op == 1 && gesdd) bad |= lapack_svd(gesdd, n, a, w) != 0;
        tl[r] = kiln_clock_ms() - t0;
      }
      double mk = median(tk, reps), ml = median(tl, reps);
      bool base = op == 0 ? syevd != NULL : gesdd != NULL;
      if (base)
        printf("%-6s %5d %12.3f %12.3f %7.1fx%s\n", op ? "svd" : "eigh", n, mk, ml, mk / ml,
               bad ? "  (a call failed)" : "");
      else
        printf("%-6s %5d %12.3f %12s %8s%s\n", op ? "svd" : "eigh", n, mk, "-", "-",
               bad ? "  (a call failed)" : "");
      free(tk);
      free(a);
      free(w);
    }
  }
  return 0;
}
