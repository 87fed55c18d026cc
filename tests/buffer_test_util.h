/* Helpers for the copy insertion / scheduling / buffer assignment tests (include after
 * <cmocka.h>): parse a module, run passes, evaluate before and after on fake arguments and
 * compare bit for bit, and walk the corpus. */
#ifndef KILN_TESTS_BUFFER_TEST_UTIL_H_
#define KILN_TESTS_BUFFER_TEST_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "tools/common/corpus.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "tools/common/run_report.h"

static inline kiln_hlo_module_t *bt_parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify: %s", kiln_status_message(s));
  return m;
}

static inline void bt_run(kiln_hlo_module_t *m, const char *list) {
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, list, &o);
  if (s) fail_msg("passes '%s': %s", list, kiln_status_message(s));
}

static inline int bt_count_op(const kiln_hlo_computation_t *c, kiln_hlo_opcode_t op) {
  int n = 0;
  for (size_t i = 0; i < c->instructions.len; i++) n += c->instructions.data[i]->opcode == op;
  return n;
}

/* Bitwise equality of two literals (tuples element by element). */
static inline bool bt_literals_equal(const kiln_literal_t *a, const kiln_literal_t *b) {
  int na = kiln_run_report_num_leaves(a), nb = kiln_run_report_num_leaves(b);
  if (na != nb) return false;
  for (int i = 0; i < na; i++) {
    const kiln_literal_t *x = kiln_run_report_leaf(a, i), *y = kiln_run_report_leaf(b, i);
    if (!x || !y || x->num_elements != y->num_elements || x->shape->type != y->shape->type) return false;
    if (!x->data || !y->data) {
      if (x->data != y->data && x->num_elements) return false;
      continue;
    }
    size_t bytes = (size_t)x->num_elements * kiln_elem_type_storage_bytes(x->shape->type);
    if (memcmp(x->data, y->data, bytes) != 0) return false;
  }
  return true;
}

/* While loops past this many iterations make the evaluation fail (RESOURCE_EXHAUSTED), so
 * corpus runs stay short. */
#define BT_MAX_WHILE_ITERATIONS 1000

/* Evaluates `m` on seed-42 fake arguments into `arena`; NULL status and *out on success. */
static inline kiln_status bt_eval(const kiln_hlo_module_t *m, kiln_arena_t *arena, kiln_literal_t **out) {
  kiln_literal_t **args = NULL;
  int n = 0;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fake_args_make(m, NULL, arena, &args, &n));
  kiln_eval_options_t eo = {0};
  eo.rng_seed = 42;
  eo.max_while_iterations = BT_MAX_WHILE_ITERATIONS;
  return kiln_eval_module(m, &eo, n, args, arena, out);
}

/* Fails the test unless `m` gives bit-identical results before and after `list`. */
static inline void bt_check_semantics(kiln_hlo_module_t *m, const char *list) {
  kiln_arena_t a1, a2;
  kiln_arena_init(&a1);
  kiln_arena_init(&a2);
  kiln_literal_t *before = NULL, *after = NULL;
  kiln_status s = bt_eval(m, &a1, &before);
  if (s) fail_msg("eval before: %s", kiln_status_message(s));
  bt_run(m, list);
  s = bt_eval(m, &a2, &after);
  if (s) fail_msg("eval after: %s", kiln_status_message(s));
  assert_true(bt_literals_equal(before, after));
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a2);
}

/* ---- corpus ---- */

typedef void (*bt_module_fn)(void *ctx, kiln_hlo_module_t *m, const char *label);

typedef struct bt_walk {
  bt_module_fn fn;
  void *ctx;
} bt_walk_t;

static inline void bt_walk_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path,
                                  int index, kiln_status error) {
  bt_walk_t *w = ctx;
  w->fn(w->ctx, error ? NULL : *m, name);
}

/* Calls `fn` on every module of corpus folders xla/ and real/ (kiln_corpus_for_each_module;
 * files that fail to parse are reported through `fn` with m == NULL). */
static inline void bt_for_each_corpus_module(bt_module_fn fn, void *ctx) {
  bt_walk_t w = {fn, ctx};
  kiln_status s = kiln_corpus_for_each_whole_module(NULL, bt_walk_module, &w);
  if (s) fail_msg("%s", kiln_status_message(s));
}

#endif /* KILN_TESTS_BUFFER_TEST_UTIL_H_ */
