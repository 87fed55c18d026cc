/* Target-independent lowering of kernel IR ops to LLVM IR (kir_llvm.h). */
#include "compiler/codegen/kir_llvm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/hlo/numeric.h"

void kir_llvm_fail(kir_llvm_t *L, kiln_status s) {
  if (!s) return;
  if (L->status) kiln_status_free(s);
  else L->status = s;
}

/* An out-of-memory unwind (base/alloc.h) in the middle of lowering: the builder and module
 * are LLVM's. */
static void unwind_lowering(void *arg) {
  kir_llvm_t *L = arg;
  if (L->b) LLVMDisposeBuilder(L->b);
  if (L->mod) LLVMDisposeModule(L->mod);
  L->b = NULL;
  L->mod = NULL;
}

void kir_llvm_init(kir_llvm_t *L, const kiln_kir_module_t *km, const kir_llvm_target_t *target,
                   LLVMContextRef ctx, int idx_bits) {
  memset(L, 0, sizeof(*L));
  L->km = km;
  L->target = target;
  L->ctx = ctx;
  L->mod = LLVMModuleCreateWithNameInContext(km->name, ctx);
  L->b = LLVMCreateBuilderInContext(ctx);
  kiln_oom_defer(&L->unwind, unwind_lowering, L);
  L->i1 = LLVMInt1TypeInContext(ctx);
  L->i8 = LLVMInt8TypeInContext(ctx);
  L->i16 = LLVMInt16TypeInContext(ctx);
  L->i32 = LLVMInt32TypeInContext(ctx);
  L->i64 = LLVMInt64TypeInContext(ctx);
  L->f16 = LLVMHalfTypeInContext(ctx);
  L->f32 = LLVMFloatTypeInContext(ctx);
  L->f64 = LLVMDoubleTypeInContext(ctx);
  L->ptr = LLVMPointerTypeInContext(ctx, 0);
  L->void_t = LLVMVoidTypeInContext(ctx);
  L->idx_bits = idx_bits;
  L->idx = LLVMIntTypeInContext(ctx, (unsigned)idx_bits);
  L->vals = kiln_calloc(km->next_value_id + 1, sizeof(*L->vals));
  L->wide = kiln_calloc(km->next_value_id + 1, sizeof(*L->wide));
  L->root = kiln_calloc(km->next_value_id + 1, sizeof(*L->root));
  L->funcs = kiln_calloc(km->funcs.len + 1, sizeof(*L->funcs));
  L->math_elem = KILN_F32;
}

void kir_llvm_finish(kir_llvm_t *L, bool dispose) {
  kiln_oom_undefer(&L->unwind);
  if (L->b) LLVMDisposeBuilder(L->b);
  if (dispose && L->mod) LLVMDisposeModule(L->mod);
  kiln_free(L->vals);
  kiln_free(L->wide);
  kiln_free(L->root);
  kiln_free(L->funcs);
  L->b = NULL;
}

bool kir_llvm_is_narrow_float(kiln_elem_type_t e) {
  return kiln_elem_type_is_float(e) && e != KILN_F32 && e != KILN_F64;
}

LLVMTypeRef kir_llvm_elem_repr(kir_llvm_t *L, kiln_elem_type_t e) {
  switch (e) {
    case KILN_PRED: return L->i1;
    case KILN_F32: return L->f32;
    case KILN_F64: return L->f64;
    case KILN_F16: return L->f16;
    default:
      if (kiln_elem_type_is_float(e)) return kiln_elem_type_bits(e) > 8 ? L->i16 : L->i8;
      return LLVMIntTypeInContext(L->ctx, (unsigned)kiln_elem_type_bits(e));
  }
}

LLVMTypeRef kir_llvm_elem_mem(kir_llvm_t *L, kiln_elem_type_t e) {
  if (e == KILN_PRED || kiln_elem_type_bits(e) < 8) return L->i8;
  return kir_llvm_elem_repr(L, e);
}

/* The bit width of an integer type or of an integer vector's lanes; 0 for anything else. */
static unsigned int_lane_width(LLVMTypeRef t) {
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) t = LLVMGetElementType(t);
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t) : 0;
}

LLVMTypeRef kir_llvm_repr(kir_llvm_t *L, const kiln_kir_type_t *t) {
  switch (t->kind) {
    case KILN_KIR_TYPE_INDEX: return L->idx;
    case KILN_KIR_TYPE_SCALAR: return kir_llvm_elem_repr(L, t->elem);
    case KILN_KIR_TYPE_VECTOR: return LLVMVectorType(kir_llvm_elem_repr(L, t->elem), (unsigned)t->lanes);
    case KILN_KIR_TYPE_TENSOR:
      return LLVMPointerTypeInContext(L->ctx, t->space == KILN_KIR_SPACE_SHARED && L->target->nvptx ? 3 : 0);
  }
  return L->i32;
}

LLVMValueRef kir_llvm_get(kir_llvm_t *L, const kiln_kir_value_t *v) {
  if (v->type->kind == KILN_KIR_TYPE_TENSOR && L->root[v->id]) v = L->root[v->id];
  LLVMValueRef x = L->vals[v->id];
  if (!x && !L->status)
    kir_llvm_fail(L, KILN_ERR_INTERNAL("kir->llvm: value %u used before it was lowered", v->id));
  return x;
}

void kir_llvm_set(kir_llvm_t *L, const kiln_kir_value_t *v, LLVMValueRef x) {
  L->vals[v->id] = x;
  L->wide[v->id] = NULL; /* a rebound value (e.g. reloaded in another phase) has no f32 form */
}

LLVMValueRef kir_llvm_entry_alloca(kir_llvm_t *L, LLVMTypeRef t, int64_t count, unsigned align) {
  LLVMBuilderRef eb = LLVMCreateBuilderInContext(L->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(L->entry);
  if (first) LLVMPositionBuilderBefore(eb, first);
  else LLVMPositionBuilderAtEnd(eb, L->entry);
  LLVMValueRef a = LLVMBuildArrayAlloca(eb, t, LLVMConstInt(L->i64, (unsigned long long)count, 0), "");
  LLVMSetAlignment(a, align);
  LLVMDisposeBuilder(eb);
  return a;
}

LLVMValueRef kir_llvm_intrinsic(kir_llvm_t *L, const char *name, LLVMTypeRef *over, size_t nover,
                                LLVMValueRef *args, size_t nargs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(L->mod, id, over, nover);
  LLVMTypeRef ft = LLVMIntrinsicGetType(L->ctx, id, over, nover);
  return LLVMBuildCall2(L->b, ft, f, args, (unsigned)nargs, "");
}

LLVMValueRef kir_llvm_call_extern(kir_llvm_t *L, const char *name, LLVMTypeRef ret,
                                  LLVMValueRef *args, size_t nargs) {
  LLVMTypeRef ats[4];
  for (size_t i = 0; i < nargs && i < 4; i++) ats[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef ft = LLVMFunctionType(ret, ats, (unsigned)nargs, 0);
  LLVMValueRef f = LLVMGetNamedFunction(L->mod, name);
  if (!f) f = LLVMAddFunction(L->mod, name, ft);
  return LLVMBuildCall2(L->b, ft, f, args, (unsigned)nargs, "");
}

/* ---- narrow floats ---- */

typedef struct fmt {
  int e, m, bias;
  int style; /* 0 IEEE, 1 FN, 2 FNUZ, 3 NONE (f4), 4 E8M0 */
} fmt_t;

static bool fmt_of(kiln_elem_type_t t, fmt_t *f) {
  switch (t) {
    case KILN_F8E5M2: *f = (fmt_t){5, 2, 15, 0}; return true;
    case KILN_F8E4M3: *f = (fmt_t){4, 3, 7, 0}; return true;
    case KILN_F8E4M3FN: *f = (fmt_t){4, 3, 7, 1}; return true;
    case KILN_F8E4M3B11FNUZ: *f = (fmt_t){4, 3, 11, 2}; return true;
    case KILN_F8E5M2FNUZ: *f = (fmt_t){5, 2, 16, 2}; return true;
    case KILN_F8E4M3FNUZ: *f = (fmt_t){4, 3, 8, 2}; return true;
    case KILN_F8E3M4: *f = (fmt_t){3, 4, 3, 0}; return true;
    case KILN_F8E8M0FNU: *f = (fmt_t){8, 0, 127, 4}; return true;
    case KILN_F4E2M1FN: *f = (fmt_t){2, 1, 1, 3}; return true;
    default: return false;
  }
}

static LLVMValueRef c32(kir_llvm_t *L, uint32_t v) { return LLVMConstInt(L->i32, v, 0); }

/* f8/f4 bits -> f32 through a 256-entry table (exact: every value is an f32). */
static LLVMValueRef narrow8_table(kir_llvm_t *L, kiln_elem_type_t t) {
  char name[64];
  snprintf(name, sizeof(name), "__kiln_%s_to_f32", kiln_elem_type_name(t));
  LLVMValueRef g = LLVMGetNamedGlobal(L->mod, name);
  if (g) return g;
  LLVMValueRef vals[256];
  int bits = kiln_elem_type_bits(t);
  for (uint32_t i = 0; i < 256; i++)
    vals[i] = LLVMConstReal(L->f32, kiln_narrow_to_f64(t, i & ((1u << bits) - 1)));
  LLVMTypeRef at = LLVMArrayType(L->f32, 256);
  g = LLVMAddGlobal(L->mod, at, name);
  LLVMSetInitializer(g, LLVMConstArray(L->f32, vals, 256));
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, 64);
  return g;
}

LLVMValueRef kir_llvm_to_f32(kir_llvm_t *L, kiln_elem_type_t e, LLVMValueRef x) {
  LLVMBuilderRef b = L->b;
  if (e == KILN_F32) return x;
  if (e == KILN_F64) return LLVMBuildFPTrunc(b, x, L->f32, "");
  if (e == KILN_F16) return LLVMBuildFPExt(b, x, L->f32, "");
  if (e == KILN_BF16)
    return LLVMBuildBitCast(b, LLVMBuildShl(b, LLVMBuildZExt(b, x, L->i32, ""), c32(L, 16), ""),
                            L->f32, "");
  LLVMValueRef tab = narrow8_table(L, e);
  LLVMValueRef idx[2] = {LLVMConstInt(L->i64, 0, 0), LLVMBuildZExt(b, x, L->i64, "")};
  LLVMValueRef p = LLVMBuildInBoundsGEP2(b, LLVMArrayType(L->f32, 256), tab, idx, 2, "");
  return LLVMBuildLoad2(b, L->f32, p, "");
}

static LLVMValueRef sel(kir_llvm_t *L, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(L->b, c, a, b, "");
}
static LLVMValueRef icmp(kir_llvm_t *L, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(L->b, p, a, b, "");
}

/* round(sig >> sh) to nearest even, i32, sh in [1, 31] (vector of lanes or scalar). */
static LLVMValueRef shift_round_even(kir_llvm_t *L, LLVMValueRef sig, LLVMValueRef sh) {
  LLVMBuilderRef b = L->b;
  LLVMValueRef one = c32(L, 1);
  LLVMValueRef q = LLVMBuildLShr(b, sig, sh, "");
  LLVMValueRef mask = LLVMBuildSub(b, LLVMBuildShl(b, one, sh, ""), one, "");
  LLVMValueRef rem = LLVMBuildAnd(b, sig, mask, "");
  LLVMValueRef half = LLVMBuildShl(b, one, LLVMBuildSub(b, sh, one, ""), "");
  LLVMValueRef up = LLVMBuildOr(
      b, icmp(L, LLVMIntUGT, rem, half),
      LLVMBuildAnd(b, icmp(L, LLVMIntEQ, rem, half),
                   icmp(L, LLVMIntNE, LLVMBuildAnd(b, q, one, ""), c32(L, 0)), ""),
      "");
  return LLVMBuildAdd(b, q, LLVMBuildZExt(b, up, L->i32, ""), "");
}

/* f32 -> f8 / f4 bits with the semantics of kiln_narrow_from_f64 (numeric.c), branch-free. */
static LLVMValueRef f32_to_narrow8(kir_llvm_t *L, const fmt_t *f, LLVMValueRef x) {
  LLVMBuilderRef b = L->b;
  LLVMValueRef u = LLVMBuildBitCast(b, x, L->i32, "");
  LLVMValueRef neg = icmp(L, LLVMIntNE, LLVMBuildLShr(b, u, c32(L, 31), ""), c32(L, 0));
  LLVMValueRef mag = LLVMBuildAnd(b, u, c32(L, 0x7fffffff), "");
  uint32_t sign = 1u << (f->e + f->m);
  uint32_t exp_all = ((1u << f->e) - 1) << f->m;
  uint32_t all = (1u << (f->e + f->m)) - 1;
  uint32_t max_finite = f->style == 0 ? exp_all - 1 : (f->style == 1 || f->style == 4) ? all - 1 : all;
  LLVMValueRef signv = sel(L, neg, c32(L, sign), c32(L, 0));
  /* NaN and overflow codes */
  LLVMValueRef nanc, ovf;
  switch (f->style) {
    case 0: {
      LLVMValueRef top = LLVMBuildLShr(b, LLVMBuildAnd(b, mag, c32(L, 0x7fffff), ""),
                                       c32(L, (uint32_t)(23 - f->m)), "");
      nanc = LLVMBuildOr(b, signv, LLVMBuildOr(b, top, c32(L, exp_all | (1u << (f->m - 1))), ""), "");
      ovf = LLVMBuildOr(b, signv, c32(L, exp_all), "");
      break;
    }
    case 1:
      nanc = ovf = LLVMBuildOr(b, signv, c32(L, all), "");
      break;
    case 2:
      nanc = ovf = c32(L, sign);
      break;
    case 3: /* no NaN: the code numeric.c gives every NaN, whatever its sign */
      nanc = c32(L, kiln_narrow_from_f64(KILN_F4E2M1FN, NAN));
      ovf = LLVMBuildOr(b, signv, c32(L, max_finite), "");
      break;
    default:
      nanc = ovf = c32(L, 0xFF);
      break;
  }
  LLVMValueRef ef = LLVMBuildLShr(b, mag, c32(L, 23), "");
  LLVMValueRef sig = LLVMBuildOr(b, LLVMBuildAnd(b, mag, c32(L, 0x7fffff), ""), c32(L, 0x800000), "");
  LLVMValueRef unb = LLVMBuildSub(b, ef, c32(L, 127), ""); /* signed in i32 */
  LLVMValueRef code;
  if (f->style == 4) {
    LLVMValueRef q = shift_round_even(L, sig, c32(L, 23));
    code = LLVMBuildAdd(b, LLVMBuildAdd(b, unb, c32(L, 127), ""), LLVMBuildSub(b, q, c32(L, 1), ""), "");
    code = sel(L, icmp(L, LLVMIntSLT, code, c32(L, 0)), c32(L, 0), code);
  } else {
    LLVMValueRef biased = LLVMBuildAdd(b, unb, c32(L, (uint32_t)f->bias), "");
    LLVMValueRef sub = icmp(L, LLVMIntSLT, biased, c32(L, 1));
    LLVMValueRef extra = LLVMBuildSub(b, c32(L, 1), biased, "");
    uint32_t sh0 = (uint32_t)(23 - f->m);
    LLVMValueRef shs = LLVMBuildAdd(b, c32(L, sh0), extra, "");
    shs = sel(L, icmp(L, LLVMIntSGT, shs, c32(L, 25)), c32(L, 25), shs);
    LLVMValueRef sh = sel(L, sub, shs, c32(L, sh0));
    LLVMValueRef r = shift_round_even(L, sig, sh);
    LLVMValueRef normal = LLVMBuildAdd(
        b, LLVMBuildShl(b, LLVMBuildSub(b, biased, c32(L, 1), ""), c32(L, (uint32_t)f->m), ""), r, "");
    code = sel(L, sub, r, normal);
  }
  LLVMValueRef over = icmp(L, LLVMIntSGT, code, c32(L, max_finite));
  LLVMValueRef res = sel(L, over, ovf, LLVMBuildOr(b, signv, code, ""));
  if (f->style == 2) res = sel(L, icmp(L, LLVMIntEQ, code, c32(L, 0)), c32(L, 0), res);
  if (f->style == 4) res = sel(L, neg, c32(L, 0xFF), res);
  /* f32 subnormals and zeros: far below every 8-bit format's range -> signed zero. */
  LLVMValueRef tiny = icmp(L, LLVMIntEQ, ef, c32(L, 0));
  LLVMValueRef zero = f->style == 2 ? c32(L, 0) : f->style == 4 ? (LLVMValueRef)NULL : signv;
  if (f->style == 4) {
    LLVMValueRef iszero = icmp(L, LLVMIntEQ, mag, c32(L, 0));
    /* f32 subnormals: [1.5 * 2^-127, 2^-126) rounds up to 2^-126 (code 1), below to 2^-127 */
    LLVMValueRef sub = sel(L, icmp(L, LLVMIntUGE, mag, c32(L, 0x600000)), c32(L, 1), c32(L, 0));
    res = sel(L, tiny, sel(L, LLVMBuildOr(b, iszero, neg, ""), c32(L, 0xFF), sub), res);
  } else {
    res = sel(L, tiny, zero, res);
  }
  res = sel(L, icmp(L, LLVMIntEQ, mag, c32(L, 0x7f800000)), ovf, res);
  res = sel(L, icmp(L, LLVMIntUGT, mag, c32(L, 0x7f800000)), nanc, res);
  return LLVMBuildTrunc(b, res, L->i8, "");
}

LLVMValueRef kir_llvm_from_f32(kir_llvm_t *L, kiln_elem_type_t e, LLVMValueRef x) {
  LLVMBuilderRef b = L->b;
  if (e == KILN_F32) return x;
  if (e == KILN_F64) return LLVMBuildFPExt(b, x, L->f64, "");
  if (e == KILN_F16) return LLVMBuildFPTrunc(b, x, L->f16, "");
  if (e == KILN_BF16) {
    LLVMValueRef u = LLVMBuildBitCast(b, x, L->i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, c32(L, 16), ""), c32(L, 1), "");
    LLVMValueRef r = LLVMBuildLShr(
        b, LLVMBuildAdd(b, u, LLVMBuildAdd(b, c32(L, 0x7fff), lsb, ""), ""), c32(L, 16), "");
    LLVMValueRef q = LLVMBuildOr(b, LLVMBuildLShr(b, u, c32(L, 16), ""), c32(L, 0x40), "");
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
    return LLVMBuildTrunc(b, sel(L, nan, q, r), L->i16, "");
  }
  fmt_t f;
  if (!fmt_of(e, &f)) return x;
  return f32_to_narrow8(L, &f, x);
}

/* ---- roots ---- */

static void roots_region(kir_llvm_t *L, const kiln_kir_region_t *r);

static void set_root(kir_llvm_t *L, const kiln_kir_value_t *v, const kiln_kir_value_t *from) {
  if (v->type->kind != KILN_KIR_TYPE_TENSOR) return;
  L->root[v->id] = L->root[from->id] ? L->root[from->id] : from;
}

static void roots_op(kir_llvm_t *L, const kiln_kir_op_t *op) {
  kiln_kir_value_t *const *a = op->operands;
  switch (op->opcode) {
    case KILN_KIR_INSERT: case KILN_KIR_VSTORE: case KILN_KIR_ATOMIC_RMW:
      set_root(L, op->results[0], a[1]);
      break;
    case KILN_KIR_ATOMIC_CAS:
      set_root(L, op->results[0], a[0]);
      break;
    case KILN_KIR_SELECT:
      set_root(L, op->results[0], a[1]);
      break;
    case KILN_KIR_BARRIER:
      for (uint32_t i = 0; i < op->num_results; i++) set_root(L, op->results[i], a[i]);
      break;
    case KILN_KIR_FOR:
      for (uint32_t i = 0; i < op->num_results; i++) {
        set_root(L, op->regions[0]->args[1 + i], a[3 + i]);
        set_root(L, op->results[i], a[3 + i]);
      }
      break;
    case KILN_KIR_LOOP: {
      size_t first = kiln_indexing_map_num_syms(op->map) + kiln_indexing_map_num_results(op->map);
      for (uint32_t i = 0; i < op->num_results; i++) {
        set_root(L, op->regions[0]->args[first + i], a[op->num_map_dims + i]);
        set_root(L, op->results[i], a[op->num_map_dims + i]);
      }
      break;
    }
    default:
      break;
  }
  for (uint32_t i = 0; i < op->num_regions; i++) roots_region(L, op->regions[i]);
  if (op->opcode == KILN_KIR_IF) {
    const kiln_kir_region_t *t = op->regions[0];
    const kiln_kir_op_t *y = t->ops.data[t->ops.len - 1];
    for (uint32_t i = 0; i < op->num_results; i++) set_root(L, op->results[i], y->operands[i]);
  }
}

static void roots_region(kir_llvm_t *L, const kiln_kir_region_t *r) {
  for (size_t i = 0; i < r->ops.len; i++) roots_op(L, r->ops.data[i]);
}

void kir_llvm_compute_roots(kir_llvm_t *L, const kiln_kir_func_t *f) { roots_region(L, f->body); }

/* ---- scalar ops ---- */

static bool is_signed(const kiln_kir_type_t *t) {
  return t->kind == KILN_KIR_TYPE_INDEX || kiln_elem_type_is_signed_int(t->elem);
}
static bool is_fp(const kiln_kir_type_t *t) {
  return t->kind != KILN_KIR_TYPE_INDEX && t->kind != KILN_KIR_TYPE_TENSOR &&
         kiln_elem_type_is_float(t->elem);
}

static LLVMValueRef const_scalar(kir_llvm_t *L, const kiln_kir_type_t *t, kiln_kir_const_t c) {
  if (t->kind == KILN_KIR_TYPE_INDEX) return LLVMConstInt(L->idx, (unsigned long long)c.i, 1);
  kiln_elem_type_t e = t->elem;
  if (e == KILN_F32) return LLVMConstReal(L->f32, (double)(float)c.f);
  if (e == KILN_F64) return LLVMConstReal(L->f64, c.f);
  if (kiln_elem_type_is_float(e)) {
    uint32_t bits = kiln_narrow_from_f64(e, c.f);
    if (e == KILN_F16) return LLVMConstBitCast(LLVMConstInt(L->i16, bits, 0), L->f16);
    return LLVMConstInt(kir_llvm_elem_repr(L, e), bits, 0);
  }
  return LLVMConstInt(kir_llvm_elem_repr(L, e), (unsigned long long)c.i, 1);
}

/* Integer division with HLO semantics. */
static LLVMValueRef int_divrem(kir_llvm_t *L, bool rem, bool sgn, LLVMValueRef x, LLVMValueRef d) {
  LLVMBuilderRef b = L->b;
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef zero = LLVMConstNull(t), one = LLVMConstInt(t, 1, 0), all = LLVMConstAllOnes(t);
  LLVMValueRef dz = icmp(L, LLVMIntEQ, d, zero);
  LLVMValueRef bad = dz;
  LLVMValueRef ovf = NULL;
  if (sgn) {
    unsigned w = LLVMGetIntTypeWidth(t);
    LLVMValueRef min = LLVMConstInt(t, w >= 64 ? (1ULL << 63) : (1ULL << (w - 1)), 0);
    ovf = LLVMBuildAnd(b, icmp(L, LLVMIntEQ, x, min), icmp(L, LLVMIntEQ, d, all), "");
    bad = LLVMBuildOr(b, bad, ovf, "");
  }
  LLVMValueRef safe = sel(L, bad, one, d);
  LLVMValueRef q = rem ? (sgn ? LLVMBuildSRem(b, x, safe, "") : LLVMBuildURem(b, x, safe, ""))
                       : (sgn ? LLVMBuildSDiv(b, x, safe, "") : LLVMBuildUDiv(b, x, safe, ""));
  if (ovf) q = sel(L, ovf, rem ? zero : x, q);
  return sel(L, dz, rem ? x : all, q);
}

static LLVMValueRef shift(kir_llvm_t *L, kiln_kir_opcode_t op, LLVMValueRef x, LLVMValueRef n) {
  LLVMBuilderRef b = L->b;
  LLVMTypeRef t = LLVMTypeOf(x);
  unsigned w = LLVMGetIntTypeWidth(t);
  LLVMValueRef wide = icmp(L, LLVMIntUGE, n, LLVMConstInt(t, w, 0));
  LLVMValueRef safe = sel(L, wide, LLVMConstNull(t), n);
  switch (op) {
    case KILN_KIR_SHL: return sel(L, wide, LLVMConstNull(t), LLVMBuildShl(b, x, safe, ""));
    case KILN_KIR_SHR_LOGICAL: return sel(L, wide, LLVMConstNull(t), LLVMBuildLShr(b, x, safe, ""));
    default:
      return LLVMBuildAShr(b, x, sel(L, wide, LLVMConstInt(t, w - 1, 0), safe), "");
  }
}

static LLVMValueRef float_math(kir_llvm_t *L, kiln_kir_opcode_t op, LLVMValueRef x,
                               LLVMValueRef y, bool f64) {
  LLVMTypeRef t = f64 ? L->f64 : L->f32;
  LLVMValueRef args[2] = {x, y};
  switch (op) {
    case KILN_KIR_ADD: return LLVMBuildFAdd(L->b, x, y, "");
    case KILN_KIR_SUB: return LLVMBuildFSub(L->b, x, y, "");
    case KILN_KIR_MUL: return LLVMBuildFMul(L->b, x, y, "");
    case KILN_KIR_DIV: return LLVMBuildFDiv(L->b, x, y, "");
    case KILN_KIR_REM: return LLVMBuildFRem(L->b, x, y, "");
    case KILN_KIR_MIN: return kir_llvm_intrinsic(L, "llvm.minimum", &t, 1, args, 2);
    case KILN_KIR_MAX: {
      LLVMValueRef r = kir_llvm_intrinsic(L, "llvm.maximum", &t, 1, args, 2);
      if (L->math_elem != KILN_F16) return r;
      /* LLVM narrows this f32 maximum of two widened halves to llvm.maximum on half, and
       * LLVM 19's x86 backend (without AVX512-FP16) expands vectors of that to
       * maximum(NaN, +0) = +0 (fuzz-2051097: f16 row maxima of x - x came out 0, not NaN);
       * the explicit NaN select keeps XLA's NaN-propagating maximum. */
      return sel(L, LLVMBuildFCmp(L->b, LLVMRealUNO, x, y, ""), LLVMBuildFAdd(L->b, x, y, ""), r);
    }
    case KILN_KIR_NEG: return LLVMBuildFNeg(L->b, x, "");
    case KILN_KIR_ABS: return kir_llvm_intrinsic(L, "llvm.fabs", &t, 1, args, 1);
    case KILN_KIR_SQRT: return kir_llvm_intrinsic(L, "llvm.sqrt", &t, 1, args, 1);
    case KILN_KIR_FLOOR: return kir_llvm_intrinsic(L, "llvm.floor", &t, 1, args, 1);
    case KILN_KIR_CEIL: return kir_llvm_intrinsic(L, "llvm.ceil", &t, 1, args, 1);
    case KILN_KIR_ROUND: return kir_llvm_intrinsic(L, "llvm.round", &t, 1, args, 1);
    case KILN_KIR_ROUND_EVEN: return kir_llvm_intrinsic(L, "llvm.roundeven", &t, 1, args, 1);
    case KILN_KIR_SIGN: {
      LLVMValueRef zero = LLVMConstReal(t, 0.0);
      LLVMValueRef r = sel(L, LLVMBuildFCmp(L->b, LLVMRealOGT, x, zero, ""), LLVMConstReal(t, 1.0),
                           sel(L, LLVMBuildFCmp(L->b, LLVMRealOLT, x, zero, ""),
                               LLVMConstReal(t, -1.0), x));
      return r; /* NaN and +-0 fall through as x */
    }
    case KILN_KIR_RSQRT:
      if (!L->target->nvptx || f64) {
        LLVMValueRef s = kir_llvm_intrinsic(L, "llvm.sqrt", &t, 1, args, 1);
        return LLVMBuildFDiv(L->b, LLVMConstReal(t, 1.0), s, "");
      }
      return L->target->math(L, op, x, y, f64);
    default:
      return L->target->math(L, op, x, y, f64);
  }
}

/* f32 -> bf16 bits, round to nearest even, for the result of an IEEE add / sub / mul / div of
 * values widened from bf16. Such a result is never a signaling NaN, and a NaN's payload
 * comes from an operand or is the default NaN, so its low 16 bits are zero: adding the
 * rounding bias cannot carry into the exponent, and the NaN test of kir_llvm_from_f32 is not
 * needed (about half the instructions per rounded op). */
static LLVMValueRef bf16_round_arith(kir_llvm_t *L, LLVMValueRef x) {
  LLVMBuilderRef b = L->b;
  LLVMValueRef u = LLVMBuildBitCast(b, x, L->i32, "");
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, c32(L, 16), ""), c32(L, 1), "");
  LLVMValueRef r = LLVMBuildAdd(b, u, LLVMBuildAdd(b, lsb, c32(L, 0x7fff), ""), "");
  return LLVMBuildTrunc(b, LLVMBuildLShr(b, r, c32(L, 16), ""), L->i16, "");
}

/* Applies scalar op `op` to LLVM scalars of KIR type t (not vectors). */
static LLVMValueRef scalar_op(kir_llvm_t *L, kiln_kir_opcode_t op, const kiln_kir_type_t *t,
                              LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = L->b;
  if (is_fp(t)) {
    kiln_elem_type_t e = t->elem;
    bool f64 = e == KILN_F64;
    if (!f64) {
      x = kir_llvm_to_f32(L, e, x);
      if (y) y = kir_llvm_to_f32(L, e, y);
    }
    L->math_elem = e;
    LLVMValueRef r = float_math(L, op, x, y, f64);
    L->math_elem = KILN_F32;
    if (e == KILN_BF16 && (op == KILN_KIR_ADD || op == KILN_KIR_SUB || op == KILN_KIR_MUL ||
                           op == KILN_KIR_DIV))
      return bf16_round_arith(L, r);
    return f64 ? r : kir_llvm_from_f32(L, e, r);
  }
  bool sgn = is_signed(t);
  LLVMTypeRef lt = LLVMTypeOf(x);
  LLVMValueRef args[2] = {x, y};
  switch (op) {
    case KILN_KIR_ADD: return LLVMBuildAdd(b, x, y, "");
    case KILN_KIR_SUB: return LLVMBuildSub(b, x, y, "");
    case KILN_KIR_MUL: return LLVMBuildMul(b, x, y, "");
    case KILN_KIR_DIV: return int_divrem(L, false, sgn, x, y);
    case KILN_KIR_REM: return int_divrem(L, true, sgn, x, y);
    case KILN_KIR_MIN: return sel(L, icmp(L, sgn ? LLVMIntSLT : LLVMIntULT, x, y), x, y);
    case KILN_KIR_MAX: return sel(L, icmp(L, sgn ? LLVMIntSGT : LLVMIntUGT, x, y), x, y);
    case KILN_KIR_AND: return LLVMBuildAnd(b, x, y, "");
    case KILN_KIR_OR: return LLVMBuildOr(b, x, y, "");
    case KILN_KIR_XOR: return LLVMBuildXor(b, x, y, "");
    case KILN_KIR_SHL: case KILN_KIR_SHR_LOGICAL: case KILN_KIR_SHR_ARITH:
      return shift(L, op, x, y);
    case KILN_KIR_NOT: return LLVMBuildNot(b, x, "");
    case KILN_KIR_NEG: return LLVMBuildNeg(b, x, "");
    case KILN_KIR_ABS: {
      if (!sgn) return x;
      LLVMValueRef a2[2] = {x, LLVMConstInt(L->i1, 0, 0)};
      return kir_llvm_intrinsic(L, "llvm.abs", &lt, 1, a2, 2);
    }
    case KILN_KIR_SIGN: {
      LLVMValueRef zero = LLVMConstNull(lt);
      LLVMValueRef pos = LLVMBuildZExt(b, icmp(L, sgn ? LLVMIntSGT : LLVMIntUGT, x, zero), lt, "");
      if (!sgn) return pos;
      LLVMValueRef negv = LLVMBuildZExt(b, icmp(L, LLVMIntSLT, x, zero), lt, "");
      return LLVMBuildSub(b, pos, negv, "");
    }
    case KILN_KIR_POPCNT: return kir_llvm_intrinsic(L, "llvm.ctpop", &lt, 1, args, 1);
    case KILN_KIR_CLZ: {
      LLVMValueRef a2[2] = {x, LLVMConstInt(L->i1, 0, 0)};
      return kir_llvm_intrinsic(L, "llvm.ctlz", &lt, 1, a2, 2);
    }
    default:
      kir_llvm_fail(L, KILN_ERR_INVALID("kir->llvm: %s on an integer type", kiln_kir_opcode_name(op)));
      return LLVMGetUndef(lt);
  }
}

static LLVMValueRef cmp_scalar(kir_llvm_t *L, kiln_kir_cmp_t p, const kiln_kir_type_t *t,
                               LLVMValueRef x, LLVMValueRef y) {
  if (is_fp(t)) {
    if (t->elem != KILN_F64 && LLVMTypeOf(x) != L->f32) {
      x = kir_llvm_to_f32(L, t->elem, x);
      y = kir_llvm_to_f32(L, t->elem, y);
    }
    static const LLVMRealPredicate kF[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    return LLVMBuildFCmp(L->b, kF[p], x, y, "");
  }
  bool sgn = is_signed(t);
  static const LLVMIntPredicate kS[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
  static const LLVMIntPredicate kU[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
  return icmp(L, sgn ? kS[p] : kU[p], x, y);
}

/* Converts an LLVM scalar between KIR scalar/index types. */
static LLVMValueRef convert_scalar(kir_llvm_t *L, const kiln_kir_type_t *from,
                                   const kiln_kir_type_t *to, LLVMValueRef x) {
  LLVMBuilderRef b = L->b;
  LLVMTypeRef tt = to->kind == KILN_KIR_TYPE_INDEX ? L->idx : kir_llvm_elem_repr(L, to->elem);
  bool ffp = is_fp(from), tfp = is_fp(to);
  bool tpred = to->kind == KILN_KIR_TYPE_SCALAR && to->elem == KILN_PRED;
  bool fpred = from->kind == KILN_KIR_TYPE_SCALAR && from->elem == KILN_PRED;
  if (ffp && tfp) {
    if (from->elem == to->elem) return x;
    if (to->elem == KILN_F64) {
      if (from->elem == KILN_F16) return LLVMBuildFPExt(b, x, L->f64, "");
      return LLVMBuildFPExt(b, kir_llvm_to_f32(L, from->elem, x), L->f64, "");
    }
    if (from->elem == KILN_F64 && to->elem == KILN_F16) return LLVMBuildFPTrunc(b, x, L->f16, "");
    return kir_llvm_from_f32(L, to->elem, kir_llvm_to_f32(L, from->elem, x));
  }
  if (ffp) {
    LLVMValueRef f = from->elem == KILN_F64 ? x : kir_llvm_to_f32(L, from->elem, x);
    if (tpred) return LLVMBuildFCmp(b, LLVMRealUNE, f, LLVMConstReal(LLVMTypeOf(f), 0.0), "");
    LLVMTypeRef over[2] = {tt, LLVMTypeOf(f)};
    bool usgn = to->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_unsigned_int(to->elem);
    return kir_llvm_intrinsic(L, usgn ? "llvm.fptoui.sat" : "llvm.fptosi.sat", over, 2, &f, 1);
  }
  if (tfp) {
    LLVMTypeRef ft = to->elem == KILN_F64 ? L->f64 : L->f32;
    LLVMValueRef f = is_signed(from) && !fpred ? LLVMBuildSIToFP(b, x, ft, "")
                                               : LLVMBuildUIToFP(b, x, ft, "");
    return to->elem == KILN_F64 ? f : kir_llvm_from_f32(L, to->elem, f);
  }
  if (tpred) return icmp(L, LLVMIntNE, x, LLVMConstNull(LLVMTypeOf(x)));
  unsigned fw = LLVMGetIntTypeWidth(LLVMTypeOf(x)), tw = LLVMGetIntTypeWidth(tt);
  if (fw == tw) return x;
  if (fw > tw) return LLVMBuildTrunc(b, x, tt, "");
  return is_signed(from) && !fpred ? LLVMBuildSExt(b, x, tt, "") : LLVMBuildZExt(b, x, tt, "");
}

static const kiln_kir_type_t *lane_type(const kiln_kir_type_t *t, kiln_kir_type_t *buf) {
  if (t->kind != KILN_KIR_TYPE_VECTOR) return t;
  *buf = *t;
  buf->kind = KILN_KIR_TYPE_SCALAR;
  buf->lanes = 0;
  return buf;
}

/* Lane-wise application for vectors, direct for scalars. */
typedef LLVMValueRef (*lane_fn)(kir_llvm_t *L, const kiln_kir_op_t *op, const kiln_kir_type_t *t,
                                LLVMValueRef *x);

static LLVMValueRef per_lane(kir_llvm_t *L, const kiln_kir_op_t *op, const kiln_kir_type_t *t,
                             int nops, lane_fn fn, LLVMTypeRef result_lane) {
  kiln_kir_type_t buf;
  const kiln_kir_type_t *lt = lane_type(t, &buf);
  LLVMValueRef xs[3];
  if (t->kind != KILN_KIR_TYPE_VECTOR) {
    for (int i = 0; i < nops; i++) xs[i] = kir_llvm_get(L, op->operands[i]);
    return fn(L, op, lt, xs);
  }
  LLVMValueRef out = LLVMGetUndef(LLVMVectorType(result_lane, (unsigned)t->lanes));
  for (int k = 0; k < t->lanes; k++) {
    LLVMValueRef kk = LLVMConstInt(L->i32, (unsigned)k, 0);
    for (int i = 0; i < nops; i++)
      xs[i] = LLVMBuildExtractElement(L->b, kir_llvm_get(L, op->operands[i]), kk, "");
    out = LLVMBuildInsertElement(L->b, out, fn(L, op, lt, xs), kk, "");
  }
  return out;
}

static LLVMValueRef lane_arith(kir_llvm_t *L, const kiln_kir_op_t *op, const kiln_kir_type_t *t,
                               LLVMValueRef *x) {
  return scalar_op(L, op->opcode, t, x[0], kiln_kir_opcode_is_binary(op->opcode) ? x[1] : NULL);
}
static LLVMValueRef lane_cmp(kir_llvm_t *L, const kiln_kir_op_t *op, const kiln_kir_type_t *t,
                             LLVMValueRef *x) {
  return cmp_scalar(L, op->cmp, t, x[0], x[1]);
}
static LLVMValueRef lane_finite(kir_llvm_t *L, const kiln_kir_op_t *op, const kiln_kir_type_t *t,
                                LLVMValueRef *x) {
  LLVMValueRef f = t->elem == KILN_F64 ? x[0] : kir_llvm_to_f32(L, t->elem, x[0]);
  LLVMTypeRef ft = LLVMTypeOf(f);
  LLVMValueRef a = kir_llvm_intrinsic(L, "llvm.fabs", &ft, 1, &f, 1);
  return LLVMBuildFCmp(L->b, LLVMRealOLT, a, LLVMConstReal(ft, __builtin_inf()), "");
}
static LLVMValueRef lane_convert(kir_llvm_t *L, const kiln_kir_op_t *op, const kiln_kir_type_t *t,
                                 LLVMValueRef *x) {
  kiln_kir_type_t buf;
  return convert_scalar(L, t, lane_type(op->results[0]->type, &buf), x[0]);
}

/* ---- excess precision (bf16) ----
 * With km->excess_precision, a bf16 arithmetic op computes in f32 as always but also keeps
 * its unrounded f32 result in L->wide; bf16 arithmetic, compares and conversions to f32 /
 * f64 that read the value use that instead of the rounded bits, which then only matter
 * where the value is stored, carried by a loop or passed to a call (LLVM drops the rounding
 * when nothing reads the bits). This is what XLA's float normalization followed by
 * SimplifyFPConversions gives under --xla_allow_excess_precision (its default). */

static bool excess_reads(const kir_llvm_t *L, const kiln_kir_type_t *t) {
  return L->km->excess_precision && t->elem == KILN_BF16 &&
         (t->kind == KILN_KIR_TYPE_SCALAR || t->kind == KILN_KIR_TYPE_VECTOR);
}

/* Lane `kk` (NULL: a scalar) of value v as f32: its unrounded form when it has one. */
static LLVMValueRef wide_lane(kir_llvm_t *L, const kiln_kir_value_t *v, LLVMValueRef kk) {
  LLVMValueRef w = L->wide[v->id];
  if (w) return kk ? LLVMBuildExtractElement(L->b, w, kk, "") : w;
  LLVMValueRef x = kir_llvm_get(L, v);
  if (kk) x = LLVMBuildExtractElement(L->b, x, kk, "");
  return kir_llvm_to_f32(L, KILN_BF16, x);
}

/* Emits `op` under excess precision when it reads or computes bf16 values; false when the
 * op is not one of those (the generic lowering then handles it). */
static bool emit_excess(kir_llvm_t *L, const kiln_kir_op_t *op) {
  if (!op->num_operands || !op->num_results) return false;
  const kiln_kir_type_t *in = op->operands[0]->type, *rt = op->results[0]->type;
  bool arith = kiln_kir_opcode_is_binary(op->opcode) || kiln_kir_opcode_is_unary(op->opcode);
  bool widen = op->opcode == KILN_KIR_CONVERT &&
               (rt->elem == KILN_F32 || rt->elem == KILN_F64);
  if (!excess_reads(L, in) || !(arith || widen || op->opcode == KILN_KIR_CMP)) return false;
  kiln_kir_type_t f32t = {.kind = KILN_KIR_TYPE_SCALAR, .elem = KILN_F32}, lbuf;
  int lanes = in->kind == KILN_KIR_TYPE_VECTOR ? in->lanes : 0;
  LLVMTypeRef lane_t = arith ? L->i16 : op->opcode == KILN_KIR_CMP ? L->i1 : kir_llvm_elem_repr(L, rt->elem);
  LLVMValueRef out = lanes ? LLVMGetUndef(LLVMVectorType(lane_t, (unsigned)lanes)) : NULL;
  LLVMValueRef wout = lanes && arith ? LLVMGetUndef(LLVMVectorType(L->f32, (unsigned)lanes)) : NULL;
  for (int k = 0; k < (lanes ? lanes : 1); k++) {
    LLVMValueRef kk = lanes ? LLVMConstInt(L->i32, (unsigned)k, 0) : NULL;
    LLVMValueRef x = wide_lane(L, op->operands[0], kk);
    LLVMValueRef y = op->num_operands > 1 ? wide_lane(L, op->operands[1], kk) : NULL;
    LLVMValueRef r, w = NULL;
    if (arith) {
      L->math_elem = KILN_BF16; /* the result only needs bf16 accuracy */
      w = float_math(L, op->opcode, x, kiln_kir_opcode_is_binary(op->opcode) ? y : NULL, false);
      L->math_elem = KILN_F32;
      r = kir_llvm_from_f32(L, KILN_BF16, w);
    } else if (op->opcode == KILN_KIR_CMP) {
      r = cmp_scalar(L, op->cmp, &f32t, x, y);
    } else {
      r = convert_scalar(L, &f32t, lane_type(rt, &lbuf), x);
    }
    if (!lanes) {
      out = r, wout = w;
    } else {
      out = LLVMBuildInsertElement(L->b, out, r, kk, "");
      if (w) wout = LLVMBuildInsertElement(L->b, wout, w, kk, "");
    }
  }
  kir_llvm_set(L, op->results[0], out);
  if (arith) L->wide[op->results[0]->id] = wout;
  return true;
}

/* ---- tensors ---- */

LLVMTypeRef kir_llvm_tensor_slot(kir_llvm_t *L, const kiln_kir_type_t *t) {
  LLVMTypeRef m = kir_llvm_elem_mem(L, t->elem);
  if (!L->wide_tile_slots || t->space != KILN_KIR_SPACE_SHARED ||
      kiln_kir_type_num_elements(t) > 16384)
    return m;
  LLVMTypeKind k = LLVMGetTypeKind(m);
  bool narrow = k == LLVMHalfTypeKind || k == LLVMBFloatTypeKind || (k == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(m) < 32);
  return narrow ? L->i32 : m;
}

/* Memory value x (element memory type m) as the content of slot type `slot`, and back. */
static LLVMValueRef mem_to_slot(kir_llvm_t *L, LLVMTypeRef slot, LLVMValueRef x) {
  LLVMTypeRef m = LLVMTypeOf(x);
  if (m == slot) return x;
  if (LLVMGetTypeKind(m) != LLVMIntegerTypeKind) x = LLVMBuildBitCast(L->b, x, L->i16, "");
  return LLVMBuildZExt(L->b, x, slot, "");
}
static LLVMValueRef slot_to_mem(kir_llvm_t *L, LLVMTypeRef m, LLVMValueRef x) {
  if (LLVMTypeOf(x) == m) return x;
  if (LLVMGetTypeKind(m) == LLVMIntegerTypeKind) return LLVMBuildTrunc(L->b, x, m, "");
  return LLVMBuildBitCast(L->b, LLVMBuildTrunc(L->b, x, L->i16, ""), m, "");
}

static LLVMValueRef element_ptr(kir_llvm_t *L, const kiln_kir_op_t *op, size_t tpos) {
  const kiln_kir_value_t *tv = op->operands[tpos];
  const kiln_kir_type_t *t = tv->type;
  LLVMValueRef base = kir_llvm_get(L, tv);
  LLVMValueRef lin = NULL;
  int64_t stride = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    LLVMValueRef ix = kir_llvm_get(L, op->operands[tpos + 1 + (size_t)i]);
    LLVMValueRef term =
        stride == 1
            ? ix
            : LLVMBuildNSWMul(L->b, ix, LLVMConstInt(L->idx, (unsigned long long)stride, 0), "");
    lin = lin ? LLVMBuildNSWAdd(L->b, lin, term, "") : term;
    stride *= t->dims[i];
  }
  if (!lin) lin = LLVMConstInt(L->idx, 0, 0);
  return LLVMBuildInBoundsGEP2(L->b, kir_llvm_tensor_slot(L, t), base, &lin, 1, "");
}

static unsigned elem_align(kir_llvm_t *L, kiln_elem_type_t e) {
  size_t n = kiln_elem_type_bits(e) < 8 ? 1 : (size_t)kiln_elem_type_bits(e) / 8;
  return (unsigned)n;
}

/* Alignment of an access to one slot of type `slot` holding elements of type e. */
static unsigned slot_align(kir_llvm_t *L, LLVMTypeRef slot, kiln_elem_type_t e) {
  return slot == kir_llvm_elem_mem(L, e) ? elem_align(L, e) : 4;
}

static LLVMValueRef mem_to_repr(kir_llvm_t *L, kiln_elem_type_t e, LLVMValueRef x) {
  LLVMTypeRef r = kir_llvm_elem_repr(L, e), m = kir_llvm_elem_mem(L, e);
  if (r == m) return x;
  LLVMTypeRef rt = LLVMGetTypeKind(LLVMTypeOf(x)) == LLVMVectorTypeKind
                       ? LLVMVectorType(r, LLVMGetVectorSize(LLVMTypeOf(x))) : r;
  return LLVMBuildTrunc(L->b, x, rt, "");
}

/* Sub-byte integers (s2/s4/u2/u4) sit one per byte, in the byte's low bits with the high
 * bits zero: XLA's unpacked form (its host literals, ml_dtypes' int4, the PJRT host-buffer
 * format, XLA:CPU's buffers), which kiln's literals, the evaluator, the fake arguments and
 * the device buffers all share. So a signed value is zero-extended too: -2 as s4 is 0x0e,
 * not 0xfe. kiln does not pack two per byte as XLA:GPU does under an E(4) layout. */
static LLVMValueRef repr_to_mem(kir_llvm_t *L, kiln_elem_type_t e, LLVMValueRef x) {
  LLVMTypeRef r = kir_llvm_elem_repr(L, e), m = kir_llvm_elem_mem(L, e);
  if (r == m) return x;
  LLVMTypeRef mt = LLVMGetTypeKind(LLVMTypeOf(x)) == LLVMVectorTypeKind
                       ? LLVMVectorType(m, LLVMGetVectorSize(LLVMTypeOf(x))) : m;
  bool sext = kiln_elem_type_is_signed_int(e) && kiln_elem_type_bits(e) >= 8;
  return sext ? LLVMBuildSExt(L->b, x, mt, "") : LLVMBuildZExt(L->b, x, mt, "");
}

/* ---- affine expressions ---- */

/* `tid floordiv d` or `tid mod d` for d dividing split_k, from the split loop variables (see
 * kir_llvm_t): q * (k / d) + r floordiv d and r mod d. */
static LLVMValueRef split_divmod(kir_llvm_t *L, bool mod, int64_t d) {
  LLVMBuilderRef b = L->b;
  int64_t k = L->split_k;
  LLVMValueRef q = L->split_q, r = L->split_r;
  LLVMValueRef cd = LLVMConstInt(L->idx, (unsigned long long)d, 0);
  if (mod) return d == k ? r : LLVMBuildURem(b, r, cd, "");
  if (d == k) return q;
  LLVMValueRef hi = LLVMBuildNUWMul(b, q, LLVMConstInt(L->idx, (unsigned long long)(k / d), 0), "");
  return LLVMBuildNUWAdd(b, hi, LLVMBuildUDiv(b, r, cd, ""), "");
}

static LLVMValueRef affine(kir_llvm_t *L, const kiln_indexing_map_t *map, const kiln_affine_expr_t *e,
                           LLVMValueRef *vars, size_t ndims) {
  LLVMBuilderRef b = L->b;
  switch (e->kind) {
    case KILN_AFFINE_CONST: return LLVMConstInt(L->idx, (unsigned long long)e->value, 1);
    case KILN_AFFINE_DIM: return vars[e->value];
    case KILN_AFFINE_SYM: return vars[ndims + (size_t)e->value];
    case KILN_AFFINE_RT: return LLVMConstInt(L->idx, 0, 0);
    case KILN_AFFINE_ADD: {
      LLVMValueRef acc = NULL;
      for (uint32_t i = 0; i < e->n; i++) {
        LLVMValueRef t = affine(L, map, e->ops[i], vars, ndims);
        acc = acc ? LLVMBuildNSWAdd(b, acc, t, "") : t;
      }
      return acc;
    }
    case KILN_AFFINE_MUL:
      return LLVMBuildNSWMul(b, affine(L, map, e->ops[0], vars, ndims),
                             affine(L, map, e->ops[1], vars, ndims), "");
    case KILN_AFFINE_MIN: case KILN_AFFINE_MAX: {
      LLVMValueRef acc = NULL;
      for (uint32_t i = 0; i < e->n; i++) {
        LLVMValueRef t = affine(L, map, e->ops[i], vars, ndims);
        acc = !acc ? t : sel(L, icmp(L, e->kind == KILN_AFFINE_MIN ? LLVMIntSLT : LLVMIntSGT, acc, t), acc, t);
      }
      return acc;
    }
    default: {
      /* floordiv / ceildiv / mod: unsigned forms when the dividend is provably >= 0 and the
       * divisor a positive constant (the common case: LLVM then uses shifts and masks). */
      if (L->split_tid && e->kind != KILN_AFFINE_CEILDIV && e->ops[0]->kind == KILN_AFFINE_DIM &&
          vars[e->ops[0]->value] == L->split_tid && e->ops[1]->kind == KILN_AFFINE_CONST &&
          e->ops[1]->value > 0 && L->split_k % e->ops[1]->value == 0)
        return split_divmod(L, e->kind == KILN_AFFINE_MOD, e->ops[1]->value);
      LLVMValueRef x = affine(L, map, e->ops[0], vars, ndims);
      LLVMValueRef d = affine(L, map, e->ops[1], vars, ndims);
      kiln_interval_t xb = kiln_indexing_map_bounds(map, e->ops[0]);
      bool dpos = e->ops[1]->kind == KILN_AFFINE_CONST && e->ops[1]->value > 0;
      if (e->kind == KILN_AFFINE_CEILDIV) {
        LLVMValueRef dm1 = LLVMBuildSub(b, d, LLVMConstInt(L->idx, 1, 0), "");
        x = LLVMBuildAdd(b, x, dm1, "");
        xb.lo = xb.lo == INT64_MIN ? INT64_MIN : xb.lo + 0;
      }
      if (dpos && xb.lo >= 0)
        return e->kind == KILN_AFFINE_MOD ? LLVMBuildURem(b, x, d, "") : LLVMBuildUDiv(b, x, d, "");
      LLVMValueRef q = LLVMBuildSDiv(b, x, d, ""), r = LLVMBuildSRem(b, x, d, "");
      LLVMValueRef zero = LLVMConstInt(L->idx, 0, 0);
      LLVMValueRef adj = LLVMBuildAnd(b, icmp(L, LLVMIntNE, r, zero),
                                      LLVMBuildXor(b, icmp(L, LLVMIntSLT, r, zero),
                                                   icmp(L, LLVMIntSLT, d, zero), ""), "");
      if (e->kind == KILN_AFFINE_MOD) return sel(L, adj, LLVMBuildAdd(b, r, d, ""), r);
      return sel(L, adj, LLVMBuildSub(b, q, LLVMConstInt(L->idx, 1, 0), ""), q);
    }
  }
}

/* ---- control flow ---- */

static bool emit_region_body(kir_llvm_t *L, const kiln_kir_region_t *r, LLVMValueRef *yielded) {
  if (!kir_llvm_emit_ops(L, r, 0, r->ops.len - 1)) return false;
  const kiln_kir_op_t *t = r->ops.data[r->ops.len - 1];
  for (uint32_t i = 0; i < t->num_operands; i++)
    yielded[i] = t->operands[i]->type->kind == KILN_KIR_TYPE_TENSOR ? NULL
                                                                    : kir_llvm_get(L, t->operands[i]);
  return true;
}

static bool emit_for(kir_llvm_t *L, const kiln_kir_op_t *op) {
  LLVMBuilderRef b = L->b;
  const kiln_kir_region_t *r = op->regions[0];
  uint32_t n = op->num_results;
  LLVMValueRef lb = kir_llvm_get(L, op->operands[0]), ub = kir_llvm_get(L, op->operands[1]);
  LLVMValueRef step = kir_llvm_get(L, op->operands[2]);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "for.head");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "for.body");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "for.exit");
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef iv = LLVMBuildPhi(b, L->idx, "iv");
  LLVMValueRef *phis = kiln_calloc(n + 1, sizeof(*phis));
  LLVMValueRef *ys = kiln_calloc(n + 1, sizeof(*ys));
  for (uint32_t i = 0; i < n; i++) {
    const kiln_kir_value_t *init = op->operands[3 + i];
    if (init->type->kind == KILN_KIR_TYPE_TENSOR) continue;
    phis[i] = LLVMBuildPhi(b, kir_llvm_repr(L, init->type), "");
    LLVMValueRef iv0 = kir_llvm_get(L, init);
    LLVMAddIncoming(phis[i], &iv0, &pre, 1);
    kir_llvm_set(L, r->args[1 + i], phis[i]);
  }
  LLVMAddIncoming(iv, &lb, &pre, 1);
  LLVMBuildCondBr(b, icmp(L, LLVMIntSLT, iv, ub), body, exit);
  LLVMPositionBuilderAtEnd(b, body);
  kir_llvm_set(L, r->args[0], iv);
  bool ok = emit_region_body(L, r, ys);
  if (ok) {
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
    LLVMValueRef next = LLVMBuildAdd(b, iv, step, "");
    LLVMAddIncoming(iv, &next, &latch, 1);
    for (uint32_t i = 0; i < n; i++)
      if (phis[i]) LLVMAddIncoming(phis[i], &ys[i], &latch, 1);
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, exit);
    for (uint32_t i = 0; i < n; i++)
      if (phis[i]) kir_llvm_set(L, op->results[i], phis[i]);
  }
  kiln_free(phis);
  kiln_free(ys);
  return ok;
}

static bool emit_if(kir_llvm_t *L, const kiln_kir_op_t *op) {
  LLVMBuilderRef b = L->b;
  uint32_t n = op->num_results;
  LLVMBasicBlockRef tb = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "if.then");
  LLVMBasicBlockRef eb = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "if.else");
  LLVMBasicBlockRef jb = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "if.join");
  LLVMBuildCondBr(b, kir_llvm_get(L, op->operands[0]), tb, eb);
  LLVMValueRef *ty = kiln_calloc(n + 1, sizeof(*ty)), *ey = kiln_calloc(n + 1, sizeof(*ey));
  LLVMPositionBuilderAtEnd(b, tb);
  bool ok = emit_region_body(L, op->regions[0], ty);
  LLVMBasicBlockRef tend = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, jb);
  LLVMPositionBuilderAtEnd(b, eb);
  ok = ok && emit_region_body(L, op->regions[1], ey);
  LLVMBasicBlockRef eend = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, jb);
  LLVMPositionBuilderAtEnd(b, jb);
  for (uint32_t i = 0; ok && i < n; i++) {
    if (op->results[i]->type->kind == KILN_KIR_TYPE_TENSOR) continue;
    LLVMValueRef phi = LLVMBuildPhi(b, kir_llvm_repr(L, op->results[i]->type), "");
    LLVMAddIncoming(phi, &ty[i], &tend, 1);
    LLVMAddIncoming(phi, &ey[i], &eend, 1);
    kir_llvm_set(L, op->results[i], phi);
  }
  kiln_free(ty);
  kiln_free(ey);
  return ok;
}

static size_t func_index(const kiln_kir_module_t *m, const kiln_kir_func_t *f) {
  for (size_t i = 0; i < m->funcs.len; i++)
    if (m->funcs.data[i] == f) return i;
  return 0;
}

static bool emit_call(kir_llvm_t *L, const kiln_kir_op_t *op) {
  size_t fi = func_index(L->km, op->callee);
  LLVMValueRef f = L->funcs[fi];
  if (!f) {
    kir_llvm_fail(L, KILN_ERR_INTERNAL("kir->llvm: @%s not declared", op->callee->name));
    return false;
  }
  LLVMValueRef *args = kiln_calloc(op->num_operands + 1, sizeof(*args));
  for (uint32_t i = 0; i < op->num_operands; i++) args[i] = kir_llvm_get(L, op->operands[i]);
  LLVMValueRef r = LLVMBuildCall2(L->b, LLVMGlobalGetValueType(f), f, args, op->num_operands, "");
  kiln_free(args);
  if (op->num_results == 1) kir_llvm_set(L, op->results[0], r);
  else
    for (uint32_t i = 0; i < op->num_results; i++)
      kir_llvm_set(L, op->results[i], LLVMBuildExtractValue(L->b, r, i, ""));
  return true;
}

/* ---- atomics ---- */

/* Atomics act on the element itself: a widened host slot (kir_llvm_tensor_slot) is refused. */
static bool atomic_slot_ok(kir_llvm_t *L, const kiln_kir_type_t *t) {
  if (kir_llvm_tensor_slot(L, t) == kir_llvm_elem_mem(L, t->elem)) return true;
  kir_llvm_fail(L, KILN_ERR_UNIMPLEMENTED("kir->llvm (host): atomics on shared memory of %s elements",
                                          kiln_elem_type_name(t->elem)));
  return false;
}

static bool emit_atomic_rmw(kir_llvm_t *L, const kiln_kir_op_t *op) {
  kiln_elem_type_t e = op->operands[1]->type->elem;
  if (!atomic_slot_ok(L, op->operands[1]->type)) return false;
  LLVMValueRef p = element_ptr(L, op, 1);
  LLVMValueRef v = kir_llvm_get(L, op->operands[0]);
  bool fp = kiln_elem_type_is_float(e), sgn = kiln_elem_type_is_signed_int(e);
  LLVMAtomicRMWBinOp bop;
  switch (op->atomic) {
    case KILN_KIR_ATOMIC_ADD: bop = fp ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
    case KILN_KIR_ATOMIC_MIN: bop = fp ? LLVMAtomicRMWBinOpFMin : sgn ? LLVMAtomicRMWBinOpMin : LLVMAtomicRMWBinOpUMin; break;
    case KILN_KIR_ATOMIC_MAX: bop = fp ? LLVMAtomicRMWBinOpFMax : sgn ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpUMax; break;
    default: bop = LLVMAtomicRMWBinOpXchg; break;
  }
  LLVMBuildAtomicRMW(L->b, bop, p, v, LLVMAtomicOrderingMonotonic, 0);
  return true;
}

static bool emit_atomic_cas(kir_llvm_t *L, const kiln_kir_op_t *op) {
  LLVMBuilderRef b = L->b;
  kiln_elem_type_t e = op->operands[0]->type->elem;
  if (!atomic_slot_ok(L, op->operands[0]->type)) return false;
  LLVMTypeRef rt = kir_llvm_elem_repr(L, e);
  LLVMTypeRef it = LLVMIntTypeInContext(L->ctx, (unsigned)kiln_elem_type_bits(e));
  LLVMValueRef p = element_ptr(L, op, 0);
  LLVMValueRef old0 = LLVMBuildLoad2(b, it, p, "");
  LLVMSetAlignment(old0, elem_align(L, e));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "cas.loop");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "cas.done");
  LLVMBuildBr(b, loop);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef cur = LLVMBuildPhi(b, it, "");
  LLVMAddIncoming(cur, &old0, &pre, 1);
  const kiln_kir_region_t *r = op->regions[0];
  LLVMValueRef curv = rt == it ? cur : LLVMBuildBitCast(b, cur, rt, "");
  kir_llvm_set(L, r->args[0], curv);
  LLVMValueRef y;
  if (!emit_region_body(L, r, &y)) return false;
  LLVMValueRef newi = rt == it ? y : LLVMBuildBitCast(b, y, it, "");
  LLVMValueRef pair = LLVMBuildAtomicCmpXchg(b, p, cur, newi, LLVMAtomicOrderingMonotonic,
                                             LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef seen = LLVMBuildExtractValue(b, pair, 0, "");
  LLVMValueRef okv = LLVMBuildExtractValue(b, pair, 1, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMAddIncoming(cur, &seen, &latch, 1);
  LLVMBuildCondBr(b, okv, done, loop);
  LLVMPositionBuilderAtEnd(b, done);
  return true;
}

/* ---- ops ---- */

bool kir_llvm_emit_op(kir_llvm_t *L, const kiln_kir_op_t *op) {
  LLVMBuilderRef b = L->b;
  kiln_kir_value_t *const *a = op->operands;
  const kiln_kir_type_t *rt = op->num_results ? op->results[0]->type : NULL;
  LLVMValueRef r = NULL;
  if (L->status) return false;
  if (emit_excess(L, op)) return !L->status;
  if (kiln_kir_opcode_is_binary(op->opcode) || kiln_kir_opcode_is_unary(op->opcode)) {
    r = per_lane(L, op, rt, kiln_kir_opcode_is_binary(op->opcode) ? 2 : 1, lane_arith,
                 rt->kind == KILN_KIR_TYPE_VECTOR ? kir_llvm_elem_repr(L, rt->elem) : NULL);
    kir_llvm_set(L, op->results[0], r);
    return !L->status;
  }
  switch (op->opcode) {
    case KILN_KIR_CONSTANT:
      if (rt->kind == KILN_KIR_TYPE_VECTOR) {
        kiln_kir_type_t buf;
        LLVMValueRef s = const_scalar(L, lane_type(rt, &buf), op->cst);
        LLVMValueRef lanes[KILN_KIR_MAX_LANES];
        for (int i = 0; i < rt->lanes; i++) lanes[i] = s;
        r = LLVMConstVector(lanes, (unsigned)rt->lanes);
      } else {
        r = const_scalar(L, rt, op->cst);
      }
      break;
    case KILN_KIR_CMP:
      r = per_lane(L, op, a[0]->type, 2, lane_cmp, L->i1);
      break;
    case KILN_KIR_IS_FINITE:
      r = per_lane(L, op, a[0]->type, 1, lane_finite, L->i1);
      break;
    case KILN_KIR_CONVERT:
      r = per_lane(L, op, a[0]->type, 1, lane_convert,
                   rt->kind == KILN_KIR_TYPE_VECTOR ? kir_llvm_elem_repr(L, rt->elem) : NULL);
      break;
    case KILN_KIR_BITCAST: {
      LLVMValueRef x = kir_llvm_get(L, a[0]);
      LLVMTypeRef to = kir_llvm_repr(L, rt);
      /* A 4-bit float lives in an i8, a 4-bit integer in an i4: the same bits, other widths. */
      unsigned fw = int_lane_width(LLVMTypeOf(x)), tw = int_lane_width(to);
      if (fw && tw && fw != tw)
        r = fw < tw ? LLVMBuildZExt(b, x, to, "") : LLVMBuildTrunc(b, x, to, "");
      else
        r = LLVMBuildBitCast(b, x, to, "");
      break;
    }
    case KILN_KIR_SELECT:
      if (rt->kind == KILN_KIR_TYPE_TENSOR) return true; /* resolved through roots */
      r = LLVMBuildSelect(b, kir_llvm_get(L, a[0]), kir_llvm_get(L, a[1]), kir_llvm_get(L, a[2]), "");
      break;
    case KILN_KIR_THREAD_ID:
      r = L->target->thread_id(L, op);
      break;
    case KILN_KIR_BLOCK_ID:
      r = L->target->block_id(L, op);
      break;
    case KILN_KIR_APPLY_INDEXING: {
      LLVMValueRef vars[KILN_KIR_MAX_RANK * 2 + 8];
      if (op->num_operands > sizeof(vars) / sizeof(vars[0])) {
        kir_llvm_fail(L, KILN_ERR_UNIMPLEMENTED("kir->llvm: apply_indexing with too many operands"));
        return false;
      }
      for (uint32_t i = 0; i < op->num_operands; i++) vars[i] = kir_llvm_get(L, a[i]);
      for (uint32_t i = 0; i < op->num_results; i++)
        kir_llvm_set(L, op->results[i],
                     affine(L, op->map, op->map->results.data[i], vars, op->num_map_dims));
      return !L->status;
    }
    case KILN_KIR_FOR:
      return emit_for(L, op);
    case KILN_KIR_IF:
      return emit_if(L, op);
    case KILN_KIR_CALL:
      return emit_call(L, op);
    case KILN_KIR_LOOP:
      kir_llvm_fail(L, KILN_ERR_INVALID("kir->llvm: `loop` must be lowered first (kiln_kir_lower_loops)"));
      return false;
    case KILN_KIR_EXTRACT: {
      kiln_elem_type_t e = a[0]->type->elem;
      LLVMValueRef p = element_ptr(L, op, 0);
      LLVMTypeRef slot = kir_llvm_tensor_slot(L, a[0]->type);
      LLVMValueRef ld = LLVMBuildLoad2(b, slot, p, "");
      LLVMSetAlignment(ld, slot_align(L, slot, e));
      r = mem_to_repr(L, e, slot_to_mem(L, kir_llvm_elem_mem(L, e), ld));
      break;
    }
    case KILN_KIR_INSERT: {
      kiln_elem_type_t e = a[1]->type->elem;
      LLVMValueRef p = element_ptr(L, op, 1);
      LLVMTypeRef slot = kir_llvm_tensor_slot(L, a[1]->type);
      LLVMValueRef st = LLVMBuildStore(b, mem_to_slot(L, slot, repr_to_mem(L, e, kir_llvm_get(L, a[0]))), p);
      LLVMSetAlignment(st, slot_align(L, slot, e));
      return !L->status;
    }
    case KILN_KIR_VLOAD: {
      kiln_elem_type_t e = a[0]->type->elem;
      LLVMValueRef p = element_ptr(L, op, 0);
      LLVMTypeRef vt = LLVMVectorType(kir_llvm_elem_mem(L, e), (unsigned)rt->lanes);
      if (!L->target->nvptx) {
        /* Host: scalar loads, so the loop vectorizer (which skips vector-typed memory ops)
         * can widen the thread loop over an interleaved group. */
        LLVMValueRef v = LLVMGetUndef(vt);
        LLVMTypeRef slot = kir_llvm_tensor_slot(L, a[0]->type);
        for (int i = 0; i < rt->lanes; i++) {
          LLVMValueRef off = LLVMConstInt(L->idx, (unsigned)i, 0);
          LLVMValueRef q = LLVMBuildInBoundsGEP2(b, slot, p, &off, 1, "");
          LLVMValueRef x = LLVMBuildLoad2(b, slot, q, "");
          LLVMSetAlignment(x, slot_align(L, slot, e));
          x = slot_to_mem(L, kir_llvm_elem_mem(L, e), x);
          v = LLVMBuildInsertElement(b, v, x, LLVMConstInt(L->i32, (unsigned)i, 0), "");
        }
        r = mem_to_repr(L, e, v);
        break;
      }
      LLVMValueRef ld = LLVMBuildLoad2(b, vt, p, "");
      LLVMSetAlignment(ld, elem_align(L, e) * (unsigned)rt->lanes);
      r = mem_to_repr(L, e, ld);
      break;
    }
    case KILN_KIR_VSTORE: {
      kiln_elem_type_t e = a[1]->type->elem;
      LLVMValueRef p = element_ptr(L, op, 1);
      LLVMValueRef v = repr_to_mem(L, e, kir_llvm_get(L, a[0]));
      if (!L->target->nvptx) {
        LLVMTypeRef slot = kir_llvm_tensor_slot(L, a[1]->type);
        for (int i = 0; i < a[0]->type->lanes; i++) {
          LLVMValueRef off = LLVMConstInt(L->idx, (unsigned)i, 0);
          LLVMValueRef q = LLVMBuildInBoundsGEP2(b, slot, p, &off, 1, "");
          LLVMValueRef x = mem_to_slot(L, slot, LLVMBuildExtractElement(b, v, LLVMConstInt(L->i32, (unsigned)i, 0), ""));
          LLVMSetAlignment(LLVMBuildStore(b, x, q), slot_align(L, slot, e));
        }
        return !L->status;
      }
      LLVMValueRef st = LLVMBuildStore(b, v, p);
      LLVMSetAlignment(st, elem_align(L, e) * (unsigned)a[0]->type->lanes);
      return !L->status;
    }
    case KILN_KIR_VEXTRACT: {
      LLVMValueRef lane = op->lane >= 0 ? LLVMConstInt(L->i32, (unsigned long long)op->lane, 0)
                                        : kir_llvm_get(L, a[1]);
      r = LLVMBuildExtractElement(b, kir_llvm_get(L, a[0]), lane, "");
      break;
    }
    case KILN_KIR_VINSERT: {
      LLVMValueRef lane = op->lane >= 0 ? LLVMConstInt(L->i32, (unsigned long long)op->lane, 0)
                                        : kir_llvm_get(L, a[2]);
      r = LLVMBuildInsertElement(b, kir_llvm_get(L, a[1]), kir_llvm_get(L, a[0]), lane, "");
      break;
    }
    case KILN_KIR_VSPLAT: {
      LLVMValueRef x = kir_llvm_get(L, a[0]);
      r = LLVMGetUndef(kir_llvm_repr(L, rt));
      for (int i = 0; i < rt->lanes; i++)
        r = LLVMBuildInsertElement(b, r, x, LLVMConstInt(L->i32, (unsigned)i, 0), "");
      break;
    }
    case KILN_KIR_ALLOC_SHARED:
      return true; /* materialized by the target before the body */
    case KILN_KIR_BARRIER:
      if (!L->target->barrier || !L->target->barrier(L, op)) {
        kir_llvm_fail(L, KILN_ERR_UNIMPLEMENTED("kir->llvm: barrier not supported at this position"));
        return false;
      }
      return true;
    case KILN_KIR_SHUFFLE:
      if (!L->target->shuffle) {
        kir_llvm_fail(L, KILN_ERR_UNIMPLEMENTED(
                             "kir->llvm (host): shuffles must be at the top level of the kernel"));
        return false;
      }
      r = L->target->shuffle(L, op, kir_llvm_get(L, a[0]));
      break;
    case KILN_KIR_ATOMIC_RMW:
      return emit_atomic_rmw(L, op);
    case KILN_KIR_ATOMIC_CAS:
      return emit_atomic_cas(L, op);
    default:
      kir_llvm_fail(L, KILN_ERR_INTERNAL("kir->llvm: unexpected %s", kiln_kir_opcode_name(op->opcode)));
      return false;
  }
  if (r && op->num_results) kir_llvm_set(L, op->results[0], r);
  return !L->status;
}

bool kir_llvm_emit_ops(kir_llvm_t *L, const kiln_kir_region_t *r, size_t begin, size_t end) {
  for (size_t i = begin; i < end; i++)
    if (!kir_llvm_emit_op(L, r->ops.data[i])) return false;
  return true;
}

/* ---- subgraph functions ---- */

bool kir_llvm_emit_subgraphs(kir_llvm_t *L) {
  const kiln_kir_module_t *km = L->km;
  for (size_t i = 0; i < km->funcs.len; i++) {
    const kiln_kir_func_t *f = km->funcs.data[i];
    if (f->kind != KILN_KIR_FUNC_SUBGRAPH) continue;
    uint32_t np = f->body->num_args;
    LLVMTypeRef *pt = kiln_calloc(np + 1, sizeof(*pt));
    for (uint32_t k = 0; k < np; k++) pt[k] = kir_llvm_repr(L, f->body->args[k]->type);
    LLVMTypeRef ret;
    size_t nr = f->result_types.len;
    if (nr == 0) ret = L->void_t;
    else if (nr == 1) ret = kir_llvm_repr(L, f->result_types.data[0]);
    else {
      LLVMTypeRef *et = kiln_calloc(nr, sizeof(*et));
      for (size_t k = 0; k < nr; k++) et[k] = kir_llvm_repr(L, f->result_types.data[k]);
      ret = LLVMStructTypeInContext(L->ctx, et, (unsigned)nr, 0);
      kiln_free(et);
    }
    char name[256];
    snprintf(name, sizeof(name), "%s.%s", km->name, f->name);
    LLVMValueRef fn = LLVMAddFunction(L->mod, name, LLVMFunctionType(ret, pt, np, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    kiln_free(pt);
    L->funcs[i] = fn;
  }
  for (size_t i = 0; i < km->funcs.len && !L->status; i++) {
    const kiln_kir_func_t *f = km->funcs.data[i];
    if (f->kind != KILN_KIR_FUNC_SUBGRAPH) continue;
    LLVMValueRef fn = L->funcs[i];
    LLVMValueRef saved_fn = L->fn;
    LLVMBasicBlockRef saved_entry = L->entry;
    L->fn = fn;
    L->entry = LLVMAppendBasicBlockInContext(L->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(L->b, L->entry);
    kir_llvm_compute_roots(L, f);
    for (uint32_t k = 0; k < f->body->num_args; k++)
      kir_llvm_set(L, f->body->args[k], LLVMGetParam(fn, k));
    const kiln_kir_region_t *body = f->body;
    size_t nr = f->result_types.len;
    LLVMValueRef *ys = kiln_calloc(nr + 1, sizeof(*ys));
    if (emit_region_body(L, body, ys)) {
      if (nr == 0) LLVMBuildRetVoid(L->b);
      else if (nr == 1) LLVMBuildRet(L->b, ys[0]);
      else LLVMBuildAggregateRet(L->b, ys, (unsigned)nr);
    }
    kiln_free(ys);
    L->fn = saved_fn;
    L->entry = saved_entry;
  }
  return !L->status;
}
