/* Fusion wrapper: what gets wrapped and how (names, parameters, called computations,
 * control edges, place in the order), the gemm predicate's forms, and on the corpus: after
 * the pipeline (wrapper left out through KILN_DISABLE_PASSES), wrapping keeps the module
 * valid, leaves no instruction that needs a kernel outside a fusion, lets scheduling and
 * buffer assignment run again, and evaluates bit-identically.
 *
 * Runtime knobs: KILN_WRAPPER_MAX_COST (element-operation bound per module; default 1e8,
 * 1e7 under ASan), KILN_CORPUS_SAMPLE=N, KILN_CORPUS_VERBOSE=1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "tools/common/run_report.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify: %s", kiln_status_message(s));
  return m;
}

static void run(kiln_hlo_module_t *m, const char *list) {
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, list, &o);
  if (s) fail_msg("%s: %s", list, kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify after %s: %s", list, kiln_status_message(s));
}

static kiln_hlo_instruction_t *find(const kiln_hlo_computation_t *c, const char *name) {
  kiln_hlo_instruction_t *in = kiln_hlo_computation_find(c, name);
  if (!in) fail_msg("no instruction '%s' in '%s'", name, c->name);
  return in;
}

static size_t position(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *in) {
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i] == in) return i;
  fail_msg("'%s' is not in '%s'", in->name, c->name);
  return 0;
}

/* Every top-level instruction of every sequential computation that needs a kernel. */
static int unwrapped_kernels(const kiln_hlo_module_t *m, char *first, size_t n) {
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  int count = 0;
  for (size_t k = 0; k < nc; k++)
    for (size_t i = 0; i < comps[k]->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comps[k]->instructions.data[i];
      if (!kiln_fusion_wrapper_needs_kernel(in, NULL)) continue;
      if (!count && first)
        snprintf(first, n, "%s (%s)", in->name, kiln_hlo_opcode_name(in->opcode));
      count++;
    }
  kiln_free(comps);
  return count;
}

static const char *kSortAndDots =
    "HloModule m\n"
    "less {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
    "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n"
    "ENTRY main {\n"
    "  x = f32[4,8]{1,0} parameter(0)\n  w = f32[8,3]{1,0} parameter(1)\n"
    "  h = s64[4,8]{1,0} parameter(2)\n  hw = s64[8,3]{1,0} parameter(3)\n"
    "  gemm = f32[4,3]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ints = s64[4,3]{1,0} dot(h, hw), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  sorted = f32[4,8]{1,0} sort(x), dimensions={1}, to_apply=less\n"
    "  twice = f32[4,8]{1,0} add(sorted, sorted)\n"
    "  same = f32[4,8]{1,0} copy(twice)\n"
    "  ROOT t = (f32[4,3]{1,0}, s64[4,3]{1,0}, f32[4,8]{1,0}) tuple(gemm, ints, same)\n}\n";

static void test_kernels_are_wrapped_and_library_ops_are_not(void **state) {
  kiln_hlo_module_t *m = parse(kSortAndDots);
  const kiln_hlo_computation_t *less = kiln_hlo_module_find_computation(m, "less");
  size_t sort_at = position(m->entry, find(m->entry, "sorted"));
  run(m, "fusion_wrapper");
  const kiln_hlo_computation_t *e = m->entry;
  assert_int_equal(find(e, "gemm")->opcode, KILN_OP_DOT);  /* f32 gemm: BLAS */
  assert_int_equal(find(e, "same")->opcode, KILN_OP_COPY); /* equal layouts: memcpy */
  assert_int_equal(find(e, "t")->opcode, KILN_OP_TUPLE);
  const char *wrapped[3] = {"ints", "sorted", "twice"};
  for (int i = 0; i < 3; i++) {
    kiln_hlo_instruction_t *f = find(e, wrapped[i]);
    assert_int_equal(f->opcode, KILN_OP_FUSION);
    assert_int_equal(f->fusion_kind, KILN_HLO_FUSION_LOOP);
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    char want[64];
    snprintf(want, sizeof want, "fused_%s", wrapped[i]);
    assert_string_equal(body->name, want);
    assert_string_equal(body->root->name, wrapped[i]);
    assert_true(kiln_shape_equal(body->root->shape, f->shape, true));
    /* operand k -> parameter(k), even when one value is read twice */
    assert_int_equal(body->num_parameters, f->num_operands);
    for (int k = 0; k < f->num_operands; k++) {
      assert_ptr_equal(body->root->operands[k], body->parameters[k]);
      assert_int_equal(body->parameters[k]->parameter_number, k);
      assert_true(kiln_shape_equal(body->parameters[k]->shape, f->operands[k]->shape, true));
    }
  }
  kiln_hlo_instruction_t *twice = find(e, "twice");
  assert_int_equal(twice->num_operands, 2);
  assert_ptr_equal(twice->operands[0], find(e, "sorted"));
  /* The comparator stays the module's own computation. */
  const kiln_hlo_computation_t *sort_body = kiln_hlo_instruction_called(find(e, "sorted"), "calls");
  assert_int_equal(sort_body->root->opcode, KILN_OP_SORT);
  assert_ptr_equal(kiln_hlo_instruction_called(sort_body->root, "to_apply"), less);
  assert_int_equal(position(e, find(e, "sorted")), sort_at);
  assert_int_equal(unwrapped_kernels(m, NULL, 0), 0);
  /* Nothing left to wrap: a second run changes nothing. */
  bool changed = false;
  kiln_status s = kiln_pass_fusion_wrapper(m, NULL, &changed);
  assert_null(s);
  assert_false(changed);
  kiln_hlo_module_destroy(m);
}

static void test_layout_changing_copy_is_a_kernel(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[4,8]{1,0} parameter(0)\n"
      "  moved = f32[4,8]{0,1} copy(x)\n"
      "  kept = f32[4,8]{1,0} copy(x)\n"
      "  ROOT t = (f32[4,8]{0,1}, f32[4,8]{1,0}) tuple(moved, kept)\n}\n");
  run(m, "fusion_wrapper");
  assert_int_equal(find(m->entry, "moved")->opcode, KILN_OP_FUSION);
  assert_int_equal(find(m->entry, "kept")->opcode, KILN_OP_COPY);
  kiln_hlo_module_destroy(m);
}

static void test_control_edges_move_to_the_fusion(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY main {\n"
      "  x = f32[16]{0} parameter(0)\n"
      "  a = f32[16]{0} negate(x)\n"
      "  b = f32[16]{0} exponential(x), control-predecessors={a}\n"
      "  c = f32[16]{0} abs(x), control-predecessors={b}\n"
      "  ROOT r = f32[16]{0} add(b, c)\n}\n");
  run(m, "fusion_wrapper");
  kiln_hlo_instruction_t *a = find(m->entry, "a"), *b = find(m->entry, "b"),
                         *c = find(m->entry, "c");
  kiln_hlo_instruction_t *r = find(m->entry, "r");
  assert_int_equal(b->opcode, KILN_OP_FUSION);
  assert_int_equal(b->num_control_predecessors, 1);
  assert_ptr_equal(b->control_predecessors[0], a);
  assert_int_equal(a->control_successors.len, 1);
  assert_ptr_equal(a->control_successors.data[0], b);
  assert_int_equal(c->num_control_predecessors, 1);
  assert_ptr_equal(c->control_predecessors[0], b);
  assert_int_equal(b->control_successors.len, 1);
  assert_ptr_equal(b->control_successors.data[0], c);
  assert_ptr_equal(m->entry->root, r);
  assert_int_equal(r->opcode, KILN_OP_FUSION);
  /* The order is kept: the fusions sit where the instructions were. */
  assert_true(position(m->entry, a) < position(m->entry, b));
  assert_true(position(m->entry, b) < position(m->entry, c));
  assert_int_equal(position(m->entry, r), m->entry->instructions.len - 1);
  kiln_hlo_module_destroy(m);
}

static void test_while_body_and_condition_are_wrapped(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "cond {\n  s = (s32[], f32[8]{0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  s = (s32[], f32[8]{0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  v = f32[8]{0} get-tuple-element(s), index=1\n  one = s32[] constant(1)\n"
      "  i1 = s32[] add(i, one)\n  v1 = f32[8]{0} sine(v)\n"
      "  ROOT t = (s32[], f32[8]{0}) tuple(i1, v1)\n}\n"
      "ENTRY main {\n  v = f32[8]{0} parameter(0)\n  z = s32[] constant(0)\n"
      "  s = (s32[], f32[8]{0}) tuple(z, v)\n"
      "  ROOT w = (s32[], f32[8]{0}) while(s), condition=cond, body=body\n}\n");
  run(m, "fusion_wrapper");
  const kiln_hlo_computation_t *body = kiln_hlo_module_find_computation(m, "body");
  const kiln_hlo_computation_t *cond = kiln_hlo_module_find_computation(m, "cond");
  assert_int_equal(find(body, "i1")->opcode, KILN_OP_FUSION);
  assert_int_equal(find(body, "v1")->opcode, KILN_OP_FUSION);
  assert_int_equal(find(cond, "lt")->opcode, KILN_OP_FUSION);
  assert_ptr_equal(cond->root, find(cond, "lt"));
  assert_int_equal(find(m->entry, "w")->opcode, KILN_OP_WHILE);
  assert_int_equal(unwrapped_kernels(m, NULL, 0), 0);
  kiln_hlo_module_destroy(m);
}

/* The gemm predicate on one dot given as text (operand shapes, result shape, dnums). */
static bool gemm_of(const char *lhs, const char *rhs, const char *out, const char *dnums,
                    kiln_gemm_form_t *form) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule g\nENTRY main {\n  a = %s parameter(0)\n  b = %s parameter(1)\n"
           "  ROOT d = %s dot(a, b), %s\n}\n",
           lhs, rhs, out, dnums);
  kiln_hlo_module_t *m = parse(text);
  memset(form, 0, sizeof *form);
  bool is = kiln_fusion_wrapper_is_gemm(m->entry->root, form);
  bool needs = kiln_fusion_wrapper_needs_kernel(m->entry->root, NULL);
  assert_true(is != needs);
  /* With no gemm library in the options every dot is a kernel, gemm form or not. */
  kiln_pass_options_t no_library = {.verify = -1, .no_gemm_library = true};
  assert_true(kiln_fusion_wrapper_needs_kernel(m->entry->root, &no_library));
  kiln_hlo_module_destroy(m);
  return is;
}

static void expect_form(const kiln_gemm_form_t *f, int64_t batch, int64_t m, int64_t n, int64_t k,
                        bool tl, bool tr) {
  assert_int_equal(f->batch, batch);
  assert_int_equal(f->m, m);
  assert_int_equal(f->n, n);
  assert_int_equal(f->k, k);
  assert_int_equal(f->transpose_lhs, tl);
  assert_int_equal(f->transpose_rhs, tr);
}

static void test_gemm_forms(void **state) {
  kiln_gemm_form_t f;
  const char *mk_kn = "lhs_contracting_dims={1}, rhs_contracting_dims={0}";
  assert_true(gemm_of("f32[4,8]{1,0}", "f32[8,3]{1,0}", "f32[4,3]{1,0}", mk_kn, &f));
  expect_form(&f, 1, 4, 3, 8, false, false);
  assert_int_equal(f.type, KILN_F32);
  assert_true(gemm_of("f64[8,4]{1,0}", "f64[3,8]{1,0}", "f64[4,3]{1,0}",
                      "lhs_contracting_dims={0}, rhs_contracting_dims={1}", &f));
  expect_form(&f, 1, 4, 3, 8, true, true);
  assert_int_equal(f.type, KILN_F64);
  assert_true(gemm_of("f32[2,5,4,8]{3,2,1,0}", "f32[2,5,8,3]{3,2,1,0}", "f32[2,5,4,3]{3,2,1,0}",
                      "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, "
                      "rhs_contracting_dims={2}",
                      &f));
  expect_form(&f, 10, 4, 3, 8, false, false);
  /* matrix x vector, vector x matrix, vector . vector */
  assert_true(gemm_of("f32[4,8]{1,0}", "f32[8]{0}", "f32[4]{0}", mk_kn, &f));
  expect_form(&f, 1, 4, 1, 8, false, false);
  assert_true(gemm_of("f32[8]{0}", "f32[8,3]{1,0}", "f32[3]{0}",
                      "lhs_contracting_dims={0}, rhs_contracting_dims={0}", &f));
  expect_form(&f, 1, 1, 3, 8, false, false);
  assert_true(gemm_of("f32[8]{0}", "f32[8]{0}", "f32[]",
                      "lhs_contracting_dims={0}, rhs_contracting_dims={0}", &f));
  expect_form(&f, 1, 1, 1, 8, false, false);
  /* several free dims in one run collapse into m */
  assert_true(gemm_of("f32[2,3,8]{2,1,0}", "f32[8,5]{1,0}", "f32[2,3,5]{2,1,0}",
                      "lhs_contracting_dims={2}, rhs_contracting_dims={0}", &f));
  expect_form(&f, 1, 6, 5, 8, false, false);

  /* bf16/f16 with a bf16, f16 or f32 result, s8 -> s32 and complex are host gemms too */
  assert_true(gemm_of("bf16[4,8]{1,0}", "bf16[8,3]{1,0}", "bf16[4,3]{1,0}", mk_kn, &f));
  assert_true(f.type == KILN_BF16 && f.out_type == KILN_BF16);
  assert_true(gemm_of("bf16[4,8]{1,0}", "bf16[8,3]{1,0}", "f32[4,3]{1,0}", mk_kn, &f));
  assert_true(f.type == KILN_BF16 && f.out_type == KILN_F32);
  assert_true(gemm_of("s8[4,8]{1,0}", "s8[8,3]{1,0}", "s32[4,3]{1,0}", mk_kn, &f));
  /* integer operands up to 32 bits to integer results up to 32 bits (wrapping) */
  assert_true(gemm_of("s8[4,8]{1,0}", "s8[8,3]{1,0}", "s8[4,3]{1,0}", mk_kn, &f));
  assert_true(gemm_of("s32[4,8]{1,0}", "s32[8,3]{1,0}", "s32[4,3]{1,0}", mk_kn, &f));
  assert_true(gemm_of("u16[4,8]{1,0}", "u16[8,3]{1,0}", "u32[4,3]{1,0}", mk_kn, &f));
  assert_true(f.type == KILN_U16 && f.out_type == KILN_U32);
  assert_true(gemm_of("c64[4,8]{1,0}", "c64[8,3]{1,0}", "c64[4,3]{1,0}", mk_kn, &f));
  /* not gemms: other or mixed types, a contracting dim between free dims, two contracting
   * dims, batch dims not leading, a non-default layout */
  assert_false(gemm_of("bf16[4,8]{1,0}", "f32[8,3]{1,0}", "f32[4,3]{1,0}", mk_kn, &f));
  assert_false(gemm_of("bf16[4,8]{1,0}", "bf16[8,3]{1,0}", "f64[4,3]{1,0}", mk_kn, &f));
  assert_false(gemm_of("s8[4,8]{1,0}", "s8[8,3]{1,0}", "f32[4,3]{1,0}", mk_kn, &f));
  assert_false(gemm_of("s64[4,8]{1,0}", "s64[8,3]{1,0}", "s64[4,3]{1,0}", mk_kn, &f));
  assert_false(gemm_of("s8[4,8]{1,0}", "s8[8,3]{1,0}", "s64[4,3]{1,0}", mk_kn, &f));
  assert_false(gemm_of("f32[2,8,3]{2,1,0}", "f32[8,5]{1,0}", "f32[2,3,5]{2,1,0}",
                       "lhs_contracting_dims={1}, rhs_contracting_dims={0}", &f));
  assert_false(gemm_of("f32[4,8,2]{2,1,0}", "f32[8,2,3]{2,1,0}", "f32[4,3]{1,0}",
                       "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}", &f));
  assert_false(gemm_of("f32[4,2,8]{2,1,0}", "f32[2,8,3]{2,1,0}", "f32[2,4,3]{2,1,0}",
                       "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                       "rhs_contracting_dims={1}",
                       &f));
  assert_false(gemm_of("f32[4,8]{0,1}", "f32[8,3]{1,0}", "f32[4,3]{1,0}", mk_kn, &f));
  assert_false(gemm_of("f32[4,8]{1,0}", "f32[8,3]{1,0}", "f32[4,3]{0,1}", mk_kn, &f));
}

/* ---- the corpus ---- */

typedef struct corpus_stats {
  int compared, failed, skipped, wrapped;
  double max_cost;
  const char *disabled_passes; /* the pipeline's kiln_pass_options_t.disabled_passes */
  kiln_strbuf_t failures;
} corpus_stats_t;

static void fail_module(corpus_stats_t *st, const char *name, const char *what, const char *msg) {
  st->failed++;
  kiln_strbuf_printf(&st->failures, "  FAIL %s: %s: %.600s\n", name, what, msg);
}

static bool has_stateful_rng(const kiln_hlo_module_t *m) {
  for (size_t c = 0; c < m->computations.len; c++)
    for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++) {
      kiln_hlo_opcode_t op = m->computations.data[c]->instructions.data[i]->opcode;
      if (op == KILN_OP_RNG || op == KILN_OP_RNG_GET_AND_UPDATE_STATE) return true;
    }
  return false;
}

static bool same_results(const kiln_literal_t *a, const kiln_literal_t *b, char *why, size_t n) {
  int leaves = kiln_run_report_num_leaves(a);
  if (leaves != kiln_run_report_num_leaves(b)) {
    snprintf(why, n, "%d result leaves before, %d after", leaves, kiln_run_report_num_leaves(b));
    return false;
  }
  for (int i = 0; i < leaves; i++) {
    const kiln_literal_t *x = kiln_run_report_leaf(a, i), *y = kiln_run_report_leaf(b, i);
    if (!kiln_shape_equal(x->shape, y->shape, false)) {
      snprintf(why, n, "leaf %d: shapes differ", i);
      return false;
    }
    if (!kiln_shape_is_array(x->shape) || x->num_elements == 0) continue;
    size_t bytes = (size_t)x->num_elements * kiln_elem_type_storage_bytes(x->shape->type);
    if (!x->data || !y->data || memcmp(x->data, y->data, bytes) != 0) {
      snprintf(why, n, "leaf %d differs", i);
      return false;
    }
  }
  return true;
}

static void check_module(corpus_stats_t *st, kiln_hlo_module_t *m, const char *name) {
  if (!m->entry || kiln_corpus_eval_ineligible_reason(m) || has_stateful_rng(m)) {
    st->skipped++;
    return;
  }
  char costly[200];
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    kiln_status_free(s);
    st->skipped++;
    return;
  }
  if (kiln_corpus_eval_too_costly(m, st->max_cost, costly, sizeof costly) ||
      !kiln_corpus_sampled(name)) {
    st->skipped++;
    return;
  }
  if (getenv("KILN_CORPUS_VERBOSE")) fprintf(stderr, "fusion wrapper: %s\n", name);
  kiln_arena_t args_arena, a_arena, b_arena;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&a_arena);
  kiln_arena_init(&b_arena);
  kiln_literal_t **args = NULL, *before = NULL, *after = NULL;
  int n = 0;
  kiln_eval_options_t eo = {0};
  eo.rng_seed = 42;
  eo.max_while_iterations = 20000;
  kiln_pass_options_t po = {.verify = 1, .disabled_passes = st->disabled_passes};
  char why[300] = "", left[200] = "";
  if ((s = kiln_pipeline_run(m, &po))) {
    /* the pipeline's own failures are test_pipeline_semantics' to report */
    st->skipped++;
  } else if ((s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n)) ||
             (s = kiln_eval_module(m, &eo, n, args, &a_arena, &before))) {
    st->skipped++;
  } else if ((s = kiln_pass_run_list(m, "fusion_wrapper", &po))) {
    fail_module(st, name, "fusion_wrapper", kiln_status_message(s));
  } else if ((s = kiln_hlo_module_verify(m))) {
    fail_module(st, name, "verify after wrapping", kiln_status_message(s));
  } else if (unwrapped_kernels(m, left, sizeof left)) {
    fail_module(st, name, "left unwrapped", left);
  } else if ((s = kiln_pass_run_list(m, "schedule,buffer_assignment", &po))) {
    fail_module(st, name, "schedule and buffer assignment after wrapping", kiln_status_message(s));
  } else if ((s = kiln_eval_module(m, &eo, n, args, &b_arena, &after))) {
    fail_module(st, name, "evaluate after wrapping", kiln_status_message(s));
  } else if (!same_results(before, after, why, sizeof why)) {
    fail_module(st, name, "results differ", why);
  } else {
    st->compared++;
  }
  if (s) kiln_status_free(s);
  kiln_arena_destroy(&b_arena);
  kiln_arena_destroy(&a_arena);
  kiln_arena_destroy(&args_arena);
}

static void corpus_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path,
                          int index, kiln_status error) {
  corpus_stats_t *st = ctx;
  if (!m || !*m) {
    st->skipped++;
    return;
  }
  check_module(st, *m, name);
}

static void check_folder(corpus_stats_t *st, const char *sub) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", kiln_corpus_dir(), sub);
  kiln_status s = kiln_corpus_for_each_module(dir, sub, corpus_module, st);
  if (s) fail_msg("%s", kiln_status_message(s));
}

static void test_corpus_wrapped_modules_stay_valid_and_evaluate_the_same(void **state) {
  /* The wrapper is left out of the pipeline here so this test wraps what it compares. */
  corpus_stats_t st;
  memset(&st, 0, sizeof st);
  st.disabled_passes = "fusion_wrapper";
  const char *cost = getenv("KILN_WRAPPER_MAX_COST");
  st.max_cost = cost && *cost ? strtod(cost, NULL) : kiln_corpus_under_asan() ? 1e7 : 1e8;
  double t0 = kiln_now_seconds();
  check_folder(&st, "xla");
  check_folder(&st, "real");
  printf(
      "fusion wrapper: %d modules wrapped, scheduled, assigned and bit-identical, %d fail, "
      "%d left out, %.1f s\n%s",
      st.compared, st.failed, st.skipped, kiln_now_seconds() - t0, kiln_strbuf_cstr(&st.failures));
  fflush(stdout);
  kiln_strbuf_free(&st.failures);
  assert_int_equal(st.failed, 0);
  assert_true(st.compared >= (kiln_corpus_sampling() || kiln_corpus_under_asan() ? 5 : 60));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernels_are_wrapped_and_library_ops_are_not),
      cmocka_unit_test(test_layout_changing_copy_is_a_kernel),
      cmocka_unit_test(test_control_edges_move_to_the_fusion),
      cmocka_unit_test(test_while_body_and_condition_are_wrapped),
      cmocka_unit_test(test_gemm_forms),
      cmocka_unit_test(test_corpus_wrapped_modules_stay_valid_and_evaluate_the_same),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
