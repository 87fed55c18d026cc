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
 * Size bound (LRU): a hit sets the entry's modification time to now, so the oldest
 * modification time is the least recently used entry. The folder's size (every kind together)
 * is kept at most the limit (kiln_disk_cache_max_bytes: $KILN_CACHE_MAX_BYTES, in bytes or
 * with a K/M/G suffix, default 1 GiB; 0 means unbounded): a write that takes it over the
 * limit removes the least recently used entries until it is under 3/4 of the limit. This
 * process keeps a running total per folder (measured once, on its first write there), so
 * writes do not rescan the folder; other processes' writes are seen at the next eviction.
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
  int64_t evicted; /* entries removed by the size bound */
} kiln_disk_cache_counters_t;

/* The cached payload of `key` under `kind` ("host-objects", "modules", ...): true and a
 * kiln_malloc'ed copy in *data / *len (the caller frees it), or false (absent or rejected). */
bool kiln_disk_cache_get(const char *dir, const char *kind, const uint64_t key[2], void **data,
                         size_t *len);
/* Stores `len` bytes as `key`'s entry (atomically; failures are logged, not returned). */
void kiln_disk_cache_put(const char *dir, const char *kind, const uint64_t key[2], const void *data,
                         size_t len);
/* The path of `key`'s entry (kiln_free it); for tests that corrupt entries. Keys are stored
 * mixed with the build's identity (the size and modification time of the binary holding this
 * code), so a rebuilt kiln never reads back what an older build wrote. */
char *kiln_disk_cache_path(const char *dir, const char *kind, const uint64_t key[2]);
/* This process's counts for `kind` (NULL: all kinds together). */
kiln_disk_cache_counters_t kiln_disk_cache_counters(const char *kind);

/* The size limit in bytes (0: unbounded): the value set with kiln_disk_cache_set_max_bytes
 * (the edges set $KILN_CACHE_MAX_BYTES there), else 1 GiB. */
int64_t kiln_disk_cache_max_bytes(void);
/* Sets the limit for this process (negative: back to the default). */
void kiln_disk_cache_set_max_bytes(int64_t bytes);
/* Reads a size as KILN_CACHE_MAX_BYTES spells it: bytes, or a number with K, M or G. False
 * for anything else (negative, not a number). */
bool kiln_disk_cache_parse_size(const char *s, int64_t *out);
/* Removes the least recently used entries of `dir` (every kind) until the folder holds at
 * most `target` bytes; returns the entries removed. (Writes call it themselves.) */
int64_t kiln_disk_cache_evict(const char *dir, int64_t target);

#endif /* KILN_BASE_DISK_CACHE_H_ */
