/* Collective thunks whose group spans processes: run over MPI (collective_thunk.h,
 * runtime/mpi.h). */
#include "runtime/collective_thunk.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "runtime/mpi.h"
#include "runtime/spmd.h"
#include "runtime/thunk_internal.h"

bool kiln_coll_thunk_spans_processes(const kiln_coll_thunk_desc_t *d, int me, int local_devices) {
  int n = d->num_replicas * d->num_partitions;
  for (int i = 0; i < n; i++)
    if (d->group_key[i] == d->group_key[me] && i / local_devices != me / local_devices) return true;
  return false;
}

static kiln_status run_buffer(const kiln_thunk_t *t, const kiln_coll_thunk_desc_t *d,
                              const kiln_mpi_group_t *g, const int *targets, int num_targets,
                              int me, int k, const kiln_thunk_exec_params_t *p) {
  const kiln_coll_thunk_buffer_t *b = &d->buffers[k];
  kiln_devptr_t sp = 0, rp = 0;
  if (d->op == KILN_COLL_THUNK_ALL_TO_ALL_TUPLE) {
    /* Round k: every rank sends its operand (rank + k) % size to that rank and receives its
     * result (rank - k) mod size from that one (as the in-process thunk does). */
    int to = (g->rank + k) % g->size, from = ((g->rank - k) % g->size + g->size) % g->size;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_resolve(p->buffers, d->buffers[to].send, &sp));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_resolve(p->buffers, d->buffers[from].recv, &rp));
    return kiln_mpi_permute(g, t->name, from, &to, 1, (const void *)(uintptr_t)sp,
                            (void *)(uintptr_t)rp, (size_t)d->buffers[from].recv.size);
  }
  KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_resolve(p->buffers, b->send, &sp));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_resolve(p->buffers, b->recv, &rp));
  const void *send = (const void *)(uintptr_t)sp;
  void *recv = (void *)(uintptr_t)rp;
  switch (d->op) {
    case KILN_COLL_THUNK_ALL_REDUCE:
      return kiln_mpi_all_reduce(g, t->name, b->dtype, d->reduction, send, recv, b->count);
    case KILN_COLL_THUNK_ALL_GATHER:
      return kiln_mpi_all_gather(g, t->name, send, recv, b->outer, b->block_bytes);
    case KILN_COLL_THUNK_REDUCE_SCATTER:
      return kiln_mpi_reduce_scatter(g, t->name, b->dtype, d->reduction, send, recv, b->outer,
                                     b->inner);
    case KILN_COLL_THUNK_ALL_TO_ALL:
      return kiln_mpi_all_to_all(g, t->name, send, recv, b->outer, b->block_bytes);
    case KILN_COLL_THUNK_PERMUTE:
      return kiln_mpi_permute(g, t->name, d->source[me], targets, num_targets, send, recv,
                              (size_t)b->recv.size);
    case KILN_COLL_THUNK_BROADCAST:
      return kiln_mpi_broadcast(g, t->name, send, recv, (size_t)b->recv.size);
    default:
      return KILN_ERR_INTERNAL("collective %s: op %d across processes", t->name, (int)d->op);
  }
}

/* Participant `me`'s group of collective `d` across processes: the ranks' participants and a
 * permute's targets (both owned by the caller). */
typedef struct mpi_call {
  kiln_mpi_group_t g;
  int *members, *targets;
  int num_targets;
} mpi_call_t;

static void make_call(const kiln_coll_thunk_desc_t *d, int me, kiln_spmd_world_t *w,
                      mpi_call_t *c) {
  int local_devices = 0;
  kiln_mpi_t *mpi = kiln_spmd_world_mpi(w, &local_devices);
  int n = d->num_replicas * d->num_partitions, size = d->group_size[me];
  c->members = kiln_calloc((size_t)size, sizeof *c->members);
  c->targets = kiln_calloc((size_t)size, sizeof *c->targets);
  c->num_targets = 0;
  for (int i = 0; i < n; i++) {
    if (d->group_key[i] != d->group_key[me]) continue;
    c->members[d->rank[i]] = i;
    if (d->op == KILN_COLL_THUNK_PERMUTE && d->source[i] == d->rank[me])
      c->targets[c->num_targets++] = d->rank[i];
  }
  c->g = (kiln_mpi_group_t){.mpi = mpi,
                            .members = c->members,
                            .size = size,
                            .rank = d->rank[me],
                            .local_devices = local_devices,
                            .timeout_ms = kiln_spmd_world_timeout_ms(w)};
}

static kiln_status run_call(const kiln_thunk_t *t, const mpi_call_t *c, int me,
                            const kiln_thunk_exec_params_t *p) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  kiln_status st = KILN_STATUS_OK;
  for (int k = 0; k < d->num_buffers && !st; k++)
    st = run_buffer(t, d, &c->g, c->targets, c->num_targets, me, k, p);
  return st;
}

static void free_call(mpi_call_t *c) {
  kiln_free(c->members);
  kiln_free(c->targets);
}

static kiln_status settle(const kiln_thunk_t *t, kiln_spmd_world_t *w, int me);

kiln_status kiln_collective_thunk_execute_mpi(const kiln_thunk_t *t,
                                              const kiln_thunk_exec_params_t *p, int me,
                                              kiln_spmd_world_t *w) {
  KILN_RETURN_IF_ERROR_PLAIN(settle(t, w, me));
  mpi_call_t c;
  make_call(t->u.coll.desc, me, w, &c);
  /* The operands were written by work queued on the stream: let it finish first. */
  kiln_status st = kiln_stream_synchronize(p->stream);
  if (st) st = kiln_status_annotate(st, "before collective %s", t->name);
  if (!st) st = run_call(t, &c, me, p);
  free_call(&c);
  return st;
}

/* ---- async pairs: the collective on a thread of its own, from the start to the done ---- */

typedef struct mpi_async {
  pthread_t thread;
  bool joined; /* by its participant's next MPI collective (settle) */
  const kiln_thunk_t *t;
  kiln_thunk_exec_params_t p; /* its buffer table outlives the done */
  int me;
  mpi_call_t call;
  kiln_status status;
} mpi_async_t;

static void *async_main(void *arg) {
  mpi_async_t *a = arg;
  a->status = run_call(a->t, &a->call, a->me, &a->p);
  return NULL;
}

/* Waits for the collective and frees `a`; returns its status. */
static kiln_status async_join(mpi_async_t *a) {
  if (!a->joined) pthread_join(a->thread, NULL);
  kiln_status st = a->status;
  free_call(&a->call);
  kiln_free(a);
  return st;
}

/* Before participant `me` posts another MPI collective (`t`): its messages between two
 * participants match by order (one tag per pair), so the ones begun earlier on their own
 * threads must have posted everything first. Waits for them (their dones get the status);
 * if one failed, peers may still wait for it: MPI breaks and `t` fails too, naming it. */
static kiln_status settle(const kiln_thunk_t *t, kiln_spmd_world_t *w, int me) {
  void *local[16];
  int n = kiln_spmd_world_pending_of(w, me, local, 16);
  void **h = n <= 16 ? local : kiln_calloc((size_t)n, sizeof *h);
  if (h != local) kiln_spmd_world_pending_of(w, me, h, n);
  kiln_status st = KILN_STATUS_OK;
  for (int i = 0; i < n; i++) {
    mpi_async_t *a = h[i];
    if (!a->joined) pthread_join(a->thread, NULL);
    a->joined = true;
    if (a->status && !st) {
      st = kiln_status_make(kiln_status_code(a->status),
                            "collective %s: the collective %s this participant began before it "
                            "failed: %s",
                            t->name, a->t->name, kiln_status_message(a->status));
      kiln_mpi_break(a->call.g.mpi, kiln_status_message(st));
    }
  }
  if (h != local) kiln_free(h);
  return st;
}

static void async_finish(void *a) {
  kiln_status_free(async_join(a));
}

kiln_status kiln_collective_thunk_start_mpi(const kiln_thunk_t *t,
                                            const kiln_thunk_exec_params_t *p, int me,
                                            kiln_spmd_world_t *w) {
  KILN_RETURN_IF_ERROR(kiln_stream_synchronize(p->stream), "before collective %s", t->name);
  KILN_RETURN_IF_ERROR_PLAIN(settle(t, w, me));
  mpi_async_t *a = kiln_try_calloc(1, sizeof *a);
  if (!a) return KILN_ERR_EXHAUSTED("out of host memory starting collective %s", t->name);
  a->t = t;
  a->p = *p;
  a->me = me;
  make_call(t->u.coll.desc, me, w, &a->call);
  if (pthread_create(&a->thread, NULL, async_main, a) != 0) {
    free_call(&a->call);
    kiln_free(a);
    /* as MPI would: no overlap, the whole collective here */
    return kiln_collective_thunk_execute_mpi(t, p, me, w);
  }
  kiln_status st = kiln_spmd_world_put_pending(w, t->name, me, a, async_finish);
  if (st) kiln_status_free(st), st = async_join(a); /* finished here instead */
  return st;
}

kiln_status kiln_collective_thunk_done_mpi(const kiln_thunk_t *t, int me, kiln_spmd_world_t *w) {
  mpi_async_t *a = kiln_spmd_world_take_pending(w, t->name, me);
  return a ? async_join(a) : KILN_STATUS_OK; /* none: the start ran all of it */
}

void kiln_collective_thunk_abandon_mpi(const kiln_thunk_t *t, int me, kiln_spmd_world_t *w) {
  mpi_async_t *a = kiln_spmd_world_take_pending(w, t->name, me);
  if (a) kiln_status_free(async_join(a));
}
