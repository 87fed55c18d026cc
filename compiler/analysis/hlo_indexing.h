/* Per-instruction indexing: which operand elements an HLO instruction's output element
 * reads (output -> input), and which output elements an operand element feeds
 * (input -> output).
 *
 * An output->input map for operand k has one dimension per output dimension (bounded by
 * the output shape) and one result per operand dimension. Range symbols stand for the
 * elements an output element reads in a loop (reduced dimensions, windows, contraction);
 * runtime variables stand for values read from other operands at run time (dynamic
 * offsets, gather indices). Each runtime variable comes with its source: the operand
 * whose element value it takes and an output -> that operand's index map; the value is
 * clamped into the variable's interval, as XLA clamps dynamic offsets. Points outside a
 * map's domain read nothing from that operand (pad and concatenate constraints, window
 * elements that fall on padding).
 *
 * Unsupported opcodes give an explicit "unknown" marker (map == NULL) rather than an error;
 * malformed instructions (attributes that contradict the shapes) give INVALID_ARGUMENT.
 *
 * Ownership: everything in a kiln_hlo_indexing_t is owned by it and freed with
 * kiln_hlo_indexing_free; maps live in the affine context passed in, which must outlive
 * them. */
#ifndef KILN_COMPILER_ANALYSIS_HLO_INDEXING_H_
#define KILN_COMPILER_ANALYSIS_HLO_INDEXING_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/analysis/indexing_map.h"
#include "compiler/hlo/ir.h"

/* Where runtime variable rt_i of an operand map gets its value. */
typedef struct kiln_hlo_rt_source {
  int operand;              /* operand number of the instruction */
  kiln_indexing_map_t *map; /* output index -> element of that operand (owned) */
} kiln_hlo_rt_source_t;

typedef struct kiln_hlo_operand_indexing {
  kiln_indexing_map_t *map; /* NULL: unknown */
  int num_rts;
  kiln_hlo_rt_source_t *rts; /* one per runtime variable of map (kiln_malloc'ed) */
} kiln_hlo_operand_indexing_t;

typedef struct kiln_hlo_indexing {
  int num_operands;
  kiln_hlo_operand_indexing_t *operands; /* one per operand (kiln_malloc'ed) */
} kiln_hlo_indexing_t;

/* Output -> input indexing of `instr` for output `output_index` (the tuple element for
 * multi-output instructions such as variadic reduce; 0 otherwise). Sets *out (zeroed on
 * entry) to one entry per operand. Instructions without operands (iota, constant,
 * parameter) give zero entries. */
kiln_status kiln_hlo_indexing_output_to_input(kiln_affine_ctx_t *ctx,
                                              const kiln_hlo_instruction_t *instr,
                                              int output_index, kiln_hlo_indexing_t *out);
void kiln_hlo_indexing_free(kiln_hlo_indexing_t *ix);

/* Input -> output indexing: operand `operand`'s element index -> the indices of output
 * `output_index` it contributes to (symbols for the outputs it is broadcast over). Sets
 * *out to a new map owned by the caller, or to NULL when unknown (no map for this opcode,
 * or a dynamic op whose output position depends on run-time values). */
kiln_status kiln_hlo_indexing_input_to_output(kiln_affine_ctx_t *ctx,
                                              const kiln_hlo_instruction_t *instr, int operand,
                                              int output_index, kiln_indexing_map_t **out);

/* The array shape of output `output_index` of `instr` (its shape, or a tuple element of
 * it), or NULL if there is none. */
const kiln_shape_t *kiln_hlo_indexing_output_shape(const kiln_hlo_instruction_t *instr,
                                                   int output_index);

/* Physical linearization under a shape's layout: idx (logical) -> position in memory
 * order (default row-major when the shape has no layout). Fails (false) for tiled layouts
 * or malformed ones. */
bool kiln_hlo_indexing_linearize_physical(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                          kiln_affine_expr_t *const *idx,
                                          kiln_affine_expr_t **out);
/* The inverse: physical position -> logical index (rank expressions into out). */
bool kiln_hlo_indexing_delinearize_physical(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                            kiln_affine_expr_t *linear, kiln_affine_expr_t **out);

#endif /* KILN_COMPILER_ANALYSIS_HLO_INDEXING_H_ */
