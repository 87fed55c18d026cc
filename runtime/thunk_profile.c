/* The per-thunk profile (thunk.h, "profile"): entries per thunk, accumulated under a lock,
 * and the profiled way of executing a sequence. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "runtime/thunk.h"
#include "runtime/thunk_internal.h"

struct kiln_thunk_profile {
  kiln_thunk_profile_mode_t mode;
  pthread_mutex_t mu;
  kiln_ptrmap_t index; /* thunk -> entry index + 1 */
  kiln_thunk_profile_entry_t *entries;
  size_t len, cap;
  int64_t runs;
  uint64_t run_ns;
};

kiln_thunk_profile_t *kiln_thunk_profile_create(kiln_thunk_profile_mode_t mode) {
  kiln_thunk_profile_t *p = kiln_calloc(1, sizeof(*p));
  p->mode = mode == KILN_THUNK_PROFILE_COMMANDS ? mode : KILN_THUNK_PROFILE_THUNKS;
  pthread_mutex_init(&p->mu, NULL);
  kiln_ptrmap_init(&p->index);
  return p;
}

void kiln_thunk_profile_destroy(kiln_thunk_profile_t *p) {
  if (!p) return;
  kiln_ptrmap_free(&p->index);
  kiln_free(p->entries);
  pthread_mutex_destroy(&p->mu);
  kiln_free(p);
}

kiln_thunk_profile_mode_t kiln_thunk_profile_mode(const kiln_thunk_profile_t *p) {
  return p ? p->mode : KILN_THUNK_PROFILE_OFF;
}

void kiln_thunk_profile_reset(kiln_thunk_profile_t *p) {
  if (!p) return;
  kiln_mutex_lock(&p->mu);
  kiln_ptrmap_free(&p->index);
  kiln_ptrmap_init(&p->index);
  p->len = 0;
  p->runs = 0;
  p->run_ns = 0;
  kiln_mutex_unlock(&p->mu);
}

void kiln_thunk_profile_add_run(kiln_thunk_profile_t *p, uint64_t ns) {
  if (!p) return;
  kiln_mutex_lock(&p->mu);
  p->runs++;
  p->run_ns += ns;
  kiln_mutex_unlock(&p->mu);
}

int64_t kiln_thunk_profile_runs(const kiln_thunk_profile_t *p, uint64_t *total_ns) {
  if (!p) {
    if (total_ns) *total_ns = 0;
    return 0;
  }
  kiln_thunk_profile_t *m = (kiln_thunk_profile_t *)p; /* the lock only */
  kiln_mutex_lock(&m->mu);
  int64_t runs = p->runs;
  if (total_ns) *total_ns = p->run_ns;
  kiln_mutex_unlock(&m->mu);
  return runs;
}

size_t kiln_thunk_profile_entries(const kiln_thunk_profile_t *p, kiln_thunk_profile_entry_t *out,
                                  size_t cap) {
  if (!p) return 0;
  kiln_thunk_profile_t *m = (kiln_thunk_profile_t *)p; /* the lock only */
  kiln_mutex_lock(&m->mu);
  size_t n = p->len;
  if (out) memcpy(out, p->entries, (n < cap ? n : cap) * sizeof(*out));
  kiln_mutex_unlock(&m->mu);
  return n;
}

static void record(kiln_thunk_profile_t *p, const kiln_thunk_t *t, const kiln_thunk_t *parent,
                   int depth, uint64_t ns) {
  kiln_mutex_lock(&p->mu);
  uintptr_t i = (uintptr_t)kiln_ptrmap_get(&p->index, t);
  kiln_thunk_profile_entry_t *e;
  if (i) {
    e = &p->entries[i - 1];
  } else {
    if (p->len == p->cap) {
      p->cap = p->cap ? 2 * p->cap : 64;
      p->entries = kiln_realloc(p->entries, p->cap * sizeof(*p->entries));
    }
    e = &p->entries[p->len++];
    memset(e, 0, sizeof(*e));
    e->thunk = t;
    e->parent = parent;
    e->depth = depth;
    e->min_ns = UINT64_MAX;
    kiln_ptrmap_put(&p->index, t, (void *)(uintptr_t)p->len);
  }
  e->calls++;
  e->total_ns += ns;
  if (ns < e->min_ns) e->min_ns = ns;
  if (ns > e->max_ns) e->max_ns = ns;
  kiln_mutex_unlock(&p->mu);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

kiln_status kiln_thunk_seq_execute_profiled(kiln_thunk_seq_t *s,
                                            const kiln_thunk_exec_params_t *p) {
  kiln_thunk_exec_params_t q = *p;
  q.profile_depth = p->profile_depth + 1;
  for (size_t i = 0; i < s->len; i++) {
    kiln_thunk_t *t = s->items[i];
    q.profile_parent = t;
    uint64_t t0 = now_ns();
    kiln_status st = kiln_thunk_execute(t, &q);
    if (st) return kiln_thunk_seq_failed(s, i, false, p, st);
    st = kiln_status_annotate(kiln_stream_synchronize(p->stream), "after %s %s (profiling)",
                              kiln_thunk_kind_name(t->kind), t->name);
    if (st) return kiln_thunk_seq_failed(s, i, true, p, st); /* t itself returned */
    uint64_t t1 = now_ns();
    record(p->profile, t, p->profile_parent, p->profile_depth, t1 - t0);
  }
  return NULL;
}
