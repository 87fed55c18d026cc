/* Computation partitioner: splits a fusion computation into subgraphs, each of which the
 * elemental emitter turns into one kernel-IR function (the emitter document's
 * "Partitioning"; DESIGN.md principle 2).
 *
 * Rule: instructions are visited users-first. An instruction joins the function of its
 * users only if it is not a subgraph root and all of its uses (every user, every operand
 * position) are in one function and reach it through the same indexing from that
 * function's root (compared as simplified indexing maps; a single use always joins).
 * Otherwise it heads a function of its own. Subgraph roots are: the fusion's outputs (the
 * root, or the leaves of a root tuple; outputs with equal dimensions share one function as
 * several roots, unless that makes functions call each other in a cycle: then each output
 * heads its own), and whatever the caller's `is_root` callback selects (a hero).
 * Parameters and non-scalar constants are not emitted in functions: they are tensors the
 * functions read (tensor.extract), so they belong to no subgraph.
 *
 * A subgraph function has the signature `(tensors..., indices...) -> scalars`: one tensor
 * per fusion parameter (and per non-scalar constant), one index per dimension of its roots'
 * shape, one scalar per output of each root (a variadic reduce gives several).
 *
 * For the emitter document's examples: param -> log -> {transpose, add} with `add` as the
 * root gives {add, transpose} and {log} (log is read at two indexings); the slices of the
 * diamond chain join their adds, and each add that two slices read heads its own function.
 *
 * Ownership: kiln_partition_compute fills a struct the caller frees with
 * kiln_partition_free; instruction pointers are borrowed from the computation. */
#ifndef KILN_COMPILER_CODEGEN_PARTITIONER_H_
#define KILN_COMPILER_CODEGEN_PARTITIONER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/analysis/indexing_map.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_partition_subgraph {
  int id;
  const char *name; /* "<computation>_<first root>" */
  int num_roots;
  const kiln_hlo_instruction_t **roots;
  int num_instrs;
  const kiln_hlo_instruction_t **instrs; /* post order (operands first), roots included */
  int rank;                              /* index arguments of the function */
  const int64_t *dims;                   /* their bounds (the roots' output dims) */
  bool is_output;                        /* roots are outputs of the fusion */
} kiln_partition_subgraph_t;

/* One output of the fusion: instruction and which of its outputs (variadic reduce). */
typedef struct kiln_partition_output {
  const kiln_hlo_instruction_t *instr;
  int output_index;
} kiln_partition_output_t;

typedef struct kiln_partition {
  const kiln_hlo_computation_t *comp;
  int num_subgraphs;
  kiln_partition_subgraph_t *subgraphs; /* in creation order: output functions first */
  int num_outputs;
  kiln_partition_output_t *outputs; /* flattened root tuple, in order */
  kiln_ptrmap_t of;                 /* instr -> subgraph id + 1 */
  kiln_arena_t arena;
} kiln_partition_t;

/* Optional hook: returns true for instructions that must head their own function. */
typedef bool (*kiln_partition_root_fn)(void *user, const kiln_hlo_instruction_t *instr);

/* Partitions computation `c` (maps are built in `ctx`). `is_root` may be NULL.
 * INVALID_ARGUMENT for malformed instructions; UNIMPLEMENTED for roots that are not arrays
 * or tuples of arrays. */
kiln_status kiln_partition_compute(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                   kiln_partition_root_fn is_root, void *user,
                                   kiln_partition_t *out);
void kiln_partition_free(kiln_partition_t *p);

/* The subgraph that emits `instr`, or NULL (parameters, non-scalar constants, tuples at the
 * root). */
const kiln_partition_subgraph_t *kiln_partition_subgraph_of(const kiln_partition_t *p,
                                                            const kiln_hlo_instruction_t *instr);
/* Whether the instruction is read as a tensor (parameter or non-scalar constant). */
bool kiln_partition_is_tensor_leaf(const kiln_hlo_instruction_t *instr);

/* Appends a listing, one function per line in creation order:
 *   `<name>: roots={a, b} instrs={x, y, a, b} dims=[6,512]` */
void kiln_partition_print(const kiln_partition_t *p, kiln_strbuf_t *out);

#endif /* KILN_COMPILER_CODEGEN_PARTITIONER_H_ */
