/* Hero kernels on a GPU: bandwidth of kiln's row reduction (f32[4096,1024] -> [4096]),
 * column reduction (f32[1024,4096] -> [4096]) and transpose (f32[4096,4096]), each also at
 * 16x the bytes, and the packed bf16 transpose (bf16[4096,4096], no goal), as a fraction of a
 * device-to-device memcpy measured in the same run (issue goals: >= 0.85 for the reductions, >= 0.8
 * for the transpose).
 *
 * Every kernel is compiled to a cubin for the device's architecture (sm_90 without one),
 * loaded, checked against a host computation of the same result, then timed: --launches
 * back-to-back launches on one stream between two synchronizations, repeated --reps times
 * (median and best); the memcpy of the same bytes is timed the same way, alternating with
 * the kernel. Bandwidth counts the bytes read plus the bytes written once (a memcpy of n
 * bytes moves 2n).
 *
 * Without a CUDA driver or GPU the kernels are still compiled (cubin sizes and compile times
 * are printed), then "SKIP: <reason>" and exit 0 (exit 1 with KILN_REQUIRE_GPU=1).
 *
 * Usage: bench_gpu_heroes [--reps 7] [--launches 50] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/alloc.h"
#include "base/status.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/device.h"
#include "tests/skip_util.h"
#include "tools/common/hlo_file.h"

typedef enum { ROW, COL, TR, TR16 } kind_t; /* TR16: bf16 transpose (the packed variant) */

#define MAX_CHAIN 4

typedef struct bench_case {
  kind_t kind;
  int64_t rows, cols; /* of the input */
  char label[64];
  kiln_hlo_module_t *mod;
  kiln_codegen_kernel_t k;
  int nchain;                            /* launches (a split reduction: init + atomics) */
  kiln_nvptx_result_t bin[MAX_CHAIN];    /* per launch */
  double compile_ms;
  kiln_status status; /* compile error, reported and skipped */
} bench_case_t;

static int64_t in_elems(const bench_case_t *c) { return c->rows * c->cols; }
static int64_t out_elems(const bench_case_t *c) {
  return c->kind == ROW ? c->rows : c->kind == COL ? c->cols : c->rows * c->cols;
}
static size_t elem_bytes(const bench_case_t *c) { return c->kind == TR16 ? 2 : 4; }

static char *case_hlo(const bench_case_t *c) {
  char *t = kiln_malloc(512);
  long long r = (long long)c->rows, n = (long long)c->cols;
  if (c->kind == TR || c->kind == TR16) {
    const char *ty = c->kind == TR ? "f32" : "bf16";
    snprintf(t, 512, "fusion {\n p = %s[%lld,%lld] parameter(0)\n"
                     " ROOT t = %s[%lld,%lld] transpose(p), dimensions={1,0}\n}\n", ty, r, n, ty, n, r);
  } else {
    snprintf(t, 512,
             "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
             "fusion {\n p = f32[%lld,%lld] parameter(0)\n c = f32[] constant(0)\n"
             " ROOT r = f32[%lld] reduce(p, c), dimensions={%d}, to_apply=add\n}\n",
             r, n, c->kind == ROW ? r : n, c->kind == ROW ? 1 : 0);
  }
  return t;
}

static kiln_status case_compile(bench_case_t *c, const char *arch) {
  char *text = case_hlo(c);
  double t0 = kiln_clock_ms();
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &c->mod);
  kiln_free(text);
  kiln_codegen_compile_options_t o = {0};
  char name[32];
  snprintf(name, sizeof(name), "hero_%d_%lld", (int)c->kind, (long long)in_elems(c));
  o.kernel_name = name;
  if (!s) s = kiln_codegen_kernel_emit(c->mod->entry, &o, &c->k);
  kiln_nvptx_options_t no = {0};
  char resolved[16];
  bool ptx_only = false;
  if (!s) s = kiln_nvptx_arch_resolve(arch, resolved, sizeof(resolved), &ptx_only);
  no.arch = resolved;
  if (ptx_only) no.cubin_via = KILN_CUBIN_VIA_SKIP; /* the driver compiles the PTX */
  for (const kiln_codegen_kernel_t *k = s ? NULL : &c->k; k && !s; k = k->next) {
    if (c->nchain == MAX_CHAIN) {
      s = KILN_ERR_UNIMPLEMENTED("%s: more than %d launches", c->label, MAX_CHAIN);
      break;
    }
    kiln_nvptx_result_t *b = &c->bin[c->nchain++];
    s = kiln_codegen_kernel_compile_nvptx(k, &no, b);
    if (!s && !b->cubin && !b->ptx) s = KILN_ERR_INTERNAL("%s: no cubin or PTX", c->label);
  }
  c->compile_ms = kiln_clock_ms() - t0;
  return s;
}

/* The expected output at i, computed on the host in double. */
static double expected(const bench_case_t *c, const float *in, int64_t i) {
  double acc = 0;
  if (c->kind == ROW)
    for (int64_t j = 0; j < c->cols; j++) acc += in[i * c->cols + j];
  else if (c->kind == COL)
    for (int64_t j = 0; j < c->rows; j++) acc += in[j * c->cols + i];
  else
    acc = in[(i % c->rows) * c->cols + i / c->rows];
  return acc;
}

typedef struct timing {
  double med_ms, min_ms;
} timing_t;

/* Runs `launches` launches of `kern` (or memcpys when kern is NULL) per sample. */
/* Launches the case's kernels in order. */
static kiln_status launch_chain(kiln_stream_t *st, int n, const kiln_kernel_t *const *kern,
                                const kiln_launch_dims_t *d, const uint64_t *args) {
  for (int i = 0; i < n; i++) KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_launch(st, kern[i], &d[i], args, 2));
  return NULL;
}

static kiln_status time_pair(kiln_stream_t *st, int n, const kiln_kernel_t *const *kern,
                             const kiln_launch_dims_t *d, const uint64_t *args, kiln_devptr_t dst,
                             kiln_devptr_t src, size_t copy_bytes, int reps, int launches, timing_t out[2]) {
  double *t[2] = {kiln_calloc((size_t)reps, sizeof(double)), kiln_calloc((size_t)reps, sizeof(double))};
  kiln_status s = NULL;
  for (int r = -1; r < reps && !s; r++)
    for (int j = 0; j < 2 && !s; j++) {
      int w = (r + j + 2) % 2;
      s = kiln_stream_synchronize(st);
      double t0 = kiln_clock_ms();
      for (int l = 0; l < launches && !s; l++)
        s = w == 0 ? launch_chain(st, n, kern, d, args) : kiln_stream_memcpy_d2d(st, dst, src, copy_bytes);
      if (!s) s = kiln_stream_synchronize(st);
      if (r >= 0) t[w][r] = (kiln_clock_ms() - t0) / launches;
    }
  for (int k = 0; k < 2; k++) {
    qsort(t[k], (size_t)reps, sizeof(double), kiln_clock_cmp_double);
    out[k].med_ms = t[k][reps / 2];
    out[k].min_ms = t[k][0];
    kiln_free(t[k]);
  }
  return s;
}

static kiln_status case_run(bench_case_t *c, kiln_device_t *dev, kiln_stream_t *st, int reps, int launches) {
  size_t ib = (size_t)in_elems(c) * elem_bytes(c), ob = (size_t)out_elems(c) * elem_bytes(c);
  size_t copy = ib > ob ? ib : ob;
  float *in = kiln_malloc((size_t)in_elems(c) * 4), *out = kiln_malloc(ob);
  uint16_t *in16 = c->kind == TR16 ? kiln_malloc(ib) : NULL;
  uint64_t seed = 12345;
  for (int64_t i = 0; i < in_elems(c); i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = (float)((double)(seed >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
    uint32_t bits;
    memcpy(&bits, &in[i], sizeof(bits));
    if (in16) in16[i] = (uint16_t)(bits >> 16); /* the bf16 bits of a finite value */
  }
  kiln_devptr_t din = 0, dout = 0, dcopy = 0;
  kiln_device_module_t *mod[MAX_CHAIN] = {NULL};
  const kiln_kernel_t *kern[MAX_CHAIN] = {NULL};
  kiln_launch_dims_t d[MAX_CHAIN];
  memset(d, 0, sizeof(d));
  kiln_status s = kiln_device_mem_alloc(dev, ib, &din);
  if (!s) s = kiln_device_mem_alloc(dev, ob, &dout);
  if (!s) s = kiln_device_mem_alloc(dev, copy, &dcopy);
  if (!s) s = kiln_stream_memcpy_h2d(st, din, in16 ? (const void *)in16 : (const void *)in, ib);
  const kiln_codegen_kernel_t *k = &c->k;
  for (int i = 0; i < c->nchain && !s; i++, k = k->next) {
    const kiln_nvptx_result_t *b = &c->bin[i];
    kiln_module_image_t img = {0};
    img.data = b->cubin ? (const void *)b->cubin : (const void *)b->ptx;
    img.size = b->cubin ? b->cubin_size : strlen(b->ptx) + 1;
    s = kiln_device_module_load(dev, &img, &mod[i]);
    const kiln_kir_func_t *kf = kiln_kir_module_kernel(k->kir);
    if (!s && !kf) s = KILN_ERR_INTERNAL("%s: no kernel function", c->label);
    if (!s) s = kiln_device_module_get_kernel(mod[i], kf->name, &kern[i]);
    for (int a = 0; a < 3 && !s; a++) {
      d[i].grid[a] = (uint32_t)(kf->grid[a] > 0 ? kf->grid[a] : 1);
      d[i].block[a] = (uint32_t)(kf->block[a] > 0 ? kf->block[a] : 1);
    }
  }
  uint64_t args[2] = {din, dout};
  if (!s) s = launch_chain(st, c->nchain, kern, d, args);
  if (!s) s = kiln_stream_memcpy_d2h(st, out, dout, ob);
  if (!s) s = kiln_stream_synchronize(st);
  int64_t bad = 0;
  for (int64_t i = 0; i < out_elems(c) && !s && in16; i++)
    bad += ((const uint16_t *)out)[i] != in16[(i % c->rows) * c->cols + i / c->rows];
  for (int64_t i = 0; i < out_elems(c) && !s && !in16; i++) {
    double want = expected(c, in, i);
    double tol = c->kind == TR ? 0 : 1e-4 * (double)(c->kind == ROW ? c->cols : c->rows);
    if (fabs((double)out[i] - want) > tol) bad++;
  }
  if (!s && bad) s = kiln_status_make(KILN_INTERNAL, "%s: %lld wrong output elements", c->label, (long long)bad);
  timing_t tm[2];
  if (!s) s = time_pair(st, c->nchain, kern, d, args, dcopy, din, copy, reps, launches, tm);
  if (!s) {
    double kb = (double)(ib + ob), mb = 2.0 * (double)copy;
    double kbw = kb / (tm[0].med_ms * 1e6), mbw = mb / (tm[1].med_ms * 1e6);
    double kbw_best = kb / (tm[0].min_ms * 1e6), mbw_best = mb / (tm[1].min_ms * 1e6);
    printf("%-42s %d launch%s, grid=%ux%u block=%ux%u  kernel %8.4f ms %7.1f GB/s  memcpy %8.4f ms "
           "%7.1f GB/s  fraction %.2f (best %.2f)\n",
           c->label, c->nchain, c->nchain > 1 ? "es" : "", d[c->nchain - 1].grid[0], d[c->nchain - 1].grid[1],
           d[c->nchain - 1].block[0], d[c->nchain - 1].block[1], tm[0].med_ms, kbw, tm[1].med_ms, mbw, kbw / mbw,
           kbw_best / mbw_best);
  }
  for (int i = 0; i < MAX_CHAIN; i++)
    if (mod[i]) kiln_device_module_unload(mod[i]);
  if (din) kiln_device_mem_free(dev, din);
  if (dout) kiln_device_mem_free(dev, dout);
  if (dcopy) kiln_device_mem_free(dev, dcopy);
  kiln_free(in);
  kiln_free(in16);
  kiln_free(out);
  return s;
}

int main(int argc, char **argv) {
  int reps = 7, launches = 50;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--launches")) launches = atoi(argv[++i]);
  }
  if (reps < 1) reps = 1;
  if (launches < 1) launches = 1;
  kiln_device_t *dev = NULL;
  kiln_status ds = kiln_device_create("cuda", &dev);
  char arch[16] = "sm_90";
  if (!ds) kiln_cuda_device_arch(dev, arch, sizeof(arch));
  bench_case_t cases[] = {
      {.kind = ROW, .rows = 4096, .cols = 1024, .label = "row reduce f32[4096,1024] -> [4096]"},
      {.kind = ROW, .rows = 65536, .cols = 1024, .label = "row reduce f32[65536,1024] -> [65536]"},
      {.kind = COL, .rows = 1024, .cols = 4096, .label = "column reduce f32[1024,4096] -> [4096]"},
      {.kind = COL, .rows = 16384, .cols = 4096, .label = "column reduce f32[16384,4096] -> [4096]"},
      {.kind = TR, .rows = 4096, .cols = 4096, .label = "transpose f32[4096,4096]"},
      {.kind = TR, .rows = 16384, .cols = 4096, .label = "transpose f32[16384,4096]"},
      {.kind = TR16, .rows = 4096, .cols = 4096, .label = "transpose bf16[4096,4096] (packed)"},
  };
  int n = (int)(sizeof(cases) / sizeof(cases[0]));
  int failures = 0;
  printf("compile for %s:\n", arch);
  for (int i = 0; i < n; i++) {
    bench_case_t *c = &cases[i];
    c->status = case_compile(c, arch);
    if (c->status) {
      printf("  %-42s FAILED: %s\n", c->label, kiln_status_message(c->status));
      failures++;
    } else {
      printf("  %-42s %d kernel%s (%s), %.1f ms\n", c->label, c->nchain, c->nchain > 1 ? "s" : "",
             c->bin[0].cubin ? "cubin" : "PTX", c->compile_ms);
    }
  }
  if (ds) {
    /* Under KILN_REQUIRE_GPU=1 a GPU that cannot be used is a failure, not a skip. */
    if (kiln_gpu_unavailable_exit(kiln_status_message(ds)) != KILN_TEST_SKIPPED) failures++;
    kiln_status_free(ds);
  } else {
    kiln_stream_t *st = NULL;
    kiln_status s = kiln_stream_create(dev, &st);
    printf("timing on %s: %d launches per sample, medians of %d samples (goals: reductions >= 0.85, "
           "transpose >= 0.8 of memcpy)\n", dev->name, launches, reps);
    for (int i = 0; i < n && !s; i++) {
      if (cases[i].status) continue;
      kiln_status r = case_run(&cases[i], dev, st, reps, launches);
      if (r) {
        printf("  %-42s FAILED: %s\n", cases[i].label, kiln_status_message(r));
        kiln_status_free(r);
        failures++;
      }
    }
    if (s) {
      printf("stream: %s\n", kiln_status_message(s));
      kiln_status_free(s);
      failures++;
    }
    if (st) kiln_stream_destroy(st);
    kiln_device_destroy(dev);
  }
  for (int i = 0; i < n; i++) {
    kiln_status_free(cases[i].status);
    for (int j = 0; j < cases[i].nchain; j++) kiln_nvptx_result_free(&cases[i].bin[j]);
    if (cases[i].k.kir) kiln_codegen_kernel_free(&cases[i].k);
    if (cases[i].mod) kiln_hlo_module_destroy(cases[i].mod);
  }
  return failures ? 1 : 0;
}
