/* The host worker pool (base/host_pool.h): every block of a launch runs exactly once, in
 * chunks of at least min_chunk blocks, on pools of 1 to 4 threads; no block runs after its
 * launch returned (a late worker finds the job gone); a launch completes while a worker is
 * stopped (the launcher never waits for a worker to wake up or check in); bad input is an
 * error; the default pool has as many workers as the CPUs the process may use. */
#define _GNU_SOURCE /* sched_setaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/host_pool.h"
#include "base/status.h"
#include "tests/temp_dir_util.h"

typedef struct {
  atomic_int *hits;  /* per block */
  int64_t min_chunk; /* every call but the one holding the last block spans >= this */
  int64_t num_blocks;
  atomic_int short_calls; /* calls shorter than min_chunk not ending at num_blocks */
  atomic_int calls;
} grid_t;

static void count_blocks(void **args, int64_t b, int64_t e) {
  grid_t *g = args[0];
  atomic_fetch_add(&g->calls, 1);
  if (e - b < g->min_chunk && e != g->num_blocks) atomic_fetch_add(&g->short_calls, 1);
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&g->hits[i], 1);
}

/* Launches num_blocks on pool; checks every block ran once and the chunk sizes. */
static void launch_and_check(kiln_host_pool_t *pool, int64_t num_blocks, int64_t min_chunk) {
  grid_t g = {.hits = kiln_calloc((size_t)num_blocks + 1, sizeof(atomic_int)),
              .min_chunk = min_chunk,
              .num_blocks = num_blocks};
  void *args[1] = {&g};
  kiln_status st = kiln_host_pool_launch(pool, count_blocks, args, num_blocks, min_chunk);
  assert_null(st);
  for (int64_t i = 0; i < num_blocks; i++) {
    if (atomic_load(&g.hits[i]) != 1)
      fail_msg("block %lld of %lld (min_chunk %lld) ran %d times", (long long)i,
               (long long)num_blocks, (long long)min_chunk, atomic_load(&g.hits[i]));
  }
  assert_int_equal(atomic_load(&g.short_calls), 0);
  if (num_blocks > 0) assert_true(atomic_load(&g.calls) >= 1);
  assert_true(atomic_load(&g.calls) <= 0xffff);
  kiln_free(g.hits);
}

static void test_every_block_runs_once_in_chunks_of_min_chunk(void **state) {
  const int64_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 100, 1000, 4097, 200003};
  const int64_t mins[] = {0, 1, 7, 1000};
  for (int threads = 1; threads <= 4; threads++) {
    kiln_host_pool_t *pool = NULL;
    assert_null(kiln_host_pool_create(threads, &pool));
    assert_int_equal(kiln_host_pool_num_workers(pool), threads);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
      for (size_t m = 0; m < sizeof(mins) / sizeof(mins[0]); m++)
        launch_and_check(pool, sizes[s], mins[m]);
    kiln_host_pool_destroy(pool);
  }
  launch_and_check(NULL, 33, 0); /* no pool: the caller runs the blocks */
}

/* Each launch counts into its own array, kept to the end: a block of an earlier launch that
 * ran again (or late, into a later job's chunk) would leave a count other than 1. */
static void test_no_block_runs_after_its_launch_returned(void **state) {
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(3, &pool));
  enum { LAUNCHES = 3000, MAXB = 64 };
  grid_t *g = kiln_calloc(LAUNCHES, sizeof(grid_t));
  for (int l = 0; l < LAUNCHES; l++) {
    int64_t n = 2 + (l * 7919) % (MAXB - 1);
    g[l].hits = kiln_calloc((size_t)n, sizeof(atomic_int));
    g[l].num_blocks = n;
    void *args[1] = {&g[l]};
    assert_null(kiln_host_pool_launch(pool, count_blocks, args, n, 0));
    /* between launches, sometimes long enough for workers to fall asleep */
    if (l % 500 == 0) usleep(2000);
  }
  usleep(5000);
  for (int l = 0; l < LAUNCHES; l++) {
    for (int64_t i = 0; i < g[l].num_blocks; i++) assert_int_equal(atomic_load(&g[l].hits[i]), 1);
    kiln_free(g[l].hits);
  }
  kiln_free(g);
  kiln_host_pool_destroy(pool);
}

/* ---- a worker stopped (in a signal handler) while launches go on ---- */

static sem_t g_release;
static atomic_int g_parked;
static pthread_t g_launcher;
static atomic_bool g_found_worker;
static pthread_t g_worker;

static void park(int sig) {
  atomic_store(&g_parked, 1);
  while (sem_wait(&g_release) != 0) {
  }
}

static void note_worker(void **args, int64_t b, int64_t e) {
  if (!pthread_equal(pthread_self(), g_launcher) && !atomic_load(&g_found_worker)) {
    g_worker = pthread_self();
    atomic_store(&g_found_worker, true);
  }
  /* long enough blocks that a spinning or woken worker takes some */
  volatile double x = 0;
  for (int i = 0; i < 20000; i++) x += i;
}

static void test_launch_completes_while_a_worker_is_stopped(void **state) {
  alarm(300); /* a pool that waits for the stopped worker hangs: fail instead */
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(2, &pool));
  g_launcher = pthread_self();
  for (int tries = 0; tries < 2000 && !atomic_load(&g_found_worker); tries++)
    assert_null(kiln_host_pool_launch(pool, note_worker, NULL, 64, 0));
  if (!atomic_load(&g_found_worker)) {
    /* the worker never got a chunk (a very busy machine): nothing to stop */
    kiln_host_pool_destroy(pool);
    skip();
  }
  assert_int_equal(sem_init(&g_release, 0, 0), 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = park;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
  /* the last launch returned, so the worker holds no chunk: stop it wherever it waits */
  assert_int_equal(pthread_kill(g_worker, SIGUSR1), 0);
  while (!atomic_load(&g_parked)) usleep(100);
  /* every launch must finish with the worker stopped */
  for (int64_t n = 2; n < 300; n += 37) launch_and_check(pool, n, 0);
  assert_int_equal(sem_post(&g_release), 0);
  for (int64_t n = 2; n < 300; n += 37) launch_and_check(pool, n, 0);
  kiln_host_pool_destroy(pool);
  sem_destroy(&g_release);
  alarm(0);
}

static void test_bad_launch_is_an_error(void **state) {
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(2, &pool));
  kiln_status st = kiln_host_pool_launch(pool, NULL, NULL, 4, 0);
  assert_non_null(st);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  kiln_status_free(st);
  st = kiln_host_pool_launch(pool, count_blocks, NULL, -1, 0);
  assert_non_null(st);
  kiln_status_free(st);
  kiln_host_pool_destroy(pool);
  kiln_host_pool_t *big = NULL;
  st = kiln_host_pool_create(5000, &big);
  assert_non_null(st);
  assert_null(big);
  kiln_status_free(st);
}

/* The CPUs of the affinity mask, capped by the cgroup's quota when there is one. */
static int expected_cpus(const cpu_set_t *set) {
  int cpus = CPU_COUNT(set), limit = kiln_host_cgroup_cpu_limit("/sys/fs/cgroup");
  return limit > 0 && limit < cpus ? limit : cpus;
}

/* A process pinned to one CPU (taskset, a container's cpuset) gets a one-worker default pool,
 * not one worker per core of the machine; unpinned, the mask's count. */
static void test_default_pool_follows_the_affinity_mask(void **state) {
  cpu_set_t all, one;
  assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
  assert_int_equal(kiln_host_cpus(), expected_cpus(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) first++;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  int pinned = kiln_host_cpus();
  kiln_host_pool_set_default_workers(0);
  kiln_host_pool_t *pool = NULL;
  kiln_status st = kiln_host_pool_create(0, &pool);
  assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
  assert_null(st);
  assert_int_equal(pinned, 1);
  assert_int_equal(kiln_host_pool_num_workers(pool), 1);
  launch_and_check(pool, 100, 0);
  kiln_host_pool_destroy(pool);
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* CPU quotas as cgroup v2 and v1 write them, in a directory made to look like each. */
static void test_cgroup_quotas_round_up_to_cpus(void **state) {
  char v2[128], v1[128], cpu[200];
  kiln_test_temp_dir_named(v2, sizeof v2, "cgroup_v2");
  kiln_test_temp_dir_named(v1, sizeof v1, "cgroup_v1");
  assert_int_equal(kiln_host_cgroup_cpu_limit(v2), 0); /* nothing there: unlimited */
  write_file(v2, "cpu.max", "150000 100000\n");
  assert_int_equal(kiln_host_cgroup_cpu_limit(v2), 2);
  write_file(v2, "cpu.max", "200000 100000\n");
  assert_int_equal(kiln_host_cgroup_cpu_limit(v2), 2);
  write_file(v2, "cpu.max", "max 100000\n");
  assert_int_equal(kiln_host_cgroup_cpu_limit(v2), 0);
  snprintf(cpu, sizeof cpu, "%s/cpu", v1);
  assert_int_equal(mkdir(cpu, 0700), 0);
  write_file(cpu, "cpu.cfs_quota_us", "250000\n");
  write_file(cpu, "cpu.cfs_period_us", "100000\n");
  assert_int_equal(kiln_host_cgroup_cpu_limit(v1), 3);
  write_file(cpu, "cpu.cfs_quota_us", "-1\n");
  assert_int_equal(kiln_host_cgroup_cpu_limit(v1), 0);
  kiln_test_temp_dir_remove(v2);
  kiln_test_temp_dir_remove(v1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_block_runs_once_in_chunks_of_min_chunk),
      cmocka_unit_test(test_no_block_runs_after_its_launch_returned),
      cmocka_unit_test(test_launch_completes_while_a_worker_is_stopped),
      cmocka_unit_test(test_bad_launch_is_an_error),
      cmocka_unit_test(test_default_pool_follows_the_affinity_mask),
      cmocka_unit_test(test_cgroup_quotas_round_up_to_cpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
