/* HLO verifier: for each rule family a valid module that passes and an invalid one whose
 * message names the instruction and the problem; structural rules on parsed modules that
 * the test then breaks by hand; the corpus's invalid_concat is rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/hlo/ir.h"
#include "compiler/hlo/shape_inference.h"
#include "tests/skip_util.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) {
    fprintf(stderr, "parse failed: %s\n--- text ---\n%s\n", kiln_status_message(s), text);
    kiln_status_free(s);
    fail();
  }
  return m;
}

static void expect_valid(const char *text) {
  kiln_hlo_module_t *m = parse(text);
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    fprintf(stderr, "unexpected verifier error: %s\n--- text ---\n%s\n", kiln_status_message(s),
            text);
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
    fail();
  }
  kiln_hlo_module_destroy(m);
}

/* The verifier rejects `m` with a message containing every non-NULL fragment. */
static void expect_message(kiln_status s, const char *frag1, const char *frag2) {
  if (!s) fail_msg("verifier accepted a module that should fail (%s / %s)", frag1, frag2);
  const char *msg = kiln_status_message(s);
  bool ok = kiln_status_code(s) == KILN_INVALID_ARGUMENT && (!frag1 || strstr(msg, frag1)) &&
            (!frag2 || strstr(msg, frag2));
  if (!ok) {
    fprintf(stderr, "message: %s\nexpected fragments: '%s' and '%s'\n", msg, frag1 ? frag1 : "",
            frag2 ? frag2 : "");
    kiln_status_free(s);
    fail();
  }
  kiln_status_free(s);
}

/* Invalid text: message names `instr` (as "instruction 'instr'") and contains `what`. */
static void expect_invalid(const char *text, const char *instr, const char *what) {
  kiln_hlo_module_t *m = parse(text);
  char named[256];
  snprintf(named, sizeof named, "instruction '%s'", instr);
  expect_message(kiln_hlo_module_verify(m), named, what);
  kiln_hlo_module_destroy(m);
}

/* ---- elementwise ---- */

static void test_binary_ops_need_equal_types_and_dims(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[2,3] parameter(0)\n"
               "  p1 = f32[2,3] parameter(1)\n  ROOT add.1 = f32[2,3] add(p0, p1)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[2,3] parameter(0)\n"
                 "  p1 = s32[2,3] parameter(1)\n  ROOT add.1 = f32[2,3] add(p0, p1)\n}\n",
                 "add.1", "same element type");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[2,3] parameter(0)\n"
                 "  p1 = f32[3,2] parameter(1)\n  ROOT mul = f32[2,3] multiply(p0, p1)\n}\n",
                 "mul", "same dimensions");
}

static void test_compare_gives_pred(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = s32[4] parameter(0)\n"
               "  p1 = s32[4] parameter(1)\n  ROOT c = pred[4] compare(p0, p1), direction=LT\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = s32[4] parameter(0)\n"
                 "  p1 = s32[4] parameter(1)\n  ROOT c = s32[4] compare(p0, p1), direction=LT\n}\n",
                 "c", "result is s32[4], but its operands give pred[4]");
}

static void test_bitwise_and_shift_types(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = pred[4] parameter(0)\n"
               "  p1 = pred[4] parameter(1)\n  x = pred[4] xor(p0, p1)\n"
               "  u = u32[4] parameter(2)\n  s = u32[4] shift-left(u, u)\n"
               "  ROOT t = (pred[4], u32[4]) tuple(x, s)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n"
                 "  ROOT and.2 = f32[4] and(p0, p0)\n}\n",
                 "and.2", "pred or integral");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = pred[4] parameter(0)\n"
                 "  ROOT sh = pred[4] shift-right-logical(p0, p0)\n}\n",
                 "sh", "integral");
}

static void test_unary_op_types(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n"
               "  fin = pred[4] is-finite(p0)\n  c = c64[4] parameter(1)\n"
               "  r = f32[4] real(c)\n  ab = f32[4] abs(c)\n  i = s8[4] parameter(2)\n"
               "  z = s8[4] count-leading-zeros(i)\n  pc = s8[4] popcnt(i)\n"
               "  ROOT t = (pred[4], f32[4], f32[4], s8[4], s8[4]) tuple(fin, r, ab, z, pc)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n"
                 "  ROOT clz.1 = f32[4] count-leading-zeros(p0)\n}\n",
                 "clz.1", "integral");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n"
                 "  ROOT fin = f32[4] is-finite(p0)\n}\n",
                 "fin", "operands give pred[4]");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = s32[4] parameter(0)\n"
                 "  ROOT e = s32[4] exponential(p0)\n}\n",
                 "e", "floating-point or complex");
}

static void test_convert_and_bitcast_convert(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n"
               "  c = pred[4] convert(p0)\n  b = s32[4] bitcast-convert(p0)\n"
               "  n = f16[4,2] bitcast-convert(p0)\n  u = u8[4,4] parameter(1)\n"
               "  w = f32[4] bitcast-convert(u)\n"
               "  ROOT t = (pred[4], s32[4], f16[4,2], f32[4]) tuple(c, b, n, w)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[3] parameter(0)\n"
                 "  ROOT bc = f16[3] bitcast-convert(p0)\n}\n",
                 "bc", "operands give f16[3,2]");
  /* A scalar narrowed (found by the fuzzer: its empty dims were copied from NULL). */
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[] parameter(0)\n"
                 "  ROOT bs = s16[] bitcast-convert(p0)\n}\n",
                 "bs", "operands give s16[2]");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[3] parameter(0)\n"
                 "  ROOT cv = f32[4] convert(p0)\n}\n",
                 "cv", "result is f32[4]");
}

static void test_select_and_clamp(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p = pred[] parameter(0)\n"
               "  a = f32[3] parameter(1)\n  b = f32[3] parameter(2)\n"
               "  s = f32[3] select(p, a, b)\n  lo = f32[] parameter(3)\n"
               "  ROOT c = f32[3] clamp(lo, s, b)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p = s32[3] parameter(0)\n"
                 "  a = f32[3] parameter(1)\n  ROOT sel = f32[3] select(p, a, a)\n}\n",
                 "sel", "predicate must be a pred array");
  expect_invalid("HloModule m\n\nENTRY main {\n  lo = f32[2] parameter(0)\n"
                 "  a = f32[3] parameter(1)\n  ROOT cl = f32[3] clamp(lo, a, a)\n}\n",
                 "cl", "clamp min f32[2] must be a scalar or have the shape");
}

/* ---- data movement ---- */

static void test_broadcast_dimensions_map_operand_dims(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[3] parameter(0)\n"
               "  ROOT b = f32[2,3] broadcast(p0), dimensions={1}\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[3] parameter(0)\n"
                 "  ROOT b = f32[2,3] broadcast(p0), dimensions={0}\n}\n",
                 "b", "maps to result dimension 0 of size 2");
}

static void test_transpose_needs_permutation(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[2,3,4] parameter(0)\n"
               "  ROOT t = f32[4,2,3] transpose(p0), dimensions={2,0,1}\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[2,3] parameter(0)\n"
                 "  ROOT t = f32[2,2] transpose(p0), dimensions={0,0}\n}\n",
                 "t", "permutation");
}

static void test_reshape_keeps_element_count(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[2,6] parameter(0)\n"
               "  ROOT r = f32[3,4] reshape(p0)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[2,6] parameter(0)\n"
                 "  ROOT r = f32[3,5] reshape(p0)\n}\n",
                 "r", "element count");
}

static void test_slice_bounds_and_strides(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[10,4] parameter(0)\n"
               "  ROOT s = f32[4,2] slice(p0), slice={[1:9:2], [2:4]}\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[10,4] parameter(0)\n"
                 "  ROOT s = f32[4,3] slice(p0), slice={[1:9:2], [2:5]}\n}\n",
                 "s", "out of range");
}

static void test_dynamic_slice_and_update(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[8,4] parameter(0)\n"
               "  i = s32[] parameter(1)\n"
               "  ds = f32[2,4] dynamic-slice(p0, i, i), dynamic_slice_sizes={2,4}\n"
               "  ROOT dus = f32[8,4] dynamic-update-slice(p0, ds, i, i)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[8,4] parameter(0)\n"
                 "  i = f32[] parameter(1)\n"
                 "  ROOT ds = f32[2,4] dynamic-slice(p0, i, i), dynamic_slice_sizes={2,4}\n}\n",
                 "ds", "start index 0 must be an integer scalar");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[8,4] parameter(0)\n"
                 "  u = f32[2,5] parameter(1)\n  i = s32[] parameter(2)\n"
                 "  ROOT dus = f32[8,4] dynamic-update-slice(p0, u, i, i)\n}\n",
                 "dus", "larger than the operand");
}

static void test_concatenate_dims_must_match(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  a = f32[2,4] parameter(0)\n"
               "  b = f32[2,5] parameter(1)\n"
               "  ROOT concatenate.3 = f32[2,9] concatenate(a, b), dimensions={1}\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  a = f32[2,4] parameter(0)\n"
                 "  b = f32[2,5] parameter(1)\n"
                 "  ROOT concatenate.3 = f32[4,4] concatenate(a, b), dimensions={0}\n}\n",
                 "concatenate.3",
                 "concatenate operands must match in every dimension except 0; operand 1 is "
                 "f32[2,5] but operand 0 is f32[2,4]");
}

static void test_corpus_invalid_concat_is_rejected(void **state) {
  const char *dir = getenv("KILN_CORPUS_DIR");
  if (!dir) dir = KILN_CORPUS_DIR;
  char path[1024];
  snprintf(path, sizeof path, "%s/xla/xla__tools__tests__data__invalid_concat.hlo", dir);
  char *text = NULL;
  size_t len = 0;
  kiln_status s = kiln_read_file(path, &text, &len);
  if (s) {
    printf("[  SKIP    ] %s\n", kiln_status_message(s));
    kiln_status_free(s);
    KILN_SKIPPED();
  }
  kiln_hlo_module_t *m = NULL;
  s = kiln_hlo_parse_module(text, len, NULL, &m);
  kiln_free(text);
  assert_null(s);
  expect_message(kiln_hlo_module_verify(m), "instruction 'cat.3'",
                 "concatenate operands must match in every dimension except 1");
  kiln_hlo_module_destroy(m);
}

static void test_pad_sizes_with_negative_and_interior(void **state) {
  /* 3 + 2 interior gaps * 2 + 1 - 1 = 7; 4 - 1 - 1 = 2 */
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[3,4] parameter(0)\n"
               "  z = f32[] constant(0)\n"
               "  ROOT p = f32[7,2] pad(p0, z), padding=1_-1_2x-1_-1\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[3] parameter(0)\n"
                 "  z = f32[] constant(0)\n  ROOT p = f32[0] pad(p0, z), padding=-2_-2\n}\n",
                 "p", "negative size");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[3] parameter(0)\n"
                 "  z = s32[] constant(0)\n  ROOT p = f32[5] pad(p0, z), padding=1_1\n}\n",
                 "p", "pad value s32[] must be a scalar of the operand's element type");
}

static void test_reverse_and_iota_dimensions(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  p0 = f32[3,4] parameter(0)\n"
               "  r = f32[3,4] reverse(p0), dimensions={0,1}\n"
               "  i = s32[3,4] iota(), iota_dimension=1\n"
               "  ROOT t = (f32[3,4], s32[3,4]) tuple(r, i)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  p0 = f32[3,4] parameter(0)\n"
                 "  ROOT r = f32[3,4] reverse(p0), dimensions={2}\n}\n",
                 "r", "distinct dimensions");
  expect_invalid("HloModule m\n\nENTRY main {\n  ROOT io = s32[3,4] iota(), iota_dimension=2\n}\n",
                 "io", "iota_dimension=2 is out of range");
}

/* ---- reductions ---- */

static const char kArgmax[] =
    "HloModule m\n\n"
    "argmax {\n  a = f32[] parameter(0)\n  ai = s32[] parameter(1)\n"
    "  b = f32[] parameter(2)\n  bi = s32[] parameter(3)\n"
    "  gt = pred[] compare(a, b), direction=GT\n  v = f32[] select(gt, a, b)\n"
    "  i = s32[] select(gt, ai, bi)\n  ROOT t = (f32[], s32[]) tuple(v, i)\n}\n\n"
    "ENTRY main {\n  x = f32[4,6] parameter(0)\n  idx = s32[4,6] iota(), iota_dimension=1\n"
    "  init = f32[] constant(-inf)\n  zero = s32[] constant(0)\n"
    "  ROOT r = %s reduce(x, idx, init, zero), dimensions={%s}, to_apply=argmax\n}\n";

static void test_variadic_reduce(void **state) {
  char text[2048];
  snprintf(text, sizeof text, kArgmax, "(f32[4], s32[4])", "1");
  expect_valid(text);
  snprintf(text, sizeof text, kArgmax, "(f32[6], s32[6])", "1");
  expect_invalid(text, "r", "operands give (f32[4], s32[4])");
  snprintf(text, sizeof text, kArgmax, "(f32[4], s32[4])", "2");
  expect_invalid(text, "r", "reduce dimensions={2} must be distinct dimensions");
  expect_invalid(
      "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, a)\n}\n\n"
      "ENTRY main {\n  x = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add\n}\n",
      "r", "reducer 'add' parameter 1 must be f32[]");
}

static const char kAdd[] = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                           "  ROOT s = f32[] add(a, b)\n}\n\n";

/* A reducing collective applies its to_apply to each operand: (T[], T[]) -> T[] for each
 * operand's T (an s64 reducer over f32 had run as if it matched). */
static void test_collective_reducers_match_their_operands(void **state) {
  (void)state;
  char text[2048];
  const char *fmt =
      "HloModule m, replica_count=2\n\n%sENTRY main {\n  x = f32[4] parameter(0)\n"
      "  y = %s[4] parameter(1)\n  ROOT r = (f32[%s], %s[%s]) %s(x, y), "
      "replica_groups={{0,1}}%s, to_apply=add\n}\n";
  snprintf(text, sizeof text, fmt, kAdd, "f32", "4", "f32", "4", "all-reduce", "");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, kAdd, "s32", "4", "s32", "4", "all-reduce", "");
  expect_invalid(text, "r", "all-reduce reducer 'add' parameter 0 must be s32[], but is f32[]");
  snprintf(text, sizeof text, fmt, kAdd, "f32", "2", "f32", "2", "reduce-scatter",
           ", dimensions={0}");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, kAdd, "s64", "2", "s64", "2", "reduce-scatter",
           ", dimensions={0}");
  expect_invalid(text, "r", "reduce-scatter reducer 'add' parameter 0 must be s64[]");
}

static void test_reduce_window_output_size(void **state) {
  char text[2048];
  const char *fmt = "HloModule m\n\n%sENTRY main {\n  x = f32[4,5] parameter(0)\n"
                    "  z = f32[] constant(0)\n  ROOT rw = %s reduce-window(x, z), "
                    "window={size=2x3 stride=2x1 pad=0_0x1_1}, to_apply=add\n}\n";
  snprintf(text, sizeof text, fmt, kAdd, "f32[2,5]");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, kAdd, "f32[3,5]");
  expect_invalid(text, "rw", "operands give f32[2,5]");
}

static void test_select_and_scatter(void **state) {
  char text[2048];
  const char *fmt =
      "HloModule m\n\n%sge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=GE\n}\n\n"
      "ENTRY main {\n  x = f32[4,4] parameter(0)\n  src = f32[%s] parameter(1)\n"
      "  z = f32[] constant(0)\n  ROOT sas = f32[4,4] select-and-scatter(x, src, z), "
      "window={size=2x2 stride=2x2}, select=ge, scatter=add\n}\n";
  snprintf(text, sizeof text, fmt, kAdd, "2,2");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, kAdd, "3,2");
  expect_invalid(text, "sas", "source f32[3,2] must have the windowed operand's dimensions");
}

static void test_map_applies_scalar_computation(void **state) {
  char text[2048];
  const char *fmt = "HloModule m\n\n%sENTRY main {\n  x = f32[4] parameter(0)\n"
                    "  y = %s parameter(1)\n  ROOT mp = f32[4] map(x, y), dimensions={0}, "
                    "to_apply=add\n}\n";
  snprintf(text, sizeof text, fmt, kAdd, "f32[4]");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, kAdd, "s32[4]");
  expect_invalid(text, "mp", "parameter 1 must be s32[]");
}

/* ---- dot, convolution ---- */

static void test_dot_general_dimension_numbers(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  a = f32[8,2,3] parameter(0)\n"
               "  b = f32[8,3,5] parameter(1)\n"
               "  ROOT d = f32[8,2,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
               "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n");
  /* preferred element type: s8 x s8 -> s32 */
  expect_valid("HloModule m\n\nENTRY main {\n  a = s8[2,3] parameter(0)\n"
               "  b = s8[3,5] parameter(1)\n"
               "  ROOT d = s32[2,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  a = f32[2,3] parameter(0)\n"
                 "  b = f32[4,5] parameter(1)\n"
                 "  ROOT dot.7 = f32[2,5] dot(a, b), lhs_contracting_dims={1}, "
                 "rhs_contracting_dims={0}\n}\n",
                 "dot.7", "contracting dimension sizes differ");
  expect_invalid("HloModule m\n\nENTRY main {\n  a = f32[8,2,3] parameter(0)\n"
                 "  b = f32[8,3,5] parameter(1)\n"
                 "  ROOT d = f32[2,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                 "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
                 "d", "operands give f32[8,2,5]");
}

static void test_convolution_output_shape(void **state) {
  /* 1x8x8x4 input, 3x3x4x16 kernel, stride 2, pad 1: out 4x4 */
  expect_valid("HloModule m\n\nENTRY main {\n  x = f32[1,8,8,4] parameter(0)\n"
               "  k = f32[3,3,4,16] parameter(1)\n"
               "  ROOT c = f32[1,4,4,16] convolution(x, k), window={size=3x3 stride=2x2 "
               "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n}\n");
  /* depthwise: feature_group_count = 4, kernel input features 1 */
  expect_valid("HloModule m\n\nENTRY main {\n  x = f32[1,8,8,4] parameter(0)\n"
               "  k = f32[3,3,1,4] parameter(1)\n"
               "  ROOT c = f32[1,6,6,4] convolution(x, k), window={size=3x3}, "
               "dim_labels=b01f_01io->b01f, feature_group_count=4\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  x = f32[1,8,8,4] parameter(0)\n"
                 "  k = f32[3,3,5,16] parameter(1)\n"
                 "  ROOT conv = f32[1,6,6,16] convolution(x, k), window={size=3x3}, "
                 "dim_labels=b01f_01io->b01f\n}\n",
                 "conv", "must equal the kernel input features");
  expect_invalid("HloModule m\n\nENTRY main {\n  x = f32[1,8,8,4] parameter(0)\n"
                 "  k = f32[3,3,4,16] parameter(1)\n"
                 "  ROOT conv = f32[1,8,8,16] convolution(x, k), window={size=3x3}, "
                 "dim_labels=b01f_01io->b01f\n}\n",
                 "conv", "operands give f32[1,6,6,16]");
}

/* ---- gather / scatter ---- */

static void test_gather_shape_rules(void **state) {
  /* rows of a [5,3] table picked by s32[4] indices (index_vector_dim == rank) */
  expect_valid("HloModule m\n\nENTRY main {\n  t = f32[5,3] parameter(0)\n"
               "  i = s32[4] parameter(1)\n"
               "  ROOT g = f32[4,3] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
               "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n}\n");
  /* batching dims: operand [2,5,3], indices [2,4,1] */
  expect_valid("HloModule m\n\nENTRY main {\n  t = f32[2,5,3] parameter(0)\n"
               "  i = s32[2,4,1] parameter(1)\n"
               "  ROOT g = f32[2,4,3] gather(t, i), offset_dims={2}, collapsed_slice_dims={1}, "
               "start_index_map={1}, operand_batching_dims={0}, "
               "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,3}\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  t = f32[5,3] parameter(0)\n"
                 "  i = s32[4] parameter(1)\n"
                 "  ROOT gather.1 = f32[4,4] gather(t, i), offset_dims={1}, "
                 "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                 "slice_sizes={1,4}\n}\n",
                 "gather.1", "slice size 4 in dimension 1 is out of range");
}

static void test_scatter_shape_rules(void **state) {
  char text[2048];
  const char *fmt = "HloModule m\n\n%sENTRY main {\n  t = f32[5,3] parameter(0)\n"
                    "  i = s32[4] parameter(1)\n  u = f32[%s] parameter(2)\n"
                    "  ROOT sc = f32[5,3] scatter(t, i, u), update_window_dims={1}, "
                    "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                    "index_vector_dim=1, to_apply=add\n}\n";
  snprintf(text, sizeof text, fmt, kAdd, "4,3");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, kAdd, "3,3");
  expect_invalid(text, "sc", "must equal indices dimension 0");
}

/* ---- sort, control flow, calls ---- */

static void test_sort_comparator_signature(void **state) {
  char text[2048];
  const char *fmt =
      "HloModule m\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
      "  ROOT lt = %s compare(a, b), direction=LT\n}\n\n"
      "ENTRY main {\n  k = f32[10] parameter(0)\n  v = s32[10] parameter(1)\n"
      "  ROOT s = (f32[10], s32[10]) sort(k, v), dimensions={0}, to_apply=cmp\n}\n";
  snprintf(text, sizeof text, fmt, "pred[]");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, "f32[]");
  /* the comparator's own compare is wrong first */
  expect_invalid(text, "lt", "operands give pred[]");
  expect_invalid(
      "HloModule m\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY main {\n  k = f32[10] parameter(0)\n  v = s32[10] parameter(1)\n"
      "  ROOT s = (f32[10], s32[10]) sort(k, v), dimensions={0}, to_apply=cmp\n}\n",
      "s", "comparator 'cmp' must take 4 parameters");
}

static void test_while_signatures(void **state) {
  char text[2048];
  const char *fmt =
      "HloModule m\n\ncond {\n  p = (s32[], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(10)\n"
      "  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n"
      "body {\n  p = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  x = f32[4] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n  ROOT t = %s\n}\n\n"
      "ENTRY main {\n  x = f32[4] parameter(0)\n  z = s32[] constant(0)\n"
      "  t = (s32[], f32[4]) tuple(z, x)\n"
      "  ROOT w = (s32[], f32[4]) while(t), condition=cond, body=body\n}\n";
  snprintf(text, sizeof text, fmt, "(s32[], f32[4]) tuple(j, x)");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, "(s32[], s32[]) tuple(j, i)");
  expect_invalid(text, "w", "while body 'body' must return the loop state");
}

static void test_conditional_branches(void **state) {
  const char *branches =
      "HloModule m\n\nb0 {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n\n"
      "b1 {\n  p = f32[4] parameter(0)\n  ROOT e = f32[4] exponential(p)\n}\n\n"
      "b2 {\n  p = s32[4] parameter(0)\n  ROOT c = f32[4] convert(p)\n}\n\n";
  char text[2048];
  snprintf(text, sizeof text,
           "%sENTRY main {\n  pr = pred[] parameter(0)\n  x = f32[4] parameter(1)\n"
           "  ROOT c = f32[4] conditional(pr, x, x), true_computation=b0, "
           "false_computation=b1\n}\n",
           branches);
  expect_valid(text);
  snprintf(text, sizeof text,
           "%sENTRY main {\n  k = s32[] parameter(0)\n  x = f32[4] parameter(1)\n"
           "  y = s32[4] parameter(2)\n"
           "  ROOT c = f32[4] conditional(k, x, x, y), branch_computations={b0, b1, b2}\n}\n",
           branches);
  expect_valid(text);
  snprintf(text, sizeof text,
           "%sENTRY main {\n  k = s32[] parameter(0)\n  x = f32[4] parameter(1)\n"
           "  ROOT cond.1 = f32[4] conditional(k, x, x, x), branch_computations={b0, b1, b2}\n}\n",
           branches);
  expect_invalid(text, "cond.1", "branch 2 computation 'b2' parameter 0 is s32[4] but the operand is f32[4]");
}

static void test_call_and_fusion_signatures(void **state) {
  const char *fmt = "HloModule m\n\nf {\n  p = f32[4] parameter(0)\n"
                    "  ROOT n = f32[4] negate(p)\n}\n\n"
                    "ENTRY main {\n  x = %s parameter(0)\n"
                    "  c = f32[4] call(x), to_apply=f\n"
                    "  ROOT fu = f32[4] fusion(c), kind=kLoop, calls=f\n}\n";
  char text[1024];
  snprintf(text, sizeof text, fmt, "f32[4]");
  expect_valid(text);
  snprintf(text, sizeof text, fmt, "f32[5]");
  expect_invalid(text, "c", "parameter 0 is f32[4] but the operand is f32[5]");
}

static void test_tuple_and_get_tuple_element(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  a = f32[2] parameter(0)\n"
               "  b = s32[] parameter(1)\n  t = (f32[2], s32[]) tuple(a, b)\n"
               "  ROOT g = s32[] get-tuple-element(t), index=1\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  a = f32[2] parameter(0)\n"
                 "  t = (f32[2]) tuple(a)\n  ROOT gte.9 = f32[2] get-tuple-element(t), index=1\n}\n",
                 "gte.9", "index=1 is out of range");
  expect_invalid("HloModule m\n\nENTRY main {\n  a = f32[2] parameter(0)\n"
                 "  b = s32[] parameter(1)\n  ROOT t = (f32[2], f32[]) tuple(a, b)\n}\n",
                 "t", "operands give (f32[2], s32[])");
}

/* ---- collectives, misc ops ---- */

static void test_collective_shapes(void **state) {
  char text[2048];
  snprintf(text, sizeof text,
           "HloModule m\n\n%sENTRY main {\n  x = f32[4,8] parameter(0)\n"
           "  ar = f32[4,8] all-reduce(x), replica_groups={}, to_apply=add\n"
           "  ag = f32[16,8] all-gather(ar), dimensions={0}, replica_groups={{0,1,2,3}}\n"
           "  ROOT rs = f32[4,8] reduce-scatter(ag), dimensions={0}, "
           "replica_groups={{0,1,2,3}}, to_apply=add\n}\n",
           kAdd);
  expect_valid(text);
  snprintf(text, sizeof text,
           "HloModule m\n\n%sENTRY main {\n  x = f32[4,8] parameter(0)\n"
           "  ROOT ar = f32[8,8] all-reduce(x), replica_groups={}, to_apply=add\n}\n",
           kAdd);
  expect_invalid(text, "ar", "operands give f32[4,8]");
  expect_invalid("HloModule m\n\nENTRY main {\n  x = f32[4,8] parameter(0)\n"
                 "  ROOT ag = f32[4,12] all-gather(x), dimensions={0}\n}\n",
                 "ag", "differ in dimension 1");
}

static void test_linear_algebra_and_fft(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  a = f32[2,3,3] parameter(0)\n"
               "  b = f32[2,3,5] parameter(1)\n  l = f32[2,3,3] cholesky(a), lower=true\n"
               "  s = f32[2,3,5] triangular-solve(l, b), left_side=true, lower=true, "
               "transpose_a=NO_TRANSPOSE\n"
               "  r = f32[4,8] parameter(2)\n  f = c64[4,5] fft(r), fft_type=RFFT, fft_length={8}\n"
               "  g = f32[4,8] fft(f), fft_type=IRFFT, fft_length={8}\n"
               "  ROOT t = (f32[2,3,5], f32[4,8]) tuple(s, g)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  a = f32[3,4] parameter(0)\n"
                 "  ROOT ch = f32[3,4] cholesky(a), lower=true\n}\n",
                 "ch", "square matrices");
  expect_invalid("HloModule m\n\nENTRY main {\n  r = f32[4,8] parameter(0)\n"
                 "  ROOT f = c64[4,8] fft(r), fft_type=RFFT, fft_length={8}\n}\n",
                 "f", "operands give c64[4,5]");
  expect_invalid("HloModule m\n\nENTRY main {\n  r = f32[4,8] parameter(0)\n"
                 "  ROOT f = f32[4,8] fft(r), fft_type=FFT, fft_length={8}\n}\n",
                 "f", "FFT needs a complex operand");
}

static void test_rng_precision_and_topk(void **state) {
  expect_valid("HloModule m\n\nENTRY main {\n  s = u64[2] parameter(0)\n"
               "  r = (u64[2], u32[4,4]) rng-bit-generator(s), algorithm=rng_three_fry\n"
               "  x = f32[4] parameter(1)\n"
               "  p = f32[4] reduce-precision(x), exponent_bits=5, mantissa_bits=10\n"
               "  k = (f32[2], s32[2]) topk(x), k=2, largest=true\n"
               "  ROOT t = ((u64[2], u32[4,4]), f32[4], (f32[2], s32[2])) tuple(r, p, k)\n}\n");
  expect_invalid("HloModule m\n\nENTRY main {\n  s = u64[2] parameter(0)\n"
                 "  ROOT r = (u64[3], u32[4]) rng-bit-generator(s), algorithm=rng_default\n}\n",
                 "r", "must return (state u64[2], bits array)");
  expect_invalid("HloModule m\n\nENTRY main {\n  x = f32[4] parameter(0)\n"
                 "  ROOT p = f32[4] reduce-precision(x), exponent_bits=0, mantissa_bits=10\n}\n",
                 "p", "exponent_bits must be >= 1");
  expect_invalid("HloModule m\n\nENTRY main {\n  x = f32[4] parameter(0)\n"
                 "  ROOT k = (f32[5], s32[5]) topk(x), k=5, largest=true\n}\n",
                 "k", "k=5 is out of range");
}

static void test_arity_is_checked(void **state) {
  expect_invalid("HloModule m\n\nENTRY main {\n  a = f32[2] parameter(0)\n"
                 "  ROOT n = f32[2] negate(a, a)\n}\n",
                 "n", "negate expects 1 operands, but has 2");
  expect_invalid("HloModule m\n\nENTRY main {\n  p = pred[2] parameter(0)\n"
                 "  a = f32[2] parameter(1)\n  ROOT s = f32[2] select(p, a)\n}\n",
                 "s", "select expects 3 operands, but has 2");
}

/* ---- layouts and entry layout ---- */

static void test_entry_layout_and_layout_rank(void **state) {
  expect_valid("HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{0,1}}\n\n"
               "ENTRY main {\n  p = f32[2,3]{0,1} parameter(0)\n"
               "  ROOT n = f32[2,3]{0,1} negate(p)\n}\n");
  kiln_hlo_module_t *m =
      parse("HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[2,4]{1,0}}\n\n"
            "ENTRY main {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3]{1,0} negate(p)\n}\n");
  expect_message(kiln_hlo_module_verify(m), "entry_computation_layout result is f32[2,4]",
                 "root 'n'");
  kiln_hlo_module_destroy(m);
  /* a layout-only difference is a request for layout assignment, not an error */
  expect_valid("HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}\n\n"
               "ENTRY main {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3]{1,0} negate(p)\n}\n");
  m = parse("HloModule m, entry_computation_layout={(f16[2,3]{1,0})->f32[2,3]{1,0}}\n\n"
            "ENTRY main {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3]{1,0} negate(p)\n}\n");
  expect_message(kiln_hlo_module_verify(m), "entry_computation_layout parameter 0 is f16[2,3]",
                 "parameter 'p'");
  kiln_hlo_module_destroy(m);
  m = parse("HloModule m\n\nENTRY main {\n  p = f32[2,3]{1,0} parameter(0)\n"
            "  ROOT n = f32[2,3] negate(p)\n}\n");
  kiln_hlo_computation_find(m->entry, "p")->shape->layout.minor_to_major[0] = 0;
  expect_message(kiln_hlo_module_verify(m), "instruction 'p'",
                 "layout of f32[2,3] must list each of its 2 dimensions once");
  kiln_hlo_module_destroy(m);
}

/* ---- structural rules, on parsed modules broken by hand ---- */

static const char kSmall[] =
    "HloModule m\n\nf {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n\n"
    "ENTRY main {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n"
    "  a = f32[4] add(x, y)\n  ROOT c = f32[4] call(a), to_apply=f\n}\n";

static void test_structure_root_required(void **state) {
  kiln_hlo_module_t *m = parse(kSmall);
  kiln_hlo_module_find_computation(m, "f")->root = NULL;
  expect_message(kiln_hlo_module_verify(m), "in computation 'f'", "has no root");
  kiln_hlo_module_destroy(m);
}

static void test_structure_duplicate_instruction_names(void **state) {
  kiln_hlo_module_t *m = parse(kSmall);
  kiln_hlo_computation_t *e = m->entry;
  kiln_hlo_computation_find(e, "y")->name = kiln_arena_strdup(&m->arena, "x");
  expect_message(kiln_hlo_module_verify(m), "in computation 'main'",
                 "instruction name 'x' is used more than once");
  kiln_hlo_module_destroy(m);
  /* the same name in two computations is allowed (real dumps do it) */
  m = parse(kSmall);
  kiln_hlo_computation_find(m->entry, "x")->name = kiln_arena_strdup(&m->arena, "p");
  assert_null(kiln_hlo_module_verify(m));
  kiln_hlo_module_destroy(m);
}

static void test_structure_parameter_numbers_dense(void **state) {
  kiln_hlo_module_t *m = parse(kSmall);
  kiln_hlo_computation_find(m->entry, "y")->parameter_number = 2;
  expect_message(kiln_hlo_module_verify(m), "parameter 'y' has number 2", "dense");
  kiln_hlo_module_destroy(m);
}

static void test_structure_users_consistent(void **state) {
  kiln_hlo_module_t *m = parse(kSmall);
  kiln_hlo_instruction_t *x = kiln_hlo_computation_find(m->entry, "x");
  x->users.len = 0; /* forget that 'a' uses it */
  expect_message(kiln_hlo_module_verify(m), "instruction 'a' uses 'x'", "does not list it");
  kiln_hlo_module_destroy(m);
}

static void test_structure_operand_from_other_computation(void **state) {
  kiln_hlo_module_t *m = parse(kSmall);
  kiln_hlo_instruction_t *a = kiln_hlo_computation_find(m->entry, "a");
  kiln_hlo_instruction_t *p = kiln_hlo_computation_find(kiln_hlo_module_find_computation(m, "f"), "p");
  a->operands[1] = p;
  kiln_hlo_computation_find(m->entry, "y")->users.len = 0;
  expect_message(kiln_hlo_module_verify(m), "operand 1 'p' belongs to computation 'f'", NULL);
  kiln_hlo_module_destroy(m);
}

static void test_structure_call_cycle(void **state) {
  kiln_hlo_module_t *m = parse(kSmall);
  kiln_hlo_computation_t *f = kiln_hlo_module_find_computation(m, "f");
  kiln_hlo_instruction_add_called(f->root, "to_apply", false, 1, &f);
  expect_message(kiln_hlo_module_verify(m), "calls computation 'f'", "call cycle");
  kiln_hlo_module_destroy(m);
}

static void test_structure_data_cycle(void **state) {
  kiln_hlo_module_t *m = parse(kSmall);
  kiln_hlo_instruction_t *a = kiln_hlo_computation_find(m->entry, "a");
  kiln_hlo_instruction_t *c = kiln_hlo_computation_find(m->entry, "c");
  kiln_hlo_instruction_t *ops[2] = {a->operands[0], c};
  kiln_hlo_instruction_set_operands(a, 2, ops);
  expect_message(kiln_hlo_module_verify(m), "depends on itself", NULL);
  kiln_hlo_module_destroy(m);
}

static void test_constant_shape_matches_literal(void **state) {
  kiln_hlo_module_t *m =
      parse("HloModule m\n\nENTRY main {\n  ROOT k = f32[2] constant({1, 2})\n}\n");
  assert_null(kiln_hlo_module_verify(m));
  int64_t three = 3;
  m->entry->root->shape = kiln_shape_make_array(&m->arena, KILN_F32, 1, &three);
  expect_message(kiln_hlo_module_verify(m), "instruction 'k'", "operands give f32[2]");
  kiln_hlo_module_destroy(m);
}

static void test_shape_inference_api_reports_without_instruction(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t d1[2] = {2, 4}, d2[2] = {3, 4};
  const kiln_shape_t *ops[2] = {kiln_shape_make_array(&a, KILN_F32, 2, d1),
                                kiln_shape_make_array(&a, KILN_F32, 2, d2)};
  kiln_shape_t *out = NULL;
  assert_null(kiln_shape_infer_concatenate(&a, 2, ops, 0, &out));
  assert_int_equal(out->dims[0], 5);
  assert_int_equal(out->dims[1], 4);
  kiln_status s = kiln_shape_infer_concatenate(&a, 2, ops, 1, &out);
  assert_non_null(s);
  assert_null(out);
  assert_non_null(strstr(kiln_status_message(s), "except 1; operand 1 is f32[3,4] but operand 0 is f32[2,4]"));
  kiln_status_free(s);
  kiln_arena_destroy(&a);
}

static void test_shape_inference_rejects_overflowing_attributes(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t d[1] = {10};
  kiln_shape_t *x = kiln_shape_make_array(&a, KILN_F32, 1, d), *out = NULL;
  kiln_slice_dim_t sl = {1, 10, INT64_MAX};
  assert_null(kiln_shape_infer_slice(&a, x, 1, &sl, &out));
  assert_int_equal(out->dims[0], 1);
  kiln_window_dim_t w = {.size = 2, .stride = 1, .pad_lo = 0, .pad_hi = 0,
                         .lhs_dilate = INT64_MAX / 2, .rhs_dilate = 1};
  kiln_status s = kiln_shape_infer_window_output(&a, x, 1, &w, KILN_F32, &out);
  assert_non_null(s);
  kiln_status_free(s);
  kiln_pad_dim_t pad = {INT64_MAX, 1, 0};
  const kiln_shape_t *zero = kiln_shape_make_scalar(&a, KILN_F32);
  s = kiln_shape_infer_pad(&a, x, zero, 1, &pad, &out);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "overflows"));
  kiln_status_free(s);
  kiln_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binary_ops_need_equal_types_and_dims),
      cmocka_unit_test(test_compare_gives_pred),
      cmocka_unit_test(test_bitwise_and_shift_types),
      cmocka_unit_test(test_unary_op_types),
      cmocka_unit_test(test_convert_and_bitcast_convert),
      cmocka_unit_test(test_select_and_clamp),
      cmocka_unit_test(test_broadcast_dimensions_map_operand_dims),
      cmocka_unit_test(test_transpose_needs_permutation),
      cmocka_unit_test(test_reshape_keeps_element_count),
      cmocka_unit_test(test_slice_bounds_and_strides),
      cmocka_unit_test(test_dynamic_slice_and_update),
      cmocka_unit_test(test_concatenate_dims_must_match),
      cmocka_unit_test(test_corpus_invalid_concat_is_rejected),
      cmocka_unit_test(test_pad_sizes_with_negative_and_interior),
      cmocka_unit_test(test_reverse_and_iota_dimensions),
      cmocka_unit_test(test_variadic_reduce),
      cmocka_unit_test(test_reduce_window_output_size),
      cmocka_unit_test(test_collective_reducers_match_their_operands),
      cmocka_unit_test(test_select_and_scatter),
      cmocka_unit_test(test_map_applies_scalar_computation),
      cmocka_unit_test(test_dot_general_dimension_numbers),
      cmocka_unit_test(test_convolution_output_shape),
      cmocka_unit_test(test_gather_shape_rules),
      cmocka_unit_test(test_scatter_shape_rules),
      cmocka_unit_test(test_sort_comparator_signature),
      cmocka_unit_test(test_while_signatures),
      cmocka_unit_test(test_conditional_branches),
      cmocka_unit_test(test_call_and_fusion_signatures),
      cmocka_unit_test(test_tuple_and_get_tuple_element),
      cmocka_unit_test(test_collective_shapes),
      cmocka_unit_test(test_linear_algebra_and_fft),
      cmocka_unit_test(test_rng_precision_and_topk),
      cmocka_unit_test(test_arity_is_checked),
      cmocka_unit_test(test_entry_layout_and_layout_rank),
      cmocka_unit_test(test_structure_root_required),
      cmocka_unit_test(test_structure_duplicate_instruction_names),
      cmocka_unit_test(test_structure_parameter_numbers_dense),
      cmocka_unit_test(test_structure_users_consistent),
      cmocka_unit_test(test_structure_operand_from_other_computation),
      cmocka_unit_test(test_structure_call_cycle),
      cmocka_unit_test(test_structure_data_cycle),
      cmocka_unit_test(test_constant_shape_matches_literal),
      cmocka_unit_test(test_shape_inference_api_reports_without_instruction),
      cmocka_unit_test(test_shape_inference_rejects_overflowing_attributes),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
