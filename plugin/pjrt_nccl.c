/* NCCL unique ids through the PJRT client's key-value store (pjrt_nccl.h). */
#include "plugin/pjrt_nccl.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "plugin/pjrt_internal.h"

/* What a callback uses to make its error (PJRT_CallbackError). */
static PJRT_Error *callback_error(PJRT_Error_Code code, const char *message, size_t size) {
  return kiln_pjrt_error_make((kiln_status_code_t)code, "%.*s", (int)size, message ? message : "");
}
/* The callbacks receive its address (PJRT_CallbackError *). */
static PJRT_CallbackError g_callback_error = callback_error;

kiln_status kiln_pjrt_kv_put(PJRT_Client *c, const char *key, const void *value, size_t size) {
  if (!c->kv_put)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "key %s: the client was created without key-value callbacks", key);
  PJRT_KeyValuePutCallback put;
  memcpy(&put, &c->kv_put, sizeof(put));
  PJRT_KeyValuePutCallback_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
  a.key = key;
  a.key_size = strlen(key);
  a.value = value;
  a.value_size = size;
  a.callback_error = &g_callback_error;
  a.user_arg = c->kv_put_user_arg;
  PJRT_Error *e = put(&a);
  if (e) return kiln_status_annotate(kiln_pjrt_error_take_status(e), "in kv_put of key %s", key);
  return NULL;
}

kiln_status kiln_pjrt_kv_get(PJRT_Client *c, const char *key, int timeout_ms, void *value,
                             size_t size) {
  if (!c->kv_get)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "key %s: the client was created without key-value callbacks", key);
  PJRT_KeyValueGetCallback get;
  memcpy(&get, &c->kv_get, sizeof(get));
  PJRT_KeyValueGetCallback_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
  a.key = key;
  a.key_size = strlen(key);
  a.timeout_in_ms = timeout_ms;
  a.callback_error = &g_callback_error;
  a.user_arg = c->kv_get_user_arg;
  PJRT_Error *e = get(&a);
  if (e) return kiln_status_annotate(kiln_pjrt_error_take_status(e), "in kv_get of key %s", key);
  kiln_status s = NULL;
  if (a.value_size != size)
    s = kiln_status_make(KILN_DATA_LOSS, "kv_get of key %s: %zu bytes, %zu expected", key,
                         a.value_size, size);
  else if (size)
    memcpy(value, a.value, size);
  if (a.value && a.value_deleter_callback) a.value_deleter_callback(a.value);
  return s;
}

static void nccl_key(kiln_strbuf_t *b, const char *key) {
  kiln_strbuf_printf(b, "kiln/nccl/%s", key);
}

static kiln_status exchange_put(void *ctx, const char *key, const ncclUniqueId *id) {
  kiln_strbuf_t k = {0};
  nccl_key(&k, key);
  kiln_status s = kiln_pjrt_kv_put(ctx, kiln_strbuf_cstr(&k), id->internal, sizeof(id->internal));
  kiln_strbuf_free(&k);
  return s;
}

static kiln_status exchange_get(void *ctx, const char *key, ncclUniqueId *id) {
  kiln_strbuf_t k = {0};
  nccl_key(&k, key);
  kiln_status s = kiln_pjrt_kv_get(ctx, kiln_strbuf_cstr(&k), KILN_PJRT_KV_TIMEOUT_MS, id->internal,
                                   sizeof(id->internal));
  kiln_strbuf_free(&k);
  return s;
}

static bool exchange_is_local(void *ctx, int64_t device_id) {
  PJRT_Client *c = ctx;
  for (int32_t i = 0; i < c->num_devices; i++)
    if (c->devices[i]->desc.id == device_id) return true;
  return false;
}

void kiln_pjrt_nccl_exchange(PJRT_Client *c, kiln_nccl_id_exchange_t *out) {
  *out = (kiln_nccl_id_exchange_t){exchange_put, exchange_get, c, exchange_is_local};
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static PJRT_Client *g_installed;

void kiln_pjrt_nccl_install(PJRT_Client *c) {
  if (!c->is_cuda || !c->kv_get || !c->kv_put) return;
  kiln_nccl_id_exchange_t x;
  kiln_pjrt_nccl_exchange(c, &x);
  kiln_mutex_lock(&g_mu);
  kiln_nccl_set_id_exchange(&x);
  g_installed = c;
  kiln_mutex_unlock(&g_mu);
}

void kiln_pjrt_nccl_uninstall(PJRT_Client *c) {
  kiln_mutex_lock(&g_mu);
  if (g_installed == c) {
    kiln_nccl_set_id_exchange(NULL);
    g_installed = NULL;
  }
  kiln_mutex_unlock(&g_mu);
}
