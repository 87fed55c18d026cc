/* Benchmark modules on the host (see bench_module.h). */
#include "tools/common/bench_module.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "compiler/thunks/compile.h"
#include "runtime/buffer.h"
#include "plugin/env_options.h"

kiln_status kiln_bench_module_load(kiln_device_t *dev, const char *text, bool elemental,
                                   int num_params, const uint64_t *sizes,
                                   kiln_bench_module_t *out) {
  memset(out, 0, sizeof(*out));
  if (num_params < 0 || num_params > KILN_BENCH_MODULE_MAX_PARAMS)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "bench module: %d parameters (at most %d)",
                            num_params, KILN_BENCH_MODULE_MAX_PARAMS);
  kiln_hlo_module_t *m = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  co.emit.target = KILN_TARGET_HOST;
  kiln_pass_options_t po;
  kiln_pjrt_compile_options_from_env(&co, &po);
  if (elemental) po.no_gemm_library = true; /* every dot an emitted kernel */
  kiln_executable_desc_t *d = NULL;
  kiln_compile_stats_t cs;
  kiln_status st = kiln_compile_module(m, &co, &d, &cs);
  kiln_hlo_module_destroy(m);
  KILN_RETURN_IF_ERROR_PLAIN(st);
  out->gemms = cs.emit.gemms;
  out->kernels = cs.emit.kernels;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_executable_load(dev, d, &out->exe));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_create(dev, &out->stream));
  out->num_params = num_params;
  for (int i = 0; i < num_params; i++) {
    out->sizes[i] = sizes[i];
    KILN_RETURN_IF_ERROR_PLAIN(kiln_device_mem_alloc(dev, sizes[i], &out->params[i]));
  }
  return NULL;
}

kiln_status kiln_bench_module_run(kiln_bench_module_t *k, double *ms) {
  kiln_device_buffer_t *outs[1] = {NULL};
  double t0 = kiln_clock_ms();
  kiln_status st = kiln_executable_run(k->exe, k->stream, k->params, k->sizes, k->num_params, outs);
  *ms = kiln_clock_ms() - t0;
  kiln_device_buffer_destroy(outs[0]);
  return st;
}

void kiln_bench_module_release(kiln_device_t *dev, kiln_bench_module_t *k) {
  for (int i = 0; i < KILN_BENCH_MODULE_MAX_PARAMS; i++)
    if (k->params[i]) kiln_device_mem_free(dev, k->params[i]);
  if (k->stream) kiln_stream_destroy(k->stream);
  kiln_executable_destroy(k->exe);
  memset(k, 0, sizeof(*k));
}

kiln_bench_sgemm_fn kiln_bench_openblas_sgemm(const kiln_device_t *dev, void **handle) {
  kiln_bench_sgemm_fn f = NULL;
  *handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!*handle) return NULL;
  void *p = dlsym(*handle, "cblas_sgemm"), *q = dlsym(*handle, "openblas_set_num_threads");
  memcpy(&f, &p, sizeof p);
  int threads = 0;
  sscanf(dev->name, "host (%d", &threads);
  if (q && threads > 0) {
    void (*set)(int);
    memcpy(&set, &q, sizeof q);
    set(threads);
  }
  return f;
}
