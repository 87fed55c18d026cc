/* Collective thunks from HLO (runtime/collective_thunk.h): all-reduce(-start), all-gather(
 * -start), reduce-scatter, all-to-all, collective-permute(-start), collective-broadcast,
 * replica-id and partition-id, for a world of num_replicas x num_partitions participants.
 * Every participant's group is resolved here, once (compiler/hlo/collective_groups.h, the
 * evaluator's resolution). Reducers recognised: add, multiply, minimum, maximum of the two
 * parameters, and/or on pred; others are UNIMPLEMENTED naming the computation. The -start
 * forms complete at the start; their -done copies the start's result part. */
#ifndef KILN_COMPILER_THUNKS_COLLECTIVE_EMITTER_H_
#define KILN_COMPILER_THUNKS_COLLECTIVE_EMITTER_H_

#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/buffer_assignment.h"
#include "runtime/thunk.h"

/* Appends the thunk of collective (or replica-id / partition-id) `in` to `seq`. */
kiln_status kiln_collective_emit(const kiln_hlo_instruction_t *in,
                                 const kiln_buffer_assignment_t *ba, int num_replicas,
                                 int num_partitions, bool split, kiln_thunk_seq_t *seq);

/* The collective an async-start wraps (the root of its calls= computation: all-reduce,
 * all-gather, reduce-scatter, all-to-all, collective-permute or collective-broadcast of the
 * computation's parameters in order), or NULL. */
const kiln_hlo_instruction_t *kiln_collective_async_wrapped(const kiln_hlo_instruction_t *start);

/* With `split`, a start the runtime may split (kiln_hlo_async_split_done) is emitted as a
 * START thunk (see runtime/collective_thunk.h); for its done this appends the DONE thunk (the
 * start's name and description), before the done copies the results. Nothing for any other
 * done, or without `split` (the start ran the whole collective). */
kiln_status kiln_collective_emit_done(const kiln_hlo_instruction_t *done,
                                      const kiln_buffer_assignment_t *ba, int num_replicas,
                                      int num_partitions, bool split, kiln_thunk_seq_t *seq);

/* Appends the thunk of the collective async-start `start` wraps, on the start's operands and
 * into the results part of its ((operands...), results, context...) tuple; UNIMPLEMENTED
 * naming it for any other async-start. Its async-done copies that part. */
kiln_status kiln_collective_emit_async(const kiln_hlo_instruction_t *start,
                                       const kiln_buffer_assignment_t *ba, int num_replicas,
                                       int num_partitions, bool split, kiln_thunk_seq_t *seq);

/* For the -done of a start: the leaf of the start holding result `k`. */
int kiln_collective_result_leaf(const kiln_hlo_instruction_t *start, int k);

#endif /* KILN_COMPILER_THUNKS_COLLECTIVE_EMITTER_H_ */
