/* kiln's XLA FFI API table and the objects behind it: errors, registered types, futures,
 * per-handler-instance state and the execution context the runtime fills for each call.
 *
 * A handler calls back into kiln through `call_frame->api` (kiln_ffi_api()); every call gets
 * `call_frame->ctx`, which is a kiln_ffi_context_t filled by the runtime. ffi/ never includes
 * runtime/: the runtime hands in its stream, device ordinal, run id, device allocator and
 * host thread pool as plain fields and callbacks.
 *
 * Thread safety: the table's functions may be called from any thread. The type registry is
 * process-wide, guarded by a mutex, and ids never change once assigned. A context and a state
 * object belong to one call site: they are not shared between concurrent calls. */
#ifndef KILN_FFI_FFI_API_H_
#define KILN_FFI_FFI_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "kiln/ffi_c_api.h"

/* The platforms a handler is registered for. */
typedef enum kiln_ffi_platform {
  KILN_FFI_PLATFORM_HOST = 0,
  KILN_FFI_PLATFORM_CUDA = 1,
} kiln_ffi_platform_t;

/* "Host" / "CUDA". */
const char *kiln_ffi_platform_name(kiln_ffi_platform_t p);
/* Parses a platform name as XLA canonicalizes it: case-insensitive, "host" or "cpu" is Host,
 * "cuda" or "gpu" is CUDA. INVALID_ARGUMENT for anything else. */
kiln_status kiln_ffi_platform_parse(const char *name, size_t len, kiln_ffi_platform_t *out);

/* Per-handler-instance state: what a handler stores with XLA_FFI_State_Set at instantiate,
 * prepare or initialize, read back with XLA_FFI_State_Get at later stages. The runtime creates
 * one per custom-call instance, points its contexts at it, and destroys it with the
 * executable (which calls each stored object's type deleter). */
typedef struct kiln_ffi_state kiln_ffi_state_t;
kiln_ffi_state_t *kiln_ffi_state_create(void);
void kiln_ffi_state_destroy(kiln_ffi_state_t *s); /* NULL is fine */

/* One piece of user data attached to an execute (PJRT_FFI_UserData_Add): borrowed. */
typedef struct kiln_ffi_user_data {
  int64_t type_id;
  void *data;
} kiln_ffi_user_data_t;

/* The execution context a handler sees as `call_frame->ctx`. The runtime fills it (zero what
 * it does not provide) and keeps it alive for the duration of the call; ffi/ only reads it.
 * Callbacks are optional unless noted. */
struct XLA_FFI_InvokeContext {
  kiln_ffi_platform_t platform;
  void *stream;           /* XLA_FFI_Stream_Get: CUstream on CUDA, host stream handle on host */
  int32_t device_ordinal; /* XLA_FFI_DeviceOrdinal_Get */
  int64_t run_id;         /* XLA_FFI_RunId_Get */

  /* XLA_FFI_DeviceMemory_Allocate/Free. Without `allocate`, a Host context falls back to
   * aligned host memory and a CUDA context reports UNIMPLEMENTED. */
  void *allocator_user;
  kiln_status (*allocate)(void *user, size_t size, size_t alignment, void **out);
  kiln_status (*deallocate)(void *user, void *data, size_t size);

  /* XLA_FFI_ThreadPool_Schedule / NumThreads: UNIMPLEMENTED without `schedule` (XLA's C++
   * binding then runs the task inline). */
  void *pool_user;
  kiln_status (*schedule)(void *user, void (*task)(void *data), void *data);
  int64_t num_threads;

  /* XLA_FFI_InvokeContext_Get: user data by type id. */
  const kiln_ffi_user_data_t *user_data;
  size_t num_user_data;

  /* XLA_FFI_State_Set/Get: this instance's state (NULL: state calls fail with
   * FAILED_PRECONDITION). */
  kiln_ffi_state_t *state;

  /* XLA_FFI_InvokeContext_FindExtension: a chain of extensions (optional). */
  const XLA_FFI_Extension *extensions;
};
typedef struct XLA_FFI_InvokeContext kiln_ffi_context_t;

/* The table every call frame points to. Static, never NULL. */
const XLA_FFI_Api *kiln_ffi_api(void);

/* Errors: XLA_FFI_Error objects made by kiln (the same object XLA_FFI_Error_Create makes). */
XLA_FFI_Error *kiln_ffi_error_make(XLA_FFI_Error_Code errc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Turns a handler's error into a kiln_status (NULL stays NULL) and frees the error. */
kiln_status kiln_ffi_error_to_status(XLA_FFI_Error *err);
/* Turns a kiln_status into an FFI error (NULL stays NULL) and frees the status. */
XLA_FFI_Error *kiln_ffi_error_from_status(kiln_status s);
void kiln_ffi_error_free(XLA_FFI_Error *err);

/* Type registry (process-wide). With *id == 0 assigns an id (or returns the id `name` already
 * has); with a nonzero id checks it matches the name's earlier registration, or registers it
 * when both are new. `info` may be NULL (no deleter). */
kiln_status kiln_ffi_type_register(const char *name, size_t len, XLA_FFI_TypeId *id,
                                   const XLA_FFI_TypeInfo *info);
/* The id registered for `name`, or NOT_FOUND. */
kiln_status kiln_ffi_type_lookup(const char *name, size_t len, XLA_FFI_TypeId *out);

/* Futures an asynchronous handler returns in `call_frame->future`. The runtime owns one
 * reference (released with kiln_ffi_future_release, after or instead of waiting) and the
 * handler's side owns the other, released when it completes the future. */
bool kiln_ffi_future_is_ready(XLA_FFI_Future *f);
/* Blocks until the future completes; returns its error (as a status), or NULL. */
kiln_status kiln_ffi_future_wait(XLA_FFI_Future *f);
void kiln_ffi_future_release(XLA_FFI_Future *f);

/* Dtype facts in FFI's numbering: bits per element (0 for INVALID / unknown numbers; TOKEN is
 * 0), bytes for whole-byte types (sub-byte types: 1), and a name ("f32"). */
int kiln_ffi_dtype_bits(XLA_FFI_DataType t);
size_t kiln_ffi_dtype_byte_size(XLA_FFI_DataType t);
const char *kiln_ffi_dtype_name(XLA_FFI_DataType t);
bool kiln_ffi_dtype_is_valid(XLA_FFI_DataType t);

#endif /* KILN_FFI_FFI_API_H_ */
