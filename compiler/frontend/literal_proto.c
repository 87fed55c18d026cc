/* LiteralProto field numbers: shape=1, preds=2, u8s=3, s32s=4, s64s=5, u32s=6, u64s=7,
 * f32s=8, f64s=9, tuple_literals=10, f16s=11, c64s=12, bf16s=13, s8s=15, u16s=16, s16s=17,
 * c128s=18, f8e5m2s=19, f8e4m3fns=20, s4s=21, u4s=22, f8e4m3b11fnuzs=23, f8e5m2fnuzs=24,
 * f8e4m3fnuzs=25, s2s=26, u2s=27, f8e4m3s=28, f8e3m4s=29, f4e2m1fns=32, f8e8m0fnus=33. */
#include "compiler/frontend/literal_proto.h"

#include <inttypes.h>
#include <string.h>

#include "compiler/frontend/shape_proto.h"
#include "compiler/hlo/literal_layout.h"

/* The field that carries values of element type `t`, and how: 'v' varints, '4' fixed32,
 * '8' fixed64, 'b' bytes. */
static int values_field(kiln_elem_type_t t, char *how) {
  *how = 'b';
  switch (t) {
    case KILN_PRED:
      *how = 'v';
      return 2;
    case KILN_S1:
      return 30;
    case KILN_S2:
      return 26;
    case KILN_S4:
      return 21;
    case KILN_S8:
      return 15;
    case KILN_S16:
      return 17;
    case KILN_S32:
      *how = 'v';
      return 4;
    case KILN_S64:
      *how = 'v';
      return 5;
    case KILN_U1:
      return 31;
    case KILN_U2:
      return 27;
    case KILN_U4:
      return 22;
    case KILN_U8:
      return 3;
    case KILN_U16:
      return 16;
    case KILN_U32:
      *how = 'v';
      return 6;
    case KILN_U64:
      *how = 'v';
      return 7;
    case KILN_F16:
      return 11;
    case KILN_BF16:
      return 13;
    case KILN_F32:
      *how = '4';
      return 8;
    case KILN_F64:
      *how = '8';
      return 9;
    case KILN_C64:
      *how = '4';
      return 12;
    case KILN_C128:
      *how = '8';
      return 18;
    case KILN_F8E5M2:
      return 19;
    case KILN_F8E4M3:
      return 28;
    case KILN_F8E4M3FN:
      return 20;
    case KILN_F8E4M3B11FNUZ:
      return 23;
    case KILN_F8E5M2FNUZ:
      return 24;
    case KILN_F8E4M3FNUZ:
      return 25;
    case KILN_F8E3M4:
      return 29;
    case KILN_F8E8M0FNU:
      return 33;
    case KILN_F4E2M1FN:
      return 32;
    default:
      return 0;
  }
}

static kiln_status oom(void) {
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory while reading a LiteralProto");
}

/* Fills array literal `l` from the values gathered for its type. */
static kiln_status fill_array(kiln_pw_reader_t *r, kiln_literal_t *l, char how,
                              const kiln_pw_i64_vec_t *ints, const kiln_pw_u32_vec_t *f32s,
                              const kiln_pw_u64_vec_t *f64s, const uint8_t *bytes, size_t nbytes,
                              kiln_arena_t *a) {
  kiln_elem_type_t t = l->shape->type;
  size_t width = kiln_elem_type_storage_bytes(t);
  size_t n = (size_t)l->num_elements;
  size_t per = kiln_elem_type_is_complex(t) ? 2 : 1;
  size_t have = how == 'v'   ? ints->len
                : how == '4' ? f32s->len
                : how == '8' ? f64s->len
                             : nbytes / width;
  if (how == 'b' && nbytes % width)
    return kiln_pw_error(r, NULL, "%s values take %zu bytes, not a multiple of %zu",
                         kiln_elem_type_name(t), nbytes, width);
  if (have != n * per)
    return kiln_pw_error(r, NULL, "%zu %s values for a shape of %zu elements", have / per,
                         kiln_elem_type_name(t), n);
  uint8_t *buf = kiln_arena_alloc(a, n * width + 1);
  if (!buf) return oom();
  for (size_t i = 0; i < n; i++) {
    uint8_t *d = buf + i * width;
    switch (how) {
      case 'v': {
        uint64_t v = (uint64_t)ints->data[i];
        if (t == KILN_PRED) v = v != 0;
        memcpy(d, &v, width); /* little-endian host: the low bytes */
        break;
      }
      case '4':
        memcpy(d, &f32s->data[i * per], 4 * per);
        break;
      case '8':
        memcpy(d, &f64s->data[i * per], 8 * per);
        break;
      default:
        memcpy(d, bytes + i * width, width);
        if (kiln_elem_type_bits(t) < 8 &&
            (kiln_elem_type_is_signed_int(t) || kiln_elem_type_is_unsigned_int(t)))
          d[0] &= (uint8_t)((1u << kiln_elem_type_bits(t)) - 1u);
    }
  }
  if (n == 0) return KILN_STATUS_OK;
  if (kiln_shape_is_row_major(l->shape))
    memcpy(l->data, buf, n * width);
  else
    kiln_literal_read_physical(l, l->shape, buf);
  return KILN_STATUS_OK;
}

kiln_status kiln_literal_from_proto(kiln_pw_reader_t *r, kiln_arena_t *a, kiln_literal_t **out) {
  kiln_shape_t *shape = NULL;
  kiln_pw_i64_vec_t ints = {0};
  kiln_pw_u32_vec_t f32s = {0};
  kiln_pw_u64_vec_t f64s = {0};
  KILN_VEC(kiln_pw_field_t) tuple = {0};
  KILN_VEC(kiln_pw_field_t) fields = {0}; /* value fields, read once the shape is known */
  kiln_status s = KILN_STATUS_OK;
  *out = NULL;
  while (!s && kiln_pw_more(r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(r, &f))) break;
    if (f.number == 1) {
      kiln_pw_reader_t sub;
      if (!(s = kiln_pw_sub(r, &f, "ShapeProto", &sub))) s = kiln_shape_from_proto(&sub, a, &shape);
    } else if (f.number == 10) {
      kiln_vec_push(&tuple, f);
    } else if (f.number != 14 && f.wire_type != KILN_PW_GROUP_START) {
      kiln_vec_push(&fields, f);
    }
  }
  if (!s && !shape) s = kiln_pw_error(r, NULL, "literal without a shape");
  kiln_literal_t *l = NULL;
  if (!s && kiln_shape_is_tuple(shape)) {
    if (tuple.len != (size_t)shape->num_elements)
      s = kiln_pw_error(r, NULL, "%zu tuple_literals for a tuple of %d elements", tuple.len,
                        shape->num_elements);
    if (!s) {
      l = kiln_arena_alloc(a, sizeof *l);
      if (l) l->tuple_elements = kiln_arena_alloc(a, sizeof(kiln_literal_t *) * (tuple.len + 1));
      if (!l || !l->tuple_elements) s = oom();
    }
    for (size_t i = 0; !s && i < tuple.len; i++) {
      kiln_pw_reader_t sub;
      if (!(s = kiln_pw_sub(r, &tuple.data[i], "LiteralProto", &sub)))
        s = kiln_literal_from_proto(&sub, a, &l->tuple_elements[i]);
    }
    if (!s) {
      l->shape = shape;
      l->num_tuple_elements = (int)tuple.len;
    }
  } else if (!s && !kiln_shape_is_array(shape)) {
    l = kiln_arena_alloc(a, sizeof *l);
    if (!l)
      s = oom();
    else
      l->shape = shape;
  } else if (!s) {
    char how;
    int want = values_field(shape->type, &how);
    const uint8_t *bytes = NULL;
    size_t nbytes = 0;
    for (size_t i = 0; !s && i < fields.len; i++) {
      kiln_pw_field_t *f = &fields.data[i];
      if ((int)f->number != want) continue;
      if (how == 'v')
        s = kiln_pw_append_varints(r, f, &ints);
      else if (how == '4')
        s = kiln_pw_append_fixed32(r, f, &f32s);
      else if (how == '8')
        s = kiln_pw_append_fixed64(r, f, &f64s);
      else
        s = kiln_pw_as_bytes(r, f, &bytes, &nbytes); /* the last one counts */
    }
    int64_t n = kiln_shape_num_elements(shape);
    size_t have = how == 'v' ? ints.len : how == '4' ? f32s.len : how == '8' ? f64s.len : nbytes;
    /* Allocate only what the values could fill: a huge shape with few values is an error,
     * not an allocation. */
    if (!s && (n < 0 || (uint64_t)n > (uint64_t)have + 1))
      s = kiln_pw_error(r, NULL, "%zu %s values for a shape of %" PRId64 " elements", have,
                        kiln_elem_type_name(shape->type), n);
    if (!s) {
      l = kiln_literal_make(a, shape);
      if (!l) s = oom();
    }
    if (!s) s = fill_array(r, l, how, &ints, &f32s, &f64s, bytes, nbytes, a);
  }
  kiln_vec_free(&ints);
  kiln_vec_free(&f32s);
  kiln_vec_free(&f64s);
  kiln_vec_free(&tuple);
  kiln_vec_free(&fields);
  if (!s) *out = l;
  return s;
}
