/* CHLO ops -> HLO: the ones kiln's HLO has as an opcode with the same semantics (tan, erf,
 * sinh, cosh, asin, acos, asinh, acosh, atanh, top_k), the broadcasting binary ops
 * (explicit broadcast, then the op), and small decompositions (atan = atan2(x, 1), square,
 * conj, is_inf / is_pos_inf / is_neg_inf, constant_like), and the special functions XLA's
 * builder library names (erfc, bessel_i1e, digamma, zeta, polygamma, next_after:
 * xla_builder.math.*
 * custom calls). What is not here is UNIMPLEMENTED naming the op. */
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

/* `elem`[dims of t] */
static const char *shape_with(shc_ctx_t *c, const kiln_mlir_type_t *t, const char *elem) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "%s[", elem);
  int32_t r = t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0;
  for (int32_t i = 0; i < r; i++) kiln_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", t->dims[i]);
  kiln_strbuf_append_char(&b, ']');
  const char *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return out;
}

static const char *int_const(shc_ctx_t *c, const char *elem, const char *shape, int32_t rank,
                             uint64_t v) {
  const char *s =
      shc_emit(c, kiln_arena_printf(&c->arena, "%s[]", elem), "constant(%" PRIu64 ")", v);
  return shc_broadcast_scalar(c, s, shape, rank);
}

/* chlo.mulhi: the high half of the double-width product. Up to 32 bits: in 64-bit
 * arithmetic; 64 bits: from 32-bit halves (signed: the unsigned high half, corrected). */
static kiln_status convert_mulhi(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const kiln_mlir_type_t *rt = op->results[0].type, *e = shc_elem_type(rt);
  if (!e || e->kind != KILN_MLIR_TYPE_INTEGER || e->width < 2)
    return SHC_UNIMPL(op, "mulhi of a non-integer type");
  const char *a, *b, *sh, *et;
  SHC_TRY(shc_lookup(c, op->operands[0], &a));
  SHC_TRY(shc_lookup(c, op->operands[1], &b));
  SHC_TRY(shc_type_text(c, rt, &sh));
  SHC_TRY(shc_elem_text(e, &et));
  bool is_unsigned = e->signedness == KILN_MLIR_UNSIGNED;
  int32_t rank = rt->kind == KILN_MLIR_TYPE_TENSOR ? rt->rank : 0;
  int w = e->width;
  if (w <= 32) {
    const char *we = is_unsigned ? "u64" : "s64", *wsh = shape_with(c, rt, we);
    const char *wa = shc_emit(c, wsh, "convert(%s)", a), *wb = shc_emit(c, wsh, "convert(%s)", b);
    const char *p = shc_emit(c, wsh, "multiply(%s, %s)", wa, wb);
    const char *k = int_const(c, we, wsh, rank, (uint64_t)w);
    const char *hi = shc_emit(c, wsh, "%s(%s, %s)",
                              is_unsigned ? "shift-right-logical" : "shift-right-arithmetic", p, k);
    shc_bind(c, &op->results[0], shc_emit(c, sh, "convert(%s)", hi));
    return NULL;
  }
  const char *ush = shape_with(c, rt, "u64");
  const char *ua = is_unsigned ? a : shc_emit(c, ush, "bitcast-convert(%s)", a);
  const char *ub = is_unsigned ? b : shc_emit(c, ush, "bitcast-convert(%s)", b);
  const char *k32 = int_const(c, "u64", ush, rank, 32);
  const char *mask = int_const(c, "u64", ush, rank, 0xffffffffull);
  const char *alo = shc_emit(c, ush, "and(%s, %s)", ua, mask);
  const char *ahi = shc_emit(c, ush, "shift-right-logical(%s, %s)", ua, k32);
  const char *blo = shc_emit(c, ush, "and(%s, %s)", ub, mask);
  const char *bhi = shc_emit(c, ush, "shift-right-logical(%s, %s)", ub, k32);
  const char *ll = shc_emit(c, ush, "multiply(%s, %s)", alo, blo);
  const char *hl = shc_emit(c, ush, "multiply(%s, %s)", ahi, blo);
  const char *lh = shc_emit(c, ush, "multiply(%s, %s)", alo, bhi);
  const char *hh = shc_emit(c, ush, "multiply(%s, %s)", ahi, bhi);
  const char *t =
      shc_emit(c, ush, "add(%s, %s)", hl, shc_emit(c, ush, "shift-right-logical(%s, %s)", ll, k32));
  const char *w1 = shc_emit(c, ush, "add(%s, %s)", lh, shc_emit(c, ush, "and(%s, %s)", t, mask));
  const char *hi =
      shc_emit(c, ush, "add(%s, %s)", hh, shc_emit(c, ush, "shift-right-logical(%s, %s)", t, k32));
  hi =
      shc_emit(c, ush, "add(%s, %s)", hi, shc_emit(c, ush, "shift-right-logical(%s, %s)", w1, k32));
  if (is_unsigned) {
    shc_bind(c, &op->results[0], hi);
    return NULL;
  }
  /* signed: subtract b where a < 0 and a where b < 0 (mod 2^64) */
  const char *psh = shape_with(c, rt, "pred");
  const char *zero = int_const(c, "s64", sh, rank, 0), *uzero = int_const(c, "u64", ush, rank, 0);
  const char *an = shc_emit(c, psh, "compare(%s, %s), direction=LT", a, zero);
  const char *bn = shc_emit(c, psh, "compare(%s, %s), direction=LT", b, zero);
  hi = shc_emit(c, ush, "subtract(%s, %s)", hi,
                shc_emit(c, ush, "select(%s, %s, %s)", an, ub, uzero));
  hi = shc_emit(c, ush, "subtract(%s, %s)", hi,
                shc_emit(c, ush, "select(%s, %s, %s)", bn, ua, uzero));
  shc_bind(c, &op->results[0], shc_emit(c, sh, "bitcast-convert(%s)", hi));
  return NULL;
}

/* `elem`[dims of t], dimension `d` dropped (drop) or set to 1 (!drop). */
static const char *slice_shape(shc_ctx_t *c, const kiln_mlir_type_t *t, const char *elem, int64_t d,
                               bool drop) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "%s[", elem);
  const char *sep = "";
  for (int32_t i = 0; i < t->rank; i++) {
    if (i == d && drop) continue;
    kiln_strbuf_printf(&b, "%s%" PRId64, sep, i == d ? (int64_t)1 : t->dims[i]);
    sep = ",";
  }
  kiln_strbuf_append_char(&b, ']');
  const char *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return out;
}

/* chlo.scan as a while loop over the scanned dimension (what HLO's scan means, in ops every
 * backend runs): the state is (i, inputs..., carries..., outputs...); each step slices
 * element i (n-1-i when is_reverse) of every input, calls the body on (slices...,
 * carries...) and writes its outputs at i; the results are the stacked outputs, then the
 * final carries. */
static kiln_status convert_scan(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 1) return SHC_INVALID(op, "expected a body");
  int64_t *seg;
  int32_t nseg;
  SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "operandSegmentSizes"), "operandSegmentSizes",
                        &seg, &nseg));
  if (nseg != 2 || seg[0] + seg[1] != op->num_operands)
    return SHC_INVALID(op, "operandSegmentSizes must split the operands into inputs and inits");
  int32_t nin = (int32_t)seg[0], nc = (int32_t)seg[1], nout = op->num_results - nc;
  int64_t d = shc_attr_int(kiln_mlir_op_attr(op, "dimension"), 0);
  bool rev = shc_attr_int(kiln_mlir_op_attr(op, "is_reverse"), 0) != 0;
  if (nin < 1 || nout < 0)
    return SHC_INVALID(op, "expected inputs and as many results as outputs and carries");
  const kiln_mlir_type_t *t0 = op->operands[0]->type;
  if (t0->kind != KILN_MLIR_TYPE_TENSOR || d < 0 || d >= t0->rank)
    return SHC_INVALID(op, "dimension %" PRId64 " out of range", d);
  int64_t n = t0->dims[d];
  if (n == 0) { /* nothing to scan (the loop's slices would not verify): empty outputs, and
                   the carries are the inits */
    for (int32_t k = 0; k < nout; k++) {
      const kiln_mlir_type_t *t = op->results[k].type;
      const char *z, *sh;
      SHC_TRY(shc_type_text(c, t, &sh));
      SHC_TRY(shc_scalar_const(c, shc_elem_type(t), 0.0, &z));
      shc_bind(c, &op->results[k], shc_broadcast_scalar(c, z, sh, t->rank));
    }
    for (int32_t k = 0; k < nc; k++) {
      const char *v;
      SHC_TRY(shc_lookup(c, op->operands[nin + k], &v));
      shc_bind(c, &op->results[nout + k], v);
    }
    return NULL;
  }
  const char *body;
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], true, &body));
  /* The state's element shapes: i, inputs, carries, outputs (stacked). */
  int32_t ns = 1 + nin + nc + nout;
  const char **st_sh = kiln_arena_alloc(&c->arena, sizeof(char *) * (size_t)ns);
  const char **sl_sh = kiln_arena_alloc(&c->arena, sizeof(char *) * (size_t)(nin + nout));
  const char **one_sh = kiln_arena_alloc(&c->arena, sizeof(char *) * (size_t)(nin + nout));
  st_sh[0] = "s64[]";
  for (int32_t k = 0; k < nin + nc + nout; k++) {
    const kiln_mlir_type_t *t =
        k < nin + nc ? op->operands[k]->type : op->results[k - nin - nc].type;
    SHC_TRY(shc_type_text(c, t, &st_sh[1 + k]));
    bool sliced = k < nin || k >= nin + nc;
    if (!sliced) continue;
    int32_t j = k < nin ? k : k - nc;
    if (t->kind != KILN_MLIR_TYPE_TENSOR || t->rank <= d || t->dims[d] != n)
      return SHC_INVALID(op, "inputs and outputs must have the scanned dimension %" PRId64, n);
    const char *e;
    SHC_TRY(shc_elem_text(shc_elem_type(t), &e));
    sl_sh[j] = slice_shape(c, t, e, d, true);
    one_sh[j] = slice_shape(c, t, e, d, false);
  }
  kiln_strbuf_t tsb = {0};
  kiln_strbuf_append_char(&tsb, '(');
  for (int32_t k = 0; k < ns; k++) kiln_strbuf_printf(&tsb, "%s%s", k ? ", " : "", st_sh[k]);
  kiln_strbuf_append_char(&tsb, ')');
  const char *tsh = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&tsb));
  kiln_strbuf_free(&tsb);
  /* Body and condition, written as computations of their own. */
  const char *bname = shc_fresh(c, "scan_body"), *cname = shc_fresh(c, "scan_cond");
  const char *pre = shc_fresh(c, "sb");
  kiln_strbuf_t *o = &c->comps;
  kiln_strbuf_printf(o, "%s {\n  %s.st = %s parameter(0)\n", bname, pre, tsh);
  kiln_strbuf_printf(o, "  %s.i = s64[] get-tuple-element(%s.st), index=0\n", pre, pre);
  kiln_strbuf_printf(o, "  %s.z = s64[] constant(0)\n  %s.one = s64[] constant(1)\n", pre, pre);
  if (rev)
    kiln_strbuf_printf(o,
                       "  %s.last = s64[] constant(%" PRId64
                       ")\n"
                       "  %s.idx = s64[] subtract(%s.last, %s.i)\n",
                       pre, n - 1, pre, pre, pre);
  else
    kiln_strbuf_printf(o, "  %s.idx = s64[] copy(%s.i)\n", pre, pre);
  for (int32_t k = 1; k < ns; k++)
    kiln_strbuf_printf(o, "  %s.s%d = %s get-tuple-element(%s.st), index=%d\n", pre, (int)k,
                       st_sh[k], pre, (int)k);
    /* starts at (0.., idx, ..0) for a tensor of rank r */
#define STARTS(r) \
  for (int32_t q = 0; q < (r); q++) kiln_strbuf_printf(o, ", %s.%s", pre, q == d ? "idx" : "z")
  kiln_strbuf_t call = {0};
  for (int32_t k = 0; k < nin; k++) {
    const kiln_mlir_type_t *t = op->operands[k]->type;
    kiln_strbuf_printf(o, "  %s.ds%d = %s dynamic-slice(%s.s%d", pre, (int)k, one_sh[k], pre,
                       (int)(1 + k));
    STARTS(t->rank);
    kiln_strbuf_append(o, "), dynamic_slice_sizes={");
    for (int32_t q = 0; q < t->rank; q++)
      kiln_strbuf_printf(o, "%s%" PRId64, q ? "," : "", q == d ? (int64_t)1 : t->dims[q]);
    kiln_strbuf_append(o, "}\n");
    kiln_strbuf_printf(o, "  %s.sl%d = %s reshape(%s.ds%d)\n", pre, (int)k, sl_sh[k], pre, (int)k);
    kiln_strbuf_printf(&call, "%s%s.sl%d", k ? ", " : "", pre, (int)k);
  }
  for (int32_t k = 0; k < nc; k++) kiln_strbuf_printf(&call, ", %s.s%d", pre, (int)(1 + nin + k));
  kiln_strbuf_t rsh = {0};
  kiln_strbuf_append_char(&rsh, '(');
  for (int32_t k = 0; k < nout; k++)
    kiln_strbuf_printf(&rsh, "%s%s", k ? ", " : "", sl_sh[nin + k]);
  for (int32_t k = 0; k < nc; k++)
    kiln_strbuf_printf(&rsh, "%s%s", nout + k ? ", " : "", st_sh[1 + nin + k]);
  kiln_strbuf_append_char(&rsh, ')');
  kiln_strbuf_printf(o, "  %s.r = %s call(%s), to_apply=%s\n", pre, kiln_strbuf_cstr(&rsh),
                     kiln_strbuf_cstr(&call), body);
  kiln_strbuf_free(&rsh);
  kiln_strbuf_free(&call);
  for (int32_t k = 0; k < nout; k++) {
    const kiln_mlir_type_t *t = op->results[k].type;
    kiln_strbuf_printf(o, "  %s.o%d = %s get-tuple-element(%s.r), index=%d\n", pre, (int)k,
                       sl_sh[nin + k], pre, (int)k);
    kiln_strbuf_printf(o, "  %s.o1_%d = %s reshape(%s.o%d)\n", pre, (int)k, one_sh[nin + k], pre,
                       (int)k);
    kiln_strbuf_printf(o, "  %s.u%d = %s dynamic-update-slice(%s.s%d, %s.o1_%d", pre, (int)k,
                       st_sh[1 + nin + nc + k], pre, (int)(1 + nin + nc + k), pre, (int)k);
    STARTS(t->rank);
    kiln_strbuf_append(o, ")\n");
  }
#undef STARTS
  for (int32_t k = 0; k < nc; k++)
    kiln_strbuf_printf(o, "  %s.c%d = %s get-tuple-element(%s.r), index=%d\n", pre, (int)k,
                       st_sh[1 + nin + k], pre, (int)(nout + k));
  kiln_strbuf_printf(o, "  %s.i1 = s64[] add(%s.i, %s.one)\n  ROOT %s.t = %s tuple(%s.i1", pre, pre,
                     pre, pre, tsh, pre);
  for (int32_t k = 0; k < nin; k++) kiln_strbuf_printf(o, ", %s.s%d", pre, (int)(1 + k));
  for (int32_t k = 0; k < nc; k++) kiln_strbuf_printf(o, ", %s.c%d", pre, (int)k);
  for (int32_t k = 0; k < nout; k++) kiln_strbuf_printf(o, ", %s.u%d", pre, (int)k);
  kiln_strbuf_append(o, ")\n}\n\n");
  kiln_strbuf_printf(o,
                     "%s {\n  %s.cst = %s parameter(0)\n  %s.ci = s64[] get-tuple-element(%s.cst), "
                     "index=0\n  %s.n = s64[] constant(%" PRId64
                     ")\n"
                     "  ROOT %s.lt = pred[] compare(%s.ci, %s.n), direction=LT\n}\n\n",
                     cname, pre, tsh, pre, pre, pre, n, pre, pre, pre);
  /* The initial state and the loop. */
  kiln_strbuf_t init = {0};
  kiln_strbuf_append(&init, shc_emit(c, "s64[]", "constant(0)"));
  for (int32_t k = 0; k < nin + nc; k++) {
    const char *v;
    SHC_TRY(shc_lookup(c, op->operands[k], &v));
    kiln_strbuf_printf(&init, ", %s", v);
  }
  for (int32_t k = 0; k < nout; k++) {
    const kiln_mlir_type_t *t = op->results[k].type;
    const char *z;
    kiln_status s = shc_scalar_const(c, shc_elem_type(t), 0.0, &z);
    if (s) {
      kiln_strbuf_free(&init);
      return s;
    }
    kiln_strbuf_printf(&init, ", %s", shc_broadcast_scalar(c, z, st_sh[1 + nin + nc + k], t->rank));
  }
  const char *w = shc_emit(c, tsh, "while(%s), condition=%s, body=%s",
                           shc_emit(c, tsh, "tuple(%s)", kiln_strbuf_cstr(&init)), cname, bname);
  kiln_strbuf_free(&init);
  for (int32_t k = 0; k < nout; k++)
    shc_bind(c, &op->results[k],
             shc_emit(c, st_sh[1 + nin + nc + k], "get-tuple-element(%s), index=%d", w,
                      (int)(1 + nin + nc + k)));
  for (int32_t k = 0; k < nc; k++)
    shc_bind(
        c, &op->results[nout + k],
        shc_emit(c, st_sh[1 + nin + k], "get-tuple-element(%s), index=%d", w, (int)(1 + nin + k)));
  return NULL;
}

/* chlo.ragged_dot -> HLO ragged-dot with its dimension numbers. */
static kiln_status convert_ragged_dot(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const kiln_mlir_attr_t *dn = kiln_mlir_op_attr(op, "ragged_dot_dimension_numbers");
  if (!dn) return SHC_INVALID(op, "no ragged_dot_dimension_numbers");
  static const char *const f[6] = {"lhs_batching_dimensions",    "rhs_batching_dimensions",
                                   "lhs_contracting_dimensions", "rhs_contracting_dimensions",
                                   "lhs_ragged_dimensions",      "rhs_group_dimensions"};
  const char *t[6];
  for (int k = 0; k < 6; k++) {
    int64_t *d;
    int32_t nd;
    SHC_TRY(shc_attr_ints(c, op, kiln_mlir_attr_field(dn, f[k]), f[k], &d, &nd));
    t[k] = shc_ints_text(c, d, nd);
  }
  const char *sh, *ops;
  SHC_TRY(shc_type_text(c, op->results[0].type, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, 3, &ops));
  shc_bind(
      c, &op->results[0],
      shc_emit(c, sh,
               "ragged-dot(%s), lhs_batch_dims=%s, rhs_batch_dims=%s, lhs_contracting_dims=%s, "
               "rhs_contracting_dims=%s, lhs_ragged_dims=%s, rhs_group_dims=%s",
               ops, t[0], t[1], t[2], t[3], t[4], t[5]));
  return NULL;
}

/* A constant of element type `e` broadcast to `shape`. */
static kiln_status fconst(shc_ctx_t *c, const kiln_mlir_type_t *e, const char *shape, int32_t rank,
                          double v, const char **out) {
  const char *s;
  SHC_TRY(shc_scalar_const(c, e, v, &s));
  *out = shc_broadcast_scalar(c, s, shape, rank);
  return NULL;
}

/* chlo.erf_inv for f32 (f16 / bf16 computed in f32): the single-precision rational
 * approximation XLA's CHLO legalization uses (M. Giles), with erf_inv(+-1) = +-inf. */
static kiln_status convert_erf_inv(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const kiln_mlir_type_t *rt = op->results[0].type, *e = shc_elem_type(rt);
  if (!shc_is_float(e) || e->elem == KILN_F64 || kiln_elem_type_bits(e->elem) < 16)
    return SHC_UNIMPL(op, "erf_inv of %s",
                      shc_is_float(e) ? kiln_elem_type_name(e->elem) : "this type");
  static const double small[9] = {2.81022636e-08,  3.43273939e-07, -3.5233877e-06,
                                  -4.39150654e-06, 0.00021858087,  -0.00125372503,
                                  -0.00417768164,  0.246640727,    1.50140941};
  static const double large[9] = {-0.000200214257, 0.000100950558, 0.00134934322,
                                  -0.00367342844,  0.00573950773,  -0.0076224613,
                                  0.00943887047,   1.00167406,     2.83297682};
  const char *x, *rsh;
  SHC_TRY(shc_lookup(c, op->operands[0], &x));
  SHC_TRY(shc_type_text(c, rt, &rsh));
  int32_t rank = rt->kind == KILN_MLIR_TYPE_TENSOR ? rt->rank : 0;
  kiln_mlir_type_t f32t;
  memset(&f32t, 0, sizeof f32t);
  f32t.kind = KILN_MLIR_TYPE_FLOAT;
  f32t.elem = KILN_F32;
  const char *sh = shape_with(c, rt, "f32"), *psh = shape_with(c, rt, "pred");
  if (e->elem != KILN_F32) x = shc_emit(c, sh, "convert(%s)", x);
  const char *one, *five, *half5, *three, *inf;
  SHC_TRY(fconst(c, &f32t, sh, rank, 1.0, &one));
  SHC_TRY(fconst(c, &f32t, sh, rank, 5.0, &five));
  SHC_TRY(fconst(c, &f32t, sh, rank, 2.5, &half5));
  SHC_TRY(fconst(c, &f32t, sh, rank, 3.0, &three));
  SHC_TRY(fconst(c, &f32t, sh, rank, 1.0 / 0.0, &inf));
  const char *xx = shc_emit(c, sh, "multiply(%s, %s)", x, x);
  const char *w = shc_emit(c, sh, "negate(%s)",
                           shc_emit(c, sh, "log-plus-one(%s)", shc_emit(c, sh, "negate(%s)", xx)));
  const char *lt = shc_emit(c, psh, "compare(%s, %s), direction=LT", w, five);
  const char *ws = shc_emit(c, sh, "subtract(%s, %s)", w, half5);
  const char *wl = shc_emit(c, sh, "subtract(%s, %s)", shc_emit(c, sh, "sqrt(%s)", w), three);
  w = shc_emit(c, sh, "select(%s, %s, %s)", lt, ws, wl);
  const char *p = NULL;
  for (int i = 0; i < 9; i++) {
    const char *cs, *cl;
    SHC_TRY(fconst(c, &f32t, sh, rank, small[i], &cs));
    SHC_TRY(fconst(c, &f32t, sh, rank, large[i], &cl));
    const char *coef = shc_emit(c, sh, "select(%s, %s, %s)", lt, cs, cl);
    p = p ? shc_emit(c, sh, "add(%s, %s)", coef, shc_emit(c, sh, "multiply(%s, %s)", p, w)) : coef;
  }
  const char *r = shc_emit(c, sh, "multiply(%s, %s)", p, x);
  const char *at1 =
      shc_emit(c, psh, "compare(%s, %s), direction=EQ", shc_emit(c, sh, "abs(%s)", x), one);
  r = shc_emit(c, sh, "select(%s, %s, %s)", at1, shc_emit(c, sh, "multiply(%s, %s)", x, inf), r);
  if (e->elem != KILN_F32) r = shc_emit(c, rsh, "convert(%s)", r);
  shc_bind(c, &op->results[0], r);
  return NULL;
}

/* chlo.lgamma as XLA's CHLO legalization computes it (f16 / bf16 in f32): the Lanczos
 * approximation (g = 7, 8 terms) of log|Gamma(x)|, reflected through
 * log(pi) - log|sin(pi x)| - lgamma(1 - x) below 0.5; lgamma(+-inf) = +inf. */
static kiln_status convert_lgamma(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  static const double kCoeff[8] = {
      676.520368121885098567009190444019, -1259.13921672240287047156078755283,
      771.3234287776530788486528258894,   -176.61502916214059906584551354,
      12.507343278686904814458936853,     -0.13857109526572011689554707,
      9.984369578019570859563e-6,         1.50563273514931155834e-7};
  const kiln_mlir_type_t *rt = op->results[0].type, *e = shc_elem_type(rt);
  if (!shc_is_float(e) || kiln_elem_type_bits(e->elem) < 16)
    return SHC_UNIMPL(op, "lgamma of %s",
                      shc_is_float(e) ? kiln_elem_type_name(e->elem) : "this type");
  bool f64 = e->elem == KILN_F64;
  const char *x, *rsh;
  SHC_TRY(shc_lookup(c, op->operands[0], &x));
  SHC_TRY(shc_type_text(c, rt, &rsh));
  int32_t rank = rt->kind == KILN_MLIR_TYPE_TENSOR ? rt->rank : 0;
  kiln_mlir_type_t wt;
  memset(&wt, 0, sizeof wt);
  wt.kind = KILN_MLIR_TYPE_FLOAT;
  wt.elem = f64 ? KILN_F64 : KILN_F32;
  const char *sh = shape_with(c, rt, f64 ? "f64" : "f32"), *psh = shape_with(c, rt, "pred");
  if (e->elem != wt.elem) x = shc_emit(c, sh, "convert(%s)", x);
#define K(v, out) SHC_TRY(fconst(c, &wt, sh, rank, (v), &(out)))
#define E(...) shc_emit(c, sh, __VA_ARGS__)
  const char *half, *one, *gh, *log_gh, *base, *log_sqrt_2pi, *log_pi, *pi, *inf;
  K(0.5, half);
  K(1.0, one);
  K(7.5, gh);
  K(2.01490302054226435, log_gh); /* log(7.5) */
  K(0.99999999999980993227684700473478, base);
  K(0.91893853320467274178032973640562, log_sqrt_2pi);
  K(1.14472988584940017414342735135305, log_pi);
  K(3.14159265358979323846264338327950, pi);
  K(1.0 / 0.0, inf);
  const char *reflect = shc_emit(c, psh, "compare(%s, %s), direction=LT", x, half);
  const char *z =
      E("select(%s, %s, %s)", reflect, E("negate(%s)", x), E("subtract(%s, %s)", x, one));
  const char *sum = base;
  for (int i = 0; i < 8; i++) {
    const char *ci, *ip1;
    K(kCoeff[i], ci);
    K((double)(i + 1), ip1);
    sum = E("add(%s, %s)", sum, E("divide(%s, %s)", ci, E("add(%s, %s)", z, ip1)));
  }
  const char *t = E("add(%s, %s)", z, gh);
  const char *log_t = E("add(%s, %s)", log_gh, E("log-plus-one(%s)", E("divide(%s, %s)", z, gh)));
  /* (z + 0.5 - t / log_t) * log_t */
  const char *mid =
      E("multiply(%s, %s)",
        E("subtract(%s, %s)", E("add(%s, %s)", z, half), E("divide(%s, %s)", t, log_t)), log_t);
  const char *log_y = E("add(%s, %s)", E("add(%s, %s)", log_sqrt_2pi, mid), E("log(%s)", sum));
  const char *ax = E("abs(%s)", x);
  const char *frac = E("subtract(%s, %s)", ax, E("floor(%s)", ax));
  const char *red =
      E("select(%s, %s, %s)", shc_emit(c, psh, "compare(%s, %s), direction=GT", frac, half),
        E("subtract(%s, %s)", one, frac), frac);
  const char *den = E("log(%s)", E("sine(%s)", E("multiply(%s, %s)", pi, red)));
  const char *refl =
      E("select(%s, %s, %s)", shc_emit(c, psh, "is-finite(%s)", den),
        E("subtract(%s, %s)", E("subtract(%s, %s)", log_pi, den), log_y), E("negate(%s)", den));
  const char *r = E("select(%s, %s, %s)", reflect, refl, log_y);
  const char *isinf = shc_emit(c, psh, "compare(%s, %s), direction=EQ", ax, inf);
  r = E("select(%s, %s, %s)", isinf, inf, r);
#undef K
#undef E
  if (e->elem != wt.elem) r = shc_emit(c, rsh, "convert(%s)", r);
  shc_bind(c, &op->results[0], r);
  return NULL;
}

/* CHLO's special functions that XLA's builder library has as xla_builder.math.* calls:
 * emitted as those custom calls, which custom_call_rewrite expands
 * (compiler/passes/special_math.h) and the evaluator computes (eval_special.c). NULL for
 * anything else (next_after only on f32 / f64, what the rewrite takes). */
static const char *builder_math_target(const char *n, const kiln_mlir_type_t *e) {
  static const struct {
    const char *chlo, *target;
  } kTargets[] = {
      {"erfc", "Erfc"},
      {"bessel_i1e", "BesselI1e"},
      {"digamma", "Digamma"},
      {"zeta", "Zeta"},
      {"broadcast_zeta", "Zeta"},
      {"polygamma", "Polygamma"},
      {"broadcast_polygamma", "Polygamma"},
      {"next_after", "NextAfter"},
      {"broadcast_next_after", "NextAfter"},
  };
  if (!e || !shc_is_float(e)) return NULL;
  for (size_t i = 0; i < sizeof kTargets / sizeof kTargets[0]; i++) {
    if (strcmp(n, kTargets[i].chlo) != 0) continue;
    if (!strcmp(kTargets[i].target, "NextAfter") && e->elem != KILN_F32 && e->elem != KILN_F64)
      return NULL;
    return kTargets[i].target;
  }
  return NULL;
}

static kiln_status convert_to_builder_math(shc_ctx_t *c, const kiln_mlir_op_t *op,
                                           const char *target) {
  const kiln_mlir_type_t *rt = op->results[0].type;
  if (rt->kind != KILN_MLIR_TYPE_TENSOR) return SHC_UNIMPL(op, "non-tensor result");
  if (op->num_operands != 1 && op->num_operands != 2)
    return SHC_INVALID(op, "%s takes one or two operands", op->name);
  const char *sh, *v[2];
  SHC_TRY(shc_type_text(c, rt, &sh));
  for (int32_t i = 0; i < op->num_operands; i++) SHC_TRY(broadcast_operand(c, op, i, rt, &v[i]));
  const char *r =
      op->num_operands == 1
          ? shc_emit(c, sh, "custom-call(%s), custom_call_target=\"xla_builder.math.%s\"", v[0],
                     target)
          : shc_emit(c, sh, "custom-call(%s, %s), custom_call_target=\"xla_builder.math.%s\"", v[0],
                     v[1], target);
  shc_bind(c, &op->results[0], r);
  return NULL;
}

/* The HLO shape text of the parts of complex tensor type `rt` ("f32[2,3]"), and the pred shape
 * of the same dimensions. */
static kiln_status part_shape_text(shc_ctx_t *c, const kiln_mlir_type_t *rt, int32_t rank,
                                   const char **out) {
  const char *pe;
  SHC_TRY(shc_elem_text(shc_elem_type(rt)->element, &pe));
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "%s[", pe);
  for (int32_t k = 0; k < rank; k++)
    kiln_strbuf_printf(&b, "%s%" PRId64, k ? "," : "", rt->dims[k]);
  kiln_strbuf_append_char(&b, ']');
  *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return NULL;
}

kiln_status shc_convert_chlo_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled) {
  *handled = false;
  if (strncmp(op->name, "chlo.", 5) != 0) return NULL;
  const char *n = op->name + 5;
  *handled = true;
  if (!strcmp(n, "scan")) return convert_scan(c, op);
  if (op->num_results != 1 && strcmp(n, "top_k") != 0)
    return SHC_UNIMPL(op, "CHLO op is not supported");
  if (!strcmp(n, "ragged_dot")) return convert_ragged_dot(c, op);
  const char *sh = NULL, *x = NULL;
  if (op->num_results == 1) SHC_TRY(shc_type_text(c, op->results[0].type, &sh));
  for (size_t i = 0; i < sizeof kUnary / sizeof kUnary[0]; i++) {
    if (strcmp(n, kUnary[i].chlo) != 0) continue;
    if (op->num_operands != 1) return SHC_INVALID(op, "%s takes one operand", op->name);
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    shc_bind(c, &op->results[0], shc_emit(c, sh, "%s(%s)", kUnary[i].hlo, x));
    return NULL;
  }
  for (size_t i = 0; i < sizeof kBinary / sizeof kBinary[0]; i++) {
    if (strcmp(n, kBinary[i].chlo) != 0) continue;
    if (op->num_operands != 2) return SHC_INVALID(op, "%s takes two operands", op->name);
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
  if (!strcmp(n, "mulhi")) return convert_mulhi(c, op);
  if (!strcmp(n, "erf_inv")) return convert_erf_inv(c, op);
  if (!strcmp(n, "lgamma")) return convert_lgamma(c, op);
  const char *target = rt ? builder_math_target(n, shc_elem_type(rt)) : NULL;
  if (target) return convert_to_builder_math(c, op, target);
  if (!strcmp(n, "atan") && shc_is_complex(shc_elem_type(rt))) {
    /* atan z = -i atanh(iz): iz = (-im, re), and -i (p + iq) = (q, -p); no arithmetic on
     * the parts, so nothing overflows that atanh does not handle */
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    const char *psh;
    SHC_TRY(part_shape_text(c, rt, rank, &psh));
    const char *iz = shc_emit(c, sh, "complex(%s, %s)",
                              shc_emit(c, psh, "negate(%s)", shc_emit(c, psh, "imag(%s)", x)),
                              shc_emit(c, psh, "real(%s)", x));
    const char *w = shc_emit(c, sh, "atanh(%s)", iz);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "complex(%s, %s)", shc_emit(c, psh, "imag(%s)", w),
                      shc_emit(c, psh, "negate(%s)", shc_emit(c, psh, "real(%s)", w))));
    return NULL;
  }
  if (!strcmp(n, "atan")) {
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    const char *one;
    SHC_TRY(shc_scalar_const(c, shc_elem_type(rt), 1.0, &one));
    one = shc_broadcast_scalar(c, one, sh, rank);
    shc_bind(c, &op->results[0], shc_emit(c, sh, "atan2(%s, %s)", x, one));
    return NULL;
  }
  if (!strcmp(n, "square") && shc_is_complex(shc_elem_type(rt))) {
    /* (a + ib)^2 = (a - b)(a + b) + 2ab i, re = 0 where |a| = |b| is finite (the form
     * StableHLO's CHLO legalization uses: no inf - inf where one part overflows) */
    SHC_TRY(shc_lookup(c, op->operands[0], &x));
    const char *psh, *bsh, *zero;
    SHC_TRY(part_shape_text(c, rt, rank, &psh));
    bsh = shc_pred_shape_text(c, rt);
    SHC_TRY(shc_scalar_const(c, shc_elem_type(rt)->element, 0.0, &zero));
    zero = shc_broadcast_scalar(c, zero, psh, rank);
    const char *a = shc_emit(c, psh, "real(%s)", x), *b = shc_emit(c, psh, "imag(%s)", x);
    const char *d = shc_emit(c, psh, "multiply(%s, %s)", shc_emit(c, psh, "subtract(%s, %s)", a, b),
                             shc_emit(c, psh, "add(%s, %s)", a, b));
    const char *eq =
        shc_emit(c, bsh, "and(%s, %s)", shc_emit(c, bsh, "is-finite(%s)", a),
                 shc_emit(c, bsh, "compare(%s, %s), direction=EQ", shc_emit(c, psh, "abs(%s)", a),
                          shc_emit(c, psh, "abs(%s)", b)));
    const char *ab = shc_emit(c, psh, "multiply(%s, %s)", a, b);
    shc_bind(c, &op->results[0],
             shc_emit(c, sh, "complex(%s, %s)", shc_emit(c, psh, "select(%s, %s, %s)", eq, zero, d),
                      shc_emit(c, psh, "add(%s, %s)", ab, ab)));
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
    const char *psh;
    SHC_TRY(part_shape_text(c, rt, rank, &psh));
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
