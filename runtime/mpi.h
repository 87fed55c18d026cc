/* Collectives between processes over MPI: host devices of several processes (started with
 * mpirun) in one SPMD world.
 *
 * OpenMPI is loaded at run time with dlopen (libmpi.so.40, Debian's libopenmpi3; mpirun comes
 * with openmpi-bin): kiln declares the few MPI functions it calls and resolves OpenMPI's
 * predefined handles (MPI_COMM_WORLD is the address of `ompi_mpi_comm_world`, ...) with dlsym,
 * so no mpi.h is needed to build. The runtime options' mpi_library (the edges' $KILN_MPI_LIBRARY)
 * names another library file (for tests).
 *
 * A world spanning processes: every process owns `local_devices` participants, participant p
 * living in process p / local_devices (its MPI rank in MPI_COMM_WORLD) as its local device
 * p % local_devices. A collective whose group has members in other processes runs here,
 * point to point (MPI_Isend / MPI_Irecv on a duplicate of MPI_COMM_WORLD, one tag per pair of
 * local devices; MPI's non-overtaking order matches the messages, as every participant runs
 * the same collectives in the same order; L * L tags must fit MPI_TAG_UB, else UNIMPLEMENTED),
 * polled with MPI_Test until a deadline: when nothing moved for timeout_ms, the ranks not heard
 * from are DEADLINE_EXCEEDED naming the collective and them, never a hang. Every message is
 * preceded by a header (kind, name, sizes): ranks calling different collectives get
 * INVALID_ARGUMENT naming both.
 *
 * Bit for bit with the in-process cliques (runtime/collectives.h): reductions fold in rank
 * order, ((v0 op v1) op v2) ..., with kiln_coll_fold; an all-reduce is a reduce-scatter (rank
 * r gathers every rank's chunk r and folds it in rank order) then an all-gather of the folded
 * chunks, MPI's own reductions are not used.
 *
 * After a deadline, a mismatch, an MPI error or kiln_mpi_break the process's MPI collectives
 * are broken: every later call fails at once with that error (messages may be left in flight;
 * the process should stop).
 *
 * Thread safety: MPI is initialized with MPI_THREAD_SERIALIZED and every MPI call is made
 * under one process-wide lock, so participants of one process call concurrently. */
#ifndef KILN_RUNTIME_MPI_H_
#define KILN_RUNTIME_MPI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/collectives.h"

#define KILN_MPI_LIBRARY "libmpi.so.40"

typedef struct kiln_mpi kiln_mpi_t;

/* The process's MPI, loaded and initialized on the first call (MPI_Init_thread unless the
 * program initialized MPI itself). UNAVAILABLE naming the library and the Debian packages to
 * install when it cannot be loaded; FAILED_PRECONDITION after kiln_mpi_finalize. Thread-safe. */
kiln_status kiln_mpi_get(kiln_mpi_t **out);
int kiln_mpi_rank(const kiln_mpi_t *m);
int kiln_mpi_size(const kiln_mpi_t *m);
/* Breaks the process's MPI collectives with ABORTED carrying `why` (the first break wins). */
void kiln_mpi_break(kiln_mpi_t *m, const char *why);
/* Finalizes MPI if kiln initialized it (after the communicator is freed). Call once at the end
 * of a program that used kiln_mpi_get, with no collective running; a no-op otherwise. When a
 * failed collective left transfers open (their buffers may be gone), MPI is not finalized
 * (a line on stderr says so): the process should exit with its error. */
void kiln_mpi_finalize(void);

/* Waits until every process of MPI_COMM_WORLD called it (with the same `name`), at most
 * timeout_ms without progress: DEADLINE_EXCEEDED naming the processes that did not. For
 * starting a world together: processes compile and load at different speeds, and a
 * collective's own deadline is for a participant that never arrives. */
kiln_status kiln_mpi_barrier(kiln_mpi_t *m, const char *name, int64_t timeout_ms);

/* One participant's view of a group that spans processes. */
typedef struct kiln_mpi_group {
  kiln_mpi_t *mpi;
  const int *members; /* rank -> global participant, `size` entries */
  int size, rank;     /* this participant is members[rank] */
  int local_devices;  /* participants per process */
  int64_t timeout_ms; /* > 0 */
} kiln_mpi_group_t;

/* The same collectives and layouts as runtime/collectives.h, for a group spanning processes.
 * Permute: this rank receives from `source` (-1: zeros) and sends to the `num_targets` ranks
 * in `targets` (the ranks whose source it is). */
kiln_status kiln_mpi_all_reduce(const kiln_mpi_group_t *g, const char *name, kiln_coll_dtype_t t,
                                kiln_coll_reduction_t op, const void *send, void *recv,
                                int64_t count);
kiln_status kiln_mpi_reduce_scatter(const kiln_mpi_group_t *g, const char *name,
                                    kiln_coll_dtype_t t, kiln_coll_reduction_t op, const void *send,
                                    void *recv, int64_t outer, int64_t inner);
kiln_status kiln_mpi_all_gather(const kiln_mpi_group_t *g, const char *name, const void *send,
                                void *recv, int64_t outer, size_t block_bytes);
kiln_status kiln_mpi_all_to_all(const kiln_mpi_group_t *g, const char *name, const void *send,
                                void *recv, int64_t outer, size_t block_bytes);
kiln_status kiln_mpi_permute(const kiln_mpi_group_t *g, const char *name, int source,
                             const int *targets, int num_targets, const void *send, void *recv,
                             size_t bytes);
kiln_status kiln_mpi_broadcast(const kiln_mpi_group_t *g, const char *name, const void *send,
                               void *recv, size_t bytes);

#endif /* KILN_RUNTIME_MPI_H_ */
