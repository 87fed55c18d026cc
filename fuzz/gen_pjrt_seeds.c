/* Seeds for fuzz_pjrt_deserialize: each HLO file given, compiled through the plugin's API
 * (PJRT_Client_Compile, format "hlo", default compile options) on a host client, serialized
 * with PJRT_Executable_Serialize and written to OUT/seed_<n> with the fuzzer's mode byte (0:
 * checksum recomputed) in front. Files that do not compile are skipped; a blob that does not
 * load back (PJRT_Executable_DeserializeAndLoad) is reported and fails the run (exit 1).
 *
 * Usage: gen_pjrt_seeds OUT MAX_BYTES FILE... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "tools/common/pjrt_inproc.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: gen_pjrt_seeds OUT MAX_BYTES FILE...\n");
    return 2;
  }
  size_t max = (size_t)atol(argv[2]);
  const PJRT_Api *api = GetPjrtApi();
  PJRT_Client *client = pjrt_inproc_client(api);
  int written = 0, unreadable = 0;
  for (int i = 3; i < argc; i++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(argv[i], &text, &len);
    if (s) {
      kiln_status_free(s);
      continue;
    }
    PJRT_Program prog = {.struct_size = PJRT_Program_STRUCT_SIZE,
                         .code = text,
                         .code_size = len,
                         .format = "hlo",
                         .format_size = 3};
    PJRT_Client_Compile_Args ca = {
        .struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE, .client = client, .program = &prog};
    if (pjrt_inproc_error(api, api->PJRT_Client_Compile(&ca), NULL)) {
      kiln_free(text);
      continue;
    }
    PJRT_LoadedExecutable_GetExecutable_Args ga = {
        .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
        .loaded_executable = ca.executable};
    PJRT_Executable_Serialize_Args sa = {.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE};
    if (!pjrt_inproc_error(api, api->PJRT_LoadedExecutable_GetExecutable(&ga), argv[i])) {
      sa.executable = ga.executable;
      pjrt_inproc_error(api, api->PJRT_Executable_Serialize(&sa), argv[i]);
      PJRT_Executable_Destroy_Args xd = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                         .executable = ga.executable};
      pjrt_inproc_error(api, api->PJRT_Executable_Destroy(&xd), argv[i]);
    }
    if (sa.serialized_bytes) {
      /* A seed must be what kiln loads. */
      PJRT_LoadedExecutable *back =
          pjrt_inproc_load(api, client, sa.serialized_bytes, sa.serialized_bytes_size, argv[i]);
      if (!back) unreadable++;
      if (back) pjrt_inproc_destroy(api, back);
      if (back && sa.serialized_bytes_size + 1 <= max) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed_%d", argv[1], written);
        FILE *f = fopen(path, "wb");
        if (f) {
          fputc(0, f);
          fwrite(sa.serialized_bytes, 1, sa.serialized_bytes_size, f);
          fclose(f);
          written++;
        }
      }
      sa.serialized_executable_deleter(sa.serialized_executable);
    }
    pjrt_inproc_destroy(api, ca.executable);
    kiln_free(text);
  }
  PJRT_Client_Destroy_Args d = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE,
                                .client = client};
  pjrt_inproc_error(api, api->PJRT_Client_Destroy(&d), "PJRT_Client_Destroy");
  printf("gen_pjrt_seeds: %d seeds, %d that do not load back\n", written, unreadable);
  return unreadable ? 1 : 0;
}
