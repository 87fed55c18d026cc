/* Custom-call handlers in C for test_ffi_custom_call, bench_ffi_call and the corpus test:
 * typed XLA FFI handlers against kiln's include/kiln/ffi_c_api.h, and legacy handlers
 * (api_version 1-3) with XLA's signatures, reporting errors through XlaCustomCallStatus,
 * whose functions the loading program provides (as XLA's runtime does). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/ffi_c_api.h"

#define EXPORT __attribute__((visibility("default")))

/* XLA's custom_call_status.h, resolved in the loading program. */
typedef struct XlaCustomCallStatus_ XlaCustomCallStatus;
void XlaCustomCallStatusSetFailure(XlaCustomCallStatus *status, const char *message,
                                   size_t message_len);

static XLA_FFI_Error *fail(const XLA_FFI_Api *api, const char *msg) {
  XLA_FFI_Error_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  a.message = msg;
  a.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  return api->XLA_FFI_Error_Create(&a);
}

/* Answers the metadata query (true) with `traits`; false for a real call. */
static bool metadata_traits(XLA_FFI_CallFrame *f, XLA_FFI_Handler_Traits traits) {
  if (!f->extension_start || f->extension_start->type != XLA_FFI_Extension_Metadata) return false;
  XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)f->extension_start)->metadata;
  md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  md->api_version.major_version = XLA_FFI_API_MAJOR;
  md->api_version.minor_version = XLA_FFI_API_MINOR;
  md->traits = traits;
  return true;
}

static bool metadata(XLA_FFI_CallFrame *f) {
  return metadata_traits(f, 0);
}

static int64_t count(const XLA_FFI_Buffer *b) {
  int64_t n = 1;
  for (int64_t i = 0; i < b->rank; i++) n *= b->dims[i];
  return n;
}

/* Verify-style checks: arg 0 must be s32[2,3], ret 0 f32[2,3]; ret = float(arg) + 0.5. */
EXPORT XLA_FFI_Error *kiln_call_s32_to_f32(XLA_FFI_CallFrame *f) {
  if (metadata(f)) return NULL;
  if (f->args.size != 1 || f->rets.size != 1) return fail(f->api, "s32_to_f32: 1 arg, 1 result");
  const XLA_FFI_Buffer *a = f->args.args[0], *r = f->rets.rets[0];
  if (a->dtype != XLA_FFI_DataType_S32) return fail(f->api, "s32_to_f32: arg 0 must be s32");
  if (r->dtype != XLA_FFI_DataType_F32) return fail(f->api, "s32_to_f32: ret 0 must be f32");
  if (a->rank != 2 || a->dims[0] != 2 || a->dims[1] != 3)
    return fail(f->api, "s32_to_f32: arg 0 must have dims [2,3]");
  if (r->rank != 2 || r->dims[0] != 2 || r->dims[1] != 3)
    return fail(f->api, "s32_to_f32: ret 0 must have dims [2,3]");
  const int32_t *x = a->data;
  float *y = r->data;
  for (int i = 0; i < 6; i++) y[i] = (float)x[i] + 0.5f;
  return NULL;
}

/* The FFI data type code of arg 0 and its first byte, as s32[2] (element types reach a handler
 * with XLA's codes). */
EXPORT XLA_FFI_Error *kiln_call_dtype_of(XLA_FFI_CallFrame *f) {
  if (metadata(f)) return NULL;
  if (f->args.size != 1 || f->rets.size != 1) return fail(f->api, "dtype_of: 1 arg, 1 result");
  const XLA_FFI_Buffer *a = f->args.args[0], *r = f->rets.rets[0];
  if (r->dtype != XLA_FFI_DataType_S32 || r->rank != 1 || r->dims[0] != 2)
    return fail(f->api, "dtype_of: ret 0 must be s32[2]");
  int32_t *out = r->data;
  out[0] = (int32_t)a->dtype;
  out[1] = count(a) > 0 ? *(const uint8_t *)a->data : -1;
  return NULL;
}

/* In place: fails unless the result shares the operand's buffer (output_to_operand_aliasing),
 * then doubles it. */
EXPORT XLA_FFI_Error *kiln_call_double_in_place(XLA_FFI_CallFrame *f) {
  if (metadata(f)) return NULL;
  const XLA_FFI_Buffer *a = f->args.args[0], *r = f->rets.rets[0];
  if (a->data != r->data) return fail(f->api, "double_in_place: the result is not aliased");
  float *y = r->data;
  for (int64_t i = 0; i < count(r); i++) y[i] *= 2;
  return NULL;
}

/* The benchmark's no-op: 4 buffers and 4 attributes, touches nothing. */
EXPORT XLA_FFI_Error *kiln_call_noop(XLA_FFI_CallFrame *f) {
  if (metadata(f)) return NULL;
  return NULL;
}

/* ret = 2 * arg + 1 over f32 buffers of any shape; an arg whose first element is below -100
 * is a failure. */
static XLA_FFI_Error *affine(XLA_FFI_CallFrame *f, const char *name) {
  if (f->args.size != 1 || f->rets.size != 1) return fail(f->api, "affine: 1 arg, 1 result");
  const XLA_FFI_Buffer *a = f->args.args[0], *r = f->rets.rets[0];
  if (a->dtype != XLA_FFI_DataType_F32 || r->dtype != XLA_FFI_DataType_F32 || count(a) != count(r))
    return fail(f->api, "affine: f32 arg and result of one size");
  const float *x = a->data;
  float *y = r->data;
  if (count(a) > 0 && x[0] < -100) return fail(f->api, name);
  for (int64_t i = 0; i < count(a); i++) y[i] = 2 * x[i] + 1;
  return NULL;
}

/* The same call, registered command-buffer compatible through its metadata (it touches only
 * its buffers, so it may run inside a command buffer) ... */
EXPORT XLA_FFI_Error *kiln_call_affine_cb(XLA_FFI_CallFrame *f) {
  if (metadata_traits(f, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE)) return NULL;
  return affine(f, "affine_cb: input below -100");
}

/* ... and without the trait (it splits command buffers). */
EXPORT XLA_FFI_Error *kiln_call_affine(XLA_FFI_CallFrame *f) {
  if (metadata(f)) return NULL;
  return affine(f, "affine: input below -100");
}

/* Legacy api_version 1 (ORIGINAL): out f32[8] = in[0] + in[1]. */
EXPORT void kiln_legacy_add8(void *out, const void **in) {
  const float *a = in[0], *b = in[1];
  float *o = out;
  for (int i = 0; i < 8; i++) o[i] = a[i] + b[i];
}

/* Legacy api_version 2 (STATUS_RETURNING), tuple result: out is an array of the leaves'
 * addresses: out[0] = 2 * in[0], out[1] = in[0] + 1 (f32[8] each). A first element below
 * -100 is a failure. */
EXPORT void kiln_legacy_pair8(void *out, const void **in, XlaCustomCallStatus *status) {
  void **outs = out;
  const float *a = in[0];
  if (a[0] < -100) {
    static const char msg[] = "legacy pair8: input below -100";
    XlaCustomCallStatusSetFailure(status, msg, sizeof(msg) - 1);
    return;
  }
  float *x = outs[0], *y = outs[1];
  for (int i = 0; i < 8; i++) {
    x[i] = 2 * a[i];
    y[i] = a[i] + 1;
  }
}

/* Legacy api_version 3 (STATUS_RETURNING_UNIFIED): out f32[8] = in[0] * the scale the opaque
 * string holds; an empty opaque string is a failure. */
EXPORT void kiln_legacy_scale8(void *out, const void **in, const char *opaque, size_t len,
                               XlaCustomCallStatus *status) {
  if (len == 0) {
    static const char msg[] = "legacy scale8: no scale in the opaque string";
    XlaCustomCallStatusSetFailure(status, msg, sizeof(msg) - 1);
    return;
  }
  char buf[64];
  size_t n = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
  memcpy(buf, opaque, n);
  buf[n] = '\0';
  float s = strtof(buf, NULL);
  const float *a = in[0];
  float *o = out;
  for (int i = 0; i < 8; i++) o[i] = a[i] * s;
}

/* The corpus's made-up targets (foo, bar, some_target, CustomCallTuple, ...): every element of
 * result leaf r becomes r + 1, whatever the operands; test_corpus_custom_calls gives the
 * evaluator the same rule. */
static XLA_FFI_Error *fill(XLA_FFI_CallFrame *f);

EXPORT XLA_FFI_Error *kiln_call_fill(XLA_FFI_CallFrame *f) {
  if (metadata(f)) return NULL;
  return fill(f);
}

/* kiln_call_fill registered command-buffer compatible (the corpus test's second pass). */
EXPORT XLA_FFI_Error *kiln_call_fill_cb(XLA_FFI_CallFrame *f) {
  if (metadata_traits(f, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE)) return NULL;
  return fill(f);
}

static XLA_FFI_Error *fill(XLA_FFI_CallFrame *f) {
  for (int64_t r = 0; r < f->rets.size; r++) {
    const XLA_FFI_Buffer *o = f->rets.rets[r];
    int64_t n = count(o);
    double v = (double)(r + 1);
    for (int64_t i = 0; i < n; i++) {
      switch (o->dtype) {
        case XLA_FFI_DataType_PRED:
          ((uint8_t *)o->data)[i] = 1;
          break;
        case XLA_FFI_DataType_S8:
        case XLA_FFI_DataType_U8:
          ((uint8_t *)o->data)[i] = (uint8_t)v;
          break;
        case XLA_FFI_DataType_S16:
        case XLA_FFI_DataType_U16:
          ((uint16_t *)o->data)[i] = (uint16_t)v;
          break;
        case XLA_FFI_DataType_S32:
        case XLA_FFI_DataType_U32:
          ((uint32_t *)o->data)[i] = (uint32_t)v;
          break;
        case XLA_FFI_DataType_S64:
        case XLA_FFI_DataType_U64:
          ((uint64_t *)o->data)[i] = (uint64_t)v;
          break;
        case XLA_FFI_DataType_F32:
          ((float *)o->data)[i] = (float)v;
          break;
        case XLA_FFI_DataType_F64:
          ((double *)o->data)[i] = v;
          break;
        /* 1.0 and 2.0 as f16 / bf16 bit patterns (r + 1 <= 2 in the corpus). */
        case XLA_FFI_DataType_F16:
          ((uint16_t *)o->data)[i] = r == 0 ? 0x3C00 : 0x4000;
          break;
        case XLA_FFI_DataType_BF16:
          ((uint16_t *)o->data)[i] = r == 0 ? 0x3F80 : 0x4000;
          break;
        default:
          return fail(f->api, "fill: unsupported result type");
      }
    }
  }
  return NULL;
}
