#include "tools/common/hlo_proto_encode.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/literal_layout.h"
#include "tools/common/proto_write.h"

typedef struct enc {
  const kiln_hlo_proto_encode_options_t *o;
  const kiln_hlo_module_t *m;
  kiln_status err;    /* first error */
  kiln_pb_t payloads; /* HloModuleProto.payloads (22), when backend configs are interned */
  int64_t num_payloads;
} enc_t;

static void fail(enc_t *e, kiln_status s) {
  if (!e->err)
    e->err = s;
  else
    kiln_status_free(s);
}

/* ---- shapes (xla_data.proto ShapeProto / LayoutProto) ---- */

static int64_t primitive_type(kiln_elem_type_t t) {
  switch (t) {
    case KILN_PRED:
      return 1;
    case KILN_S8:
      return 2;
    case KILN_S16:
      return 3;
    case KILN_S32:
      return 4;
    case KILN_S64:
      return 5;
    case KILN_U8:
      return 6;
    case KILN_U16:
      return 7;
    case KILN_U32:
      return 8;
    case KILN_U64:
      return 9;
    case KILN_F16:
      return 10;
    case KILN_F32:
      return 11;
    case KILN_F64:
      return 12;
    case KILN_TUPLE:
      return 13;
    case KILN_OPAQUE:
      return 14;
    case KILN_C64:
      return 15;
    case KILN_BF16:
      return 16;
    case KILN_TOKEN:
      return 17;
    case KILN_C128:
      return 18;
    case KILN_F8E5M2:
      return 19;
    case KILN_F8E4M3FN:
      return 20;
    case KILN_S4:
      return 21;
    case KILN_U4:
      return 22;
    case KILN_F8E4M3B11FNUZ:
      return 23;
    case KILN_F8E5M2FNUZ:
      return 24;
    case KILN_F8E4M3FNUZ:
      return 25;
    case KILN_S2:
      return 26;
    case KILN_U2:
      return 27;
    case KILN_F8E4M3:
      return 28;
    case KILN_F8E3M4:
      return 29;
    case KILN_S1:
      return 30;
    case KILN_U1:
      return 31;
    case KILN_F4E2M1FN:
      return 32;
    case KILN_F8E8M0FNU:
      return 33;
    default:
      return 0;
  }
}

static void shape_proto(enc_t *e, const kiln_shape_t *s, kiln_pb_t *b) {
  kiln_pb_i64(b, 2, primitive_type(s->type));
  if (s->type == KILN_TUPLE) {
    for (int i = 0; i < s->num_elements; i++) {
      kiln_pb_t sub = {0};
      shape_proto(e, s->elements[i], &sub);
      kiln_pb_message(b, 4, &sub);
      kiln_pb_free(&sub);
    }
    return;
  }
  if (!kiln_shape_is_array(s)) return;
  int64_t *dims = kiln_calloc((size_t)s->rank + 1, sizeof(int64_t));
  for (int i = 0; i < s->rank; i++)
    dims[i] = s->dynamic && s->dynamic[i] && s->dims[i] < 0 ? INT64_MIN : s->dims[i];
  kiln_pb_repeated(b, 3, dims, (size_t)s->rank, e->o->packed);
  kiln_free(dims);
  if (s->dynamic) {
    for (int i = 0; i < s->rank; i++) kiln_pb_bool(b, 6, s->dynamic[i]);
  }
  if (s->has_layout) {
    const kiln_layout_t *l = &s->layout;
    if (l->extra)
      fail(e, KILN_ERR_UNIMPLEMENTED("layout item '%s' has no LayoutProto field here", l->extra));
    kiln_pb_t lb = {0};
    kiln_pb_repeated(&lb, 1, l->minor_to_major, (size_t)l->rank, e->o->packed);
    for (int t = 0; t < l->num_tiles; t++) {
      kiln_pb_t tb = {0};
      for (int j = 0; j < l->tiles[t].num_dims; j++) {
        int64_t d = l->tiles[t].dims[j];
        kiln_pb_i64(&tb, 1, d < 0 ? INT64_MIN : d);
      }
      kiln_pb_message(&lb, 6, &tb);
      kiln_pb_free(&tb);
    }
    if (l->element_size_bits) kiln_pb_i64(&lb, 7, l->element_size_bits);
    if (l->memory_space) kiln_pb_i64(&lb, 8, l->memory_space);
    kiln_pb_message(b, 5, &lb);
    kiln_pb_free(&lb);
  }
}

static void shape_field(enc_t *e, kiln_pb_t *b, uint32_t field, const kiln_shape_t *s) {
  kiln_pb_t sub = {0};
  shape_proto(e, s, &sub);
  kiln_pb_message(b, field, &sub);
  kiln_pb_free(&sub);
}

/* ---- literals (LiteralProto) ---- */

static void literal_proto(enc_t *e, const kiln_literal_t *l, kiln_pb_t *b) {
  shape_field(e, b, 1, l->shape);
  if (kiln_shape_is_tuple(l->shape)) {
    for (int i = 0; i < l->num_tuple_elements; i++) {
      kiln_pb_t sub = {0};
      literal_proto(e, l->tuple_elements[i], &sub);
      kiln_pb_message(b, 10, &sub);
      kiln_pb_free(&sub);
    }
    return;
  }
  if (!kiln_shape_is_array(l->shape)) return;
  kiln_elem_type_t t = l->shape->type;
  size_t w = kiln_elem_type_storage_bytes(t), n = (size_t)l->num_elements;
  uint8_t *phys = kiln_malloc(n * w + 1);
  kiln_literal_write_physical(l, l->shape, phys);
  uint32_t field = 0;
  char how = 'b';
  switch (t) {
    case KILN_PRED:
      field = 2, how = 'u';
      break;
    case KILN_S32:
      field = 4, how = 's';
      break;
    case KILN_S64:
      field = 5, how = 's';
      break;
    case KILN_U32:
      field = 6, how = 'u';
      break;
    case KILN_U64:
      field = 7, how = 'u';
      break;
    case KILN_F32:
      field = 8, how = '4';
      break;
    case KILN_F64:
      field = 9, how = '8';
      break;
    case KILN_C64:
      field = 12, how = '4';
      break;
    case KILN_C128:
      field = 18, how = '8';
      break;
    case KILN_U8:
      field = 3;
      break;
    case KILN_S8:
      field = 15;
      break;
    case KILN_F16:
      field = 11;
      break;
    case KILN_BF16:
      field = 13;
      break;
    case KILN_U16:
      field = 16;
      break;
    case KILN_S16:
      field = 17;
      break;
    case KILN_F8E5M2:
      field = 19;
      break;
    case KILN_F8E4M3FN:
      field = 20;
      break;
    case KILN_S4:
      field = 21;
      break;
    case KILN_U4:
      field = 22;
      break;
    case KILN_F8E4M3B11FNUZ:
      field = 23;
      break;
    case KILN_F8E5M2FNUZ:
      field = 24;
      break;
    case KILN_F8E4M3FNUZ:
      field = 25;
      break;
    case KILN_S2:
      field = 26;
      break;
    case KILN_U2:
      field = 27;
      break;
    case KILN_F8E4M3:
      field = 28;
      break;
    case KILN_F8E3M4:
      field = 29;
      break;
    case KILN_S1:
      field = 30;
      break;
    case KILN_U1:
      field = 31;
      break;
    case KILN_F4E2M1FN:
      field = 32;
      break;
    case KILN_F8E8M0FNU:
      field = 33;
      break;
    default:
      break;
  }
  if (!field) {
    fail(e, KILN_ERR_UNIMPLEMENTED("literal of type %s", kiln_elem_type_name(t)));
  } else if (how == 'b') {
    if (n) kiln_pb_bytes(b, field, phys, n * w);
  } else if (how == 'u' || how == 's') {
    int64_t *v = kiln_calloc(n + 1, sizeof(int64_t));
    for (size_t i = 0; i < n; i++) {
      uint64_t u = 0;
      memcpy(&u, phys + i * w, w);
      if (how == 's' && w == 4)
        v[i] = (int32_t)(uint32_t)u; /* int32: sign-extended */
      else
        v[i] = (int64_t)u;
    }
    kiln_pb_repeated(b, field, v, n, e->o->packed);
    kiln_free(v);
  } else {
    size_t k = kiln_elem_type_is_complex(t) ? 2 : 1, vw = how == '4' ? 4 : 8;
    if (e->o->packed) {
      if (n) kiln_pb_bytes(b, field, phys, n * w);
    } else {
      for (size_t i = 0; i < n * k; i++) {
        uint64_t u = 0;
        memcpy(&u, phys + i * vw, vw);
        if (vw == 4)
          kiln_pb_fixed32(b, field, (uint32_t)u);
        else
          kiln_pb_fixed64(b, field, u);
      }
    }
  }
  kiln_free(phys);
}

/* ---- small parsers for raw attribute text ---- */

typedef struct cur {
  const char *p;
  bool bad;
} cur_t;

static void skip_ws(cur_t *c) {
  while (*c->p == ' ' || *c->p == '\n' || *c->p == '\t') c->p++;
}

static bool eat(cur_t *c, char ch) {
  skip_ws(c);
  if (*c->p != ch) return false;
  c->p++;
  return true;
}

static void expect(cur_t *c, char ch) {
  if (!eat(c, ch)) c->bad = true;
}

static int64_t read_int(cur_t *c) {
  skip_ws(c);
  char *end;
  long long v = strtoll(c->p, &end, 10);
  if (end == c->p) c->bad = true;
  c->p = end;
  return v;
}

/* A "..." string with C escapes decoded into `out`. */
static void read_string(cur_t *c, kiln_strbuf_t *out) {
  skip_ws(c);
  out->len = 0;
  kiln_strbuf_append(out, "");
  if (*c->p != '"') {
    c->bad = true;
    return;
  }
  c->p++;
  while (*c->p && *c->p != '"') {
    char ch = *c->p++;
    if (ch != '\\') {
      kiln_strbuf_append_char(out, ch);
      continue;
    }
    char x = *c->p++;
    switch (x) {
      case 'n':
        kiln_strbuf_append_char(out, '\n');
        break;
      case 't':
        kiln_strbuf_append_char(out, '\t');
        break;
      case 'r':
        kiln_strbuf_append_char(out, '\r');
        break;
      case 'x': {
        int v = 0, k = 0;
        while (k < 2 && strchr("0123456789abcdefABCDEF", *c->p) && *c->p) {
          char h = *c->p++;
          v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
          k++;
        }
        kiln_strbuf_append_char(out, (char)v);
        break;
      }
      default:
        if (x >= '0' && x <= '7') {
          int v = x - '0', k = 1;
          while (k < 3 && *c->p >= '0' && *c->p <= '7') v = v * 8 + (*c->p++ - '0'), k++;
          kiln_strbuf_append_char(out, (char)v);
        } else if (x) {
          kiln_strbuf_append_char(out, x);
        } else {
          c->bad = true;
          return;
        }
    }
  }
  if (*c->p != '"')
    c->bad = true;
  else
    c->p++;
}

/* A word (letters, digits, _ . -) into buf. */
static void read_word(cur_t *c, char *buf, size_t cap) {
  skip_ws(c);
  size_t n = 0;
  while ((*c->p >= 'a' && *c->p <= 'z') || (*c->p >= 'A' && *c->p <= 'Z') ||
         (*c->p >= '0' && *c->p <= '9') || *c->p == '_' || *c->p == '.' || *c->p == '-') {
    if (n + 1 < cap) buf[n++] = *c->p;
    c->p++;
  }
  buf[n] = '\0';
  if (!n) c->bad = true;
}

typedef KILN_VEC(int64_t) i64_vec_t;

/* {1,2,3} or {} */
static void read_list(cur_t *c, i64_vec_t *out) {
  expect(c, '{');
  if (eat(c, '}')) return;
  while (!c->bad) {
    int64_t v = read_int(c);
    kiln_vec_push(out, v);
    if (eat(c, '}')) return;
    expect(c, ',');
  }
}

/* A shape from text, through a one-parameter module. */
static kiln_shape_t *parse_shape(enc_t *e, const char *text, size_t n, kiln_hlo_module_t **holder) {
  kiln_strbuf_t t = {0};
  kiln_strbuf_printf(&t, "HloModule s\nENTRY e {\n  ROOT p = %.*s parameter(0)\n}\n", (int)n, text);
  kiln_status s = kiln_hlo_parse_module(t.data, t.len, NULL, holder);
  kiln_strbuf_free(&t);
  if (s) {
    fail(e, kiln_status_annotate(s, "shape '%.*s'", (int)n, text));
    return NULL;
  }
  return (*holder)->entry->root->shape;
}

/* ---- raw attributes ---- */

static void metadata_proto(enc_t *e, const char *v, kiln_pb_t *b) {
  cur_t c = {v, false};
  kiln_strbuf_t s = {0};
  kiln_pb_t mb = {0};
  expect(&c, '{');
  while (!c.bad && !eat(&c, '}')) {
    eat(&c, ',');
    char key[64];
    read_word(&c, key, sizeof key);
    expect(&c, '=');
    static const struct {
      const char *key;
      uint32_t field;
      bool str;
    } kFields[] = {{"op_type", 1, true},
                   {"op_name", 2, true},
                   {"source_file", 3, true},
                   {"source_line", 4, false},
                   {"deduplicated_name", 12, true},
                   {"stack_frame_id", 15, false},
                   {"scheduling_name", 16, true},
                   {"source_end_line", 17, false},
                   {"source_column", 18, false},
                   {"source_end_column", 19, false}};
    size_t k = 0;
    while (k < sizeof kFields / sizeof kFields[0] && strcmp(kFields[k].key, key)) k++;
    if (k == sizeof kFields / sizeof kFields[0]) {
      fail(e, KILN_ERR_UNIMPLEMENTED("metadata field '%s'", key));
      break;
    }
    if (kFields[k].str) {
      read_string(&c, &s);
      kiln_pb_bytes(&mb, kFields[k].field, s.data, s.len);
    } else {
      kiln_pb_i64(&mb, kFields[k].field, read_int(&c));
    }
  }
  if (c.bad) fail(e, KILN_ERR_UNIMPLEMENTED("metadata '%s'", v));
  kiln_pb_message(b, 7, &mb);
  kiln_pb_free(&mb);
  kiln_strbuf_free(&s);
}

/* {k="v",k2={...}} -> FrontendAttributes at `field`. */
static void frontend_proto(enc_t *e, const char *v, uint32_t field, kiln_pb_t *b) {
  cur_t c = {v, false};
  kiln_strbuf_t s = {0};
  kiln_pb_t fb = {0};
  expect(&c, '{');
  while (!c.bad && !eat(&c, '}')) {
    eat(&c, ',');
    char key[256];
    read_word(&c, key, sizeof key);
    expect(&c, '=');
    skip_ws(&c);
    if (*c.p == '"') {
      read_string(&c, &s);
    } else if (*c.p == '{') {
      const char *start = c.p;
      int depth = 0;
      do {
        if (*c.p == '{') depth++;
        if (*c.p == '}') depth--;
        c.p++;
      } while (*c.p && depth > 0);
      s.len = 0;
      kiln_strbuf_append_n(&s, start, (size_t)(c.p - start));
    } else {
      c.bad = true;
      break;
    }
    kiln_pb_t entry = {0};
    kiln_pb_string(&entry, 1, key);
    kiln_pb_bytes(&entry, 2, s.data, s.len);
    kiln_pb_message(&fb, 1, &entry);
    kiln_pb_free(&entry);
  }
  if (c.bad) fail(e, KILN_ERR_UNIMPLEMENTED("frontend_attributes '%s'", v));
  kiln_pb_message(b, field, &fb);
  kiln_pb_free(&fb);
  kiln_strbuf_free(&s);
}

static bool is_true(const char *v) {
  return !strcmp(v, "true");
}

static void raw_attr(enc_t *e, const kiln_hlo_instruction_t *in, const kiln_raw_attr_t *a,
                     kiln_pb_t *b) {
  const char *k = a->key, *v = a->value ? a->value : "";
  for (const char *const *d = e->o->dropped; d && *d; d++)
    if (!strcmp(*d, k)) return;
  cur_t c = {v, false};
  kiln_strbuf_t s = {0};
  if (!strcmp(k, "algorithm") ||
      (in->opcode == KILN_OP_RAGGED_DOT &&
       (!strcmp(k, "lhs_ragged_dims") || !strcmp(k, "rhs_group_dims")))) {
    /* written with precision_config / ragged_dot_dimension_numbers */
  } else if (!strcmp(k, "is_stable")) {
    kiln_pb_bool(b, 60, is_true(v));
  } else if (!strcmp(k, "cross_program_prefetch_index")) {
    kiln_pb_i64(b, 80, read_int(&c));
  } else if (!strcmp(k, "metadata")) {
    metadata_proto(e, v, b);
  } else if (!strcmp(k, "frontend_attributes")) {
    frontend_proto(e, v, 68, b);
  } else if (!strcmp(k, "parameter_replication")) {
    kiln_pb_t pb = {0};
    expect(&c, '{');
    while (!c.bad && !eat(&c, '}')) {
      eat(&c, ',');
      char w[16];
      read_word(&c, w, sizeof w);
      kiln_pb_bool(&pb, 1, is_true(w));
    }
    kiln_pb_message(b, 61, &pb);
    kiln_pb_free(&pb);
  } else if (!strcmp(k, "source_target_pairs")) {
    expect(&c, '{');
    while (!c.bad && !eat(&c, '}')) {
      eat(&c, ',');
      expect(&c, '{');
      kiln_pb_t pb = {0};
      kiln_pb_i64(&pb, 1, read_int(&c));
      expect(&c, ',');
      kiln_pb_i64(&pb, 2, read_int(&c));
      expect(&c, '}');
      kiln_pb_message(b, 52, &pb);
      kiln_pb_free(&pb);
    }
  } else if (!strcmp(k, "operand_layout_constraints") || !strcmp(k, "outfeed_shape")) {
    bool list = k[0] == 'o' && k[1] == 'p';
    if (list) expect(&c, '{');
    while (!c.bad) {
      skip_ws(&c);
      const char *start = c.p;
      int depth = 0;
      while (*c.p && !(depth == 0 && (*c.p == ',' || (list && *c.p == '}')))) {
        if (*c.p == '{' || *c.p == '(' || *c.p == '[') depth++;
        if (*c.p == '}' || *c.p == ')' || *c.p == ']') depth--;
        c.p++;
      }
      kiln_hlo_module_t *holder = NULL;
      kiln_shape_t *sh = parse_shape(e, start, (size_t)(c.p - start), &holder);
      if (sh) shape_field(e, b, list ? 57 : 29, sh);
      if (holder) kiln_hlo_module_destroy(holder);
      if (!list || eat(&c, '}')) break;
      expect(&c, ',');
    }
  } else if (!strcmp(k, "output_to_operand_aliasing")) {
    expect(&c, '{');
    while (!c.bad && !eat(&c, '}')) {
      eat(&c, ',');
      i64_vec_t out = {0}, idx = {0};
      read_list(&c, &out);
      expect(&c, ':');
      expect(&c, '(');
      int64_t operand = read_int(&c);
      expect(&c, ',');
      read_list(&c, &idx);
      expect(&c, ')');
      kiln_pb_t pb = {0};
      kiln_pb_repeated(&pb, 1, out.data, out.len, e->o->packed);
      kiln_pb_i64(&pb, 2, operand);
      kiln_pb_repeated(&pb, 3, idx.data, idx.len, e->o->packed);
      kiln_pb_message(b, 74, &pb);
      kiln_pb_free(&pb);
      kiln_vec_free(&out);
      kiln_vec_free(&idx);
    }
  } else if (!strcmp(k, "schedule")) {
    if (!strcmp(v, "SCHEDULE_LATEST"))
      kiln_pb_i64(b, 76, 1);
    else if (!strcmp(v, "SCHEDULE_EARLIEST"))
      kiln_pb_i64(b, 76, 2);
    else
      c.bad = true;
  } else if (!strcmp(k, "outfeed_config") || !strcmp(k, "infeed_config")) {
    read_string(&c, &s);
    kiln_pb_bytes(b, k[0] == 'o' ? 22 : 27, s.data, s.len);
  } else if (!strcmp(k, "async_execution_thread")) {
    read_string(&c, &s);
    kiln_pb_bytes(b, 79, s.data, s.len);
  } else if (!strcmp(k, "is_host_transfer")) {
    kiln_pb_bool(b, 47, is_true(v));
  } else if (!strcmp(k, "custom_call_has_side_effect")) {
    kiln_pb_bool(b, 65, is_true(v));
  } else if (!strcmp(k, "is_composite")) {
    kiln_pb_bool(b, 89, is_true(v));
  } else if (!strcmp(k, "delta")) {
    kiln_pb_i64(b, 66, read_int(&c));
  } else if (!strcmp(k, "feature_index")) {
    kiln_pb_i64(b, 25, read_int(&c));
  } else if (!strcmp(k, "epsilon")) {
    float f = strtof(v, NULL);
    uint32_t u;
    memcpy(&u, &f, 4);
    kiln_pb_fixed32(b, 24, u);
  } else if (!strcmp(k, "result_accuracy") && !strcmp(v, "{mode=HIGHEST}")) {
    kiln_pb_t pb = {0};
    kiln_pb_i64(&pb, 1, 1);
    kiln_pb_message(b, 91, &pb);
    kiln_pb_free(&pb);
  } else if (!strcmp(k, "result_accuracy") && !strcmp(v, "{mode=DEFAULT}")) {
    kiln_pb_t pb = {0};
    kiln_pb_i64(&pb, 1, 0);
    kiln_pb_message(b, 91, &pb);
    kiln_pb_free(&pb);
  } else {
    fail(e, KILN_ERR_UNIMPLEMENTED("attribute %s=%s of '%s'", k, v, in->name));
  }
  if (c.bad)
    fail(e, KILN_ERR_UNIMPLEMENTED("attribute %s=%s of '%s' did not parse", k, v, in->name));
  kiln_strbuf_free(&s);
}

/* ---- instructions ---- */

static int64_t comp_id(const enc_t *e, const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < e->m->computations.len; i++)
    if (e->m->computations.data[i] == c) return (int64_t)i + 1;
  return -1;
}

static int64_t word_index(const char *const *names, int n, const char *w) {
  for (int i = 0; i < n; i++)
    if (names[i] && w && !strcmp(names[i], w)) return i;
  return -1;
}

/* backend_config as the options say: bytes in field 43, or backend_config_payload (99) holding
 * them (Payload value=1) or naming them in the module's payloads (Payload id=2). */
static void backend_config_proto(enc_t *e, const char *data, size_t n, kiln_pb_t *b) {
  kiln_pb_t payload = {0};
  switch (e->o->config_payload) {
    case KILN_PROTO_CONFIG_FIELD:
      kiln_pb_bytes(b, 43, data, n);
      return;
    case KILN_PROTO_CONFIG_PAYLOAD_VALUE:
      kiln_pb_bytes(&payload, 1, data, n);
      break;
    case KILN_PROTO_CONFIG_PAYLOAD_ID:
      kiln_pb_bytes(&e->payloads, 22, data, n);
      kiln_pb_i64(&payload, 2, e->num_payloads++);
      break;
  }
  kiln_pb_message(b, 99, &payload);
  kiln_pb_free(&payload);
}

/* An axis name, 'quoted' or bare, into buf. */
static void read_axis_name(cur_t *c, char *buf, size_t cap) {
  bool quoted = eat(c, '\'');
  read_word(c, buf, cap);
  if (quoted) expect(c, '\'');
}

/* mesh['a'=2,...][, device_ids=(ids)] {'a','b':(pre)size} -> mesh_axes_replica_group_list
 * (93): {mesh=1: MeshProto {axes=1: {name=1, size=2}, device_ids=2}, axes=2: AxisRefProto
 * {mesh_axis_index=1, sub_axis_info=2: {pre_size=1, size=2}}}. Only device_ids written out. */
static void mesh_groups_proto(enc_t *e, cur_t *c, kiln_pb_t *b) {
  char names[16][64];
  int rank = 0;
  kiln_pb_t mesh = {0}, list = {0};
  expect(c, '[');
  while (!c->bad && rank < 16) {
    kiln_pb_t axis = {0};
    read_axis_name(c, names[rank], sizeof names[rank]);
    expect(c, '=');
    kiln_pb_string(&axis, 1, names[rank++]);
    kiln_pb_i64(&axis, 2, read_int(c));
    kiln_pb_message(&mesh, 1, &axis);
    kiln_pb_free(&axis);
    if (eat(c, ']')) break;
    expect(c, ',');
  }
  if (eat(c, ',')) {
    char word[16];
    read_word(c, word, sizeof word);
    if (strcmp(word, "device_ids")) c->bad = true;
    expect(c, '=');
    expect(c, '(');
    i64_vec_t ids = {0};
    while (!c->bad) {
      kiln_vec_push(&ids, read_int(c));
      if (eat(c, ')')) break;
      expect(c, ',');
    }
    kiln_pb_repeated(&mesh, 2, ids.data, ids.len, e->o->packed);
    kiln_vec_free(&ids);
  }
  kiln_pb_message(&list, 1, &mesh);
  expect(c, '{');
  while (!c->bad && !eat(c, '}')) {
    eat(c, ',');
    char name[64];
    read_axis_name(c, name, sizeof name);
    int index = 0;
    while (index < rank && strcmp(names[index], name)) index++;
    kiln_pb_t ref = {0};
    kiln_pb_i64(&ref, 1, index);
    if (eat(c, ':')) {
      kiln_pb_t sub = {0};
      expect(c, '(');
      kiln_pb_i64(&sub, 1, read_int(c));
      expect(c, ')');
      kiln_pb_i64(&sub, 2, read_int(c));
      kiln_pb_message(&ref, 2, &sub);
      kiln_pb_free(&sub);
    }
    kiln_pb_message(&list, 2, &ref);
    kiln_pb_free(&ref);
  }
  kiln_pb_message(b, 93, &list);
  kiln_pb_free(&mesh);
  kiln_pb_free(&list);
}

static void replica_groups_proto(enc_t *e, const char *v, kiln_pb_t *b) {
  cur_t c = {v, false};
  skip_ws(&c);
  if (!strncmp(c.p, "mesh", 4)) {
    c.p += 4;
    mesh_groups_proto(e, &c, b);
  } else if (*c.p == '[') {
    /* [G,S]<=[dims]T(perm) -> collective_device_list.iota_replica_group_list, or
     * iota_collective_device_list (92) */
    kiln_pb_t iota = {0}, list = {0};
    c.p++;
    kiln_pb_i64(&iota, 1, read_int(&c));
    expect(&c, ',');
    kiln_pb_i64(&iota, 2, read_int(&c));
    expect(&c, ']');
    expect(&c, '<');
    expect(&c, '=');
    expect(&c, '[');
    i64_vec_t dims = {0}, perm = {0};
    while (!c.bad) {
      kiln_vec_push(&dims, read_int(&c));
      if (eat(&c, ']')) break;
      expect(&c, ',');
    }
    if (eat(&c, 'T')) {
      expect(&c, '(');
      while (!c.bad) {
        kiln_vec_push(&perm, read_int(&c));
        if (eat(&c, ')')) break;
        expect(&c, ',');
      }
    }
    kiln_pb_repeated(&iota, 3, dims.data, dims.len, e->o->packed);
    kiln_pb_repeated(&iota, 4, perm.data, perm.len, e->o->packed);
    if (e->o->iota_at_instruction) {
      kiln_pb_message(b, 92, &iota);
    } else {
      kiln_pb_message(&list, 2, &iota);
      kiln_pb_message(b, 87, &list);
    }
    kiln_pb_free(&iota);
    kiln_pb_free(&list);
    kiln_vec_free(&dims);
    kiln_vec_free(&perm);
  } else {
    /* {{0,1},{2,3}} -> the older repeated ReplicaGroup field */
    expect(&c, '{');
    while (!c.bad && !eat(&c, '}')) {
      eat(&c, ',');
      i64_vec_t ids = {0};
      read_list(&c, &ids);
      kiln_pb_t g = {0};
      kiln_pb_repeated(&g, 1, ids.data, ids.len, e->o->packed);
      kiln_pb_message(b, 49, &g);
      kiln_pb_free(&g);
      kiln_vec_free(&ids);
    }
  }
  skip_ws(&c);
  if (c.bad || *c.p) fail(e, KILN_ERR_UNIMPLEMENTED("replica_groups=%s", v));
}

static void list_field(enc_t *e, kiln_pb_t *b, uint32_t field, const kiln_i64_list_t *l) {
  kiln_pb_repeated(b, field, l->v, (size_t)l->n, e->o->packed);
}

static void called_proto(enc_t *e, const kiln_hlo_instruction_t *in, kiln_pb_t *b) {
  /* XLA's order: condition before body, select before scatter, true before false. */
  static const char *const kSecond[] = {"body", "scatter", "false_computation"};
  i64_vec_t ids = {0};
  for (int pass = 0; pass < 2; pass++) {
    for (int g = 0; g < in->num_called_groups; g++) {
      const kiln_called_group_t *grp = &in->called_groups[g];
      bool second = word_index(kSecond, 3, grp->key) >= 0;
      if (second != (pass == 1)) continue;
      for (int i = 0; i < grp->n; i++) kiln_vec_push(&ids, comp_id(e, grp->comps[i]));
    }
  }
  kiln_pb_repeated(b, 38, ids.data, ids.len, e->o->packed);
  kiln_vec_free(&ids);
}

static void instruction_proto(enc_t *e, const kiln_hlo_instruction_t *in, kiln_pb_t *b) {
  bool packed = e->o->packed;
  kiln_pb_string(b, 1, in->name);
  kiln_pb_string(b, 2, kiln_hlo_opcode_name(in->opcode));
  shape_field(e, b, 3, in->shape);
  kiln_pb_i64(b, 35, in->id);
  if (in->opcode == KILN_OP_PARAMETER) kiln_pb_i64(b, 9, in->parameter_number);
  if (in->opcode == KILN_OP_CONSTANT && in->literal && !in->literal->unknown) {
    kiln_pb_t lb = {0};
    literal_proto(e, in->literal, &lb);
    kiln_pb_message(b, 8, &lb);
    kiln_pb_free(&lb);
  }
  for (int i = 0; i < in->num_operands; i++) kiln_pb_i64(b, 36, in->operands[i]->id);
  for (int i = 0; i < in->num_control_predecessors; i++)
    kiln_pb_i64(b, 37, in->control_predecessors[i]->id);
  called_proto(e, in, b);
  if (in->opcode == KILN_OP_GET_TUPLE_ELEMENT) kiln_pb_i64(b, 13, in->tuple_index);
  if (in->opcode == KILN_OP_IOTA)
    kiln_pb_i64(b, 14, in->iota_dimension);
  else if (in->has_dimensions)
    list_field(e, b, 14, &in->dimensions);
  for (int i = 0; i < in->num_slice_dims; i++) {
    kiln_pb_t sb = {0};
    kiln_pb_i64(&sb, 1, in->slice[i].start);
    kiln_pb_i64(&sb, 2, in->slice[i].limit);
    kiln_pb_i64(&sb, 3, in->slice[i].stride);
    kiln_pb_message(b, 17, &sb);
    kiln_pb_free(&sb);
  }
  list_field(e, b, 20, &in->dynamic_slice_sizes);
  if (in->num_pad_dims) {
    kiln_pb_t pb = {0};
    for (int i = 0; i < in->num_pad_dims; i++) {
      kiln_pb_t d = {0};
      kiln_pb_i64(&d, 1, in->padding[i].lo);
      kiln_pb_i64(&d, 2, in->padding[i].hi);
      kiln_pb_i64(&d, 3, in->padding[i].interior);
      kiln_pb_message(&pb, 1, &d);
      kiln_pb_free(&d);
    }
    kiln_pb_message(b, 21, &pb);
    kiln_pb_free(&pb);
  }
  if (in->num_window_dims) {
    kiln_pb_t wb = {0};
    for (int i = 0; i < in->num_window_dims; i++) {
      const kiln_window_dim_t *w = &in->window[i];
      kiln_pb_t d = {0};
      kiln_pb_i64(&d, 1, w->size);
      kiln_pb_i64(&d, 2, w->stride);
      kiln_pb_i64(&d, 3, w->pad_lo);
      kiln_pb_i64(&d, 4, w->pad_hi);
      kiln_pb_i64(&d, 5, w->rhs_dilate);
      kiln_pb_i64(&d, 6, w->lhs_dilate);
      if (w->reversal) kiln_pb_bool(&d, 7, true);
      kiln_pb_message(&wb, 1, &d);
      kiln_pb_free(&d);
    }
    kiln_pb_message(b, 15, &wb);
    kiln_pb_free(&wb);
  }
  if (in->has_conv_dnums) {
    const kiln_conv_dnums_t *d = &in->conv_dnums;
    kiln_pb_t cb = {0};
    kiln_pb_i64(&cb, 7, d->input_batch);
    kiln_pb_i64(&cb, 8, d->input_feature);
    kiln_pb_repeated(&cb, 11, d->input_spatial, (size_t)d->num_spatial, packed);
    kiln_pb_i64(&cb, 3, d->kernel_input_feature);
    kiln_pb_i64(&cb, 4, d->kernel_output_feature);
    kiln_pb_repeated(&cb, 6, d->kernel_spatial, (size_t)d->num_spatial, packed);
    kiln_pb_i64(&cb, 9, d->output_batch);
    kiln_pb_i64(&cb, 10, d->output_feature);
    kiln_pb_repeated(&cb, 12, d->output_spatial, (size_t)d->num_spatial, packed);
    kiln_pb_message(b, 16, &cb);
    kiln_pb_free(&cb);
  }
  if (in->feature_group_count) kiln_pb_i64(b, 50, in->feature_group_count);
  if (in->batch_group_count) kiln_pb_i64(b, 58, in->batch_group_count);
  if (in->has_dot_dnums) {
    kiln_pb_t db = {0};
    list_field(e, &db, 1, &in->dot_dnums.lhs_contracting);
    list_field(e, &db, 2, &in->dot_dnums.rhs_contracting);
    list_field(e, &db, 3, &in->dot_dnums.lhs_batch);
    list_field(e, &db, 4, &in->dot_dnums.rhs_batch);
    if (in->opcode == KILN_OP_RAGGED_DOT) {
      /* RaggedDotDimensionNumbers {dot_dimension_numbers=1, lhs_ragged_dimensions=2,
       * rhs_group_dimensions=3} */
      kiln_pb_t rb = {0};
      kiln_pb_message(&rb, 1, &db);
      static const char *const kKeys[] = {"lhs_ragged_dims", "rhs_group_dims"};
      for (int k = 0; k < 2; k++) {
        const char *v = kiln_hlo_instruction_raw_attr(in, kKeys[k]);
        if (!v) continue;
        cur_t c = {v, false};
        i64_vec_t dims = {0};
        read_list(&c, &dims);
        if (c.bad) fail(e, KILN_ERR_UNIMPLEMENTED("%s=%s", kKeys[k], v));
        kiln_pb_repeated(&rb, (uint32_t)(2 + k), dims.data, dims.len, packed);
        kiln_vec_free(&dims);
      }
      kiln_pb_message(b, 90, &rb);
      kiln_pb_free(&rb);
    } else {
      kiln_pb_message(b, 30, &db);
    }
    kiln_pb_free(&db);
  }
  static const char *const kPrec[] = {"default", "high", "highest"};
  static const char *const kAlg[] = {NULL,
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
                                     "dot_bf16_bf16_f32_x9"};
  const char *dot_algorithm = NULL;
  if (in->opcode != KILN_OP_RNG_BIT_GENERATOR)
    dot_algorithm =
        in->rng_algorithm ? in->rng_algorithm : kiln_hlo_instruction_raw_attr(in, "algorithm");
  if (in->num_operand_precision || dot_algorithm) {
    kiln_pb_t pb = {0};
    for (int i = 0; i < in->num_operand_precision; i++) {
      int64_t p = word_index(kPrec, 3, in->operand_precision[i]);
      if (p < 0)
        fail(e, KILN_ERR_UNIMPLEMENTED("operand precision '%s'", in->operand_precision[i]));
      kiln_pb_i64(&pb, 1, p);
    }
    if (dot_algorithm) {
      int64_t a = word_index(kAlg, 14, dot_algorithm);
      if (a < 0) fail(e, KILN_ERR_UNIMPLEMENTED("algorithm '%s'", dot_algorithm));
      kiln_pb_i64(&pb, 2, a);
    }
    kiln_pb_message(b, 51, &pb);
    kiln_pb_free(&pb);
  }
  if (in->has_gather_dnums) {
    const kiln_gather_dnums_t *g = &in->gather_dnums;
    kiln_pb_t gb = {0};
    list_field(e, &gb, 1, &g->offset_dims);
    list_field(e, &gb, 2, &g->collapsed_slice_dims);
    list_field(e, &gb, 3, &g->start_index_map);
    kiln_pb_i64(&gb, 4, g->index_vector_dim);
    list_field(e, &gb, 5, &g->operand_batching_dims);
    list_field(e, &gb, 6, &g->start_indices_batching_dims);
    kiln_pb_message(b, 33, &gb);
    kiln_pb_free(&gb);
  }
  list_field(e, b, 34, &in->gather_slice_sizes);
  if (in->has_scatter_dnums) {
    const kiln_scatter_dnums_t *s = &in->scatter_dnums;
    kiln_pb_t sb = {0};
    list_field(e, &sb, 1, &s->update_window_dims);
    list_field(e, &sb, 2, &s->inserted_window_dims);
    list_field(e, &sb, 3, &s->scatter_dims_to_operand_dims);
    kiln_pb_i64(&sb, 4, s->index_vector_dim);
    list_field(e, &sb, 5, &s->input_batching_dims);
    list_field(e, &sb, 6, &s->scatter_indices_batching_dims);
    kiln_pb_message(b, 48, &sb);
    kiln_pb_free(&sb);
  }
  if (in->indices_are_sorted) kiln_pb_bool(b, 67, true);
  if (in->unique_indices) kiln_pb_bool(b, 69, true);
  static const char *const kDir[] = {NULL, "EQ", "NE", "LT", "LE", "GT", "GE"};
  if (in->comparison_direction) kiln_pb_string(b, 63, kDir[in->comparison_direction]);
  static const char *const kCmpType[] = {NULL, "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
  if (in->comparison_type) kiln_pb_string(b, 72, kCmpType[in->comparison_type]);
  static const char *const kKind[] = {NULL, "kLoop", "kInput", "kOutput", "kCustom"};
  if (in->fusion_kind_text)
    kiln_pb_string(b, 11, in->fusion_kind_text);
  else if (in->fusion_kind)
    kiln_pb_string(b, 11, kKind[in->fusion_kind]);
  if (in->custom_call_target) kiln_pb_string(b, 28, in->custom_call_target);
  if (in->api_version) kiln_pb_i64(b, 77, in->api_version);
  if (in->api_version_text && !in->api_version)
    fail(e, KILN_ERR_UNIMPLEMENTED("api_version=%s", in->api_version_text));
  if (in->backend_config_form == KILN_BACKEND_CONFIG_RAW && in->backend_config &&
      in->backend_config[0] == '"') {
    /* a string whose decoded bytes hold a NUL: kiln keeps it verbatim */
    cur_t c = {in->backend_config, false};
    kiln_strbuf_t s = {0};
    read_string(&c, &s);
    if (c.bad) fail(e, KILN_ERR_UNIMPLEMENTED("backend_config %s", in->backend_config));
    backend_config_proto(e, s.data, s.len, b);
    kiln_strbuf_free(&s);
  } else if (in->backend_config_form != KILN_BACKEND_CONFIG_NONE && in->backend_config) {
    backend_config_proto(e, in->backend_config, strlen(in->backend_config), b);
  }
  if (in->is_stable) kiln_pb_bool(b, 60, true);
  if (in->exponent_bits) kiln_pb_i64(b, 18, in->exponent_bits);
  if (in->mantissa_bits) kiln_pb_i64(b, 19, in->mantissa_bits);
  static const char *const kFft[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  if (in->fft_type) kiln_pb_i64(b, 31, word_index(kFft, 4, in->fft_type));
  list_field(e, b, 32, &in->fft_length);
  static const char *const kDist[] = {NULL, "rng_uniform", "rng_normal"};
  if (in->rng_distribution) kiln_pb_i64(b, 23, word_index(kDist, 3, in->rng_distribution));
  static const char *const kRng[] = {"rng_default", "rng_three_fry", "rng_philox"};
  if (in->opcode == KILN_OP_RNG_BIT_GENERATOR && in->rng_algorithm) {
    int64_t a = word_index(kRng, 3, in->rng_algorithm);
    if (a < 0) fail(e, KILN_ERR_UNIMPLEMENTED("algorithm=%s", in->rng_algorithm));
    kiln_pb_i64(b, 70, a);
  }
  if (in->opcode == KILN_OP_TRIANGULAR_SOLVE) {
    static const char *const kT[] = {NULL, "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
    kiln_pb_t tb = {0};
    kiln_pb_bool(&tb, 1, in->left_side);
    kiln_pb_bool(&tb, 2, in->lower);
    kiln_pb_bool(&tb, 3, in->unit_diagonal);
    if (in->transpose_a) kiln_pb_i64(&tb, 4, word_index(kT, 4, in->transpose_a));
    kiln_pb_message(b, 59, &tb);
    kiln_pb_free(&tb);
  } else if (in->opcode == KILN_OP_CHOLESKY) {
    kiln_pb_t cb = {0};
    kiln_pb_bool(&cb, 1, in->lower);
    kiln_pb_message(b, 62, &cb);
    kiln_pb_free(&cb);
  }
  if (in->channel_id) kiln_pb_i64(b, 26, in->channel_id);
  if (in->replica_groups) replica_groups_proto(e, in->replica_groups, b);
  if (in->use_global_device_ids) kiln_pb_bool(b, 71, true);
  if (in->constrain_layout) kiln_pb_bool(b, 56, true);
  if (in->opcode == KILN_OP_TOPK) {
    kiln_pb_i64(b, 81, in->k);
    kiln_pb_bool(b, 85, in->largest);
  }
  for (int i = 0; i < in->num_raw_attrs; i++) raw_attr(e, in, &in->raw_attrs[i], b);
}

/* ---- computations and the module ---- */

static void computation_proto(enc_t *e, const kiln_hlo_computation_t *c, kiln_pb_t *b) {
  kiln_pb_string(b, 1, c->name);
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_pb_t ib = {0};
    instruction_proto(e, c->instructions.data[i], &ib);
    kiln_pb_message(b, 2, &ib);
    kiln_pb_free(&ib);
  }
  kiln_pb_i64(b, 5, comp_id(e, c));
  if (c->root) kiln_pb_i64(b, 6, c->root->id);
  if (c->trailing_attrs && c->trailing_attrs[0]) {
    cur_t cur = {c->trailing_attrs, false};
    char key[64];
    read_word(&cur, key, sizeof key);
    expect(&cur, '=');
    kiln_strbuf_t s = {0};
    read_string(&cur, &s);
    skip_ws(&cur);
    if (cur.bad || *cur.p || strcmp(key, "execution_thread"))
      fail(e, KILN_ERR_UNIMPLEMENTED("computation attributes '%s'", c->trailing_attrs));
    else
      kiln_pb_bytes(b, 8, s.data, s.len);
    kiln_strbuf_free(&s);
  }
}

kiln_status kiln_hlo_proto_encode(const kiln_hlo_module_t *m,
                                  const kiln_hlo_proto_encode_options_t *opts, uint8_t **out,
                                  size_t *out_len) {
  kiln_hlo_proto_encode_options_t defaults = {.packed = true};
  enc_t e = {.o = opts ? opts : &defaults, .m = m};
  kiln_pb_t b = {0}, config = {0};
  kiln_pb_string(&b, 1, m->name);
  kiln_pb_string(&b, 2, m->entry->name);
  kiln_pb_i64(&b, 6, comp_id(&e, m->entry));
  kiln_pb_i64(&b, 5, 1);
  bool scheduled = false;
  for (size_t i = 0; i < m->computations.len; i++) {
    kiln_pb_t cb = {0};
    computation_proto(&e, m->computations.data[i], &cb);
    kiln_pb_message(&b, 3, &cb);
    kiln_pb_free(&cb);
  }
  if (m->has_entry_layout) {
    kiln_pb_t pb = {0};
    for (int i = 0; i < m->num_entry_layout_params; i++)
      shape_field(&e, &pb, 1, m->entry_layout_params[i]);
    shape_field(&e, &pb, 2, m->entry_layout_result);
    kiln_pb_message(&b, 4, &pb);
    kiln_pb_free(&pb);
  }
  if (m->num_io_aliases) {
    kiln_pb_t ab = {0};
    for (int i = 0; i < m->num_io_aliases; i++) {
      const kiln_io_alias_t *a = &m->io_aliases[i];
      kiln_pb_t eb = {0};
      list_field(&e, &eb, 1, &a->output_index);
      kiln_pb_i64(&eb, 2, a->param_number);
      list_field(&e, &eb, 3, &a->param_index);
      if (a->kind) kiln_pb_i64(&eb, 4, !strcmp(a->kind, "must-alias") ? 2 : 1);
      kiln_pb_message(&ab, 1, &eb);
      kiln_pb_free(&eb);
    }
    kiln_pb_message(&b, 8, &ab);
    kiln_pb_free(&ab);
  }
  for (int i = 0; i < m->num_raw_attrs; i++) {
    const kiln_raw_attr_t *a = &m->raw_attrs[i];
    const char *v = a->value ? a->value : "";
    bool dropped = false;
    for (const char *const *d = e.o->dropped; d && *d; d++) dropped |= !strcmp(*d, a->key);
    if (dropped) continue;
    if (!strcmp(a->key, "is_scheduled") && !strcmp(v, "true")) {
      scheduled = true;
    } else if (!strcmp(a->key, "frontend_attributes")) {
      frontend_proto(&e, v, 19, &b);
    } else if (e.o->with_config && !strcmp(a->key, "replica_count")) {
      kiln_pb_i64(&config, 4, strtoll(v, NULL, 10));
    } else if (e.o->with_config && !strcmp(a->key, "num_partitions")) {
      kiln_pb_i64(&config, 5, strtoll(v, NULL, 10));
    } else {
      fail(&e, KILN_ERR_UNIMPLEMENTED("module attribute %s=%s", a->key, v));
    }
  }
  if (scheduled) {
    /* HloScheduleProto: sequences = map<int64, InstructionSequence{instruction_ids=1}> */
    kiln_pb_t sb = {0};
    for (size_t i = 0; i < m->computations.len; i++) {
      const kiln_hlo_computation_t *c = m->computations.data[i];
      kiln_pb_t seq = {0}, entry = {0};
      for (size_t j = 0; j < c->instructions.len; j++)
        kiln_pb_i64(&seq, 1, c->instructions.data[j]->id);
      kiln_pb_i64(&entry, 1, comp_id(&e, c));
      kiln_pb_message(&entry, 2, &seq);
      kiln_pb_message(&sb, 1, &entry);
      kiln_pb_free(&seq);
      kiln_pb_free(&entry);
    }
    kiln_pb_message(&b, 7, &sb);
    kiln_pb_free(&sb);
  }
  if (e.payloads.len) kiln_pb_raw(&b, e.payloads.data, e.payloads.len);
  kiln_pb_free(&e.payloads);
  if (e.err) {
    kiln_pb_free(&b);
    kiln_pb_free(&config);
    return e.err;
  }
  if (e.o->with_config) {
    kiln_pb_t w = {0};
    kiln_pb_message(&w, 1, &b);
    kiln_pb_message(&w, 2, &config);
    kiln_pb_free(&b);
    b = w;
  }
  kiln_pb_free(&config);
  *out = b.data ? b.data : kiln_malloc(1);
  *out_len = b.len;
  return KILN_STATUS_OK;
}
