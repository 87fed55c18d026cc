/* CHLO ops -> HLO: the ones kiln's HLO has as an opcode with the same semantics (tan, erf,
 * sinh, cosh, asin, acos, asinh, acosh, atanh, top_k), the broadcasting binary ops
 * (explicit broadcast, then the op), and small decompositions (atan = atan2(x, 1), square,
 * conj, is_inf / is_pos_inf / is_neg_inf, constant_like). What is not here is UNIMPLEMENTED
 * naming the op. */
#include <inttypes.h>
#include <string.h>

#include "compiler/frontend/stablehlo_to_hlo_internal.h"

static const struct {
  const char *chlo, *hlo;
} kUnary[] = {
    {"tan", "tan"},   {"erf", "erf"},     {"sinh", "sinh"},   {"cosh", "cosh"},   {"asin", "asin"},
    {"acos", "acos"}, {"asinh", "asinh"}, {"acosh", "acosh"}, {"atanh", "atanh"},
};

static const struct {
  const char *chlo, *hlo;
} kBinary[] = {
    {"broadcast_add", "add"},
    {"broadcast_subtract", "subtract"},
    {"broadcast_multiply", "multiply"},
    {"broadcast_divide", "divide"},
    {"broadcast_maximum", "maximum"},
    {"broadcast_minimum", "minimum"},
    {"broadcast_power", "power"},
    {"broadcast_remainder", "remainder"},
    {"broadcast_and", "and"},
    {"broadcast_or", "or"},
    {"broadcast_xor", "xor"},
    {"broadcast_atan2", "atan2"},
    {"broadcast_complex", "complex"},
    {"broadcast_shift_left", "shift-left"},
    {"broadcast_shift_right_arithmetic", "shift-right-arithmetic"},
    {"broadcast_shift_right_logical", "shift-right-logical"},
    {"broadcast_compare", "compare"},
};

/* Broadcasts operand i of op to `shape` of rank `rank` (numpy rules: trailing alignment, or
 * the op's broadcast_dimensions). */
static kiln_status broadcast_operand(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t i,
                                     const kiln_mlir_type_t *rt, const char **out) {
  const char *v;
  SHC_TRY(shc_lookup(c, op->operands[i], &v));
  const kiln_mlir_type_t *t = op->operands[i]->type;
  int32_t r = t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0, rr = rt->rank;
  bool same = r == rr;
  for (int32_t k = 0; same && k < r; k++) same = t->dims[k] == rt->dims[k];
  if (same) {
    *out = v;
    return NULL;
  }
  if (r > 64 || rr > 64) return SHC_UNIMPL(op, "rank above 64");
  int64_t dims[64];
  for (int32_t k = 0; k < r; k++) dims[k] = rr - r + k;
  int64_t *bd;
  int32_t nbd;
  SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "broadcast_dimensions"),
                        "broadcast_dimensions", &bd, &nbd));
  if (nbd == r && r > 0 && r < rr && i == 0) memcpy(dims, bd, sizeof(int64_t) * (size_t)r);
  if (nbd == r && r > 0 && r < rr && i == 1) memcpy(dims, bd, sizeof(int64_t) * (size_t)r);
  /* degenerate (size 1) dimensions that expand: reshape them away first */
  const char *elem;
  SHC_TRY(shc_elem_text(t->element ? t->element : t, &elem));
  int64_t kept[64];
  int32_t nk = 0;
  kiln_strbuf_t sb = {0};
  for (int32_t k = 0; k < r; k++) {
    if (t->dims[k] == 1 && rt->dims[dims[k]] != 1) continue;
    kiln_strbuf_printf(&sb, "%s%" PRId64, nk ? "," : "", t->dims[k]);
    kept[nk++] = dims[k];
  }
  if (nk != r)
    v = shc_emit(c,
                 kiln_arena_printf(&c->arena, "%s[%s]", elem, sb.data ? kiln_strbuf_cstr(&sb) : ""),
                 "reshape(%s)", v);
  kiln_strbuf_free(&sb);
  kiln_strbuf_t rb = {0};
  for (int32_t k = 0; k < rr; k++) kiln_strbuf_printf(&rb, "%s%" PRId64, k ? "," : "", rt->dims[k]);
  *out = shc_emit(
      c, kiln_arena_printf(&c->arena, "%s[%s]", elem, rb.data ? kiln_strbuf_cstr(&rb) : ""),
      "broadcast(%s), dimensions=%s", v, shc_ints_text(c, kept, nk));
  kiln_strbuf_free(&rb);
  return NULL;
}

kiln_status shc_convert_chlo_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled) {
  *handled = false;
  if (strncmp(op->name, "chlo.", 5) != 0) return NULL;
  const char *n = op->name + 5;
  *handled = true;
  if (op->num_results != 1 && strcmp(n, "top_k") != 0)
    return SHC_UNIMPL(op, "CHLO op is not supported");
  const char *sh = NULL, *x = NULL;
  if (op->num_results == 1) SHC_TRY(shc_type_text(c, op->results[0].type, &sh));
  for (size_t i = 0; i < sizeof kUnary / sizeof kUnary[0]; i++) {
    if (strcmp(n, kUnary[i].chlo) != 0) continue;
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    shc_bind(c, &op->results[0], shc_emit(c, sh, "%s(%s)", kUnary[i].hlo, x));
    return NULL;
  }
  for (size_t i = 0; i < sizeof kBinary / sizeof kBinary[0]; i++) {
    if (strcmp(n, kBinary[i].chlo) != 0) continue;
    const kiln_mlir_type_t *rt = op->results[0].type;
    if (rt->kind != KILN_MLIR_TYPE_TENSOR) return SHC_UNIMPL(op, "non-tensor result");
    const char *a, *b;
    SHC_TRY(broadcast_operand(c, op, 0, rt, &a));
    SHC_TRY(broadcast_operand(c, op, 1, rt, &b));
    if (!strcmp(kBinary[i].hlo, "compare")) {
      const char *dir = shc_attr_enum(kiln_mlir_op_attr(op, "comparison_direction"));
      const char *ty = shc_attr_enum(kiln_mlir_op_attr(op, "compare_type"));
      const kiln_mlir_type_t *e = shc_elem_type(op->operands[0]->type);
      if (!ty || !strcmp(ty, "NOTYPE"))
        ty = shc_is_float(e) || shc_is_complex(e)   ? "FLOAT"
             : shc_is_unsigned(e) || shc_is_pred(e) ? "UNSIGNED"
                                                    : "SIGNED";
      shc_bind(
          c, &op->results[0],
          shc_emit(c, sh, "compare(%s, %s), direction=%s, type=%s", a, b, dir ? dir : "EQ", ty));
    } else {
      shc_bind(c, &op->results[0], shc_emit(c, sh, "%s(%s, %s)", kBinary[i].hlo, a, b));
    }
    return NULL;
  }
  const kiln_mlir_type_t *rt = op->num_results == 1 ? op->results[0].type : NULL;
  int32_t rank = rt && rt->kind == KILN_MLIR_TYPE_TENSOR ? rt->rank : 0;
  if (!strcmp(n, "atan")) {
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    const char *one;
    SHC_TRY(shc_scalar_const(c, shc_elem_type(rt), 1.0, &one));
    one = shc_broadcast_scalar(c, one, sh, rank);
    shc_bind(c, &op->results[0], shc_emit(c, sh, "atan2(%s, %s)", x, one));
    return NULL;
  }
  if (!strcmp(n, "square")) {
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    shc_bind(c, &op->results[0], shc_emit(c, sh, "multiply(%s, %s)", x, x));
    return NULL;
  }
  if (!strcmp(n, "conj")) {
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    const kiln_mlir_type_t *e = shc_elem_type(rt);
    if (!shc_is_complex(e)) {
      shc_bind(c, &op->results[0], x);
      return NULL;
    }
    const char *pe;
    SHC_TRY(shc_elem_text(e->element, &pe));
    kiln_strbuf_t b = {0};
    kiln_strbuf_printf(&b, "%s[", pe);
    for (int32_t k = 0; k < rank; k++)
      kiln_strbuf_printf(&b, "%s%" PRId64, k ? "," : "", rt->dims[k]);
    kiln_strbuf_append_char(&b, ']');
    const char *psh = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
    const char *re = shc_emit(c, psh, "real(%s)", x);
    const char *im = shc_emit(c, psh, "imag(%s)", x);
    const char *nim = shc_emit(c, psh, "negate(%s)", im);
    shc_bind(c, &op->results[0], shc_emit(c, sh, "complex(%s, %s)", re, nim));
    return NULL;
  }
  if (!strcmp(n, "is_inf") || !strcmp(n, "is_pos_inf") || !strcmp(n, "is_neg_inf")) {
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    const kiln_mlir_type_t *e = shc_elem_type(op->operands[0]->type);
    const char *esh;
    SHC_TRY(shc_type_text(c, op->operands[0]->type, &esh));
    const char *inf;
    SHC_TRY(shc_scalar_const(c, e, 1.0 / 0.0, &inf));
    inf = shc_broadcast_scalar(c, inf, esh, rank);
    if (!strcmp(n, "is_inf")) {
      const char *a = shc_emit(c, esh, "abs(%s)", x);
      shc_bind(c, &op->results[0],
               shc_emit(c, sh, "compare(%s, %s), direction=EQ, type=FLOAT", a, inf));
    } else {
      if (!strcmp(n, "is_neg_inf")) inf = shc_emit(c, esh, "negate(%s)", inf);
      shc_bind(c, &op->results[0],
               shc_emit(c, sh, "compare(%s, %s), direction=EQ, type=FLOAT", x, inf));
    }
    return NULL;
  }
  if (!strcmp(n, "constant_like")) {
    const kiln_mlir_attr_t *v = kiln_mlir_op_attr(op, "value");
    if (!v) return SHC_INVALID(op, "no value");
    double d = v->kind == KILN_MLIR_ATTR_FLOAT ? v->f : (double)shc_attr_int(v, 0);
    const char *s;
    SHC_TRY(shc_scalar_const(c, shc_elem_type(rt), d, &s));
    shc_bind(c, &op->results[0], shc_broadcast_scalar(c, s, sh, rank));
    return NULL;
  }
  if (!strcmp(n, "top_k")) {
    if (op->num_results != 2) return SHC_INVALID(op, "expected 2 results");
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    const char *tsh;
    SHC_TRY(shc_results_tuple_shape(c, op, &tsh));
    return shc_bind_tuple_results(c, op,
                                  shc_emit(c, tsh, "topk(%s), k=%" PRId64 ", largest=true", x,
                                           shc_attr_int(kiln_mlir_op_attr(op, "k"), 1)));
  }
  return SHC_UNIMPL(op, "CHLO op is not supported");
}
