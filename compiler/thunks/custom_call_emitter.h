/* Custom-call thunks: a `custom-call` instruction -> an FFI call (runtime/ffi_call.h) with its
 * handler from the registry, its attributes decoded from backend_config at compile time, and
 * the slices of its flattened operand and result leaves (see thunk_emitter.h for the rules).
 * Well-known targets kiln implements itself are rewritten away before the pipeline
 * (compiler/passes/custom_call_rewrite.c); what reaches this emitter needs a handler. */
#ifndef KILN_COMPILER_THUNKS_CUSTOM_CALL_EMITTER_H_
#define KILN_COMPILER_THUNKS_CUSTOM_CALL_EMITTER_H_

#include "base/byte_io.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/buffer_assignment.h"
#include "compiler/thunks/thunk_emitter.h"
#include "runtime/executable.h"

/* The FFI data type of a kiln element type (XLA_FFI_DataType_INVALID for tuple/opaque). */
XLA_FFI_DataType kiln_custom_call_ffi_dtype(kiln_elem_type_t t);

/* Appends the thunk of custom-call `in` to `seq`; the call is owned by `d`. The handler comes
 * from opts->ffi_registry (NULL: the default one, loaded with the default spec once); on
 * the host a target without one that kiln implements itself (kiln_builtin_custom_call_known)
 * gets the built-in thunk. */
kiln_status kiln_custom_call_emit(const kiln_hlo_instruction_t *in,
                                  const kiln_buffer_assignment_t *ba,
                                  const kiln_thunk_emit_options_t *opts, kiln_executable_desc_t *d,
                                  kiln_thunk_seq_t *seq);

/* builtin_custom_call.c: the custom calls the host runtime implements itself, for modules
 * XLA:CPU and jaxlib produced: `__onednn$layernorm` (input, scale, shift; normalized over
 * the last dimension, epsilon from the config), `GetRngSeed` (u64[]: `rng_seed`, the run's
 * seed), `cusolver_geqrf` / `cusolver_orgqr` (LAPACK ?geqrf / ?orgqr through
 * runtime/host/host_lapack.c; info results 0, workspaces zeros). Any layout of their leaves.
 * The evaluator computes the same (compiler/eval/eval_host_targets.c). */
bool kiln_builtin_custom_call_known(const char *target);
/* Appends the host thunk of built-in custom call `in` (its context owned by `d`);
 * UNIMPLEMENTED naming the call for operand or result forms kiln does not take. */
kiln_status kiln_builtin_custom_call_emit(const kiln_hlo_instruction_t *in,
                                          const kiln_buffer_assignment_t *ba, uint64_t rng_seed,
                                          kiln_executable_desc_t *d, kiln_thunk_seq_t *seq);

/* ---- recipes: custom-call thunks made again from a serialized executable ----
 *
 * Every custom-call thunk the emitters make carries a recipe (kiln_thunk_custom_call_set_recipe):
 * a kind byte, then what that kind needs, little-endian (base/byte_io.h). The rebuild
 * functions read one and make the same thunk, its context owned by `d`:
 *   FFI        platform, api_version as written, backend_config, tuple result, the operand and
 *              result buffers' types and dimensions; the handler is looked up in
 *              opts->ffi_registry (or the default registry) by target when read, its
 *              attributes parsed again;
 *   BUILTIN    the host built-in's whole description (kind, leaf views, epsilon, seed, sizes);
 *   RNG_STATE  rng-get-and-update-state's delta and the generator's initial value; every such
 *              thunk of one description shares one state (*shared_rng, created by the first).
 * A malformed recipe is INVALID_ARGUMENT / DATA_LOSS. */
enum { KILN_RECIPE_FFI = 1, KILN_RECIPE_BUILTIN = 2, KILN_RECIPE_RNG_STATE = 3 };

/* A serialized custom call being made again: what the serialized thunk held. */
typedef struct kiln_recipe_call {
  kiln_executable_desc_t *d; /* the description being read: owns the contexts */
  const char *name, *target;
  const void *recipe;
  size_t len;
  const kiln_slice_t *operands, *results;
  int num_operands, num_results;
} kiln_recipe_call_t;

/* Starts reading `c`'s recipe, which must be of `kind` (else r->err is set). */
void kiln_recipe_open(const kiln_recipe_call_t *c, int kind, kiln_byte_reader_t *r);

kiln_status kiln_ffi_custom_call_rebuild(const kiln_thunk_emit_options_t *opts,
                                         const kiln_recipe_call_t *c, kiln_thunk_t **out);
kiln_status kiln_builtin_custom_call_rebuild(const kiln_recipe_call_t *c, kiln_thunk_t **out);
kiln_status kiln_rng_state_rebuild(const kiln_recipe_call_t *c, void **shared_rng,
                                   kiln_thunk_t **out);

#endif /* KILN_COMPILER_THUNKS_CUSTOM_CALL_EMITTER_H_ */
