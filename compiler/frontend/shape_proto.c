#include "compiler/frontend/shape_proto.h"

#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"

/* xla.PrimitiveType numbers (xla/xla_data.proto). */
static const struct {
  int64_t number;
  kiln_elem_type_t type;
} kPrimitiveTypes[] = {
    {1, KILN_PRED},        {26, KILN_S2},         {21, KILN_S4},
    {2, KILN_S8},          {3, KILN_S16},         {4, KILN_S32},
    {5, KILN_S64},         {27, KILN_U2},         {22, KILN_U4},
    {6, KILN_U8},          {7, KILN_U16},         {8, KILN_U32},
    {9, KILN_U64},         {10, KILN_F16},        {16, KILN_BF16},
    {11, KILN_F32},        {12, KILN_F64},        {19, KILN_F8E5M2},
    {28, KILN_F8E4M3},     {20, KILN_F8E4M3FN},   {23, KILN_F8E4M3B11FNUZ},
    {24, KILN_F8E5M2FNUZ}, {25, KILN_F8E4M3FNUZ}, {29, KILN_F8E3M4},
    {33, KILN_F8E8M0FNU},  {32, KILN_F4E2M1FN},   {15, KILN_C64},
    {18, KILN_C128},       {17, KILN_TOKEN},      {14, KILN_OPAQUE},
    {13, KILN_TUPLE},      {30, KILN_S1},         {31, KILN_U1},
};

bool kiln_elem_type_from_proto(int64_t primitive_type, kiln_elem_type_t *out) {
  for (size_t i = 0; i < sizeof kPrimitiveTypes / sizeof kPrimitiveTypes[0]; i++) {
    if (kPrimitiveTypes[i].number == primitive_type) {
      *out = kPrimitiveTypes[i].type;
      return true;
    }
  }
  return false;
}

bool kiln_elem_type_to_proto(kiln_elem_type_t t, int64_t *out) {
  for (size_t i = 0; i < sizeof kPrimitiveTypes / sizeof kPrimitiveTypes[0]; i++) {
    if (kPrimitiveTypes[i].type == t) {
      *out = kPrimitiveTypes[i].number;
      return true;
    }
  }
  return false;
}

static kiln_status out_of_memory(void) {
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory while reading a ShapeProto");
}

static int64_t *arena_i64(kiln_arena_t *a, const kiln_pw_i64_vec_t *v) {
  int64_t *d = kiln_arena_alloc(a, sizeof(int64_t) * (v->len ? v->len : 1));
  if (d && v->len) memcpy(d, v->data, sizeof(int64_t) * v->len);
  return d;
}

/* LayoutProto: minor_to_major=1, tiles=6 (TileProto dimensions=1), element_size_in_bits=7,
 * memory_space=8; the sparse, padding and split fields are not kept. */
static kiln_status read_layout(kiln_pw_reader_t *r, kiln_arena_t *a, kiln_layout_t *l) {
  kiln_pw_i64_vec_t m2m = {0};
  KILN_VEC(kiln_tile_t) tiles = {0};
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(r, &f))) break;
    if (f.number == 1) {
      s = kiln_pw_append_varints(r, &f, &m2m);
    } else if (f.number == 6) {
      kiln_pw_reader_t t;
      kiln_pw_i64_vec_t dims = {0};
      if (!(s = kiln_pw_sub(r, &f, "TileProto", &t))) {
        while (!s && kiln_pw_more(&t)) {
          kiln_pw_field_t g;
          if ((s = kiln_pw_next(&t, &g))) break;
          if (g.number == 1) s = kiln_pw_append_varints(&t, &g, &dims);
        }
      }
      if (!s) {
        kiln_tile_t tile = {.num_dims = (int)dims.len, .dims = arena_i64(a, &dims)};
        /* XLA's "combine dimension" is INT64_MIN; kiln writes it as -1 ('*'). */
        for (int i = 0; tile.dims && i < tile.num_dims; i++)
          if (tile.dims[i] < 0) tile.dims[i] = -1;
        if (!tile.dims)
          s = out_of_memory();
        else
          kiln_vec_push(&tiles, tile);
      }
      kiln_vec_free(&dims);
    } else if (f.number == 7) {
      s = kiln_pw_as_i64(r, &f, &l->element_size_bits);
    } else if (f.number == 8) {
      s = kiln_pw_as_i64(r, &f, &l->memory_space);
    }
  }
  if (!s && (m2m.len > INT32_MAX || tiles.len > INT32_MAX))
    s = kiln_pw_error(r, NULL, "layout too large");
  if (!s) {
    l->rank = (int)m2m.len;
    l->minor_to_major = arena_i64(a, &m2m);
    l->num_tiles = (int)tiles.len;
    l->tiles = kiln_arena_alloc(a, sizeof(kiln_tile_t) * (tiles.len ? tiles.len : 1));
    if (!l->minor_to_major || !l->tiles)
      s = out_of_memory();
    else if (tiles.len)
      memcpy(l->tiles, tiles.data, sizeof(kiln_tile_t) * tiles.len);
  }
  kiln_vec_free(&m2m);
  kiln_vec_free(&tiles);
  return s;
}

/* INVALID_ARGUMENT unless the layout's minor_to_major is a permutation of [0, rank). */
static kiln_status check_minor_to_major(kiln_pw_reader_t *r, const kiln_layout_t *l, int rank) {
  if (l->rank != rank)
    return kiln_pw_error(r, NULL, "layout with %d minor_to_major entries for a shape of rank %d",
                         l->rank, rank);
  uint8_t seen[4096] = {0};
  for (int i = 0; i < rank; i++) {
    int64_t d = l->minor_to_major[i];
    if (d < 0 || d >= rank || seen[d])
      return kiln_pw_error(r, NULL,
                           "layout minor_to_major is not a permutation of the %d dimensions", rank);
    seen[d] = 1;
  }
  return KILN_STATUS_OK;
}

/* ShapeProto: element_type=2, dimensions=3, tuple_shapes=4, layout=5,
 * is_dynamic_dimension=6. */
kiln_status kiln_shape_from_proto(kiln_pw_reader_t *r, kiln_arena_t *a, kiln_shape_t **out) {
  int64_t element_type = 0;
  kiln_pw_field_t type_field = {0};
  kiln_pw_i64_vec_t dims = {0}, dynamic = {0};
  KILN_VEC(kiln_shape_t *) elements = {0};
  kiln_layout_t layout = {0};
  bool has_layout = false;
  kiln_status s = KILN_STATUS_OK;
  *out = NULL;
  while (!s && kiln_pw_more(r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(r, &f))) break;
    kiln_pw_reader_t sub;
    switch (f.number) {
      case 2:
        type_field = f;
        s = kiln_pw_as_i64(r, &f, &element_type);
        break;
      case 3:
        s = kiln_pw_append_varints(r, &f, &dims);
        break;
      case 4: {
        kiln_shape_t *e = NULL;
        if ((s = kiln_pw_sub(r, &f, "ShapeProto", &sub))) break;
        if (!(s = kiln_shape_from_proto(&sub, a, &e))) kiln_vec_push(&elements, e);
        break;
      }
      case 5:
        if ((s = kiln_pw_sub(r, &f, "LayoutProto", &sub))) break;
        memset(&layout, 0, sizeof layout);
        has_layout = true;
        s = read_layout(&sub, a, &layout);
        break;
      case 6:
        s = kiln_pw_append_varints(r, &f, &dynamic);
        break;
      default:
        break;
    }
  }
  kiln_elem_type_t t = KILN_PRED;
  if (!s && !kiln_elem_type_from_proto(element_type, &t))
    s = kiln_pw_error(r, type_field.number ? &type_field : NULL,
                      "element_type %" PRId64 " is not a type kiln supports", element_type);
  if (!s && dynamic.len && dynamic.len != dims.len)
    s = kiln_pw_error(r, NULL, "%zu is_dynamic_dimension entries for %zu dimensions", dynamic.len,
                      dims.len);
  if (!s && (dims.len > 4096 || elements.len > INT32_MAX))
    s = kiln_pw_error(r, NULL, "shape of rank %zu is too large", dims.len);
  kiln_shape_t *shape = NULL;
  if (!s) {
    if (t == KILN_TUPLE) {
      shape = kiln_shape_make_tuple(a, (int)elements.len, elements.data);
    } else if (!kiln_elem_type_is_array(t)) {
      shape = t == KILN_TOKEN ? kiln_shape_make_token(a) : kiln_shape_make_scalar(a, t);
    } else {
      shape = kiln_shape_make_array(a, t, (int)dims.len, dims.data);
      bool any_dynamic = false;
      for (size_t i = 0; i < dynamic.len; i++) any_dynamic |= dynamic.data[i] != 0;
      if (shape && any_dynamic) {
        shape->dynamic = kiln_arena_alloc(a, sizeof(bool) * dims.len);
        if (!shape->dynamic) shape = NULL;
        for (size_t i = 0; shape && i < dims.len; i++) shape->dynamic[i] = dynamic.data[i] != 0;
      }
      if (shape && has_layout) {
        /* minor_to_major must order every dimension once: literals are copied through it
         * (a fuzzed proto with dimension numbers out of range read past the strides). */
        s = check_minor_to_major(r, &layout, (int)dims.len);
        shape->has_layout = true;
        shape->layout = layout;
      }
    }
    if (!shape) s = out_of_memory();
  }
  kiln_vec_free(&dims);
  kiln_vec_free(&dynamic);
  kiln_vec_free(&elements);
  if (!s) *out = shape;
  return s;
}

kiln_status kiln_shape_proto_print(kiln_pw_reader_t *r, kiln_strbuf_t *out) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_shape_t *shape = NULL;
  kiln_status s = kiln_shape_from_proto(r, &a, &shape);
  if (!s) kiln_shape_print(out, shape, true);
  kiln_arena_destroy(&a);
  return s;
}
