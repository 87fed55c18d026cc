/* StableHLO -> HLO conversion (compiler/frontend/stablehlo_to_hlo.h) on small modules: built
 * by hand in the generic IR (so these tests do not depend on a reader), and, where the text
 * reader is built in, read from MLIR text. Each converted module is verified by the
 * conversion itself and evaluated here with the reference evaluator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/eval/eval.h"
#include "compiler/frontend/mlir_text.h"
#include "compiler/frontend/stablehlo_to_hlo.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/replica_groups.h"
#include "skip_util.h"

/* ---- a tiny builder of the generic IR ---- */

typedef struct builder {
  kiln_mlir_module_t *m;
} builder_t;

static void *alloc(builder_t *b, size_t n) {
  void *p = kiln_arena_alloc(&b->m->arena, n);
  memset(p, 0, n);
  return p;
}

static kiln_mlir_type_t *float_type(builder_t *b, kiln_elem_type_t e) {
  kiln_mlir_type_t *t = alloc(b, sizeof *t);
  t->kind = KILN_MLIR_TYPE_FLOAT;
  t->elem = e;
  return t;
}

static kiln_mlir_type_t *int_type(builder_t *b, int width) {
  kiln_mlir_type_t *t = alloc(b, sizeof *t);
  t->kind = KILN_MLIR_TYPE_INTEGER;
  t->width = width;
  return t;
}

static kiln_mlir_type_t *tensor(builder_t *b, const kiln_mlir_type_t *elem, int rank,
                                const int64_t *dims) {
  kiln_mlir_type_t *t = alloc(b, sizeof *t);
  t->kind = KILN_MLIR_TYPE_TENSOR;
  t->element = elem;
  t->rank = rank;
  t->dims = alloc(b, sizeof(int64_t) * (size_t)(rank + 1));
  for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
  return t;
}

static kiln_mlir_attr_t *dense_f32(builder_t *b, const kiln_mlir_type_t *type, const float *v,
                                   int n) {
  kiln_mlir_attr_t *a = alloc(b, sizeof *a);
  a->kind = KILN_MLIR_ATTR_DENSE_ELEMENTS;
  a->type = type;
  kiln_shape_t *sh =
      kiln_shape_make_array_with_default_layout(&b->m->arena, KILN_F32, type->rank, type->dims);
  a->literal = kiln_literal_make(&b->m->arena, sh);
  for (int i = 0; i < n; i++) kiln_literal_set_f64(a->literal, i, v[i]);
  return a;
}

static kiln_mlir_block_t *func(builder_t *b, const char *name, int nargs,
                               const kiln_mlir_type_t *const *arg_types) {
  kiln_mlir_op_t *f = alloc(b, sizeof *f);
  f->name = "func.func";
  f->num_attrs = 1;
  f->attrs = alloc(b, sizeof *f->attrs);
  kiln_mlir_attr_t *sym = alloc(b, sizeof *sym);
  sym->kind = KILN_MLIR_ATTR_STRING;
  sym->str = name;
  sym->str_len = strlen(name);
  f->attrs[0].name = "sym_name";
  f->attrs[0].value = sym;
  f->num_regions = 1;
  f->regions = alloc(b, sizeof *f->regions);
  f->regions[0].num_blocks = 1;
  f->regions[0].blocks = alloc(b, sizeof(kiln_mlir_block_t));
  kiln_mlir_block_t *blk = &f->regions[0].blocks[0];
  blk->num_args = nargs;
  blk->args = alloc(b, sizeof(kiln_mlir_value_t) * (size_t)(nargs + 1));
  for (int i = 0; i < nargs; i++) {
    blk->args[i].type = arg_types[i];
    blk->args[i].index = i;
    blk->args[i].block = blk;
  }
  blk->ops = alloc(b, sizeof(kiln_mlir_op_t *) * 64);
  kiln_mlir_block_t *body = &b->m->body;
  if (!body->ops) body->ops = alloc(b, sizeof(kiln_mlir_op_t *) * 16);
  body->ops[body->num_ops++] = f;
  return blk;
}

/* Appends op `name` with operands and one result of `rtype` (NULL: no result). */
static kiln_mlir_op_t *add_op(builder_t *b, kiln_mlir_block_t *blk, const char *name,
                              const kiln_mlir_type_t *rtype, int nops, ...) {
  kiln_mlir_op_t *op = alloc(b, sizeof *op);
  op->name = name;
  op->line = blk->num_ops + 1;
  op->num_operands = nops;
  op->operands = alloc(b, sizeof(kiln_mlir_value_t *) * (size_t)(nops + 1));
  va_list ap;
  va_start(ap, nops);
  for (int i = 0; i < nops; i++) op->operands[i] = va_arg(ap, kiln_mlir_value_t *);
  va_end(ap);
  if (rtype) {
    op->num_results = 1;
    op->results = alloc(b, sizeof(kiln_mlir_value_t));
    op->results[0].type = rtype;
    op->results[0].def = op;
  }
  op->attrs = alloc(b, sizeof(kiln_mlir_named_attr_t) * 8);
  blk->ops[blk->num_ops++] = op;
  return op;
}

static void set_attr(builder_t *b, kiln_mlir_op_t *op, const char *name,
                     const kiln_mlir_attr_t *v) {
  (void)b;
  op->attrs[op->num_attrs].name = name;
  op->attrs[op->num_attrs].value = v;
  op->num_attrs++;
}

static kiln_mlir_op_t *constant(builder_t *b, kiln_mlir_block_t *blk, const kiln_mlir_type_t *t,
                                const float *v, int n) {
  kiln_mlir_op_t *c = add_op(b, blk, "stablehlo.constant", t, 0);
  set_attr(b, c, "value", dense_f32(b, t, v, n));
  return c;
}

/* Converts in check mode and runs the checks on the evaluator; returns passed checks and
 * stores failed ones. */
static int run_checks(kiln_mlir_module_t *m, const char *fname, int *failed) {
  const kiln_mlir_op_t *f = kiln_mlir_module_func(m, fname);
  assert_non_null(f);
  assert_true(kiln_stablehlo_func_has_checks(f));
  kiln_hlo_module_t *hm = NULL;
  kiln_stablehlo_check_t *checks = NULL;
  int32_t n = 0;
  kiln_status s = kiln_stablehlo_checks_to_hlo(m, f, &hm, &checks, &n, NULL, NULL);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *out = NULL;
  kiln_eval_options_t eo = {0};
  assert_null(kiln_eval_module(hm, &eo, 0, NULL, &arena, &out));
  int passed = 0;
  *failed = 0;
  for (int32_t i = 0; i < n; i++) {
    char msg[256];
    if (kiln_stablehlo_check_eval(&checks[i], out, msg, sizeof msg, NULL))
      passed++;
    else
      (*failed)++;
  }
  kiln_arena_destroy(&arena);
  kiln_free(checks);
  kiln_hlo_module_destroy(hm);
  return passed;
}

static void test_add_of_constants_passes_its_check_and_a_wrong_expectation_fails(void **state) {
  (void)state;
  builder_t b = {kiln_mlir_module_create()};
  int64_t d[1] = {3};
  kiln_mlir_type_t *t = tensor(&b, float_type(&b, KILN_F32), 1, d);
  kiln_mlir_block_t *blk = func(&b, "add_test", 0, NULL);
  float x[3] = {1, 2, 3}, y[3] = {0.5f, -2, 10}, want[3] = {1.5f, 0, 13}, wrong[3] = {1.5f, 0, 14};
  kiln_mlir_op_t *cx = constant(&b, blk, t, x, 3), *cy = constant(&b, blk, t, y, 3);
  kiln_mlir_op_t *sum = add_op(&b, blk, "stablehlo.add", t, 2, &cx->results[0], &cy->results[0]);
  kiln_mlir_op_t *k1 = add_op(&b, blk, "check.expect_eq_const", NULL, 1, &sum->results[0]);
  set_attr(&b, k1, "value", dense_f32(&b, t, want, 3));
  kiln_mlir_op_t *k2 = add_op(&b, blk, "check.expect_almost_eq_const", NULL, 1, &sum->results[0]);
  set_attr(&b, k2, "value", dense_f32(&b, t, wrong, 3));
  kiln_mlir_op_t *cw = constant(&b, blk, t, want, 3);
  add_op(&b, blk, "check.expect_eq", NULL, 2, &sum->results[0], &cw->results[0]);
  add_op(&b, blk, "func.return", NULL, 0);
  int failed;
  int passed = run_checks(b.m, "add_test", &failed);
  assert_int_equal(passed, 2);
  assert_int_equal(failed, 1);
  kiln_mlir_module_destroy(b.m);
}

static void test_entry_converts_with_parameters_aliasing_and_one_result(void **state) {
  (void)state;
  builder_t b = {kiln_mlir_module_create()};
  int64_t d[2] = {2, 3};
  kiln_mlir_type_t *t = tensor(&b, float_type(&b, KILN_F32), 2, d);
  const kiln_mlir_type_t *args[2] = {t, t};
  kiln_mlir_block_t *blk = func(&b, "main", 2, args);
  kiln_mlir_op_t *mul = add_op(&b, blk, "stablehlo.multiply", t, 2, &blk->args[0], &blk->args[1]);
  int64_t rd[1] = {3};
  kiln_mlir_type_t *rt = tensor(&b, float_type(&b, KILN_F32), 1, rd);
  kiln_mlir_type_t *scalar = tensor(&b, float_type(&b, KILN_F32), 0, NULL);
  float zero = 0;
  kiln_mlir_op_t *init = constant(&b, blk, scalar, &zero, 1);
  kiln_mlir_op_t *red =
      add_op(&b, blk, "stablehlo.reduce", rt, 2, &mul->results[0], &init->results[0]);
  kiln_mlir_attr_t *dims = alloc(&b, sizeof *dims);
  dims->kind = KILN_MLIR_ATTR_DENSE_ARRAY;
  dims->num_elements = 1;
  dims->ints = alloc(&b, sizeof(int64_t));
  dims->ints[0] = 0;
  set_attr(&b, red, "dimensions", dims);
  /* the body: (a, b) -> add */
  red->num_regions = 1;
  red->regions = alloc(&b, sizeof *red->regions);
  red->regions[0].num_blocks = 1;
  red->regions[0].blocks = alloc(&b, sizeof(kiln_mlir_block_t));
  kiln_mlir_block_t *rb = &red->regions[0].blocks[0];
  rb->num_args = 2;
  rb->args = alloc(&b, 2 * sizeof(kiln_mlir_value_t));
  rb->args[0].type = scalar;
  rb->args[1].type = scalar;
  rb->ops = alloc(&b, 4 * sizeof(kiln_mlir_op_t *));
  kiln_mlir_op_t *s = add_op(&b, rb, "stablehlo.add", scalar, 2, &rb->args[0], &rb->args[1]);
  add_op(&b, rb, "stablehlo.return", NULL, 1, &s->results[0]);
  add_op(&b, blk, "func.return", NULL, 1, &red->results[0]);
  /* arg 0 aliases the output, arg 1 is a donor */
  kiln_mlir_attr_t *arr = alloc(&b, sizeof *arr);
  arr->kind = KILN_MLIR_ATTR_ARRAY;
  arr->num_elements = 2;
  arr->elements = alloc(&b, 2 * sizeof(kiln_mlir_attr_t *));
  for (int i = 0; i < 2; i++) {
    kiln_mlir_attr_t *dict = alloc(&b, sizeof *dict);
    dict->kind = KILN_MLIR_ATTR_DICTIONARY;
    dict->num_elements = 1;
    dict->fields = alloc(&b, sizeof(kiln_mlir_named_attr_t));
    kiln_mlir_attr_t *v = alloc(&b, sizeof *v);
    if (i == 0) {
      v->kind = KILN_MLIR_ATTR_INTEGER;
      v->i = 0;
      dict->fields[0].name = "tf.aliasing_output";
    } else {
      v->kind = KILN_MLIR_ATTR_BOOL;
      v->b = true;
      dict->fields[0].name = "jax.buffer_donor";
    }
    dict->fields[0].value = v;
    arr->elements[i] = dict;
  }
  kiln_mlir_op_t *f = b.m->body.ops[0];
  f->attrs = kiln_arena_realloc(&b.m->arena, f->attrs, sizeof *f->attrs, 2 * sizeof *f->attrs);
  f->attrs[1].name = "arg_attrs";
  f->attrs[1].value = arr;
  f->num_attrs = 2;

  kiln_hlo_module_t *hm = NULL;
  kiln_status st = kiln_stablehlo_to_hlo(b.m, NULL, &hm);
  if (st) fprintf(stderr, "%s\n", kiln_status_message(st));
  assert_null(st);
  char *text = kiln_hlo_module_to_string(hm);
  assert_non_null(strstr(text, "input_output_alias"));
  assert_non_null(strstr(text, "reduce("));
  kiln_free(text);
  /* evaluate: sum over dim 0 of x*y */
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *a[2];
  for (int i = 0; i < 2; i++) {
    a[i] = kiln_literal_make(&arena, kiln_shape_clone(&arena, hm->entry->parameters[i]->shape));
    for (int k = 0; k < 6; k++) kiln_literal_set_f64(a[i], k, (double)(k + 1) * (i ? 2 : 1));
  }
  kiln_literal_t *out = NULL;
  kiln_eval_options_t eo = {0};
  assert_null(kiln_eval_module(hm, &eo, 2, a, &arena, &out));
  /* x*y = 2*k^2 for k = 1..6: columns sum rows 0 and 1 */
  assert_true(kiln_literal_get_f64(out, 0) == 2.0 * (1 + 16));
  assert_true(kiln_literal_get_f64(out, 2) == 2.0 * (9 + 36));
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(hm);
  kiln_mlir_module_destroy(b.m);
}

static void test_unknown_op_and_dynamic_shape_are_unimplemented_naming_them(void **state) {
  (void)state;
  builder_t b = {kiln_mlir_module_create()};
  int64_t d[1] = {4};
  kiln_mlir_type_t *t = tensor(&b, int_type(&b, 32), 1, d);
  kiln_mlir_block_t *blk = func(&b, "main", 1, (const kiln_mlir_type_t *[]){t});
  kiln_mlir_op_t *u = add_op(&b, blk, "stablehlo.frobnicate", t, 1, &blk->args[0]);
  add_op(&b, blk, "func.return", NULL, 1, &u->results[0]);
  kiln_hlo_module_t *hm = NULL;
  kiln_status s = kiln_stablehlo_to_hlo(b.m, NULL, &hm);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "stablehlo.frobnicate"));
  kiln_status_free(s);
  kiln_mlir_module_destroy(b.m);

  b.m = kiln_mlir_module_create();
  int64_t dd[1] = {KILN_MLIR_DYNAMIC};
  t = tensor(&b, int_type(&b, 32), 1, dd);
  blk = func(&b, "main", 1, (const kiln_mlir_type_t *[]){t});
  u = add_op(&b, blk, "stablehlo.abs", t, 1, &blk->args[0]);
  add_op(&b, blk, "func.return", NULL, 1, &u->results[0]);
  s = kiln_stablehlo_to_hlo(b.m, NULL, &hm);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "dynamic"));
  kiln_status_free(s);
  kiln_mlir_module_destroy(b.m);

  /* An op after the terminator (the text reader takes `return %a\nc}` so: a fuzzer's find,
   * which crashed the entry's result types) is refused. */
  b.m = kiln_mlir_module_create();
  t = tensor(&b, int_type(&b, 32), 1, d);
  blk = func(&b, "main", 1, (const kiln_mlir_type_t *[]){t});
  add_op(&b, blk, "func.return", NULL, 1, &blk->args[0]);
  add_op(&b, blk, "func.c", NULL, 0, NULL);
  s = kiln_stablehlo_to_hlo(b.m, NULL, &hm);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(
      strstr(kiln_status_message(s), "func.c after the block's terminator func.return"));
  kiln_status_free(s);
  kiln_mlir_module_destroy(b.m);

  /* Operand counts the generic form can state freely (fuzzer finds: converters read past the
   * operand array): a one-operand dot, a one-operand CHLO broadcast add, a zero-result abs. */
  static const struct {
    const char *op, *want;
    bool result;
  } bad[] = {{"stablehlo.dot", "stablehlo.dot takes 2 operand(s), not 1", true},
             {"chlo.broadcast_add", "chlo.broadcast_add takes two operands", true},
             {"stablehlo.abs", "stablehlo.abs gives no result", false}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    b.m = kiln_mlir_module_create();
    t = tensor(&b, int_type(&b, 32), 1, d);
    blk = func(&b, "main", 1, (const kiln_mlir_type_t *[]){t});
    add_op(&b, blk, bad[k].op, bad[k].result ? t : NULL, 1, &blk->args[0]);
    add_op(&b, blk, "func.return", NULL, 1, &blk->args[0]);
    s = kiln_stablehlo_to_hlo(b.m, NULL, &hm);
    assert_non_null(s);
    if (!strstr(kiln_status_message(s), bad[k].want))
      fail_msg("%s: got '%s'", bad[k].op, kiln_status_message(s));
    assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
    kiln_status_free(s);
    kiln_mlir_module_destroy(b.m);
  }
}

/* ---- from MLIR text (skipped while the text reader is not built in) ---- */

static kiln_mlir_module_t *parse_or_skip(const char *text) {
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_parse_text(text, strlen(text), "test.mlir", &m);
  if (s && kiln_status_code(s) == KILN_UNIMPLEMENTED) {
    kiln_status_free(s);
    return NULL;
  }
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  return m;
}

static const char kWhileCaseText[] =
    "func.func @loops() {\n"
    "  %init = stablehlo.constant dense<0> : tensor<i64>\n"
    "  %one = stablehlo.constant dense<1> : tensor<i64>\n"
    "  %ten = stablehlo.constant dense<10> : tensor<i64>\n"
    "  %r:2 = stablehlo.while(%i = %init, %acc = %init) : tensor<i64>, tensor<i64>\n"
    "  cond {\n"
    "    %c = stablehlo.compare LT, %i, %ten : (tensor<i64>, tensor<i64>) -> tensor<i1>\n"
    "    stablehlo.return %c : tensor<i1>\n"
    "  } do {\n"
    "    %n = stablehlo.add %i, %one : tensor<i64>\n"
    "    %a = stablehlo.add %acc, %i : tensor<i64>\n"
    "    stablehlo.return %n, %a : tensor<i64>, tensor<i64>\n"
    "  }\n"
    "  %idx = stablehlo.constant dense<1> : tensor<i32>\n"
    "  %sel = \"stablehlo.case\"(%idx) ({\n"
    "    stablehlo.return %one : tensor<i64>\n"
    "  }, {\n"
    "    stablehlo.return %ten : tensor<i64>\n"
    "  }) : (tensor<i32>) -> tensor<i64>\n"
    "  check.expect_eq_const %r#1, dense<45> : tensor<i64>\n"
    "  check.expect_eq_const %sel, dense<10> : tensor<i64>\n"
    "  func.return\n"
    "}\n";

/* Reads `text`, runs function `fn`'s checks: `want` pass, none fails. False when the text
 * reader is not built in (the caller skips). */
static bool checks_pass_from_text(const char *text, const char *fn, int want) {
  kiln_mlir_module_t *m = parse_or_skip(text);
  if (!m) return false;
  int failed;
  int passed = run_checks(m, fn, &failed);
  assert_int_equal(passed, want);
  assert_int_equal(failed, 0);
  kiln_mlir_module_destroy(m);
  return true;
}

static void test_while_and_case_with_captured_values_from_text(void **state) {
  (void)state;
  if (!checks_pass_from_text(kWhileCaseText, "loops", 2))
    KILN_SKIP("the MLIR text reader is not built in yet");
}

/* What JAX sends with Shardy on (its default): an sdy.mesh at the top of the module, sharding
 * hints (jax.lax.with_sharding_constraint, reshard) in the function — values unchanged. */
static const char kShardyText[] =
    "sdy.mesh @mesh = <[\"x\"=1]>\n"
    "func.func @hints() {\n"
    "  %a = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n"
    "  %b = \"sdy.sharding_constraint\"(%a) {sharding = #sdy.sharding<@mesh, [{\"x\"}]>} : "
    "(tensor<4xf32>) -> tensor<4xf32>\n"
    "  %c = stablehlo.add %b, %b : tensor<4xf32>\n"
    "  %d = \"sdy.reshard\"(%c) {sharding = #sdy.sharding<@mesh, [{}]>} : (tensor<4xf32>) -> "
    "tensor<4xf32>\n"
    "  check.expect_eq_const %d, dense<[2.0, 4.0, 6.0, 8.0]> : tensor<4xf32>\n"
    "  func.return\n"
    "}\n";

static void test_shardy_mesh_and_sharding_hints_from_text(void **state) {
  (void)state;
  if (!checks_pass_from_text(kShardyText, "hints", 1))
    KILN_SKIP("the MLIR text reader is not built in yet");
}

/* jax.shard_map under Shardy on a one-device mesh: sdy.manual_computation whose body (a
 * psum over the manual axis among it: an all_reduce of one participant) is the computation. */
static const char kManualText[] =
    "sdy.mesh @mesh = <[\"x\"=1]>\n"
    "func.func @shard_map() {\n"
    "  %a = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>\n"
    "  %r = \"sdy.manual_computation\"(%a) <{in_shardings = "
    "#sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>, manual_axes = #sdy<manual_axes{\"x\"}>, "
    "out_shardings = #sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>}> ({\n"
    "  ^bb0(%s: tensor<4xf32>):\n"
    "    %t = stablehlo.multiply %s, %s : tensor<4xf32>\n"
    "    %u = \"stablehlo.all_reduce\"(%t) <{replica_groups = dense<[[0]]> : tensor<1x1xi64>, "
    "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, "
    "use_global_device_ids}> ({\n"
    "    ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
    "      %z = stablehlo.add %x, %y : tensor<f32>\n"
    "      stablehlo.return %z : tensor<f32>\n"
    "    }) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "    \"sdy.return\"(%u) : (tensor<4xf32>) -> ()\n"
    "  }) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  check.expect_eq_const %r, dense<[1.0, 4.0, 9.0, 16.0]> : tensor<4xf32>\n"
    "  func.return\n"
    "}\n";

static void test_shard_map_on_a_one_device_mesh_is_its_body(void **state) {
  (void)state;
  if (!checks_pass_from_text(kManualText, "shard_map", 1))
    KILN_SKIP("the MLIR text reader is not built in yet");
}

/* Converting `text` fails with `code` and a message holding `want`. */
static void expect_convert_error(const char *text, kiln_status_code_t code, const char *want) {
  kiln_mlir_module_t *m = parse_or_skip(text);
  assert_non_null(m);
  kiln_hlo_module_t *hm = NULL;
  kiln_status s = kiln_stablehlo_to_hlo(m, NULL, &hm);
  assert_non_null(s);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), want))
    fail_msg("got %s, want code %d and \"%s\"", kiln_status_message(s), (int)code, want);
  kiln_status_free(s);
  kiln_mlir_module_destroy(m);
}

/* kManualText with `from` replaced by `to`. */
static char *manual_text_with(const char *from, const char *to) {
  const char *at = strstr(kManualText, from);
  assert_non_null(at);
  size_t n = strlen(kManualText) + strlen(to) + 1;
  char *t = malloc(n);
  snprintf(t, n, "%.*s%s%s", (int)(at - kManualText), kManualText, to, at + strlen(from));
  return t;
}

/* Over a mesh of more than one device the body runs on shards and the program around it would
 * need SPMD partitioning: UNIMPLEMENTED saying so, whether the mesh says it, a sharding's
 * inlined mesh does, or only the shard's shape shows it; a module without an sdy.mesh, and a
 * body not ending in sdy.return, are refused too. */
static void test_shard_map_over_several_devices_is_refused(void **state) {
  (void)state;
  char *t = manual_text_with("[\"x\"=1]", "[\"x\"=2]");
  expect_convert_error(t, KILN_UNIMPLEMENTED, "mesh of 2 devices (sdy.mesh)");
  free(t);
  t = manual_text_with("[<@mesh, [{\"x\"}]>]>, manual", "[<mesh<[\"x\"=4]>, [{\"x\"}]>]>, manual");
  expect_convert_error(t, KILN_UNIMPLEMENTED, "mesh of 4 devices (in_shardings)");
  free(t);
  t = manual_text_with("^bb0(%s: tensor<4xf32>)", "^bb0(%s: tensor<2xf32>)");
  expect_convert_error(t, KILN_UNIMPLEMENTED, "operand 0 is f32[4] but its shard is f32[2]");
  free(t);
  t = manual_text_with("sdy.mesh @mesh = <[\"x\"=1]>\n", "");
  expect_convert_error(t, KILN_UNIMPLEMENTED, "without an sdy.mesh");
  free(t);
  t = manual_text_with("\"sdy.return\"(%u) : (tensor<4xf32>) -> ()",
                       "stablehlo.return %u : tensor<4xf32>");
  expect_convert_error(t, KILN_INVALID_ARGUMENT, "does not end in sdy.return");
  free(t);
}

/* A region whose block holds no return (a fuzzer's find: the converter read the op before
 * the block's first) is refused, naming the op. */
static void test_region_without_a_return_is_invalid(void **state) {
  (void)state;
  kiln_mlir_module_t *m = parse_or_skip(
      "func.func @main(%a: tensor<1xi32>, %i: tensor<1xi64>, %u: tensor<i32>) -> "
      "tensor<1xi32> {\n"
      "  %r = \"stablehlo.scatter\"(%a, %i, %u) <{scatter_dimension_numbers = "
      "#stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0]>}> ({\n"
      "  ^bb0(%x: tensor<i32>, %y: tensor<i32>):\n"
      "  }) : (tensor<1xi32>, tensor<1xi64>, tensor<i32>) -> tensor<1xi32>\n"
      "  func.return %r : tensor<1xi32>\n}\n");
  if (!m) KILN_SKIP("the MLIR text reader is not built in yet");
  kiln_hlo_module_t *hm = NULL;
  kiln_status s = kiln_stablehlo_to_hlo(m, NULL, &hm);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(
      strstr(kiln_status_message(s), "a region of stablehlo.scatter does not end in a return"));
  kiln_status_free(s);
  kiln_mlir_module_destroy(m);
}

/* #stablehlo.replica_group_mesh_axes: an sdy.mesh symbol with its own device order, an inlined
 * mesh with a sub-axis, and plain axis names; each converts to HLO's mesh form, whose groups
 * are checked id by id. */
static kiln_status convert_mesh_groups(const char *mesh_decl, const char *groups,
                                       kiln_hlo_replica_groups_t *out) {
  char text[2048];
  snprintf(text, sizeof text,
           "module @m attributes {mhlo.num_replicas = 4 : i32} {\n%s\n"
           "func.func @main(%%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
           "  %%r = \"stablehlo.all_reduce\"(%%arg0) ({\n"
           "    ^bb0(%%a: tensor<f32>, %%b: tensor<f32>):\n"
           "      %%s = \"stablehlo.add\"(%%a, %%b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
           "      \"stablehlo.return\"(%%s) : (tensor<f32>) -> ()\n"
           "  }) {replica_groups = %s} : (tensor<4xf32>) -> tensor<4xf32>\n"
           "  return %%r : tensor<4xf32>\n}\n}\n",
           mesh_decl, groups);
  kiln_mlir_module_t *m = parse_or_skip(text);
  if (!m) return KILN_ERR_UNIMPLEMENTED("no text reader");
  kiln_hlo_module_t *hm = NULL;
  kiln_status s = kiln_stablehlo_to_hlo(m, NULL, &hm);
  kiln_mlir_module_destroy(m);
  if (s) return s;
  const char *rg = NULL;
  for (size_t i = 0; i < hm->entry->instructions.len; i++)
    if (hm->entry->instructions.data[i]->opcode == KILN_OP_ALL_REDUCE)
      rg = hm->entry->instructions.data[i]->replica_groups;
  assert_non_null(rg);
  s = kiln_hlo_replica_groups_parse(rg, out);
  kiln_hlo_module_destroy(hm);
  return s;
}

static void expect_mesh_groups(const char *mesh_decl, const char *groups, const int64_t *want,
                               int group_size) {
  kiln_hlo_replica_groups_t g;
  kiln_status s = convert_mesh_groups(mesh_decl, groups, &g);
  if (s) fail_msg("%s: %s", groups, kiln_status_message(s));
  assert_int_equal(g.group_size, group_size);
  assert_int_equal(g.offsets[g.num_groups], 4);
  for (int i = 0; i < 4; i++)
    if (g.ids[i] != want[i])
      fail_msg("%s: id %d is %lld, want %lld", groups, i, (long long)g.ids[i], (long long)want[i]);
  kiln_hlo_replica_groups_free(&g);
}

static void expect_mesh_error(const char *mesh_decl, const char *groups, kiln_status_code_t code,
                              const char *part) {
  kiln_hlo_replica_groups_t g = {0};
  kiln_status s = convert_mesh_groups(mesh_decl, groups, &g);
  if (!s) fail_msg("%s was accepted", groups);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), part))
    fail_msg("%s: '%s' lacks '%s'", groups, kiln_status_message(s), part);
  kiln_status_free(s);
}

static void test_mesh_axes_replica_groups_convert_to_their_groups(void **state) {
  (void)state;
  kiln_mlir_module_t *probe = parse_or_skip("func.func @f() {\n  func.return\n}\n");
  if (!probe) KILN_SKIP("the MLIR text reader is not built in yet");
  kiln_mlir_module_destroy(probe);
  /* positions (x,y) = (0,0) (0,1) (1,0) (1,1) hold devices 3 1 0 2 */
  const char *sdy = "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2], device_ids=[3, 1, 0, 2]>";
  expect_mesh_groups(sdy,
                     "#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = "
                     "[#stablehlo.axis_ref<name = \"y\">]>",
                     (const int64_t[]){3, 1, 0, 2}, 2);
  expect_mesh_groups(sdy, "#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [\"x\"]>",
                     (const int64_t[]){3, 0, 1, 2}, 2);
  expect_mesh_groups("sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>",
                     "#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [\"x\"]>",
                     (const int64_t[]){0, 2, 1, 3}, 2);
  /* an inlined mesh; the sub-axis (1)2 of an axis of 4 groups positions {0,2} and {1,3} */
  expect_mesh_groups("",
                     "#stablehlo.replica_group_mesh_axes<mesh = #stablehlo.mesh<axes = "
                     "[#stablehlo.mesh_axis<name = \"a\", size = 4>]>, axes = "
                     "[#stablehlo.axis_ref<name = \"a\", sub_axis_info = (1)2>]>",
                     (const int64_t[]){0, 2, 1, 3}, 2);
  expect_mesh_groups("",
                     "#stablehlo.replica_group_mesh_axes<mesh = #stablehlo.mesh<axes = "
                     "[#stablehlo.mesh_axis<name = \"a\", size = 4>], device_ids = dense<[2, 0, "
                     "3, 1]> : tensor<4xi64>>, axes = [#stablehlo.axis_ref<name = \"a\", "
                     "sub_axis_info = (1)2>]>",
                     (const int64_t[]){2, 3, 0, 1}, 2);
  expect_mesh_error("", "#stablehlo.replica_group_mesh_axes<mesh = @nowhere, axes = [\"x\"]>",
                    KILN_INVALID_ARGUMENT, "mesh @nowhere is not defined");
  expect_mesh_error("sdy.mesh @mesh = <[], device_ids=[0]>",
                    "#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = []>",
                    KILN_UNIMPLEMENTED, "has no axes (a maximal mesh names one device)");
  expect_mesh_error("sdy.mesh @mesh = <[\"x]'\"=2]>",
                    "#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [\"x\"]>",
                    KILN_INVALID_ARGUMENT, "holds characters other than letters");
  expect_mesh_error("",
                    "#stablehlo.replica_group_mesh_axes<mesh = #stablehlo.mesh<axes = "
                    "[#stablehlo.mesh_axis<name = \"a\", size = 4>], device_ids = dense<[0, 1, "
                    "2]> : tensor<3xi64>>, axes = [\"a\"]>",
                    KILN_INVALID_ARGUMENT, "the mesh has 4 devices, device_ids 3");
  expect_mesh_error(sdy, "#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [\"z\"]>",
                    KILN_INVALID_ARGUMENT, "axis 'z' is not a mesh axis");
  expect_mesh_error("sdy.mesh @mesh = <[\"x\"=2, \"y\"=2], device_ids=[0, 1, 1, 2]>",
                    "#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [\"x\"]>",
                    KILN_INVALID_ARGUMENT, "device_ids must hold each of 0..3 once");
}

/* ---- bytecode and text twins convert to the same HLO ---- */

/* collective_reduce outside run_parallel: an all-reduce kept on each group's root, run on
 * the evaluator's participants. `body` computes %v (tensor<2xi64>) from %i, the participant's
 * id (replica * P + partition) + 1, and holds the op; the module returns %r#0.
 * want[2k], want[2k + 1] are participant k's two elements. */
static void expect_collective_reduce(const char *attrs, const char *body, int R, int P,
                                     const int64_t *want) {
  char text[4096];
  snprintf(text, sizeof text,
           "module @m attributes {%s} {\n"
           "func.func @main() -> tensor<2xi64> {\n"
           "  %%rid = stablehlo.replica_id : tensor<ui32>\n"
           "  %%pid = stablehlo.partition_id : tensor<ui32>\n"
           "  %%r64 = stablehlo.convert %%rid : (tensor<ui32>) -> tensor<i64>\n"
           "  %%p64 = stablehlo.convert %%pid : (tensor<ui32>) -> tensor<i64>\n"
           "  %%np = stablehlo.constant dense<%d> : tensor<i64>\n"
           "  %%one = stablehlo.constant dense<1> : tensor<i64>\n"
           "  %%rp = stablehlo.multiply %%r64, %%np : tensor<i64>\n"
           "  %%k = stablehlo.add %%rp, %%p64 : tensor<i64>\n"
           "  %%i = stablehlo.add %%k, %%one : tensor<i64>\n"
           "  %%ib = stablehlo.broadcast_in_dim %%i, dims = [] : (tensor<i64>) -> tensor<2xi64>\n"
           "  %%ten = stablehlo.constant dense<[1, 10]> : tensor<2xi64>\n"
           "  %%v = stablehlo.multiply %%ib, %%ten : tensor<2xi64>\n"
           "%s"
           "  return %%r#0 : tensor<2xi64>\n}\n}\n",
           attrs, P, body);
  kiln_mlir_module_t *m = parse_or_skip(text);
  if (!m) KILN_SKIP("the MLIR text reader is not built in yet");
  kiln_hlo_module_t *hm = NULL;
  kiln_status s = kiln_stablehlo_to_hlo(m, NULL, &hm);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *out[8] = {0};
  kiln_eval_spmd_options_t o = {.num_replicas = R, .num_partitions = P};
  s = kiln_eval_module_spmd(hm, &o, 0, NULL, &arena, out);
  if (s) fail_msg("%s", kiln_status_message(s));
  for (int k = 0; k < R * P; k++) {
    int64_t got0 = kiln_literal_get_s64(out[k], 0), got1 = kiln_literal_get_s64(out[k], 1);
    if (got0 != want[2 * k] || got1 != want[2 * k + 1])
      fail_msg("participant %d: {%lld, %lld}, want {%lld, %lld}", k, (long long)got0,
               (long long)got1, (long long)want[2 * k], (long long)want[2 * k + 1]);
  }
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(hm);
  kiln_mlir_module_destroy(m);
}

#define REDUCER(op)                             \
  "  ^bb0(%x: tensor<i64>, %y: tensor<i64>):\n" \
  "    %s = stablehlo." op                      \
  " %x, %y : tensor<i64>\n"                     \
  "    stablehlo.return %s : tensor<i64>\n"

static void test_collective_reduce_keeps_the_reduction_on_each_root(void **state) {
  (void)state;
  /* 4 replicas, groups {3,1} {0,2}: roots 3 (1+... = 4+2) and 0 (1+3) */
  expect_collective_reduce(
      "mhlo.num_replicas = 4 : i32",
      "  %r:1 = \"stablehlo.collective_reduce\"(%v) ({\n" REDUCER("add")
      "  }) {replica_groups = dense<[[3, 1], [0, 2]]> : tensor<2x2xi64>} : (tensor<2xi64>) -> "
      "tensor<2xi64>\n",
      4, 1, (const int64_t[]){4, 40, 0, 0, 0, 0, 6, 60});
  /* dynamic roots: index 1 of each group for operand 0 (processes 1 and 2), a product */
  expect_collective_reduce(
      "mhlo.num_replicas = 4 : i32",
      "  %root = stablehlo.constant dense<[1, 0]> : tensor<2xi32>\n"
      "  %r:2 = \"stablehlo.collective_reduce\"(%v, %v, %root) ({\n" REDUCER("multiply")
      "  }) {has_dynamic_root = true, replica_groups = dense<[[3, 1], [0, 2]]> : "
      "tensor<2x2xi64>} : (tensor<2xi64>, tensor<2xi64>, tensor<2xi32>) -> (tensor<2xi64>, "
      "tensor<2xi64>)\n",
      4, 1, (const int64_t[]){0, 0, 8, 800, 3, 300, 0, 0});
  /* channel_id > 0: groups of partitions, one set per replica (2 x 2: participants 0..3 are
   * (r0,p0) (r0,p1) (r1,p0) (r1,p1)); the root is partition 1 */
  expect_collective_reduce(
      "mhlo.num_replicas = 2 : i32, mhlo.num_partitions = 2 : i32",
      "  %r:1 = \"stablehlo.collective_reduce\"(%v) ({\n" REDUCER("add")
      "  }) {replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>, channel_handle = "
      "#stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<2xi64>) -> tensor<2xi64>\n",
      2, 2, (const int64_t[]){0, 0, 3, 30, 0, 0, 7, 70});
}

/* The same three ops under interpreter.run_parallel (the converter's own exchange). */
static const char kCollectiveReduceParallel[] =
    "module @m attributes {} {\n"
    "func.func @dyn(%v: tensor<2xi64>) -> tensor<2xi64> {\n"
    "  %root = stablehlo.constant dense<[1]> : tensor<1xi32>\n"
    "  %r = \"stablehlo.collective_reduce\"(%v, %root) ({\n" REDUCER("multiply")
    "  }) {has_dynamic_root = true, replica_groups = dense<[[3, 1], [0, 2]]> : tensor<2x2xi64>} "
    ": (tensor<2xi64>, tensor<1xi32>) -> tensor<2xi64>\n"
    "  return %r : tensor<2xi64>\n}\n"
    "func.func @part(%v: tensor<2xi64>) -> tensor<2xi64> {\n"
    "  %r = \"stablehlo.collective_reduce\"(%v) ({\n" REDUCER("add")
    "  }) {replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>, channel_handle = "
    "#stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<2xi64>) -> tensor<2xi64>\n"
    "  return %r : tensor<2xi64>\n}\n"
    "func.func @main() {\n"
    "  %a = stablehlo.constant dense<[1, 10]> : tensor<2xi64>\n"
    "  %b = stablehlo.constant dense<[2, 20]> : tensor<2xi64>\n"
    "  %c = stablehlo.constant dense<[3, 30]> : tensor<2xi64>\n"
    "  %d = stablehlo.constant dense<[4, 40]> : tensor<2xi64>\n"
    "  %x:4 = \"interpreter.run_parallel\"(%a, %b, %c, %d) {programs = [[@dyn], [@dyn], "
    "[@dyn], [@dyn]]} : (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> "
    "(tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)\n"
    "  check.expect_eq_const %x#0, dense<[0, 0]> : tensor<2xi64>\n"
    "  check.expect_eq_const %x#1, dense<[8, 800]> : tensor<2xi64>\n"
    "  check.expect_eq_const %x#2, dense<[3, 300]> : tensor<2xi64>\n"
    "  check.expect_eq_const %x#3, dense<[0, 0]> : tensor<2xi64>\n"
    "  %y:4 = \"interpreter.run_parallel\"(%a, %b, %c, %d) {programs = [[@part, @part], "
    "[@part, @part]]} : (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> "
    "(tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)\n"
    "  check.expect_eq_const %y#0, dense<[0, 0]> : tensor<2xi64>\n"
    "  check.expect_eq_const %y#1, dense<[3, 30]> : tensor<2xi64>\n"
    "  check.expect_eq_const %y#2, dense<[0, 0]> : tensor<2xi64>\n"
    "  check.expect_eq_const %y#3, dense<[7, 70]> : tensor<2xi64>\n"
    "  func.return\n}\n}\n";

static void test_collective_reduce_under_run_parallel_with_dynamic_roots_and_partitions(
    void **state) {
  (void)state;
  kiln_mlir_module_t *m = parse_or_skip(kCollectiveReduceParallel);
  if (!m) KILN_SKIP("the MLIR text reader is not built in yet");
  int failed;
  int passed = run_checks(m, "main", &failed);
  assert_int_equal(passed, 8);
  assert_int_equal(failed, 0);
  kiln_mlir_module_destroy(m);
}

#include <dirent.h>

#include "compiler/frontend/mlir_bytecode.h"
#include "tools/common/hlo_file.h"

static char *convert_to_text(const kiln_mlir_module_t *m, const char *fn, kiln_status *st) {
  kiln_hlo_module_t *hm = NULL;
  *st = kiln_stablehlo_to_hlo(m, fn, &hm);
  if (*st) return NULL;
  char *t = kiln_hlo_module_to_string(hm);
  kiln_hlo_module_destroy(hm);
  return t;
}

static void test_vhlo_bytecode_converts_to_the_same_hlo_as_its_text_twin(void **state) {
  (void)state;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/../stablehlo/stablehlo/tests/vhlo", kiln_corpus_dir());
  DIR *d = opendir(dir);
  if (!d) KILN_SKIP("no VHLO material at %s", dir);
  int files = 0, same = 0, neither = 0, differ = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!kiln_str_ends_with(e->d_name, ".mlir.bc") || !strncmp(e->d_name, "invalid", 7)) continue;
    char bc_path[8300], txt_path[8300];
    snprintf(bc_path, sizeof bc_path, "%s/%s", dir, e->d_name);
    snprintf(txt_path, sizeof txt_path, "%s", bc_path);
    txt_path[strlen(txt_path) - 3] = 0;
    char *bc = NULL, *txt = NULL;
    size_t bn = 0, tn = 0;
    assert_null(kiln_read_file(bc_path, &bc, &bn));
    assert_null(kiln_read_file(txt_path, &txt, &tn));
    kiln_mlir_module_t *mb = NULL, *mt = NULL;
    assert_null(kiln_mlir_read_bytecode(bc, bn, &mb));
    kiln_status ps = kiln_mlir_parse_text(txt, tn, txt_path, &mt);
    if (ps) fprintf(stderr, "%s\n", kiln_status_message(ps));
    assert_null(ps);
    files++;
    for (int32_t i = 0; i < mt->body.num_ops; i++) {
      const kiln_mlir_op_t *f = mt->body.ops[i];
      const kiln_mlir_attr_t *nm = kiln_mlir_op_attr(f, "sym_name");
      if (strcmp(f->name, "func.func") != 0 || !nm || !nm->str) continue;
      kiln_status sb, stx;
      char *hb = convert_to_text(mb, nm->str, &sb), *ht = convert_to_text(mt, nm->str, &stx);
      if (!sb && !stx && !strcmp(hb, ht)) {
        same++;
      } else if (sb && stx && kiln_status_code(sb) == kiln_status_code(stx)) {
        neither++;
      } else {
        differ++;
        printf("differ: %s @%s: bytecode %s, text %s\n", e->d_name, nm->str,
               sb ? kiln_status_message(sb) : "converts",
               stx ? kiln_status_message(stx) : "converts");
        if (hb && ht) {
          size_t k = 0;
          while (hb[k] && hb[k] == ht[k]) k++;
          while (k > 0 && hb[k - 1] != '\n') k--;
          printf("  bytecode: %.120s\n  text:     %.120s\n", hb + k, ht + k);
        }
      }
      kiln_status_free(sb);
      kiln_status_free(stx);
      kiln_free(hb);
      kiln_free(ht);
    }
    kiln_mlir_module_destroy(mb);
    kiln_mlir_module_destroy(mt);
    kiln_free(bc);
    kiln_free(txt);
  }
  closedir(d);
  printf(
      "vhlo: %d file pairs: %d functions convert to the same HLO, %d convert from neither "
      "(the same error), %d differ\n",
      files, same, neither, differ);
  assert_true(files > 0);
  assert_true(same > 0);
  assert_int_equal(differ, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_of_constants_passes_its_check_and_a_wrong_expectation_fails),
      cmocka_unit_test(test_entry_converts_with_parameters_aliasing_and_one_result),
      cmocka_unit_test(test_unknown_op_and_dynamic_shape_are_unimplemented_naming_them),
      cmocka_unit_test(test_while_and_case_with_captured_values_from_text),
      cmocka_unit_test(test_shardy_mesh_and_sharding_hints_from_text),
      cmocka_unit_test(test_shard_map_on_a_one_device_mesh_is_its_body),
      cmocka_unit_test(test_shard_map_over_several_devices_is_refused),
      cmocka_unit_test(test_region_without_a_return_is_invalid),
      cmocka_unit_test(test_mesh_axes_replica_groups_convert_to_their_groups),
      cmocka_unit_test(test_collective_reduce_keeps_the_reduction_on_each_root),
      cmocka_unit_test(test_collective_reduce_under_run_parallel_with_dynamic_roots_and_partitions),
      cmocka_unit_test(test_vhlo_bytecode_converts_to_the_same_hlo_as_its_text_twin),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
