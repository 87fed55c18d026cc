/* What both halves of the FFI example (gather_add.c for the host, gather_add_cuda.cu for
 * CUDA) need around their computation: an XLA_FFI_Error made through the API, the answer to
 * kiln's (and XLA's) metadata query at registration, a buffer's element count. Header-only,
 * against kiln's include/kiln/ffi_c_api.h (OpenXLA's layout), valid C and C++. */
#ifndef KILN_EXAMPLES_FFI_FFI_EXAMPLE_UTIL_H_
#define KILN_EXAMPLES_FFI_FFI_EXAMPLE_UTIL_H_

#include <stdint.h>
#include <string.h>

#include "kiln/ffi_c_api.h"

static inline XLA_FFI_Error *ffi_example_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code,
                                               const char *msg) {
  XLA_FFI_Error_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  a.message = msg;
  a.errc = code;
  return api->XLA_FFI_Error_Create(&a);
}

/* The metadata query: a frame carrying the metadata extension asks for the FFI version the
 * handler was built for (and its traits) without running it. Returns 1 when it answered. */
static inline int ffi_example_answer_metadata(XLA_FFI_CallFrame *f) {
  if (!f->extension_start || f->extension_start->type != XLA_FFI_Extension_Metadata) return 0;
  XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)f->extension_start)->metadata;
  md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  md->api_version.major_version = XLA_FFI_API_MAJOR;
  md->api_version.minor_version = XLA_FFI_API_MINOR;
  md->traits = 0;
  return 1;
}

static inline int64_t ffi_example_elements(const XLA_FFI_Buffer *b) {
  int64_t n = 1;
  for (int64_t d = 0; d < b->rank; d++) n *= b->dims[d];
  return n;
}

#endif /* KILN_EXAMPLES_FFI_FFI_EXAMPLE_UTIL_H_ */
