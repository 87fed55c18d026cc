/* Command buffers as CUDA graphs with explicit nodes (cuda_graph.c).
 *
 * A command list becomes a graph with one node per command (kernel, memcpy, memset), each
 * depending on the previous one (zero-length copies and memsets get none), instantiated once with
 * the status checked. Replays use cuGraphLaunch; when addresses move, the engine in
 * command_buffer.c asks for exactly the moved commands to be patched with
 * cuGraphExec{Kernel,Memcpy,Memset}NodeSetParams, and re-instantiates only if such an update fails.
 * Gemm commands are not recorded (they are issued one by one) until cuBLAS calls can be captured
 * into child graphs. Custom-call commands (command-buffer compatible FFI handlers) are
 * recorded by capturing the handler's work on a separate stream into a graph that becomes a
 * child graph node; when their addresses move they are captured again and the node updated
 * (cuGraphExecChildGraphNodeSetParams).
 *
 * The node parameter builders are pure functions, tested without a device. */
#ifndef KILN_RUNTIME_CUDA_CUDA_GRAPH_H_
#define KILN_RUNTIME_CUDA_CUDA_GRAPH_H_

#include "runtime/command_buffer.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_driver.h"

extern const kiln_cmd_exec_ops_t kiln_cuda_graph_ops;

/* Kernel node parameters for `cmd` (a KERNEL command). `param_ptrs` must hold cmd->num_args
 * entries and outlive the use of *out (the driver copies the values when the node is added
 * or updated). */
void kiln_cuda_graph_kernel_params(const kiln_cmd_t *cmd, void **param_ptrs,
                                   CUDA_KERNEL_NODE_PARAMS *out);
/* The copy node for a device-to-device copy of cmd->bytes: one row (pitch = width) when it
 * fits in `max_pitch` (the device's CU_DEVICE_ATTRIBUTE_MAX_PITCH; 0: no limit), else rows
 * of the widest power of two <= max_pitch that divides the size (at least 4 KiB wide).
 * UNIMPLEMENTED when no such shape exists: the list then stays outside graphs (issued
 * command by command). */
kiln_status kiln_cuda_graph_memcpy_params(const kiln_cmd_t *cmd, size_t max_pitch,
                                          CUDA_MEMCPY3D *out);
/* The memset node for cmd->count elements of cmd->elem_size bytes, shaped like a copy. */
kiln_status kiln_cuda_graph_memset_params(const kiln_cmd_t *cmd, size_t max_pitch,
                                          CUDA_MEMSET_NODE_PARAMS *out);
/* Records custom-call command `c` (KILN_CMD_CUSTOM_CALL) by stream capture: a fresh
 * non-blocking stream of `d` is put in (thread-local) capture mode, the handler runs once with
 * it (command_buffer.h: in stream order, the call's addresses), and the captured work becomes
 * *out (the caller destroys it). A handler error, or work that cannot be captured, is the
 * returned status (nothing leaks): the command list is then issued one by one instead. */
kiln_status kiln_cuda_graph_capture_custom_call(kiln_cuda_device_t *d, const kiln_cmd_t *c,
                                                CUgraph *out);
/* Whether `cmd` does nothing (a zero-length copy or memset): such commands get no node. */
bool kiln_cuda_graph_cmd_is_empty(const kiln_cmd_t *cmd);

#endif /* KILN_RUNTIME_CUDA_CUDA_GRAPH_H_ */
