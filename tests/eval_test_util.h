/* Shared harness of the evaluator's known-answer tests: evaluate a small HLO module given
 * as text (no parameters) and compare the result exactly. Include after <cmocka.h>. */
#ifndef KILN_TESTS_EVAL_TEST_UTIL_H_
#define KILN_TESTS_EVAL_TEST_UTIL_H_

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "compiler/eval/eval.h"

typedef struct run {
  kiln_hlo_module_t *m;
  kiln_arena_t arena;
  kiln_literal_t *result;
} run_t;

static inline void run_text(run_t *r, const char *text) {
  memset(r, 0, sizeof *r);
  kiln_arena_init(&r->arena);
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &r->m);
  if (s) {
    kiln_status_report(s, "parse");
    fail();
  }
  s = kiln_eval_module(r->m, NULL, 0, NULL, &r->arena, &r->result);
  if (s) {
    kiln_status_report(s, "eval");
    fail();
  }
  assert_non_null(r->result);
}

static inline void run_done(run_t *r) {
  kiln_arena_destroy(&r->arena);
  kiln_hlo_module_destroy(r->m);
}

/* Evaluates `text` and expects an error with `code` whose message contains `needle`. */
static inline void expect_error(const char *text, kiln_status_code_t code, const char *needle) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) {
    kiln_status_report(s, "parse");
    fail();
  }
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *res = NULL;
  s = kiln_eval_module(m, NULL, 0, NULL, &a, &res);
  assert_non_null(s);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), needle)) {
    fprintf(stderr, "got %s: %s\n", kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
    fail();
  }
  kiln_status_free(s);
  kiln_arena_destroy(&a);
  kiln_hlo_module_destroy(m);
}

/* Exact comparison; NaN matches NaN, and zeros must agree in sign. */
static inline void expect_f64(const kiln_literal_t *l, int n, const double *want) {
  assert_int_equal(l->num_elements, n);
  for (int i = 0; i < n; i++) {
    double got = kiln_literal_get_f64(l, i);
    bool ok = isnan(want[i]) ? isnan(got) : (got == want[i] && signbit(got) == signbit(want[i]));
    if (!ok) {
      fprintf(stderr, "element %d: got %.17g, want %.17g\n", i, got, want[i]);
      fail();
    }
  }
}

static inline void expect_s64(const kiln_literal_t *l, int n, const int64_t *want) {
  assert_int_equal(l->num_elements, n);
  for (int i = 0; i < n; i++) {
    int64_t got = kiln_literal_get_s64(l, i);
    if (got != want[i]) {
      fprintf(stderr, "element %d: got %lld, want %lld\n", i, (long long)got, (long long)want[i]);
      fail();
    }
  }
}

static inline void expect_u64(const kiln_literal_t *l, int n, const uint64_t *want) {
  assert_int_equal(l->num_elements, n);
  for (int i = 0; i < n; i++) {
    uint64_t got = kiln_literal_get_u64(l, i);
    if (got != want[i]) {
      fprintf(stderr, "element %d: got %llu, want %llu\n", i, (unsigned long long)got,
              (unsigned long long)want[i]);
      fail();
    }
  }
}

/* Builds "HloModule m / ENTRY e { <body> }". */
#define MODULE(body) "HloModule m\n\nENTRY e {\n" body "}\n"

/* Comparison within an absolute tolerance. */
static inline void expect_f64_near(const kiln_literal_t *l, int n, const double *want, double tol) {
  assert_int_equal(l->num_elements, n);
  for (int i = 0; i < n; i++) {
    double got = kiln_literal_get_f64(l, i);
    if (fabs(got - want[i]) > tol) {
      fprintf(stderr, "element %d: got %.9g, want %.9g\n", i, got, want[i]);
      fail();
    }
  }
}

#endif /* KILN_TESTS_EVAL_TEST_UTIL_H_ */
