/* The evaluator's custom calls: XLA's well-known targets computed directly (the compiler
 * rewrites the same targets into HLO: compiler/passes/custom_call_rewrite.c, so the two
 * check each other), then whatever the caller's options->custom_call implements. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cmplx.h"
#include "compiler/eval/eval.h"

bool kiln_eval_is_identity_target(const char *t) {
  static const char *const kNames[] = {"Sharding",
                                       "SPMDFullToShardShape",
                                       "SPMDShardToFullShape",
                                       "MoveToHost",
                                       "MoveToDevice",
                                       "Pin",
                                       "Unpin",
                                       "annotate_device_placement",
                                       "SetBound"};
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; i++)
    if (!strcmp(t, kNames[i])) return true;
  return false;
}

kiln_status kiln_eval_identity_target_reshapes(const kiln_hlo_instruction_t *in) {
  const char *t = in->custom_call_target ? in->custom_call_target : "";
  if (!kiln_eval_is_identity_target(t) || in->num_operands != 1) return NULL;
  const kiln_shape_t *from = in->operands[0]->shape;
  if (kiln_shape_is_array(in->shape) && kiln_shape_is_array(from) &&
      kiln_shape_compatible(in->shape, from))
    return NULL;
  char *a = kiln_shape_to_string(from, false), *b = kiln_shape_to_string(in->shape, false);
  kiln_status s = kiln_status_make(
      KILN_UNIMPLEMENTED,
      "custom call %s (%s) takes %s to %s: a sharding annotation that changes the shape "
      "needs XLA's SPMD partitioner, which kiln does not run (give kiln the module XLA "
      "partitioned: its after-optimizations HLO)",
      in->name, t, a ? a : "?", b ? b : "?");
  kiln_free(a);
  kiln_free(b);
  return s;
}

static kiln_status threefry(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                            kiln_literal_t *const *ops, kiln_literal_t **out) {
  if (in->num_operands != 4 || !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 2)
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "custom call %s (cuda_threefry2x32): expected 4 operands and a pair",
                            in->name);
  int64_t n = ops[0]->num_elements;
  for (int i = 0; i < 4; i++)
    if (ops[i]->shape->type != KILN_U32 || ops[i]->num_elements != n)
      return kiln_status_make(KILN_INVALID_ARGUMENT,
                              "custom call %s (cuda_threefry2x32): operands must be u32 of one "
                              "size",
                              in->name);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *y0 = (*out)->tuple_elements[0], *y1 = (*out)->tuple_elements[1];
  if (y0->num_elements != n || y1->num_elements != n)
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "custom call %s (cuda_threefry2x32): results differ in size", in->name);
  const uint32_t *k0 = ops[0]->data, *k1 = ops[1]->data, *x0 = ops[2]->data, *x1 = ops[3]->data;
  uint32_t *o0 = y0->data, *o1 = y1->data;
  for (int64_t i = 0; i < n; i++) {
    uint32_t k[2] = {k0[i], k1[i]}, c[2] = {x0[i], x1[i]}, o[2];
    kiln_eval_threefry2x32(k, c, o);
    o0[i] = o[0];
    o1[i] = o[1];
  }
  return NULL;
}

bool kiln_eval_is_gemm_target(const char *t) {
  return t && (!strcmp(t, "__cublas$gemm") || !strcmp(t, "__cublas$lt$matmul"));
}

/* The number after "key": in `json` (def when absent). */
static bool json_number(const char *json, const char *key, double def, double *out) {
  const char *p = strstr(json, key);
  *out = def;
  if (!p) return true;
  p += strlen(key);
  while (*p == ' ' || *p == ':') p++;
  if (*p == '"') p++;
  char *end;
  double v = strtod(p, &end);
  if (end == p) return false;
  *out = v;
  return true;
}

/* "key":["1","2"] (or [1,2]) into dims[*at...]; sets the list. */
static bool json_list(const char *json, const char *key, kiln_gemm_config_t *g, int *at,
                      kiln_i64_list_t *list) {
  list->n = 0;
  list->v = g->dims + *at;
  const char *p = strstr(json, key);
  if (!p) return true;
  p = strchr(p + strlen(key), '[');
  if (!p) return false;
  p++;
  for (;;) {
    while (*p == ' ' || *p == '"' || *p == ',') p++;
    if (*p == ']') return true;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || *at >= 32 || list->n >= 8) return false;
    g->dims[(*at)++] = v;
    list->n++;
    p = end;
  }
}

bool kiln_eval_gemm_config(const char *json, kiln_gemm_config_t *g) {
  memset(g, 0, sizeof(*g));
  if (!json) return false;
  double imag;
  if (!json_number(json, "\"alpha_real\"", 1.0, &g->alpha) ||
      !json_number(json, "\"alpha_imag\"", 0.0, &imag) ||
      !json_number(json, "\"beta\"", 0.0, &g->beta) || imag != 0.0)
    return false;
  int at = 0;
  if (!json_list(json, "\"lhs_contracting_dimensions\"", g, &at, &g->dnums.lhs_contracting) ||
      !json_list(json, "\"rhs_contracting_dimensions\"", g, &at, &g->dnums.rhs_contracting) ||
      !json_list(json, "\"lhs_batch_dimensions\"", g, &at, &g->dnums.lhs_batch) ||
      !json_list(json, "\"rhs_batch_dimensions\"", g, &at, &g->dnums.rhs_batch))
    return false;
  const char *e = strstr(json, "\"epilogue\"");
  if (e) {
    e = strchr(e + 10, ':');
    if (!e) return false;
    while (*e == ':' || *e == ' ' || *e == '"') e++;
    if (!strncmp(e, "RELU\"", 5))
      g->relu = true;
    else if (strncmp(e, "DEFAULT\"", 8))
      return false;
  }
  return true;
}

/* A gemm custom call as the dot it is, then alpha, beta * c and the epilogue. */
static kiln_status gemm(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                        kiln_literal_t *const *ops, kiln_literal_t **out) {
  kiln_gemm_config_t g;
  const kiln_shape_t *rs = kiln_shape_is_tuple(in->shape) && in->shape->num_elements > 0
                               ? in->shape->elements[0]
                               : in->shape;
  if (!kiln_eval_gemm_config(in->backend_config, &g) || in->num_operands < 2 ||
      !kiln_shape_is_array(rs))
    return kiln_status_make(KILN_UNIMPLEMENTED, "custom call %s (%s): unsupported gemm config",
                            in->name, in->custom_call_target);
  kiln_hlo_instruction_t dot = *in;
  dot.opcode = KILN_OP_DOT;
  dot.has_dot_dnums = true;
  dot.dot_dnums = g.dnums;
  dot.num_operands = 2;
  dot.shape = (kiln_shape_t *)rs;
  dot.num_operand_precision = 0;
  kiln_literal_t *d;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_dot_conv(ctx, &dot, ops, &d));
  bool add_c = g.beta != 0.0 && in->num_operands >= 3;
  for (int64_t i = 0; i < d->num_elements; i++) {
    double v = g.alpha * kiln_literal_get_f64(d, i);
    if (add_c) v += g.beta * kiln_literal_get_f64(ops[2], i);
    if (g.relu && v < 0) v = 0;
    kiln_literal_set_f64(d, i, v);
  }
  if (!kiln_shape_is_tuple(in->shape)) {
    *out = d;
    return NULL;
  }
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  (*out)->tuple_elements[0] = d; /* the workspace stays zeros */
  return NULL;
}

/* ---- TopK and PartialReduce: the first k along the last dimension ---- */

bool kiln_eval_topk_comparator(const kiln_hlo_computation_t *c, bool *largest) {
  const kiln_hlo_instruction_t *r = c ? c->root : NULL;
  if (!r || r->opcode != KILN_OP_COMPARE || r->num_operands != 2) return false;
  const kiln_hlo_instruction_t *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != KILN_OP_PARAMETER || b->opcode != KILN_OP_PARAMETER) return false;
  bool swapped = a->parameter_number == 1 && b->parameter_number == 0;
  if (!swapped && !(a->parameter_number == 0 && b->parameter_number == 1)) return false;
  if (r->comparison_direction != KILN_CMP_GT && r->comparison_direction != KILN_CMP_LT)
    return false;
  *largest = (r->comparison_direction == KILN_CMP_GT) != swapped;
  return true;
}

/* A key in the comparator's order: floats by XLA's total order (-NaN < -inf < ... < inf <
 * NaN), integers by value. */
static int64_t order_key(const kiln_literal_t *l, int64_t i) {
  if (!kiln_elem_type_is_float(l->shape->type)) return kiln_literal_get_s64(l, i);
  double v = kiln_literal_get_f64(l, i);
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  int64_t mag = (int64_t)(b & 0x7FFFFFFFFFFFFFFFull);
  return (b >> 63) ? -mag - 1 : mag;
}

typedef struct row_order {
  const kiln_literal_t *x;
  int64_t base;
  bool largest;
} row_order_t;

/* "a before b": by key, ties by lower position (a stable sort). */
static bool row_before(const row_order_t *o, int64_t a, int64_t b) {
  int64_t ka = order_key(o->x, o->base + a), kb = order_key(o->x, o->base + b);
  if (ka != kb) return o->largest ? ka > kb : ka < kb;
  return a < b;
}

static void row_merge_sort(const row_order_t *o, int64_t *v, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  row_merge_sort(o, v, tmp, h);
  row_merge_sort(o, v + h, tmp, n - h);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = row_before(o, v[j], v[i]) ? v[j++] : v[i++];
  while (i < h) tmp[k++] = v[i++];
  while (j < n) tmp[k++] = v[j++];
  memcpy(v, tmp, sizeof(int64_t) * (size_t)n);
}

/* vals/idx[..., :m] = the first m of x's rows (last dimension) in order, idx taking
 * `positions`' element at the chosen place (or the position itself when NULL). */
static kiln_status first_of_rows(const kiln_literal_t *x, const kiln_literal_t *positions,
                                 bool largest, kiln_literal_t *vals, kiln_literal_t *idx) {
  int rank = x->shape->rank;
  int64_t n = rank ? x->shape->dims[rank - 1] : 1;
  int64_t m = vals->shape->rank ? vals->shape->dims[vals->shape->rank - 1] : 1;
  for (int d = 0; d < rank; d++)
    if (vals->shape->rank != rank || idx->shape->rank != rank ||
        vals->shape->dims[d] != (d == rank - 1 ? m : x->shape->dims[d]) ||
        idx->shape->dims[d] != vals->shape->dims[d] || m > n)
      return kiln_status_make(KILN_INVALID_ARGUMENT,
                              "top-k: results must have the operand's dims but the last, at "
                              "most its size");
  if (n == 0) return NULL;
  int64_t rows = x->num_elements / n;
  int64_t *v = kiln_try_malloc(sizeof(int64_t) * 2 * (size_t)n);
  if (!v) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "top-k: out of memory");
  for (int64_t r = 0; r < rows; r++) {
    row_order_t o = {x, r * n, largest};
    for (int64_t i = 0; i < n; i++) v[i] = i;
    row_merge_sort(&o, v, v + n, n);
    size_t es = kiln_elem_type_storage_bytes(x->shape->type);
    for (int64_t i = 0; i < m; i++) {
      memcpy((char *)vals->data + (size_t)(r * m + i) * es,
             (const char *)x->data + (size_t)(r * n + v[i]) * es, es);
      kiln_literal_set_s64(idx, r * m + i,
                           positions ? kiln_literal_get_s64(positions, r * n + v[i]) : v[i]);
    }
  }
  free(v);
  return NULL;
}

/* TopK (x) -> (values, indices) and PartialReduce (x, positions, init, init_position) ->
 * (values, positions): PartialReduce is XLA's approximate top-k; kiln computes it exactly
 * (a result of the approximation with recall 1). */
static kiln_status top_k(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                         kiln_literal_t *const *ops, kiln_literal_t **out) {
  bool partial = !strcmp(in->custom_call_target, "PartialReduce");
  bool largest;
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "called_computations");
  if (in->num_operands != (partial ? 4 : 1) || !kiln_eval_topk_comparator(c, &largest) ||
      !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 2 ||
      !kiln_shape_is_array(ops[0]->shape) || ops[0]->shape->rank < 1 ||
      (partial && (ops[1]->shape->rank != ops[0]->shape->rank ||
                   ops[1]->num_elements != ops[0]->num_elements)))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "custom call %s (%s): expected %s, a (values, indices) pair and a "
                            "comparator compare(p0, p1) with direction GT or LT",
                            in->name, in->custom_call_target, partial ? "4 operands" : "1 operand");
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  return first_of_rows(ops[0], partial ? ops[1] : NULL, largest, (*out)->tuple_elements[0],
                       (*out)->tuple_elements[1]);
}

/* xla_builder.prng.ScramblePhiloxKey: Philox4x32-10 of (lo, 0, hi, 0) under XLA's fixed key;
 * output words 0 and 1 as the u64. */
static kiln_status scramble_philox_key(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                       kiln_literal_t *const *ops, kiln_literal_t **out) {
  if (in->num_operands != 1 || ops[0]->shape->type != KILN_U64 ||
      !kiln_shape_compatible(ops[0]->shape, in->shape))
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "custom call %s (xla_builder.prng.ScramblePhiloxKey): expected a u64 "
                            "key of the result's shape",
                            in->name);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  for (int64_t i = 0; i < ops[0]->num_elements; i++) {
    uint64_t key = kiln_literal_get_u64(ops[0], i);
    uint32_t x[4] = {(uint32_t)key, 0, (uint32_t)(key >> 32), 0};
    uint32_t k0 = KILN_EVAL_PHILOX_SCRAMBLE_KEY0, k1 = KILN_EVAL_PHILOX_SCRAMBLE_KEY1;
    for (int round = 0; round < 10; round++) {
      uint64_t p0 = (uint64_t)x[0] * 0xD2511F53u, p1 = (uint64_t)x[2] * 0xCD9E8D57u;
      uint32_t y[4] = {(uint32_t)(p1 >> 32) ^ x[1] ^ k0, (uint32_t)p1,
                       (uint32_t)(p0 >> 32) ^ x[3] ^ k1, (uint32_t)p0};
      memcpy(x, y, sizeof x);
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    kiln_literal_set_u64(*out, i, (uint64_t)x[0] | (uint64_t)x[1] << 32);
  }
  return NULL;
}

/* SliceToDynamic(x, sizes...) -> x and PadToStatic(x) -> (x, its dims): every dynamic
 * dimension at its bound, as set-dimension-size and get-dimension-size take them. */
static kiln_status dynamic_padding(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                   kiln_literal_t *const *ops, kiln_literal_t **out) {
  bool slice = !strcmp(in->custom_call_target, "SliceToDynamic");
  const kiln_shape_t *xs = ops[0]->shape;
  kiln_shape_t *data = slice ? in->shape
                       : kiln_shape_is_tuple(in->shape) && in->shape->num_elements == 1 + xs->rank
                           ? in->shape->elements[0]
                           : NULL;
  if (in->num_operands != (slice ? 1 + xs->rank : 1) || !data || !kiln_shape_is_array(data) ||
      !kiln_shape_compatible(data, xs))
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "custom call %s (%s): the data must keep the operand's bounds",
                            in->name, in->custom_call_target);
  if (slice) return kiln_eval_literal_view(ctx, in->shape, ops[0], out);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  memcpy((*out)->tuple_elements[0]->data, ops[0]->data, (size_t)kiln_shape_byte_size(data));
  for (int d = 0; d < xs->rank; d++) {
    kiln_literal_t *size = (*out)->tuple_elements[1 + d];
    if (size->num_elements != 1)
      return kiln_status_make(KILN_INVALID_ARGUMENT,
                              "custom call %s (PadToStatic): sizes must be scalars", in->name);
    kiln_literal_set_s64(size, 0, xs->dims[d]);
  }
  return NULL;
}

/* ---- jaxlib's solver targets (cusolver_potrf, cublas_trsm_batched, cublas_getrf_batched) ---- */

/* The bytes of an opaque backend_config kept as its escaped text ("\001\000..."); the
 * number of bytes, or -1 when the text is not a quoted C string. */
static int opaque_bytes(const char *s, unsigned char *out, int cap) {
  if (!s || *s++ != '"') return -1;
  int n = 0;
  while (*s && *s != '"') {
    int c = (unsigned char)*s++;
    if (c == '\\') {
      if (*s >= '0' && *s <= '7') {
        c = 0;
        for (int d = 0; d < 3 && *s >= '0' && *s <= '7'; d++) c = c * 8 + (*s++ - '0');
      } else if (*s == 'x') {
        s++;
        char *end;
        c = (int)strtol(s, &end, 16);
        if (end == s) return -1;
        s = end;
      } else {
        const char *from = "ntr\\\"'", *to = "\n\t\r\\\"'";
        const char *f = *s ? strchr(from, *s) : NULL;
        if (!f) return -1;
        c = to[f - from];
        s++;
      }
    }
    if (n >= cap) return -1;
    out[n++] = (unsigned char)c;
  }
  return *s == '"' ? n : -1;
}

static int32_t le32(const unsigned char *p) {
  return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24);
}

bool kiln_eval_dict_int(const char *cfg, const char *name, int64_t *out) {
  size_t n = strlen(name);
  for (const char *p = strstr(cfg, name); p; p = strstr(p + 1, name)) {
    char before = p == cfg ? '{' : p[-1];
    if (before != '{' && before != ',' && before != ' ') continue;
    const char *q = p + n;
    while (*q == ' ') q++;
    if (*q != '=') continue;
    q++;
    while (*q == ' ') q++;
    char *end;
    long long v = strtoll(q, &end, 0);
    if (end == q) return false;
    *out = v;
    return true;
  }
  return false;
}

int kiln_eval_dict_flag(const char *cfg, const char *name) {
  int64_t v;
  return kiln_eval_dict_int(cfg, name, &v) && v >= 0 && v <= 255 ? (int)v : -1;
}

bool kiln_eval_solver_config(const kiln_hlo_instruction_t *in, kiln_solver_config_t *c) {
  memset(c, 0, sizeof *c);
  const char *t = in->custom_call_target;
  unsigned char b[64];
  int n = in->backend_config_form == KILN_BACKEND_CONFIG_RAW
              ? opaque_bytes(in->backend_config, b, (int)sizeof b)
              : -1;
  if (!t) return false;
  if (!strcmp(t, "cusolver_potrf")) {
    /* {type, uplo, int64 batch, int64 n, lwork}; uplo 0 = CUBLAS_FILL_MODE_LOWER */
    if (n < 8) return false;
    c->kind = KILN_SOLVER_POTRF;
    c->lower = le32(b + 4) == 0;
    return true;
  }
  if (!strcmp(t, "cublas_trsm_batched")) {
    /* {type, batch, m, n, side, uplo, trans, diag}: side 0 = left, uplo 0 = lower,
     * trans 0/1/2 = N/T/C, diag 1 = unit */
    if (n < 32) return false;
    c->kind = KILN_SOLVER_TRSM;
    c->left_side = le32(b + 16) == 0;
    c->lower = le32(b + 20) == 0;
    c->transpose = le32(b + 24);
    c->unit_diagonal = le32(b + 28) == 1;
    return c->transpose >= 0 && c->transpose <= 2;
  }
  if (!strcmp(t, "cublas_getrf_batched")) {
    c->kind = KILN_SOLVER_GETRF;
    return true;
  }
  /* lapack_<s|d|c|z><potrf|trsm|getrf>_ffi */
  if (strncmp(t, "lapack_", 7) != 0 || !t[7] || !strchr("sdcz", t[7])) return false;
  const char *f = t + 8, *cfg = in->backend_config ? in->backend_config : "";
  if (!strcmp(f, "getrf_ffi")) {
    c->kind = KILN_SOLVER_GETRF;
    return true;
  }
  if (!strcmp(f, "potrf_ffi")) {
    c->kind = KILN_SOLVER_POTRF;
    c->lower = kiln_eval_dict_flag(cfg, "uplo") == 'L';
    return kiln_eval_dict_flag(cfg, "uplo") == 'L' || kiln_eval_dict_flag(cfg, "uplo") == 'U';
  }
  if (!strcmp(f, "trsm_ffi")) {
    int side = kiln_eval_dict_flag(cfg, "side"), uplo = kiln_eval_dict_flag(cfg, "uplo");
    int trans = kiln_eval_dict_flag(cfg, "trans_x"), diag = kiln_eval_dict_flag(cfg, "diag");
    c->kind = KILN_SOLVER_TRSM;
    c->left_side = side == 'L';
    c->lower = uplo == 'L';
    c->transpose = trans == 'N' ? 0 : trans == 'T' ? 1 : trans == 'C' ? 2 : -1;
    c->unit_diagonal = diag == 'U';
    return (side == 'L' || side == 'R') && (uplo == 'L' || uplo == 'U') && c->transpose >= 0 &&
           (diag == 'U' || diag == 'N');
  }
  return false;
}

/* The matrices of a [..., r, c] literal: count, rows, columns. */
static int64_t matrices(const kiln_literal_t *l, int64_t *r, int64_t *c) {
  int rank = l->shape->rank;
  *r = rank >= 2 ? l->shape->dims[rank - 2] : 0;
  *c = rank >= 2 ? l->shape->dims[rank - 1] : 0;
  return *r && *c ? l->num_elements / (*r * *c) : 0;
}

static kiln_status solver_shapes_error(const kiln_hlo_instruction_t *in) {
  return kiln_status_make(KILN_UNIMPLEMENTED,
                          "custom call %s (%s): unsupported operands, results or descriptor "
                          "(kiln takes real or complex floating-point [..., m, n] matrices)",
                          in->name, in->custom_call_target);
}

kiln_status kiln_eval_solver_refusal(const kiln_hlo_instruction_t *in) {
  kiln_solver_config_t sc;
  bool orgqr;
  const char *t = in->custom_call_target;
  if (kiln_eval_solver_config(in, &sc) || kiln_eval_is_qr_target(t, &orgqr) ||
      kiln_eval_is_eigh_target(t) || kiln_eval_is_svd_target(t) || kiln_eval_is_gtsv_target(t) ||
      kiln_eval_is_geev_target(t) || kiln_eval_is_gehrd_target(t) || kiln_eval_is_sytrd_target(t))
    return solver_shapes_error(in);
  return NULL;
}

static bool solver_type(kiln_elem_type_t t) {
  return kiln_elem_type_is_float(t) || kiln_elem_type_is_complex(t);
}

double complex kiln_eval_get_complex(const kiln_literal_t *l, int64_t i) {
  if (!kiln_elem_type_is_complex(l->shape->type)) return kiln_literal_get_f64(l, i);
  double re, im;
  kiln_literal_get_c128(l, i, &re, &im);
  return CMPLX(re, im);
}

void kiln_eval_set_complex(kiln_literal_t *l, int64_t i, double complex v) {
  if (kiln_elem_type_is_complex(l->shape->type))
    kiln_literal_set_c128(l, i, creal(v), cimag(v));
  else
    kiln_literal_set_f64(l, i, creal(v));
}

/* x / y, by real division when both are real: C's complex division scales its operands and
 * may round a real quotient differently (the real solvers must keep their real results). */
static double complex cdiv(double complex x, double complex y) {
  return cimag(x) == 0 && cimag(y) == 0 ? creal(x) / creal(y) : x / y;
}

/* potrf: the Cholesky factor in the chosen triangle (the other keeps the input), info =
 * 1 + the first column whose pivot is not positive (0 when none); the factorization goes on
 * past a failure (NaNs), as kiln's cholesky does. Complex: A = L L^H (lower) or U^H U (upper,
 * U = L^H), the pivot the real part of the diagonal, as LAPACK's zpotrf. */
static kiln_status potrf(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                         const kiln_solver_config_t *cfg, kiln_literal_t *const *ops,
                         kiln_literal_t **out) {
  int64_t n, n2;
  int64_t count = matrices(ops[0], &n, &n2);
  if (in->num_operands != 1 || !kiln_shape_is_tuple(in->shape) || in->shape->num_elements < 2 ||
      n != n2 || !solver_type(ops[0]->shape->type))
    return solver_shapes_error(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *f = (*out)->tuple_elements[0], *info = (*out)->tuple_elements[1];
  if (f->num_elements != ops[0]->num_elements || info->num_elements != count)
    return solver_shapes_error(in);
  memcpy(f->data, ops[0]->data, (size_t)kiln_shape_byte_size(f->shape));
  double complex *l = kiln_try_malloc(sizeof(double complex) * (size_t)(n * n));
  if (!l) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "potrf: out of memory");
  for (int64_t m = 0; m < count; m++) {
    int64_t base = m * n * n, bad = 0;
    /* (i, j) of the factor with i >= j: element (i, j) for lower, (j, i) conjugated for upper. */
#define AT(i, j) (base + (cfg->lower ? (i)*n + (j) : (j)*n + (i)))
#define READ(i, j)                                      \
  (cfg->lower ? kiln_eval_get_complex(ops[0], AT(i, j)) \
              : conj(kiln_eval_get_complex(ops[0], AT(i, j))))
    for (int64_t j = 0; j < n; j++) {
      double d = creal(kiln_eval_get_complex(ops[0], AT(j, j)));
      for (int64_t k = 0; k < j; k++) d -= creal(l[j * n + k] * conj(l[j * n + k]));
      if (!(d > 0) && !bad) bad = j + 1;
      l[j * n + j] = sqrt(d);
      for (int64_t i = j + 1; i < n; i++) {
        double complex s = READ(i, j);
        for (int64_t k = 0; k < j; k++) s -= l[i * n + k] * conj(l[j * n + k]);
        l[i * n + j] = s / creal(l[j * n + j]); /* a real pivot: no complex division */
      }
    }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++)
        kiln_eval_set_complex(f, AT(i, j), cfg->lower ? l[i * n + j] : conj(l[i * n + j]));
#undef READ
#undef AT
    kiln_literal_set_s64(info, m, bad);
  }
  free(l);
  return NULL;
}

/* trsm: X with op(A) X = alpha B (left) or X op(A) = alpha B (right), A triangular (only its
 * triangle read), op(A) = A, A^T or A^H, by substitution. */
static kiln_status trsm(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                        const kiln_solver_config_t *cfg, kiln_literal_t *const *ops,
                        kiln_literal_t **out) {
  int64_t k, k2, m, n;
  /* cuBLAS: (a, b) -> (x, ...); LAPACK: (a, b, alpha) -> x */
  bool lapack = in->num_operands == 3, tuple = kiln_shape_is_tuple(in->shape);
  int64_t count = matrices(ops[0], &k, &k2),
          bcount = in->num_operands >= 2 ? matrices(ops[1], &m, &n) : 0;
  if ((in->num_operands != 2 && !lapack) || tuple == lapack ||
      (tuple && in->shape->num_elements < 1) || k != k2 || count != bcount ||
      k != (cfg->left_side ? m : n) || !solver_type(ops[1]->shape->type) ||
      (lapack && ops[2]->num_elements != 1))
    return solver_shapes_error(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *x = tuple ? (*out)->tuple_elements[0] : *out;
  if (x->num_elements != ops[1]->num_elements) return solver_shapes_error(in);
  double complex alpha = lapack ? kiln_eval_get_complex(ops[2], 0) : 1.0;
  /* Every case as N x = b with N lower or upper: for the right side, x^T solves op(A)^T
   * (A^T, A or conj(A)); N's elements are conjugated exactly when op is A^H. */
  bool right = !cfg->left_side, t = (cfg->transpose != 0) != right, cj = cfg->transpose == 2;
  bool lower = cfg->lower != ((cfg->transpose != 0) != right);
  int64_t systems = right ? m : n, stride = right ? 1 : n, step = right ? n : 1;
#define N_AT(i) (cj ? conj(kiln_eval_get_complex(ops[0], i)) : kiln_eval_get_complex(ops[0], i))
  for (int64_t b = 0; b < count; b++) {
    int64_t abase = b * k * k, bbase = b * m * n;
    for (int64_t s = 0; s < systems; s++) {
      int64_t first = bbase + s * step; /* element p of the system is first + p * stride */
      for (int64_t q = 0; q < k; q++) {
        int64_t p = lower ? q : k - 1 - q;
        double complex v = alpha * kiln_eval_get_complex(ops[1], first + p * stride);
        int64_t lo = lower ? 0 : p + 1, hi = lower ? p : k;
        for (int64_t j = lo; j < hi; j++)
          v -= N_AT(abase + (t ? j * k + p : p * k + j)) *
               kiln_eval_get_complex(x, first + j * stride);
        if (!cfg->unit_diagonal) v = cdiv(v, N_AT(abase + p * k + p));
        kiln_eval_set_complex(x, first + p * stride, v);
      }
    }
  }
#undef N_AT
  return NULL;
}

/* v's parts rounded to f32 when the arithmetic is c64's. */
static double complex zin_type(kiln_elem_type_t t, double complex v) {
  return t == KILN_C64 ? CMPLX((double)(float)creal(v), (double)(float)cimag(v)) : v;
}

/* LAPACK's izamax measure: |re| + |im|. */
static double cabs1(double complex v) {
  return fabs(creal(v)) + fabs(cimag(v));
}

/* getrf's loop on the count complex m x n matrices of x, into the allocated results: the pivot
 * the first largest |re| + |im| (LAPACK's izamax). Kept apart from the real loop: with the
 * real values as complex numbers of zero imaginary part, GCC's vectorized code (-O2) rounded
 * one f32 element of a corpus slogdet differently from the real loop, and the compiled
 * module's. */
static kiln_status zgetrf(const kiln_literal_t *x, int64_t count, int64_t m, int64_t n,
                          kiln_literal_t *lu, kiln_literal_t *piv, kiln_literal_t *info) {
  kiln_elem_type_t t = x->shape->type;
  int64_t steps = m < n ? m : n;
  double complex *a = kiln_try_malloc(sizeof(double complex) * (size_t)(m * n));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "getrf: out of memory");
  for (int64_t b = 0; b < count; b++) {
    int64_t base = b * m * n, bad = 0;
    for (int64_t i = 0; i < m * n; i++) a[i] = kiln_eval_get_complex(x, base + i);
    for (int64_t k = 0; k < steps; k++) {
      int64_t p = k;
      for (int64_t i = k + 1; i < m; i++)
        if (cabs1(a[i * n + k]) > cabs1(a[p * n + k])) p = i;
      kiln_literal_set_s64(piv, b * steps + k, p + 1);
      for (int64_t j = 0; j < n; j++) {
        double complex tmp = a[k * n + j];
        a[k * n + j] = a[p * n + j];
        a[p * n + j] = tmp;
      }
      double complex pivot = a[k * n + k];
      if (pivot == 0 && !bad) bad = k + 1;
      for (int64_t i = k + 1; i < m; i++) {
        double complex l = pivot == 0 ? a[i * n + k] : zin_type(t, cdiv(a[i * n + k], pivot));
        a[i * n + k] = l;
        for (int64_t j = k + 1; j < n; j++)
          a[i * n + j] = zin_type(t, a[i * n + j] - zin_type(t, l * a[k * n + j]));
      }
    }
    for (int64_t i = 0; i < m * n; i++) kiln_eval_set_complex(lu, base + i, a[i]);
    kiln_literal_set_s64(info, b, bad);
  }
  free(a);
  return NULL;
}

/* v rounded to f32 when the arithmetic is f32's (each step rounds as the compiled code's). */
static double in_type(kiln_elem_type_t t, double v) {
  return t == KILN_F32 ? (double)(float)v : v;
}

/* getrf: LU of m x n matrices with partial pivoting (LAPACK's getf2: min(m, n) steps, the first
 * largest |a| of the column is the pivot; a zero pivot leaves its column unscaled and sets info
 * to its 1-based column), L's unit diagonal implied; pivots 1-based. Complex matrices:
 * zgetrf. */
static kiln_status getrf(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                         kiln_literal_t *const *ops, kiln_literal_t **out) {
  int64_t m, n;
  int64_t count = matrices(ops[0], &m, &n), steps = m < n ? m : n;
  if (in->num_operands != 1 || !kiln_shape_is_tuple(in->shape) || in->shape->num_elements < 3 ||
      !solver_type(ops[0]->shape->type))
    return solver_shapes_error(in);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  kiln_literal_t *lu = (*out)->tuple_elements[0], *piv = (*out)->tuple_elements[1],
                 *info = (*out)->tuple_elements[2];
  if (lu->num_elements != ops[0]->num_elements || piv->num_elements != count * steps ||
      info->num_elements != count)
    return solver_shapes_error(in);
  if (kiln_elem_type_is_complex(ops[0]->shape->type))
    return zgetrf(ops[0], count, m, n, lu, piv, info);
  kiln_elem_type_t t = ops[0]->shape->type;
  double *a = kiln_try_malloc(sizeof(double) * (size_t)(m * n));
  if (!a) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "getrf: out of memory");
  for (int64_t b = 0; b < count; b++) {
    int64_t base = b * m * n, bad = 0;
    for (int64_t i = 0; i < m * n; i++) a[i] = kiln_literal_get_f64(ops[0], base + i);
    for (int64_t k = 0; k < steps; k++) {
      int64_t p = k;
      for (int64_t i = k + 1; i < m; i++)
        if (fabs(a[i * n + k]) > fabs(a[p * n + k])) p = i;
      kiln_literal_set_s64(piv, b * steps + k, p + 1);
      for (int64_t j = 0; j < n; j++) {
        double tmp = a[k * n + j];
        a[k * n + j] = a[p * n + j];
        a[p * n + j] = tmp;
      }
      double pivot = a[k * n + k];
      if (pivot == 0 && !bad) bad = k + 1;
      for (int64_t i = k + 1; i < m; i++) {
        double l = pivot == 0 ? a[i * n + k] : in_type(t, a[i * n + k] / pivot);
        a[i * n + k] = l;
        for (int64_t j = k + 1; j < n; j++)
          a[i * n + j] = in_type(t, a[i * n + j] - in_type(t, l * a[k * n + j]));
      }
    }
    for (int64_t i = 0; i < m * n; i++) kiln_literal_set_f64(lu, base + i, a[i]);
    kiln_literal_set_s64(info, b, bad);
  }
  free(a);
  return NULL;
}

/* ---- xla_builder.* without a decomposition: NextAfter, Einsum, TridiagonalSolver ---- */

static kiln_status next_after(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                              kiln_literal_t *const *ops, kiln_literal_t **out) {
  kiln_elem_type_t t = in->shape->type;
  if (in->num_operands != 2 || (t != KILN_F32 && t != KILN_F64) ||
      !kiln_shape_compatible(ops[0]->shape, in->shape) ||
      !kiln_shape_compatible(ops[1]->shape, in->shape))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "custom call %s (xla_builder.math.NextAfter): kiln takes two f32 or "
                            "f64 operands of the result's shape",
                            in->name);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  for (int64_t i = 0; i < (*out)->num_elements; i++) {
    double x = kiln_literal_get_f64(ops[0], i), y = kiln_literal_get_f64(ops[1], i);
    kiln_literal_set_f64(*out, i,
                         t == KILN_F32 ? (double)nextafterf((float)x, (float)y) : nextafter(x, y));
  }
  return NULL;
}

/* "ab,bc->ac": the labels of each operand and of the result; false when malformed. */
static bool einsum_parse(const char *spec, int nops, char labels[][KILN_EINSUM_MAX_LABELS + 1],
                         char *result) {
  const char *arrow = spec ? strstr(spec, "->") : NULL;
  if (!arrow) return false;
  const char *p = spec;
  for (int i = 0; i < nops; i++) {
    int n = 0;
    while (p < arrow && *p != ',') {
      if (n >= KILN_EINSUM_MAX_LABELS || !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return false;
      labels[i][n++] = *p++;
    }
    labels[i][n] = 0;
    if (i + 1 < nops) {
      if (*p != ',') return false;
      p++;
    }
  }
  if (p != arrow || strlen(arrow + 2) > KILN_EINSUM_MAX_LABELS) return false;
  strcpy(result, arrow + 2);
  for (const char *q = result; *q; q++)
    if (!strchr(spec, *q) || strchr(spec, *q) >= arrow) return false;
  return true;
}

bool kiln_eval_einsum_spec(const kiln_hlo_instruction_t *in,
                           char labels[][KILN_EINSUM_MAX_LABELS + 1], char *result) {
  if (in->num_operands < 1 || in->num_operands > 2) return false;
  if (!einsum_parse(in->backend_config, in->num_operands, labels, result)) return false;
  for (int i = 0; i < in->num_operands; i++)
    if ((int)strlen(labels[i]) != in->operands[i]->shape->rank) return false;
  return (int)strlen(result) == in->shape->rank;
}

/* Every assignment of the labels: result[result labels] += product of the operands. */
static kiln_status einsum(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                          kiln_literal_t *const *ops, kiln_literal_t **out) {
  char labels[2][KILN_EINSUM_MAX_LABELS + 1], result[KILN_EINSUM_MAX_LABELS + 1], all[64] = "";
  int64_t size[64] = {0};
  bool ok = kiln_eval_einsum_spec(in, labels, result) && kiln_shape_is_array(in->shape);
  for (int i = 0; ok && i < in->num_operands; i++)
    for (int d = 0; labels[i][d]; d++) {
      char *at = strchr(all, labels[i][d]);
      if (!at) {
        size_t n = strlen(all);
        all[n] = labels[i][d];
        all[n + 1] = 0;
        at = all + n;
      }
      int64_t *s = &size[at - all];
      ok = !*s || *s == ops[i]->shape->dims[d];
      *s = ops[i]->shape->dims[d];
    }
  for (int d = 0; ok && result[d]; d++)
    ok = size[strchr(all, result[d]) - all] == in->shape->dims[d];
  if (!ok)
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "custom call %s (xla_builder.matrix.Einsum): backend_config '%s' "
                            "does not fit the operands and result",
                            in->name, in->backend_config ? in->backend_config : "");
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  int nl = (int)strlen(all);
  int64_t v[64] = {0}, total = 1;
  for (int l = 0; l < nl; l++) total *= size[l];
  for (int64_t it = 0; it < total; it++) {
    int64_t rem = it;
    for (int l = nl - 1; l >= 0; l--) {
      v[l] = rem % size[l];
      rem /= size[l];
    }
    double prod = 1;
    for (int i = 0; i < in->num_operands; i++) {
      int64_t at = 0;
      for (int d = 0; labels[i][d]; d++)
        at = at * ops[i]->shape->dims[d] + v[strchr(all, labels[i][d]) - all];
      prod *= kiln_literal_get_f64(ops[i], at);
    }
    int64_t at = 0;
    for (int d = 0; result[d]; d++) at = at * in->shape->dims[d] + v[strchr(all, result[d]) - all];
    kiln_literal_set_f64(*out, at, kiln_literal_get_f64(*out, at) + prod);
  }
  return NULL;
}

/* The Thomas algorithm (XLA's TridiagonalSolver, kThomas): diagonals [..., 3, M] (lower,
 * main, upper) or three [..., 1, M] operands, right-hand sides [..., M, N]. */
static kiln_status tridiagonal(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                               kiln_literal_t *const *ops, kiln_literal_t **out) {
  int nop = in->num_operands;
  int64_t m = 0, n = 0, count = nop == 2 || nop == 4 ? matrices(ops[nop - 1], &m, &n) : 0;
  int64_t dr, dc, dcount = count ? matrices(ops[0], &dr, &dc) : 0;
  if (!count || dcount != count || dc != m || dr != (nop == 2 ? 3 : 1) ||
      !kiln_elem_type_is_float(in->shape->type) ||
      !kiln_shape_compatible(in->shape, ops[nop - 1]->shape))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "custom call %s (xla_builder.tridiagonal.TridiagonalSolver): kiln "
                            "takes diagonals [..., 3, M] or three [..., 1, M] and right-hand "
                            "sides [..., M, N] of a float type",
                            in->name);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
  double *w = kiln_try_malloc(sizeof(double) * 2 * (size_t)m);
  if (!w) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "tridiagonal: out of memory");
  double *c = w, *d = w + m;
  for (int64_t b = 0; b < count; b++) {
    /* diagonal k (0 lower, 1 main, 2 upper), element i */
#define DIAG(k, i)                                                  \
  (nop == 2 ? kiln_literal_get_f64(ops[0], (b * 3 + (k)) * m + (i)) \
            : kiln_literal_get_f64(ops[k], b * m + (i)))
    for (int64_t col = 0; col < n; col++) {
      const kiln_literal_t *r = ops[nop - 1];
      for (int64_t i = 0; i < m; i++) {
        double rhs = kiln_literal_get_f64(r, (b * m + i) * n + col);
        if (i == 0) {
          c[0] = DIAG(2, 0) / DIAG(1, 0);
          d[0] = rhs / DIAG(1, 0);
          continue;
        }
        double den = DIAG(1, i) - DIAG(0, i) * c[i - 1];
        c[i] = DIAG(2, i) / den;
        d[i] = (rhs - DIAG(0, i) * d[i - 1]) / den;
      }
#undef DIAG
      for (int64_t i = m - 1; i >= 0; i--) {
        if (i < m - 1) d[i] -= c[i] * d[i + 1];
        kiln_literal_set_f64(*out, (b * m + i) * n + col, d[i]);
      }
    }
  }
  free(w);
  return NULL;
}

/* xla_builder.math.* on real floats, from libm (double, rounded to the type). */
static bool math_fn(const char *name, double (**out)(double)) {
  static const struct {
    const char *name;
    double (*fn)(double);
  } kFns[] = {{"Acos", acos},
              {"Asin", asin},
              {"Atan", atan},
              {"Acosh", acosh},
              {"Asinh", asinh},
              {"Cosh", cosh},
              {"Erfc", erfc},
              {"Digamma", kiln_eval_digamma},
              {"BesselI1e", kiln_eval_bessel_i1e}};
  for (size_t i = 0; i < sizeof kFns / sizeof kFns[0]; i++)
    if (!strcmp(name, kFns[i].name)) {
      *out = kFns[i].fn;
      return true;
    }
  return false;
}

/* The two-operand ones (xla_builder.math.Zeta(s, q), Polygamma(n, x)): eval_special.c. */
static bool math_fn2(const char *name, double (**out)(double, double)) {
  if (!strcmp(name, "Zeta"))
    *out = kiln_eval_zeta;
  else if (!strcmp(name, "Polygamma"))
    *out = kiln_eval_polygamma;
  else
    return false;
  return true;
}

/* The same functions on complex numbers, from C99's <complex.h>. */
static bool cmath_fn(const char *name, double complex (**out)(double complex)) {
  static const struct {
    const char *name;
    double complex (*fn)(double complex);
  } kFns[] = {{"Acos", cacos},   {"Asin", casin},   {"Atan", catan},
              {"Acosh", cacosh}, {"Asinh", casinh}, {"Cosh", ccosh}};
  for (size_t i = 0; i < sizeof kFns / sizeof kFns[0]; i++)
    if (!strcmp(name, kFns[i].name)) {
      *out = kFns[i].fn;
      return true;
    }
  return false;
}

kiln_status kiln_eval_custom_call(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *in,
                                  kiln_literal_t *const *ops, kiln_literal_t **out) {
  const char *t = in->custom_call_target ? in->custom_call_target : "";
  if (kiln_eval_is_identity_target(t) && in->num_operands == 1 && kiln_shape_is_array(in->shape) &&
      kiln_shape_is_array(ops[0]->shape) && kiln_shape_compatible(in->shape, ops[0]->shape))
    return kiln_eval_literal_view(ctx, in->shape, ops[0], out);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_identity_target_reshapes(in));
  if ((!strcmp(t, "AllocateBuffer") || !strcmp(t, "CreateBuffer")) && in->num_operands == 0)
    return kiln_eval_literal_alloc(ctx, in->shape, out);
  if (!strncmp(t, "xla_builder.", 12)) {
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "called_computations");
    if (c) return kiln_eval_computation(ctx, c, in->num_operands, ops, out);
    double (*fn)(double);
    if (!strncmp(t, "xla_builder.math.", 17) && math_fn(t + 17, &fn) && in->num_operands == 1 &&
        kiln_shape_is_array(in->shape) && kiln_elem_type_is_float(in->shape->type) &&
        kiln_shape_compatible(in->shape, ops[0]->shape)) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
      for (int64_t i = 0; i < ops[0]->num_elements; i++)
        kiln_literal_set_f64(*out, i, fn(kiln_literal_get_f64(ops[0], i)));
      return NULL;
    }
    double (*fn2)(double, double);
    if (!strncmp(t, "xla_builder.math.", 17) && math_fn2(t + 17, &fn2) && in->num_operands == 2 &&
        kiln_shape_is_array(in->shape) && kiln_elem_type_is_float(in->shape->type) &&
        kiln_shape_compatible(in->shape, ops[0]->shape) &&
        kiln_shape_compatible(in->shape, ops[1]->shape)) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
      for (int64_t i = 0; i < ops[0]->num_elements; i++)
        kiln_literal_set_f64(*out, i,
                             fn2(kiln_literal_get_f64(ops[0], i), kiln_literal_get_f64(ops[1], i)));
      return NULL;
    }
    double complex (*cfn)(double complex);
    if (!strncmp(t, "xla_builder.math.", 17) && cmath_fn(t + 17, &cfn) && in->num_operands == 1 &&
        kiln_shape_is_array(in->shape) && kiln_elem_type_is_complex(in->shape->type) &&
        kiln_shape_compatible(in->shape, ops[0]->shape)) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
      for (int64_t i = 0; i < ops[0]->num_elements; i++) {
        double re, im;
        kiln_literal_get_c128(ops[0], i, &re, &im);
        double complex w = cfn(re + im * I);
        kiln_literal_set_c128(*out, i, creal(w), cimag(w));
      }
      return NULL;
    }
  }
  if (!strcmp(t, "xla_builder.math.NextAfter")) return next_after(ctx, in, ops, out);
  if (!strcmp(t, "xla_builder.prng.ScramblePhiloxKey"))
    return scramble_philox_key(ctx, in, ops, out);
  if (!strcmp(t, "xla_builder.matrix.Einsum")) return einsum(ctx, in, ops, out);
  if (!strcmp(t, "xla_builder.tridiagonal.TridiagonalSolver"))
    return tridiagonal(ctx, in, ops, out);
  if (!strcmp(t, "TopK") || !strcmp(t, "PartialReduce")) return top_k(ctx, in, ops, out);
  if (!strcmp(t, "SliceToDynamic") || !strcmp(t, "PadToStatic"))
    return dynamic_padding(ctx, in, ops, out);
  kiln_solver_config_t sc;
  if (kiln_eval_solver_config(in, &sc)) {
    if (sc.kind == KILN_SOLVER_POTRF) return potrf(ctx, in, &sc, ops, out);
    if (sc.kind == KILN_SOLVER_TRSM) return trsm(ctx, in, &sc, ops, out);
    return getrf(ctx, in, ops, out);
  }
  if (!strcmp(t, "cuda_threefry2x32")) return threefry(ctx, in, ops, out);
  if (kiln_eval_is_gemm_target(t)) return gemm(ctx, in, ops, out);
  bool handled;
  kiln_status s = kiln_eval_host_target(ctx, in, ops, out, &handled);
  if (handled) return s;
  if (ctx->opts && ctx->opts->custom_call) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, in->shape, out));
    KILN_RETURN_IF_ERROR(ctx->opts->custom_call(ctx->opts->custom_call_user, in, ops, *out),
                         "in custom call %s (%s)", in->name, t);
    return NULL;
  }
  return kiln_status_make(KILN_UNIMPLEMENTED,
                          "evaluator does not support opcode 'custom-call' (instruction '%s') "
                          "with target '%s'",
                          in->name, t);
}
