/* FFI handlers written in C against kiln's include/kiln/ffi_c_api.h, built into a shared
 * library that test_ffi_loading opens with dlopen through the registry's spec strings. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kiln/ffi_c_api.h"

#define EXPORT __attribute__((visibility("default")))

static XLA_FFI_Error *make_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code errc, const char *msg) {
  XLA_FFI_Error_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  a.message = msg;
  a.errc = errc;
  return api->XLA_FFI_Error_Create(&a);
}

/* Answers the metadata query (registration) with the given version; true if it was one. */
static bool answer_metadata(XLA_FFI_CallFrame *f, int major, int minor, uint32_t traits) {
  if (!f->extension_start || f->extension_start->type != XLA_FFI_Extension_Metadata) return false;
  XLA_FFI_Metadata_Extension *ext = (XLA_FFI_Metadata_Extension *)f->extension_start;
  ext->metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  ext->metadata->api_version.major_version = major;
  ext->metadata->api_version.minor_version = minor;
  ext->metadata->traits = traits;
  return true;
}

static int64_t count(const XLA_FFI_Buffer *b) {
  int64_t n = 1;
  for (int64_t i = 0; i < b->rank; i++) n *= b->dims[i];
  return n;
}

/* out = a + b, all f32 of the same element count. */
EXPORT XLA_FFI_Error *kiln_test_c_add_f32(XLA_FFI_CallFrame *f) {
  if (answer_metadata(f, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR,
                      XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE))
    return NULL;
  if (f->args.size != 2 || f->rets.size != 1)
    return make_error(f->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "add_f32: 2 args, 1 result");
  XLA_FFI_Buffer *a = f->args.args[0], *b = f->args.args[1], *o = f->rets.rets[0];
  if (a->dtype != XLA_FFI_DataType_F32 || b->dtype != XLA_FFI_DataType_F32 ||
      o->dtype != XLA_FFI_DataType_F32)
    return make_error(f->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "add_f32: f32 buffers only");
  int64_t n = count(o);
  if (count(a) != n || count(b) != n)
    return make_error(f->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "add_f32: sizes differ");
  const float *x = a->data, *y = b->data;
  float *z = o->data;
  for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i];
  return NULL;
}

EXPORT XLA_FFI_Error *kiln_test_c_fail(XLA_FFI_CallFrame *f) {
  if (answer_metadata(f, XLA_FFI_API_MAJOR, 2, 0)) return NULL;
  return make_error(f->api, XLA_FFI_Error_Code_INTERNAL, "C handler failed on purpose");
}

/* Reports a version kiln does not accept. */
EXPORT XLA_FFI_Error *kiln_test_c_wrong_version(XLA_FFI_CallFrame *f) {
  if (answer_metadata(f, 1, 0, 0)) return NULL;
  return NULL;
}

EXPORT XLA_FFI_Error *kiln_test_c_future_minor(XLA_FFI_CallFrame *f) {
  if (answer_metadata(f, 0, 99, 0)) return NULL;
  return NULL;
}

/* Does not answer the metadata query (runs as if executed, returning an error). */
EXPORT XLA_FFI_Error *kiln_test_c_no_metadata(XLA_FFI_CallFrame *f) {
  if (f->args.size == 0) return NULL;
  return NULL;
}
