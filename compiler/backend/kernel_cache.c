/* The per-kernel cache (kernel_cache.h). */
#include "compiler/backend/kernel_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "base/alloc.h"
#include "base/disk_cache.h"
#include "base/hashmap.h"
#include "base/log.h"
#include "base/version.h"

#define DEFAULT_MEMORY_BYTES ((int64_t)256 << 20)

/* One compiled kernel in memory, on the LRU list (most recent first). */
typedef struct node {
  uint64_t key[2];
  char kind[16];
  void *data;
  size_t len;
  struct node *prev, *next;
} node_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_hashmap_t g_map; /* kind + key -> node (NULL once evicted) */
static bool g_map_ready;
static node_t *g_head, *g_tail;
static int64_t g_bytes, g_limit = -1;
static kiln_kernel_cache_counters_t g_counts;

void kiln_kernel_cache_key_begin(kiln_hasher_t *h) {
  kiln_hash_init(h, 0x6b65726e656cull);
  unsigned major = 0, minor = 0, patch = 0;
  LLVMGetVersion(&major, &minor, &patch);
  uint64_t llvm = ((uint64_t)major << 32) | ((uint64_t)minor << 16) | patch;
  kiln_hash_word(h, llvm);
  kiln_hash_field(h, KILN_VERSION_STRING, strlen(KILN_VERSION_STRING));
}

void kiln_kernel_cache_set_memory_limit(int64_t bytes) {
  kiln_mutex_lock(&g_mu);
  g_limit = bytes < 0 ? DEFAULT_MEMORY_BYTES : bytes;
  kiln_mutex_unlock(&g_mu);
}

/* The map key: the kind's name then the 16 key bytes. */
static size_t map_key(const char *kind, const uint64_t key[2], char out[48]) {
  size_t n = strlen(kind);
  if (n > 31) n = 31;
  memcpy(out, kind, n);
  memcpy(out + n, key, 16);
  return n + 16;
}

static int64_t limit_locked(void) {
  if (g_limit < 0) g_limit = DEFAULT_MEMORY_BYTES;
  if (!g_map_ready) {
    kiln_hashmap_init(&g_map);
    g_map_ready = true;
  }
  return g_limit;
}

static void unlink_node(node_t *n) {
  if (n->prev)
    n->prev->next = n->next;
  else
    g_head = n->next;
  if (n->next)
    n->next->prev = n->prev;
  else
    g_tail = n->prev;
  n->prev = n->next = NULL;
}

static void push_front(node_t *n) {
  n->prev = NULL;
  n->next = g_head;
  if (g_head) g_head->prev = n;
  g_head = n;
  if (!g_tail) g_tail = n;
}

static void drop_node(node_t *n) {
  char mk[48];
  size_t ml = map_key(n->kind, n->key, mk);
  kiln_hashmap_put(&g_map, mk, ml, NULL);
  unlink_node(n);
  g_bytes -= (int64_t)n->len;
  kiln_free(n->data);
  kiln_free(n);
}

static bool memory_get(const char *kind, const uint64_t key[2], void **data, size_t *len) {
  char mk[48];
  size_t ml = map_key(kind, key, mk);
  kiln_mutex_lock(&g_mu);
  limit_locked();
  node_t *n = kiln_hashmap_get(&g_map, mk, ml);
  if (n) {
    unlink_node(n);
    push_front(n);
    *data = kiln_malloc(n->len ? n->len : 1);
    memcpy(*data, n->data, n->len);
    *len = n->len;
    g_counts.memory_hits++;
  } else {
    g_counts.memory_misses++;
  }
  kiln_mutex_unlock(&g_mu);
  return n != NULL;
}

static void memory_put(const char *kind, const uint64_t key[2], const void *data, size_t len) {
  char mk[48];
  size_t ml = map_key(kind, key, mk);
  kiln_mutex_lock(&g_mu);
  int64_t limit = limit_locked();
  /* Fallible (kiln_try_*): a refused allocation leaves the entry uncached, as a cache may. */
  node_t *n = NULL;
  if ((int64_t)len <= limit && !kiln_hashmap_get(&g_map, mk, ml) &&
      (n = kiln_try_calloc(1, sizeof(*n))) && (n->data = kiln_try_malloc(len ? len : 1)) &&
      kiln_hashmap_try_put(&g_map, mk, ml, n)) {
    n->key[0] = key[0];
    n->key[1] = key[1];
    snprintf(n->kind, sizeof(n->kind), "%s", kind);
    memcpy(n->data, data, len);
    n->len = len;
    push_front(n);
    g_bytes += (int64_t)len;
    while (g_bytes > limit && g_tail) {
      drop_node(g_tail);
      g_counts.memory_evicted++;
    }
  } else if (n) {
    kiln_free(n->data);
    kiln_free(n);
  }
  kiln_mutex_unlock(&g_mu);
}

bool kiln_kernel_cache_get(const char *dir, const char *kind, const uint64_t key[2], void **data,
                           size_t *len, bool *from_disk) {
  *data = NULL;
  *len = 0;
  if (from_disk) *from_disk = false;
  if (memory_get(kind, key, data, len)) return true;
  if (!dir || !*dir || !kiln_disk_cache_get(dir, kind, key, data, len)) return false;
  if (from_disk) *from_disk = true;
  memory_put(kind, key, *data, *len);
  return true;
}

void kiln_kernel_cache_put(const char *dir, const char *kind, const uint64_t key[2],
                           const void *data, size_t len) {
  memory_put(kind, key, data, len);
  if (dir && *dir) kiln_disk_cache_put(dir, kind, key, data, len);
}

void kiln_kernel_cache_clear(void) {
  kiln_mutex_lock(&g_mu);
  limit_locked();
  while (g_tail) drop_node(g_tail);
  /* The map keeps only keys of dropped entries now: start it afresh. */
  kiln_hashmap_free(&g_map);
  kiln_hashmap_init(&g_map);
  kiln_mutex_unlock(&g_mu);
}

kiln_kernel_cache_counters_t kiln_kernel_cache_counters(void) {
  kiln_mutex_lock(&g_mu);
  kiln_kernel_cache_counters_t c = g_counts;
  c.memory_bytes = g_bytes;
  kiln_mutex_unlock(&g_mu);
  return c;
}
