/* Shared by the elemental-emitter corpus tests (test_elemental_conv.c,
 * test_elemental_dot_window.c): wrap one corpus instruction into a fusion computation the
 * way the fusion wrapper pass does (`p<k> = parameter(k)` per operand, ROOT = the op with
 * every attribute), parse it back as a module of its own, run it through the loop emitter
 * on the host vs the evaluator with a ptxas check, and walk the corpus's whole modules.
 * Static functions only; include after <cmocka.h> (wrap_run_hand and wrap_run_corpus
 * assert). */
#ifndef KILN_TESTS_ELEMENTAL_WRAP_UTIL_H_
#define KILN_TESTS_ELEMENTAL_WRAP_UTIL_H_

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "tools/common/fusion_runner.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"
#include "tests/skip_util.h"

/* Removes ", <key>=<balanced value>" from s (in place): metadata differs between otherwise
 * equal instructions. */
static void wrap_strip_attr(char *s, const char *key) {
  char pat[64];
  snprintf(pat, sizeof(pat), ", %s=", key);
  char *p;
  while ((p = strstr(s, pat))) {
    char *q = p + strlen(pat);
    int depth = 0;
    bool str = false;
    for (; *q; q++) {
      if (str) {
        if (*q == '\\' && q[1]) q++;
        else if (*q == '"') str = false;
        continue;
      }
      if (*q == '"') str = true;
      else if (*q == '{' || *q == '(' || *q == '[') depth++;
      else if (*q == '}' || *q == ')' || *q == ']') depth--;
      else if ((*q == ',' || *q == '\n') && depth == 0) break;
      if (depth < 0) break;
    }
    memmove(p, q, strlen(q) + 1);
  }
}

/* Module text wrapping `in`: the computations it calls (printed as they are), then
 * `ENTRY fused { p0 = <opshape 0> parameter(0) ... ROOT r = <out> <op>(p0, ...), <attrs> }`.
 * opshapes / out (NULL: the instruction's own) let a caller shrink the problem. NULL when
 * the instruction's operands are not arrays. */
static char *wrap_text(const kiln_hlo_instruction_t *in, kiln_shape_t *const *opshapes,
                       const kiln_shape_t *out) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "HloModule wrapped\n\n");
  for (int g = 0; g < in->num_called_groups; g++)
    for (int k = 0; k < in->called_groups[g].n; k++) {
      kiln_hlo_computation_print(&b, in->called_groups[g].comps[k]);
      kiln_strbuf_append(&b, "\n\n");
    }
  kiln_strbuf_append(&b, "ENTRY fused {\n");
  for (int k = 0; k < in->num_operands; k++) {
    const kiln_shape_t *s = opshapes && opshapes[k] ? opshapes[k] : in->operands[k]->shape;
    if (!kiln_shape_is_array(s) || kiln_shape_is_tuple(s)) {
      kiln_strbuf_free(&b);
      return NULL;
    }
    char *st = kiln_shape_to_string(s, true);
    kiln_strbuf_printf(&b, "  p%d = %s parameter(%d)\n", k, st, k);
    kiln_free(st);
  }
  /* The attributes: the printed instruction after its operand list. */
  kiln_strbuf_t ib = {0};
  kiln_hlo_instruction_print(&ib, in);
  const char *line = kiln_strbuf_cstr(&ib);
  char open[80];
  snprintf(open, sizeof(open), " %s(", kiln_hlo_opcode_name(in->opcode));
  const char *p = strstr(line, open);
  const char *attrs = "";
  if (p) {
    int depth = 0;
    for (p += strlen(open) - 1; *p; p++) {
      if (*p == '(') depth++;
      else if (*p == ')' && --depth == 0) break;
    }
    if (*p) attrs = p + 1;
  }
  char *st = kiln_shape_to_string(out ? out : in->shape, true);
  kiln_strbuf_printf(&b, "  ROOT r = %s %s(", st, kiln_hlo_opcode_name(in->opcode));
  kiln_free(st);
  for (int k = 0; k < in->num_operands; k++) kiln_strbuf_printf(&b, "%sp%d", k ? ", " : "", k);
  kiln_strbuf_printf(&b, ")%s\n}\n", attrs);
  kiln_strbuf_free(&ib);
  char *text = kiln_strbuf_take(&b);
  wrap_strip_attr(text, "metadata");
  wrap_strip_attr(text, "sharding");
  wrap_strip_attr(text, "frontend_attributes");
  wrap_strip_attr(text, "backend_config");
  return text;
}

typedef struct wrap_stats {
  int total, passed, compiled_only, failed, ptx_checked, ptx_ok, unique, invalid, known;
  bool ptx_note_printed;
  char **seen; /* wrapped texts already run */
  int nseen, capseen;
} wrap_stats_t;

static bool wrap_seen(wrap_stats_t *st, const char *text) {
  for (int i = 0; i < st->nseen; i++)
    if (strcmp(st->seen[i], text) == 0) return true;
  if (st->nseen == st->capseen)
    st->seen = kiln_realloc(st->seen, (size_t)(st->capseen = st->capseen ? st->capseen * 2 : 64) * sizeof(char *));
  st->seen[st->nseen++] = kiln_strdup(text);
  return false;
}

static void wrap_stats_free(wrap_stats_t *st) {
  for (int i = 0; i < st->nseen; i++) kiln_free(st->seen[i]);
  kiln_free(st->seen);
}

/* Parses `text`, compiles its entry (loop emitter), checks ptxas and, unless compile_only,
 * runs it on the host vs the evaluator. Prints one line; counts into st. `label` names it.
 * known_difference (may be NULL): why the kernel is expected to differ from the evaluator
 * (counted as known when it does; a pass when it does not). */
static void wrap_run_known(const char *label, const char *text, bool compile_only,
                           kiln_host_jit_t *jit, kiln_host_pool_t *pool, wrap_stats_t *st,
                           const char *known_difference) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) {
    printf("FAIL %s: parse: %s\n%s\n", label, kiln_status_message(s), text);
    kiln_status_free(s);
    st->total++;
    st->failed++;
    return;
  }
  s = kiln_hlo_module_verify(m);
  if (s) {
    /* Some of XLA's test modules hold ops its own verifier rejects (they test a parser
     * or a rewrite): not a kernel to compile. */
    printf("skip %s: invalid: %s\n", label, kiln_status_message(s));
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
    st->invalid++;
    return;
  }
  st->total++;
  if (compile_only) {
    kiln_codegen_kernel_t k;
    s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
    if (!s) {
      kiln_status ps = kiln_codegen_kernel_ptxas_check(&k, NULL);
      if (ps && kiln_status_code(ps) != KILN_UNAVAILABLE) {
        printf("PTX  %s: %s\n", label, kiln_status_message(ps));
        st->ptx_checked++;
      } else if (!ps) {
        st->ptx_checked++;
        st->ptx_ok++;
      }
      kiln_status_free(ps);
      kiln_codegen_kernel_free(&k);
      st->compiled_only++;
      printf("ok   %-60s compiled (too large to run here)\n", label);
    } else {
      printf("FAIL %s: %s\n", label, kiln_status_message(s));
      kiln_status_free(s);
      st->failed++;
    }
    kiln_hlo_module_destroy(m);
    return;
  }
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.check_ptx = true;
  o.jit = jit;
  o.pool = pool;
  kiln_runner_report_t r;
  s = kiln_runner_check(m->entry, &o, &r);
  if (o.check_ptx && !r.ptx_checked && !st->ptx_note_printed && r.ptx_note[0]) {
    printf("ptxas check %s\n", r.ptx_note);
    st->ptx_note_printed = true;
  }
  if (r.ptx_checked) {
    st->ptx_checked++;
    st->ptx_ok += r.ptx_ok;
    if (!r.ptx_ok) printf("PTX  %s: %s\n", label, r.ptx_note);
  }
  if (s) {
    printf("FAIL %s: %s\n", label, kiln_status_message(s));
    kiln_status_free(s);
    st->failed++;
  } else if (r.mismatches > 0 && known_difference) {
    printf("known %-60s %lld of %lld elements differ as expected: %s\n", label,
           (long long)r.mismatches, (long long)r.elements, known_difference);
    st->known++;
  } else {
    bool ok = r.mismatches == 0 && r.emitter == KILN_CODEGEN_EMITTER_LOOP;
    st->passed += ok;
    st->failed += !ok;
    printf("%s %-60s %8lld elements, max %lld ulp (tolerance %lld)%s%s\n", ok ? "ok  " : "FAIL",
           label, (long long)r.elements, (long long)r.max_ulp, (long long)r.tolerance,
           r.mismatches ? ": " : "", r.first_mismatch);
    if (!ok) printf("%s\n", text);
  }
  kiln_hlo_module_destroy(m);
}

static void wrap_run(const char *label, const char *text, bool compile_only, kiln_host_jit_t *jit,
                     kiln_host_pool_t *pool, wrap_stats_t *st) {
  wrap_run_known(label, text, compile_only, jit, pool, st, NULL);
}

/* Why a wrapped instruction is expected to differ from the evaluator, or NULL. The
 * evaluator converts a float operand of an integer or pred dot/convolution to a 64-bit
 * integer (truncating: 0.5 -> 0), where XLA and the emitter convert it to the result type
 * (pred: x != 0). */
static const char *wrap_known_difference(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_DOT && in->opcode != KILN_OP_CONVOLUTION) return NULL;
  if (!kiln_shape_is_array(in->shape) || in->shape->type != KILN_PRED) return NULL;
  for (int k = 0; k < in->num_operands; k++)
    if (kiln_elem_type_is_float(in->operands[k]->shape->type))
      return "evaluator truncates float operands of a pred result to integers (0.5 -> 0)";
  return NULL;
}

/* Largest evaluator work (multiply-adds) a corpus case may take to be run, not only
 * compiled: less in the sanitizer run (kiln_corpus_sampling). */
static double wrap_run_limit(void) {
  return kiln_corpus_sampling() ? 2e6 : 1.5e8;
}

/* Calls fn(ctx, instr, label) for every instruction with opcode `op` in every module of
 * the corpus's xla/ and real/ folders (files that mention `needle`; instructions sampled
 * with kiln_corpus_sampled on their label). Returns the number of files visited (-1: no
 * corpus). */
typedef void (*wrap_instr_fn)(void *ctx, const kiln_hlo_instruction_t *in, const char *label);

static int wrap_cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int wrap_for_each_corpus_instr(kiln_hlo_opcode_t op, const char *needle, wrap_instr_fn fn,
                                      void *ctx) {
  static const char *const kDirs[] = {"xla", "real"};
  int visited = 0;
  bool any = false;
  for (int di = 0; di < 2; di++) {
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/%s", kiln_corpus_dir(), kDirs[di]);
    DIR *d = opendir(dir);
    if (!d) continue;
    any = true;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      size_t l = strlen(e->d_name);
      if (l > 3 && (strcmp(e->d_name + l - 3, ".md") == 0 || strcmp(e->d_name + l - 4, ".tsv") == 0)) continue;
      if (n == cap) names = kiln_realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
      names[n++] = kiln_strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof(*names), wrap_cmp_str);
    for (size_t i = 0; i < n; i++) {
      char path[2048];
      snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
      char *text = NULL;
      size_t len = 0;
      kiln_status s = kiln_read_file(path, &text, &len);
      bool has = !s && text && strstr(text, needle);
      kiln_status_free(s);
      kiln_free(text);
      if (!has) continue;
      kiln_hlo_file_t *f = NULL;
      s = kiln_hlo_file_load(path, &f);
      if (s) {
        kiln_status_free(s);
        continue;
      }
      visited++;
      for (int mi = 0; mi < f->num_modules; mi++) {
        const kiln_hlo_module_t *m = f->modules[mi];
        for (size_t ci = 0; ci < m->computations.len; ci++) {
          const kiln_hlo_computation_t *c = m->computations.data[ci];
          for (size_t k = 0; k < c->instructions.len; k++) {
            const kiln_hlo_instruction_t *in = c->instructions.data[k];
            if (in->opcode != op) continue;
            char label[512];
            snprintf(label, sizeof(label), "%s/%.60s#%d:%s", kDirs[di], names[i], mi, in->name);
            if (kiln_corpus_sampled(label)) fn(ctx, in, label);
          }
        }
      }
      kiln_hlo_file_free(f);
    }
    for (size_t i = 0; i < n; i++) kiln_free(names[i]);
    kiln_free(names);
  }
  return any ? visited : -1;
}

/* Runs the hand-written fusion module `text` (in a JIT of its own) through wrap_run and
 * fails the test unless it compiled, matched the evaluator and passed ptxas (or ptxas was
 * missing). */
static inline void wrap_run_hand(const char *label, const char *text) {
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  wrap_stats_t st = {0};
  wrap_run(label, text, false, jit, NULL, &st);
  kiln_host_jit_destroy(jit);
  wrap_stats_free(&st);
  assert_int_equal(st.failed, 0);
  assert_int_equal(st.passed, 1);
  assert_int_equal(st.ptx_ok, st.ptx_checked);
}

/* The ctx wrap_run_corpus hands to its wrap_instr_fn: the tallies, and the JIT and pool
 * every case of the walk shares. */
typedef struct wrap_corpus_ctx {
  wrap_stats_t st;
  kiln_host_jit_t *jit;
  kiln_host_pool_t *pool;
} wrap_corpus_ctx_t;

/* Walks the corpus for `op` (wrap_for_each_corpus_instr with `needle`, fn getting a
 * wrap_corpus_ctx_t), prints the tally as "corpus <what>: ...", copies the counts into *out
 * and fails the test on any failed case or PTX that ptxas rejected. Ends the test as
 * skipped (KILN_SKIP) when there is no corpus. */
static inline void wrap_run_corpus(kiln_hlo_opcode_t op, const char *needle, const char *what,
                                   wrap_instr_fn fn, wrap_stats_t *out) {
  KILN_SKIP_WITHOUT_CORPUS(kiln_corpus_dir());
  wrap_corpus_ctx_t ctx = {0};
  assert_null(kiln_host_jit_create(NULL, &ctx.jit));
  assert_null(kiln_host_pool_create(0, &ctx.pool));
  int files = wrap_for_each_corpus_instr(op, needle, fn, &ctx);
  printf(
      "corpus %s: %d distinct in %d files; %d/%d run and match the evaluator, %d compiled "
      "only, %d known evaluator differences, %d invalid skipped, %d failed; ptxas %d/%d\n",
      what, ctx.st.unique, files, ctx.st.passed, ctx.st.total - ctx.st.compiled_only,
      ctx.st.compiled_only, ctx.st.known, ctx.st.invalid, ctx.st.failed, ctx.st.ptx_ok,
      ctx.st.ptx_checked);
  kiln_host_pool_destroy(ctx.pool);
  kiln_host_jit_destroy(ctx.jit);
  wrap_stats_free(&ctx.st);
  *out = ctx.st;
  out->seen = NULL;
  out->nseen = out->capseen = 0;
  if (files < 0) fail_msg("no xla/ or real/ folder in the corpus at %s", kiln_corpus_dir());
  assert_int_equal(ctx.st.failed, 0);
  assert_int_equal(ctx.st.ptx_ok, ctx.st.ptx_checked);
}

#endif /* KILN_TESTS_ELEMENTAL_WRAP_UTIL_H_ */
