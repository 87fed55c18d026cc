/* kiln-fuzz: differential fuzzing of the whole compiler (tools/common/hlo_gen.h for the
 * programs, tools/common/hlo_gen_diff.h for the test). Each generated module is compiled and
 * run on the host backend and compared with the reference evaluator; a failure is bisected to
 * the pass that introduced it, minimized, and written as a small .hlo reproducer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/device.h"
#include "tools/common/hlo_file.h"
#include "tools/common/hlo_gen.h"
#include "tools/common/hlo_gen_diff.h"

static void usage(void) {
  fprintf(
      stderr,
      "usage: kiln-fuzz [--programs=N] [--seed=S] [--max-nodes=K] [--max-elements=E]\n"
      "                 [--out=DIR] [--no-minimize] [--verbose] [--quiet]\n"
      "       kiln-fuzz --print=SEED      print the program of one seed\n"
      "       kiln-fuzz FILE.hlo ...      run the differential test on files\n"
      "Generates N programs (default 100) from seed S (default 1; program i uses seed S+i),\n"
      "compiles and runs each on the host backend and compares it with the evaluator.\n"
      "A failure is bisected over the pass pipeline, minimized and written to\n"
      "DIR/fuzz-<seed>.hlo (default DIR: .). Prints the coverage table; exits 1 on any\n"
      "failure (mismatch, compile or run error, or a generated module that does not verify).\n");
}

typedef struct fuzz_ctx {
  kiln_device_t *dev;
  kiln_diff_outcome_t outcome; /* the failure being minimized */
} fuzz_ctx_t;

static bool still_fails(void *ctx, const char *text) {
  fuzz_ctx_t *fc = ctx;
  kiln_diff_options_t o = {fc->dev, false, NULL};
  kiln_diff_result_t r;
  kiln_diff_check_text(text, &o, &r);
  return r.outcome == fc->outcome;
}

static int write_file(const char *path, const char *header, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "kiln-fuzz: cannot write %s\n", path);
    return -1;
  }
  fprintf(f, "%s%s", header, text);
  fclose(f);
  return 0;
}

static int run_files(kiln_device_t *dev, int argc, char **argv, int first) {
  int failures = 0;
  kiln_diff_coverage_t *cov = kiln_calloc(1, sizeof *cov);
  for (int i = first; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(argv[i], &f);
    if (s) {
      fprintf(stderr, "%s: %s\n", argv[i], kiln_status_message(s));
      kiln_status_free(s);
      failures++;
      continue;
    }
    kiln_diff_options_t o = {dev, true, cov};
    kiln_diff_result_t r;
    kiln_diff_check_text(f->text, &o, &r);
    printf("%s: %s%s%s%s%s\n", argv[i], kiln_diff_outcome_name(r.outcome), r.what[0] ? ": " : "",
           r.what, r.culprit[0] ? "; introduced " : "", r.culprit);
    failures += kiln_diff_outcome_is_failure(r.outcome);
    kiln_hlo_file_free(f);
  }
  kiln_free(cov);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  long long programs = 100, seed = 1, print_seed = -1;
  kiln_hlo_gen_options_t go;
  memset(&go, 0, sizeof go);
  const char *out_dir = ".";
  bool minimize = true, verbose = false, quiet = false;
  int first_file = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strncmp(a, "--programs=", 11))
      programs = atoll(a + 11);
    else if (!strncmp(a, "--seed=", 7))
      seed = atoll(a + 7);
    else if (!strncmp(a, "--max-nodes=", 12))
      go.max_nodes = atoi(a + 12);
    else if (!strncmp(a, "--max-elements=", 15))
      go.max_elements = atoll(a + 15);
    else if (!strncmp(a, "--out=", 6))
      out_dir = a + 6;
    else if (!strncmp(a, "--print=", 8))
      print_seed = atoll(a + 8);
    else if (!strcmp(a, "--no-minimize"))
      minimize = false;
    else if (!strcmp(a, "--verbose"))
      verbose = true;
    else if (!strcmp(a, "--quiet"))
      quiet = true;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      return 0;
    } else if (a[0] == '-') {
      fprintf(stderr, "kiln-fuzz: unknown flag %s\n", a);
      usage();
      return 2;
    } else if (!first_file) {
      first_file = i;
    }
  }
  if (print_seed >= 0) {
    go.seed = (uint64_t)print_seed;
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
    char *text = kiln_hlo_gen_render(p);
    fputs(text, stdout);
    kiln_free(text);
    kiln_hlo_gen_free(p);
    return 0;
  }
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_device_create("host", &dev);
  if (s) {
    fprintf(stderr, "kiln-fuzz: no host device: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return 2;
  }
  if (first_file) {
    int rc = run_files(dev, argc, argv, first_file);
    kiln_device_destroy(dev);
    return rc;
  }
  kiln_diff_coverage_t *cov = kiln_calloc(1, sizeof *cov);
  int failures = 0;
  double t0 = kiln_now_seconds();
  int64_t instructions = 0;
  for (long long i = 0; i < programs; i++) {
    go.seed = (uint64_t)(seed + i);
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
    char *text = kiln_hlo_gen_render(p);
    instructions += kiln_hlo_gen_size(p);
    if (verbose) fprintf(stderr, "kiln-fuzz: seed %llu\n", (unsigned long long)go.seed);
    kiln_diff_options_t o = {dev, true, cov};
    kiln_diff_result_t r;
    kiln_diff_check_text(text, &o, &r);
    if (kiln_diff_outcome_is_failure(r.outcome)) {
      failures++;
      printf("seed %llu: %s: %s%s%s\n", (unsigned long long)go.seed,
             kiln_diff_outcome_name(r.outcome), r.what, r.culprit[0] ? "; introduced " : "",
             r.culprit);
      int tries = 0;
      if (minimize) {
        fuzz_ctx_t fc = {dev, r.outcome};
        tries = kiln_hlo_gen_minimize(&p, still_fails, &fc, 300);
      }
      char *small = kiln_hlo_gen_render(p);
      char path[4096], header[1024];
      snprintf(path, sizeof path, "%s/fuzz-%llu.hlo", out_dir, (unsigned long long)go.seed);
      snprintf(header, sizeof header,
               "// kiln-fuzz seed %llu, minimized in %d tries (%d instructions): %s: %.600s%s%s\n",
               (unsigned long long)go.seed, tries, kiln_hlo_gen_size(p),
               kiln_diff_outcome_name(r.outcome), r.what, r.culprit[0] ? "; introduced " : "",
               r.culprit);
      for (char *c = header + 3; *c && c[1]; c++)
        if (*c == '\n') *c = ' ';
      if (!write_file(path, header, small)) printf("  reproducer: %s\n", path);
      kiln_free(small);
    } else if (verbose) {
      fprintf(stderr, "  %s%s%s\n", kiln_diff_outcome_name(r.outcome), r.what[0] ? ": " : "",
              r.what);
    }
    kiln_free(text);
    kiln_hlo_gen_free(p);
  }
  double secs = kiln_now_seconds() - t0;
  if (!quiet) kiln_diff_coverage_print(stdout, cov);
  printf(
      "kiln-fuzz: %lld programs (seeds %lld..%lld, %lld instructions), %d failures, %.1f s (%.1f "
      "ms per program)\n",
      programs, seed, seed + programs - 1, (long long)instructions, failures, secs,
      programs ? 1e3 * secs / (double)programs : 0.0);
  kiln_free(cov);
  kiln_device_destroy(dev);
  return failures ? 1 : 0;
}
