/* The MLIR text reader: the custom (pretty) assembly forms of StableHLO, CHLO, func and the
 * interpreter's check ops, each turned into the generic form's operands and attributes. */
#include <stdio.h>
#include <string.h>

#include "compiler/frontend/mlir_text_internal.h"

/* How a `keyword = value` clause of a pretty form maps to an attribute. */
typedef enum clause_kind {
  CL_LIST,   /* [1, 2] -> array<i64> */
  CL_I64,    /* 3 -> 3 : i64 */
  CL_ENUM,   /* FFT -> #stablehlo<fft_type FFT> */
  CL_ENUMS,  /* [DEFAULT, HIGH] -> [#stablehlo<precision DEFAULT>, ...] */
  CL_FORMAT, /* e5m10 -> exponent_bits, mantissa_bits */
  CL_VALUE,  /* any attribute (numbers without a type suffix) */
} clause_kind_t;

typedef struct clause {
  const char *op;      /* full op name */
  const char *keyword; /* as written */
  const char *attr;    /* ODS name */
  clause_kind_t kind;
  const char *enum_name;
} clause_t;

static const clause_t kClauses[] = {
    {"stablehlo.broadcast_in_dim", "dims", "broadcast_dimensions", CL_LIST, NULL},
    {"stablehlo.dynamic_broadcast_in_dim", "dims", "broadcast_dimensions", CL_LIST, NULL},
    {"stablehlo.dynamic_broadcast_in_dim", "expanding", "known_expanding_dimensions", CL_LIST,
     NULL},
    {"stablehlo.dynamic_broadcast_in_dim", "nonexpanding", "known_nonexpanding_dimensions", CL_LIST,
     NULL},
    {"stablehlo.transpose", "dims", "permutation", CL_LIST, NULL},
    {"stablehlo.reverse", "dims", "dimensions", CL_LIST, NULL},
    {"stablehlo.concatenate", "dim", "dimension", CL_I64, NULL},
    {"stablehlo.iota", "dim", "iota_dimension", CL_I64, NULL},
    {"stablehlo.dynamic_iota", "dim", "iota_dimension", CL_I64, NULL},
    {"stablehlo.get_dimension_size", "dim", "dimension", CL_I64, NULL},
    {"stablehlo.set_dimension_size", "dim", "dimension", CL_I64, NULL},
    {"stablehlo.dynamic_slice", "sizes", "slice_sizes", CL_LIST, NULL},
    {"stablehlo.pad", "low", "edge_padding_low", CL_LIST, NULL},
    {"stablehlo.pad", "high", "edge_padding_high", CL_LIST, NULL},
    {"stablehlo.pad", "interior", "interior_padding", CL_LIST, NULL},
    {"stablehlo.fft", "type", "fft_type", CL_ENUM, "fft_type"},
    {"stablehlo.fft", "length", "fft_length", CL_LIST, NULL},
    {"stablehlo.reduce_precision", "format", "", CL_FORMAT, NULL},
    {"stablehlo.rng", "distribution", "rng_distribution", CL_ENUM, "rng_distribution"},
    {"stablehlo.rng_bit_generator", "algorithm", "rng_algorithm", CL_ENUM, "rng_algorithm"},
    {"stablehlo.dot", "precision", "precision_config", CL_ENUMS, "precision"},
    {"stablehlo.dot_general", "precision", "precision_config", CL_ENUMS, "precision"},
    {"stablehlo.reduce_scatter", "scatter_dimension", "scatter_dimension", CL_I64, NULL},
    {"stablehlo.all_gather", "all_gather_dim", "all_gather_dim", CL_I64, NULL},
    {"check.expect_close", "max_ulp_difference", "max_ulp_difference", CL_I64, NULL},
    {"check.expect_close", "min_ulp_difference", "min_ulp_difference", CL_I64, NULL},
    {"check.expect_serialized_eq", "iter", "iteration", CL_I64, NULL},
    {"chlo.top_k", "k", "k", CL_I64, NULL},
    {"chlo.scan", "dimension", "dimension", CL_I64, NULL},
    {"stablehlo.einsum", "config", "einsum_config", CL_VALUE, NULL},
    {"stablehlo.unary_einsum", "config", "einsum_config", CL_VALUE, NULL},
    {"stablehlo.broadcast", "sizes", "broadcast_sizes", CL_LIST, NULL},
    {"stablehlo.triangular_solve", "transpose_a", "transpose_a", CL_ENUM, "transpose"},
};

static const clause_t *find_clause(const char *op, const char *kw, size_t n) {
  for (size_t i = 0; i < sizeof(kClauses) / sizeof(kClauses[0]); i++) {
    if (strcmp(kClauses[i].op, op) == 0 && strlen(kClauses[i].keyword) == n &&
        memcmp(kClauses[i].keyword, kw, n) == 0) {
      return &kClauses[i];
    }
  }
  return NULL;
}

static const char *dialect_of(kiln_mlirp_t *P, const char *op) {
  size_t n = strcspn(op, ".");
  return kiln_mlirp_dup(P, op, n);
}

/* A clause value without an attribute type suffix: numbers become i64 / f64. */
static bool plain_value(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  char c = kiln_mlirp_peek(P);
  if (c == '-' || (c >= '0' && c <= '9')) {
    kiln_mlirp_num_t num;
    if (!kiln_mlirp_number(P, &num)) return false;
    if (num.is_float) {
      kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_FLOAT);
      kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_FLOAT);
      if (a == NULL || t == NULL) return false;
      t->elem = KILN_F64;
      a->type = t;
      a->f = kiln_mlirp_num_f64(&num);
      *out = a;
      return true;
    }
    bool ovf = false;
    int64_t v = kiln_mlirp_num_i64(&num, &ovf);
    if (ovf) return kiln_mlirp_failf(P, "integer out of range");
    *out = kiln_mlirp_i64_attr(P, v, 64);
    return *out != NULL;
  }
  if (c == '"') {
    kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRING);
    if (a == NULL || !kiln_mlirp_string(P, &a->str, &a->str_len)) return false;
    *out = a;
    return true;
  }
  return kiln_mlirp_attr(P, out);
}

static bool enum_value(kiln_mlirp_t *P, const char *dialect, const char *enum_name,
                       const kiln_mlir_attr_t **out) {
  if (kiln_mlirp_peek(P) == '#') return kiln_mlirp_attr(P, out);
  const char *s;
  size_t n;
  if (!kiln_mlirp_bare_id(P, &s, &n)) return kiln_mlirp_fail(P, "an enum value");
  *out = kiln_mlirp_enum_attr(P, dialect, enum_name, kiln_mlirp_dup(P, s, n));
  return *out != NULL;
}

/* dot_general's pretty dimension clauses, collected until the op is complete. */
typedef struct dot_dims {
  const kiln_mlir_attr_t *lb, *rb, *lc, *rc;
  bool any;
} dot_dims_t;

static bool clause(kiln_mlirp_t *P, kiln_mlirp_op_t *op, dot_dims_t *dd) {
  const char *kw;
  size_t n;
  if (!kiln_mlirp_bare_id(P, &kw, &n)) return kiln_mlirp_fail(P, "a keyword clause");
  if (!kiln_mlirp_expect(P, '=')) return false;
  const kiln_mlir_attr_t *v;
  if (dd && ((n == 12 && memcmp(kw, "batching_dims", 12) == 0) ||
             (n == 13 && memcmp(kw, "batching_dims", 13) == 0) ||
             (n == 16 && memcmp(kw, "contracting_dims", 16) == 0))) {
    const kiln_mlir_attr_t *l, *r;
    if (!kiln_mlirp_int_list(P, &l) || !kiln_mlirp_expect(P, 'x') || !kiln_mlirp_int_list(P, &r)) {
      return false;
    }
    if (kw[0] == 'b') {
      dd->lb = l, dd->rb = r;
    } else {
      dd->lc = l, dd->rc = r;
    }
    dd->any = true;
    return true;
  }
  if (dd && n == 9 && memcmp(kw, "algorithm", 9) == 0) {
    if (!kiln_mlirp_expect(P, '<') || !kiln_mlirp_struct_body(P, "stablehlo.dot_algorithm", &v)) {
      return false;
    }
    kiln_mlirp_op_add_attr(P, op, "algorithm", v);
    return true;
  }
  const clause_t *c = find_clause(op->name, kw, n);
  const char *dialect = dialect_of(P, op->name);
  if (c == NULL) {
    if (!plain_value(P, &v)) return false;
    kiln_mlirp_op_add_attr(P, op, kiln_mlirp_dup(P, kw, n), v);
    return !P->err;
  }
  switch (c->kind) {
    case CL_LIST:
      if (!kiln_mlirp_int_list(P, &v)) return false;
      break;
    case CL_I64: {
      int64_t x;
      if (!kiln_mlirp_integer(P, &x)) return false;
      v = kiln_mlirp_i64_attr(P, x, 64);
      break;
    }
    case CL_ENUM:
      if (!enum_value(P, dialect, c->enum_name, &v)) return false;
      break;
    case CL_ENUMS: {
      if (!kiln_mlirp_expect(P, '[')) return false;
      const kiln_mlir_attr_t *items[64];
      int32_t k = 0;
      if (!kiln_mlirp_accept(P, ']')) {
        do {
          if (k == 64) return kiln_mlirp_failf(P, "too many precision values");
          if (!enum_value(P, dialect, c->enum_name, &items[k])) return false;
          k++;
        } while (kiln_mlirp_accept(P, ','));
        if (!kiln_mlirp_expect(P, ']')) return false;
      }
      kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_ARRAY);
      if (a == NULL) return false;
      a->elements = kiln_arena_alloc(P->a, sizeof(*a->elements) * (size_t)(k ? k : 1));
      if (a->elements == NULL) return kiln_mlirp_failf(P, "out of memory");
      memcpy(a->elements, items, sizeof(*items) * (size_t)k);
      a->num_elements = k;
      v = a;
      break;
    }
    case CL_FORMAT: {
      const char *s;
      size_t len;
      const char *at = (kiln_mlirp_ws(P), P->p);
      int e = 0, m = 0, used = 0;
      if (!kiln_mlirp_bare_id(P, &s, &len) || len >= 32) return kiln_mlirp_fail(P, "a format eXmY");
      char buf[32];
      memcpy(buf, s, len);
      buf[len] = 0;
      if (sscanf(buf, "e%dm%d%n", &e, &m, &used) != 2 || (size_t)used != len) {
        return kiln_mlirp_fail_at(P, at, "expected a format eXmY, found '%s'", buf);
      }
      kiln_mlirp_op_add_attr(P, op, "exponent_bits", kiln_mlirp_i64_attr(P, e, 32));
      kiln_mlirp_op_add_attr(P, op, "mantissa_bits", kiln_mlirp_i64_attr(P, m, 32));
      return !P->err;
    }
    case CL_VALUE:
      if (!plain_value(P, &v)) return false;
      break;
  }
  kiln_mlirp_op_add_attr(P, op, c->attr, v);
  return !P->err;
}

static bool operand_list(kiln_mlirp_t *P, kiln_mlirp_op_t *op, bool *trailing_comma) {
  *trailing_comma = false;
  if (!kiln_mlirp_peek_value_use(P)) return !P->err;
  do {
    if (!kiln_mlirp_peek_value_use(P)) {
      *trailing_comma = true;
      return !P->err;
    }
    kiln_mlir_value_t *v;
    if (!kiln_mlirp_value_use(P, &v)) return false;
    kiln_mlirp_op_add_operand(P, op, v);
  } while (kiln_mlirp_accept(P, ','));
  return !P->err;
}

static bool peek_clause(kiln_mlirp_t *P) {
  if (!kiln_mlirp_is_id_start(kiln_mlirp_peek(P))) return false;
  const char *q = P->p;
  while (q < P->end && kiln_mlirp_is_id_char(*q)) q++;
  while (q < P->end && (*q == ' ' || *q == '\t' || *q == '\n')) q++;
  return q < P->end && *q == '=';
}

static bool clauses(kiln_mlirp_t *P, kiln_mlirp_op_t *op, bool comma, dot_dims_t *dd) {
  while (comma || peek_clause(P)) {
    if (!clause(P, op, dd)) return false;
    comma = kiln_mlirp_accept(P, ',');
  }
  return !P->err;
}

static bool finish_dot(kiln_mlirp_t *P, kiln_mlirp_op_t *op, dot_dims_t *dd) {
  if (!dd->any) return true;
  static const int64_t kNone[1] = {0};
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRUCT);
  if (a == NULL) return false;
  a->dialect = "stablehlo.dot";
  a->num_elements = 4;
  a->fields = kiln_arena_alloc(P->a, sizeof(*a->fields) * 4);
  if (a->fields == NULL) return kiln_mlirp_failf(P, "out of memory");
  const kiln_mlir_attr_t *empty = kiln_mlirp_dense_i64(P, kNone, 0);
  a->fields[0] = (kiln_mlir_named_attr_t){"lhs_batching_dimensions", dd->lb ? dd->lb : empty};
  a->fields[1] = (kiln_mlir_named_attr_t){"rhs_batching_dimensions", dd->rb ? dd->rb : empty};
  a->fields[2] = (kiln_mlir_named_attr_t){"lhs_contracting_dimensions", dd->lc ? dd->lc : empty};
  a->fields[3] = (kiln_mlir_named_attr_t){"rhs_contracting_dimensions", dd->rc ? dd->rc : empty};
  kiln_mlirp_op_add_attr(P, op, "dot_dimension_numbers", a);
  if (P->err) return false;
  /* first, as the generic form's sorted attributes have it */
  kiln_mlir_named_attr_t last = op->attrs[op->num_attrs - 1];
  memmove(op->attrs + 1, op->attrs, sizeof(*op->attrs) * (size_t)(op->num_attrs - 1));
  op->attrs[0] = last;
  return true;
}

/* The common shape: operands, keyword clauses, optional attr-dict, optional `: types`. */
static bool default_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  bool comma;
  dot_dims_t dd = {0};
  bool is_dot = strcmp(op->name, "stablehlo.dot_general") == 0;
  if (!operand_list(P, op, &comma) || !clauses(P, op, comma, is_dot ? &dd : NULL)) return false;
  if (is_dot && !finish_dot(P, op, &dd)) return false;
  if (kiln_mlirp_peek(P) == '(') {
    /* regions in parentheses after the operands */
    P->p++;
    do {
      kiln_mlir_region_t *r = kiln_mlirp_op_add_region(P, op);
      if (r == NULL || !kiln_mlirp_region(P, r, NULL, 0, NULL, NULL)) return false;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  if (!kiln_mlirp_op_attr_dict(P, op)) return false;
  if (kiln_mlirp_peek(P) == ':' && kiln_mlirp_peek2(P) != ':')
    return kiln_mlirp_op_signature(P, op);
  return !P->err;
}

/* stablehlo.compare LT, %a, %b (, FLOAT)? */
static bool compare_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  const char *dialect = dialect_of(P, op->name);
  const kiln_mlir_attr_t *dir;
  if (!enum_value(P, dialect, "comparison_direction", &dir) || !kiln_mlirp_expect(P, ',')) {
    return false;
  }
  kiln_mlirp_op_add_attr(P, op, "comparison_direction", dir);
  for (int i = 0; i < 2; i++) {
    kiln_mlir_value_t *v;
    if (i && !kiln_mlirp_expect(P, ',')) return false;
    if (!kiln_mlirp_value_use(P, &v)) return false;
    kiln_mlirp_op_add_operand(P, op, v);
  }
  if (kiln_mlirp_accept(P, ',')) {
    const kiln_mlir_attr_t *t;
    if (!enum_value(P, dialect, "comparison_type", &t)) return false;
    kiln_mlirp_op_add_attr(P, op, "compare_type", t);
  }
  return kiln_mlirp_op_attr_dict(P, op) && kiln_mlirp_op_signature(P, op);
}

/* stablehlo.constant {attrs}? dense<...> : type */
static bool constant_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (!kiln_mlirp_op_attr_dict(P, op)) return false;
  if (kiln_mlirp_peek(P) == '(') return kiln_mlirp_generic_tail(P, op);
  const kiln_mlir_attr_t *v;
  if (!kiln_mlirp_attr(P, &v)) return false;
  kiln_mlirp_op_add_attr(P, op, "value", v);
  if (v->type == NULL || v->kind == KILN_MLIR_ATTR_TYPE) {
    return kiln_mlirp_failf(P, "a constant needs a typed value");
  }
  const kiln_mlir_type_t **res = kiln_arena_alloc(P->a, sizeof(*res));
  if (res == NULL) return kiln_mlirp_failf(P, "out of memory");
  res[0] = v->type;
  op->result_types = res;
  op->num_result_types = 1;
  return true;
}

/* check.expect_*_const %x, dense<...> : type (, tolerance = ...)? */
static bool check_const_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  kiln_mlir_value_t *v;
  const kiln_mlir_attr_t *value;
  if (!kiln_mlirp_value_use(P, &v) || !kiln_mlirp_expect(P, ',') || !kiln_mlirp_attr(P, &value)) {
    return false;
  }
  kiln_mlirp_op_add_operand(P, op, v);
  kiln_mlirp_op_add_attr(P, op, "value", value);
  bool comma = kiln_mlirp_accept(P, ',');
  return clauses(P, op, comma, NULL) && kiln_mlirp_op_attr_dict(P, op);
}

/* stablehlo.custom_call @target(%args) {attrs} : fn */
static bool custom_call_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  const kiln_mlir_attr_t *target;
  if (!kiln_mlirp_attr(P, &target)) return false;
  if (target->kind != KILN_MLIR_ATTR_SYMBOL_REF) {
    return kiln_mlirp_failf(P, "expected @target for custom_call");
  }
  kiln_mlir_attr_t *name = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRING);
  if (name == NULL) return false;
  name->str = target->str;
  name->str_len = target->str_len;
  kiln_mlirp_op_add_attr(P, op, "call_target_name", name);
  return kiln_mlirp_generic_tail(P, op);
}

/* func.call @f(%args) {attrs}? : fn */
static bool call_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  const kiln_mlir_attr_t *callee;
  if (!kiln_mlirp_attr(P, &callee)) return false;
  if (callee->kind != KILN_MLIR_ATTR_SYMBOL_REF) return kiln_mlirp_failf(P, "expected @callee");
  kiln_mlirp_op_add_attr(P, op, "callee", callee);
  return kiln_mlirp_generic_tail(P, op);
}

/* stablehlo.composite "name" %a, %b {attrs} : fn */
static bool composite_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  kiln_mlir_attr_t *name = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRING);
  if (name == NULL || !kiln_mlirp_string(P, &name->str, &name->str_len)) return false;
  kiln_mlirp_op_add_attr(P, op, "name", name);
  return default_form(P, op);
}

/* stablehlo.get_tuple_element %x[0] */
static bool gte_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  kiln_mlir_value_t *v;
  int64_t idx;
  if (!kiln_mlirp_value_use(P, &v) || !kiln_mlirp_expect(P, '[') || !kiln_mlirp_integer(P, &idx) ||
      !kiln_mlirp_expect(P, ']')) {
    return false;
  }
  kiln_mlirp_op_add_operand(P, op, v);
  kiln_mlirp_op_add_attr(P, op, "index", kiln_mlirp_i64_attr(P, idx, 32));
  return kiln_mlirp_op_attr_dict(P, op) && kiln_mlirp_op_signature(P, op);
}

/* stablehlo.slice %x [0:2, 1:4:2] */
static bool slice_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  kiln_mlir_value_t *v;
  if (!kiln_mlirp_value_use(P, &v)) return false;
  kiln_mlirp_op_add_operand(P, op, v);
  if (kiln_mlirp_accept(P, ',')) return clauses(P, op, true, NULL) && default_form(P, op);
  if (!kiln_mlirp_expect(P, '[')) return false;
  int64_t st[64], li[64], sd[64];
  int32_t n = 0;
  if (!kiln_mlirp_accept(P, ']')) {
    do {
      if (n == 64) return kiln_mlirp_failf(P, "slice of rank above 64");
      sd[n] = 1;
      if (!kiln_mlirp_integer(P, &st[n]) || !kiln_mlirp_expect(P, ':') ||
          !kiln_mlirp_integer(P, &li[n])) {
        return false;
      }
      if (kiln_mlirp_accept(P, ':') && !kiln_mlirp_integer(P, &sd[n])) return false;
      n++;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ']')) return false;
  }
  kiln_mlirp_op_add_attr(P, op, "start_indices", kiln_mlirp_dense_i64(P, st, n));
  kiln_mlirp_op_add_attr(P, op, "limit_indices", kiln_mlirp_dense_i64(P, li, n));
  kiln_mlirp_op_add_attr(P, op, "strides", kiln_mlirp_dense_i64(P, sd, n));
  return kiln_mlirp_op_attr_dict(P, op) && kiln_mlirp_op_signature(P, op);
}

/* chlo.top_k(%x, k = 2) : ... */
static bool top_k_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  kiln_mlir_value_t *v;
  if (!kiln_mlirp_expect(P, '(') || !kiln_mlirp_value_use(P, &v) || !kiln_mlirp_expect(P, ',')) {
    return false;
  }
  kiln_mlirp_op_add_operand(P, op, v);
  return clauses(P, op, true, NULL) && kiln_mlirp_expect(P, ')') &&
         kiln_mlirp_op_attr_dict(P, op) && kiln_mlirp_op_signature(P, op);
}

/* stablehlo.while(%a = %init, ...) : types attributes {..}? cond { } do { } */
static bool while_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (!kiln_mlirp_expect(P, '(')) return false;
  const char *names[256];
  size_t lens[256];
  int32_t n = 0;
  if (!kiln_mlirp_accept(P, ')')) {
    do {
      if (n == 256) return kiln_mlirp_failf(P, "while with more than 256 values");
      kiln_mlirp_ws(P);
      names[n] = P->p;
      if (P->p >= P->end || *P->p != '%') return kiln_mlirp_fail(P, "%name = value");
      P->p++;
      while (P->p < P->end && (kiln_mlirp_is_id_char(*P->p) || *P->p == '-')) P->p++;
      lens[n] = (size_t)(P->p - names[n]);
      kiln_mlir_value_t *v;
      if (!kiln_mlirp_expect(P, '=') || !kiln_mlirp_value_use(P, &v)) return false;
      kiln_mlirp_op_add_operand(P, op, v);
      n++;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  int32_t bound = op->num_results;
  op->num_results = n;
  if (n > 0 && !kiln_mlirp_op_signature(P, op)) return false;
  op->num_results = bound;
  if (op->num_result_types != n) {
    return kiln_mlirp_failf(P, "while has %d values, its type list %d", (int)n,
                            (int)op->num_result_types);
  }
  if (kiln_mlirp_accept_kw(P, "attributes") && !kiln_mlirp_op_attr_dict(P, op)) return false;
  const char *kw[2] = {"cond", "do"};
  for (int i = 0; i < 2; i++) {
    kiln_mlir_region_t *r;
    if (!kiln_mlirp_expect_kw(P, kw[i]) || (r = kiln_mlirp_op_add_region(P, op)) == NULL) {
      return false;
    }
    static const kiln_mlir_type_t *const kNoArgs[1] = {NULL};
    if (!kiln_mlirp_region(P, r, n ? op->result_types : kNoArgs, n, names, lens)) return false;
  }
  return true;
}

/* Builds a reduction body `^bb0(%a, %b): %r = <op> %a, %b; return %r` for the `applies` form. */
static bool applies_body(kiln_mlirp_t *P, kiln_mlirp_op_t *op, const char *body_op) {
  int32_t n = op->num_operands / 2;
  kiln_mlir_region_t *r = kiln_mlirp_op_add_region(P, op);
  if (r == NULL) return false;
  r->num_blocks = 1;
  r->blocks = kiln_arena_alloc(P->a, sizeof(*r->blocks));
  kiln_mlir_block_t *b = r->blocks;
  if (b == NULL) return kiln_mlirp_failf(P, "out of memory");
  b->num_args = 2 * n;
  b->args = kiln_arena_alloc(P->a, sizeof(*b->args) * (size_t)(2 * n));
  b->num_ops = 2;
  b->ops = kiln_arena_alloc(P->a, sizeof(*b->ops) * 2);
  kiln_mlir_op_t *body = kiln_arena_alloc(P->a, sizeof(*body));
  kiln_mlir_op_t *ret = kiln_arena_alloc(P->a, sizeof(*ret));
  if (!b->args || !b->ops || !body || !ret) return kiln_mlirp_failf(P, "out of memory");
  for (int32_t i = 0; i < 2 * n; i++) {
    kiln_mlir_value_t *init = op->operands[n + (i % n)];
    const kiln_mlir_type_t *t = init->type;
    if (t->kind == KILN_MLIR_TYPE_TENSOR && !t->unranked && t->rank != 0) {
      t = kiln_mlirp_scalar_tensor(P, t->element);
    }
    b->args[i].type = t;
    b->args[i].index = i;
    b->args[i].block = b;
    b->args[i].name = kiln_arena_printf(P->a, "%%applies%d", (int)i);
  }
  body->name = body_op;
  body->num_operands = 2 * n;
  body->operands = kiln_arena_alloc(P->a, sizeof(*body->operands) * (size_t)(2 * n));
  body->num_results = n;
  body->results = kiln_arena_alloc(P->a, sizeof(*body->results) * (size_t)n);
  ret->name = "stablehlo.return";
  ret->num_operands = n;
  ret->operands = kiln_arena_alloc(P->a, sizeof(*ret->operands) * (size_t)n);
  if (!body->operands || !body->results || !ret->operands)
    return kiln_mlirp_failf(P, "out of memory");
  for (int32_t i = 0; i < 2 * n; i++) body->operands[i] = &b->args[i];
  for (int32_t i = 0; i < n; i++) {
    body->results[i].type = b->args[i].type;
    body->results[i].def = body;
    body->results[i].index = i;
    ret->operands[i] = &body->results[i];
  }
  body->line = ret->line = op->line;
  b->ops[0] = body;
  b->ops[1] = ret;
  return true;
}

/* stablehlo.reduce(%x init: %i), ... applies OP across dimensions = [..] : fn
 * or ... across dimensions = [..] : fn reducer(%a: t, %c: t) (%b: t, %d: t) { ... } */
static bool reduce_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  {
    /* `stablehlo.reduce(%a, %b) ({...}) ...` is the unquoted generic form */
    const char *q = P->p + 1;
    while (q < P->end && (*q == ' ' || *q == '\n' || *q == '\t')) q++;
    if (q < P->end && *q == '%') q++;
    while (q < P->end && (kiln_mlirp_is_id_char(*q) || *q == '-' || *q == '#')) q++;
    while (q < P->end && (*q == ' ' || *q == '\n' || *q == '\t')) q++;
    if (q < P->end && (*q == ',' || *q == ')')) return kiln_mlirp_generic_tail(P, op);
  }
  kiln_mlir_value_t *ins[128], *inits[128];
  int32_t n = 0;
  do {
    if (n == 128) return kiln_mlirp_failf(P, "reduce of more than 128 inputs");
    if (!kiln_mlirp_expect(P, '(') || !kiln_mlirp_value_use(P, &ins[n]) ||
        !kiln_mlirp_expect_kw(P, "init") || !kiln_mlirp_expect(P, ':') ||
        !kiln_mlirp_value_use(P, &inits[n]) || !kiln_mlirp_expect(P, ')')) {
      return false;
    }
    n++;
  } while (kiln_mlirp_accept(P, ','));
  for (int32_t i = 0; i < n; i++) kiln_mlirp_op_add_operand(P, op, ins[i]);
  for (int32_t i = 0; i < n; i++) kiln_mlirp_op_add_operand(P, op, inits[i]);
  const char *body_op = NULL;
  if (kiln_mlirp_accept_kw(P, "applies")) {
    const char *s;
    size_t len;
    if (!kiln_mlirp_bare_id(P, &s, &len)) return kiln_mlirp_fail(P, "an op name after applies");
    body_op = kiln_mlirp_dup(P, s, len);
  }
  const kiln_mlir_attr_t *dims;
  if (!kiln_mlirp_expect_kw(P, "across") || !kiln_mlirp_expect_kw(P, "dimensions") ||
      !kiln_mlirp_expect(P, '=') || !kiln_mlirp_int_list(P, &dims)) {
    return false;
  }
  kiln_mlirp_op_add_attr(P, op, "dimensions", dims);
  if (!kiln_mlirp_op_attr_dict(P, op) || !kiln_mlirp_op_signature(P, op)) return false;
  if (body_op) return applies_body(P, op, body_op);
  if (!kiln_mlirp_expect_kw(P, "reducer")) return false;
  const char *names[256];
  size_t lens[256];
  const kiln_mlir_type_t *types[256];
  if (n > 128) return kiln_mlirp_failf(P, "reduce of more than 128 inputs");
  for (int32_t i = 0; i < n; i++) {
    if (!kiln_mlirp_expect(P, '(')) return false;
    for (int k = 0; k < 2; k++) {
      int32_t slot = k == 0 ? i : n + i;
      if (k && !kiln_mlirp_expect(P, ',')) return false;
      kiln_mlirp_ws(P);
      names[slot] = P->p;
      if (P->p >= P->end || *P->p != '%') return kiln_mlirp_fail(P, "%name: type");
      P->p++;
      while (P->p < P->end && (kiln_mlirp_is_id_char(*P->p) || *P->p == '-')) P->p++;
      lens[slot] = (size_t)(P->p - names[slot]);
      if (!kiln_mlirp_expect(P, ':') || !kiln_mlirp_type(P, &types[slot])) return false;
      const char *loc;
      kiln_mlirp_location(P, &loc);
    }
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  kiln_mlir_region_t *r = kiln_mlirp_op_add_region(P, op);
  return r && kiln_mlirp_region(P, r, types, 2 * n, names, lens);
}

/* stablehlo.convolution(%a, %b) dim_numbers = ..., window = {...} {attrs} : fn */
static bool convolution_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (!kiln_mlirp_expect(P, '(')) return false;
  do {
    kiln_mlir_value_t *v;
    if (!kiln_mlirp_value_use(P, &v)) return false;
    kiln_mlirp_op_add_operand(P, op, v);
  } while (kiln_mlirp_accept(P, ','));
  if (!kiln_mlirp_expect(P, ')')) return false;
  if (kiln_mlirp_peek(P) == '(' || kiln_mlirp_peek(P) == '{' || kiln_mlirp_peek(P) == ':') {
    /* no pretty clauses: attributes only */
    return kiln_mlirp_op_attr_dict(P, op) && kiln_mlirp_op_signature(P, op);
  }
  const kiln_mlir_attr_t *dn;
  if (!kiln_mlirp_expect_kw(P, "dim_numbers") || !kiln_mlirp_expect(P, '=') ||
      !kiln_mlirp_conv_dims_pretty(P, &dn)) {
    return false;
  }
  kiln_mlirp_op_add_attr(P, op, "dimension_numbers", dn);
  if (kiln_mlirp_accept(P, ',')) {
    if (!kiln_mlirp_expect_kw(P, "window") || !kiln_mlirp_expect(P, '=') ||
        !kiln_mlirp_expect(P, '{')) {
      return false;
    }
    if (!kiln_mlirp_accept(P, '}')) {
      do {
        const char *s;
        size_t n;
        if (!kiln_mlirp_bare_id(P, &s, &n)) return kiln_mlirp_fail(P, "a window field");
        if (!kiln_mlirp_expect(P, '=')) return false;
        if (n == 3 && memcmp(s, "pad", 3) == 0) {
          int64_t pads[128];
          int32_t np = 0;
          if (!kiln_mlirp_expect(P, '[')) return false;
          if (!kiln_mlirp_accept(P, ']')) {
            do {
              if (np == 64) return kiln_mlirp_failf(P, "too many padded dimensions");
              if (!kiln_mlirp_expect(P, '[') || !kiln_mlirp_integer(P, &pads[2 * np]) ||
                  !kiln_mlirp_expect(P, ',') || !kiln_mlirp_integer(P, &pads[2 * np + 1]) ||
                  !kiln_mlirp_expect(P, ']')) {
                return false;
              }
              np++;
            } while (kiln_mlirp_accept(P, ','));
            if (!kiln_mlirp_expect(P, ']')) return false;
          }
          kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_TENSOR);
          kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_DENSE_ELEMENTS);
          if (!t || !a) return false;
          t->rank = 2;
          t->dims = kiln_arena_alloc(P->a, sizeof(int64_t) * 2);
          if (t->dims == NULL) return kiln_mlirp_failf(P, "out of memory");
          t->dims[0] = np;
          t->dims[1] = 2;
          t->element = kiln_mlirp_int_type(P, 64, KILN_MLIR_SIGNLESS);
          kiln_shape_t *sh = kiln_shape_make_array(P->a, KILN_S64, 2, t->dims);
          a->literal = sh ? kiln_literal_make(P->a, sh) : NULL;
          if (a->literal == NULL) return kiln_mlirp_failf(P, "out of memory");
          for (int32_t i = 0; i < 2 * np; i++) kiln_literal_set_s64(a->literal, i, pads[i]);
          a->type = t;
          kiln_mlirp_op_add_attr(P, op, "padding", a);
          continue;
        }
        const kiln_mlir_attr_t *v;
        if (!kiln_mlirp_int_list(P, &v)) return false;
        const char *attr = NULL;
        if (n == 6 && memcmp(s, "stride", 6) == 0) attr = "window_strides";
        if (n == 10 && memcmp(s, "lhs_dilate", 10) == 0) attr = "lhs_dilation";
        if (n == 10 && memcmp(s, "rhs_dilate", 10) == 0) attr = "rhs_dilation";
        if (n == 7 && memcmp(s, "reverse", 7) == 0) {
          attr = "window_reversal";
          ((kiln_mlir_attr_t *)v)->type = kiln_mlirp_int_type(P, 1, KILN_MLIR_SIGNLESS);
        }
        if (attr == NULL) return kiln_mlirp_failf(P, "unknown window field '%.*s'", (int)n, s);
        kiln_mlirp_op_add_attr(P, op, attr, v);
      } while (kiln_mlirp_accept(P, ','));
      if (!kiln_mlirp_expect(P, '}')) return false;
    }
  }
  return kiln_mlirp_op_attr_dict(P, op) && kiln_mlirp_op_signature(P, op);
}

/* chlo.scan(%inputs) inits(%inits) dimension=0 [attributes {...}] {region} : fn */
static bool scan_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  int32_t counts[2] = {0, 0};
  for (int part = 0; part < 2; part++) {
    if (part == 1 && !kiln_mlirp_expect_kw(P, "inits")) return false;
    if (!kiln_mlirp_expect(P, '(')) return false;
    if (!kiln_mlirp_accept(P, ')')) {
      do {
        kiln_mlir_value_t *v;
        if (!kiln_mlirp_value_use(P, &v)) return false;
        kiln_mlirp_op_add_operand(P, op, v);
        counts[part]++;
      } while (kiln_mlirp_accept(P, ','));
      if (!kiln_mlirp_expect(P, ')')) return false;
    }
  }
  int64_t seg[2] = {counts[0], counts[1]};
  const kiln_mlir_attr_t *sa = kiln_mlirp_dense_i64(P, seg, 2);
  if (sa == NULL) return false;
  ((kiln_mlir_attr_t *)sa)->type = kiln_mlirp_int_type(P, 32, KILN_MLIR_SIGNLESS);
  kiln_mlirp_op_add_attr(P, op, "operandSegmentSizes", sa);
  while (peek_clause(P)) {
    if (!clause(P, op, NULL)) return false;
    kiln_mlirp_accept(P, ',');
  }
  /* `attributes {is_reverse = true}` may come before the region */
  if (kiln_mlirp_accept_kw(P, "attributes") && !kiln_mlirp_op_attr_dict(P, op)) return false;
  kiln_mlir_region_t *r = kiln_mlirp_op_add_region(P, op);
  return r && kiln_mlirp_region(P, r, NULL, 0, NULL, NULL) && kiln_mlirp_op_attr_dict(P, op) &&
         kiln_mlirp_op_signature(P, op);
}

/* sdy.mesh @name = <...>: the mesh is kept as text */
static bool sdy_mesh_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  const kiln_mlir_attr_t *sym;
  if (!kiln_mlirp_attr(P, &sym)) return false;
  if (sym->kind != KILN_MLIR_ATTR_SYMBOL_REF) return kiln_mlirp_failf(P, "expected @mesh name");
  kiln_mlir_attr_t *name = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRING);
  if (name == NULL || !kiln_mlirp_expect(P, '=')) return false;
  name->str = sym->str;
  name->str_len = sym->str_len;
  kiln_mlirp_op_add_attr(P, op, "sym_name", name);
  const kiln_mlir_attr_t *mesh;
  if (kiln_mlirp_peek(P) == '<') {
    const char *start = P->p;
    if (!kiln_mlirp_skip_balanced(P)) return false;
    kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_OTHER);
    if (a == NULL) return false;
    a->str = kiln_arena_printf(P->a, "#sdy.mesh%.*s", (int)(P->p - start), start);
    a->str_len = strlen(a->str);
    mesh = a;
  } else if (!kiln_mlirp_attr(P, &mesh)) {
    return false;
  }
  kiln_mlirp_op_add_attr(P, op, "mesh", mesh);
  return kiln_mlirp_op_attr_dict(P, op);
}

/* func.return / stablehlo.return: operands, then `: types` if any. */
static bool return_form(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (kiln_mlirp_peek(P) == '(') return kiln_mlirp_generic_tail(P, op);
  return default_form(P, op);
}

bool kiln_mlirp_pretty_op(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  const char *n = op->name;
  if (strcmp(n, "stablehlo.compare") == 0 || strcmp(n, "chlo.compare") == 0) {
    if (kiln_mlirp_peek(P) == '(') return kiln_mlirp_generic_tail(P, op);
    return compare_form(P, op);
  }
  if (strcmp(n, "stablehlo.constant") == 0 || strcmp(n, "arith.constant") == 0 ||
      strcmp(n, "chlo.constant") == 0) {
    return constant_form(P, op);
  }
  if (strcmp(n, "chlo.scan") == 0) return scan_form(P, op);
  if (strcmp(n, "sdy.mesh") == 0) return sdy_mesh_form(P, op);
  if (strcmp(n, "stablehlo.custom_call") == 0) return custom_call_form(P, op);
  if (strcmp(n, "func.call") == 0) return call_form(P, op);
  if (strcmp(n, "stablehlo.composite") == 0) return composite_form(P, op);
  if (strcmp(n, "stablehlo.get_tuple_element") == 0) return gte_form(P, op);
  if (strcmp(n, "stablehlo.slice") == 0) return slice_form(P, op);
  if (strcmp(n, "stablehlo.while") == 0) {
    kiln_mlirp_ws(P);
    if (P->p + 1 < P->end && P->p[0] == '(' && P->p[1] != '%')
      return kiln_mlirp_generic_tail(P, op);
    /* `stablehlo.while(%a, %b) ({..})` is the unquoted generic form */
    const char *q = P->p + 1;
    while (q < P->end && (kiln_mlirp_is_id_char(*q) || *q == '%' || *q == '-' || *q == '#')) q++;
    while (q < P->end && *q == ' ') q++;
    if (q < P->end && *q != '=') return kiln_mlirp_generic_tail(P, op);
    return while_form(P, op);
  }
  if (strcmp(n, "stablehlo.reduce") == 0) return reduce_form(P, op);
  if (strcmp(n, "stablehlo.convolution") == 0 || strcmp(n, "stablehlo.dynamic_conv") == 0) {
    return convolution_form(P, op);
  }
  if (strcmp(n, "chlo.top_k") == 0) return top_k_form(P, op);
  if (strcmp(n, "check.expect_eq_const") == 0 || strcmp(n, "check.expect_almost_eq_const") == 0) {
    return check_const_form(P, op);
  }
  if (strcmp(n, "func.return") == 0 || strcmp(n, "stablehlo.return") == 0)
    return return_form(P, op);
  if (strcmp(n, "stablehlo.optimization_barrier") == 0 && kiln_mlirp_peek(P) == '(' &&
      kiln_mlirp_peek2(P) == ')') {
    P->p += 2; /* `stablehlo.optimization_barrier()`: no operands, no results */
    return kiln_mlirp_op_attr_dict(P, op);
  }
  if (kiln_mlirp_peek(P) == '(') {
    /* the unquoted generic form: `stablehlo.all_reduce(%x) ({...}) {...} : fn` */
    return kiln_mlirp_generic_tail(P, op);
  }
  return default_form(P, op);
}
