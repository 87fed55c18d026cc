/* XLA's async shorthand (compiler/hlo/parser_async.c): `all-to-all-start(...)`,
 * `reduce-scatter-start/-update/-done`, `add-start` ... read as async-start / -update / -done
 * around a wrapped computation holding the op with its attributes, printed in the long form
 * (print, reparse and print again give the same text and both verify); malformed shorthand is
 * a parse or verify error naming the instruction; and the shorthand collectives run on 4 host
 * devices (and on 2, groups `{}`) bit for bit equal to the SPMD evaluator, which itself equals
 * the synchronous op, for f32 and s32 (call_inline unwraps them; the pipeline's
 * async_collective_creator wraps reduce-scatter and all-to-all again, and the thunk emitter runs
 * the wrapped collective at its async-start; the synchronous op runs the same way). A single-device
 * module with `add-start` runs on the host device equal to the evaluator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "compiler/passes/pass.h"
#include "compiler/thunks/collective_emitter.h"
#include "runtime/device.h"
#include "tests/collective_test_util.h"
#include "tests/host_device_fixture.h"
#include "tests/skip_util.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

static kiln_hlo_module_t *parse_ok(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (!s) s = kiln_hlo_module_verify(m);
  if (s) printf("%s\n%s\n", kiln_status_message(s), text);
  assert_null(s);
  return m;
}

static kiln_hlo_instruction_t *find(const kiln_hlo_module_t *m, const char *name) {
  for (size_t c = 0; c < m->computations.len; c++) {
    kiln_hlo_instruction_t *in = kiln_hlo_computation_find(m->computations.data[c], name);
    if (in) return in;
  }
  return NULL;
}

/* The op an async-start wraps (the root of its calls= computation). */
static const kiln_hlo_instruction_t *wrapped_op(const kiln_hlo_module_t *m, const char *start) {
  const kiln_hlo_instruction_t *s = find(m, start);
  assert_non_null(s);
  assert_int_equal(s->opcode, KILN_OP_ASYNC_START);
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(s, "calls");
  assert_non_null(c);
  assert_int_equal(c->num_parameters, s->num_operands);
  return c->root;
}

static const char kForms[] =
    "HloModule forms, replica_count=4\n"
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
    "w {\n  q = f32[8,2] parameter(0)\n"
    "  ROOT x = f32[8,2] all-to-all(q), replica_groups={{0,1,2,3}}, dimensions={0}\n}\n"
    "ENTRY e {\n"
    "  p = f32[8,2] parameter(0)\n"
    "  a2a = ((f32[8,2]), f32[8,2], u32[], u32[]) all-to-all-start(p), channel_id=3, "
    "replica_groups={{0,1,2,3}}, dimensions={0}, metadata={op_name=\"a2a\"}\n"
    "  a2ad = f32[8,2] all-to-all-done(a2a)\n"
    "  rs = ((f32[8,2]), f32[2,2]) reduce-scatter-start(p), async_execution_thread=\"main\", "
    "replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=add, "
    "backend_config={\"collective_backend_config\":{\"is_sync\":false}}\n"
    "  rsu = ((f32[8,2]), f32[2,2]) reduce-scatter-update(rs)\n"
    "  rsd = f32[2,2] reduce-scatter-done(rsu), frontend_attributes={x=\"1\"}\n"
    "  as = ((f32[8,2], f32[8,2]), f32[8,2]) add-start(p, a2ad)\n"
    "  ad = f32[8,2] add-done(as)\n"
    "  ls = ((f32[8,2]), f32[8,2]) async-start(ad), calls=w\n"
    "  ld = all-to-all-done(ls)\n" /* shape inferred: the start's result part */
    "  ar = f32[8,2] all-reduce-start(ld), replica_groups={{0,1,2,3}}, to_apply=add\n"
    "  ard = f32[8,2] all-reduce-done(ar)\n"
    "  ROOT t = (f32[8,2], f32[2,2]) tuple(ard, rsd)\n"
    "}\n";

static void test_shorthand_reads_as_async_start_around_the_op(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse_ok(kForms);
  const kiln_hlo_instruction_t *x = wrapped_op(m, "a2a");
  assert_int_equal(x->opcode, KILN_OP_ALL_TO_ALL);
  assert_int_equal(x->channel_id, 3);
  assert_string_equal(x->replica_groups, "{{0,1,2,3}}");
  assert_int_equal(x->dimensions.n, 1);
  assert_null(kiln_hlo_instruction_raw_attr(x, "metadata"));
  const kiln_hlo_instruction_t *s = find(m, "a2a");
  assert_non_null(kiln_hlo_instruction_raw_attr(s, "metadata"));
  assert_false(s->has_dimensions);
  assert_null(s->replica_groups);
  assert_int_equal(s->channel_id, 0);
  assert_int_equal(find(m, "a2ad")->opcode, KILN_OP_ASYNC_DONE);

  x = wrapped_op(m, "rs");
  assert_int_equal(x->opcode, KILN_OP_REDUCE_SCATTER);
  assert_non_null(kiln_hlo_instruction_called(x, "to_apply"));
  assert_string_equal(kiln_hlo_instruction_called(x, "to_apply")->name, "add");
  assert_null(x->backend_config);
  s = find(m, "rs");
  assert_non_null(s->backend_config);
  assert_non_null(kiln_hlo_instruction_raw_attr(s, "async_execution_thread"));
  assert_null(kiln_hlo_instruction_called(s, "to_apply"));
  assert_int_equal(find(m, "rsu")->opcode, KILN_OP_ASYNC_UPDATE);
  assert_int_equal(find(m, "rsd")->opcode, KILN_OP_ASYNC_DONE);

  x = wrapped_op(m, "as");
  assert_int_equal(x->opcode, KILN_OP_ADD);
  assert_int_equal(x->num_operands, 2);
  /* Opcodes with their own async form keep it. */
  assert_int_equal(find(m, "ar")->opcode, KILN_OP_ALL_REDUCE_START);
  assert_int_equal(find(m, "ld")->opcode, KILN_OP_ASYNC_DONE);
  assert_true(kiln_shape_compatible(find(m, "ld")->shape, find(m, "ad")->shape));
  kiln_hlo_module_destroy(m);
}

static void test_shorthand_prints_long_form_and_round_trips(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse_ok(kForms);
  char *once = kiln_hlo_module_to_string(m);
  if (!strstr(once, "async-start(p), calls=async_wrapped,")) printf("%s\n", once);
  assert_non_null(strstr(once, "async-start(p), calls=async_wrapped,"));
  assert_non_null(strstr(once, "reduce-scatter("));
  assert_null(strstr(once, "all-to-all-start"));
  assert_null(strstr(once, "reduce-scatter-start"));
  /* The wrapped computation comes before the entry that calls it. */
  assert_true(strstr(once, "async_wrapped") < strstr(once, "ENTRY"));
  kiln_hlo_module_t *again = parse_ok(once);
  char *twice = kiln_hlo_module_to_string(again);
  if (strcmp(once, twice) != 0) printf("first:\n%s\nsecond:\n%s\n", once, twice);
  assert_string_equal(once, twice);
  assert_int_equal(again->computations.len, m->computations.len);
  assert_int_equal(kiln_hlo_module_instruction_count(again), kiln_hlo_module_instruction_count(m));
  kiln_free(twice);
  kiln_free(once);
  kiln_hlo_module_destroy(again);
  kiln_hlo_module_destroy(m);
}

typedef struct {
  const char *body; /* the entry's instructions after `p = f32[8,2] parameter(0)` */
  bool at_parse;    /* rejected by the parser (else by the verifier) */
  const char *why;  /* in the message */
} bad_case_t;

static const bad_case_t kBad[] = {
    {"  s = ((f32[8,2]), f32[8,2]) foo-start(p)\n  ROOT d = f32[8,2] foo-done(s)\n", true,
     "unknown opcode 'foo-start'"},
    {"  s = f32[8,2] all-to-all-start(p), dimensions={0}\n  ROOT d = f32[8,2] all-to-all-done(s)\n",
     true, "needs the shape ((operands...)"},
    {"  s = ((f32[8,2], f32[8,2]), f32[8,2]) all-to-all-start(p), dimensions={0}\n"
     "  ROOT d = f32[8,2] all-to-all-done(s)\n",
     true, "one operand shape per operand"},
    {"  s = all-to-all-start(p), dimensions={0}\n  ROOT d = f32[8,2] all-to-all-done(s)\n", true,
     "needs a shape"},
    {"  ROOT d = f32[8,2] all-to-all-done(p)\n", true,
     "wrapping all-to-all, but its operand 'p' is parameter"},
    {"  s = ((f32[8,2]), f32[8,2]) all-to-all-start(p), dimensions={0}\n"
     "  ROOT d = f32[2,2] reduce-scatter-done(s)\n",
     true, "its operand 's' is an async op wrapping all-to-all"},
    {"  s = ((f32[8,2]), f32[8,2]) all-to-all-start(p), dimensions={0}\n"
     "  ROOT d = f32[8,2] all-to-all-done(s, s)\n",
     true, "needs one operand"},
    {"  s = ((f32[8,2]), f32[8,2]) all-to-all-start(p), dimensions={0}, calls=w\n"
     "  ROOT d = f32[8,2] all-to-all-done(s)\n",
     true, "calls= belongs to the long form"},
    {"  s = ((f32[8,2]), f32[8,2]) all-to-all-start(p), dimensions={0}\n"
     "  ROOT d = f32[8,2] all-to-all-done(s), calls=w\n",
     true, "names calls=w"},
    {"  s = ((f32[8,2]), f32[4,2]) all-to-all-start(p), dimensions={0}\n"
     "  ROOT d = f32[4,2] all-to-all-done(s)\n",
     false, "all-to-all"},
    {"  s = ((f32[4,2]), f32[4,2]) all-to-all-start(p), dimensions={0}\n"
     "  ROOT d = f32[4,2] all-to-all-done(s)\n",
     false, "async-start operand 0 is f32[8,2]"},
    {"  s = ((f32[8,2]), f32[8,2]) all-to-all-start(p), dimensions={0}\n"
     "  ROOT d = f32[2,2] all-to-all-done(s)\n",
     false, "async-done result is f32[2,2]"},
    {"  s = ((), f32[8,2]) add-start()\n  ROOT d = f32[8,2] add-done(s)\n", false,
     "add expects 2 operands, but has 0"},
    {"  ROOT d = f32[8,2] async-done(p), calls=w\n", false,
     "must be an async-start or async-update, but is parameter"},
    {"  s = ((f32[8,2]), f32[2,2]) reduce-scatter-start(p), dimensions={0}\n"
     "  ROOT d = f32[2,2] reduce-scatter-done(s)\n",
     false, "reduce-scatter needs a to_apply= computation"},
};

static void test_malformed_shorthand_is_an_error_naming_it(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    char text[2048];
    snprintf(text, sizeof text,
             "HloModule bad, replica_count=4\n"
             "w {\n  q = f32[8,2] parameter(0)\n"
             "  ROOT x = f32[8,2] all-to-all(q), replica_groups={{0,1,2,3}}, dimensions={0}\n}\n"
             "ENTRY e {\n  p = f32[8,2] parameter(0)\n%s}\n",
             kBad[i].body);
    kiln_hlo_module_t *m = NULL;
    kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
    if (kBad[i].at_parse) {
      if (!s) printf("case %zu parsed:\n%s\n", i, text);
      assert_non_null(s);
    } else {
      if (s) printf("case %zu: %s\n", i, kiln_status_message(s));
      assert_null(s);
      s = kiln_hlo_module_verify(m);
      if (!s) printf("case %zu verified:\n%s\n", i, text);
      assert_non_null(s);
    }
    assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
    if (!strstr(kiln_status_message(s), kBad[i].why)) {
      printf("case %zu: '%s' does not say '%s'\n", i, kiln_status_message(s), kBad[i].why);
      fail();
    }
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
  }
}

/* ---- runs ---- */

#define NP 4

typedef struct {
  const char *name;
  const char *type; /* f32 / s32 */
  const char *shorthand;
  const char *sync; /* the same op written synchronously */
} run_case_t;

/* %1$s: the element type, %2$d: the participants, %3$s: the replica groups. */
static const char kA2aShort[] =
    "HloModule a2a_short, replica_count=%2$d\n"
    "ENTRY e {\n  p = %1$s[8,3] parameter(0)\n"
    "  s = ((%1$s[8,3]), %1$s[8,3]) all-to-all-start(p), replica_groups=%3$s, "
    "dimensions={0}\n"
    "  m = %1$s[8,3] multiply(p, p)\n"
    "  d = %1$s[8,3] all-to-all-done(s)\n"
    "  ROOT t = (%1$s[8,3], %1$s[8,3]) tuple(d, m)\n}\n";
static const char kA2aSync[] =
    "HloModule a2a_sync, replica_count=%2$d\n"
    "ENTRY e {\n  p = %1$s[8,3] parameter(0)\n"
    "  d = %1$s[8,3] all-to-all(p), replica_groups=%3$s, dimensions={0}\n"
    "  m = %1$s[8,3] multiply(p, p)\n"
    "  ROOT t = (%1$s[8,3], %1$s[8,3]) tuple(d, m)\n}\n";
static const char kRsShort[] =
    "HloModule rs_short, replica_count=%2$d\n"
    "sum {\n  a = %1$s[] parameter(0)\n  b = %1$s[] parameter(1)\n  ROOT s = %1$s[] add(a, b)\n}\n"
    "ENTRY e {\n  p = %1$s[8,3] parameter(0)\n"
    "  s = ((%1$s[8,3]), %1$s[4,3]) reduce-scatter-start(p), replica_groups=%3$s, "
    "dimensions={0}, to_apply=sum\n"
    "  u = ((%1$s[8,3]), %1$s[4,3]) reduce-scatter-update(s)\n"
    "  m = %1$s[8,3] multiply(p, p)\n"
    "  d = %1$s[4,3] reduce-scatter-done(u)\n"
    "  ROOT t = (%1$s[4,3], %1$s[8,3]) tuple(d, m)\n}\n";
static const char kRsSync[] =
    "HloModule rs_sync, replica_count=%2$d\n"
    "sum {\n  a = %1$s[] parameter(0)\n  b = %1$s[] parameter(1)\n  ROOT s = %1$s[] add(a, b)\n}\n"
    "ENTRY e {\n  p = %1$s[8,3] parameter(0)\n"
    "  d = %1$s[4,3] reduce-scatter(p), replica_groups=%3$s, dimensions={0}, "
    "to_apply=sum\n"
    "  m = %1$s[8,3] multiply(p, p)\n"
    "  ROOT t = (%1$s[4,3], %1$s[8,3]) tuple(d, m)\n}\n";

static kiln_hlo_module_t *parse_typed(const char *fmt, const char *type, int n,
                                      const char *groups) {
  char text[2048];
  snprintf(text, sizeof text, fmt, type, n, groups);
  return parse_ok(text);
}

/* Participant p's argument: 100 p + 7 i - 3 (distinct values, some negative). */
static kiln_literal_t **make_args(const kiln_hlo_module_t *m, int p, kiln_arena_t *arena) {
  kiln_literal_t **args = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, arena, &args, &n));
  assert_int_equal(n, 1);
  kiln_literal_t *l = args[0];
  for (int64_t i = 0; i < l->num_elements; i++) {
    int64_t v = 100 * p + 7 * i - 3;
    if (l->shape->type == KILN_F32)
      ((float *)l->data)[i] = (float)v * 0.25f;
    else
      ((int32_t *)l->data)[i] = (int32_t)v;
  }
  return args;
}

static void eval_spmd(const kiln_hlo_module_t *m, int n, kiln_literal_t **const *per,
                      kiln_arena_t *arena, kiln_literal_t **out) {
  kiln_eval_spmd_options_t o = {
      .num_replicas = n, .num_partitions = 1, .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
  kiln_status s = kiln_eval_module_spmd(m, &o, 1, (kiln_literal_t *const *const *)per, arena, out);
  if (s) printf("evaluator: %s\n", kiln_status_message(s));
  assert_null(s);
}

/* The shorthand module `short_fmt` and its synchronous form `sync_fmt` on n participants. */
static void run_case(const char *short_fmt, const char *sync_fmt, const char *type, int n,
                     const char *groups) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_hlo_module_t *m = parse_typed(short_fmt, type, n, groups);
  kiln_hlo_module_t *sync = parse_typed(sync_fmt, type, n, groups);
  kiln_literal_t **per[NP];
  for (int p = 0; p < n; p++) per[p] = make_args(m, p, &arena);
  kiln_literal_t *want[NP], *ref[NP], *got[NP];
  eval_spmd(sync, n, per, &arena, ref);
  eval_spmd(m, n, per, &arena, want);
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = g_dev;
  ro.collective_timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS;
  ro.participant_args = (kiln_literal_t *const *const *)per;
  kiln_status s = kiln_device_run_module_spmd(m, per[0], 1, n, 1, &ro, &arena, got, NULL);
  if (s) printf("host devices: %s\n", kiln_status_message(s));
  assert_null(s);
  /* The synchronous op too: the pipeline's async_collective_creator wraps it. */
  kiln_literal_t *got_sync[NP];
  s = kiln_device_run_module_spmd(sync, per[0], 1, n, 1, &ro, &arena, got_sync, NULL);
  if (s) printf("host devices, synchronous op: %s\n", kiln_status_message(s));
  assert_null(s);
  for (int p = 0; p < n; p++) {
    if (!kiln_literal_equal(want[p], ref[p]) || !kiln_literal_equal(want[p], got[p]) ||
        !kiln_literal_equal(want[p], got_sync[p])) {
      printf(
          "%s %s participant %d: shorthand evaluator %s the synchronous op, host devices %s "
          "(synchronous op: %s)\n",
          m->name, type, p, kiln_literal_equal(want[p], ref[p]) ? "equals" : "differs from",
          kiln_literal_equal(want[p], got[p]) ? "equal" : "differ",
          kiln_literal_equal(want[p], got_sync[p]) ? "equal" : "differ");
      fail();
    }
  }
  /* The exchange moved data: participant 0's collective result is not its own operand. */
  const kiln_literal_t *r0 = want[0]->tuple_elements[0];
  bool moved = r0->num_elements != per[0][0]->num_elements ||
               memcmp(r0->data, per[0][0]->data, (size_t)r0->num_elements * 4) != 0;
  assert_true(moved);
  printf(
      "%s %s, groups %s: %d host devices (shorthand and synchronous op) equal the "
      "evaluator, which equals the synchronous op\n",
      m->name, type, groups, n);
  kiln_hlo_module_destroy(sync);
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&arena);
}

static void test_all_to_all_shorthand_on_4_host_devices_f32(void **state) {
  (void)state;
  run_case(kA2aShort, kA2aSync, "f32", 4, "{{0,1,2,3}}");
}

static void test_all_to_all_shorthand_on_4_host_devices_s32(void **state) {
  (void)state;
  run_case(kA2aShort, kA2aSync, "s32", 4, "{{0,1,2,3}}");
}

static void test_all_to_all_shorthand_on_2_host_devices_f32(void **state) {
  (void)state;
  run_case(kA2aShort, kA2aSync, "f32", 2, "{}");
}

static void test_reduce_scatter_shorthand_on_4_host_devices_f32(void **state) {
  (void)state;
  run_case(kRsShort, kRsSync, "f32", 4, "{{0,2},{1,3}}");
}

static void test_reduce_scatter_shorthand_on_4_host_devices_s32(void **state) {
  (void)state;
  run_case(kRsShort, kRsSync, "s32", 4, "{{0,2},{1,3}}");
}

static void test_reduce_scatter_shorthand_on_2_host_devices_s32(void **state) {
  (void)state;
  run_case(kRsShort, kRsSync, "s32", 2, "{}");
}

/* The pipeline's async_collective_creator wraps reduce-scatter and all-to-all (no start
 * opcode) in async-start / async-done, as XLA does; the module verifies, round-trips through
 * text, and the SPMD evaluator gives the same results (test_collective_passes checks the
 * corpus; run_case above runs the wrapped ops on host devices). */
static void test_async_collective_creator_wraps_reduce_scatter_and_all_to_all(void **state) {
  (void)state;
  const char *fmts[] = {kA2aSync, kRsSync};
  const kiln_hlo_opcode_t ops[] = {KILN_OP_ALL_TO_ALL, KILN_OP_REDUCE_SCATTER};
  for (int i = 0; i < 2; i++) {
    kiln_arena_t arena;
    kiln_arena_init(&arena);
    kiln_hlo_module_t *m = parse_typed(fmts[i], "f32", NP, i ? "{{0,2},{1,3}}" : "{{0,1,2,3}}");
    kiln_literal_t **per[NP];
    for (int p = 0; p < NP; p++) per[p] = make_args(m, p, &arena);
    kiln_literal_t *before[NP], *after[NP];
    eval_spmd(m, NP, per, &arena, before);
    kiln_pass_options_t o = {.verify = 1};
    assert_null(kiln_pass_run_list(m, "async_collective_creator", &o));
    const kiln_hlo_instruction_t *start = NULL, *done = NULL;
    for (size_t k = 0; k < m->entry->instructions.len; k++) {
      const kiln_hlo_instruction_t *in = m->entry->instructions.data[k];
      assert_int_not_equal(in->opcode, ops[i]);
      if (in->opcode == KILN_OP_ASYNC_START) start = in;
      if (in->opcode == KILN_OP_ASYNC_DONE) done = in;
    }
    assert_non_null(start);
    assert_non_null(done);
    assert_ptr_equal(done->operands[0], start);
    const kiln_hlo_instruction_t *x = kiln_collective_async_wrapped(start);
    assert_non_null(x);
    assert_int_equal(x->opcode, ops[i]);
    assert_non_null(x->replica_groups);
    char *text = kiln_hlo_module_to_string(m);
    kiln_hlo_module_t *again = parse_ok(text);
    char *text2 = kiln_hlo_module_to_string(again);
    assert_string_equal(text, text2);
    kiln_free(text2);
    kiln_free(text);
    kiln_hlo_module_destroy(again);
    eval_spmd(m, NP, per, &arena, after);
    for (int p = 0; p < NP; p++) assert_true(kiln_literal_equal(before[p], after[p]));
    kiln_hlo_module_destroy(m);
    kiln_arena_destroy(&arena);
  }
}

static void test_add_start_runs_on_one_host_device(void **state) {
  (void)state;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_hlo_module_t *m = parse_ok(
      "HloModule add_short\n"
      "ENTRY e {\n  p = f32[16] parameter(0)\n  q = f32[16] multiply(p, p)\n"
      "  s = ((f32[16], f32[16]), f32[16], s32[]) add-start(p, q)\n"
      "  ROOT d = f32[16] add-done(s)\n}\n");
  kiln_literal_t **args = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  kiln_literal_t *want = NULL, *got = NULL;
  assert_null(kiln_eval_module(m, NULL, n, args, &arena, &want));
  for (int64_t i = 0; i < 16; i++) {
    float x = ((const float *)args[0]->data)[i];
    assert_true(((const float *)want->data)[i] == x + x * x);
  }
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = g_dev;
  kiln_status s = kiln_device_run_module(m, args, n, &ro, &arena, &got, NULL);
  if (s) printf("host device: %s\n", kiln_status_message(s));
  assert_null(s);
  assert_true(kiln_literal_equal(want, got));
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&arena);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shorthand_reads_as_async_start_around_the_op),
      cmocka_unit_test(test_shorthand_prints_long_form_and_round_trips),
      cmocka_unit_test(test_malformed_shorthand_is_an_error_naming_it),
      cmocka_unit_test(test_all_to_all_shorthand_on_4_host_devices_f32),
      cmocka_unit_test(test_all_to_all_shorthand_on_4_host_devices_s32),
      cmocka_unit_test(test_all_to_all_shorthand_on_2_host_devices_f32),
      cmocka_unit_test(test_reduce_scatter_shorthand_on_4_host_devices_f32),
      cmocka_unit_test(test_reduce_scatter_shorthand_on_4_host_devices_s32),
      cmocka_unit_test(test_reduce_scatter_shorthand_on_2_host_devices_s32),
      cmocka_unit_test(test_async_collective_creator_wraps_reduce_scatter_and_all_to_all),
      cmocka_unit_test(test_add_start_runs_on_one_host_device),
  };
  return kiln_run_tests(tests, host_device_setup, host_device_teardown);
}
