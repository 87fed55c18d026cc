/* Backend compile-time benchmark: the vadd kernel (with libdevice __nv_expf) through kiln's
 * NVPTX backend — PTX, cubin via nvJitLink and via ptxas, lazy vs eager libdevice — beside
 * `nvcc -cubin -arch=<arch>` of the equivalent CUDA C kernel, plus the host JIT of saxpy.
 *
 * Usage: bench_backend [--arch sm_90] [--reps 20] [--nvcc-reps 5]
 * Prints medians in milliseconds; tools that are absent are reported and skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/backend/host_jit.h"
#include "compiler/backend/llvm_init.h"
#include "compiler/backend/nvjitlink.h"
#include "compiler/backend/nvptx.h"
#include "tests/backend_test_kernels.h"

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kiln_clock_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One compile of a fresh vadd module; returns total ms or -1 on error (printed once). */
static double compile_once(const kiln_nvptx_options_t *opts, kiln_nvptx_result_t *keep) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = kiln_test_build_vadd(ctx, "vadd", "__nv_expf");
  kiln_nvptx_result_t r;
  double t0 = kiln_clock_ms();
  kiln_status s = kiln_nvptx_compile(m, opts, &r);
  double ms = kiln_clock_ms() - t0;
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  if (s) {
    kiln_status_report(s, "bench_backend: compile");
    kiln_nvptx_result_free(&r);
    return -1;
  }
  if (keep)
    *keep = r;
  else
    kiln_nvptx_result_free(&r);
  return ms;
}

typedef struct stage_medians {
  double total, libdevice, opt, ptx, cubin;
  bool ok;
} stage_medians_t;

static stage_medians_t measure_compile(const kiln_nvptx_options_t *opts, int reps) {
  stage_medians_t out = {0};
  double *t = kiln_calloc((size_t)reps, sizeof *t), *l = kiln_calloc((size_t)reps, sizeof *l);
  double *o = kiln_calloc((size_t)reps, sizeof *o), *p = kiln_calloc((size_t)reps, sizeof *p);
  double *c = kiln_calloc((size_t)reps, sizeof *c);
  for (int i = 0; i < reps; i++) {
    kiln_nvptx_result_t r;
    t[i] = compile_once(opts, &r);
    if (t[i] < 0) goto done;
    l[i] = r.libdevice_ms;
    o[i] = r.opt_ms;
    p[i] = r.ptx_ms;
    c[i] = r.cubin_ms;
    kiln_nvptx_result_free(&r);
  }
  out = (stage_medians_t){median(t, reps), median(l, reps), median(o, reps),
                          median(p, reps), median(c, reps), true};
done:
  kiln_free(t);
  kiln_free(l);
  kiln_free(o);
  kiln_free(p);
  kiln_free(c);
  return out;
}

/* Median of PTX -> cubin with one method; -1 when unavailable. */
static double measure_cubin(const char *ptx, size_t len, const char *arch, kiln_cubin_via_t via,
                            int reps) {
  double *t = kiln_calloc((size_t)reps, sizeof *t);
  double result = -1;
  for (int i = 0; i < reps; i++) {
    kiln_nvptx_options_t opts = {.arch = arch, .cubin_via = via};
    kiln_nvptx_result_t r;
    double t0 = kiln_clock_ms();
    kiln_status s = kiln_nvptx_ptx_to_cubin(ptx, len, &opts, &r);
    t[i] = kiln_clock_ms() - t0;
    kiln_nvptx_result_free(&r);
    if (s) {
      printf("  (%s)\n", kiln_status_message(s));
      kiln_status_free(s);
      goto done;
    }
  }
  result = median(t, reps);
done:
  kiln_free(t);
  return result;
}

static char *find_nvcc(void) {
  char *ptxas = NULL;
  kiln_status s = kiln_nvptx_find_ptxas(NULL, &ptxas);
  if (s) {
    kiln_status_free(s);
    return NULL;
  }
  /* nvcc lives beside ptxas in every toolkit layout. */
  char *slash = strrchr(ptxas, '/');
  kiln_strbuf_t p = {0};
  kiln_strbuf_append_n(&p, ptxas, (size_t)(slash - ptxas));
  kiln_strbuf_append(&p, "/nvcc");
  kiln_free(ptxas);
  if (access(kiln_strbuf_cstr(&p), X_OK) != 0) {
    kiln_strbuf_free(&p);
    return NULL;
  }
  return kiln_strbuf_take(&p);
}

static const char kVaddCu[] =
    "extern \"C\" __global__ void vadd(const float* a, const float* b, float* c, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) c[i] = expf(a[i] + b[i]);\n"
    "}\n";

/* Median of `nvcc -cubin -arch=<arch>` on kVaddCu; -1 when nvcc is absent or fails. */
static double measure_nvcc(const char *arch, int reps) {
  char *nvcc = find_nvcc();
  if (!nvcc) {
    printf("nvcc: not found (ratio skipped)\n");
    return -1;
  }
  char dir[] = "/tmp/kiln-bench-nvcc-XXXXXX";
  if (!mkdtemp(dir)) {
    kiln_free(nvcc);
    return -1;
  }
  char cu[256], cubin[256], arch_opt[64];
  snprintf(cu, sizeof cu, "%s/vadd.cu", dir);
  snprintf(cubin, sizeof cubin, "%s/vadd.cubin", dir);
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  FILE *f = fopen(cu, "w");
  double result = -1;
  if (f) {
    fputs(kVaddCu, f);
    fclose(f);
    double *t = kiln_calloc((size_t)reps, sizeof *t);
    const char *argv[] = {nvcc, "-cubin", arch_opt, "-o", cubin, cu, NULL};
    bool ok = true;
    for (int i = 0; i < reps && ok; i++) {
      char *out = NULL;
      int code = -1;
      double t0 = kiln_clock_ms();
      kiln_status s = kiln_nvptx_run_tool(argv, &out, &code);
      t[i] = kiln_clock_ms() - t0;
      if (s || code != 0) {
        printf("nvcc failed (exit %d): %s\n", code, s ? kiln_status_message(s) : out);
        ok = false;
      }
      kiln_status_free(s);
      kiln_free(out);
    }
    if (ok) result = median(t, reps);
    kiln_free(t);
  }
  unlink(cu);
  unlink(cubin);
  rmdir(dir);
  printf("nvcc: %s\n", nvcc);
  kiln_free(nvcc);
  return result;
}

static void bench_host_jit(int reps) {
  double *t = kiln_calloc((size_t)reps, sizeof *t);
  double *opt = kiln_calloc((size_t)reps, sizeof *opt);
  for (int i = 0; i < reps; i++) {
    double t0 = kiln_clock_ms();
    kiln_host_jit_t *jit = NULL;
    kiln_status s = kiln_host_jit_create(NULL, &jit);
    void *addr = NULL;
    if (!s)
      s = kiln_host_jit_add_module(jit, kiln_test_build_saxpy(kiln_host_jit_context(jit), "saxpy"),
                                   NULL);
    if (!s) s = kiln_host_jit_lookup(jit, "saxpy", &addr);
    t[i] = kiln_clock_ms() - t0;
    if (jit) opt[i] = kiln_host_jit_stats(jit).opt_ms;
    kiln_host_jit_destroy(jit);
    if (s) {
      kiln_status_report(s, "bench_backend: host JIT");
      goto done;
    }
  }
  printf("host JIT saxpy (create + O3 + codegen + lookup): %8.2f ms  (O3 %.2f ms)\n",
         median(t, reps), median(opt, reps));
done:
  kiln_free(t);
  kiln_free(opt);
}

int main(int argc, char **argv) {
  const char *arch = "sm_90";
  int reps = 20, nvcc_reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--arch") && i + 1 < argc)
      arch = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nvcc-reps") && i + 1 < argc)
      nvcc_reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--arch sm_90] [--reps 20] [--nvcc-reps 5]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (nvcc_reps < 1) nvcc_reps = 1;
  printf("kiln backend benchmark: vadd + __nv_expf, arch %s, medians of %d (nvcc: %d)\n", arch,
         reps, nvcc_reps);

  /* Warm-up: first-use costs (target init, libdevice read, nvJitLink dlopen) are one-time. */
  kiln_nvptx_options_t warm = {.arch = arch};
  kiln_nvptx_result_t first;
  double t_first = compile_once(&warm, &first);
  if (t_first < 0) return 1;
  printf("first compile (cold, to cubin via %s): %.2f ms\n",
         first.method == KILN_CUBIN_METHOD_NVJITLINK ? "nvJitLink"
         : first.method == KILN_CUBIN_METHOD_PTXAS   ? "ptxas"
                                                     : "none",
         t_first);

  kiln_nvptx_options_t ptx_only = {.arch = arch, .cubin_via = KILN_CUBIN_VIA_SKIP};
  stage_medians_t lazy = measure_compile(&ptx_only, reps);
  kiln_nvptx_options_t eager_opts = ptx_only;
  eager_opts.libdevice_eager = true;
  stage_medians_t eager = measure_compile(&eager_opts, reps);
  if (!lazy.ok || !eager.ok) return 1;
  printf("LLVM IR -> PTX                     : %8.2f ms  (libdevice %.2f, O3 %.2f, emit %.2f)\n",
         lazy.total, lazy.libdevice, lazy.opt, lazy.ptx);
  printf("libdevice link lazy vs eager       : %8.2f ms vs %.2f ms (%.1fx)\n", lazy.libdevice,
         eager.libdevice, eager.libdevice / (lazy.libdevice > 0 ? lazy.libdevice : 1e-9));

  double jit = measure_cubin(first.ptx, first.ptx_size, arch, KILN_CUBIN_VIA_NVJITLINK, reps);
  if (jit >= 0)
    printf("PTX -> cubin via nvJitLink         : %8.2f ms\n", jit);
  else
    printf("PTX -> cubin via nvJitLink         : unavailable\n");
  double pxs = measure_cubin(first.ptx, first.ptx_size, arch, KILN_CUBIN_VIA_PTXAS, reps);
  if (pxs >= 0)
    printf("PTX -> cubin via ptxas             : %8.2f ms\n", pxs);
  else
    printf("PTX -> cubin via ptxas             : unavailable\n");
  kiln_nvptx_result_free(&first);

  kiln_nvptx_options_t full = {.arch = arch};
  stage_medians_t total = measure_compile(&full, reps);
  if (total.ok) printf("kiln LLVM IR -> cubin (auto)       : %8.2f ms\n", total.total);

  double nvcc = measure_nvcc(arch, nvcc_reps);
  if (nvcc >= 0) {
    printf("nvcc -cubin %s (.cu -> cubin)   : %8.2f ms\n", arch, nvcc);
    if (total.ok) printf("ratio nvcc / kiln                  : %8.1fx\n", nvcc / total.total);
  }
  bench_host_jit(reps < 10 ? reps : 10);
  return 0;
}
