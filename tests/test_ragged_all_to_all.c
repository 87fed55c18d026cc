/* ragged-all-to-all (XLA's RaggedAllToAll) on hand-written modules: the SPMD evaluator against
 * results computed here from the operation's semantics, and the same modules on N host
 * devices (collective thunks through the in-process clique) equal to the evaluator bit for
 * bit, also after a serialization round trip. Each participant gets its own arguments: input
 * rows x_p[row][c] = 1000 p + 10 row + c, the output operand -1 - p everywhere, and offsets
 * and sizes forming one exchange (uneven sizes, zeros, gaps between updates, several updates
 * per peer, s32 and s64, rank 1 and rank 2 metadata, several groups, cross-partition groups,
 * a group of one, one device without a world). Bad metadata (an offset past the input, an update
 * past the output, a negative size, recv_sizes that do not mirror send_sizes) is INVALID_ARGUMENT
 * naming the collective on both, never a crash; the verifier rejects malformed operands naming
 * them. */
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
#include "compiler/hlo/collective_groups.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/device.h"
#include "tests/host_device_fixture.h"
#include "tests/collective_test_util.h"
#include "tests/skip_util.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#define MAXP 8
#define MAXM 64 /* metadata entries */

typedef struct {
  int R, P;
  const char *groups; /* replica_groups={...} */
  const char *extra;  /* ", channel_id=1" or "" */
  int U;              /* updates per peer */
  int I, O, C;        /* input rows, output rows, row width */
  const char *mtype;  /* s32 / s64 */
  bool rank2;         /* metadata [N, U] instead of [N x U] */
  int gap;            /* rows left free before each update */
} spec_t;

/* One participant's metadata: input_offsets, send_sizes, output_offsets, recv_sizes. */
typedef struct {
  int64_t m[4][MAXM];
} meta_t;

typedef struct {
  kiln_hlo_module_t *m;
  kiln_arena_t arena;
  int n, size[MAXP], rank[MAXP], members[MAXP][MAXP];
  meta_t meta[MAXP];
  kiln_literal_t **args[MAXP];
} case_t;

/* Rows participant s sends participant d in update u: uneven, zero for some. */
static int64_t rows_sent(int s, int d, int u) {
  return (s * 7 + d * 3 + u * 5) % 4;
}

/* The exchanges: R, P, groups, extra attributes, updates per peer, input rows, output rows,
 * row width, metadata type, rank-2 metadata, gap rows. */
static const spec_t k_two_groups = {4, 1, "{{0,2},{1,3}}", "", 1, 8, 10, 3, "s32", false, 1};
static const spec_t k_four_ranks_two_updates = {4,  1, "{{3,1,0,2}}", "",   2, 32,
                                                40, 2, "s64",         true, 0};
/* channel_id: groups of partition ids, one per replica. */
static const spec_t k_cross_partition = {
    2, 3, "{{0,1,2}}", ", channel_id=1", 1, 12, 12, 1, "s32", false, 1};
static const spec_t k_groups_of_one = {2, 1, "{{0},{1}}", "", 3, 16, 16, 2, "s64", false, 2};
static const spec_t k_alone = {1, 1, "{{0}}", "", 4, 20, 24, 3, "s32", false, 1};
static const spec_t k_pair = {2, 1, "{{0,1}}", "", 1, 6, 6, 2, "s32", false, 0};

static char *module_text(const spec_t *sp, int count) {
  kiln_strbuf_t b = {0};
  char meta[64];
  if (sp->rank2)
    snprintf(meta, sizeof meta, "%s[%d,%d]", sp->mtype, count / sp->U, sp->U);
  else
    snprintf(meta, sizeof meta, "%s[%d]", sp->mtype, count);
  kiln_strbuf_printf(&b, "HloModule m, replica_count=%d, num_partitions=%d\n\nENTRY e {\n", sp->R,
                     sp->P);
  kiln_strbuf_printf(&b, "  x = f32[%d,%d] parameter(0)\n  y = f32[%d,%d] parameter(1)\n", sp->I,
                     sp->C, sp->O, sp->C);
  for (int k = 0; k < 4; k++) kiln_strbuf_printf(&b, "  m%d = %s parameter(%d)\n", k, meta, k + 2);
  kiln_strbuf_printf(&b,
                     "  ROOT r = f32[%d,%d] ragged-all-to-all(x, y, m0, m1, m2, m3), "
                     "replica_groups=%s%s\n}\n",
                     sp->O, sp->C, sp->groups, sp->extra);
  return kiln_strbuf_take(&b);
}

static void put(kiln_literal_t *l, int64_t i, int64_t v) {
  if (l->shape->type == KILN_S32)
    ((int32_t *)l->data)[i] = (int32_t)v;
  else
    ((int64_t *)l->data)[i] = v;
}

/* Parses and verifies the module of `sp`, resolves every participant's group and builds its
 * arguments: an exchange packed with `gap` free rows before each update, both sides. */
static void case_make(case_t *c, const spec_t *sp, int group_size) {
  memset(c, 0, sizeof *c);
  kiln_arena_init(&c->arena);
  c->n = sp->R * sp->P;
  int count = group_size * sp->U;
  char *text = module_text(sp, count);
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &c->m);
  if (!s) s = kiln_hlo_module_verify(c->m);
  if (s) printf("%s\n%s\n", kiln_status_message(s), text);
  kiln_free(text);
  assert_null(s);
  const kiln_hlo_instruction_t *in = c->m->entry->root;
  for (int p = 0; p < c->n; p++) {
    kiln_hlo_collective_group_t g;
    assert_null(kiln_hlo_collective_group_resolve(in, sp->R, sp->P, p, NULL, &g));
    c->size[p] = g.size;
    c->rank[p] = g.rank;
    for (int k = 0; k < g.size; k++) c->members[p][k] = (int)g.members[k];
    kiln_hlo_collective_group_free(&g);
    assert_int_equal(c->size[p], group_size);
  }
  for (int p = 0; p < c->n; p++) {
    int N = c->size[p], r = c->rank[p], U = sp->U;
    const int *mem = c->members[p];
    int64_t at = 0;
    for (int d = 0; d < N; d++)
      for (int u = 0; u < U; u++) {
        int idx = d * U + u, to = mem[d];
        int64_t where = 0;
        for (int k = 0; k < r; k++)
          for (int v = 0; v < U; v++) where += sp->gap + rows_sent(mem[k], to, v);
        for (int v = 0; v < u; v++) where += sp->gap + rows_sent(p, to, v);
        at += sp->gap;
        c->meta[p].m[0][idx] = at;
        c->meta[p].m[1][idx] = rows_sent(p, to, u);
        c->meta[p].m[2][idx] = where + sp->gap;
        c->meta[p].m[3][idx] = rows_sent(to, p, u);
        at += rows_sent(p, to, u);
      }
    assert_true(at <= sp->I);
    int n = 0;
    assert_null(kiln_fake_args_make(c->m, NULL, &c->arena, &c->args[p], &n));
    assert_int_equal(n, 6);
    for (int64_t e = 0; e < (int64_t)sp->I * sp->C; e++)
      ((float *)c->args[p][0]->data)[e] = (float)(1000 * p + 10 * (e / sp->C) + e % sp->C);
    for (int64_t e = 0; e < (int64_t)sp->O * sp->C; e++)
      ((float *)c->args[p][1]->data)[e] = (float)(-1 - p);
  }
}

/* Writes participant p's metadata (after any change a test made) into its arguments. */
static void case_store(case_t *c) {
  for (int p = 0; p < c->n; p++)
    for (int k = 0; k < 4; k++)
      for (int64_t e = 0; e < c->args[p][2 + k]->num_elements; e++)
        put(c->args[p][2 + k], e, c->meta[p].m[k][e]);
}

static void case_done(case_t *c) {
  kiln_hlo_module_destroy(c->m);
  kiln_arena_destroy(&c->arena);
}

/* Receiver p's result from the semantics: its output operand, then every sender's rows for p
 * in rank order. */
static float expected(const case_t *c, const spec_t *sp, int p, int64_t row, int col) {
  float v = (float)(-1 - p);
  int N = c->size[p], r = c->rank[p];
  for (int k = 0; k < N; k++) {
    int s = c->members[p][k];
    for (int u = 0; u < sp->U; u++) {
      int idx = r * sp->U + u;
      int64_t in_off = c->meta[s].m[0][idx], n = c->meta[s].m[1][idx],
              out_off = c->meta[s].m[2][idx];
      if (row >= out_off && row < out_off + n)
        v = (float)(1000 * s + 10 * (in_off + row - out_off) + col);
    }
  }
  return v;
}

static kiln_status run_eval(case_t *c, const spec_t *sp, kiln_literal_t **out) {
  kiln_literal_t *const *per[MAXP];
  for (int p = 0; p < c->n; p++) per[p] = c->args[p];
  kiln_eval_spmd_options_t o = {.num_replicas = sp->R,
                                .num_partitions = sp->P,
                                .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
  return kiln_eval_module_spmd(c->m, &o, 6, per, &c->arena, out);
}

static kiln_status run_host(case_t *c, const spec_t *sp, bool round_trip, kiln_literal_t **out) {
  kiln_literal_t *const *per[MAXP];
  for (int p = 0; p < c->n; p++) per[p] = c->args[p];
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = g_dev;
  ro.collective_timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS;
  ro.participant_args = per;
  ro.serialize_round_trip = round_trip;
  return kiln_device_run_module_spmd(c->m, c->args[0], 6, sp->R, sp->P, &ro, &c->arena, out, NULL);
}

static bool same_bits(const kiln_literal_t *a, const kiln_literal_t *b) {
  return a->num_elements == b->num_elements &&
         memcmp(a->data, b->data, (size_t)a->num_elements * sizeof(float)) == 0;
}

/* The evaluator equals the semantics; host devices (compiled, and read back) equal it. */
static void check_exchange(const spec_t *sp, int group_size) {
  case_t c;
  case_make(&c, sp, group_size);
  case_store(&c);
  kiln_literal_t *want[MAXP], *got[MAXP], *again[MAXP];
  kiln_status s = run_eval(&c, sp, want);
  if (s) printf("evaluator: %s\n", kiln_status_message(s));
  assert_null(s);
  int64_t moved = 0;
  for (int p = 0; p < c.n; p++) {
    assert_int_equal(want[p]->num_elements, (int64_t)sp->O * sp->C);
    for (int64_t e = 0; e < want[p]->num_elements; e++) {
      float w = expected(&c, sp, p, e / sp->C, (int)(e % sp->C));
      float g = ((const float *)want[p]->data)[e];
      if (g != w) {
        printf("participant %d row %lld col %d: evaluator %g, expected %g\n", p,
               (long long)(e / sp->C), (int)(e % sp->C), g, w);
        fail();
      }
      moved += w >= 0;
    }
  }
  assert_true(moved > 0); /* something was exchanged */
  s = run_host(&c, sp, false, got);
  if (s) printf("host devices: %s\n", kiln_status_message(s));
  assert_null(s);
  s = run_host(&c, sp, true, again);
  assert_null(s);
  for (int p = 0; p < c.n; p++) {
    if (!same_bits(want[p], got[p]) || !same_bits(want[p], again[p])) {
      printf("participant %d: host devices differ from the evaluator\n", p);
      fail();
    }
  }
  printf(
      "%d participants, groups %s%s, %d update(s) per peer, %s%s metadata: %lld elements "
      "received, host devices equal to the evaluator\n",
      c.n, sp->groups, sp->extra, sp->U, sp->mtype, sp->rank2 ? " rank-2" : "", (long long)moved);
  case_done(&c);
}

static void test_ragged_all_to_all_two_groups_uneven_sizes_s32(void **state) {
  (void)state;
  const spec_t *sp = &k_two_groups;
  check_exchange(sp, 2);
}

static void test_ragged_all_to_all_several_updates_per_peer_s64_rank2(void **state) {
  (void)state;
  const spec_t *sp = &k_four_ranks_two_updates;
  check_exchange(sp, 4);
}

static void test_ragged_all_to_all_cross_partition_groups(void **state) {
  (void)state;
  const spec_t *sp = &k_cross_partition;
  check_exchange(sp, 3);
}

static void test_ragged_all_to_all_group_of_one_updates_in_place(void **state) {
  (void)state;
  const spec_t *sp = &k_groups_of_one;
  check_exchange(sp, 1);
}

/* Without a world (one device, kiln_device_run_module: the thunk's group-of-one path) the
 * update of a one-participant module equals the evaluator's, which equals the semantics. */
static void test_ragged_all_to_all_alone_on_one_device(void **state) {
  (void)state;
  const spec_t *sp = &k_alone;
  case_t c;
  case_make(&c, sp, 1);
  case_store(&c);
  kiln_literal_t *want[1], *got = NULL;
  assert_null(run_eval(&c, sp, want));
  for (int64_t e = 0; e < want[0]->num_elements; e++)
    assert_true(((const float *)want[0]->data)[e] ==
                expected(&c, sp, 0, e / sp->C, (int)(e % sp->C)));
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = g_dev;
  kiln_status s = kiln_device_run_module(c.m, c.args[0], 6, &ro, &c.arena, &got, NULL);
  if (s) printf("one device: %s\n", kiln_status_message(s));
  assert_null(s);
  assert_true(same_bits(want[0], got));
  case_done(&c);
}

/* Participant 1's metadata changed by `bad`; both the evaluator and host devices fail with
 * INVALID_ARGUMENT naming the collective and containing `why`. */
static void check_rejected(void (*bad)(case_t *c), const char *why) {
  const spec_t *sp = &k_pair;
  case_t c;
  case_make(&c, sp, 2);
  bad(&c);
  case_store(&c);
  kiln_literal_t *out[MAXP];
  kiln_status s = run_eval(&c, sp, out);
  kiln_status h = run_host(&c, sp, false, out);
  kiln_status both[2] = {s, h};
  for (int i = 0; i < 2; i++) {
    assert_non_null(both[i]);
    printf("%s: %s\n", i ? "host devices" : "evaluator", kiln_status_message(both[i]));
    assert_int_equal(kiln_status_code(both[i]), KILN_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_status_message(both[i]), "ragged-all-to-all 'r'"));
    assert_non_null(strstr(kiln_status_message(both[i]), why));
    kiln_status_free(both[i]);
  }
  case_done(&c);
}

static void input_offset_past_the_end(case_t *c) {
  c->meta[1].m[0][0] = 6; /* to rank 0: rows_sent(1, 0, 0) = 3 rows from row 6 of 6 */
}
static void output_offset_past_the_end(case_t *c) {
  c->meta[1].m[2][0] = 5;
}
static void negative_size(case_t *c) {
  c->meta[1].m[1][0] = -2;
  c->meta[0].m[3][1] = -2; /* mirrored, so the size itself is what fails */
}
static void recv_sizes_disagree(case_t *c) {
  c->meta[0].m[3][1] += 1;
}

static void test_ragged_all_to_all_input_offset_out_of_range_is_an_error(void **state) {
  (void)state;
  check_rejected(input_offset_past_the_end, "lies outside its input of 6 rows");
}

static void test_ragged_all_to_all_output_offset_out_of_range_is_an_error(void **state) {
  (void)state;
  check_rejected(output_offset_past_the_end, "lies outside the output of 6 rows");
}

static void test_ragged_all_to_all_negative_size_is_an_error(void **state) {
  (void)state;
  check_rejected(negative_size, "send_sizes = -2");
}

static void test_ragged_all_to_all_recv_sizes_must_mirror_send_sizes(void **state) {
  (void)state;
  check_rejected(recv_sizes_disagree, "must mirror");
}

static void test_ragged_all_to_all_verifier_rejects_malformed_operands(void **state) {
  (void)state;
  static const struct {
    const char *y, *meta[4], *result, *why; /* meta[3] NULL: five operands */
  } bad[] = {
      {"f32[4,2]",
       {"f32[2]", "s32[2]", "s32[2]", "s32[2]"},
       "f32[4,2]",
       "input_offsets (operand 2) must be s32 or s64"},
      {"f32[4,2]",
       {"s32[2]", "s64[2]", "s32[2]", "s32[2]"},
       "f32[4,2]",
       "send_sizes s64[2] differs from input_offsets"},
      {"f32[4,2]",
       {"s32[1,1,2]", "s32[1,1,2]", "s32[1,1,2]", "s32[1,1,2]"},
       "f32[4,2]",
       "of rank 1 or 2"},
      {"f32[4,3]",
       {"s32[2]", "s32[2]", "s32[2]", "s32[2]"},
       "f32[4,3]",
       "must agree in every dimension but the first"},
      {"f32[4,2]",
       {"s32[3]", "s32[3]", "s32[3]", "s32[3]"},
       "f32[4,2]",
       "must be a multiple of the group size"},
      {"f32[4,2]",
       {"s32[2]", "s32[2]", "s32[2]", "s32[2]"},
       "f32[5,2]",
       "must equal its output operand"},
      {"f32[4,2]", {"s32[2]", "s32[2]", "s32[2]", NULL}, "f32[4,2]", "expects 6 operands"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_printf(&b,
                       "HloModule m, replica_count=2\n\nENTRY e {\n  x = f32[4,2] parameter(0)\n"
                       "  y = %s parameter(1)\n",
                       bad[i].y);
    int n = 0;
    while (n < 4 && bad[i].meta[n]) {
      kiln_strbuf_printf(&b, "  m%d = %s parameter(%d)\n", n, bad[i].meta[n], n + 2);
      n++;
    }
    kiln_strbuf_printf(&b, "  ROOT r = %s ragged-all-to-all(x, y", bad[i].result);
    for (int k = 0; k < n; k++) kiln_strbuf_printf(&b, ", m%d", k);
    kiln_strbuf_append(&b, "), replica_groups={{0,1}}\n}\n");
    kiln_hlo_module_t *m = NULL;
    kiln_status s = kiln_hlo_parse_module(kiln_strbuf_cstr(&b), b.len, NULL, &m);
    if (!s) s = kiln_hlo_module_verify(m);
    if (!s || !strstr(kiln_status_message(s), bad[i].why)) {
      printf("case %zu: want an error with \"%s\", got: %s\n%s\n", i, bad[i].why,
             s ? kiln_status_message(s) : "(accepted)", kiln_strbuf_cstr(&b));
      fail();
    }
    printf("rejected: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
    kiln_strbuf_free(&b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ragged_all_to_all_two_groups_uneven_sizes_s32),
      cmocka_unit_test(test_ragged_all_to_all_several_updates_per_peer_s64_rank2),
      cmocka_unit_test(test_ragged_all_to_all_cross_partition_groups),
      cmocka_unit_test(test_ragged_all_to_all_group_of_one_updates_in_place),
      cmocka_unit_test(test_ragged_all_to_all_alone_on_one_device),
      cmocka_unit_test(test_ragged_all_to_all_input_offset_out_of_range_is_an_error),
      cmocka_unit_test(test_ragged_all_to_all_output_offset_out_of_range_is_an_error),
      cmocka_unit_test(test_ragged_all_to_all_negative_size_is_an_error),
      cmocka_unit_test(test_ragged_all_to_all_recv_sizes_must_mirror_send_sizes),
      cmocka_unit_test(test_ragged_all_to_all_verifier_rejects_malformed_operands),
  };
  return kiln_run_tests(tests, host_device_setup, host_device_teardown);
}
