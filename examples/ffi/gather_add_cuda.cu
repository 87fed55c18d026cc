/* The CUDA half of the FFI example (gather_add.c is the host half): the same handler ABI
 * (kiln's include/kiln/ffi_c_api.h, OpenXLA's layout), the work a CUDA kernel enqueued on the
 * call's CUstream, which the handler gets from XLA_FFI_Stream_Get:
 *
 *   A[i] = B[i % 128] + C[i]        B: f32[128], C: f32[N], A: f32[N]
 *
 * Build (CMake does this when it finds nvcc):
 *   nvcc -shared -Xcompiler -fPIC -I include examples/ffi/gather_add_cuda.cu \
 *       -o libgather_add_cuda.so
 * Run:   kiln-run --backend=cuda \
 *            --ffi=kiln_gather_add@CUDA=./libgather_add_cuda.so:kiln_gather_add_cuda \
 *            examples/ffi/gather_add.hlo
 *
 * kiln runs on the device's primary context, so the CUDA runtime's launch lands in the same
 * context as the stream it is handed. The handler only enqueues: kiln orders the stream. */
#include <cuda_runtime.h>

#include "ffi_example_util.h"

__global__ static void gather_add(const float *b, const float *c, float *a, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = b[i % 128] + c[i];
}

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error *kiln_gather_add_cuda(
    XLA_FFI_CallFrame *f) {
  if (ffi_example_answer_metadata(f)) return NULL;
  const XLA_FFI_Api *api = f->api;
  if (f->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  if (f->args.size != 2 || f->rets.size != 1 || f->args.types[0] != XLA_FFI_ArgType_BUFFER ||
      f->args.types[1] != XLA_FFI_ArgType_BUFFER)
    return ffi_example_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                             "gather_add_cuda: expected 2 buffer args, 1 result");
  const XLA_FFI_Buffer *b = (const XLA_FFI_Buffer *)f->args.args[0];
  const XLA_FFI_Buffer *c = (const XLA_FFI_Buffer *)f->args.args[1];
  const XLA_FFI_Buffer *a = (const XLA_FFI_Buffer *)f->rets.rets[0];
  if (b->dtype != XLA_FFI_DataType_F32 || c->dtype != XLA_FFI_DataType_F32 ||
      a->dtype != XLA_FFI_DataType_F32 || ffi_example_elements(b) != 128 ||
      ffi_example_elements(a) != ffi_example_elements(c))
    return ffi_example_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                             "gather_add_cuda: B must be f32[128] and A, C f32 of the same size");
  XLA_FFI_Stream_Get_Args sg;
  memset(&sg, 0, sizeof(sg));
  sg.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  sg.ctx = f->ctx;
  XLA_FFI_Error *e = api->XLA_FFI_Stream_Get(&sg);
  if (e) return e;
  int64_t n = ffi_example_elements(c);
  if (n) {
    gather_add<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)sg.stream>>>(
        (const float *)b->data, (const float *)c->data, (float *)a->data, n);
    cudaError_t r = cudaGetLastError();
    if (r != cudaSuccess)
      return ffi_example_error(api, XLA_FFI_Error_Code_INTERNAL, cudaGetErrorString(r));
  }
  return NULL;
}
