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
    {13, KILN_TUPLE},
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

/* LayoutProto -> "{minor_to_major:T(..)E(n)S(n)}" appended to `out`. */
static kiln_status print_layout(kiln_pw_reader_t *r, kiln_strbuf_t *out) {
  kiln_pw_i64_vec_t m2m = {0};
  kiln_strbuf_t tiles = {0};
  int64_t element_bits = 0, memory_space = 0;
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(r, &f))) break;
    switch (f.number) {
      case 1: /* minor_to_major */
        s = kiln_pw_append_varints(r, &f, &m2m);
        break;
      case 6: { /* tiles: TileProto { repeated int64 dimensions = 1; } */
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
          kiln_strbuf_append(&tiles, "T(");
          for (size_t i = 0; i < dims.len; i++) {
            if (i) kiln_strbuf_append_char(&tiles, ',');
            if (dims.data[i] < 0)
              kiln_strbuf_append_char(&tiles, '*');
            else
              kiln_strbuf_printf(&tiles, "%" PRId64, dims.data[i]);
          }
          kiln_strbuf_append_char(&tiles, ')');
        }
        kiln_vec_free(&dims);
        break;
      }
      case 7:
        s = kiln_pw_as_i64(r, &f, &element_bits);
        break;
      case 8:
        s = kiln_pw_as_i64(r, &f, &memory_space);
        break;
      default:
        break; /* sparse, padding and split fields: not kept */
    }
  }
  if (!s) {
    kiln_strbuf_append_char(out, '{');
    for (size_t i = 0; i < m2m.len; i++)
      kiln_strbuf_printf(out, i ? ",%" PRId64 : "%" PRId64, m2m.data[i]);
    if (tiles.len || element_bits || memory_space) kiln_strbuf_append_char(out, ':');
    if (tiles.len) kiln_strbuf_append(out, tiles.data);
    if (element_bits) kiln_strbuf_printf(out, "E(%" PRId64 ")", element_bits);
    if (memory_space) kiln_strbuf_printf(out, "S(%" PRId64 ")", memory_space);
    kiln_strbuf_append_char(out, '}');
  }
  kiln_vec_free(&m2m);
  kiln_strbuf_free(&tiles);
  return s;
}

kiln_status kiln_shape_proto_print(kiln_pw_reader_t *r, kiln_strbuf_t *out) {
  int64_t element_type = 0;
  kiln_pw_field_t type_field = {0};
  kiln_pw_i64_vec_t dims = {0}, dynamic = {0};
  kiln_strbuf_t elements = {0}, layout = {0};
  int num_elements = 0;
  bool has_layout = false;
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(r, &f))) break;
    switch (f.number) {
      case 2:
        type_field = f;
        s = kiln_pw_as_i64(r, &f, &element_type);
        break;
      case 3:
        s = kiln_pw_append_varints(r, &f, &dims);
        break;
      case 4: { /* tuple_shapes */
        kiln_pw_reader_t sub;
        if ((s = kiln_pw_sub(r, &f, "ShapeProto", &sub))) break;
        if (num_elements++) kiln_strbuf_append(&elements, ", ");
        s = kiln_shape_proto_print(&sub, &elements);
        break;
      }
      case 5: {
        kiln_pw_reader_t sub;
        if ((s = kiln_pw_sub(r, &f, "LayoutProto", &sub))) break;
        layout.len = 0;
        if (layout.data) layout.data[0] = '\0';
        has_layout = true;
        s = print_layout(&sub, &layout);
        break;
      }
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
  if (!s) {
    if (t == KILN_TUPLE) {
      kiln_strbuf_append_char(out, '(');
      if (elements.len) kiln_strbuf_append(out, elements.data);
      kiln_strbuf_append_char(out, ')');
    } else if (!kiln_elem_type_is_array(t)) {
      kiln_strbuf_printf(out, "%s[]", kiln_elem_type_name(t));
    } else {
      kiln_strbuf_printf(out, "%s[", kiln_elem_type_name(t));
      for (size_t i = 0; i < dims.len; i++) {
        if (i) kiln_strbuf_append_char(out, ',');
        bool dyn = dynamic.len && dynamic.data[i];
        if (dyn && dims.data[i] < 0)
          kiln_strbuf_append_char(out, '?');
        else
          kiln_strbuf_printf(out, dyn ? "<=%" PRId64 : "%" PRId64, dims.data[i]);
      }
      kiln_strbuf_append_char(out, ']');
      if (has_layout) kiln_strbuf_append(out, layout.data);
    }
  }
  kiln_vec_free(&dims);
  kiln_vec_free(&dynamic);
  kiln_strbuf_free(&elements);
  kiln_strbuf_free(&layout);
  return s;
}
