/* The host pool under concurrent launches: 4 threads launch 1,500 grids each (1 to 300
 * blocks, random min_chunk) on one 3-thread pool, some blocks sleeping so that workers are
 * held mid-job and fall asleep between launches; every block of every launch must run exactly
 * once before its launch returns. Built with -DKILN_SANITIZE=thread it is the ThreadSanitizer
 * check of base/host_pool.c (the lock-free claiming and the sleep/wake handshakes). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/host_pool.h"
#include "base/status.h"

enum { LAUNCHERS = 4, LAUNCHES = 1500, MAXB = 300 };

typedef struct {
  atomic_int hits[MAXB];
  uint32_t seed;
} grid_t;

typedef struct {
  kiln_host_pool_t *pool;
  uint32_t seed;
  char failure[200];
} launcher_t;

static uint32_t next_rand(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static void run_blocks(void **args, int64_t b, int64_t e) {
  grid_t *g = args[0];
  for (int64_t i = b; i < e; i++) {
    atomic_fetch_add(&g->hits[i], 1);
    if ((g->seed + (uint32_t)i) % 97 == 0) {
      struct timespec ts = {0, 20000 + (long)(g->seed % 50000)};
      nanosleep(&ts, NULL);
    }
  }
}

static void *launcher(void *arg) {
  launcher_t *l = arg;
  grid_t *g = kiln_calloc(1, sizeof(grid_t));
  for (int n = 0; n < LAUNCHES && !l->failure[0]; n++) {
    int64_t blocks = 1 + next_rand(&l->seed) % MAXB;
    int64_t min_chunk = next_rand(&l->seed) % 4 == 0 ? next_rand(&l->seed) % 40 : 0;
    for (int64_t i = 0; i < MAXB; i++) atomic_store(&g->hits[i], 0);
    g->seed = next_rand(&l->seed);
    void *args[1] = {g};
    kiln_status st = kiln_host_pool_launch(l->pool, run_blocks, args, blocks, min_chunk);
    if (st) {
      snprintf(l->failure, sizeof(l->failure), "launch %d: %s", n, kiln_status_message(st));
      kiln_status_free(st);
      break;
    }
    for (int64_t i = 0; i < MAXB; i++) {
      int want = i < blocks ? 1 : 0;
      if (atomic_load(&g->hits[i]) != want) {
        snprintf(l->failure, sizeof(l->failure),
                 "launch %d of %lld blocks: block %lld ran %d times", n, (long long)blocks,
                 (long long)i, atomic_load(&g->hits[i]));
        break;
      }
    }
    if (n % 300 == 0) {
      struct timespec ts = {0, 1000000}; /* long enough for the workers to sleep */
      nanosleep(&ts, NULL);
    }
  }
  kiln_free(g);
  return NULL;
}

static void test_concurrent_launches_run_every_block_once(void **state) {
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(3, &pool));
  pthread_t th[LAUNCHERS];
  launcher_t l[LAUNCHERS];
  for (int i = 0; i < LAUNCHERS; i++) {
    l[i] = (launcher_t){pool, 0x9e3779b9u * (uint32_t)(i + 1), {0}};
    assert_int_equal(pthread_create(&th[i], NULL, launcher, &l[i]), 0);
  }
  for (int i = 0; i < LAUNCHERS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < LAUNCHERS; i++)
    if (l[i].failure[0]) fail_msg("launcher %d: %s", i, l[i].failure);
  kiln_host_pool_destroy(pool);
}

static void test_create_launch_destroy_cycles(void **state) {
  grid_t *g = kiln_calloc(1, sizeof(grid_t));
  for (int c = 0; c < 200; c++) {
    kiln_host_pool_t *pool = NULL;
    assert_null(kiln_host_pool_create(1 + c % 4, &pool));
    for (int64_t i = 0; i < MAXB; i++) atomic_store(&g->hits[i], 0);
    g->seed = 1;
    void *args[1] = {g};
    if (c % 3) assert_null(kiln_host_pool_launch(pool, run_blocks, args, 50 + c, 0));
    kiln_host_pool_destroy(pool); /* workers may still be spinning after the launch */
    for (int64_t i = 0; i < 50 + c; i++) assert_int_equal(atomic_load(&g->hits[i]), c % 3 ? 1 : 0);
  }
  kiln_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_launches_run_every_block_once),
      cmocka_unit_test(test_create_launch_destroy_cycles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
