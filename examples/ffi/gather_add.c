/* An XLA FFI custom-call handler in C, against kiln's include/kiln/ffi_c_api.h (the same
 * layout as OpenXLA's xla/ffi/api/c_api.h, so the library also runs under XLA):
 *
 *   A[i] = B[i % 128] + C[i]        B: f32[128], C: f32[N] (N a multiple of 128), A: f32[N]
 *
 * Build: cc -shared -fPIC -I include examples/ffi/gather_add.c -o libgather_add.so
 * Run:   kiln-run --backend=host --ffi=kiln_gather_add=./libgather_add.so:kiln_gather_add \
 *            examples/ffi/gather_add.hlo
 *
 * A handler is called with a call frame: at registration kiln asks it for its metadata (the
 * FFI version it was built for), then for each execution it reads its arguments, results and
 * attributes from the frame. Errors go back as XLA_FFI_Error objects made through the API. */
#include <stdint.h>
#include <string.h>

#include "kiln/ffi_c_api.h"

static XLA_FFI_Error *error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *msg) {
  XLA_FFI_Error_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  a.message = msg;
  a.errc = code;
  return api->XLA_FFI_Error_Create(&a);
}

/* The metadata query: a frame carrying the metadata extension asks for the version. */
static int answer_metadata(XLA_FFI_CallFrame *f) {
  if (!f->extension_start || f->extension_start->type != XLA_FFI_Extension_Metadata) return 0;
  XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)f->extension_start)->metadata;
  md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  md->api_version.major_version = XLA_FFI_API_MAJOR;
  md->api_version.minor_version = XLA_FFI_API_MINOR;
  md->traits = 0;
  return 1;
}

static int64_t elements(const XLA_FFI_Buffer *b) {
  int64_t n = 1;
  for (int64_t d = 0; d < b->rank; d++) n *= b->dims[d];
  return n;
}

__attribute__((visibility("default"))) XLA_FFI_Error *kiln_gather_add(XLA_FFI_CallFrame *f) {
  if (answer_metadata(f)) return NULL;
  const XLA_FFI_Api *api = f->api;
  if (f->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  if (f->args.size != 2 || f->rets.size != 1)
    return error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "gather_add: expected 2 args, 1 result");
  for (int64_t i = 0; i < 2; i++)
    if (f->args.types[i] != XLA_FFI_ArgType_BUFFER)
      return error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "gather_add: arguments are buffers");
  const XLA_FFI_Buffer *b = f->args.args[0], *c = f->args.args[1];
  const XLA_FFI_Buffer *a = f->rets.rets[0];
  if (b->dtype != XLA_FFI_DataType_F32 || c->dtype != XLA_FFI_DataType_F32 ||
      a->dtype != XLA_FFI_DataType_F32)
    return error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "gather_add: f32 buffers only");
  int64_t n = elements(c);
  if (elements(b) != 128 || elements(a) != n)
    return error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                 "gather_add: B must be f32[128] and A, C of the same size");
  const float *bd = b->data, *cd = c->data;
  float *ad = a->data;
  for (int64_t i = 0; i < n; i++) ad[i] = bd[i % 128] + cd[i];
  return NULL;
}
