/* IR mutation and traversal helpers: post orders, removal, cloning, unique names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"

static const char *kModule =
    "HloModule m\n"
    "\n"
    "add_f32 {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  p = f32[4] parameter(0)\n"
    "  z = f32[] constant(0)\n"
    "  r = f32[] reduce(n, z), dimensions={0}, to_apply=add_f32\n"
    "  n = f32[4] negate(e)\n"
    "  e = f32[4] exponential(p)\n"
    "  dead = f32[4] abs(p)\n"
    "  ROOT t = (f32[], f32[4]) tuple(r, e)\n"
    "}\n";

static kiln_hlo_module_t *parse(void) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(kModule, strlen(kModule), NULL, &m);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  return m;
}

static int position(kiln_hlo_instruction_t **order, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(order[i]->name, name) == 0) return (int)i;
  return -1;
}

static void test_post_order_puts_operands_before_users(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse();
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(m->entry, &n);
  assert_int_equal(n, m->entry->instructions.len);
  assert_true(position(order, n, "p") < position(order, n, "e"));
  assert_true(position(order, n, "e") < position(order, n, "n"));
  assert_true(position(order, n, "n") < position(order, n, "r"));
  assert_true(position(order, n, "r") < position(order, n, "t"));
  assert_true(position(order, n, "dead") >= 0);
  kiln_free(order);

  kiln_hlo_computation_t **comps = kiln_hlo_module_computation_post_order(m, &n);
  assert_int_equal(n, 2);
  assert_string_equal(comps[0]->name, "add_f32");
  assert_ptr_equal(comps[1], m->entry);
  kiln_free(comps);
  kiln_hlo_module_destroy(m);
}

static void test_remove_refuses_used_instructions_and_unlinks_users(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse();
  kiln_hlo_instruction_t *e = kiln_hlo_computation_find(m->entry, "e");
  kiln_status s = kiln_hlo_instruction_remove(e);
  assert_int_equal(kiln_status_code(s), KILN_FAILED_PRECONDITION);
  assert_non_null(strstr(kiln_status_message(s), "'e'"));
  kiln_status_free(s);

  kiln_hlo_instruction_t *p = kiln_hlo_computation_find(m->entry, "p");
  size_t users_before = p->users.len;
  kiln_hlo_instruction_t *dead = kiln_hlo_computation_find(m->entry, "dead");
  assert_null(kiln_hlo_instruction_remove(dead));
  assert_int_equal(p->users.len, users_before - 1);
  assert_null(kiln_hlo_computation_find(m->entry, "dead"));
  kiln_hlo_module_destroy(m);
}

static void test_clone_computation_copies_attributes_with_fresh_names(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse();
  kiln_hlo_computation_t *c = kiln_hlo_computation_clone(m->entry, "main");
  assert_non_null(c);
  assert_string_not_equal(c->name, "main");
  assert_int_equal(c->instructions.len, m->entry->instructions.len);
  kiln_hlo_instruction_t *r = NULL;
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i]->opcode == KILN_OP_REDUCE) r = c->instructions.data[i];
  assert_non_null(r);
  assert_string_not_equal(r->name, "r");
  assert_int_equal(r->dimensions.n, 1);
  assert_ptr_equal(kiln_hlo_instruction_called(r, "to_apply"),
                   kiln_hlo_module_find_computation(m, "add_f32"));
  assert_ptr_equal(r->operands[0]->parent, c);
  assert_int_equal(c->root->opcode, KILN_OP_TUPLE);
  assert_int_equal(c->num_parameters, 1);
  /* Fresh names never collide. */
  char *a = kiln_hlo_module_unique_name(m, "e");
  char *b = kiln_hlo_module_unique_name(m, "e");
  assert_string_not_equal(a, "e");
  assert_string_not_equal(a, b);
  kiln_hlo_module_destroy(m);
}

/* `n` independent negates of p (x0 ... x{n-1}), none used, and a root abs(p). */
static kiln_hlo_module_t *parse_fan(int n) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "HloModule fan\n\nENTRY main {\n  p = f32[4] parameter(0)\n");
  for (int i = 0; i < n; i++) kiln_strbuf_printf(&b, "  x%d = f32[4] negate(p)\n", i);
  kiln_strbuf_printf(&b, "  ROOT r = f32[4] abs(p)\n}\n");
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(kiln_strbuf_cstr(&b), b.len, NULL, &m);
  kiln_strbuf_free(&b);
  assert_null(s);
  return m;
}

static void names_of(const kiln_hlo_computation_t *c, kiln_strbuf_t *out) {
  for (size_t i = 0; i < c->instructions.len; i++)
    kiln_strbuf_printf(out, "%s ", c->instructions.data[i]->name);
}

/* The same removals and moves, eager on one copy and deferred on the other (with a stale
 * slot hint among them): the lists match after compaction, and while deferred the holes are
 * skipped by the traversals, the name set and the instruction count. */
static void test_deferred_removal_keeps_the_eager_order(void **state) {
  (void)state;
  enum { N = 64 };
  kiln_hlo_module_t *eager = parse_fan(N), *lazy = parse_fan(N);
  kiln_hlo_computation_defer_removals(lazy->entry);
  unsigned seed = 12345;
  int removed = 0;
  for (int step = 0; step < 3 * N; step++) {
    seed = seed * 1103515245u + 12345u;
    char name[16];
    snprintf(name, sizeof name, "x%u", (seed >> 8) % N);
    kiln_hlo_instruction_t *a = kiln_hlo_computation_find(eager->entry, name);
    kiln_hlo_instruction_t *b = kiln_hlo_computation_find(lazy->entry, name);
    assert_true((a == NULL) == (b == NULL));
    if (!a) continue;
    if (step == N) b->slot = 0; /* a stale hint (slot 0 is p or a hole): found by search */
    if ((seed >> 20) % 3 == 0) {
      kiln_hlo_instruction_move_to_end(a);
      kiln_hlo_instruction_move_to_end(b);
    } else {
      assert_null(kiln_hlo_instruction_remove(a));
      assert_null(kiln_hlo_instruction_remove(b));
      removed++;
    }
  }
  assert_true(removed > N / 2);
  assert_true(lazy->entry->num_holes > 0);
  assert_int_equal(kiln_hlo_module_instruction_count(lazy), 2 + N - removed);
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(lazy->entry, &n);
  assert_int_equal(n, 2 + N - removed);
  for (size_t i = 0; i < n; i++) assert_non_null(order[i]);
  kiln_free(order);
  const char *fresh = kiln_hlo_module_unique_name(lazy, "r");
  assert_string_not_equal(fresh, "r");
  assert_null(kiln_hlo_computation_find(lazy->entry, fresh));

  kiln_hlo_computation_compact(lazy->entry);
  assert_false(lazy->entry->defer_removals);
  assert_int_equal(lazy->entry->num_holes, 0);
  kiln_strbuf_t x = {0}, y = {0};
  names_of(eager->entry, &x);
  names_of(lazy->entry, &y);
  assert_string_equal(kiln_strbuf_cstr(&x), kiln_strbuf_cstr(&y));
  for (size_t i = 0; i < lazy->entry->instructions.len; i++)
    assert_int_equal(lazy->entry->instructions.data[i]->slot, (int32_t)i);
  kiln_strbuf_free(&x);
  kiln_strbuf_free(&y);
  kiln_hlo_module_destroy(eager);
  kiln_hlo_module_destroy(lazy);
}

static void test_remove_computations_drops_a_set_in_order(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse();
  kiln_hlo_computation_t *add = kiln_hlo_module_find_computation(m, "add_f32");
  kiln_hlo_computation_t *c1 = kiln_hlo_computation_clone(add, "one");
  kiln_hlo_computation_t *c2 = kiln_hlo_computation_clone(add, "two");
  kiln_hlo_computation_t *c3 = kiln_hlo_computation_clone(add, "three");
  assert_int_equal(m->computations.len, 5);
  kiln_ptrmap_t gone;
  kiln_ptrmap_init(&gone);
  kiln_ptrmap_put(&gone, c1, (void *)1);
  kiln_ptrmap_put(&gone, c3, (void *)1);
  kiln_ptrmap_put(&gone, m->entry, (void *)1); /* never removed */
  assert_int_equal(kiln_hlo_module_remove_computations(m, &gone), 2);
  kiln_ptrmap_free(&gone);
  assert_int_equal(m->computations.len, 3);
  assert_ptr_equal(m->computations.data[0], add);
  assert_ptr_equal(m->computations.data[1], m->entry);
  assert_ptr_equal(m->computations.data[2], c2);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_post_order_puts_operands_before_users),
      cmocka_unit_test(test_remove_refuses_used_instructions_and_unlinks_users),
      cmocka_unit_test(test_clone_computation_copies_attributes_with_fresh_names),
      cmocka_unit_test(test_deferred_removal_keeps_the_eager_order),
      cmocka_unit_test(test_remove_computations_drops_a_set_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
