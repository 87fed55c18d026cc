/* Steady-state executes against their kernels alone, on one device (the host's, or with
 * `--backend cuda` the first GPU's), same process.
 *
 * For each module (GELU examples/gelu.hlo, the corpus layer norm and sum-over-an-axis
 * reduction, an f32[2048,2048] transpose: benchmarks/hlo/transpose_2048.hlo) the module is
 * compiled and loaded once, then two measurements alternate, `--reps` times each:
 *   execute  — what `kiln-run --backend=host --repeat=N` times per run: kiln_executable_run
 *              (execution context, output allocation, thunks, stream synchronize) and the
 *              release of the output buffers;
 *   kernels  — the same executable's kernels (its top-level thunks as resolved commands:
 *              launches, copies, memsets) issued on the same stream over buffers bound once,
 *              then one synchronize.
 * It prints both medians and minimums, the ratio execute / kernels (goal <= 1.1), and the
 * raw device allocations counted during the execute runs (0 with the caching allocator;
 * KILN_ALLOCATOR=plain shows the per-run allocations it removes).
 *
 * Inputs are filled with the byte 0x3c (f32 0.0115, bf16 0.0115: finite, no denormals).
 * Usage: bench_steady_state [--reps 20] [--backend host|cuda] [FILE.hlo ...]   (files replace
 * the default set). Without a GPU, `--backend cuda` prints SKIP and exits 77 (a failure with
 * KILN_REQUIRE_GPU=1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "compiler/thunks/compile.h"
#include "runtime/command_buffer.h"
#include "runtime/executable.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_device.h"
#include "tests/skip_util.h"
#include "tools/common/hlo_file.h"
#include "plugin/env_options.h"

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kiln_clock_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double min_of(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++)
    if (v[i] < m) m = v[i];
  return m;
}

typedef struct bench {
  kiln_device_t *dev;
  kiln_stream_t *stream;
  kiln_executable_t *e;
  kiln_devptr_t *params;
  uint64_t *param_sizes;
  int32_t num_params;
  kiln_buffer_table_t table; /* the kernels-only run's buffers */
  kiln_cmd_list_t cmds;
} bench_t;

/* Binds the executable's allocations for the kernels-only run: parameters to the inputs,
 * constants uploaded, outputs and temporaries allocated once. */
static kiln_status bind_table(bench_t *b) {
  const kiln_executable_desc_t *d = kiln_executable_desc(b->e);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_init(&b->table, b->dev, d->num_allocations));
  for (int32_t i = 0; i < d->num_allocations; i++) {
    const kiln_exec_allocation_t *a = &d->allocations[i];
    if (a->kind == KILN_EXEC_ALLOC_PARAMETER) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_bind(&b->table, i, b->params[a->parameter],
                                                        b->param_sizes[a->parameter]));
      continue;
    }
    KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_allocate(&b->table, i, a->size ? a->size : 1));
    if (a->kind == KILN_EXEC_ALLOC_CONSTANT && a->size)
      KILN_RETURN_IF_ERROR_PLAIN(
          kiln_stream_memcpy_h2d(b->stream, b->table.bases[i], a->data, (size_t)a->size));
  }
  KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_synchronize(b->stream));
  for (size_t i = 0; i < d->thunks.len; i++) {
    const kiln_thunk_t *t = d->thunks.items[i];
    if (!kiln_thunk_is_convertible(t))
      return KILN_ERR_UNIMPLEMENTED("thunk %zu (kind %d) is not a kernel, copy or memset", i,
                                    (int)kiln_thunk_kind(t));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_append_commands(t, &b->table, &b->cmds));
  }
  return NULL;
}

static kiln_status run_kernels(bench_t *b) {
  for (size_t i = 0; i < b->cmds.len; i++) {
    const kiln_cmd_t *c = &b->cmds.cmds[i];
    switch (c->kind) {
      case KILN_CMD_KERNEL:
        KILN_RETURN_IF_ERROR_PLAIN(
            kiln_stream_launch(b->stream, c->kernel, &c->dims, c->args, c->num_args));
        break;
      case KILN_CMD_MEMCPY:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_memcpy_d2d(b->stream, c->dst, c->src, c->bytes));
        break;
      case KILN_CMD_MEMSET:
        KILN_RETURN_IF_ERROR_PLAIN(
            kiln_stream_memset(b->stream, c->dst, c->pattern, c->elem_size, c->count));
        break;
      case KILN_CMD_GEMM:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_gemm(b->stream, &c->gemm, c->a, c->b, c->dst));
        break;
      case KILN_CMD_CUSTOM_CALL: /* a host handler reads its operands: what is queued first */
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_synchronize(b->stream));
        KILN_RETURN_IF_ERROR_PLAIN(kiln_cmd_custom_call_invoke(c, b->stream));
        break;
    }
  }
  return kiln_stream_synchronize(b->stream);
}

static kiln_status run_execute(bench_t *b) {
  const kiln_executable_desc_t *d = kiln_executable_desc(b->e);
  kiln_device_buffer_t **outs = kiln_calloc((size_t)d->num_outputs + 1, sizeof(*outs));
  kiln_status s =
      kiln_executable_run(b->e, b->stream, b->params, b->param_sizes, b->num_params, outs);
  for (int32_t i = 0; i < d->num_outputs; i++) kiln_device_buffer_destroy(outs[i]);
  kiln_free(outs);
  return s;
}

static kiln_status bench_module(kiln_device_t *dev, kiln_hlo_module_t *m, const char *label,
                                int reps) {
  bench_t b = {.dev = dev};
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  char arch[16];
  if (dev->kind == KILN_DEVICE_CUDA) {
    co.emit.target = KILN_TARGET_CUDA;
    kiln_cuda_device_arch(dev, arch, sizeof arch);
    co.emit.arch = arch;
    co.emit.cublaslt = kiln_cublaslt_available();
  }
  kiln_executable_desc_t *d = NULL;
  kiln_compile_stats_t cs;
  kiln_pass_options_t env_passes;
  kiln_pjrt_compile_options_from_env(&co, &env_passes);
  KILN_RETURN_IF_ERROR(kiln_compile_module(m, &co, &d, &cs), "while compiling %s", label);
  kiln_status s = kiln_executable_load(dev, d, &b.e);
  if (!s) s = kiln_stream_create(dev, &b.stream);
  if (!s) {
    d = (kiln_executable_desc_t *)kiln_executable_desc(b.e);
    b.num_params = d->num_parameters;
    b.params = kiln_calloc((size_t)b.num_params + 1, sizeof(*b.params));
    b.param_sizes = kiln_calloc((size_t)b.num_params + 1, sizeof(*b.param_sizes));
  }
  for (int32_t i = 0; !s && i < b.num_params; i++) {
    b.param_sizes[i] = d->parameter_sizes[i];
    s = kiln_device_mem_alloc(dev, (size_t)(b.param_sizes[i] ? b.param_sizes[i] : 1), &b.params[i]);
    if (!s && b.param_sizes[i])
      s = kiln_stream_memset(b.stream, b.params[i], 0x3c, 1, (size_t)b.param_sizes[i]);
  }
  if (!s) s = bind_table(&b);
  double *te = kiln_calloc((size_t)reps, sizeof(double)),
         *tk = kiln_calloc((size_t)reps, sizeof(double));
  /* Warm-up: first runs fill the pool, the execution-context pool and the caches. */
  for (int w = 0; w < 2 && !s; w++) {
    s = run_execute(&b);
    if (!s) s = run_kernels(&b);
  }
  kiln_device_allocator_stats_t before, after;
  kiln_device_memory_stats(dev, &before);
  int64_t raw_in_runs = 0;
  for (int r = 0; r < reps && !s; r++) {
    kiln_device_allocator_stats_t a0, a1;
    kiln_device_memory_stats(dev, &a0);
    double t0 = kiln_clock_ms();
    s = run_execute(&b);
    te[r] = kiln_clock_ms() - t0;
    kiln_device_memory_stats(dev, &a1);
    raw_in_runs += a1.raw_allocs - a0.raw_allocs;
    if (s) break;
    t0 = kiln_clock_ms();
    s = run_kernels(&b);
    tk[r] = kiln_clock_ms() - t0;
  }
  kiln_device_memory_stats(dev, &after);
  if (!s) {
    double me = median(te, reps), mk = median(tk, reps);
    printf(
        "%-27s %2zu kernels  execute %9.3f ms (min %9.3f)  kernels %9.3f ms (min %9.3f)  "
        "ratio %.3f (min %.3f)  raw allocs in runs %lld\n",
        label, cs.emit.kernels > 0 ? (size_t)cs.emit.kernels : b.cmds.len, me, min_of(te, reps), mk,
        min_of(tk, reps), me / mk, min_of(te, reps) / min_of(tk, reps), (long long)raw_in_runs);
    fflush(stdout);
  }
  kiln_free(te);
  kiln_free(tk);
  kiln_cmd_list_free(&b.cmds);
  kiln_buffer_table_free(&b.table);
  for (int32_t i = 0; i < b.num_params; i++) kiln_device_mem_free(dev, b.params[i]);
  kiln_free(b.params);
  kiln_free(b.param_sizes);
  kiln_stream_destroy(b.stream);
  kiln_executable_destroy(b.e);
  return s ? kiln_status_annotate(s, "while benchmarking %s", label) : NULL;
}

static kiln_status bench_file(kiln_device_t *dev, const char *path, int reps) {
  kiln_hlo_file_t *f = NULL;
  KILN_RETURN_IF_ERROR(kiln_hlo_file_load(path, &f), "while loading %s", path);
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (strstr(base, "hlo__")) base = strstr(base, "hlo__") + 5;
  char label[64];
  snprintf(label, sizeof label, "%.*s", (int)(strlen(base) > 4 ? strlen(base) - 4 : 0), base);
  kiln_status s = f->num_modules < 1 || f->bare
                      ? KILN_ERR_INVALID("%s: expected an HLO module", path)
                      : bench_module(dev, f->modules[0], label, reps);
  kiln_hlo_file_free(f);
  return s;
}

int main(int argc, char **argv) {
  int reps = 20, first_file = argc;
  const char *backend = "host";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
      backend = argv[++i];
    } else if (argv[i][0] != '-') {
      first_file = i;
      break;
    } else {
      fprintf(stderr, "usage: %s [--reps N] [--backend host|cuda] [FILE.hlo ...]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  const char *env = getenv("KILN_ALLOCATOR");
  kiln_device_t *dev = NULL;
  if (strcmp(backend, "host") && strcmp(backend, "cuda")) {
    fprintf(stderr, "bench_steady_state: --backend must be host or cuda, not %s\n", backend);
    return 2;
  }
  kiln_status s = kiln_device_create(backend, &dev);
  if (s && !strcmp(backend, "cuda") && kiln_status_code(s) == KILN_UNAVAILABLE) {
    int rc = kiln_gpu_unavailable_exit(kiln_status_message(s));
    kiln_status_free(s);
    return rc;
  }
  if (s) return (int)kiln_status_report(s, "bench_steady_state");
  printf("%s device %s, allocator %s, %d reps each (alternating), medians\n", backend, dev->name,
         env && !strcmp(env, "plain") ? "plain" : "bfc", reps);
  int failures = 0;
  if (first_file < argc) {
    for (int i = first_file; i < argc; i++)
      if ((s = bench_file(dev, argv[i], reps))) failures += kiln_status_report(s, "bench") != 0;
  } else {
    char path[1024];
    const char *corpus[] = {"layer_norm_1x4096x768_bf16", "sum_axis_1x4096x1024_bf16"};
    if ((s = bench_file(dev, KILN_SOURCE_DIR "/examples/gelu.hlo", reps)))
      failures += kiln_status_report(s, "bench") != 0;
    for (int i = 0; i < 2; i++) {
      snprintf(path, sizeof path, "%s/xla/xla__backends__cpu__benchmarks__hlo__%s.hlo",
               kiln_corpus_dir(), corpus[i]);
      if ((s = bench_file(dev, path, reps))) failures += kiln_status_report(s, "bench") != 0;
    }
    if ((s = bench_file(dev, KILN_SOURCE_DIR "/benchmarks/hlo/transpose_2048.hlo", reps)))
      failures += kiln_status_report(s, "bench") != 0;
  }
  kiln_device_destroy(dev);
  return failures ? 1 : 0;
}
