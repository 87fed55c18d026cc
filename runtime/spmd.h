/* Running one executable on N host devices: SPMD programs (replicas x partitions).
 *
 * A world is one run of N = num_replicas x num_partitions participants (participant =
 * replica * num_partitions + partition, XLA's order). Its collectives meet in cliques
 * (runtime/collectives.h), one per (collective, group): the first member to arrive
 * creates it, so every group's clique exists once per run and is reused by later executions of
 * the same collective (while loops). The groups themselves were resolved once, at compile time
 * (runtime/collective_thunk.h). A participant that never arrives fails its peers with
 * DEADLINE_EXCEEDED after timeout_ms naming the collective and the missing ranks; a
 * participant that fails aborts the world, so its peers stop at once (ABORTED) instead of at
 * the deadline. Never a hang.
 *
 * kiln_executable_run_spmd runs every participant on a thread of its own, each with its own
 * stream and parameter buffers, outputs per participant. The N host devices are logical: they
 * share the runtime host device the executable was loaded on (one worker pool, as the PJRT
 * plugin's host devices do); each participant's stream is one of them.
 *
 * Thread safety: a world is shared by its participants' threads (lookups are locked); create
 * and destroy it while no participant runs. kiln_executable_run_spmd is thread-safe as
 * kiln_executable_run is (each call its own world). */
#ifndef KILN_RUNTIME_SPMD_H_
#define KILN_RUNTIME_SPMD_H_

#include <stdint.h>

#include "base/status.h"
#include "runtime/collectives.h"
#include "runtime/executable.h"
#include "runtime/mpi.h"

#define KILN_SPMD_DEFAULT_TIMEOUT_MS 30000

typedef struct kiln_spmd_world kiln_spmd_world_t;

/* num_replicas, num_partitions >= 1 (at most 4096 participants); timeout_ms 0: the default.
 * device_assignment (optional, copied): participant -> device id, for messages. */
kiln_status kiln_spmd_world_create(int num_replicas, int num_partitions,
                                   const int64_t *device_assignment, int64_t timeout_ms,
                                   kiln_spmd_world_t **out);
void kiln_spmd_world_destroy(kiln_spmd_world_t *w);
int kiln_spmd_world_replicas(const kiln_spmd_world_t *w);
int kiln_spmd_world_partitions(const kiln_spmd_world_t *w);
/* The device id of `participant` in the device assignment (the participant itself without
 * one). */
int64_t kiln_spmd_world_device(const kiln_spmd_world_t *w, int participant);
/* "replica R partition P (device D)" into b. */
void kiln_spmd_world_describe(const kiln_spmd_world_t *w, int participant, kiln_strbuf_t *b);

/* The clique of group `key` of the collective named `op` (its HLO instruction's name, unique
 * in the module, so participants running executables of their own, one per device, meet too),
 * with `size` ranks; created by the first caller. `part` tells apart the cliques of one
 * collective split across its start and done, one per operand (0 otherwise). ABORTED once
 * the world was aborted; INTERNAL when members disagree on the size. Thread-safe. */
kiln_status kiln_spmd_world_clique(kiln_spmd_world_t *w, const char *op, int64_t key, int part,
                                   int size, kiln_coll_clique_t **out);
/* The clique kiln_spmd_world_clique made for (op, key, part), or NULL; aborted or not (a
 * participant that stops ends what it began there: kiln_coll_abandon). */
kiln_coll_clique_t *kiln_spmd_world_find_clique(kiln_spmd_world_t *w, const char *op, int64_t key,
                                                int part);
/* An async collective participant `participant` began over MPI (the start of a pair whose
 * group spans processes): `handle` waits here until its done takes it back
 * (kiln_spmd_world_take_pending: NULL if there is none); destroying the world calls `finish` on
 * any left. Thread-safe. */
kiln_status kiln_spmd_world_put_pending(kiln_spmd_world_t *w, const char *op, int participant,
                                        void *handle, void (*finish)(void *handle));
void *kiln_spmd_world_take_pending(kiln_spmd_world_t *w, const char *op, int participant);
/* The handles `participant` has pending: how many, the first `max` of them into out[]. */
int kiln_spmd_world_pending_of(kiln_spmd_world_t *w, int participant, void **out, int max);
/* A world spanning processes (runtime/mpi.h): `local_devices` participants per process, this
 * one holding participants [rank * local_devices, (rank + 1) * local_devices). A collective
 * whose group has members in other processes runs over MPI; one inside this process keeps its
 * clique. Set before any participant runs. */
void kiln_spmd_world_set_mpi(kiln_spmd_world_t *w, kiln_mpi_t *mpi, int local_devices);
/* The world's MPI (NULL: one process) and its participants per process. */
kiln_mpi_t *kiln_spmd_world_mpi(const kiln_spmd_world_t *w, int *local_devices);
int64_t kiln_spmd_world_timeout_ms(const kiln_spmd_world_t *w);
/* Fails every clique, present and future, with ABORTED naming `participant` and `why` (and
 * breaks the process's MPI collectives in a world spanning processes). Thread-safe; the first
 * abort wins. */
void kiln_spmd_world_abort(kiln_spmd_world_t *w, int participant, const char *why);

typedef struct kiln_spmd_run_params {
  int num_replicas, num_partitions;
  const int64_t *device_assignment;   /* (optional) participant -> device id, for messages */
  int64_t timeout_ms;                 /* 0: KILN_SPMD_DEFAULT_TIMEOUT_MS */
  kiln_stream_t *const *streams;      /* per participant, on the executable's device, distinct */
  const kiln_devptr_t *const *params; /* per participant: num_params addresses */
  const uint64_t *param_sizes;        /* shared: every participant passes the same shapes */
  int32_t num_params;
  /* participant * num_outputs + i receives participant's output i (caller-owned). */
  kiln_device_buffer_t **outputs;
  /* (optional) a world spanning the processes of MPI_COMM_WORLD: N must be a multiple of the
   * process count; this process runs participants [rank * L, (rank + 1) * L), L = N / count,
   * and streams, params and outputs hold only those (local index l for participant
   * rank * L + l). NULL: every participant in this process. */
  kiln_mpi_t *mpi;
} kiln_spmd_run_params_t;

/* Runs `e` on every participant (of this process) concurrently and waits for all. On error every
 * output is NULL and the status is the first participant's own failure (before its peers' ABORTED),
 * annotated with the participant. */
kiln_status kiln_executable_run_spmd(kiln_executable_t *e, const kiln_spmd_run_params_t *p);

#endif /* KILN_RUNTIME_SPMD_H_ */
