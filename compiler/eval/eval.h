/* Reference evaluator: a plain interpreter of HLO with XLA's semantics.
 *
 * Values are literals (compiler/hlo/literal.h): dense, row-major, logical order. The
 * evaluator shares no code with codegen; it is the yardstick compiled kernels are checked
 * against. Anything it cannot evaluate fails with UNIMPLEMENTED naming the opcode — never a
 * wrong answer. */
#ifndef KILN_EVAL_EVAL_H_
#define KILN_EVAL_EVAL_H_

#include <math.h>
#include <stdbool.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/ieee_minmax.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"

typedef struct kiln_eval_options {
  int64_t replica_id;   /* for replica-id; single participant */
  int64_t partition_id; /* for partition-id */
  uint64_t rng_seed;    /* for `rng` (the stateless rng-bit-generator ignores it) */
  int64_t max_while_iterations; /* 0 = unlimited; else RESOURCE_EXHAUSTED past it */
  /* (optional) Custom calls the evaluator does not implement itself (eval_custom_call.c):
   * called with the operands and a zero-filled literal of the instruction's shape to fill.
   * NULL: such a custom call is UNIMPLEMENTED. */
  kiln_status (*custom_call)(void *user, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *operands, kiln_literal_t *result);
  void *custom_call_user;
  /* Tests of the evaluator's memory: every array value is a heap block of its own and a
   * collection runs before every instruction where one may (eval_heap.c); slower. */
  bool collect_eagerly;
} kiln_eval_options_t;

typedef struct kiln_eval_ctx kiln_eval_ctx_t;

/* Evaluates the module's entry computation on `args` (one literal per entry parameter,
 * shapes must be compatible). The result literal lives in `out_arena` (caller-owned; use
 * a fresh arena and destroy it when done with the result). */
kiln_status kiln_eval_module(const kiln_hlo_module_t *m, const kiln_eval_options_t *opts,
                             int num_args, kiln_literal_t *const *args, kiln_arena_t *out_arena,
                             kiln_literal_t **out_result);

/* ---- several participants (eval_collectives.c) ----
 *
 * kiln_eval_module_spmd runs the entry computation once per participant (replica r,
 * partition p; participant index r * num_partitions + p), each on its own thread with its
 * own replica-id / partition-id, and carries out every collective between them with XLA's
 * semantics. A collective's participants are resolved by XLA's CollectiveOpGroupMode:
 *   all-reduce, all-gather, reduce-scatter (and their -start forms):
 *     no channel_id                      -> cross-replica (groups list replica ids; one
 *                                            set of groups per partition)
 *     channel_id                         -> cross-replica-and-partition (groups list
 *                                            replica ids; each group takes every partition
 *                                            of those replicas, replica-major)
 *     channel_id, use_global_device_ids  -> flattened ids (r * num_partitions + p)
 *   all-to-all, collective-permute, collective-broadcast:
 *     no channel_id -> cross-replica; channel_id -> cross-partition (groups list partition
 *     ids; one set of groups per replica).
 * `{}` (or no replica_groups) is one group of every id. A participant's rank is its position
 * in its group. Reductions fold in rank order: ((v0 + v1) + v2) + ...; all-gather and
 * all-to-all concatenate in rank order; collective-broadcast copies rank 0's operand;
 * collective-permute's pairs name ids of the same space, a participant nobody sends to gets
 * zeros.
 * As many participants compute at once as the machine has cores; the others wait for a turn
 * at their start and after each collective they took part in (a participant gives its turn
 * back when it reaches a collective, after freeing what it no longer uses), so the memory in
 * use is a few participants' working sets plus the others' live values.
 * A participant waits at most timeout_ms for the others at each collective, counted from the
 * last turn any participant took (while others still take turns, the world moves); past it the
 * run fails with DEADLINE_EXCEEDED naming the collective and the participants missing. When one
 * participant fails, the others stop at their next collective and the first failure is
 * returned, annotated with its replica and partition.
 * Thread safety: the module is read by every participant at once and must not change during
 * the call; args and results belong to the caller. */
typedef struct kiln_eval_spmd_options {
  int num_replicas;   /* >= 1 */
  int num_partitions; /* >= 1 */
  /* (optional) num_replicas * num_partitions device ids, [r * num_partitions + p]; only
   * names participants in messages. NULL: the participant index. */
  const int64_t *device_assignment;
  int64_t timeout_ms;       /* 0: KILN_EVAL_COLLECTIVE_TIMEOUT_MS */
  kiln_eval_options_t base; /* replica_id / partition_id are set per participant */
} kiln_eval_spmd_options_t;

#define KILN_EVAL_COLLECTIVE_TIMEOUT_MS 30000

/* The smallest world the module's collectives fit: starts from the module's replica_count
 * and num_partitions attributes (1 when absent), grows replicas for the ids of cross-replica
 * (-and-partition) groups and collective-permutes without a channel, partitions for the
 * cross-partition ones, then partitions until the flattened ids fit (the SPMD partitioner
 * writes use_global_device_ids). INVALID_ARGUMENT for groups that do not parse. */
kiln_status kiln_eval_spmd_world_size(const kiln_hlo_module_t *m, int *num_replicas,
                                      int *num_partitions);

/* args[participant] holds that participant's num_args literals; out_results[participant]
 * (num_replicas * num_partitions entries, caller-provided) receives its result, allocated in
 * out_arena. On error every out_results entry is NULL. */
kiln_status kiln_eval_module_spmd(const kiln_hlo_module_t *m, const kiln_eval_spmd_options_t *opts,
                                  int num_args, kiln_literal_t *const *const *args,
                                  kiln_arena_t *out_arena, kiln_literal_t **out_results);

/* Evaluates one computation on arguments (used for calls, fusions, reducers, comparators). */
kiln_status kiln_eval_computation(kiln_eval_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                  int num_args, kiln_literal_t *const *args,
                                  kiln_literal_t **out_result);

/* ---- internal interface between the evaluator's files ---- */

struct kiln_eval_ctx {
  const kiln_eval_options_t *opts;
  kiln_arena_t *arena; /* all intermediate and result literals */
  /* rng-get-and-update-state and rng: total of the deltas applied so far (128-bit, low/high). */
  uint64_t rng_state_advanced_lo, rng_state_advanced_hi;
  int depth;           /* call nesting, bounded */
  /* Cached evaluation plans per computation (eval.c); created on first use, owned and freed
   * by whichever kiln_eval_module / kiln_eval_computation call found it NULL. */
  struct kiln_eval_plans *plans;
  /* Several participants (eval_collectives.c): NULL when evaluating alone. */
  struct kiln_eval_world *world;
  int participant;         /* this thread's index in world */
  kiln_ptrmap_t *coll_seq; /* collective instruction -> executions so far + 1 */
  /* Large values (kiln_eval_module: eval_heap.c; NULL: everything in `arena`), the frames
   * of the computations being evaluated (innermost first: what a collection keeps), and how
   * many instructions in flight hold values no frame records (collections wait for 0). */
  struct kiln_eval_heap *heap;
  struct kiln_eval_frame *frames;
  int collection_blocked;
};

/* ---- large values (eval_heap.c) ----
 * kiln_eval_module's array values of KILN_EVAL_HEAP_MIN_BYTES or more are blocks of their own,
 * freed by a collection between two instructions once no live value of any frame being
 * evaluated refers to them: the evaluator's memory is what the program keeps live, not
 * everything it computed. */
#define KILN_EVAL_HEAP_MIN_BYTES ((size_t)1 << 20)
typedef struct kiln_eval_heap kiln_eval_heap_t;
/* `limit`: 0 unlimited, else the most bytes live at once (an allocation past it fails; the
 * evaluator's arena has the same limit of its own: together up to twice it);
 * `eager`: kiln_eval_options_t.collect_eagerly. */
kiln_eval_heap_t *kiln_eval_heap_create(size_t limit, bool eager);
/* Whether array data of `bytes` goes to the heap. */
bool kiln_eval_heap_takes(const kiln_eval_heap_t *h, size_t bytes);
void kiln_eval_heap_destroy(kiln_eval_heap_t *h);
/* Zeroed, 16-byte aligned; NULL past the limit or when the allocator refuses. */
void *kiln_eval_heap_alloc(kiln_eval_heap_t *h, size_t bytes);
/* Enough was allocated since the last collection to run one. */
bool kiln_eval_heap_wants_collection(const kiln_eval_heap_t *h);
bool kiln_eval_heap_allocated_since_collection(const kiln_eval_heap_t *h);
/* Blocks are numbered in allocation order: kiln_eval_heap_free_since frees every block
 * allocated since kiln_eval_heap_serial returned `serial` (a while loop's iteration, once its
 * state is copied out: nothing else it allocated outlives it, even where no collection may
 * run). */
uint64_t kiln_eval_heap_serial(const kiln_eval_heap_t *h);
void kiln_eval_heap_free_since(kiln_eval_heap_t *h, uint64_t serial);
/* Called by an instruction in flight that holds nothing outside the frames (a collective about
 * to wait for its peers): frees what the frames no longer use, unless an instruction above it
 * holds values of its own. */
void kiln_eval_collect_before_waiting(kiln_eval_ctx_t *ctx);
/* A collection: begin, mark every live value (a pointer anywhere inside a block keeps it),
 * sweep (frees every unmarked block). */
void kiln_eval_heap_begin_collection(kiln_eval_heap_t *h);
void kiln_eval_heap_mark(kiln_eval_heap_t *h, const void *data);
void kiln_eval_heap_mark_literal(kiln_eval_heap_t *h, const kiln_literal_t *l);
void kiln_eval_heap_sweep(kiln_eval_heap_t *h);

/* kiln_eval_module for participant `participant` of `world` (NULL: alone). */
kiln_status kiln_eval_module_participant(const kiln_hlo_module_t *m,
                                         const kiln_eval_options_t *opts,
                                         struct kiln_eval_world *world, int participant,
                                         int num_args, kiln_literal_t *const *args,
                                         kiln_arena_t *out_arena, kiln_literal_t **out_result);

/* Largest call nesting (call, fusion, while, reducers, ...) before RESOURCE_EXHAUSTED. */
#define KILN_EVAL_MAX_DEPTH 64

/* ---- helpers shared by the evaluator's files (eval.c, eval_elementwise.c) ---- */

/* Allocates a zero-filled literal of `shape` (array or tuple, recursively) in ctx->arena;
 * RESOURCE_EXHAUSTED when the arena refuses. */
kiln_status kiln_eval_literal_alloc(kiln_eval_ctx_t *ctx, kiln_shape_t *shape,
                                    kiln_literal_t **out);
/* kiln_eval_literal_alloc returning the literal, NULL when refused. */
kiln_literal_t *kiln_eval_literal_make(kiln_eval_ctx_t *ctx, kiln_shape_t *shape);
/* A literal of `shape` sharing `src`'s data (same element count and storage size). */
kiln_status kiln_eval_literal_view(kiln_eval_ctx_t *ctx, kiln_shape_t *shape,
                                   const kiln_literal_t *src, kiln_literal_t **out);
/* Deep copy (shape included) into `a`; NULL when the arena refuses. */
kiln_literal_t *kiln_eval_literal_clone(kiln_arena_t *a, const kiln_literal_t *l);
/* Reads an integer scalar of any integer type (used for indices); unsigned values above
 * INT64_MAX read as INT64_MAX. */
int64_t kiln_eval_scalar_index(const kiln_literal_t *l);

/* Tuple literal of `n` borrowed elements. */
kiln_status kiln_eval_tuple_make(kiln_eval_ctx_t *ctx, kiln_shape_t *shape, int n,
                                 kiln_literal_t *const *elems, kiln_literal_t **out);
/* The same value under the instruction's shape (arrays share data; tuples share elements). */
kiln_status kiln_eval_relabel(kiln_eval_ctx_t *ctx, kiln_shape_t *shape, kiln_literal_t *v,
                              kiln_literal_t **out);

/* Element access on raw literal storage of type `t` (eval_elementwise.c).
 * get_f64: the value (complex: real part). get_s64: integers sign- or zero-extended from
 * their width; floats converted like `convert` (NaN -> 0, saturating). set_f64: floats round
 * to nearest even; integers follow `convert` (NaN -> 0, saturate); pred = (v != 0).
 * set_s64: integers wrap to their width; floats round. */
double kiln_eval_elem_get_f64(kiln_elem_type_t t, const void *data, int64_t i);
int64_t kiln_eval_elem_get_s64(kiln_elem_type_t t, const void *data, int64_t i);
void kiln_eval_elem_set_f64(kiln_elem_type_t t, void *data, int64_t i, double v);
void kiln_eval_elem_set_s64(kiln_elem_type_t t, void *data, int64_t i, int64_t v);
/* The key under which a TOTALORDER compare orders element i of float type `t` (as the
 * compiled compare does: -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN, NaNs by payload),
 * from its stored bits, so no conversion quiets or drops a NaN's payload: the bits with the
 * non-sign bits flipped for negative values; f8e8m0fnu (no sign) its bits; the fnuz types'
 * one NaN (0x80) after every number; f4e2m1fn (no NaN) by value. */
int64_t kiln_eval_elem_total_order_key(kiln_elem_type_t t, const void *data, int64_t i);

/* When `c` is `ROOT op(p0, p1)` (either order) over its two scalar parameters of type `t`,
 * op one of add, multiply, maximum, minimum, and, or (and/or on integers and pred only;
 * never complex): the op, with *swapped (may be NULL) set when it reads parameter 1 first;
 * else KILN_OP_COUNT. The reductions' and the scalar functions' fast paths. */
kiln_hlo_opcode_t kiln_eval_binary_reducer(const kiln_hlo_computation_t *c, kiln_elem_type_t t,
                                           bool *swapped);

/* One step of a float add / multiply / maximum / minimum, `x` the lhs: the evaluator's
 * semantics everywhere (elementwise, reductions, scatter combiners). maximum / minimum are
 * IEEE 754-2019's (base/ieee_minmax.h): a NaN operand wins (the lhs first) and -0 < +0
 * (fuzz-2848215: max(-0, +0) was -0 here, +0 compiled, and
 * atan2 of it told them apart). kiln_eval_fstep in double, kiln_eval_fstepf in float (one
 * body, so the two cannot drift apart). */
#define KILN_EVAL_FSTEP_DEFINE(name, T, max, min)        \
  static inline T name(kiln_hlo_opcode_t op, T x, T y) { \
    switch (op) {                                        \
      case KILN_OP_ADD:                                  \
        return x + y;                                    \
      case KILN_OP_MULTIPLY:                             \
        return x * y;                                    \
      case KILN_OP_MAXIMUM:                              \
        return max(x, y);                                \
      default:                                           \
        return min(x, y);                                \
    }                                                    \
  }
KILN_EVAL_FSTEP_DEFINE(kiln_eval_fstep, double, kiln_ieee_max, kiln_ieee_min)
KILN_EVAL_FSTEP_DEFINE(kiln_eval_fstepf, float, kiln_ieee_maxf, kiln_ieee_minf)
#undef KILN_EVAL_FSTEP_DEFINE

/* Calling a scalar computation (reducer, comparator, map body) many times without growing
 * ctx->arena: intermediates go to a scratch arena that is recycled. Arguments and results
 * are element pointers into literal storage (`arg_types[i]` gives each argument's type; the
 * result is a scalar or a tuple of scalars whose elements are copied to `results[i]`). */
typedef struct kiln_eval_scalar_fn {
  kiln_eval_ctx_t *ctx;
  const kiln_hlo_computation_t *comp;
  kiln_arena_t scratch;
  int64_t calls_since_reset;
  /* A computation that is one add / multiply / maximum / minimum of its two f32 (f64)
   * parameters runs directly, with the elementwise evaluator's expressions (the same bits):
   * the op (KILN_OP_COUNT: none), its type, and whether it reads parameter 1 first. */
  kiln_hlo_opcode_t fast_op;
  kiln_elem_type_t fast_type;
  bool fast_swapped;
} kiln_eval_scalar_fn_t;

void kiln_eval_scalar_fn_init(kiln_eval_scalar_fn_t *fn, kiln_eval_ctx_t *ctx,
                              const kiln_hlo_computation_t *comp);
kiln_status kiln_eval_scalar_fn_call(kiln_eval_scalar_fn_t *fn, int num_args,
                                     const kiln_elem_type_t *arg_types,
                                     const void *const *args, int num_results,
                                     void *const *results);
/* acc[e] = fn(acc[e], src[e]) for e < n, both arrays of `type`: the fast path's loop runs
 * without a call per element (all-reduce and reduce-scatter fold each participant's
 * contribution this way); any other element goes through kiln_eval_scalar_fn_call. */
kiln_status kiln_eval_scalar_fn_fold(kiln_eval_scalar_fn_t *fn, kiln_elem_type_t type, void *acc,
                                     const void *src, int64_t n);
void kiln_eval_scalar_fn_destroy(kiln_eval_scalar_fn_t *fn);

/* Each handler evaluates one instruction given its operands' values and writes the result
 * into *out (allocated in ctx->arena). Handlers live in the eval_*.c files. */
typedef kiln_status (*kiln_eval_handler_fn)(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                            kiln_literal_t *const *operands, kiln_literal_t **out);

/* eval_elementwise.c: every elementwise opcode (unary, binary, compare, select, clamp,
 * convert, bitcast-convert, reduce-precision, complex/real/imag, map is in eval.c). */
kiln_status kiln_eval_elementwise(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                  kiln_literal_t *const *operands, kiln_literal_t **out);
/* eval_data.c: broadcast, reshape, transpose, bitcast, copy, slice, dynamic-slice,
 * dynamic-update-slice, concatenate, pad, reverse, iota. */
kiln_status kiln_eval_data_movement(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                    kiln_literal_t *const *operands, kiln_literal_t **out);
/* eval_reduce.c: reduce, reduce-window, select-and-scatter (call reducers through
 * kiln_eval_computation). */
kiln_status kiln_eval_reduction(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                kiln_literal_t *const *operands, kiln_literal_t **out);
/* eval_dot_conv.c: dot, convolution. */
kiln_status kiln_eval_dot_conv(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               kiln_literal_t *const *operands, kiln_literal_t **out);
/* eval_gather_scatter.c: gather, scatter. */
kiln_status kiln_eval_gather_scatter(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                     kiln_literal_t *const *operands, kiln_literal_t **out);
/* eval_sort.c: sort (multi-operand, stable when asked), topk. */
kiln_status kiln_eval_sort(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                           kiln_literal_t *const *operands, kiln_literal_t **out);
/* rng-get-and-update-state's step (eval_extra.c): the current 128-bit state {low, high} (XLA's
 * initial value offset by opts->rng_seed, plus what was taken before) into `state`, then
 * advanced by `delta`. `rng` takes its words' key and counter from it too. */
void kiln_eval_rng_state_take(kiln_eval_ctx_t *ctx, int64_t delta, uint64_t state[2]);
/* eval_rng.c: rng-bit-generator (three-fry and philox, bit-exact with XLA), rng. */
kiln_status kiln_eval_rng(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                          kiln_literal_t *const *operands, kiln_literal_t **out);
/* eval_linalg.c: cholesky, triangular-solve, fft. */
kiln_status kiln_eval_linalg(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *operands, kiln_literal_t **out);

/* eval_collectives.c: all-reduce, all-gather, reduce-scatter, all-to-all,
 * collective-permute, collective-broadcast and their -start/-done forms. */
kiln_status kiln_eval_collective(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                 kiln_literal_t *const *operands, kiln_literal_t **out);

/* eval_extra.c: rng-get-and-update-state, batch-norm-training/-inference/-grad, scan,
 * ragged-dot, scaled-dot. */
kiln_status kiln_eval_extra(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                            kiln_literal_t *const *operands, kiln_literal_t **out);

/* eval_special.c: digamma, Hurwitz zeta and polygamma in long double, with XLA's CHLO
 * special values (NaN at digamma's poles, zeta's and polygamma's domain rules). */
double kiln_eval_digamma(double x);
double kiln_eval_zeta(double s, double q);
double kiln_eval_polygamma(double n, double x);
/* exp(-|x|) I1(x): the power series up to |x| = 40, Hankel's asymptotic series past it. */
double kiln_eval_bessel_i1e(double x);

/* eval_custom_call.c: XLA's well-known custom-call targets (identity ones, AllocateBuffer,
 * xla_builder.* calls, cuda_threefry2x32), then options->custom_call. */
kiln_status kiln_eval_custom_call(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                  kiln_literal_t *const *operands, kiln_literal_t **out);
/* A cuBLAS gemm custom call's backend_config (XLA's GemmBackendConfig as JSON, bare or under
 * "gemm_backend_config"): result = alpha * dot(a, b) [+ beta * c], then the epilogue. */
typedef struct kiln_gemm_config {
  double alpha, beta;
  kiln_dot_dnums_t dnums; /* lists point into `dims` */
  int64_t dims[32];
  bool relu; /* epilogue RELU (DEFAULT: none) */
} kiln_gemm_config_t;
/* Parses `json`; false for a form kiln does not take (other epilogues, complex alpha, more
 * than 8 dimensions per list). */
bool kiln_eval_gemm_config(const char *json, kiln_gemm_config_t *out);
/* Whether `target` is __cublas$gemm or __cublas$lt$matmul. */
bool kiln_eval_is_gemm_target(const char *target);
/* XLA's annotation targets that are the identity on one device (Sharding, SPMD*, MoveTo*,
 * Pin/Unpin, annotate_device_placement, SetBound); the pass custom_call_rewrite uses the same
 * list. */
bool kiln_eval_is_identity_target(const char *target);
/* UNIMPLEMENTED naming the call and both shapes when `in` calls one of those targets with a
 * result shaped unlike its operand (SPMDShardToFullShape of a shard: the SPMD partitioner's
 * work, not kiln's); NULL otherwise. The evaluator and thunk emission both say it. */
kiln_status kiln_eval_identity_target_reshapes(const kiln_hlo_instruction_t *in);
/* jaxlib's solver targets, their opaque descriptors decoded: cusolver_potrf (lower),
 * cublas_trsm_batched (side, lower, transpose 0/1/2 = N/T/C, unit diagonal),
 * cublas_getrf_batched (no options); and the typed-FFI LAPACK targets JAX calls on CPU,
 * lapack_{s,d,c,z}{potrf,trsm,getrf}_ffi, their backend_config dictionary's ASCII flags
 * decoded (uplo 'L'/'U', side 'L'/'R', trans_x 'N'/'T'/'C', diag 'U'/'N'). Their forms:
 * potrf (a) -> (a, info), getrf (a) -> (lu, 1-based pivots, info), trsm (a, b, alpha) -> x
 * (alpha scales b; the result an array, not a tuple). False for other targets or a short
 * descriptor. */
typedef enum { KILN_SOLVER_POTRF, KILN_SOLVER_TRSM, KILN_SOLVER_GETRF } kiln_solver_kind_t;
typedef struct kiln_solver_config {
  kiln_solver_kind_t kind;
  bool lower, left_side, unit_diagonal;
  int transpose;
} kiln_solver_config_t;
bool kiln_eval_solver_config(const kiln_hlo_instruction_t *in, kiln_solver_config_t *out);
/* The integer value of `name` in a backend_config dictionary's text (`{uplo = 76 : ui8, ...}`,
 * the form LAPACK's typed-FFI targets carry their ASCII flags in); -1 when absent. */
int kiln_eval_dict_flag(const char *backend_config, const char *name);
/* The same for any integer (`low = 1 : i32`): false when absent or not a number. */
bool kiln_eval_dict_int(const char *backend_config, const char *name, int64_t *out);
/* UNIMPLEMENTED naming the call when `in` calls one of those solver, QR or eigh targets (which
 * kiln rewrites or runs itself only for real f32/f64 matrices); NULL for other targets.
 * Thunk emission says it for a call left over. */
kiln_status kiln_eval_solver_refusal(const kiln_hlo_instruction_t *in);
/* Element i of a real or complex literal as a double complex (a real one's imaginary part 0),
 * and its store (a real literal keeps the real part). */
double _Complex kiln_eval_get_complex(const kiln_literal_t *l, int64_t i);
void kiln_eval_set_complex(kiln_literal_t *l, int64_t i, double _Complex v);
/* eval_host_targets.c: the targets kiln's host runtime implements itself
 * (`__onednn$layernorm`, `GetRngSeed` = options->rng_seed, `cusolver_geqrf`,
 * `cusolver_orgqr`); *handled false for any other target. */
kiln_status kiln_eval_host_target(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                  kiln_literal_t *const *operands, kiln_literal_t **out,
                                  bool *handled);
/* XLA:CPU's oneDNN layer norm (`__onednn$layernorm`: input, scale, shift; normalized over
 * the last dimension; its JSON backend_config's onednn_layer_norm_config): the epsilon
 * (`epsilon_typed`, the f32's bits; 0 when absent, as XLA reads it). False with a reason in
 * *why for shapes or a rescale kiln does not implement. */
bool kiln_eval_layer_norm_config(const kiln_hlo_instruction_t *instr, float *epsilon,
                                 const char **why);
/* The matrix element types of the LAPACK-like built-ins (QR, eigh, SVD): f32, f64, c64, c128;
 * and a complex type's part type (f32 for c64, f64 for c128; other types themselves). */
bool kiln_eval_solver_matrix_type(kiln_elem_type_t t);
kiln_elem_type_t kiln_eval_real_part_type(kiln_elem_type_t t);
/* Whether `target` is a Householder QR target: cusolver_geqrf / lapack_{s,d,c,z}geqrf_ffi
 * (*orgqr false) or cusolver_orgqr / lapack_{s,d,c,z}orgqr_ffi (*orgqr true). */
bool kiln_eval_is_qr_target(const char *target, bool *orgqr);
/* cusolver_geqrf ((a) -> (a, tau, info, workspace)) / cusolver_orgqr ((a, tau) -> (q, info,
 * workspace)), and LAPACK's typed-FFI forms (geqrf (a) -> (a, tau), orgqr / ungqr (a, tau) ->
 * q), on f32/f64/c64/c128 [..., m, n]: the batch, m, n and the reflector count k (min(m, n) for
 * geqrf; tau's last dimension for orgqr, with k <= n <= m). False when the operands or results do
 * not have these forms. */
bool kiln_eval_qr_shapes(const kiln_hlo_instruction_t *instr, bool orgqr, int64_t *batch,
                         int64_t *m, int64_t *n, int64_t *k);
/* Whether `target` is jaxlib's lapack_{s,d}syevd_ffi or lapack_{c,z}heevd_ffi. */
bool kiln_eval_is_eigh_target(const char *target);
/* lapack_{s,d}syevd_ffi / lapack_{c,z}heevd_ffi (jnp.linalg.eigh on CPU): (a [..., n, n]) ->
 * (eigenvectors [..., n, n] as columns, eigenvalues [..., n] ascending in a's real part type,
 * info [...]), its `mhlo.backend_config` flags decoded (mode 'V' = vectors / 'N', uplo 'L' /
 * 'U'); computed by the cyclic Jacobi method of base/jacobi_eigh.h (base/zlinalg.h for complex)
 * on the evaluator, and on the host where LAPACK's ?syevd is not at hand. False for other
 * targets or forms. */
bool kiln_eval_eigh_config(const kiln_hlo_instruction_t *instr, bool *lower, bool *vectors,
                           int64_t *batch, int64_t *n);
/* jaxlib's lapack_{s,d,c,z}gesdd_ffi (jnp.linalg.svd on CPU): (a [..., m, n]) -> (a, s [...,
 * k] descending in a's real part type, u [..., m, ucols], vt [..., vrows, n], info [...]) with
 * k = min(m, n) and mode 'A' (ucols = m, vrows = n), 'S' (both k) or 'N' (no vectors: u and vt
 * zeros); computed by the one-sided Jacobi SVD of base/jacobi_eigh.h (base/zlinalg.h for
 * complex) on the evaluator, and on the host where LAPACK's ?gesdd is not at hand. False for
 * other targets or forms. */
bool kiln_eval_svd_config(const kiln_hlo_instruction_t *instr, bool *vectors, int64_t *batch,
                          int64_t *m, int64_t *n, int64_t *ucols, int64_t *vrows);
/* Whether `target` is jaxlib's lapack_{s,d,c,z}gesdd_ffi or gesvd_ffi (the same form). */
bool kiln_eval_is_svd_target(const char *target);
/* jaxlib's lapack_{s,d}gtsv_ffi (lax.linalg.tridiagonal_solve on CPU): (dl, d, du [..., n],
 * b [..., n, nrhs]) -> (dl, d, du passed through, x [..., n, nrhs], info [...]), dl[i] being
 * A[i][i-1] (dl[0] unused) and du[i] A[i][i+1]; solved by base/gtsv.h on the evaluator and
 * the host alike. False for other targets or forms. */
bool kiln_eval_gtsv_config(const kiln_hlo_instruction_t *instr, int64_t *batch, int64_t *n,
                           int64_t *nrhs);
/* Whether `target` is jaxlib's lapack_{s,d,c,z}gtsv_ffi. */
bool kiln_eval_is_gtsv_target(const char *target);
/* jaxlib's lapack_{s,d,c,z}geev_ffi (jnp.linalg.eig on CPU): (a [..., n, n]) -> real a: (wr,
 * wi [..., n], vl, vr [..., n, n] complex of a's precision, info [...]); complex a: (w [..., n],
 * vl, vr, info), `mhlo.backend_config` flags compute_left / compute_right 'V' or 'N' (vectors
 * not computed are zeros); computed by base/zlinalg.h's kiln_zgeev / kiln_real_geev on the
 * evaluator and the host alike. False for other targets or forms. */
bool kiln_eval_geev_config(const kiln_hlo_instruction_t *instr, bool *left, bool *right,
                           int64_t *batch, int64_t *n);
/* Whether `target` is jaxlib's lapack_{s,d,c,z}geev_ffi. */
bool kiln_eval_is_geev_target(const char *target);
/* jaxlib's lapack_{s,d,c,z}gees_ffi (jax.scipy.linalg.schur; sqrtm's complex one): (a [..., n,
 * n]) -> (t, vs [..., n, n], w [..., n] (a real a: wr and wi), sdim [...], info [...]), flags
 * mode 'V' / 'N' (vs zeros) and sort 'N'; base/zlinalg.h's kiln_zgees / kiln_real_gees on the
 * evaluator and the host. False for other targets or forms. */
bool kiln_eval_gees_config(const kiln_hlo_instruction_t *instr, bool *vectors, int64_t *batch,
                           int64_t *n);
/* Whether `target` is jaxlib's lapack_{s,d,c,z}gees_ffi. */
bool kiln_eval_is_gees_target(const char *target);
/* jaxlib's lapack_{s,d,c,z}gehrd_ffi (jax.lax.linalg.hessenberg): (a [..., n, n]) -> (a, tau
 * [..., n - 1], info [...]) with attributes low / high (LAPACK's 1-based ilo / ihi; *lo and
 * *hi 0-based); and lapack_{s,d}sytrd_ffi / lapack_{c,z}hetrd_ffi (jax.lax.linalg.tridiagonal):
 * (a) -> (a, d [..., n], e [..., n - 1] in a's real part type, tau [..., n - 1], info), flag
 * uplo. base/zlinalg.h's Householder reductions on the evaluator and the host. False for
 * other targets or forms. */
bool kiln_eval_gehrd_config(const kiln_hlo_instruction_t *instr, int64_t *lo, int64_t *hi,
                            int64_t *batch, int64_t *n);
bool kiln_eval_sytrd_config(const kiln_hlo_instruction_t *instr, bool *lower, int64_t *batch,
                            int64_t *n);
/* Whether `target` is jaxlib's lapack_?gehrd_ffi, or ?sytrd_ffi / ?hetrd_ffi. */
bool kiln_eval_is_gehrd_target(const char *target);
bool kiln_eval_is_sytrd_target(const char *target);
/* Why kiln refuses a gees call kiln_eval_gees_config rejected. */
#define KILN_EVAL_GEES_FORMS                                                            \
  "kiln takes f32/f64/c64/c128 [..., n, n] matrices, mode 'V' or 'N' and sort 'N' (no " \
  "eigenvalue selection)"
/* xla_builder.matrix.Einsum's backend_config "ab,bc->ac" (one or two operands, letters):
 * each operand's labels and the result's; false when malformed or the ranks differ. */
#define KILN_EINSUM_MAX_LABELS 16
/* xla_builder.prng.ScramblePhiloxKey's fixed Philox key. */
#define KILN_EVAL_PHILOX_SCRAMBLE_KEY0 0x3ec8f720u
#define KILN_EVAL_PHILOX_SCRAMBLE_KEY1 0x02461e29u
/* TopK / PartialReduce: a comparator whose root is compare(param 0, param 1) orders GT
 * (*largest) or LT; false for any other comparator. */
bool kiln_eval_topk_comparator(const kiln_hlo_computation_t *c, bool *largest);
bool kiln_eval_einsum_spec(const kiln_hlo_instruction_t *in,
                           char labels[][KILN_EINSUM_MAX_LABELS + 1], char *result);

/* eval_rng.c: Threefry2x32, 20 rounds. */
void kiln_eval_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]);

#endif /* KILN_EVAL_EVAL_H_ */
