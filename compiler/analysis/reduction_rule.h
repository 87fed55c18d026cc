/* XLA's rule for when the reduction emitter beats the elemental loop
 * (IsUnnestedReductionFasterThanElemental), stated once for the fusion passes (which decide
 * what to fuse around a reduction) and the codegen's hero analysis (which picks the emitter).
 *
 * A reduce's input in physical order collapses to three dims: a row reduction
 * [major_red, kept, minor_red], a column reduction [major_kept, red, minor_kept]. */
#ifndef KILN_COMPILER_ANALYSIS_REDUCTION_RULE_H_
#define KILN_COMPILER_ANALYSIS_REDUCTION_RULE_H_

#include <stdbool.h>
#include <stdint.h>

/* Row: the minor reduced size is at least a warp (32) or divides it. Column: not one of the
 * small shapes where a loop wins (reduced < 32; < 64 with < 32 kept; < 128 with < 8 kept;
 * < 256 with < 3 kept). */
bool kiln_reduction_faster_than_elemental(bool is_row, const int64_t dims[3]);

#endif /* KILN_COMPILER_ANALYSIS_REDUCTION_RULE_H_ */
