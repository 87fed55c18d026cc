/* Kernel IR -> LLVM IR for the host (kiln_kir_lower_host), following DESIGN.md's "Host
 * lowering" facts:
 *
 *   void kernel(void **args, i64 block_begin, i64 block_end)
 *     entry:  tensor pointers from args; every alloca (slots, shared memory) lives here
 *     for blk in [begin, end):  block ids from blk (x fastest); uniform ops (pure, no memory,
 *                               independent of thread ids) once per block
 *       segment 1: for tz { for ty { for tx { ...ops... } } }     (x innermost; not unrolled
 *                                                                  under a y or z loop)
 *       segment 2: ...  (segments end at barriers, shuffles and thread-range ifs)
 *
 * A value made in one segment and used in another goes through a per-thread slot array
 * (block threads + one warp of padding); thread ids are the current thread loop's induction
 * variables in every segment, so no SSA value crosses a segment. A top-level `if` whose
 * condition is a conjunction of thread-range predicates (tid < c, tid <= c, tid == c,
 * tid >= c, tid > c, (tid & (2^k - 1)) == 0) and whose else branch only yields tensors runs
 * its then branch in a thread loop with those bounds and step. A top-level `for` with uniform
 * bounds whose body starts with barriers (and holds no other) runs its iterations outside
 * the thread loops, so each iteration boundary is the barrier (the sort's step loop). A
 * shuffle is one segment:
 * per warp a <32 x T> load of the source slots, a shufflevector and a store. */
#include <llvm-c/Analysis.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>
#include <stdio.h>
#include <string.h>

#include "compiler/backend/host_jit.h"
#include "compiler/codegen/kir_llvm.h"
#include "compiler/codegen/kir_pipeline.h"

/* A warp chain (emit_warp_chain) of at most this many warps is unrolled in full, whatever
 * LLVM's unroll cost model says: each warp's vector then sits at a constant offset of its slot
 * arrays, which become registers. Where 32-lane shuffles are dear (AVX2: a <32 x float> is
 * four registers) the cost model unrolled 8 warps by 2 only and the arrays stayed on the
 * stack. */
#define KIR_HOST_UNROLLED_WARPS 8

enum { K_UNIFORM = 1, K_TID, K_SHARED, K_BARRIER, K_SHUFFLE, K_PRED, K_NORMAL, K_SHUFFLE_UNIFORM, K_FOR };

typedef struct seg {
  int kind;                 /* K_NORMAL, K_PRED, K_SHUFFLE, K_FOR */
  size_t first, last;       /* op index range [first, last] of the top-level ops */
  int64_t lo[3], hi[3], step[3];
  bool shared_mem;          /* some op of the segment reads or writes shared memory */
} seg_t;

typedef struct tloop {
  LLVMValueRef iv;
  LLVMBasicBlockRef head, body, exit;
  LLVMValueRef phi;
  int64_t step;
  LLVMValueRef stepv; /* non-NULL: a step value instead of `step` */
  bool no_unroll;     /* latch gets llvm.loop.unroll.disable */
  bool unroll_vector; /* with no_unroll: the vectorized loop may unroll (a follow-up without it) */
  bool unroll_full;   /* latch gets llvm.loop.unroll.full */
} tloop_t;

typedef struct host {
  const kiln_kir_func_t *k;
  int *kind;                /* per top-level op */
  int *seg_of;              /* per value id: defining segment, or -1 */
  uint8_t *uniform;         /* per value id */
  LLVMValueRef *slot;       /* per value id: slot array */
  LLVMTypeRef *slot_t;      /* per value id: slot element type */
  KILN_VEC(seg_t) segs;
  LLVMValueRef tid[3], bid[3], tid_lin;
  bool in_thread_loop;
  int64_t nthreads;
  int64_t split_k;     /* > 0: full-range x thread loops split by it (choose_split) */
  tloop_t split_outer; /* the rows loop of the open split (L->split_tid set) */
  /* A `for` segment's loop that threads_open opens between the y/z loops and the x loop
   * (emit_for_segment); open while inner_for_open. */
  const kiln_kir_op_t *inner_for_op;
  tloop_t inner_for;
  bool inner_for_open;
} host_t;

static LLVMValueRef host_thread_id(kir_llvm_t *L, const kiln_kir_op_t *op) {
  host_t *h = L->user;
  if (!h->in_thread_loop) {
    kir_llvm_fail(L, KILN_ERR_INTERNAL("kir->host: thread id outside a thread loop"));
    return LLVMConstInt(L->idx, 0, 0);
  }
  return h->tid[op->axis];
}

static LLVMValueRef host_block_id(kir_llvm_t *L, const kiln_kir_op_t *op) {
  return ((host_t *)L->user)->bid[op->axis];
}

static LLVMValueRef host_math(kir_llvm_t *L, kiln_kir_opcode_t op, LLVMValueRef x, LLVMValueRef y,
                              bool f64) {
  if (!f64) return kir_llvm_host_math_f32(L, op, x, y);
  const char *name;
  switch (op) {
    case KILN_KIR_EXP: name = "exp"; break;
    case KILN_KIR_EXPM1: name = "expm1"; break;
    case KILN_KIR_LOG: name = "log"; break;
    case KILN_KIR_LOG1P: name = "log1p"; break;
    case KILN_KIR_TANH: name = "tanh"; break;
    case KILN_KIR_SIN: name = "sin"; break;
    case KILN_KIR_COS: name = "cos"; break;
    case KILN_KIR_TAN: name = "tan"; break;
    case KILN_KIR_CBRT: name = "cbrt"; break;
    case KILN_KIR_ERF: name = "erf"; break;
    case KILN_KIR_POW: name = "pow"; break;
    case KILN_KIR_ATAN2: name = "atan2"; break;
    case KILN_KIR_LOGISTIC: {
      LLVMValueRef e = host_math(L, KILN_KIR_EXP, LLVMBuildFNeg(L->b, x, ""), NULL, true);
      return LLVMBuildFDiv(L->b, LLVMConstReal(L->f64, 1.0),
                           LLVMBuildFAdd(L->b, LLVMConstReal(L->f64, 1.0), e, ""), "");
    }
    default:
      kir_llvm_fail(L, KILN_ERR_UNIMPLEMENTED("kir->host: no f64 math for %s", kiln_kir_opcode_name(op)));
      return x;
  }
  LLVMValueRef args[2] = {x, y};
  return kir_llvm_call_extern(L, name, L->f64, args, y ? 2 : 1);
}

static const kir_llvm_target_t kHost = {
    .nvptx = false,
    .thread_id = host_thread_id,
    .block_id = host_block_id,
    .barrier = NULL,
    .shuffle = NULL,
    .math = host_math,
};

/* ---- classification ---- */

static bool pure_no_memory(const kiln_kir_op_t *op) {
  if (op->num_regions) return false;
  switch (op->opcode) {
    case KILN_KIR_CONSTANT: case KILN_KIR_CMP: case KILN_KIR_SELECT: case KILN_KIR_CONVERT:
    case KILN_KIR_BITCAST: case KILN_KIR_APPLY_INDEXING: case KILN_KIR_BLOCK_ID:
    case KILN_KIR_IS_FINITE: case KILN_KIR_VSPLAT: case KILN_KIR_VEXTRACT: case KILN_KIR_VINSERT:
      return true;
    default:
      return kiln_kir_opcode_is_binary(op->opcode) || kiln_kir_opcode_is_unary(op->opcode);
  }
}

static bool tid_axis(const kiln_kir_value_t *v, int *axis) {
  if (!v->def || v->def->opcode != KILN_KIR_THREAD_ID) return false;
  *axis = v->def->axis;
  return true;
}

/* Accumulates thread-range bounds implied by `c` being true; false if not a range. */
static bool thread_range(const kiln_kir_value_t *c, int64_t lo[3], int64_t hi[3], int64_t step[3]) {
  const kiln_kir_op_t *op = c->def;
  if (!op) return false;
  if (op->opcode == KILN_KIR_AND)
    return thread_range(op->operands[0], lo, hi, step) && thread_range(op->operands[1], lo, hi, step);
  if (op->opcode != KILN_KIR_CMP) return false;
  int64_t k;
  int ax;
  const kiln_kir_value_t *x = op->operands[0];
  if (!op->operands[1]->def || op->operands[1]->def->opcode != KILN_KIR_CONSTANT) return false;
  k = op->operands[1]->def->cst.i;
  if (tid_axis(x, &ax)) {
    int64_t nlo = lo[ax], nhi = hi[ax];
    switch (op->cmp) {
      case KILN_KIR_CMP_LT: nhi = k; break;
      case KILN_KIR_CMP_LE: nhi = k + 1; break;
      case KILN_KIR_CMP_EQ: nlo = k; nhi = k + 1; break;
      case KILN_KIR_CMP_GE: nlo = k; break;
      case KILN_KIR_CMP_GT: nlo = k + 1; break;
      default: return false;
    }
    if (nlo > lo[ax]) lo[ax] = nlo;
    if (nhi < hi[ax]) hi[ax] = nhi;
    return true;
  }
  /* (tid & (2^k - 1)) == 0 */
  const kiln_kir_op_t *a = x->def;
  if (op->cmp != KILN_KIR_CMP_EQ || k != 0 || !a || a->opcode != KILN_KIR_AND) return false;
  if (!tid_axis(a->operands[0], &ax) || !a->operands[1]->def ||
      a->operands[1]->def->opcode != KILN_KIR_CONSTANT)
    return false;
  int64_t mask = a->operands[1]->def->cst.i;
  if (mask < 0 || (mask & (mask + 1))) return false;
  if (step[ax] != 1 && step[ax] != mask + 1) return false;
  step[ax] = mask + 1;
  return true;
}

static bool only_yields_tensors(const kiln_kir_op_t *op) {
  const kiln_kir_region_t *e = op->regions[1];
  if (e->ops.len != 1) return false;
  for (uint32_t i = 0; i < op->num_results; i++)
    if (op->results[i]->type->kind != KILN_KIR_TYPE_TENSOR) return false;
  return true;
}

static bool all_uniform(host_t *h, const kiln_kir_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; i++)
    if (!h->uniform[op->operands[i]->id]) return false;
  return true;
}

static bool contains_sync(const kiln_kir_region_t *r) {
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_BARRIER || op->opcode == KILN_KIR_SHUFFLE) return true;
    for (uint32_t j = 0; j < op->num_regions; j++)
      if (contains_sync(op->regions[j])) return true;
  }
  return false;
}

/* Whether a `for` body's barriers are all at its top level, before any other op, and it
 * holds no shuffle: a loop whose iterations are separated by block barriers. Lowered as a
 * K_FOR (iterations outside the thread loops), each iteration runs every thread to the end
 * before the next begins, which is what the barriers ask; they become no-ops. */
static bool leading_barriers_only(const kiln_kir_region_t *r) {
  size_t i = 0;
  while (i < r->ops.len && r->ops.data[i]->opcode == KILN_KIR_BARRIER) i++;
  if (i == 0) return false;
  for (; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_BARRIER || op->opcode == KILN_KIR_SHUFFLE) return false;
    for (uint32_t j = 0; j < op->num_regions; j++)
      if (contains_sync(op->regions[j])) return false;
  }
  return true;
}

static kiln_status classify(kir_llvm_t *L, host_t *h) {
  const kiln_kir_region_t *body = h->k->body;
  size_t n = body->ops.len - 1;
  for (uint32_t i = 0; i < body->num_args; i++) h->uniform[body->args[i]->id] = 1;
  seg_t cur = {.kind = 0};
  for (size_t i = 0; i < n; i++) {
    const kiln_kir_op_t *op = body->ops.data[i];
    int kind;
    if (op->opcode == KILN_KIR_THREAD_ID) kind = K_TID;
    else if (op->opcode == KILN_KIR_ALLOC_SHARED) kind = K_SHARED;
    else if (op->opcode == KILN_KIR_BARRIER) kind = K_BARRIER;
    else if (op->opcode == KILN_KIR_SHUFFLE) kind = all_uniform(h, op) ? K_SHUFFLE_UNIFORM : K_SHUFFLE;
    else if (pure_no_memory(op) && all_uniform(h, op)) kind = K_UNIFORM;
    else kind = K_NORMAL;
    bool uniform_for = op->opcode == KILN_KIR_FOR && h->uniform[op->operands[0]->id] &&
                       h->uniform[op->operands[1]->id] && h->uniform[op->operands[2]->id];
    bool barrier_loop = uniform_for && leading_barriers_only(op->regions[0]);
    for (uint32_t j = 0; j < op->num_regions && !barrier_loop; j++)
      if (contains_sync(op->regions[j]))
        return KILN_ERR_UNIMPLEMENTED(
            "kir->host: barriers and shuffles must be at the top level "
            "of kernel @%s, or open the body of a loop with uniform "
            "bounds (found one inside %s)",
            h->k->name, kiln_kir_opcode_name(op->opcode));
    seg_t pred = {.kind = K_PRED, .first = i, .last = i};
    for (int a = 0; a < 3; a++) {
      pred.lo[a] = 0;
      pred.hi[a] = h->k->block[a];
      pred.step[a] = 1;
    }
    if (op->opcode == KILN_KIR_IF && only_yields_tensors(op) &&
        thread_range(op->operands[0], pred.lo, pred.hi, pred.step))
      kind = K_PRED;
    if (uniform_for && (h->nthreads > 1 || barrier_loop)) kind = K_FOR;
    h->kind[i] = kind;
    if (kind == K_UNIFORM || kind == K_SHARED || kind == K_SHUFFLE_UNIFORM) {
      for (uint32_t j = 0; j < op->num_results; j++) h->uniform[op->results[j]->id] = 1;
    }
    bool boundary = kind == K_BARRIER || kind == K_SHUFFLE || kind == K_PRED || kind == K_FOR;
    if (boundary && cur.kind) {
      kiln_vec_push(&h->segs, cur);
      cur.kind = 0;
    }
    if (kind == K_SHUFFLE) {
      seg_t s = {.kind = K_SHUFFLE, .first = i, .last = i};
      kiln_vec_push(&h->segs, s);
    } else if (kind == K_FOR) {
      pred.kind = K_FOR;
      kiln_vec_push(&h->segs, pred);
    } else if (kind == K_PRED) {
      for (int a = 0; a < 3; a++) {
        if (pred.step[a] > 1) pred.lo[a] = (pred.lo[a] + pred.step[a] - 1) / pred.step[a] * pred.step[a];
        if (pred.lo[a] < 0) pred.lo[a] = 0;
      }
      kiln_vec_push(&h->segs, pred);
    } else if (kind == K_NORMAL) {
      if (!cur.kind) {
        cur = (seg_t){.kind = K_NORMAL, .first = i};
        for (int a = 0; a < 3; a++) {
          cur.lo[a] = 0;
          cur.hi[a] = h->k->block[a];
          cur.step[a] = 1;
        }
      }
      cur.last = i;
    }
  }
  if (cur.kind) kiln_vec_push(&h->segs, cur);
  (void)L;
  return NULL;
}

static bool is_shared_tensor(const kiln_kir_value_t *v) {
  return v->type->kind == KILN_KIR_TYPE_TENSOR && v->type->space == KILN_KIR_SPACE_SHARED;
}

/* Whether `op` (or an op nested in it) takes or gives a shared-memory tensor. */
static bool touches_shared(const kiln_kir_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; i++)
    if (is_shared_tensor(op->operands[i])) return true;
  for (uint32_t i = 0; i < op->num_results; i++)
    if (is_shared_tensor(op->results[i])) return true;
  for (uint32_t j = 0; j < op->num_regions; j++)
    for (size_t i = 0; i < op->regions[j]->ops.len; i++)
      if (touches_shared(op->regions[j]->ops.data[i])) return true;
  return false;
}

/* Marks cross-segment uses of per-thread values in region `r` used from segment `s`. */
static void mark_uses(host_t *h, const kiln_kir_region_t *r, int s, bool *need) {
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    for (uint32_t j = 0; j < op->num_operands; j++) {
      const kiln_kir_value_t *v = op->operands[j];
      if (v->type->kind == KILN_KIR_TYPE_TENSOR) continue;
      int d = h->seg_of[v->id];
      if (d >= 0 && d != s) need[v->id] = true;
    }
    for (uint32_t j = 0; j < op->num_regions; j++) mark_uses(h, op->regions[j], s, need);
  }
}

/* ---- emission helpers ---- */

static void loop_open_v(kir_llvm_t *L, tloop_t *t, LLVMValueRef lov, LLVMValueRef hiv, int64_t step,
                        const char *nm) {
  LLVMBuilderRef b = L->b;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  t->head = LLVMAppendBasicBlockInContext(L->ctx, L->fn, nm);
  t->body = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "tl.body");
  t->exit = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "tl.exit");
  t->step = step;
  t->stepv = NULL;
  t->no_unroll = false;
  t->unroll_vector = false;
  t->unroll_full = false;
  LLVMBuildBr(b, t->head);
  LLVMPositionBuilderAtEnd(b, t->head);
  t->phi = LLVMBuildPhi(b, L->i64, nm);
  LLVMAddIncoming(t->phi, &lov, &pre, 1);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t->phi, hiv, ""), t->body, t->exit);
  LLVMPositionBuilderAtEnd(b, t->body);
  t->iv = t->phi;
}

static void loop_open(kir_llvm_t *L, tloop_t *t, int64_t lo, int64_t hi, int64_t step,
                      const char *nm) {
  loop_open_v(L, t, LLVMConstInt(L->i64, (unsigned long long)lo, 0),
              LLVMConstInt(L->i64, (unsigned long long)hi, 0), step, nm);
}

static void loop_close(kir_llvm_t *L, tloop_t *t) {
  LLVMBuilderRef b = L->b;
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMValueRef next = LLVMBuildAdd(
      b, t->phi, t->stepv ? t->stepv : LLVMConstInt(L->i64, (unsigned long long)t->step, 0), "");
  LLVMAddIncoming(t->phi, &next, &latch, 1);
  LLVMValueRef br = LLVMBuildBr(b, t->head);
  if (t->no_unroll || t->unroll_full) {
    /* A self-referencing loop id: !{!self, !{!"llvm.loop.unroll.disable"}}, plus, with
     * unroll_vector, an empty !{!"llvm.loop.vectorize.followup_vectorized"}: the vector loop
     * the vectorizer makes drops the unroll.disable, so the late unroller may unroll it.
     * unroll_full: !{!self, !{!"llvm.loop.unroll.full"}}. */
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(L->ctx, NULL, 0);
    LLVMMetadataRef s = t->unroll_full
                            ? LLVMMDStringInContext2(L->ctx, "llvm.loop.unroll.full", 21)
                            : LLVMMDStringInContext2(L->ctx, "llvm.loop.unroll.disable", 24);
    LLVMMetadataRef f =
        LLVMMDStringInContext2(L->ctx, "llvm.loop.vectorize.followup_vectorized", 39);
    LLVMMetadataRef ops[3] = {tmp, LLVMMDNodeInContext2(L->ctx, &s, 1),
                              LLVMMDNodeInContext2(L->ctx, &f, 1)};
    LLVMMetadataRef id =
        LLVMMDNodeInContext2(L->ctx, ops, t->unroll_vector && !t->unroll_full ? 3 : 2);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(L->ctx, "llvm.loop", 9), LLVMMetadataAsValue(L->ctx, id));
  }
  LLVMPositionBuilderAtEnd(b, t->exit);
}

static LLVMValueRef slot_ptr(kir_llvm_t *L, host_t *h, const kiln_kir_value_t *v, LLVMValueRef lin) {
  return LLVMBuildInBoundsGEP2(L->b, h->slot_t[v->id], h->slot[v->id], &lin, 1, "");
}

static LLVMValueRef slot_load(kir_llvm_t *L, host_t *h, const kiln_kir_value_t *v) {
  LLVMValueRef x = LLVMBuildLoad2(L->b, h->slot_t[v->id], slot_ptr(L, h, v, h->tid_lin), "");
  if (LLVMTypeOf(x) != kir_llvm_repr(L, v->type)) x = LLVMBuildTrunc(L->b, x, L->i1, "");
  return x;
}

static void slot_store(kir_llvm_t *L, host_t *h, const kiln_kir_value_t *v) {
  LLVMValueRef x = kir_llvm_get(L, v);
  if (!x) return;
  if (LLVMTypeOf(x) == L->i1) x = LLVMBuildZExt(L->b, x, L->i8, "");
  LLVMBuildStore(L->b, x, slot_ptr(L, h, v, h->tid_lin));
}

/* The largest divisor k of the x block size (16 <= k < block) by which some apply_indexing
 * takes `th_x floordiv k` or `th_x mod k` — a block covering rows of a k-wide innermost
 * dimension (64 channels of NHWC, 2 rows per 128-thread block). Its x thread loop then runs
 * as two loops, th_x = q * k + r (r innermost), so the row q is loop-invariant and the
 * address linear in r: contiguous vector loads instead of gathers by per-lane divisions.
 * 0 (no split) in kernels with barriers, shuffles or shared memory, whose segments have
 * their own loop shapes. */
/* Raises *best to each d (16 <= d < block, d | block) of a `th_x floordiv d` or `th_x mod d`
 * in `e`, an expression of apply_indexing `op`'s map. */
static void split_divisors(const kiln_kir_op_t *op, const kiln_affine_expr_t *e, int64_t block,
                           int64_t *best) {
  if ((e->kind == KILN_AFFINE_FLOORDIV || e->kind == KILN_AFFINE_MOD) &&
      e->ops[0]->kind == KILN_AFFINE_DIM && e->ops[0]->value < (int64_t)op->num_map_dims &&
      e->ops[1]->kind == KILN_AFFINE_CONST) {
    const kiln_kir_value_t *v = op->operands[e->ops[0]->value];
    int64_t d = e->ops[1]->value;
    if (v->def && v->def->opcode == KILN_KIR_THREAD_ID && v->def->axis == 0 && d >= 16 &&
        d < block && block % d == 0 && d > *best)
      *best = d;
  }
  for (uint32_t j = 0; j < e->n; j++) split_divisors(op, e->ops[j], block, best);
}

static void split_scan(const kiln_kir_region_t *r, int64_t block, int64_t *best, bool *sync) {
  for (size_t i = 0; i < r->ops.len && !*sync; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_BARRIER || op->opcode == KILN_KIR_SHUFFLE ||
        op->opcode == KILN_KIR_ALLOC_SHARED) {
      *sync = true;
      return;
    }
    for (uint32_t j = 0; j < op->num_regions; j++) split_scan(op->regions[j], block, best, sync);
    if (op->opcode != KILN_KIR_APPLY_INDEXING) continue;
    for (size_t ri = 0; ri < kiln_indexing_map_num_results(op->map); ri++)
      split_divisors(op, op->map->results.data[ri], block, best);
  }
}

static int64_t choose_split(const kiln_kir_func_t *k) {
  int64_t best = 0;
  bool sync = false;
  split_scan(k->body, k->block[0], &best, &sync);
  return sync ? 0 : best;
}

/* Whether segment `s` needs no loop over block axis `a` (one thread there). */
static bool thread_loop_elided(const kiln_kir_func_t *k, const seg_t *s, int a) {
  return k->block[a] == 1 && s->lo[a] == 0 && s->hi[a] >= 1;
}

/* Opens the thread loops of segment `si` (z outermost, x innermost) and makes the thread ids,
 * the linear thread id and the segment's cross-segment inputs (slot loads) available. */
static void threads_open(kir_llvm_t *L, host_t *h, int si, const bool *need, const bool *used_here,
                         tloop_t loops[3], bool open[3]) {
  seg_t *s = &h->segs.data[si];
  const kiln_kir_func_t *k = h->k;
  const kiln_kir_region_t *body = k->body;
  static const char *const kNames[] = {"tx", "ty", "tz"};
  for (int a = 2; a >= 0; a--) {
    open[a] = false;
    if (a == 0 && h->inner_for_op) {
      const kiln_kir_op_t *f = h->inner_for_op;
      loop_open_v(L, &h->inner_for, kir_llvm_get(L, f->operands[0]),
                  kir_llvm_get(L, f->operands[1]), 1, "for.iv");
      h->inner_for.stepv = kir_llvm_get(L, f->operands[2]);
      /* Rolled: after the x loop's vectorization and unrolling, LICM keeps its slots in
       * registers across this loop; the late unroller would instead copy each iteration's
       * slot load and store (no GVN runs after it). */
      h->inner_for.no_unroll = true;
      h->inner_for_open = true;
    }
    if (thread_loop_elided(k, s, a)) {
      h->tid[a] = LLVMConstInt(L->i64, 0, 0);
      continue;
    }
    bool split = a == 0 && h->split_k && !open[1] && !open[2] && s->lo[0] == 0 &&
                 s->hi[0] == k->block[0] && s->step[0] == 1;
    if (split) {
      loop_open(L, &h->split_outer, 0, k->block[0] / h->split_k, 1, "txq");
      h->split_outer.no_unroll = true;
      loop_open(L, &loops[a], 0, h->split_k, 1, "txr");
      loops[a].no_unroll = true;
      loops[a].unroll_vector = !s->shared_mem;
      open[a] = true;
      L->split_q = h->split_outer.iv;
      L->split_r = loops[a].iv;
      L->split_k = h->split_k;
      h->tid[a] = L->split_tid = LLVMBuildNUWAdd(
          L->b,
          LLVMBuildNUWMul(L->b, L->split_q, LLVMConstInt(L->i64, (unsigned long long)h->split_k, 0),
                          ""),
          L->split_r, "tx");
      continue;
    }
    loop_open(L, &loops[a], s->lo[a], s->hi[a], s->step[a], kNames[a]);
    /* Under a y or z loop, the x loop is the one to vectorize: fully unrolling it first (LLVM
     * does for small constant trip counts) leaves the y loop innermost, with strided gathers.
     * A lone x loop may unroll: SLP then vectorizes the straight-line code and the slots of
     * small blocks become registers. After vectorization the x loop of a segment that does
     * not touch shared memory may unroll: its few vector iterations become straight-line
     * code, so a `for` keeps its accumulators in registers and slot arrays indexed by
     * constants become registers (multi-row blocks' reductions); in shared-memory phases
     * (tiles) that only multiplies gathers and scatters — except in kernels whose emitter
     * asks for rolled y/z loops (host_rolled_thread_loops, the transpose): there the x vector
     * loop's few iterations unroll under the rolled y loop (0.9x -> ~1.0x a C tile loop). */
    loops[a].no_unroll = (a == 0 && (open[1] || open[2])) || (a > 0 && k->host_rolled_thread_loops);
    loops[a].unroll_vector =
        loops[a].no_unroll && (!s->shared_mem || (a == 0 && k->host_rolled_thread_loops));
    open[a] = true;
    h->tid[a] = loops[a].iv;
  }
  LLVMBuilderRef b = L->b;
  h->tid_lin = LLVMBuildAdd(
      b, h->tid[0],
      LLVMBuildMul(b, LLVMConstInt(L->i64, (unsigned long long)k->block[0], 0),
                   LLVMBuildAdd(b, h->tid[1],
                                LLVMBuildMul(b, LLVMConstInt(L->i64, (unsigned long long)k->block[1], 0),
                                             h->tid[2], ""), ""), ""), "");
  h->in_thread_loop = true;
  for (size_t i = 0; i < body->ops.len - 1; i++) {
    const kiln_kir_op_t *op = body->ops.data[i];
    if (h->kind[i] == K_TID) kir_llvm_set(L, op->results[0], h->tid[op->axis]);
    for (uint32_t j = 0; j < op->num_results; j++) {
      const kiln_kir_value_t *v = op->results[j];
      if (need[v->id] && used_here[v->id] && h->seg_of[v->id] != si)
        kir_llvm_set(L, v, slot_load(L, h, v));
    }
  }
}

static void threads_close(kir_llvm_t *L, host_t *h, tloop_t loops[3], const bool open[3]) {
  h->in_thread_loop = false;
  for (int a = 0; a < 3; a++) {
    if (open[a]) loop_close(L, &loops[a]);
    if (a == 0 && L->split_tid) {
      loop_close(L, &h->split_outer);
      L->split_tid = L->split_q = L->split_r = NULL;
    }
    if (a == 0 && h->inner_for_open) {
      loop_close(L, &h->inner_for);
      h->inner_for_open = false;
    }
  }
}

/* Emits a thread-loop segment. `ops` run for each thread of the bounds. */
static void emit_thread_segment(kir_llvm_t *L, host_t *h, int si, const bool *need,
                                const bool *used_here) {
  seg_t *s = &h->segs.data[si];
  const kiln_kir_region_t *body = h->k->body;
  tloop_t loops[3];
  bool open[3];
  threads_open(L, h, si, need, used_here, loops, open);
  if (s->kind == K_PRED) {
    const kiln_kir_op_t *iff = body->ops.data[s->first];
    const kiln_kir_region_t *then = iff->regions[0];
    kir_llvm_emit_ops(L, then, 0, then->ops.len - 1);
  } else {
    for (size_t i = s->first; i <= s->last && !L->status; i++)
      if (h->kind[i] == K_NORMAL) {
        const kiln_kir_op_t *op = body->ops.data[i];
        kir_llvm_emit_op(L, op);
        for (uint32_t j = 0; j < op->num_results && !L->status; j++)
          if (need[op->results[j]->id]) slot_store(L, h, op->results[j]);
      }
  }
  threads_close(L, h, loops, open);
}

/* A top-level `for` with uniform bounds, interchanged with the thread loops so that the
 * threads stay innermost (DESIGN.md "Host lowering"):
 *   threads { acc_j[tid] = init_j }
 *   for iv in [lb, ub) step st { threads { iter args = acc_j[tid]; body; acc_j[tid] = yield_j } }
 * The accumulators are the slot arrays of the loop's results (every non-tensor result has
 * one), so later segments read them like any cross-segment value. Each thread still runs
 * its iterations in order; only the interleaving between threads changes, which a phase
 * without barriers does not observe. */
static void emit_for_segment(kir_llvm_t *L, host_t *h, int si, const bool *need,
                             const bool *used_here) {
  seg_t *s = &h->segs.data[si];
  const kiln_kir_op_t *op = h->k->body->ops.data[s->first];
  const kiln_kir_region_t *r = op->regions[0];
  const kiln_kir_op_t *yield = r->ops.data[r->ops.len - 1];
  uint32_t n = op->num_results;
  tloop_t loops[3];
  bool open[3];
  threads_open(L, h, si, need, used_here, loops, open);
  for (uint32_t i = 0; i < n && !L->status; i++) {
    const kiln_kir_value_t *res = op->results[i];
    if (res->type->kind == KILN_KIR_TYPE_TENSOR) continue;
    kir_llvm_set(L, res, kir_llvm_get(L, op->operands[3 + i]));
    slot_store(L, h, res);
  }
  threads_close(L, h, loops, open);
  /* Under y or z thread loops the `for` goes between them and the x loop: the x loop stays
   * innermost (vectorized), and its accumulators' slots are the same in every iteration of
   * the `for`, so they stay in registers across it (with the `for` outside, every step
   * loaded and stored them: the column reduction's 32 x 32 block). Not for a body that
   * starts with barriers: every thread must end an iteration before any starts the next. */
  size_t first = 0;
  while (first + 1 < r->ops.len && r->ops.data[first]->opcode == KILN_KIR_BARRIER) first++;
  bool inner = first == 0 && (!thread_loop_elided(h->k, s, 1) || !thread_loop_elided(h->k, s, 2));
  tloop_t it;
  if (inner)
    h->inner_for_op = op;
  else {
    loop_open_v(L, &it, kir_llvm_get(L, op->operands[0]), kir_llvm_get(L, op->operands[1]), 1,
                "for.iv");
    it.stepv = kir_llvm_get(L, op->operands[2]);
    it.no_unroll = h->k->host_rolled_for_loops;
  }
  threads_open(L, h, si, need, used_here, loops, open);
  h->inner_for_op = NULL;
  kir_llvm_set(L, r->args[0], inner ? h->inner_for.iv : it.iv);
  for (uint32_t i = 0; i < n; i++)
    if (op->results[i]->type->kind != KILN_KIR_TYPE_TENSOR)
      kir_llvm_set(L, r->args[1 + i], slot_load(L, h, op->results[i]));
  /* Leading barriers (leading_barriers_only) are skipped: the iteration boundary is one, and
   * their results are tensors, which resolve to their roots. */
  kir_llvm_emit_ops(L, r, first, r->ops.len - 1);
  for (uint32_t i = 0; i < n && !L->status; i++) {
    const kiln_kir_value_t *res = op->results[i];
    if (res->type->kind == KILN_KIR_TYPE_TENSOR) continue;
    kir_llvm_set(L, res, kir_llvm_get(L, yield->operands[i]));
    slot_store(L, h, res);
  }
  threads_close(L, h, loops, open);
  if (!inner) loop_close(L, &it);
  /* Results are read from their slots from here on. */
  for (uint32_t i = 0; i < n; i++)
    if (op->results[i]->type->kind != KILN_KIR_TYPE_TENSOR) kir_llvm_set(L, op->results[i], NULL);
}

/* The warp lane a shuffle reads for lane i. */
static int shuffle_src(const kiln_kir_op_t *op, int i) {
  int w = op->width, off = op->offset, base = i & ~(w - 1), in = i & (w - 1);
  switch (op->shuffle) {
    case KILN_KIR_SHUFFLE_DOWN: return in + off < w ? i + off : i;
    case KILN_KIR_SHUFFLE_UP: return in >= off ? i - off : i;
    case KILN_KIR_SHUFFLE_XOR: {
      int j = i ^ off;
      return j <= base + w - 1 ? j : i;
    }
    default: return base + (off & (w - 1));
  }
}

static void emit_shuffle_segment(kir_llvm_t *L, host_t *h, const kiln_kir_op_t *op) {
  LLVMBuilderRef b = L->b;
  const kiln_kir_value_t *x = op->operands[0], *r = op->results[0];
  if (!h->slot[x->id] || !h->slot[r->id]) {
    kir_llvm_fail(L, KILN_ERR_UNIMPLEMENTED("kir->host: shuffle of a thread id"));
    return;
  }
  LLVMTypeRef et = h->slot_t[x->id];
  unsigned al = (unsigned)(LLVMABISizeOfType(LLVMGetModuleDataLayout(L->mod), et));
  /* A vector of i1 / i2 / i4 is bit-packed while each slot of the array holds a whole byte:
   * move such elements as the bytes they are stored in (the shuffle only moves bits). */
  if (LLVMGetTypeKind(et) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(et) % 8 != 0)
    et = LLVMIntTypeInContext(LLVMGetModuleContext(L->mod), 8 * al);
  LLVMTypeRef vt = LLVMVectorType(et, 32);
  LLVMValueRef mask[32];
  for (int i = 0; i < 32; i++) mask[i] = LLVMConstInt(L->i32, (unsigned)shuffle_src(op, i), 0);
  LLVMValueRef mv = LLVMConstVector(mask, 32);
  int64_t nwarps = (h->nthreads + 31) / 32;
  tloop_t w;
  loop_open(L, &w, 0, nwarps, 1, "warp");
  LLVMValueRef base = LLVMBuildMul(b, w.iv, LLVMConstInt(L->i64, 32, 0), "");
  LLVMValueRef ld = LLVMBuildLoad2(b, vt, LLVMBuildInBoundsGEP2(b, et, h->slot[x->id], &base, 1, ""), "");
  LLVMSetAlignment(ld, al);
  LLVMValueRef sh = LLVMBuildShuffleVector(b, ld, LLVMGetUndef(vt), mv, "");
  LLVMValueRef st = LLVMBuildStore(b, sh, LLVMBuildInBoundsGEP2(b, et, h->slot[r->id], &base, 1, ""));
  LLVMSetAlignment(st, al);
  loop_close(L, &w);
}

/* ---- warp chains ----
 *
 * A row reduction's tail is a run of shuffles, each followed by an op or two combining the
 * shuffled value with the thread's own (shuffle down 16, add, shuffle down 8, add, ...).
 * Segment by segment that is a warp loop and a full thread loop per step, ten loops for a
 * 32-lane tree, which LLVM vectorizes and unrolls one by one: about two thirds of the LLVM
 * instructions executed compiling a row reduction kernel. Such a run is emitted instead as
 * one warp loop whose body holds a warp's 32 threads as the lanes of one vector: each
 * shuffle a shufflevector, each op the vector op. Only plain element-wise arithmetic on 32- and
 * 64-bit scalars qualifies (what the vector form computes lane by lane is then exactly what
 * the scalar thread loop computes); anything else keeps the segment form. */

static bool chain_elem(const kiln_kir_type_t *t) {
  if (t->kind != KILN_KIR_TYPE_SCALAR) return false;
  switch (t->elem) {
    case KILN_F32:
    case KILN_F64:
    case KILN_S32:
    case KILN_S64:
    case KILN_U32:
    case KILN_U64:
      return true;
    default:
      return false;
  }
}

static bool chain_opcode(kiln_kir_opcode_t op, bool fp) {
  switch (op) {
    case KILN_KIR_ADD:
    case KILN_KIR_SUB:
    case KILN_KIR_MUL:
    case KILN_KIR_MIN:
    case KILN_KIR_MAX:
      return true;
    case KILN_KIR_AND:
    case KILN_KIR_OR:
    case KILN_KIR_XOR:
      return !fp;
    default:
      return false;
  }
}

/* Whether `v`, used in the chain starting at segment `first`, is available per warp: made in
 * the chain, read from its slot (made by an earlier segment) or uniform (splat). */
static bool chain_operand(const host_t *h, const kiln_kir_value_t *v, size_t first) {
  if (!chain_elem(v->type)) return false;
  if (h->uniform[v->id]) return true;
  int d = h->seg_of[v->id];
  return d >= 0 && (d >= (int)first || h->slot[v->id]);
}

static bool chain_segment(const host_t *h, size_t si, size_t first) {
  const seg_t *s = &h->segs.data[si];
  const kiln_kir_region_t *body = h->k->body;
  if (s->kind == K_SHUFFLE) {
    const kiln_kir_op_t *op = body->ops.data[s->first];
    return chain_elem(op->results[0]->type) && chain_operand(h, op->operands[0], first);
  }
  if (s->kind != K_NORMAL) return false;
  for (size_t i = s->first; i <= s->last; i++) {
    if (h->kind[i] != K_NORMAL) continue;
    const kiln_kir_op_t *op = body->ops.data[i];
    if (op->num_results != 1 || op->num_regions || op->num_operands != 2) return false;
    const kiln_kir_type_t *t = op->results[0]->type;
    if (!chain_elem(t) || !chain_opcode(op->opcode, t->elem == KILN_F32 || t->elem == KILN_F64))
      return false;
    for (uint32_t j = 0; j < 2; j++)
      if (op->operands[j]->type->elem != t->elem || !chain_operand(h, op->operands[j], first))
        return false;
  }
  return true;
}

/* The last segment of the warp chain starting at shuffle segment `s` (s itself: none). A chain
 * is at least a shuffle and the segment using it. */
static size_t chain_end(const host_t *h, size_t s) {
  if (h->segs.data[s].kind != K_SHUFFLE || !chain_segment(h, s, s)) return s;
  size_t e = s;
  while (e + 1 < h->segs.len && chain_segment(h, e + 1, s)) e++;
  while (e > s && h->segs.data[e].kind == K_SHUFFLE) e--; /* end on ops, not a lone shuffle */
  return e;
}

typedef struct chain {
  LLVMValueRef *vec; /* per value id: the warp's lanes in this iteration, or NULL */
  LLVMValueRef base; /* first thread of the warp */
} chain_t;

static LLVMValueRef chain_get(kir_llvm_t *L, host_t *h, chain_t *c, const kiln_kir_value_t *v) {
  if (c->vec[v->id]) return c->vec[v->id];
  LLVMBuilderRef b = L->b;
  LLVMTypeRef et = kir_llvm_repr(L, v->type), vt = LLVMVectorType(et, 32);
  LLVMValueRef x;
  if (h->uniform[v->id]) {
    LLVMValueRef one = LLVMBuildInsertElement(b, LLVMGetUndef(vt), kir_llvm_get(L, v),
                                              LLVMConstInt(L->i32, 0, 0), "");
    x = LLVMBuildShuffleVector(b, one, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(L->i32, 32)),
                               "");
  } else {
    x = LLVMBuildLoad2(b, vt, LLVMBuildInBoundsGEP2(b, et, h->slot[v->id], &c->base, 1, ""), "");
    LLVMSetAlignment(x, (unsigned)LLVMABISizeOfType(LLVMGetModuleDataLayout(L->mod), et));
  }
  c->vec[v->id] = x;
  return x;
}

static void chain_put(kir_llvm_t *L, host_t *h, chain_t *c, const bool *need,
                      const kiln_kir_value_t *v, LLVMValueRef x) {
  c->vec[v->id] = x;
  if (!need[v->id] || !h->slot[v->id]) return;
  LLVMTypeRef et = h->slot_t[v->id];
  LLVMValueRef st =
      LLVMBuildStore(L->b, x, LLVMBuildInBoundsGEP2(L->b, et, h->slot[v->id], &c->base, 1, ""));
  LLVMSetAlignment(st, (unsigned)LLVMABISizeOfType(LLVMGetModuleDataLayout(L->mod), et));
}

/* The vector form of scalar_op (kir_llvm.c) for chain_opcode's ops. */
static LLVMValueRef chain_op(kir_llvm_t *L, const kiln_kir_op_t *op, LLVMValueRef x,
                             LLVMValueRef y) {
  LLVMBuilderRef b = L->b;
  kiln_elem_type_t e = op->results[0]->type->elem;
  bool fp = e == KILN_F32 || e == KILN_F64, sgn = e == KILN_S32 || e == KILN_S64;
  LLVMTypeRef vt = LLVMTypeOf(x);
  LLVMValueRef args[2] = {x, y};
  switch (op->opcode) {
    case KILN_KIR_ADD:
      return fp ? LLVMBuildFAdd(b, x, y, "") : LLVMBuildAdd(b, x, y, "");
    case KILN_KIR_SUB:
      return fp ? LLVMBuildFSub(b, x, y, "") : LLVMBuildSub(b, x, y, "");
    case KILN_KIR_MUL:
      return fp ? LLVMBuildFMul(b, x, y, "") : LLVMBuildMul(b, x, y, "");
    case KILN_KIR_AND:
      return LLVMBuildAnd(b, x, y, "");
    case KILN_KIR_OR:
      return LLVMBuildOr(b, x, y, "");
    case KILN_KIR_XOR:
      return LLVMBuildXor(b, x, y, "");
    default:
      break;
  }
  bool min = op->opcode == KILN_KIR_MIN;
  if (fp) return kir_llvm_intrinsic(L, min ? "llvm.minimum" : "llvm.maximum", &vt, 1, args, 2);
  LLVMIntPredicate p = min ? (sgn ? LLVMIntSLT : LLVMIntULT) : (sgn ? LLVMIntSGT : LLVMIntUGT);
  return LLVMBuildSelect(b, LLVMBuildICmp(b, p, x, y, ""), x, y, "");
}

/* Segments [first, last] (chain_end) as one warp loop. */
static void emit_warp_chain(kir_llvm_t *L, host_t *h, size_t first, size_t last, const bool *need) {
  const kiln_kir_region_t *body = h->k->body;
  chain_t c = {.vec = kiln_calloc(L->km->next_value_id + 1, sizeof(LLVMValueRef))};
  tloop_t w;
  loop_open(L, &w, 0, (h->nthreads + 31) / 32, 1, "warp");
  w.unroll_full = (h->nthreads + 31) / 32 <= KIR_HOST_UNROLLED_WARPS;
  c.base = LLVMBuildMul(L->b, w.iv, LLVMConstInt(L->i64, 32, 0), "");
  for (size_t si = first; si <= last && !L->status; si++) {
    const seg_t *s = &h->segs.data[si];
    for (size_t i = s->first; i <= s->last && !L->status; i++) {
      const kiln_kir_op_t *op = body->ops.data[i];
      if (s->kind == K_SHUFFLE) {
        LLVMValueRef mask[32];
        for (int l = 0; l < 32; l++)
          mask[l] = LLVMConstInt(L->i32, (unsigned)shuffle_src(op, l), 0);
        LLVMValueRef x = chain_get(L, h, &c, op->operands[0]);
        chain_put(L, h, &c, need, op->results[0],
                  LLVMBuildShuffleVector(L->b, x, LLVMGetUndef(LLVMTypeOf(x)),
                                         LLVMConstVector(mask, 32), ""));
      } else if (h->kind[i] == K_NORMAL) {
        LLVMValueRef x = chain_get(L, h, &c, op->operands[0]),
                     y = chain_get(L, h, &c, op->operands[1]);
        chain_put(L, h, &c, need, op->results[0], chain_op(L, op, x, y));
      }
    }
  }
  loop_close(L, &w);
  kiln_free(c.vec);
}

/* The block ids of linear block `blk` (x fastest). The caller runs blocks in
 * [0, grid x * y * z) (base/host_pool.h), so a wrap-around that cannot happen is left out:
 * with y = z = 1 the x id is `blk` itself, with z = 1 the y id is blk / x. An id LLVM would
 * see as `blk urem C` is no affine function of the loop's induction variable, which costs
 * scalar evolution, loop strength reduction and the address arithmetic of every access. */
static void block_ids(kir_llvm_t *L, const kiln_kir_func_t *k, LLVMValueRef blk,
                      LLVMValueRef bid[3]) {
  LLVMBuilderRef b = L->b;
  uint64_t gx = (uint64_t)k->grid[0], gy = (uint64_t)k->grid[1], gz = (uint64_t)k->grid[2];
  LLVMValueRef cx = LLVMConstInt(L->i64, gx, 0), cy = LLVMConstInt(L->i64, gy, 0);
  LLVMValueRef zero = LLVMConstInt(L->i64, 0, 0);
  if (gx <= 1)
    bid[0] = zero;
  else if (gy * gz <= 1)
    bid[0] = blk;
  else
    bid[0] = LLVMBuildURem(b, blk, cx, "bid.x");
  if (gy <= 1)
    bid[1] = zero;
  else {
    LLVMValueRef q = gx <= 1 ? blk : LLVMBuildUDiv(b, blk, cx, "");
    bid[1] = gz <= 1 ? q : LLVMBuildURem(b, q, cy, "bid.y");
  }
  bid[2] = gz <= 1 ? zero : LLVMBuildUDiv(b, blk, LLVMConstInt(L->i64, gx * gy, 0), "bid.z");
}

static kiln_status lower_kernel(kir_llvm_t *L, host_t *h, LLVMValueRef fn) {
  const kiln_kir_func_t *k = h->k;
  const kiln_kir_region_t *body = k->body;
  const kiln_kir_module_t *km = L->km;
  size_t nops = body->ops.len - 1;
  LLVMBuilderRef b = L->b;
  h->nthreads = k->block[0] * k->block[1] * k->block[2];
  KILN_RETURN_IF_ERROR_PLAIN(classify(L, h));

  /* Defining segments of per-thread values. */
  for (size_t s = 0; s < h->segs.len; s++) {
    seg_t *sg = &h->segs.data[s];
    for (size_t i = sg->first; i <= sg->last; i++) {
      if (h->kind[i] != K_NORMAL && h->kind[i] != K_SHUFFLE && h->kind[i] != K_PRED &&
          h->kind[i] != K_FOR)
        continue;
      const kiln_kir_op_t *op = body->ops.data[i];
      for (uint32_t j = 0; j < op->num_results; j++) h->seg_of[op->results[j]->id] = (int)s;
    }
  }
  bool *need = kiln_calloc(km->next_value_id + 1, sizeof(bool));
  bool **used = kiln_calloc(h->segs.len + 1, sizeof(bool *));
  for (size_t s = 0; s < h->segs.len; s++) {
    used[s] = kiln_calloc(km->next_value_id + 1, sizeof(bool));
    seg_t *sg = &h->segs.data[s];
    kiln_kir_region_t tmp = {0};
    /* The ops of the segment as a pseudo-region for use marking. */
    KILN_VEC(kiln_kir_op_t *) list = {0};
    if (sg->kind == K_PRED) {
      const kiln_kir_region_t *then = body->ops.data[sg->first]->regions[0];
      for (size_t i = 0; i < then->ops.len; i++) kiln_vec_push(&list, then->ops.data[i]);
    } else {
      for (size_t i = sg->first; i <= sg->last; i++)
        if (h->kind[i] == K_NORMAL || h->kind[i] == K_SHUFFLE || h->kind[i] == K_FOR)
          kiln_vec_push(&list, body->ops.data[i]);
    }
    tmp.ops.data = list.data;
    tmp.ops.len = list.len;
    for (size_t i = 0; i < list.len; i++) sg->shared_mem |= touches_shared(list.data[i]);
    mark_uses(h, &tmp, (int)s, used[s]);
    for (uint32_t id = 0; id < km->next_value_id; id++)
      if (used[s][id]) need[id] = true;
    if (sg->kind == K_SHUFFLE) need[body->ops.data[sg->first]->results[0]->id] = true;
    if (sg->kind == K_FOR) {
      const kiln_kir_op_t *fo = body->ops.data[sg->first];
      for (uint32_t j = 0; j < fo->num_results; j++)
        if (fo->results[j]->type->kind != KILN_KIR_TYPE_TENSOR) need[fo->results[j]->id] = true;
    }
    kiln_vec_free(&list);
  }
  /* The final return and the uses after the last segment are tensors (roots). */

  /* Entry block: params, slots, shared memory. */
  L->entry = LLVMAppendBasicBlockInContext(L->ctx, fn, "entry");
  L->fn = fn;
  LLVMPositionBuilderAtEnd(b, L->entry);
  for (uint32_t i = 0; i < body->num_args; i++) kir_llvm_set(L, body->args[i], LLVMGetParam(fn, i));
  for (size_t i = 0; i < nops; i++) {
    const kiln_kir_op_t *op = body->ops.data[i];
    if (h->kind[i] == K_SHARED) {
      const kiln_kir_type_t *t = op->results[0]->type;
      kir_llvm_set(L, op->results[0],
                   kir_llvm_entry_alloca(L, kir_llvm_tensor_slot(L, t), kiln_kir_type_num_elements(t), 64));
    }
    for (uint32_t j = 0; j < op->num_results; j++) {
      const kiln_kir_value_t *v = op->results[j];
      if (!need[v->id]) continue;
      LLVMTypeRef t = kir_llvm_repr(L, v->type);
      if (t == L->i1) t = L->i8;
      h->slot_t[v->id] = t;
      h->slot[v->id] = kir_llvm_entry_alloca(L, t, h->nthreads + 32, 64);
    }
  }
  kir_llvm_compute_roots(L, k);
  /* Block loop. */
  tloop_t bl;
  loop_open_v(L, &bl, LLVMGetParam(fn, body->num_args), LLVMGetParam(fn, body->num_args + 1), 1,
              "blk");
  block_ids(L, k, bl.iv, h->bid);
  for (size_t i = 0; i < nops && !L->status; i++) {
    const kiln_kir_op_t *op = body->ops.data[i];
    if (h->kind[i] == K_UNIFORM) kir_llvm_emit_op(L, op);
    else if (h->kind[i] == K_SHUFFLE_UNIFORM)
      kir_llvm_set(L, op->results[0], kir_llvm_get(L, op->operands[0]));
  }
  for (size_t s = 0; s < h->segs.len && !L->status; s++) {
    seg_t *sg = &h->segs.data[s];
    size_t end = chain_end(h, s);
    if (end > s) {
      emit_warp_chain(L, h, s, end, need);
      s = end;
    } else if (sg->kind == K_SHUFFLE)
      emit_shuffle_segment(L, h, body->ops.data[sg->first]);
    else if (sg->kind == K_FOR) emit_for_segment(L, h, (int)s, need, used[s]);
    else emit_thread_segment(L, h, (int)s, need, used[s]);
  }
  loop_close(L, &bl);
  LLVMBuildRetVoid(b);
  for (size_t s = 0; s < h->segs.len; s++) kiln_free(used[s]);
  kiln_free(used);
  kiln_free(need);
  return NULL;
}

/* Kernels, their subgraphs and the library functions they call never unwind (C ABI, no
 * exceptions): nounwind on every function, so code generation emits no unwind table at either
 * tier (O3's function-attrs inferred it for the kernels; the small tier's three passes do not)
 * and kiln's ELF loader registers none with libgcc. (libgcc's __register_frame'd tables are
 * sorted lazily, with malloc, under its lock: a malloc hook that unwinds then, as ASan's
 * fast_unwind_on_malloc=0 does, deadlocks.) */
static void mark_nounwind(LLVMContextRef ctx, LLVMModuleRef mod) {
  unsigned nu = LLVMGetEnumAttributeKindForName("nounwind", 8);
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, nu, 0));
}

kiln_status kiln_kir_lower_host(const kiln_kir_module_t *m, LLVMContextRef ctx, LLVMModuleRef *out) {
  char *features = LLVMGetHostCPUFeatures();
  kiln_status s = kiln_kir_lower_host_for(m, ctx, features, out);
  LLVMDisposeMessage(features);
  return s;
}

kiln_status kiln_kir_lower_host_for(const kiln_kir_module_t *m, LLVMContextRef ctx,
                                    const char *features, LLVMModuleRef *out) {
  if (!features) return kiln_kir_lower_host(m, ctx, out);
  *out = NULL;
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before lowering for the host");
  const kiln_kir_func_t *k = kiln_kir_module_kernel(m);
  if (!k) return KILN_ERR_INVALID("kir->host: module %s has no kernel", m->name);
  kir_llvm_t L;
  kir_llvm_init(&L, m, &kHost, ctx, 64);
  L.wide_tile_slots = kiln_host_feature_on(features, "avx512f");
  host_t h = {.k = k, .split_k = choose_split(k)};
  size_t nv = m->next_value_id + 1;
  h.kind = kiln_calloc(k->body->ops.len + 1, sizeof(int));
  h.seg_of = kiln_malloc(nv * sizeof(int));
  for (size_t i = 0; i < nv; i++) h.seg_of[i] = -1;
  h.uniform = kiln_calloc(nv, 1);
  h.slot = kiln_calloc(nv, sizeof(*h.slot));
  h.slot_t = kiln_calloc(nv, sizeof(*h.slot_t));
  L.user = &h;
  /* The body goes into `<name>.impl(ptr noalias p0, ..., i64 begin, i64 end)` (always inlined)
   * so the optimizer knows the tensors do not alias; the exported wrapper unpacks args. */
  uint32_t np = k->body->num_args;
  LLVMTypeRef *it = kiln_calloc(np + 3, sizeof(*it));
  for (uint32_t i = 0; i < np; i++) it[i] = L.ptr;
  it[np] = it[np + 1] = L.i64;
  char iname[160];
  snprintf(iname, sizeof(iname), "%s.impl", k->name);
  LLVMValueRef impl = LLVMAddFunction(L.mod, iname, LLVMFunctionType(L.void_t, it, np + 2, 0));
  kiln_free(it);
  LLVMSetLinkage(impl, LLVMInternalLinkage);
  unsigned na = LLVMGetEnumAttributeKindForName("noalias", 7);
  unsigned ro = LLVMGetEnumAttributeKindForName("readonly", 8);
  unsigned ai = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
  for (uint32_t i = 0; i < np; i++) {
    LLVMAddAttributeAtIndex(impl, i + 1, LLVMCreateEnumAttribute(ctx, na, 0));
    if (!k->param_written[i]) LLVMAddAttributeAtIndex(impl, i + 1, LLVMCreateEnumAttribute(ctx, ro, 0));
  }
  LLVMAddAttributeAtIndex(impl, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, ai, 0));
  LLVMTypeRef pt[3] = {L.ptr, L.i64, L.i64};
  LLVMValueRef fn = LLVMAddFunction(L.mod, k->name, LLVMFunctionType(L.void_t, pt, 3, 0));
  {
    LLVMBasicBlockRef e = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(L.b, e);
    LLVMValueRef *cargs = kiln_calloc(np + 3, sizeof(*cargs));
    for (uint32_t i = 0; i < np; i++) {
      LLVMValueRef idx = LLVMConstInt(L.i64, i, 0);
      cargs[i] = LLVMBuildLoad2(L.b, L.ptr,
                                LLVMBuildInBoundsGEP2(L.b, L.ptr, LLVMGetParam(fn, 0), &idx, 1, ""), "");
    }
    cargs[np] = LLVMGetParam(fn, 1);
    cargs[np + 1] = LLVMGetParam(fn, 2);
    LLVMBuildCall2(L.b, LLVMGlobalGetValueType(impl), impl, cargs, np + 2, "");
    LLVMBuildRetVoid(L.b);
    kiln_free(cargs);
  }
  for (size_t i = 0; i < m->funcs.len; i++)
    if (m->funcs.data[i] == k) L.funcs[i] = impl;
  kiln_status s = NULL;
  if (kir_llvm_emit_subgraphs(&L)) s = lower_kernel(&L, &h, impl);
  if (!s) {
    s = L.status;
    L.status = NULL;
  }
  if (!s) mark_nounwind(ctx, L.mod);
  if (!s) {
    char *msg = NULL;
    if (LLVMVerifyModule(L.mod, LLVMReturnStatusAction, &msg))
      s = KILN_ERR_INTERNAL("kir->host produced invalid LLVM IR: %s", msg ? msg : "");
    LLVMDisposeMessage(msg);
  }
  kiln_status_free(L.status);
  L.status = NULL;
  kiln_vec_free(&h.segs);
  kiln_free(h.kind);
  kiln_free(h.seg_of);
  kiln_free(h.uniform);
  kiln_free(h.slot);
  kiln_free(h.slot_t);
  kir_llvm_finish(&L, s != NULL);
  if (!s) *out = L.mod;
  return s;
}
