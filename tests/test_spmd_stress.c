/* SPMD executes under load (CI runs it under ThreadSanitizer): two threads each compile a
 * 4-replica module (an all-reduce inside a while loop, an all-gather, a reduce-scatter and a
 * collective-permute) and run it on 4 host devices many times back to back
 * (kiln_executable_run_spmd: a world per run, one thread per participant, cliques shared by
 * the participants), so worlds of the two threads run concurrently on one host device. Every
 * participant's final result must equal the SPMD evaluator's bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/device.h"
#include "tests/skip_util.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#define REPLICAS 4
#define THREADS 2
#define REPEATS 25

static const char kModule[] =
    "HloModule spmd_stress, replica_count=4\n"
    "\n"
    "add {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "\n"
    "cond {\n"
    "  p = (s32[], f32[64]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] constant(3)\n"
    "  ROOT lt = pred[] compare(i, n), direction=LT\n"
    "}\n"
    "\n"
    "body {\n"
    "  p = (s32[], f32[64]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  x = f32[64] get-tuple-element(p), index=1\n"
    "  ar = f32[64] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=add\n"
    "  q = f32[] constant(0.25)\n"
    "  qb = f32[64] broadcast(q), dimensions={}\n"
    "  y = f32[64] multiply(ar, qb)\n"
    "  one = s32[] constant(1)\n"
    "  j = s32[] add(i, one)\n"
    "  ROOT t = (s32[], f32[64]) tuple(j, y)\n"
    "}\n"
    "\n"
    "ENTRY e {\n"
    "  x = f32[64] parameter(0)\n"
    "  rid = u32[] replica-id()\n"
    "  rf = f32[] convert(rid)\n"
    "  rb = f32[64] broadcast(rf), dimensions={}\n"
    "  x1 = f32[64] add(x, rb)\n"
    "  zero = s32[] constant(0)\n"
    "  init = (s32[], f32[64]) tuple(zero, x1)\n"
    "  w = (s32[], f32[64]) while(init), condition=cond, body=body\n"
    "  r = f32[64] get-tuple-element(w), index=1\n"
    "  ag = f32[256] all-gather(x1), replica_groups={{0,1,2,3}}, dimensions={0}\n"
    "  rs = f32[16] reduce-scatter(x1), replica_groups={{0,1,2,3}}, dimensions={0}, "
    "to_apply=add\n"
    "  cp = f32[64] collective-permute(x1), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n"
    "  ROOT out = (f32[64], f32[256], f32[16], f32[64]) tuple(r, ag, rs, cp)\n"
    "}\n";

typedef struct {
  const kiln_hlo_module_t *m;
  kiln_device_t *dev;
  kiln_literal_t *const *args;
  int num_args;
  kiln_literal_t *const *want;
  int mismatches;
  kiln_status status;
} worker_t;

static bool same_bits(const kiln_literal_t *a, const kiln_literal_t *b) {
  if (!a || !b) return a == b;
  if (a->num_tuple_elements != b->num_tuple_elements) return false;
  for (int i = 0; i < a->num_tuple_elements; i++)
    if (!same_bits(a->tuple_elements[i], b->tuple_elements[i])) return false;
  if (a->num_tuple_elements) return true;
  if (a->num_elements != b->num_elements || a->shape->type != b->shape->type) return false;
  size_t bytes = (size_t)a->num_elements * kiln_elem_type_storage_bytes(a->shape->type);
  return bytes == 0 || memcmp(a->data, b->data, bytes) == 0;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = w->dev;
  ro.repeat = REPEATS;
  ro.collective_timeout_ms = 60000;
  kiln_literal_t *got[REPLICAS];
  w->status =
      kiln_device_run_module_spmd(w->m, w->args, w->num_args, REPLICAS, 1, &ro, &arena, got, NULL);
  for (int i = 0; !w->status && i < REPLICAS; i++)
    if (!same_bits(w->want[i], got[i])) w->mismatches++;
  kiln_arena_destroy(&arena);
  return NULL;
}

static void test_concurrent_spmd_runs_match_the_evaluator(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_device_create("host", &dev);
  if (s) {
    kiln_status_free(s);
    fail_msg("no host device");
  }
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  s = kiln_hlo_parse_module(kModule, strlen(kModule), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  kiln_literal_t *want[REPLICAS];
  kiln_literal_t *const *per[REPLICAS];
  for (int i = 0; i < REPLICAS; i++) per[i] = args;
  kiln_eval_spmd_options_t eo = {
      .num_replicas = REPLICAS, .num_partitions = 1, .timeout_ms = 60000};
  s = kiln_eval_module_spmd(m, &eo, n, per, &arena, want);
  if (s) fail_msg("evaluator: %s", kiln_status_message(s));

  worker_t w[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker_t){.m = m, .dev = dev, .args = args, .num_args = n, .want = want};
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++) {
    if (w[i].status) printf("thread %d: %s\n", i, kiln_status_message(w[i].status));
    assert_null(w[i].status);
    assert_int_equal(w[i].mismatches, 0);
  }
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  kiln_device_destroy(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_spmd_runs_match_the_evaluator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
