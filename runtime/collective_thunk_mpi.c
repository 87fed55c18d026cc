/* Collective thunks whose group spans processes: run over MPI (collective_thunk.h,
 * runtime/mpi.h). */
#include "runtime/collective_thunk.h"

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

kiln_status kiln_collective_thunk_execute_mpi(const kiln_thunk_t *t,
                                              const kiln_thunk_exec_params_t *p, int me,
                                              kiln_spmd_world_t *w) {
  const kiln_coll_thunk_desc_t *d = t->u.coll.desc;
  int local_devices = 0;
  kiln_mpi_t *mpi = kiln_spmd_world_mpi(w, &local_devices);
  int n = d->num_replicas * d->num_partitions, size = d->group_size[me];
  int *members = kiln_calloc((size_t)size, sizeof *members);
  int *targets = kiln_calloc((size_t)size, sizeof *targets), num_targets = 0;
  for (int i = 0; i < n; i++) {
    if (d->group_key[i] != d->group_key[me]) continue;
    members[d->rank[i]] = i;
    if (d->op == KILN_COLL_THUNK_PERMUTE && d->source[i] == d->rank[me])
      targets[num_targets++] = d->rank[i];
  }
  kiln_mpi_group_t g = {.mpi = mpi,
                        .members = members,
                        .size = size,
                        .rank = d->rank[me],
                        .local_devices = local_devices,
                        .timeout_ms = kiln_spmd_world_timeout_ms(w)};
  /* The operands were written by work queued on the stream: let it finish first. */
  kiln_status st = kiln_stream_synchronize(p->stream);
  if (st) st = kiln_status_annotate(st, "before collective %s", t->name);
  for (int k = 0; k < d->num_buffers && !st; k++)
    st = run_buffer(t, d, &g, targets, num_targets, me, k, p);
  kiln_free(members);
  kiln_free(targets);
  return st;
}
