/* Device-independent parts of the device interface: argument checks, dispatch, creation by
 * name (device.h). */
#include "runtime/device.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "runtime/command_buffer.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/host/host_device.h"
#include "runtime/runtime_options.h"

const char *kiln_device_kind_name(kiln_device_kind_t k) {
  switch (k) {
    case KILN_DEVICE_HOST:
      return "host";
    case KILN_DEVICE_CUDA:
      return "cuda";
  }
  return "?";
}

uint64_t kiln_launch_dims_num_blocks(const kiln_launch_dims_t *d) {
  return (uint64_t)d->grid[0] * d->grid[1] * d->grid[2];
}

uint64_t kiln_kernel_next_uid(void) {
  static atomic_uint_fast64_t next = 1;
  return atomic_fetch_add(&next, 1);
}

size_t kiln_gemm_dtype_size(kiln_gemm_dtype_t t) {
  switch (t) {
    case KILN_GEMM_F32:
      return 4;
    case KILN_GEMM_F64:
      return 8;
    case KILN_GEMM_C64:
      return 8;
    case KILN_GEMM_C128:
      return 16;
    case KILN_GEMM_BF16:
      return 2;
    case KILN_GEMM_F16:
      return 2;
    case KILN_GEMM_S8:
      return 1;
    case KILN_GEMM_S32:
      return 4;
    case KILN_GEMM_S16:
      return 2;
    case KILN_GEMM_U8:
      return 1;
    case KILN_GEMM_U16:
      return 2;
    case KILN_GEMM_U32:
      return 4;
    case KILN_GEMM_SAME:
      return 0;
  }
  return 0;
}

const char *kiln_gemm_dtype_name(kiln_gemm_dtype_t t) {
  switch (t) {
    case KILN_GEMM_F32:
      return "f32";
    case KILN_GEMM_F64:
      return "f64";
    case KILN_GEMM_C64:
      return "c64";
    case KILN_GEMM_C128:
      return "c128";
    case KILN_GEMM_BF16:
      return "bf16";
    case KILN_GEMM_F16:
      return "f16";
    case KILN_GEMM_S8:
      return "s8";
    case KILN_GEMM_S32:
      return "s32";
    case KILN_GEMM_S16:
      return "s16";
    case KILN_GEMM_U8:
      return "u8";
    case KILN_GEMM_U16:
      return "u16";
    case KILN_GEMM_U32:
      return "u32";
    case KILN_GEMM_SAME:
      return "same";
  }
  return "?";
}

const char *kiln_gemm_epilogue_name(kiln_gemm_epilogue_t e) {
  switch (e) {
    case KILN_GEMM_EPILOGUE_NONE:
      return "";
    case KILN_GEMM_EPILOGUE_RELU:
      return "relu";
    case KILN_GEMM_EPILOGUE_GELU_TANH:
      return "gelu_tanh";
  }
  return "?";
}

bool kiln_gemm_dtype_is_int(kiln_gemm_dtype_t t) {
  return t == KILN_GEMM_S8 || t == KILN_GEMM_S16 || t == KILN_GEMM_S32 || t == KILN_GEMM_U8 ||
         t == KILN_GEMM_U16 || t == KILN_GEMM_U32;
}

kiln_gemm_dtype_t kiln_gemm_desc_out_dtype(const kiln_gemm_desc_t *g) {
  return g->out_dtype == KILN_GEMM_SAME ? g->dtype : g->out_dtype;
}

/* Whether A, B of type `in` may give C of type `out` (the table in device.h). */
static bool gemm_types_ok(kiln_gemm_dtype_t in, kiln_gemm_dtype_t out) {
  switch (in) {
    case KILN_GEMM_F32:
    case KILN_GEMM_F64:
    case KILN_GEMM_C64:
    case KILN_GEMM_C128:
      return out == in;
    case KILN_GEMM_BF16:
    case KILN_GEMM_F16:
      return out == KILN_GEMM_BF16 || out == KILN_GEMM_F16 || out == KILN_GEMM_F32;
    case KILN_GEMM_S8:
    case KILN_GEMM_S16:
    case KILN_GEMM_S32:
    case KILN_GEMM_U8:
    case KILN_GEMM_U16:
    case KILN_GEMM_U32:
      return kiln_gemm_dtype_is_int(out);
    case KILN_GEMM_SAME:
      return false;
  }
  return false;
}

static bool mul_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out) && *out >= 0;
}

kiln_status kiln_gemm_desc_check(const kiln_gemm_desc_t *g, size_t *a_bytes, size_t *b_bytes,
                                 size_t *c_bytes) {
  if (!g) return KILN_ERR_INVALID("gemm: NULL description");
  kiln_gemm_dtype_t out = kiln_gemm_desc_out_dtype(g);
  if (!gemm_types_ok(g->dtype, out))
    return KILN_ERR_INVALID(
        "gemm: unsupported element types %s x %s -> %s (%d -> %d); see "
        "kiln_gemm_desc_t for the combinations",
        kiln_gemm_dtype_name(g->dtype), kiln_gemm_dtype_name(g->dtype), kiln_gemm_dtype_name(out),
        (int)g->dtype, (int)g->out_dtype);
  if (g->epilogue != KILN_GEMM_EPILOGUE_NONE && g->epilogue != KILN_GEMM_EPILOGUE_RELU &&
      g->epilogue != KILN_GEMM_EPILOGUE_GELU_TANH)
    return KILN_ERR_INVALID("gemm: unknown epilogue %d", (int)g->epilogue);
  if ((g->epilogue || g->bias) && out != KILN_GEMM_F32 && out != KILN_GEMM_F64 &&
      out != KILN_GEMM_BF16 && out != KILN_GEMM_F16)
    return KILN_ERR_INVALID("gemm: a bias or activation needs a real floating-point result, not %s",
                            kiln_gemm_dtype_name(out));
  if (kiln_gemm_dtype_is_int(out) && (g->alpha != 1 || g->beta != 0))
    return KILN_ERR_INVALID("gemm: an integer gemm takes alpha 1 and beta 0 (got %g, %g)", g->alpha,
                            g->beta);
  if (g->batch < 1 || g->m < 1 || g->n < 1 || g->k < 1)
    return KILN_ERR_INVALID("gemm: dimensions must be positive (batch=%" PRId64 " m=%" PRId64
                            " n=%" PRId64 " k=%" PRId64 ")",
                            g->batch, g->m, g->n, g->k);
  /* BLAS takes 32-bit dimensions. */
  if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX)
    return KILN_ERR_INVALID("gemm: a dimension exceeds 2^31-1");
  int64_t es = (int64_t)kiln_gemm_dtype_size(g->dtype), os = (int64_t)kiln_gemm_dtype_size(out);
  int64_t a, b, c;
  if (!mul_ok(g->m, g->k, &a) || !mul_ok(a, g->batch, &a) || !mul_ok(a, es, &a) ||
      !mul_ok(g->k, g->n, &b) || !mul_ok(b, g->batch, &b) || !mul_ok(b, es, &b) ||
      !mul_ok(g->m, g->n, &c) || !mul_ok(c, g->batch, &c) || !mul_ok(c, os, &c))
    return KILN_ERR_INVALID("gemm: operand sizes overflow");
  if (a_bytes) *a_bytes = (size_t)a;
  if (b_bytes) *b_bytes = (size_t)b;
  if (c_bytes) *c_bytes = (size_t)c;
  return NULL;
}

static kiln_status raw_mem_alloc(void *ctx, size_t size, uint64_t *out) {
  kiln_device_t *dev = ctx;
  return dev->vt->mem_alloc(dev, size, out);
}

static void raw_mem_free(void *ctx, uint64_t p) {
  kiln_device_t *dev = ctx;
  dev->vt->mem_free(dev, p);
}

/* The device's allocator: caching unless the runtime options ask for the plain one. */
static kiln_status create_allocator(kiln_device_t *dev, bool plain) {
  kiln_device_allocator_raw_t raw = {.alloc = raw_mem_alloc, .free = raw_mem_free, .ctx = dev};
  kiln_device_allocator_options_t o = {
      .name = dev->name,
      .caching = !plain,
      .alignment = dev->kind == KILN_DEVICE_HOST ? 64 : 256,
      .host_memory = dev->kind == KILN_DEVICE_HOST,
  };
  return kiln_device_allocator_create(&raw, &o, &dev->allocator);
}

kiln_status kiln_device_init_common(kiln_device_t *dev, const kiln_device_vtable_t *vt,
                                    kiln_device_kind_t kind, const char *name) {
  dev->vt = vt;
  dev->kind = kind;
  snprintf(dev->name, sizeof(dev->name), "%s", name ? name : kiln_device_kind_name(kind));
  dev->cmd_cache = NULL;
  kiln_runtime_options_t ro = kiln_runtime_options();
  dev->allocator = NULL;
  KILN_RETURN_IF_ERROR(create_allocator(dev, ro.plain_allocator), "device %s", dev->name);
  if (vt->cmd_ops) {
    size_t cap = ro.command_buffer_cache_size ? ro.command_buffer_cache_size : 64;
    dev->cmd_cache = kiln_cmd_cache_create(dev, vt->cmd_ops, cap, ro.no_command_buffers);
    if (!dev->cmd_cache)
      return KILN_ERR_EXHAUSTED("device %s: out of host memory for its command-buffer cache",
                                dev->name);
  }
  return NULL;
}

void kiln_device_fini_common(kiln_device_t *dev) {
  kiln_cmd_cache_destroy(dev->cmd_cache);
  dev->cmd_cache = NULL;
  kiln_device_allocator_destroy(dev->allocator);
  dev->allocator = NULL;
}

kiln_status kiln_device_create(const char *kind, kiln_device_t **out) {
  if (!out) return KILN_ERR_INVALID("device create: NULL out");
  *out = NULL;
  if (!kind || !strcmp(kind, "host")) return kiln_host_device_create(0, out);
  if (!strcmp(kind, "cuda")) return kiln_cuda_device_create(0, out);
  if (!strcmp(kind, "best")) {
    kiln_status s = kiln_cuda_device_create(0, out);
    if (!s) return NULL;
    KILN_LOG_I("no usable GPU (%s); using the host device", kiln_status_message(s));
    kiln_status_free(s);
    return kiln_host_device_create(0, out);
  }
  return KILN_ERR_INVALID("unknown device kind '%s' (expected host, cuda or best)", kind);
}

void kiln_device_destroy(kiln_device_t *dev) {
  if (dev) dev->vt->destroy(dev);
}

/* ---- dispatch --------------------------------------------------------------------------- */

#define CHECK_STREAM(s) \
  if (!(s)) return KILN_ERR_INVALID("%s: NULL stream", __func__)

kiln_status kiln_device_mem_alloc(kiln_device_t *dev, size_t size, kiln_devptr_t *out) {
  if (!dev || !out) return KILN_ERR_INVALID("device alloc: NULL device or out");
  *out = 0;
  return kiln_device_allocator_alloc(dev->allocator, size, out);
}

void kiln_device_mem_free(kiln_device_t *dev, kiln_devptr_t p) {
  if (dev && p) kiln_device_allocator_free(dev->allocator, p);
}

void kiln_device_memory_stats(kiln_device_t *dev, kiln_device_allocator_stats_t *out) {
  kiln_device_allocator_get_stats(dev ? dev->allocator : NULL, out);
}

void kiln_device_memory_trim(kiln_device_t *dev) {
  if (dev) kiln_device_allocator_trim(dev->allocator);
}

kiln_status kiln_device_host_alloc(kiln_device_t *dev, size_t size, void **out) {
  if (!dev || !out) return KILN_ERR_INVALID("host alloc: NULL device or out");
  *out = NULL;
  return dev->vt->host_alloc(dev, size ? size : 1, out);
}

void kiln_device_host_free(kiln_device_t *dev, void *p) {
  if (dev && p) dev->vt->host_free(dev, p);
}

kiln_status kiln_stream_create(kiln_device_t *dev, kiln_stream_t **out) {
  if (!dev || !out) return KILN_ERR_INVALID("stream create: NULL device or out");
  *out = NULL;
  return dev->vt->stream_create(dev, out);
}

void kiln_stream_destroy(kiln_stream_t *s) {
  if (s) s->device->vt->stream_destroy(s);
}

kiln_status kiln_stream_synchronize(kiln_stream_t *s) {
  CHECK_STREAM(s);
  return s->device->vt->stream_synchronize(s);
}

void kiln_stream_overlap_begin(kiln_stream_t *s) {
  if (s && s->device->vt->stream_overlap) s->device->vt->stream_overlap(s, true);
}

void kiln_stream_overlap_end(kiln_stream_t *s) {
  if (s && s->device->vt->stream_overlap) s->device->vt->stream_overlap(s, false);
}

kiln_status kiln_stream_memcpy_d2d(kiln_stream_t *s, kiln_devptr_t dst, kiln_devptr_t src,
                                   size_t n) {
  CHECK_STREAM(s);
  if (n == 0) return NULL;
  if (!dst || !src) return KILN_ERR_INVALID("memcpy d2d: NULL address");
  return s->device->vt->memcpy_d2d(s, dst, src, n);
}

kiln_status kiln_stream_memcpy_h2d(kiln_stream_t *s, kiln_devptr_t dst, const void *src, size_t n) {
  CHECK_STREAM(s);
  if (n == 0) return NULL;
  if (!dst || !src) return KILN_ERR_INVALID("memcpy h2d: NULL address");
  return s->device->vt->memcpy_h2d(s, dst, src, n);
}

kiln_status kiln_stream_memcpy_d2h(kiln_stream_t *s, void *dst, kiln_devptr_t src, size_t n) {
  CHECK_STREAM(s);
  if (n == 0) return NULL;
  if (!dst || !src) return KILN_ERR_INVALID("memcpy d2h: NULL address");
  return s->device->vt->memcpy_d2h(s, dst, src, n);
}

kiln_status kiln_stream_memset(kiln_stream_t *s, kiln_devptr_t dst, uint32_t pattern, int elem_size,
                               size_t count) {
  CHECK_STREAM(s);
  if (elem_size != 1 && elem_size != 2 && elem_size != 4)
    return KILN_ERR_INVALID("memset: element size %d (expected 1, 2 or 4)", elem_size);
  if (count == 0) return NULL;
  if (!dst) return KILN_ERR_INVALID("memset: NULL address");
  return s->device->vt->memset(s, dst, pattern, elem_size, count);
}

kiln_status kiln_stream_launch(kiln_stream_t *s, const kiln_kernel_t *k,
                               const kiln_launch_dims_t *d, const uint64_t *args, int num_args) {
  CHECK_STREAM(s);
  if (!k || !k->handle || !d) return KILN_ERR_INVALID("launch: NULL kernel or dimensions");
  if (num_args < 0 || num_args > KILN_KERNEL_MAX_ARGS || (num_args && !args))
    return KILN_ERR_INVALID("launch %s: %d arguments (at most %d)", k->name, num_args,
                            KILN_KERNEL_MAX_ARGS);
  for (int i = 0; i < 3; i++)
    if (d->grid[i] == 0 || d->block[i] == 0)
      return KILN_ERR_INVALID("launch %s: zero grid or block dimension", k->name);
  return s->device->vt->launch(s, k, d, args, num_args);
}

kiln_status kiln_stream_gemm(kiln_stream_t *s, const kiln_gemm_desc_t *g, kiln_devptr_t a,
                             kiln_devptr_t b, kiln_devptr_t c) {
  CHECK_STREAM(s);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_gemm_desc_check(g, NULL, NULL, NULL));
  if (!a || !b || !c) return KILN_ERR_INVALID("gemm: NULL operand");
  if (!s->device->vt->gemm)
    return KILN_ERR_UNIMPLEMENTED("gemm is not available on device %s", s->device->name);
  return s->device->vt->gemm(s, g, a, b, c);
}

kiln_status kiln_event_create(kiln_device_t *dev, kiln_event_t **out) {
  if (!dev || !out) return KILN_ERR_INVALID("event create: NULL device or out");
  *out = NULL;
  return dev->vt->event_create(dev, out);
}

void kiln_event_destroy(kiln_event_t *e) {
  if (e) e->device->vt->event_destroy(e);
}

kiln_status kiln_event_record(kiln_event_t *e, kiln_stream_t *s) {
  CHECK_STREAM(s);
  if (!e || e->device != s->device) return KILN_ERR_INVALID("event record: bad event");
  return s->device->vt->event_record(e, s);
}

kiln_status kiln_stream_wait_event(kiln_stream_t *s, kiln_event_t *e) {
  CHECK_STREAM(s);
  if (!e || e->device != s->device) return KILN_ERR_INVALID("stream wait: bad event");
  return s->device->vt->stream_wait_event(s, e);
}

kiln_status kiln_event_synchronize(kiln_event_t *e) {
  if (!e) return KILN_ERR_INVALID("event synchronize: NULL event");
  return e->device->vt->event_synchronize(e);
}

kiln_status kiln_device_module_load(kiln_device_t *dev, const kiln_module_image_t *image,
                                    kiln_device_module_t **out) {
  if (!dev || !image || !out) return KILN_ERR_INVALID("module load: NULL argument");
  *out = NULL;
  return dev->vt->module_load(dev, image, out);
}

void kiln_device_module_unload(kiln_device_module_t *m) {
  if (!m) return;
  /* No cached command buffer may outlive the kernels it launches. */
  kiln_cmd_cache_forget_module(m->device->cmd_cache, m);
  m->device->vt->module_unload(m);
}

kiln_status kiln_device_module_get_kernel(kiln_device_module_t *m, const char *name,
                                          const kiln_kernel_t **out) {
  if (!m || !name || !out) return KILN_ERR_INVALID("get kernel: NULL argument");
  *out = NULL;
  return m->device->vt->module_get_kernel(m, name, out);
}
