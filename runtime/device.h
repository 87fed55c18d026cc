/* The device interface: a struct of function pointers with two implementations, `host`
 * (runtime/host/) and `cuda` (runtime/cuda/).
 *
 * Objects: a device owns memory, streams, events, loaded modules and a command-buffer cache
 * (command_buffer.h). A stream is an in-order queue: everything enqueued on it runs in
 * submission order; errors from asynchronous work are sticky and come back from the next
 * kiln_stream_synchronize. Device memory is addressed by kiln_devptr_t (the host device's
 * addresses are host pointers).
 *
 * Ownership: what *_create / *_load / *_alloc returns the caller owns and releases with the
 * matching destroy / unload / free; accessors return borrowed pointers; out-parameters are
 * set to NULL on entry. Streams, events and modules must be released before their device.
 *
 * Nothing here sees HLO: kernels arrive as loaded images (cubin bytes on CUDA, a table of
 * host function pointers on the host), arguments as device addresses.
 *
 * Thread-safety. A device is thread-safe: memory, streams, events and modules may be made,
 * used and released from several threads at once (the host device locks its queues and
 * shares one worker pool; CUDA serializes what the driver does not), and its command-buffer
 * cache is locked (command_buffer.h). Kernels of a loaded module are read-only. A stream is
 * not thread-safe: callers serialize (one thread enqueues and synchronizes at a time; the
 * work of two threads interleaved on one stream would run in an unspecified order and
 * either could receive the other's sticky error). Events are thread-safe. Creating and
 * destroying a device: not thread-safe: nothing else may use it meanwhile. The environment
 * ($KILN_COMMAND_BUFFER_CACHE_SIZE, $KILN_DISABLE_COMMAND_BUFFERS, $KILN_HOST_THREADS
 * and $KILN_ALLOCATOR) is read once, when a device is created; nothing reads it while running. */
#ifndef KILN_RUNTIME_DEVICE_H_
#define KILN_RUNTIME_DEVICE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/allocator.h"

typedef uint64_t kiln_devptr_t;

typedef struct kiln_device kiln_device_t;
typedef struct kiln_stream kiln_stream_t;
typedef struct kiln_event kiln_event_t;
typedef struct kiln_device_module kiln_device_module_t;
typedef struct kiln_cmd_cache kiln_cmd_cache_t;

typedef enum kiln_device_kind {
  KILN_DEVICE_HOST = 0,
  KILN_DEVICE_CUDA = 1,
} kiln_device_kind_t;

const char *kiln_device_kind_name(kiln_device_kind_t k);

/* Kernel arguments are 8-byte values: device addresses or scalars (a 4-byte scalar parameter
 * reads the low half, which is where a little-endian uint64_t keeps it). */
#define KILN_KERNEL_MAX_ARGS 128

/* A kernel of a loaded module. Borrowed from the module; valid until it is unloaded. `uid`
 * is unique over the process lifetime, so caches never confuse a kernel with a later one
 * that happens to reuse its memory. */
typedef struct kiln_kernel {
  const char *name;
  kiln_device_module_t *module;
  void *handle; /* host: kiln_host_kernel_fn; cuda: CUfunction */
  uint64_t uid;
  uint32_t shared_opt_in; /* dynamic shared bytes the kernel was opted in to (cuda) */
} kiln_kernel_t;

typedef struct kiln_launch_dims {
  uint32_t grid[3];
  uint32_t block[3];     /* host kernels bake their block size in; ignored there */
  uint32_t shared_bytes; /* dynamic shared memory; > 48 KiB opts the kernel in on cuda */
} kiln_launch_dims_t;

uint64_t kiln_launch_dims_num_blocks(const kiln_launch_dims_t *d);

/* A loadable module image. cuda: `data`/`size` hold a cubin (or NUL-terminated PTX). host:
 * `names`/`functions` list kernels (kiln_host_kernel_fn) by name. */
typedef struct kiln_module_image {
  const void *data;
  size_t size;
  const char *const *names;
  void *const *functions;
  size_t num_functions;
} kiln_module_image_t;

/* Row-major GEMM: C[b] = alpha * op(A[b]) x op(B[b]) + beta * C[b], with op(A) m x k,
 * op(B) k x n, C m x n, batches stored one after another (contiguous matrices).
 *
 * Element types: A and B are `dtype`, C is `out_dtype` (KILN_GEMM_SAME: `dtype`). What a
 * device takes (kiln_gemm_desc_check accepts the union; a device refuses what it cannot do):
 *   f32, f64, c64, c128     -> the same type (alpha and beta real);
 *   bf16, f16               -> bf16, f16 or f32: products summed in f32, the result rounded
 *                              once to the output type (as XLA's dots);
 *   s8, s16, s32, u8, u16, u32 -> any of those: products and sums modulo 2^32 (operands
 *                              sign- or zero-extended), the result truncated to its width:
 *                              what XLA's integer dots give (their wrapping arithmetic in
 *                              the result's type agrees modulo its width); alpha 1, beta 0
 *                              only.
 * The host device does all of these; CUDA (cuBLAS) does f32 and f64.
 *
 * Epilogue (real floating-point C only: f32, f64, bf16, f16), applied to each element of the
 * result before it is stored, as XLA's gemm rewriter fuses it (cuBLASLt's
 * CUBLASLT_EPILOGUE_{BIAS, RELU_BIAS, GELU_BIAS}):
 *   C[b][i][j] = act(alpha * (op(A) op(B))[i][j] + beta * C[b][i][j] + bias[j])
 * `bias` (0: none) is a device address of n elements of C's type, the same for every row and
 * batch; `epilogue` the activation after it. A bf16/f16 C is rounded once, after the
 * activation. Kept out of the command-buffer structure: only the bias address may differ
 * between two recordings of one gemm. */
typedef enum kiln_gemm_epilogue {
  KILN_GEMM_EPILOGUE_NONE = 0,
  KILN_GEMM_EPILOGUE_RELU = 1,      /* max(x, 0) */
  KILN_GEMM_EPILOGUE_GELU_TANH = 2, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} kiln_gemm_epilogue_t;

typedef enum kiln_gemm_dtype {
  KILN_GEMM_SAME = 0, /* out_dtype only: the operands' type */
  KILN_GEMM_F32 = 1,
  KILN_GEMM_F64 = 2,
  KILN_GEMM_C64 = 3,
  KILN_GEMM_C128 = 4,
  KILN_GEMM_BF16 = 5,
  KILN_GEMM_F16 = 6,
  KILN_GEMM_S8 = 7,
  KILN_GEMM_S32 = 8,
  KILN_GEMM_S16 = 9,
  KILN_GEMM_U8 = 10,
  KILN_GEMM_U16 = 11,
  KILN_GEMM_U32 = 12,
} kiln_gemm_dtype_t;

typedef struct kiln_gemm_desc {
  kiln_gemm_dtype_t dtype; /* A and B */
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
  double alpha, beta;
  kiln_gemm_dtype_t out_dtype; /* C; KILN_GEMM_SAME (0): dtype */
  kiln_gemm_epilogue_t epilogue; /* after the bias (see above) */
  kiln_devptr_t bias;            /* 0: none; else n elements of C's type */
} kiln_gemm_desc_t;

/* "relu", "gelu_tanh"; "" for none, "?" for an unknown value. */
const char *kiln_gemm_epilogue_name(kiln_gemm_epilogue_t e);

/* Bytes per element; 0 for KILN_GEMM_SAME or an unknown value. */
size_t kiln_gemm_dtype_size(kiln_gemm_dtype_t t);
/* "f32", "bf16", ...; "?" for an unknown value. */
const char *kiln_gemm_dtype_name(kiln_gemm_dtype_t t);
/* Whether `t` is one of the integer types (s8, s16, s32, u8, u16, u32). */
bool kiln_gemm_dtype_is_int(kiln_gemm_dtype_t t);
/* The type of C (out_dtype, or dtype when that is KILN_GEMM_SAME). */
kiln_gemm_dtype_t kiln_gemm_desc_out_dtype(const kiln_gemm_desc_t *g);
/* Checks the types (one of the combinations above), the dimensions (positive, products fit)
 * and returns the byte sizes of A, B, C. */
kiln_status kiln_gemm_desc_check(const kiln_gemm_desc_t *g, size_t *a_bytes, size_t *b_bytes,
                                 size_t *c_bytes);

typedef struct kiln_cmd_list kiln_cmd_list_t;
typedef struct kiln_cmd_exec_ops kiln_cmd_exec_ops_t;

/* The implementation table. Entries marked (optional) may be NULL. */
typedef struct kiln_device_vtable {
  void (*destroy)(kiln_device_t *dev);
  kiln_status (*mem_alloc)(kiln_device_t *dev, size_t size, kiln_devptr_t *out);
  void (*mem_free)(kiln_device_t *dev, kiln_devptr_t p);
  /* Page-locked host memory for transfers (the host device: plain aligned memory). */
  kiln_status (*host_alloc)(kiln_device_t *dev, size_t size, void **out);
  void (*host_free)(kiln_device_t *dev, void *p);

  kiln_status (*stream_create)(kiln_device_t *dev, kiln_stream_t **out);
  void (*stream_destroy)(kiln_stream_t *s); /* waits for queued work first */
  kiln_status (*stream_synchronize)(kiln_stream_t *s);
  /* (optional) kiln_stream_overlap_begin / _end below; NULL: the stream always works so. */
  void (*stream_overlap)(kiln_stream_t *s, bool begin);

  kiln_status (*memcpy_d2d)(kiln_stream_t *s, kiln_devptr_t dst, kiln_devptr_t src, size_t n);
  /* Host memory must stay valid and unchanged until the copy ran (synchronize). */
  kiln_status (*memcpy_h2d)(kiln_stream_t *s, kiln_devptr_t dst, const void *src, size_t n);
  kiln_status (*memcpy_d2h)(kiln_stream_t *s, void *dst, kiln_devptr_t src, size_t n);
  /* Fills `count` elements of `elem_size` (1, 2 or 4) bytes with the low bytes of pattern. */
  kiln_status (*memset)(kiln_stream_t *s, kiln_devptr_t dst, uint32_t pattern, int elem_size,
                        size_t count);
  kiln_status (*launch)(kiln_stream_t *s, const kiln_kernel_t *k, const kiln_launch_dims_t *d,
                        const uint64_t *args, int num_args);
  /* (optional) UNIMPLEMENTED when NULL. */
  kiln_status (*gemm)(kiln_stream_t *s, const kiln_gemm_desc_t *g, kiln_devptr_t a, kiln_devptr_t b,
                      kiln_devptr_t c);

  kiln_status (*event_create)(kiln_device_t *dev, kiln_event_t **out);
  void (*event_destroy)(kiln_event_t *e);
  kiln_status (*event_record)(kiln_event_t *e, kiln_stream_t *s);
  kiln_status (*stream_wait_event)(kiln_stream_t *s, kiln_event_t *e);
  kiln_status (*event_synchronize)(kiln_event_t *e);

  kiln_status (*module_load)(kiln_device_t *dev, const kiln_module_image_t *image,
                             kiln_device_module_t **out);
  void (*module_unload)(kiln_device_module_t *m);
  kiln_status (*module_get_kernel)(kiln_device_module_t *m, const char *name,
                                   const kiln_kernel_t **out);

  /* (optional) recorded command buffers; NULL: commands are always issued one by one. */
  const kiln_cmd_exec_ops_t *cmd_ops;
} kiln_device_vtable_t;

/* Common headers; implementations embed these as their first member. */
struct kiln_device {
  const kiln_device_vtable_t *vt;
  kiln_device_kind_t kind;
  char name[192];
  kiln_cmd_cache_t *cmd_cache; /* owned; created by kiln_device_init_common */
  kiln_device_allocator_t *allocator; /* owned; over mem_alloc / mem_free (allocator.h) */
};
struct kiln_stream {
  kiln_device_t *device;
};
struct kiln_event {
  kiln_device_t *device;
};
struct kiln_device_module {
  kiln_device_t *device;
};

/* Implementations call this from their create function (sets up the command-buffer cache
 * with the capacity of the runtime options, runtime_options.h, default 64, and the device
 * allocator: caching unless those options ask for the plain one) and kiln_device_fini_common from
 * destroy, while mem_free still works (it returns the allocator's regions). On an error (host
 * memory refused) the creator destroys the device: kiln_device_fini_common takes the half-made. */
kiln_status kiln_device_init_common(kiln_device_t *dev, const kiln_device_vtable_t *vt,
                                    kiln_device_kind_t kind, const char *name);
void kiln_device_fini_common(kiln_device_t *dev);

/* Creates a device by kind name: "host", "cuda" (ordinal 0), or "best" (cuda when a driver
 * and a GPU are present, else host). UNAVAILABLE for cuda without a driver or GPU. */
kiln_status kiln_device_create(const char *kind, kiln_device_t **out);
void kiln_device_destroy(kiln_device_t *dev);
/* A unique id for a new kernel handle (see kiln_kernel_t.uid). */
uint64_t kiln_kernel_next_uid(void);

/* Device memory: kiln_device_mem_alloc / kiln_device_mem_free go through the device's
 * caching allocator (allocator.h), which calls the table's mem_alloc / mem_free only to grow
 * or release its pool; the runtime options' plain_allocator (runtime_options.h; the edges'
 * $KILN_ALLOCATOR=plain) makes every call reach the table. Addresses are
 * aligned to 64 bytes on the host and 256 on CUDA. The statistics (bytes in use, peak, pool
 * size, allocations, largest free block, raw calls) come from kiln_device_memory_stats.
 * Thread-safe. */
void kiln_device_memory_stats(kiln_device_t *dev, kiln_device_allocator_stats_t *out);
/* Returns wholly free pool regions to the device. Thread-safe. */
void kiln_device_memory_trim(kiln_device_t *dev);

/* Thin dispatchers that check their arguments (INVALID_ARGUMENT for NULL objects or zero-size
 * requests where they make no sense) and call the table. */
kiln_status kiln_device_mem_alloc(kiln_device_t *dev, size_t size, kiln_devptr_t *out);
void kiln_device_mem_free(kiln_device_t *dev, kiln_devptr_t p);
kiln_status kiln_device_host_alloc(kiln_device_t *dev, size_t size, void **out);
void kiln_device_host_free(kiln_device_t *dev, void *p);
kiln_status kiln_stream_create(kiln_device_t *dev, kiln_stream_t **out);
void kiln_stream_destroy(kiln_stream_t *s);
kiln_status kiln_stream_synchronize(kiln_stream_t *s);
/* Between begin and end (nested: counted), work enqueued on `s` runs on the stream's own
 * thread, never on the enqueuing one, so the caller is free meanwhile (a split collective
 * moves its data between its start and done). The host device otherwise runs an operation
 * submitted to an idle stream on the submitting thread; CUDA streams always work so. The
 * stream's thread calls these, as it enqueues. */
void kiln_stream_overlap_begin(kiln_stream_t *s);
void kiln_stream_overlap_end(kiln_stream_t *s);
kiln_status kiln_stream_memcpy_d2d(kiln_stream_t *s, kiln_devptr_t dst, kiln_devptr_t src,
                                   size_t n);
kiln_status kiln_stream_memcpy_h2d(kiln_stream_t *s, kiln_devptr_t dst, const void *src, size_t n);
kiln_status kiln_stream_memcpy_d2h(kiln_stream_t *s, void *dst, kiln_devptr_t src, size_t n);
kiln_status kiln_stream_memset(kiln_stream_t *s, kiln_devptr_t dst, uint32_t pattern, int elem_size,
                               size_t count);
kiln_status kiln_stream_launch(kiln_stream_t *s, const kiln_kernel_t *k,
                               const kiln_launch_dims_t *d, const uint64_t *args, int num_args);
kiln_status kiln_stream_gemm(kiln_stream_t *s, const kiln_gemm_desc_t *g, kiln_devptr_t a,
                             kiln_devptr_t b, kiln_devptr_t c);
kiln_status kiln_event_create(kiln_device_t *dev, kiln_event_t **out);
void kiln_event_destroy(kiln_event_t *e);
kiln_status kiln_event_record(kiln_event_t *e, kiln_stream_t *s);
kiln_status kiln_stream_wait_event(kiln_stream_t *s, kiln_event_t *e);
kiln_status kiln_event_synchronize(kiln_event_t *e);
kiln_status kiln_device_module_load(kiln_device_t *dev, const kiln_module_image_t *image,
                                    kiln_device_module_t **out);
void kiln_device_module_unload(kiln_device_module_t *m);
kiln_status kiln_device_module_get_kernel(kiln_device_module_t *m, const char *name,
                                          const kiln_kernel_t **out);

#endif /* KILN_RUNTIME_DEVICE_H_ */
