/* Concurrent compilations sharing the per-kernel cache (compiler/backend/kernel_cache.h):
 * four threads, each emitting the same kernels and compiling them in batches (themselves on
 * worker pools) into JITs of their own, with one disk folder; the memory cache is cleared
 * meanwhile. Every kernel computes the right values. Runs under ThreadSanitizer in CI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/ir.h"

static const char kFusions[] =
    "scale {\n"
    "  p = f32[128,32] parameter(0)\n"
    "  c = f32[] constant(3)\n"
    "  b = f32[128,32] broadcast(c), dimensions={}\n"
    "  ROOT m = f32[128,32] multiply(p, b)\n"
    "}\n"
    "ENTRY shift {\n"
    "  p = f32[128,32] parameter(0)\n"
    "  c = f32[] constant(-1)\n"
    "  b = f32[128,32] broadcast(c), dimensions={}\n"
    "  ROOT a = f32[128,32] add(p, b)\n"
    "}\n";

#define THREADS 4
#define ROUNDS 3

typedef struct worker {
  const kiln_hlo_module_t *m;
  const char *dir;
  int id, bad;
  kiln_status status;
} worker_t;

static void *work(void *arg) {
  worker_t *w = arg;
  float x[128 * 32], y[128 * 32];
  for (int i = 0; i < 128 * 32; i++) x[i] = (float)(i % 17) - 8.0f;
  for (int r = 0; r < ROUNDS && !w->status; r++) {
    kiln_codegen_kernel_t k[2];
    memset(k, 0, sizeof(k));
    const kiln_kir_module_t *mods[2];
    for (int c = 0; c < 2 && !w->status; c++) {
      char name[32];
      snprintf(name, sizeof(name), "t%d_r%d_c%d", w->id, r, c);
      kiln_codegen_compile_options_t o = {0};
      o.kernel_name = name;
      o.dump_dir = "";
      o.host_target = true;
      w->status = kiln_codegen_kernel_emit(w->m->computations.data[c], &o, &k[c]);
      mods[c] = k[c].kir;
    }
    kiln_host_jit_t *jit = NULL;
    kiln_host_jit_options_t jo = {0};
    jo.dump_dir = "";
    if (!w->status) w->status = kiln_host_jit_create(&jo, &jit);
    kiln_kir_host_kernel_t hk[2];
    kiln_kir_batch_options_t bo = {w->dir, 2, false};
    if (!w->status) w->status = kiln_kir_compile_host_batch(mods, 2, jit, &bo, hk, NULL);
    for (int c = 0; c < 2 && !w->status; c++) {
      void *args[2] = {x, y};
      w->status = kiln_kir_host_kernel_run(&hk[c], NULL, args);
      const char *nm = w->m->computations.data[c]->name;
      for (int i = 0; i < 128 * 32 && !w->status; i++) {
        float want = !strcmp(nm, "scale") ? 3.0f * x[i] : x[i] - 1.0f;
        if (fabsf(y[i] - want) > 1e-6f) w->bad++;
      }
    }
    if (w->id == 0 && r == 1) kiln_kernel_cache_clear();
    kiln_host_jit_destroy(jit);
    for (int c = 0; c < 2; c++) kiln_codegen_kernel_free(&k[c]);
  }
  return NULL;
}

static void test_threads_share_the_kernel_cache(void **state) {
  (void)state;
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_computations(kFusions, sizeof(kFusions) - 1, NULL, &m));
  char dir[] = "/tmp/kiln_kcache_stress_XXXXXX";
  assert_non_null(mkdtemp(dir));
  worker_t w[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    w[i].m = m;
    w[i].dir = dir;
    w[i].id = i;
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  int bad = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    if (w[i].status) printf("thread %d: %s\n", i, kiln_status_message(w[i].status));
    assert_null(w[i].status);
    bad += w[i].bad;
  }
  kiln_kernel_cache_counters_t c = kiln_kernel_cache_counters();
  printf("%d threads x %d rounds: memory hits %lld, misses %lld; %d wrong values\n", THREADS,
         ROUNDS, (long long)c.memory_hits, (long long)c.memory_misses, bad);
  assert_int_equal(bad, 0);
  assert_true(c.memory_hits > 0);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_share_the_kernel_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
