/* One allocator hook for all of kiln's host memory, and an arena.
 *
 * kiln_malloc/kiln_realloc abort only on genuine exhaustion of the process heap for small
 * internal bookkeeping; anything sized by user input goes through kiln_try_* and reports
 * RESOURCE_EXHAUSTED instead. */
#ifndef KILN_BASE_ALLOC_H_
#define KILN_BASE_ALLOC_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_allocator {
  void *(*realloc_fn)(void *ctx, void *ptr, size_t size); /* size 0 = free */
  void *ctx;
} kiln_allocator_t;

/* Replaces the process-wide allocator (NULL restores libc). Call before any allocation. */
void kiln_allocator_set(const kiln_allocator_t *a);

/* Allocation-failure injection (tests/test_alloc_failure.c, SQLite's approach): counts the
 * fallible allocations (kiln_try_*, which arena chunks use) from now on and refuses the
 * `n`-th one (n >= 1; 0 turns injection off and resets the count). kiln_malloc / kiln_realloc
 * / kiln_calloc / kiln_strdup are never refused: they abort on exhaustion by design (small
 * bookkeeping, see above). kiln_alloc_fail_nth(INT64_MAX) only counts. Process-wide: worker
 * threads' allocations count too. */
void kiln_alloc_fail_nth(int64_t n);
/* Fallible allocations counted since the last kiln_alloc_fail_nth. */
int64_t kiln_alloc_fallible_count(void);
/* Counts a fallible allocation made outside kiln_try_* (the host device's aligned buffers:
 * user-sized device memory) and says whether the injection refuses it: the caller then
 * fails as if the allocator had returned NULL. */
bool kiln_alloc_injected_failure(void);

void *kiln_try_malloc(size_t n);
void *kiln_try_realloc(void *p, size_t n);
void *kiln_try_calloc(size_t count, size_t size);
void *kiln_malloc(size_t n);           /* aborts with a message on exhaustion */
void *kiln_realloc(void *p, size_t n); /* aborts with a message on exhaustion */
void *kiln_calloc(size_t count, size_t size);
void kiln_free(void *p);
char *kiln_strdup(const char *s);

/* Arena: bump allocation in chunks; everything is freed at once. Zeroed memory. One arena
 * is used by one thread at a time. Destroyed arenas' chunks (up to 32 MiB in all) are kept
 * in a process-wide, thread-safe pool for the next arena while libc's allocator is in use;
 * kiln_allocator_set frees them first. */
typedef struct kiln_arena_chunk kiln_arena_chunk_t;
typedef struct kiln_arena {
  kiln_arena_chunk_t *head;
  size_t used;  /* bytes used in head */
  size_t cap;   /* capacity of head */
  size_t total; /* bytes handed out over the arena's life */
  size_t limit; /* 0 = unlimited; else allocation beyond it fails */
} kiln_arena_t;

void kiln_arena_init(kiln_arena_t *a);
void kiln_arena_destroy(kiln_arena_t *a);
/* Returns zeroed, 16-byte aligned memory, or NULL if over the arena's limit or (a bounded
 * arena, or a block over 1 MiB) when the heap refuses it; an unbounded arena's ordinary chunk
 * is bookkeeping and aborts on exhaustion like kiln_malloc. */
void *kiln_arena_alloc(kiln_arena_t *a, size_t n);
/* The same without zeroing, for blocks the caller fills at once (strings, copied bytes). */
void *kiln_arena_alloc_uninit(kiln_arena_t *a, size_t n);
/* Grows a block previously returned by this arena (copying). */
void *kiln_arena_realloc(kiln_arena_t *a, void *old, size_t old_n, size_t new_n);
char *kiln_arena_strndup(kiln_arena_t *a, const char *s, size_t n);
char *kiln_arena_strdup(kiln_arena_t *a, const char *s);
char *kiln_arena_printf(kiln_arena_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* KILN_BASE_ALLOC_H_ */
