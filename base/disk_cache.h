/* A content-addressed cache of byte blobs in a directory, shared by processes: the host
 * JIT's object files (compiler/backend/host_jit.c) and the plugin's optimized modules
 * (plugin/compile_cache.c) live in it.
 *
 * An entry is `<dir>/<kind>/<32 hex digits of the key>`: a header (magic "KILNDC01", the
 * kind, kiln's version, the key, the payload's length and its 128-bit hash), then the
 * payload. It is written to a temporary file in the same folder and renamed into place, so a
 * reader sees a whole entry or none, whoever writes concurrently. A read checks everything:
 * an entry with another magic, kind, version or key, a wrong length (truncated) or a wrong
 * checksum (flipped bytes) is rejected: not loaded, counted in `rejected`, and removed so the
 * caller's rebuild replaces it.
 *
 * Errors never fail a compilation: a cache that cannot be read or written is a miss (logged
 * once at warning level per process).
 *
 * Thread-safety: thread-safe; the counters are process-wide atomics. */
#ifndef KILN_BASE_DISK_CACHE_H_
#define KILN_BASE_DISK_CACHE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_disk_cache_counters {
  int64_t hits, misses, rejected, writes;
} kiln_disk_cache_counters_t;

/* The cached payload of `key` under `kind` ("host-objects", "modules", ...): true and a
 * kiln_malloc'ed copy in *data / *len (the caller frees it), or false (absent or rejected). */
bool kiln_disk_cache_get(const char *dir, const char *kind, const uint64_t key[2], void **data,
                         size_t *len);
/* Stores `len` bytes as `key`'s entry (atomically; failures are logged, not returned). */
void kiln_disk_cache_put(const char *dir, const char *kind, const uint64_t key[2], const void *data,
                         size_t len);
/* The path of `key`'s entry (kiln_free it); for tests that corrupt entries. */
char *kiln_disk_cache_path(const char *dir, const char *kind, const uint64_t key[2]);
/* This process's counts for `kind` (NULL: all kinds together). */
kiln_disk_cache_counters_t kiln_disk_cache_counters(const char *kind);

#endif /* KILN_BASE_DISK_CACHE_H_ */
