/* Collective thunks: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
 * collective-broadcast, replica-id and partition-id, for a world of N participants whose
 * groups the compiler resolved once (per participant: which group, its rank, the group's size,
 * a permute's source rank).
 *
 * Execution reads the participant from the execution state (kiln_thunk_exec_state_set_
 * participant; none: participant 0 alone):
 *   - in a world on a CUDA device: through NCCL (runtime/cuda/nccl.h);
 *   - in a world (runtime/spmd.h) on host devices: synchronizes the stream, then runs the
 *     collective on the buffers in place through the group's clique (runtime/collectives.h),
 *     one call per operand of a variadic collective; a group with members in other processes
 *     (a world spanning MPI processes) runs over MPI instead (runtime/mpi.h);
 *   - alone: a group of one is a copy on the stream (a permute nobody sends to: zeros), a
 *     larger group is FAILED_PRECONDITION (run on N devices: kiln_executable_run_spmd).
 * Async -start/-done pairs: a start the compiler may split (kiln_hlo_async_split_done) is a
 * START thunk and its done a DONE thunk of the same name. On host devices in one process the
 * start synchronizes the stream and begins the collective (kiln_coll_defer: it publishes its
 * buffers and returns), the work queued between the two runs on the stream meanwhile, and the
 * done ends it on the participant's thread without synchronizing the stream (it waits for the
 * peers, writes the results); each operand has a clique of its own. Everywhere else (NCCL,
 * MPI, alone) the start runs the whole collective and the done does nothing; an async pair
 * that cannot be split is lowered to the collective at the start.
 *
 * Buffer layouts, per operand (row-major in the physical order, the split dimension's block
 * in the middle): all-reduce: `count` elements; all-gather: send [outer][block_bytes] -> recv
 * [outer][size][block_bytes]; reduce-scatter: send [outer][size][inner] -> recv
 * [outer][inner] elements; all-to-all with a split dimension: [outer][size][block_bytes] both
 * ways; all-to-all of `size` operands without one: operand j goes to rank j (a permute per
 * round); permute and broadcast: the whole buffer. */
#ifndef KILN_RUNTIME_COLLECTIVE_THUNK_H_
#define KILN_RUNTIME_COLLECTIVE_THUNK_H_

#include "runtime/collectives.h"
#include "runtime/thunk.h"

typedef enum kiln_coll_thunk_op {
  KILN_COLL_THUNK_ALL_REDUCE,
  KILN_COLL_THUNK_ALL_GATHER,
  KILN_COLL_THUNK_REDUCE_SCATTER,
  KILN_COLL_THUNK_ALL_TO_ALL,       /* with a split dimension, per operand */
  KILN_COLL_THUNK_ALL_TO_ALL_TUPLE, /* `size` operands, operand j to rank j */
  KILN_COLL_THUNK_PERMUTE,
  KILN_COLL_THUNK_BROADCAST,
  KILN_COLL_THUNK_REPLICA_ID,
  KILN_COLL_THUNK_PARTITION_ID,
  /* Six buffers: [0] input -> result (outer: input rows, inner: output rows, block_bytes: a
   * row), [1] the output operand -> result, [2..5] input_offsets, send_sizes, output_offsets,
   * recv_sizes (send = recv = the operand; dtype S32 or S64, count: entries, group size x
   * updates). Host devices only: NCCL and MPI answer UNIMPLEMENTED. */
  KILN_COLL_THUNK_RAGGED_ALL_TO_ALL,
} kiln_coll_thunk_op_t;

const char *kiln_coll_thunk_op_name(kiln_coll_thunk_op_t op);

/* The part of a collective a thunk runs. */
typedef enum kiln_coll_thunk_phase {
  KILN_COLL_PHASE_WHOLE,
  KILN_COLL_PHASE_START, /* an async start: begins it (above) */
  KILN_COLL_PHASE_DONE,  /* its done: ends the START thunk of the same name and description */
} kiln_coll_thunk_phase_t;

typedef struct kiln_coll_thunk_buffer {
  kiln_slice_t send, recv; /* ids: recv only (s32) */
  kiln_coll_dtype_t dtype; /* reductions */
  int64_t count;           /* all-reduce: elements */
  int64_t outer, inner;    /* reduce-scatter: elements; all-gather / all-to-all: outer */
  size_t block_bytes;      /* all-gather / all-to-all */
} kiln_coll_thunk_buffer_t;

typedef struct kiln_coll_thunk_desc {
  kiln_coll_thunk_op_t op;
  kiln_coll_reduction_t reduction;
  kiln_coll_thunk_phase_t phase; /* WHOLE unless set */
  int num_buffers;
  kiln_coll_thunk_buffer_t *buffers; /* heap, owned */
  int num_replicas, num_partitions;  /* the world the groups were resolved for */
  /* Per participant (num_replicas x num_partitions entries each, heap, owned). */
  int64_t *group_key;
  int *rank, *group_size;
  int *source; /* permute: the rank sending to this one, -1: none */
} kiln_coll_thunk_desc_t;

/* The most participants a description is resolved for (as an SPMD world, runtime/spmd.h). */
#define KILN_COLL_THUNK_MAX_PARTICIPANTS 4096

/* A description for `num_buffers` buffers and a world of R x P, zeroed, arrays allocated. */
kiln_coll_thunk_desc_t *kiln_coll_thunk_desc_create(kiln_coll_thunk_op_t op, int num_buffers,
                                                    int num_replicas, int num_partitions);
void kiln_coll_thunk_desc_destroy(kiln_coll_thunk_desc_t *d);

/* Whether `d` is whole and consistent, with no allocation at hand (prepare adds the slices
 * against the allocations; the executable reader calls it on what it read): known op,
 * reduction and element types; 1..KILN_COLL_THUNK_MAX_PARTICIPANTS participants; per
 * participant a rank inside its group and a permute source inside it or -1; every group
 * (but replica-id's and partition-id's, which have none) its members agreeing on its size
 * and holding ranks 0..size-1 once each; a tuple all-to-all one operand per rank; and every
 * operand's slice sizes what its counts make for each participant's group (products checked
 * for overflow); START and DONE only for the ops an async pair wraps. INVALID_ARGUMENT
 * naming `name` and what is wrong. */
kiln_status kiln_coll_thunk_desc_check(const kiln_coll_thunk_desc_t *d, const char *name);

/* Whether `a` and `b` describe the same collective, their phases aside (an async pair's
 * START and DONE): op, reduction, world, every operand and every participant's group. */
bool kiln_coll_thunk_desc_same(const kiln_coll_thunk_desc_t *a, const kiln_coll_thunk_desc_t *b);

/* Takes over `desc`. */
kiln_thunk_t *kiln_thunk_collective_create(const char *name, kiln_coll_thunk_desc_t *desc);
const kiln_coll_thunk_desc_t *kiln_thunk_collective_desc(const kiln_thunk_t *t);

/* The thunk stages for thunk.c. */
kiln_status kiln_collective_thunk_prepare(kiln_thunk_t *t, const kiln_thunk_prepare_params_t *p);
kiln_status kiln_collective_thunk_execute(kiln_thunk_t *t, const kiln_thunk_exec_params_t *p,
                                          const kiln_spmd_participant_t *who);
/* A world spanning processes (runtime/spmd.h, runtime/mpi.h; collective_thunk_mpi.c): whether
 * participant `me`'s group has members in other processes, and running the collective over
 * MPI (the stream synchronized first). */
bool kiln_coll_thunk_spans_processes(const kiln_coll_thunk_desc_t *d, int me, int local_devices);
kiln_status kiln_collective_thunk_execute_mpi(const kiln_thunk_t *t,
                                              const kiln_thunk_exec_params_t *p, int me,
                                              struct kiln_spmd_world *w);
/* After an execution failed at or after START thunk `t` and before its DONE ran: ends what
 * the start began, so the caller may free the buffers (kiln_coll_abandon on each operand's
 * clique; on NCCL the stream waits for the collective) and, if the start returned (`began`),
 * turns the stream's overlap mode off. `why` is the failure, for peers that broke off. */
void kiln_collective_thunk_abandon(const kiln_thunk_t *t, const kiln_thunk_exec_params_t *p,
                                   const kiln_spmd_participant_t *who, bool began, const char *why);
/* The async halves over MPI: the start synchronizes the stream and runs the collective on a
 * thread of its own (the world keeps it: kiln_spmd_world_put_pending), the done waits for it
 * and returns its status, abandon waits for it and drops the status. */
kiln_status kiln_collective_thunk_start_mpi(const kiln_thunk_t *t,
                                            const kiln_thunk_exec_params_t *p, int me,
                                            struct kiln_spmd_world *w);
kiln_status kiln_collective_thunk_done_mpi(const kiln_thunk_t *t, int me,
                                           struct kiln_spmd_world *w);
void kiln_collective_thunk_abandon_mpi(const kiln_thunk_t *t, int me, struct kiln_spmd_world *w);
void kiln_collective_thunk_print(kiln_strbuf_t *b, const kiln_thunk_t *t);

#endif /* KILN_RUNTIME_COLLECTIVE_THUNK_H_ */
