/* Kernel IR -> LLVM IR for NVPTX (kiln_kir_lower_nvptx), and compilation through the NVPTX
 * backend (kiln_kir_compile_nvptx). */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Analysis.h>

#include "compiler/backend/llvm_compat.h"
#include "compiler/codegen/kir_llvm.h"
#include "compiler/codegen/kir_pipeline.h"

static LLVMValueRef sreg(kir_llvm_t *L, const char *name) {
  LLVMTypeRef ft = LLVMFunctionType(L->i32, NULL, 0, 0);
  LLVMValueRef f = LLVMGetNamedFunction(L->mod, name);
  if (!f) f = LLVMAddFunction(L->mod, name, ft);
  LLVMValueRef v = LLVMBuildCall2(L->b, ft, f, NULL, 0, "");
  return L->idx_bits == 32 ? v : LLVMBuildZExt(L->b, v, L->idx, "");
}

static LLVMValueRef nv_thread_id(kir_llvm_t *L, const kiln_kir_op_t *op) {
  static const char *const k[] = {"llvm.nvvm.read.ptx.sreg.tid.x", "llvm.nvvm.read.ptx.sreg.tid.y",
                                  "llvm.nvvm.read.ptx.sreg.tid.z"};
  return sreg(L, k[op->axis]);
}
static LLVMValueRef nv_block_id(kir_llvm_t *L, const kiln_kir_op_t *op) {
  static const char *const k[] = {"llvm.nvvm.read.ptx.sreg.ctaid.x",
                                  "llvm.nvvm.read.ptx.sreg.ctaid.y",
                                  "llvm.nvvm.read.ptx.sreg.ctaid.z"};
  return sreg(L, k[op->axis]);
}

static bool nv_barrier(kir_llvm_t *L, const kiln_kir_op_t *op) {
  LLVMTypeRef ft = LLVMFunctionType(L->void_t, NULL, 0, 0);
  LLVMValueRef f = LLVMGetNamedFunction(L->mod, "llvm.nvvm.barrier0");
  if (!f) f = LLVMAddFunction(L->mod, "llvm.nvvm.barrier0", ft);
  LLVMBuildCall2(L->b, ft, f, NULL, 0, "");
  return true;
}

/* One 32-bit shuffle: llvm.nvvm.shfl.sync.<mode>.i32(mask, v, b, c). */
static LLVMValueRef shfl32(kir_llvm_t *L, const kiln_kir_op_t *op, LLVMValueRef v) {
  static const char *const k[] = {"llvm.nvvm.shfl.sync.down.i32", "llvm.nvvm.shfl.sync.up.i32",
                                  "llvm.nvvm.shfl.sync.bfly.i32", "llvm.nvvm.shfl.sync.idx.i32"};
  const char *name = k[op->shuffle];
  LLVMTypeRef ps[4] = {L->i32, L->i32, L->i32, L->i32};
  LLVMTypeRef ft = LLVMFunctionType(L->i32, ps, 4, 0);
  LLVMValueRef f = LLVMGetNamedFunction(L->mod, name);
  if (!f) f = LLVMAddFunction(L->mod, name, ft);
  uint32_t c = (uint32_t)(32 - op->width) << 8;
  if (op->shuffle != KILN_KIR_SHUFFLE_UP) c |= 0x1f;
  LLVMValueRef args[4] = {LLVMConstInt(L->i32, 0xffffffffu, 0), v,
                          LLVMConstInt(L->i32, (unsigned)op->offset, 0), LLVMConstInt(L->i32, c, 0)};
  return LLVMBuildCall2(L->b, ft, f, args, 4, "");
}

static LLVMValueRef nv_shuffle(kir_llvm_t *L, const kiln_kir_op_t *op, LLVMValueRef x) {
  LLVMBuilderRef b = L->b;
  LLVMTypeRef t = LLVMTypeOf(x);
  unsigned bits = LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t)
                  : t == L->f64                             ? 64
                  : t == L->f16                             ? 16
                                                            : 32;
  LLVMTypeRef it = LLVMIntTypeInContext(L->ctx, bits);
  LLVMValueRef xi = LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? x : LLVMBuildBitCast(b, x, it, "");
  LLVMValueRef r;
  if (bits <= 32) {
    LLVMValueRef w = bits == 32 ? xi : LLVMBuildZExt(b, xi, L->i32, "");
    r = shfl32(L, op, w);
    if (bits < 32) r = LLVMBuildTrunc(b, r, it, "");
  } else {
    LLVMValueRef lo = LLVMBuildTrunc(b, xi, L->i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(b, LLVMBuildLShr(b, xi, LLVMConstInt(L->i64, 32, 0), ""), L->i32, "");
    lo = LLVMBuildZExt(b, shfl32(L, op, lo), L->i64, "");
    hi = LLVMBuildZExt(b, shfl32(L, op, hi), L->i64, "");
    r = LLVMBuildOr(b, lo, LLVMBuildShl(b, hi, LLVMConstInt(L->i64, 32, 0), ""), "");
  }
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? r : LLVMBuildBitCast(b, r, t, "");
}

static LLVMValueRef nv_math(kir_llvm_t *L, kiln_kir_opcode_t op, LLVMValueRef x, LLVMValueRef y,
                            bool f64) {
  const char *base;
  switch (op) {
    case KILN_KIR_EXP: base = "exp"; break;
    case KILN_KIR_EXPM1: base = "expm1"; break;
    case KILN_KIR_LOG: base = "log"; break;
    case KILN_KIR_LOG1P: base = "log1p"; break;
    case KILN_KIR_TANH: base = "tanh"; break;
    case KILN_KIR_SIN: base = "sin"; break;
    case KILN_KIR_COS: base = "cos"; break;
    case KILN_KIR_TAN: base = "tan"; break;
    case KILN_KIR_RSQRT: base = "rsqrt"; break;
    case KILN_KIR_CBRT: base = "cbrt"; break;
    case KILN_KIR_ERF: base = "erf"; break;
    case KILN_KIR_POW: base = "pow"; break;
    case KILN_KIR_ATAN2: base = "atan2"; break;
    case KILN_KIR_LOGISTIC: {
      /* 1 / (1 + exp(-x)) */
      LLVMTypeRef t = f64 ? L->f64 : L->f32;
      LLVMValueRef e = nv_math(L, KILN_KIR_EXP, LLVMBuildFNeg(L->b, x, ""), NULL, f64);
      return LLVMBuildFDiv(L->b, LLVMConstReal(t, 1.0),
                           LLVMBuildFAdd(L->b, LLVMConstReal(t, 1.0), e, ""), "");
    }
    default:
      kir_llvm_fail(L, KILN_ERR_UNIMPLEMENTED("kir->nvptx: no math for %s", kiln_kir_opcode_name(op)));
      return x;
  }
  char name[32];
  snprintf(name, sizeof(name), "__nv_%s%s", base, f64 ? "" : "f");
  LLVMValueRef args[2] = {x, y};
  return kir_llvm_call_extern(L, name, f64 ? L->f64 : L->f32, args, y ? 2 : 1);
}

static const kir_llvm_target_t kNvptx = {
    .nvptx = true,
    .thread_id = nv_thread_id,
    .block_id = nv_block_id,
    .barrier = nv_barrier,
    .shuffle = nv_shuffle,
    .math = nv_math,
};

static void add_attr(kir_llvm_t *L, LLVMValueRef fn, unsigned idx, const char *name, uint64_t v) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(L->ctx, kind, v));
}

/* Shared tensors become addrspace(3) globals. */
static void shared_globals(kir_llvm_t *L, const kiln_kir_region_t *r, int *counter) {
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_ALLOC_SHARED) {
      const kiln_kir_type_t *t = op->results[0]->type;
      LLVMTypeRef at = LLVMArrayType2(kir_llvm_elem_mem(L, t->elem),
                                      (uint64_t)kiln_kir_type_num_elements(t));
      char name[64];
      snprintf(name, sizeof(name), "__kiln_shmem_%d", (*counter)++);
      LLVMValueRef g = LLVMAddGlobalInAddressSpace(L->mod, at, name, 3);
      LLVMSetInitializer(g, LLVMGetUndef(at));
      LLVMSetLinkage(g, LLVMInternalLinkage);
      LLVMSetAlignment(g, 16);
      kir_llvm_set(L, op->results[0], g);
    }
    for (uint32_t j = 0; j < op->num_regions; j++) shared_globals(L, op->regions[j], counter);
  }
}

/* Marks the kernel parameters that ops of `r` read (extract, vload, atomics, calls taking
 * the tensor) in `read`, and sets *barrier when `r` holds a barrier. Needs L->root. */
static void scan_param_reads(kir_llvm_t *L, const kiln_kir_func_t *k, const kiln_kir_region_t *r,
                             bool *read, bool *barrier) {
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_BARRIER) *barrier = true;
    bool reads = op->opcode == KILN_KIR_EXTRACT || op->opcode == KILN_KIR_VLOAD ||
                 op->opcode == KILN_KIR_CALL || op->opcode == KILN_KIR_ATOMIC_RMW ||
                 op->opcode == KILN_KIR_ATOMIC_CAS;
    for (uint32_t j = 0; reads && j < op->num_operands; j++) {
      const kiln_kir_value_t *v = op->operands[j];
      if (v->type->kind != KILN_KIR_TYPE_TENSOR) continue;
      if (L->root[v->id]) v = L->root[v->id];
      for (uint32_t a = 0; a < k->body->num_args; a++)
        if (k->body->args[a] == v) read[a] = true;
    }
    for (uint32_t j = 0; j < op->num_regions; j++) scan_param_reads(L, k, op->regions[j], read, barrier);
  }
}

/* Parameter attributes: every tensor is noalias (buffers do not overlap) and 16-byte aligned;
 * unwritten ones are readonly. Except: a tensor the kernel writes and reads in a kernel with
 * barriers is how its threads exchange data through global memory (the sort emitter's rows
 * past shared memory). It is not noalias: llvm.nvvm.barrier0 does not take the pointer, so
 * under noalias LLVM may assume the barrier leaves it untouched and forward, drop or move
 * loads and stores of other threads' elements across it. */
static void param_attributes(kir_llvm_t *L, const kiln_kir_func_t *k, LLVMValueRef fn) {
  uint32_t np = k->body->num_args;
  bool *read = kiln_calloc(np + 1, sizeof(*read));
  bool barrier = false;
  scan_param_reads(L, k, k->body, read, &barrier);
  for (uint32_t i = 0; i < np; i++) {
    if (!(barrier && k->param_written[i] && read[i])) add_attr(L, fn, i + 1, "noalias", 0);
    add_attr(L, fn, i + 1, "align", 16);
    if (!k->param_written[i]) add_attr(L, fn, i + 1, "readonly", 0);
  }
  kiln_free(read);
}

/* i32 indices when every tensor and the launch fit. */
static int index_bits(const kiln_kir_module_t *m, const kiln_kir_func_t *k) {
  int64_t lim = INT32_MAX;
  if (k->block[0] * k->block[1] * k->block[2] > lim || k->grid[0] > lim || k->grid[1] > 65535 ||
      k->grid[2] > 65535)
    return 64;
  if (k->grid[0] * k->block[0] > lim) return 64;
  for (size_t i = 0; i < m->funcs.len; i++) {
    const kiln_kir_func_t *f = m->funcs.data[i];
    for (uint32_t a = 0; a < f->body->num_args; a++)
      if (kiln_kir_type_num_elements(f->body->args[a]->type) > lim) return 64;
  }
  return 32;
}

kiln_status kiln_kir_lower_nvptx(const kiln_kir_module_t *m, LLVMContextRef ctx,
                                 LLVMTargetMachineRef tm, LLVMModuleRef *out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before lowering to NVPTX");
  const kiln_kir_func_t *k = kiln_kir_module_kernel(m);
  if (!k) return KILN_ERR_INVALID("kir->nvptx: module %s has no kernel", m->name);
  kir_llvm_t L;
  kir_llvm_init(&L, m, &kNvptx, ctx, index_bits(m, k));
  LLVMSetTarget(L.mod, "nvptx64-nvidia-cuda");
  if (tm) {
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    char *dl = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(L.mod, dl);
    LLVMDisposeMessage(dl);
    LLVMDisposeTargetData(td);
  }
  uint32_t np = k->body->num_args;
  LLVMTypeRef *pt = kiln_calloc(np + 1, sizeof(*pt));
  for (uint32_t i = 0; i < np; i++) pt[i] = L.ptr;
  LLVMValueRef fn = LLVMAddFunction(L.mod, k->name, LLVMFunctionType(L.void_t, pt, np, 0));
  kiln_free(pt);
  kiln_llvm_mark_ptx_kernel(fn);
  kiln_nvptx_set_max_threads(fn, (unsigned)k->block[0], (unsigned)k->block[1],
                             (unsigned)k->block[2]);
  for (size_t i = 0; i < m->funcs.len; i++)
    if (m->funcs.data[i] == k) L.funcs[i] = fn;
  if (kir_llvm_emit_subgraphs(&L)) {
    L.fn = fn;
    L.entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(L.b, L.entry);
    kir_llvm_compute_roots(&L, k);
    param_attributes(&L, k, fn);
    for (uint32_t i = 0; i < np; i++) kir_llvm_set(&L, k->body->args[i], LLVMGetParam(fn, i));
    int counter = 0;
    shared_globals(&L, k->body, &counter);
    if (kir_llvm_emit_ops(&L, k->body, 0, k->body->ops.len - 1)) LLVMBuildRetVoid(L.b);
  }
  kiln_status s = L.status;
  L.status = NULL;
  if (!s) {
    char *msg = NULL;
    if (LLVMVerifyModule(L.mod, LLVMReturnStatusAction, &msg))
      s = KILN_ERR_INTERNAL("kir->nvptx produced invalid LLVM IR: %s", msg ? msg : "");
    LLVMDisposeMessage(msg);
  }
  kir_llvm_finish(&L, s != NULL);
  if (!s) *out = L.mod;
  return s;
}

kiln_status kiln_kir_compile_nvptx(const kiln_kir_module_t *m, const kiln_nvptx_options_t *opts,
                                   kiln_nvptx_result_t *out) {
  memset(out, 0, sizeof(*out));
  kiln_nvptx_options_t o = {0};
  if (opts) o = *opts;
  LLVMTargetMachineRef tm = NULL;
  KILN_RETURN_IF_ERROR(kiln_nvptx_target_machine_create(o.arch, o.features, &tm),
                       "compiling %s for NVPTX", m->name);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  kiln_status s = kiln_kir_lower_nvptx(m, ctx, tm, &mod);
  LLVMDisposeTargetMachine(tm);
  if (!s) {
    if (!o.dump_name) o.dump_name = m->name;
    s = kiln_nvptx_compile(mod, &o, out);
    LLVMDisposeModule(mod);
  }
  LLVMContextDispose(ctx);
  return s;
}
