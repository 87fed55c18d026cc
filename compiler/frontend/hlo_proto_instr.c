/* HloInstructionProto (xla/service/hlo.proto) -> one instruction of HLO text.
 *
 * The fields are gathered first (protobuf allows any order), then printed in the syntax
 * kiln's parser reads. Field numbers are those of hlo.proto and xla_data.proto; each
 * reader below names its message. Sharding, statistics, original values and the other
 * fields kiln does not use are skipped. */
#include "compiler/frontend/hlo_proto_instr.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/frontend/literal_proto.h"
#include "compiler/frontend/shape_proto.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/opcode.h"

typedef KILN_VEC(kiln_pw_field_t) field_vec_t;

/* The gathered fields of one HloInstructionProto. */
typedef struct iproto {
  kiln_pw_field_t name, opcode, shape, metadata, literal, window, conv, padding, dot, gather,
      scatter, precision, triangular, cholesky, replication, device_list, iota_list, mesh_list,
      frontend, accuracy, outfeed_shape, ragged, fusion_kind, cmp_dir, cmp_type, target,
      backend_config, payload, infeed_config, outfeed_config, exec_thread;
  bool has_name, has_opcode, has_shape, has_metadata, has_literal, has_window, has_conv,
      has_padding, has_dot, has_gather, has_scatter, has_precision, has_triangular, has_cholesky,
      has_replication, has_device_list, has_iota_list, has_mesh_list, has_frontend, has_accuracy,
      has_outfeed_shape, has_ragged, has_fusion_kind, has_cmp_dir, has_cmp_type, has_target,
      has_backend_config, has_payload, has_infeed_config, has_outfeed_config, has_exec_thread,
      has_fft_type, has_distribution, has_rng_algorithm;
  int64_t parameter_number, tuple_index, exponent_bits, mantissa_bits, distribution, feature_index,
      channel_id, fft_type, feature_group_count, batch_group_count, delta, rng_algorithm, schedule,
      api_version, k;
  float epsilon;
  bool has_epsilon, has_feature_index, has_delta, has_prefetch;
  int64_t prefetch_index;
  bool is_host_transfer, is_stable, constrain_layout, side_effect, indices_are_sorted,
      unique_indices, use_global_device_ids, largest, is_composite;
  kiln_pw_i64_vec_t dimensions, dynamic_slice_sizes, fft_length, slice_sizes, operand_ids,
      control_ids, called_ids;
  field_vec_t slices, replica_groups, source_target, operand_shapes, aliasing;
} iproto_t;

static void iproto_free(iproto_t *p) {
  kiln_vec_free(&p->dimensions);
  kiln_vec_free(&p->dynamic_slice_sizes);
  kiln_vec_free(&p->fft_length);
  kiln_vec_free(&p->slice_sizes);
  kiln_vec_free(&p->operand_ids);
  kiln_vec_free(&p->control_ids);
  kiln_vec_free(&p->called_ids);
  kiln_vec_free(&p->slices);
  kiln_vec_free(&p->replica_groups);
  kiln_vec_free(&p->source_target);
  kiln_vec_free(&p->operand_shapes);
  kiln_vec_free(&p->aliasing);
}

#define KEEP(field_name)        \
  do {                          \
    p->field_name = f;          \
    p->has_##field_name = true; \
  } while (0)

static kiln_status gather(kiln_pw_reader_t *r, iproto_t *p) {
  while (kiln_pw_more(r)) {
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(r, &f));
    kiln_status s = KILN_STATUS_OK;
    switch (f.number) {
      case 1:
        KEEP(name);
        break;
      case 2:
        KEEP(opcode);
        break;
      case 3:
        KEEP(shape);
        break;
      case 7:
        KEEP(metadata);
        break;
      case 8:
        KEEP(literal);
        break;
      case 9:
        s = kiln_pw_as_i64(r, &f, &p->parameter_number);
        break;
      case 11:
        KEEP(fusion_kind);
        break;
      case 13:
        s = kiln_pw_as_i64(r, &f, &p->tuple_index);
        break;
      case 14:
        s = kiln_pw_append_varints(r, &f, &p->dimensions);
        break;
      case 15:
        KEEP(window);
        break;
      case 16:
        KEEP(conv);
        break;
      case 17:
        kiln_vec_push(&p->slices, f);
        break;
      case 18:
        s = kiln_pw_as_i64(r, &f, &p->exponent_bits);
        break;
      case 19:
        s = kiln_pw_as_i64(r, &f, &p->mantissa_bits);
        break;
      case 20:
        s = kiln_pw_append_varints(r, &f, &p->dynamic_slice_sizes);
        break;
      case 21:
        KEEP(padding);
        break;
      case 22:
        KEEP(outfeed_config);
        break;
      case 23:
        p->has_distribution = true;
        s = kiln_pw_as_i64(r, &f, &p->distribution);
        break;
      case 24:
        p->has_epsilon = true;
        s = kiln_pw_as_float(r, &f, &p->epsilon);
        break;
      case 25:
        p->has_feature_index = true;
        s = kiln_pw_as_i64(r, &f, &p->feature_index);
        break;
      case 26:
        s = kiln_pw_as_i64(r, &f, &p->channel_id);
        break;
      case 27:
        KEEP(infeed_config);
        break;
      case 28:
        KEEP(target);
        break;
      case 29:
        KEEP(outfeed_shape);
        break;
      case 30:
        KEEP(dot);
        break;
      case 31:
        p->has_fft_type = true;
        s = kiln_pw_as_i64(r, &f, &p->fft_type);
        break;
      case 32:
        s = kiln_pw_append_varints(r, &f, &p->fft_length);
        break;
      case 33:
        KEEP(gather);
        break;
      case 34:
        s = kiln_pw_append_varints(r, &f, &p->slice_sizes);
        break;
      case 36:
        s = kiln_pw_append_varints(r, &f, &p->operand_ids);
        break;
      case 37:
        s = kiln_pw_append_varints(r, &f, &p->control_ids);
        break;
      case 38:
        s = kiln_pw_append_varints(r, &f, &p->called_ids);
        break;
      case 43:
        KEEP(backend_config);
        break;
      case 47:
        s = kiln_pw_as_bool(r, &f, &p->is_host_transfer);
        break;
      case 48:
        KEEP(scatter);
        break;
      case 49:
        kiln_vec_push(&p->replica_groups, f);
        break;
      case 50:
        s = kiln_pw_as_i64(r, &f, &p->feature_group_count);
        break;
      case 51:
        KEEP(precision);
        break;
      case 52:
        kiln_vec_push(&p->source_target, f);
        break;
      case 56:
        s = kiln_pw_as_bool(r, &f, &p->constrain_layout);
        break;
      case 57:
        kiln_vec_push(&p->operand_shapes, f);
        break;
      case 58:
        s = kiln_pw_as_i64(r, &f, &p->batch_group_count);
        break;
      case 59:
        KEEP(triangular);
        break;
      case 60:
        s = kiln_pw_as_bool(r, &f, &p->is_stable);
        break;
      case 61:
        KEEP(replication);
        break;
      case 62:
        KEEP(cholesky);
        break;
      case 63:
        KEEP(cmp_dir);
        break;
      case 65:
        s = kiln_pw_as_bool(r, &f, &p->side_effect);
        break;
      case 66:
        p->has_delta = true;
        s = kiln_pw_as_i64(r, &f, &p->delta);
        break;
      case 67:
        s = kiln_pw_as_bool(r, &f, &p->indices_are_sorted);
        break;
      case 68:
        KEEP(frontend);
        break;
      case 69:
        s = kiln_pw_as_bool(r, &f, &p->unique_indices);
        break;
      case 70:
        p->has_rng_algorithm = true;
        s = kiln_pw_as_i64(r, &f, &p->rng_algorithm);
        break;
      case 71:
        s = kiln_pw_as_bool(r, &f, &p->use_global_device_ids);
        break;
      case 72:
        KEEP(cmp_type);
        break;
      case 74:
        kiln_vec_push(&p->aliasing, f);
        break;
      case 76:
        s = kiln_pw_as_i64(r, &f, &p->schedule);
        break;
      case 77:
        s = kiln_pw_as_i64(r, &f, &p->api_version);
        break;
      case 79:
        KEEP(exec_thread);
        break;
      case 80:
        p->has_prefetch = true;
        s = kiln_pw_as_i64(r, &f, &p->prefetch_index);
        break;
      case 81:
        s = kiln_pw_as_i64(r, &f, &p->k);
        break;
      case 85:
        s = kiln_pw_as_bool(r, &f, &p->largest);
        break;
      case 87:
        KEEP(device_list);
        break;
      case 89:
        s = kiln_pw_as_bool(r, &f, &p->is_composite);
        break;
      case 90:
        KEEP(ragged);
        break;
      case 91:
        KEEP(accuracy);
        break;
      case 92:
        KEEP(iota_list);
        break;
      case 93:
        KEEP(mesh_list);
        break;
      case 99:
        KEEP(payload);
        break;
      default:
        break;
    }
    KILN_RETURN_IF_ERROR_PLAIN(s);
  }
  return KILN_STATUS_OK;
}

#undef KEEP

/* ---- small text helpers ---- */

/* Quotes `s`; bytes >= 0x80 pass through (UTF-8) unless `escape_high` (binary blobs). */
static void append_quoted(kiln_strbuf_t *b, const char *s, size_t n, bool escape_high) {
  kiln_strbuf_append_char(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
      case '"':
        kiln_strbuf_append(b, "\\\"");
        break;
      case '\\':
        kiln_strbuf_append(b, "\\\\");
        break;
      case '\n':
        kiln_strbuf_append(b, "\\n");
        break;
      case '\t':
        kiln_strbuf_append(b, "\\t");
        break;
      case '\r':
        kiln_strbuf_append(b, "\\r");
        break;
      default:
        if (c < 0x20 || c == 0x7F || (escape_high && c >= 0x80))
          kiln_strbuf_printf(b, "\\%03o", c);
        else
          kiln_strbuf_append_char(b, (char)c);
    }
  }
  kiln_strbuf_append_char(b, '"');
}

void kiln_hlo_proto_append_quoted(kiln_strbuf_t *b, const char *s, size_t n) {
  append_quoted(b, s, n, false);
}

static void append_list(kiln_strbuf_t *b, const int64_t *v, size_t n) {
  kiln_strbuf_append_char(b, '{');
  for (size_t i = 0; i < n; i++) kiln_strbuf_printf(b, i ? ",%" PRId64 : "%" PRId64, v[i]);
  kiln_strbuf_append_char(b, '}');
}

static void attr_list(kiln_strbuf_t *b, const char *key, const kiln_pw_i64_vec_t *v) {
  kiln_strbuf_printf(b, ", %s=", key);
  append_list(b, v->data, v->len);
}

/* A string/bytes field as text (borrowed bytes). */
static kiln_status field_bytes(kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char **s,
                               size_t *n) {
  const uint8_t *d;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_bytes(r, f, &d, n));
  *s = (const char *)d;
  return KILN_STATUS_OK;
}

/* A string field that must be a plain word (opcodes, enum names): letters, digits, '_',
 * '-', '.'. */
static kiln_status field_word(kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char *what,
                              char *buf, size_t cap) {
  const char *s;
  size_t n;
  KILN_RETURN_IF_ERROR_PLAIN(field_bytes(r, f, &s, &n));
  if (n == 0 || n >= cap) return kiln_pw_error(r, f, "%s of %zu bytes", what, n);
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.'))
      return kiln_pw_error(r, f, "%s '%.*s' is not a word", what, (int)n, s);
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
  return KILN_STATUS_OK;
}

/* backend_config_payload (99), XLA's newer home of backend_config: a Payload {value=1 (the
 * bytes), id=2 (an index into the module's payloads)}. */
static kiln_status payload_bytes(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                 const kiln_hlo_proto_scope_t *sc, const char **s, size_t *n) {
  kiln_pw_reader_t sub;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, f, "Payload", &sub));
  *s = "";
  *n = 0;
  while (kiln_pw_more(&sub)) {
    kiln_pw_field_t g;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(&sub, &g));
    if (g.number == 1) KILN_RETURN_IF_ERROR_PLAIN(field_bytes(&sub, &g, s, n));
    if (g.number != 2) continue;
    int64_t id;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(&sub, &g, &id));
    if (id < 0 || (uint64_t)id >= sc->num_payloads)
      return kiln_pw_error(&sub, &g, "payload id %" PRId64 " of a module with %zu payloads", id,
                           sc->num_payloads);
    kiln_pw_reader_t mr = *sc->module_reader;
    KILN_RETURN_IF_ERROR_PLAIN(field_bytes(&mr, &sc->payloads[id], s, n));
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_hlo_proto_append_shape(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                        kiln_arena_t *arena, kiln_strbuf_t *out,
                                        kiln_shape_t **shape_out) {
  kiln_pw_reader_t sub;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, f, "ShapeProto", &sub));
  kiln_shape_t *shape = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_shape_from_proto(&sub, arena, &shape));
  kiln_shape_print(out, shape, true);
  if (shape_out) *shape_out = shape;
  return KILN_STATUS_OK;
}

/* Reads every field of submessage `f`, calling `fn` on each. */
typedef kiln_status (*field_fn)(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx);
static kiln_status each_field(kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char *message,
                              field_fn fn, void *ctx) {
  kiln_pw_reader_t sub;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, f, message, &sub));
  while (kiln_pw_more(&sub)) {
    kiln_pw_field_t g;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(&sub, &g));
    KILN_RETURN_IF_ERROR_PLAIN(fn(&sub, &g, ctx));
  }
  return KILN_STATUS_OK;
}

/* Up to 8 repeated int64 fields (numbers 1..8) and 8 scalars of one small message. */
typedef struct small_msg {
  kiln_pw_i64_vec_t lists[9];
  int64_t scalars[9];
  bool seen[9];
} small_msg_t;

static kiln_status small_msg_field(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx) {
  small_msg_t *m = ctx;
  if (f->number < 1 || f->number > 8) return KILN_STATUS_OK;
  if (f->wire_type == KILN_PW_FIXED64 || f->wire_type == KILN_PW_FIXED32) {
    m->scalars[f->number] = (int64_t)f->value;
    m->seen[f->number] = true;
    return KILN_STATUS_OK;
  }
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_append_varints(r, f, &m->lists[f->number]));
  if (f->wire_type == KILN_PW_VARINT) m->scalars[f->number] = (int64_t)f->value;
  m->seen[f->number] = true;
  return KILN_STATUS_OK;
}

static kiln_status read_small(kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char *message,
                              small_msg_t *m) {
  memset(m, 0, sizeof *m);
  return each_field(r, f, message, small_msg_field, m);
}

static void small_free(small_msg_t *m) {
  for (int i = 0; i < 9; i++) kiln_vec_free(&m->lists[i]);
}

/* A conv dimension-numbers label string (b01f / 01io): letters at their positions. */
static kiln_status append_labels(kiln_pw_reader_t *r, const kiln_pw_field_t *f, kiln_strbuf_t *b,
                                 int64_t pa, char a, int64_t pb, char c,
                                 const kiln_pw_i64_vec_t *spatial) {
  size_t rank = spatial->len + 2;
  char buf[64];
  if (rank >= sizeof buf) return kiln_pw_error(r, f, "%zu spatial dimensions", spatial->len);
  memset(buf, '?', rank);
  buf[rank] = '\0';
  if (pa >= 0 && (size_t)pa < rank) buf[pa] = a;
  if (pb >= 0 && (size_t)pb < rank) buf[pb] = c;
  for (size_t i = 0; i < spatial->len; i++) {
    int64_t p = spatial->data[i];
    if (p >= 0 && (size_t)p < rank) buf[p] = (char)(i < 10 ? '0' + (int)i : 'a' + (int)(i - 10));
  }
  if (strchr(buf, '?'))
    return kiln_pw_error(r, f, "ConvolutionDimensionNumbers do not name every dimension once");
  kiln_strbuf_append(b, buf);
  return KILN_STATUS_OK;
}

/* ConvolutionDimensionNumbers: input_batch=7, input_feature=8, input_spatial=11,
 * kernel_input_feature=3, kernel_output_feature=4, kernel_spatial=6, output_batch=9,
 * output_feature=10, output_spatial=12. */
typedef struct conv_msg {
  int64_t v[13];
  kiln_pw_i64_vec_t lists[13];
} conv_msg_t;

static kiln_status conv_field(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx) {
  conv_msg_t *m = ctx;
  if (f->number > 12) return KILN_STATUS_OK;
  if (f->number == 6 || f->number == 11 || f->number == 12)
    return kiln_pw_append_varints(r, f, &m->lists[f->number]);
  return kiln_pw_as_i64(r, f, &m->v[f->number]);
}

static kiln_status append_dim_labels(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                     kiln_strbuf_t *b) {
  conv_msg_t m;
  memset(&m, 0, sizeof m);
  kiln_status s = each_field(r, f, "ConvolutionDimensionNumbers", conv_field, &m);
  if (!s && (m.lists[6].len != m.lists[11].len || m.lists[12].len != m.lists[11].len))
    s = kiln_pw_error(r, f, "ConvolutionDimensionNumbers: spatial dimension counts differ");
  if (!s) {
    kiln_strbuf_append(b, ", dim_labels=");
    s = append_labels(r, f, b, m.v[7], 'b', m.v[8], 'f', &m.lists[11]);
  }
  if (!s) {
    kiln_strbuf_append_char(b, '_');
    s = append_labels(r, f, b, m.v[3], 'i', m.v[4], 'o', &m.lists[6]);
  }
  if (!s) {
    kiln_strbuf_append(b, "->");
    s = append_labels(r, f, b, m.v[9], 'b', m.v[10], 'f', &m.lists[12]);
  }
  for (int i = 0; i < 13; i++) kiln_vec_free(&m.lists[i]);
  return s;
}

/* Window { repeated WindowDimension dimensions = 1 }: size=1, stride=2, padding_low=3,
 * padding_high=4, window_dilation=5, base_dilation=6, window_reversal=7. */
typedef struct window_msg {
  KILN_VEC(small_msg_t) dims;
} window_msg_t;

static kiln_status window_field(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx) {
  window_msg_t *w = ctx;
  if (f->number != 1) return KILN_STATUS_OK;
  small_msg_t d;
  kiln_status s = read_small(r, f, "WindowDimension", &d);
  small_free(&d);
  if (!s) kiln_vec_push(&w->dims, d);
  return s;
}

static kiln_status append_window(kiln_pw_reader_t *r, const kiln_pw_field_t *f, kiln_strbuf_t *b) {
  window_msg_t w = {0};
  kiln_status s = each_field(r, f, "Window", window_field, &w);
  if (!s && w.dims.len) {
    static const struct {
      const char *key;
      int field;
    } kParts[] = {{"size", 1},       {"stride", 2},     {"pad", 3},
                  {"lhs_dilate", 6}, {"rhs_dilate", 5}, {"rhs_reversal", 7}};
    kiln_strbuf_append(b, ", window={");
    for (size_t k = 0; k < sizeof kParts / sizeof kParts[0]; k++) {
      kiln_strbuf_printf(b, k ? " %s=" : "%s=", kParts[k].key);
      for (size_t i = 0; i < w.dims.len; i++) {
        const int64_t *v = w.dims.data[i].scalars;
        if (i) kiln_strbuf_append_char(b, 'x');
        if (kParts[k].field == 3)
          kiln_strbuf_printf(b, "%" PRId64 "_%" PRId64, v[3], v[4]);
        else if (kParts[k].field == 7)
          kiln_strbuf_append_char(b, v[7] ? '1' : '0');
        else
          kiln_strbuf_printf(b, "%" PRId64, v[kParts[k].field]);
      }
    }
    kiln_strbuf_append_char(b, '}');
  }
  kiln_vec_free(&w.dims);
  return s;
}

/* PaddingConfig { repeated PaddingConfigDimension dimensions = 1 } (low=1, high=2,
 * interior=3). */
static kiln_status padding_field(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx) {
  kiln_strbuf_t *b = ctx;
  if (f->number != 1) return KILN_STATUS_OK;
  small_msg_t d;
  kiln_status s = read_small(r, f, "PaddingConfigDimension", &d);
  small_free(&d);
  if (!s) {
    if (b->len) kiln_strbuf_append_char(b, 'x');
    kiln_strbuf_printf(b, "%" PRId64 "_%" PRId64 "_%" PRId64, d.scalars[1], d.scalars[2],
                       d.scalars[3]);
  }
  return s;
}

/* Dot (lhs_contracting=1, rhs_contracting=2, lhs_batch=3, rhs_batch=4), gather
 * (offset_dims=1, collapsed_slice_dims=2, start_index_map=3, index_vector_dim=4,
 * operand_batching_dims=5, start_indices_batching_dims=6) and scatter
 * (update_window_dims=1, inserted_window_dims=2, scatter_dims_to_operand_dims=3,
 * index_vector_dim=4, input_batching_dims=5, scatter_indices_batching_dims=6). */
static kiln_status append_dnums(kiln_pw_reader_t *r, const kiln_pw_field_t *f, int kind,
                                kiln_strbuf_t *b) {
  small_msg_t m;
  kiln_status s = read_small(r, f,
                             kind == 0   ? "DotDimensionNumbers"
                             : kind == 1 ? "GatherDimensionNumbers"
                                         : "ScatterDimensionNumbers",
                             &m);
  if (!s && kind == 0) {
    if (m.lists[3].len) attr_list(b, "lhs_batch_dims", &m.lists[3]);
    if (m.lists[1].len) attr_list(b, "lhs_contracting_dims", &m.lists[1]);
    if (m.lists[4].len) attr_list(b, "rhs_batch_dims", &m.lists[4]);
    if (m.lists[2].len) attr_list(b, "rhs_contracting_dims", &m.lists[2]);
  } else if (!s) {
    static const char *const kGather[] = {"offset_dims", "collapsed_slice_dims", "start_index_map",
                                          "operand_batching_dims", "start_indices_batching_dims"};
    static const char *const kScatter[] = {"update_window_dims", "inserted_window_dims",
                                           "scatter_dims_to_operand_dims", "input_batching_dims",
                                           "scatter_indices_batching_dims"};
    const char *const *names = kind == 1 ? kGather : kScatter;
    static const int kFields[] = {1, 2, 3, 5, 6};
    for (int i = 0; i < 5; i++)
      if (i < 3 || m.lists[kFields[i]].len) attr_list(b, names[i], &m.lists[kFields[i]]);
    kiln_strbuf_printf(b, ", index_vector_dim=%" PRId64, m.scalars[4]);
  }
  small_free(&m);
  return s;
}

/* RaggedDotDimensionNumbers: dot_dimension_numbers=1, lhs_ragged_dimensions=2,
 * rhs_group_dimensions=3. */
static kiln_status append_ragged(kiln_pw_reader_t *r, const kiln_pw_field_t *f, kiln_strbuf_t *b) {
  kiln_pw_reader_t sub;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, f, "RaggedDotDimensionNumbers", &sub));
  kiln_pw_i64_vec_t lhs_ragged = {0}, rhs_group = {0};
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(&sub)) {
    kiln_pw_field_t g;
    if ((s = kiln_pw_next(&sub, &g))) break;
    if (g.number == 1)
      s = append_dnums(&sub, &g, 0, b);
    else if (g.number == 2)
      s = kiln_pw_append_varints(&sub, &g, &lhs_ragged);
    else if (g.number == 3)
      s = kiln_pw_append_varints(&sub, &g, &rhs_group);
  }
  if (!s && lhs_ragged.len) attr_list(b, "lhs_ragged_dims", &lhs_ragged);
  if (!s && rhs_group.len) attr_list(b, "rhs_group_dims", &rhs_group);
  kiln_vec_free(&lhs_ragged);
  kiln_vec_free(&rhs_group);
  return s;
}

static const char *const kPrecisions[] = {"default", "high", "highest"};
static const char *const kDotAlgorithms[] = {
    NULL,
    "dot_any_f8_any_f8_f32",
    "dot_any_f8_any_f8_f32_fast_accum",
    "dot_f16_f16_f16",
    "dot_f16_f16_f32",
    "dot_bf16_bf16_bf16",
    "dot_bf16_bf16_f32",
    "dot_bf16_bf16_f32_x3",
    "dot_bf16_bf16_f32_x6",
    "dot_tf32_tf32_f32",
    "dot_tf32_tf32_f32_x3",
    "dot_f32_f32_f32",
    "dot_f64_f64_f64",
    "dot_bf16_bf16_f32_x9",
};

/* PrecisionConfig: operand_precision=1, algorithm=2. */
static kiln_status append_precision(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                    kiln_strbuf_t *b) {
  small_msg_t m;
  kiln_status s = read_small(r, f, "PrecisionConfig", &m);
  if (!s && m.lists[1].len) {
    kiln_strbuf_append(b, ", operand_precision={");
    for (size_t i = 0; !s && i < m.lists[1].len; i++) {
      int64_t p = m.lists[1].data[i];
      if (p < 0 || p > 2)
        s = kiln_pw_error(r, f, "unknown operand precision %" PRId64, p);
      else
        kiln_strbuf_printf(b, i ? ",%s" : "%s", kPrecisions[p]);
    }
    kiln_strbuf_append_char(b, '}');
  }
  if (!s && m.scalars[2]) {
    int64_t a = m.scalars[2];
    if (a < 1 || a >= (int64_t)(sizeof kDotAlgorithms / sizeof kDotAlgorithms[0]))
      s = kiln_pw_error(r, f, "unknown dot algorithm %" PRId64, a);
    else
      kiln_strbuf_printf(b, ", algorithm=%s", kDotAlgorithms[a]);
  }
  small_free(&m);
  return s;
}

/* Replica groups, in one of four places: the older repeated ReplicaGroup field (49,
 * {replica_ids=1}); collective_device_list (87: CollectiveDeviceListProto {replica_groups=1
 * of ReplicaGroup, iota_replica_group_list=2}); iota_collective_device_list (92); or
 * mesh_axes_replica_group_list (93). An IotaReplicaGroupListProto is {num_replica_groups=1,
 * num_devices_per_group=2, iota_reshape_dims=3, iota_transpose_perm=4}. */
static kiln_status append_group(kiln_pw_reader_t *r, const kiln_pw_field_t *f, kiln_strbuf_t *b) {
  small_msg_t m;
  kiln_status s = read_small(r, f, "ReplicaGroup", &m);
  if (!s) append_list(b, m.lists[1].data, m.lists[1].len);
  small_free(&m);
  return s;
}

/* [G,S]<=[dims]T(perm), the text form of an IotaReplicaGroupListProto. */
static kiln_status append_iota_groups(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                      kiln_strbuf_t *b) {
  small_msg_t m;
  kiln_status s = read_small(r, f, "IotaReplicaGroupListProto", &m);
  int64_t total = 0;
  if (!s && __builtin_mul_overflow(m.scalars[1], m.scalars[2], &total))
    s = kiln_pw_error(r, f, "%" PRId64 " groups of %" PRId64 " devices overflow", m.scalars[1],
                      m.scalars[2]);
  if (!s) {
    kiln_strbuf_printf(b, ", replica_groups=[%" PRId64 ",%" PRId64 "]<=[", m.scalars[1],
                       m.scalars[2]);
    const kiln_pw_i64_vec_t *dims = &m.lists[3], *perm = &m.lists[4];
    if (dims->len == 0) kiln_strbuf_printf(b, "%" PRId64, total);
    for (size_t i = 0; i < dims->len; i++)
      kiln_strbuf_printf(b, i ? ",%" PRId64 : "%" PRId64, dims->data[i]);
    kiln_strbuf_append_char(b, ']');
    bool identity = true;
    for (size_t i = 0; i < perm->len; i++) identity &= perm->data[i] == (int64_t)i;
    if (!identity) {
      kiln_strbuf_append(b, "T(");
      for (size_t i = 0; i < perm->len; i++)
        kiln_strbuf_printf(b, i ? ",%" PRId64 : "%" PRId64, perm->data[i]);
      kiln_strbuf_append_char(b, ')');
    }
  }
  small_free(&m);
  return s;
}

/* The fields of a message kept for a second look: `one` the last field numbered `one_number`,
 * `many` every field numbered `many_number`. Mesh lists, meshes and axis references are
 * {1: one, 2: many}; CollectiveDeviceListProto is {groups=1: many, iota=2: one}. */
typedef struct one_many {
  uint32_t one_number, many_number;
  kiln_pw_field_t one;
  bool has_one;
  field_vec_t many;
} one_many_t;

static kiln_status one_many_field(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx) {
  (void)r;
  one_many_t *m = ctx;
  if (f->number == m->one_number) m->one = *f, m->has_one = true;
  if (f->number == m->many_number) kiln_vec_push(&m->many, *f);
  return KILN_STATUS_OK;
}

#define MESH_MAX_AXES 16
#define MESH_NAME_CAP 128

/* MeshProto {axes=1 of MeshAxis {name=1, size=2}, device_ids=2}: `mesh['a'=2,'b'=4]`, then
 * `, device_ids=(...)` when the mesh lists them (iota order without). Axis names go into
 * names[] (*rank of them). */
static kiln_status append_mesh(kiln_pw_reader_t *r, const kiln_pw_field_t *f, kiln_strbuf_t *b,
                               char names[][MESH_NAME_CAP], int *rank) {
  kiln_pw_reader_t sub;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, f, "MeshProto", &sub));
  kiln_pw_i64_vec_t ids = {0};
  kiln_status s = KILN_STATUS_OK;
  *rank = 0;
  kiln_strbuf_append(b, ", replica_groups=mesh[");
  while (!s && kiln_pw_more(&sub)) {
    kiln_pw_field_t g;
    s = kiln_pw_next(&sub, &g);
    if (!s && g.number == 2) s = kiln_pw_append_varints(&sub, &g, &ids);
    if (s || g.number != 1) continue;
    if (*rank == MESH_MAX_AXES) {
      s = kiln_pw_error(&sub, &g, "a mesh of more than %d axes", MESH_MAX_AXES);
      break;
    }
    kiln_pw_reader_t axis;
    s = kiln_pw_sub(&sub, &g, "MeshProto.MeshAxis", &axis);
    int64_t size = 0;
    names[*rank][0] = '\0';
    while (!s && kiln_pw_more(&axis)) {
      kiln_pw_field_t h;
      s = kiln_pw_next(&axis, &h);
      if (!s && h.number == 1)
        s = field_word(&axis, &h, "mesh axis name", names[*rank], MESH_NAME_CAP);
      if (!s && h.number == 2) s = kiln_pw_as_i64(&axis, &h, &size);
    }
    if (!s && !names[*rank][0]) s = kiln_pw_error(&sub, &g, "a mesh axis without a name");
    if (!s && size < 1)
      s = kiln_pw_error(&sub, &g, "mesh axis '%s' of size %" PRId64, names[*rank], size);
    if (!s) kiln_strbuf_printf(b, "%s'%s'=%" PRId64, *rank ? "," : "", names[*rank], size);
    (*rank)++;
  }
  kiln_strbuf_append_char(b, ']');
  if (!s && *rank == 0)
    s = KILN_ERR_UNIMPLEMENTED(
        "MeshProto without axes (a maximal mesh) in mesh_axes_replica_group_list: kiln groups "
        "devices over mesh axes only; write the groups as replica_groups");
  if (!s && ids.len) {
    kiln_strbuf_append(b, ", device_ids=(");
    for (size_t i = 0; i < ids.len; i++)
      kiln_strbuf_printf(b, i ? ",%" PRId64 : "%" PRId64, ids.data[i]);
    kiln_strbuf_append_char(b, ')');
  }
  kiln_vec_free(&ids);
  return s;
}

/* AxisRefProto {mesh_axis_index=1, sub_axis_info=2 of SubAxis {pre_size=1, size=2}}:
 * `'a'` or `'a':(pre)size`. */
static kiln_status append_axis_ref(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   const char names[][MESH_NAME_CAP], int rank, kiln_strbuf_t *b) {
  one_many_t ref = {.one_number = 1, .many_number = 2};
  kiln_status s = each_field(r, f, "AxisRefProto", one_many_field, &ref);
  int64_t index = 0;
  if (!s && ref.has_one) s = kiln_pw_as_i64(r, &ref.one, &index);
  if (!s && (index < 0 || index >= rank))
    s = kiln_pw_error(r, f, "mesh_axis_index %" PRId64 " of a mesh of %d axes", index, rank);
  if (!s) kiln_strbuf_printf(b, "'%s'", names[index]);
  if (!s && ref.many.len) {
    small_msg_t m;
    s = read_small(r, &ref.many.data[ref.many.len - 1], "AxisRefProto.SubAxis", &m);
    if (!s) kiln_strbuf_printf(b, ":(%" PRId64 ")%" PRId64, m.scalars[1], m.scalars[2]);
    small_free(&m);
  }
  kiln_vec_free(&ref.many);
  return s;
}

/* MeshAxesReplicaGroupListProto {mesh=1, axes=2 of AxisRefProto}: the mesh form of the text,
 * `mesh['a'=2,'b'=4], device_ids=(...) {'a','b':(1)2}`, which the replica-group parser
 * resolves (and checks: sizes, sub-axes, device ids). */
static kiln_status append_mesh_groups(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                      kiln_strbuf_t *b) {
  one_many_t list = {.one_number = 1, .many_number = 2};
  kiln_status s = each_field(r, f, "MeshAxesReplicaGroupListProto", one_many_field, &list);
  kiln_pw_reader_t lr = *r;
  if (!s) {
    lr.message = "MeshAxesReplicaGroupListProto";
    lr.depth = r->depth + 1;
  }
  if (!s && !list.has_one) s = kiln_pw_error(r, f, "mesh_axes_replica_group_list without a mesh");
  char names[MESH_MAX_AXES][MESH_NAME_CAP];
  int rank = 0;
  if (!s) s = append_mesh(&lr, &list.one, b, names, &rank);
  if (!s) kiln_strbuf_append(b, " {");
  for (size_t i = 0; !s && i < list.many.len; i++) {
    if (i) kiln_strbuf_append_char(b, ',');
    s = append_axis_ref(&lr, &list.many.data[i], (const char(*)[MESH_NAME_CAP])names, rank, b);
  }
  if (!s) kiln_strbuf_append_char(b, '}');
  kiln_vec_free(&list.many);
  return s;
}

static kiln_status append_replica_groups(kiln_pw_reader_t *r, const iproto_t *p, bool always,
                                         kiln_strbuf_t *b) {
  if (p->has_mesh_list) return append_mesh_groups(r, &p->mesh_list, b);
  if (p->has_iota_list) return append_iota_groups(r, &p->iota_list, b);
  kiln_pw_reader_t dr = *r;
  one_many_t d = {.one_number = 2, .many_number = 1};
  kiln_status s = KILN_STATUS_OK;
  if (p->has_device_list) {
    s = each_field(r, &p->device_list, "CollectiveDeviceListProto", one_many_field, &d);
    if (!s) {
      dr.message = "CollectiveDeviceListProto";
      dr.depth = r->depth + 1;
    }
  } else {
    for (size_t i = 0; i < p->replica_groups.len; i++)
      kiln_vec_push(&d.many, p->replica_groups.data[i]);
  }
  if (!s && d.has_one) {
    s = append_iota_groups(&dr, &d.one, b);
  } else if (!s && (d.many.len || always)) {
    kiln_strbuf_append(b, ", replica_groups={");
    for (size_t i = 0; !s && i < d.many.len; i++) {
      if (i) kiln_strbuf_append_char(b, ',');
      s = append_group(p->has_device_list ? &dr : r, &d.many.data[i], b);
    }
    kiln_strbuf_append_char(b, '}');
  }
  kiln_vec_free(&d.many);
  return s;
}

/* OpMetadata: op_type=1, op_name=2, source_file=3, source_line=4, deduplicated_name=12,
 * stack_frame_id=15, scheduling_name=16, source_end_line=17, source_column=18,
 * source_end_column=19. */
typedef struct metadata_msg {
  kiln_pw_field_t strings[20];
  bool has_string[20];
  int64_t ints[20];
} metadata_msg_t;

static kiln_status metadata_field(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx) {
  metadata_msg_t *m = ctx;
  switch (f->number) {
    case 1:
    case 2:
    case 3:
    case 12:
    case 16: {
      const char *s;
      size_t n;
      KILN_RETURN_IF_ERROR_PLAIN(field_bytes(r, f, &s, &n));
      m->strings[f->number] = *f;
      m->has_string[f->number] = n > 0;
      return KILN_STATUS_OK;
    }
    case 4:
    case 15:
    case 17:
    case 18:
    case 19: {
      int32_t v;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i32(r, f, &v));
      m->ints[f->number] = v;
      return KILN_STATUS_OK;
    }
    default:
      return KILN_STATUS_OK;
  }
}

static kiln_status append_metadata(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   kiln_strbuf_t *b) {
  metadata_msg_t m;
  memset(&m, 0, sizeof m);
  KILN_RETURN_IF_ERROR_PLAIN(each_field(r, f, "OpMetadata", metadata_field, &m));
  static const struct {
    const char *key;
    int field;
    bool is_string;
  } kOrder[] = {{"op_type", 1, true},
                {"op_name", 2, true},
                {"source_file", 3, true},
                {"source_line", 4, false},
                {"source_end_line", 17, false},
                {"source_column", 18, false},
                {"source_end_column", 19, false},
                {"deduplicated_name", 12, true},
                {"scheduling_name", 16, true},
                {"stack_frame_id", 15, false}};
  kiln_strbuf_t t = {0};
  for (size_t i = 0; i < sizeof kOrder / sizeof kOrder[0]; i++) {
    int k = kOrder[i].field;
    if (kOrder[i].is_string ? !m.has_string[k] : m.ints[k] == 0) continue;
    kiln_strbuf_printf(&t, "%s%s=", t.len ? " " : "", kOrder[i].key);
    if (kOrder[i].is_string)
      kiln_hlo_proto_append_quoted(&t, (const char *)m.strings[k].data, m.strings[k].len);
    else
      kiln_strbuf_printf(&t, "%" PRId64, m.ints[k]);
  }
  if (t.len) kiln_strbuf_printf(b, ", metadata={%s}", t.data);
  kiln_strbuf_free(&t);
  return KILN_STATUS_OK;
}

/* Whether `v` reads back unquoted: {...} with brackets balanced outside strings, strings
 * closed, on one line. */
static bool is_bare_dictionary(const char *v, size_t n) {
  if (n < 2 || v[0] != '{' || v[n - 1] != '}' || memchr(v, '\n', n)) return false;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; i++) {
    char c = v[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[' || c == '(')
      depth++;
    else if (c == '}' || c == ']' || c == ')')
      depth--;
    if (depth < 0 || (depth == 0 && i + 1 < n)) return false;
  }
  return depth == 0 && !in_string;
}

/* FrontendAttributes { map<string, string> map = 1 }. */
static kiln_status frontend_entry(kiln_pw_reader_t *r, const kiln_pw_field_t *f, void *ctx) {
  kiln_strbuf_t *b = ctx;
  if (f->number != 1) return KILN_STATUS_OK;
  kiln_pw_reader_t e;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, f, "FrontendAttributes.MapEntry", &e));
  const char *key = "", *value = "";
  size_t kn = 0, vn = 0;
  while (kiln_pw_more(&e)) {
    kiln_pw_field_t g;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(&e, &g));
    if (g.number == 1) KILN_RETURN_IF_ERROR_PLAIN(field_bytes(&e, &g, &key, &kn));
    if (g.number == 2) KILN_RETURN_IF_ERROR_PLAIN(field_bytes(&e, &g, &value, &vn));
  }
  for (size_t i = 0; i < kn; i++) {
    char c = key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.'))
      return kiln_pw_error(r, f, "frontend attribute key '%.*s' is not a word", (int)kn, key);
  }
  if (b->len > 1) kiln_strbuf_append_char(b, ',');
  kiln_strbuf_append_n(b, key, kn);
  kiln_strbuf_append_char(b, '=');
  /* Dictionaries ({...}, e.g. composite.attributes, xla.sdy.meshes) are written bare, as
   * XLA prints them, when the parser can read them back so. */
  if (is_bare_dictionary(value, vn))
    kiln_strbuf_append_n(b, value, vn);
  else
    kiln_hlo_proto_append_quoted(b, value, vn);
  return KILN_STATUS_OK;
}

kiln_status kiln_hlo_proto_append_frontend_attrs(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                                 kiln_strbuf_t *out) {
  kiln_strbuf_t t = {0};
  kiln_strbuf_append_char(&t, '{');
  kiln_status s = each_field(r, f, "FrontendAttributes", frontend_entry, &t);
  kiln_strbuf_append_char(&t, '}');
  if (!s && t.len > 2) kiln_strbuf_printf(out, ", frontend_attributes=%s", t.data);
  kiln_strbuf_free(&t);
  return s;
}

/* Shortest decimal text that reads back as the same float. */
static void append_float(kiln_strbuf_t *b, float v) {
  char buf[48];
  if (isnan(v)) {
    kiln_strbuf_append(b, "nan");
    return;
  }
  if (isinf(v)) {
    kiln_strbuf_append(b, v < 0 ? "-inf" : "inf");
    return;
  }
  for (int prec = 1; prec <= 9; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
    if (strtof(buf, NULL) == v) break;
  }
  kiln_strbuf_append(b, buf);
}

/* The attribute keys of called computations, by opcode. */
static const char *const *called_keys(kiln_hlo_opcode_t op, size_t n, bool pred_branch,
                                      bool *braced) {
  static const char *const kCalls[] = {"calls"}, *const kToApply[] = {"to_apply"},
                           *const kWhile[] = {"condition", "body"},
                           *const kSelectScatter[] = {"select", "scatter"},
                           *const kTrueFalse[] = {"true_computation", "false_computation"},
                           *const kBranches[] = {"branch_computations"},
                           *const kCalled[] = {"called_computations"};
  *braced = false;
  switch (op) {
    case KILN_OP_FUSION:
      return n == 1 ? kCalls : NULL;
    case KILN_OP_WHILE:
      return n == 2 ? kWhile : NULL;
    case KILN_OP_SELECT_AND_SCATTER:
      return n == 2 ? kSelectScatter : NULL;
    case KILN_OP_CONDITIONAL:
      if (pred_branch && n == 2) return kTrueFalse;
      *braced = true;
      return kBranches;
    case KILN_OP_CUSTOM_CALL:
      *braced = true;
      return kCalled;
    default:
      break;
  }
  const char *name = kiln_hlo_opcode_name(op);
  if (n == 1 && (strstr(name, "async") || !strcmp(name, "fusion"))) return kCalls;
  if (n == 1) return kToApply;
  *braced = true;
  return kCalled;
}

static const char *comp_name(const kiln_hlo_proto_scope_t *sc, int64_t id) {
  uintptr_t i = (uintptr_t)kiln_hashmap_get(sc->comp_by_id, (const char *)&id, sizeof id);
  return i ? sc->comp_names[i - 1] : NULL;
}

static kiln_status append_called(kiln_pw_reader_t *r, const iproto_t *p,
                                 const kiln_hlo_proto_scope_t *sc, kiln_hlo_opcode_t op,
                                 kiln_strbuf_t *b) {
  size_t n = p->called_ids.len;
  if (!n) return KILN_STATUS_OK;
  for (size_t i = 0; i < n; i++)
    if (!comp_name(sc, p->called_ids.data[i]))
      return kiln_pw_error(r, NULL,
                           "called_computation_ids[%zu] = %" PRId64
                           " is not a computation "
                           "of the module",
                           i, p->called_ids.data[i]);
  bool pred_branch = false;
  if (op == KILN_OP_CONDITIONAL && p->operand_ids.len) {
    int64_t id = p->operand_ids.data[0];
    uintptr_t i = (uintptr_t)kiln_hashmap_get(sc->instr_by_id, (const char *)&id, sizeof id);
    pred_branch = i && sc->instr_types[i - 1] == KILN_PRED;
  }
  bool braced;
  const char *const *keys = called_keys(op, n, pred_branch, &braced);
  if (!keys)
    return kiln_pw_error(r, NULL, "%s with %zu called computations", kiln_hlo_opcode_name(op), n);
  if (braced) {
    kiln_strbuf_printf(b, ", %s={", keys[0]);
    for (size_t i = 0; i < n; i++)
      kiln_strbuf_printf(b, i ? ", %s" : "%s", comp_name(sc, p->called_ids.data[i]));
    kiln_strbuf_append_char(b, '}');
  } else {
    for (size_t i = 0; i < n; i++)
      kiln_strbuf_printf(b, ", %s=%s", keys[i], comp_name(sc, p->called_ids.data[i]));
  }
  return KILN_STATUS_OK;
}

/* OutputOperandAliasing: output_shape_index=1, operand_index=2, operand_shape_index=3. */
static kiln_status append_aliasing(kiln_pw_reader_t *r, const iproto_t *p, kiln_strbuf_t *b) {
  if (!p->aliasing.len) return KILN_STATUS_OK;
  kiln_strbuf_append(b, ", output_to_operand_aliasing={");
  for (size_t i = 0; i < p->aliasing.len; i++) {
    small_msg_t m;
    kiln_status s = read_small(r, &p->aliasing.data[i], "OutputOperandAliasing", &m);
    if (!s) {
      if (i) kiln_strbuf_append(b, ", ");
      append_list(b, m.lists[1].data, m.lists[1].len);
      kiln_strbuf_printf(b, ": (%" PRId64 ", ", m.scalars[2]);
      append_list(b, m.lists[3].data, m.lists[3].len);
      kiln_strbuf_append_char(b, ')');
    }
    small_free(&m);
    KILN_RETURN_IF_ERROR_PLAIN(s);
  }
  kiln_strbuf_append_char(b, '}');
  return KILN_STATUS_OK;
}

static kiln_status append_misc(kiln_pw_reader_t *r, const iproto_t *p, kiln_hlo_opcode_t op,
                               const kiln_hlo_proto_scope_t *sc, kiln_strbuf_t *b) {
  char word[64];
  if (p->has_target) {
    const char *s;
    size_t n;
    KILN_RETURN_IF_ERROR_PLAIN(field_bytes(r, &p->target, &s, &n));
    kiln_strbuf_append(b, ", custom_call_target=");
    kiln_hlo_proto_append_quoted(b, s, n);
  }
  static const char *const kApi[] = {NULL, "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
                                     "API_VERSION_STATUS_RETURNING_UNIFIED",
                                     "API_VERSION_TYPED_FFI"};
  if (p->api_version) {
    if (p->api_version < 1 || p->api_version > 4)
      return kiln_pw_error(r, NULL, "unknown custom_call_api_version %" PRId64, p->api_version);
    kiln_strbuf_printf(b, ", api_version=%s", kApi[p->api_version]);
  }
  if (p->is_stable) kiln_strbuf_append(b, ", is_stable=true");
  if (op == KILN_OP_REDUCE_PRECISION || p->exponent_bits || p->mantissa_bits)
    kiln_strbuf_printf(b, ", exponent_bits=%" PRId64 ", mantissa_bits=%" PRId64, p->exponent_bits,
                       p->mantissa_bits);
  static const char *const kFft[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  if (op == KILN_OP_FFT || p->has_fft_type) {
    if (p->fft_type < 0 || p->fft_type > 3)
      return kiln_pw_error(r, NULL, "unknown fft_type %" PRId64, p->fft_type);
    kiln_strbuf_printf(b, ", fft_type=%s", kFft[p->fft_type]);
  }
  if (p->fft_length.len) attr_list(b, "fft_length", &p->fft_length);
  if (op == KILN_OP_RNG || (p->has_distribution && p->distribution)) {
    if (p->distribution < 1 || p->distribution > 2)
      return kiln_pw_error(r, NULL, "unknown rng distribution %" PRId64, p->distribution);
    kiln_strbuf_printf(b, ", distribution=%s", p->distribution == 1 ? "rng_uniform" : "rng_normal");
  }
  static const char *const kRng[] = {"rng_default", "rng_three_fry", "rng_philox"};
  if (op == KILN_OP_RNG_BIT_GENERATOR) {
    if (p->rng_algorithm < 0 || p->rng_algorithm > 2)
      return kiln_pw_error(r, NULL, "unknown rng_algorithm %" PRId64, p->rng_algorithm);
    kiln_strbuf_printf(b, ", algorithm=%s", kRng[p->rng_algorithm]);
  }
  if (p->has_triangular) {
    small_msg_t m;
    kiln_status s = read_small(r, &p->triangular, "TriangularSolveOptions", &m);
    small_free(&m);
    KILN_RETURN_IF_ERROR_PLAIN(s);
    static const char *const kTranspose[] = {NULL, "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
    if (m.scalars[1]) kiln_strbuf_append(b, ", left_side=true");
    if (m.scalars[2]) kiln_strbuf_append(b, ", lower=true");
    if (m.scalars[3]) kiln_strbuf_append(b, ", unit_diagonal=true");
    if (m.scalars[4] < 0 || m.scalars[4] > 3)
      return kiln_pw_error(r, &p->triangular, "unknown transpose_a %" PRId64, m.scalars[4]);
    if (m.scalars[4]) kiln_strbuf_printf(b, ", transpose_a=%s", kTranspose[m.scalars[4]]);
  }
  if (p->has_cholesky) {
    small_msg_t m;
    kiln_status s = read_small(r, &p->cholesky, "CholeskyOptions", &m);
    small_free(&m);
    KILN_RETURN_IF_ERROR_PLAIN(s);
    if (m.scalars[1]) kiln_strbuf_append(b, ", lower=true");
  }
  if (p->channel_id > 0) kiln_strbuf_printf(b, ", channel_id=%" PRId64, p->channel_id);
  bool collective = op == KILN_OP_ALL_REDUCE || op == KILN_OP_ALL_GATHER ||
                    op == KILN_OP_ALL_TO_ALL || op == KILN_OP_REDUCE_SCATTER;
  KILN_RETURN_IF_ERROR_PLAIN(append_replica_groups(r, p, collective, b));
  if (p->use_global_device_ids) kiln_strbuf_append(b, ", use_global_device_ids=true");
  if (p->constrain_layout) kiln_strbuf_append(b, ", constrain_layout=true");
  if (op == KILN_OP_TOPK)
    kiln_strbuf_printf(b, ", k=%" PRId64 ", largest=%s", p->k, p->largest ? "true" : "false");
  if (p->control_ids.len) {
    kiln_strbuf_append(b, ", control-predecessors={");
    for (size_t i = 0; i < p->control_ids.len; i++) {
      int64_t id = p->control_ids.data[i];
      uintptr_t j = (uintptr_t)kiln_hashmap_get(sc->instr_by_id, (const char *)&id, sizeof id);
      if (!j)
        return kiln_pw_error(r, NULL,
                             "control_predecessor_ids[%zu] = %" PRId64
                             " is not an instruction of the computation",
                             i, id);
      kiln_strbuf_printf(b, i ? ", %s" : "%s", sc->instr_names[j - 1]);
    }
    kiln_strbuf_append_char(b, '}');
  }
  if (p->has_backend_config || p->has_payload) {
    const char *s = "";
    size_t n = 0;
    if (p->has_payload) KILN_RETURN_IF_ERROR_PLAIN(payload_bytes(r, &p->payload, sc, &s, &n));
    /* an empty payload leaves field 43 its say */
    if (n == 0 && p->has_backend_config)
      KILN_RETURN_IF_ERROR_PLAIN(field_bytes(r, &p->backend_config, &s, &n));
    /* Quoted: the parser keeps the bytes exactly, whatever they hold (JSON or not). */
    kiln_strbuf_append(b, ", backend_config=");
    append_quoted(b, s, n, memchr(s, 0, n) != NULL);
  }
  (void)word;
  return KILN_STATUS_OK;
}

/* Attributes kiln keeps as raw text. */
static kiln_status append_raw(kiln_pw_reader_t *r, const iproto_t *p,
                              const kiln_hlo_proto_scope_t *sc, kiln_strbuf_t *b) {
  if (p->has_metadata) KILN_RETURN_IF_ERROR_PLAIN(append_metadata(r, &p->metadata, b));
  if (p->has_frontend)
    KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_proto_append_frontend_attrs(r, &p->frontend, b));
  if (p->has_replication) {
    small_msg_t m;
    kiln_status s = read_small(r, &p->replication, "ParameterReplication", &m);
    if (!s) {
      kiln_strbuf_append(b, ", parameter_replication={");
      for (size_t i = 0; i < m.lists[1].len; i++)
        kiln_strbuf_printf(b, i ? ",%s" : "%s", m.lists[1].data[i] ? "true" : "false");
      kiln_strbuf_append_char(b, '}');
    }
    small_free(&m);
    KILN_RETURN_IF_ERROR_PLAIN(s);
  }
  if (p->source_target.len) {
    kiln_strbuf_append(b, ", source_target_pairs={");
    for (size_t i = 0; i < p->source_target.len; i++) {
      small_msg_t m;
      kiln_status s = read_small(r, &p->source_target.data[i], "SourceTarget", &m);
      small_free(&m);
      KILN_RETURN_IF_ERROR_PLAIN(s);
      kiln_strbuf_printf(b, "%s{%" PRId64 ",%" PRId64 "}", i ? "," : "", m.scalars[1],
                         m.scalars[2]);
    }
    kiln_strbuf_append_char(b, '}');
  }
  if (p->operand_shapes.len) {
    kiln_strbuf_append(b, ", operand_layout_constraints={");
    for (size_t i = 0; i < p->operand_shapes.len; i++) {
      if (i) kiln_strbuf_append(b, ", ");
      KILN_RETURN_IF_ERROR_PLAIN(
          kiln_hlo_proto_append_shape(r, &p->operand_shapes.data[i], sc->arena, b, NULL));
    }
    kiln_strbuf_append_char(b, '}');
  }
  KILN_RETURN_IF_ERROR_PLAIN(append_aliasing(r, p, b));
  if (p->schedule == 1)
    kiln_strbuf_append(b, ", schedule=SCHEDULE_LATEST");
  else if (p->schedule == 2)
    kiln_strbuf_append(b, ", schedule=SCHEDULE_EARLIEST");
  if (p->has_outfeed_config || p->has_infeed_config) {
    const char *s;
    size_t n;
    const kiln_pw_field_t *f = p->has_outfeed_config ? &p->outfeed_config : &p->infeed_config;
    KILN_RETURN_IF_ERROR_PLAIN(field_bytes(r, f, &s, &n));
    if (n) {
      kiln_strbuf_append(b, p->has_outfeed_config ? ", outfeed_config=" : ", infeed_config=");
      kiln_hlo_proto_append_quoted(b, s, n);
    }
  }
  if (p->has_outfeed_shape) {
    kiln_strbuf_append(b, ", outfeed_shape=");
    KILN_RETURN_IF_ERROR_PLAIN(
        kiln_hlo_proto_append_shape(r, &p->outfeed_shape, sc->arena, b, NULL));
  }
  if (p->is_host_transfer) kiln_strbuf_append(b, ", is_host_transfer=true");
  if (p->side_effect) kiln_strbuf_append(b, ", custom_call_has_side_effect=true");
  if (p->has_delta) kiln_strbuf_printf(b, ", delta=%" PRId64, p->delta);
  if (p->has_epsilon) {
    kiln_strbuf_append(b, ", epsilon=");
    append_float(b, p->epsilon);
  }
  if (p->has_feature_index) kiln_strbuf_printf(b, ", feature_index=%" PRId64, p->feature_index);
  if (p->is_composite) kiln_strbuf_append(b, ", is_composite=true");
  if (p->has_prefetch)
    kiln_strbuf_printf(b, ", cross_program_prefetch_index=%" PRId64, p->prefetch_index);
  if (p->has_accuracy) {
    small_msg_t m;
    kiln_status s = read_small(r, &p->accuracy, "ResultAccuracy", &m);
    small_free(&m);
    KILN_RETURN_IF_ERROR_PLAIN(s);
    if (m.seen[1])
      kiln_strbuf_printf(b, ", result_accuracy={mode=%s}", m.scalars[1] ? "HIGHEST" : "DEFAULT");
  }
  if (p->has_exec_thread) {
    const char *s;
    size_t n;
    KILN_RETURN_IF_ERROR_PLAIN(field_bytes(r, &p->exec_thread, &s, &n));
    if (n) {
      kiln_strbuf_append(b, ", async_execution_thread=");
      kiln_hlo_proto_append_quoted(b, s, n);
    }
  }
  return KILN_STATUS_OK;
}

/* Opcodes whose text always carries dimensions={...}, even when empty. */
static bool always_dimensions(kiln_hlo_opcode_t op) {
  switch (op) {
    case KILN_OP_BROADCAST:
    case KILN_OP_TRANSPOSE:
    case KILN_OP_REDUCE:
    case KILN_OP_REVERSE:
    case KILN_OP_CONCATENATE:
    case KILN_OP_MAP:
      return true;
    default:
      return false;
  }
}

static kiln_status instruction_text(kiln_pw_reader_t *r, iproto_t *p,
                                    const kiln_hlo_proto_scope_t *sc, bool is_root,
                                    const char *name, kiln_strbuf_t *b) {
  char opname[64];
  if (!p->has_opcode) return kiln_pw_error(r, NULL, "no opcode");
  KILN_RETURN_IF_ERROR_PLAIN(field_word(r, &p->opcode, "opcode", opname, sizeof opname));
  kiln_hlo_opcode_t op;
  if (!kiln_hlo_opcode_from_name(opname, strlen(opname), &op))
    return kiln_pw_error(r, &p->opcode, "unknown opcode '%s'", opname);
  if (!p->has_shape) return kiln_pw_error(r, NULL, "no shape");
  kiln_strbuf_printf(b, "%s%s = ", is_root ? "ROOT " : "", name);
  kiln_shape_t *shape = NULL;
  KILN_RETURN_IF_ERROR(kiln_hlo_proto_append_shape(r, &p->shape, sc->arena, b, &shape),
                       "in the shape");
  kiln_strbuf_printf(b, " %s(", opname);
  if (op == KILN_OP_PARAMETER) {
    kiln_strbuf_printf(b, "%" PRId64, p->parameter_number);
  } else if (op == KILN_OP_CONSTANT) {
    if (!p->has_literal) {
      kiln_strbuf_append(b, "{...}");
    } else {
      kiln_pw_reader_t lr;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, &p->literal, "LiteralProto", &lr));
      kiln_literal_t *lit = NULL;
      KILN_RETURN_IF_ERROR(kiln_literal_from_proto(&lr, sc->arena, &lit), "in the literal");
      if (!kiln_shape_compatible(lit->shape, shape))
        return kiln_pw_error(r, &p->literal, "literal shape does not match the instruction's");
      kiln_literal_print(b, lit);
    }
  } else {
    for (size_t i = 0; i < p->operand_ids.len; i++) {
      int64_t id = p->operand_ids.data[i];
      uintptr_t j = (uintptr_t)kiln_hashmap_get(sc->instr_by_id, (const char *)&id, sizeof id);
      if (!j)
        return kiln_pw_error(
            r, NULL, "operand_ids[%zu] = %" PRId64 " is not an instruction of the computation", i,
            id);
      kiln_strbuf_printf(b, i ? ", %s" : "%s", sc->instr_names[j - 1]);
    }
  }
  kiln_strbuf_append_char(b, ')');

  if (op == KILN_OP_GET_TUPLE_ELEMENT) kiln_strbuf_printf(b, ", index=%" PRId64, p->tuple_index);
  if (op == KILN_OP_IOTA) {
    kiln_strbuf_printf(b, ", iota_dimension=%" PRId64,
                       p->dimensions.len ? p->dimensions.data[0] : 0);
  } else if (p->dimensions.len || always_dimensions(op)) {
    attr_list(b, "dimensions", &p->dimensions);
  }
  if (p->slices.len || op == KILN_OP_SLICE) {
    kiln_strbuf_append(b, ", slice={");
    for (size_t i = 0; i < p->slices.len; i++) {
      small_msg_t m;
      kiln_status s = read_small(r, &p->slices.data[i], "HloInstructionProto.SliceDimensions", &m);
      small_free(&m);
      KILN_RETURN_IF_ERROR_PLAIN(s);
      kiln_strbuf_printf(b, "%s[%" PRId64 ":%" PRId64 ":%" PRId64 "]", i ? ", " : "", m.scalars[1],
                         m.scalars[2], m.scalars[3]);
    }
    kiln_strbuf_append_char(b, '}');
  }
  if (p->dynamic_slice_sizes.len || op == KILN_OP_DYNAMIC_SLICE)
    attr_list(b, "dynamic_slice_sizes", &p->dynamic_slice_sizes);
  if (p->has_padding) {
    kiln_strbuf_t pad = {0};
    kiln_status s = each_field(r, &p->padding, "PaddingConfig", padding_field, &pad);
    if (!s) kiln_strbuf_printf(b, ", padding=%s", pad.len ? pad.data : "");
    kiln_strbuf_free(&pad);
    KILN_RETURN_IF_ERROR_PLAIN(s);
  }
  if (p->has_window) KILN_RETURN_IF_ERROR_PLAIN(append_window(r, &p->window, b));
  if (p->has_conv) KILN_RETURN_IF_ERROR_PLAIN(append_dim_labels(r, &p->conv, b));
  if (p->feature_group_count)
    kiln_strbuf_printf(b, ", feature_group_count=%" PRId64, p->feature_group_count);
  if (p->batch_group_count)
    kiln_strbuf_printf(b, ", batch_group_count=%" PRId64, p->batch_group_count);
  if (p->has_dot) KILN_RETURN_IF_ERROR_PLAIN(append_dnums(r, &p->dot, 0, b));
  if (p->has_ragged) KILN_RETURN_IF_ERROR_PLAIN(append_ragged(r, &p->ragged, b));
  if (p->has_precision) KILN_RETURN_IF_ERROR_PLAIN(append_precision(r, &p->precision, b));
  if (p->has_gather) KILN_RETURN_IF_ERROR_PLAIN(append_dnums(r, &p->gather, 1, b));
  if (p->has_gather || p->slice_sizes.len) attr_list(b, "slice_sizes", &p->slice_sizes);
  if (p->has_scatter) KILN_RETURN_IF_ERROR_PLAIN(append_dnums(r, &p->scatter, 2, b));
  if (p->indices_are_sorted) kiln_strbuf_append(b, ", indices_are_sorted=true");
  if (p->unique_indices) kiln_strbuf_append(b, ", unique_indices=true");
  char word[64];
  if (p->has_cmp_dir) {
    KILN_RETURN_IF_ERROR_PLAIN(
        field_word(r, &p->cmp_dir, "comparison_direction", word, sizeof word));
    kiln_strbuf_printf(b, ", direction=%s", word);
  }
  if (p->has_cmp_type) {
    KILN_RETURN_IF_ERROR_PLAIN(field_word(r, &p->cmp_type, "comparison_type", word, sizeof word));
    kiln_strbuf_printf(b, ", type=%s", word);
  }
  if (p->has_fusion_kind) {
    KILN_RETURN_IF_ERROR_PLAIN(field_word(r, &p->fusion_kind, "fusion_kind", word, sizeof word));
    kiln_strbuf_printf(b, ", kind=%s", word);
  }
  KILN_RETURN_IF_ERROR_PLAIN(append_called(r, p, sc, op, b));
  KILN_RETURN_IF_ERROR_PLAIN(append_misc(r, p, op, sc, b));
  return append_raw(r, p, sc, b);
}

kiln_status kiln_hlo_proto_instruction_text(kiln_pw_reader_t *r,
                                            const kiln_hlo_proto_scope_t *scope, bool is_root,
                                            kiln_strbuf_t *out) {
  iproto_t p;
  memset(&p, 0, sizeof p);
  kiln_status s = gather(r, &p);
  char *name = NULL;
  if (!s && p.has_name) s = kiln_pw_as_string(r, &p.name, &name);
  if (!s) {
    kiln_strbuf_t line = {0};
    s = instruction_text(r, &p, scope, is_root, name && name[0] ? name : "<unnamed>", &line);
    if (!s) {
      kiln_strbuf_append(out, "  ");
      kiln_strbuf_append(out, line.data);
      kiln_strbuf_append_char(out, '\n');
    }
    kiln_strbuf_free(&line);
  }
  if (s)
    s = kiln_status_annotate(s, "in instruction '%s' of computation '%s'",
                             name && name[0] ? name : "<unnamed>", scope->computation);
  kiln_free(name);
  iproto_free(&p);
  return s;
}
