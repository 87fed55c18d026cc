/* Seeds for fuzz_exec_deserialize: each HLO file given, compiled for the host (command
 * buffers from runs of 2, so they occur), serialized and written to OUT/seed_<n> with the
 * fuzzer's mode byte (0: checksum fixed up) in front. Files that do not compile are skipped; a
 * serialized executable that does not read back is reported and fails the run (exit 1).
 * With --objects DIR, the host object files of each executable go to DIR/object_<n> too (at
 * most MAX_BYTES each): fuzz_host_elf's seeds.
 *
 * Usage: gen_executable_seeds [--objects DIR] OUT MAX_BYTES FILE... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/thunks/compile.h"
#include "compiler/thunks/executable_cache.h"

/* Writes the host objects of `d` to DIR/object_<n> (those of at most `max` bytes). */
static void write_objects(const kiln_executable_desc_t *d, const char *dir, size_t max, int *n) {
  for (int32_t i = 0; d->image_objects && i < d->num_images; i++) {
    const kiln_exec_image_objects_t *o = &d->image_objects[i];
    for (int32_t j = 0; j < o->num_objects; j++) {
      if (o->sizes[j] > max) continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/object_%d", dir, *n);
      FILE *f = fopen(path, "wb");
      if (!f) continue;
      fwrite(o->data[j], 1, o->sizes[j], f);
      fclose(f);
      (*n)++;
    }
  }
}

int main(int argc, char **argv) {
  const char *objects_dir = NULL;
  if (argc >= 3 && !strcmp(argv[1], "--objects")) {
    objects_dir = argv[2];
    argc -= 2;
    argv += 2;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: gen_executable_seeds [--objects DIR] OUT MAX_BYTES FILE...\n");
    return 2;
  }
  size_t max = (size_t)atol(argv[2]);
  int written = 0, unreadable = 0, objects = 0;
  for (int i = 3; i < argc; i++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(argv[i], &text, &len);
    kiln_hlo_module_t *m = NULL;
    if (!s) s = kiln_hlo_parse_module(text, len, NULL, &m);
    kiln_executable_desc_t *d = NULL;
    kiln_compile_options_t co = {0};
    co.command_buffer_min_run = 2;
    co.emit.dump_dir = "";
    if (!s) s = kiln_compile_module(m, &co, &d, NULL);
    void *bytes = NULL;
    size_t n = 0;
    if (!s) s = kiln_executable_desc_to_bytes(d, &bytes, &n);
    /* A seed must be what kiln reads (gemm epilogues, collectives, custom calls included). */
    kiln_executable_desc_t *back = NULL;
    if (!s) {
      s = kiln_executable_desc_from_bytes_unlinked(bytes, n, NULL, &back);
      if (s) {
        fprintf(stderr, "gen_executable_seeds: %s does not read back: %s\n", argv[i],
                kiln_status_message(s));
        unreadable++;
      }
    }
    kiln_executable_desc_destroy(back);
    if (!s && objects_dir) write_objects(d, objects_dir, max, &objects);
    if (!s && n + 1 <= max) {
      char path[4096];
      snprintf(path, sizeof path, "%s/seed_%d", argv[1], written);
      FILE *f = fopen(path, "wb");
      if (f) {
        fputc(0, f);
        fwrite(bytes, 1, n, f);
        fclose(f);
        written++;
      }
    }
    kiln_status_free(s);
    kiln_free(bytes);
    kiln_executable_desc_destroy(d);
    kiln_hlo_module_destroy(m);
    kiln_free(text);
  }
  printf("gen_executable_seeds: %d seeds, %d unreadable", written, unreadable);
  if (objects_dir) printf(", %d object files", objects);
  printf("\n");
  return unreadable ? 1 : 0;
}
