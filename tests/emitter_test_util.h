/* Shared by the scatter / concatenate / input-slices / dynamic-update-slice emitter tests and
 * the corpus-wide emitter test: list corpus emitter files, parse bare fusions, run one fusion
 * through kiln_runner_check (host run vs evaluator, ptxas) and print a line. Static
 * inline functions only. */
#ifndef KILN_TESTS_EMITTER_TEST_UTIL_H_
#define KILN_TESTS_EMITTER_TEST_UTIL_H_

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common/fusion_runner.h"
#include "compiler/eval/eval.h"
#include "tools/common/hlo_file.h"
#include "tests/skip_util.h"

static inline int emt_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of corpus emitter files containing `needle` ("" for all); NULL without a
 * corpus. Free each name and the array with kiln_free. */
static inline char **emt_corpus_files(const char *needle, size_t *n_out) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/emitters", kiln_corpus_dir());
  DIR *d = opendir(dir);
  *n_out = 0;
  if (!d) return NULL;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 4 || strcmp(e->d_name + l - 4, ".hlo") != 0 || !strstr(e->d_name, needle)) continue;
    if (n == cap) names = kiln_realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
    names[n++] = kiln_strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof(*names), emt_cmp_str);
  *n_out = n;
  return names;
}

static inline void emt_free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) kiln_free(names[i]);
  kiln_free(names);
}

/* The part of a corpus file name after "tests__" (the kind and test name). */
static inline const char *emt_short_name(const char *name) {
  const char *k = strstr(name, "tests__");
  return k ? k + 7 : name;
}

/* Loads corpus emitter file `name` (a name from emt_corpus_files) into *f and returns its
 * first module's fusion computations (kiln_runner_collect_fusions order, at least one; kiln_free
 * the array and kiln_hlo_file_free(*f) after use). When the file does not load or holds no
 * fusion computation, prints "FAIL <name>: ..." and returns NULL with nothing to free. */
static inline const kiln_hlo_computation_t **emt_load_fusions(const char *name, kiln_hlo_file_t **f) {
  char path[2048];
  snprintf(path, sizeof(path), "%s/emitters/%s", kiln_corpus_dir(), name);
  *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, f);
  if (s) {
    printf("FAIL %s: load: %s\n", name, kiln_status_message(s));
    kiln_status_free(s);
    *f = NULL;
    return NULL;
  }
  const kiln_hlo_computation_t **cs = NULL;
  int nc = 0;
  if ((*f)->num_modules > 0) kiln_runner_collect_fusions((*f)->modules[0], &cs, &nc);
  if (nc == 0) {
    printf("FAIL %s: no fusion computation\n", name);
    kiln_free(cs);
    kiln_hlo_file_free(*f);
    *f = NULL;
    return NULL;
  }
  return cs;
}

/* The reference evaluator's result for computation `c` on `params` (default options),
 * allocated in `arena`. */
static inline kiln_status emt_eval(const kiln_hlo_computation_t *c, kiln_literal_t *const *params,
                                   kiln_arena_t *arena, kiln_literal_t **out) {
  kiln_eval_options_t eo = {0};
  kiln_eval_ctx_t ectx = {0};
  ectx.opts = &eo;
  ectx.arena = arena;
  return kiln_eval_computation(&ectx, c, c->num_parameters, params, out);
}

static inline kiln_hlo_module_t *emt_parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &m);
  if (s) {
    printf("parse: %s\n", kiln_status_message(s));
    kiln_status_free(s);
  }
  return m;
}

/* Whether `c` is a scatter on the sorted-indices path with a float add (its runs are summed
 * in registers first: a reassociation the evaluator does not make). */
static inline bool emt_sorted_float_add(const kiln_hlo_computation_t *c) {
  const kiln_hlo_instruction_t *r = c->root;
  if (r->opcode != KILN_OP_SCATTER || !r->indices_are_sorted || r->unique_indices) return false;
  const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(r, "to_apply");
  return f && f->root->opcode == KILN_OP_ADD && kiln_elem_type_is_float(r->shape->type);
}

/* Runs `c` (inputs in [lo, hi) unless both are 0; tolerance max_ulp, < 0: per type) on the
 * host, checks its PTX, prints one line; true when it compiled with emitter `want`, matched
 * and ptxas accepted it (or was missing). */
static inline bool emt_run_one(const char *what, const kiln_hlo_computation_t *c,
                               kiln_codegen_emitter_t want, kiln_host_jit_t *jit,
                               kiln_host_pool_t *pool, double lo, double hi, int64_t max_ulp) {
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.check_ptx = true;
  o.jit = jit;
  o.pool = pool;
  if (lo != 0 || hi != 0) o.float_lo = lo, o.float_hi = hi;
  o.max_ulp = max_ulp;
  kiln_runner_report_t r;
  kiln_status s = kiln_runner_check(c, &o, &r);
  if (s) {
    printf("FAIL %s: %s\n", what, kiln_status_message(s));
    kiln_status_free(s);
    return false;
  }
  if (!r.ptx_checked) printf("  (%s: ptxas %s)\n", what, r.ptx_note);
  bool ok = r.emitter == want && r.mismatches == 0 && (!r.ptx_checked || r.ptx_ok);
  printf("%s %-58s %-20s %7lld elements, max %lld ulp (tolerance %lld)%s%s%s\n",
         ok ? "ok  " : "FAIL", what, kiln_codegen_emitter_name(r.emitter), (long long)r.elements,
         (long long)r.max_ulp, (long long)r.tolerance, r.mismatches ? ": " : "", r.first_mismatch,
         r.ptx_checked && !r.ptx_ok ? r.ptx_note : "");
  return ok;
}

/* Runs the first fusion of every corpus emitter file whose name contains `needle` through
 * emt_run_one (emitter `want`; scatters on the sorted-indices path with a float add, see
 * emt_sorted_float_add, get inputs in [0.5, 1) and 64 ulp), prints each line and the tally.
 * Ends the test as skipped (KILN_SKIP) without a corpus; a file that does not load counts
 * as failed. */
static inline void emt_run_corpus(const char *needle, kiln_codegen_emitter_t want, int *passed,
                                  int *total) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/emitters", kiln_corpus_dir());
  KILN_SKIP_WITHOUT_CORPUS(dir);
  size_t n = 0;
  char **names = emt_corpus_files(needle, &n);
  *passed = *total = 0;
  kiln_host_jit_t *jit = NULL;
  kiln_status s = kiln_host_jit_create(NULL, &jit);
  if (s) {
    printf("FAIL host JIT: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    emt_free_names(names, n);
    *total = 1;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_file_t *f = NULL;
    const kiln_hlo_computation_t **cs = emt_load_fusions(names[i], &f);
    (*total)++;
    if (!cs) continue;
    bool reassoc = emt_sorted_float_add(cs[0]);
    *passed += emt_run_one(emt_short_name(names[i]), cs[0], want, jit, NULL, reassoc ? 0.5 : 0, reassoc ? 1 : 0,
                           reassoc ? 64 : -1);
    kiln_free(cs);
    kiln_hlo_file_free(f);
  }
  printf("corpus %s fusions: %d/%d passed (host == evaluator, ptxas)\n",
         kiln_codegen_emitter_name(want), *passed, *total);
  emt_free_names(names, n);
  kiln_host_jit_destroy(jit);
}

#endif /* KILN_TESTS_EMITTER_TEST_UTIL_H_ */
