/* For PJRT clients' FFI handlers (built against OpenXLA's xla/ffi/api/c_api.h): the metadata
 * query every handler answers at registration, and an error to return. */
#ifndef KILN_TESTS_PJRT_PJRT_FFI_UTIL_H_
#define KILN_TESTS_PJRT_PJRT_FFI_UTIL_H_

#include <stdbool.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"

/* True when `f` is the registration's metadata query (answered: this API version, no
 * traits); the handler then returns NULL at once. */
static inline bool pjrt_ffi_metadata_query(XLA_FFI_CallFrame *f) {
  if (!f->extension_start || f->extension_start->type != XLA_FFI_Extension_Metadata) return false;
  XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)f->extension_start)->metadata;
  md->api_version.major_version = XLA_FFI_API_MAJOR;
  md->api_version.minor_version = XLA_FFI_API_MINOR;
  md->traits = 0;
  return true;
}

/* An INVALID_ARGUMENT error with `msg`, made through the API `a`. */
static inline XLA_FFI_Error *pjrt_ffi_error(const XLA_FFI_Api *a, const char *msg) {
  XLA_FFI_Error_Create_Args e;
  memset(&e, 0, sizeof e);
  e.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  e.message = msg;
  e.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  return a->XLA_FFI_Error_Create(&e);
}

#endif /* KILN_TESTS_PJRT_PJRT_FFI_UTIL_H_ */
