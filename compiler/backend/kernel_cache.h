/* The per-kernel cache: compiled kernels (host object files, CUDA cubins) by a 128-bit key
 * that the caller derives from everything that determines the code — the kernel IR after
 * canonical naming, the target (triple, CPU, features or arch), the LLVM pipeline, LLVM's
 * version and kiln's (kiln_kernel_cache_key_begin/_end add the last two).
 *
 * Two levels:
 *   memory  process-wide, shared by every executable and client: a hit costs a hash lookup
 *           and a copy; bounded by kiln_kernel_cache_set_memory_limit (the edges pass
 *           $KILN_KERNEL_MEMORY_CACHE_BYTES; default 256 MiB; 0 turns it off), least
 *           recently used entries evicted first;
 *   disk    base/disk_cache.h under the caller's folder (the plugin's cache_dir,
 *           $KILN_CACHE_DIR), kind "host-objects" or "cuda-cubins": atomic writes,
 *           checksummed reads, corrupt entries rejected and rebuilt, bounded by
 *           kiln_disk_cache_max_bytes with LRU eviction. A disk hit is copied into memory.
 *
 * Thread-safety: thread-safe. */
#ifndef KILN_COMPILER_BACKEND_KERNEL_CACHE_H_
#define KILN_COMPILER_BACKEND_KERNEL_CACHE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hash.h"

#define KILN_KERNEL_CACHE_HOST "host-objects"
#define KILN_KERNEL_CACHE_CUDA "cuda-cubins"

/* Starts a key: seeds `h` and adds LLVM's and kiln's versions. */
void kiln_kernel_cache_key_begin(kiln_hasher_t *h);

/* The compiled kernel for `key` of `kind`: from memory, else from disk under `dir` (NULL or
 * "": memory only). True and a kiln_malloc'ed copy in *data / *len (the caller frees it), or
 * false. *from_disk (may be NULL) tells which level answered. */
bool kiln_kernel_cache_get(const char *dir, const char *kind, const uint64_t key[2], void **data,
                           size_t *len, bool *from_disk);
/* Records `len` bytes for `key` in memory and, with a folder, on disk. */
void kiln_kernel_cache_put(const char *dir, const char *kind, const uint64_t key[2],
                           const void *data, size_t len);
/* The memory level's bound in bytes for this process (0: off; negative: the default,
 * 256 MiB); entries beyond it are evicted as the next ones are recorded. */
void kiln_kernel_cache_set_memory_limit(int64_t bytes);
/* Empties the memory level (benchmarks measure cold compiles with it). */
void kiln_kernel_cache_clear(void);

typedef struct kiln_kernel_cache_counters {
  int64_t memory_hits, memory_misses, memory_evicted, memory_bytes;
} kiln_kernel_cache_counters_t;
/* This process's memory-level counts (the disk level's are kiln_disk_cache_counters). */
kiln_kernel_cache_counters_t kiln_kernel_cache_counters(void);

#endif /* KILN_COMPILER_BACKEND_KERNEL_CACHE_H_ */
