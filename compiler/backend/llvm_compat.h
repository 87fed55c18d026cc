/* The one place where kiln deals with differences between LLVM versions.
 *
 * kiln builds against the LLVM C API (the llvm-c headers) of LLVM 19.1 and is written so that 20
 * and 21+ work by changing only this header. What differs, and how each is handled:
 *
 * - ORC thread-safe contexts. LLVM <= 20 has LLVMOrcCreateNewThreadSafeContext() and
 *   LLVMOrcThreadSafeContextGetContext(); LLVM 21 removed the getter and added
 *   LLVMOrcCreateNewThreadSafeContextFromLLVMContext(), which wraps a context the caller
 *   created. kiln_llvm_tsc_create() hides both: it hands back the wrapper and the context.
 * - PTX kernels. LLVM 21+ ignores `!nvvm.annotations` "kernel" metadata and only honours
 *   the PTX kernel calling convention; LLVM 19 honours both (the calling convention when no
 *   metadata is present). kiln marks kernels only with the calling convention.
 * - NVPTX processors and PTX ISA versions. LLVM 19 knows sm_20 … sm_90a and ptx32 … ptx85;
 *   LLVM 20 added sm_100/101/120 (ptx86, ptx87). KILN_LLVM_NVPTX_MAX_PTX bounds the table in
 *   nvptx.c so an unknown processor is rejected with a clear status instead of LLVM's
 *   "not a recognized processor (ignoring processor)" line on stderr.
 */
#ifndef KILN_COMPILER_BACKEND_LLVM_COMPAT_H_
#define KILN_COMPILER_BACKEND_LLVM_COMPAT_H_

#include <llvm-c/Core.h>
#include <llvm-c/Orc.h>
#include <llvm/Config/llvm-config.h>

#define KILN_LLVM_VERSION_MAJOR LLVM_VERSION_MAJOR

#if LLVM_VERSION_MAJOR < 19
#error "kiln needs LLVM 19 or newer"
#endif

/* Highest PTX ISA version (×10) the linked LLVM's NVPTX backend can emit. */
#if LLVM_VERSION_MAJOR >= 20
#define KILN_LLVM_NVPTX_MAX_PTX 87
#else
#define KILN_LLVM_NVPTX_MAX_PTX 85
#endif

/* Creates a thread-safe context and returns the LLVMContext inside it. The caller owns
 * *out_tsc (LLVMOrcDisposeThreadSafeContext); the context lives as long as the wrapper or
 * any ThreadSafeModule made from it. */
static inline void kiln_llvm_tsc_create(LLVMOrcThreadSafeContextRef *out_tsc,
                                        LLVMContextRef *out_ctx) {
#if LLVM_VERSION_MAJOR >= 21
  LLVMContextRef ctx = LLVMContextCreate();
  *out_tsc = LLVMOrcCreateNewThreadSafeContextFromLLVMContext(ctx);
  *out_ctx = ctx;
#else
  *out_tsc = LLVMOrcCreateNewThreadSafeContext();
  *out_ctx = LLVMOrcThreadSafeContextGetContext(*out_tsc);
#endif
}

/* Marks `fn` as a PTX kernel entry point (`.entry` in PTX). */
static inline void kiln_llvm_mark_ptx_kernel(LLVMValueRef fn) {
  LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
}

static inline int kiln_llvm_is_ptx_kernel(LLVMValueRef fn) {
  return LLVMGetFunctionCallConv(fn) == LLVMPTXKernelCallConv;
}

#endif /* KILN_COMPILER_BACKEND_LLVM_COMPAT_H_ */
