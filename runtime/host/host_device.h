/* The host device: memory is host memory, a stream is an in-order queue drained by its own
 * worker thread, kernels (kiln_host_kernel_fn) run their blocks on the device's persistent
 * worker pool, events are sequence numbers, and command buffers are recorded command lists
 * replayed as one queue entry (host_device.c). Gemm goes to the system CBLAS when one can be
 * dlopen'ed, else to a blocked C kernel (host_blas.c). */
#ifndef KILN_RUNTIME_HOST_HOST_DEVICE_H_
#define KILN_RUNTIME_HOST_HOST_DEVICE_H_

#include <stdbool.h>

#include "base/status.h"
#include "runtime/device.h"

/* Creates the host device with a pool of `num_threads` workers (0: one per core, or
 * $KILN_HOST_THREADS). The caller owns *out (kiln_device_destroy). */
kiln_status kiln_host_device_create(int num_threads, kiln_device_t **out);

/* ---- gemm ------------------------------------------------------------------------------ */

typedef enum kiln_host_blas_choice {
  KILN_HOST_BLAS_AUTO = 0,     /* CBLAS when found, else the C kernel */
  KILN_HOST_BLAS_FALLBACK = 1, /* the C kernel */
} kiln_host_blas_choice_t;

/* Row-major gemm on host memory (see kiln_gemm_desc_t). The descriptor must be valid
 * (kiln_gemm_desc_check). */
void kiln_host_gemm(const kiln_gemm_desc_t *g, const void *a, const void *b, void *c,
                    kiln_host_blas_choice_t choice);
/* The CBLAS library in use (a path or soname), or NULL when the C kernel is used. Loads it on
 * the first call ($KILN_HOST_BLAS names a library to try first; "none" disables CBLAS).
 * `tried` (may be NULL) receives the libraries tried with their dlerror() text. */
const char *kiln_host_blas_library(const char **tried);

#endif /* KILN_RUNTIME_HOST_HOST_DEVICE_H_ */
