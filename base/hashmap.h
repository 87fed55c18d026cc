/* Open-addressing hash map from byte-string keys to pointer values.
 * Keys are copied into the map; values are borrowed. */
#ifndef KILN_BASE_HASHMAP_H_
#define KILN_BASE_HASHMAP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_hashmap_entry {
  char *key; /* NULL = empty slot */
  size_t key_len;
  uint64_t hash;
  void *value;
} kiln_hashmap_entry_t;

typedef struct kiln_hashmap {
  kiln_hashmap_entry_t *slots;
  size_t cap; /* power of two */
  size_t len;
} kiln_hashmap_t;

void kiln_hashmap_init(kiln_hashmap_t *m);
void kiln_hashmap_free(kiln_hashmap_t *m);
/* Returns the value, or NULL when absent. */
void *kiln_hashmap_get(const kiln_hashmap_t *m, const char *key, size_t key_len);
bool kiln_hashmap_contains(const kiln_hashmap_t *m, const char *key, size_t key_len);
/* Inserts or replaces. Returns the previous value (NULL if none). */
void *kiln_hashmap_put(kiln_hashmap_t *m, const char *key, size_t key_len, void *value);
/* The same with fallible allocations (kiln_try_*): false, the map as it was, when one is
 * refused. */
bool kiln_hashmap_try_put(kiln_hashmap_t *m, const char *key, size_t key_len, void *value);
static inline void *kiln_hashmap_get_str(const kiln_hashmap_t *m, const char *key);

#include <string.h>
static inline void *kiln_hashmap_get_str(const kiln_hashmap_t *m, const char *key) {
  return kiln_hashmap_get(m, key, strlen(key));
}

/* Pointer-keyed map (identity of the pointer). */
typedef struct kiln_ptrmap {
  const void **keys;
  void **values;
  size_t cap, len;
} kiln_ptrmap_t;

void kiln_ptrmap_init(kiln_ptrmap_t *m);
void kiln_ptrmap_free(kiln_ptrmap_t *m);
void *kiln_ptrmap_get(const kiln_ptrmap_t *m, const void *key);
bool kiln_ptrmap_contains(const kiln_ptrmap_t *m, const void *key);
void kiln_ptrmap_put(kiln_ptrmap_t *m, const void *key, void *value);
/* Makes room for `n` entries so that putting up to that many allocates nothing; false when the
 * allocation is refused (kiln_try_*: the map is unchanged). */
bool kiln_ptrmap_reserve(kiln_ptrmap_t *m, size_t n);

#endif /* KILN_BASE_HASHMAP_H_ */
