/* Shared harness of the whole-module host tests (test_executable, test_dot_canonical): run a
 * module given as text on a device and on the reference evaluator with the same generated
 * inputs, require the results to agree, and optionally return the executable's thunk
 * sequence as text. Include after <cmocka.h>. */
#ifndef KILN_TESTS_HOST_RUN_UTIL_H_
#define KILN_TESTS_HOST_RUN_UTIL_H_

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/thunks/compile.h"
#include "plugin/env_options.h"
#include "runtime/executable.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (!s) s = kiln_hlo_module_verify(m); /* every build: a test's own shape mistake fails here */
  if (s) {
    kiln_status_report(s, "parse");
    fail();
  }
  return m;
}

/* The executable `text` compiles to, printed (allocations and thunks, without command
 * buffers; kiln_free), with the passes as a device run has them (KILN_GEMM_LIBRARY, ...). */
static char *thunks_of(const char *text) {
  kiln_hlo_module_t *c = parse(text);
  kiln_executable_desc_t *d = NULL;
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  co.no_command_buffers = true;
  kiln_pass_options_t po;
  kiln_pjrt_compile_options_from_env(&co, &po);
  assert_null(kiln_compile_module(c, &co, &d, NULL));
  kiln_strbuf_t b = {0};
  kiln_executable_desc_print(&b, d);
  kiln_executable_desc_destroy(d);
  kiln_hlo_module_destroy(c);
  return kiln_strbuf_take(&b);
}

/* Runs `text` `repeat` times on `dev` and once on the evaluator with generated inputs; both
 * must agree. Sets *thunks (kiln_free) to the thunk text, without command buffers, when
 * `thunks` is set. */
static void run_and_compare_on(kiln_device_t *dev, const char *text, int repeat, char **thunks) {
  kiln_hlo_module_t *m = parse(text);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  kiln_literal_t *want = NULL, *got = NULL;
  assert_null(kiln_eval_module(m, NULL, n, args, &arena, &want));
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  o.repeat = repeat;
  kiln_device_run_report_t rep;
  kiln_status s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
  if (s) {
    kiln_status_report(s, "device run");
    fail();
  }
  kiln_compare_report_t cr;
  if (!kiln_compare_literals(want, got, NULL, &cr)) {
    fprintf(stderr, "mismatch: %s\n", cr.first);
    fail();
  }
  assert_true(cr.elements > 0);
  if (thunks) *thunks = thunks_of(text);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

/* Occurrences of `needle` in `hay`. */
static inline int count_in(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* run_and_compare_on once, then the thunk sequence (printed) must hold `gemms` gemm thunks
 * and `kernels` kernel thunks. */
static inline void run_and_count_thunks(kiln_device_t *dev, const char *text, int gemms,
                                        int kernels) {
  char *thunks = NULL;
  run_and_compare_on(dev, text, 1, &thunks);
  const char *seq = strstr(thunks, "thunks:");
  printf("%s", seq ? seq : thunks);
  assert_int_equal(count_in(thunks, " gemm "), gemms);
  assert_int_equal(count_in(thunks, " kernel "), kernels);
  kiln_free(thunks);
}

#endif /* KILN_TESTS_HOST_RUN_UTIL_H_ */
