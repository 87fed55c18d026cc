/* MLIR text -> the generic IR (mlir_ir.h): the builtin dialect's types and attributes, the
 * func dialect, and every StableHLO and CHLO op in its generic and its pretty form, as JAX and
 * the StableHLO test suites write them. Errors read `file:line:col: expected <what>, found
 * <what>`. Linear time; recursion depth and memory bounded by the input.
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_COMPILER_FRONTEND_MLIR_TEXT_H_
#define KILN_COMPILER_FRONTEND_MLIR_TEXT_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/frontend/mlir_ir.h"

/* Parses one module (a bare list of func.func without `module {}` is one module too).
 * `filename` names the input in messages (NULL: "<mlir>"). */
kiln_status kiln_mlir_parse_text(const char *text, size_t len, const char *filename,
                                 kiln_mlir_module_t **out);

/* One part of a file split on `// -----` lines (the MLIR test suites' separator). */
typedef struct kiln_mlir_text_part {
  const char *text; /* points into the input */
  size_t len;
  int32_t line; /* the input line the part starts on (1-based) */
} kiln_mlir_text_part_t;

/* Splits `text` on lines that start (after blanks) with `// -----`. Fills at most max_parts
 * entries and returns the number of parts (call with max_parts 0 to count). A file without
 * separators is one part. */
size_t kiln_mlir_split_text(const char *text, size_t len, kiln_mlir_text_part_t *parts,
                            size_t max_parts);

#endif /* KILN_COMPILER_FRONTEND_MLIR_TEXT_H_ */
