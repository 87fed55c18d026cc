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
  int shared_optin_max; /* largest dynamic shared memory a kernel may opt in to */
  pthread_mutex_t mu;   /* guards blas and kernels' shared-memory opt-ins */
  kiln_cuda_blas_t *blas;
} kiln_cuda_device_t;

typedef struct kiln_cuda_stream {
  kiln_stream_t base;
  CUstream stream;
} kiln_cuda_stream_t;

/* Makes the device's context current on the calling thread. */
kiln_status kiln_cuda_device_activate(kiln_cuda_device_t *d);
/* Opts kernel `k` in to `bytes` of dynamic shared memory when above 48 KiB (once per
 * size); INVALID_ARGUMENT past the device's opt-in limit. */
kiln_status kiln_cuda_kernel_prepare_shared(kiln_cuda_device_t *d, const kiln_kernel_t *k,
                                            uint32_t bytes);

/* cuBLAS (cuda_blas.c): loaded on first use per device. UNAVAILABLE (libraries tried) when
 * libcublas cannot be opened. */
kiln_status kiln_cuda_blas_gemm(kiln_cuda_device_t *d, CUstream s, const kiln_gemm_desc_t *g,
                                CUdeviceptr a, CUdeviceptr b, CUdeviceptr c);
void kiln_cuda_blas_destroy(kiln_cuda_blas_t *b);

#endif /* KILN_RUNTIME_CUDA_CUDA_DEVICE_H_ */
