/* Canonical HLO text for modules, computations and instructions.
 *
 * The format is the one the parser reads back (see the conventions in ir.h's users):
 * print(parse(print(parse(x)))) == print(parse(x)). Decoded attributes print in one
 * fixed order, then the raw attributes in their stored order; names print without `%`;
 * operands print untyped; shapes always print their layout when they have one. */
#include <inttypes.h>
#include <string.h>

#include "compiler/hlo/ir.h"

/* ---- small formatting helpers ---- */

/* Appends `s` with C-style escapes for `"`, `\` and control characters (\n, \t, \r,
 * other control bytes as three-digit octal); bytes >= 0x80 pass through (UTF-8). */
static void append_escaped(kiln_strbuf_t *b, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': kiln_strbuf_append(b, "\\\""); break;
      case '\\': kiln_strbuf_append(b, "\\\\"); break;
      case '\n': kiln_strbuf_append(b, "\\n"); break;
      case '\t': kiln_strbuf_append(b, "\\t"); break;
      case '\r': kiln_strbuf_append(b, "\\r"); break;
      default:
        if (*p < 0x20 || *p == 0x7F) kiln_strbuf_printf(b, "\\%03o", *p);
        else kiln_strbuf_append_char(b, (char)*p);
    }
  }
}

static void append_quoted(kiln_strbuf_t *b, const char *s) {
  kiln_strbuf_append_char(b, '"');
  append_escaped(b, s);
  kiln_strbuf_append_char(b, '"');
}

/* {0,1,2}: no spaces, as XLA prints dimension lists. */
static void append_i64_list(kiln_strbuf_t *b, const kiln_i64_list_t *l) {
  kiln_strbuf_append_char(b, '{');
  for (int i = 0; i < l->n; i++) {
    if (i) kiln_strbuf_append_char(b, ',');
    kiln_strbuf_printf(b, "%" PRId64, l->v[i]);
  }
  kiln_strbuf_append_char(b, '}');
}

/* `, key={...}` */
static void attr_list(kiln_strbuf_t *b, const char *key, const kiln_i64_list_t *l) {
  kiln_strbuf_printf(b, ", %s=", key);
  append_i64_list(b, l);
}

static void attr_list_if_any(kiln_strbuf_t *b, const char *key, const kiln_i64_list_t *l) {
  if (l->n > 0) attr_list(b, key, l);
}

/* Joins one int64 field of `n` window dims with 'x'. */
#define APPEND_X_JOINED(b, dims, n, fmt, ...)            \
  do {                                                   \
    for (int i_ = 0; i_ < (n); i_++) {                   \
      if (i_) kiln_strbuf_append_char((b), 'x');         \
      kiln_strbuf_printf((b), fmt, __VA_ARGS__);         \
    }                                                    \
  } while (0)

static void append_window(kiln_strbuf_t *b, const kiln_window_dim_t *w, int n) {
  bool stride = false, pad = false, lhs = false, rhs = false, rev = false;
  for (int i = 0; i < n; i++) {
    stride |= w[i].stride != 1;
    pad |= w[i].pad_lo != 0 || w[i].pad_hi != 0;
    lhs |= w[i].lhs_dilate != 1;
    rhs |= w[i].rhs_dilate != 1;
    rev |= w[i].reversal;
  }
  kiln_strbuf_append(b, "{size=");
  APPEND_X_JOINED(b, w, n, "%" PRId64, w[i_].size);
  if (stride) {
    kiln_strbuf_append(b, " stride=");
    APPEND_X_JOINED(b, w, n, "%" PRId64, w[i_].stride);
  }
  if (pad) {
    kiln_strbuf_append(b, " pad=");
    APPEND_X_JOINED(b, w, n, "%" PRId64 "_%" PRId64, w[i_].pad_lo, w[i_].pad_hi);
  }
  if (lhs) {
    kiln_strbuf_append(b, " lhs_dilate=");
    APPEND_X_JOINED(b, w, n, "%" PRId64, w[i_].lhs_dilate);
  }
  if (rhs) {
    kiln_strbuf_append(b, " rhs_dilate=");
    APPEND_X_JOINED(b, w, n, "%" PRId64, w[i_].rhs_dilate);
  }
  if (rev) {
    kiln_strbuf_append(b, " rhs_reversal=");
    APPEND_X_JOINED(b, w, n, "%d", w[i_].reversal ? 1 : 0);
  }
  kiln_strbuf_append_char(b, '}');
}

static void append_padding(kiln_strbuf_t *b, const kiln_pad_dim_t *p, int n) {
  bool interior = false;
  for (int i = 0; i < n; i++) interior |= p[i].interior != 0;
  for (int i = 0; i < n; i++) {
    if (i) kiln_strbuf_append_char(b, 'x');
    kiln_strbuf_printf(b, "%" PRId64 "_%" PRId64, p[i].lo, p[i].hi);
    if (interior) kiln_strbuf_printf(b, "_%" PRId64, p[i].interior);
  }
}

/* One operand's label string: batch/feature letters and spatial digits placed at their
 * positions. Positions that nothing claims (inconsistent dnums) print as '?'. */
static void append_labels(kiln_strbuf_t *b, int64_t pos_a, char a, int64_t pos_b, char c,
                          const int64_t *spatial, int num_spatial) {
  int rank = num_spatial + 2;
  char buf[80];
  if (rank >= (int)sizeof buf) rank = (int)sizeof buf - 1;
  memset(buf, '?', (size_t)rank);
  buf[rank] = '\0';
  if (pos_a >= 0 && pos_a < rank) buf[pos_a] = a;
  if (pos_b >= 0 && pos_b < rank) buf[pos_b] = c;
  for (int i = 0; i < num_spatial; i++) {
    int64_t p = spatial ? spatial[i] : -1;
    if (p >= 0 && p < rank) buf[p] = (char)(i < 10 ? '0' + i : 'a' + (i - 10));
  }
  kiln_strbuf_append(b, buf);
}

static void append_dim_labels(kiln_strbuf_t *b, const kiln_conv_dnums_t *d) {
  append_labels(b, d->input_batch, 'b', d->input_feature, 'f', d->input_spatial,
                d->num_spatial);
  kiln_strbuf_append_char(b, '_');
  append_labels(b, d->kernel_input_feature, 'i', d->kernel_output_feature, 'o',
                d->kernel_spatial, d->num_spatial);
  kiln_strbuf_append(b, "->");
  append_labels(b, d->output_batch, 'b', d->output_feature, 'f', d->output_spatial,
                d->num_spatial);
}

static const char *cmp_dir_name(kiln_cmp_dir_t d) {
  switch (d) {
    case KILN_CMP_EQ: return "EQ";
    case KILN_CMP_NE: return "NE";
    case KILN_CMP_LT: return "LT";
    case KILN_CMP_LE: return "LE";
    case KILN_CMP_GT: return "GT";
    case KILN_CMP_GE: return "GE";
    default: return NULL;
  }
}

static const char *cmp_type_name(kiln_cmp_type_t t) {
  switch (t) {
    case KILN_CMP_TYPE_FLOAT: return "FLOAT";
    case KILN_CMP_TYPE_TOTALORDER: return "TOTALORDER";
    case KILN_CMP_TYPE_SIGNED: return "SIGNED";
    case KILN_CMP_TYPE_UNSIGNED: return "UNSIGNED";
    default: return NULL;
  }
}

const char *kiln_hlo_fusion_kind_name(kiln_hlo_fusion_kind_t k) {
  switch (k) {
    case KILN_HLO_FUSION_LOOP:
      return "kLoop";
    case KILN_HLO_FUSION_INPUT:
      return "kInput";
    case KILN_HLO_FUSION_OUTPUT:
      return "kOutput";
    case KILN_HLO_FUSION_CUSTOM:
      return "kCustom";
    default: return NULL;
  }
}

static const char *api_version_name(int64_t v) {
  switch (v) {
    case 1: return "API_VERSION_ORIGINAL";
    case 2: return "API_VERSION_STATUS_RETURNING";
    case 3: return "API_VERSION_STATUS_RETURNING_UNIFIED";
    case 4: return "API_VERSION_TYPED_FFI";
    default: return NULL;
  }
}

static const char *instr_name(const kiln_hlo_instruction_t *i) {
  return i && i->name ? i->name : "<null>";
}

static const char *comp_name(const kiln_hlo_computation_t *c) {
  return c && c->name ? c->name : "<null>";
}

/* ---- instructions ---- */

static void print_operands(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  kiln_strbuf_append_char(b, '(');
  switch (in->opcode) {
    case KILN_OP_PARAMETER:
      kiln_strbuf_printf(b, "%" PRId64, in->parameter_number);
      break;
    case KILN_OP_CONSTANT:
      if (in->literal) kiln_literal_print(b, in->literal);
      else kiln_strbuf_append(b, "{...}");
      break;
    default:
      for (int i = 0; i < in->num_operands; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        kiln_strbuf_append(b, instr_name(in->operands[i]));
      }
  }
  kiln_strbuf_append_char(b, ')');
}

static void print_conv_and_dot_attrs(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  if (in->has_conv_dnums) {
    kiln_strbuf_append(b, ", dim_labels=");
    append_dim_labels(b, &in->conv_dnums);
  }
  if (in->feature_group_count != 0)
    kiln_strbuf_printf(b, ", feature_group_count=%" PRId64, in->feature_group_count);
  if (in->batch_group_count != 0)
    kiln_strbuf_printf(b, ", batch_group_count=%" PRId64, in->batch_group_count);
  attr_list_if_any(b, "lhs_batch_dims", &in->dot_dnums.lhs_batch);
  attr_list_if_any(b, "lhs_contracting_dims", &in->dot_dnums.lhs_contracting);
  attr_list_if_any(b, "rhs_batch_dims", &in->dot_dnums.rhs_batch);
  attr_list_if_any(b, "rhs_contracting_dims", &in->dot_dnums.rhs_contracting);
  if (in->num_operand_precision > 0) {
    kiln_strbuf_append(b, ", operand_precision={");
    for (int i = 0; i < in->num_operand_precision; i++) {
      if (i) kiln_strbuf_append_char(b, ',');
      kiln_strbuf_append(b, in->operand_precision[i] ? in->operand_precision[i] : "default");
    }
    kiln_strbuf_append_char(b, '}');
  }
}

static void print_gather_scatter_attrs(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  if (in->has_gather_dnums) {
    const kiln_gather_dnums_t *g = &in->gather_dnums;
    attr_list(b, "offset_dims", &g->offset_dims);
    attr_list(b, "collapsed_slice_dims", &g->collapsed_slice_dims);
    attr_list(b, "start_index_map", &g->start_index_map);
    attr_list_if_any(b, "operand_batching_dims", &g->operand_batching_dims);
    attr_list_if_any(b, "start_indices_batching_dims", &g->start_indices_batching_dims);
    kiln_strbuf_printf(b, ", index_vector_dim=%" PRId64, g->index_vector_dim);
  }
  if (in->has_gather_dnums || in->gather_slice_sizes.n > 0)
    attr_list(b, "slice_sizes", &in->gather_slice_sizes);
  if (in->has_scatter_dnums) {
    const kiln_scatter_dnums_t *s = &in->scatter_dnums;
    attr_list(b, "update_window_dims", &s->update_window_dims);
    attr_list(b, "inserted_window_dims", &s->inserted_window_dims);
    attr_list(b, "scatter_dims_to_operand_dims", &s->scatter_dims_to_operand_dims);
    attr_list_if_any(b, "input_batching_dims", &s->input_batching_dims);
    attr_list_if_any(b, "scatter_indices_batching_dims", &s->scatter_indices_batching_dims);
    kiln_strbuf_printf(b, ", index_vector_dim=%" PRId64, s->index_vector_dim);
  }
  if (in->indices_are_sorted) kiln_strbuf_append(b, ", indices_are_sorted=true");
  if (in->unique_indices) kiln_strbuf_append(b, ", unique_indices=true");
}

static void print_called(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  for (int g = 0; g < in->num_called_groups; g++) {
    const kiln_called_group_t *grp = &in->called_groups[g];
    kiln_strbuf_printf(b, ", %s=", grp->key);
    if (grp->braced || grp->n != 1) kiln_strbuf_append_char(b, '{');
    for (int i = 0; i < grp->n; i++) {
      if (i) kiln_strbuf_append(b, ", ");
      kiln_strbuf_append(b, comp_name(grp->comps[i]));
    }
    if (grp->braced || grp->n != 1) kiln_strbuf_append_char(b, '}');
  }
}

static void print_misc_attrs(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  if (in->custom_call_target) {
    kiln_strbuf_append(b, ", custom_call_target=");
    append_quoted(b, in->custom_call_target);
  }
  const char *api = in->api_version_text ? in->api_version_text
                                         : api_version_name(in->api_version);
  if (api) kiln_strbuf_printf(b, ", api_version=%s", api);
  if (in->is_stable) kiln_strbuf_append(b, ", is_stable=true");
  if (in->opcode == KILN_OP_REDUCE_PRECISION || in->exponent_bits || in->mantissa_bits)
    kiln_strbuf_printf(b, ", exponent_bits=%" PRId64 ", mantissa_bits=%" PRId64,
                       in->exponent_bits, in->mantissa_bits);
  if (in->fft_type) kiln_strbuf_printf(b, ", fft_type=%s", in->fft_type);
  attr_list_if_any(b, "fft_length", &in->fft_length);
  if (in->rng_distribution) kiln_strbuf_printf(b, ", distribution=%s", in->rng_distribution);
  if (in->rng_algorithm) kiln_strbuf_printf(b, ", algorithm=%s", in->rng_algorithm);
  /* triangular-solve / cholesky: booleans print when set (lower also when written) */
  if (in->left_side) kiln_strbuf_append(b, ", left_side=true");
  if (in->has_lower || in->lower)
    kiln_strbuf_printf(b, ", lower=%s", in->lower ? "true" : "false");
  if (in->unit_diagonal) kiln_strbuf_append(b, ", unit_diagonal=true");
  if (in->transpose_a) kiln_strbuf_printf(b, ", transpose_a=%s", in->transpose_a);
  if (in->channel_id != 0) kiln_strbuf_printf(b, ", channel_id=%" PRId64, in->channel_id);
  if (in->replica_groups) kiln_strbuf_printf(b, ", replica_groups=%s", in->replica_groups);
  if (in->use_global_device_ids) kiln_strbuf_append(b, ", use_global_device_ids=true");
  if (in->constrain_layout) kiln_strbuf_append(b, ", constrain_layout=true");
  if (in->opcode == KILN_OP_TOPK)
    kiln_strbuf_printf(b, ", k=%" PRId64 ", largest=%s", in->k, in->largest ? "true" : "false");
}

static void print_tail_attrs(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  if (in->num_control_predecessors > 0) {
    kiln_strbuf_append(b, ", control-predecessors={");
    for (int i = 0; i < in->num_control_predecessors; i++) {
      if (i) kiln_strbuf_append(b, ", ");
      kiln_strbuf_append(b, instr_name(in->control_predecessors[i]));
    }
    kiln_strbuf_append_char(b, '}');
  }
  if (in->backend_config_form != KILN_BACKEND_CONFIG_NONE && in->backend_config) {
    kiln_strbuf_append(b, ", backend_config=");
    if (in->backend_config_form == KILN_BACKEND_CONFIG_STRING)
      append_quoted(b, in->backend_config);
    else
      kiln_strbuf_append(b, in->backend_config);
  }
  for (int i = 0; i < in->num_raw_attrs; i++)
    kiln_strbuf_printf(b, ", %s=%s", in->raw_attrs[i].key,
                       in->raw_attrs[i].value ? in->raw_attrs[i].value : "");
}

void kiln_hlo_instruction_print(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  if (in->parent && in->parent->root == in) kiln_strbuf_append(b, "ROOT ");
  kiln_strbuf_printf(b, "%s = ", instr_name(in));
  if (in->shape) kiln_shape_print(b, in->shape, true);
  else kiln_strbuf_append(b, "()");
  kiln_strbuf_printf(b, " %s", kiln_hlo_opcode_name(in->opcode));
  print_operands(b, in);

  if (in->opcode == KILN_OP_GET_TUPLE_ELEMENT)
    kiln_strbuf_printf(b, ", index=%" PRId64, in->tuple_index);
  if (in->has_dimensions) attr_list(b, "dimensions", &in->dimensions);
  if (in->opcode == KILN_OP_IOTA)
    kiln_strbuf_printf(b, ", iota_dimension=%" PRId64, in->iota_dimension);
  if (in->opcode == KILN_OP_SLICE || in->num_slice_dims > 0) {
    kiln_strbuf_append(b, ", slice={");
    for (int i = 0; i < in->num_slice_dims; i++) {
      const kiln_slice_dim_t *s = &in->slice[i];
      if (i) kiln_strbuf_append(b, ", ");
      kiln_strbuf_printf(b, "[%" PRId64 ":%" PRId64, s->start, s->limit);
      if (s->stride != 1) kiln_strbuf_printf(b, ":%" PRId64, s->stride);
      kiln_strbuf_append_char(b, ']');
    }
    kiln_strbuf_append_char(b, '}');
  }
  if (in->opcode == KILN_OP_DYNAMIC_SLICE || in->dynamic_slice_sizes.n > 0)
    attr_list(b, "dynamic_slice_sizes", &in->dynamic_slice_sizes);
  if (in->num_pad_dims > 0) {
    kiln_strbuf_append(b, ", padding=");
    append_padding(b, in->padding, in->num_pad_dims);
  }
  if (in->num_window_dims > 0) {
    kiln_strbuf_append(b, ", window=");
    append_window(b, in->window, in->num_window_dims);
  }
  print_conv_and_dot_attrs(b, in);
  print_gather_scatter_attrs(b, in);
  const char *dir = cmp_dir_name(in->comparison_direction);
  if (dir) kiln_strbuf_printf(b, ", direction=%s", dir);
  const char *ctype = cmp_type_name(in->comparison_type);
  if (ctype) kiln_strbuf_printf(b, ", type=%s", ctype);
  const char *kind = kiln_hlo_fusion_kind_name(in->fusion_kind);
  if (!kind) kind = in->fusion_kind_text;
  if (kind) kiln_strbuf_printf(b, ", kind=%s", kind);
  print_called(b, in);
  print_misc_attrs(b, in);
  print_tail_attrs(b, in);
}

/* ---- computations and modules ---- */

static const kiln_hlo_instruction_t *root_of(const kiln_hlo_computation_t *c) {
  if (c->root) return c->root;
  return c->instructions.len ? c->instructions.data[c->instructions.len - 1] : NULL;
}

void kiln_hlo_computation_print(kiln_strbuf_t *b, const kiln_hlo_computation_t *c) {
  if (c->is_entry) kiln_strbuf_append(b, "ENTRY ");
  kiln_strbuf_printf(b, "%s (", comp_name(c));
  bool first = true;
  for (int i = 0; i < c->num_parameters; i++) {
    const kiln_hlo_instruction_t *p = c->parameters ? c->parameters[i] : NULL;
    if (!p) continue;
    if (!first) kiln_strbuf_append(b, ", ");
    first = false;
    kiln_strbuf_printf(b, "%s: ", instr_name(p));
    if (p->shape) kiln_shape_print(b, p->shape, true);
  }
  kiln_strbuf_append(b, ") -> ");
  const kiln_hlo_instruction_t *root = root_of(c);
  if (root && root->shape) kiln_shape_print(b, root->shape, true);
  else kiln_strbuf_append(b, "()");
  kiln_strbuf_append(b, " {\n");
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_strbuf_append(b, "  ");
    kiln_hlo_instruction_print(b, c->instructions.data[i]);
    kiln_strbuf_append_char(b, '\n');
  }
  kiln_strbuf_append_char(b, '}');
  if (c->trailing_attrs && c->trailing_attrs[0])
    kiln_strbuf_printf(b, ", %s", c->trailing_attrs);
  kiln_strbuf_append_char(b, '\n');
}

static void print_shape_index(kiln_strbuf_t *b, const kiln_i64_list_t *l) {
  append_i64_list(b, l);
}

void kiln_hlo_module_print(kiln_strbuf_t *b, const kiln_hlo_module_t *m) {
  kiln_strbuf_printf(b, "HloModule %s", m->name ? m->name : "module");
  if (m->has_entry_layout) {
    kiln_strbuf_append(b, ", entry_computation_layout={(");
    for (int i = 0; i < m->num_entry_layout_params; i++) {
      if (i) kiln_strbuf_append(b, ", ");
      if (m->entry_layout_params[i]) kiln_shape_print(b, m->entry_layout_params[i], true);
    }
    kiln_strbuf_append(b, ")->");
    if (m->entry_layout_result) kiln_shape_print(b, m->entry_layout_result, true);
    else kiln_strbuf_append(b, "()");
    kiln_strbuf_append_char(b, '}');
  }
  if (m->num_io_aliases > 0) {
    kiln_strbuf_append(b, ", input_output_alias={ ");
    for (int i = 0; i < m->num_io_aliases; i++) {
      const kiln_io_alias_t *a = &m->io_aliases[i];
      if (i) kiln_strbuf_append(b, ", ");
      print_shape_index(b, &a->output_index);
      kiln_strbuf_printf(b, ": (%" PRId64 ", ", a->param_number);
      print_shape_index(b, &a->param_index);
      if (a->kind) kiln_strbuf_printf(b, ", %s", a->kind);
      kiln_strbuf_append_char(b, ')');
    }
    kiln_strbuf_append(b, " }");
  }
  for (int i = 0; i < m->num_raw_attrs; i++)
    kiln_strbuf_printf(b, ", %s=%s", m->raw_attrs[i].key,
                       m->raw_attrs[i].value ? m->raw_attrs[i].value : "");
  kiln_strbuf_append(b, "\n");
  for (size_t i = 0; i < m->computations.len; i++) {
    kiln_strbuf_append_char(b, '\n');
    kiln_hlo_computation_print(b, m->computations.data[i]);
  }
}

char *kiln_hlo_module_to_string(const kiln_hlo_module_t *m) {
  kiln_strbuf_t b = {0};
  kiln_hlo_module_print(&b, m);
  return kiln_strbuf_take(&b);
}
