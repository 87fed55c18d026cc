/* TEMPORARY (until helper "proto"'s branch lands): minimal stand-ins for the compile-options
 * decoder and the HloModuleProto reader so the plugin links. Delete when wt-proto is merged. */
#include <string.h>

#include "compiler/frontend/hlo_proto.h"
#include "plugin/compile_options.h"

kiln_status kiln_pjrt_compile_options_decode(const void *bytes, size_t n,
                                             kiln_pjrt_compile_options_t *out) {
  (void)bytes;
  memset(out, 0, sizeof(*out));
  out->device_ordinal = -1;
  out->num_replicas = 1;
  out->num_partitions = 1;
  if (n)
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "compile options are not decoded in this build yet");
  return NULL;
}

void kiln_pjrt_compile_options_free(kiln_pjrt_compile_options_t *o) {
  (void)o;
}

kiln_status kiln_hlo_module_from_proto(const void *bytes, size_t n, kiln_hlo_module_t **out) {
  (void)bytes;
  (void)n;
  *out = NULL;
  return kiln_status_make(KILN_UNIMPLEMENTED, "HloModuleProto is not read in this build yet");
}

kiln_status kiln_hlo_module_from_proto_with_config(const void *bytes, size_t n,
                                                   kiln_hlo_module_t **out, int64_t *num_replicas,
                                                   int64_t *num_partitions) {
  (void)bytes;
  (void)n;
  (void)num_replicas;
  (void)num_partitions;
  *out = NULL;
  return kiln_status_make(KILN_UNIMPLEMENTED, "HloModuleProto is not read in this build yet");
}

bool kiln_hlo_bytes_are_text(const void *bytes, size_t n) {
  const char *p = bytes, *end = p + n;
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) p++;
    if (end - p < 2 || p[0] != '/' || p[1] != '/') break;
    while (p < end && *p != '\n') p++;
  }
  return end - p >= 9 && !memcmp(p, "HloModule", 9);
}
