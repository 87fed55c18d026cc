/* HLO literals: the values of constants.
 *
 * An array literal stores its elements densely in logical row-major order (the layout of
 * the shape does not affect storage), each element in kiln_elem_type_storage_bytes()
 * bytes (see element_types.def). Sub-byte integers (s2, s4, u2, u4) take one byte each,
 * the value in the low bits and the high bits zero (s4 -2 is 0x0e): XLA's unpacked form
 * (its literals, ml_dtypes, PJRT host buffers); device buffers hold them the same way, so
 * results compare byte for byte. A tuple literal holds element literals. An elided
 * constant (`constant({...})`) has `unknown` set and no data. */
#ifndef KILN_HLO_LITERAL_H_
#define KILN_HLO_LITERAL_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/shape.h"

typedef struct kiln_literal kiln_literal_t;
struct kiln_literal {
  kiln_shape_t *shape;
  bool unknown;          /* contents elided in the text */
  int64_t num_elements;  /* arrays */
  void *data;            /* arrays: num_elements * storage_bytes */
  int num_tuple_elements;
  kiln_literal_t **tuple_elements;
};

/* Allocates a zero-filled literal of `shape` in `a` (NULL if too large for the arena). */
kiln_literal_t *kiln_literal_make(kiln_arena_t *a, kiln_shape_t *shape);

/* Element access as double / int64 / complex parts, converting from the storage type.
 * Index is the linear row-major index. */
double kiln_literal_get_f64(const kiln_literal_t *l, int64_t i);
int64_t kiln_literal_get_s64(const kiln_literal_t *l, int64_t i);
uint64_t kiln_literal_get_u64(const kiln_literal_t *l, int64_t i);
void kiln_literal_get_c128(const kiln_literal_t *l, int64_t i, double *re, double *im);
/* Stores with conversion to the element type (floats round to nearest even). */
void kiln_literal_set_f64(kiln_literal_t *l, int64_t i, double v);
void kiln_literal_set_s64(kiln_literal_t *l, int64_t i, int64_t v);
void kiln_literal_set_u64(kiln_literal_t *l, int64_t i, uint64_t v);
void kiln_literal_set_c128(kiln_literal_t *l, int64_t i, double re, double im);

bool kiln_literal_equal(const kiln_literal_t *a, const kiln_literal_t *b);

/* Prints the literal's value part as HLO text: `{ {1, 2}, {3, 4} }` nesting per dimension,
 * scalars bare, tuples `( ... )`, unknown `{...}`; floats print so that parsing them back
 * gives the same bits (nan, -nan, inf, -inf spelled out). */
void kiln_literal_print(kiln_strbuf_t *b, const kiln_literal_t *l);

#endif /* KILN_HLO_LITERAL_H_ */
