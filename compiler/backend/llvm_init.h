/* One-time LLVM target initialization, plus the small helpers both backends share:
 * LLVM errors as kiln statuses, a monotonic clock, assembly emission, and dumps.
 *
 * Initialization is thread-safe (pthread_once) and idempotent; call it before creating a
 * target machine. The NVPTX and host backends call it themselves. */
#ifndef KILN_COMPILER_BACKEND_LLVM_INIT_H_
#define KILN_COMPILER_BACKEND_LLVM_INIT_H_

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Error.h>
#include <llvm-c/TargetMachine.h>

#include "base/status.h"

/* Initializes the host (native) target, its asm printer and asm parser. UNAVAILABLE when
 * the linked LLVM has no backend for the host. */
kiln_status kiln_llvm_init_native(void);
/* Initializes the NVPTX target and asm printer. */
kiln_status kiln_llvm_init_nvptx(void);

/* Turns an LLVMErrorRef into a status with `code` and "<what>: <llvm message>", consuming
 * the error. NULL (success) gives OK. */
kiln_status kiln_llvm_error_to_status(LLVMErrorRef err, kiln_status_code_t code, const char *what);

/* Emits `m` as assembly text (PTX for NVPTX) with `tm`. Code generation mutates the module,
 * so with clone_first the module is cloned and the clone is emitted. *out is a NUL-terminated
 * heap string (kiln_free), *out_len its length. */
kiln_status kiln_backend_emit_assembly(LLVMTargetMachineRef tm, LLVMModuleRef m, bool clone_first,
                                       char **out, size_t *out_len);

/* The dump directory: `explicit_dir` when non-NULL and non-empty, else NULL (no dumps).
 * Options only: $KILN_DUMP_TO is read above this layer (codegen's compile options, the edges'
 * plugin/env_options.h). Borrowed. */
const char *kiln_backend_dump_dir(const char *explicit_dir);

/* Backend dump stages. File names are `<dir>/<name>.<NN>-<stage>.<ext>`, NN increasing along
 * the pipeline so that `ls` shows them in order; the backend uses 90..99, after the HLO and
 * kernel-IR stages. */
#define KILN_DUMP_STAGE_LLVM_INPUT "90-llvm-input"
#define KILN_DUMP_STAGE_LLVM_LINKED "91-llvm-libdevice"
#define KILN_DUMP_STAGE_LLVM_OPT "92-llvm-opt"
#define KILN_DUMP_STAGE_PTX "93-ptx"
#define KILN_DUMP_STAGE_HOST_ASM "93-host-asm"

/* Writes `len` bytes of `text` to `<dir>/<name>.<stage>.<ext>`, creating `dir` if needed.
 * Characters of `name` other than [A-Za-z0-9_.-] become '_'. */
kiln_status kiln_backend_dump_text(const char *dir, const char *name, const char *stage,
                                   const char *ext, const char *text, size_t len);
/* Prints `m` as LLVM IR text into `<dir>/<name>.<stage>.ll`. */
kiln_status kiln_backend_dump_module(const char *dir, const char *name, const char *stage,
                                     LLVMModuleRef m);

#endif /* KILN_COMPILER_BACKEND_LLVM_INIT_H_ */
