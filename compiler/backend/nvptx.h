/* NVPTX backend: an LLVM module of kernels -> PTX text -> cubin.
 *
 * Kernels are functions with the PTX kernel calling convention (LLVMPTXKernelCallConv; see
 * kiln_llvm_mark_ptx_kernel) — `nvvm.annotations` metadata alone is not enough (LLVM 21+
 * ignores it), and a module without such a function is rejected.
 *
 * Pipeline of kiln_nvptx_compile:
 *   1. verify the module, set triple nvptx64-nvidia-cuda and the target machine's data layout;
 *   2. when the module calls `__nv_*` functions, link libdevice lazily
 *      (<cuda>/nvvm/libdevice/libdevice.10.bc: only the functions used are materialized),
 *      then give every defined non-kernel function internal linkage, and set the module flag
 *      nvvm-reflect-ftz so NVVMReflect folds libdevice's __nvvm_reflect calls;
 *   3. LLVMRunPasses(pipeline, default "default<O3>") with the NVPTX target machine
 *      (NVVMReflect and the NVPTX passes come from it);
 *   4. emit PTX;
 *   5. PTX -> cubin with nvJitLink (dlopen'ed), else `ptxas`; with neither the status is
 *      UNAVAILABLE naming what was tried, and the PTX in the result is still valid (the
 *      driver can JIT it).
 *
 * PTX ISA version per processor (features "+ptxNN", the lowest version the processor needs,
 * at least 6.0 so shfl.sync / bar.warp.sync exist):
 *   sm_50..sm_70 ptx60 | sm_72 ptx61 | sm_75 ptx63 | sm_80 ptx70 | sm_86 ptx71 | sm_87 ptx74
 *   sm_89 ptx78 | sm_90, sm_90a ptx80 | sm_100(a), sm_101(a) ptx86 | sm_120(a) ptx87
 *   (the last two rows need LLVM 20+). The cubin's -arch must match exactly: PTX for sm_90a
 *   does not assemble with -arch=sm_90.
 *
 * CUDA is found through kiln_cuda_dirs_find (options.cuda: the edges fill it from
 * $KILN_CUDA_DIR, $CUDA_HOME, $CUDA_PATH, $PATH and $TMPDIR). Everything is thread-safe as long as
 * each call's module (and its LLVMContext) is used by one thread at a time. */
#ifndef KILN_COMPILER_BACKEND_NVPTX_H_
#define KILN_COMPILER_BACKEND_NVPTX_H_

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "base/status.h"
#include "compiler/backend/nvjitlink.h"

#define KILN_NVPTX_TRIPLE "nvptx64-nvidia-cuda"
#define KILN_NVPTX_DEFAULT_ARCH "sm_90"

typedef enum kiln_cubin_via {
  KILN_CUBIN_VIA_AUTO = 0,  /* nvJitLink, else ptxas */
  KILN_CUBIN_VIA_NVJITLINK, /* nvJitLink only */
  KILN_CUBIN_VIA_PTXAS,     /* ptxas only */
  KILN_CUBIN_VIA_SKIP,      /* stop after PTX */
} kiln_cubin_via_t;

typedef enum kiln_cubin_method {
  KILN_CUBIN_METHOD_NONE = 0, /* no cubin: hand the PTX to the driver */
  KILN_CUBIN_METHOD_NVJITLINK,
  KILN_CUBIN_METHOD_PTXAS,
} kiln_cubin_method_t;

/* All fields optional; a zeroed struct (or NULL options) gives the defaults. */
typedef struct kiln_nvptx_options {
  const char *arch;     /* "sm_90" when NULL */
  const char *features; /* NULL: "+ptxNN" from the table above */
  kiln_cuda_search_t cuda; /* where the toolkit is (zeroed: the standard search) */
  const char *pipeline; /* NULL: "default<O3>" */
  kiln_cubin_via_t cubin_via;
  bool keep_module;      /* compile a clone, leaving the caller's module untouched */
  bool libdevice_eager;  /* parse all of libdevice instead of lazily (for measurements) */
  bool ftz;              /* nvvm-reflect-ftz value: flush f32 denormals in libdevice */
  const char *dump_dir;  /* NULL or "": no dumps (callers pass $KILN_DUMP_TO) */
  const char *dump_name; /* file name stem for dumps; NULL: the module identifier */
} kiln_nvptx_options_t;

typedef struct kiln_nvptx_result {
  char *ptx; /* NUL-terminated PTX text, or NULL */
  size_t ptx_size;
  void *cubin; /* ELF bytes, or NULL */
  size_t cubin_size;
  kiln_cubin_method_t method;
  char *arch;                 /* the processor compiled for */
  char *cubin_log;            /* nvJitLink / ptxas output (info or errors), or NULL */
  char *libdevice_path;       /* the libdevice linked, or NULL when none was needed */
  size_t libdevice_functions; /* functions brought in from libdevice */
  double libdevice_ms, opt_ms, ptx_ms, cubin_ms; /* time per stage */
} kiln_nvptx_result_t;

/* Compiles the kernels of `m` (see the pipeline above). `out` is always initialized and must
 * be released with kiln_nvptx_result_free, also on error: after a cubin failure it still
 * holds the PTX and the tool's log. `m` stays owned by the caller; unless keep_module is set
 * it is mutated (linked, optimized, code-generated) and only fit for disposal. */
kiln_status kiln_nvptx_compile(LLVMModuleRef m, const kiln_nvptx_options_t *opts,
                               kiln_nvptx_result_t *out);

/* PTX text -> cubin only (step 5), for opts->arch. Fills out->cubin, method, cubin_log,
 * cubin_ms and arch. PTX that the tool rejects gives INVALID_ARGUMENT carrying its log. */
kiln_status kiln_nvptx_ptx_to_cubin(const char *ptx, size_t ptx_len,
                                    const kiln_nvptx_options_t *opts, kiln_nvptx_result_t *out);

void kiln_nvptx_result_free(kiln_nvptx_result_t *r);

/* The default "+ptxNN" feature string for `arch`, or INVALID_ARGUMENT/UNIMPLEMENTED for an
 * unknown processor or one the linked LLVM cannot target. *features is static. */
kiln_status kiln_nvptx_arch_features(const char *arch, const char **features);

/* The processor to compile for when `requested` (e.g. "sm_%d%d" of a device's compute
 * capability; NULL: sm_90) is not one the linked LLVM knows: the newest known processor not
 * newer than it, with *ptx_only set (hand the driver PTX: it is forward compatible, a cubin
 * is not). A known processor is returned as is (*ptx_only false). INVALID_ARGUMENT for a
 * name that is no "sm_NN" or older than every known processor. */
kiln_status kiln_nvptx_arch_resolve(const char *requested, char *arch, size_t arch_size,
                                    bool *ptx_only);

/* Declares that kernel `fn` is launched with at most x*y*z threads per block (PTX
 * `.maxntid x, y, z`), so ptxas keeps its registers within what such a block may use (without
 * it a 1024-thread kernel may get more than 64 registers and fail to launch). LLVM 19-20:
 * !nvvm.annotations "maxntid{x,y,z}"; LLVM 21+: the "nvvm.maxntid" function attribute. A zero
 * dimension leaves `fn` unchanged. */
void kiln_nvptx_set_max_threads(LLVMValueRef fn, unsigned x, unsigned y, unsigned z);

/* Creates the NVPTX target machine for `arch` (NULL: sm_90) and `features` (NULL: table).
 * The caller owns *out (LLVMDisposeTargetMachine). Codegen uses it for the data layout. */
kiln_status kiln_nvptx_target_machine_create(const char *arch, const char *features,
                                             LLVMTargetMachineRef *out);

/* Runs `ptxas -arch=<arch> -o <tmp> <ptx>` (ptxas from the standard CUDA search). OK when
 * ptxas accepts the PTX; INVALID_ARGUMENT with its output otherwise; UNAVAILABLE (paths
 * tried) when there is no ptxas. *log (kiln_free; may be NULL) gets ptxas's output. */
kiln_status kiln_ptxas_check(const char *ptx, const char *arch, char **log);

/* Runs argv[0] (a path) with argv, capturing stdout and stderr together into *output
 * (kiln_free). *exit_code is the exit status (128+signal when killed). Fails only when the
 * program could not be started. */
kiln_status kiln_nvptx_run_tool(const char *const argv[], char **output, int *exit_code);

/* The path of ptxas (kiln_free) from search->exec_path and the CUDA search (`search` may be
 * NULL: the standard roots only), or UNAVAILABLE with the paths tried. */
kiln_status kiln_nvptx_find_ptxas(const kiln_cuda_search_t *search, char **path);

#endif /* KILN_COMPILER_BACKEND_NVPTX_H_ */
