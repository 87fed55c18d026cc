/* FFI custom calls in the runtime (ffi_call.h). */
#include "runtime/ffi_call.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "ffi/ffi_legacy.h"
#include "runtime/cuda/cuda_device.h"

/* One frame with its context and (legacy) address arrays: what one execution uses. */
typedef struct slot {
  kiln_ffi_call_frame_t *cf; /* typed */
  kiln_ffi_context_t ctx;
  void **addrs; /* legacy: nargs + nrets addresses (args then rets) */
  struct slot *next_free, *next_all;
} slot_t;

struct kiln_ffi_call {
  char *name;
  char *target;
  kiln_ffi_handler_t handler;
  int version;
  bool legacy; /* api_version 1-3: call handler.legacy */
  kiln_ffi_platform_t platform;
  kiln_ffi_attrs_t *attrs;
  char *opaque;
  size_t opaque_len;
  kiln_ffi_buffer_desc_t *args, *rets; /* dims point into `dims` */
  int64_t *dims;
  size_t nargs, nrets;
  bool tuple_result;
  kiln_ffi_state_t *state;
  kiln_device_t *device; /* from initialize */
  slot_t first;
  atomic_flag first_busy;
  pthread_mutex_t mu; /* extra slots */
  slot_t *free_list, *extra;
};

/* Handler libraries an executable loads resolve XLA_FFI_GetApi, xla::ffi::GetXlaFfiApi and
 * XlaCustomCallStatusSetFailure in it (with -rdynamic): referencing them here keeps them
 * linked into every program that can run a custom call. */
const void *const kiln_ffi_call_exported_symbols[] = {
    (const void *)XLA_FFI_GetApi,
    (const void *)XlaCustomCallStatusSetSuccess,
    (const void *)XlaCustomCallStatusSetFailure,
};

static kiln_status device_allocate(void *user, size_t size, size_t alignment, void **out) {
  (void)alignment; /* device allocations are at least 256-byte aligned */
  kiln_devptr_t p = 0;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_device_mem_alloc(user, size ? size : 1, &p));
  *out = (void *)(uintptr_t)p;
  return NULL;
}

static kiln_status device_deallocate(void *user, void *data, size_t size) {
  (void)size;
  kiln_device_mem_free(user, (kiln_devptr_t)(uintptr_t)data);
  return NULL;
}

static void context_init(const kiln_ffi_call_t *c, kiln_ffi_context_t *ctx) {
  memset(ctx, 0, sizeof(*ctx));
  ctx->platform = c->platform;
  ctx->state = c->state;
  ctx->num_threads = 1;
  if (c->device) {
    ctx->allocator_user = c->device;
    ctx->allocate = device_allocate;
    ctx->deallocate = device_deallocate;
  }
}

static kiln_status slot_init(kiln_ffi_call_t *c, slot_t *s) {
  memset(s, 0, sizeof(*s));
  context_init(c, &s->ctx);
  if (c->legacy) {
    s->addrs = kiln_try_calloc(c->nargs + c->nrets + 1, sizeof(void *));
    return s->addrs ? NULL
                    : KILN_ERR_EXHAUSTED("custom call %s: out of host memory for its arguments",
                                         c->name);
  }
  return kiln_ffi_call_frame_create(c->args, c->nargs, c->rets, c->nrets, c->attrs, &s->cf);
}

static void slot_fini(slot_t *s) {
  kiln_ffi_call_frame_destroy(s->cf);
  kiln_free(s->addrs);
}

void kiln_ffi_call_destroy(void *p) {
  kiln_ffi_call_t *c = p;
  if (!c) return;
  slot_fini(&c->first);
  for (slot_t *s = c->extra; s;) {
    slot_t *n = s->next_all;
    slot_fini(s);
    kiln_free(s);
    s = n;
  }
  kiln_ffi_state_destroy(c->state);
  kiln_ffi_attrs_destroy(c->attrs);
  pthread_mutex_destroy(&c->mu);
  kiln_free(c->name);
  kiln_free(c->target);
  kiln_free(c->opaque);
  kiln_free(c->args);
  kiln_free(c->dims);
  kiln_free(c);
}

static size_t copy_descs(const kiln_ffi_buffer_desc_t *src, size_t n, kiln_ffi_buffer_desc_t *dst,
                         int64_t *dims, size_t at) {
  for (size_t i = 0; i < n; i++) {
    dst[i] = src[i];
    int64_t r = src[i].rank > 0 ? src[i].rank : 0;
    if (r) memcpy(dims + at, src[i].dims, (size_t)r * sizeof(int64_t));
    dst[i].dims = dims + at;
    at += (size_t)r;
  }
  return at;
}

kiln_status kiln_ffi_call_create(const kiln_ffi_call_desc_t *d, kiln_ffi_call_t **out) {
  if (out) *out = NULL;
  if (!d || !out || !d->handler) {
    if (d) kiln_ffi_attrs_destroy(d->attrs);
    return KILN_ERR_INVALID("kiln_ffi_call_create: NULL argument");
  }
  const char *name = d->name ? d->name : "?";
  const kiln_ffi_handler_t *h = d->handler;
  bool legacy = d->api_version >= 1 && d->api_version <= 3;
  if (legacy ? !h->legacy : !h->bundle.execute) {
    kiln_ffi_attrs_destroy(d->attrs);
    if (!legacy && d->api_version != 4)
      return KILN_ERR_INVALID("custom call %s: api_version %d (expected 1 to 4)", name,
                              d->api_version);
    return kiln_status_make(
        KILN_NOT_FOUND,
        "custom call %s: api_version %d needs %s handler for target '%s', but only %s one is "
        "registered (register it with %s)",
        name, d->api_version, legacy ? "a legacy" : "an XLA FFI", h->target,
        legacy ? "an XLA FFI" : "a legacy", legacy ? "lib.so:legacy=symbol" : "lib.so:symbol");
  }
  kiln_ffi_call_t *c = kiln_calloc(1, sizeof(*c));
  pthread_mutex_init(&c->mu, NULL);
  atomic_flag_clear(&c->first_busy);
  c->name = kiln_strdup(name);
  c->target = kiln_strdup(h->target ? h->target : "");
  c->handler = *h;
  c->handler.target = c->target;
  c->version = d->api_version;
  c->legacy = legacy;
  c->platform = h->platform;
  c->attrs = d->attrs;
  c->tuple_result = d->tuple_result;
  if (d->opaque) {
    c->opaque = kiln_malloc(d->opaque_len + 1);
    memcpy(c->opaque, d->opaque, d->opaque_len);
    c->opaque[d->opaque_len] = '\0';
    c->opaque_len = d->opaque_len;
  }
  c->nargs = d->nargs;
  c->nrets = d->nrets;
  size_t ndims = 0;
  for (size_t i = 0; i < d->nargs; i++) ndims += d->args[i].rank > 0 ? (size_t)d->args[i].rank : 0;
  for (size_t i = 0; i < d->nrets; i++) ndims += d->rets[i].rank > 0 ? (size_t)d->rets[i].rank : 0;
  c->args = kiln_calloc(d->nargs + d->nrets + 1, sizeof(kiln_ffi_buffer_desc_t));
  c->rets = c->args + d->nargs;
  c->dims = kiln_calloc(ndims + 1, sizeof(int64_t));
  size_t at = copy_descs(d->args, d->nargs, c->args, c->dims, 0);
  copy_descs(d->rets, d->nrets, c->rets, c->dims, at);
  c->state = kiln_ffi_state_create();
  kiln_status s = slot_init(c, &c->first);
  if (!s && !legacy)
    s = kiln_ffi_call_frame_invoke_bundle(c->first.cf, &c->handler.bundle,
                                          XLA_FFI_ExecutionStage_INSTANTIATE, &c->first.ctx,
                                          c->name, NULL);
  if (s) {
    kiln_ffi_call_destroy(c);
    return kiln_status_annotate(s, "while instantiating custom call %s (%s)", name, h->target);
  }
  *out = c;
  return NULL;
}

/* The thunk's initialize stage: prepare and initialize, with the device. */
static kiln_status call_init(void *ctx, kiln_device_t *device) {
  kiln_ffi_call_t *c = ctx;
  c->device = device;
  context_init(c, &c->first.ctx);
  if (c->legacy) return NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_ffi_call_frame_invoke_bundle(c->first.cf, &c->handler.bundle,
                                                               XLA_FFI_ExecutionStage_PREPARE,
                                                               &c->first.ctx, c->name, NULL));
  return kiln_ffi_call_frame_invoke_bundle(c->first.cf, &c->handler.bundle,
                                           XLA_FFI_ExecutionStage_INITIALIZE, &c->first.ctx,
                                           c->name, NULL);
}

static kiln_status slot_acquire(kiln_ffi_call_t *c, slot_t **out) {
  if (!atomic_flag_test_and_set_explicit(&c->first_busy, memory_order_acquire)) {
    *out = &c->first;
    return NULL;
  }
  kiln_mutex_lock(&c->mu);
  slot_t *s = c->free_list;
  if (s) c->free_list = s->next_free;
  kiln_mutex_unlock(&c->mu);
  if (s) {
    *out = s;
    return NULL;
  }
  s = kiln_try_calloc(1, sizeof(*s));
  if (!s) return KILN_ERR_EXHAUSTED("custom call %s: out of host memory for a call slot", c->name);
  kiln_status st = slot_init(c, s);
  if (st) {
    slot_fini(s);
    kiln_free(s);
    return st;
  }
  kiln_mutex_lock(&c->mu);
  s->next_all = c->extra;
  c->extra = s;
  kiln_mutex_unlock(&c->mu);
  *out = s;
  return NULL;
}

static void slot_release(kiln_ffi_call_t *c, slot_t *s) {
  if (s == &c->first) {
    atomic_flag_clear_explicit(&c->first_busy, memory_order_release);
    return;
  }
  kiln_mutex_lock(&c->mu);
  s->next_free = c->free_list;
  c->free_list = s;
  kiln_mutex_unlock(&c->mu);
}

static void *platform_stream(kiln_stream_t *stream) {
  if (stream && stream->device && stream->device->kind == KILN_DEVICE_CUDA)
    return (void *)((kiln_cuda_stream_t *)stream)->stream;
  return stream;
}

/* `in_stream`: called as a command of a command buffer, in stream order (on the host: as one
 * of the stream's own operations, so waiting for the stream would wait for itself). */
static kiln_status run(kiln_ffi_call_t *c, slot_t *sl, kiln_stream_t *stream,
                       const kiln_run_info_t *ri, const kiln_devptr_t *args,
                       const kiln_devptr_t *rets, bool in_stream) {
  bool gpu = c->platform == KILN_FFI_PLATFORM_CUDA;
  /* Host handlers read their operands now, on this thread: what is queued must have run. */
  if (!gpu && !in_stream && stream) {
    kiln_status s = kiln_stream_synchronize(stream);
    /* A failure of earlier work on the stream (e.g. a command buffer's custom call), not of
     * this call: say so before the thunk names this call. */
    if (s) return kiln_status_annotate(s, "found when the stream was waited for");
  }
  if (c->legacy) {
    void **a = sl->addrs;
    for (size_t i = 0; i < c->nargs; i++) a[i] = (void *)(uintptr_t)args[i];
    for (size_t i = 0; i < c->nrets; i++) a[c->nargs + i] = (void *)(uintptr_t)rets[i];
    void *out = c->tuple_result ? (void *)(a + c->nargs) : (c->nrets ? a[c->nargs] : NULL);
    return kiln_ffi_legacy_invoke(c->handler.legacy, c->version, gpu, platform_stream(stream), out,
                                  (const void **)a, a, c->opaque, c->opaque_len, c->name,
                                  c->target);
  }
  kiln_ffi_call_frame_t *cf = sl->cf;
  for (size_t i = 0; i < c->nargs; i++) cf->buffers[i].data = (void *)(uintptr_t)args[i];
  for (size_t i = 0; i < c->nrets; i++) cf->buffers[c->nargs + i].data = (void *)(uintptr_t)rets[i];
  sl->ctx.stream = platform_stream(stream);
  /* The execution's run id and user data (what PJRT_FFI_UserData_Add attached). */
  sl->ctx.run_id = ri ? ri->run_id : 0;
  sl->ctx.user_data = ri ? (const kiln_ffi_user_data_t *)ri->user_data : NULL;
  sl->ctx.num_user_data = ri ? ri->num_user_data : 0;
  /* NULL out_future: a future the handler returns is awaited here. */
  return kiln_ffi_call_frame_invoke(cf, c->handler.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE,
                                    &sl->ctx, NULL, NULL);
}

static kiln_status execute(kiln_ffi_call_t *c, kiln_stream_t *stream,
                           const kiln_run_info_t *run_info, const kiln_devptr_t *args, int nargs,
                           const kiln_devptr_t *rets, int nrets, bool in_stream) {
  if (__builtin_expect((size_t)nargs != c->nargs || (size_t)nrets != c->nrets, 0))
    return KILN_ERR_INTERNAL("custom call %s: %d operands and %d results for a call of %zu and %zu",
                             c->name, nargs, nrets, c->nargs, c->nrets);
  slot_t *sl = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(slot_acquire(c, &sl));
  kiln_status s = run(c, sl, stream, run_info, args, rets, in_stream);
  slot_release(c, sl);
  return s;
}

kiln_status kiln_ffi_call_execute(kiln_ffi_call_t *c, kiln_stream_t *stream,
                                  const kiln_run_info_t *run_info, const kiln_devptr_t *args,
                                  int nargs, const kiln_devptr_t *rets, int nrets) {
  return execute(c, stream, run_info, args, nargs, rets, nrets, false);
}

static kiln_status thunk_fn(void *ctx, kiln_stream_t *stream, const kiln_run_info_t *run_info,
                            const kiln_devptr_t *operands, int num_operands,
                            const kiln_devptr_t *results, int num_results) {
  return kiln_ffi_call_execute(ctx, stream, run_info, operands, num_operands, results, num_results);
}

/* The command-buffer form: the same call, in stream order (command_buffer.h). */
static kiln_status command_fn(void *ctx, kiln_stream_t *stream, const kiln_run_info_t *run_info,
                              const kiln_devptr_t *operands, int num_operands,
                              const kiln_devptr_t *results, int num_results) {
  return execute(ctx, stream, run_info, operands, num_operands, results, num_results, true);
}

bool kiln_ffi_call_command_buffer_compatible(const kiln_ffi_call_t *call) {
  return call && !call->legacy &&
         (call->handler.traits & XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE) != 0;
}

kiln_thunk_t *kiln_ffi_call_thunk_create(kiln_ffi_call_t *call, const kiln_slice_t *operands,
                                         int num_operands, const kiln_slice_t *results,
                                         int num_results) {
  bool compatible = kiln_ffi_call_command_buffer_compatible(call);
  kiln_thunk_t *t = kiln_thunk_custom_call_create(call->name, call->target, NULL, call, operands,
                                                  num_operands, results, num_results, compatible);
  kiln_thunk_custom_call_set_run(t, thunk_fn);
  kiln_thunk_custom_call_set_init(t, call_init);
  if (compatible) kiln_thunk_custom_call_set_command(t, command_fn);
  return t;
}
