/* The ABI facts as OpenXLA's headers lay them out (compiled with -I../shared/abi). */
#include <stddef.h>

#include "xla/ffi/api/c_api.h"
#include "xla/pjrt/c/pjrt_c_api.h"
#include "xla/pjrt/c/pjrt_c_api_ffi_extension.h"

#define KILN_ABI_SIDE upstream
#include "tests/abi/abi_facts.inc"
