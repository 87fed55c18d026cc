/* Collectives in the reference evaluator: participant groups by CollectiveOpGroupMode, a
 * rendezvous between participant threads, and each collective's semantics (see eval.h,
 * "several participants"). Alone (ctx->world NULL) a collective whose group is just this
 * participant runs here too; a larger group is UNIMPLEMENTED. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/host_pool.h"
#include "base/ragged_all_to_all.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/collective_groups.h"
#include "compiler/hlo/replica_groups.h"

/* ---- the world: participants and their rendezvous ---- */

/* One execution of one collective by one group: what each member brought. */
typedef struct slot {
  const kiln_hlo_instruction_t *instr;
  int64_t seq;       /* the members' execution count of instr */
  int64_t group_key; /* which group of instr */
  int size;
  int arrived, departed, exited;
  kiln_literal_t *const **contrib; /* [rank] -> that member's operands (borrowed) */
  struct slot *next;
} slot_t;

struct kiln_eval_world {
  int num_replicas, num_partitions, n;
  const int64_t *device_assignment; /* optional, n entries */
  int64_t timeout_ms;
  pthread_mutex_t mu; /* guards everything below */
  pthread_cond_t cv;
  slot_t *slots;
  bool failed; /* a participant failed: the others stop at their next collective */
  int failed_participant;
  /* Participants computing at once (at most max_running, kiln_host_cpus()): the others
   * wait at their start or at the end of a collective, so that the memory in use is a few
   * participants' working sets and every other's live values, not n working sets. The turns
   * taken so far tell a participant waiting at a collective that the world still moves. */
  int running, max_running;
  int64_t turns_taken;
  struct timespec last_turn; /* CLOCK_MONOTONIC */
};

static int64_t device_of(const struct kiln_eval_world *w, int participant) {
  return w->device_assignment ? w->device_assignment[participant] : participant;
}

static void describe_participant(kiln_strbuf_t *b, const struct kiln_eval_world *w, int p) {
  kiln_strbuf_printf(b, "replica %d partition %d (device %" PRId64 ")", p / w->num_partitions,
                     p % w->num_partitions, device_of(w, p));
}

/* `ms` after *ts. */
static void add_ms(int64_t ms, struct timespec *ts) {
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static void deadline_after(int64_t ms, struct timespec *ts) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  add_ms(ms, ts);
}

/* ---- groups (compiler/hlo/collective_groups.h) ---- */

#define ALONE_HINT "evaluate it on several participants (kiln_eval_module_spmd)"

static void world_dims(const kiln_eval_ctx_t *ctx, int *R, int *P) {
  *R = ctx->world ? ctx->world->num_replicas : 1;
  *P = ctx->world ? ctx->world->num_partitions : 1;
}

static kiln_status resolve_group(const kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                 kiln_hlo_collective_group_t *g) {
  int R, P;
  world_dims(ctx, &R, &P);
  return kiln_hlo_collective_group_resolve(in, R, P, ctx->participant,
                                           ctx->world ? NULL : ALONE_HINT, g);
}

/* ---- rendezvous ---- */

static kiln_status peer_failed(const struct kiln_eval_world *w, const kiln_hlo_instruction_t *in) {
  kiln_strbuf_t b = {0};
  describe_participant(&b, w, w->failed_participant);
  kiln_status st =
      kiln_status_make(KILN_ABORTED, "%s '%s' stopped: participant %s failed",
                       kiln_hlo_opcode_name(in->opcode), in->name, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return st;
}

static kiln_status deadline_exceeded(const struct kiln_eval_world *w,
                                     const kiln_hlo_instruction_t *in,
                                     const kiln_hlo_collective_group_t *g, const slot_t *s) {
  kiln_strbuf_t b = {0};
  int missing = 0;
  for (int k = 0; k < g->size; k++) {
    if (s->contrib[k]) continue;
    kiln_strbuf_append(&b, missing++ ? ", rank " : "rank ");
    kiln_strbuf_printf(&b, "%d = ", k);
    describe_participant(&b, w, g->members[k]);
  }
  kiln_status st = kiln_status_make(
      KILN_DEADLINE_EXCEEDED,
      "%s '%s' (execution %" PRId64
      ", %s group of %d): %d participant(s) did not arrive within "
      "%" PRId64
      " ms: %s; every participant must run the same collectives in the same order "
      "(raise the timeout for slow participants)",
      kiln_hlo_opcode_name(in->opcode), in->name, s->seq, kiln_hlo_group_mode_name(g->mode),
      g->size, missing, w->timeout_ms, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return st;
}

static slot_t *slot_find_or_add(struct kiln_eval_world *w, const kiln_hlo_instruction_t *in,
                                int64_t seq, const kiln_hlo_collective_group_t *g) {
  for (slot_t *s = w->slots; s; s = s->next)
    if (s->instr == in && s->seq == seq && s->group_key == g->key) return s;
  slot_t *s = kiln_calloc(1, sizeof *s);
  s->instr = in;
  s->seq = seq;
  s->group_key = g->key;
  s->size = g->size;
  s->contrib = kiln_calloc((size_t)g->size, sizeof *s->contrib);
  s->next = w->slots;
  w->slots = s;
  return s;
}

static void slot_unlink_free(struct kiln_eval_world *w, slot_t *s) {
  for (slot_t **pp = &w->slots; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  kiln_free(s->contrib);
  kiln_free(s);
}

/* Waits (w->mu held) until `done(s)` or failure or the deadline. */
static int wait_for(struct kiln_eval_world *w, const struct timespec *deadline) {
  return pthread_cond_timedwait(&w->cv, &w->mu, deadline);
}

/* Brings `mine` to the group's slot and waits for every member; *out_slot then holds every
 * member's operands until slot_leave. */
static kiln_status slot_join(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in, int64_t seq,
                             const kiln_hlo_collective_group_t *g, kiln_literal_t *const *mine,
                             slot_t **out_slot) {
  struct kiln_eval_world *w = ctx->world;
  struct timespec deadline;
  deadline_after(w->timeout_ms, &deadline);
  kiln_mutex_lock(&w->mu);
  slot_t *s = slot_find_or_add(w, in, seq, g);
  kiln_status st = KILN_STATUS_OK;
  if (w->failed) {
    st = peer_failed(w, in);
  } else if (s->size != g->size) {
    st = KILN_ERR_INTERNAL("%s '%s': participants disagree on the group size (%d vs %d)",
                           kiln_hlo_opcode_name(in->opcode), in->name, s->size, g->size);
  } else {
    s->contrib[g->rank] = mine;
    s->arrived++;
    pthread_cond_broadcast(&w->cv);
    int64_t turns = w->turns_taken;
    while (s->arrived < s->size && !w->failed)
      if (wait_for(w, &deadline) == ETIMEDOUT && s->arrived < s->size) {
        if (w->turns_taken != turns) { /* others waited for their turn: time from the last */
          turns = w->turns_taken;
          deadline = w->last_turn;
          add_ms(w->timeout_ms, &deadline);
          continue;
        }
        st = deadline_exceeded(w, in, g, s);
        /* Our operands go away with us: a late member must not read them, and nobody may
         * start another collective in a world that has failed. */
        s->contrib[g->rank] = NULL;
        s->arrived--;
        if (!w->failed) {
          w->failed = true;
          w->failed_participant = ctx->participant;
        }
        pthread_cond_broadcast(&w->cv);
        break;
      }
    if (!st && s->arrived < s->size) {
      s->contrib[g->rank] = NULL;
      s->arrived--;
      st = peer_failed(w, in);
    }
  }
  kiln_mutex_unlock(&w->mu);
  *out_slot = st ? NULL : s;
  return st;
}

/* Done reading the others' operands: waits until every member is done (they may free them
 * right after), the last one out frees the slot. */
static void slot_leave(struct kiln_eval_world *w, slot_t *s) {
  kiln_mutex_lock(&w->mu);
  s->departed++;
  pthread_cond_broadcast(&w->cv);
  /* Every member has arrived, and computing a result always ends in slot_leave, so this wait
   * ends; the deadline only guards against a member killed in between. */
  struct timespec deadline;
  deadline_after(w->timeout_ms, &deadline);
  while (s->departed < s->size)
    if (wait_for(w, &deadline) == ETIMEDOUT) break;
  if (++s->exited == s->size) slot_unlink_free(w, s);
  kiln_mutex_unlock(&w->mu);
}

/* Takes one of the world's turns to compute (waits for one without a deadline: a participant
 * gives its turn back at each collective and when it ends). */
static void take_turn(struct kiln_eval_world *w) {
  kiln_mutex_lock(&w->mu);
  while (w->running >= w->max_running) pthread_cond_wait(&w->cv, &w->mu);
  w->running++;
  w->turns_taken++;
  clock_gettime(CLOCK_MONOTONIC, &w->last_turn);
  kiln_mutex_unlock(&w->mu);
}

static void give_turn(struct kiln_eval_world *w) {
  kiln_mutex_lock(&w->mu);
  w->running--;
  pthread_cond_broadcast(&w->cv);
  kiln_mutex_unlock(&w->mu);
}

static int64_t next_seq(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in) {
  if (!ctx->coll_seq) return 0;
  int64_t seq = (int64_t)(intptr_t)kiln_ptrmap_get(ctx->coll_seq, in);
  kiln_ptrmap_put(ctx->coll_seq, in, (void *)(intptr_t)(seq + 1));
  return seq;
}

/* ---- data helpers ---- */

static int64_t prod(const kiln_shape_t *s, int from, int to) {
  int64_t n = 1;
  for (int i = from; i < to; i++) n *= s->dims[i];
  return n;
}

/* Copies `count` rows along dimension d: src rows [src_at, +count) -> dst rows [dst_at, ...).
 * dst and src have the same dimensions except d. */
static void copy_rows(kiln_literal_t *dst, int64_t dst_at, const kiln_literal_t *src,
                      int64_t src_at, int64_t count, int d) {
  const kiln_shape_t *ds = dst->shape, *ss = src->shape;
  size_t es = kiln_elem_type_storage_bytes(ds->type);
  int64_t outer = prod(ds, 0, d), inner = prod(ds, d + 1, ds->rank) * (int64_t)es;
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)dst->data + (o * ds->dims[d] + dst_at) * inner,
           (const char *)src->data + (o * ss->dims[d] + src_at) * inner, (size_t)(count * inner));
}

static kiln_status need_array(const kiln_hlo_instruction_t *in, const kiln_literal_t *l,
                              const kiln_shape_t *result) {
  if (!kiln_shape_is_array(l->shape) || !kiln_shape_is_array(result) ||
      l->shape->type != result->type)
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "evaluator: %s '%s' with a tuple or mismatched operand",
                            kiln_hlo_opcode_name(in->opcode), in->name);
  return KILN_STATUS_OK;
}

static kiln_status split_dim(const kiln_hlo_instruction_t *in, const kiln_shape_t *s, int group,
                             int *d) {
  if (!in->has_dimensions || in->dimensions.n != 1)
    return KILN_ERR_INVALID("%s '%s' needs dimensions={d}", kiln_hlo_opcode_name(in->opcode),
                            in->name);
  *d = (int)in->dimensions.v[0];
  if (*d < 0 || *d >= s->rank || s->dims[*d] % group != 0)
    return KILN_ERR_INVALID("%s '%s': dimension %d of its operand does not split into %d parts",
                            kiln_hlo_opcode_name(in->opcode), in->name, *d, group);
  return KILN_STATUS_OK;
}

/* ---- the collectives ---- */

typedef struct {
  kiln_eval_ctx_t *ctx;
  const kiln_hlo_instruction_t *in;
  const kiln_hlo_collective_group_t *g;
  kiln_literal_t *const **contrib; /* [rank][operand] */
  int nops;
} coll_t;

/* The shape of result i: for the -start forms the result part of their tuple. */
static kiln_shape_t *result_shape(const kiln_hlo_instruction_t *in, int i, int nops) {
  kiln_shape_t *s = in->shape;
  if (kiln_hlo_collective_is_pair_start(in)) {
    s = s->elements[1];
    if (nops == 1) return s;
  } else if (nops == 1 && s->type != KILN_TUPLE) {
    return s;
  }
  return s->type == KILN_TUPLE && i < s->num_elements ? s->elements[i] : NULL;
}

/* all-reduce / reduce-scatter: out[e] = ((v_0[e] op v_1[e]) op v_2[e]) ... by rank. */
static kiln_status reduce_all(coll_t *c, int i, kiln_literal_t *acc) {
  const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(c->in, "to_apply");
  if (!f)
    return KILN_ERR_INVALID("%s '%s' has no to_apply", kiln_hlo_opcode_name(c->in->opcode),
                            c->in->name);
  const kiln_literal_t *first = c->contrib[0][i];
  kiln_elem_type_t t = first->shape->type;
  size_t es = kiln_elem_type_storage_bytes(t);
  if (acc->num_elements != first->num_elements)
    return KILN_ERR_INVALID("%s '%s': operand %d differs between participants",
                            kiln_hlo_opcode_name(c->in->opcode), c->in->name, i);
  if (acc->num_elements) memcpy(acc->data, first->data, (size_t)acc->num_elements * es);
  kiln_eval_scalar_fn_t fn;
  kiln_eval_scalar_fn_init(&fn, c->ctx, f);
  kiln_status st = KILN_STATUS_OK;
  for (int k = 1; k < c->g->size && !st; k++) {
    const kiln_literal_t *v = c->contrib[k][i];
    if (v->num_elements != acc->num_elements || v->shape->type != t) {
      st = KILN_ERR_INVALID("%s '%s': operand %d differs between participants",
                            kiln_hlo_opcode_name(c->in->opcode), c->in->name, i);
      break;
    }
    st = kiln_eval_scalar_fn_fold(&fn, t, acc->data, v->data, acc->num_elements);
  }
  kiln_eval_scalar_fn_destroy(&fn);
  return st;
}

static kiln_status alloc_result(coll_t *c, int i, kiln_literal_t **out) {
  kiln_shape_t *s = result_shape(c->in, i, c->nops);
  if (!s)
    return KILN_ERR_INVALID("%s '%s': its shape has no result %d",
                            kiln_hlo_opcode_name(c->in->opcode), c->in->name, i);
  KILN_RETURN_IF_ERROR_PLAIN(need_array(c->in, c->contrib[0][i], s));
  return kiln_eval_literal_alloc(c->ctx, s, out);
}

static kiln_status do_all_reduce(coll_t *c, kiln_literal_t **res) {
  for (int i = 0; i < c->nops; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(alloc_result(c, i, &res[i]));
    KILN_RETURN_IF_ERROR_PLAIN(reduce_all(c, i, res[i]));
  }
  return KILN_STATUS_OK;
}

static kiln_status do_all_gather(coll_t *c, kiln_literal_t **res) {
  for (int i = 0; i < c->nops; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(alloc_result(c, i, &res[i]));
    int d;
    KILN_RETURN_IF_ERROR_PLAIN(split_dim(c->in, res[i]->shape, c->g->size, &d));
    int64_t rows = res[i]->shape->dims[d] / c->g->size;
    for (int k = 0; k < c->g->size; k++) {
      const kiln_literal_t *v = c->contrib[k][i];
      if (v->shape->rank != res[i]->shape->rank || v->shape->dims[d] != rows ||
          v->num_elements * c->g->size != res[i]->num_elements)
        return KILN_ERR_INVALID("all-gather '%s': operand %d of rank %d does not fit its result",
                                c->in->name, i, k);
      copy_rows(res[i], k * rows, v, 0, rows, d);
    }
  }
  return KILN_STATUS_OK;
}

static kiln_status do_reduce_scatter(coll_t *c, kiln_literal_t **res) {
  for (int i = 0; i < c->nops; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(alloc_result(c, i, &res[i]));
    kiln_literal_t *full = NULL;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(c->ctx, c->contrib[0][i]->shape, &full));
    KILN_RETURN_IF_ERROR_PLAIN(reduce_all(c, i, full));
    int d = 0;
    KILN_RETURN_IF_ERROR_PLAIN(split_dim(c->in, full->shape, c->g->size, &d));
    int64_t rows = full->shape->dims[d] / c->g->size;
    if (res[i]->shape->dims[d] != rows || res[i]->num_elements * c->g->size != full->num_elements)
      return KILN_ERR_INVALID("reduce-scatter '%s': result %d is not 1/%d of its operand",
                              c->in->name, i, c->g->size);
    copy_rows(res[i], 0, full, c->g->rank * rows, rows, d);
  }
  return KILN_STATUS_OK;
}

/* all-to-all: with dimensions={d} each operand splits into group-size blocks along d, block j
 * goes to rank j, and the result concatenates the blocks received in rank order. Without,
 * operand j goes to rank j and result element k is what rank k sent. */
static kiln_status do_all_to_all(coll_t *c, kiln_literal_t **res) {
  int me = c->g->rank;
  if (!c->in->has_dimensions) {
    if (c->nops != c->g->size)
      return KILN_ERR_INVALID("all-to-all '%s': %d operands for a group of %d", c->in->name,
                              c->nops, c->g->size);
    for (int k = 0; k < c->nops; k++) {
      const kiln_literal_t *v = c->contrib[k][me];
      KILN_RETURN_IF_ERROR_PLAIN(alloc_result(c, k, &res[k]));
      if (v->num_elements != res[k]->num_elements)
        return KILN_ERR_INVALID("all-to-all '%s': rank %d's operand %d does not fit result %d",
                                c->in->name, k, me, k);
      if (v->num_elements)
        memcpy(res[k]->data, v->data,
               (size_t)v->num_elements * kiln_elem_type_storage_bytes(v->shape->type));
    }
    return KILN_STATUS_OK;
  }
  for (int i = 0; i < c->nops; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(alloc_result(c, i, &res[i]));
    int d;
    KILN_RETURN_IF_ERROR_PLAIN(split_dim(c->in, res[i]->shape, c->g->size, &d));
    int64_t rows = res[i]->shape->dims[d] / c->g->size;
    for (int k = 0; k < c->g->size; k++) {
      const kiln_literal_t *v = c->contrib[k][i];
      if (!kiln_shape_compatible(v->shape, res[i]->shape))
        return KILN_ERR_INVALID("all-to-all '%s': rank %d's operand %d differs from the result",
                                c->in->name, k, i);
      copy_rows(res[i], k * rows, v, me * rows, rows, d);
    }
  }
  return KILN_STATUS_OK;
}

/* ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets, recv_sizes):
 * the output operand with every rank's updates for this one written over it, in rank order
 * (base/ragged_all_to_all.h, the host runtime's own code). */
enum { RAGGED_INPUT, RAGGED_OUTPUT, RAGGED_IN_OFF, RAGGED_SEND, RAGGED_OUT_OFF, RAGGED_RECV };

/* Rank k's metadata operand i as int64 (k's row of `all`, n entries each). */
static kiln_status ragged_meta(coll_t *c, int k, int i, int64_t n, int64_t *out) {
  const kiln_literal_t *l = c->contrib[k][i];
  if (!kiln_shape_is_array(l->shape) ||
      (l->shape->type != KILN_S32 && l->shape->type != KILN_S64) || l->num_elements != n)
    return KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d's operand %d is not %" PRId64
                            " s32 or s64 values",
                            c->in->name, k, i, n);
  for (int64_t e = 0; e < n; e++) out[e] = kiln_eval_elem_get_s64(l->shape->type, l->data, e);
  return KILN_STATUS_OK;
}

static kiln_status do_ragged_all_to_all(coll_t *c, kiln_literal_t **res) {
  int size = c->g->size, me = c->g->rank;
  if (c->nops != 6)
    return KILN_ERR_INVALID("ragged-all-to-all '%s' has %d operands, not 6", c->in->name, c->nops);
  const kiln_literal_t *out = c->contrib[me][RAGGED_OUTPUT];
  KILN_RETURN_IF_ERROR_PLAIN(need_array(c->in, out, c->in->shape));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(c->ctx, c->in->shape, &res[0]));
  kiln_literal_t *r = res[0];
  const kiln_shape_t *os = r->shape;
  if (os->rank < 1)
    return KILN_ERR_INVALID("ragged-all-to-all '%s': its output is a scalar", c->in->name);
  int64_t n = c->contrib[me][RAGGED_IN_OFF]->num_elements;
  if (n % size)
    return KILN_ERR_INVALID("ragged-all-to-all '%s': %" PRId64
                            " offsets do not split among a group of %d",
                            c->in->name, n, size);
  size_t es = kiln_elem_type_storage_bytes(os->type);
  size_t row_bytes = (size_t)prod(os, 1, os->rank) * es;
  if (r->num_elements) memcpy(r->data, out->data, (size_t)r->num_elements * es);
  int64_t *meta = kiln_calloc((size_t)(size * 3 + 1) * (size_t)(n ? n : 1), sizeof *meta);
  kiln_ragged_sender_t *from = kiln_calloc((size_t)size, sizeof *from);
  int64_t *recv = meta + (size_t)size * 3 * (size_t)n;
  kiln_status st = ragged_meta(c, me, RAGGED_RECV, n, recv);
  for (int k = 0; k < size && !st; k++) {
    const kiln_literal_t *in = c->contrib[k][RAGGED_INPUT];
    int64_t *m = meta + (size_t)k * 3 * (size_t)n;
    if (!kiln_shape_is_array(in->shape) || in->shape->type != os->type ||
        in->shape->rank != os->rank ||
        (in->shape->rank && in->num_elements != in->shape->dims[0] * prod(os, 1, os->rank)))
      st = KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d's input rows differ from the output's",
                            c->in->name, k);
    if (!st) st = ragged_meta(c, k, RAGGED_IN_OFF, n, m);
    if (!st) st = ragged_meta(c, k, RAGGED_SEND, n, m + n);
    if (!st) st = ragged_meta(c, k, RAGGED_OUT_OFF, n, m + 2 * n);
    from[k] = (kiln_ragged_sender_t){in->data, in->shape->dims[0], m, m + n, m + 2 * n};
  }
  if (!st)
    st = kiln_ragged_all_to_all_receive(c->in->name, me, size, n / size, from, recv, r->data,
                                        os->dims[0], row_bytes);
  kiln_free(from);
  kiln_free(meta);
  return st;
}

static kiln_status copy_from(coll_t *c, int i, const kiln_literal_t *src, kiln_literal_t **res) {
  KILN_RETURN_IF_ERROR_PLAIN(alloc_result(c, i, res));
  if (!src) return KILN_STATUS_OK; /* zeros */
  if (src->num_elements != (*res)->num_elements)
    return KILN_ERR_INVALID("%s '%s': operand %d does not fit its result",
                            kiln_hlo_opcode_name(c->in->opcode), c->in->name, i);
  if (src->num_elements)
    memcpy((*res)->data, src->data,
           (size_t)src->num_elements * kiln_elem_type_storage_bytes(src->shape->type));
  return KILN_STATUS_OK;
}

static kiln_status do_broadcast(coll_t *c, kiln_literal_t **res) {
  for (int i = 0; i < c->nops; i++)
    KILN_RETURN_IF_ERROR_PLAIN(copy_from(c, i, c->contrib[0][i], &res[i]));
  return KILN_STATUS_OK;
}

static kiln_status permute_source(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                  const kiln_hlo_collective_group_t *g, int64_t *source) {
  int R, P;
  world_dims(ctx, &R, &P);
  return kiln_hlo_collective_permute_source(in, g, R, P, ctx->world ? NULL : ALONE_HINT, source);
}

/* ---- entry ---- */

static kiln_status package(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in, int nops,
                           kiln_literal_t *const *ops, kiln_literal_t **res, kiln_literal_t **out) {
  kiln_shape_t *s = in->shape;
  if (!kiln_hlo_collective_is_pair_start(in)) {
    if ((nops == 1 || in->opcode == KILN_OP_RAGGED_ALL_TO_ALL) && s->type != KILN_TUPLE) {
      *out = res[0];
      return KILN_STATUS_OK;
    }
    return kiln_eval_tuple_make(ctx, s, nops, res, out);
  }
  /* (operand(s), result(s), contexts...) */
  kiln_literal_t *el[8];
  if (s->num_elements > 8)
    return KILN_ERR_UNIMPLEMENTED("evaluator: %s '%s' with %d tuple elements",
                                  kiln_hlo_opcode_name(in->opcode), in->name, s->num_elements);
  if (nops == 1) {
    el[0] = ops[0];
    el[1] = res[0];
  } else {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_tuple_make(ctx, s->elements[0], nops, ops, &el[0]));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_tuple_make(ctx, s->elements[1], nops, res, &el[1]));
  }
  for (int i = 2; i < s->num_elements; i++)
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, s->elements[i], &el[i]));
  return kiln_eval_tuple_make(ctx, s, s->num_elements, el, out);
}

/* The -done ops: the result part of what their start produced. */
static kiln_status eval_done(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                             kiln_literal_t *start, kiln_literal_t **out) {
  if (kiln_hlo_collective_is_pair_start(in->operands[0]) && start->shape->type == KILN_TUPLE &&
      start->num_tuple_elements >= 2)
    return kiln_eval_relabel(ctx, in->shape, start->tuple_elements[1], out);
  return kiln_eval_relabel(ctx, in->shape, start, out);
}

kiln_status kiln_eval_collective(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                 kiln_literal_t *const *ops, kiln_literal_t **out) {
  kiln_hlo_opcode_t op = in->opcode;
  if (op == KILN_OP_ALL_REDUCE_DONE || op == KILN_OP_ALL_GATHER_DONE ||
      op == KILN_OP_COLLECTIVE_PERMUTE_DONE)
    return eval_done(ctx, in, ops[0], out);
  int nops = in->num_operands;
  bool permute = op == KILN_OP_COLLECTIVE_PERMUTE || op == KILN_OP_COLLECTIVE_PERMUTE_START;
  if (nops < 1 || nops > 64 || (permute && nops != 1))
    return KILN_ERR_UNIMPLEMENTED("evaluator: %s '%s' with %d operands", kiln_hlo_opcode_name(op),
                                  in->name, nops);
  kiln_hlo_collective_group_t g;
  KILN_RETURN_IF_ERROR_PLAIN(resolve_group(ctx, in, &g));
  int64_t source = -1;
  kiln_status st = permute ? permute_source(ctx, in, &g, &source) : KILN_STATUS_OK;
  int64_t seq = next_seq(ctx, in);
  slot_t *slot = NULL;
  kiln_literal_t *const *alone[1] = {ops};
  coll_t c = {ctx, in, &g, alone, nops};
  bool turn_given = false;
  if (!st && g.size > 1) { /* only with a world: alone, groups hold just this participant */
    kiln_eval_collect_before_waiting(ctx);
    give_turn(ctx->world);
    turn_given = true;
    st = slot_join(ctx, in, seq, &g, ops, &slot);
    if (slot) c.contrib = slot->contrib;
  }
  kiln_literal_t *res[64];
  if (!st) {
    switch (op) {
      case KILN_OP_ALL_REDUCE:
      case KILN_OP_ALL_REDUCE_START:
        st = do_all_reduce(&c, res);
        break;
      case KILN_OP_ALL_GATHER:
      case KILN_OP_ALL_GATHER_START:
        st = do_all_gather(&c, res);
        break;
      case KILN_OP_REDUCE_SCATTER:
        st = do_reduce_scatter(&c, res);
        break;
      case KILN_OP_ALL_TO_ALL:
        st = do_all_to_all(&c, res);
        break;
      case KILN_OP_COLLECTIVE_BROADCAST:
        st = do_broadcast(&c, res);
        break;
      case KILN_OP_RAGGED_ALL_TO_ALL:
        st = do_ragged_all_to_all(&c, res);
        break;
      case KILN_OP_COLLECTIVE_PERMUTE:
      case KILN_OP_COLLECTIVE_PERMUTE_START:
        st = copy_from(&c, 0, source >= 0 ? c.contrib[source][0] : NULL, &res[0]);
        break;
      default:
        st = KILN_ERR_UNIMPLEMENTED("evaluator does not support collective '%s' (%s)", in->name,
                                    kiln_hlo_opcode_name(op));
    }
  }
  if (slot) slot_leave(ctx->world, slot);
  if (turn_given) take_turn(ctx->world);
  kiln_hlo_collective_group_free(&g);
  if (st) return st;
  return package(ctx, in, nops, ops, res, out);
}

/* ---- the world a module needs ---- */

static int64_t module_attr(const kiln_hlo_module_t *m, const char *key) {
  for (int i = 0; i < m->num_raw_attrs; i++)
    if (strcmp(m->raw_attrs[i].key, key) == 0) return strtoll(m->raw_attrs[i].value, NULL, 10);
  return 1;
}

/* The largest id `in` names (-1: none). */
static kiln_status largest_id(const kiln_hlo_instruction_t *in, int64_t *out) {
  *out = -1;
  int64_t *ids = NULL;
  int n = 0;
  if (in->opcode == KILN_OP_COLLECTIVE_PERMUTE || in->opcode == KILN_OP_COLLECTIVE_PERMUTE_START) {
    const char *text = kiln_hlo_instruction_raw_attr(in, "source_target_pairs");
    if (text) KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_source_target_pairs_parse(text, &ids, &n));
    n *= 2;
  } else if (in->replica_groups) {
    kiln_hlo_replica_groups_t g;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_replica_groups_parse(in->replica_groups, &g));
    ids = g.ids;
    n = g.num_groups ? g.offsets[g.num_groups] : 0;
    kiln_free(g.offsets);
  }
  for (int i = 0; i < n; i++)
    if (ids[i] > *out) *out = ids[i];
  kiln_free(ids);
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_spmd_world_size(const kiln_hlo_module_t *m, int *num_replicas,
                                      int *num_partitions) {
  int64_t R = module_attr(m, "replica_count"), P = module_attr(m, "num_partitions");
  if (R < 1) R = 1;
  if (P < 1) P = 1;
  int64_t flat = 0; /* flattened ids needed */
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      if (!(kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) ||
          in->opcode == KILN_OP_ALL_REDUCE_DONE || in->opcode == KILN_OP_ALL_GATHER_DONE ||
          in->opcode == KILN_OP_COLLECTIVE_PERMUTE_DONE)
        continue;
      kiln_hlo_group_mode_t mode;
      int64_t top;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_collective_group_mode(in, &mode));
      KILN_RETURN_IF_ERROR(largest_id(in, &top), "%s '%s'", kiln_hlo_opcode_name(in->opcode),
                           in->name);
      if (top < 0) continue;
      if (mode == KILN_GROUP_CROSS_PARTITION) {
        if (P <= top) P = top + 1;
      } else if (mode == KILN_GROUP_FLATTENED_ID) {
        if (flat <= top) flat = top + 1;
      } else if (R <= top) {
        R = top + 1;
      }
    }
  }
  if (R * P < flat) P = (flat + R - 1) / R;
  if (R > INT32_MAX || P > INT32_MAX)
    return KILN_ERR_INVALID("module '%s' names more than 2^31 participants", m->name);
  *num_replicas = (int)R;
  *num_partitions = (int)P;
  return KILN_STATUS_OK;
}

/* ---- running every participant ---- */

typedef struct {
  const kiln_hlo_module_t *m;
  struct kiln_eval_world *world;
  int participant;
  kiln_eval_options_t opts;
  int num_args;
  kiln_literal_t *const *args;
  kiln_arena_t arena; /* this participant's result */
  kiln_literal_t *result;
  kiln_status status;
} participant_t;

static void *participant_main(void *arg) {
  participant_t *p = arg;
  take_turn(p->world);
  p->status = kiln_eval_module_participant(p->m, &p->opts, p->world, p->participant, p->num_args,
                                           p->args, &p->arena, &p->result);
  give_turn(p->world);
  if (p->status) {
    kiln_mutex_lock(&p->world->mu);
    if (!p->world->failed && kiln_status_code(p->status) != KILN_ABORTED) {
      p->world->failed = true;
      p->world->failed_participant = p->participant;
    }
    pthread_cond_broadcast(&p->world->cv);
    kiln_mutex_unlock(&p->world->mu);
  }
  return NULL;
}

/* The error to report: a participant's own failure before any participant's ABORTED. */
static kiln_status first_cause(struct kiln_eval_world *w, participant_t *ps) {
  int pick = -1;
  for (int i = 0; i < w->n; i++)
    if (ps[i].status && (pick < 0 || (kiln_status_code(ps[pick].status) == KILN_ABORTED &&
                                      kiln_status_code(ps[i].status) != KILN_ABORTED)))
      pick = i;
  if (pick < 0) return KILN_STATUS_OK;
  kiln_status st = ps[pick].status;
  ps[pick].status = KILN_STATUS_OK;
  kiln_strbuf_t b = {0};
  describe_participant(&b, w, pick);
  st = kiln_status_annotate(st, "on %s", kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return st;
}

kiln_status kiln_eval_module_spmd(const kiln_hlo_module_t *m, const kiln_eval_spmd_options_t *opts,
                                  int num_args, kiln_literal_t *const *const *args,
                                  kiln_arena_t *out_arena, kiln_literal_t **out_results) {
  if (!opts || opts->num_replicas < 1 || opts->num_partitions < 1 ||
      (int64_t)opts->num_replicas * opts->num_partitions > 1024)
    return KILN_ERR_INVALID(
        "evaluator: num_replicas and num_partitions must be >= 1 (at most "
        "1024 participants)");
  struct kiln_eval_world w = {
      .num_replicas = opts->num_replicas,
      .num_partitions = opts->num_partitions,
      .n = opts->num_replicas * opts->num_partitions,
      .device_assignment = opts->device_assignment,
      .timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : KILN_EVAL_COLLECTIVE_TIMEOUT_MS,
      .max_running = kiln_host_cpus()};
  for (int i = 0; i < w.n; i++) out_results[i] = NULL;
  pthread_mutex_init(&w.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w.cv, &ca);
  pthread_condattr_destroy(&ca);
  participant_t *ps = kiln_calloc((size_t)w.n, sizeof *ps);
  pthread_t *threads = kiln_calloc((size_t)w.n, sizeof *threads);
  bool *started = kiln_calloc((size_t)w.n, sizeof *started);
  kiln_status st = KILN_STATUS_OK;
  for (int i = 0; i < w.n; i++) {
    participant_t *p = &ps[i];
    p->m = m;
    p->world = &w;
    p->participant = i;
    p->opts = opts->base;
    p->opts.replica_id = i / w.num_partitions;
    p->opts.partition_id = i % w.num_partitions;
    p->num_args = num_args;
    p->args = num_args > 0 ? args[i] : NULL; /* no arguments: args may be NULL */
    kiln_arena_init(&p->arena);
    p->arena.limit = out_arena->limit;
  }
  for (int i = 0; i < w.n && !st; i++) {
    int e = pthread_create(&threads[i], NULL, participant_main, &ps[i]);
    if (e) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "evaluator: cannot start the thread of participant %d of %d (%s)", i,
                            w.n, strerror(e));
      kiln_mutex_lock(&w.mu);
      w.failed = true;
      w.failed_participant = i;
      pthread_cond_broadcast(&w.cv);
      kiln_mutex_unlock(&w.mu);
    } else {
      started[i] = true;
    }
  }
  for (int i = 0; i < w.n; i++)
    if (started[i]) pthread_join(threads[i], NULL);
  if (!st) st = first_cause(&w, ps);
  for (int i = 0; i < w.n && !st; i++) {
    out_results[i] = kiln_eval_literal_clone(out_arena, ps[i].result);
    if (!out_results[i])
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "evaluator: results do not fit the output arena");
  }
  for (int i = 0; i < w.n; i++) {
    kiln_status_free(ps[i].status);
    kiln_arena_destroy(&ps[i].arena);
    if (st) out_results[i] = NULL;
  }
  while (w.slots) slot_unlink_free(&w, w.slots);
  kiln_free(started);
  kiln_free(threads);
  kiln_free(ps);
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
  return st;
}
