/* FFI custom calls in the runtime: what a custom-call thunk calls for a handler from the FFI
 * registry (ffi/ffi_registry.h), typed (XLA FFI, api_version 4) or legacy (api_version 1-3,
 * ffi/ffi_legacy.h).
 *
 * Lifecycle, per custom-call instruction of an executable:
 *   kiln_ffi_call_create         (compile time) copies the buffer descriptions, takes the
 *                                attributes, builds the call frame once and runs the
 *                                handler's instantiate stage with the call's own state;
 *   the thunk's initialize stage (load) runs prepare and initialize with the device;
 *   each execution               patches only the buffer addresses into a frame, fills the
 *                                stream, the execution's run id and user data (the
 *                                thunk's kiln_run_info_t) into the context and calls execute; a
 *                                future the handler returns is awaited before the thunk ends.
 * On the host the thunk first waits for the stream (the handler reads its operands on the
 * calling thread) and passes the kiln_stream_t* as the platform stream; on CUDA it passes
 * the CUstream and does not wait (the handler enqueues its work). Inside a command buffer
 * the host handler runs as an operation of the stream (no wait) and a CUDA handler gets the
 * capturing stream once, when the command buffer is recorded (and again when its addresses
 * are patched): what it enqueued is replayed, the handler is not called again.
 *
 * Thread-safety: executions may run concurrently. The first frame is taken with an atomic
 * flag (the uncontended path: no lock, no allocation); a concurrent execution takes a frame
 * from a locked free list, cloned on first need. The per-instance state is shared by all
 * executions, as in XLA (handlers that write it at execute must synchronize themselves).
 * A call is owned by the executable description (kiln_executable_desc_own_with with
 * kiln_ffi_call_destroy). */
#ifndef KILN_RUNTIME_FFI_CALL_H_
#define KILN_RUNTIME_FFI_CALL_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "ffi/ffi_attrs.h"
#include "ffi/ffi_call_frame.h"
#include "ffi/ffi_registry.h"
#include "runtime/thunk.h"

typedef struct kiln_ffi_call kiln_ffi_call_t;

typedef struct kiln_ffi_call_desc {
  const char *name;                  /* the custom call (HLO instruction), for errors */
  const kiln_ffi_handler_t *handler; /* typed bundle or legacy function (copied) */
  int api_version;                   /* 1-3: legacy; 4: typed FFI */
  kiln_ffi_attrs_t *attrs;           /* typed: taken over, also on error (NULL: none) */
  const char *opaque;                /* legacy: the backend_config string (copied) */
  size_t opaque_len;
  const kiln_ffi_buffer_desc_t *args; /* operand leaves, flattened (dims copied) */
  size_t nargs;
  const kiln_ffi_buffer_desc_t *rets; /* result leaves, flattened */
  size_t nrets;
  bool tuple_result; /* legacy host: `out` is an array of the result leaves' addresses */
} kiln_ffi_call_desc_t;

/* Builds the call and runs the instantiate stage (a handler's error fails it, naming the
 * custom call). api_version 1-3 calls the handler's legacy function, 4 its typed bundle;
 * NOT_FOUND when the handler lacks that one. */
kiln_status kiln_ffi_call_create(const kiln_ffi_call_desc_t *d, kiln_ffi_call_t **out);
void kiln_ffi_call_destroy(void *call); /* a kiln_ffi_call_t*; NULL is fine */

/* Whether `call`'s handler was registered command-buffer compatible
 * (XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE, from registration or its metadata) for the
 * platform it was looked up on; legacy (api_version 1-3) calls never are. */
bool kiln_ffi_call_command_buffer_compatible(const kiln_ffi_call_t *call);

/* A custom-call thunk calling `call` (borrowed) with `operands` then `results` (the slices of
 * the args and rets, in order). A command-buffer compatible call's thunk is convertible: it is
 * recorded into command buffers as a KILN_CMD_CUSTOM_CALL command (command_buffer.h), whose
 * host replay calls the handler on the stream's worker without synchronizing and whose CUDA
 * recording captures the handler's work into a child graph. Any other call splits a run. */
kiln_thunk_t *kiln_ffi_call_thunk_create(kiln_ffi_call_t *call, const kiln_slice_t *operands,
                                         int num_operands, const kiln_slice_t *results,
                                         int num_results);

/* The execute path without a thunk (benchmarks, tests): patch `args`/`rets` and call, with the
 * execution's run info (NULL: run id 0, no user data). */
kiln_status kiln_ffi_call_execute(kiln_ffi_call_t *call, kiln_stream_t *stream,
                                  const kiln_run_info_t *run_info, const kiln_devptr_t *args,
                                  int nargs, const kiln_devptr_t *rets, int nrets);

#endif /* KILN_RUNTIME_FFI_CALL_H_ */
