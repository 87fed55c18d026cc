/* Stress (run under ThreadSanitizer in CI): 8 threads x 200 executes on one client. Every
 * thread compiles the same two programs itself at the same moment (the compile cache makes
 * them one executable each) and executes them at once from the start, so the first executes
 * race: the kernels must be made exactly once ("kiln.executable.loads" is 1). Each iteration
 * creates its argument buffers, executes, reads and checks the result against values computed
 * here, and destroys its buffers, all concurrently; every 4th iteration runs a module that
 * donates its first argument.
 *
 * Shared arguments: threads execute on the same argument buffer while another thread deletes
 * it or donates it (the holds an execute takes on its arguments, which Delete and donation wait
 * for, are lock-free). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

/* One round of the shared-argument race: READERS threads run fma(s, b) until an execute is
 * refused, one thread deletes s (round % 2) or donates it to `donate` once they have all run. */
#define ROUNDS 40
#define READERS 6

typedef struct race {
  PJRT_LoadedExecutable *fma, *donate;
  PJRT_Buffer *s, *b;
  float a[N], bv[N];
  bool donate_round;
  pthread_barrier_t start;
  _Atomic int ran;            /* successful executes so far */
  _Atomic int wrong, refused; /* wrong results; executes refused (FAILED_PRECONDITION) */
  _Atomic int other;          /* failures of any other kind */
  _Atomic int donated_wrong;  /* the donation's wrong results (or -1: it failed) */
} race_t;

static void *race_reader(void *arg) {
  race_t *r = arg;
  pthread_barrier_wait(&r->start);
  float out_host[N];
  for (int it = 0; it < 1000000; it++) {
    PJRT_Buffer *args[2] = {r->s, r->b}, *out[1] = {NULL};
    PJRT_Error_Code code =
        pjrt_test_take_error(api, pjrt_exec_try_run(api, r->fma, args, 2, out, NULL), NULL, 0);
    if (code == PJRT_Error_Code_FAILED_PRECONDITION) {
      atomic_fetch_add(&r->refused, 1);
      return NULL;
    }
    if (code != PJRT_Error_Code_OK) {
      atomic_fetch_add(&r->other, 1);
      return NULL;
    }
    pjrt_exec_read(api, out[0], out_host, sizeof(out_host));
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += out_host[i] != r->a[i] * r->bv[i] + r->a[i];
    atomic_fetch_add(&r->wrong, wrong);
    pjrt_exec_buffer_destroy(api, out[0]);
    atomic_fetch_add(&r->ran, 1);
  }
  return NULL;
}

static void *race_killer(void *arg) {
  race_t *r = arg;
  pthread_barrier_wait(&r->start);
  while (atomic_load(&r->ran) < READERS) sched_yield(); /* executes are in flight */
  if (!r->donate_round) {
    PJRT_Buffer_Delete_Args d;
    memset(&d, 0, sizeof(d));
    d.struct_size = PJRT_Buffer_Delete_Args_STRUCT_SIZE;
    d.buffer = r->s;
    PJRT_CHECK(api, api->PJRT_Buffer_Delete(&d));
    return NULL;
  }
  PJRT_Buffer *args[1] = {r->s}, *out[1] = {NULL};
  if (pjrt_test_take_error(api, pjrt_exec_try_run(api, r->donate, args, 1, out, NULL), NULL, 0)) {
    atomic_store(&r->donated_wrong, -1);
    return NULL;
  }
  float neg[N];
  pjrt_exec_read(api, out[0], neg, sizeof(neg));
  int wrong = 0;
  for (int i = 0; i < N; i++) wrong += neg[i] != -r->a[i];
  atomic_store(&r->donated_wrong, wrong);
  pjrt_exec_buffer_destroy(api, out[0]);
  return NULL;
}

static void test_delete_and_donation_wait_for_concurrent_executes(void **state) {
  (void)state;
  api = pjrt_test_load();
  assert_non_null(api);
  g_client = pjrt_exec_client(api, NULL);
  g_dev = pjrt_exec_device(api, g_client, 0);
  race_t *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  r->fma = pjrt_exec_compile(api, g_client, kFma);
  r->donate = pjrt_exec_compile(api, g_client, kDonate);
  int64_t dims[1] = {N};
  int total_ran = 0;
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < N; i++) {
      r->a[i] = (float)(round * N + i) * 0.25f;
      r->bv[i] = (float)(i % 5) - 2.0f;
    }
    r->s = pjrt_exec_buffer(api, g_client, g_dev, r->a, PJRT_Buffer_Type_F32, dims, 1);
    r->b = pjrt_exec_buffer(api, g_client, g_dev, r->bv, PJRT_Buffer_Type_F32, dims, 1);
    r->donate_round = round % 2 == 1;
    atomic_store(&r->ran, 0);
    atomic_store(&r->refused, 0);
    atomic_store(&r->donated_wrong, 0);
    pthread_barrier_init(&r->start, NULL, READERS + 1);
    pthread_t th[READERS + 1];
    for (int i = 0; i < READERS; i++)
      assert_int_equal(pthread_create(&th[i], NULL, race_reader, r), 0);
    assert_int_equal(pthread_create(&th[READERS], NULL, race_killer, r), 0);
    for (int i = 0; i <= READERS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r->start);
    /* every reader ran until the buffer was gone, then was refused; results all correct */
    assert_int_equal(atomic_load(&r->refused), READERS);
    assert_int_equal(atomic_load(&r->other), 0);
    assert_int_equal(atomic_load(&r->wrong), 0);
    assert_int_equal(atomic_load(&r->donated_wrong), 0);
    PJRT_Buffer_IsDeleted_Args d;
    memset(&d, 0, sizeof(d));
    d.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE;
    d.buffer = r->s;
    PJRT_CHECK(api, api->PJRT_Buffer_IsDeleted(&d));
    assert_true(d.is_deleted);
    total_ran += atomic_load(&r->ran);
    pjrt_exec_buffer_destroy(api, r->s);
    pjrt_exec_buffer_destroy(api, r->b);
  }
  printf("%d rounds (delete / donate) x %d readers: %d executes before the buffer went\n", ROUNDS,
         READERS, total_ran);
  pjrt_exec_destroy(api, r->fma);
  pjrt_exec_destroy(api, r->donate);
  free(r);
  pjrt_test_client_destroy(api, g_client);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_compile_and_execute),
      cmocka_unit_test(test_delete_and_donation_wait_for_concurrent_executes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
