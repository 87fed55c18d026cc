/* Command buffers as CUDA graphs with explicit nodes (cuda_graph.c).
 *
 * A command list becomes a graph with one node per command (kernel, memcpy, memset), each
 * depending on the previous one, instantiated once with the status checked. Replays use
 * cuGraphLaunch; when addresses move, the engine in command_buffer.c asks for exactly the
 * moved commands to be patched with cuGraphExec{Kernel,Memcpy,Memset}NodeSetParams, and
 * re-instantiates only if such an update fails. Gemm commands are not recorded (they are
 * issued one by one) until cuBLAS calls can be captured into child graphs.
 *
 * The node parameter builders are pure functions, tested without a device. */
#ifndef KILN_RUNTIME_CUDA_CUDA_GRAPH_H_
#define KILN_RUNTIME_CUDA_CUDA_GRAPH_H_

#include "runtime/command_buffer.h"
#include "runtime/cuda/cuda_driver.h"

extern const kiln_cmd_exec_ops_t kiln_cuda_graph_ops;

/* Kernel node parameters for `cmd` (a KERNEL command). `param_ptrs` must hold cmd->num_args
 * entries and outlive the use of *out (the driver copies the values when the node is added
 * or updated). */
void kiln_cuda_graph_kernel_params(const kiln_cmd_t *cmd, void **param_ptrs,
                                   CUDA_KERNEL_NODE_PARAMS *out);
/* A 1-D device-to-device copy of cmd->bytes as a 3-D copy description. */
void kiln_cuda_graph_memcpy_params(const kiln_cmd_t *cmd, CUDA_MEMCPY3D *out);
/* A 1-row memset of cmd->count elements of cmd->elem_size bytes. */
void kiln_cuda_graph_memset_params(const kiln_cmd_t *cmd, CUDA_MEMSET_NODE_PARAMS *out);

#endif /* KILN_RUNTIME_CUDA_CUDA_GRAPH_H_ */
