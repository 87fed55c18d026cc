/* NumPy .npy reader/writer. See npy.h for the dtype conventions. */
#include "tools/common/npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's npy reader assumes a little-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_RANK 64

/* A dtype as the file spells it: kind letter and item size. */
typedef struct npy_dtype {
  char kind; /* 'b', 'i', 'u', 'f', 'c', 'V' */
  int size;  /* bytes */
} npy_dtype_t;

typedef struct npy_header {
  npy_dtype_t dtype;
  char descr[32];
  bool fortran_order;
  int rank;
  int64_t dims[NPY_MAX_RANK];
  size_t data_offset;
} npy_header_t;

const char *kiln_npy_descr_for_type(kiln_elem_type_t t) {
  switch (t) {
    case KILN_PRED:
      return "|b1";
    case KILN_S1:
    case KILN_S2:
    case KILN_S4:
    case KILN_S8:
      return "|i1";
    case KILN_S16:
      return "<i2";
    case KILN_S32:
      return "<i4";
    case KILN_S64:
      return "<i8";
    case KILN_U1:
    case KILN_U2:
    case KILN_U4:
    case KILN_U8:
      return "|u1";
    case KILN_U16:
      return "<u2";
    case KILN_U32:
      return "<u4";
    case KILN_U64:
      return "<u8";
    case KILN_F16:
      return "<f2";
    case KILN_BF16:
      return "|V2";
    case KILN_F32:
      return "<f4";
    case KILN_F64:
      return "<f8";
    case KILN_F8E5M2:
    case KILN_F8E4M3:
    case KILN_F8E4M3FN:
    case KILN_F8E4M3B11FNUZ:
    case KILN_F8E5M2FNUZ:
    case KILN_F8E4M3FNUZ:
    case KILN_F8E3M4:
    case KILN_F8E8M0FNU:
    case KILN_F4E2M1FN:
      return "|V1";
    case KILN_C64:
      return "<c8";
    case KILN_C128:
      return "<c16";
    default:
      return NULL;
  }
}

/* ---- header parsing ---- */

typedef struct npy_lexer {
  const char *p, *end;
  const char *what;
} npy_lexer_t;

static void lex_skip_ws(npy_lexer_t *lx) {
  while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r'))
    lx->p++;
}

static kiln_status lex_error(npy_lexer_t *lx, const char *expected) {
  if (lx->p >= lx->end)
    return KILN_ERR_INVALID("%s: malformed .npy header: expected %s, found end of header", lx->what,
                            expected);
  unsigned char c = (unsigned char)*lx->p;
  if (c >= 0x20 && c < 0x7f)
    return KILN_ERR_INVALID("%s: malformed .npy header: expected %s, found '%c'", lx->what,
                            expected, c);
  return KILN_ERR_INVALID("%s: malformed .npy header: expected %s, found byte 0x%02x", lx->what,
                          expected, c);
}

static bool lex_accept(npy_lexer_t *lx, char c) {
  lex_skip_ws(lx);
  if (lx->p < lx->end && *lx->p == c) {
    lx->p++;
    return true;
  }
  return false;
}

/* A Python string literal in single or double quotes, without escapes. */
static kiln_status lex_string(npy_lexer_t *lx, const char **s, size_t *n) {
  lex_skip_ws(lx);
  if (lx->p >= lx->end || (*lx->p != '\'' && *lx->p != '"')) return lex_error(lx, "a string");
  char q = *lx->p++;
  const char *start = lx->p;
  while (lx->p < lx->end && *lx->p != q) {
    if (*lx->p == '\\' || *lx->p == '\n') return lex_error(lx, "a plain string");
    lx->p++;
  }
  if (lx->p >= lx->end) return lex_error(lx, "a closing quote");
  *s = start;
  *n = (size_t)(lx->p - start);
  lx->p++;
  return NULL;
}

static bool lex_word(npy_lexer_t *lx, const char *w) {
  lex_skip_ws(lx);
  size_t n = strlen(w);
  if ((size_t)(lx->end - lx->p) >= n && memcmp(lx->p, w, n) == 0) {
    const char *after = lx->p + n;
    if (after < lx->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                            (*after >= '0' && *after <= '9') || *after == '_'))
      return false;
    lx->p = after;
    return true;
  }
  return false;
}

static kiln_status lex_dim(npy_lexer_t *lx, int64_t *out) {
  lex_skip_ws(lx);
  if (lx->p >= lx->end || *lx->p < '0' || *lx->p > '9') return lex_error(lx, "a dimension size");
  int64_t v = 0;
  while (lx->p < lx->end && *lx->p >= '0' && *lx->p <= '9') {
    int d = *lx->p - '0';
    if (v > (INT64_MAX - d) / 10)
      return KILN_ERR_INVALID("%s: malformed .npy header: dimension size overflows int64",
                              lx->what);
    v = v * 10 + d;
    lx->p++;
  }
  if (lx->p < lx->end && (*lx->p == 'L' || *lx->p == 'l')) lx->p++; /* Python 2 longs */
  *out = v;
  return NULL;
}

static kiln_status parse_descr(const char *s, size_t n, const char *what, npy_dtype_t *out) {
  if (n < 3 || n > 8)
    return KILN_ERR_INVALID("%s: unsupported .npy dtype '%.*s'", what, (int)(n > 40 ? 40 : n), s);
  char order = s[0], kind = s[1];
  int size = 0;
  for (size_t i = 2; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return KILN_ERR_INVALID("%s: unsupported .npy dtype '%.*s'", what, (int)n, s);
    size = size * 10 + (s[i] - '0');
  }
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return KILN_ERR_INVALID("%s: .npy dtype '%.*s' has no byte-order mark", what, (int)n, s);
  bool ok = false;
  switch (kind) {
    case 'b':
      ok = size == 1;
      break;
    case 'i':
    case 'u':
      ok = size == 1 || size == 2 || size == 4 || size == 8;
      break;
    case 'f':
      ok = size == 2 || size == 4 || size == 8;
      break;
    case 'c':
      ok = size == 8 || size == 16;
      break;
    case 'V':
      ok = size == 1 || size == 2;
      break;
    default:
      ok = false;
  }
  if (!ok) return KILN_ERR_INVALID("%s: unsupported .npy dtype '%.*s'", what, (int)n, s);
  if (order == '>' && size > 1 && kind != 'V')
    return KILN_ERR_INVALID(
        "%s: .npy dtype '%.*s' is big-endian; only little-endian data is "
        "supported (convert with arr.astype(arr.dtype.newbyteorder('<')))",
        what, (int)n, s);
  if (kind == 'c' && order == '>')
    return KILN_ERR_INVALID("%s: big-endian complex data is not supported", what);
  out->kind = kind;
  out->size = size;
  return NULL;
}

/* Parses the preamble and header dictionary of `data`. */
static kiln_status parse_header(const unsigned char *data, size_t len, const char *what,
                                npy_header_t *h) {
  memset(h, 0, sizeof *h);
  if (len < 10 || memcmp(data, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
    return KILN_ERR_INVALID("%s: not a .npy file (missing the \\x93NUMPY magic)", what);
  int major = data[6], minor = data[7];
  size_t hlen, off;
  if (major == 1) {
    hlen = (size_t)data[8] | ((size_t)data[9] << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return KILN_ERR_INVALID("%s: truncated .npy preamble", what);
    hlen = (size_t)data[8] | ((size_t)data[9] << 8) | ((size_t)data[10] << 16) |
           ((size_t)data[11] << 24);
    off = 12;
  } else {
    return KILN_ERR_INVALID("%s: unsupported .npy format version %d.%d (1.0, 2.0, 3.0 are read)",
                            what, major, minor);
  }
  if (hlen > len - off)
    return KILN_ERR_INVALID("%s: truncated .npy header: it claims %zu bytes, %zu remain", what,
                            hlen, len - off);
  npy_lexer_t lx = {(const char *)data + off, (const char *)data + off + hlen, what};
  h->data_offset = off + hlen;
  for (const char *q = lx.p; q < lx.end; q++)
    if (*q == 0) return KILN_ERR_INVALID("%s: malformed .npy header: NUL byte in header", what);

  bool have_descr = false, have_fortran = false, have_shape = false;
  if (!lex_accept(&lx, '{')) return lex_error(&lx, "'{'");
  while (!lex_accept(&lx, '}')) {
    const char *key;
    size_t key_n;
    KILN_RETURN_IF_ERROR_PLAIN(lex_string(&lx, &key, &key_n));
    if (!lex_accept(&lx, ':')) return lex_error(&lx, "':'");
    if (key_n == 5 && memcmp(key, "descr", 5) == 0) {
      if (have_descr) return KILN_ERR_INVALID("%s: .npy header repeats 'descr'", what);
      lex_skip_ws(&lx);
      if (lx.p < lx.end && *lx.p == '[')
        return KILN_ERR_INVALID("%s: structured .npy dtypes are not supported", what);
      const char *s;
      size_t n;
      KILN_RETURN_IF_ERROR_PLAIN(lex_string(&lx, &s, &n));
      KILN_RETURN_IF_ERROR_PLAIN(parse_descr(s, n, what, &h->dtype));
      memcpy(h->descr, s, n);
      h->descr[n] = 0;
      have_descr = true;
    } else if (key_n == 13 && memcmp(key, "fortran_order", 13) == 0) {
      if (have_fortran) return KILN_ERR_INVALID("%s: .npy header repeats 'fortran_order'", what);
      if (lex_word(&lx, "True")) {
        h->fortran_order = true;
      } else if (lex_word(&lx, "False")) {
        h->fortran_order = false;
      } else {
        return lex_error(&lx, "True or False");
      }
      have_fortran = true;
    } else if (key_n == 5 && memcmp(key, "shape", 5) == 0) {
      if (have_shape) return KILN_ERR_INVALID("%s: .npy header repeats 'shape'", what);
      if (!lex_accept(&lx, '(')) return lex_error(&lx, "'(' starting the shape");
      h->rank = 0;
      while (!lex_accept(&lx, ')')) {
        if (h->rank == NPY_MAX_RANK)
          return KILN_ERR_INVALID("%s: .npy shape has more than %d dimensions", what, NPY_MAX_RANK);
        KILN_RETURN_IF_ERROR_PLAIN(lex_dim(&lx, &h->dims[h->rank]));
        h->rank++;
        if (!lex_accept(&lx, ',')) {
          if (!lex_accept(&lx, ')')) return lex_error(&lx, "',' or ')' in the shape");
          break;
        }
      }
      have_shape = true;
    } else {
      return KILN_ERR_INVALID("%s: unexpected key '%.*s' in .npy header", what,
                              (int)(key_n > 40 ? 40 : key_n), key);
    }
    if (!lex_accept(&lx, ',')) {
      if (!lex_accept(&lx, '}')) return lex_error(&lx, "',' or '}'");
      break;
    }
  }
  lex_skip_ws(&lx);
  if (lx.p != lx.end) return lex_error(&lx, "only padding after the header's '}'");
  if (!have_descr || !have_fortran || !have_shape)
    return KILN_ERR_INVALID("%s: .npy header lacks '%s'", what,
                            !have_descr     ? "descr"
                            : !have_fortran ? "fortran_order"
                                            : "shape");
  return NULL;
}

/* Which file dtypes may fill elements of type t. */
static bool dtype_matches(npy_dtype_t d, kiln_elem_type_t t) {
  const char *canon = kiln_npy_descr_for_type(t);
  if (!canon) return false;
  npy_dtype_t c;
  kiln_status s = parse_descr(canon, strlen(canon), "", &c);
  if (s) {
    kiln_status_free(s);
    return false;
  }
  if (c.kind == d.kind && c.size == d.size) return true;
  if (t == KILN_BF16) return d.kind == 'u' && d.size == 2;
  if (c.kind == 'V' && c.size == 1) return d.kind == 'u' && d.size == 1;
  return false;
}

static kiln_status type_from_dtype(npy_dtype_t d, const char *descr, const char *what,
                                   kiln_elem_type_t *out) {
  static const kiln_elem_type_t ints[] = {KILN_S8, KILN_S16, KILN_S32, KILN_S64};
  static const kiln_elem_type_t uints[] = {KILN_U8, KILN_U16, KILN_U32, KILN_U64};
  int log2 = d.size == 1 ? 0 : d.size == 2 ? 1 : d.size == 4 ? 2 : 3;
  switch (d.kind) {
    case 'b':
      *out = KILN_PRED;
      return NULL;
    case 'i':
      *out = ints[log2];
      return NULL;
    case 'u':
      *out = uints[log2];
      return NULL;
    case 'f':
      *out = d.size == 2 ? KILN_F16 : d.size == 4 ? KILN_F32 : KILN_F64;
      return NULL;
    case 'c':
      *out = d.size == 8 ? KILN_C64 : KILN_C128;
      return NULL;
    case 'V':
      if (d.size == 2) {
        *out = KILN_BF16;
        return NULL;
      }
      return KILN_ERR_INVALID(
          "%s: .npy dtype '%s' (1-byte void) needs an expected element "
          "type: it could be any 8-bit float",
          what, descr);
    default:
      return KILN_ERR_INVALID("%s: unsupported .npy dtype '%s'", what, descr);
  }
}

/* Range-checks sub-byte integers read one per byte and stores them as kiln keeps them
 * (low bits only); normalizes pred bytes to 0/1. */
static kiln_status normalize_subbyte(const kiln_literal_t *l, const char *what) {
  kiln_elem_type_t t = l->shape->type;
  unsigned char *p = l->data;
  if (t == KILN_PRED) {
    for (int64_t i = 0; i < l->num_elements; i++) p[i] = p[i] != 0;
    return NULL;
  }
  const int bits = kiln_elem_type_bits(t);
  if (!kiln_elem_type_is_integral(t) || bits >= 8) return NULL;
  const bool is_signed = kiln_elem_type_is_signed_int(t);
  const int64_t lo = is_signed ? -((int64_t)1 << (bits - 1)) : 0;
  const int64_t hi = is_signed ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
  unsigned char mask = (unsigned char)((1u << bits) - 1);
  for (int64_t i = 0; i < l->num_elements; i++) {
    int64_t v = is_signed ? (int64_t)(int8_t)p[i] : (int64_t)p[i];
    if (v < lo || v > hi)
      return KILN_ERR_INVALID("%s: element %" PRId64 " is %" PRId64 ", out of range for %s", what,
                              i, v, kiln_elem_type_name(t));
    p[i] &= mask;
  }
  return NULL;
}

/* Copies a column-major array of `rank` dims into row-major `dst`. */
static void copy_fortran_to_c(unsigned char *dst, const unsigned char *src, int rank,
                              const int64_t *dims, int64_t count, size_t item) {
  int64_t idx[NPY_MAX_RANK] = {0};
  int64_t stride[NPY_MAX_RANK];
  int64_t s = 1;
  for (int d = 0; d < rank; d++) {
    stride[d] = s;
    s *= dims[d];
  }
  int64_t off = 0;
  for (int64_t i = 0; i < count; i++) {
    memcpy(dst + (size_t)i * item, src + (size_t)off * item, item);
    for (int d = rank - 1; d >= 0; d--) {
      idx[d]++;
      off += stride[d];
      if (idx[d] < dims[d]) break;
      off -= stride[d] * dims[d];
      idx[d] = 0;
    }
  }
}

kiln_status kiln_npy_parse(const void *data, size_t len, const kiln_shape_t *expected,
                           const char *what, kiln_arena_t *arena, kiln_literal_t **out) {
  *out = NULL;
  if (!what) what = "<npy>";
  if (!data && len) return KILN_ERR_INVALID("%s: no data", what);
  npy_header_t h;
  KILN_RETURN_IF_ERROR_PLAIN(parse_header(data, len, what, &h));

  int64_t count = 1;
  for (int d = 0; d < h.rank; d++) {
    if (h.dims[d] != 0 && count > INT64_MAX / h.dims[d])
      return KILN_ERR_INVALID("%s: .npy shape's element count overflows int64", what);
    count *= h.dims[d];
  }
  if (count > (int64_t)(SIZE_MAX / 16))
    return KILN_ERR_INVALID("%s: .npy array is too large", what);
  size_t need = (size_t)count * (size_t)h.dtype.size;
  size_t have = len - h.data_offset;
  if (have < need)
    return KILN_ERR_INVALID("%s: truncated .npy data: %zu bytes for %" PRId64
                            " elements of '%s' need %zu",
                            what, have, count, h.descr, need);
  if (have > need)
    return KILN_ERR_INVALID("%s: .npy file has %zu bytes after its %zu bytes of data", what,
                            have - need, need);

  kiln_shape_t *shape;
  if (expected) {
    if (!kiln_shape_is_array(expected))
      return KILN_ERR_INVALID("%s: a .npy file holds one array; expected %s", what,
                              kiln_elem_type_name(expected->type));
    bool dims_ok = expected->rank == h.rank;
    for (int d = 0; dims_ok && d < h.rank; d++) dims_ok = expected->dims[d] == h.dims[d];
    if (!dims_ok || !dtype_matches(h.dtype, expected->type)) {
      char *want = kiln_shape_to_string(expected, false);
      kiln_strbuf_t got = {0};
      kiln_strbuf_printf(&got, "'%s' (", h.descr);
      for (int d = 0; d < h.rank; d++)
        kiln_strbuf_printf(&got, "%s%" PRId64, d ? ", " : "", h.dims[d]);
      kiln_strbuf_append(&got, h.rank == 1 ? ",)" : ")");
      kiln_status s = KILN_ERR_INVALID(
          "%s: .npy array is %s, expected %s (dtype '%s')", what, kiln_strbuf_cstr(&got), want,
          kiln_npy_descr_for_type(expected->type) ? kiln_npy_descr_for_type(expected->type) : "?");
      kiln_free(want);
      kiln_strbuf_free(&got);
      return s;
    }
    shape = kiln_shape_clone(arena, expected);
  } else {
    kiln_elem_type_t t = KILN_F32;
    KILN_RETURN_IF_ERROR_PLAIN(type_from_dtype(h.dtype, h.descr, what, &t));
    shape = kiln_shape_make_array_with_default_layout(arena, t, h.rank, h.dims);
  }
  if (!shape) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: arena is full", what);
  kiln_literal_t *l = kiln_literal_make(arena, shape);
  if (!l)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: cannot allocate %zu bytes for the array",
                            what, need);
  if (l->num_elements != count || kiln_elem_type_storage_bytes(shape->type) != (size_t)h.dtype.size)
    return KILN_ERR_INTERNAL("%s: literal storage does not match the .npy data", what);
  const unsigned char *src = (const unsigned char *)data + h.data_offset;
  if (need > 0) {
    if (h.fortran_order && h.rank > 1)
      copy_fortran_to_c(l->data, src, h.rank, h.dims, count, (size_t)h.dtype.size);
    else
      memcpy(l->data, src, need);
  }
  KILN_RETURN_IF_ERROR_PLAIN(normalize_subbyte(l, what));
  *out = l;
  return NULL;
}

kiln_status kiln_npy_read_file(const char *path, const kiln_shape_t *expected, kiln_arena_t *arena,
                               kiln_literal_t **out) {
  *out = NULL;
  char *buf;
  size_t len;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_read_file(path, &buf, &len));
  kiln_status s = kiln_npy_parse(buf, len, expected, path, arena, out);
  kiln_free(buf);
  return s;
}

kiln_status kiln_npy_serialize(kiln_strbuf_t *b, const kiln_literal_t *l) {
  if (!l || !l->shape) return KILN_ERR_INVALID("npy: no literal to write");
  if (!kiln_shape_is_array(l->shape))
    return KILN_ERR_INVALID("npy: a .npy file holds one array, not a %s",
                            kiln_elem_type_name(l->shape->type));
  if (l->unknown) return KILN_ERR_INVALID("npy: literal contents are unknown (elided)");
  const char *descr = kiln_npy_descr_for_type(l->shape->type);
  if (!descr)
    return KILN_ERR_INVALID("npy: element type %s has no .npy dtype",
                            kiln_elem_type_name(l->shape->type));
  size_t item = kiln_elem_type_storage_bytes(l->shape->type);
  kiln_strbuf_t h = {0};
  kiln_strbuf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int d = 0; d < l->shape->rank; d++)
    kiln_strbuf_printf(&h, "%s%" PRId64, d ? ", " : "", l->shape->dims[d]);
  kiln_strbuf_append(&h, l->shape->rank == 1 ? ",), }" : "), }");
  /* Pad with spaces so that preamble + header + '\n' is a multiple of 64 bytes. */
  size_t pre = 10;
  size_t total = pre + h.len + 1;
  if ((total + 63) / 64 * 64 - pre > 65535) pre = 12;
  total = pre + h.len + 1;
  size_t padded = (total + 63) / 64 * 64;
  while (pre + h.len + 1 < padded) kiln_strbuf_append_char(&h, ' ');
  kiln_strbuf_append_char(&h, '\n');
  size_t hlen = h.len;
  unsigned char preamble[12];
  memcpy(preamble, NPY_MAGIC, NPY_MAGIC_LEN);
  preamble[6] = pre == 10 ? 1 : 2;
  preamble[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) preamble[8 + i] = (unsigned char)(hlen >> (8 * i));
  kiln_strbuf_append_n(b, (const char *)preamble, pre);
  kiln_strbuf_append_n(b, h.data, h.len);
  kiln_strbuf_free(&h);
  size_t n = (size_t)l->num_elements * item;
  kiln_elem_type_t t = l->shape->type;
  if (kiln_elem_type_is_signed_int(t) && kiln_elem_type_bits(t) < 8) {
    /* kiln keeps the low bits; the file holds the sign-extended byte. */
    int shift = 8 - kiln_elem_type_bits(t);
    const unsigned char *p = l->data;
    for (size_t i = 0; i < n; i++)
      kiln_strbuf_append_char(b, (char)(int8_t)((int8_t)(p[i] << shift) >> shift));
  } else if (n) {
    kiln_strbuf_append_n(b, l->data, n);
  }
  return NULL;
}

kiln_status kiln_npy_write_file(const char *path, const kiln_literal_t *l) {
  kiln_strbuf_t b = {0};
  kiln_status s = kiln_npy_serialize(&b, l);
  if (s) {
    kiln_strbuf_free(&b);
    return kiln_status_annotate(s, "while writing '%s'", path);
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    kiln_strbuf_free(&b);
    return kiln_status_make(KILN_PERMISSION_DENIED, "cannot create '%s': %s", path,
                            strerror(errno));
  }
  size_t w = b.len ? fwrite(b.data, 1, b.len, f) : 0;
  int close_err = fclose(f);
  bool ok = w == b.len && close_err == 0;
  kiln_strbuf_free(&b);
  if (!ok) return kiln_status_make(KILN_DATA_LOSS, "error writing '%s'", path);
  return NULL;
}
