/* HLO text parser: instruction attributes.
 *
 * Attributes with a typed field in kiln_hlo_instruction_t are decoded (some only on their
 * opcode: `algorithm=` is the RNG algorithm on rng-bit-generator and raw elsewhere); all
 * others are captured verbatim as raw attributes. */
#include <string.h>

#include "compiler/hlo/parser_internal.h"

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || is_digit(c); }


/* slice={[0:2], [1:9:2]} */
static bool parse_slice(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  size_t base = P->ints.len;
  if (!kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      int64_t start, limit, stride = 1;
      if (!kiln_hlo_lexer_expect(L, '[') || !kiln_hlo_lexer_int64(L, "slice start", &start) ||
          !kiln_hlo_lexer_expect(L, ':') || !kiln_hlo_lexer_int64(L, "slice limit", &limit))
        return false;
      if (kiln_hlo_lexer_accept(L, ':') && !kiln_hlo_lexer_int64(L, "slice stride", &stride))
        return false;
      if (!kiln_hlo_lexer_expect(L, ']')) return false;
      kiln_vec_push(&P->ints, start);
      kiln_vec_push(&P->ints, limit);
      kiln_vec_push(&P->ints, stride);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, '}')) return false;
      break;
    }
  }
  size_t n = (P->ints.len - base) / 3;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "list too long");
  instr->num_slice_dims = (int)n;
  if (n) {
    instr->slice = kiln_hlo_parser_alloc(P, n * sizeof(kiln_slice_dim_t));
    if (!instr->slice) return false;
    for (size_t i = 0; i < n; i++) {
      instr->slice[i].start = P->ints.data[base + 3 * i];
      instr->slice[i].limit = P->ints.data[base + 3 * i + 1];
      instr->slice[i].stride = P->ints.data[base + 3 * i + 2];
    }
  }
  P->ints.len = base;
  return true;
}

/* Integers separated by `sep` with no spaces: 3x3, 0_1. Pushes them on the int stack. */
static bool parse_int_run(kiln_hlo_parser_t *P, char sep, const char *what) {
  kiln_hlo_lexer_t *L = &P->L;
  for (;;) {
    int64_t v;
    if (!kiln_hlo_lexer_int64(L, what, &v)) return false;
    kiln_vec_push(&P->ints, v);
    if (L->p < L->end && *L->p == sep) {
      L->p++;
      continue;
    }
    return true;
  }
}

/* padding=lo_hi[_interior]x... for pad. */
static bool parse_padding(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  size_t base = P->ints.len;
  for (;;) {
    size_t dbase = P->ints.len;
    kiln_hlo_lexer_skip_ws(L);
    const char *pos = L->p;
    if (!parse_int_run(P, '_', "padding")) return false;
    size_t parts = P->ints.len - dbase;
    if (parts < 2 || parts > 3) {
      L->p = pos;
      return kiln_hlo_lexer_error_expected(L, "padding 'low_high' or 'low_high_interior'");
    }
    if (parts == 2) kiln_vec_push(&P->ints, 0);
    if (L->p < L->end && *L->p == 'x') {
      L->p++;
      continue;
    }
    break;
  }
  size_t n = (P->ints.len - base) / 3;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "list too long");
  instr->num_pad_dims = (int)n;
  instr->padding = kiln_hlo_parser_alloc(P, n * sizeof(kiln_pad_dim_t));
  if (!instr->padding) return false;
  for (size_t i = 0; i < n; i++) {
    instr->padding[i].lo = P->ints.data[base + 3 * i];
    instr->padding[i].hi = P->ints.data[base + 3 * i + 1];
    instr->padding[i].interior = P->ints.data[base + 3 * i + 2];
  }
  P->ints.len = base;
  return true;
}

/* window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1} */
static bool parse_window(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  static const char *const kFields[] = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate",
                                        "rhs_reversal"};
  enum { kNumFields = 6 };
  size_t start[kNumFields], count[kNumFields];
  bool present[kNumFields] = {false};
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  size_t base = P->ints.len;
  int64_t n = -1;
  while (!kiln_hlo_lexer_accept(L, '}')) {
    const char *k, *kpos;
    size_t kn;
    kiln_hlo_lexer_skip_ws(L);
    kpos = L->p;
    if (!kiln_hlo_lexer_word(L, "window field or '}'", &k, &kn)) return false;
    int f = -1;
    for (int i = 0; i < kNumFields; i++)
      if (kiln_hlo_span_eq(k, kn, kFields[i])) f = i;
    if (f < 0)
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT, "unknown window field '%.*s'",
                                     (int)kn, k);
    if (present[f])
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT,
                                     "duplicate window field '%s'", kFields[f]);
    if (!kiln_hlo_lexer_expect(L, '=')) return false;
    present[f] = true;
    start[f] = P->ints.len;
    int64_t dims = 0;
    for (;;) {
      size_t before = P->ints.len;
      if (!parse_int_run(P, f == 2 ? '_' : 'x', f == 2 ? "padding" : "window value")) return false;
      if (f == 2) {
        if (P->ints.len - before != 2) {
          return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT,
                                         "window pad must be 'low_high' per dimension");
        }
      }
      dims++;
      if (f == 2 && L->p < L->end && *L->p == 'x') {
        L->p++;
        continue;
      }
      break;
    }
    if (f != 2) dims = (int64_t)(P->ints.len - start[f]);
    count[f] = (size_t)dims;
    if (n < 0) {
      n = dims;
    } else if (dims != n) {
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT,
                                     "window field '%s' has %lld dimensions, expected %lld",
                                     kFields[f], (long long)dims, (long long)n);
    }
  }
  if (n < 0) n = 0;
  if ((size_t)n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "window too long");
  instr->num_window_dims = (int)n;
  if (n) {
    instr->window = kiln_hlo_parser_alloc(P, (size_t)n * sizeof(kiln_window_dim_t));
    if (!instr->window) return false;
  }
  int64_t *v = P->ints.data;
  for (int64_t i = 0; i < n; i++) {
    kiln_window_dim_t *w = &instr->window[i];
    w->size = present[0] ? v[start[0] + i] : 1;
    w->stride = present[1] ? v[start[1] + i] : 1;
    w->pad_lo = present[2] ? v[start[2] + 2 * i] : 0;
    w->pad_hi = present[2] ? v[start[2] + 2 * i + 1] : 0;
    w->lhs_dilate = present[3] ? v[start[3] + i] : 1;
    w->rhs_dilate = present[4] ? v[start[4] + i] : 1;
    w->reversal = present[5] ? v[start[5] + i] != 0 : false;
  }
  (void)count;
  P->ints.len = base;
  return true;
}

/* One dim_labels part: `batch`/`feature` letters (b/f or i/o) and spatial digits. Fills
 * the two positions and spatial[digit] = position. Returns the number of spatial dims or
 * -1 if malformed. */
static int parse_label_part(const char *s, size_t n, char l0, char l1, int64_t *p0, int64_t *p1,
                            int64_t *spatial) {
  int c0 = 0, c1 = 0, ns = 0;
  bool seen[10] = {false};
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == l0) c0++, *p0 = (int64_t)i;
    else if (c == l1) c1++, *p1 = (int64_t)i;
    else if (is_digit(c)) {
      int d = c - '0';
      if (seen[d]) return -1;
      seen[d] = true;
      spatial[d] = (int64_t)i;
      ns++;
    } else {
      return -1;
    }
  }
  if (c0 != 1 || c1 != 1) return -1;
  for (int d = 0; d < ns; d++)
    if (!seen[d]) return -1;
  return ns;
}

/* dim_labels=b01f_01io->b01f */
static bool parse_dim_labels(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *s = L->p, *q = L->p;
  while (q < L->end && (is_lower_alnum(*q) || *q == '_' || *q == '-' || *q == '>' || *q == '?'))
    q++;
  size_t n = (size_t)(q - s);
  const char *us = memchr(s, '_', n);
  const char *arrow = NULL;
  for (const char *r = s; r + 1 < q; r++)
    if (r[0] == '-' && r[1] == '>') {
      arrow = r;
      break;
    }
  int64_t in_sp[10], k_sp[10], out_sp[10];
  kiln_conv_dnums_t *d = &instr->conv_dnums;
  int a = -1, b = -1, c = -1;
  if (us && arrow && us < arrow) {
    a = parse_label_part(s, (size_t)(us - s), 'b', 'f', &d->input_batch, &d->input_feature, in_sp);
    b = parse_label_part(us + 1, (size_t)(arrow - us - 1), 'i', 'o', &d->kernel_input_feature,
                         &d->kernel_output_feature, k_sp);
    c = parse_label_part(arrow + 2, (size_t)(q - arrow - 2), 'b', 'f', &d->output_batch,
                         &d->output_feature, out_sp);
  }
  if (a < 0 || a != b || a != c) {
    if (n == 0) return kiln_hlo_lexer_error_expected(L, "dim_labels");
    return kiln_hlo_lexer_error_at(L, s, KILN_INVALID_ARGUMENT, "malformed dim_labels '%.*s'",
                                   (int)n, s);
  }
  L->p = q;
  d->num_spatial = a;
  if (a) {
    d->input_spatial = kiln_hlo_parser_alloc(P, (size_t)a * 8);
    d->kernel_spatial = kiln_hlo_parser_alloc(P, (size_t)a * 8);
    d->output_spatial = kiln_hlo_parser_alloc(P, (size_t)a * 8);
    if (!d->input_spatial || !d->kernel_spatial || !d->output_spatial) return false;
    memcpy(d->input_spatial, in_sp, (size_t)a * 8);
    memcpy(d->kernel_spatial, k_sp, (size_t)a * 8);
    memcpy(d->output_spatial, out_sp, (size_t)a * 8);
  }
  instr->has_conv_dnums = true;
  return true;
}

/* {default,highest} */
static bool parse_precision(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  P->strs.len = 0;
  if (!kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      char *w;
      if (!kiln_hlo_parse_word_dup(P, "precision", &w)) return false;
      kiln_vec_push(&P->strs, w);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, '}')) return false;
      break;
    }
  }
  if (P->strs.len > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "list too long");
  instr->num_operand_precision = (int)P->strs.len;
  if (P->strs.len) {
    instr->operand_precision = kiln_hlo_parser_alloc(P, P->strs.len * sizeof(char *));
    if (!instr->operand_precision) return false;
    memcpy(instr->operand_precision, P->strs.data, P->strs.len * sizeof(char *));
  }
  return true;
}

/* Names of `{a, b}` (braced) or `a` into the given ref vector. */
static bool parse_name_refs(kiln_hlo_parser_t *P, kiln_hlo_name_refs_t *refs, bool allow_bare,
                            bool *braced, const char *what) {
  kiln_hlo_lexer_t *L = &P->L;
  *braced = kiln_hlo_lexer_accept(L, '{');
  if (!*braced && !allow_bare) return kiln_hlo_lexer_error_expected(L, "'{'");
  if (*braced && kiln_hlo_lexer_accept(L, '}')) return true;
  for (;;) {
    kiln_hlo_name_ref_t r;
    size_t n;
    if (!kiln_hlo_lexer_name(L, what, &r.name, &n, &r.pos)) return false;
    r.len = (uint32_t)n;
    kiln_vec_push(refs, r);
    if (!*braced) return true;
    if (kiln_hlo_lexer_accept(L, ',')) continue;
    return kiln_hlo_lexer_expect(L, '}');
  }
}

/* backend_config: {json} | "string" | anything else (raw). */
static bool parse_backend_config(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  char c = kiln_hlo_lexer_peek(L);
  if (c == '"') {
    P->sb.len = 0;
    bool has_nul;
    const char *raw;
    if (!kiln_hlo_lexer_string(L, &P->sb, &has_nul, &raw)) return false;
    if (has_nul) {
      /* Opaque bytes: keep the escaped text, the decoded form would stop at the NUL. */
      instr->backend_config_form = KILN_BACKEND_CONFIG_RAW;
      instr->backend_config = kiln_hlo_parser_strndup(P, raw, (size_t)(L->p - raw));
    } else {
      instr->backend_config_form = KILN_BACKEND_CONFIG_STRING;
      instr->backend_config = kiln_hlo_parser_strndup(P, P->sb.data, P->sb.len);
    }
    return instr->backend_config != NULL;
  }
  if (!kiln_hlo_lexer_capture(L, true, &P->sb)) return false;
  instr->backend_config_form = c == '{' ? KILN_BACKEND_CONFIG_JSON : KILN_BACKEND_CONFIG_RAW;
  instr->backend_config = kiln_hlo_parser_strndup(P, P->sb.data, P->sb.len);
  return instr->backend_config != NULL;
}

static const char *const kApiVersions[] = {
    "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};

static bool parse_enum_word(kiln_hlo_parser_t *P, const char *what, const char *const *names,
                            int count, int *out) {
  kiln_hlo_lexer_t *L = &P->L;
  const char *s;
  size_t n;
  kiln_hlo_lexer_skip_ws(L);
  const char *pos = L->p;
  if (!kiln_hlo_lexer_word(L, what, &s, &n)) return false;
  for (int i = 0; i < count; i++)
    if (kiln_hlo_span_eq(s, n, names[i])) {
      *out = i;
      return true;
    }
  return kiln_hlo_lexer_error_at(L, pos, KILN_INVALID_ARGUMENT, "unknown %s '%.*s'", what, (int)n, s);
}

/* ---- attribute keys ---- */

#define KILN_HLO_ATTRS(X)                                                                   \
  X(INDEX, "index") X(DIMENSIONS, "dimensions") X(IOTA_DIMENSION, "iota_dimension")         \
  X(SLICE, "slice") X(DYNAMIC_SLICE_SIZES, "dynamic_slice_sizes") X(PADDING, "padding")     \
  X(WINDOW, "window") X(DIM_LABELS, "dim_labels")                                           \
  X(FEATURE_GROUP_COUNT, "feature_group_count") X(BATCH_GROUP_COUNT, "batch_group_count")   \
  X(LHS_BATCH, "lhs_batch_dims") X(LHS_CONTRACTING, "lhs_contracting_dims")                 \
  X(RHS_BATCH, "rhs_batch_dims") X(RHS_CONTRACTING, "rhs_contracting_dims")                 \
  X(OPERAND_PRECISION, "operand_precision") X(OFFSET_DIMS, "offset_dims")                   \
  X(COLLAPSED_SLICE_DIMS, "collapsed_slice_dims") X(START_INDEX_MAP, "start_index_map")     \
  X(OPERAND_BATCHING_DIMS, "operand_batching_dims")                                         \
  X(START_INDICES_BATCHING_DIMS, "start_indices_batching_dims")                             \
  X(INDEX_VECTOR_DIM, "index_vector_dim") X(SLICE_SIZES, "slice_sizes")                     \
  X(UPDATE_WINDOW_DIMS, "update_window_dims") X(INSERTED_WINDOW_DIMS, "inserted_window_dims") \
  X(SCATTER_DIMS_TO_OPERAND_DIMS, "scatter_dims_to_operand_dims")                           \
  X(INPUT_BATCHING_DIMS, "input_batching_dims")                                             \
  X(SCATTER_INDICES_BATCHING_DIMS, "scatter_indices_batching_dims")                         \
  X(INDICES_ARE_SORTED, "indices_are_sorted") X(UNIQUE_INDICES, "unique_indices")           \
  X(DIRECTION, "direction") X(TYPE, "type") X(KIND, "kind") X(TO_APPLY, "to_apply")         \
  X(CALLS, "calls") X(CONDITION, "condition") X(BODY, "body") X(SELECT, "select")           \
  X(SCATTER, "scatter") X(TRUE_COMPUTATION, "true_computation")                             \
  X(FALSE_COMPUTATION, "false_computation") X(BRANCH_COMPUTATIONS, "branch_computations")   \
  X(CALLED_COMPUTATIONS, "called_computations") X(CUSTOM_CALL_TARGET, "custom_call_target") \
  X(API_VERSION, "api_version") X(IS_STABLE, "is_stable") X(EXPONENT_BITS, "exponent_bits") \
  X(MANTISSA_BITS, "mantissa_bits") X(FFT_TYPE, "fft_type") X(FFT_LENGTH, "fft_length")     \
  X(DISTRIBUTION, "distribution") X(ALGORITHM, "algorithm") X(LEFT_SIDE, "left_side")       \
  X(LOWER, "lower") X(UNIT_DIAGONAL, "unit_diagonal") X(TRANSPOSE_A, "transpose_a")         \
  X(CHANNEL_ID, "channel_id") X(REPLICA_GROUPS, "replica_groups")                           \
  X(USE_GLOBAL_DEVICE_IDS, "use_global_device_ids") X(CONSTRAIN_LAYOUT, "constrain_layout") \
  X(K, "k") X(LARGEST, "largest") X(CONTROL_PREDECESSORS, "control-predecessors")           \
  X(BACKEND_CONFIG, "backend_config")

typedef enum attr_id {
  ATTR_RAW = 0,
#define X(e, s) ATTR_##e,
  KILN_HLO_ATTRS(X)
#undef X
  ATTR_COUNT
} attr_id_t;

_Static_assert(ATTR_COUNT <= (int)sizeof(((kiln_hlo_parser_t *)0)->seen), "seen[] too small");

static const char *const kAttrNames[ATTR_COUNT] = {
    "",
#define X(e, s) s,
    KILN_HLO_ATTRS(X)
#undef X
};

static attr_id_t lookup_attr(kiln_hlo_parser_t *P, const char *k, size_t n) {
  void *v = kiln_hashmap_get(&P->attr_keys, k, n);
  if (v) return (attr_id_t)((uintptr_t)v - 1);
  attr_id_t id = ATTR_RAW;
  for (int i = 1; i < ATTR_COUNT; i++)
    if (kiln_hlo_span_eq(k, n, kAttrNames[i])) id = (attr_id_t)i;
  kiln_hashmap_put(&P->attr_keys, k, n, (void *)(uintptr_t)(id + 1));
  return id;
}

/* Attributes whose typed field belongs to one opcode are decoded only there; elsewhere
 * they stay raw (e.g. `algorithm=` on dot is not the rng algorithm). */
static bool attr_applies(attr_id_t id, kiln_hlo_opcode_t op) {
  switch (id) {
    case ATTR_INDEX: return op == KILN_OP_GET_TUPLE_ELEMENT;
    case ATTR_PADDING: return op == KILN_OP_PAD;
    case ATTR_OFFSET_DIMS: case ATTR_COLLAPSED_SLICE_DIMS: case ATTR_START_INDEX_MAP:
    case ATTR_OPERAND_BATCHING_DIMS: case ATTR_START_INDICES_BATCHING_DIMS:
    case ATTR_SLICE_SIZES:
      return op == KILN_OP_GATHER;
    case ATTR_UPDATE_WINDOW_DIMS: case ATTR_INSERTED_WINDOW_DIMS:
    case ATTR_SCATTER_DIMS_TO_OPERAND_DIMS: case ATTR_INPUT_BATCHING_DIMS:
    case ATTR_SCATTER_INDICES_BATCHING_DIMS:
      return op == KILN_OP_SCATTER;
    case ATTR_INDEX_VECTOR_DIM: return op == KILN_OP_GATHER || op == KILN_OP_SCATTER;
    case ATTR_INDICES_ARE_SORTED: case ATTR_UNIQUE_INDICES:
      return op == KILN_OP_GATHER || op == KILN_OP_SCATTER;
    case ATTR_DIRECTION: case ATTR_TYPE: return op == KILN_OP_COMPARE;
    case ATTR_KIND: return op == KILN_OP_FUSION;
    case ATTR_CUSTOM_CALL_TARGET: case ATTR_API_VERSION: return op == KILN_OP_CUSTOM_CALL;
    case ATTR_IS_STABLE: return op == KILN_OP_SORT;
    case ATTR_EXPONENT_BITS: case ATTR_MANTISSA_BITS: return op == KILN_OP_REDUCE_PRECISION;
    case ATTR_FFT_TYPE: case ATTR_FFT_LENGTH: return op == KILN_OP_FFT;
    case ATTR_DISTRIBUTION: return op == KILN_OP_RNG;
    case ATTR_ALGORITHM: return op == KILN_OP_RNG_BIT_GENERATOR;
    case ATTR_LEFT_SIDE: case ATTR_UNIT_DIAGONAL: case ATTR_TRANSPOSE_A:
      return op == KILN_OP_TRIANGULAR_SOLVE;
    case ATTR_LOWER: return op == KILN_OP_TRIANGULAR_SOLVE || op == KILN_OP_CHOLESKY;
    case ATTR_K: case ATTR_LARGEST: return op == KILN_OP_TOPK;
    default: return true;
  }
}

static bool add_called_ref(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr, attr_id_t id) {
  kiln_hlo_called_rec_t rec;
  rec.instr = instr;
  rec.key = kAttrNames[id];
  rec.begin = (uint32_t)P->crefs.len;
  bool braced;
  if (!parse_name_refs(P, &P->crefs, true, &braced, "computation name")) return false;
  rec.braced = braced;
  rec.count = (uint32_t)(P->crefs.len - rec.begin);
  kiln_vec_push(&P->called, rec);
  return true;
}

/* replica_groups=... into P->sb. A mesh with its own device order continues past a comma:
 * mesh['x'=2,'y'=4], device_ids=(...) {'x'} is one value. */
static bool capture_replica_groups(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_capture(L, true, &P->sb)) return false;
  if (P->sb.len < 4 || memcmp(P->sb.data, "mesh", 4) != 0) return true;
  const char *save = L->p;
  kiln_hlo_lexer_skip_ws(L);
  if (L->p < L->end && *L->p == ',') {
    L->p++;
    kiln_hlo_lexer_skip_ws(L);
    if ((size_t)(L->end - L->p) > 10 && memcmp(L->p, "device_ids", 10) == 0) {
      kiln_strbuf_t rest = {0};
      bool ok = kiln_hlo_lexer_capture(L, true, &rest);
      if (ok) {
        kiln_strbuf_append(&P->sb, ", ");
        kiln_strbuf_append_n(&P->sb, rest.data, rest.len);
      }
      kiln_strbuf_free(&rest);
      return ok;
    }
  }
  L->p = save;
  return true;
}

static bool parse_attr_value(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr,
                             kiln_hlo_instr_rec_t *rec, attr_id_t id) {
  kiln_hlo_lexer_t *L = &P->L;
  int e = 0;
  switch (id) {
    case ATTR_INDEX: return kiln_hlo_lexer_int64(L, "tuple index", &instr->tuple_index);
    case ATTR_DIMENSIONS:
      instr->has_dimensions = true;
      return kiln_hlo_parse_i64_list(P, &instr->dimensions);
    case ATTR_IOTA_DIMENSION: return kiln_hlo_lexer_int64(L, "iota dimension", &instr->iota_dimension);
    case ATTR_SLICE: return parse_slice(P, instr);
    case ATTR_DYNAMIC_SLICE_SIZES: return kiln_hlo_parse_i64_list(P, &instr->dynamic_slice_sizes);
    case ATTR_PADDING: return parse_padding(P, instr);
    case ATTR_WINDOW: return parse_window(P, instr);
    case ATTR_DIM_LABELS: return parse_dim_labels(P, instr);
    case ATTR_FEATURE_GROUP_COUNT:
      return kiln_hlo_lexer_int64(L, "feature group count", &instr->feature_group_count);
    case ATTR_BATCH_GROUP_COUNT:
      return kiln_hlo_lexer_int64(L, "batch group count", &instr->batch_group_count);
    case ATTR_LHS_BATCH: instr->has_dot_dnums = true; return kiln_hlo_parse_i64_list(P, &instr->dot_dnums.lhs_batch);
    case ATTR_LHS_CONTRACTING:
      instr->has_dot_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->dot_dnums.lhs_contracting);
    case ATTR_RHS_BATCH: instr->has_dot_dnums = true; return kiln_hlo_parse_i64_list(P, &instr->dot_dnums.rhs_batch);
    case ATTR_RHS_CONTRACTING:
      instr->has_dot_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->dot_dnums.rhs_contracting);
    case ATTR_OPERAND_PRECISION: return parse_precision(P, instr);
    case ATTR_OFFSET_DIMS:
      instr->has_gather_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->gather_dnums.offset_dims);
    case ATTR_COLLAPSED_SLICE_DIMS:
      instr->has_gather_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->gather_dnums.collapsed_slice_dims);
    case ATTR_START_INDEX_MAP:
      instr->has_gather_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->gather_dnums.start_index_map);
    case ATTR_OPERAND_BATCHING_DIMS:
      instr->has_gather_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->gather_dnums.operand_batching_dims);
    case ATTR_START_INDICES_BATCHING_DIMS:
      instr->has_gather_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->gather_dnums.start_indices_batching_dims);
    case ATTR_INDEX_VECTOR_DIM:
      if (instr->opcode == KILN_OP_GATHER) {
        instr->has_gather_dnums = true;
        return kiln_hlo_lexer_int64(L, "index vector dimension", &instr->gather_dnums.index_vector_dim);
      }
      instr->has_scatter_dnums = true;
      return kiln_hlo_lexer_int64(L, "index vector dimension", &instr->scatter_dnums.index_vector_dim);
    case ATTR_SLICE_SIZES:
      instr->has_gather_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->gather_slice_sizes);
    case ATTR_UPDATE_WINDOW_DIMS:
      instr->has_scatter_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->scatter_dnums.update_window_dims);
    case ATTR_INSERTED_WINDOW_DIMS:
      instr->has_scatter_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->scatter_dnums.inserted_window_dims);
    case ATTR_SCATTER_DIMS_TO_OPERAND_DIMS:
      instr->has_scatter_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->scatter_dnums.scatter_dims_to_operand_dims);
    case ATTR_INPUT_BATCHING_DIMS:
      instr->has_scatter_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->scatter_dnums.input_batching_dims);
    case ATTR_SCATTER_INDICES_BATCHING_DIMS:
      instr->has_scatter_dnums = true;
      return kiln_hlo_parse_i64_list(P, &instr->scatter_dnums.scatter_indices_batching_dims);
    case ATTR_INDICES_ARE_SORTED: return kiln_hlo_parse_bool(P, &instr->indices_are_sorted);
    case ATTR_UNIQUE_INDICES: return kiln_hlo_parse_bool(P, &instr->unique_indices);
    case ATTR_DIRECTION: {
      static const char *const kDirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
      if (!parse_enum_word(P, "comparison direction", kDirs, 6, &e)) return false;
      instr->comparison_direction = (kiln_cmp_dir_t)(KILN_CMP_EQ + e);
      return true;
    }
    case ATTR_TYPE: {
      static const char *const kTypes[] = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
      if (!parse_enum_word(P, "comparison type", kTypes, 4, &e)) return false;
      instr->comparison_type = (kiln_cmp_type_t)(KILN_CMP_TYPE_FLOAT + e);
      return true;
    }
    case ATTR_KIND: {
      const char *s;
      size_t n;
      if (!kiln_hlo_lexer_word(L, "fusion kind", &s, &n)) return false;
      if (kiln_hlo_span_eq(s, n, "kLoop"))
        instr->fusion_kind = KILN_HLO_FUSION_LOOP;
      else if (kiln_hlo_span_eq(s, n, "kInput"))
        instr->fusion_kind = KILN_HLO_FUSION_INPUT;
      else if (kiln_hlo_span_eq(s, n, "kOutput"))
        instr->fusion_kind = KILN_HLO_FUSION_OUTPUT;
      else if (kiln_hlo_span_eq(s, n, "kCustom"))
        instr->fusion_kind = KILN_HLO_FUSION_CUSTOM;
      else return (instr->fusion_kind_text = kiln_hlo_parser_strndup(P, s, n)) != NULL;
      return true;
    }
    case ATTR_TO_APPLY: case ATTR_CALLS: case ATTR_CONDITION: case ATTR_BODY: case ATTR_SELECT:
    case ATTR_SCATTER: case ATTR_TRUE_COMPUTATION: case ATTR_FALSE_COMPUTATION:
    case ATTR_BRANCH_COMPUTATIONS: case ATTR_CALLED_COMPUTATIONS:
      return add_called_ref(P, instr, id);
    case ATTR_CUSTOM_CALL_TARGET: {
      P->sb.len = 0;
      if (!kiln_hlo_lexer_string(L, &P->sb, NULL, NULL)) return false;
      instr->custom_call_target = kiln_hlo_parser_strndup(P, P->sb.data, P->sb.len);
      return instr->custom_call_target != NULL;
    }
    case ATTR_API_VERSION: {
      kiln_hlo_lexer_skip_ws(L);
      const char *s = L->p;
      if (!parse_enum_word(P, "api_version", kApiVersions, 5, &e)) return false;
      instr->api_version = e;
      instr->api_version_text = kiln_hlo_parser_strndup(P, s, (size_t)(L->p - s));
      return instr->api_version_text != NULL;
    }
    case ATTR_IS_STABLE: return kiln_hlo_parse_bool(P, &instr->is_stable);
    case ATTR_EXPONENT_BITS: return kiln_hlo_lexer_int64(L, "exponent bits", &instr->exponent_bits);
    case ATTR_MANTISSA_BITS: return kiln_hlo_lexer_int64(L, "mantissa bits", &instr->mantissa_bits);
    case ATTR_FFT_TYPE: return kiln_hlo_parse_word_dup(P, "fft type", &instr->fft_type);
    case ATTR_FFT_LENGTH: return kiln_hlo_parse_i64_list(P, &instr->fft_length);
    case ATTR_DISTRIBUTION: return kiln_hlo_parse_word_dup(P, "distribution", &instr->rng_distribution);
    case ATTR_ALGORITHM: return kiln_hlo_parse_word_dup(P, "algorithm", &instr->rng_algorithm);
    case ATTR_LEFT_SIDE: return kiln_hlo_parse_bool(P, &instr->left_side);
    case ATTR_LOWER: instr->has_lower = true; return kiln_hlo_parse_bool(P, &instr->lower);
    case ATTR_UNIT_DIAGONAL: return kiln_hlo_parse_bool(P, &instr->unit_diagonal);
    case ATTR_TRANSPOSE_A: return kiln_hlo_parse_word_dup(P, "transpose kind", &instr->transpose_a);
    case ATTR_CHANNEL_ID: return kiln_hlo_lexer_int64(L, "channel id", &instr->channel_id);
    case ATTR_REPLICA_GROUPS:
      if (!capture_replica_groups(P)) return false;
      instr->replica_groups = kiln_hlo_parser_strndup(P, P->sb.data, P->sb.len);
      return instr->replica_groups != NULL;
    case ATTR_USE_GLOBAL_DEVICE_IDS: return kiln_hlo_parse_bool(P, &instr->use_global_device_ids);
    case ATTR_CONSTRAIN_LAYOUT: return kiln_hlo_parse_bool(P, &instr->constrain_layout);
    case ATTR_K: return kiln_hlo_lexer_int64(L, "k", &instr->k);
    case ATTR_LARGEST: return kiln_hlo_parse_bool(P, &instr->largest);
    case ATTR_CONTROL_PREDECESSORS: {
      bool braced;
      rec->ctrl_begin = (uint32_t)P->refs.len;
      if (!parse_name_refs(P, &P->refs, false, &braced, "instruction name")) return false;
      rec->ctrl_count = (uint32_t)(P->refs.len - rec->ctrl_begin);
      return true;
    }
    case ATTR_BACKEND_CONFIG: return parse_backend_config(P, instr);
    default: return kiln_hlo_lexer_error_at(L, L->p, KILN_INTERNAL, "unhandled attribute");
  }
}

/* Stores a raw attribute in the per-instruction scratch list (duplicates are an error). */
bool kiln_hlo_parser_add_raw(kiln_hlo_parser_t *P, const char *k, size_t kn, const char *kpos,
                    uintptr_t owner_tag) {
  uintptr_t prev = (uintptr_t)kiln_hashmap_put(&P->raw_seen, k, kn, (void *)owner_tag);
  if (prev == owner_tag)
    return kiln_hlo_lexer_error_at(&P->L, kpos, KILN_INVALID_ARGUMENT, "duplicate attribute '%.*s'",
                                   (int)kn, k);
  if (!kiln_hlo_lexer_capture(&P->L, true, &P->sb)) return false;
  kiln_raw_attr_t ra;
  ra.key = kiln_hlo_parser_strndup(P, k, kn);
  ra.value = kiln_hlo_parser_strndup(P, P->sb.data, P->sb.len);
  if (!ra.key || !ra.value) return false;
  kiln_vec_push(&P->raws, ra);
  return true;
}

bool kiln_hlo_parser_take_raws(kiln_hlo_parser_t *P, kiln_raw_attr_t **out, int *n) {
  *n = 0;
  *out = NULL;
  if (!P->raws.len) return true;
  if (P->raws.len > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_INVALID_ARGUMENT, "too many attributes");
  *out = kiln_hlo_parser_alloc(P, P->raws.len * sizeof(kiln_raw_attr_t));
  if (!*out) return false;
  memcpy(*out, P->raws.data, P->raws.len * sizeof(kiln_raw_attr_t));
  *n = (int)P->raws.len;
  P->raws.len = 0;
  return true;
}

/* ---- instructions ---- */

bool kiln_hlo_parse_instr_attr(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr,
                               kiln_hlo_instr_rec_t *rec) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *kpos = L->p, *k;
  size_t kn;
  if (!kiln_hlo_lexer_word(L, "attribute name", &k, &kn)) return false;
  if (!kiln_hlo_lexer_expect(L, '=')) return false;
  attr_id_t id = lookup_attr(P, k, kn);
  if (id != ATTR_RAW && !attr_applies(id, instr->opcode)) id = ATTR_RAW;
  if (id == ATTR_RAW) return kiln_hlo_parser_add_raw(P, k, kn, kpos, (uintptr_t)instr->id + 2);
  if (P->seen[id])
    return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT, "duplicate attribute '%.*s'",
                                   (int)kn, k);
  P->seen[id] = true;
  return parse_attr_value(P, instr, rec, id);
}
