/* Hero-emitter benchmark on the host (DESIGN.md "Host lowering"): kiln's GPU algorithms —
 * row reduction of f32[4096,1024] (shuffle tree + shared tile), column reduction of
 * f32[1024,4096] (32x32 threads through a 32x33 tile), transposes of f32[4096,4096] and
 * bf16[4096,4096] (32x33 tiles, 32x4 threads) — lowered to the host and run on the worker
 * pool, against C loops
 * compiled at run time with `gcc -O3 -march=native -ffast-math` (the reductions; the
 * vectorized practical limit) and C loops with a 32x33 tile of the element type (the
 * transposes), dlopen'ed and
 * run on the same pool with the same block split. 1 and 2 worker threads. kiln's and the C
 * loop's launches alternate one by one (and which goes first) in --reps samples of about
 * --sample-ms each ("batch": launches of each per sample); medians and minimums are over all
 * launches after a warm-up (on a shared machine the minimum is the least disturbed launch);
 * "paired" is the median over adjacent launch pairs of the C/kiln time ratio (robust to a
 * load that changes during the run); the load average is printed first. GB/s (of the median)
 * counts bytes read + written once. Each kiln result is checked against its C loop (MISMATCH
 * lines). Goals: reductions >= 1.0x, transpose >= 0.9x. Kernels are compiled as the host
 * backend compiles them (host_target: bf16 keeps the 32x33 tile); the "packed 64x64 tile"
 * row runs the GPU's packed bf16 variant on the host for comparison.
 *
 * Last, a scatter-add whose updates run in order (f32[16384,512] into [4096,512]: the split
 * serial path, a thread per column) against a C loop with the same column strips, and the
 * one-thread kernel it replaced.
 *
 * Usage: bench_heroes [--reps 15] [--sample-ms 3] [--cflags "-mno-avx512f"]
 * (--cflags is added to the C loops' gcc line; with KILN_HOST_CPU_FEATURES=-avx512f for
 * kiln's kernels it compares both on an AVX2-only target on an AVX-512 machine.) */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/reduction_emitter.h"
#include "compiler/codegen/scatter_emitter.h"
#include "compiler/codegen/transpose_emitter.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The C loops, in the host kernel ABI (args, block_begin, block_end). */
static const char kCSource[] =
    "#include <stdint.h>\n"
    "void row_reduce(void **args, int64_t b, int64_t e) {\n"
    "  const float *in = args[0]; float *out = args[1];\n"
    "  for (int64_t r = b; r < e; r++) {\n"
    "    const float *row = in + r * 1024; float s = 0.0f;\n"
    "    for (int c = 0; c < 1024; c++) s += row[c];\n"
    "    out[r] = s;\n"
    "  }\n"
    "}\n"
    "/* column reduction of [1024, 4096]: block = a strip of 32 columns */\n"
    "void col_reduce(void **args, int64_t b, int64_t e) {\n"
    "  const float *in = args[0]; float *out = args[1];\n"
    "  for (int64_t blk = b; blk < e; blk++) {\n"
    "    float acc[32] = {0};\n"
    "    for (int r = 0; r < 1024; r++) {\n"
    "      const float *p = in + (int64_t)r * 4096 + blk * 32;\n"
    "      for (int c = 0; c < 32; c++) acc[c] += p[c];\n"
    "    }\n"
    "    for (int c = 0; c < 32; c++) out[blk * 32 + c] = acc[c];\n"
    "  }\n"
    "}\n"
    "/* transpose of [4096, 4096] elements of type T through a 32x33 tile: block = one tile */\n"
    "#define TRANSPOSE(name, T) \\\n"
    "void name(void **args, int64_t b, int64_t e) { \\\n"
    "  const T *in = args[0]; T *out = args[1]; \\\n"
    "  T tile[32][33]; \\\n"
    "  for (int64_t blk = b; blk < e; blk++) { \\\n"
    "    int64_t tr = blk / 128, tc = blk % 128; \\\n"
    "    for (int i = 0; i < 32; i++) \\\n"
    "      for (int j = 0; j < 32; j++) tile[i][j] = in[(tr * 32 + i) * 4096 + tc * 32 + j]; \\\n"
    "    for (int j = 0; j < 32; j++) \\\n"
    "      for (int i = 0; i < 32; i++) out[(tc * 32 + j) * 4096 + tr * 32 + i] = tile[i][j]; \\\n"
    "  } \\\n"
    "}\n"
    "TRANSPOSE(transpose, float)\n"
    "TRANSPOSE(transpose16, uint16_t) /* bf16 bits */\n"
    "/* scatter-add of f32[16384,512] updates into f32[4096,512] at s32[16384,1] indices, in\n"
    " * update order: block = a strip of *args[4] columns, every update in turn */\n"
    "void scatter_cols(void **args, int64_t b, int64_t e) {\n"
    "  const int32_t *idx = args[1]; const float *upd = args[2]; float *out = args[3];\n"
    "  int64_t w = *(const int64_t *)args[4];\n"
    "  for (int64_t blk = b; blk < e; blk++)\n"
    "    for (int64_t j = 0; j < 16384; j++) {\n"
    "      int64_t r = idx[j];\n"
    "      if (r < 0 || r >= 4096) continue;\n"
    "      float *o = out + r * 512 + blk * w; const float *u = upd + j * 512 + blk * w;\n"
    "      for (int64_t c = 0; c < w; c++) o[c] += u[c];\n"
    "    }\n"
    "}\n";

static const char kRowHlo[] =
    "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
    "fusion {\n p = f32[4096,1024] parameter(0)\n c = f32[] constant(0)\n"
    " ROOT r = f32[4096] reduce(p, c), dimensions={1}, to_apply=add\n}\n";
static const char kColHlo[] =
    "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
    "fusion {\n p = f32[1024,4096] parameter(0)\n c = f32[] constant(0)\n"
    " ROOT r = f32[4096] reduce(p, c), dimensions={0}, to_apply=add\n}\n";
static const char kTrHlo[] =
    "fusion {\n p = f32[4096,4096] parameter(0)\n"
    " ROOT t = f32[4096,4096] transpose(p), dimensions={1,0}\n}\n";
static const char kTr16Hlo[] =
    "fusion {\n p = bf16[4096,4096] parameter(0)\n"
    " ROOT t = bf16[4096,4096] transpose(p), dimensions={1,0}\n}\n";

/* The updates run in order (a float add): the split serial path, a thread per column. */
static const char kScatterHlo[] =
    "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
    "fusion {\n o = f32[4096,512] parameter(0)\n i = s32[16384,1] parameter(1)\n"
    " u = f32[16384,512] parameter(2)\n"
    " ROOT s = f32[4096,512] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},\n"
    "   scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n";

static int g_reps = 15;
/* A sample (a batch of launches of each kernel, alternating) takes about this long. */
static double g_sample_ms = 3.0;
static const char *g_cflags = "";

/* Runs one launch of fn; returns its time in ms (*s set on error). */
static double time_launch(kiln_host_pool_t *pool, kiln_host_kernel_fn fn, void **args, int64_t blocks,
                          kiln_status *s) {
  double t0 = now_ms();
  *s = kiln_host_pool_launch(pool, fn, args, blocks, 0);
  return now_ms() - t0;
}

/* A 64-byte aligned block of n bytes (exits when out of memory). */
static void *bench_alloc(size_t n) {
  void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
  if (!p) {
    fprintf(stderr, "bench_heroes: cannot allocate %zu bytes\n", n);
    exit(1);
  }
  return p;
}

static double median_of(double *v, size_t n) {
  qsort(v, n, sizeof(double), cmp_double);
  return v[n / 2];
}

/* Times kernel a and kernel b (b may be NULL) on `pool`: g_reps samples, a sample being a
 * batch of launches of each, a's and b's launches alternating one by one (and which one goes
 * first), so both see the same background load at a fine grain; the batch size is set from
 * warm-up runs so that a sample takes about g_sample_ms. med/min: median and minimum over
 * all launches of each kernel, in ms (the minimum is the least disturbed launch on a shared
 * machine); *paired: the median over launch pairs (a's and b's launch next to each other)
 * of b's time / a's time (0 without b); *batch_out: launches of each kernel per sample.
 * Returns false if a launch failed. */
static bool time_pair(kiln_host_pool_t *pool, kiln_host_kernel_fn a, void **aa, int64_t ab,
                      kiln_host_kernel_fn b, void **ba, int64_t bb, double med[2], double min[2],
                      double *paired, int *batch_out) {
  kiln_status s = NULL;
  /* Warm-up (also sizes the batch from the faster kernel's best of three). */
  double one = 1e30;
  for (int i = 0; i < 3 && !s; i++) {
    one = fmin(one, time_launch(pool, a, aa, ab, &s));
    if (b && !s) one = fmin(one, time_launch(pool, b, ba, bb, &s));
  }
  int batch = one > 0 && one < g_sample_ms ? (int)ceil(g_sample_ms / one) : 1;
  if (batch > 1000) batch = 1000;
  size_t n = (size_t)g_reps * (size_t)batch;
  double *t[2] = {kiln_calloc(n, sizeof(double)), kiln_calloc(n, sizeof(double))};
  double *ratio = kiln_calloc(n, sizeof(double));
  for (int r = 0; r < g_reps && !s; r++)
    for (int i = 0; i < batch && !s; i++)
      for (int j = 0; j < 2 && !s; j++) {
        /* Which kernel goes first alternates: on a loaded machine the first run after a
         * pause is the one a preemption tends to hit. */
        int w = (r + i + j) % 2;
        if (w == 1 && !b) continue;
        double x = w == 0 ? time_launch(pool, a, aa, ab, &s) : time_launch(pool, b, ba, bb, &s);
        t[w][(size_t)r * (size_t)batch + (size_t)i] = x;
      }
  for (size_t i = 0; i < n; i++) ratio[i] = b && t[0][i] > 0 ? t[1][i] / t[0][i] : 0;
  *paired = median_of(ratio, n);
  kiln_free(ratio);
  for (int k = 0; k < 2; k++) {
    med[k] = median_of(t[k], n);
    min[k] = t[k][0];
    kiln_free(t[k]);
  }
  *batch_out = batch;
  if (s) {
    printf("launch failed: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return false;
  }
  return true;
}

typedef enum { ROW, COL, TR, TR16 } which_t;

static kiln_status emit(which_t w, const kiln_reduction_options_t *ro, int packed, const char *name,
                        kiln_hlo_module_t **mod, kiln_codegen_kernel_t *k) {
  const char *text = w == ROW ? kRowHlo : w == COL ? kColHlo : w == TR ? kTrHlo : kTr16Hlo;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_parse_computations(text, strlen(text), NULL, mod));
  kiln_codegen_compile_options_t o = {0};
  o.kernel_name = name;
  o.host_target = true; /* as the host backend compiles them */
  o.packed_transpose = packed;
  return w >= TR ? kiln_transpose_kernel_emit((*mod)->entry, &o, k)
                 : kiln_reduction_kernel_emit((*mod)->entry, &o, ro, k);
}

/* The scatter rows: kiln's update kernel (the split serial path; the init kernel is a copy,
 * not timed) at two block sizes (the host grid for 16 and 2 cores) and on one thread
 * (the split off, as before), against the C loop with the same column strips. Each launch
 * adds the updates again; the check starts both from the operand and wants the same bits. */
static void bench_scatter(kiln_host_jit_t *jit, kiln_host_kernel_fn cfn) {
  enum { V = 4096, D = 512, N = 16384 };
  float *operand = bench_alloc(sizeof(float) * V * D), *upd = bench_alloc(sizeof(float) * N * D);
  float *out_k = bench_alloc(sizeof(float) * V * D), *out_c = bench_alloc(sizeof(float) * V * D);
  int32_t *idx = bench_alloc(sizeof(int32_t) * N);
  uint64_t st = 777;
  for (int64_t i = 0; i < (int64_t)N * D; i++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    upd[i] = (float)((double)(st >> 40) / (double)(1 << 24)) + 0.5f;
    if (i < (int64_t)V * D) operand[i] = upd[i];
  }
  for (int j = 0; j < N; j++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    idx[j] = j % 97 == 0 ? V + 3 : (int32_t)((st >> 33) % V); /* repeats, and some out of bounds */
  }
  static const int64_t kCores[3] = {16, 2, 0};
  double bytes =
      (double)N * D * 4.0 * 3.0 + N * 4.0; /* updates read, touched rows read + written */
  for (int var = 0; var < 3; var++) {
    kiln_launch_device_t dev = {.core_count = kCores[var]};
    kiln_codegen_compile_options_t o = {
        .host_target = true, .device = &dev, .kernel_name = "bench_scatter"};
    kiln_scatter_emitter_set_split(kCores[var] > 0);
    kiln_hlo_module_t *mod = NULL;
    kiln_codegen_kernel_t k = {0};
    kiln_kir_host_kernel_t hk;
    double t0 = now_ms();
    kiln_status s = kiln_hlo_parse_computations(kScatterHlo, strlen(kScatterHlo), NULL, &mod);
    if (!s) s = kiln_scatter_kernel_emit(mod->entry, &o, &k);
    if (!s && !k.next) s = KILN_ERR_INTERNAL("no update kernel");
    if (!s) s = kiln_kir_compile_host(k.next->kir, jit, &hk);
    double compile_ms = now_ms() - t0;
    kiln_scatter_emitter_set_split(true);
    char vname[40];
    if (s)
      snprintf(vname, sizeof(vname), "%lld cores", (long long)kCores[var]);
    else if (kCores[var] > 0)
      snprintf(vname, sizeof(vname), "%lld blocks of %lld", (long long)k.next->grid.blocks_x,
               (long long)k.next->grid.threads);
    else
      snprintf(vname, sizeof(vname), "one thread (no split)");
    const char *label = "scatter-add f32[16384,512] -> [4096,512]";
    if (s) {
      printf("%-40s %-22s: %s\n", label, vname, kiln_status_message(s));
      kiln_status_free(s);
      kiln_codegen_kernel_free(&k);
      if (mod) kiln_hlo_module_destroy(mod);
      continue;
    }
    /* The kernel's inputs are the fusion's parameters in its own order, then the output. */
    void *ka[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < k.num_inputs; i++) {
      int64_t pn = k.inputs[i]->parameter_number;
      ka[i] = pn == 0 ? (void *)operand : pn == 1 ? (void *)idx : (void *)upd;
    }
    ka[k.num_inputs] = out_k;
    int64_t width = D / k.next->grid.blocks_x;
    void *ca[5] = {operand, idx, upd, out_c, &width};
    int64_t cblocks = k.next->grid.blocks_x;
    memcpy(out_k, operand, sizeof(float) * V * D);
    memcpy(out_c, operand, sizeof(float) * V * D);
    for (int nt = 1; nt <= 2; nt++) {
      kiln_host_pool_t *pool = NULL;
      if (kiln_host_pool_create(nt, &pool)) break;
      double med[2], mn[2], paired = 0;
      int batch = 1;
      bool ok =
          time_pair(pool, hk.fn, ka, hk.num_blocks, cfn, ca, cblocks, med, mn, &paired, &batch);
      if (ok && cfn && nt == 2) { /* one launch each from the operand: the same bits? */
        memcpy(out_k, operand, sizeof(float) * V * D);
        memcpy(out_c, operand, sizeof(float) * V * D);
        kiln_status ls = kiln_host_pool_launch(pool, hk.fn, ka, hk.num_blocks, 0);
        if (!ls) ls = kiln_host_pool_launch(pool, cfn, ca, cblocks, 0);
        if (ls) {
          printf("  launch failed: %s\n", kiln_status_message(ls));
          kiln_status_free(ls);
        } else if (memcmp(out_k, out_c, sizeof(float) * V * D)) {
          printf("  MISMATCH vs C loop: the scatter's bits differ\n");
        }
      }
      kiln_host_pool_destroy(pool);
      if (!ok) break;
      if (cfn)
        printf("%-40s %-22s %7d %9.3f %7.2f %5.2fx %8.3f %5.2fx %6.2fx %5d\n", label, vname, nt,
               med[0], bytes / (med[0] * 1e6), med[1] / med[0], mn[0], mn[1] / mn[0], paired,
               batch);
      else
        printf("%-40s %-22s %7d %9.3f %7.2f\n", label, vname, nt, med[0], bytes / (med[0] * 1e6));
    }
    printf("%-40s %-22s compile %.0f ms (emit %.1f, pipeline %.1f)\n", "", vname, compile_ms,
           k.next->emit_ms, k.next->pipeline_ms);
    kiln_codegen_kernel_free(&k);
    kiln_hlo_module_destroy(mod);
  }
  free(operand);
  free(upd);
  free(out_k);
  free(out_c);
  free(idx);
}

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--reps")) g_reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sample-ms")) g_sample_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cflags"))
      g_cflags = argv[++i];
  if (g_reps < 1) g_reps = 1;
  if (!(g_sample_ms > 0)) g_sample_ms = 0.001;
  /* Build the C loops. */
  char dir[] = "/tmp/kiln_bench_heroesXXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  char src[256], so[256], cmd[1024];
  snprintf(src, sizeof(src), "%s/loops.c", dir);
  snprintf(so, sizeof(so), "%s/loops.so", dir);
  FILE *fp = fopen(src, "w");
  if (!fp) return 1;
  fputs(kCSource, fp);
  fclose(fp);
  snprintf(cmd, sizeof(cmd), "gcc -O3 -march=native -ffast-math %s -shared -fPIC -o %s %s 2>&1",
           g_cflags, so, src);
  printf("C loops: gcc -O3 -march=native -ffast-math %s\n", g_cflags);
  void *dl = NULL;
  if (system(cmd) != 0) printf("(gcc failed: C rows skipped)\n");
  else if (!(dl = dlopen(so, RTLD_NOW | RTLD_LOCAL))) printf("(dlopen: %s)\n", dlerror());
  kiln_host_kernel_fn cfn[4] = {NULL, NULL, NULL, NULL};
  if (dl) {
    cfn[ROW] = (kiln_host_kernel_fn)dlsym(dl, "row_reduce");
    cfn[COL] = (kiln_host_kernel_fn)dlsym(dl, "col_reduce");
    cfn[TR] = (kiln_host_kernel_fn)dlsym(dl, "transpose");
    cfn[TR16] = (kiln_host_kernel_fn)dlsym(dl, "transpose16");
  }
  int64_t cblocks[4] = {4096, 128, 128 * 128, 128 * 128};
  int64_t in_elems[4] = {4096 * 1024, 1024 * 4096, 4096LL * 4096, 4096LL * 4096};
  int64_t out_elems[4] = {4096, 4096, 4096LL * 4096, 4096LL * 4096};
  const char *label[4] = {"row reduce f32[4096,1024] -> [4096]", "column reduce f32[1024,4096] -> [4096]",
                          "transpose f32[4096,4096]", "transpose bf16[4096,4096]"};
  kiln_host_jit_t *jit = NULL;
  kiln_status s = kiln_host_jit_create(NULL, &jit);
  if (s) {
    printf("host JIT: %s\n", kiln_status_message(s));
    return 1;
  }
  /* The machine kind the ratios belong to: kiln's host lowering differs with AVX-512F (8/16-bit
   * tiles in 32-bit slots), and the C loops are built for this CPU (-march=native). */
  printf("kiln's kernels: CPU %s, AVX-512F %s\n", kiln_host_jit_cpu(jit),
         kiln_host_feature_on(kiln_host_jit_features(jit), "avx512f") ? "yes" : "no");
  /* Buffers aligned as the host device allocates them (64 bytes, runtime/host/host_device.c;
   * buffer assignment's slices keep that alignment): a 16-byte aligned malloc block splits
   * every vector access over two cache lines, which is not what kiln's kernels see. */
  float *in = bench_alloc((size_t)(4096LL * 4096) * sizeof(float));
  float *out_k = bench_alloc((size_t)(4096LL * 4096) * sizeof(float));
  float *out_c = bench_alloc((size_t)(4096LL * 4096) * sizeof(float));
  uint64_t st = 12345;
  for (int64_t i = 0; i < 4096LL * 4096; i++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = (float)((double)(st >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
  }
  /* bf16 input: the top half of each f32 (finite values, so every bit pattern is kept). */
  uint16_t *in16 = bench_alloc((size_t)(4096LL * 4096) * sizeof(uint16_t));
  for (int64_t i = 0; i < 4096LL * 4096; i++) {
    uint32_t bits;
    memcpy(&bits, &in[i], sizeof(bits));
    in16[i] = (uint16_t)(bits >> 16);
  }
  double load[3] = {0, 0, 0};
  FILE *la = fopen("/proc/loadavg", "r");
  if (la) {
    if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    fclose(la);
  }
  printf("load average %.2f (1 min) on %ld cores; %d samples of ~%.1f ms per kernel pair and thread count; on a\n"
         "loaded machine trust the minimums and the paired ratios\n",
         load[0], sysconf(_SC_NPROCESSORS_ONLN), g_reps, g_sample_ms);
  printf("%-40s %-22s %7s %9s %7s %6s %8s %6s %7s %5s\n", "kernel", "variant", "threads", "median ms", "GB/s",
         "vs C", "min ms", "vs C", "paired", "batch");
  for (int w = ROW; w <= TR16; w++) {
    static const int kVariants[][2] = {{0, 0}, {4, 256}, {4, 128}, {4, 64}, {4, 32}, {1, 128}};
    int nvar = w == ROW ? (int)(sizeof(kVariants) / sizeof(kVariants[0])) : w == TR16 ? 2 : 1;
    for (int var = 0; var < nvar; var++) {
      kiln_reduction_options_t ro = {0};
      char vname[40] = "default";
      int packed = 0;
      if (w == TR16 && var == 1) {
        packed = 1;
        snprintf(vname, sizeof(vname), "packed 64x64 tile");
      } else if (var > 0) {
        ro.vector_size = kVariants[var][0];
        ro.max_threads = kVariants[var][1];
        snprintf(vname, sizeof(vname), "vector %d, %d threads", ro.vector_size, ro.max_threads);
      }
      char kname[32];
      snprintf(kname, sizeof(kname), "bench_%d_%d", w, var);
      kiln_hlo_module_t *mod = NULL;
      kiln_codegen_kernel_t k;
      double t0 = now_ms();
      s = emit((which_t)w, &ro, packed, kname, &mod, &k);
      kiln_kir_host_kernel_t hk;
      if (!s) s = kiln_kir_compile_host(k.kir, jit, &hk);
      double compile_ms = now_ms() - t0;
      if (s) {
        printf("%-40s %-22s: %s\n", label[w], vname, kiln_status_message(s));
        kiln_status_free(s);
        if (mod) kiln_hlo_module_destroy(mod);
        continue;
      }
      void *src_buf = w == TR16 ? (void *)in16 : (void *)in;
      void *ka[2] = {src_buf, out_k}, *ca[2] = {src_buf, out_c};
      double bytes = (double)(in_elems[w] + out_elems[w]) * (w == TR16 ? 2.0 : 4.0);
      for (int nt = 1; nt <= 2; nt++) {
        kiln_host_pool_t *pool = NULL;
        s = kiln_host_pool_create(nt, &pool);
        if (s) break;
        double med[2], mn[2];
        int batch = 1;
        double paired = 0;
        if (!time_pair(pool, hk.fn, ka, hk.num_blocks, cfn[w], ca, cblocks[w], med, mn, &paired, &batch)) {
          kiln_host_pool_destroy(pool);
          break;
        }
        double km = med[0], cm = cfn[w] ? med[1] : -1;
        if (cm > 0 && km > 0 && w == TR16) {
          if (memcmp(out_k, out_c, (size_t)out_elems[w] * sizeof(uint16_t)))
            printf("  MISMATCH vs C loop: bf16 transpose differs\n");
        } else if (cm > 0 && km > 0) {
          double maxrel = 0;
          for (int64_t i = 0; i < out_elems[w]; i++) {
            double d = fabs((double)out_k[i] - out_c[i]) / fmax(fabs((double)out_c[i]), 32.0);
            if (d > maxrel) maxrel = d;
          }
          if (maxrel > 1e-4) printf("  MISMATCH vs C loop: max rel %.3g\n", maxrel);
        }
        if (cm > 0)
          printf("%-40s %-22s %7d %9.3f %7.2f %5.2fx %8.3f %5.2fx %6.2fx %5d\n", label[w], vname, nt, km,
                 bytes / (km * 1e6), cm / km, mn[0], mn[1] / mn[0], paired, batch);
        else
          printf("%-40s %-22s %7d %9.3f %7.2f %6s %8.3f %6s %7s %5d\n", label[w], vname, nt, km, bytes / (km * 1e6), "",
                 mn[0], "", "", batch);
        if (cm > 0 && var == 0)
          printf("%-40s %-22s %7d %9.3f %7.2f %6s %8.3f\n", "", w >= TR ? "C 32x33 tile, -O3" : "C loop -O3 -ffast-math",
                 nt, cm, bytes / (cm * 1e6), "", mn[1]);
        kiln_host_pool_destroy(pool);
      }
      printf("%-40s %-22s compile %.0f ms (emit %.1f, pipeline %.1f)\n", "", vname, compile_ms, k.emit_ms,
             k.pipeline_ms);
      kiln_codegen_kernel_free(&k);
      kiln_hlo_module_destroy(mod);
    }
  }
  bench_scatter(jit, dl ? (kiln_host_kernel_fn)dlsym(dl, "scatter_cols") : NULL);
  kiln_host_jit_destroy(jit);
  free(in);
  free(in16);
  free(out_k);
  free(out_c);
  if (dl) dlclose(dl);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return 0;
}
