/* The generic MLIR IR: module lifetime, attribute lookup and the generic printer. */
#include "compiler/frontend/mlir_ir.h"

#include <stdio.h>
#include <string.h>

kiln_mlir_module_t *kiln_mlir_module_create(void) {
  kiln_mlir_module_t *m = kiln_calloc(1, sizeof(*m));
  kiln_arena_init(&m->arena);
  return m;
}

void kiln_mlir_module_destroy(kiln_mlir_module_t *m) {
  if (m == NULL) return;
  kiln_arena_destroy(&m->arena);
  kiln_free(m);
}

static const kiln_mlir_attr_t *find_named(const kiln_mlir_named_attr_t *attrs, int32_t n,
                                          const char *name) {
  for (int32_t i = 0; i < n; i++) {
    if (attrs[i].name != NULL && strcmp(attrs[i].name, name) == 0) return attrs[i].value;
  }
  return NULL;
}

const kiln_mlir_attr_t *kiln_mlir_op_attr(const kiln_mlir_op_t *op, const char *name) {
  if (op == NULL || name == NULL) return NULL;
  return find_named(op->attrs, op->num_attrs, name);
}

const kiln_mlir_attr_t *kiln_mlir_attr_field(const kiln_mlir_attr_t *a, const char *name) {
  if (a == NULL || name == NULL) return NULL;
  if (a->kind != KILN_MLIR_ATTR_DICTIONARY && a->kind != KILN_MLIR_ATTR_STRUCT) return NULL;
  return find_named(a->fields, a->num_elements, name);
}

const kiln_mlir_op_t *kiln_mlir_module_func(const kiln_mlir_module_t *m, const char *name) {
  if (m == NULL || name == NULL) return NULL;
  for (int32_t i = 0; i < m->body.num_ops; i++) {
    const kiln_mlir_op_t *op = m->body.ops[i];
    if (strcmp(op->name, "func.func") != 0) continue;
    const kiln_mlir_attr_t *sym = kiln_mlir_op_attr(op, "sym_name");
    if (sym != NULL && sym->kind == KILN_MLIR_ATTR_STRING && sym->str != NULL &&
        strlen(sym->str) == sym->str_len && strcmp(sym->str, name) == 0) {
      return op;
    }
  }
  return NULL;
}

/* ---- the generic printer ---- */

const char *kiln_mlir_float_name(kiln_elem_type_t e); /* mlir_types.c */

static bool is_bare(const char *s) {
  if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (const char *p = s; *p; p++) {
    char c = *p;
    if (!(c == '_' || c == '$' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

static void print_string(kiln_strbuf_t *b, const char *s, size_t n) {
  kiln_strbuf_append_char(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      kiln_strbuf_append_char(b, '\\');
      kiln_strbuf_append_char(b, (char)c);
    } else if (c == '\n') {
      kiln_strbuf_append(b, "\\n");
    } else if (c == '\t') {
      kiln_strbuf_append(b, "\\t");
    } else if (c < 32 || c >= 127) {
      kiln_strbuf_printf(b, "\\%02X", c);
    } else {
      kiln_strbuf_append_char(b, (char)c);
    }
  }
  kiln_strbuf_append_char(b, '"');
}

void kiln_mlir_type_print(kiln_strbuf_t *b, const kiln_mlir_type_t *t) {
  if (t == NULL) {
    kiln_strbuf_append(b, "<<null type>>");
    return;
  }
  switch (t->kind) {
    case KILN_MLIR_TYPE_INTEGER:
      kiln_strbuf_printf(b, "%s%d",
                         t->signedness == KILN_MLIR_SIGNED     ? "si"
                         : t->signedness == KILN_MLIR_UNSIGNED ? "ui"
                                                               : "i",
                         (int)t->width);
      break;
    case KILN_MLIR_TYPE_FLOAT: {
      const char *n = kiln_mlir_float_name(t->elem);
      kiln_strbuf_append(b, n ? n : kiln_elem_type_name(t->elem));
      break;
    }
    case KILN_MLIR_TYPE_INDEX:
      kiln_strbuf_append(b, "index");
      break;
    case KILN_MLIR_TYPE_NONE:
      kiln_strbuf_append(b, "none");
      break;
    case KILN_MLIR_TYPE_TOKEN:
      kiln_strbuf_append(b, "!stablehlo.token");
      break;
    case KILN_MLIR_TYPE_COMPLEX:
      kiln_strbuf_append(b, "complex<");
      kiln_mlir_type_print(b, t->element);
      kiln_strbuf_append_char(b, '>');
      break;
    case KILN_MLIR_TYPE_TENSOR:
      kiln_strbuf_append(b, "tensor<");
      if (t->unranked) {
        kiln_strbuf_append(b, "*x");
      } else {
        for (int32_t i = 0; i < t->rank; i++) {
          if (t->dims[i] == KILN_MLIR_DYNAMIC) {
            kiln_strbuf_append(b, "?x");
          } else {
            kiln_strbuf_printf(b, "%lldx", (long long)t->dims[i]);
          }
        }
      }
      kiln_mlir_type_print(b, t->element);
      if (t->encoding) {
        kiln_strbuf_append(b, ", ");
        kiln_mlir_attr_print(b, t->encoding);
      }
      kiln_strbuf_append_char(b, '>');
      break;
    case KILN_MLIR_TYPE_TUPLE:
      kiln_strbuf_append(b, "tuple<");
      for (int32_t i = 0; i < t->num_types; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        kiln_mlir_type_print(b, t->types[i]);
      }
      kiln_strbuf_append_char(b, '>');
      break;
    case KILN_MLIR_TYPE_FUNCTION:
      kiln_strbuf_append_char(b, '(');
      for (int32_t i = 0; i < t->num_types; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        kiln_mlir_type_print(b, t->types[i]);
      }
      kiln_strbuf_append(b, ") -> ");
      if (t->num_results == 1 && t->results[0]->kind != KILN_MLIR_TYPE_FUNCTION) {
        kiln_mlir_type_print(b, t->results[0]);
      } else {
        kiln_strbuf_append_char(b, '(');
        for (int32_t i = 0; i < t->num_results; i++) {
          if (i) kiln_strbuf_append(b, ", ");
          kiln_mlir_type_print(b, t->results[i]);
        }
        kiln_strbuf_append_char(b, ')');
      }
      break;
    case KILN_MLIR_TYPE_OTHER:
      kiln_strbuf_append(b, t->text ? t->text : "none");
      break;
  }
}

static void print_double(kiln_strbuf_t *b, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.17g", v);
  if (strchr(buf, 'n') || strchr(buf, 'i')) { /* nan / inf (complex parts only) */
    kiln_strbuf_append(b, buf);
    return;
  }
  char *e = strchr(buf, 'e');
  if (strchr(buf, '.') == NULL) {
    if (e) {
      kiln_strbuf_append_n(b, buf, (size_t)(e - buf));
      kiln_strbuf_append(b, ".0");
      kiln_strbuf_append(b, e);
    } else {
      kiln_strbuf_append(b, buf);
      kiln_strbuf_append(b, ".0");
    }
    return;
  }
  kiln_strbuf_append(b, buf);
}

/* One element of a literal in MLIR syntax; non-finite floats as their bits. */
static void print_element(kiln_strbuf_t *b, const kiln_literal_t *l, int64_t i) {
  kiln_elem_type_t e = l->shape->type;
  if (e == KILN_PRED) {
    kiln_strbuf_append(b, kiln_literal_get_s64(l, i) ? "true" : "false");
  } else if (kiln_elem_type_is_unsigned_int(e)) {
    kiln_strbuf_printf(b, "%llu", (unsigned long long)kiln_literal_get_u64(l, i));
  } else if (kiln_elem_type_is_integral(e)) {
    kiln_strbuf_printf(b, "%lld", (long long)kiln_literal_get_s64(l, i));
  } else if (kiln_elem_type_is_complex(e)) {
    double re, im;
    kiln_literal_get_c128(l, i, &re, &im);
    kiln_strbuf_append_char(b, '(');
    print_double(b, re);
    kiln_strbuf_append(b, ", ");
    print_double(b, im);
    kiln_strbuf_append_char(b, ')');
  } else {
    double v = kiln_literal_get_f64(l, i);
    if (v - v != 0) { /* nan or inf */
      size_t w = kiln_elem_type_storage_bytes(e);
      const unsigned char *d = (const unsigned char *)l->data + (size_t)i * w;
      kiln_strbuf_append(b, "0x");
      for (size_t k = w; k > 0; k--) kiln_strbuf_printf(b, "%02X", d[k - 1]);
    } else {
      print_double(b, v);
    }
  }
}

static void print_dense(kiln_strbuf_t *b, const kiln_mlir_attr_t *a) {
  const kiln_literal_t *l = a->literal;
  kiln_strbuf_append(b, "dense<");
  if (l != NULL && l->num_elements > 0) {
    size_t w = kiln_elem_type_storage_bytes(l->shape->type);
    bool splat = true;
    for (int64_t i = 1; i < l->num_elements && splat; i++) {
      splat = memcmp((const char *)l->data + (size_t)i * w, l->data, w) == 0;
    }
    if (splat) {
      print_element(b, l, 0);
    } else if (l->num_elements > 64) {
      kiln_strbuf_append(b, "\"0x");
      const unsigned char *d = l->data;
      for (size_t i = 0; i < w * (size_t)l->num_elements; i++) kiln_strbuf_printf(b, "%02X", d[i]);
      kiln_strbuf_append_char(b, '"');
    } else {
      int32_t rank = l->shape->rank;
      int64_t idx[64] = {0};
      for (int64_t i = 0; i < l->num_elements; i++) {
        int32_t opened = 0; /* dimensions whose index is 0 from the innermost out */
        for (int32_t d = rank - 1; d >= 0 && idx[d] == 0; d--) opened++;
        if (i > 0) kiln_strbuf_append(b, ", ");
        for (int32_t k = 0; k < opened; k++) kiln_strbuf_append_char(b, '[');
        print_element(b, l, i);
        for (int32_t d = rank - 1; d >= 0; d--) {
          if (++idx[d] < l->shape->dims[d]) break;
          idx[d] = 0;
          kiln_strbuf_append_char(b, ']');
        }
      }
    }
  }
  kiln_strbuf_append(b, "> : ");
  kiln_mlir_type_print(b, a->type);
}

static void print_attr_ctx(kiln_strbuf_t *b, const kiln_mlir_attr_t *a, bool in_struct);

static void print_fields(kiln_strbuf_t *b, const kiln_mlir_named_attr_t *f, int32_t n,
                         bool in_struct) {
  for (int32_t i = 0; i < n; i++) {
    if (i) kiln_strbuf_append(b, ", ");
    if (is_bare(f[i].name)) {
      kiln_strbuf_append(b, f[i].name);
    } else {
      print_string(b, f[i].name, strlen(f[i].name));
    }
    if (!in_struct && f[i].value->kind == KILN_MLIR_ATTR_UNIT) continue;
    kiln_strbuf_append(b, " = ");
    print_attr_ctx(b, f[i].value, in_struct);
  }
}

static void print_attr_ctx(kiln_strbuf_t *b, const kiln_mlir_attr_t *a, bool in_struct) {
  if (a == NULL) {
    kiln_strbuf_append(b, "<<null attr>>");
    return;
  }
  switch (a->kind) {
    case KILN_MLIR_ATTR_UNIT:
      kiln_strbuf_append(b, "unit");
      break;
    case KILN_MLIR_ATTR_BOOL:
      kiln_strbuf_append(b, a->b ? "true" : "false");
      break;
    case KILN_MLIR_ATTR_INTEGER:
      if (a->type && a->type->kind == KILN_MLIR_TYPE_INTEGER &&
          a->type->signedness == KILN_MLIR_UNSIGNED) {
        kiln_strbuf_printf(b, "%llu", (unsigned long long)a->i);
      } else if (a->type && a->type->kind == KILN_MLIR_TYPE_INTEGER && a->type->width == 1) {
        kiln_strbuf_append(b, a->i ? "true" : "false");
      } else {
        kiln_strbuf_printf(b, "%lld", (long long)a->i);
      }
      if (!in_struct) {
        kiln_strbuf_append(b, " : ");
        if (a->type) {
          kiln_mlir_type_print(b, a->type);
        } else {
          kiln_strbuf_append(b, "i64");
        }
      }
      break;
    case KILN_MLIR_ATTR_FLOAT:
      if (a->f - a->f != 0 && !in_struct && a->type && a->type->kind == KILN_MLIR_TYPE_FLOAT) {
        kiln_arena_t ar;
        kiln_arena_init(&ar);
        kiln_shape_t *sh = kiln_shape_make_scalar(&ar, a->type->elem);
        kiln_literal_t *l = sh ? kiln_literal_make(&ar, sh) : NULL;
        if (l) {
          kiln_literal_set_f64(l, 0, a->f);
          print_element(b, l, 0);
        }
        kiln_arena_destroy(&ar);
      } else {
        print_double(b, a->f);
      }
      if (!in_struct && a->type) {
        kiln_strbuf_append(b, " : ");
        kiln_mlir_type_print(b, a->type);
      }
      break;
    case KILN_MLIR_ATTR_STRING:
      print_string(b, a->str, a->str_len);
      if (a->type) {
        kiln_strbuf_append(b, " : ");
        kiln_mlir_type_print(b, a->type);
      }
      break;
    case KILN_MLIR_ATTR_TYPE:
      kiln_mlir_type_print(b, a->type);
      break;
    case KILN_MLIR_ATTR_ARRAY:
      kiln_strbuf_append_char(b, '[');
      for (int32_t i = 0; i < a->num_elements; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        print_attr_ctx(b, a->elements[i], false);
      }
      kiln_strbuf_append_char(b, ']');
      break;
    case KILN_MLIR_ATTR_DENSE_ARRAY: {
      bool fl = a->type && a->type->kind == KILN_MLIR_TYPE_FLOAT;
      bool i1 = a->type && a->type->kind == KILN_MLIR_TYPE_INTEGER && a->type->width == 1;
      if (in_struct) {
        kiln_strbuf_append_char(b, '[');
      } else {
        kiln_strbuf_append(b, "array<");
        kiln_mlir_type_print(b, a->type);
        if (a->num_elements) kiln_strbuf_append(b, ": ");
      }
      for (int32_t i = 0; i < a->num_elements; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        if (fl) {
          print_double(b, a->floats[i]);
        } else if (i1 && !in_struct) {
          kiln_strbuf_append(b, a->ints[i] ? "true" : "false");
        } else if (a->ints[i] == KILN_MLIR_DYNAMIC) {
          kiln_strbuf_append_char(b, '?');
        } else {
          kiln_strbuf_printf(b, "%lld", (long long)a->ints[i]);
        }
      }
      kiln_strbuf_append_char(b, in_struct ? ']' : '>');
      break;
    }
    case KILN_MLIR_ATTR_DENSE_ELEMENTS:
      print_dense(b, a);
      break;
    case KILN_MLIR_ATTR_DICTIONARY:
      kiln_strbuf_append_char(b, '{');
      print_fields(b, a->fields, a->num_elements, false);
      kiln_strbuf_append_char(b, '}');
      break;
    case KILN_MLIR_ATTR_SYMBOL_REF: {
      const char *s = a->str;
      kiln_strbuf_append_char(b, '@');
      for (;;) {
        const char *sep = strstr(s, "::");
        size_t n = sep ? (size_t)(sep - s) : strlen(s);
        char *part = kiln_malloc(n + 1);
        memcpy(part, s, n);
        part[n] = 0;
        bool bare = n > 0;
        for (size_t i = 0; i < n && bare; i++) {
          char c = part[i];
          bare = c == '_' || c == '$' || c == '.' || c == '-' || (c >= 'a' && c <= 'z') ||
                 (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        }
        if (bare) {
          kiln_strbuf_append(b, part);
        } else {
          print_string(b, part, n);
        }
        kiln_free(part);
        if (!sep) break;
        kiln_strbuf_append(b, "::@");
        s = sep + 2;
      }
      break;
    }
    case KILN_MLIR_ATTR_ENUM:
      kiln_strbuf_printf(b, "#%s<%s %s>", a->dialect, a->enum_name, a->str);
      break;
    case KILN_MLIR_ATTR_STRUCT:
      kiln_strbuf_printf(b, "#%s<", a->dialect);
      if (strcmp(a->dialect, "stablehlo.conv") == 0) kiln_strbuf_append(b, "raw ");
      print_fields(b, a->fields, a->num_elements, true);
      kiln_strbuf_append_char(b, '>');
      break;
    case KILN_MLIR_ATTR_OTHER:
      kiln_strbuf_append(b, a->str ? a->str : "unit");
      break;
  }
}

void kiln_mlir_attr_print(kiln_strbuf_t *b, const kiln_mlir_attr_t *a) {
  print_attr_ctx(b, a, false);
}

/* Printed names: op results `%N` (`%N#i`), block arguments `%argN`, numbered through the
 * module, found again through a pointer map. */
typedef struct name_map {
  const void **keys;
  int32_t *ids;
  size_t cap, num;
  int32_t next_result, next_arg;
} name_map_t;

static size_t ptr_hash(const void *p, size_t cap) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 7) & (cap - 1);
}

static void map_put(name_map_t *m, const void *k, int32_t id) {
  if ((m->num + 1) * 2 > m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 256;
    const void **nk = kiln_calloc(nc, sizeof(*nk));
    int32_t *ni = kiln_calloc(nc, sizeof(*ni));
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      size_t j = ptr_hash(m->keys[i], nc);
      while (nk[j]) j = (j + 1) & (nc - 1);
      nk[j] = m->keys[i];
      ni[j] = m->ids[i];
    }
    kiln_free(m->keys);
    kiln_free(m->ids);
    m->keys = nk;
    m->ids = ni;
    m->cap = nc;
  }
  size_t j = ptr_hash(k, m->cap);
  while (m->keys[j] && m->keys[j] != k) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) m->num++;
  m->keys[j] = k;
  m->ids[j] = id;
}

static int32_t map_get(const name_map_t *m, const void *k) {
  if (m->cap == 0) return -1;
  size_t j = ptr_hash(k, m->cap);
  while (m->keys[j]) {
    if (m->keys[j] == k) return m->ids[j];
    j = (j + 1) & (m->cap - 1);
  }
  return -1;
}

static void print_value(kiln_strbuf_t *b, name_map_t *m, const kiln_mlir_value_t *v) {
  if (v->def) {
    int32_t id = map_get(m, v->def);
    if (id < 0) {
      kiln_strbuf_append(b, "%<<unknown>>");
    } else if (v->def->num_results == 1) {
      kiln_strbuf_printf(b, "%%%d", (int)id);
    } else {
      kiln_strbuf_printf(b, "%%%d#%d", (int)id, (int)v->index);
    }
    return;
  }
  int32_t id = map_get(m, v);
  if (id < 0) {
    kiln_strbuf_append(b, "%<<unknown>>");
  } else {
    kiln_strbuf_printf(b, "%%arg%d", (int)id);
  }
}

static void indent(kiln_strbuf_t *b, int n) {
  for (int i = 0; i < n; i++) kiln_strbuf_append(b, "  ");
}

static void print_op(kiln_strbuf_t *b, name_map_t *m, const kiln_mlir_op_t *op, int depth);

static void print_region(kiln_strbuf_t *b, name_map_t *m, const kiln_mlir_region_t *r, int depth) {
  kiln_strbuf_append(b, "{\n");
  for (int32_t k = 0; k < r->num_blocks; k++) {
    const kiln_mlir_block_t *blk = &r->blocks[k];
    indent(b, depth);
    kiln_strbuf_printf(b, "^bb%d", (int)k);
    if (blk->num_args) {
      kiln_strbuf_append_char(b, '(');
      for (int32_t i = 0; i < blk->num_args; i++) {
        int32_t id = m->next_arg++;
        map_put(m, &blk->args[i], id);
        if (i) kiln_strbuf_append(b, ", ");
        kiln_strbuf_printf(b, "%%arg%d: ", (int)id);
        kiln_mlir_type_print(b, blk->args[i].type);
      }
      kiln_strbuf_append_char(b, ')');
    }
    kiln_strbuf_append(b, ":\n");
    for (int32_t i = 0; i < blk->num_ops; i++) print_op(b, m, blk->ops[i], depth + 1);
  }
  indent(b, depth);
  kiln_strbuf_append_char(b, '}');
}

static void print_op(kiln_strbuf_t *b, name_map_t *m, const kiln_mlir_op_t *op, int depth) {
  indent(b, depth);
  if (op->num_results > 0) {
    int32_t id = m->next_result++;
    kiln_strbuf_printf(b, "%%%d", (int)id);
    if (op->num_results > 1) kiln_strbuf_printf(b, ":%d", (int)op->num_results);
    kiln_strbuf_append(b, " = ");
    /* registered after the regions print: results are not visible inside them */
    map_put(m, op, id);
  }
  print_string(b, op->name, strlen(op->name));
  kiln_strbuf_append_char(b, '(');
  for (int32_t i = 0; i < op->num_operands; i++) {
    if (i) kiln_strbuf_append(b, ", ");
    print_value(b, m, op->operands[i]);
  }
  kiln_strbuf_append_char(b, ')');
  if (op->num_regions) {
    kiln_strbuf_append(b, " (");
    for (int32_t r = 0; r < op->num_regions; r++) {
      if (r) kiln_strbuf_append(b, ", ");
      print_region(b, m, &op->regions[r], depth + 1);
    }
    kiln_strbuf_append_char(b, ')');
  }
  if (op->num_attrs) {
    kiln_strbuf_append(b, " {");
    print_fields(b, op->attrs, op->num_attrs, false);
    kiln_strbuf_append_char(b, '}');
  }
  kiln_strbuf_append(b, " : (");
  for (int32_t i = 0; i < op->num_operands; i++) {
    if (i) kiln_strbuf_append(b, ", ");
    kiln_mlir_type_print(b, op->operands[i]->type);
  }
  kiln_strbuf_append(b, ") -> ");
  if (op->num_results == 1 && op->results[0].type &&
      op->results[0].type->kind != KILN_MLIR_TYPE_FUNCTION) {
    kiln_mlir_type_print(b, op->results[0].type);
  } else {
    kiln_strbuf_append_char(b, '(');
    for (int32_t i = 0; i < op->num_results; i++) {
      if (i) kiln_strbuf_append(b, ", ");
      kiln_mlir_type_print(b, op->results[i].type);
    }
    kiln_strbuf_append_char(b, ')');
  }
  if (op->location) kiln_strbuf_printf(b, " loc(%s)", op->location);
  kiln_strbuf_append_char(b, '\n');
}

void kiln_mlir_module_print(kiln_strbuf_t *b, const kiln_mlir_module_t *m) {
  name_map_t map = {0};
  kiln_strbuf_append(b, "module");
  if (m->name) {
    kiln_strbuf_append(b, " @");
    if (is_bare(m->name)) {
      kiln_strbuf_append(b, m->name);
    } else {
      print_string(b, m->name, strlen(m->name));
    }
  }
  if (m->num_attrs) {
    kiln_strbuf_append(b, " attributes {");
    print_fields(b, m->attrs, m->num_attrs, false);
    kiln_strbuf_append_char(b, '}');
  }
  kiln_strbuf_append(b, " {\n");
  for (int32_t i = 0; i < m->body.num_ops; i++) print_op(b, &map, m->body.ops[i], 1);
  kiln_strbuf_append(b, "}\n");
  kiln_free(map.keys);
  kiln_free(map.ids);
}
