/* Helpers for PJRT clients in tests/pjrt/: built against OpenXLA's pjrt_c_api.h (not kiln's),
 * they load libkiln_pjrt.so with dlopen(RTLD_LOCAL) as a framework does and reach kiln only
 * through the table. Include after <cmocka.h>.
 *
 *   const PJRT_Api *api = pjrt_test_load();        // KILN_PJRT_PLUGIN, or $KILN_PJRT_PLUGIN
 *   PJRT_CHECK(api, api->PJRT_Client_Create(&args)); // fails the test with the message
 *   PJRT_Client *c = pjrt_test_client(api, NULL, 0); // named options */
#ifndef KILN_TESTS_PJRT_PJRT_TEST_UTIL_H_
#define KILN_TESTS_PJRT_PJRT_TEST_UTIL_H_

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A test in tests/ linked with the plugin's layer (to reach its internals) defines
 * PJRT_TEST_IN_PROCESS first: kiln's own header then, and the table of GetPjrtApi in-process. */
#ifdef PJRT_TEST_IN_PROCESS
#include "kiln/pjrt_c_api.h"
#else
#include "xla/pjrt/c/pjrt_c_api.h"
#endif

static inline const PJRT_Api *pjrt_test_load(void) {
#ifdef PJRT_TEST_IN_PROCESS
  return GetPjrtApi();
#else
  static const PJRT_Api *api;
  if (api) return api;
  const char *path = getenv("KILN_PJRT_PLUGIN");
  if (!path || !*path) path = KILN_PJRT_PLUGIN;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return NULL;
  }
  const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(h, "GetPjrtApi");
  if (!get) {
    fprintf(stderr, "%s has no GetPjrtApi: %s\n", path, dlerror());
    return NULL;
  }
  api = get();
  return api;
#endif
}

/* The error's code (OK for NULL); destroys it, copying its message to `msg` (may be NULL). */
static inline PJRT_Error_Code pjrt_test_take_error(const PJRT_Api *api, PJRT_Error *e, char *msg,
                                                   size_t msg_size) {
  if (msg && msg_size) msg[0] = 0;
  if (!e) return PJRT_Error_Code_OK;
  PJRT_Error_GetCode_Args ga = {.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE, .error = e};
  PJRT_Error *ge = api->PJRT_Error_GetCode(&ga);
  PJRT_Error_Code code = ge ? PJRT_Error_Code_UNKNOWN : ga.code;
  PJRT_Error_Message_Args ma = {.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Message(&ma);
  if (msg && msg_size)
    snprintf(msg, msg_size, "%.*s",
             (int)(ma.message_size < msg_size ? ma.message_size : msg_size - 1), ma.message);
  PJRT_Error_Destroy_Args da = {.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Destroy(&da);
  return code;
}

/* Fails the cmocka test, printing the call and kiln's message, when `call` returns an error. */
#define PJRT_CHECK(api, call)                                                            \
  do {                                                                                   \
    char pjrt_check_msg_[2048];                                                          \
    PJRT_Error_Code pjrt_check_code_ =                                                   \
        pjrt_test_take_error((api), (call), pjrt_check_msg_, sizeof(pjrt_check_msg_));   \
    if (pjrt_check_code_ != PJRT_Error_Code_OK)                                          \
      fail_msg("%s failed: code %d: %s", #call, (int)pjrt_check_code_, pjrt_check_msg_); \
  } while (0)

/* Expects `call` to fail with `code` and a message containing `needle` (NULL: any). */
#define PJRT_EXPECT_ERROR(api, call, code, needle)                                               \
  do {                                                                                           \
    char pjrt_expect_msg_[2048];                                                                 \
    PJRT_Error_Code pjrt_expect_code_ =                                                          \
        pjrt_test_take_error((api), (call), pjrt_expect_msg_, sizeof(pjrt_expect_msg_));         \
    if (pjrt_expect_code_ != (code))                                                             \
      fail_msg("%s: code %d (%s), expected %d", #call, (int)pjrt_expect_code_, pjrt_expect_msg_, \
               (int)(code));                                                                     \
    const char *pjrt_expect_needle_ = (needle);                                                  \
    if (pjrt_expect_needle_ && !strstr(pjrt_expect_msg_, pjrt_expect_needle_))                   \
      fail_msg("%s: message \"%s\" does not mention \"%s\"", #call, pjrt_expect_msg_,            \
               pjrt_expect_needle_);                                                             \
  } while (0)

/* A client with `n` named options (NULL: none). */
static inline PJRT_Client *pjrt_test_client(const PJRT_Api *api, const PJRT_NamedValue *opts,
                                            size_t n) {
  PJRT_Client_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = opts;
  a.num_options = n;
  PJRT_CHECK(api, api->PJRT_Client_Create(&a));
  return a.client;
}

static inline void pjrt_test_client_destroy(const PJRT_Api *api, PJRT_Client *c) {
  PJRT_Client_Destroy_Args a = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_Destroy(&a));
}

/* A named option with a string / int64 / bool value. */
static inline PJRT_NamedValue pjrt_test_opt_string(const char *name, const char *value) {
  PJRT_NamedValue v;
  memset(&v, 0, sizeof(v));
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = strlen(name);
  v.type = PJRT_NamedValue_kString;
  v.string_value = value;
  v.value_size = strlen(value);
  return v;
}

static inline PJRT_NamedValue pjrt_test_opt_int(const char *name, int64_t value) {
  PJRT_NamedValue v;
  memset(&v, 0, sizeof(v));
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = strlen(name);
  v.type = PJRT_NamedValue_kInt64;
  v.int64_value = value;
  v.value_size = 1;
  return v;
}

static inline PJRT_NamedValue pjrt_test_opt_bool(const char *name, bool value) {
  PJRT_NamedValue v;
  memset(&v, 0, sizeof(v));
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = strlen(name);
  v.type = PJRT_NamedValue_kBool;
  v.bool_value = value;
  v.value_size = 1;
  return v;
}

#endif /* KILN_TESTS_PJRT_PJRT_TEST_UTIL_H_ */
