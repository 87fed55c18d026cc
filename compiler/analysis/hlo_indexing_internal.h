/* Helpers shared by hlo_indexing.c and hlo_indexing_inverse.c; not public API. */
#ifndef KILN_COMPILER_ANALYSIS_HLO_INDEXING_INTERNAL_H_
#define KILN_COMPILER_ANALYSIS_HLO_INDEXING_INTERNAL_H_

#include "compiler/analysis/indexing_map.h"
#include "compiler/hlo/shape.h"

/* Largest rank the per-opcode maps handle (larger ones are INVALID_ARGUMENT). */
#define KILN_HLO_INDEXING_MAX_RANK 32

/* A map with one dimension per dimension of `s` (bounded by it) and the given numbers of
 * unbounded range symbols and runtime variables; no results. Owned by the caller. */
kiln_indexing_map_t *kiln_hlo_ix_map_over(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                          size_t nsyms, size_t nrts);

/* kiln_indexing_map_simplify for maps that may have no results (scalar reads): the
 * simplifier memcpy's from the result array, which is NULL then (UBSan reports it), so a
 * constant result is held in place while it runs. Returns what the simplifier returns. */
static inline bool kiln_hlo_ix_simplify(kiln_indexing_map_t *m) {
  if (m->results.len > 0) return kiln_indexing_map_simplify(m);
  kiln_indexing_map_add_result(m, kiln_affine_const(m->ctx, 0));
  bool changed = kiln_indexing_map_simplify(m);
  m->results.len = 0;
  return changed;
}

#endif /* KILN_COMPILER_ANALYSIS_HLO_INDEXING_INTERNAL_H_ */
