/* libFuzzer target for the FFI backend_config decoder (ffi/ffi_attrs.c). Whatever decodes is
 * walked in full (every name, value and nested dictionary is read, and names must come out
 * sorted), so ASan sees every byte the decoder produced. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "ffi/ffi_api.h"
#include "ffi/ffi_attrs.h"

static volatile uint64_t g_sink;

static void walk(const XLA_FFI_Attrs *d, int depth) {
  if (depth > 100) __builtin_trap();
  for (int64_t i = 0; i < d->size; i++) {
    const XLA_FFI_ByteSpan *n = d->names[i];
    for (size_t k = 0; k < n->len; k++) g_sink += (unsigned char)n->ptr[k];
    if (i > 0) {
      const XLA_FFI_ByteSpan *p = d->names[i - 1];
      size_t m = p->len < n->len ? p->len : n->len;
      int c = m ? memcmp(p->ptr, n->ptr, m) : 0;
      if (c > 0 || (c == 0 && p->len >= n->len)) __builtin_trap(); /* unsorted or duplicate */
    }
    switch (d->types[i]) {
      case XLA_FFI_AttrType_SCALAR: {
        const XLA_FFI_Scalar *s = d->attrs[i];
        size_t sz = kiln_ffi_dtype_byte_size(s->dtype);
        for (size_t k = 0; k < sz; k++) g_sink += ((const unsigned char *)s->value)[k];
        break;
      }
      case XLA_FFI_AttrType_ARRAY: {
        const XLA_FFI_Array *a = d->attrs[i];
        size_t sz = kiln_ffi_dtype_byte_size(a->dtype) * a->size;
        for (size_t k = 0; k < sz; k++) g_sink += ((const unsigned char *)a->data)[k];
        break;
      }
      case XLA_FFI_AttrType_STRING: {
        const XLA_FFI_ByteSpan *s = d->attrs[i];
        for (size_t k = 0; k < s->len; k++) g_sink += (unsigned char)s->ptr[k];
        break;
      }
      case XLA_FFI_AttrType_DICTIONARY:
        walk(d->attrs[i], depth + 1);
        break;
      default:
        __builtin_trap();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_ffi_attrs_t *a = NULL;
  kiln_status s = kiln_ffi_attrs_parse((const char *)data, size, &a);
  if (!s) walk(kiln_ffi_attrs_get(a), 0);
  kiln_status_free(s);
  kiln_ffi_attrs_destroy(a);
  return 0;
}
