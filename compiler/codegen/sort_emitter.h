/* Sort emitter: a fusion whose root is a `sort` (possibly through a root tuple of
 * get-tuple-elements) on fusion parameters, compiled to one kernel that runs on both targets
 * (DESIGN.md principle 1).
 *
 * Algorithm: a bitonic sorting network over each row (the elements along `dimensions={d}`
 * for one index of every other dimension). Rows are padded to N = the next power of two with
 * virtual "greater than everything" elements that are never read or moved: the network is
 * written in its all-ascending form (each merge of size k starts with a "flip" step that
 * compares i with the mirror element of its k-block, then half-cleaners compare i with
 * i + j), so every comparison pairs i < l and only ever moves the smaller element to i; a
 * pair whose l lies past the row end is skipped.
 *
 * Launch: one block per row (or, for rows of fewer than 256 elements, 128 / (N / 2) rows
 * per block); T = min(1024, rows per block * N / 2) threads; each thread handles N / 2 / T
 * pairs per step. When the block's rows of every operand (and the positions of a stable
 * sort) fit in 48 KiB, the kernel copies them into shared memory, runs the
 * log2(N) * (log2(N) + 1) / 2 steps there, each after a block barrier, and copies the
 * sorted rows out to the outputs. The steps are one kernel-IR loop (barrier first in its
 * body; stage and distance computed from the step number), so the kernel's size and its
 * compile time do not grow with them: distances 1, 2, 4 and 8 each get a guarded copy of
 * the step with the distance constant (the host vectorizes those without gathers), larger
 * ones share one copy with the distance at run time. Otherwise it copies every operand into its
 * output buffer (the sort never writes its inputs) and runs the steps on the output buffers (global
 * memory: a row of any length fits, at one block per row).
 *
 * Comparator: the `to_apply` computation is emitted inline on scalars (the elemental
 * emitter's scalar computation), params 2k / 2k+1 being operand k's element at the higher /
 * lower position; the pair swaps when it says "higher before lower". NaN handling and total
 * order are the comparator's. `is_stable=true`: each element carries its original position
 * in block-shared memory (s32, rows per block * n of them), and equal elements (neither
 * before the other) are ordered by that position. When those positions would pass 48 KiB
 * (rows of more than 12288 elements), the stable sort merges instead: one block per row
 * (T = 1024 threads), log2(N) passes after barriers, pass p merging sorted runs of 2^p into
 * runs of 2^(p+1). Each thread owns the N / T consecutive positions of a chunk of the row;
 * where its chunk starts inside a pair of runs, a binary search of the merge path (p + 1
 * comparator calls) finds how many elements of each run come before it, then the thread
 * merges its chunk sequentially, one comparator call per element, taking the right run's
 * element only when it goes before the left one's (equal elements keep their order). Every
 * pass reads one buffer and writes the other: the outputs and a scratch tensor per operand
 * (kiln_codegen_kernel_t.scratch), alternately, the inputs copied first into the one the
 * first pass reads, the last pass writing the outputs. About n log2(n) comparisons per row (n^2
 * when the rows were ranked, before session 36).
 *
 * On the host (kiln_codegen_compile_options_t.host_target) every sort whose rows pad past 16
 * elements merges, stable or not, with one thread per row (T = 1, the chunk the whole row:
 * no merge-path search) and one block per row: the network's steps at run-time distances
 * run as scalar code there (the pairs' positions are not affine in the thread), and the
 * merge measured 1.5-4x faster from 20 to 8,192 elements per row (session 45); rows of at
 * most 16 keep the network, whose constant-distance steps vectorize across rows. When the
 * comparator is compare(key(a), key(b)) with one key function of one operand for both sides
 * (JAX's: NaN and -0 canonicalized, then a total-order compare), each element's key is
 * computed once, as the element is loaded, and the heads' keys ride in the merge loop
 * (kiln_sort_launch_t.keyed): the compare -> select chain of a step no longer holds the key
 * computation of both heads.
 *
 * Radix (host): a row of at least KILN_SORT_RADIX_MIN_ROW_PER_BYTE elements per key byte
 * whose comparator is LT or GT on one key of 8, 16, 32 or 64 bits — the element of one
 * operand or a key function of it as above — compared in the key type's total order (a
 * float's TOTALORDER compare, as JAX sorts; an integer's signed or unsigned compare, as its
 * type says) is sorted by its key's bits instead (kiln_sort_launch_t.radix): the key mapped
 * to an unsigned integer in the same order (a float's sign bit flipped, or all its bits when
 * negative; a signed integer's sign bit flipped; GT: all bits flipped), one counting pass
 * over the row for every byte's histogram (block-shared counters, 256 per byte), their
 * inclusive sums, then one pass per byte, least significant first, walking the row backwards
 * and moving every operand's element to the last free slot of its byte. Each pass keeps the
 * order of equal bytes, so equal keys keep their order (stable, as the merge is) and the
 * result is the merge's bit for bit; 1 + bytes passes over the row instead of log2(n) merge
 * passes with a comparator call per element. A lexicographic comparator of such keys (JAX's
 * num_keys > 1: or(LT(k0), and(EQ(k0), rest))) takes every key's bytes, the least
 * significant key's first; the row bound counts all of them.
 *
 * UNIMPLEMENTED (named): sort operands that are not fusion parameters or constants, sort
 * outputs that are not each exactly one fusion output, complex types, non-default layouts.
 * A comparator that is not a strict weak order (e.g. LT on floats holding NaNs) gives a
 * permutation of the inputs through the network, but the merge sort's binary searches
 * assume the order: there a pass may repeat one element and drop another (every position
 * is still written once, and nothing outside the row is touched); the host's merge has no
 * search and always gives a permutation. */
#ifndef KILN_COMPILER_CODEGEN_SORT_EMITTER_H_
#define KILN_COMPILER_CODEGEN_SORT_EMITTER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

/* How a sort fusion is launched (kiln_sort_plan). */
typedef struct kiln_sort_launch {
  const kiln_hlo_instruction_t *sort;
  int64_t row_length;     /* n: elements along the sort dimension */
  int64_t rows;           /* R: product of the other dimensions */
  int64_t padded;         /* N: next power of two >= n */
  int64_t rows_per_block; /* G */
  int64_t threads;        /* T */
  int64_t blocks;         /* ceil(R / G) */
  int64_t steps;          /* compare-exchange steps (barriers after the copy); merge passes */
  int64_t shared_bytes;   /* staged rows (in_shared) and positions (stable) */
  bool stable;
  bool merge;             /* stable and too long for shared positions: merge sort */
  bool in_shared;         /* the block's rows are sorted in shared memory */
  bool keyed;             /* host merge: the comparator is compare(key(a), key(b)); each
                             element's key is computed once, as it is loaded */
  bool radix;             /* host: sorted by its key's bytes (steps: one pass per byte) */
} kiln_sort_launch_t;

/* Rows shorter than this many elements per key byte merge: each byte's pass costs 256
 * counters to clear and sum, ~0.45 us a row (measured: 8,192 rows of f32 merge in 15.8 ms at
 * 128 elements and 30.4 at 256, radix 21.9 and 21.8; of bf16 5.8 vs 4.9 ms at 64). */
#define KILN_SORT_RADIX_MIN_ROW_PER_BYTE 64

/* The launch for sort fusion `c` (see above) on the host (`host`, as
 * kiln_codegen_compile_options_t.host_target) or a GPU. INVALID_ARGUMENT when `c`'s root is
 * not a well-formed sort; UNIMPLEMENTED for the forms listed above. */
kiln_status kiln_sort_plan(const kiln_hlo_computation_t *c, bool host, kiln_sort_launch_t *out);

/* Emits the sort kernel for `c` and runs the kernel-IR pipeline; fills *out like
 * kiln_codegen_kernel_emit (one kernel; inputs: the fusion's parameters and array constants;
 * outputs: the fusion's output leaves, depth-first). */
kiln_status kiln_sort_kernel_emit(const kiln_hlo_computation_t *c,
                                  const kiln_codegen_compile_options_t *opts,
                                  kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_SORT_EMITTER_H_ */
