/* The ABI facts as kiln's public headers lay them out. */
#include <stddef.h>

#include "kiln/ffi_c_api.h"
#include "kiln/pjrt_c_api.h"
#include "kiln/pjrt_ffi_extension.h"

#define KILN_ABI_SIDE kiln
#include "tests/abi/abi_facts.inc"
