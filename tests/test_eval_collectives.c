/* The evaluator on several participants (kiln_eval_module_spmd): each collective x each
 * CollectiveOpGroupMode x a few dtypes against answers written out here, the stated
 * reduction order, async pairs, collectives in loops, and the errors: a participant that
 * never arrives (DEADLINE_EXCEEDED naming the missing ranks) and one that fails (its own
 * error, not a hang). Every module computes its data from replica-id and partition-id:
 * participant f = replica * P + partition holds x[e] = 10 f + e. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "tests/skip_util.h"

#define MAX_P 8
#define LEN 8

typedef struct {
  kiln_hlo_module_t *m;
  kiln_arena_t arena;
  kiln_literal_t *res[MAX_P];
  int n;
} spmd_t;

/* The module: reducer `add` over T, x as above, then `body` (which defines ROOT). */
static char *module_text(const char *T, int P, const char *body) {
  static char buf[8192];
  snprintf(buf, sizeof buf,
           "HloModule m\n\nadd {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n"
           "  ROOT s = %s[] add(a, b)\n}\n\nENTRY e {\n"
           "  r = u32[] replica-id()\n  q = u32[] partition-id()\n  np = u32[] constant(%d)\n"
           "  rp = u32[] multiply(r, np)\n  fid = u32[] add(rp, q)\n  ten = u32[] constant(10)\n"
           "  f10 = u32[] multiply(fid, ten)\n  ft = %s[] convert(f10)\n"
           "  b = %s[%d] broadcast(ft), dimensions={}\n  i = %s[%d] iota(), iota_dimension=0\n"
           "  x = %s[%d] add(b, i)\n%s}\n",
           T, T, T, P, T, T, LEN, T, LEN, T, LEN, body);
  return buf;
}

static kiln_status spmd_try(spmd_t *r, const char *text, int R, int P, int64_t timeout_ms) {
  memset(r, 0, sizeof *r);
  kiln_arena_init(&r->arena);
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &r->m);
  if (s) {
    kiln_status_report(s, "parse");
    fail();
  }
  s = kiln_hlo_module_verify(r->m);
  if (s) {
    kiln_status_report(s, "verify");
    fail();
  }
  r->n = R * P;
  kiln_literal_t *const *args[MAX_P] = {0};
  kiln_eval_spmd_options_t o = {.num_replicas = R, .num_partitions = P, .timeout_ms = timeout_ms};
  return kiln_eval_module_spmd(r->m, &o, 0, args, &r->arena, r->res);
}

static void spmd_run(spmd_t *r, const char *text, int R, int P) {
  kiln_status s = spmd_try(r, text, R, P, 0);
  if (s) {
    kiln_status_report(s, "eval");
    fail();
  }
}

static void spmd_done(spmd_t *r) {
  kiln_arena_destroy(&r->arena);
  kiln_hlo_module_destroy(r->m);
}

static double v(int f, int e) {
  return 10.0 * f + e;
}

typedef enum { SUM, GATHER, SCATTER, ALL_TO_ALL, BROADCAST } kind_t;

/* members[f] lists participant f's group in rank order (-1 ends it). */
static void expect_kind(const kiln_literal_t *l, int f, kind_t k, const int *members) {
  int g = 0, rank = -1;
  while (g < MAX_P && members[g] >= 0) {
    if (members[g] == f) rank = g;
    g++;
  }
  assert_true(rank >= 0);
  int n = k == GATHER ? LEN * g : k == SCATTER ? LEN / g : LEN;
  assert_int_equal(l->num_elements, n);
  for (int e = 0; e < n; e++) {
    double want = 0;
    switch (k) {
      case SUM:
        for (int j = 0; j < g; j++) want += v(members[j], e);
        break;
      case SCATTER:
        for (int j = 0; j < g; j++) want += v(members[j], rank * (LEN / g) + e);
        break;
      case GATHER:
        want = v(members[e / LEN], e % LEN);
        break;
      case ALL_TO_ALL: { /* block b of the result comes from rank b's block `rank` */
        int blk = LEN / g, b = e / blk;
        want = v(members[b], rank * blk + e % blk);
        break;
      }
      case BROADCAST:
        want = v(members[0], e);
        break;
    }
    double got = kiln_literal_get_f64(l, e);
    if (got != want) {
      fprintf(stderr, "participant %d element %d: got %g, want %g\n", f, e, got, want);
      fail();
    }
  }
}

static void check_all(const char *T, int R, int P, const char *body, kind_t k,
                      const int members[][MAX_P]) {
  spmd_t r;
  spmd_run(&r, module_text(T, P, body), R, P);
  for (int f = 0; f < R * P; f++) {
    const kiln_literal_t *l = r.res[f];
    if (l->shape->type == KILN_TUPLE) l = l->tuple_elements[0];
    expect_kind(l, f, k, members[f]);
  }
  spmd_done(&r);
}

/* 2 replicas x 2 partitions: f = (0,0) 0, (0,1) 1, (1,0) 2, (1,1) 3. */
static const int CROSS_REPLICA[4][MAX_P] = {{0, 2, -1}, {1, 3, -1}, {0, 2, -1}, {1, 3, -1}};
static const int CROSS_PARTITION[4][MAX_P] = {{0, 1, -1}, {0, 1, -1}, {2, 3, -1}, {2, 3, -1}};
/* cross-replica-and-partition over replicas {0,1}: replica-major */
static const int CROSS_REPLICA_AND_PARTITION[4][MAX_P] = {
    {0, 1, 2, 3, -1}, {0, 1, 2, 3, -1}, {0, 1, 2, 3, -1}, {0, 1, 2, 3, -1}};
/* flattened ids {{3,0},{1,2}}: rank order is the listed order */
static const int FLATTENED[4][MAX_P] = {{3, 0, -1}, {1, 2, -1}, {1, 2, -1}, {3, 0, -1}};
/* iota [2,2]<=[2,2]T(1,0) = {{0,2},{1,3}} over flattened ids */
static const int IOTA_T[4][MAX_P] = {{0, 2, -1}, {1, 3, -1}, {0, 2, -1}, {1, 3, -1}};

static const char *const DTYPES[] = {"f32", "s32", "bf16", "f64", "u8"};
#define NUM_DTYPES (int)(sizeof DTYPES / sizeof DTYPES[0])

static void test_all_reduce_in_every_group_mode(void **state) {
  (void)state;
  for (int t = 0; t < NUM_DTYPES; t++) {
    const char *T = DTYPES[t];
    char body[512];
    snprintf(body, sizeof body,
             "  ROOT ar = %s[8] all-reduce(x), replica_groups={}, to_apply=add\n", T);
    check_all(T, 2, 2, body, SUM, CROSS_REPLICA);
    snprintf(
        body, sizeof body,
        "  ROOT ar = %s[8] all-reduce(x), channel_id=1, replica_groups={{0,1}}, to_apply=add\n", T);
    check_all(T, 2, 2, body, SUM, CROSS_REPLICA_AND_PARTITION);
    snprintf(body, sizeof body,
             "  ROOT ar = %s[8] all-reduce(x), channel_id=1, replica_groups={{3,0},{1,2}}, "
             "use_global_device_ids=true, to_apply=add\n",
             T);
    check_all(T, 2, 2, body, SUM, FLATTENED);
    snprintf(body, sizeof body,
             "  ROOT ar = %s[8] all-reduce(x), channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), "
             "use_global_device_ids=true, to_apply=add\n",
             T);
    check_all(T, 2, 2, body, SUM, IOTA_T);
  }
}

static void test_all_gather_and_reduce_scatter_per_group_mode(void **state) {
  (void)state;
  for (int t = 0; t < NUM_DTYPES; t++) {
    const char *T = DTYPES[t];
    char body[512];
    snprintf(body, sizeof body,
             "  ROOT ag = %s[16] all-gather(x), replica_groups={{0,1}}, dimensions={0}\n", T);
    check_all(T, 2, 2, body, GATHER, CROSS_REPLICA);
    snprintf(body, sizeof body,
             "  ROOT ag = %s[16] all-gather(x), channel_id=2, replica_groups={{3,0},{1,2}}, "
             "use_global_device_ids=true, dimensions={0}\n",
             T);
    check_all(T, 2, 2, body, GATHER, FLATTENED);
    snprintf(body, sizeof body,
             "  ROOT rs = %s[2] reduce-scatter(x), channel_id=3, replica_groups={}, "
             "dimensions={0}, to_apply=add\n",
             T);
    check_all(T, 2, 2, body, SCATTER, CROSS_REPLICA_AND_PARTITION);
    snprintf(body, sizeof body,
             "  ROOT rs = %s[4] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, "
             "to_apply=add\n",
             T);
    check_all(T, 2, 2, body, SCATTER, CROSS_REPLICA);
  }
}

static void test_all_to_all_broadcast_and_permute_cross_partition(void **state) {
  (void)state;
  for (int t = 0; t < NUM_DTYPES; t++) {
    const char *T = DTYPES[t];
    char body[512];
    snprintf(body, sizeof body,
             "  ROOT a2a = %s[8] all-to-all(x), channel_id=4, replica_groups={{0,1}}, "
             "dimensions={0}\n",
             T);
    check_all(T, 2, 2, body, ALL_TO_ALL, CROSS_PARTITION);
    snprintf(body, sizeof body,
             "  ROOT a2a = %s[8] all-to-all(x), replica_groups={{0,1}}, dimensions={0}\n", T);
    check_all(T, 2, 2, body, ALL_TO_ALL, CROSS_REPLICA);
    snprintf(body, sizeof body,
             "  ROOT cb = %s[8] collective-broadcast(x), channel_id=5, replica_groups={{0,1}}\n",
             T);
    check_all(T, 2, 2, body, BROADCAST, CROSS_PARTITION);
  }
  /* collective-permute across partitions: 0 -> 1 within each replica; partition 0 gets
   * zeros. */
  spmd_t r;
  spmd_run(&r,
           module_text("f32", 2,
                       "  ROOT cp = f32[8] collective-permute(x), channel_id=6, "
                       "source_target_pairs={{0,1}}\n"),
           2, 2);
  for (int f = 0; f < 4; f++)
    for (int e = 0; e < LEN; e++)
      assert_true(kiln_literal_get_f64(r.res[f], e) == (f % 2 ? v(f - 1, e) : 0.0));
  spmd_done(&r);
}

/* The tuple form of all-to-all (one operand per rank) and a variadic all-reduce. */
static void test_tuple_all_to_all_and_variadic_all_reduce(void **state) {
  (void)state;
  spmd_t r;
  spmd_run(&r,
           module_text("f32", 1,
                       "  y = f32[8] negate(x)\n"
                       "  a2a = (f32[8], f32[8]) all-to-all(x, y), replica_groups={{0,1}}\n"
                       "  a0 = f32[8] get-tuple-element(a2a), index=0\n"
                       "  a1 = f32[8] get-tuple-element(a2a), index=1\n"
                       "  ar = (f32[8], f32[8]) all-reduce(x, y), replica_groups={}, "
                       "to_apply=add\n"
                       "  ar1 = f32[8] get-tuple-element(ar), index=1\n"
                       "  ROOT t = (f32[8], f32[8], f32[8]) tuple(a0, a1, ar1)\n"),
           2, 1);
  /* rank 0 receives (x0 from rank 0, x1 from rank 1); rank 1 receives (-x0, -x1) */
  for (int f = 0; f < 2; f++)
    for (int e = 0; e < LEN; e++) {
      double sign = f == 0 ? 1 : -1;
      assert_true(kiln_literal_get_f64(r.res[f]->tuple_elements[0], e) == sign * v(0, e));
      assert_true(kiln_literal_get_f64(r.res[f]->tuple_elements[1], e) == sign * v(1, e));
      assert_true(kiln_literal_get_f64(r.res[f]->tuple_elements[2], e) == -(v(0, e) + v(1, e)));
    }
  spmd_done(&r);
}

/* Async pairs, an all-to-all inside async-start, a scalar all-reduce, and an all-reduce in a
 * while loop (each iteration is its own rendezvous). */
static void test_async_pairs_scalars_and_loops(void **state) {
  (void)state;
  const char *text =
      "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\n\n"
      "a2a_body {\n  p = f32[4] parameter(0)\n"
      "  ROOT a = f32[4] all-to-all(p), replica_groups={{0,1}}, dimensions={0}\n}\n\n"
      "cond {\n  s = (s32[], f32[]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n"
      "body {\n  s = (s32[], f32[]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  v = f32[] get-tuple-element(s), index=1\n"
      "  ar = f32[] all-reduce(v), replica_groups={}, to_apply=add\n"
      "  one = s32[] constant(1)\n  j = s32[] add(i, one)\n"
      "  ROOT t = (s32[], f32[]) tuple(j, ar)\n}\n\n"
      "ENTRY e {\n  r = u32[] replica-id()\n  rf = f32[] convert(r)\n"
      "  x = f32[4] broadcast(rf), dimensions={}\n"
      "  ars = f32[4] all-reduce-start(x), replica_groups={}, to_apply=add\n"
      "  ard = f32[4] all-reduce-done(ars)\n"
      "  ags = (f32[4], f32[8]) all-gather-start(x), replica_groups={}, dimensions={0}\n"
      "  agd = f32[8] all-gather-done(ags)\n"
      "  cps = (f32[4], f32[4], u32[], u32[]) collective-permute-start(x), "
      "source_target_pairs={{0,1},{1,0}}\n"
      "  cpd = f32[4] collective-permute-done(cps)\n"
      "  as = ((f32[4]), f32[4], s32[]) async-start(x), calls=a2a_body\n"
      "  ad = f32[4] async-done(as)\n"
      "  z = s32[] constant(0)\n  one = f32[] constant(1)\n  v0 = f32[] add(rf, one)\n"
      "  init = (s32[], f32[]) tuple(z, v0)\n"
      "  w = (s32[], f32[]) while(init), condition=cond, body=body\n"
      "  wv = f32[] get-tuple-element(w), index=1\n"
      "  ROOT t = (f32[4], f32[8], f32[4], f32[4], f32[]) tuple(ard, agd, cpd, ad, wv)\n}\n";
  spmd_t r;
  spmd_run(&r, text, 2, 1);
  for (int f = 0; f < 2; f++) {
    kiln_literal_t **t = r.res[f]->tuple_elements;
    for (int e = 0; e < 4; e++) {
      assert_true(kiln_literal_get_f64(t[0], e) == 1.0);             /* 0 + 1 */
      assert_true(kiln_literal_get_f64(t[2], e) == (double)(1 - f)); /* swapped */
      assert_true(kiln_literal_get_f64(t[3], e) == (double)(e / 2)); /* block f of each */
    }
    for (int e = 0; e < 8; e++) assert_true(kiln_literal_get_f64(t[1], e) == (double)(e / 4));
    /* (1 + 2) = 3 -> 6 -> 12 over three iterations */
    assert_true(kiln_literal_get_f64(t[4], 0) == 12.0);
  }
  spmd_done(&r);
}

/* Rank order, not id order: f32 (1e8 + 1) - 1e8 = 0 but (1e8 - 1e8) + 1 = 1. */
static void test_reduction_folds_in_rank_order(void **state) {
  (void)state;
  const char *fmt =
      "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  r = u32[] replica-id()\n"
      "  c = f32[3] constant({1, 1e8, -1e8})\n"
      "  x = f32[1] dynamic-slice(c, r), dynamic_slice_sizes={1}\n"
      "  ROOT ar = f32[1] all-reduce(x), replica_groups={%s}, to_apply=add\n}\n";
  const char *orders[2] = {"{1,0,2}", "{1,2,0}"};
  double want[2] = {0.0, 1.0};
  for (int k = 0; k < 2; k++) {
    char text[1024];
    snprintf(text, sizeof text, fmt, orders[k]);
    spmd_t r;
    spmd_run(&r, text, 3, 1);
    for (int f = 0; f < 3; f++) assert_true(kiln_literal_get_f64(r.res[f], 0) == want[k]);
    spmd_done(&r);
  }
}

/* The all-reduce's folding loop (kiln_eval_scalar_fn_fold): each binary f32 reducer, with its
 * parameters in either order, over values with NaN, infinities and a signed zero, against the
 * fold written out here in rank order; a NaN stays NaN (which NaN is the interpreter's). */
static void test_binary_reducers_fold_nan_and_infinities(void **state) {
  (void)state;
  static const char *ops[4] = {"add", "multiply", "maximum", "minimum"};
  /* Columns 2 and 3 hold -0 and 0: maximum takes 0, minimum -0 (IEEE 754-2019), whichever
   * operand holds it. */
  static const float x[3][5] = {{1.5f, NAN, -0.0f, 0.0f, INFINITY},
                                {2.0f, 3.0f, 0.0f, -0.0f, -INFINITY},
                                {-4.0f, 1.0f, -1.0f, 1.0f, 2.0f}};
  for (int op = 0; op < 4; op++) {
    for (int swapped = 0; swapped < 2; swapped++) {
      char text[1024];
      snprintf(text, sizeof text,
               "HloModule m\n\nf {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
               "  ROOT s = f32[] %s(%s)\n}\n\nENTRY e {\n  r = u32[] replica-id()\n"
               "  c = f32[3,5] constant({{1.5, nan, -0, 0, inf}, {2, 3, 0, -0, -inf}, "
               "{-4, 1, -1, 1, 2}})\n"
               "  z = u32[] constant(0)\n"
               "  d = f32[1,5] dynamic-slice(c, r, z), dynamic_slice_sizes={1,5}\n"
               "  x = f32[5] reshape(d)\n"
               "  ROOT ar = f32[5] all-reduce(x), replica_groups={{0,1,2}}, to_apply=f\n}\n",
               ops[op], swapped ? "b, a" : "a, b");
      spmd_t r;
      spmd_run(&r, text, 3, 1);
      for (int e = 0; e < 5; e++) {
        float acc = x[0][e];
        for (int k = 1; k < 3; k++) {
          float p = swapped ? x[k][e] : acc, q = swapped ? acc : x[k][e];
          acc = op == 0   ? p + q
                : op == 1 ? p * q
                : op == 2 ? (isnan(p)   ? p
                             : isnan(q) ? q
                                        : (p < q || (p == q && signbit(p)) ? q : p))
                          : (isnan(p)   ? p
                             : isnan(q) ? q
                                        : (q < p || (p == q && signbit(q)) ? q : p));
        }
        for (int f = 0; f < 3; f++) {
          double got = kiln_literal_get_f64(r.res[f], e);
          if (isnan(acc)) {
            assert_true(isnan(got));
          } else {
            assert_true(got == acc);
            assert_int_equal(signbit(got) != 0, signbit(acc) != 0);
          }
        }
      }
      spmd_done(&r);
    }
  }
}

/* Replica 1 skips the all-reduce: replica 0 waits out its timeout and names who is missing. */
static void test_missing_participant_is_deadline_exceeded(void **state) {
  (void)state;
  const char *text =
      "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\n\n"
      "with_ar {\n  p = f32[2] parameter(0)\n"
      "  ROOT ar = f32[2] all-reduce(p), replica_groups={}, to_apply=add\n}\n\n"
      "without {\n  ROOT p = f32[2] parameter(0)\n}\n\n"
      "ENTRY e {\n  r = u32[] replica-id()\n  zero = u32[] constant(0)\n"
      "  first = pred[] compare(r, zero), direction=EQ\n  x = f32[2] constant({1, 2})\n"
      "  ROOT c = f32[2] conditional(first, x, x), true_computation=with_ar, "
      "false_computation=without\n}\n";
  spmd_t r;
  kiln_status s = spmd_try(&r, text, 2, 1, 200);
  assert_non_null(s);
  const char *msg = kiln_status_message(s);
  if (kiln_status_code(s) != KILN_DEADLINE_EXCEEDED || !strstr(msg, "all-reduce 'ar'") ||
      !strstr(msg, "rank 1 = replica 1 partition 0") || !strstr(msg, "200 ms")) {
    fprintf(stderr, "got %s: %s\n", kiln_status_code_name(kiln_status_code(s)), msg);
    fail();
  }
  assert_null(r.res[0]);
  kiln_status_free(s);
  spmd_done(&r);
}

/* Replica 1 fails before the all-reduce: the run returns replica 1's own error (not replica
 * 0's wait, which would be DEADLINE_EXCEEDED after a minute). */
static void test_failing_participant_stops_the_others(void **state) {
  (void)state;
  const char *text =
      "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\n\n"
      "ok {\n  ROOT p = f32[2] parameter(0)\n}\n\n"
      "bad {\n  p = f32[2] parameter(0)\n"
      "  ROOT c = f32[2] custom-call(p), custom_call_target=\"no_such_target\"\n}\n\n"
      "ENTRY e {\n  r = u32[] replica-id()\n  zero = u32[] constant(0)\n"
      "  first = pred[] compare(r, zero), direction=EQ\n  x = f32[2] constant({1, 2})\n"
      "  y = f32[2] conditional(first, x, x), true_computation=ok, false_computation=bad\n"
      "  ROOT ar = f32[2] all-reduce(y), replica_groups={}, to_apply=add\n}\n";
  spmd_t r;
  kiln_status s = spmd_try(&r, text, 2, 1, 60000);
  assert_non_null(s);
  const char *msg = kiln_status_message(s);
  if (kiln_status_code(s) == KILN_DEADLINE_EXCEEDED || kiln_status_code(s) == KILN_ABORTED ||
      !strstr(msg, "no_such_target") || !strstr(msg, "replica 1 partition 0")) {
    fprintf(stderr, "got %s: %s\n", kiln_status_code_name(kiln_status_code(s)), msg);
    fail();
  }
  kiln_status_free(s);
  spmd_done(&r);
}

/* Groups that name ids outside the world, or leave a participant out, are refused. */
static void test_groups_outside_the_world_are_refused(void **state) {
  (void)state;
  spmd_t r;
  kiln_status s = spmd_try(&r,
                           module_text("f32", 1,
                                       "  ROOT ar = f32[8] all-reduce(x), "
                                       "replica_groups={{0,1,2,3}}, to_apply=add\n"),
                           2, 1, 0);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "only 2 ids"));
  kiln_status_free(s);
  spmd_done(&r);
  s = spmd_try(&r,
               module_text("f32", 1,
                           "  ROOT ar = f32[8] all-reduce(x), replica_groups={{0,1}}, "
                           "to_apply=add\n"),
               3, 1, 0);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "leaves out id 2"));
  kiln_status_free(s);
  spmd_done(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce_in_every_group_mode),
      cmocka_unit_test(test_all_gather_and_reduce_scatter_per_group_mode),
      cmocka_unit_test(test_all_to_all_broadcast_and_permute_cross_partition),
      cmocka_unit_test(test_tuple_all_to_all_and_variadic_all_reduce),
      cmocka_unit_test(test_async_pairs_scalars_and_loops),
      cmocka_unit_test(test_reduction_folds_in_rank_order),
      cmocka_unit_test(test_binary_reducers_fold_nan_and_infinities),
      cmocka_unit_test(test_missing_participant_is_deadline_exceeded),
      cmocka_unit_test(test_failing_participant_stops_the_others),
      cmocka_unit_test(test_groups_outside_the_world_are_refused),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
