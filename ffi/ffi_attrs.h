/* FFI attributes: a custom call's attribute dictionary as the XLA_FFI_Attrs a call frame
 * carries (names sorted, scalars, arrays, strings, nested dictionaries), built from C or
 * decoded from a `backend_config` dictionary in HLO text.
 *
 * What the decoder accepts is what XLA turns into FFI attributes (xla/ffi/attribute_map.cc)
 * from MLIR attribute syntax:
 *   {name = value, "quoted name" = value, ...}        a dictionary; duplicate names are errors
 *   true / false                                      PRED scalar (bool, 1 byte)
 *   42, -1, 0x2A [: i8|i16|i32|i64|ui8..ui64|si8..]    integer scalar (untyped: i64; i1: PRED)
 *   1.5, 1.0e-3, 0x3FC00000 : f32 [: f32|f64]          float scalar (untyped: f64)
 *   "text" with \n \t \" \\ \XX escapes               string
 *   array<i64: 1, 2, 3>   (i8, i16, i32, i64, f32, f64)   array
 *   dense<[1, 2]> : tensor<2xi32>, dense<4> : tensor<i32>   array (ints incl. unsigned, f32, f64)
 *   {a = 1 : i64}                                      nested dictionary
 * The whole backend_config is one dictionary; an empty string is an empty dictionary.
 * A malformed input is INVALID_ARGUMENT "backend_config offset N (line L, column C): expected
 * ..., got ...". */
#ifndef KILN_FFI_FFI_ATTRS_H_
#define KILN_FFI_FFI_ATTRS_H_

#include <stddef.h>

#include "base/status.h"
#include "kiln/ffi_c_api.h"

/* Owns every name, value and nested dictionary (one arena). */
typedef struct kiln_ffi_attrs kiln_ffi_attrs_t;
/* A dictionary being built; belongs to its attrs object. */
typedef struct kiln_ffi_dict kiln_ffi_dict_t;

kiln_ffi_attrs_t *kiln_ffi_attrs_create(void);
void kiln_ffi_attrs_destroy(kiln_ffi_attrs_t *a); /* NULL is fine */
kiln_ffi_dict_t *kiln_ffi_attrs_root(kiln_ffi_attrs_t *a);

/* Adders copy what they are given. Names must be unique within a dictionary (checked when
 * finalized). `dtype` is any data type with a whole-byte size. */
kiln_status kiln_ffi_dict_add_scalar(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                     size_t name_len, XLA_FFI_DataType dtype, const void *value);
kiln_status kiln_ffi_dict_add_array(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                    size_t name_len, XLA_FFI_DataType dtype, const void *data,
                                    size_t count);
kiln_status kiln_ffi_dict_add_string(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                     size_t name_len, const char *str, size_t len);
kiln_status kiln_ffi_dict_add_dict(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                   size_t name_len, kiln_ffi_dict_t **out_sub);

/* Sorts every dictionary by name (bytewise, as std::string_view compares) and builds the
 * XLA_FFI_Attrs tree. INVALID_ARGUMENT on a duplicate name. After this, no more adds. */
kiln_status kiln_ffi_attrs_finalize(kiln_ffi_attrs_t *a);
/* The root dictionary once finalized (NULL before); lives as long as `a`. */
const XLA_FFI_Attrs *kiln_ffi_attrs_get(const kiln_ffi_attrs_t *a);

/* Decodes a backend_config dictionary (see above) into a finalized attrs object. */
kiln_status kiln_ffi_attrs_parse(const char *text, size_t len, kiln_ffi_attrs_t **out);

#endif /* KILN_FFI_FFI_ATTRS_H_ */
