/* Collective thunks (collective_thunk.h). */
#include "runtime/collective_thunk.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/ragged_all_to_all.h"
#include "runtime/cuda/nccl.h"
#include "runtime/spmd.h"
#include "runtime/thunk_internal.h"

const char *kiln_coll_thunk_op_name(kiln_coll_thunk_op_t op) {
  static const char *const names[] = {
      "all-reduce",        "all-gather",         "reduce-scatter",       "all-to-all",
      "all-to-all(tuple)", "collective-permute", "collective-broadcast", "replica-id",
      "partition-id",      "ragged-all-to-all"};
  return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

kiln_coll_thunk_desc_t *kiln_coll_thunk_desc_create(kiln_coll_thunk_op_t op, int num_buffers,
                                                    int num_replicas, int num_partitions) {
  kiln_coll_thunk_desc_t *d = kiln_calloc(1, sizeof *d);
  size_t n = (size_t)num_replicas * (size_t)num_partitions;
  d->op = op;
  d->num_buffers = num_buffers;
  d->buffers = kiln_calloc((size_t)(num_buffers > 0 ? num_buffers : 1), sizeof *d->buffers);
  d->num_replicas = num_replicas;
  d->num_partitions = num_partitions;
  d->group_key = kiln_calloc(n ? n : 1, sizeof *d->group_key);
  d->rank = kiln_calloc(n ? n : 1, sizeof *d->rank);
  d->group_size = kiln_calloc(n ? n : 1, sizeof *d->group_size);
  d->source = kiln_calloc(n ? n : 1, sizeof *d->source);
  for (size_t i = 0; i < n; i++) {
    d->group_size[i] = 1;
    d->source[i] = -1;
  }
  return d;
}

void kiln_coll_thunk_desc_destroy(kiln_coll_thunk_desc_t *d) {
  if (!d) return;
  kiln_free(d->buffers);
  kiln_free(d->group_key);
  kiln_free(d->rank);
  kiln_free(d->group_size);
  kiln_free(d->source);
  kiln_free(d);
}

kiln_thunk_t *kiln_thunk_collective_create(const char *name, kiln_coll_thunk_desc_t *desc) {
  kiln_thunk_t *t = kiln_calloc(1, sizeof *t);
  t->kind = KILN_THUNK_COLLECTIVE;
  t->name = kiln_strdup(name ? name : kiln_coll_thunk_op_name(desc->op));
  t->u.coll.desc = desc;
  return t;
}

const kiln_coll_thunk_desc_t *kiln_thunk_collective_desc(const kiln_thunk_t *t) {
  return t && t->kind == KILN_THUNK_COLLECTIVE ? t->u.coll.desc : NULL;
}

/* ---- checks ---- */

static bool is_id(const kiln_coll_thunk_desc_t *d) {
  return d->op == KILN_COLL_THUNK_REPLICA_ID || d->op == KILN_COLL_THUNK_PARTITION_ID;
}

typedef struct member {
  int64_t key;
  int rank, participant;
} member_t;

static int member_cmp(const void *a, const void *b) {
  const member_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Every group of the table: its members agree on its size and hold ranks 0..size-1 once each. */
static kiln_status check_groups(const kiln_coll_thunk_desc_t *d, const char *name, int n) {
  member_t *m = kiln_try_calloc((size_t)n, sizeof *m);
  if (!m)
    return KILN_ERR_EXHAUSTED("collective %s: out of host memory checking %d participants", name,
                              n);
  for (int i = 0; i < n; i++) m[i] = (member_t){d->group_key[i], d->rank[i], i};
  qsort(m, (size_t)n, sizeof *m, member_cmp);
  kiln_status s = KILN_STATUS_OK;
  for (int i = 0, first = 0; i < n && !s; i++) {
    if (i > 0 && m[i].key != m[i - 1].key) first = i;
    int size = d->group_size[m[first].participant], pos = i - first;
    bool last = i + 1 == n || m[i + 1].key != m[i].key;
    if (d->group_size[m[i].participant] != size || m[i].rank != pos || (last && pos + 1 != size))
      s = KILN_ERR_INVALID("collective %s: group %" PRId64
                           " is not %d distinct ranks (participant %d: rank %d of %d)",
                           name, m[i].key, size, m[i].participant, m[i].rank,
                           d->group_size[m[i].participant]);
  }
  kiln_free(m);
  return s;
}

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out) && *out <= (uint64_t)INT64_MAX;
}

/* The bytes each side of buffer `b` must hold for a group of `size`; false on overflow. */
static bool expected_bytes(const kiln_coll_thunk_desc_t *d, const kiln_coll_thunk_buffer_t *b,
                           int size, uint64_t *send, uint64_t *recv) {
  uint64_t es = kiln_coll_dtype_bytes(b->dtype), x;
  switch (d->op) {
    case KILN_COLL_THUNK_ALL_REDUCE:
      return mul_ok((uint64_t)b->count, es, send) && mul_ok((uint64_t)b->count, es, recv);
    case KILN_COLL_THUNK_ALL_GATHER:
      return mul_ok((uint64_t)b->outer, b->block_bytes, send) &&
             mul_ok(*send, (uint64_t)size, recv);
    case KILN_COLL_THUNK_REDUCE_SCATTER:
      return mul_ok((uint64_t)b->outer, (uint64_t)b->inner, &x) && mul_ok(x, es, recv) &&
             mul_ok(*recv, (uint64_t)size, send);
    case KILN_COLL_THUNK_ALL_TO_ALL:
      return mul_ok((uint64_t)b->outer, (uint64_t)size, &x) && mul_ok(x, b->block_bytes, send) &&
             mul_ok(x, b->block_bytes, recv);
    default: /* permute, broadcast, a tuple all-to-all: the whole buffer */
      *send = (uint64_t)b->send.size;
      *recv = (uint64_t)b->recv.size;
      return true;
  }
}

/* ragged-all-to-all's six buffers (collective_thunk.h). */
static kiln_status check_ragged(const kiln_coll_thunk_desc_t *d, const char *name, int n) {
  const kiln_coll_thunk_buffer_t *b = d->buffers;
  uint64_t in_bytes = 0, out_bytes = 0;
  if (d->num_buffers != 6 || b[0].outer < 0 || b[0].inner < 0 ||
      !mul_ok((uint64_t)b[0].outer, b[0].block_bytes, &in_bytes) ||
      !mul_ok((uint64_t)b[0].inner, b[0].block_bytes, &out_bytes) ||
      (uint64_t)b[0].send.size != in_bytes || (uint64_t)b[0].recv.size != out_bytes ||
      b[1].send.size != b[0].recv.size || b[1].recv.size != b[0].recv.size)
    return KILN_ERR_INVALID("ragged-all-to-all %s: %d buffers; input %" PRId64 " rows (%" PRId64
                            " bytes), output %" PRId64 " rows (%" PRId64 " and %" PRId64
                            " bytes) of %zu bytes each, result %" PRId64 " bytes",
                            name, d->num_buffers, b[0].outer, b[0].send.size, b[0].inner,
                            d->num_buffers > 1 ? b[1].send.size : -1, b[0].recv.size,
                            b[0].block_bytes, d->num_buffers > 1 ? b[1].recv.size : -1);
  for (int k = 2; k < 6; k++) {
    uint64_t bytes = 0;
    if ((b[k].dtype != KILN_COLL_S32 && b[k].dtype != KILN_COLL_S64) || b[k].count < 0 ||
        b[k].count != b[2].count || b[k].dtype != b[2].dtype ||
        !mul_ok((uint64_t)b[k].count, kiln_coll_dtype_bytes(b[k].dtype), &bytes) ||
        (uint64_t)b[k].send.size != bytes || b[k].recv.size != b[k].send.size)
      return KILN_ERR_INVALID("ragged-all-to-all %s: metadata operand %d: type %d, %" PRId64
                              " entries in %" PRId64 " bytes (s32 or s64, like operand 2's %" PRId64
                              ")",
                              name, k, (int)b[k].dtype, b[k].count, b[k].send.size, b[2].count);
  }
  for (int i = 0; i < n; i++)
    if (b[2].count % d->group_size[i])
      return KILN_ERR_INVALID("ragged-all-to-all %s: %" PRId64
                              " offsets do not split among participant %d's group of %d",
                              name, b[2].count, i, d->group_size[i]);
  return KILN_STATUS_OK;
}

kiln_status kiln_coll_thunk_desc_check(const kiln_coll_thunk_desc_t *d, const char *name) {
  if (!name) name = "";
  if (!d) return KILN_ERR_INVALID("collective %s: no description", name);
  if ((unsigned)d->op > KILN_COLL_THUNK_RAGGED_ALL_TO_ALL ||
      (unsigned)d->reduction > KILN_COLL_MAX /* the last */)
    return KILN_ERR_INVALID("collective %s: op %d, reduction %d", name, (int)d->op,
                            (int)d->reduction);
  if (d->num_buffers < 1 || d->num_replicas < 1 || d->num_partitions < 1 ||
      (int64_t)d->num_replicas * d->num_partitions > KILN_COLL_THUNK_MAX_PARTICIPANTS)
    return KILN_ERR_INVALID("collective %s: %d buffers, %d replicas x %d partitions", name,
                            d->num_buffers, d->num_replicas, d->num_partitions);
  int n = d->num_replicas * d->num_partitions;
  for (int i = 0; i < n; i++)
    if (d->group_size[i] < 1 || d->group_size[i] > n || d->rank[i] < 0 ||
        d->rank[i] >= d->group_size[i] || d->source[i] < -1 || d->source[i] >= d->group_size[i])
      return KILN_ERR_INVALID(
          "collective %s: participant %d has rank %d of a group of %d, "
          "source %d",
          name, i, d->rank[i], d->group_size[i], d->source[i]);
  if (!is_id(d)) KILN_RETURN_IF_ERROR_PLAIN(check_groups(d, name, n));
  if (d->op == KILN_COLL_THUNK_ALL_TO_ALL_TUPLE)
    for (int i = 0; i < n; i++)
      if (d->group_size[i] != d->num_buffers)
        return KILN_ERR_INVALID("all-to-all %s: %d operands for a group of %d", name,
                                d->num_buffers, d->group_size[i]);
  if ((unsigned)d->phase > KILN_COLL_PHASE_DONE ||
      (d->phase != KILN_COLL_PHASE_WHOLE &&
       (is_id(d) || d->op == KILN_COLL_THUNK_RAGGED_ALL_TO_ALL)))
    return KILN_ERR_INVALID("collective %s: phase %d of %s (only a whole %s)", name, (int)d->phase,
                            kiln_coll_thunk_op_name(d->op), kiln_coll_thunk_op_name(d->op));
  if (d->op == KILN_COLL_THUNK_RAGGED_ALL_TO_ALL) return check_ragged(d, name, n);
  for (int k = 0; k < d->num_buffers; k++) {
    const kiln_coll_thunk_buffer_t *b = &d->buffers[k];
    if ((unsigned)b->dtype > KILN_COLL_F16 || b->count < 0 || b->outer < 0 || b->inner < 0 ||
        b->send.size < 0 || b->recv.size < 0)
      return KILN_ERR_INVALID("collective %s: operand %d: type %d, sizes %" PRId64 ", %" PRId64
                              ", %" PRId64 ", slices of %" PRId64 " -> %" PRId64 " bytes",
                              name, k, (int)b->dtype, b->count, b->outer, b->inner, b->send.size,
                              b->recv.size);
    if (is_id(d)) {
      if (b->recv.size != 4)
        return KILN_ERR_INVALID("%s %s: result of %" PRId64 " bytes (an s32/u32 expected)",
                                kiln_coll_thunk_op_name(d->op), name, b->recv.size);
      continue;
    }
    if (d->op == KILN_COLL_THUNK_ALL_TO_ALL_TUPLE || d->op == KILN_COLL_THUNK_PERMUTE ||
        d->op == KILN_COLL_THUNK_BROADCAST) {
      if (b->send.size != b->recv.size)
        return KILN_ERR_INVALID("%s %s: operand %d holds %" PRId64 " bytes, its result %" PRId64,
                                kiln_coll_thunk_op_name(d->op), name, k, b->send.size,
                                b->recv.size);
      continue;
    }
    for (int i = 0; i < n; i++) {
      uint64_t send = 0, recv = 0;
      if (!expected_bytes(d, b, d->group_size[i], &send, &recv))
        return KILN_ERR_INVALID("%s %s: operand %d: its counts overflow for a group of %d",
                                kiln_coll_thunk_op_name(d->op), name, k, d->group_size[i]);
      if (send != (uint64_t)b->send.size || recv != (uint64_t)b->recv.size)
        return KILN_ERR_INVALID("%s %s: operand %d: slices of %" PRId64 " -> %" PRId64
                                " bytes, a group of %d needs %" PRIu64 " -> %" PRIu64,
                                kiln_coll_thunk_op_name(d->op), name, k, b->send.size, b->recv.size,
                                d->group_size[i], send, recv);
    }
  }
  return KILN_STATUS_OK;
}

static bool same_slice(kiln_slice_t a, kiln_slice_t b) {
  return a.allocation == b.allocation && a.offset == b.offset && a.size == b.size;
}

bool kiln_coll_thunk_desc_same(const kiln_coll_thunk_desc_t *a, const kiln_coll_thunk_desc_t *b) {
  if (a->op != b->op || a->reduction != b->reduction || a->num_buffers != b->num_buffers ||
      a->num_replicas != b->num_replicas || a->num_partitions != b->num_partitions)
    return false;
  for (int k = 0; k < a->num_buffers; k++) {
    const kiln_coll_thunk_buffer_t *x = &a->buffers[k], *y = &b->buffers[k];
    if (!same_slice(x->send, y->send) || !same_slice(x->recv, y->recv) || x->dtype != y->dtype ||
        x->count != y->count || x->outer != y->outer || x->inner != y->inner ||
        x->block_bytes != y->block_bytes)
      return false;
  }
  size_t n = (size_t)a->num_replicas * (size_t)a->num_partitions;
  return memcmp(a->group_key, b->group_key, n * sizeof *a->group_key) == 0 &&
         memcmp(a->rank, b->rank, n * sizeof *a->rank) == 0 &&
         memcmp(a->group_size, b->group_size, n * sizeof *a->group_size) == 0 &&
         memcmp(a->source, b->source, n * sizeof *a->source) == 0;
}

/* ---- prepare ---- */

static kiln_status check_slice(const kiln_thunk_t *t, const char *what, kiln_slice_t s,
                               const kiln_thunk_prepare_params_t *p) {
  if (s.allocation < 0 || s.allocation >= p->num_allocations)
    return KILN_ERR_INVALID("collective %s: %s names allocation %d; there are %d", t->name, what,
                            s.allocation, p->num_allocations);
  uint64_t cap = p->allocation_sizes[s.allocation];
  if (s.offset < 0 || s.size < 0 || (uint64_t)s.offset > cap ||
      (uint64_t)s.size > cap - (uint64_t)s.offset)
    return KILN_ERR_INVALID("collective %s: %s [%" PRId64 ", +%" PRId64
                            ") exceeds allocation %d (%" PRIu64 " bytes)",
                            t->name, what, s.offset, s.size, s.allocation, cap);
  return KILN_STATUS_OK;
}

kiln_status kiln_collective_thunk_prepare(kiln_thunk_t *t, const kiln_thunk_prepare_params_t *p) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_coll_thunk_desc_check(d, t->name));
  for (int k = 0; k < d->num_buffers; k++) {
    KILN_RETURN_IF_ERROR_PLAIN(check_slice(t, "result", d->buffers[k].recv, p));
    if (!is_id(d)) KILN_RETURN_IF_ERROR_PLAIN(check_slice(t, "operand", d->buffers[k].send, p));
  }
  return KILN_STATUS_OK;
}

/* ---- execute ---- */

static kiln_status resolve(const kiln_thunk_exec_params_t *p, const kiln_thunk_t *t, kiln_slice_t s,
                           kiln_devptr_t *out) {
  KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(p->buffers, s, out), "in collective %s", t->name);
  return KILN_STATUS_OK;
}

static void *host_ptr(kiln_devptr_t p) {
  return (void *)(uintptr_t)p;
}

/* ragged-all-to-all on host buffers (the stream synchronized): the metadata read as int64,
 * then the clique's exchange, or alone (c NULL, a group of one) the same receive directly. */
static kiln_status run_ragged(const kiln_thunk_t *t, const kiln_thunk_exec_params_t *p,
                              kiln_coll_clique_t *c, int rank, int size) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  const kiln_coll_thunk_buffer_t *b = d->buffers;
  kiln_devptr_t in = 0, out = 0, res = 0, meta[4] = {0};
  KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b[0].send, &in));
  KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b[1].send, &out));
  KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b[0].recv, &res));
  for (int k = 0; k < 4; k++) KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b[2 + k].send, &meta[k]));
  int64_t n = b[2].count;
  int64_t *m = kiln_try_calloc((size_t)(4 * n + 1), sizeof *m);
  if (!m) {
    /* the peers are (or will be) waiting for this rank in the clique: release them */
    kiln_status st = KILN_ERR_EXHAUSTED(
        "ragged-all-to-all %s: out of host memory for %" PRId64 " offsets and sizes", t->name, n);
    if (c) kiln_coll_clique_abort(c, kiln_status_message(st));
    return st;
  }
  for (int k = 0; k < 4; k++)
    for (int64_t e = 0; e < n; e++)
      m[k * n + e] = b[2].dtype == KILN_COLL_S32 ? ((const int32_t *)host_ptr(meta[k]))[e]
                                                 : ((const int64_t *)host_ptr(meta[k]))[e];
  kiln_coll_ragged_t r = {.input = host_ptr(in),
                          .input_rows = b[0].outer,
                          .output = host_ptr(out),
                          .result = host_ptr(res),
                          .output_rows = b[0].inner,
                          .row_bytes = b[0].block_bytes,
                          .input_offsets = m,
                          .send_sizes = m + n,
                          .output_offsets = m + 2 * n,
                          .recv_sizes = m + 3 * n,
                          .updates = n / size};
  kiln_status st;
  if (c) {
    st = kiln_coll_ragged_all_to_all(c, rank, t->name, &r);
  } else {
    if (r.output != r.result && b[0].recv.size) memmove(r.result, r.output, (size_t)b[0].recv.size);
    kiln_ragged_sender_t self = {r.input, r.input_rows, r.input_offsets, r.send_sizes,
                                 r.output_offsets};
    st = kiln_ragged_all_to_all_receive(t->name, 0, 1, r.updates, &self, r.recv_sizes, r.result,
                                        r.output_rows, r.row_bytes);
  }
  kiln_free(m);
  return st;
}

/* A group of one: every collective is its operand (permute without a sender: zeros). */
static kiln_status run_alone(const kiln_thunk_t *t, const kiln_thunk_exec_params_t *p) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  if (d->group_size[0] != 1)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "%s %s spans %d participants: run the executable on %d devices "
                            "(kiln_executable_run_spmd, kiln-run --host-devices)",
                            kiln_coll_thunk_op_name(d->op), t->name, d->group_size[0],
                            d->num_replicas * d->num_partitions);
  if (d->op == KILN_COLL_THUNK_RAGGED_ALL_TO_ALL) {
    if (p->device->kind != KILN_DEVICE_HOST)
      return KILN_ERR_UNIMPLEMENTED("ragged-all-to-all %s: host devices only", t->name);
    KILN_RETURN_IF_ERROR(kiln_stream_synchronize(p->stream), "before collective %s", t->name);
    return run_ragged(t, p, NULL, 0, 1);
  }
  for (int k = 0; k < d->num_buffers; k++) {
    const kiln_coll_thunk_buffer_t *b = &d->buffers[k];
    kiln_devptr_t src, dst;
    KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b->recv, &dst));
    if (!b->recv.size) continue;
    if (d->op == KILN_COLL_THUNK_PERMUTE && d->source[0] < 0) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_memset(p->stream, dst, 0, 1, (size_t)b->recv.size));
      continue;
    }
    KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b->send, &src));
    if (src != dst)
      KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_memcpy_d2d(p->stream, dst, src, (size_t)b->recv.size));
  }
  return KILN_STATUS_OK;
}

static kiln_status run_one(const kiln_thunk_t *t, const kiln_coll_thunk_desc_t *d,
                           kiln_coll_clique_t *c, int rank, int me,
                           const kiln_coll_thunk_buffer_t *b, void *send, void *recv) {
  switch (d->op) {
    case KILN_COLL_THUNK_ALL_REDUCE:
      return kiln_coll_all_reduce(c, rank, t->name, b->dtype, d->reduction, send, recv, b->count);
    case KILN_COLL_THUNK_ALL_GATHER:
      return kiln_coll_all_gather(c, rank, t->name, send, recv, b->outer, b->block_bytes);
    case KILN_COLL_THUNK_REDUCE_SCATTER:
      return kiln_coll_reduce_scatter(c, rank, t->name, b->dtype, d->reduction, send, recv,
                                      b->outer, b->inner);
    case KILN_COLL_THUNK_ALL_TO_ALL:
      return kiln_coll_all_to_all(c, rank, t->name, send, recv, b->outer, b->block_bytes);
    case KILN_COLL_THUNK_PERMUTE:
      return kiln_coll_permute(c, rank, t->name, d->source[me], send, recv, (size_t)b->recv.size);
    case KILN_COLL_THUNK_BROADCAST:
      return kiln_coll_broadcast(c, rank, t->name, send, recv, (size_t)b->recv.size);
    default:
      return KILN_ERR_INTERNAL("collective %s: op %d", t->name, (int)d->op);
  }
}

/* The clique participant `me` meets its group in for operand `k` (a split collective has one
 * per operand; the whole one runs them all in clique 0). */
static kiln_status clique_of(const kiln_thunk_t *t, kiln_spmd_world_t *w, int me, int k,
                             kiln_coll_clique_t **c) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  int part = d->phase == KILN_COLL_PHASE_WHOLE ? 0 : k;
  KILN_RETURN_IF_ERROR(
      kiln_spmd_world_clique(w, t->name, d->group_key[me], part, d->group_size[me], c), "in %s %s",
      kiln_coll_thunk_op_name(d->op), t->name);
  return KILN_STATUS_OK;
}

kiln_status kiln_collective_thunk_execute(kiln_thunk_t *t, const kiln_thunk_exec_params_t *p,
                                          const kiln_spmd_participant_t *who) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  int me = who ? who->participant : 0;
  if (is_id(d)) {
    kiln_devptr_t dst;
    KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, d->buffers[0].recv, &dst));
    uint32_t id = (uint32_t)(d->op == KILN_COLL_THUNK_REPLICA_ID ? me / d->num_partitions
                                                                 : me % d->num_partitions);
    return kiln_stream_memset(p->stream, dst, id, 4, 1);
  }
  /* Wherever the collective is not split, the start ran all of it. */
  bool done = d->phase == KILN_COLL_PHASE_DONE;
  if (!who || !who->world) return done ? KILN_STATUS_OK : run_alone(t, p);
  kiln_spmd_world_t *w = who->world;
  if (kiln_spmd_world_replicas(w) != d->num_replicas ||
      kiln_spmd_world_partitions(w) != d->num_partitions)
    return KILN_ERR_INVALID(
        "collective %s was compiled for %d replicas x %d partitions, the run "
        "has %d x %d",
        t->name, d->num_replicas, d->num_partitions, kiln_spmd_world_replicas(w),
        kiln_spmd_world_partitions(w));
  if (me < 0 || me >= d->num_replicas * d->num_partitions)
    return KILN_ERR_INVALID("collective %s: participant %d outside the world", t->name, me);
  bool ragged = d->op == KILN_COLL_THUNK_RAGGED_ALL_TO_ALL;
  if (ragged && p->device->kind != KILN_DEVICE_HOST)
    return KILN_ERR_UNIMPLEMENTED(
        "ragged-all-to-all %s on %d participants: only host devices in one process run it "
        "(not through NCCL yet)",
        t->name, d->num_replicas * d->num_partitions);
  if (p->device->kind == KILN_DEVICE_CUDA) return kiln_nccl_collective_execute(t->name, d, p, who);
  if (p->device->kind != KILN_DEVICE_HOST)
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "collective %s on %d participants: only host and CUDA devices run "
                            "multi-device collectives",
                            t->name, d->num_replicas * d->num_partitions);
  int local_devices = 0;
  if (kiln_spmd_world_mpi(w, &local_devices) &&
      kiln_coll_thunk_spans_processes(d, me, local_devices)) {
    if (ragged)
      return KILN_ERR_UNIMPLEMENTED(
          "ragged-all-to-all %s: its group spans MPI processes; only groups inside one "
          "process run it",
          t->name);
    if (d->phase == KILN_COLL_PHASE_WHOLE) return kiln_collective_thunk_execute_mpi(t, p, me, w);
    if (done) {
      /* The work queued since the start first: a failure there stops the peers (the world's
       * abort breaks MPI) instead of leaving this one waiting in the collective. */
      kiln_stream_overlap_end(p->stream);
      KILN_RETURN_IF_ERROR(kiln_stream_synchronize(p->stream), "before %s-done %s",
                           kiln_coll_thunk_op_name(d->op), t->name);
      return kiln_collective_thunk_done_mpi(t, me, w);
    }
    /* The start: MPI moves the data on a thread of its own while the stream runs what the
     * done waits behind. */
    KILN_RETURN_IF_ERROR_PLAIN(kiln_collective_thunk_start_mpi(t, p, me, w));
    kiln_stream_overlap_begin(p->stream);
    return KILN_STATUS_OK;
  }
  kiln_coll_clique_t *c = NULL;
  int rank = d->rank[me], size = d->group_size[me];
  if (done) { /* the stream keeps running what was queued since the start */
    kiln_stream_overlap_end(p->stream);
    /* The start made the cliques; an abort since then breaks them but does not end the
     * collective: past the arrival, its peers read this one's buffers (kiln_coll_complete). */
    for (int k = 0; k < d->num_buffers; k++) {
      c = kiln_spmd_world_find_clique(w, t->name, d->group_key[me], k);
      if (!c)
        return kiln_status_make(KILN_FAILED_PRECONDITION, "%s-done %s: its start did not run",
                                kiln_coll_thunk_op_name(d->op), t->name);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_coll_complete(c, rank));
    }
    return KILN_STATUS_OK;
  }
  KILN_RETURN_IF_ERROR_PLAIN(clique_of(t, w, me, 0, &c));
  /* The operands were written by work queued on the stream: let it finish first. */
  KILN_RETURN_IF_ERROR(kiln_stream_synchronize(p->stream), "before collective %s", t->name);
  if (ragged) return run_ragged(t, p, c, rank, size);
  bool start = d->phase == KILN_COLL_PHASE_START;
  for (int k = 0; k < d->num_buffers; k++) {
    const kiln_coll_thunk_buffer_t *b = &d->buffers[k];
    kiln_devptr_t send = 0, recv = 0;
    KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b->send, &send));
    KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, b->recv, &recv));
    if (start) {
      KILN_RETURN_IF_ERROR_PLAIN(clique_of(t, w, me, k, &c));
      kiln_coll_defer(c, rank);
    }
    if (d->op != KILN_COLL_THUNK_ALL_TO_ALL_TUPLE) {
      KILN_RETURN_IF_ERROR_PLAIN(run_one(t, d, c, rank, me, b, host_ptr(send), host_ptr(recv)));
      continue;
    }
    /* Round k: every rank sends its operand (rank + k) % size; this one receives its result
     * (rank - k) mod size from that rank, which sent its operand `rank`. */
    const kiln_coll_thunk_buffer_t *sb = &d->buffers[(rank + k) % size];
    int from = ((rank - k) % size + size) % size;
    const kiln_coll_thunk_buffer_t *rb = &d->buffers[from];
    KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, sb->send, &send));
    KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, rb->recv, &recv));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_coll_permute(c, rank, t->name, from, host_ptr(send),
                                                 host_ptr(recv), (size_t)rb->recv.size));
  }
  /* Until the done: what is queued meanwhile runs on the stream's thread, while this one
   * moves the collective's data at the done. */
  if (start) kiln_stream_overlap_begin(p->stream);
  return KILN_STATUS_OK;
}

void kiln_collective_thunk_abandon(const kiln_thunk_t *t, const kiln_thunk_exec_params_t *p,
                                   const kiln_spmd_participant_t *who, bool began,
                                   const char *why) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  if (d->phase != KILN_COLL_PHASE_START || !who || !who->world) return;
  kiln_spmd_world_t *w = who->world;
  int me = who->participant;
  if (kiln_spmd_world_replicas(w) != d->num_replicas ||
      kiln_spmd_world_partitions(w) != d->num_partitions || me < 0 ||
      me >= d->num_replicas * d->num_partitions)
    return; /* the start refused to run */
  if (p->device->kind == KILN_DEVICE_CUDA) {
    /* Its done: the stream waits for NCCL, so nothing is freed under the transfer. */
    kiln_coll_thunk_desc_t done = *d;
    done.phase = KILN_COLL_PHASE_DONE;
    if (began) kiln_status_free(kiln_nccl_collective_execute(t->name, &done, p, who));
    return;
  }
  if (p->device->kind != KILN_DEVICE_HOST) return;
  if (began) kiln_stream_overlap_end(p->stream);
  int local_devices = 0;
  if (kiln_spmd_world_mpi(w, &local_devices) &&
      kiln_coll_thunk_spans_processes(d, me, local_devices)) {
    kiln_collective_thunk_abandon_mpi(t, me, w); /* the world's abort broke MPI: it ends soon */
    return;
  }
  for (int k = 0; k < d->num_buffers; k++) {
    kiln_coll_clique_t *c = kiln_spmd_world_find_clique(w, t->name, d->group_key[me], k);
    if (c) kiln_coll_abandon(c, d->rank[me], why);
  }
}

void kiln_collective_thunk_print(kiln_strbuf_t *b, const kiln_thunk_t *t) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  static const char *const phase[] = {"", "-start", "-done"};
  kiln_strbuf_printf(b, " %s%s world=%dx%d group0=%d (", kiln_coll_thunk_op_name(d->op),
                     phase[d->phase], d->num_replicas, d->num_partitions, d->group_size[0]);
  for (int k = 0; k < d->num_buffers; k++) {
    const kiln_coll_thunk_buffer_t *x = &d->buffers[k];
    if (k) kiln_strbuf_append(b, ", ");
    if (!is_id(d))
      kiln_strbuf_printf(b, "a%d+%" PRId64 ":%" PRId64 " -> ", x->send.allocation, x->send.offset,
                         x->send.size);
    kiln_strbuf_printf(b, "a%d+%" PRId64 ":%" PRId64, x->recv.allocation, x->recv.offset,
                       x->recv.size);
  }
  kiln_strbuf_append(b, ")\n");
}
