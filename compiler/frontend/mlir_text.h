/* MLIR text -> the generic IR (mlir_ir.h): the builtin dialect's types and attributes, the
 * func dialect, and every StableHLO and CHLO op in its generic and its pretty form, as JAX and
 * the StableHLO test suites write them. Errors read `file:line:col: expected <what>, found
 * <what>`. Linear time; recursion depth and memory bounded by the input.
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_COMPILER_FRONTEND_MLIR_TEXT_H_
#define KILN_COMPILER_FRONTEND_MLIR_TEXT_H_

#include <stddef.h>

#include "base/status.h"
#include "compiler/frontend/mlir_ir.h"

/* Parses one module (a bare list of func.func without `module {}` is one module too).
 * `filename` names the input in messages (NULL: "<mlir>"). */
kiln_status kiln_mlir_parse_text(const char *text, size_t len, const char *filename,
                                 kiln_mlir_module_t **out);

#endif /* KILN_COMPILER_FRONTEND_MLIR_TEXT_H_ */
