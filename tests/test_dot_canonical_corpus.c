/* Which corpus dots reach a gemm thunk, before and after dot canonicalization.
 *
 * Every dot of a sequential computation of the corpus's whole modules (xla/, real/) is
 * classified by its form as written (batch dims not leading, several contracting dims, no
 * contracting dim, free dims on both sides of the contracting dim, vector-vector,
 * matrix-vector, a transposed operand, non-default layouts, plain gemm form). The module
 * then goes through the whole pipeline twice, with the dot_canonicalizer disabled ("before")
 * and enabled ("after"), and each dot is looked up by name: a top-level dot the fusion
 * wrapper left for the runtime is a gemm thunk (kiln_fusion_wrapper_is_gemm, what
 * emit_gemm takes), a fusion of that name is an elemental kernel. A dot's element types are
 * "supported" when the dot canonicalizer makes a plain [2,3]x[3,4] dot of those types a gemm
 * (the same predicate, after the operand conversions it makes where the result stays the
 * same, so new types count as soon as the runtime or the pass takes them). Elemental dots of
 * types no gemm takes are listed too.
 *
 * Prints the table; fails when the pipeline (verifying after each pass) fails with the
 * canonicalization but not without it, or when a supported top-level dot is elemental after
 * the pipeline, except the named exceptions (kExceptions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/passes/gemm_epilogue.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "tests/skip_util.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

enum {
  FORM_LAYOUT,
  FORM_BATCH,
  FORM_MULTI_CONTRACTING,
  FORM_NO_CONTRACTING,
  FORM_SPLIT_FREE,
  FORM_VECTOR_VECTOR,
  FORM_MATRIX_VECTOR,
  FORM_TRANSPOSED,
  FORM_GEMM,
  NUM_FORMS
};
static const char *const kFormNames[NUM_FORMS] = {
    "non-default layouts", "batch dims not leading", "several contracting dims",
    "no contracting dim",  "free dims split by k",   "vector-vector",
    "matrix-vector",       "transposed operand",     "plain gemm form",
};

/* Supported dots the pipeline leaves elemental on purpose, with the reason. */
typedef struct exception {
  const char *module_part, *dot;
  const char *why;
} exception_t;
static const exception_t kExceptions[] = {
    {NULL, NULL, NULL},
};

typedef struct form_count {
  int dots, supported, gemm_before, gemm_after, elemental_after, other_after;
} form_count_t;

typedef struct stats {
  form_count_t forms[NUM_FORMS];
  int modules, modules_with_dots, pipeline_failed, fused_in_input;
  int unexpected;
  kiln_strbuf_t report;
  kiln_hashmap_t type_probe; /* "lt,rt,ot" -> (void *)1 supported / (void *)2 not */
} stats_t;

static bool default_layout(const kiln_shape_t *s) {
  return !s->has_layout || kiln_layout_is_default(&s->layout);
}

static bool leading(const kiln_i64_list_t *l) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] != i) return false;
  return true;
}

/* Free dims of an operand of rank r with nb leading batch dims and contracting dim kd form
 * one run (kd first or last among the non-batch dims). */
static bool run_ok(int r, int nb, int64_t kd) {
  return kd == nb || kd == r - 1;
}

static int classify(const kiln_hlo_instruction_t *d) {
  const kiln_shape_t *ls = d->operands[0]->shape, *rs = d->operands[1]->shape;
  if (!default_layout(d->shape) || !default_layout(ls) || !default_layout(rs)) return FORM_LAYOUT;
  const kiln_dot_dnums_t *dn = &d->dot_dnums;
  if (!leading(&dn->lhs_batch) || !leading(&dn->rhs_batch)) return FORM_BATCH;
  if (dn->lhs_contracting.n > 1) return FORM_MULTI_CONTRACTING;
  if (dn->lhs_contracting.n == 0) return FORM_NO_CONTRACTING;
  int nb = dn->lhs_batch.n;
  int64_t lk = dn->lhs_contracting.v[0], rk = dn->rhs_contracting.v[0];
  if (!run_ok(ls->rank, nb, lk) || !run_ok(rs->rank, nb, rk)) return FORM_SPLIT_FREE;
  int lf = ls->rank - nb - 1, rf = rs->rank - nb - 1;
  if (lf == 0 && rf == 0) return FORM_VECTOR_VECTOR;
  if (lf == 0 || rf == 0) return FORM_MATRIX_VECTOR;
  bool transposed = lk == nb || rk == rs->rank - 1 || d->operands[0]->opcode == KILN_OP_TRANSPOSE ||
                    d->operands[1]->opcode == KILN_OP_TRANSPOSE;
  return transposed ? FORM_TRANSPOSED : FORM_GEMM;
}

/* Whether the canonicalizer makes a plain 2x3 by 3x4 dot of these element types a gemm the
 * runtime takes (converting the operands where the result stays the same). */
static bool types_supported(stats_t *st, const kiln_hlo_instruction_t *d) {
  char key[128];
  snprintf(key, sizeof key, "%s,%s,%s", kiln_elem_type_name(d->operands[0]->shape->type),
           kiln_elem_type_name(d->operands[1]->shape->type), kiln_elem_type_name(d->shape->type));
  void *v = kiln_hashmap_get(&st->type_probe, key, strlen(key));
  if (v) return v == (void *)1;
  char text[512];
  snprintf(text, sizeof text,
           "HloModule probe\nENTRY e {\n  a = %s[2,3] parameter(0)\n  b = %s[3,4] parameter(1)\n"
           "  ROOT d = %s[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
           kiln_elem_type_name(d->operands[0]->shape->type),
           kiln_elem_type_name(d->operands[1]->shape->type), kiln_elem_type_name(d->shape->type));
  kiln_hlo_module_t *m = NULL;
  bool ok = false, changed = false;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (!s) s = kiln_pass_find("dot_canonicalizer")->run(m, NULL, &changed);
  for (size_t i = 0; !s && i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = m->entry->instructions.data[i];
    if (in->opcode == KILN_OP_DOT) ok = kiln_fusion_wrapper_is_gemm(in, NULL);
  }
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
  kiln_hashmap_put(&st->type_probe, key, strlen(key), ok ? (void *)1 : (void *)2);
  return ok;
}

/* Where dot `name` went in the optimized module: 1 gemm thunk, 0 elemental kernel (a fusion
 * of its name holding a dot), -1 elsewhere (folded, merged, inside a bigger kernel). */
static int fate(const kiln_hlo_module_t *m, const char *name) {
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  int r = -1;
  for (size_t i = 0; i < nc && r < 0; i++)
    for (size_t k = 0; k < comps[i]->instructions.len && r < 0; k++) {
      const kiln_hlo_instruction_t *x = comps[i]->instructions.data[k];
      /* A dot fused with its epilogue (gemm_epilogue_fusion) is a gemm thunk; the fusion's
       * marker names it. */
      kiln_gemm_epilogue_match_t e;
      if (kiln_gemm_epilogue_match_fusion(x, KILN_GEMM_TYPES_HOST, &e)) {
        char key[300];
        snprintf(key, sizeof key, "\"dot\":\"%s\"", name);
        if (strstr(x->backend_config, key)) r = 1;
        continue;
      }
      if (strcmp(x->name, name) != 0) continue;
      if (x->opcode == KILN_OP_DOT)
        r = kiln_fusion_wrapper_is_gemm(x, NULL) ? 1 : 0;
      else if (x->opcode == KILN_OP_FUSION)
        r = 0;
    }
  kiln_free(comps);
  return r;
}

static kiln_hlo_module_t *optimized(const char *text, bool canonicalize, kiln_status *err) {
  kiln_hlo_module_t *m = NULL;
  *err = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (*err) return NULL;
  kiln_pass_options_t o;
  memset(&o, 0, sizeof o);
  o.verify = canonicalize; /* the pass under test is checked by the verifier */
  o.disabled_passes = canonicalize ? "" : "dot_canonicalizer";
  *err = kiln_pipeline_run(m, &o);
  if (*err) {
    kiln_hlo_module_destroy(m);
    return NULL;
  }
  return m;
}

static bool excepted(const char *module, const char *dot) {
  for (size_t i = 0; i < sizeof kExceptions / sizeof kExceptions[0]; i++)
    if (kExceptions[i].dot && strstr(module, kExceptions[i].module_part) &&
        strcmp(kExceptions[i].dot, dot) == 0)
      return true;
  return false;
}

static void corpus_module(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                          int index, kiln_status error) {
  stats_t *st = ctx;
  if (error || kiln_corpus_find_invalid(path, index) || !kiln_corpus_sampled(name)) return;
  kiln_hlo_module_t *m = *mp;
  st->modules++;
  /* The dots of the sequential computations as written. */
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  KILN_VEC(const kiln_hlo_instruction_t *) dots = {0};
  for (size_t i = 0; i < nc; i++)
    for (size_t k = 0; k < comps[i]->instructions.len; k++) {
      const kiln_hlo_instruction_t *x = comps[i]->instructions.data[k];
      if (x->opcode == KILN_OP_DOT && x->num_operands == 2 && kiln_shape_is_array(x->shape))
        kiln_vec_push(&dots, x);
    }
  kiln_free(comps);
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t k = 0; k < comp->instructions.len; k++)
      if (comp->instructions.data[k]->opcode == KILN_OP_DOT) st->fused_in_input++;
  }
  st->fused_in_input -= (int)dots.len;
  if (!dots.len) {
    kiln_vec_free(&dots);
    return;
  }
  st->modules_with_dots++;
  char *text = kiln_hlo_module_to_string(m);
  kiln_status e1 = NULL, e2 = NULL;
  kiln_hlo_module_t *before = optimized(text, false, &e1), *after = optimized(text, true, &e2);
  kiln_free(text);
  if (!before || !after) {
    st->pipeline_failed++;
    st->unexpected += before && !after; /* the canonicalization broke the module */
    kiln_strbuf_printf(&st->report, "  %s: pipeline failed: %.300s\n", name,
                       kiln_status_message(e1 ? e1 : e2));
  }
  for (size_t i = 0; i < dots.len && before && after; i++) {
    const kiln_hlo_instruction_t *d = dots.data[i];
    int form = classify(d);
    form_count_t *f = &st->forms[form];
    bool sup = types_supported(st, d);
    f->dots++;
    f->supported += sup;
    int fb = fate(before, d->name), fa = fate(after, d->name);
    f->gemm_before += fb == 1;
    f->gemm_after += fa == 1;
    f->elemental_after += fa == 0;
    f->other_after += fa < 0;
    if (sup && fa < 0)
      kiln_strbuf_printf(&st->report, "  not found after the pipeline: %s: %s dot %s (%s)\n", name,
                         kiln_elem_type_name(d->shape->type), d->name, kFormNames[form]);
    if (!sup && fa == 0)
      kiln_strbuf_printf(
          &st->report, "  no gemm for its types: %s: %s = %s x %s dot %s (%s)\n", name,
          kiln_elem_type_name(d->shape->type), kiln_elem_type_name(d->operands[0]->shape->type),
          kiln_elem_type_name(d->operands[1]->shape->type), d->name, kFormNames[form]);
    if (sup && fa == 0) {
      bool ok = excepted(name, d->name);
      st->unexpected += !ok;
      kiln_strbuf_printf(&st->report, "  %s %s: %s dot %s (%s) is an elemental kernel\n",
                         ok ? "expected:" : "UNEXPECTED:", name,
                         kiln_elem_type_name(d->shape->type), d->name, kFormNames[form]);
    }
  }
  kiln_status_free(e1);
  kiln_status_free(e2);
  kiln_hlo_module_destroy(before);
  kiln_hlo_module_destroy(after);
  kiln_vec_free(&dots);
}

static void test_every_supported_corpus_dot_reaches_a_gemm_thunk(void **state) {
  (void)state;
  if (access(kiln_corpus_dir(), R_OK) != 0) KILN_SKIP("no corpus at %s", kiln_corpus_dir());
  stats_t st;
  memset(&st, 0, sizeof st);
  kiln_hashmap_init(&st.type_probe);
  kiln_status walk = kiln_corpus_for_each_whole_module(NULL, corpus_module, &st);
  if (walk) fail_msg("%s", kiln_status_message(walk));
  printf(
      "dot forms over %d corpus modules (%d with dots in sequential computations, %d whose "
      "pipeline failed; %d more dots sit inside fusions of the input):\n",
      st.modules, st.modules_with_dots, st.pipeline_failed, st.fused_in_input);
  printf("  %-26s %6s %10s %12s %11s %16s %6s\n", "form", "dots", "supported", "gemm before",
         "gemm after", "elemental after", "other");
  form_count_t total = {0};
  for (int i = 0; i < NUM_FORMS; i++) {
    const form_count_t *f = &st.forms[i];
    printf("  %-26s %6d %10d %12d %11d %16d %6d\n", kFormNames[i], f->dots, f->supported,
           f->gemm_before, f->gemm_after, f->elemental_after, f->other_after);
    total.dots += f->dots, total.supported += f->supported, total.gemm_before += f->gemm_before;
    total.gemm_after += f->gemm_after, total.elemental_after += f->elemental_after;
    total.other_after += f->other_after;
  }
  printf("  %-26s %6d %10d %12d %11d %16d %6d\n", "total", total.dots, total.supported,
         total.gemm_before, total.gemm_after, total.elemental_after, total.other_after);
  printf("%s", kiln_strbuf_cstr(&st.report));
  fflush(stdout);
  kiln_strbuf_free(&st.report);
  kiln_hashmap_free(&st.type_probe);
  assert_true(total.dots > (kiln_corpus_sampling() ? 10 : 100));
  assert_true(total.gemm_after > total.gemm_before);
  assert_int_equal(st.unexpected, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_supported_corpus_dot_reaches_a_gemm_thunk),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
