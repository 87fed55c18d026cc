/* The plugin slots: Initialize and Attributes; and the extension chain (none yet: the FFI
 * extension comes with the FFI work).
 *
 * Attributes: `xla_version` (int64, what XLA's own plugins report), `stablehlo_current_version`
 * and `stablehlo_minimum_version` (int64 arrays of 3: major, minor, patch; the VHLO versions
 * the bytecode reader accepts, taken from its own definitions), `kiln_version` (string) and
 * `program_formats` (string: the formats PJRT_Client_Compile accepts, comma-separated).
 *
 * Thread-safety: thread-safe; the attributes are static. */
#include <string.h>

#include "compiler/frontend/mlir_bytecode_internal.h" /* KILN_VHLO_CURRENT, _MINIMUM */
#include "plugin/pjrt_ffi_ext.h"
#include "plugin/pjrt_objects.h"

/* major*10000 + minor*100 + patch -> {major, minor, patch} */
#define KILN_PJRT_SPLIT_VERSION(v) \
  { (v) / 10000, (v) / 100 % 100, (v) % 100 }
static const int64_t g_shlo_current[3] = KILN_PJRT_SPLIT_VERSION(KILN_VHLO_CURRENT);
static const int64_t g_shlo_minimum[3] = KILN_PJRT_SPLIT_VERSION(KILN_VHLO_MINIMUM);

#define NV_HEAD(n) .struct_size = PJRT_NamedValue_STRUCT_SIZE, .name = n, .name_size = sizeof(n) - 1

static const PJRT_NamedValue g_attributes[] = {
    {NV_HEAD("xla_version"), .type = PJRT_NamedValue_kInt64, .int64_value = KILN_PJRT_XLA_VERSION,
     .value_size = 1},
    {NV_HEAD("stablehlo_current_version"), .type = PJRT_NamedValue_kInt64List,
     .int64_array_value = g_shlo_current, .value_size = 3},
    {NV_HEAD("stablehlo_minimum_version"), .type = PJRT_NamedValue_kInt64List,
     .int64_array_value = g_shlo_minimum, .value_size = 3},
    {NV_HEAD("kiln_version"), .type = PJRT_NamedValue_kString,
     .string_value = KILN_PJRT_KILN_VERSION, .value_size = sizeof(KILN_PJRT_KILN_VERSION) - 1},
    {NV_HEAD("program_formats"), .type = PJRT_NamedValue_kString,
     .string_value = KILN_PJRT_PROGRAM_FORMATS,
     .value_size = sizeof(KILN_PJRT_PROGRAM_FORMATS) - 1},
};

/* Nothing to set up: process-wide state (the CUDA driver, the callback thread) starts
 * lazily on first use. Calling it more than once is harmless. */
static PJRT_Error *Plugin_Initialize(PJRT_Plugin_Initialize_Args *args) {
  KILN_PJRT_ARGS("PJRT_Plugin_Initialize", args, extension_start);
  return NULL;
}

static PJRT_Error *Plugin_Attributes(PJRT_Plugin_Attributes_Args *args) {
  KILN_PJRT_ARGS("PJRT_Plugin_Attributes", args, num_attributes);
  args->attributes = g_attributes;
  args->num_attributes = sizeof(g_attributes) / sizeof(g_attributes[0]);
  return NULL;
}

void kiln_pjrt_fill_plugin(PJRT_Api *api) {
  api->PJRT_Plugin_Initialize = Plugin_Initialize;
  api->PJRT_Plugin_Attributes = Plugin_Attributes;
}

/* The extension chain: FFI (type 5) first and only (plugin/pjrt_ffi_ext.c). */
PJRT_Extension_Base *kiln_pjrt_extensions(void) {
  return kiln_pjrt_ffi_extension();
}
