/* Stress (run under ThreadSanitizer in CI): 8 threads x 200 executes on one client. Every
 * thread compiles the same two programs itself at the same moment (the compile cache makes
 * them one executable each) and executes them at once from the start, so the first executes
 * race: the kernels must be made exactly once ("kiln.executable.loads" is 1). Each iteration
 * creates its argument buffers, executes, reads and checks the result against values computed
 * here, and destroys its buffers, all concurrently; every 4th iteration runs a module that
 * donates its first argument. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"

#define THREADS 8
#define ITERS 200
#define N 256

static const PJRT_Api *api;
static PJRT_Client *g_client;
static PJRT_Device *g_dev;
static pthread_barrier_t g_start;

static const char *kFma =
    "HloModule stress_fma\n"
    "ENTRY main {\n"
    "  a = f32[256] parameter(0)\n"
    "  b = f32[256] parameter(1)\n"
    "  m = f32[256] multiply(a, b)\n"
    "  ROOT s = f32[256] add(m, a)\n"
    "}\n";

static const char *kDonate =
    "HloModule stress_donate, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "ENTRY main {\n"
    "  a = f32[256] parameter(0)\n"
    "  ROOT n = f32[256] negate(a)\n"
    "}\n";

typedef struct worker {
  int id;
  int wrong;
  PJRT_LoadedExecutable *fma, *donate;
} worker_t;

static void *work(void *arg) {
  worker_t *w = arg;
  pthread_barrier_wait(&g_start);
  w->fma = pjrt_exec_compile(api, g_client, kFma);
  w->donate = pjrt_exec_compile(api, g_client, kDonate);
  float a[N], b[N], r[N];
  int64_t dims[1] = {N};
  for (int it = 0; it < ITERS; it++) {
    for (int i = 0; i < N; i++) {
      a[i] = (float)(w->id * 1000 + it) * 0.001f + (float)i;
      b[i] = (float)((i + it) % 7) - 3.0f;
    }
    PJRT_Buffer *args[2] = {
        pjrt_exec_buffer(api, g_client, g_dev, a, PJRT_Buffer_Type_F32, dims, 1),
        pjrt_exec_buffer(api, g_client, g_dev, b, PJRT_Buffer_Type_F32, dims, 1)};
    PJRT_Buffer *out[1] = {NULL};
    if (it % 4 == 3) {
      pjrt_exec_run(api, w->donate, args, 1, out);
      pjrt_exec_read(api, out[0], r, sizeof(r));
      for (int i = 0; i < N; i++) w->wrong += r[i] != -a[i];
    } else {
      pjrt_exec_run(api, w->fma, args, 2, out);
      pjrt_exec_read(api, out[0], r, sizeof(r));
      for (int i = 0; i < N; i++) w->wrong += r[i] != a[i] * b[i] + a[i];
    }
    pjrt_exec_buffer_destroy(api, out[0]);
    pjrt_exec_buffer_destroy(api, args[0]);
    pjrt_exec_buffer_destroy(api, args[1]);
  }
  return NULL;
}

static PJRT_Executable *executable_of(PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_GetExecutable_Args g;
  memset(&g, 0, sizeof(g));
  g.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  g.loaded_executable = l;
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetExecutable(&g));
  return g.executable;
}

static void executable_destroy(PJRT_Executable *e) {
  PJRT_Executable_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  d.executable = e;
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&d));
}

static int64_t loads_of(PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_GetExecutable_Args g;
  memset(&g, 0, sizeof(g));
  g.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  g.loaded_executable = l;
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetExecutable(&g));
  PJRT_Executable_GetCostAnalysis_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE;
  a.executable = g.executable;
  PJRT_CHECK(api, api->PJRT_Executable_GetCostAnalysis(&a));
  int64_t v = -1;
  const char *name = "kiln.executable.loads";
  for (size_t i = 0; i < a.num_properties; i++)
    if (a.properties[i].name_size == strlen(name) &&
        !memcmp(a.properties[i].name, name, strlen(name)))
      v = a.properties[i].int64_value;
  PJRT_Executable_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  d.executable = g.executable;
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&d));
  return v;
}

static void test_concurrent_compile_and_execute(void **state) {
  (void)state;
  api = pjrt_test_load();
  assert_non_null(api);
  g_client = pjrt_exec_client(api, NULL);
  g_dev = pjrt_exec_device(api, g_client, 0);
  pthread_barrier_init(&g_start, NULL, THREADS);
  pthread_t th[THREADS];
  worker_t w[THREADS];
  double t0 = pjrt_exec_now_ms();
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    w[i].id = i;
    assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  double t1 = pjrt_exec_now_ms();
  printf("%d threads x %d executes: %.1f ms\n", THREADS, ITERS, t1 - t0);
  int wrong = 0;
  for (int i = 0; i < THREADS; i++) wrong += w[i].wrong;
  assert_int_equal(wrong, 0);
  /* one executable per program (kiln's handles share it), its kernels made once */
  for (int i = 1; i < THREADS; i++) {
    PJRT_Executable *a = executable_of(w[0].fma), *b = executable_of(w[i].fma);
    assert_ptr_equal(a, b);
    executable_destroy(a);
    executable_destroy(b);
  }
  assert_int_equal(loads_of(w[0].fma), 1);
  assert_int_equal(loads_of(w[0].donate), 1);
  for (int i = 0; i < THREADS; i++) {
    pjrt_exec_destroy(api, w[i].fma);
    pjrt_exec_destroy(api, w[i].donate);
  }
  pthread_barrier_destroy(&g_start);
  pjrt_test_client_destroy(api, g_client);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_compile_and_execute),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
