/* LLVM-C builders for the small kernels the backend tests and bench_backend compile. Shared
 * as static functions so each program stays self-contained. */
#ifndef KILN_TESTS_BACKEND_TEST_KERNELS_H_
#define KILN_TESTS_BACKEND_TEST_KERNELS_H_

#include <llvm-c/Core.h>

#include "compiler/backend/llvm_compat.h"

static inline LLVMValueRef kiln_test_sreg(LLVMModuleRef m, LLVMBuilderRef b, const char *name) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef fty = LLVMFunctionType(LLVMInt32TypeInContext(ctx), NULL, 0, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(m, name);
  if (!fn) fn = LLVMAddFunction(m, name, fty); /* the name makes it the NVVM intrinsic */
  return LLVMBuildCall2(b, fty, fn, NULL, 0, "");
}

/* `kernel_name`(float* a, float* b, float* c, i32 n):
 *   i = ctaid.x * ntid.x + tid.x; if (i < n) c[i] = f(a[i] + b[i])
 * with f the libdevice function `nv_fn` ("__nv_expf", "__nv_tanhf") or the identity when
 * NULL. The kernel uses the PTX kernel calling convention. */
static inline LLVMModuleRef kiln_test_build_vadd(LLVMContextRef ctx, const char *kernel_name,
                                                 const char *nv_fn) {
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext(kernel_name, ctx);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef params[] = {ptr, ptr, ptr, i32};
  LLVMValueRef fn =
      LLVMAddFunction(m, kernel_name, LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 4, 0));
  kiln_llvm_mark_ptx_kernel(fn);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(ctx, fn, "body");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(ctx, fn, "exit");
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef tid = kiln_test_sreg(m, b, "llvm.nvvm.read.ptx.sreg.tid.x");
  LLVMValueRef ctaid = kiln_test_sreg(m, b, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  LLVMValueRef ntid = kiln_test_sreg(m, b, "llvm.nvvm.read.ptx.sreg.ntid.x");
  LLVMValueRef i = LLVMBuildAdd(b, LLVMBuildMul(b, ctaid, ntid, ""), tid, "i");
  LLVMValueRef in_bounds = LLVMBuildICmp(b, LLVMIntSLT, i, LLVMGetParam(fn, 3), "in_bounds");
  LLVMBuildCondBr(b, in_bounds, body, exit);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef idx = LLVMBuildSExt(b, i, i64, "idx");
  LLVMValueRef pa = LLVMBuildGEP2(b, f32, LLVMGetParam(fn, 0), &idx, 1, "pa");
  LLVMValueRef pb = LLVMBuildGEP2(b, f32, LLVMGetParam(fn, 1), &idx, 1, "pb");
  LLVMValueRef pc = LLVMBuildGEP2(b, f32, LLVMGetParam(fn, 2), &idx, 1, "pc");
  LLVMValueRef sum =
      LLVMBuildFAdd(b, LLVMBuildLoad2(b, f32, pa, "va"), LLVMBuildLoad2(b, f32, pb, "vb"), "sum");
  if (nv_fn) {
    LLVMTypeRef fty = LLVMFunctionType(f32, &f32, 1, 0);
    LLVMValueRef callee = LLVMAddFunction(m, nv_fn, fty);
    sum = LLVMBuildCall2(b, fty, callee, &sum, 1, "f");
  }
  LLVMBuildStore(b, sum, pc);
  LLVMBuildBr(b, exit);
  LLVMPositionBuilderAtEnd(b, exit);
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  return m;
}

/* void saxpy(float a, float* x, float* y, i64 n) { for (i = 0; i < n; i++) y[i] += a * x[i]; } */
static inline LLVMModuleRef kiln_test_build_saxpy(LLVMContextRef ctx, const char *fn_name) {
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext(fn_name, ctx);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef params[] = {f32, ptr, ptr, i64};
  LLVMValueRef fn =
      LLVMAddFunction(m, fn_name, LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 4, 0));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ctx, fn, "loop");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(ctx, fn, "exit");
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
  LLVMValueRef nonempty = LLVMBuildICmp(b, LLVMIntSGT, LLVMGetParam(fn, 3), zero, "");
  LLVMBuildCondBr(b, nonempty, loop, exit);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef iv = LLVMBuildPhi(b, i64, "i");
  LLVMValueRef px = LLVMBuildGEP2(b, f32, LLVMGetParam(fn, 1), &iv, 1, "");
  LLVMValueRef py = LLVMBuildGEP2(b, f32, LLVMGetParam(fn, 2), &iv, 1, "");
  LLVMValueRef ax = LLVMBuildFMul(b, LLVMGetParam(fn, 0), LLVMBuildLoad2(b, f32, px, ""), "");
  LLVMBuildStore(b, LLVMBuildFAdd(b, ax, LLVMBuildLoad2(b, f32, py, ""), ""), py);
  LLVMValueRef next = LLVMBuildAdd(b, iv, LLVMConstInt(i64, 1, 0), "next");
  LLVMValueRef more = LLVMBuildICmp(b, LLVMIntSLT, next, LLVMGetParam(fn, 3), "");
  LLVMBuildCondBr(b, more, loop, exit);
  LLVMValueRef inc_vals[] = {zero, next};
  LLVMBasicBlockRef inc_blocks[] = {entry, loop};
  LLVMAddIncoming(iv, inc_vals, inc_blocks, 2);
  LLVMPositionBuilderAtEnd(b, exit);
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  return m;
}

/* float fn_name(float x) { return libm_fn(x); } with libm_fn e.g. "tanhf". */
static inline LLVMModuleRef kiln_test_build_libm_caller(LLVMContextRef ctx, const char *fn_name,
                                                        const char *libm_fn) {
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext(fn_name, ctx);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx);
  LLVMTypeRef fty = LLVMFunctionType(f32, &f32, 1, 0);
  LLVMValueRef fn = LLVMAddFunction(m, fn_name, fty);
  LLVMValueRef callee = LLVMAddFunction(m, libm_fn, fty);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
  LLVMValueRef x = LLVMGetParam(fn, 0);
  LLVMBuildRet(b, LLVMBuildCall2(b, fty, callee, &x, 1, "r"));
  LLVMDisposeBuilder(b);
  return m;
}

#endif /* KILN_TESTS_BACKEND_TEST_KERNELS_H_ */
