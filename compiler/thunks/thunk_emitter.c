/* Thunk emission (thunk_emitter.h). */
#include "base/clock.h"
#include "compiler/thunks/thunk_emitter.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/byte_io.h"
#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/backend/host_jit.h"
#include "compiler/backend/nvptx.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/literal_layout.h"
#include "compiler/hlo/opcode.h"
#include "compiler/passes/dataflow.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/passes/gemm_epilogue.h"
#include "compiler/thunks/collective_emitter.h"
#include "compiler/thunks/custom_call_emitter.h"

/* XLA's initial value of the rng-get-and-update-state counter (CPU and GPU backends). */
#define RNG_STATE_INITIAL_VALUE 0x7012395ull

/* The executable's generator state: a 128-bit counter, little-endian words. Shared by
 * every execution, so concurrent executions take their values under the mutex: their
 * sequences interleave, but every call gets a value of its own. */
typedef struct rng_state {
  pthread_mutex_t mu;
  uint64_t word[2];
} rng_state_t;

/* The description's keepalive destructor: called through void (*)(void *), so it takes one
 * (calling kiln_host_jit_destroy through a cast pointer is undefined; clang's UBSan says so). */
static void host_jit_free(void *jit) {
  kiln_host_jit_destroy(jit);
}

static void desc_destroy_on_unwind(void *d) {
  kiln_executable_desc_destroy(d);
}

static void rng_state_free(void *p) {
  rng_state_t *r = p;
  pthread_mutex_destroy(&r->mu);
  kiln_free(r);
}

typedef struct rng_state_call {
  rng_state_t *state;
  int64_t delta;
} rng_state_call_t;

static kiln_status rng_state_fn(void *ctx, kiln_stream_t *stream, const kiln_devptr_t *operands,
                                int num_operands, const kiln_devptr_t *results, int num_results) {
  const rng_state_call_t *c = ctx;
  if (num_results != 1) return KILN_ERR_INTERNAL("rng-get-and-update-state: %d results", num_results);
  uint64_t staging[2];
  rng_state_t *r = c->state;
  kiln_mutex_lock(&r->mu);
  staging[0] = r->word[0];
  staging[1] = r->word[1];
  uint64_t dlo = (uint64_t)c->delta, dhi = c->delta < 0 ? UINT64_MAX : 0;
  uint64_t lo = r->word[0] + dlo;
  r->word[1] += dhi + (lo < dlo ? 1 : 0);
  r->word[0] = lo;
  kiln_mutex_unlock(&r->mu);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_memcpy_h2d(stream, results[0], staging, 16));
  /* The staging words live on this stack frame: wait until the copy ran. */
  return kiln_stream_synchronize(stream);
}

typedef struct pending_kernel {
  kiln_kir_module_t *kir; /* owned */
  kiln_affine_ctx_t *ctx; /* owned (the kernel-IR maps live in it), or NULL */
  kiln_thunk_t *thunk;    /* its launch (owned by a thunk sequence) */
} pending_kernel_t;

typedef struct emitter {
  const kiln_hlo_module_t *m;
  const kiln_buffer_assignment_t *ba;
  kiln_thunk_emit_options_t opts;
  kiln_executable_desc_t *d;
  kiln_thunk_emit_stats_t *stats;
  kiln_ptrmap_t constants; /* literal -> allocation index + 1 */
  kiln_host_jit_t *jit;    /* HOST */
  /* Kernels emitted and not compiled yet: all of them are compiled together at the end
   * (kiln_kir_compile_*_batch: deduplicated, cached, in parallel). */
  KILN_VEC(pending_kernel_t) pending;
  int counter;
  rng_state_t *rng; /* created on first use, owned by the description */
  int num_replicas, num_partitions; /* the world collectives are resolved for */
  bool split_collectives;           /* async pairs may split (!synchronous_collectives) */
} emitter_t;

/* ---- slices ------------------------------------------------------------------------------ */

static kiln_status leaf_slice(emitter_t *E, const kiln_hlo_instruction_t *in, int leaf,
                              kiln_slice_t *out) {
  kiln_buffer_slice_t bs;
  if (!kiln_buffer_assignment_slice_at(E->ba, in, leaf, &bs) || bs.allocation < 0)
    return KILN_ERR_INTERNAL("%s: leaf %d has no buffer slice", in->name, leaf);
  *out = kiln_slice_make(bs.allocation, bs.offset, bs.size);
  return NULL;
}

static bool leaf_is_array(const kiln_hlo_instruction_t *in, int leaf) {
  const kiln_shape_t *s = kiln_shape_leaf(in->shape, leaf, NULL);
  return s && kiln_shape_is_array(s);
}

static bool same_slice(kiln_slice_t a, kiln_slice_t b) {
  return a.allocation == b.allocation && a.offset == b.offset;
}

/* A device-to-device copy of leaf `sl` of `src` to leaf `dl` of `dst` unless they share the
 * slice already. */
static kiln_status copy_leaf(emitter_t *E, kiln_thunk_seq_t *seq, const char *why,
                             const kiln_hlo_instruction_t *src, int sl,
                             const kiln_hlo_instruction_t *dst, int dl) {
  if (!leaf_is_array(dst, dl)) return NULL;
  kiln_slice_t a, b;
  KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, src, sl, &a));
  KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, dst, dl, &b));
  if (same_slice(a, b)) return NULL;
  if (a.size != b.size)
    return KILN_ERR_INTERNAL("%s: copying %lld bytes of %s into %lld bytes of %s", why,
                             (long long)a.size, src->name, (long long)b.size, dst->name);
  if (a.size == 0) return NULL;
  char name[256];
  snprintf(name, sizeof(name), "%s", why);
  kiln_thunk_seq_push(seq, kiln_thunk_copy_create(name, KILN_COPY_D2D, a, b, NULL, a.size));
  E->stats->copies++;
  return NULL;
}

/* Copies every leaf of `src` to the same leaf of `dst` (same shape tree). */
static kiln_status copy_all_leaves(emitter_t *E, kiln_thunk_seq_t *seq, const char *why,
                                   const kiln_hlo_instruction_t *src,
                                   const kiln_hlo_instruction_t *dst) {
  int n = kiln_shape_num_leaves(dst->shape);
  if (kiln_shape_num_leaves(src->shape) != n)
    return KILN_ERR_INTERNAL("%s: %s and %s have different tuple trees", why, src->name,
                             dst->name);
  for (int l = 0; l < n; l++) KILN_RETURN_IF_ERROR_PLAIN(copy_leaf(E, seq, why, src, l, dst, l));
  return NULL;
}

/* Leaves of all operands, in order, copied to the leaves of the output (an optimization
 * barrier). */
static kiln_status forward_operands(emitter_t *E, kiln_thunk_seq_t *seq,
                                    const kiln_hlo_instruction_t *in, int num_operands) {
  int out_leaves = kiln_shape_num_leaves(in->shape), k = 0;
  for (int o = 0; o < num_operands; o++) {
    const kiln_hlo_instruction_t *op = in->operands[o];
    int n = kiln_shape_num_leaves(op->shape);
    for (int l = 0; l < n; l++, k++) {
      if (k >= out_leaves || !leaf_is_array(op, l)) continue;
      KILN_RETURN_IF_ERROR_PLAIN(copy_leaf(E, seq, in->name, op, l, in, k));
    }
  }
  if (k != out_leaves)
    return KILN_ERR_UNIMPLEMENTED(
        "%s (%s): %d operand leaves for %d output leaves; only the "
        "identity form is supported",
        in->name, kiln_hlo_opcode_name(in->opcode), k, out_leaves);
  return NULL;
}

/* ---- kernels ----------------------------------------------------------------------------- */

static kiln_status constant_allocation(emitter_t *E, const kiln_hlo_instruction_t *c,
                                       int32_t *out) {
  const kiln_literal_t *lit = c->literal;
  if (lit && lit->unknown) return kiln_hlo_elided_constant_error(c);
  if (!lit || !lit->data) return KILN_ERR_INTERNAL("constant %s has no literal", c->name);
  void *known = kiln_ptrmap_get(&E->constants, lit);
  if (known) {
    *out = (int32_t)((intptr_t)known - 1);
    return NULL;
  }
  kiln_exec_allocation_t a = {0};
  a.kind = KILN_EXEC_ALLOC_CONSTANT;
  a.size = (uint64_t)kiln_shape_byte_size(c->shape);
  a.data = kiln_calloc(a.size ? a.size : 1, 1);
  kiln_literal_write_physical(lit, c->shape, a.data);
  *out = kiln_executable_desc_add_allocation(E->d, &a);
  kiln_ptrmap_put(&E->constants, lit, (void *)(intptr_t)(*out + 1));
  E->stats->constants++;
  return NULL;
}

/* Takes one kernel of a chain for compilation at the end (compile_pending); fills the
 * launch dimensions and the kernel's name (CUDA: the symbol the batch compiles it under). */
static kiln_status take_kernel(emitter_t *E, kiln_codegen_kernel_t *k, kiln_launch_dims_t *dims,
                               char *kname, size_t kname_n) {
  const kiln_kir_func_t *kf = kiln_kir_module_kernel(k->kir);
  if (!kf) return KILN_ERR_INTERNAL("kernel module %s has no kernel", k->kir->name);
  memset(dims, 0, sizeof(*dims));
  for (int a = 0; a < 3; a++) {
    dims->grid[a] = (uint32_t)(kf->grid[a] > 0 ? kf->grid[a] : 1);
    dims->block[a] = (uint32_t)(kf->block[a] > 0 ? kf->block[a] : 1);
  }
  /* Host kernels run num_blocks blocks (x fastest); the grid is kept for dumps. */
  if (E->opts.target == KILN_TARGET_HOST) {
    snprintf(kname, kname_n, "%s", kf->name);
  } else {
    char sym[64];
    kiln_kir_kernel_symbol(k->kir, sym);
    snprintf(kname, kname_n, "%s", sym);
  }
  pending_kernel_t p = {k->kir, k->ctx, NULL};
  k->kir = NULL;
  k->ctx = NULL;
  kiln_vec_push(&E->pending, p);
  return NULL;
}

/* Whether kernel `x` (of a chain sharing `args`) only copies inputs to outputs that buffer
 * assignment put in the same slices: launching it would change nothing. */
static bool copies_in_place(const kiln_codegen_kernel_t *x, const kiln_kernel_arg_t *args) {
  if (!x->identity_inputs) return false;
  for (int o = 0; o < x->num_outputs; o++) {
    const kiln_slice_t *in = &args[x->identity_inputs[o]].slice;
    const kiln_slice_t *out = &args[x->num_inputs + o].slice;
    if (in->allocation != out->allocation || in->offset != out->offset || in->size != out->size)
      return false;
  }
  return true;
}

/* Whether every array leaf of `s` has no elements. */
static bool all_leaves_empty(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      if (!all_leaves_empty(s->elements[i])) return false;
    return true;
  }
  return kiln_shape_num_elements(s) == 0;
}

/* The kernel's scratch tensors: one temporary allocation of their own (every execution
 * context gets its copy, so concurrent runs do not share it), each tensor at an offset
 * aligned to KILN_SCRATCH_ALIGN. */
#define KILN_SCRATCH_ALIGN 256
static void scratch_args(emitter_t *E, const kiln_codegen_kernel_t *k, kiln_kernel_arg_t *args) {
  kiln_exec_allocation_t a = {0};
  a.kind = KILN_EXEC_ALLOC_TEMP;
  int32_t ai = kiln_executable_desc_add_allocation(E->d, &a);
  int64_t offset = 0;
  for (int i = 0; i < k->num_scratch; i++) {
    offset = (offset + KILN_SCRATCH_ALIGN - 1) / KILN_SCRATCH_ALIGN * KILN_SCRATCH_ALIGN;
    int64_t bytes = kiln_shape_byte_size(k->scratch[i]);
    args[i] = kiln_kernel_arg_slice(kiln_slice_make(ai, offset, bytes));
    offset += bytes;
  }
  E->d->allocations[ai].size = (uint64_t)offset;
}

static kiln_gemm_types_t gemm_types(const emitter_t *E);
static kiln_status emit_gemm_thunk(emitter_t *E, kiln_thunk_seq_t *seq,
                                   const kiln_hlo_instruction_t *fusion,
                                   const kiln_hlo_instruction_t *dot,
                                   const kiln_gemm_epilogue_match_t *e,
                                   const kiln_hlo_instruction_t *out);

static kiln_status emit_fusion(emitter_t *E, kiln_thunk_seq_t *seq,
                               const kiln_hlo_instruction_t *in) {
  const kiln_hlo_computation_t *fc = kiln_hlo_instruction_called(in, "calls");
  if (!fc) return KILN_ERR_INVALID("fusion %s calls no computation", in->name);
  /* Nothing to write (a zero-sized output): no kernel, as XLA emits none. */
  if (all_leaves_empty(in->shape)) return NULL;
  /* A gemm with its epilogue (gemm_epilogue_fusion): one library call. */
  kiln_gemm_epilogue_match_t ge;
  if (kiln_gemm_epilogue_match_fusion(in, gemm_types(E), &ge))
    return emit_gemm_thunk(E, seq, in, ge.dot, &ge, in);
  char kname[128];
  snprintf(kname, sizeof(kname), "k%d_%.100s", E->counter++, in->name);
  kiln_codegen_sanitize_name(kname);
  kiln_codegen_compile_options_t co = {0};
  co.kernel_name = kname;
  co.dump_dir = E->opts.dump_dir;
  co.strict_precision = E->opts.strict_precision;
  co.deterministic = E->opts.deterministic;
  co.host_target = E->opts.target == KILN_TARGET_HOST;
  kiln_codegen_kernel_t k;
  double t0 = kiln_clock_ms();
  KILN_RETURN_IF_ERROR(kiln_codegen_kernel_emit(fc, &co, &k), "while emitting fusion %s", in->name);
  E->stats->codegen_ms += kiln_clock_ms() - t0;
  E->stats->fusions++;

  int nout = kiln_shape_num_leaves(in->shape);
  int nargs = k.num_inputs + nout + k.num_scratch;
  kiln_kernel_arg_t *args = kiln_calloc((size_t)nargs + 1, sizeof(*args));
  kiln_status s = NULL;
  if (k.num_outputs != nout)
    s = KILN_ERR_INTERNAL("fusion %s: the kernel writes %d outputs, the fusion has %d leaves",
                          in->name, k.num_outputs, nout);
  for (int i = 0; i < k.num_inputs && !s; i++) {
    const kiln_hlo_instruction_t *x = k.inputs[i];
    kiln_slice_t sl = {0, 0, 0};
    if (x->opcode == KILN_OP_PARAMETER) {
      int64_t pn = x->parameter_number;
      if (pn < 0 || pn >= in->num_operands) {
        s = KILN_ERR_INTERNAL("fusion %s: parameter %lld has no operand", in->name, (long long)pn);
      } else if (!kiln_shape_is_array(in->operands[pn]->shape)) {
        s = KILN_ERR_UNIMPLEMENTED("fusion %s: operand %lld is a tuple", in->name, (long long)pn);
      } else {
        s = leaf_slice(E, in->operands[pn], 0, &sl);
      }
    } else if (x->opcode == KILN_OP_CONSTANT) {
      int32_t ai = 0;
      s = constant_allocation(E, x, &ai);
      sl = kiln_slice_make(ai, 0, kiln_shape_byte_size(x->shape));
    } else {
      s = KILN_ERR_INTERNAL("fusion %s: kernel input %s is neither a parameter nor a constant",
                            in->name, x->name);
    }
    args[i] = kiln_kernel_arg_slice(sl);
  }
  for (int o = 0; o < nout && !s; o++) {
    kiln_slice_t sl = {0, 0, 0};
    s = leaf_slice(E, in, o, &sl);
    args[k.num_inputs + o] = kiln_kernel_arg_slice(sl);
  }
  if (!s && k.num_scratch > 0) scratch_args(E, &k, args + k.num_inputs + nout);
  for (kiln_codegen_kernel_t *x = &k; x && !s; x = x->next) {
    if (copies_in_place(x, args)) continue;
    kiln_launch_dims_t dims;
    char name[128];
    s = take_kernel(E, x, &dims, name, sizeof(name));
    if (s) break;
    kiln_thunk_t *t = kiln_thunk_kernel_create(in->name, NULL, name, &dims, args, nargs);
    E->pending.data[E->pending.len - 1].thunk = t;
    kiln_thunk_seq_push(seq, t);
    E->stats->kernels++;
  }
  kiln_free(args);
  kiln_codegen_kernel_free(&k);
  if (s) return kiln_status_annotate(s, "while compiling fusion %s", in->name);
  return NULL;
}

/* ---- sequential computations ------------------------------------------------------------- */

static kiln_status emit_computation(emitter_t *E, const kiln_hlo_computation_t *c,
                                    kiln_thunk_seq_t *seq);

static kiln_status emit_while(emitter_t *E, kiln_thunk_seq_t *seq, const kiln_hlo_instruction_t *in) {
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(in, "body");
  const kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(in, "condition");
  if (!body || !cond) return KILN_ERR_INVALID("while %s lacks a body or condition", in->name);
  KILN_RETURN_IF_ERROR_PLAIN(copy_all_leaves(E, seq, in->name, in->operands[0], in));
  kiln_thunk_seq_t cs, bs;
  kiln_thunk_seq_init(&cs);
  kiln_thunk_seq_init(&bs);
  kiln_status s = copy_all_leaves(E, &cs, in->name, in, cond->parameters[0]);
  if (!s) s = emit_computation(E, cond, &cs);
  if (!s) s = copy_all_leaves(E, &bs, in->name, in, body->parameters[0]);
  if (!s) s = emit_computation(E, body, &bs);
  if (!s) s = copy_all_leaves(E, &bs, in->name, body->root, in);
  kiln_slice_t pred = {0, 0, 0};
  if (!s) s = leaf_slice(E, cond->root, 0, &pred);
  if (s) {
    kiln_thunk_seq_free(&cs);
    kiln_thunk_seq_free(&bs);
    return s;
  }
  kiln_thunk_seq_push(seq, kiln_thunk_while_create(in->name, &cs, pred, &bs,
                                                   E->opts.max_while_iterations));
  E->stats->loops++;
  return NULL;
}

static kiln_status emit_conditional(emitter_t *E, kiln_thunk_seq_t *seq,
                                    const kiln_hlo_instruction_t *in) {
  const kiln_called_group_t *g = NULL;
  for (int i = 0; i < in->num_called_groups; i++) g = &in->called_groups[i];
  int nb = 0;
  const kiln_hlo_computation_t *branches[2];
  const kiln_hlo_computation_t **br = branches;
  if (in->num_called_groups == 1 && g && g->n >= 1) {
    nb = g->n;
    br = (const kiln_hlo_computation_t **)g->comps;
  } else {
    branches[0] = kiln_hlo_instruction_called(in, "true_computation");
    branches[1] = kiln_hlo_instruction_called(in, "false_computation");
    if (!branches[0] || !branches[1])
      return KILN_ERR_INVALID("conditional %s lacks its branches", in->name);
    nb = 2;
  }
  if (in->num_operands != nb + 1)
    return KILN_ERR_INVALID("conditional %s: %d branches, %d operands", in->name, nb,
                            in->num_operands);
  bool is_pred = in->operands[0]->shape->type == KILN_PRED;
  kiln_slice_t index;
  KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, in->operands[0], 0, &index));
  kiln_thunk_seq_t *seqs = kiln_calloc((size_t)nb, sizeof(*seqs));
  kiln_status s = NULL;
  for (int b = 0; b < nb && !s; b++) {
    kiln_thunk_seq_init(&seqs[b]);
    const kiln_hlo_computation_t *bc = br[b];
    if (bc->num_parameters == 1)
      s = copy_all_leaves(E, &seqs[b], in->name, in->operands[b + 1], bc->parameters[0]);
    if (!s) s = emit_computation(E, bc, &seqs[b]);
    if (!s) s = copy_all_leaves(E, &seqs[b], in->name, bc->root, in);
  }
  if (!s) {
    /* A pred selects branch 0 when true: XLA's true_computation comes first. */
    kiln_thunk_seq_push(seq, kiln_thunk_conditional_create(in->name, index, is_pred, seqs, nb));
    E->stats->conditionals++;
  }
  for (int b = 0; b < nb; b++) kiln_thunk_seq_free(&seqs[b]);
  kiln_free(seqs);
  return s;
}

static kiln_status emit_call(emitter_t *E, kiln_thunk_seq_t *seq, const kiln_hlo_instruction_t *in) {
  const kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(in, "to_apply");
  if (!callee) return KILN_ERR_INVALID("call %s has no to_apply", in->name);
  for (int p = 0; p < callee->num_parameters && p < in->num_operands; p++)
    KILN_RETURN_IF_ERROR_PLAIN(copy_all_leaves(E, seq, in->name, in->operands[p],
                                               callee->parameters[p]));
  KILN_RETURN_IF_ERROR_PLAIN(emit_computation(E, callee, seq));
  return copy_all_leaves(E, seq, in->name, callee->root, in);
}

static kiln_status emit_copy(emitter_t *E, kiln_thunk_seq_t *seq, const kiln_hlo_instruction_t *in) {
  const kiln_shape_t *a = in->operands[0]->shape, *b = in->shape;
  if (kiln_shape_is_array(b) && kiln_shape_is_row_major(a) != kiln_shape_is_row_major(b))
    return KILN_ERR_UNIMPLEMENTED("copy %s changes the layout; it needs a kernel (run the fusion "
                                  "wrapper)", in->name);
  if (kiln_shape_is_array(b) && !kiln_shape_is_row_major(a) &&
      !kiln_layout_equal(&a->layout, &b->layout))
    return KILN_ERR_UNIMPLEMENTED("copy %s changes the layout; it needs a kernel (run the fusion "
                                  "wrapper)", in->name);
  return copy_all_leaves(E, seq, in->name, in->operands[0], in);
}

/* The runtime's name of a gemm element type (kiln_fusion_wrapper_is_gemm took it). */
static kiln_gemm_dtype_t gemm_dtype(kiln_elem_type_t t) {
  switch (t) {
    case KILN_F64:
      return KILN_GEMM_F64;
    case KILN_C64:
      return KILN_GEMM_C64;
    case KILN_C128:
      return KILN_GEMM_C128;
    case KILN_BF16:
      return KILN_GEMM_BF16;
    case KILN_F16:
      return KILN_GEMM_F16;
    case KILN_S8:
      return KILN_GEMM_S8;
    case KILN_S32:
      return KILN_GEMM_S32;
    case KILN_S16:
      return KILN_GEMM_S16;
    case KILN_U8:
      return KILN_GEMM_U8;
    case KILN_U16:
      return KILN_GEMM_U16;
    case KILN_U32:
      return KILN_GEMM_U32;
    default:
      return KILN_GEMM_F32;
  }
}

static kiln_gemm_types_t gemm_types(const emitter_t *E) {
  if (E->opts.target != KILN_TARGET_CUDA) return KILN_GEMM_TYPES_HOST;
  return E->opts.cublaslt ? KILN_GEMM_TYPES_CUBLASLT : KILN_GEMM_TYPES_CUBLAS;
}

/* The top-level value behind `v`: itself, or for a parameter of fused computation `fc` the
 * fusion's operand. */
static const kiln_hlo_instruction_t *outer_value(const kiln_hlo_instruction_t *fusion,
                                                 const kiln_hlo_instruction_t *v) {
  if (!fusion || v->opcode != KILN_OP_PARAMETER) return v;
  int64_t k = v->parameter_number;
  return k >= 0 && k < fusion->num_operands ? fusion->operands[k] : NULL;
}

/* One gemm thunk for dot `e->dot` with the epilogue `e` holds (NULL: none). `fusion` is the
 * gemm-epilogue fusion the dot sits in (NULL: a top-level dot), `out` the instruction whose
 * buffer receives the result. */
static kiln_status emit_gemm_thunk(emitter_t *E, kiln_thunk_seq_t *seq,
                                   const kiln_hlo_instruction_t *fusion,
                                   const kiln_hlo_instruction_t *dot,
                                   const kiln_gemm_epilogue_match_t *e,
                                   const kiln_hlo_instruction_t *out) {
  kiln_gemm_form_t f;
  if (!kiln_fusion_wrapper_is_gemm_for(dot, gemm_types(E), &f))
    return KILN_ERR_UNIMPLEMENTED(
        "dot %s is not a gemm the runtime takes; it needs a kernel (run "
        "the fusion wrapper)",
        dot->name);
  kiln_gemm_desc_t g;
  memset(&g, 0, sizeof(g));
  g.dtype = gemm_dtype(f.type);
  g.out_dtype = gemm_dtype(f.out_type);
  g.batch = f.batch;
  g.m = f.m;
  g.n = f.n;
  g.k = f.k;
  g.trans_a = f.transpose_lhs;
  g.trans_b = f.transpose_rhs;
  g.alpha = e ? e->alpha : 1;
  g.beta = e && e->addend ? 1 : 0;
  if (e && e->act == KILN_GEMM_ACT_RELU) g.epilogue = KILN_GEMM_EPILOGUE_RELU;
  if (e && e->act == KILN_GEMM_ACT_GELU_TANH) g.epilogue = KILN_GEMM_EPILOGUE_GELU_TANH;
  const kiln_hlo_instruction_t *av = outer_value(fusion, dot->operands[0]),
                               *bv = outer_value(fusion, dot->operands[1]);
  const kiln_hlo_instruction_t *cv = e && e->addend ? outer_value(fusion, e->addend) : NULL,
                               *biasv = e && e->bias ? outer_value(fusion, e->bias) : NULL;
  if (!av || !bv || (e && e->addend && !cv) || (e && e->bias && !biasv))
    return KILN_ERR_INVALID("gemm fusion %s: a parameter without an operand", out->name);
  kiln_slice_t a, b, c, bias, addend;
  KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, av, 0, &a));
  KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, bv, 0, &b));
  KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, out, 0, &c));
  if (g.batch * g.m * g.n == 0) {
    if (c.size) kiln_thunk_seq_push(seq, kiln_thunk_memset_create(out->name, c, 0, 1));
    return NULL;
  }
  if (g.k == 0) {
    if (e && e->root != e->dot)
      return KILN_ERR_INTERNAL("gemm fusion %s has k = 0 (the pass fuses none)", out->name);
    kiln_thunk_seq_push(seq, kiln_thunk_memset_create(out->name, c, 0, 1));
    return NULL;
  }
  if (cv) {
    /* beta = 1: C is the output's initial contents. */
    KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, cv, 0, &addend));
    if (!same_slice(addend, c)) {
      kiln_thunk_seq_push(
          seq, kiln_thunk_copy_create(out->name, KILN_COPY_D2D, addend, c, NULL, c.size));
      E->stats->copies++;
    }
  }
  kiln_thunk_t *t = kiln_thunk_gemm_create(out->name, &g, a, b, c);
  if (biasv) {
    KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, biasv, 0, &bias));
    kiln_thunk_gemm_set_bias(t, bias);
  }
  kiln_thunk_seq_push(seq, t);
  E->stats->gemms++;
  if (e && e->root != e->dot) E->stats->gemm_epilogues++;
  return NULL;
}

static kiln_status emit_gemm(emitter_t *E, kiln_thunk_seq_t *seq,
                             const kiln_hlo_instruction_t *in) {
  return emit_gemm_thunk(E, seq, NULL, in, NULL, in);
}

/* A generator state starting at (w0, w1), owned by `d`. */
static rng_state_t *rng_state_new(kiln_executable_desc_t *d, uint64_t w0, uint64_t w1) {
  rng_state_t *r = kiln_calloc(1, sizeof(rng_state_t));
  pthread_mutex_init(&r->mu, NULL);
  kiln_executable_desc_own_with(d, r, rng_state_free);
  r->word[0] = w0;
  r->word[1] = w1;
  return r;
}

/* The thunk of one rng-get-and-update-state on `rng`, with its recipe (the state's initial
 * value: the state is created before any execution advances it). */
static kiln_thunk_t *rng_state_thunk(kiln_executable_desc_t *d, rng_state_t *rng, const char *name,
                                     int64_t delta, kiln_slice_t out) {
  rng_state_call_t *c = kiln_executable_desc_own(d, kiln_calloc(1, sizeof(*c)));
  c->state = rng;
  c->delta = delta;
  kiln_thunk_t *t = kiln_thunk_custom_call_create(name, "rng-get-and-update-state", rng_state_fn, c,
                                                  NULL, 0, &out, 1, false);
  kiln_byte_writer_t w = {0};
  kiln_bw_u8(&w, KILN_RECIPE_RNG_STATE);
  kiln_bw_u64(&w, (uint64_t)delta);
  kiln_bw_u64(&w, rng->word[0]);
  kiln_bw_u64(&w, rng->word[1]);
  kiln_thunk_custom_call_set_recipe(t, w.b.data, w.b.len);
  kiln_strbuf_free(&w.b);
  return t;
}

static kiln_status emit_rng_state(emitter_t *E, kiln_thunk_seq_t *seq,
                                  const kiln_hlo_instruction_t *in) {
  const char *v = kiln_hlo_instruction_raw_attr(in, "delta");
  char *end = NULL;
  long long delta = v ? strtoll(v, &end, 10) : 0;
  if (!v || end == v || *end)
    return KILN_ERR_INVALID("rng-get-and-update-state %s needs an integer delta", in->name);
  const kiln_shape_t *s = in->shape;
  if (!kiln_shape_is_array(s) || s->type != KILN_U64 || s->rank != 1 || s->dims[0] != 2)
    return KILN_ERR_INVALID("rng-get-and-update-state %s must produce u64[2]", in->name);
  if (!E->rng) {
    uint64_t lo = RNG_STATE_INITIAL_VALUE + E->opts.rng_seed;
    E->rng = rng_state_new(E->d, lo, lo < E->opts.rng_seed ? 1 : 0);
  }
  kiln_slice_t out;
  KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, in, 0, &out));
  kiln_thunk_seq_push(seq, rng_state_thunk(E->d, E->rng, in->name, delta, out));
  return NULL;
}

kiln_status kiln_rng_state_rebuild(const kiln_recipe_call_t *c, void **shared_rng,
                                   kiln_thunk_t **out) {
  *out = NULL;
  kiln_byte_reader_t r;
  kiln_recipe_open(c, KILN_RECIPE_RNG_STATE, &r);
  int64_t delta = (int64_t)kiln_br_u64(&r, "delta");
  uint64_t w0 = kiln_br_u64(&r, "initial state"), w1 = kiln_br_u64(&r, "initial state");
  if (!r.err && (r.left || c->num_operands || c->num_results != 1 || c->results[0].size < 16))
    kiln_br_fail(&r, KILN_ERR_INVALID("rng-get-and-update-state %s: %d operands, %d results",
                                      c->name, c->num_operands, c->num_results));
  if (r.err) return r.err;
  rng_state_t *rng = *shared_rng;
  if (!rng) {
    rng = rng_state_new(c->d, w0, w1);
    *shared_rng = rng;
  }
  *out = rng_state_thunk(c->d, rng, c->name, delta, c->results[0]);
  return NULL;
}

static kiln_status emit_instruction(emitter_t *E, kiln_thunk_seq_t *seq,
                                    const kiln_hlo_instruction_t *in) {
  switch (in->opcode) {
    case KILN_OP_PARAMETER: case KILN_OP_CONSTANT: case KILN_OP_TUPLE:
    case KILN_OP_GET_TUPLE_ELEMENT: case KILN_OP_BITCAST: case KILN_OP_AFTER_ALL:
      return NULL;
    case KILN_OP_FUSION: return emit_fusion(E, seq, in);
    case KILN_OP_WHILE: return emit_while(E, seq, in);
    case KILN_OP_CONDITIONAL: return emit_conditional(E, seq, in);
    case KILN_OP_CALL: return emit_call(E, seq, in);
    case KILN_OP_COPY: return emit_copy(E, seq, in);
    case KILN_OP_DOT: return emit_gemm(E, seq, in);
    case KILN_OP_ADD_DEPENDENCY: case KILN_OP_DOMAIN:
      return copy_all_leaves(E, seq, in->name, in->operands[0], in);
    case KILN_OP_OPTIMIZATION_BARRIER: return forward_operands(E, seq, in, in->num_operands);
    case KILN_OP_COPY_START: return copy_leaf(E, seq, in->name, in->operands[0], 0, in, 0);
    case KILN_OP_COPY_DONE: return copy_leaf(E, seq, in->name, in->operands[0], 0, in, 0);
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_ALL_REDUCE_START:
    case KILN_OP_ALL_GATHER:
    case KILN_OP_ALL_GATHER_START:
    case KILN_OP_REDUCE_SCATTER:
    case KILN_OP_ALL_TO_ALL:
    case KILN_OP_RAGGED_ALL_TO_ALL:
    case KILN_OP_COLLECTIVE_PERMUTE:
    case KILN_OP_COLLECTIVE_PERMUTE_START:
    case KILN_OP_COLLECTIVE_BROADCAST:
      E->stats->collectives++;
      return kiln_collective_emit(in, E->ba, E->num_replicas, E->num_partitions,
                                  E->split_collectives, seq);
    case KILN_OP_ALL_REDUCE_DONE:
    case KILN_OP_ALL_GATHER_DONE:
    case KILN_OP_COLLECTIVE_PERMUTE_DONE: /* the start's collective ends: its results */
      KILN_RETURN_IF_ERROR_PLAIN(kiln_collective_emit_done(
          in, E->ba, E->num_replicas, E->num_partitions, E->split_collectives, seq));
      for (int k = 0; k < kiln_shape_num_leaves(in->shape); k++)
        KILN_RETURN_IF_ERROR_PLAIN(copy_leaf(E, seq, in->name, in->operands[0],
                                             kiln_collective_result_leaf(in->operands[0], k), in,
                                             k));
      return NULL;
    case KILN_OP_ASYNC_START: /* a collective the pipeline made asynchronous */
      E->stats->collectives++;
      return kiln_collective_emit_async(in, E->ba, E->num_replicas, E->num_partitions,
                                        E->split_collectives, seq);
    case KILN_OP_ASYNC_UPDATE:
      return copy_all_leaves(E, seq, in->name, in->operands[0], in);
    case KILN_OP_ASYNC_DONE: { /* the start's collective ends: the results part of its tuple */
      const kiln_shape_t *s = in->operands[0]->shape;
      if (!kiln_shape_is_tuple(s) || s->num_elements < 2)
        return KILN_ERR_INVALID("async-done '%s': its operand is not an async tuple", in->name);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_collective_emit_done(
          in, E->ba, E->num_replicas, E->num_partitions, E->split_collectives, seq));
      int first = kiln_shape_num_leaves(s->elements[0]);
      for (int k = 0; k < kiln_shape_num_leaves(in->shape); k++)
        KILN_RETURN_IF_ERROR_PLAIN(copy_leaf(E, seq, in->name, in->operands[0], first + k, in, k));
      return NULL;
    }
    case KILN_OP_PARTITION_ID: case KILN_OP_REPLICA_ID: {
      if (E->num_replicas * E->num_partitions > 1) {
        E->stats->collectives++;
        return kiln_collective_emit(in, E->ba, E->num_replicas, E->num_partitions,
                                    E->split_collectives, seq);
      }
      kiln_slice_t sl;
      KILN_RETURN_IF_ERROR_PLAIN(leaf_slice(E, in, 0, &sl));
      kiln_thunk_seq_push(seq, kiln_thunk_memset_create(in->name, sl, 0, 4));
      E->stats->memsets++;
      return NULL;
    }
    case KILN_OP_RNG_GET_AND_UPDATE_STATE: return emit_rng_state(E, seq, in);
    case KILN_OP_CUSTOM_CALL:
      KILN_RETURN_IF_ERROR_PLAIN(kiln_custom_call_emit(in, E->ba, &E->opts, E->d, seq));
      E->stats->custom_calls++;
      return NULL;
    default:
      return KILN_ERR_UNIMPLEMENTED("%s (%s) has no thunk: kernels come from fusions (run the "
                                    "fusion wrapper after the pipeline)",
                                    in->name, kiln_hlo_opcode_name(in->opcode));
  }
}

static kiln_status emit_computation(emitter_t *E, const kiln_hlo_computation_t *c,
                                    kiln_thunk_seq_t *seq) {
  for (size_t i = 0; i < c->instructions.len; i++)
    KILN_RETURN_IF_ERROR(emit_instruction(E, seq, c->instructions.data[i]), "in computation %s",
                         c->name);
  return NULL;
}

/* ---- module ------------------------------------------------------------------------------ */

static kiln_status bind_allocations(emitter_t *E) {
  const kiln_buffer_assignment_t *ba = E->ba;
  const kiln_hlo_computation_t *entry = E->m->entry;
  /* Flattened parameters: parameter number, then leaf. */
  int32_t *first_flat = kiln_calloc((size_t)entry->num_parameters + 1, sizeof(int32_t));
  int32_t np = 0;
  for (int p = 0; p < entry->num_parameters; p++) {
    first_flat[p] = np;
    np += kiln_shape_num_leaves(entry->parameters[p]->shape);
  }
  E->d->num_parameters = np;
  E->d->parameter_sizes = kiln_calloc((size_t)np + 1, sizeof(uint64_t));
  for (int p = 0; p < entry->num_parameters; p++) {
    const kiln_shape_t *ps = entry->parameters[p]->shape;
    int nl = kiln_shape_num_leaves(ps);
    for (int l = 0; l < nl; l++) {
      const kiln_shape_t *ls = kiln_shape_leaf(ps, l, NULL);
      E->d->parameter_sizes[first_flat[p] + l] =
          ls && kiln_shape_is_array(ls) ? (uint64_t)kiln_shape_byte_size(ls) : 0;
    }
  }
  kiln_status s = NULL;
  for (int i = 0; i < ba->num_allocations && !s; i++) {
    const kiln_buffer_allocation_t *b = &ba->allocations[i];
    kiln_exec_allocation_t a = {0};
    a.size = (uint64_t)b->size;
    switch (b->kind) {
      case KILN_ALLOCATION_PARAMETER:
        a.kind = KILN_EXEC_ALLOC_PARAMETER;
        a.parameter = first_flat[b->parameter_number] + b->parameter_leaf;
        a.donated = b->output_leaf >= 0;
        break;
      case KILN_ALLOCATION_CONSTANT: {
        a.kind = KILN_EXEC_ALLOC_CONSTANT;
        const kiln_hlo_instruction_t *c = b->constant;
        if (c && c->literal && c->literal->unknown) {
          s = kiln_hlo_elided_constant_error(c);
          break;
        }
        if (!c || !c->literal || !kiln_shape_is_array(c->shape)) {
          s = KILN_ERR_UNIMPLEMENTED("constant allocation %d: %s has no array contents", i,
                                     c ? c->name : "?");
          break;
        }
        a.data = kiln_calloc(a.size ? a.size : 1, 1);
        kiln_literal_write_physical(c->literal, c->shape, a.data);
        break;
      }
      case KILN_ALLOCATION_OUTPUT: a.kind = KILN_EXEC_ALLOC_OUTPUT; break;
      case KILN_ALLOCATION_TEMP: a.kind = KILN_EXEC_ALLOC_TEMP; break;
    }
    if (!s) kiln_executable_desc_add_allocation(E->d, &a);
  }
  kiln_free(first_flat);
  if (s) return s;
  const kiln_hlo_instruction_t *root = entry->root;
  int no = kiln_shape_num_leaves(root->shape);
  E->d->num_outputs = no;
  E->d->outputs = kiln_calloc((size_t)no + 1, sizeof(*E->d->outputs));
  for (int l = 0; l < no; l++) {
    if (!leaf_is_array(root, l)) {
      E->d->outputs[l].slice = kiln_slice_make(-1, 0, 0);
      continue;
    }
    KILN_RETURN_IF_ERROR(leaf_slice(E, root, l, &E->d->outputs[l].slice), "for output %d", l);
  }
  return NULL;
}

/* Records the distinct objects of host kernels `hk` as image `im`'s objects. */
static void keep_objects(kiln_executable_desc_t *d, int32_t im, const kiln_kir_host_kernel_t *hk,
                         size_t n) {
  const char **syms = kiln_calloc(n, sizeof(*syms));
  const void **data = kiln_calloc(n, sizeof(*data));
  size_t *sizes = kiln_calloc(n, sizeof(*sizes));
  int32_t *obj_of = kiln_calloc(n, sizeof(*obj_of)), *fobj = kiln_calloc(n, sizeof(*fobj));
  int32_t num = 0;
  bool complete = true;
  for (size_t i = 0; i < n; i++) {
    if (hk[i].unique == (int)i) {
      if (!hk[i].object) complete = false;
      syms[num] = hk[i].symbol;
      data[num] = hk[i].object;
      sizes[num] = hk[i].object_size;
      obj_of[i] = num++;
    }
    fobj[i] = hk[i].unique >= 0 && hk[i].unique <= (int)i ? obj_of[hk[i].unique] : -1;
    if (fobj[i] < 0) complete = false;
  }
  if (complete) kiln_executable_desc_set_image_objects(d, im, num, syms, data, sizes, fobj);
  kiln_free(syms);
  kiln_free(data);
  kiln_free(sizes);
  kiln_free(obj_of);
  kiln_free(fobj);
}

typedef struct host_kernels_unwind {
  kiln_oom_cleanup_t cleanup;
  kiln_kir_host_kernel_t *hk;
  size_t n;
} host_kernels_unwind_t;

static void host_kernels_free_on_unwind(void *arg) {
  host_kernels_unwind_t *u = arg;
  kiln_kir_host_kernels_free(u->hk, u->n);
}

/* Compiles every kernel taken by take_kernel, together: HOST into the JIT, one image with
 * every kernel's name and entry point; CUDA one image per distinct kernel. */
static kiln_status compile_pending(emitter_t *E) {
  size_t n = E->pending.len;
  if (n == 0) return NULL;
  const kiln_kir_module_t **mods = kiln_calloc(n, sizeof(*mods));
  for (size_t i = 0; i < n; i++) mods[i] = E->pending.data[i].kir;
  kiln_kir_batch_options_t bo = {0};
  bo.cache_dir = E->opts.kernel_cache_dir;
  bo.keep_objects = true; /* the description keeps them: it can be serialized */
  kiln_kir_batch_stats_t bs;
  double t0 = kiln_clock_ms();
  kiln_status s = NULL;
  if (E->opts.target == KILN_TARGET_HOST) {
    kiln_kir_host_kernel_t *hk = kiln_calloc(n, sizeof(*hk));
    /* The kernels' objects come from the held code generation (not recorded): an
     * out-of-memory unwind frees them here. */
    host_kernels_unwind_t unwind = {.hk = hk, .n = n};
    kiln_oom_defer(&unwind.cleanup, host_kernels_free_on_unwind, &unwind);
    s = kiln_kir_compile_host_batch(mods, n, E->jit, &bo, hk, &bs);
    if (!s) {
      const char **names = kiln_calloc(n, sizeof(*names));
      void **fns = kiln_calloc(n, sizeof(*fns));
      for (size_t i = 0; i < n; i++) {
        names[i] = hk[i].name;
        fns[i] = (void *)hk[i].fn;
        kiln_thunk_kernel_set_module_index(E->pending.data[i].thunk, 0);
      }
      int32_t im = kiln_executable_desc_add_image(E->d, NULL, 0, names, fns, n);
      keep_objects(E->d, im, hk, n);
      kiln_free(names);
      kiln_free(fns);
    }
    kiln_oom_undefer(&unwind.cleanup);
    kiln_kir_host_kernels_free(hk, n);
    kiln_free(hk);
  } else {
    kiln_nvptx_options_t no = {0};
    char arch[16];
    bool ptx_only = false;
    s = kiln_nvptx_arch_resolve(E->opts.arch, arch, sizeof(arch), &ptx_only);
    no.arch = arch;
    if (ptx_only) no.cubin_via = KILN_CUBIN_VIA_SKIP; /* the driver compiles the PTX */
    no.dump_dir = E->opts.dump_dir;
    no.cuda = E->opts.cuda;
    kiln_kir_gpu_kernel_t *gk = kiln_calloc(n, sizeof(*gk));
    int32_t *index = kiln_calloc(n, sizeof(*index));
    if (!s) s = kiln_kir_compile_nvptx_batch(mods, n, &no, &bo, gk, &bs);
    for (size_t i = 0; i < n && !s; i++) {
      if (gk[i].unique == (int)i)
        index[i] = kiln_executable_desc_add_image(E->d, gk[i].image, gk[i].size, NULL, NULL, 0);
      else
        index[i] = index[gk[i].unique];
      kiln_thunk_kernel_set_module_index(E->pending.data[i].thunk, index[i]);
    }
    kiln_kir_gpu_kernels_free(gk, n);
    kiln_free(gk);
    kiln_free(index);
  }
  kiln_free(mods);
  E->stats->backend_ms += kiln_clock_ms() - t0;
  if (!s) {
    E->stats->distinct_kernels = bs.unique;
    E->stats->kernels_compiled = bs.compiled;
    E->stats->kernel_cache_hits = bs.memory_hits + bs.disk_hits;
    E->stats->compile_threads = bs.threads;
    E->stats->small_tier_kernels = bs.small_tier_kernels;
  }
  return s;
}

static void free_pending(emitter_t *E) {
  for (size_t i = 0; i < E->pending.len; i++) kiln_kir_module_destroy(E->pending.data[i].kir);
  for (size_t i = 0; i < E->pending.len; i++)
    if (E->pending.data[i].ctx) kiln_affine_ctx_destroy(E->pending.data[i].ctx);
  kiln_vec_free(&E->pending);
}

kiln_status kiln_thunk_emit_module(const kiln_hlo_module_t *m, const kiln_buffer_assignment_t *ba,
                                   const kiln_thunk_emit_options_t *opts,
                                   kiln_executable_desc_t **out, kiln_thunk_emit_stats_t *stats) {
  if (out) *out = NULL;
  if (!m || !m->entry || !ba || !out) return KILN_ERR_INVALID("thunk emission: NULL argument");
  kiln_thunk_emit_stats_t local;
  emitter_t E;
  memset(&E, 0, sizeof(E));
  E.m = m;
  E.ba = ba;
  if (opts) E.opts = *opts;
  E.stats = stats ? stats : &local;
  memset(E.stats, 0, sizeof(*E.stats));
  E.d = kiln_executable_desc_create(m->name);
  /* An out-of-memory unwind (base/alloc.h) destroys the description: its JIT is LLVM's */
  kiln_oom_cleanup_t unwind;
  kiln_oom_defer(&unwind, desc_destroy_on_unwind, E.d);
  kiln_ptrmap_init(&E.constants);
  kiln_status s = NULL;
  if (E.opts.target == KILN_TARGET_HOST) {
    kiln_host_jit_options_t jo = E.opts.host_jit;
    if (!jo.dump_dir) jo.dump_dir = E.opts.dump_dir;
    kiln_oom_hold(); /* LLVM's objects inside: no unwind half way */
    s = kiln_host_jit_create(&jo, &E.jit);
    kiln_oom_release();
    if (!s) {
      E.d->keepalive = E.jit;
      E.d->keepalive_free = host_jit_free;
    }
  }
  E.num_replicas = E.opts.num_replicas;
  E.split_collectives = !E.opts.synchronous_collectives;
  E.num_partitions = E.opts.num_partitions;
  if (!s && (E.num_replicas < 1 || E.num_partitions < 1))
    s = kiln_eval_spmd_world_size(m, &E.num_replicas, &E.num_partitions);
  if (!s) s = bind_allocations(&E);
  if (!s) s = emit_computation(&E, m->entry, &E.d->thunks);
  if (!s) s = compile_pending(&E);
  free_pending(&E);
  kiln_ptrmap_free(&E.constants);
  kiln_oom_undefer(&unwind);
  if (s) {
    kiln_executable_desc_destroy(E.d);
    return kiln_status_annotate(s, "while emitting thunks for %s", m->name);
  }
  *out = E.d;
  return NULL;
}
