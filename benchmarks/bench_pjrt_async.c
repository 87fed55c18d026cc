/* What asynchronous executes buy a frontend: a loop of steps, each an Execute of a program that
 * updates its state in place (the state donated, as a training step's parameters are) followed
 * by host work of the frontend's own (Python tracing the next call, loading the next batch),
 * the state read once at the end, on two host clients of the plugin in the same run:
 * `async_execute` "never" (each Execute returns when its run has ended, so the host work
 * waits for it) and "auto" (the run goes on the device's queue and overlaps the host work).
 *
 *   bench_pjrt_async [steps] [rounds]     (defaults 40, 8)
 *
 * The host work per step is calibrated to the run's own time on the synchronous client first
 * (the case where overlap can save the most: up to half the loop). Rounds alternate the two
 * clients so load drift hits both; prints per-step times (best round and median) and the ratio
 * never / auto, and checks that both clients' final states agree bit for bit. On this 2-core
 * machine the run's kernels use both cores, so the host work and the run compete for them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kiln/pjrt_c_api.h"
#include "pjrt_bench_util.h"

#define N (1 << 20)

static const char *kStep =
    "HloModule bench_async_step, input_output_alias={ {}: (0, {}, may-alias) "
    "}\n" PJRT_BENCH_TANH_STEP;

static const PJRT_Api *api;

#define CHECK(call) pjrt_bench_check(api, (call), #call)

typedef pjrt_bench_side_t side_t;

static void side_open(side_t *s, const char *name) {
  PJRT_NamedValue o[3] = {pjrt_bench_opt("platform", "cpu"), pjrt_bench_opt("cache_dir", ""),
                          pjrt_bench_opt("async_execute", name)};
  pjrt_bench_side_open(api, s, name, o, 3, kStep);
}

static void side_close(side_t *s) {
  pjrt_bench_side_close(api, s);
}

/* The frontend's own work: about `ms` milliseconds of arithmetic on the calling thread. */
static volatile double g_sink;
static void host_work(double ms) {
  double t0 = kiln_clock_ms(), acc = 0;
  for (int k = 0; kiln_clock_ms() - t0 < ms; k++)
    for (int i = 0; i < 2000; i++) acc += sqrt((double)(i + k));
  g_sink = acc;
}

/* `steps` steps from the state x0 on `s` with `work_ms` of host work after each Execute; the
 * final state into `out` (N floats). Returns the loop's milliseconds (reading the state
 * included: that is when the last run must have ended). */
static double run_loop(side_t *s, const float *x0, int steps, double work_ms, float *out) {
  PJRT_Client_BufferFromHostBuffer_Args b;
  memset(&b, 0, sizeof(b));
  b.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  b.client = s->c;
  b.data = x0;
  b.type = PJRT_Buffer_Type_F32;
  int64_t dims[1] = {N};
  b.dims = dims;
  b.num_dims = 1;
  b.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  b.device = s->d;
  CHECK(api->PJRT_Client_BufferFromHostBuffer(&b));
  pjrt_bench_event_destroy(api, b.done_with_host_buffer);
  PJRT_Buffer *state = b.buffer;
  double t0 = kiln_clock_ms();
  for (int k = 0; k < steps; k++) {
    PJRT_Buffer *next = NULL;
    pjrt_bench_event_destroy(api, pjrt_bench_execute1(api, s->l, state, &next));
    pjrt_bench_buffer_destroy(api, state); /* donated */
    state = next;
    host_work(work_ms);
  }
  PJRT_Buffer_ToHostBuffer_Args t;
  memset(&t, 0, sizeof(t));
  t.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  t.src = state;
  t.dst = out;
  t.dst_size = (size_t)N * sizeof(float);
  CHECK(api->PJRT_Buffer_ToHostBuffer(&t));
  if (t.event) {
    PJRT_Event_Await_Args w;
    memset(&w, 0, sizeof(w));
    w.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
    w.event = t.event;
    CHECK(api->PJRT_Event_Await(&w));
    pjrt_bench_event_destroy(api, t.event);
  }
  double ms = kiln_clock_ms() - t0;
  pjrt_bench_buffer_destroy(api, state);
  return ms;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 40, rounds = argc > 2 ? atoi(argv[2]) : 8;
  if (steps < 1) steps = 40;
  if (rounds < 1) rounds = 8;
  api = pjrt_bench_load(KILN_PJRT_PLUGIN);
  if (!api) return 1;
  float *x0 = malloc((size_t)N * sizeof(float)), *a = malloc((size_t)N * sizeof(float)),
        *b = malloc((size_t)N * sizeof(float));
  if (!x0 || !a || !b) return 1;
  for (int i = 0; i < N; i++) x0[i] = (float)((i % 1000) - 500) * 0.003f;
  side_t never, aut;
  side_open(&never, "never");
  side_open(&aut, "auto");
  /* Warm-up (the lazy lowering on each client), then the run's own time per step. */
  run_loop(&never, x0, 2, 0, a);
  run_loop(&aut, x0, 2, 0, b);
  double run_ms = run_loop(&never, x0, steps, 0, a) / steps;
  printf("bench_pjrt_async: %d steps of f32[%d] state (tanh, multiply, add; donated), %d rounds\n",
         steps, N, rounds);
  printf("  run alone: %.3f ms per step; host work per step set to that\n", run_ms);
  double *tn = calloc((size_t)rounds, sizeof(double)), *ta = calloc((size_t)rounds, sizeof(double));
  if (!tn || !ta) return 1;
  int mismatch = 0;
  for (int r = 0; r < rounds; r++) {
    tn[r] = run_loop(&never, x0, steps, run_ms, a) / steps;
    ta[r] = run_loop(&aut, x0, steps, run_ms, b) / steps;
    if (memcmp(a, b, (size_t)N * sizeof(float))) mismatch++;
  }
  qsort(tn, (size_t)rounds, sizeof(double), cmp_double);
  qsort(ta, (size_t)rounds, sizeof(double), cmp_double);
  double mn = tn[rounds / 2], ma = ta[rounds / 2];
  printf("  never (Execute waits for the run): best %.3f ms per step, median %.3f\n", tn[0], mn);
  printf("  auto  (the run overlaps host work): best %.3f ms per step, median %.3f\n", ta[0], ma);
  printf("  never / auto: best %.2fx, median %.2fx (1.00x: no overlap; 2.00x: all of it)\n",
         tn[0] / ta[0], mn / ma);
  printf("  final states %s\n", mismatch ? "DIFFER" : "agree bit for bit");
  side_close(&never);
  side_close(&aut);
  free(tn);
  free(ta);
  free(x0);
  free(a);
  free(b);
  return mismatch ? 1 : 0;
}
