/* Host pool launch cost: the time per kiln_host_pool_launch of a grid split over a pool of
 * $KILN_HOST_THREADS (default: the online cores) threads, against the same blocks run by the
 * launching thread alone (a 1-thread pool), in the same run. Cases: tiny blocks (64 floats,
 * the launch overhead itself), medium blocks (a few µs each) and the same launches after the
 * workers sat idle for 2 ms (the wake-up path). `--busy=N` starts N threads that spin for the
 * whole run (a competing load, like other processes on the cores); the ratio printed is
 * alone / pool (> 1: the pool helps).
 *
 *   bench_host_pool [--busy=N] [--rounds=R] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/host_pool.h"
#include "base/status.h"

typedef struct {
  float *x, *y;
  int64_t per_block; /* floats per block */
} job_t;

static void k_axpy(void **args, int64_t b, int64_t e) {
  job_t *j = args[0];
  for (int64_t i = b * j->per_block; i < e * j->per_block; i++) j->y[i] = 0.5f * j->x[i] + j->y[i];
}

static atomic_bool g_stop;
static void *busy(void *arg) {
  volatile uint64_t n = 0;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) n++;
  return NULL;
}

static void check(kiln_status s, const char *what) {
  if (s) {
    fprintf(stderr, "%s: %s\n", what, kiln_status_message(s));
    exit(1);
  }
}

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* Per-launch microseconds: `reps` launches back to back (idle_us 0), or each after idle_us of
 * sleep (only the launch timed); the minimum and median over rounds. */
static void time_launch(kiln_host_pool_t *pool, job_t *j, int64_t blocks, int reps, int rounds,
                        long idle_us, double *best, double *med) {
  void *args[1] = {j};
  double *s = kiln_malloc((size_t)rounds * sizeof(double));
  for (int r = 0; r < rounds; r++) {
    double total = 0;
    if (idle_us == 0) {
      double t0 = kiln_clock_ms();
      for (int i = 0; i < reps; i++)
        check(kiln_host_pool_launch(pool, k_axpy, args, blocks, 0), "launch");
      total = kiln_clock_ms() - t0;
    } else {
      for (int i = 0; i < reps; i++) {
        sleep_us(idle_us);
        double t0 = kiln_clock_ms();
        check(kiln_host_pool_launch(pool, k_axpy, args, blocks, 0), "launch");
        total += kiln_clock_ms() - t0;
      }
    }
    s[r] = total * 1e3 / reps;
  }
  qsort(s, (size_t)rounds, sizeof(double), kiln_clock_cmp_double);
  *best = s[0];
  *med = s[rounds / 2];
  kiln_free(s);
}

int main(int argc, char **argv) {
  int nbusy = 0, rounds = 15;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--busy=", 7)) {
      nbusy = atoi(argv[i] + 7);
    } else if (!strncmp(argv[i], "--rounds=", 9)) {
      rounds = atoi(argv[i] + 9);
    } else {
      fprintf(stderr, "usage: bench_host_pool [--busy=N] [--rounds=R]\n");
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  const char *env = getenv("KILN_HOST_THREADS");
  kiln_host_pool_t *pool = NULL, *alone = NULL;
  check(kiln_host_pool_create(env ? atoi(env) : 0, &pool), "pool");
  check(kiln_host_pool_create(1, &alone), "pool");
  pthread_t *th = kiln_calloc((size_t)(nbusy > 0 ? nbusy : 1), sizeof(pthread_t));
  for (int i = 0; i < nbusy; i++) pthread_create(&th[i], NULL, busy, NULL);
  printf("host pool: %d threads vs the launching thread alone; %d competing busy threads\n",
         kiln_host_pool_num_workers(pool), nbusy);
  struct {
    int64_t blocks, per_block;
    long idle_us;
    int reps;
  } cases[] = {
      {16, 64, 0, 2000}, {256, 64, 0, 500},  {4096, 64, 0, 50},    {16, 4096, 0, 200},
      {64, 4096, 0, 50}, {16, 64, 2000, 20}, {16, 4096, 2000, 20}, {64, 4096, 2000, 20},
  };
  double sum_log = 0;
  int n = 0;
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    int64_t elems = cases[c].blocks * cases[c].per_block;
    job_t j = {kiln_calloc((size_t)elems, 4), kiln_calloc((size_t)elems, 4), cases[c].per_block};
    double pb, pm, ab, am;
    /* interleaved so drift in the load hits both alike */
    double pbest = 1e30, abest = 1e30, pmeds = 0, ameds = 0;
    for (int half = 0; half < 2; half++) {
      time_launch(pool, &j, cases[c].blocks, cases[c].reps, rounds, cases[c].idle_us, &pb, &pm);
      time_launch(alone, &j, cases[c].blocks, cases[c].reps, rounds, cases[c].idle_us, &ab, &am);
      if (pb < pbest) pbest = pb;
      if (ab < abest) abest = ab;
      pmeds += pm / 2;
      ameds += am / 2;
    }
    printf(
        "%5lld blocks x %5lld floats%s: pool %8.2f us (median %8.2f), alone %8.2f us (median "
        "%8.2f): alone/pool %.2fx (medians %.2fx)\n",
        (long long)cases[c].blocks, (long long)cases[c].per_block,
        cases[c].idle_us ? ", after 2 ms idle" : "                 ", pbest, pmeds, abest, ameds,
        abest / pbest, ameds / pmeds);
    sum_log += __builtin_log(ameds / pmeds);
    n++;
    kiln_free(j.x);
    kiln_free(j.y);
  }
  printf("geomean alone/pool over medians: %.2fx\n", __builtin_exp(sum_log / n));
  atomic_store(&g_stop, true);
  for (int i = 0; i < nbusy; i++) pthread_join(th[i], NULL);
  kiln_free(th);
  kiln_host_pool_destroy(pool);
  kiln_host_pool_destroy(alone);
  return 0;
}
