/* In-process collectives between host devices (see collectives.h): two generation-counted
 * barriers per collective around a lock-free read of the peers' send buffers. */
#include "runtime/collectives.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/half.h"
#include "base/ieee_minmax.h"
#include "base/log.h"
#include "base/ragged_all_to_all.h"
#include "base/str.h"

typedef enum {
  OP_ALL_REDUCE,
  OP_REDUCE_SCATTER,
  OP_ALL_GATHER,
  OP_ALL_TO_ALL,
  OP_PERMUTE,
  OP_BROADCAST,
  OP_RAGGED_ALL_TO_ALL
} op_kind_t;

static const char *const kind_names[] = {
    "all-reduce",         "reduce-scatter",       "all-gather",       "all-to-all",
    "collective-permute", "collective-broadcast", "ragged-all-to-all"};

/* One rank's call, as its entry point described it. */
typedef struct {
  op_kind_t kind;
  const char *name;
  int64_t a, b; /* sizes every rank must agree on */
  const void *send;
  size_t send_bytes;
  void *recv;
  size_t recv_bytes;
  /* the operation's own arguments */
  kiln_coll_dtype_t t;
  kiln_coll_reduction_t op;
  int64_t outer, inner;
  size_t block;
  int source;
  const kiln_coll_ragged_t *ragged;
  kiln_ragged_sender_t sender; /* ragged: what peers read of this rank */
} call_t;

struct kiln_coll_clique {
  int size;
  int64_t timeout_ms;
  pthread_mutex_t mu; /* guards everything below */
  pthread_cond_t cv;
  uint64_t gen;      /* barriers completed */
  int waiting;       /* ranks inside the current barrier */
  uint64_t *entered; /* per rank: gen + 1 of the barrier it last entered */
  /* The collective under way, as its first rank described it. */
  op_kind_t kind;
  const char *name;
  int64_t a, b;
  const void **send; /* per rank, valid between the first and last barrier */
  void **recv;       /* per rank: a split all-reduce reads its peers' reduced chunks */
  const void **meta; /* per rank: a ragged all-to-all's kiln_ragged_sender_t */
  void **scratch;    /* per rank: staging for overlapping send/recv */
  size_t *scratch_cap;
  /* Per rank, split collectives (kiln_coll_defer): whether its next call defers, and the
   * deferred call (published, arrival barrier `pending_gen` entered) until it completes. */
  bool *defer, *pending_on;
  call_t *pending;
  uint64_t *pending_gen;
  kiln_status broken; /* the first failure; every later call returns a copy */
};

size_t kiln_coll_dtype_bytes(kiln_coll_dtype_t t) {
  switch (t) {
    case KILN_COLL_PRED:
    case KILN_COLL_S8:
    case KILN_COLL_U8:
      return 1;
    case KILN_COLL_S16:
    case KILN_COLL_U16:
    case KILN_COLL_BF16:
    case KILN_COLL_F16:
      return 2;
    case KILN_COLL_S32:
    case KILN_COLL_U32:
    case KILN_COLL_F32:
      return 4;
    default:
      return 8;
  }
}

static void free_split_state(kiln_coll_clique_t *c) {
  kiln_free(c->defer);
  kiln_free(c->pending_on);
  kiln_free(c->pending);
  kiln_free(c->pending_gen);
}

kiln_status kiln_coll_clique_create(int size, int64_t timeout_ms, kiln_coll_clique_t **out) {
  *out = NULL;
  if (size < 1 || size > 4096 || timeout_ms <= 0)
    return KILN_ERR_INVALID(
        "collective clique: %d ranks (1..4096) and timeout %" PRId64 " ms (> 0)", size, timeout_ms);
  kiln_coll_clique_t *c = kiln_try_calloc(1, sizeof *c);
  if (c) {
    c->entered = kiln_try_calloc((size_t)size, sizeof *c->entered);
    c->send = kiln_try_calloc((size_t)size, sizeof *c->send);
    c->recv = kiln_try_calloc((size_t)size, sizeof *c->recv);
    c->meta = kiln_try_calloc((size_t)size, sizeof *c->meta);
    c->scratch = kiln_try_calloc((size_t)size, sizeof *c->scratch);
    c->scratch_cap = kiln_try_calloc((size_t)size, sizeof *c->scratch_cap);
    c->defer = kiln_try_calloc((size_t)size, sizeof *c->defer);
    c->pending_on = kiln_try_calloc((size_t)size, sizeof *c->pending_on);
    c->pending = kiln_try_calloc((size_t)size, sizeof *c->pending);
    c->pending_gen = kiln_try_calloc((size_t)size, sizeof *c->pending_gen);
  }
  if (!c || !c->entered || !c->send || !c->recv || !c->meta || !c->scratch || !c->scratch_cap ||
      !c->defer || !c->pending_on || !c->pending || !c->pending_gen) {
    if (c) {
      free_split_state(c);
      kiln_free(c->entered);
      kiln_free(c->send);
      kiln_free(c->recv);
      kiln_free(c->meta);
      kiln_free(c->scratch);
      kiln_free(c->scratch_cap);
      kiln_free(c);
    }
    return KILN_ERR_EXHAUSTED("collective clique: out of host memory for %d ranks", size);
  }
  c->size = size;
  c->timeout_ms = timeout_ms;
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = c;
  return KILN_STATUS_OK;
}

void kiln_coll_clique_destroy(kiln_coll_clique_t *c) {
  if (!c) return;
  free_split_state(c);
  for (int i = 0; i < c->size; i++) kiln_free(c->scratch[i]);
  kiln_free(c->scratch);
  kiln_free(c->scratch_cap);
  kiln_free(c->send);
  kiln_free(c->recv);
  kiln_free(c->meta);
  kiln_free(c->entered);
  kiln_status_free(c->broken);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  kiln_free(c);
}

int kiln_coll_clique_size(const kiln_coll_clique_t *c) {
  return c->size;
}

void kiln_coll_clique_abort(kiln_coll_clique_t *c, const char *why) {
  kiln_mutex_lock(&c->mu);
  if (!c->broken) {
    c->broken = kiln_status_make(KILN_ABORTED, "%s", why ? why : "collective clique aborted");
    pthread_cond_broadcast(&c->cv);
  }
  kiln_mutex_unlock(&c->mu);
}

/* ---- barriers ---- */

static kiln_status copy_broken(const kiln_coll_clique_t *c) {
  return kiln_status_make(kiln_status_code(c->broken), "%s", kiln_status_message(c->broken));
}

/* The ranks that have not entered barrier `gen`, as "1, 3". */
static void missing_ranks(const kiln_coll_clique_t *c, uint64_t gen, kiln_strbuf_t *b) {
  int missing = 0;
  for (int k = 0; k < c->size; k++)
    if (c->entered[k] != gen + 1) kiln_strbuf_printf(b, "%s%d", missing++ ? ", " : "", k);
}

/* A collective's arrival (barrier `gen`) timed out: DEADLINE_EXCEEDED naming the ranks. */
static kiln_status deadline_error(const kiln_coll_clique_t *c, uint64_t gen) {
  kiln_strbuf_t b = {0};
  missing_ranks(c, gen, &b);
  kiln_status st = kiln_status_make(
      KILN_DEADLINE_EXCEEDED,
      "%s '%s' (%d ranks): rank(s) %s did not arrive within %" PRId64
      " ms; every device must run "
      "the same collectives in the same order (or raise the collective timeout: "
      "$KILN_COLLECTIVE_TIMEOUT_MS, in ms)",
      kind_names[c->kind], c->name ? c->name : "?", c->size, kiln_strbuf_cstr(&b), c->timeout_ms);
  kiln_strbuf_free(&b);
  return st;
}

/* c->timeout_ms from now. */
static struct timespec deadline_from_now(const kiln_coll_clique_t *c) {
  struct timespec d;
  clock_gettime(CLOCK_MONOTONIC, &d);
  d.tv_sec += (time_t)(c->timeout_ms / 1000);
  d.tv_nsec += (long)(c->timeout_ms % 1000) * 1000000L;
  if (d.tv_nsec >= 1000000000L) {
    d.tv_sec++;
    d.tv_nsec -= 1000000000L;
  }
  return d;
}

/* With c->mu held: enters the current barrier without waiting (the last rank to enter
 * completes it); returns its generation, for await_arrival or finishing_barrier. */
static uint64_t enter_barrier(kiln_coll_clique_t *c, int rank) {
  uint64_t my = c->gen;
  c->entered[rank] = my + 1;
  if (++c->waiting == c->size) {
    c->waiting = 0;
    c->gen++;
    pthread_cond_broadcast(&c->cv);
  }
  return my;
}

/* With c->mu held: waits until the arrival barrier `my` completed (every rank entered it), at
 * most the clique's timeout from now and no longer than the clique stays whole (nobody reads
 * a peer's buffers before arrival, so any rank may leave). */
static kiln_status await_arrival(kiln_coll_clique_t *c, uint64_t my) {
  if (c->gen != my) return KILN_STATUS_OK;
  struct timespec deadline = deadline_from_now(c);
  while (c->gen == my) {
    if (c->broken) return copy_broken(c);
    if (pthread_cond_timedwait(&c->cv, &c->mu, &deadline) != ETIMEDOUT || c->gen != my) continue;
    kiln_status late = deadline_error(c, my);
    if (c->broken) return late;
    c->broken = late;
    pthread_cond_broadcast(&c->cv);
    return copy_broken(c);
  }
  return KILN_STATUS_OK;
}

/* With c->mu held: a barrier after a collective's arrival. Every rank past arrival reads, or
 * will read once its done runs, its peers' buffers, so each waits for all of them whatever
 * breaks and however long it takes (a rank that left early would free buffers its peers
 * still read). Within one SPMD executable every participant ends its collectives in the same
 * order, so the missing ranks are on their way here; past the timeout the wait is logged
 * once (a program whose participants end their async collectives in different orders
 * deadlocks here) and goes on. */
static void finishing_barrier(kiln_coll_clique_t *c, int rank, const char *what) {
  uint64_t my = enter_barrier(c, rank);
  struct timespec deadline = deadline_from_now(c);
  while (c->gen == my)
    if (pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == ETIMEDOUT && c->gen == my) {
      kiln_strbuf_t b = {0};
      missing_ranks(c, my, &b);
      KILN_LOG_W("%s '%s' (%d ranks): rank %d has waited %" PRId64
                 " ms for rank(s) %s to %s and goes on waiting: they may still read its "
                 "buffers (participants that end their async collectives in different orders "
                 "deadlock here)",
                 kind_names[c->kind], c->name ? c->name : "?", c->size, rank, c->timeout_ms,
                 kiln_strbuf_cstr(&b), what);
      kiln_strbuf_free(&b);
      while (c->gen == my) pthread_cond_wait(&c->cv, &c->mu);
    }
}

/* ---- reductions: dst[e] = dst[e] op src[e] ---- */

#define FOLD_LOOP(T, EXPR)            \
  do {                                \
    T *d_ = dst;                      \
    const T *s_ = src;                \
    for (int64_t e = 0; e < n; e++) { \
      T x = d_[e], y = s_[e];         \
      d_[e] = (EXPR);                 \
    }                                 \
  } while (0)

/* Integers: sum and product wrap (computed unsigned). */
#define FOLD_INT(T, U)                \
  switch (op) {                       \
    case KILN_COLL_SUM:               \
      FOLD_LOOP(T, (T)((U)x + (U)y)); \
      break;                          \
    case KILN_COLL_PRODUCT:           \
      FOLD_LOOP(T, (T)((U)x * (U)y)); \
      break;                          \
    case KILN_COLL_MIN:               \
      FOLD_LOOP(T, y < x ? y : x);    \
      break;                          \
    case KILN_COLL_MAX:               \
      FOLD_LOOP(T, y > x ? y : x);    \
      break;                          \
  }

/* Floats: min and max are IEEE 754-2019's, as XLA's minimum / maximum (base/ieee_minmax.h):
 * a NaN operand wins, -0 < +0. */
#define FMIN_IEEE(x, y) _Generic((x), float : kiln_ieee_minf, default : kiln_ieee_min)(x, y)
#define FMAX_IEEE(x, y) _Generic((x), float : kiln_ieee_maxf, default : kiln_ieee_max)(x, y)
#define FOLD_FLOAT(T)                \
  switch (op) {                      \
    case KILN_COLL_SUM:              \
      FOLD_LOOP(T, x + y);           \
      break;                         \
    case KILN_COLL_PRODUCT:          \
      FOLD_LOOP(T, x *y);            \
      break;                         \
    case KILN_COLL_MIN:              \
      FOLD_LOOP(T, FMIN_IEEE(x, y)); \
      break;                         \
    case KILN_COLL_MAX:              \
      FOLD_LOOP(T, FMAX_IEEE(x, y)); \
      break;                         \
  }

/* 16-bit floats: each step in f32, rounded back (the same as rounding the exact result: f32
 * has more than twice their precision, so the double rounding is innocuous). */
#define FOLD_HALF(TO, FROM)                              \
  switch (op) {                                          \
    case KILN_COLL_SUM:                                  \
      FOLD_LOOP(uint16_t, FROM(TO(x) + TO(y)));          \
      break;                                             \
    case KILN_COLL_PRODUCT:                              \
      FOLD_LOOP(uint16_t, FROM(TO(x) * TO(y)));          \
      break;                                             \
    case KILN_COLL_MIN:                                  \
      FOLD_LOOP(uint16_t, FROM(half_min(TO(x), TO(y)))); \
      break;                                             \
    case KILN_COLL_MAX:                                  \
      FOLD_LOOP(uint16_t, FROM(half_max(TO(x), TO(y)))); \
      break;                                             \
  }

static inline float half_min(float x, float y) {
  return FMIN_IEEE(x, y);
}
static inline float half_max(float x, float y) {
  return FMAX_IEEE(x, y);
}

void kiln_coll_fold(kiln_coll_dtype_t t, kiln_coll_reduction_t op, void *dst, const void *src,
                    int64_t n) {
  switch (t) {
    case KILN_COLL_PRED: /* add / max = or, multiply / min = and */
      if (op == KILN_COLL_SUM || op == KILN_COLL_MAX)
        FOLD_LOOP(uint8_t, (uint8_t)((x | y) != 0));
      else
        FOLD_LOOP(uint8_t, (uint8_t)((x & y) != 0));
      break;
    case KILN_COLL_S8:
      FOLD_INT(int8_t, uint8_t);
      break;
    case KILN_COLL_U8:
      FOLD_INT(uint8_t, unsigned);
      break;
    case KILN_COLL_S16:
      FOLD_INT(int16_t, uint16_t);
      break;
    case KILN_COLL_U16:
      FOLD_INT(uint16_t, unsigned);
      break;
    case KILN_COLL_S32:
      FOLD_INT(int32_t, uint32_t);
      break;
    case KILN_COLL_U32:
      FOLD_INT(uint32_t, uint32_t);
      break;
    case KILN_COLL_S64:
      FOLD_INT(int64_t, uint64_t);
      break;
    case KILN_COLL_U64:
      FOLD_INT(uint64_t, uint64_t);
      break;
    case KILN_COLL_F32:
      FOLD_FLOAT(float);
      break;
    case KILN_COLL_F64:
      FOLD_FLOAT(double);
      break;
    case KILN_COLL_BF16:
      FOLD_HALF(kiln_bf16_to_f32, kiln_f32_to_bf16);
      break;
    case KILN_COLL_F16:
      FOLD_HALF(kiln_f16_to_f32, kiln_f32_to_f16);
      break;
  }
}

/* dst[0..n) = ((send_0 op send_1) op ...) at byte offset `at` of every rank's send buffer. */
static void reduce_ranks(const kiln_coll_clique_t *c, kiln_coll_dtype_t t, kiln_coll_reduction_t op,
                         void *dst, size_t at, int64_t n) {
  size_t es = kiln_coll_dtype_bytes(t);
  memcpy(dst, (const char *)c->send[0] + at, (size_t)n * es);
  for (int k = 1; k < c->size; k++) kiln_coll_fold(t, op, dst, (const char *)c->send[k] + at, n);
}

/* ---- one collective ---- */

static void compute(const kiln_coll_clique_t *c, int rank, const call_t *x) {
  char *recv = x->recv;
  size_t es = kiln_coll_dtype_bytes(x->t);
  int n = c->size;
  switch (x->kind) {
    case OP_ALL_REDUCE:
      reduce_ranks(c, x->t, x->op, recv, 0, x->a);
      break;
    case OP_REDUCE_SCATTER:
      for (int64_t o = 0; o < x->outer; o++)
        reduce_ranks(c, x->t, x->op, recv + (size_t)(o * x->inner) * es,
                     (size_t)((o * n + rank) * x->inner) * es, x->inner);
      break;
    case OP_ALL_GATHER:
      for (int64_t o = 0; o < x->outer; o++)
        for (int k = 0; k < n; k++)
          memcpy(recv + (size_t)(o * n + k) * x->block,
                 (const char *)c->send[k] + (size_t)o * x->block, x->block);
      break;
    case OP_ALL_TO_ALL:
      for (int64_t o = 0; o < x->outer; o++)
        for (int k = 0; k < n; k++)
          memcpy(recv + (size_t)(o * n + k) * x->block,
                 (const char *)c->send[k] + (size_t)(o * n + rank) * x->block, x->block);
      break;
    case OP_PERMUTE:
      if (x->source >= 0)
        memcpy(recv, c->send[x->source], x->recv_bytes);
      else
        memset(recv, 0, x->recv_bytes);
      break;
    case OP_BROADCAST:
      memcpy(recv, c->send[0], x->recv_bytes);
      break;
    case OP_RAGGED_ALL_TO_ALL: /* ragged_compute: it can fail */
      break;
  }
}

/* ragged-all-to-all: this rank's result from its peers' published inputs and metadata. */
static kiln_status ragged_compute(const kiln_coll_clique_t *c, int rank, const call_t *x) {
  const kiln_coll_ragged_t *r = x->ragged;
  if (r->output != r->result && x->recv_bytes) memmove(r->result, r->output, x->recv_bytes);
  kiln_ragged_sender_t *from = kiln_try_calloc((size_t)c->size, sizeof *from);
  if (!from)
    return KILN_ERR_EXHAUSTED("ragged-all-to-all '%s': rank %d is out of host memory for %d peers",
                              x->name, rank, c->size);
  for (int k = 0; k < c->size; k++) from[k] = *(const kiln_ragged_sender_t *)c->meta[k];
  kiln_status st =
      kiln_ragged_all_to_all_receive(x->name, rank, c->size, r->updates, from, r->recv_sizes,
                                     r->result, r->output_rows, r->row_bytes);
  kiln_free(from);
  return st;
}

/* Large all-reduces: each rank folds its 1/size of the elements over every rank into its own
 * result, then copies the other chunks from their owners' results. Per rank that is `count`
 * elements folded and copied instead of size x count read; every element is still folded in
 * rank order by exactly one rank, so the result is the same bit for bit. */
#define SPLIT_MIN_ELEMENTS 4096

static void split_all_reduce(kiln_coll_clique_t *c, int rank, const call_t *x) {
  size_t es = kiln_coll_dtype_bytes(x->t);
  int64_t n = c->size;
  int64_t lo = x->a * rank / n, hi = x->a * (rank + 1) / n;
  reduce_ranks(c, x->t, x->op, (char *)x->recv + (size_t)lo * es, (size_t)lo * es, hi - lo);
  kiln_mutex_lock(&c->mu);
  finishing_barrier(c, rank, "finish reducing");
  kiln_mutex_unlock(&c->mu);
  for (int64_t k = 0; k < n; k++) {
    if (k == rank) continue;
    int64_t klo = x->a * k / n, khi = x->a * (k + 1) / n;
    memcpy((char *)x->recv + (size_t)klo * es, (const char *)c->recv[k] + (size_t)klo * es,
           (size_t)(khi - klo) * es);
  }
}

static bool overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return an && bn && a0 < b0 + bn && b0 < a0 + an;
}

/* A rank that cannot take part (its staging was refused): the clique breaks with ABORTED naming
 * it, so its peers return now rather than at the deadline; the rank gets RESOURCE_EXHAUSTED. */
static kiln_status refused(kiln_coll_clique_t *c, int rank, const call_t *x) {
  kiln_status st = KILN_ERR_EXHAUSTED("%s '%s': rank %d is out of host memory staging %zu bytes",
                                      kind_names[x->kind], x->name, rank, x->send_bytes);
  kiln_coll_clique_abort(c, kiln_status_message(st));
  return st;
}

/* This rank's part once every rank arrived: its result from the peers' published buffers,
 * then the barrier after which its own send buffer may change again. */
static kiln_status finish(kiln_coll_clique_t *c, int rank, const call_t *x) {
  kiln_status st = KILN_STATUS_OK;
  if (x->kind == OP_ALL_REDUCE && x->a >= (int64_t)c->size * SPLIT_MIN_ELEMENTS)
    split_all_reduce(c, rank, x);
  else if (x->kind == OP_RAGGED_ALL_TO_ALL)
    st = ragged_compute(c, rank, x); /* its own error, after the peers are done reading */
  else
    compute(c, rank, x);
  kiln_mutex_lock(&c->mu);
  finishing_barrier(c, rank, "finish reading");
  kiln_mutex_unlock(&c->mu);
  return st;
}

/* With c->mu held: checks `x` against the collective under way (the first rank to arrive
 * describes it), publishes this rank's buffers and enters the arrival barrier, whose
 * generation goes to *gen. */
static kiln_status publish(kiln_coll_clique_t *c, int rank, call_t *x, uint64_t *gen) {
  if (c->broken) return copy_broken(c);
  if (c->waiting == 0) {
    c->kind = x->kind;
    c->name = x->name;
    c->a = x->a;
    c->b = x->b;
  } else if (c->kind != x->kind || strcmp(c->name, x->name) != 0 || c->a != x->a || c->b != x->b) {
    c->broken = KILN_ERR_INVALID("rank %d called %s '%s' (sizes %" PRId64 ", %" PRId64
                                 ") while other ranks are in %s "
                                 "'%s' (sizes %" PRId64 ", %" PRId64
                                 "); every device must run the same collectives in "
                                 "the same order",
                                 rank, kind_names[x->kind], x->name, x->a, x->b,
                                 kind_names[c->kind], c->name, c->a, c->b);
    pthread_cond_broadcast(&c->cv);
    return copy_broken(c);
  }
  c->send[rank] = x->send;
  c->recv[rank] = x->recv;
  x->sender.input = x->send; /* staged, maybe */
  c->meta[rank] = &x->sender;
  *gen = enter_barrier(c, rank);
  return KILN_STATUS_OK;
}

static kiln_status run(kiln_coll_clique_t *c, int rank, call_t *x) {
  if (rank < 0 || rank >= c->size)
    return KILN_ERR_INVALID("%s '%s': rank %d outside a clique of %d", kind_names[x->kind], x->name,
                            rank, c->size);
  if ((x->send_bytes && !x->send) || (x->recv_bytes && !x->recv))
    return KILN_ERR_INVALID("%s '%s': rank %d passed a NULL buffer", kind_names[x->kind], x->name,
                            rank);
  /* Only this rank's thread touches entry `rank` of the per-rank arrays (scratch, defer,
   * pending); the lock orders them with the peers' reads of the published ones. */
  if (c->pending_on[rank])
    return kiln_status_make(
        KILN_FAILED_PRECONDITION,
        "%s '%s': rank %d has not completed its deferred %s '%s' on this clique "
        "(kiln_coll_complete first)",
        kind_names[x->kind], x->name, rank, kind_names[c->pending[rank].kind],
        c->pending[rank].name);
  /* Peers read our send buffer while we write our result: stage it when they overlap. */
  if (overlap(x->send, x->send_bytes, x->recv, x->recv_bytes)) {
    if (c->scratch_cap[rank] < x->send_bytes) {
      kiln_free(c->scratch[rank]);
      c->scratch_cap[rank] = 0;
      c->scratch[rank] = kiln_try_malloc(x->send_bytes);
      if (!c->scratch[rank]) return refused(c, rank, x);
      c->scratch_cap[rank] = x->send_bytes;
    }
    memcpy(c->scratch[rank], x->send, x->send_bytes);
    x->send = c->scratch[rank];
  }
  bool defer = c->defer[rank] && x->kind != OP_RAGGED_ALL_TO_ALL;
  c->defer[rank] = false;
  if (defer) { /* it outlives the caller's frame */
    c->pending[rank] = *x;
    x = &c->pending[rank];
  }
  uint64_t gen = 0;
  kiln_mutex_lock(&c->mu);
  kiln_status st = publish(c, rank, x, &gen);
  if (!st && defer) {
    c->pending_gen[rank] = gen;
    c->pending_on[rank] = true;
    kiln_mutex_unlock(&c->mu);
    return KILN_STATUS_OK;
  }
  if (!st) st = await_arrival(c, gen);
  kiln_mutex_unlock(&c->mu);
  if (st) return st;
  return finish(c, rank, x);
}

void kiln_coll_defer(kiln_coll_clique_t *c, int rank) {
  if (rank >= 0 && rank < c->size) c->defer[rank] = true;
}

kiln_status kiln_coll_complete(kiln_coll_clique_t *c, int rank) {
  if (rank < 0 || rank >= c->size)
    return KILN_ERR_INVALID("collective clique: rank %d outside a clique of %d", rank, c->size);
  if (!c->pending_on[rank])
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "collective clique: rank %d has no deferred collective to complete",
                            rank);
  c->pending_on[rank] = false;
  const call_t *x = &c->pending[rank];
  kiln_mutex_lock(&c->mu);
  kiln_status st = await_arrival(c, c->pending_gen[rank]);
  kiln_mutex_unlock(&c->mu);
  if (st) return st;
  return finish(c, rank, x);
}

void kiln_coll_abandon(kiln_coll_clique_t *c, int rank, const char *why) {
  if (rank < 0 || rank >= c->size || !c->pending_on[rank]) return;
  c->pending_on[rank] = false;
  const call_t *x = &c->pending[rank];
  kiln_mutex_lock(&c->mu);
  /* Until every rank arrived nobody reads: breaking the clique keeps it so (a late rank's
   * publish fails). Once they all arrived, each peer reads this rank's buffers. */
  bool arrived = c->gen != c->pending_gen[rank];
  if (!arrived && !c->broken) {
    c->broken = kiln_status_make(KILN_ABORTED, "%s '%s': rank %d stopped before its done (%s)",
                                 kind_names[x->kind], x->name, rank, why ? why : "?");
    pthread_cond_broadcast(&c->cv);
  }
  kiln_mutex_unlock(&c->mu);
  if (arrived) kiln_status_free(finish(c, rank, x));
}

/* ---- entry points ---- */

static kiln_status check_count(const char *kind, const char *name, int64_t n) {
  if (n < 0) return KILN_ERR_INVALID("%s '%s': negative size %" PRId64, kind, name, n);
  return KILN_STATUS_OK;
}

kiln_status kiln_coll_all_reduce(kiln_coll_clique_t *c, int rank, const char *name,
                                 kiln_coll_dtype_t t, kiln_coll_reduction_t op, const void *send,
                                 void *recv, int64_t count) {
  KILN_RETURN_IF_ERROR_PLAIN(check_count("all-reduce", name, count));
  size_t bytes = (size_t)count * kiln_coll_dtype_bytes(t);
  call_t x = {.kind = OP_ALL_REDUCE,
              .name = name,
              .a = count,
              .b = (int64_t)t * 8 + op,
              .send = send,
              .send_bytes = bytes,
              .recv = recv,
              .recv_bytes = bytes,
              .t = t,
              .op = op};
  return run(c, rank, &x);
}

kiln_status kiln_coll_reduce_scatter(kiln_coll_clique_t *c, int rank, const char *name,
                                     kiln_coll_dtype_t t, kiln_coll_reduction_t op,
                                     const void *send, void *recv, int64_t outer, int64_t inner) {
  KILN_RETURN_IF_ERROR_PLAIN(check_count("reduce-scatter", name, outer));
  KILN_RETURN_IF_ERROR_PLAIN(check_count("reduce-scatter", name, inner));
  size_t es = kiln_coll_dtype_bytes(t), recv_bytes = (size_t)(outer * inner) * es;
  call_t x = {.kind = OP_REDUCE_SCATTER,
              .name = name,
              .a = outer * inner,
              .b = (int64_t)t * 8 + op,
              .send = send,
              .send_bytes = recv_bytes * (size_t)c->size,
              .recv = recv,
              .recv_bytes = recv_bytes,
              .t = t,
              .op = op,
              .outer = outer,
              .inner = inner};
  return run(c, rank, &x);
}

kiln_status kiln_coll_all_gather(kiln_coll_clique_t *c, int rank, const char *name,
                                 const void *send, void *recv, int64_t outer, size_t block_bytes) {
  KILN_RETURN_IF_ERROR_PLAIN(check_count("all-gather", name, outer));
  size_t sb = (size_t)outer * block_bytes;
  call_t x = {.kind = OP_ALL_GATHER,
              .name = name,
              .a = outer,
              .b = (int64_t)block_bytes,
              .send = send,
              .send_bytes = sb,
              .recv = recv,
              .recv_bytes = sb * (size_t)c->size,
              .outer = outer,
              .block = block_bytes};
  return run(c, rank, &x);
}

kiln_status kiln_coll_all_to_all(kiln_coll_clique_t *c, int rank, const char *name,
                                 const void *send, void *recv, int64_t outer, size_t block_bytes) {
  KILN_RETURN_IF_ERROR_PLAIN(check_count("all-to-all", name, outer));
  size_t b = (size_t)outer * block_bytes * (size_t)c->size;
  call_t x = {.kind = OP_ALL_TO_ALL,
              .name = name,
              .a = outer,
              .b = (int64_t)block_bytes,
              .send = send,
              .send_bytes = b,
              .recv = recv,
              .recv_bytes = b,
              .outer = outer,
              .block = block_bytes};
  return run(c, rank, &x);
}

kiln_status kiln_coll_permute(kiln_coll_clique_t *c, int rank, const char *name, int source,
                              const void *send, void *recv, size_t bytes) {
  if (source < -1 || source >= c->size)
    return KILN_ERR_INVALID("collective-permute '%s': source %d outside a clique of %d", name,
                            source, c->size);
  call_t x = {.kind = OP_PERMUTE,
              .name = name,
              .a = (int64_t)bytes,
              .send = send,
              .send_bytes = bytes,
              .recv = recv,
              .recv_bytes = bytes,
              .source = source};
  return run(c, rank, &x);
}

kiln_status kiln_coll_broadcast(kiln_coll_clique_t *c, int rank, const char *name, const void *send,
                                void *recv, size_t bytes) {
  call_t x = {.kind = OP_BROADCAST,
              .name = name,
              .a = (int64_t)bytes,
              .send = send,
              .send_bytes = bytes,
              .recv = recv,
              .recv_bytes = bytes};
  return run(c, rank, &x);
}

kiln_status kiln_coll_ragged_all_to_all(kiln_coll_clique_t *c, int rank, const char *name,
                                        const kiln_coll_ragged_t *r) {
  KILN_RETURN_IF_ERROR_PLAIN(check_count("ragged-all-to-all", name, r->input_rows));
  KILN_RETURN_IF_ERROR_PLAIN(check_count("ragged-all-to-all", name, r->output_rows));
  KILN_RETURN_IF_ERROR_PLAIN(check_count("ragged-all-to-all", name, r->updates));
  if (r->updates && (!r->input_offsets || !r->send_sizes || !r->output_offsets || !r->recv_sizes))
    return KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d passed no offsets or sizes", name,
                            rank);
  call_t x = {.kind = OP_RAGGED_ALL_TO_ALL,
              .name = name,
              .a = r->updates,
              .b = (int64_t)r->row_bytes,
              .send = r->input,
              .send_bytes = (size_t)r->input_rows * r->row_bytes,
              .recv = r->result,
              .recv_bytes = (size_t)r->output_rows * r->row_bytes,
              .ragged = r};
  x.sender = (kiln_ragged_sender_t){r->input, r->input_rows, r->input_offsets, r->send_sizes,
                                    r->output_offsets};
  if (r->output_rows && !r->output)
    return KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d passed a NULL buffer", name, rank);
  return run(c, rank, &x);
}
