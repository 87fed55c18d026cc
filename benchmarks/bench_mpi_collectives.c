/* Collectives across two processes over MPI (runtime/mpi.h) in nccl-tests' terms, next to the
 * same collective between two threads of one process (runtime/collectives.h) and one thread's
 * memcpy of the same size, all measured in the same run.
 *
 * Run under mpirun with two processes, one participant each:
 *   mpirun -np 2 --allow-run-as-root --oversubscribe ./build/bench_mpi_collectives
 *       [--max-bytes N] (default 4 MiB; nccl-tests' full range is 268435456)
 * For all-reduce, all-gather and reduce-scatter of f32 from 1 KiB up by 4x: the time per call
 * (the slower process's), algbw (size / time) and busbw (algbw x 2(n-1)/n for all-reduce,
 * x (n-1)/n for the others, n = 2), and the ratios mpi/in-process (time) and busbw/memcpy.
 * "size" is nccl-tests' too: the all-reduce buffer, the all-gather result, the reduce-scatter
 * operand. Process 0 prints. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "plugin/env_options.h"
#include "runtime/collectives.h"
#include "runtime/mpi.h"

typedef enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER } which_t;
static const char *const names[] = {"all-reduce", "all-gather", "reduce-scatter"};

#define RANKS 2

/* One call of `which` on rank `rank`: across processes (g) or in this one (c). */
static kiln_status call(which_t which, const kiln_mpi_group_t *g, kiln_coll_clique_t *c, int rank,
                        const float *send, float *recv, size_t bytes) {
  int64_t count = (int64_t)(bytes / sizeof(float));
  switch (which) {
    case ALL_REDUCE:
      return g ? kiln_mpi_all_reduce(g, "bench", KILN_COLL_F32, KILN_COLL_SUM, send, recv, count)
               : kiln_coll_all_reduce(c, rank, "bench", KILN_COLL_F32, KILN_COLL_SUM, send, recv,
                                      count);
    case ALL_GATHER:
      return g ? kiln_mpi_all_gather(g, "bench", send, recv, 1, bytes / RANKS)
               : kiln_coll_all_gather(c, rank, "bench", send, recv, 1, bytes / RANKS);
    default:
      return g ? kiln_mpi_reduce_scatter(g, "bench", KILN_COLL_F32, KILN_COLL_SUM, send, recv, 1,
                                         count / RANKS)
               : kiln_coll_reduce_scatter(c, rank, "bench", KILN_COLL_F32, KILN_COLL_SUM, send,
                                          recv, 1, count / RANKS);
  }
}

static void die(kiln_status s, const char *what) {
  if (!s) return;
  fprintf(stderr, "bench_mpi_collectives: %s: %s\n", what, kiln_status_message(s));
  kiln_mpi_finalize();
  exit(1);
}

typedef struct {
  which_t which;
  kiln_coll_clique_t *c;
  int rank, iters;
  size_t bytes;
  float *send, *recv;
  kiln_status status;
} thread_rank_t;

static void *thread_main(void *arg) {
  thread_rank_t *r = arg;
  for (int i = 0; i <= r->iters && !r->status; i++)
    r->status = call(r->which, NULL, r->c, r->rank, r->send, r->recv, r->bytes);
  return NULL;
}

/* ms per call between two threads of this process: iters + 1 calls (the first a warm-up)
 * timed together, thread start-up included, divided by iters + 1. */
static double in_process_ms(which_t which, size_t bytes, int iters, float **send, float **recv) {
  kiln_coll_clique_t *c = NULL;
  die(kiln_coll_clique_create(RANKS, 60000, &c), "clique");
  thread_rank_t r[RANKS];
  pthread_t th[RANKS];
  double t0 = kiln_clock_ms();
  for (int k = 0; k < RANKS; k++) {
    r[k] = (thread_rank_t){which, c, k, iters, bytes, send[k], recv[k], NULL};
    pthread_create(&th[k], NULL, thread_main, &r[k]);
  }
  for (int k = 0; k < RANKS; k++) pthread_join(th[k], NULL);
  double ms = (kiln_clock_ms() - t0) / (iters + 1);
  for (int k = 0; k < RANKS; k++) die(r[k].status, "in-process collective");
  kiln_coll_clique_destroy(c);
  return ms;
}

int main(int argc, char **argv) {
  size_t max_bytes = (size_t)4 << 20;
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "--max-bytes=", 12) == 0)
      max_bytes = (size_t)strtoull(argv[i] + 12, NULL, 0);
    else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
      max_bytes = (size_t)strtoull(argv[++i], NULL, 0);
  if (!kiln_pjrt_mpi_launched()) {
    printf("bench_mpi_collectives: run under mpirun -np 2 (see the file's header)\n");
    return 0;
  }
  kiln_mpi_t *m = NULL;
  die(kiln_mpi_get(&m), "MPI");
  if (kiln_mpi_size(m) != RANKS) {
    fprintf(stderr, "bench_mpi_collectives: needs 2 processes, has %d\n", kiln_mpi_size(m));
    kiln_mpi_finalize();
    return 1;
  }
  int me = kiln_mpi_rank(m), members[RANKS] = {0, 1};
  kiln_mpi_group_t g = {.mpi = m,
                        .members = members,
                        .size = RANKS,
                        .rank = me,
                        .local_devices = 1,
                        .timeout_ms = 60000};
  float *send[RANKS], *recv[RANKS];
  for (int k = 0; k < RANKS; k++) {
    send[k] = kiln_malloc(max_bytes + 64);
    recv[k] = kiln_malloc(max_bytes + 64);
    for (size_t e = 0; e < max_bytes / sizeof(float); e++) send[k][e] = (float)(e % 7) + (float)k;
    memset(recv[k], 0, max_bytes);
  }
  if (me == 0)
    printf("%-15s %10s %10s %10s %10s %10s %10s %10s %10s\n", "collective", "bytes", "mpi us",
           "algbw GB/s", "busbw GB/s", "1-proc us", "mpi/1-proc", "memcpy GB/s", "busbw/mcpy");
  for (int w = ALL_REDUCE; w <= REDUCE_SCATTER; w++)
    for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
      int iters = bytes <= ((size_t)64 << 10) ? 200 : bytes <= ((size_t)4 << 20) ? 20 : 5;
      /* warm-up, and both processes leave it together */
      die(call((which_t)w, &g, NULL, me, send[0], recv[0], bytes), "warm-up");
      double t0 = kiln_clock_ms();
      for (int i = 0; i < iters; i++)
        die(call((which_t)w, &g, NULL, me, send[0], recv[0], bytes), names[w]);
      double local_ms = (kiln_clock_ms() - t0) / iters, slowest[RANKS] = {0};
      /* the slower process's time: an all-gather of both */
      die(kiln_mpi_all_gather(&g, "times", &local_ms, slowest, 1, sizeof(double)), "times");
      double ms = slowest[0] > slowest[1] ? slowest[0] : slowest[1];
      if (me != 0) continue;
      double one = in_process_ms((which_t)w, bytes, iters, send, recv);
      double t1 = kiln_clock_ms();
      for (int i = 0; i < iters; i++) memcpy(recv[1], send[1], bytes);
      double mcpy_ms = (kiln_clock_ms() - t1) / iters;
      double algbw = (double)bytes / (ms * 1e6);
      double busbw = algbw * (w == ALL_REDUCE ? 2.0 * (RANKS - 1) / RANKS : (RANKS - 1.0) / RANKS);
      double mcpy = (double)bytes / (mcpy_ms * 1e6);
      printf("%-15s %10zu %10.1f %10.3f %10.3f %10.1f %10.2f %10.2f %10.3f\n", names[w], bytes,
             ms * 1e3, algbw, busbw, one * 1e3, ms / one, mcpy, busbw / mcpy);
    }
  for (int k = 0; k < RANKS; k++) {
    kiln_free(send[k]);
    kiln_free(recv[k]);
  }
  kiln_mpi_finalize();
  return 0;
}
