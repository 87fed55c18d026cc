#include "base/alloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *libc_realloc(void *ctx, void *p, size_t n) {
  (void)ctx;
  if (n == 0) {
    free(p);
    return NULL;
  }
  return realloc(p, n);
}

static kiln_allocator_t g_alloc = {libc_realloc, NULL};

static void arena_pool_drain(void);

void kiln_allocator_set(const kiln_allocator_t *a) {
  arena_pool_drain(); /* pooled chunks belong to the allocator being replaced */
  if (a && a->realloc_fn) {
    g_alloc = *a;
  } else {
    g_alloc.realloc_fn = libc_realloc;
    g_alloc.ctx = NULL;
  }
}

static _Atomic int64_t g_fail_nth, g_fallible, g_unchecked;
static void (*_Atomic g_unchecked_hook)(size_t n);

void kiln_alloc_fail_nth(int64_t n) {
  atomic_store(&g_fail_nth, n > 0 ? n : 0);
  atomic_store(&g_fallible, 0);
  atomic_store(&g_unchecked, 0);
}

int64_t kiln_alloc_unchecked_count(void) {
  return atomic_load(&g_unchecked);
}

void kiln_alloc_set_unchecked_hook(void (*hook)(size_t n)) {
  atomic_store(&g_unchecked_hook, hook);
}

/* An allocation the injection cannot refuse (it aborts on exhaustion): counted while the
 * injection is on. */
static void note_unchecked(size_t n) {
  static _Thread_local bool in_hook; /* the hook's own allocations are not reported */
  if (in_hook || !atomic_load_explicit(&g_fail_nth, memory_order_relaxed)) return;
  atomic_fetch_add(&g_unchecked, 1);
  void (*hook)(size_t) = atomic_load(&g_unchecked_hook);
  if (hook) {
    in_hook = true;
    hook(n);
    in_hook = false;
  }
}

int64_t kiln_alloc_fallible_count(void) {
  return atomic_load(&g_fallible);
}

/* Whether the injection refuses this allocation. */
static bool injected_failure(void) {
  int64_t nth = atomic_load_explicit(&g_fail_nth, memory_order_relaxed);
  return nth && atomic_fetch_add(&g_fallible, 1) + 1 == nth;
}

bool kiln_alloc_injected_failure(void) {
  return injected_failure();
}

static void *raw_alloc(size_t n) {
  return g_alloc.realloc_fn(g_alloc.ctx, NULL, n ? n : 1);
}
static void raw_free(void *p) {
  if (p) g_alloc.realloc_fn(g_alloc.ctx, p, 0);
}

/* ---- out-of-memory scopes (alloc.h) ----
 * A region records its live blocks in an open-addressing set (linear probing, deletion by
 * backward shift) whose slots come from the heap directly: recording allocates nothing that
 * is itself recorded. Live regions are linked in a process-wide list so that a block freed
 * on another thread is found; the list is consulted only while some region is live. Lock
 * order: g_regions_mu, then a region's mu. */
typedef struct oom_thread {
  kiln_oom_scope_t *outer; /* the outermost scope on this thread */
  int hold;
  kiln_oom_cleanup_t *cleanups; /* most recent first */
} oom_thread_t;

static _Thread_local oom_thread_t t_oom;
static pthread_mutex_t g_regions_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_oom_region_t *g_regions; /* guarded by g_regions_mu */
static _Atomic int g_live_regions;
static _Atomic uint64_t g_next_serial = 1;

#define ARENA_PERSISTENT UINT64_MAX /* made outside any region: its chunks are never recorded */

/* The region this thread's allocations are recorded in now, or NULL. */
static kiln_oom_region_t *recording_region(void) {
  return t_oom.outer && !t_oom.hold ? t_oom.outer->region : NULL;
}

static size_t slot_of(const kiln_oom_region_t *r, const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 20) & (r->cap - 1);
}

/* Inserts p (r->mu held); false when the set cannot grow. */
static bool set_insert(kiln_oom_region_t *r, void *p) {
  if ((r->count + 1) * 2 > r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 256;
    void **old = r->slots;
    size_t old_cap = r->cap;
    void **slots = raw_alloc(cap * sizeof *slots);
    if (!slots) return false;
    memset(slots, 0, cap * sizeof *slots);
    r->slots = slots;
    r->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
      if (!old[i]) continue;
      size_t j = slot_of(r, old[i]);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = old[i];
    }
    raw_free(old);
  }
  size_t j = slot_of(r, p);
  while (r->slots[j]) j = (j + 1) & (r->cap - 1);
  r->slots[j] = p;
  r->count++;
  return true;
}

/* Removes p if present (r->mu held). */
static bool set_remove(kiln_oom_region_t *r, const void *p) {
  if (!r->count) return false;
  size_t mask = r->cap - 1, i = slot_of(r, p);
  while (r->slots[i] != p) {
    if (!r->slots[i]) return false;
    i = (i + 1) & mask;
  }
  /* backward shift: move later members of the run into the hole when their home allows */
  size_t hole = i;
  for (size_t j = (i + 1) & mask; r->slots[j]; j = (j + 1) & mask) {
    size_t home = slot_of(r, r->slots[j]);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      r->slots[hole] = r->slots[j];
      hole = j;
    }
  }
  r->slots[hole] = NULL;
  r->count--;
  return true;
}

static bool region_record(kiln_oom_region_t *r, void *p) {
  pthread_mutex_lock(&r->mu);
  bool ok = set_insert(r, p);
  pthread_mutex_unlock(&r->mu);
  return ok;
}

/* Removes p from r if there, putting q (non-NULL) in its place: a realloc that moved the block
 * (the count is unchanged, so no growth). */
static bool forget_in(kiln_oom_region_t *r, const void *p, void *q) {
  pthread_mutex_lock(&r->mu);
  bool found = set_remove(r, p);
  if (found && q) set_insert(r, q);
  pthread_mutex_unlock(&r->mu);
  return found;
}

/* Forgets p in whichever live region records it (with q: records q instead). This thread's
 * region first; the others only when there are others. */
static void region_forget(void *p, void *q) {
  int live = atomic_load_explicit(&g_live_regions, memory_order_acquire);
  if (!live) return;
  kiln_oom_region_t *mine = t_oom.outer ? t_oom.outer->region : NULL;
  if (mine && (forget_in(mine, p, q) || live == 1)) return;
  pthread_mutex_lock(&g_regions_mu);
  for (kiln_oom_region_t *r = g_regions; r; r = r->next)
    if (r != mine && forget_in(r, p, q)) break;
  pthread_mutex_unlock(&g_regions_mu);
}

static void run_cleanups(void) {
  t_oom.hold++; /* a cleanup's own allocations do not unwind again */
  while (t_oom.cleanups) {
    kiln_oom_cleanup_t *c = t_oom.cleanups;
    t_oom.cleanups = c->next;
    c->registered = false;
    c->fn(c->arg);
  }
  t_oom.hold--;
}

/* Frees every block r records and unlinks r from the live regions. */
static void region_close(kiln_oom_region_t *r, bool free_blocks) {
  pthread_mutex_lock(&g_regions_mu);
  if (r->prev)
    r->prev->next = r->next;
  else
    g_regions = r->next;
  if (r->next) r->next->prev = r->prev;
  atomic_fetch_sub_explicit(&g_live_regions, 1, memory_order_release);
  pthread_mutex_unlock(&g_regions_mu);
  for (size_t i = 0; free_blocks && i < r->cap; i++) raw_free(r->slots[i]);
  raw_free(r->slots);
  pthread_mutex_destroy(&r->mu);
}

/* An allocation that cannot return NULL failed: unwind this thread's scope. */
static _Noreturn void oom_unwind(size_t n) {
  kiln_oom_scope_t *s = t_oom.outer;
  run_cleanups();
  s->failed_bytes = n;
  if (s->owner) {
    region_close(s->region, true);
  } else {
    __atomic_store_n(&s->region->failed, 1, __ATOMIC_RELEASE);
  }
  t_oom.outer = NULL;
  t_oom.hold = 0;
  longjmp(s->env, 1);
}

void kiln_oom_scope_enter(kiln_oom_scope_t *s) {
  s->failed_bytes = 0;
  if (t_oom.outer) { /* inside another scope: that one unwinds */
    s->outermost = s->owner = false;
    s->region = t_oom.outer->region;
    return;
  }
  kiln_oom_region_t *r = &s->own;
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  r->serial = atomic_fetch_add(&g_next_serial, 1);
  pthread_mutex_lock(&g_regions_mu);
  r->next = g_regions;
  if (g_regions) g_regions->prev = r;
  g_regions = r;
  atomic_fetch_add_explicit(&g_live_regions, 1, memory_order_release);
  pthread_mutex_unlock(&g_regions_mu);
  s->region = r;
  s->outermost = s->owner = true;
  t_oom.outer = s;
  t_oom.cleanups = NULL;
}

void kiln_oom_scope_join(kiln_oom_scope_t *s, kiln_oom_region_t *region) {
  s->failed_bytes = 0;
  s->owner = false;
  s->region = region;
  s->outermost = region && !t_oom.outer;
  if (!s->outermost) return;
  t_oom.outer = s;
  t_oom.cleanups = NULL;
}

kiln_oom_region_t *kiln_oom_current_region(void) {
  return t_oom.outer ? t_oom.outer->region : NULL;
}

kiln_status kiln_oom_scope_leave(kiln_oom_scope_t *s, kiln_status st) {
  if (!s->outermost) return st;
  bool failed = s->owner && __atomic_load_n(&s->region->failed, __ATOMIC_ACQUIRE);
  if (failed) run_cleanups();
  t_oom.outer = NULL;
  t_oom.cleanups = NULL;
  if (s->owner) region_close(s->region, failed);
  if (!failed) return st;
  kiln_status_free(st);
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                          "out of host memory in a worker thread (an allocation failed)");
}

kiln_status kiln_oom_scope_error(const kiln_oom_scope_t *s, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                          "out of host memory allocating %zu bytes while %s; everything the call "
                          "allocated was freed",
                          s->failed_bytes, what);
}

void kiln_oom_defer(kiln_oom_cleanup_t *c, void (*fn)(void *arg), void *arg) {
  c->fn = fn;
  c->arg = arg;
  c->registered = t_oom.outer != NULL;
  if (!c->registered) return;
  c->prev = NULL;
  c->next = t_oom.cleanups;
  if (c->next) c->next->prev = c;
  t_oom.cleanups = c;
}

void kiln_oom_undefer(kiln_oom_cleanup_t *c) {
  if (!c->registered) return;
  if (c->prev)
    c->prev->next = c->next;
  else
    t_oom.cleanups = c->next;
  if (c->next) c->next->prev = c->prev;
  c->registered = false;
}

void kiln_oom_adopt(void *p) {
  if (p) region_forget(p, NULL);
}

void kiln_oom_hold(void) {
  t_oom.hold++;
}
void kiln_oom_release(void) {
  t_oom.hold--;
}

void *kiln_try_malloc(size_t n) {
  if (injected_failure()) return NULL;
  void *p = raw_alloc(n);
  kiln_oom_region_t *r = recording_region();
  if (p && r && !region_record(r, p)) {
    raw_free(p);
    return NULL;
  }
  return p;
}
void *kiln_try_realloc(void *p, size_t n) {
  if (!p) return kiln_try_malloc(n);
  if (injected_failure()) return NULL;
  void *q = g_alloc.realloc_fn(g_alloc.ctx, p, n ? n : 1);
  if (q && q != p) region_forget(p, q);
  return q;
}
void *kiln_try_calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  void *p = kiln_try_malloc(count * size);
  if (p) memset(p, 0, count * size);
  return p;
}

static void oom(size_t n) {
  fprintf(stderr, "kiln: out of host memory allocating %zu bytes\n", n);
  abort();
}

void *kiln_malloc(size_t n) {
  kiln_oom_region_t *r = recording_region();
  if (!r) {
    note_unchecked(n);
    void *p = raw_alloc(n);
    if (!p) oom(n);
    return p;
  }
  void *p = injected_failure() ? NULL : raw_alloc(n);
  if (p && !region_record(r, p)) {
    raw_free(p);
    p = NULL;
  }
  if (!p) oom_unwind(n);
  return p;
}
void *kiln_realloc(void *p, size_t n) {
  if (!p) return kiln_malloc(n);
  kiln_oom_region_t *r = recording_region();
  if (!r) note_unchecked(n);
  void *q = r && injected_failure() ? NULL : g_alloc.realloc_fn(g_alloc.ctx, p, n ? n : 1);
  if (!q) {
    if (r) oom_unwind(n); /* p is intact: its owner stays consistent */
    oom(n);
  }
  if (q != p) region_forget(p, q);
  return q;
}
void *kiln_calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) {
    if (recording_region()) oom_unwind(SIZE_MAX);
    oom(SIZE_MAX);
  }
  void *p = kiln_malloc(count * size);
  memset(p, 0, count * size);
  return p;
}
void kiln_free(void *p) {
  if (!p) return;
  region_forget(p, NULL);
  raw_free(p);
}
char *kiln_strdup(const char *s) {
  size_t n = strlen(s);
  char *d = kiln_malloc(n + 1);
  memcpy(d, s, n + 1);
  return d;
}

struct kiln_arena_chunk {
  kiln_arena_chunk_t *next;
  size_t cap;
  _Alignas(16) unsigned char data[];
};

/* Arena-chunk pool: destroyed arenas' chunks of the standard sizes (4 KiB doubling to
 * 1 MiB) are kept here for the next arena instead of going back to glibc, which returned
 * them to the OS (trim / munmap) only for the next module to fault them in again — that
 * churn was 60% of the bytecode reader's time. Bounded by ARENA_POOL_MAX_BYTES; only used
 * with libc's allocator, so a hook installed by kiln_allocator_set sees every chunk. Under
 * ASan the pooled chunks' data is poisoned, so a use after kiln_arena_destroy still
 * reports. Thread-safe (one mutex, taken once per chunk). */
#define ARENA_CHUNK_MIN ((size_t)4096)
#define ARENA_CHUNK_MAX ((size_t)1 << 20)
#define ARENA_POOL_CLASSES 9 /* 4 KiB << 0 ... 8 */
#define ARENA_POOL_MAX_BYTES ((size_t)32 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ARENA_ASAN 1
#endif
#endif
#ifdef KILN_ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define ARENA_POISON(p, n) ((void)(p), (void)(n))
#define ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_arena_chunk_t *g_pool[ARENA_POOL_CLASSES]; /* guarded by g_pool_mu */
static size_t g_pool_bytes;                            /* guarded by g_pool_mu */

/* The pool class of a chunk capacity, or -1 when chunks of that size are not pooled. */
static int pool_class(size_t cap) {
  int k = 0;
  for (size_t c = ARENA_CHUNK_MIN; c <= ARENA_CHUNK_MAX; c <<= 1, k++) {
    if (c == cap) return k;
  }
  return -1;
}

static int pool_enabled(void) {
  return g_alloc.realloc_fn == libc_realloc;
}

static kiln_arena_chunk_t *pool_take(size_t cap) {
  int k = pool_class(cap);
  if (k < 0 || !pool_enabled()) return NULL;
  pthread_mutex_lock(&g_pool_mu);
  kiln_arena_chunk_t *c = g_pool[k];
  if (c) {
    g_pool[k] = c->next;
    g_pool_bytes -= cap;
  }
  pthread_mutex_unlock(&g_pool_mu);
  if (c) ARENA_UNPOISON(c->data, cap);
  return c;
}

/* Keeps a chunk for reuse; returns 0 when the caller must free it. */
static int pool_put(kiln_arena_chunk_t *c) {
  int k = pool_class(c->cap);
  if (k < 0 || !pool_enabled()) return 0;
  int kept = 0;
  pthread_mutex_lock(&g_pool_mu);
  if (g_pool_bytes + c->cap <= ARENA_POOL_MAX_BYTES) {
    ARENA_POISON(c->data, c->cap);
    c->next = g_pool[k];
    g_pool[k] = c;
    g_pool_bytes += c->cap;
    kept = 1;
  }
  pthread_mutex_unlock(&g_pool_mu);
  return kept;
}

static void arena_pool_drain(void) {
  pthread_mutex_lock(&g_pool_mu);
  for (int k = 0; k < ARENA_POOL_CLASSES; k++) {
    kiln_arena_chunk_t *c = g_pool[k];
    while (c) {
      kiln_arena_chunk_t *n = c->next;
      ARENA_UNPOISON(c->data, c->cap);
      g_alloc.realloc_fn(g_alloc.ctx, c, 0);
      c = n;
    }
    g_pool[k] = NULL;
  }
  g_pool_bytes = 0;
  pthread_mutex_unlock(&g_pool_mu);
}

void kiln_arena_init(kiln_arena_t *a) {
  memset(a, 0, sizeof *a);
  kiln_oom_region_t *r = recording_region();
  a->oom_serial = r ? r->serial : ARENA_PERSISTENT;
}

void kiln_arena_destroy(kiln_arena_t *a) {
  kiln_arena_chunk_t *c = a->head;
  while (c) {
    kiln_arena_chunk_t *n = c->next;
    region_forget(c, NULL);
    if (!pool_put(c)) raw_free(c);
    c = n;
  }
  memset(a, 0, sizeof *a);
}

/* A new chunk of `cap` bytes for `a`, or NULL when a fallible one is refused. Chunks of an
 * arena made in this thread's region are recorded there (an unwind frees them with the
 * arena); an older arena's are not (it still holds them after an unwind). A bookkeeping
 * chunk (see kiln_arena_alloc) that cannot be had unwinds the scope, or aborts outside one. */
static kiln_arena_chunk_t *arena_chunk(kiln_arena_t *a, size_t cap, bool bookkeeping) {
  kiln_oom_region_t *r = recording_region();
  if (!a->head && !a->oom_serial) a->oom_serial = r ? r->serial : ARENA_PERSISTENT;
  bool record = r && a->oom_serial == r->serial;
  /* A chunk counts for the failure injection whether or not the pool has one; bookkeeping
   * ones only inside a scope, where a refusal unwinds. */
  bool refused = (!bookkeeping || r) && injected_failure();
  if (bookkeeping && !r) note_unchecked(sizeof(kiln_arena_chunk_t) + cap);
  kiln_arena_chunk_t *c = refused ? NULL : pool_take(cap);
  if (!c && !refused) c = raw_alloc(sizeof *c + cap);
  if (c && record && !region_record(r, c)) {
    if (!pool_put(c)) raw_free(c);
    c = NULL;
  }
  if (!c && bookkeeping) {
    if (r) oom_unwind(sizeof *c + cap);
    oom(sizeof *c + cap);
  }
  return c;
}

void *kiln_arena_alloc(kiln_arena_t *a, size_t n) {
  void *p = kiln_arena_alloc_uninit(a, n);
  if (p) memset(p, 0, n ? (n + 15) & ~(size_t)15 : 16);
  return p;
}

void *kiln_arena_alloc_uninit(kiln_arena_t *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  if (a->limit && (a->total + n > a->limit || n > a->limit)) return NULL;
  if (!a->head || a->used + n > a->cap) {
    size_t cap = a->head ? a->head->cap * 2 : ARENA_CHUNK_MIN;
    if (cap > ARENA_CHUNK_MAX) cap = ARENA_CHUNK_MAX;
    if (cap < n) cap = n;
    /* A chunk of an unbounded arena no larger than the usual chunk is the compiler's own
     * bookkeeping (IR, kernel IR, analyses), whose callers do not check: like kiln_malloc it
     * unwinds an out-of-memory scope, or aborts outside one. Bounded arenas (the parser's, sized by
     * its input) and larger blocks (data sized by the user: literals) are refused with NULL, which
     * callers turn into RESOURCE_EXHAUSTED. A pooled chunk of a destroyed arena comes first. */
    kiln_arena_chunk_t *c = arena_chunk(a, cap, !a->limit && cap <= (1u << 20));
    if (!c) return NULL;
    c->cap = cap;
    c->next = a->head;
    a->head = c;
    a->used = 0;
    a->cap = cap;
  }
  void *p = a->head->data + a->used;
  a->used += n;
  a->total += n;
  return p;
}

void *kiln_arena_realloc(kiln_arena_t *a, void *old, size_t old_n, size_t new_n) {
  if (new_n <= old_n) return old;
  void *p = kiln_arena_alloc(a, new_n);
  if (p && old && old_n) memcpy(p, old, old_n);
  return p;
}

char *kiln_arena_strndup(kiln_arena_t *a, const char *s, size_t n) {
  char *d = kiln_arena_alloc_uninit(a, n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *kiln_arena_strdup(kiln_arena_t *a, const char *s) {
  return kiln_arena_strndup(a, s, strlen(s));
}

char *kiln_arena_printf(kiln_arena_t *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *d = n >= 0 ? kiln_arena_alloc(a, (size_t)n + 1) : NULL;
  if (d) vsnprintf(d, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return d;
}
