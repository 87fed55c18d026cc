/* GELU (the emitter document's loop fusion over bf16[6,512,4096]) benchmark, side by side:
 *
 * (a) host throughput: kiln's kernel, compiled as the host backend compiles it (host_target),
 *     on the host thread pool against a C loop doing the same
 *     math per element (bf16 in/out, f32 math, tanhf), compiled at run time with
 *     `gcc -O3 -march=native` and again with `-ffast-math` added, dlopen'ed, and run over the
 *     same pool in the same 512-element chunks (one kiln block = 512 threads x 1 element).
 *     Also single-threaded (pool of one). The runs of all four alternate; medians and
 *     minimums are printed. Goal: >= 1.0x the first loop, >= 0.8x the second.
 * (b) compile latency to a cubin for sm_90: kiln (HLO fusion -> kernel IR -> pipeline ->
 *     NVPTX -> PTX -> cubin through nvJitLink, else ptxas) against `nvcc -cubin -arch=sm_90`
 *     of an equivalent hand-written CUDA kernel (no headers, the same bit-level bf16
 *     rounding). Medians of steady runs (after one warm-up). Goal: >= 20x faster.
 *
 * Usage: bench_gelu [--reps 10] [--compile-reps 9] [--nvcc-reps 5]
 * Absent tools (gcc, nvcc, ptxas/nvJitLink) are reported and their rows skipped. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/numeric.h"
#include "tools/common/hlo_file.h"

#define D0 6
#define D1 512
#define D2 4096
#define NELEM ((int64_t)D0 * D1 * D2)
#define CHUNK 512

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kiln_clock_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char kGeluHlo[] =
    "gelu {\n"
    "  param = bf16[6,512,4096] parameter(0)\n"
    "  constant_0 = bf16[] constant(0.5)\n"
    "  bcast_0 = bf16[6,512,4096] broadcast(constant_0), dimensions={}\n"
    "  constant_1 = bf16[] constant(1)\n"
    "  bcast_1 = bf16[6,512,4096] broadcast(constant_1), dimensions={}\n"
    "  constant_2 = bf16[] constant(0.79785)\n"
    "  bcast_2 = bf16[6,512,4096] broadcast(constant_2), dimensions={}\n"
    "  constant_3 = bf16[] constant(0.044708)\n"
    "  bcast_3 = bf16[6,512,4096] broadcast(constant_3), dimensions={}\n"
    "  square = bf16[6,512,4096] multiply(param, param)\n"
    "  cube = bf16[6,512,4096] multiply(square, param)\n"
    "  multiply_3 = bf16[6,512,4096] multiply(cube, bcast_3)\n"
    "  add_1 = bf16[6,512,4096] add(param, multiply_3)\n"
    "  multiply_2 = bf16[6,512,4096] multiply(add_1, bcast_2)\n"
    "  tanh_0 = bf16[6,512,4096] tanh(multiply_2)\n"
    "  add_0 = bf16[6,512,4096] add(tanh_0, bcast_1)\n"
    "  multiply_1 = bf16[6,512,4096] multiply(add_0, bcast_0)\n"
    "  ROOT multiply_0 = bf16[6,512,4096] multiply(param, multiply_1)\n"
    "}\n";

/* The C loop: same constants (as bf16 values), f32 math, one rounding to bf16 at the end. */
static const char kCLoop[] =
    "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n"
    "static inline float bf2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }\n"
    "static inline uint16_t f2bf(float f) { uint32_t u; memcpy(&u, &f, 4);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16); }\n"
    "void gelu_loop(const uint16_t *restrict in, uint16_t *restrict out, long n) {\n"
    "  for (long i = 0; i < n; i++) {\n"
    "    float x = bf2f(in[i]);\n"
    "    float y = x * (0.5f * (1.0f + tanhf(0.796875f * (x + 0.0446777344f * x * x * x))));\n"
    "    out[i] = f2bf(y);\n"
    "  }\n"
    "}\n";

/* The hand-written CUDA kernel for nvcc: 128 threads x 4 elements per block, as kiln's. */
static const char kCuda[] =
    "typedef unsigned short u16; typedef unsigned int u32;\n"
    "__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float((u32)h << 16); }\n"
    "__device__ __forceinline__ u16 f2bf(float f) { u32 u = __float_as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u); return (u16)(u >> 16); }\n"
    "extern \"C\" __global__ void __launch_bounds__(128) gelu(const ushort4 *__restrict__ in, ushort4 *__restrict__ out) {\n"
    "  long i = (long)blockIdx.x * 128 + threadIdx.x;\n"
    "  ushort4 v = in[i]; u16 e[4] = {v.x, v.y, v.z, v.w};\n"
    "  #pragma unroll\n"
    "  for (int k = 0; k < 4; k++) { float x = bf2f(e[k]);\n"
    "    float y = x * (0.5f * (1.0f + tanhf(0.796875f * (x + 0.0446777344f * x * x * x))));\n"
    "    e[k] = f2bf(y); }\n"
    "  out[i] = make_ushort4(e[0], e[1], e[2], e[3]);\n"
    "}\n";

typedef void (*gelu_loop_fn)(const uint16_t *in, uint16_t *out, long n);

/* Pool trampoline: args = {in, out, fn}; a "block" is CHUNK elements. */
static void loop_blocks(void **args, int64_t b, int64_t e) {
  gelu_loop_fn fn = (gelu_loop_fn)args[2];
  fn((const uint16_t *)args[0] + b * CHUNK, (uint16_t *)args[1] + b * CHUNK, (long)((e - b) * CHUNK));
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  fclose(f);
  return 0;
}

/* Builds the C loop with gcc and `flags`; returns the function (handle kept open) or NULL. */
static gelu_loop_fn build_c_loop(const char *dir, const char *tag, const char *flags) {
  char src[512], so[512], cmd[2048];
  snprintf(src, sizeof(src), "%s/gelu_loop.c", dir);
  snprintf(so, sizeof(so), "%s/gelu_loop_%s.so", dir, tag);
  if (write_file(src, kCLoop)) return NULL;
  snprintf(cmd, sizeof(cmd), "gcc %s -shared -fPIC -o %s %s -lm 2>&1", flags, so, src);
  if (system(cmd) != 0) {
    printf("  (gcc %s failed; row skipped)\n", flags);
    return NULL;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("  (dlopen %s: %s)\n", so, dlerror());
    return NULL;
  }
  return (gelu_loop_fn)dlsym(h, "gelu_loop");
}

/* One timed kernel: a host-kernel-ABI function, its args and block count. */
typedef struct runner {
  const char *label;
  kiln_host_kernel_fn fn;
  void *args[3];
  int64_t blocks;
} runner_t;

/* Times the runners on `pool`: one warm-up each, then `reps` rounds that run each once (each
 * round starting with the next runner), so all see the same background load; per runner the median and the minimum (the least
 * disturbed run on a shared machine) in ms. */
static void time_set(kiln_host_pool_t *pool, runner_t *rs, int n, int reps, double *med, double *mn) {
  double *t = kiln_calloc((size_t)(reps * n), sizeof(double));
  for (int i = 0; i < n; i++) kiln_status_free(kiln_host_pool_launch(pool, rs[i].fn, rs[i].args, rs[i].blocks, 0));
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < n; j++) {
      int i = (r + j) % n; /* each round starts with another runner */
      double t0 = kiln_clock_ms();
      kiln_status s = kiln_host_pool_launch(pool, rs[i].fn, rs[i].args, rs[i].blocks, 0);
      t[i * reps + r] = kiln_clock_ms() - t0;
      if (s) {
        printf("launch failed: %s\n", kiln_status_message(s));
        kiln_status_free(s);
      }
    }
  for (int i = 0; i < n; i++) {
    double *v = t + i * reps;
    med[i] = median(v, reps); /* sorts v */
    mn[i] = v[0];
  }
  kiln_free(t);
}

static double gbps(double ms) { return (double)NELEM * 4.0 / (ms * 1e6); } /* 2 B in + 2 B out */

int main(int argc, char **argv) {
  int reps = 10, compile_reps = 9, nvcc_reps = 5;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--compile-reps")) compile_reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nvcc-reps")) nvcc_reps = atoi(argv[++i]);
  }
  if (reps < 1) reps = 1;
  if (compile_reps < 1) compile_reps = 1;
  if (nvcc_reps < 1) nvcc_reps = 1;
  char dir[] = "/tmp/kiln_bench_geluXXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(kGeluHlo, strlen(kGeluHlo), NULL, &m);
  if (s) {
    printf("parse: %s\n", kiln_status_message(s));
    return 1;
  }

  /* ---- (a) host throughput ---- */
  printf("GELU bf16[6,512,4096] (%lld elements), medians of %d runs\n", (long long)NELEM, reps);
  kiln_codegen_kernel_t k;
  kiln_codegen_compile_options_t co = {0};
  co.kernel_name = "gelu_bench";
  co.host_target = true; /* as the host backend compiles it */
  s = kiln_codegen_kernel_emit(m->entry, &co, &k);
  kiln_host_jit_t *jit = NULL;
  if (!s) s = kiln_host_jit_create(NULL, &jit);
  kiln_kir_host_kernel_t hk;
  double t0 = kiln_clock_ms();
  if (!s) s = kiln_kir_compile_host(k.kir, jit, &hk);
  double host_compile_ms = kiln_clock_ms() - t0;
  if (s) {
    printf("kiln host compile failed: %s\n", kiln_status_message(s));
    return 1;
  }
  uint16_t *in = kiln_malloc((size_t)NELEM * 2), *out = kiln_malloc((size_t)NELEM * 2);
  uint64_t st = 12345;
  for (int64_t i = 0; i < NELEM; i++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = kiln_f32_to_bf16((float)((double)(st >> 11) / 9007199254740992.0 * 8.0 - 4.0));
  }
  kiln_host_pool_t *pool = NULL, *one = NULL;
  kiln_host_pool_create(0, &pool);
  kiln_host_pool_create(1, &one);
  int workers = kiln_host_pool_num_workers(pool);
  printf("  kiln host compile (LLVM O3 + JIT): %.1f ms\n", host_compile_ms);
  /* The runners, timed with their runs interleaved (see time_set). */
  runner_t rs[4];
  int nr = 0;
  uint16_t *outs[4] = {out, NULL, NULL, NULL};
  rs[nr++] = (runner_t){"kiln kernel", hk.fn, {in, out, NULL}, hk.num_blocks};
  /* The same HLO with every bf16 op rounded (XLA_FLAGS=--xla_allow_excess_precision=false):
   * what the per-op rounding that the default's excess precision drops costs. */
  {
    kiln_codegen_kernel_t k2;
    kiln_codegen_compile_options_t co2 = {0};
    co2.kernel_name = "gelu_bench_strict";
    co2.host_target = true;
    co2.strict_precision = true;
    kiln_kir_host_kernel_t hk2;
    kiln_status e = kiln_codegen_kernel_emit(m->entry, &co2, &k2);
    if (!e) {
      e = kiln_kir_compile_host(k2.kir, jit, &hk2);
      kiln_codegen_kernel_free(&k2);
    }
    if (!e) {
      outs[nr] = kiln_malloc((size_t)NELEM * 2);
      rs[nr] = (runner_t){"kiln kernel, bf16 rounding after every op", hk2.fn, {in, outs[nr], NULL},
                          hk2.num_blocks};
      nr++;
    } else {
      printf("  (strict variant: %s)\n", kiln_status_message(e));
      kiln_status_free(e);
    }
  }
  gelu_loop_fn o3 = build_c_loop(dir, "o3", "-O3 -march=native");
  gelu_loop_fn fm = build_c_loop(dir, "fast", "-O3 -march=native -ffast-math");
  int64_t chunks = NELEM / CHUNK;
  int io3 = -1, ifm = -1;
  if (o3) {
    outs[nr] = kiln_malloc((size_t)NELEM * 2);
    io3 = nr;
    rs[nr++] = (runner_t){"C loop, gcc -O3 -march=native", loop_blocks, {in, outs[io3], (void *)o3}, chunks};
  }
  if (fm) {
    outs[nr] = kiln_malloc((size_t)NELEM * 2);
    ifm = nr;
    rs[nr++] = (runner_t){"C loop, gcc -O3 -march=native -ffast-math", loop_blocks, {in, outs[ifm], (void *)fm},
                          chunks};
  }
  double med[4], mn[4], med1[4], mn1[4];
  time_set(pool, rs, nr, reps, med, mn);
  time_set(one, rs, nr, reps, med1, mn1);
  printf("  %-44s %10s %9s %10s %9s %10s %10s\n", "", "pool(ms)", "GB/s", "1 thr(ms)", "GB/s", "pool min",
         "1 thr min");
  for (int i = 0; i < nr; i++)
    printf("  %-44s %10.2f %9.2f %10.2f %9.2f %10.2f %10.2f\n", rs[i].label, med[i], gbps(med[i]), med1[i],
           gbps(med1[i]), mn[i], mn1[i]);
  printf("  pool of %d workers; speed-up of kiln (goal >= 1.0x vs -O3, >= 0.8x vs -ffast-math), "
         "medians [minimums]:\n",
         workers);
  if (io3 >= 0)
    printf("    vs -O3:         %.2fx (pool)  %.2fx (1 thread)   [%.2fx  %.2fx]\n", med[io3] / med[0],
           med1[io3] / med1[0], mn[io3] / mn[0], mn1[io3] / mn1[0]);
  if (ifm >= 0)
    printf("    vs -ffast-math: %.2fx (pool)  %.2fx (1 thread)   [%.2fx  %.2fx]\n", med[ifm] / med[0],
           med1[ifm] / med1[0], mn[ifm] / mn[0], mn1[ifm] / mn1[0]);
  /* The default kernel computes what the C loop computes (f32 inside, one rounding): its
   * results may differ from the -O3 loop's (libm tanhf) by the final rounding only. */
  if (io3 >= 0) {
    int64_t off = 0, worst = 0;
    for (int64_t i = 0; i < NELEM; i++) {
      int64_t a = (int16_t)out[i] < 0 ? -(int64_t)(out[i] & 0x7fff) : out[i];
      int64_t c = (int16_t)outs[io3][i] < 0 ? -(int64_t)(outs[io3][i] & 0x7fff) : outs[io3][i];
      int64_t d = a > c ? a - c : c - a;
      if (d > 1) off++;
      if (d > worst) worst = d;
    }
    printf("  kiln vs the -O3 loop's results: %lld of %lld elements more than 1 bf16 ulp apart "
           "(largest %lld ulp)\n", (long long)off, (long long)NELEM, (long long)worst);
  }
  for (int i = 1; i < nr; i++) kiln_free(outs[i]);

  /* ---- (b) compile latency to a cubin ---- */
  printf("\nCompile latency to a cubin for sm_90 (medians: kiln %d runs, nvcc %d runs, after a warm-up)\n",
         compile_reps, nvcc_reps);
  double *kt = kiln_calloc((size_t)compile_reps, sizeof(double));
  double lib = 0, opt = 0, ptx = 0, cub = 0, emit = 0;
  const char *method = "none";
  bool kiln_ok = true;
  for (int r = -1; r < compile_reps && kiln_ok; r++) {
    double a = kiln_clock_ms();
    kiln_codegen_kernel_t kk;
    kiln_codegen_compile_options_t o = {0};
    o.kernel_name = "gelu_cubin";
    o.dump_dir = "";
    kiln_status e = kiln_codegen_kernel_emit(m->entry, &o, &kk);
    double b = kiln_clock_ms();
    kiln_nvptx_result_t res;
    kiln_nvptx_options_t no = {0};
    no.dump_dir = "";
    if (!e) e = kiln_codegen_kernel_compile_nvptx(&kk, &no, &res);
    double c = kiln_clock_ms();
    if (e) {
      printf("  kiln: %s\n", kiln_status_message(e));
      kiln_status_free(e);
      kiln_ok = false;
    } else {
      if (!res.cubin) {
        printf("  kiln: no cubin (%s)\n", res.cubin_log ? res.cubin_log : "no nvJitLink or ptxas");
        kiln_ok = false;
      }
      if (r >= 0) {
        kt[r] = c - a;
        emit += b - a;
        lib += res.libdevice_ms;
        opt += res.opt_ms;
        ptx += res.ptx_ms;
        cub += res.cubin_ms;
        method = res.method == KILN_CUBIN_METHOD_NVJITLINK ? "nvJitLink"
                 : res.method == KILN_CUBIN_METHOD_PTXAS   ? "ptxas"
                                                           : "none";
      }
      kiln_nvptx_result_free(&res);
      kiln_codegen_kernel_free(&kk);
    }
  }
  double kiln_c = kiln_ok ? median(kt, compile_reps) : 0;
  if (kiln_ok)
    printf("  kiln (HLO fusion -> cubin via %s): %.1f ms  [mean per stage: emit+pipeline %.1f, "
           "libdevice %.1f, O3 %.1f, PTX %.1f, cubin %.1f]\n",
           method, kiln_c, emit / compile_reps, lib / compile_reps, opt / compile_reps,
           ptx / compile_reps, cub / compile_reps);

  char cu[512], cubin[512], nvcc_path[512] = "";
  snprintf(cu, sizeof(cu), "%s/gelu.cu", dir);
  snprintf(cubin, sizeof(cubin), "%s/gelu.cubin", dir);
  write_file(cu, kCuda);
  const char *cands[] = {getenv("KILN_CUDA_DIR"), "/usr/local/cuda", "/usr/local/cuda-13.0", NULL};
  for (int i = 0; i < 3 && !nvcc_path[0]; i++) {
    if (!cands[i]) continue;
    snprintf(nvcc_path, sizeof(nvcc_path), "%s/bin/nvcc", cands[i]);
    if (access(nvcc_path, X_OK) != 0) nvcc_path[0] = 0;
  }
  double nvcc_c = 0;
  if (!nvcc_path[0]) {
    printf("  nvcc: not found (row skipped)\n");
  } else {
    double *nt = kiln_calloc((size_t)nvcc_reps, sizeof(double));
    const char *argv_n[] = {nvcc_path, "-cubin", "-arch=sm_90", "-o", cubin, cu, NULL};
    bool ok = true;
    for (int r = -1; r < nvcc_reps && ok; r++) {
      char *outp = NULL;
      int code = 0;
      double a = kiln_clock_ms();
      kiln_status e = kiln_nvptx_run_tool(argv_n, &outp, &code);
      double b = kiln_clock_ms();
      if (e || code != 0) {
        printf("  nvcc failed (%d): %s\n", code, e ? kiln_status_message(e) : (outp ? outp : ""));
        kiln_status_free(e);
        ok = false;
      } else if (r >= 0) {
        nt[r] = b - a;
      }
      kiln_free(outp);
    }
    if (ok) {
      nvcc_c = median(nt, nvcc_reps);
      printf("  nvcc -cubin -arch=sm_90 (hand-written CUDA kernel): %.1f ms\n", nvcc_c);
    }
    kiln_free(nt);
  }
  if (kiln_c > 0 && nvcc_c > 0)
    printf("  kiln is %.1fx faster than nvcc (goal >= 25x on an idle machine)\n", nvcc_c / kiln_c);

  kiln_free(kt);
  kiln_free(in);
  kiln_free(out);
  kiln_host_pool_destroy(pool);
  kiln_host_pool_destroy(one);
  kiln_host_jit_destroy(jit);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return 0;
}
