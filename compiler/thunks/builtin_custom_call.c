/* Custom calls the host runtime implements itself (custom_call_emitter.h): XLA:CPU's
 * `__onednn$layernorm` and `GetRngSeed`, jaxlib's `cusolver_geqrf` / `cusolver_orgqr` and
 * `lapack_{s,d}geqrf_ffi` / `lapack_{s,d}orgqr_ffi` (LAPACK through runtime/host/host_lapack.c),
 * `lapack_{s,d}syevd_ffi` and `lapack_{s,d}gesdd_ffi` (LAPACK's dsyevd / dgesdd, else the Jacobi
 * methods of base/jacobi_eigh.h), their complex forms `lapack_{c,z}{geqrf,ungqr,heevd,gesdd}_ffi`
 * (always base/zlinalg.h, as the evaluator), `lapack_{s,d,c,z}geev_ffi` and
 * `lapack_{c,z}gees_ffi`, `lapack_?gehrd_ffi`, `lapack_{s,d}sytrd_ffi` / `lapack_{c,z}hetrd_ffi`
 * (base/zlinalg.h),
 * `lapack_{s,d}gtsv_ffi` (base/gtsv.h). Each is one custom-call
 * thunk whose context holds the physical views (dims and element strides from the layouts) of its
 * operand and result leaves; the thunk waits for the stream, then computes on the host buffers
 * directly. The evaluator computes the same targets in compiler/eval/eval_host_targets.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/byte_io.h"
#include "base/cmplx.h"
#include "base/gtsv.h"
#include "base/jacobi_eigh.h"
#include "base/zlinalg.h"
#include "compiler/eval/eval.h"
#include "compiler/thunks/custom_call_emitter.h"
#include "runtime/host/host_device.h"

enum { kMaxRank = 16, kMaxLeaves = 8 };

typedef enum {
  LAYER_NORM,
  GEQRF,
  ORGQR,
  RNG_SEED,
  SYEVD,
  GESDD,
  GTSV,
  GEEV,
  GEES,
  GEHRD,
  SYTRD
} builtin_kind_t;

/* A leaf buffer: logical dims and the element stride of each (from its layout), and its
 * element size in bytes. */
typedef struct view {
  int rank;
  int64_t dims[kMaxRank], strides[kMaxRank], bytes, esize;
} view_t;

typedef struct builtin_call {
  builtin_kind_t kind;
  bool f64, lower, vectors; /* syevd: the triangle read, eigenvectors wanted (geev: right) */
  bool left;                /* geev: left eigenvectors wanted */
  bool cplx;                /* complex matrices (f64: of f64 parts) */
  float epsilon;
  uint64_t seed;
  int64_t batch, m, n, k;
  int64_t ucols, vrows; /* gesdd: u's columns and vt's rows; gehrd: k and ucols are lo, hi */
  int nin, nout;
  view_t in[kMaxLeaves], out[kMaxLeaves];
} builtin_call_t;

static bool view_of(const kiln_shape_t *s, view_t *v) {
  if (!kiln_shape_is_array(s) || s->rank > kMaxRank) return false;
  v->rank = s->rank;
  v->bytes = kiln_shape_byte_size(s);
  v->esize = kiln_elem_type_bits(s->type) / 8;
  if (s->rank) memcpy(v->dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
  int64_t stride = 1;
  for (int p = 0; p < s->rank; p++) {
    /* minor_to_major lists dimensions from the fastest; no layout is row-major. */
    int d = s->has_layout ? (int)s->layout.minor_to_major[p] : s->rank - 1 - p;
    if (d < 0 || d >= s->rank) return false;
    v->strides[d] = stride;
    stride *= s->dims[d];
  }
  return true;
}

/* The element offset of (row-major index b over all but the last `tail` dims, then idx). */
static int64_t at(const view_t *v, int64_t b, int tail, const int64_t *idx) {
  int64_t off = 0;
  for (int d = v->rank - tail - 1; d >= 0; d--) {
    off += (b % v->dims[d]) * v->strides[d];
    b /= v->dims[d];
  }
  for (int t = 0; t < tail; t++) off += idx[t] * v->strides[v->rank - tail + t];
  return off;
}

static double get(bool f64, const void *p, int64_t i) {
  return f64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

static void put(bool f64, void *p, int64_t i, double x) {
  if (f64)
    ((double *)p)[i] = x;
  else
    ((float *)p)[i] = (float)x;
}

/* Complex element i (a pair of f32 or f64 parts). */
static double complex zget(bool f64, const void *p, int64_t i) {
  return CMPLX(get(f64, p, 2 * i), get(f64, p, 2 * i + 1));
}

static void zput(bool f64, void *p, int64_t i, double complex x) {
  put(f64, p, 2 * i, creal(x));
  put(f64, p, 2 * i + 1, cimag(x));
}

static void *host(kiln_devptr_t p) {
  return (void *)(uintptr_t)p;
}

static void layer_norm(const builtin_call_t *c, const kiln_devptr_t *ops, kiln_devptr_t res) {
  const view_t *x = &c->in[0], *y = &c->out[0];
  int64_t cols = x->dims[x->rank - 1], rows = cols ? (x->bytes / (c->f64 ? 8 : 4)) / cols : 0;
  const void *src = host(ops[0]), *scale = host(ops[1]), *shift = host(ops[2]);
  void *dst = host(res);
  int64_t ss = c->in[1].strides[0], hs = c->in[2].strides[0];
  for (int64_t r = 0; r < rows; r++) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; j++) mean += get(c->f64, src, at(x, r, 1, &j));
    mean /= (double)cols;
    for (int64_t j = 0; j < cols; j++) {
      double d = get(c->f64, src, at(x, r, 1, &j)) - mean;
      var += d * d;
    }
    double inv = 1 / sqrt(var / (double)cols + c->epsilon);
    for (int64_t j = 0; j < cols; j++)
      put(c->f64, dst, at(y, r, 1, &j),
          (get(c->f64, src, at(x, r, 1, &j)) - mean) * inv * get(c->f64, scale, j * ss) +
              get(c->f64, shift, j * hs));
  }
}

/* Copies the batch of [m, n] matrices (tail 2) or [k] vectors (tail 1) between a view and
 * column-major scratch (`to_scratch`: view -> scratch). */
static void pack(const builtin_call_t *c, const view_t *v, int tail, void *buf, void *scratch,
                 bool to_scratch) {
  int64_t rows = tail == 2 ? c->m : 1, cols = tail == 2 ? c->n : c->k;
  for (int64_t b = 0; b < c->batch; b++)
    for (int64_t j = 0; j < cols; j++)
      for (int64_t i = 0; i < rows; i++) {
        int64_t idx[2] = {i, j}, s = (b * cols + j) * rows + i;
        int64_t o = at(v, b, tail, tail == 2 ? idx : idx + 1);
        if (to_scratch)
          put(c->f64, scratch, s, get(c->f64, buf, o));
        else
          put(c->f64, buf, o, get(c->f64, scratch, s));
      }
}

static kiln_status qr(const builtin_call_t *c, const kiln_devptr_t *ops, const kiln_devptr_t *res) {
  size_t es = c->f64 ? 8 : 4;
  void *a = kiln_try_malloc(es * (size_t)(c->batch * (c->m * c->n + c->k) + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host QR: out of memory");
  void *tau = (char *)a + es * (size_t)(c->batch * c->m * c->n);
  pack(c, &c->in[0], 2, host(ops[0]), a, true);
  kiln_status s;
  if (c->kind == GEQRF) {
    s = kiln_host_geqrf(c->f64, c->batch, c->m, c->n, a, tau, KILN_HOST_BLAS_AUTO);
  } else {
    pack(c, &c->in[1], 1, host(ops[1]), tau, true);
    s = kiln_host_orgqr(c->f64, c->batch, c->m, c->n, c->k, a, tau, KILN_HOST_BLAS_AUTO);
  }
  if (!s) {
    /* info and workspaces are zeros; the matrix (and geqrf's tau) are written over them. */
    for (int r = 0; r < c->nout; r++) memset(host(res[r]), 0, (size_t)c->out[r].bytes);
    pack(c, &c->out[0], 2, host(res[0]), a, false);
    if (c->kind == GEQRF) pack(c, &c->out[1], 1, host(res[1]), tau, false);
  }
  kiln_free(a);
  return s;
}

/* An info result of view `v` for batch b (s32 or s64). */
static void put_info(const view_t *v, void *p, int64_t b, int bad) {
  int64_t off = at(v, b, 0, NULL);
  if (v->esize == 8)
    ((int64_t *)p)[off] = bad;
  else
    ((int32_t *)p)[off] = bad;
}

/* Matrix (tail 2: rows x cols) or vector (tail 1: one row of cols) number b of view v at p,
 * to row-major doubles `m` (load) or from them (store; zeros when m is NULL). */
static void load(const builtin_call_t *c, const view_t *v, kiln_devptr_t p, int64_t b, int tail,
                 int64_t rows, int64_t cols, double *m) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t idx[2] = {i, j};
      m[i * cols + j] = get(c->f64, host(p), at(v, b, tail, idx + 2 - tail));
    }
}

static void store(const builtin_call_t *c, const view_t *v, kiln_devptr_t p, int64_t b, int tail,
                  int64_t rows, int64_t cols, const double *m) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t idx[2] = {i, j};
      put(c->f64, host(p), at(v, b, tail, idx + 2 - tail), m ? m[i * cols + j] : 0.0);
    }
}

/* load and store for complex views and double complex matrices. */
static void zload(const builtin_call_t *c, const view_t *v, kiln_devptr_t p, int64_t b, int tail,
                  int64_t rows, int64_t cols, double complex *m) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t idx[2] = {i, j};
      m[i * cols + j] = zget(c->f64, host(p), at(v, b, tail, idx + 2 - tail));
    }
}

static void zstore(const builtin_call_t *c, const view_t *v, kiln_devptr_t p, int64_t b, int tail,
                   int64_t rows, int64_t cols, const double complex *m) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t idx[2] = {i, j};
      zput(c->f64, host(p), at(v, b, tail, idx + 2 - tail), m ? m[i * cols + j] : 0.0);
    }
}

/* load / store in the call's element kind: double complex for complex calls, else double. */
static void mload(const builtin_call_t *c, const view_t *v, kiln_devptr_t p, int64_t b, int tail,
                  int64_t rows, int64_t cols, void *m) {
  if (c->cplx)
    zload(c, v, p, b, tail, rows, cols, m);
  else
    load(c, v, p, b, tail, rows, cols, m);
}

static void mstore(const builtin_call_t *c, const view_t *v, kiln_devptr_t p, int64_t b, int tail,
                   int64_t rows, int64_t cols, const void *m) {
  if (c->cplx)
    zstore(c, v, p, b, tail, rows, cols, m);
  else
    store(c, v, p, b, tail, rows, cols, m);
}

/* The complex QR (geqrf / ungqr) through base/zlinalg.h, as the evaluator computes it. */
static kiln_status zqr(const builtin_call_t *c, const kiln_devptr_t *ops,
                       const kiln_devptr_t *res) {
  int64_t m = c->m, n = c->n, k = c->k;
  double complex *a = kiln_try_malloc(sizeof(double complex) * (size_t)(2 * m * n + k + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host QR: out of memory");
  double complex *cm = a + m * n, *tau = cm + m * n;
  for (int r = 0; r < c->nout; r++) memset(host(res[r]), 0, (size_t)c->out[r].bytes);
  for (int64_t b = 0; b < c->batch; b++) {
    zload(c, &c->in[0], ops[0], b, 2, m, n, a);
    for (int64_t i = 0; i < m; i++) /* column-major for the Householder loops */
      for (int64_t j = 0; j < n; j++) cm[i + j * m] = a[i * n + j];
    if (c->kind == GEQRF) {
      kiln_householder_zgeqrf(m, n, cm, m, tau);
      zstore(c, &c->out[1], res[1], b, 1, 1, k, tau);
    } else {
      zload(c, &c->in[1], ops[1], b, 1, 1, k, tau);
      kiln_householder_zungqr(m, n, k, cm, m, tau);
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) a[i * n + j] = cm[i + j * m];
    zstore(c, &c->out[0], res[0], b, 2, m, n, a);
  }
  kiln_free(a);
  return NULL;
}

/* geev through base/zlinalg.h, as the evaluator computes it: per matrix the eigenvalues (wr
 * and wi for a real matrix), the vectors asked for (zeros otherwise) and info. */
static kiln_status geev(const builtin_call_t *c, const kiln_devptr_t *ops,
                        const kiln_devptr_t *res) {
  int64_t n = c->n;
  size_t nn = (size_t)(n * n);
  double complex *a = kiln_try_malloc(sizeof(double complex) * (3 * nn + (size_t)n + 1) +
                                      sizeof(double) * (nn + 2 * (size_t)n + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host eig: out of memory");
  double complex *vl = a + nn, *vr = vl + nn, *w = vr + nn;
  double *ra = (double *)(w + n), *wr = ra + nn, *wi = wr + n;
  int values = c->cplx ? 1 : 2;
  kiln_status st = NULL;
  for (int64_t b = 0; b < c->batch; b++) {
    int bad;
    if (c->cplx) {
      zload(c, &c->in[0], ops[0], b, 2, n, n, a);
      bad = kiln_zgeev(n, a, w, c->left ? vl : NULL, c->vectors ? vr : NULL);
    } else {
      load(c, &c->in[0], ops[0], b, 2, n, n, ra);
      bad = kiln_real_geev(n, ra, wr, wi, c->left ? vl : NULL, c->vectors ? vr : NULL);
    }
    if (bad < 0) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host eig: out of memory");
      break;
    }
    if (c->cplx) {
      zstore(c, &c->out[0], res[0], b, 1, 1, n, w);
    } else {
      store(c, &c->out[0], res[0], b, 1, 1, n, wr);
      store(c, &c->out[1], res[1], b, 1, 1, n, wi);
    }
    zstore(c, &c->out[values], res[values], b, 2, n, n, c->left ? vl : NULL);
    zstore(c, &c->out[values + 1], res[values + 1], b, 2, n, n, c->vectors ? vr : NULL);
    put_info(&c->out[values + 2], host(res[values + 2]), b, bad);
  }
  kiln_free(a);
  return st;
}

/* gees through base/zlinalg.h, as the evaluator computes it: per matrix T, the Schur vectors
 * (zeros without mode 'V'), the eigenvalues (w, or wr and wi), sdim 0 and info. */
static kiln_status gees(const builtin_call_t *c, const kiln_devptr_t *ops,
                        const kiln_devptr_t *res) {
  int64_t n = c->n;
  size_t nn = (size_t)(n * n);
  double complex *a = kiln_try_malloc(sizeof(double complex) * (3 * nn + 2 * (size_t)n + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host schur: out of memory");
  double complex *t = a + nn, *z = t + nn, *w = z + nn;
  double *ra = (double *)a, *rt = ra + nn, *rz = rt + nn, *wr = rz + nn, *wi = wr + n;
  int values = c->cplx ? 1 : 2;
  kiln_status st = NULL;
  for (int64_t b = 0; b < c->batch; b++) {
    int bad;
    if (c->cplx) {
      zload(c, &c->in[0], ops[0], b, 2, n, n, a);
      bad = kiln_zgees(n, a, t, c->vectors ? z : NULL, w);
    } else {
      load(c, &c->in[0], ops[0], b, 2, n, n, ra);
      bad = kiln_real_gees(n, ra, rt, c->vectors ? rz : NULL, wr, wi);
    }
    if (bad < 0) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host schur: out of memory");
      break;
    }
    if (c->cplx) {
      zstore(c, &c->out[0], res[0], b, 2, n, n, t);
      zstore(c, &c->out[1], res[1], b, 2, n, n, c->vectors ? z : NULL);
      zstore(c, &c->out[2], res[2], b, 1, 1, n, w);
    } else {
      store(c, &c->out[0], res[0], b, 2, n, n, rt);
      store(c, &c->out[1], res[1], b, 2, n, n, c->vectors ? rz : NULL);
      store(c, &c->out[2], res[2], b, 1, 1, n, wr);
      store(c, &c->out[3], res[3], b, 1, 1, n, wi);
    }
    put_info(&c->out[2 + values], host(res[2 + values]), b, 0);
    put_info(&c->out[3 + values], host(res[3 + values]), b, bad);
  }
  kiln_free(a);
  return st;
}

/* gehrd and sytrd through base/zlinalg.h in double complex, as the evaluator computes them:
 * the reduced matrix with its reflectors, tau, sytrd's d and e, info 0. */
static kiln_status reduction(const builtin_call_t *c, const kiln_devptr_t *ops,
                             const kiln_devptr_t *res) {
  int64_t n = c->n;
  size_t nn = (size_t)(n * n);
  bool sytrd = c->kind == SYTRD;
  double complex *a = kiln_try_malloc(sizeof(double complex) * (3 * nn + 2 * (size_t)n + 1) +
                                      sizeof(double) * (2 * (size_t)n + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host reduction: out of memory");
  double complex *cm = a + nn, *tau = cm + nn, *scratch = tau + n;
  double *d = (double *)(scratch + nn + n), *e = d + n;
  int taus = sytrd ? 3 : 1;
  for (int64_t b = 0; b < c->batch; b++) {
    if (c->cplx) {
      zload(c, &c->in[0], ops[0], b, 2, n, n, a);
    } else {
      double *ra = (double *)cm; /* the real rows, widened below */
      load(c, &c->in[0], ops[0], b, 2, n, n, ra);
      for (size_t i = nn; i-- > 0;) a[i] = ra[i];
    }
    for (int64_t i = 0; i < n; i++) /* column-major */
      for (int64_t j = 0; j < n; j++) cm[i + j * n] = a[i * n + j];
    if (sytrd)
      kiln_householder_zhetrd(n, c->lower, cm, d, e, tau, scratch);
    else
      kiln_householder_zgehrd(n, c->k, c->ucols, cm, tau, scratch);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) a[i * n + j] = cm[i + j * n];
    int64_t m1 = n > 0 ? n - 1 : 0;
    if (c->cplx) {
      zstore(c, &c->out[0], res[0], b, 2, n, n, a);
      zstore(c, &c->out[taus], res[taus], b, 1, 1, m1, tau);
    } else {
      double *ra = (double *)cm;
      for (size_t i = 0; i < nn; i++) ra[i] = creal(a[i]);
      store(c, &c->out[0], res[0], b, 2, n, n, ra);
      for (int64_t i = 0; i < m1; i++) ra[i] = creal(tau[i]);
      store(c, &c->out[taus], res[taus], b, 1, 1, m1, ra);
    }
    if (sytrd) {
      store(c, &c->out[1], res[1], b, 1, 1, n, d);
      store(c, &c->out[2], res[2], b, 1, 1, m1, e);
    }
    put_info(&c->out[sytrd ? 4 : 2], host(res[sytrd ? 4 : 2]), b, 0);
  }
  kiln_free(a);
  return NULL;
}

/* syevd / heevd, as the evaluator computes them: per matrix eigenvectors (zeros without mode
 * 'V'), eigenvalues ascending, info 0 or 1. Real matrices through kiln_host_eigh (LAPACK's dsyevd
 * when loaded, else base/jacobi_eigh.h), complex ones through base/zlinalg.h. */
static kiln_status eigh(const builtin_call_t *c, const kiln_devptr_t *ops,
                        const kiln_devptr_t *res) {
  int64_t n = c->n;
  size_t es = c->cplx ? sizeof(double complex) : sizeof(double), nn = (size_t)(n * n);
  char *a = kiln_try_malloc(2 * es * nn + sizeof(double) * (size_t)(n + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host eigh: out of memory");
  void *v = a + es * nn;
  double *w = (double *)(a + 2 * es * nn);
  for (int64_t b = 0; b < c->batch; b++) {
    mload(c, &c->in[0], ops[0], b, 2, n, n, a);
    int bad = c->cplx
                  ? kiln_jacobi_zheev(n, (double complex *)a, c->lower, w,
                                      c->vectors ? (double complex *)v : NULL)
                  : kiln_host_eigh(n, (double *)a, c->lower, w, c->vectors ? (double *)v : NULL);
    mstore(c, &c->out[0], res[0], b, 2, n, n, c->vectors ? v : NULL);
    store(c, &c->out[1], res[1], b, 1, 1, n, w);
    put_info(&c->out[2], host(res[2]), b, bad);
  }
  kiln_free(a);
  return NULL;
}

/* gesdd / gesvd, as the evaluator computes them: a passed through, then s, u and vt (zeros
 * without vectors) and info per matrix. Real matrices through kiln_host_svd (LAPACK's dgesdd
 * when loaded, else base/jacobi_eigh.h), complex ones through base/zlinalg.h. */
static kiln_status svd(const builtin_call_t *c, const kiln_devptr_t *ops,
                       const kiln_devptr_t *res) {
  int64_t m = c->m, n = c->n, k = m < n ? m : n, uc = c->ucols, vr = c->vrows;
  size_t es = c->cplx ? sizeof(double complex) : sizeof(double);
  char *a =
      kiln_try_malloc(es * (size_t)(m * n + m * uc + vr * n) + sizeof(double) * (size_t)(k + 1));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host SVD: out of memory");
  char *u = a + es * (size_t)(m * n), *vt = u + es * (size_t)(m * uc);
  double *sv = (double *)(vt + es * (size_t)(vr * n));
  kiln_status st = NULL;
  for (int64_t b = 0; b < c->batch; b++) {
    mload(c, &c->in[0], ops[0], b, 2, m, n, a);
    mstore(c, &c->out[0], res[0], b, 2, m, n, a);
    void *uu = c->vectors ? u : NULL, *vv = c->vectors ? vt : NULL;
    int bad = c->cplx ? kiln_jacobi_zsvd(m, n, (double complex *)a, sv, uu, uc, vv, vr)
                      : kiln_host_svd(m, n, (double *)a, sv, uu, uc, vv, vr);
    if (bad < 0) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host SVD: out of memory");
      break;
    }
    store(c, &c->out[1], res[1], b, 1, 1, k, sv);
    mstore(c, &c->out[2], res[2], b, 2, m, uc, uu);
    mstore(c, &c->out[3], res[3], b, 2, vr, n, vv);
    put_info(&c->out[4], host(res[4]), b, bad);
  }
  kiln_free(a);
  return st;
}

/* gtsv's complex form through base/zlinalg.h's kiln_zgtsv. */
static kiln_status zgtsv(const builtin_call_t *c, const kiln_devptr_t *ops,
                         const kiln_devptr_t *res) {
  int64_t n = c->n, k = c->k;
  double complex *buf = kiln_try_malloc(sizeof(double complex) * (size_t)(3 * n + n * k + 1));
  if (!buf) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host gtsv: out of memory");
  double complex *diags[3] = {buf, buf + n, buf + 2 * n}, *x = buf + 3 * n;
  for (int64_t b = 0; b < c->batch; b++) {
    for (int d = 0; d < 3; d++) {
      zload(c, &c->in[d], ops[d], b, 1, 1, n, diags[d]);
      zstore(c, &c->out[d], res[d], b, 1, 1, n, diags[d]);
    }
    if (n > 0) { /* the subdiagonal from dl[1], as gtsv's */
      memmove(diags[0], diags[0] + 1, sizeof(double complex) * (size_t)(n - 1));
      diags[0][n - 1] = 0;
    }
    zload(c, &c->in[3], ops[3], b, 2, n, k, x);
    int64_t bad = kiln_zgtsv(n, k, diags[0], diags[1], diags[2], x);
    zstore(c, &c->out[3], res[3], b, 2, n, k, x);
    put_info(&c->out[4], host(res[4]), b, (int)(bad > 0x7fffffff ? 0x7fffffff : bad));
  }
  kiln_free(buf);
  return NULL;
}

/* gtsv through base/gtsv.h, as the evaluator computes it: the diagonals passed through, then x
 * and info per system (k right-hand sides). */
static kiln_status gtsv(const builtin_call_t *c, const kiln_devptr_t *ops,
                        const kiln_devptr_t *res) {
  if (c->cplx) return zgtsv(c, ops, res);
  int64_t n = c->n, k = c->k;
  double *buf = kiln_try_malloc(sizeof(double) * (size_t)(3 * n + n * k + 1));
  if (!buf) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host gtsv: out of memory");
  double *diags[3] = {buf, buf + n, buf + 2 * n}, *x = buf + 3 * n;
  for (int64_t b = 0; b < c->batch; b++) {
    for (int d = 0; d < 3; d++) {
      load(c, &c->in[d], ops[d], b, 1, 1, n, diags[d]);
      store(c, &c->out[d], res[d], b, 1, 1, n, diags[d]);
    }
    /* dl[i + 1] is A[i + 1][i]: the subdiagonal base/gtsv.h takes starts one on */
    if (n > 0) {
      memmove(diags[0], diags[0] + 1, sizeof(double) * (size_t)(n - 1));
      diags[0][n - 1] = 0;
    }
    load(c, &c->in[3], ops[3], b, 2, n, k, x);
    int64_t bad = kiln_gtsv(n, k, diags[0], diags[1], diags[2], x);
    store(c, &c->out[3], res[3], b, 2, n, k, x);
    put_info(&c->out[4], host(res[4]), b, (int)(bad > 0x7fffffff ? 0x7fffffff : bad));
  }
  kiln_free(buf);
  return NULL;
}

static kiln_status builtin_run(void *ctx, kiln_stream_t *stream, const kiln_devptr_t *operands,
                               int num_operands, const kiln_devptr_t *results, int num_results) {
  const builtin_call_t *c = ctx;
  if (num_operands != c->nin || num_results != c->nout)
    return KILN_ERR_INTERNAL("host custom call: %d operands and %d results, expected %d and %d",
                             num_operands, num_results, c->nin, c->nout);
  /* The operands come from earlier work on the stream; the results are read after. */
  KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_synchronize(stream));
  switch (c->kind) {
    case LAYER_NORM:
      layer_norm(c, operands, results[0]);
      return NULL;
    case RNG_SEED:
      memcpy(host(results[0]), &c->seed, sizeof c->seed);
      return NULL;
    case SYEVD:
      return eigh(c, operands, results);
    case GESDD:
      return svd(c, operands, results);
    case GTSV:
      return gtsv(c, operands, results);
    case GEEV:
      return geev(c, operands, results);
    case GEES:
      return gees(c, operands, results);
    case GEHRD:
    case SYTRD:
      return reduction(c, operands, results);
    default:
      return c->cplx ? zqr(c, operands, results) : qr(c, operands, results);
  }
}

/* The thunk running `c` (copied, owned by `d`), with its recipe. */
static kiln_thunk_t *make_thunk(const builtin_call_t *c, kiln_executable_desc_t *d,
                                const char *name, const char *target, const kiln_slice_t *ins,
                                const kiln_slice_t *outs) {
  builtin_call_t *owned = kiln_executable_desc_own(d, kiln_malloc(sizeof *c));
  memcpy(owned, c, sizeof *c);
  kiln_thunk_t *t = kiln_thunk_custom_call_create(name, target, builtin_run, owned, ins, c->nin,
                                                  outs, c->nout, false);
  kiln_byte_writer_t w = {0};
  kiln_bw_u8(&w, KILN_RECIPE_BUILTIN);
  kiln_bw_u32(&w, (uint32_t)c->kind);
  kiln_bw_u8(&w, (uint8_t)(c->f64 | c->lower << 1 | c->vectors << 2 | c->cplx << 3 | c->left << 4));
  uint32_t eps;
  memcpy(&eps, &c->epsilon, sizeof eps);
  kiln_bw_u32(&w, eps);
  kiln_bw_u64(&w, c->seed);
  kiln_bw_u64(&w, (uint64_t)c->batch);
  kiln_bw_u64(&w, (uint64_t)c->m);
  kiln_bw_u64(&w, (uint64_t)c->n);
  kiln_bw_u64(&w, (uint64_t)c->k);
  kiln_bw_u64(&w, (uint64_t)c->ucols);
  kiln_bw_u64(&w, (uint64_t)c->vrows);
  kiln_bw_u32(&w, (uint32_t)c->nin);
  kiln_bw_u32(&w, (uint32_t)c->nout);
  for (int v = 0; v < c->nin + c->nout; v++) {
    const view_t *x = v < c->nin ? &c->in[v] : &c->out[v - c->nin];
    kiln_bw_u32(&w, (uint32_t)x->rank);
    kiln_bw_u64(&w, (uint64_t)x->bytes);
    kiln_bw_u8(&w, (uint8_t)x->esize);
    for (int k = 0; k < x->rank; k++) {
      kiln_bw_u64(&w, (uint64_t)x->dims[k]);
      kiln_bw_u64(&w, (uint64_t)x->strides[k]);
    }
  }
  kiln_thunk_custom_call_set_recipe(t, w.b.data, w.b.len);
  kiln_strbuf_free(&w.b);
  return t;
}

/* Fills the views of `v`'s leaves and their slices; false when one is not an array or there
 * are more than kMaxLeaves in all. */
static bool add_views(const kiln_hlo_instruction_t *v, const kiln_buffer_assignment_t *ba,
                      view_t *views, int *nviews, kiln_slice_t *slices) {
  int n = kiln_shape_num_leaves(v->shape);
  for (int l = 0; l < n; l++) {
    kiln_buffer_slice_t bs;
    if (*nviews >= kMaxLeaves || !view_of(kiln_shape_leaf(v->shape, l, NULL), &views[*nviews]) ||
        !kiln_buffer_assignment_slice_at(ba, v, l, &bs) || bs.allocation < 0)
      return false;
    slices[(*nviews)++] = kiln_slice_make(bs.allocation, bs.offset, bs.size);
  }
  return true;
}

bool kiln_builtin_custom_call_known(const char *target) {
  bool orgqr;
  return target && (!strcmp(target, "__onednn$layernorm") || !strcmp(target, "GetRngSeed") ||
                    kiln_eval_is_qr_target(target, &orgqr) || kiln_eval_is_eigh_target(target) ||
                    kiln_eval_is_svd_target(target) || kiln_eval_is_gtsv_target(target) ||
                    kiln_eval_is_geev_target(target) || kiln_eval_is_gees_target(target) ||
                    kiln_eval_is_gehrd_target(target) || kiln_eval_is_sytrd_target(target));
}

kiln_status kiln_builtin_custom_call_emit(const kiln_hlo_instruction_t *in,
                                          const kiln_buffer_assignment_t *ba, uint64_t rng_seed,
                                          kiln_executable_desc_t *d, kiln_thunk_seq_t *seq) {
  const char *t = in->custom_call_target ? in->custom_call_target : "";
  builtin_call_t c;
  memset(&c, 0, sizeof c);
  const char *why = "unsupported operands or results";
  bool ok = false, orgqr;
  if (!strcmp(t, "__onednn$layernorm")) {
    c.kind = LAYER_NORM;
    ok = kiln_eval_layer_norm_config(in, &c.epsilon, &why);
  } else if (!strcmp(t, "GetRngSeed")) {
    c.kind = RNG_SEED;
    c.seed = rng_seed;
    ok = in->num_operands == 0 && kiln_shape_is_array(in->shape) && in->shape->rank == 0 &&
         in->shape->type == KILN_U64;
    why = "kiln takes no operands and a u64[] result";
  } else if (kiln_eval_is_qr_target(t, &orgqr)) {
    c.kind = orgqr ? ORGQR : GEQRF;
    ok = kiln_eval_qr_shapes(in, c.kind == ORGQR, &c.batch, &c.m, &c.n, &c.k);
    why = c.kind == GEQRF ? "kiln takes f32/f64/c64/c128 [..., m, n] matrices"
                          : "kiln takes f32/f64/c64/c128 [..., m, n] matrices with k <= n <= m";
  } else if (kiln_eval_is_eigh_target(t)) {
    c.kind = SYEVD;
    ok = kiln_eval_eigh_config(in, &c.lower, &c.vectors, &c.batch, &c.n);
    why = "kiln takes f32/f64/c64/c128 [..., n, n] matrices and mode 'V' or 'N', uplo 'L' or 'U'";
  } else if (kiln_eval_is_svd_target(t)) {
    c.kind = GESDD;
    ok = kiln_eval_svd_config(in, &c.vectors, &c.batch, &c.m, &c.n, &c.ucols, &c.vrows);
    why = "kiln takes f32/f64/c64/c128 [..., m, n] matrices and mode 'A', 'S' or 'N'";
  } else if (kiln_eval_is_gtsv_target(t)) {
    c.kind = GTSV;
    ok = kiln_eval_gtsv_config(in, &c.batch, &c.n, &c.k);
    why = "kiln takes f32/f64/c64/c128 diagonals [..., n] and right-hand sides [..., n, k]";
  } else if (kiln_eval_is_geev_target(t)) {
    c.kind = GEEV;
    ok = kiln_eval_geev_config(in, &c.left, &c.vectors, &c.batch, &c.n);
    why =
        "kiln takes f32/f64/c64/c128 [..., n, n] matrices and compute_left / compute_right "
        "'V' or 'N'";
  } else if (kiln_eval_is_gees_target(t)) {
    c.kind = GEES;
    ok = kiln_eval_gees_config(in, &c.vectors, &c.batch, &c.n);
    why = KILN_EVAL_GEES_FORMS;
  } else if (kiln_eval_is_gehrd_target(t)) {
    c.kind = GEHRD;
    ok = kiln_eval_gehrd_config(in, &c.k, &c.ucols, &c.batch, &c.n);
    why = "kiln takes f32/f64/c64/c128 [..., n, n] matrices and 1 <= low <= high <= n";
  } else if (kiln_eval_is_sytrd_target(t)) {
    c.kind = SYTRD;
    ok = kiln_eval_sytrd_config(in, &c.lower, &c.batch, &c.n);
    why = "kiln takes f32/f64/c64/c128 [..., n, n] matrices and uplo 'L' or 'U'";
  } else {
    return KILN_ERR_INTERNAL("custom call %s: %s is not a built-in host target", in->name, t);
  }
  kiln_slice_t ins[kMaxLeaves], outs[kMaxLeaves];
  for (int i = 0; ok && i < in->num_operands; i++)
    ok = add_views(in->operands[i], ba, c.in, &c.nin, ins);
  if (ok) ok = add_views(in, ba, c.out, &c.nout, outs);
  if (!ok)
    return kiln_status_make(KILN_UNIMPLEMENTED, "custom call %s (%s) on the host: %s", in->name, t,
                            why);
  kiln_elem_type_t t0 = c.nin ? in->operands[0]->shape->type : KILN_F32;
  c.f64 = t0 == KILN_F64 || t0 == KILN_C128;
  c.cplx = kiln_elem_type_is_complex(t0) && c.kind != LAYER_NORM;
  kiln_thunk_seq_push(seq, make_thunk(&c, d, in->name, t, ins, outs));
  return NULL;
}

/* A view's element count, as a double (exact: views lie inside their slices). */
static double elements(const view_t *v) {
  double n = 1;
  for (int k = 0; k < v->rank; k++) n *= (double)v->dims[k];
  return n;
}

/* Whether a read recipe's sizes (batch, m, n, k, ucols, vrows) are those of its views, so
 * the kernels it runs stay inside them (products in double: no overflow, and exact for any
 * count a view can hold). */
static bool sizes_agree(const builtin_call_t *c) {
  double b = (double)c->batch, m = (double)c->m, n = (double)c->n, k = (double)c->k;
  double uc = (double)c->ucols, vr = (double)c->vrows;
  if (b < 0 || m < 0 || n < 0 || k < 0 || uc < 0 || vr < 0) return false;
  const view_t *in = c->in, *out = c->out;
  switch (c->kind) {
    case GEQRF:
    case ORGQR:
      return c->nin >= (c->kind == ORGQR ? 2 : 1) && c->nout >= (c->kind == GEQRF ? 2 : 1) &&
             elements(&in[0]) == b * m * n && elements(&out[0]) == b * m * n &&
             (c->kind == ORGQR ? elements(&in[1]) : elements(&out[1])) == b * k;
    case SYEVD:
      return c->nin == 1 && c->nout == 3 && m == 0 && elements(&in[0]) == b * n * n &&
             elements(&out[0]) == b * n * n && elements(&out[1]) == b * n && elements(&out[2]) == b;
    case GESDD:
      return c->nin == 1 && c->nout == 5 && elements(&in[0]) == b * m * n &&
             elements(&out[0]) == b * m * n && elements(&out[1]) == b * (m < n ? m : n) &&
             elements(&out[2]) == b * m * uc && elements(&out[3]) == b * vr * n &&
             elements(&out[4]) == b;
    case GEEV: {
      int values = c->cplx ? 1 : 2;
      return c->nin == 1 && c->nout == values + 3 && m == 0 && elements(&in[0]) == b * n * n &&
             elements(&out[0]) == b * n && elements(&out[values - 1]) == b * n &&
             elements(&out[values]) == b * n * n && elements(&out[values + 1]) == b * n * n &&
             elements(&out[values + 2]) == b;
    }
    case GEES: {
      int values = c->cplx ? 1 : 2;
      return c->nin == 1 && c->nout == values + 4 && m == 0 && elements(&in[0]) == b * n * n &&
             elements(&out[0]) == b * n * n && elements(&out[1]) == b * n * n &&
             elements(&out[2]) == b * n && elements(&out[1 + values]) == b * n &&
             elements(&out[2 + values]) == b && elements(&out[3 + values]) == b;
    }
    case GEHRD:
    case SYTRD: {
      double m1 = n > 0 ? n - 1 : 0;
      bool tri = c->kind == SYTRD;
      return c->nin == 1 && c->nout == (tri ? 5 : 3) && m == 0 && elements(&in[0]) == b * n * n &&
             elements(&out[0]) == b * n * n && elements(&out[tri ? 3 : 1]) == b * m1 &&
             (!tri || (elements(&out[1]) == b * n && elements(&out[2]) == b * m1)) &&
             elements(&out[tri ? 4 : 2]) == b &&
             (tri || (k >= 0 && uc >= k && uc < (n > 1 ? n : 1)));
    }
    case GTSV:
      return c->nin == 4 && c->nout == 5 && elements(&in[0]) == b * n &&
             elements(&in[1]) == b * n && elements(&in[2]) == b * n &&
             elements(&in[3]) == b * n * k && elements(&out[0]) == b * n &&
             elements(&out[1]) == b * n && elements(&out[2]) == b * n &&
             elements(&out[3]) == b * n * k && elements(&out[4]) == b;
    default:
      return true;
  }
}

kiln_status kiln_builtin_custom_call_rebuild(const kiln_recipe_call_t *c_in, kiln_thunk_t **out) {
  *out = NULL;
  kiln_byte_reader_t r;
  kiln_recipe_open(c_in, KILN_RECIPE_BUILTIN, &r);
  const char *name = c_in->name;
  builtin_call_t c;
  memset(&c, 0, sizeof c);
  uint32_t kind = kiln_br_u32(&r, "built-in kind");
  uint8_t flags = kiln_br_u8(&r, "flags");
  c.f64 = flags & 1;
  c.lower = flags & 2;
  c.vectors = flags & 4;
  c.cplx = flags & 8;
  c.left = flags & 16;
  uint64_t eps = kiln_br_u32(&r, "epsilon");
  uint32_t eps32 = (uint32_t)eps;
  memcpy(&c.epsilon, &eps32, sizeof eps32);
  c.seed = kiln_br_u64(&r, "seed");
  c.batch = (int64_t)kiln_br_u64(&r, "batch");
  c.m = (int64_t)kiln_br_u64(&r, "m");
  c.n = (int64_t)kiln_br_u64(&r, "n");
  c.k = (int64_t)kiln_br_u64(&r, "k");
  c.ucols = (int64_t)kiln_br_u64(&r, "ucols");
  c.vrows = (int64_t)kiln_br_u64(&r, "vrows");
  c.nin = (int)kiln_br_u32(&r, "inputs");
  c.nout = (int)kiln_br_u32(&r, "outputs");
  if (!r.err && (kind > SYTRD || c.nin < 0 || c.nin > kMaxLeaves || c.nout < 0 ||
                 c.nout > kMaxLeaves || c.nin != c_in->num_operands || c.nout != c_in->num_results))
    kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: kind %u, %d inputs, %d outputs", name,
                                      kind, c.nin, c.nout));
  c.kind = (builtin_kind_t)kind;
  for (int v = 0; v < c.nin + c.nout && !r.err; v++) {
    view_t *w = v < c.nin ? &c.in[v] : &c.out[v - c.nin];
    w->rank = (int)kiln_br_u32(&r, "view rank");
    w->bytes = (int64_t)kiln_br_u64(&r, "view bytes");
    w->esize = kiln_br_u8(&r, "view element size");
    if (!r.err && w->esize != 1 && w->esize != 2 && w->esize != 4 && w->esize != 8 &&
        w->esize != 16)
      kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: element size %lld", name,
                                        (long long)w->esize));
    if (!r.err && (w->rank < 0 || w->rank > kMaxRank))
      kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: rank %d", name, w->rank));
    for (int k = 0; k < w->rank && !r.err; k++) {
      w->dims[k] = (int64_t)kiln_br_u64(&r, "view dim");
      w->strides[k] = (int64_t)kiln_br_u64(&r, "view stride");
    }
    /* The last element the view addresses must lie inside it. */
    int64_t es = w->esize, last = 0;
    bool empty = false;
    for (int k = 0; k < w->rank && !r.err; k++) {
      if (w->dims[k] < 0 || w->strides[k] < 0 || w->dims[k] > (1ll << 40) ||
          w->strides[k] > (1ll << 40))
        kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: dimension %d", name, k));
      else if (w->dims[k] == 0)
        empty = true;
      else if (last <= (1ll << 60) / 2)
        last += (w->dims[k] - 1) * w->strides[k];
    }
    if (!r.err && !empty && (last + 1) * es > w->bytes)
      kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: a view past its %lld bytes", name,
                                        (long long)w->bytes));
    const kiln_slice_t *sl = v < c.nin ? &c_in->operands[v] : &c_in->results[v - c.nin];
    if (!r.err && w->bytes > sl->size)
      kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: a view of %lld bytes in a slice "
                                        "of %lld",
                                        name, (long long)w->bytes, (long long)sl->size));
  }
  if (!r.err && !sizes_agree(&c))
    kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: sizes that disagree with its "
                                      "views",
                                      name));
  if (!r.err && r.left)
    kiln_br_fail(&r, KILN_ERR_INVALID("built-in recipe of %s: trailing bytes", name));
  if (r.err) return r.err;
  *out = make_thunk(&c, c_in->d, name, c_in->target, c_in->operands, c_in->results);
  return NULL;
}
