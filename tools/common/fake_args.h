/* Deterministic fake arguments for an HLO module's entry computation, in the spirit of
 * XLA's MakeFakeArguments: the same module and seed always give the same bytes.
 *
 * Values (defaults of kiln_fake_args_options_init):
 *   floats (f16, bf16, f32, f64, f8*, f4e2m1fn): uniform in [-1, 1), rounded to the type
 *     (f8e8m0fnu, which has no sign or zero: powers of two 2^-4 .. 2^3);
 *   complex: real and imaginary parts each uniform in [-1, 1);
 *   signed integers: uniform in [-8, 7]; unsigned: [0, 15] (clipped to the type's range);
 *   pred: true or false with equal odds.
 * Index operands get in-range values: when an entry parameter (or a leaf of a tuple
 * parameter) reaches, through get-tuple-element / tuple / convert / reshape / broadcast /
 * bitcast / copy / transpose / slice / reverse / concatenate and into called fusions,
 * calls, async-starts, while loops and conditionals, the start indices of a gather or
 * scatter or a start operand of a dynamic-slice or dynamic-update-slice, its values are
 * uniform in [0, max valid start], the smallest such bound over all of its index uses.
 * Sort and topk keys get no special treatment.
 * Reduction inits get the reducer's identity, as XLA's fake-argument generator gives them:
 * when a parameter leaf reaches (through the same ops and call boundaries) an init operand
 * of a reduce or reduce-window, or the init of a select-and-scatter, every element is the
 * identity of the computation that combines it: add / or / xor 0 (false), multiply 1,
 * maximum the type's lowest value (-inf where the type has one), minimum its highest
 * (+inf), and true / all bits set. A random init would make the result depend on how many
 * times the compiled reduction applies it, which XLA leaves open. Inits of an unrecognized
 * reducer (any other root than one of those ops on its two parameters), or of reducers that
 * ask for different identities, keep their random values; an index use wins over an init use.
 *
 * Each parameter draws from its own splitmix64 stream seeded from (seed, parameter
 * number), so changing one parameter's shape leaves the others' values unchanged. */
#ifndef KILN_TOOLS_COMMON_FAKE_ARGS_H_
#define KILN_TOOLS_COMMON_FAKE_ARGS_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"

typedef struct kiln_fake_args_options {
  uint64_t seed;
  double float_lo, float_hi; /* floats uniform in [float_lo, float_hi) */
  int64_t int_lo, int_hi;    /* signed ints uniform in [int_lo, int_hi] */
  uint64_t uint_hi;          /* unsigned ints uniform in [0, uint_hi] */
  bool index_bounds;         /* analyse index uses (default true) */
} kiln_fake_args_options_t;

/* Sets the defaults above and seed 42. */
void kiln_fake_args_options_init(kiln_fake_args_options_t *o);

/* Makes one literal per entry parameter of `m` in `arena` (shapes cloned into it, so the
 * literals outlive the module). *out_args is an arena-allocated array of *out_num
 * literals. RESOURCE_EXHAUSTED when the arena cannot hold them. */
kiln_status kiln_fake_args_make(const kiln_hlo_module_t *m, const kiln_fake_args_options_t *o,
                                kiln_arena_t *arena, kiln_literal_t ***out_args, int *out_num);

/* Whether `copies` sets of `m`'s entry parameters (every leaf, in their shapes' bytes) fit in
 * the memory the machine has available now (MemAvailable in /proc/meminfo, else sysconf's
 * available pages; no check where neither answers): RESOURCE_EXHAUSTED naming the total, the
 * largest parameter and what is available when they do not. Making them anyway would let
 * the kernel's out-of-memory killer end the process (allocations succeed and fail only when
 * their pages are touched). kiln_fake_args_make and kiln_fake_args_make_one check theirs. */
kiln_status kiln_fake_args_check_memory(const kiln_hlo_module_t *m, int copies);

/* The memory available now, as kiln_fake_args_check_memory reads it (0: unknown). */
uint64_t kiln_fake_args_memory_available(void);

/* Makes the literal for entry parameter `param_number` alone (same values as
 * kiln_fake_args_make gives it). */
kiln_status kiln_fake_args_make_one(const kiln_hlo_module_t *m, const kiln_fake_args_options_t *o,
                                    int param_number, kiln_arena_t *arena, kiln_literal_t **out);

/* The index analysis alone: whether leaf `leaf` (flattened depth-first order; 0 for an
 * array parameter) of entry parameter `param_number` feeds an index operand, and if so
 * the largest start index valid for all of those uses (>= 0). */
bool kiln_fake_args_index_bound(const kiln_hlo_module_t *m, int param_number, int leaf,
                                int64_t *out_max_start);

/* Per-participant arguments for multi-device runs. A ragged-all-to-all of the entry
 * computation whose four offset / size operands are four distinct entry parameters needs
 * them to agree across its group (a sender's sizes are its receivers' recv_sizes), so the
 * same arguments on every participant rarely form a valid exchange. Whether `m` has one: */
bool kiln_fake_args_per_participant(const kiln_hlo_module_t *m);

/* kiln_fake_args_make for `participant` of a world of num_replicas x num_partitions: the same
 * values, except the parameters above, which hold one valid exchange per group (the same
 * for every seed's participants): the row count sent from rank s to rank d in update u is
 * uniform in [0, min(input rows, output rows) / (group size x updates)], drawn from (seed, s,
 * d, u); each sender packs its updates in its input in (peer, update) order, each receiver
 * its updates in its output in (sender, update) order, so nothing overlaps and everything
 * lies in range. INVALID_ARGUMENT when the group cannot be resolved for that world. */
kiln_status kiln_fake_args_make_participant(const kiln_hlo_module_t *m,
                                            const kiln_fake_args_options_t *o, int num_replicas,
                                            int num_partitions, int participant,
                                            kiln_arena_t *arena, kiln_literal_t ***out_args,
                                            int *out_num);

/* Arguments for every participant of a world of R x P: per[i] (R x P entries, caller's
 * array) are participant i's; one shared array when the module does not need per-participant
 * values (*differ false), kiln_fake_args_make_participant's otherwise (*differ true). */
kiln_status kiln_fake_args_make_world(const kiln_hlo_module_t *m, const kiln_fake_args_options_t *o,
                                      int num_replicas, int num_partitions, kiln_arena_t *arena,
                                      kiln_literal_t *const **per, int *out_num, bool *differ);

#endif /* KILN_TOOLS_COMMON_FAKE_ARGS_H_ */
