/* NumPy `.npy` files: read them into literals, write literals as them.
 *
 * Format versions 1.0, 2.0 and 3.0 are read (3.0 differs only in the header's text
 * encoding); 1.0 is written, or 2.0 when the header would not fit a 16-bit length.
 * Only little-endian data is supported: a big-endian `descr` ('>f4') is INVALID_ARGUMENT.
 * Fortran-order arrays (`'fortran_order': True`) are accepted and transposed into kiln's
 * row-major storage on read; writing is always C order.
 *
 * Element types and their `descr`:
 *   pred '|b1'; s8 '|i1', s16 '<i2', s32 '<i4', s64 '<i8'; u8 '|u1' ... u64 '<u8';
 *   f16 '<f2', f32 '<f4', f64 '<f8'; c64 '<c8', c128 '<c16';
 *   bf16 '|V2' (raw bit patterns; numpy has no bfloat16 and ml_dtypes saves its bfloat16
 *        arrays as 2-byte void);
 *   f8 types and f4e2m1fn '|V1' (bit patterns, one per byte, as kiln stores them);
 *   s2/s4 '|i1' and u2/u4 '|u1' (one element per byte, holding the value: s4 -1 is 0xff
 *        in the file, though kiln's literal keeps only the low bits, 0x0f).
 * Reading with an expected type also accepts '<u2' for bf16, '|u1' for the f8 and f4
 * types, and the '<V2'/'|V1' spellings; sub-byte integers are range-checked. Without an
 * expected type, '|V2' reads as bf16 and '|V1' is rejected (which 8-bit float it is cannot
 * be known). A '|b1' byte other than 0 reads as true.
 *
 * Headers are parsed defensively: any malformed, truncated or inconsistent input yields
 * INVALID_ARGUMENT with a message saying what was wrong, never a crash. */
#ifndef KILN_TOOLS_COMMON_NPY_H_
#define KILN_TOOLS_COMMON_NPY_H_

#include <stddef.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"

/* The descr kiln writes for an array element type, e.g. "<f4"; NULL for token/tuple/opaque. */
const char *kiln_npy_descr_for_type(kiln_elem_type_t t);

/* Parses the `.npy` bytes `data[0..len)` into a new literal allocated in `arena`.
 * `expected` (optional, an array shape): the file's shape must equal its dims and its
 * descr must be one accepted for its element type (see above); the literal then has a
 * clone of `expected` as its shape (layout kept). Without `expected` the type follows
 * from the descr and the shape has the default layout. `what` (optional) names the
 * input in messages (e.g. the path). *out is set to NULL on error. */
kiln_status kiln_npy_parse(const void *data, size_t len, const kiln_shape_t *expected,
                           const char *what, kiln_arena_t *arena, kiln_literal_t **out);

/* kiln_npy_parse on the contents of the file at `path`. */
kiln_status kiln_npy_read_file(const char *path, const kiln_shape_t *expected, kiln_arena_t *arena,
                               kiln_literal_t **out);

/* Appends the `.npy` encoding of array literal `l` to `b`. Tuple, token and elided
 * (unknown) literals are INVALID_ARGUMENT. */
kiln_status kiln_npy_serialize(kiln_strbuf_t *b, const kiln_literal_t *l);

/* Writes array literal `l` to `path` (created or truncated). */
kiln_status kiln_npy_write_file(const char *path, const kiln_literal_t *l);

#endif /* KILN_TOOLS_COMMON_NPY_H_ */
