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
#include "ffi_example_util.h"

__attribute__((visibility("default"))) XLA_FFI_Error *kiln_gather_add(XLA_FFI_CallFrame *f) {
  if (ffi_example_answer_metadata(f)) return NULL;
  const XLA_FFI_Api *api = f->api;
  if (f->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  if (f->args.size != 2 || f->rets.size != 1)
    return ffi_example_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                             "gather_add: expected 2 args, 1 result");
  for (int64_t i = 0; i < 2; i++)
    if (f->args.types[i] != XLA_FFI_ArgType_BUFFER)
      return ffi_example_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                               "gather_add: arguments are buffers");
  const XLA_FFI_Buffer *b = f->args.args[0], *c = f->args.args[1];
  const XLA_FFI_Buffer *a = f->rets.rets[0];
  if (b->dtype != XLA_FFI_DataType_F32 || c->dtype != XLA_FFI_DataType_F32 ||
      a->dtype != XLA_FFI_DataType_F32)
    return ffi_example_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                             "gather_add: f32 buffers only");
  int64_t n = ffi_example_elements(c);
  if (ffi_example_elements(b) != 128 || ffi_example_elements(a) != n)
    return ffi_example_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                             "gather_add: B must be f32[128] and A, C of the same size");
  const float *bd = b->data, *cd = c->data;
  float *ad = a->data;
  for (int64_t i = 0; i < n; i++) ad[i] = bd[i % 128] + cd[i];
  return NULL;
}
