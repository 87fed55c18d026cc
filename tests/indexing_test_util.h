/* Shared helpers for the indexing-map cmocka suites (tests/test_indexing_*.c). */
#ifndef KILN_TESTS_INDEXING_TEST_UTIL_H_
#define KILN_TESTS_INDEXING_TEST_UTIL_H_

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/analysis/indexing_map.h"

/* Parses `text` (failing the test on error); the map is owned by the caller. */
static inline kiln_indexing_map_t *idx_parse(kiln_affine_ctx_t *ctx, const char *text) {
  kiln_indexing_map_t *m = NULL;
  kiln_status st = kiln_indexing_map_parse(ctx, text, &m);
  if (st) {
    fprintf(stderr, "parse of '%s' failed: %s\n", text, kiln_status_message(st));
    kiln_status_free(st);
    fail();
  }
  return m;
}

/* Asserts the map prints as `expected`. */
static inline void idx_assert_prints(const kiln_indexing_map_t *m, const char *expected) {
  char *s = kiln_indexing_map_to_string(m);
  if (strcmp(s, expected) != 0) {
    fprintf(stderr, "expected: %s\n  actual: %s\n", expected, s);
    kiln_free(s);
    fail();
  }
  kiln_free(s);
}

/* Parses `in`, simplifies, and asserts the result prints as `out`. */
static inline void idx_assert_simplifies_to(const char *in, const char *out) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, in);
  kiln_indexing_map_simplify(m);
  idx_assert_prints(m, out);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

/* Simple deterministic PRNG (xorshift64*). */
typedef struct idx_rng {
  uint64_t s;
} idx_rng_t;
static inline uint64_t idx_rng_next(idx_rng_t *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}
/* Uniform in [lo, hi]. */
static inline int64_t idx_rng_range(idx_rng_t *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(idx_rng_next(r) % (uint64_t)(hi - lo + 1));
}

#endif /* KILN_TESTS_INDEXING_TEST_UTIL_H_ */
