/* Collective thunks on CUDA devices through NCCL, and the communicator cache (nccl.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nccl.h"
#include "runtime/spmd.h"

/* ---- the communicator cache ----------------------------------------------------------------- */

/* One rank of a group in this process: its device, communicator, collective stream and
 * events, and a scratch buffer for staging operands that overlap their results. */
typedef struct nccl_rank {
  kiln_device_t *dev; /* NULL: not claimed by a device of this process (g_cache.mu) */
  ncclComm_t comm;
  kiln_stream_t *stream;
  kiln_event_t *ready, *done;
  kiln_devptr_t scratch;
  size_t scratch_bytes;
  bool broken;        /* a collective failed on it: aborted, not destroyed, at release */
  pthread_mutex_t mu; /* serializes the rank's use of all of the above */
} nccl_rank_t;

typedef struct nccl_group {
  struct nccl_group *next;
  char *key; /* "nccl group of N: id,id,..." (device ids in rank order) */
  int nranks;
  bool have_id, retired; /* retired: a rank was released; never handed out again */
  ncclUniqueId id;
  nccl_rank_t *ranks;
} nccl_group_t;

static struct {
  pthread_mutex_t mu; /* guards everything below but a rank's own fields (its mutex, taken
                        after this one, never before) and comms_created (atomic) */
  nccl_group_t *groups;
  kiln_nccl_id_exchange_t exchange;
  bool have_exchange;
  int comms_created, ids_exchanged;
} g_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

void kiln_nccl_set_id_exchange(const kiln_nccl_id_exchange_t *x) {
  kiln_mutex_lock(&g_cache.mu);
  g_cache.have_exchange = x != NULL;
  if (x) g_cache.exchange = *x;
  kiln_mutex_unlock(&g_cache.mu);
}

bool kiln_nccl_get_id_exchange(kiln_nccl_id_exchange_t *out) {
  kiln_mutex_lock(&g_cache.mu);
  bool have = g_cache.have_exchange;
  if (have)
    *out = g_cache.exchange;
  else
    memset(out, 0, sizeof(*out));
  kiln_mutex_unlock(&g_cache.mu);
  return have;
}

void kiln_nccl_cache_stats(kiln_nccl_cache_stats_t *out) {
  memset(out, 0, sizeof(*out));
  kiln_mutex_lock(&g_cache.mu);
  for (nccl_group_t *g = g_cache.groups; g; g = g->next) {
    out->groups++;
    for (int r = 0; r < g->nranks; r++) {
      kiln_mutex_lock(&g->ranks[r].mu);
      out->comms += g->ranks[r].comm != NULL;
      kiln_mutex_unlock(&g->ranks[r].mu);
    }
  }
  out->comms_created = __atomic_load_n(&g_cache.comms_created, __ATOMIC_RELAXED);
  out->ids_exchanged = g_cache.ids_exchanged;
  kiln_mutex_unlock(&g_cache.mu);
}

static nccl_group_t *group_new(const char *key, int nranks) {
  nccl_group_t *g = kiln_calloc(1, sizeof(*g));
  g->key = kiln_strdup(key);
  g->nranks = nranks;
  g->ranks = kiln_calloc((size_t)nranks, sizeof(*g->ranks));
  for (int r = 0; r < nranks; r++) pthread_mutex_init(&g->ranks[r].mu, NULL);
  g->next = g_cache.groups;
  g_cache.groups = g;
  return g;
}

static void group_free(nccl_group_t *g) {
  for (int r = 0; r < g->nranks; r++) pthread_mutex_destroy(&g->ranks[r].mu);
  kiln_free(g->ranks);
  kiln_free(g->key);
  kiln_free(g);
}

/* The group's unique id, fetched or exchanged once (g_cache.mu held). */
static kiln_status group_id(const kiln_nccl_t *n, nccl_group_t *g, int64_t rank0_device) {
  if (g->have_id) return NULL;
  const kiln_nccl_id_exchange_t *x = g_cache.have_exchange ? &g_cache.exchange : NULL;
  if (x && x->is_local && !x->is_local(x->ctx, rank0_device)) {
    KILN_RETURN_IF_ERROR(x->get(x->ctx, g->key, &g->id),
                         "while reading the NCCL unique id of %s (its rank 0, device %" PRId64
                         ", is in another process)",
                         g->key, rank0_device);
    g_cache.ids_exchanged++;
  } else {
    KILN_RETURN_IF_ERROR_PLAIN(
        kiln_nccl_status_make(n, n->ncclGetUniqueId(&g->id), "ncclGetUniqueId (%s)", g->key));
    if (x) {
      KILN_RETURN_IF_ERROR(x->put(x->ctx, g->key, &g->id),
                           "while publishing the NCCL unique id of %s", g->key);
      g_cache.ids_exchanged++;
    }
  }
  g->have_id = true;
  return NULL;
}

static void rank_free_resources(const kiln_nccl_t *n, nccl_rank_t *s) {
  /* A communicator that saw an error may have work that never completes: abort it. */
  if (s->comm && n) (s->broken ? n->ncclCommAbort : n->ncclCommDestroy)(s->comm);
  s->broken = false;
  if (s->scratch) kiln_device_mem_free(s->dev, s->scratch);
  kiln_event_destroy(s->ready);
  kiln_event_destroy(s->done);
  kiln_stream_destroy(s->stream);
  s->comm = NULL;
  s->scratch = 0;
  s->scratch_bytes = 0;
  s->ready = s->done = NULL;
  s->stream = NULL;
}

/* The rank's communicator, stream and events, created on first use (s->mu held). */
static kiln_status rank_start(const kiln_nccl_t *n, nccl_group_t *g, int rank, ncclUniqueId id) {
  nccl_rank_t *s = &g->ranks[rank];
  if (s->comm) return NULL;
  kiln_status st = kiln_cuda_device_activate((kiln_cuda_device_t *)s->dev);
  if (!st) st = kiln_stream_create(s->dev, &s->stream);
  if (!st) st = kiln_event_create(s->dev, &s->ready);
  if (!st) st = kiln_event_create(s->dev, &s->done);
  if (!st)
    st = kiln_nccl_status_make(n, n->ncclCommInitRank(&s->comm, g->nranks, id, rank),
                               "ncclCommInitRank (rank %d of %s)", rank, g->key);
  if (st) {
    s->comm = NULL;
    rank_free_resources(n, s);
    return st;
  }
  /* Atomic: g_cache.mu is taken before a rank's lock, never after. */
  __atomic_fetch_add(&g_cache.comms_created, 1, __ATOMIC_RELAXED);
  return NULL;
}

/* Finds (or creates) the group `key` whose rank `rank` is free or `dev`'s, claims the rank for
 * `dev`, and returns it started and locked. */
static kiln_status rank_acquire(const kiln_nccl_t *n, const char *key, int nranks, int rank,
                                int64_t rank0_device, kiln_device_t *dev, nccl_rank_t **out) {
  kiln_mutex_lock(&g_cache.mu);
  nccl_group_t *g = NULL;
  for (nccl_group_t *it = g_cache.groups; it; it = it->next) {
    if (it->retired || it->nranks != nranks || strcmp(it->key, key)) continue;
    if (it->ranks[rank].dev == dev) {
      g = it;
      break;
    }
    if (!it->ranks[rank].dev && !g) g = it;
  }
  bool created = !g;
  if (!g) g = group_new(key, nranks);
  kiln_status s = group_id(n, g, rank0_device);
  if (s) {
    if (created) { /* nobody else has seen it: no entry for a group without an id */
      g_cache.groups = g->next;
      group_free(g);
    }
    kiln_mutex_unlock(&g_cache.mu);
    return s;
  }
  nccl_rank_t *slot = &g->ranks[rank];
  slot->dev = dev;
  ncclUniqueId id = g->id;
  kiln_mutex_unlock(&g_cache.mu);
  kiln_mutex_lock(&slot->mu);
  s = rank_start(n, g, rank, id);
  if (s) {
    kiln_mutex_unlock(&slot->mu);
    return s;
  }
  *out = slot;
  return NULL;
}

void kiln_nccl_device_release(kiln_device_t *dev) {
  kiln_mutex_lock(&g_cache.mu);
  const kiln_nccl_t *n = NULL;
  for (nccl_group_t **link = &g_cache.groups; *link;) {
    nccl_group_t *g = *link;
    bool alive = false;
    for (int r = 0; r < g->nranks; r++) {
      nccl_rank_t *s = &g->ranks[r];
      if (s->dev == dev) {
        if (s->comm && !n) kiln_status_free(kiln_nccl_get(&n));
        kiln_mutex_lock(&s->mu);
        rank_free_resources(n, s);
        s->dev = NULL;
        kiln_mutex_unlock(&s->mu);
        g->retired = true;
      }
      alive |= s->dev != NULL;
    }
    if (!alive && g->retired) {
      *link = g->next;
      group_free(g);
    } else {
      link = &g->next;
    }
  }
  kiln_mutex_unlock(&g_cache.mu);
}

/* ---- execution -------------------------------------------------------------------------- */

static void *ptr(kiln_devptr_t p) {
  return (void *)(uintptr_t)p;
}

static bool overlap(kiln_devptr_t a, uint64_t an, kiln_devptr_t b, uint64_t bn) {
  return an && bn && a < b + bn && b < a + an;
}

typedef struct coll_run {
  const char *name;
  const kiln_nccl_t *n;
  const kiln_coll_thunk_desc_t *d;
  nccl_rank_t *slot;
  CUstream cs; /* the collective stream */
  int me, rank, size;
  const int *members; /* the group's participants in rank order */
} coll_run_t;

#define NCCL_CALL(run, call, ...) \
  KILN_RETURN_IF_ERROR_PLAIN(kiln_nccl_status_make((run)->n, (call), __VA_ARGS__))

/* Enqueues the NCCL calls of operand `b` (inside the group). */
static kiln_status enqueue_one(const coll_run_t *run, const kiln_coll_thunk_buffer_t *b,
                               kiln_devptr_t send, kiln_devptr_t recv) {
  const kiln_coll_thunk_desc_t *d = run->d;
  const kiln_nccl_t *n = run->n;
  ncclComm_t comm = run->slot->comm;
  size_t es = kiln_coll_dtype_bytes(b->dtype), bb = b->block_bytes;
  ncclDataType_t t = ncclUint8;
  ncclRedOp_t op = ncclSum;
  if (d->op == KILN_COLL_THUNK_ALL_REDUCE || d->op == KILN_COLL_THUNK_REDUCE_SCATTER) {
    KILN_RETURN_IF_ERROR(kiln_nccl_dtype(b->dtype, &t), "in collective %s", run->name);
    KILN_RETURN_IF_ERROR(kiln_nccl_redop(d->reduction, &op), "in collective %s", run->name);
  }
  switch (d->op) {
    case KILN_COLL_THUNK_ALL_REDUCE:
      NCCL_CALL(run, n->ncclAllReduce(ptr(send), ptr(recv), (size_t)b->count, t, op, comm, run->cs),
                "ncclAllReduce (%s)", run->name);
      return NULL;
    case KILN_COLL_THUNK_ALL_GATHER:
      for (int64_t o = 0; o < b->outer; o++)
        NCCL_CALL(run,
                  n->ncclAllGather(ptr(send + (uint64_t)o * bb),
                                   ptr(recv + (uint64_t)o * (uint64_t)run->size * bb), bb,
                                   ncclUint8, comm, run->cs),
                  "ncclAllGather (%s, row %" PRId64 ")", run->name, o);
      return NULL;
    case KILN_COLL_THUNK_REDUCE_SCATTER: {
      uint64_t row = (uint64_t)b->inner * es;
      for (int64_t o = 0; o < b->outer; o++)
        NCCL_CALL(run,
                  n->ncclReduceScatter(ptr(send + (uint64_t)o * (uint64_t)run->size * row),
                                       ptr(recv + (uint64_t)o * row), (size_t)b->inner, t, op, comm,
                                       run->cs),
                  "ncclReduceScatter (%s, row %" PRId64 ")", run->name, o);
      return NULL;
    }
    case KILN_COLL_THUNK_ALL_TO_ALL:
      for (int64_t o = 0; o < b->outer; o++)
        for (int k = 0; k < run->size; k++) {
          uint64_t at = ((uint64_t)o * (uint64_t)run->size + (uint64_t)k) * bb;
          NCCL_CALL(run, n->ncclSend(ptr(send + at), bb, ncclUint8, k, comm, run->cs),
                    "ncclSend (%s, to rank %d)", run->name, k);
          NCCL_CALL(run, n->ncclRecv(ptr(recv + at), bb, ncclUint8, k, comm, run->cs),
                    "ncclRecv (%s, from rank %d)", run->name, k);
        }
      return NULL;
    case KILN_COLL_THUNK_PERMUTE: {
      size_t bytes = (size_t)b->recv.size;
      int source = d->source[run->me];
      /* This rank sends to every member whose source it is. */
      for (int k = 0; k < run->size; k++)
        if (d->source[run->members[k]] == run->rank)
          NCCL_CALL(run, n->ncclSend(ptr(send), bytes, ncclUint8, k, comm, run->cs),
                    "ncclSend (%s, to rank %d)", run->name, k);
      if (source >= 0)
        NCCL_CALL(run, n->ncclRecv(ptr(recv), bytes, ncclUint8, source, comm, run->cs),
                  "ncclRecv (%s, from rank %d)", run->name, source);
      return NULL;
    }
    case KILN_COLL_THUNK_BROADCAST:
      NCCL_CALL(
          run,
          n->ncclBroadcast(ptr(send), ptr(recv), (size_t)b->recv.size, ncclUint8, 0, comm, run->cs),
          "ncclBroadcast (%s)", run->name);
      return NULL;
    default:
      return KILN_ERR_INTERNAL("collective %s: op %s on NCCL", run->name,
                               kiln_coll_thunk_op_name(d->op));
  }
}

/* Operand k's addresses, staged through the scratch at *staged when its bytes overlap its
 * result's (an exact in-place all-reduce is NCCL's own in-place form and is not staged). */
static kiln_status operand(const coll_run_t *run, const kiln_thunk_exec_params_t *p, int k,
                           kiln_devptr_t *send, kiln_devptr_t *recv, uint64_t *staged) {
  const kiln_coll_thunk_buffer_t *b = &run->d->buffers[k];
  KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(p->buffers, b->send, send), "in collective %s",
                       run->name);
  KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(p->buffers, b->recv, recv), "in collective %s",
                       run->name);
  bool in_place = run->d->op == KILN_COLL_THUNK_ALL_REDUCE && *send == *recv;
  if (staged && !in_place &&
      overlap(*send, (uint64_t)b->send.size, *recv, (uint64_t)b->recv.size)) {
    kiln_devptr_t at = run->slot->scratch + *staged;
    KILN_RETURN_IF_ERROR_PLAIN(
        kiln_stream_memcpy_d2d(run->slot->stream, at, *send, (size_t)b->send.size));
    *send = at;
    *staged += ((uint64_t)b->send.size + 255) & ~(uint64_t)255;
  }
  return NULL;
}

/* The bytes operands that overlap their results need staged. */
static kiln_status staging_bytes(const coll_run_t *run, const kiln_thunk_exec_params_t *p,
                                 uint64_t *total) {
  *total = 0;
  for (int k = 0; k < run->d->num_buffers; k++) {
    kiln_devptr_t send, recv;
    KILN_RETURN_IF_ERROR_PLAIN(operand(run, p, k, &send, &recv, NULL));
    const kiln_coll_thunk_buffer_t *b = &run->d->buffers[k];
    bool in_place = run->d->op == KILN_COLL_THUNK_ALL_REDUCE && send == recv;
    if (!in_place && overlap(send, (uint64_t)b->send.size, recv, (uint64_t)b->recv.size))
      *total += ((uint64_t)b->send.size + 255) & ~(uint64_t)255;
  }
  return NULL;
}

static kiln_status ensure_scratch(nccl_rank_t *s, uint64_t bytes) {
  if (bytes <= s->scratch_bytes) return NULL;
  if (s->scratch) {
    /* Earlier collectives on this stream may still read it. */
    KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_synchronize(s->stream));
    kiln_device_mem_free(s->dev, s->scratch);
    s->scratch = 0;
    s->scratch_bytes = 0;
  }
  KILN_RETURN_IF_ERROR(kiln_device_mem_alloc(s->dev, (size_t)bytes, &s->scratch),
                       "NCCL staging buffer of %" PRIu64 " bytes", bytes);
  s->scratch_bytes = (size_t)bytes;
  return NULL;
}

/* The collective's NCCL group on the collective stream (slot locked, context current). */
static kiln_status issue(const coll_run_t *run, const kiln_thunk_exec_params_t *p) {
  const kiln_coll_thunk_desc_t *d = run->d;
  uint64_t need = 0, staged = 0;
  /* What NCCL cannot reduce fails before anything is issued. */
  for (int k = 0; k < d->num_buffers; k++) {
    ncclDataType_t t;
    ncclRedOp_t op;
    if (d->op == KILN_COLL_THUNK_ALL_REDUCE || d->op == KILN_COLL_THUNK_REDUCE_SCATTER) {
      KILN_RETURN_IF_ERROR(kiln_nccl_dtype(d->buffers[k].dtype, &t), "in collective %s", run->name);
      KILN_RETURN_IF_ERROR(kiln_nccl_redop(d->reduction, &op), "in collective %s", run->name);
    }
  }
  KILN_RETURN_IF_ERROR_PLAIN(staging_bytes(run, p, &need));
  KILN_RETURN_IF_ERROR_PLAIN(ensure_scratch(run->slot, need));
  /* Addresses first (staging copies go on the collective stream before the group). */
  int nb = d->num_buffers;
  kiln_devptr_t *addr = kiln_calloc((size_t)nb * 2, sizeof(*addr));
  kiln_status s = NULL;
  for (int k = 0; k < nb && !s; k++)
    s = operand(run, p, k, &addr[2 * k], &addr[2 * k + 1], &staged);
  /* A permute nobody sends to this rank: zeros. */
  for (int k = 0; k < nb && !s; k++)
    if (d->op == KILN_COLL_THUNK_PERMUTE && d->source[run->me] < 0 && d->buffers[k].recv.size)
      s = kiln_stream_memset(run->slot->stream, addr[2 * k + 1], 0, 1,
                             (size_t)d->buffers[k].recv.size);
  if (!s)
    s = kiln_nccl_status_make(run->n, run->n->ncclGroupStart(), "ncclGroupStart (%s)", run->name);
  if (s) {
    kiln_free(addr);
    return s;
  }
  for (int k = 0; k < nb && !s; k++) {
    const kiln_coll_thunk_buffer_t *b = &d->buffers[k];
    if (d->op != KILN_COLL_THUNK_ALL_TO_ALL_TUPLE) {
      if (b->recv.size) s = enqueue_one(run, b, addr[2 * k], addr[2 * k + 1]);
      continue;
    }
    /* Operand k goes to rank k; result k comes from rank k. */
    if (!b->recv.size) continue;
    s = kiln_nccl_status_make(run->n,
                              run->n->ncclSend(ptr(addr[2 * k]), (size_t)b->send.size, ncclUint8, k,
                                               run->slot->comm, run->cs),
                              "ncclSend (%s, to rank %d)", run->name, k);
    if (!s)
      s = kiln_nccl_status_make(run->n,
                                run->n->ncclRecv(ptr(addr[2 * k + 1]), (size_t)b->recv.size,
                                                 ncclUint8, k, run->slot->comm, run->cs),
                                "ncclRecv (%s, from rank %d)", run->name, k);
  }
  kiln_free(addr);
  /* The group is always closed, also after a failed enqueue. */
  return kiln_status_join(
      s, kiln_nccl_status_make(run->n, run->n->ncclGroupEnd(), "ncclGroupEnd (%s)", run->name));
}

kiln_status kiln_nccl_collective_execute(const char *name, const kiln_coll_thunk_desc_t *d,
                                         const kiln_thunk_exec_params_t *p,
                                         const kiln_spmd_participant_t *who) {
  if (!p->device || p->device->kind != KILN_DEVICE_CUDA || !who || !who->world)
    return KILN_ERR_INVALID("collective %s: NCCL runs on a CUDA device in a world", name);
  const kiln_nccl_t *n = NULL;
  KILN_RETURN_IF_ERROR(kiln_nccl_get(&n), "collective %s on %s", name, p->device->name);
  int me = who->participant, nparts = d->num_replicas * d->num_partitions;
  int rank = d->rank[me], size = d->group_size[me];
  int *members = kiln_calloc((size_t)size, sizeof(*members));
  for (int j = 0; j < nparts; j++)
    if (d->group_key[j] == d->group_key[me]) members[d->rank[j]] = j;
  kiln_strbuf_t key = {0};
  kiln_strbuf_printf(&key, "nccl group of %d: devices", size);
  for (int k = 0; k < size; k++)
    kiln_strbuf_printf(&key, "%s%" PRId64, k ? "," : " ",
                       kiln_spmd_world_device(who->world, members[k]));
  nccl_rank_t *slot = NULL;
  kiln_status s = rank_acquire(n, kiln_strbuf_cstr(&key), size, rank,
                               kiln_spmd_world_device(who->world, members[0]), p->device, &slot);
  kiln_strbuf_free(&key);
  if (s) {
    kiln_free(members);
    return kiln_status_annotate(s, "in collective %s", name);
  }
  coll_run_t run = {.name = name,
                    .n = n,
                    .d = d,
                    .slot = slot,
                    .cs = ((kiln_cuda_stream_t *)slot->stream)->stream,
                    .me = me,
                    .rank = rank,
                    .size = size,
                    .members = members};
  /* The end of a split collective (runtime/collective_thunk.h): the execution's stream waits
   * for the collective stream's done event, recorded by the start or by a later collective
   * of the group (in-order on that stream, so waiting for it covers this one). */
  if (d->phase == KILN_COLL_PHASE_DONE) {
    s = kiln_stream_wait_event(p->stream, slot->done);
    kiln_mutex_unlock(&slot->mu);
    kiln_free(members);
    return s;
  }
  /* The collective stream waits for the work before it; after the collective, unless this
   * is the start of a split collective (its done waits), the execution's stream waits for
   * the collective. */
  s = kiln_event_record(slot->ready, p->stream);
  if (!s) s = kiln_stream_wait_event(slot->stream, slot->ready);
  if (!s) s = kiln_cuda_device_activate((kiln_cuda_device_t *)p->device);
  bool enqueued = false;
  if (!s) {
    s = issue(&run, p);
    /* Past the checks, a failure is NCCL's or the stream's: the communicator is suspect. */
    if (s && kiln_status_code(s) != KILN_UNIMPLEMENTED) slot->broken = true;
    enqueued = !s;
  }
  if (!s) s = kiln_event_record(slot->done, slot->stream);
  if (!s && d->phase != KILN_COLL_PHASE_START) s = kiln_stream_wait_event(p->stream, slot->done);
  if (s && enqueued) s = kiln_status_annotate(s, "after collective %s", name);
  /* Failing once the collective is enqueued: no event tells when it ends, and the caller may
   * free its buffers on the error, so the collective stream drains first. */
  if (s && enqueued)
    s = kiln_status_join(s, kiln_status_annotate(kiln_stream_synchronize(slot->stream),
                                                 "draining collective %s after a failure", name));
  kiln_mutex_unlock(&slot->mu);
  kiln_free(members);
  return s;
}
