/* StableHLO (the generic IR of mlir_ir.h, from text or bytecode) -> kiln's HLO IR, with XLA's
 * semantics: every op of the StableHLO spec, the CHLO ops JAX emits (decomposed as XLA's CHLO
 * legalization does), stablehlo.composite (its decomposition inlined), func.call (inlined or a
 * call), the entry function's argument/result attributes (tf.aliasing_output,
 * jax.buffer_donor -> input_output_alias; mhlo.layout_mode -> layouts). What kiln cannot
 * convert is UNIMPLEMENTED naming the op (and, for types, the type).
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_H_
#define KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_H_

#include <stddef.h>

#include "base/status.h"
#include "compiler/frontend/mlir_ir.h"
#include "compiler/hlo/ir.h"

/* Converts the module with entry function `entry` (NULL: "main", else the only public
 * function) into *out (caller-owned, verified). */
kiln_status kiln_stablehlo_to_hlo(const kiln_mlir_module_t *m, const char *entry,
                                  kiln_hlo_module_t **out);

/* PJRT's "mlir" program format: MLIR text or bytecode (told apart by the magic), read and
 * converted. `name` names the input in messages (NULL: "<mlir>"). */
kiln_status kiln_stablehlo_module_from_bytes(const void *bytes, size_t n, const char *name,
                                             kiln_hlo_module_t **out);

#endif /* KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_H_ */
