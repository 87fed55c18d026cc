/* The whole optimization pipeline — the "HLO journey" of XLA:GPU — as one call:
 *
 *   1. call inlining, then fusion inlining (fusions inside comparators, reducers and fused
 *      computations, as XLA's optimized dumps hold them, become plain instructions)
 *   2. simplification, to a fixed point: simplify, constant_folding, tuple_simplify,
 *      while_loop_constants, while_loop_invariant_code_motion, while_loop_dead_state,
 *      while_loop_unroll, dce, cse
 *   2b. collective optimizations: collectives over one participant removed, all-reduce +
 *      dynamic-slice -> reduce-scatter
 *   3. expansion: ops without emitters become plain HLO the fusion and loop/reduction
 *      emitters compile (rng-bit-generator, batch norm, cholesky, triangular-solve,
 *      scaled-dot, ragged-dot, fft, select-and-scatter, stochastic-convert; dynamic
 *      shapes taken at their bounds), then topk decomposition
 *   4. layout assignment, then layout normalization
 *   5. layout-sensitive simplification (reshapes/transposes that are bitcasts), dce
 *   6. priority fusion, then multi-output fusion
 *   7. cse and dce again (duplicated producers that met in one fusion), then the collective
 *      combiners (all-gather, all-reduce, reduce-scatter; XLA:GPU's post-fusion order) and
 *      all-reduce / all-gather / collective-permute made -start / -done pairs
 *   8. fusion wrapper (every remaining instruction that needs a kernel becomes a fusion)
 *   9. copy insertion
 *  10. scheduling, then each collective's -start moved early and -done late (overlap)
 *  11. buffer assignment
 *
 * Passes are looked up by name in the registry (passes.def), so stages written later join
 * the pipeline as soon as they are registered. A stage whose passes are not registered is
 * skipped, and the missing names are logged once per process (a warning on stderr) and can
 * be queried with kiln_pipeline_missing_passes, so callers and tests can say what did not
 * run. A name matches with '_' or '-' as separator.
 *
 * opts->disabled_passes "a,b" (the edges' KILN_DISABLE_PASSES) makes the pipeline skip those
 * passes (logged once), like XLA's --xla_disable_hlo_passes, to bisect a problem to one pass. */
#ifndef KILN_PASSES_PIPELINE_H_
#define KILN_PASSES_PIPELINE_H_

#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"

/* The parser bounds a module's arena by the size of its text (a guard against hostile
 * input); passes grow modules legitimately (inlining, fusion, constant folding), and the IR
 * helpers they call do not survive a refused allocation. This removes that bound; the
 * pipeline entry points call it, and so should any caller that runs passes on a parsed
 * module (kiln-opt does). */
void kiln_pipeline_lift_parse_limit(kiln_hlo_module_t *m);

/* Runs the pipeline on `m` in place (dumps and verification per `opts`, as the pass
 * manager does). */
kiln_status kiln_pipeline_run(kiln_hlo_module_t *m, const kiln_pass_options_t *opts);

/* Runs only the simplification stages (1 and 2). */
kiln_status kiln_pipeline_run_simplification(kiln_hlo_module_t *m, const kiln_pass_options_t *opts);

/* The pipeline's passes that are not registered: fills up to `max` names (static strings)
 * and returns how many are missing in total. */
int kiln_pipeline_missing_passes(const char **names, int max);

/* Appends a readable listing of the stages, each pass marked when it is not registered. */
void kiln_pipeline_describe(kiln_strbuf_t *b);

/* Finds a pass by name, accepting '-' and '_' interchangeably; NULL when unknown. */
const kiln_pass_t *kiln_pipeline_find_pass(const char *name);

#endif /* KILN_PASSES_PIPELINE_H_ */
