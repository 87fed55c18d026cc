/* The arena-chunk pool (base/alloc.c): a destroyed arena's chunks are handed to the next
 * arena, zeroed, instead of going back to glibc; the pool is bounded, bypassed while an
 * allocator hook is installed, and safe when many threads create and destroy arenas (this
 * file runs under TSan in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "base/alloc.h"

static void test_destroyed_chunk_is_reused_zeroed(void **state) {
  (void)state;
  kiln_arena_t a;
  kiln_arena_init(&a);
  unsigned char *p = kiln_arena_alloc(&a, 1000);
  assert_non_null(p);
  memset(p, 0xAB, 1000);
  kiln_arena_destroy(&a);

  kiln_arena_t b;
  kiln_arena_init(&b);
  unsigned char *q = kiln_arena_alloc(&b, 1000);
  assert_ptr_equal(p, q); /* the 4 KiB chunk came back from the pool */
  for (int i = 0; i < 1000; i++) assert_int_equal(q[i], 0);
  kiln_arena_destroy(&b);
}

typedef struct counting_alloc {
  int allocs, frees;
} counting_alloc_t;

static void *counting_realloc(void *ctx, void *p, size_t n) {
  counting_alloc_t *c = ctx;
  if (n == 0) {
    if (p) c->frees++;
    free(p);
    return NULL;
  }
  if (!p) c->allocs++;
  return realloc(p, n);
}

static void test_hook_sees_chunks_the_pool_would_keep(void **state) {
  (void)state;
  kiln_arena_t warm;
  kiln_arena_init(&warm);
  assert_non_null(kiln_arena_alloc(&warm, 100));
  kiln_arena_destroy(&warm); /* one chunk now pooled under libc */

  counting_alloc_t c = {0};
  kiln_allocator_set(&(kiln_allocator_t){counting_realloc, &c});
  for (int i = 0; i < 3; i++) {
    kiln_arena_t a;
    kiln_arena_init(&a);
    assert_non_null(kiln_arena_alloc(&a, 100));
    kiln_arena_destroy(&a);
  }
  kiln_allocator_set(NULL);
  assert_int_equal(c.allocs, 3); /* no pooled chunk was handed out, none kept */
  assert_int_equal(c.frees, 3);
}

static void test_chunks_over_the_pooled_sizes_work(void **state) {
  (void)state;
  kiln_arena_t a;
  kiln_arena_init(&a);
  /* 3 MiB: over the largest pooled size, so freed to libc and allocated again. */
  unsigned char *big = kiln_arena_alloc(&a, (size_t)3 << 20);
  assert_non_null(big);
  big[0] = 1;
  big[((size_t)3 << 20) - 1] = 1;
  kiln_arena_destroy(&a);
  kiln_arena_init(&a);
  unsigned char *again = kiln_arena_alloc(&a, (size_t)3 << 20);
  assert_non_null(again);
  assert_int_equal(again[0], 0);
  assert_int_equal(again[((size_t)3 << 20) - 1], 0);
  kiln_arena_destroy(&a);
}

enum { kThreads = 8, kRounds = 200 };

/* Each thread fills arenas of growing size with its own byte and checks that nothing else
 * wrote into them before destroying them. */
static void *churn(void *arg) {
  unsigned char tag = (unsigned char)(uintptr_t)arg;
  for (int r = 0; r < kRounds; r++) {
    kiln_arena_t a;
    kiln_arena_init(&a);
    unsigned char *blocks[16];
    size_t sizes[16];
    for (int i = 0; i < 16; i++) {
      sizes[i] = (size_t)(64 + ((r * 31 + i * 977) % 20000));
      blocks[i] = kiln_arena_alloc(&a, sizes[i]);
      if (blocks[i] == NULL) return (void *)1;
      for (size_t k = 0; k < sizes[i]; k++) {
        if (blocks[i][k] != 0) return (void *)1;
      }
      memset(blocks[i], tag, sizes[i]);
    }
    for (int i = 0; i < 16; i++) {
      for (size_t k = 0; k < sizes[i]; k++) {
        if (blocks[i][k] != tag) return (void *)1;
      }
    }
    kiln_arena_destroy(&a);
  }
  return NULL;
}

static void test_threads_share_the_pool(void **state) {
  (void)state;
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; i++) {
    assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)), 0);
  }
  for (int i = 0; i < kThreads; i++) {
    void *bad = NULL;
    pthread_join(t[i], &bad);
    assert_null(bad);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_destroyed_chunk_is_reused_zeroed),
      cmocka_unit_test(test_hook_sees_chunks_the_pool_would_keep),
      cmocka_unit_test(test_chunks_over_the_pooled_sizes_work),
      cmocka_unit_test(test_threads_share_the_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
