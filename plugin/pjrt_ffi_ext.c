/* PJRT's FFI extension (pjrt_ffi_ext.h). */
#include "plugin/pjrt_ffi_ext.h"

#include <string.h>

#include "ffi/ffi_api.h"
#include "ffi/ffi_registry.h"
#include "kiln/pjrt_ffi_extension.h"
#include "plugin/pjrt_internal.h"

static PJRT_Error *ffi_type_register(PJRT_FFI_Type_Register_Args *args) {
  KILN_PJRT_ARGS("PJRT_FFI_Type_Register", args, type_info);
  if (!args->type_name || args->type_name_size == 0)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "PJRT_FFI_Type_Register: empty type name");
  XLA_FFI_TypeInfo info = {XLA_FFI_TypeInfo_STRUCT_SIZE, NULL, NULL};
  if (args->type_info) info.deleter = args->type_info->deleter;
  XLA_FFI_TypeId id = {args->type_id};
  kiln_status s = kiln_ffi_type_register(args->type_name, args->type_name_size, &id, &info);
  if (s) return kiln_pjrt_error_from_status(s);
  args->type_id = id.type_id;
  return NULL;
}

static PJRT_Error *ffi_user_data_add(PJRT_FFI_UserData_Add_Args *args) {
  KILN_PJRT_ARGS("PJRT_FFI_UserData_Add", args, user_data);
  return kiln_pjrt_error_make(KILN_UNIMPLEMENTED,
                              "PJRT_FFI_UserData_Add: kiln's plugin has no PJRT_ExecuteContext "
                              "yet to attach user data to");
}

static PJRT_Error *ffi_register_handler(PJRT_FFI_Register_Handler_Args *args) {
  KILN_PJRT_ARGS("PJRT_FFI_Register_Handler", args, traits);
  if (!args->target_name || args->target_name_size == 0 || !args->handler)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_FFI_Register_Handler: a target name and a handler are "
                                "required");
  XLA_FFI_Handler_Bundle bundle;
  memset(&bundle, 0, sizeof bundle);
  bundle.execute = (XLA_FFI_Handler *)args->handler;
  const char *platform = args->platform_name ? args->platform_name : "Host";
  size_t plen = args->platform_name ? args->platform_name_size : 4;
  XLA_FFI_Handler_Traits traits = 0;
  if (args->traits & PJRT_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE)
    traits |= XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
  return kiln_pjrt_error_from_status(
      kiln_ffi_registry_register(kiln_ffi_registry_default(), args->target_name,
                                 args->target_name_size, platform, plen, &bundle, traits));
}

static PJRT_FFI_Extension g_ext = {
    {PJRT_FFI_Extension_STRUCT_SIZE, PJRT_Extension_Type_FFI, NULL},
    ffi_type_register,
    ffi_user_data_add,
    ffi_register_handler,
};

PJRT_Extension_Base *kiln_pjrt_ffi_extension(void) {
  return &g_ext.base;
}
