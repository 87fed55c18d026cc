/* kiln/pjrt_ffi_extension.h: PJRT's FFI extension (PJRT_Extension_Type_FFI = 5, version 3).
 *
 * Found by walking the extension chain from PJRT_Api.extension_start. A framework uses it
 * to register XLA FFI handlers (kiln/ffi_c_api.h) for a custom-call target and platform,
 * to register user-data types, and to attach user data to a PJRT_ExecuteContext that
 * handlers read back during an execute. Layout identical to OpenXLA's FFI extension
 * (checked by the test_abi_layout test, tests/abi/).
 *
 * Status: the registry behind it is issue 17; the plugin offers the extension once it
 * lands (issue 15).
 */
#ifndef KILN_PJRT_FFI_EXTENSION_H_
#define KILN_PJRT_FFI_EXTENSION_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/pjrt_c_api.h"

/* The extension version kiln's table reports. */
#define PJRT_API_FFI_EXTENSION_VERSION 3

#ifdef __cplusplus
extern "C" {
#endif

/* How kiln frees objects of a type registered through the extension. The other two members are
 * reserved; kiln never calls them. */
typedef struct PJRT_FFI_Type_Info {
  void (*deleter)(void* object);
  void (*serialize)(void);
  void (*deserialize)(void);
} PJRT_FFI_Type_Info;

/* Registers a named FFI type; with `type_id` 0 kiln assigns one and writes it back. */
typedef struct PJRT_FFI_Type_Register_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* type_name;
  size_t type_name_size;
  int64_t type_id; /* in-out */
  PJRT_FFI_Type_Info* type_info;
} PJRT_FFI_Type_Register_Args;
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_FFI_Type_Register_Args, type_info);

typedef PJRT_Error* PJRT_FFI_Type_Register(PJRT_FFI_Type_Register_Args* args);

/* A user-data object of a registered type. */
typedef struct PJRT_FFI_UserData {
  int64_t type_id;
  void* data;
} PJRT_FFI_UserData;

/* Attaches user data to an execute context; handlers read it with XLA_FFI_InvokeContext_Get. The
 * caller keeps ownership. */
struct PJRT_FFI_UserData_Add_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_ExecuteContext* context;
  PJRT_FFI_UserData user_data;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_FFI_UserData_Add_Args, user_data);

typedef PJRT_Error* PJRT_FFI_UserData_Add(PJRT_FFI_UserData_Add_Args* args);

typedef enum PJRT_FFI_Handler_TraitsBits {
  PJRT_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE = 1u << 0,
} PJRT_FFI_Handler_TraitsBits;

/* Registers an XLA_FFI_Handler* (`handler`) for a custom-call target on a platform. Note that
 * this struct has no extension_start. */
struct PJRT_FFI_Register_Handler_Args {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;
  const char* platform_name;
  size_t platform_name_size;
  PJRT_FFI_Handler_TraitsBits traits;
};
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_FFI_Register_Handler_Args, traits);

typedef PJRT_Error* PJRT_FFI_Register_Handler(PJRT_FFI_Register_Handler_Args* args);

/* The extension itself, found in PJRT_Api's extension chain by type PJRT_Extension_Type_FFI. */
typedef struct PJRT_FFI_Extension {
  PJRT_Extension_Base base;
  PJRT_FFI_Type_Register* type_register;
  PJRT_FFI_UserData_Add* user_data_add;
  PJRT_FFI_Register_Handler* register_handler;
} PJRT_FFI;
KILN_ABI_DEFINE_STRUCT_SIZE(PJRT_FFI_Extension, register_handler);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PJRT_FFI_EXTENSION_H_ */
