/* A 128-bit content hash for cache keys, fingerprints and checksums (not cryptographic: it
 * detects corruption and tells contents apart; it does not resist an attacker).
 *
 * Two 64-bit lanes consume the input eight bytes at a time with different multipliers and
 * rotations; the length and a final avalanche (splitmix64's finalizer) on each lane make
 * short inputs and trailing bytes count. Incremental: update in pieces, the result equals a
 * single update over the concatenation only when pieces are multiples of 8 bytes, so callers
 * hash each field separately through kiln_hash_field (length-prefixed) when they combine.
 *
 * Thread-safety: a hasher is not thread-safe (one per caller); the functions share no state. */
#ifndef KILN_BASE_HASH_H_
#define KILN_BASE_HASH_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct kiln_hasher {
  uint64_t a, b, n;
} kiln_hasher_t;

static inline uint64_t kiln_hash_rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

static inline uint64_t kiln_hash_avalanche(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static inline void kiln_hash_init(kiln_hasher_t *h, uint64_t seed) {
  h->a = 0x6a09e667f3bcc908ull ^ seed;
  h->b = 0xbb67ae8584caa73bull + seed;
  h->n = 0;
}

static inline void kiln_hash_word(kiln_hasher_t *h, uint64_t w) {
  h->a = kiln_hash_rotl(h->a ^ w, 29) * 0x9e3779b97f4a7c15ull;
  h->b = (kiln_hash_rotl(h->b + w, 37) * 0xc2b2ae3d27d4eb4full) ^ h->a;
}

static inline void kiln_hash_update(kiln_hasher_t *h, const void *data, size_t len) {
  const unsigned char *p = (const unsigned char *)data;
  h->n += len;
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    kiln_hash_word(h, w);
    p += 8;
    len -= 8;
  }
  if (len) {
    uint64_t w = 0;
    memcpy(&w, p, len);
    kiln_hash_word(h, w ^ ((uint64_t)len << 56));
  }
}

/* A field: its length, then its bytes (so ("ab","c") and ("a","bc") differ). */
static inline void kiln_hash_field(kiln_hasher_t *h, const void *data, size_t len) {
  kiln_hash_word(h, (uint64_t)len);
  kiln_hash_update(h, data, len);
}

static inline void kiln_hash_final(const kiln_hasher_t *h, uint64_t out[2]) {
  out[0] = kiln_hash_avalanche(h->a ^ h->n ^ kiln_hash_rotl(h->b, 17));
  out[1] = kiln_hash_avalanche((h->b + h->n * 0x9e3779b97f4a7c15ull) ^ out[0]);
}

static inline void kiln_hash128(const void *data, size_t len, uint64_t out[2]) {
  kiln_hasher_t h;
  kiln_hash_init(&h, 0);
  kiln_hash_update(&h, data, len);
  kiln_hash_final(&h, out);
}

/* 32 lowercase hex digits and a NUL. */
static inline void kiln_hash_hex(const uint64_t k[2], char out[33]) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)k[0], (unsigned long long)k[1]);
}

#endif /* KILN_BASE_HASH_H_ */
