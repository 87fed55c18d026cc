/* Fusion-level indexing: for each root of a fusion computation, the composed and
 * simplified output -> input maps to every instruction the root reads (parameters and
 * intermediates), grouped by instruction and de-duplicated.
 *
 * A tuple root contributes one root per (nested) tuple operand; a non-tuple root with a
 * tuple shape (variadic reduce) one root per output. Maps start as the identity over the
 * root's shape and are composed with each instruction's per-opcode output -> input map
 * (hlo_indexing.h) from users to operands. An instruction reached through an opcode
 * without indexing is marked unknown (and so is everything it reads). A nested fusion
 * instruction is composed through its callee's maps to its parameters. Runtime variables
 * keep their intervals (clamped dynamic offsets) but their sources are not tracked across
 * composition. Maps whose domain is provably empty (a path that reads nothing, e.g. a
 * concatenate operand outside a slice) are dropped.
 *
 * Ownership: kiln_indexing_fusion_compute fills a struct the caller frees with
 * kiln_indexing_fusion_free; maps live in the given affine context, which must outlive
 * it. Instruction pointers are borrowed from the computation. */
#ifndef KILN_COMPILER_ANALYSIS_FUSION_INDEXING_H_
#define KILN_COMPILER_ANALYSIS_FUSION_INDEXING_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"
#include "compiler/analysis/indexing_map.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_indexing_fusion_group {
  const kiln_hlo_instruction_t *instr;
  bool unknown;               /* reached through an instruction without indexing */
  int num_maps;
  kiln_indexing_map_t **maps; /* distinct; root index -> element of instr's output */
  int *output_index;          /* per map: which output of instr (tuple element), else 0 */
} kiln_indexing_fusion_group_t;

typedef struct kiln_indexing_fusion_root {
  const kiln_hlo_instruction_t *root; /* the instruction that produces this root */
  int output_index;                   /* which of its outputs */
  int num_groups;
  kiln_indexing_fusion_group_t *groups; /* users before operands; the root first */
} kiln_indexing_fusion_root_t;

typedef struct kiln_indexing_fusion {
  int num_roots;
  kiln_indexing_fusion_root_t *roots;
  int64_t num_maps;    /* over all roots and groups */
  int64_t num_unknown; /* groups marked unknown */
} kiln_indexing_fusion_t;

typedef struct kiln_indexing_fusion_options {
  /* Distinct maps kept per instruction and root before it is marked unknown instead
   * (guards against path explosion); 0 = 64. */
  int max_maps_per_instruction;
} kiln_indexing_fusion_options_t;

/* Computes the grouped indexing of computation `c` (its root). `opts` may be NULL.
 * Errors: INVALID_ARGUMENT for malformed instructions (the message names them). */
kiln_status kiln_indexing_fusion_compute(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                         const kiln_indexing_fusion_options_t *opts,
                                         kiln_indexing_fusion_t *out);
void kiln_indexing_fusion_free(kiln_indexing_fusion_t *fi);

/* The group of the instruction named `name` under root `r`, or NULL if the root does not
 * read it. */
const kiln_indexing_fusion_group_t *kiln_indexing_fusion_find(const kiln_indexing_fusion_root_t *r,
                                                              const char *name);

/* Appends a readable listing: per root, per instruction, its maps (one per line). */
void kiln_indexing_fusion_print(kiln_strbuf_t *b, const kiln_indexing_fusion_t *fi);

#endif /* KILN_COMPILER_ANALYSIS_FUSION_INDEXING_H_ */
