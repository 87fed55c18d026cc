/* Copy insertion: where copies go (in-place ops, while loop state, input_output_alias) and
 * that it preserves what every evaluable corpus module computes, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "buffer_test_util.h"
#include "compiler/passes/buffer_assignment.h"
#include "compiler/passes/dataflow.h"
#include "tools/common/corpus_eval.h"

static kiln_hlo_instruction_t *find(const kiln_hlo_module_t *m, const char *comp, const char *name) {
  const kiln_hlo_computation_t *c = comp ? kiln_hlo_module_find_computation(m, comp) : m->entry;
  assert_non_null(c);
  kiln_hlo_instruction_t *in = kiln_hlo_computation_find(c, name);
  if (!in) fail_msg("no instruction %s", name);
  return in;
}

static void test_dus_operand_used_later_gets_copy(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  u = f32[2] parameter(1)\n"
      "  i = s32[] parameter(2)\n"
      "  a = f32[8] add(p, p)\n"
      "  d = f32[8] dynamic-update-slice(a, u, i)\n"
      "  n = f32[8] negate(a)\n"
      "  ROOT t = (f32[8], f32[8]) tuple(d, n)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion");
  kiln_hlo_instruction_t *d = find(m, NULL, "d");
  assert_int_equal(d->operands[0]->opcode, KILN_OP_COPY);
  assert_ptr_equal(d->operands[0]->operands[0], find(m, NULL, "a"));
  assert_int_equal(bt_count_op(m->entry, KILN_OP_COPY), 1);
  kiln_hlo_module_destroy(m);
}

static void test_dus_operand_that_dies_gets_no_copy(void **state) {
  /* `a` is also read by the slice feeding the update: that use runs before the DUS. */
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  i = s32[] parameter(1)\n"
      "  a = f32[8] add(p, p)\n"
      "  s = f32[2] slice(a), slice={[0:2]}\n"
      "  u = f32[2] negate(s)\n"
      "  d = f32[8] dynamic-update-slice(a, u, i)\n"
      "  ROOT n = f32[8] negate(d)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion");
  assert_ptr_equal(find(m, NULL, "d")->operands[0], find(m, NULL, "a"));
  assert_int_equal(bt_count_op(m->entry, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

static void test_dus_on_entry_parameter_gets_copy(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  u = f32[2] parameter(1)\n"
      "  i = s32[] parameter(2)\n"
      "  ROOT d = f32[8] dynamic-update-slice(p, u, i)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion");
  assert_int_equal(find(m, NULL, "d")->operands[0]->opcode, KILN_OP_COPY);
  kiln_hlo_module_destroy(m);
}

static const char *kLoop =
    "HloModule w\n"
    "cond {\n"
    "  p = (s32[], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  c = s32[] constant(5)\n"
    "  ROOT lt = pred[] compare(i, c), direction=LT\n"
    "}\n"
    "body {\n"
    "  p = (s32[], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  one = s32[] constant(1)\n"
    "  i2 = s32[] add(i, one)\n"
    "  x = f32[4] get-tuple-element(p), index=1\n"
    "  x2 = f32[4] add(x, x)\n"
    "  ROOT t = (s32[], f32[4]) tuple(i2, x2)\n"
    "}\n"
    "ENTRY e {\n"
    "  x = f32[4] parameter(0)\n"
    "  z = s32[] constant(0)\n"
    "  t = (s32[], f32[4]) tuple(z, x)\n"
    "  ROOT w = (s32[], f32[4]) while(t), condition=cond, body=body\n"
    "}\n";

static void test_while_state_from_parameter_and_constant_gets_copies(void **state) {
  kiln_hlo_module_t *m = bt_parse(kLoop);
  bt_check_semantics(m, "copy_insertion");
  kiln_hlo_instruction_t *w = find(m, NULL, "w");
  kiln_hlo_instruction_t *init = w->operands[0];
  assert_int_equal(init->opcode, KILN_OP_TUPLE);
  assert_int_equal(init->operands[0]->opcode, KILN_OP_COPY);
  assert_int_equal(init->operands[1]->opcode, KILN_OP_COPY);
  assert_ptr_equal(init->operands[1]->operands[0], find(m, NULL, "x"));
  /* The body updates its state element-wise from the state itself: no copy needed there. */
  assert_int_equal(bt_count_op(kiln_hlo_module_find_computation(m, "body"), KILN_OP_COPY), 0);
  bt_run(m, "schedule");
  kiln_buffer_assignment_t *ba = NULL;
  kiln_status s = kiln_buffer_assignment_run(m, NULL, &ba);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_null(kiln_buffer_assignment_check(ba));
  /* Init, body parameter, body root and the loop's output share one slice. */
  kiln_buffer_slice_t a, b, c, d;
  const kiln_hlo_computation_t *body = kiln_hlo_module_find_computation(m, "body");
  assert_true(kiln_buffer_assignment_slice_at(ba, init, 1, &a));
  assert_true(kiln_buffer_assignment_slice_at(ba, body->parameters[0], 1, &b));
  assert_true(kiln_buffer_assignment_slice_at(ba, body->root, 1, &c));
  assert_true(kiln_buffer_assignment_slice_at(ba, w, 1, &d));
  assert_int_equal(a.buffer, b.buffer);
  assert_int_equal(a.buffer, c.buffer);
  assert_int_equal(a.buffer, d.buffer);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_while_state_swapped_in_body_gets_copies(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule w\n"
      "cond {\n"
      "  p = (s32[], f32[4], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  c = s32[] constant(3)\n"
      "  ROOT lt = pred[] compare(i, c), direction=LT\n"
      "}\n"
      "body {\n"
      "  p = (s32[], f32[4], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  x = f32[4] get-tuple-element(p), index=1\n"
      "  y = f32[4] get-tuple-element(p), index=2\n"
      "  ROOT t = (s32[], f32[4], f32[4]) tuple(i2, y, x)\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[4] parameter(0)\n"
      "  y = f32[4] parameter(1)\n"
      "  nx = f32[4] negate(x)\n"
      "  ny = f32[4] exponential(y)\n"
      "  z = s32[] constant(0)\n"
      "  t = (s32[], f32[4], f32[4]) tuple(z, nx, ny)\n"
      "  ROOT w = (s32[], f32[4], f32[4]) while(t), condition=cond, body=body\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion,schedule");
  assert_true(bt_count_op(kiln_hlo_module_find_computation(m, "body"), KILN_OP_COPY) >= 2);
  kiln_buffer_assignment_t *ba = NULL;
  kiln_status s = kiln_buffer_assignment_run(m, NULL, &ba);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_null(kiln_buffer_assignment_check(ba));
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_while_init_used_after_loop_gets_copy(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule w\n"
      "cond {\n"
      "  p = (s32[], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  c = s32[] constant(5)\n"
      "  ROOT lt = pred[] compare(i, c), direction=LT\n"
      "}\n"
      "body {\n"
      "  p = (s32[], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  x = f32[4] get-tuple-element(p), index=1\n"
      "  x2 = f32[4] multiply(x, x)\n"
      "  ROOT t = (s32[], f32[4]) tuple(i2, x2)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  x = f32[4] negate(p)\n"
      "  k = s32[] parameter(1)\n"
      "  i = s32[] add(k, k)\n"
      "  t = (s32[], f32[4]) tuple(i, x)\n"
      "  w = (s32[], f32[4]) while(t), condition=cond, body=body\n"
      "  r = f32[4] get-tuple-element(w), index=1\n"
      "  ROOT o = f32[4] add(r, x)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion");
  kiln_hlo_instruction_t *init = find(m, NULL, "w")->operands[0];
  assert_int_equal(init->operands[1]->opcode, KILN_OP_COPY); /* x is read after the loop */
  assert_int_equal(init->operands[0]->opcode, KILN_OP_ADD);  /* i dies in the loop */
  kiln_hlo_module_destroy(m);
}

static void test_donated_parameter_is_updated_in_place(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  u = f32[2] parameter(1)\n"
      "  i = s32[] parameter(2)\n"
      "  ROOT d = f32[8] dynamic-update-slice(p, u, i)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion,schedule");
  assert_ptr_equal(find(m, NULL, "d")->operands[0], find(m, NULL, "p"));
  kiln_buffer_assignment_t *ba = NULL;
  kiln_status s = kiln_buffer_assignment_run(m, NULL, &ba);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_null(kiln_buffer_assignment_check(ba));
  kiln_buffer_slice_t sl;
  assert_true(kiln_buffer_assignment_slice_at(ba, m->entry->root, 0, &sl));
  assert_int_equal(ba->allocations[sl.allocation].kind, KILN_ALLOCATION_PARAMETER);
  assert_int_equal(ba->allocations[sl.allocation].parameter_number, 0);
  assert_int_equal(ba->allocations[sl.allocation].output_leaf, 0);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_aliased_output_written_after_parameter_reads(void **state) {
  /* Output 0 lives in parameter 0's buffer; `e` still reads p, so the output is copied in
   * after every read of p. */
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  n = f32[8] negate(p)\n"
      "  e = f32[8] exponential(p)\n"
      "  ROOT t = (f32[8], f32[8]) tuple(n, e)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion,schedule");
  kiln_hlo_instruction_t *out0 = m->entry->root->operands[0];
  assert_int_equal(out0->opcode, KILN_OP_COPY);
  bool after_e = false;
  for (int k = 0; k < out0->num_control_predecessors; k++)
    after_e |= out0->control_predecessors[k] == find(m, NULL, "e");
  assert_true(after_e);
  kiln_buffer_assignment_t *ba = NULL;
  kiln_status s = kiln_buffer_assignment_run(m, NULL, &ba);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_null(kiln_buffer_assignment_check(ba));
  kiln_buffer_slice_t sl;
  assert_true(kiln_buffer_assignment_slice_at(ba, m->entry->root, 0, &sl));
  assert_int_equal(ba->allocations[sl.allocation].kind, KILN_ALLOCATION_PARAMETER);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_output_of_parameter_or_constant_gets_copy(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  c = f32[2] constant({1, 2})\n"
      "  ROOT t = (f32[8], f32[2], f32[8]) tuple(p, c, p)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion");
  for (int k = 0; k < 3; k++) assert_int_equal(m->entry->root->operands[k]->opcode, KILN_OP_COPY);
  kiln_hlo_module_destroy(m);
}

static void test_shared_callee_is_cloned(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m\n"
      "f {\n"
      "  a = f32[4] parameter(0)\n"
      "  ROOT n = f32[4] negate(a)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  c1 = f32[4] call(p), to_apply=f\n"
      "  c2 = f32[4] call(c1), to_apply=f\n"
      "  ROOT r = f32[4] add(c1, c2)\n"
      "}\n");
  bt_check_semantics(m, "copy_insertion");
  assert_ptr_not_equal(kiln_hlo_instruction_called(find(m, NULL, "c1"), "to_apply"),
                       kiln_hlo_instruction_called(find(m, NULL, "c2"), "to_apply"));
  kiln_hlo_module_destroy(m);
}

/* ---- corpus ---- */

typedef struct corpus_ctx {
  long rate; /* kiln_corpus_sample_rate */
  int compared, skipped, failed, copies;
  kiln_strbuf_t failures;
  double slowest_s;
  char slowest[300];
} corpus_ctx_t;

static const char *ineligible(const kiln_hlo_module_t *m) {
  double elems = 0;
  for (int p = 0; p < m->entry->num_parameters; p++) {
    const kiln_shape_t *s = m->entry->parameters[p]->shape;
    elems += kiln_shape_is_tuple(s) ? (double)kiln_shape_byte_size(s) : (double)kiln_shape_num_elements(s);
  }
  if (elems > (double)(1 << 22)) return "large parameters";
  double work = 0;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      if (kiln_shape_is_array(in->shape)) work += (double)kiln_shape_num_elements(in->shape);
      /* The evaluator copies a loop's state every iteration. */
      if (in->opcode == KILN_OP_WHILE &&
          (double)kiln_shape_byte_size(in->shape) * BT_MAX_WHILE_ITERATIONS > 1e9)
        return "large while-loop state";
      switch (in->opcode) {
        case KILN_OP_CUSTOM_CALL:
        case KILN_OP_CUSTOM_CALL_START:
          return "custom-call";
        case KILN_OP_INFEED:
        case KILN_OP_OUTFEED:
        case KILN_OP_SEND:
        case KILN_OP_RECV:
          return "host transfer";
        case KILN_OP_RNG:
        case KILN_OP_RNG_GET_AND_UPDATE_STATE:
          return "stateful rng (order-dependent)";
        case KILN_OP_CONSTANT:
          if (in->literal && in->literal->unknown) return "elided constant";
          break;
        default:
          if (kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) return "collective";
          break;
      }
    }
  }
  if (work > 3e7) return "too much work to evaluate twice here";
  /* A Debug ASan build evaluates ~10x slower: leave out modules whose dots or convolutions
   * alone would take most of the test's time there. */
  if (kiln_corpus_under_asan() && kiln_corpus_eval_cost(m) > 2e7) return "too costly under ASan";
  return NULL;
}

static void corpus_one(void *vctx, kiln_hlo_module_t *m, const char *label) {
  corpus_ctx_t *ctx = vctx;
  double t0 = kiln_now_seconds();
  if (getenv("KILN_CORPUS_VERBOSE")) fprintf(stderr, "copy insertion corpus: %s\n", label);
  if (!m || !m->entry || !kiln_corpus_sampled_at(label, ctx->rate)) {
    ctx->skipped++;
    return;
  }
  kiln_status s = kiln_hlo_module_verify(m);
  if (s || ineligible(m)) {
    kiln_status_free(s);
    ctx->skipped++;
    return;
  }
  kiln_arena_t a1, a2;
  kiln_arena_init(&a1);
  kiln_arena_init(&a2);
  kiln_literal_t *before = NULL, *after = NULL;
  s = bt_eval(m, &a1, &before);
  if (s) { /* not evaluable here (e.g. a data-dependent loop past the bound) */
    kiln_status_free(s);
    ctx->skipped++;
  } else {
    int64_t n0 = kiln_hlo_module_instruction_count(m);
    kiln_pass_options_t o = {.verify = 1};
    s = kiln_pass_run_list(m, "copy_insertion,schedule", &o);
    if (s && kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED) {
      kiln_status_free(s);
      ctx->skipped++;
    } else if (s) {
      ctx->failed++;
      kiln_strbuf_printf(&ctx->failures, "  FAIL %s: passes: %.400s\n", label, kiln_status_message(s));
      kiln_status_free(s);
    } else if ((s = bt_eval(m, &a2, &after)) != NULL) {
      ctx->failed++;
      kiln_strbuf_printf(&ctx->failures, "  FAIL %s: eval after: %.400s\n", label, kiln_status_message(s));
      kiln_status_free(s);
    } else if (!bt_literals_equal(before, after)) {
      ctx->failed++;
      kiln_strbuf_printf(&ctx->failures, "  FAIL %s: results differ\n", label);
    } else {
      ctx->compared++;
      ctx->copies += (int)(kiln_hlo_module_instruction_count(m) - n0);
    }
  }
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a2);
  double dt = kiln_now_seconds() - t0;
  if (dt > ctx->slowest_s) {
    ctx->slowest_s = dt;
    snprintf(ctx->slowest, sizeof ctx->slowest, "%s", label);
  }
}

static void test_corpus_semantics_preserved_bitwise(void **state) {
  corpus_ctx_t ctx = {.rate = kiln_corpus_sample_rate(KILN_CORPUS_ASAN_SAMPLE)};
  bt_for_each_corpus_module(corpus_one, &ctx);
  printf(
      "copy insertion + schedule on the corpus (one module in %ld): %d modules bit-identical, "
      "%d failed, %d not evaluated here; %d instructions added; slowest %s (%.1f s)\n%s",
      ctx.rate, ctx.compared, ctx.failed, ctx.skipped, ctx.copies, ctx.slowest, ctx.slowest_s,
      kiln_strbuf_cstr(&ctx.failures));
  kiln_strbuf_free(&ctx.failures);
  assert_int_equal(ctx.failed, 0);
  assert_true(ctx.compared > 100 / ctx.rate);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dus_operand_used_later_gets_copy),
      cmocka_unit_test(test_dus_operand_that_dies_gets_no_copy),
      cmocka_unit_test(test_dus_on_entry_parameter_gets_copy),
      cmocka_unit_test(test_while_state_from_parameter_and_constant_gets_copies),
      cmocka_unit_test(test_while_state_swapped_in_body_gets_copies),
      cmocka_unit_test(test_while_init_used_after_loop_gets_copy),
      cmocka_unit_test(test_donated_parameter_is_updated_in_place),
      cmocka_unit_test(test_aliased_output_written_after_parameter_reads),
      cmocka_unit_test(test_output_of_parameter_or_constant_gets_copy),
      cmocka_unit_test(test_shared_callee_is_cloned),
      cmocka_unit_test(test_corpus_semantics_preserved_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
