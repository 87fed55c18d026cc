/* HLO printer: modules built by hand with ir.c's helpers print exact canonical text
 * (module header, signatures, instruction lines, every decoded attribute's format and
 * the fixed attribute order). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/hlo/ir.h"

typedef struct {
  kiln_hlo_module_t *m;
  kiln_hlo_computation_t *c;
  kiln_strbuf_t buf;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  f->m = kiln_hlo_module_create("test_module");
  f->c = kiln_hlo_computation_create(f->m, "entry");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  kiln_hlo_module_destroy(f->m);
  kiln_strbuf_free(&f->buf);
  free(f);
  return 0;
}

static kiln_arena_t *arena(fixture_t *f) { return &f->m->arena; }

/* f32[dims...] with the default layout. */
static kiln_shape_t *arr(fixture_t *f, kiln_elem_type_t t, int rank, const int64_t *dims) {
  return kiln_shape_make_array_with_default_layout(arena(f), t, rank, dims);
}

static kiln_shape_t *vec(fixture_t *f, kiln_elem_type_t t, int64_t n) { return arr(f, t, 1, &n); }

static kiln_shape_t *scalar(fixture_t *f, kiln_elem_type_t t) {
  return kiln_shape_make_scalar(arena(f), t);
}

static kiln_hlo_instruction_t *param(fixture_t *f, kiln_hlo_computation_t *c, int64_t n,
                                     kiln_shape_t *s, const char *name) {
  kiln_hlo_instruction_t *p = kiln_hlo_instruction_create(c, KILN_OP_PARAMETER, s, name);
  p->parameter_number = n;
  kiln_hlo_instruction_t **params =
      kiln_arena_realloc(arena(f), c->parameters, sizeof(*params) * (size_t)c->num_parameters,
                         sizeof(*params) * (size_t)(n + 1 > c->num_parameters ? n + 1 : c->num_parameters));
  if (n + 1 > c->num_parameters) c->num_parameters = (int)n + 1;
  params[n] = p;
  c->parameters = params;
  return p;
}

static kiln_hlo_instruction_t *op(fixture_t *f, kiln_hlo_opcode_t code, kiln_shape_t *s,
                                  const char *name, int n, kiln_hlo_instruction_t *a,
                                  kiln_hlo_instruction_t *b) {
  kiln_hlo_instruction_t *i = kiln_hlo_instruction_create(f->c, code, s, name);
  kiln_hlo_instruction_t *ops[2] = {a, b};
  kiln_hlo_instruction_set_operands(i, n, ops);
  return i;
}

static kiln_i64_list_t list(fixture_t *f, int n, const int64_t *v) {
  kiln_i64_list_t l = {n, kiln_arena_alloc(arena(f), sizeof(int64_t) * (size_t)(n ? n : 1))};
  memcpy(l.v, v, sizeof(int64_t) * (size_t)n);
  return l;
}

static const char *line(fixture_t *f, const kiln_hlo_instruction_t *i) {
  kiln_strbuf_free(&f->buf);
  kiln_hlo_instruction_print(&f->buf, i);
  return kiln_strbuf_cstr(&f->buf);
}

static void test_module_prints_header_signature_and_computations(void **state) {
  fixture_t *f = *state;
  kiln_hlo_module_t *m = f->m;
  /* a reducer first, then the entry */
  kiln_hlo_computation_t *add = kiln_hlo_computation_create(m, "add");
  kiln_hlo_computation_t *entry = f->c;
  /* move the entry after the reducer in module order */
  m->computations.data[0] = add;
  m->computations.data[1] = entry;
  kiln_hlo_instruction_t *x = param(f, add, 0, scalar(f, KILN_F32), "x");
  kiln_hlo_instruction_t *y = param(f, add, 1, scalar(f, KILN_F32), "y");
  kiln_hlo_instruction_t *sum = kiln_hlo_instruction_create(add, KILN_OP_ADD, scalar(f, KILN_F32), "sum");
  kiln_hlo_instruction_t *xy[2] = {x, y};
  kiln_hlo_instruction_set_operands(sum, 2, xy);
  add->root = sum;

  entry->is_entry = true;
  m->entry = entry;
  int64_t d[2] = {2, 3};
  kiln_hlo_instruction_t *p0 = param(f, entry, 0, arr(f, KILN_F32, 2, d), "p0");
  kiln_hlo_instruction_t *zero = op(f, KILN_OP_CONSTANT, scalar(f, KILN_F32), "zero", 0, NULL, NULL);
  zero->literal = kiln_literal_make(arena(f), zero->shape);
  kiln_hlo_instruction_t *red = op(f, KILN_OP_REDUCE, vec(f, KILN_F32, 2), "red", 2, p0, zero);
  int64_t one = 1;
  red->has_dimensions = true;
  red->dimensions = list(f, 1, &one);
  kiln_hlo_instruction_add_called(red, "to_apply", false, 1, &add);
  entry->root = red;

  m->has_entry_layout = true;
  m->num_entry_layout_params = 1;
  m->entry_layout_params = kiln_arena_alloc(arena(f), sizeof(kiln_shape_t *));
  m->entry_layout_params[0] = p0->shape;
  m->entry_layout_result = red->shape;
  m->num_io_aliases = 2;
  m->io_aliases = kiln_arena_alloc(arena(f), 2 * sizeof(kiln_io_alias_t));
  int64_t zero_idx = 0;
  m->io_aliases[0].output_index = list(f, 1, &zero_idx);
  m->io_aliases[0].param_number = 0;
  m->io_aliases[0].kind = "may-alias";
  m->io_aliases[1].param_number = 3;
  m->io_aliases[1].param_index = list(f, 1, &one);
  m->num_raw_attrs = 1;
  m->raw_attrs = kiln_arena_alloc(arena(f), sizeof(kiln_raw_attr_t));
  m->raw_attrs[0].key = "is_scheduled";
  m->raw_attrs[0].value = "true";

  char *text = kiln_hlo_module_to_string(m);
  assert_string_equal(
      text,
      "HloModule test_module, entry_computation_layout={(f32[2,3]{1,0})->f32[2]{0}}, "
      "input_output_alias={ {0}: (0, {}, may-alias), {}: (3, {1}) }, is_scheduled=true\n"
      "\n"
      "add (x: f32[], y: f32[]) -> f32[] {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  ROOT sum = f32[] add(x, y)\n"
      "}\n"
      "\n"
      "ENTRY entry (p0: f32[2,3]{1,0}) -> f32[2]{0} {\n"
      "  p0 = f32[2,3]{1,0} parameter(0)\n"
      "  zero = f32[] constant(0)\n"
      "  ROOT red = f32[2]{0} reduce(p0, zero), dimensions={1}, to_apply=add\n"
      "}\n");
  kiln_free(text);
}

static void test_computation_trailing_attrs_follow_the_brace(void **state) {
  fixture_t *f = *state;
  kiln_hlo_instruction_t *t = op(f, KILN_OP_AFTER_ALL, kiln_shape_make_token(arena(f)), "t", 0, NULL, NULL);
  f->c->root = t;
  f->c->trailing_attrs = "execution_thread=\"x\"";
  kiln_hlo_computation_print(&f->buf, f->c);
  assert_string_equal(kiln_strbuf_cstr(&f->buf),
                      "entry () -> token[] {\n"
                      "  ROOT t = token[] after-all()\n"
                      "}, execution_thread=\"x\"\n");
}

static void test_special_operand_forms(void **state) {
  fixture_t *f = *state;
  kiln_shape_t *e[2] = {vec(f, KILN_S32, 4), scalar(f, KILN_PRED)};
  kiln_hlo_instruction_t *p = param(f, f->c, 0, kiln_shape_make_tuple(arena(f), 2, e), "p");
  assert_string_equal(line(f, p), "p = (s32[4]{0}, pred[]) parameter(0)");
  kiln_hlo_instruction_t *g = op(f, KILN_OP_GET_TUPLE_ELEMENT, e[1], "g", 1, p, NULL);
  g->tuple_index = 1;
  assert_string_equal(line(f, g), "g = pred[] get-tuple-element(p), index=1");
  kiln_hlo_instruction_t *io = op(f, KILN_OP_IOTA, vec(f, KILN_S32, 4), "io", 0, NULL, NULL);
  assert_string_equal(line(f, io), "io = s32[4]{0} iota(), iota_dimension=0");
  int64_t d[2] = {2, 2};
  kiln_hlo_instruction_t *c = op(f, KILN_OP_CONSTANT, arr(f, KILN_F32, 2, d), "c", 0, NULL, NULL);
  c->literal = kiln_literal_make(arena(f), c->shape);
  for (int i = 0; i < 4; i++) kiln_literal_set_f64(c->literal, i, i * 0.5);
  assert_string_equal(line(f, c), "c = f32[2,2]{1,0} constant({ {0, 0.5}, {1, 1.5} })");
  c->literal->unknown = true;
  assert_string_equal(line(f, c), "c = f32[2,2]{1,0} constant({...})");
  f->c->root = g;
  assert_string_equal(line(f, g), "ROOT g = pred[] get-tuple-element(p), index=1");
}

static void test_slice_padding_and_dynamic_slice_formats(void **state) {
  fixture_t *f = *state;
  kiln_hlo_instruction_t *p = param(f, f->c, 0, vec(f, KILN_F32, 10), "p");
  kiln_hlo_instruction_t *s = op(f, KILN_OP_SLICE, vec(f, KILN_F32, 4), "s", 1, p, NULL);
  s->num_slice_dims = 2;
  s->slice = kiln_arena_alloc(arena(f), 2 * sizeof(kiln_slice_dim_t));
  s->slice[0] = (kiln_slice_dim_t){0, 2, 1};
  s->slice[1] = (kiln_slice_dim_t){1, 9, 2};
  assert_string_equal(line(f, s), "s = f32[4]{0} slice(p), slice={[0:2], [1:9:2]}");

  kiln_hlo_instruction_t *z = param(f, f->c, 1, scalar(f, KILN_F32), "z");
  kiln_hlo_instruction_t *pad = op(f, KILN_OP_PAD, vec(f, KILN_F32, 13), "pad", 2, p, z);
  pad->num_pad_dims = 2;
  pad->padding = kiln_arena_alloc(arena(f), 2 * sizeof(kiln_pad_dim_t));
  pad->padding[0] = (kiln_pad_dim_t){0, 0, 0};
  pad->padding[1] = (kiln_pad_dim_t){1, -2, 0};
  assert_string_equal(line(f, pad), "pad = f32[13]{0} pad(p, z), padding=0_0x1_-2");
  pad->padding[0].interior = 1;
  assert_string_equal(line(f, pad), "pad = f32[13]{0} pad(p, z), padding=0_0_1x1_-2_0");

  kiln_hlo_instruction_t *i = param(f, f->c, 2, scalar(f, KILN_S32), "i");
  kiln_hlo_instruction_t *ds = op(f, KILN_OP_DYNAMIC_SLICE, vec(f, KILN_F32, 3), "ds", 2, p, i);
  int64_t three = 3;
  ds->dynamic_slice_sizes = list(f, 1, &three);
  assert_string_equal(line(f, ds), "ds = f32[3]{0} dynamic-slice(p, i), dynamic_slice_sizes={3}");
}

static void test_convolution_window_and_dim_labels(void **state) {
  fixture_t *f = *state;
  int64_t in_dims[4] = {1, 8, 8, 3}, k_dims[4] = {3, 3, 3, 16}, out_dims[4] = {1, 4, 4, 16};
  kiln_hlo_instruction_t *x = param(f, f->c, 0, arr(f, KILN_F32, 4, in_dims), "x");
  kiln_hlo_instruction_t *k = param(f, f->c, 1, arr(f, KILN_F32, 4, k_dims), "k");
  kiln_hlo_instruction_t *cv = op(f, KILN_OP_CONVOLUTION, arr(f, KILN_F32, 4, out_dims), "cv", 2, x, k);
  cv->num_window_dims = 2;
  cv->window = kiln_arena_alloc(arena(f), 2 * sizeof(kiln_window_dim_t));
  cv->window[0] = (kiln_window_dim_t){3, 1, 0, 0, 1, 1, false};
  cv->window[1] = (kiln_window_dim_t){3, 1, 0, 0, 1, 1, false};
  cv->has_conv_dnums = true;
  kiln_conv_dnums_t *d = &cv->conv_dnums;
  static int64_t in_sp[2] = {1, 2}, k_sp[2] = {0, 1}, out_sp[2] = {1, 2};
  d->input_batch = 0, d->input_feature = 3, d->num_spatial = 2, d->input_spatial = in_sp;
  d->kernel_input_feature = 2, d->kernel_output_feature = 3, d->kernel_spatial = k_sp;
  d->output_batch = 0, d->output_feature = 3, d->output_spatial = out_sp;
  assert_string_equal(line(f, cv),
                      "cv = f32[1,4,4,16]{3,2,1,0} convolution(x, k), window={size=3x3}, "
                      "dim_labels=b01f_01io->b01f");
  /* non-default window fields all print, in order, for every dimension */
  cv->window[0] = (kiln_window_dim_t){3, 2, 0, 1, 1, 2, false};
  cv->window[1] = (kiln_window_dim_t){3, 2, 0, 1, 2, 1, true};
  cv->feature_group_count = 1;
  cv->batch_group_count = 2;
  /* spatial dims swapped in the kernel: 10io */
  k_sp[0] = 1, k_sp[1] = 0;
  assert_string_equal(line(f, cv),
                      "cv = f32[1,4,4,16]{3,2,1,0} convolution(x, k), window={size=3x3 stride=2x2 "
                      "pad=0_1x0_1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}, "
                      "dim_labels=b01f_10io->b01f, feature_group_count=1, batch_group_count=2");
  /* NCHW / OIHW */
  d->input_batch = 0, d->input_feature = 1, in_sp[0] = 2, in_sp[1] = 3;
  d->kernel_output_feature = 0, d->kernel_input_feature = 1, k_sp[0] = 2, k_sp[1] = 3;
  d->output_batch = 0, d->output_feature = 1, out_sp[0] = 2, out_sp[1] = 3;
  cv->num_window_dims = 0, cv->feature_group_count = 0, cv->batch_group_count = 0;
  assert_string_equal(line(f, cv),
                      "cv = f32[1,4,4,16]{3,2,1,0} convolution(x, k), dim_labels=bf01_oi01->bf01");
}

static void test_dot_dimension_numbers_and_precision(void **state) {
  fixture_t *f = *state;
  int64_t d[3] = {4, 2, 3};
  kiln_hlo_instruction_t *a = param(f, f->c, 0, arr(f, KILN_F32, 3, d), "a");
  kiln_hlo_instruction_t *dot = op(f, KILN_OP_DOT, arr(f, KILN_F32, 3, d), "dot", 2, a, a);
  int64_t zero = 0, two = 2;
  dot->has_dot_dnums = true;
  dot->dot_dnums.lhs_batch = list(f, 1, &zero);
  dot->dot_dnums.rhs_batch = list(f, 1, &zero);
  dot->dot_dnums.lhs_contracting = list(f, 1, &two);
  dot->dot_dnums.rhs_contracting = list(f, 1, &two);
  dot->num_operand_precision = 2;
  static char *prec[2] = {"default", "highest"};
  dot->operand_precision = prec;
  assert_string_equal(line(f, dot),
                      "dot = f32[4,2,3]{2,1,0} dot(a, a), lhs_batch_dims={0}, "
                      "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}, "
                      "operand_precision={default,highest}");
  dot->dot_dnums.lhs_batch.n = dot->dot_dnums.rhs_batch.n = 0;
  dot->num_operand_precision = 0;
  assert_string_equal(line(f, dot),
                      "dot = f32[4,2,3]{2,1,0} dot(a, a), lhs_contracting_dims={2}, "
                      "rhs_contracting_dims={2}");
}

static void test_gather_and_scatter_dimension_numbers(void **state) {
  fixture_t *f = *state;
  int64_t od[2] = {3, 4}, id[2] = {5, 1};
  kiln_hlo_instruction_t *x = param(f, f->c, 0, arr(f, KILN_F32, 2, od), "x");
  kiln_hlo_instruction_t *i = param(f, f->c, 1, arr(f, KILN_S32, 2, id), "i");
  kiln_hlo_instruction_t *g = op(f, KILN_OP_GATHER, arr(f, KILN_F32, 2, (int64_t[]){5, 4}), "g", 2, x, i);
  int64_t one = 1, zero = 0;
  int64_t ss[2] = {1, 4};
  g->has_gather_dnums = true;
  g->gather_dnums.offset_dims = list(f, 1, &one);
  g->gather_dnums.collapsed_slice_dims = list(f, 1, &zero);
  g->gather_dnums.start_index_map = list(f, 1, &zero);
  g->gather_dnums.index_vector_dim = 1;
  g->gather_slice_sizes = list(f, 2, ss);
  g->indices_are_sorted = true;
  assert_string_equal(line(f, g),
                      "g = f32[5,4]{1,0} gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, "
                      "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, "
                      "indices_are_sorted=true");
  g->gather_dnums.operand_batching_dims = list(f, 1, &one);
  g->gather_dnums.start_indices_batching_dims = list(f, 1, &zero);
  g->indices_are_sorted = false;
  assert_string_equal(line(f, g),
                      "g = f32[5,4]{1,0} gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, "
                      "start_index_map={0}, operand_batching_dims={1}, "
                      "start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,4}");

  kiln_hlo_computation_t *upd = kiln_hlo_computation_create(f->m, "upd");
  kiln_hlo_instruction_t *sc = kiln_hlo_instruction_create(f->c, KILN_OP_SCATTER, x->shape, "sc");
  kiln_hlo_instruction_t *ops[3] = {x, i, g};
  kiln_hlo_instruction_set_operands(sc, 3, ops);
  sc->has_scatter_dnums = true;
  sc->scatter_dnums.update_window_dims = list(f, 1, &one);
  sc->scatter_dnums.inserted_window_dims = list(f, 1, &zero);
  sc->scatter_dnums.scatter_dims_to_operand_dims = list(f, 1, &zero);
  sc->scatter_dnums.index_vector_dim = 1;
  sc->unique_indices = true;
  kiln_hlo_instruction_add_called(sc, "to_apply", false, 1, &upd);
  assert_string_equal(line(f, sc),
                      "sc = f32[3,4]{1,0} scatter(x, i, g), update_window_dims={1}, "
                      "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                      "index_vector_dim=1, unique_indices=true, to_apply=upd");
}

static void test_compare_fusion_and_called_computation_groups(void **state) {
  fixture_t *f = *state;
  kiln_hlo_instruction_t *a = param(f, f->c, 0, vec(f, KILN_F32, 2), "a");
  kiln_hlo_instruction_t *cmp = op(f, KILN_OP_COMPARE, vec(f, KILN_PRED, 2), "cmp", 2, a, a);
  cmp->comparison_direction = KILN_CMP_LT;
  assert_string_equal(line(f, cmp), "cmp = pred[2]{0} compare(a, a), direction=LT");
  cmp->comparison_type = KILN_CMP_TYPE_TOTALORDER;
  assert_string_equal(line(f, cmp), "cmp = pred[2]{0} compare(a, a), direction=LT, type=TOTALORDER");

  kiln_hlo_computation_t *fc = kiln_hlo_computation_create(f->m, "fused_computation");
  kiln_hlo_instruction_t *fu = op(f, KILN_OP_FUSION, vec(f, KILN_F32, 2), "fu", 1, a, NULL);
  fu->fusion_kind = KILN_HLO_FUSION_LOOP;
  kiln_hlo_instruction_add_called(fu, "calls", false, 1, &fc);
  assert_string_equal(line(f, fu), "fu = f32[2]{0} fusion(a), kind=kLoop, calls=fused_computation");
  fu->fusion_kind = KILN_HLO_FUSION_NONE;
  fu->fusion_kind_text = "kSomethingNew";
  assert_string_equal(line(f, fu),
                      "fu = f32[2]{0} fusion(a), kind=kSomethingNew, calls=fused_computation");

  kiln_hlo_computation_t *b0 = kiln_hlo_computation_create(f->m, "b0");
  kiln_hlo_computation_t *b1 = kiln_hlo_computation_create(f->m, "b1");
  kiln_hlo_instruction_t *idx = param(f, f->c, 1, scalar(f, KILN_S32), "idx");
  kiln_hlo_instruction_t *cond = kiln_hlo_instruction_create(f->c, KILN_OP_CONDITIONAL, a->shape, "cond");
  kiln_hlo_instruction_t *ops[3] = {idx, a, a};
  kiln_hlo_instruction_set_operands(cond, 3, ops);
  kiln_hlo_computation_t *branches[2] = {b0, b1};
  kiln_hlo_instruction_add_called(cond, "branch_computations", true, 2, branches);
  assert_string_equal(line(f, cond),
                      "cond = f32[2]{0} conditional(idx, a, a), branch_computations={b0, b1}");

  kiln_hlo_instruction_t *w = op(f, KILN_OP_WHILE, a->shape, "w", 1, a, NULL);
  kiln_hlo_instruction_add_called(w, "condition", false, 1, &b0);
  kiln_hlo_instruction_add_called(w, "body", false, 1, &b1);
  assert_string_equal(line(f, w), "w = f32[2]{0} while(a), condition=b0, body=b1");
}

static void test_custom_call_escapes_target_and_string_backend_config(void **state) {
  fixture_t *f = *state;
  kiln_hlo_instruction_t *a = param(f, f->c, 0, vec(f, KILN_F32, 2), "a");
  kiln_hlo_instruction_t *cc = op(f, KILN_OP_CUSTOM_CALL, vec(f, KILN_F32, 2), "cc", 1, a, NULL);
  cc->custom_call_target = "__cublas$gemm\"q\\";
  cc->api_version_text = "API_VERSION_TYPED_FFI";
  cc->backend_config_form = KILN_BACKEND_CONFIG_STRING;
  cc->backend_config = "say \"hi\"\\\n\tend\x01";
  kiln_hlo_instruction_set_raw_attr(cc, "metadata", "{op_name=\"x\"}");
  kiln_hlo_instruction_set_raw_attr(cc, "custom_call_has_side_effect", "true");
  assert_string_equal(line(f, cc),
                      "cc = f32[2]{0} custom-call(a), custom_call_target=\"__cublas$gemm\\\"q\\\\\", "
                      "api_version=API_VERSION_TYPED_FFI, "
                      "backend_config=\"say \\\"hi\\\"\\\\\\n\\tend\\001\", "
                      "metadata={op_name=\"x\"}, custom_call_has_side_effect=true");
  cc->backend_config_form = KILN_BACKEND_CONFIG_JSON;
  cc->backend_config = "{\"alpha\":1}";
  cc->api_version_text = NULL;
  cc->api_version = 2;
  assert_string_equal(line(f, cc),
                      "cc = f32[2]{0} custom-call(a), custom_call_target=\"__cublas$gemm\\\"q\\\\\", "
                      "api_version=API_VERSION_STATUS_RETURNING, backend_config={\"alpha\":1}, "
                      "metadata={op_name=\"x\"}, custom_call_has_side_effect=true");
  cc->backend_config_form = KILN_BACKEND_CONFIG_RAW;
  cc->backend_config = "\\x01\\x02";
  cc->api_version = 0;
  cc->num_raw_attrs = 0;
  assert_string_equal(line(f, cc),
                      "cc = f32[2]{0} custom-call(a), custom_call_target=\"__cublas$gemm\\\"q\\\\\", "
                      "backend_config=\\x01\\x02");
}

static void test_collective_and_control_predecessor_attrs(void **state) {
  fixture_t *f = *state;
  kiln_hlo_computation_t *sum = kiln_hlo_computation_create(f->m, "sum");
  kiln_hlo_instruction_t *a = param(f, f->c, 0, vec(f, KILN_F32, 8), "a");
  kiln_hlo_instruction_t *n = op(f, KILN_OP_NEGATE, a->shape, "n", 1, a, NULL);
  kiln_hlo_instruction_t *ar = op(f, KILN_OP_ALL_REDUCE, a->shape, "ar", 1, a, NULL);
  kiln_hlo_instruction_add_called(ar, "to_apply", false, 1, &sum);
  ar->channel_id = 5;
  ar->replica_groups = "{{0,1},{2,3}}";
  ar->use_global_device_ids = true;
  ar->constrain_layout = true;
  ar->num_control_predecessors = 2;
  ar->control_predecessors = kiln_arena_alloc(arena(f), 2 * sizeof(void *));
  ar->control_predecessors[0] = n;
  ar->control_predecessors[1] = a;
  kiln_hlo_instruction_set_raw_attr(ar, "sharding", "{replicated}");
  assert_string_equal(line(f, ar),
                      "ar = f32[8]{0} all-reduce(a), to_apply=sum, channel_id=5, "
                      "replica_groups={{0,1},{2,3}}, use_global_device_ids=true, "
                      "constrain_layout=true, control-predecessors={n, a}, sharding={replicated}");
}

static void test_misc_op_attributes(void **state) {
  fixture_t *f = *state;
  int64_t d[2] = {4, 4};
  kiln_hlo_instruction_t *a = param(f, f->c, 0, arr(f, KILN_F32, 2, d), "a");
  kiln_hlo_instruction_t *ts = op(f, KILN_OP_TRIANGULAR_SOLVE, a->shape, "ts", 2, a, a);
  ts->left_side = true;
  ts->lower = true;
  ts->unit_diagonal = true;
  ts->transpose_a = "NO_TRANSPOSE";
  assert_string_equal(line(f, ts),
                      "ts = f32[4,4]{1,0} triangular-solve(a, a), left_side=true, lower=true, "
                      "unit_diagonal=true, transpose_a=NO_TRANSPOSE");
  kiln_hlo_instruction_t *ch = op(f, KILN_OP_CHOLESKY, a->shape, "ch", 1, a, NULL);
  ch->has_lower = true;
  assert_string_equal(line(f, ch), "ch = f32[4,4]{1,0} cholesky(a), lower=false");

  kiln_hlo_instruction_t *rp = op(f, KILN_OP_REDUCE_PRECISION, a->shape, "rp", 1, a, NULL);
  rp->exponent_bits = 5, rp->mantissa_bits = 10;
  assert_string_equal(line(f, rp),
                      "rp = f32[4,4]{1,0} reduce-precision(a), exponent_bits=5, mantissa_bits=10");

  kiln_hlo_instruction_t *ff = op(f, KILN_OP_FFT, arr(f, KILN_C64, 2, d), "ff", 1, a, NULL);
  ff->fft_type = "RFFT";
  int64_t len[2] = {8, 4};
  ff->fft_length = list(f, 2, len);
  assert_string_equal(line(f, ff), "ff = c64[4,4]{1,0} fft(a), fft_type=RFFT, fft_length={8,4}");

  kiln_hlo_instruction_t *lo = param(f, f->c, 1, scalar(f, KILN_F32), "lo");
  kiln_hlo_instruction_t *rng = op(f, KILN_OP_RNG, a->shape, "rng", 2, lo, lo);
  rng->rng_distribution = "rng_uniform";
  assert_string_equal(line(f, rng), "rng = f32[4,4]{1,0} rng(lo, lo), distribution=rng_uniform");
  kiln_hlo_instruction_t *rbg = op(f, KILN_OP_RNG_BIT_GENERATOR, a->shape, "rbg", 1, a, NULL);
  rbg->rng_algorithm = "rng_three_fry";
  assert_string_equal(line(f, rbg), "rbg = f32[4,4]{1,0} rng-bit-generator(a), algorithm=rng_three_fry");

  kiln_shape_t *e[2] = {arr(f, KILN_F32, 2, (int64_t[]){4, 2}), arr(f, KILN_S32, 2, (int64_t[]){4, 2})};
  kiln_hlo_instruction_t *tk = op(f, KILN_OP_TOPK, kiln_shape_make_tuple(arena(f), 2, e), "tk", 1, a, NULL);
  tk->k = 2;
  tk->largest = true;
  assert_string_equal(line(f, tk), "tk = (f32[4,2]{1,0}, s32[4,2]{1,0}) topk(a), k=2, largest=true");

  kiln_hlo_computation_t *cmp = kiln_hlo_computation_create(f->m, "cmp");
  kiln_hlo_instruction_t *so = op(f, KILN_OP_SORT, a->shape, "so", 1, a, NULL);
  int64_t one = 1;
  so->has_dimensions = true;
  so->dimensions = list(f, 1, &one);
  so->is_stable = true;
  kiln_hlo_instruction_add_called(so, "to_apply", false, 1, &cmp);
  assert_string_equal(line(f, so),
                      "so = f32[4,4]{1,0} sort(a), dimensions={1}, to_apply=cmp, is_stable=true");
}

static void test_reduce_window_prints_window_before_called_computation(void **state) {
  fixture_t *f = *state;
  kiln_hlo_computation_t *add = kiln_hlo_computation_create(f->m, "add");
  kiln_hlo_instruction_t *a = param(f, f->c, 0, vec(f, KILN_F32, 8), "a");
  kiln_hlo_instruction_t *z = param(f, f->c, 1, scalar(f, KILN_F32), "z");
  kiln_hlo_instruction_t *rw = op(f, KILN_OP_REDUCE_WINDOW, vec(f, KILN_F32, 4), "rw", 2, a, z);
  rw->num_window_dims = 1;
  rw->window = kiln_arena_alloc(arena(f), sizeof(kiln_window_dim_t));
  rw->window[0] = (kiln_window_dim_t){2, 2, -1, 1, 1, 1, false};
  kiln_hlo_instruction_add_called(rw, "to_apply", false, 1, &add);
  assert_string_equal(line(f, rw),
                      "rw = f32[4]{0} reduce-window(a, z), window={size=2 stride=2 pad=-1_1}, "
                      "to_apply=add");
}

/* Canonical text using every attribute form the printer emits is a fixed point of
 * parse + print (checks that the parser reads back everything printed). */
static const char kCanonical[] =
    "HloModule rt, entry_computation_layout={(f32[8]{0}, s32[])->f32[8]{0}}, input_output_alias={ {0}: (0, {}, may-alias), {}: (1, {1}) }, is_scheduled=true\n"
    "\n"
    "add (x: f32[], y: f32[]) -> f32[] {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT sum = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "fused (fp: f32[8]{0}) -> f32[8]{0} {\n"
    "  fp = f32[8]{0} parameter(0)\n"
    "  ROOT fn = f32[8]{0} negate(fp)\n"
    "}\n"
    "\n"
    "ENTRY main (a: f32[8]{0}, i: s32[]) -> f32[8]{0} {\n"
    "  a = f32[8]{0} parameter(0)\n"
    "  i = s32[] parameter(1)\n"
    "  z = f32[] constant(0)\n"
    "  c4 = f32[2,2]{1,0} constant({ {0, 0.5}, {-inf, nan} })\n"
    "  e = f32[0]{0} constant({})\n"
    "  t = (f32[], s32[]) constant(( 1.5, -7 ))\n"
    "  bf = bf16[3]{0} constant({0.100097656, 1.00025555e+30, -0})\n"
    "  f8 = f8e4m3fn[2]{0} constant({448, -nan})\n"
    "  f4 = f4e2m1fn[2]{0} constant({6, -0.5})\n"
    "  cc = c64[1]{0} constant({(1.5, -2)})\n"
    "  p = pred[2]{0} constant({true, false})\n"
    "  u = u64[1]{0} constant({18446744073709551615})\n"
    "  s = f32[4]{0} slice(a), slice={[0:8:2]}\n"
    "  pd = f32[13]{0} pad(a, z), padding=1_-2_1\n"
    "  ds = f32[3]{0} dynamic-slice(a, i), dynamic_slice_sizes={3}\n"
    "  rw = f32[4]{0} reduce-window(a, z), window={size=2 stride=2 pad=-1_1 lhs_dilate=2 rhs_dilate=3 rhs_reversal=1}, to_apply=add\n"
    "  cmp = pred[8]{0} compare(a, a), direction=LT, type=TOTALORDER\n"
    "  fu = f32[8]{0} fusion(a), kind=kLoop, calls=fused\n"
    "  fx = f32[8]{0} fusion(a), kind=kWeird, calls=fused\n"
    "  ccall = f32[8]{0} custom-call(a), custom_call_target=\"tgt\\\"q\\\\\", api_version=API_VERSION_TYPED_FFI, backend_config=\"say \\\"hi\\\"\\\\\\n\\tend\\001\"\n"
    "  cj = f32[8]{0} custom-call(a), custom_call_target=\"j\", backend_config={\"alpha\":1}, custom_call_has_side_effect=true\n"
    "  ar = f32[8]{0} all-reduce(a), to_apply=add, channel_id=5, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, constrain_layout=true, control-predecessors={cmp, fu}, sharding={replicated}\n"
    "  rp = f32[8]{0} reduce-precision(a), exponent_bits=5, mantissa_bits=10\n"
    "  so = f32[8]{0} sort(a), dimensions={0}, to_apply=cmpc, is_stable=true\n"
    "  ROOT out = f32[8]{0} add(a, rp), metadata={op_name=\"x\\\"y\"}\n"
    "}\n"
    "\n"
    "cmpc (l: f32[], r: f32[]) -> pred[] {\n"
    "  l = f32[] parameter(0)\n"
    "  r = f32[] parameter(1)\n"
    "  ROOT lt = pred[] compare(l, r), direction=LT\n"
    "}\n";

static void test_canonical_text_is_a_fixed_point_of_parse_and_print(void **state) {
  (void)state;
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t opts = {.filename = "canonical"};
  kiln_status s = kiln_hlo_parse_module(kCanonical, sizeof kCanonical - 1, &opts, &m);
  if (s) fail_msg("%s", kiln_status_message(s));
  char *text = kiln_hlo_module_to_string(m);
  assert_string_equal(text, kCanonical);
  kiln_free(text);
  kiln_hlo_module_destroy(m);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_module_prints_header_signature_and_computations),
      T(test_computation_trailing_attrs_follow_the_brace),
      T(test_special_operand_forms),
      T(test_slice_padding_and_dynamic_slice_formats),
      T(test_convolution_window_and_dim_labels),
      T(test_dot_dimension_numbers_and_precision),
      T(test_gather_and_scatter_dimension_numbers),
      T(test_compare_fusion_and_called_computation_groups),
      T(test_custom_call_escapes_target_and_string_backend_config),
      T(test_collective_and_control_predecessor_attrs),
      T(test_misc_op_attributes),
      T(test_reduce_window_prints_window_before_called_computation),
      T(test_canonical_text_is_a_fixed_point_of_parse_and_print),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
