/* StableHLO (the generic IR of mlir_ir.h, from text or bytecode) -> kiln's HLO IR, with XLA's
 * semantics: every op of the StableHLO spec, the CHLO ops JAX emits (decomposed as XLA's CHLO
 * legalization does), stablehlo.composite (its decomposition inlined), func.call (inlined or a
 * call), the entry function's argument/result attributes (tf.aliasing_output,
 * jax.buffer_donor -> input_output_alias; mhlo.layout_mode -> layouts). What kiln cannot
 * convert is UNIMPLEMENTED naming the op (and, for types, the type).
 *
 * Thread-safety: thread-safe (the dump mode below is the only shared state, an atomic). */
#ifndef KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_H_
#define KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/frontend/mlir_ir.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"

/* What the converter prints to stderr: nothing (default), the converted HLO text when it
 * does not verify (a converter bug), or every converted module. Process-wide; the edges set
 * it from KILN_STABLEHLO_DUMP (any value: on error; "all": every module). */
typedef enum kiln_stablehlo_dump {
  KILN_STABLEHLO_DUMP_NONE = 0,
  KILN_STABLEHLO_DUMP_ON_ERROR,
  KILN_STABLEHLO_DUMP_ALL,
} kiln_stablehlo_dump_t;
void kiln_stablehlo_set_dump(kiln_stablehlo_dump_t mode);

/* Converts the module with entry function `entry` (NULL: "main", else the only public
 * function) into *out (caller-owned, verified). */
kiln_status kiln_stablehlo_to_hlo(const kiln_mlir_module_t *m, const char *entry,
                                  kiln_hlo_module_t **out);

/* PJRT's "mlir" program format: MLIR text or bytecode (told apart by the magic), read and
 * converted. `name` names the input in messages (NULL: "<mlir>"). */
kiln_status kiln_stablehlo_module_from_bytes(const void *bytes, size_t n, const char *name,
                                             kiln_hlo_module_t **out);

/* ---- running StableHLO test files (interpreter tests, JAX-generated tests) ----
 *
 * A function holding `check.expect_*` ops (or `stablehlo.custom_call @check.expect_*`) is
 * converted with every checked value turned into an output: the entry returns a tuple of
 * them (the function's own results are dropped), and each check names the outputs it
 * compares. kiln_stablehlo_check_eval then applies the StableHLO interpreter's rule. */
typedef enum kiln_stablehlo_check_kind {
  KILN_STABLEHLO_CHECK_EQ,          /* expect_eq, expect_eq_const: bit-exact (NaN == NaN) */
  KILN_STABLEHLO_CHECK_ALMOST_EQ,   /* expect_almost_eq(_const): |got - want| <= tolerance */
  KILN_STABLEHLO_CHECK_CLOSE,       /* expect_close: ulp distance in [min_ulp, max_ulp] */
  KILN_STABLEHLO_CHECK_UNSUPPORTED, /* expect_serialized_eq (needs the interpreter's probes) */
} kiln_stablehlo_check_kind_t;

typedef struct kiln_stablehlo_check {
  kiln_stablehlo_check_kind_t kind;
  const char *op_name;              /* "check.expect_eq" (borrowed from the MLIR module) */
  int32_t line;                     /* of the check op, 0 if unknown */
  int32_t got;                      /* output index of the checked value */
  int32_t want;                     /* output index of the expected value, -1: want_const */
  const kiln_literal_t *want_const; /* _const forms (borrowed from the MLIR module) */
  double tolerance;                 /* ALMOST_EQ (default 1e-4) */
  uint64_t min_ulp, max_ulp;        /* CLOSE (defaults 0, 3) */
} kiln_stablehlo_check_t;

/* True when the function holds check ops. */
bool kiln_stablehlo_func_has_checks(const kiln_mlir_op_t *func);
/* Converts function `func` (a func.func of m, taking no arguments) in check mode: *out's
 * entry returns the tuple of checked values; *checks (kiln_malloc'ed, caller frees) lists
 * the checks. With `params` non-NULL, the function's top-level constants become entry
 * parameters (so that a compiler cannot fold the whole program away): *params
 * (kiln_malloc'ed, caller frees; literals borrowed from m) holds their values in parameter
 * order. */
kiln_status kiln_stablehlo_checks_to_hlo(const kiln_mlir_module_t *m, const kiln_mlir_op_t *func,
                                         kiln_hlo_module_t **out, kiln_stablehlo_check_t **checks,
                                         int32_t *num_checks, kiln_literal_t ***params,
                                         int32_t *num_params);
/* Applies `check` to the entry's result tuple `outputs`. Returns true when it passes; else
 * writes the first difference into msg. *worst (may be NULL) receives the largest distance
 * seen: ulps for CLOSE, the absolute difference for ALMOST_EQ, 0 otherwise. */
bool kiln_stablehlo_check_eval(const kiln_stablehlo_check_t *check, const kiln_literal_t *outputs,
                               char *msg, size_t msg_size, double *worst);

#endif /* KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_H_ */
