/* GPU gemm through cuBLASLt (cublaslt.h). */
#include "runtime/cuda/cublaslt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"

/* ---- the plan (pure) ---------------------------------------------------------------------- */

static int32_t lt_type(kiln_gemm_dtype_t t) {
  switch (t) {
    case KILN_GEMM_F32:
      return KILN_CUDA_R_32F;
    case KILN_GEMM_F64:
      return KILN_CUDA_R_64F;
    case KILN_GEMM_C64:
      return KILN_CUDA_C_32F;
    case KILN_GEMM_C128:
      return KILN_CUDA_C_64F;
    case KILN_GEMM_BF16:
      return KILN_CUDA_R_16BF;
    case KILN_GEMM_F16:
      return KILN_CUDA_R_16F;
    case KILN_GEMM_S8:
      return KILN_CUDA_R_8I;
    case KILN_GEMM_S32:
      return KILN_CUDA_R_32I;
    case KILN_GEMM_S16:
    case KILN_GEMM_U8:
    case KILN_GEMM_U16:
    case KILN_GEMM_U32: /* no cuBLASLt type pairs with these */
    case KILN_GEMM_SAME:
      break;
  }
  return -1;
}

static int32_t fp8_type(kiln_lt_fp8_t f) {
  return f == KILN_LT_FP8_E4M3 ? KILN_CUDA_R_8F_E4M3 : KILN_CUDA_R_8F_E5M2;
}

/* Step 1: the element, compute and scale types. */
static kiln_status plan_types(const kiln_gemm_desc_t *g, const kiln_cublaslt_options_t *o,
                              kiln_lt_plan_t *p, int32_t *ab_a, int32_t *ab_b) {
  const kiln_gemm_dtype_t out = kiln_gemm_desc_out_dtype(g);
  if (o->fp8_a != KILN_LT_FP8_NONE || o->fp8_b != KILN_LT_FP8_NONE) {
    if (o->fp8_a == KILN_LT_FP8_NONE || o->fp8_b == KILN_LT_FP8_NONE)
      return KILN_ERR_UNIMPLEMENTED(
          "cuBLASLt: fp8 needs both operands in fp8 (a mixed fp8 x "
          "16-bit gemm is not supported); convert the other operand");
    if (o->fp8_a == KILN_LT_FP8_E5M2 && o->fp8_b == KILN_LT_FP8_E5M2)
      return KILN_ERR_UNIMPLEMENTED(
          "cuBLASLt: e5m2 x e5m2 is not supported; use e4m3 for one "
          "operand (as XLA's fp8 recipes do)");
    const kiln_gemm_dtype_t d = g->out_dtype == KILN_GEMM_SAME ? KILN_GEMM_F32 : g->out_dtype;
    if (d != KILN_GEMM_F32 && d != KILN_GEMM_BF16 && d != KILN_GEMM_F16)
      return KILN_ERR_UNIMPLEMENTED("cuBLASLt: an fp8 gemm writes bf16, f16 or f32, not %s",
                                    kiln_gemm_dtype_name(d));
    /* Only "TN" (cuBLASLt's A transposed, B not): kiln's B is stored n x k, A m x k. */
    if (g->trans_a || !g->trans_b)
      return KILN_ERR_UNIMPLEMENTED(
          "cuBLASLt: an fp8 gemm must read A as m x k and B as n x k (trans_a false, trans_b "
          "true; got %d, %d); transpose the operand first",
          g->trans_a, g->trans_b);
    if (g->k % 16 != 0)
      return KILN_ERR_UNIMPLEMENTED("cuBLASLt: an fp8 gemm needs k a multiple of 16 (k=%lld)",
                                    (long long)g->k);
    p->fp8 = true;
    p->compute_type = KILN_CUBLAS_COMPUTE_32F;
    p->scale_type = KILN_CUDA_R_32F;
    *ab_a = fp8_type(o->fp8_a);
    *ab_b = fp8_type(o->fp8_b);
    p->c.type = lt_type(d);
    return NULL;
  }
  const int32_t in = lt_type(g->dtype);
  *ab_a = *ab_b = in;
  p->c.type = lt_type(out);
  switch (g->dtype) {
    case KILN_GEMM_F32:
      p->compute_type = o->allow_tf32 ? KILN_CUBLAS_COMPUTE_32F_FAST_TF32 : KILN_CUBLAS_COMPUTE_32F;
      p->scale_type = KILN_CUDA_R_32F;
      break;
    case KILN_GEMM_F64:
      p->compute_type = KILN_CUBLAS_COMPUTE_64F;
      p->scale_type = KILN_CUDA_R_64F;
      break;
    case KILN_GEMM_C64:
      p->compute_type = KILN_CUBLAS_COMPUTE_32F;
      p->scale_type = KILN_CUDA_C_32F;
      break;
    case KILN_GEMM_C128:
      p->compute_type = KILN_CUBLAS_COMPUTE_64F;
      p->scale_type = KILN_CUDA_C_64F;
      break;
    case KILN_GEMM_BF16:
    case KILN_GEMM_F16:
      /* Products summed in f32, rounded once to the output type (as XLA's dots). */
      p->compute_type = KILN_CUBLAS_COMPUTE_32F;
      p->scale_type = KILN_CUDA_R_32F;
      break;
    case KILN_GEMM_S8:
      if (out != KILN_GEMM_S32)
        return KILN_ERR_UNIMPLEMENTED("cuBLASLt: no s8 gemm to %s", kiln_gemm_dtype_name(out));
      p->compute_type = KILN_CUBLAS_COMPUTE_32I;
      p->scale_type = KILN_CUDA_R_32I;
      break;
    default:
      return KILN_ERR_UNIMPLEMENTED("cuBLASLt: no gemm for %s", kiln_gemm_dtype_name(g->dtype));
  }
  return NULL;
}

/* Field by field, so that the padding keeps the zeros of the plan's memset. */
static void set_layout(kiln_lt_layout_t *l, int32_t type, uint64_t rows, uint64_t cols, uint64_t ld,
                       int32_t batch, uint64_t stride) {
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = (int64_t)ld;
  l->batch = batch;
  l->stride = (int64_t)stride;
}

kiln_status kiln_cublaslt_plan(const kiln_gemm_desc_t *g, const kiln_cublaslt_options_t *o,
                               kiln_lt_plan_t *out) {
  if (!g || !out) return KILN_ERR_INVALID("cuBLASLt plan: NULL argument");
  memset(out, 0, sizeof(*out));
  static const kiln_cublaslt_options_t defaults;
  if (!o) o = &defaults;
  const bool fp8 = o->fp8_a != KILN_LT_FP8_NONE || o->fp8_b != KILN_LT_FP8_NONE;
  /* fp8 operands are checked as 1-byte stand-ins: the dimensions' rules are the same. */
  kiln_gemm_desc_t chk = *g;
  if (fp8) {
    chk.dtype = KILN_GEMM_S8;
    chk.out_dtype = KILN_GEMM_S32;
    chk.alpha = 1;
    chk.beta = 0;
    chk.epilogue = KILN_GEMM_EPILOGUE_NONE; /* refused below, by name */
    chk.bias = 0;
  }
  KILN_RETURN_IF_ERROR(kiln_gemm_desc_check(&chk, NULL, NULL, NULL), "for cuBLASLt");
  if (g->batch > INT32_MAX)
    return KILN_ERR_UNIMPLEMENTED("cuBLASLt: batch %lld exceeds its 32-bit batch count",
                                  (long long)g->batch);
  int32_t type_a = 0, type_b = 0;
  KILN_RETURN_IF_ERROR_PLAIN(plan_types(g, o, out, &type_a, &type_b));
  const uint64_t m = (uint64_t)g->m, n = (uint64_t)g->n, k = (uint64_t)g->k;
  const int32_t batch = (int32_t)g->batch;
  /* Step 2: the layouts. Row-major C (m x n) is column-major C^T (n x m) = op(B)^T op(A)^T.
   * cuBLASLt's A is kiln's B: stored k x n row-major (= n x k column-major, ld n) unless
   * transposed (n x k row-major = k x n column-major, ld k, read transposed). */
  out->trans_a = g->trans_b ? KILN_CUBLAS_OP_T : KILN_CUBLAS_OP_N;
  set_layout(&out->a, type_b, g->trans_b ? k : n, g->trans_b ? n : k, g->trans_b ? k : n, batch,
             k * n);
  /* cuBLASLt's B is kiln's A: m x k row-major (= k x m column-major, ld k) unless
   * transposed (k x m row-major = m x k column-major, ld m, read transposed). */
  out->trans_b = g->trans_a ? KILN_CUBLAS_OP_T : KILN_CUBLAS_OP_N;
  set_layout(&out->b, type_a, g->trans_a ? m : k, g->trans_a ? k : m, g->trans_a ? m : k, batch,
             m * k);
  set_layout(&out->c, out->c.type, n, m, n, batch, m * n);
  /* Step 3: the epilogue (kiln_gemm_desc_check allowed it for real float results only). */
  if (fp8 && (g->bias || g->epilogue))
    return KILN_ERR_UNIMPLEMENTED("cuBLASLt: kiln plans no epilogue for fp8 gemms");
  out->bias = g->bias != 0;
  if (out->bias) out->bias_type = out->c.type;
  switch (g->epilogue) {
    case KILN_GEMM_EPILOGUE_RELU:
      out->epilogue = out->bias ? KILN_CUBLASLT_EPILOGUE_RELU_BIAS : KILN_CUBLASLT_EPILOGUE_RELU;
      break;
    case KILN_GEMM_EPILOGUE_GELU_TANH:
      out->epilogue = out->bias ? KILN_CUBLASLT_EPILOGUE_GELU_BIAS : KILN_CUBLASLT_EPILOGUE_GELU;
      break;
    default:
      out->epilogue = out->bias ? KILN_CUBLASLT_EPILOGUE_BIAS : KILN_CUBLASLT_EPILOGUE_DEFAULT;
      break;
  }
  return NULL;
}

/* ---- the library ------------------------------------------------------------------------- */

typedef int lt_status_t;
typedef struct lt_handle *lt_handle_t;
typedef struct lt_matmul_desc *lt_matmul_desc_t;
typedef struct lt_layout *lt_layout_t;
typedef struct lt_pref *lt_pref_t;

typedef struct lt_algo {
  uint64_t data[8];
} lt_algo_t;

/* cublasLtMatmulHeuristicResult_t */
typedef struct lt_heuristic {
  lt_algo_t algo;
  size_t workspace_size;
  lt_status_t state;
  float waves_count;
  int reserved[4];
} lt_heuristic_t;

enum {
  LT_DESC_COMPUTE_TYPE = 0,
  LT_DESC_SCALE_TYPE = 1,
  LT_DESC_TRANSA = 3,
  LT_DESC_TRANSB = 4,
  LT_DESC_EPILOGUE = 7,
  LT_DESC_BIAS_POINTER = 8,
  LT_DESC_BIAS_DATA_TYPE = 26,
  LT_DESC_A_SCALE_POINTER = 17,
  LT_DESC_B_SCALE_POINTER = 18,
  LT_DESC_D_SCALE_POINTER = 20,
  LT_LAYOUT_BATCH_COUNT = 5,
  LT_LAYOUT_STRIDED_BATCH_OFFSET = 6,
  LT_PREF_MAX_WORKSPACE_BYTES = 1,
};

/* X(field, exported name, (parameters)) */
#define KILN_CUBLASLT_SYMBOLS(X)                                                                 \
  X(create, "cublasLtCreate", (lt_handle_t * h))                                                 \
  X(destroy, "cublasLtDestroy", (lt_handle_t h))                                                 \
  X(desc_create, "cublasLtMatmulDescCreate", (lt_matmul_desc_t * d, int compute, int scale))     \
  X(desc_destroy, "cublasLtMatmulDescDestroy", (lt_matmul_desc_t d))                             \
  X(desc_set, "cublasLtMatmulDescSetAttribute",                                                  \
    (lt_matmul_desc_t d, int attr, const void *buf, size_t size))                                \
  X(layout_create, "cublasLtMatrixLayoutCreate",                                                 \
    (lt_layout_t * l, int type, uint64_t rows, uint64_t cols, int64_t ld))                       \
  X(layout_destroy, "cublasLtMatrixLayoutDestroy", (lt_layout_t l))                              \
  X(layout_set, "cublasLtMatrixLayoutSetAttribute",                                              \
    (lt_layout_t l, int attr, const void *buf, size_t size))                                     \
  X(pref_create, "cublasLtMatmulPreferenceCreate", (lt_pref_t * p))                              \
  X(pref_destroy, "cublasLtMatmulPreferenceDestroy", (lt_pref_t p))                              \
  X(pref_set, "cublasLtMatmulPreferenceSetAttribute",                                            \
    (lt_pref_t p, int attr, const void *buf, size_t size))                                       \
  X(heuristic, "cublasLtMatmulAlgoGetHeuristic",                                                 \
    (lt_handle_t h, lt_matmul_desc_t d, lt_layout_t a, lt_layout_t b, lt_layout_t c,             \
     lt_layout_t dd, lt_pref_t p, int requested, lt_heuristic_t *results, int *returned))        \
  X(matmul, "cublasLtMatmul",                                                                    \
    (lt_handle_t h, lt_matmul_desc_t d, const void *alpha, const void *a, lt_layout_t ad,        \
     const void *b, lt_layout_t bd, const void *beta, const void *c, lt_layout_t cd, void *dptr, \
     lt_layout_t dd, const lt_algo_t *algo, void *workspace, size_t workspace_size, CUstream s))

typedef struct lt_cache_entry {
  kiln_lt_plan_t plan;
  lt_algo_t algo;
  size_t workspace_size;
} lt_cache_entry_t;

struct kiln_cublaslt {
  void *lib;
  char path[64];
  lt_handle_t handle;
#define X(field, sym, params) lt_status_t(*field) params;
  KILN_CUBLASLT_SYMBOLS(X)
#undef X
  CUdeviceptr workspace;
  lt_cache_entry_t *cache;
  size_t cache_len, cache_next;
};

const char *kiln_cublas_status_name(int status) {
  switch (status) {
    case 0:
      return "CUBLAS_STATUS_SUCCESS";
    case 1:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case 8:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

const char *const *kiln_cublaslt_library_names(size_t *n) {
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12"};
  *n = sizeof(names) / sizeof(names[0]);
  return names;
}

bool kiln_cublaslt_probe(const char *const *names, size_t num_names) {
  if (!names || num_names == 0) names = kiln_cublaslt_library_names(&num_names);
  void *lib = NULL;
  const char *used = NULL;
  kiln_status s = kiln_cuda_library_open(names, num_names, "cuBLASLt", "", &lib, &used);
  if (s) {
    KILN_LOG_I("cuBLASLt probe: %s", kiln_status_message(s));
    kiln_status_free(s);
    return false;
  }
  bool ok = dlsym(lib, "cublasLtMatmul") != NULL;
  if (!ok) KILN_LOG_I("cuBLASLt probe: %s has no cublasLtMatmul", used);
  dlclose(lib);
  return ok;
}

static pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;
static bool g_probe_result;
static void probe_once(void) {
  g_probe_result = kiln_cublaslt_probe(NULL, 0);
}

bool kiln_cublaslt_available(void) {
  kiln_once(&g_probe_once, probe_once);
  return g_probe_result;
}

kiln_status kiln_cublaslt_open(const char *const *names, size_t num_names, kiln_cublaslt_t **out) {
  if (!out) return KILN_ERR_INVALID("cuBLASLt open: NULL out");
  *out = NULL;
  if (!names || num_names == 0) names = kiln_cublaslt_library_names(&num_names);
  void *lib = NULL;
  const char *used = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_library_open(
      names, num_names, "cuBLASLt",
      "install cuBLAS (libcublaslt) or add its folder to LD_LIBRARY_PATH", &lib, &used));
  kiln_cublaslt_t *lt = kiln_calloc(1, sizeof(*lt));
  lt->lib = lib;
  snprintf(lt->path, sizeof(lt->path), "%s", used);
  void *p;
#define X(field, sym, params)                                                   \
  p = dlsym(lib, sym);                                                          \
  if (!p) {                                                                     \
    kiln_cublaslt_destroy(lt, NULL);                                            \
    return kiln_status_make(KILN_UNAVAILABLE,                                   \
                            "cuBLASLt %s: symbol %s not found (a cuBLAS 12 or " \
                            "newer is needed)",                                 \
                            used, sym);                                         \
  }                                                                             \
  memcpy(&lt->field, &p, sizeof(p));
  KILN_CUBLASLT_SYMBOLS(X)
#undef X
  lt_status_t st = lt->create(&lt->handle);
  if (st != 0) {
    lt->handle = NULL;
    kiln_cublaslt_destroy(lt, NULL);
    return kiln_status_make(KILN_INTERNAL,
                            "cublasLtCreate (%s) failed with %s (%d); check that the driver "
                            "supports this cuBLAS and the device is usable (nvidia-smi)",
                            used, kiln_cublas_status_name(st), st);
  }
  lt->cache = kiln_calloc(KILN_CUBLASLT_CACHE_SIZE, sizeof(*lt->cache));
  *out = lt;
  return NULL;
}

void kiln_cublaslt_destroy(kiln_cublaslt_t *lt, const kiln_cuda_driver_t *drv) {
  if (!lt) return;
  if (lt->handle) lt->destroy(lt->handle);
  if (lt->workspace && drv) drv->cuMemFree(lt->workspace);
  if (lt->lib) dlclose(lt->lib);
  kiln_free(lt->cache);
  kiln_free(lt);
}

size_t kiln_cublaslt_cache_size(const kiln_cublaslt_t *lt) {
  return lt ? lt->cache_len : 0;
}

/* ---- one matmul -------------------------------------------------------------------------- */

/* The descriptors of one call, destroyed together. */
typedef struct lt_call {
  lt_matmul_desc_t desc;
  lt_layout_t a, b, c;
} lt_call_t;

static void call_free(kiln_cublaslt_t *lt, lt_call_t *c) {
  if (c->desc) lt->desc_destroy(c->desc);
  if (c->a) lt->layout_destroy(c->a);
  if (c->b) lt->layout_destroy(c->b);
  if (c->c) lt->layout_destroy(c->c);
}

static kiln_status lt_check(lt_status_t st, const char *what) {
  if (st == 0) return NULL;
  return kiln_status_make(st == 15 ? KILN_UNIMPLEMENTED : KILN_INTERNAL, "cuBLASLt %s: %s (%d)",
                          what, kiln_cublas_status_name(st), st);
}

static kiln_status make_layout(kiln_cublaslt_t *lt, const kiln_lt_layout_t *l, lt_layout_t *out) {
  KILN_RETURN_IF_ERROR_PLAIN(
      lt_check(lt->layout_create(out, l->type, l->rows, l->cols, l->ld), "MatrixLayoutCreate"));
  if (l->batch > 1) {
    KILN_RETURN_IF_ERROR_PLAIN(lt_check(
        lt->layout_set(*out, LT_LAYOUT_BATCH_COUNT, &l->batch, sizeof(l->batch)), "batch count"));
    KILN_RETURN_IF_ERROR_PLAIN(lt_check(
        lt->layout_set(*out, LT_LAYOUT_STRIDED_BATCH_OFFSET, &l->stride, sizeof(l->stride)),
        "batch stride"));
  }
  return NULL;
}

static kiln_status make_call(kiln_cublaslt_t *lt, const kiln_lt_plan_t *p,
                             const kiln_cublaslt_options_t *o, CUdeviceptr bias, lt_call_t *c) {
  KILN_RETURN_IF_ERROR_PLAIN(
      lt_check(lt->desc_create(&c->desc, p->compute_type, p->scale_type), "MatmulDescCreate"));
  KILN_RETURN_IF_ERROR_PLAIN(
      lt_check(lt->desc_set(c->desc, LT_DESC_TRANSA, &p->trans_a, sizeof(p->trans_a)), "TRANSA"));
  KILN_RETURN_IF_ERROR_PLAIN(
      lt_check(lt->desc_set(c->desc, LT_DESC_TRANSB, &p->trans_b, sizeof(p->trans_b)), "TRANSB"));
  KILN_RETURN_IF_ERROR_PLAIN(lt_check(
      lt->desc_set(c->desc, LT_DESC_EPILOGUE, &p->epilogue, sizeof(p->epilogue)), "EPILOGUE"));
  if (p->bias) {
    const void *ptr = (const void *)(uintptr_t)bias;
    KILN_RETURN_IF_ERROR_PLAIN(
        lt_check(lt->desc_set(c->desc, LT_DESC_BIAS_POINTER, &ptr, sizeof(ptr)), "BIAS_POINTER"));
    KILN_RETURN_IF_ERROR_PLAIN(
        lt_check(lt->desc_set(c->desc, LT_DESC_BIAS_DATA_TYPE, &p->bias_type, sizeof(p->bias_type)),
                 "BIAS_DATA_TYPE"));
  }
  if (p->fp8) {
    /* cuBLASLt's A is kiln's B: the scales swap with the operands. */
    const struct {
      int attr;
      CUdeviceptr ptr;
    } scales[] = {{LT_DESC_A_SCALE_POINTER, o->b_scale},
                  {LT_DESC_B_SCALE_POINTER, o->a_scale},
                  {LT_DESC_D_SCALE_POINTER, o->d_scale}};
    for (size_t i = 0; i < sizeof(scales) / sizeof(scales[0]); i++) {
      if (!scales[i].ptr) continue;
      const void *ptr = (const void *)(uintptr_t)scales[i].ptr;
      KILN_RETURN_IF_ERROR_PLAIN(
          lt_check(lt->desc_set(c->desc, scales[i].attr, &ptr, sizeof(ptr)), "scale pointer"));
    }
  }
  KILN_RETURN_IF_ERROR_PLAIN(make_layout(lt, &p->a, &c->a));
  KILN_RETURN_IF_ERROR_PLAIN(make_layout(lt, &p->b, &c->b));
  return make_layout(lt, &p->c, &c->c);
}

/* The cached algorithm of `p`, or the heuristic's first choice (then cached). */
static kiln_status choose_algo(kiln_cublaslt_t *lt, const kiln_lt_plan_t *p, lt_call_t *c,
                               const lt_cache_entry_t **out) {
  for (size_t i = 0; i < lt->cache_len; i++)
    if (!memcmp(&lt->cache[i].plan, p, sizeof(*p))) {
      *out = &lt->cache[i];
      return NULL;
    }
  lt_pref_t pref = NULL;
  kiln_status s = lt_check(lt->pref_create(&pref), "MatmulPreferenceCreate");
  const uint64_t ws = KILN_CUBLASLT_WORKSPACE_BYTES;
  if (!s)
    s = lt_check(lt->pref_set(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                 "MAX_WORKSPACE_BYTES");
  lt_heuristic_t h;
  memset(&h, 0, sizeof(h));
  int found = 0;
  if (!s)
    s = lt_check(lt->heuristic(lt->handle, c->desc, c->a, c->b, c->c, c->c, pref, 1, &h, &found),
                 "MatmulAlgoGetHeuristic");
  if (pref) lt->pref_destroy(pref);
  if (!s && found < 1) s = KILN_ERR_UNIMPLEMENTED("cuBLASLt has no algorithm for this gemm");
  KILN_RETURN_IF_ERROR_PLAIN(s);
  /* Bounded: the oldest entry makes room once the cache is full. */
  size_t slot = lt->cache_len < KILN_CUBLASLT_CACHE_SIZE ? lt->cache_len++ : lt->cache_next;
  lt->cache_next = (slot + 1) % KILN_CUBLASLT_CACHE_SIZE;
  memcpy(&lt->cache[slot].plan, p, sizeof(*p)); /* padding included: compared with memcmp */
  lt->cache[slot].algo = h.algo;
  lt->cache[slot].workspace_size = h.workspace_size;
  *out = &lt->cache[slot];
  return NULL;
}

kiln_status kiln_cublaslt_matmul(kiln_cublaslt_t *lt, const kiln_cuda_driver_t *drv, CUstream s,
                                 const kiln_gemm_desc_t *g, const kiln_cublaslt_options_t *o,
                                 CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  static const kiln_cublaslt_options_t defaults;
  if (!o) o = &defaults;
  kiln_lt_plan_t p;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cublaslt_plan(g, o, &p));
  if (!lt->workspace)
    KILN_CU_RETURN_IF_ERROR(drv, drv->cuMemAlloc(&lt->workspace, KILN_CUBLASLT_WORKSPACE_BYTES),
                            "cuBLASLt workspace (%zu bytes)", KILN_CUBLASLT_WORKSPACE_BYTES);
  lt_call_t call;
  memset(&call, 0, sizeof(call));
  const lt_cache_entry_t *e = NULL;
  kiln_status st = make_call(lt, &p, o, g->bias, &call);
  if (!st) st = choose_algo(lt, &p, &call, &e);
  if (!st) {
    /* Host scalars of the scale type (complex ones with a zero imaginary part). */
    union {
      float f[2];
      double d[2];
      int32_t i;
    } alpha, beta;
    memset(&alpha, 0, sizeof(alpha));
    memset(&beta, 0, sizeof(beta));
    if (p.scale_type == KILN_CUDA_R_64F || p.scale_type == KILN_CUDA_C_64F) {
      alpha.d[0] = g->alpha;
      beta.d[0] = g->beta;
    } else if (p.scale_type == KILN_CUDA_R_32I) {
      alpha.i = (int32_t)g->alpha;
      beta.i = (int32_t)g->beta;
    } else {
      alpha.f[0] = (float)g->alpha;
      beta.f[0] = (float)g->beta;
    }
    void *cp = (void *)(uintptr_t)c;
    st = lt_check(lt->matmul(lt->handle, call.desc, &alpha, (const void *)(uintptr_t)b, call.a,
                             (const void *)(uintptr_t)a, call.b, &beta, cp, call.c, cp, call.c,
                             &e->algo, (void *)(uintptr_t)lt->workspace, e->workspace_size, s),
                  "Matmul");
  }
  call_free(lt, &call);
  KILN_RETURN_IF_ERROR(st, "for a %lldx%lldx%lldx%lld %s gemm (trans_a %d, trans_b %d)",
                       (long long)g->batch, (long long)g->m, (long long)g->n, (long long)g->k,
                       kiln_gemm_dtype_name(g->dtype), g->trans_a, g->trans_b);
  return NULL;
}
