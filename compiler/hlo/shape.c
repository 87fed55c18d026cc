#include "compiler/hlo/shape.h"

#include <string.h>

typedef struct elem_info {
  const char *name;
  int bits;
  char kind;
} elem_info_t;

static const elem_info_t kElem[KILN_ELEM_TYPE_COUNT] = {
#define X(e, text, bits, kind) {text, bits, #kind[0]},
#include "compiler/hlo/element_types.def"
#undef X
};

const char *kiln_elem_type_name(kiln_elem_type_t t) {
  return (unsigned)t < KILN_ELEM_TYPE_COUNT ? kElem[t].name : "<bad-type>";
}

int kiln_elem_type_bits(kiln_elem_type_t t) { return kElem[t].bits; }

kiln_elem_type_t kiln_elem_type_unsigned_of_width(int bits) {
  switch (bits) {
    case 1:
      return KILN_U1;
    case 2: return KILN_U2;
    case 4: return KILN_U4;
    case 8: return KILN_U8;
    case 16: return KILN_U16;
    case 32: return KILN_U32;
    default: return KILN_U64;
  }
}

size_t kiln_elem_type_storage_bytes(kiln_elem_type_t t) {
  int bits = kElem[t].bits;
  if (bits == 0) return 0;
  return bits < 8 ? 1 : (size_t)bits / 8;
}

bool kiln_elem_type_is_float(kiln_elem_type_t t) { return kElem[t].kind == 'F'; }
bool kiln_elem_type_is_complex(kiln_elem_type_t t) { return kElem[t].kind == 'C'; }
bool kiln_elem_type_is_signed_int(kiln_elem_type_t t) { return kElem[t].kind == 'S'; }
bool kiln_elem_type_is_unsigned_int(kiln_elem_type_t t) { return kElem[t].kind == 'U'; }
bool kiln_elem_type_is_integral(kiln_elem_type_t t) {
  return kElem[t].kind == 'S' || kElem[t].kind == 'U';
}
bool kiln_elem_type_is_array(kiln_elem_type_t t) {
  char k = kElem[t].kind;
  return k != 'T' && k != 'O' && k != 'X';
}

static int64_t *dup_i64(kiln_arena_t *a, const int64_t *v, int n) {
  if (n <= 0) return NULL;
  int64_t *d = kiln_arena_alloc(a, sizeof(int64_t) * (size_t)n);
  if (d && v) memcpy(d, v, sizeof(int64_t) * (size_t)n);
  return d;
}

kiln_shape_t *kiln_shape_make_array(kiln_arena_t *a, kiln_elem_type_t t, int rank,
                                    const int64_t *dims) {
  kiln_shape_t *s = kiln_arena_alloc(a, sizeof *s);
  if (!s) return NULL;
  s->type = t;
  s->rank = rank;
  s->dims = dup_i64(a, dims, rank);
  if (rank > 0 && !s->dims) return NULL;
  return s;
}

kiln_shape_t *kiln_shape_make_scalar(kiln_arena_t *a, kiln_elem_type_t t) {
  return kiln_shape_make_array(a, t, 0, NULL);
}

kiln_shape_t *kiln_shape_make_tuple(kiln_arena_t *a, int n, kiln_shape_t *const *elements) {
  kiln_shape_t *s = kiln_arena_alloc(a, sizeof *s);
  if (!s) return NULL;
  s->type = KILN_TUPLE;
  s->num_elements = n;
  if (n > 0) {
    s->elements = kiln_arena_alloc(a, sizeof(kiln_shape_t *) * (size_t)n);
    if (!s->elements) return NULL;
    memcpy(s->elements, elements, sizeof(kiln_shape_t *) * (size_t)n);
  }
  return s;
}

kiln_shape_t *kiln_shape_make_token(kiln_arena_t *a) {
  kiln_shape_t *s = kiln_arena_alloc(a, sizeof *s);
  if (s) s->type = KILN_TOKEN;
  return s;
}

void kiln_shape_set_default_layout(kiln_arena_t *a, kiln_shape_t *s) {
  if (!kiln_shape_is_array(s)) return;
  memset(&s->layout, 0, sizeof s->layout);
  s->has_layout = true;
  s->layout.rank = s->rank;
  s->layout.minor_to_major = dup_i64(a, NULL, s->rank);
  for (int i = 0; i < s->rank; i++) s->layout.minor_to_major[i] = s->rank - 1 - i;
}

kiln_shape_t *kiln_shape_make_array_with_default_layout(kiln_arena_t *a, kiln_elem_type_t t,
                                                        int rank, const int64_t *dims) {
  kiln_shape_t *s = kiln_shape_make_array(a, t, rank, dims);
  if (s) kiln_shape_set_default_layout(a, s);
  return s;
}

kiln_shape_t *kiln_shape_clone(kiln_arena_t *a, const kiln_shape_t *s) {
  kiln_shape_t *d = kiln_arena_alloc(a, sizeof *d);
  if (!d) return NULL;
  *d = *s;
  d->dims = dup_i64(a, s->dims, s->rank);
  if (s->dynamic) {
    d->dynamic = kiln_arena_alloc(a, (size_t)s->rank);
    memcpy(d->dynamic, s->dynamic, (size_t)s->rank);
  }
  if (s->has_layout) {
    d->layout.minor_to_major = dup_i64(a, s->layout.minor_to_major, s->layout.rank);
    if (s->layout.num_tiles) {
      d->layout.tiles = kiln_arena_alloc(a, sizeof(kiln_tile_t) * (size_t)s->layout.num_tiles);
      for (int i = 0; i < s->layout.num_tiles; i++) {
        d->layout.tiles[i].num_dims = s->layout.tiles[i].num_dims;
        d->layout.tiles[i].dims =
            dup_i64(a, s->layout.tiles[i].dims, s->layout.tiles[i].num_dims);
      }
    }
    if (s->layout.extra) d->layout.extra = kiln_arena_strdup(a, s->layout.extra);
  }
  if (s->num_elements) {
    d->elements = kiln_arena_alloc(a, sizeof(kiln_shape_t *) * (size_t)s->num_elements);
    for (int i = 0; i < s->num_elements; i++) d->elements[i] = kiln_shape_clone(a, s->elements[i]);
  }
  return d;
}

bool kiln_shape_is_dynamic(const kiln_shape_t *s) {
  if (s->type == KILN_TUPLE) {
    for (int i = 0; i < s->num_elements; i++)
      if (kiln_shape_is_dynamic(s->elements[i])) return true;
    return false;
  }
  if (!s->dynamic) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->dynamic[i]) return true;
  return false;
}

int64_t kiln_shape_num_elements(const kiln_shape_t *s) {
  if (!kiln_shape_is_array(s)) return 0;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i] < 0) return 0; /* unbounded dynamic dimension: size unknown */
    if (s->dims[i] != 0 && n > INT64_MAX / s->dims[i]) return INT64_MAX;
    n *= s->dims[i];
  }
  return n;
}

int64_t kiln_shape_byte_size(const kiln_shape_t *s) {
  if (s->type == KILN_TUPLE) {
    int64_t total = 0;
    for (int i = 0; i < s->num_elements; i++) {
      int64_t e = kiln_shape_byte_size(s->elements[i]);
      if (e > INT64_MAX - total) return INT64_MAX;
      total += e;
    }
    return total;
  }
  int64_t n = kiln_shape_num_elements(s);
  int64_t b = (int64_t)kiln_elem_type_storage_bytes(s->type);
  if (b && n > INT64_MAX / b) return INT64_MAX;
  return n * b;
}

bool kiln_layout_equal(const kiln_layout_t *a, const kiln_layout_t *b) {
  if (a->rank != b->rank || a->num_tiles != b->num_tiles ||
      a->element_size_bits != b->element_size_bits || a->memory_space != b->memory_space)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->minor_to_major[i] != b->minor_to_major[i]) return false;
  for (int i = 0; i < a->num_tiles; i++) {
    if (a->tiles[i].num_dims != b->tiles[i].num_dims) return false;
    for (int j = 0; j < a->tiles[i].num_dims; j++)
      if (a->tiles[i].dims[j] != b->tiles[i].dims[j]) return false;
  }
  if (!a->extra != !b->extra) return false;
  return !a->extra || strcmp(a->extra, b->extra) == 0;
}

int kiln_shape_physical_dim(const kiln_shape_t *s, int k) {
  if (!s->has_layout || s->layout.rank != s->rank || !s->layout.minor_to_major) return k;
  int64_t d = s->layout.minor_to_major[s->rank - 1 - k];
  return d >= 0 && d < s->rank ? (int)d : k;
}

bool kiln_layout_is_default(const kiln_layout_t *l) {
  if (l->num_tiles || l->element_size_bits || l->memory_space || l->extra) return false;
  for (int i = 0; i < l->rank; i++)
    if (l->minor_to_major[i] != l->rank - 1 - i) return false;
  return true;
}

bool kiln_shape_equal(const kiln_shape_t *a, const kiln_shape_t *b, bool layout) {
  if (a->type != b->type) return false;
  if (a->type == KILN_TUPLE) {
    if (a->num_elements != b->num_elements) return false;
    for (int i = 0; i < a->num_elements; i++)
      if (!kiln_shape_equal(a->elements[i], b->elements[i], layout)) return false;
    return true;
  }
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] != b->dims[i]) return false;
    bool da = a->dynamic && a->dynamic[i], db = b->dynamic && b->dynamic[i];
    if (da != db) return false;
  }
  if (layout && a->has_layout && b->has_layout) return kiln_layout_equal(&a->layout, &b->layout);
  return true;
}

bool kiln_shape_compatible(const kiln_shape_t *a, const kiln_shape_t *b) {
  if (a->type != b->type) return false;
  if (a->type == KILN_TUPLE) {
    if (a->num_elements != b->num_elements) return false;
    for (int i = 0; i < a->num_elements; i++)
      if (!kiln_shape_compatible(a->elements[i], b->elements[i])) return false;
    return true;
  }
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static void print_layout(kiln_strbuf_t *b, const kiln_layout_t *l) {
  kiln_strbuf_append_char(b, '{');
  for (int i = 0; i < l->rank; i++) kiln_strbuf_printf(b, i ? ",%lld" : "%lld", (long long)l->minor_to_major[i]);
  bool extras = l->num_tiles || l->element_size_bits || l->memory_space || l->extra;
  if (extras) kiln_strbuf_append_char(b, ':');
  for (int t = 0; t < l->num_tiles; t++) {
    kiln_strbuf_append(b, "T(");
    for (int j = 0; j < l->tiles[t].num_dims; j++) {
      if (j) kiln_strbuf_append_char(b, ',');
      if (l->tiles[t].dims[j] < 0)
        kiln_strbuf_append_char(b, '*');
      else
        kiln_strbuf_printf(b, "%lld", (long long)l->tiles[t].dims[j]);
    }
    kiln_strbuf_append_char(b, ')');
  }
  if (l->extra) kiln_strbuf_append(b, l->extra);
  if (l->element_size_bits) kiln_strbuf_printf(b, "E(%lld)", (long long)l->element_size_bits);
  if (l->memory_space) kiln_strbuf_printf(b, "S(%lld)", (long long)l->memory_space);
  kiln_strbuf_append_char(b, '}');
}

void kiln_shape_print(kiln_strbuf_t *b, const kiln_shape_t *s, bool with_layout) {
  if (s->type == KILN_TUPLE) {
    kiln_strbuf_append_char(b, '(');
    for (int i = 0; i < s->num_elements; i++) {
      if (i) kiln_strbuf_append(b, ", ");
      kiln_shape_print(b, s->elements[i], with_layout);
    }
    kiln_strbuf_append_char(b, ')');
    return;
  }
  kiln_strbuf_append(b, kiln_elem_type_name(s->type));
  if (!kiln_shape_is_array(s)) {
    kiln_strbuf_append(b, "[]");
    return;
  }
  kiln_strbuf_append_char(b, '[');
  for (int i = 0; i < s->rank; i++) {
    if (i) kiln_strbuf_append_char(b, ',');
    if (s->dynamic && s->dynamic[i] && s->dims[i] < 0) {
      kiln_strbuf_append_char(b, '?'); /* unbounded dynamic dimension */
      continue;
    }
    if (s->dynamic && s->dynamic[i]) kiln_strbuf_append(b, "<=");
    kiln_strbuf_printf(b, "%lld", (long long)s->dims[i]);
  }
  kiln_strbuf_append_char(b, ']');
  if (with_layout && s->has_layout) print_layout(b, &s->layout);
}

char *kiln_shape_to_string(const kiln_shape_t *s, bool with_layout) {
  kiln_strbuf_t b = {0};
  kiln_shape_print(&b, s, with_layout);
  return kiln_strbuf_take(&b);
}
