/* The client's compile cache (compile_cache.h). */
#include "plugin/compile_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/disk_cache.h"
#include "base/hash.h"
#include "base/str.h"
#include "compiler/thunks/executable_cache.h"

typedef struct cache_entry {
  kiln_pjrt_cache_key_t key;
  PJRT_Executable *exec; /* one reference */
} cache_entry_t;

struct kiln_pjrt_compile_cache {
  pthread_mutex_t mu;
  cache_entry_t entries[KILN_PJRT_COMPILE_CACHE_ENTRIES]; /* a ring: `next` is the oldest */
  int32_t num_entries, next;
  PJRT_Executable *live; /* every executable of the client (cache_next/cache_prev) */
  char *dir;             /* NULL: no disk cache */
  _Atomic int64_t hits, misses;
};

kiln_status kiln_pjrt_cache_key_make(kiln_pjrt_cache_key_t *k, const char *format,
                                     size_t format_len, const void *code, size_t code_len,
                                     const void *options, size_t options_len, const char *target) {
  size_t tl = strlen(target);
  k->len = 4 * sizeof(uint64_t) + format_len + code_len + options_len + tl;
  k->bytes = kiln_try_malloc(k->len);
  if (!k->bytes) {
    k->len = 0;
    return KILN_ERR_EXHAUSTED("out of host memory for the %zu-byte compile cache key of a program",
                              4 * sizeof(uint64_t) + format_len + code_len + options_len + tl);
  }
  char *p = k->bytes;
  const void *parts[4] = {format, code, options, target};
  size_t lens[4] = {format_len, code_len, options_len, tl};
  kiln_hasher_t h;
  kiln_hash_init(&h, 0x636f6d70696c65ull);
  for (int i = 0; i < 4; i++) {
    uint64_t l = lens[i];
    memcpy(p, &l, sizeof(l));
    p += sizeof(l);
    if (lens[i]) memcpy(p, parts[i], lens[i]);
    p += lens[i];
    kiln_hash_field(&h, parts[i], lens[i]);
  }
  kiln_hash_final(&h, k->hash);
  return NULL;
}

void kiln_pjrt_cache_key_free(kiln_pjrt_cache_key_t *k) {
  kiln_free(k->bytes);
  k->bytes = NULL;
  k->len = 0;
}

static bool key_equal(const kiln_pjrt_cache_key_t *a, const kiln_pjrt_cache_key_t *b) {
  return a->hash[0] == b->hash[0] && a->hash[1] == b->hash[1] && a->len == b->len &&
         !memcmp(a->bytes, b->bytes, a->len);
}

/* $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; NULL when neither is known. */
static char *default_dir(void) {
  kiln_strbuf_t b = {0};
  const char *env = getenv("KILN_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (env) {
    if (!*env) return NULL;
    kiln_strbuf_append(&b, env);
  } else if (xdg && *xdg) {
    kiln_strbuf_printf(&b, "%s/kiln", xdg);
  } else if (home && *home) {
    kiln_strbuf_printf(&b, "%s/.cache/kiln", home);
  } else {
    return NULL;
  }
  return kiln_strbuf_take(&b);
}

kiln_status kiln_pjrt_compile_cache_create(const kiln_pjrt_client_options_t *opts,
                                           kiln_pjrt_compile_cache_t **out) {
  if (!out) return KILN_ERR_INVALID("kiln_pjrt_compile_cache_create: NULL out");
  *out = NULL;
  kiln_pjrt_compile_cache_t *c = kiln_try_calloc(1, sizeof(*c));
  if (!c) return KILN_ERR_EXHAUSTED("out of host memory for a compile cache");
  pthread_mutex_init(&c->mu, NULL);
  if (opts && opts->cache_dir)
    c->dir = opts->cache_dir[0] ? kiln_strdup(opts->cache_dir) : NULL;
  else
    c->dir = default_dir();
  *out = c;
  return NULL;
}

void kiln_pjrt_compile_cache_destroy(kiln_pjrt_compile_cache_t *c) {
  if (!c) return;
  /* Drop the entries' references outside the lock (a last reference unregisters). */
  kiln_mutex_lock(&c->mu);
  int32_t n = c->num_entries;
  cache_entry_t *taken = kiln_calloc((size_t)n + 1, sizeof(*taken));
  for (int32_t i = 0; i < n; i++) taken[i] = c->entries[i];
  c->num_entries = 0;
  kiln_mutex_unlock(&c->mu);
  for (int32_t i = 0; i < n; i++) {
    kiln_pjrt_executable_unref(taken[i].exec);
    kiln_pjrt_cache_key_free(&taken[i].key);
  }
  kiln_free(taken);
  /* Executables the caller still holds lose their device code now, while the devices
   * exist. */
  kiln_mutex_lock(&c->mu);
  for (PJRT_Executable *e = c->live; e;) {
    PJRT_Executable *next = e->cache_next;
    kiln_pjrt_executable_detach(e);
    e->cache = NULL;
    e->cache_prev = e->cache_next = NULL;
    e = next;
  }
  c->live = NULL;
  kiln_mutex_unlock(&c->mu);
  pthread_mutex_destroy(&c->mu);
  kiln_free(c->dir);
  kiln_free(c);
}

PJRT_Executable *kiln_pjrt_compile_cache_get(kiln_pjrt_compile_cache_t *c,
                                             const kiln_pjrt_cache_key_t *k) {
  PJRT_Executable *found = NULL;
  kiln_mutex_lock(&c->mu);
  for (int32_t i = 0; i < c->num_entries && !found; i++)
    if (key_equal(&c->entries[i].key, k)) found = c->entries[i].exec;
  if (found) kiln_pjrt_executable_ref(found);
  kiln_mutex_unlock(&c->mu);
  atomic_fetch_add(found ? &c->hits : &c->misses, 1);
  return found;
}

PJRT_Executable *kiln_pjrt_compile_cache_put(kiln_pjrt_compile_cache_t *c,
                                             const kiln_pjrt_cache_key_t *k, PJRT_Executable *e) {
  PJRT_Executable *use = NULL, *evicted = NULL;
  kiln_pjrt_cache_key_t evicted_key = {0};
  kiln_mutex_lock(&c->mu);
  for (int32_t i = 0; i < c->num_entries && !use; i++)
    if (key_equal(&c->entries[i].key, k)) use = c->entries[i].exec;
  /* the entry's copy of the key; refused: the executable is not cached (a later compile of
   * the program compiles again) */
  char *bytes = use ? NULL : kiln_try_malloc(k->len ? k->len : 1);
  if (!use && !bytes) use = e;
  if (!use) {
    cache_entry_t *slot;
    if (c->num_entries < KILN_PJRT_COMPILE_CACHE_ENTRIES) {
      slot = &c->entries[c->num_entries++];
    } else {
      slot = &c->entries[c->next];
      c->next = (c->next + 1) % KILN_PJRT_COMPILE_CACHE_ENTRIES;
      evicted = slot->exec;
      evicted_key = slot->key;
    }
    slot->key.len = k->len;
    slot->key.hash[0] = k->hash[0];
    slot->key.hash[1] = k->hash[1];
    slot->key.bytes = bytes;
    memcpy(slot->key.bytes, k->bytes, k->len);
    slot->exec = e;
    kiln_pjrt_executable_ref(e); /* the entry's */
    use = e;
  }
  kiln_pjrt_executable_ref(use); /* the caller's */
  kiln_mutex_unlock(&c->mu);
  if (evicted) {
    kiln_pjrt_executable_unref(evicted);
    kiln_pjrt_cache_key_free(&evicted_key);
  }
  return use;
}

const char *kiln_pjrt_compile_cache_dir(const kiln_pjrt_compile_cache_t *c) {
  return c ? c->dir : NULL;
}

void kiln_pjrt_compile_cache_register(kiln_pjrt_compile_cache_t *c, PJRT_Executable *e) {
  kiln_mutex_lock(&c->mu);
  e->cache = c;
  e->cache_prev = NULL;
  e->cache_next = c->live;
  if (c->live) c->live->cache_prev = e;
  c->live = e;
  kiln_mutex_unlock(&c->mu);
}

void kiln_pjrt_compile_cache_unregister(kiln_pjrt_compile_cache_t *c, PJRT_Executable *e) {
  kiln_mutex_lock(&c->mu);
  if (e->cache == c) {
    if (e->cache_prev)
      e->cache_prev->cache_next = e->cache_next;
    else
      c->live = e->cache_next;
    if (e->cache_next) e->cache_next->cache_prev = e->cache_prev;
    e->cache = NULL;
    e->cache_prev = e->cache_next = NULL;
  }
  kiln_mutex_unlock(&c->mu);
}

kiln_pjrt_compile_cache_counters_t kiln_pjrt_compile_cache_counters(kiln_pjrt_compile_cache_t *c) {
  kiln_pjrt_compile_cache_counters_t r = {0};
  if (c) {
    r.memory_hits = atomic_load(&c->hits);
    r.memory_misses = atomic_load(&c->misses);
  }
  kiln_disk_cache_counters_t m = kiln_disk_cache_counters("modules");
  kiln_disk_cache_counters_t o = kiln_disk_cache_counters("host-objects");
  r.module_disk_hits = m.hits;
  r.module_disk_misses = m.misses;
  r.module_disk_rejected = m.rejected;
  r.object_disk_hits = o.hits;
  r.object_disk_misses = o.misses;
  r.object_disk_rejected = o.rejected;
  kiln_disk_cache_counters_t x = kiln_disk_cache_counters(KILN_EXECUTABLE_CACHE_KIND);
  r.executable_disk_hits = x.hits;
  r.executable_disk_misses = x.misses;
  r.executable_disk_rejected = x.rejected;
  return r;
}
