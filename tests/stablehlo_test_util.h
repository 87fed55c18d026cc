/* Runs a StableHLO program of check functions (the interpreter's `check.expect_*`) in a
 * cmocka test: on `dev` (NULL: the reference evaluator), constants as parameters so the
 * backend computes them, every function printed; fails unless all `functions` pass and
 * no check fails. */
#ifndef KILN_TESTS_STABLEHLO_TEST_UTIL_H_
#define KILN_TESTS_STABLEHLO_TEST_UTIL_H_

#include <stdio.h>
#include <string.h>

#include "runtime/device.h"
#include "tools/common/stablehlo_run.h"

static inline void kiln_test_run_checks(const char *program, size_t len, const char *name,
                                        kiln_device_t *dev, int functions) {
  kiln_stablehlo_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  o.print = true;
  o.constants_as_params = true;
  kiln_stablehlo_run_stats_t st;
  memset(&st, 0, sizeof st);
  assert_null(kiln_stablehlo_run_bytes(program, len, name, &o, &st));
  if (st.failures.data) fprintf(stderr, "%s", kiln_strbuf_cstr(&st.failures));
  assert_int_equal(st.functions, functions);
  assert_int_equal(st.passed, functions);
  assert_int_equal(st.checks_failed, 0);
  kiln_stablehlo_run_stats_free(&st);
}

#endif /* KILN_TESTS_STABLEHLO_TEST_UTIL_H_ */
