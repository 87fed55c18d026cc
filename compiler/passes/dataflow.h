/* HLO dataflow: values, their positions and uses, aliasing and liveness.
 *
 * A *value* is the contents of one array leaf of one instruction's output where that
 * contents is produced: a parameter of the entry, a constant, an op, or a *phi* (the
 * merge points of control flow: a while's output, its body and condition parameters, a
 * conditional's output). Instructions that only pass data along — tuple,
 * get-tuple-element, bitcast, opt-barrier, add-dependency, domain, call (its output is the
 * callee's root, the callee's parameters are the call's operands) and the parameters of
 * conditional branches — define no values: their leaves *hold* (forward) values defined
 * elsewhere. Every array leaf of every instruction in a sequential computation (the entry
 * and what it reaches through call / while / conditional) holds exactly one value; tokens
 * and other non-array leaves hold none. Computations executed inside an op (fusion
 * bodies, reducers, comparators) are not analysed.
 *
 * Leaves are numbered depth-first over the non-tuple subshapes of an instruction's shape
 * (0 for an array-shaped instruction).
 *
 * The analysis needs a flat call graph: each sequential computation is called from one
 * place only (copy insertion clones computations to make it so); otherwise it fails with
 * FAILED_PRECONDITION.
 *
 * Liveness: the sequential computations are laid out in one flattened sequence, each
 * computation in its instruction-list order (the schedule), a while as
 * [while-start, condition, body, while-end], a conditional as [start, branch 0, branch 1,
 * ..., end], a call as [start, callee, end]. A value lives from its definition to its last
 * use (its whole computation's end when it is in the computation's root; the sequence's
 * end for the entry's outputs; from position 0 for entry parameters).
 *
 * Aliasing: values that must share memory form a *buffer* (union-find): a while's init,
 * body parameter, condition parameter, body root and output leaf; a conditional's output
 * and each branch's root leaf; an in-place op's output and its in-place operand
 * (dynamic-update-slice, scatter, fusions whose root updates a parameter in place,
 * custom-calls with output_to_operand_aliasing); an entry parameter and the output leaf
 * input_output_alias maps to it. */
#ifndef KILN_PASSES_DATAFLOW_H_
#define KILN_PASSES_DATAFLOW_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"

typedef enum kiln_value_kind {
  KILN_VALUE_OP = 0,
  KILN_VALUE_PARAMETER, /* entry parameter leaf */
  KILN_VALUE_CONSTANT,
  KILN_VALUE_PHI,       /* while output / body or condition parameter, conditional output */
} kiln_value_kind_t;

typedef struct kiln_hlo_use {
  kiln_hlo_instruction_t *instr;
  int operand;
} kiln_hlo_use_t;

typedef struct kiln_hlo_value {
  int id;
  kiln_value_kind_t kind;
  kiln_hlo_instruction_t *def;
  int leaf;                 /* leaf of def's output */
  const kiln_shape_t *shape;
  int64_t size;             /* bytes (kiln_shape_byte_size) */
  int num_uses;
  kiln_hlo_use_t *uses;     /* non-forwarding operand uses, anywhere in the module */
  bool live_out;            /* held by the root of the entry (a program output) */
  int num_root_comps;       /* computations whose root holds it */
  kiln_hlo_computation_t **root_comps;
  int64_t start, end;       /* live range in flattened positions (after liveness) */
} kiln_hlo_value_t;

/* Per sequential instruction. */
typedef struct kiln_dataflow_instr {
  int num_leaves;
  kiln_hlo_value_t **leaves; /* value held by each leaf (NULL for non-array leaves) */
  int64_t use_pos, def_pos;  /* flattened positions (equal except for control flow) */
} kiln_dataflow_instr_t;

/* Per sequential computation. */
typedef struct kiln_dataflow_comp {
  kiln_hlo_computation_t *comp;
  kiln_hlo_instruction_t *caller; /* NULL for the entry */
  int64_t start, end;             /* flattened positions */
} kiln_dataflow_comp_t;

typedef struct kiln_dataflow {
  const kiln_hlo_module_t *module;
  kiln_arena_t arena;
  KILN_VEC(kiln_hlo_value_t *) values;             /* by id */
  KILN_VEC(kiln_dataflow_comp_t *) comps;          /* sequential computations, entry first */
  kiln_ptrmap_t instrs;                            /* instruction -> kiln_dataflow_instr_t */
  kiln_ptrmap_t comp_map;                          /* computation -> kiln_dataflow_comp_t */
  KILN_VEC(kiln_hlo_instruction_t *) sequence;     /* flattened, by def position order */
  int64_t num_positions;
  int *buffer_parent;                              /* union-find over value ids */
  bool has_liveness;
} kiln_dataflow_t;

/* Computes values, positions and uses of `m` (which must have an entry). */
kiln_status kiln_dataflow_run(const kiln_hlo_module_t *m, kiln_dataflow_t **out);
void kiln_dataflow_free(kiln_dataflow_t *df);

/* Lays out the flattened sequence and computes every value's live range. Each sequential
 * computation's instruction list must be a topological order (operands and control
 * predecessors first); FAILED_PRECONDITION naming the instruction otherwise. */
kiln_status kiln_dataflow_liveness(kiln_dataflow_t *df);

/* Unions the values that must share a buffer (see the header comment). */
void kiln_dataflow_alias(kiln_dataflow_t *df);
/* The representative value id of value `id`'s buffer. */
int kiln_dataflow_buffer_of(kiln_dataflow_t *df, int id);

/* Lookups (NULL when `instr` is not in a sequential computation). */
kiln_dataflow_instr_t *kiln_dataflow_instr(const kiln_dataflow_t *df,
                                           const kiln_hlo_instruction_t *instr);
kiln_dataflow_comp_t *kiln_dataflow_comp(const kiln_dataflow_t *df,
                                         const kiln_hlo_computation_t *c);
/* The value held by leaf `leaf` of `instr`, or NULL. */
kiln_hlo_value_t *kiln_dataflow_value_at(const kiln_dataflow_t *df,
                                         const kiln_hlo_instruction_t *instr, int leaf);

/* ---- shape leaves ---- */

/* Number of leaves (non-tuple subshapes) of `s`. */
int kiln_shape_num_leaves(const kiln_shape_t *s);
/* The subshape of leaf `leaf`, and its shape index written as `{1,0}` into `b` when
 * `b` is not NULL. */
const kiln_shape_t *kiln_shape_leaf(const kiln_shape_t *s, int leaf, kiln_strbuf_t *b);
/* First leaf of tuple element `index` of `s`. */
int kiln_shape_leaf_offset(const kiln_shape_t *s, int64_t index);

/* ---- sharing rules (used by copy insertion, buffer assignment and its checker) ---- */

/* An in-place pair: output leaf `out_leaf` of the instruction must live in the buffer of
 * its operand `operand` (an array operand). */
typedef struct kiln_inplace_pair {
  int operand;
  int out_leaf;
} kiln_inplace_pair_t;

/* Fills up to `max` in-place pairs of `instr` (dynamic-update-slice: operand 0 -> output;
 * scatter: operand i -> output leaf i; fusion whose root (leaf) is such an op on a fusion
 * parameter; custom-call / fusion `output_to_operand_aliasing`). Returns the count. */
int kiln_dataflow_inplace_pairs(const kiln_hlo_instruction_t *instr, kiln_inplace_pair_t *out,
                                int max);

/* True when output leaf `out_leaf` of `instr` may be written into the memory of operand
 * `operand` while the instruction reads that operand: an in-place pair, an elementwise op
 * of the same array shape (dims, layout, element size), or a kLoop fusion whose parameter
 * reaches the outputs only through elementwise ops of that shape. */
bool kiln_dataflow_can_share(const kiln_hlo_instruction_t *instr, int operand, int out_leaf);

/* True when value `b` may be written over value `a` (after liveness): `a`'s last use is
 * the instruction defining `b` (not control flow), and every operand position of that
 * instruction holding `a` may share its memory with `b`'s leaf (kiln_dataflow_can_share). */
bool kiln_dataflow_may_reuse(const kiln_dataflow_t *df, const kiln_hlo_value_t *a,
                             const kiln_hlo_value_t *b);

/* True when `from` is `to` or a transitive operand / control predecessor of `to` within
 * one computation: `from` executes before `to` in every valid order. */
bool kiln_dataflow_reaches(const kiln_hlo_instruction_t *from, const kiln_hlo_instruction_t *to);

/* The instruction of computation `c` through which `instr` executes (itself when it is
 * in `c`; else the call / while / conditional of `c` whose callee holds it), or NULL. */
kiln_hlo_instruction_t *kiln_dataflow_ancestor_in(const kiln_dataflow_t *df,
                                                  const kiln_hlo_instruction_t *instr,
                                                  const kiln_hlo_computation_t *c);

/* True for opcodes whose called computations run as part of the sequential program. */
bool kiln_dataflow_is_control_flow(const kiln_hlo_instruction_t *instr);

/* Writes `name{1,0}` (the shape index only for tuple-shaped instructions). */
void kiln_dataflow_print_value(kiln_strbuf_t *b, const kiln_hlo_value_t *v);

#endif /* KILN_PASSES_DATAFLOW_H_ */
