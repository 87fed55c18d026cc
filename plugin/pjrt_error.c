/* PJRT errors (pjrt_internal.h): a kiln status behind the error function table that PJRT 0.107
 * put at the start of every PJRT_Error, so a client may call either the table or the API's
 * PJRT_Error_* entry points. Messages read "CODE-free text (file:line)": the status message,
 * with the place kiln made it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "plugin/pjrt_internal.h"

static const PJRT_Error_FunctionTable g_error_table;

/* The error handed out when not even an error record can be allocated: static, never freed. */
static kiln_pjrt_error_t g_oom_error = {.base = {.vtable = &g_error_table}};

static void error_destroy(PJRT_Error *error) {
  kiln_pjrt_error_t *e = (kiln_pjrt_error_t *)error;
  if (!e || e == &g_oom_error) return;
  kiln_status_free(e->status);
  kiln_free(e);
}

static kiln_status status_of(const kiln_pjrt_error_t *e) {
  return e == &g_oom_error ? kiln_status_out_of_memory() : e->status;
}

static void error_message(const PJRT_Error *error, const char **message, size_t *message_size) {
  const kiln_pjrt_error_t *e = (const kiln_pjrt_error_t *)error;
  const char *m = e ? kiln_status_message(status_of(e)) : "";
  if (message) *message = m;
  if (message_size) *message_size = strlen(m);
}

static PJRT_Error_Code error_get_code(const PJRT_Error *error) {
  const kiln_pjrt_error_t *e = (const kiln_pjrt_error_t *)error;
  return e ? (PJRT_Error_Code)kiln_status_code(status_of(e)) : PJRT_Error_Code_OK;
}

/* kiln's errors carry no payloads. */
static void error_for_each_payload(const PJRT_Error *error, PJRT_Error_PayloadVisitor visitor,
                                   void *user_arg) {
  (void)error;
  (void)visitor;
  (void)user_arg;
}

static const PJRT_Error_FunctionTable g_error_table = {
    .struct_size = PJRT_Error_FunctionTable_STRUCT_SIZE,
    .instance_size = sizeof(kiln_pjrt_error_t),
    .extension_start = NULL,
    .destroy = error_destroy,
    .message = error_message,
    .get_code = error_get_code,
    .for_each_payload = error_for_each_payload,
};

PJRT_Error *kiln_pjrt_error_from_status(kiln_status s) {
  if (!s) return NULL;
  kiln_pjrt_error_t *e = kiln_try_calloc(1, sizeof(*e));
  if (!e) {
    kiln_status_free(s);
    return &g_oom_error.base;
  }
  e->base.vtable = &g_error_table;
  e->status = s;
  return &e->base;
}

kiln_status kiln_pjrt_error_take_status(PJRT_Error *error) {
  kiln_pjrt_error_t *e = (kiln_pjrt_error_t *)error;
  if (!e) return NULL;
  if (e == &g_oom_error) return kiln_status_out_of_memory();
  kiln_status s = e->status;
  kiln_free(e);
  return s;
}

PJRT_Error *kiln_pjrt_error_make(kiln_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status s = kiln_status_make_va(code == KILN_OK ? KILN_UNKNOWN : code, NULL, 0, fmt, ap);
  va_end(ap);
  return kiln_pjrt_error_from_status(s);
}

static void Error_Destroy(PJRT_Error_Destroy_Args *args) {
  if (!args || !KILN_PJRT_HAS(args, error)) return;
  error_destroy(args->error);
}

static void Error_Message(PJRT_Error_Message_Args *args) {
  if (!args || !KILN_PJRT_HAS(args, message_size)) return;
  error_message(args->error, &args->message, &args->message_size);
}

static PJRT_Error *Error_GetCode(PJRT_Error_GetCode_Args *args) {
  KILN_PJRT_ARGS("PJRT_Error_GetCode", args, code);
  if (!args->error)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "PJRT_Error_GetCode: error is NULL");
  args->code = error_get_code(args->error);
  return NULL;
}

static PJRT_Error *Error_ForEachPayload(PJRT_Error_ForEachPayload_Args *args) {
  KILN_PJRT_ARGS("PJRT_Error_ForEachPayload", args, user_arg);
  if (!args->error || !args->visitor)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Error_ForEachPayload: error or visitor is NULL");
  error_for_each_payload(args->error, args->visitor, args->user_arg);
  return NULL;
}

void kiln_pjrt_fill_error(PJRT_Api *api) {
  api->PJRT_Error_Destroy = Error_Destroy;
  api->PJRT_Error_Message = Error_Message;
  api->PJRT_Error_GetCode = Error_GetCode;
  api->PJRT_Error_ForEachPayload = Error_ForEachPayload;
}
