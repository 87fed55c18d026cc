/* kiln-bench: a benchmark harness that replays modules through a PJRT plugin, as a framework
 * would run them (dlopen, the PJRT_Api table and nothing else of the plugin).
 *
 *   kiln-bench [options] FILE|FOLDER...     HLO text (.hlo, .txt), StableHLO (.mlir, .mlirbc)
 *   kiln-bench [options] --corpus           every whole module of the HLO corpus (xla/, real/)
 *   kiln-bench --compare=BASE.json,NEW.json compare two JSON files (exit 1 on a regression)
 *   kiln-bench --load=A.json [--plot=F.svg]  table (and plot) of a JSON file, nothing run
 *
 * Options:
 *   --plugin=PATH      the PJRT plugin (default kiln's libkiln_pjrt.so, as kiln-run finds it)
 *   --platform=NAME    the client's platform option ("cpu", "cuda"; default: the plugin's)
 *   --runs=N           timed executes per module and mode (default 100) ...
 *   --time=SECONDS     ... or fewer when this much time went by (default 1; at least one run)
 *   --warmup=N         executes before timing (default 2)
 *   --filter=TEXT      only modules whose name contains TEXT
 *   --max-cost=N       skip (and list as skipped) modules estimated above N element-operations
 *                      per run (kiln_corpus_eval_cost; default 2e9, about a second on one CPU
 *                      core; 0: no bound)
 *   --cache-dir=DIR    the disk compile cache (default: a fresh temporary folder, removed)
 *   --json=FILE        write the results as JSON (schema in report.h)
 *   --plot=FILE.svg    draw them with gnuplot (FILE.png: a PNG)
 *   --threshold=F      --compare's smallest noise threshold (default 0.05)
 *   --quiet            no table
 *
 * For each module: fixed inputs (kiln's fake arguments, seed 42); a cold compile (a client
 * with an empty disk cache: PJRT_Client_Compile + the first execute, where kiln makes its
 * kernels); then for command buffers on and off, each in a client of its own over the same
 * disk cache: a warm compile, warm-up executes, and timed executes (Execute + the wait for its
 * completion event between two clock reads; the host time, the Execute call alone, on probe
 * executes interleaved with them, one per 8, see replay_timed). A
 * module that fails is reported with its error and the others go on. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "benchmarks/kiln_bench/client.h"
#include "benchmarks/kiln_bench/report.h"
#include "compiler/hlo/ir.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "tools/common/run_report.h"
#include "tools/common/stablehlo_run.h"

typedef struct bench_flags {
  const char *plugin, *platform, *filter, *cache_dir, *json, *plot, *compare, *load;
  int64_t runs, warmup;
  double time_s, threshold, max_cost;
  bool corpus, quiet;
} bench_flags_t;

typedef struct bench_module {
  char *name, *file;    /* owned */
  kiln_hlo_module_t *m; /* owned */
  char *code;           /* owned: the program sent to the plugin */
  size_t code_len;
  const char *format; /* "hlo" or "mlir" */
} bench_module_t;

typedef struct bench_list {
  bench_module_t *items;
  size_t len, cap;
  int repeats; /* corpus modules left out: an earlier one had the same text */
} bench_list_t;

static void usage(void) {
  fputs(
      "usage: kiln-bench [--plugin=PATH] [--platform=NAME] [--runs=N] [--time=S] [--warmup=N]\n"
      "                  [--filter=TEXT] [--cache-dir=DIR] [--json=FILE] [--plot=FILE.svg]\n"
      "                  [--quiet] (FILE|FOLDER... | --corpus)\n"
      "       kiln-bench --compare=BASE.json,NEW.json [--threshold=F]\n"
      "       kiln-bench --load=FILE.json [--plot=FILE.svg]\n",
      stderr);
}

static void list_add(bench_list_t *l, const char *name, const char *file, kiln_hlo_module_t *m,
                     char *code, size_t len, const char *format) {
  if (l->len == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 32;
    l->items = kiln_realloc(l->items, l->cap * sizeof(*l->items));
  }
  bench_module_t *b = &l->items[l->len++];
  b->name = kiln_strdup(name);
  b->file = kiln_strdup(file);
  b->m = m;
  b->code = code;
  b->code_len = len;
  b->format = format;
}

static void list_free(bench_list_t *l) {
  for (size_t i = 0; i < l->len; i++) {
    kiln_free(l->items[i].name);
    kiln_free(l->items[i].file);
    kiln_free(l->items[i].code);
    kiln_hlo_module_destroy(l->items[i].m);
  }
  kiln_free(l->items);
}

static void add_module(bench_list_t *l, const bench_flags_t *f, const char *name, const char *file,
                       kiln_hlo_module_t *m) {
  if (f->filter && !strstr(name, f->filter)) {
    kiln_hlo_module_destroy(m);
    return;
  }
  char *text = kiln_hlo_module_to_string(m);
  list_add(l, name, file, m, text, strlen(text), "hlo");
}

/* ---- collecting modules ---------------------------------------------------------------- */

typedef struct corpus_ctx {
  bench_list_t *list;
  const bench_flags_t *flags;
  kiln_corpus_repeats_t repeats;
} corpus_ctx_t;

static void corpus_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path,
                          int index, kiln_status error) {
  (void)index;
  corpus_ctx_t *c = ctx;
  if (error || !*m) return; /* files that do not parse: test_corpus_parse's business */
  if (kiln_corpus_find_invalid(path, index)) return;
  if (kiln_corpus_repeat_of(&c->repeats, *m, name)) {
    c->list->repeats++;
    return;
  }
  add_module(c->list, c->flags, name, path, *m);
  *m = NULL;
}

static kiln_status add_file(bench_list_t *l, const bench_flags_t *f, const char *path) {
  bool mlir = kiln_stablehlo_is_mlir_path(path);
  kiln_hlo_file_t *hf = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(mlir ? kiln_stablehlo_file_load(path, &hf)
                                  : kiln_hlo_file_load(path, &hf));
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  for (int i = 0; i < hf->num_modules; i++) {
    char name[1100];
    if (hf->num_modules > 1)
      snprintf(name, sizeof name, "%s#%d", base, i);
    else
      snprintf(name, sizeof name, "%s", base);
    kiln_hlo_module_t *m = hf->modules[i];
    hf->modules[i] = NULL;
    if (mlir && hf->num_modules == 1 && (!f->filter || strstr(name, f->filter))) {
      /* One StableHLO module: the plugin gets the file itself (text or bytecode). */
      char *bytes = NULL;
      size_t len = 0;
      kiln_status s = kiln_read_file(path, &bytes, &len);
      if (s) {
        kiln_hlo_module_destroy(m);
        kiln_hlo_file_free(hf);
        return s;
      }
      list_add(l, name, path, m, bytes, len, "mlir");
    } else {
      add_module(l, f, name, path, m);
    }
  }
  kiln_hlo_file_free(hf);
  return NULL;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool benchable_name(const char *n) {
  return kiln_str_ends_with(n, ".hlo") || kiln_str_ends_with(n, ".txt") ||
         kiln_stablehlo_is_mlir_path(n);
}

/* A folder: its .hlo / .txt / .mlir / .mlirbc files, sorted (not recursive). */
static kiln_status add_folder(bench_list_t *l, const bench_flags_t *f, const char *dir) {
  struct {
    char **names;
    size_t len, cap;
  } names = {0};
  DIR *d = opendir(dir);
  if (!d)
    return kiln_status_make(KILN_NOT_FOUND, "cannot open folder %s: %s", dir, strerror(errno));
  for (struct dirent *e; (e = readdir(d));) {
    if (!benchable_name(e->d_name)) continue;
    if (names.len == names.cap) {
      names.cap = names.cap ? 2 * names.cap : 32;
      names.names = kiln_realloc(names.names, names.cap * sizeof(char *));
    }
    names.names[names.len++] = kiln_strdup(e->d_name);
  }
  closedir(d);
  qsort(names.names, names.len, sizeof(char *), cmp_str);
  kiln_status s = NULL;
  for (size_t i = 0; i < names.len; i++) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, names.names[i]);
    if (!s) s = add_file(l, f, path);
    kiln_free(names.names[i]);
  }
  kiln_free(names.names);
  return s;
}

static kiln_status collect(bench_list_t *l, const bench_flags_t *f, char **paths, int n) {
  if (f->corpus) {
    corpus_ctx_t c = {.list = l, .flags = f};
    kiln_corpus_repeats_init(&c.repeats);
    kiln_status s = kiln_corpus_for_each_whole_module(NULL, corpus_module, &c);
    kiln_corpus_repeats_free(&c.repeats);
    KILN_RETURN_IF_ERROR(s, "while reading the corpus (%s; set KILN_CORPUS_DIR)",
                         kiln_corpus_dir());
  }
  for (int i = 0; i < n; i++) {
    struct stat st;
    if (stat(paths[i], &st) != 0)
      return kiln_status_make(KILN_NOT_FOUND, "%s: %s", paths[i], strerror(errno));
    KILN_RETURN_IF_ERROR(
        S_ISDIR(st.st_mode) ? add_folder(l, f, paths[i]) : add_file(l, f, paths[i]),
        "while reading %s", paths[i]);
  }
  return NULL;
}

/* ---- benchmarking one module ----------------------------------------------------------- */

typedef struct module_inputs {
  kiln_literal_t **args;
  int num;
} module_inputs_t;

static void destroy_bufs(const kiln_bench_client_t *c, PJRT_Buffer **b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    kiln_bench_buffer_destroy(c, b[i]);
    b[i] = NULL;
  }
}

/* What one client does with the module: compile, upload, the first execute. */
typedef struct session {
  kiln_bench_client_t c;
  kiln_bench_exe_t exe;
  PJRT_Buffer **in, **out;
  int num_in;
  double compile_ms, first_ms;
  int64_t bytes;
} session_t;

static void session_close(session_t *s) {
  if (s->out) destroy_bufs(&s->c, s->out, s->exe.num_outputs);
  if (s->in) destroy_bufs(&s->c, s->in, (size_t)s->num_in);
  kiln_free(s->out);
  kiln_free(s->in);
  if (s->c.client) kiln_bench_exe_destroy(&s->c, &s->exe);
  kiln_bench_client_destroy(&s->c);
  memset(s, 0, sizeof(*s));
}

static kiln_status session_open(session_t *s, const kiln_bench_plugin_t *p, const bench_flags_t *f,
                                const char *cache_dir, int cmdbufs, const bench_module_t *bm,
                                const module_inputs_t *mi) {
  memset(s, 0, sizeof(*s));
  kiln_bench_client_options_t o = {
      .platform = f->platform, .cache_dir = cache_dir, .command_buffers = cmdbufs};
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bench_client_create(p, &o, &s->c));
  double t0 = kiln_clock_ms();
  KILN_RETURN_IF_ERROR_PLAIN(
      kiln_bench_compile(&s->c, bm->code, bm->code_len, bm->format, &s->exe));
  s->compile_ms = kiln_clock_ms() - t0;
  /* A tuple parameter is passed as its leaves, depth first (as XLA's clients flatten them and
   * the plugin's Execute takes them); a token leaf cannot be a buffer (the upload says so). */
  int leaves = 0;
  for (int i = 0; i < mi->num; i++) leaves += kiln_run_report_num_leaves(mi->args[i]);
  s->num_in = leaves;
  s->in = kiln_calloc((size_t)leaves + 1, sizeof(*s->in));
  s->out = kiln_calloc(s->exe.num_outputs + 1, sizeof(*s->out));
  for (int i = 0, k = 0; i < mi->num; i++)
    for (int j = 0; j < kiln_run_report_num_leaves(mi->args[i]); j++, k++) {
      KILN_RETURN_IF_ERROR(
          kiln_bench_upload(&s->c, kiln_run_report_leaf(mi->args[i], j), &s->in[k]),
          "for parameter %d (leaf %d)", i, j);
      s->bytes += kiln_bench_buffer_bytes(&s->c, s->in[k]);
    }
  t0 = kiln_clock_ms();
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bench_execute(&s->c, &s->exe, s->in, (size_t)s->num_in, s->out,
                                                KILN_BENCH_SPAN_NONE, NULL));
  s->first_ms = kiln_clock_ms() - t0;
  for (size_t o2 = 0; o2 < s->exe.num_outputs; o2++)
    s->bytes += kiln_bench_buffer_bytes(&s->c, s->out[o2]);
  destroy_bufs(&s->c, s->out, s->exe.num_outputs);
  return NULL;
}

/* One host-time probe per this many timed runs (at least one probe). */
#define HOST_PROBE_EVERY 8

/* Warm-up, then timed executes; fills the statistics of `r`. A sample is one execute's
 * Execute + wait for its completion event between two clock reads (kiln_bench_execute's
 * KILN_BENCH_SPAN_RUN): no other clock read, no output destruction and none of kiln-bench's
 * bookkeeping inside. The host time (the Execute call alone) is taken on probe executes
 * interleaved with the samples (one per HOST_PROBE_EVERY), whose run times are not samples, so
 * that no sample holds the clock read a host time would need between Execute and the wait. */
static kiln_status replay_timed(session_t *s, const bench_flags_t *f, kiln_bench_result_t *r) {
  double budget_ms = f->time_s * 1e3, start = kiln_clock_ms();
  for (int64_t w = 0; w < f->warmup && kiln_clock_ms() - start < budget_ms / 4; w++) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bench_execute(&s->c, &s->exe, s->in, (size_t)s->num_in, s->out,
                                                  KILN_BENCH_SPAN_NONE, NULL));
    destroy_bufs(&s->c, s->out, s->exe.num_outputs);
    r->warmup++;
  }
  double *samples = kiln_calloc((size_t)f->runs + 1, sizeof(*samples));
  double host = 0;
  size_t n = 0, probes = 0;
  kiln_status st = NULL;
  while (!st && (n == 0 || ((int64_t)n < f->runs && kiln_clock_ms() - start < budget_ms))) {
    bool probe = n % HOST_PROBE_EVERY == 0 && probes <= n / HOST_PROBE_EVERY;
    double ms = 0;
    st = kiln_bench_execute(&s->c, &s->exe, s->in, (size_t)s->num_in, s->out,
                            probe ? KILN_BENCH_SPAN_ENQUEUE : KILN_BENCH_SPAN_RUN, &ms);
    destroy_bufs(&s->c, s->out, s->exe.num_outputs);
    if (st) break;
    if (probe) {
      host += ms * 1e3;
      probes++;
    } else {
      samples[n++] = ms * 1e3;
    }
  }
  r->bytes_per_run = s->bytes;
  r->host_us = probes ? host / (double)probes : 0;
  kiln_bench_result_set_samples(r, samples, n);
  kiln_free(samples);
  return st;
}

static void read_counts(session_t *s, kiln_bench_result_t *r) {
  int64_t v;
  if (kiln_bench_cost_property(&s->c, &s->exe, "kiln.kernels", &v)) r->kernels = v;
  if (kiln_bench_cost_property(&s->c, &s->exe, "kiln.gemms", &v)) r->gemms = v;
  if (kiln_bench_cost_property(&s->c, &s->exe, "kiln.command_buffers", &v)) r->command_buffers = v;
}

static void set_error_text(kiln_bench_result_t *r, const char *msg) {
  kiln_free(r->error);
  r->error = kiln_strdup(msg);
  for (char *p = r->error; *p; p++)
    if (*p == '\n') *p = ' ';
}

static void set_error(kiln_bench_result_t *r, kiln_status s) {
  set_error_text(r, kiln_status_message(s));
  kiln_status_free(s);
}

static const char *const kModes[2] = {"cmdbuf_on", "cmdbuf_off"};

static void bench_one(const kiln_bench_plugin_t *p, const bench_flags_t *f, const char *cache_dir,
                      const bench_module_t *bm, kiln_bench_results_t *rs) {
  kiln_bench_result_t *res[2];
  for (int k = 0; k < 2; k++) res[k] = kiln_bench_results_add(rs, bm->name, bm->file, kModes[k]);
  double cost = kiln_corpus_eval_cost(bm->m);
  if (f->max_cost > 0 && cost > f->max_cost) {
    char why[160];
    snprintf(
        why, sizeof why,
        "skipped: estimated %.3g element-operations per run > --max-cost=%.3g (raise it to run)",
        cost, f->max_cost);
    for (int k = 0; k < 2; k++) set_error_text(res[k], why);
    return;
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_fake_args_options_t fo;
  kiln_fake_args_options_init(&fo);
  module_inputs_t mi = {0};
  kiln_status s = kiln_fake_args_make(bm->m, &fo, &arena, &mi.args, &mi.num);
  if (s) s = kiln_status_annotate(s, "while making the inputs");
  /* Cold: a client over the empty disk cache. */
  session_t cold;
  double cold_ms = 0;
  if (!s) {
    s = session_open(&cold, p, f, cache_dir, 1, bm, &mi);
    cold_ms = cold.compile_ms + cold.first_ms;
    session_close(&cold);
    if (s) s = kiln_status_annotate(s, "in the cold compile");
  }
  for (int k = 0; k < 2; k++) {
    if (s) {
      set_error_text(res[k], kiln_status_message(s));
      continue;
    }
    res[k]->compile_cold_ms = cold_ms;
    session_t w;
    kiln_status e = session_open(&w, p, f, cache_dir, k == 0 ? 1 : 0, bm, &mi);
    res[k]->compile_ms = w.compile_ms;
    res[k]->compile_warm_ms = w.compile_ms + w.first_ms;
    if (!e) read_counts(&w, res[k]);
    if (!e) e = replay_timed(&w, f, res[k]);
    session_close(&w);
    if (e) set_error(res[k], e);
  }
  kiln_status_free(s);
  kiln_arena_destroy(&arena);
}

/* ---- main ------------------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static bool flag_value(const char *arg, const char *name, const char **val) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) || arg[n] != '=') return false;
  *val = arg + n + 1;
  return true;
}

static kiln_status parse_flags(int argc, char **argv, bench_flags_t *f, char **paths, int *np) {
  f->runs = 100;
  f->warmup = 2;
  f->time_s = 1.0;
  f->max_cost = KILN_CORPUS_MAX_COST;
  *np = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--corpus"))
      f->corpus = true;
    else if (!strcmp(a, "--quiet"))
      f->quiet = true;
    else if (flag_value(a, "--plugin", &f->plugin) || flag_value(a, "--platform", &f->platform) ||
             flag_value(a, "--filter", &f->filter) || flag_value(a, "--cache-dir", &f->cache_dir) ||
             flag_value(a, "--json", &f->json) || flag_value(a, "--plot", &f->plot) ||
             flag_value(a, "--compare", &f->compare) || flag_value(a, "--load", &f->load))
      continue;
    else if (flag_value(a, "--runs", &v))
      f->runs = strtoll(v, NULL, 10);
    else if (flag_value(a, "--warmup", &v))
      f->warmup = strtoll(v, NULL, 10);
    else if (flag_value(a, "--time", &v))
      f->time_s = strtod(v, NULL);
    else if (flag_value(a, "--max-cost", &v))
      f->max_cost = strtod(v, NULL);
    else if (flag_value(a, "--threshold", &v))
      f->threshold = strtod(v, NULL);
    else if (a[0] == '-' && a[1] == '-')
      return KILN_ERR_INVALID("unknown option %s", a);
    else
      paths[(*np)++] = argv[i];
  }
  if (f->runs < 1) return KILN_ERR_INVALID("--runs must be at least 1");
  if (f->warmup < 0 || f->time_s <= 0)
    return KILN_ERR_INVALID("--warmup must be >= 0 and --time > 0");
  if (!f->compare && !f->load && !f->corpus && !*np)
    return KILN_ERR_INVALID("nothing to run: name files or folders, or --corpus");
  return NULL;
}

static kiln_status run_compare(const bench_flags_t *f, int *regressions) {
  const char *comma = strchr(f->compare, ',');
  if (!comma) return KILN_ERR_INVALID("--compare=BASE.json,NEW.json: two files, comma-separated");
  char first[4096];
  snprintf(first, sizeof first, "%.*s", (int)(comma - f->compare), f->compare);
  kiln_bench_results_t a, b;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bench_results_read_file(first, &a));
  kiln_status s = kiln_bench_results_read_file(comma + 1, &b);
  if (!s) {
    kiln_strbuf_t t = {0};
    int matched = 0;
    kiln_bench_compare(&a, &b, f->threshold, &t, regressions, NULL, &matched);
    fputs(kiln_strbuf_cstr(&t), stdout);
    kiln_strbuf_free(&t);
    if (!matched)
      s = KILN_ERR_INVALID("%s and %s have no module and mode in common with a run time", first,
                           comma + 1);
    kiln_bench_results_free(&b);
  }
  kiln_bench_results_free(&a);
  return s;
}

static kiln_status write_outputs(const bench_flags_t *f, const kiln_bench_results_t *rs) {
  if (!f->quiet) {
    kiln_strbuf_t t = {0};
    kiln_bench_results_table(&t, rs);
    fputs(kiln_strbuf_cstr(&t), stdout);
    kiln_strbuf_free(&t);
  }
  if (f->json) {
    kiln_strbuf_t j = {0};
    kiln_bench_results_json(&j, rs);
    FILE *out = fopen(f->json, "w");
    bool ok = out && fputs(kiln_strbuf_cstr(&j), out) >= 0;
    if (out) ok = fclose(out) == 0 && ok;
    kiln_strbuf_free(&j);
    if (!ok)
      return kiln_status_make(KILN_PERMISSION_DENIED, "cannot write %s: %s", f->json,
                              strerror(errno));
    printf("kiln-bench: wrote %s\n", f->json);
  }
  if (f->plot) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bench_plot(rs, f->plot));
    printf("kiln-bench: wrote %s\n", f->plot);
  }
  return NULL;
}

static kiln_status run(const bench_flags_t *f, char **paths, int np, kiln_bench_results_t *rs) {
  bench_list_t list = {0};
  kiln_status s = collect(&list, f, paths, np);
  kiln_bench_plugin_t p;
  if (!s) s = kiln_bench_plugin_open(f->plugin, &p);
  char tmp[] = "/tmp/kiln-bench-cache-XXXXXX";
  const char *cache = f->cache_dir;
  if (!s && !cache) {
    if (!mkdtemp(tmp))
      s = kiln_status_make(KILN_UNAVAILABLE, "cannot make a cache folder: %s", strerror(errno));
    cache = tmp;
  }
  if (!s) {
    rs->plugin = kiln_strdup(p.path);
    rs->plugin_version = kiln_strdup(p.version);
    kiln_bench_client_t probe;
    kiln_bench_client_options_t o = {
        .platform = f->platform, .cache_dir = cache, .command_buffers = -1};
    s = kiln_bench_client_create(&p, &o, &probe);
    if (!s) rs->platform = kiln_strdup(probe.platform);
    if (!s) kiln_bench_client_destroy(&probe);
  }
  if (!s) {
    printf("kiln-bench: %zu modules", list.len);
    if (list.repeats) printf(" (%d repeats of an earlier module's text left out)", list.repeats);
    printf(", plugin %s (%s, platform %s), up to %lld runs or %.2f s per module and mode\n", p.path,
           p.version, rs->platform, (long long)f->runs, f->time_s);
    fflush(stdout);
  }
  bool tty = isatty(2);
  double start = kiln_clock_ms();
  for (size_t i = 0; i < list.len && !s; i++) {
    double el = (kiln_clock_ms() - start) / 1e3;
    if (tty)
      fprintf(stderr, "\r\033[K[%zu/%zu %.0fs] %.90s", i + 1, list.len, el, list.items[i].name);
    else if (list.len > 1)
      fprintf(stderr, "[%zu/%zu %.0fs] %s\n", i + 1, list.len, el, list.items[i].name);
    bench_one(&p, f, cache, &list.items[i], rs);
  }
  if (tty && list.len) fprintf(stderr, "\r\033[K");
  if (cache == tmp) nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  list_free(&list);
  return s;
}

int main(int argc, char **argv) {
  bench_flags_t f = {0};
  char **paths = kiln_calloc((size_t)argc + 1, sizeof(char *));
  int np = 0;
  kiln_status s = parse_flags(argc, argv, &f, paths, &np);
  if (s) {
    fprintf(stderr, "kiln-bench: %s\n", kiln_status_message(s));
    usage();
    kiln_status_free(s);
    kiln_free(paths);
    return 2;
  }
  int regressions = 0;
  kiln_bench_results_t rs = {0};
  if (f.compare)
    s = run_compare(&f, &regressions);
  else if (f.load)
    s = kiln_bench_results_read_file(f.load, &rs);
  else
    s = run(&f, paths, np, &rs);
  if (!s && !f.compare) s = write_outputs(&f, &rs);
  int errors = 0, skipped = 0;
  for (size_t i = 0; i < rs.len; i++) {
    bool skip = kiln_bench_result_skipped(&rs.items[i]);
    skipped += skip;
    errors += rs.items[i].error && !skip;
  }
  if (!s && !f.compare && !f.load)
    printf(
        "kiln-bench: %zu results (modules x modes): %zu ran, %d skipped (--max-cost), %d with an "
        "error\n",
        rs.len, rs.len - (size_t)skipped - (size_t)errors, skipped, errors);
  kiln_bench_results_free(&rs);
  kiln_free(paths);
  if (s) {
    fprintf(stderr, "kiln-bench: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return 1;
  }
  return regressions ? 1 : 0;
}
