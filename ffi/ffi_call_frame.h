/* FFI call frames: the XLA_FFI_CallFrame a handler receives, built once per custom call from
 * kiln-level descriptions (FFI data type, dims and an address per argument and result; an
 * attribute dictionary), then reused: each execution patches only buffer addresses.
 *
 * Data types are FFI's own numbers (XLA_FFI_DataType); mapping kiln's element types to them
 * is the caller's (ffi/ does not see compiler/). Ownership: the frame copies the dims; the
 * attributes are borrowed and must outlive the frame. A frame serves one call at a time. */
#ifndef KILN_FFI_FFI_CALL_FRAME_H_
#define KILN_FFI_FFI_CALL_FRAME_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "ffi/ffi_api.h"
#include "ffi/ffi_attrs.h"
#include "kiln/ffi_c_api.h"

typedef struct kiln_ffi_buffer_desc {
  XLA_FFI_DataType dtype;
  int64_t rank;
  const int64_t *dims; /* copied; may be NULL when rank is 0 */
  void *data;          /* initial address; patched per execution */
} kiln_ffi_buffer_desc_t;

typedef struct kiln_ffi_call_frame {
  XLA_FFI_CallFrame frame;
  XLA_FFI_Buffer *buffers; /* args then rets */
  size_t nargs, nrets;
} kiln_ffi_call_frame_t;

/* Builds a frame. `attrs` may be NULL (no attributes) and must be finalized. INVALID_ARGUMENT
 * for an unknown data type, a negative rank or dimension, or missing dims. */
kiln_status kiln_ffi_call_frame_create(const kiln_ffi_buffer_desc_t *args, size_t nargs,
                                       const kiln_ffi_buffer_desc_t *rets, size_t nrets,
                                       const kiln_ffi_attrs_t *attrs, kiln_ffi_call_frame_t **out);
void kiln_ffi_call_frame_destroy(kiln_ffi_call_frame_t *cf); /* NULL is fine */

/* Per-execution patching (no checks beyond the index: this is the hot path). */
static inline void kiln_ffi_call_frame_set_arg(kiln_ffi_call_frame_t *cf, size_t i, void *data) {
  cf->buffers[i].data = data;
}
static inline void kiln_ffi_call_frame_set_ret(kiln_ffi_call_frame_t *cf, size_t i, void *data) {
  cf->buffers[cf->nargs + i].data = data;
}
/* All addresses at once (`args` has nargs entries, `rets` nrets). */
void kiln_ffi_call_frame_patch(kiln_ffi_call_frame_t *cf, void *const *args, void *const *rets);

/* Calls `handler` for `stage` with context `ctx` (may be NULL for handlers that need none).
 * A handler's error becomes the returned status, annotated with `name` (the custom call) when
 * given. An asynchronous handler's future goes to *out_future (NULL if it returned none); if
 * out_future is NULL, a returned future is waited for and released here. */
kiln_status kiln_ffi_call_frame_invoke(kiln_ffi_call_frame_t *cf, XLA_FFI_Handler *handler,
                                       XLA_FFI_ExecutionStage stage, kiln_ffi_context_t *ctx,
                                       const char *name, XLA_FFI_Future **out_future);

/* Calls the bundle's handler for `stage`: a missing optional stage is a no-op (OK); a missing
 * execute handler is INVALID_ARGUMENT. */
kiln_status kiln_ffi_call_frame_invoke_bundle(kiln_ffi_call_frame_t *cf,
                                              const XLA_FFI_Handler_Bundle *bundle,
                                              XLA_FFI_ExecutionStage stage, kiln_ffi_context_t *ctx,
                                              const char *name, XLA_FFI_Future **out_future);

#endif /* KILN_FFI_FFI_CALL_FRAME_H_ */
