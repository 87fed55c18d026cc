/* HLO element types, layouts and shapes.
 *
 * Shapes are immutable once built and live in an arena (usually the module's), so they
 * may be shared between instructions. */
#ifndef KILN_HLO_SHAPE_H_
#define KILN_HLO_SHAPE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/str.h"

typedef enum kiln_elem_type {
#define X(e, text, bits, kind) KILN_##e,
#include "compiler/hlo/element_types.def"
#undef X
  KILN_ELEM_TYPE_COUNT
} kiln_elem_type_t;

const char *kiln_elem_type_name(kiln_elem_type_t t);
int kiln_elem_type_bits(kiln_elem_type_t t);            /* logical bit width */
size_t kiln_elem_type_storage_bytes(kiln_elem_type_t t); /* bytes per element in a literal */
bool kiln_elem_type_is_float(kiln_elem_type_t t);        /* real floating point */
bool kiln_elem_type_is_complex(kiln_elem_type_t t);
bool kiln_elem_type_is_signed_int(kiln_elem_type_t t);
bool kiln_elem_type_is_unsigned_int(kiln_elem_type_t t);
bool kiln_elem_type_is_integral(kiln_elem_type_t t); /* signed or unsigned int (not pred) */
bool kiln_elem_type_is_array(kiln_elem_type_t t);    /* not tuple/token/opaque */
/* The unsigned integer type of `bits` bits (1, 2, 4, 8, 16, 32; u64 for any other width). */
kiln_elem_type_t kiln_elem_type_unsigned_of_width(int bits);

/* A tile in a tiled layout: T(8,128). A dimension of -1 is printed as '*'
 * (combine dimensions). */
typedef struct kiln_tile {
  int num_dims;
  int64_t *dims;
} kiln_tile_t;

typedef struct kiln_layout {
  int rank;
  int64_t *minor_to_major; /* rank entries */
  int num_tiles;
  kiln_tile_t *tiles;
  int64_t element_size_bits; /* E(n); 0 = unset */
  int64_t memory_space;      /* S(n); 0 = default */
  char *extra;               /* other layout items (e.g. "L(...)", "#(s32)"), verbatim, or NULL */
} kiln_layout_t;

typedef struct kiln_shape kiln_shape_t;
struct kiln_shape {
  kiln_elem_type_t type;
  /* arrays */
  int rank;
  int64_t *dims;     /* upper bound for dynamic dims */
  bool *dynamic;     /* rank entries, or NULL when no dimension is dynamic */
  bool has_layout;
  kiln_layout_t layout;
  /* tuples */
  int num_elements;
  kiln_shape_t **elements;
};

/* Constructors (arena-allocated; `dims` is copied). */
kiln_shape_t *kiln_shape_make_array(kiln_arena_t *a, kiln_elem_type_t t, int rank,
                                    const int64_t *dims);
kiln_shape_t *kiln_shape_make_scalar(kiln_arena_t *a, kiln_elem_type_t t);
kiln_shape_t *kiln_shape_make_tuple(kiln_arena_t *a, int n, kiln_shape_t *const *elements);
kiln_shape_t *kiln_shape_make_token(kiln_arena_t *a);
/* Array shape with the default descending layout {rank-1,...,0}. */
kiln_shape_t *kiln_shape_make_array_with_default_layout(kiln_arena_t *a, kiln_elem_type_t t,
                                                        int rank, const int64_t *dims);
/* Deep copy into arena `a`. */
kiln_shape_t *kiln_shape_clone(kiln_arena_t *a, const kiln_shape_t *s);
/* Sets the layout of an array shape to the default descending one. */
void kiln_shape_set_default_layout(kiln_arena_t *a, kiln_shape_t *s);

static inline bool kiln_shape_is_tuple(const kiln_shape_t *s) { return s->type == KILN_TUPLE; }
static inline bool kiln_shape_is_array(const kiln_shape_t *s) {
  return kiln_elem_type_is_array(s->type);
}
bool kiln_shape_is_dynamic(const kiln_shape_t *s);
/* Product of dims (1 for scalars); 0 for non-arrays. Saturates at INT64_MAX. */
int64_t kiln_shape_num_elements(const kiln_shape_t *s);
/* Bytes of a dense array of this shape in literal storage; tuples sum their elements. */
int64_t kiln_shape_byte_size(const kiln_shape_t *s);

/* Structural equality. `layout` also compares layouts (where both have one). */
bool kiln_shape_equal(const kiln_shape_t *a, const kiln_shape_t *b, bool layout);
/* Same element type and dims (ignores layout and dynamism). */
bool kiln_shape_compatible(const kiln_shape_t *a, const kiln_shape_t *b);
bool kiln_layout_equal(const kiln_layout_t *a, const kiln_layout_t *b);
bool kiln_layout_is_default(const kiln_layout_t *l); /* descending minor_to_major, nothing else */
/* The logical dim of `s` at physical position k (0 = most major) under its layout's
 * minor_to_major; k itself without a layout of its rank. */
int kiln_shape_physical_dim(const kiln_shape_t *s, int k);

/* Prints in HLO text syntax: f32[2,<=3]{1,0:T(8,128)S(1)}, (f32[], s32[4]{0}), token[]. */
void kiln_shape_print(kiln_strbuf_t *b, const kiln_shape_t *s, bool with_layout);
/* Convenience: a heap string (free with kiln_free). */
char *kiln_shape_to_string(const kiln_shape_t *s, bool with_layout);

#endif /* KILN_HLO_SHAPE_H_ */
