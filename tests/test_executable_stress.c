/* One host executable run from many threads at once: 8 threads x 100 runs of a module with a
 * while loop, a conditional, a stateful rng and command buffers (runs of kernel thunks at the
 * top level and in the loop body), each thread with its own inputs and stream. Every run's
 * deterministic outputs must equal, bit for bit, what a single-threaded run of the same
 * executable gave for those inputs; every rng output must lie in [lo, hi), and no two runs
 * may draw the same numbers (the shared generator state hands each call a value of its own).
 * Built with -DKILN_SANITIZE=thread, this is the ThreadSanitizer check of the runtime
 * (scripts/run-tests.sh); a data race is a report, and a report fails the test. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/thunks/compile.h"
#include "runtime/executable.h"
#include "runtime/host/host_device.h"

enum { N = 256, NR = 64, THREADS = 8, RUNS = 100, MAX_OUTPUTS = 8 };
#define RNG_LO (-1.0f)
#define RNG_HI 2.0f

/* The loop halves its vector and adds 0.5 a hundred times (more trips than while_loop_unroll
 * takes, so it stays a loop); the conditional picks a branch by the
 * second parameter; four independent elementwise outputs become a run of kernel thunks. */
static const char kModule[] =
    "HloModule stress\n"
    "cond {\n"
    "  p = (s32[], f32[256]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] constant(100)\n"
    "  ROOT lt = pred[] compare(i, n), direction=LT\n"
    "}\n"
    "body {\n"
    "  p = (s32[], f32[256]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  x = f32[256] get-tuple-element(p), index=1\n"
    "  one = s32[] constant(1)\n"
    "  j = s32[] add(i, one)\n"
    "  h = f32[] constant(0.5)\n"
    "  hb = f32[256] broadcast(h), dimensions={}\n"
    "  y = f32[256] multiply(x, hb)\n"
    "  z = f32[256] add(y, hb)\n"
    "  ROOT t = (s32[], f32[256]) tuple(j, z)\n"
    "}\n"
    "b0 {\n  p = f32[256] parameter(0)\n  ROOT n = f32[256] negate(p)\n}\n"
    "b1 {\n  p = f32[256] parameter(0)\n  ROOT e = f32[256] exponential(p)\n}\n"
    "b2 {\n  p = f32[256] parameter(0)\n  ROOT a = f32[256] abs(p)\n}\n"
    "ENTRY e {\n"
    "  x = f32[256] parameter(0)\n"
    "  k = s32[] parameter(1)\n"
    "  zero = s32[] constant(0)\n"
    "  t = (s32[], f32[256]) tuple(zero, x)\n"
    "  w = (s32[], f32[256]) while(t), condition=cond, body=body\n"
    "  wx = f32[256] get-tuple-element(w), index=1\n"
    "  c = f32[256] conditional(k, wx, wx, wx), branch_computations={b0, b1, b2}\n"
    "  a = f32[256] negate(x)\n"
    "  b = f32[256] exponential(a)\n"
    "  s = f32[256] sine(x)\n"
    "  d = f32[256] cosine(s)\n"
    "  lo = f32[] constant(-1)\n"
    "  hi = f32[] constant(2)\n"
    "  r = f32[64] rng(lo, hi), distribution=rng_uniform\n"
    "  ROOT out = (f32[256], f32[256], f32[256], f32[256], f32[256], f32[256], f32[64]) "
    "tuple(wx, c, a, b, s, d, r)\n"
    "}\n";
#define RNG_OUTPUT 6 /* the last leaf; the others are deterministic */

typedef struct outputs {
  int n;
  void *data[MAX_OUTPUTS];
  uint64_t size[MAX_OUTPUTS];
} outputs_t;

static void outputs_free(outputs_t *o) {
  for (int i = 0; i < o->n; i++) kiln_free(o->data[i]);
  memset(o, 0, sizeof(*o));
}

/* Runs `e` once on `stream` with x and k (device addresses) and reads every output back. */
static kiln_status run_once(kiln_executable_t *e, kiln_stream_t *stream, kiln_devptr_t x,
                            kiln_devptr_t k, outputs_t *out) {
  const kiln_executable_desc_t *d = kiln_executable_desc(e);
  kiln_devptr_t params[2] = {x, k};
  uint64_t sizes[2] = {N * 4, 4};
  kiln_device_buffer_t *bufs[MAX_OUTPUTS] = {0};
  if (d->num_outputs > MAX_OUTPUTS) return KILN_ERR_INTERNAL("%d outputs", d->num_outputs);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_executable_run(e, stream, params, sizes, 2, bufs));
  out->n = d->num_outputs;
  kiln_status s = NULL;
  for (int i = 0; i < out->n; i++) {
    out->size[i] = bufs[i]->size;
    out->data[i] = kiln_malloc(bufs[i]->size);
    if (!s) s = kiln_stream_memcpy_d2h(stream, out->data[i], bufs[i]->ptr, bufs[i]->size);
  }
  kiln_status sync = kiln_stream_synchronize(stream);
  if (!s)
    s = sync;
  else
    kiln_status_free(sync);
  for (int i = 0; i < out->n; i++) kiln_device_buffer_destroy(bufs[i]);
  return s;
}

static uint64_t hash_bytes(const void *p, uint64_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Why run `r`'s outputs differ from `want`'s, or NULL; rng values must be in range. */
static const char *check_outputs(const outputs_t *want, const outputs_t *got, char *why,
                                 size_t why_n) {
  if (got->n != want->n) return "a different number of outputs";
  for (int i = 0; i < got->n; i++) {
    if (got->size[i] != want->size[i]) {
      snprintf(why, why_n, "output %d: %llu bytes, want %llu", i, (unsigned long long)got->size[i],
               (unsigned long long)want->size[i]);
      return why;
    }
    if (i == RNG_OUTPUT) {
      const float *r = got->data[i];
      for (uint64_t j = 0; j < got->size[i] / 4; j++)
        if (!(r[j] >= RNG_LO && r[j] < RNG_HI)) {
          snprintf(why, why_n, "rng element %llu = %g is outside [%g, %g)", (unsigned long long)j,
                   (double)r[j], (double)RNG_LO, (double)RNG_HI);
          return why;
        }
    } else if (memcmp(got->data[i], want->data[i], got->size[i]) != 0) {
      snprintf(why, why_n, "output %d differs from the single-threaded run", i);
      return why;
    }
  }
  return NULL;
}

typedef struct worker {
  kiln_executable_t *e;
  kiln_device_t *dev;
  float x[N];
  int32_t k;
  outputs_t want; /* single-threaded result for x, k */
  uint64_t rng_hash[RUNS];
  int failures;
  char first_failure[256];
} worker_t;

static void worker_fail(worker_t *w, const char *what) {
  if (!w->failures++) snprintf(w->first_failure, sizeof(w->first_failure), "%s", what);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  kiln_stream_t *stream = NULL;
  kiln_devptr_t x = 0, k = 0;
  kiln_status s = kiln_stream_create(w->dev, &stream);
  if (!s) s = kiln_device_mem_alloc(w->dev, N * 4, &x);
  if (!s) s = kiln_device_mem_alloc(w->dev, 4, &k);
  if (!s) s = kiln_stream_memcpy_h2d(stream, x, w->x, N * 4);
  if (!s) s = kiln_stream_memcpy_h2d(stream, k, &w->k, 4);
  if (!s) s = kiln_stream_synchronize(stream);
  for (int r = 0; r < RUNS && !s; r++) {
    outputs_t got = {0};
    s = run_once(w->e, stream, x, k, &got);
    if (!s) {
      char why[200];
      const char *bad = check_outputs(&w->want, &got, why, sizeof(why));
      if (bad) worker_fail(w, bad);
      w->rng_hash[r] = hash_bytes(got.data[RNG_OUTPUT], got.size[RNG_OUTPUT]);
    }
    outputs_free(&got);
  }
  if (s) {
    worker_fail(w, kiln_status_message(s));
    kiln_status_free(s);
  }
  kiln_device_mem_free(w->dev, x);
  kiln_device_mem_free(w->dev, k);
  kiln_stream_destroy(stream);
  return NULL;
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

#define ASSERT_OK(expr)                                           \
  do {                                                            \
    kiln_status s__ = (expr);                                     \
    if (s__) fail_msg("%s: %s", #expr, kiln_status_message(s__)); \
  } while (0)

static void test_one_executable_runs_from_eight_threads_as_it_runs_from_one(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  ASSERT_OK(kiln_host_device_create(2, &dev));
  kiln_hlo_module_t *m = NULL;
  ASSERT_OK(kiln_hlo_parse_module(kModule, strlen(kModule), NULL, &m));
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  co.command_buffer_min_run = 2;
  kiln_executable_desc_t *d = NULL;
  kiln_compile_stats_t cs;
  ASSERT_OK(kiln_compile_module(m, &co, &d, &cs));
  /* The module has what the test is about. */
  kiln_strbuf_t text = {0};
  kiln_executable_desc_print(&text, d);
  const char *t = kiln_strbuf_cstr(&text);
  assert_non_null(strstr(t, "while "));
  assert_non_null(strstr(t, "conditional "));
  assert_non_null(strstr(t, "rng-get-and-update-state"));
  if (cs.command_buffers < 2) fail_msg("%zu command buffers in\n%s", cs.command_buffers, t);
  kiln_strbuf_free(&text);
  kiln_executable_t *e = NULL;
  ASSERT_OK(kiln_executable_load(dev, d, &e));
  assert_int_equal(kiln_executable_desc(e)->num_outputs, 7);

  /* Single-threaded reference runs, one per thread's inputs. */
  static worker_t workers[THREADS];
  kiln_stream_t *stream = NULL;
  ASSERT_OK(kiln_stream_create(dev, &stream));
  kiln_devptr_t x = 0, k = 0;
  ASSERT_OK(kiln_device_mem_alloc(dev, N * 4, &x));
  ASSERT_OK(kiln_device_mem_alloc(dev, 4, &k));
  for (int w = 0; w < THREADS; w++) {
    worker_t *wk = &workers[w];
    memset(wk, 0, sizeof(*wk));
    wk->e = e;
    wk->dev = dev;
    wk->k = w % 4 - 1; /* -1 and 2 both take the last branch (out of range: the last) */
    for (int i = 0; i < N; i++) wk->x[i] = (float)((i * 37 + w * 101) % 97) / 16.0f - 3.0f;
    ASSERT_OK(kiln_stream_memcpy_h2d(stream, x, wk->x, N * 4));
    ASSERT_OK(kiln_stream_memcpy_h2d(stream, k, &wk->k, 4));
    ASSERT_OK(kiln_stream_synchronize(stream));
    ASSERT_OK(run_once(e, stream, x, k, &wk->want));
    char why[200];
    const char *bad = check_outputs(&wk->want, &wk->want, why, sizeof(why));
    if (bad) fail_msg("single-threaded run: %s", bad);
  }
  kiln_device_mem_free(dev, x);
  kiln_device_mem_free(dev, k);
  kiln_stream_destroy(stream);
  /* The inputs matter: threads 0 and 1 take different branches on different data. */
  assert_true(memcmp(workers[0].want.data[1], workers[1].want.data[1], N * 4) != 0);

  pthread_t threads[THREADS];
  for (int w = 0; w < THREADS; w++)
    assert_int_equal(pthread_create(&threads[w], NULL, worker_main, &workers[w]), 0);
  for (int w = 0; w < THREADS; w++) pthread_join(threads[w], NULL);

  int failures = 0;
  for (int w = 0; w < THREADS; w++) {
    if (workers[w].failures)
      fprintf(stderr, "thread %d: %d of %d runs failed; first: %s\n", w, workers[w].failures, RUNS,
              workers[w].first_failure);
    failures += workers[w].failures;
  }
  assert_int_equal(failures, 0);
  /* Every run drew its own numbers. */
  uint64_t *all = kiln_calloc(THREADS * RUNS, sizeof(uint64_t));
  for (int w = 0; w < THREADS; w++)
    memcpy(all + w * RUNS, workers[w].rng_hash, sizeof(workers[w].rng_hash));
  qsort(all, THREADS * RUNS, sizeof(uint64_t), compare_u64);
  for (int i = 1; i < THREADS * RUNS; i++)
    if (all[i] == all[i - 1]) fail_msg("two runs drew the same rng output");
  kiln_free(all);

  for (int w = 0; w < THREADS; w++) outputs_free(&workers[w].want);
  kiln_executable_destroy(e);
  kiln_hlo_module_destroy(m);
  kiln_device_destroy(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_executable_runs_from_eight_threads_as_it_runs_from_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
