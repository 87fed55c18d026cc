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
                                 int num_partitions, kiln_thunk_seq_t *seq);

/* For the -done of a start: the leaf of the start holding result `k`. */
int kiln_collective_result_leaf(const kiln_hlo_instruction_t *start, int k);

#endif /* KILN_COMPILER_THUNKS_COLLECTIVE_EMITTER_H_ */
