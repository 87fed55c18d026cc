/* NCCL unique ids through the PJRT client's key-value callbacks (plugin/pjrt_nccl.h), with
 * fake callbacks (an in-memory store): a put lands under "kiln/nccl/<group key>" with the 128
 * id bytes, a get reads them back and frees the store's copy through its deleter, a missing
 * key comes back as the store's own error (made through the plugin's callback_error) naming
 * the key, a value of the wrong size is DATA_LOSS, device ids are local when the client has
 * them, and a CUDA client with both callbacks installs the exchange for the NCCL communicator
 * cache (runtime/cuda/nccl.h) while it lives; a host client does not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "status_test_util.h"

#include "base/alloc.h"
#include "plugin/pjrt_nccl.h"
#include "plugin/pjrt_objects.h"

static struct {
  char key[4][160];
  char value[4][256];
  size_t size[4];
  int n, puts, gets, deleted, last_timeout;
} g_store;

static PJRT_Error *fake_put(PJRT_KeyValuePutCallback_Args *a) {
  assert_true(a->struct_size >= PJRT_KeyValuePutCallback_Args_STRUCT_SIZE);
  assert_ptr_equal(a->user_arg, &g_store);
  assert_true(g_store.n < 4 && a->value_size <= sizeof(g_store.value[0]));
  snprintf(g_store.key[g_store.n], sizeof(g_store.key[0]), "%.*s", (int)a->key_size, a->key);
  memcpy(g_store.value[g_store.n], a->value, a->value_size);
  g_store.size[g_store.n++] = a->value_size;
  g_store.puts++;
  return NULL;
}

static void fake_deleter(char *v) {
  g_store.deleted++;
  free(v);
}

static PJRT_Error *fake_get(PJRT_KeyValueGetCallback_Args *a) {
  assert_ptr_equal(a->user_arg, &g_store);
  g_store.gets++;
  g_store.last_timeout = a->timeout_in_ms;
  for (int i = 0; i < g_store.n; i++)
    if (strlen(g_store.key[i]) == a->key_size && !memcmp(g_store.key[i], a->key, a->key_size)) {
      a->value = malloc(g_store.size[i] + 1);
      memcpy(a->value, g_store.value[i], g_store.size[i]);
      a->value_size = g_store.size[i];
      a->value_deleter_callback = fake_deleter;
      return NULL;
    }
  static const char msg[] = "fake store: no such key";
  return (*a->callback_error)(PJRT_Error_Code_NOT_FOUND, msg, sizeof(msg) - 1);
}

/* A client with two devices (ids 0 and 1) and the fake store's callbacks. */
static PJRT_Client *make_client(bool cuda) {
  PJRT_Client *c = kiln_calloc(1, sizeof(*c));
  c->is_cuda = cuda;
  c->num_devices = 2;
  c->devices = kiln_calloc(2, sizeof(PJRT_Device *));
  for (int i = 0; i < 2; i++) {
    c->devices[i] = kiln_calloc(1, sizeof(PJRT_Device));
    c->devices[i]->desc.id = i;
  }
  PJRT_KeyValuePutCallback put = fake_put;
  PJRT_KeyValueGetCallback get = fake_get;
  memcpy(&c->kv_put, &put, sizeof(put));
  memcpy(&c->kv_get, &get, sizeof(get));
  c->kv_put_user_arg = c->kv_get_user_arg = &g_store;
  return c;
}

static void free_client(PJRT_Client *c) {
  for (int i = 0; i < 2; i++) kiln_free(c->devices[i]);
  kiln_free(c->devices);
  kiln_free(c);
}

static void test_ids_go_through_the_store_under_the_group_key(void **state) {
  (void)state;
  memset(&g_store, 0, sizeof(g_store));
  PJRT_Client *c = make_client(true);
  kiln_nccl_id_exchange_t x;
  kiln_pjrt_nccl_exchange(c, &x);
  ncclUniqueId id, back;
  for (int i = 0; i < KILN_NCCL_UNIQUE_ID_BYTES; i++) id.internal[i] = (char)(i * 7 + 3);
  ASSERT_OK(x.put(x.ctx, "nccl group of 2: devices 0,1", &id));
  assert_int_equal(g_store.puts, 1);
  assert_string_equal(g_store.key[0], "kiln/nccl/nccl group of 2: devices 0,1");
  assert_int_equal(g_store.size[0], KILN_NCCL_UNIQUE_ID_BYTES);
  memset(&back, 0, sizeof(back));
  ASSERT_OK(x.get(x.ctx, "nccl group of 2: devices 0,1", &back));
  assert_memory_equal(back.internal, id.internal, KILN_NCCL_UNIQUE_ID_BYTES);
  assert_int_equal(g_store.deleted, 1);
  assert_int_equal(g_store.last_timeout, KILN_PJRT_KV_TIMEOUT_MS);
  /* A key nobody put: the store's error, made through callback_error, naming the key. */
  kiln_status s = x.get(x.ctx, "nccl group of 2: devices 5,6", &back);
  assert_non_null(strstr(kiln_status_message(s), "fake store: no such key"));
  assert_non_null(strstr(kiln_status_message(s), "kiln/nccl/nccl group of 2: devices 5,6"));
  assert_code(s, KILN_NOT_FOUND);
  /* A value that is no unique id. */
  ASSERT_OK(kiln_pjrt_kv_put(c, "kiln/nccl/short", "abc", 3));
  s = x.get(x.ctx, "short", &back);
  assert_non_null(strstr(kiln_status_message(s), "3 bytes, 128 expected"));
  assert_code(s, KILN_DATA_LOSS);
  assert_int_equal(g_store.deleted, 2);
  /* Device ids of the client are local, others are not. */
  assert_true(x.is_local(x.ctx, 0));
  assert_true(x.is_local(x.ctx, 1));
  assert_false(x.is_local(x.ctx, 2));
  free_client(c);
}

static void test_without_callbacks_the_store_is_a_failed_precondition(void **state) {
  (void)state;
  PJRT_Client *c = make_client(true);
  c->kv_get = c->kv_put = NULL;
  char v[4];
  assert_code(kiln_pjrt_kv_put(c, "k", "v", 1), KILN_FAILED_PRECONDITION);
  assert_code(kiln_pjrt_kv_get(c, "k", 10, v, 1), KILN_FAILED_PRECONDITION);
  /* Not installed either. */
  kiln_nccl_id_exchange_t x;
  kiln_pjrt_nccl_install(c);
  assert_false(kiln_nccl_get_id_exchange(&x));
  free_client(c);
}

static void test_a_cuda_client_installs_the_exchange_while_it_lives(void **state) {
  (void)state;
  PJRT_Client *host = make_client(false), *cuda = make_client(true);
  kiln_nccl_id_exchange_t x;
  kiln_pjrt_nccl_install(host);
  assert_false(kiln_nccl_get_id_exchange(&x));
  kiln_pjrt_nccl_install(cuda);
  assert_true(kiln_nccl_get_id_exchange(&x));
  assert_ptr_equal(x.ctx, cuda);
  kiln_pjrt_nccl_uninstall(host); /* not the one installed: nothing changes */
  assert_true(kiln_nccl_get_id_exchange(&x));
  kiln_pjrt_nccl_uninstall(cuda);
  assert_false(kiln_nccl_get_id_exchange(&x));
  free_client(host);
  free_client(cuda);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ids_go_through_the_store_under_the_group_key),
      cmocka_unit_test(test_without_callbacks_the_store_is_a_failed_precondition),
      cmocka_unit_test(test_a_cuda_client_installs_the_exchange_while_it_lives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
