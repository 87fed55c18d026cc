/* MLIR bytecode reader throughput: reads every valid VHLO portable artifact of StableHLO's
 * test suite (0.9 ... 1.20, container versions 0 ... 6, all upgraded to current StableHLO)
 * and prints MB/s, with a linearity check (reading the set 1x, 4x, 16x must cost ~linearly)
 * and, measured in the same run as the baseline, the HLO text parser's MB/s on the largest
 * HLO corpus file. Times are the thread's CPU time (the machine is shared), best of the rounds.
 * Usage: bench_mlir_bytecode [rounds] */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/frontend/mlir_bytecode.h"
#include "compiler/hlo/ir.h"
#include "tools/common/hlo_file.h"

#define VHLO_DIR KILN_SOURCE_DIR "/../shared/stablehlo/stablehlo/tests/vhlo"

typedef struct blob {
  char *data;
  size_t n;
} blob_t;

static double read_all_seconds(const blob_t *files, int nfiles, int times) {
  double t0 = kiln_thread_cpu_seconds();
  for (int t = 0; t < times; t++) {
    for (int i = 0; i < nfiles; i++) {
      kiln_mlir_module_t *m = NULL;
      kiln_status s = kiln_mlir_read_bytecode(files[i].data, files[i].n, &m);
      if (s) {
        kiln_status_report(s, "bench_mlir_bytecode");
        exit(1);
      }
      kiln_mlir_module_destroy(m);
    }
  }
  return kiln_thread_cpu_seconds() - t0;
}

static double best_of(const blob_t *files, int nfiles, int times, int rounds) {
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    double dt = read_all_seconds(files, nfiles, times);
    if (dt < best) best = dt;
  }
  return best;
}

/* The HLO text parser on the largest file of the corpus's xla/ folder: MB/s, or 0. */
static double hlo_parser_mb_per_s(int rounds, char *name, size_t cap) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/xla", kiln_corpus_dir());
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  char best[8192] = "";
  long best_size = -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!kiln_str_ends_with(e->d_name, ".hlo") || strstr(e->d_name, "invalid")) continue;
    char path[8192];
    snprintf(path, sizeof path, "%.4000s/%.255s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > best_size) {
      best_size = (long)st.st_size;
      snprintf(best, sizeof best, "%s", path);
      snprintf(name, cap, "%s", e->d_name);
    }
  }
  closedir(d);
  if (best_size <= 0) return 0;
  char *text;
  size_t len;
  kiln_status s = kiln_read_file(best, &text, &len);
  if (s) {
    kiln_status_free(s);
    return 0;
  }
  double fastest = 1e30;
  for (int r = 0; r < rounds; r++) {
    kiln_hlo_parse_options_t opts = {.filename = best};
    kiln_hlo_module_t **mods = NULL;
    int n = 0;
    double t0 = kiln_thread_cpu_seconds();
    s = kiln_hlo_parse_modules(text, len, &opts, &mods, &n);
    double dt = kiln_thread_cpu_seconds() - t0;
    if (s) {
      kiln_status_free(s);
      free(text);
      return 0;
    }
    for (int i = 0; i < n; i++) kiln_hlo_module_destroy(mods[i]);
    kiln_free(mods);
    if (dt < fastest) fastest = dt;
  }
  free(text);
  return (double)len / 1e6 / fastest;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  if (rounds < 1) rounds = 1;
  DIR *d = opendir(VHLO_DIR);
  if (d == NULL) {
    fprintf(stderr, "bench_mlir_bytecode: cannot open %s\n", VHLO_DIR);
    return 1;
  }
  blob_t files[256];
  int nfiles = 0;
  size_t total = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && nfiles < 256) {
    if (!kiln_str_ends_with(e->d_name, ".mlir.bc") || kiln_str_starts_with(e->d_name, "invalid_"))
      continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", VHLO_DIR, e->d_name);
    kiln_status s = kiln_read_file(path, &files[nfiles].data, &files[nfiles].n);
    if (s) {
      kiln_status_report(s, path);
      return 1;
    }
    total += files[nfiles].n;
    nfiles++;
  }
  closedir(d);
  printf("bench_mlir_bytecode: %d artifacts, %.2f MB, best of %d rounds\n", nfiles,
         (double)total / 1e6, rounds);
  read_all_seconds(files, nfiles, 1); /* warm up */
  char name[256] = "";
  double hlo = hlo_parser_mb_per_s(rounds, name, sizeof name);
  if (hlo > 0) {
    printf("  baseline, HLO text parser on %s: %.1f MB/s\n", name, hlo);
  } else {
    printf("  baseline: no HLO corpus file found (set KILN_CORPUS_DIR)\n");
  }
  double t1 = 0;
  const int times[] = {1, 4, 16};
  for (int k = 0; k < 3; k++) {
    double dt = best_of(files, nfiles, times[k], rounds);
    if (k == 0) t1 = dt;
    double mbs = (double)total * times[k] / 1e6 / dt;
    printf("  %2dx the set: %8.2f ms  %7.1f MB/s  cost per copy vs 1x: %.2f", times[k], dt * 1e3,
           mbs, dt / times[k] / t1);
    if (hlo > 0) printf("  bytecode / HLO text: %.2fx", mbs / hlo);
    printf("\n");
  }
  for (int i = 0; i < nfiles; i++) free(files[i].data);
  return 0;
}
