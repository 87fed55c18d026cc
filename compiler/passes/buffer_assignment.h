/* Buffer assignment: where every value of a scheduled module lives in device memory.
 *
 * Pipeline: dataflow values (dataflow.h) -> aliasing buffers (sets of values that must share
 * memory) -> liveness over the schedule (each computation's instruction-list order) ->
 * allocations:
 *   - one PARAMETER allocation per entry parameter leaf (the runtime binds the caller's
 *     buffer directly; read-only unless input_output_alias donates it to an output, in
 *     which case the aliased output lives in it),
 *   - one CONSTANT allocation per constant (read-only),
 *   - one OUTPUT allocation per buffer holding a leaf of the entry's result (distinct
 *     leaves get distinct allocations; the runtime hands each back as a buffer),
 *   - one TEMP allocation for everything else: each buffer is a slice at an offset, packed
 *     by a heap simulator (the smaller of a greedy best-fit in time order and a global
 *     decreasing-size best-fit), reusing the space of dead buffers; an elementwise or
 *     kLoop-fusion output takes over its operand's slice when the operand dies there and
 *     the physical shapes match (in-place reuse).
 * Values that must share a buffer but are live at the same time (a missing copy) give
 * FAILED_PRECONDITION: run copy_insertion first.
 *
 * The runtime consumes it as: one device allocation per allocation; a value's address is
 * allocation base + slice offset; kiln_buffer_assignment_slice_at looks up any
 * instruction's leaf (forwarding instructions — tuple, get-tuple-element, bitcast, ... —
 * resolve to the slice of the value they hold). */
#ifndef KILN_PASSES_BUFFER_ASSIGNMENT_H_
#define KILN_PASSES_BUFFER_ASSIGNMENT_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/dataflow.h"

typedef enum kiln_allocation_kind {
  KILN_ALLOCATION_PARAMETER = 0,
  KILN_ALLOCATION_CONSTANT,
  KILN_ALLOCATION_OUTPUT,
  KILN_ALLOCATION_TEMP,
} kiln_allocation_kind_t;

const char *kiln_allocation_kind_name(kiln_allocation_kind_t k);

typedef struct kiln_buffer_allocation {
  int index;
  kiln_allocation_kind_t kind;
  int64_t size;                 /* bytes */
  int64_t parameter_number;     /* PARAMETER: entry parameter number; else -1 */
  int parameter_leaf;           /* PARAMETER: leaf of that parameter (0 for an array) */
  int output_leaf;              /* leaf of the entry result it holds (OUTPUT, or an aliased
                                 * PARAMETER); -1 when none */
  bool read_only;               /* constants; parameters not donated to an output */
  const kiln_hlo_instruction_t *constant; /* CONSTANT: the constant instruction */
} kiln_buffer_allocation_t;

/* A set of values sharing memory, placed at one offset of one allocation. */
typedef struct kiln_logical_buffer {
  int index;
  int num_values;
  kiln_hlo_value_t **values;    /* sorted by live-range start */
  int64_t size;                 /* largest value */
  int64_t start, end;           /* live range: hull of its values' ranges */
  int allocation;
  int64_t offset;
  int reuses;                   /* buffer whose slice it takes over in place, or -1 */
} kiln_logical_buffer_t;

typedef struct kiln_buffer_slice {
  int allocation;               /* -1: no slice (never for an array value) */
  int64_t offset, size;         /* size: the value's own byte size */
  int buffer;
} kiln_buffer_slice_t;

typedef struct kiln_buffer_assignment_stats {
  int64_t parameter_bytes, constant_bytes, output_bytes;
  int64_t temp_bytes;           /* size of the temp allocation (the heap's peak) */
  int64_t temp_sum;             /* sum of the temp buffers' (aligned) sizes: no reuse */
  int64_t temp_lower_bound;     /* max over time of the live temp bytes */
  int64_t total_bytes;          /* sum of all allocations */
  int64_t heap_best_fit_time, heap_best_fit_size; /* the two heap simulators' results */
  const char *heap_algorithm;   /* the one kept */
  int num_inplace_reuses;
  int num_values, num_buffers, num_temp_buffers;
} kiln_buffer_assignment_stats_t;

typedef struct kiln_buffer_assignment {
  const kiln_hlo_module_t *module;
  kiln_dataflow_t *df;          /* owned: values, positions */
  int num_allocations;
  kiln_buffer_allocation_t *allocations;
  int num_buffers;
  kiln_logical_buffer_t *buffers;
  int num_slices;
  kiln_buffer_slice_t *slices;  /* by value id */
  int64_t alignment;
  kiln_buffer_assignment_stats_t stats;
} kiln_buffer_assignment_t;

typedef struct kiln_buffer_assignment_options {
  int64_t alignment;            /* slice offsets and sizes in the temp heap; 0 = 64 */
  bool no_inplace_reuse;        /* do not let outputs take over dying operands' slices */
} kiln_buffer_assignment_options_t;

/* Assigns buffers of `m`, whose sequential computations must be in a valid order (the
 * instruction lists are taken as the schedule). The module must outlive the result and
 * stay unchanged. `opts` may be NULL. */
kiln_status kiln_buffer_assignment_run(const kiln_hlo_module_t *m,
                                       const kiln_buffer_assignment_options_t *opts,
                                       kiln_buffer_assignment_t **out);
void kiln_buffer_assignment_free(kiln_buffer_assignment_t *ba);

/* The slice holding leaf `leaf` of `instr`'s output; false when it holds no array value. */
bool kiln_buffer_assignment_slice_at(const kiln_buffer_assignment_t *ba,
                                     const kiln_hlo_instruction_t *instr, int leaf,
                                     kiln_buffer_slice_t *out);

/* Readable text: each allocation, its buffers with offsets, sizes, live ranges and
 * values, then the statistics. */
void kiln_buffer_assignment_print(kiln_strbuf_t *b, const kiln_buffer_assignment_t *ba);
/* The statistics alone, one line. */
void kiln_buffer_assignment_print_stats(kiln_strbuf_t *b, const kiln_buffer_assignment_t *ba);

/* The checker (buffer_checker.c), independent of the heap simulator: recomputes dataflow,
 * aliasing and liveness of ba->module and proves that every array value has a slice that
 * fits its allocation, that aliased values share their slice, that parameters, constants
 * and outputs are in allocations of their kind, and that no two values live at the same
 * time overlap in memory (values of one buffer, or buffers meeting at one instruction,
 * only where that instruction may write its output over the dying operand). */
kiln_status kiln_buffer_assignment_check(const kiln_buffer_assignment_t *ba);

#endif /* KILN_PASSES_BUFFER_ASSIGNMENT_H_ */
