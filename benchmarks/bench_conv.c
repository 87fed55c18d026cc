/* Convolutions on the host, shape by shape, all columns measured in the same run:
 *
 *   im2col     the convolution as an HLO module compiled by kiln: conv_gemm_rewriter makes
 *              it an im2col loop kernel + a gemm thunk (OpenBLAS), run through the runtime;
 *   elemental  the same module with KILN_GEMM_LIBRARY=none: one elemental convolution
 *              kernel (the old path);
 *   sgemm      OpenBLAS's cblas_sgemm called directly on the equivalent gemm shape
 *              (m = batch x output pixels, n = output features per group, k = window x
 *              input features per group; one call per feature group), i.e. the gemm alone,
 *              without the im2col copy.
 *
 * GFLOP/s = 2 * m * n * k * groups / time; times are the best of interleaved rounds. Ratios:
 * im2col / elemental (the speed-up) and im2col / sgemm (what the im2col copy and the
 * layout transposes cost on top of the gemm).
 *
 *   bench_conv [--reps N] [--only SUBSTRING] */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "runtime/host/host_device.h"
#include "tools/common/bench_module.h"

/* NHWC input, HWIO kernel, one or two spatial dims (h = 1 for 1-D). */
typedef struct conv_shape {
  const char *name;
  int64_t n, h, w, c, kh, kw, co, stride, pad, groups;
} conv_shape_t;

static const conv_shape_t kShapes[] = {
    {"resnet 3x3 56x56x64->64", 1, 56, 56, 64, 3, 3, 64, 1, 1, 1},
    {"resnet 3x3/2 56x56x128->128", 1, 56, 56, 128, 3, 3, 128, 2, 1, 1},
    {"resnet 1x1 28x28x256->512", 1, 28, 28, 256, 1, 1, 512, 1, 0, 1},
    {"resnet 7x7/2 stem 224x224x3->64", 1, 224, 224, 3, 7, 7, 64, 2, 3, 1},
    {"depthwise 3x3 56x56x256 (corpus)", 1, 56, 56, 256, 3, 3, 256, 1, 1, 256},
    {"grouped 3x3 28x28x128 g=8", 4, 28, 28, 128, 3, 3, 128, 1, 1, 8},
    {"1-D k=5 1024x256->256", 8, 1, 1024, 256, 1, 5, 256, 1, 2, 1},
};

static int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

static void gemm_shape(const conv_shape_t *s, int64_t *m, int64_t *n, int64_t *k) {
  int64_t ph = s->kh > 1 ? s->pad : 0;
  *m = s->n * out_size(s->h, s->kh, s->kh > 1 ? s->stride : 1, ph) *
       out_size(s->w, s->kw, s->stride, s->pad);
  *n = s->co / s->groups;
  *k = s->kh * s->kw * s->c / s->groups;
}

static char *conv_module(const conv_shape_t *s) {
  int64_t sh = s->kh > 1 ? s->stride : 1, ph = s->kh > 1 ? s->pad : 0;
  int64_t oh = out_size(s->h, s->kh, sh, ph), ow = out_size(s->w, s->kw, s->stride, s->pad);
  char *text = kiln_malloc(1024);
  snprintf(text, 1024,
           "HloModule conv\nENTRY e {\n  x = f32[%lld,%lld,%lld,%lld] parameter(0)\n"
           "  w = f32[%lld,%lld,%lld,%lld] parameter(1)\n"
           "  ROOT c = f32[%lld,%lld,%lld,%lld] convolution(x, w), window={size=%lldx%lld "
           "stride=%lldx%lld "
           "pad=%lld_%lldx%lld_%lld}, dim_labels=b01f_01io->b01f, feature_group_count=%lld\n}\n",
           (long long)s->n, (long long)s->h, (long long)s->w, (long long)s->c, (long long)s->kh,
           (long long)s->kw, (long long)(s->c / s->groups), (long long)s->co, (long long)s->n,
           (long long)oh, (long long)ow, (long long)s->co, (long long)s->kh, (long long)s->kw,
           (long long)sh, (long long)s->stride, (long long)ph, (long long)ph, (long long)s->pad,
           (long long)s->pad, (long long)s->groups);
  return text;
}

static void fill(float *f, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) f[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
}

/* Compiles `s` (with no gemm library when `elemental`), loads it and fills its inputs. */
static kiln_status prepare(kiln_device_t *dev, const conv_shape_t *s, bool elemental,
                           kiln_bench_module_t *out) {
  char *text = conv_module(s);
  uint64_t sizes[2] = {(uint64_t)(s->n * s->h * s->w * s->c) * 4,
                       (uint64_t)(s->kh * s->kw * (s->c / s->groups) * s->co) * 4};
  kiln_status st = kiln_bench_module_load(dev, text, elemental, 2, sizes, out);
  kiln_free(text);
  KILN_RETURN_IF_ERROR_PLAIN(st);
  for (int i = 0; i < 2; i++) fill((float *)(uintptr_t)out->params[i], out->sizes[i] / 4);
  return NULL;
}

/* The equivalent gemms (one per group) on OpenBLAS directly: A [m, k] per group, B [k, n]. */
static double sgemm_ms(kiln_bench_sgemm_fn f, const conv_shape_t *s, float *a, float *b, float *c) {
  int64_t m, n, k;
  gemm_shape(s, &m, &n, &k);
  double t0 = kiln_clock_ms();
  for (int64_t g = 0; g < s->groups; g++)
    f(101, 111, 111, (int)m, (int)n, (int)k, 1.0f, a + g * m * k, (int)k, b + g * k * n, (int)n,
      0.0f, c + g * m * n, (int)n);
  return kiln_clock_ms() - t0;
}

int main(int argc, char **argv) {
  int reps = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: bench_conv [--reps N] [--only SUBSTRING]\n");
      return 2;
    }
  }
  kiln_device_t *dev = NULL;
  kiln_status st = kiln_host_device_create(0, &dev);
  if (st) return (int)kiln_status_report(st, "host device");
  const char *tried = NULL;
  const char *lib = kiln_host_blas_library(&tried);
  void *h = NULL;
  kiln_bench_sgemm_fn sgemm = kiln_bench_openblas_sgemm(dev, &h);
  printf("host device: %s; kiln's gemm library: %s%s%s; direct sgemm: %s\n\n", dev->name,
         lib ? lib : "none (C kernel: ", lib ? "" : tried, lib ? "" : ")",
         sgemm ? "libopenblas.so.0" : "OpenBLAS not found, column skipped");
  printf("%-34s %7s | %8s %9s %8s | %8s %8s\n", "convolution (NHWC, HWIO)", "GFLOP", "im2col",
         "elemental", "sgemm", "im2c/el", "im2c/sg");
  double sum_log = 0;
  int nlog = 0;
  for (size_t si = 0; si < sizeof kShapes / sizeof kShapes[0] && !st; si++) {
    const conv_shape_t *s = &kShapes[si];
    if (only && !strstr(s->name, only)) continue;
    int64_t m, n, k;
    gemm_shape(s, &m, &n, &k);
    double fl = 2.0 * (double)m * (double)n * (double)k * (double)s->groups;
    kiln_bench_module_t ki, ke;
    memset(&ke, 0, sizeof ke);
    st = prepare(dev, s, false, &ki);
    if (!st) st = prepare(dev, s, true, &ke);
    if (st) break;
    if (ki.gemms != 1 || ke.gemms != 0)
      printf("  (note: %s: gemm thunks im2col %d, elemental %d)\n", s->name, ki.gemms, ke.gemms);
    float *a = NULL, *b = NULL, *c = NULL;
    if (sgemm) {
      a = kiln_malloc((size_t)(m * k * s->groups) * 4);
      b = kiln_malloc((size_t)(k * n * s->groups) * 4);
      c = kiln_malloc((size_t)(m * n * s->groups) * 4);
      fill(a, (uint64_t)(m * k * s->groups));
      fill(b, (uint64_t)(k * n * s->groups));
      sgemm_ms(sgemm, s, a, b, c);
    }
    double ti = 1e30, te = 1e30, td = 1e30, ms = 0;
    if ((st = kiln_bench_module_run(&ki, &ms)) || (st = kiln_bench_module_run(&ke, &ms))) break;
    int rounds = reps > 0 ? reps : 5;
    for (int r = 0; r < rounds && !st; r++) {
      if (!(st = kiln_bench_module_run(&ki, &ms))) ti = fmin(ti, ms);
      if (!st && !(st = kiln_bench_module_run(&ke, &ms))) te = fmin(te, ms);
      if (sgemm) td = fmin(td, sgemm_ms(sgemm, s, a, b, c));
    }
    if (st) break;
    double gi = fl / ti / 1e6, ge = fl / te / 1e6, gd = sgemm ? fl / td / 1e6 : 0;
    char cd[16] = "-", rd[16] = "-";
    if (sgemm) {
      snprintf(cd, sizeof cd, "%.1f", gd);
      snprintf(rd, sizeof rd, "%.2fx", gi / gd);
    }
    printf("%-34s %7.3f | %8.1f %9.2f %8s | %7.1fx %8s\n", s->name, fl / 1e9, gi, ge, cd, gi / ge,
           rd);
    fflush(stdout);
    sum_log += log(gi / ge);
    nlog++;
    kiln_bench_module_release(dev, &ki);
    kiln_bench_module_release(dev, &ke);
    kiln_free(a);
    kiln_free(b);
    kiln_free(c);
  }
  if (st) {
    kiln_status_report(st, "bench_conv");
    kiln_device_destroy(dev);
    return 1;
  }
  if (nlog)
    printf("\nim2col / elemental: geometric mean %.1fx over %d shapes\n", exp(sum_log / nlog),
           nlog);
  kiln_device_destroy(dev);
  if (h) dlclose(h);
  return 0;
}
