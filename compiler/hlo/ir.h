/* HLO IR: module, computations, instructions.
 *
 * Ownership: a module owns everything reachable from it; all of it lives in the module's
 * arena and is freed by kiln_hlo_module_destroy. Pointers into a module are borrowed.
 *
 * Attributes: those with meaning to the compiler are decoded into the typed fields of
 * kiln_hlo_instruction_t (the `has_*` flags / non-zero counts say which were present);
 * every other attribute (metadata, sharding, frontend_attributes, statistics, unknown
 * ones, ...) is kept in `raw_attrs` as key + value text exactly as written (whitespace
 * outside strings normalized), and printed back after the decoded ones. */
#ifndef KILN_HLO_IR_H_
#define KILN_HLO_IR_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/status.h"
#include "base/vec.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"

typedef struct kiln_hlo_module kiln_hlo_module_t;
typedef struct kiln_hlo_computation kiln_hlo_computation_t;
typedef struct kiln_hlo_instruction kiln_hlo_instruction_t;

/* An int64 list attribute like dimensions={0,1}. */
typedef struct kiln_i64_list {
  int n;
  int64_t *v;
} kiln_i64_list_t;

typedef struct kiln_raw_attr {
  char *key;
  char *value; /* text after '=' */
} kiln_raw_attr_t;

/* slice={[start:limit:stride], ...} (stride printed only when != 1). */
typedef struct kiln_slice_dim {
  int64_t start, limit, stride;
} kiln_slice_dim_t;

/* padding=lo_hi_interior x ... (interior printed only when any is non-zero). */
typedef struct kiln_pad_dim {
  int64_t lo, hi, interior;
} kiln_pad_dim_t;

/* window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..} */
typedef struct kiln_window_dim {
  int64_t size, stride, pad_lo, pad_hi, lhs_dilate, rhs_dilate;
  bool reversal;
} kiln_window_dim_t;

/* dim_labels=b01f_01io->b01f. The spatial vectors list, for each spatial dimension in
 * order (digit 0, 1, ...), the position of that dimension in the operand. */
typedef struct kiln_conv_dnums {
  int64_t input_batch, input_feature;
  int num_spatial;
  int64_t *input_spatial;
  int64_t kernel_input_feature, kernel_output_feature;
  int64_t *kernel_spatial;
  int64_t output_batch, output_feature;
  int64_t *output_spatial;
} kiln_conv_dnums_t;

typedef struct kiln_dot_dnums {
  kiln_i64_list_t lhs_batch, lhs_contracting, rhs_batch, rhs_contracting;
} kiln_dot_dnums_t;

typedef struct kiln_gather_dnums {
  kiln_i64_list_t offset_dims, collapsed_slice_dims, start_index_map;
  kiln_i64_list_t operand_batching_dims, start_indices_batching_dims;
  int64_t index_vector_dim;
} kiln_gather_dnums_t;

typedef struct kiln_scatter_dnums {
  kiln_i64_list_t update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  kiln_i64_list_t input_batching_dims, scatter_indices_batching_dims;
  int64_t index_vector_dim;
} kiln_scatter_dnums_t;

typedef enum kiln_cmp_dir {
  KILN_CMP_NONE = 0, KILN_CMP_EQ, KILN_CMP_NE, KILN_CMP_LT, KILN_CMP_LE, KILN_CMP_GT, KILN_CMP_GE
} kiln_cmp_dir_t;

typedef enum kiln_cmp_type {
  KILN_CMP_TYPE_DEFAULT = 0, /* not written: derived from the element type */
  KILN_CMP_TYPE_FLOAT,
  KILN_CMP_TYPE_TOTALORDER,
  KILN_CMP_TYPE_SIGNED,
  KILN_CMP_TYPE_UNSIGNED,
} kiln_cmp_type_t;

typedef enum kiln_hlo_fusion_kind {
  KILN_HLO_FUSION_NONE = 0,
  KILN_HLO_FUSION_LOOP,
  KILN_HLO_FUSION_INPUT,
  KILN_HLO_FUSION_OUTPUT,
  KILN_HLO_FUSION_CUSTOM
} kiln_hlo_fusion_kind_t;
/* "kLoop", "kInput", "kOutput", "kCustom"; NULL for NONE (printer.c). */
const char *kiln_hlo_fusion_kind_name(kiln_hlo_fusion_kind_t k);

/* How backend_config was written: JSON object `{...}`, quoted string "...", or other. */
typedef enum kiln_backend_config_form {
  KILN_BACKEND_CONFIG_NONE = 0, KILN_BACKEND_CONFIG_JSON, KILN_BACKEND_CONFIG_STRING,
  KILN_BACKEND_CONFIG_RAW
} kiln_backend_config_form_t;

/* A group of called computations under one attribute key:
 * to_apply=c, calls=c, condition=c, body=c, select=c, scatter=c, true_computation=c,
 * false_computation=c, branch_computations={a, b}, called_computations={a, b}. */
typedef struct kiln_called_group {
  char *key;
  bool braced; /* printed as {a, b} */
  int n;
  kiln_hlo_computation_t **comps;
} kiln_called_group_t;

struct kiln_hlo_instruction {
  char *name;
  kiln_hlo_opcode_t opcode;
  /* Where it sits in parent->instructions, a hint kept by create / remove / compaction (a
   * pass that reorders the list directly leaves it stale; removal then searches). */
  int32_t slot;
  kiln_shape_t *shape;
  kiln_hlo_computation_t *parent;
  int64_t id; /* unique within the module, in creation order */

  int num_operands;
  kiln_hlo_instruction_t **operands;
  KILN_VEC(kiln_hlo_instruction_t *) users; /* distinct users, in first-use order */

  int num_called_groups;
  kiln_called_group_t *called_groups;

  int num_control_predecessors;
  kiln_hlo_instruction_t **control_predecessors;
  KILN_VEC(kiln_hlo_instruction_t *) control_successors;

  /* parameter(N) / get-tuple-element index=N */
  int64_t parameter_number;
  int64_t tuple_index;
  /* constant */
  kiln_literal_t *literal;

  /* dimensions={...}: broadcast, transpose, reduce, reverse, concatenate, sort, map,
   * all-gather, all-to-all, reduce-scatter, scan, ... */
  bool has_dimensions;
  kiln_i64_list_t dimensions;
  int64_t iota_dimension; /* iota */

  int num_slice_dims; /* slice */
  kiln_slice_dim_t *slice;
  kiln_i64_list_t dynamic_slice_sizes; /* dynamic_slice_sizes={...} */

  int num_pad_dims; /* pad: padding=... */
  kiln_pad_dim_t *padding;

  int num_window_dims; /* window={...}: convolution, reduce-window, select-and-scatter */
  kiln_window_dim_t *window;

  bool has_conv_dnums; /* dim_labels */
  kiln_conv_dnums_t conv_dnums;
  int64_t feature_group_count; /* 0 = not written (means 1) */
  int64_t batch_group_count;

  bool has_dot_dnums;
  kiln_dot_dnums_t dot_dnums;
  /* operand_precision={default,highest}; stored as written (e.g. "default") */
  int num_operand_precision;
  char **operand_precision;

  bool has_gather_dnums;
  kiln_gather_dnums_t gather_dnums;
  kiln_i64_list_t gather_slice_sizes; /* slice_sizes={...} */
  bool has_scatter_dnums;
  kiln_scatter_dnums_t scatter_dnums;
  bool indices_are_sorted;
  bool unique_indices;

  kiln_cmp_dir_t comparison_direction;
  kiln_cmp_type_t comparison_type;

  kiln_hlo_fusion_kind_t fusion_kind;
  char *fusion_kind_text; /* kind=kCustom etc. when not one of the enum values, else NULL */

  char *custom_call_target;   /* without quotes, escapes decoded */
  int64_t api_version;        /* custom-call api_version=API_VERSION_...; 0 = not written */
  char *api_version_text;     /* the enum name as written */
  kiln_backend_config_form_t backend_config_form;
  char *backend_config;       /* JSON/raw text verbatim; STRING form: decoded contents */

  bool is_stable;                     /* sort */
  int64_t exponent_bits, mantissa_bits; /* reduce-precision */
  char *fft_type;                     /* FFT, IFFT, RFFT, IRFFT */
  kiln_i64_list_t fft_length;
  char *rng_distribution;             /* rng: rng_uniform / rng_normal */
  char *rng_algorithm;                /* rng-bit-generator: rng_default/rng_three_fry/rng_philox */

  /* triangular-solve / cholesky */
  bool left_side, lower, unit_diagonal, has_lower;
  char *transpose_a; /* NO_TRANSPOSE, TRANSPOSE, ADJOINT */

  /* collectives */
  int64_t channel_id; /* 0 = not written */
  char *replica_groups; /* verbatim value text ({{0,1},{2,3}}, [2,2]<=[4], {}) */
  bool use_global_device_ids;
  bool constrain_layout;

  /* topk */
  int64_t k;
  bool largest;

  kiln_raw_attr_t *raw_attrs;
  int num_raw_attrs;
};

struct kiln_hlo_computation {
  char *name;
  kiln_hlo_module_t *module;
  bool is_entry;
  KILN_VEC(kiln_hlo_instruction_t *) instructions; /* in textual / post order */
  int num_parameters;
  kiln_hlo_instruction_t **parameters;             /* by parameter number */
  kiln_hlo_instruction_t *root;
  char *trailing_attrs; /* e.g. `execution_thread="x"` after the closing brace, verbatim */
  /* Deferred removal (kiln_hlo_computation_defer_removals): removed instructions leave NULL
   * holes in `instructions` until kiln_hlo_computation_compact. */
  bool defer_removals;
  size_t num_holes;
};

/* input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}) } */
typedef struct kiln_io_alias {
  kiln_i64_list_t output_index;
  int64_t param_number;
  kiln_i64_list_t param_index;
  char *kind; /* "may-alias", "must-alias" or NULL when not written */
} kiln_io_alias_t;

struct kiln_hlo_module {
  char *name;
  kiln_arena_t arena;
  KILN_VEC(kiln_hlo_computation_t *) computations; /* in textual order; entry among them */
  kiln_hlo_computation_t *entry;

  /* entry_computation_layout={(p0, p1)->result}; NULL when not written. */
  bool has_entry_layout;
  int num_entry_layout_params;
  kiln_shape_t **entry_layout_params;
  kiln_shape_t *entry_layout_result;

  int num_io_aliases;
  kiln_io_alias_t *io_aliases;

  kiln_raw_attr_t *raw_attrs; /* other module attributes (is_scheduled=true, ...) */
  int num_raw_attrs;
  int64_t next_id;
  kiln_hashmap_t *names; /* lazily built set of used names (kiln_hlo_module_unique_name) */
};

/* ---- construction (used by the parser and by passes) ---- */

kiln_hlo_module_t *kiln_hlo_module_create(const char *name);
void kiln_hlo_module_destroy(kiln_hlo_module_t *m);
/* For an out-of-memory unwind (base/alloc.h) of work that changed `m`, older than the scope,
 * in place: takes the module's heap blocks (its containers) out of the region, so that the
 * unwind leaves `m` whole enough to be destroyed. */
void kiln_hlo_module_oom_adopt(kiln_hlo_module_t *m);

kiln_hlo_computation_t *kiln_hlo_computation_create(kiln_hlo_module_t *m, const char *name);
/* Creates an instruction (no operands yet) appended to `c`. */
kiln_hlo_instruction_t *kiln_hlo_instruction_create(kiln_hlo_computation_t *c,
                                                    kiln_hlo_opcode_t op, kiln_shape_t *shape,
                                                    const char *name);
/* Sets operands (copied) and registers `instr` as a user of each. */
void kiln_hlo_instruction_set_operands(kiln_hlo_instruction_t *instr, int n,
                                       kiln_hlo_instruction_t *const *operands);
/* Replaces every use of `old` by `repl` (operands of users; root of the computation). */
void kiln_hlo_instruction_replace_all_uses(kiln_hlo_instruction_t *old,
                                           kiln_hlo_instruction_t *repl);
/* Adds a called-computation group to `instr`. */
void kiln_hlo_instruction_add_called(kiln_hlo_instruction_t *instr, const char *key,
                                     bool braced, int n, kiln_hlo_computation_t *const *comps);
/* Adds or replaces a raw attribute. */
void kiln_hlo_instruction_set_raw_attr(kiln_hlo_instruction_t *instr, const char *key,
                                       const char *value);

/* FAILED_PRECONDITION for constant `c` (NULL: unnamed) whose contents the text elided
 * (`constant({...})`, literal->unknown): names it, its shape and computation, and says how
 * to get a module that can run (print it with its large constants). */
kiln_status kiln_hlo_elided_constant_error(const kiln_hlo_instruction_t *c);

/* ---- mutation and traversal (used by passes) ---- */

/* Removes `instr` from its computation. It must have no users and not be the root;
 * returns FAILED_PRECONDITION otherwise. Its operands lose it as a user. The memory stays
 * in the module's arena. */
kiln_status kiln_hlo_instruction_remove(kiln_hlo_instruction_t *instr);
/* Removal in O(1): until kiln_hlo_computation_compact, kiln_hlo_instruction_remove and
 * kiln_hlo_instruction_move_to_end leave a NULL hole where the instruction was instead of
 * shifting the rest of c->instructions. Code reading c->instructions meanwhile must skip
 * NULL entries (the traversals below and the name set do). Compacting keeps the order
 * eager removal would have made. For passes that remove many instructions (fusion). */
void kiln_hlo_computation_defer_removals(kiln_hlo_computation_t *c);
/* Closes the holes (one pass, order kept) and ends deferred removal. */
void kiln_hlo_computation_compact(kiln_hlo_computation_t *c);
/* Moves `instr` to the end of its computation's instruction list. */
void kiln_hlo_instruction_move_to_end(kiln_hlo_instruction_t *instr);
/* Copies `src` (opcode, shape, every attribute) into computation `dest` of the same module,
 * with the given operands and name (NULL = a fresh unique name derived from src's). */
kiln_hlo_instruction_t *kiln_hlo_instruction_clone(kiln_hlo_computation_t *dest,
                                                   const kiln_hlo_instruction_t *src,
                                                   const char *name, int num_operands,
                                                   kiln_hlo_instruction_t *const *operands);
/* Deep-copies computation `src` into the same module under a fresh name derived from
 * `name_hint`. Called computations are shared, not copied. */
kiln_hlo_computation_t *kiln_hlo_computation_clone(const kiln_hlo_computation_t *src,
                                                   const char *name_hint);
/* Removes a computation that nothing calls any more (not the entry). */
void kiln_hlo_module_remove_computation(kiln_hlo_module_t *m, kiln_hlo_computation_t *c);
/* Removes every computation in `gone` (none that something still calls; never the entry) in
 * one pass over the module's list, the others keeping their order; returns how many. */
size_t kiln_hlo_module_remove_computations(kiln_hlo_module_t *m, const kiln_ptrmap_t *gone);
/* A name not used by any instruction or computation of the module: `prefix` itself if
 * free, else prefix.N. Allocated in the module's arena. */
char *kiln_hlo_module_unique_name(kiln_hlo_module_t *m, const char *prefix);
/* Instructions in post order: operands and control predecessors before users; every
 * instruction of the computation appears once (dead ones too). kiln_malloc'ed array. */
kiln_hlo_instruction_t **kiln_hlo_computation_post_order(const kiln_hlo_computation_t *c,
                                                         size_t *out_n);
/* Computations in post order: callees before callers, the entry last; unreachable ones
 * are included before the entry. kiln_malloc'ed array. */
kiln_hlo_computation_t **kiln_hlo_module_computation_post_order(const kiln_hlo_module_t *m,
                                                                size_t *out_n);
/* Moves `c`'s instruction list into post order (stable for already-sorted input). */
void kiln_hlo_computation_sort_post_order(kiln_hlo_computation_t *c);

/* ---- queries ---- */

/* The first computation called under `key` ("to_apply", "calls", "body", ...), or NULL. */
kiln_hlo_computation_t *kiln_hlo_instruction_called(const kiln_hlo_instruction_t *instr,
                                                    const char *key);
/* The raw attribute's value text, or NULL. */
const char *kiln_hlo_instruction_raw_attr(const kiln_hlo_instruction_t *instr, const char *key);
kiln_hlo_computation_t *kiln_hlo_module_find_computation(const kiln_hlo_module_t *m,
                                                         const char *name);
kiln_hlo_instruction_t *kiln_hlo_computation_find(const kiln_hlo_computation_t *c,
                                                  const char *name);
/* Total instruction count over all computations. */
int64_t kiln_hlo_module_instruction_count(const kiln_hlo_module_t *m);

/* ---- text ---- */

typedef struct kiln_hlo_parse_options {
  const char *filename; /* for messages; "<input>" if NULL */
  size_t max_bytes_per_input_byte; /* arena bound factor; 0 = default (64) */
} kiln_hlo_parse_options_t;

/* Parses `{shape, shape, ...}` (an attribute value such as a custom call's
 * operand_layout_constraints) into shapes in m's arena; *out an arena array of *count. */
kiln_status kiln_hlo_parse_shape_list(kiln_hlo_module_t *m, const char *text, size_t len,
                                      kiln_shape_t ***out, int *count);

/* Parses one module (text starting with `HloModule`). On error returns a status with
 * "file:line:col: expected <what>, found <what>" and sets *out to NULL. */
kiln_status kiln_hlo_parse_module(const char *text, size_t len,
                                  const kiln_hlo_parse_options_t *opts,
                                  kiln_hlo_module_t **out);
/* Parses a file that holds one or more modules separated by lines starting with
 * `// -----`. *out_modules is a kiln_malloc'ed array the caller frees (and each module). */
kiln_status kiln_hlo_parse_modules(const char *text, size_t len,
                                   const kiln_hlo_parse_options_t *opts,
                                   kiln_hlo_module_t ***out_modules, int *out_count);
/* Parses bare computations (`fusion { ... }` or `name (p: f32[2]) -> f32[2] { ... }`,
 * optionally several, the last one or the one marked ENTRY being the entry) into a module
 * named after the file. */
kiln_status kiln_hlo_parse_computations(const char *text, size_t len,
                                        const kiln_hlo_parse_options_t *opts,
                                        kiln_hlo_module_t **out);

/* Canonical text. print(parse(print(parse(x)))) == print(parse(x)). */
void kiln_hlo_module_print(kiln_strbuf_t *b, const kiln_hlo_module_t *m);
void kiln_hlo_computation_print(kiln_strbuf_t *b, const kiln_hlo_computation_t *c);
void kiln_hlo_instruction_print(kiln_strbuf_t *b, const kiln_hlo_instruction_t *instr);
char *kiln_hlo_module_to_string(const kiln_hlo_module_t *m); /* kiln_free the result */

/* Verifier: shape inference and structural checks for every opcode. The message names
 * the computation, the instruction and what is wrong. */
kiln_status kiln_hlo_module_verify(const kiln_hlo_module_t *m);

#endif /* KILN_HLO_IR_H_ */
