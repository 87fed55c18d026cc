/* kiln_fusion_merge, fusing into an existing fusion in place: on every corpus module after
 * priority fusion, merging a producer into its consumer fusion (duplicated, or taken whole
 * by its last reader) and merging sibling fusions builds, instruction for instruction, what
 * kiln_fusion_create builds on a second copy of the module (same instructions in the same
 * order, operands, parameter numbers, user order, fused computations; names aside), while
 * the host keeps its instruction and fused computation and allocates a fraction of what a
 * copy does. */
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
#include "base/hashmap.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"
#include "tests/skip_util.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

/* ---- structural equality, names aside ---- */

static int index_in(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *in) {
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i] == in) return (int)i;
  return in && in->parent != c ? -2 : -1;
}

static char *shape_text(const kiln_shape_t *s) {
  kiln_strbuf_t b = {0};
  kiln_shape_print(&b, s, true);
  char *t = kiln_strdup(kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return t;
}

/* Empty string when `a` and `b` have the same structure, else what differs (owned). */
static char *differs(const kiln_hlo_computation_t *a, const kiln_hlo_computation_t *b, int depth) {
  kiln_strbuf_t why = {0};
  if (a->instructions.len != b->instructions.len || a->num_parameters != b->num_parameters ||
      index_in(a, a->root) != index_in(b, b->root))
    kiln_strbuf_printf(&why, "'%s' vs '%s': %zu vs %zu instructions, root %d vs %d", a->name,
                       b->name, a->instructions.len, b->instructions.len, index_in(a, a->root),
                       index_in(b, b->root));
  for (size_t i = 0; !why.len && i < a->instructions.len; i++) {
    const kiln_hlo_instruction_t *x = a->instructions.data[i], *y = b->instructions.data[i];
    char *sx = shape_text(x->shape), *sy = shape_text(y->shape);
    bool same = x->opcode == y->opcode && !strcmp(sx, sy) && x->num_operands == y->num_operands &&
                x->users.len == y->users.len && x->parameter_number == y->parameter_number &&
                x->tuple_index == y->tuple_index && x->fusion_kind == y->fusion_kind &&
                x->num_called_groups == y->num_called_groups;
    for (int k = 0; same && k < x->num_operands; k++)
      same = index_in(a, x->operands[k]) == index_in(b, y->operands[k]);
    for (size_t u = 0; same && u < x->users.len; u++)
      same = index_in(a, x->users.data[u]) == index_in(b, y->users.data[u]);
    if (!same)
      kiln_strbuf_printf(&why, "'%s' #%zu: '%s' (%s) vs '%s' (%s)", a->name, i, x->name, sx,
                         y->name, sy);
    kiln_free(sx);
    kiln_free(sy);
    if (!why.len && x->opcode == KILN_OP_FUSION && depth < 4) {
      const kiln_hlo_computation_t *fa = kiln_hlo_instruction_called(x, "calls"),
                                   *fb = kiln_hlo_instruction_called(y, "calls");
      if (fa && fb) {
        char *d = differs(fa, fb, depth + 1);
        if (*d) kiln_strbuf_printf(&why, "in '%s': %s", x->name, d);
        kiln_free(d);
      }
    }
  }
  for (int p = 0; !why.len && p < a->num_parameters; p++)
    if (index_in(a, a->parameters[p]) != index_in(b, b->parameters[p]))
      kiln_strbuf_printf(&why, "'%s' parameter %d", a->name, p);
  char *r = kiln_strdup(kiln_strbuf_cstr(&why));
  kiln_strbuf_free(&why);
  return r;
}

/* ---- merges to try ---- */

/* Whether the set {a, b} is convex (no path from a to b but the direct edges) and b reads a. */
static bool direct_only(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *a,
                        const kiln_hlo_instruction_t *b) {
  kiln_fusion_order_t o;
  kiln_fusion_order_build(&o, c);
  bool ok = true;
  for (size_t u = 0; u < a->users.len && ok; u++)
    if (a->users.data[u] != b) ok = !kiln_fusion_reaches(&o, a->users.data[u], b, NULL);
  kiln_fusion_order_free(&o);
  return ok;
}

static bool independent(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *a,
                        const kiln_hlo_instruction_t *b) {
  kiln_fusion_order_t o;
  kiln_fusion_order_build(&o, c);
  bool ok = !kiln_fusion_reaches(&o, a, b, NULL) && !kiln_fusion_reaches(&o, b, a, NULL);
  kiln_fusion_order_free(&o);
  return ok;
}

typedef struct merge_try {
  int a, b;       /* instruction indices in the entry */
  bool duplicate; /* a stays for its other users */
} merge_try_t;

/* The next merge to try at or after entry index `*from`: a loop fusion or fusible op that
 * a growable fusion reads (duplicated when it has other users), else two growable array
 * fusions reading one operand. */
static bool next_try(const kiln_hlo_computation_t *c, int *from, merge_try_t *t) {
  for (int i = *from; i < (int)c->instructions.len; i++) {
    kiln_hlo_instruction_t *b = c->instructions.data[i];
    if (!kiln_fusion_is_growable(b) || !kiln_shape_is_array(b->shape)) continue;
    for (int k = 0; k < b->num_operands; k++) {
      kiln_hlo_instruction_t *a = b->operands[k];
      if (!kiln_fusion_can_be_producer(a) || a == c->root) continue;
      if (!direct_only(c, a, b)) continue;
      *t = (merge_try_t){index_in(c, a), i, a->users.len > 1};
      *from = i + 1;
      return true;
    }
    for (int k = 0; k < b->num_operands; k++) {
      const kiln_hlo_instruction_t *x = b->operands[k];
      for (size_t u = 0; u < x->users.len; u++) {
        kiln_hlo_instruction_t *a = x->users.data[u];
        if (a == b || !kiln_fusion_is_growable(a) || !kiln_shape_is_array(a->shape)) continue;
        if (!independent(c, a, b)) continue;
        *t = (merge_try_t){index_in(c, a), i, false};
        *from = i + 1;
        return true;
      }
    }
  }
  return false;
}

typedef struct corpus_run {
  int modules, merges, in_place, mismatches;
  size_t copy_bytes, merge_bytes;
  kiln_strbuf_t log;
} corpus_run_t;

static kiln_status fuse_first(kiln_hlo_module_t *m) {
  kiln_pass_options_t o = {0};
  return kiln_pass_run_list(m, "priority_fusion", &o);
}

/* Merges on module `a` with kiln_fusion_create and on its copy `b` with kiln_fusion_merge,
 * comparing them after each. */
static void compare_merges(corpus_run_t *r, kiln_hlo_module_t *a, kiln_hlo_module_t *b,
                           const char *name) {
  kiln_fusion_scope_t scope;
  kiln_ptrmap_init(&scope.retired);
  kiln_ptrmap_init(&scope.callers);
  kiln_pass_count_callers(b, &scope.callers);
  kiln_fusion_make_arena_room(a);
  kiln_fusion_make_arena_room(b);
  int from = 0, tries = 0;
  merge_try_t t;
  while (tries < 6 && next_try(a->entry, &from, &t)) {
    tries++;
    kiln_hlo_instruction_t *ma[2] = {a->entry->instructions.data[t.a],
                                     a->entry->instructions.data[t.b]};
    kiln_hlo_instruction_t *mb[2] = {b->entry->instructions.data[t.a],
                                     b->entry->instructions.data[t.b]};
    bool dup[2] = {t.duplicate, false};
    kiln_hlo_instruction_t *fa = NULL, *fb = NULL;
    size_t a0 = a->arena.total, b0 = b->arena.total;
    kiln_status sa = kiln_fusion_create(a->entry, 2, ma, dup, NULL, &fa);
    kiln_status sb = kiln_fusion_merge(&scope, b->entry, 2, mb, dup, &fb);
    bool both_fail = sa && sb && kiln_status_code(sa) == kiln_status_code(sb);
    if ((sa || sb) && !both_fail) {
      r->mismatches++;
      kiln_strbuf_printf(&r->log, "  %s: create %s, merge %s\n", name,
                         sa ? kiln_status_message(sa) : "ok", sb ? kiln_status_message(sb) : "ok");
    }
    kiln_status_free(sa);
    kiln_status_free(sb);
    if (both_fail) continue;
    if (!fa || !fb) break;
    r->merges++;
    if (fb == mb[0] || fb == mb[1]) {
      r->in_place++;
      r->copy_bytes += a->arena.total - a0;
      r->merge_bytes += b->arena.total - b0;
    }
    char *d = differs(a->entry, b->entry, 0);
    kiln_fusion_remove_retired(b, &scope.retired); /* as the passes do when they finish */
    kiln_status va = kiln_hlo_module_verify(b);
    if (*d || va) {
      r->mismatches++;
      kiln_strbuf_printf(&r->log, "  %s: merge %d (%s into %s): %s%s\n", name, tries, ma[0]->name,
                         ma[1]->name, d, va ? kiln_status_message(va) : "");
      kiln_status_free(va);
      kiln_free(d);
      if (getenv("KILN_MERGE_VERBOSE")) {
        kiln_strbuf_t pa = {0}, pb = {0};
        kiln_hlo_computation_print(&pa, kiln_hlo_instruction_called(fa, "calls"));
        kiln_hlo_computation_print(&pb, kiln_hlo_instruction_called(fb, "calls"));
        printf("create:\n%s\nmerge:\n%s\n", kiln_strbuf_cstr(&pa), kiln_strbuf_cstr(&pb));
        kiln_strbuf_free(&pa);
        kiln_strbuf_free(&pb);
      }
      break;
    }
    kiln_free(d);
    from = 0; /* indices moved: start over (tries bounds the work) */
  }
  kiln_ptrmap_free(&scope.retired);
  kiln_ptrmap_free(&scope.callers);
}

static void check_module(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                         int index, kiln_status error) {
  corpus_run_t *r = ctx;
  kiln_hlo_module_t *a = *mp;
  if (error || !a) return;
  kiln_status invalid = kiln_hlo_module_verify(a);
  if (invalid) {
    kiln_status_free(invalid);
    return;
  }
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, &f);
  if (s) {
    kiln_status_free(s);
    return;
  }
  kiln_hlo_module_t *b = index < f->num_modules ? f->modules[index] : NULL;
  if (b && !f->bare && !fuse_first(a) && !fuse_first(b)) {
    char *d = differs(a->entry, b->entry, 0);
    if (!*d) {
      r->modules++;
      compare_merges(r, a, b, name);
    }
    kiln_free(d);
  }
  kiln_hlo_file_free(f);
}

static void test_merge_builds_what_create_builds_on_the_corpus(void **state) {
  (void)state;
  DIR *d = opendir(kiln_corpus_dir());
  if (!d) KILN_SKIP("no HLO corpus at %s", kiln_corpus_dir());
  closedir(d);
  corpus_run_t r;
  memset(&r, 0, sizeof r);
  kiln_status s = kiln_corpus_for_each_whole_module(NULL, check_module, &r);
  if (s) fail_msg("corpus: %s", kiln_status_message(s));
  printf(
      "fusion merge: %d modules, %d merges (%d in place) identical to kiln_fusion_create, "
      "%d mismatches; in-place merges allocated %zu bytes where copies allocated %zu\n",
      r.modules, r.merges, r.in_place, r.mismatches, r.merge_bytes, r.copy_bytes);
  if (r.mismatches) printf("%s", kiln_strbuf_cstr(&r.log));
  kiln_strbuf_free(&r.log);
  assert_int_equal(r.mismatches, 0);
  assert_true(r.merges > 100);
  assert_true(r.in_place > 50);
  assert_true(r.merge_bytes * 2 < r.copy_bytes);
}

/* A 40-instruction consumer fusion takes an exponential in place: the instruction and its
 * fused computation stay, no computation is added, and the module arena grows by a fraction
 * of the consumer's body. */
static void test_consumer_fusion_takes_producer_in_place(void **state) {
  (void)state;
  kiln_strbuf_t t = {0};
  kiln_strbuf_append(&t,
                     "HloModule grow\n\nbody {\n  p0 = f32[64]{0} parameter(0)\n"
                     "  p1 = f32[64]{0} parameter(1)\n  v0 = f32[64]{0} add(p0, p1)\n");
  for (int i = 1; i < 40; i++)
    kiln_strbuf_printf(&t, "  v%d = f32[64]{0} multiply(v%d, p1)\n", i, i - 1);
  kiln_strbuf_append(&t,
                     "  ROOT r = f32[64]{0} negate(v39)\n}\n\nENTRY main {\n"
                     "  x = f32[64]{0} parameter(0)\n  y = f32[64]{0} parameter(1)\n"
                     "  e = f32[64]{0} exponential(x)\n"
                     "  ROOT f = f32[64]{0} fusion(e, y), kind=kLoop, calls=body\n}\n");
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(kiln_strbuf_cstr(&t), t.len, &po, &m);
  kiln_strbuf_free(&t);
  assert_null(s);
  kiln_fusion_scope_t scope;
  kiln_ptrmap_init(&scope.retired);
  kiln_ptrmap_init(&scope.callers);
  kiln_pass_count_callers(m, &scope.callers);
  kiln_hlo_instruction_t *members[2] = {kiln_hlo_computation_find(m->entry, "e"),
                                        kiln_hlo_computation_find(m->entry, "f")};
  kiln_hlo_computation_t *body = kiln_hlo_module_find_computation(m, "body");
  size_t comps = m->computations.len, before = m->arena.total;
  kiln_hlo_instruction_t *f = NULL;
  s = kiln_fusion_merge(&scope, m->entry, 2, members, NULL, &f);
  assert_null(s);
  assert_ptr_equal(f, members[1]);
  assert_ptr_equal(kiln_hlo_instruction_called(f, "calls"), body);
  assert_int_equal(m->computations.len, comps);
  assert_int_equal(body->instructions.len, 44); /* 2 parameters, exp, add, 39 multiply, negate */
  assert_int_equal(f->num_operands, 2);
  assert_string_equal(f->operands[0]->name, "x");
  assert_int_equal(body->root->opcode, KILN_OP_NEGATE);
  assert_true(m->arena.total - before < 40 * sizeof(kiln_hlo_instruction_t) / 4);
  assert_null(kiln_hlo_module_verify(m));
  assert_int_equal(kiln_fusion_count_kernels(m), 1);
  kiln_ptrmap_free(&scope.retired);
  kiln_ptrmap_free(&scope.callers);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_consumer_fusion_takes_producer_in_place),
      cmocka_unit_test(test_merge_builds_what_create_builds_on_the_corpus),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
