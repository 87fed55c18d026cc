/* StableHLO -> HLO: the driver (module, entry function and its attributes, scopes and the
 * value map, func.call inlining, regions as computations, check mode). See
 * stablehlo_to_hlo_internal.h for how the HLO is written. */
#include "compiler/frontend/stablehlo_to_hlo.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include "compiler/frontend/mlir_bytecode.h"
#include "compiler/frontend/mlir_text.h"
#include "compiler/frontend/stablehlo_to_hlo_internal.h"

/* What the converter prints to stderr (kiln_stablehlo_set_dump). */
static _Atomic kiln_stablehlo_dump_t g_dump = KILN_STABLEHLO_DUMP_NONE;

void kiln_stablehlo_set_dump(kiln_stablehlo_dump_t mode) {
  atomic_store(&g_dump, mode);
}

kiln_status shc_op_error(const kiln_mlir_op_t *op, kiln_status_code_t code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (op && op->line > 0)
    return kiln_status_make(code, "line %d: %s: %s", (int)op->line, op->name, msg);
  if (op && op->location)
    return kiln_status_make(code, "%s (at %s): %s", op->name, op->location, msg);
  return kiln_status_make(code, "%s: %s", op ? op->name : "<module>", msg);
}

/* ---- types ---- */

const kiln_mlir_type_t *shc_elem_type(const kiln_mlir_type_t *t) {
  return t && t->kind == KILN_MLIR_TYPE_TENSOR ? t->element : t;
}
bool shc_is_float(const kiln_mlir_type_t *e) {
  return e && e->kind == KILN_MLIR_TYPE_FLOAT;
}
bool shc_is_complex(const kiln_mlir_type_t *e) {
  return e && e->kind == KILN_MLIR_TYPE_COMPLEX;
}
bool shc_is_unsigned(const kiln_mlir_type_t *e) {
  return e && e->kind == KILN_MLIR_TYPE_INTEGER && e->signedness == KILN_MLIR_UNSIGNED &&
         e->width > 1;
}
bool shc_is_pred(const kiln_mlir_type_t *e) {
  return e && e->kind == KILN_MLIR_TYPE_INTEGER && e->width == 1;
}

/* A short description of a type for messages. */
static void type_name(kiln_strbuf_t *b, const kiln_mlir_type_t *t) {
  switch (t->kind) {
    case KILN_MLIR_TYPE_INTEGER:
      kiln_strbuf_printf(b, "%si%d",
                         t->signedness == KILN_MLIR_UNSIGNED ? "u"
                         : t->signedness == KILN_MLIR_SIGNED ? "s"
                                                             : "",
                         (int)t->width);
      return;
    case KILN_MLIR_TYPE_FLOAT:
      kiln_strbuf_append(b, kiln_elem_type_name(t->elem));
      return;
    case KILN_MLIR_TYPE_COMPLEX:
      kiln_strbuf_append(b, "complex<...>");
      return;
    case KILN_MLIR_TYPE_OTHER:
      kiln_strbuf_append(b, t->text ? t->text : "?");
      return;
    default:
      kiln_strbuf_printf(b, "<type kind %d>", (int)t->kind);
      return;
  }
}

kiln_status shc_elem_text(const kiln_mlir_type_t *t, const char **out) {
  *out = NULL;
  switch (t->kind) {
    case KILN_MLIR_TYPE_INTEGER:
      if (t->width == 1) {
        *out = "pred";
        return NULL;
      }
      if (t->width == 2 || t->width == 4 || t->width == 8 || t->width == 16 || t->width == 32 ||
          t->width == 64) {
        static const char *const s[] = {"s2", "s4", "s8", "s16", "s32", "s64"};
        static const char *const u[] = {"u2", "u4", "u8", "u16", "u32", "u64"};
        int i = t->width == 2    ? 0
                : t->width == 4  ? 1
                : t->width == 8  ? 2
                : t->width == 16 ? 3
                : t->width == 32 ? 4
                                 : 5;
        *out = t->signedness == KILN_MLIR_UNSIGNED ? u[i] : s[i];
        return NULL;
      }
      break;
    case KILN_MLIR_TYPE_INDEX:
      *out = "s64";
      return NULL;
    case KILN_MLIR_TYPE_FLOAT:
      *out = kiln_elem_type_name(t->elem);
      return NULL;
    case KILN_MLIR_TYPE_COMPLEX:
      if (t->element && t->element->kind == KILN_MLIR_TYPE_FLOAT) {
        if (t->element->elem == KILN_F32) *out = "c64";
        if (t->element->elem == KILN_F64) *out = "c128";
        if (*out) return NULL;
      }
      break;
    case KILN_MLIR_TYPE_TOKEN:
      *out = "token";
      return NULL;
    case KILN_MLIR_TYPE_OTHER:
      if (shc_is_quant(t)) return shc_quant_storage_text(t, out);
      break;
    default:
      break;
  }
  kiln_strbuf_t b = {0};
  type_name(&b, t);
  kiln_status s = KILN_ERR_UNIMPLEMENTED(
      "element type %s is not supported%s", kiln_strbuf_cstr(&b),
      t->kind == KILN_MLIR_TYPE_OTHER && strstr(kiln_strbuf_cstr(&b), "quant")
          ? " (quantized types)"
          : "");
  kiln_strbuf_free(&b);
  return s;
}

static kiln_status type_text_into(kiln_strbuf_t *b, const kiln_mlir_type_t *t) {
  const char *e;
  switch (t->kind) {
    case KILN_MLIR_TYPE_TENSOR:
      if (t->unranked) return KILN_ERR_UNIMPLEMENTED("unranked tensor types are not supported");
      if (t->encoding)
        return KILN_ERR_UNIMPLEMENTED(
            "tensor types with an encoding (bounded dynamic shapes) "
            "are not supported");
      KILN_RETURN_IF_ERROR(shc_elem_text(t->element, &e), "in a tensor type");
      kiln_strbuf_append(b, e);
      kiln_strbuf_append_char(b, '[');
      for (int32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] == KILN_MLIR_DYNAMIC)
          return KILN_ERR_UNIMPLEMENTED("dynamic dimension `?` (the shape is not static)");
        kiln_strbuf_printf(b, "%s%" PRId64, i ? "," : "", t->dims[i]);
      }
      kiln_strbuf_append_char(b, ']');
      return NULL;
    case KILN_MLIR_TYPE_TUPLE:
      kiln_strbuf_append_char(b, '(');
      for (int32_t i = 0; i < t->num_types; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        KILN_RETURN_IF_ERROR(type_text_into(b, t->types[i]), "in a tuple type");
      }
      kiln_strbuf_append_char(b, ')');
      return NULL;
    case KILN_MLIR_TYPE_TOKEN:
      kiln_strbuf_append(b, "token[]");
      return NULL;
    default:
      KILN_RETURN_IF_ERROR(shc_elem_text(t, &e), "as a value type");
      kiln_strbuf_printf(b, "%s[]", e);
      return NULL;
  }
}

kiln_status shc_type_text(shc_ctx_t *c, const kiln_mlir_type_t *t, const char **out) {
  kiln_strbuf_t b = {0};
  kiln_status s = type_text_into(&b, t);
  *out = s ? NULL : kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return s;
}

/* ---- scopes ---- */

static size_t ptr_hash(const void *p) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= 0x9E3779B97F4A7C15ull;
  return (size_t)(x ^ (x >> 29));
}

void shc_scope_init(shc_scope_t *s, shc_scope_t *parent) {
  memset(s, 0, sizeof *s);
  s->parent = parent;
  s->out = &s->body;
}

void shc_scope_free(shc_scope_t *s) {
  kiln_strbuf_free(&s->body);
  kiln_free(s->keys);
  kiln_free(s->vals);
}

void shc_bind(shc_ctx_t *c, const kiln_mlir_value_t *v, const char *name) {
  shc_scope_t *s = c->cur;
  if ((s->n + 1) * 2 > s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 64;
    const kiln_mlir_value_t **nk = kiln_calloc(ncap, sizeof *nk);
    const char **nv = kiln_calloc(ncap, sizeof *nv);
    for (size_t i = 0; i < s->cap; i++) {
      if (!s->keys[i]) continue;
      size_t h = ptr_hash(s->keys[i]) & (ncap - 1);
      while (nk[h]) h = (h + 1) & (ncap - 1);
      nk[h] = s->keys[i];
      nv[h] = s->vals[i];
    }
    kiln_free(s->keys);
    kiln_free(s->vals);
    s->keys = nk;
    s->vals = nv;
    s->cap = ncap;
  }
  size_t h = ptr_hash(v) & (s->cap - 1);
  while (s->keys[h] && s->keys[h] != v) h = (h + 1) & (s->cap - 1);
  if (!s->keys[h]) s->n++;
  s->keys[h] = v;
  s->vals[h] = name;
}

static const char *scope_find(const shc_scope_t *s, const kiln_mlir_value_t *v) {
  if (!s->cap) return NULL;
  size_t h = ptr_hash(v) & (s->cap - 1);
  while (s->keys[h]) {
    if (s->keys[h] == v) return s->vals[h];
    h = (h + 1) & (s->cap - 1);
  }
  return NULL;
}

kiln_status shc_lookup(shc_ctx_t *c, const kiln_mlir_value_t *v, const char **out) {
  *out = scope_find(c->cur, v);
  if (*out) return NULL;
  return KILN_ERR_INVALID(
      "value %s is used where it is not defined (or its definition was not "
      "converted)",
      v->name ? v->name : "<unnamed>");
}

const char *shc_fresh(shc_ctx_t *c, const char *prefix) {
  return kiln_arena_printf(&c->arena, "%s.%" PRId64, prefix, c->next_id++);
}

const char *shc_emit(shc_ctx_t *c, const char *shape, const char *fmt, ...) {
  const char *name = shc_fresh(c, "v");
  kiln_strbuf_printf(c->cur->out, "  %s = %s ", name, shape);
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_vprintf(c->cur->out, fmt, ap);
  va_end(ap);
  kiln_strbuf_append_char(c->cur->out, '\n');
  return name;
}

kiln_status shc_bind_tuple_results(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *t) {
  for (int32_t i = 0; i < op->num_results; i++) {
    const char *sh;
    KILN_RETURN_IF_ERROR(shc_type_text(c, op->results[i].type, &sh), "%s result %d", op->name,
                         (int)i);
    shc_bind(c, &op->results[i], shc_emit(c, sh, "get-tuple-element(%s), index=%d", t, (int)i));
  }
  return NULL;
}

kiln_status shc_operand_list(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t from, int32_t to,
                             const char **out) {
  if (to > op->num_operands)
    return SHC_INVALID(op, "%s takes at least %d operands, not %d", op->name, (int)to,
                       (int)op->num_operands);
  kiln_strbuf_t b = {0};
  for (int32_t i = from; i < to; i++) {
    const char *n;
    kiln_status s = shc_lookup(c, op->operands[i], &n);
    if (s) {
      kiln_strbuf_free(&b);
      return s;
    }
    kiln_strbuf_printf(&b, "%s%s", i > from ? ", " : "", n);
  }
  *out = kiln_arena_strdup(&c->arena, b.data ? kiln_strbuf_cstr(&b) : "");
  kiln_strbuf_free(&b);
  return NULL;
}

kiln_status shc_results_tuple_shape(shc_ctx_t *c, const kiln_mlir_op_t *op, const char **out) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append_char(&b, '(');
  for (int32_t i = 0; i < op->num_results; i++) {
    if (i) kiln_strbuf_append(&b, ", ");
    kiln_status s = type_text_into(&b, op->results[i].type);
    if (s) {
      kiln_strbuf_free(&b);
      return s;
    }
  }
  kiln_strbuf_append_char(&b, ')');
  *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return NULL;
}

/* ---- attributes ---- */

kiln_status shc_attr_ints(shc_ctx_t *c, const kiln_mlir_op_t *op, const kiln_mlir_attr_t *a,
                          const char *what, int64_t **out, int32_t *n) {
  *out = NULL;
  *n = 0;
  if (!a) return NULL;
  if (a->kind == KILN_MLIR_ATTR_DENSE_ARRAY) {
    *n = a->num_elements;
    *out = kiln_arena_alloc(&c->arena, sizeof(int64_t) * (size_t)(a->num_elements + 1));
    for (int32_t i = 0; i < a->num_elements; i++)
      (*out)[i] = a->ints ? a->ints[i] : (int64_t)a->floats[i];
    return NULL;
  }
  if (a->kind == KILN_MLIR_ATTR_ARRAY) {
    *n = a->num_elements;
    *out = kiln_arena_alloc(&c->arena, sizeof(int64_t) * (size_t)(a->num_elements + 1));
    for (int32_t i = 0; i < a->num_elements; i++) {
      const kiln_mlir_attr_t *e = a->elements[i];
      if (e->kind == KILN_MLIR_ATTR_INTEGER)
        (*out)[i] = e->i;
      else if (e->kind == KILN_MLIR_ATTR_BOOL)
        (*out)[i] = e->b;
      else
        return SHC_INVALID(op, "%s: expected a list of integers", what);
    }
    return NULL;
  }
  if (a->kind == KILN_MLIR_ATTR_DENSE_ELEMENTS && a->literal) {
    int64_t ne = a->literal->num_elements;
    *n = (int32_t)ne;
    *out = kiln_arena_alloc(&c->arena, sizeof(int64_t) * (size_t)(ne + 1));
    for (int64_t i = 0; i < ne; i++) (*out)[i] = kiln_literal_get_s64(a->literal, i);
    return NULL;
  }
  if (a->kind == KILN_MLIR_ATTR_INTEGER) {
    *n = 1;
    *out = kiln_arena_alloc(&c->arena, sizeof(int64_t));
    (*out)[0] = a->i;
    return NULL;
  }
  return SHC_INVALID(op, "%s: expected a list of integers", what);
}

const char *shc_ints_text(shc_ctx_t *c, const int64_t *v, int32_t n) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append_char(&b, '{');
  for (int32_t i = 0; i < n; i++) kiln_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", v[i]);
  kiln_strbuf_append_char(&b, '}');
  const char *r = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return r;
}

int64_t shc_attr_int(const kiln_mlir_attr_t *a, int64_t dflt) {
  if (!a) return dflt;
  if (a->kind == KILN_MLIR_ATTR_INTEGER) return a->i;
  if (a->kind == KILN_MLIR_ATTR_BOOL) return a->b;
  if (a->kind == KILN_MLIR_ATTR_UNIT) return 1;
  return dflt;
}

int64_t shc_channel_id(const kiln_mlir_op_t *op) {
  const kiln_mlir_attr_t *h = kiln_mlir_op_attr(op, "channel_handle");
  return h ? shc_attr_int(kiln_mlir_attr_field(h, "handle"), 0) : 0;
}

const char *shc_attr_enum(const kiln_mlir_attr_t *a) {
  if (!a) return NULL;
  if (a->kind == KILN_MLIR_ATTR_ENUM || a->kind == KILN_MLIR_ATTR_STRING ||
      a->kind == KILN_MLIR_ATTR_OTHER)
    return a->str;
  return NULL;
}

kiln_status shc_scalar_const(shc_ctx_t *c, const kiln_mlir_type_t *elem, double v,
                             const char **out) {
  const char *e;
  KILN_RETURN_IF_ERROR(shc_elem_text(elem, &e), "in a constant");
  const char *sh = kiln_arena_printf(&c->arena, "%s[]", e);
  if (shc_is_pred(elem))
    *out = shc_emit(c, sh, "constant(%s)", v != 0 ? "true" : "false");
  else if (shc_is_complex(elem))
    *out = shc_emit(c, sh, "constant((%.17g, 0))", v);
  else if (shc_is_float(elem)) {
    if (v != v)
      *out = shc_emit(c, sh, "constant(nan)");
    else if (v > 1.79e308)
      *out = shc_emit(c, sh, "constant(inf)");
    else if (v < -1.79e308)
      *out = shc_emit(c, sh, "constant(-inf)");
    else
      *out = shc_emit(c, sh, "constant(%.17g)", v);
  } else
    *out = shc_emit(c, sh, "constant(%" PRId64 ")", (int64_t)v);
  return NULL;
}

const char *shc_broadcast_scalar(shc_ctx_t *c, const char *scalar, const char *shape,
                                 int32_t rank) {
  if (rank == 0) return scalar;
  return shc_emit(c, shape, "broadcast(%s), dimensions={}", scalar);
}

const char *shc_pred_shape_text(shc_ctx_t *c, const kiln_mlir_type_t *t) {
  int32_t rank = t && t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0;
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "pred[");
  for (int32_t k = 0; k < rank; k++) kiln_strbuf_printf(&b, "%s%" PRId64, k ? "," : "", t->dims[k]);
  kiln_strbuf_append_char(&b, ']');
  const char *s = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return s;
}

/* ---- blocks, regions, calls ---- */

static bool is_terminator(const kiln_mlir_op_t *op) {
  return !strcmp(op->name, "func.return") || !strcmp(op->name, "stablehlo.return") ||
         !strcmp(op->name, "return");
}

kiln_status shc_convert_block(shc_ctx_t *c, const kiln_mlir_block_t *block, const char ***ret,
                              int32_t *num_ret) {
  *ret = NULL;
  *num_ret = 0;
  for (int32_t i = 0; i < block->num_ops; i++) {
    const kiln_mlir_op_t *op = block->ops[i];
    if (is_terminator(op)) {
      if (i != block->num_ops - 1)
        return SHC_INVALID(block->ops[i + 1], "%s after the block's terminator %s",
                           block->ops[i + 1]->name, op->name);
      *num_ret = op->num_operands;
      *ret = kiln_arena_alloc(&c->arena, sizeof(char *) * (size_t)(op->num_operands + 1));
      for (int32_t j = 0; j < op->num_operands; j++)
        KILN_RETURN_IF_ERROR(shc_lookup(c, op->operands[j], &(*ret)[j]), "%s operand %d", op->name,
                             (int)j);
      return NULL;
    }
    SHC_TRY(shc_convert_op(c, op));
  }
  return NULL;
}

static kiln_status inline_call(shc_ctx_t *c, const kiln_mlir_op_t *op, const kiln_mlir_op_t *fn,
                               int32_t first_operand) {
  if (fn->num_regions < 1 || fn->regions[0].num_blocks < 1)
    return SHC_INVALID(op, "the called function has no body");
  if (fn->regions[0].num_blocks != 1)
    return SHC_UNIMPL(op, "called function with %d blocks", (int)fn->regions[0].num_blocks);
  if (++c->depth > SHC_MAX_DEPTH) return SHC_INVALID(op, "calls nested too deeply (recursion?)");
  const kiln_mlir_block_t *b = &fn->regions[0].blocks[0];
  if (b->num_args != op->num_operands - first_operand)
    return SHC_INVALID(op, "the callee takes %d arguments, the call passes %d", (int)b->num_args,
                       (int)(op->num_operands - first_operand));
  for (int32_t i = 0; i < b->num_args; i++) {
    const char *n;
    KILN_RETURN_IF_ERROR(shc_lookup(c, op->operands[first_operand + i], &n), "call operand");
    shc_bind(c, &b->args[i], n);
  }
  const char **ret;
  int32_t nret;
  KILN_RETURN_IF_ERROR(shc_convert_block(c, b, &ret, &nret), "in the function called at line %d",
                       (int)op->line);
  if (nret != op->num_results)
    return SHC_INVALID(op, "the callee returns %d values, the call has %d results", (int)nret,
                       (int)op->num_results);
  for (int32_t i = 0; i < nret; i++) shc_bind(c, &op->results[i], ret[i]);
  c->depth--;
  return NULL;
}

static const char *symbol_of(const kiln_mlir_attr_t *a) {
  if (!a) return NULL;
  if (a->kind == KILN_MLIR_ATTR_SYMBOL_REF || a->kind == KILN_MLIR_ATTR_STRING) return a->str;
  return NULL;
}

/* Values a region uses but does not define, in first-use order (arena array). */
typedef struct capture_set {
  const kiln_mlir_value_t **v;
  int32_t n, cap;
  shc_scope_t defined; /* values defined inside (map to "") */
} capture_set_t;

static void capture_walk_region(shc_ctx_t *c, capture_set_t *cs, const kiln_mlir_region_t *r);

static void capture_walk_op(shc_ctx_t *c, capture_set_t *cs, const kiln_mlir_op_t *op) {
  shc_scope_t *saved = c->cur;
  for (int32_t i = 0; i < op->num_operands; i++) {
    const kiln_mlir_value_t *v = op->operands[i];
    if (scope_find(&cs->defined, v)) continue;
    c->cur = &cs->defined;
    shc_bind(c, v, "");
    c->cur = saved;
    if (cs->n == cs->cap) {
      cs->cap = cs->cap ? cs->cap * 2 : 8;
      cs->v = kiln_realloc(cs->v, sizeof *cs->v * (size_t)cs->cap);
    }
    cs->v[cs->n++] = v;
  }
  for (int32_t i = 0; i < op->num_regions; i++) capture_walk_region(c, cs, &op->regions[i]);
  c->cur = &cs->defined;
  for (int32_t i = 0; i < op->num_results; i++) shc_bind(c, &op->results[i], "");
  c->cur = saved;
}

static void capture_walk_region(shc_ctx_t *c, capture_set_t *cs, const kiln_mlir_region_t *r) {
  shc_scope_t *saved = c->cur;
  for (int32_t b = 0; b < r->num_blocks; b++) {
    c->cur = &cs->defined;
    for (int32_t i = 0; i < r->blocks[b].num_args; i++) shc_bind(c, &r->blocks[b].args[i], "");
    c->cur = saved;
    for (int32_t i = 0; i < r->blocks[b].num_ops; i++) capture_walk_op(c, cs, r->blocks[b].ops[i]);
  }
}

/* Captures of `r` (values from outside it). Caller frees cs->v and the scope. */
static void captures_of(shc_ctx_t *c, const kiln_mlir_region_t *r, capture_set_t *cs) {
  memset(cs, 0, sizeof *cs);
  shc_scope_init(&cs->defined, NULL);
  capture_walk_region(c, cs, r);
}

static void capture_set_free(capture_set_t *cs) {
  kiln_free(cs->v);
  shc_scope_free(&cs->defined);
}

/* Finishes scope `s` as computation `name` with root `root` and appends it to c->comps. */
static void finish_computation(shc_ctx_t *c, shc_scope_t *s, const char *name, const char *root) {
  kiln_strbuf_printf(&c->comps, "%s {\n%s", name, s->body.data ? kiln_strbuf_cstr(&s->body) : "");
  kiln_strbuf_printf(&c->comps, "  ROOT %s = %s\n}\n\n", shc_fresh(c, "root"), root);
}

/* Re-materializes a captured constant in the current scope. */
static kiln_status rematerialize(shc_ctx_t *c, const kiln_mlir_op_t *user,
                                 const kiln_mlir_value_t *v) {
  if (!v->def || (strcmp(v->def->name, "stablehlo.constant") != 0))
    return SHC_UNIMPL(user,
                      "its region uses value %s from outside (only constants can be captured "
                      "here)",
                      v->name ? v->name : "<unnamed>");
  return shc_convert_op(c, v->def);
}

kiln_status shc_region_computation(shc_ctx_t *c, const kiln_mlir_op_t *op,
                                   const kiln_mlir_region_t *r, bool force_tuple,
                                   const char **name) {
  if (r->num_blocks != 1) return SHC_UNIMPL(op, "region with %d blocks", (int)r->num_blocks);
  const kiln_mlir_block_t *b = &r->blocks[0];
  if (b->num_ops == 0 || !is_terminator(b->ops[b->num_ops - 1]))
    return SHC_INVALID(op, "a region of %s does not end in a return", op->name);
  if (++c->depth > SHC_MAX_DEPTH) return SHC_INVALID(op, "regions nested too deeply");
  shc_scope_t s, *saved = c->cur;
  shc_scope_init(&s, saved);
  c->cur = &s;
  kiln_status st = NULL;
  capture_set_t cs;
  captures_of(c, r, &cs);
  for (int32_t i = 0; i < b->num_args && !st; i++) {
    const char *sh;
    st = shc_type_text(c, b->args[i].type, &sh);
    if (!st) shc_bind(c, &b->args[i], shc_emit(c, sh, "parameter(%d)", (int)i));
  }
  for (int32_t i = 0; i < cs.n && !st; i++) st = rematerialize(c, op, cs.v[i]);
  const char **ret = NULL;
  int32_t nret = 0;
  if (!st) st = shc_convert_block(c, b, &ret, &nret);
  const char *root = NULL;
  if (!st) {
    if (nret == 1 && !force_tuple) {
      root = kiln_arena_printf(&c->arena, "%s copy(%s)", "", ret[0]);
      /* the ROOT needs a shape: find the return op's operand type */
      const kiln_mlir_op_t *t = b->ops[b->num_ops - 1];
      const char *sh;
      st = shc_type_text(c, t->operands[0]->type, &sh);
      if (!st) root = kiln_arena_printf(&c->arena, "%s copy(%s)", sh, ret[0]);
    } else {
      const kiln_mlir_op_t *t = b->ops[b->num_ops - 1];
      kiln_strbuf_t sb = {0}, ob = {0};
      kiln_strbuf_append_char(&sb, '(');
      for (int32_t i = 0; i < nret && !st; i++) {
        if (i) kiln_strbuf_append(&sb, ", ");
        st = type_text_into(&sb, t->operands[i]->type);
        kiln_strbuf_printf(&ob, "%s%s", i ? ", " : "", ret[i]);
      }
      kiln_strbuf_append_char(&sb, ')');
      root = kiln_arena_printf(&c->arena, "%s tuple(%s)", kiln_strbuf_cstr(&sb),
                               ob.data ? kiln_strbuf_cstr(&ob) : "");
      kiln_strbuf_free(&sb);
      kiln_strbuf_free(&ob);
    }
  }
  c->cur = saved;
  if (!st) {
    *name = shc_fresh(c, "region");
    finish_computation(c, &s, *name, root);
  }
  capture_set_free(&cs);
  shc_scope_free(&s);
  c->depth--;
  return st;
}

/* ---- control flow: while / if / case with captured values packed into the state ---- */

/* Opens a computation whose single parameter is a tuple `tuple_shape`; binds the first
 * `nargs` elements to `args` (block arguments, may be NULL) and the rest to the captures. */
static kiln_status open_tuple_param_scope(shc_ctx_t *c, shc_scope_t *s, const char *tuple_shape,
                                          const kiln_mlir_value_t *args, int32_t nargs,
                                          const capture_set_t *cs) {
  shc_scope_init(s, c->cur);
  c->cur = s;
  const char *p = shc_emit(c, tuple_shape, "parameter(0)");
  for (int32_t i = 0; i < nargs + cs->n; i++) {
    const kiln_mlir_value_t *v = i < nargs ? &args[i] : cs->v[i - nargs];
    const char *sh;
    KILN_RETURN_IF_ERROR(shc_type_text(c, v->type, &sh), "state element %d", (int)i);
    shc_bind(c, v, shc_emit(c, sh, "get-tuple-element(%s), index=%d", p, (int)i));
  }
  return NULL;
}

static kiln_status tuple_shape_of_values(shc_ctx_t *c, const kiln_mlir_value_t *const *vals,
                                         const kiln_mlir_value_t *first, int32_t nfirst, int32_t n,
                                         const char **out) {
  kiln_strbuf_t b = {0};
  kiln_status s = NULL;
  kiln_strbuf_append_char(&b, '(');
  for (int32_t i = 0; i < nfirst + n && !s; i++) {
    if (i) kiln_strbuf_append(&b, ", ");
    s = type_text_into(&b, i < nfirst ? first[i].type : vals[i - nfirst]->type);
  }
  kiln_strbuf_append_char(&b, ')');
  *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return s;
}

static kiln_status convert_while(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 2) return SHC_INVALID(op, "expected 2 regions");
  if (op->regions[0].num_blocks != 1 || op->regions[1].num_blocks != 1)
    return SHC_UNIMPL(op, "regions with several blocks");
  capture_set_t cs;
  /* captures of both regions: walk them as one */
  memset(&cs, 0, sizeof cs);
  shc_scope_init(&cs.defined, NULL);
  capture_walk_region(c, &cs, &op->regions[0]);
  capture_walk_region(c, &cs, &op->regions[1]);
  kiln_status st = NULL;
  const char *tshape = NULL, *cond = NULL, *body = NULL;
  const kiln_mlir_block_t *cb = &op->regions[0].blocks[0], *bb = &op->regions[1].blocks[0];
  st = tuple_shape_of_values(c, cs.v, cb->args, cb->num_args, cs.n, &tshape);
  if (!st && (cb->num_args != op->num_operands || bb->num_args != op->num_operands))
    st = SHC_INVALID(op, "region arguments do not match the operands");
  shc_scope_t s, *saved = c->cur;
  if (!st && ++c->depth > SHC_MAX_DEPTH) st = SHC_INVALID(op, "nested too deeply");
  /* condition */
  if (!st) {
    st = open_tuple_param_scope(c, &s, tshape, cb->args, cb->num_args, &cs);
    const char **ret = NULL;
    int32_t nret = 0;
    if (!st) st = shc_convert_block(c, cb, &ret, &nret);
    if (!st && nret != 1) st = SHC_INVALID(op, "the condition returns %d values", (int)nret);
    c->cur = saved;
    if (!st) {
      cond = shc_fresh(c, "while_cond");
      finish_computation(c, &s, cond, kiln_arena_printf(&c->arena, "pred[] copy(%s)", ret[0]));
    }
    shc_scope_free(&s);
  }
  if (!st) {
    st = open_tuple_param_scope(c, &s, tshape, bb->args, bb->num_args, &cs);
    const char **ret = NULL;
    int32_t nret = 0;
    if (!st) st = shc_convert_block(c, bb, &ret, &nret);
    if (!st && nret != op->num_operands)
      st = SHC_INVALID(op, "the body returns %d values for %d operands", (int)nret,
                       (int)op->num_operands);
    if (!st) {
      kiln_strbuf_t b = {0};
      for (int32_t i = 0; i < nret; i++) kiln_strbuf_printf(&b, "%s%s", i ? ", " : "", ret[i]);
      for (int32_t i = 0; i < cs.n; i++) {
        const char *n = NULL;
        if (!st) st = shc_lookup(c, cs.v[i], &n);
        kiln_strbuf_printf(&b, "%s%s", nret + i ? ", " : "", n ? n : "");
      }
      c->cur = saved;
      if (!st) {
        body = shc_fresh(c, "while_body");
        finish_computation(c, &s, body,
                           kiln_arena_printf(&c->arena, "%s tuple(%s)", tshape,
                                             b.data ? kiln_strbuf_cstr(&b) : ""));
      }
      kiln_strbuf_free(&b);
    }
    c->cur = saved;
    shc_scope_free(&s);
  }
  if (!st) {
    kiln_strbuf_t b = {0};
    for (int32_t i = 0; i < op->num_operands + cs.n && !st; i++) {
      const char *n = NULL;
      st = shc_lookup(c, i < op->num_operands ? op->operands[i] : cs.v[i - op->num_operands], &n);
      kiln_strbuf_printf(&b, "%s%s", i ? ", " : "", n ? n : "");
    }
    if (!st) {
      const char *init = shc_emit(c, tshape, "tuple(%s)", b.data ? kiln_strbuf_cstr(&b) : "");
      const char *w = shc_emit(c, tshape, "while(%s), condition=%s, body=%s", init, cond, body);
      st = shc_bind_tuple_results(c, op, w);
    }
    kiln_strbuf_free(&b);
  }
  c->depth--;
  capture_set_free(&cs);
  return st;
}

/* if / case: each branch a computation of one tuple parameter holding its captures. */
static kiln_status convert_branches(shc_ctx_t *c, const kiln_mlir_op_t *op, bool is_if) {
  const char *rshape;
  SHC_TRY(shc_results_tuple_shape(c, op, &rshape));
  if (op->num_regions < 1) return SHC_INVALID(op, "no branches");
  const char *pred;
  SHC_TRY(shc_lookup(c, op->operands[0], &pred));
  kiln_strbuf_t args = {0}, comps = {0};
  kiln_status st = NULL;
  if (++c->depth > SHC_MAX_DEPTH) return SHC_INVALID(op, "nested too deeply");
  for (int32_t r = 0; r < op->num_regions && !st; r++) {
    const kiln_mlir_region_t *reg = &op->regions[r];
    if (reg->num_blocks != 1) {
      st = SHC_UNIMPL(op, "branch with %d blocks", (int)reg->num_blocks);
      break;
    }
    capture_set_t cs;
    captures_of(c, reg, &cs);
    const char *tshape = NULL;
    st = tuple_shape_of_values(c, cs.v, NULL, 0, cs.n, &tshape);
    shc_scope_t s, *saved = c->cur;
    if (!st) {
      /* the argument tuple, in the caller */
      kiln_strbuf_t b = {0};
      for (int32_t i = 0; i < cs.n && !st; i++) {
        const char *n = NULL;
        st = shc_lookup(c, cs.v[i], &n);
        kiln_strbuf_printf(&b, "%s%s", i ? ", " : "", n ? n : "");
      }
      if (!st) {
        const char *a = shc_emit(c, tshape, "tuple(%s)", b.data ? kiln_strbuf_cstr(&b) : "");
        kiln_strbuf_printf(&args, ", %s", a);
      }
      kiln_strbuf_free(&b);
    }
    if (!st) {
      st = open_tuple_param_scope(c, &s, tshape, NULL, 0, &cs);
      const char **ret = NULL;
      int32_t nret = 0;
      if (!st) st = shc_convert_block(c, &reg->blocks[0], &ret, &nret);
      if (!st && nret != op->num_results)
        st = SHC_INVALID(op, "branch %d returns %d values for %d results", (int)r, (int)nret,
                         (int)op->num_results);
      c->cur = saved;
      if (!st) {
        kiln_strbuf_t b = {0};
        for (int32_t i = 0; i < nret; i++) kiln_strbuf_printf(&b, "%s%s", i ? ", " : "", ret[i]);
        const char *name = shc_fresh(c, "branch");
        finish_computation(c, &s, name,
                           kiln_arena_printf(&c->arena, "%s tuple(%s)", rshape,
                                             b.data ? kiln_strbuf_cstr(&b) : ""));
        kiln_strbuf_printf(&comps, "%s%s", r ? ", " : "", name);
        kiln_strbuf_free(&b);
      }
      shc_scope_free(&s);
    }
    c->cur = saved;
    capture_set_free(&cs);
  }
  c->depth--;
  if (!st) {
    const char *cond;
    if (is_if) {
      /* StableHLO's if: region 0 when true. HLO: true_computation, false_computation. */
      const char *a = kiln_strbuf_cstr(&args) + 2;
      const char *comma = strchr(a, ',');
      char *ta = kiln_arena_strndup(&c->arena, a, (size_t)(comma - a));
      const char *fa = comma + 2;
      const char *cl = kiln_strbuf_cstr(&comps);
      const char *cc = strchr(cl, ',');
      char *tc = kiln_arena_strndup(&c->arena, cl, (size_t)(cc - cl));
      cond =
          shc_emit(c, rshape, "conditional(%s, %s, %s), true_computation=%s, false_computation=%s",
                   pred, ta, fa, tc, cc + 2);
    } else {
      cond = shc_emit(c, rshape, "conditional(%s%s), branch_computations={%s}", pred,
                      kiln_strbuf_cstr(&args), kiln_strbuf_cstr(&comps));
    }
    st = shc_bind_tuple_results(c, op, cond);
  }
  kiln_strbuf_free(&args);
  kiln_strbuf_free(&comps);
  return st;
}

kiln_status shc_convert_control_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled) {
  *handled = true;
  const char *n = op->name;
  if (!strcmp(n, "stablehlo.while")) return convert_while(c, op);
  if (!strcmp(n, "stablehlo.if")) {
    if (op->num_regions != 2) return SHC_INVALID(op, "expected 2 regions");
    return convert_branches(c, op, true);
  }
  if (!strcmp(n, "stablehlo.case")) return convert_branches(c, op, false);
  if (!strcmp(n, "func.call") || !strcmp(n, "call")) {
    const char *callee = symbol_of(kiln_mlir_op_attr(op, "callee"));
    if (!callee) return SHC_INVALID(op, "no callee");
    const kiln_mlir_op_t *fn = kiln_mlir_module_func(c->m, callee);
    if (!fn) return SHC_INVALID(op, "calls @%s, which the module does not define", callee);
    return inline_call(c, op, fn, 0);
  }
  if (!strcmp(n, "stablehlo.composite")) {
    const char *callee = symbol_of(kiln_mlir_op_attr(op, "decomposition"));
    if (!callee) return SHC_INVALID(op, "no decomposition");
    const kiln_mlir_op_t *fn = kiln_mlir_module_func(c->m, callee);
    if (!fn) return SHC_INVALID(op, "decomposition @%s is not defined", callee);
    return inline_call(c, op, fn, 0);
  }
  *handled = false;
  return NULL;
}

/* ---- check ops ---- */

static bool is_check_op(const kiln_mlir_op_t *op, const char **kind) {
  if (!strncmp(op->name, "check.", 6)) {
    *kind = op->name + 6;
    return true;
  }
  if (!strcmp(op->name, "stablehlo.custom_call")) {
    const kiln_mlir_attr_t *t = kiln_mlir_op_attr(op, "call_target_name");
    if (t && t->str && !strncmp(t->str, "check.", 6)) {
      *kind = t->str + 6;
      return true;
    }
  }
  return false;
}

static int32_t add_output(shc_ctx_t *c, const char *name, const char *shape) {
  if (c->num_outputs == c->cap_outputs) {
    c->cap_outputs = c->cap_outputs ? c->cap_outputs * 2 : 8;
    c->outputs = kiln_realloc(c->outputs, sizeof(char *) * (size_t)c->cap_outputs);
    c->output_shapes = kiln_realloc(c->output_shapes, sizeof(char *) * (size_t)c->cap_outputs);
  }
  c->outputs[c->num_outputs] = name;
  c->output_shapes[c->num_outputs] = shape;
  return c->num_outputs++;
}

static kiln_status convert_check(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *kind) {
  if (!c->check_mode) return NULL; /* outside check mode, checks are dropped */
  kiln_stablehlo_check_t k;
  memset(&k, 0, sizeof k);
  k.op_name = op->name;
  k.line = op->line;
  k.want = -1;
  k.tolerance = 1e-4;
  k.max_ulp = 3;
  bool is_const = strstr(kind, "_const") != NULL;
  if (!strncmp(kind, "expect_eq", 9) || !strcmp(kind, "eq"))
    k.kind = KILN_STABLEHLO_CHECK_EQ;
  else if (!strncmp(kind, "expect_almost_eq", 16))
    k.kind = KILN_STABLEHLO_CHECK_ALMOST_EQ;
  else if (!strncmp(kind, "expect_close", 12))
    k.kind = KILN_STABLEHLO_CHECK_CLOSE;
  else
    k.kind = KILN_STABLEHLO_CHECK_UNSUPPORTED;
  const kiln_mlir_attr_t *a;
  if ((a = kiln_mlir_op_attr(op, "tolerance")) && a->kind == KILN_MLIR_ATTR_FLOAT)
    k.tolerance = a->f;
  if ((a = kiln_mlir_op_attr(op, "max_ulp_difference"))) k.max_ulp = (uint64_t)shc_attr_int(a, 3);
  if ((a = kiln_mlir_op_attr(op, "min_ulp_difference"))) k.min_ulp = (uint64_t)shc_attr_int(a, 0);
  if (op->num_operands < 1) return SHC_INVALID(op, "a check without operands");
  if (k.kind != KILN_STABLEHLO_CHECK_UNSUPPORTED) {
    int32_t nvals = is_const ? 1 : 2;
    if (op->num_operands < nvals) return SHC_INVALID(op, "expected %d operands", (int)nvals);
    for (int32_t i = 0; i < nvals; i++) {
      const char *n, *sh;
      SHC_TRY(shc_lookup(c, op->operands[i], &n));
      SHC_TRY(shc_type_text(c, op->operands[i]->type, &sh));
      int32_t idx = add_output(c, n, sh);
      if (i == 0)
        k.got = idx;
      else
        k.want = idx;
    }
    if (is_const) {
      a = kiln_mlir_op_attr(op, "value");
      if (!a || a->kind != KILN_MLIR_ATTR_DENSE_ELEMENTS || !a->literal)
        return SHC_INVALID(op, "expected a `value` dense elements attribute");
      k.want_const = a->literal;
    }
  }
  if (c->num_checks == c->cap_checks) {
    c->cap_checks = c->cap_checks ? c->cap_checks * 2 : 8;
    c->checks = kiln_realloc(c->checks, sizeof *c->checks * (size_t)c->cap_checks);
  }
  c->checks[c->num_checks++] = k;
  return NULL;
}

/* ---- ops ---- */

/* Operand and result counts of the StableHLO / CHLO ops whose converters index them: at least
 * `min_ops` operands (at most `max_ops`, -1: any), at least one result. Input is untrusted
 * (the generic form states any counts): a wrong count is INVALID_ARGUMENT, not a read past
 * the arrays. */
typedef struct arity {
  const char *name; /* without the dialect */
  int8_t min_ops, max_ops;
} arity_t;

static const arity_t kArity[] = {
    {"abs", 1, 1},
    {"cbrt", 1, 1},
    {"ceil", 1, 1},
    {"cosine", 1, 1},
    {"count_leading_zeros", 1, 1},
    {"exponential", 1, 1},
    {"exponential_minus_one", 1, 1},
    {"floor", 1, 1},
    {"imag", 1, 1},
    {"is_finite", 1, 1},
    {"log", 1, 1},
    {"log_plus_one", 1, 1},
    {"logistic", 1, 1},
    {"negate", 1, 1},
    {"not", 1, 1},
    {"popcnt", 1, 1},
    {"real", 1, 1},
    {"round_nearest_afz", 1, 1},
    {"round_nearest_even", 1, 1},
    {"rsqrt", 1, 1},
    {"sign", 1, 1},
    {"sine", 1, 1},
    {"sqrt", 1, 1},
    {"tan", 1, 1},
    {"tanh", 1, 1},
    {"convert", 1, 1},
    {"bitcast_convert", 1, 1},
    {"reshape", 1, 1},
    {"transpose", 1, 1},
    {"broadcast", 1, 1},
    {"broadcast_in_dim", 1, 1},
    {"slice", 1, 1},
    {"reverse", 1, 1},
    {"reduce_precision", 1, 1},
    {"cholesky", 1, 1},
    {"fft", 1, 1},
    {"get_dimension_size", 1, 1},
    {"get_tuple_element", 1, 1},
    {"add", 2, 2},
    {"and", 2, 2},
    {"atan2", 2, 2},
    {"complex", 2, 2},
    {"divide", 2, 2},
    {"maximum", 2, 2},
    {"minimum", 2, 2},
    {"multiply", 2, 2},
    {"or", 2, 2},
    {"power", 2, 2},
    {"remainder", 2, 2},
    {"shift_left", 2, 2},
    {"shift_right_arithmetic", 2, 2},
    {"shift_right_logical", 2, 2},
    {"subtract", 2, 2},
    {"xor", 2, 2},
    {"compare", 2, 2},
    {"dot", 2, 2},
    {"dot_general", 2, 2},
    {"convolution", 2, 2},
    {"dynamic_reshape", 2, 2},
    {"pad", 2, 2},
    {"triangular_solve", 2, 2},
    {"gather", 2, 2},
    {"dynamic_broadcast_in_dim", 2, 2},
    {"dynamic_iota", 1, 1},
    {"select", 3, 3},
    {"clamp", 3, 3},
    {"dynamic_gather", 3, 3},
    {"dynamic_conv", 3, 3},
    {"select_and_scatter", 3, 3},
    {"dynamic_pad", 5, 5},
    {"real_dynamic_slice", 4, 4},
    {"concatenate", 1, -1},
    {"dynamic_slice", 1, -1},
    {"dynamic_update_slice", 2, -1},
    {"iota", 0, 0},
    {"rng", 3, 3},
    {"rng_bit_generator", 1, 1},
    {"map", 1, -1},
    {"reduce", 2, -1},
    {"reduce_window", 2, -1},
    {"scatter", 3, -1},
    {"sort", 1, -1},
    {"batch_norm_inference", 5, 5},
    {"batch_norm_training", 3, 3},
    {"batch_norm_grad", 5, 5},
    {"uniform_quantize", 1, 1},
    {"uniform_dequantize", 1, 1},
    /* CHLO's own (its elementwise ones are checked where chlo_decompose.c matches them) */
    {"atan", 1, 1},
    {"square", 1, 1},
    {"conj", 1, 1},
    {"is_inf", 1, 1},
    {"is_pos_inf", 1, 1},
    {"is_neg_inf", 1, 1},
    {"erf_inv", 1, 1},
    {"lgamma", 1, 1},
    {"constant_like", 1, 1},
    {"top_k", 1, 1},
    {"mulhi", 2, 2},
    {"ragged_dot", 3, 3},
};

static kiln_status check_arity(const kiln_mlir_op_t *op) {
  const char *n = op->name;
  if (!strncmp(n, "stablehlo.", 10))
    n += 10;
  else if (!strncmp(n, "chlo.", 5))
    n += 5;
  else
    return NULL;
  for (size_t i = 0; i < sizeof kArity / sizeof kArity[0]; i++) {
    const arity_t *a = &kArity[i];
    if (strcmp(a->name, n) != 0) continue;
    if (op->num_operands < a->min_ops || (a->max_ops >= 0 && op->num_operands > a->max_ops))
      return SHC_INVALID(op, "%s takes %d%s operand(s), not %d", op->name, (int)a->min_ops,
                         a->max_ops < 0 ? " or more" : "", (int)op->num_operands);
    if (op->num_results < 1) return SHC_INVALID(op, "%s gives no result", op->name);
    for (int32_t k = 0; k < op->num_operands; k++)
      if (!op->operands[k]) return SHC_INVALID(op, "%s operand %d is missing", op->name, (int)k);
    return NULL;
  }
  return NULL;
}

kiln_status shc_convert_op(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  SHC_TRY(check_arity(op));
  const char *kind;
  if (is_check_op(op, &kind)) return convert_check(c, op, kind);
  if (!strcmp(op->name, "interpreter.run_parallel")) return shc_convert_run_parallel(c, op);
  if (!strcmp(op->name, "sdy.manual_computation")) return shc_convert_manual_computation(c, op);
  if (!strcmp(op->name, "sdy.sharding_constraint") || !strcmp(op->name, "sdy.reshard")) {
    /* Shardy's sharding hints (jax.lax.with_sharding_constraint, jax.sharding.reshard): the
     * value itself (a sharding says where a value lives, not what it is). */
    if (op->num_operands != 1 || op->num_results != 1 || !op->operands[0])
      return SHC_INVALID(op, "%s takes one operand and gives one result", op->name);
    const char *v;
    SHC_TRY(shc_lookup(c, op->operands[0], &v));
    shc_bind(c, &op->results[0], v);
    return NULL;
  }
  bool handled = false;
  SHC_TRY(shc_convert_quant_op(c, op, &handled));
  if (handled) return NULL;
  SHC_TRY(shc_convert_simple_op(c, op, &handled));
  if (handled) return NULL;
  SHC_TRY(shc_convert_control_op(c, op, &handled));
  if (handled) return NULL;
  SHC_TRY(shc_convert_complex_op(c, op, &handled));
  if (handled) return NULL;
  SHC_TRY(shc_convert_chlo_op(c, op, &handled));
  if (handled) return NULL;
  return SHC_UNIMPL(op, "op is not supported");
}

/* ---- the entry ---- */

static const kiln_mlir_attr_t *arg_attr(const kiln_mlir_op_t *fn, const char *list, int32_t i,
                                        const char *name) {
  const kiln_mlir_attr_t *a = kiln_mlir_op_attr(fn, list);
  if (!a || a->kind != KILN_MLIR_ATTR_ARRAY || i >= a->num_elements) return NULL;
  return kiln_mlir_attr_field(a->elements[i], name);
}

/* mhlo.layout_mode = "{1,0}" on an argument or result: that layout; "default"/"auto": none. */
static const char *layout_suffix(shc_ctx_t *c, const kiln_mlir_attr_t *a) {
  if (!a || a->kind != KILN_MLIR_ATTR_STRING || !a->str || a->str[0] != '{') return "";
  return kiln_arena_strdup(&c->arena, a->str);
}

static const kiln_mlir_op_t *find_entry(const kiln_mlir_module_t *m, const char *entry) {
  if (entry) return kiln_mlir_module_func(m, entry);
  const kiln_mlir_op_t *f = kiln_mlir_module_func(m, "main");
  if (f) return f;
  const kiln_mlir_op_t *pub = NULL;
  int npub = 0;
  for (int32_t i = 0; i < m->body.num_ops; i++) {
    const kiln_mlir_op_t *op = m->body.ops[i];
    if (strcmp(op->name, "func.func") != 0) continue;
    const kiln_mlir_attr_t *v = kiln_mlir_op_attr(op, "sym_visibility");
    if (v && v->str && !strcmp(v->str, "private")) continue;
    pub = op;
    npub++;
  }
  return npub == 1 ? pub : NULL;
}

static kiln_status convert_entry(shc_ctx_t *c, const kiln_mlir_op_t *fn, kiln_hlo_module_t **out) {
  if (fn->num_regions < 1 || fn->regions[0].num_blocks != 1)
    return SHC_UNIMPL(fn, "entry function without exactly one block");
  const kiln_mlir_block_t *b = &fn->regions[0].blocks[0];
  shc_scope_t s;
  shc_scope_init(&s, NULL);
  c->cur = &s;
  kiln_status st = NULL;
  kiln_strbuf_t header = {0}, alias = {0}, donors = {0};
  const kiln_mlir_op_t *ret_op = b->num_ops ? b->ops[b->num_ops - 1] : NULL;
  int32_t nresults = ret_op && is_terminator(ret_op) ? ret_op->num_operands : 0;
  for (int32_t i = 0; i < b->num_args && !st; i++) {
    const char *sh;
    st = shc_type_text(c, b->args[i].type, &sh);
    if (st) {
      st = kiln_status_annotate(st, "entry argument %d", (int)i);
      break;
    }
    sh = kiln_arena_printf(&c->arena, "%s%s", sh,
                           layout_suffix(c, arg_attr(fn, "arg_attrs", i, "mhlo.layout_mode")));
    shc_bind(c, &b->args[i], shc_emit(c, sh, "parameter(%d)", (int)i));
    const kiln_mlir_attr_t *al = arg_attr(fn, "arg_attrs", i, "tf.aliasing_output");
    if (al && al->kind == KILN_MLIR_ATTR_INTEGER) {
      if (nresults > 1)
        kiln_strbuf_printf(&alias, "%s{%" PRId64 "}: (%d, {}, may-alias)", alias.data ? ", " : "",
                           al->i, (int)i);
      else
        kiln_strbuf_printf(&alias, "%s{}: (%d, {}, may-alias)", alias.data ? ", " : "", (int)i);
    }
    const kiln_mlir_attr_t *dn = arg_attr(fn, "arg_attrs", i, "jax.buffer_donor");
    if (dn && shc_attr_int(dn, 0))
      kiln_strbuf_printf(&donors, "%s(%d, {})", donors.data ? ", " : "", (int)i);
  }
  const char **ret = NULL;
  int32_t nret = 0;
  c->entry_scope = &s;
  c->first_param = b->num_args;
  if (!st) st = shc_convert_block(c, b, &ret, &nret);
  c->entry_scope = NULL;
  const char *root = NULL;
  if (!st && c->check_mode) {
    kiln_strbuf_t sb = {0}, ob = {0};
    for (int32_t i = 0; i < c->num_outputs; i++) {
      kiln_strbuf_printf(&sb, "%s%s", i ? ", " : "", c->output_shapes[i]);
      kiln_strbuf_printf(&ob, "%s%s", i ? ", " : "", c->outputs[i]);
    }
    root = kiln_arena_printf(&c->arena, "(%s) tuple(%s)", sb.data ? kiln_strbuf_cstr(&sb) : "",
                             ob.data ? kiln_strbuf_cstr(&ob) : "");
    kiln_strbuf_free(&sb);
    kiln_strbuf_free(&ob);
  } else if (!st) {
    kiln_strbuf_t sb = {0}, ob = {0};
    for (int32_t i = 0; i < nret && !st; i++) {
      const char *sh;
      st = shc_type_text(c, ret_op->operands[i]->type, &sh);
      if (st) break;
      sh = kiln_arena_printf(&c->arena, "%s%s", sh,
                             layout_suffix(c, arg_attr(fn, "res_attrs", i, "mhlo.layout_mode")));
      kiln_strbuf_printf(&sb, "%s%s", i ? ", " : "", sh);
      kiln_strbuf_printf(&ob, "%s%s", i ? ", " : "", ret[i]);
    }
    if (!st) {
      if (nret == 1)
        root = kiln_arena_printf(&c->arena, "%s copy(%s)", kiln_strbuf_cstr(&sb), ret[0]);
      else
        root = kiln_arena_printf(&c->arena, "(%s) tuple(%s)", sb.data ? kiln_strbuf_cstr(&sb) : "",
                                 ob.data ? kiln_strbuf_cstr(&ob) : "");
    }
    kiln_strbuf_free(&sb);
    kiln_strbuf_free(&ob);
  }
  if (!st) {
    const char *mname = c->m->name ? c->m->name : "stablehlo";
    kiln_strbuf_printf(&header, "HloModule %s", mname);
    for (const char *p = kiln_strbuf_cstr(&header) + 10; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '_' || *p == '.' || *p == '-'))
        ((char *)p)[0] = '_';
    if (alias.data)
      kiln_strbuf_printf(&header, ", input_output_alias={ %s }", kiln_strbuf_cstr(&alias));
    if (donors.data)
      kiln_strbuf_printf(&header, ", buffer_donor={ %s }", kiln_strbuf_cstr(&donors));
    kiln_strbuf_append(&header, "\n\n");
    kiln_strbuf_append(&header, c->comps.data ? kiln_strbuf_cstr(&c->comps) : "");
    kiln_strbuf_printf(&header, "ENTRY main {\n%s", s.body.data ? kiln_strbuf_cstr(&s.body) : "");
    kiln_strbuf_printf(&header, "  ROOT %s = %s\n}\n", shc_fresh(c, "root"), root);
    kiln_hlo_parse_options_t po = {.filename = "<converted StableHLO>"};
    const char *text = kiln_strbuf_cstr(&header);
    kiln_stablehlo_dump_t dump = atomic_load(&g_dump);
    if (dump == KILN_STABLEHLO_DUMP_ALL) fprintf(stderr, "%s\n", text);
    st = kiln_hlo_parse_module(text, strlen(text), &po, out);
    if (!st) {
      st = kiln_hlo_module_verify(*out);
      if (st) {
        kiln_hlo_module_destroy(*out);
        *out = NULL;
      }
    }
    if (st) {
      if (dump != KILN_STABLEHLO_DUMP_NONE) fprintf(stderr, "%s\n", text);
      st = kiln_status_annotate(st,
                                "the converted HLO does not verify (a converter bug; set "
                                "KILN_STABLEHLO_DUMP=1 to see it)");
    }
  }
  kiln_strbuf_free(&header);
  kiln_strbuf_free(&alias);
  kiln_strbuf_free(&donors);
  shc_scope_free(&s);
  c->cur = NULL;
  return st;
}

static void ctx_init(shc_ctx_t *c, const kiln_mlir_module_t *m) {
  memset(c, 0, sizeof *c);
  c->m = m;
  kiln_arena_init(&c->arena);
}

static void ctx_free(shc_ctx_t *c) {
  kiln_arena_destroy(&c->arena);
  kiln_strbuf_free(&c->comps);
  kiln_free(c->outputs);
  kiln_free(c->output_shapes);
  kiln_free(c->checks);
  kiln_free(c->params);
}

static kiln_status stablehlo_to_hlo(const kiln_mlir_module_t *m, const char *entry,
                                    kiln_hlo_module_t **out) {
  *out = NULL;
  const kiln_mlir_op_t *fn = find_entry(m, entry);
  if (!fn)
    return KILN_ERR_INVALID("no entry function %s%s%s", entry ? "@" : "",
                            entry ? entry : "(no @main and not exactly one public function)", "");
  shc_ctx_t c;
  ctx_init(&c, m);
  kiln_status s = convert_entry(&c, fn, out);
  ctx_free(&c);
  return s;
}

static bool block_has_checks(const kiln_mlir_block_t *b, const kiln_mlir_module_t *m, int depth);

static bool op_has_checks(const kiln_mlir_op_t *op, const kiln_mlir_module_t *m, int depth) {
  const char *kind;
  if (is_check_op(op, &kind)) return true;
  for (int32_t r = 0; r < op->num_regions; r++)
    for (int32_t b = 0; b < op->regions[r].num_blocks; b++)
      if (block_has_checks(&op->regions[r].blocks[b], m, depth)) return true;
  return false;
}

static bool block_has_checks(const kiln_mlir_block_t *b, const kiln_mlir_module_t *m, int depth) {
  (void)m;
  if (depth > 64) return false;
  for (int32_t i = 0; i < b->num_ops; i++)
    if (op_has_checks(b->ops[i], m, depth + 1)) return true;
  return false;
}

bool kiln_stablehlo_func_has_checks(const kiln_mlir_op_t *func) {
  return op_has_checks(func, NULL, 0);
}

kiln_status kiln_stablehlo_checks_to_hlo(const kiln_mlir_module_t *m, const kiln_mlir_op_t *func,
                                         kiln_hlo_module_t **out, kiln_stablehlo_check_t **checks,
                                         int32_t *num_checks, kiln_literal_t ***params,
                                         int32_t *num_params) {
  *out = NULL;
  *checks = NULL;
  *num_checks = 0;
  if (params) *params = NULL;
  if (num_params) *num_params = 0;
  shc_ctx_t c;
  ctx_init(&c, m);
  c.check_mode = true;
  c.constants_as_params = params != NULL;
  kiln_status s = convert_entry(&c, func, out);
  if (!s) {
    *checks = c.checks;
    *num_checks = c.num_checks;
    c.checks = NULL;
    if (params) {
      *params = c.params;
      *num_params = c.num_params;
      c.params = NULL;
    }
  }
  ctx_free(&c);
  return s;
}

static kiln_status module_from_bytes(const void *bytes, size_t n, const char *name,
                                     kiln_hlo_module_t **out) {
  *out = NULL;
  kiln_mlir_module_t *m = NULL;
  if (!name) name = "<mlir>";
  if (kiln_mlir_bytes_are_bytecode(bytes, n)) {
    KILN_RETURN_IF_ERROR(kiln_mlir_read_bytecode(bytes, n, &m), "while reading %s (MLIR bytecode)",
                         name);
  } else {
    KILN_RETURN_IF_ERROR(kiln_mlir_parse_text(bytes, n, name, &m), "while reading %s (MLIR text)",
                         name);
  }
  kiln_status s = kiln_stablehlo_to_hlo(m, NULL, out);
  kiln_mlir_module_destroy(m);
  if (s) return kiln_status_annotate(s, "while converting %s to HLO", name);
  return NULL;
}

/* Every allocation may fail: an out-of-memory scope (base/alloc.h) around the whole read. */
kiln_status kiln_stablehlo_to_hlo(const kiln_mlir_module_t *m, const char *entry,
                                  kiln_hlo_module_t **out) {
  KILN_OOM_SCOPED_RETURN(stablehlo_to_hlo(m, entry, out), if (out) *out = NULL,
                         "converting StableHLO to HLO");
}

/* Every allocation may fail: an out-of-memory scope (base/alloc.h) around the whole read. */
kiln_status kiln_stablehlo_module_from_bytes(const void *bytes, size_t n, const char *name,
                                             kiln_hlo_module_t **out) {
  KILN_OOM_SCOPED_RETURN(module_from_bytes(bytes, n, name, out), if (out) *out = NULL,
                         "reading a StableHLO program");
}
