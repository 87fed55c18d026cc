/* One allocator hook for all of kiln's host memory, and an arena.
 *
 * Anything sized by user input goes through kiln_try_* and reports RESOURCE_EXHAUSTED.
 * kiln_malloc/kiln_realloc (small internal bookkeeping, whose callers do not check) never
 * return NULL: inside an out-of-memory scope (below: the parsers' and the compiler's entry
 * points) a failure unwinds the scope, which returns RESOURCE_EXHAUSTED having freed what it
 * allocated; outside one they abort with a message. */
#ifndef KILN_BASE_ALLOC_H_
#define KILN_BASE_ALLOC_H_

#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_allocator {
  void *(*realloc_fn)(void *ctx, void *ptr, size_t size); /* size 0 = free */
  void *ctx;
} kiln_allocator_t;

/* Replaces the process-wide allocator (NULL restores libc). Call before any allocation. */
void kiln_allocator_set(const kiln_allocator_t *a);

/* Allocation-failure injection (tests/test_alloc_failure.c, SQLite's approach): counts the
 * allocations that can fail from now on and refuses the `n`-th one (n >= 1; 0 turns
 * injection off and resets the count): the fallible ones (kiln_try_*, fallible arena chunks)
 * anywhere, and every other allocation (kiln_malloc / kiln_realloc / kiln_calloc /
 * kiln_strdup, bookkeeping arena chunks) made inside an out-of-memory scope (below), where
 * a refusal unwinds the scope. Outside a scope those are never refused (they abort on
 * exhaustion). kiln_alloc_fail_nth(INT64_MAX) only counts. Process-wide: worker threads'
 * allocations count too. */
void kiln_alloc_fail_nth(int64_t n);
/* Allocations counted since the last kiln_alloc_fail_nth. */
int64_t kiln_alloc_fallible_count(void);
/* Counts a fallible allocation made outside kiln_try_* (the host device's aligned buffers:
 * user-sized device memory) and says whether the injection refuses it: the caller then
 * fails as if the allocator had returned NULL. */
bool kiln_alloc_injected_failure(void);
/* While the injection is on: the allocations that could not be refused because they abort on
 * exhaustion instead (kiln_malloc and its kind, bookkeeping arena chunks, made outside any
 * scope or held), i.e. the points a sweep cannot reach. `hook`, when set, is called with each
 * one's size (a test prints where they come from). */
int64_t kiln_alloc_unchecked_count(void);
void kiln_alloc_set_unchecked_hook(void (*hook)(size_t n));

void *kiln_try_malloc(size_t n);
void *kiln_try_realloc(void *p, size_t n);
void *kiln_try_calloc(size_t count, size_t size);
void *kiln_malloc(size_t n);           /* aborts with a message on exhaustion */
void *kiln_realloc(void *p, size_t n); /* aborts with a message on exhaustion */
void *kiln_calloc(size_t count, size_t size);
void kiln_free(void *p);
char *kiln_strdup(const char *s);

/* ---- Out-of-memory scopes: every allocation of an entry point can fail ----
 * An entry point (parsing, compiling) brackets its work in a scope:
 *
 *   kiln_oom_scope_t scope;
 *   kiln_oom_scope_enter(&scope);
 *   if (setjmp(scope.env)) return kiln_oom_scope_error(&scope, "compiling %s", name);
 *   kiln_status s = work(...);
 *   return kiln_oom_scope_leave(&scope, s);
 *
 * Inside the outermost scope of a thread, every block kiln allocates (kiln_malloc and its
 * kind, kiln_try_*, chunks of arenas made inside the scope) is recorded until freed. When an
 * allocation that does not return NULL on failure fails (the heap is exhausted, or the
 * injection above refuses it), the scope runs the cleanups registered on this thread
 * (kiln_oom_defer: objects kiln's allocator does not own, such as LLVM's), frees every block
 * recorded and still live, and returns to its setjmp; kiln_oom_scope_error then makes the
 * RESOURCE_EXHAUSTED status. A scope entered inside another (an entry point calling another)
 * is a no-op: the outermost one unwinds. On a normal leave the recorded blocks are the
 * caller's as usual.
 *
 * What code inside a scope must keep to (an allocation may unwind the stack at any point):
 * hold no lock across an allocation (or kiln_oom_hold around it), and give objects older than
 * the scope only memory that outlives an unwind: growth of their existing blocks
 * (kiln_realloc of a non-NULL block), chunks of arenas made before the scope, or blocks
 * allocated under kiln_oom_hold. A freshly allocated block stored into an older object would be
 * freed by an unwind while still referenced.
 *
 * Worker threads that work for a scope join its region (kiln_oom_scope_join with
 * kiln_oom_current_region() of the scope's thread): their blocks are recorded in it; a
 * failure on a worker unwinds the worker's own stack to its join point (running its
 * cleanups) and marks the region failed; the owner's kiln_oom_scope_leave then frees what is
 * left and returns RESOURCE_EXHAUSTED whatever its work returned. */
/* The whole pattern above as one statement: returns `call` (a kiln_status expression) run in
 * a scope; on an unwind runs `on_unwind` (a statement clearing the caller's outputs, which
 * may point at freed memory) and returns RESOURCE_EXHAUSTED "... while <what>", `what` being
 * printf-style arguments that read only the function's parameters. */
#define KILN_OOM_SCOPED_RETURN(call, on_unwind, ...)              \
  do {                                                            \
    kiln_oom_scope_t kiln_oom_scope_;                             \
    kiln_oom_scope_enter(&kiln_oom_scope_);                       \
    if (setjmp(kiln_oom_scope_.env)) {                            \
      on_unwind;                                                  \
      return kiln_oom_scope_error(&kiln_oom_scope_, __VA_ARGS__); \
    }                                                             \
    return kiln_oom_scope_leave(&kiln_oom_scope_, (call));        \
  } while (0)

typedef struct kiln_oom_cleanup {
  void (*fn)(void *arg);
  void *arg;
  struct kiln_oom_cleanup *prev, *next;
  bool registered;
} kiln_oom_cleanup_t;

typedef struct kiln_oom_region {
  pthread_mutex_t mu;
  void **slots; /* open addressing: the live blocks */
  size_t cap, count;
  uint64_t serial;
  int failed;                          /* a joined worker unwound (atomic access) */
  struct kiln_oom_region *prev, *next; /* the live regions */
} kiln_oom_region_t;

typedef struct kiln_oom_scope {
  jmp_buf env;
  kiln_oom_region_t own;     /* the outermost scope's region */
  kiln_oom_region_t *region; /* the region recorded into */
  bool outermost, owner;
  size_t failed_bytes; /* the allocation that failed */
} kiln_oom_scope_t;

void kiln_oom_scope_enter(kiln_oom_scope_t *s);
/* A worker's scope working for `region` (NULL: no region, the worker's allocations are not
 * recorded and abort on exhaustion as outside any scope). */
void kiln_oom_scope_join(kiln_oom_scope_t *s, kiln_oom_region_t *region);
/* The region of this thread's scope, or NULL. */
kiln_oom_region_t *kiln_oom_current_region(void);
/* Leaves the scope and returns `st`, or RESOURCE_EXHAUSTED (freeing `st`) when a joined
 * worker failed an allocation. */
kiln_status kiln_oom_scope_leave(kiln_oom_scope_t *s, kiln_status st);
/* After the scope's setjmp returned non-zero: RESOURCE_EXHAUSTED naming the allocation size
 * and `what` (printf-style). */
kiln_status kiln_oom_scope_error(const kiln_oom_scope_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Runs fn(arg) if the scope of this thread unwinds before kiln_oom_undefer(c); a no-op outside
 * a scope. `c` lives until undeferred or unwound (the caller's frame or object). */
void kiln_oom_defer(kiln_oom_cleanup_t *c, void (*fn)(void *arg), void *arg);
void kiln_oom_undefer(kiln_oom_cleanup_t *c);
/* Between hold and release (nesting), this thread's allocations are neither recorded nor
 * refused by the injection when they cannot return NULL: for memory handed to objects older
 * than the scope (process-wide caches) and code that holds a lock. */
void kiln_oom_hold(void);
void kiln_oom_release(void);
/* Takes block `p` out of the out-of-memory region that records it: an unwind leaves it to
 * its owner, an object older than the scope (called from a cleanup that walks such an object
 * changed in place, before the unwind frees what is left). */
void kiln_oom_adopt(void *p);

/* Locks and one-time initialization hold the scope (an unwind must not leave a mutex locked
 * or a pthread_once in progress): kiln takes its locks through these. */
static inline void kiln_mutex_lock(pthread_mutex_t *m) {
  kiln_oom_hold();
  pthread_mutex_lock(m);
}
static inline void kiln_mutex_unlock(pthread_mutex_t *m) {
  pthread_mutex_unlock(m);
  kiln_oom_release();
}
/* For a lock held around calls that open out-of-memory scopes of their own (the plugin's lazy
 * lowering): their unwinds end inside the call, never across the lock, so it holds only when
 * this thread is already inside a scope (whose unwind would cross it). Returns whether it held,
 * for kiln_mutex_unlock_around_scopes. */
static inline bool kiln_mutex_lock_around_scopes(pthread_mutex_t *m) {
  bool hold = kiln_oom_current_region() != NULL;
  if (hold) kiln_oom_hold();
  pthread_mutex_lock(m);
  return hold;
}
static inline void kiln_mutex_unlock_around_scopes(pthread_mutex_t *m, bool held) {
  pthread_mutex_unlock(m);
  if (held) kiln_oom_release();
}
static inline void kiln_once(pthread_once_t *once, void (*init)(void)) {
  kiln_oom_hold();
  pthread_once(once, init);
  kiln_oom_release();
}

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
  uint64_t oom_serial; /* the out-of-memory region it was made in (chunks recorded there) */
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
