/* The CUDA device (cuda_device.c): the primary context of one GPU, non-blocking streams,
 * events without timing, device memory, page-locked host memory for transfers, modules
 * loaded from cubin (or PTX) with the JIT logs kept, launches through cuLaunchKernelEx with
 * the opt-in for more than 48 KiB of dynamic shared memory, gemm through cuBLAS (dlopen'ed),
 * and command buffers as CUDA graphs (cuda_graph.h).
 *
 * The objects below are shared by the files of runtime/cuda/ only. */
#ifndef KILN_RUNTIME_CUDA_CUDA_DEVICE_H_
#define KILN_RUNTIME_CUDA_CUDA_DEVICE_H_

#include <pthread.h>

#include "base/status.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/device.h"

/* Creates the device for GPU `ordinal`. UNAVAILABLE without a driver (naming the paths
 * tried) or without such a GPU. The caller owns *out (kiln_device_destroy). */
kiln_status kiln_cuda_device_create(int ordinal, kiln_device_t **out);
/* The same on the driver table `drv` (borrowed; outlives the device): for tests that fill a
 * table with a fake driver. */
kiln_status kiln_cuda_device_create_with_driver(const kiln_cuda_driver_t *drv, int ordinal,
                                                kiln_device_t **out);

/* The JIT's error and info logs from loading module `m` (borrowed; "" when empty), or NULL
 * when `m` is not a CUDA module. */
const char *kiln_cuda_module_jit_log(const kiln_device_module_t *m);

#define KILN_CUDA_DEFAULT_SHARED_LIMIT (48u * 1024u)

typedef struct kiln_cuda_blas kiln_cuda_blas_t;

typedef struct kiln_cuda_device {
  kiln_device_t base;
  const kiln_cuda_driver_t *drv;
  int ordinal;
  CUdevice dev;
  CUcontext ctx; /* primary context, retained */
  int cc_major, cc_minor, sm_count;
  int shared_optin_max; /* largest shared memory (static + dynamic) a block may opt in to */
  size_t max_pitch;     /* largest pitch of a 2-D copy or memset (graph nodes) */
  pthread_mutex_t mu;   /* guards blas and kernels' shared-memory opt-ins */
  kiln_cuda_blas_t *blas;
} kiln_cuda_device_t;

typedef struct kiln_cuda_stream {
  kiln_stream_t base;
  CUstream stream;
} kiln_cuda_stream_t;

/* A kernel of a CUDA module with what the driver says about its compiled form, read once
 * when the kernel is first looked up. */
typedef struct kiln_cuda_kernel {
  kiln_kernel_t base;
  int max_threads;   /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (registers, .maxntid) */
  int static_shared; /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
  int num_regs;      /* CU_FUNC_ATTRIBUTE_NUM_REGS */
} kiln_cuda_kernel_t;

/* Checks a launch of `k` with `dims` before the driver sees it (pure): the block's threads
 * against k->max_threads, static + dynamic shared memory against `optin_max` (the device's
 * per-block opt-in limit). INVALID_ARGUMENT naming the kernel otherwise. *optin is the
 * dynamic size the kernel must be opted in to (static + dynamic above 48 KiB), else 0. */
kiln_status kiln_cuda_launch_check(const kiln_cuda_kernel_t *k, const kiln_launch_dims_t *dims,
                                   int optin_max, uint32_t *optin);

/* The device's processor name for the compiler: "sm_%d%d" of its compute capability (the
 * NVPTX backend's kiln_nvptx_arch_resolve turns one LLVM does not know into PTX for the
 * driver). */
void kiln_cuda_device_arch(const kiln_device_t *dev, char *buf, size_t size);

/* Makes the device's context current on the calling thread. */
kiln_status kiln_cuda_device_activate(kiln_cuda_device_t *d);
/* kiln_cuda_launch_check, then opts kernel `k` in to the dynamic shared memory the launch
 * needs (once per size). */
kiln_status kiln_cuda_kernel_prepare(kiln_cuda_device_t *d, const kiln_kernel_t *k,
                                     const kiln_launch_dims_t *dims);

/* Gemm (cuda_blas.c): cuBLASLt, else cuBLAS (f32, f64), loaded on first use per device.
 * UNAVAILABLE (libraries tried) when libcublas cannot be opened; INTERNAL when it is there but
 * cannot create a handle. The caller has made the device's context current. */
kiln_status kiln_cuda_blas_gemm(kiln_cuda_device_t *d, CUstream s, const kiln_gemm_desc_t *g,
                                CUdeviceptr a, CUdeviceptr b, CUdeviceptr c);
void kiln_cuda_blas_destroy(kiln_cuda_blas_t *b);

#endif /* KILN_RUNTIME_CUDA_CUDA_DEVICE_H_ */
