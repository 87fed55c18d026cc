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

#endif /* KILN_COMPILER_ANALYSIS_HLO_INDEXING_INTERNAL_H_ */
