/* PJRT's FFI extension (kiln/pjrt_ffi_extension.h, type 5) over kiln's FFI registry:
 * register_handler puts an XLA FFI handler into the process-wide registry the compiler looks
 * custom calls up in (ffi/ffi_registry.h), type_register goes to the FFI type registry.
 * user_data_add needs the plugin's PJRT_ExecuteContext, which does not exist yet: it answers
 * UNIMPLEMENTED saying so.
 *
 * Wiring (the lead's): plugin/pjrt_plugin.c's kiln_pjrt_extensions() returns
 * kiln_pjrt_ffi_extension() (the chain's head; its `next` is NULL). */
#ifndef KILN_PLUGIN_PJRT_FFI_EXT_H_
#define KILN_PLUGIN_PJRT_FFI_EXT_H_

#include "kiln/pjrt_c_api.h"

/* The extension object (static, never NULL). */
PJRT_Extension_Base *kiln_pjrt_ffi_extension(void);

#endif /* KILN_PLUGIN_PJRT_FFI_EXT_H_ */
