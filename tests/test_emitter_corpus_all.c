/* Every fusion of the corpus's emitters/ folder compiles with the emitter XLA would choose,
 * passes `ptxas -arch=sm_90` for every kernel of its chain (skipped with the printed reason
 * when ptxas is missing), runs on the host and matches the reference evaluator within
 * kiln_compare_kernel_tolerance.
 *
 * The expected emitter comes from the file name (…tests__<kind>__…): reduce_row,
 * reduce_column, reduce_multirow, reduce_column_small -> reduction; transpose, scatter,
 * concatenate, dynamic_update_slice -> that emitter; loop and convert -> loop. No fusion is
 * exempt. Scatter files on the sorted-indices path with a float add: the run of equal
 * indices is summed in registers first (XLA's reassociation), so they run on inputs in
 * [0.5, 1) within 64 ulp.
 * Reductions are checked as the reduction tests check them (hero_run_check): init values
 * (scalar parameters) 0, the reducer's identity, since the GPU algorithm starts every thread
 * from the init; f32 within 1e-5 of the partial-sum magnitude, integers exact.
 * Buffers too large for this machine are compiled and ptxas-checked but not run (listed).
 * Slow builds (KILN_CORPUS_SAMPLE) run a sample. Prints passed/total. */
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
#include "compiler/codegen/hero_analysis.h"
#include "emitter_test_util.h"
#include "tools/common/corpus.h"
/* hero_run_check: the reduction tests' runner (init values set to 0, the reducer's
 * identity; relative tolerance against the partial-sum magnitude). Not every helper of the
 * header is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "hero_test_util.h"
#include "tests/skip_util.h"
#pragma GCC diagnostic pop

/* The emitter the file name asks for; false for an unknown kind. */
static bool expected_emitter(const char *name, kiln_codegen_emitter_t *out) {
  const char *k = strstr(name, "tests__");
  if (!k) return false;
  k += 7;
  static const struct {
    const char *prefix;
    kiln_codegen_emitter_t e;
  } table[] = {
      {"reduce_row__", KILN_CODEGEN_EMITTER_REDUCTION},
      {"reduce_column__", KILN_CODEGEN_EMITTER_REDUCTION},
      {"reduce_multirow__", KILN_CODEGEN_EMITTER_REDUCTION},
      {"reduce_column_small__", KILN_CODEGEN_EMITTER_REDUCTION},
      {"transpose__", KILN_CODEGEN_EMITTER_TRANSPOSE},
      {"scatter__", KILN_CODEGEN_EMITTER_SCATTER},
      {"concatenate__", KILN_CODEGEN_EMITTER_CONCATENATE},
      {"dynamic_update_slice__", KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE},
      {"loop__", KILN_CODEGEN_EMITTER_LOOP},
      {"convert__", KILN_CODEGEN_EMITTER_LOOP},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (strncmp(k, table[i].prefix, strlen(table[i].prefix)) == 0) {
      *out = table[i].e;
      return true;
    }
  return false;
}

/* A REDUCTION fusion: compiled by the fusion compiler, checked as the reduction tests do
 * (hero_run_check: scalar parameters, i.e. init values, are 0 = the add reducers' identity,
 * since the GPU algorithm starts every thread from the init as XLA's does; floats within
 * 1e-5 of sqrt(summed) for f32). Returns an error status or fills *ok. */
static kiln_status run_reduction(const kiln_hlo_computation_t *c, kiln_host_jit_t *jit, bool *ok,
                                 char *line, size_t n, kiln_runner_report_t *r) {
  memset(r, 0, sizeof(*r));
  kiln_hero_analysis_t ha;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_analyze(c, &ha));
  static int counter;
  char kname[32];
  snprintf(kname, sizeof(kname), "corpus_red%d", counter++);
  kiln_codegen_compile_options_t co = {0};
  co.kernel_name = kname;
  kiln_codegen_kernel_t k;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_codegen_kernel_emit(c, &co, &k));
  kiln_status ps = kiln_codegen_kernel_ptxas_check(&k, NULL);
  r->ptx_checked = !ps || kiln_status_code(ps) != KILN_UNAVAILABLE;
  r->ptx_ok = !ps;
  snprintf(r->ptx_note, sizeof(r->ptx_note), "%.200s", ps ? kiln_status_message(ps) : "ptxas -arch=sm_90: ok");
  kiln_status_free(ps);
  int64_t summed = ha.emitter != KILN_HERO_EMITTER_REDUCTION ? 1
                   : ha.reduction.is_row                  ? ha.reduction.dims[0] * ha.reduction.dims[2]
                                                          : ha.reduction.dims[1];
  hero_run_result_t rr;
  kiln_status s = hero_run_check(c, &k, jit, NULL, false, summed, true, 7, &rr);
  kiln_codegen_kernel_free(&k);
  if (s) return s;
  r->elements = rr.elements;
  r->mismatches = rr.mismatches;
  r->max_ulp = rr.max_ulp;
  *ok = rr.mismatches == 0 && (!r->ptx_checked || r->ptx_ok);
  snprintf(line, n, "max rel %.2g%s%s", rr.max_rel, rr.mismatches ? ": " : "", rr.first);
  return NULL;
}

static void test_every_emitter_fusion_compiles_with_xla_choice_and_matches(void **state) {
  size_t n = 0;
  char **names = emt_corpus_files("", &n);
  if (!names) {
    KILN_SKIP("no corpus at %s/emitters", kiln_corpus_dir());
  }
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  int total = 0, passed = 0, compiled_only = 0, ptx_ok = 0, ptx_checked = 0, unexpected = 0;
  int per_kind_total[16] = {0}, per_kind_pass[16] = {0};
  bool ptx_note_printed = false;
  for (size_t i = 0; i < n; i++) {
    if (!kiln_corpus_sampled(names[i])) continue;
    const char *shortname = emt_short_name(names[i]);
    kiln_codegen_emitter_t want = KILN_CODEGEN_EMITTER_LOOP;
    if (!expected_emitter(names[i], &want)) {
      printf("FAIL %s: unknown kind in the file name\n", shortname);
      total++, unexpected++;
      continue;
    }
    char path[2048];
    snprintf(path, sizeof(path), "%s/emitters/%s", kiln_corpus_dir(), names[i]);
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) {
      printf("FAIL %s: load: %s\n", shortname, kiln_status_message(s));
      kiln_status_free(s);
      total++;
      continue;
    }
    const kiln_hlo_computation_t **cs = NULL;
    int nc = 0;
    kiln_runner_collect_fusions(f->modules[0], &cs, &nc);
    for (int ci = 0; ci < nc; ci++) {
      kiln_codegen_emitter_t got = kiln_codegen_classify(cs[ci], NULL);
      total++;
      per_kind_total[want]++;
      if (got != want) {
        printf("FAIL %s: emitter %s, XLA's is %s\n", shortname, kiln_codegen_emitter_name(got),
               kiln_codegen_emitter_name(want));
        unexpected++;
        continue;
      }
      kiln_runner_options_t o;
      kiln_runner_options_init(&o);
      o.check_ptx = true;
      o.jit = jit;
      if (emt_sorted_float_add(cs[ci])) o.float_lo = 0.5, o.float_hi = 1, o.max_ulp = 64;
      kiln_runner_report_t r;
      bool red_ok = false;
      char red_line[320] = "";
      if (got == KILN_CODEGEN_EMITTER_REDUCTION)
        s = run_reduction(cs[ci], jit, &red_ok, red_line, sizeof(red_line), &r);
      else
        s = kiln_runner_check(cs[ci], &o, &r);
      if (!r.ptx_checked && r.ptx_note[0] && !ptx_note_printed) {
        printf("ptxas check %s\n", r.ptx_note);
        ptx_note_printed = true;
      }
      if (r.ptx_checked) {
        ptx_checked++;
        ptx_ok += r.ptx_ok;
        if (!r.ptx_ok) printf("PTX  %s: %s\n", shortname, r.ptx_note);
      }
      if (s && kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED) {
        printf("COMPILED ONLY %s: %s\n", shortname, kiln_status_message(s));
        kiln_status_free(s);
        compiled_only++;
        total--, per_kind_total[want]--;
        continue;
      }
      if (s) {
        printf("FAIL %s [%s]: %s\n", shortname, kiln_codegen_emitter_name(got),
               kiln_status_message(s));
        kiln_status_free(s);
        continue;
      }
      bool ok = got == KILN_CODEGEN_EMITTER_REDUCTION
                    ? red_ok
                    : r.mismatches == 0 && (!r.ptx_checked || r.ptx_ok);
      if (got == KILN_CODEGEN_EMITTER_REDUCTION)
        snprintf(r.first_mismatch, sizeof(r.first_mismatch), "%.200s", red_line);
      passed += ok;
      per_kind_pass[want] += ok;
      printf("%s %-62s %-20s %8lld elements, max %lld ulp %s\n", ok ? "ok  " : "FAIL", shortname,
             kiln_codegen_emitter_name(got), (long long)r.elements, (long long)r.max_ulp,
             r.first_mismatch);
    }
    kiln_free(cs);
    kiln_hlo_file_free(f);
  }
  printf("emitter corpus: %d/%d passed (host == evaluator, XLA's emitter); %d compiled only; ptxas %d/%d; "
         "%d wrong emitter choices\n",
         passed, total, compiled_only, ptx_ok, ptx_checked, unexpected);
  for (int k = 0; k < 16; k++)
    if (per_kind_total[k])
      printf("  %-20s %d/%d\n", kiln_codegen_emitter_name((kiln_codegen_emitter_t)k),
             per_kind_pass[k], per_kind_total[k]);
  emt_free_names(names, n);
  kiln_host_jit_destroy(jit);
  assert_true(total > 0);
  assert_int_equal(unexpected, 0);
  assert_int_equal(ptx_ok, ptx_checked);
  assert_int_equal(passed, total);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_emitter_fusion_compiles_with_xla_choice_and_matches),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
