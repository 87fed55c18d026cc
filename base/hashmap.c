#include "base/hashmap.h"

#include <string.h>

#include "base/alloc.h"
#include "base/str.h"

void kiln_hashmap_init(kiln_hashmap_t *m) { memset(m, 0, sizeof *m); }

void kiln_hashmap_free(kiln_hashmap_t *m) {
  for (size_t i = 0; i < m->cap; i++) kiln_free(m->slots[i].key);
  kiln_free(m->slots);
  memset(m, 0, sizeof *m);
}

static kiln_hashmap_entry_t *find_slot(kiln_hashmap_entry_t *slots, size_t cap, const char *key,
                                       size_t key_len, uint64_t h) {
  size_t i = (size_t)h & (cap - 1);
  for (;;) {
    kiln_hashmap_entry_t *e = &slots[i];
    if (!e->key) return e;
    if (e->hash == h && e->key_len == key_len && memcmp(e->key, key, key_len) == 0) return e;
    i = (i + 1) & (cap - 1);
  }
}

void *kiln_hashmap_get(const kiln_hashmap_t *m, const char *key, size_t key_len) {
  if (!m->cap) return NULL;
  kiln_hashmap_entry_t *e = find_slot(m->slots, m->cap, key, key_len, kiln_hash_bytes(key, key_len));
  return e->key ? e->value : NULL;
}

bool kiln_hashmap_contains(const kiln_hashmap_t *m, const char *key, size_t key_len) {
  if (!m->cap) return false;
  kiln_hashmap_entry_t *e = find_slot(m->slots, m->cap, key, key_len, kiln_hash_bytes(key, key_len));
  return e->key != NULL;
}

static bool grow(kiln_hashmap_t *m, bool fallible) {
  size_t cap = m->cap ? m->cap * 2 : 16;
  kiln_hashmap_entry_t *slots =
      fallible ? kiln_try_calloc(cap, sizeof *slots) : kiln_calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < m->cap; i++) {
    kiln_hashmap_entry_t *e = &m->slots[i];
    if (e->key) *find_slot(slots, cap, e->key, e->key_len, e->hash) = *e;
  }
  kiln_free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return true;
}

/* Inserts or replaces; false (the map as it was) when `fallible` and an allocation is
 * refused. */
static bool put(kiln_hashmap_t *m, const char *key, size_t key_len, void *value, bool fallible,
                void **old_value) {
  *old_value = NULL;
  if ((m->len + 1) * 4 > m->cap * 3 && !grow(m, fallible)) return false;
  uint64_t h = kiln_hash_bytes(key, key_len);
  kiln_hashmap_entry_t *e = find_slot(m->slots, m->cap, key, key_len, h);
  if (e->key) {
    *old_value = e->value;
    e->value = value;
    return true;
  }
  char *copy = fallible ? kiln_try_malloc(key_len + 1) : kiln_malloc(key_len + 1);
  if (!copy) return false;
  e->key = copy;
  memcpy(e->key, key, key_len);
  e->key[key_len] = 0;
  e->key_len = key_len;
  e->hash = h;
  e->value = value;
  m->len++;
  return true;
}

void *kiln_hashmap_put(kiln_hashmap_t *m, const char *key, size_t key_len, void *value) {
  void *old = NULL;
  put(m, key, key_len, value, false, &old);
  return old;
}

bool kiln_hashmap_try_put(kiln_hashmap_t *m, const char *key, size_t key_len, void *value) {
  void *old = NULL;
  return put(m, key, key_len, value, true, &old);
}

void kiln_ptrmap_init(kiln_ptrmap_t *m) { memset(m, 0, sizeof *m); }

void kiln_ptrmap_free(kiln_ptrmap_t *m) {
  kiln_free(m->keys);
  kiln_free(m->values);
  memset(m, 0, sizeof *m);
}

static size_t ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

static size_t ptr_slot(const void **keys, size_t cap, const void *key) {
  size_t i = ptr_hash(key) & (cap - 1);
  while (keys[i] && keys[i] != key) i = (i + 1) & (cap - 1);
  return i;
}

void *kiln_ptrmap_get(const kiln_ptrmap_t *m, const void *key) {
  if (!m->cap || !key) return NULL;
  size_t i = ptr_slot(m->keys, m->cap, key);
  return m->keys[i] ? m->values[i] : NULL;
}

bool kiln_ptrmap_contains(const kiln_ptrmap_t *m, const void *key) {
  if (!m->cap || !key) return false;
  return m->keys[ptr_slot(m->keys, m->cap, key)] != NULL;
}

/* Moves the entries into `cap` slots; false (the map unchanged) when fallible allocation is
 * refused. */
static bool ptr_rehash(kiln_ptrmap_t *m, size_t cap, bool fallible) {
  void *(*calloc_fn)(size_t, size_t) = fallible ? kiln_try_calloc : kiln_calloc;
  const void **keys = calloc_fn(cap, sizeof *keys);
  void **values = keys ? calloc_fn(cap, sizeof *values) : NULL;
  if (!values) {
    kiln_free(keys);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = ptr_slot(keys, cap, m->keys[i]);
    keys[j] = m->keys[i];
    values[j] = m->values[i];
  }
  kiln_free(m->keys);
  kiln_free(m->values);
  m->keys = keys;
  m->values = values;
  m->cap = cap;
  return true;
}

/* The capacity that holds `n` entries under the 3/4 load bound. */
static size_t ptr_cap_for(size_t cap, size_t n) {
  if (!cap) cap = 16;
  while (n * 4 > cap * 3) cap *= 2;
  return cap;
}

bool kiln_ptrmap_reserve(kiln_ptrmap_t *m, size_t n) {
  size_t cap = ptr_cap_for(m->cap, n);
  return cap == m->cap || ptr_rehash(m, cap, true);
}

void kiln_ptrmap_put(kiln_ptrmap_t *m, const void *key, void *value) {
  if (!key) return;
  if ((m->len + 1) * 4 > m->cap * 3) ptr_rehash(m, ptr_cap_for(m->cap, m->len + 1), false);
  size_t i = ptr_slot(m->keys, m->cap, key);
  if (!m->keys[i]) {
    m->keys[i] = key;
    m->len++;
  }
  m->values[i] = value;
}
