/* HloModuleProto -> HLO text -> kiln's IR (parsed and verified), so that everything
 * below the frontend sees one input format.
 *
 * Field numbers (xla/service/hlo.proto, xla/xla.proto): HloModuleProto name=1,
 * entry_computation_name=2, computations=3, host_program_shape=4, entry_computation_id=6,
 * schedule=7, input_output_alias=8 (entries=1: output_shape_index=1, parameter_number=2,
 * parameter_shape_index=3, kind=4), frontend_attributes=19; HloComputationProto name=1,
 * instructions=2, id=5, root_id=6, execution_thread=8; HloInstructionProto name=1, id=35;
 * ProgramShapeProto parameters=1, result=2; HloModuleProtoWithConfig hlo_module=1,
 * config=2; HloModuleConfigProto replica_count=4, num_partitions=5. */
#include "compiler/frontend/hlo_proto.h"

#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/proto_wire.h"
#include "base/str.h"
#include "compiler/frontend/hlo_proto_instr.h"
#include "compiler/frontend/shape_proto.h"

typedef KILN_VEC(kiln_pw_field_t) field_vec_t;
typedef KILN_VEC(char *) str_vec_t;

bool kiln_hlo_bytes_are_text(const void *bytes, size_t n) {
  const char *p = bytes, *end = p + (bytes ? n : 0);
  while (p < end) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
      p++;
    } else if (end - p >= 2 && p[0] == '/' && p[1] == '/') {
      while (p < end && *p != '\n') p++;
    } else if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
      const char *q = p + 2;
      while (q + 1 < end && !(q[0] == '*' && q[1] == '/')) q++;
      if (q + 1 >= end) return false;
      p = q + 2;
    } else {
      break;
    }
  }
  return end - p >= 9 && memcmp(p, "HloModule", 9) == 0;
}

static bool is_name(const char *s) {
  if (!s[0]) return false;
  for (const char *p = s; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.'))
      return false;
  }
  return true;
}

/* One computation's header facts (read before any instruction is printed). */
typedef struct comp_info {
  kiln_pw_field_t field;
  char *name;
  int64_t id, root_id;
  bool has_root_id;
  kiln_pw_field_t exec_thread;
  bool has_exec_thread;
} comp_info_t;

typedef struct decoder {
  kiln_pw_reader_t r;
  kiln_arena_t arena;
  KILN_VEC(comp_info_t) comps;
  kiln_hashmap_t comp_by_id;
  str_vec_t comp_names;
  KILN_VEC(kiln_pw_field_t) payloads; /* field 22: backend configs instructions name by index */
  kiln_strbuf_t text;
} decoder_t;

static kiln_status read_comp_info(kiln_pw_reader_t *mr, comp_info_t *c) {
  kiln_pw_reader_t r;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(mr, &c->field, "HloComputationProto", &r));
  while (kiln_pw_more(&r)) {
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(&r, &f));
    if (f.number == 1) {
      kiln_free(c->name);
      c->name = NULL;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_string(&r, &f, &c->name));
    } else if (f.number == 5) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(&r, &f, &c->id));
    } else if (f.number == 6) {
      c->has_root_id = true;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(&r, &f, &c->root_id));
    } else if (f.number == 8) {
      c->exec_thread = f;
      c->has_exec_thread = true;
    }
  }
  if (!c->name || !is_name(c->name))
    return kiln_pw_error(mr, &c->field, "computation name '%s' is not a valid HLO name",
                         c->name ? c->name : "");
  return KILN_STATUS_OK;
}

/* The instruction fields one computation needs before printing: names, ids, types. */
typedef struct instr_index {
  field_vec_t fields;
  str_vec_t names;
  KILN_VEC(kiln_elem_type_t) types;
  KILN_VEC(int64_t) ids;
  kiln_hashmap_t by_id;
} instr_index_t;

static void instr_index_free(instr_index_t *x) {
  for (size_t i = 0; i < x->names.len; i++) kiln_free(x->names.data[i]);
  kiln_vec_free(&x->names);
  kiln_vec_free(&x->fields);
  kiln_vec_free(&x->types);
  kiln_vec_free(&x->ids);
  kiln_hashmap_free(&x->by_id);
}

/* First look at one instruction: name (1), shape element type (3.2), id (35). */
static kiln_status peek_instruction(kiln_pw_reader_t *cr, const kiln_pw_field_t *f,
                                    const char *comp, instr_index_t *x) {
  kiln_pw_reader_t r;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(cr, f, "HloInstructionProto", &r));
  char *name = NULL;
  int64_t id = 0, type = 0;
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(&r)) {
    kiln_pw_field_t g;
    if ((s = kiln_pw_next(&r, &g))) break;
    if (g.number == 1) {
      kiln_free(name);
      name = NULL;
      s = kiln_pw_as_string(&r, &g, &name);
    } else if (g.number == 35) {
      s = kiln_pw_as_i64(&r, &g, &id);
    } else if (g.number == 3) {
      kiln_pw_reader_t sr;
      if ((s = kiln_pw_sub(&r, &g, "ShapeProto", &sr))) break;
      while (!s && kiln_pw_more(&sr)) {
        kiln_pw_field_t h;
        if ((s = kiln_pw_next(&sr, &h))) break;
        if (h.number == 2) s = kiln_pw_as_i64(&sr, &h, &type);
      }
    }
  }
  if (!s && (!name || !is_name(name)))
    s = kiln_pw_error(cr, f, "instruction name '%s' in computation '%s' is not a valid HLO name",
                      name ? name : "", comp);
  if (!s && kiln_hashmap_get(&x->by_id, (const char *)&id, sizeof id))
    s = kiln_pw_error(cr, f, "instruction '%s' of computation '%s' repeats id %" PRId64, name, comp,
                      id);
  if (s) {
    kiln_free(name);
    return s;
  }
  kiln_elem_type_t t = KILN_TUPLE;
  if (!kiln_elem_type_from_proto(type, &t)) t = KILN_TUPLE;
  kiln_vec_push(&x->fields, *f);
  kiln_vec_push(&x->names, name);
  kiln_vec_push(&x->types, t);
  kiln_vec_push(&x->ids, id);
  kiln_hashmap_put(&x->by_id, (const char *)&id, sizeof id, (void *)(uintptr_t)x->names.len);
  return KILN_STATUS_OK;
}

static kiln_status computation_text(decoder_t *d, const comp_info_t *c, bool is_entry) {
  kiln_pw_reader_t r;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(&d->r, &c->field, "HloComputationProto", &r));
  instr_index_t x;
  memset(&x, 0, sizeof x);
  kiln_hashmap_init(&x.by_id);
  kiln_status s = KILN_STATUS_OK;
  kiln_pw_reader_t scan = r;
  while (!s && kiln_pw_more(&scan)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(&scan, &f))) break;
    if (f.number == 2) s = peek_instruction(&scan, &f, c->name, &x);
  }
  size_t root = x.fields.len ? x.fields.len - 1 : 0;
  if (!s && !x.fields.len)
    s = kiln_pw_error(&d->r, &c->field, "computation '%s' has no instructions", c->name);
  if (!s && c->has_root_id) {
    uintptr_t i =
        (uintptr_t)kiln_hashmap_get(&x.by_id, (const char *)&c->root_id, sizeof c->root_id);
    if (!i)
      s = kiln_pw_error(&d->r, &c->field,
                        "root_id %" PRId64 " is not an instruction of computation '%s'", c->root_id,
                        c->name);
    else
      root = i - 1;
  }
  if (!s) {
    kiln_strbuf_printf(&d->text, "\n%s%s {\n", is_entry ? "ENTRY " : "", c->name);
    kiln_hlo_proto_scope_t scope = {
        .computation = c->name,
        .instr_by_id = &x.by_id,
        .instr_names = x.names.data,
        .instr_types = x.types.data,
        .comp_by_id = &d->comp_by_id,
        .comp_names = d->comp_names.data,
        .arena = &d->arena,
        .payloads = d->payloads.data,
        .num_payloads = d->payloads.len,
        .module_reader = &d->r,
    };
    for (size_t i = 0; !s && i < x.fields.len; i++) {
      kiln_pw_reader_t ir;
      if ((s = kiln_pw_sub(&r, &x.fields.data[i], "HloInstructionProto", &ir))) break;
      s = kiln_hlo_proto_instruction_text(&ir, &scope, i == root, &d->text);
    }
    kiln_strbuf_append_char(&d->text, '}');
    if (!s && c->has_exec_thread) {
      const uint8_t *t;
      size_t n;
      if (!(s = kiln_pw_as_bytes(&r, &c->exec_thread, &t, &n)) && n) {
        kiln_strbuf_append(&d->text, ", execution_thread=");
        kiln_hlo_proto_append_quoted(&d->text, (const char *)t, n);
      }
    }
    kiln_strbuf_append_char(&d->text, '\n');
  }
  instr_index_free(&x);
  return s;
}

/* ProgramShapeProto -> entry_computation_layout={(p, ...)->result}. */
static kiln_status entry_layout_text(decoder_t *d, const kiln_pw_field_t *f) {
  kiln_pw_reader_t r;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(&d->r, f, "ProgramShapeProto", &r));
  kiln_strbuf_t params = {0}, result = {0};
  size_t n = 0;
  bool has_result = false;
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(&r)) {
    kiln_pw_field_t g;
    if ((s = kiln_pw_next(&r, &g))) break;
    if (g.number == 1) {
      if (n++) kiln_strbuf_append(&params, ", ");
      s = kiln_hlo_proto_append_shape(&r, &g, &d->arena, &params, NULL);
    } else if (g.number == 2) {
      result.len = 0;
      has_result = true;
      s = kiln_hlo_proto_append_shape(&r, &g, &d->arena, &result, NULL);
    }
  }
  if (!s && has_result)
    kiln_strbuf_printf(&d->text, ", entry_computation_layout={(%s)->%s}",
                       params.len ? params.data : "", result.data);
  kiln_strbuf_free(&params);
  kiln_strbuf_free(&result);
  return kiln_status_annotate(s, "in host_program_shape");
}

/* HloInputOutputAliasProto -> input_output_alias={ {out}: (param, {index}, kind), ... }. */
static kiln_status io_alias_text(decoder_t *d, const kiln_pw_field_t *f) {
  kiln_pw_reader_t r;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(&d->r, f, "HloInputOutputAliasProto", &r));
  kiln_strbuf_t t = {0};
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(&r)) {
    kiln_pw_field_t g;
    if ((s = kiln_pw_next(&r, &g))) break;
    if (g.number != 1) continue;
    kiln_pw_reader_t e;
    if ((s = kiln_pw_sub(&r, &g, "HloInputOutputAliasProto.AliasEntryProto", &e))) break;
    kiln_pw_i64_vec_t out = {0}, index = {0};
    int64_t param = 0, kind = 0;
    while (!s && kiln_pw_more(&e)) {
      kiln_pw_field_t h;
      if ((s = kiln_pw_next(&e, &h))) break;
      if (h.number == 1)
        s = kiln_pw_append_varints(&e, &h, &out);
      else if (h.number == 2)
        s = kiln_pw_as_i64(&e, &h, &param);
      else if (h.number == 3)
        s = kiln_pw_append_varints(&e, &h, &index);
      else if (h.number == 4)
        s = kiln_pw_as_i64(&e, &h, &kind);
    }
    if (!s && (kind < 0 || kind > 2))
      s = kiln_pw_error(&e, NULL, "unknown alias kind %" PRId64, kind);
    if (!s) {
      kiln_strbuf_append(&t, t.len ? ", {" : "{");
      for (size_t i = 0; i < out.len; i++)
        kiln_strbuf_printf(&t, i ? ",%" PRId64 : "%" PRId64, out.data[i]);
      kiln_strbuf_printf(&t, "}: (%" PRId64 ", {", param);
      for (size_t i = 0; i < index.len; i++)
        kiln_strbuf_printf(&t, i ? ",%" PRId64 : "%" PRId64, index.data[i]);
      kiln_strbuf_append_char(&t, '}');
      if (kind) kiln_strbuf_append(&t, kind == 1 ? ", may-alias" : ", must-alias");
      kiln_strbuf_append_char(&t, ')');
    }
    kiln_vec_free(&out);
    kiln_vec_free(&index);
  }
  if (!s && t.len) kiln_strbuf_printf(&d->text, ", input_output_alias={ %s }", t.data);
  kiln_strbuf_free(&t);
  return kiln_status_annotate(s, "in input_output_alias");
}

/* The module's text from its proto; extra module attributes (e.g. from a config) are
 * appended to the header. */
static kiln_status module_text(decoder_t *d, const char *extra_attrs) {
  char *name = NULL, *entry_name = NULL;
  int64_t entry_id = 0;
  bool has_entry_id = false, scheduled = false;
  kiln_pw_field_t layout = {0}, alias = {0}, frontend = {0};
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(&d->r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(&d->r, &f))) break;
    switch (f.number) {
      case 1:
        kiln_free(name);
        name = NULL;
        s = kiln_pw_as_string(&d->r, &f, &name);
        break;
      case 2:
        kiln_free(entry_name);
        entry_name = NULL;
        s = kiln_pw_as_string(&d->r, &f, &entry_name);
        break;
      case 3: {
        comp_info_t c = {.field = f};
        if ((s = read_comp_info(&d->r, &c))) {
          kiln_free(c.name);
          break;
        }
        if (kiln_hashmap_get(&d->comp_by_id, (const char *)&c.id, sizeof c.id))
          s = kiln_pw_error(&d->r, &f, "computation '%s' repeats id %" PRId64, c.name, c.id);
        kiln_vec_push(&d->comps, c);
        kiln_vec_push(&d->comp_names, c.name);
        if (!s)
          kiln_hashmap_put(&d->comp_by_id, (const char *)&c.id, sizeof c.id,
                           (void *)(uintptr_t)d->comp_names.len);
        break;
      }
      case 4:
        layout = f;
        break;
      case 6:
        has_entry_id = true;
        s = kiln_pw_as_i64(&d->r, &f, &entry_id);
        break;
      case 7:
        scheduled = f.wire_type == KILN_PW_LEN;
        break;
      case 8:
        alias = f;
        break;
      case 19:
        frontend = f;
        break;
      case 22:
        if (f.wire_type != KILN_PW_LEN)
          s = kiln_pw_error(&d->r, &f, "payloads is not bytes");
        else
          kiln_vec_push(&d->payloads, f);
        break;
      default:
        break;
    }
  }
  if (!s && !d->comps.len) s = kiln_pw_error(&d->r, NULL, "module has no computations");
  size_t entry = d->comps.len ? d->comps.len - 1 : 0;
  if (!s && has_entry_id) {
    uintptr_t i =
        (uintptr_t)kiln_hashmap_get(&d->comp_by_id, (const char *)&entry_id, sizeof entry_id);
    if (!i)
      s = kiln_pw_error(&d->r, NULL, "entry_computation_id %" PRId64 " is not a computation",
                        entry_id);
    else
      entry = i - 1;
  } else if (!s && entry_name && entry_name[0]) {
    size_t i = 0;
    while (i < d->comps.len && strcmp(d->comps.data[i].name, entry_name)) i++;
    if (i == d->comps.len)
      s = kiln_pw_error(&d->r, NULL, "entry_computation_name '%s' is not a computation",
                        entry_name);
    else
      entry = i;
  }
  if (!s && name && name[0] && !is_name(name))
    s = kiln_pw_error(&d->r, NULL, "module name '%s' is not a valid HLO name", name);
  if (!s) {
    kiln_strbuf_printf(&d->text, "HloModule %s", name && name[0] ? name : "module");
    if (scheduled) kiln_strbuf_append(&d->text, ", is_scheduled=true");
    if (layout.number) s = entry_layout_text(d, &layout);
  }
  if (!s && alias.number) s = io_alias_text(d, &alias);
  if (!s && frontend.number) s = kiln_hlo_proto_append_frontend_attrs(&d->r, &frontend, &d->text);
  if (!s && extra_attrs) kiln_strbuf_append(&d->text, extra_attrs);
  if (!s) kiln_strbuf_append_char(&d->text, '\n');
  for (size_t i = 0; !s && i < d->comps.len; i++)
    s = computation_text(d, &d->comps.data[i], i == entry);
  kiln_free(name);
  kiln_free(entry_name);
  return s;
}

static void decoder_init(decoder_t *d, const void *bytes, size_t n, const char *message) {
  memset(d, 0, sizeof *d);
  kiln_pw_reader_init(&d->r, bytes, n, message);
  kiln_arena_init(&d->arena);
  kiln_hashmap_init(&d->comp_by_id);
}

static void decoder_free(decoder_t *d) {
  for (size_t i = 0; i < d->comps.len; i++) kiln_free(d->comps.data[i].name);
  kiln_vec_free(&d->comps);
  kiln_vec_free(&d->comp_names);
  kiln_vec_free(&d->payloads);
  kiln_hashmap_free(&d->comp_by_id);
  kiln_arena_destroy(&d->arena);
  kiln_strbuf_free(&d->text);
}

/* Decodes the HloModuleProto in `r`'s span (a sub-reader or the whole input). */
static kiln_status module_from_reader(const kiln_pw_reader_t *r, const char *extra_attrs,
                                      kiln_hlo_module_t **out) {
  decoder_t d;
  decoder_init(&d, NULL, 0, "HloModuleProto");
  d.r = *r;
  d.r.message = "HloModuleProto";
  kiln_status s = module_text(&d, extra_attrs);
  if (!s) {
    kiln_hlo_parse_options_t opts = {.filename = "<HloModuleProto>"};
    s = kiln_hlo_parse_module(d.text.data, d.text.len, &opts, out);
    if (s) s = kiln_status_annotate(s, "in the HLO text made from the HloModuleProto");
  }
  if (!s) {
    s = kiln_hlo_module_verify(*out);
    if (s) {
      kiln_hlo_module_destroy(*out);
      *out = NULL;
    }
  }
  decoder_free(&d);
  return s;
}

static kiln_status module_from_proto(const void *bytes, size_t n, kiln_hlo_module_t **out) {
  *out = NULL;
  if (n && !bytes) return KILN_ERR_INVALID("HloModuleProto: %zu bytes at NULL", n);
  kiln_pw_reader_t r;
  kiln_pw_reader_init(&r, bytes, n, "HloModuleProto");
  return module_from_reader(&r, NULL, out);
}

static kiln_status module_from_proto_with_config(const void *bytes, size_t n,
                                                 kiln_hlo_module_t **out, int64_t *num_replicas,
                                                 int64_t *num_partitions) {
  *out = NULL;
  if (num_replicas) *num_replicas = 1;
  if (num_partitions) *num_partitions = 1;
  if (n && !bytes) return KILN_ERR_INVALID("HloModuleProtoWithConfig: %zu bytes at NULL", n);
  kiln_pw_reader_t r;
  kiln_pw_reader_init(&r, bytes, n, "HloModuleProtoWithConfig");
  kiln_pw_field_t module = {0};
  int64_t replicas = 0, partitions = 0;
  while (kiln_pw_more(&r)) {
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(&r, &f));
    if (f.number == 1) {
      module = f;
    } else if (f.number == 2) {
      kiln_pw_reader_t c;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(&r, &f, "HloModuleConfigProto", &c));
      while (kiln_pw_more(&c)) {
        kiln_pw_field_t g;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(&c, &g));
        if (g.number == 4) KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(&c, &g, &replicas));
        if (g.number == 5) KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(&c, &g, &partitions));
        if ((g.number == 4 || g.number == 5) && (g.value > INT32_MAX))
          return kiln_pw_error(&c, &g, "%s %" PRId64 " is out of range",
                               g.number == 4 ? "replica_count" : "num_partitions",
                               (int64_t)g.value);
      }
    }
  }
  if (!module.number) return kiln_pw_error(&r, NULL, "no hlo_module (field 1)");
  kiln_pw_reader_t mr;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(&r, &module, "HloModuleProto", &mr));
  kiln_strbuf_t extra = {0};
  if (replicas > 1) kiln_strbuf_printf(&extra, ", replica_count=%" PRId64, replicas);
  if (partitions > 1) kiln_strbuf_printf(&extra, ", num_partitions=%" PRId64, partitions);
  kiln_status s = module_from_reader(&mr, extra.data, out);
  kiln_strbuf_free(&extra);
  if (!s && num_replicas && replicas > 0) *num_replicas = replicas;
  if (!s && num_partitions && partitions > 0) *num_partitions = partitions;
  return s;
}

/* Every allocation may fail: an out-of-memory scope (base/alloc.h) around the whole read. */
kiln_status kiln_hlo_module_from_proto(const void *bytes, size_t n, kiln_hlo_module_t **out) {
  KILN_OOM_SCOPED_RETURN(module_from_proto(bytes, n, out), if (out) *out = NULL,
                         "reading an HloModuleProto");
}

/* Every allocation may fail: an out-of-memory scope (base/alloc.h) around the whole read. */
kiln_status kiln_hlo_module_from_proto_with_config(const void *bytes, size_t n,
                                                   kiln_hlo_module_t **out, int64_t *num_replicas,
                                                   int64_t *num_partitions) {
  KILN_OOM_SCOPED_RETURN(module_from_proto_with_config(bytes, n, out, num_replicas, num_partitions),
                         if (out) *out = NULL, "reading an HloModuleProtoWithConfig");
}
