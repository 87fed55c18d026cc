/* The caching device allocator (allocator.h). */
#include "runtime/allocator.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ALLOCATOR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ALLOCATOR_ASAN 1
#endif
#endif
#ifdef KILN_ALLOCATOR_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define NUM_BINS 24
#define MIN_BIN_BYTES 256
#define DEFAULT_REGION (2u << 20)
#define MAX_REGION_STEP ((size_t)1 << 30) /* regions stop doubling at 1 GiB */

typedef struct region region_t;

/* A piece of a region: in use, or free and in its bin. Neighbours by address within the
 * region (chunks never merge across regions: the raw allocator gave them separately). */
typedef struct chunk {
  uint64_t ptr;
  size_t size;
  bool in_use;
  struct chunk *prev, *next;         /* region neighbours */
  struct chunk *bin_prev, *bin_next; /* free: bin list; spare: the spare list (bin_next) */
  region_t *region;
} chunk_t;

struct region {
  uint64_t base;
  size_t size;
  chunk_t *first;
  region_t *prev, *next;
};

/* In-use chunks by address: open addressing, linear probing, backward-shift deletion. */
typedef struct addr_map {
  chunk_t **slots;
  size_t cap, len; /* cap: a power of two */
} addr_map_t;

struct kiln_device_allocator {
  kiln_device_allocator_raw_t raw;
  kiln_device_allocator_options_t opts;
  char name[64];
  pthread_mutex_t mu;
  chunk_t *bins[NUM_BINS];
  region_t *regions;
  chunk_t *spare; /* recycled chunk records */
  addr_map_t in_use;
  size_t next_region;
  kiln_device_allocator_stats_t st;
};

/* ---- helpers ----------------------------------------------------------------------------- */

static uint64_t hash_addr(uint64_t p) {
  p ^= p >> 33;
  p *= 0xff51afd7ed558ccdULL;
  p ^= p >> 33;
  return p;
}

static void map_put(addr_map_t *m, chunk_t *c);

static bool map_full(const addr_map_t *m) {
  return (m->len + 1) * 2 > m->cap;
}

/* Doubles the map; false (the map unchanged) when the host allocation is refused. */
static bool map_grow(addr_map_t *m) {
  addr_map_t old = *m;
  size_t cap = old.cap ? old.cap * 2 : 64;
  chunk_t **slots = kiln_try_calloc(cap, sizeof(*slots));
  if (!slots) return false;
  m->cap = cap;
  m->slots = slots;
  m->len = 0;
  for (size_t i = 0; i < old.cap; i++)
    if (old.slots[i]) map_put(m, old.slots[i]);
  kiln_free(old.slots);
  return true;
}

/* The map has room (reserve_bookkeeping made it). */
static void map_put(addr_map_t *m, chunk_t *c) {
  size_t i = hash_addr(c->ptr) & (m->cap - 1);
  while (m->slots[i]) i = (i + 1) & (m->cap - 1);
  m->slots[i] = c;
  m->len++;
}

/* Removes and returns the chunk at `p`, or NULL. */
static chunk_t *map_take(addr_map_t *m, uint64_t p) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1, i = hash_addr(p) & mask;
  while (m->slots[i] && m->slots[i]->ptr != p) i = (i + 1) & mask;
  chunk_t *c = m->slots[i];
  if (!c) return NULL;
  m->slots[i] = NULL;
  m->len--;
  /* Shift later members of the probe run back over the hole. */
  for (size_t j = (i + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
    size_t home = hash_addr(m->slots[j]->ptr) & mask;
    bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
    if (movable) {
      m->slots[i] = m->slots[j];
      m->slots[j] = NULL;
      i = j;
    }
  }
  return c;
}

static int bin_of(size_t size) {
  int b = 0;
  for (size_t s = size / MIN_BIN_BYTES; s > 1 && b < NUM_BINS - 1; s >>= 1) b++;
  return b;
}

static void bin_insert(kiln_device_allocator_t *a, chunk_t *c) {
  int b = bin_of(c->size);
  c->bin_prev = NULL;
  c->bin_next = a->bins[b];
  if (a->bins[b]) a->bins[b]->bin_prev = c;
  a->bins[b] = c;
}

static void bin_remove(kiln_device_allocator_t *a, chunk_t *c) {
  if (c->bin_prev)
    c->bin_prev->bin_next = c->bin_next;
  else
    a->bins[bin_of(c->size)] = c->bin_next;
  if (c->bin_next) c->bin_next->bin_prev = c->bin_prev;
  c->bin_prev = c->bin_next = NULL;
}

/* A spare chunk record (reserve_bookkeeping keeps two for each allocation). */
static chunk_t *chunk_new(kiln_device_allocator_t *a) {
  chunk_t *c = a->spare;
  a->spare = c->bin_next;
  memset(c, 0, sizeof(*c));
  return c;
}

static void chunk_recycle(kiln_device_allocator_t *a, chunk_t *c) {
  c->bin_next = a->spare;
  a->spare = c;
}

/* Makes sure the bookkeeping of one allocation cannot fail half-way: two spare chunk records
 * (a new region's chunk and the remainder a split leaves) and room for one more address in the
 * map. False when the host allocation is refused (kiln_try_*): nothing changed but the spares. */
static bool reserve_bookkeeping(kiln_device_allocator_t *a) {
  int have = 0;
  for (chunk_t *c = a->spare; c && have < 2; c = c->bin_next) have++;
  for (; have < 2; have++) {
    chunk_t *c = kiln_try_malloc(sizeof(*c));
    if (!c) return false;
    chunk_recycle(a, c);
  }
  return !map_full(&a->in_use) || map_grow(&a->in_use);
}

static void poison(const kiln_device_allocator_t *a, uint64_t p, size_t n) {
#ifdef KILN_ALLOCATOR_ASAN
  if (a->opts.host_memory) ASAN_POISON_MEMORY_REGION((void *)(uintptr_t)p, n);
#else
  (void)a, (void)p, (void)n;
#endif
}

static void unpoison(const kiln_device_allocator_t *a, uint64_t p, size_t n) {
#ifdef KILN_ALLOCATOR_ASAN
  if (a->opts.host_memory) ASAN_UNPOISON_MEMORY_REGION((void *)(uintptr_t)p, n);
#else
  (void)a, (void)p, (void)n;
#endif
}

static kiln_status raw_alloc(kiln_device_allocator_t *a, size_t size, uint64_t *out) {
  a->st.raw_allocs++;
  *out = 0;
  kiln_status s = a->raw.alloc(a->raw.ctx, size, out);
  if (!s && (*out & (a->opts.alignment - 1))) {
    a->raw.free(a->raw.ctx, *out);
    a->st.raw_frees++;
    *out = 0;
    return KILN_ERR_INTERNAL(
        "allocator %s: the raw allocator returned an address not aligned to %zu", a->name,
        a->opts.alignment);
  }
  return s;
}

static void raw_free(kiln_device_allocator_t *a, uint64_t p) {
  a->st.raw_frees++;
  a->raw.free(a->raw.ctx, p);
}

static void note_in_use(kiln_device_allocator_t *a, size_t size) {
  a->st.bytes_in_use += (int64_t)size;
  if (a->st.bytes_in_use > a->st.peak_bytes_in_use) a->st.peak_bytes_in_use = a->st.bytes_in_use;
  if ((int64_t)size > a->st.largest_alloc_size) a->st.largest_alloc_size = (int64_t)size;
  a->st.num_allocs++;
}

static void note_pool(kiln_device_allocator_t *a, int64_t delta) {
  a->st.pool_bytes += delta;
  if (a->st.pool_bytes > a->st.peak_pool_bytes) a->st.peak_pool_bytes = a->st.pool_bytes;
}

/* ---- regions ----------------------------------------------------------------------------- */

static void region_release(kiln_device_allocator_t *a, region_t *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    a->regions = r->next;
  if (r->next) r->next->prev = r->prev;
  unpoison(a, r->base, r->size);
  raw_free(a, r->base);
  note_pool(a, -(int64_t)r->size);
  a->st.num_regions--;
  kiln_free(r);
}

/* Releases every region that is one free chunk. */
static void release_free_regions(kiln_device_allocator_t *a) {
  for (region_t *r = a->regions, *next; r; r = next) {
    next = r->next;
    chunk_t *c = r->first;
    if (c->in_use || c->next) continue;
    bin_remove(a, c);
    chunk_recycle(a, c);
    region_release(a, r);
  }
}

static bool within_limit(const kiln_device_allocator_t *a, size_t size) {
  return !a->opts.limit ||
         (size <= a->opts.limit && (size_t)a->st.pool_bytes <= a->opts.limit - size);
}

/* Adds a region that holds at least `size` bytes and puts it in its bin as one free chunk. */
static kiln_status grow(kiln_device_allocator_t *a, size_t size) {
  size_t want = size > a->next_region ? size : a->next_region;
  if (!within_limit(a, want)) want = size;
  if (!within_limit(a, want)) release_free_regions(a);
  if (!within_limit(a, want))
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "allocator %s: %zu more bytes would pass the limit of %zu", a->name,
                            size, a->opts.limit);
  region_t *r = kiln_try_calloc(1, sizeof(*r));
  if (!r)
    return KILN_ERR_EXHAUSTED("allocator %s: out of host memory for a region record", a->name);
  uint64_t base = 0;
  kiln_status s = raw_alloc(a, want, &base);
  if (s && want > size) {
    kiln_status_free(s);
    want = size;
    s = raw_alloc(a, want, &base);
  }
  if (s) {
    kiln_status_free(s);
    release_free_regions(a);
    s = raw_alloc(a, want, &base);
  }
  if (s) {
    kiln_free(r);
    return s;
  }
  if (want == a->next_region && a->next_region < MAX_REGION_STEP) a->next_region *= 2;
  r->base = base;
  r->size = want;
  r->next = a->regions;
  if (a->regions) a->regions->prev = r;
  a->regions = r;
  chunk_t *c = chunk_new(a);
  c->ptr = base;
  c->size = want;
  c->region = r;
  r->first = c;
  bin_insert(a, c);
  poison(a, base, want);
  note_pool(a, (int64_t)want);
  a->st.num_regions++;
  return NULL;
}

/* ---- chunks ------------------------------------------------------------------------------ */

/* The smallest free chunk of at least `size` bytes, or NULL. */
static chunk_t *best_fit(kiln_device_allocator_t *a, size_t size) {
  for (int b = bin_of(size); b < NUM_BINS; b++) {
    chunk_t *best = NULL;
    for (chunk_t *c = a->bins[b]; c; c = c->bin_next)
      if (c->size >= size && (!best || c->size < best->size)) best = c;
    if (best) return best;
  }
  return NULL;
}

/* Takes `size` bytes from the front of free chunk `c`; the rest stays free. */
static void take(kiln_device_allocator_t *a, chunk_t *c, size_t size) {
  bin_remove(a, c);
  if (c->size - size >= MIN_BIN_BYTES && c->size - size >= a->opts.alignment) {
    chunk_t *rest = chunk_new(a);
    rest->ptr = c->ptr + size;
    rest->size = c->size - size;
    rest->region = c->region;
    rest->prev = c;
    rest->next = c->next;
    if (c->next) c->next->prev = rest;
    c->next = rest;
    c->size = size;
    bin_insert(a, rest);
  }
  c->in_use = true;
}

/* Merges free chunk `c` into its free predecessor / successor; returns the survivor. */
static chunk_t *coalesce(kiln_device_allocator_t *a, chunk_t *c) {
  chunk_t *n = c->next;
  if (n && !n->in_use) {
    bin_remove(a, n);
    c->size += n->size;
    c->next = n->next;
    if (n->next) n->next->prev = c;
    chunk_recycle(a, n);
  }
  chunk_t *p = c->prev;
  if (p && !p->in_use) {
    bin_remove(a, p);
    p->size += c->size;
    p->next = c->next;
    if (c->next) c->next->prev = p;
    chunk_recycle(a, c);
    c = p;
  }
  return c;
}

/* ---- API --------------------------------------------------------------------------------- */

kiln_status kiln_device_allocator_create(const kiln_device_allocator_raw_t *raw,
                                         const kiln_device_allocator_options_t *opts,
                                         kiln_device_allocator_t **out) {
  if (!out) return KILN_ERR_INVALID("allocator create: NULL out");
  *out = NULL;
  if (!raw || !raw->alloc || !raw->free || !opts)
    return KILN_ERR_INVALID("allocator create: missing raw allocator or options");
  size_t al = opts->alignment ? opts->alignment : 256;
  if (al & (al - 1))
    return KILN_ERR_INVALID("allocator create: alignment %zu is not a power of two", al);
  kiln_device_allocator_t *a = kiln_try_calloc(1, sizeof(*a));
  if (!a) return KILN_ERR_EXHAUSTED("allocator create: out of host memory");
  a->raw = *raw;
  a->opts = *opts;
  a->opts.name = NULL;
  a->opts.alignment = al;
  size_t first = opts->initial_region ? opts->initial_region : DEFAULT_REGION;
  a->next_region = (first + al - 1) & ~(al - 1);
  a->st.bytes_limit = (int64_t)opts->limit;
  snprintf(a->name, sizeof(a->name), "%s", opts->name ? opts->name : "device");
  pthread_mutex_init(&a->mu, NULL);
  *out = a;
  return NULL;
}

void kiln_device_allocator_destroy(kiln_device_allocator_t *a) {
  if (!a) return;
  /* Pass-through blocks live only in the address map; cached chunks in their regions. */
  for (size_t i = 0; i < a->in_use.cap && !a->opts.caching; i++) {
    chunk_t *c = a->in_use.slots[i];
    if (!c) continue;
    raw_free(a, c->ptr);
    kiln_free(c);
  }
  kiln_free(a->in_use.slots);
  while (a->regions) {
    region_t *r = a->regions;
    for (chunk_t *c = r->first, *n; c; c = n) {
      n = c->next;
      kiln_free(c);
    }
    region_release(a, r);
  }
  for (chunk_t *c = a->spare, *n; c; c = n) {
    n = c->bin_next;
    kiln_free(c);
  }
  pthread_mutex_destroy(&a->mu);
  kiln_free(a);
}

/* The caller holds a->mu and made reserve_bookkeeping succeed. */
static kiln_status alloc_locked(kiln_device_allocator_t *a, size_t size, uint64_t *out) {
  if (!a->opts.caching) {
    if (!within_limit(a, size))
      return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                              "allocator %s: %zu more bytes would pass the limit of %zu", a->name,
                              size, a->opts.limit);
    KILN_RETURN_IF_ERROR_PLAIN(raw_alloc(a, size, out));
    chunk_t *c = chunk_new(a);
    c->ptr = *out;
    c->size = size;
    c->in_use = true;
    map_put(&a->in_use, c);
    note_pool(a, (int64_t)size);
    note_in_use(a, size);
    return NULL;
  }
  chunk_t *c = best_fit(a, size);
  if (!c) {
    KILN_RETURN_IF_ERROR_PLAIN(grow(a, size));
    c = best_fit(a, size);
  }
  take(a, c, size);
  map_put(&a->in_use, c);
  note_in_use(a, c->size); /* a chunk too small to split is counted whole */
  unpoison(a, c->ptr, size);
  *out = c->ptr;
  return NULL;
}

kiln_status kiln_device_allocator_alloc(kiln_device_allocator_t *a, size_t size, uint64_t *out) {
  if (!a || !out) return KILN_ERR_INVALID("allocator alloc: NULL allocator or out");
  *out = 0;
  size_t al = a->opts.alignment, rounded = ((size ? size : 1) + al - 1) & ~(al - 1);
  if (rounded < size)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "allocator %s: %zu bytes overflow", a->name,
                            size);
  kiln_mutex_lock(&a->mu);
  if (!reserve_bookkeeping(a)) {
    kiln_mutex_unlock(&a->mu);
    return KILN_ERR_EXHAUSTED("allocator %s: out of host memory for its bookkeeping", a->name);
  }
  kiln_status s = alloc_locked(a, rounded, out);
  int64_t in_use = a->st.bytes_in_use, pool = a->st.pool_bytes;
  kiln_mutex_unlock(&a->mu);
  if (s) {
    kiln_device_allocator_stats_t st;
    kiln_device_allocator_get_stats(a, &st);
    s = kiln_status_annotate(
        s,
        "device memory exhausted on %s: %zu bytes requested, %lld in use, %lld "
        "held in the pool, largest free block %lld; free buffers or use smaller "
        "inputs",
        a->name, size, (long long)in_use, (long long)pool, (long long)st.largest_free_block);
  }
  return s;
}

void kiln_device_allocator_free(kiln_device_allocator_t *a, uint64_t p) {
  if (!a || !p) return;
  kiln_mutex_lock(&a->mu);
  chunk_t *c = map_take(&a->in_use, p);
  if (!c) {
    kiln_mutex_unlock(&a->mu);
    KILN_LOG_W("allocator %s: free of 0x%llx, which it did not hand out (or freed twice)", a->name,
               (unsigned long long)p);
    return;
  }
  a->st.bytes_in_use -= (int64_t)c->size;
  if (!a->opts.caching) {
    note_pool(a, -(int64_t)c->size);
    raw_free(a, c->ptr);
    chunk_recycle(a, c);
  } else {
    c->in_use = false;
    poison(a, c->ptr, c->size);
    bin_insert(a, coalesce(a, c));
  }
  kiln_mutex_unlock(&a->mu);
}

void kiln_device_allocator_trim(kiln_device_allocator_t *a) {
  if (!a) return;
  kiln_mutex_lock(&a->mu);
  release_free_regions(a);
  kiln_mutex_unlock(&a->mu);
}

void kiln_device_allocator_get_stats(kiln_device_allocator_t *a,
                                     kiln_device_allocator_stats_t *out) {
  memset(out, 0, sizeof(*out));
  if (!a) return;
  kiln_mutex_lock(&a->mu);
  *out = a->st;
  for (int b = NUM_BINS - 1; b >= 0 && !out->largest_free_block; b--)
    for (chunk_t *c = a->bins[b]; c; c = c->bin_next)
      if ((int64_t)c->size > out->largest_free_block) out->largest_free_block = (int64_t)c->size;
  kiln_mutex_unlock(&a->mu);
}

void kiln_device_allocator_clear_peak(kiln_device_allocator_t *a) {
  if (!a) return;
  kiln_mutex_lock(&a->mu);
  a->st.peak_bytes_in_use = a->st.bytes_in_use;
  a->st.peak_pool_bytes = a->st.pool_bytes;
  kiln_mutex_unlock(&a->mu);
}
