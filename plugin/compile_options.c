/* CompileOptionsProto (xla/pjrt/proto/compile_options.proto) -> kiln_pjrt_compile_options_t.
 * Field numbers: CompileOptionsProto argument_layouts=1, executable_build_options=3,
 * env_option_overrides=7; ExecutableBuildOptionsProto device_ordinal=1, result_layout=2,
 * debug_options=3, num_replicas=4, num_partitions=5, use_spmd_partitioning=6,
 * device_assignment=9; DebugOptions xla_dump_to=109, xla_gpu_enable_command_buffer=258,
 * xla_gpu_all_reduce_combine_threshold_bytes=157, xla_gpu_all_gather_...=212,
 * xla_gpu_reduce_scatter_...=213;
 * DeviceAssignmentProto replica_count=1, computation_count=2, computation_devices=3
 * (replica_device_ids=1); OptionOverrideProto string=1, bool=2, int=3, double=4. */
#include "plugin/compile_options.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/proto_wire.h"
#include "base/str.h"
#include "compiler/frontend/shape_proto.h"
#include "compiler/passes/pass.h"

typedef KILN_VEC(char *) str_vec_t;

/* The combine threshold a DebugOptions field number or override name sets, or NULL. */
static int64_t *threshold_field(kiln_pjrt_compile_options_t *o, uint32_t number, const char *name) {
  if (number == 157 || (name && !strcmp(name, "xla_gpu_all_reduce_combine_threshold_bytes")))
    return &o->all_reduce_combine_threshold_bytes;
  if (number == 212 || (name && !strcmp(name, "xla_gpu_all_gather_combine_threshold_bytes")))
    return &o->all_gather_combine_threshold_bytes;
  if (number == 213 || (name && !strcmp(name, "xla_gpu_reduce_scatter_combine_threshold_bytes")))
    return &o->reduce_scatter_combine_threshold_bytes;
  return NULL;
}

static kiln_status read_debug_options(kiln_pw_reader_t *r, kiln_pjrt_compile_options_t *o) {
  while (kiln_pw_more(r)) {
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(r, &f));
    int64_t *threshold = threshold_field(o, f.number, NULL);
    if (threshold) {
      int64_t v = 0;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(r, &f, &v));
      *threshold = v > 0 ? v : 0;
    } else if (f.number == 109) {
      char *dir = NULL;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_string(r, &f, &dir));
      kiln_free(o->xla_dump_to);
      o->xla_dump_to = dir[0] ? dir : NULL;
      if (!dir[0]) kiln_free(dir);
    } else if (f.number == 258) {
      kiln_pw_i64_vec_t kinds = {0};
      kiln_status s = kiln_pw_append_varints(r, &f, &kinds);
      o->has_command_buffer_option = true;
      if (kinds.len) o->command_buffers = true;
      kiln_vec_free(&kinds);
      KILN_RETURN_IF_ERROR_PLAIN(s);
    }
  }
  return KILN_STATUS_OK;
}

static kiln_status read_device_assignment(kiln_pw_reader_t *r, kiln_pjrt_compile_options_t *o) {
  int32_t replicas = 0, computations = 0;
  kiln_pw_field_t replicas_field = {0};
  KILN_VEC(kiln_pw_i64_vec_t) per_computation = {0};
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(r, &f))) break;
    if (f.number == 1) {
      replicas_field = f;
      s = kiln_pw_as_i32(r, &f, &replicas);
    } else if (f.number == 2) {
      s = kiln_pw_as_i32(r, &f, &computations);
    } else if (f.number == 3) {
      kiln_pw_reader_t sub;
      if ((s = kiln_pw_sub(r, &f, "DeviceAssignmentProto.ComputationDevice", &sub))) break;
      kiln_pw_i64_vec_t ids = {0};
      while (!s && kiln_pw_more(&sub)) {
        kiln_pw_field_t g;
        if ((s = kiln_pw_next(&sub, &g))) break;
        if (g.number == 1) s = kiln_pw_append_varints(&sub, &g, &ids);
      }
      kiln_vec_push(&per_computation, ids);
    }
  }
  if (!s && (replicas < 0 || computations < 0))
    s = kiln_pw_error(r, &replicas_field, "negative replica_count %d or computation_count %d",
                      replicas, computations);
  if (!s && per_computation.len != (size_t)computations)
    s = kiln_pw_error(r, NULL, "computation_count is %d but %zu computation_devices are given",
                      computations, per_computation.len);
  for (size_t c = 0; !s && c < per_computation.len; c++) {
    if (per_computation.data[c].len != (size_t)replicas)
      s = kiln_pw_error(r, NULL,
                        "computation_devices[%zu] has %zu replica_device_ids, replica_count is %d",
                        c, per_computation.data[c].len, replicas);
  }
  if (!s) {
    o->has_device_assignment = true;
    o->da_replica_count = replicas;
    o->da_computation_count = computations;
    kiln_free(o->device_ids);
    o->device_ids = kiln_calloc((size_t)replicas * (size_t)computations + 1, sizeof(int64_t));
    for (int32_t c = 0; c < computations; c++)
      for (int32_t rep = 0; rep < replicas; rep++)
        o->device_ids[(size_t)rep * (size_t)computations + (size_t)c] =
            per_computation.data[c].data[rep];
  }
  for (size_t c = 0; c < per_computation.len; c++) kiln_vec_free(&per_computation.data[c]);
  kiln_vec_free(&per_computation);
  return s;
}

static kiln_status read_shape_text(kiln_pw_reader_t *r, const kiln_pw_field_t *f, char **out) {
  kiln_pw_reader_t sub;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, f, "ShapeProto", &sub));
  kiln_strbuf_t b = {0};
  kiln_status s = kiln_shape_proto_print(&sub, &b);
  if (s) {
    kiln_strbuf_free(&b);
    return s;
  }
  *out = kiln_strbuf_take(&b);
  return KILN_STATUS_OK;
}

static kiln_status read_build_options(kiln_pw_reader_t *r, kiln_pjrt_compile_options_t *o) {
  while (kiln_pw_more(r)) {
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(r, &f));
    kiln_pw_reader_t sub;
    switch (f.number) {
      case 1:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(r, &f, &o->device_ordinal));
        break;
      case 2: {
        char *text = NULL;
        KILN_RETURN_IF_ERROR(read_shape_text(r, &f, &text), "in result_layout");
        kiln_free(o->result_layout);
        o->result_layout = text;
        break;
      }
      case 3:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, &f, "DebugOptions", &sub));
        KILN_RETURN_IF_ERROR_PLAIN(read_debug_options(&sub, o));
        break;
      case 4:
      case 5: {
        int64_t v;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_i64(r, &f, &v));
        if (v < 0 || v > INT32_MAX)
          return kiln_pw_error(r, &f, "%s %" PRId64 " is out of range",
                               f.number == 4 ? "num_replicas" : "num_partitions", v);
        if (v == 0) v = 1;
        if (f.number == 4)
          o->num_replicas = v;
        else
          o->num_partitions = v;
        break;
      }
      case 6:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_as_bool(r, &f, &o->use_spmd_partitioning));
        break;
      case 9:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, &f, "DeviceAssignmentProto", &sub));
        KILN_RETURN_IF_ERROR_PLAIN(read_device_assignment(&sub, o));
        break;
      default:
        break;
    }
  }
  return KILN_STATUS_OK;
}

/* One map<string, OptionOverrideProto> entry -> "key=value". */
static kiln_status read_env_override(kiln_pw_reader_t *r, char **out) {
  char *key = NULL;
  kiln_strbuf_t value = {0};
  kiln_status s = KILN_STATUS_OK;
  while (!s && kiln_pw_more(r)) {
    kiln_pw_field_t f;
    if ((s = kiln_pw_next(r, &f))) break;
    if (f.number == 1) {
      kiln_free(key);
      key = NULL;
      s = kiln_pw_as_string(r, &f, &key);
    } else if (f.number == 2) {
      kiln_pw_reader_t v;
      if ((s = kiln_pw_sub(r, &f, "OptionOverrideProto", &v))) break;
      value.len = 0;
      if (value.data) value.data[0] = '\0';
      while (!s && kiln_pw_more(&v)) {
        kiln_pw_field_t g;
        if ((s = kiln_pw_next(&v, &g))) break;
        value.len = 0;
        if (value.data) value.data[0] = '\0';
        if (g.number == 1) {
          char *str = NULL;
          if (!(s = kiln_pw_as_string(&v, &g, &str))) kiln_strbuf_append(&value, str);
          kiln_free(str);
        } else if (g.number == 2) {
          bool b = false;
          if (!(s = kiln_pw_as_bool(&v, &g, &b))) kiln_strbuf_append(&value, b ? "true" : "false");
        } else if (g.number == 3) {
          int64_t i = 0;
          if (!(s = kiln_pw_as_i64(&v, &g, &i))) kiln_strbuf_printf(&value, "%" PRId64, i);
        } else if (g.number == 4) {
          double d = 0;
          if (!(s = kiln_pw_as_double(&v, &g, &d))) kiln_strbuf_printf(&value, "%.17g", d);
        }
      }
    }
  }
  if (!s) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_printf(&b, "%s=%s", key ? key : "", value.data ? value.data : "");
    *out = kiln_strbuf_take(&b);
  }
  kiln_free(key);
  kiln_strbuf_free(&value);
  return s;
}

static kiln_status decode(kiln_pw_reader_t *r, kiln_pjrt_compile_options_t *o, str_vec_t *layouts,
                          str_vec_t *overrides) {
  while (kiln_pw_more(r)) {
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(r, &f));
    kiln_pw_reader_t sub;
    if (f.number == 1) {
      char *text = NULL;
      KILN_RETURN_IF_ERROR(read_shape_text(r, &f, &text), "in argument_layouts[%zu]", layouts->len);
      kiln_vec_push(layouts, text);
    } else if (f.number == 3) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_sub(r, &f, "ExecutableBuildOptionsProto", &sub));
      KILN_RETURN_IF_ERROR_PLAIN(read_build_options(&sub, o));
    } else if (f.number == 7) {
      KILN_RETURN_IF_ERROR_PLAIN(
          kiln_pw_sub(r, &f, "CompileOptionsProto.EnvOptionOverridesEntry", &sub));
      char *text = NULL;
      KILN_RETURN_IF_ERROR_PLAIN(read_env_override(&sub, &text));
      kiln_vec_push(overrides, text);
    }
  }
  return KILN_STATUS_OK;
}

/* The env_option_overrides kiln honours, applied over the DebugOptions (XLA applies them
 * last too); "key=value" text as read_env_override made it. */
static kiln_status apply_override(kiln_pjrt_compile_options_t *o, const char *text) {
  const char *eq = strchr(text, '=');
  if (!eq) return KILN_STATUS_OK;
  char name[96];
  size_t n = (size_t)(eq - text);
  if (n >= sizeof name) return KILN_STATUS_OK;
  memcpy(name, text, n);
  name[n] = '\0';
  const char *value = eq + 1;
  int64_t *threshold = threshold_field(o, 0, name);
  if (threshold) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (!*value || *end || errno)
      return KILN_ERR_INVALID("env_option_overrides: %s needs an integer number of bytes, not '%s'",
                              name, value);
    *threshold = v > 0 ? (int64_t)v : 0;
  } else if (!strcmp(name, "xla_dump_to")) {
    kiln_free(o->xla_dump_to);
    o->xla_dump_to = *value ? kiln_strdup(value) : NULL;
  } else if (!strcmp(name, "xla_gpu_enable_command_buffer")) {
    o->has_command_buffer_option = true; /* "" turns them off, a list of kinds on */
    o->command_buffers = *value != '\0';
  }
  return KILN_STATUS_OK;
}

void kiln_pjrt_compile_options_to_passes(const kiln_pjrt_compile_options_t *o,
                                         kiln_pass_options_t *passes) {
  const int64_t given[3] = {o->all_reduce_combine_threshold_bytes,
                            o->all_gather_combine_threshold_bytes,
                            o->reduce_scatter_combine_threshold_bytes};
  int64_t *const to[3] = {&passes->all_reduce_combine_threshold_bytes,
                          &passes->all_gather_combine_threshold_bytes,
                          &passes->reduce_scatter_combine_threshold_bytes};
  for (int i = 0; i < 3; i++) /* the passes read 0 as their default and -1 as off */
    if (given[i] != KILN_PJRT_OPTION_UNSET) *to[i] = given[i] > 0 ? given[i] : -1;
}

static void free_strings(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) kiln_free(v[i]);
  kiln_free(v);
}

static void set_defaults(kiln_pjrt_compile_options_t *o) {
  memset(o, 0, sizeof *o);
  o->device_ordinal = -1;
  o->num_replicas = 1;
  o->num_partitions = 1;
  o->all_reduce_combine_threshold_bytes = KILN_PJRT_OPTION_UNSET;
  o->all_gather_combine_threshold_bytes = KILN_PJRT_OPTION_UNSET;
  o->reduce_scatter_combine_threshold_bytes = KILN_PJRT_OPTION_UNSET;
}

kiln_status kiln_pjrt_compile_options_decode(const void *bytes, size_t n,
                                             kiln_pjrt_compile_options_t *out) {
  set_defaults(out);
  if (n > 0 && !bytes) return KILN_ERR_INVALID("compile options: %zu bytes at NULL", n);
  kiln_pw_reader_t r;
  kiln_pw_reader_init(&r, bytes, n, "CompileOptionsProto");
  str_vec_t layouts = {0}, overrides = {0};
  kiln_status s = decode(&r, out, &layouts, &overrides);
  if (!s && (layouts.len > INT32_MAX || overrides.len > INT32_MAX))
    s = KILN_ERR_INVALID("compile options: too many argument layouts or overrides");
  out->argument_layouts = layouts.data;
  out->num_argument_layouts = (int32_t)layouts.len;
  out->env_overrides = overrides.data;
  out->num_env_overrides = (int32_t)overrides.len;
  for (size_t i = 0; !s && i < overrides.len; i++) s = apply_override(out, overrides.data[i]);
  if (s) {
    kiln_pjrt_compile_options_free(out);
    set_defaults(out);
    return kiln_status_annotate(s, "while decoding the compile options (CompileOptionsProto)");
  }
  return KILN_STATUS_OK;
}

void kiln_pjrt_compile_options_free(kiln_pjrt_compile_options_t *o) {
  if (!o) return;
  free_strings(o->argument_layouts,
               (size_t)(o->num_argument_layouts > 0 ? o->num_argument_layouts : 0));
  free_strings(o->env_overrides, (size_t)(o->num_env_overrides > 0 ? o->num_env_overrides : 0));
  kiln_free(o->device_ids);
  kiln_free(o->xla_dump_to);
  kiln_free(o->result_layout);
  memset(o, 0, sizeof *o);
}
