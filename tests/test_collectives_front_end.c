/* Collectives in the HLO front end: the three replica-group forms (explicit, iota with
 * transpose, mesh axes) expand to the groups XLA means; every collective and its async
 * pair, variadic and scalar forms parse and verify; group-size mismatches are rejected with
 * a message naming the op; and the multi-device modules of the corpus (xla/ + real/) are
 * counted: every one parses and verifies (or is a known-invalid module rejected for its
 * stated reason). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/replica_groups.h"
#include "skip_util.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

/* Asserts `text` expands to `num_groups` groups whose ids, concatenated, are `want`. */
static void expect_groups(const char *text, int num_groups, int group_size, const int64_t *want,
                          int n) {
  kiln_hlo_replica_groups_t g;
  kiln_status s = kiln_hlo_replica_groups_parse(text, &g);
  if (s) fail_msg("%s: %s", text, kiln_status_message(s));
  assert_int_equal(g.num_groups, num_groups);
  assert_int_equal(g.group_size, group_size);
  assert_int_equal(g.offsets[num_groups], n);
  for (int i = 0; i < n; i++)
    if (g.ids[i] != want[i])
      fail_msg("%s: id %d is %lld, want %lld", text, i, (long long)g.ids[i], (long long)want[i]);
  kiln_hlo_replica_groups_free(&g);
}

static void expect_groups_error(const char *text, const char *part) {
  kiln_hlo_replica_groups_t g;
  kiln_status s = kiln_hlo_replica_groups_parse(text, &g);
  if (!s) fail_msg("%s was accepted", text);
  if (!strstr(kiln_status_message(s), part))
    fail_msg("%s: message '%s' lacks '%s'", text, kiln_status_message(s), part);
  assert_null(g.ids);
  kiln_status_free(s);
}

static void test_replica_group_forms_expand(void **state) {
  (void)state;
  expect_groups("{}", 0, -1, NULL, 0);
  expect_groups("{{0,1},{2,3}}", 2, 2, (const int64_t[]){0, 1, 2, 3}, 4);
  expect_groups("{{0, 2, 4, 6}, {1, 3, 5, 7}}", 2, 4, (const int64_t[]){0, 2, 4, 6, 1, 3, 5, 7}, 8);
  expect_groups("{{0,2,4},{1,3,5,6}}", 2, -1, (const int64_t[]){0, 2, 4, 1, 3, 5, 6}, 7);
  expect_groups("[2,4]<=[8]", 2, 4, (const int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
  expect_groups("[1,4]<=[4]", 1, 4, (const int64_t[]){0, 1, 2, 3}, 4);
  /* iota(8) reshaped to [4,2], transposed to [2,4]: rows are the columns of [4,2]. */
  expect_groups("[2,4]<=[4,2]T(1,0)", 2, 4, (const int64_t[]){0, 2, 4, 6, 1, 3, 5, 7}, 8);
  expect_groups("[4,2]<=[2,2,2]T(2,1,0)", 4, 2, (const int64_t[]){0, 4, 2, 6, 1, 5, 3, 7}, 8);
  expect_groups("mesh['a'=2,'b'=2] {'b'}", 2, 2, (const int64_t[]){0, 1, 2, 3}, 4);
  expect_groups("mesh['a'=2,'b'=2] {'a'}", 2, 2, (const int64_t[]){0, 2, 1, 3}, 4);
  expect_groups("mesh['axis_0'=4,'axis_1'=2] {'axis_0'}", 2, 4,
                (const int64_t[]){0, 2, 4, 6, 1, 3, 5, 7}, 8);
  expect_groups("mesh['a'=2,'b'=3] {'b','a'}", 1, 6, (const int64_t[]){0, 3, 1, 4, 2, 5}, 6);
  /* Sub-axes (XLA's AxisRef 'a':(pre)size): an axis of 8 seen as [pre][size][8 / (pre *
   * size)], grouped over the middle. */
  expect_groups("mesh['a'=8] {'a':(1)2}", 4, 2, (const int64_t[]){0, 4, 1, 5, 2, 6, 3, 7}, 8);
  expect_groups("mesh['a'=8] {'a':(2)2}", 4, 2, (const int64_t[]){0, 2, 1, 3, 4, 6, 5, 7}, 8);
  expect_groups("mesh['a'=8] {'a':(4)2}", 4, 2, (const int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
  /* two sub-axes of one axis, in listing order (the first major) */
  expect_groups("mesh['a'=8] {'a':(1)2,'a':(4)2}", 2, 4, (const int64_t[]){0, 1, 4, 5, 2, 3, 6, 7},
                8);
  expect_groups("mesh['a'=8] {'a':(4)2, 'a':(1)2}", 2, 4, (const int64_t[]){0, 4, 1, 5, 2, 6, 3, 7},
                8);
  /* a sub-axis of y (the minor half of 4) then all of x: id = 4x + 2 y0 + y1 */
  expect_groups("mesh['x'=2,'y'=4] {'y':(2)2,'x'}", 2, 4, (const int64_t[]){0, 4, 1, 5, 2, 6, 3, 7},
                8);
  /* The mesh's own device order (XLA's device_ids): positions are row-major, the device at
   * each position is listed. Positions (x,y) = (0,0) (0,1) (1,0) (1,1) hold 3 1 0 2. */
  expect_groups("mesh['x'=2,'y'=2], device_ids=(3,1,0,2) {'y'}", 2, 2,
                (const int64_t[]){3, 1, 0, 2}, 4);
  expect_groups("mesh['x'=2,'y'=2], device_ids=(3,1,0,2) {'x'}", 2, 2,
                (const int64_t[]){3, 0, 1, 2}, 4);
  /* an iota device array, as XLA prints it (names unquoted): iota(8) as [4,2] transposed is
   * 0 2 4 6 1 3 5 7 over the [2,4] mesh; grouped over x: {0,1},{2,3},{4,5},{6,7} */
  expect_groups("mesh[x=2,y=4], device_ids=([4,2]T(1,0)) {x}", 4, 2,
                (const int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
  expect_groups("mesh['x'=2,'y'=4], device_ids=([2,4]<=[4,2]T(1,0)) {'y'}", 2, 4,
                (const int64_t[]){0, 2, 4, 6, 1, 3, 5, 7}, 8);
  /* a sub-axis over a permuted mesh: positions {0,2},{1,3} hold devices {2,3},{0,1} */
  expect_groups("mesh['a'=4], device_ids=(2,0,3,1) {'a':(1)2}", 2, 2, (const int64_t[]){2, 3, 0, 1},
                4);
  /* no axes listed: each device is a group of its own */
  expect_groups("mesh['a'=2] {}", 2, 1, (const int64_t[]){0, 1}, 2);
  expect_groups("mesh['a'=2], device_ids=(1,0) {}", 2, 1, (const int64_t[]){1, 0}, 2);
  /* XLA's printed example: devices iota(64) as [4,16] transposed, grouped over b and d */
  expect_groups("mesh[a=2,b=4,c=4,d=2], device_ids=([4,16]T(1,0)) {b,d}", 8, 8,
                (const int64_t[]){0, 16, 2,  18, 4,  20, 6,  22, 32, 48, 34, 50, 36, 52, 38, 54,
                                  1, 17, 3,  19, 5,  21, 7,  23, 33, 49, 35, 51, 37, 53, 39, 55,
                                  8, 24, 10, 26, 12, 28, 14, 30, 40, 56, 42, 58, 44, 60, 46, 62,
                                  9, 25, 11, 27, 13, 29, 15, 31, 41, 57, 43, 59, 45, 61, 47, 63},
                64);
}

static void test_replica_group_errors_name_the_problem(void **state) {
  (void)state;
  expect_groups_error("{{0,1},{1,2}}", "id 1 appears more than once");
  expect_groups_error("[2,4]<=[6]", "need 8 ids, the iota has 6");
  expect_groups_error("[2,4]<=[4,2]T(0,0)", "not a permutation");
  expect_groups_error("[2,4]<=[4,2]T(1,0,2)", "transpose has 3 dimensions");
  expect_groups_error("{{0,-1}}", "non-negative integer");
  expect_groups_error("{{0,16777217}}", "a non-negative integer up to 16777216");
  expect_groups_error("{{0,1}", "'}'");
  expect_groups_error("mesh['a'=2] {'c'}", "axis 'c' is not a mesh axis");
  expect_groups_error("groups", "expected '{', '[' or mesh");
  expect_groups_error("mesh['a'=8] {'a':(1)8}", "the size must be 2 or more and below");
  expect_groups_error("mesh['a'=8] {'a':(3)2}", "pre-size x size must divide it");
  expect_groups_error("mesh['a'=8] {'a':(2)1}", "the size must be 2 or more");
  expect_groups_error("mesh['a'=8] {'a':(1)4,'a':(2)2}", "its sub-axes overlap");
  expect_groups_error("mesh['a'=8] {'a','a':(1)2}", "listed twice");
  expect_groups_error("mesh['a'=24] {'a':(2)2,'a':(6)2}", "do not nest");
  expect_groups_error("mesh['a'=8] {'a':1}", "a sub-axis :(pre-size)size");
  expect_groups_error("mesh['a'=2,'b'=2], device_ids=(0,1,1,2) {'a'}",
                      "device_ids must hold each of 0..3 once; 1 is out of range or repeated");
  expect_groups_error("mesh['a'=2,'b'=2], device_ids=(0,1,2) {'a'}",
                      "device_ids has 3 ids, the mesh 4 devices");
  expect_groups_error("mesh['a'=2,'b'=2], device_ids=(0,1,2,4) {'a'}", "4 is out of range");
  expect_groups_error("mesh['a'=2,'b'=2], device_ids=([8]) {'a'}",
                      "device_ids' iota needs 1 to 16 dimensions holding the mesh's 4 devices");
  expect_groups_error("mesh['a'=2,'b'=2], device_ids=([2,4]<=[8]) {'a'}",
                      "device_ids' shape holds 8 ids, the mesh 4");
  expect_groups_error("mesh['a'=2,'b'=2], device_ids=([2,2]T(0,0)) {'a'}", "not a permutation");
  expect_groups_error(
      "mesh['a'=2,'b'=2], device_ids=([16777216,16777216,16777216,16777216]<=[4]) {'a'}",
      "device_ids' shape holds more than 4 ids, the mesh 4");
  expect_groups_error("mesh['a'=2,'a'=2] {'a'}", "mesh axis 'a' is named twice");
  expect_groups_error("mesh['a'=2,'b'=2], devices=(0,1,2,3) {'a'}", "device_ids=(...)");
  expect_groups_error("mesh['a'=2,'b'=2], device_ids=(0,1,2,3 {'a'}", "')'");
}

static kiln_status parse_and_verify(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t opts = {.filename = "collectives"};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &opts, &m);
  if (!s) s = kiln_hlo_module_verify(m);
  kiln_hlo_module_destroy(m);
  return s;
}

#define ADD_F32 \
  "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"

static void expect_verified(const char *const *modules, size_t n) {
  for (size_t i = 0; i < n; i++) {
    kiln_status s = parse_and_verify(modules[i]);
    if (s) fail_msg("%.40s: %s", modules[i], kiln_status_message(s));
  }
}

static void test_every_collective_form_verifies(void **state) {
  (void)state;
  static const char *const kModules[] = {
      "HloModule ar\n" ADD_F32
      "ENTRY e { p = f32[8] parameter(0)\n ROOT r = f32[8] all-reduce(p), channel_id=1, "
      "replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, to_apply=add }",
      "HloModule ar_scalar\n" ADD_F32
      "ENTRY e { p = f32[] parameter(0)\n ROOT r = f32[] all-reduce(p), replica_groups={}, "
      "to_apply=add }",
      "HloModule ar_variadic\n" ADD_F32
      "ENTRY e { p = f32[8] parameter(0)\n q = f32[] parameter(1)\n ROOT r = (f32[8], f32[]) "
      "all-reduce(p, q), replica_groups={{0,1}}, to_apply=add }",
      "HloModule ar_async\n" ADD_F32
      "ENTRY e { p = f32[8] parameter(0)\n s = f32[8] all-reduce-start(p), replica_groups={{0,1}}, "
      "to_apply=add\n ROOT d = f32[8] all-reduce-done(s) }",
      "HloModule ar_async_tuple\n" ADD_F32
      "ENTRY e { p = f32[8] parameter(0)\n s = (f32[8], f32[8]) all-reduce-start(p), "
      "replica_groups={{0,1}}, to_apply=add\n ROOT d = f32[8] all-reduce-done(s) }",
      "HloModule ag\n"
      "ENTRY e { p = f32[4,2] parameter(0)\n ROOT r = f32[4,8] all-gather(p), channel_id=1, "
      "replica_groups=[2,4]<=[8], dimensions={1}, use_global_device_ids=true }",
      "HloModule ag_variadic\n"
      "ENTRY e { p = f32[4,2] parameter(0)\n q = s32[3] parameter(1)\n ROOT r = (f32[8,2], "
      "s32[6]) all-gather(p, q), replica_groups={{0,1},{2,3}}, dimensions={0} }",
      "HloModule ag_async\n"
      "ENTRY e { p = f32[4,2] parameter(0)\n s = (f32[4,2], f32[4,4]) all-gather-start(p), "
      "channel_id=1, replica_groups={{0,1},{2,3}}, dimensions={1}, use_global_device_ids=true\n"
      " ROOT d = f32[4,4] all-gather-done(s) }",
      "HloModule rs\n" ADD_F32
      "ENTRY e { p = f32[8,3] parameter(0)\n ROOT r = f32[2,3] reduce-scatter(p), "
      "replica_groups=mesh['x'=2,'y'=4] {'y'}, dimensions={0}, to_apply=add }",
      "HloModule a2a\n"
      "ENTRY e { p = f32[8,3] parameter(0)\n ROOT r = f32[8,3] all-to-all(p), "
      "replica_groups={{0,1,2,3}}, dimensions={0} }",
      "HloModule a2a_tuple\n"
      "ENTRY e { p = f32[2] parameter(0)\n q = f32[2] parameter(1)\n ROOT r = (f32[2], f32[2]) "
      "all-to-all(p, q), replica_groups={{0,1}} }",
      "HloModule cp\n"
      "ENTRY e { p = f32[4] parameter(0)\n ROOT r = f32[4] collective-permute(p), channel_id=2, "
      "source_target_pairs={{0,1},{1,0}} }",
      "HloModule cp_async\n"
      "ENTRY e { p = f32[4] parameter(0)\n s = (f32[4], f32[4]) collective-permute-start(p), "
      "source_target_pairs={{0,1},{1,2}}\n ROOT d = f32[4] collective-permute-done(s) }",
      "HloModule cb\n"
      "ENTRY e { p = f32[4] parameter(0)\n ROOT r = f32[4] collective-broadcast(p), "
      "replica_groups={{1,0}} }",
  };
  expect_verified(kModules, sizeof kModules / sizeof kModules[0]);
}

static void expect_rejected(const char *text, const char *part) {
  kiln_status s = parse_and_verify(text);
  if (!s) fail_msg("accepted: %s", text);
  if (!strstr(kiln_status_message(s), part))
    fail_msg("message '%s' lacks '%s'", kiln_status_message(s), part);
  kiln_status_free(s);
}

static void test_group_size_mismatches_are_rejected(void **state) {
  (void)state;
  expect_rejected(
      "HloModule m\nENTRY e { p = f32[4,2] parameter(0)\n ROOT r = f32[4,4] "
      "all-gather(p), replica_groups=[2,4]<=[8], dimensions={1} }",
      "all-gather over groups of 4: dimension 1 of f32[4,4] must be 4 times");
  expect_rejected(
      "HloModule m\nENTRY e { p = f32[4,2] parameter(0)\n s = (f32[4,2], f32[4,8]) "
      "all-gather-start(p), replica_groups={{0,1}}, dimensions={1}\n"
      " ROOT d = f32[4,8] all-gather-done(s) }",
      "all-gather-start over groups of 2");
  expect_rejected("HloModule m\n" ADD_F32
                  "ENTRY e { p = f32[8] parameter(0)\n ROOT r = f32[4] reduce-scatter(p), "
                  "replica_groups={{0,1},{2,3,4}}, dimensions={0}, to_apply=add }",
                  "every group must have the same size");
  expect_rejected(
      "HloModule m\nENTRY e { p = f32[6] parameter(0)\n ROOT r = f32[6] "
      "all-to-all(p), replica_groups={{0,1,2,3}}, dimensions={0} }",
      "split dimension 0 of f32[6] must be a multiple of 4");
  expect_rejected("HloModule m\n" ADD_F32
                  "ENTRY e { p = f32[8] parameter(0)\n ROOT r = f32[8] all-reduce(p), "
                  "replica_groups={{0,1},{1,2}}, to_apply=add }",
                  "replica_groups={{0,1},{1,2}}: id 1 appears more than once; each participant "
                  "belongs to one group; all-reduce");
  expect_rejected(
      "HloModule m\nENTRY e { p = f32[4] parameter(0)\n ROOT r = f32[4] "
      "collective-permute(p), source_target_pairs={{0,1},{2,1}} }",
      "target 1 appears more than once");
  expect_rejected(
      "HloModule m\nENTRY e { p = f32[4] parameter(0)\n s = (f32[4], f32[4]) "
      "collective-permute-start(p), source_target_pairs={{0,1,2}}\n"
      " ROOT d = f32[4] collective-permute-done(s) }",
      "pair 0 has 3 ids");
  expect_rejected(
      "HloModule m\nENTRY e { p = f32[4] parameter(0)\n s = (f32[4], f32[8]) "
      "collective-permute-start(p), source_target_pairs={{0,1}}\n"
      " ROOT d = f32[8] collective-permute-done(s) }",
      "collective-permute-start must return (f32[4], f32[4], contexts...)");
  /* the older (operands, results) form of all-reduce-start: groups and shapes checked too */
  expect_rejected("HloModule m\n" ADD_F32
                  "ENTRY e { p = f32[8] parameter(0)\n s = (f32[8], f32[8]) all-reduce-start(p), "
                  "replica_groups={{0,1},{1,2}}, to_apply=add\n"
                  " ROOT d = f32[8] all-reduce-done(s) }",
                  "id 1 appears more than once");
  expect_rejected("HloModule m\n" ADD_F32
                  "ENTRY e { p = f32[8] parameter(0)\n s = (f32[8], f32[4]) all-reduce-start(p), "
                  "replica_groups={{0,1}}, to_apply=add\n ROOT d = f32[4] all-reduce-done(s) }",
                  "all-reduce-start's (operands, results) tuple (f32[8], f32[4]) must hold "
                  "operand 0's shape f32[8] at 0 and 1");
  expect_rejected("HloModule m\n" ADD_F32
                  "ENTRY e { p = f32[8] parameter(0)\n s = (f32[8], f32[8]) all-reduce-start(p), "
                  "replica_groups={{0,1}}, to_apply=add\n ROOT d = f32[4] all-reduce-done(s) }",
                  "all-reduce-done of (f32[8], f32[8]) must return the results half of it, but "
                  "returns f32[4]");
  expect_rejected("HloModule m\n" ADD_F32
                  "ENTRY e { s = () all-reduce-start(), replica_groups={}, to_apply=add\n"
                  " ROOT d = () all-reduce-done(s) }",
                  "at least 1");
}

/* XLA's subgroup size (its verifier's GetSubgroupSize): a channel_id without
 * use_global_device_ids on all-gather / reduce-scatter is cross-replica-and-partition mode,
 * where every partition of each replica a group names takes part, so the data is gathered or
 * split num_partitions times the ids of a group; with use_global_device_ids (flattened ids),
 * without a channel (cross-replica) or on all-to-all (cross-partition) the ids alone. */
static void test_group_size_follows_the_group_mode(void **state) {
  (void)state;
  static const char *const kAccepted[] = {
      "HloModule ag_crp, replica_count=2, num_partitions=2\n"
      "ENTRY e { p = f32[4,2] parameter(0)\n ROOT r = f32[4,8] all-gather(p), channel_id=1, "
      "replica_groups={{0,1}}, dimensions={1} }",
      "HloModule rs_crp, replica_count=2, num_partitions=3\n" ADD_F32
      "ENTRY e { p = f32[12,3] parameter(0)\n ROOT r = f32[2,3] reduce-scatter(p), "
      "channel_id=1, replica_groups={{0,1}}, dimensions={0}, to_apply=add }",
      "HloModule ag_flat, replica_count=2, num_partitions=2\n"
      "ENTRY e { p = f32[4,2] parameter(0)\n ROOT r = f32[4,4] all-gather(p), channel_id=1, "
      "replica_groups={{0,1},{2,3}}, dimensions={1}, use_global_device_ids=true }",
      "HloModule ag_cr, replica_count=2, num_partitions=2\n"
      "ENTRY e { p = f32[4,2] parameter(0)\n ROOT r = f32[4,4] all-gather(p), "
      "replica_groups={{0,1}}, dimensions={1} }",
      "HloModule a2a_cp, replica_count=2, num_partitions=2\n"
      "ENTRY e { p = f32[8,3] parameter(0)\n ROOT r = f32[8,3] all-to-all(p), channel_id=1, "
      "replica_groups={{0,1}}, dimensions={0} }",
  };
  expect_verified(kAccepted, sizeof kAccepted / sizeof kAccepted[0]);
  expect_rejected(
      "HloModule ag_crp, replica_count=2, num_partitions=2\n"
      "ENTRY e { p = f32[4,2] parameter(0)\n ROOT r = f32[4,4] all-gather(p), channel_id=1, "
      "replica_groups={{0,1}}, dimensions={1} }",
      "all-gather over groups of 4: dimension 1 of f32[4,4] must be 4 times");
  expect_rejected("HloModule rs_crp, replica_count=2, num_partitions=3\n" ADD_F32
                  "ENTRY e { p = f32[4,3] parameter(0)\n ROOT r = f32[2,3] reduce-scatter(p), "
                  "channel_id=1, replica_groups={{0,1}}, dimensions={0}, to_apply=add }",
                  "reduce-scatter over groups of 6");
}

/* A module is multi-device when one of its instructions is a collective. */
static bool is_multi_device(const kiln_hlo_module_t *m) {
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++)
      if (kiln_hlo_opcode_flags(comp->instructions.data[i]->opcode) & KILN_OPF_COLLECTIVE)
        return true;
  }
  return false;
}

typedef struct {
  int multi_device, verified, known_invalid, failed;
} corpus_count_t;

static void count_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path,
                         int index, kiln_status error) {
  corpus_count_t *c = ctx;
  if (error) {
    printf("FAIL parse %s: %s\n", name, kiln_status_message(error));
    c->failed++;
    return;
  }
  if (!is_multi_device(*m)) return;
  c->multi_device++;
  kiln_status s = kiln_hlo_module_verify(*m);
  const kiln_corpus_invalid_t *known = kiln_corpus_find_invalid(path, index);
  if (known && s && strstr(kiln_status_message(s), known->message_part)) {
    c->known_invalid++;
  } else if (s || known) {
    printf("FAIL verify %s: %s\n", name,
           s ? kiln_status_message(s) : "accepted a known-invalid module");
    c->failed++;
  } else {
    c->verified++;
  }
  kiln_status_free(s);
}

static void test_corpus_multi_device_modules_verify(void **state) {
  (void)state;
  corpus_count_t c = {0};
  kiln_status s = kiln_corpus_for_each_whole_module(NULL, count_module, &c);
  if (s) {
    printf("SKIP: corpus not readable: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    KILN_SKIPPED();
    return;
  }
  printf(
      "corpus xla+real multi-device modules: %d parse and verify, %d known-invalid rejected "
      "for their reason, %d fail (of %d)\n",
      c.verified, c.known_invalid, c.failed, c.multi_device);
  assert_true(c.multi_device >= 60);
  assert_int_equal(c.failed, 0);
  assert_int_equal(c.verified + c.known_invalid, c.multi_device);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replica_group_forms_expand),
      cmocka_unit_test(test_replica_group_errors_name_the_problem),
      cmocka_unit_test(test_every_collective_form_verifies),
      cmocka_unit_test(test_group_size_mismatches_are_rejected),
      cmocka_unit_test(test_group_size_follows_the_group_mode),
      cmocka_unit_test(test_corpus_multi_device_modules_verify),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
