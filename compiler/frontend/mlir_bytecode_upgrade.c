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

/* ---- interned names ----
 * The upgrade compares every attribute name of every op against the names it rewrites. The
 * names are interned instead: each distinct name pointer (the reader shares one string per
 * string-table entry, dictionary attribute and op name's property list) resolves to an
 * attribute id once, by binary search over the sorted table below; per op the work is a
 * pointer hash. Op names likewise resolve once per op-name pointer to their kind, version
 * range and upgraded name. */

/* X(name, flags): the attribute names the upgrade treats specially, sorted. Flags: AN_I64
 * (StableHLO holds it as array<i64>), AN_BOOLS (array<i1>), AN_ONES (all ones by default in
 * windowed ops). */
#define AN_I64 1u
#define AN_BOOLS 2u
#define AN_ONES 4u
#define ATTR_NAMES(X)                      \
  X(accumulation_type, 0)                  \
  X(allow_imprecise_accumulation, 0)       \
  X(api_version, 0)                        \
  X(arg_attrs, 0)                          \
  X(backend_config, 0)                     \
  X(base_dilations, AN_I64 | AN_ONES)      \
  X(broadcast_dimensions, AN_I64)          \
  X(broadcast_sizes, AN_I64)               \
  X(called_computations, 0)                \
  X(callee, 0)                             \
  X(channel_id, 0)                         \
  X(channel_type, 0)                       \
  X(collapsed_slice_dims, 0)               \
  X(compare_type, 0)                       \
  X(composite_attributes, 0)               \
  X(decomposition, 0)                      \
  X(dimension, 0)                          \
  X(dimensions, AN_I64)                    \
  X(edge_padding_high, AN_I64)             \
  X(edge_padding_low, AN_I64)              \
  X(fft_length, AN_I64)                    \
  X(function_type, 0)                      \
  X(has_dynamic_root, 0)                   \
  X(has_side_effect, 0)                    \
  X(index_vector_dim, 0)                   \
  X(indices_are_sorted, 0)                 \
  X(infeed_config, 0)                      \
  X(input_batch_dimension, 0)              \
  X(input_batching_dims, 0)                \
  X(input_feature_dimension, 0)            \
  X(input_spatial_dimensions, 0)           \
  X(inserted_window_dims, 0)               \
  X(interior_padding, AN_I64)              \
  X(is_host_transfer, 0)                   \
  X(is_stable, 0)                          \
  X(kernel_input_feature_dimension, 0)     \
  X(kernel_output_feature_dimension, 0)    \
  X(kernel_spatial_dimensions, 0)          \
  X(known_expanding_dimensions, AN_I64)    \
  X(known_nonexpanding_dimensions, AN_I64) \
  X(layout, 0)                             \
  X(lhs_batching_dimensions, 0)            \
  X(lhs_component_count, 0)                \
  X(lhs_contracting_dimensions, 0)         \
  X(lhs_dilation, AN_I64 | AN_ONES)        \
  X(lhs_precision_type, 0)                 \
  X(limit_indices, AN_I64)                 \
  X(lower, 0)                              \
  X(num_primitive_operations, 0)           \
  X(offset_dims, 0)                        \
  X(operand_batching_dims, 0)              \
  X(operand_layouts, 0)                    \
  X(outfeed_config, 0)                     \
  X(output_batch_dimension, 0)             \
  X(output_feature_dimension, 0)           \
  X(output_operand_aliases, 0)             \
  X(output_spatial_dimensions, 0)          \
  X(padding, 0)                            \
  X(permutation, AN_I64)                   \
  X(precision_config, 0)                   \
  X(res_attrs, 0)                          \
  X(result_accuracy, 0)                    \
  X(result_layouts, 0)                     \
  X(result_tilings, 0)                     \
  X(rhs_batching_dimensions, 0)            \
  X(rhs_component_count, 0)                \
  X(rhs_contracting_dimensions, 0)         \
  X(rhs_dilation, AN_I64 | AN_ONES)        \
  X(rhs_precision_type, 0)                 \
  X(scatter_dims_to_operand_dims, 0)       \
  X(scatter_indices_batching_dims, 0)      \
  X(slice_sizes, AN_I64)                   \
  X(source_target_pairs, 0)                \
  X(start_index_map, 0)                    \
  X(start_indices, AN_I64)                 \
  X(start_indices_batching_dims, 0)        \
  X(strides, AN_I64)                       \
  X(sym_name, 0)                           \
  X(sym_visibility, 0)                     \
  X(unique_indices, 0)                     \
  X(update_window_dims, 0)                 \
  X(use_global_device_ids, 0)              \
  X(version, 0)                            \
  X(window_dilations, AN_I64 | AN_ONES)    \
  X(window_dimensions, AN_I64)             \
  X(window_reversal, AN_BOOLS)             \
  X(window_strides, AN_I64 | AN_ONES)

typedef enum attr_id {
  A_NONE = 0, /* any other name */
#define X(n, f) A_##n,
  ATTR_NAMES(X)
#undef X
      A_COUNT
} attr_id_t;

static const char *const kAttrName[A_COUNT] = {"",
#define X(n, f) #n,
                                               ATTR_NAMES(X)
#undef X
};
static const uint8_t kAttrFlags[A_COUNT] = {0,
#define X(n, f) f,
                                            ATTR_NAMES(X)
#undef X
};

static attr_id_t attr_id_of_string(const char *name) {
  int lo = 1, hi = A_COUNT;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(kAttrName[mid], name);
    if (c == 0) return (attr_id_t)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return A_NONE;
}

/* The op kinds the upgrade treats specially. */
typedef enum op_kind {
  K_OTHER,
  K_FUNC,
  K_CALL,
  K_RETURN,
  K_DOT_GENERAL,
  K_GATHER, /* and dynamic_gather */
  K_SCATTER,
  K_CONVOLUTION,
  K_DYNAMIC_CONV,
  K_REDUCE_WINDOW,
  K_SELECT_AND_SCATTER,
  K_CHOLESKY,
  K_SORT,
  K_COMPOSITE,
  K_SEND_RECV,
} op_kind_t;

static op_kind_t op_kind_of(const char *base) {
  static const struct {
    const char *name;
    op_kind_t kind;
  } kKinds[] = {{"func", K_FUNC},
                {"call", K_CALL},
                {"return", K_RETURN},
                {"dot_general", K_DOT_GENERAL},
                {"gather", K_GATHER},
                {"dynamic_gather", K_GATHER},
                {"scatter", K_SCATTER},
                {"convolution", K_CONVOLUTION},
                {"dynamic_conv", K_DYNAMIC_CONV},
                {"reduce_window", K_REDUCE_WINDOW},
                {"select_and_scatter", K_SELECT_AND_SCATTER},
                {"cholesky", K_CHOLESKY},
                {"sort", K_SORT},
                {"composite", K_COMPOSITE},
                {"send", K_SEND_RECV},
                {"recv", K_SEND_RECV}};
  for (size_t i = 0; i < sizeof(kKinds) / sizeof(kKinds[0]); i++) {
    if (kKinds[i].name[0] == base[0] && strcmp(kKinds[i].name, base) == 0) return kKinds[i].kind;
  }
  return K_OTHER;
}

/* What an op name resolves to, once per op-name pointer. */
typedef struct op_info {
  const char *from;
  const char *to;    /* the upgraded name (K_RETURN: depends on the parent) */
  const char *error; /* why the op cannot be upgraded, or NULL */
  bool vhlo;         /* a vhlo.* op */
  int64_t lo;        /* the first VHLO version that has the op */
  op_kind_t kind;
} op_info_t;

struct name_slot {
  const char *from;
  attr_id_t id;
};

typedef struct upgrade_ctx {
  kiln_bc_t *bc;
  /* open addressing by pointer; capacities are powers of two */
  op_info_t *ops;
  size_t ops_n, ops_cap;
  struct name_slot *names;
  size_t names_n, names_cap;
  uint8_t *ids; /* scratch: the ids of the current op's attributes */
  size_t ids_cap;
} upgrade_ctx_t;

static size_t ptr_hash(const void *p) {
  return (size_t)((((uintptr_t)p >> 3) * 0x9E3779B97F4A7C15ull) >> 17);
}

static attr_id_t attr_id(upgrade_ctx_t *c, const char *name) {
  if (name == NULL) return A_NONE;
  if (2 * (c->names_n + 1) > c->names_cap) {
    struct name_slot *old = c->names;
    size_t old_cap = c->names_cap;
    c->names_cap = old_cap ? old_cap * 2 : 256;
    c->names = kiln_calloc(c->names_cap, sizeof(*c->names));
    for (size_t i = 0; i < old_cap; i++) {
      if (old[i].from == NULL) continue;
      size_t h = ptr_hash(old[i].from) & (c->names_cap - 1);
      while (c->names[h].from != NULL) h = (h + 1) & (c->names_cap - 1);
      c->names[h] = old[i];
    }
    kiln_free(old);
  }
  size_t h = ptr_hash(name) & (c->names_cap - 1);
  while (c->names[h].from != NULL) {
    if (c->names[h].from == name) return c->names[h].id;
    h = (h + 1) & (c->names_cap - 1);
  }
  c->names[h].from = name;
  c->names[h].id = attr_id_of_string(name);
  c->names_n++;
  return c->names[h].id;
}

/* The attribute with id `id` of `op` (by the ids computed for it), consumed. */
static const kiln_mlir_attr_t *take(upgrade_ctx_t *c, kiln_mlir_op_t *op, attr_id_t id) {
  for (int32_t i = 0; i < op->num_attrs; i++) {
    if (c->ids[i] == id && op->attrs[i].name != NULL) {
      const kiln_mlir_attr_t *v = op->attrs[i].value;
      op->attrs[i].name = NULL; /* consumed */
      return v;
    }
  }
  return NULL;
}

static const kiln_mlir_attr_t *find(upgrade_ctx_t *c, const kiln_mlir_op_t *op, attr_id_t id) {
  for (int32_t i = 0; i < op->num_attrs; i++) {
    if (c->ids[i] == id && op->attrs[i].name != NULL) return op->attrs[i].value;
  }
  return NULL;
}

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

static kiln_status bad(kiln_mlir_op_t *op, const char *what) {
  return KILN_ERR_INVALID("MLIR bytecode: upgrading %s: %s", op->name, what);
}

/* A struct from the named attributes of `op` (each consumed); empty lists are left out, as
 * StableHLO's printer leaves them out. `fields` ends with A_NONE. */
static void make_struct(upgrade_ctx_t *c, kiln_mlir_op_t *op, const char *sname,
                        const attr_id_t *fields, const kiln_mlir_attr_t **out) {
  kiln_mlir_named_attr_t f[16];
  int32_t n = 0;
  bool any = false;
  for (int i = 0; fields[i] != A_NONE; i++) {
    const kiln_mlir_attr_t *v = take(c, op, fields[i]);
    if (v == NULL) continue;
    any = true;
    v = i64s(c->bc, v);
    if (is_empty_array(v)) continue;
    f[n].name = kAttrName[fields[i]];
    f[n].value = v;
    n++;
  }
  if (!any) {
    *out = NULL;
    return;
  }
  kiln_mlir_attr_t *a = kiln_bc_new_attr(c->bc, KILN_MLIR_ATTR_STRUCT);
  a->dialect = sname;
  a->num_elements = n;
  a->fields = kiln_arena_alloc(c->bc->arena, (size_t)(n ? n : 1) * sizeof(*a->fields));
  memcpy(a->fields, f, (size_t)n * sizeof(*f));
  *out = a;
}

static const attr_id_t kDotFields[] = {A_lhs_batching_dimensions, A_rhs_batching_dimensions,
                                       A_lhs_contracting_dimensions, A_rhs_contracting_dimensions,
                                       A_NONE};
static const attr_id_t kGatherFields[] = {A_offset_dims,
                                          A_collapsed_slice_dims,
                                          A_operand_batching_dims,
                                          A_start_indices_batching_dims,
                                          A_start_index_map,
                                          A_index_vector_dim,
                                          A_NONE};
static const attr_id_t kScatterFields[] = {A_update_window_dims,
                                           A_inserted_window_dims,
                                           A_input_batching_dims,
                                           A_scatter_indices_batching_dims,
                                           A_scatter_dims_to_operand_dims,
                                           A_index_vector_dim,
                                           A_NONE};
static const attr_id_t kConvFields[] = {
    A_input_batch_dimension,           A_input_feature_dimension,
    A_input_spatial_dimensions,        A_kernel_input_feature_dimension,
    A_kernel_output_feature_dimension, A_kernel_spatial_dimensions,
    A_output_batch_dimension,          A_output_feature_dimension,
    A_output_spatial_dimensions,       A_NONE};
static const attr_id_t kAlgorithmFields[] = {A_lhs_precision_type,
                                             A_rhs_precision_type,
                                             A_accumulation_type,
                                             A_lhs_component_count,
                                             A_rhs_component_count,
                                             A_num_primitive_operations,
                                             A_allow_imprecise_accumulation,
                                             A_NONE};

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

static kiln_status upgrade_attrs(upgrade_ctx_t *c, kiln_mlir_op_t *op, op_kind_t kind) {
  kiln_bc_t *bc = c->bc;
  if ((size_t)op->num_attrs > c->ids_cap) {
    kiln_free(c->ids);
    c->ids_cap = (size_t)op->num_attrs * 2;
    c->ids = kiln_malloc(c->ids_cap);
  }
  for (int32_t i = 0; i < op->num_attrs; i++) c->ids[i] = (uint8_t)attr_id(c, op->attrs[i].name);
  /* each upgraded attribute replaces at least one of the op's (a channel handle or a
   * dimension struct several), so this many never grows */
  attr_list_t out = {.bc = bc, .first_cap = op->num_attrs + 4};
  const kiln_mlir_attr_t *v, *s;
  switch (kind) {
    case K_FUNC:
      if ((v = take(c, op, A_sym_name))) push(&out, "sym_name", v);
      if ((v = take(c, op, A_function_type))) push(&out, "function_type", v);
      if ((v = take(c, op, A_sym_visibility)) && !is_empty_string(v) &&
          !(v->kind == KILN_MLIR_ATTR_STRING && strcmp(v->str, "public") == 0)) {
        push(&out, "sym_visibility", v);
      }
      if ((v = take(c, op, A_arg_attrs)) && !all_empty_dicts(v)) push(&out, "arg_attrs", v);
      if ((v = take(c, op, A_res_attrs)) && !all_empty_dicts(v)) push(&out, "res_attrs", v);
      break;
    case K_CALL:
      if ((v = take(c, op, A_callee))) push(&out, "callee", symbol(bc, v));
      break;
    case K_DOT_GENERAL: {
      make_struct(c, op, "stablehlo.dot", kDotFields, &s);
      if (s) push(&out, "dot_dimension_numbers", s);
      if ((v = take(c, op, A_precision_config)) && !all_default_precision(v))
        push(&out, "precision_config", v);
      const kiln_mlir_attr_t *lhs_type = find(c, op, A_lhs_precision_type);
      if (lhs_type != NULL && !is_none_type(lhs_type)) {
        make_struct(c, op, "stablehlo.dot_algorithm", kAlgorithmFields, &s);
        if (s) push(&out, "algorithm", s);
      } else {
        for (int i = 0; kAlgorithmFields[i] != A_NONE; i++) take(c, op, kAlgorithmFields[i]);
      }
      break;
    }
    case K_GATHER:
      make_struct(c, op, "stablehlo.gather", kGatherFields, &s);
      if (s) push(&out, "dimension_numbers", s);
      break;
    case K_SCATTER:
      make_struct(c, op, "stablehlo.scatter", kScatterFields, &s);
      if (s) push(&out, "scatter_dimension_numbers", s);
      break;
    case K_CONVOLUTION:
    case K_DYNAMIC_CONV:
      make_struct(c, op, "stablehlo.conv", kConvFields, &s);
      if (s) push(&out, "dimension_numbers", s);
      if (kind == K_DYNAMIC_CONV) take(c, op, A_padding); /* an operand since 0.20 */
      break;
    default:
      break;
  }
  /* Channels. */
  const kiln_mlir_attr_t *cid = take(c, op, A_channel_id);
  const kiln_mlir_attr_t *ctype = take(c, op, A_channel_type);
  if (cid != NULL) {
    if (cid->kind != KILN_MLIR_ATTR_INTEGER) return bad(op, "channel_id is not an integer");
    if (ctype != NULL && ctype->kind != KILN_MLIR_ATTR_INTEGER)
      return bad(op, "channel_type is not an integer");
    if (cid->i != 0 || (ctype != NULL && ctype->i != 0))
      push(&out, "channel_handle", channel_handle(bc, cid->i, ctype ? ctype->i : 0));
  }
  /* The rest, in their order, with defaults dropped. */
  bool windowed = kind == K_CONVOLUTION || kind == K_DYNAMIC_CONV || kind == K_REDUCE_WINDOW ||
                  kind == K_SELECT_AND_SCATTER;
  for (int32_t i = 0; i < op->num_attrs; i++) {
    const char *name = op->attrs[i].name;
    v = op->attrs[i].value;
    if (name == NULL) continue;
    attr_id_t id = (attr_id_t)c->ids[i];
    unsigned flags = kAttrFlags[id];
    if (flags & (AN_I64 | AN_BOOLS)) {
      const kiln_mlir_attr_t *a = to_dense_array(bc, v, (flags & AN_BOOLS) != 0);
      if (a) v = a;
    }
    if (windowed && (flags & AN_ONES) && all_ints(v, 1)) continue;
    if (windowed && (id == A_padding || id == A_window_reversal) && all_ints(v, 0)) continue;
    bool skip = false;
    switch (id) {
      case A_precision_config:
        skip = all_default_precision(v) || is_empty_array(v);
        break;
      case A_use_global_device_ids:
      case A_has_dynamic_root:
        if (v->kind == KILN_MLIR_ATTR_BOOL) {
          if (!v->b) skip = true;
          v = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_UNIT);
        }
        break;
      case A_compare_type:
        skip = is_enum(v, "NOTYPE");
        break;
      case A_indices_are_sorted:
      case A_unique_indices:
      case A_is_host_transfer:
      case A_has_side_effect:
      case A_is_stable:
        skip = is_false(v);
        break;
      case A_backend_config:
        skip = is_empty_string(v) || is_empty_array(v);
        break;
      case A_infeed_config:
      case A_outfeed_config:
        skip = is_empty_string(v);
        break;
      case A_called_computations:
        skip = is_empty_array(v);
        v = strings_to_symbols(bc, v);
        break;
      case A_output_operand_aliases:
      case A_result_tilings:
      case A_composite_attributes:
      case A_layout:
      case A_known_expanding_dimensions:
      case A_known_nonexpanding_dimensions:
        skip = is_empty_array(v);
        break;
      case A_operand_layouts:
      case A_result_layouts:
        /* Layouts come in pairs: absent when both lists are empty. */
        skip = is_empty_array(find(c, op, A_operand_layouts)) &&
               is_empty_array(find(c, op, A_result_layouts));
        break;
      case A_lower:
        skip = kind == K_CHOLESKY && is_false(v);
        break;
      case A_dimension:
        skip = kind == K_SORT && is_int(v, -1);
        break;
      case A_api_version:
        skip = is_int(v, 1);
        break;
      case A_version:
        skip = kind == K_COMPOSITE && is_int(v, 0);
        break;
      case A_decomposition:
        v = symbol(bc, v);
        break;
      case A_result_accuracy:
        skip = is_default_accuracy(v);
        break;
      case A_source_target_pairs:
        skip = kind == K_SEND_RECV && is_empty_elements(v);
        break;
      default:
        break;
    }
    if (skip) continue;
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

static void resolve_op_name(upgrade_ctx_t *c, op_info_t *info, const char *name) {
  info->from = name;
  info->vhlo = strncmp(name, "vhlo.", 5) == 0;
  if (!info->vhlo) return;
  int64_t hi;
  char base[64];
  if (kiln_bc_vhlo_op_attrs(name + 5, &info->lo, &hi) == NULL) {
    info->lo = 0;
    info->error = "not a VHLO op kiln knows";
  } else if (!strip_version(name + 5, base, sizeof(base))) {
    info->error = "op name lacks a version suffix";
  } else {
    info->kind = op_kind_of(base);
    info->to = info->kind == K_FUNC   ? "func.func"
               : info->kind == K_CALL ? "func.call"
                                      : kiln_bc_dotted(c->bc, "stablehlo", base);
  }
}

/* The op_info of an op name (by address: one per op-name table entry). */
static const op_info_t *op_info(upgrade_ctx_t *c, const char *name) {
  if (2 * (c->ops_n + 1) > c->ops_cap) {
    op_info_t *old = c->ops;
    size_t old_cap = c->ops_cap;
    c->ops_cap = old_cap ? old_cap * 2 : 128;
    c->ops = kiln_calloc(c->ops_cap, sizeof(*c->ops));
    for (size_t i = 0; i < old_cap; i++) {
      if (old[i].from == NULL) continue;
      size_t h = ptr_hash(old[i].from) & (c->ops_cap - 1);
      while (c->ops[h].from != NULL) h = (h + 1) & (c->ops_cap - 1);
      c->ops[h] = old[i];
    }
    kiln_free(old);
  }
  size_t h = ptr_hash(name) & (c->ops_cap - 1);
  while (c->ops[h].from != NULL) {
    if (c->ops[h].from == name) return &c->ops[h];
    h = (h + 1) & (c->ops_cap - 1);
  }
  resolve_op_name(c, &c->ops[h], name);
  c->ops_n++;
  return &c->ops[h];
}

static kiln_status upgrade_op(upgrade_ctx_t *c, kiln_mlir_op_t *op, const kiln_mlir_op_t *parent,
                              int depth);

static kiln_status upgrade_regions(upgrade_ctx_t *c, kiln_mlir_op_t *op, int depth) {
  for (int32_t r = 0; r < op->num_regions; r++) {
    for (int32_t b = 0; b < op->regions[r].num_blocks; b++) {
      kiln_mlir_block_t *blk = &op->regions[r].blocks[b];
      for (int32_t i = 0; i < blk->num_ops; i++)
        KILN_RETURN_IF_ERROR_PLAIN(upgrade_op(c, blk->ops[i], op, depth + 1));
    }
  }
  return KILN_STATUS_OK;
}

static const char kFuncFunc[] = "func.func";

static kiln_status upgrade_op(upgrade_ctx_t *c, kiln_mlir_op_t *op, const kiln_mlir_op_t *parent,
                              int depth) {
  if (depth > KILN_BC_MAX_DEPTH) return bad(op, "nested too deeply");
  const op_info_t *info = op_info(c, op->name);
  if (info->vhlo) {
    if (info->error != NULL && info->lo == 0) return bad(op, info->error); /* unknown */
    int64_t lo = info->lo, have = c->bc->vhlo_version;
    if (have != 0 && have < lo) {
      return KILN_ERR_INVALID(
          "MLIR bytecode: %s needs VHLO %lld.%lld.%lld, the file declares %lld.%lld.%lld", op->name,
          (long long)(lo / 10000), (long long)(lo / 100 % 100), (long long)(lo % 100),
          (long long)(have / 10000), (long long)(have / 100 % 100), (long long)(have % 100));
    }
    if (info->error != NULL) return bad(op, info->error);
    KILN_RETURN_IF_ERROR_PLAIN(upgrade_attrs(c, op, info->kind));
    if (info->kind == K_FUNC) {
      op->name = kFuncFunc;
    } else if (info->kind == K_RETURN) {
      op->name =
          parent != NULL && (parent->name == kFuncFunc || strcmp(parent->name, kFuncFunc) == 0)
              ? "func.return"
              : "stablehlo.return";
    } else {
      op->name = info->to;
    }
  }
  return upgrade_regions(c, op, depth);
}

kiln_status kiln_bc_upgrade(kiln_bc_t *bc) {
  kiln_mlir_module_t *m = bc->m;
  upgrade_ctx_t c = {.bc = bc};
  kiln_status st = KILN_STATUS_OK;
  for (int32_t i = 0; i < m->body.num_ops && kiln_status_is_ok(st); i++) {
    st = upgrade_op(&c, m->body.ops[i], NULL, 0);
  }
  kiln_free(c.ops);
  kiln_free(c.names);
  kiln_free(c.ids);
  return st;
}
