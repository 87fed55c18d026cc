/* Dots on the host, shape by shape, all columns measured in the same run:
 *
 *   kiln f32   the dot as an HLO module compiled by kiln (it becomes a gemm thunk) and run
 *              through the runtime (kiln_executable_run: binds the parameters, runs the
 *              thunk on the host stream, waits), its output in a donated parameter buffer
 *              (input_output_alias), so each run reuses it;
 *   f32 new    the same without donation: each run allocates its output (fresh pages: the
 *              first touch inside the gemm costs up to 3x on large outputs);
 *   sgemm      OpenBLAS's cblas_sgemm called directly on the same shapes and transposes
 *              (one call per batch on the library's own threads, set to the host pool's
 *              size; kiln's gemms run it on one thread per tile and restore that count);
 *   kiln bf16  the same dot in bf16 (bf16 x bf16 -> bf16, f32 sums);
 *   bf16 fma   the same bf16 module with bf16 gemms on the packed-panel kernel's f32 FMAs
 *              (kiln_host_gemm_half_set_bf16_dot(false)), where the CPU has AVX512_BF16 and
 *              the default is its vdpbf16ps kernel ('-' elsewhere: both are the same);
 *   bf16 cvt   the same bf16 module with the packed-panel kernel limited to 128 rows (as it was
 *              before it took blocks of rows): larger gemms convert whole panels to f32 for
 *              OpenBLAS;
 *   elemental  the dot compiled as a kernel (KILN_GEMM_LIBRARY=none, read by the pass
 *              options when the pipeline runs), in the row's own type — the old path.
 *
 * Ratios: kiln f32 / sgemm (goal >= 0.9x; the floor for host f32 is 0.8x),
 * kiln / elemental (the speedup over per-element kernels), and bf16 / f32 FLOP rate (goal
 * >= 0.5x). Times are the best of interleaved rounds (the least disturbed by other load; the
 * three bf16 columns take turns running first, as the run after another of the same module
 * finds the operands in cache);
 * GFLOP/s = 2 * batch * m * n * k / time.
 *
 * Shapes: a transformer layer at d_model 256 and 1024 (1024 tokens = 8 x 128; QKV, attention
 * scores, attention x V, MLP up and down, the 32,000-word vocabulary projection), the
 * corpus's dots (mha_block_1x12x128x64_bf16, dlrm, dot_bf16, mnist, hloenv) and the llama3.1
 * benchmark modules' per-device dot shapes — by default with their 16,384 (70b) / 8,192
 * (8b) token rows cut to a few, which keeps the default run under a minute; --full runs
 * them whole (hours on two cores) and the elemental column on every shape.
 *
 * Epilogues (a second table, issue 21's gemm epilogue fusion): dense layers of the same
 * shapes as `dot + broadcast(bias)` then ReLU (maximum with 0) or JAX's tanh GELU, f32 and
 * bf16, compiled twice in the same run: fused (one gemm thunk applying bias and activation
 * to each cache-hot panel) and unfused (KILN_DISABLE_PASSES=gemm_epilogue_fusion: the gemm
 * thunk, then a loop kernel re-reading the whole result); the ratio is unfused / fused time.
 *
 * Integer dots (a third table, issue 21): the same shapes as s8 x s8 -> s32 and s32 x s32 -> s32
 * through kiln's integer gemm (runtime/host/host_gemm_int.c), against the elemental kernel of
 * the same type and the f32 sgemm rate on the same shape.
 *
 *   bench_dots [--full] [--reps N] [--only SUBSTRING] [--no-epilogues] [--no-ints]
 *              [--ints-only] */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "base/str.h"
#include "runtime/host/host_device.h"
#include "tools/common/bench_module.h"

typedef struct shape {
  const char *name;
  const char *type; /* the dot's type where it comes from (the elemental column's) */
  int64_t batch, m, n, k;
  bool ta, tb; /* lhs stored k x m; rhs stored n x k */
  bool full;   /* only with --full */
} shape_t;

static const shape_t kShapes[] = {
    /* transformer layer, d_model 256, 4 heads x 64, MLP 1024, 1024 tokens */
    {"d256 QKV 1024x256->768", "f32", 1, 1024, 768, 256, false, false, false},
    {"d256 scores 32x128x128 (k=64)", "f32", 32, 128, 128, 64, false, true, false},
    {"d256 attn x V 32x128x64 (k=128)", "f32", 32, 128, 64, 128, false, false, false},
    {"d256 MLP up 1024x256->1024", "f32", 1, 1024, 1024, 256, false, false, false},
    {"d256 MLP down 1024x1024->256", "f32", 1, 1024, 256, 1024, false, false, false},
    {"d256 vocab 1024x256->32000", "f32", 1, 1024, 32000, 256, false, false, false},
    {"d256 vocab grad W 256x1024^T->32000", "f32", 1, 256, 32000, 1024, true, false, true},
    /* transformer layer, d_model 1024, 16 heads x 64, MLP 4096 */
    {"d1024 QKV 1024x1024->3072", "f32", 1, 1024, 3072, 1024, false, false, false},
    {"d1024 scores 128x128x128 (k=64)", "f32", 128, 128, 128, 64, false, true, false},
    {"d1024 attn x V 128x128x64 (k=128)", "f32", 128, 128, 64, 128, false, false, false},
    {"d1024 MLP up 1024x1024->4096", "f32", 1, 1024, 4096, 1024, false, false, false},
    {"d1024 MLP down 1024x4096->1024", "f32", 1, 1024, 1024, 4096, false, false, false},
    {"d1024 vocab 1024x1024->32000", "f32", 1, 1024, 32000, 1024, false, false, true},
    /* the corpus */
    {"mha_block scores 12x128x128 (k=64)", "bf16", 12, 128, 128, 64, false, false, false},
    {"mha_block attn x V 12x128x64 (k=128)", "bf16", 12, 128, 64, 128, false, false, false},
    {"dot_bf16 6144x32 (k=1536, A^T B^T)", "bf16", 1, 6144, 32, 1536, true, true, false},
    {"dlrm 6272x192->192", "f32", 1, 6272, 192, 192, false, false, false},
    {"dlrm 6272x192->192 (B^T)", "f32", 1, 6272, 192, 192, false, true, false},
    {"dlrm batched 6272x6x6 (k=8)", "f32", 6272, 6, 6, 8, false, false, false},
    {"mnist 12x784->1024", "f32", 1, 12, 1024, 784, false, false, false},
    {"hloenv 1000x3072 x 1000x3072^T", "f32", 1, 1000, 1000, 3072, false, true, false},
    {"sharded_co 384x512x512 (k=64)", "f32", 384, 512, 512, 64, false, false, true},
    /* llama3.1 benchmark modules, per device; default: 32-64 of the token rows */
    {"llama70b q-proj 32(/16384)x8192->8192", "bf16", 1, 32, 8192, 8192, false, false, false},
    {"llama70b kv-proj 64(/16384)x8192->1024", "bf16", 1, 64, 1024, 8192, false, false, false},
    {"llama70b mlp-up 64(/16384)x8192->28672", "bf16", 1, 64, 28672, 8192, false, true, true},
    {"llama8b mlp-down 32(/8192)x14336->4096", "bf16", 1, 32, 4096, 14336, false, false, false},
    {"llama8b vocab 64(/8192)x4096->128256", "bf16", 1, 64, 128256, 4096, false, false, true},
    {"llama70b q-proj 16384x8192->8192", "bf16", 1, 16384, 8192, 8192, false, false, true},
    {"llama70b kv-proj 16384x8192->1024", "bf16", 1, 16384, 1024, 8192, false, false, true},
    {"llama70b mlp-up 16384x8192->28672", "bf16", 1, 16384, 28672, 8192, false, true, true},
    {"llama70b mlp-down 16384x28672->8192", "bf16", 1, 16384, 8192, 28672, false, false, true},
    {"llama70b wgrad 8192x16384^T->28672", "bf16", 1, 8192, 28672, 16384, true, false, true},
    {"llama70b vocab 16384x8192->128256", "bf16", 1, 16384, 128256, 8192, false, false, true},
    {"llama8b kv-proj 8192x4096->1024", "bf16", 1, 8192, 1024, 4096, false, false, true},
    {"llama8b mlp-down 8192x14336->4096", "bf16", 1, 8192, 4096, 14336, false, false, true},
};

/* Elemental kernels are slow: by default only where they take at most this many flops. */
static const double kElementalMaxFlops = 0.6e9;

static double flops_of(const shape_t *s) {
  return 2.0 * (double)s->batch * (double)s->m * (double)s->n * (double)s->k;
}

/* ---- a dot module through kiln ------------------------------------------------------------ */

static void dims_text(char *buf, size_t n, int64_t batch, int64_t a, int64_t b) {
  if (batch > 1)
    snprintf(buf, n, "[%lld,%lld,%lld]", (long long)batch, (long long)a, (long long)b);
  else
    snprintf(buf, n, "[%lld,%lld]", (long long)a, (long long)b);
}

/* The HLO module of shape `s` with element type `t` (the result too). With `donated`, a third
 * parameter of the result's shape is donated to the result (input_output_alias, as a
 * training step donates its state), so runs reuse one output buffer instead of allocating
 * (and page-faulting) a fresh one each time. */
static char *dot_module(const shape_t *s, const char *t, const char *ot, bool donated) {
  char lhs[96], rhs[96], out[96], batch[96] = "";
  int nb = s->batch > 1;
  dims_text(lhs, sizeof lhs, s->batch, s->ta ? s->k : s->m, s->ta ? s->m : s->k);
  dims_text(rhs, sizeof rhs, s->batch, s->tb ? s->n : s->k, s->tb ? s->k : s->n);
  dims_text(out, sizeof out, s->batch, s->m, s->n);
  if (nb) snprintf(batch, sizeof batch, "lhs_batch_dims={0}, rhs_batch_dims={0}, ");
  size_t len = 1024;
  char *text = kiln_malloc(len);
  char donor[128] = "";
  if (donated) snprintf(donor, sizeof donor, "  c = %s%s parameter(2)\n", ot, out);
  snprintf(text, len,
           "HloModule dot%s\nENTRY e {\n  a = %s%s parameter(0)\n  b = %s%s parameter(1)\n%s"
           "  ROOT d = %s%s dot(a, b), %slhs_contracting_dims={%d}, rhs_contracting_dims={%d}\n}\n",
           donated ? ", input_output_alias={ {}: (2, {}, must-alias) }" : "", t, lhs, t, rhs, donor,
           ot, out, batch, nb + (s->ta ? 0 : 1), nb + (s->tb ? 1 : 0));
  return text;
}

/* Bytes per element of HLO type `t` (f32, bf16, s8, s32). */
static size_t type_size(const char *t) {
  return !strcmp(t, "bf16") ? 2 : !strcmp(t, "s8") ? 1 : 4;
}

static void fill(void *p, uint64_t bytes, const char *t) {
  if (t[0] == 's') { /* integers: any bit pattern */
    uint8_t *u = p;
    for (uint64_t i = 0; i < bytes; i++) u[i] = (uint8_t)((i * 37) % 251);
  } else if (!strcmp(t, "bf16")) {
    uint16_t *h = p;
    for (uint64_t i = 0; i < bytes / 2; i++)
      h[i] = (uint16_t)(0x3c00 + (i * 37) % 512); /* in [2^-7, 2^-3) */
  } else {
    float *f = p;
    for (uint64_t i = 0; i < bytes / 4; i++) f[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
  }
}

/* Compiles and loads shape `s` with operands of type `t` and result of type `ot`; `elemental`
 * compiles the dot as a kernel; `donated`: see dot_module. */
static kiln_status dot_prepare_typed(kiln_device_t *dev, const shape_t *s, const char *t,
                                     const char *ot, bool elemental, bool donated,
                                     kiln_bench_module_t *out) {
  char *text = dot_module(s, t, ot, donated);
  size_t es = type_size(t), os = type_size(ot);
  uint64_t sizes[3] = {(uint64_t)(s->batch * s->m * s->k) * es,
                       (uint64_t)(s->batch * s->k * s->n) * es,
                       (uint64_t)(s->batch * s->m * s->n) * os};
  kiln_status st = kiln_bench_module_load(dev, text, elemental, donated ? 3 : 2, sizes, out);
  kiln_free(text);
  KILN_RETURN_IF_ERROR_PLAIN(st);
  for (int i = 0; i < out->num_params; i++)
    fill((void *)(uintptr_t)out->params[i], out->sizes[i], i < 2 ? t : ot);
  return NULL;
}

static kiln_status dot_prepare(kiln_device_t *dev, const shape_t *s, const char *t, bool elemental,
                               bool donated, kiln_bench_module_t *out) {
  return dot_prepare_typed(dev, s, t, t, elemental, donated, out);
}

/* ---- OpenBLAS directly ------------------------------------------------------------------- */

typedef struct direct {
  kiln_bench_sgemm_fn sgemm;
  float *a, *b, *c;
} direct_t;

static void direct_run(const direct_t *x, const shape_t *s, double *ms) {
  const int m = (int)s->m, n = (int)s->n, k = (int)s->k;
  double t0 = kiln_clock_ms();
  for (int64_t bi = 0; bi < s->batch; bi++)
    x->sgemm(101, s->ta ? 112 : 111, s->tb ? 112 : 111, m, n, k, 1.0f, x->a + bi * m * k,
             s->ta ? m : k, x->b + bi * k * n, s->tb ? k : n, 0.0f, x->c + bi * m * n, n);
  *ms = kiln_clock_ms() - t0;
}

/* ---- epilogues ---------------------------------------------------------------------------- */

static double best(double a, double b) {
  return a < b ? a : b;
}

typedef struct epi_shape {
  const char *name;
  int64_t m, n, k;
} epi_shape_t;

static const epi_shape_t kEpiShapes[] = {
    {"d256 MLP up 1024x256->1024", 1024, 1024, 256},
    {"d256 QKV 1024x256->768", 1024, 768, 256},
    {"d1024 MLP up 1024x1024->4096", 1024, 4096, 1024},
    {"dlrm dense 6272x192->192", 6272, 192, 192},
    {"mnist dense 12x784->1024", 12, 1024, 784},
};

/* dot(a, b) + broadcast(bias) then `act` ("relu" or "gelu", JAX's tanh form), type `t`, the
 * result donated into parameter 3. */
static char *epilogue_module(const epi_shape_t *s, const char *t, const char *act) {
  kiln_strbuf_t b = {0};
  long long m = s->m, n = s->n, k = s->k;
  kiln_strbuf_printf(
      &b,
      "HloModule dense, input_output_alias={ {}: (3, {}, must-alias) }\n"
      "ENTRY e {\n  a = %s[%lld,%lld] parameter(0)\n  w = %s[%lld,%lld] parameter(1)\n"
      "  v = %s[%lld] parameter(2)\n  o = %s[%lld,%lld] parameter(3)\n"
      "  d = %s[%lld,%lld] dot(a, w), lhs_contracting_dims={1}, "
      "rhs_contracting_dims={0}\n"
      "  bv = %s[%lld,%lld] broadcast(v), dimensions={1}\n"
      "  x = %s[%lld,%lld] add(d, bv)\n",
      t, m, k, t, k, n, t, n, t, m, n, t, m, n, t, m, n, t, m, n);
#define C(name, val)                                                           \
  kiln_strbuf_printf(&b,                                                       \
                     "  " name "c = %s[] constant(" val ")\n  " name           \
                     " = %s[%lld,%lld] broadcast(" name "c), dimensions={}\n", \
                     t, t, m, n)
  if (!strcmp(act, "relu")) {
    C("z", "0");
    kiln_strbuf_printf(&b, "  ROOT r = %s[%lld,%lld] maximum(x, z)\n}\n", t, m, n);
  } else {
    C("c0", "0.044715");
    C("c1", "0.7978845608");
    C("one", "1");
    C("half", "0.5");
    const char *ops[] = {
        "x2 = %s[%lld,%lld] multiply(x, x)",     "x3 = %s[%lld,%lld] multiply(x, x2)",
        "t0 = %s[%lld,%lld] multiply(c0, x3)",   "s0 = %s[%lld,%lld] add(x, t0)",
        "t1 = %s[%lld,%lld] multiply(c1, s0)",   "th = %s[%lld,%lld] tanh(t1)",
        "s1 = %s[%lld,%lld] add(one, th)",       "t2 = %s[%lld,%lld] multiply(half, s1)",
        "ROOT g = %s[%lld,%lld] multiply(x, t2)"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
      kiln_strbuf_append(&b, "  ");
      kiln_strbuf_printf(&b, ops[i], t, m, n);
      kiln_strbuf_append_char(&b, '\n');
    }
    kiln_strbuf_append(&b, "}\n");
  }
#undef C
  return kiln_strbuf_take(&b);
}

static kiln_status epilogue_prepare(kiln_device_t *dev, const epi_shape_t *s, const char *t,
                                    const char *act, bool fused, kiln_bench_module_t *out) {
  char *text = epilogue_module(s, t, act);
  size_t es = strcmp(t, "bf16") ? 4 : 2;
  uint64_t sizes[4] = {(uint64_t)(s->m * s->k) * es, (uint64_t)(s->k * s->n) * es,
                       (uint64_t)s->n * es, (uint64_t)(s->m * s->n) * es};
  if (!fused) setenv("KILN_DISABLE_PASSES", "gemm_epilogue_fusion", 1);
  kiln_status st = kiln_bench_module_load(dev, text, false, 4, sizes, out);
  if (!fused) unsetenv("KILN_DISABLE_PASSES");
  kiln_free(text);
  KILN_RETURN_IF_ERROR_PLAIN(st);
  for (int i = 0; i < out->num_params; i++)
    fill((void *)(uintptr_t)out->params[i], out->sizes[i], t);
  return NULL;
}

/* The epilogue table: fused vs unfused in interleaved rounds, best of each. */
static kiln_status run_epilogues(kiln_device_t *dev, int reps, const char *only) {
  printf("\n%-34s %-4s %-4s %7s | %9s %9s | %7s  %s\n", "dense layer (+bias, act)", "type", "act",
         "GFLOP", "fused ms", "unfused", "unf/fus", "thunks fused / unfused (gemm+kernel)");
  double sum_log = 0, worst = 1e9;
  int n = 0;
  for (size_t si = 0; si < sizeof kEpiShapes / sizeof kEpiShapes[0]; si++) {
    const epi_shape_t *s = &kEpiShapes[si];
    if (only && !strstr(s->name, only)) continue;
    static const char *const types[] = {"f32", "bf16"}, *const acts[] = {"relu", "gelu"};
    for (int ti = 0; ti < 2; ti++)
      for (int ai = 0; ai < 2; ai++) {
        kiln_bench_module_t f, u;
        memset(&f, 0, sizeof f);
        memset(&u, 0, sizeof u);
        kiln_status st = epilogue_prepare(dev, s, types[ti], acts[ai], true, &f);
        if (!st) st = epilogue_prepare(dev, s, types[ti], acts[ai], false, &u);
        double tf = 1e30, tu = 1e30, ms = 0;
        if (!st) st = kiln_bench_module_run(&f, &ms);
        if (!st) st = kiln_bench_module_run(&u, &ms);
        if (!st) st = kiln_bench_module_run(&f, &tf);
        int rounds = reps > 0 ? reps : (int)fmin(15, fmax(3, 200.0 / fmax(tf, 1e-3)));
        for (int r = 0; r < rounds && !st; r++) {
          st = kiln_bench_module_run(&f, &ms);
          tf = best(tf, ms);
          if (!st) st = kiln_bench_module_run(&u, &ms);
          tu = best(tu, ms);
        }
        if (!st) {
          double fl = 2.0 * (double)s->m * (double)s->n * (double)s->k;
          printf("%-34s %-4s %-4s %7.3f | %9.3f %9.3f | %6.2fx  %d+%d / %d+%d\n", s->name,
                 types[ti], acts[ai], fl / 1e9, tf, tu, tu / tf, f.gemms, f.kernels, u.gemms,
                 u.kernels);
          fflush(stdout);
          sum_log += log(tu / tf);
          worst = fmin(worst, tu / tf);
          n++;
        }
        kiln_bench_module_release(dev, &f);
        kiln_bench_module_release(dev, &u);
        KILN_RETURN_IF_ERROR(st, "%s %s %s", s->name, types[ti], acts[ai]);
      }
  }
  if (n)
    printf("fused epilogue speedup over gemm + loop kernel: geometric mean %.2fx, worst %.2fx\n",
           exp(sum_log / n), worst);
  return NULL;
}

/* ---- integer dots ------------------------------------------------------------------------ */

/* The integer table: the transformer and corpus shapes (those the elemental kernels finish
 * in seconds) as s8 x s8 -> s32 (quantized inference) and s32 x s32 -> s32, kiln's gemm thunk
 * against the elemental kernel of the same type and against OpenBLAS's f32 sgemm rate on the
 * same shape, interleaved in one run. GOP/s counts a multiply-add as 2, as GFLOP/s does. */
static kiln_status run_ints(kiln_device_t *dev, const direct_t *dxp, int reps, const char *only,
                            bool full) {
  printf("\n%-40s %7s | %8s %8s %8s %8s %8s | %7s %7s %7s %7s\n", "integer dot", "GOP", "kiln s8",
         "elem s8", "kiln s32", "elem s32", "sgemm", "s8/elem", "s32/elm", "s8/sg", "s32/sg");
  printf("%-40s %7s | %8s %8s %8s %8s %8s |\n", "", "", "GOP/s", "GOP/s", "GOP/s", "GOP/s",
         "GFLOP/s");
  printf("integer kernel set: %s\n", kiln_host_gemm_int_kernel());
  double log8 = 0, log32 = 0, logsg8 = 0, worst8 = 1e9, worst32 = 1e9;
  int n8 = 0, n32 = 0, nsg = 0;
  kiln_status st = NULL;
  for (size_t si = 0; si < sizeof(kShapes) / sizeof(kShapes[0]) && !st; si++) {
    const shape_t *s = &kShapes[si];
    if (s->full && !full) continue;
    if (only && !strstr(s->name, only)) continue;
    const double fl = flops_of(s);
    const bool elem = full || fl <= kElementalMaxFlops;
    kiln_bench_module_t k8, k32, e8, e32;
    memset(&e8, 0, sizeof e8);
    memset(&e32, 0, sizeof e32);
    st = dot_prepare_typed(dev, s, "s8", "s32", false, true, &k8);
    if (!st) st = dot_prepare_typed(dev, s, "s32", "s32", false, true, &k32);
    if (!st && elem) st = dot_prepare_typed(dev, s, "s8", "s32", true, false, &e8);
    if (!st && elem) st = dot_prepare_typed(dev, s, "s32", "s32", true, false, &e32);
    KILN_RETURN_IF_ERROR(st, "%s", s->name);
    if (k8.gemms != 1 || k32.gemms != 1 || (elem && (e8.gemms || e32.gemms)))
      printf("  (note: %s: gemm thunks s8 %d, s32 %d, elemental %d/%d)\n", s->name, k8.gemms,
             k32.gemms, e8.gemms, e32.gemms);
    direct_t dx = *dxp;
    if (dx.sgemm) {
      dx.a = kiln_malloc((size_t)(s->batch * s->m * s->k) * 4);
      dx.b = kiln_malloc((size_t)(s->batch * s->k * s->n) * 4);
      dx.c = kiln_malloc((size_t)(s->batch * s->m * s->n) * 4);
      fill(dx.a, (uint64_t)(s->batch * s->m * s->k) * 4, "f32");
      fill(dx.b, (uint64_t)(s->batch * s->k * s->n) * 4, "f32");
    }
    double t8 = 1e30, t32 = 1e30, td = 1e30, te8 = 1e30, te32 = 1e30, ms = 0;
    if (!st) st = kiln_bench_module_run(&k8, &ms);
    if (!st) st = kiln_bench_module_run(&k32, &ms);
    if (!st && dx.sgemm) direct_run(&dx, s, &ms);
    if (!st) st = kiln_bench_module_run(&k8, &t8);
    int rounds = reps > 0 ? reps : (int)fmin(15, fmax(2, 300.0 / fmax(t8, 1e-3)));
    for (int r = 0; r < rounds && !st; r++) {
      st = kiln_bench_module_run(&k8, &ms);
      t8 = best(t8, ms);
      if (!st) st = kiln_bench_module_run(&k32, &ms);
      t32 = best(t32, ms);
      if (dx.sgemm) {
        direct_run(&dx, s, &ms);
        td = best(td, ms);
      }
    }
    for (int r = 0; elem && r < 2 && !st; r++) {
      st = kiln_bench_module_run(&e8, &ms);
      te8 = best(te8, ms);
      if (!st) st = kiln_bench_module_run(&e32, &ms);
      te32 = best(te32, ms);
    }
    if (!st) {
      const double g8 = fl / t8 / 1e6, g32 = fl / t32 / 1e6, gd = dx.sgemm ? fl / td / 1e6 : 0;
      char ce8[16] = "-", ce32[16] = "-", cd[16] = "-", r8[16] = "-", r32[16] = "-", rs8[16] = "-",
           rs32[16] = "-";
      if (elem) {
        snprintf(ce8, sizeof ce8, "%.2f", fl / te8 / 1e6);
        snprintf(ce32, sizeof ce32, "%.2f", fl / te32 / 1e6);
        snprintf(r8, sizeof r8, "%.0fx", te8 / t8);
        snprintf(r32, sizeof r32, "%.0fx", te32 / t32);
        log8 += log(te8 / t8);
        log32 += log(te32 / t32);
        worst8 = fmin(worst8, te8 / t8);
        worst32 = fmin(worst32, te32 / t32);
        n8++, n32++;
      }
      if (dx.sgemm) {
        snprintf(cd, sizeof cd, "%.1f", gd);
        snprintf(rs8, sizeof rs8, "%.2fx", g8 / gd);
        snprintf(rs32, sizeof rs32, "%.2fx", g32 / gd);
        logsg8 += log(g8 / gd);
        nsg++;
      }
      printf("%-40s %7.3f | %8.1f %8s %8.1f %8s %8s | %7s %7s %7s %7s\n", s->name, fl / 1e9, g8,
             ce8, g32, ce32, cd, r8, r32, rs8, rs32);
      fflush(stdout);
    }
    kiln_bench_module_release(dev, &k8);
    kiln_bench_module_release(dev, &k32);
    if (elem) kiln_bench_module_release(dev, &e8);
    if (elem) kiln_bench_module_release(dev, &e32);
    kiln_free(dx.a);
    kiln_free(dx.b);
    kiln_free(dx.c);
  }
  KILN_RETURN_IF_ERROR_PLAIN(st);
  if (n8)
    printf(
        "integer gemm / elemental kernel: s8 geometric mean %.0fx (worst %.0fx), s32 %.0fx "
        "(worst %.0fx)\n",
        exp(log8 / n8), worst8, exp(log32 / n32), worst32);
  if (nsg)
    printf("kiln s8 GOP/s / OpenBLAS f32 GFLOP/s: geometric mean %.2fx\n", exp(logsg8 / nsg));
  return NULL;
}

/* ---- driver ------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  bool full = false, epilogues = true, ints = true, ints_only = false;
  int reps = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--full"))
      full = true;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--no-epilogues"))
      epilogues = false;
    else if (!strcmp(argv[i], "--no-ints"))
      ints = false;
    else if (!strcmp(argv[i], "--ints-only"))
      ints_only = true;
    else {
      fprintf(stderr,
              "usage: bench_dots [--full] [--reps N] [--only SUBSTRING] [--no-epilogues] "
              "[--no-ints] [--ints-only]\n");
      return 2;
    }
  }
  kiln_device_t *dev = NULL;
  kiln_status st = kiln_host_device_create(0, &dev);
  if (st) return (int)kiln_status_report(st, "host device");
  const char *tried = NULL;
  const char *lib = kiln_host_blas_library(&tried);
  direct_t dx = {0};
  void *h = NULL;
  dx.sgemm = kiln_bench_openblas_sgemm(dev, &h);
  printf("host device: %s; kiln's gemm library: %s%s%s\n", dev->name,
         lib ? lib : "none (C kernel: ", lib ? "" : tried, lib ? "" : ")");
  printf("direct sgemm: %s\n\n",
         dx.sgemm ? "libopenblas.so.0 cblas_sgemm" : "OpenBLAS not found: column skipped");
  if (ints_only) {
    st = run_ints(dev, &dx, reps, only, full);
    if (st) kiln_status_report(st, "bench_dots integers");
    kiln_device_destroy(dev);
    if (h) dlclose(h);
    return st ? 1 : 0;
  }
  const bool bf16_dot = kiln_host_gemm_half_set_bf16_dot(true);
  printf("%-40s %7s | %8s %8s %8s %8s %8s %8s %8s | %6s %6s %6s %7s %7s %7s\n", "shape", "GFLOP",
         "kiln f32", "f32 new", "sgemm", "kiln bf16", "bf16 fma", "bf16 cvt", "elemental", "f32/sg",
         "new/sg", "k/elem", "bf/f32", "bf/fma", "bf/cvt");
  printf("%-40s %7s | %8s %8s %8s %8s %8s %8s %8s | %6s %6s %6s %7s %7s %7s\n", "", "", "GFLOP/s",
         "GFLOP/s", "GFLOP/s", "GFLOP/s", "GFLOP/s", "GFLOP/s", "GFLOP/s", "", "", "", "", "", "");
  double sum_ratio_log = 0, sum_bf_log = 0, min_ratio = 1e9, min_bf = 1e9, sum_cvt_log = 0,
         min_cvt = 1e9, sum_fma_log = 0, min_fma = 1e9;
  int nratio = 0, nbf = 0;
  double t_start = kiln_clock_ms();
  for (size_t si = 0; si < sizeof(kShapes) / sizeof(kShapes[0]); si++) {
    const shape_t *s = &kShapes[si];
    if (s->full && !full) continue;
    if (only && !strstr(s->name, only)) continue;
    double fl = flops_of(s);
    kiln_bench_module_t kf, kn, kb, ke;
    memset(&ke, 0, sizeof ke);
    st = dot_prepare(dev, s, "f32", false, true, &kf);
    if (!st) st = dot_prepare(dev, s, "f32", false, false, &kn);
    if (!st) st = dot_prepare(dev, s, "bf16", false, true, &kb);
    bool run_elemental = full || fl <= kElementalMaxFlops;
    if (!st && run_elemental) st = dot_prepare(dev, s, s->type, true, false, &ke);
    if (st) {
      kiln_status_report(st, s->name);
      return 1;
    }
    if (kf.gemms != 1 || kn.gemms != 1 || kb.gemms != 1 || (run_elemental && ke.gemms != 0))
      printf("  (note: %s: gemm thunks f32 %d/%d, bf16 %d, elemental %d)\n", s->name, kf.gemms,
             kn.gemms, kb.gemms, ke.gemms);
    if (dx.sgemm) {
      dx.a = kiln_malloc((size_t)(s->batch * s->m * s->k) * 4);
      dx.b = kiln_malloc((size_t)(s->batch * s->k * s->n) * 4);
      dx.c = kiln_malloc((size_t)(s->batch * s->m * s->n) * 4);
      fill(dx.a, (uint64_t)(s->batch * s->m * s->k) * 4, "f32");
      fill(dx.b, (uint64_t)(s->batch * s->k * s->n) * 4, "f32");
    }
    /* A warm-up of each, then interleaved rounds: enough for ~0.3 s of kiln f32 (2..15). */
    double tf = 1e30, tn = 1e30, tb = 1e30, tc = 1e30, td = 1e30, te = 1e30, tm = 1e30, ms = 0;
    if ((st = kiln_bench_module_run(&kn, &ms))) break;
    if ((st = kiln_bench_module_run(&kf, &ms))) break;
    if ((st = kiln_bench_module_run(&kb, &ms))) break;
    if (dx.sgemm) direct_run(&dx, s, &ms);
    if ((st = kiln_bench_module_run(&kf, &tf))) break;
    int rounds = reps > 0 ? reps : (int)fmin(15, fmax(2, 300.0 / fmax(tf, 1e-3)));
    for (int r = 0; r < rounds; r++) {
      if ((st = kiln_bench_module_run(&kf, &ms))) break;
      tf = best(tf, ms);
      if (dx.sgemm) {
        direct_run(&dx, s, &ms);
        td = best(td, ms);
      }
      /* The three bf16 runs in turns first (a run right after another of the same module
       * finds its operands in cache): bf16; bf16 on the f32 FMA kernel; bf16 as before
       * blocks of rows (gemms past 128 rows converted to f32 panels). */
      for (int v = 0; v < 3 && !st; v++) {
        const int which = (v + r) % 3;
        if (which == 1 && !bf16_dot) continue;
        if (which == 1) kiln_host_gemm_half_set_bf16_dot(false);
        if (which == 2) kiln_host_gemm_half_set_max_rows(128);
        st = kiln_bench_module_run(&kb, &ms);
        kiln_host_gemm_half_set_bf16_dot(true);
        kiln_host_gemm_half_set_max_rows(0);
        if (!st) {
          double *t = which == 0 ? &tb : which == 1 ? &tm : &tc;
          *t = best(*t, ms);
        }
      }
      if (st) break;
      if ((st = kiln_bench_module_run(&kn, &ms))) break;
      tn = best(tn, ms);
    }
    if (st) break;
    if (run_elemental) {
      if ((st = kiln_bench_module_run(&ke, &te))) break;
      if (te < 500 && (st = kiln_bench_module_run(&ke, &ms)) == NULL) te = best(te, ms);
    }
    double gf = fl / tf / 1e6, gn = fl / tn / 1e6, gb = fl / tb / 1e6,
           gd = dx.sgemm ? fl / td / 1e6 : 0, ge = run_elemental ? fl / te / 1e6 : 0;
    char cd[16] = "-", ce[16] = "-", rd[16] = "-", rn[16] = "-", re[16] = "-", cm[16] = "-",
         rm[16] = "-";
    if (bf16_dot) {
      const double gm = fl / tm / 1e6;
      snprintf(cm, sizeof cm, "%.1f", gm);
      snprintf(rm, sizeof rm, "%.2fx", gb / gm);
      sum_fma_log += log(gb / gm);
      min_fma = fmin(min_fma, gb / gm);
    }
    if (dx.sgemm) {
      snprintf(cd, sizeof cd, "%.1f", gd);
      snprintf(rd, sizeof rd, "%.2fx", gf / gd);
      snprintf(rn, sizeof rn, "%.2fx", gn / gd);
      sum_ratio_log += log(gf / gd);
      min_ratio = fmin(min_ratio, gf / gd);
      nratio++;
    }
    if (run_elemental) {
      snprintf(ce, sizeof ce, "%.2f", ge);
      /* the row's own type against the elemental kernel of that type */
      snprintf(re, sizeof re, "%.0fx", (strcmp(s->type, "bf16") ? gf : gb) / ge);
    }
    sum_bf_log += log(gb / gf);
    min_bf = fmin(min_bf, gb / gf);
    nbf++;
    const double gc = fl / tc / 1e6;
    sum_cvt_log += log(gb / gc);
    min_cvt = fmin(min_cvt, gb / gc);
    printf("%-40s %7.3f | %8.1f %8.1f %8s %8.1f %8s %8.1f %8s | %6s %6s %6s %6.2fx %7s %6.2fx\n",
           s->name, fl / 1e9, gf, gn, cd, gb, cm, gc, ce, rd, rn, re, gb / gf, rm, gb / gc);
    fflush(stdout);
    kiln_bench_module_release(dev, &kf);
    kiln_bench_module_release(dev, &kn);
    kiln_bench_module_release(dev, &kb);
    if (run_elemental) kiln_bench_module_release(dev, &ke);
    kiln_free(dx.a);
    kiln_free(dx.b);
    kiln_free(dx.c);
    dx.a = dx.b = dx.c = NULL;
  }
  if (st) {
    kiln_status_report(st, "bench_dots");
    kiln_device_destroy(dev);
    return 1;
  }
  printf("\n");
  if (nratio)
    printf(
        "kiln f32 / direct sgemm: geometric mean %.2fx, worst %.2fx (goal >= 0.9x; host f32 "
        ">= 0.8x)\n",
        exp(sum_ratio_log / nratio), min_ratio);
  if (nbf)
    printf("kiln bf16 / kiln f32 FLOP rate: geometric mean %.2fx, worst %.2fx (goal >= 0.5x)\n",
           exp(sum_bf_log / nbf), min_bf);
  if (nbf && bf16_dot)
    printf(
        "kiln bf16 (vdpbf16ps) / bf16 fma (the f32 FMA kernel): geometric mean %.2fx, worst "
        "%.2fx\n",
        exp(sum_fma_log / nbf), min_fma);
  if (nbf)
    printf(
        "kiln bf16 / bf16 cvt (gemms past 128 rows converted to f32 panels, as before row "
        "blocks): geometric mean %.2fx, worst %.2fx\n",
        exp(sum_cvt_log / nbf), min_cvt);
  printf(
      "f32 new: kiln f32 with a fresh output buffer per run (not donated): allocation and "
      "page faults included\n");
  printf("elemental: the dot compiled as a kernel (KILN_GEMM_LIBRARY=none), in the row's type;%s\n",
         full ? "" : " '-' where it would take over 0.6 GFLOP (--full runs it)");
  if (epilogues && (st = run_epilogues(dev, reps, only))) {
    kiln_status_report(st, "bench_dots epilogues");
    kiln_device_destroy(dev);
    return 1;
  }
  if (ints && (st = run_ints(dev, &dx, reps, only, full))) {
    kiln_status_report(st, "bench_dots integers");
    kiln_device_destroy(dev);
    return 1;
  }
  printf("total %.1f s\n", (kiln_clock_ms() - t_start) / 1e3);
  kiln_device_destroy(dev);
  if (h) dlclose(h);
  return 0;
}
