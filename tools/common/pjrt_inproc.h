/* For programs that link the plugin (fuzz_pjrt_deserialize, gen_pjrt_seeds, tests): header-only
 * (the fuzz build compiles no tools/common/ source for it). A host client of the plugin linked
 * into the program (GetPjrtApi(), driven only through its table), with the disk cache off so
 * that nothing is written or read outside the process. */
#ifndef KILN_TOOLS_COMMON_PJRT_INPROC_H_
#define KILN_TOOLS_COMMON_PJRT_INPROC_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/pjrt_c_api.h"

const PJRT_Api *GetPjrtApi(void);

/* Destroys `e` (NULL: nothing); true when it was an error. `what` (NULL: quiet) prints it. */
static inline int pjrt_inproc_error(const PJRT_Api *api, PJRT_Error *e, const char *what) {
  if (!e) return 0;
  if (what) {
    PJRT_Error_Message_Args m = {.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE, .error = e};
    api->PJRT_Error_Message(&m);
    fprintf(stderr, "%s: %.*s\n", what, (int)m.message_size, m.message);
  }
  PJRT_Error_Destroy_Args d = {.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Destroy(&d);
  return 1;
}

/* A host client ("platform" cpu, "cache_dir" ""); aborts when none can be made (the fuzzer
 * cannot run without one). */
static inline PJRT_Client *pjrt_inproc_client(const PJRT_Api *api) {
  PJRT_Plugin_Initialize_Args ia = {.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE};
  if (pjrt_inproc_error(api, api->PJRT_Plugin_Initialize(&ia), "PJRT_Plugin_Initialize")) abort();
  const char *names[2] = {"platform", "cache_dir"}, *values[2] = {"cpu", ""};
  PJRT_NamedValue o[2];
  memset(o, 0, sizeof(o));
  for (int i = 0; i < 2; i++) {
    o[i].struct_size = PJRT_NamedValue_STRUCT_SIZE;
    o[i].name = names[i];
    o[i].name_size = strlen(names[i]);
    o[i].type = PJRT_NamedValue_kString;
    o[i].string_value = values[i];
    o[i].value_size = strlen(values[i]);
  }
  PJRT_Client_Create_Args ca = {
      .struct_size = PJRT_Client_Create_Args_STRUCT_SIZE, .create_options = o, .num_options = 2};
  if (pjrt_inproc_error(api, api->PJRT_Client_Create(&ca), "PJRT_Client_Create")) abort();
  return ca.client;
}

/* The client's first addressable device; aborts when there is none. */
static inline PJRT_Device *pjrt_inproc_device(const PJRT_Api *api, PJRT_Client *c) {
  PJRT_Client_AddressableDevices_Args da = {
      .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = c};
  if (pjrt_inproc_error(api, api->PJRT_Client_AddressableDevices(&da), "devices") ||
      !da.num_addressable_devices)
    abort();
  return da.addressable_devices[0];
}

/* PJRT_Executable_DeserializeAndLoad of `n` bytes: the loaded executable, or NULL (its error
 * destroyed, printed when `what` is not NULL). */
static inline PJRT_LoadedExecutable *pjrt_inproc_load(const PJRT_Api *api, PJRT_Client *c,
                                                      const void *blob, size_t n,
                                                      const char *what) {
  PJRT_Executable_DeserializeAndLoad_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
  a.client = c;
  a.serialized_executable = blob;
  a.serialized_executable_size = n;
  if (pjrt_inproc_error(api, api->PJRT_Executable_DeserializeAndLoad(&a), what)) return NULL;
  return a.loaded_executable;
}

static inline void pjrt_inproc_destroy(const PJRT_Api *api, PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_Destroy_Args a = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = l};
  pjrt_inproc_error(api, api->PJRT_LoadedExecutable_Destroy(&a), "PJRT_LoadedExecutable_Destroy");
}

#endif /* KILN_TOOLS_COMMON_PJRT_INPROC_H_ */
