/* kiln-run: run an HLO file on a backend and summarize its outputs (like XLA's
 * run_hlo_module). See `kiln-run --help`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"
#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "benchmarks/kiln_bench/replay.h"
#include "plugin/env_options.h"
#include "tools/common/fusion_runner.h"
#include "compiler/passes/pipeline.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "ffi/ffi_registry.h"
#include "runtime/device.h"
#include "runtime/thunk.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "tools/common/npy.h"
#include "tools/common/pjrt_run.h"
#include "tools/common/run_report.h"
#include "tools/common/stablehlo_run.h"

#define MAX_INPUT_FLAGS 256

static const char kUsage[] =
    "usage: kiln-run [options] FILE.hlo | FILE.mlir | FILE.mlirbc\n"
    "\n"
    "Parses FILE (one or more `HloModule`s separated by `// -----` lines, or bare\n"
    "computations such as `fusion { ... }`), verifies each module, makes its inputs,\n"
    "evaluates it and prints one line per output leaf: shape, first values, the sum of\n"
    "the values and an FNV-1a hash of the bytes.\n"
    "\n"
    "StableHLO (.mlir text, .mlirbc bytecode): each `// -----` part's entry function is\n"
    "converted to HLO and run as above; a file whose functions hold check ops (the\n"
    "StableHLO interpreter's `check.expect_*`, JAX tests' `custom_call @check.expect_*`)\n"
    "instead runs each such function and applies its checks, printing\n"
    "`@f: checks: N passed, M failed` (exit status 1 on a failure).\n"
    "\n"
    "options:\n"
    "  --backend=NAME        reference (the evaluator; default), host (compiled, run on\n"
    "                        this machine's CPU), cuda (compiled, run on the GPU), best\n"
    "                        (cuda when a GPU and driver are present, else host)\n"
    "                        host, cuda and best run through the PJRT plugin\n"
    "                        (libkiln_pjrt.so, or $KILN_PJRT_PLUGIN), loaded with dlopen\n"
    "                        and driven only through its function table\n"
    "  --direct              run host/cuda/best on kiln's runtime directly, not through the\n"
    "                        plugin (implied by --thunks, --max-while-iterations and\n"
    "                        --compile-only)\n"
    "  --host-devices=N      (--backend=host) run a multi-device module on N host\n"
    "                        devices, one participant each (also KILN_HOST_DEVICES=N);\n"
    "                        --direct: default as many as its replicas x partitions;\n"
    "                        through the plugin: the client gets N devices (default 1)\n"
    "                        and the module compiles for its world; outputs print\n"
    "                        per participant (r0p1.out0), --compare=reference compares\n"
    "                        each with the SPMD evaluator\n"
    "  --mpi                 (--backend=host) run a multi-device module's participants\n"
    "                        across the processes of mpirun (OpenMPI, loaded at run time:\n"
    "                        libopenmpi3): the world's N participants split evenly, this\n"
    "                        process running its share and printing their outputs;\n"
    "                        implied by --backend=host under mpirun; through the\n"
    "                        plugin's client across processes (--host-devices=N is the\n"
    "                        world's), with --direct the runtime's MPI world\n"
    "  --collective-timeout-ms=N  how long a participant of a multi-device run waits for\n"
    "                        its peers at a collective before the run fails with\n"
    "                        DEADLINE_EXCEEDED naming them (default 30000, also\n"
    "                        KILN_COLLECTIVE_TIMEOUT_MS=N; through the plugin, its\n"
    "                        client option collective_timeout_ms)\n"
    "  --participant-seeds   a multi-device module's participant i gets inputs generated\n"
    "                        from seed + i (data parallel: a batch of its own), not the same\n"
    "                        inputs on each\n"
    "  --module=N            run only the N-th module of the file (0-based)\n"
    "  --seed=N              seed for generated inputs (default 42)\n"
    "  --input=I:PATH        read entry parameter I from a .npy file (repeatable); others\n"
    "                        are generated\n"
    "  --inputs=DIR          read every parameter I from DIR/arg<I>.npy (the leaves of a\n"
    "                        tuple parameter from DIR/arg<I>.<leaf>.npy)\n"
    "  --save-inputs=DIR     write the inputs used, named as --inputs reads them\n"
    "  --output=DIR          write output leaf I as DIR/out<I>.npy\n"
    "  --save=DIR            also save a replay folder for kiln-replay DIR: the plugin's\n"
    "                        serialized executable, the inputs and its outputs as .npy and\n"
    "                        a MANIFEST (several modules: DIR/m<N>)\n"
    "  --compare=reference   also evaluate with the reference and compare every output\n"
    "                        element (per-type relative/absolute tolerance; exit status 1\n"
    "                        on a mismatch)\n"
    "  --thunks              print the executable: allocations and thunk sequence\n"
    "  --compile-only        (host, cuda, best) compile and load the module, run nothing and\n"
    "                        print no outputs (with --timings: the compile + load wall and\n"
    "                        CPU time; implies --direct)\n"
    "  --no-command-buffers  issue thunks one by one (as KILN_DISABLE_COMMAND_BUFFERS=1)\n"
    "  --combine-threshold-bytes=N  the all-reduce / all-gather / reduce-scatter\n"
    "                        combiners' size bound, as kiln-opt's (default 30 MiB, also for\n"
    "                        0; negative: off); through the plugin it goes as the compile\n"
    "                        options' xla_gpu_*_combine_threshold_bytes\n"
    "  --strict-precision    round every bf16 op's result, as the reference does (default:\n"
    "                        excess precision, as XLA; also XLA_FLAGS=\n"
    "                        --xla_allow_excess_precision=false)\n"
    "  --profile[=thunks|commands]  (host/cuda, direct) time every thunk of the runs and\n"
    "                        print a table sorted by total time (kind, kernel, HLO, calls,\n"
    "                        total/mean ms, % of the step); =commands also issues command\n"
    "                        buffers' thunks one by one to time each (default: a command\n"
    "                        buffer is one row)\n"
    "  --profile-rows=N      rows of the --profile table (default all)\n"
    "  --timings             print parse/verify/inputs/eval/output times in ms\n"
    "  --repeat=N            run N times, printing each run's time (timings report min\n"
    "                        and mean); outputs printed, saved and compared are the\n"
    "                        first run's\n"
    "  --values=N            values printed per output leaf (default 8)\n"
    "  --max-while-iterations=N  fail a while loop running longer (default unlimited)\n"
    "  --no-verify           skip the verifier\n"
    "  --fusions             instead of evaluating the module: compile each of its fusions\n"
    "                        (or the bare computation) into a kernel, run it on the host\n"
    "                        on generated inputs, compare with the evaluator, and check\n"
    "                        its PTX with ptxas -arch=sm_90 when ptxas is present\n"
    "  --ffi=SPEC            register custom-call handlers (repeatable; as KILN_FFI_HANDLERS:\n"
    "                        target[@platform]=lib.so:symbol, lib.so:legacy=symbol, lib.so)\n"
    "  --help                this text\n"
    "\n"
    "With several modules run, file names get a `m<N>.` prefix (m1.out0.npy).\n"
    "Inputs generated from the seed are deterministic: floats uniform in [-1, 1), ints in\n"
    "[-8, 7] (unsigned [0, 15]), pred random, gather/scatter/dynamic-slice indices\n"
    "in range, and reduction inits the reducer's identity (0 for add, -inf for max, ...).\n"
    ".npy conventions: bf16 is '|V2', f8 types '|V1', s4/u4 one per byte.\n";

typedef struct run_flags {
  const char *file;
  const char *backend;
  int module; /* -1 = all */
  uint64_t seed;
  int num_inputs;
  int input_param[MAX_INPUT_FLAGS];
  const char *input_path[MAX_INPUT_FLAGS];
  const char *inputs_dir;
  const char *save_inputs_dir;
  const char *output_dir;
  const char *save_dir; /* --save: a replay folder (benchmarks/kiln_bench/replay.h) */
  const char *compare;
  bool timings;
  bool fusions;
  bool bare; /* the file holds bare computations, not modules (set after reading it) */
  int64_t repeat;
  int64_t values;
  int64_t max_while_iterations;
  bool verify;
  bool thunks;
  bool compile_only; /* --compile-only: compile and load, run nothing */
  bool no_command_buffers;
  bool strict_precision;
  bool direct;                /* --direct: the runtime itself, not the PJRT plugin */
  int profile;                /* --profile: a kiln_thunk_profile_mode_t (0: off) */
  int64_t profile_rows;       /* --profile-rows (0: all) */
  int64_t host_devices;       /* --host-devices / $KILN_HOST_DEVICES; 0: the module's world */
  kiln_device_t *device;      /* host / cuda / best with --direct: created once for all modules */
  kiln_pjrt_runner_t *plugin; /* host / cuda / best: the plugin's client, once for all modules */
  bool mpi;                   /* --mpi (or started by mpirun) */
  bool participant_seeds;     /* --participant-seeds */
  kiln_mpi_t *mpi_world;      /* the process's MPI, with --mpi */
  int64_t combine_threshold_bytes; /* --combine-threshold-bytes (0: the combiners' default) */
  int64_t collective_timeout_ms;   /* --collective-timeout-ms (0: the default, 30 s) */
} run_flags_t;

static kiln_status parse_int_flag(const char *name, const char *v, int64_t lo, int64_t hi,
                                  int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 0);
  if (errno || end == v || *end || x < lo || x > hi)
    return KILN_ERR_INVALID("--%s=%s: expected an integer in [%" PRId64 ", %" PRId64 "]", name, v,
                            lo, hi);
  *out = x;
  return NULL;
}

static kiln_status parse_flags(int argc, char **argv, run_flags_t *f, bool *help) {
  memset(f, 0, sizeof *f);
  f->backend = "reference";
  f->module = -1;
  f->seed = 42;
  f->repeat = 1;
  f->values = 8;
  f->verify = true;
  *help = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) != 0) {
      if (f->file) return KILN_ERR_INVALID("more than one input file: '%s' and '%s'", f->file, a);
      f->file = a;
      continue;
    }
    const char *eq = strchr(a, '=');
    size_t klen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    const char *key = a + 2, *val = eq ? eq + 1 : NULL;
#define IS(k) (klen == strlen(k) && strncmp(key, k, klen) == 0)
    if (IS("help")) {
      *help = true;
      return NULL;
    }
    if (IS("timings") && !val) {
      f->timings = true;
      continue;
    }
    if (IS("no-verify") && !val) {
      f->verify = false;
      continue;
    }
    if (IS("fusions") && !val) {
      f->fusions = true;
      continue;
    }
    if (IS("thunks") && !val) {
      f->thunks = true;
      continue;
    }
    if (IS("compile-only") && !val) {
      f->compile_only = true;
      continue;
    }
    if (IS("no-command-buffers") && !val) {
      f->no_command_buffers = true;
      continue;
    }
    if (IS("strict-precision") && !val) {
      f->strict_precision = true;
      continue;
    }
    if (IS("profile")) {
      if (!val || !strcmp(val, "thunks"))
        f->profile = KILN_THUNK_PROFILE_THUNKS;
      else if (!strcmp(val, "commands"))
        f->profile = KILN_THUNK_PROFILE_COMMANDS;
      else
        return KILN_ERR_INVALID("--profile=%s: expected thunks or commands", val);
      continue;
    }
    if (IS("profile-rows") && val) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("profile-rows", val, 0, 1000000, &f->profile_rows));
      continue;
    }
    if (IS("direct") && !val) {
      f->direct = true;
      continue;
    }
    if (IS("mpi") && !val) {
      f->mpi = true;
      continue;
    }
    if (IS("participant-seeds") && !val) {
      f->participant_seeds = true;
      continue;
    }
    if (!val) return KILN_ERR_INVALID("unknown flag '%s' (see --help)", a);
    int64_t x;
    if (IS("ffi")) {
      /* Checked and loaded here (the direct path), and passed on in $KILN_FFI_HANDLERS, which
       * the plugin's compiler reads when it meets its first custom call. */
      KILN_RETURN_IF_ERROR(kiln_ffi_registry_load_spec(kiln_ffi_registry_default(), val),
                           "in --ffi=%s", val);
      const char *old = getenv("KILN_FFI_HANDLERS");
      kiln_strbuf_t env = {0};
      kiln_strbuf_printf(&env, "%s%s%s", old && *old ? old : "", old && *old ? "," : "", val);
      setenv("KILN_FFI_HANDLERS", kiln_strbuf_cstr(&env), 1);
      kiln_strbuf_free(&env);
    } else if (IS("backend")) {
      f->backend = val;
    } else if (IS("module")) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("module", val, 0, 1 << 30, &x));
      f->module = (int)x;
    } else if (IS("seed")) {
      char *end;
      errno = 0;
      unsigned long long s = strtoull(val, &end, 0);
      if (errno || end == val || *end || val[0] == '-')
        return KILN_ERR_INVALID("--seed=%s: expected an unsigned integer", val);
      f->seed = s;
    } else if (IS("input")) {
      const char *colon = strchr(val, ':');
      if (!colon || colon == val || !colon[1])
        return KILN_ERR_INVALID("--input=%s: expected --input=I:PATH", val);
      char num[32];
      size_t n = (size_t)(colon - val);
      if (n >= sizeof num) return KILN_ERR_INVALID("--input=%s: bad parameter number", val);
      memcpy(num, val, n);
      num[n] = 0;
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("input", num, 0, 1 << 30, &x));
      if (f->num_inputs == MAX_INPUT_FLAGS)
        return KILN_ERR_INVALID("more than %d --input flags", MAX_INPUT_FLAGS);
      f->input_param[f->num_inputs] = (int)x;
      f->input_path[f->num_inputs] = colon + 1;
      f->num_inputs++;
    } else if (IS("inputs")) {
      f->inputs_dir = val;
    } else if (IS("save-inputs")) {
      f->save_inputs_dir = val;
    } else if (IS("output")) {
      f->output_dir = val;
    } else if (IS("save")) {
      f->save_dir = val;
    } else if (IS("compare")) {
      f->compare = val;
    } else if (IS("repeat")) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("repeat", val, 1, 1000000, &f->repeat));
    } else if (IS("values")) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("values", val, 0, 1 << 30, &f->values));
    } else if (IS("host-devices")) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("host-devices", val, 1, 4096, &f->host_devices));
    } else if (IS("collective-timeout-ms")) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("collective-timeout-ms", val, 1, 24LL * 3600 * 1000,
                                                &f->collective_timeout_ms));
    } else if (IS("combine-threshold-bytes")) {
      KILN_RETURN_IF_ERROR_PLAIN(parse_int_flag("combine-threshold-bytes", val, INT64_MIN,
                                                INT64_MAX, &f->combine_threshold_bytes));
    } else if (IS("max-while-iterations")) {
      KILN_RETURN_IF_ERROR_PLAIN(
          parse_int_flag("max-while-iterations", val, 0, INT64_MAX, &f->max_while_iterations));
    } else {
      return KILN_ERR_INVALID("unknown flag '%s' (see --help)", a);
    }
#undef IS
  }
  if (!f->file) return KILN_ERR_INVALID("no input file (see --help)");
  const char *hd = getenv("KILN_HOST_DEVICES");
  if (!f->host_devices && hd && *hd)
    KILN_RETURN_IF_ERROR(parse_int_flag("host-devices", hd, 1, 4096, &f->host_devices),
                         "in KILN_HOST_DEVICES");
  const char *ct = getenv("KILN_COLLECTIVE_TIMEOUT_MS");
  if (!f->collective_timeout_ms && ct && *ct)
    KILN_RETURN_IF_ERROR(parse_int_flag("collective-timeout-ms", ct, 1, 24LL * 3600 * 1000,
                                        &f->collective_timeout_ms),
                         "in KILN_COLLECTIVE_TIMEOUT_MS");
  if (strcmp(f->backend, "reference") != 0 && strcmp(f->backend, "host") != 0 &&
      strcmp(f->backend, "cuda") != 0 && strcmp(f->backend, "best") != 0)
    return KILN_ERR_INVALID("unknown backend '%s' (reference, host, cuda, best)", f->backend);
  if (f->compare && strcmp(f->compare, "reference") != 0)
    return KILN_ERR_INVALID("--compare=%s: only --compare=reference is defined", f->compare);
  if (f->inputs_dir && f->num_inputs)
    return KILN_ERR_INVALID("--inputs=DIR and --input=I:PATH cannot be combined");
  if (f->compile_only && (!strcmp(f->backend, "reference") || f->compare || f->output_dir))
    return KILN_ERR_INVALID(
        "--compile-only needs --backend=host, cuda or best and runs nothing to compare or save");
  return NULL;
}

/* Creates `dir` and its missing parents (like mkdir -p). */
static kiln_status ensure_dir(const char *dir) {
  size_t n = strlen(dir);
  char *path = kiln_malloc(n + 1);
  memcpy(path, dir, n + 1);
  kiln_status s = NULL;
  for (size_t i = 1; i <= n && !s; i++) {
    if (path[i] != '/' && path[i] != 0) continue;
    char saved = path[i];
    path[i] = 0;
    struct stat st;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
      s = kiln_status_make(KILN_PERMISSION_DENIED, "cannot create directory '%s': %s", path,
                           strerror(errno));
    else if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
      s = kiln_status_make(KILN_INVALID_ARGUMENT, "'%s' is not a directory", path);
    path[i] = saved;
  }
  kiln_free(path);
  return s;
}

/* Reads (or, with `write`, writes) the leaves of tuple-shaped argument `l` as
 * <dir>/<prefix>arg<param>.<leaf>.npy. */
static kiln_status tuple_leaves_io(kiln_literal_t *l, const char *dir, const char *prefix,
                                   int param, int *leaf, bool write, kiln_arena_t *arena) {
  for (int i = 0; i < l->num_tuple_elements; i++) {
    kiln_literal_t *e = l->tuple_elements[i];
    if (kiln_shape_is_tuple(e->shape)) {
      KILN_RETURN_IF_ERROR_PLAIN(tuple_leaves_io(e, dir, prefix, param, leaf, write, arena));
      continue;
    }
    int index = (*leaf)++;
    if (!kiln_shape_is_array(e->shape)) continue; /* token leaves carry no data */
    char *path = kiln_arena_printf(arena, "%s/%sarg%d.%d.npy", dir, prefix, param, index);
    if (write) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_npy_write_file(path, e));
    } else {
      kiln_literal_t *r;
      KILN_RETURN_IF_ERROR(kiln_npy_read_file(path, e->shape, arena, &r),
                           "while reading leaf %d of parameter %d", index, param);
      l->tuple_elements[i] = r;
    }
  }
  return NULL;
}

/* Makes argument `i` of `m`: from --input / --inputs if given, else generated. */
static kiln_status make_arg(const run_flags_t *f, const kiln_hlo_module_t *m, int i,
                            const char *prefix, kiln_arena_t *arena, kiln_literal_t **out,
                            const char **source) {
  kiln_fake_args_options_t fo;
  kiln_fake_args_options_init(&fo);
  fo.seed = f->seed;
  const kiln_shape_t *shape = m->entry->parameters[i]->shape;
  const char *path = NULL;
  for (int k = 0; k < f->num_inputs; k++)
    if (f->input_param[k] == i) path = f->input_path[k];
  if (path) {
    if (!kiln_shape_is_array(shape))
      return KILN_ERR_INVALID(
          "--input=%d:%s: parameter %d is not an array; give a tuple's "
          "leaves with --inputs=DIR (arg%d.<leaf>.npy)",
          i, path, i, i);
    *source = path;
    return kiln_npy_read_file(path, shape, arena, out);
  }
  if (f->inputs_dir) {
    if (kiln_shape_is_tuple(shape)) {
      kiln_literal_t *l = kiln_literal_make(arena, kiln_shape_clone(arena, shape));
      if (!l) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cannot allocate parameter %d", i);
      int leaf = 0;
      KILN_RETURN_IF_ERROR_PLAIN(tuple_leaves_io(l, f->inputs_dir, prefix, i, &leaf, false, arena));
      *out = l;
      *source = kiln_arena_printf(arena, "%s/%sarg%d.*.npy", f->inputs_dir, prefix, i);
      return NULL;
    }
    char *p = kiln_arena_printf(arena, "%s/%sarg%d.npy", f->inputs_dir, prefix, i);
    *source = p;
    return kiln_npy_read_file(p, shape, arena, out);
  }
  *source = "generated";
  return kiln_fake_args_make_one(m, &fo, i, arena, out);
}

static kiln_status save_arg(const char *dir, const char *prefix, int i, kiln_literal_t *l,
                            kiln_arena_t *arena) {
  if (kiln_shape_is_tuple(l->shape)) {
    int leaf = 0;
    return tuple_leaves_io(l, dir, prefix, i, &leaf, true, arena);
  }
  if (!kiln_shape_is_array(l->shape)) return NULL;
  return kiln_npy_write_file(kiln_arena_printf(arena, "%s/%sarg%d.npy", dir, prefix, i), l);
}

/* --save=DIR: a replay folder made through the plugin (the module's canonical text compiled,
 * run once on `args`, serialized); DIR/m<index> when index >= 0. */
static kiln_status save_replay(const run_flags_t *f, const kiln_hlo_module_t *m,
                               kiln_literal_t **args, int n, int index) {
  kiln_bench_plugin_t p;
  KILN_RETURN_IF_ERROR(kiln_bench_plugin_open(NULL, &p), "for --save");
  bool cuda = !strcmp(f->backend, "cuda"), best = !strcmp(f->backend, "best");
  kiln_bench_client_options_t o = {.platform = cuda   ? "cuda"
                                               : best ? NULL
                                                      : "cpu",
                                   .command_buffers = f->no_command_buffers ? 0 : -1};
  kiln_bench_client_t c;
  KILN_RETURN_IF_ERROR(kiln_bench_client_create(&p, &o, &c), "for --save");
  char dir[4096];
  if (index >= 0) {
    if (mkdir(f->save_dir, 0777) != 0 && errno != EEXIST)
      return kiln_status_make(KILN_PERMISSION_DENIED, "--save=%s: %s", f->save_dir,
                              strerror(errno));
    snprintf(dir, sizeof dir, "%s/m%d", f->save_dir, index);
  } else {
    snprintf(dir, sizeof dir, "%s", f->save_dir);
  }
  char *text = kiln_hlo_module_to_string(m);
  kiln_status s = kiln_bench_replay_save(&c, dir, m->name ? m->name : "module", text, strlen(text),
                                         "hlo", args, n);
  kiln_free(text);
  kiln_bench_client_destroy(&c);
  if (!s) printf("saved a replay folder: %s (replay it with kiln-replay %s)\n", dir, dir);
  return s ? kiln_status_annotate(s, "while saving the replay folder %s", dir) : NULL;
}

/* What a direct device run takes from the flags. */
static void device_options(const run_flags_t *f, kiln_device_run_options_t *o) {
  memset(o, 0, sizeof *o);
  o->device = f->device;
  o->repeat = f->repeat;
  o->max_while_iterations = f->max_while_iterations;
  o->rng_seed = f->seed;
  o->no_command_buffers = f->no_command_buffers;
  o->strict_precision = f->strict_precision;
  o->print_thunks = f->thunks;
  o->print_runs = f->repeat > 1;
  o->first_run_result = true; /* what the evaluator's one run computes */
  o->compile_only = f->compile_only;
  o->profile = f->profile;
  o->profile_rows = (int)f->profile_rows;
  o->combine_threshold_bytes = f->combine_threshold_bytes;
  o->collective_timeout_ms = f->collective_timeout_ms;
}

typedef struct run_times {
  double verify, inputs, eval_min, eval_sum, outputs;
  double compile;
} run_times_t;

/* The times of a run through the plugin. */
static void plugin_times(const kiln_pjrt_run_report_t *pr, run_times_t *t) {
  t->compile = pr->compile_ms;
  t->eval_min = pr->run_min_ms;
  t->eval_sum = pr->run_mean_ms * (double)pr->runs;
}

/* " (N small tier)" on a host device: the kernels whose code came from the host JIT's small
 * tier, as the compile counted them (a kernel found in the kernel cache counts with the tier
 * it was compiled on); nothing on a CUDA device, which has one tier. */
static void small_tier_note(const kiln_device_t *d, const kiln_compile_stats_t *cs, char *out,
                            size_t n) {
  out[0] = 0;
  if (d->kind == KILN_DEVICE_HOST)
    snprintf(out, n, " (%d small tier)", cs->emit.small_tier_kernels);
}

/* --backend=host|cuda|best: compile, load and run on the device (--repeat times). */
static kiln_status run_on_device(const run_flags_t *f, const kiln_hlo_module_t *m,
                                 kiln_literal_t **args, int n, kiln_arena_t *arena,
                                 kiln_literal_t **result, run_times_t *t) {
  if (f->plugin) {
    kiln_pjrt_run_options_t po = {.repeat = f->repeat,
                                  .print_runs = f->repeat > 1,
                                  .first_run_result = true,
                                  .combine_threshold_bytes = f->combine_threshold_bytes};
    kiln_pjrt_run_report_t pr;
    kiln_status s = kiln_pjrt_run_module(f->plugin, m, args, n, &po, arena, result, &pr);
    if (s) return kiln_status_annotate(s, "while running through the PJRT plugin");
    plugin_times(&pr, t);
    printf(
        "ran through the plugin: compiled in %.1f ms, first run %.1f ms (generates the "
        "kernels), inputs uploaded in %.1f ms\n",
        pr.compile_ms, pr.first_run_ms, pr.upload_ms);
    if (f->repeat > 1)
      printf("runs: %lld, min %.3f ms, mean %.3f ms\n", (long long)pr.runs, pr.run_min_ms,
             pr.run_mean_ms);
    return NULL;
  }
  kiln_device_run_options_t o;
  device_options(f, &o);
  kiln_device_run_report_t rep;
  kiln_status s = kiln_device_run_module(m, args, n, &o, arena, result, &rep);
  if (s) return kiln_status_annotate(s, "while running on %s", f->device->name);
  t->compile = rep.compile_ms;
  t->eval_min = rep.run_min_ms;
  t->eval_sum = rep.run_mean_ms * (double)rep.runs;
  char tier[48] = "";
  small_tier_note(f->device, &rep.compile, tier, sizeof tier);
  printf(
      "ran on %s: compiled in %.1f ms (passes %.1f, kernels %d from %d fusions%s, codegen "
      "%.1f, backend %.1f; %zu command buffers), loaded in %.1f ms\n",
      f->device->name, rep.compile_ms, rep.compile.passes_ms, rep.compile.emit.kernels,
      rep.compile.emit.fusions, tier, rep.compile.emit.codegen_ms, rep.compile.emit.backend_ms,
      rep.compile.command_buffers, rep.load_ms);
  if (f->timings) /* what a cold compile costs in all: wall and CPU until the executable can run */
    printf("timings: compile + load %.3f ms, CPU %.3f ms (all threads)\n",
           rep.compile_ms + rep.load_ms, rep.compile_load_cpu_ms);
  if (rep.compile.command_buffer_custom_calls || rep.compile.split_custom_calls)
    printf("custom calls: %zu inside command buffers, %zu outside\n",
           rep.compile.command_buffer_custom_calls, rep.compile.split_custom_calls);
  if (f->repeat > 1)
    printf("runs: %lld, min %.3f ms, mean %.3f ms\n", (long long)rep.runs, rep.run_min_ms,
           rep.run_mean_ms);
  return NULL;
}

/* --fusions: compile each fusion of `m` for the host, run it and compare with the
 * evaluator; one line per fusion. A numerical mismatch is an error. */
static kiln_status run_fusions(const run_flags_t *f, kiln_hlo_module_t *m) {
  /* A whole module that holds no fusion yet goes through the optimization pipeline
   * first (simplification, layouts, fusion, ...), as the compiler would. */
  bool has_fusion = false;
  for (size_t i = 0; m->entry && i < m->entry->instructions.len; i++)
    has_fusion |= m->entry->instructions.data[i]->opcode == KILN_OP_FUSION;
  if (!has_fusion && !f->bare) {
    double t0 = kiln_clock_ms();
    KILN_RETURN_IF_ERROR(kiln_pipeline_run(m, NULL), "while running the optimization pipeline");
    if (f->timings) printf("timings: pipeline %.3f ms\n", kiln_clock_ms() - t0);
  }
  const kiln_hlo_computation_t **comps = NULL;
  int n = 0;
  kiln_runner_collect_fusions(m, &comps, &n);
  if (n == 0) {
    kiln_free(comps);
    return KILN_ERR_INVALID("module '%s' has no fusion to compile", m->name);
  }
  kiln_status first = NULL;
  for (int i = 0; i < n; i++) {
    kiln_runner_options_t o;
    kiln_runner_options_init(&o);
    o.seed = f->seed;
    o.check_ptx = true;
    kiln_runner_report_t r;
    memset(&r, 0, sizeof r);
    kiln_status s = kiln_runner_check(comps[i], &o, &r);
    if (s) {
      printf("fusion %s: %s: %s\n", comps[i]->name, kiln_status_code_name(kiln_status_code(s)),
             kiln_status_message(s));
      first = kiln_status_join(first, s);
      continue;
    }
    printf(
        "fusion %s: emitter %s, %lld elements, max %lld ulp (tolerance %lld), max abs err "
        "%.3g, %s; ptxas: %s\n",
        comps[i]->name, kiln_codegen_emitter_name(r.emitter), (long long)r.elements,
        (long long)r.max_ulp, (long long)r.tolerance, r.max_abs_err,
        r.mismatches ? "MISMATCH" : "matches the evaluator",
        r.ptx_checked ? (r.ptx_ok ? "accepted" : r.ptx_note) : r.ptx_note);
    if (f->timings)
      printf("timings: emit %.3f ms, pipeline %.3f ms, host compile %.3f ms, run %.3f ms, "
             "eval %.3f ms\n",
             r.emit_ms, r.pipeline_ms, r.host_compile_ms, r.run_ms, r.eval_ms);
    if (r.mismatches)
      first = kiln_status_join(first, kiln_status_make(KILN_INTERNAL,
                                                       "fusion %s: %lld elements differ; first: %s",
                                                       comps[i]->name, (long long)r.mismatches,
                                                       r.first_mismatch));
  }
  kiln_free(comps);
  return first;
}

/* Every participant's outputs, labelled rRpP.outI (and saved with --output). */
static kiln_status print_participants(const run_flags_t *f, kiln_literal_t **results, int np,
                                      int partitions, const char *prefix, kiln_arena_t *out) {
  kiln_status s = NULL;
  kiln_strbuf_t b = {0};
  for (int i = 0; i < np && !s; i++) {
    if (!results[i]) continue; /* another MPI process's participant */
    int leaves = kiln_run_report_num_leaves(results[i]);
    for (int k = 0; k < leaves && !s; k++) {
      const kiln_literal_t *leaf = kiln_run_report_leaf(results[i], k);
      char label[48];
      snprintf(label, sizeof label, "r%dp%d.out%d", i / partitions, i % partitions, k);
      kiln_run_report_print_leaf(&b, label, leaf, (int)f->values);
      if (f->output_dir && leaf && kiln_shape_is_array(leaf->shape))
        s = kiln_npy_write_file(kiln_arena_printf(out, "%s/%s%s.npy", f->output_dir, prefix, label),
                                leaf);
    }
  }
  fputs(kiln_strbuf_cstr(&b), stdout);
  kiln_strbuf_free(&b);
  return s;
}

/* Whether generated inputs give each participant its share of one ragged-all-to-all exchange
 * (kiln_fake_args_make_participant) instead of the same inputs. */
static bool ragged_shares(const run_flags_t *f, const kiln_hlo_module_t *m) {
  return !f->num_inputs && !f->inputs_dir && kiln_fake_args_per_participant(m);
}

/* How the participants' inputs are made, for the line each multi-device run prints. */
static const char *inputs_note(const run_flags_t *f, const kiln_hlo_module_t *m) {
  if (ragged_shares(f, m)) return "each its share of one generated ragged exchange";
  return f->participant_seeds ? "inputs of their own" : "the same inputs on each";
}

/* Every participant's inputs: `args`, or with --participant-seeds participant p's generated
 * from seed + p (in `arena`); generated inputs of a module whose ragged-all-to-all takes its
 * offsets and sizes from parameters hold one valid exchange, each participant its share
 * (kiln_fake_args_make_participant). */
static kiln_status participant_args(const run_flags_t *f, const kiln_hlo_module_t *m, int n,
                                    kiln_literal_t **args, int replicas, int partitions,
                                    const char *prefix, kiln_arena_t *arena,
                                    kiln_literal_t *const ***out) {
  int np = replicas * partitions;
  kiln_literal_t ***per = kiln_arena_alloc(arena, sizeof *per * (size_t)np);
  *out = (kiln_literal_t *const **)per;
  bool ragged = ragged_shares(f, m);
  /* Every participant's own inputs, beside the shared set already made. */
  if (ragged || f->participant_seeds)
    KILN_RETURN_IF_ERROR_PLAIN(kiln_fake_args_check_memory(m, np + 1));
  if (ragged)
    printf(
        "ragged-all-to-all offsets and sizes: one generated exchange, each participant its "
        "share (seed %" PRIu64 " on every participant)\n",
        f->seed);
  for (int p = 0; p < np; p++) {
    per[p] = args;
    if (ragged) {
      kiln_fake_args_options_t fo;
      kiln_fake_args_options_init(&fo);
      fo.seed = f->seed; /* one exchange: the same seed on every participant */
      int got = 0;
      KILN_RETURN_IF_ERROR(
          kiln_fake_args_make_participant(m, &fo, replicas, partitions, p, arena, &per[p], &got),
          "while making the inputs of participant %d", p);
      continue;
    }
    if (!f->participant_seeds || n == 0) continue;
    run_flags_t g = *f;
    g.seed = f->seed + (uint64_t)p;
    per[p] = kiln_arena_alloc(arena, sizeof(kiln_literal_t *) * (size_t)n);
    for (int i = 0; i < n; i++) {
      const char *source = "";
      KILN_RETURN_IF_ERROR(make_arg(&g, m, i, prefix, arena, &per[p][i], &source),
                           "while making parameter %d of participant %d", i, p);
    }
  }
  if (f->participant_seeds)
    printf("participant p's generated inputs: seed %" PRIu64 " + p\n", f->seed);
  return KILN_STATUS_OK;
}

/* The reference on a multi-device module: every participant of the world its collectives
 * need gets the same inputs (or its own: --participant-seeds); outputs print (and save) per
 * participant as rRpP.outI. */
static kiln_status run_reference_spmd(const run_flags_t *f, const kiln_hlo_module_t *m,
                                      const kiln_eval_options_t *eo, int n, kiln_literal_t **args,
                                      int replicas, int partitions, const char *prefix) {
  int np = replicas * partitions;
  printf("participants: %d replicas x %d partitions, %s\n", replicas, partitions,
         inputs_note(f, m));
  kiln_literal_t **results = kiln_calloc((size_t)np, sizeof *results);
  kiln_eval_spmd_options_t o = {
      .num_replicas = replicas, .num_partitions = partitions, .base = *eo};
  kiln_arena_t out;
  kiln_arena_init(&out);
  kiln_literal_t *const **per = NULL;
  kiln_status s = participant_args(f, m, n, args, replicas, partitions, prefix, &out, &per);
  if (!s) s = kiln_eval_module_spmd(m, &o, n, per, &out, results);
  if (s) s = kiln_status_annotate(s, "while evaluating with the reference backend");
  if (!s) s = print_participants(f, results, np, partitions, prefix, &out);
  kiln_arena_destroy(&out);
  kiln_free(results);
  return s;
}

/* The world a multi-device module runs in on host devices: the module's (replicas x
 * partitions); --host-devices=N must match it, or make a module that names no world N
 * replicas. */
static kiln_status host_world(const run_flags_t *f, const kiln_hlo_module_t *m, int *replicas,
                              int *partitions) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_spmd_world_size(m, replicas, partitions));
  int64_t n = (int64_t)*replicas * *partitions;
  if (!f->host_devices || f->host_devices == n) return NULL;
  if (n == 1) {
    *replicas = (int)f->host_devices;
    return NULL;
  }
  return KILN_ERR_INVALID("--host-devices=%" PRId64
                          ": module '%s' runs on %d replicas x %d "
                          "partitions = %" PRId64 " devices",
                          f->host_devices, m->name, *replicas, *partitions, n);
}

/* A multi-device module on N host devices (--direct --backend=host): every participant gets
 * the same inputs; outputs print per participant, compared with the SPMD evaluator with
 * --compare=reference. */
static kiln_status run_spmd_on_device(const run_flags_t *f, const kiln_hlo_module_t *m,
                                      const kiln_eval_options_t *eo, kiln_literal_t **args, int n,
                                      int replicas, int partitions, const char *prefix,
                                      run_times_t *t) {
  int np = replicas * partitions;
  printf("%s devices: %d (%d replicas x %d partitions), %s\n",
         strcmp(f->backend, "cuda") == 0 ? "CUDA" : "host", np, replicas, partitions,
         inputs_note(f, m));
  kiln_device_run_options_t o;
  device_options(f, &o);
  kiln_arena_t out;
  kiln_arena_init(&out);
  kiln_literal_t *const **per = NULL;
  kiln_status ps = participant_args(f, m, n, args, replicas, partitions, prefix, &out, &per);
  if (ps) {
    kiln_arena_destroy(&out);
    return ps;
  }
  o.participant_args = per;
  o.mpi = f->mpi_world;
  if (f->mpi_world)
    printf("MPI: process %d of %d runs participants %d..%d\n", kiln_mpi_rank(f->mpi_world),
           kiln_mpi_size(f->mpi_world),
           kiln_mpi_rank(f->mpi_world) * np / kiln_mpi_size(f->mpi_world),
           (kiln_mpi_rank(f->mpi_world) + 1) * np / kiln_mpi_size(f->mpi_world) - 1);
  kiln_literal_t **got = kiln_calloc((size_t)np, sizeof *got);
  kiln_literal_t **want = kiln_calloc((size_t)np, sizeof *want);
  kiln_device_run_report_t rep;
  kiln_status s = NULL;
  if (f->plugin && f->mpi) {
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
    int r = rank ? atoi(rank) : 0, procs = size && atoi(size) > 0 ? atoi(size) : 1;
    printf("MPI: process %d of %d runs participants %d..%d through the plugin\n", r, procs,
           r * np / procs, (r + 1) * np / procs - 1);
  }
  if (f->plugin) {
    /* the plugin path: Compile with num_replicas / num_partitions, one Execute on np devices */
    kiln_pjrt_run_options_t po = {.repeat = f->repeat,
                                  .print_runs = f->repeat > 1,
                                  .first_run_result = true,
                                  .participant_args = per,
                                  .combine_threshold_bytes = f->combine_threshold_bytes};
    kiln_pjrt_run_report_t pr;
    s = kiln_pjrt_run_module_spmd(f->plugin, m, args, n, replicas, partitions, &po, &out, got, &pr);
    if (s) s = kiln_status_annotate(s, "while running through the PJRT plugin on %d devices", np);
    if (!s) {
      plugin_times(&pr, t);
      printf(
          "ran through the plugin on %d %s devices: compiled in %.1f ms, first run %.1f ms "
          "(generates the kernels), run %.3f ms\n",
          np, strcmp(f->backend, "cuda") == 0 ? "CUDA" : "host", pr.compile_ms, pr.first_run_ms,
          pr.run_min_ms);
    }
  } else {
    s = kiln_device_run_module_spmd(m, args, n, replicas, partitions, &o, &out, got, &rep);
    if (s) s = kiln_status_annotate(s, "while running on %d host devices", np);
  }
  if (!s && !f->plugin) {
    t->compile = rep.compile_ms;
    t->eval_min = rep.run_min_ms;
    t->eval_sum = rep.run_mean_ms * (double)rep.runs;
    printf(
        "ran on %d host devices: compiled in %.1f ms (%d collective thunks; kernels %d, %d "
        "small tier), run %.3f ms\n",
        np, rep.compile_ms, rep.compile.emit.collectives, rep.compile.emit.kernels,
        rep.compile.emit.small_tier_kernels, rep.run_min_ms);
  }
  if (!s && f->compare) {
    kiln_eval_spmd_options_t eso = {
        .num_replicas = replicas, .num_partitions = partitions, .base = *eo};
    s = kiln_eval_module_spmd(m, &eso, n, per, &out, want);
    if (s) s = kiln_status_annotate(s, "while evaluating with the reference backend");
    int bad = 0;
    for (int i = 0; i < np && !s; i++) {
      if (!got[i]) continue; /* another MPI process's participant */
      kiln_compare_report_t cr;
      bool ok = kiln_compare_literals(want[i], got[i], NULL, &cr);
      printf("r%dp%d: compare with reference: %lld elements, max abs err %.3g: %s\n",
             i / partitions, i % partitions, (long long)cr.elements, cr.max_abs_err,
             ok ? "matches the reference" : "MISMATCH");
      if (!ok && !bad++)
        s = kiln_status_make(KILN_INTERNAL,
                             "replica %d partition %d: %lld elements differ from the reference; "
                             "first: %s",
                             i / partitions, i % partitions, (long long)cr.mismatches, cr.first);
    }
  }
  if (!s) s = print_participants(f, got, np, partitions, prefix, &out);
  kiln_free(want);
  kiln_free(got);
  kiln_arena_destroy(&out);
  return s;
}

static kiln_status run_module(const run_flags_t *f, const kiln_hlo_module_t *m, int index,
                              bool several, run_times_t *t) {
  memset(t, 0, sizeof *t);
  char prefix[32] = "";
  if (several) snprintf(prefix, sizeof prefix, "m%d.", index);
  if (several || index > 0) printf("module %d: %s\n", index, m->name ? m->name : "?");
  if (!m->entry) return KILN_ERR_INVALID("module '%s' has no entry computation", m->name);

  double t0 = kiln_clock_ms();
  if (f->verify) KILN_RETURN_IF_ERROR(kiln_hlo_module_verify(m), "while verifying");
  t->verify = kiln_clock_ms() - t0;
  if (f->fusions) return run_fusions(f, (kiln_hlo_module_t *)m);

  kiln_arena_t args_arena;
  kiln_arena_init(&args_arena);
  kiln_status s = NULL;
  int n = m->entry->num_parameters;
  kiln_literal_t **args = NULL;
  t0 = kiln_clock_ms();
  if (n > 0) args = kiln_arena_alloc(&args_arena, sizeof(*args) * (size_t)n);
  for (int k = 0; k < f->num_inputs && !s; k++)
    if (f->input_param[k] >= n)
      s = KILN_ERR_INVALID("--input=%d: the entry computation has %d parameters", f->input_param[k],
                           n);
  /* All of them at once (each alone is checked as it is made): inputs that cannot fit would
   * otherwise be made until the kernel's out-of-memory killer ends the run. */
  if (!s) s = kiln_fake_args_check_memory(m, 1);
  for (int i = 0; i < n && !s; i++) {
    const char *source = "";
    s = make_arg(f, m, i, prefix, &args_arena, &args[i], &source);
    if (s) {
      s = kiln_status_annotate(s, "while making parameter %d", i);
      break;
    }
    char *shape = kiln_shape_to_string(args[i]->shape, false);
    printf("arg%d %s: %s\n", i, shape, source);
    kiln_free(shape);
    if (f->save_inputs_dir) s = save_arg(f->save_inputs_dir, prefix, i, args[i], &args_arena);
  }
  t->inputs = kiln_clock_ms() - t0;
  if (f->save_dir && !s) s = save_replay(f, m, args, n, several ? index : -1);

  kiln_eval_options_t eo = {0};
  /* rng draws from the executable's generator state: the plugin's start at XLA's initial
   * value (PJRT's compile options carry no seed), --direct runs' at it offset by --seed. */
  eo.rng_seed = f->plugin ? 0 : f->seed;
  eo.max_while_iterations = f->max_while_iterations;
  kiln_arena_t out_arena;
  kiln_arena_init(&out_arena);
  kiln_literal_t *result = NULL;
  int spmd_r = 1, spmd_p = 1;
  /* Multi-device modules run on the plugin's host devices or its GPUs (collectives: NCCL; the
   * module's own world there, --host-devices is for host devices). */
  bool plugin_cuda = f->plugin && strcmp(f->backend, "cuda") == 0;
  bool plugin_host = f->plugin && (strcmp(f->backend, "host") == 0 || plugin_cuda);
  if (plugin_cuda && !s)
    s = kiln_eval_spmd_world_size(m, &spmd_r, &spmd_p);
  else if (((f->device && f->device->kind == KILN_DEVICE_HOST) || plugin_host) && !s)
    s = host_world(f, m, &spmd_r, &spmd_p);
  if ((f->device || plugin_host) && !s && spmd_r * spmd_p > 1) {
    s = run_spmd_on_device(f, m, &eo, args, n, spmd_r, spmd_p, prefix, t);
    kiln_arena_destroy(&out_arena);
    kiln_arena_destroy(&args_arena);
    return s;
  }
  if ((f->device || f->plugin) && !s) {
    s = run_on_device(f, m, args, n, &out_arena, &result, t);
    if (!s && f->compare) {
      kiln_literal_t *want = NULL;
      t0 = kiln_clock_ms();
      s = kiln_eval_module(m, &eo, n, args, &out_arena, &want);
      if (s) s = kiln_status_annotate(s, "while evaluating with the reference backend");
      if (!s) {
        kiln_compare_report_t cr;
        bool ok = kiln_compare_literals(want, result, NULL, &cr);
        printf("compare with reference: %lld elements, max abs err %.3g, max rel err %.3g: %s\n",
               (long long)cr.elements, cr.max_abs_err, cr.max_rel_err,
               ok ? "matches the reference" : "MISMATCH");
        if (!ok)
          s = kiln_status_make(KILN_INTERNAL, "%lld elements differ from the reference; first: %s",
                               (long long)cr.mismatches, cr.first);
      }
    }
  }
  int replicas = 1, partitions = 1;
  if (!s && !f->device && !f->plugin &&
      !(s = kiln_eval_spmd_world_size(m, &replicas, &partitions)) && replicas * partitions > 1) {
    s = run_reference_spmd(f, m, &eo, n, args, replicas, partitions, prefix);
    kiln_arena_destroy(&out_arena);
    kiln_arena_destroy(&args_arena);
    return s;
  }
  for (int64_t r = 0; r < f->repeat && !s && !f->device && !f->plugin; r++) {
    kiln_arena_destroy(&out_arena);
    kiln_arena_init(&out_arena);
    t0 = kiln_clock_ms();
    s = kiln_eval_module(m, &eo, n, args, &out_arena, &result);
    double dt = kiln_clock_ms() - t0;
    if (r == 0 || dt < t->eval_min) t->eval_min = dt;
    t->eval_sum += dt;
    if (s) s = kiln_status_annotate(s, "while evaluating with the reference backend");
  }

  if (!s) {
    t0 = kiln_clock_ms();
    kiln_strbuf_t b = {0};
    int leaves = kiln_run_report_num_leaves(result);
    for (int i = 0; i < leaves && !s; i++) {
      const kiln_literal_t *leaf = kiln_run_report_leaf(result, i);
      char label[32];
      snprintf(label, sizeof label, "out%d", i);
      kiln_run_report_print_leaf(&b, label, leaf, (int)f->values);
      if (f->output_dir && leaf && kiln_shape_is_array(leaf->shape))
        s = kiln_npy_write_file(
            kiln_arena_printf(&out_arena, "%s/%sout%d.npy", f->output_dir, prefix, i), leaf);
    }
    fputs(kiln_strbuf_cstr(&b), stdout);
    kiln_strbuf_free(&b);
    t->outputs = kiln_clock_ms() - t0;
  }
  kiln_arena_destroy(&out_arena);
  kiln_arena_destroy(&args_arena);
  return s;
}

/* A StableHLO test file: run every function holding check ops and apply the checks. */
static kiln_status run_stablehlo_checks(const run_flags_t *f) {
  kiln_stablehlo_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = f->device;
  o.print = true;
  o.constants_as_params = true;
  o.max_while_iterations = f->max_while_iterations;
  kiln_stablehlo_run_stats_t st;
  memset(&st, 0, sizeof st);
  kiln_status s = kiln_stablehlo_run_file(f->file, &o, &st);
  if (!s) {
    printf("functions: %" PRId64 " passed, %" PRId64 " failed; checks: %" PRId64 " passed, %" PRId64
           " failed\n",
           st.passed, st.functions - st.passed, st.checks_passed, st.checks_failed);
    if (st.functions != st.passed)
      s = kiln_status_make(KILN_FAILED_PRECONDITION, "%" PRId64 " of %" PRId64 " functions failed",
                           st.functions - st.passed, st.functions);
  }
  kiln_stablehlo_run_stats_free(&st);
  return s;
}

/* --backend=host|cuda|best without --direct: the plugin's client, on the platform the backend
 * names (best: the plugin's own choice, CUDA when it can). */
static kiln_status open_plugin(run_flags_t *f) {
  if (f->strict_precision) {
    const char *old = getenv("XLA_FLAGS");
    const char *sep = old && *old ? " " : "";
    int len = snprintf(NULL, 0, "%s%s--xla_allow_excess_precision=false", old ? old : "", sep);
    char *flags = kiln_malloc((size_t)len + 1);
    snprintf(flags, (size_t)len + 1, "%s%s--xla_allow_excess_precision=false", old ? old : "", sep);
    setenv("XLA_FLAGS", flags, 1);
    kiln_free(flags);
  }
  if (f->no_command_buffers) setenv("KILN_DISABLE_COMMAND_BUFFERS", "1", 1);
  kiln_pjrt_runner_options_t o = {0};
  if (strcmp(f->backend, "host") == 0) o.platform = "cpu";
  if (strcmp(f->backend, "host") == 0) o.num_devices = f->host_devices;
  if (strcmp(f->backend, "cuda") == 0) o.platform = "cuda";
  o.collective_timeout_ms = f->collective_timeout_ms;
  if (f->mpi) {
    /* --host-devices=N is the world's: each of the P processes holds N / P */
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    int procs = size ? atoi(size) : 1;
    if (procs < 1) procs = 1;
    if (o.num_devices % procs)
      return KILN_ERR_INVALID(
          "--mpi through the plugin: --host-devices=%lld (the world's) must "
          "split over the %d processes",
          (long long)o.num_devices, procs);
    o.num_devices /= procs; /* 0 (not given): the plugin's default, 1 per process */
    o.mpi = true;
  }
  return kiln_pjrt_runner_open(&o, &f->plugin);
}

static kiln_status run(run_flags_t *f) {
  if (f->compare && strcmp(f->backend, "reference") == 0)
    printf("note: --compare=reference compares a compiled backend with the evaluator; with "
           "--backend=reference there is nothing to compare\n");
  if (strcmp(f->backend, "reference") != 0 && !f->fusions) {
    /* The plugin takes --strict-precision and --no-command-buffers through the environment
     * variables its compiler and runtime read; what it cannot take selects the direct path. */
    /* StableHLO test files with check ops run their functions through the runtime directly
     * (the check runner compiles each function with its checked values as outputs). */
    bool mlir_checks = false;
    if (!f->direct && kiln_stablehlo_is_mlir_path(f->file))
      kiln_status_free(kiln_stablehlo_file_has_checks(f->file, &mlir_checks));
    if (mlir_checks) {
      printf("note: check ops run on the runtime directly, not through the plugin\n");
      f->direct = true;
    }
    if (!f->direct && (f->thunks || f->max_while_iterations || f->compile_only || f->profile)) {
      printf("note: %s runs on the runtime directly, not through the plugin\n",
             f->thunks         ? "--thunks"
             : f->compile_only ? "--compile-only"
             : f->profile      ? "--profile"
                               : "--max-while-iterations");
      f->direct = true;
    }
    /* Across processes (--mpi, or started by mpirun): through the plugin's client across
     * processes (its option mpi), or with --direct the runtime's MPI world. */
    if (f->mpi || (kiln_pjrt_mpi_launched() && strcmp(f->backend, "host") == 0)) {
      if (strcmp(f->backend, "host") != 0)
        return KILN_ERR_INVALID("--mpi runs host devices: use --backend=host");
      f->mpi = true;
      if (f->direct)
        KILN_RETURN_IF_ERROR(kiln_mpi_get(&f->mpi_world), "while starting MPI (--mpi)");
    }
    if (f->direct) {
      KILN_RETURN_IF_ERROR(kiln_device_create(f->backend, &f->device),
                           "while creating the '%s' device", f->backend);
      printf("device: %s (%s)\n", f->device->name, kiln_device_kind_name(f->device->kind));
    } else {
      KILN_RETURN_IF_ERROR_PLAIN(open_plugin(f));
      printf("device: %s\n", kiln_pjrt_runner_description(f->plugin));
    }
  }
  if (f->mpi_world)
    printf("MPI: process %d of %d\n", kiln_mpi_rank(f->mpi_world), kiln_mpi_size(f->mpi_world));
  if (f->output_dir) KILN_RETURN_IF_ERROR_PLAIN(ensure_dir(f->output_dir));
  if (f->save_inputs_dir) KILN_RETURN_IF_ERROR_PLAIN(ensure_dir(f->save_inputs_dir));

  /* Modules, or bare computations as one module: kiln_hlo_file_load, as the corpus tests
   * load them. */
  kiln_hlo_file_t *file = NULL;
  kiln_status s = NULL;
  if (kiln_stablehlo_is_mlir_path(f->file)) {
    bool checks = false;
    s = kiln_stablehlo_file_has_checks(f->file, &checks);
    if (!s && checks) s = run_stablehlo_checks(f);
    if (s || checks) {
      if (f->device) kiln_device_destroy(f->device);
      f->device = NULL;
      return s;
    }
    s = kiln_stablehlo_file_load(f->file, &file);
  } else {
    s = kiln_hlo_file_load(f->file, &file);
  }
  if (s) {
    if (f->device) kiln_device_destroy(f->device);
    f->device = NULL;
    return s;
  }
  f->bare = file->bare;
  kiln_hlo_module_t **mods = file->modules;
  int count = file->num_modules;
  double parse_ms = file->parse_seconds * 1e3;
  if (f->module >= count)
    s = KILN_ERR_INVALID("--module=%d: '%s' holds %d module%s", f->module, f->file, count,
                         count == 1 ? "" : "s");
  bool several = f->module < 0 && count > 1;
  if (f->timings)
    printf("timings: parse %.3f ms (%d module%s)\n", parse_ms, count, count == 1 ? "" : "s");
  /* With several modules, a failing one is reported and the others still run; the
   * first failure decides the exit status. */
  int failed = 0;
  kiln_status first = NULL;
  for (int i = 0; i < count && !s; i++) {
    if (f->module >= 0 && i != f->module) continue;
    run_times_t t;
    kiln_status ms = run_module(f, mods[i], i, several, &t);
    if (ms && several) {
      ms = kiln_status_annotate(ms, "in module %d", i);
      fflush(stdout);
      fprintf(stderr, "kiln-run: module %d: %s: %s\n", i,
              kiln_status_code_name(kiln_status_code(ms)), kiln_status_message(ms));
      failed++;
      if (!first)
        first = ms;
      else
        kiln_status_free(ms);
      continue;
    }
    s = ms;
    if (!s && f->timings && !f->fusions) {
      printf("timings: ");
      if (f->device || f->plugin) printf("compile %.3f ms, ", t.compile);
      printf("verify %.3f ms, inputs %.3f ms, %s %.3f ms", t.verify, t.inputs,
             f->device || f->plugin ? "run" : "eval", t.eval_min);
      if (f->repeat > 1)
        printf(" (min of %" PRId64 "; mean %.3f ms)", f->repeat, t.eval_sum / (double)f->repeat);
      printf(", outputs %.3f ms\n", t.outputs);
    }
  }
  if (first && !s) {
    s = kiln_status_annotate(first, "%d of %d modules failed", failed, count);
  } else if (first) {
    kiln_status_free(first);
  }
  kiln_hlo_file_free(file);
  if (f->device) kiln_device_destroy(f->device);
  f->device = NULL;
  kiln_pjrt_runner_close(f->plugin);
  f->plugin = NULL;
  return s;
}

int main(int argc, char **argv) {
  run_flags_t f;
  bool help;
  kiln_status s = parse_flags(argc, argv, &f, &help);
  if (help) {
    fputs(kUsage, stdout);
    return 0;
  }
  if (!s) s = run(&f);
  int rc = s ? 1 : 0;
  if (s) {
    fflush(stdout);
    fprintf(stderr, "kiln-run: %s: %s\n", kiln_status_code_name(kiln_status_code(s)),
            kiln_status_message(s));
    kiln_status_free(s);
  }
  fflush(stdout);
  kiln_mpi_finalize();
  return rc;
}
