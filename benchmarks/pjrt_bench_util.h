/* For the benchmarks that drive the PJRT plugin through its table (bench_pjrt_execute,
 * bench_pjrt_async): loading it as a framework does, and the calls they all make, each
 * exiting with the plugin's message on an error (a benchmark that cannot run prints why). */
#ifndef KILN_BENCHMARKS_PJRT_BENCH_UTIL_H_
#define KILN_BENCHMARKS_PJRT_BENCH_UTIL_H_

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/pjrt_c_api.h"

/* Prints `what` and the error's message and exits when `e` is an error. */
static inline void pjrt_bench_check(const PJRT_Api *api, PJRT_Error *e, const char *what) {
  if (!e) return;
  PJRT_Error_Message_Args m;
  memset(&m, 0, sizeof(m));
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = e;
  api->PJRT_Error_Message(&m);
  fprintf(stderr, "%s failed: %.*s\n", what, (int)m.message_size, m.message);
  exit(1);
}

/* The plugin ($KILN_PJRT_PLUGIN, else `fallback`) opened with RTLD_LOCAL; NULL (said why)
 * when it does not load or has no GetPjrtApi. */
static inline const PJRT_Api *pjrt_bench_load(const char *fallback) {
  const char *path = getenv("KILN_PJRT_PLUGIN");
  if (!path || !*path) path = fallback;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return NULL;
  }
  const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(h, "GetPjrtApi");
  if (!get) fprintf(stderr, "%s has no GetPjrtApi\n", path);
  return get ? get() : NULL;
}

/* A named option of PJRT_Client_Create: a string, or a bool. */
static inline PJRT_NamedValue pjrt_bench_opt(const char *name, const char *value) {
  PJRT_NamedValue o;
  memset(&o, 0, sizeof(o));
  o.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  o.name = name;
  o.name_size = strlen(name);
  o.type = PJRT_NamedValue_kString;
  o.string_value = value;
  o.value_size = strlen(value);
  return o;
}

static inline PJRT_NamedValue pjrt_bench_opt_bool(const char *name, bool value) {
  PJRT_NamedValue o = pjrt_bench_opt(name, "");
  o.type = PJRT_NamedValue_kBool;
  o.bool_value = value;
  o.value_size = 1;
  return o;
}

/* A client with the `n` options `o`. */
static inline PJRT_Client *pjrt_bench_create(const PJRT_Api *api, const PJRT_NamedValue *o,
                                             size_t n) {
  PJRT_Client_Create_Args ca;
  memset(&ca, 0, sizeof(ca));
  ca.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  ca.create_options = o;
  ca.num_options = n;
  pjrt_bench_check(api, api->PJRT_Client_Create(&ca), "PJRT_Client_Create");
  return ca.client;
}

/* A client with `n` string options names[i] = values[i]. */
static inline PJRT_Client *pjrt_bench_client(const PJRT_Api *api, const char *const *names,
                                             const char *const *values, int n) {
  PJRT_NamedValue o[8];
  for (int i = 0; i < n && i < 8; i++) o[i] = pjrt_bench_opt(names[i], values[i]);
  return pjrt_bench_create(api, o, (size_t)(n < 8 ? n : 8));
}

static inline void pjrt_bench_client_destroy(const PJRT_Api *api, PJRT_Client *c) {
  PJRT_Client_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  d.client = c;
  pjrt_bench_check(api, api->PJRT_Client_Destroy(&d), "PJRT_Client_Destroy");
}

/* HLO text `hlo` compiled on `c`. */
static inline PJRT_LoadedExecutable *pjrt_bench_compile(const PJRT_Api *api, PJRT_Client *c,
                                                        const char *hlo) {
  PJRT_Program p;
  memset(&p, 0, sizeof(p));
  p.struct_size = PJRT_Program_STRUCT_SIZE;
  p.code = (char *)hlo;
  p.code_size = strlen(hlo);
  p.format = "hlo";
  p.format_size = 3;
  PJRT_Client_Compile_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  a.client = c;
  a.program = &p;
  pjrt_bench_check(api, api->PJRT_Client_Compile(&a), "PJRT_Client_Compile");
  return a.executable;
}

static inline void pjrt_bench_loaded_destroy(const PJRT_Api *api, PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  d.executable = l;
  pjrt_bench_check(api, api->PJRT_LoadedExecutable_Destroy(&d), "PJRT_LoadedExecutable_Destroy");
}

static inline void pjrt_bench_buffer_destroy(const PJRT_Api *api, PJRT_Buffer *b) {
  PJRT_Buffer_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  d.buffer = b;
  pjrt_bench_check(api, api->PJRT_Buffer_Destroy(&d), "PJRT_Buffer_Destroy");
}

static inline void pjrt_bench_event_destroy(const PJRT_Api *api, PJRT_Event *e) {
  if (!e) return;
  PJRT_Event_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  d.event = e;
  pjrt_bench_check(api, api->PJRT_Event_Destroy(&d), "PJRT_Event_Destroy");
}

/* Starts `l` on its one device with the one argument `arg`: its one output into *out, its
 * completion event returned. */
static inline PJRT_Event *pjrt_bench_execute1(const PJRT_Api *api, PJRT_LoadedExecutable *l,
                                              PJRT_Buffer *arg, PJRT_Buffer **out) {
  PJRT_ExecuteOptions eo;
  memset(&eo, 0, sizeof(eo));
  eo.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  PJRT_Buffer *const *lists[1] = {&arg};
  PJRT_Buffer **outs[1] = {out};
  PJRT_Event *done[1] = {NULL};
  PJRT_LoadedExecutable_Execute_Args ea;
  memset(&ea, 0, sizeof(ea));
  ea.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  ea.executable = l;
  ea.options = &eo;
  ea.argument_lists = lists;
  ea.num_devices = 1;
  ea.num_args = 1;
  ea.output_lists = outs;
  ea.device_complete_events = done;
  pjrt_bench_check(api, api->PJRT_LoadedExecutable_Execute(&ea), "PJRT_LoadedExecutable_Execute");
  return done[0];
}

/* The step of the loop benchmarks, after their own HloModule line (bench_pjrt_async donates x
 * to it): f32[1048576] -> tanh(x) * 0.9 + 0.01. */
#define PJRT_BENCH_TANH_STEP                          \
  "ENTRY main {\n"                                    \
  "  x = f32[1048576] parameter(0)\n"                 \
  "  t = f32[1048576] tanh(x)\n"                      \
  "  a = f32[] constant(0.9)\n"                       \
  "  b = f32[] constant(0.01)\n"                      \
  "  ab = f32[1048576] broadcast(a), dimensions={}\n" \
  "  bb = f32[1048576] broadcast(b), dimensions={}\n" \
  "  m = f32[1048576] multiply(t, ab)\n"              \
  "  ROOT s = f32[1048576] add(m, bb)\n"              \
  "}\n"

/* One of the clients a benchmark compares: its first device and a program compiled there. */
typedef struct pjrt_bench_side {
  const char *name;
  PJRT_Client *c;
  PJRT_Device *d;
  PJRT_LoadedExecutable *l;
} pjrt_bench_side_t;

/* Opens `s` named `name`: a client with the `n` options `o`, `hlo` compiled on it. */
static inline void pjrt_bench_side_open(const PJRT_Api *api, pjrt_bench_side_t *s, const char *name,
                                        const PJRT_NamedValue *o, size_t n, const char *hlo) {
  s->name = name;
  s->c = pjrt_bench_create(api, o, n);
  PJRT_Client_AddressableDevices_Args da;
  memset(&da, 0, sizeof(da));
  da.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  da.client = s->c;
  pjrt_bench_check(api, api->PJRT_Client_AddressableDevices(&da), "PJRT_Client_AddressableDevices");
  s->d = da.addressable_devices[0];
  s->l = pjrt_bench_compile(api, s->c, hlo);
}

static inline void pjrt_bench_side_close(const PJRT_Api *api, pjrt_bench_side_t *s) {
  pjrt_bench_loaded_destroy(api, s->l);
  pjrt_bench_client_destroy(api, s->c);
}

#endif /* KILN_BENCHMARKS_PJRT_BENCH_UTIL_H_ */
