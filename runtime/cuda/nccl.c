/* Loading NCCL and mapping its results and types (nccl.h). */
#include "runtime/cuda/nccl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "runtime/runtime_options.h"

#define KILN_NCCL_HINT                                                                       \
  "install NCCL: `pip install nvidia-nccl-cu13` (then set KILN_NCCL_LIBRARY to its "         \
  "nvidia/nccl/lib/libnccl.so.2) or the libnccl2 package from NVIDIA's CUDA repository, or " \
  "set KILN_NCCL_LIBRARY to libnccl.so.2's path"

/* ---- results ------------------------------------------------------------------------------ */

#define KILN_NCCL_RESULTS(X)                    \
  X(ncclSuccess, KILN_OK)                       \
  X(ncclUnhandledCudaError, KILN_INTERNAL)      \
  X(ncclSystemError, KILN_UNAVAILABLE)          \
  X(ncclInternalError, KILN_INTERNAL)           \
  X(ncclInvalidArgument, KILN_INVALID_ARGUMENT) \
  X(ncclInvalidUsage, KILN_FAILED_PRECONDITION) \
  X(ncclRemoteError, KILN_UNAVAILABLE)          \
  X(ncclInProgress, KILN_UNAVAILABLE)

const char *kiln_nccl_result_name(ncclResult_t r) {
#define KILN_NCCL_NAME(name, code) \
  if (r == name) return #name;
  KILN_NCCL_RESULTS(KILN_NCCL_NAME)
#undef KILN_NCCL_NAME
  return NULL;
}

kiln_status_code_t kiln_nccl_error_code(ncclResult_t r) {
#define KILN_NCCL_CODE(name, code) \
  if (r == name) return code;
  KILN_NCCL_RESULTS(KILN_NCCL_CODE)
#undef KILN_NCCL_CODE
  return KILN_UNKNOWN;
}

kiln_status kiln_nccl_status_make(const kiln_nccl_t *n, ncclResult_t r, const char *fmt, ...) {
  if (r == ncclSuccess) return NULL;
  kiln_strbuf_t what = {0};
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_vprintf(&what, fmt, ap);
  va_end(ap);
  const char *name = kiln_nccl_result_name(r);
  const char *text = n && n->ncclGetErrorString ? n->ncclGetErrorString(r) : NULL;
  kiln_status s =
      kiln_status_make(kiln_nccl_error_code(r), "%s: %s (%d): %s", kiln_strbuf_cstr(&what),
                       name ? name : "NCCL error", r, text ? text : "no description");
  kiln_strbuf_free(&what);
  return s;
}

/* ---- types -------------------------------------------------------------------------------- */

kiln_status kiln_nccl_dtype(kiln_coll_dtype_t t, ncclDataType_t *out) {
  switch (t) {
    case KILN_COLL_PRED:
    case KILN_COLL_U8:
      *out = ncclUint8;
      return NULL;
    case KILN_COLL_S8:
      *out = ncclInt8;
      return NULL;
    case KILN_COLL_S32:
      *out = ncclInt32;
      return NULL;
    case KILN_COLL_U32:
      *out = ncclUint32;
      return NULL;
    case KILN_COLL_S64:
      *out = ncclInt64;
      return NULL;
    case KILN_COLL_U64:
      *out = ncclUint64;
      return NULL;
    case KILN_COLL_F16:
      *out = ncclFloat16;
      return NULL;
    case KILN_COLL_F32:
      *out = ncclFloat32;
      return NULL;
    case KILN_COLL_F64:
      *out = ncclFloat64;
      return NULL;
    case KILN_COLL_BF16:
      *out = ncclBfloat16;
      return NULL;
    case KILN_COLL_S16:
    case KILN_COLL_U16:
      return KILN_ERR_UNIMPLEMENTED(
          "NCCL has no 16-bit integer type: a reduction of %s "
          "elements cannot run through NCCL",
          t == KILN_COLL_S16 ? "s16" : "u16");
  }
  return KILN_ERR_INVALID("NCCL: element type %d", (int)t);
}

kiln_status kiln_nccl_redop(kiln_coll_reduction_t r, ncclRedOp_t *out) {
  switch (r) {
    case KILN_COLL_SUM:
      *out = ncclSum;
      return NULL;
    case KILN_COLL_PRODUCT:
      *out = ncclProd;
      return NULL;
    case KILN_COLL_MIN:
      *out = ncclMin;
      return NULL;
    case KILN_COLL_MAX:
      *out = ncclMax;
      return NULL;
  }
  return KILN_ERR_INVALID("NCCL: reduction %d", (int)r);
}

/* ---- loading ------------------------------------------------------------------------------ */

void kiln_nccl_close(kiln_nccl_t *n) {
  if (!n) return;
  if (n->handle) dlclose(n->handle);
  kiln_free(n);
}

kiln_status kiln_nccl_open(const char *const *names, size_t num_names, kiln_nccl_t **out) {
  static const char *const defaults[] = {"libnccl.so.2", "libnccl.so"};
  const char *env_name[1];
  if (!out) return KILN_ERR_INVALID("nccl open: NULL out");
  *out = NULL;
  if (!names || !num_names) {
    const char *env = kiln_runtime_options().nccl_library;
    if (env) {
      env_name[0] = env;
      names = env_name;
      num_names = 1;
    } else {
      names = defaults;
      num_names = 2;
    }
  }
  void *h = NULL;
  const char *used = NULL;
  KILN_RETURN_IF_ERROR(
      kiln_cuda_library_open(names, num_names, "NCCL (libnccl.so.2)", KILN_NCCL_HINT, &h, &used),
      "collectives on CUDA devices need NCCL");
  kiln_nccl_t *n = kiln_calloc(1, sizeof(*n));
  n->handle = h;
  snprintf(n->path, sizeof(n->path), "%s", used);
  kiln_status s = NULL;
#define KILN_NCCL_LOOKUP(ret, name, params)                                                     \
  if (!s) {                                                                                     \
    void *sym = dlsym(h, #name);                                                                \
    if (sym)                                                                                    \
      memcpy(&n->name, &sym, sizeof(sym));                                                      \
    else                                                                                        \
      s = kiln_status_make(KILN_UNAVAILABLE, "%s is no usable NCCL: it does not export %s; %s", \
                           n->path, #name, KILN_NCCL_HINT);                                     \
  }
  KILN_NCCL_SYMBOLS(KILN_NCCL_LOOKUP)
#undef KILN_NCCL_LOOKUP
  if (!s)
    s = kiln_nccl_status_make(n, n->ncclGetVersion(&n->version), "ncclGetVersion (%s)", n->path);
  if (!s && n->version < KILN_NCCL_MIN_VERSION)
    s = kiln_status_make(KILN_UNAVAILABLE,
                         "%s is NCCL version code %d; kiln needs NCCL 2.10 or newer (bf16); %s",
                         n->path, n->version, KILN_NCCL_HINT);
  if (s) {
    kiln_nccl_close(n);
    return s;
  }
  *out = n;
  return NULL;
}

static struct {
  pthread_once_t once;
  kiln_nccl_t *nccl;
  kiln_status_code_t code;
  char message[2048];
} g_nccl = {.once = PTHREAD_ONCE_INIT};

static void load_nccl_once(void) {
  kiln_nccl_t *n = NULL;
  kiln_status s = kiln_nccl_open(NULL, 0, &n);
  if (s) {
    g_nccl.code = kiln_status_code(s);
    snprintf(g_nccl.message, sizeof(g_nccl.message), "%s", kiln_status_message(s));
    KILN_LOG_I("NCCL unavailable: %s", g_nccl.message);
    kiln_status_free(s);
    return;
  }
  KILN_LOG_I("NCCL %s, version %d", n->path, n->version);
  g_nccl.nccl = n;
}

kiln_status kiln_nccl_get(const kiln_nccl_t **out) {
  if (!out) return KILN_ERR_INVALID("nccl get: NULL out");
  *out = NULL;
  kiln_once(&g_nccl.once, load_nccl_once);
  if (!g_nccl.nccl) return kiln_status_make(g_nccl.code, "%s", g_nccl.message);
  *out = g_nccl.nccl;
  return NULL;
}
