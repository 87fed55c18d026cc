/* The PJRT client of kiln-bench and kiln-replay (client.h). Everything after dlsym goes through
 * the PJRT_Api table. */
#include "benchmarks/kiln_bench/client.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "tools/common/pjrt_run.h"

#define TRY(c, call, what) \
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_status_from_error((c)->plugin->api, (call), (what)))

static const PJRT_NamedValue *find_attribute(const PJRT_NamedValue *a, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (a[i].name && a[i].name_size == strlen(name) && !memcmp(a[i].name, name, a[i].name_size))
      return &a[i];
  return NULL;
}

static void read_version(kiln_bench_plugin_t *p) {
  snprintf(p->version, sizeof(p->version), "PJRT %d.%d", p->api->pjrt_api_version.major_version,
           p->api->pjrt_api_version.minor_version);
  PJRT_Plugin_Attributes_Args a = {.struct_size = PJRT_Plugin_Attributes_Args_STRUCT_SIZE};
  kiln_status s = kiln_pjrt_status_from_error(p->api, p->api->PJRT_Plugin_Attributes(&a),
                                              "PJRT_Plugin_Attributes");
  if (s) {
    kiln_status_free(s);
    return;
  }
  const PJRT_NamedValue *v = find_attribute(a.attributes, a.num_attributes, "kiln_version");
  if (v && v->type == PJRT_NamedValue_kString) {
    snprintf(p->version, sizeof(p->version), "kiln %.*s", (int)v->value_size, v->string_value);
    return;
  }
  v = find_attribute(a.attributes, a.num_attributes, "xla_version");
  if (v && v->type == PJRT_NamedValue_kInt64)
    snprintf(p->version, sizeof(p->version), "xla %lld", (long long)v->int64_value);
}

kiln_status kiln_bench_plugin_open(const char *path, kiln_bench_plugin_t *out) {
  memset(out, 0, sizeof(*out));
  out->handle = kiln_pjrt_plugin_dlopen(path, out->path, sizeof(out->path));
  if (!out->handle)
    return kiln_status_make(KILN_UNAVAILABLE,
                            "cannot load the PJRT plugin %s: %s (name another with --plugin=PATH)",
                            out->path, dlerror());
  const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(out->handle, "GetPjrtApi");
  out->api = get ? get() : NULL;
  if (!out->api)
    return kiln_status_make(KILN_UNAVAILABLE, "%s has no GetPjrtApi (not a PJRT plugin)",
                            out->path);
  if (out->api->pjrt_api_version.major_version != PJRT_API_MAJOR ||
      out->api->struct_size < PJRT_Api_STRUCT_SIZE)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "%s speaks PJRT %d.%d (a table of %zu bytes); this client needs %d.%d",
                            out->path, out->api->pjrt_api_version.major_version,
                            out->api->pjrt_api_version.minor_version, out->api->struct_size,
                            PJRT_API_MAJOR, PJRT_API_MINOR);
  PJRT_Plugin_Initialize_Args ia = {.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE};
  KILN_RETURN_IF_ERROR(kiln_pjrt_status_from_error(out->api, out->api->PJRT_Plugin_Initialize(&ia),
                                                   "PJRT_Plugin_Initialize"),
                       "while loading %s", out->path);
  read_version(out);
  return NULL;
}

static PJRT_NamedValue string_option(const char *name, const char *v) {
  PJRT_NamedValue o = {.struct_size = PJRT_NamedValue_STRUCT_SIZE,
                       .name = name,
                       .name_size = strlen(name),
                       .type = PJRT_NamedValue_kString,
                       .string_value = v,
                       .value_size = strlen(v)};
  return o;
}

kiln_status kiln_bench_client_create(const kiln_bench_plugin_t *p,
                                     const kiln_bench_client_options_t *o,
                                     kiln_bench_client_t *out) {
  memset(out, 0, sizeof(*out));
  out->plugin = p;
  PJRT_NamedValue opts[3];
  size_t n = 0;
  if (o && o->platform) opts[n++] = string_option("platform", o->platform);
  if (o && o->cache_dir) opts[n++] = string_option("cache_dir", o->cache_dir);
  if (o && o->command_buffers >= 0) {
    PJRT_NamedValue v = {.struct_size = PJRT_NamedValue_STRUCT_SIZE,
                         .name = "command_buffers",
                         .name_size = strlen("command_buffers"),
                         .type = PJRT_NamedValue_kBool,
                         .bool_value = o->command_buffers != 0,
                         .value_size = 1};
    opts[n++] = v;
  }
  PJRT_Client_Create_Args ca = {.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE,
                                .create_options = n ? opts : NULL,
                                .num_options = n};
  TRY(out, p->api->PJRT_Client_Create(&ca), "PJRT_Client_Create");
  out->client = ca.client;
  kiln_status s = NULL;
  PJRT_Client_PlatformName_Args pn = {.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE,
                                      .client = out->client};
  s = kiln_pjrt_status_from_error(p->api, p->api->PJRT_Client_PlatformName(&pn),
                                  "PJRT_Client_PlatformName");
  if (!s)
    snprintf(out->platform, sizeof(out->platform), "%.*s", (int)pn.platform_name_size,
             pn.platform_name);
  PJRT_Client_AddressableDevices_Args ad = {
      .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = out->client};
  if (!s)
    s = kiln_pjrt_status_from_error(p->api, p->api->PJRT_Client_AddressableDevices(&ad),
                                    "PJRT_Client_AddressableDevices");
  if (!s && ad.num_addressable_devices == 0)
    s = kiln_status_make(KILN_UNAVAILABLE, "%s: the client has no addressable device", p->path);
  if (s) {
    kiln_bench_client_destroy(out);
    return s;
  }
  out->device = ad.addressable_devices[0];
  return NULL;
}

void kiln_bench_client_destroy(kiln_bench_client_t *c) {
  if (!c->client) return;
  PJRT_Client_Destroy_Args a = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE,
                                .client = c->client};
  kiln_status_free(kiln_pjrt_status_from_error(
      c->plugin->api, c->plugin->api->PJRT_Client_Destroy(&a), "PJRT_Client_Destroy"));
  c->client = NULL;
}

static kiln_status count_outputs(const kiln_bench_client_t *c, kiln_bench_exe_t *e) {
  const PJRT_Api *api = c->plugin->api;
  PJRT_LoadedExecutable_GetExecutable_Args ge = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
      .loaded_executable = e->exe};
  TRY(c, api->PJRT_LoadedExecutable_GetExecutable(&ge), "PJRT_LoadedExecutable_GetExecutable");
  PJRT_Executable_NumOutputs_Args no = {.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE,
                                        .executable = ge.executable};
  kiln_status s = kiln_pjrt_status_from_error(api, api->PJRT_Executable_NumOutputs(&no),
                                              "PJRT_Executable_NumOutputs");
  e->num_outputs = no.num_outputs;
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = ge.executable};
  return kiln_status_join(s, kiln_pjrt_status_from_error(api, api->PJRT_Executable_Destroy(&ed),
                                                         "PJRT_Executable_Destroy"));
}

/* Takes over a freshly made loaded executable: its output count, or it is destroyed. */
static kiln_status adopt(const kiln_bench_client_t *c, PJRT_LoadedExecutable *exe,
                         kiln_bench_exe_t *out) {
  out->exe = exe;
  kiln_status s = count_outputs(c, out);
  if (s) kiln_bench_exe_destroy(c, out);
  return s;
}

kiln_status kiln_bench_compile(const kiln_bench_client_t *c, const char *code, size_t len,
                               const char *format, kiln_bench_exe_t *out) {
  memset(out, 0, sizeof(*out));
  PJRT_Program program = {.struct_size = PJRT_Program_STRUCT_SIZE,
                          .code = (char *)code,
                          .code_size = len,
                          .format = format,
                          .format_size = strlen(format)};
  PJRT_Client_Compile_Args ca = {.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE,
                                 .client = c->client,
                                 .program = &program};
  TRY(c, c->plugin->api->PJRT_Client_Compile(&ca), "PJRT_Client_Compile");
  return adopt(c, ca.executable, out);
}

kiln_status kiln_bench_serialize(const kiln_bench_client_t *c, const kiln_bench_exe_t *e,
                                 char **bytes, size_t *len) {
  *bytes = NULL;
  *len = 0;
  const PJRT_Api *api = c->plugin->api;
  PJRT_LoadedExecutable_GetExecutable_Args ge = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
      .loaded_executable = e->exe};
  TRY(c, api->PJRT_LoadedExecutable_GetExecutable(&ge), "PJRT_LoadedExecutable_GetExecutable");
  PJRT_Executable_Serialize_Args sa = {.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE,
                                       .executable = ge.executable};
  kiln_status s = kiln_pjrt_status_from_error(api, api->PJRT_Executable_Serialize(&sa),
                                              "PJRT_Executable_Serialize");
  if (!s) {
    *bytes = kiln_malloc(sa.serialized_bytes_size + 1);
    memcpy(*bytes, sa.serialized_bytes, sa.serialized_bytes_size);
    *len = sa.serialized_bytes_size;
    if (sa.serialized_executable_deleter)
      sa.serialized_executable_deleter(sa.serialized_executable);
  }
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = ge.executable};
  return kiln_status_join(s, kiln_pjrt_status_from_error(api, api->PJRT_Executable_Destroy(&ed),
                                                         "PJRT_Executable_Destroy"));
}

kiln_status kiln_bench_deserialize(const kiln_bench_client_t *c, const char *bytes, size_t len,
                                   kiln_bench_exe_t *out) {
  memset(out, 0, sizeof(*out));
  PJRT_Executable_DeserializeAndLoad_Args da = {
      .struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE,
      .client = c->client,
      .serialized_executable = bytes,
      .serialized_executable_size = len};
  TRY(c, c->plugin->api->PJRT_Executable_DeserializeAndLoad(&da),
      "PJRT_Executable_DeserializeAndLoad");
  return adopt(c, da.loaded_executable, out);
}

void kiln_bench_exe_destroy(const kiln_bench_client_t *c, kiln_bench_exe_t *e) {
  if (!e->exe) return;
  PJRT_LoadedExecutable_Destroy_Args a = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = e->exe};
  kiln_status_free(kiln_pjrt_status_from_error(c->plugin->api,
                                               c->plugin->api->PJRT_LoadedExecutable_Destroy(&a),
                                               "PJRT_LoadedExecutable_Destroy"));
  e->exe = NULL;
}

bool kiln_bench_cost_property(const kiln_bench_client_t *c, const kiln_bench_exe_t *e,
                              const char *name, int64_t *value) {
  const PJRT_Api *api = c->plugin->api;
  PJRT_LoadedExecutable_GetExecutable_Args ge = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
      .loaded_executable = e->exe};
  kiln_status s = kiln_pjrt_status_from_error(api, api->PJRT_LoadedExecutable_GetExecutable(&ge),
                                              "PJRT_LoadedExecutable_GetExecutable");
  if (s) {
    kiln_status_free(s);
    return false;
  }
  PJRT_Executable_GetCostAnalysis_Args ca = {
      .struct_size = PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE, .executable = ge.executable};
  s = kiln_pjrt_status_from_error(api, api->PJRT_Executable_GetCostAnalysis(&ca),
                                  "PJRT_Executable_GetCostAnalysis");
  bool found = false;
  if (!s) {
    const PJRT_NamedValue *v = find_attribute(ca.properties, ca.num_properties, name);
    if (v && v->type == PJRT_NamedValue_kInt64) {
      *value = v->int64_value;
      found = true;
    } else if (v && v->type == PJRT_NamedValue_kFloat) {
      *value = (int64_t)v->float_value;
      found = true;
    }
  }
  kiln_status_free(s);
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = ge.executable};
  kiln_status_free(kiln_pjrt_status_from_error(api, api->PJRT_Executable_Destroy(&ed),
                                               "PJRT_Executable_Destroy"));
  return found;
}

static kiln_status await_event(const kiln_bench_client_t *c, PJRT_Event *ev, const char *what) {
  return kiln_pjrt_event_await(c->plugin->api, ev, what);
}

kiln_status kiln_bench_upload(const kiln_bench_client_t *c, const kiln_literal_t *l,
                              PJRT_Buffer **out) {
  return kiln_pjrt_buffer_from_host(c->plugin->api, c->client, c->device, l->shape, l->data, out);
}

kiln_status kiln_bench_download(const kiln_bench_client_t *c, PJRT_Buffer *b, kiln_arena_t *arena,
                                kiln_literal_t **out) {
  *out = NULL;
  const PJRT_Api *api = c->plugin->api;
  PJRT_Buffer_ElementType_Args ta = {.struct_size = PJRT_Buffer_ElementType_Args_STRUCT_SIZE,
                                     .buffer = b};
  TRY(c, api->PJRT_Buffer_ElementType(&ta), "PJRT_Buffer_ElementType");
  PJRT_Buffer_Dimensions_Args da = {.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE,
                                    .buffer = b};
  TRY(c, api->PJRT_Buffer_Dimensions(&da), "PJRT_Buffer_Dimensions");
  kiln_elem_type_t t;
  if (!kiln_pjrt_elem_type_of(ta.type, &t))
    return KILN_ERR_UNIMPLEMENTED("an output of PJRT element type %d has no kiln element type",
                                  (int)ta.type);
  if (da.num_dims > 64) return KILN_ERR_UNIMPLEMENTED("an output of rank %zu", da.num_dims);
  kiln_shape_t *sh = kiln_shape_make_array_with_default_layout(arena, t, (int)da.num_dims, da.dims);
  kiln_literal_t *l = sh ? kiln_literal_make(arena, sh) : NULL;
  if (!l) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cannot allocate an output literal");
  int64_t m2m[64];
  for (size_t i = 0; i < da.num_dims; i++) m2m[i] = (int64_t)da.num_dims - 1 - (int64_t)i;
  PJRT_Buffer_MemoryLayout layout = {.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE,
                                     .type = PJRT_Buffer_MemoryLayout_Type_Tiled};
  layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  layout.tiled.minor_to_major = m2m;
  layout.tiled.minor_to_major_size = da.num_dims;
  PJRT_Buffer_ToHostBuffer_Args a = {
      .struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
      .src = b,
      .host_layout = da.num_dims >= 2 ? &layout : NULL,
      .dst = l->data,
      .dst_size = (size_t)l->num_elements * kiln_elem_type_storage_bytes(t)};
  TRY(c, api->PJRT_Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
  KILN_RETURN_IF_ERROR_PLAIN(await_event(c, a.event, "PJRT_Buffer_ToHostBuffer"));
  *out = l;
  return NULL;
}

int64_t kiln_bench_buffer_bytes(const kiln_bench_client_t *c, PJRT_Buffer *b) {
  PJRT_Buffer_OnDeviceSizeInBytes_Args a = {
      .struct_size = PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE, .buffer = b};
  kiln_status s = kiln_pjrt_status_from_error(c->plugin->api,
                                              c->plugin->api->PJRT_Buffer_OnDeviceSizeInBytes(&a),
                                              "PJRT_Buffer_OnDeviceSizeInBytes");
  if (s) {
    kiln_status_free(s);
    return 0;
  }
  return (int64_t)a.on_device_size_in_bytes;
}

void kiln_bench_buffer_destroy(const kiln_bench_client_t *c, PJRT_Buffer *b) {
  if (!b) return;
  PJRT_Buffer_Destroy_Args a = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  kiln_status_free(kiln_pjrt_status_from_error(
      c->plugin->api, c->plugin->api->PJRT_Buffer_Destroy(&a), "PJRT_Buffer_Destroy"));
}

kiln_status kiln_bench_execute(const kiln_bench_client_t *c, const kiln_bench_exe_t *e,
                               PJRT_Buffer *const *args, size_t num_args, PJRT_Buffer **outs,
                               kiln_bench_span_t span, double *span_ms) {
  /* No argument is donated: the same buffers feed every execute (a donated one would be
   * gone after the first). */
  int64_t fixed[64];
  int64_t *keep = num_args <= 64 ? fixed : kiln_malloc(num_args * sizeof(*keep));
  for (size_t i = 0; i < num_args; i++) keep[i] = (int64_t)i;
  PJRT_ExecuteOptions opts = {.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE,
                              .non_donatable_input_indices = keep,
                              .num_non_donatable_input_indices = num_args};
  PJRT_Buffer *const *arg_list = args;
  PJRT_Event *done = NULL;
  PJRT_LoadedExecutable_Execute_Args a = {
      .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
      .executable = e->exe,
      .options = &opts,
      .argument_lists = &arg_list,
      .num_devices = 1,
      .num_args = num_args,
      .output_lists = &outs,
      .device_complete_events = &done,
      .execute_device = c->device};
  const PJRT_Api *api = c->plugin->api;
  PJRT_Event_Await_Args wa = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE};
  /* Two clock reads, the span between them (kiln_bench_span_t). */
  double t0 = span != KILN_BENCH_SPAN_NONE ? kiln_clock_ms() : 0, t1 = 0;
  PJRT_Error *err = api->PJRT_LoadedExecutable_Execute(&a);
  if (span == KILN_BENCH_SPAN_ENQUEUE) t1 = kiln_clock_ms();
  PJRT_Error *wait_err = NULL;
  if (!err && done) {
    wa.event = done;
    wait_err = api->PJRT_Event_Await(&wa);
  }
  if (span == KILN_BENCH_SPAN_RUN) t1 = kiln_clock_ms();
  if (span_ms && span != KILN_BENCH_SPAN_NONE) *span_ms = t1 - t0;
  if (keep != fixed) kiln_free(keep);
  kiln_status s = kiln_pjrt_status_from_error(api, err, "PJRT_LoadedExecutable_Execute");
  s = kiln_status_join(s, kiln_pjrt_status_from_error(api, wait_err, "PJRT_Event_Await"));
  if (done) {
    PJRT_Event_Destroy_Args da = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                  .event = done};
    s = kiln_status_join(
        s, kiln_pjrt_status_from_error(api, api->PJRT_Event_Destroy(&da), "PJRT_Event_Destroy"));
  }
  return s;
}
