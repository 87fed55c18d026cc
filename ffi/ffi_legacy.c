/* Legacy custom calls (ffi_legacy.h). */
#include "ffi/ffi_legacy.h"

#include <string.h>

#include "base/alloc.h"
#include "kiln/abi_macros.h"

KILN_ABI_EXPORT void XlaCustomCallStatusSetSuccess(XlaCustomCallStatus *status) {
  if (!status) return;
  kiln_free(status->message);
  status->message = NULL;
  status->failed = false;
}

KILN_ABI_EXPORT void XlaCustomCallStatusSetFailure(XlaCustomCallStatus *status, const char *message,
                                                   size_t message_len) {
  if (!status) return;
  /* XLA keeps the message up to its first NUL. */
  size_t n = message ? strnlen(message, message_len) : 0;
  kiln_free(status->message);
  status->message = kiln_malloc(n + 1);
  if (n) memcpy(status->message, message, n);
  status->message[n] = '\0';
  status->failed = true;
}

kiln_status kiln_ffi_legacy_invoke(void *fn, int version, bool gpu, void *stream, void *out,
                                   const void **in, void **buffers, const char *opaque,
                                   size_t opaque_len, const char *name, const char *target) {
  if (!fn) return KILN_ERR_INVALID("custom call %s (%s): no legacy handler", name, target);
  if (version < 1 || version > 3)
    return KILN_ERR_INVALID("custom call %s (%s): legacy api_version %d (expected 1 to 3)", name,
                            target, version);
  XlaCustomCallStatus st = {false, NULL};
  if (!opaque) opaque = "";
  if (gpu) {
    if (version == 1)
      ((kiln_ffi_legacy_gpu_v1_fn)fn)(stream, buffers, opaque, opaque_len);
    else
      ((kiln_ffi_legacy_gpu_v2_fn)fn)(stream, buffers, opaque, opaque_len, &st);
  } else if (version == 1) {
    ((kiln_ffi_legacy_host_v1_fn)fn)(out, in);
  } else if (version == 2) {
    ((kiln_ffi_legacy_host_v2_fn)fn)(out, in, &st);
  } else {
    ((kiln_ffi_legacy_host_v3_fn)fn)(out, in, opaque, opaque_len, &st);
  }
  if (!st.failed) return NULL;
  kiln_status s = kiln_status_make(KILN_INTERNAL, "custom call %s (%s) failed: %s", name, target,
                                   st.message ? st.message : "");
  kiln_free(st.message);
  return s;
}
