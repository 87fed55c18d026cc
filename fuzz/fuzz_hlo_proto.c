/* libFuzzer target for the protobuf inputs of the PJRT plugin: the same bytes go to the
 * HloModuleProto decoder, the HloModuleProtoWithConfig decoder and the CompileOptionsProto
 * decoder. A module that decodes is printed in full (ASan sees every byte the decoder made)
 * and destroyed; everything else must be a clean error. */
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/frontend/hlo_proto.h"
#include "compiler/hlo/ir.h"
#include "plugin/compile_options.h"

static volatile size_t g_sink;

static void consume(kiln_status s, kiln_hlo_module_t *m) {
  if (s) {
    if (m) __builtin_trap(); /* an error leaves no module behind */
    g_sink += kiln_status_code(s) == KILN_INVALID_ARGUMENT ? 1 : 2;
    kiln_status_free(s);
    return;
  }
  char *text = kiln_hlo_module_to_string(m);
  for (const char *p = text; *p; p++) g_sink += (unsigned char)*p;
  kiln_free(text);
  kiln_hlo_module_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_hlo_module_t *m = NULL;
  consume(kiln_hlo_module_from_proto(data, size, &m), m);
  m = NULL;
  int64_t replicas = 0, partitions = 0;
  consume(kiln_hlo_module_from_proto_with_config(data, size, &m, &replicas, &partitions), m);
  kiln_pjrt_compile_options_t o;
  kiln_status s = kiln_pjrt_compile_options_decode(data, size, &o);
  if (!s) {
    for (int32_t i = 0; i < o.num_argument_layouts; i++) g_sink += o.argument_layouts[i][0];
    for (int32_t i = 0; i < o.num_env_overrides; i++) g_sink += o.env_overrides[i][0];
    int64_t ids = (int64_t)o.da_replica_count * o.da_computation_count;
    for (int64_t i = 0; o.has_device_assignment && i < ids; i++) g_sink += (size_t)o.device_ids[i];
    kiln_pjrt_compile_options_free(&o);
  }
  kiln_status_free(s);
  return 0;
}
