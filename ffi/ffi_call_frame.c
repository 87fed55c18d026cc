/* FFI call frames: one allocation per frame holding the buffers, the pointer and type arrays
 * and the dims, so building is one malloc and patching touches only `data` members. */
#include "ffi/ffi_call_frame.h"

#include <string.h>

#include "base/alloc.h"

static kiln_status check_desc(const kiln_ffi_buffer_desc_t *d, const char *what, size_t i) {
  if (!kiln_ffi_dtype_is_valid(d->dtype))
    return KILN_ERR_INVALID("FFI call frame: %s %zu has unknown data type %d", what, i,
                            (int)d->dtype);
  if (d->rank < 0 || d->rank > 64)
    return KILN_ERR_INVALID("FFI call frame: %s %zu has rank %lld", what, i, (long long)d->rank);
  if (d->rank > 0 && !d->dims)
    return KILN_ERR_INVALID("FFI call frame: %s %zu has rank %lld but no dims", what, i,
                            (long long)d->rank);
  for (int64_t k = 0; k < d->rank; k++)
    if (d->dims[k] < 0)
      return KILN_ERR_INVALID("FFI call frame: %s %zu has negative dimension %lld", what, i,
                              (long long)d->dims[k]);
  return NULL;
}

kiln_status kiln_ffi_call_frame_create(const kiln_ffi_buffer_desc_t *args, size_t nargs,
                                       const kiln_ffi_buffer_desc_t *rets, size_t nrets,
                                       const kiln_ffi_attrs_t *attrs, kiln_ffi_call_frame_t **out) {
  if (!out) return KILN_ERR_INVALID("kiln_ffi_call_frame_create: NULL out");
  *out = NULL;
  if ((nargs && !args) || (nrets && !rets))
    return KILN_ERR_INVALID("kiln_ffi_call_frame_create: NULL descriptions");
  if (attrs && !kiln_ffi_attrs_get(attrs))
    return KILN_ERR_INVALID("kiln_ffi_call_frame_create: attributes are not finalized");
  size_t total_rank = 0;
  for (size_t i = 0; i < nargs; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(check_desc(&args[i], "argument", i));
    total_rank += (size_t)args[i].rank;
  }
  for (size_t i = 0; i < nrets; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(check_desc(&rets[i], "result", i));
    total_rank += (size_t)rets[i].rank;
  }
  size_t n = nargs + nrets;
  /* Layout: header | buffers[n] | ptrs[n] | dims[total_rank] | arg types | ret types. */
  size_t off_buf = (sizeof(kiln_ffi_call_frame_t) + 15) & ~(size_t)15;
  size_t off_ptr = off_buf + n * sizeof(XLA_FFI_Buffer);
  size_t off_dims = off_ptr + n * sizeof(void *);
  size_t off_at = off_dims + total_rank * sizeof(int64_t);
  size_t off_rt = off_at + nargs * sizeof(XLA_FFI_ArgType);
  size_t size = off_rt + nrets * sizeof(XLA_FFI_RetType);
  char *mem = kiln_try_calloc(1, size);
  if (!mem) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "FFI call frame: out of memory");
  kiln_ffi_call_frame_t *cf = (kiln_ffi_call_frame_t *)mem;
  cf->buffers = (XLA_FFI_Buffer *)(mem + off_buf);
  void **ptrs = (void **)(mem + off_ptr);
  int64_t *dims = (int64_t *)(mem + off_dims);
  XLA_FFI_ArgType *at = (XLA_FFI_ArgType *)(mem + off_at);
  XLA_FFI_RetType *rt = (XLA_FFI_RetType *)(mem + off_rt);
  cf->nargs = nargs;
  cf->nrets = nrets;
  for (size_t i = 0; i < n; i++) {
    const kiln_ffi_buffer_desc_t *d = i < nargs ? &args[i] : &rets[i - nargs];
    XLA_FFI_Buffer *b = &cf->buffers[i];
    b->struct_size = XLA_FFI_Buffer_STRUCT_SIZE;
    b->dtype = d->dtype;
    b->data = d->data;
    b->rank = d->rank;
    b->dims = dims;
    if (d->rank) memcpy(dims, d->dims, (size_t)d->rank * sizeof(int64_t));
    dims += d->rank;
    ptrs[i] = b;
  }
  for (size_t i = 0; i < nargs; i++) at[i] = XLA_FFI_ArgType_BUFFER;
  for (size_t i = 0; i < nrets; i++) rt[i] = XLA_FFI_RetType_BUFFER;
  XLA_FFI_CallFrame *f = &cf->frame;
  f->struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  f->api = kiln_ffi_api();
  f->args.struct_size = XLA_FFI_Args_STRUCT_SIZE;
  f->args.size = (int64_t)nargs;
  f->args.types = at;
  f->args.args = ptrs;
  f->rets.struct_size = XLA_FFI_Rets_STRUCT_SIZE;
  f->rets.size = (int64_t)nrets;
  f->rets.types = rt;
  f->rets.rets = ptrs + nargs;
  const XLA_FFI_Attrs *fa = attrs ? kiln_ffi_attrs_get(attrs) : NULL;
  if (fa) {
    f->attrs = *fa;
  } else {
    f->attrs.struct_size = XLA_FFI_Attrs_STRUCT_SIZE;
  }
  *out = cf;
  return NULL;
}

void kiln_ffi_call_frame_destroy(kiln_ffi_call_frame_t *cf) {
  kiln_free(cf);
}

void kiln_ffi_call_frame_patch(kiln_ffi_call_frame_t *cf, void *const *args, void *const *rets) {
  for (size_t i = 0; i < cf->nargs; i++) cf->buffers[i].data = args[i];
  for (size_t i = 0; i < cf->nrets; i++) cf->buffers[cf->nargs + i].data = rets[i];
}

kiln_status kiln_ffi_call_frame_invoke(kiln_ffi_call_frame_t *cf, XLA_FFI_Handler *handler,
                                       XLA_FFI_ExecutionStage stage, kiln_ffi_context_t *ctx,
                                       const char *name, XLA_FFI_Future **out_future) {
  if (out_future) *out_future = NULL;
  XLA_FFI_CallFrame *f = &cf->frame;
  f->stage = stage;
  f->ctx = ctx;
  f->future = NULL;
  f->extension_start = NULL;
  XLA_FFI_Error *err = handler(f);
  XLA_FFI_Future *fut = f->future;
  if (__builtin_expect(err == NULL && fut == NULL, 1)) return NULL;
  kiln_status s = kiln_ffi_error_to_status(err);
  if (fut) {
    if (s || !out_future) {
      /* On error the runtime does not wait: drop our reference (the completer keeps its own). */
      if (!s) s = kiln_ffi_future_wait(fut);
      kiln_ffi_future_release(fut);
    } else {
      *out_future = fut;
    }
  }
  if (s && name) s = kiln_status_annotate(s, "in custom call '%s'", name);
  return s;
}

kiln_status kiln_ffi_call_frame_invoke_bundle(kiln_ffi_call_frame_t *cf,
                                              const XLA_FFI_Handler_Bundle *bundle,
                                              XLA_FFI_ExecutionStage stage, kiln_ffi_context_t *ctx,
                                              const char *name, XLA_FFI_Future **out_future) {
  if (out_future) *out_future = NULL;
  XLA_FFI_Handler *h = NULL;
  switch (stage) {
    case XLA_FFI_ExecutionStage_INSTANTIATE:
      h = bundle->instantiate;
      break;
    case XLA_FFI_ExecutionStage_PREPARE:
      h = bundle->prepare;
      break;
    case XLA_FFI_ExecutionStage_INITIALIZE:
      h = bundle->initialize;
      break;
    case XLA_FFI_ExecutionStage_EXECUTE:
      h = bundle->execute;
      break;
    case XLA_FFI_ExecutionStage_RECORD:
      h = bundle->record;
      break;
    default:
      return KILN_ERR_INVALID("FFI: unknown execution stage %d", (int)stage);
  }
  if (!h) {
    if (stage == XLA_FFI_ExecutionStage_EXECUTE)
      return KILN_ERR_INVALID("FFI: custom call '%s' has no execute handler", name ? name : "?");
    return NULL;
  }
  return kiln_ffi_call_frame_invoke(cf, h, stage, ctx, name, out_future);
}
