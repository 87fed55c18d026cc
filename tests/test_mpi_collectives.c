/* runtime/mpi: collectives between processes, each checked bit for bit against the in-process
 * clique (runtime/collectives.h) on the same data, and the failures.
 *
 * Run plainly (ctest test_mpi_collectives): OpenMPI missing is UNAVAILABLE naming the library
 * and the packages; the cross-process cases skip. Under `mpirun -np 2` (ctest
 * test_mpi_collectives_2proc, tests/mpi/mpirun2.sh): every collective x element type x
 * reduction on groups spanning the two processes — one participant per process, two per
 * process, members in a shuffled rank order, in place, an all-reduce large enough to split
 * unevenly — each local participant's result equal to what the in-process clique gives that
 * rank. KILN_MPI_TEST_MODE=deadline: process 1 skips an all-reduce, process 0 gets
 * DEADLINE_EXCEEDED naming rank 1 (then fails at once: broken); =mismatch: the processes run
 * different collectives, both get INVALID_ARGUMENT naming both. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "plugin/env_options.h"
#include "runtime/collectives.h"
#include "runtime/mpi.h"
#include "runtime/runtime_options.h"
#include "tests/skip_util.h"
#include "tests/status_test_util.h"

#define MAX_RANKS 4

/* Fails unless `s` is an error with `code` (kept: the caller reads its message). */
#define ASSERT_STATUS_CODE(s, code)                                                 \
  do {                                                                              \
    assert_non_null(s);                                                             \
    if (kiln_status_code(s) != (code))                                              \
      fail_msg("expected %s, got %s: %s", kiln_status_code_name(code),              \
               kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s)); \
    printf("as expected: %s\n", kiln_status_message(s));                            \
  } while (0)
#define TIMEOUT_MS 60000

typedef enum {
  C_ALL_REDUCE,
  C_REDUCE_SCATTER,
  C_ALL_GATHER,
  C_ALL_TO_ALL,
  C_PERMUTE,
  C_BCAST
} coll_t;

typedef struct job {
  coll_t coll;
  kiln_coll_dtype_t t;
  kiln_coll_reduction_t op;
  int64_t count;        /* all-reduce, permute, broadcast: elements */
  int64_t outer, inner; /* reduce-scatter: elements; all-gather / all-to-all: outer, inner bytes */
  bool in_place;
  int local_devices;
  int size;
  int members[MAX_RANKS]; /* rank -> participant */
} job_t;

static size_t send_bytes(const job_t *j) {
  size_t es = kiln_coll_dtype_bytes(j->t), s = (size_t)j->size;
  switch (j->coll) {
    case C_REDUCE_SCATTER:
      return (size_t)(j->outer * j->inner) * s * es;
    case C_ALL_GATHER:
      return (size_t)(j->outer * j->inner);
    case C_ALL_TO_ALL:
      return (size_t)(j->outer * j->inner) * s;
    default:
      return (size_t)j->count * es;
  }
}

static size_t recv_bytes(const job_t *j) {
  size_t es = kiln_coll_dtype_bytes(j->t), s = (size_t)j->size;
  switch (j->coll) {
    case C_REDUCE_SCATTER:
      return (size_t)(j->outer * j->inner) * es;
    case C_ALL_GATHER:
    case C_ALL_TO_ALL:
      return (size_t)(j->outer * j->inner) * s;
    default:
      return (size_t)j->count * es;
  }
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* Participant p's send buffer: floats where the fold order changes the sum (1e8, 1, -1e8 by
 * position and rank), other types pseudo-random bits (pred 0/1). */
static void fill(const job_t *j, int p, int rank, void *buf, size_t bytes) {
  unsigned char *b = buf;
  size_t es = kiln_coll_dtype_bytes(j->t), n = bytes / es;
  for (size_t e = 0; e < n; e++) {
    uint64_t r = mix((uint64_t)p * 1000003u + e + 1);
    int k = (int)((e + (size_t)rank) % 3);
    double v = (k == 0 ? 1e8 : k == 1 ? 1.0 : -1e8) + (double)(r % 1000) / 64.0;
    if (j->t == KILN_COLL_F32) {
      float f = (float)v;
      memcpy(b + e * es, &f, es);
    } else if (j->t == KILN_COLL_F64) {
      memcpy(b + e * es, &v, es);
    } else if (j->t == KILN_COLL_PRED) {
      b[e] = (unsigned char)(r & 1);
    } else {
      memcpy(b + e * es, &r, es);
    }
  }
}

/* ---- one rank of a job, in process (clique) or across processes (group) ---- */

typedef struct rank_call {
  const job_t *j;
  int rank;
  kiln_coll_clique_t *clique;  /* in process */
  const kiln_mpi_group_t *grp; /* or across processes */
  unsigned char *send, *recv;
  kiln_status status;
} rank_call_t;

static void *rank_main(void *arg) {
  rank_call_t *c = arg;
  const job_t *j = c->j;
  int r = c->rank, s = j->size;
  const void *send = j->in_place ? (const void *)c->recv : c->send;
  void *recv = c->recv;
  size_t bytes = recv_bytes(j);
  int source = r + 1 < s ? r + 1 : -1, target = r - 1;
  const char *name = "op";
  switch (j->coll) {
    case C_ALL_REDUCE:
      c->status = c->clique
                      ? kiln_coll_all_reduce(c->clique, r, name, j->t, j->op, send, recv, j->count)
                      : kiln_mpi_all_reduce(c->grp, name, j->t, j->op, send, recv, j->count);
      break;
    case C_REDUCE_SCATTER:
      c->status = c->clique ? kiln_coll_reduce_scatter(c->clique, r, name, j->t, j->op, send, recv,
                                                       j->outer, j->inner)
                            : kiln_mpi_reduce_scatter(c->grp, name, j->t, j->op, send, recv,
                                                      j->outer, j->inner);
      break;
    case C_ALL_GATHER:
      c->status =
          c->clique
              ? kiln_coll_all_gather(c->clique, r, name, send, recv, j->outer, (size_t)j->inner)
              : kiln_mpi_all_gather(c->grp, name, send, recv, j->outer, (size_t)j->inner);
      break;
    case C_ALL_TO_ALL:
      c->status =
          c->clique
              ? kiln_coll_all_to_all(c->clique, r, name, send, recv, j->outer, (size_t)j->inner)
              : kiln_mpi_all_to_all(c->grp, name, send, recv, j->outer, (size_t)j->inner);
      break;
    case C_PERMUTE:
      c->status = c->clique ? kiln_coll_permute(c->clique, r, name, source, send, recv, bytes)
                            : kiln_mpi_permute(c->grp, name, source, &target, target >= 0, send,
                                               recv, bytes);
      break;
    case C_BCAST:
      c->status = c->clique ? kiln_coll_broadcast(c->clique, r, name, send, recv, bytes)
                            : kiln_mpi_broadcast(c->grp, name, send, recv, bytes);
      break;
  }
  return NULL;
}

/* Fills rank r's buffers (in place: recv holds the operand, sized for both). */
static void make_buffers(const job_t *j, int r, rank_call_t *c) {
  size_t sb = send_bytes(j), rb = recv_bytes(j), big = sb > rb ? sb : rb;
  c->send = kiln_calloc(big + 1, 1);
  c->recv = kiln_calloc(big + 1, 1);
  fill(j, j->members[r], r, j->in_place ? c->recv : c->send, sb);
}

/* Every rank's result from the in-process clique: want[r] (owned). */
static void expected(const job_t *j, unsigned char **want) {
  kiln_coll_clique_t *cl = NULL;
  ASSERT_OK(kiln_coll_clique_create(j->size, TIMEOUT_MS, &cl));
  rank_call_t c[MAX_RANKS];
  pthread_t th[MAX_RANKS];
  for (int r = 0; r < j->size; r++) {
    c[r] = (rank_call_t){.j = j, .rank = r, .clique = cl};
    make_buffers(j, r, &c[r]);
    assert_int_equal(pthread_create(&th[r], NULL, rank_main, &c[r]), 0);
  }
  for (int r = 0; r < j->size; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < j->size; r++) {
    ASSERT_OK(c[r].status);
    want[r] = c[r].recv;
    kiln_free(c[r].send);
  }
  kiln_coll_clique_destroy(cl);
}

static kiln_mpi_t *world(void) {
  kiln_mpi_t *m = NULL;
  ASSERT_OK(kiln_mpi_get(&m));
  assert_int_equal(kiln_mpi_size(m), 2);
  return m;
}

/* Runs j across the processes: this process's members each on a thread, their results
 * compared with the in-process clique's byte for byte. */
static void run_job(const job_t *j) {
  kiln_mpi_t *m = world();
  unsigned char *want[MAX_RANKS];
  expected(j, want);
  rank_call_t c[MAX_RANKS];
  kiln_mpi_group_t g[MAX_RANKS];
  pthread_t th[MAX_RANKS];
  bool mine[MAX_RANKS] = {0};
  for (int r = 0; r < j->size; r++) {
    mine[r] = j->members[r] / j->local_devices == kiln_mpi_rank(m);
    if (!mine[r]) continue;
    g[r] = (kiln_mpi_group_t){.mpi = m,
                              .members = j->members,
                              .size = j->size,
                              .rank = r,
                              .local_devices = j->local_devices,
                              .timeout_ms = TIMEOUT_MS};
    c[r] = (rank_call_t){.j = j, .rank = r, .grp = &g[r]};
    make_buffers(j, r, &c[r]);
    assert_int_equal(pthread_create(&th[r], NULL, rank_main, &c[r]), 0);
  }
  for (int r = 0; r < j->size; r++)
    if (mine[r]) pthread_join(th[r], NULL);
  for (int r = 0; r < j->size; r++) {
    if (mine[r]) {
      ASSERT_OK(c[r].status);
      if (memcmp(c[r].recv, want[r], recv_bytes(j)) != 0)
        fail_msg(
            "collective %d type %d op %d size %d rank %d (participant %d): differs from "
            "the in-process clique",
            (int)j->coll, (int)j->t, (int)j->op, j->size, r, j->members[r]);
      kiln_free(c[r].send);
      kiln_free(c[r].recv);
    }
    kiln_free(want[r]);
  }
}

/* The group layouts: one participant per process; two per process (participants 0,1 in
 * process 0, 2,3 in process 1) in order and shuffled; a pair across the processes. */
static const struct {
  int local_devices, size, members[MAX_RANKS];
} kLayouts[] = {{1, 2, {0, 1}}, {2, 4, {0, 1, 2, 3}}, {2, 4, {2, 0, 3, 1}}, {2, 2, {3, 0}}};
#define NUM_LAYOUTS (int)(sizeof kLayouts / sizeof kLayouts[0])

static job_t layout_job(int l, coll_t coll, kiln_coll_dtype_t t) {
  job_t j = {
      .coll = coll, .t = t, .local_devices = kLayouts[l].local_devices, .size = kLayouts[l].size};
  memcpy(j.members, kLayouts[l].members, sizeof j.members);
  return j;
}

static bool under_mpirun(void) {
  if (kiln_pjrt_mpi_launched()) return true;
  printf(
      "[  SKIP    ] not started by mpirun (ctest test_mpi_collectives_2proc runs this under "
      "mpirun -np 2)\n");
  return false;
}

#define NUM_TYPES 13

static void test_all_reduce_every_type_and_reduction_matches_in_process(void **state) {
  (void)state;
  if (!under_mpirun()) KILN_SKIPPED();
  for (int l = 0; l < NUM_LAYOUTS; l++)
    for (int t = 0; t < NUM_TYPES; t++)
      for (int op = KILN_COLL_SUM; op <= KILN_COLL_MAX; op++) {
        job_t j = layout_job(l, C_ALL_REDUCE, (kiln_coll_dtype_t)t);
        j.op = (kiln_coll_reduction_t)op;
        j.count = 37;
        run_job(&j);
      }
}

static void test_all_reduce_uneven_split_small_and_in_place(void **state) {
  (void)state;
  if (!under_mpirun()) KILN_SKIPPED();
  const int64_t counts[] = {0, 1, 3, 5003};
  for (int l = 0; l < NUM_LAYOUTS; l++)
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
      for (int in_place = 0; in_place < 2; in_place++) {
        kiln_coll_dtype_t types[] = {KILN_COLL_F32, KILN_COLL_BF16};
        for (int t = 0; t < 2; t++) {
          job_t j = layout_job(l, C_ALL_REDUCE, types[t]);
          j.count = counts[k];
          j.in_place = in_place;
          run_job(&j);
        }
      }
}

static void test_reduce_scatter_every_type_matches_in_process(void **state) {
  (void)state;
  if (!under_mpirun()) KILN_SKIPPED();
  for (int l = 0; l < NUM_LAYOUTS; l++)
    for (int t = 0; t < NUM_TYPES; t++) {
      job_t j = layout_job(l, C_REDUCE_SCATTER, (kiln_coll_dtype_t)t);
      j.op = t % 2 ? KILN_COLL_SUM : KILN_COLL_MAX;
      j.outer = 3;
      j.inner = 5;
      j.in_place = t % 3 == 0;
      run_job(&j);
    }
}

static void test_data_movers_match_in_process(void **state) {
  (void)state;
  if (!under_mpirun()) KILN_SKIPPED();
  const coll_t colls[] = {C_ALL_GATHER, C_ALL_TO_ALL, C_PERMUTE, C_BCAST};
  const kiln_coll_dtype_t types[] = {KILN_COLL_U8, KILN_COLL_BF16, KILN_COLL_F32, KILN_COLL_S64};
  for (int l = 0; l < NUM_LAYOUTS; l++)
    for (int c = 0; c < 4; c++)
      for (int t = 0; t < 4; t++)
        for (int in_place = 0; in_place < 2; in_place++) {
          job_t j = layout_job(l, colls[c], types[t]);
          size_t es = kiln_coll_dtype_bytes(types[t]);
          j.count = 29;
          j.outer = 3;
          j.inner = (int64_t)(7 * es); /* bytes per block */
          j.in_place = in_place;
          run_job(&j);
        }
}

/* ---- failures (each breaks MPI: its own mpirun, KILN_MPI_TEST_MODE) ---- */

static const int kPair[2] = {0, 1};

/* This process's participant of the group of both processes' one each. */
static kiln_mpi_group_t pair_group(kiln_mpi_t *m, int64_t timeout_ms) {
  return (kiln_mpi_group_t){.mpi = m,
                            .members = kPair,
                            .size = 2,
                            .rank = kiln_mpi_rank(m),
                            .local_devices = 1,
                            .timeout_ms = timeout_ms};
}

static void test_missing_rank_is_deadline_exceeded_naming_it(void **state) {
  (void)state;
  kiln_mpi_t *m = world();
  kiln_mpi_group_t g = pair_group(m, 300);
  float x[4] = {1, 2, 3, 4}, y[4];
  if (kiln_mpi_rank(m) == 1) return; /* never arrives */
  kiln_status st = kiln_mpi_all_reduce(&g, "all-reduce.7", KILN_COLL_F32, KILN_COLL_SUM, x, y, 4);
  ASSERT_STATUS_CODE(st, KILN_DEADLINE_EXCEEDED);
  const char *msg = kiln_status_message(st);
  assert_non_null(strstr(msg, "all-reduce.7"));
  assert_non_null(strstr(msg, "rank(s) 1 did not arrive"));
  kiln_status_free(st);
  /* broken: the next call fails at once with the same error */
  st = kiln_mpi_all_gather(&g, "all-gather.8", x, y, 1, 8);
  ASSERT_STATUS_CODE(st, KILN_DEADLINE_EXCEEDED);
  kiln_status_free(st);
}

static void test_different_collectives_are_invalid_argument_naming_both(void **state) {
  (void)state;
  kiln_mpi_t *m = world();
  kiln_mpi_group_t g = pair_group(m, TIMEOUT_MS); /* both arrive: no deadline to meet */
  float x[4] = {1, 2, 3, 4}, y[8];
  kiln_status st = kiln_mpi_rank(m) == 0 ? kiln_mpi_all_reduce(&g, "all-reduce.3", KILN_COLL_F32,
                                                               KILN_COLL_SUM, x, y, 4)
                                         : kiln_mpi_all_gather(&g, "all-gather.4", x, y, 1, 16);
  ASSERT_STATUS_CODE(st, KILN_INVALID_ARGUMENT);
  const char *msg = kiln_status_message(st);
  assert_non_null(strstr(msg, "all-reduce.3"));
  assert_non_null(strstr(msg, "all-gather.4"));
  kiln_status_free(st);
}

/* Not under mpirun: a library that is not there. */
static void test_missing_library_is_unavailable_naming_it(void **state) {
  (void)state;
  if (kiln_pjrt_mpi_launched()) {
    printf("[  SKIP    ] under mpirun: MPI is loaded already\n");
    KILN_SKIPPED();
  }
  kiln_runtime_options_t ro = kiln_runtime_options();
  ro.mpi_library = "libmpi-not-installed.so.40";
  kiln_runtime_options_set(&ro);
  kiln_mpi_t *m = NULL;
  kiln_status st = kiln_mpi_get(&m);
  ASSERT_STATUS_CODE(st, KILN_UNAVAILABLE);
  assert_null(m);
  const char *msg = kiln_status_message(st);
  assert_non_null(strstr(msg, "libmpi-not-installed.so.40"));
  assert_non_null(strstr(msg, "libopenmpi3"));
  kiln_status_free(st);
  /* the same answer again, without loading anything twice */
  st = kiln_mpi_get(&m);
  ASSERT_STATUS_CODE(st, KILN_UNAVAILABLE);
  kiln_status_free(st);
  ro.mpi_library = NULL;
  kiln_runtime_options_set(&ro);
}

int main(void) {
  const char *mode = getenv("KILN_MPI_TEST_MODE");
  int rc;
  if (mode && strcmp(mode, "deadline") == 0) {
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_missing_rank_is_deadline_exceeded_naming_it)};
    rc = kiln_run_tests(t, NULL, NULL);
  } else if (mode && strcmp(mode, "mismatch") == 0) {
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_different_collectives_are_invalid_argument_naming_both)};
    rc = kiln_run_tests(t, NULL, NULL);
  } else {
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_missing_library_is_unavailable_naming_it),
        cmocka_unit_test(test_all_reduce_every_type_and_reduction_matches_in_process),
        cmocka_unit_test(test_all_reduce_uneven_split_small_and_in_place),
        cmocka_unit_test(test_reduce_scatter_every_type_matches_in_process),
        cmocka_unit_test(test_data_movers_match_in_process),
    };
    rc = kiln_run_tests(t, NULL, NULL);
  }
  kiln_mpi_finalize();
  return rc;
}
