/* A fake libnccl for tests without GPUs: exports NCCL's entry points with NCCL's ABI (declared
 * here from NCCL's public documentation, independently of kiln's runtime/cuda/nccl.h), records
 * the calls (fake_nccl.h) and does the math on host memory, which is what device memory is
 * under the tests' fake CUDA driver. The ranks of a communicator are threads of this process,
 * one per rank. A call outside ncclGroupStart/End is a group of one. At ncclGroupEnd a rank
 * posts its sends (copied into the clique's mailbox), then, when the group has collectives,
 * publishes them, meets every peer (a barrier; past KILN_TEST_COLLECTIVE_TIMEOUT_MS,
 * tests/collective_test_util.h: ncclSystemError), computes its results from the peers' send
 * buffers into temporaries, meets them again and writes its receive buffers; last it takes
 * its receives from the mailbox (waiting as long for each):
 * ranks that neither send to nor receive from a rank never wait for it, as with NCCL.
 * Reductions fold in rank order, ((v0 op v1) op v2) ..., bf16 and f16 in f32 rounded back
 * after every step. Collectives match by their position among a rank's collectives, receives
 * take the peer's sends in order. */
#include "tests/fake_nccl/fake_nccl.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
#include "tests/collective_test_util.h"

typedef int ncclResult_t;
typedef struct fake_id {
  char internal[128];
} ncclUniqueId;
enum { OK = 0, SYSTEM_ERROR = 2, INTERNAL_ERROR = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };
enum { I8, U8, I32, U32, I64, U64, F16, F32, F64, BF16 };
enum { SUM, PROD, MAX, MIN };
enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, SEND, RECV };

#define EXPORT __attribute__((visibility("default")))

typedef struct op {
  int kind, dt, red, peer; /* peer: send/recv peer, broadcast root */
  const void *send;
  void *recv;
  size_t count;
} op_t;

typedef struct message {
  struct message *next;
  int from, to;
  size_t bytes;
  void *data;
} message_t;

typedef struct clique {
  struct clique *next;
  message_t *mailbox; /* sends not yet received, in order */
  char id[128];
  int nranks, live;
  unsigned char *joined;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned gen;
  int arrived;
  op_t **ops; /* per rank: its published calls */
  int *nops;
} clique_t;

struct ncclComm {
  clique_t *c;
  int rank;
  op_t *pending;
  int npending, cap;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static clique_t *g_cliques;
static fake_nccl_stats_t g_stats;
static char g_fail_fn[64];
static int g_fail_result;
static int g_ids;

static __thread int t_depth;
static __thread struct ncclComm *t_comms[16];
static __thread int t_ncomms;

EXPORT void fake_nccl_get_stats(fake_nccl_stats_t *out) {
  pthread_mutex_lock(&g_mu);
  *out = g_stats;
  int n = 0;
  for (clique_t *c = g_cliques; c; c = c->next) n++;
  out->cliques_alive = n;
  pthread_mutex_unlock(&g_mu);
}

EXPORT void fake_nccl_reset(void) {
  pthread_mutex_lock(&g_mu);
  memset(&g_stats, 0, sizeof(g_stats));
  g_fail_fn[0] = 0;
  pthread_mutex_unlock(&g_mu);
}

EXPORT void fake_nccl_fail_next(const char *fn, int result) {
  pthread_mutex_lock(&g_mu);
  snprintf(g_fail_fn, sizeof(g_fail_fn), "%s", fn);
  g_fail_result = result;
  pthread_mutex_unlock(&g_mu);
}

/* Counts a call; returns the injected failure for `fn`, if any. */
static int note(const char *fn, int *counter) {
  pthread_mutex_lock(&g_mu);
  if (counter) (*counter)++;
  int r = OK;
  if (g_fail_fn[0] && !strcmp(g_fail_fn, fn)) {
    g_fail_fn[0] = 0;
    r = g_fail_result;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

EXPORT ncclResult_t ncclGetVersion(int *version) {
  const char *v = getenv("FAKE_NCCL_VERSION");
  *version = v ? atoi(v) : 22703;
  return OK;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case OK:
      return "fake: no error";
    case SYSTEM_ERROR:
      return "fake: a peer did not arrive";
    case INVALID_ARGUMENT:
      return "fake: invalid argument";
    case INVALID_USAGE:
      return "fake: invalid usage";
    default:
      return "fake: error";
  }
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  int r = note("ncclGetUniqueId", &g_stats.unique_ids);
  if (r) return r;
  memset(id, 0, sizeof(*id));
  pthread_mutex_lock(&g_mu);
  snprintf(id->internal, sizeof(id->internal), "fake-nccl-id-%d", ++g_ids);
  pthread_mutex_unlock(&g_mu);
  return OK;
}

EXPORT ncclResult_t ncclCommInitRank(struct ncclComm **comm, int nranks, ncclUniqueId id,
                                     int rank) {
  int r = note("ncclCommInitRank", &g_stats.inits);
  if (r) return r;
  if (nranks < 1 || rank < 0 || rank >= nranks || strncmp(id.internal, "fake-nccl-id-", 13))
    return INVALID_ARGUMENT;
  pthread_mutex_lock(&g_mu);
  clique_t *c = g_cliques;
  while (c && memcmp(c->id, id.internal, sizeof(c->id))) c = c->next;
  if (!c) {
    c = calloc(1, sizeof(*c));
    memcpy(c->id, id.internal, sizeof(c->id));
    c->nranks = nranks;
    c->joined = calloc((size_t)nranks, 1);
    c->ops = calloc((size_t)nranks, sizeof(*c->ops));
    c->nops = calloc((size_t)nranks, sizeof(*c->nops));
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->next = g_cliques;
    g_cliques = c;
  }
  if (c->nranks != nranks || c->joined[rank]) {
    pthread_mutex_unlock(&g_mu);
    return INVALID_USAGE;
  }
  c->joined[rank] = 1;
  c->live++;
  pthread_mutex_unlock(&g_mu);
  struct ncclComm *m = calloc(1, sizeof(*m));
  m->c = c;
  m->rank = rank;
  *comm = m;
  return OK;
}

static void comm_free(struct ncclComm *m) {
  pthread_mutex_lock(&g_mu);
  clique_t *c = m->c;
  if (--c->live == 0) {
    for (clique_t **l = &g_cliques; *l; l = &(*l)->next)
      if (*l == c) {
        *l = c->next;
        break;
      }
    while (c->mailbox) {
      message_t *msg = c->mailbox;
      c->mailbox = msg->next;
      free(msg->data);
      free(msg);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->joined);
    free(c->ops);
    free(c->nops);
    free(c);
  }
  pthread_mutex_unlock(&g_mu);
  free(m->pending);
  free(m);
}

EXPORT ncclResult_t ncclCommDestroy(struct ncclComm *m) {
  note("ncclCommDestroy", &g_stats.destroys);
  if (m) comm_free(m);
  return OK;
}

EXPORT ncclResult_t ncclCommAbort(struct ncclComm *m) {
  note("ncclCommAbort", &g_stats.aborts);
  if (m) comm_free(m);
  return OK;
}

/* ---- the math ---- */

static size_t dt_bytes(int dt) {
  static const size_t b[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return dt >= 0 && dt <= BF16 ? b[dt] : 0;
}

#define FOLD_INT(T, UT)                                  \
  {                                                      \
    T *o = out;                                          \
    const T *x = in;                                     \
    for (size_t e = 0; e < n; e++)                       \
      o[e] = red == SUM    ? (T)((UT)o[e] + (UT)x[e])    \
             : red == PROD ? (T)((UT)o[e] * (UT)x[e])    \
             : red == MAX  ? (o[e] > x[e] ? o[e] : x[e]) \
                           : (o[e] < x[e] ? o[e] : x[e]); \
    return;                                              \
  }
#define FOLD_FLOAT(T)                                    \
  {                                                      \
    T *o = out;                                          \
    const T *x = in;                                     \
    for (size_t e = 0; e < n; e++)                       \
      o[e] = red == SUM    ? o[e] + x[e]                 \
             : red == PROD ? o[e] * x[e]                 \
             : red == MAX  ? (o[e] > x[e] ? o[e] : x[e]) \
                           : (o[e] < x[e] ? o[e] : x[e]); \
    return;                                              \
  }

static float apply_f(int red, float a, float b) {
  return red == SUM ? a + b : red == PROD ? a * b : red == MAX ? (a > b ? a : b) : (a < b ? a : b);
}

/* out[e] = out[e] op in[e] */
static void fold(int dt, int red, void *out, const void *in, size_t n) {
  switch (dt) {
    case I8:
      FOLD_INT(int8_t, uint8_t)
    case U8:
      FOLD_INT(uint8_t, uint8_t)
    case I32:
      FOLD_INT(int32_t, uint32_t)
    case U32:
      FOLD_INT(uint32_t, uint32_t)
    case I64:
      FOLD_INT(int64_t, uint64_t)
    case U64:
      FOLD_INT(uint64_t, uint64_t)
    case F32:
      FOLD_FLOAT(float)
    case F64:
      FOLD_FLOAT(double)
    case F16:
    case BF16: {
      uint16_t *o = out;
      const uint16_t *x = in;
      for (size_t e = 0; e < n; e++)
        o[e] = dt == F16
                   ? kiln_f32_to_f16(apply_f(red, kiln_f16_to_f32(o[e]), kiln_f16_to_f32(x[e])))
                   : kiln_f32_to_bf16(apply_f(red, kiln_bf16_to_f32(o[e]), kiln_bf16_to_f32(x[e])));
      return;
    }
    default:
      return;
  }
}

/* ---- queueing and running groups ---- */

static ncclResult_t enqueue(const char *fn, int *counter, struct ncclComm *m, op_t op,
                            void *stream) {
  int r = note(fn, counter);
  if (r) return r;
  if (!m || !dt_bytes(op.dt) || (op.kind != ALL_REDUCE && op.kind != REDUCE_SCATTER && op.red) ||
      op.red < 0 || op.red > MIN)
    return INVALID_ARGUMENT;
  if ((op.kind == SEND || op.kind == RECV || op.kind == BROADCAST) &&
      (op.peer < 0 || op.peer >= m->c->nranks))
    return INVALID_ARGUMENT;
  pthread_mutex_lock(&g_mu);
  g_stats.dtypes[op.dt]++;
  if (op.kind == ALL_REDUCE || op.kind == REDUCE_SCATTER) g_stats.redops[op.red]++;
  g_stats.last_stream = stream;
  if (!t_depth) g_stats.ungrouped_calls++;
  pthread_mutex_unlock(&g_mu);
  if (m->npending == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 8;
    m->pending = realloc(m->pending, (size_t)m->cap * sizeof(*m->pending));
  }
  m->pending[m->npending++] = op;
  int i = 0;
  while (i < t_ncomms && t_comms[i] != m) i++;
  if (i == t_ncomms) {
    if (t_ncomms == 16) return INTERNAL_ERROR;
    t_comms[t_ncomms++] = m;
  }
  return OK;
}

static int barrier(clique_t *c) {
  pthread_mutex_lock(&c->mu);
  unsigned gen = c->gen;
  if (++c->arrived == c->nranks) {
    c->arrived = 0;
    c->gen++;
    pthread_cond_broadcast(&c->cv);
  } else {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += KILN_TEST_COLLECTIVE_TIMEOUT_MS / 1000;
    while (gen == c->gen)
      if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT) {
        pthread_mutex_unlock(&c->mu);
        return SYSTEM_ERROR;
      }
  }
  pthread_mutex_unlock(&c->mu);
  return OK;
}

/* The collective of rank `r` matching collective `i` of rank `me` (the k-th collective of
 * each list). */
static const op_t *match(clique_t *c, int me, int i, int r) {
  int k = 0;
  for (int j = 0; j < i; j++) k += c->ops[me][j].kind != SEND && c->ops[me][j].kind != RECV;
  for (int j = 0; j < c->nops[r]; j++) {
    const op_t *o = &c->ops[r][j];
    if (o->kind != SEND && o->kind != RECV && k-- == 0) return o;
  }
  return NULL;
}

static size_t result_bytes(const op_t *o, int nranks) {
  size_t b = o->count * dt_bytes(o->dt);
  return o->kind == ALL_GATHER ? b * (size_t)nranks : b;
}

/* Point-to-point: a send copies its data into the clique's mailbox at once (so a sender
 * never waits, as NCCL's sends to a peer that posts its receive later do not deadlock the
 * group); a receive waits (KILN_TEST_COLLECTIVE_TIMEOUT_MS) for the next message from its
 * peer. */
static void post(clique_t *c, int from, int to, const op_t *o) {
  message_t *msg = calloc(1, sizeof(*msg));
  msg->from = from;
  msg->to = to;
  msg->bytes = o->count * dt_bytes(o->dt);
  msg->data = malloc(msg->bytes ? msg->bytes : 1);
  memcpy(msg->data, o->send, msg->bytes);
  pthread_mutex_lock(&c->mu);
  message_t **tail = &c->mailbox;
  while (*tail) tail = &(*tail)->next;
  *tail = msg;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static int receive(clique_t *c, int from, int to, const op_t *o) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += KILN_TEST_COLLECTIVE_TIMEOUT_MS / 1000;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    for (message_t **l = &c->mailbox; *l; l = &(*l)->next) {
      message_t *msg = *l;
      if (msg->from != from || msg->to != to) continue;
      *l = msg->next;
      pthread_mutex_unlock(&c->mu);
      size_t bytes = o->count * dt_bytes(o->dt);
      int r = msg->bytes == bytes ? OK : INVALID_USAGE;
      if (!r) memcpy(o->recv, msg->data, bytes);
      free(msg->data);
      free(msg);
      return r;
    }
    if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT) {
      pthread_mutex_unlock(&c->mu);
      return SYSTEM_ERROR;
    }
  }
}

/* The collectives of the group: publish, meet, compute from the peers' send buffers into
 * temporaries, meet again (every peer done reading), write. */
static ncclResult_t run_collectives(struct ncclComm *m) {
  clique_t *c = m->c;
  int me = m->rank, n = c->nranks;
  c->ops[me] = m->pending;
  c->nops[me] = m->npending;
  int r = barrier(c);
  if (r) return r;
  void **temps = calloc((size_t)m->npending + 1, sizeof(void *));
  for (int i = 0; i < m->npending && !r; i++) {
    const op_t *o = &m->pending[i];
    if (o->kind == SEND || o->kind == RECV) continue;
    size_t es = dt_bytes(o->dt), bytes = result_bytes(o, n);
    unsigned char *t = temps[i] = malloc(bytes ? bytes : 1);
    for (int k = 0; k < n && !r; k++) {
      const op_t *p = match(c, me, i, k);
      if (!p || p->kind != o->kind || p->count != o->count || p->dt != o->dt || p->red != o->red ||
          (o->kind == BROADCAST && p->peer != o->peer)) {
        r = INVALID_USAGE;
        break;
      }
      const unsigned char *src = p->send;
      switch (o->kind) {
        case ALL_REDUCE:
          if (k == 0)
            memcpy(t, src, bytes);
          else
            fold(o->dt, o->red, t, src, o->count);
          break;
        case REDUCE_SCATTER:
          if (k == 0)
            memcpy(t, src + (size_t)me * bytes, bytes);
          else
            fold(o->dt, o->red, t, src + (size_t)me * bytes, o->count);
          break;
        case ALL_GATHER:
          memcpy(t + (size_t)k * o->count * es, src, o->count * es);
          break;
        case BROADCAST:
          if (k == o->peer) memcpy(t, src, bytes);
          break;
      }
    }
  }
  int r2 = barrier(c);
  for (int i = 0; i < m->npending; i++) {
    const op_t *o = &m->pending[i];
    if (!r && !r2 && temps[i]) memcpy(o->recv, temps[i], result_bytes(o, n));
    free(temps[i]);
  }
  free(temps);
  return r ? r : r2;
}

static ncclResult_t run_comm(struct ncclComm *m) {
  clique_t *c = m->c;
  int r = OK, collectives = 0;
  for (int i = 0; i < m->npending; i++) {
    const op_t *o = &m->pending[i];
    if (o->kind == SEND) post(c, m->rank, o->peer, o);
    collectives += o->kind != SEND && o->kind != RECV;
  }
  if (collectives) r = run_collectives(m);
  for (int i = 0; i < m->npending && !r; i++)
    if (m->pending[i].kind == RECV) r = receive(c, m->pending[i].peer, m->rank, &m->pending[i]);
  m->npending = 0;
  return r;
}

static ncclResult_t run_thread_groups(void) {
  ncclResult_t r = OK;
  for (int i = 0; i < t_ncomms; i++) {
    ncclResult_t ri = run_comm(t_comms[i]);
    if (!r) r = ri;
  }
  t_ncomms = 0;
  return r;
}

EXPORT ncclResult_t ncclGroupStart(void) {
  int r = note("ncclGroupStart", &g_stats.group_starts);
  if (r) return r;
  t_depth++;
  return OK;
}

EXPORT ncclResult_t ncclGroupEnd(void) {
  int r = note("ncclGroupEnd", &g_stats.group_ends);
  if (t_depth <= 0) return INVALID_USAGE;
  if (--t_depth) return r;
  ncclResult_t rr = run_thread_groups();
  return r ? r : rr;
}

static ncclResult_t submit(const char *fn, int *counter, struct ncclComm *m, op_t op,
                           void *stream) {
  ncclResult_t r = enqueue(fn, counter, m, op, stream);
  if (r || t_depth) return r;
  return run_thread_groups();
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int dt, int red,
                                  struct ncclComm *m, void *stream) {
  return submit("ncclAllReduce", &g_stats.all_reduce, m,
                (op_t){ALL_REDUCE, dt, red, 0, send, recv, count}, stream);
}

EXPORT ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, int dt,
                                  struct ncclComm *m, void *stream) {
  return submit("ncclAllGather", &g_stats.all_gather, m,
                (op_t){ALL_GATHER, dt, 0, 0, send, recv, count}, stream);
}

EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, int dt, int red,
                                      struct ncclComm *m, void *stream) {
  return submit("ncclReduceScatter", &g_stats.reduce_scatter, m,
                (op_t){REDUCE_SCATTER, dt, red, 0, send, recv, count}, stream);
}

EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, int dt, int root,
                                  struct ncclComm *m, void *stream) {
  return submit("ncclBroadcast", &g_stats.broadcast, m,
                (op_t){BROADCAST, dt, 0, root, send, recv, count}, stream);
}

EXPORT ncclResult_t ncclSend(const void *send, size_t count, int dt, int peer, struct ncclComm *m,
                             void *stream) {
  return submit("ncclSend", &g_stats.send, m, (op_t){SEND, dt, 0, peer, send, NULL, count}, stream);
}

EXPORT ncclResult_t ncclRecv(void *recv, size_t count, int dt, int peer, struct ncclComm *m,
                             void *stream) {
  return submit("ncclRecv", &g_stats.recv, m, (op_t){RECV, dt, 0, peer, NULL, recv, count}, stream);
}
