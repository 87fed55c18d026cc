/* Loading the CUDA driver and mapping its errors (cuda_driver.h). */
#include "runtime/cuda/cuda_driver.h"

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

/* ---- symbol table ----------------------------------------------------------------------- */

static const char *const g_symbol_names[] = {
#define KILN_CU_SYM(name, params) #name,
#include "runtime/cuda/cuda_symbols.def"
#undef KILN_CU_SYM
};

static const size_t g_symbol_offsets[] = {
#define KILN_CU_SYM(name, params) offsetof(kiln_cuda_driver_t, name),
#include "runtime/cuda/cuda_symbols.def"
#undef KILN_CU_SYM
};

size_t kiln_cuda_symbol_count(void) {
  return sizeof(g_symbol_names) / sizeof(g_symbol_names[0]);
}

const char *kiln_cuda_symbol_name(size_t i) {
  return i < kiln_cuda_symbol_count() ? g_symbol_names[i] : NULL;
}

static void **symbol_slot(kiln_cuda_driver_t *d, size_t i) {
  return (void **)((char *)d + g_symbol_offsets[i]);
}

bool kiln_cuda_symbol_is_set(const kiln_cuda_driver_t *d, size_t i) {
  if (!d || i >= kiln_cuda_symbol_count()) return false;
  void *p;
  memcpy(&p, (const char *)d + g_symbol_offsets[i], sizeof(p));
  return p != NULL;
}

kiln_status kiln_cuda_driver_resolve(kiln_cuda_driver_t *d, kiln_cu_get_proc_fn get_proc) {
  if (!d || !get_proc) return KILN_ERR_INVALID("cuda driver resolve: NULL argument");
  for (size_t i = 0; i < kiln_cuda_symbol_count(); i++) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult qs = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = get_proc(g_symbol_names[i], &fn, KILN_CUDA_DRIVER_ABI_VERSION,
                          CU_GET_PROC_ADDRESS_DEFAULT, &qs);
    if (r != CUDA_SUCCESS || qs != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
      return kiln_status_make(KILN_UNAVAILABLE,
                              "CUDA driver %s does not provide %s at ABI version %d (result %d, "
                              "query status %d); a driver for CUDA 12.0 or newer is needed",
                              d->path[0] ? d->path : "(table)", g_symbol_names[i],
                              KILN_CUDA_DRIVER_ABI_VERSION, r, qs);
    memcpy(symbol_slot(d, i), &fn, sizeof(fn));
  }
  return NULL;
}

/* ---- errors ------------------------------------------------------------------------------ */

/* KILN_CU_ERR(name, value, kiln code, description) */
#define KILN_CU_ERRORS(X)                                                                         \
  X(CUDA_SUCCESS, 0, KILN_OK, "no error")                                                         \
  X(CUDA_ERROR_INVALID_VALUE, 1, KILN_INVALID_ARGUMENT, "invalid argument")                       \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2, KILN_RESOURCE_EXHAUSTED, "out of memory")                        \
  X(CUDA_ERROR_NOT_INITIALIZED, 3, KILN_FAILED_PRECONDITION, "initialization error")              \
  X(CUDA_ERROR_DEINITIALIZED, 4, KILN_UNAVAILABLE, "driver shutting down")                        \
  X(CUDA_ERROR_PROFILER_DISABLED, 5, KILN_FAILED_PRECONDITION, "profiler disabled")               \
  X(CUDA_ERROR_STUB_LIBRARY, 34, KILN_UNAVAILABLE, "CUDA driver is a stub library")               \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE, 46, KILN_UNAVAILABLE,                                          \
    "CUDA-capable device(s) busy or unavailable")                                                 \
  X(CUDA_ERROR_NO_DEVICE, 100, KILN_UNAVAILABLE, "no CUDA-capable device is detected")            \
  X(CUDA_ERROR_INVALID_DEVICE, 101, KILN_INVALID_ARGUMENT, "invalid device ordinal")              \
  X(CUDA_ERROR_DEVICE_NOT_LICENSED, 102, KILN_PERMISSION_DENIED, "device not licensed")           \
  X(CUDA_ERROR_INVALID_IMAGE, 200, KILN_INVALID_ARGUMENT, "device kernel image is invalid")       \
  X(CUDA_ERROR_INVALID_CONTEXT, 201, KILN_FAILED_PRECONDITION, "invalid device context")          \
  X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, 202, KILN_FAILED_PRECONDITION, "context already current") \
  X(CUDA_ERROR_MAP_FAILED, 205, KILN_INTERNAL, "mapping of buffer object failed")                 \
  X(CUDA_ERROR_UNMAP_FAILED, 206, KILN_INTERNAL, "unmapping of buffer object failed")             \
  X(CUDA_ERROR_ARRAY_IS_MAPPED, 207, KILN_FAILED_PRECONDITION, "array is mapped")                 \
  X(CUDA_ERROR_ALREADY_MAPPED, 208, KILN_ALREADY_EXISTS, "resource already mapped")               \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209, KILN_INVALID_ARGUMENT,                                     \
    "no kernel image is available for execution on the device")                                   \
  X(CUDA_ERROR_ALREADY_ACQUIRED, 210, KILN_ALREADY_EXISTS, "resource already acquired")           \
  X(CUDA_ERROR_NOT_MAPPED, 211, KILN_FAILED_PRECONDITION, "resource not mapped")                  \
  X(CUDA_ERROR_ECC_UNCORRECTABLE, 214, KILN_DATA_LOSS, "uncorrectable ECC error encountered")     \
  X(CUDA_ERROR_UNSUPPORTED_LIMIT, 215, KILN_INVALID_ARGUMENT, "limit is not supported")           \
  X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, 216, KILN_FAILED_PRECONDITION,                             \
    "exclusive-thread device already in use")                                                     \
  X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217, KILN_UNIMPLEMENTED, "peer access is not supported")  \
  X(CUDA_ERROR_INVALID_PTX, 218, KILN_INVALID_ARGUMENT, "a PTX JIT compilation failed")           \
  X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, 219, KILN_INVALID_ARGUMENT,                              \
    "invalid OpenGL or DirectX context")                                                          \
  X(CUDA_ERROR_NVLINK_UNCORRECTABLE, 220, KILN_DATA_LOSS, "uncorrectable NVLink error")           \
  X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221, KILN_UNAVAILABLE,                                     \
    "PTX JIT compiler library not found")                                                         \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222, KILN_INVALID_ARGUMENT,                               \
    "the provided PTX was compiled with an unsupported toolchain")                                \
  X(CUDA_ERROR_JIT_COMPILATION_DISABLED, 223, KILN_FAILED_PRECONDITION,                           \
    "PTX JIT compilation was disabled")                                                           \
  X(CUDA_ERROR_INVALID_SOURCE, 300, KILN_INVALID_ARGUMENT, "device kernel image is invalid")      \
  X(CUDA_ERROR_FILE_NOT_FOUND, 301, KILN_NOT_FOUND, "file not found")                             \
  X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, 302, KILN_NOT_FOUND,                               \
    "shared object symbol not found")                                                             \
  X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, 303, KILN_INTERNAL,                                     \
    "shared object initialization failed")                                                        \
  X(CUDA_ERROR_OPERATING_SYSTEM, 304, KILN_INTERNAL,                                              \
    "OS call failed or operation not supported on this OS")                                       \
  X(CUDA_ERROR_INVALID_HANDLE, 400, KILN_INVALID_ARGUMENT, "invalid resource handle")             \
  X(CUDA_ERROR_ILLEGAL_STATE, 401, KILN_FAILED_PRECONDITION,                                      \
    "the operation is not permitted in the current state")                                        \
  X(CUDA_ERROR_NOT_FOUND, 500, KILN_NOT_FOUND, "named symbol not found")                          \
  X(CUDA_ERROR_NOT_READY, 600, KILN_UNAVAILABLE, "device not ready")                              \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700, KILN_INTERNAL, "an illegal memory access was encountered")   \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701, KILN_RESOURCE_EXHAUSTED,                             \
    "too many resources requested for launch")                                                    \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, 702, KILN_DEADLINE_EXCEEDED,                                       \
    "the launch timed out and was terminated")                                                    \
  X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, 703, KILN_INVALID_ARGUMENT,                         \
    "launch uses incompatible texturing mode")                                                    \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, 704, KILN_ALREADY_EXISTS,                             \
    "peer access is already enabled")                                                             \
  X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, 705, KILN_FAILED_PRECONDITION,                            \
    "peer access has not been enabled")                                                           \
  X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, 708, KILN_FAILED_PRECONDITION,                             \
    "primary context already initialized")                                                        \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709, KILN_FAILED_PRECONDITION, "context is destroyed")       \
  X(CUDA_ERROR_ASSERT, 710, KILN_INTERNAL, "device-side assert triggered")                        \
  X(CUDA_ERROR_TOO_MANY_PEERS, 711, KILN_RESOURCE_EXHAUSTED, "peer mapping resources exhausted")  \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712, KILN_ALREADY_EXISTS,                          \
    "host memory already registered")                                                             \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713, KILN_FAILED_PRECONDITION,                         \
    "host memory not registered")                                                                 \
  X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714, KILN_INTERNAL, "hardware stack error")                  \
  X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715, KILN_INTERNAL, "an illegal instruction was encountered") \
  X(CUDA_ERROR_MISALIGNED_ADDRESS, 716, KILN_INTERNAL, "misaligned address")                      \
  X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717, KILN_INTERNAL,                                         \
    "operation not supported on global/shared address space")                                     \
  X(CUDA_ERROR_INVALID_PC, 718, KILN_INTERNAL, "invalid program counter")                         \
  X(CUDA_ERROR_LAUNCH_FAILED, 719, KILN_INTERNAL, "unspecified launch failure")                   \
  X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720, KILN_INVALID_ARGUMENT,                          \
    "too many blocks in cooperative launch")                                                      \
  X(CUDA_ERROR_NOT_PERMITTED, 800, KILN_PERMISSION_DENIED, "operation not permitted")             \
  X(CUDA_ERROR_NOT_SUPPORTED, 801, KILN_UNIMPLEMENTED, "operation not supported")                 \
  X(CUDA_ERROR_SYSTEM_NOT_READY, 802, KILN_UNAVAILABLE, "system not yet initialized")             \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803, KILN_FAILED_PRECONDITION,                             \
    "system has unsupported display driver / cuda driver combination")                            \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804, KILN_UNIMPLEMENTED,                           \
    "forward compatibility was attempted on non supported HW")                                    \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900, KILN_FAILED_PRECONDITION,                         \
    "operation not permitted when stream is capturing")                                           \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901, KILN_FAILED_PRECONDITION,                         \
    "operation failed due to a previous error during capture")                                    \
  X(CUDA_ERROR_CAPTURED_EVENT, 907, KILN_FAILED_PRECONDITION,                                     \
    "operation not permitted on an event last recorded in a capturing stream")                    \
  X(CUDA_ERROR_TIMEOUT, 909, KILN_DEADLINE_EXCEEDED, "wait operation timed out")                  \
  X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910, KILN_FAILED_PRECONDITION,                          \
    "the graph update was not performed because it included changes which violated constraints "  \
    "specific to instantiated graph update")                                                      \
  X(CUDA_ERROR_EXTERNAL_DEVICE, 911, KILN_INTERNAL,                                               \
    "an async error has occurred in an external entity")                                          \
  X(CUDA_ERROR_INVALID_CLUSTER_SIZE, 912, KILN_INVALID_ARGUMENT, "invalid cluster size")          \
  X(CUDA_ERROR_UNKNOWN, 999, KILN_UNKNOWN, "unknown error")

typedef struct cu_error_info {
  const char *name;
  CUresult value;
  kiln_status_code_t code;
  const char *text;
} cu_error_info_t;

static const cu_error_info_t g_errors[] = {
#define X(name, value, code, text) {#name, value, code, text},
    KILN_CU_ERRORS(X)
#undef X
};

static const cu_error_info_t *error_info(CUresult r) {
  for (size_t i = 0; i < sizeof(g_errors) / sizeof(g_errors[0]); i++)
    if (g_errors[i].value == r) return &g_errors[i];
  return NULL;
}

kiln_status_code_t kiln_cuda_error_code(CUresult r) {
  const cu_error_info_t *e = error_info(r);
  return e ? e->code : KILN_UNKNOWN;
}

const char *kiln_cuda_error_name(CUresult r) {
  const cu_error_info_t *e = error_info(r);
  return e ? e->name : NULL;
}

kiln_status kiln_cuda_status_make(const kiln_cuda_driver_t *d, CUresult r, const char *file,
                                  int line, const char *fmt, ...) {
  if (r == CUDA_SUCCESS) return NULL;
  const cu_error_info_t *e = error_info(r);
  const char *text = NULL;
  if (d && d->cuGetErrorString && d->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
  if (!text) text = e ? e->text : "unrecognized CUDA error";
  kiln_strbuf_t what = {0};
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_vprintf(&what, fmt, ap);
  va_end(ap);
  kiln_status s = kiln_status_make_at(e ? e->code : KILN_UNKNOWN, file, line, "%s: %s (%d): %s",
                                      kiln_strbuf_cstr(&what), e ? e->name : "CUDA error", r, text);
  kiln_strbuf_free(&what);
  return s;
}

/* ---- loading ----------------------------------------------------------------------------- */

/* cuGetProcAddress (v1, CUDA 11.3+) lacks the query-status argument; drivers without
 * cuGetProcAddress_v2 are reached through this adapter (one per process suffices). */
typedef CUresult (*get_proc_v1_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags);
static get_proc_v1_fn g_get_proc_v1;

static CUresult get_proc_v1_adapter(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return g_get_proc_v1(symbol, pfn, version, flags);
}

kiln_status kiln_cuda_library_open(const char *const *names, size_t num_names, const char *what,
                                   const char *hint, void **handle, const char **used) {
  *handle = NULL;
  *used = NULL;
  kiln_strbuf_t tried = {0};
  for (size_t i = 0; i < num_names; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      kiln_strbuf_free(&tried);
      *handle = h;
      *used = names[i];
      return NULL;
    }
    const char *err = dlerror();
    kiln_strbuf_printf(&tried, "%s%s (%s)", tried.len ? ", " : "", names[i], err ? err : "?");
  }
  kiln_status s = kiln_status_make(KILN_UNAVAILABLE, "%s not found: cannot open any of %s; %s",
                                   what, kiln_strbuf_cstr(&tried), hint);
  kiln_strbuf_free(&tried);
  return s;
}

kiln_status kiln_cuda_driver_start(kiln_cuda_driver_t *d, const kiln_cuda_entry_points_t *ep) {
  if (!d || !ep || !ep->init || !ep->driver_get_version || !ep->get_proc)
    return KILN_ERR_INVALID("cuda driver start: NULL argument");
  const char *path = d->path[0] ? d->path : "(table)";
  /* Step 1: the version, before anything that depends on it, so that an old driver is told
   * it is old rather than that some entry point is missing. */
  CUresult r = ep->driver_get_version(&d->driver_version);
  if (r != CUDA_SUCCESS)
    return kiln_cuda_status_make(NULL, r, __FILE__, __LINE__, "cuDriverGetVersion (driver %s)",
                                 path);
  if (d->driver_version < KILN_CUDA_DRIVER_ABI_VERSION)
    return kiln_status_make(KILN_UNAVAILABLE,
                            "CUDA driver %s supports CUDA %d.%d; 12.0 or newer is needed: update "
                            "the NVIDIA driver",
                            path, d->driver_version / 1000, (d->driver_version % 1000) / 10);
  /* Step 2: cuInit before cuGetProcAddress (the driver API's order). */
  r = ep->init(0);
  if (r != CUDA_SUCCESS)
    return kiln_cuda_status_make(NULL, r, __FILE__, __LINE__, "cuInit (driver %s)", path);
  /* Step 3: the table at the pinned ABI version. */
  return kiln_cuda_driver_resolve(d, ep->get_proc);
}

kiln_status kiln_cuda_driver_open(const char *const *paths, size_t num_paths,
                                  kiln_cuda_driver_t **out) {
  static const char *const defaults[] = {"libcuda.so.1", "libcuda.so"};
  const char *env_path[1];
  if (!out) return KILN_ERR_INVALID("cuda driver open: NULL out");
  *out = NULL;
  if (!paths || num_paths == 0) {
    const char *env = kiln_runtime_options().cuda_driver;
    if (env) {
      env_path[0] = env;
      paths = env_path;
      num_paths = 1;
    } else {
      paths = defaults;
      num_paths = 2;
    }
  }
  void *h = NULL;
  const char *used = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_library_open(
      paths, num_paths, "CUDA driver",
      "install the NVIDIA driver or set KILN_CUDA_DRIVER to libcuda's path", &h, &used));
  kiln_cuda_driver_t *d = kiln_calloc(1, sizeof(*d));
  d->handle = h;
  snprintf(d->path, sizeof(d->path), "%s", used);
  /* cuInit and cuDriverGetVersion are exported unversioned by every driver; they are needed
   * before cuGetProcAddress may be called. */
  kiln_cuda_entry_points_t ep = {0};
  void *sym = dlsym(h, "cuInit");
  if (sym) memcpy(&ep.init, &sym, sizeof(sym));
  sym = dlsym(h, "cuDriverGetVersion");
  if (sym) memcpy(&ep.driver_get_version, &sym, sizeof(sym));
  if ((sym = dlsym(h, "cuGetProcAddress_v2")) != NULL) {
    memcpy(&ep.get_proc, &sym, sizeof(sym));
  } else if ((sym = dlsym(h, "cuGetProcAddress")) != NULL) {
    memcpy(&g_get_proc_v1, &sym, sizeof(sym));
    ep.get_proc = get_proc_v1_adapter;
  }
  kiln_status s = NULL;
  if (!ep.init || !ep.driver_get_version || !ep.get_proc)
    s = kiln_status_make(KILN_UNAVAILABLE,
                         "%s is no usable CUDA driver: %s not found; a driver for CUDA 12.0 or "
                         "newer is needed (set KILN_CUDA_DRIVER to libcuda's path)",
                         used,
                         !ep.init                 ? "cuInit"
                         : !ep.driver_get_version ? "cuDriverGetVersion"
                                                  : "cuGetProcAddress_v2 / cuGetProcAddress");
  if (!s) s = kiln_cuda_driver_start(d, &ep);
  if (s) {
    kiln_cuda_driver_close(d);
    return s;
  }
  *out = d;
  return NULL;
}

void kiln_cuda_driver_close(kiln_cuda_driver_t *d) {
  if (!d) return;
  if (d->handle) dlclose(d->handle);
  kiln_free(d);
}

static struct {
  pthread_once_t once;
  kiln_cuda_driver_t *driver;
  kiln_status_code_t code;
  char message[2048];
} g_driver = {.once = PTHREAD_ONCE_INIT};

static void load_driver_once(void) {
  kiln_cuda_driver_t *d = NULL;
  kiln_status s = kiln_cuda_driver_open(NULL, 0, &d);
  if (s) {
    g_driver.code = kiln_status_code(s);
    snprintf(g_driver.message, sizeof(g_driver.message), "%s", kiln_status_message(s));
    KILN_LOG_I("CUDA unavailable: %s", g_driver.message);
    kiln_status_free(s);
    return;
  }
  KILN_LOG_I("CUDA driver %s, version %d", d->path, d->driver_version);
  g_driver.driver = d;
}

kiln_status kiln_cuda_driver_get(const kiln_cuda_driver_t **out) {
  if (!out) return KILN_ERR_INVALID("cuda driver get: NULL out");
  *out = NULL;
  kiln_once(&g_driver.once, load_driver_once);
  if (!g_driver.driver) {
    /* A missing driver and a driver without devices are both "no GPU here". */
    kiln_status_code_t code = g_driver.code == KILN_OK ? KILN_UNAVAILABLE : g_driver.code;
    return kiln_status_make(code, "%s", g_driver.message);
  }
  *out = g_driver.driver;
  return NULL;
}
