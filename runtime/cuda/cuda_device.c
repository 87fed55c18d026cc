/* The CUDA device (cuda_device.h). Every entry makes the device's primary context current on
 * the calling thread first, so any thread may use the device. */
#include "runtime/cuda/cuda_device.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/vec.h"
#include "runtime/command_buffer.h"
#include "runtime/cuda/cuda_graph.h"
#include "runtime/cuda/nccl.h"

#define JIT_LOG_SIZE 16384

typedef struct cuda_event {
  kiln_event_t base;
  CUevent event;
} cuda_event_t;

typedef struct cuda_module {
  kiln_device_module_t base;
  CUmodule module;
  char *jit_log;
  pthread_mutex_t mu;
  KILN_VEC(kiln_cuda_kernel_t *) kernels;
} cuda_module_t;

static kiln_cuda_device_t *cdev(kiln_device_t *d) {
  return (kiln_cuda_device_t *)d;
}
static kiln_cuda_device_t *sdev(kiln_stream_t *s) {
  return cdev(s->device);
}
static CUstream sstream(kiln_stream_t *s) {
  return ((kiln_cuda_stream_t *)s)->stream;
}

void kiln_cuda_device_arch(const kiln_device_t *dev, char *buf, size_t size) {
  const kiln_cuda_device_t *d = (const kiln_cuda_device_t *)dev;
  snprintf(buf, size, "sm_%d%d", d->cc_major, d->cc_minor);
}

kiln_status kiln_cuda_device_activate(kiln_cuda_device_t *d) {
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent (device %d)",
                          d->ordinal);
  return NULL;
}

#define ACTIVATE(d) KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_device_activate(d))

/* ---- memory ------------------------------------------------------------------------------ */

static kiln_status cuda_mem_alloc(kiln_device_t *dev, size_t size, kiln_devptr_t *out) {
  kiln_cuda_device_t *d = cdev(dev);
  ACTIVATE(d);
  CUdeviceptr p = 0;
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuMemAlloc(&p, size), "cuMemAlloc(%zu bytes)", size);
  *out = p;
  return NULL;
}

static void cuda_mem_free(kiln_device_t *dev, kiln_devptr_t p) {
  kiln_cuda_device_t *d = cdev(dev);
  kiln_status_free(kiln_cuda_device_activate(d));
  CUresult r = d->drv->cuMemFree(p);
  if (r != CUDA_SUCCESS) KILN_LOG_W("cuMemFree failed: %d", r);
}

static kiln_status cuda_host_alloc(kiln_device_t *dev, size_t size, void **out) {
  kiln_cuda_device_t *d = cdev(dev);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuMemAllocHost(out, size), "cuMemAllocHost(%zu bytes)",
                          size);
  return NULL;
}

static void cuda_host_free(kiln_device_t *dev, void *p) {
  kiln_cuda_device_t *d = cdev(dev);
  kiln_status_free(kiln_cuda_device_activate(d));
  d->drv->cuMemFreeHost(p);
}

/* ---- streams ----------------------------------------------------------------------------- */

static kiln_status cuda_stream_create(kiln_device_t *dev, kiln_stream_t **out) {
  kiln_cuda_device_t *d = cdev(dev);
  ACTIVATE(d);
  CUstream s = NULL;
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING),
                          "cuStreamCreate");
  kiln_cuda_stream_t *st = kiln_calloc(1, sizeof(*st));
  st->base.device = dev;
  st->stream = s;
  *out = &st->base;
  return NULL;
}

static void cuda_stream_destroy(kiln_stream_t *s) {
  kiln_cuda_device_t *d = sdev(s);
  kiln_status_free(kiln_cuda_device_activate(d));
  d->drv->cuStreamSynchronize(sstream(s));
  d->drv->cuStreamDestroy(sstream(s));
  kiln_free(s);
}

static kiln_status cuda_stream_synchronize(kiln_stream_t *s) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuStreamSynchronize(sstream(s)), "cuStreamSynchronize");
  return NULL;
}

static kiln_status cuda_memcpy_d2d(kiln_stream_t *s, kiln_devptr_t dst, kiln_devptr_t src,
                                   size_t n) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuMemcpyDtoDAsync(dst, src, n, sstream(s)),
                          "cuMemcpyDtoDAsync(%zu bytes)", n);
  return NULL;
}

static kiln_status cuda_memcpy_h2d(kiln_stream_t *s, kiln_devptr_t dst, const void *src, size_t n) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuMemcpyHtoDAsync(dst, src, n, sstream(s)),
                          "cuMemcpyHtoDAsync(%zu bytes)", n);
  return NULL;
}

static kiln_status cuda_memcpy_d2h(kiln_stream_t *s, void *dst, kiln_devptr_t src, size_t n) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuMemcpyDtoHAsync(dst, src, n, sstream(s)),
                          "cuMemcpyDtoHAsync(%zu bytes)", n);
  return NULL;
}

static kiln_status cuda_memset(kiln_stream_t *s, kiln_devptr_t dst, uint32_t pattern, int elem_size,
                               size_t count) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  CUresult r;
  if (elem_size == 1)
    r = d->drv->cuMemsetD8Async(dst, (unsigned char)pattern, count, sstream(s));
  else if (elem_size == 2)
    r = d->drv->cuMemsetD16Async(dst, (unsigned short)pattern, count, sstream(s));
  else
    r = d->drv->cuMemsetD32Async(dst, pattern, count, sstream(s));
  KILN_CU_RETURN_IF_ERROR(d->drv, r, "cuMemsetD%dAsync(%zu elements)", elem_size * 8, count);
  return NULL;
}

kiln_status kiln_cuda_launch_check(const kiln_cuda_kernel_t *k, const kiln_launch_dims_t *dims,
                                   int optin_max, uint32_t *optin) {
  *optin = 0;
  const uint64_t threads = (uint64_t)dims->block[0] * dims->block[1] * dims->block[2];
  if (k->max_threads > 0 && threads > (uint64_t)k->max_threads)
    return KILN_ERR_INVALID(
        "kernel %s is launched with %llu threads per block (%ux%ux%u) but its compiled form "
        "allows at most %d (%d registers per thread); compile it with .maxntid %llu (the "
        "codegen emits the launch's block size) or launch smaller blocks",
        k->base.name, (unsigned long long)threads, dims->block[0], dims->block[1], dims->block[2],
        k->max_threads, k->num_regs, (unsigned long long)threads);
  const uint64_t total =
      (uint64_t)(k->static_shared > 0 ? k->static_shared : 0) + dims->shared_bytes;
  if (total > KILN_CUDA_DEFAULT_SHARED_LIMIT && total > (uint64_t)(optin_max > 0 ? optin_max : 0))
    return KILN_ERR_INVALID(
        "kernel %s needs %llu bytes of shared memory per block (%d static + %u dynamic); the "
        "device allows at most %d",
        k->base.name, (unsigned long long)total, k->static_shared, dims->shared_bytes, optin_max);
  if (total > KILN_CUDA_DEFAULT_SHARED_LIMIT) *optin = dims->shared_bytes;
  return NULL;
}

kiln_status kiln_cuda_kernel_prepare(kiln_cuda_device_t *d, const kiln_kernel_t *k,
                                     const kiln_launch_dims_t *dims) {
  const kiln_cuda_kernel_t *ck = (const kiln_cuda_kernel_t *)k; /* made by this file */
  uint32_t bytes = 0;
  KILN_RETURN_IF_ERROR(kiln_cuda_launch_check(ck, dims, d->shared_optin_max, &bytes),
                       "on device %d", d->ordinal);
  if (bytes == 0) return NULL;
  kiln_mutex_lock(&d->mu);
  kiln_status s = NULL;
  if (k->shared_opt_in < bytes) {
    CUresult r = d->drv->cuFuncSetAttribute(
        (CUfunction)k->handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
    if (r != CUDA_SUCCESS)
      s = kiln_cuda_status_make(d->drv, r, __FILE__, __LINE__,
                                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=%u, kernel %s)",
                                bytes, k->name);
    else
      ((kiln_kernel_t *)k)->shared_opt_in = bytes; /* the module owns the kernel */
  }
  kiln_mutex_unlock(&d->mu);
  return s;
}

static kiln_status cuda_launch(kiln_stream_t *s, const kiln_kernel_t *k,
                               const kiln_launch_dims_t *dm, const uint64_t *args, int num_args) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_kernel_prepare(d, k, dm));
  void *params[KILN_KERNEL_MAX_ARGS];
  for (int i = 0; i < num_args; i++) params[i] = (void *)&args[i];
  CUlaunchConfig cfg = {
      .gridDimX = dm->grid[0],
      .gridDimY = dm->grid[1],
      .gridDimZ = dm->grid[2],
      .blockDimX = dm->block[0],
      .blockDimY = dm->block[1],
      .blockDimZ = dm->block[2],
      .sharedMemBytes = dm->shared_bytes,
      .hStream = sstream(s),
      .attrs = NULL,
      .numAttrs = 0,
  };
  KILN_CU_RETURN_IF_ERROR(
      d->drv, d->drv->cuLaunchKernelEx(&cfg, (CUfunction)k->handle, num_args ? params : NULL, NULL),
      "cuLaunchKernelEx(%s, grid %ux%ux%u, block %ux%ux%u, %u bytes shared)", k->name, dm->grid[0],
      dm->grid[1], dm->grid[2], dm->block[0], dm->block[1], dm->block[2], dm->shared_bytes);
  return NULL;
}

static kiln_status cuda_gemm(kiln_stream_t *s, const kiln_gemm_desc_t *g, kiln_devptr_t a,
                             kiln_devptr_t b, kiln_devptr_t c) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  return kiln_cuda_blas_gemm(d, sstream(s), g, a, b, c);
}

/* ---- events ------------------------------------------------------------------------------- */

static kiln_status cuda_event_create(kiln_device_t *dev, kiln_event_t **out) {
  kiln_cuda_device_t *d = cdev(dev);
  ACTIVATE(d);
  CUevent e = NULL;
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING),
                          "cuEventCreate");
  cuda_event_t *ev = kiln_calloc(1, sizeof(*ev));
  ev->base.device = dev;
  ev->event = e;
  *out = &ev->base;
  return NULL;
}

static void cuda_event_destroy(kiln_event_t *e) {
  kiln_cuda_device_t *d = cdev(e->device);
  kiln_status_free(kiln_cuda_device_activate(d));
  d->drv->cuEventDestroy(((cuda_event_t *)e)->event);
  kiln_free(e);
}

static kiln_status cuda_event_record(kiln_event_t *e, kiln_stream_t *s) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuEventRecord(((cuda_event_t *)e)->event, sstream(s)),
                          "cuEventRecord");
  return NULL;
}

static kiln_status cuda_stream_wait_event(kiln_stream_t *s, kiln_event_t *e) {
  kiln_cuda_device_t *d = sdev(s);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv,
                          d->drv->cuStreamWaitEvent(sstream(s), ((cuda_event_t *)e)->event, 0),
                          "cuStreamWaitEvent");
  return NULL;
}

static kiln_status cuda_event_synchronize(kiln_event_t *e) {
  kiln_cuda_device_t *d = cdev(e->device);
  ACTIVATE(d);
  KILN_CU_RETURN_IF_ERROR(d->drv, d->drv->cuEventSynchronize(((cuda_event_t *)e)->event),
                          "cuEventSynchronize");
  return NULL;
}

/* ---- modules ------------------------------------------------------------------------------ */

static kiln_status cuda_module_load(kiln_device_t *dev, const kiln_module_image_t *img,
                                    kiln_device_module_t **out) {
  kiln_cuda_device_t *d = cdev(dev);
  if (!img->data || img->size == 0)
    return KILN_ERR_INVALID("CUDA module: empty image (a cubin or PTX is expected)");
  ACTIVATE(d);
  char *info = kiln_calloc(1, JIT_LOG_SIZE), *error = kiln_calloc(1, JIT_LOG_SIZE);
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_LOG_VERBOSE};
  void *vals[] = {info, (void *)(uintptr_t)JIT_LOG_SIZE, error, (void *)(uintptr_t)JIT_LOG_SIZE,
                  (void *)(uintptr_t)1};
  CUmodule m = NULL;
  CUresult r = d->drv->cuModuleLoadDataEx(&m, img->data, 5, opts, vals);
  kiln_strbuf_t log = {0};
  if (error[0]) kiln_strbuf_printf(&log, "%s", error);
  if (info[0]) kiln_strbuf_printf(&log, "%s%s", log.len ? "\n" : "", info);
  kiln_free(info);
  kiln_free(error);
  if (r != CUDA_SUCCESS) {
    kiln_status s = kiln_cuda_status_make(d->drv, r, __FILE__, __LINE__,
                                          "cuModuleLoadDataEx (%zu-byte image)%s%s", img->size,
                                          log.len ? "; JIT log:\n" : "", kiln_strbuf_cstr(&log));
    kiln_strbuf_free(&log);
    return s;
  }
  cuda_module_t *cm = kiln_calloc(1, sizeof(*cm));
  cm->base.device = dev;
  cm->module = m;
  cm->jit_log = kiln_strbuf_take(&log);
  if (!cm->jit_log) cm->jit_log = kiln_strdup("");
  pthread_mutex_init(&cm->mu, NULL);
  *out = &cm->base;
  return NULL;
}

static void cuda_module_unload(kiln_device_module_t *base) {
  cuda_module_t *m = (cuda_module_t *)base;
  kiln_cuda_device_t *d = cdev(base->device);
  kiln_status_free(kiln_cuda_device_activate(d));
  d->drv->cuModuleUnload(m->module);
  for (size_t i = 0; i < m->kernels.len; i++) {
    kiln_free((char *)m->kernels.data[i]->base.name);
    kiln_free(m->kernels.data[i]);
  }
  kiln_vec_free(&m->kernels);
  kiln_free(m->jit_log);
  pthread_mutex_destroy(&m->mu);
  kiln_free(m);
}

static kiln_status cuda_module_get_kernel(kiln_device_module_t *base, const char *name,
                                          const kiln_kernel_t **out) {
  cuda_module_t *m = (cuda_module_t *)base;
  kiln_cuda_device_t *d = cdev(base->device);
  kiln_mutex_lock(&m->mu);
  for (size_t i = 0; i < m->kernels.len; i++)
    if (!strcmp(m->kernels.data[i]->base.name, name)) {
      *out = &m->kernels.data[i]->base;
      kiln_mutex_unlock(&m->mu);
      return NULL;
    }
  kiln_status s = kiln_cuda_device_activate(d);
  CUfunction f = NULL;
  if (!s) {
    CUresult r = d->drv->cuModuleGetFunction(&f, m->module, name);
    s = kiln_cuda_status_make(d->drv, r, __FILE__, __LINE__, "cuModuleGetFunction(\"%s\")", name);
  }
  /* What the compiled form allows, checked before each launch: too many registers for the
   * block, or static shared memory that leaves too little for the dynamic part. */
  int max_threads = 0, static_shared = 0, num_regs = 0;
  const struct {
    CUfunction_attribute attr;
    int *dst;
    const char *what;
  } fattrs[] = {{CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads, "MAX_THREADS_PER_BLOCK"},
                {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &static_shared, "SHARED_SIZE_BYTES"},
                {CU_FUNC_ATTRIBUTE_NUM_REGS, &num_regs, "NUM_REGS"}};
  for (size_t i = 0; !s && i < sizeof(fattrs) / sizeof(fattrs[0]); i++) {
    CUresult r = d->drv->cuFuncGetAttribute(fattrs[i].dst, fattrs[i].attr, f);
    s = kiln_cuda_status_make(d->drv, r, __FILE__, __LINE__, "cuFuncGetAttribute(%s, \"%s\")",
                              fattrs[i].what, name);
  }
  if (!s) {
    kiln_cuda_kernel_t *k = kiln_calloc(1, sizeof(*k));
    k->base.name = kiln_strdup(name);
    k->base.module = base;
    k->base.handle = f;
    k->base.uid = kiln_kernel_next_uid();
    k->max_threads = max_threads;
    k->static_shared = static_shared;
    k->num_regs = num_regs;
    kiln_vec_push(&m->kernels, k);
    *out = &k->base;
  }
  kiln_mutex_unlock(&m->mu);
  return s;
}

const char *kiln_cuda_module_jit_log(const kiln_device_module_t *m) {
  if (!m || m->device->kind != KILN_DEVICE_CUDA) return NULL;
  return ((const cuda_module_t *)m)->jit_log;
}

/* ---- device -------------------------------------------------------------------------------- */

static void cuda_device_destroy(kiln_device_t *dev) {
  kiln_cuda_device_t *d = cdev(dev);
  kiln_nccl_device_release(dev); /* its communicators and collective streams */
  kiln_status_free(kiln_cuda_device_activate(d));
  kiln_device_fini_common(dev); /* graphs first: they hold the context's resources */
  kiln_cuda_blas_destroy(d->blas);
  d->drv->cuDevicePrimaryCtxRelease(d->dev);
  pthread_mutex_destroy(&d->mu);
  kiln_free(d);
}

static const kiln_device_vtable_t cuda_vtable = {
    .destroy = cuda_device_destroy,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .memcpy_d2d = cuda_memcpy_d2d,
    .memcpy_h2d = cuda_memcpy_h2d,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memset = cuda_memset,
    .launch = cuda_launch,
    .gemm = cuda_gemm,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_synchronize = cuda_event_synchronize,
    .module_load = cuda_module_load,
    .module_unload = cuda_module_unload,
    .module_get_kernel = cuda_module_get_kernel,
    .cmd_ops = &kiln_cuda_graph_ops,
};

kiln_status kiln_cuda_device_create(int ordinal, kiln_device_t **out) {
  if (!out) return KILN_ERR_INVALID("cuda device: NULL out");
  *out = NULL;
  const kiln_cuda_driver_t *drv;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_driver_get(&drv));
  return kiln_cuda_device_create_with_driver(drv, ordinal, out);
}

kiln_status kiln_cuda_device_create_with_driver(const kiln_cuda_driver_t *drv, int ordinal,
                                                kiln_device_t **out) {
  if (!out || !drv) return KILN_ERR_INVALID("cuda device: NULL argument");
  *out = NULL;
  int count = 0;
  KILN_CU_RETURN_IF_ERROR(drv, drv->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    return kiln_status_make(count ? KILN_INVALID_ARGUMENT : KILN_UNAVAILABLE,
                            "CUDA device %d requested; the driver (%s) reports %d device(s)",
                            ordinal, drv->path, count);
  kiln_cuda_device_t *d = kiln_calloc(1, sizeof(*d));
  d->drv = drv;
  d->ordinal = ordinal;
  pthread_mutex_init(&d->mu, NULL);
  CUresult r = drv->cuDeviceGet(&d->dev, ordinal);
  kiln_status s = kiln_cuda_status_make(drv, r, __FILE__, __LINE__, "cuDeviceGet(%d)", ordinal);
  char name[100] = "";
  int max_pitch = 0;
  if (!s) {
    r = drv->cuDeviceGetName(name, (int)sizeof(name), d->dev);
    s = kiln_cuda_status_make(drv, r, __FILE__, __LINE__, "cuDeviceGetName");
  }
  const struct {
    int attr;
    int *dst;
  } attrs[] = {{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &d->cc_major},
               {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &d->cc_minor},
               {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d->sm_count},
               {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &d->shared_optin_max},
               {CU_DEVICE_ATTRIBUTE_MAX_PITCH, &max_pitch}};
  for (size_t i = 0; !s && i < sizeof(attrs) / sizeof(attrs[0]); i++) {
    r = drv->cuDeviceGetAttribute(attrs[i].dst, attrs[i].attr, d->dev);
    s = kiln_cuda_status_make(drv, r, __FILE__, __LINE__, "cuDeviceGetAttribute(%d)",
                              attrs[i].attr);
  }
  d->max_pitch = max_pitch > 0 ? (size_t)max_pitch : 0;
  if (!s) {
    r = drv->cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
    s = kiln_cuda_status_make(drv, r, __FILE__, __LINE__, "cuDevicePrimaryCtxRetain(%d)", ordinal);
  }
  if (s) {
    pthread_mutex_destroy(&d->mu);
    kiln_free(d);
    return s;
  }
  char full[192];
  snprintf(full, sizeof(full), "cuda:%d %s (sm_%d%d, %d SMs)", ordinal, name, d->cc_major,
           d->cc_minor, d->sm_count);
  s = kiln_device_init_common(&d->base, &cuda_vtable, KILN_DEVICE_CUDA, full);
  if (s) {
    cuda_device_destroy(&d->base);
    return s;
  }
  *out = &d->base;
  return NULL;
}
