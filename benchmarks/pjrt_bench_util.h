/* For the benchmarks that drive the PJRT plugin through its table (bench_pjrt_execute,
 * bench_pjrt_async): loading it as a framework does, and the calls they all make, each
 * exiting with the plugin's message on an error (a benchmark that cannot run prints why). */
#ifndef KILN_BENCHMARKS_PJRT_BENCH_UTIL_H_
#define KILN_BENCHMARKS_PJRT_BENCH_UTIL_H_

#include <dlfcn.h>
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

/* A client with `n` string options names[i] = values[i]. */
static inline PJRT_Client *pjrt_bench_client(const PJRT_Api *api, const char *const *names,
                                             const char *const *values, int n) {
  PJRT_NamedValue o[8];
  memset(o, 0, sizeof(o));
  for (int i = 0; i < n && i < 8; i++) {
    o[i].struct_size = PJRT_NamedValue_STRUCT_SIZE;
    o[i].name = names[i];
    o[i].name_size = strlen(names[i]);
    o[i].type = PJRT_NamedValue_kString;
    o[i].string_value = values[i];
    o[i].value_size = strlen(values[i]);
  }
  PJRT_Client_Create_Args ca;
  memset(&ca, 0, sizeof(ca));
  ca.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  ca.create_options = o;
  ca.num_options = (size_t)(n < 8 ? n : 8);
  pjrt_bench_check(api, api->PJRT_Client_Create(&ca), "PJRT_Client_Create");
  return ca.client;
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

#endif /* KILN_BENCHMARKS_PJRT_BENCH_UTIL_H_ */
