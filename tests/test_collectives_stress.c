/* runtime/collectives under load (CI runs it under ThreadSanitizer): 8 ranks run a few
 * hundred rounds of all-reduce, all-gather, all-to-all and permute back to back, sizes
 * changing every round (0 elements included; every 10th all-reduce large enough to split,
 * every third deferred and completed), some in place, checking every result; then aborted at
 * ten moments while they run: what returned is still right. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/collectives.h"
#include "tests/skip_util.h"
#include "tests/status_test_util.h"

#define RANKS 8
#define ROUNDS 300
#define MAX_N 257
/* Every 10th round an all-reduce this large takes the split path (>= 4096 per rank). */
#define BIG_N (RANKS * 4096 + 13)

typedef struct {
  kiln_coll_clique_t *c;
  int rank;
  int bad; /* wrong elements seen */
  kiln_status status;
} rank_t;

static int64_t size_of_round(int round) {
  return (round * 37) % MAX_N;
}

static void *rank_main(void *arg) {
  rank_t *r = arg;
  int64_t *x = kiln_malloc(sizeof(int64_t) * BIG_N);
  int64_t *y = kiln_malloc(sizeof(int64_t) * BIG_N);
  kiln_status s = KILN_STATUS_OK;
  for (int round = 0; round < ROUNDS && !s; round++) {
    int64_t n = size_of_round(round), nr = round % 10 ? n : BIG_N;
    for (int64_t e = 0; e < nr; e++) x[e] = round * 1000003 + r->rank * 1009 + e;
    /* all-reduce in place every other round */
    int64_t *dst = round % 2 ? x : y;
    /* split in two halves every third round */
    if (round % 3 == 1) kiln_coll_defer(r->c, r->rank);
    s = kiln_coll_all_reduce(r->c, r->rank, "ar", KILN_COLL_S64, KILN_COLL_SUM, x, dst, nr);
    if (!s && round % 3 == 1) s = kiln_coll_complete(r->c, r->rank);
    for (int64_t e = 0; !s && e < nr; e++)
      if (dst[e] != RANKS * (round * 1000003 + e) + 1009 * (RANKS * (RANKS - 1) / 2)) r->bad++;
    for (int64_t e = 0; e < n * RANKS; e++) x[e] = round * 1000003 + r->rank * 1009 + e;
    if (!s) s = kiln_coll_all_gather(r->c, r->rank, "ag", x, y, 1, (size_t)n * sizeof *x);
    for (int k = 0; !s && k < RANKS; k++)
      for (int64_t e = 0; e < n; e++)
        if (y[k * n + e] != round * 1000003 + k * 1009 + e) r->bad++;
    if (!s) s = kiln_coll_all_to_all(r->c, r->rank, "a2a", x, y, 1, (size_t)n * sizeof *x);
    for (int k = 0; !s && k < RANKS; k++)
      for (int64_t e = 0; e < n; e++)
        if (y[k * n + e] != round * 1000003 + k * 1009 + r->rank * n + e) r->bad++;
    int src = (r->rank + RANKS - 1 - round % 3) % RANKS;
    if (!s) s = kiln_coll_permute(r->c, r->rank, "cp", src, x, y, (size_t)n * sizeof *x);
    for (int64_t e = 0; !s && e < n; e++)
      if (y[e] != round * 1000003 + src * 1009 + e) r->bad++;
  }
  kiln_free(x); /* as soon as this rank's last call returned: no peer may read them now */
  kiln_free(y);
  r->status = s;
  return NULL;
}

/* Runs every rank; after `abort_after_ms` (0: never) the clique is aborted from this thread.
 * Returns the wrong elements seen; the ranks' statuses go to st[] (owned). */
static int run_ranks(int64_t abort_after_ms, kiln_status st[RANKS]) {
  kiln_coll_clique_t *c = NULL;
  ASSERT_OK(kiln_coll_clique_create(RANKS, 60000, &c));
  pthread_t th[RANKS];
  rank_t r[RANKS];
  for (int i = 0; i < RANKS; i++) {
    r[i] = (rank_t){c, i, 0, NULL};
    assert_int_equal(pthread_create(&th[i], NULL, rank_main, &r[i]), 0);
  }
  if (abort_after_ms) {
    struct timespec wait = {0, abort_after_ms * 1000000L};
    nanosleep(&wait, NULL);
    kiln_coll_clique_abort(c, "stopped by the test");
  }
  int bad = 0;
  for (int i = 0; i < RANKS; i++) {
    pthread_join(th[i], NULL);
    st[i] = r[i].status;
    bad += r[i].bad;
  }
  kiln_coll_clique_destroy(c);
  return bad;
}

static void test_many_rounds_of_mixed_collectives_stay_correct(void **state) {
  (void)state;
  kiln_status st[RANKS];
  int bad = run_ranks(0, st);
  for (int i = 0; i < RANKS; i++)
    if (st[i]) fail_msg("rank %d: %s", i, kiln_status_message(st[i]));
  printf("%d ranks x %d rounds x 4 collectives: %d wrong elements\n", RANKS, ROUNDS, bad);
  assert_int_equal(bad, 0);
}

/* The clique aborted while the ranks run: each stops with ABORTED at some collective's
 * arrival, and every collective that returned OK before has the right result, though each
 * rank rewrites (and at the end frees) its buffers as soon as a call returns: a rank past a
 * collective's arrival waits for its peers to finish reading, abort or not. Aborts at
 * ten different times. */
static void test_an_abort_while_ranks_read_breaks_no_result(void **state) {
  (void)state;
  for (int k = 0; k < 10; k++) {
    kiln_status st[RANKS];
    int bad = run_ranks(3 + 4 * k, st);
    int aborted = 0;
    for (int i = 0; i < RANKS; i++) {
      if (st[i] && kiln_status_code(st[i]) != KILN_ABORTED)
        fail_msg("rank %d: %s", i, kiln_status_message(st[i]));
      aborted += st[i] != NULL;
      kiln_status_free(st[i]);
    }
    printf("abort after %d ms: %d of %d ranks aborted, %d wrong elements\n", 3 + 4 * k, aborted,
           RANKS, bad);
    assert_int_equal(bad, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_many_rounds_of_mixed_collectives_stay_correct),
      cmocka_unit_test(test_an_abort_while_ranks_read_breaks_no_result),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
