/* The evaluator's large values: blocks of KILN_EVAL_HEAP_MIN_BYTES or more, each its own
 * allocation, freed by a mark-and-sweep collection once no live value refers to them (eval.c
 * marks what its frames still use). Small values stay in the arenas. */
#include <stdlib.h>

#include "compiler/eval/eval.h"

typedef struct heap_block {
  char *p;
  size_t bytes;
  uint64_t serial; /* allocation order */
  bool marked;
} heap_block_t;

struct kiln_eval_heap {
  heap_block_t *blocks; /* sorted by address while collecting */
  int n, cap;
  size_t live_bytes;
  size_t since_collect; /* bytes allocated since the last collection */
  size_t survived;      /* bytes the last collection kept */
  size_t limit;         /* 0: unlimited; else live_bytes stay at or under it */
  bool eager;
  uint64_t next_serial;
};

/* Allocated bytes that start a collection at the next safe point: at least this, or the
 * bytes that survived the last one (so collections cost O(allocation)); sooner when half the
 * limit is live. */
#define COLLECT_AFTER_BYTES ((size_t)64 << 20)

kiln_eval_heap_t *kiln_eval_heap_create(size_t limit, bool eager) {
  kiln_eval_heap_t *h = kiln_try_calloc(1, sizeof *h);
  if (h) {
    h->limit = limit;
    h->eager = eager;
  }
  return h;
}

bool kiln_eval_heap_takes(const kiln_eval_heap_t *h, size_t bytes) {
  /* Eagerly: not the scalars (a reducer's or comparator's, called per element under an
   * instruction no collection runs beneath, would each hold a block until it ends). */
  return bytes >= KILN_EVAL_HEAP_MIN_BYTES || (h->eager && bytes > 16);
}

void kiln_eval_heap_destroy(kiln_eval_heap_t *h) {
  if (!h) return;
  for (int i = 0; i < h->n; i++) kiln_free(h->blocks[i].p);
  kiln_free(h->blocks);
  kiln_free(h);
}

void *kiln_eval_heap_alloc(kiln_eval_heap_t *h, size_t bytes) {
  if (h->limit && (bytes > h->limit || h->live_bytes > h->limit - bytes)) return NULL;
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 16;
    heap_block_t *b = kiln_try_realloc(h->blocks, sizeof *b * (size_t)cap);
    if (!b) return NULL;
    h->blocks = b;
    h->cap = cap;
  }
  char *p = kiln_try_calloc(1, bytes);
  if (!p) return NULL;
  h->blocks[h->n++] = (heap_block_t){p, bytes, h->next_serial++, false};
  h->live_bytes += bytes;
  h->since_collect += bytes;
  return p;
}

bool kiln_eval_heap_wants_collection(const kiln_eval_heap_t *h) {
  if (h->eager) return h->since_collect > 0;
  if (h->limit && h->since_collect && h->live_bytes >= h->limit / 2) return true;
  return h->since_collect >=
         (h->survived > COLLECT_AFTER_BYTES ? h->survived : COLLECT_AFTER_BYTES);
}

uint64_t kiln_eval_heap_serial(const kiln_eval_heap_t *h) {
  return h->next_serial;
}

void kiln_eval_heap_free_since(kiln_eval_heap_t *h, uint64_t serial) {
  if (h->next_serial == serial) return; /* nothing allocated since */
  int kept = 0;
  for (int i = 0; i < h->n; i++) {
    if (h->blocks[i].serial < serial) {
      h->blocks[kept++] = h->blocks[i];
    } else {
      h->live_bytes -= h->blocks[i].bytes;
      h->since_collect -=
          h->blocks[i].bytes < h->since_collect ? h->blocks[i].bytes : h->since_collect;
      kiln_free(h->blocks[i].p);
    }
  }
  h->n = kept;
}

bool kiln_eval_heap_allocated_since_collection(const kiln_eval_heap_t *h) {
  return h->since_collect > 0;
}

static int by_address(const void *a, const void *b) {
  const char *x = ((const heap_block_t *)a)->p, *y = ((const heap_block_t *)b)->p;
  return x < y ? -1 : x > y;
}

void kiln_eval_heap_begin_collection(kiln_eval_heap_t *h) {
  qsort(h->blocks, (size_t)h->n, sizeof *h->blocks, by_address);
  for (int i = 0; i < h->n; i++) h->blocks[i].marked = false;
}

void kiln_eval_heap_mark(kiln_eval_heap_t *h, const void *data) {
  const char *p = data;
  int lo = 0, hi = h->n - 1;
  while (lo <= hi) { /* the block holding p, if any: views may start inside one */
    int mid = lo + (hi - lo) / 2;
    const heap_block_t *b = &h->blocks[mid];
    if (p < b->p) {
      hi = mid - 1;
    } else if (p >= b->p + b->bytes) {
      lo = mid + 1;
    } else {
      h->blocks[mid].marked = true;
      return;
    }
  }
}

void kiln_eval_heap_mark_literal(kiln_eval_heap_t *h, const kiln_literal_t *l) {
  if (!l) return;
  if (l->data) kiln_eval_heap_mark(h, l->data);
  for (int i = 0; i < l->num_tuple_elements; i++)
    kiln_eval_heap_mark_literal(h, l->tuple_elements[i]);
}

void kiln_eval_heap_sweep(kiln_eval_heap_t *h) {
  int kept = 0;
  for (int i = 0; i < h->n; i++) {
    if (h->blocks[i].marked) {
      h->blocks[kept++] = h->blocks[i];
    } else {
      h->live_bytes -= h->blocks[i].bytes;
      kiln_free(h->blocks[i].p);
    }
  }
  h->n = kept;
  h->since_collect = 0;
  h->survived = h->live_bytes;
}
