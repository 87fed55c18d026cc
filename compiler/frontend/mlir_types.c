/* The MLIR text reader: builtin types, !stablehlo.token, type aliases, unknown dialect types
 * (kept as text). */
#include <string.h>

#include "compiler/frontend/mlir_text_internal.h"

kiln_mlir_type_t *kiln_mlirp_new_type(kiln_mlirp_t *P, kiln_mlir_type_kind_t kind) {
  kiln_mlir_type_t *t = kiln_arena_alloc(P->a, sizeof(*t));
  if (t == NULL) {
    kiln_mlirp_failf(P, "out of memory");
    return NULL;
  }
  t->kind = kind;
  return t;
}

const kiln_mlir_type_t *kiln_mlirp_int_type(kiln_mlirp_t *P, int32_t width,
                                            kiln_mlir_signedness_t s) {
  kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_INTEGER);
  if (t == NULL) return NULL;
  t->width = width;
  t->signedness = s;
  return t;
}

const kiln_mlir_type_t *kiln_mlirp_scalar_tensor(kiln_mlirp_t *P, const kiln_mlir_type_t *elem) {
  kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_TENSOR);
  if (t == NULL) return NULL;
  t->element = elem;
  return t;
}

static const struct {
  const char *name;
  kiln_elem_type_t elem;
} kFloats[] = {
    {"f16", KILN_F16},
    {"bf16", KILN_BF16},
    {"f32", KILN_F32},
    {"f64", KILN_F64},
    {"f8E5M2", KILN_F8E5M2},
    {"f8E4M3", KILN_F8E4M3},
    {"f8E4M3FN", KILN_F8E4M3FN},
    {"f8E4M3B11FNUZ", KILN_F8E4M3B11FNUZ},
    {"f8E5M2FNUZ", KILN_F8E5M2FNUZ},
    {"f8E4M3FNUZ", KILN_F8E4M3FNUZ},
    {"f8E3M4", KILN_F8E3M4},
    {"f8E8M0FNU", KILN_F8E8M0FNU},
    {"f4E2M1FN", KILN_F4E2M1FN},
};

/* Float formats MLIR has and kiln does not: kept as OTHER types with their name. */
static const char *const kOtherFloats[] = {"f6E2M3FN", "f6E3M2FN", "tf32", "f80", "f128"};

/* The MLIR name of a float type (for printing). */
const char *kiln_mlir_float_name(kiln_elem_type_t e);
const char *kiln_mlir_float_name(kiln_elem_type_t e) {
  for (size_t i = 0; i < sizeof(kFloats) / sizeof(kFloats[0]); i++) {
    if (kFloats[i].elem == e) return kFloats[i].name;
  }
  return NULL;
}

bool kiln_mlirp_elem_of(const kiln_mlir_type_t *t, kiln_elem_type_t *out) {
  switch (t->kind) {
    case KILN_MLIR_TYPE_INTEGER: {
      static const int widths[] = {2, 4, 8, 16, 32, 64};
      static const kiln_elem_type_t s[] = {KILN_S2, KILN_S4, KILN_S8, KILN_S16, KILN_S32, KILN_S64};
      static const kiln_elem_type_t u[] = {KILN_U2, KILN_U4, KILN_U8, KILN_U16, KILN_U32, KILN_U64};
      if (t->width == 1) {
        *out = KILN_PRED;
        return true;
      }
      for (int i = 0; i < 6; i++) {
        if (widths[i] == t->width) {
          *out = t->signedness == KILN_MLIR_UNSIGNED ? u[i] : s[i];
          return true;
        }
      }
      return false;
    }
    case KILN_MLIR_TYPE_INDEX:
      *out = KILN_S64;
      return true;
    case KILN_MLIR_TYPE_FLOAT:
      *out = t->elem;
      return true;
    case KILN_MLIR_TYPE_COMPLEX:
      if (t->element->kind != KILN_MLIR_TYPE_FLOAT) return false;
      if (t->element->elem == KILN_F32) {
        *out = KILN_C64;
        return true;
      }
      if (t->element->elem == KILN_F64) {
        *out = KILN_C128;
        return true;
      }
      return false;
    default:
      return false;
  }
}

static bool parse_int_width(const char *s, size_t n, int32_t *w) {
  if (n == 0 || n > 5) return false;
  int32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  if (v < 1 || v > 65535) return false;
  *w = v;
  return true;
}

/* A type named by a bare identifier (i32, f16, index, ...); NULL if the name is no type. */
static const kiln_mlir_type_t *named_type(kiln_mlirp_t *P, const char *s, size_t n) {
  int32_t w;
  if (n >= 2 && s[0] == 'i' && parse_int_width(s + 1, n - 1, &w)) {
    return kiln_mlirp_int_type(P, w, KILN_MLIR_SIGNLESS);
  }
  if (n >= 3 && s[0] == 's' && s[1] == 'i' && parse_int_width(s + 2, n - 2, &w)) {
    return kiln_mlirp_int_type(P, w, KILN_MLIR_SIGNED);
  }
  if (n >= 3 && s[0] == 'u' && s[1] == 'i' && parse_int_width(s + 2, n - 2, &w)) {
    return kiln_mlirp_int_type(P, w, KILN_MLIR_UNSIGNED);
  }
  for (size_t i = 0; i < sizeof(kFloats) / sizeof(kFloats[0]); i++) {
    if (strlen(kFloats[i].name) == n && memcmp(kFloats[i].name, s, n) == 0) {
      kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_FLOAT);
      if (t) t->elem = kFloats[i].elem;
      return t;
    }
  }
  for (size_t i = 0; i < sizeof(kOtherFloats) / sizeof(kOtherFloats[0]); i++) {
    if (strlen(kOtherFloats[i]) == n && memcmp(kOtherFloats[i], s, n) == 0) {
      kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_OTHER);
      if (t) t->text = kiln_mlirp_dup(P, s, n);
      return t;
    }
  }
  if (n == 5 && memcmp(s, "index", 5) == 0) return kiln_mlirp_new_type(P, KILN_MLIR_TYPE_INDEX);
  if (n == 4 && memcmp(s, "none", 4) == 0) return kiln_mlirp_new_type(P, KILN_MLIR_TYPE_NONE);
  return NULL;
}

/* tensor<...> after `tensor`. */
static bool tensor_type(kiln_mlirp_t *P, const kiln_mlir_type_t **out) {
  if (!kiln_mlirp_expect(P, '<')) return false;
  kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_TENSOR);
  if (t == NULL) return false;
  kiln_mlirp_ws(P);
  if (P->p < P->end && *P->p == '*') {
    P->p++;
    if (!kiln_mlirp_expect(P, 'x')) return false;
    t->unranked = true;
  } else {
    int64_t dims[64];
    int32_t rank = 0;
    int64_t *heap = NULL;
    int32_t heap_cap = 0;
    for (;;) {
      kiln_mlirp_ws(P);
      const char *q = P->p;
      int64_t d;
      if (q < P->end && *q == '?') {
        d = KILN_MLIR_DYNAMIC;
        q++;
      } else if (q < P->end && *q >= '0' && *q <= '9') {
        d = 0;
        while (q < P->end && *q >= '0' && *q <= '9') {
          if (d > (INT64_MAX - 9) / 10) return kiln_mlirp_fail_at(P, P->p, "dimension too large");
          d = d * 10 + (*q - '0');
          q++;
        }
      } else {
        break;
      }
      if (q >= P->end || *q != 'x')
        return kiln_mlirp_fail_at(P, q, "expected 'x' after a dimension");
      P->p = q + 1;
      if (rank < 64) {
        dims[rank] = d;
      } else {
        if (rank == 64 || rank >= heap_cap) {
          int32_t nc = heap_cap ? heap_cap * 2 : 128;
          int64_t *nh = kiln_arena_alloc(P->a, sizeof(int64_t) * (size_t)nc);
          if (nh == NULL) return kiln_mlirp_failf(P, "out of memory");
          memcpy(nh, heap ? heap : dims, sizeof(int64_t) * (size_t)rank);
          heap = nh;
          heap_cap = nc;
        }
        heap[rank] = d;
      }
      rank++;
    }
    t->rank = rank;
    if (rank > 0) {
      t->dims = heap ? heap : kiln_arena_alloc(P->a, sizeof(int64_t) * (size_t)rank);
      if (t->dims == NULL) return kiln_mlirp_failf(P, "out of memory");
      if (!heap) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    }
  }
  if (!kiln_mlirp_type(P, &t->element)) return false;
  if (kiln_mlirp_accept(P, ',')) {
    if (!kiln_mlirp_attr(P, &t->encoding)) return false;
  }
  if (!kiln_mlirp_expect(P, '>')) return false;
  *out = t;
  return true;
}

static bool other_type_text(kiln_mlirp_t *P, const char *start, const kiln_mlir_type_t **out) {
  kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_OTHER);
  if (t == NULL) return false;
  t->text = kiln_mlirp_dup(P, start, (size_t)(P->p - start));
  *out = t;
  return true;
}

bool kiln_mlirp_type_list_parens(kiln_mlirp_t *P, const kiln_mlir_type_t ***out, int32_t *n) {
  if (!kiln_mlirp_expect(P, '(')) return false;
  const kiln_mlir_type_t *small[16];
  const kiln_mlir_type_t **items = small;
  int32_t num = 0, cap = 16;
  if (!kiln_mlirp_accept(P, ')')) {
    do {
      const kiln_mlir_type_t *t;
      if (!kiln_mlirp_type(P, &t)) return false;
      /* function signatures may carry attributes and locations after a type */
      if (num == cap) {
        const kiln_mlir_type_t **ni = kiln_arena_alloc(P->a, sizeof(*ni) * (size_t)cap * 2);
        if (ni == NULL) return kiln_mlirp_failf(P, "out of memory");
        memcpy(ni, items, sizeof(*ni) * (size_t)num);
        items = ni;
        cap *= 2;
      }
      items[num++] = t;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  *out = kiln_arena_alloc(P->a, sizeof(**out) * (size_t)(num ? num : 1));
  if (*out == NULL) return kiln_mlirp_failf(P, "out of memory");
  memcpy(*out, items, sizeof(*items) * (size_t)num);
  *n = num;
  return true;
}

bool kiln_mlirp_type(kiln_mlirp_t *P, const kiln_mlir_type_t **out) {
  if (P->err) return false;
  if (++P->depth > KILN_MLIRP_MAX_DEPTH) return kiln_mlirp_failf(P, "types nested too deeply");
  bool ok = false;
  char c = kiln_mlirp_peek(P);
  const char *start = P->p;
  if (c == '(') {
    kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_FUNCTION);
    if (t && kiln_mlirp_type_list_parens(P, (const kiln_mlir_type_t ***)&t->types, &t->num_types) &&
        kiln_mlirp_expect_str(P, "->")) {
      if (kiln_mlirp_peek(P) == '(') {
        ok = kiln_mlirp_type_list_parens(P, (const kiln_mlir_type_t ***)&t->results,
                                         &t->num_results);
      } else {
        t->results = kiln_arena_alloc(P->a, sizeof(*t->results));
        t->num_results = 1;
        ok = t->results && kiln_mlirp_type(P, &t->results[0]);
      }
      *out = t;
    }
  } else if (c == '!') {
    P->p++;
    const char *s;
    size_t n;
    if (!kiln_mlirp_bare_id(P, &s, &n)) {
      ok = kiln_mlirp_fail(P, "a dialect type name after '!'");
    } else if (n == 15 && memcmp(s, "stablehlo.token", 15) == 0) {
      *out = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_TOKEN);
      ok = *out != NULL;
    } else {
      kiln_mlirp_sym_t *al = kiln_mlirp_lookup(&P->aliases, start, (size_t)(P->p - start));
      if (al && al->type) {
        *out = al->type;
        ok = true;
      } else if (P->p < P->end && *P->p == '<') {
        ok = kiln_mlirp_skip_balanced(P) && other_type_text(P, start, out);
      } else if (memchr(s, '.', n) != NULL) {
        ok = other_type_text(P, start, out);
      } else {
        ok = kiln_mlirp_fail_at(P, start, "unknown type alias '%.*s'", (int)(P->p - start), start);
      }
    }
  } else {
    const char *s;
    size_t n;
    if (!kiln_mlirp_bare_id(P, &s, &n)) {
      ok = kiln_mlirp_fail(P, "a type");
    } else if (n == 6 && memcmp(s, "tensor", 6) == 0) {
      ok = tensor_type(P, out);
    } else if (n == 7 && memcmp(s, "complex", 7) == 0) {
      kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_COMPLEX);
      ok = t && kiln_mlirp_expect(P, '<') && kiln_mlirp_type(P, &t->element) &&
           kiln_mlirp_expect(P, '>');
      *out = t;
    } else if (n == 5 && memcmp(s, "tuple", 5) == 0) {
      kiln_mlir_type_t *t = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_TUPLE);
      ok = t && kiln_mlirp_expect(P, '<');
      if (ok && !kiln_mlirp_accept(P, '>')) {
        const kiln_mlir_type_t *small[16];
        const kiln_mlir_type_t **items = small;
        int32_t num = 0, cap = 16;
        do {
          const kiln_mlir_type_t *e;
          if (!kiln_mlirp_type(P, &e)) {
            ok = false;
            break;
          }
          if (num == cap) {
            const kiln_mlir_type_t **ni = kiln_arena_alloc(P->a, sizeof(*ni) * (size_t)cap * 2);
            if (ni == NULL) {
              ok = kiln_mlirp_failf(P, "out of memory");
              break;
            }
            memcpy(ni, items, sizeof(*ni) * (size_t)num);
            items = ni;
            cap *= 2;
          }
          items[num++] = e;
        } while (kiln_mlirp_accept(P, ','));
        if (ok) ok = kiln_mlirp_expect(P, '>');
        if (ok) {
          t->types = kiln_arena_alloc(P->a, sizeof(*t->types) * (size_t)num);
          if (t->types == NULL) {
            ok = kiln_mlirp_failf(P, "out of memory");
          } else {
            memcpy(t->types, items, sizeof(*items) * (size_t)num);
            t->num_types = num;
          }
        }
      }
      *out = t;
    } else if ((n == 6 && memcmp(s, "vector", 6) == 0) || (n == 6 && memcmp(s, "memref", 6) == 0)) {
      ok = kiln_mlirp_peek(P) == '<' ? kiln_mlirp_skip_balanced(P) && other_type_text(P, start, out)
                                     : kiln_mlirp_fail(P, "'<'");
    } else {
      *out = named_type(P, s, n);
      ok = *out != NULL;
      if (!ok && !P->err) {
        ok = kiln_mlirp_fail_at(P, start, "unknown type '%.*s'", (int)n, s);
      }
    }
  }
  P->depth--;
  return ok && !P->err;
}
