/* Layout assignment and layout normalization (the passes `layout_assignment` and
 * `layout_normalization` in passes.def), with the statistics tests and tools read.
 *
 * Layout assignment gives every array (and tuple leaf) a layout. Entry parameters and the
 * entry result keep entry_computation_layout (else the layout written on the instruction,
 * else the default). Layouts propagate from operands to users (elementwise ops and the
 * other layout-preserving ops take their operands' layout, transpose and reduce the layout
 * that makes them move no bytes, a reshape one that makes it a bitcast when one exists),
 * and back from users to broadcasts, iotas and constants. dot, convolution, custom-call,
 * gather, scatter and every op without a rule get default layouts on their operands and
 * result. Called computations get their parameters from the caller's operands; while
 * body/condition parameters, body root and the loop share one layout; conditional branch
 * roots agree. A bitcast keeps the operand and result layouts it had (its meaning depends
 * on them). Conflicts are resolved with `copy` instructions.
 *
 * Layout normalization rewrites the module so every array has the default descending
 * layout: `f32[10,20,30]{2,0,1}` becomes `f32[20,10,30]{2,1,0}` (logical dimensions in
 * physical order). Entry parameters and the entry result keep their shapes through
 * bitcasts; layout-changing copies become transposes; reshapes that are not bitcasts
 * become transpose, bitcast, transpose; broadcast, reduce, transpose, concatenate, slice,
 * pad, reverse, dynamic-(update-)slice, iota, sort, reduce-window, dot and control flow have
 * their dimension numbers remapped. An instruction it cannot normalize keeps its operands'
 * and result's layouts (bitcasts in and out of it), is logged (KILN_LOG=info) and counted. */
#ifndef KILN_PASSES_LAYOUT_H_
#define KILN_PASSES_LAYOUT_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_layout_assignment_stats {
  int copies_inserted;
} kiln_layout_assignment_stats_t;

/* Runs layout assignment on `m`; `stats` may be NULL. */
kiln_status kiln_layout_assign(kiln_hlo_module_t *m, kiln_layout_assignment_stats_t *stats,
                               bool *changed);

typedef struct kiln_layout_normalization_stats {
  int rewritten;    /* instructions whose layout was non-default and now is default */
  int unsupported;  /* instructions left with a non-default layout (logged) */
} kiln_layout_normalization_stats_t;

/* Runs layout normalization on `m`; `stats` may be NULL. */
kiln_status kiln_layout_normalize(kiln_hlo_module_t *m, kiln_layout_normalization_stats_t *stats,
                                  bool *changed);

#endif /* KILN_PASSES_LAYOUT_H_ */
