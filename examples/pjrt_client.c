/* A PJRT client in plain C, the way a framework uses kiln: dlopen the plugin with RTLD_LOCAL,
 * call GetPjrtApi(), and do everything through the returned table — create a client, compile
 * an HLO text file, upload deterministic inputs, execute, read the results back and print
 * them with timings. Built against kiln's public header (include/kiln/pjrt_c_api.h); it works
 * with any PJRT plugin that accepts HLO text in the "hlo" format.
 *
 *   kiln-pjrt-example [--plugin=PATH] [--platform=cpu|cuda] [--repeat=N] module.hlo
 *
 * The plugin is PATH, else $KILN_PJRT_PLUGIN, else libkiln_pjrt.so next to this program, else
 * libkiln_pjrt.so on the loader's search path. The inputs' shapes are read from the entry
 * computation's parameter instructions (array parameters of the numeric types below). */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln/pjrt_c_api.h"

enum { kMaxRank = 16, kMaxParams = 64 };

typedef struct param {
  PJRT_Buffer_Type type;
  int64_t dims[kMaxRank];
  size_t rank;
} param_t;

static const PJRT_Api *g_api;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Prints the error's code and message, frees it, and returns 1; 0 for no error. */
static int report(PJRT_Error *e, const char *what) {
  if (!e) return 0;
  PJRT_Error_GetCode_Args ga = {.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE, .error = e};
  PJRT_Error *ge = g_api->PJRT_Error_GetCode(&ga);
  PJRT_Error_Message_Args ma = {.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE, .error = e};
  g_api->PJRT_Error_Message(&ma);
  fprintf(stderr, "kiln-pjrt-example: %s failed (code %d): %.*s\n", what, ge ? -1 : (int)ga.code,
          (int)ma.message_size, ma.message);
  PJRT_Error_Destroy_Args da = {.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE, .error = e};
  if (ge) {
    da.error = ge;
    g_api->PJRT_Error_Destroy(&da);
    da.error = e;
  }
  g_api->PJRT_Error_Destroy(&da);
  return 1;
}

#define TRY(call, what)                    \
  do {                                     \
    if (report((call), (what))) goto done; \
  } while (0)

static const struct {
  const char *name;
  PJRT_Buffer_Type type;
  size_t bytes;
} g_types[] = {
    {"pred", PJRT_Buffer_Type_PRED, 1}, {"s8", PJRT_Buffer_Type_S8, 1},
    {"s16", PJRT_Buffer_Type_S16, 2},   {"s32", PJRT_Buffer_Type_S32, 4},
    {"s64", PJRT_Buffer_Type_S64, 8},   {"u8", PJRT_Buffer_Type_U8, 1},
    {"u16", PJRT_Buffer_Type_U16, 2},   {"u32", PJRT_Buffer_Type_U32, 4},
    {"u64", PJRT_Buffer_Type_U64, 8},   {"f16", PJRT_Buffer_Type_F16, 2},
    {"bf16", PJRT_Buffer_Type_BF16, 2}, {"f32", PJRT_Buffer_Type_F32, 4},
    {"f64", PJRT_Buffer_Type_F64, 8},
};
enum { kNumTypes = sizeof(g_types) / sizeof(g_types[0]) };

static size_t type_bytes(PJRT_Buffer_Type t) {
  for (size_t i = 0; i < kNumTypes; i++)
    if (g_types[i].type == t) return g_types[i].bytes;
  return 0;
}

static const char *type_name(PJRT_Buffer_Type t) {
  for (size_t i = 0; i < kNumTypes; i++)
    if (g_types[i].type == t) return g_types[i].name;
  return "?";
}

/* Reads "TYPE[d0,d1,...]" at `s` into `p`; false when it is not an array shape we handle. */
static bool parse_shape(const char *s, param_t *p) {
  size_t n = 0;
  while (isalnum((unsigned char)s[n])) n++;
  if (s[n] != '[') return false;
  p->type = PJRT_Buffer_Type_INVALID;
  for (size_t i = 0; i < kNumTypes; i++)
    if (strlen(g_types[i].name) == n && !strncmp(s, g_types[i].name, n)) p->type = g_types[i].type;
  if (p->type == PJRT_Buffer_Type_INVALID) return false;
  const char *c = s + n + 1;
  p->rank = 0;
  while (*c != ']') {
    if (p->rank == kMaxRank || !isdigit((unsigned char)*c)) return false;
    p->dims[p->rank++] = strtoll(c, (char **)&c, 10);
    if (*c == ',') c++;
  }
  return true;
}

/* The entry computation's parameters, from its `parameter(N)` instructions. */
static int entry_params(const char *text, param_t *params, size_t *num_params) {
  const char *entry = strstr(text, "\nENTRY");
  if (!entry && !strncmp(text, "ENTRY", 5)) entry = text;
  if (!entry) {
    fprintf(stderr, "kiln-pjrt-example: the module has no ENTRY computation\n");
    return 1;
  }
  const char *end = strstr(entry, "\n}");
  if (!end) end = entry + strlen(entry);
  *num_params = 0;
  for (const char *line = entry; line && line < end; line = strchr(line + 1, '\n')) {
    const char *call = strstr(line, " parameter(");
    const char *eol = strchr(line + 1, '\n');
    if (!call || (eol && call > eol)) continue;
    long index = strtol(call + strlen(" parameter("), NULL, 10);
    const char *eq = strchr(line, '=');
    if (!eq || eq > call || index < 0 || index >= kMaxParams) continue;
    const char *shape = eq + 1;
    while (*shape == ' ') shape++;
    if (!parse_shape(shape, &params[index])) {
      fprintf(stderr, "kiln-pjrt-example: parameter %ld: unsupported shape \"%.*s\"\n", index,
              (int)(call - shape), shape);
      return 1;
    }
    if ((size_t)index + 1 > *num_params) *num_params = (size_t)index + 1;
  }
  return 0;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1); /* round to nearest even (finite inputs only here) */
  return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t f32_to_f16(float f) { /* |f| < 65504, rounded to nearest */
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

static float f16_to_f32(uint16_t u) {
  _Float16 h;
  memcpy(&h, &u, 2);
  return (float)h;
}

/* Element i of a deterministic input: a smooth wave in [-2, 2] for floats, small integers. */
static void fill(void *data, PJRT_Buffer_Type t, size_t n, size_t param_index) {
  for (size_t i = 0; i < n; i++) {
    double v = 2.0 * sin(0.37 * (double)i + (double)param_index);
    int64_t k = (int64_t)((i + param_index) % 7) - 3;
    switch (t) {
      case PJRT_Buffer_Type_PRED:
        ((uint8_t *)data)[i] = (i + param_index) % 2;
        break;
      case PJRT_Buffer_Type_S8:
        ((int8_t *)data)[i] = (int8_t)k;
        break;
      case PJRT_Buffer_Type_S16:
        ((int16_t *)data)[i] = (int16_t)k;
        break;
      case PJRT_Buffer_Type_S32:
        ((int32_t *)data)[i] = (int32_t)k;
        break;
      case PJRT_Buffer_Type_S64:
        ((int64_t *)data)[i] = k;
        break;
      case PJRT_Buffer_Type_U8:
        ((uint8_t *)data)[i] = (uint8_t)(k + 3);
        break;
      case PJRT_Buffer_Type_U16:
        ((uint16_t *)data)[i] = (uint16_t)(k + 3);
        break;
      case PJRT_Buffer_Type_U32:
        ((uint32_t *)data)[i] = (uint32_t)(k + 3);
        break;
      case PJRT_Buffer_Type_U64:
        ((uint64_t *)data)[i] = (uint64_t)(k + 3);
        break;
      case PJRT_Buffer_Type_F16:
        ((uint16_t *)data)[i] = f32_to_f16((float)v);
        break;
      case PJRT_Buffer_Type_BF16:
        ((uint16_t *)data)[i] = f32_to_bf16((float)v);
        break;
      case PJRT_Buffer_Type_F32:
        ((float *)data)[i] = (float)v;
        break;
      case PJRT_Buffer_Type_F64:
        ((double *)data)[i] = v;
        break;
      default:
        break;
    }
  }
}

static double element(const void *data, PJRT_Buffer_Type t, size_t i) {
  switch (t) {
    case PJRT_Buffer_Type_PRED:
      return ((const uint8_t *)data)[i];
    case PJRT_Buffer_Type_S8:
      return ((const int8_t *)data)[i];
    case PJRT_Buffer_Type_S16:
      return ((const int16_t *)data)[i];
    case PJRT_Buffer_Type_S32:
      return ((const int32_t *)data)[i];
    case PJRT_Buffer_Type_S64:
      return (double)((const int64_t *)data)[i];
    case PJRT_Buffer_Type_U8:
      return ((const uint8_t *)data)[i];
    case PJRT_Buffer_Type_U16:
      return ((const uint16_t *)data)[i];
    case PJRT_Buffer_Type_U32:
      return ((const uint32_t *)data)[i];
    case PJRT_Buffer_Type_U64:
      return (double)((const uint64_t *)data)[i];
    case PJRT_Buffer_Type_F16:
      return f16_to_f32(((const uint16_t *)data)[i]);
    case PJRT_Buffer_Type_BF16:
      return bf16_to_f32(((const uint16_t *)data)[i]);
    case PJRT_Buffer_Type_F32:
      return ((const float *)data)[i];
    case PJRT_Buffer_Type_F64:
      return ((const double *)data)[i];
    default:
      return NAN;
  }
}

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *grown = realloc(buf, cap);
      if (!grown) break;
      buf = grown;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  if (buf) buf[n] = 0;
  *size = n;
  return buf;
}

static void *open_plugin(const char *path, const char *argv0) {
  if (path) return dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const char *env = getenv("KILN_PJRT_PLUGIN");
  if (env && *env) return dlopen(env, RTLD_NOW | RTLD_LOCAL);
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0 && argv0) n = (ssize_t)snprintf(self, sizeof(self), "%s", argv0);
  if (n > 0) {
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) {
      snprintf(slash + 1, sizeof(self) - (size_t)(slash + 1 - self), "libkiln_pjrt.so");
      void *h = dlopen(self, RTLD_NOW | RTLD_LOCAL);
      if (h) return h;
    }
  }
  return dlopen("libkiln_pjrt.so", RTLD_NOW | RTLD_LOCAL);
}

/* Copies `b` to a new host array (malloc'd, `*size` bytes), waiting for the transfer. */
static PJRT_Error *to_host(PJRT_Buffer *b, void **out, size_t *size) {
  *out = NULL;
  PJRT_Buffer_ToHostBuffer_Args a = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                     .src = b};
  PJRT_Error *e = g_api->PJRT_Buffer_ToHostBuffer(&a); /* dst NULL: asks for the size */
  if (e) return e;
  *size = a.dst_size;
  *out = malloc(a.dst_size ? a.dst_size : 1);
  a.dst = *out;
  a.event = NULL;
  e = g_api->PJRT_Buffer_ToHostBuffer(&a);
  if (e) return e;
  if (a.event) {
    PJRT_Event_Await_Args wa = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = a.event};
    e = g_api->PJRT_Event_Await(&wa);
    PJRT_Event_Destroy_Args da = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                  .event = a.event};
    PJRT_Error *de = g_api->PJRT_Event_Destroy(&da);
    if (!e)
      e = de;
    else if (de)
      report(de, "PJRT_Event_Destroy");
  }
  return e;
}

static void destroy_buffer(PJRT_Buffer *b) {
  if (!b) return;
  PJRT_Buffer_Destroy_Args a = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  report(g_api->PJRT_Buffer_Destroy(&a), "PJRT_Buffer_Destroy");
}

/* One execute on `device` with `args`; writes `num_outputs` buffers to `outs`. */
static PJRT_Error *execute(PJRT_LoadedExecutable *exe, PJRT_Device *device, PJRT_Buffer **args,
                           size_t num_args, PJRT_Buffer **outs) {
  PJRT_ExecuteOptions opts = {.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE};
  PJRT_Buffer *const *arg_list = args;
  PJRT_Buffer **out_list = outs;
  PJRT_Event *done = NULL;
  PJRT_LoadedExecutable_Execute_Args a = {
      .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
      .executable = exe,
      .options = &opts,
      .argument_lists = &arg_list,
      .num_devices = 1,
      .num_args = num_args,
      .output_lists = &out_list,
      .device_complete_events = &done,
      .execute_device = device,
  };
  PJRT_Error *e = g_api->PJRT_LoadedExecutable_Execute(&a);
  if (e || !done) return e;
  PJRT_Event_Await_Args wa = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = done};
  e = g_api->PJRT_Event_Await(&wa);
  PJRT_Event_Destroy_Args da = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = done};
  PJRT_Error *de = g_api->PJRT_Event_Destroy(&da);
  if (!e) return de;
  report(de, "PJRT_Event_Destroy");
  return e;
}

static int usage(void) {
  fprintf(stderr,
          "usage: kiln-pjrt-example [--plugin=PATH] [--platform=cpu|cuda] [--repeat=N] "
          "module.hlo\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *plugin = NULL, *platform = NULL, *path = NULL;
  long repeat = 10;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--plugin=", 9))
      plugin = argv[i] + 9;
    else if (!strncmp(argv[i], "--platform=", 11))
      platform = argv[i] + 11;
    else if (!strncmp(argv[i], "--repeat=", 9))
      repeat = strtol(argv[i] + 9, NULL, 10);
    else if (argv[i][0] == '-')
      return usage();
    else
      path = argv[i];
  }
  if (!path || repeat < 1) return usage();

  int rc = 1;
  size_t text_size = 0, num_params = 0, num_outputs = 0;
  char *text = read_file(path, &text_size);
  param_t params[kMaxParams];
  PJRT_Buffer *args[kMaxParams] = {0};
  PJRT_Buffer **outs = NULL;
  PJRT_Client *client = NULL;
  PJRT_LoadedExecutable *exe = NULL;
  PJRT_Executable *exe_info = NULL;
  if (!text) {
    fprintf(stderr, "kiln-pjrt-example: cannot read %s\n", path);
    return 1;
  }
  memset(params, 0, sizeof(params));
  if (entry_params(text, params, &num_params)) goto done;

  /* 1. Load the plugin: nothing of it enters the global symbol scope. */
  double t0 = now_ms();
  void *handle = open_plugin(plugin, argv[0]);
  if (!handle) {
    fprintf(stderr, "kiln-pjrt-example: cannot load the plugin: %s\n", dlerror());
    goto done;
  }
  const PJRT_Api *(*get_api)(void) = (const PJRT_Api *(*)(void))dlsym(handle, "GetPjrtApi");
  if (!get_api || !(g_api = get_api())) {
    fprintf(stderr, "kiln-pjrt-example: the plugin has no GetPjrtApi\n");
    goto done;
  }
  if (g_api->pjrt_api_version.major_version != PJRT_API_MAJOR) {
    fprintf(stderr, "kiln-pjrt-example: the plugin speaks PJRT %d.%d, this client %d.%d\n",
            g_api->pjrt_api_version.major_version, g_api->pjrt_api_version.minor_version,
            PJRT_API_MAJOR, PJRT_API_MINOR);
    goto done;
  }
  PJRT_Plugin_Initialize_Args init = {.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE};
  TRY(g_api->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");

  /* 2. A client, on the platform asked for (the plugin's choice otherwise). */
  PJRT_NamedValue opt = {.struct_size = PJRT_NamedValue_STRUCT_SIZE,
                         .name = "platform",
                         .name_size = strlen("platform"),
                         .type = PJRT_NamedValue_kString,
                         .string_value = platform,
                         .value_size = platform ? strlen(platform) : 0};
  PJRT_Client_Create_Args cc = {.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE,
                                .create_options = platform ? &opt : NULL,
                                .num_options = platform ? 1 : 0};
  TRY(g_api->PJRT_Client_Create(&cc), "PJRT_Client_Create");
  client = cc.client;
  PJRT_Client_PlatformName_Args pn = {.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE,
                                      .client = client};
  TRY(g_api->PJRT_Client_PlatformName(&pn), "PJRT_Client_PlatformName");
  PJRT_Client_AddressableDevices_Args ad = {
      .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = client};
  TRY(g_api->PJRT_Client_AddressableDevices(&ad), "PJRT_Client_AddressableDevices");
  if (ad.num_addressable_devices == 0) {
    fprintf(stderr, "kiln-pjrt-example: the client has no addressable device\n");
    goto done;
  }
  PJRT_Device *device = ad.addressable_devices[0];
  PJRT_Device_GetDescription_Args gd = {.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE,
                                        .device = device};
  TRY(g_api->PJRT_Device_GetDescription(&gd), "PJRT_Device_GetDescription");
  PJRT_DeviceDescription_Kind_Args dk = {
      .struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE,
      .device_description = gd.device_description};
  TRY(g_api->PJRT_DeviceDescription_Kind(&dk), "PJRT_DeviceDescription_Kind");
  printf(
      "plugin: PJRT %d.%d, platform %.*s, %zu addressable device(s), running on \"%.*s\" "
      "(loaded in %.1f ms)\n",
      g_api->pjrt_api_version.major_version, g_api->pjrt_api_version.minor_version,
      (int)pn.platform_name_size, pn.platform_name, ad.num_addressable_devices,
      (int)dk.device_kind_size, dk.device_kind, now_ms() - t0);

  /* 3. Compile the HLO text: format "hlo"; no compile options (an empty CompileOptionsProto:
   * the plugin's defaults, one replica and one partition). */
  PJRT_Program program = {.struct_size = PJRT_Program_STRUCT_SIZE,
                          .code = text,
                          .code_size = text_size,
                          .format = "hlo",
                          .format_size = 3};
  PJRT_Client_Compile_Args ca = {
      .struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE, .client = client, .program = &program};
  t0 = now_ms();
  TRY(g_api->PJRT_Client_Compile(&ca), "PJRT_Client_Compile");
  double compile_ms = now_ms() - t0;
  exe = ca.executable;
  PJRT_LoadedExecutable_GetExecutable_Args ge = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
      .loaded_executable = exe};
  TRY(g_api->PJRT_LoadedExecutable_GetExecutable(&ge), "PJRT_LoadedExecutable_GetExecutable");
  exe_info = ge.executable;
  PJRT_Executable_NumOutputs_Args no = {.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE,
                                        .executable = exe_info};
  TRY(g_api->PJRT_Executable_NumOutputs(&no), "PJRT_Executable_NumOutputs");
  num_outputs = no.num_outputs;
  outs = calloc(num_outputs ? num_outputs : 1, sizeof(*outs));
  printf("compile: %.2f ms, %zu parameter(s), %zu output(s)\n", compile_ms, num_params,
         num_outputs);

  /* 4. Inputs: deterministic values, copied by the plugin during the call. */
  double upload_ms = 0;
  for (size_t p = 0; p < num_params; p++) {
    size_t n = 1;
    for (size_t d = 0; d < params[p].rank; d++) n *= (size_t)params[p].dims[d];
    void *host = malloc(n * type_bytes(params[p].type) + 1);
    fill(host, params[p].type, n, p);
    PJRT_Client_BufferFromHostBuffer_Args ba = {
        .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
        .client = client,
        .data = host,
        .type = params[p].type,
        .dims = params[p].dims,
        .num_dims = params[p].rank,
        .host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
        .device = device};
    t0 = now_ms();
    PJRT_Error *e = g_api->PJRT_Client_BufferFromHostBuffer(&ba);
    if (!e && ba.done_with_host_buffer) {
      PJRT_Event_Await_Args wa = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE,
                                  .event = ba.done_with_host_buffer};
      e = g_api->PJRT_Event_Await(&wa);
      PJRT_Event_Destroy_Args da = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                    .event = ba.done_with_host_buffer};
      report(g_api->PJRT_Event_Destroy(&da), "PJRT_Event_Destroy");
    }
    upload_ms += now_ms() - t0;
    free(host);
    args[p] = ba.buffer;
    TRY(e, "PJRT_Client_BufferFromHostBuffer");
  }
  printf("inputs: %.2f ms to upload\n", upload_ms);

  /* 5. Execute: the first run generates the kernels (lazy JIT), the rest reuse them. */
  t0 = now_ms();
  TRY(execute(exe, device, args, num_params, outs), "PJRT_LoadedExecutable_Execute");
  double first_ms = now_ms() - t0;
  double steady_ms = 0;
  for (long r = 1; r < repeat; r++) {
    for (size_t o = 0; o < num_outputs; o++) destroy_buffer(outs[o]), outs[o] = NULL;
    t0 = now_ms();
    TRY(execute(exe, device, args, num_params, outs), "PJRT_LoadedExecutable_Execute");
    steady_ms += now_ms() - t0;
  }
  printf("execute: first %.2f ms (includes code generation)", first_ms);
  if (repeat > 1)
    printf(", then %.3f ms per run over %ld runs", steady_ms / (repeat - 1), repeat - 1);
  printf("\n");

  /* 6. Read the results back and print them. */
  for (size_t o = 0; o < num_outputs; o++) {
    PJRT_Buffer_ElementType_Args et = {.struct_size = PJRT_Buffer_ElementType_Args_STRUCT_SIZE,
                                       .buffer = outs[o]};
    TRY(g_api->PJRT_Buffer_ElementType(&et), "PJRT_Buffer_ElementType");
    PJRT_Buffer_Dimensions_Args dm = {.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE,
                                      .buffer = outs[o]};
    TRY(g_api->PJRT_Buffer_Dimensions(&dm), "PJRT_Buffer_Dimensions");
    void *host = NULL;
    size_t size = 0;
    PJRT_Error *e = to_host(outs[o], &host, &size);
    if (report(e, "PJRT_Buffer_ToHostBuffer")) {
      free(host);
      goto done;
    }
    printf("output %zu: %s[", o, type_name(et.type));
    size_t n = 1;
    for (size_t d = 0; d < dm.num_dims; d++) {
      printf("%s%" PRId64, d ? "," : "", dm.dims[d]);
      n *= (size_t)dm.dims[d];
    }
    printf("]");
    size_t bytes = type_bytes(et.type);
    if (!bytes || n * bytes != size) {
      printf(" (%zu bytes of a type this example does not print)\n", size);
      free(host);
      continue;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += element(host, et.type, i);
    printf(" sum %.6g:", sum);
    for (size_t i = 0; i < n && i < 8; i++) printf(" %.6g", element(host, et.type, i));
    printf("%s\n", n > 8 ? " ..." : "");
    free(host);
  }
  rc = 0;

done:
  if (g_api) {
    for (size_t o = 0; outs && o < num_outputs; o++) destroy_buffer(outs[o]);
    for (size_t p = 0; p < num_params; p++) destroy_buffer(args[p]);
    if (exe_info) {
      PJRT_Executable_Destroy_Args a = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                        .executable = exe_info};
      report(g_api->PJRT_Executable_Destroy(&a), "PJRT_Executable_Destroy");
    }
    if (exe) {
      PJRT_LoadedExecutable_Destroy_Args a = {
          .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = exe};
      report(g_api->PJRT_LoadedExecutable_Destroy(&a), "PJRT_LoadedExecutable_Destroy");
    }
    if (client) {
      PJRT_Client_Destroy_Args a = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE,
                                    .client = client};
      report(g_api->PJRT_Client_Destroy(&a), "PJRT_Client_Destroy");
    }
  }
  free(outs);
  free(text);
  return rc;
}
