/* Internal to compiler/codegen: the target-independent part of lowering kernel IR to LLVM IR,
 * shared by the NVPTX lowering (kir_to_llvm.c) and the host lowering (kir_to_llvm_host.c).
 *
 * Value representation: pred -> i1; integers -> iN; f32 / f64 -> float / double; f16 -> half;
 * bf16, f8 and f4 -> their storage bits (i16 / i8), computed through f32 with round to
 * nearest even after every op; index -> the target's index integer; tensors -> the pointer
 * of the buffer they come from (every tensor value is resolved to its root buffer, so
 * functional tensor updates are plain stores and tensors never need phis); vectors ->
 * <N x repr>. In memory, pred and sub-byte integers take one byte. */
#ifndef KILN_COMPILER_CODEGEN_KIR_LLVM_H_
#define KILN_COMPILER_CODEGEN_KIR_LLVM_H_

#include <llvm-c/Core.h>

#include "base/alloc.h"
#include "compiler/codegen/kir.h"

typedef struct kir_llvm kir_llvm_t;

typedef struct kir_llvm_target {
  bool nvptx;
  /* Ids (index type) for THREAD_ID / BLOCK_ID ops. */
  LLVMValueRef (*thread_id)(kir_llvm_t *L, const kiln_kir_op_t *op);
  LLVMValueRef (*block_id)(kir_llvm_t *L, const kiln_kir_op_t *op);
  /* Barrier, shuffle inside the generic emitter (NULL: the op is not allowed here). */
  bool (*barrier)(kir_llvm_t *L, const kiln_kir_op_t *op);
  LLVMValueRef (*shuffle)(kir_llvm_t *L, const kiln_kir_op_t *op, LLVMValueRef x);
  /* f32 / f64 math: unary ops (EXP ... ERF, LOGISTIC, TAN) and POW / ATAN2. */
  LLVMValueRef (*math)(kir_llvm_t *L, kiln_kir_opcode_t op, LLVMValueRef x, LLVMValueRef y,
                       bool f64);
} kir_llvm_target_t;

struct kir_llvm {
  kiln_oom_cleanup_t unwind; /* disposes the builder and module on an out-of-memory unwind */
  const kiln_kir_module_t *km;
  const kir_llvm_target_t *target;
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, void_t, idx;
  int idx_bits;
  LLVMValueRef fn;                /* function being emitted */
  LLVMBasicBlockRef entry;        /* its entry block (allocas) */
  LLVMValueRef *vals;             /* by KIR value id */
  LLVMValueRef *wide;             /* by KIR value id: the unrounded f32 value of a bf16 result
                                     (excess precision), valid while vals[id] is unchanged */
  const kiln_kir_value_t **root;  /* by KIR value id: root buffer of a tensor value */
  LLVMValueRef *funcs;            /* LLVM function per module function index */
  void *user;                     /* target state */
  kiln_status status;
  /* Element type of the float op whose f32 math is being lowered (set around target->math):
   * bf16 / f16 / f8 ops compute in f32 and round their result, so a target may use a faster
   * f32 approximation whose error that rounding cannot show. */
  kiln_elem_type_t math_elem;
  /* The host's split x thread loop (kir_to_llvm_host.c), while one is open: the thread id
   * `split_tid` is split_q * split_k + split_r, and an affine floordiv or mod of it by a
   * divisor of split_k reads the two loop variables instead of dividing the thread id. */
  LLVMValueRef split_tid, split_q, split_r;
  int64_t split_k;
  /* Host: shared tiles of 8/16-bit elements hold each element in a 32-bit slot
   * (kir_llvm_tensor_slot); set by the host lowering from the target's features. */
  bool wide_tile_slots;
};

/* Creates the lowering state for module `km` in `ctx` (module named after km). */
void kir_llvm_init(kir_llvm_t *L, const kiln_kir_module_t *km, const kir_llvm_target_t *target,
                   LLVMContextRef ctx, int idx_bits);
/* Frees the state; the LLVM module is handed to the caller (L->mod) unless `dispose`. */
void kir_llvm_finish(kir_llvm_t *L, bool dispose);
void kir_llvm_fail(kir_llvm_t *L, kiln_status s);

LLVMTypeRef kir_llvm_repr(kir_llvm_t *L, const kiln_kir_type_t *t);      /* value type */
LLVMTypeRef kir_llvm_elem_repr(kir_llvm_t *L, kiln_elem_type_t e);
LLVMTypeRef kir_llvm_elem_mem(kir_llvm_t *L, kiln_elem_type_t e);        /* memory type */
/* Type of one element slot of tensor type t in memory: the element's memory type, or on
 * the host an i32 for a shared-memory tensor of narrower elements (up to 16384 of them):
 * the vectorized thread loops then read and write the tile with 32-bit gathers / scatters,
 * which x86 has and 16/8-bit ones are not. */
LLVMTypeRef kir_llvm_tensor_slot(kir_llvm_t *L, const kiln_kir_type_t *t);

/* Computes root buffers of all tensor values of `f` into L->root. */
void kir_llvm_compute_roots(kir_llvm_t *L, const kiln_kir_func_t *f);
/* Emits the ops of `r` (all but the terminator) at the builder; the mapped operands of the
 * terminator are returned in `yielded` (may be NULL) up to `max` values. */
bool kir_llvm_emit_ops(kir_llvm_t *L, const kiln_kir_region_t *r, size_t begin, size_t end);
/* Emits one op. */
bool kir_llvm_emit_op(kir_llvm_t *L, const kiln_kir_op_t *op);
LLVMValueRef kir_llvm_get(kir_llvm_t *L, const kiln_kir_value_t *v);
void kir_llvm_set(kir_llvm_t *L, const kiln_kir_value_t *v, LLVMValueRef x);

/* Declares / emits the subgraph functions left in the module as internal LLVM functions
 * (signature: tensors as pointers, other params by value; one result returned directly, more
 * as a struct). Call after the kernel's declaration, before emitting bodies. */
bool kir_llvm_emit_subgraphs(kir_llvm_t *L);

/* An alloca of `t` (count elements) in the entry block. */
LLVMValueRef kir_llvm_entry_alloca(kir_llvm_t *L, LLVMTypeRef t, int64_t count, unsigned align);

/* Narrow float <-> f32 (value representations). */
LLVMValueRef kir_llvm_to_f32(kir_llvm_t *L, kiln_elem_type_t e, LLVMValueRef x);
LLVMValueRef kir_llvm_from_f32(kir_llvm_t *L, kiln_elem_type_t e, LLVMValueRef x);
bool kir_llvm_is_narrow_float(kiln_elem_type_t e);

/* Calls an intrinsic by name with overload types. */
LLVMValueRef kir_llvm_intrinsic(kir_llvm_t *L, const char *name, LLVMTypeRef *over, size_t nover,
                                LLVMValueRef *args, size_t nargs);
/* Declares (once) and calls an external function `name` of type ret(args...). */
LLVMValueRef kir_llvm_call_extern(kir_llvm_t *L, const char *name, LLVMTypeRef ret,
                                  LLVMValueRef *args, size_t nargs);

/* Host f32 math as inline polynomial code (kir_math_host.c). */
LLVMValueRef kir_llvm_host_math_f32(kir_llvm_t *L, kiln_kir_opcode_t op, LLVMValueRef x,
                                    LLVMValueRef y);

#endif /* KILN_COMPILER_CODEGEN_KIR_LLVM_H_ */
