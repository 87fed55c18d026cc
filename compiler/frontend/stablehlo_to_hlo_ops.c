/* StableHLO -> HLO: elementwise and structural ops (one HLO instruction each, or a few). */
#include <inttypes.h>
#include <string.h>

#include "compiler/frontend/stablehlo_to_hlo_internal.h"

typedef struct op_map {
  const char *mlir; /* without "stablehlo." */
  const char *hlo;
} op_map_t;

static const op_map_t kElementwise[] = {
    {"abs", "abs"},
    {"add", "add"},
    {"and", "and"},
    {"atan2", "atan2"},
    {"cbrt", "cbrt"},
    {"ceil", "ceil"},
    {"clamp", "clamp"},
    {"complex", "complex"},
    {"cosine", "cosine"},
    {"count_leading_zeros", "count-leading-zeros"},
    {"divide", "divide"},
    {"exponential", "exponential"},
    {"exponential_minus_one", "exponential-minus-one"},
    {"floor", "floor"},
    {"imag", "imag"},
    {"is_finite", "is-finite"},
    {"log", "log"},
    {"log_plus_one", "log-plus-one"},
    {"logistic", "logistic"},
    {"maximum", "maximum"},
    {"minimum", "minimum"},
    {"multiply", "multiply"},
    {"negate", "negate"},
    {"not", "not"},
    {"or", "or"},
    {"popcnt", "popcnt"},
    {"power", "power"},
    {"real", "real"},
    {"remainder", "remainder"},
    {"round_nearest_afz", "round-nearest-afz"},
    {"round_nearest_even", "round-nearest-even"},
    {"rsqrt", "rsqrt"},
    {"select", "select"},
    {"shift_left", "shift-left"},
    {"shift_right_arithmetic", "shift-right-arithmetic"},
    {"shift_right_logical", "shift-right-logical"},
    {"sign", "sign"},
    {"sine", "sine"},
    {"sqrt", "sqrt"},
    {"subtract", "subtract"},
    {"tan", "tan"},
    {"tanh", "tanh"},
    {"xor", "xor"},
    {"convert", "convert"},
    {"bitcast_convert", "bitcast-convert"},
    {"reshape", "reshape"},
    {"dynamic_reshape", "reshape"},
    {"after_all", "after-all"},
    {"tuple", "tuple"},
    {"dynamic_update_slice", "dynamic-update-slice"},
    {"replica_id", "replica-id"},
    {"partition_id", "partition-id"},
    {"cholesky", NULL},
};

static kiln_status result_shape(shc_ctx_t *c, const kiln_mlir_op_t *op, const char **sh) {
  if (op->num_results != 1) return SHC_INVALID(op, "expected one result");
  return shc_type_text(c, op->results[0].type, sh);
}

static int32_t rank_of(const kiln_mlir_type_t *t) {
  return t && t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0;
}

/* Complex cbrt and atan2, which HLO has only for reals (XLA expands them likewise):
 * cbrt z = z^(1/3) (principal); atan2(y, x) = -i log((x + i y) / sqrt(x^2 + y^2)). */
static kiln_status convert_complex_math(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *n) {
  const kiln_mlir_type_t *rt = op->results[0].type;
  const char *sh, *ce, *x, *y;
  SHC_TRY(result_shape(c, op, &sh));
  SHC_TRY(shc_elem_text(shc_elem_type(rt), &ce));
  const char *ssh = kiln_arena_printf(&c->arena, "%s[]", ce);
  int32_t rank = rank_of(rt);
#define CONST(v) shc_broadcast_scalar(c, shc_emit(c, ssh, "constant(%s)", v), sh, rank)
  SHC_TRY(shc_lookup(c, op->operands[0], &x));
  if (!strcmp(n, "cbrt")) {
    const char *third = CONST("(0.33333333333333333, 0)");
    shc_bind(c, &op->results[0], shc_emit(c, sh, "power(%s, %s)", x, third));
    return NULL;
  }
  SHC_TRY(shc_lookup(c, op->operands[1], &y));
  const char *lhs = x, *rhs = y; /* atan2(lhs, rhs): lhs plays y, rhs plays x */
  const char *iy = shc_emit(c, sh, "multiply(%s, %s)", CONST("(0, 1)"), lhs);
  const char *num = shc_emit(c, sh, "add(%s, %s)", rhs, iy);
  const char *r2 = shc_emit(c, sh, "add(%s, %s)", shc_emit(c, sh, "multiply(%s, %s)", rhs, rhs),
                            shc_emit(c, sh, "multiply(%s, %s)", lhs, lhs));
  const char *q = shc_emit(c, sh, "divide(%s, %s)", num, shc_emit(c, sh, "sqrt(%s)", r2));
  shc_bind(c, &op->results[0],
           shc_emit(c, sh, "multiply(%s, %s)", CONST("(0, -1)"), shc_emit(c, sh, "log(%s)", q)));
#undef CONST
  return NULL;
}

/* "u64[2,3,64]": an unsigned type of `bits` over t's dims plus `extra` (when > 0). */
static const char *udims_text(shc_ctx_t *c, int bits, const kiln_mlir_type_t *t, int64_t extra) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "u%d[", bits);
  int32_t r = rank_of(t);
  for (int32_t i = 0; i < r; i++) kiln_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", t->dims[i]);
  if (extra > 0) kiln_strbuf_printf(&b, "%s%" PRId64, r ? "," : "", extra);
  kiln_strbuf_append_char(&b, ']');
  const char *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return out;
}

/* Bit width of a non-pred integer or float element (f8E4M3FN: 8, bf16: 16), 0 if unknown. */
static int elem_bits(const kiln_mlir_type_t *e) {
  if (e && e->kind == KILN_MLIR_TYPE_INTEGER) return (int)e->width;
  const char *t = NULL;
  if (!e || e->kind != KILN_MLIR_TYPE_FLOAT || shc_elem_text(e, &t)) return 0;
  while (*t && (*t < '0' || *t > '9')) t++;
  int bits = 0;
  while (*t >= '0' && *t <= '9') bits = bits * 10 + (*t++ - '0');
  return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? bits : 0;
}

/* bitcast_convert to or from i1, whose elements StableHLO counts as single bits (element k is
 * bit k of the wider value) while HLO's pred is a byte: pred[..., N] -> T[...] shifts each
 * bit into place and ors them (a reduce); T[...] -> pred[..., N] shifts right by an iota. */
static kiln_status convert_pred_bitcast(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const kiln_mlir_type_t *it = op->operands[0]->type, *rt = op->results[0].type;
  bool from_pred = shc_is_pred(shc_elem_type(it));
  const kiln_mlir_type_t *wide = from_pred ? rt : it;
  int bits = elem_bits(shc_elem_type(wide));
  if (!bits)
    return SHC_UNIMPL(op, "bitcast_convert between i1 and this element type is not supported");
  const char *sh, *x;
  SHC_TRY(result_shape(c, op, &sh));
  SHC_TRY(shc_lookup(c, op->operands[0], &x));
  const char *ush = udims_text(c, bits, wide, 0), *bsh = udims_text(c, bits, wide, bits);
  int32_t r = rank_of(wide);
  const char *io = shc_emit(c, bsh, "iota(), iota_dimension=%d", (int)r);
  const char *zero = shc_emit(c, kiln_arena_printf(&c->arena, "u%d[]", bits), "constant(0)");
  if (from_pred) {
    const char *name = shc_fresh(c, "bits_or");
    kiln_strbuf_printf(&c->comps,
                       "%s {\n  a = u%d[] parameter(0)\n  b = u%d[] parameter(1)\n"
                       "  ROOT o = u%d[] or(a, b)\n}\n\n",
                       name, bits, bits, bits);
    const char *u = shc_emit(c, bsh, "convert(%s)", x);
    const char *sl = shc_emit(c, bsh, "shift-left(%s, %s)", u, io);
    const char *red =
        shc_emit(c, ush, "reduce(%s, %s), dimensions={%d}, to_apply=%s", sl, zero, (int)r, name);
    shc_bind(c, &op->results[0], shc_emit(c, sh, "bitcast-convert(%s)", red));
    return NULL;
  }
  int64_t dims[64];
  for (int32_t i = 0; i < r && i < 64; i++) dims[i] = i;
  const char *u = shc_emit(c, ush, "bitcast-convert(%s)", x);
  const char *b = shc_emit(c, bsh, "broadcast(%s), dimensions=%s", u, shc_ints_text(c, dims, r));
  const char *sr = shc_emit(c, bsh, "shift-right-logical(%s, %s)", b, io);
  const char *one = shc_emit(c, kiln_arena_printf(&c->arena, "u%d[]", bits), "constant(1)");
  const char *a = shc_emit(c, bsh, "and(%s, %s)", sr, shc_broadcast_scalar(c, one, bsh, r + 1));
  shc_bind(c, &op->results[0],
           shc_emit(c, sh, "compare(%s, %s), direction=NE, type=UNSIGNED", a,
                    shc_broadcast_scalar(c, zero, bsh, r + 1)));
  return NULL;
}

static kiln_status convert_constant(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const kiln_mlir_attr_t *v = kiln_mlir_op_attr(op, "value");
  if (!v || v->kind != KILN_MLIR_ATTR_DENSE_ELEMENTS || !v->literal)
    return SHC_UNIMPL(op, "constant value is not a dense elements attribute");
  const char *sh;
  SHC_TRY(result_shape(c, op, &sh));
  if (c->constants_as_params && c->cur == c->entry_scope && c->entry_scope) {
    if (c->num_params == c->cap_params) {
      c->cap_params = c->cap_params ? c->cap_params * 2 : 16;
      c->params = kiln_realloc(c->params, sizeof *c->params * (size_t)c->cap_params);
    }
    c->params[c->num_params] = v->literal;
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "parameter(%d)", (int)(c->first_param + c->num_params)));
    c->num_params++;
    return NULL;
  }
  kiln_strbuf_t b = {0};
  kiln_literal_print(&b, v->literal);
  shc_bind(c, &op->results[0], shc_emit(c, sh, "constant(%s)", kiln_strbuf_cstr(&b)));
  kiln_strbuf_free(&b);
  return NULL;
}

/* "window={size=2x2 stride=1x1 pad=0_0x0_0 lhs_dilate=1x1 rhs_dilate=1x1}" or "" (rank 0). */
static kiln_status window_text(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t rank,
                               const int64_t *size, const int64_t *stride, const int64_t *pad,
                               const int64_t *lhs_dil, const int64_t *rhs_dil,
                               const int64_t *reversal, const char **out) {
  if (rank == 0) {
    *out = "";
    return NULL;
  }
  (void)op;
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, ", window={size=");
  for (int32_t i = 0; i < rank; i++) kiln_strbuf_printf(&b, "%s%" PRId64, i ? "x" : "", size[i]);
  kiln_strbuf_append(&b, " stride=");
  for (int32_t i = 0; i < rank; i++)
    kiln_strbuf_printf(&b, "%s%" PRId64, i ? "x" : "", stride ? stride[i] : 1);
  kiln_strbuf_append(&b, " pad=");
  for (int32_t i = 0; i < rank; i++)
    kiln_strbuf_printf(&b, "%s%" PRId64 "_%" PRId64, i ? "x" : "", pad ? pad[2 * i] : 0,
                       pad ? pad[2 * i + 1] : 0);
  kiln_strbuf_append(&b, " lhs_dilate=");
  for (int32_t i = 0; i < rank; i++)
    kiln_strbuf_printf(&b, "%s%" PRId64, i ? "x" : "", lhs_dil ? lhs_dil[i] : 1);
  kiln_strbuf_append(&b, " rhs_dilate=");
  for (int32_t i = 0; i < rank; i++)
    kiln_strbuf_printf(&b, "%s%" PRId64, i ? "x" : "", rhs_dil ? rhs_dil[i] : 1);
  bool any_rev = false;
  for (int32_t i = 0; reversal && i < rank; i++) any_rev |= reversal[i] != 0;
  if (any_rev) {
    kiln_strbuf_append(&b, " rhs_reversal=");
    for (int32_t i = 0; i < rank; i++)
      kiln_strbuf_printf(&b, "%s%d", i ? "x" : "", reversal[i] ? 1 : 0);
  }
  kiln_strbuf_append_char(&b, '}');
  *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return NULL;
}

/* Reads an optional integer list attribute that must have `n` elements when present. */
static kiln_status opt_ints(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *name, int32_t n,
                            int64_t **out) {
  int32_t got;
  SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, name), name, out, &got));
  if (got == 0)
    *out = NULL;
  else if (got != n)
    return SHC_INVALID(op, "%s has %d elements, expected %d", name, (int)got, (int)n);
  return NULL;
}

kiln_status shc_window_attrs(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t rank,
                             const char *dims_name, const char **out);
kiln_status shc_window_attrs(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t rank,
                             const char *dims_name, const char **out) {
  int64_t *size, *stride, *pad, *ld, *rd;
  SHC_TRY(opt_ints(c, op, dims_name, rank, &size));
  if (!size) return SHC_INVALID(op, "no %s", dims_name);
  SHC_TRY(opt_ints(c, op, "window_strides", rank, &stride));
  SHC_TRY(opt_ints(c, op, "padding", 2 * rank, &pad));
  SHC_TRY(opt_ints(c, op, "base_dilations", rank, &ld));
  SHC_TRY(opt_ints(c, op, "window_dilations", rank, &rd));
  return window_text(c, op, rank, size, stride, pad, ld, rd, NULL, out);
}

kiln_status shc_conv_window(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t nspatial,
                            const int64_t *kernel_sizes, int64_t *pad_operand, const char **out);
kiln_status shc_conv_window(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t nspatial,
                            const int64_t *kernel_sizes, int64_t *pad_operand, const char **out) {
  int64_t *stride, *pad, *ld, *rd, *rev;
  SHC_TRY(opt_ints(c, op, "window_strides", nspatial, &stride));
  if (pad_operand)
    pad = pad_operand;
  else
    SHC_TRY(opt_ints(c, op, "padding", 2 * nspatial, &pad));
  SHC_TRY(opt_ints(c, op, "lhs_dilation", nspatial, &ld));
  SHC_TRY(opt_ints(c, op, "rhs_dilation", nspatial, &rd));
  SHC_TRY(opt_ints(c, op, "window_reversal", nspatial, &rev));
  return window_text(c, op, nspatial, kernel_sizes, stride, pad, ld, rd, rev, out);
}

static const char *compare_type(const kiln_mlir_op_t *op) {
  const char *t = shc_attr_enum(kiln_mlir_op_attr(op, "compare_type"));
  if (t && strcmp(t, "NOTYPE") != 0) return t;
  const kiln_mlir_type_t *e = shc_elem_type(op->operands[0]->type);
  if (shc_is_float(e) || shc_is_complex(e)) return "FLOAT";
  if (shc_is_unsigned(e) || shc_is_pred(e)) return "UNSIGNED";
  return "SIGNED";
}

kiln_status shc_const_operand_ints(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t i, int64_t **out,
                                   int32_t *n) {
  const kiln_mlir_value_t *v = op->operands[i];
  const kiln_mlir_attr_t *val = v->def && !strcmp(v->def->name, "stablehlo.constant")
                                    ? kiln_mlir_op_attr(v->def, "value")
                                    : NULL;
  if (!val)
    return SHC_UNIMPL(op, "operand %d is not a constant (a genuinely dynamic shape)", (int)i);
  return shc_attr_ints(c, op, val, "operand", out, n);
}

/* Complex compare EQ / NE (per part, as XLA) and maximum / minimum (lexicographic on (real,
 * imag), as the StableHLO spec orders complex numbers). */
static kiln_status convert_complex_order(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *n,
                                         bool *handled) {
  const kiln_mlir_type_t *ot = op->operands[0]->type, *e = shc_elem_type(ot);
  *handled = false;
  if (!shc_is_complex(e)) return NULL;
  const char *dir = NULL;
  if (!strcmp(n, "compare")) {
    dir = shc_attr_enum(kiln_mlir_op_attr(op, "comparison_direction"));
    if (!dir || (strcmp(dir, "EQ") != 0 && strcmp(dir, "NE") != 0)) return NULL;
  } else if (strcmp(n, "maximum") != 0 && strcmp(n, "minimum") != 0) {
    return NULL;
  }
  *handled = true;
  const char *sh, *a, *b, *pe;
  SHC_TRY(shc_type_text(c, op->results[0].type, &sh));
  SHC_TRY(shc_lookup(c, op->operands[0], &a));
  SHC_TRY(shc_lookup(c, op->operands[1], &b));
  SHC_TRY(shc_elem_text(e->element, &pe));
  kiln_strbuf_t pb = {0}, bb = {0};
  kiln_strbuf_printf(&pb, "%s[", pe);
  kiln_strbuf_append(&bb, "pred[");
  for (int32_t i = 0; i < rank_of(ot); i++) {
    kiln_strbuf_printf(&pb, "%s%" PRId64, i ? "," : "", ot->dims[i]);
    kiln_strbuf_printf(&bb, "%s%" PRId64, i ? "," : "", ot->dims[i]);
  }
  kiln_strbuf_append_char(&pb, ']');
  kiln_strbuf_append_char(&bb, ']');
  const char *psh = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&pb));
  const char *bsh = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&bb));
  kiln_strbuf_free(&pb);
  kiln_strbuf_free(&bb);
  const char *ar = shc_emit(c, psh, "real(%s)", a), *ai = shc_emit(c, psh, "imag(%s)", a);
  const char *br = shc_emit(c, psh, "real(%s)", b), *bi = shc_emit(c, psh, "imag(%s)", b);
  if (dir) {
    const char *x = shc_emit(c, bsh, "compare(%s, %s), direction=%s", ar, br, dir);
    const char *y = shc_emit(c, bsh, "compare(%s, %s), direction=%s", ai, bi, dir);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "%s(%s, %s)", !strcmp(dir, "EQ") ? "and" : "or", x, y));
    return NULL;
  }
  const char *d = !strcmp(n, "maximum") ? "GT" : "LT";
  const char *x = shc_emit(c, bsh, "compare(%s, %s), direction=%s", ar, br, d);
  const char *req = shc_emit(c, bsh, "compare(%s, %s), direction=EQ", ar, br);
  const char *y = shc_emit(c, bsh, "compare(%s, %s), direction=%s", ai, bi, d);
  const char *pick = shc_emit(c, bsh, "or(%s, %s)", x, shc_emit(c, bsh, "and(%s, %s)", req, y));
  shc_bind(c, &op->results[0], shc_emit(c, sh, "select(%s, %s, %s)", pick, a, b));
  return NULL;
}

kiln_status shc_convert_simple_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled) {
  *handled = false;
  if (strncmp(op->name, "stablehlo.", 10) != 0) return NULL;
  const char *n = op->name + 10;
  const char *sh = NULL, *ops = NULL;
  *handled = true;
  if (!strcmp(n, "constant")) return convert_constant(c, op);
  if (op->num_operands == 2 && op->num_results == 1) {
    bool h;
    SHC_TRY(convert_complex_order(c, op, n, &h));
    if (h) return NULL;
  }
  if (c->spmd && (!strcmp(n, "replica_id") || !strcmp(n, "partition_id"))) {
    SHC_TRY(result_shape(c, op, &sh));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "constant(%" PRId64 ")",
                      !strcmp(n, "replica_id") ? c->replica : c->partition));
    return NULL;
  }
  if (!strcmp(n, "convert") && shc_is_complex(shc_elem_type(op->operands[0]->type)) &&
      !shc_is_complex(shc_elem_type(op->results[0].type))) {
    /* complex -> real: the real part (XLA's convert refuses complex -> real) */
    const kiln_mlir_type_t *ct = op->operands[0]->type;
    const char *pe;
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    SHC_TRY(shc_elem_text(shc_elem_type(ct)->element, &pe));
    kiln_strbuf_t b = {0};
    kiln_strbuf_printf(&b, "%s[", pe);
    for (int32_t i = 0; i < rank_of(ct); i++)
      kiln_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", ct->dims[i]);
    kiln_strbuf_append_char(&b, ']');
    const char *re = shc_emit(c, kiln_strbuf_cstr(&b), "real(%s)", ops);
    kiln_strbuf_free(&b);
    shc_bind(c, &op->results[0], shc_emit(c, sh, "convert(%s)", re));
    return NULL;
  }
  if ((!strcmp(n, "real") || !strcmp(n, "imag")) && op->num_operands == 1 &&
      !shc_is_complex(shc_elem_type(op->operands[0]->type))) {
    /* of a real value: the value itself / zeros (HLO's real / imag take complex values) */
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    if (!strcmp(n, "real")) {
      shc_bind(c, &op->results[0], ops);
    } else {
      const char *z;
      SHC_TRY(shc_scalar_const(c, shc_elem_type(op->results[0].type), 0, &z));
      shc_bind(c, &op->results[0], shc_broadcast_scalar(c, z, sh, rank_of(op->results[0].type)));
    }
    return NULL;
  }
  if (!strcmp(n, "get_dimension_size")) {
    /* shapes are static here: the size is a constant */
    SHC_TRY(result_shape(c, op, &sh));
    const kiln_mlir_type_t *ot = op->operands[0]->type;
    int64_t d = shc_attr_int(kiln_mlir_op_attr(op, "dimension"), 0);
    if (d < 0 || d >= rank_of(ot)) return SHC_INVALID(op, "dimension %" PRId64 " out of range", d);
    shc_bind(c, &op->results[0], shc_emit(c, sh, "constant(%" PRId64 ")", ot->dims[d]));
    return NULL;
  }
  if (!strcmp(n, "bitcast_convert") && op->num_results == 1 && op->num_operands == 1 &&
      shc_is_pred(shc_elem_type(op->operands[0]->type)) !=
          shc_is_pred(shc_elem_type(op->results[0].type)))
    return convert_pred_bitcast(c, op);
  if ((!strcmp(n, "cbrt") || !strcmp(n, "atan2")) && op->num_results == 1 &&
      shc_is_complex(shc_elem_type(op->results[0].type)))
    return convert_complex_math(c, op, n);
  for (size_t i = 0; i < sizeof kElementwise / sizeof kElementwise[0]; i++) {
    if (strcmp(n, kElementwise[i].mlir) != 0 || !kElementwise[i].hlo) continue;
    SHC_TRY(result_shape(c, op, &sh));
    int32_t nops = op->num_operands;
    if (!strcmp(n, "dynamic_reshape")) nops = 1;
    SHC_TRY(shc_operand_list(c, op, 0, nops, &ops));
    shc_bind(c, &op->results[0], shc_emit(c, sh, "%s(%s)", kElementwise[i].hlo, ops));
    return NULL;
  }
  if (!strcmp(n, "dynamic_pad")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
    int64_t *lo, *hi, *in;
    int32_t nl, nh, ni;
    SHC_TRY(shc_const_operand_ints(c, op, 2, &lo, &nl));
    SHC_TRY(shc_const_operand_ints(c, op, 3, &hi, &nh));
    SHC_TRY(shc_const_operand_ints(c, op, 4, &in, &ni));
    int32_t r = rank_of(op->operands[0]->type);
    if (nl != r || nh != r || ni != r) return SHC_INVALID(op, "padding of the wrong length");
    kiln_strbuf_t b = {0};
    for (int32_t i = 0; i < r; i++)
      kiln_strbuf_printf(&b, "%s%" PRId64 "_%" PRId64 "_%" PRId64, i ? "x" : "", lo[i], hi[i],
                         in[i]);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "pad(%s), padding=%s", ops, b.data ? kiln_strbuf_cstr(&b) : "{}"));
    kiln_strbuf_free(&b);
    return NULL;
  }
  if (!strcmp(n, "real_dynamic_slice")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    int64_t *st, *li, *sd;
    int32_t n1, n2, n3;
    SHC_TRY(shc_const_operand_ints(c, op, 1, &st, &n1));
    SHC_TRY(shc_const_operand_ints(c, op, 2, &li, &n2));
    SHC_TRY(shc_const_operand_ints(c, op, 3, &sd, &n3));
    int32_t r = rank_of(op->operands[0]->type);
    if (n1 != r || n2 != r || n3 != r) return SHC_INVALID(op, "indices of the wrong length");
    kiln_strbuf_t b = {0};
    for (int32_t i = 0; i < r; i++)
      kiln_strbuf_printf(&b, "%s[%" PRId64 ":%" PRId64 ":%" PRId64 "]", i ? ", " : "", st[i], li[i],
                         sd[i]);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "slice(%s), slice={%s}", ops, b.data ? kiln_strbuf_cstr(&b) : ""));
    kiln_strbuf_free(&b);
    return NULL;
  }
  if (!strcmp(n, "compare")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
    const char *dir = shc_attr_enum(kiln_mlir_op_attr(op, "comparison_direction"));
    if (!dir) return SHC_INVALID(op, "no comparison_direction");
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "compare(%s), direction=%s, type=%s", ops, dir, compare_type(op)));
    return NULL;
  }
  if (!strcmp(n, "iota") || !strcmp(n, "dynamic_iota")) {
    SHC_TRY(result_shape(c, op, &sh));
    const kiln_mlir_type_t *rt = op->results[0].type, *e = shc_elem_type(rt);
    if (shc_is_complex(e)) {
      /* complex iota: a real iota as the real part */
      const char *pe;
      SHC_TRY(shc_elem_text(e->element, &pe));
      kiln_strbuf_t b = {0};
      kiln_strbuf_printf(&b, "%s[", pe);
      for (int32_t i = 0; i < rank_of(rt); i++)
        kiln_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", rt->dims[i]);
      kiln_strbuf_append_char(&b, ']');
      const char *psh = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
      kiln_strbuf_free(&b);
      const char *re = shc_emit(c, psh, "iota(), iota_dimension=%" PRId64,
                                shc_attr_int(kiln_mlir_op_attr(op, "iota_dimension"), 0));
      const char *z;
      SHC_TRY(shc_scalar_const(c, e->element, 0, &z));
      z = shc_broadcast_scalar(c, z, psh, rank_of(rt));
      shc_bind(c, &op->results[0], shc_emit(c, sh, "complex(%s, %s)", re, z));
      return NULL;
    }
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "iota(), iota_dimension=%" PRId64,
                      shc_attr_int(kiln_mlir_op_attr(op, "iota_dimension"), 0)));
    return NULL;
  }
  if (!strcmp(n, "broadcast_in_dim") || !strcmp(n, "dynamic_broadcast_in_dim")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    int64_t *d;
    int32_t nd;
    SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "broadcast_dimensions"),
                          "broadcast_dimensions", &d, &nd));
    /* StableHLO expands size-1 operand dimensions; HLO's broadcast does not: reshape them
     * away first. */
    const kiln_mlir_type_t *ot = op->operands[0]->type, *rt = op->results[0].type;
    if (nd != rank_of(ot)) return SHC_INVALID(op, "broadcast_dimensions has the wrong length");
    int64_t kept[64];
    int32_t nk = 0;
    kiln_strbuf_t b = {0};
    for (int32_t i = 0; i < nd && i < 64; i++) {
      if (d[i] < 0 || d[i] >= rank_of(rt)) {
        kiln_strbuf_free(&b);
        return SHC_INVALID(op, "broadcast dimension out of range");
      }
      if (ot->dims[i] == 1 && rt->dims[d[i]] != 1) continue;
      kiln_strbuf_printf(&b, "%s%" PRId64, nk ? "," : "", ot->dims[i]);
      kept[nk++] = d[i];
    }
    if (nk != nd) {
      const char *e;
      SHC_TRY(shc_elem_text(shc_elem_type(ot), &e));
      ops =
          shc_emit(c, kiln_arena_printf(&c->arena, "%s[%s]", e, b.data ? kiln_strbuf_cstr(&b) : ""),
                   "reshape(%s)", ops);
      d = kept;
      nd = nk;
    }
    kiln_strbuf_free(&b);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "broadcast(%s), dimensions=%s", ops, shc_ints_text(c, d, nd)));
    return NULL;
  }
  if (!strcmp(n, "broadcast")) {
    /* broadcast_sizes prepended: operand dims map to the trailing result dims */
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    int32_t r = rank_of(op->results[0].type), ro = rank_of(op->operands[0]->type);
    int64_t d[64];
    if (ro > 64) return SHC_UNIMPL(op, "rank above 64");
    for (int32_t i = 0; i < ro; i++) d[i] = r - ro + i;
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "broadcast(%s), dimensions=%s", ops, shc_ints_text(c, d, ro)));
    return NULL;
  }
  if (!strcmp(n, "transpose") || !strcmp(n, "reverse")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    const char *an = !strcmp(n, "transpose") ? "permutation" : "dimensions";
    int64_t *d;
    int32_t nd;
    SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, an), an, &d, &nd));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "%s(%s), dimensions=%s", n, ops, shc_ints_text(c, d, nd)));
    return NULL;
  }
  if (!strcmp(n, "slice")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    int32_t r = rank_of(op->operands[0]->type);
    int64_t *st, *li, *sd;
    SHC_TRY(opt_ints(c, op, "start_indices", r, &st));
    SHC_TRY(opt_ints(c, op, "limit_indices", r, &li));
    SHC_TRY(opt_ints(c, op, "strides", r, &sd));
    if ((!st || !li) && r > 0) return SHC_INVALID(op, "no start_indices / limit_indices");
    kiln_strbuf_t b = {0};
    for (int32_t i = 0; i < r; i++)
      kiln_strbuf_printf(&b, "%s[%" PRId64 ":%" PRId64 ":%" PRId64 "]", i ? ", " : "", st[i], li[i],
                         sd ? sd[i] : 1);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "slice(%s), slice={%s}", ops, b.data ? kiln_strbuf_cstr(&b) : ""));
    kiln_strbuf_free(&b);
    return NULL;
  }
  if (!strcmp(n, "dynamic_slice")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    int64_t *d;
    int32_t nd;
    SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "slice_sizes"), "slice_sizes", &d, &nd));
    shc_bind(
        c, &op->results[0],
        shc_emit(c, sh, "dynamic-slice(%s), dynamic_slice_sizes=%s", ops, shc_ints_text(c, d, nd)));
    return NULL;
  }
  if (!strcmp(n, "concatenate")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "concatenate(%s), dimensions={%" PRId64 "}", ops,
                      shc_attr_int(kiln_mlir_op_attr(op, "dimension"), 0)));
    return NULL;
  }
  if (!strcmp(n, "pad")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
    int32_t r = rank_of(op->operands[0]->type);
    int64_t *lo, *hi, *in;
    SHC_TRY(opt_ints(c, op, "edge_padding_low", r, &lo));
    SHC_TRY(opt_ints(c, op, "edge_padding_high", r, &hi));
    SHC_TRY(opt_ints(c, op, "interior_padding", r, &in));
    kiln_strbuf_t b = {0};
    for (int32_t i = 0; i < r; i++)
      kiln_strbuf_printf(&b, "%s%" PRId64 "_%" PRId64 "_%" PRId64, i ? "x" : "", lo ? lo[i] : 0,
                         hi ? hi[i] : 0, in ? in[i] : 0);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "pad(%s), padding=%s", ops, b.data ? kiln_strbuf_cstr(&b) : "{}"));
    kiln_strbuf_free(&b);
    return NULL;
  }
  if (!strcmp(n, "get_tuple_element")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "get-tuple-element(%s), index=%" PRId64, ops,
                      shc_attr_int(kiln_mlir_op_attr(op, "index"), 0)));
    return NULL;
  }
  if (!strcmp(n, "reduce_precision")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    shc_bind(
        c, &op->results[0],
        shc_emit(c, sh, "reduce-precision(%s), exponent_bits=%" PRId64 ", mantissa_bits=%" PRId64,
                 ops, shc_attr_int(kiln_mlir_op_attr(op, "exponent_bits"), 8),
                 shc_attr_int(kiln_mlir_op_attr(op, "mantissa_bits"), 23)));
    return NULL;
  }
  if (!strcmp(n, "optimization_barrier")) {
    const char *tsh;
    SHC_TRY(shc_results_tuple_shape(c, op, &tsh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    const char *t = shc_emit(c, tsh, "tuple(%s)", ops);
    return shc_bind_tuple_results(c, op, shc_emit(c, tsh, "opt-barrier(%s)", t));
  }
  if (!strcmp(n, "cholesky")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "cholesky(%s), lower=%s", ops,
                      shc_attr_int(kiln_mlir_op_attr(op, "lower"), 0) ? "true" : "false"));
    return NULL;
  }
  if (!strcmp(n, "triangular_solve")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
    const char *ta = shc_attr_enum(kiln_mlir_op_attr(op, "transpose_a"));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh,
                      "triangular-solve(%s), left_side=%s, lower=%s, unit_diagonal=%s, "
                      "transpose_a=%s",
                      ops, shc_attr_int(kiln_mlir_op_attr(op, "left_side"), 0) ? "true" : "false",
                      shc_attr_int(kiln_mlir_op_attr(op, "lower"), 0) ? "true" : "false",
                      shc_attr_int(kiln_mlir_op_attr(op, "unit_diagonal"), 0) ? "true" : "false",
                      ta ? ta : "NO_TRANSPOSE"));
    return NULL;
  }
  if (!strcmp(n, "fft")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    int64_t *d;
    int32_t nd;
    SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "fft_length"), "fft_length", &d, &nd));
    const char *t = shc_attr_enum(kiln_mlir_op_attr(op, "fft_type"));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "fft(%s), fft_type=%s, fft_length=%s", ops, t ? t : "FFT",
                      shc_ints_text(c, d, nd)));
    return NULL;
  }
  if (!strcmp(n, "dot")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
    int32_t rl = rank_of(op->operands[0]->type);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "dot(%s), lhs_contracting_dims={%d}, rhs_contracting_dims={0}", ops,
                      (int)(rl - 1)));
    return NULL;
  }
  if (!strcmp(n, "dot_general")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
    const kiln_mlir_attr_t *dn = kiln_mlir_op_attr(op, "dot_dimension_numbers");
    if (!dn) return SHC_INVALID(op, "no dot_dimension_numbers");
    static const char *const f[4] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                     "lhs_contracting_dimensions", "rhs_contracting_dimensions"};
    const char *t[4];
    for (int k = 0; k < 4; k++) {
      int64_t *d;
      int32_t nd;
      SHC_TRY(shc_attr_ints(c, op, kiln_mlir_attr_field(dn, f[k]), f[k], &d, &nd));
      t[k] = shc_ints_text(c, d, nd);
    }
    shc_bind(c, &op->results[0],
             shc_emit(c, sh,
                      "dot(%s), lhs_batch_dims=%s, lhs_contracting_dims=%s, rhs_batch_dims=%s, "
                      "rhs_contracting_dims=%s",
                      ops, t[0], t[2], t[1], t[3]));
    return NULL;
  }
  if (!strcmp(n, "rng_bit_generator")) {
    const char *tsh;
    SHC_TRY(shc_results_tuple_shape(c, op, &tsh));
    SHC_TRY(shc_operand_list(c, op, 0, 1, &ops));
    const char *alg = shc_attr_enum(kiln_mlir_op_attr(op, "rng_algorithm"));
    const char *a = "rng_default";
    if (alg && !strcmp(alg, "THREE_FRY")) a = "rng_three_fry";
    if (alg && !strcmp(alg, "PHILOX")) a = "rng_philox";
    return shc_bind_tuple_results(c, op,
                                  shc_emit(c, tsh, "rng-bit-generator(%s), algorithm=%s", ops, a));
  }
  if (!strcmp(n, "rng")) {
    SHC_TRY(result_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
    const char *d = shc_attr_enum(kiln_mlir_op_attr(op, "rng_distribution"));
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "rng(%s), distribution=%s", ops,
                      d && !strcmp(d, "NORMAL") ? "rng_normal" : "rng_uniform"));
    return NULL;
  }
  *handled = false;
  return NULL;
}
