/* What asynchronous uploads buy a frontend (plugin/pjrt_buffer.c, "asynchronous transfers"),
 * on two host clients of the plugin in the same run: `async_transfers` off (a large
 * BufferFromHostBuffer with kImmutableUntilTransferCompletes copies in the call) and on (the
 * copy goes to the device's transfer thread, the call returns at once). Both clients run executes
 * asynchronously (async_execute "always"); reads of an execute's output are made by the
 * device's queue thread when the run ends on both.
 *
 *   bench_pjrt_transfers [steps] [rounds]     (defaults 40, 8)
 *
 * 1. The call: BufferFromHostBuffer of 16 MiB with kImmutableUntilTransferCompletes, the time
 *    until it returns and until done_with_host_buffer, on each client (best of the rounds).
 * 2. A serving loop of `steps` steps, two in flight: the host makes step k's input (4 MiB),
 *    uploads it (kImmutableUntilTransferCompletes), executes (tanh, multiply, add), asks for the
 *    4 MiB output (ToHostBuffer), then waits for step k-1's output and sums it. Rounds
 *    alternate the clients so load drift hits both; per-step times (best round, median), the
 *    ratio off / on, and the outputs' sums compared bit for bit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kiln/pjrt_c_api.h"
#include "pjrt_bench_util.h"

#define N (1 << 20)
#define BIG (4 << 20) /* f32 elements of the call's 16 MiB */

static const char *kStep = "HloModule bench_transfer_step\n" PJRT_BENCH_TANH_STEP;

static const PJRT_Api *api;

#define CHECK(call) pjrt_bench_check(api, (call), #call)

typedef pjrt_bench_side_t side_t;

static void side_open(side_t *s, const char *name) {
  PJRT_NamedValue o[4] = {pjrt_bench_opt("platform", "cpu"), pjrt_bench_opt("cache_dir", ""),
                          pjrt_bench_opt("async_execute", "always"),
                          pjrt_bench_opt_bool("async_transfers", strcmp(name, "on") == 0)};
  pjrt_bench_side_open(api, s, name, o, 4, kStep);
}

static void side_close(side_t *s) {
  pjrt_bench_side_close(api, s);
}

static void await(PJRT_Event *e) {
  if (!e) return;
  PJRT_Event_Await_Args w;
  memset(&w, 0, sizeof(w));
  w.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  w.event = e;
  CHECK(api->PJRT_Event_Await(&w));
  pjrt_bench_event_destroy(api, e);
}

static PJRT_Buffer *upload(side_t *s, const float *x, int64_t n, PJRT_Event **done) {
  PJRT_Client_BufferFromHostBuffer_Args b;
  memset(&b, 0, sizeof(b));
  b.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  b.client = s->c;
  b.data = x;
  b.type = PJRT_Buffer_Type_F32;
  b.dims = &n;
  b.num_dims = 1;
  b.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  b.device = s->d;
  CHECK(api->PJRT_Client_BufferFromHostBuffer(&b));
  *done = b.done_with_host_buffer;
  return b.buffer;
}

/* Part 1: (call ms, done ms) of one 16 MiB upload. */
static void time_call(side_t *s, const float *x, double *call_ms, double *done_ms) {
  PJRT_Event *done = NULL;
  double t0 = kiln_clock_ms();
  PJRT_Buffer *b = upload(s, x, BIG, &done);
  double t1 = kiln_clock_ms();
  await(done);
  double t2 = kiln_clock_ms();
  pjrt_bench_buffer_destroy(api, b);
  *call_ms = t1 - t0;
  *done_ms = t2 - t0;
}

/* One step in flight: its input memory, buffers and events. */
typedef struct step {
  float *in, *out;
  PJRT_Buffer *arg, *res;
  PJRT_Event *uploaded, *ran, *read;
} step_t;

/* Waits for `p`'s output, sums it, and lets its buffers go. */
static double finish(step_t *p) {
  await(p->read);
  await(p->ran);
  await(p->uploaded);
  pjrt_bench_buffer_destroy(api, p->arg);
  pjrt_bench_buffer_destroy(api, p->res);
  double sum = 0;
  for (int i = 0; i < N; i++) sum += p->out[i];
  p->read = p->ran = p->uploaded = NULL;
  p->arg = p->res = NULL;
  return sum;
}

/* Part 2: `steps` steps on `s`; the sum of every output into *total. Returns ms per step. */
static double run_loop(side_t *s, step_t st[2], int steps, double *total) {
  double t0 = kiln_clock_ms(), sum = 0;
  for (int k = 0; k < steps; k++) {
    step_t *p = &st[k & 1];
    if (p->read) sum += finish(p); /* step k-2 (its memory is reused) */
    for (int i = 0; i < N; i++) p->in[i] = (float)((i + k) % 2000 - 1000) * 0.002f;
    p->arg = upload(s, p->in, N, &p->uploaded);
    p->ran = pjrt_bench_execute1(api, s->l, p->arg, &p->res);
    PJRT_Buffer_ToHostBuffer_Args t;
    memset(&t, 0, sizeof(t));
    t.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
    t.src = p->res;
    t.dst = p->out;
    t.dst_size = (size_t)N * sizeof(float);
    CHECK(api->PJRT_Buffer_ToHostBuffer(&t));
    p->read = t.event;
    step_t *q = &st[(k + 1) & 1]; /* step k-1: consumed while step k goes on */
    if (q->read) sum += finish(q);
  }
  for (int j = 0; j < 2; j++)
    if (st[j].read) sum += finish(&st[j]);
  *total = sum;
  return (kiln_clock_ms() - t0) / steps;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 40, rounds = argc > 2 ? atoi(argv[2]) : 8;
  if (steps < 2) steps = 40;
  if (rounds < 1) rounds = 8;
  api = pjrt_bench_load(KILN_PJRT_PLUGIN);
  if (!api) return 1;
  float *big = malloc((size_t)BIG * sizeof(float));
  step_t st[2];
  memset(st, 0, sizeof(st));
  for (int j = 0; j < 2; j++) {
    st[j].in = malloc((size_t)N * sizeof(float));
    st[j].out = malloc((size_t)N * sizeof(float));
    if (!st[j].in || !st[j].out) return 1;
  }
  if (!big) return 1;
  for (int i = 0; i < BIG; i++) big[i] = (float)(i % 777);
  side_t off, on;
  side_open(&off, "off");
  side_open(&on, "on");
  printf("bench_pjrt_transfers: async_transfers off vs on, two host clients, %d rounds\n", rounds);
  double call[2] = {1e30, 1e30}, done[2] = {1e30, 1e30};
  for (int r = 0; r < rounds; r++) {
    side_t *sides[2] = {&off, &on};
    for (int j = 0; j < 2; j++) {
      double c, d;
      time_call(sides[j], big, &c, &d);
      if (c < call[j]) call[j] = c;
      if (d < done[j]) done[j] = d;
    }
  }
  printf("  BufferFromHostBuffer 16 MiB (kImmutableUntilTransferCompletes), best of %d:\n", rounds);
  printf("    off: returns after %.3f ms, done_with_host_buffer after %.3f ms\n", call[0], done[0]);
  printf("    on:  returns after %.3f ms, done_with_host_buffer after %.3f ms\n", call[1], done[1]);
  printf("    call off / on: %.1fx; done off / on: %.2fx\n", call[0] / call[1], done[0] / done[1]);
  double sum_off = 0, sum_on = 0;
  run_loop(&off, st, 2, &sum_off); /* warm-up: the lazy lowering on each client */
  run_loop(&on, st, 2, &sum_on);
  double *toff = calloc((size_t)rounds, sizeof(double)),
         *ton = calloc((size_t)rounds, sizeof(double));
  if (!toff || !ton) return 1;
  int mismatch = 0;
  for (int r = 0; r < rounds; r++) {
    toff[r] = run_loop(&off, st, steps, &sum_off);
    ton[r] = run_loop(&on, st, steps, &sum_on);
    if (memcmp(&sum_off, &sum_on, sizeof(double))) mismatch++;
  }
  qsort(toff, (size_t)rounds, sizeof(double), cmp_double);
  qsort(ton, (size_t)rounds, sizeof(double), cmp_double);
  printf("  serving loop, %d steps of f32[%d] in and out (upload, execute, read; 2 in flight):\n",
         steps, N);
  printf("    off: best %.3f ms per step, median %.3f\n", toff[0], toff[rounds / 2]);
  printf("    on:  best %.3f ms per step, median %.3f\n", ton[0], ton[rounds / 2]);
  printf("    off / on: best %.2fx, median %.2fx\n", toff[0] / ton[0],
         toff[rounds / 2] / ton[rounds / 2]);
  printf("  outputs' sums %s\n", mismatch ? "DIFFER" : "agree bit for bit");
  side_close(&off);
  side_close(&on);
  for (int j = 0; j < 2; j++) {
    free(st[j].in);
    free(st[j].out);
  }
  free(toff);
  free(ton);
  free(big);
  return mismatch ? 1 : 0;
}
