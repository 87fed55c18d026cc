/* VHLO -> the current StableHLO generic form, in place over the generic IR read from bytecode.
 * Op names lose the dialect's version suffix (vhlo.add_v1 -> stablehlo.add; func_v1, call_v1
 * and a function's return_v1 -> func.func / func.call / func.return); attributes take the
 * ODS forms of current StableHLO: the split dimension lists of dot_general, gather, scatter
 * and convolution become one STRUCT (#stablehlo.dot, .gather, .scatter, .conv), channel ids
 * become #stablehlo.channel_handle, i64 tensors that StableHLO holds as array<i64: ...>
 * become DENSE_ARRAY, and the values VHLO spells out for absent optional attributes (false,
 * "", [], NOTYPE, channel 0, no dot algorithm, the default result accuracy) are dropped, as
 * StableHLO's VHLO-to-StableHLO legalization does. Older op versions are upgraded to the
 * newest by the same rules (the attributes they lack are absent). */
#include <stdint.h>
#include <string.h>

#include "compiler/frontend/mlir_bytecode_internal.h"
#include "compiler/hlo/literal.h"

kiln_mlir_attr_t *kiln_bc_i64_array(kiln_bc_t *bc, const int64_t *v, int32_t n);

typedef struct attr_list {
  kiln_mlir_named_attr_t *a;
  int32_t n, cap;
  int32_t first_cap; /* the first allocation: enough for an op's upgraded attributes */
  kiln_bc_t *bc;
} attr_list_t;

static void push(attr_list_t *l, const char *name, const kiln_mlir_attr_t *v) {
  if (l->n == l->cap) {
    int32_t ncap = l->cap ? l->cap * 2 : l->first_cap > 0 ? l->first_cap : 8;
    l->a = kiln_arena_realloc(l->bc->arena, l->a, (size_t)l->cap * sizeof(*l->a),
                              (size_t)ncap * sizeof(*l->a));
    l->cap = ncap;
  }
  l->a[l->n].name = name;
  l->a[l->n].value = v;
  l->n++;
}

static const kiln_mlir_attr_t *take(kiln_mlir_op_t *op, const char *name) {
  for (int32_t i = 0; i < op->num_attrs; i++) {
    if (op->attrs[i].name != NULL && strcmp(op->attrs[i].name, name) == 0) {
      const kiln_mlir_attr_t *v = op->attrs[i].value;
      op->attrs[i].name = NULL; /* consumed */
      return v;
    }
  }
  return NULL;
}

static bool in_list(const char *name, const char *const *list) {
  for (; *list; list++) {
    if (strcmp(*list, name) == 0) return true;
  }
  return false;
}

/* StableHLO attributes held as array<i64: ...> (DenseI64ArrayAttr) or array<i1: ...>. */
static const char *const kI64Arrays[] = {"window_strides",
                                         "rhs_dilation",
                                         "lhs_dilation",
                                         "dimensions",
                                         "slice_sizes",
                                         "broadcast_dimensions",
                                         "window_dimensions",
                                         "window_dilations",
                                         "base_dilations",
                                         "known_expanding_dimensions",
                                         "known_nonexpanding_dimensions",
                                         "strides",
                                         "start_indices",
                                         "limit_indices",
                                         "permutation",
                                         "interior_padding",
                                         "edge_padding_low",
                                         "edge_padding_high",
                                         "fft_length",
                                         "broadcast_sizes",
                                         NULL};
static const char *const kBoolArrays[] = {"window_reversal", NULL};

/* A rank-1 (or scalar) dense elements attribute as a dense array; NULL if it is not one. */
static size_t darr_slot(const kiln_bc_t *bc, const kiln_mlir_attr_t *v, bool boolean) {
  size_t h = (((uintptr_t)v >> 4) * 0x9E3779B97F4A7C15ull + boolean) & (bc->darr_cap - 1);
  while (bc->darr[h].from != NULL && (bc->darr[h].from != v || bc->darr[h].boolean != boolean))
    h = (h + 1) & (bc->darr_cap - 1);
  return h;
}

static const kiln_mlir_attr_t *make_dense_array(kiln_bc_t *bc, const kiln_mlir_attr_t *v,
                                                bool boolean);

/* Cached by source attribute: ops share their attributes in bytecode, so each converts once. */
static const kiln_mlir_attr_t *to_dense_array(kiln_bc_t *bc, const kiln_mlir_attr_t *v,
                                              bool boolean) {
  if (v == NULL || v->kind != KILN_MLIR_ATTR_DENSE_ELEMENTS || v->literal == NULL) return NULL;
  if (v->type->rank > 1) return NULL;
  if (2 * (bc->darr_n + 1) > bc->darr_cap) {
    struct kiln_bc_darr *old = bc->darr;
    size_t old_cap = bc->darr_cap;
    bc->darr_cap = old_cap ? old_cap * 2 : 64;
    bc->darr = kiln_calloc(bc->darr_cap, sizeof(*bc->darr));
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].from) bc->darr[darr_slot(bc, old[i].from, old[i].boolean)] = old[i];
    kiln_free(old);
  }
  size_t h = darr_slot(bc, v, boolean);
  if (bc->darr[h].from == NULL) {
    bc->darr[h].from = v;
    bc->darr[h].boolean = boolean;
    bc->darr[h].to = make_dense_array(bc, v, boolean);
    bc->darr_n++;
  }
  return bc->darr[h].to;
}

static const kiln_mlir_attr_t *make_dense_array(kiln_bc_t *bc, const kiln_mlir_attr_t *v,
                                                bool boolean) {
  int64_t n = v->literal->num_elements;
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_DENSE_ARRAY);
  a->type = kiln_bc_int_type(bc, boolean ? 1 : 64);
  a->num_elements = (int32_t)n;
  a->ints = kiln_arena_alloc(bc->arena, (size_t)(n ? n : 1) * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) a->ints[i] = kiln_literal_get_s64(v->literal, i);
  return a;
}

static const kiln_mlir_attr_t *i64s(kiln_bc_t *bc, const kiln_mlir_attr_t *v) {
  const kiln_mlir_attr_t *a = to_dense_array(bc, v, false);
  return a ? a : v;
}

static bool is_false(const kiln_mlir_attr_t *v) {
  return v != NULL && v->kind == KILN_MLIR_ATTR_BOOL && !v->b;
}
static bool is_empty_string(const kiln_mlir_attr_t *v) {
  return v != NULL && v->kind == KILN_MLIR_ATTR_STRING && v->str_len == 0;
}
static bool is_empty_array(const kiln_mlir_attr_t *v) {
  return v != NULL &&
         (v->kind == KILN_MLIR_ATTR_ARRAY || v->kind == KILN_MLIR_ATTR_DENSE_ARRAY ||
          v->kind == KILN_MLIR_ATTR_DICTIONARY) &&
         v->num_elements == 0;
}
static bool is_empty_elements(const kiln_mlir_attr_t *v) {
  return v != NULL && v->kind == KILN_MLIR_ATTR_DENSE_ELEMENTS && v->literal != NULL &&
         v->literal->num_elements == 0;
}
static bool is_none_type(const kiln_mlir_attr_t *v) {
  return v != NULL && v->kind == KILN_MLIR_ATTR_TYPE && v->type->kind == KILN_MLIR_TYPE_NONE;
}
static bool is_int(const kiln_mlir_attr_t *v, int64_t x) {
  return v != NULL && v->kind == KILN_MLIR_ATTR_INTEGER && v->i == x;
}
static bool is_enum(const kiln_mlir_attr_t *v, const char *value) {
  return v != NULL && v->kind == KILN_MLIR_ATTR_ENUM && strcmp(v->str, value) == 0;
}

/* VHLO spells out the values StableHLO leaves absent: window attributes of all ones (strides,
 * dilations), all-zero padding, no reversal, all-DEFAULT precision. */
static bool all_ints(const kiln_mlir_attr_t *v, int64_t x) {
  if (v == NULL) return false;
  if (v->kind == KILN_MLIR_ATTR_DENSE_ARRAY && v->ints) {
    for (int32_t i = 0; i < v->num_elements; i++) {
      if (v->ints[i] != x) return false;
    }
    return true;
  }
  if (v->kind == KILN_MLIR_ATTR_DENSE_ELEMENTS && v->literal) {
    for (int64_t i = 0; i < v->literal->num_elements; i++) {
      if (kiln_literal_get_s64(v->literal, i) != x) return false;
    }
    return true;
  }
  return false;
}

static bool all_default_precision(const kiln_mlir_attr_t *v) {
  if (v == NULL || v->kind != KILN_MLIR_ATTR_ARRAY) return false;
  for (int32_t i = 0; i < v->num_elements; i++) {
    if (!is_enum(v->elements[i], "DEFAULT")) return false;
  }
  return true;
}

static const char *const kOnesByDefault[] = {"window_strides", "lhs_dilation",     "rhs_dilation",
                                             "base_dilations", "window_dilations", NULL};

static kiln_status bad(kiln_mlir_op_t *op, const char *what) {
  return KILN_ERR_INVALID("MLIR bytecode: upgrading %s: %s", op->name, what);
}

/* A struct from the named attributes of `op` (each consumed); empty lists are left out, as
 * StableHLO's printer leaves them out. */
static kiln_status make_struct(kiln_bc_t *bc, kiln_mlir_op_t *op, const char *sname,
                               const char *const *fields, const kiln_mlir_attr_t **out) {
  kiln_mlir_named_attr_t f[16];
  int32_t n = 0;
  bool any = false;
  for (int i = 0; fields[i]; i++) {
    const kiln_mlir_attr_t *v = take(op, fields[i]);
    if (v == NULL) continue;
    any = true;
    v = i64s(bc, v);
    if (is_empty_array(v)) continue;
    f[n].name = fields[i];
    f[n].value = v;
    n++;
  }
  if (!any) {
    *out = NULL;
    return KILN_STATUS_OK;
  }
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_STRUCT);
  a->dialect = sname;
  a->num_elements = n;
  a->fields = kiln_arena_alloc(bc->arena, (size_t)(n ? n : 1) * sizeof(*a->fields));
  memcpy(a->fields, f, (size_t)n * sizeof(*f));
  *out = a;
  (void)op;
  return KILN_STATUS_OK;
}

static const char *const kDotFields[] = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                         "lhs_contracting_dimensions", "rhs_contracting_dimensions",
                                         NULL};
static const char *const kGatherFields[] = {"offset_dims",
                                            "collapsed_slice_dims",
                                            "operand_batching_dims",
                                            "start_indices_batching_dims",
                                            "start_index_map",
                                            "index_vector_dim",
                                            NULL};
static const char *const kScatterFields[] = {"update_window_dims",
                                             "inserted_window_dims",
                                             "input_batching_dims",
                                             "scatter_indices_batching_dims",
                                             "scatter_dims_to_operand_dims",
                                             "index_vector_dim",
                                             NULL};
static const char *const kConvFields[] = {
    "input_batch_dimension",           "input_feature_dimension",
    "input_spatial_dimensions",        "kernel_input_feature_dimension",
    "kernel_output_feature_dimension", "kernel_spatial_dimensions",
    "output_batch_dimension",          "output_feature_dimension",
    "output_spatial_dimensions",       NULL};
static const char *const kAlgorithmFields[] = {"lhs_precision_type",
                                               "rhs_precision_type",
                                               "accumulation_type",
                                               "lhs_component_count",
                                               "rhs_component_count",
                                               "num_primitive_operations",
                                               "allow_imprecise_accumulation",
                                               NULL};

static kiln_mlir_attr_t *channel_handle(kiln_bc_t *bc, int64_t handle, int64_t type) {
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_STRUCT);
  a->dialect = "stablehlo.channel_handle";
  a->num_elements = 2;
  a->fields = kiln_arena_alloc(bc->arena, 2 * sizeof(*a->fields));
  kiln_mlir_attr_t *h = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_INTEGER);
  h->type = kiln_bc_int_type(bc, 64);
  h->i = handle;
  kiln_mlir_attr_t *t = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_INTEGER);
  t->type = kiln_bc_int_type(bc, 64);
  t->i = type;
  a->fields[0] = (kiln_mlir_named_attr_t){"handle", h};
  a->fields[1] = (kiln_mlir_named_attr_t){"type", t};
  return a;
}

static bool is_default_accuracy(const kiln_mlir_attr_t *v) {
  if (v == NULL || v->kind != KILN_MLIR_ATTR_STRUCT) return false;
  const kiln_mlir_attr_t *atol = kiln_mlir_attr_field(v, "atol"),
                         *rtol = kiln_mlir_attr_field(v, "rtol");
  const kiln_mlir_attr_t *ulps = kiln_mlir_attr_field(v, "ulps"),
                         *mode = kiln_mlir_attr_field(v, "mode");
  return atol && atol->f == 0 && rtol && rtol->f == 0 && is_int(ulps, 0) &&
         is_enum(mode, "DEFAULT");
}

static const kiln_mlir_attr_t *strings_to_symbols(kiln_bc_t *bc, const kiln_mlir_attr_t *v) {
  if (v == NULL || v->kind != KILN_MLIR_ATTR_ARRAY) return v;
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_ARRAY);
  a->num_elements = v->num_elements;
  a->elements = kiln_arena_alloc(
      bc->arena, (size_t)(v->num_elements ? v->num_elements : 1) * sizeof(*a->elements));
  for (int32_t i = 0; i < v->num_elements; i++) {
    const kiln_mlir_attr_t *e = v->elements[i];
    if (e->kind == KILN_MLIR_ATTR_STRING) {
      kiln_mlir_attr_t *s = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_SYMBOL_REF);
      s->str = e->str;
      e = s;
    }
    a->elements[i] = e;
  }
  return a;
}

static const kiln_mlir_attr_t *symbol(kiln_bc_t *bc, const kiln_mlir_attr_t *v) {
  if (v == NULL || v->kind != KILN_MLIR_ATTR_STRING) return v;
  kiln_mlir_attr_t *s = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_SYMBOL_REF);
  s->str = v->str;
  return s;
}

static bool all_empty_dicts(const kiln_mlir_attr_t *v) {
  if (v == NULL || v->kind != KILN_MLIR_ATTR_ARRAY) return false;
  for (int32_t i = 0; i < v->num_elements; i++) {
    if (v->elements[i]->kind != KILN_MLIR_ATTR_DICTIONARY || v->elements[i]->num_elements != 0)
      return false;
  }
  return true;
}

static kiln_status upgrade_attrs(kiln_bc_t *bc, kiln_mlir_op_t *op, const char *base) {
  /* each upgraded attribute replaces at least one of the op's (a channel handle or a
   * dimension struct several), so this many never grows */
  attr_list_t out = {.bc = bc, .first_cap = op->num_attrs + 4};
  const kiln_mlir_attr_t *v;
  if (strcmp(base, "func") == 0) {
    if ((v = take(op, "sym_name"))) push(&out, "sym_name", v);
    if ((v = take(op, "function_type"))) push(&out, "function_type", v);
    if ((v = take(op, "sym_visibility")) && !is_empty_string(v) &&
        !(v->kind == KILN_MLIR_ATTR_STRING && strcmp(v->str, "public") == 0)) {
      push(&out, "sym_visibility", v);
    }
    if ((v = take(op, "arg_attrs")) && !all_empty_dicts(v)) push(&out, "arg_attrs", v);
    if ((v = take(op, "res_attrs")) && !all_empty_dicts(v)) push(&out, "res_attrs", v);
  } else if (strcmp(base, "call") == 0) {
    if ((v = take(op, "callee"))) push(&out, "callee", symbol(bc, v));
  } else if (strcmp(base, "dot_general") == 0) {
    const kiln_mlir_attr_t *s;
    KILN_RETURN_IF_ERROR_PLAIN(make_struct(bc, op, "stablehlo.dot", kDotFields, &s));
    if (s) push(&out, "dot_dimension_numbers", s);
    if ((v = take(op, "precision_config")) && !all_default_precision(v))
      push(&out, "precision_config", v);
    const kiln_mlir_attr_t *lhs_type = kiln_mlir_op_attr(op, "lhs_precision_type");
    if (lhs_type != NULL && !is_none_type(lhs_type)) {
      KILN_RETURN_IF_ERROR_PLAIN(
          make_struct(bc, op, "stablehlo.dot_algorithm", kAlgorithmFields, &s));
      if (s) push(&out, "algorithm", s);
    } else {
      for (int i = 0; kAlgorithmFields[i]; i++) take(op, kAlgorithmFields[i]);
    }
  } else if (strcmp(base, "gather") == 0 || strcmp(base, "dynamic_gather") == 0) {
    const kiln_mlir_attr_t *s;
    KILN_RETURN_IF_ERROR_PLAIN(make_struct(bc, op, "stablehlo.gather", kGatherFields, &s));
    if (s) push(&out, "dimension_numbers", s);
  } else if (strcmp(base, "scatter") == 0) {
    const kiln_mlir_attr_t *s;
    KILN_RETURN_IF_ERROR_PLAIN(make_struct(bc, op, "stablehlo.scatter", kScatterFields, &s));
    if (s) push(&out, "scatter_dimension_numbers", s);
  } else if (strcmp(base, "convolution") == 0 || strcmp(base, "dynamic_conv") == 0) {
    const kiln_mlir_attr_t *s;
    KILN_RETURN_IF_ERROR_PLAIN(make_struct(bc, op, "stablehlo.conv", kConvFields, &s));
    if (s) push(&out, "dimension_numbers", s);
    if (strcmp(base, "dynamic_conv") == 0) take(op, "padding"); /* an operand since 0.20 */
  }
  /* Channels. */
  const kiln_mlir_attr_t *cid = take(op, "channel_id");
  const kiln_mlir_attr_t *ctype = take(op, "channel_type");
  if (cid != NULL) {
    if (cid->kind != KILN_MLIR_ATTR_INTEGER) return bad(op, "channel_id is not an integer");
    if (ctype != NULL && ctype->kind != KILN_MLIR_ATTR_INTEGER)
      return bad(op, "channel_type is not an integer");
    if (cid->i != 0 || (ctype != NULL && ctype->i != 0))
      push(&out, "channel_handle", channel_handle(bc, cid->i, ctype ? ctype->i : 0));
  }
  /* The rest, in their order, with defaults dropped. */
  for (int32_t i = 0; i < op->num_attrs; i++) {
    const char *name = op->attrs[i].name;
    v = op->attrs[i].value;
    if (name == NULL) continue;
    if (in_list(name, kI64Arrays)) {
      const kiln_mlir_attr_t *a = to_dense_array(bc, v, false);
      if (a) v = a;
    } else if (in_list(name, kBoolArrays)) {
      const kiln_mlir_attr_t *a = to_dense_array(bc, v, true);
      if (a) v = a;
    }
    bool windowed = strcmp(base, "convolution") == 0 || strcmp(base, "dynamic_conv") == 0 ||
                    strcmp(base, "reduce_window") == 0 || strcmp(base, "select_and_scatter") == 0;
    if (windowed && in_list(name, kOnesByDefault) && all_ints(v, 1)) continue;
    if (windowed && strcmp(name, "padding") == 0 && all_ints(v, 0)) continue;
    if (windowed && strcmp(name, "window_reversal") == 0 && all_ints(v, 0)) continue;
    if (strcmp(name, "precision_config") == 0 && all_default_precision(v)) continue;
    if (strcmp(name, "use_global_device_ids") == 0 || strcmp(name, "has_dynamic_root") == 0) {
      if (v->kind == KILN_MLIR_ATTR_BOOL) {
        if (!v->b) continue;
        v = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_UNIT);
      }
    } else if (strcmp(name, "compare_type") == 0) {
      if (is_enum(v, "NOTYPE")) continue;
    } else if (strcmp(name, "indices_are_sorted") == 0 || strcmp(name, "unique_indices") == 0 ||
               strcmp(name, "is_host_transfer") == 0 || strcmp(name, "has_side_effect") == 0 ||
               strcmp(name, "is_stable") == 0) {
      if (is_false(v)) continue;
    } else if (strcmp(name, "backend_config") == 0 || strcmp(name, "infeed_config") == 0 ||
               strcmp(name, "outfeed_config") == 0) {
      if (is_empty_string(v) || (strcmp(name, "backend_config") == 0 && is_empty_array(v)))
        continue;
    } else if (strcmp(name, "called_computations") == 0) {
      if (is_empty_array(v)) continue;
      v = strings_to_symbols(bc, v);
    } else if (strcmp(name, "output_operand_aliases") == 0 || strcmp(name, "result_tilings") == 0 ||
               strcmp(name, "composite_attributes") == 0 || strcmp(name, "precision_config") == 0) {
      if (is_empty_array(v)) continue;
    } else if (strcmp(name, "operand_layouts") == 0 || strcmp(name, "result_layouts") == 0) {
      /* Layouts come in pairs: absent when both lists are empty. */
      if (is_empty_array(kiln_mlir_op_attr(op, "operand_layouts")) &&
          is_empty_array(kiln_mlir_op_attr(op, "result_layouts"))) {
        continue;
      }
    } else if (strcmp(name, "layout") == 0 || strcmp(name, "known_expanding_dimensions") == 0 ||
               strcmp(name, "known_nonexpanding_dimensions") == 0) {
      if (is_empty_array(v)) continue;
    } else if (strcmp(name, "lower") == 0 && strcmp(base, "cholesky") == 0) {
      if (is_false(v)) continue;
    } else if (strcmp(name, "dimension") == 0 && strcmp(base, "sort") == 0) {
      if (is_int(v, -1)) continue;
    } else if (strcmp(name, "api_version") == 0) {
      if (is_int(v, 1)) continue;
    } else if (strcmp(name, "version") == 0 && strcmp(base, "composite") == 0) {
      if (is_int(v, 0)) continue;
    } else if (strcmp(name, "decomposition") == 0) {
      v = symbol(bc, v);
    } else if (strcmp(name, "result_accuracy") == 0) {
      if (is_default_accuracy(v)) continue;
    } else if (strcmp(name, "source_target_pairs") == 0 &&
               (strcmp(base, "send") == 0 || strcmp(base, "recv") == 0)) {
      if (is_empty_elements(v)) continue;
    }
    push(&out, name, v);
  }
  op->attrs = out.a;
  op->num_attrs = out.n;
  return KILN_STATUS_OK;
}

/* `name` without "vhlo." and its "_vN" suffix, into buf. */
static bool strip_version(const char *name, char *buf, size_t cap) {
  const char *u = strrchr(name, '_');
  if (u == NULL || u[1] != 'v' || u[2] == 0) return false;
  for (const char *p = u + 2; *p; p++) {
    if (*p < '0' || *p > '9') return false;
  }
  size_t n = (size_t)(u - name);
  if (n + 1 > cap) return false;
  memcpy(buf, name, n);
  buf[n] = 0;
  return true;
}

/* Upgraded names, by the (interned) VHLO name's address: one string per op name, not per op. */
typedef struct name_cache {
  const char *from[512];
  const char *to[512];
} name_cache_t;

static const char *cached_name(kiln_bc_t *bc, name_cache_t *c, const char *from, const char *base) {
  size_t h = ((uintptr_t)from >> 4) % 512;
  for (size_t k = 0; k < 512; k++, h = (h + 1) % 512) {
    if (c->from[h] == from) return c->to[h];
    if (c->from[h] == NULL) {
      c->from[h] = from;
      c->to[h] = kiln_arena_printf(bc->arena, "stablehlo.%s", base);
      return c->to[h];
    }
  }
  return kiln_arena_printf(bc->arena, "stablehlo.%s", base);
}

static kiln_status upgrade_op(kiln_bc_t *bc, name_cache_t *cache, kiln_mlir_op_t *op,
                              const kiln_mlir_op_t *parent, int depth);

static kiln_status upgrade_regions(kiln_bc_t *bc, name_cache_t *cache, kiln_mlir_op_t *op,
                                   int depth) {
  for (int32_t r = 0; r < op->num_regions; r++) {
    for (int32_t b = 0; b < op->regions[r].num_blocks; b++) {
      kiln_mlir_block_t *blk = &op->regions[r].blocks[b];
      for (int32_t i = 0; i < blk->num_ops; i++)
        KILN_RETURN_IF_ERROR_PLAIN(upgrade_op(bc, cache, blk->ops[i], op, depth + 1));
    }
  }
  return KILN_STATUS_OK;
}

static kiln_status upgrade_op(kiln_bc_t *bc, name_cache_t *cache, kiln_mlir_op_t *op,
                              const kiln_mlir_op_t *parent, int depth) {
  if (depth > KILN_BC_MAX_DEPTH) return bad(op, "nested too deeply");
  if (strncmp(op->name, "vhlo.", 5) == 0) {
    int64_t lo, hi;
    if (kiln_bc_vhlo_op_attrs(op->name + 5, &lo, &hi) == NULL)
      return bad(op, "not a VHLO op kiln knows");
    if (bc->vhlo_version != 0 && (bc->vhlo_version < lo)) {
      return KILN_ERR_INVALID(
          "MLIR bytecode: %s needs VHLO %lld.%lld.%lld, the file declares %lld.%lld.%lld", op->name,
          (long long)(lo / 10000), (long long)(lo / 100 % 100), (long long)(lo % 100),
          (long long)(bc->vhlo_version / 10000), (long long)(bc->vhlo_version / 100 % 100),
          (long long)(bc->vhlo_version % 100));
    }
    char base[64];
    if (!strip_version(op->name + 5, base, sizeof(base)))
      return bad(op, "op name lacks a version suffix");
    KILN_RETURN_IF_ERROR_PLAIN(upgrade_attrs(bc, op, base));
    if (strcmp(base, "func") == 0) {
      op->name = "func.func";
    } else if (strcmp(base, "call") == 0) {
      op->name = "func.call";
    } else if (strcmp(base, "return") == 0) {
      op->name = parent != NULL && strcmp(parent->name, "func.func") == 0 ? "func.return"
                                                                          : "stablehlo.return";
    } else {
      op->name = cached_name(bc, cache, op->name, base);
    }
  }
  return upgrade_regions(bc, cache, op, depth);
}

kiln_status kiln_bc_upgrade(kiln_bc_t *bc) {
  kiln_mlir_module_t *m = bc->m;
  name_cache_t *cache = kiln_calloc(1, sizeof(*cache));
  kiln_status st = KILN_STATUS_OK;
  for (int32_t i = 0; i < m->body.num_ops && kiln_status_is_ok(st); i++) {
    st = upgrade_op(bc, cache, m->body.ops[i], NULL, 0);
  }
  kiln_free(cache);
  return st;
}
