/* The collective passes (collective_simplifier, reduce_scatter_creator, all_gather_combiner,
 * all_reduce_combiner, reduce_scatter_combiner, async_collective_creator,
 * collective_overlap_schedule) checked against the multi-participant
 * evaluator: every participant's results before and after a pass are bit for bit the same
 * (kiln_eval_module_spmd on the world the module had before), on hand-written modules that
 * show each rewrite and its refusals, and on every multi-device corpus module the SPMD
 * evaluator runs (each module's changes per pass counted and printed). */
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
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "tests/pass_test_util.h"
#include "tests/collective_test_util.h"
#include "tests/skip_util.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"

#define MAX_PARTICIPANTS 64
#define MAX_WHILE 20000
#define MAX_TOTAL_COST 2.5e8

static const char *const kPasses[] = {"collective_simplifier",
                                      "reduce_scatter_creator",
                                      "all_gather_combiner",
                                      "all_reduce_combiner",
                                      "reduce_scatter_combiner",
                                      "async_collective_creator",
                                      "schedule",
                                      "collective_overlap_schedule"};
#define NUM_PASSES (int)(sizeof kPasses / sizeof kPasses[0])

/* Every participant's results of `m` on world R x P (the same arguments on each; the modules
 * mix in replica-id / partition-id). NULL on an evaluator error (*err set). */
static kiln_literal_t **eval_all(const kiln_hlo_module_t *m, int R, int P, kiln_literal_t **args,
                                 int n, kiln_arena_t *out, kiln_status *err) {
  kiln_literal_t *const *per[MAX_PARTICIPANTS];
  for (int i = 0; i < R * P; i++) per[i] = args;
  kiln_literal_t **results = kiln_arena_alloc(out, sizeof *results * (size_t)(R * P));
  kiln_eval_spmd_options_t o = {
      .num_replicas = R, .num_partitions = P, .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
  o.base.rng_seed = 42;
  o.base.max_while_iterations = MAX_WHILE;
  *err = kiln_eval_module_spmd(m, &o, n, per, out, results);
  return *err ? NULL : results;
}

/* The module printed and parsed again (a copy the passes may change). */
static kiln_hlo_module_t *copy_module(const kiln_hlo_module_t *m) {
  char *text = kiln_hlo_module_to_string(m);
  kiln_hlo_module_t *c = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &c);
  kiln_free(text);
  if (s) fail_msg("reparse: %s", kiln_status_message(s));
  kiln_pipeline_lift_parse_limit(c);
  return c;
}

/* Runs pass list `list` on `text` and checks every participant's results are unchanged.
 * Returns the rewritten module (caller destroys). */
static kiln_hlo_module_t *same_on_participants(const char *text, const char *list,
                                               const kiln_pass_options_t *popts) {
  kiln_hlo_module_t *m = pt_parse(text);
  kiln_pipeline_lift_parse_limit(m);
  int R = 1, P = 1;
  kiln_status s = kiln_eval_spmd_world_size(m, &R, &P);
  if (s) fail_msg("world: %s", kiln_status_message(s));
  assert_true(R * P <= MAX_PARTICIPANTS);
  kiln_arena_t args_arena, a0, a1;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t **args = NULL;
  int n = 0;
  s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
  if (s) fail_msg("fake args: %s", kiln_status_message(s));
  kiln_literal_t **before = eval_all(m, R, P, args, n, &a0, &s);
  if (s) fail_msg("eval before: %s", kiln_status_message(s));
  kiln_pass_options_t o = {.verify = 1};
  if (popts) o = *popts, o.verify = 1;
  s = kiln_pass_run_list(m, list, &o);
  if (s) fail_msg("passes '%s': %s", list, kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify after '%s': %s", list, kiln_status_message(s));
  kiln_literal_t **after = eval_all(m, R, P, args, n, &a1, &s);
  if (s) fail_msg("eval after '%s': %s", list, kiln_status_message(s));
  for (int i = 0; i < R * P; i++)
    if (!pt_literal_bits_equal(before[i], after[i])) {
      char *t = pt_comp_text(m, NULL);
      print_error("after '%s':\n%s\n", list, t);
      kiln_free(t);
      fail_msg("participant %d differs after '%s'", i, list);
    }
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  kiln_arena_destroy(&args_arena);
  return m;
}

/* Runs `list` on `text` (same results on every participant) and expects `count` instructions
 * of opcode `op` after it. */
static void expect_count(const char *text, const char *list, const kiln_pass_options_t *popts,
                         kiln_hlo_opcode_t op, int count) {
  kiln_hlo_module_t *m = same_on_participants(text, list, popts);
  assert_int_equal(pt_count(m, op), count);
  kiln_hlo_module_destroy(m);
}

#define ADD_F32                                                                                 \
  "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"  \
  "add2 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(b, a)\n}\n" \
  "mul {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] multiply(a, "    \
  "b)\n}\n"

/* Participant-dependent data: x + replica-id (as f32) broadcast to x's shape. */
#define MIXED(name, shape, param, dims)       \
  "  " name "_p = " shape " parameter(" param \
  ")\n"                                       \
  "  " name                                   \
  "_r = f32[] convert(rid)\n"                 \
  "  " name "_b = " shape " broadcast(" name  \
  "_r), dimensions={}\n"                      \
  "  " name " = " shape " add(" name "_p, " name "_b)\n"

static void test_single_participant_collectives_are_removed(void **state) {
  (void)state;
  const char *text =
      "HloModule m, replica_count=4\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[8]", "0", "")
      "  ar = f32[8] all-reduce(x), replica_groups={{0},{1},{2},{3}}, to_apply=add\n"
      "  ag = f32[8] all-gather(ar), replica_groups=[4,1]<=[4], dimensions={0}\n"
      "  rs = f32[8] reduce-scatter(ag), replica_groups={{0},{1},{2},{3}}, dimensions={0}, to_apply=add\n"
      "  a2a = f32[8] all-to-all(rs), replica_groups={{0},{1},{2},{3}}, dimensions={0}\n"
      "  keep = f32[8] all-reduce(a2a), replica_groups={{0,1},{2,3}}, to_apply=add\n"
      "  all = f32[8] all-reduce(keep), replica_groups={}, to_apply=add\n"
      "  ROOT t = (f32[8], f32[8]) tuple(all, x)\n}\n";
  kiln_hlo_module_t *m = same_on_participants(text, "collective_simplifier,dce", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_GATHER), 0);
  assert_int_equal(pt_count(m, KILN_OP_REDUCE_SCATTER), 0);
  assert_int_equal(pt_count(m, KILN_OP_ALL_TO_ALL), 0);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 2); /* {{0,1},{2,3}} and {} stay */
  kiln_hlo_module_destroy(m);

  /* A channel without use_global_device_ids spans every partition of the listed replicas:
   * {{0},{1}} is two participants each when num_partitions is 2, so it stays; with
   * use_global_device_ids the ids are participants, and it goes. */
  const char *cross =
      "HloModule m, replica_count=2, num_partitions=2\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[4]", "0", "")
      "  a = f32[4] all-reduce(x), channel_id=1, replica_groups={{0},{1}}, to_apply=add\n"
      "  ROOT b = f32[4] all-reduce(a), channel_id=2, replica_groups={{0},{1},{2},{3}}, "
      "use_global_device_ids=true, to_apply=add\n}\n";
  m = same_on_participants(cross, "collective_simplifier", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 1);
  assert_string_equal(m->entry->root->name, "a");
  kiln_hlo_module_destroy(m);

  /* The world stays what the removed collectives named: replica-id still runs on 4. */
  const char *only = "HloModule m\n" ADD_F32 "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED(
      "x", "f32[4]", "0",
      "") "  ROOT a = f32[4] all-reduce(x), replica_groups={{0},{1},{2},{3}}, to_apply=add\n}\n";
  m = same_on_participants(only, "collective_simplifier", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 0);
  int R = 0, P = 0;
  assert_null(kiln_eval_spmd_world_size(m, &R, &P));
  assert_int_equal(R, 4);
  kiln_hlo_module_destroy(m);
}

static void test_all_reduce_combiner_combines_independent_all_reduces(void **state) {
  (void)state;
  /* x, y, z independent (add, add with swapped parameters: the same reduction), w reads
   * x's result: x, y, z become one; w and the multiply-reduced v and the one over other groups
   * stay alone. */
  const char *text =
      "HloModule m, replica_count=4\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("p", "f32[16]", "0", "")
      MIXED("q", "f32[3,5]", "1", "")
      "  x = f32[16] all-reduce(p), replica_groups={{0,1,2,3}}, to_apply=add\n"
      "  y = f32[3,5] all-reduce(q), replica_groups={{0,1,2,3}}, to_apply=add2\n"
      "  n = f32[16] negate(p)\n"
      "  z = f32[16] all-reduce(n), replica_groups={{0,1,2,3}}, to_apply=add\n"
      "  w = f32[16] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=add\n"
      "  v = f32[16] all-reduce(p), replica_groups={{0,1,2,3}}, to_apply=mul\n"
      "  u = f32[16] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add\n"
      "  ROOT t = (f32[16], f32[3,5], f32[16], f32[16], f32[16], f32[16]) tuple(x, y, z, w, v, u)\n}\n";
  kiln_hlo_module_t *m = same_on_participants(text, "all_reduce_combiner,tuple_simplify,dce", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 4);
  int variadic = 0;
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = m->entry->instructions.data[i];
    if (in->opcode == KILN_OP_ALL_REDUCE && kiln_shape_is_tuple(in->shape)) {
      variadic++;
      assert_int_equal(in->num_operands, 3);
    }
  }
  assert_int_equal(variadic, 1);
  kiln_hlo_module_destroy(m);

  /* The size threshold: 64 bytes takes x (64 B) alone, and nothing combines. */
  kiln_pass_options_t o = {.all_reduce_combine_threshold_bytes = 64};
  expect_count(text, "all_reduce_combiner", &o, KILN_OP_ALL_REDUCE, 6);
  /* 124 bytes: x (64) and y (60) fit together, then z starts the next group alone. */
  o.all_reduce_combine_threshold_bytes = 124;
  expect_count(text, "all_reduce_combiner", &o, KILN_OP_ALL_REDUCE, 5);
  o.all_reduce_combine_threshold_bytes = -1; /* off */
  expect_count(text, "all_reduce_combiner", &o, KILN_OP_ALL_REDUCE, 6);

  /* Two chains crossing each other: combining one pair makes the other pair depend on
   * itself, so only one pair combines (no cycle, the verifier and evaluator agree). */
  const char *cross =
      "HloModule m, replica_count=2\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("p", "f32[4]", "0", "")
      "  a1 = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add\n"
      "  b1 = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=mul\n"
      "  a2 = f32[4] all-reduce(b1), replica_groups={{0,1}}, to_apply=add\n"
      "  b2 = f32[4] all-reduce(a1), replica_groups={{0,1}}, to_apply=mul\n"
      "  ROOT t = (f32[4], f32[4]) tuple(a2, b2)\n}\n";
  expect_count(cross, "all_reduce_combiner", NULL, KILN_OP_ALL_REDUCE, 3);
}

static void test_all_gather_and_reduce_scatter_combiners(void **state) {
  (void)state;
  const char *text =
      "HloModule m, replica_count=4\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("p", "f32[2,3]", "0", "")
      MIXED("q", "f32[8,2]", "1", "")
      "  g0 = f32[8,3] all-gather(p), replica_groups={{0,1,2,3}}, dimensions={0}\n"
      "  g1 = f32[32,2] all-gather(q), replica_groups={{0,1,2,3}}, dimensions={0}\n"
      "  g2 = f32[2,12] all-gather(p), replica_groups={{0,1,2,3}}, dimensions={1}\n"
      "  s0 = f32[2,2] reduce-scatter(q), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=add\n"
      "  s1 = f32[2,2] reduce-scatter(q), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=add2\n"
      "  s2 = f32[8,1] reduce-scatter(q), replica_groups={{0,1},{2,3}}, dimensions={1}, to_apply=add\n"
      "  ROOT t = (f32[8,3], f32[32,2], f32[2,12], f32[2,2], f32[2,2], f32[8,1]) tuple(g0, g1, g2, s0, s1, s2)\n}\n";
  kiln_hlo_module_t *m = same_on_participants(
      text, "all_gather_combiner,reduce_scatter_combiner,tuple_simplify", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_GATHER), 2);     /* g0+g1, g2 (another dim) */
  assert_int_equal(pt_count(m, KILN_OP_REDUCE_SCATTER), 2); /* s0+s1, s2 (other groups) */
  kiln_hlo_module_destroy(m);
}

/* all-reduce then each participant's share by a table lookup on partition-id (as XLA's SPMD
 * partitioner writes it), by replica-id * size, and refusals. */
static void test_reduce_scatter_creator(void **state) {
  (void)state;
  const char *table =
      "HloModule m, num_partitions=4\n" ADD_F32
      "ENTRY e {\n  rid = u32[] partition-id()\n" MIXED("x", "f32[3,16]", "0", "")
      "  ar = f32[3,16] all-reduce(x), channel_id=1, replica_groups=[1,4]<=[4], "
      "use_global_device_ids=true, to_apply=add\n"
      "  tbl = s32[4] constant({0, 4, 8, 12})\n  pid = u32[] partition-id()\n"
      "  ds1 = s32[1] dynamic-slice(tbl, pid), dynamic_slice_sizes={1}\n"
      "  off = s32[] reshape(ds1)\n  zero = s32[] constant(0)\n"
      "  ROOT s = f32[3,4] dynamic-slice(ar, zero, off), dynamic_slice_sizes={3,4}\n}\n";
  kiln_hlo_module_t *m = same_on_participants(table, "reduce_scatter_creator,dce", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 0);
  assert_int_equal(pt_count(m, KILN_OP_REDUCE_SCATTER), 1);
  assert_int_equal(m->entry->root->opcode, KILN_OP_REDUCE_SCATTER);
  kiln_hlo_module_destroy(m);

  /* Two groups of two replicas: the share is (replica-id % 2) * 4 rows. */
  const char *groups =
      "HloModule m, replica_count=4\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[8,2]", "0", "")
      "  ar = f32[8,2] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add\n"
      "  two = u32[] constant(2)\n  four = u32[] constant(4)\n"
      "  rank = u32[] remainder(rid, two)\n  off = u32[] multiply(rank, four)\n"
      "  zero = u32[] constant(0)\n"
      "  ROOT s = f32[4,2] dynamic-slice(ar, off, zero), dynamic_slice_sizes={4,2}\n}\n";
  expect_count(groups, "reduce_scatter_creator,dce", NULL, KILN_OP_REDUCE_SCATTER, 1);

  /* Refused: the groups are {0,2},{1,3} so rank = replica-id / 2, not % 2; a second user;
   * an index from a parameter. */
  const char *wrong_rank =
      "HloModule m, replica_count=4\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[8,2]", "0", "")
      "  ar = f32[8,2] all-reduce(x), replica_groups={{0,2},{1,3}}, to_apply=add\n"
      "  two = u32[] constant(2)\n  four = u32[] constant(4)\n"
      "  rank = u32[] remainder(rid, two)\n  off = u32[] multiply(rank, four)\n"
      "  zero = u32[] constant(0)\n"
      "  ROOT s = f32[4,2] dynamic-slice(ar, off, zero), dynamic_slice_sizes={4,2}\n}\n";
  expect_count(wrong_rank, "reduce_scatter_creator", NULL, KILN_OP_REDUCE_SCATTER, 0);
  const char *two_users =
      "HloModule m, replica_count=2\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[8]", "0", "")
      "  ar = f32[8] all-reduce(x), replica_groups={{0,1}}, to_apply=add\n"
      "  four = u32[] constant(4)\n  off = u32[] multiply(rid, four)\n"
      "  s = f32[4] dynamic-slice(ar, off), dynamic_slice_sizes={4}\n"
      "  ROOT t = (f32[4], f32[8]) tuple(s, ar)\n}\n";
  expect_count(two_users, "reduce_scatter_creator", NULL, KILN_OP_REDUCE_SCATTER, 0);
  const char *param_index =
      "HloModule m, replica_count=2\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[8]", "0", "")
      "  ar = f32[8] all-reduce(x), replica_groups={{0,1}}, to_apply=add\n"
      "  off = u32[] parameter(1)\n"
      "  ROOT s = f32[4] dynamic-slice(ar, off), dynamic_slice_sizes={4}\n}\n";
  expect_count(param_index, "reduce_scatter_creator", NULL, KILN_OP_REDUCE_SCATTER, 0);
}

/* Reducers the runtime does not fold become an all-gather and a rank-order chain of maps,
 * bit-identical to the evaluator's fold on every participant (same_on_participants): an
 * order-sensitive all-reduce reducer 2a + b over groups {0,2},{1,3}; XLA's "keep the first"
 * reduce-scatter reducer (the corpus's import_emit_stablehlo#130) in cross-replica-and-
 * partition mode (groups of 2 replicas x 2 partitions); a plain add stays for the runtime. */
static void test_collective_reducer_expander_folds_any_reducer_in_rank_order(void **state) {
  (void)state;
  const char *ar =
      "HloModule m, replica_count=4\n"
      "twice_plus {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  a2 = f32[] add(a, a)\n  ROOT s = f32[] add(a2, b)\n}\n"
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[3,5]", "0", "")
      "  ROOT ar = f32[3,5] all-reduce(x), replica_groups={{0,2},{1,3}}, "
      "to_apply=twice_plus\n}\n";
  kiln_hlo_module_t *m = same_on_participants(ar, "collective_reducer_expander", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 0);
  assert_int_equal(pt_count(m, KILN_OP_ALL_GATHER), 1);
  assert_int_equal(pt_count(m, KILN_OP_MAP), 1);
  kiln_hlo_module_destroy(m);
  const char *rs =
      "HloModule m, replica_count=2, num_partitions=2\n"
      "first {\n  ROOT a = f32[] parameter(0)\n  b = f32[] parameter(1)\n}\n"
      "ENTRY e {\n  r = u32[] replica-id()\n  p = u32[] partition-id()\n"
      "  two = u32[] constant(2)\n  r2 = u32[] multiply(r, two)\n  rid = u32[] add(r2, p)\n"
      MIXED("x", "f32[8,2]", "0", "")
      "  ROOT rs = f32[2,2] reduce-scatter(x), channel_id=1, replica_groups={{0,1}}, "
      "dimensions={0}, to_apply=first\n}\n";
  m = same_on_participants(rs, "collective_reducer_expander", NULL);
  assert_int_equal(pt_count(m, KILN_OP_REDUCE_SCATTER), 0);
  assert_int_equal(pt_count(m, KILN_OP_ALL_GATHER), 1);
  assert_int_equal(pt_count(m, KILN_OP_MAP), 3);
  kiln_hlo_module_destroy(m);
  const char *plain =
      "HloModule m, replica_count=2\n" ADD_F32 "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED(
          "x", "f32[4]", "0",
          "") "  ROOT ar = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add\n}\n";
  expect_count(plain, "collective_reducer_expander", NULL, KILN_OP_ALL_REDUCE, 1);
}

/* Position of the nth instruction of opcode `op` in the entry's order (-1: none). */
static int entry_pos(const kiln_hlo_module_t *m, kiln_hlo_opcode_t op, int nth) {
  int seen = 0;
  for (size_t i = 0; i < m->entry->instructions.len; i++)
    if (m->entry->instructions.data[i]->opcode == op && seen++ == nth) return (int)i;
  return -1;
}

/* all-reduce, all-gather and collective-permute become -start/-done pairs and reduce-scatter
 * an async-start/-done around it (same results on every participant), and after the
 * scheduler each start is issued before, and each done after, the compute that does not
 * depend on it. */
static void test_async_collectives_overlap_independent_compute(void **state) {
  (void)state;
  const char *text =
      "HloModule m, replica_count=4\n" ADD_F32
      "ENTRY e {\n  rid = u32[] replica-id()\n" MIXED("x", "f32[64]", "0", "")
      MIXED("y", "f32[64]", "1", "")
      "  ar = f32[64] all-reduce(x), replica_groups={{0,1,2,3}}, to_apply=add\n"
      "  ag = f32[256] all-gather(x), replica_groups={{0,1,2,3}}, dimensions={0}\n"
      "  cp = f32[64] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n"
      "  y1 = f32[64] multiply(y, y)\n  y2 = f32[64] exponential(y1)\n  y3 = f32[64] sine(y2)\n"
      "  s = f32[64] add(ar, y3)\n  t = f32[64] add(s, cp)\n"
      "  rs = f32[16] reduce-scatter(t), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=add\n"
      "  ROOT r = (f32[64], f32[256], f32[16]) tuple(t, ag, rs)\n}\n";
  kiln_hlo_module_t *m = same_on_participants(
      text, "async_collective_creator,schedule,collective_overlap_schedule", NULL);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 0);
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE_START), 1);
  assert_int_equal(pt_count(m, KILN_OP_ALL_GATHER_START), 1);
  assert_int_equal(pt_count(m, KILN_OP_COLLECTIVE_PERMUTE_START), 1);
  /* No start opcode of its own: wrapped, as XLA does. */
  assert_int_equal(pt_count(m, KILN_OP_ASYNC_START), 1);
  assert_int_equal(pt_count(m, KILN_OP_ASYNC_DONE), 1);
  int rstart = entry_pos(m, KILN_OP_ASYNC_START, 0);
  const kiln_hlo_computation_t *rc =
      kiln_hlo_instruction_called(m->entry->instructions.data[rstart], "calls");
  assert_non_null(rc);
  assert_int_equal(rc->root->opcode, KILN_OP_REDUCE_SCATTER);
  assert_int_equal(entry_pos(m, KILN_OP_REDUCE_SCATTER, 0), -1);
  assert_true(rstart < entry_pos(m, KILN_OP_ASYNC_DONE, 0));
  int start = entry_pos(m, KILN_OP_ALL_REDUCE_START, 0),
      done = entry_pos(m, KILN_OP_ALL_REDUCE_DONE, 0);
  int exp = entry_pos(m, KILN_OP_EXP, 0), sine = entry_pos(m, KILN_OP_SIN, 0);
  assert_true(start >= 0 && done > start);
  assert_true(start < exp && sine < done); /* y's chain runs while the all-reduce is in flight */
  int pstart = entry_pos(m, KILN_OP_COLLECTIVE_PERMUTE_START, 0);
  int pdone = entry_pos(m, KILN_OP_COLLECTIVE_PERMUTE_DONE, 0);
  assert_true(pstart < exp && sine < pdone);
  kiln_hlo_module_destroy(m);
}

/* ---- the corpus ---- */

typedef struct {
  int multi, checked, failed, changed[NUM_PASSES];
  int collectives_before, collectives_after;
  kiln_strbuf_t out;
} corpus_stats_t;

static int count_collectives(const kiln_hlo_module_t *m) {
  int n = 0;
  for (size_t c = 0; c < m->computations.len; c++)
    for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++) {
      kiln_hlo_opcode_t op = m->computations.data[c]->instructions.data[i]->opcode;
      n += op == KILN_OP_ALL_REDUCE || op == KILN_OP_ALL_GATHER || op == KILN_OP_REDUCE_SCATTER ||
           op == KILN_OP_ALL_TO_ALL || op == KILN_OP_COLLECTIVE_BROADCAST ||
           op == KILN_OP_ALL_REDUCE_START || op == KILN_OP_ALL_GATHER_START;
    }
  return n;
}

static void corpus_fail(corpus_stats_t *st, const char *name, const char *what, kiln_status s) {
  st->failed++;
  kiln_strbuf_printf(&st->out, "  FAIL %s: %s: %.400s\n", name, what,
                     s ? kiln_status_message(s) : "");
  kiln_status_free(s);
}

static void corpus_module(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                          int index, kiln_status error) {
  corpus_stats_t *st = ctx;
  if (error) return;
  bool multi;
  const char *skip;
  kiln_corpus_multi_device_module(*mp, path, index, &multi, &skip);
  if (!multi || skip || !kiln_corpus_sampled(name)) return;
  st->multi++;
  const kiln_hlo_module_t *m = *mp;
  int R = 1, P = 1;
  kiln_status s = kiln_eval_spmd_world_size(m, &R, &P);
  if (s || R * P > MAX_PARTICIPANTS) {
    kiln_status_free(s);
    return;
  }
  char why[160];
  /* Under ASan (several times slower, and the corpus sampled) a twentieth of the bound keeps
   * the test within CI's budget; the normal build checks every module under the full one. */
  double bound = MAX_TOTAL_COST / (kiln_corpus_under_asan() ? 20 : 1);
  if (kiln_corpus_eval_too_costly(m, bound / (R * P), why, sizeof why)) return;
  kiln_arena_t args_arena, a0, a1;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_hlo_module_t *c = NULL;
  s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
  kiln_literal_t **before = s ? NULL : eval_all(m, R, P, args, n, &a0, &s);
  if (s) { /* no oracle: test_corpus_eval_spmd names these */
    kiln_status_free(s);
    goto done;
  }
  st->checked++;
  c = copy_module(m);
  int coll_before = count_collectives(c);
  kiln_strbuf_t line = {0};
  for (int p = 0; p < NUM_PASSES; p++) {
    bool changed = false;
    kiln_pass_options_t o = {.verify = 1};
    const kiln_pass_t *pass = kiln_pass_find(kPasses[p]);
    assert_non_null(pass);
    s = pass->run(c, &o, &changed);
    if (!s) s = kiln_hlo_module_verify(c);
    if (s) {
      corpus_fail(st, name, kPasses[p], s);
      kiln_strbuf_free(&line);
      goto done;
    }
    if (changed) {
      st->changed[p]++;
      kiln_strbuf_printf(&line, " %s", kPasses[p]);
    }
  }
  kiln_literal_t **after = eval_all(c, R, P, args, n, &a1, &s);
  if (s) {
    corpus_fail(st, name, "eval after", s);
  } else {
    for (int i = 0; i < R * P; i++)
      if (!pt_literal_bits_equal(before[i], after[i])) {
        corpus_fail(st, name, "results differ",
                    kiln_status_make(KILN_INTERNAL, "participant %d", i));
        break;
      }
  }
  int coll_after = count_collectives(c);
  st->collectives_before += coll_before;
  st->collectives_after += coll_after;
  if (line.len)
    kiln_strbuf_printf(&st->out, "  %s: %d x %d, collectives %d -> %d:%s\n", name, R, P,
                       coll_before, coll_after, kiln_strbuf_cstr(&line));
  kiln_strbuf_free(&line);
done:
  if (c) kiln_hlo_module_destroy(c);
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  kiln_arena_destroy(&args_arena);
}

static void test_corpus_multi_device_modules_same_results_after_collective_passes(void **state) {
  (void)state;
  corpus_stats_t st = {0};
  kiln_status s = kiln_corpus_for_each_whole_module(NULL, corpus_module, &st);
  if (s) {
    printf("SKIP: corpus not readable: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_strbuf_free(&st.out);
    KILN_SKIPPED();
    return;
  }
  printf("%s", kiln_strbuf_cstr(&st.out));
  printf(
      "corpus multi-device modules: %d checked against the SPMD evaluator (of %d eligible), "
      "%d differ; collectives %d -> %d; modules changed per pass:",
      st.checked, st.multi, st.failed, st.collectives_before, st.collectives_after);
  for (int p = 0; p < NUM_PASSES; p++) printf(" %s %d", kPasses[p], st.changed[p]);
  printf("\n");
  kiln_strbuf_free(&st.out);
  assert_int_equal(st.failed, 0);
  if (kiln_corpus_sampling()) return;
  /* The evaluable part of the corpus holds combinable all-reduces (mnist's six, alpa's). */
  assert_true(st.changed[3] > 0);
  assert_true(st.collectives_after < st.collectives_before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_participant_collectives_are_removed),
      cmocka_unit_test(test_all_reduce_combiner_combines_independent_all_reduces),
      cmocka_unit_test(test_all_gather_and_reduce_scatter_combiners),
      cmocka_unit_test(test_reduce_scatter_creator),
      cmocka_unit_test(test_collective_reducer_expander_folds_any_reducer_in_rank_order),
      cmocka_unit_test(test_async_collectives_overlap_independent_compute),
      cmocka_unit_test(test_corpus_multi_device_modules_same_results_after_collective_passes),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
