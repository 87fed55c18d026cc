/* Collectives on this machine's GPUs through NCCL (runtime/cuda/nccl.h) in nccl-tests' terms:
 * all-reduce (f32 sum), all-gather and reduce-scatter (f32 sum) on N GPUs, one thread per GPU,
 * each call a collective thunk executed as the runtime does (event, NCCL group on the
 * collective stream, event), timed over the iterations between two barriers of all ranks
 * after a warm-up, as the time per call, algorithm bandwidth (size / time) and bus bandwidth
 * (algbw x 2(n-1)/n for all-reduce, x (n-1)/n for the others), next to GPU 0's device-to-device
 * memcpy bandwidth of the same size measured in the same run, and busbw / memcpy. "size" is
 * nccl-tests': the all-reduce buffer, the all-gather result, the reduce-scatter operand. On one
 * GPU the bus bandwidth is 0 by definition (nothing crosses a bus); algbw still says what a
 * call costs. Exits 77 with the reason without a CUDA driver, a GPU or NCCL.
 * Usage: bench_nccl [--min-bytes N] [--max-bytes N] (default 1 KiB .. 256 MiB) [--gpus N] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "runtime/buffer.h"
#include "runtime/collective_thunk.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nccl.h"
#include "runtime/device.h"
#include "runtime/spmd.h"

#define MAX_GPUS 16

static const kiln_coll_thunk_op_t ops[] = {KILN_COLL_THUNK_ALL_REDUCE, KILN_COLL_THUNK_ALL_GATHER,
                                           KILN_COLL_THUNK_REDUCE_SCATTER};

typedef struct rank {
  kiln_thunk_t *t;
  kiln_device_t *dev;
  kiln_stream_t *stream;
  kiln_buffer_table_t table;
  kiln_spmd_participant_t who;
  pthread_barrier_t *barrier;
  int iters, rank;
  double *ms; /* rank 0 writes the timed wall time */
  kiln_status status;
} rank_t;

static kiln_status one_call(rank_t *r) {
  kiln_thunk_exec_params_t ep = {.device = r->dev, .stream = r->stream, .buffers = &r->table};
  return kiln_collective_thunk_execute(r->t, &ep, &r->who);
}

static void *rank_main(void *arg) {
  rank_t *r = arg;
  kiln_status s = one_call(r); /* warm-up: the communicator, the first launch */
  if (!s) s = kiln_stream_synchronize(r->stream);
  pthread_barrier_wait(r->barrier);
  double t0 = kiln_clock_ms();
  for (int i = 0; i < r->iters && !s; i++) s = one_call(r);
  if (!s) s = kiln_stream_synchronize(r->stream);
  pthread_barrier_wait(r->barrier);
  if (r->rank == 0) *r->ms = kiln_clock_ms() - t0;
  r->status = s;
  return NULL;
}

/* One collective of nccl-tests' `size` bytes on `n` GPUs: ms per call into *ms. */
static kiln_status time_collective(kiln_device_t **gpus, int n, kiln_coll_thunk_op_t op,
                                   uint64_t size, int iters, double *ms) {
  uint64_t send = size, recv = size;
  if (op == KILN_COLL_THUNK_ALL_GATHER) send = size / (uint64_t)n;
  if (op == KILN_COLL_THUNK_REDUCE_SCATTER) recv = size / (uint64_t)n;
  uint64_t recv_at = (send + 255) & ~(uint64_t)255, total = recv_at + recv;
  kiln_coll_thunk_desc_t *d = kiln_coll_thunk_desc_create(op, 1, n, 1);
  for (int i = 0; i < n; i++) {
    d->rank[i] = i;
    d->group_size[i] = n;
  }
  d->reduction = KILN_COLL_SUM;
  d->buffers[0] =
      (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, (int64_t)send),
                                 .recv = kiln_slice_make(0, (int64_t)recv_at, (int64_t)recv),
                                 .dtype = KILN_COLL_F32,
                                 .count = (int64_t)(size / 4),
                                 .outer = 1,
                                 .inner = (int64_t)(recv / 4),
                                 .block_bytes = (size_t)send};
  kiln_thunk_t *t = kiln_thunk_collective_create(kiln_coll_thunk_op_name(op), d);
  kiln_thunk_prepare_params_t pp = {1, &total};
  kiln_status s = kiln_collective_thunk_prepare(t, &pp);
  kiln_spmd_world_t *w = NULL;
  if (!s) s = kiln_spmd_world_create(n, 1, NULL, 120000, &w);
  rank_t rs[MAX_GPUS];
  memset(rs, 0, sizeof(rs));
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  int ready = 0;
  for (int i = 0; i < n && !s; i++, ready++) {
    rank_t *r = &rs[i];
    *r = (rank_t){.t = t,
                  .dev = gpus[i],
                  .who = {.world = w, .participant = i},
                  .barrier = &barrier,
                  .iters = iters,
                  .rank = i,
                  .ms = ms};
    s = kiln_buffer_table_init(&r->table, r->dev, 1);
    if (!s) s = kiln_stream_create(r->dev, &r->stream);
    if (!s) s = kiln_buffer_table_allocate(&r->table, 0, total);
    kiln_devptr_t base = 0;
    if (!s) s = kiln_buffer_table_resolve(&r->table, kiln_slice_make(0, 0, (int64_t)total), &base);
    if (!s) s = kiln_stream_memset(r->stream, base, 0x3f800000u, 4, (size_t)(total / 4)); /* 1.0f */
  }
  if (!s) {
    pthread_t th[MAX_GPUS];
    for (int i = 0; i < n; i++)
      if (pthread_create(&th[i], NULL, rank_main, &rs[i])) {
        fprintf(stderr, "bench_nccl: cannot start the thread of GPU %d\n", i);
        exit(1); /* the others wait at the barrier for it */
      }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) s = kiln_status_join(s, rs[i].status);
    *ms /= iters;
  }
  for (int i = 0; i < ready; i++) {
    kiln_buffer_table_free(&rs[i].table);
    kiln_stream_destroy(rs[i].stream);
  }
  pthread_barrier_destroy(&barrier);
  if (w) kiln_spmd_world_destroy(w);
  kiln_thunk_destroy(t);
  return s;
}

/* GPU 0's device-to-device copy of `size` bytes: ms per copy. */
static kiln_status time_memcpy(kiln_device_t *g, uint64_t size, int iters, double *ms) {
  kiln_stream_t *st = NULL;
  kiln_devptr_t a = 0, b = 0;
  kiln_status s = kiln_stream_create(g, &st);
  if (!s) s = kiln_device_mem_alloc(g, (size_t)size, &a);
  if (!s) s = kiln_device_mem_alloc(g, (size_t)size, &b);
  if (!s) s = kiln_stream_memcpy_d2d(st, b, a, (size_t)size);
  if (!s) s = kiln_stream_synchronize(st);
  double t0 = kiln_clock_ms();
  for (int i = 0; i < iters && !s; i++) s = kiln_stream_memcpy_d2d(st, b, a, (size_t)size);
  if (!s) s = kiln_stream_synchronize(st);
  *ms = (kiln_clock_ms() - t0) / iters;
  if (a) kiln_device_mem_free(g, a);
  if (b) kiln_device_mem_free(g, b);
  if (st) kiln_stream_destroy(st);
  return s;
}

static int skip(kiln_status s, const char *what) {
  printf("SKIP: %s: %s\n", what, kiln_status_message(s));
  kiln_status_free(s);
  return 77;
}

int main(int argc, char **argv) {
  uint64_t min_bytes = 1024, max_bytes = (uint64_t)256 << 20;
  int want = 0;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--min-bytes=", 12))
      min_bytes = strtoull(argv[i] + 12, NULL, 10);
    else if (!strcmp(argv[i], "--min-bytes") && i + 1 < argc)
      min_bytes = strtoull(argv[++i], NULL, 10);
    else if (!strncmp(argv[i], "--max-bytes=", 12))
      max_bytes = strtoull(argv[i] + 12, NULL, 10);
    else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc)
      max_bytes = strtoull(argv[++i], NULL, 10);
    else if (!strncmp(argv[i], "--gpus=", 7))
      want = atoi(argv[i] + 7);
    else {
      fprintf(stderr, "usage: bench_nccl [--min-bytes N] [--max-bytes N] [--gpus=N]\n");
      return 2;
    }
  }
  if (min_bytes < 1024) min_bytes = 1024;
  const kiln_cuda_driver_t *drv = NULL;
  kiln_status s = kiln_cuda_driver_get(&drv);
  if (s) return skip(s, "no CUDA driver");
  int count = 0;
  if (drv->cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1)
    return skip(kiln_status_make(KILN_UNAVAILABLE, "%d devices", count), "no GPU");
  int n = want > 0 && want < count ? want : count;
  if (n > MAX_GPUS) n = MAX_GPUS;
  const kiln_nccl_t *nccl = NULL;
  s = kiln_nccl_get(&nccl);
  if (s) return skip(s, "no NCCL");
  kiln_device_t *gpus[MAX_GPUS] = {0};
  for (int i = 0; i < n && !s; i++) s = kiln_cuda_device_create(i, &gpus[i]);
  printf("NCCL %s (version %d) on %d GPU(s): %s\n", nccl->path, nccl->version, n,
         gpus[0] ? gpus[0]->name : "?");
  printf("%-15s %12s %11s %11s %11s %12s %8s\n", "collective", "size", "time(us)", "algbw GB/s",
         "busbw GB/s", "memcpy GB/s", "bus/mem");
  double last_busbw[3] = {0}, last_algbw[3] = {0}, last_mem = 0;
  uint64_t last_size = 0;
  for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]) && !s; o++) {
    double factor =
        n > 1 ? (ops[o] == KILN_COLL_THUNK_ALL_REDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n)
              : 0.0;
    for (uint64_t size = min_bytes; size <= max_bytes && !s; size *= 4) {
      uint64_t sz = size - size % (4 * (uint64_t)n);
      int iters = sz < ((uint64_t)1 << 20) ? 50 : sz < ((uint64_t)64 << 20) ? 10 : 3;
      double ms = 0, mem_ms = 0;
      s = time_collective(gpus, n, ops[o], sz, iters, &ms);
      if (!s) s = time_memcpy(gpus[0], sz, iters, &mem_ms);
      if (s) break;
      double algbw = (double)sz / (ms * 1e6), busbw = algbw * factor,
             mem = (double)sz / (mem_ms * 1e6);
      printf("%-15s %12llu %11.1f %11.2f %11.2f %12.2f %8.2f\n", kiln_coll_thunk_op_name(ops[o]),
             (unsigned long long)sz, ms * 1e3, algbw, busbw, mem, mem > 0 ? busbw / mem : 0.0);
      last_busbw[o] = busbw;
      last_algbw[o] = algbw;
      last_mem = mem;
      last_size = sz;
    }
  }
  for (int i = 0; i < n; i++)
    if (gpus[i]) kiln_device_destroy(gpus[i]);
  if (s) {
    fprintf(stderr, "bench_nccl: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return 1;
  }
  printf(
      "nccl %d GPU(s), %llu bytes: all-reduce busbw %.2f GB/s (algbw %.2f), all-gather %.2f, "
      "reduce-scatter %.2f; memcpy %.2f GB/s\n",
      n, (unsigned long long)last_size, last_busbw[0], last_algbw[0], last_busbw[1], last_busbw[2],
      last_mem);
  return 0;
}
