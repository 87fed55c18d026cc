/* Parser throughput: parses the largest corpus files and prints MB/s, plus a linearity
 * check (the same text repeated 1x, 4x, 16x as separate modules must cost ~linearly).
 * Baseline measured in the same run: memchr-counting the file's newlines (a pass over the
 * bytes that does no parsing), so the ratio is stable on a noisy machine. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "tools/common/hlo_file.h"

typedef struct file_entry {
  char path[8192];
  long size;
} file_entry_t;

static int by_size_desc(const void *a, const void *b) {
  long x = ((const file_entry_t *)a)->size, y = ((const file_entry_t *)b)->size;
  return (x < y) - (x > y);
}

static double best_parse_seconds(const char *text, size_t len, const char *name, int reps,
                                 int *out_modules) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    kiln_hlo_parse_options_t opts = {.filename = name};
    kiln_hlo_module_t **mods = NULL;
    int n = 0;
    double t0 = kiln_now_seconds();
    kiln_status s = kiln_hlo_parse_modules(text, len, &opts, &mods, &n);
    double dt = kiln_now_seconds() - t0;
    if (s) {
      kiln_status_report(s, name);
      exit(1);
    }
    for (int i = 0; i < n; i++) kiln_hlo_module_destroy(mods[i]);
    kiln_free(mods);
    *out_modules = n;
    if (dt < best) best = dt;
  }
  return best;
}

static double best_scan_seconds(const char *text, size_t len, int reps) {
  double best = 1e30;
  volatile size_t lines = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = kiln_now_seconds();
    size_t n = 0;
    const char *p = text, *end = text + len;
    while ((p = memchr(p, '\n', (size_t)(end - p)))) {
      n++;
      p++;
    }
    lines = n;
    double dt = kiln_now_seconds() - t0;
    if (dt < best) best = dt;
  }
  (void)lines;
  return best;
}

int main(int argc, char **argv) {
  int top = argc > 1 ? atoi(argv[1]) : 5;
  file_entry_t files[512];
  int nfiles = 0;
  const char *subs[] = {"xla", "real"};
  for (int s = 0; s < 2; s++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", kiln_corpus_dir(), subs[s]);
    DIR *d = opendir(dir);
    if (!d) {
      fprintf(stderr, "bench_parse: cannot open corpus folder %s (set KILN_CORPUS_DIR)\n", dir);
      return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) && nfiles < 512) {
      if (e->d_name[0] == '.' || strstr(e->d_name, "invalid_concat") ||
          kiln_str_ends_with(e->d_name, ".tsv") || kiln_str_ends_with(e->d_name, ".md"))
        continue;
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
  qsort(files, (size_t)nfiles, sizeof files[0], by_size_desc);
  if (top > nfiles) top = nfiles;
  printf("%-70s %9s %8s %9s %9s\n", "file", "MB", "modules", "MB/s", "vs-scan");
  double total_mb = 0, total_s = 0;
  for (int i = 0; i < top; i++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(files[i].path, &text, &len);
    if (s) return kiln_status_report(s, "bench_parse");
    int mods = 0;
    double t = best_parse_seconds(text, len, files[i].path, 5, &mods);
    double scan = best_scan_seconds(text, len, 5);
    double mb = (double)len / 1e6;
    const char *base = strrchr(files[i].path, '/');
    printf("%-70.70s %9.3f %8d %9.1f %8.1fx\n", base ? base + 1 : files[i].path, mb, mods, mb / t,
           t / scan);
    total_mb += mb;
    total_s += t;
    kiln_free(text);
  }
  printf("overall: %.3f MB in %.2f ms = %.1f MB/s (goal >= 50 MB/s)\n", total_mb, total_s * 1e3,
         total_mb / total_s);

  /* Linearity: the largest file's text repeated k times as k modules. */
  char *text = NULL;
  size_t len = 0;
  kiln_status s = kiln_read_file(files[0].path, &text, &len);
  if (s) return kiln_status_report(s, "bench_parse");
  double per_mb_1 = 0;
  for (int k = 1; k <= 16; k *= 4) {
    kiln_strbuf_t b = {0};
    for (int r = 0; r < k; r++) {
      if (r) kiln_strbuf_append(&b, "\n// -----\n");
      kiln_strbuf_append_n(&b, text, len);
    }
    int mods = 0;
    double t = best_parse_seconds(b.data, b.len, "repeated", 3, &mods);
    double us_per_mb = t * 1e6 / ((double)b.len / 1e6);
    if (k == 1) per_mb_1 = us_per_mb;
    printf("linearity: %2dx input (%8.3f MB): %8.2f ms, %8.0f us/MB (%.2fx of 1x)\n", k,
           (double)b.len / 1e6, t * 1e3, us_per_mb, us_per_mb / per_mb_1);
    kiln_strbuf_free(&b);
  }
  kiln_free(text);
  return 0;
}
