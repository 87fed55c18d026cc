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

static _Atomic int64_t g_fail_nth, g_fallible;

void kiln_alloc_fail_nth(int64_t n) {
  atomic_store(&g_fail_nth, n > 0 ? n : 0);
  atomic_store(&g_fallible, 0);
}

int64_t kiln_alloc_fallible_count(void) {
  return atomic_load(&g_fallible);
}

/* Whether the injection refuses this fallible allocation. */
static bool injected_failure(void) {
  int64_t nth = atomic_load_explicit(&g_fail_nth, memory_order_relaxed);
  return nth && atomic_fetch_add(&g_fallible, 1) + 1 == nth;
}

bool kiln_alloc_injected_failure(void) {
  return injected_failure();
}

void *kiln_try_malloc(size_t n) {
  if (injected_failure()) return NULL;
  return g_alloc.realloc_fn(g_alloc.ctx, NULL, n ? n : 1);
}
void *kiln_try_realloc(void *p, size_t n) {
  if (injected_failure()) return NULL;
  return g_alloc.realloc_fn(g_alloc.ctx, p, n ? n : 1);
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
  void *p = g_alloc.realloc_fn(g_alloc.ctx, NULL, n ? n : 1);
  if (!p) oom(n);
  return p;
}
void *kiln_realloc(void *p, size_t n) {
  void *q = g_alloc.realloc_fn(g_alloc.ctx, p, n ? n : 1);
  if (!q) oom(n);
  return q;
}
void *kiln_calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) oom(SIZE_MAX);
  void *p = kiln_malloc(count * size);
  memset(p, 0, count * size);
  return p;
}
void kiln_free(void *p) {
  if (p) g_alloc.realloc_fn(g_alloc.ctx, p, 0);
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
}

void kiln_arena_destroy(kiln_arena_t *a) {
  kiln_arena_chunk_t *c = a->head;
  while (c) {
    kiln_arena_chunk_t *n = c->next;
    if (!pool_put(c)) kiln_free(c);
    c = n;
  }
  memset(a, 0, sizeof *a);
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
     * aborts on exhaustion. Bounded arenas (the parser's, sized by its input) and larger
     * blocks (data sized by the user: literals) are refused with NULL, which callers turn
     * into RESOURCE_EXHAUSTED. A pooled chunk of a destroyed arena comes first. */
    bool bookkeeping = !a->limit && cap <= (1u << 20);
    kiln_arena_chunk_t *c;
    if (bookkeeping) {
      c = pool_take(cap);
      if (!c) c = kiln_malloc(sizeof *c + cap);
    } else {
      /* A fallible chunk counts for the failure injection whether or not the pool has one. */
      bool refused = injected_failure();
      c = refused ? NULL : pool_take(cap);
      if (!c && !refused) c = g_alloc.realloc_fn(g_alloc.ctx, NULL, sizeof *c + cap);
    }
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
