/* runtime/collectives: each collective on 4 ranks (one thread each) against answers written
 * out here, reductions per dtype and in rank order, in-place buffers, and the failures: a
 * rank that never arrives (DEADLINE_EXCEEDED naming it, then the clique stays broken), ranks
 * that disagree about the collective (INVALID_ARGUMENT naming both), split collectives
 * (deferred, abandoned, broken after arrival). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <string.h>

#include "runtime/collectives.h"
#include "tests/skip_util.h"
#include "tests/status_test_util.h"

#define RANKS 4
#define N 12

typedef struct {
  kiln_coll_clique_t *c;
  int rank;
  void (*body)(kiln_coll_clique_t *c, int rank, kiln_status *out);
  kiln_status status;
} rank_t;

static void *rank_main(void *arg) {
  rank_t *r = arg;
  r->body(r->c, r->rank, &r->status);
  return NULL;
}

/* Runs body on every rank of a fresh clique; statuses come back in out[] (owned). */
static void run_ranks(int n, int64_t timeout_ms,
                      void (*body)(kiln_coll_clique_t *, int, kiln_status *), kiln_status *out) {
  kiln_coll_clique_t *c = NULL;
  ASSERT_OK(kiln_coll_clique_create(n, timeout_ms, &c));
  pthread_t th[RANKS];
  rank_t r[RANKS];
  for (int i = 0; i < n; i++) {
    r[i] = (rank_t){c, i, body, NULL};
    assert_int_equal(pthread_create(&th[i], NULL, rank_main, &r[i]), 0);
  }
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    out[i] = r[i].status;
  }
  kiln_coll_clique_destroy(c);
}

static void run_all_ok(void (*body)(kiln_coll_clique_t *, int, kiln_status *)) {
  kiln_status st[RANKS];
  run_ranks(RANKS, 60000, body, st);
  for (int i = 0; i < RANKS; i++)
    if (st[i]) fail_msg("rank %d: %s", i, kiln_status_message(st[i]));
}

/* rank r's data: 10 r + e */
static float val(int r, int e) {
  return (float)(10 * r + e);
}

static void all_reduce_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  float x[N], y[N];
  int32_t xi[N];
  double xd[N];
  for (int e = 0; e < N; e++) {
    x[e] = val(rank, e);
    xi[e] = (int32_t)val(rank, e) - 20;
    xd[e] = rank == 2 ? NAN : val(rank, e);
  }
  kiln_status s = kiln_coll_all_reduce(c, rank, "ar", KILN_COLL_F32, KILN_COLL_SUM, x, y, N);
  for (int e = 0; !s && e < N; e++) assert_true(y[e] == 60.0f + 4 * e);
  /* in place, integers, min */
  if (!s) s = kiln_coll_all_reduce(c, rank, "ar.min", KILN_COLL_S32, KILN_COLL_MIN, xi, xi, N);
  for (int e = 0; !s && e < N; e++) assert_int_equal(xi[e], e - 20);
  /* max propagates NaN */
  if (!s) s = kiln_coll_all_reduce(c, rank, "ar.max", KILN_COLL_F64, KILN_COLL_MAX, xd, xd, N);
  for (int e = 0; !s && e < N; e++) assert_true(isnan(xd[e]));
  *out = s;
}

static void test_all_reduce_sums_mins_and_max_with_nan(void **state) {
  (void)state;
  run_all_ok(all_reduce_body);
}

/* f32 rank order: ranks hold 1e8, 1, -1e8, 0: ((1e8 + 1) - 1e8) + 0 = 0, never 1. */
static void order_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  const float v[RANKS] = {1e8f, 1.0f, -1e8f, 0.0f};
  float y;
  *out = kiln_coll_all_reduce(c, rank, "order", KILN_COLL_F32, KILN_COLL_SUM, &v[rank], &y, 1);
  if (!*out) assert_true(y == 0.0f);
}

static void test_reduction_folds_in_rank_order(void **state) {
  (void)state;
  run_all_ok(order_body);
}

static void movement_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  float x[N], y[N * RANKS];
  for (int e = 0; e < N; e++) x[e] = val(rank, e);
  /* all-gather with outer 2: [2][RANKS][6] */
  kiln_status s = kiln_coll_all_gather(c, rank, "ag", x, y, 2, 6 * sizeof(float));
  for (int o = 0; !s && o < 2; o++)
    for (int k = 0; k < RANKS; k++)
      for (int j = 0; j < 6; j++) assert_true(y[(o * RANKS + k) * 6 + j] == val(k, o * 6 + j));
  /* all-to-all: blocks of 3 */
  float z[N];
  if (!s) s = kiln_coll_all_to_all(c, rank, "a2a", x, z, 1, 3 * sizeof(float));
  for (int k = 0; !s && k < RANKS; k++)
    for (int j = 0; j < 3; j++) assert_true(z[k * 3 + j] == val(k, rank * 3 + j));
  /* reduce-scatter: outer 1, inner 3 */
  float w[3];
  if (!s) s = kiln_coll_reduce_scatter(c, rank, "rs", KILN_COLL_F32, KILN_COLL_SUM, x, w, 1, 3);
  for (int j = 0; !s && j < 3; j++) assert_true(w[j] == 60.0f + 4 * (rank * 3 + j));
  /* permute: ring r -> r + 1, rank 0 receives nothing */
  if (!s) s = kiln_coll_permute(c, rank, "cp", rank == 0 ? -1 : rank - 1, x, z, sizeof x);
  for (int e = 0; !s && e < N; e++) assert_true(z[e] == (rank == 0 ? 0.0f : val(rank - 1, e)));
  /* broadcast in place */
  if (!s) s = kiln_coll_broadcast(c, rank, "cb", x, x, sizeof x);
  for (int e = 0; !s && e < N; e++) assert_true(x[e] == val(0, e));
  *out = s;
}

/* kiln_coll_fold's max / min of signed zeros are IEEE 754-2019's, as the compiled maximum /
 * minimum (llvm.maximum) and the evaluator: max(-0, +0) = +0, min = -0, in either order. */
static void test_fold_max_min_order_signed_zeros(void **state) {
  (void)state;
  for (int order = 0; order < 2; order++) {
    const float a = order ? 0.0f : -0.0f, b = order ? -0.0f : 0.0f;
    float mx = a, mn = a;
    kiln_coll_fold(KILN_COLL_F32, KILN_COLL_MAX, &mx, &b, 1);
    kiln_coll_fold(KILN_COLL_F32, KILN_COLL_MIN, &mn, &b, 1);
    assert_true(mx == 0 && !signbit(mx));
    assert_true(mn == 0 && signbit(mn));
    double dx = a, db = b;
    kiln_coll_fold(KILN_COLL_F64, KILN_COLL_MAX, &dx, &db, 1);
    assert_true(dx == 0 && !signbit(dx));
    uint16_t hx = order ? 0x0000 : 0x8000, hb = order ? 0x8000 : 0x0000, hn = hx; /* bf16 */
    kiln_coll_fold(KILN_COLL_BF16, KILN_COLL_MAX, &hx, &hb, 1);
    kiln_coll_fold(KILN_COLL_BF16, KILN_COLL_MIN, &hn, &hb, 1);
    assert_int_equal(hx, 0x0000);
    assert_int_equal(hn, 0x8000);
  }
}

static void test_gather_all_to_all_scatter_permute_broadcast(void **state) {
  (void)state;
  run_all_ok(movement_body);
}

/* Rank 3 never calls: the others fail naming it; a later call fails at once. */
static void missing_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  if (rank == 3) return;
  float x = 1, y;
  *out = kiln_coll_all_reduce(c, rank, "grad_sum", KILN_COLL_F32, KILN_COLL_SUM, &x, &y, 1);
  if (!*out) return;
  kiln_status again =
      kiln_coll_all_reduce(c, rank, "next", KILN_COLL_F32, KILN_COLL_SUM, &x, &y, 1);
  assert_code(again, KILN_DEADLINE_EXCEEDED);
}

static void test_missing_rank_is_deadline_exceeded(void **state) {
  (void)state;
  kiln_status st[RANKS];
  run_ranks(RANKS, 100, missing_body, st);
  assert_null(st[3]);
  for (int i = 0; i < 3; i++) {
    assert_non_null(st[i]);
    assert_int_equal(kiln_status_code(st[i]), KILN_DEADLINE_EXCEEDED);
    const char *m = kiln_status_message(st[i]);
    if (!strstr(m, "all-reduce 'grad_sum'") || !strstr(m, "rank(s) 3 did not arrive"))
      fail_msg("%s", m);
    kiln_status_free(st[i]);
  }
}

/* Rank 1 runs an all-gather where the others run an all-reduce. */
static void mismatch_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  float x[2] = {1, 2}, y[2 * RANKS];
  if (rank == 1)
    *out = kiln_coll_all_gather(c, rank, "ag", x, y, 1, sizeof x);
  else
    *out = kiln_coll_all_reduce(c, rank, "ar", KILN_COLL_F32, KILN_COLL_SUM, x, y, 2);
}

static void test_mismatched_collectives_fail_every_rank(void **state) {
  (void)state;
  kiln_status st[RANKS];
  run_ranks(RANKS, 60000, mismatch_body, st);
  for (int i = 0; i < RANKS; i++) {
    assert_non_null(st[i]);
    assert_int_equal(kiln_status_code(st[i]), KILN_INVALID_ARGUMENT);
    const char *m = kiln_status_message(st[i]);
    if (!strstr(m, "'ag'") || !strstr(m, "'ar'")) fail_msg("%s", m);
    kiln_status_free(st[i]);
  }
}

static void test_bad_arguments_are_refused(void **state) {
  (void)state;
  kiln_coll_clique_t *c = NULL;
  assert_code(kiln_coll_clique_create(0, 100, &c), KILN_INVALID_ARGUMENT);
  assert_null(c);
  ASSERT_OK(kiln_coll_clique_create(1, 100, &c));
  float x = 3, y = 0;
  assert_code(kiln_coll_permute(c, 0, "cp", 5, &x, &y, sizeof x), KILN_INVALID_ARGUMENT);
  assert_code(kiln_coll_all_reduce(c, 1, "ar", KILN_COLL_F32, KILN_COLL_SUM, &x, &y, 1),
              KILN_INVALID_ARGUMENT);
  ASSERT_OK(kiln_coll_all_reduce(c, 0, "ar", KILN_COLL_F32, KILN_COLL_SUM, &x, &y, 1));
  assert_true(y == 3);
  kiln_coll_clique_destroy(c);
}

/* Split collectives (kiln_coll_defer / kiln_coll_complete). Ranks 1.. call only after rank
 * 0's deferred call returned: a call that waited for its peers would never return (the peers
 * give up after 20 s and the test fails). Twice in a row, a small all-reduce and one large
 * enough to take the split path, then an all-gather the whole clique runs synchronously. */
static atomic_int g_rank0_returned;

static bool wait_for_rank0(int round) {
  for (int i = 0; i < 20000; i++) {
    if (atomic_load(&g_rank0_returned) > round) return true;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return false;
}

#define BIG (RANKS * 4096 + 5)

static void deferred_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  static float x[RANKS][BIG], y[RANKS][BIG];
  for (int round = 0; round < 2 && !*out; round++) {
    int64_t n = round ? BIG : N;
    for (int64_t e = 0; e < n; e++) x[rank][e] = val(rank, (int)(e % 1000));
    if (rank && !wait_for_rank0(round)) {
      *out = kiln_status_make(KILN_INTERNAL, "rank 0's deferred all-reduce did not return");
      kiln_coll_clique_abort(c, "rank 0 blocked");
      return;
    }
    kiln_coll_defer(c, rank);
    *out = kiln_coll_all_reduce(c, rank, "ar", KILN_COLL_F32, KILN_COLL_SUM, x[rank], y[rank], n);
    if (*out) return;
    if (rank == 0) atomic_fetch_add(&g_rank0_returned, 1);
    /* between the two halves: a collective on the same clique is refused */
    assert_code(kiln_coll_all_gather(c, rank, "ag", x[rank], y[rank], 1, 4),
                KILN_FAILED_PRECONDITION);
    *out = kiln_coll_complete(c, rank);
    for (int64_t e = 0; e < n && !*out; e++) {
      float want = 0;
      for (int k = 0; k < RANKS; k++) want += val(k, (int)(e % 1000));
      if (y[rank][e] != want)
        *out = kiln_status_make(KILN_INTERNAL, "rank %d round %d element %lld: %g, want %g", rank,
                                round, (long long)e, y[rank][e], want);
    }
  }
  if (*out) return;
  float one = (float)rank, all[RANKS];
  *out = kiln_coll_all_gather(c, rank, "ag", &one, all, 1, sizeof one);
  for (int k = 0; k < RANKS && !*out; k++)
    if (all[k] != (float)k) *out = kiln_status_make(KILN_INTERNAL, "gathered %g at %d", all[k], k);
}

static void test_deferred_collective_returns_before_its_peers_arrive(void **state) {
  (void)state;
  atomic_store(&g_rank0_returned, 0);
  run_all_ok(deferred_body);
}

/* complete with nothing deferred; a peer that never arrives is a DEADLINE_EXCEEDED from
 * complete, naming it. */
static void test_deferred_misuse_and_deadline(void **state) {
  (void)state;
  kiln_coll_clique_t *c = NULL;
  ASSERT_OK(kiln_coll_clique_create(2, 100, &c));
  assert_code(kiln_coll_complete(c, 0), KILN_FAILED_PRECONDITION);
  assert_code(kiln_coll_complete(c, 2), KILN_INVALID_ARGUMENT);
  float x = 1, y = 0;
  kiln_coll_defer(c, 0);
  ASSERT_OK(kiln_coll_all_reduce(c, 0, "late", KILN_COLL_F32, KILN_COLL_SUM, &x, &y, 1));
  kiln_status s = kiln_coll_complete(c, 0);
  assert_int_equal(kiln_status_code(s), KILN_DEADLINE_EXCEEDED);
  if (!strstr(kiln_status_message(s), "all-reduce 'late'") ||
      !strstr(kiln_status_message(s), "rank(s) 1 did not arrive"))
    fail_msg("%s", kiln_status_message(s));
  kiln_status_free(s);
  kiln_coll_clique_destroy(c);
}

/* A rank that stops between the halves (kiln_coll_abandon) or a clique that breaks after
 * every rank arrived: the rank returns only when its peer finished reading its buffers. Rank 1
 * poisons its buffers (NaN: as if freed and reused) as soon as its call returns; rank 0
 * completes 100 ms later and must still get the exact sum. Both a small all-reduce and one on
 * the split path (which also reads rank 1's result buffer). */
static atomic_int g_step;
static int g_break_mode; /* 0: rank 1 abandons; 1: rank 1 aborts the clique, then completes */

static bool wait_step(int at_least) {
  for (int i = 0; i < 20000; i++) {
    if (atomic_load(&g_step) >= at_least) return true;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return false;
}

#define PAIR_BIG (2 * 4096 + 3)

static int64_t g_stop_n;

static void stop_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  static float x[2][PAIR_BIG], y[2][PAIR_BIG];
  int64_t n = g_stop_n;
  for (int64_t e = 0; e < n; e++) x[rank][e] = val(rank, (int)(e % 1000));
  /* rank 0 publishes first, so rank 1's publish completes the arrival */
  if (rank == 1 && !wait_step(1)) {
    *out = kiln_status_make(KILN_INTERNAL, "rank 0 never deferred");
    return;
  }
  kiln_coll_defer(c, rank);
  *out = kiln_coll_all_reduce(c, rank, "ar", KILN_COLL_F32, KILN_COLL_SUM, x[rank], y[rank], n);
  if (*out) return;
  if (rank == 1) {
    if (g_break_mode == 0) {
      kiln_coll_abandon(c, 1, "its execution failed");
    } else {
      kiln_coll_clique_abort(c, "a participant elsewhere failed");
      *out = kiln_coll_complete(c, 1);
    }
    for (int64_t e = 0; e < n; e++) x[1][e] = y[1][e] = NAN;
    atomic_fetch_add(&g_step, 1);
    return;
  }
  atomic_fetch_add(&g_step, 1);
  struct timespec wait = {0, 100000000};
  nanosleep(&wait, NULL);
  *out = kiln_coll_complete(c, 0);
  for (int64_t e = 0; e < n && !*out; e++) {
    float want = val(0, (int)(e % 1000)) + val(1, (int)(e % 1000));
    if (y[0][e] != want)
      *out = kiln_status_make(KILN_INTERNAL,
                              "element %lld: %g, want %g (read after rank 1 "
                              "returned)",
                              (long long)e, y[0][e], want);
  }
}

static void test_a_rank_that_stops_returns_after_its_peers_read(void **state) {
  (void)state;
  for (int run = 0; run < 4; run++) {
    g_break_mode = run / 2;
    g_stop_n = run % 2 ? PAIR_BIG : N;
    atomic_store(&g_step, 0);
    kiln_status st[2];
    run_ranks(2, 20000, stop_body, st);
    for (int i = 0; i < 2; i++)
      if (st[i])
        fail_msg("%s, %lld elements, rank %d: %s", g_break_mode ? "aborted" : "abandoned",
                 (long long)g_stop_n, i, kiln_status_message(st[i]));
  }
}

/* Past arrival there is no deadline: rank 0 splits its all-reduce and computes between the
 * halves four times the clique's 100 ms timeout; rank 1's plain call waits for rank 0 to
 * finish reading (it used to give up at its later barrier with DEADLINE_EXCEEDED and return
 * while rank 0 would still read its buffers). Rank 1 poisons its buffers once it returns; rank
 * 0 must still get the exact sum. A small all-reduce and one on the split path. */
static void slow_half_body(kiln_coll_clique_t *c, int rank, kiln_status *out) {
  static float x[2][PAIR_BIG], y[2][PAIR_BIG];
  int64_t n = g_stop_n;
  for (int64_t e = 0; e < n; e++) x[rank][e] = val(rank, (int)(e % 1000));
  if (rank == 1) {
    if (!wait_step(1)) {
      *out = kiln_status_make(KILN_INTERNAL, "rank 0 never deferred");
      return;
    }
    *out = kiln_coll_all_reduce(c, 1, "ar", KILN_COLL_F32, KILN_COLL_SUM, x[1], y[1], n);
    for (int64_t e = 0; e < n; e++) x[1][e] = y[1][e] = NAN;
    atomic_fetch_add(&g_step, 1);
    return;
  }
  kiln_coll_defer(c, 0);
  *out = kiln_coll_all_reduce(c, 0, "ar", KILN_COLL_F32, KILN_COLL_SUM, x[0], y[0], n);
  atomic_fetch_add(&g_step, 1);
  if (*out) return;
  struct timespec wait = {0, 400000000};
  nanosleep(&wait, NULL);
  if (atomic_load(&g_step) != 1) {
    *out = kiln_status_make(KILN_INTERNAL, "rank 1 returned before rank 0 completed");
    kiln_coll_abandon(c, 0, "test failed");
    return;
  }
  *out = kiln_coll_complete(c, 0);
  for (int64_t e = 0; e < n && !*out; e++) {
    float want = val(0, (int)(e % 1000)) + val(1, (int)(e % 1000));
    if (y[0][e] != want)
      *out =
          kiln_status_make(KILN_INTERNAL, "element %lld: %g, want %g", (long long)e, y[0][e], want);
  }
}

static void test_no_deadline_after_arrival(void **state) {
  (void)state;
  for (int run = 0; run < 2; run++) {
    g_stop_n = run ? PAIR_BIG : N;
    atomic_store(&g_step, 0);
    kiln_status st[2];
    run_ranks(2, 100, slow_half_body, st);
    for (int i = 0; i < 2; i++)
      if (st[i])
        fail_msg("%lld elements, rank %d: %s", (long long)g_stop_n, i, kiln_status_message(st[i]));
  }
}

/* Abandoned before its peer arrived: the clique breaks at once, and the peer's call is ABORTED
 * naming the collective, the rank and why; nothing is left deferred. */
static void test_abandon_before_the_peers_arrive_breaks_the_clique(void **state) {
  (void)state;
  kiln_coll_clique_t *c = NULL;
  ASSERT_OK(kiln_coll_clique_create(2, 20000, &c));
  float x = 1, y = 0;
  kiln_coll_abandon(c, 0, "nothing deferred"); /* no-op */
  kiln_coll_defer(c, 0);
  ASSERT_OK(kiln_coll_all_reduce(c, 0, "early", KILN_COLL_F32, KILN_COLL_SUM, &x, &y, 1));
  kiln_coll_abandon(c, 0, "its kernel failed");
  assert_code(kiln_coll_complete(c, 0), KILN_FAILED_PRECONDITION);
  kiln_status s = kiln_coll_all_reduce(c, 1, "early", KILN_COLL_F32, KILN_COLL_SUM, &x, &y, 1);
  assert_int_equal(kiln_status_code(s), KILN_ABORTED);
  if (!strstr(kiln_status_message(s), "all-reduce 'early': rank 0 stopped before its done") ||
      !strstr(kiln_status_message(s), "its kernel failed"))
    fail_msg("%s", kiln_status_message(s));
  kiln_status_free(s);
  kiln_coll_clique_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce_sums_mins_and_max_with_nan),
      cmocka_unit_test(test_reduction_folds_in_rank_order),
      cmocka_unit_test(test_fold_max_min_order_signed_zeros),
      cmocka_unit_test(test_gather_all_to_all_scatter_permute_broadcast),
      cmocka_unit_test(test_missing_rank_is_deadline_exceeded),
      cmocka_unit_test(test_mismatched_collectives_fail_every_rank),
      cmocka_unit_test(test_bad_arguments_are_refused),
      cmocka_unit_test(test_deferred_collective_returns_before_its_peers_arrive),
      cmocka_unit_test(test_deferred_misuse_and_deadline),
      cmocka_unit_test(test_a_rank_that_stops_returns_after_its_peers_read),
      cmocka_unit_test(test_abandon_before_the_peers_arrive_breaks_the_clique),
      cmocka_unit_test(test_no_deadline_after_arrival),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
