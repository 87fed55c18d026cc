/* Whole-module runs through the PJRT plugin (pjrt_run.h). Everything after dlsym goes through
 * the PJRT_Api table. */
#include "tools/common/pjrt_run.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "kiln/pjrt_c_api.h"
#include "tools/common/proto_write.h"
#include "tools/common/run_report.h"

struct kiln_pjrt_runner {
  void *handle;
  const PJRT_Api *api;
  PJRT_Client *client;
  PJRT_Device *device;
  char description[PATH_MAX + 512];
};

/* A kiln status from a PJRT error (taken over and destroyed); NULL for NULL. PJRT's codes are
 * absl's, as kiln's are. */
kiln_status kiln_pjrt_status_from_error(const PJRT_Api *api, PJRT_Error *e, const char *what) {
  if (!e) return NULL;
  PJRT_Error_GetCode_Args ga = {.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE, .error = e};
  PJRT_Error *ge = api->PJRT_Error_GetCode(&ga);
  PJRT_Error_Message_Args ma = {.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Message(&ma);
  kiln_status_code_t code = ge ? KILN_UNKNOWN : (kiln_status_code_t)ga.code;
  if (code == KILN_OK) code = KILN_UNKNOWN;
  kiln_status s =
      kiln_status_make(code, "%s: %.*s", what, (int)ma.message_size, ma.message ? ma.message : "");
  PJRT_Error_Destroy_Args da = {.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Destroy(&da);
  if (ge) {
    da.error = ge;
    api->PJRT_Error_Destroy(&da);
  }
  return s;
}

#define PJRT_TRY(r, call, what) \
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_status_from_error((r)->api, (call), (what)))

kiln_status kiln_pjrt_event_await(const PJRT_Api *api, PJRT_Event *ev, const char *what) {
  if (!ev) return NULL;
  PJRT_Event_Await_Args wa = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = ev};
  kiln_status s = kiln_pjrt_status_from_error(api, api->PJRT_Event_Await(&wa), what);
  PJRT_Event_Destroy_Args da = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = ev};
  kiln_status d =
      kiln_pjrt_status_from_error(api, api->PJRT_Event_Destroy(&da), "PJRT_Event_Destroy");
  return kiln_status_join(s, d);
}

static kiln_status await_event(const kiln_pjrt_runner_t *r, PJRT_Event *ev, const char *what) {
  return kiln_pjrt_event_await(r->api, ev, what);
}

static void destroy_buffer(const kiln_pjrt_runner_t *r, PJRT_Buffer *b) {
  if (!b) return;
  PJRT_Buffer_Destroy_Args a = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  kiln_status_free(
      kiln_pjrt_status_from_error(r->api, r->api->PJRT_Buffer_Destroy(&a), "PJRT_Buffer_Destroy"));
}

void *kiln_pjrt_plugin_dlopen(const char *path, char *used, size_t used_size) {
  const char *env = getenv("KILN_PJRT_PLUGIN");
  const char *candidates[4] = {path, env && *env ? env : NULL, NULL, NULL};
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (!path && !candidates[1] && n > 0) {
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) {
      snprintf(slash + 1, sizeof(self) - (size_t)(slash + 1 - self), "libkiln_pjrt.so");
      candidates[2] = self;
    }
  }
#ifdef KILN_PJRT_PLUGIN_PATH
  if (!path && !candidates[1]) candidates[3] = KILN_PJRT_PLUGIN_PATH;
#endif
  for (int i = 0; i < 4; i++) {
    if (!candidates[i]) continue;
    void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (h || i < 2) {
      snprintf(used, used_size, "%s", candidates[i]);
      return h;
    }
  }
  snprintf(used, used_size, "libkiln_pjrt.so");
  return dlopen("libkiln_pjrt.so", RTLD_NOW | RTLD_LOCAL);
}

kiln_status kiln_pjrt_runner_open(const kiln_pjrt_runner_options_t *opts,
                                  kiln_pjrt_runner_t **out) {
  *out = NULL;
  kiln_pjrt_runner_t *r = kiln_calloc(1, sizeof(*r));
  char path[PATH_MAX];
  if (opts && opts->api) {
    snprintf(path, sizeof(path), "(the plugin linked into this program)");
    r->api = opts->api;
  } else {
    r->handle = kiln_pjrt_plugin_dlopen(opts ? opts->plugin : NULL, path, sizeof(path));
    if (!r->handle) {
      kiln_status s =
          kiln_status_make(KILN_UNAVAILABLE, "cannot load the PJRT plugin %s: %s", path, dlerror());
      kiln_free(r);
      return s;
    }
    const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(r->handle, "GetPjrtApi");
    r->api = get ? get() : NULL;
  }
  kiln_status s = NULL;
  if (!r->api)
    s = kiln_status_make(KILN_UNAVAILABLE, "%s has no GetPjrtApi (not a PJRT plugin)", path);
  else if (r->api->pjrt_api_version.major_version != PJRT_API_MAJOR ||
           r->api->struct_size < PJRT_Api_STRUCT_SIZE)
    s = kiln_status_make(
        KILN_FAILED_PRECONDITION, "%s speaks PJRT %d.%d (table of %zu bytes); kiln-run needs %d.%d",
        path, r->api->pjrt_api_version.major_version, r->api->pjrt_api_version.minor_version,
        r->api->struct_size, PJRT_API_MAJOR, PJRT_API_MINOR);
  if (!s) {
    PJRT_Plugin_Initialize_Args ia = {.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE};
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Plugin_Initialize(&ia),
                                    "PJRT_Plugin_Initialize");
  }
  if (!s) {
    const char *platform = opts ? opts->platform : NULL;
    PJRT_NamedValue opt = {.struct_size = PJRT_NamedValue_STRUCT_SIZE,
                           .name = "platform",
                           .name_size = strlen("platform"),
                           .type = PJRT_NamedValue_kString,
                           .string_value = platform,
                           .value_size = platform ? strlen(platform) : 0};
    PJRT_NamedValue copts[4];
    size_t nopts = 0;
    if (platform) copts[nopts++] = opt;
    if (opts && opts->mpi)
      copts[nopts++] = (PJRT_NamedValue){.struct_size = PJRT_NamedValue_STRUCT_SIZE,
                                         .name = "mpi",
                                         .name_size = strlen("mpi"),
                                         .type = PJRT_NamedValue_kBool,
                                         .bool_value = true,
                                         .value_size = 1};
    if (opts && opts->num_devices > 0)
      copts[nopts++] = (PJRT_NamedValue){.struct_size = PJRT_NamedValue_STRUCT_SIZE,
                                         .name = "num_devices",
                                         .name_size = strlen("num_devices"),
                                         .type = PJRT_NamedValue_kInt64,
                                         .int64_value = opts->num_devices,
                                         .value_size = 1};
    if (opts && opts->collective_timeout_ms > 0)
      copts[nopts++] = (PJRT_NamedValue){.struct_size = PJRT_NamedValue_STRUCT_SIZE,
                                         .name = "collective_timeout_ms",
                                         .name_size = strlen("collective_timeout_ms"),
                                         .type = PJRT_NamedValue_kInt64,
                                         .int64_value = opts->collective_timeout_ms,
                                         .value_size = 1};
    PJRT_Client_Create_Args ca = {.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE,
                                  .create_options = nopts ? copts : NULL,
                                  .num_options = nopts};
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Client_Create(&ca), "PJRT_Client_Create");
    r->client = ca.client;
  }
  PJRT_Client_PlatformName_Args pn = {.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE,
                                      .client = r->client};
  if (!s)
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Client_PlatformName(&pn),
                                    "PJRT_Client_PlatformName");
  PJRT_Client_AddressableDevices_Args ad = {
      .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = r->client};
  if (!s)
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Client_AddressableDevices(&ad),
                                    "PJRT_Client_AddressableDevices");
  if (!s && ad.num_addressable_devices == 0)
    s = kiln_status_make(KILN_UNAVAILABLE, "%s: the client has no addressable device", path);
  PJRT_DeviceDescription_ToString_Args ts = {.struct_size =
                                                 PJRT_DeviceDescription_ToString_Args_STRUCT_SIZE};
  if (!s) {
    r->device = ad.addressable_devices[0];
    PJRT_Device_GetDescription_Args gd = {
        .struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE, .device = r->device};
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Device_GetDescription(&gd),
                                    "PJRT_Device_GetDescription");
    ts.device_description = gd.device_description;
  }
  if (!s)
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_DeviceDescription_ToString(&ts),
                                    "PJRT_DeviceDescription_ToString");
  if (s) {
    kiln_pjrt_runner_close(r);
    return kiln_status_annotate(s, "while opening the PJRT plugin %s", path);
  }
  snprintf(r->description, sizeof(r->description), "%s: PJRT %d.%d, platform %.*s, device %.*s",
           path, r->api->pjrt_api_version.major_version, r->api->pjrt_api_version.minor_version,
           (int)pn.platform_name_size, pn.platform_name, (int)ts.to_string_size, ts.to_string);
  *out = r;
  return NULL;
}

void kiln_pjrt_runner_close(kiln_pjrt_runner_t *r) {
  if (!r) return;
  if (r->client) {
    PJRT_Client_Destroy_Args a = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE,
                                  .client = r->client};
    kiln_status_free(kiln_pjrt_status_from_error(r->api, r->api->PJRT_Client_Destroy(&a),
                                                 "PJRT_Client_Destroy"));
  }
  /* The plugin stays loaded: its threads and atexit handlers may outlive the client. */
  kiln_free(r);
}

const char *kiln_pjrt_runner_description(const kiln_pjrt_runner_t *r) {
  return r->description;
}

/* X(kiln suffix, PJRT suffix): the element types a literal and a PJRT buffer share. */
// clang-format off
#define KILN_PJRT_RUN_TYPES(X) \
  X(PRED, PRED) X(S2, S2) X(S4, S4) X(S8, S8) \
  X(S16, S16) X(S32, S32) X(S64, S64) X(U2, U2) \
  X(U4, U4) X(U8, U8) X(U16, U16) X(U32, U32) \
  X(U64, U64) X(F16, F16) X(BF16, BF16) X(F32, F32) \
  X(F64, F64) X(C64, C64) X(C128, C128) X(F8E5M2, F8E5M2) \
  X(F8E4M3, F8E4M3) X(F8E4M3FN, F8E4M3FN) X(F8E4M3B11FNUZ, F8E4M3B11FNUZ) X(F8E5M2FNUZ, F8E5M2FNUZ) \
  X(F8E4M3FNUZ, F8E4M3FNUZ) X(F8E3M4, F8E3M4) X(F8E8M0FNU, F8E8M0FNU) X(F4E2M1FN, F4E2M1FN) \
  X(S1, S1) X(U1, U1)
// clang-format on

bool kiln_pjrt_buffer_type_of(kiln_elem_type_t t, PJRT_Buffer_Type *out) {
  switch (t) {
#define X(k, p)                  \
  case KILN_##k:                 \
    *out = PJRT_Buffer_Type_##p; \
    return true;
    KILN_PJRT_RUN_TYPES(X)
#undef X
    default:
      return false;
  }
}

bool kiln_pjrt_elem_type_of(PJRT_Buffer_Type t, kiln_elem_type_t *out) {
  switch (t) {
#define X(k, p)              \
  case PJRT_Buffer_Type_##p: \
    *out = KILN_##k;         \
    return true;
    KILN_PJRT_RUN_TYPES(X)
#undef X
    default:
      return false;
  }
}

static bool is_row_major(const kiln_shape_t *s) {
  if (!s->has_layout || s->rank < 2) return true;
  if (s->layout.num_tiles) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->layout.minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

kiln_status kiln_pjrt_buffer_from_host(const PJRT_Api *api, PJRT_Client *client,
                                       PJRT_Device *device, const kiln_shape_t *shape,
                                       const void *data, PJRT_Buffer **out) {
  *out = NULL;
  PJRT_Buffer_Type type;
  if (!kiln_shape_is_array(shape) || !kiln_pjrt_buffer_type_of(shape->type, &type))
    return KILN_ERR_UNIMPLEMENTED("a PJRT buffer holds one array of a numeric type, not a %s",
                                  kiln_elem_type_name(shape->type));
  if (!data && kiln_shape_num_elements(shape))
    return KILN_ERR_INVALID("no host data for a PJRT buffer");
  PJRT_Buffer_MemoryLayout layout;
  memset(&layout, 0, sizeof(layout));
  bool custom_layout = !is_row_major(shape);
  if (custom_layout) {
    layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    layout.tiled.minor_to_major = shape->layout.minor_to_major;
    layout.tiled.minor_to_major_size = (size_t)shape->rank;
  }
  PJRT_Client_BufferFromHostBuffer_Args a = {
      .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
      .client = client,
      .data = data,
      .type = type,
      .dims = shape->dims,
      .num_dims = (size_t)shape->rank,
      .host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
      .device = device,
      .device_layout = custom_layout ? &layout : NULL};
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_status_from_error(
      api, api->PJRT_Client_BufferFromHostBuffer(&a), "PJRT_Client_BufferFromHostBuffer"));
  kiln_status s =
      kiln_pjrt_event_await(api, a.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer");
  if (s) {
    PJRT_Buffer_Destroy_Args d = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE,
                                  .buffer = a.buffer};
    kiln_status_free(
        kiln_pjrt_status_from_error(api, api->PJRT_Buffer_Destroy(&d), "PJRT_Buffer_Destroy"));
    return s;
  }
  *out = a.buffer;
  return NULL;
}

/* The executable's compiled module (its OptimizedProgram, parsed): its entry parameters have
 * the layouts the executable takes its arguments in, as a framework learns them. */
static kiln_status compiled_module(kiln_pjrt_runner_t *r, PJRT_Executable *exe,
                                   kiln_hlo_module_t **out) {
  *out = NULL;
  PJRT_Program p = {.struct_size = PJRT_Program_STRUCT_SIZE};
  PJRT_Executable_OptimizedProgram_Args oa = {
      .struct_size = PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE,
      .executable = exe,
      .program = &p};
  PJRT_TRY(r, r->api->PJRT_Executable_OptimizedProgram(&oa), "PJRT_Executable_OptimizedProgram");
  char *code = kiln_malloc(p.code_size + 1);
  p.code = code;
  kiln_status s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Executable_OptimizedProgram(&oa),
                                              "PJRT_Executable_OptimizedProgram");
  if (!s && !(p.format_size == 3 && !memcmp(p.format, "hlo", 3)))
    s = KILN_ERR_UNIMPLEMENTED("the plugin's optimized program is \"%.*s\", not HLO text",
                               (int)p.format_size, p.format);
  if (!s) {
    kiln_hlo_parse_options_t po = {0};
    po.filename = "<optimized program>";
    s = kiln_hlo_parse_module(code, p.code_size, &po, out);
  }
  kiln_free(code);
  return s;
}

/* The array leaves of `s` (a tuple's depth first, as the plugin flattens a tuple parameter
 * into arguments). */
static int shape_leaves(const kiln_shape_t *s) {
  if (!kiln_shape_is_tuple(s)) return 1;
  int n = 0;
  for (int i = 0; i < s->num_elements; i++) n += shape_leaves(s->elements[i]);
  return n;
}

/* The arguments the executable takes: the compiled entry's parameters' leaves. */
static int num_argument_leaves(const kiln_hlo_module_t *compiled) {
  int n = 0;
  for (int p = 0; compiled && p < compiled->entry->num_parameters; p++)
    n += shape_leaves(compiled->entry->parameters[p]->shape);
  return n;
}

/* Uploads literal `l` of (compiled) parameter shape `s` into bufs[*k] onwards: a buffer per
 * array leaf, a tuple's depth first (l NULL: no host data, an error unless the leaf is empty). */
static kiln_status upload_leaves(kiln_pjrt_runner_t *r, PJRT_Device *device, const kiln_shape_t *s,
                                 const kiln_literal_t *l, PJRT_Buffer **bufs, int *k) {
  if (!kiln_shape_is_tuple(s)) {
    int leaf = (*k)++;
    return kiln_pjrt_buffer_from_host(r->api, r->client, device, s, l ? l->data : NULL,
                                      &bufs[leaf]);
  }
  if (l && l->num_tuple_elements != s->num_elements)
    return KILN_ERR_INTERNAL("an argument tuple of %d elements for a parameter tuple of %d",
                             l->num_tuple_elements, s->num_elements);
  for (int i = 0; i < s->num_elements; i++)
    KILN_RETURN_IF_ERROR(
        upload_leaves(r, device, s->elements[i], l ? l->tuple_elements[i] : NULL, bufs, k),
        "in tuple element %d", i);
  return NULL;
}

/* Uploads `args` (one literal per entry parameter) to `bufs`, a buffer per array leaf: a
 * tuple parameter's leaves are arguments of their own, in depth-first order. */
static kiln_status upload(kiln_pjrt_runner_t *r, PJRT_Device *device, const kiln_hlo_module_t *m,
                          const kiln_hlo_module_t *compiled, kiln_literal_t *const *args,
                          int num_args, PJRT_Buffer **bufs) {
  const kiln_hlo_computation_t *entry = m->entry;
  if (num_args != entry->num_parameters)
    return KILN_ERR_INVALID("%s takes %d parameters, %d arguments given", m->name,
                            entry->num_parameters, num_args);
  if (compiled->entry->num_parameters != num_args)
    return KILN_ERR_INTERNAL("the compiled module takes %d parameters, %s %d",
                             compiled->entry->num_parameters, m->name, num_args);
  int k = 0;
  for (int p = 0; p < num_args; p++) {
    /* the compiled parameter's layout (the executable's), so the execute reads it as it is */
    kiln_status s =
        upload_leaves(r, device, compiled->entry->parameters[p]->shape, args[p], bufs, &k);
    if (s)
      return kiln_status_annotate(
          s, "for parameter %d (kiln-run --direct runs a module without the plugin)", p);
  }
  return NULL;
}

/* One execute on `nd` devices (one: the runner's device); `outs[d]` (num_outputs) gets
 * device d's results. */
static kiln_status execute(kiln_pjrt_runner_t *r, PJRT_LoadedExecutable *exe, int nd, bool alone,
                           PJRT_Buffer *const *const *args, size_t num_args,
                           PJRT_Buffer **const *outs) {
  PJRT_ExecuteOptions opts = {.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE};
  PJRT_Event **done = kiln_calloc((size_t)nd, sizeof(*done));
  PJRT_LoadedExecutable_Execute_Args a = {
      .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
      .executable = exe,
      .options = &opts,
      .argument_lists = args,
      .num_devices = (size_t)nd,
      .num_args = num_args,
      .output_lists = outs,
      .device_complete_events = done,
      .execute_device = alone ? r->device : NULL};
  kiln_status s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_LoadedExecutable_Execute(&a),
                                              "PJRT_LoadedExecutable_Execute");
  /* Started: every device's event is awaited and destroyed (a run that failed after Execute
   * returned fails its event); the first failure is the one reported. */
  for (int d = 0; d < nd && !s; d++) {
    kiln_status e = await_event(r, done[d], "PJRT_LoadedExecutable_Execute");
    for (int k = d + 1; e && k < nd; k++)
      kiln_status_free(await_event(r, done[k], "PJRT_LoadedExecutable_Execute"));
    s = e;
  }
  kiln_free(done);
  return s;
}

static kiln_status download(kiln_pjrt_runner_t *r, const kiln_hlo_module_t *m, PJRT_Buffer **outs,
                            size_t num_outputs, kiln_arena_t *arena, kiln_literal_t **result) {
  kiln_shape_t *rs = kiln_shape_clone(arena, m->entry->root->shape);
  kiln_literal_t *res = kiln_literal_make(arena, rs);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cannot allocate the result");
  int nl = kiln_run_report_num_leaves(res);
  if ((size_t)nl != num_outputs)
    return KILN_ERR_INTERNAL("the result has %d leaves, the plugin returned %zu outputs", nl,
                             num_outputs);
  for (int l = 0; l < nl; l++) {
    kiln_literal_t *leaf = (kiln_literal_t *)kiln_run_report_leaf(res, l);
    if (!leaf || !kiln_shape_is_array(leaf->shape) || !leaf->data) continue;
    size_t bytes = (size_t)leaf->num_elements * kiln_elem_type_storage_bytes(leaf->shape->type);
    int rank = leaf->shape->rank;
    int64_t m2m[64];
    PJRT_Buffer_MemoryLayout layout;
    memset(&layout, 0, sizeof(layout));
    if (rank > 64) return KILN_ERR_UNIMPLEMENTED("output %d: rank %d", l, rank);
    for (int i = 0; i < rank; i++) m2m[i] = rank - 1 - i;
    layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    layout.tiled.minor_to_major = m2m;
    layout.tiled.minor_to_major_size = (size_t)rank;
    PJRT_Buffer_ToHostBuffer_Args a = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                       .src = outs[l],
                                       .host_layout = rank >= 2 ? &layout : NULL,
                                       .dst = leaf->data,
                                       .dst_size = bytes};
    kiln_status s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Buffer_ToHostBuffer(&a),
                                                "PJRT_Buffer_ToHostBuffer");
    if (!s) s = await_event(r, a.event, "PJRT_Buffer_ToHostBuffer");
    if (s) return kiln_status_annotate(s, "for output %d", l);
  }
  *result = res;
  return NULL;
}

/* CompileOptionsProto { executable_build_options { debug_options { the three combine
 * thresholds }, num_replicas, num_partitions } } into `b`: the world for several devices, the
 * thresholds when `combine_threshold_bytes` is not 0 (a negative one as XLA's 0: combine
 * nothing). Nothing when neither applies (the plugin's defaults). */
static void compile_options(kiln_pb_t *b, int replicas, int partitions,
                            int64_t combine_threshold_bytes) {
  kiln_pb_t build = {0}, debug = {0};
  if (combine_threshold_bytes) {
    int64_t v = combine_threshold_bytes > 0 ? combine_threshold_bytes : 0;
    /* xla_gpu_all_reduce_ (157), all_gather_ (212), reduce_scatter_combine_threshold_bytes */
    static const uint32_t fields[3] = {157, 212, 213};
    for (int i = 0; i < 3; i++) kiln_pb_i64(&debug, fields[i], v);
    kiln_pb_message(&build, 3, &debug);
  }
  if (replicas * partitions > 1) {
    kiln_pb_i64(&build, 4, replicas);
    kiln_pb_i64(&build, 5, partitions);
  }
  if (build.len) kiln_pb_message(b, 3, &build);
  kiln_pb_free(&debug);
  kiln_pb_free(&build);
}

/* Runs `m` on replicas x partitions devices (one: the runner's device), every device on the
 * same `args`; results[d] gets device d's result (participant order). */
static kiln_status run_world(kiln_pjrt_runner_t *r, const kiln_hlo_module_t *m,
                             kiln_literal_t *const *args, int num_args, int replicas,
                             int partitions, const kiln_pjrt_run_options_t *opts,
                             kiln_arena_t *arena, kiln_literal_t **results,
                             kiln_pjrt_run_report_t *report) {
  int nd = replicas * partitions;
  for (int d = 0; d < nd; d++) results[d] = NULL;
  kiln_pjrt_run_report_t local;
  kiln_pjrt_run_report_t *rep = report ? report : &local;
  memset(rep, 0, sizeof(*rep));

  /* Compile: the module's canonical text in the "hlo" format; compile options only for
   * several devices or a combine threshold (else the plugin's defaults: one replica, one
   * partition). */
  char *text = kiln_hlo_module_to_string(m);
  kiln_pb_t copts = {0};
  compile_options(&copts, replicas, partitions, opts ? opts->combine_threshold_bytes : 0);
  PJRT_Program program = {.struct_size = PJRT_Program_STRUCT_SIZE,
                          .code = text,
                          .code_size = strlen(text),
                          .format = "hlo",
                          .format_size = 3};
  PJRT_Client_Compile_Args ca = {.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE,
                                 .client = r->client,
                                 .program = &program,
                                 .compile_options = copts.len ? (char *)copts.data : NULL,
                                 .compile_options_size = copts.len};
  double t0 = kiln_clock_ms();
  kiln_status s =
      kiln_pjrt_status_from_error(r->api, r->api->PJRT_Client_Compile(&ca), "PJRT_Client_Compile");
  rep->compile_ms = kiln_clock_ms() - t0;
  kiln_free(text);
  kiln_pb_free(&copts);
  KILN_RETURN_IF_ERROR_PLAIN(s);
  PJRT_LoadedExecutable *exe = ca.executable;

  size_t num_outputs = 0;
  kiln_hlo_module_t *compiled = NULL;
  PJRT_LoadedExecutable_GetExecutable_Args ge = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
      .loaded_executable = exe};
  s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_LoadedExecutable_GetExecutable(&ge),
                                  "PJRT_LoadedExecutable_GetExecutable");
  if (!s) {
    PJRT_Executable_NumOutputs_Args no = {
        .struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE, .executable = ge.executable};
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_Executable_NumOutputs(&no),
                                    "PJRT_Executable_NumOutputs");
    num_outputs = no.num_outputs;
    if (!s) s = compiled_module(r, ge.executable, &compiled);
    PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                       .executable = ge.executable};
    s = kiln_status_join(s,
                         kiln_pjrt_status_from_error(r->api, r->api->PJRT_Executable_Destroy(&ed),
                                                     "PJRT_Executable_Destroy"));
  }
  /* the executable's devices in this process (all of them in one), in participant order, and
   * their participants */
  int world = nd;
  int *part = kiln_calloc((size_t)world, sizeof(*part));
  PJRT_LoadedExecutable_AddressableDevices_Args ad = {
      .struct_size = PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE, .executable = exe};
  if (!s && world > 1) {
    s = kiln_pjrt_status_from_error(r->api, r->api->PJRT_LoadedExecutable_AddressableDevices(&ad),
                                    "PJRT_LoadedExecutable_AddressableDevices");
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args li = {
        .struct_size = PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args_STRUCT_SIZE,
        .executable = exe};
    if (!s)
      s = kiln_pjrt_status_from_error(
          r->api, r->api->PJRT_LoadedExecutable_AddressableDeviceLogicalIds(&li),
          "PJRT_LoadedExecutable_AddressableDeviceLogicalIds");
    if (!s && (ad.num_addressable_devices < 1 || ad.num_addressable_devices > (size_t)world ||
               li.num_addressable_device_logical_ids != ad.num_addressable_devices))
      s = KILN_ERR_INTERNAL(
          "the executable has %zu addressable devices (%zu logical ids), %d "
          "participants",
          ad.num_addressable_devices, li.num_addressable_device_logical_ids, world);
    if (!s) nd = (int)ad.num_addressable_devices;
    for (int d = 0; d < nd && !s; d++) {
      part[d] = li.addressable_device_logical_ids[d].replica * partitions +
                li.addressable_device_logical_ids[d].partition;
      if (part[d] < 0 || part[d] >= world)
        s = KILN_ERR_INTERNAL("addressable device %d has participant %d of %d", d, part[d], world);
    }
  }

  int np = num_argument_leaves(compiled);
  PJRT_Buffer **bufs = kiln_calloc((size_t)nd * ((size_t)np + 1), sizeof(*bufs));
  /* outs: the outputs of the run the caller gets (the last or the first); later: each other
   * run's, dropped before the next */
  size_t nout = (size_t)nd * (num_outputs + 1);
  PJRT_Buffer **outs = kiln_calloc(2 * nout, sizeof(*outs)), **later = outs + nout;
  PJRT_Buffer **argv_mem = kiln_calloc((size_t)nd, sizeof(*argv_mem));
  PJRT_Buffer *const **argv = (PJRT_Buffer *const **)argv_mem;
  PJRT_Buffer ***outv = kiln_calloc(2 * (size_t)nd, sizeof(*outv)), ***laterv = outv + nd;
  for (int d = 0; d < nd; d++) {
    argv[d] = bufs + (size_t)d * ((size_t)np + 1);
    outv[d] = outs + (size_t)d * (num_outputs + 1);
    laterv[d] = later + (size_t)d * (num_outputs + 1);
  }
  if (!s) {
    t0 = kiln_clock_ms();
    for (int d = 0; d < nd && !s; d++) {
      kiln_literal_t *const *a =
          opts && opts->participant_args ? opts->participant_args[part[d]] : args;
      s = upload(r, world > 1 ? ad.addressable_devices[d] : r->device, m, compiled, a, num_args,
                 (PJRT_Buffer **)argv[d]);
      if (s && world > 1) s = kiln_status_annotate(s, "on device %d", d);
    }
    rep->upload_ms = kiln_clock_ms() - t0;
  }
  int64_t repeat = opts && opts->repeat > 0 ? opts->repeat : 1;
  int64_t kept = opts && opts->first_run_result ? 0 : repeat - 1;
  for (int64_t i = 0; i < repeat && !s; i++) {
    for (size_t o = 0; o < nout; o++) {
      destroy_buffer(r, later[o]);
      later[o] = NULL;
    }
    t0 = kiln_clock_ms();
    s = execute(r, exe, nd, world == 1, argv, (size_t)np, i == kept ? outv : laterv);
    double dt = kiln_clock_ms() - t0;
    if (i == 0) rep->first_run_ms = dt;
    if (i == 0 || dt < rep->run_min_ms) rep->run_min_ms = dt;
    rep->run_mean_ms += dt / (double)repeat;
    rep->runs++;
    if (opts && opts->print_runs && !s) printf("run %lld: %.3f ms\n", (long long)i, dt);
  }
  if (!s) {
    t0 = kiln_clock_ms();
    for (int d = 0; d < nd && !s; d++) {
      s = download(r, m, outv[d], num_outputs, arena, &results[part[d]]);
      if (s && world > 1) s = kiln_status_annotate(s, "on device %d", d);
    }
    rep->download_ms = kiln_clock_ms() - t0;
  }
  for (size_t o = 0; o < 2 * nout; o++) destroy_buffer(r, outs[o]);
  for (size_t p = 0; p < (size_t)nd * ((size_t)np + 1); p++) destroy_buffer(r, bufs[p]);
  kiln_free(outv);
  kiln_free(argv_mem);
  kiln_free(outs);
  kiln_free(bufs);
  kiln_hlo_module_destroy(compiled);
  PJRT_LoadedExecutable_Destroy_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = exe};
  s = kiln_status_join(
      s, kiln_pjrt_status_from_error(r->api, r->api->PJRT_LoadedExecutable_Destroy(&ld),
                                     "PJRT_LoadedExecutable_Destroy"));
  kiln_free(part);
  if (s)
    for (int d = 0; d < world; d++) results[d] = NULL;
  return s;
}

kiln_status kiln_pjrt_run_module(kiln_pjrt_runner_t *r, const kiln_hlo_module_t *m,
                                 kiln_literal_t *const *args, int num_args,
                                 const kiln_pjrt_run_options_t *opts, kiln_arena_t *arena,
                                 kiln_literal_t **result, kiln_pjrt_run_report_t *report) {
  return run_world(r, m, args, num_args, 1, 1, opts, arena, result, report);
}

kiln_status kiln_pjrt_run_module_spmd(kiln_pjrt_runner_t *r, const kiln_hlo_module_t *m,
                                      kiln_literal_t *const *args, int num_args, int replicas,
                                      int partitions, const kiln_pjrt_run_options_t *opts,
                                      kiln_arena_t *arena, kiln_literal_t **results,
                                      kiln_pjrt_run_report_t *report) {
  if (replicas < 1 || partitions < 1 || replicas * partitions > 4096)
    return KILN_ERR_INVALID("PJRT run: %d replicas x %d partitions", replicas, partitions);
  return run_world(r, m, args, num_args, replicas, partitions, opts, arena, results, report);
}
