/* libFuzzer target for the disk cache's entry loader (base/disk_cache.h), which holds the host
 * JIT's object files and the plugin's optimized modules: a corrupted entry must be refused,
 * never trusted. The input's first byte picks the mode:
 *   even: the rest of the input is written as the whole entry file of a key; a read must not
 *         crash, and may return a payload only when the file is exactly the entry
 *         kiln_disk_cache_put writes for that payload;
 *   odd:  a valid entry for a fixed payload is written, then the input edits it as
 *         (offset, xor) byte pairs and an optional truncation; the read must refuse it
 *         whenever the file differs from the entry written, and return the payload when not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/disk_cache.h"

static char g_dir[64];
static const uint64_t kKey[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};
static const char kKind[] = "host-objects";

static bool read_file(const char *path, unsigned char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = malloc(n > 0 ? (size_t)n : 1);
  *len = n > 0 && fread(*data, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
  fclose(f);
  return true;
}

static void write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (len && fwrite(data, 1, len, f) != len) abort();
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln-fuzz-cache-XXXXXX");
    if (!mkdtemp(g_dir)) abort();
    kiln_disk_cache_set_max_bytes(0);
  }
  if (size == 0) return 0;
  static const char payload[] = "a kernel object file's bytes, as the host JIT caches them";
  kiln_disk_cache_put(g_dir, kKind, kKey, payload, sizeof payload);
  char *path = kiln_disk_cache_path(g_dir, kKind, kKey);
  unsigned char *valid = NULL, *file = NULL;
  size_t valid_len = 0, file_len = 0;
  if (!read_file(path, &valid, &valid_len)) abort();
  if (data[0] % 2 == 0) {
    file = malloc(size);
    file_len = size - 1;
    memcpy(file, data + 1, file_len);
  } else {
    file = malloc(valid_len + 1);
    memcpy(file, valid, valid_len);
    file_len = valid_len;
    size_t i = 1;
    for (; i + 2 <= size && i < 64; i += 2)
      file[data[i] % (valid_len ? valid_len : 1)] ^= data[i + 1];
    if (i < size && data[i] < 128 && valid_len) file_len = data[i] % valid_len;
  }
  write_file(path, file, file_len);
  bool same = file_len == valid_len && !memcmp(file, valid, valid_len);
  void *got = NULL;
  size_t got_len = 0;
  bool hit = kiln_disk_cache_get(g_dir, kKind, kKey, &got, &got_len);
  if (hit && !same) {
    fprintf(stderr, "a corrupted cache entry (%zu bytes) was loaded\n", file_len);
    abort();
  }
  if (same && (!hit || got_len != sizeof payload || memcmp(got, payload, sizeof payload))) {
    fprintf(stderr, "a valid cache entry was refused\n");
    abort();
  }
  kiln_free(got);
  kiln_free(path);
  free(valid);
  free(file);
  return 0;
}
