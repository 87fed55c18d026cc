/* Every fusion of the corpus's emitters/ folder compiles with the emitter XLA would choose,
 * passes `ptxas -arch=sm_90` for every kernel of its chain (skipped with the printed reason
 * when ptxas is missing), runs on the host and matches the reference evaluator within
 * kiln_fusion_default_ulp.
 *
 * The expected emitter comes from the file name (…tests__<kind>__…): reduce_row,
 * reduce_column, reduce_multirow, reduce_column_small -> reduction; transpose, scatter,
 * concatenate, dynamic_update_slice -> that emitter; loop and convert -> loop. Known
 * exceptions, each listed with its reason and counted as a pass only when the fusion still
 * compiles and matches the evaluator under the emitter noted:
 *   - transpose files that XLA's own tests run through the loop emitter (fused_transpose_*
 *     and transposes that keep the minor dimension or are too small for the tiled path):
 *     loop;
 *   - the loop test `dynamic_update_slice` (a c64 DUS under a negate epilogue: XLA's loop
 *     emitter; kiln's elemental emitter has no dynamic-update-slice and the DUS emitter
 *     takes no epilogue or complex values): UNIMPLEMENTED, listed as not run;
 *   - scatter files on the sorted-indices path with a float add: the run of equal indices
 *     is summed in registers first (XLA's reassociation), so they run on inputs in
 *     [0.5, 1) within 64 ulp; reductions likewise sum in their own order: inputs in
 *     [0.5, 1), within 256 ulp (integer outputs stay exact).
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

#include "compiler/codegen/fusion_compiler.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The emitter the file name asks for; false for an unknown kind. */
static bool expected_emitter(const char *name, kiln_fusion_emitter_t *out) {
  const char *k = strstr(name, "tests__");
  if (!k) return false;
  k += 7;
  static const struct {
    const char *prefix;
    kiln_fusion_emitter_t e;
  } table[] = {
      {"reduce_row__", KILN_FUSION_EMITTER_REDUCTION},      {"reduce_column__", KILN_FUSION_EMITTER_REDUCTION},
      {"reduce_multirow__", KILN_FUSION_EMITTER_REDUCTION}, {"reduce_column_small__", KILN_FUSION_EMITTER_REDUCTION},
      {"transpose__", KILN_FUSION_EMITTER_TRANSPOSE},       {"scatter__", KILN_FUSION_EMITTER_SCATTER},
      {"concatenate__", KILN_FUSION_EMITTER_CONCATENATE},   {"dynamic_update_slice__", KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE},
      {"loop__", KILN_FUSION_EMITTER_LOOP},                 {"convert__", KILN_FUSION_EMITTER_LOOP},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (strncmp(k, table[i].prefix, strlen(table[i].prefix)) == 0) {
      *out = table[i].e;
      return true;
    }
  return false;
}

/* Fusions where the choice differs from the file name on purpose, with the reason. */
static const char *known_exception(const char *name, kiln_fusion_emitter_t want, kiln_fusion_emitter_t got) {
  if (want == KILN_FUSION_EMITTER_TRANSPOSE && got == KILN_FUSION_EMITTER_LOOP)
    return "XLA's transpose test input that its hero rules send to the loop emitter (minor "
           "dimension kept, too small, or not a tiled transpose)";
  if (want == KILN_FUSION_EMITTER_LOOP && got == KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE &&
      strstr(name, "loop__dynamic_update_slice"))
    return "c64 DUS under a negate epilogue: XLA's loop emitter; kiln's elemental emitter has no "
           "dynamic-update-slice, the DUS emitter takes no epilogue / complex values";
  return NULL;
}

static bool sorted_float_add(const kiln_hlo_computation_t *c) {
  const kiln_hlo_instruction_t *r = c->root;
  if (r->opcode != KILN_OP_SCATTER || !r->indices_are_sorted || r->unique_indices) return false;
  const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(r, "to_apply");
  return f && f->root->opcode == KILN_OP_ADD && kiln_elem_type_is_float(r->shape->type);
}

static void test_every_emitter_fusion_compiles_with_xla_choice_and_matches(void **state) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/emitters", kiln_corpus_dir());
  DIR *d = opendir(dir);
  if (!d) {
    printf("SKIPPED: no corpus at %s\n", dir);
    return;
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
  int total = 0, passed = 0, exceptions = 0, not_run = 0, compiled_only = 0, ptx_ok = 0, ptx_checked = 0, unexpected = 0;
  int per_kind_total[16] = {0}, per_kind_pass[16] = {0};
  bool ptx_note_printed = false;
  for (size_t i = 0; i < n; i++) {
    if (!kiln_corpus_sampled(names[i])) continue;
    const char *shortname = strstr(names[i], "tests__") ? strstr(names[i], "tests__") + 7 : names[i];
    kiln_fusion_emitter_t want = KILN_FUSION_EMITTER_LOOP;
    if (!expected_emitter(names[i], &want)) {
      printf("FAIL %s: unknown kind in the file name\n", shortname);
      total++, unexpected++;
      continue;
    }
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
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
    kiln_fusion_collect(f->modules[0], &cs, &nc);
    for (int ci = 0; ci < nc; ci++) {
      kiln_fusion_emitter_t got = kiln_fusion_classify(cs[ci], NULL);
      const char *exc = got == want ? NULL : known_exception(names[i], want, got);
      total++;
      per_kind_total[want]++;
      if (got != want && !exc) {
        printf("FAIL %s: emitter %s, XLA's is %s\n", shortname, kiln_fusion_emitter_name(got),
               kiln_fusion_emitter_name(want));
        unexpected++;
        continue;
      }
      kiln_fusion_run_options_t o;
      kiln_fusion_run_options_init(&o);
      o.check_ptx = true;
      o.jit = jit;
      if (sorted_float_add(cs[ci])) o.float_lo = 0.5, o.float_hi = 1, o.max_ulp = 64;
      /* Reductions sum in the GPU algorithm's order (per-thread partials, shuffle trees,
       * atomics across blocks), not the evaluator's: positive inputs (no cancellation) and
       * a bound of 256 ulp for the reassociation. Wrong results (sign, NaN, double
       * counting) are still far beyond it. */
      if (want == KILN_FUSION_EMITTER_REDUCTION) o.float_lo = 0.5, o.float_hi = 1, o.max_ulp = 256;
      kiln_fusion_run_report_t r;
      s = kiln_fusion_run_check(cs[ci], &o, &r);
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
      if (s && exc && kiln_status_code(s) == KILN_UNIMPLEMENTED) {
        printf("known %s: %s (%s)\n", shortname, exc, kiln_status_message(s));
        kiln_status_free(s);
        not_run++;
        total--, per_kind_total[want]--;
        continue;
      }
      if (s) {
        printf("FAIL %s [%s]: %s\n", shortname, kiln_fusion_emitter_name(got), kiln_status_message(s));
        kiln_status_free(s);
        continue;
      }
      bool ok = r.mismatches == 0 && (!r.ptx_checked || r.ptx_ok);
      passed += ok;
      per_kind_pass[want] += ok;
      if (exc && ok) exceptions++;
      printf("%s %-62s %-20s %8lld elements, max %lld ulp%s%s%s%s\n", ok ? "ok  " : "FAIL", shortname,
             kiln_fusion_emitter_name(got), (long long)r.elements, (long long)r.max_ulp, r.mismatches ? ": " : "",
             r.first_mismatch, exc ? " [known: " : "", exc ? "loop fallback]" : "");
    }
    kiln_free(cs);
    kiln_hlo_file_free(f);
  }
  printf("emitter corpus: %d/%d passed (host == evaluator, XLA's emitter or a listed fallback); "
         "%d listed fallbacks passed; %d listed exceptions not run; %d compiled only; ptxas %d/%d; "
         "%d wrong emitter choices\n",
         passed, total, exceptions, not_run, compiled_only, ptx_ok, ptx_checked, unexpected);
  for (int k = 0; k < 16; k++)
    if (per_kind_total[k])
      printf("  %-20s %d/%d\n", kiln_fusion_emitter_name((kiln_fusion_emitter_t)k), per_kind_pass[k], per_kind_total[k]);
  for (size_t i = 0; i < n; i++) kiln_free(names[i]);
  kiln_free(names);
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
  return cmocka_run_group_tests(tests, NULL, NULL);
}
