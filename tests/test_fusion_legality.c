/* The fusion passes form only fusions the codegen can emit: a multi-output fusion is a
 * reduction kernel (the codegen's hero analysis finds an unnested reduction hero; other
 * outputs are shaped like its input or are reductions of the same form) or a loop kernel
 * whose outputs all have one element count; a reduction takes only the epilogue the
 * codegen walks through to find it. Checked on small modules (with the kernels emitted)
 * and on every corpus module after the pipeline (hero analysis of every fusion; nothing is
 * evaluated, so modules the evaluator cannot run count too).
 * KILN_CORPUS_SAMPLE=N samples the corpus. */
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
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/hero_analysis.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

static const char kAdd[] =
    "HloModule m\n"
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n";

static kiln_hlo_module_t *parse_entry(const char *entry) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "%s%s", kAdd, entry);
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(kiln_strbuf_cstr(&b), b.len, &po, &m);
  kiln_strbuf_free(&b);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  return m;
}

static int64_t elems(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) return s->num_elements ? elems(s->elements[0]) : 0;
  return kiln_shape_num_elements(s);
}

static bool same_form(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  kiln_reduction_dims_t ra, rb;
  return kiln_reduction_dims_of(a, &ra) && kiln_reduction_dims_of(b, &rb) &&
         ra.is_row == rb.is_row && !memcmp(ra.dims, rb.dims, sizeof ra.dims);
}

/* NULL when the fusion computation `c` is one kernel the codegen can choose an emitter
 * for without mixing element counts in a loop; else why not (static text). */
static const char *kernel_problem(const kiln_hlo_computation_t *c) {
  kiln_hero_analysis_t ha;
  kiln_status s = kiln_hero_analyze(c, &ha);
  if (s) {
    kiln_status_free(s);
    return "hero analysis failed";
  }
  if (ha.emitter == KILN_HERO_EMITTER_REDUCTION) {
    for (int i = 0; i < ha.num_roots; i++)
      if (ha.heroes[i]->opcode == KILN_OP_REDUCE && !same_form(ha.heroes[i], ha.hero))
        return "a reduce of another form in a reduction kernel";
    return NULL;
  }
  if (ha.num_roots < 2 || ha.emitter != KILN_HERO_EMITTER_LOOP) return NULL;
  for (int i = 1; i < ha.num_roots; i++)
    if (elems(ha.roots[i]->shape) != elems(ha.roots[0]->shape))
      return "loop fusion outputs with different element counts";
  return NULL;
}

/* Runs the fusion passes, checks every fusion's kernel and emits it (loop and reduction
 * emitters), and checks the module evaluates as before. Returns the number of fusions. */
static int fuse_and_emit(kiln_hlo_module_t *m) {
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, "priority_fusion,multi_output_fusion,dce", &o);
  if (s) fail_msg("fusion: %s", kiln_status_message(s));
  int fusions = 0;
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    fusions++;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    const char *why = kernel_problem(body);
    if (why) {
      char *t = kiln_hlo_module_to_string(m);
      fail_msg("%s: %s\n%s", body->name, why, t);
    }
    kiln_codegen_kernel_t k;
    memset(&k, 0, sizeof k);
    kiln_codegen_compile_options_t co = {0};
    s = kiln_codegen_kernel_emit(body, &co, &k);
    if (s) fail_msg("emit %s: %s", body->name, kiln_status_message(s));
    kiln_codegen_kernel_free(&k);
  }
  return fusions;
}

static void test_side_output_joins_reduction_with_epilogue_left_out(void **state) {
  /* From a JAX train step: m is both a result and the reduction's input, and the mean's
   * divide follows the reduction. Fusing the divide as an epilogue and then m as a second
   * output made a loop kernel of f32[200,1] and f32[] outputs. */
  kiln_hlo_module_t *m = parse_entry(
      "ENTRY main {\n"
      "  p0 = f32[1]{0} parameter(0)\n  p1 = f32[200,1]{1,0} parameter(1)\n"
      "  p2 = f32[200,1]{1,0} parameter(2)\n"
      "  b = f32[200,1]{1,0} broadcast(p0), dimensions={1}\n"
      "  a = f32[200,1]{1,0} add(p1, b)\n  s = f32[200,1]{1,0} subtract(p2, a)\n"
      "  sq = f32[200,1]{1,0} multiply(s, s)\n  z = f32[] constant(0)\n"
      "  r = f32[] reduce(sq, z), dimensions={0,1}, to_apply=add\n"
      "  n = f32[] constant(200)\n  mean = f32[] divide(r, n)\n"
      "  ROOT t = (f32[200,1]{1,0}, f32[]) tuple(sq, mean)\n}\n");
  int fusions = fuse_and_emit(m);
  assert_true(fusions >= 2);
  /* the reduction kernel still produced the side output */
  bool multi = false;
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode == KILN_OP_FUSION && kiln_shape_is_tuple(f->shape)) {
      const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
      kiln_hero_analysis_t ha;
      assert_null(kiln_hero_analyze(body, &ha));
      assert_int_equal(ha.emitter, KILN_HERO_EMITTER_REDUCTION);
      multi = true;
    }
  }
  assert_true(multi);
  kiln_hlo_module_destroy(m);
}

static void test_elemental_reduction_does_not_take_a_loop_sibling(void **state) {
  /* A reduction of 40 rows into 3 columns is emitted elementally (XLA's small-column
   * rule), so it is a loop kernel of 3 elements: exp(p) (120 elements) cannot share it. */
  kiln_hlo_module_t *m = parse_entry(
      "ENTRY main {\n"
      "  p = f32[40,3]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
      "  n = f32[40,3]{1,0} negate(p)\n"
      "  r = f32[3]{0} reduce(n, z), dimensions={0}, to_apply=add\n"
      "  e = f32[40,3]{1,0} exponential(n)\n"
      "  ROOT t = (f32[3]{0}, f32[40,3]{1,0}) tuple(r, e)\n}\n");
  const kiln_hlo_instruction_t *r = kiln_hlo_computation_find(m->entry, "r");
  assert_false(kiln_fusion_reduction_is_unnested(r));
  fuse_and_emit(m);
  kiln_hlo_module_destroy(m);
}

static void test_unnested_reduction_takes_a_sibling_shaped_like_its_input(void **state) {
  kiln_hlo_module_t *m = parse_entry(
      "ENTRY main {\n"
      "  p = f32[64,256]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
      "  n = f32[64,256]{1,0} negate(p)\n"
      "  r = f32[64]{0} reduce(n, z), dimensions={1}, to_apply=add\n"
      "  e = f32[64,256]{1,0} exponential(n)\n"
      "  ROOT t = (f32[64]{0}, f32[64,256]{1,0}) tuple(r, e)\n}\n");
  const kiln_hlo_instruction_t *r = kiln_hlo_computation_find(m->entry, "r");
  assert_true(kiln_fusion_reduction_is_unnested(r));
  assert_true(kiln_fusion_reduction_is_race_free(r));
  assert_int_equal(fuse_and_emit(m), 1);
  kiln_hlo_module_destroy(m);
}

static void test_reduce_over_unit_dims_does_not_join_a_reduction_kernel(void **state) {
  /* From a DLRM train step: r1 only drops a size-1 dimension but is a reduce, which the
   * reduction emitter would reduce over r2's input shape; as r2's side output it fails. */
  kiln_hlo_module_t *m = parse_entry(
      "ENTRY main {\n"
      "  p0 = f32[256,6,8]{2,1,0} parameter(0)\n  p1 = f32[256,6,8]{2,1,0} parameter(1)\n"
      "  a = f32[256,6,8]{2,1,0} add(p0, p1)\n"
      "  s = f32[256,1,8]{2,1,0} slice(a), slice={[0:256], [5:6], [0:8]}\n"
      "  z = f32[] constant(0)\n"
      "  r1 = f32[256,8]{1,0} reduce(s, z), dimensions={1}, to_apply=add\n"
      "  r2 = f32[8]{0} reduce(r1, z), dimensions={0}, to_apply=add\n"
      "  ROOT t = (f32[256,8]{1,0}, f32[8]{0}) tuple(r1, r2)\n}\n");
  fuse_and_emit(m);
  kiln_hlo_module_destroy(m);
}

static void test_complex_reduction_by_multiply_does_not_take_a_sibling(void **state) {
  /* fuzz 3223320: the reduction emitter reduces complex values only by add, so a c64
   * multiply-reduce of 16 elements is a loop kernel of 1 element; the side output real(v)
   * (16 elements) cannot share it ("loop fusion outputs with different element counts"). A
   * c64 add-reduce of 4096 elements is the reduction emitter's and takes it. */
  kiln_hlo_module_t *m = parse_entry(
      "mul_c {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
      "  ROOT r = c64[] multiply(a, b)\n}\n"
      "add_c {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
      "  ROOT r = c64[] add(a, b)\n}\n"
      "ENTRY main {\n"
      "  p = f32[16,1]{1,0} parameter(0)\n  z = c64[] parameter(1)\n"
      "  v = c64[16,1]{1,0} complex(p, p)\n"
      "  r = c64[] reduce(v, z), dimensions={0,1}, to_apply=mul_c\n"
      "  e = f32[16,1]{1,0} real(v)\n"
      "  q = f32[4096]{0} parameter(2)\n"
      "  w = c64[4096]{0} complex(q, q)\n"
      "  s = c64[] reduce(w, z), dimensions={0}, to_apply=add_c\n"
      "  i = f32[4096]{0} imag(w)\n"
      "  ROOT t = (c64[], f32[16,1]{1,0}, c64[], f32[4096]{0}) tuple(r, e, s, i)\n}\n");
  assert_false(kiln_fusion_reduction_is_unnested(kiln_hlo_computation_find(m->entry, "r")));
  assert_true(kiln_fusion_reduction_is_unnested(kiln_hlo_computation_find(m->entry, "s")));
  assert_int_equal(fuse_and_emit(m), 3);
  kiln_hlo_module_destroy(m);
}

static void test_reduction_forms(void **state) {
  kiln_hlo_module_t *m = parse_entry(
      "ENTRY main {\n"
      "  p = f32[16,100000]{1,0} parameter(0)\n  q = f32[5000,64]{1,0} parameter(1)\n"
      "  z = f32[] constant(0)\n"
      "  row = f32[16]{0} reduce(p, z), dimensions={1}, to_apply=add\n"
      "  col = f32[64]{0} reduce(q, z), dimensions={0}, to_apply=add\n"
      "  ROOT t = (f32[16]{0}, f32[64]{0}) tuple(row, col)\n}\n");
  const kiln_hlo_instruction_t *row = kiln_hlo_computation_find(m->entry, "row");
  const kiln_hlo_instruction_t *col = kiln_hlo_computation_find(m->entry, "col");
  assert_true(kiln_fusion_reduction_is_unnested(row));
  assert_false(kiln_fusion_reduction_is_race_free(row)); /* 100000 > 32768 per row */
  assert_true(kiln_fusion_reduction_is_unnested(col));
  assert_false(kiln_fusion_reduction_is_race_free(col)); /* 5000 > 4096 rows */
  /* the codegen agrees */
  assert_int_equal(kiln_fusion_reduction_is_unnested(row), kiln_hero_is_reduction_hero(row));
  assert_int_equal(kiln_fusion_reduction_is_unnested(col), kiln_hero_is_reduction_hero(col));
  kiln_hlo_module_destroy(m);
}

/* Column reductions of bf16 [512,256] into f32 (from the bf16 transformer step's layer-norm
 * gradients): each plans 32 x 32 threads with 4-wide vectors, a 32 x 129 f32 tile per
 * accumulator (16,512 B). Two share a kernel (33,024 B); three siblings would need
 * 49,536 B > 48 KiB of static shared memory, so multi-output fusion stops at two. */
static const char *column_siblings(int n) {
  static const char *const k[] = {
      "ENTRY main {\n"
      "  p0 = bf16[512,256]{1,0} parameter(0)\n  p1 = bf16[512,256]{1,0} parameter(1)\n"
      "  p2 = bf16[512,256]{1,0} parameter(2)\n  z = f32[] constant(0)\n"
      "  c0 = f32[512,256]{1,0} convert(p0)\n  c1 = f32[512,256]{1,0} convert(p1)\n"
      "  c2 = f32[512,256]{1,0} convert(p2)\n"
      "  m1 = f32[512,256]{1,0} multiply(c0, c1)\n  m2 = f32[512,256]{1,0} multiply(c0, c2)\n"
      "  r0 = f32[256]{0} reduce(c0, z), dimensions={0}, to_apply=add\n"
      "  r1 = f32[256]{0} reduce(m1, z), dimensions={0}, to_apply=add\n",
      "  ROOT t = (f32[256]{0}, f32[256]{0}) tuple(r0, r1)\n}\n",
      "  r2 = f32[256]{0} reduce(m2, z), dimensions={0}, to_apply=add\n"
      "  ROOT t = (f32[256]{0}, f32[256]{0}, f32[256]{0}) tuple(r0, r1, r2)\n}\n"};
  static char buf[2048];
  snprintf(buf, sizeof buf, "%s%s", k[0], n == 2 ? k[1] : k[2]);
  return buf;
}

/* Reduces per fusion of the entry, largest first in `most`; the plan's shared bytes of
 * each reduction kernel must fit 48 KiB. */
static int reduction_fusions(kiln_hlo_module_t *m, int *most) {
  int fusions = 0;
  *most = 0;
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    int reduces = 0;
    for (size_t j = 0; j < body->instructions.len; j++)
      reduces += body->instructions.data[j]->opcode == KILN_OP_REDUCE;
    if (!reduces) continue;
    fusions++;
    if (reduces > *most) *most = reduces;
    kiln_hero_analysis_t ha;
    kiln_reduction_plan_t plan;
    assert_null(kiln_hero_analyze(body, &ha));
    assert_int_equal(ha.emitter, KILN_HERO_EMITTER_REDUCTION);
    assert_null(kiln_hero_reduction_plan(body, &ha, 0, &plan));
    assert_int_equal(plan.kind, KILN_REDUCTION_COLUMN);
    assert_int_equal(plan.vector_size, 4);
    int64_t bytes = kiln_reduction_shared_bytes(&plan, &ha.reduction, 4 * reduces);
    assert_int_equal(bytes, 32 * 129 * 4 * reduces);
    assert_true(bytes <= 48 * 1024);
  }
  return fusions;
}

static void test_column_reductions_share_a_kernel_within_shared_memory(void **state) {
  int most = 0;
  kiln_hlo_module_t *m = parse_entry(column_siblings(2));
  fuse_and_emit(m);
  assert_int_equal(reduction_fusions(m, &most), 1);
  assert_int_equal(most, 2);
  kiln_hlo_module_destroy(m);
  m = parse_entry(column_siblings(3));
  fuse_and_emit(m); /* emitting checks each launch's shared memory */
  assert_int_equal(reduction_fusions(m, &most), 2);
  assert_int_equal(most, 2);
  kiln_hlo_module_destroy(m);
}

/* ---- corpus ---- */

typedef struct legality_stats {
  int modules, fusions, bad, skipped;
  kiln_strbuf_t failures;
} legality_stats_t;

static void check_module(legality_stats_t *st, kiln_hlo_module_t *m, const char *name) {
  kiln_status s = NULL;
  if (!m->entry || !kiln_corpus_sampled(name) || (s = kiln_hlo_module_verify(m))) {
    kiln_status_free(s);
    st->skipped++;
    return;
  }
  if ((s = kiln_pipeline_run(m, NULL))) { /* test_pipeline_semantics reports these */
    kiln_status_free(s);
    st->skipped++;
    return;
  }
  st->modules++;
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  for (size_t c = 0; c < nc; c++)
    for (size_t i = 0; i < comps[c]->instructions.len; i++) {
      const kiln_hlo_instruction_t *f = comps[c]->instructions.data[i];
      const kiln_hlo_computation_t *body =
          f->opcode == KILN_OP_FUSION ? kiln_hlo_instruction_called(f, "calls") : NULL;
      if (!body) continue;
      st->fusions++;
      const char *why = kernel_problem(body);
      if (why) {
        st->bad++;
        kiln_strbuf_printf(&st->failures, "  %s: %s: %s\n", name, body->name, why);
      }
    }
  kiln_free(comps);
}

static void corpus_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path,
                          int index, kiln_status error) {
  legality_stats_t *st = ctx;
  if (!m || !*m) {
    st->skipped++;
    return;
  }
  check_module(st, *m, name);
}

static void check_folder(legality_stats_t *st, const char *sub) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", kiln_corpus_dir(), sub);
  kiln_status s = kiln_corpus_for_each_module(dir, sub, corpus_module, st);
  if (s) fail_msg("%s", kiln_status_message(s));
}

static void test_corpus_fusions_are_each_one_emitters_kernel(void **state) {
  legality_stats_t st;
  memset(&st, 0, sizeof st);
  check_folder(&st, "xla");
  check_folder(&st, "real");
  printf(
      "fusion legality: %d modules, %d fusions, %d no emitter takes (loop outputs of different "
      "element counts, or a reduce of another [R0, K, R2] form in a reduction), %d left out\n%s",
      st.modules, st.fusions, st.bad, st.skipped, kiln_strbuf_cstr(&st.failures));
  fflush(stdout);
  kiln_strbuf_free(&st.failures);
  assert_int_equal(st.bad, 0);
  assert_true(st.modules >= 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_side_output_joins_reduction_with_epilogue_left_out),
      cmocka_unit_test(test_elemental_reduction_does_not_take_a_loop_sibling),
      cmocka_unit_test(test_unnested_reduction_takes_a_sibling_shaped_like_its_input),
      cmocka_unit_test(test_reduce_over_unit_dims_does_not_join_a_reduction_kernel),
      cmocka_unit_test(test_complex_reduction_by_multiply_does_not_take_a_sibling),
      cmocka_unit_test(test_reduction_forms),
      cmocka_unit_test(test_column_reductions_share_a_kernel_within_shared_memory),
      cmocka_unit_test(test_corpus_fusions_are_each_one_emitters_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
