/* The FFI entry points a handler library finds in the process that loads it, with default
 * visibility: XLA_FFI_GetApi (C) and XLA's C++ accessor `xla::ffi::GetXlaFfiApi()` (mangled
 * `_ZN3xla3ffi12GetXlaFfiApiEv`), which self-registering C++ libraries call from
 * XLA_FFI_REGISTER_HANDLER / XLA_FFI_REGISTER_TYPE. The plugin (libkiln_pjrt.so) links this
 * file and exports both; an executable needs -rdynamic (CMake ENABLE_EXPORTS) for libraries
 * it dlopens to see them. */
#include "ffi/ffi_api.h"
#include "kiln/abi_macros.h"

const XLA_FFI_Api *XLA_FFI_GetApi(void) {
  return kiln_ffi_api();
}

/* The C++ name, defined from C through an assembler label. */
KILN_ABI_EXPORT const XLA_FFI_Api *kiln_ffi_get_xla_ffi_api_cxx(void) __asm__(
    "_ZN3xla3ffi12GetXlaFfiApiEv");
const XLA_FFI_Api *kiln_ffi_get_xla_ffi_api_cxx(void) {
  return kiln_ffi_api();
}
