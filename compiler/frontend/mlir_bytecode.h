/* MLIR bytecode (the portable artifacts JAX sends: the VHLO dialect at some StableHLO version)
 * -> the generic IR (mlir_ir.h), upgraded to the current StableHLO ops so that it reads as the
 * text reader's output of the same program does. A version newer than kiln knows is refused
 * naming both versions; malformed bytes are INVALID_ARGUMENT naming the section and offset.
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_COMPILER_FRONTEND_MLIR_BYTECODE_H_
#define KILN_COMPILER_FRONTEND_MLIR_BYTECODE_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "compiler/frontend/mlir_ir.h"

/* True when `bytes` start with MLIR bytecode's magic ("ML\xefR"). */
bool kiln_mlir_bytes_are_bytecode(const void *bytes, size_t n);
kiln_status kiln_mlir_read_bytecode(const void *bytes, size_t n, kiln_mlir_module_t **out);

#endif /* KILN_COMPILER_FRONTEND_MLIR_BYTECODE_H_ */
