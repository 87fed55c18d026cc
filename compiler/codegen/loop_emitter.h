/* Loop emitter: the kernel entry function for loop fusions (the emitter document's "Loop
 * emitter"), including multi-output fusions.
 *
 * The entry takes one tensor per fusion input (kiln_elemental's tensors: parameters by
 * number, then array constants) and one written tensor per output (the flattened root
 * tuple, in order), and returns the outputs. Its body is one `loop` over the launch grid's
 * thread map (launch_grid.h: 128 threads per block, blocks split over y past the x limit,
 * gcd(N, 4) elements per thread when there is enough work and no op prevents
 * vectorization) for the first output's shape; each iteration calls the output functions
 * (outputs of other shapes with the same element count get their index through a
 * reshape) and inserts the results into the outputs.
 *
 * Layouts: tensors are stored in physical order (elemental.h). The thread map walks the
 * first output's elements in its physical order, so consecutive threads write consecutive
 * memory; another output with other dims or another layout takes the element at the same
 * physical linear position; every element is inserted at its physical index.
 *
 * Vectorization is turned off, as XLA does, when the fusion holds reduce-window, sort, dot,
 * convolution, sin, cos, tan, power, atan2 or a variadic reduce. */
#ifndef KILN_COMPILER_CODEGEN_LOOP_EMITTER_H_
#define KILN_COMPILER_CODEGEN_LOOP_EMITTER_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/analysis/launch_grid.h"
#include "compiler/codegen/elemental.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/codegen/kir.h"
#include "compiler/codegen/partitioner.h"

typedef struct kiln_loop_emitter_options {
  const kiln_launch_device_t *device; /* NULL: defaults (H100-like) */
  bool no_vectorize;                  /* force one element per thread */
} kiln_loop_emitter_options_t;

/* What the emitted kernel looks like from outside. */
typedef struct kiln_loop_kernel_info {
  kiln_launch_grid_t grid;
  int num_inputs;  /* tensor parameters before the outputs */
  int num_outputs; /* written tensor parameters after the inputs */
} kiln_loop_kernel_info_t;

/* Whether the fusion's ops let XLA vectorize a loop fusion (see above). */
bool kiln_loop_may_vectorize(const kiln_hlo_computation_t *c);

/* Emits the kernel `name` for fusion computation `c` into `m`: uses `part` and `elem` (already
 * initialized for c; the subgraph functions are emitted here). UNIMPLEMENTED for outputs with
 * different element counts. */
kiln_status kiln_loop_emit(kiln_kir_module_t *m, const kiln_hlo_computation_t *c,
                           const kiln_partition_t *part, kiln_elemental_t *elem, const char *name,
                           const kiln_loop_emitter_options_t *opts, kiln_loop_kernel_info_t *info);

/* Partitions `c`, emits its loop kernel and runs the kernel-IR pipeline (the same vectorize /
 * unroll options as every emitter); *out as for kiln_fusion_kernel_emit. Dumps (opts->dump_dir):
 * `<name>.40-hlo-fusion.txt`, `<name>.41-partition.txt`, then the pipeline's stages. */
kiln_status kiln_loop_kernel_emit(const kiln_hlo_computation_t *c, const kiln_fusion_compile_options_t *opts,
                                  kiln_fusion_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_LOOP_EMITTER_H_ */
