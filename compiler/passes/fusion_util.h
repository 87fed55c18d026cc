/* Fusion helpers shared by priority fusion, multi-output fusion and the kernel counters:
 * which instructions the emitters can take into a fusion (hero analysis), building a fusion
 * instruction from a set of instructions, and reachability for cycle checks.
 *
 * Emitter rules (issue 7): a fusion is emitted by the loop emitter (kLoop: elementwise ops,
 * broadcast, reshape, bitcast, transpose, slice, concatenate, pad, reverse, iota, gather,
 * dynamic-slice, reduce-window, ...), or around a hero: a reduction (reduce whose operand has
 * rank > 0: kind kInput, the reduce is a root), a scatter (kInput, root only) or an
 * in-place dynamic-update-slice (kLoop, root only). Dot, convolution, custom-call, sort,
 * while/conditional/call, rng, collectives, infeed/outfeed/send/recv and the other library
 * or control ops are never fused with anything. */
#ifndef KILN_PASSES_FUSION_UTIL_H_
#define KILN_PASSES_FUSION_UTIL_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/hashmap.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"

/* Largest fusion the passes build: instructions in the fused computation, and operands. */
#define KILN_FUSION_MAX_INSTRUCTIONS 200
/* Priority fusion's bound when a loop producer and its consumer each read and write values of
 * at most KILN_FUSION_TINY_ELEMENTS elements (priority_fusion.c). */
#define KILN_FUSION_TINY_ELEMENTS 64
#define KILN_FUSION_MAX_TINY_INSTRUCTIONS 1000
#define KILN_FUSION_MAX_OPERANDS 64

/* ---- hero analysis ---- */

/* A reduce whose (first) operand has rank > 0: the reduction emitter's hero. */
bool kiln_fusion_is_reduction_hero(const kiln_hlo_instruction_t *in);
/* A transpose that moves data (not bitcast-like): the transpose emitter's hero. */
bool kiln_fusion_is_transpose_hero(const kiln_hlo_instruction_t *in);
/* bitcast, or a reshape/transpose that only reinterprets memory (no data moves): a reshape
 * between shapes that both have the default layout (or none), a reshape or transpose that
 * only adds/removes size-1 dimensions keeping the physical order of the others. */
bool kiln_fusion_is_bitcast_like(const kiln_hlo_instruction_t *in);
/* Not a kernel of its own: parameter, constant, tuple, get-tuple-element, bitcast-like ops.
 * (Also after-all/add-dependency/opt-barrier/domain, which move no data.) */
bool kiln_fusion_is_free(const kiln_hlo_instruction_t *in);
/* May sit anywhere inside a loop fusion (including a reduction fusion's prologue). */
bool kiln_fusion_is_loop_fusible(const kiln_hlo_instruction_t *in);
/* Whether `in` is a fusion instruction the passes may grow (kLoop or kInput; kCustom and
 * kOutput fusions from elsewhere are left alone). */
bool kiln_fusion_is_growable(const kiln_hlo_instruction_t *in);
/* A computation whose roots/contents hold an in-place hero (scatter, dynamic-update-slice). */
bool kiln_fusion_computation_has_in_place_hero(const kiln_hlo_computation_t *c);
/* A computation holding a reduction hero. */
bool kiln_fusion_computation_has_reduction(const kiln_hlo_computation_t *c);
/* The kind a fused computation gets: kInput for a reduction or scatter hero, else kLoop. */
kiln_hlo_fusion_kind_t kiln_fusion_kind_for(const kiln_hlo_computation_t *fused);

/* A producer that can be fused into its consumers: a loop-fusible op or a kLoop fusion
 * without in-place heroes, array-shaped, without control dependencies. */
bool kiln_fusion_can_be_producer(const kiln_hlo_instruction_t *in);
/* Whether `consumer` can take `producer` (one of its operands) into itself: the consumer
 * is loop-fusible, a reduce (input fusion), a scatter/dynamic-update-slice reading the
 * producer only as updates/indices, or a growable fusion reading it only where such rules
 * hold. Does not check sizes or cycles. NULL `why` or a static reason string. */
bool kiln_fusion_can_consume(const kiln_hlo_instruction_t *consumer,
                             const kiln_hlo_instruction_t *producer, const char **why);
/* Instruction count of what fusing `in` brings in (its fused computation's size for a
 * fusion, else 1). */
int kiln_fusion_body_size(const kiln_hlo_instruction_t *in);

/* The hero of a fusion root, as the codegen's hero analysis finds it: walking up from
 * `root` through one-operand intermediates (elementwise ops other than copy, bitcasts,
 * reshapes/transposes that are bitcasts between default layouts), never into a
 * parameter, to a reduction hero; `root` itself when the walk ends elsewhere. */
const kiln_hlo_instruction_t *kiln_fusion_hero(const kiln_hlo_instruction_t *root);
/* A reduction (reduce hero, or a kInput fusion whose root's hero is a reduction) that an
 * elementwise epilogue may be fused into, array-shaped. */
bool kiln_fusion_is_reduction_producer(const kiln_hlo_instruction_t *in);
/* Whether `consumer` can become `producer`'s (a reduction producer's) epilogue. After a
 * reduction the reduction emitter takes (kiln_fusion_reduction_is_unnested): only when it
 * is race-free and the consumer is a one-operand intermediate, or a kLoop fusion of one
 * parameter holding nothing else (XLA's rule; the codegen finds the hero through those
 * alone). After a reduction emitted elementally: an elementwise or bitcast-like op, or a
 * kLoop fusion in which everything that depends on the producer is. */
bool kiln_fusion_can_take_epilogue(const kiln_hlo_instruction_t *consumer,
                                   const kiln_hlo_instruction_t *producer);

/* The shape the fusion's emitter iterates over: for a reduction fusion (or reduce) the
 * reduce operand's shape and the reduced dimensions; else the (first array) root's shape. */
typedef struct kiln_fusion_loop_shape {
  bool reduction;
  const kiln_shape_t *shape;
  const kiln_i64_list_t *reduce_dims; /* reductions only */
} kiln_fusion_loop_shape_t;

bool kiln_fusion_loop_shape(const kiln_hlo_instruction_t *in, kiln_fusion_loop_shape_t *out);
/* Whether the codegen's reduction emitter takes reduce `r` (a reduction hero whose kept
 * or reduced dimensions are one physical run, and which XLA's "unnested reduction is
 * faster than elemental" rule sends to the reduction emitter; complex values only by an
 * add reducer); else the loop emitter computes it elementally. */
bool kiln_fusion_reduction_is_unnested(const kiln_hlo_instruction_t *r);
/* XLA's race-free bound: one block covers the whole reduced extent, so the reduction
 * emitter can apply an epilogue or feed other roots (a row reduction of at most 32768
 * elements per row and 8 major rows, a column reduction of at most 4096 reduced rows). */
bool kiln_fusion_reduction_is_race_free(const kiln_hlo_instruction_t *r);
/* Whether merging fusions (or fusible ops) `a` and `b` gives outputs one emitter can
 * produce, as the codegen's hero analysis decides: when some output's hero is a reduction
 * the reduction emitter takes (unnested, race-free unless it is the output itself), every
 * other output is a reduction of the same form or has as many elements as its input;
 * otherwise (loop emitter) all outputs have the same element count. A reduction kernel's
 * tiles must also fit the default device's static shared memory (48 KiB; the plan and tile
 * sizes of compiler/analysis/reduction_rule.h). Every output of both
 * is counted, so this is conservative for a producer whose outputs the consumer alone
 * reads. */
bool kiln_fusion_can_share_kernel(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b);
/* Whether the outputs of fusion `f` (as it stands, e.g. given in the input) fit one kernel:
 * when one of them ends at a reduce, by the rule above (a reduction emitter's outputs, or
 * one element count for all: the loop emitter); without a reduce, one element count or the
 * input-slices emitter's outputs (unit-stride slices of one input shape, and values of that
 * shape). True with a scatter, sort or dynamic-update-slice (their emitters write outputs of
 * several sizes) and when the rule cannot tell (a tuple-shaped output, more outputs than it
 * counts): the emitter then names what it refuses. */
#define KILN_FUSION_MAX_OUTPUTS_CHECKED 256
bool kiln_fusion_outputs_fit_one_kernel(const kiln_hlo_instruction_t *f);
/* Whether fusion `f` holds a scatter that is not its root, or a sort its root does not end
 * at (the sort, its outputs or a tuple of them): the scatter and sort emitters start from
 * the root, so no one kernel computes it as it stands (e.g. a copy after the scatter that
 * layout assignment put inside a given fusion). */
bool kiln_fusion_hero_off_root(const kiln_hlo_instruction_t *f);
/* Whether two fusions (or fusible ops) can share one multi-output kernel. */
bool kiln_fusion_loop_shapes_compatible(const kiln_fusion_loop_shape_t *a,
                                        const kiln_fusion_loop_shape_t *b);

/* ---- kernels ---- */

/* A computation whose instructions run as a sequence of kernels: the entry and what while
 * loops, conditionals, calls and async ops call (not fused computations, reducers,
 * comparators or other embedded ones). kiln_malloc'ed array, entry first. */
kiln_hlo_computation_t **kiln_fusion_sequential_computations(const kiln_hlo_module_t *m,
                                                             size_t *out_n);
/* What a fusion pass keeps across the computations of one module. */
typedef struct kiln_fusion_scope {
  /* Fused computations the pass may have made unused (inlined into another fusion). */
  kiln_ptrmap_t retired;
  /* Call sites of each computation when the pass began (kiln_pass_count_callers; one made
   * since has one): a fused computation called more than once is never grown in place. */
  kiln_ptrmap_t callers;
} kiln_fusion_scope_t;

/* A fusion pass's work on one sequential computation: fused computations it makes unused
 * go into `scope->retired`; `*changed` set when it changed anything. */
typedef kiln_status (*kiln_fusion_computation_fn)(kiln_hlo_computation_t *c,
                                                  kiln_fusion_scope_t *scope, bool *changed);
/* Runs `fn` on every sequential computation of `m` (after making arena room), stops at the
 * first error (named "<what> of '<computation>'"), drops the retired fused computations
 * nothing calls any more and ORs what changed into `*changed`. One walk of the module finds
 * how often each computation is called first. */
kiln_status kiln_fusion_run_on_computations(kiln_hlo_module_t *m, const char *what,
                                            kiln_fusion_computation_fn fn, bool *changed);
/* An instruction that launches a kernel (or a library call): not free, not a call/while/
 * conditional (their bodies are counted instead). */
bool kiln_fusion_is_kernel(const kiln_hlo_instruction_t *in);
/* Kernels over all sequential computations (each computation counted once). */
int64_t kiln_fusion_count_kernels(const kiln_hlo_module_t *m);

/* ---- building fusions ---- */

/* Replaces `members` (instructions of one computation; fusions among them are inlined)
 * with one fusion instruction whose computation `fused_computation.N` holds their clones.
 * Its operands are the distinct values outside the set that members read (scalar
 * constants are cloned inside instead). Outputs are the members used outside the set or
 * being the computation's root; one output becomes the fusion's root and its uses move to
 * the fusion; several make a tuple root and their uses move to get-tuple-elements.
 * `duplicate` (may be NULL) flags members that are cloned in but stay in place for their
 * other users (their operands must be outside the set). Members that are multi-output
 * fusions bring their get-tuple-element users in with them. The caller checks cycles:
 * the set must be convex (no path leaves it and comes back).
 * Fused computations of inlined fusions are appended to `retired` (may be NULL) so the
 * caller can drop the ones nothing calls any more (kiln_fusion_remove_retired). */
kiln_status kiln_fusion_create(kiln_hlo_computation_t *c, int n,
                               kiln_hlo_instruction_t *const *members, const bool *duplicate,
                               kiln_ptrmap_t *retired, kiln_hlo_instruction_t **out_fusion);
/* kiln_fusion_create's result, built without copying a fused computation where one member
 * can host the others: a fusion (not duplicated) whose fused computation only it calls
 * (per `scope->callers`; the largest such body when there are several). The other
 * members' clones are added to that computation (a member fusion that goes away, and whose
 * fused computation only it calls, has its instructions moved in instead of cloned; that
 * computation is retired), the parameters they feed replaced by them, and the fusion
 * instruction itself becomes the result:
 * `*out_fusion` is that member, which stays (every other member goes as with
 * kiln_fusion_create). The result is the one kiln_fusion_create builds, instruction for
 * instruction: the same fused instructions in the same order, the same parameter and
 * operand order, the same users in the same order, the fusion moved to the end of `c`'s
 * instruction list; only names and ids differ (the host keeps its own, and its fused
 * computation stays where it is in the module). Without a host it is kiln_fusion_create. */
kiln_status kiln_fusion_merge(kiln_fusion_scope_t *scope, kiln_hlo_computation_t *c, int n,
                              kiln_hlo_instruction_t *const *members, const bool *duplicate,
                              kiln_hlo_instruction_t **out_fusion);
/* Removes the computations in `retired` that no instruction of the module calls. */
void kiln_fusion_remove_retired(kiln_hlo_module_t *m, kiln_ptrmap_t *retired);

/* Fusion passes copy computations into the module's arena; a module parsed from text
 * carries the parser's arena bound (a multiple of its text size), which guards the parser,
 * not the passes. This raises a bound to leave room for the copies (total * 4 + 64 MiB). */
void kiln_fusion_make_arena_room(kiln_hlo_module_t *m);

/* ---- reachability ---- */

/* Topological positions of a computation's instructions (post order index), for pruning
 * reachability searches. */
typedef struct kiln_fusion_order {
  kiln_ptrmap_t pos; /* instruction -> (void*)(index + 1) */
  size_t n;
  /* 0: searches are exhaustive. Otherwise a search that visits more instructions than this
   * stops and answers "reaches" (the safe answer for a caller about to merge), so each
   * query costs at most this much on a big computation. */
  size_t max_visits;
} kiln_fusion_order_t;

void kiln_fusion_order_build(kiln_fusion_order_t *o, const kiln_hlo_computation_t *c);
void kiln_fusion_order_free(kiln_fusion_order_t *o);
/* Gives `in`, an instruction made after the order was built (a new fusion), and its
 * get-tuple-element users a position between its operands' and its users' (positions need
 * only not decrease along edges), so the order stays usable without a rebuild. False when
 * no such position exists (an operand sits after a user) or a neighbour has none: the
 * caller rebuilds the order. */
bool kiln_fusion_order_place(kiln_fusion_order_t *o, const kiln_hlo_instruction_t *in);
/* Whether a path of operand->user edges (control edges too) leads from `from` to `to`,
 * other than through the instructions in `skip` (may be NULL); true as well when the search
 * exceeds o->max_visits. */
bool kiln_fusion_reaches(const kiln_fusion_order_t *o, const kiln_hlo_instruction_t *from,
                         const kiln_hlo_instruction_t *to, const kiln_ptrmap_t *skip);

#endif /* KILN_PASSES_FUSION_UTIL_H_ */
