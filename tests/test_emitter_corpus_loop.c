/* Every loop-kind fusion of the corpus's emitters/ folder (one bare computation per file,
 * or the fusions of its entry) compiles, passes `ptxas -arch=sm_90` (when ptxas exists),
 * runs on the host on generated inputs and matches the reference evaluator.
 *
 * Loop kind (kiln_codegen_classify): no reduce hero, no transpose hero, no scatter,
 * concatenate root, dynamic-update-slice or sort. Tolerances (kiln_compare_kernel_tolerance):
 * exact for integers and pred, 1 ulp for f16 / bf16 / f8 / f4, 4 ulp for f32, 8 ulp for f64.
 * A fusion whose buffers are too large to allocate here (XLA's block-dim-limit broadcast:
 * 1.2e12 elements) is compiled and ptxas-checked but not run; it is listed as such and not
 * counted in the run total. Prints "passed/total". */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tools/common/fusion_runner.h"
#include "tools/common/hlo_file.h"
#include "tests/skip_util.h"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_corpus_loop_fusions_match_evaluator(void **state) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/emitters", kiln_corpus_dir());
  DIR *d = opendir(dir);
  if (!d) {
    KILN_SKIP("no corpus at %s", dir);
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 4 || strcmp(e->d_name + l - 4, ".hlo") != 0) continue;
    if (n == cap) names = kiln_realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
    names[n++] = kiln_strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof(*names), cmp_str);

  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(0, &pool));
  int total = 0, passed = 0, compiled_only = 0, ptx_ok = 0, ptx_checked = 0, other_kind = 0;
  bool ptx_skip_printed = false;
  for (size_t i = 0; i < n; i++) {
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) {
      printf("FAIL %s: load: %s\n", names[i], kiln_status_message(s));
      kiln_status_free(s);
      total++;
      continue;
    }
    for (int mi = 0; mi < f->num_modules; mi++) {
      const kiln_hlo_computation_t **cs = NULL;
      int nc = 0;
      kiln_runner_collect_fusions(f->modules[mi], &cs, &nc);
      for (int ci = 0; ci < nc; ci++) {
        const kiln_hlo_instruction_t *hero = NULL;
        kiln_codegen_emitter_t kind = kiln_codegen_classify(cs[ci], &hero);
        if (kind != KILN_CODEGEN_EMITTER_LOOP) {
          other_kind++;
          continue;
        }
        kiln_runner_options_t o;
        kiln_runner_options_init(&o);
        o.check_ptx = true;
        o.jit = jit;
        o.pool = pool;
        kiln_runner_report_t r;
        s = kiln_runner_check(cs[ci], &o, &r);
        if (o.check_ptx && !r.ptx_checked && !ptx_skip_printed && r.ptx_note[0]) {
          printf("ptxas check %s\n", r.ptx_note);
          ptx_skip_printed = true;
        }
        if (r.ptx_checked) {
          ptx_checked++;
          ptx_ok += r.ptx_ok;
          if (!r.ptx_ok) printf("PTX  %s: %s\n", names[i], r.ptx_note);
        }
        if (s && kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED) {
          printf("COMPILED ONLY %s: %s\n", names[i], kiln_status_message(s));
          compiled_only++;
          kiln_status_free(s);
          continue;
        }
        total++;
        if (s) {
          printf("FAIL %s: %s\n", names[i], kiln_status_message(s));
          kiln_status_free(s);
          continue;
        }
        bool ok = r.mismatches == 0 && (!r.ptx_checked || r.ptx_ok);
        passed += ok;
        printf("%s %-70s %8lld elements, max %lld ulp (tolerance %lld)%s%s\n", ok ? "ok  " : "FAIL",
               names[i], (long long)r.elements, (long long)r.max_ulp, (long long)r.tolerance,
               r.mismatches ? ": " : "", r.first_mismatch);
      }
      kiln_free(cs);
    }
    kiln_hlo_file_free(f);
  }
  printf("loop-kind fusions: %d/%d passed (host run == evaluator); %d compiled only; "
         "ptxas: %d/%d; %d fusions of other kinds skipped\n",
         passed, total, compiled_only, ptx_ok, ptx_checked, other_kind);
  for (size_t i = 0; i < n; i++) kiln_free(names[i]);
  kiln_free(names);
  kiln_host_pool_destroy(pool);
  kiln_host_jit_destroy(jit);
  assert_true(total > 0);
  assert_int_equal(ptx_ok, ptx_checked);
  assert_int_equal(passed, total);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_loop_fusions_match_evaluator),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
