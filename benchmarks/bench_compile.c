/* Compile latency of whole modules on the host (kiln_compile_module: passes, buffer
 * assignment, kernel codegen, LLVM), per module:
 *
 *   cold      an empty kernel cache: a fresh cache folder for each module (DIR/m<i>: modules
 *             sharing kernels do not hit each other's) and the in-memory cache cleared;
 *   warm      compiled again in the same process (in-memory kernel cache);
 *   disk-k    compiled once more in a fresh process (this program re-executed with
 *             --child), whose memory cache is empty: kernels come from the disk cache, the
 *             passes and thunk emission run (the path without the executable cache);
 *   disk      the same with the whole-executable cache (compiler/thunks/executable_cache.h),
 *             which the cold compile filled: no pass, no codegen, the objects linked.
 *
 * Prints each module's three times, the totals, the slowest ten cold modules, and the ratio
 * of the cold total to a baseline given with --baseline-ms (the cold total of another build
 * measured with this tool), plus --pipelines: compile time and run time of the modules'
 * kernels under kiln's default (O3 with the small tier for small kernels) and under each LLVM
 * pipeline candidate set for every kernel ($KILN_HOST_LLVM_PIPELINE).
 *
 * Usage: bench_compile [--all] [--corpus DIR] [--baseline-ms X] [--pipelines] [--repeat N]
 *                      [--list FILE]
 *   default: a quick subset (the cpu benchmark modules named below and examples/gelu.hlo);
 *   --all: every whole module of the corpus (xla/ and real/); modules kiln cannot compile
 *   for the host (custom calls, collectives, ...) are counted and skipped;
 *   --list FILE: also writes the modules that compiled, one "path<TAB>index" line each (the
 *   selection scripts/compile-vs-baseline.sh times with two kiln-run builds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "base/str.h"
#include "base/vec.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/thunks/compile.h"
#include "runtime/host/host_device.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "plugin/env_options.h"

static const char *const kQuick[] = {
    "xla/xla__backends__cpu__benchmarks__hlo__layer_norm_1x4096x768_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__argsort_axis_1024x512_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__mha_block_1x12x128x64_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__sum_axis_1x4096x1024_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__mean_axis_1x4096x1024_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__topk_logits_k10_1x50000_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__in_place_dynamic_update_slice_fusion.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__dlrm_keras_jax_f32_train_step.hlo",
    NULL};

typedef struct entry {
  char *path;
  int index;
  char *label;
  double cold, cold_cpu, warm, disk, disk_kernels, passes;
  int hit;                         /* the disk column hit the executable cache */
  double key_ms, read_ms, load_ms; /* ... its key, read and load (JIT link) times */
  int kernels;
  bool ok;
} entry_t;
typedef KILN_VEC(entry_t) entry_vec_t;

static int cmp_cold_desc(const void *a, const void *b) {
  const entry_t *x = *(const entry_t *const *)a, *y = *(const entry_t *const *)b;
  return x->cold < y->cold ? 1 : x->cold > y->cold ? -1 : 0;
}

static int cmp_disk_desc(const void *a, const void *b) {
  const entry_t *x = *(const entry_t *const *)a, *y = *(const entry_t *const *)b;
  return x->disk < y->disk ? 1 : x->disk > y->disk ? -1 : 0;
}

/* Compiles module `index` of `path` once with the kernel cache in `dir`; *ms is the time of
 * kiln_compile_module alone (parsing is not counted). */
static kiln_status compile_once(const char *path, int index, const char *dir, bool exec_cache,
                                double *ms, double *cpu, double *passes_ms, int *kernels,
                                kiln_compile_stats_t *stats) {
  kiln_hlo_file_t *f = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_file_load(path, &f));
  kiln_status s = NULL;
  if (index >= f->num_modules) s = KILN_ERR_INVALID("%s has no module %d", path, index);
  kiln_executable_desc_t *d = NULL;
  kiln_compile_stats_t st;
  memset(&st, 0, sizeof(st));
  if (!s) {
    kiln_compile_options_t o = {0};
    o.emit.target = KILN_TARGET_HOST;
    o.emit.kernel_cache_dir = dir;
    o.emit.dump_dir = "";
    if (exec_cache) o.executable_cache_dir = dir;
    kiln_pass_options_t env_passes;
    kiln_pjrt_compile_options_from_env(&o, &env_passes); /* --pipelines: KILN_HOST_LLVM_PIPELINE */
    double t0 = kiln_clock_ms(), c0 = kiln_clock_cpu_ms();
    s = kiln_compile_module(f->modules[index], &o, &d, &st);
    *ms = kiln_clock_ms() - t0;
    if (cpu) *cpu = kiln_clock_cpu_ms() - c0;
  }
  if (passes_ms) *passes_ms = st.passes_ms;
  if (stats) *stats = st;
  if (kernels) *kernels = st.emit.kernels;
  kiln_executable_desc_destroy(d);
  kiln_hlo_file_free(f);
  return s;
}

/* --child DIR LIST MODE: compiles each "path<TAB>index<TAB>cache folder" line of LIST once
 * (with that folder, else DIR) and prints its time; MODE "exe" with the whole-executable
 * cache, "kernels" with the kernel cache only. */
static int child_main(const char *dir, const char *list, const char *mode) {
  bool exe = !strcmp(mode, "exe");
  FILE *fp = fopen(list, "r");
  if (!fp) return 1;
  char line[4096];
  while (fgets(line, sizeof(line), fp)) {
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    *tab = 0;
    int index = atoi(tab + 1);
    char *folder = strchr(tab + 1, '\t');
    if (folder) folder[1 + strcspn(folder + 1, "\n")] = 0;
    double ms = 0;
    kiln_compile_stats_t st;
    memset(&st, 0, sizeof(st));
    kiln_status s =
        compile_once(line, index, folder ? folder + 1 : dir, exe, &ms, NULL, NULL, NULL, &st);
    printf("%s %.3f %d %.3f %.3f %.3f\n", s ? "fail" : "ok", ms, st.executable_cache_hit,
           st.cache_key_ms, st.cache_read_ms, st.cache_load_ms);
    kiln_status_free(s);
    fflush(stdout);
  }
  fclose(fp);
  return 0;
}

static void add_file(entry_vec_t *v, const char *path, const char *label) {
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, &f);
  if (s) {
    kiln_status_free(s);
    return;
  }
  for (int i = 0; i < f->num_modules && !f->bare; i++) {
    entry_t e;
    memset(&e, 0, sizeof(e));
    e.path = kiln_strdup(path);
    e.index = i;
    kiln_strbuf_t b = {0};
    kiln_strbuf_printf(&b, "%s%s", label, f->num_modules > 1 ? "" : "");
    if (f->num_modules > 1) kiln_strbuf_printf(&b, "#%d", i);
    e.label = kiln_strbuf_take(&b);
    kiln_vec_push(v, e);
  }
  kiln_hlo_file_free(f);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_folder(entry_vec_t *v, const char *root, const char *sub) {
  kiln_strbuf_t cmd = {0};
  kiln_strbuf_printf(&cmd, "ls %s/%s", root, sub);
  FILE *p = popen(kiln_strbuf_cstr(&cmd), "r");
  kiln_strbuf_free(&cmd);
  if (!p) return;
  KILN_VEC(char *) names = {0};
  char line[1024];
  while (fgets(line, sizeof(line), p)) {
    line[strcspn(line, "\n")] = 0;
    size_t n = strlen(line);
    if (n > 4 && !strcmp(line + n - 4, ".hlo")) kiln_vec_push(&names, kiln_strdup(line));
  }
  pclose(p);
  qsort(names.data, names.len, sizeof(char *), cmp_str);
  for (size_t i = 0; i < names.len; i++) {
    kiln_strbuf_t path = {0}, label = {0};
    kiln_strbuf_printf(&path, "%s/%s/%s", root, sub, names.data[i]);
    kiln_strbuf_printf(&label, "%s/%s", sub, names.data[i]);
    add_file(v, kiln_strbuf_cstr(&path), kiln_strbuf_cstr(&label));
    kiln_strbuf_free(&path);
    kiln_strbuf_free(&label);
    kiln_free(names.data[i]);
  }
  kiln_vec_free(&names);
}

/* Module i's cache folder under `dir`. */
static void module_cache_dir(const char *dir, size_t i, char *out, size_t n) {
  snprintf(out, n, "%s/m%zu", dir, i);
}

/* Writes the compiled entries of `v` to `list`, one "path<TAB>index" line each, plus
 * "<TAB>cache folder" when `dir` is given. */
static bool write_list(const entry_vec_t *v, const char *dir, const char *list) {
  FILE *fp = fopen(list, "w");
  if (!fp) return false;
  char folder[4096];
  for (size_t i = 0; i < v->len; i++) {
    if (!v->data[i].ok) continue;
    fprintf(fp, "%s\t%d", v->data[i].path, v->data[i].index);
    if (dir) {
      module_cache_dir(dir, i, folder, sizeof(folder));
      fprintf(fp, "\t%s", folder);
    }
    fputc('\n', fp);
  }
  return fclose(fp) == 0;
}

/* The disk pass: this program again, as a fresh process, over every compiled entry. */
static void disk_pass(entry_vec_t *v, const char *dir, const char *list, bool exe) {
  if (!write_list(v, dir, list)) return;
  char self[1024];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  self[n] = 0;
  kiln_strbuf_t cmd = {0};
  kiln_strbuf_printf(&cmd, "'%s' --child '%s' '%s' %s", self, dir, list, exe ? "exe" : "kernels");
  FILE *p = popen(kiln_strbuf_cstr(&cmd), "r");
  kiln_strbuf_free(&cmd);
  if (!p) return;
  char line[256];
  for (size_t i = 0; i < v->len; i++) {
    if (!v->data[i].ok) continue;
    if (!fgets(line, sizeof(line), p)) break;
    char status[8];
    double ms = 0;
    int hit = 0;
    double key = 0, rd = 0, load = 0;
    if (sscanf(line, "%7s %lf %d %lf %lf %lf", status, &ms, &hit, &key, &rd, &load) >= 2 &&
        !strcmp(status, "ok"))
      *(exe ? &v->data[i].disk : &v->data[i].disk_kernels) = ms;
    if (exe) {
      v->data[i].hit = hit;
      v->data[i].key_ms = key;
      v->data[i].read_ms = rd;
      v->data[i].load_ms = load;
    }
  }
  pclose(p);
}

/* Compile time and kernel run time of `path` under each candidate LLVM pipeline: kiln's
 * default (O3, small straight-line kernels on the small tier: host_jit.h), then each pipeline
 * set for every kernel. */
static const char *const kPipelineLabels[] = {"default+small", "O3", "O2", "trimmed"};
static const char *const kPipelines[] = {
    "", "default<O3>", "default<O2>",
    /* trimmed: what the host kernels need (inline the subgraph functions, promote, simplify,
     * hoist, vectorize and unroll the thread loops, clean up), none of O3's repeated
     * simplification rounds */
    "cgscc(inline),function(sroa,early-cse,simplifycfg,instcombine<no-verify-fixpoint>,"
    "loop-mssa(loop-rotate,licm),loop(indvars),loop-vectorize,loop-unroll,"
    "instcombine<no-verify-fixpoint>,simplifycfg,slp-vectorizer,gvn,dse,adce)",
    NULL};

static void pipelines_pass(entry_vec_t *v, int repeat) {
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_host_device_create(0, &dev);
  if (s) {
    printf("pipelines: no host device: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  printf(
      "\nLLVM pipeline per candidate: cold compile CPU ms (all threads; no cache) / best run "
      "ms of %d\n",
      repeat);
  printf("%-60s", "module");
  for (int p = 0; kPipelines[p]; p++) printf(" | %-17s", kPipelineLabels[p]);
  printf("\n");
  double tot_c[8] = {0}, tot_r[8] = {0};
  for (size_t i = 0; i < v->len; i++) {
    entry_t *e = &v->data[i];
    if (!e->ok) continue;
    printf("%-60.60s", e->label);
    for (int p = 0; kPipelines[p]; p++) {
      if (kPipelines[p][0])
        setenv("KILN_HOST_LLVM_PIPELINE", kPipelines[p], 1);
      else
        unsetenv("KILN_HOST_LLVM_PIPELINE");
      kiln_kernel_cache_clear();
      double wall = 0, cpu = 0;
      kiln_status cs = compile_once(e->path, e->index, NULL, false, &wall, &cpu, NULL, NULL, NULL);
      kiln_status_free(cs); /* the run below reports it again */
      kiln_hlo_file_t *f = NULL;
      kiln_arena_t arena_s;
      kiln_arena_init(&arena_s);
      kiln_arena_t *arena = &arena_s;
      kiln_status st = kiln_hlo_file_load(e->path, &f);
      kiln_literal_t **args = NULL;
      int nargs = 0;
      kiln_fake_args_options_t fo;
      kiln_fake_args_options_init(&fo);
      if (!st) st = kiln_fake_args_make(f->modules[e->index], &fo, arena, &args, &nargs);
      kiln_device_run_options_t ro = {0};
      ro.device = dev;
      ro.repeat = repeat;
      ro.dump_dir = "";
      kiln_literal_t *result = NULL;
      kiln_device_run_report_t rep;
      memset(&rep, 0, sizeof(rep));
      if (!st)
        st = kiln_device_run_module(f->modules[e->index], args, nargs, &ro, arena, &result, &rep);
      if (st) {
        printf(" | %-17s", "failed");
        kiln_status_free(st);
      } else {
        printf(" | %7.1f / %7.2f", cpu, rep.run_min_ms);
        tot_c[p] += cpu;
        tot_r[p] += rep.run_min_ms;
      }
      kiln_hlo_file_free(f);
      kiln_arena_destroy(arena);
    }
    printf("\n");
    fflush(stdout);
  }
  printf("%-60s", "total");
  for (int p = 0; kPipelines[p]; p++) printf(" | %7.1f / %7.2f", tot_c[p], tot_r[p]);
  printf("\n%-60s", "vs O3 (compile, run)");
  for (int p = 0; kPipelines[p]; p++)
    printf(" |   %4.2fx /  %4.2fx", tot_c[1] > 0 ? tot_c[p] / tot_c[1] : 0,
           tot_r[1] > 0 ? tot_r[p] / tot_r[1] : 0);
  printf("\n");
  unsetenv("KILN_HOST_LLVM_PIPELINE");
  kiln_device_destroy(dev);
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--child")) return child_main(argv[2], argv[3], argv[4]);
  bool all = false, pipelines = false;
  double baseline = 0;
  int repeat = 5;
  const char *root = kiln_corpus_dir();
  const char *list_out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--all"))
      all = true;
    else if (!strcmp(argv[i], "--pipelines"))
      pipelines = true;
    else if (!strcmp(argv[i], "--corpus") && i + 1 < argc)
      root = argv[++i];
    else if (!strcmp(argv[i], "--baseline-ms") && i + 1 < argc)
      baseline = atof(argv[++i]);
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
      repeat = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--list") && i + 1 < argc)
      list_out = argv[++i];
    else {
      fprintf(stderr,
              "usage: bench_compile [--all] [--corpus DIR] [--baseline-ms X] [--pipelines] "
              "[--repeat N] [--list FILE]\n");
      return 2;
    }
  }
  struct stat sb;
  if (!root || stat(root, &sb) != 0) {
    printf("SKIP: no corpus at %s (set KILN_CORPUS_DIR)\n", root ? root : "(unset)");
    return 0;
  }
  entry_vec_t v = {0};
  if (all) {
    add_folder(&v, root, "xla");
    add_folder(&v, root, "real");
  } else {
    for (int i = 0; kQuick[i]; i++) {
      kiln_strbuf_t p = {0};
      kiln_strbuf_printf(&p, "%s/%s", root, kQuick[i]);
      add_file(&v, kiln_strbuf_cstr(&p), strrchr(kQuick[i], '/') + 1);
      kiln_strbuf_free(&p);
    }
    if (access("examples/gelu.hlo", R_OK) == 0)
      add_file(&v, "examples/gelu.hlo", "examples/gelu.hlo");
  }
  char dir[] = "/tmp/kiln_bench_compileXXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  kiln_strbuf_t cache = {0}, list = {0};
  kiln_strbuf_printf(&cache, "%s/cache", dir);
  kiln_strbuf_printf(&list, "%s/modules.txt", dir);
  printf("compile benchmark, host target, %zu modules (%s); kernel cache %s\n", v.len,
         all ? "whole corpus" : "quick subset; --all for the corpus", kiln_strbuf_cstr(&cache));

  int failed = 0;
  for (size_t i = 0; i < v.len; i++) {
    entry_t *e = &v.data[i];
    kiln_kernel_cache_clear();
    char folder[4096];
    module_cache_dir(kiln_strbuf_cstr(&cache), i, folder, sizeof(folder));
    /* cold stores the whole executable too (its cost counts in cold); warm in-process uses the
     * kernel cache only */
    kiln_status s = compile_once(e->path, e->index, folder, true, &e->cold, &e->cold_cpu,
                                 &e->passes, &e->kernels, NULL);
    if (!s) s = compile_once(e->path, e->index, folder, false, &e->warm, NULL, NULL, NULL, NULL);
    e->ok = !s;
    if (s) failed++;
    kiln_status_free(s);
  }
  if (list_out && !write_list(&v, NULL, list_out))
    fprintf(stderr, "could not write %s\n", list_out);
  disk_pass(&v, kiln_strbuf_cstr(&cache), kiln_strbuf_cstr(&list), false);
  disk_pass(&v, kiln_strbuf_cstr(&cache), kiln_strbuf_cstr(&list), true);

  double tc = 0, tcpu = 0, tw = 0, td = 0, tdk = 0, worst_disk = 0, tkey = 0, tread = 0, tload = 0;
  int hits = 0;
  int n = 0, over10 = 0;
  if (!all)
    printf("%-60s %7s %9s %9s %9s %9s %9s %9s\n", "module", "kernels", "cold ms", "cold cpu",
           "passes", "warm ms", "disk-k ms", "disk ms");
  KILN_VEC(entry_t *) ok = {0};
  for (size_t i = 0; i < v.len; i++) {
    entry_t *e = &v.data[i];
    if (!e->ok) continue;
    if (!all)
      printf("%-60.60s %7d %9.1f %9.1f %9.1f %9.2f %9.2f %9.2f\n", e->label, e->kernels, e->cold,
             e->cold_cpu, e->passes, e->warm, e->disk_kernels, e->disk);
    tc += e->cold;
    tcpu += e->cold_cpu;
    tw += e->warm;
    td += e->disk;
    tdk += e->disk_kernels;
    hits += e->hit;
    tkey += e->key_ms;
    tread += e->read_ms;
    tload += e->load_ms;
    if (e->disk > worst_disk) worst_disk = e->disk;
    if (e->disk > 10) over10++;
    n++;
    kiln_vec_push(&ok, e);
  }
  printf("\ntotals over %d modules (%d not compilable for the host, skipped):\n", n, failed);
  printf(
      "  cold %.1f ms (CPU %.1f ms), warm in-process %.1f ms (%.1fx), warm from disk in a fresh "
      "process "
      "%.1f ms (%.1fx)\n",
      tc, tcpu, tw, tw > 0 ? tc / tw : 0, td, td > 0 ? tc / td : 0);
  printf(
      "  warm from disk with the kernel cache only (disk-k, the path before the executable "
      "cache) %.1f ms: the executable cache %.1fx faster\n",
      tdk, td > 0 ? tdk / td : 0);
  printf(
      "  warm from disk: slowest module %.2f ms, %d of %d modules over 10 ms; %d executable "
      "cache hits\n",
      worst_disk, over10, n, hits);
  printf(
      "  where the disk time goes: key (print + hash the module) %.1f ms, read %.1f ms, "
      "rebuild + JIT link %.1f ms, the rest (parse excluded; first-module LLVM start-up) "
      "%.1f ms\n",
      tkey, tread, tload, td - tkey - tread - tload);
  if (baseline > 0)
    printf("  cold total vs the baseline's %.1f ms: %.2fx (goal <= 0.5x)\n", baseline,
           tc / baseline);
  qsort(ok.data, ok.len, sizeof(entry_t *), cmp_cold_desc);
  printf("slowest ten cold:\n");
  for (size_t i = 0; i < ok.len && i < 10; i++)
    printf("  %9.1f ms cold, %7.2f warm, %7.2f disk, %3d kernels  %s\n", ok.data[i]->cold,
           ok.data[i]->warm, ok.data[i]->disk, ok.data[i]->kernels, ok.data[i]->label);
  qsort(ok.data, ok.len, sizeof(entry_t *), cmp_disk_desc);
  printf("slowest ten warm from disk (fresh process, executable cache):\n");
  for (size_t i = 0; i < ok.len && i < 10; i++)
    printf("  %7.2f ms disk, %7.2f disk-k, %9.1f cold, %3d kernels  %s\n", ok.data[i]->disk,
           ok.data[i]->disk_kernels, ok.data[i]->cold, ok.data[i]->kernels, ok.data[i]->label);
  if (pipelines) pipelines_pass(&v, repeat);

  kiln_vec_free(&ok);
  for (size_t i = 0; i < v.len; i++) {
    kiln_free(v.data[i].path);
    kiln_free(v.data[i].label);
  }
  kiln_vec_free(&v);
  kiln_strbuf_free(&list);
  kiln_strbuf_free(&cache);
  char cmd[200];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return 0;
}
