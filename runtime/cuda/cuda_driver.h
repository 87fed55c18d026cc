/* The CUDA driver API, loaded at run time.
 *
 * libcuda is dlopen'ed (libcuda.so.1, then libcuda.so; the runtime options' cuda_driver, the
 * edges' $KILN_CUDA_DRIVER, names a library to use instead) and every entry point of
 * cuda_symbols.def is resolved through cuGetProcAddress_v2 (or cuGetProcAddress on drivers without
 * it) with the ABI pinned to KILN_CUDA_DRIVER_ABI_VERSION. The types below are declared here with
 * the driver's ABI, so the build needs no CUDA toolkit. A missing driver is UNAVAILABLE naming
 * every path tried with its dlerror(); a driver without an entry point is UNAVAILABLE naming the
 * symbol. CUresult values map to kiln status codes with the error's name and the driver's text. */
#ifndef KILN_RUNTIME_CUDA_CUDA_DRIVER_H_
#define KILN_RUNTIME_CUDA_CUDA_DRIVER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define KILN_CUDA_DRIVER_ABI_VERSION 12000

/* ---- driver API types (ABI of CUDA 12.0) ------------------------------------------------ */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long cuuint64_t;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef int CUjit_option;
typedef int CUdriverProcAddressQueryResult;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUkern_st *CUkernel;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUlaunchAttribute_st CUlaunchAttribute; /* only passed as NULL */

enum {
  CUDA_SUCCESS = 0,
  CU_STREAM_NON_BLOCKING = 1,
  CU_EVENT_DISABLE_TIMING = 2,
  CU_MEMORYTYPE_HOST = 1,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  /* CUstreamCaptureMode */
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  /* CUdevice_attribute */
  CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  /* CUfunction_attribute */
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  /* CUjit_option */
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_LOG_VERBOSE = 12,
};

typedef struct CUlaunchConfig {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

/* CUDA_KERNEL_NODE_PARAMS_v2: what the 12.0 ABI of the kernel-node functions takes. */
typedef struct CUDA_KERNEL_NODE_PARAMS {
  CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void **kernelParams;
  void **extra;
  CUkernel kern;
  CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;

typedef struct CUDA_MEMSET_NODE_PARAMS {
  CUdeviceptr dst;
  size_t pitch;
  unsigned int value;
  unsigned int elementSize;
  size_t width;
  size_t height;
} CUDA_MEMSET_NODE_PARAMS;

typedef struct CUDA_MEMCPY3D {
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  int srcMemoryType;
  const void *srcHost;
  CUdeviceptr srcDevice;
  void *srcArray;
  void *reserved0;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  int dstMemoryType;
  void *dstHost;
  CUdeviceptr dstDevice;
  void *dstArray;
  void *reserved1;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;

/* cuGetProcAddress_v2's shape. */
typedef CUresult (*kiln_cu_get_proc_fn)(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *status);

/* ---- the loaded driver ------------------------------------------------------------------ */

typedef struct kiln_cuda_driver {
  void *handle;       /* dlopen handle; NULL for a table filled by a test */
  char path[512];     /* the library loaded */
  int driver_version; /* cuDriverGetVersion, e.g. 12040 */
#define KILN_CU_SYM(name, params) CUresult(*name) params;
#include "runtime/cuda/cuda_symbols.def"
#undef KILN_CU_SYM
} kiln_cuda_driver_t;

/* The process-wide driver: loaded, resolved and cuInit'ed on first use; never unloaded. A
 * failure is remembered and returned again (as a fresh status) without retrying. */
kiln_status kiln_cuda_driver_get(const kiln_cuda_driver_t **out);

/* Opens the first of `paths` that dlopen accepts (NULL/0: the runtime options'
 * cuda_driver, else libcuda.so.1 then libcuda.so) and starts it (kiln_cuda_driver_start with the
 * library's exported cuInit, cuDriverGetVersion and cuGetProcAddress). UNAVAILABLE lists "path:
 * dlerror" for every path tried. The caller owns *out (kiln_cuda_driver_close). */
kiln_status kiln_cuda_driver_open(const char *const *paths, size_t num_paths,
                                  kiln_cuda_driver_t **out);
void kiln_cuda_driver_close(kiln_cuda_driver_t *d);

/* dlopens the first of `names` that opens (RTLD_NOW | RTLD_LOCAL); *used is that name.
 * UNAVAILABLE "<what> not found: cannot open any of name (dlerror), ...; <hint>" otherwise. */
kiln_status kiln_cuda_library_open(const char *const *names, size_t num_names, const char *what,
                                   const char *hint, void **handle, const char **used);

/* The entry points a driver exports unversioned, needed before its table can be resolved. */
typedef struct kiln_cuda_entry_points {
  CUresult (*init)(unsigned int flags);
  CUresult (*driver_get_version)(int *version);
  kiln_cu_get_proc_fn get_proc;
} kiln_cuda_entry_points_t;

/* Starts a driver in the driver API's order: cuDriverGetVersion (a driver older than CUDA
 * 12.0 is UNAVAILABLE saying so, before any entry point is looked up), then cuInit (its
 * failure mapped: no device -> UNAVAILABLE), then kiln_cuda_driver_resolve. Sets
 * d->driver_version. */
kiln_status kiln_cuda_driver_start(kiln_cuda_driver_t *d, const kiln_cuda_entry_points_t *ep);

/* Fills every entry of `d` through `get_proc` at KILN_CUDA_DRIVER_ABI_VERSION. UNAVAILABLE
 * naming the first symbol the driver does not provide (the table is left partly filled). */
kiln_status kiln_cuda_driver_resolve(kiln_cuda_driver_t *d, kiln_cu_get_proc_fn get_proc);

/* The symbol table: its size, the i-th name, and whether entry i of `d` is set. */
size_t kiln_cuda_symbol_count(void);
const char *kiln_cuda_symbol_name(size_t i);
bool kiln_cuda_symbol_is_set(const kiln_cuda_driver_t *d, size_t i);

/* ---- errors ----------------------------------------------------------------------------- */

/* The kiln code for a CUresult (UNKNOWN for values not in the table). */
kiln_status_code_t kiln_cuda_error_code(CUresult r);
/* "CUDA_ERROR_OUT_OF_MEMORY", or NULL for a value not in the table. */
const char *kiln_cuda_error_name(CUresult r);
/* A status for a failed call: "<what>: CUDA_ERROR_X (n): <text>", with the driver's
 * cuGetErrorString text when `d` is given and knows the value, else the table's. NULL for
 * CUDA_SUCCESS. */
kiln_status kiln_cuda_status_make(const kiln_cuda_driver_t *d, CUresult r, const char *file,
                                  int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Evaluates a driver call; on failure returns the mapped status from the enclosing function. */
#define KILN_CU_RETURN_IF_ERROR(drv, call, ...)                                      \
  do {                                                                               \
    CUresult kiln__r = (call);                                                       \
    if (kiln__r != CUDA_SUCCESS)                                                     \
      return kiln_cuda_status_make((drv), kiln__r, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif /* KILN_RUNTIME_CUDA_CUDA_DRIVER_H_ */
