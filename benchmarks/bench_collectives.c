/* In-process host collectives (runtime/collectives.h) in nccl-tests' terms: for all-reduce,
 * all-gather and reduce-scatter of f32 on 2, 4 and 8 host devices (one thread each), the
 * time per call, algorithm bandwidth (size / time) and bus bandwidth (algbw x 2(n-1)/n for
 * all-reduce, x (n-1)/n for the others), next to one thread's memcpy bandwidth of the same
 * size measured in the same run, and busbw / memcpy as the ratio.
 * "size" is nccl-tests' too: the all-reduce buffer, the all-gather result, the
 * reduce-scatter operand.
 * Then all-reduce through the compiler and the runtime: an HLO all-reduce of f32 compiled for
 * n replicas, run on n host devices by kiln_executable_run_spmd (a thread per participant,
 * outputs allocated, the collective thunk's clique found), timed per execute and printed
 * with its ratio to the direct clique call of the same size measured just before
 * (thunk/direct: the cost of a whole execute around the collective).
 * Then overlap at run time (runtime/collective_thunk.h): per execute, an all-reduce of the
 * largest size next to an elementwise chain over another operand, independent of it (the
 * chain runs between the all-reduce's start and done) and dependent on it (the same work in
 * sequence), with the chain alone and the all-reduce alone, and the independent one compiled
 * with every async pair whole at its start (synchronous_collectives), each the best of five
 * interleaved rounds; sync/spl is the time the overlap saved, `best` the most it could ((chain +
 * all-reduce) / the longer of the two). Usage: bench_collectives [--max-bytes N] (default 4 MiB,
 * keeps the run short; nccl-tests' full range is --max-bytes 268435456) [--ranks 2,4,8] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/thunks/compile.h"
#include "runtime/collectives.h"
#include "runtime/device.h"
#include "runtime/spmd.h"
#include "plugin/env_options.h"

typedef enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER } which_t;
static const char *const names[] = {"all-reduce", "all-gather", "reduce-scatter"};

typedef struct {
  kiln_coll_clique_t *c;
  int rank, n, iters;
  which_t which;
  size_t bytes; /* nccl-tests' size */
  float *send, *recv;
  double ms; /* rank 0: wall time of the timed iterations */
  kiln_status status;
} rank_t;

static kiln_status one_call(rank_t *r) {
  int64_t count = (int64_t)(r->bytes / sizeof(float));
  switch (r->which) {
    case ALL_REDUCE:
      return kiln_coll_all_reduce(r->c, r->rank, "bench", KILN_COLL_F32, KILN_COLL_SUM, r->send,
                                  r->recv, count);
    case ALL_GATHER:
      return kiln_coll_all_gather(r->c, r->rank, "bench", r->send, r->recv, 1,
                                  r->bytes / (size_t)r->n);
    default:
      return kiln_coll_reduce_scatter(r->c, r->rank, "bench", KILN_COLL_F32, KILN_COLL_SUM, r->send,
                                      r->recv, 1, count / r->n);
  }
}

static void *rank_main(void *arg) {
  rank_t *r = arg;
  kiln_status s = one_call(r); /* warm-up: pages touched, threads awake */
  double t0 = kiln_clock_ms();
  for (int i = 0; i < r->iters && !s; i++) s = one_call(r);
  r->ms = kiln_clock_ms() - t0;
  r->status = s;
  return NULL;
}

/* Runs `iters` calls on n ranks; the slowest rank's time per call in ms. */
static double measure(which_t which, int n, size_t bytes, int iters, float **send, float **recv) {
  kiln_coll_clique_t *c = NULL;
  kiln_status s = kiln_coll_clique_create(n, 60000, &c);
  if (s) {
    fprintf(stderr, "%s\n", kiln_status_message(s));
    exit(1);
  }
  pthread_t th[8];
  rank_t r[8];
  for (int i = 0; i < n; i++) {
    r[i] = (rank_t){c, i, n, iters, which, bytes, send[i], recv[i], 0, NULL};
    pthread_create(&th[i], NULL, rank_main, &r[i]);
  }
  double worst = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    if (r[i].status) {
      fprintf(stderr, "rank %d: %s\n", i, kiln_status_message(r[i].status));
      exit(1);
    }
    if (r[i].ms > worst) worst = r[i].ms;
  }
  kiln_coll_clique_destroy(c);
  return worst / iters;
}

static double memcpy_ms(void *dst, const void *src, size_t bytes, int iters) {
  memcpy(dst, src, bytes);
  double t0 = kiln_clock_ms();
  for (int i = 0; i < iters; i++) {
    memcpy(dst, src, bytes);
    __asm__ volatile("" ::: "memory");
  }
  return (kiln_clock_ms() - t0) / iters;
}

static void die(kiln_status s, const char *what) {
  if (!s) return;
  fprintf(stderr, "%s: %s\n", what, kiln_status_message(s));
  exit(1);
}

/* Module `text` (its parameters f32 of `bytes` each, at most 2) compiled for n replicas and
 * run on n host devices: ms per execute (the mean of `iters` after a warm-up, as measure's). */
static double measure_module(kiln_device_t *dev, int n, kiln_strbuf_t *text, int nparams,
                             size_t bytes, int iters, bool synchronous) {
  size_t count = bytes / sizeof(float);
  kiln_strbuf_t *b = text;
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  die(kiln_hlo_parse_module(kiln_strbuf_cstr(b), b->len, &po, &m), "parse");
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  co.emit.num_replicas = n;
  co.emit.num_partitions = 1;
  co.emit.synchronous_collectives = synchronous;
  kiln_executable_desc_t *d = NULL;
  kiln_pass_options_t env_passes;
  kiln_pjrt_compile_options_from_env(&co, &env_passes);
  die(kiln_compile_module(m, &co, &d, NULL), "compile");
  kiln_executable_t *exe = NULL;
  die(kiln_executable_load(dev, d, &exe), "load");
  kiln_stream_t *streams[8];
  kiln_device_buffer_t *in[8][2], *outs[8 * 2];
  kiln_devptr_t ptr[8][2];
  const kiln_devptr_t *params[8];
  uint64_t size[2] = {bytes, bytes};
  for (int i = 0; i < n; i++) {
    die(kiln_stream_create(dev, &streams[i]), "stream");
    for (int k = 0; k < nparams; k++) {
      die(kiln_device_buffer_create(dev, bytes, &in[i][k]), "buffer");
      die(kiln_stream_memset(streams[i], in[i][k]->ptr, 0x3f800000u, 4, count), "memset");
      ptr[i][k] = in[i][k]->ptr;
    }
    die(kiln_stream_synchronize(streams[i]), "sync");
    params[i] = ptr[i];
  }
  int nout = m->entry->root->opcode == KILN_OP_TUPLE ? m->entry->root->num_operands : 1;
  kiln_spmd_run_params_t sp = {.num_replicas = n,
                               .num_partitions = 1,
                               .streams = streams,
                               .params = params,
                               .param_sizes = size,
                               .num_params = nparams,
                               .outputs = outs};
  double total = 0;
  for (int it = 0; it <= iters; it++) {
    double t0 = kiln_clock_ms();
    die(kiln_executable_run_spmd(exe, &sp), "run");
    if (it > 0) total += kiln_clock_ms() - t0; /* the first is the warm-up */
    for (int i = 0; i < n * nout; i++) kiln_device_buffer_destroy(outs[i]);
  }
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < nparams; k++) kiln_device_buffer_destroy(in[i][k]);
    kiln_stream_destroy(streams[i]);
  }
  kiln_executable_destroy(exe);
  kiln_hlo_module_destroy(m);
  return total / iters;
}

static const char kAdd[] =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n";

/* An f32 all-reduce of `bytes` compiled for n replicas and run on n host devices. */
static double measure_thunks(kiln_device_t *dev, int n, size_t bytes, int iters) {
  size_t count = bytes / sizeof(float);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b,
                     "HloModule bench_ar, replica_count=%d\n\n%sENTRY e {\n  p = f32[%zu] "
                     "parameter(0)\n  ROOT ar = f32[%zu] all-reduce(p), replica_groups={}, "
                     "to_apply=add\n}\n",
                     n, kAdd, count, count);
  double ms = measure_module(dev, n, &b, 1, bytes, iters, false);
  kiln_strbuf_free(&b);
  return ms;
}

/* Overlap at run time: an all-reduce of p next to an elementwise chain (8 multiplies and adds)
 * over q. `kind` 0: the chain reads q alone, so the pipeline schedules it between the
 * all-reduce's start and done; 1: it reads the all-reduce's result (the same work, nothing
 * to overlap); 2: the chain alone; 3: the all-reduce alone. `synchronous`: compiled with
 * every async pair run whole at its start. */
static double measure_overlap(kiln_device_t *dev, int n, size_t bytes, int iters, int kind,
                              bool synchronous) {
  size_t count = bytes / sizeof(float);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b,
                     "HloModule bench_overlap, replica_count=%d\n\n%sENTRY e {\n"
                     "  p = f32[%zu] parameter(0)\n  q = f32[%zu] parameter(1)\n",
                     n, kAdd, count, count);
  if (kind != 2)
    kiln_strbuf_printf(&b, "  ar = f32[%zu] all-reduce(p), replica_groups={}, to_apply=add\n",
                       count);
  if (kind == 3) {
    kiln_strbuf_printf(&b, "  ROOT t = (f32[%zu]) tuple(ar)\n}\n", count);
  } else {
    kiln_strbuf_printf(&b, "  c0 = f32[%zu] multiply(%s, q)\n", count, kind == 1 ? "ar" : "q");
    for (int k = 0; k < 8; k++)
      kiln_strbuf_printf(&b, "  c%d = f32[%zu] %s(c%d, q)\n", k + 1, count,
                         k % 2 ? "add" : "multiply", k);
    kiln_strbuf_printf(&b, "  ROOT t = (f32[%zu], f32[%zu]) tuple(%s, c8)\n}\n", count, count,
                       kind == 2 ? "p" : "ar");
  }
  double ms = measure_module(dev, n, &b, 2, bytes, iters, synchronous);
  kiln_strbuf_free(&b);
  return ms;
}

int main(int argc, char **argv) {
  size_t max_bytes = (size_t)4 << 20;
  int ranks[3] = {2, 4, 8}, nranks = 3;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
      max_bytes = (size_t)strtoull(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      nranks = 0;
      for (char *p = argv[++i]; *p && nranks < 3;) {
        int v = (int)strtol(p, &p, 10);
        if (v < 1 || v > 8) {
          fprintf(stderr, "--ranks: 1..8 each\n");
          return 2;
        }
        ranks[nranks++] = v;
        if (*p == ',') p++;
      }
    } else {
      fprintf(stderr, "usage: bench_collectives [--max-bytes N] [--ranks 2,4,8]\n");
      return 2;
    }
  }
  if (max_bytes < 1024) max_bytes = 1024;
  /* Buffers for the largest case: reduce-scatter reads max_bytes per rank, all-gather writes
   * max_bytes per rank. */
  float *send[8], *recv[8];
  for (int i = 0; i < 8; i++) {
    send[i] = kiln_malloc(max_bytes);
    recv[i] = kiln_malloc(max_bytes);
    for (size_t e = 0; e < max_bytes / sizeof(float); e++) send[i][e] = (float)(e % 97);
    memset(recv[i], 0, max_bytes);
  }
  printf("%-15s %5s %12s %10s %10s %10s %12s %8s\n", "collective", "ranks", "size", "time us",
         "algbw GB/s", "busbw GB/s", "memcpy GB/s", "bus/mcp");
  for (int w = 0; w < 3; w++)
    for (int k = 0; k < nranks; k++) {
      int n = ranks[k];
      for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
        if (bytes / sizeof(float) % (size_t)n) continue;
        /* About 16 MiB moved per size: enough calls to time small ones, few for big ones. */
        int iters = (int)(((size_t)16 << 20) / bytes);
        if (iters < 3) iters = 3;
        if (iters > 500) iters = 500;
        double ms = measure((which_t)w, n, bytes, iters, send, recv);
        double mcp = memcpy_ms(recv[0], send[0], bytes, iters);
        double algbw = (double)bytes / (ms * 1e6);
        double factor = w == ALL_REDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
        double mcpbw = (double)bytes / (mcp * 1e6);
        printf("%-15s %5d %12zu %10.1f %10.2f %10.2f %12.2f %8.2f\n", names[w], n, bytes, ms * 1e3,
               algbw, algbw * factor, mcpbw, algbw * factor / mcpbw);
      }
    }
  kiln_device_t *dev = NULL;
  die(kiln_device_create("host", &dev), "host device");
  printf("\n%-15s %5s %12s %14s %14s %12s\n", "through thunks", "ranks", "size", "execute us",
         "direct us", "thunk/direct");
  for (int k = 0; k < nranks; k++) {
    int n = ranks[k];
    for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 16) {
      int iters = (int)(((size_t)16 << 20) / bytes);
      if (iters < 3) iters = 3;
      if (iters > 200) iters = 200;
      double direct = measure(ALL_REDUCE, n, bytes, iters, send, recv);
      double thunk = measure_thunks(dev, n, bytes, iters);
      printf("%-15s %5d %12zu %14.1f %14.1f %12.2f\n", "all-reduce", n, bytes, thunk * 1e3,
             direct * 1e3, thunk / direct);
    }
  }
  /* The overlap rows: the independent module compiled synchronous / split (> 1: time the
   * overlap saved; at most (chain + all-reduce) / max(chain, all-reduce)), and the same work
   * made dependent, split. */
  printf("\n%-16s %5s %10s %9s %9s %10s %10s %10s %8s %6s\n", "overlap", "ranks", "size",
         "chain us", "coll us", "split us", "sync us", "dep. us", "sync/spl", "best");
  for (int k = 0; k < nranks; k++) {
    int n = ranks[k];
    size_t bytes = max_bytes / sizeof(float) / (size_t)n * (size_t)n * sizeof(float);
    int iters = (int)(((size_t)64 << 20) / bytes);
    if (iters < 10) iters = 10;
    if (iters > 100) iters = 100;
    /* Five rounds, each variant once per round (so drift on a shared machine hits them
     * alike); each variant's best round. */
    double ms[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
    for (int round = 0; round < 5; round++)
      for (int v = 0; v < 5; v++) {
        double t = measure_overlap(dev, n, bytes, iters, v % 4, v == 4);
        if (t < ms[v]) ms[v] = t;
      }
    double sync = ms[4];
    double lo = ms[2] > ms[3] ? ms[2] : ms[3];
    printf("%-16s %5d %10zu %9.1f %9.1f %10.1f %10.1f %10.1f %8.2f %6.2f\n", "all-reduce+chain", n,
           bytes, ms[2] * 1e3, ms[3] * 1e3, ms[0] * 1e3, sync * 1e3, ms[1] * 1e3, sync / ms[0],
           (ms[2] + ms[3]) / lo);
  }
  kiln_device_destroy(dev);
  for (int i = 0; i < 8; i++) {
    kiln_free(send[i]);
    kiln_free(recv[i]);
  }
  return 0;
}
