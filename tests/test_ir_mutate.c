/* IR mutation and traversal helpers: post orders, removal, cloning, unique names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_post_order_puts_operands_before_users),
      cmocka_unit_test(test_remove_refuses_used_instructions_and_unlinks_users),
      cmocka_unit_test(test_clone_computation_copies_attributes_with_fresh_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
