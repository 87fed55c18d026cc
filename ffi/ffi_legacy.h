/* Legacy custom calls (HLO api_version 1-3): the calling conventions XLA had before the typed
 * FFI, and the XlaCustomCallStatus object status-returning handlers report through.
 *
 *   api_version 1 ORIGINAL                 host: void f(void *out, const void **in)
 *                                          CUDA: void f(CUstream, void **buffers,
 *                                                       const char *opaque, size_t len)
 *   api_version 2 STATUS_RETURNING         host: void f(void *out, const void **in,
 *                                                       XlaCustomCallStatus *status)
 *                                          CUDA: (stream, buffers, opaque, len, status)
 *   api_version 3 STATUS_RETURNING_UNIFIED host: void f(void *out, const void **in,
 *                                                       const char *opaque, size_t len,
 *                                                       XlaCustomCallStatus *status)
 *                                          CUDA: as api_version 2
 * On the host, `out` is the result's address, or for a tuple result an array of the leaves'
 * addresses; `in` the operand leaves' addresses. On CUDA, `buffers` holds the operand leaves
 * then the result leaves.
 *
 * Handlers report failure with XlaCustomCallStatusSetFailure, which kiln defines with default
 * visibility (as XLA's runtime does), so a handler library built against XLA's
 * custom_call_status.h resolves it in the process that loads it (executables need
 * -rdynamic). */
#ifndef KILN_FFI_FFI_LEGACY_H_
#define KILN_FFI_FFI_LEGACY_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef struct XlaCustomCallStatus_ XlaCustomCallStatus;
/* kiln's layout (handlers never see inside). */
struct XlaCustomCallStatus_ {
  bool failed;
  char *message; /* kiln_malloc'ed, NULL for success */
};

void XlaCustomCallStatusSetSuccess(XlaCustomCallStatus *status);
void XlaCustomCallStatusSetFailure(XlaCustomCallStatus *status, const char *message,
                                   size_t message_len);

typedef void (*kiln_ffi_legacy_host_v1_fn)(void *out, const void **in);
typedef void (*kiln_ffi_legacy_host_v2_fn)(void *out, const void **in, XlaCustomCallStatus *st);
typedef void (*kiln_ffi_legacy_host_v3_fn)(void *out, const void **in, const char *opaque,
                                           size_t opaque_len, XlaCustomCallStatus *st);
typedef void (*kiln_ffi_legacy_gpu_v1_fn)(void *stream, void **buffers, const char *opaque,
                                          size_t opaque_len);
typedef void (*kiln_ffi_legacy_gpu_v2_fn)(void *stream, void **buffers, const char *opaque,
                                          size_t opaque_len, XlaCustomCallStatus *st);

/* Calls legacy handler `fn` with api_version `version` (1-3). Host: `out` and `in` as above;
 * CUDA (`stream` non-NULL or `gpu`): `buffers`. A failure the handler reported becomes an
 * INTERNAL status "custom call NAME (TARGET) failed: MESSAGE". */
kiln_status kiln_ffi_legacy_invoke(void *fn, int version, bool gpu, void *stream, void *out,
                                   const void **in, void **buffers, const char *opaque,
                                   size_t opaque_len, const char *name, const char *target);

#endif /* KILN_FFI_FFI_LEGACY_H_ */
