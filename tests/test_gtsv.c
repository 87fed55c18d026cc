/* base/gtsv.h on seeded random tridiagonal systems (n = 1 .. 60, 1 .. 3 right-hand sides,
 * some with tiny or zero diagonals, so rows swap): the residual |A x - b| within 64 n eps
 * of |A| |x|; an exactly singular leading pivot reports its row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <float.h>
#include <math.h>

#include "base/gtsv.h"

static double rnd(uint64_t *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*x >> 11) / 9007199254740992.0 * 2 - 1;
}

static void test_random_systems_solve(void **state) {
  (void)state;
  uint64_t seed = 3;
  for (int64_t n = 1; n <= 60; n += (n < 6 ? 1 : 9)) {
    for (int64_t k = 1; k <= 3; k++) {
      double sub[64], diag[64], sup[64], s0[64], d0[64], u0[64], b[64 * 3], b0[64 * 3];
      for (int64_t i = 0; i < n; i++) {
        sub[i] = rnd(&seed);
        sup[i] = rnd(&seed);
        diag[i] = i % 4 == 0 ? 1e-3 * rnd(&seed) : rnd(&seed) + 3; /* some rows must swap */
        for (int64_t j = 0; j < k; j++) b[i * k + j] = rnd(&seed);
      }
      memcpy(s0, sub, sizeof sub);
      memcpy(d0, diag, sizeof diag);
      memcpy(u0, sup, sizeof sup);
      memcpy(b0, b, sizeof b);
      assert_int_equal(kiln_gtsv(n, k, sub, diag, sup, b), 0);
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) {
          double ax = d0[i] * b[i * k + j], mag = fabs(ax);
          if (i > 0)
            ax += s0[i - 1] * b[(i - 1) * k + j], mag += fabs(s0[i - 1] * b[(i - 1) * k + j]);
          if (i + 1 < n) ax += u0[i] * b[(i + 1) * k + j], mag += fabs(u0[i] * b[(i + 1) * k + j]);
          if (fabs(ax - b0[i * k + j]) > 64 * (double)n * DBL_EPSILON * fmax(mag, 1))
            fail_msg("n=%lld k=%lld row %lld: residual %g", (long long)n, (long long)k,
                     (long long)i, fabs(ax - b0[i * k + j]));
        }
    }
  }
}

static void test_zero_pivot_reports_its_row(void **state) {
  (void)state;
  /* [[1, 1, 0], [1, 1, 0], [0, 0, 1]] (singular): after the first step the second pivot and
   * the element below it are both exactly 0 */
  double sub[3] = {1, 0, 0}, diag[3] = {1, 1, 1}, sup[3] = {1, 0, 0}, b[3] = {1, 2, 3};
  assert_int_equal(kiln_gtsv(3, 1, sub, diag, sup, b), 2);
  double z[3] = {0, 0, 0}, z2[3] = {0, 0, 0}, z3[3] = {0, 0, 0}, c[3] = {1, 2, 3};
  assert_int_equal(kiln_gtsv(3, 1, z, z2, z3, c), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_systems_solve),
      cmocka_unit_test(test_zero_pivot_reports_its_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
