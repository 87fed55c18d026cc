/* Every emitter snippet of ../shared/hlo-corpus/emitters run as a user runs it with
 * `kiln-run --backend=host --compare=reference FILE`: the same loader (a bare fusion
 * computation becomes a module whose entry is the fusion), the same fake arguments, the
 * whole compiler (pass pipeline, fusion, buffer assignment, thunks, host JIT) and runtime
 * on the host device, the evaluator on the same inputs and the same comparison
 * (tools/common/corpus_run.h; the whole modules of xla/ and real/ go through the same
 * machinery in test_corpus_host_run). The fusion-level test (test_emitter_corpus_all)
 * compiles each fusion alone; this one catches what only the whole path shows (fake
 * inputs, sub-byte buffers, copy insertion around in-place fusions, fusions XLA formed).
 *
 * All 130 must match except the 2.4 TB broadcast (loop/broadcast_constant_block_dim_limit),
 * which is compiled and loaded only. A mismatch or a compile/run error fails the test; it
 * prints the tally, the time and each failure (the snippets left out with
 * KILN_TEST_VERBOSE=1). With KILN_CORPUS_SAMPLE=N (and under ASan) about one snippet in N
 * runs. A second case runs hand-written modules through the same path: an XLA-optimized
 * sort whose comparator holds a fusion (must match), and a long f16 sum, whose compiled
 * tree order differs from the evaluator's one-after-another f16 order (must be reported as
 * a mismatch: the check can fail). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/host/host_device.h"
#include "tools/common/corpus_run.h"

#define EMITTER_SNIPPETS 130

static void print_stats(const char *what, kiln_corpus_run_stats_t *st) {
  printf(
      "%s: passed %d / eligible %d, %d compiled only, %d not eligible, %d sampled out, %.1f s "
      "(compile %.1f s, run %.1f s)\n",
      what, st->passed, st->eligible, st->compiled_only, st->skipped, st->sampled_out, st->seconds,
      st->compile_ms / 1e3, st->run_ms / 1e3);
  printf("failures:\n%s", kiln_strbuf_cstr(&st->failures));
  if (getenv("KILN_TEST_VERBOSE")) printf("left out:\n%s", kiln_strbuf_cstr(&st->skips));
}

static void test_emitter_snippets_run_whole_on_the_host_and_match_the_evaluator(void **state) {
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  kiln_corpus_run_stats_t st;
  assert_null(
      kiln_corpus_run_emitters_on_device(dev, NULL, getenv("KILN_TEST_VERBOSE") != NULL, &st));
  print_stats("emitter snippets as whole modules on the host", &st);
  int passed = st.passed, eligible = st.eligible, compiled_only = st.compiled_only;
  int skipped = st.skipped, total = st.passed + st.compiled_only + st.sampled_out;
  kiln_corpus_run_stats_free(&st);
  kiln_device_destroy(dev);
  assert_int_equal(passed, eligible); /* no mismatch, no error */
  assert_int_equal(skipped, 0);       /* every snippet runs (or, too big, compiles) */
  assert_true(compiled_only <= 1);
  assert_int_equal(total, EMITTER_SNIPPETS);
}

static const char kSortWithFusedComparator[] =
    "HloModule sort_fused_comparator, is_scheduled=true\n"
    "fused_gt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  na = f32[] negate(a)\n"
    "  nb = f32[] negate(b)\n  ROOT gt = pred[] compare(na, nb), direction=GT\n}\n"
    "cmp {\n  p0 = f32[] parameter(0)\n  p1 = f32[] parameter(1)\n  p2 = s32[] parameter(2)\n"
    "  p3 = s32[] parameter(3)\n  ROOT f = pred[] fusion(p0, p1), kind=kLoop, calls=fused_gt\n}\n"
    "ENTRY e {\n  x = f32[16,32]{1,0} parameter(0)\n  i = s32[16,32]{1,0} iota(), "
    "iota_dimension=1\n"
    "  ROOT s = (f32[16,32]{1,0}, s32[16,32]{1,0}) sort(x, i), dimensions={1}, is_stable=true, "
    "to_apply=cmp\n}\n";

/* 1,048,576 f16 values summed into one f16: the evaluator adds them one after another in f16
 * (XLA's evaluator order), kiln in a tree, so the results differ by design (the corpus's
 * gpu_hlo_buffers.hlo: 317 vs 289.75). */
static const char kF16Sum[] =
    "HloModule f16_sum\n"
    "add {\n  a = f16[] parameter(0)\n  b = f16[] parameter(1)\n  ROOT s = f16[] add(a, b)\n}\n"
    "ENTRY e {\n  p = f16[1048576] parameter(0)\n  z = f16[] constant(0)\n"
    "  ROOT r = f16[] reduce(p, z), dimensions={0}, to_apply=add\n}\n";

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  fclose(f);
}

static void test_the_whole_module_check_passes_a_fused_comparator_and_fails_a_mismatch(
    void **state) {
  char root[] = "/tmp/kiln_whole_module_XXXXXX";
  assert_non_null(mkdtemp(root));
  char dir[256], a[300], b[300];
  snprintf(dir, sizeof dir, "%s/emitters", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(a, sizeof a, "%s/a_sort_fused_comparator.hlo", dir);
  snprintf(b, sizeof b, "%s/b_f16_sum.hlo", dir);
  write_file(a, kSortWithFusedComparator);
  write_file(b, kF16Sum);
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  const char *was = getenv("KILN_CORPUS_SAMPLE");
  char saved[64] = "";
  if (was) snprintf(saved, sizeof saved, "%s", was);
  setenv("KILN_CORPUS_SAMPLE", "1", 1); /* both, even under ASan */
  kiln_corpus_run_stats_t st;
  assert_null(kiln_corpus_run_emitters_on_device(dev, root, false, &st));
  if (was)
    setenv("KILN_CORPUS_SAMPLE", saved, 1);
  else
    unsetenv("KILN_CORPUS_SAMPLE");
  print_stats("hand-written modules", &st);
  const char *fails = kiln_strbuf_cstr(&st.failures);
  bool sum_mismatch = strstr(fails, "b_f16_sum.hlo: MISMATCH") != NULL;
  bool sort_failed = strstr(fails, "a_sort") != NULL;
  int eligible = st.eligible, passed = st.passed;
  kiln_corpus_run_stats_free(&st);
  kiln_device_destroy(dev);
  unlink(a);
  unlink(b);
  rmdir(dir);
  rmdir(root);
  assert_int_equal(eligible, 2);
  assert_int_equal(passed, 1);
  assert_false(sort_failed);
  assert_true(sum_mismatch);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_emitter_snippets_run_whole_on_the_host_and_match_the_evaluator),
      cmocka_unit_test(test_the_whole_module_check_passes_a_fused_comparator_and_fails_a_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
