/* Whole-module runs on a device (device_run.h). */
#include "base/clock.h"
#include "tools/common/device_run.h"

#include "compiler/thunks/executable_cache.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/str.h"
#include "compiler/hlo/literal_layout.h"
#include "compiler/passes/dataflow.h"
#include "runtime/buffer.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/executable.h"
#include "runtime/spmd.h"
#include "tools/common/profile_report.h"
#include "tools/common/run_report.h"
#include "plugin/env_options.h"

/* A fresh copy of `m` (the compiler rewrites its input), through the canonical text. */
static kiln_status clone_module_text(const kiln_hlo_module_t *m, kiln_hlo_module_t **out) {
  char *text = kiln_hlo_module_to_string(m);
  kiln_hlo_parse_options_t po = {0};
  po.filename = m->name;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, out);
  kiln_free(text);
  return s ? kiln_status_annotate(s, "while copying module %s", m->name) : NULL;
}

/* A copy of `m` (printed and parsed back) in an out-of-memory scope: the printing's
 * allocations can fail too. */
static kiln_status clone_module(const kiln_hlo_module_t *m, kiln_hlo_module_t **out) {
  KILN_OOM_SCOPED_RETURN(clone_module_text(m, out), *out = NULL, "copying module %s", m->name);
}

/* Leaf `leaf` (depth first) of literal `l`, or NULL. */
static const kiln_literal_t *literal_leaf(const kiln_literal_t *l, int leaf) {
  return kiln_run_report_leaf(l, leaf);
}

static kiln_status upload(kiln_device_t *dev, kiln_stream_t *stream, const kiln_hlo_module_t *cm,
                          kiln_literal_t *const *args, int num_args,
                          const kiln_executable_desc_t *d, kiln_device_buffer_t ***bufs_out,
                          kiln_devptr_t **ptrs_out, uint64_t **sizes_out) {
  int32_t np = d->num_parameters;
  kiln_device_buffer_t **bufs = kiln_try_calloc((size_t)np + 1, sizeof(*bufs));
  kiln_devptr_t *ptrs = kiln_try_calloc((size_t)np + 1, sizeof(*ptrs));
  uint64_t *sizes = kiln_try_calloc((size_t)np + 1, sizeof(*sizes));
  *bufs_out = bufs;
  *ptrs_out = ptrs;
  *sizes_out = sizes;
  if (!bufs || !ptrs || !sizes)
    return KILN_ERR_EXHAUSTED("out of host memory for %d parameter buffers", np);
  const kiln_hlo_computation_t *entry = cm->entry;
  if (num_args != entry->num_parameters)
    return KILN_ERR_INVALID("%s takes %d parameters, %d arguments given", cm->name,
                            entry->num_parameters, num_args);
  int32_t flat = 0;
  for (int p = 0; p < entry->num_parameters; p++) {
    const kiln_shape_t *ps = entry->parameters[p]->shape;
    int nl = kiln_shape_num_leaves(ps);
    for (int l = 0; l < nl; l++, flat++) {
      if (flat >= np) return KILN_ERR_INTERNAL("parameter leaves exceed the executable's");
      const kiln_shape_t *ls = kiln_shape_leaf(ps, l, NULL);
      sizes[flat] = d->parameter_sizes[flat];
      uint64_t bytes = sizes[flat] ? sizes[flat] : 1;
      KILN_RETURN_IF_ERROR(kiln_device_buffer_create(dev, bytes, &bufs[flat]), "for parameter %d",
                           p);
      ptrs[flat] = bufs[flat]->ptr;
      if (!ls || !kiln_shape_is_array(ls) || !sizes[flat]) continue;
      const kiln_literal_t *lit = literal_leaf(args[p], l);
      if (!lit || !lit->data || kiln_shape_byte_size(ls) != (int64_t)sizes[flat])
        return KILN_ERR_INVALID("argument %d leaf %d does not match the parameter", p, l);
      void *host = kiln_try_malloc((size_t)sizes[flat]);
      if (!host) return KILN_ERR_EXHAUSTED("out of host memory staging parameter %d", p);
      kiln_literal_write_physical(lit, ls, host);
      kiln_status s = kiln_stream_memcpy_h2d(stream, ptrs[flat], host, (size_t)sizes[flat]);
      if (!s) s = kiln_stream_synchronize(stream);
      kiln_free(host);
      KILN_RETURN_IF_ERROR_PLAIN(s);
    }
  }
  if (flat != np) return KILN_ERR_INTERNAL("%d parameter leaves, the executable has %d", flat, np);
  return NULL;
}

static kiln_status download(kiln_stream_t *stream, const kiln_hlo_module_t *orig,
                            const kiln_hlo_module_t *cm, kiln_device_buffer_t **outs, int32_t no,
                            kiln_arena_t *arena, kiln_literal_t **result) {
  kiln_shape_t *rs = kiln_shape_clone(arena, orig->entry->root->shape);
  kiln_literal_t *res = kiln_literal_make(arena, rs);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cannot allocate the result");
  const kiln_shape_t *phys = cm->entry->root->shape;
  int nl = kiln_shape_num_leaves(rs);
  if (nl != no || kiln_shape_num_leaves(phys) != nl)
    return KILN_ERR_INTERNAL("result has %d leaves, the executable returned %d", nl, no);
  for (int l = 0; l < nl; l++) {
    kiln_literal_t *leaf = (kiln_literal_t *)literal_leaf(res, l);
    const kiln_shape_t *ls = kiln_shape_leaf(phys, l, NULL);
    if (!leaf || !kiln_shape_is_array(leaf->shape) || !leaf->data) continue;
    int64_t bytes = kiln_shape_byte_size(leaf->shape);
    if (!outs[l] || outs[l]->size < (uint64_t)bytes)
      return KILN_ERR_INTERNAL("output %d: %lld bytes expected", l, (long long)bytes);
    void *host = kiln_try_malloc((size_t)bytes + 1);
    if (!host) return KILN_ERR_EXHAUSTED("out of host memory staging output %d", l);
    kiln_status s = kiln_stream_memcpy_d2h(stream, host, outs[l]->ptr, (size_t)bytes);
    if (!s) s = kiln_stream_synchronize(stream);
    if (!s) kiln_literal_read_physical(leaf, ls, host);
    kiln_free(host);
    KILN_RETURN_IF_ERROR_PLAIN(s);
  }
  *result = res;
  return NULL;
}

/* Compiles a copy of `m` for opts->device and a world of R x P, and loads it. */
static kiln_status compile_load(const kiln_hlo_module_t *m, const kiln_device_run_options_t *opts,
                                int num_replicas, int num_partitions, kiln_hlo_module_t **cm_out,
                                kiln_executable_t **exe_out, kiln_device_run_report_t *rep) {
  kiln_device_t *dev = opts->device;
  *cm_out = NULL;
  *exe_out = NULL;
  double t0 = kiln_clock_ms(), c0 = kiln_clock_cpu_ms();
  kiln_hlo_module_t *cm = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(clone_module(m, &cm));
  *cm_out = cm;
  kiln_compile_options_t co;
  memset(&co, 0, sizeof(co));
  co.emit.target = dev->kind == KILN_DEVICE_CUDA ? KILN_TARGET_CUDA : KILN_TARGET_HOST;
  char arch[16];
  if (dev->kind == KILN_DEVICE_CUDA) {
    kiln_cuda_device_arch(dev, arch, sizeof(arch)); /* not always sm_90 */
    co.emit.arch = arch;
    co.emit.cublaslt = kiln_cublaslt_available(); /* probed once per process */
  }
  co.emit.dump_dir = opts->dump_dir;
  co.emit.max_while_iterations = opts->max_while_iterations;
  co.emit.rng_seed = opts->rng_seed;
  co.emit.num_replicas = num_replicas;
  co.emit.num_partitions = num_partitions;
  co.no_command_buffers = opts->no_command_buffers;
  co.emit.strict_precision = opts->strict_precision;
  kiln_pass_options_t po;
  /* the edge: KILN_DUMP_TO, the passes, command buffers, host JIT, precision, CUDA toolkit */
  kiln_pjrt_compile_options_from_env(&co, &po);
  if (opts->combine_threshold_bytes)
    po.all_reduce_combine_threshold_bytes = po.all_gather_combine_threshold_bytes =
        po.reduce_scatter_combine_threshold_bytes = opts->combine_threshold_bytes;
  kiln_executable_desc_t *d = NULL;
  kiln_status s = kiln_compile_module(cm, &co, &d, &rep->compile);
  if (!s && opts->serialize_round_trip) {
    void *bytes = NULL;
    size_t len = 0;
    s = kiln_executable_desc_to_bytes(d, &bytes, &len);
    kiln_executable_desc_destroy(d);
    d = NULL;
    rep->serialized_bytes = len;
    if (!s) s = kiln_executable_desc_from_bytes(bytes, len, &co.emit, &d);
    kiln_free(bytes);
  }
  rep->compile_ms = kiln_clock_ms() - t0;
  if (!s && opts->print_thunks) {
    kiln_strbuf_t b = {0};
    kiln_executable_desc_print(&b, d);
    fputs(kiln_strbuf_cstr(&b), stdout);
    kiln_strbuf_free(&b);
  }
  if (!s) {
    double t1 = kiln_clock_ms();
    s = kiln_executable_load(dev, d, exe_out);
    rep->load_ms = kiln_clock_ms() - t1;
  }
  rep->compile_load_cpu_ms = kiln_clock_cpu_ms() - c0;
  if (!s && opts->profile)
    kiln_executable_set_profile(*exe_out, (kiln_thunk_profile_mode_t)opts->profile);
  return s;
}

/* Destroys `n` buffers of `bufs` (NULL ones too) and clears their slots. */
static void drop_buffers(kiln_device_buffer_t **bufs, size_t n) {
  for (size_t i = 0; bufs && i < n; i++) {
    kiln_device_buffer_destroy(bufs[i]);
    bufs[i] = NULL;
  }
}

kiln_status kiln_device_run_module(const kiln_hlo_module_t *m, kiln_literal_t *const *args,
                                   int num_args, const kiln_device_run_options_t *opts,
                                   kiln_arena_t *arena, kiln_literal_t **result,
                                   kiln_device_run_report_t *report) {
  *result = NULL;
  kiln_device_run_report_t local;
  kiln_device_run_report_t *rep = report ? report : &local;
  memset(rep, 0, sizeof(*rep));
  if (!opts || !opts->device) return KILN_ERR_INVALID("device run: no device");
  kiln_device_t *dev = opts->device;
  kiln_hlo_module_t *cm = NULL;
  kiln_executable_t *exe = NULL;
  kiln_status s = compile_load(m, opts, 0, 0, &cm, &exe, rep);
  int32_t np = 0, no = 0;
  if (exe) {
    np = kiln_executable_desc(exe)->num_parameters;
    no = kiln_executable_desc(exe)->num_outputs;
  }
  kiln_stream_t *stream = NULL;
  if (!s && opts->compile_only) {
    kiln_executable_destroy(exe);
    kiln_hlo_module_destroy(cm);
    return NULL;
  }
  if (!s) s = kiln_stream_create(dev, &stream);
  kiln_device_buffer_t **bufs = NULL;
  kiln_devptr_t *ptrs = NULL;
  uint64_t *sizes = NULL;
  if (!s) {
    double t1 = kiln_clock_ms();
    s = upload(dev, stream, cm, args, num_args, kiln_executable_desc(exe), &bufs, &ptrs, &sizes);
    rep->upload_ms = kiln_clock_ms() - t1;
  }
  /* outs: the outputs of the run the caller gets (the last or the first); later: each other
   * run's, dropped before the next */
  kiln_device_buffer_t **outs = kiln_try_calloc(2 * ((size_t)no + 1), sizeof(*outs));
  kiln_device_buffer_t **later = outs ? outs + no + 1 : NULL;
  if (!s && !outs) s = KILN_ERR_EXHAUSTED("out of host memory for %d outputs", no);
  int64_t repeat = opts->repeat > 0 ? opts->repeat : 1;
  int64_t kept = opts->first_run_result ? 0 : repeat - 1;
  for (int64_t r = 0; r < repeat && !s; r++) {
    drop_buffers(later, (size_t)no);
    double t1 = kiln_clock_ms();
    s = kiln_executable_run(exe, stream, ptrs, sizes, np, r == kept ? outs : later);
    double dt = kiln_clock_ms() - t1;
    if (r == 0 || dt < rep->run_min_ms) rep->run_min_ms = dt;
    rep->run_mean_ms += dt / (double)repeat;
    rep->runs++;
    if (opts->print_runs && !s) printf("run %lld: %.3f ms\n", (long long)r, dt);
  }
  if (!s && exe && kiln_executable_profile(exe)) {
    kiln_strbuf_t b = {0};
    kiln_profile_report_format(&b, kiln_executable_profile(exe), cm, opts->profile_rows);
    fputs(kiln_strbuf_cstr(&b), stdout);
    kiln_strbuf_free(&b);
  }
  if (!s) {
    double t1 = kiln_clock_ms();
    s = download(stream, m, cm, outs, no, arena, result);
    rep->download_ms = kiln_clock_ms() - t1;
  }
  if (outs) drop_buffers(outs, 2 * ((size_t)no + 1));
  kiln_free(outs);
  if (bufs)
    for (int32_t i = 0; i < np; i++) kiln_device_buffer_destroy(bufs[i]);
  kiln_free(bufs);
  kiln_free(ptrs);
  kiln_free(sizes);
  if (stream) kiln_stream_destroy(stream);
  kiln_executable_destroy(exe);
  kiln_hlo_module_destroy(cm);
  return s;
}

/* One participant's stream and parameter buffers. */
typedef struct participant_io {
  kiln_stream_t *stream;
  kiln_device_buffer_t **bufs;
  kiln_devptr_t *ptrs;
  uint64_t *sizes;
} participant_io_t;

kiln_status kiln_device_run_module_spmd(const kiln_hlo_module_t *m, kiln_literal_t *const *args,
                                        int num_args, int num_replicas, int num_partitions,
                                        const kiln_device_run_options_t *opts, kiln_arena_t *arena,
                                        kiln_literal_t **results,
                                        kiln_device_run_report_t *report) {
  kiln_device_run_report_t local;
  kiln_device_run_report_t *rep = report ? report : &local;
  memset(rep, 0, sizeof(*rep));
  if (!opts || !opts->device) return KILN_ERR_INVALID("device run: no device");
  if (num_replicas < 1 || num_partitions < 1 || num_replicas * num_partitions > 4096)
    return KILN_ERR_INVALID("device run: %d replicas x %d partitions", num_replicas,
                            num_partitions);
  int world = num_replicas * num_partitions, n = world, first = 0;
  for (int i = 0; i < world; i++) results[i] = NULL;
  if (opts->mpi) {
    int procs = kiln_mpi_size(opts->mpi);
    if (world % procs)
      return KILN_ERR_INVALID("device run: %d participants do not split over %d MPI processes",
                              world, procs);
    n = world / procs;
    first = kiln_mpi_rank(opts->mpi) * n;
  }
  kiln_device_t *dev = opts->device;
  kiln_hlo_module_t *cm = NULL;
  kiln_executable_t *exe = NULL;
  kiln_status s = compile_load(m, opts, num_replicas, num_partitions, &cm, &exe, rep);
  /* Across processes: every process compiled and loaded before any participant runs, so the
   * collectives' deadline does not count another process's compile. */
  if (!s && opts->mpi && !opts->compile_only)
    s = kiln_mpi_barrier(opts->mpi, "every process loaded the executable",
                         KILN_DEVICE_RUN_MPI_LOAD_TIMEOUT_MS);
  int32_t np = 0, no = 0;
  if (exe) {
    np = kiln_executable_desc(exe)->num_parameters;
    no = kiln_executable_desc(exe)->num_outputs;
  }
  /* io, streams, params and outs: this process's participants, local index i is participant
   * first + i */
  participant_io_t *io = kiln_try_calloc((size_t)n, sizeof *io);
  kiln_stream_t **streams = kiln_try_calloc((size_t)n, sizeof *streams);
  const kiln_devptr_t **params = kiln_try_calloc((size_t)n, sizeof *params);
  /* outs: the outputs of the run the caller gets, participant by participant; later: another
   * run's */
  size_t nout = (size_t)n * (size_t)no;
  kiln_device_buffer_t **outs = kiln_try_calloc(2 * nout + 1, sizeof *outs);
  kiln_device_buffer_t **later = outs ? outs + nout : NULL;
  if (!s && (!io || !streams || !params || !outs))
    s = KILN_ERR_EXHAUSTED("out of host memory for the buffers of %d participants", n);
  double t1 = kiln_clock_ms();
  for (int i = 0; i < n && !s && !opts->compile_only; i++) {
    kiln_literal_t *const *in = opts->participant_args ? opts->participant_args[first + i] : args;
    s = kiln_stream_create(dev, &io[i].stream);
    if (!s)
      s = upload(dev, io[i].stream, cm, in, num_args, kiln_executable_desc(exe), &io[i].bufs,
                 &io[i].ptrs, &io[i].sizes);
    streams[i] = io[i].stream;
    params[i] = io[i].ptrs;
  }
  rep->upload_ms = kiln_clock_ms() - t1;
  int64_t repeat = opts->repeat > 0 ? opts->repeat : 1;
  int64_t kept = opts->first_run_result ? 0 : repeat - 1;
  for (int64_t r = 0; r < repeat && !s && !opts->compile_only; r++) {
    drop_buffers(later, nout);
    kiln_spmd_run_params_t sp = {.num_replicas = num_replicas,
                                 .num_partitions = num_partitions,
                                 .timeout_ms = opts->collective_timeout_ms,
                                 .streams = streams,
                                 .params = params,
                                 .param_sizes = io[0].sizes,
                                 .num_params = np,
                                 .outputs = r == kept ? outs : later,
                                 .mpi = opts->mpi};
    double t2 = kiln_clock_ms();
    s = kiln_executable_run_spmd(exe, &sp);
    double dt = kiln_clock_ms() - t2;
    if (r == 0 || dt < rep->run_min_ms) rep->run_min_ms = dt;
    rep->run_mean_ms += dt / (double)repeat;
    rep->runs++;
    if (opts->print_runs && !s) printf("run %lld: %.3f ms\n", (long long)r, dt);
  }
  t1 = kiln_clock_ms();
  for (int i = 0; i < n && !s && !opts->compile_only; i++)
    s = download(io[i].stream, m, cm, outs + (size_t)i * (size_t)no, no, arena,
                 &results[first + i]);
  rep->download_ms = kiln_clock_ms() - t1;
  if (outs) drop_buffers(outs, 2 * nout);
  for (int i = 0; io && i < n; i++) {
    if (io[i].bufs)
      for (int32_t k = 0; k < np; k++) kiln_device_buffer_destroy(io[i].bufs[k]);
    kiln_free(io[i].bufs);
    kiln_free(io[i].ptrs);
    kiln_free(io[i].sizes);
    if (io[i].stream) kiln_stream_destroy(io[i].stream);
  }
  if (s)
    for (int i = 0; i < world; i++) results[i] = NULL;
  kiln_free(outs);
  kiln_free(params);
  kiln_free(streams);
  kiln_free(io);
  kiln_executable_destroy(exe);
  kiln_hlo_module_destroy(cm);
  return s;
}
