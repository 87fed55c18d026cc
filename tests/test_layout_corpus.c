/* Layout assignment + normalization over the corpus: every evaluable whole module (the
 * eligibility rules of test_corpus_eval, tools/common/corpus_eval.h, with a lower cost bound
 * since each module is evaluated twice) gives bitwise identical results on the evaluator
 * before and after both passes (same fake arguments: these passes change no arithmetic),
 * verifies after each pass, keeps its entry signature, and after normalization has no
 * array instruction with a non-default layout except entry/fixed parameters and their
 * get-tuple-elements, bitcasts (the boundaries), and those the pass reported unsupported.
 * Prints the counts; fails on any mismatch. */
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
#include "compiler/passes/layout.h"
#include "tests/pass_test_util.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"

/* Each module runs twice on the evaluator: a lower bound than test_corpus_eval's keeps this
 * test near a minute. */
#define LAYOUT_CORPUS_MAX_COST 1.5e8
#define LAYOUT_CORPUS_ASAN_MAX_COST 2e7 /* a Debug ASan build evaluates ~10x slower */
#define LAYOUT_CORPUS_MAX_WHILE 20000

typedef struct stats {
  long rate; /* kiln_corpus_sample_rate */
  int checked, skipped, not_evaluable, failed;
  int copies, rewritten, unsupported, changed_modules;
  kiln_strbuf_t failures;
} stats_t;

static void fail_module(stats_t *st, const char *name, const char *what, const char *msg) {
  st->failed++;
  kiln_strbuf_printf(&st->failures, "  FAIL %s: %s: %.500s\n", name, what, msg);
}

static bool param_chain(const kiln_hlo_instruction_t *x) {
  while (x->opcode == KILN_OP_GET_TUPLE_ELEMENT) x = x->operands[0];
  return x->opcode == KILN_OP_PARAMETER;
}

/* Array instructions left with a non-default layout that are not boundaries. */
static int count_non_default(const kiln_hlo_module_t *m) {
  int n = 0;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *x = comp->instructions.data[i];
      const kiln_shape_t *s = x->shape;
      if (!kiln_shape_is_array(s) || !s->has_layout || kiln_layout_is_default(&s->layout)) continue;
      /* memory space / element size alone are kept on purpose */
      bool descending = s->layout.num_tiles == 0 && !s->layout.extra;
      for (int k = 0; descending && k < s->rank; k++)
        descending = s->layout.minor_to_major[k] == s->rank - 1 - k;
      if (descending) continue;
      if (x->opcode == KILN_OP_BITCAST || param_chain(x)) continue;
      n++;
    }
  }
  return n;
}

/* The same values described by `shape` (logical storage does not depend on layouts; the
 * evaluator's bitcast reads its operand's layout from the literal, so a parameter's
 * argument must carry the layout the parameter now declares). */
static kiln_literal_t *with_shape(kiln_arena_t *a, const kiln_literal_t *l, kiln_shape_t *shape) {
  kiln_literal_t *r = kiln_arena_alloc(a, sizeof *r);
  *r = *l;
  r->shape = shape;
  if (l->num_tuple_elements && kiln_shape_is_tuple(shape) && shape->num_elements == l->num_tuple_elements) {
    r->tuple_elements = kiln_arena_alloc(a, sizeof *r->tuple_elements * (size_t)l->num_tuple_elements);
    for (int i = 0; i < l->num_tuple_elements; i++)
      r->tuple_elements[i] = with_shape(a, l->tuple_elements[i], shape->elements[i]);
  }
  return r;
}

static void run_module(stats_t *st, kiln_hlo_module_t *m, const char *name) {
  const char *why = kiln_corpus_eval_ineligible_reason(m);
  char buf[200];
  if (!why && m->entry)
    why = kiln_corpus_eval_too_costly(
        m, kiln_corpus_under_asan() ? LAYOUT_CORPUS_ASAN_MAX_COST : LAYOUT_CORPUS_MAX_COST, buf,
        sizeof buf);
  if (why || !m->entry || kiln_hlo_module_verify(m) != NULL) {
    st->skipped++;
    return;
  }
  kiln_arena_t args_arena, a0, a1;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t **args = NULL, *before = NULL, *after = NULL;
  int n = 0;
  kiln_eval_options_t eo = {0};
  eo.rng_seed = 42;
  eo.max_while_iterations = LAYOUT_CORPUS_MAX_WHILE;
  kiln_status s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
  if (!s) s = kiln_eval_module(m, &eo, n, args, &a0, &before);
  if (s) {
    st->not_evaluable++;
    kiln_status_free(s);
    goto done;
  }
  char *sig_before_p = NULL, *sig_before_r = NULL;
  m->arena.limit = 0; /* passes add instructions beyond the parser's bound */
  kiln_layout_assignment_stats_t as = {0};
  kiln_layout_normalization_stats_t ns = {0};
  bool ch1 = false, ch2 = false;
  s = kiln_layout_assign(m, &as, &ch1);
  if (!s) s = kiln_hlo_module_verify(m);
  if (s) {
    fail_module(st, name, "layout assignment", kiln_status_message(s));
    goto free_sig;
  }
  /* the result layout after assignment is what the entry promises */
  {
    kiln_strbuf_t b = {0};
    for (int i = 0; i < m->entry->num_parameters; i++) kiln_shape_print(&b, m->entry->parameters[i]->shape, true);
    sig_before_p = kiln_strbuf_take(&b);
    kiln_strbuf_t rb = {0};
    kiln_shape_print(&rb, m->entry->root->shape, true);
    sig_before_r = kiln_strbuf_take(&rb);
  }
  s = kiln_layout_normalize(m, &ns, &ch2);
  if (!s) s = kiln_hlo_module_verify(m);
  if (s) {
    fail_module(st, name, "layout normalization", kiln_status_message(s));
    goto free_sig;
  }
  st->copies += as.copies_inserted;
  st->rewritten += ns.rewritten;
  st->unsupported += ns.unsupported;
  st->changed_modules += ch1 || ch2;
  {
    kiln_strbuf_t b = {0};
    for (int i = 0; i < m->entry->num_parameters; i++) kiln_shape_print(&b, m->entry->parameters[i]->shape, true);
    char *p = kiln_strbuf_take(&b);
    kiln_strbuf_t rb = {0};
    kiln_shape_print(&rb, m->entry->root->shape, true);
    char *r = kiln_strbuf_take(&rb);
    if (strcmp(p, sig_before_p) != 0 || strcmp(r, sig_before_r) != 0)
      fail_module(st, name, "entry signature changed", r);
    kiln_free(p);
    kiln_free(r);
  }
  int left = count_non_default(m);
  if (left > ns.unsupported) {
    snprintf(buf, sizeof buf, "%d array instructions with non-default layouts, %d reported unsupported", left,
             ns.unsupported);
    fail_module(st, name, "normalization", buf);
    goto free_sig;
  }
  kiln_literal_t **args2 = kiln_arena_alloc(&args_arena, sizeof *args2 * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    args2[i] = with_shape(&args_arena, args[i], kiln_shape_clone(&args_arena, m->entry->parameters[i]->shape));
  s = kiln_eval_module(m, &eo, n, args2, &a1, &after);
  if (s) {
    fail_module(st, name, "eval after", kiln_status_message(s));
    kiln_status_free(s);
    s = NULL;
  } else if (!pt_literal_bits_equal(before, after)) {
    fail_module(st, name, "results", "differ bitwise after layout assignment + normalization");
  } else {
    st->checked++;
  }
free_sig:
  if (s) kiln_status_free(s);
  kiln_free(sig_before_p);
  kiln_free(sig_before_r);
done:
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  kiln_arena_destroy(&args_arena);
}

/* One module of the shared corpus walk; files that do not parse (test_corpus_parse's
 * business) and modules invalid on purpose are skipped. */
static void corpus_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path, int index,
                          kiln_status error) {
  stats_t *st = ctx;
  if (error || kiln_corpus_find_invalid(path, index) || !kiln_corpus_sampled_at(name, st->rate)) {
    st->skipped++;
    return;
  }
  const char *verbose = getenv("KILN_CORPUS_VERBOSE");
  if (verbose && *verbose == '1') fprintf(stderr, "layout corpus: %s\n", name);
  run_module(st, *m, name);
}

static void test_corpus_same_results_after_layout_assignment_and_normalization(void **state) {
  stats_t st;
  memset(&st, 0, sizeof st);
  st.rate = kiln_corpus_sample_rate(KILN_CORPUS_ASAN_SAMPLE);
  double t0 = kiln_now_seconds();
  kiln_status walk = kiln_corpus_for_each_whole_module(NULL, corpus_module, &st);
  if (walk) fail_msg("%s", kiln_status_message(walk));
  printf(
      "layout corpus: %d modules bitwise identical after layout assignment + normalization, %d "
      "failed, "
      "%d not evaluable before, %d skipped (ineligible/too costly/invalid/sampled out: one module "
      "in %ld runs), %.1f s\n",
      st.checked, st.failed, st.not_evaluable, st.skipped, st.rate, kiln_now_seconds() - t0);
  printf("layout corpus: %d modules changed, %d copies inserted, %d instructions normalized, "
         "%d left unsupported (non-default layout kept)\n",
         st.changed_modules, st.copies, st.rewritten, st.unsupported);
  printf("failures:\n%s", kiln_strbuf_cstr(&st.failures));
  fflush(stdout);
  kiln_strbuf_free(&st.failures);
  assert_true(st.checked > 100 / st.rate);
  assert_int_equal(st.failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_same_results_after_layout_assignment_and_normalization),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
