/* Kernel IR (KIR): the small typed SSA IR every emitter writes its kernel in, once, for both
 * targets (DESIGN.md principle 1). It sits at the level of XLA's xla_gpu / tensor / arith /
 * math / scf dialects (see the emitter document in ../shared/seeds):
 *
 *   - a module holds functions; a function has parameters (tensors, index scalars, element
 *     scalars) and results; its body is one single-block region whose arguments are the
 *     parameters and whose last op is `return`;
 *   - ops take SSA values and produce SSA values; ops with regions (loop, for, if,
 *     atomic_cas) own single-block regions ending in `yield`;
 *   - tensors are values in functional style: `insert` returns the updated tensor, loops
 *     thread tensors through iteration arguments, and the kernel entry returns its output
 *     tensors (each must come from one of its written tensor parameters). Lowering maps every
 *     tensor value to the buffer it was derived from, so an insert is a store.
 *
 * Types: element scalars of every kiln element type except complex (c64/c128 are rejected
 * by the verifier: not supported by this IR), `index` (a signed integer as wide as the
 * target's index width), tensors (element type + static dims + memory space), and small
 * vectors (N x element type, N <= 64). Narrow floats (f16, bf16, every f8 type, f4e2m1fn)
 * are computed through f32 and rounded back to nearest-even after every op.
 *
 * Ownership: the module owns everything built in it (functions, regions, ops, values,
 * types, and clones of the indexing maps handed to the builder); kiln_kir_module_destroy
 * frees it all. Pointers returned by the API are borrowed from the module.
 *
 * Building: a kiln_kir_builder_t appends ops at the end of a region (its insertion point).
 * Builder functions never abort: on a type error they record the first error in the builder
 * (kiln_kir_builder_status) and return NULL; every builder function returns NULL when given
 * a NULL operand, so a chain of calls can be checked once at the end. kiln_kir_verify checks
 * a whole module independently of the builder.
 *
 * Text form (kir_print.c): stable, one op per line, two-space indentation per region level,
 * e.g.
 *
 *   func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16> {written})
 *       -> (tensor<6x512x4096xbf16>) kernel block=[128, 1, 1] grid=[24576, 1, 1] {
 *     %th_x = thread_id x in [0, 127]
 *     %bl_x = block_id x in [0, 24575]
 *     %0 = loop (%th_x, %bl_x)[%v] -> (%d0, %d1, %d2) in
 *         <indexing map text> iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
 *       %1 = call @gelu(%input, %d0, %d1, %d2) : (...) -> bf16
 *       %2 = insert %1 into %iter[%d0, %d1, %d2] : tensor<6x512x4096xbf16>
 *       yield %2
 *     }
 *     return %0
 *   }
 *
 * (The exact grammar is whatever kiln_kir_print writes; tests compare it.) */
#ifndef KILN_COMPILER_CODEGEN_KIR_H_
#define KILN_COMPILER_CODEGEN_KIR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/analysis/indexing_map.h"
#include "compiler/hlo/shape.h"

/* ------------------------------------------------------------------------------------------
 * Types
 * ---------------------------------------------------------------------------------------- */

typedef enum kiln_kir_type_kind {
  KILN_KIR_TYPE_SCALAR = 0, /* one element of `elem` */
  KILN_KIR_TYPE_INDEX,      /* loop / tensor index */
  KILN_KIR_TYPE_TENSOR,     /* elem[dims...] in memory space `space` */
  KILN_KIR_TYPE_VECTOR,     /* `lanes` elements of `elem` */
} kiln_kir_type_kind_t;

typedef enum kiln_kir_space {
  KILN_KIR_SPACE_GLOBAL = 0, /* kernel parameters */
  KILN_KIR_SPACE_SHARED,     /* allocate_shared: one copy per block */
} kiln_kir_space_t;

#define KILN_KIR_MAX_RANK 16
#define KILN_KIR_MAX_LANES 64

/* Types are immutable and live in the module arena; compare with kiln_kir_type_equal. */
typedef struct kiln_kir_type {
  kiln_kir_type_kind_t kind;
  kiln_elem_type_t elem; /* SCALAR, TENSOR, VECTOR */
  kiln_kir_space_t space; /* TENSOR */
  int rank;              /* TENSOR: number of dims (0 = a scalar tensor) */
  int lanes;             /* VECTOR */
  const int64_t *dims;   /* TENSOR: rank dims */
} kiln_kir_type_t;

/* ------------------------------------------------------------------------------------------
 * Ops
 *
 * X(NAME, "text", kind) — kind: B binary arith, U unary arith/math, O other.
 * Binary ops take two operands of one type (scalar, index, or vector) and give that type;
 * unary ops likewise with one operand. Integer div/rem follow HLO: truncating division,
 * remainder with the dividend's sign; division by zero gives -1 (div, unsigned: all ones)
 * and the dividend (rem); INT_MIN / -1 gives INT_MIN and rem 0. Float min/max propagate
 * NaN (HLO semantics). Shifts take the amount unsigned; amounts >= bit width give 0
 * (logical) or the sign fill (arithmetic), as HLO. Unary math ops accept float types only
 * (round = half away from zero, round_even = half to even); abs, neg, sign accept ints too;
 * not, popcnt, clz accept ints and pred (not) only.
 * ---------------------------------------------------------------------------------------- */
#define KILN_KIR_OPS(X)                                                                  \
  /* constants and arithmetic */                                                        \
  X(CONSTANT, "constant", O)                                                            \
  X(ADD, "add", B)                                                                      \
  X(SUB, "sub", B)                                                                      \
  X(MUL, "mul", B)                                                                      \
  X(DIV, "div", B)                                                                      \
  X(REM, "rem", B)                                                                      \
  X(MIN, "min", B)                                                                      \
  X(MAX, "max", B)                                                                      \
  X(AND, "and", B)                                                                      \
  X(OR, "or", B)                                                                        \
  X(XOR, "xor", B)                                                                      \
  X(SHL, "shl", B)                                                                      \
  X(SHR_LOGICAL, "shr_logical", B)                                                      \
  X(SHR_ARITH, "shr_arith", B)                                                          \
  X(POW, "pow", B)                                                                      \
  X(ATAN2, "atan2", B)                                                                  \
  X(NEG, "neg", U)                                                                      \
  X(ABS, "abs", U)                                                                      \
  X(SIGN, "sign", U)                                                                    \
  X(NOT, "not", U)                                                                      \
  X(POPCNT, "popcnt", U)                                                                \
  X(CLZ, "clz", U)                                                                      \
  X(EXP, "exp", U)                                                                      \
  X(EXPM1, "expm1", U)                                                                  \
  X(LOG, "log", U)                                                                      \
  X(LOG1P, "log1p", U)                                                                  \
  X(TANH, "tanh", U)                                                                    \
  X(LOGISTIC, "logistic", U)                                                            \
  X(SIN, "sin", U)                                                                      \
  X(COS, "cos", U)                                                                      \
  X(TAN, "tan", U)                                                                      \
  X(SQRT, "sqrt", U)                                                                    \
  X(RSQRT, "rsqrt", U)                                                                  \
  X(CBRT, "cbrt", U)                                                                    \
  X(ERF, "erf", U)                                                                      \
  X(FLOOR, "floor", U)                                                                  \
  X(CEIL, "ceil", U)                                                                    \
  X(ROUND, "round", U)                                                                  \
  X(ROUND_EVEN, "round_even", U)                                                        \
  X(IS_FINITE, "is_finite", O) /* float -> pred */                                      \
  X(CMP, "cmp", O)             /* a, b -> pred; predicate attribute */                  \
  X(SELECT, "select", O)       /* pred, a, b -> a's type */                             \
  X(CONVERT, "convert", O)     /* value conversion to the result type (RNE for floats) */ \
  X(BITCAST, "bitcast", O)     /* same-width reinterpretation */                        \
  /* indexing */                                                                        \
  X(APPLY_INDEXING, "apply_indexing", O)                                                \
  X(THREAD_ID, "thread_id", O)                                                          \
  X(BLOCK_ID, "block_id", O)                                                            \
  /* structured control flow */                                                         \
  X(LOOP, "loop", O)                                                                    \
  X(FOR, "for", O)                                                                      \
  X(IF, "if", O)                                                                        \
  X(YIELD, "yield", O)                                                                  \
  X(CALL, "call", O)                                                                    \
  X(RETURN, "return", O)                                                                \
  /* tensors and vectors */                                                             \
  X(EXTRACT, "extract", O)                                                              \
  X(INSERT, "insert", O)                                                                \
  X(VLOAD, "vload", O)                                                                  \
  X(VSTORE, "vstore", O)                                                                \
  X(VEXTRACT, "vextract", O)                                                            \
  X(VINSERT, "vinsert", O)                                                              \
  X(VSPLAT, "vsplat", O)                                                                \
  /* GPU execution model */                                                             \
  X(ALLOC_SHARED, "allocate_shared", O)                                                 \
  X(BARRIER, "barrier", O)                                                              \
  X(SHUFFLE, "shuffle", O)                                                              \
  X(ATOMIC_RMW, "atomic_rmw", O)                                                        \
  X(ATOMIC_CAS, "atomic_cas_loop", O)

typedef enum kiln_kir_opcode {
#define X(name, text, kind) KILN_KIR_##name,
  KILN_KIR_OPS(X)
#undef X
      KILN_KIR_OPCODE_COUNT
} kiln_kir_opcode_t;

/* Compare predicates. Integers compare signed or unsigned by their element type (index:
 * signed); floats: EQ/LT/LE/GT/GE are ordered (false with a NaN), NE is unordered (true
 * with a NaN), as HLO's compare with type=FLOAT. */
typedef enum kiln_kir_cmp {
  KILN_KIR_CMP_EQ = 0,
  KILN_KIR_CMP_NE,
  KILN_KIR_CMP_LT,
  KILN_KIR_CMP_LE,
  KILN_KIR_CMP_GT,
  KILN_KIR_CMP_GE,
} kiln_kir_cmp_t;

/* Warp shuffles (CUDA __shfl_*_sync over a full warp, segments of `width` lanes):
 * DOWN reads lane i + offset, UP lane i - offset, XOR lane i ^ offset, IDX lane `offset`
 * of the segment; a source lane outside the segment gives the lane's own value. */
typedef enum kiln_kir_shuffle_mode {
  KILN_KIR_SHUFFLE_DOWN = 0,
  KILN_KIR_SHUFFLE_UP,
  KILN_KIR_SHUFFLE_XOR,
  KILN_KIR_SHUFFLE_IDX,
} kiln_kir_shuffle_mode_t;

typedef enum kiln_kir_atomic {
  KILN_KIR_ATOMIC_ADD = 0,
  KILN_KIR_ATOMIC_MIN,
  KILN_KIR_ATOMIC_MAX,
  KILN_KIR_ATOMIC_EXCH,
} kiln_kir_atomic_t;

typedef enum kiln_kir_func_kind {
  KILN_KIR_FUNC_SUBGRAPH = 0, /* (tensors..., indices...) -> scalars; called with `call` */
  KILN_KIR_FUNC_KERNEL,       /* the entry: tensors in, written tensors returned */
} kiln_kir_func_kind_t;

typedef struct kiln_kir_module kiln_kir_module_t;
typedef struct kiln_kir_func kiln_kir_func_t;
typedef struct kiln_kir_region kiln_kir_region_t;
typedef struct kiln_kir_op kiln_kir_op_t;
typedef struct kiln_kir_value kiln_kir_value_t;

/* An SSA value: an op result or a region argument (function parameters are the arguments
 * of the function's body region). */
struct kiln_kir_value {
  uint32_t id;                 /* unique within the module */
  const kiln_kir_type_t *type;
  kiln_kir_op_t *def;          /* defining op, or NULL for a region argument */
  kiln_kir_region_t *region;   /* region argument: its region */
  uint32_t index;              /* result index in def, or argument index */
  const char *name;            /* print-name hint (module arena) or NULL */
};

/* A single-block region: arguments and an op list (ops[len-1] is the terminator). */
struct kiln_kir_region {
  kiln_kir_op_t *parent; /* owning op, or NULL for a function body */
  kiln_kir_func_t *func;
  kiln_kir_value_t **args;
  uint32_t num_args;
  KILN_VEC(kiln_kir_op_t *) ops;
};

/* Constant payload: integers (and pred, index) in `i` (unsigned types use the bit
 * pattern), floats (every float type, the value before rounding to the type) in `f`. */
typedef struct kiln_kir_const {
  int64_t i;
  double f;
} kiln_kir_const_t;

struct kiln_kir_op {
  kiln_kir_opcode_t opcode;
  kiln_kir_value_t **operands;
  uint32_t num_operands;
  kiln_kir_value_t **results;
  uint32_t num_results;
  kiln_kir_region_t **regions;
  uint32_t num_regions;
  kiln_kir_region_t *parent; /* region containing the op */

  /* Attributes (meaning per opcode; unused ones are zero). */
  kiln_kir_const_t cst;          /* CONSTANT, VSPLAT-free constants */
  kiln_kir_cmp_t cmp;            /* CMP */
  int axis;                      /* THREAD_ID / BLOCK_ID: 0 = x, 1 = y, 2 = z */
  int64_t range_lo, range_hi;    /* THREAD_ID / BLOCK_ID value range (inclusive) */
  kiln_indexing_map_t *map;      /* APPLY_INDEXING, LOOP (owned by the module) */
  uint32_t num_map_dims;         /* APPLY_INDEXING / LOOP: operands that are map dims */
  kiln_kir_func_t *callee;       /* CALL */
  kiln_kir_shuffle_mode_t shuffle; /* SHUFFLE */
  int32_t offset, width;         /* SHUFFLE */
  kiln_kir_atomic_t atomic;      /* ATOMIC_RMW */
  int64_t lane;                  /* VEXTRACT / VINSERT: constant lane, or -1 = operand */
};

struct kiln_kir_func {
  const char *name;
  kiln_kir_func_kind_t kind;
  kiln_kir_module_t *module;
  kiln_kir_region_t *body; /* args = parameters */
  bool *param_written;     /* per parameter: a tensor the kernel writes (KERNEL only) */
  KILN_VEC(const kiln_kir_type_t *) result_types;
  int64_t block[3], grid[3]; /* KERNEL: launch dimensions (threads per block, blocks) */
  /* KERNEL, host lowering hint from the emitter: keep the y and z thread loops rolled (not
   * unrolled by LLVM around the vectorized x loop). The transpose sets it: its phases only
   * move data, and rolled y loops measured faster there while reductions lost. */
  bool host_rolled_thread_loops;
  /* KERNEL, host lowering hint: keep the top-level `for` loops that run outside the thread
   * loops rolled. The sort sets it for rows in global memory: LLVM fully unrolled its
   * 16-iteration copy loop around the vectorized thread loop (a [64, 16384] sort: 5x the
   * code, compile 244-301 -> 63-68 ms, the same run time). */
  bool host_rolled_for_loops;
};

struct kiln_kir_module {
  const char *name;
  kiln_arena_t arena;
  kiln_affine_ctx_t *ctx; /* every map in the module is built in it */
  bool owns_ctx;
  KILN_VEC(kiln_kir_func_t *) funcs;
  KILN_VEC(kiln_indexing_map_t *) maps; /* owned */
  KILN_VEC(kiln_kir_region_t *) regions; /* every region made (frees their op lists) */
  uint32_t next_value_id;
  /* Excess precision (XLA's --xla_allow_excess_precision, on by default there): bf16 values
   * computed by arithmetic ops stay f32 for the ops, compares and widening conversions that
   * read them in straight-line code; only stored, loop-carried or passed values are rounded.
   * false: every bf16 op rounds its result (the evaluator's semantics). Read by lowering. */
  bool excess_precision;
};

/* ------------------------------------------------------------------------------------------
 * Module, functions, types (kir.c)
 * ---------------------------------------------------------------------------------------- */

/* Creates an empty module. `ctx` is the affine context the module's maps live in (borrowed;
 * must outlive the module); NULL makes the module create and own one. */
kiln_kir_module_t *kiln_kir_module_create(const char *name, kiln_affine_ctx_t *ctx);
void kiln_kir_module_destroy(kiln_kir_module_t *m);
kiln_kir_func_t *kiln_kir_module_find_func(const kiln_kir_module_t *m, const char *name);
/* The module's kernel (the first KERNEL function), or NULL. */
kiln_kir_func_t *kiln_kir_module_kernel(const kiln_kir_module_t *m);

const kiln_kir_type_t *kiln_kir_type_scalar(kiln_kir_module_t *m, kiln_elem_type_t elem);
const kiln_kir_type_t *kiln_kir_type_index(kiln_kir_module_t *m);
const kiln_kir_type_t *kiln_kir_type_tensor(kiln_kir_module_t *m, kiln_elem_type_t elem,
                                            int rank, const int64_t *dims,
                                            kiln_kir_space_t space);
const kiln_kir_type_t *kiln_kir_type_vector(kiln_kir_module_t *m, kiln_elem_type_t elem,
                                            int lanes);
bool kiln_kir_type_equal(const kiln_kir_type_t *a, const kiln_kir_type_t *b);
/* Number of elements of a tensor type (1 for rank 0). */
int64_t kiln_kir_type_num_elements(const kiln_kir_type_t *t);
/* Appends "f32", "index", "tensor<6x512xbf16>", "tensor<32x33xf32, shared>", "vector<4xbf16>". */
void kiln_kir_type_print(const kiln_kir_type_t *t, kiln_strbuf_t *out);

/* Creates a function with the given parameter types (names may be NULL or hold NULLs) and
 * result types, appended to the module. Names must be unique in the module (NULL is returned
 * otherwise). The body is empty: build into kiln_kir_func_body and end it with a return. */
kiln_kir_func_t *kiln_kir_func_create(kiln_kir_module_t *m, const char *name,
                                      kiln_kir_func_kind_t kind,
                                      const kiln_kir_type_t *const *param_types,
                                      const char *const *param_names, size_t num_params,
                                      const kiln_kir_type_t *const *result_types,
                                      size_t num_results);
kiln_kir_region_t *kiln_kir_func_body(kiln_kir_func_t *f);
kiln_kir_value_t *kiln_kir_func_param(kiln_kir_func_t *f, size_t i);
size_t kiln_kir_func_num_params(const kiln_kir_func_t *f);
/* KERNEL: marks parameter i as written (an output tensor). */
void kiln_kir_func_set_written(kiln_kir_func_t *f, size_t i, bool written);
/* KERNEL: launch dimensions; thread_id / block_id ranges must lie inside them. */
void kiln_kir_func_set_launch(kiln_kir_func_t *f, const int64_t block[3], const int64_t grid[3]);

/* Gives a value a print name hint ("th_x", "iter"); copied into the module arena. */
void kiln_kir_value_set_name(kiln_kir_value_t *v, const char *name);

/* ------------------------------------------------------------------------------------------
 * Builder (kir.c)
 * ---------------------------------------------------------------------------------------- */

typedef struct kiln_kir_builder {
  kiln_kir_module_t *m;
  kiln_kir_region_t *region; /* insertion point: ops are appended here */
  KILN_VEC(kiln_kir_region_t *) stack;
  kiln_status status; /* first error; owned by the builder */
} kiln_kir_builder_t;

/* Starts building at the end of `region`. */
void kiln_kir_builder_init(kiln_kir_builder_t *b, kiln_kir_module_t *m, kiln_kir_region_t *region);
/* Frees the builder's stack and its status (take the status first if you want it). */
void kiln_kir_builder_finish(kiln_kir_builder_t *b);
/* Moves the insertion point into `region` (e.g. a loop body), remembering the old one. */
void kiln_kir_builder_enter(kiln_kir_builder_t *b, kiln_kir_region_t *region);
/* Returns to the insertion point before the matching enter. */
void kiln_kir_builder_exit(kiln_kir_builder_t *b);
/* The first error (ownership passes to the caller; the builder's is cleared). */
kiln_status kiln_kir_builder_take_status(kiln_kir_builder_t *b);
bool kiln_kir_builder_ok(const kiln_kir_builder_t *b);

/* Constants. Integer-like types (ints, pred, index) use `i`; float types use `f`. */
kiln_kir_value_t *kiln_kir_const_int(kiln_kir_builder_t *b, kiln_elem_type_t elem, int64_t i);
kiln_kir_value_t *kiln_kir_const_float(kiln_kir_builder_t *b, kiln_elem_type_t elem, double f);
kiln_kir_value_t *kiln_kir_const_index(kiln_kir_builder_t *b, int64_t i);
/* A constant of any scalar / index / vector (splat) type. */
kiln_kir_value_t *kiln_kir_const(kiln_kir_builder_t *b, const kiln_kir_type_t *type,
                                 kiln_kir_const_t value);

/* Binary ops (ADD .. ATAN2) and unary ops (NEG .. ROUND_EVEN). */
kiln_kir_value_t *kiln_kir_binary(kiln_kir_builder_t *b, kiln_kir_opcode_t op,
                                  kiln_kir_value_t *lhs, kiln_kir_value_t *rhs);
kiln_kir_value_t *kiln_kir_unary(kiln_kir_builder_t *b, kiln_kir_opcode_t op,
                                 kiln_kir_value_t *x);
kiln_kir_value_t *kiln_kir_is_finite(kiln_kir_builder_t *b, kiln_kir_value_t *x);
kiln_kir_value_t *kiln_kir_cmp(kiln_kir_builder_t *b, kiln_kir_cmp_t pred, kiln_kir_value_t *lhs,
                               kiln_kir_value_t *rhs);
kiln_kir_value_t *kiln_kir_select(kiln_kir_builder_t *b, kiln_kir_value_t *cond,
                                  kiln_kir_value_t *on_true, kiln_kir_value_t *on_false);
/* Converts between scalar types (element types and index); vectors lane-wise. */
kiln_kir_value_t *kiln_kir_convert(kiln_kir_builder_t *b, kiln_kir_value_t *x,
                                   const kiln_kir_type_t *to);
/* Reinterprets the bits (same bit width). */
kiln_kir_value_t *kiln_kir_bitcast(kiln_kir_builder_t *b, kiln_kir_value_t *x,
                                   const kiln_kir_type_t *to);

/* Thread / block ids (index) on `axis` (0..2) with value range [lo, hi]. */
kiln_kir_value_t *kiln_kir_thread_id(kiln_kir_builder_t *b, int axis, int64_t lo, int64_t hi);
kiln_kir_value_t *kiln_kir_block_id(kiln_kir_builder_t *b, int axis, int64_t lo, int64_t hi);

/* Applies `map` (cloned; must be built in the module's ctx) to index operands: the map's
 * dims, then its symbols (runtime variables are not supported here). Returns the op; its
 * results (one index per map result) are op->results. */
kiln_kir_op_t *kiln_kir_apply_indexing(kiln_kir_builder_t *b, const kiln_indexing_map_t *map,
                                       kiln_kir_value_t *const *dims, size_t num_dims,
                                       kiln_kir_value_t *const *syms, size_t num_syms);
/* Convenience for a one-result map: the result value. */
kiln_kir_value_t *kiln_kir_apply_indexing1(kiln_kir_builder_t *b, const kiln_indexing_map_t *map,
                                           kiln_kir_value_t *const *dims, size_t num_dims);

/* xla_gpu.loop: iterates over every point (syms) of `map`'s domain for the given dim values,
 * skipping points outside the domain (intervals and constraints). The body region's
 * arguments are: one per symbol, one per map result, then one per iteration argument; the
 * body must end with yield of the new iteration values. Results: the final iteration values.
 * The map is cloned; map dims == num_dims; the map has no runtime variables. */
kiln_kir_op_t *kiln_kir_loop(kiln_kir_builder_t *b, const kiln_indexing_map_t *map,
                             kiln_kir_value_t *const *dims, size_t num_dims,
                             kiln_kir_value_t *const *inits, size_t num_inits);
kiln_kir_region_t *kiln_kir_op_region(kiln_kir_op_t *op, size_t i);
kiln_kir_value_t *kiln_kir_op_result(kiln_kir_op_t *op, size_t i);
/* Region argument i. */
kiln_kir_value_t *kiln_kir_region_arg(kiln_kir_region_t *r, size_t i);
/* LOOP body argument helpers. */
kiln_kir_value_t *kiln_kir_loop_sym(kiln_kir_op_t *loop, size_t i);
kiln_kir_value_t *kiln_kir_loop_index(kiln_kir_op_t *loop, size_t i); /* map result i */
kiln_kir_value_t *kiln_kir_loop_iter_arg(kiln_kir_op_t *loop, size_t i);

/* scf.for: iv from lb while iv < ub, step > 0 (index operands). Body arguments: iv, then one
 * per iteration argument; ends with yield. */
kiln_kir_op_t *kiln_kir_for(kiln_kir_builder_t *b, kiln_kir_value_t *lb, kiln_kir_value_t *ub,
                            kiln_kir_value_t *step, kiln_kir_value_t *const *inits,
                            size_t num_inits);
/* scf.if with results of the given types: regions 0 (then) and 1 (else), no arguments, each
 * ends with a yield of values of those types. */
kiln_kir_op_t *kiln_kir_if(kiln_kir_builder_t *b, kiln_kir_value_t *cond,
                           const kiln_kir_type_t *const *result_types, size_t num_results);
/* Terminators. */
void kiln_kir_yield(kiln_kir_builder_t *b, kiln_kir_value_t *const *values, size_t n);
void kiln_kir_return(kiln_kir_builder_t *b, kiln_kir_value_t *const *values, size_t n);

/* Calls `callee` (a SUBGRAPH function of the module); operands must match its parameters.
 * Returns the op (results = callee's result types). */
kiln_kir_op_t *kiln_kir_call(kiln_kir_builder_t *b, kiln_kir_func_t *callee,
                             kiln_kir_value_t *const *args, size_t num_args);

/* tensor.extract: element at `indices` (one index per dim). */
kiln_kir_value_t *kiln_kir_extract(kiln_kir_builder_t *b, kiln_kir_value_t *tensor,
                                   kiln_kir_value_t *const *indices, size_t n);
/* tensor.insert: returns the tensor with `value` stored at `indices`. */
kiln_kir_value_t *kiln_kir_insert(kiln_kir_builder_t *b, kiln_kir_value_t *value,
                                  kiln_kir_value_t *tensor, kiln_kir_value_t *const *indices,
                                  size_t n);
/* Vector load / store of `lanes` contiguous elements starting at `indices` (the last
 * dimension advances); the start must be aligned to `lanes` elements. */
kiln_kir_value_t *kiln_kir_vload(kiln_kir_builder_t *b, kiln_kir_value_t *tensor,
                                 kiln_kir_value_t *const *indices, size_t n, int lanes);
kiln_kir_value_t *kiln_kir_vstore(kiln_kir_builder_t *b, kiln_kir_value_t *vec,
                                  kiln_kir_value_t *tensor, kiln_kir_value_t *const *indices,
                                  size_t n);
/* Lane access: `lane` is an index value, or NULL with `const_lane` >= 0. */
kiln_kir_value_t *kiln_kir_vextract(kiln_kir_builder_t *b, kiln_kir_value_t *vec,
                                    kiln_kir_value_t *lane, int64_t const_lane);
kiln_kir_value_t *kiln_kir_vinsert(kiln_kir_builder_t *b, kiln_kir_value_t *value,
                                   kiln_kir_value_t *vec, kiln_kir_value_t *lane,
                                   int64_t const_lane);

/* A block-shared tensor (SHARED space, uninitialized). */
kiln_kir_value_t *kiln_kir_alloc_shared(kiln_kir_builder_t *b, kiln_elem_type_t elem, int rank,
                                        const int64_t *dims);
/* __syncthreads: takes shared tensors and returns them (later reads see all writes made
 * before the barrier by every thread of the block). Returns the op. */
kiln_kir_op_t *kiln_kir_barrier(kiln_kir_builder_t *b, kiln_kir_value_t *const *tensors,
                                size_t n);
/* Warp shuffle of a scalar (32-bit or 64-bit, or narrower types widened) value. */
kiln_kir_value_t *kiln_kir_shuffle(kiln_kir_builder_t *b, kiln_kir_shuffle_mode_t mode,
                                   kiln_kir_value_t *x, int32_t offset, int32_t width);
/* Atomic read-modify-write of tensor[indices] with `value`; returns the tensor. */
kiln_kir_value_t *kiln_kir_atomic_rmw(kiln_kir_builder_t *b, kiln_kir_atomic_t kind,
                                      kiln_kir_value_t *value, kiln_kir_value_t *tensor,
                                      kiln_kir_value_t *const *indices, size_t n);
/* Compare-and-swap loop with an arbitrary combiner: the region takes the current element
 * value and yields the new one; the op returns the tensor. Elements of 16, 32 or 64 bits. */
kiln_kir_op_t *kiln_kir_atomic_cas_loop(kiln_kir_builder_t *b, kiln_kir_value_t *tensor,
                                        kiln_kir_value_t *const *indices, size_t n);

/* Generic op creation (used by passes): appends an op with the given operands, result types
 * and `num_regions` empty regions; attributes are copied from `attrs` when non-NULL
 * (opcode, operands, results and regions of `attrs` are ignored; its map is cloned). No
 * type checking: run kiln_kir_verify afterwards. */
kiln_kir_op_t *kiln_kir_op_create(kiln_kir_builder_t *b, kiln_kir_opcode_t opcode,
                                  kiln_kir_value_t *const *operands, size_t num_operands,
                                  const kiln_kir_type_t *const *result_types, size_t num_results,
                                  size_t num_regions, const kiln_kir_op_t *attrs);
/* Adds an argument of `type` to a region (used when building regions of generic ops). */
kiln_kir_value_t *kiln_kir_region_add_arg(kiln_kir_module_t *m, kiln_kir_region_t *r,
                                          const kiln_kir_type_t *type);
/* A new empty region of `f` owned by `parent` (NULL: a function body). */
kiln_kir_region_t *kiln_kir_region_new(kiln_kir_module_t *m, kiln_kir_func_t *f,
                                       kiln_kir_op_t *parent);
/* Whether a binary/unary op accepts operands of type `t`. */
bool kiln_kir_op_accepts_type(kiln_kir_opcode_t op, const kiln_kir_type_t *t);
/* Bit width of a scalar/vector element type (index: 64). */
int kiln_kir_type_bits(const kiln_kir_type_t *t);
/* Registers a map with the module (takes ownership) and returns it. */
kiln_indexing_map_t *kiln_kir_module_adopt_map(kiln_kir_module_t *m, kiln_indexing_map_t *map);

const char *kiln_kir_opcode_name(kiln_kir_opcode_t op);
bool kiln_kir_opcode_is_binary(kiln_kir_opcode_t op);
bool kiln_kir_opcode_is_unary(kiln_kir_opcode_t op);

/* ------------------------------------------------------------------------------------------
 * Verification and printing
 * ---------------------------------------------------------------------------------------- */

/* Checks types, operand counts, terminators, dominance (a value is used only in its region
 * or regions nested inside it, after its definition), calls, and the kernel's contract
 * (results come from written tensor parameters; thread/block id ranges inside the launch).
 * INVALID_ARGUMENT naming the function and op on the first violation. */
kiln_status kiln_kir_verify(const kiln_kir_module_t *m);

/* Appends the module's stable text form (kir_print.c). */
void kiln_kir_print(const kiln_kir_module_t *m, kiln_strbuf_t *out);
/* The text as a heap string (kiln_free). */
char *kiln_kir_to_string(const kiln_kir_module_t *m);
/* The module's code alone, for cache keys and deduplication: as kiln_kir_print, but values
 * numbered without their name hints and functions named by position ("kernel", "f<i>"), so
 * kernels that differ only in names print equal; then the module flags the text does not
 * show (excess precision, the host loop hint). */
void kiln_kir_print_canonical(const kiln_kir_module_t *m, kiln_strbuf_t *out);

#endif /* KILN_COMPILER_CODEGEN_KIR_H_ */
