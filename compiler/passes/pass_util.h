/* Helpers shared by the simplification passes (simplify, constant folding, DCE, CSE, tuple
 * simplification, call inlining, while-loop constant sinking).
 *
 * Side effects: an instruction "has a side effect" when removing it, merging it with an
 * identical one or reordering it could change what the program does beyond its result:
 * host and peer transfers (infeed, outfeed, send, recv and their -done), the stateful `rng`
 * and rng-get-and-update-state, every collective (they synchronize with other devices),
 * async pairs (async-*, copy-start/done, custom-call-start/...), and custom-calls marked
 * custom_call_has_side_effect=true. Instructions that call computations (while, call,
 * conditional, fusion, reduce, ...) inherit the side effects of what they call. */
#ifndef KILN_PASSES_PASS_UTIL_H_
#define KILN_PASSES_PASS_UTIL_H_

#include <stdbool.h>

#include "base/hashmap.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"

/* The instruction's own side effect, ignoring what it calls. All-reduce, all-gather,
 * all-to-all, reduce-scatter and collective-permute have one only with a channel_id or
 * constrain_layout=true; the other collectives, async pairs, sends, receives, feeds, rng
 * and custom calls marked custom_call_has_side_effect always. */
bool kiln_pass_has_own_side_effect(const kiln_hlo_instruction_t *in);

/* Memoized transitive side-effect query over called computations. */
typedef struct kiln_pass_effects {
  kiln_ptrmap_t comps; /* computation -> (void *)1 pure / (void *)2 effectful */
} kiln_pass_effects_t;

void kiln_pass_effects_init(kiln_pass_effects_t *e);
void kiln_pass_effects_free(kiln_pass_effects_t *e);
/* True when `in` or anything it (transitively) calls has a side effect. */
bool kiln_pass_effects_instruction(kiln_pass_effects_t *e, const kiln_hlo_instruction_t *in);

/* True when shapes are the same for a replacement: element type, dims, dynamism, and
 * layouts (when either has one, both must have the same one). */
bool kiln_pass_same_shape(const kiln_shape_t *a, const kiln_shape_t *b);

/* Removes `in` when it is dead (no users, not the root, not a parameter, no side effect,
 * no control successors) and then, recursively, those of its operands that became dead.
 * Returns the number of instructions removed. */
int kiln_pass_remove_if_dead(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects);

/* Replaces every use of `old` (and the root, if it is) by `repl`, then removes `old` and
 * operands that became dead as in kiln_pass_remove_if_dead. */
void kiln_pass_replace_instruction(kiln_hlo_instruction_t *old, kiln_hlo_instruction_t *repl,
                                   kiln_pass_effects_t *effects);

/* Replaces operand occurrences of `old` in `user` alone by `repl` (user lists updated). */
void kiln_pass_replace_operand(kiln_hlo_instruction_t *user, kiln_hlo_instruction_t *old,
                               kiln_hlo_instruction_t *repl);

/* Copies the instructions of `callee` into `dest` (another computation of the module), each
 * parameter k becoming args[k], and returns the copy of callee's root (args[k] itself when the
 * root is parameter k). Control edges between copied instructions are copied; those from
 * parameters are dropped (the argument is computed first anyway). NULL when the arena refused
 * memory: the copies made so far stay, unused. Inlining a call and unrolling a loop both copy
 * bodies this way. */
kiln_hlo_instruction_t *kiln_pass_copy_body(kiln_hlo_computation_t *dest,
                                            const kiln_hlo_computation_t *callee,
                                            kiln_hlo_instruction_t *const *args);
/* Removes every instruction in `dead` (a pointer set) from `c` in one sweep. The caller
 * guarantees none is the root and every user of each is in the set too. Control edges:
 * the removed instruction's control successors inherit its control predecessors. */
void kiln_pass_remove_instructions(kiln_hlo_computation_t *c, kiln_ptrmap_t *dead);

/* Removes every computation the entry cannot reach through called computations. Returns
 * how many were removed (0 when the module has no entry). */
int kiln_pass_remove_unreachable_computations(kiln_hlo_module_t *m);

/* How many instructions of `c` have opcode `op`, counted up to `enough` (the scan stops there).
 * One read of each instruction's opcode: the cheap test a pass makes before walking a
 * computation's post order (operands, users and a hash map keyed by instruction, which miss
 * the caches once the module outgrows them) when it acts only on some opcodes. */
size_t kiln_pass_count_opcode(const kiln_hlo_computation_t *c, kiln_hlo_opcode_t op, size_t enough);

/* Number of call sites (called-computation references) of each computation, over all
 * instructions of the module: fills `counts` (computation -> (void *)(intptr_t)count). */
void kiln_pass_count_callers(const kiln_hlo_module_t *m, kiln_ptrmap_t *counts);

/* Splat queries on a constant, or a broadcast of a constant: every element equals the
 * value. Elided constants never match. */
typedef enum kiln_pass_splat {
  KILN_SPLAT_ONE,       /* 1 (true for pred); not complex */
  KILN_SPLAT_INT_ZERO,  /* integer 0 (integral types only) */
  KILN_SPLAT_POS_ZERO,  /* float +0.0 (real float types only) */
  KILN_SPLAT_NEG_ZERO,  /* float -0.0 (real float types only) */
} kiln_pass_splat_t;
bool kiln_pass_is_splat(const kiln_hlo_instruction_t *in, kiln_pass_splat_t what);

#endif /* KILN_PASSES_PASS_UTIL_H_ */
