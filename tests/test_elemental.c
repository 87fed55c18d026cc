/* Elemental emitter: every elementwise opcode on every element type the kernel IR has, run
 * on the host and compared with the reference evaluator. One multi-output fusion per element
 * type holds every op that accepts the type (one output each), plus one fusion per source
 * type converting to every type and bitcast-converting to every type of the same width.
 *
 * Tolerances (kiln_compare_kernel_tolerance, per output type): exact for integers and pred; 1 ulp
 * for f16, bf16, every f8 and f4e2m1fn (computed through f32 and rounded once per op, the
 * evaluator through double); 4 ulp for f32 (the host's inline polynomial math); 8 ulp for
 * f64 (libm, and formulas of several ops for acos, asinh, ...). Inputs: floats uniform in
 * [-2.5, 2.5) (so acosh, atanh, log, sqrt see both valid and invalid arguments; NaN must
 * match NaN), f8e8m0fnu in [2^-4, 8), integers in [-8, 7] / [0, 15] (zero divisors and
 * shift amounts past the width included). Every kernel is also checked with ptxas when
 * present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/str.h"
#include "tools/common/fusion_runner.h"

#define N 517

static const kiln_elem_type_t kTypes[] = {
    KILN_PRED,          KILN_S2,         KILN_S4,         KILN_S8,     KILN_S16,
    KILN_S32,           KILN_S64,        KILN_U2,         KILN_U4,     KILN_U8,
    KILN_U16,           KILN_U32,        KILN_U64,        KILN_F16,    KILN_BF16,
    KILN_F32,           KILN_F64,        KILN_F8E5M2,     KILN_F8E4M3, KILN_F8E4M3FN,
    KILN_F8E4M3B11FNUZ, KILN_F8E5M2FNUZ, KILN_F8E4M3FNUZ, KILN_F8E3M4, KILN_F8E8M0FNU,
    KILN_F4E2M1FN,      KILN_S1,         KILN_U1,
};
#define NUM_TYPES ((int)(sizeof(kTypes) / sizeof(kTypes[0])))

static const char *const kFloatUnary[] = {
    "abs", "negate", "sign", "exponential", "exponential-minus-one", "log", "log-plus-one",
    "tanh", "logistic", "sine", "cosine", "tan", "sqrt", "rsqrt", "cbrt", "erf", "floor",
    "ceil", "round-nearest-afz", "round-nearest-even", "acos", "asin", "acosh", "asinh",
    "atanh", "cosh", "sinh", NULL};
static const char *const kIntUnary[] = {"abs", "negate", "sign", "not", "popcnt",
                                        "count-leading-zeros", NULL};
static const char *const kFloatBinary[] = {"add", "subtract", "multiply", "divide", "remainder",
                                           "maximum", "minimum", "power", "atan2", NULL};
static const char *const kIntBinary[] = {"add", "subtract", "multiply", "divide", "remainder",
                                         "maximum", "minimum", "power", "and", "or", "xor",
                                         "shift-left", "shift-right-logical",
                                         "shift-right-arithmetic", NULL};
static const char *const kPredBinary[] = {"and", "or", "xor", "add", "multiply", "maximum",
                                          "minimum", NULL};
static const char *const kDirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE", NULL};

typedef struct op_list {
  char names[128][64];
  int n;
} op_list_t;

static void add_out(kiln_strbuf_t *b, op_list_t *ops, const char *shape, const char *name,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add_out(kiln_strbuf_t *b, op_list_t *ops, const char *shape, const char *name,
                    const char *fmt, ...) {
  kiln_strbuf_printf(b, "  o%d = %s ", ops->n, shape);
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_vprintf(b, fmt, ap);
  va_end(ap);
  kiln_strbuf_append(b, "\n");
  snprintf(ops->names[ops->n], sizeof(ops->names[0]), "%s", name);
  ops->n++;
}

static void finish(kiln_strbuf_t *b, const op_list_t *ops, const char *t) {
  kiln_strbuf_append(b, "  ROOT r = (");
  (void)t;
  /* Shapes of the tuple are inferred by the parser from the operands' declared shapes. */
  for (int i = 0; i < ops->n; i++) kiln_strbuf_printf(b, "%s__SHAPE%d__", i ? ", " : "", i);
  kiln_strbuf_append(b, ") tuple(");
  for (int i = 0; i < ops->n; i++) kiln_strbuf_printf(b, "%so%d", i ? ", " : "", i);
  kiln_strbuf_append(b, ")\n}\n");
}

/* Replaces the __SHAPEi__ placeholders with each output's declared shape. */
static char *resolve_shapes(const char *text, int n) {
  kiln_strbuf_t out = {0};
  const char *p = text;
  while (*p) {
    const char *q = strstr(p, "__SHAPE");
    if (!q) {
      kiln_strbuf_append(&out, p);
      break;
    }
    kiln_strbuf_append_n(&out, p, (size_t)(q - p));
    int i = atoi(q + 7);
    char key[32];
    snprintf(key, sizeof(key), "  o%d = ", i);
    const char *d = strstr(text, key);
    assert_non_null(d);
    d += strlen(key);
    const char *sp = strchr(d, ' ');
    kiln_strbuf_append_n(&out, d, (size_t)(sp - d));
    p = strstr(q + 7, "__") + 2;
  }
  (void)n;
  return kiln_strbuf_take(&out);
}

typedef struct tally {
  int fusions, fusions_ok, outputs, ptx_ok, ptx_checked;
  bool ptx_skip_printed;
} tally_t;

static void run_fusion(const char *text, const op_list_t *ops, const char *what, double lo,
                       double hi, tally_t *t) {
  char *full = resolve_shapes(text, ops->n);
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(full, strlen(full), NULL, &m);
  if (s) fprintf(stderr, "%s\n%s\n", full, kiln_status_message(s));
  assert_null(s);
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.float_lo = lo;
  o.float_hi = hi;
  o.check_ptx = true;
  kiln_runner_report_t r;
  s = kiln_runner_check(m->entry, &o, &r);
  t->fusions++;
  if (r.ptx_checked) {
    t->ptx_checked++;
    t->ptx_ok += r.ptx_ok;
    if (!r.ptx_ok) printf("PTX %s: %s\n", what, r.ptx_note);
  } else if (!t->ptx_skip_printed && r.ptx_note[0]) {
    printf("ptxas check %s\n", r.ptx_note);
    t->ptx_skip_printed = true;
  }
  if (s) {
    printf("FAIL %s: %s\n", what, kiln_status_message(s));
    kiln_status_free(s);
  } else if (r.mismatches) {
    int o_idx = -1;
    sscanf(r.first_mismatch, "output %d", &o_idx);
    printf("FAIL %s: %lld mismatches, max %lld ulp; first: %s (%s)\n", what,
           (long long)r.mismatches, (long long)r.max_ulp, r.first_mismatch,
           o_idx >= 0 && o_idx < ops->n ? ops->names[o_idx] : "?");
  } else {
    t->fusions_ok++;
    t->outputs += ops->n;
    printf("ok   %-14s %3d ops, %6lld elements, max %lld ulp\n", what, ops->n,
           (long long)r.elements, (long long)r.max_ulp);
  }
  kiln_hlo_module_destroy(m);
  kiln_free(full);
}

static void test_every_elementwise_op_of_every_type(void **state) {
  tally_t t = {0};
  for (int ti = 0; ti < NUM_TYPES; ti++) {
    kiln_elem_type_t et = kTypes[ti];
    const char *tn = kiln_elem_type_name(et);
    bool fl = kiln_elem_type_is_float(et), pred = et == KILN_PRED;
    char sh[32], psh[32];
    snprintf(sh, sizeof(sh), "%s[%d]", tn, N);
    snprintf(psh, sizeof(psh), "pred[%d]", N);
    kiln_strbuf_t b = {0};
    op_list_t ops = {0};
    kiln_strbuf_printf(&b, "f {\n  p0 = %s parameter(0)\n  p1 = %s parameter(1)\n"
                           "  p2 = %s parameter(2)\n  c = %s parameter(3)\n",
                       sh, sh, sh, psh);
    const char *const *un = fl ? kFloatUnary : pred ? NULL : kIntUnary;
    for (int i = 0; un && un[i]; i++) add_out(&b, &ops, sh, un[i], "%s(p0)", un[i]);
    if (pred) add_out(&b, &ops, sh, "not", "not(p0)");
    const char *const *bi = fl ? kFloatBinary : pred ? kPredBinary : kIntBinary;
    for (int i = 0; bi[i]; i++) add_out(&b, &ops, sh, bi[i], "%s(p0, p1)", bi[i]);
    for (int i = 0; kDirs[i]; i++) {
      char nm[64];
      snprintf(nm, sizeof(nm), "compare %s", kDirs[i]);
      add_out(&b, &ops, psh, nm, "compare(p0, p1), direction=%s", kDirs[i]);
      if (fl) {
        snprintf(nm, sizeof(nm), "compare %s TOTALORDER", kDirs[i]);
        add_out(&b, &ops, psh, nm, "compare(p0, p1), direction=%s, type=TOTALORDER", kDirs[i]);
        snprintf(nm, sizeof(nm), "compare %s self", kDirs[i]);
        add_out(&b, &ops, psh, nm, "compare(p0, p0), direction=%s", kDirs[i]);
      }
    }
    add_out(&b, &ops, sh, "select", "select(c, p0, p1)");
    add_out(&b, &ops, sh, "clamp", "clamp(p1, p0, p2)");
    add_out(&b, &ops, sh, "copy", "copy(p0)");
    if (fl) {
      add_out(&b, &ops, psh, "is-finite", "is-finite(p0)");
      add_out(&b, &ops, sh, "reduce-precision e5m2", "reduce-precision(p0), exponent_bits=5, mantissa_bits=2");
      add_out(&b, &ops, sh, "reduce-precision e3m0", "reduce-precision(p0), exponent_bits=3, mantissa_bits=0");
    }
    finish(&b, &ops, tn);
    double lo = -2.5, hi = 2.5;
    if (et == KILN_F8E8M0FNU) lo = 0.0625, hi = 8.0;
    run_fusion(kiln_strbuf_cstr(&b), &ops, tn, lo, hi, &t);
    kiln_strbuf_free(&b);
  }
  printf("elementwise ops: %d/%d type fusions matched the evaluator (%d op outputs); ptxas %d/%d\n",
         t.fusions_ok, t.fusions, t.outputs, t.ptx_ok, t.ptx_checked);
  assert_int_equal(t.fusions_ok, t.fusions);
  assert_int_equal(t.ptx_ok, t.ptx_checked);
}

static void test_convert_and_bitcast_convert_between_all_types(void **state) {
  tally_t t = {0};
  for (int ti = 0; ti < NUM_TYPES; ti++) {
    kiln_elem_type_t from = kTypes[ti];
    kiln_strbuf_t b = {0};
    op_list_t ops = {0};
    kiln_strbuf_printf(&b, "f {\n  p0 = %s[%d] parameter(0)\n", kiln_elem_type_name(from), N);
    for (int tj = 0; tj < NUM_TYPES; tj++) {
      kiln_elem_type_t to = kTypes[tj];
      char sh[32], nm[64];
      snprintf(sh, sizeof(sh), "%s[%d]", kiln_elem_type_name(to), N);
      snprintf(nm, sizeof(nm), "convert to %s", kiln_elem_type_name(to));
      add_out(&b, &ops, sh, nm, "convert(p0)");
      if (to != from && kiln_elem_type_bits(to) == kiln_elem_type_bits(from) && to != KILN_PRED &&
          from != KILN_PRED && kiln_elem_type_bits(to) >= 8) {
        snprintf(nm, sizeof(nm), "bitcast-convert to %s", kiln_elem_type_name(to));
        add_out(&b, &ops, sh, nm, "bitcast-convert(p0)");
      }
    }
    finish(&b, &ops, kiln_elem_type_name(from));
    double lo = -20, hi = 20; /* exercises saturation and NaN -> 0 for narrow targets */
    if (from == KILN_F8E8M0FNU) lo = 0.0625, hi = 8.0;
    char what[64];
    snprintf(what, sizeof(what), "from %s", kiln_elem_type_name(from));
    run_fusion(kiln_strbuf_cstr(&b), &ops, what, lo, hi, &t);
    kiln_strbuf_free(&b);
  }
  printf("conversions: %d/%d source types matched the evaluator (%d conversions); ptxas %d/%d\n",
         t.fusions_ok, t.fusions, t.outputs, t.ptx_ok, t.ptx_checked);
  assert_int_equal(t.fusions_ok, t.fusions);
  assert_int_equal(t.ptx_ok, t.ptx_checked);
}

/* map and a scalar computation with a tuple root used through reduce. */
static void test_map_applies_its_computation(void **state) {
  const char *text = "sq {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                     "  m = f32[] multiply(a, b)\n  ROOT s = f32[] subtract(m, a)\n}\n"
                     "f {\n  p0 = f32[64] parameter(0)\n  p1 = f32[64] parameter(1)\n"
                     "  ROOT r = f32[64] map(p0, p1), dimensions={0}, to_apply=sq\n}\n";
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_computations(text, strlen(text), NULL, &m));
  kiln_runner_report_t r;
  kiln_status s = kiln_runner_check(m->entry, NULL, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  assert_int_equal(r.mismatches, 0);
  assert_int_equal(r.elements, 64);
  kiln_hlo_module_destroy(m);
}

/* Complex values as (re, im) pairs: arithmetic, abs, exp, log, compare, select, convert and
 * data movement. Tolerance: 4 ulps (c64) / 8 ulps (c128) of each element's larger part. */
static void test_complex_ops(void **state) {
  const char *text =
      "f {\n"
      "  p0 = c64[300] parameter(0)\n  p1 = c64[300] parameter(1)\n  p2 = c128[300] parameter(2)\n"
      "  x = f32[300] parameter(3)\n"
      "  a = c64[300] add(p0, p1)\n  s = c64[300] subtract(p0, p1)\n"
      "  m = c64[300] multiply(p0, p1)\n  d = c64[300] divide(p0, p1)\n"
      "  n = c64[300] negate(p0)\n  ab = f32[300] abs(p0)\n  re = f32[300] real(p0)\n"
      "  im = f32[300] imag(p1)\n  e = c64[300] exponential(p0)\n  l = c64[300] log(p0)\n"
      "  eq = pred[300] compare(p0, p1), direction=EQ\n"
      "  ne = pred[300] compare(p0, p0), direction=NE\n"
      "  sel = c64[300] select(eq, p0, p1)\n  cv = c128[300] convert(p0)\n"
      "  m2 = c128[300] multiply(p2, cv)\n  d2 = c128[300] divide(p2, cv)\n"
      "  t = c64[300] reverse(p0), dimensions={0}\n  c = c64[300] complex(x, re)\n"
      "  k = c64[] constant((1.5, -2))\n  kb = c64[300] broadcast(k), dimensions={}\n"
      "  km = c64[300] multiply(c, kb)\n"
      "  ROOT r = (c64[300], c64[300], c64[300], c64[300], c64[300], f32[300], f32[300], "
      "f32[300], c64[300], c64[300], pred[300], pred[300], c64[300], c128[300], c128[300], "
      "c128[300], c64[300], c64[300], c64[300]) "
      "tuple(a, s, m, d, n, ab, re, im, e, l, eq, ne, sel, cv, m2, d2, t, km, p0)\n"
      "}\n";
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &m);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.check_ptx = true;
  kiln_runner_report_t r;
  s = kiln_runner_check(m->entry, &o, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  printf("complex: %lld elements, max %lld ulp, %s\n", (long long)r.elements, (long long)r.max_ulp,
         r.ptx_note);
  if (r.mismatches) fprintf(stderr, "%s\n", r.first_mismatch);
  assert_int_equal(r.mismatches, 0);
  assert_true(!r.ptx_checked || r.ptx_ok);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_elementwise_op_of_every_type),
      cmocka_unit_test(test_convert_and_bitcast_convert_between_all_types),
      cmocka_unit_test(test_map_applies_its_computation),
      cmocka_unit_test(test_complex_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
