/* PJRT's FFI extension (pjrt_ffi_ext.h). */
#include "plugin/pjrt_ffi_ext.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"

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

/* An execute context: the user data a client attaches for the executes it passes it to
 * (PJRT_ExecuteOptions.context). Borrowed pointers; one entry per type id (a later add of
 * the same type replaces the earlier). */
struct PJRT_ExecuteContext {
  pthread_mutex_t mu;
  kiln_ffi_user_data_t *items;
  size_t n, cap;
};

static PJRT_Error *execute_context_create(PJRT_ExecuteContext_Create_Args *args) {
  KILN_PJRT_ARGS("PJRT_ExecuteContext_Create", args, context);
  PJRT_ExecuteContext *c = kiln_calloc(1, sizeof(*c));
  pthread_mutex_init(&c->mu, NULL);
  args->context = c;
  return NULL;
}

static PJRT_Error *execute_context_destroy(PJRT_ExecuteContext_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_ExecuteContext_Destroy", args, context);
  PJRT_ExecuteContext *c = args->context;
  if (!c) return NULL;
  pthread_mutex_destroy(&c->mu);
  kiln_free(c->items);
  kiln_free(c);
  return NULL;
}

static PJRT_Error *ffi_user_data_add(PJRT_FFI_UserData_Add_Args *args) {
  KILN_PJRT_ARGS("PJRT_FFI_UserData_Add", args, user_data);
  PJRT_ExecuteContext *c = args->context;
  if (!c)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_FFI_UserData_Add: context is NULL (make one with "
                                "PJRT_ExecuteContext_Create)");
  if (args->user_data.type_id <= 0)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_FFI_UserData_Add: type id %lld was not registered (use "
                                "PJRT_FFI_Type_Register first)",
                                (long long)args->user_data.type_id);
  kiln_mutex_lock(&c->mu);
  size_t i = 0;
  while (i < c->n && c->items[i].type_id != args->user_data.type_id) i++;
  if (i == c->n) {
    if (c->n == c->cap) {
      c->cap = c->cap ? 2 * c->cap : 4;
      c->items = kiln_realloc(c->items, c->cap * sizeof(*c->items));
    }
    c->n++;
  }
  c->items[i].type_id = args->user_data.type_id;
  c->items[i].data = args->user_data.data;
  kiln_mutex_unlock(&c->mu);
  return NULL;
}

kiln_ffi_user_data_t *kiln_pjrt_execute_context_user_data(PJRT_ExecuteContext *c, size_t *n) {
  *n = 0;
  if (!c) return NULL;
  kiln_mutex_lock(&c->mu);
  kiln_ffi_user_data_t *copy = NULL;
  if (c->n) {
    copy = kiln_malloc(c->n * sizeof(*copy));
    memcpy(copy, c->items, c->n * sizeof(*copy));
    *n = c->n;
  }
  kiln_mutex_unlock(&c->mu);
  return copy;
}

void kiln_pjrt_fill_execute_context(PJRT_Api *api) {
  api->PJRT_ExecuteContext_Create = execute_context_create;
  api->PJRT_ExecuteContext_Destroy = execute_context_destroy;
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
