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
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

/* Whether the fusion's ops let XLA vectorize a loop fusion (see above). */
bool kiln_loop_may_vectorize(const kiln_hlo_computation_t *c);

/* Partitions `c`, emits its loop kernel and runs the kernel-IR pipeline (the same vectorize /
 * unroll options as every emitter); *out as for kiln_codegen_kernel_emit. Dumps (opts->dump_dir):
 * `<name>.40-hlo-fusion.txt`, `<name>.41-partition.txt`, then the pipeline's stages. */
kiln_status kiln_loop_kernel_emit(const kiln_hlo_computation_t *c,
                                  const kiln_codegen_compile_options_t *opts,
                                  kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_LOOP_EMITTER_H_ */
