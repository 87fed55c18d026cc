/* Collective thunks on N host devices (runtime/collective_thunk.h, runtime/spmd.h) against the
 * SPMD evaluator (kiln_eval_module_spmd): every collective (all-reduce, all-gather,
 * reduce-scatter, all-to-all with a split dimension and of a tuple, collective-permute,
 * collective-broadcast, the -start/-done pairs, variadic all-reduce) under each group mode
 * (cross-replica, cross-partition, cross-replica-and-partition, flattened ids, iota groups)
 * and element types f32 / bf16 / f16 / f64 / s32 / u8 / pred, each participant's result
 * equal to the evaluator's bit for bit. Each participant's data differ: the module adds its
 * flattened id (replica-id x P + partition-id) to the shared input. Also: an unsupported
 * reducer is UNIMPLEMENTED naming it, a participant that skips a collective is
 * DEADLINE_EXCEEDED naming the missing rank (never a hang), and a module compiled for N
 * participants run alone is FAILED_PRECONDITION. Every module that runs is also serialized and
 * read back (runtime/executable_serialize.h) and run again on its devices: the same bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "ffi/ffi_legacy.h"
#include "ffi/ffi_registry.h"
#include "runtime/buffer.h"
#include "runtime/collective_thunk.h"
#include "runtime/device.h"
#include "runtime/spmd.h"
#include "runtime/thunk.h"
#include "tests/collective_test_util.h"
#include "tests/skip_util.h"
#include "tests/status_test_util.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#define MAXP 16

static kiln_device_t *g_dev;
static int g_round_trips;
static size_t g_round_trip_bytes;

static int setup(void **state) {
  (void)state;
  kiln_status s = kiln_device_create("host", &g_dev);
  if (s) {
    kiln_status_free(s);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  printf("%d multi-device executables ran the same after serialize/deserialize (%zu bytes)\n",
         g_round_trips, g_round_trip_bytes);
  kiln_device_destroy(g_dev);
  return 0;
}

/* A module over T: x = T[shape] parameter(0), y = x + (the participant's flattened id), then
 * `body` (which names y and the reducer `red` over T, whose root op is `red_op`). */
static char *module_text(int R, int P, const char *T, const char *shape, const char *red_op,
                         const char *body) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "HloModule m, replica_count=%d, num_partitions=%d\n\n", R, P);
  kiln_strbuf_printf(&b,
                     "red {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n  ROOT r = %s[] "
                     "%s(a, b)\n}\n\n",
                     T, T, T, red_op);
  kiln_strbuf_printf(&b,
                     "ENTRY e {\n  x = %s%s parameter(0)\n  rid = u32[] replica-id()\n"
                     "  pid = u32[] partition-id()\n  np = u32[] constant(%d)\n"
                     "  rp = u32[] multiply(rid, np)\n  id = u32[] add(rp, pid)\n",
                     T, shape, P);
  if (strcmp(T, "pred") == 0)
    kiln_strbuf_printf(&b,
                       "  one = u32[] constant(1)\n  bit = u32[] and(id, one)\n  zero = u32[] "
                       "constant(0)\n  odd = pred[] compare(bit, zero), direction=NE\n"
                       "  ob = pred%s broadcast(odd), dimensions={}\n  y = pred%s xor(x, ob)\n",
                       shape, shape);
  else
    kiln_strbuf_printf(&b,
                       "  idt = %s[] convert(id)\n  ib = %s%s broadcast(idt), dimensions={}\n"
                       "  y = %s%s add(x, ib)\n",
                       T, T, shape, T, shape);
  kiln_strbuf_printf(&b, "%s\n}\n", body);
  return kiln_strbuf_take(&b);
}

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

/* Runs `text` on R x P host devices and on the evaluator; every participant's result must be
 * the evaluator's bit for bit. Returns the host run's status (the evaluator must succeed). */
static kiln_status run_both(const char *text, int R, int P, int64_t timeout_ms, bool compare) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) {
    printf("parse: %s\n%s\n", kiln_status_message(s), text);
    kiln_status_free(s);
    fail();
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  kiln_literal_t *want[MAXP], *got[MAXP];
  kiln_literal_t *const *per[MAXP];
  for (int i = 0; i < R * P; i++) per[i] = args;
  if (compare) {
    kiln_eval_spmd_options_t eo = {
        .num_replicas = R, .num_partitions = P, .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
    s = kiln_eval_module_spmd(m, &eo, n, per, &arena, want);
    if (s) printf("evaluator: %s\n", kiln_status_message(s));
    assert_null(s);
  }
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = g_dev;
  ro.collective_timeout_ms = timeout_ms;
  s = kiln_device_run_module_spmd(m, args, n, R, P, &ro, &arena, got, NULL);
  for (int i = 0; !s && compare && i < R * P; i++)
    if (!same_bits(want[i], got[i])) {
      printf("participant %d differs from the evaluator\n%s\n", i, text);
      fail();
    }
  /* The executable serialized and read back (collective thunks whole: groups, counts,
   * slices) runs on the same R x P devices to the same bits. */
  kiln_literal_t *again[MAXP];
  ro.serialize_round_trip = true;
  kiln_device_run_report_t rep;
  kiln_status rs = s || !compare
                       ? KILN_STATUS_OK
                       : kiln_device_run_module_spmd(m, args, n, R, P, &ro, &arena, again, &rep);
  if (rs) printf("after a round trip: %s\n%s\n", kiln_status_message(rs), text);
  assert_null(rs);
  for (int i = 0; !s && compare && i < R * P; i++)
    if (!same_bits(got[i], again[i])) {
      printf("participant %d differs after a serialization round trip\n%s\n", i, text);
      fail();
    }
  if (!s && compare) g_round_trips++, g_round_trip_bytes += rep.serialized_bytes;
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  return s;
}

static void check(int R, int P, const char *T, const char *shape, const char *red_op,
                  const char *body) {
  char *text = module_text(R, P, T, shape, red_op, body);
  kiln_status s = run_both(text, R, P, KILN_TEST_COLLECTIVE_TIMEOUT_MS, true);
  if (s) printf("%s\n%s\n", kiln_status_message(s), text);
  assert_null(s);
  kiln_free(text);
}

static void test_all_reduce_cross_replica_every_type_and_reducer(void **state) {
  (void)state;
  static const char *const types[] = {"f32", "bf16", "f16", "f64", "s32", "u8"};
  static const char *const ops[] = {"add", "multiply", "minimum", "maximum"};
  char body[256];
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      snprintf(body, sizeof body,
               "  ROOT c = %s[8,4] all-reduce(y), replica_groups={{0,1},{2,3}}, to_apply=red",
               types[t]);
      check(4, 1, types[t], "[8,4]", ops[o], body);
    }
  /* 4096+ elements per rank: the split all-reduce, still in rank order. */
  check(4, 1, "bf16", "[64,80]", "add",
        "  ROOT c = bf16[64,80] all-reduce(y), replica_groups={}, to_apply=red");
  check(2, 1, "pred", "[16]", "or",
        "  ROOT c = pred[16] all-reduce(y), replica_groups={{0,1}}, to_apply=red");
  check(2, 1, "pred", "[16]", "and",
        "  ROOT c = pred[16] all-reduce(y), replica_groups={{0,1}}, to_apply=red");
}

static void test_all_reduce_group_modes(void **state) {
  (void)state;
  /* cross-replica-and-partition: replica groups of every partition together */
  check(2, 2, "f32", "[8]", "add",
        "  ROOT c = f32[8] all-reduce(y), channel_id=1, replica_groups={{0,1}}, to_apply=red");
  /* flattened ids */
  check(2, 2, "f32", "[8]", "add",
        "  ROOT c = f32[8] all-reduce(y), channel_id=1, replica_groups={{0,3},{1,2}}, "
        "use_global_device_ids=true, to_apply=red");
  /* iota groups with a transpose: {0,2},{1,3} */
  check(4, 1, "s32", "[8]", "add",
        "  ROOT c = s32[8] all-reduce(y), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=red");
  /* cross-replica on 2 partitions: one group per partition */
  check(2, 2, "bf16", "[8]", "add",
        "  ROOT c = bf16[8] all-reduce(y), replica_groups={{0,1}}, to_apply=red");
  /* mesh axes with a sub-axis: {0,4,1,5},{2,6,3,7}, an all-gather to see the order */
  check(8, 1, "s32", "[2]", "add",
        "  ROOT c = s32[8] all-gather(y), dimensions={0}, "
        "replica_groups=mesh['x'=2,'y'=4] {'y':(2)2,'x'}");
  /* a mesh with its own device order: groups {3,1},{0,2} */
  check(4, 1, "s32", "[2]", "add",
        "  ROOT c = s32[4] all-gather(y), dimensions={0}, "
        "replica_groups=mesh['x'=2,'y'=2], device_ids=(3,1,0,2) {'y'}");
}

static void test_all_reduce_variadic_and_async(void **state) {
  (void)state;
  check(2, 1, "f32", "[8]", "add",
        "  z = f32[3] slice(y), slice={[0:3]}\n"
        "  ROOT c = (f32[8], f32[3]) all-reduce(y, z), replica_groups={{0,1}}, to_apply=red");
  check(2, 1, "f32", "[8]", "maximum",
        "  s = f32[8] all-reduce-start(y), replica_groups={{0,1}}, to_apply=red\n"
        "  ROOT d = f32[8] all-reduce-done(s)");
}

/* An all-reduce in a while body whose root writes a new value into the operand's loop slot:
 * copy insertion must count the done as a use of the start's operand (the split collective
 * reads it until then), or the root's copy lands in the operand's buffer between start and
 * done and buffer assignment refuses the module. Plain and explicit async forms. */
static void test_async_all_reduce_in_a_loop_slot_the_root_rewrites(void **state) {
  (void)state;
  for (int form = 0; form < 2; form++) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_append(
        &b,
        "HloModule wloop, replica_count=2\n"
        "red { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
        "cond { p = (s32[], f32[256], f32[256]) parameter(0)  i = s32[] get-tuple-element(p), "
        "index=0  n = s32[] constant(4)  ROOT lt = pred[] compare(i, n), direction=LT }\n"
        "body {\n  p = (s32[], f32[256], f32[256]) parameter(0)\n"
        "  i = s32[] get-tuple-element(p), index=0\n"
        "  x = f32[256] get-tuple-element(p), index=1\n"
        "  q = f32[256] get-tuple-element(p), index=2\n");
    kiln_strbuf_append(&b, form ? "  s = f32[256] all-reduce-start(x), replica_groups={{0,1}}, "
                                  "to_apply=red\n  y = f32[256] negate(q)\n"
                                  "  d = f32[256] all-reduce-done(s)\n"
                                : "  d = f32[256] all-reduce(x), replica_groups={{0,1}}, "
                                  "to_apply=red\n  y = f32[256] negate(q)\n");
    kiln_strbuf_append(&b,
                       "  one = s32[] constant(1)\n  j = s32[] add(i, one)\n"
                       "  ROOT r = (s32[], f32[256], f32[256]) tuple(j, y, d)\n}\n"
                       "ENTRY e {\n  a = f32[256] parameter(0)\n  z = s32[] constant(0)\n"
                       "  t = (s32[], f32[256], f32[256]) tuple(z, a, a)\n"
                       "  w = (s32[], f32[256], f32[256]) while(t), condition=cond, body=body\n"
                       "  ROOT o = f32[256] get-tuple-element(w), index=2\n}\n");
    kiln_status s = run_both(kiln_strbuf_cstr(&b), 2, 1, KILN_TEST_COLLECTIVE_TIMEOUT_MS, true);
    if (s) fail_msg("form %d: %s", form, kiln_status_message(s));
    kiln_strbuf_free(&b);
  }
}

static void test_all_gather_and_reduce_scatter(void **state) {
  (void)state;
  check(2, 1, "f32", "[4,3]", "add",
        "  ROOT c = f32[8,3] all-gather(y), replica_groups={{0,1}}, dimensions={0}");
  check(2, 1, "f16", "[4,3]", "add",
        "  ROOT c = f16[4,6] all-gather(y), replica_groups={{1,0}}, dimensions={1}");
  check(1, 4, "u8", "[2,3]", "add",
        "  ROOT c = u8[2,12] all-gather(y), channel_id=1, replica_groups={{0,1,2,3}}, "
        "use_global_device_ids=true, dimensions={1}");
  check(2, 1, "f32", "[4,3]", "add",
        "  s = (f32[4,3], f32[8,3]) all-gather-start(y), replica_groups={{0,1}}, dimensions={0}\n"
        "  ROOT d = f32[8,3] all-gather-done(s)");
  check(4, 1, "f32", "[8,4]", "add",
        "  ROOT c = f32[8,1] reduce-scatter(y), replica_groups={}, dimensions={1}, to_apply=red");
  check(4, 1, "bf16", "[8,4]", "add",
        "  ROOT c = bf16[2,4] reduce-scatter(y), replica_groups={}, dimensions={0}, "
        "to_apply=red");
  check(2, 2, "s32", "[4,4]", "maximum",
        "  ROOT c = s32[4,2] reduce-scatter(y), channel_id=1, replica_groups={{0,3},{1,2}}, "
        "use_global_device_ids=true, dimensions={1}, to_apply=red");
}

static void test_all_to_all_permute_broadcast(void **state) {
  (void)state;
  /* cross-partition with a channel */
  check(1, 4, "f32", "[8,4]", "add",
        "  ROOT c = f32[8,4] all-to-all(y), channel_id=1, replica_groups={{0,1,2,3}}, "
        "dimensions={0}");
  check(2, 1, "s32", "[3,4]", "add",
        "  ROOT c = s32[3,4] all-to-all(y), replica_groups={{0,1}}, dimensions={1}");
  check(2, 1, "f32", "[4]", "add",
        "  z = f32[4] negate(y)\n"
        "  ROOT c = (f32[4], f32[4]) all-to-all(y, z), replica_groups={{0,1}}");
  check(4, 1, "f32", "[5]", "add",
        "  ROOT c = f32[5] collective-permute(y), source_target_pairs={{0,1},{1,2},{2,3}}");
  check(1, 2, "bf16", "[5]", "add",
        "  ROOT c = bf16[5] collective-permute(y), channel_id=1, "
        "source_target_pairs={{0,1},{1,0}}");
  check(2, 1, "f32", "[5]", "add",
        "  s = (f32[5], f32[5], u32[], u32[]) collective-permute-start(y), "
        "source_target_pairs={{0,1},{1,0}}\n"
        "  ROOT d = f32[5] collective-permute-done(s)");
  check(3, 1, "f64", "[5]", "add",
        "  ROOT c = f64[5] collective-broadcast(y), replica_groups={{2,0,1}}");
}

/* Element types the cliques do not reduce (complex, fp8, sub-byte integers) go through the
 * collective reducer expander too: an all-gather, then the reducer in rank order, bit for
 * bit the evaluator's; a result in a non-default layout gets a copy into it; an input's
 * all-reduce-start / -done pair is expanded as its all-reduce. */
static void test_types_the_runtime_does_not_reduce(void **state) {
  (void)state;
  check(4, 1, "c64", "[8,4]", "add",
        "  ROOT c = c64[8,4] all-reduce(y), replica_groups={{0,1},{2,3}}, to_apply=red");
  check(2, 1, "c128", "[6]", "multiply",
        "  ROOT c = c128[6] all-reduce(y), replica_groups={{1,0}}, to_apply=red");
  check(4, 1, "f8e4m3fn", "[8,4]", "add",
        "  ROOT c = f8e4m3fn[2,4] reduce-scatter(y), replica_groups={}, dimensions={0}, "
        "to_apply=red");
  check(2, 2, "f8e5m2", "[5,3]", "maximum",
        "  ROOT c = f8e5m2[5,3] all-reduce(y), channel_id=1, replica_groups={{0,3},{1,2}}, "
        "use_global_device_ids=true, to_apply=red");
  check(3, 1, "s4", "[7]", "add",
        "  ROOT c = s4[7] all-reduce(y), replica_groups={}, to_apply=red");
  check(2, 1, "c64", "[3,5]", "add",
        "  ROOT c = c64[3,5]{0,1} all-reduce(y), replica_groups={{0,1}}, to_apply=red");
  /* an async pair as written in the input is expanded as its all-reduce */
  check(2, 1, "c64", "[4]", "add",
        "  s = c64[4] all-reduce-start(y), replica_groups={{0,1}}, to_apply=red\n"
        "  ROOT c = c64[4] all-reduce-done(s)");
}

/* A reducer the runtime cannot fold ((a + b) * b) runs through the pipeline's collective
 * reducer expander (an all-gather and the reducer applied in rank order) and matches the
 * evaluator bit for bit; the variadic form, which the expander leaves alone, is UNIMPLEMENTED
 * naming the reducer. */
static void test_unfoldable_reducer_runs_and_variadic_is_unimplemented(void **state) {
  (void)state;
  const char *reducer =
      "red {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  s = f32[] add(a, b)\n"
      "  ROOT r = f32[] multiply(s, b)\n}\n\n";
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m, replica_count=2\n\n%s"
           "ENTRY e {\n  x = f32[4] parameter(0)\n"
           "  ROOT c = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=red\n}\n",
           reducer);
  kiln_status s = run_both(text, 2, 1, KILN_TEST_COLLECTIVE_TIMEOUT_MS, true);
  if (s) printf("%s\n", kiln_status_message(s));
  assert_null(s);
  snprintf(text, sizeof text,
           "HloModule m, replica_count=2\n\n%s"
           "ENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n"
           "  ROOT c = (f32[4], f32[4]) all-reduce(x, y), replica_groups={{0,1}}, "
           "to_apply=red\n}\n",
           reducer);
  s = run_both(text, 2, 1, KILN_TEST_COLLECTIVE_TIMEOUT_MS, false);
  assert_non_null(s);
  printf("%s\n", kiln_status_message(s));
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "reducer computation red"));
  kiln_status_free(s);
}

static void test_participant_skipping_a_collective_is_deadline_exceeded(void **state) {
  (void)state;
  const char *text =
      "HloModule m, replica_count=2\n\n"
      "red {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n"
      "with_ar {\n  p = f32[4] parameter(0)\n"
      "  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=red\n}\n\n"
      "without {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n  rid = u32[] replica-id()\n"
      "  zero = u32[] constant(0)\n  first = pred[] compare(rid, zero), direction=EQ\n"
      "  ROOT r = f32[4] conditional(first, x, x), true_computation=with_ar, "
      "false_computation=without\n}\n";
  kiln_status s = run_both(text, 2, 1, 300, false);
  assert_non_null(s);
  printf("%s\n", kiln_status_message(s));
  assert_int_equal(kiln_status_code(s), KILN_DEADLINE_EXCEEDED);
  assert_non_null(strstr(kiln_status_message(s), "rank(s) 1 did not arrive"));
  assert_non_null(strstr(kiln_status_message(s), "replica 0 partition 0"));
  kiln_status_free(s);
}

/* `text` parsed (fails the test otherwise), with fake arguments for its parameters. */
static kiln_hlo_module_t *parse_with_args(const char *text, kiln_arena_t *arena,
                                          kiln_literal_t ***args, int *n) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  assert_null(kiln_hlo_parse_module(text, strlen(text), &po, &m));
  kiln_arena_init(arena);
  *args = NULL;
  *n = 0;
  assert_null(kiln_fake_args_make(m, NULL, arena, args, n));
  return m;
}

static void test_multi_device_executable_alone_is_failed_precondition(void **state) {
  (void)state;
  const char *text =
      "HloModule m, replica_count=2\n\n"
      "red {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n"
      "  ROOT c = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=red\n}\n";
  kiln_arena_t arena;
  kiln_literal_t **args, *result = NULL;
  int n;
  kiln_hlo_module_t *m = parse_with_args(text, &arena, &args, &n);
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = g_dev;
  /* Compiled for the module's 2 replicas, run as one participant alone. */
  kiln_status s = kiln_device_run_module(m, args, n, &ro, &arena, &result, NULL);
  assert_non_null(s);
  printf("%s\n", kiln_status_message(s));
  assert_int_equal(kiln_status_code(s), KILN_FAILED_PRECONDITION);
  assert_non_null(strstr(kiln_status_message(s), "spans 2 participants"));
  kiln_status_free(s);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

/* Overlap at run time: an all-reduce the pipeline makes asynchronous runs on 2 host devices
 * with a custom call scheduled between its start and done. Participant 1's custom call before
 * the all-reduce waits until participant 0's custom call after the start has run: only a start
 * that returns before its peers arrive lets that happen (a start that waited would hold
 * participant 0 until participant 1 arrived, and the gate gives up after 20 s). */
static atomic_int g_signalled;

/* `text` (2 replicas) parsed into *m with fake arguments in *arena, run on 2 host devices. */
static kiln_status run_on_two(const char *text, int64_t timeout_ms, kiln_arena_t *arena,
                              kiln_hlo_module_t **m, kiln_literal_t ***args, kiln_literal_t **got) {
  int n;
  *m = parse_with_args(text, arena, args, &n);
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = g_dev;
  ro.collective_timeout_ms = timeout_ms;
  return kiln_device_run_module_spmd(*m, *args, n, 2, 1, &ro, arena, got, NULL);
}

static void gate_call(void *out, const void **in, XlaCustomCallStatus *status) {
  uint32_t id = *(const uint32_t *)in[1];
  for (int i = 0; id != 0 && !atomic_load(&g_signalled); i++) {
    if (i == 20000) {
      static const char kMsg[] = "participant 0 never ran the work after its all-reduce-start";
      XlaCustomCallStatusSetFailure(status, kMsg, sizeof kMsg - 1);
      return;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  memcpy(out, in[0], 8 * sizeof(float));
}

static void signal_call(void *out, const void **in, XlaCustomCallStatus *status) {
  (void)status;
  atomic_store(&g_signalled, 1);
  memcpy(out, in[0], 8 * sizeof(float));
}

static void register_legacy(const char *name,
                            void (*fn)(void *, const void **, XlaCustomCallStatus *)) {
  kiln_status s = kiln_ffi_registry_register_legacy(kiln_ffi_registry_default(), name, strlen(name),
                                                    "Host", 4, (void *)fn);
  if (s) fail_msg("%s", kiln_status_message(s));
}

static void test_async_all_reduce_overlaps_the_work_between_start_and_done(void **state) {
  (void)state;
  register_legacy("kiln_test_gate", gate_call);
  register_legacy("kiln_test_signal", signal_call);
  atomic_store(&g_signalled, 0);
  const char *text =
      "HloModule m, replica_count=2\n\n"
      "red {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n"
      "ENTRY e {\n  x = f32[8] parameter(0)\n  rid = u32[] replica-id()\n"
      "  g = f32[8] custom-call(x, rid), custom_call_target=\"kiln_test_gate\", "
      "api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true\n"
      "  ar = f32[8] all-reduce(g), replica_groups={{0,1}}, to_apply=red\n"
      "  y = f32[8] custom-call(x), custom_call_target=\"kiln_test_signal\", "
      "api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true\n"
      "  ROOT t = (f32[8], f32[8]) tuple(ar, y)\n}\n";
  kiln_arena_t arena;
  kiln_literal_t **args, *got[2] = {0};
  kiln_hlo_module_t *m = NULL;
  kiln_status s = run_on_two(text, KILN_TEST_COLLECTIVE_TIMEOUT_MS, &arena, &m, &args, got);
  if (s) fail_msg("%s", kiln_status_message(s));
  for (int p = 0; p < 2; p++) {
    const float *x = args[0]->data, *ar = got[p]->tuple_elements[0]->data,
                *y = got[p]->tuple_elements[1]->data;
    for (int e = 0; e < 8; e++) {
      assert_true(ar[e] == x[e] + x[e]);
      assert_true(y[e] == x[e]);
    }
  }
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

/* A participant whose execution fails between an all-reduce-start and its done: participant
 * 1's while condition (a custom call) fails after participant 0 began the all-reduce too, and
 * participant 0 reaches its done 200 ms later. The all-reduce's operand is an output buffer,
 * large enough for the two-step all-reduce: participant 1 must not return, and free it, before
 * participant 0 read it. The run fails with participant 1's error; without kiln_coll_abandon
 * participant 0 reads freed memory (AddressSanitizer reports it) and then waits for
 * participant 1 at the all-reduce's second barrier until the 10 s deadline (checked). */
static atomic_int g_rank0_looping, g_rank1_stopped;

/* Runs `text` on 2 host devices with a 10 s collective timeout: it must fail with an error
 * naming `needle` (participant 1's own) within 8 s. */
static void expect_participant_1_error(const char *text, const char *needle) {
  kiln_arena_t arena;
  kiln_literal_t **args, *got[2] = {0};
  kiln_hlo_module_t *m = NULL;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kiln_status s = run_on_two(text, 10000, &arena, &m, &args, got);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  assert_non_null(s);
  printf("%.2f s: %s\n", secs, kiln_status_message(s));
  if (!strstr(kiln_status_message(s), needle) || !strstr(kiln_status_message(s), "replica 1"))
    fail_msg("want participant 1's error '%s'", needle);
  assert_true(secs < 8);
  kiln_status_free(s);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static bool wait_flag(atomic_int *flag) {
  for (int i = 0; i < 20000 && !atomic_load(flag); i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return atomic_load(flag) != 0;
}

static void stop_on_1_call(void *out, const void **in, XlaCustomCallStatus *status) {
  int32_t i = *(const int32_t *)in[0];
  uint32_t id = *(const uint32_t *)in[1];
  if (id == 1) {
    wait_flag(&g_rank0_looping); /* so both began the all-reduce */
    static const char kMsg[] = "participant 1 stops here";
    XlaCustomCallStatusSetFailure(status, kMsg, sizeof kMsg - 1);
    atomic_store(&g_rank1_stopped, 1);
    return;
  }
  atomic_store(&g_rank0_looping, 1);
  if (wait_flag(&g_rank1_stopped)) {
    struct timespec wait = {0, 200000000};
    nanosleep(&wait, NULL);
  }
  *(uint8_t *)out = i < 2;
}

static void test_participant_failing_between_start_and_done_lets_its_peer_finish(void **state) {
  (void)state;
  register_legacy("kiln_test_stop_on_1", stop_on_1_call);
  atomic_store(&g_rank0_looping, 0);
  atomic_store(&g_rank1_stopped, 0);
  const char *text =
      "HloModule m, replica_count=2\n\n"
      "red {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n"
      "cond {\n  p = (s32[], f32[8], u32[]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n  r = u32[] get-tuple-element(p), index=2\n"
      "  ROOT c = pred[] custom-call(i, r), custom_call_target=\"kiln_test_stop_on_1\", "
      "api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true\n}\n\n"
      "body {\n  p = (s32[], f32[8], u32[]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n  v = f32[8] get-tuple-element(p), index=1\n"
      "  r = u32[] get-tuple-element(p), index=2\n  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n  w = f32[8] negate(v)\n"
      "  ROOT t = (s32[], f32[8], u32[]) tuple(j, w, r)\n}\n\n"
      "ENTRY e {\n  x = f32[65536] parameter(0)\n  v = f32[8] parameter(1)\n"
      "  rid = u32[] replica-id()\n  s = f32[65536] multiply(x, x)\n"
      "  ar = f32[65536] all-reduce(s), replica_groups={{0,1}}, to_apply=red\n"
      "  zero = s32[] constant(0)\n  init = (s32[], f32[8], u32[]) tuple(zero, v, rid)\n"
      "  l = (s32[], f32[8], u32[]) while(init), condition=cond, body=body\n"
      "  lv = f32[8] get-tuple-element(l), index=1\n"
      "  ROOT t = (f32[65536], f32[65536], f32[8]) tuple(s, ar, lv)\n}\n";
  expect_participant_1_error(text, "participant 1 stops here");
  assert_true(atomic_load(&g_rank1_stopped));
}

/* Participant 1 fails after its all-reduce-start (a custom call that fails on it, 50 ms in,
 * so participant 0 began too), before a collective participant 0 waits at: with the first
 * module, a collective-broadcast scheduled between the all-reduce's start and done; with the
 * second, before the start of one all-reduce while another's is under way (start b, the
 * call, start a, done a, done b). Participant 1 must stop participant 0 (abort the world)
 * before it finishes the all-reduce it began: the run fails with participant 1's error at
 * once, not at the 10 s deadline (participant 1 waiting for a peer that waits for it at a
 * collective it will not reach). */
static void fail_on_1_call(void *out, const void **in, XlaCustomCallStatus *status) {
  uint32_t id = *(const uint32_t *)in[0];
  if (id == 1) {
    struct timespec wait = {0, 50000000};
    nanosleep(&wait, NULL);
    static const char kMsg[] = "participant 1 fails";
    XlaCustomCallStatusSetFailure(status, kMsg, sizeof kMsg - 1);
    return;
  }
  memcpy(out, in[1], 64 * sizeof(float));
}

static void test_participant_failing_inside_async_windows_stops_its_peers_at_once(void **state) {
  (void)state;
  register_legacy("kiln_test_fail_on_1", fail_on_1_call);
  const char *broadcast =
      "HloModule m, replica_count=2\n\n"
      "red {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n"
      "ENTRY e {\n  x = f32[64] parameter(0)\n  v = f32[64] parameter(1)\n"
      "  rid = u32[] replica-id()\n  s = f32[64] multiply(x, x)\n"
      "  ar = f32[64] all-reduce(s), replica_groups={{0,1}}, to_apply=red\n"
      "  c = f32[64] custom-call(rid, v), custom_call_target=\"kiln_test_fail_on_1\", "
      "api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true\n"
      "  bc = f32[64] collective-broadcast(c), replica_groups={{0,1}}\n"
      "  ROOT t = (f32[64], f32[64], f32[64]) tuple(s, ar, bc)\n}\n";
  expect_participant_1_error(broadcast, "participant 1 fails");
  const char *nested =
      "HloModule m, replica_count=2\n\n"
      "red {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n"
      "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] maximum(a, "
      "b)\n}\n\n"
      "ENTRY e {\n  p0 = f32[64] parameter(0)\n  p1 = f32[64] parameter(1)\n"
      "  rid = u32[] replica-id()\n"
      "  m0 = f32[64] custom-call(rid, p0), custom_call_target=\"kiln_test_fail_on_1\", "
      "api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true\n"
      "  a = f32[64] all-reduce(m0), replica_groups={{0,1}}, to_apply=red\n"
      "  b = f32[64] all-reduce(p1), replica_groups={{0,1}}, to_apply=mx\n"
      "  ROOT t = (f32[64], f32[64]) tuple(a, b)\n}\n";
  expect_participant_1_error(nested, "participant 1 fails");
}

/* Nested async pairs built by hand, in an order a schedule may have: start b, start a, a
 * custom call that fails on participant 1 (synchronously, 50 ms in, so both began a and b),
 * done a, done b. Participant 1 must end a before b, the order of their dones, which
 * participant 0 follows: ended in start order, it would wait at b for participant 0 while
 * participant 0 waits at a for it, until the 10 s deadline (checked). Participant 0 finishes
 * both all-reduces with the right sums. */
typedef struct {
  kiln_thunk_seq_t seq;
  kiln_buffer_table_t table;
  kiln_stream_t *stream;
  kiln_thunk_exec_state_t *state;
  kiln_spmd_participant_t who;
  kiln_status status;
} hand_participant_t;

static kiln_status ok_fn(void *ctx, kiln_stream_t *stream, const kiln_devptr_t *operands,
                         int num_operands, const kiln_devptr_t *results, int num_results) {
  (void)ctx, (void)stream, (void)operands, (void)num_operands, (void)results, (void)num_results;
  return KILN_STATUS_OK;
}

static kiln_status fail_fn(void *ctx, kiln_stream_t *stream, const kiln_devptr_t *operands,
                           int num_operands, const kiln_devptr_t *results, int num_results) {
  ok_fn(ctx, stream, operands, num_operands, results, num_results);
  struct timespec wait = {0, 50000000};
  nanosleep(&wait, NULL);
  return KILN_ERR_INTERNAL("participant 1's call fails");
}

/* An all-reduce thunk of 64 f32 over 2 participants: send at `at`, result 256 bytes on. */
static kiln_thunk_t *hand_all_reduce(const char *name, kiln_coll_thunk_phase_t phase, int64_t at) {
  kiln_coll_thunk_desc_t *d = kiln_coll_thunk_desc_create(KILN_COLL_THUNK_ALL_REDUCE, 1, 2, 1);
  for (int i = 0; i < 2; i++) {
    d->rank[i] = i;
    d->group_size[i] = 2;
  }
  d->reduction = KILN_COLL_SUM;
  d->phase = phase;
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, at, 256),
                                             .recv = kiln_slice_make(0, at + 256, 256),
                                             .dtype = KILN_COLL_F32,
                                             .count = 64};
  return kiln_thunk_collective_create(name, d);
}

static void *hand_participant_main(void *arg) {
  hand_participant_t *h = arg;
  kiln_thunk_exec_params_t xp = {
      .device = g_dev, .stream = h->stream, .buffers = &h->table, .state = h->state};
  h->status = kiln_thunk_seq_execute(&h->seq, &xp);
  return NULL;
}

static void test_nested_async_pairs_end_in_the_order_of_their_dones(void **state) {
  (void)state;
  kiln_spmd_world_t *w = NULL;
  ASSERT_OK(kiln_spmd_world_create(2, 1, NULL, 10000, &w));
  hand_participant_t h[2];
  memset(h, 0, sizeof h);
  const uint64_t bytes = 1024; /* a: [0, 256) -> [256, 512); b: [512, 768) -> [768, 1024) */
  for (int p = 0; p < 2; p++) {
    kiln_thunk_seq_init(&h[p].seq);
    kiln_thunk_seq_push(&h[p].seq, hand_all_reduce("b", KILN_COLL_PHASE_START, 512));
    kiln_thunk_seq_push(&h[p].seq, hand_all_reduce("a", KILN_COLL_PHASE_START, 0));
    kiln_thunk_seq_push(&h[p].seq, kiln_thunk_custom_call_create("k", "k", p ? fail_fn : ok_fn,
                                                                 NULL, NULL, 0, NULL, 0, false));
    kiln_thunk_seq_push(&h[p].seq, hand_all_reduce("a", KILN_COLL_PHASE_DONE, 0));
    kiln_thunk_seq_push(&h[p].seq, hand_all_reduce("b", KILN_COLL_PHASE_DONE, 512));
    kiln_thunk_prepare_params_t pp = {1, &bytes};
    ASSERT_OK(kiln_thunk_seq_prepare(&h[p].seq, &pp));
    ASSERT_OK(kiln_buffer_table_init(&h[p].table, g_dev, 1));
    ASSERT_OK(kiln_buffer_table_allocate(&h[p].table, 0, bytes));
    float *x = (float *)(uintptr_t)h[p].table.bases[0];
    for (int e = 0; e < 64; e++) x[e] = (float)(p + 1), x[128 + e] = (float)(10 * (p + 1));
    ASSERT_OK(kiln_stream_create(g_dev, &h[p].stream));
    ASSERT_OK(kiln_thunk_exec_state_create(g_dev, &h[p].seq, &h[p].state));
    h[p].who = (kiln_spmd_participant_t){w, p};
    kiln_thunk_exec_state_set_participant(h[p].state, &h[p].who);
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t th[2];
  for (int p = 0; p < 2; p++)
    assert_int_equal(pthread_create(&th[p], NULL, hand_participant_main, &h[p]), 0);
  for (int p = 0; p < 2; p++) pthread_join(th[p], NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("nested pairs: %.2f s; participant 1: %s\n", secs,
         h[1].status ? kiln_status_message(h[1].status) : "OK");
  if (h[0].status) fail_msg("participant 0: %s", kiln_status_message(h[0].status));
  assert_non_null(h[1].status);
  assert_non_null(strstr(kiln_status_message(h[1].status), "participant 1's call fails"));
  assert_true(secs < 5);
  const float *x0 = (const float *)(uintptr_t)h[0].table.bases[0];
  for (int e = 0; e < 64; e++) {
    assert_true(x0[64 + e] == 3.0f);   /* a: 1 + 2 */
    assert_true(x0[192 + e] == 30.0f); /* b: 10 + 20 */
  }
  for (int p = 0; p < 2; p++) {
    kiln_status_free(h[p].status);
    kiln_thunk_exec_state_destroy(h[p].state);
    kiln_stream_destroy(h[p].stream);
    kiln_thunk_seq_free(&h[p].seq);
    kiln_buffer_table_free(&h[p].table);
  }
  kiln_spmd_world_destroy(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce_cross_replica_every_type_and_reducer),
      cmocka_unit_test(test_all_reduce_group_modes),
      cmocka_unit_test(test_all_reduce_variadic_and_async),
      cmocka_unit_test(test_all_gather_and_reduce_scatter),
      cmocka_unit_test(test_all_to_all_permute_broadcast),
      cmocka_unit_test(test_types_the_runtime_does_not_reduce),
      cmocka_unit_test(test_unfoldable_reducer_runs_and_variadic_is_unimplemented),
      cmocka_unit_test(test_participant_skipping_a_collective_is_deadline_exceeded),
      cmocka_unit_test(test_multi_device_executable_alone_is_failed_precondition),
      cmocka_unit_test(test_async_all_reduce_overlaps_the_work_between_start_and_done),
      cmocka_unit_test(test_async_all_reduce_in_a_loop_slot_the_root_rewrites),
      cmocka_unit_test(test_participant_failing_between_start_and_done_lets_its_peer_finish),
      cmocka_unit_test(test_participant_failing_inside_async_windows_stops_its_peers_at_once),
      cmocka_unit_test(test_nested_async_pairs_end_in_the_order_of_their_dones),
  };
  return kiln_run_tests(tests, setup, teardown);
}
