/* MLIR text reader throughput (compiler/frontend/mlir_text.h) on the StableHLO test files:
 * every `// -----` part of stablehlo/tests/interpret/ and testdata-sample/ parsed one by one
 * (MB/s), then a linearity check (all parts nested in one module, repeated 1x, 4x, 16x), and as
 * the baseline measured in the same run the HLO text parser's MB/s on the largest files of the
 * HLO corpus. Times are the thread's CPU time (the machine is shared), best of the rounds.
 * Usage: bench_mlir_parse [top-hlo-files (default 5)]. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/str.h"
#include "base/vec.h"
#include "compiler/frontend/mlir_text.h"
#include "compiler/hlo/ir.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

typedef KILN_VEC(char *) text_list_t;

static const char *stablehlo_dir(void) {
  static char dir[4096];
  const char *env = getenv("KILN_STABLEHLO_DIR");
  if (env && *env) return env;
  snprintf(dir, sizeof dir, "%s/../stablehlo", kiln_corpus_dir());
  return dir;
}

/* Appends every part of every .mlir file of `sub` to `parts` (heap copies). */
static int collect_parts(const char *sub, text_list_t *parts, size_t *bytes) {
  char dir[8192];
  snprintf(dir, sizeof dir, "%.4000s/%.200s", stablehlo_dir(), sub);
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "bench_mlir_parse: cannot open %s (set KILN_STABLEHLO_DIR)\n", dir);
    return 1;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!kiln_str_ends_with(e->d_name, ".mlir")) continue;
    char path[8192 + 300];
    snprintf(path, sizeof path, "%s/%.255s", dir, e->d_name);
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(path, &text, &len);
    if (s) return kiln_status_report(s, "bench_mlir_parse");
    size_t n = kiln_mlir_split_text(text, len, NULL, 0);
    kiln_mlir_text_part_t *p = kiln_calloc(n, sizeof(*p));
    kiln_mlir_split_text(text, len, p, n);
    for (size_t i = 0; i < n; i++) {
      char *copy = kiln_malloc(p[i].len + 1);
      memcpy(copy, p[i].text, p[i].len);
      copy[p[i].len] = 0;
      kiln_vec_push(parts, copy);
      *bytes += p[i].len;
    }
    kiln_free(p);
    kiln_free(text);
  }
  closedir(d);
  return 0;
}

static double parse_all_seconds(const text_list_t *parts, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = kiln_thread_cpu_seconds();
    for (size_t i = 0; i < parts->len; i++) {
      kiln_mlir_module_t *m = NULL;
      kiln_status s = kiln_mlir_parse_text(parts->data[i], strlen(parts->data[i]), "part", &m);
      if (s) {
        kiln_status_report(s, "bench_mlir_parse");
        exit(1);
      }
      kiln_mlir_module_destroy(m);
    }
    double dt = kiln_thread_cpu_seconds() - t0;
    if (dt < best) best = dt;
  }
  return best;
}

static double parse_one_seconds(const char *text, size_t len, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    kiln_mlir_module_t *m = NULL;
    double t0 = kiln_thread_cpu_seconds();
    kiln_status s = kiln_mlir_parse_text(text, len, "repeated", &m);
    double dt = kiln_thread_cpu_seconds() - t0;
    if (s) {
      kiln_status_report(s, "bench_mlir_parse");
      exit(1);
    }
    kiln_mlir_module_destroy(m);
    if (dt < best) best = dt;
  }
  return best;
}

typedef struct file_entry {
  char path[8192];
  long size;
} file_entry_t;

static int by_size_desc(const void *a, const void *b) {
  long x = ((const file_entry_t *)a)->size, y = ((const file_entry_t *)b)->size;
  return (x < y) - (x > y);
}

/* The HLO text parser on the `top` largest corpus files: MB/s. */
static double hlo_baseline_mb_per_s(int top) {
  static file_entry_t files[512];
  int nfiles = 0;
  const char *subs[] = {"xla", "real"};
  for (int s = 0; s < 2; s++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", kiln_corpus_dir(), subs[s]);
    DIR *d = opendir(dir);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d)) && nfiles < 512) {
      if (e->d_name[0] == '.' || strstr(e->d_name, "invalid_concat") ||
          kiln_str_ends_with(e->d_name, ".tsv") || kiln_str_ends_with(e->d_name, ".md")) {
        continue;
      }
      file_entry_t *f = &files[nfiles];
      snprintf(f->path, sizeof f->path, "%.4000s/%.255s", dir, e->d_name);
      struct stat st;
      if (stat(f->path, &st) == 0) {
        f->size = (long)st.st_size;
        nfiles++;
      }
    }
    closedir(d);
  }
  if (nfiles == 0) return 0;
  qsort(files, (size_t)nfiles, sizeof files[0], by_size_desc);
  if (top > nfiles) top = nfiles;
  double mb = 0, secs = 0;
  for (int i = 0; i < top; i++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(files[i].path, &text, &len);
    if (s) {
      kiln_status_free(s);
      continue;
    }
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
      kiln_hlo_parse_options_t opts = {.filename = files[i].path};
      kiln_hlo_module_t **mods = NULL;
      int n = 0;
      double t0 = kiln_thread_cpu_seconds();
      s = kiln_hlo_parse_modules(text, len, &opts, &mods, &n);
      double dt = kiln_thread_cpu_seconds() - t0;
      if (s) {
        kiln_status_free(s);
        break;
      }
      for (int k = 0; k < n; k++) kiln_hlo_module_destroy(mods[k]);
      kiln_free(mods);
      if (dt < best) best = dt;
    }
    if (best < 1e30) {
      mb += (double)len / 1e6;
      secs += best;
    }
    kiln_free(text);
  }
  return secs > 0 ? mb / secs : 0;
}

int main(int argc, char **argv) {
  int top = argc > 1 ? atoi(argv[1]) : 5;
  text_list_t parts = {0};
  size_t bytes = 0;
  if (collect_parts("stablehlo/tests/interpret", &parts, &bytes) ||
      collect_parts("testdata-sample", &parts, &bytes)) {
    return 1;
  }
  double t = parse_all_seconds(&parts, 5);
  double mlir_mbs = (double)bytes / 1e6 / t;
  double hlo_mbs = hlo_baseline_mb_per_s(top);
  printf("MLIR text: %zu parts, %.3f MB in %.2f ms = %.1f MB/s\n", parts.len, (double)bytes / 1e6,
         t * 1e3, mlir_mbs);
  printf("HLO text parser (baseline, %d largest corpus files): %.1f MB/s; MLIR/HLO = %.2fx\n", top,
         hlo_mbs, hlo_mbs > 0 ? mlir_mbs / hlo_mbs : 0);

  /* Linearity: every part nested in one module, the whole repeated k times. */
  double per_mb_1 = 0;
  for (int k = 1; k <= 16; k *= 4) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_append(&b, "module {\n");
    for (int r = 0; r < k; r++) {
      for (size_t i = 0; i < parts.len; i++) {
        kiln_strbuf_append(&b, parts.data[i]);
        kiln_strbuf_append_char(&b, '\n');
      }
    }
    kiln_strbuf_append(&b, "}\n");
    double tk = parse_one_seconds(b.data, b.len, 3);
    double us_per_mb = tk * 1e6 / ((double)b.len / 1e6);
    if (k == 1) per_mb_1 = us_per_mb;
    printf(
        "linearity: %2dx input (%8.3f MB): %8.2f ms, %8.0f us/MB (%.2fx of 1x), %.1f MB/s = "
        "%.2fx HLO\n",
        k, (double)b.len / 1e6, tk * 1e3, us_per_mb, us_per_mb / per_mb_1, (double)b.len / 1e6 / tk,
        hlo_mbs > 0 ? (double)b.len / 1e6 / tk / hlo_mbs : 0);
    kiln_strbuf_free(&b);
  }
  for (size_t i = 0; i < parts.len; i++) kiln_free(parts.data[i]);
  kiln_vec_free(&parts);
  return 0;
}
