/* In-process collectives between host devices: a clique of `size` ranks (one thread each,
 * every rank one host device of this process) that meet at each collective.
 *
 * A collective is two barriers. At the first every rank publishes its send buffer; then each
 * rank computes its own result by reading its peers' send buffers directly (data moves once,
 * peer to destination, no per-element locks); at the second barrier every rank is done
 * reading, so send buffers may change again. A rank whose send and receive buffers overlap
 * is staged through clique-owned scratch first. An all-reduce of 4096 elements per rank or
 * more splits in two (a third barrier): each rank folds its 1/size of the elements, then
 * copies the other chunks from their owners. Reductions fold in rank order,
 * ((v0 op v1) op v2) ..., the evaluator's order (compiler/eval/eval.h).
 *
 * Every rank must call the same collectives in the same order with the same name, kind and
 * sizes; a mismatch fails every rank with INVALID_ARGUMENT naming both. A rank that does not
 * arrive within timeout_ms fails the others with DEADLINE_EXCEEDED naming the collective
 * and the missing ranks; the clique is then broken and every later call fails at once with
 * the same error (create a new clique): a missing rank is never a hang. A break (an abort, a
 * deadline) ends the waits of a collective's arrival; past it, every rank reads (or, deferred,
 * will read) its peers' buffers, so each still waits until all of them finished reading,
 * however long that takes, and a rank never returns while a peer may read its buffers. There
 * is no deadline past arrival: ranks that end deferred collectives in different orders
 * deadlock there (a warning names the ranks once the timeout has passed); one SPMD
 * executable's participants end them in the same order.
 *
 * A collective can also be split at its first barrier (kiln_coll_defer / kiln_coll_complete),
 * so a rank computes while its peers arrive and only then moves the data.
 *
 * Thread safety: each rank calls from one thread at a time; different ranks call
 * concurrently. Create and destroy while no rank is inside a call. */
#ifndef KILN_RUNTIME_COLLECTIVES_H_
#define KILN_RUNTIME_COLLECTIVES_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum kiln_coll_dtype {
  KILN_COLL_PRED, /* 1 byte, 0 or 1: MIN = and, MAX = or */
  KILN_COLL_S8,
  KILN_COLL_U8,
  KILN_COLL_S16,
  KILN_COLL_U16,
  KILN_COLL_S32,
  KILN_COLL_U32,
  KILN_COLL_S64,
  KILN_COLL_U64,
  KILN_COLL_F32,
  KILN_COLL_F64,
  /* Folded in f32 and rounded back once per step, ((v0 op v1) op v2) each op rounded to the
   * type, as XLA's reducer computation on these types (and the evaluator) do. */
  KILN_COLL_BF16,
  KILN_COLL_F16,
} kiln_coll_dtype_t;

/* The reducer computations a thunk emitter recognises (add, multiply, minimum, maximum,
 * and/or on pred). Integer SUM and PRODUCT wrap. */
typedef enum kiln_coll_reduction {
  KILN_COLL_SUM,
  KILN_COLL_PRODUCT,
  KILN_COLL_MIN,
  KILN_COLL_MAX,
} kiln_coll_reduction_t;

size_t kiln_coll_dtype_bytes(kiln_coll_dtype_t t);
/* dst[i] = dst[i] op src[i], i < n: one step of the rank-order fold every collective here uses
 * (and runtime/mpi.h's, so both give the same bits). */
void kiln_coll_fold(kiln_coll_dtype_t t, kiln_coll_reduction_t op, void *dst, const void *src,
                    int64_t n);

typedef struct kiln_coll_clique kiln_coll_clique_t;

/* size >= 1 ranks; timeout_ms > 0. The caller owns *out. */
kiln_status kiln_coll_clique_create(int size, int64_t timeout_ms, kiln_coll_clique_t **out);
void kiln_coll_clique_destroy(kiln_coll_clique_t *c);
int kiln_coll_clique_size(const kiln_coll_clique_t *c);
/* Breaks the clique (thread-safe, any thread): ranks waiting in it and every later call fail
 * with ABORTED carrying `why`, unless it is broken already. For a run whose participant
 * failed elsewhere, so its peers stop now instead of at the deadline. */
void kiln_coll_clique_abort(kiln_coll_clique_t *c, const char *why);

/* Splitting a collective in two (async -start / -done): after kiln_coll_defer(c, rank), the
 * rank's next call on `c` returns as soon as it has published its buffers and checked them
 * against its peers' (its send buffer staged first if it overlaps recv), without waiting for
 * them; kiln_coll_complete(c, rank) then waits for the peers to arrive (the timeout counts from
 * there),
 * writes this rank's result and returns once every peer finished reading its send buffer. In
 * between, the caller may do anything but change either buffer or call `c` again (that call
 * is FAILED_PRECONDITION). Failures surface at complete. ragged-all-to-all does not defer.
 * complete with nothing deferred: FAILED_PRECONDITION. */
void kiln_coll_defer(kiln_coll_clique_t *c, int rank);
kiln_status kiln_coll_complete(kiln_coll_clique_t *c, int rank);
/* For a rank that stops between kiln_coll_defer's call and kiln_coll_complete (its execution
 * failed): returns once no peer can read its buffers any more, so the caller may free them.
 * If some peer has not arrived, the clique breaks (ABORTED naming the collective, the rank
 * and `why`) and it returns at once; if every peer arrived, it finishes the collective (its
 * peers need its buffers; the result it writes is discarded) and returns when the peers
 * finished reading. Nothing deferred: nothing happens. */
void kiln_coll_abandon(kiln_coll_clique_t *c, int rank, const char *why);

/* `name` names the collective in errors (the HLO instruction). Layouts are row-major with
 * the rank block in the middle: a buffer [outer][size][inner] elements.
 *
 * all-reduce: recv[e] = fold over ranks of send_k[e], e < count. */
kiln_status kiln_coll_all_reduce(kiln_coll_clique_t *c, int rank, const char *name,
                                 kiln_coll_dtype_t t, kiln_coll_reduction_t op, const void *send,
                                 void *recv, int64_t count);
/* reduce-scatter: send [outer][size][inner]; recv [outer][inner] = the fold of every rank's
 * block `rank`. */
kiln_status kiln_coll_reduce_scatter(kiln_coll_clique_t *c, int rank, const char *name,
                                     kiln_coll_dtype_t t, kiln_coll_reduction_t op,
                                     const void *send, void *recv, int64_t outer, int64_t inner);
/* all-gather: send [outer][block_bytes]; recv [outer][size][block_bytes], block k from rank k. */
kiln_status kiln_coll_all_gather(kiln_coll_clique_t *c, int rank, const char *name,
                                 const void *send, void *recv, int64_t outer, size_t block_bytes);
/* all-to-all: send and recv [outer][size][block_bytes]; recv block k = rank k's send block
 * `rank`. */
kiln_status kiln_coll_all_to_all(kiln_coll_clique_t *c, int rank, const char *name,
                                 const void *send, void *recv, int64_t outer, size_t block_bytes);
/* collective-permute: recv = rank `source`'s send (bytes each); source -1: zeros. */
kiln_status kiln_coll_permute(kiln_coll_clique_t *c, int rank, const char *name, int source,
                              const void *send, void *recv, size_t bytes);
/* collective-broadcast: recv = rank 0's send. */
kiln_status kiln_coll_broadcast(kiln_coll_clique_t *c, int rank, const char *name, const void *send,
                                void *recv, size_t bytes);

/* ragged-all-to-all: `result` (output_rows rows of row_bytes) = `output` with every rank's
 * updates for this one written over it, rank by rank (base/ragged_all_to_all.h: the
 * evaluator's order and checks; a bad offset or size is INVALID_ARGUMENT on the receiving
 * rank, the others finish). Metadata: size x updates entries each, peer-major. */
typedef struct kiln_coll_ragged {
  const void *input; /* input_rows rows, read by every rank */
  int64_t input_rows;
  const void *output; /* the output operand: output_rows rows (may be `result` itself) */
  void *result;
  int64_t output_rows;
  size_t row_bytes;
  const int64_t *input_offsets, *send_sizes, *output_offsets, *recv_sizes;
  int64_t updates; /* per peer */
} kiln_coll_ragged_t;
kiln_status kiln_coll_ragged_all_to_all(kiln_coll_clique_t *c, int rank, const char *name,
                                        const kiln_coll_ragged_t *r);

#endif /* KILN_RUNTIME_COLLECTIVES_H_ */
