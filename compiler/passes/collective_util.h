/* Helpers shared by the collective passes (collective_simplifier.c, collective_combiner.c,
 * reduce_scatter_creator.c, async_collective.c): reducer equivalence, single-participant
 * groups, the module's world written down before a pass removes the collectives that named it.
 *
 * Thread safety: pure functions over one module; a module is rewritten by one thread. */
#ifndef KILN_PASSES_COLLECTIVE_UTIL_H_
#define KILN_PASSES_COLLECTIVE_UTIL_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

/* The binary op a reducer computation applies to its two distinct parameters (add, multiply,
 * minimum, maximum, and, or: all commutative), or KILN_OP_COUNT when it is anything else.
 * *type: the parameters' element type. */
kiln_hlo_opcode_t kiln_coll_reducer_op(const kiln_hlo_computation_t *f, kiln_elem_type_t *type);

/* Whether the runtime's cliques (host rendezvous, MPI, NCCL) reduce elements of type `t`
 * themselves: pred, the 8- to 64-bit integers, f16, bf16, f32, f64. The thunk emitter takes
 * reductions of these; collective_reducer_expander rewrites the others (sub-byte integers,
 * fp8, complex). */
bool kiln_coll_runtime_reduces_type(kiln_elem_type_t t);

/* Whether collectives `a` and `b` reduce the same way: the same to_apply computation, or two
 * computations applying the same commutative op to their two parameters of one type. */
bool kiln_coll_same_reducer(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b);

/* Whether every group of `in` (all-reduce, all-gather, reduce-scatter, all-to-all,
 * collective-broadcast) holds one participant in any world the module can run in: explicit or
 * iota groups all of size 1, in a mode where group ids name whole participants (cross-replica,
 * cross-partition, flattened ids), or cross-replica-and-partition in a module written with
 * num_partitions=1. `{}` never (its size is the world's). */
bool kiln_coll_single_participant(const kiln_hlo_module_t *m, const kiln_hlo_instruction_t *in);

/* Writes replica_count / num_partitions into the module's attributes when the module does not
 * write them, from kiln_eval_spmd_world_size: a pass that removes collectives must not shrink
 * the world the module's remaining collectives and replica-id / partition-id run in. */
kiln_status kiln_coll_pin_world(kiln_hlo_module_t *m);

/* One instruction's rewrite: *replaced set when `in` was replaced (and removed). */
typedef kiln_status (*kiln_coll_rewrite_fn)(void *ctx, kiln_hlo_instruction_t *in, bool *replaced);

/* The opcodes a rewrite takes: it must leave an instruction of any other opcode alone. */
typedef bool (*kiln_coll_opcode_fn)(kiln_hlo_opcode_t op);

/* Calls `fn` on every instruction of every computation, in the post order the computation had
 * before its first call; a computation where something was replaced is put back in post order
 * and *changed set. Stops at the first error. A computation without an instruction whose
 * opcode `takes` (nearly all) is passed over after one read of each instruction's opcode. */
kiln_status kiln_coll_rewrite_each(kiln_hlo_module_t *m, kiln_coll_opcode_fn takes,
                                   kiln_coll_rewrite_fn fn, void *ctx, bool *changed);

/* Whether `in` has control edges (the collective passes leave those alone). */
bool kiln_coll_has_control_edges(const kiln_hlo_instruction_t *in);

#endif /* KILN_PASSES_COLLECTIVE_UTIL_H_ */
