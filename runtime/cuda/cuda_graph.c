/* CUDA graphs for command lists (cuda_graph.h). */
#include "runtime/cuda/cuda_graph.h"

#include <string.h>

#include "base/alloc.h"
#include "runtime/cuda/cuda_device.h"

typedef struct cuda_graph_exec {
  kiln_cuda_device_t *dev;
  CUgraph graph;
  CUgraphExec exec;
  CUgraphNode *nodes;
  kiln_cmd_kind_t *kinds;
  size_t num_nodes;
} cuda_graph_exec_t;

void kiln_cuda_graph_kernel_params(const kiln_cmd_t *cmd, void **param_ptrs,
                                   CUDA_KERNEL_NODE_PARAMS *out) {
  memset(out, 0, sizeof(*out));
  out->func = (CUfunction)cmd->kernel->handle;
  out->gridDimX = cmd->dims.grid[0];
  out->gridDimY = cmd->dims.grid[1];
  out->gridDimZ = cmd->dims.grid[2];
  out->blockDimX = cmd->dims.block[0];
  out->blockDimY = cmd->dims.block[1];
  out->blockDimZ = cmd->dims.block[2];
  out->sharedMemBytes = cmd->dims.shared_bytes;
  for (int i = 0; i < cmd->num_args; i++) param_ptrs[i] = &cmd->args[i];
  out->kernelParams = cmd->num_args ? param_ptrs : NULL;
}

bool kiln_cuda_graph_cmd_is_empty(const kiln_cmd_t *cmd) {
  return (cmd->kind == KILN_CMD_MEMCPY && cmd->bytes == 0) ||
         (cmd->kind == KILN_CMD_MEMSET && cmd->count == 0);
}

#define MIN_ROW_BYTES 4096u

/* Splits `n` units of `unit` bytes into rows of *width units, each at most max_pitch bytes:
 * one row when it fits, else the widest power-of-two row that divides n (and is at least
 * MIN_ROW_BYTES wide). False when there is none. */
static bool row_shape(uint64_t n, size_t unit, size_t max_pitch, uint64_t *width,
                      uint64_t *height) {
  if (max_pitch == 0 || n * unit <= max_pitch) {
    *width = n;
    *height = 1;
    return true;
  }
  uint64_t w = 1;
  while (w * 2 * unit <= max_pitch && n % (w * 2) == 0) w *= 2;
  if (w * unit < MIN_ROW_BYTES) return false;
  *width = w;
  *height = n / w;
  return true;
}

kiln_status kiln_cuda_graph_memcpy_params(const kiln_cmd_t *cmd, size_t max_pitch,
                                          CUDA_MEMCPY3D *out) {
  memset(out, 0, sizeof(*out));
  uint64_t w, h;
  if (!row_shape(cmd->bytes, 1, max_pitch, &w, &h))
    return KILN_ERR_UNIMPLEMENTED(
        "CUDA graphs: a %llu-byte copy exceeds the pitch limit (%zu bytes) and has no row "
        "shape; it is issued outside the graph",
        (unsigned long long)cmd->bytes, max_pitch);
  out->srcMemoryType = CU_MEMORYTYPE_DEVICE;
  out->srcDevice = cmd->src;
  out->srcPitch = w;
  out->srcHeight = h;
  out->dstMemoryType = CU_MEMORYTYPE_DEVICE;
  out->dstDevice = cmd->dst;
  out->dstPitch = w;
  out->dstHeight = h;
  out->WidthInBytes = w;
  out->Height = h;
  out->Depth = 1;
  return NULL;
}

kiln_status kiln_cuda_graph_memset_params(const kiln_cmd_t *cmd, size_t max_pitch,
                                          CUDA_MEMSET_NODE_PARAMS *out) {
  memset(out, 0, sizeof(*out));
  uint64_t w, h;
  const size_t unit = (size_t)cmd->elem_size;
  if (!row_shape(cmd->count, unit, max_pitch, &w, &h))
    return KILN_ERR_UNIMPLEMENTED(
        "CUDA graphs: a memset of %llu %zu-byte elements exceeds the pitch limit (%zu bytes) "
        "and has no row shape; it is issued outside the graph",
        (unsigned long long)cmd->count, unit, max_pitch);
  out->dst = cmd->dst;
  out->value = cmd->pattern;
  out->elementSize = (unsigned)unit;
  out->width = w;
  out->height = h;
  out->pitch = w * unit;
  return NULL;
}

static bool cuda_graph_supports(kiln_device_t *dev, kiln_cmd_kind_t kind) {
  return kind == KILN_CMD_KERNEL || kind == KILN_CMD_MEMCPY || kind == KILN_CMD_MEMSET ||
         kind == KILN_CMD_CUSTOM_CALL;
}

kiln_status kiln_cuda_graph_capture_custom_call(kiln_cuda_device_t *d, const kiln_cmd_t *c,
                                                CUgraph *out) {
  const kiln_cuda_driver_t *drv = d->drv;
  const char *name = c->custom && c->custom->name ? c->custom->name : "?";
  *out = NULL;
  kiln_cuda_stream_t cs;
  memset(&cs, 0, sizeof(cs));
  cs.base.device = &d->base;
  KILN_CU_RETURN_IF_ERROR(drv, drv->cuStreamCreate(&cs.stream, CU_STREAM_NON_BLOCKING),
                          "cuStreamCreate (capture stream for custom call %s)", name);
  /* Thread-local: other threads' work is not disturbed; a call the handler makes that
   * cannot be captured (a synchronization, an allocation) invalidates the capture and
   * cuStreamEndCapture reports it. */
  CUresult r = drv->cuStreamBeginCapture(cs.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  kiln_status s = kiln_cuda_status_make(drv, r, __FILE__, __LINE__,
                                        "cuStreamBeginCapture (custom call %s)", name);
  if (!s) {
    kiln_status hs = kiln_cmd_custom_call_invoke(c, &cs.base);
    CUgraph g = NULL;
    r = drv->cuStreamEndCapture(cs.stream, &g); /* always ended, also after a failure */
    if (hs) {
      s = kiln_status_annotate(hs, "while capturing custom call %s", name);
    } else if (r != CUDA_SUCCESS) {
      s = kiln_cuda_status_make(drv, r, __FILE__, __LINE__,
                                "cuStreamEndCapture (custom call %s: the handler used the stream "
                                "in a way that cannot be captured)",
                                name);
    } else if (!g) {
      s = KILN_ERR_INTERNAL("cuStreamEndCapture (custom call %s) returned no graph", name);
    } else {
      *out = g;
      g = NULL;
    }
    if (g) drv->cuGraphDestroy(g);
  }
  drv->cuStreamDestroy(cs.stream);
  return s;
}

static void graph_exec_free(cuda_graph_exec_t *x) {
  const kiln_cuda_driver_t *drv = x->dev->drv;
  kiln_status_free(kiln_cuda_device_activate(x->dev));
  if (x->exec) drv->cuGraphExecDestroy(x->exec);
  if (x->graph) drv->cuGraphDestroy(x->graph);
  kiln_free(x->nodes);
  kiln_free(x->kinds);
  kiln_free(x);
}

/* Adds the node of command i after `prev` (NULL: the first node). */
static kiln_status add_node(cuda_graph_exec_t *x, size_t i, const kiln_cmd_t *c,
                            const CUgraphNode *prev) {
  const kiln_cuda_driver_t *drv = x->dev->drv;
  const CUgraphNode *deps = prev;
  size_t num_deps = prev ? 1 : 0;
  switch (c->kind) {
    case KILN_CMD_KERNEL: {
      KILN_RETURN_IF_ERROR(kiln_cuda_kernel_prepare(x->dev, c->kernel, &c->dims),
                           "while recording command %zu", i);
      void *ptrs[KILN_KERNEL_MAX_ARGS];
      CUDA_KERNEL_NODE_PARAMS p;
      kiln_cuda_graph_kernel_params(c, ptrs, &p);
      KILN_CU_RETURN_IF_ERROR(drv,
                              drv->cuGraphAddKernelNode(&x->nodes[i], x->graph, deps, num_deps, &p),
                              "cuGraphAddKernelNode (command %zu, kernel %s)", i, c->kernel->name);
      return NULL;
    }
    case KILN_CMD_MEMCPY: {
      CUDA_MEMCPY3D p;
      KILN_RETURN_IF_ERROR(kiln_cuda_graph_memcpy_params(c, x->dev->max_pitch, &p),
                           "while recording command %zu", i);
      KILN_CU_RETURN_IF_ERROR(
          drv, drv->cuGraphAddMemcpyNode(&x->nodes[i], x->graph, deps, num_deps, &p, x->dev->ctx),
          "cuGraphAddMemcpyNode (command %zu)", i);
      return NULL;
    }
    case KILN_CMD_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS p;
      KILN_RETURN_IF_ERROR(kiln_cuda_graph_memset_params(c, x->dev->max_pitch, &p),
                           "while recording command %zu", i);
      KILN_CU_RETURN_IF_ERROR(
          drv, drv->cuGraphAddMemsetNode(&x->nodes[i], x->graph, deps, num_deps, &p, x->dev->ctx),
          "cuGraphAddMemsetNode (command %zu)", i);
      return NULL;
    }
    case KILN_CMD_CUSTOM_CALL: {
      CUgraph child = NULL;
      KILN_RETURN_IF_ERROR(kiln_cuda_graph_capture_custom_call(x->dev, c, &child),
                           "while recording command %zu", i);
      /* The node holds a copy of the child graph. */
      CUresult r = drv->cuGraphAddChildGraphNode(&x->nodes[i], x->graph, deps, num_deps, child);
      drv->cuGraphDestroy(child);
      KILN_CU_RETURN_IF_ERROR(drv, r, "cuGraphAddChildGraphNode (command %zu, custom call %s)", i,
                              c->custom->name);
      return NULL;
    }
    case KILN_CMD_GEMM:
      break;
  }
  return KILN_ERR_UNIMPLEMENTED("CUDA graphs: %s commands cannot be recorded",
                                kiln_cmd_kind_name(c->kind));
}

static kiln_status cuda_graph_instantiate(kiln_device_t *dev, const kiln_cmd_list_t *l,
                                          void **out) {
  kiln_cuda_device_t *d = (kiln_cuda_device_t *)dev;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_device_activate(d));
  cuda_graph_exec_t *x = kiln_calloc(1, sizeof(*x));
  x->dev = d;
  x->num_nodes = l->len;
  x->nodes = kiln_calloc(l->len ? l->len : 1, sizeof(CUgraphNode));
  x->kinds = kiln_calloc(l->len ? l->len : 1, sizeof(kiln_cmd_kind_t));
  CUresult r = d->drv->cuGraphCreate(&x->graph, 0);
  kiln_status s = kiln_cuda_status_make(d->drv, r, __FILE__, __LINE__, "cuGraphCreate");
  const CUgraphNode *prev = NULL;
  for (size_t i = 0; !s && i < l->len; i++) {
    x->kinds[i] = l->cmds[i].kind;
    if (kiln_cuda_graph_cmd_is_empty(&l->cmds[i])) continue; /* nodes[i] stays NULL */
    s = add_node(x, i, &l->cmds[i], prev);
    prev = &x->nodes[i];
  }
  if (!s) {
    /* Instantiation can fail (resources, unsupported nodes): its status is checked, never
     * assumed. */
    r = d->drv->cuGraphInstantiateWithFlags(&x->exec, x->graph, 0);
    if (r != CUDA_SUCCESS) {
      x->exec = NULL;
      s = kiln_cuda_status_make(d->drv, r, __FILE__, __LINE__,
                                "cuGraphInstantiateWithFlags (%zu nodes)", l->len);
    }
  }
  if (s) {
    graph_exec_free(x);
    return s;
  }
  *out = x;
  return NULL;
}

static kiln_status cuda_graph_update(void *xp, size_t i, const kiln_cmd_t *c) {
  cuda_graph_exec_t *x = xp;
  const kiln_cuda_driver_t *drv = x->dev->drv;
  if (i >= x->num_nodes || x->kinds[i] != c->kind)
    return KILN_ERR_INVALID("CUDA graph update: command %zu does not match the recorded node", i);
  /* The same structure keeps a zero-length command zero-length: it has no node to patch. */
  if (kiln_cuda_graph_cmd_is_empty(c)) return NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_device_activate(x->dev));
  switch (c->kind) {
    case KILN_CMD_KERNEL: {
      void *ptrs[KILN_KERNEL_MAX_ARGS];
      CUDA_KERNEL_NODE_PARAMS p;
      kiln_cuda_graph_kernel_params(c, ptrs, &p);
      KILN_CU_RETURN_IF_ERROR(drv, drv->cuGraphExecKernelNodeSetParams(x->exec, x->nodes[i], &p),
                              "cuGraphExecKernelNodeSetParams (node %zu)", i);
      return NULL;
    }
    case KILN_CMD_MEMCPY: {
      CUDA_MEMCPY3D p;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_graph_memcpy_params(c, x->dev->max_pitch, &p));
      KILN_CU_RETURN_IF_ERROR(
          drv, drv->cuGraphExecMemcpyNodeSetParams(x->exec, x->nodes[i], &p, x->dev->ctx),
          "cuGraphExecMemcpyNodeSetParams (node %zu)", i);
      return NULL;
    }
    case KILN_CMD_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS p;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_graph_memset_params(c, x->dev->max_pitch, &p));
      KILN_CU_RETURN_IF_ERROR(
          drv, drv->cuGraphExecMemsetNodeSetParams(x->exec, x->nodes[i], &p, x->dev->ctx),
          "cuGraphExecMemsetNodeSetParams (node %zu)", i);
      return NULL;
    }
    case KILN_CMD_CUSTOM_CALL: {
      /* Moved buffers: capture the handler again with the new addresses; the node takes the
       * new graph if its topology is the same (else the engine re-instantiates). */
      CUgraph child = NULL;
      KILN_RETURN_IF_ERROR(kiln_cuda_graph_capture_custom_call(x->dev, c, &child),
                           "while patching node %zu", i);
      CUresult r = drv->cuGraphExecChildGraphNodeSetParams(x->exec, x->nodes[i], child);
      drv->cuGraphDestroy(child);
      KILN_CU_RETURN_IF_ERROR(drv, r, "cuGraphExecChildGraphNodeSetParams (node %zu)", i);
      return NULL;
    }
    case KILN_CMD_GEMM:
      break;
  }
  return KILN_ERR_UNIMPLEMENTED("CUDA graph update: %s nodes", kiln_cmd_kind_name(c->kind));
}

static kiln_status cuda_graph_launch(void *xp, kiln_stream_t *s) {
  cuda_graph_exec_t *x = xp;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_device_activate(x->dev));
  KILN_CU_RETURN_IF_ERROR(x->dev->drv,
                          x->dev->drv->cuGraphLaunch(x->exec, ((kiln_cuda_stream_t *)s)->stream),
                          "cuGraphLaunch (%zu nodes)", x->num_nodes);
  return NULL;
}

static void cuda_graph_destroy(void *xp) {
  graph_exec_free(xp);
}

static kiln_status cuda_issue(kiln_stream_t *s, const kiln_cmd_list_t *l) {
  for (size_t i = 0; i < l->len; i++) {
    const kiln_cmd_t *c = &l->cmds[i];
    switch (c->kind) {
      case KILN_CMD_KERNEL:
        KILN_RETURN_IF_ERROR_PLAIN(
            kiln_stream_launch(s, c->kernel, &c->dims, c->args, c->num_args));
        break;
      case KILN_CMD_MEMCPY:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_memcpy_d2d(s, c->dst, c->src, c->bytes));
        break;
      case KILN_CMD_MEMSET:
        KILN_RETURN_IF_ERROR_PLAIN(
            kiln_stream_memset(s, c->dst, c->pattern, c->elem_size, c->count));
        break;
      case KILN_CMD_GEMM:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_gemm(s, &c->gemm, c->a, c->b, c->dst));
        break;
      case KILN_CMD_CUSTOM_CALL: /* the handler enqueues its work on the stream */
        KILN_RETURN_IF_ERROR_PLAIN(kiln_cmd_custom_call_invoke(c, s));
        break;
    }
  }
  return NULL;
}

const kiln_cmd_exec_ops_t kiln_cuda_graph_ops = {
    .name = "cuda-graph",
    .supports = cuda_graph_supports,
    .instantiate = cuda_graph_instantiate,
    .update = cuda_graph_update,
    .launch = cuda_graph_launch,
    .destroy = cuda_graph_destroy,
    .issue = cuda_issue,
};
