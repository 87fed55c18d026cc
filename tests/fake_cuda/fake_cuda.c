/* A fake CUDA driver (libcuda) for tests without GPUs: exports cuInit, cuDriverGetVersion and
 * cuGetProcAddress_v2, which hands out every entry point of kiln's table
 * (runtime/cuda/cuda_symbols.def). Device memory is host memory (aligned_alloc), streams run
 * every copy and memset at once, events only remember that they were recorded; modules,
 * launches and graphs answer CUDA_ERROR_NOT_SUPPORTED (counted). $FAKE_CUDA_DEVICES GPUs
 * (default 4), each "fake GPU N", sm_90 with 132 SMs. */
#include "tests/fake_cuda/fake_cuda.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_driver.h"

#define EXPORT __attribute__((visibility("default")))
#define NOT_SUPPORTED 801
#define LAUNCH_FAILED 719 /* CUDA_ERROR_LAUNCH_FAILED */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_cuda_stats_t g_drv;
static int g_records_left = -1; /* event records before they fail; -1: they never do */

typedef struct fake_event {
  int recorded;
} fake_event_t;

static void bump(int *what, int delta) {
  pthread_mutex_lock(&g_mu);
  *what += delta;
  pthread_mutex_unlock(&g_mu);
}

static CUresult f_get_count(int *n) {
  const char *env = getenv("FAKE_CUDA_DEVICES");
  *n = env ? atoi(env) : 4;
  return CUDA_SUCCESS;
}
static CUresult f_get(CUdevice *d, int ordinal) {
  *d = ordinal;
  return CUDA_SUCCESS;
}
static CUresult f_get_name(char *name, int len, CUdevice d) {
  snprintf(name, (size_t)len, "fake GPU %d", d);
  return CUDA_SUCCESS;
}
static CUresult f_get_attribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? 9
       : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? 0
       : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     ? 132
       : a == CU_DEVICE_ATTRIBUTE_MAX_PITCH                ? (1 << 30)
                                                           : 227 * 1024;
  return CUDA_SUCCESS;
}
static CUresult f_ctx_retain(CUcontext *c, CUdevice d) {
  *c = (CUcontext)(uintptr_t)(0x100 + d);
  return CUDA_SUCCESS;
}
static CUresult f_ctx_release(CUdevice d) {
  (void)d;
  return CUDA_SUCCESS;
}
static CUresult f_ctx_set(CUcontext c) {
  (void)c;
  return CUDA_SUCCESS;
}
static CUresult f_mem_alloc(CUdeviceptr *p, size_t n) {
  void *m = aligned_alloc(256, (n + 255) & ~(size_t)255);
  if (!m) return 2;
  bump(&g_drv.allocs_alive, 1);
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}
static CUresult f_mem_free(CUdeviceptr p) {
  bump(&g_drv.allocs_alive, -1);
  free((void *)(uintptr_t)p);
  return CUDA_SUCCESS;
}
static CUresult f_host_alloc(void **p, size_t n) {
  *p = malloc(n ? n : 1);
  return *p ? CUDA_SUCCESS : 2;
}
static CUresult f_host_free(void *p) {
  free(p);
  return CUDA_SUCCESS;
}
static CUresult f_h2d(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  (void)s;
  memmove((void *)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}
static CUresult f_d2h(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  (void)s;
  memmove(dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}
static CUresult f_d2d(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  (void)s;
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}
static CUresult f_set8(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  (void)s;
  memset((void *)(uintptr_t)dst, v, n);
  return CUDA_SUCCESS;
}
static CUresult f_set16(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) {
  (void)s;
  for (size_t i = 0; i < n; i++) memcpy((char *)(uintptr_t)dst + 2 * i, &v, 2);
  return CUDA_SUCCESS;
}
static CUresult f_set32(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  (void)s;
  for (size_t i = 0; i < n; i++) memcpy((char *)(uintptr_t)dst + 4 * i, &v, 4);
  return CUDA_SUCCESS;
}
/* A stream: whether something made it wait for an event (a collective stream does). */
typedef struct fake_stream {
  int waited;
  char pad[12];
} fake_stream_t;

static CUresult f_stream_create(CUstream *s, unsigned int flags) {
  (void)flags;
  *s = (CUstream)calloc(1, sizeof(fake_stream_t));
  bump(&g_drv.streams_alive, 1);
  return CUDA_SUCCESS;
}
static CUresult f_stream_destroy(CUstream s) {
  bump(&g_drv.streams_alive, -1);
  free(s);
  return CUDA_SUCCESS;
}
static CUresult f_stream_sync(CUstream s) {
  bump(&g_drv.stream_syncs, 1);
  if (s && ((fake_stream_t *)s)->waited) bump(&g_drv.waited_stream_syncs, 1);
  return CUDA_SUCCESS;
}
static CUresult f_event_create(CUevent *e, unsigned int flags) {
  (void)flags;
  *e = (CUevent)calloc(1, sizeof(fake_event_t));
  return CUDA_SUCCESS;
}
static CUresult f_event_destroy(CUevent e) {
  free(e);
  return CUDA_SUCCESS;
}
static CUresult f_event_record(CUevent e, CUstream s) {
  (void)s;
  pthread_mutex_lock(&g_mu);
  bool fail = g_records_left == 0;
  if (g_records_left > 0) g_records_left--;
  pthread_mutex_unlock(&g_mu);
  if (fail) return LAUNCH_FAILED;
  ((fake_event_t *)e)->recorded = 1;
  bump(&g_drv.event_records, 1);
  return CUDA_SUCCESS;
}
static CUresult f_stream_wait(CUstream s, CUevent e, unsigned int flags) {
  (void)flags;
  if (s) ((fake_stream_t *)s)->waited = 1;
  bump(&g_drv.stream_waits, 1);
  if (!((fake_event_t *)e)->recorded) bump(&g_drv.waits_on_unrecorded, 1);
  return CUDA_SUCCESS;
}
static CUresult f_event_sync(CUevent e) {
  (void)e;
  return CUDA_SUCCESS;
}

static CUresult f_total_mem(size_t *bytes, CUdevice d) {
  (void)d;
  *bytes = (size_t)16 << 30;
  return CUDA_SUCCESS;
}
static CUresult f_error_name(CUresult r, const char **s) {
  *s = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
static CUresult f_error_string(CUresult r, const char **s) {
  *s = r == NOT_SUPPORTED ? "fake driver: operation not supported" : "fake driver error";
  return CUDA_SUCCESS;
}
static CUresult f_ctx_sync(void) {
  return CUDA_SUCCESS;
}

EXPORT void fake_cuda_fail_event_records_after(int n) {
  pthread_mutex_lock(&g_mu);
  g_records_left = n < 0 ? -1 : n;
  pthread_mutex_unlock(&g_mu);
}

EXPORT void fake_cuda_get_stats(fake_cuda_stats_t *out) {
  pthread_mutex_lock(&g_mu);
  *out = g_drv;
  pthread_mutex_unlock(&g_mu);
}

EXPORT CUresult cuInit(unsigned int flags) {
  (void)flags;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}

/* Every other entry point: not supported, counted. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define KILN_CU_SYM(name, params)      \
  static CUresult stub_##name params { \
    bump(&g_drv.unsupported_calls, 1); \
    return NOT_SUPPORTED;              \
  }
#include "runtime/cuda/cuda_symbols.def"
#undef KILN_CU_SYM
#pragma GCC diagnostic pop

static const struct {
  const char *name;
  void *fn;
} g_impl[] = {
    {"cuInit", (void *)cuInit},
    {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuGetErrorName", (void *)f_error_name},
    {"cuGetErrorString", (void *)f_error_string},
    {"cuDeviceGetCount", (void *)f_get_count},
    {"cuDeviceGet", (void *)f_get},
    {"cuDeviceGetName", (void *)f_get_name},
    {"cuDeviceGetAttribute", (void *)f_get_attribute},
    {"cuDeviceTotalMem", (void *)f_total_mem},
    {"cuDevicePrimaryCtxRetain", (void *)f_ctx_retain},
    {"cuDevicePrimaryCtxRelease", (void *)f_ctx_release},
    {"cuCtxSetCurrent", (void *)f_ctx_set},
    {"cuCtxSynchronize", (void *)f_ctx_sync},
    {"cuMemAlloc", (void *)f_mem_alloc},
    {"cuMemFree", (void *)f_mem_free},
    {"cuMemAllocHost", (void *)f_host_alloc},
    {"cuMemFreeHost", (void *)f_host_free},
    {"cuMemcpyHtoDAsync", (void *)f_h2d},
    {"cuMemcpyDtoHAsync", (void *)f_d2h},
    {"cuMemcpyDtoDAsync", (void *)f_d2d},
    {"cuMemsetD8Async", (void *)f_set8},
    {"cuMemsetD16Async", (void *)f_set16},
    {"cuMemsetD32Async", (void *)f_set32},
    {"cuStreamCreate", (void *)f_stream_create},
    {"cuStreamDestroy", (void *)f_stream_destroy},
    {"cuStreamSynchronize", (void *)f_stream_sync},
    {"cuStreamWaitEvent", (void *)f_stream_wait},
    {"cuEventCreate", (void *)f_event_create},
    {"cuEventDestroy", (void *)f_event_destroy},
    {"cuEventRecord", (void *)f_event_record},
    {"cuEventSynchronize", (void *)f_event_sync},
};

static const struct {
  const char *name;
  void *fn;
} g_stubs[] = {
#define KILN_CU_SYM(name, params) {#name, (void *)stub_##name},
#include "runtime/cuda/cuda_symbols.def"
#undef KILN_CU_SYM
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
  (void)version;
  (void)flags;
  for (size_t i = 0; i < sizeof(g_impl) / sizeof(g_impl[0]); i++)
    if (!strcmp(g_impl[i].name, symbol)) {
      *pfn = g_impl[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  for (size_t i = 0; i < sizeof(g_stubs) / sizeof(g_stubs[0]); i++)
    if (!strcmp(g_stubs[i].name, symbol)) {
      *pfn = g_stubs[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *pfn = NULL;
  if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  return 500;              /* CUDA_ERROR_NOT_FOUND */
}
