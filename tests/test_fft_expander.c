/* fft_expander: FFT, IFFT, RFFT and IRFFT over 1, 2 and 3 dimensions, power-of-two and odd
 * lengths, c64 and c128, batched, evaluate like the evaluator's transforms (within the
 * tolerance of each leaf's largest magnitude) after the expander and the whole pipeline,
 * and run on the host like the evaluator; the corpus modules with fft keep their results. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pass_test_util.h"
#include "expander_test_util.h"
#include "dense_expander_test_util.h"

#define LIST "fft_expander"

static double fft_case(const char *in, const char *out, const char *type, const char *lengths, bool host) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule f\n\nENTRY e {\n  x = %s parameter(0)\n  ROOT y = %s fft(x), fft_type=%s, fft_length={%s}\n}\n", in,
           out, type, lengths);
  double e = dx_check_text(text, LIST, KILN_OP_FFT, host);
  if (e < 0 || e > 1) print_error("%s -> %s %s {%s}: error %g\n", in, out, type, lengths, e);
  return e;
}

typedef struct fft_case_t {
  const char *in, *out, *type, *len;
} fft_case_t;

/* Runs every case (every `host_every`-th also on the host): the number out of tolerance. */
static int run_cases(const fft_case_t *cases, size_t n, size_t host_every) {
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fft_case(cases[i].in, cases[i].out, cases[i].type, cases[i].len, i % host_every == 0);
    bad += e < 0 || e > 1;
  }
  return bad;
}

static void test_one_dimensional_transforms_match_the_evaluator(void **state) {
  const fft_case_t cases[] = {
      {"c64[3,8]", "c64[3,8]", "FFT", "8"},       {"c64[2,5]", "c64[2,5]", "FFT", "5"},
      {"c64[6]", "c64[6]", "IFFT", "6"},          {"f32[3,9]", "c64[3,5]", "RFFT", "9"},
      {"f32[4,8]", "c64[4,5]", "RFFT", "8"},      {"c64[3,5]", "f32[3,8]", "IRFFT", "8"},
      {"c64[3,5]", "f32[3,9]", "IRFFT", "9"},     {"c128[2,7]", "c128[2,7]", "FFT", "7"},
      {"f64[5]", "c128[3]", "RFFT", "5"},         {"c128[2,4]", "f64[2,6]", "IRFFT", "6"},
      {"c64[1]", "c64[1]", "FFT", "1"},           {"c64[2,1]", "f32[2,1]", "IRFFT", "1"},
  };
  assert_int_equal(run_cases(cases, sizeof cases / sizeof cases[0], 3), 0);
}

static void test_multi_dimensional_transforms_match_the_evaluator(void **state) {
  const fft_case_t cases[] = {
      {"c64[2,4,6]", "c64[2,4,6]", "FFT", "4,6"},     {"c64[4,3]", "c64[4,3]", "IFFT", "4,3"},
      {"f32[3,4,6]", "c64[3,4,4]", "RFFT", "4,6"},    {"c64[2,4,4]", "f32[2,4,6]", "IRFFT", "4,6"},
      {"c64[2,3,4]", "c64[2,3,4]", "FFT", "2,3,4"},   {"f32[2,3,5]", "c64[2,3,3]", "RFFT", "2,3,5"},
      {"c64[3,2,3]", "f32[3,2,5]", "IRFFT", "3,2,5"}, {"c128[3,5]", "c128[3,5]", "IFFT", "3,5"},
  };
  assert_int_equal(run_cases(cases, sizeof cases / sizeof cases[0], 2), 0);
}

static void test_whole_pipeline_keeps_the_transform(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule f\n\nENTRY e {\n  x = f32[4,10] parameter(0)\n  y = c64[4,6] fft(x), fft_type=RFFT, fft_length={10}\n"
      "  ROOT z = f32[4,10] fft(y), fft_type=IRFFT, fft_length={10}\n}\n");
  double e = dx_error_on_fake_args(m, NULL, KILN_OP_FFT);
  assert_true(e >= 0 && e <= 1);
  kiln_hlo_module_destroy(m);
}

static void test_corpus_ffts_match_on_the_host(void **state) {
  /* import.hlo's fft is in a module the verifier rejects (a convolution elsewhere), and
   * thunk_coverage__cpu.hlo holds a TopK custom-call: those two are not runnable */
  int n = dx_check_corpus_file("xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo", KILN_OP_FFT,
                               LIST);
  n += dx_check_corpus_file("xla/xla__backends__cpu__tests__thunk_coverage__host_offload.hlo", KILN_OP_FFT, LIST);
  assert_int_equal(n, 2);
}

/* A real signal holding a NaN or an infinity: a 1-D RFFT's bin 0, and bin n/2 for an even n,
 * keep an imaginary part of exactly 0 (as numpy and XLA's CPU FFT give them) in the evaluator,
 * after the expander and on the host; the other bins are not finite (but see radix2 below).
 * fuzz-4813871: the expander's twiddle column of zeros gave (NaN, NaN) at bin 0, the
 * evaluator (NaN, 0) for n = 1 only. */
static void test_rfft_of_a_nan_keeps_real_dc_and_nyquist_bins(void **state) {
  static const int64_t lens[] = {1, 2, 6, 7, 8};
  for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
    int64_t n = lens[t], m = n / 2 + 1;
    char text[512];
    snprintf(text, sizeof text,
             "HloModule f\n\nENTRY e {\n  x = f32[2,%lld] parameter(0)\n"
             "  y = c64[2,%lld] fft(x), fft_type=RFFT, fft_length={%lld}\n"
             "  ROOT i = f32[2,%lld] imag(y)\n}\n",
             (long long)n, (long long)m, (long long)n, (long long)m);
    kiln_hlo_module_t *mod = pt_parse(text);
    kiln_arena_t arena;
    kiln_arena_init(&arena);
    kiln_literal_t *x = kiln_literal_make(&arena, mod->entry->parameters[0]->shape);
    for (int64_t k = 0; k < 2 * n; k++) kiln_literal_set_f64(x, k, (double)(k % 5) - 2.0);
    kiln_literal_set_f64(x, 0, NAN);               /* row 0: a NaN first */
    kiln_literal_set_f64(x, 2 * n - 1, -INFINITY); /* row 1: an infinity last */
    /* Past the real bins a NaN spreads as the algorithm does: the evaluator's radix-2
     * butterflies (n = 4, 8, ...) keep some bins finite that a DFT's dots make NaN. */
    bool radix2 = n >= 4 && (n & (n - 1)) == 0;
    if (!radix2) assert_true(dx_host_run_matches_args(mod, &x, 1, text));
    for (int expanded = 0; expanded < 2; expanded++) {
      if (expanded) pt_run(mod, LIST);
      const kiln_literal_t *im = pt_eval(mod, &x, 1, &arena);
      const float *v = im->data;
      for (int64_t row = 0; row < 2; row++)
        for (int64_t j = 0; j < m; j++) {
          bool real_bin = j == 0 || 2 * j == n;
          if (real_bin ? v[row * m + j] != 0.0f : !radix2 && isfinite(v[row * m + j]))
            fail_msg("n %lld, %s: bin %lld of row %lld is %g", (long long)n,
                     expanded ? "expanded" : "evaluator", (long long)j, (long long)row,
                     (double)v[row * m + j]);
        }
    }
    kiln_arena_destroy(&arena);
    kiln_hlo_module_destroy(mod);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_dimensional_transforms_match_the_evaluator),
      cmocka_unit_test(test_multi_dimensional_transforms_match_the_evaluator),
      cmocka_unit_test(test_whole_pipeline_keeps_the_transform),
      cmocka_unit_test(test_corpus_ffts_match_on_the_host),
      cmocka_unit_test(test_rfft_of_a_nan_keeps_real_dc_and_nyquist_bins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
