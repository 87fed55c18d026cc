/* Uniform quantized types (`!quant.uniform<...>`) in the StableHLO converter.
 *
 * A quantized tensor is carried in HLO as its storage integers (s8 for `i8`, u8 for `u8`,
 * ...). The spec's semantics are spelled out in HLO ops:
 * - uniform_dequantize: (convert(q) - zero_point) * scale, in the expressed type;
 * - uniform_quantize of a float: clamp(round_nearest_even(x / scale) + zero_point, storage
 *   min, storage max), converted to the storage type; of a quantized value: dequantized
 *   first (requantization);
 * - every other op with quantized operands or results: dequantize_op_quantize, the op run
 *   on the dequantized (expressed) values and each quantized result quantized;
 * - bitcast_convert between a quantized type and its storage type moves the integers.
 * Per-axis types (`:f32:1, {s0:z0, s1:z1}`) broadcast their scales and zero points along
 * their quantization dimension. Ops with regions over quantized values (reduce, sort, ...)
 * are UNIMPLEMENTED, as are quantized constants. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/frontend/stablehlo_to_hlo_internal.h"

#define QUANT_PREFIX "!quant.uniform<"
#define MAX_AXIS_SCALES 65536

typedef struct quant {
  const char *storage; /* HLO element type name */
  int64_t storage_min, storage_max;
  kiln_mlir_type_t expressed; /* a FLOAT type */
  int32_t qdim;               /* -1: per tensor */
  int32_t n;                  /* scales / zero points */
  double *scales;
  int64_t *zero_points;
} quant_t;

static bool is_quant(const kiln_mlir_type_t *elem) {
  return elem && elem->kind == KILN_MLIR_TYPE_OTHER && elem->text &&
         !strncmp(elem->text, QUANT_PREFIX, strlen(QUANT_PREFIX));
}

static const char *skip_space(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n') p++;
  return p;
}

/* The storage type `i8` / `u4` / ...: its HLO name and range. */
static bool parse_storage(const char **pp, quant_t *q) {
  const char *p = *pp;
  bool uns = *p == 'u';
  if (*p != 'i' && *p != 'u') return false;
  char *end;
  long w = strtol(p + 1, &end, 10);
  static const char *const s[] = {"s2", "s4", "s8", "s16", "s32"};
  static const char *const u[] = {"u2", "u4", "u8", "u16", "u32"};
  int i = w == 2 ? 0 : w == 4 ? 1 : w == 8 ? 2 : w == 16 ? 3 : w == 32 ? 4 : -1;
  if (end == p + 1 || i < 0) return false;
  q->storage = uns ? u[i] : s[i];
  q->storage_min = uns ? 0 : -((int64_t)1 << (w - 1));
  q->storage_max = uns ? ((int64_t)1 << w) - 1 : ((int64_t)1 << (w - 1)) - 1;
  p = end;
  if (*p == '<') { /* i8<-127:127> */
    long long lo = strtoll(p + 1, &end, 10);
    if (*end != ':') return false;
    long long hi = strtoll(end + 1, &end, 10);
    if (*end != '>' || lo > hi || lo < q->storage_min || hi > q->storage_max) return false;
    q->storage_min = lo;
    q->storage_max = hi;
    p = end + 1;
  }
  *pp = p;
  return true;
}

static bool parse_expressed(const char **pp, kiln_mlir_type_t *t) {
  static const struct {
    const char *name;
    kiln_elem_type_t elem;
  } k[] = {{"f32", KILN_F32}, {"f64", KILN_F64}, {"f16", KILN_F16}, {"bf16", KILN_BF16}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    size_t n = strlen(k[i].name);
    if (!strncmp(*pp, k[i].name, n) && ((*pp)[n] == ':' || (*pp)[n] == ',')) {
      memset(t, 0, sizeof *t);
      t->kind = KILN_MLIR_TYPE_FLOAT;
      t->elem = k[i].elem;
      *pp += n;
      return true;
    }
  }
  return false;
}

/* scale[:zero_point] */
static bool parse_scale(const char **pp, double *scale, int64_t *zp) {
  char *end;
  const char *p = skip_space(*pp);
  *scale = strtod(p, &end);
  if (end == p || !(*scale > 0) || !isfinite(*scale)) return false;
  p = end;
  *zp = 0;
  if (*p == ':') {
    long long z = strtoll(p + 1, &end, 10);
    if (end == p + 1) return false;
    *zp = z;
    p = end;
  }
  *pp = skip_space(p);
  return true;
}

/* Parses `elem`'s text; UNIMPLEMENTED / INVALID_ARGUMENT naming it when it cannot. */
static kiln_status parse_quant(shc_ctx_t *c, const kiln_mlir_type_t *elem, quant_t *q) {
  memset(q, 0, sizeof *q);
  q->qdim = -1;
  const char *p = elem->text + strlen(QUANT_PREFIX);
  bool ok = parse_storage(&p, q) && *p++ == ':' && parse_expressed(&p, &q->expressed);
  if (ok && *p == ':') {
    char *end;
    long d = strtol(p + 1, &end, 10);
    ok = end != p + 1 && d >= 0 && d < 64;
    q->qdim = (int32_t)d;
    p = end;
  }
  ok = ok && *p++ == ',';
  p = skip_space(p);
  if (ok && q->qdim >= 0) {
    ok = *p++ == '{';
    int32_t cap = 0;
    while (ok) {
      double s;
      int64_t z;
      ok = parse_scale(&p, &s, &z) && q->n < MAX_AXIS_SCALES;
      if (!ok) break;
      if (q->n == cap) {
        cap = cap ? 2 * cap : 8;
        double *ns = kiln_arena_alloc(&c->arena, sizeof(double) * (size_t)cap);
        int64_t *nz = kiln_arena_alloc(&c->arena, sizeof(int64_t) * (size_t)cap);
        if (q->n) memcpy(ns, q->scales, sizeof(double) * (size_t)q->n);
        if (q->n) memcpy(nz, q->zero_points, sizeof(int64_t) * (size_t)q->n);
        q->scales = ns;
        q->zero_points = nz;
      }
      q->scales[q->n] = s;
      q->zero_points[q->n++] = z;
      if (*p == ',') {
        p++;
        continue;
      }
      ok = *p++ == '}';
      break;
    }
  } else if (ok) {
    q->n = 1;
    q->scales = kiln_arena_alloc(&c->arena, sizeof(double));
    q->zero_points = kiln_arena_alloc(&c->arena, sizeof(int64_t));
    ok = parse_scale(&p, q->scales, q->zero_points);
  }
  ok = ok && *skip_space(p) == '>';
  for (int32_t i = 0; ok && i < q->n; i++)
    ok = q->zero_points[i] >= q->storage_min && q->zero_points[i] <= q->storage_max;
  if (!ok)
    return KILN_ERR_UNIMPLEMENTED(
        "quantized type %s: not a uniform type kiln reads (storage i2..i32 / u2..u32, expressed "
        "f16/bf16/f32/f64, positive scales, zero points in the storage range)",
        elem->text);
  return NULL;
}

kiln_status shc_quant_storage_text(const kiln_mlir_type_t *elem, const char **out) {
  quant_t q;
  memset(&q, 0, sizeof q);
  const char *p = elem->text + strlen(QUANT_PREFIX);
  if (!parse_storage(&p, &q))
    return KILN_ERR_UNIMPLEMENTED("quantized type %s: storage type not read", elem->text);
  *out = q.storage;
  return NULL;
}

bool shc_is_quant(const kiln_mlir_type_t *elem) {
  return is_quant(elem);
}

/* A tensor type like `t` with element type `elem` (copied: it may live on the stack). */
static const kiln_mlir_type_t *with_elem(shc_ctx_t *c, const kiln_mlir_type_t *t,
                                         const kiln_mlir_type_t *elem) {
  kiln_mlir_type_t *n = kiln_arena_alloc(&c->arena, sizeof *n);
  kiln_mlir_type_t *e = kiln_arena_alloc(&c->arena, sizeof *e);
  *e = *elem;
  if (t->kind == KILN_MLIR_TYPE_TENSOR) {
    *n = *t;
    n->element = e;
  } else {
    *n = *e;
  }
  return n;
}

static int32_t rank_of(const kiln_mlir_type_t *t) {
  return t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0;
}

/* The scales (or zero points) of q as an expressed-type array of shape `sh`: a broadcast
 * scalar, or the per-axis vector along q->qdim. */
static kiln_status quant_param(shc_ctx_t *c, const kiln_mlir_op_t *op, const quant_t *q,
                               const kiln_mlir_type_t *t, const char *sh, bool zero_points,
                               const char **out) {
  const char *e;
  SHC_TRY(shc_elem_text(&q->expressed, &e));
  int32_t rank = rank_of(t);
  if (q->qdim < 0) {
    double v = zero_points ? (double)q->zero_points[0] : q->scales[0];
    const char *s;
    SHC_TRY(shc_scalar_const(c, &q->expressed, v, &s));
    *out = shc_broadcast_scalar(c, s, sh, rank);
    return NULL;
  }
  if (q->qdim >= rank || t->dims[q->qdim] != q->n)
    return SHC_INVALID(op, "quantization dimension %d holds %d scales, the tensor %" PRId64,
                       (int)q->qdim, (int)q->n, q->qdim < rank ? t->dims[q->qdim] : (int64_t)0);
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "constant({");
  for (int32_t i = 0; i < q->n; i++)
    kiln_strbuf_printf(&b, "%s%.17g", i ? ", " : "",
                       zero_points ? (double)q->zero_points[i] : q->scales[i]);
  kiln_strbuf_append(&b, "})");
  const char *vec =
      shc_emit(c, kiln_arena_printf(&c->arena, "%s[%d]", e, (int)q->n), "%s", kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  *out = shc_emit(c, sh, "broadcast(%s), dimensions={%d}", vec, (int)q->qdim);
  return NULL;
}

/* (convert(v) - zero_point) * scale, of type t (quantized elements q) in the expressed type. */
static kiln_status dequantize(shc_ctx_t *c, const kiln_mlir_op_t *op, const quant_t *q,
                              const kiln_mlir_type_t *t, const char *v, const char **out) {
  const char *sh, *zp, *sc;
  SHC_TRY(shc_type_text(c, with_elem(c, t, &q->expressed), &sh));
  SHC_TRY(quant_param(c, op, q, t, sh, true, &zp));
  SHC_TRY(quant_param(c, op, q, t, sh, false, &sc));
  const char *f = shc_emit(c, sh, "convert(%s)", v);
  *out = shc_emit(c, sh, "multiply(%s, %s)", shc_emit(c, sh, "subtract(%s, %s)", f, zp), sc);
  return NULL;
}

/* clamp(round_nearest_even(x / scale) + zero_point, min, max) in the storage type; x is of
 * type t with q's expressed element type. */
static kiln_status quantize(shc_ctx_t *c, const kiln_mlir_op_t *op, const quant_t *q,
                            const kiln_mlir_type_t *t, const char *x, const char **out) {
  const char *sh, *qsh, *zp, *sc, *lo, *hi;
  const kiln_mlir_type_t *et = with_elem(c, t, &q->expressed);
  SHC_TRY(shc_type_text(c, et, &sh));
  SHC_TRY(shc_type_text(c, t, &qsh));
  SHC_TRY(quant_param(c, op, q, t, sh, true, &zp));
  SHC_TRY(quant_param(c, op, q, t, sh, false, &sc));
  SHC_TRY(shc_scalar_const(c, &q->expressed, (double)q->storage_min, &lo));
  SHC_TRY(shc_scalar_const(c, &q->expressed, (double)q->storage_max, &hi));
  const char *d = shc_emit(c, sh, "divide(%s, %s)", x, sc);
  const char *r = shc_emit(c, sh, "round-nearest-even(%s)", d);
  const char *a = shc_emit(c, sh, "add(%s, %s)", r, zp);
  const char *cl = shc_emit(c, sh, "clamp(%s, %s, %s)", shc_broadcast_scalar(c, lo, sh, rank_of(t)),
                            a, shc_broadcast_scalar(c, hi, sh, rank_of(t)));
  *out = shc_emit(c, qsh, "convert(%s)", cl);
  return NULL;
}

/* The operand's value in the expressed type of `want` (dequantized when quantized, else
 * converted). */
static kiln_status operand_expressed(shc_ctx_t *c, const kiln_mlir_op_t *op,
                                     const kiln_mlir_value_t *v, const char **out) {
  const char *name;
  SHC_TRY(shc_lookup(c, v, &name));
  const kiln_mlir_type_t *elem = shc_elem_type(v->type);
  if (!is_quant(elem)) {
    *out = name;
    return NULL;
  }
  quant_t q;
  SHC_TRY(parse_quant(c, elem, &q));
  return dequantize(c, op, &q, v->type, name, out);
}

static kiln_status convert_uniform(shc_ctx_t *c, const kiln_mlir_op_t *op, bool quantize_op) {
  if (op->num_operands != 1 || op->num_results != 1)
    return SHC_INVALID(op, "%s takes one operand and gives one result", op->name);
  const char *x;
  SHC_TRY(operand_expressed(c, op, op->operands[0], &x));
  const kiln_mlir_type_t *rt = op->results[0].type, *relem = shc_elem_type(rt);
  if (!quantize_op) {
    if (is_quant(relem) || !shc_is_float(relem))
      return SHC_INVALID(op, "uniform_dequantize gives a float tensor");
    const char *sh;
    SHC_TRY(shc_type_text(c, rt, &sh));
    /* the operand's expressed type is the result's; convert in case of a mismatch */
    shc_bind(c, &op->results[0], shc_emit(c, sh, "convert(%s)", x));
    return NULL;
  }
  if (!is_quant(relem)) return SHC_INVALID(op, "uniform_quantize gives a quantized tensor");
  if (!is_quant(shc_elem_type(op->operands[0]->type)) &&
      !shc_is_float(shc_elem_type(op->operands[0]->type)))
    return SHC_INVALID(op, "uniform_quantize takes a float or quantized tensor");
  quant_t q;
  SHC_TRY(parse_quant(c, relem, &q));
  const char *sh, *r;
  SHC_TRY(shc_type_text(c, with_elem(c, rt, &q.expressed), &sh));
  SHC_TRY(quantize(c, op, &q, rt, shc_emit(c, sh, "convert(%s)", x), &r));
  shc_bind(c, &op->results[0], r);
  return NULL;
}

static bool has_quant_types(const kiln_mlir_op_t *op) {
  for (int32_t i = 0; i < op->num_operands; i++)
    if (is_quant(shc_elem_type(op->operands[i]->type))) return true;
  for (int32_t i = 0; i < op->num_results; i++)
    if (is_quant(shc_elem_type(op->results[i].type))) return true;
  return false;
}

kiln_status shc_convert_quant_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled) {
  *handled = false;
  const char *n = op->name;
  if (!strncmp(n, "stablehlo.", 10)) n += 10;
  if (!strcmp(n, "uniform_quantize") || !strcmp(n, "uniform_dequantize")) {
    *handled = true;
    return convert_uniform(c, op, !strcmp(n, "uniform_quantize"));
  }
  if (!has_quant_types(op)) return NULL;
  *handled = true;
  if (!strcmp(n, "bitcast_convert")) { /* storage integers <-> the same integers */
    const kiln_mlir_type_t *a = shc_elem_type(op->operands[0]->type);
    const kiln_mlir_type_t *b = shc_elem_type(op->results[0].type);
    const char *sa, *sb, *v, *sh;
    SHC_TRY(shc_elem_text(a, &sa));
    SHC_TRY(shc_elem_text(b, &sb));
    if (strcmp(sa, sb) != 0)
      return SHC_UNIMPL(op, "bitcast_convert between %s and %s storage", sa, sb);
    SHC_TRY(shc_lookup(c, op->operands[0], &v));
    SHC_TRY(shc_type_text(c, op->results[0].type, &sh));
    shc_bind(c, &op->results[0], shc_emit(c, sh, "copy(%s)", v));
    return NULL;
  }
  if (op->num_regions > 0) return SHC_UNIMPL(op, "quantized values in an op with regions");
  if (!strcmp(n, "constant")) return SHC_UNIMPL(op, "quantized constants");
  /* dequantize_op_quantize: the op on expressed values, then each quantized result quantized */
  kiln_mlir_op_t copy = *op;
  copy.operands =
      kiln_arena_alloc(&c->arena, sizeof(*copy.operands) * (size_t)(op->num_operands + 1));
  copy.results = kiln_arena_alloc(&c->arena, sizeof(*copy.results) * (size_t)(op->num_results + 1));
  quant_t *rq = kiln_arena_alloc(&c->arena, sizeof(*rq) * (size_t)(op->num_results + 1));
  for (int32_t i = 0; i < op->num_operands; i++) {
    const kiln_mlir_value_t *v = op->operands[i];
    const kiln_mlir_type_t *elem = shc_elem_type(v->type);
    if (!is_quant(elem)) {
      copy.operands[i] = (kiln_mlir_value_t *)v;
      continue;
    }
    quant_t q;
    SHC_TRY(parse_quant(c, elem, &q));
    const char *x;
    SHC_TRY(operand_expressed(c, op, v, &x));
    kiln_mlir_value_t *nv = kiln_arena_alloc(&c->arena, sizeof *nv);
    *nv = *v;
    nv->type = with_elem(c, v->type, &q.expressed);
    shc_bind(c, nv, x);
    copy.operands[i] = nv;
  }
  for (int32_t i = 0; i < op->num_results; i++) {
    copy.results[i] = op->results[i];
    const kiln_mlir_type_t *elem = shc_elem_type(op->results[i].type);
    rq[i].storage = NULL;
    if (!is_quant(elem)) continue;
    SHC_TRY(parse_quant(c, elem, &rq[i]));
    copy.results[i].type = with_elem(c, op->results[i].type, &rq[i].expressed);
  }
  SHC_TRY(shc_convert_op(c, &copy));
  for (int32_t i = 0; i < op->num_results; i++) {
    const char *v, *r = NULL;
    SHC_TRY(shc_lookup(c, &copy.results[i], &v));
    if (rq[i].storage) SHC_TRY(quantize(c, op, &rq[i], op->results[i].type, v, &r));
    shc_bind(c, &op->results[i], r ? r : v);
  }
  return NULL;
}
