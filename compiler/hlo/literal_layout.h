/* Moving array literals (logical row-major storage) to and from device memory, where an
 * array is stored in its shape's physical order: dimensions from most major to most minor
 * as the layout's minor_to_major lists them reversed (the default layout is row-major, so
 * then both orders agree and this is a plain copy). Tiled layouts are not supported. */
#ifndef KILN_HLO_LITERAL_LAYOUT_H_
#define KILN_HLO_LITERAL_LAYOUT_H_

#include <stdbool.h>
#include <stdint.h>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"

/* Whether `s` (an array shape) stores its elements in logical row-major order. */
bool kiln_shape_is_row_major(const kiln_shape_t *s);

/* Writes the elements of array literal `l` to `dst` in the physical order of `shape` (same
 * dims and element type as the literal; its layout decides the order). */
void kiln_literal_write_physical(const kiln_literal_t *l, const kiln_shape_t *shape, void *dst);
/* Reads `src`, in the physical order of `shape`, into array literal `l`. */
void kiln_literal_read_physical(kiln_literal_t *l, const kiln_shape_t *shape, const void *src);

#endif /* KILN_HLO_LITERAL_LAYOUT_H_ */
