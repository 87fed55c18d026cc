/* GetPjrtApi: the table. Every slot first gets a default that answers UNIMPLEMENTED naming
 * its function (so none is NULL), then each plugin file fills the slots it implements. The
 * table is built once, on the first call, and never changes after. */
#include <pthread.h>
#include <string.h>

#include "ffi/ffi_api.h"
#include "ffi/ffi_legacy.h"
#include "kiln/abi_macros.h"
#include "plugin/env_options.h"
#include "plugin/pjrt_ffi_ext.h"
#include "plugin/pjrt_internal.h"

/* The FFI entry points (ffi/ffi_export.c) and the legacy custom-call status setters
 * (ffi/ffi_legacy.c) live in a static library; naming them here links them into
 * libkiln_pjrt.so, whose version script exports them beside GetPjrtApi. */
const XLA_FFI_Api *kiln_ffi_get_xla_ffi_api_cxx(void) __asm__("_ZN3xla3ffi12GetXlaFfiApiEv");
__attribute__((used)) static const void *const g_exported_ffi_entry_points[] = {
    (const void *)XLA_FFI_GetApi, (const void *)kiln_ffi_get_xla_ffi_api_cxx,
    (const void *)XlaCustomCallStatusSetSuccess, (const void *)XlaCustomCallStatusSetFailure};

#define KILN_PJRT_SLOT(name)                                                                 \
  static PJRT_Error *unimplemented_##name(name##_Args *args) {                               \
    (void)args;                                                                              \
    return kiln_pjrt_error_make(KILN_UNIMPLEMENTED, "%s is not implemented by kiln", #name); \
  }
#include "plugin/pjrt_slots_nonvoid.def"
#undef KILN_PJRT_SLOT

static PJRT_Api g_api;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
  kiln_pjrt_process_options_from_env(); /* the plugin is an edge: the environment, once */
  memset(&g_api, 0, sizeof(g_api));
  g_api.struct_size = PJRT_Api_STRUCT_SIZE;
  g_api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  g_api.pjrt_api_version.major_version = PJRT_API_MAJOR;
  g_api.pjrt_api_version.minor_version = PJRT_API_MINOR;
#define KILN_PJRT_SLOT(name) g_api.name = unimplemented_##name;
#include "plugin/pjrt_slots_nonvoid.def"
#undef KILN_PJRT_SLOT
  kiln_pjrt_fill_error(&g_api);
  kiln_pjrt_fill_plugin(&g_api);
  kiln_pjrt_fill_event(&g_api);
  kiln_pjrt_fill_client(&g_api);
  kiln_pjrt_fill_device(&g_api);
  kiln_pjrt_fill_buffer(&g_api);
  kiln_pjrt_fill_compile(&g_api);
  kiln_pjrt_fill_executable(&g_api);
  kiln_pjrt_fill_execute_context(&g_api);
  kiln_pjrt_fill_extras(&g_api);
  kiln_pjrt_fill_topology(&g_api);
  g_api.extension_start = kiln_pjrt_extensions();
}

KILN_ABI_EXPORT const PJRT_Api *GetPjrtApi(void) {
  kiln_once(&g_once, build_table);
  return &g_api;
}
