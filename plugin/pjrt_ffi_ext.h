/* PJRT's FFI extension (kiln/pjrt_ffi_extension.h, type 5) over kiln's FFI registry:
 * register_handler puts an XLA FFI handler into the process-wide registry the compiler looks
 * custom calls up in (ffi/ffi_registry.h), type_register goes to the FFI type registry.
 * user_data_add attaches a client's (borrowed) object of a registered type to a
 * PJRT_ExecuteContext; an execute given that context passes the objects to every FFI custom
 * call it runs, which reads them with XLA_FFI_ExecutionContext_Get (kiln: InvokeContext_Get).
 *
 * Wiring (the lead's): plugin/pjrt_plugin.c's kiln_pjrt_extensions() returns
 * kiln_pjrt_ffi_extension() (the chain's head; its `next` is NULL). */
#ifndef KILN_PLUGIN_PJRT_FFI_EXT_H_
#define KILN_PLUGIN_PJRT_FFI_EXT_H_

#include "kiln/pjrt_c_api.h"

/* The extension object (static, never NULL). */
PJRT_Extension_Base *kiln_pjrt_ffi_extension(void);

/* PJRT_ExecuteContext_Create / Destroy. */
void kiln_pjrt_fill_execute_context(PJRT_Api *api);

/* A copy of the user data attached to `c` so far (the caller frees it with kiln_free; NULL
 * and *n = 0 when none or `c` is NULL). Thread-safe. */
struct kiln_ffi_user_data *kiln_pjrt_execute_context_user_data(PJRT_ExecuteContext *c, size_t *n);

#endif /* KILN_PLUGIN_PJRT_FFI_EXT_H_ */
