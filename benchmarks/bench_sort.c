/* Sort compile and run time on the host: one 65,536-element f32 row, 64 rows of 16,384, single
 * rows of 1,024 and 8,192, 4,096 rows of 32, stable single rows of 65,536 and 262,144, 256 rows
 * of 4,096 under JAX's comparator (NaN and -0 canonicalized, a total order: the host sorts
 * those rows by the key's bytes, a radix sort; the C baselines are a merge sort calling the
 * comparator per comparison, as a library sort does, and the same radix sort in C), and the
 * corpus argsort (`argsort_axis_1024x512_bf16`). The plain `<` cases (a partial order) merge-sort
 * rows of more than 16 elements, one thread per row (sort_emitter.h): 16 and 18 passes for the
 * long rows. For each: the whole compile (passes, codegen, LLVM) and the minimum and median of
 * `--reps` executes, each as wall time and as the process's CPU time (on a loaded machine the CPU
 * time is the steadier figure; a one-row sort runs on one worker). The f32 cases also time a
 * bottom-up merge sort in C on the same input, row after row on one thread (the baseline, same
 * run), and print kiln's median wall and CPU time over it. Goal (issue 20): the 65,536 row compiles
 * in <= 1 s. Usage: bench_sort [--reps 5] */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "compiler/thunks/compile.h"
#include "runtime/executable.h"
#include "runtime/host/host_device.h"
#include "tools/common/hlo_file.h"
#include "plugin/env_options.h"

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kiln_clock_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* JAX's float comparator: NaN made the canonical NaN and -0 made +0 on each side, then a
 * total-order compare (what jnp.sort and argsort send). */
static const char kJaxComparator[] =
    "  zero = f32[] constant(0)\n  nan = f32[] constant(nan)\n"
    "  ea = pred[] compare(a, zero), direction=EQ\n  za = f32[] select(ea, zero, a)\n"
    "  na = pred[] compare(a, a), direction=NE\n  ka = f32[] select(na, nan, za)\n"
    "  eb = pred[] compare(b, zero), direction=EQ\n  zb = f32[] select(eb, zero, b)\n"
    "  nb = pred[] compare(b, b), direction=NE\n  kb = f32[] select(nb, nan, zb)\n"
    "  ROOT lt = pred[] compare(ka, kb), direction=LT, type=TOTALORDER\n";

static const char *sort_text(const char *dims, int dim, bool stable, bool jax, char *buf,
                             size_t n) {
  snprintf(buf, n,
           "HloModule sort\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n%s}\n\n"
           "ENTRY e {\n  p = f32[%s] parameter(0)\n"
           "  ROOT s = f32[%s] sort(p), dimensions={%d}%s, to_apply=cmp\n}\n",
           jax ? kJaxComparator : "  ROOT lt = pred[] compare(a, b), direction=LT\n", dims, dims,
           dim, stable ? ", is_stable=true" : "");
  return buf;
}

/* JAX's comparator in C, per comparison (as a library sort calling the comparator does): the
 * canonical key's bits in total order. */
static inline int32_t jax_key(float x) {
  float k = x != x ? NAN : (x == 0.0f ? 0.0f : x);
  int32_t i;
  memcpy(&i, &k, sizeof i);
  return i ^ ((i >> 31) & INT32_MAX); /* negatives reversed; branch-free (random signs) */
}

/* The baseline: a bottom-up stable merge sort of `n` floats by `<` (or JAX's comparator),
 * ping-ponging between `a` and `tmp`; returns the buffer holding the result. */
static float *c_merge_sort(float *a, float *tmp, int64_t n, bool jax) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      if (jax)
        while (i < mid && j < hi) tmp[k++] = jax_key(a[j]) < jax_key(a[i]) ? a[j++] : a[i++];
      while (i < mid && j < hi) tmp[k++] = a[j] < a[i] ? a[j++] : a[i++];
      while (i < mid) tmp[k++] = a[i++];
      while (j < hi) tmp[k++] = a[j++];
    }
    float *t = a;
    a = tmp;
    tmp = t;
  }
  return a;
}

/* The same radix sort kiln's host emits for JAX's comparator (sort_emitter.h, "Radix"), in C:
 * the key's bits flipped into unsigned order, every byte's histogram in one pass, inclusive
 * sums, then four passes walking the row backwards into each byte's slots. The baseline for
 * the code kiln generates, where the merge sort is the one for the algorithm. */
static float *c_radix_sort(float *a, float *tmp, int64_t n, bool jax) {
  (void)jax;
  uint32_t counts[4][256] = {{0}};
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)jax_key(a[i]) ^ 0x80000000u;
    for (int d = 0; d < 4; d++) counts[d][(u >> (8 * d)) & 255]++;
  }
  for (int d = 0; d < 4; d++)
    for (int j = 1; j < 256; j++) counts[d][j] += counts[d][j - 1];
  for (int d = 0; d < 4; d++) {
    for (int64_t i = n - 1; i >= 0; i--) {
      uint32_t u = (uint32_t)jax_key(a[i]) ^ 0x80000000u;
      tmp[--counts[d][(u >> (8 * d)) & 255]] = a[i];
    }
    float *t = a;
    a = tmp;
    tmp = t;
  }
  return a;
}

typedef float *(*c_sort_fn)(float *a, float *tmp, int64_t n, bool jax);

/* Median ms of `reps` C sorts (`sort`) of the `bytes / 4` floats at `input`, in rows of `row`
 * (one after another, on one thread). */
static double c_sort_ms(c_sort_fn sort, const void *input, size_t bytes, int64_t row, bool jax,
                        int reps) {
  int64_t n = (int64_t)(bytes / sizeof(float));
  float *a = kiln_malloc(bytes), *tmp = kiln_malloc(bytes);
  double *t = kiln_calloc((size_t)reps, sizeof(double));
  volatile float sink = 0;
  for (int r = 0; r < reps; r++) {
    memcpy(a, input, bytes);
    double t0 = kiln_clock_ms();
    for (int64_t lo = 0; lo + row <= n; lo += row)
      sink += sort(a + lo, tmp + lo, row, jax)[row / 2];
    t[r] = kiln_clock_ms() - t0;
  }
  (void)sink;
  double m = median(t, reps);
  kiln_free(t);
  kiln_free(a);
  kiln_free(tmp);
  return m;
}

/* c_row > 0: also time the C merge sort over rows of c_row floats of parameter 0 (with JAX's
 * comparator when `jax`). */
static kiln_status bench(kiln_device_t *dev, kiln_hlo_module_t *m, const char *label, int reps,
                         int64_t c_row, bool jax) {
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  kiln_executable_desc_t *d = NULL;
  kiln_compile_stats_t cs;
  double w0 = kiln_clock_ms(), c0 = cpu_ms();
  kiln_pass_options_t env_passes;
  kiln_pjrt_compile_options_from_env(&co, &env_passes);
  KILN_RETURN_IF_ERROR(kiln_compile_module(m, &co, &d, &cs), "while compiling %s", label);
  double cw = kiln_clock_ms() - w0, cc = cpu_ms() - c0;
  kiln_executable_t *e = NULL;
  kiln_stream_t *stream = NULL;
  kiln_status s = kiln_executable_load(dev, d, &e);
  if (!s) s = kiln_stream_create(dev, &stream);
  const kiln_executable_desc_t *ed = e ? kiln_executable_desc(e) : NULL;
  int32_t np = ed ? ed->num_parameters : 0;
  kiln_devptr_t *params = kiln_calloc((size_t)np + 1, sizeof(*params));
  uint64_t *sizes = kiln_calloc((size_t)np + 1, sizeof(*sizes));
  double c_ms = 0, radix_ms = 0;
  for (int32_t i = 0; !s && i < np; i++) {
    sizes[i] = ed->parameter_sizes[i];
    s = kiln_device_mem_alloc(dev, (size_t)sizes[i], &params[i]);
    /* Pseudo-random bits with bit 14 of every 16-bit half cleared: finite f32 and bf16
     * values (the top exponent bit is 0) in no pattern a branch predictor could learn, as
     * real data to sort (a byte ramp, used before session 36, let branchy code look fast). */
    uint16_t *host = kiln_malloc((size_t)sizes[i] + 2);
    uint64_t state = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    for (uint64_t k = 0; k < (sizes[i] + 1) / 2; k++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      host[k] = (uint16_t)((state >> 33) & ~(uint64_t)0x4000);
    }
    if (!s) s = kiln_stream_memcpy_h2d(stream, params[i], host, (size_t)sizes[i]);
    if (!s) s = kiln_stream_synchronize(stream);
    if (!s && c_row > 0 && i == 0)
      c_ms = c_sort_ms(c_merge_sort, host, (size_t)sizes[i], c_row, jax, reps);
    if (!s && c_row > 0 && i == 0 && jax)
      radix_ms = c_sort_ms(c_radix_sort, host, (size_t)sizes[i], c_row, jax, reps);
    kiln_free(host);
  }
  double *rw = kiln_calloc((size_t)reps, sizeof(double)),
         *rc = kiln_calloc((size_t)reps, sizeof(double));
  int32_t no = ed ? ed->num_outputs : 0;
  kiln_device_buffer_t **outs = kiln_calloc((size_t)no + 1, sizeof(*outs));
  for (int r = 0; r < reps && !s; r++) {
    w0 = kiln_clock_ms();
    c0 = cpu_ms();
    s = kiln_executable_run(e, stream, params, sizes, np, outs);
    rw[r] = kiln_clock_ms() - w0;
    rc[r] = cpu_ms() - c0;
    for (int32_t i = 0; i < no; i++) kiln_device_buffer_destroy(outs[i]);
  }
  if (!s) {
    double mw = median(rw, reps), mc = median(rc, reps);
    printf(
        "%-26s compile %8.1f ms (cpu %8.1f; kernels %d, backend %.1f ms)  run median %8.3f ms "
        "(cpu %8.3f), min %8.3f ms (cpu %8.3f)\n",
        label, cw, cc, cs.emit.kernels, cs.emit.backend_ms, mw, mc, rw[0], rc[0]);
    if (c_row > 0)
      printf(
          "%-26s C merge sort median %8.3f ms (one thread): kiln / C = %.2fx, kiln cpu / C = "
          "%.2fx\n",
          "", c_ms, mw / c_ms, mc / c_ms);
    if (radix_ms > 0)
      printf(
          "%-26s C radix sort median %8.3f ms (one thread): kiln / C = %.2fx, kiln cpu / C = "
          "%.2fx\n",
          "", radix_ms, mw / radix_ms, mc / radix_ms);
  }
  kiln_free(outs);
  kiln_free(rw);
  kiln_free(rc);
  for (int32_t i = 0; i < np; i++) kiln_device_mem_free(dev, params[i]);
  kiln_free(params);
  kiln_free(sizes);
  kiln_stream_destroy(stream);
  kiln_executable_destroy(e);
  return s;
}

int main(int argc, char **argv) {
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_host_device_create(0, &dev);
  if (s) return (int)kiln_status_report(s, "bench_sort");
  printf("host device %s, %d runs each\n", dev->name, reps);
  int failures = 0;
  char text[2048];
  /* dims, sort dimension, stable, C baseline's row length, comparator ("jax" or <), label */
  const char *cases[][6] = {{"65536", "0", "", "65536", "", "sort f32[65536]"},
                            {"64,16384", "1", "", "16384", "", "sort f32[64,16384] dim 1"},
                            {"1024", "0", "", "1024", "", "sort f32[1024]"},
                            {"8192", "0", "", "8192", "", "sort f32[8192]"},
                            {"4096,32", "1", "", "32", "", "sort f32[4096,32] dim 1"},
                            {"65536", "0", "stable", "65536", "", "stable f32[65536]"},
                            {"262144", "0", "stable", "262144", "", "stable f32[262144]"},
                            {"256,4096", "1", "stable", "4096", "jax", "jax cmp f32[256,4096]"}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    kiln_hlo_module_t *m = NULL;
    bool stable = cases[c][2][0] != 0, jax = cases[c][4][0] != 0;
    sort_text(cases[c][0], atoi(cases[c][1]), stable, jax, text, sizeof text);
    s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
    if (!s) s = bench(dev, m, cases[c][5], reps, atoll(cases[c][3]), jax);
    kiln_hlo_module_destroy(m);
    if (s) failures += kiln_status_report(s, "bench_sort") != 0;
  }
  char path[1024];
  snprintf(path, sizeof path,
           "%s/xla/xla__backends__cpu__benchmarks__hlo__argsort_axis_1024x512_bf16.hlo",
           kiln_corpus_dir());
  kiln_hlo_file_t *f = NULL;
  s = kiln_hlo_file_load(path, &f);
  if (!s) s = bench(dev, f->modules[0], "argsort 1024x512 bf16", reps, 0, false);
  kiln_hlo_file_free(f);
  if (s) failures += kiln_status_report(s, "bench_sort") != 0;
  kiln_device_destroy(dev);
  return failures ? 1 : 0;
}
