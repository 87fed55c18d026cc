#include "base/alloc.h"

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

void kiln_allocator_set(const kiln_allocator_t *a) {
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

void kiln_arena_init(kiln_arena_t *a) { memset(a, 0, sizeof *a); }

void kiln_arena_destroy(kiln_arena_t *a) {
  kiln_arena_chunk_t *c = a->head;
  while (c) {
    kiln_arena_chunk_t *n = c->next;
    kiln_free(c);
    c = n;
  }
  memset(a, 0, sizeof *a);
}

void *kiln_arena_alloc(kiln_arena_t *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  if (a->limit && (a->total + n > a->limit || n > a->limit)) return NULL;
  if (!a->head || a->used + n > a->cap) {
    size_t cap = a->head ? a->head->cap * 2 : 4096;
    if (cap > (1u << 20)) cap = 1u << 20;
    if (cap < n) cap = n;
    /* A chunk of an unbounded arena no larger than the usual chunk is the compiler's own
     * bookkeeping (IR, kernel IR, analyses), whose callers do not check: like kiln_malloc it
     * aborts on exhaustion. Bounded arenas (the parser's, sized by its input) and larger
     * blocks (data sized by the user: literals) are refused with NULL, which callers turn
     * into RESOURCE_EXHAUSTED. */
    bool bookkeeping = !a->limit && cap <= (1u << 20);
    kiln_arena_chunk_t *c =
        bookkeeping ? kiln_malloc(sizeof *c + cap) : kiln_try_malloc(sizeof *c + cap);
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
  memset(p, 0, n);
  return p;
}

void *kiln_arena_realloc(kiln_arena_t *a, void *old, size_t old_n, size_t new_n) {
  if (new_n <= old_n) return old;
  void *p = kiln_arena_alloc(a, new_n);
  if (p && old && old_n) memcpy(p, old, old_n);
  return p;
}

char *kiln_arena_strndup(kiln_arena_t *a, const char *s, size_t n) {
  char *d = kiln_arena_alloc(a, n + 1);
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
