/* Fusion passes: priority fusion, multi-output fusion, the cost model and the fusion
 * helpers, on small hand-written modules (each checked with the verifier and, before and
 * after, with the reference evaluator bit for bit), then on every module of the corpus the
 * evaluator can run. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/cost_model.h"
#include "compiler/passes/dataflow.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify: %s", kiln_status_message(s));
  return m;
}

/* Bitwise equality of two results (tuples element by element). */
static bool same_bits(const kiln_literal_t *a, const kiln_literal_t *b) {
  if (!a || !b) return a == b;
  if (a->num_tuple_elements != b->num_tuple_elements) return false;
  if (a->num_tuple_elements) {
    for (int i = 0; i < a->num_tuple_elements; i++)
      if (!same_bits(a->tuple_elements[i], b->tuple_elements[i])) return false;
    return true;
  }
  if (!kiln_shape_compatible(a->shape, b->shape) || a->num_elements != b->num_elements)
    return false;
  size_t bytes = (size_t)a->num_elements * kiln_elem_type_storage_bytes(a->shape->type);
  return bytes == 0 || memcmp(a->data, b->data, bytes) == 0;
}

/* Evaluates `m` on fake arguments (seed 42) into `out_arena`. */
static kiln_status eval_fake(const kiln_hlo_module_t *m, kiln_arena_t *out_arena,
                             kiln_literal_t **out) {
  kiln_arena_t args_arena;
  kiln_arena_init(&args_arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
  if (!s) {
    kiln_eval_options_t eo = {0};
    eo.rng_seed = 42;
    eo.max_while_iterations = 2000;
    s = kiln_eval_module(m, &eo, n, args, out_arena, out);
  }
  kiln_arena_destroy(&args_arena);
  return s;
}

/* Runs `passes`, checks the module verifies and evaluates to the same bits as before. */
static void run_and_check(kiln_hlo_module_t *m, const char *passes) {
  kiln_arena_t before_arena, after_arena;
  kiln_arena_init(&before_arena);
  kiln_arena_init(&after_arena);
  kiln_literal_t *before = NULL, *after = NULL;
  kiln_status s = eval_fake(m, &before_arena, &before);
  if (s) fail_msg("eval before: %s", kiln_status_message(s));
  kiln_pass_options_t o = {.verify = 1};
  s = kiln_pass_run_list(m, passes, &o);
  if (s) fail_msg("%s: %s", passes, kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify after: %s", kiln_status_message(s));
  s = eval_fake(m, &after_arena, &after);
  if (s) fail_msg("eval after: %s", kiln_status_message(s));
  if (!same_bits(before, after)) {
    char *text = kiln_hlo_module_to_string(m);
    fail_msg("results differ after %s:\n%s", passes, text);
  }
  kiln_arena_destroy(&before_arena);
  kiln_arena_destroy(&after_arena);
}

static int count_op(const kiln_hlo_computation_t *c, kiln_hlo_opcode_t op) {
  int n = 0;
  for (size_t i = 0; i < c->instructions.len; i++) n += c->instructions.data[i]->opcode == op;
  return n;
}

static kiln_hlo_instruction_t *only_fusion(const kiln_hlo_computation_t *c) {
  kiln_hlo_instruction_t *f = NULL;
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i]->opcode == KILN_OP_FUSION) {
      assert_null(f);
      f = c->instructions.data[i];
    }
  assert_non_null(f);
  return f;
}

static const char kAdd[] =
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
    "max {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] maximum(x, y)\n}\n";

static char *with_reducers(const char *entry) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "HloModule m\n\n%s\n%s", kAdd, entry);
  return kiln_strbuf_take(&b);
}

/* ---- priority fusion ---- */

static void test_elementwise_chain_becomes_one_loop_fusion(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule chain\n"
      "ENTRY main {\n"
      "  p0 = f32[4,8]{1,0} parameter(0)\n  p1 = f32[4,8]{1,0} parameter(1)\n"
      "  a = f32[4,8]{1,0} add(p0, p1)\n  b = f32[4,8]{1,0} multiply(a, p1)\n"
      "  c = f32[4,8]{1,0} exponential(b)\n  two = f32[] constant(2)\n"
      "  t = f32[4,8]{1,0} broadcast(two), dimensions={}\n"
      "  d = f32[4,8]{1,0} subtract(c, t)\n  ROOT e = f32[4,8]{1,0} negate(d)\n}\n");
  run_and_check(m, "priority_fusion");
  kiln_hlo_instruction_t *f = only_fusion(m->entry);
  assert_ptr_equal(m->entry->root, f);
  assert_int_equal(f->fusion_kind, KILN_HLO_FUSION_LOOP);
  assert_int_equal(f->num_operands, 2); /* p0, p1; the scalar constant moved inside */
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
  assert_non_null(body);
  assert_true(kiln_str_starts_with(body->name, "fused_computation"));
  assert_int_equal(count_op(body, KILN_OP_EXP), 1);
  assert_int_equal(kiln_fusion_count_kernels(m), 1);
  kiln_hlo_module_destroy(m);
}

static void test_cheap_producer_is_duplicated_into_both_consumers(void **state) {
  char *text = with_reducers(
      "ENTRY main {\n"
      "  p = f32[16,16]{1,0} parameter(0)\n  n = f32[16,16]{1,0} negate(p)\n"
      "  z = f32[] constant(0)\n"
      "  r0 = f32[16]{0} reduce(n, z), dimensions={0}, to_apply=add\n"
      "  r1 = f32[16]{0} reduce(n, z), dimensions={1}, to_apply=add\n"
      "  ROOT t = (f32[16]{0}, f32[16]{0}) tuple(r0, r1)\n}\n");
  kiln_hlo_module_t *m = parse(text);
  kiln_free(text);
  run_and_check(m, "priority_fusion");
  assert_int_equal(count_op(m->entry, KILN_OP_NEGATE), 0);
  assert_int_equal(count_op(m->entry, KILN_OP_FUSION), 2);
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    assert_int_equal(f->fusion_kind, KILN_HLO_FUSION_INPUT);
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    assert_int_equal(count_op(body, KILN_OP_NEGATE), 1);
    assert_int_equal(body->root->opcode, KILN_OP_REDUCE);
    assert_ptr_equal(f->operands[0], m->entry->parameters[0]);
  }
  /* Different reduced dimensions: multi-output fusion must leave them apart. */
  run_and_check(m, "multi_output_fusion");
  assert_int_equal(count_op(m->entry, KILN_OP_FUSION), 2);
  kiln_hlo_module_destroy(m);
}

/* Rounds v' = xor(add(v, k), multiply(v, v)) over u32[2], 150 of them (450 instructions):
 * each value feeds two elementwise users at its own index. Fused, the kernel computes each
 * value once per element (the elemental emitter caches it), so the cost model prices the
 * first value once per element; it used to add up the users, 2^150 (inf past 1,024 rounds),
 * and priority fusion saw every fusion along the chain as a loss. The chain writes 2
 * elements, so it may pass the 200-instruction bound (KILN_FUSION_MAX_TINY_INSTRUCTIONS):
 * one kernel, where its launches were the whole cost. */
/* 150 rounds v' = xor(add(v, k), multiply(v, v)) over `shape`, then a negate. */
static kiln_hlo_module_t *rounds_module(const char *shape) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(
      &b, "HloModule rounds\nENTRY main {\n  v0 = %s parameter(0)\n  k = %s parameter(1)\n", shape,
      shape);
  for (int i = 1; i <= 150; i++)
    kiln_strbuf_printf(
        &b, "  a%d = %s add(v%d, k)\n  m%d = %s multiply(v%d, v%d)\n  v%d = %s xor(a%d, m%d)\n", i,
        shape, i - 1, i, shape, i - 1, i - 1, i, shape, i, i);
  kiln_strbuf_printf(&b, "  ROOT r = %s negate(v150)\n}\n", shape);
  kiln_hlo_module_t *m = parse(kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return m;
}

static void test_a_tiny_chain_of_shared_values_is_one_kernel(void **state) {
  (void)state;
  kiln_hlo_module_t *m = rounds_module("u32[2]{0}");
  run_and_check(m, "priority_fusion");
  assert_int_equal(kiln_fusion_count_kernels(m), 1);
  const kiln_hlo_instruction_t *f = only_fusion(m->entry);
  assert_true(kiln_fusion_body_size(f) > KILN_FUSION_MAX_INSTRUCTIONS);
  assert_true(kiln_cost_operand_utilization(f, 0) <= 2); /* v0: read by add and multiply once */
  assert_true(kiln_cost_operand_utilization(f, 1) <= 2); /* k: by every round's add, at one index */
  double flops = kiln_cost_flops(f);
  assert_true(flops > 0 && flops < 1e4);
  kiln_hlo_module_destroy(m);
  /* Not tiny: the same chain over u32[4096] stays within 200 instructions a kernel. */
  m = rounds_module("u32[4096]{0}");
  run_and_check(m, "priority_fusion");
  assert_true(kiln_fusion_count_kernels(m) > 1);
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = m->entry->instructions.data[i];
    if (in->opcode == KILN_OP_FUSION)
      assert_true(kiln_fusion_body_size(in) <= KILN_FUSION_MAX_INSTRUCTIONS);
  }
  kiln_hlo_module_destroy(m);
}

static void test_expensive_producer_is_not_recomputed_per_broadcast_element(void **state) {
  /* A chain of 24 transcendental ops over f32[4096] broadcast into f32[4096,4096]: fused
   * into the broadcast it would be recomputed 4096 times per element, which costs more
   * compute time than the launch saves (the consumer becomes compute-bound). */
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b,
                     "HloModule bcast\nENTRY main {\n  p = f32[4096]{0} parameter(0)\n"
                     "  q = f32[4096,4096]{1,0} parameter(1)\n  v0 = f32[4096]{0} abs(p)\n");
  for (int i = 1; i <= 24; i++)
    kiln_strbuf_printf(&b, "  v%d = f32[4096]{0} %s(v%d)\n", i, i % 2 ? "sine" : "cosine", i - 1);
  kiln_strbuf_append(&b,
                     "  b = f32[4096,4096]{1,0} broadcast(v24), dimensions={1}\n"
                     "  ROOT m = f32[4096,4096]{1,0} multiply(b, q)\n}\n");
  kiln_hlo_module_t *m = parse(kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  kiln_hlo_instruction_t *c = kiln_hlo_computation_find(m->entry, "v24");
  kiln_hlo_instruction_t *bc = kiln_hlo_computation_find(m->entry, "b");
  assert_true(kiln_cost_utilization_of(bc, c) == 4096);
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, "priority_fusion", &o);
  if (s) fail_msg("%s", kiln_status_message(s));
  /* The transcendental chain stays one kernel, the broadcast+multiply another. */
  assert_int_equal(kiln_fusion_count_kernels(m), 2);
  assert_int_equal(count_op(m->entry, KILN_OP_FUSION), 2);
  kiln_hlo_module_destroy(m);
}

static void test_no_fusion_across_dot_or_custom_call(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule dots\n"
      "ENTRY main {\n"
      "  p = f32[8,8]{1,0} parameter(0)\n  w = f32[8,8]{1,0} parameter(1)\n"
      "  n = f32[8,8]{1,0} negate(p)\n"
      "  d = f32[8,8]{1,0} dot(n, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  e = f32[8,8]{1,0} exponential(d)\n"
      "  c = f32[8,8]{1,0} custom-call(e), custom_call_target=\"foo\"\n"
      "  ROOT a = f32[8,8]{1,0} abs(c)\n}\n");
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, "priority_fusion,multi_output_fusion", &o);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(count_op(m->entry, KILN_OP_DOT), 1);
  assert_int_equal(count_op(m->entry, KILN_OP_CUSTOM_CALL), 1);
  assert_int_equal(count_op(m->entry, KILN_OP_FUSION), 3);
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    assert_int_equal(count_op(body, KILN_OP_DOT) + count_op(body, KILN_OP_CUSTOM_CALL), 0);
    assert_int_equal(f->fusion_kind, KILN_HLO_FUSION_LOOP);
  }
  assert_int_equal(kiln_fusion_count_kernels(m), 5);
  kiln_hlo_module_destroy(m);
}

static void test_reduction_takes_elementwise_epilogue(void **state) {
  /* XLA's rule: after a reduction the reduction emitter takes, only one-operand
   * intermediates (here sqrt and a bitcast reshape) join its kernel. */
  char *text = with_reducers(
      "ENTRY main {\n"
      "  p = f32[32,64]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
      "  e = f32[32,64]{1,0} exponential(p)\n"
      "  r = f32[32]{0} reduce(e, z), dimensions={1}, to_apply=add\n"
      "  root = f32[32]{0} sqrt(r)\n"
      "  ROOT out = f32[32,1]{1,0} reshape(root)\n}\n");
  kiln_hlo_module_t *m = parse(text);
  kiln_free(text);
  run_and_check(m, "priority_fusion");
  kiln_hlo_instruction_t *f = only_fusion(m->entry);
  assert_int_equal(f->fusion_kind, KILN_HLO_FUSION_INPUT);
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
  assert_int_equal(count_op(body, KILN_OP_REDUCE), 1);
  assert_int_equal(count_op(body, KILN_OP_SQRT), 1);
  assert_int_equal(kiln_fusion_hero(body->root)->opcode, KILN_OP_REDUCE);
  assert_int_equal(kiln_fusion_count_kernels(m), 1);
  kiln_hlo_module_destroy(m);
}

static void test_reduction_keeps_two_operand_epilogue_out(void **state) {
  /* divide(r, broadcast(64)) is not an intermediate the codegen walks through to find the
   * reduction hero: fused, the kernel would be a loop computing each row's sum alone. */
  char *text = with_reducers(
      "ENTRY main {\n"
      "  p = f32[32,64]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
      "  e = f32[32,64]{1,0} exponential(p)\n"
      "  r = f32[32]{0} reduce(e, z), dimensions={1}, to_apply=add\n"
      "  k = f32[] constant(64)\n  kb = f32[32]{0} broadcast(k), dimensions={}\n"
      "  ROOT mean = f32[32]{0} divide(r, kb)\n}\n");
  kiln_hlo_module_t *m = parse(text);
  kiln_free(text);
  run_and_check(m, "priority_fusion,multi_output_fusion");
  assert_int_equal(count_op(m->entry, KILN_OP_FUSION), 2);
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    if (count_op(body, KILN_OP_REDUCE)) assert_int_equal(count_op(body, KILN_OP_DIVIDE), 0);
  }
  kiln_hlo_module_destroy(m);
}

/* ---- multi-output fusion ---- */

static void test_sibling_reductions_share_one_multi_output_fusion(void **state) {
  char *text = with_reducers(
      "ENTRY main {\n"
      "  p = f32[16,32]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
      "  ninf = f32[] constant(-inf)\n"
      "  s = f32[16]{0} reduce(p, z), dimensions={1}, to_apply=add\n"
      "  x = f32[16]{0} reduce(p, ninf), dimensions={1}, to_apply=max\n"
      "  ROOT t = (f32[16]{0}, f32[16]{0}) tuple(s, x)\n}\n");
  kiln_hlo_module_t *m = parse(text);
  kiln_free(text);
  run_and_check(m, "priority_fusion,multi_output_fusion");
  kiln_hlo_instruction_t *f = only_fusion(m->entry);
  assert_int_equal(f->fusion_kind, KILN_HLO_FUSION_INPUT);
  assert_true(kiln_shape_is_tuple(f->shape));
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
  assert_int_equal(body->root->opcode, KILN_OP_TUPLE);
  assert_int_equal(body->root->num_operands, 2);
  assert_int_equal(count_op(body, KILN_OP_REDUCE), 2);
  assert_int_equal(f->num_operands, 1);
  for (size_t u = 0; u < f->users.len; u++)
    assert_int_equal(f->users.data[u]->opcode, KILN_OP_GET_TUPLE_ELEMENT);
  assert_int_equal(kiln_fusion_count_kernels(m), 1);
  kiln_hlo_module_destroy(m);
}

static void test_producer_with_outside_user_becomes_extra_output(void **state) {
  /* e feeds a dot (not fusible) and a reduction: priority fusion cannot duplicate it, so
   * multi-output fusion puts it into the reduction fusion as a second output. */
  char *text = with_reducers(
      "ENTRY main {\n"
      "  p = f32[8,8]{1,0} parameter(0)\n  w = f32[8,8]{1,0} parameter(1)\n"
      "  z = f32[] constant(0)\n  e = f32[8,8]{1,0} exponential(p)\n"
      "  d = f32[8,8]{1,0} dot(e, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  r = f32[8]{0} reduce(e, z), dimensions={1}, to_apply=add\n"
      "  ROOT t = (f32[8,8]{1,0}, f32[8]{0}) tuple(d, r)\n}\n");
  kiln_hlo_module_t *m = parse(text);
  kiln_free(text);
  run_and_check(m, "priority_fusion");
  assert_int_equal(count_op(m->entry, KILN_OP_FUSION), 2);
  run_and_check(m, "multi_output_fusion");
  kiln_hlo_instruction_t *f = only_fusion(m->entry);
  assert_int_equal(f->fusion_kind, KILN_HLO_FUSION_INPUT);
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
  assert_int_equal(body->root->opcode, KILN_OP_TUPLE);
  assert_int_equal(count_op(body, KILN_OP_EXP), 1);
  kiln_hlo_instruction_t *dot = NULL;
  for (size_t i = 0; i < m->entry->instructions.len; i++)
    if (m->entry->instructions.data[i]->opcode == KILN_OP_DOT) dot = m->entry->instructions.data[i];
  assert_non_null(dot);
  assert_int_equal(dot->operands[0]->opcode, KILN_OP_GET_TUPLE_ELEMENT);
  assert_ptr_equal(dot->operands[0]->operands[0], f);
  assert_int_equal(kiln_fusion_count_kernels(m), 2);
  kiln_hlo_module_destroy(m);
}

/* The cached cost model answers what the uncached one does, and a forgotten (replaced)
 * instruction is priced afresh. */
static void test_cost_cache_matches_the_model(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule cost_cache\n"
      "ENTRY main {\n"
      "  p = f32[256,256]{1,0} parameter(0)\n  e = f32[256,256]{1,0} exponential(p)\n"
      "  b = f32[256,256,4]{2,1,0} broadcast(e), dimensions={0,1}\n"
      "  t = f32[256,256,4]{2,1,0} tanh(b)\n"
      "  s = f32[128,256]{1,0} slice(e), slice={[0:128], [0:256]}\n"
      "  n = f32[128,256]{1,0} negate(s)\n"
      "  ROOT r = (f32[256,256,4]{2,1,0}, f32[128,256]{1,0}) tuple(t, n)\n}\n");
  run_and_check(m, "priority_fusion");
  const kiln_cost_device_t *d = kiln_cost_device_default();
  kiln_cost_cache_t cache;
  kiln_cost_cache_init(&cache);
  int pairs = 0;
  for (int round = 0; round < 2; round++) /* the second round reads the cache */
    for (size_t i = 0; i < m->entry->instructions.len; i++) {
      kiln_hlo_instruction_t *in = m->entry->instructions.data[i];
      assert_true(kiln_cost_instruction_time_cached(&cache, d, in) ==
                  kiln_cost_instruction_time(d, in));
      for (size_t u = 0; u < in->users.len; u++) {
        const kiln_hlo_instruction_t *c = in->users.data[u];
        for (int extra = 0; extra < 2; extra++)
          assert_true(kiln_cost_fused_time_cached(&cache, d, in, c, extra) ==
                      kiln_cost_fused_time(d, in, c, extra));
        pairs++;
      }
    }
  assert_true(pairs > 0);
  /* A fusion's flops come through its body: forgetting it after the body changed gives
   * the new price. */
  kiln_hlo_instruction_t *f = NULL;
  for (size_t i = 0; i < m->entry->instructions.len && !f; i++)
    if (m->entry->instructions.data[i]->opcode == KILN_OP_FUSION)
      f = m->entry->instructions.data[i];
  assert_non_null(f);
  double before = kiln_cost_instruction_time_cached(&cache, d, f);
  kiln_hlo_computation_t *body = (kiln_hlo_computation_t *)kiln_hlo_instruction_called(f, "calls");
  for (size_t i = 0; i < body->instructions.len; i++)
    if (body->instructions.data[i]->opcode == KILN_OP_EXP)
      body->instructions.data[i]->opcode = KILN_OP_NEGATE;                /* cheaper */
  assert_true(kiln_cost_instruction_time_cached(&cache, d, f) == before); /* stale on purpose */
  kiln_cost_cache_forget(&cache, f);
  assert_true(kiln_cost_instruction_time_cached(&cache, d, f) == kiln_cost_instruction_time(d, f));
  kiln_cost_cache_free(&cache);
  kiln_hlo_module_destroy(m);
}

/* A new instruction gets a position between its operands and users; one whose operand
 * sits after its user does not (the caller rebuilds); a bounded search says "reaches". */
static void test_fusion_order_place_and_search_bound(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule order\n"
      "ENTRY main {\n"
      "  p = f32[8]{0} parameter(0)\n  a = f32[8]{0} exponential(p)\n"
      "  b = f32[8]{0} negate(a)\n  c = f32[8]{0} tanh(b)\n"
      "  d = f32[8]{0} sqrt(c)\n  ROOT e = f32[8]{0} add(d, a)\n}\n");
  kiln_hlo_instruction_t *a = kiln_hlo_computation_find(m->entry, "a");
  kiln_hlo_instruction_t *b = kiln_hlo_computation_find(m->entry, "b");
  kiln_hlo_instruction_t *c = kiln_hlo_computation_find(m->entry, "c");
  kiln_hlo_instruction_t *e = kiln_hlo_computation_find(m->entry, "e");
  kiln_fusion_order_t o;
  kiln_fusion_order_build(&o, m->entry);
  /* x = log(b) and y = x + c, made after the order was built. */
  kiln_hlo_instruction_t *x = kiln_hlo_instruction_create(m->entry, KILN_OP_LOG, b->shape, "x");
  kiln_hlo_instruction_set_operands(x, 1, &b);
  kiln_hlo_instruction_t *y_ops[2] = {x, c};
  kiln_hlo_instruction_t *y = kiln_hlo_instruction_create(m->entry, KILN_OP_ADD, b->shape, "y");
  kiln_hlo_instruction_set_operands(y, 2, y_ops);
  assert_false(kiln_fusion_order_place(&o, y)); /* its operand x has no position */
  assert_false(kiln_fusion_order_place(&o, x)); /* nor has its user y */
  kiln_hlo_instruction_set_operands(y, 0, NULL);
  assert_true(kiln_fusion_order_place(&o, x));
  kiln_hlo_instruction_set_operands(y, 2, y_ops);
  assert_true(kiln_fusion_order_place(&o, y));
  assert_true(kiln_fusion_reaches(&o, b, y, NULL));
  assert_false(kiln_fusion_reaches(&o, y, b, NULL));
  /* z reads c and feeds b: an operand after a user, no position (and a cycle). */
  kiln_hlo_instruction_t *z = kiln_hlo_instruction_create(m->entry, KILN_OP_NEGATE, b->shape, "z");
  kiln_hlo_instruction_set_operands(z, 1, &c);
  kiln_hlo_instruction_t *b_ops[1] = {z};
  kiln_hlo_instruction_t *old_b_operand = b->operands[0];
  kiln_hlo_instruction_set_operands(b, 1, b_ops);
  assert_false(kiln_fusion_order_place(&o, z));
  kiln_hlo_instruction_set_operands(b, 1, &old_b_operand);
  kiln_hlo_instruction_set_operands(z, 0, NULL);
  /* With a bound of one visit the search from a cannot get to c: it answers the safe
   * "reaches"; unbounded, e does not reach a. */
  o.max_visits = 1;
  assert_true(kiln_fusion_reaches(&o, a, c, NULL));
  o.max_visits = 0;
  assert_false(kiln_fusion_reaches(&o, e, a, NULL));
  kiln_fusion_order_free(&o);
  kiln_hlo_module_destroy(m);
}

/* Small independent loop fusions read by one consumer merge into one input-slices kernel:
 * flattened outputs concatenated, one slice root each, bitcasts back outside. Another
 * element type and a big fusion stay on their own; results are bit-identical. */
static void test_horizontal_fusion_merges_small_independent_loops(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule sgd\n"
      "ENTRY main {\n"
      "  w1 = f32[64,32]{1,0} parameter(0)\n  g1 = f32[64,32]{1,0} parameter(1)\n"
      "  b1 = f32[32]{0} parameter(2)\n  gb1 = f32[32]{0} parameter(3)\n"
      "  w2 = f32[10]{0} parameter(4)\n  h = f16[7,3]{1,0} parameter(5)\n"
      "  big = f32[512,512]{1,0} parameter(6)\n"
      "  lr = f32[] constant(0.01)\n"
      "  lr1 = f32[64,32]{1,0} broadcast(lr), dimensions={}\n"
      "  s1 = f32[64,32]{1,0} multiply(g1, lr1)\n  n1 = f32[64,32]{1,0} subtract(w1, s1)\n"
      "  lrb = f32[32]{0} broadcast(lr), dimensions={}\n"
      "  sb = f32[32]{0} multiply(gb1, lrb)\n  nb = f32[32]{0} subtract(b1, sb)\n"
      "  e2 = f32[10]{0} exponential(w2)\n"
      "  nh = f16[7,3]{1,0} negate(h)\n"
      "  nbig = f32[512,512]{1,0} negate(big)\n"
      "  ROOT out = (f32[64,32]{1,0}, f32[32]{0}, f32[10]{0}, f16[7,3]{1,0}, f32[512,512]{1,0}) "
      "tuple(n1, nb, e2, nh, nbig)\n}\n");
  run_and_check(m, "priority_fusion,multi_output_fusion,horizontal_fusion");
  assert_int_equal(kiln_fusion_count_kernels(m), 3); /* the f32 three, f16, big */
  kiln_hlo_instruction_t *h = NULL;
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    kiln_hlo_instruction_t *in = m->entry->instructions.data[i];
    if (in->opcode == KILN_OP_FUSION && kiln_shape_is_tuple(in->shape)) h = in;
  }
  assert_non_null(h);
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(h, "calls");
  assert_int_equal(body->root->opcode, KILN_OP_TUPLE);
  assert_int_equal(body->root->num_operands, 3);
  const kiln_hlo_instruction_t *cat = body->root->operands[0]->operands[0];
  assert_int_equal(cat->opcode, KILN_OP_CONCATENATE);
  assert_int_equal(cat->shape->dims[0], 64 * 32 + 32 + 10);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(body->root->operands[i]->opcode, KILN_OP_SLICE);
    assert_ptr_equal(body->root->operands[i]->operands[0], cat);
  }
  /* Outside, the [64,32] member's users read a bitcast of its flat slice. */
  assert_int_equal(m->entry->root->operands[0]->opcode, KILN_OP_BITCAST);
  assert_int_equal(m->entry->root->operands[0]->shape->rank, 2);
  /* The text of the fused module parses again (the plugin's disk cache keeps optimized
   * modules as text): the concatenate prints its dimension. */
  char *text = kiln_hlo_module_to_string(m);
  assert_non_null(strstr(text, "dimensions={0}"));
  kiln_hlo_module_t *again = parse(text);
  kiln_free(text);
  assert_null(kiln_hlo_module_verify(again));
  kiln_hlo_module_destroy(again);
  kiln_hlo_module_destroy(m);
}

static void test_fusion_that_would_create_a_cycle_is_refused(void **state) {
  /* a -> d (dot) -> c and a -> c: merging a into c would make the fusion feed the dot
   * that feeds it. */
  kiln_hlo_module_t *m = parse(
      "HloModule cycle\n"
      "ENTRY main {\n"
      "  p = f32[8,8]{1,0} parameter(0)\n  w = f32[8,8]{1,0} parameter(1)\n"
      "  a = f32[8,8]{1,0} exponential(p)\n"
      "  d = f32[8,8]{1,0} dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT c = f32[8,8]{1,0} add(a, d)\n}\n");
  kiln_hlo_instruction_t *a = kiln_hlo_computation_find(m->entry, "a");
  kiln_hlo_instruction_t *d = kiln_hlo_computation_find(m->entry, "d");
  kiln_hlo_instruction_t *c = kiln_hlo_computation_find(m->entry, "c");
  kiln_fusion_order_t o;
  kiln_fusion_order_build(&o, m->entry);
  assert_true(kiln_fusion_reaches(&o, a, c, NULL));
  assert_true(kiln_fusion_reaches(&o, d, c, NULL));
  assert_false(kiln_fusion_reaches(&o, c, a, NULL));
  kiln_ptrmap_t skip;
  kiln_ptrmap_init(&skip);
  kiln_ptrmap_put(&skip, d, (void *)1);
  assert_false(kiln_fusion_reaches(&o, d, a, &skip));
  kiln_ptrmap_free(&skip);
  kiln_fusion_order_free(&o);
  run_and_check(m, "priority_fusion,multi_output_fusion");
  /* a and c stay two kernels around the dot. */
  assert_int_equal(count_op(m->entry, KILN_OP_FUSION), 2);
  assert_int_equal(kiln_fusion_count_kernels(m), 3);
  kiln_hlo_instruction_t *root = m->entry->root;
  assert_int_equal(root->opcode, KILN_OP_FUSION);
  assert_false(kiln_shape_is_tuple(root->shape));
  kiln_hlo_module_destroy(m);
}

static void test_dynamic_update_slice_is_only_a_root(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule dus\n"
      "ENTRY main {\n"
      "  p = f32[16]{0} parameter(0)\n  u = f32[4]{0} parameter(1)\n  i = s32[] parameter(2)\n"
      "  n = f32[4]{0} negate(u)\n  x = f32[16]{0} exponential(p)\n"
      "  d = f32[16]{0} dynamic-update-slice(x, n, i)\n"
      "  ROOT a = f32[16]{0} abs(d)\n}\n");
  run_and_check(m, "priority_fusion,multi_output_fusion");
  /* negate joins the update slice; exp (the updated operand) and abs stay apart. */
  assert_int_equal(kiln_fusion_count_kernels(m), 3);
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    if (count_op(body, KILN_OP_DYNAMIC_UPDATE_SLICE)) {
      assert_int_equal(body->root->opcode, KILN_OP_DYNAMIC_UPDATE_SLICE);
      assert_int_equal(count_op(body, KILN_OP_NEGATE), 1);
      assert_int_equal(count_op(body, KILN_OP_EXP), 0);
    }
  }
  kiln_hlo_module_destroy(m);
}

/* The in-place pairs of the one fusion of `m` whose body holds `op`; asserts `op`'s operand 0 is
 * read by nothing else there. */
static int in_place_pairs_of_fusion_with(const kiln_hlo_module_t *m, kiln_hlo_opcode_t op) {
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    if (!count_op(body, op)) continue;
    assert_int_equal(count_op(body, KILN_OP_DYNAMIC_SLICE), 0);
    kiln_inplace_pair_t pairs[4];
    return kiln_dataflow_inplace_pairs(f, pairs, 4);
  }
  fail_msg("no fusion holds the op");
  return 0;
}

static void test_a_read_of_the_updated_buffer_stays_out_of_the_update(void **state) {
  /* A slice of x (elsewhere) feeds the update of x: fused in, the kernel would read the buffer
   * it writes, and every run would copy all of x to change four elements. It stays apart (with
   * the negate it feeds), and the update fusion updates x in place. */
  kiln_hlo_module_t *m = parse(
      "HloModule dus\n"
      "ENTRY main {\n"
      "  p = f32[1024]{0} parameter(0)\n  i = s32[] parameter(1)\n  j = s32[] parameter(2)\n"
      "  x = f32[1024]{0} exponential(p)\n"
      "  s = f32[4]{0} dynamic-slice(x, j), dynamic_slice_sizes={4}\n"
      "  n = f32[4]{0} negate(s)\n"
      "  ROOT d = f32[1024]{0} dynamic-update-slice(x, n, i)\n}\n");
  run_and_check(m, "priority_fusion,multi_output_fusion");
  assert_int_equal(in_place_pairs_of_fusion_with(m, KILN_OP_DYNAMIC_UPDATE_SLICE), 1);
  kiln_hlo_module_destroy(m);
  /* The same for a scatter (one element moved, as a random index's JAX .at[].set does). */
  char *text = with_reducers(
      "ENTRY main {\n"
      "  p = f32[1024]{0} parameter(0)\n  i = s32[1]{0} parameter(1)\n  j = s32[] parameter(2)\n"
      "  x = f32[1024]{0} exponential(p)\n"
      "  s = f32[1]{0} dynamic-slice(x, j), dynamic_slice_sizes={1}\n"
      "  v = f32[] reshape(s)\n"
      "  ROOT d = f32[1024]{0} scatter(x, i, v), update_window_dims={}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=add\n}\n");
  m = parse(text);
  kiln_free(text);
  run_and_check(m, "priority_fusion,multi_output_fusion");
  assert_int_equal(in_place_pairs_of_fusion_with(m, KILN_OP_SCATTER), 1);
  kiln_hlo_module_destroy(m);
}

/* ---- helpers ---- */

static void test_cost_model_weights_and_fused_time(void **state) {
  assert_true(kiln_cost_elementwise_flops(KILN_OP_EXP, KILN_F32) >
              kiln_cost_elementwise_flops(KILN_OP_ADD, KILN_F32));
  assert_true(kiln_cost_elementwise_flops(KILN_OP_ADD, KILN_F64) >
              kiln_cost_elementwise_flops(KILN_OP_ADD, KILN_F32));
  kiln_hlo_module_t *m = parse(
      "HloModule cost\n"
      "ENTRY main {\n"
      "  p = f32[1024,1024]{1,0} parameter(0)\n  e = f32[1024,1024]{1,0} exponential(p)\n"
      "  s = f32[512,1024]{1,0} slice(e), slice={[0:512], [0:1024]}\n"
      "  ROOT n = f32[512,1024]{1,0} negate(s)\n}\n");
  const kiln_cost_device_t *d = kiln_cost_device_default();
  kiln_hlo_instruction_t *e = kiln_hlo_computation_find(m->entry, "e");
  kiln_hlo_instruction_t *s = kiln_hlo_computation_find(m->entry, "s");
  assert_int_equal((int64_t)kiln_cost_bytes_read(e), 4 << 20);
  assert_int_equal((int64_t)kiln_cost_bytes_written(e), 4 << 20);
  assert_int_equal((int64_t)kiln_cost_bytes_read(s), 2 << 20); /* half of e is read */
  assert_true(kiln_cost_flops(e) == 16.0 * 1024 * 1024);
  double separate = kiln_cost_instruction_time(d, e) + kiln_cost_instruction_time(d, s);
  double fused = kiln_cost_fused_time(d, e, s, false);
  assert_true(fused < separate);
  assert_true(fused > d->launch_s);
  assert_true(kiln_cost_instruction_time(d, m->entry->parameters[0]) == 0);
  kiln_pass_options_t o = {.verify = 1};
  kiln_status st = kiln_pass_run_list(m, "priority_fusion", &o);
  if (st) fail_msg("%s", kiln_status_message(st));
  kiln_hlo_instruction_t *f = only_fusion(m->entry);
  /* Through the fusion only half of p is read and half of the exps computed. */
  assert_int_equal((int64_t)kiln_cost_bytes_read(f), 2 << 20);
  assert_true(kiln_cost_flops(f) < 16.0 * 1024 * 1024);
  kiln_hlo_module_destroy(m);
}

static void test_hero_and_bitcast_rules(void **state) {
  char *text = with_reducers(
      "ENTRY main {\n"
      "  p = f32[4,1,8]{2,1,0} parameter(0)\n  z = f32[] constant(0)\n"
      "  r = f32[4,8]{1,0} reshape(p)\n"
      "  t = f32[8,4]{1,0} transpose(r), dimensions={1,0}\n"
      "  tb = f32[1,4,8]{2,1,0} transpose(p), dimensions={1,0,2}\n"
      "  d = f32[4,8]{1,0} reduce(p, z), dimensions={1}, to_apply=add\n"
      "  s = f32[4]{0} reduce(r, z), dimensions={1}, to_apply=add\n"
      "  ROOT o = (f32[8,4]{1,0}, f32[1,4,8]{2,1,0}, f32[4,8]{1,0}, f32[4]{0}) tuple(t, tb, d, "
      "s)\n}\n");
  kiln_hlo_module_t *m = parse(text);
  kiln_free(text);
  const kiln_hlo_computation_t *c = m->entry;
  assert_true(kiln_fusion_is_bitcast_like(kiln_hlo_computation_find(c, "r")));
  assert_false(kiln_fusion_is_bitcast_like(kiln_hlo_computation_find(c, "t")));
  assert_true(kiln_fusion_is_transpose_hero(kiln_hlo_computation_find(c, "t")));
  assert_true(kiln_fusion_is_bitcast_like(kiln_hlo_computation_find(c, "tb")));
  assert_false(kiln_fusion_is_reduction_hero(kiln_hlo_computation_find(c, "d")));
  assert_true(kiln_fusion_is_loop_fusible(kiln_hlo_computation_find(c, "d")));
  assert_true(kiln_fusion_is_reduction_hero(kiln_hlo_computation_find(c, "s")));
  assert_true(kiln_fusion_is_free(kiln_hlo_computation_find(c, "r")));
  assert_false(kiln_fusion_is_kernel(c->root));
  assert_int_equal(kiln_fusion_count_kernels(m), 3); /* t, d, s */
  kiln_hlo_module_destroy(m);
}

static void test_fusion_create_rejects_bad_member_sets(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule bad\n"
      "sub {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\n"
      "ENTRY main {\n"
      "  p = f32[4]{0} parameter(0)\n  e = f32[4]{0} exponential(p)\n"
      "  ROOT n = f32[4]{0} negate(e)\n}\n");
  kiln_hlo_instruction_t *f = NULL;
  kiln_hlo_computation_t *sub = kiln_hlo_module_find_computation(m, "sub");
  kiln_hlo_instruction_t *members[2] = {kiln_hlo_computation_find(m->entry, "e"), sub->root};
  kiln_status s = kiln_fusion_create(m->entry, 2, members, NULL, NULL, &f);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  assert_null(f);
  members[0] = m->entry->parameters[0];
  s = kiln_fusion_create(m->entry, 1, members, NULL, NULL, &f);
  assert_non_null(s);
  kiln_status_free(s);
  s = kiln_fusion_create(m->entry, 0, members, NULL, NULL, &f);
  assert_non_null(s);
  kiln_status_free(s);
  /* Nothing changed: the module still verifies with its two ops. */
  s = kiln_hlo_module_verify(m);
  assert_null(s);
  assert_int_equal(kiln_fusion_count_kernels(m), 2);
  kiln_hlo_module_destroy(m);
}

static void test_while_body_is_fused_too(void **state) {
  char *text = with_reducers(
      "cond {\n  s = (s32[], f32[8]{0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  s = (s32[], f32[8]{0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  v = f32[8]{0} get-tuple-element(s), index=1\n  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n  e = f32[8]{0} sine(v)\n  w = f32[8]{0} negate(e)\n"
      "  ROOT t = (s32[], f32[8]{0}) tuple(j, w)\n}\n"
      "ENTRY main {\n  p = f32[8]{0} parameter(0)\n  z = s32[] constant(0)\n"
      "  t = (s32[], f32[8]{0}) tuple(z, p)\n"
      "  ROOT w = (s32[], f32[8]{0}) while(t), condition=cond, body=body\n}\n");
  kiln_hlo_module_t *m = parse(text);
  kiln_free(text);
  run_and_check(m, "priority_fusion,multi_output_fusion");
  kiln_hlo_computation_t *body = kiln_hlo_module_find_computation(m, "body");
  assert_int_equal(count_op(body, KILN_OP_SIN) + count_op(body, KILN_OP_NEGATE), 0);
  /* cond: compare; body: the increment and one sine+negate fusion (or one merged). */
  int64_t k = kiln_fusion_count_kernels(m);
  assert_true(k >= 2 && k <= 3);
  kiln_hlo_module_destroy(m);
}

/* ---- corpus ---- */

/* A rough count of element operations: flops plus elements written, called computations
 * by their bodies, while loops times their trip count (known_trip_count, else the constant
 * the condition compares with, else 1). Parameters count too. */
static double computation_cost(const kiln_hlo_computation_t *c, int depth);

static double trip_estimate(const kiln_hlo_instruction_t *w) {
  const char *bc = w->backend_config ? strstr(w->backend_config, "known_trip_count") : NULL;
  if (bc) {
    while (*bc && (*bc < '0' || *bc > '9')) bc++;
    double n = strtod(bc, NULL);
    if (n >= 1) return n;
  }
  const kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(w, "condition");
  double best = 1;
  if (cond && cond->root && cond->root->opcode == KILN_OP_COMPARE)
    for (int k = 0; k < cond->root->num_operands; k++) {
      const kiln_hlo_instruction_t *o = cond->root->operands[k];
      if (o->opcode == KILN_OP_CONSTANT && o->literal && !o->literal->unknown &&
          o->literal->num_elements == 1) {
        double v = kiln_literal_get_f64(o->literal, 0);
        if (v < 0) v = -v;
        if (v > best) best = v;
      }
    }
  return best;
}

static double instruction_cost(const kiln_hlo_instruction_t *in, int depth) {
  if (in->opcode == KILN_OP_WHILE)
    return trip_estimate(in) *
           (computation_cost(kiln_hlo_instruction_called(in, "body"), depth + 1) +
            computation_cost(kiln_hlo_instruction_called(in, "condition"), depth + 1));
  double cost = kiln_cost_flops(in) + (double)kiln_cost_shape_bytes(in->shape) / 4;
  if (in->opcode == KILN_OP_CALL || in->opcode == KILN_OP_CONDITIONAL)
    for (int g = 0; g < in->num_called_groups; g++)
      for (int k = 0; k < in->called_groups[g].n; k++)
        cost += computation_cost(in->called_groups[g].comps[k], depth + 1);
  return cost;
}

static double computation_cost(const kiln_hlo_computation_t *c, int depth) {
  if (!c || depth > 16) return 1e30;
  double cost = 0;
  for (size_t i = 0; i < c->instructions.len; i++)
    cost += instruction_cost(c->instructions.data[i], depth);
  return cost;
}

static double module_cost(const kiln_hlo_module_t *m) {
  double params = 0;
  for (int i = 0; i < m->entry->num_parameters; i++)
    params += (double)kiln_cost_shape_bytes(m->entry->parameters[i]->shape) / 4;
  return params * 16 + computation_cost(m->entry, 0);
}

typedef struct corpus_run {
  int checked, skipped, failed, fused_modules;
  int64_t kernels_before, kernels_after;
  kiln_strbuf_t log;
} corpus_run_t;

static void check_module(corpus_run_t *r, kiln_hlo_module_t *m, const char *name) {
  if (module_cost(m) > 5e7) {
    r->skipped++;
    kiln_strbuf_printf(&r->log, "  skip %s: too costly to evaluate here\n", name);
    return;
  }
  kiln_arena_t a0, a1;
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t *before = NULL, *after = NULL;
  if (getenv("KILN_FUSION_VERBOSE")) fprintf(stderr, "fusion corpus: %s\n", name);
  double t0 = kiln_now_seconds();
  kiln_status s = eval_fake(m, &a0, &before);
  if (!s && kiln_now_seconds() - t0 > 0.5) {
    s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluation took %.2f s (bound 0.5 s)",
                         kiln_now_seconds() - t0);
  }
  if (s) {
    r->skipped++;
    kiln_strbuf_printf(&r->log, "  skip %s: the evaluator cannot run it: %.120s\n", name,
                       kiln_status_message(s));
    kiln_status_free(s);
  } else {
    int64_t k0 = kiln_fusion_count_kernels(m);
    kiln_pass_options_t o = {.verify = 1};
    s = kiln_pass_run_list(m, "priority_fusion,multi_output_fusion,horizontal_fusion", &o);
    if (!s) s = kiln_hlo_module_verify(m);
    if (!s) s = eval_fake(m, &a1, &after);
    if (s) {
      r->failed++;
      kiln_strbuf_printf(&r->log, "  FAIL %s: %s\n", name, kiln_status_message(s));
      kiln_status_free(s);
    } else if (!same_bits(before, after)) {
      r->failed++;
      kiln_strbuf_printf(&r->log, "  FAIL %s: results differ after fusion\n", name);
    } else {
      r->checked++;
      int64_t k1 = kiln_fusion_count_kernels(m);
      r->kernels_before += k0;
      r->kernels_after += k1;
      if (k1 < k0) r->fused_modules++;
    }
  }
  kiln_arena_destroy(&a0);
  kiln_arena_destroy(&a1);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_folder(corpus_run_t *r, const char *sub) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", kiln_corpus_dir(), sub);
  DIR *d = opendir(dir);
  if (!d) fail_msg("cannot open %s", dir);
  KILN_VEC(char *) names = {0};
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || kiln_str_ends_with(e->d_name, ".tsv") ||
        kiln_str_ends_with(e->d_name, ".md"))
      continue;
    kiln_vec_push(&names, kiln_strdup(e->d_name));
  }
  closedir(d);
  qsort(names.data, names.len, sizeof(char *), cmp_str);
  for (size_t i = 0; i < names.len; i++) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, names.data[i]);
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) {
      r->skipped++;
      kiln_strbuf_printf(&r->log, "  skip %s/%s: does not load\n", sub, names.data[i]);
      kiln_status_free(s);
      kiln_free(names.data[i]);
      continue;
    }
    for (int k = 0; k < f->num_modules; k++) {
      char name[300];
      snprintf(name, sizeof name, "%s/%.200s#%d", sub, names.data[i], k);
      kiln_status v = kiln_hlo_module_verify(f->modules[k]);
      if (v || f->bare) {
        r->skipped++;
        kiln_strbuf_printf(&r->log, "  skip %s: not a valid whole module\n", name);
        kiln_status_free(v);
        continue;
      }
      check_module(r, f->modules[k], name);
    }
    kiln_hlo_file_free(f);
    kiln_free(names.data[i]);
  }
  kiln_vec_free(&names);
}

static void test_corpus_modules_evaluate_the_same_after_fusion(void **state) {
  corpus_run_t r;
  memset(&r, 0, sizeof r);
  double t0 = kiln_now_seconds();
  run_folder(&r, "xla");
  run_folder(&r, "real");
  printf(
      "fusion corpus: %d modules evaluate bit-identically after priority+multi-output+"
      "horizontal fusion, %d failed, %d skipped; kernels %lld -> %lld (%d modules fused); %.1f s\n",
      r.checked, r.failed, r.skipped, (long long)r.kernels_before, (long long)r.kernels_after,
      r.fused_modules, kiln_now_seconds() - t0);
  if (r.failed || getenv("KILN_FUSION_VERBOSE")) printf("%s", kiln_strbuf_cstr(&r.log));
  fflush(stdout);
  kiln_strbuf_free(&r.log);
  assert_int_equal(r.failed, 0);
  assert_true(r.checked > 100);
  assert_true(r.kernels_after < r.kernels_before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elementwise_chain_becomes_one_loop_fusion),
      cmocka_unit_test(test_cheap_producer_is_duplicated_into_both_consumers),
      cmocka_unit_test(test_expensive_producer_is_not_recomputed_per_broadcast_element),
      cmocka_unit_test(test_a_tiny_chain_of_shared_values_is_one_kernel),
      cmocka_unit_test(test_no_fusion_across_dot_or_custom_call),
      cmocka_unit_test(test_reduction_takes_elementwise_epilogue),
      cmocka_unit_test(test_reduction_keeps_two_operand_epilogue_out),
      cmocka_unit_test(test_sibling_reductions_share_one_multi_output_fusion),
      cmocka_unit_test(test_producer_with_outside_user_becomes_extra_output),
      cmocka_unit_test(test_fusion_that_would_create_a_cycle_is_refused),
      cmocka_unit_test(test_dynamic_update_slice_is_only_a_root),
      cmocka_unit_test(test_a_read_of_the_updated_buffer_stays_out_of_the_update),
      cmocka_unit_test(test_cost_model_weights_and_fused_time),
      cmocka_unit_test(test_cost_cache_matches_the_model),
      cmocka_unit_test(test_fusion_order_place_and_search_bound),
      cmocka_unit_test(test_horizontal_fusion_merges_small_independent_loops),
      cmocka_unit_test(test_hero_and_bitcast_rules),
      cmocka_unit_test(test_fusion_create_rejects_bad_member_sets),
      cmocka_unit_test(test_while_body_is_fused_too),
      cmocka_unit_test(test_corpus_modules_evaluate_the_same_after_fusion),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
