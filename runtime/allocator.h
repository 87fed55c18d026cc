/* The caching device allocator: best-fit with coalescing over a device's raw allocate/free,
 * in the manner of XLA's BFC allocator.
 *
 * Memory is taken from the raw allocator in regions (the first `initial_region` bytes, each
 * later region twice the previous one, or the request if larger) and carved into chunks.
 * Free chunks sit in bins by size (bin b holds sizes in [256 * 2^b, 256 * 2^(b+1)); the
 * last bin everything larger); an allocation takes the smallest free chunk that fits,
 * searching its size's bin and then the larger ones, and splits off the rest. A freed chunk
 * merges with its free neighbours in the same region. Regions go back to the raw allocator
 * only when the allocator is destroyed, trimmed (kiln_device_allocator_trim), or when a
 * region cannot be had otherwise (a failing raw allocation or the byte limit first releases
 * every wholly free region and retries). So once a workload's pattern of sizes has been
 * seen, allocations and frees call nothing below: no cuMemAlloc / cuMemFree on CUDA, no
 * aligned_alloc / free on the host.
 *
 * With `caching` false (KILN_ALLOCATOR=plain) every allocation and free goes to the raw
 * allocator; the statistics are kept the same way.
 *
 * Addresses are aligned to `alignment` (host 64, CUDA 256) and sizes rounded up to it.
 * Errors: a request the raw allocator cannot satisfy, or that would take the pool past
 * `limit`, is RESOURCE_EXHAUSTED, naming the bytes in use, the pool size and the largest free
 * block; nothing is allocated then. Freeing an address the allocator did not hand out (or
 * twice) is ignored with a warning.
 *
 * Stream ordering: a chunk may be handed out again as soon as it is freed. Callers free
 * device memory only when no queued device work still uses it, or when every later user of
 * the memory runs after that work on the same in-order stream (kiln's executables synchronize
 * their stream before they release a run's buffers; PJRT transfers and executes complete
 * before they return).
 *
 * Under AddressSanitizer, host-memory pools (`host_memory`) poison free chunks, so a use of
 * a freed buffer is still reported.
 *
 * Thread-safety: thread-safe (one mutex per allocator). create and destroy: not
 * thread-safe; nothing else may use the allocator meanwhile. */
#ifndef KILN_RUNTIME_ALLOCATOR_H_
#define KILN_RUNTIME_ALLOCATOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_device_allocator kiln_device_allocator_t;

/* The device's raw allocator. `alloc` returns addresses aligned to the allocator's
 * alignment (or fails); `free` takes exactly what `alloc` returned. */
typedef struct kiln_device_allocator_raw {
  kiln_status (*alloc)(void *ctx, size_t size, uint64_t *out);
  void (*free)(void *ctx, uint64_t p);
  void *ctx;
} kiln_device_allocator_raw_t;

typedef struct kiln_device_allocator_options {
  const char *name;      /* for messages (borrowed during create only) */
  bool caching;          /* false: pass-through (KILN_ALLOCATOR=plain) */
  size_t alignment;      /* a power of two; 0: 256 */
  size_t initial_region; /* 0: 2 MiB */
  size_t limit;          /* most bytes held from the raw allocator; 0: no limit */
  bool host_memory;      /* addresses are host memory (poisoned while free under ASan) */
} kiln_device_allocator_options_t;

typedef struct kiln_device_allocator_stats {
  int64_t bytes_in_use;      /* allocated and not freed (rounded sizes) */
  int64_t peak_bytes_in_use; /* since creation or the last kiln_device_allocator_clear_peak */
  int64_t pool_bytes;        /* held from the raw allocator */
  int64_t peak_pool_bytes;
  int64_t num_allocs;         /* successful allocations since creation */
  int64_t largest_alloc_size; /* the largest allocation since creation */
  int64_t largest_free_block; /* the largest free chunk now (0 without caching) */
  int64_t num_regions;        /* raw blocks held now */
  int64_t raw_allocs;         /* calls to the raw allocate since creation (failed ones too) */
  int64_t raw_frees;          /* calls to the raw free since creation */
  int64_t bytes_limit;        /* options.limit */
} kiln_device_allocator_stats_t;

/* Creates an allocator over `raw` (copied). The caller owns the result. */
kiln_status kiln_device_allocator_create(const kiln_device_allocator_raw_t *raw,
                                         const kiln_device_allocator_options_t *opts,
                                         kiln_device_allocator_t **out);
/* Returns every region to the raw allocator; addresses still handed out become invalid. */
void kiln_device_allocator_destroy(kiln_device_allocator_t *a);

/* `size` 0 is taken as 1. */
kiln_status kiln_device_allocator_alloc(kiln_device_allocator_t *a, size_t size, uint64_t *out);
void kiln_device_allocator_free(kiln_device_allocator_t *a, uint64_t p);
/* Returns wholly free regions to the raw allocator. */
void kiln_device_allocator_trim(kiln_device_allocator_t *a);
void kiln_device_allocator_get_stats(kiln_device_allocator_t *a,
                                     kiln_device_allocator_stats_t *out);
/* Resets peak_bytes_in_use and peak_pool_bytes to their current values. */
void kiln_device_allocator_clear_peak(kiln_device_allocator_t *a);

#endif /* KILN_RUNTIME_ALLOCATOR_H_ */
