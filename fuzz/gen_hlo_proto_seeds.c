/* Seeds for fuzz_hlo_proto: every module of the HLO files named on the command line,
 * encoded as HloModuleProto by the test encoder (packed and unpacked alternately, some with a
 * config, some with iota groups in field 92, some with backend configs as payloads), written to
 * <out-dir>/seed_<n>; plus a few CompileOptionsProto messages. Usage: gen_hlo_proto_seeds <out-dir>
 * <max-bytes> file... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "tools/common/hlo_proto_encode.h"

static int g_count;

static void write_seed(const char *dir, const void *data, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/seed_%d", dir, g_count++);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s out-dir max-bytes file...\n", argv[0]);
    return 2;
  }
  size_t max = (size_t)strtoull(argv[2], NULL, 10);
  static const char *const kDropped[] = {"sharding", "outer_dimension_partitions",
                                         "allow_spmd_sharding_propagation_to_output",
                                         "allow_spmd_sharding_propagation_to_parameters", NULL};
  for (int a = 3; a < argc; a++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(argv[a], &text, &len);
    if (s) {
      kiln_status_free(s);
      continue;
    }
    kiln_hlo_module_t **mods = NULL;
    int n = 0;
    s = kiln_hlo_parse_modules(text, len, NULL, &mods, &n);
    kiln_free(text);
    if (s) {
      kiln_status_free(s);
      continue;
    }
    for (int i = 0; i < n; i++) {
      kiln_hlo_proto_encode_options_t o = {
          .with_config = g_count % 5 == 0,
          .packed = g_count % 2 == 0,
          .iota_at_instruction = g_count % 3 == 0,
          .config_payload = (kiln_proto_config_form_t)(g_count % 7 % 3),
          .dropped = kDropped};
      uint8_t *bytes = NULL;
      size_t nb = 0;
      s = kiln_hlo_proto_encode(mods[i], &o, &bytes, &nb);
      if (!s && nb <= max) write_seed(argv[1], bytes, nb);
      kiln_status_free(s);
      kiln_free(bytes);
      kiln_hlo_module_destroy(mods[i]);
    }
    kiln_free(mods);
  }
  /* CompileOptionsProto: what JAX sends; a device assignment; debug options. */
  static const uint8_t kJax[] = {0x1a, 0x04, 0x20, 0x01, 0x28, 0x01};
  static const uint8_t kDa[] = {0x1a, 0x16, 0x20, 0x02, 0x28, 0x02, 0x4a, 0x10,
                                0x08, 0x02, 0x10, 0x02, 0x1a, 0x04, 0x0a, 0x02,
                                0x00, 0x01, 0x1a, 0x04, 0x08, 0x02, 0x08, 0x03};
  static const uint8_t kDebug[] = {0x1a, 0x0b, 0x1a, 0x09, 0xea, 0x06, 0x06,
                                   0x2f, 0x74, 0x6d, 0x70, 0x2f, 0x64};
  write_seed(argv[1], kJax, sizeof kJax);
  write_seed(argv[1], kDa, sizeof kDa);
  write_seed(argv[1], kDebug, sizeof kDebug);
  printf("%d seeds\n", g_count);
  return 0;
}
