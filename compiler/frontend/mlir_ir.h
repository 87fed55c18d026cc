/* A generic MLIR IR: what both StableHLO readers produce (MLIR text: mlir_text.h; MLIR
 * bytecode of the VHLO dialect: mlir_bytecode.h) and what the converter to HLO consumes
 * (stablehlo_to_hlo.h). It models MLIR's structure, not its dialects: operations with a full
 * name ("func.func", "stablehlo.add", "chlo.erf", "check.expect_eq"), operands, typed results,
 * named attributes, regions of blocks with typed arguments.
 *
 * One form for both readers. After reading, an op looks the way the GENERIC form of the
 * current StableHLO prints it: `"stablehlo.dot_general"(%a, %b) {dot_dimension_numbers =
 * #stablehlo.dot<...>, precision_config = [...]}`: attribute names are the ops' ODS names,
 * structured attributes (#stablehlo.dot, .gather, .scatter, .conv, .channel_handle,
 * .output_operand_alias, .type_extensions, .result_accuracy ...) are KILN_MLIR_ATTR_STRUCT with
 * the fields the spec names, enums (#stablehlo<comparison_direction EQ>) are
 * KILN_MLIR_ATTR_ENUM. The text reader turns pretty forms into this; the bytecode reader
 * upgrades vhlo.*_vN ops and #vhlo attributes into it.
 *
 * Structured attributes' fields: integer lists are DENSE_ARRAY of i64 (`?` as
 * KILN_MLIR_DYNAMIC), integers INTEGER (i64), floats FLOAT (f64), booleans BOOL, types TYPE,
 * nested enums ENUM, and a bare keyword value (`mode = DEFAULT`) an ENUM whose enum_name is the
 * field's name. #stablehlo.bounds<...> (a tensor's encoding) reads as
 * #stablehlo.type_extensions<bounds = [...]>; the pretty convolution dimensions
 * `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` as #stablehlo.conv with the spec's nine fields.
 * Pretty op forms read as the ODS attributes of the generic form: `dims = [..]` is
 * broadcast_dimensions / permutation / dimensions (array<i64>), `dim = N` dimension or
 * iota_dimension (i64), a slice's `[a:b:c]` start_indices / limit_indices / strides,
 * dot_general's clauses dot_dimension_numbers (#stablehlo.dot, all four fields present) and
 * precision_config (ARRAY of ENUM precision), convolution's window = {...} window_strides,
 * padding (DENSE_ELEMENTS tensor<Nx2xi64>), lhs_dilation, rhs_dilation, window_reversal
 * (array<i1>), reduce's `applies OP` a synthesized body region, custom_call's @target
 * call_target_name (STRING), compare's direction/type comparison_direction / compare_type.
 * Unknown dialect attributes and types (#sdy..., !quant...) are OTHER with their text.
 *
 * func.func reads as its generic form: attributes `sym_name` (STRING), `function_type` (TYPE
 * of kind FUNCTION), `sym_visibility` (STRING "private"; absent when public), `arg_attrs` /
 * `res_attrs` (ARRAY of DICTIONARY, one per argument / result; absent when all are empty)
 * and one region whose entry block's arguments are the function's. Generic properties
 * (`<{...}>`) are read as attributes. Locations are not attributes: `op->location`.
 *
 * Memory: a module owns everything in one arena; pointers into it live as long as the module.
 *
 * Thread-safety: a module is not thread-safe (callers serialize); separate modules are
 * independent. */
#ifndef KILN_COMPILER_FRONTEND_MLIR_IR_H_
#define KILN_COMPILER_FRONTEND_MLIR_IR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"

#define KILN_MLIR_DYNAMIC INT64_MIN /* a `?` dimension */

typedef struct kiln_mlir_type kiln_mlir_type_t;
typedef struct kiln_mlir_attr kiln_mlir_attr_t;
typedef struct kiln_mlir_value kiln_mlir_value_t;
typedef struct kiln_mlir_op kiln_mlir_op_t;
typedef struct kiln_mlir_block kiln_mlir_block_t;
typedef struct kiln_mlir_region kiln_mlir_region_t;

typedef enum kiln_mlir_type_kind {
  KILN_MLIR_TYPE_INTEGER, /* iN / siN / uiN: width, signedness */
  KILN_MLIR_TYPE_FLOAT,   /* f16, bf16, f32, f64, f8E4M3FN, ...: elem */
  KILN_MLIR_TYPE_INDEX,
  KILN_MLIR_TYPE_COMPLEX,  /* complex<f32>: element */
  KILN_MLIR_TYPE_TENSOR,   /* tensor<2x?xf32, #enc>: rank, dims, element, encoding; or unranked */
  KILN_MLIR_TYPE_TUPLE,    /* tuple<...>: types */
  KILN_MLIR_TYPE_TOKEN,    /* !stablehlo.token */
  KILN_MLIR_TYPE_FUNCTION, /* (inputs) -> results */
  KILN_MLIR_TYPE_NONE,
  KILN_MLIR_TYPE_OTHER, /* a type kiln does not model (e.g. !quant.uniform<...>): text */
} kiln_mlir_type_kind_t;

typedef enum kiln_mlir_signedness {
  KILN_MLIR_SIGNLESS = 0, /* iN */
  KILN_MLIR_SIGNED,       /* siN */
  KILN_MLIR_UNSIGNED,     /* uiN */
} kiln_mlir_signedness_t;

struct kiln_mlir_type {
  kiln_mlir_type_kind_t kind;
  int32_t width;                     /* INTEGER */
  kiln_mlir_signedness_t signedness; /* INTEGER */
  kiln_elem_type_t elem;             /* FLOAT: kiln's element type of the same format */
  const kiln_mlir_type_t *element;   /* COMPLEX, TENSOR */
  bool unranked;                     /* TENSOR: tensor<*xf32> */
  int32_t rank;                      /* TENSOR */
  int64_t *dims;                     /* TENSOR: KILN_MLIR_DYNAMIC for `?` */
  const kiln_mlir_attr_t *encoding;  /* TENSOR: e.g. #stablehlo.bounds<...>; NULL if none */
  int32_t num_types;                 /* TUPLE: members; FUNCTION: inputs */
  const kiln_mlir_type_t **types;
  int32_t num_results; /* FUNCTION */
  const kiln_mlir_type_t **results;
  const char *text; /* OTHER: as written */
};

typedef enum kiln_mlir_attr_kind {
  KILN_MLIR_ATTR_UNIT,           /* `unit` or a name without value */
  KILN_MLIR_ATTR_BOOL,           /* true / false */
  KILN_MLIR_ATTR_INTEGER,        /* 42 : i64 (type may be NULL: i64) */
  KILN_MLIR_ATTR_FLOAT,          /* 1.0 : f32 */
  KILN_MLIR_ATTR_STRING,         /* "..." (bytes, may hold NULs) */
  KILN_MLIR_ATTR_TYPE,           /* a type used as an attribute */
  KILN_MLIR_ATTR_ARRAY,          /* [a, b, ...] */
  KILN_MLIR_ATTR_DENSE_ARRAY,    /* array<i64: 1, 2>: elements as int64 or double */
  KILN_MLIR_ATTR_DENSE_ELEMENTS, /* dense<...> : tensor<...> (incl. hex and splat): literal */
  KILN_MLIR_ATTR_DICTIONARY,     /* {a = ..., b = ...} */
  KILN_MLIR_ATTR_SYMBOL_REF,     /* @name (nested @a::@b kept as "a::b") */
  KILN_MLIR_ATTR_ENUM,           /* #stablehlo<comparison_direction EQ>: dialect, name, value */
  KILN_MLIR_ATTR_STRUCT,         /* #stablehlo.dot<...>: name ("stablehlo.dot"), fields */
  KILN_MLIR_ATTR_OTHER,          /* an attribute kiln does not model (#sdy..., dense_resource,
                                    dense<> of f6 elements): its text (with any `: type`, which
                                    is also in `type`) */
} kiln_mlir_attr_kind_t;

typedef struct kiln_mlir_named_attr {
  const char *name;
  const kiln_mlir_attr_t *value;
} kiln_mlir_named_attr_t;

struct kiln_mlir_attr {
  kiln_mlir_attr_kind_t kind;
  const kiln_mlir_type_t *type; /* INTEGER, FLOAT, TYPE, DENSE_ARRAY (element), DENSE_ELEMENTS */
  bool b;                       /* BOOL */
  int64_t i;                    /* INTEGER (uiN values as their bits) */
  double f;                     /* FLOAT (f64 holds every narrower format exactly) */
  const char *str;              /* STRING (bytes), SYMBOL_REF, ENUM value, OTHER text */
  size_t str_len;               /* STRING */
  int32_t num_elements;         /* ARRAY, DENSE_ARRAY, DICTIONARY/STRUCT fields */
  const kiln_mlir_attr_t **elements; /* ARRAY */
  int64_t *ints;                     /* DENSE_ARRAY of integers / i1 */
  double *floats;                    /* DENSE_ARRAY of floats */
  kiln_mlir_named_attr_t *fields;    /* DICTIONARY, STRUCT */
  const char *dialect;               /* ENUM: "stablehlo"; STRUCT: its name "stablehlo.dot" */
  const char *enum_name;             /* ENUM: "comparison_direction" */
  kiln_literal_t *literal;           /* DENSE_ELEMENTS: the value, shape from `type` */
};

struct kiln_mlir_value {
  const kiln_mlir_type_t *type;
  kiln_mlir_op_t *def;      /* the op that defines it, or NULL for a block argument */
  int32_t index;            /* result number, or argument number */
  kiln_mlir_block_t *block; /* block argument: its block */
  const char *name;         /* as written in text ("%0", "%arg0"), for messages; may be NULL */
};

struct kiln_mlir_block {
  int32_t num_args;
  kiln_mlir_value_t *args;
  int32_t num_ops;
  kiln_mlir_op_t **ops;
  const char *label; /* "^bb0"; may be NULL */
};

struct kiln_mlir_region {
  int32_t num_blocks;
  kiln_mlir_block_t *blocks;
};

struct kiln_mlir_op {
  const char *name; /* "stablehlo.add" */
  int32_t num_operands;
  kiln_mlir_value_t **operands;
  int32_t num_results;
  kiln_mlir_value_t *results;
  int32_t num_attrs;
  kiln_mlir_named_attr_t *attrs; /* in the order read */
  int32_t num_regions;
  kiln_mlir_region_t *regions;
  const char *location; /* e.g. "\"file.py\":12:3" or a name; NULL if none */
  int32_t line;         /* line in the input (text) or 0 (bytecode), for messages */
};

typedef struct kiln_mlir_module {
  kiln_arena_t arena;
  const char *name;  /* module @name, or NULL */
  int32_t num_attrs; /* module attributes (mhlo.num_partitions, ...) */
  kiln_mlir_named_attr_t *attrs;
  kiln_mlir_block_t body; /* top-level ops: func.func, ... */
} kiln_mlir_module_t;

kiln_mlir_module_t *kiln_mlir_module_create(void);
void kiln_mlir_module_destroy(kiln_mlir_module_t *m);

/* The attribute named `name` of op/struct/dictionary, or NULL. */
const kiln_mlir_attr_t *kiln_mlir_op_attr(const kiln_mlir_op_t *op, const char *name);
const kiln_mlir_attr_t *kiln_mlir_attr_field(const kiln_mlir_attr_t *a, const char *name);
/* The func.func named `name` among the module's top-level ops, or NULL. */
const kiln_mlir_op_t *kiln_mlir_module_func(const kiln_mlir_module_t *m, const char *name);

/* The generic form of the module as text (for tests and dumps: the text reader's output of a
 * printed module is the same module). */
void kiln_mlir_module_print(kiln_strbuf_t *b, const kiln_mlir_module_t *m);
void kiln_mlir_type_print(kiln_strbuf_t *b, const kiln_mlir_type_t *t);
void kiln_mlir_attr_print(kiln_strbuf_t *b, const kiln_mlir_attr_t *a);

#endif /* KILN_COMPILER_FRONTEND_MLIR_IR_H_ */
