/* The host device's caching allocator from many threads at once: 8 threads each allocate
 * and free 4,000 blocks of random sizes (64 B to 1 MiB) through kiln_device_mem_alloc /
 * kiln_device_mem_free, keeping up to 24 live. Every block is filled with a tag of its owner
 * and checked before it is freed, so two live blocks that overlap fail the test; at the end
 * nothing is in use, every allocation was counted, and the pool is one free block per region
 * after coalescing. Built with -DKILN_SANITIZE=thread it is the ThreadSanitizer check of the
 * allocator (scripts/run-tests.sh runs tests/test_*stress*.c there). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/device.h"
#include "runtime/host/host_device.h"
#include "runtime/runtime_options.h"

enum { THREADS = 8, OPS = 4000, LIVE = 24 };

typedef struct block {
  uint64_t p;
  size_t n;
  uint32_t tag;
} block_t;

typedef struct worker {
  kiln_device_t *dev;
  uint32_t seed;
  int allocs;
  char failure[200];
} worker_t;

static uint32_t next_rand(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* One tagged word per 64 bytes (chunks are 64-byte aligned, so any overlap meets one) and
 * the last word. */
static void fill(const block_t *b) {
  uint32_t *w = (uint32_t *)(uintptr_t)b->p;
  for (size_t i = 0; i < b->n / 4; i += 16) w[i] = b->tag;
  w[b->n / 4 - 1] = b->tag;
}

static bool intact(const block_t *b) {
  const uint32_t *w = (const uint32_t *)(uintptr_t)b->p;
  for (size_t i = 0; i < b->n / 4; i += 16)
    if (w[i] != b->tag) return false;
  return w[b->n / 4 - 1] == b->tag;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  block_t live[LIVE] = {{0}};
  for (int op = 0; op < OPS && !w->failure[0]; op++) {
    int i = (int)(next_rand(&w->seed) % LIVE);
    block_t *b = &live[i];
    if (b->p) {
      if (!intact(b))
        snprintf(w->failure, sizeof(w->failure), "block of %zu bytes was overwritten", b->n);
      kiln_device_mem_free(w->dev, b->p);
      b->p = 0;
      continue;
    }
    /* Mostly small blocks, sometimes large ones (log-uniform sizes). */
    size_t n = (size_t)64 << (next_rand(&w->seed) % 15);
    n += (next_rand(&w->seed) % 16) * 4;
    kiln_status s = kiln_device_mem_alloc(w->dev, n, &b->p);
    if (s) {
      snprintf(w->failure, sizeof(w->failure), "alloc %zu: %s", n, kiln_status_message(s));
      kiln_status_free(s);
      break;
    }
    if (b->p % 64) snprintf(w->failure, sizeof(w->failure), "address not 64-byte aligned");
    b->n = n;
    b->tag = next_rand(&w->seed) | 1;
    fill(b);
    w->allocs++;
  }
  for (int i = 0; i < LIVE; i++)
    if (live[i].p) {
      if (!intact(&live[i]) && !w->failure[0])
        snprintf(w->failure, sizeof(w->failure), "block was overwritten");
      kiln_device_mem_free(w->dev, live[i].p);
    }
  return NULL;
}

static void test_many_threads_allocate_and_free_without_overlap(void **state) {
  (void)state;
  kiln_runtime_options_set(NULL); /* the caching allocator */
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_host_device_create(2, &dev);
  if (s) fail_msg("host device: %s", kiln_status_message(s));
  static worker_t workers[THREADS];
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (worker_t){.dev = dev, .seed = 0x9e3779b9u * (uint32_t)(t + 1)};
    assert_int_equal(pthread_create(&threads[t], NULL, worker_main, &workers[t]), 0);
  }
  int64_t allocs = 0;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(threads[t], NULL);
    if (workers[t].failure[0]) fail_msg("thread %d: %s", t, workers[t].failure);
    allocs += workers[t].allocs;
  }
  kiln_device_allocator_stats_t st;
  kiln_device_memory_stats(dev, &st);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.num_allocs, allocs);
  assert_true(st.peak_bytes_in_use > 0);
  assert_true(st.peak_bytes_in_use <= st.peak_pool_bytes);
  /* Everything coalesced: trimming returns every region. */
  kiln_device_memory_trim(dev);
  kiln_device_memory_stats(dev, &st);
  assert_int_equal(st.pool_bytes, 0);
  assert_int_equal(st.num_regions, 0);
  assert_int_equal(st.raw_frees, st.raw_allocs);
  kiln_device_destroy(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_many_threads_allocate_and_free_without_overlap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
