/* MLIR bytecode container -> the generic IR: magic, version, producer, the sections (strings,
 * dialects with their versions and op names, attribute/type offsets, properties, resources,
 * IR), and the IR section's ops, regions, blocks and values. Attributes and types are
 * decoded lazily by mlir_bytecode_attrs.c; the result is then upgraded from VHLO to the
 * current StableHLO by mlir_bytecode_upgrade.c. The layout follows MLIR's published
 * BytecodeFormat.md; every length and index is checked against what is left. */
#include "compiler/frontend/mlir_bytecode.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "compiler/frontend/mlir_bytecode_internal.h"

/* ---- primitives ---- */

kiln_status kiln_bc_error(const kiln_bc_reader_t *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return KILN_ERR_INVALID("MLIR bytecode: %s section, offset %zu: %s", r->what, r->pos, msg);
}

kiln_bc_reader_t kiln_bc_sub(const kiln_bc_reader_t *r, size_t off, size_t len, const char *what) {
  kiln_bc_reader_t s = {r->bc, off, off + len, what};
  return s;
}

kiln_status kiln_bc_byte(kiln_bc_reader_t *r, uint8_t *out) {
  *out = 0;
  if (r->pos >= r->end) return kiln_bc_error(r, "unexpected end of data reading a byte");
  *out = r->bc->data[r->pos++];
  return KILN_STATUS_OK;
}

kiln_status kiln_bc_varint_slow(kiln_bc_reader_t *r, uint64_t *out) {
  *out = 0;
  if (r->pos >= r->end) return kiln_bc_error(r, "unexpected end of data reading a varint");
  const uint8_t *p = r->bc->data + r->pos;
  uint8_t first = p[0];
  if (first & 1) {
    *out = first >> 1;
    r->pos++;
    return KILN_STATUS_OK;
  }
  /* The number of trailing zero bits is the number of bytes that follow (8 when the first
   * byte is zero: a full 64-bit value in the next eight bytes). */
  unsigned extra = first == 0 ? 8 : (unsigned)__builtin_ctz(first);
  if (r->end - r->pos < 1 + (size_t)extra) {
    return kiln_bc_error(r, "truncated varint (%u more bytes needed, %zu left)", extra,
                         r->end - r->pos - 1);
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < extra; i++) v |= (uint64_t)p[1 + i] << (8 * i);
  if (first == 0) {
    *out = v;
  } else {
    v = (v << 8) | first;
    *out = v >> (extra + 1);
  }
  r->pos += 1 + extra;
  return KILN_STATUS_OK;
}

kiln_status kiln_bc_svarint(kiln_bc_reader_t *r, int64_t *out) {
  uint64_t u;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &u));
  *out = (int64_t)((u >> 1) ^ (~(u & 1) + 1));
  return KILN_STATUS_OK;
}

kiln_status kiln_bc_bytes(kiln_bc_reader_t *r, size_t n, const uint8_t **out) {
  if (n > r->end - r->pos) {
    return kiln_bc_error(r, "%zu bytes needed, only %zu left", n, r->end - r->pos);
  }
  *out = r->bc->data + r->pos;
  r->pos += n;
  return KILN_STATUS_OK;
}

kiln_status kiln_bc_count(kiln_bc_reader_t *r, size_t min_item, uint64_t *out) {
  size_t at = r->pos;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, out));
  if (min_item > 0 && *out > (r->end - r->pos) / min_item) {
    kiln_bc_reader_t e = *r;
    e.pos = at;
    return kiln_bc_error(&e, "count %llu exceeds the %zu bytes left", (unsigned long long)*out,
                         r->end - r->pos);
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_bc_string(kiln_bc_reader_t *r, const char **out, size_t *len) {
  size_t at = r->pos;
  uint64_t i;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &i));
  if (i >= r->bc->num_strings) {
    kiln_bc_reader_t e = *r;
    e.pos = at;
    return kiln_bc_error(&e, "string index %llu out of range (%llu strings)", (unsigned long long)i,
                         (unsigned long long)r->bc->num_strings);
  }
  *out = r->bc->strings[i];
  if (len != NULL) *len = r->bc->string_lens[i];
  return KILN_STATUS_OK;
}

/* Zeroed arena memory (the arena zeroes what it hands out). */
const char *kiln_bc_dotted(kiln_bc_t *bc, const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  char *s = kiln_arena_alloc(bc->arena, na + nb + 2);
  memcpy(s, a, na);
  s[na] = '.';
  memcpy(s + na + 1, b, nb + 1);
  return s;
}

static void *bc_alloc(kiln_bc_t *bc, size_t n) {
  return kiln_arena_alloc(bc->arena, n == 0 ? 1 : n);
}

kiln_mlir_attr_t *kiln_bc_new_attr(kiln_bc_t *bc, kiln_mlir_attr_kind_t kind) {
  kiln_mlir_attr_t *a = bc_alloc(bc, sizeof(*a));
  a->kind = kind;
  return a;
}

kiln_mlir_type_t *kiln_bc_new_type(kiln_bc_t *bc, kiln_mlir_type_kind_t kind) {
  kiln_mlir_type_t *t = bc_alloc(bc, sizeof(*t));
  t->kind = kind;
  return t;
}

const kiln_mlir_type_t *kiln_bc_int_type(kiln_bc_t *bc, int width) {
  if (width > 0 && width <= 64 && bc->int_types[width]) return bc->int_types[width];
  kiln_mlir_type_t *t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_INTEGER);
  t->width = width;
  if (width > 0 && width <= 64) bc->int_types[width] = t;
  return t;
}

/* ---- the VHLO op table ---- */

typedef struct vhlo_op_info {
  const char *name;
  int64_t min_version, max_version;
  const char *attrs;
} vhlo_op_info_t;

static const vhlo_op_info_t kVhloOps[] = {
#define VHLO_OP(n, lo, hi, attrs) {n, lo, hi, attrs},
#include "compiler/frontend/mlir_bytecode_vhlo_ops.inc"
#undef VHLO_OP
};

const char *kiln_bc_vhlo_op_attrs(const char *name, int64_t *min_version, int64_t *max_version) {
  size_t lo = 0, hi = sizeof(kVhloOps) / sizeof(kVhloOps[0]);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(kVhloOps[mid].name, name);
    if (c == 0) {
      if (min_version) *min_version = kVhloOps[mid].min_version;
      if (max_version) {
        *max_version = kVhloOps[mid].max_version ? kVhloOps[mid].max_version : KILN_VHLO_CURRENT;
      }
      return kVhloOps[mid].attrs;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* ---- sections ---- */

static const char *section_name(unsigned id) {
  static const char *const kNames[] = {
      "string",    "dialect",  "attribute/type",  "attribute/type offset",
      "IR",        "resource", "resource offset", "dialect version",
      "properties"};
  return id < KILN_BC_NUM_SECTIONS ? kNames[id] : "unknown";
}

/* A section header at r: id (high bit: aligned), length, optional alignment and padding. */
static kiln_status read_section(kiln_bc_reader_t *r, unsigned *id, size_t *off, size_t *len) {
  uint8_t b;
  uint64_t n;
  size_t at = r->pos;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_byte(r, &b));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &n));
  *id = b & 0x7f;
  if (*id >= KILN_BC_NUM_SECTIONS) {
    kiln_bc_reader_t e = *r;
    e.pos = at;
    return kiln_bc_error(&e, "unknown section id %u", *id);
  }
  if (b & 0x80) {
    uint64_t align;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &align));
    if (align == 0 || (align & (align - 1)) != 0 || align > 4096) {
      return kiln_bc_error(r, "section alignment %llu is not a power of two up to 4096",
                           (unsigned long long)align);
    }
    while (r->pos % align != 0) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_byte(r, &b));
      if (b != 0xCB) return kiln_bc_error(r, "padding byte 0x%02x is not 0xCB", b);
    }
  }
  if (n > r->end - r->pos) {
    return kiln_bc_error(r, "%s section of %llu bytes runs past the end (%zu left)",
                         section_name(*id), (unsigned long long)n, r->end - r->pos);
  }
  *off = r->pos;
  *len = (size_t)n;
  r->pos += (size_t)n;
  return KILN_STATUS_OK;
}

static kiln_status read_strings(kiln_bc_t *bc) {
  kiln_bc_reader_t r0 = {bc, 0, bc->size, "string"};
  kiln_bc_reader_t r = kiln_bc_sub(&r0, bc->sec_off[0], bc->sec_len[0], "string");
  uint64_t n;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 1, &n));
  bc->num_strings = n;
  bc->strings = bc_alloc(bc, n * sizeof(char *));
  bc->string_lens = bc_alloc(bc, n * sizeof(size_t));
  size_t end = r.end;
  /* Sizes are stored in reverse order; the data blob ends the section. */
  for (uint64_t k = 0; k < n; k++) {
    uint64_t i = n - 1 - k, sz;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &sz));
    if (r.pos > end) {
      return kiln_bc_error(&r, "the size of string %llu runs into the string data",
                           (unsigned long long)i);
    }
    if (sz == 0 || sz > end - r.pos) {
      return kiln_bc_error(&r, "string %llu of %llu bytes does not fit", (unsigned long long)i,
                           (unsigned long long)sz);
    }
    end -= (size_t)sz;
    if (bc->data[end + sz - 1] != 0)
      return kiln_bc_error(&r, "string %llu lacks its NUL", (unsigned long long)i);
    /* Copied: the module outlives the caller's bytes. */
    bc->strings[i] = kiln_arena_strndup(bc->arena, (const char *)bc->data + end, (size_t)sz - 1);
    bc->string_lens[i] = (size_t)sz - 1;
  }
  if (r.pos != end)
    return kiln_bc_error(&r, "%zu stray bytes between string sizes and data", end - r.pos);
  return KILN_STATUS_OK;
}

static kiln_status parse_vhlo_version_text(const char *s, int64_t *out) {
  long a, b, c;
  char tail;
  if (sscanf(s, "%ld.%ld.%ld%c", &a, &b, &c, &tail) != 3 || a < 0 || b < 0 || c < 0 || b > 99 ||
      c > 99 || a > 9999) {
    return KILN_ERR_INVALID("MLIR bytecode: unreadable StableHLO version '%s'", s);
  }
  *out = a * 10000 + b * 100 + c;
  return KILN_STATUS_OK;
}

/* The resource offset section: external groups (skipped) then dialect groups, whose entries
 * (key, size, kind) follow one another in the resource section; a blob entry is its alignment,
 * size, 0xCB padding to that alignment (from the start of the file) and its bytes. */
static kiln_status read_resources(kiln_bc_t *bc) {
  if (!bc->sec_present[KILN_BC_SEC_RESOURCE]) return KILN_STATUS_OK;
  kiln_bc_reader_t r0 = {bc, 0, bc->size, "resource"};
  kiln_bc_reader_t data = kiln_bc_sub(&r0, bc->sec_off[KILN_BC_SEC_RESOURCE],
                                      bc->sec_len[KILN_BC_SEC_RESOURCE], "resource");
  kiln_bc_reader_t r = kiln_bc_sub(&r0, bc->sec_off[KILN_BC_SEC_RESOURCE_OFFSET],
                                   bc->sec_len[KILN_BC_SEC_RESOURCE_OFFSET], "resource offset");
  uint64_t groups;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 2, &groups));
  size_t cap = 0;
  for (uint64_t g = 0; r.pos < r.end; g++) {
    uint64_t key, n;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &key));
    if (g >= groups && key >= bc->num_dialects) {
      return kiln_bc_error(&r, "resource group of dialect %llu (%llu dialects)",
                           (unsigned long long)key, (unsigned long long)bc->num_dialects);
    }
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 3, &n));
    for (uint64_t i = 0; i < n; i++) {
      const char *name;
      uint64_t size;
      uint8_t kind;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_string(&r, &name, NULL));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &size));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_byte(&r, &kind));
      if (kind > 2) return kiln_bc_error(&r, "resource '%s' of unknown kind %u", name, kind);
      if (size > data.end - data.pos) {
        return kiln_bc_error(&data, "resource '%s' of %llu bytes runs past the end (%zu left)",
                             name, (unsigned long long)size, data.end - data.pos);
      }
      kiln_bc_reader_t e = kiln_bc_sub(&data, data.pos, (size_t)size, "resource");
      data.pos += (size_t)size;
      if (g < groups) continue; /* an external provider's: not kiln's */
      if (bc->num_resources == cap) {
        cap = cap ? 2 * cap : 8;
        struct kiln_bc_resource *nv = bc_alloc(bc, cap * sizeof(*nv));
        if (bc->num_resources) memcpy(nv, bc->resources, bc->num_resources * sizeof(*nv));
        bc->resources = nv;
      }
      struct kiln_bc_resource *res = &bc->resources[bc->num_resources++];
      *res = (struct kiln_bc_resource){name, key, kind, 0, 0};
      if (kind != 0 || size == 0) continue;
      uint64_t align, len;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&e, &align));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&e, &len));
      if (align == 0 || (align & (align - 1)) != 0 || align > 4096) {
        return kiln_bc_error(&e, "resource '%s': alignment %llu is not a power of two up to 4096",
                             name, (unsigned long long)align);
      }
      while (e.pos % align != 0) {
        uint8_t b;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_byte(&e, &b));
        if (b != 0xCB) return kiln_bc_error(&e, "padding byte 0x%02x is not 0xCB", b);
      }
      if (len != e.end - e.pos) {
        return kiln_bc_error(&e, "resource '%s' holds %zu bytes, its blob says %llu", name,
                             e.end - e.pos, (unsigned long long)len);
      }
      res->off = e.pos;
      res->len = (size_t)len;
    }
  }
  return KILN_STATUS_OK;
}

static kiln_status read_dialects(kiln_bc_t *bc) {
  kiln_bc_reader_t r0 = {bc, 0, bc->size, "dialect"};
  kiln_bc_reader_t r = kiln_bc_sub(&r0, bc->sec_off[1], bc->sec_len[1], "dialect");
  uint64_t n;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 1, &n));
  bc->num_dialects = n;
  bc->dialects = bc_alloc(bc, n * sizeof(char *));
  bc->dialect_ver_off = bc_alloc(bc, n * sizeof(size_t));
  bc->dialect_ver_len = bc_alloc(bc, n * sizeof(size_t));
  for (uint64_t i = 0; i < n; i++) {
    if (bc->version < 1) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_string(&r, &bc->dialects[i], NULL));
      continue;
    }
    uint64_t v;
    size_t at = r.pos;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &v));
    if ((v >> 1) >= bc->num_strings) {
      r.pos = at;
      return kiln_bc_error(&r, "dialect name index %llu out of range",
                           (unsigned long long)(v >> 1));
    }
    bc->dialects[i] = bc->strings[v >> 1];
    if (v & 1) {
      unsigned id;
      KILN_RETURN_IF_ERROR_PLAIN(
          read_section(&r, &id, &bc->dialect_ver_off[i], &bc->dialect_ver_len[i]));
      if (id != KILN_BC_SEC_DIALECT_VERSIONS)
        return kiln_bc_error(&r, "expected a dialect version section, got %s", section_name(id));
    }
  }
  if (bc->version >= 4) {
    uint64_t num_ops;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &num_ops));
  }
  size_t cap = 0;
  while (r.pos < r.end) {
    uint64_t d, count;
    size_t at = r.pos;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &d));
    if (d >= bc->num_dialects) {
      r.pos = at;
      return kiln_bc_error(&r, "dialect index %llu out of range (%llu dialects)",
                           (unsigned long long)d, (unsigned long long)bc->num_dialects);
    }
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 1, &count));
    for (uint64_t k = 0; k < count; k++) {
      if (bc->num_opnames == cap) {
        size_t ncap = cap ? cap * 2 : 64;
        bc->opnames = kiln_arena_realloc(bc->arena, bc->opnames, cap * sizeof(*bc->opnames),
                                         ncap * sizeof(*bc->opnames));
        cap = ncap;
      }
      kiln_bc_opname_t *o = &bc->opnames[bc->num_opnames++];
      const char *name;
      o->dialect = (uint32_t)d;
      o->registered = -1;
      if (bc->version >= 5) {
        uint64_t v;
        at = r.pos;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &v));
        if ((v >> 1) >= bc->num_strings) {
          r.pos = at;
          return kiln_bc_error(&r, "op name index %llu out of range", (unsigned long long)(v >> 1));
        }
        name = bc->strings[v >> 1];
        o->registered = (int)(v & 1);
      } else {
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_string(&r, &name, NULL));
      }
      o->name = kiln_bc_dotted(bc, bc->dialects[d], name);
    }
  }
  /* The VHLO version: the dialect's version entry (three varints), else the producer. */
  for (uint64_t i = 0; i < n; i++) {
    if (strcmp(bc->dialects[i], "vhlo") != 0) continue;
    if (bc->dialect_ver_len[i] > 0) {
      kiln_bc_reader_t v =
          kiln_bc_sub(&r, bc->dialect_ver_off[i], bc->dialect_ver_len[i], "dialect version");
      uint64_t a, b, c;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&v, &a));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&v, &b));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&v, &c));
      if (a > 9999 || b > 99 || c > 99)
        return kiln_bc_error(&v, "VHLO version %llu.%llu.%llu is out of range",
                             (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
      bc->vhlo_version = (int64_t)(a * 10000 + b * 100 + c);
    } else if (kiln_str_starts_with(bc->producer, "StableHLO_v")) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_vhlo_version_text(bc->producer + 11, &bc->vhlo_version));
    }
  }
  return KILN_STATUS_OK;
}

static kiln_status read_attr_type_offsets(kiln_bc_t *bc) {
  kiln_bc_reader_t r0 = {bc, 0, bc->size, ""};
  kiln_bc_reader_t r = kiln_bc_sub(&r0, bc->sec_off[3], bc->sec_len[3], "attribute/type offset");
  uint64_t na, nt;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 0, &na));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 0, &nt));
  /* Every entry takes at least one offset byte. */
  if (na > r.end - r.pos || nt > r.end - r.pos - na)
    return kiln_bc_error(&r, "%llu attributes and %llu types do not fit", (unsigned long long)na,
                         (unsigned long long)nt);
  bc->num_attrs = na;
  bc->num_types = nt;
  bc->attrs = bc_alloc(bc, na * sizeof(kiln_bc_entry_t));
  bc->types = bc_alloc(bc, nt * sizeof(kiln_bc_entry_t));
  size_t cur = bc->sec_off[2], end = bc->sec_off[2] + bc->sec_len[2];
  for (int pass = 0; pass < 2; pass++) {
    kiln_bc_entry_t *e = pass == 0 ? bc->attrs : bc->types;
    uint64_t total = pass == 0 ? na : nt, done = 0;
    while (done < total) {
      uint64_t d, count;
      size_t at = r.pos;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &d));
      if (d >= bc->num_dialects) {
        r.pos = at;
        return kiln_bc_error(&r, "dialect index %llu out of range", (unsigned long long)d);
      }
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &count));
      if (count > total - done)
        return kiln_bc_error(&r, "group of %llu entries exceeds the %llu declared",
                             (unsigned long long)count, (unsigned long long)total);
      for (uint64_t k = 0; k < count; k++, done++) {
        uint64_t v;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &v));
        uint64_t sz = v >> 1;
        if (sz > end - cur)
          return kiln_bc_error(&r, "entry of %llu bytes runs past the attribute/type section",
                               (unsigned long long)sz);
        e[done].dialect = (uint32_t)d;
        e[done].custom = v & 1;
        e[done].off = cur;
        e[done].len = (size_t)sz;
        cur += (size_t)sz;
      }
    }
  }
  if (r.pos != r.end) return kiln_bc_error(&r, "trailing bytes after the offsets");
  return KILN_STATUS_OK;
}

static kiln_status read_properties(kiln_bc_t *bc) {
  if (!bc->sec_present[KILN_BC_SEC_PROPERTIES] || bc->sec_len[KILN_BC_SEC_PROPERTIES] == 0)
    return KILN_STATUS_OK;
  kiln_bc_reader_t r0 = {bc, 0, bc->size, ""};
  kiln_bc_reader_t r = kiln_bc_sub(&r0, bc->sec_off[8], bc->sec_len[8], "properties");
  uint64_t n;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(&r, 1, &n));
  bc->num_props = n;
  bc->prop_off = bc_alloc(bc, n * sizeof(size_t));
  for (uint64_t i = 0; i < n; i++) {
    uint64_t sz;
    const uint8_t *p;
    bc->prop_off[i] = r.pos;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &sz));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_bytes(&r, (size_t)sz, &p));
  }
  if (r.pos != r.end)
    return kiln_bc_error(&r, "trailing bytes after %llu entries", (unsigned long long)n);
  return KILN_STATUS_OK;
}

/* ---- IR ---- */

/* Values are numbered from the start of the nearest isolated-from-above region: a scope is
 * where its numbering starts on one value stack shared by the whole read (bc->vals). */
typedef struct value_scope {
  size_t base;
} value_scope_t;

static void scope_reserve(kiln_bc_t *bc, size_t n) {
  if (n == 0) return;
  if (bc->nvals + n > bc->capvals) {
    size_t ncap = bc->capvals ? bc->capvals : 256;
    while (ncap < bc->nvals + n) ncap *= 2;
    bc->vals = kiln_realloc(bc->vals, ncap * sizeof(*bc->vals));
    bc->capvals = ncap;
  }
  memset(bc->vals + bc->nvals, 0, n * sizeof(*bc->vals));
  bc->nvals += n;
}

typedef struct region_state {
  size_t next_value, end_value; /* slots of this region in the scope */
  bool has_values;              /* the region declared values (else results are not numbered) */
} region_state_t;

static kiln_status define_value(kiln_bc_reader_t *r, region_state_t *rs, kiln_mlir_value_t *v) {
  if (rs->next_value >= rs->end_value)
    return kiln_bc_error(r, "more values defined than the region declared");
  r->bc->vals[rs->next_value++] = v;
  return KILN_STATUS_OK;
}

static kiln_status read_region(kiln_bc_reader_t *r, value_scope_t *s, kiln_mlir_region_t *region,
                               int depth);

static kiln_status skip_use_list(kiln_bc_reader_t *r, uint64_t range) {
  uint64_t num = 1;
  if (range > 1) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &num));
  for (uint64_t i = 0; i < num; i++) {
    uint64_t idx, enc;
    if (range > 1) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &idx));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &enc));
    uint64_t n = enc >> 1;
    if (n > r->end - r->pos)
      return kiln_bc_error(r, "use-list of %llu entries does not fit", (unsigned long long)n);
    for (uint64_t k = 0; k < n; k++) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &idx));
  }
  return KILN_STATUS_OK;
}

static kiln_status add_named_attrs(kiln_bc_t *bc, kiln_mlir_op_t *op,
                                   const kiln_mlir_named_attr_t *a, int32_t n) {
  if (n == 0) return KILN_STATUS_OK;
  kiln_mlir_named_attr_t *na = bc_alloc(bc, (size_t)(op->num_attrs + n) * sizeof(*na));
  if (op->num_attrs) memcpy(na, op->attrs, (size_t)op->num_attrs * sizeof(*na));
  memcpy(na + op->num_attrs, a, (size_t)n * sizeof(*na));
  op->attrs = na;
  op->num_attrs += n;
  return KILN_STATUS_OK;
}

/* The properties of a Shardy op (JAX puts an sdy.mesh at the top of every module it sends;
 * sharding hints are sdy ops too): ODS writes its inherent attributes sorted by name, one
 * attribute index each. kiln reads sdy.mesh's two — `mesh` (textual: Shardy's attributes have
 * no bytecode encoding, so it arrives as "#sdy.mesh<...>", the form the text reader keeps) and
 * `sym_name` — told apart by kind, and skips the others' (on one device a sharding changes
 * nothing; an sdy op in a function is refused by the converter, naming it). An attribute that
 * does not resolve is left out, and the module reads on. Returns how many it put in `named`. */
static int32_t read_sdy_properties(kiln_bc_reader_t *p, const kiln_mlir_op_t *op,
                                   kiln_mlir_named_attr_t *named) {
  int32_t n = 0;
  while (strcmp(op->name, "sdy.mesh") == 0 && p->pos < p->end && n < 2) {
    uint64_t idx;
    const kiln_mlir_attr_t *a = NULL;
    kiln_status s = kiln_bc_varint(p, &idx);
    if (!s) s = kiln_bc_attr(p->bc, idx, &a);
    if (s) {
      kiln_status_free(s);
      break;
    }
    if (a->kind == KILN_MLIR_ATTR_STRING) {
      named[n].name = "sym_name";
      named[n++].value = a;
    } else if (a->kind == KILN_MLIR_ATTR_OTHER && a->str && !strncmp(a->str, "#sdy.mesh<", 10)) {
      named[n].name = "mesh";
      named[n++].value = a;
    }
  }
  p->pos = p->end;
  return n;
}

/* The properties of a registered op: its inherent attributes in declaration order, each an
 * attribute index (optional ones with a presence flag). */
static kiln_status read_op_properties(kiln_bc_reader_t *r, kiln_bc_opname_t *on,
                                      kiln_mlir_op_t *op) {
  kiln_bc_t *bc = r->bc;
  uint64_t idx;
  size_t at = r->pos;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &idx));
  if (idx >= bc->num_props) {
    r->pos = at;
    return kiln_bc_error(r, "properties index %llu out of range (%llu entries) for %s",
                         (unsigned long long)idx, (unsigned long long)bc->num_props, op->name);
  }
  kiln_bc_reader_t p = kiln_bc_sub(
      r, bc->prop_off[idx], bc->sec_off[8] + bc->sec_len[8] - bc->prop_off[idx], "properties");
  uint64_t sz;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&p, &sz));
  p.end = p.pos + (size_t)sz; /* checked when the table was read */
  kiln_mlir_named_attr_t named[32];
  int32_t n = 0;
  if (strncmp(op->name, "vhlo.", 5) == 0) {
    if (!on->props_split) {
      const char *names = kiln_bc_vhlo_op_attrs(op->name + 5, NULL, NULL);
      if (names == NULL) return kiln_bc_error(r, "unknown VHLO op %s", op->name);
      const char **list = bc_alloc(bc, 32 * sizeof(char *));
      int32_t k = 0;
      for (const char *s = names; *s && k < 32;) {
        const char *e = strchr(s, ' ');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        list[k++] = kiln_arena_strndup(bc->arena, s, len);
        s = e ? e + 1 : s + len;
      }
      on->props = list;
      on->num_props = k;
      on->props_split = true;
    }
    for (n = 0; n < on->num_props; n++) {
      named[n].name = on->props[n];
      KILN_RETURN_IF_ERROR(kiln_bc_read_attr(&p, &named[n].value), "property '%s' of %s",
                           named[n].name, op->name);
    }
  } else if (strcmp(op->name, "builtin.module") == 0) {
    static const char *const kModule[] = {"sym_name", "sym_visibility"};
    for (int i = 0; i < 2; i++) {
      uint64_t v;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&p, &v));
      if (!(v & 1)) continue;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_attr(bc, v >> 1, &named[n].value));
      named[n++].name = kModule[i];
    }
  } else if (strncmp(op->name, "sdy.", 4) == 0) {
    n = read_sdy_properties(&p, op, named);
  } else {
    return kiln_bc_error(r, "op %s has properties kiln cannot decode (not a VHLO or builtin op)",
                         op->name);
  }
  if (p.pos != p.end)
    return kiln_bc_error(&p, "%zu unread bytes in the properties of %s", p.end - p.pos, op->name);
  return add_named_attrs(bc, op, named, n);
}

static kiln_status attrs_from_dict(kiln_bc_reader_t *r, kiln_mlir_op_t *op,
                                   const kiln_mlir_attr_t *d) {
  if (d->kind != KILN_MLIR_ATTR_DICTIONARY)
    return kiln_bc_error(r, "attributes of %s are not a dictionary", op->name);
  return add_named_attrs(r->bc, op, d->fields, d->num_elements);
}

static const char *location_text(kiln_bc_t *bc, const kiln_mlir_attr_t *loc) {
  if (loc == NULL || loc->kind != KILN_MLIR_ATTR_OTHER || loc->str == NULL) return NULL;
  size_t slot = ((uintptr_t)loc >> 4) & 63;
  if (bc->loc_from[slot] == loc) return bc->loc_text[slot];
  const char *text = NULL;
  if (strcmp(loc->str, "loc(unknown)") != 0 && kiln_str_starts_with(loc->str, "loc(") &&
      kiln_str_ends_with(loc->str, ")")) {
    text = kiln_arena_strndup(bc->arena, loc->str + 4, strlen(loc->str) - 5);
  }
  bc->loc_from[slot] = loc;
  bc->loc_text[slot] = text;
  return text;
}

static kiln_status read_op(kiln_bc_reader_t *r, value_scope_t *s, region_state_t *rs,
                           kiln_mlir_op_t *op, int depth) {
  kiln_bc_t *bc = r->bc;
  uint64_t v;
  size_t at = r->pos;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &v));
  if (v >= bc->num_opnames) {
    r->pos = at;
    return kiln_bc_error(r, "op name index %llu out of range (%llu names)", (unsigned long long)v,
                         (unsigned long long)bc->num_opnames);
  }
  kiln_bc_opname_t *on = &bc->opnames[v];
  op->name = on->name;
  uint8_t mask;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_byte(r, &mask));
  if (mask & 0x80) return kiln_bc_error(r, "unknown op encoding bits 0x%02x", mask);
  const kiln_mlir_attr_t *loc;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &loc));
  op->location = location_text(bc, loc);
  if (mask & 0x01) {
    const kiln_mlir_attr_t *d;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &d));
    KILN_RETURN_IF_ERROR_PLAIN(attrs_from_dict(r, op, d));
  }
  if (mask & 0x40) {
    if (on->registered < 0)
      return kiln_bc_error(r, "properties in bytecode version %llu",
                           (unsigned long long)bc->version);
    if (on->registered) {
      KILN_RETURN_IF_ERROR_PLAIN(read_op_properties(r, on, op));
    } else {
      const kiln_mlir_attr_t *d;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &d));
      KILN_RETURN_IF_ERROR_PLAIN(attrs_from_dict(r, op, d));
    }
  }
  if (mask & 0x02) {
    uint64_t n;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &n));
    op->num_results = (int32_t)n;
    op->results = bc_alloc(bc, n * sizeof(kiln_mlir_value_t));
    for (uint64_t i = 0; i < n; i++) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &op->results[i].type));
      op->results[i].def = op;
      op->results[i].index = (int32_t)i;
    }
  }
  if (mask & 0x04) {
    uint64_t n;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &n));
    op->num_operands = (int32_t)n;
    op->operands = bc_alloc(bc, n * sizeof(kiln_mlir_value_t *));
    for (uint64_t i = 0; i < n; i++) {
      uint64_t id;
      at = r->pos;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &id));
      size_t slot = s->base + (size_t)id;
      if (id >= bc->nvals - s->base || bc->vals[slot] == NULL) {
        r->pos = at;
        return kiln_bc_error(r, "operand %llu of %s: value %llu is %s", (unsigned long long)i,
                             op->name, (unsigned long long)id,
                             id >= bc->nvals - s->base
                                 ? "out of range"
                                 : "not defined yet (forward references are not supported)");
      }
      op->operands[i] = bc->vals[slot];
    }
  }
  if (mask & 0x08) {
    uint64_t n, b;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &n));
    if (n > 0)
      return kiln_bc_error(r, "%s has block successors, which StableHLO never uses", op->name);
    (void)b;
  }
  if ((mask & 0x20) && bc->version >= 3)
    KILN_RETURN_IF_ERROR_PLAIN(skip_use_list(r, (uint64_t)op->num_results));
  uint64_t nregions = 0;
  bool isolated = false;
  if (mask & 0x10) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &nregions));
    isolated = nregions & 1;
    nregions >>= 1;
    if (nregions > r->end - r->pos)
      return kiln_bc_error(r, "%llu regions do not fit", (unsigned long long)nregions);
  }
  /* Results are defined before the regions are read (as MLIR's reader does). */
  if (rs->has_values) {
    for (int32_t i = 0; i < op->num_results; i++)
      KILN_RETURN_IF_ERROR_PLAIN(define_value(r, rs, &op->results[i]));
  }
  if (nregions == 0) return KILN_STATUS_OK;
  if (depth >= KILN_BC_MAX_DEPTH)
    return kiln_bc_error(r, "regions nested deeper than %d", KILN_BC_MAX_DEPTH);
  op->num_regions = (int32_t)nregions;
  op->regions = bc_alloc(bc, nregions * sizeof(kiln_mlir_region_t));
  if (isolated) {
    value_scope_t inner = {bc->nvals};
    kiln_bc_reader_t sub = *r;
    if (bc->version >= 2) {
      unsigned id;
      size_t off, len;
      KILN_RETURN_IF_ERROR_PLAIN(read_section(r, &id, &off, &len));
      if (id != KILN_BC_SEC_IR)
        return kiln_bc_error(r, "expected an IR section for the regions of %s, got %s", op->name,
                             section_name(id));
      sub = kiln_bc_sub(r, off, len, "IR");
    }
    for (uint64_t i = 0; i < nregions; i++)
      KILN_RETURN_IF_ERROR_PLAIN(read_region(&sub, &inner, &op->regions[i], depth + 1));
    if (bc->version < 2) r->pos = sub.pos;
    return KILN_STATUS_OK;
  }
  for (uint64_t i = 0; i < nregions; i++)
    KILN_RETURN_IF_ERROR_PLAIN(read_region(r, s, &op->regions[i], depth + 1));
  return KILN_STATUS_OK;
}

static kiln_status read_block(kiln_bc_reader_t *r, value_scope_t *s, region_state_t *rs,
                              kiln_mlir_block_t *blk, int depth) {
  kiln_bc_t *bc = r->bc;
  uint64_t v;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &v));
  uint64_t nops = v >> 1;
  bool has_args = v & 1;
  if (nops > r->end - r->pos)
    return kiln_bc_error(r, "block of %llu ops does not fit", (unsigned long long)nops);
  if (has_args) {
    uint64_t nargs;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &nargs));
    blk->num_args = (int32_t)nargs;
    blk->args = bc_alloc(bc, nargs * sizeof(kiln_mlir_value_t));
    for (uint64_t i = 0; i < nargs; i++) {
      kiln_mlir_value_t *a = &blk->args[i];
      a->block = blk;
      a->index = (int32_t)i;
      if (bc->version >= 4) {
        uint64_t t;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &t));
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_type(bc, t >> 1, &a->type));
        if (t & 1) {
          const kiln_mlir_attr_t *loc;
          KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &loc));
        }
      } else {
        const kiln_mlir_attr_t *loc;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &a->type));
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &loc));
      }
      KILN_RETURN_IF_ERROR_PLAIN(define_value(r, rs, a));
    }
    if (bc->version >= 3) {
      uint8_t has_orders;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_byte(r, &has_orders));
      if (has_orders) KILN_RETURN_IF_ERROR_PLAIN(skip_use_list(r, nargs));
    }
  }
  blk->num_ops = (int32_t)nops;
  blk->ops = bc_alloc(bc, nops * sizeof(kiln_mlir_op_t *));
  for (uint64_t i = 0; i < nops; i++) {
    blk->ops[i] = bc_alloc(bc, sizeof(kiln_mlir_op_t));
    KILN_RETURN_IF_ERROR_PLAIN(read_op(r, s, rs, blk->ops[i], depth));
  }
  return KILN_STATUS_OK;
}

static kiln_status read_region(kiln_bc_reader_t *r, value_scope_t *s, kiln_mlir_region_t *region,
                               int depth) {
  uint64_t nblocks, nvalues;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &nblocks));
  if (nblocks == 0) return KILN_STATUS_OK;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &nvalues));
  /* Each value is an argument (one byte at least) or a result (of an op of 3 bytes at least). */
  if (nvalues > r->end - r->pos)
    return kiln_bc_error(r, "region declares %llu values, more than the bytes left",
                         (unsigned long long)nvalues);
  region->num_blocks = (int32_t)nblocks;
  region->blocks = bc_alloc(r->bc, nblocks * sizeof(kiln_mlir_block_t));
  size_t base = r->bc->nvals;
  scope_reserve(r->bc, (size_t)nvalues);
  region_state_t rs = {base, base + (size_t)nvalues, nvalues > 0};
  for (uint64_t b = 0; b < nblocks; b++)
    KILN_RETURN_IF_ERROR_PLAIN(read_block(r, s, &rs, &region->blocks[b], depth));
  r->bc->nvals = base;
  return KILN_STATUS_OK;
}

static kiln_status read_ir(kiln_bc_t *bc) {
  kiln_bc_reader_t r0 = {bc, 0, bc->size, ""};
  kiln_bc_reader_t r = kiln_bc_sub(&r0, bc->sec_off[4], bc->sec_len[4], "IR");
  value_scope_t scope = {0};
  region_state_t rs = {0, 0, false};
  kiln_mlir_block_t top = {0};
  KILN_RETURN_IF_ERROR_PLAIN(read_block(&r, &scope, &rs, &top, 0));
  if (r.pos != r.end)
    return kiln_bc_error(&r, "%zu trailing bytes after the top-level block", r.end - r.pos);
  if (top.num_ops != 1 || strcmp(top.ops[0]->name, "builtin.module") != 0) {
    return kiln_bc_error(&r, "expected one top-level builtin.module, got %d ops%s%s", top.num_ops,
                         top.num_ops ? ", the first " : "", top.num_ops ? top.ops[0]->name : "");
  }
  kiln_mlir_op_t *mod = top.ops[0];
  kiln_mlir_module_t *m = bc->m;
  for (int32_t i = 0; i < mod->num_attrs; i++) {
    if (strcmp(mod->attrs[i].name, "sym_name") == 0 &&
        mod->attrs[i].value->kind == KILN_MLIR_ATTR_STRING) {
      m->name = mod->attrs[i].value->str;
    }
  }
  int32_t n = 0;
  m->attrs = bc_alloc(bc, (size_t)mod->num_attrs * sizeof(kiln_mlir_named_attr_t));
  for (int32_t i = 0; i < mod->num_attrs; i++) {
    if (strcmp(mod->attrs[i].name, "sym_name") == 0) continue;
    m->attrs[n++] = mod->attrs[i];
  }
  m->num_attrs = n;
  if (mod->num_regions != 1 || mod->regions[0].num_blocks > 1)
    return kiln_bc_error(&r, "builtin.module must have one region of at most one block");
  if (mod->regions[0].num_blocks == 1) m->body = mod->regions[0].blocks[0];
  return KILN_STATUS_OK;
}

bool kiln_mlir_bytes_are_bytecode(const void *bytes, size_t n) {
  return bytes != NULL && n >= 4 && memcmp(bytes, "ML\xefR", 4) == 0;
}

static kiln_status read_all(kiln_bc_t *bc) {
  kiln_bc_reader_t r = {bc, 0, bc->size, "header"};
  if (!kiln_mlir_bytes_are_bytecode(bc->data, bc->size))
    return kiln_bc_error(&r, "not MLIR bytecode (no 'ML\\xefR' magic)");
  r.pos = 4;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(&r, &bc->version));
  if (bc->version > KILN_BC_MAX_VERSION) {
    return kiln_bc_error(&r, "bytecode version %llu is newer than the newest kiln reads (%d)",
                         (unsigned long long)bc->version, KILN_BC_MAX_VERSION);
  }
  const uint8_t *nul = memchr(bc->data + r.pos, 0, r.end - r.pos);
  if (nul == NULL) return kiln_bc_error(&r, "producer string lacks its NUL");
  bc->producer = (const char *)bc->data + r.pos;
  r.pos = (size_t)(nul - bc->data) + 1;
  r.what = "section table";
  while (r.pos < r.end) {
    unsigned id;
    size_t off, len, at = r.pos;
    KILN_RETURN_IF_ERROR_PLAIN(read_section(&r, &id, &off, &len));
    if (bc->sec_present[id]) {
      r.pos = at;
      return kiln_bc_error(&r, "duplicate %s section", section_name(id));
    }
    bc->sec_present[id] = true;
    bc->sec_off[id] = off;
    bc->sec_len[id] = len;
  }
  for (unsigned id = 0; id <= KILN_BC_SEC_IR; id++) {
    if (!bc->sec_present[id]) return kiln_bc_error(&r, "missing %s section", section_name(id));
  }
  if (bc->version >= 5 && !bc->sec_present[KILN_BC_SEC_PROPERTIES])
    return kiln_bc_error(&r, "missing properties section");
  if (bc->sec_present[KILN_BC_SEC_RESOURCE] != bc->sec_present[KILN_BC_SEC_RESOURCE_OFFSET]) {
    return kiln_bc_error(&r, "resource and resource offset sections must come together");
  }
  KILN_RETURN_IF_ERROR_PLAIN(read_strings(bc));
  KILN_RETURN_IF_ERROR_PLAIN(read_properties(bc));
  KILN_RETURN_IF_ERROR_PLAIN(read_dialects(bc));
  KILN_RETURN_IF_ERROR_PLAIN(read_resources(bc));
  bool has_vhlo = false;
  for (uint64_t i = 0; i < bc->num_dialects; i++) has_vhlo |= strcmp(bc->dialects[i], "vhlo") == 0;
  if (has_vhlo) {
    char have[32], newest[32];
    snprintf(have, sizeof(have), "%lld.%lld.%lld", (long long)(bc->vhlo_version / 10000),
             (long long)(bc->vhlo_version / 100 % 100), (long long)(bc->vhlo_version % 100));
    snprintf(newest, sizeof(newest), "%d.%d.%d", KILN_VHLO_CURRENT / 10000,
             KILN_VHLO_CURRENT / 100 % 100, KILN_VHLO_CURRENT % 100);
    if (bc->vhlo_version > KILN_VHLO_CURRENT) {
      return KILN_ERR_INVALID(
          "MLIR bytecode: VHLO version %s is newer than the newest kiln reads (%s); serialize the "
          "program for StableHLO %s or older (producer '%s')",
          have, newest, newest, bc->producer);
    }
    if (bc->vhlo_version != 0 && bc->vhlo_version < KILN_VHLO_MINIMUM) {
      return KILN_ERR_INVALID(
          "MLIR bytecode: VHLO version %s is older than the oldest kiln reads (0.9.0)", have);
    }
  }
  KILN_RETURN_IF_ERROR_PLAIN(read_attr_type_offsets(bc));
  KILN_RETURN_IF_ERROR_PLAIN(read_ir(bc));
  return kiln_bc_upgrade(bc);
}

static kiln_status read_bytecode(const void *bytes, size_t n, kiln_mlir_module_t **out) {
  if (out == NULL) return KILN_ERR_INVALID("kiln_mlir_read_bytecode: out is NULL");
  *out = NULL;
  if (bytes == NULL && n > 0) return KILN_ERR_INVALID("kiln_mlir_read_bytecode: bytes is NULL");
  kiln_bc_t bc = {0};
  bc.m = kiln_mlir_module_create();
  bc.arena = &bc.m->arena;
  bc.data = bytes;
  bc.size = n;
  kiln_status st = read_all(&bc);
  kiln_free(bc.vals);
  kiln_free(bc.darr);
  if (!kiln_status_is_ok(st)) {
    kiln_mlir_module_destroy(bc.m);
    return st;
  }
  *out = bc.m;
  return KILN_STATUS_OK;
}

/* Every allocation may fail: an out-of-memory scope (base/alloc.h) around the whole read. */
kiln_status kiln_mlir_read_bytecode(const void *bytes, size_t n, kiln_mlir_module_t **out) {
  KILN_OOM_SCOPED_RETURN(read_bytecode(bytes, n, out), if (out) *out = NULL,
                         "reading MLIR bytecode");
}
