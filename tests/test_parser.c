/* HLO text parser, accepted syntax: small hand-written modules parse into the expected IR
 * (structure, names, shapes and layouts, every decoded attribute, raw attributes kept
 * verbatim, literal values bit for bit, multi-module files and bare computations). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/hlo/ir.h"
#include "tests/skip_util.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_parse_options_t opts = {"t.hlo", 0};
  kiln_hlo_module_t *m = NULL;
  kiln_status st = kiln_hlo_parse_module(text, strlen(text), &opts, &m);
  if (st) fprintf(stderr, "parse failed: %s\n", kiln_status_message(st));
  assert_null(st);
  assert_non_null(m);
  return m;
}

static kiln_hlo_instruction_t *find(kiln_hlo_module_t *m, const char *comp, const char *name) {
  kiln_hlo_computation_t *c = comp ? kiln_hlo_module_find_computation(m, comp) : m->entry;
  assert_non_null(c);
  kiln_hlo_instruction_t *i = kiln_hlo_computation_find(c, name);
  if (!i) fprintf(stderr, "no instruction '%s'\n", name);
  assert_non_null(i);
  return i;
}

static void assert_shape(const kiln_shape_t *s, const char *text) {
  char *got = kiln_shape_to_string(s, true);
  if (strcmp(got, text)) fprintf(stderr, "shape %s, expected %s\n", got, text);
  assert_string_equal(got, text);
  kiln_free(got);
}

static void assert_list(kiln_i64_list_t l, int n, ...) {
  assert_int_equal(l.n, n);
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) assert_int_equal(l.v[i], va_arg(ap, int));
  va_end(ap);
}

static uint16_t u16_at(const kiln_literal_t *l, int64_t i) {
  uint16_t v;
  memcpy(&v, (const char *)l->data + 2 * i, 2);
  return v;
}

static uint32_t f32_bits_at(const kiln_literal_t *l, int64_t i) {
  uint32_t v;
  memcpy(&v, (const char *)l->data + 4 * i, 4);
  return v;
}

static void test_names_operands_and_comments(void **state) {
  kiln_hlo_module_t *m = parse(
      "// RUN: some-tool %s | FileCheck %s\n"
      "HloModule my.module-1\n"
      "\n"
      "ENTRY %main.6 (p: f32[2], q.1: f32[2]) -> f32[2] {\n"
      "  // CHECK: add\n"
      "  %p = f32[2]{0} parameter(0)\n"
      "  q.1 = f32[2] parameter(1)  /* trailing comment */\n"
      "  %get-tuple-element.3 = f32[2] add(f32[2]{0} %p, /*index=1*/q.1)\n"
      "  ROOT %mul = f32[2]{0} multiply(%get-tuple-element.3,\n"
      "                                 p)\n"
      "}\n");
  assert_string_equal(m->name, "my.module-1");
  assert_int_equal(m->computations.len, 1);
  kiln_hlo_computation_t *c = m->entry;
  assert_string_equal(c->name, "main.6");
  assert_true(c->is_entry);
  assert_int_equal(c->instructions.len, 4);
  kiln_hlo_instruction_t *p = find(m, NULL, "p"), *q = find(m, NULL, "q.1");
  kiln_hlo_instruction_t *a = find(m, NULL, "get-tuple-element.3");
  assert_int_equal(a->opcode, KILN_OP_ADD);
  assert_int_equal(a->num_operands, 2);
  assert_ptr_equal(a->operands[0], p);
  assert_ptr_equal(a->operands[1], q);
  assert_ptr_equal(c->root, find(m, NULL, "mul"));
  assert_ptr_equal(c->root->operands[1], p);
  /* users are distinct, in first-use order */
  assert_int_equal(p->users.len, 2);
  assert_ptr_equal(p->users.data[0], a);
  assert_int_equal(c->num_parameters, 2);
  assert_ptr_equal(c->parameters[0], p);
  assert_ptr_equal(c->parameters[1], q);
  kiln_hlo_module_destroy(m);
}

static void test_bare_entry_root_and_parameter_order(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY main {\n"
      "  b = f32[] parameter(1)\n"
      "  a = f32[] parameter(0)\n"
      "  ROOT s = f32[] subtract(a, b)\n"
      "  dead = f32[] negate(s)\n"
      "}\n");
  kiln_hlo_computation_t *c = m->entry;
  assert_string_equal(c->name, "main");
  assert_ptr_equal(c->root, find(m, NULL, "s"));
  assert_ptr_equal(c->parameters[0], find(m, NULL, "a"));
  assert_ptr_equal(c->parameters[1], find(m, NULL, "b"));
  assert_int_equal(c->parameters[1]->parameter_number, 1);
  kiln_hlo_module_destroy(m);
  /* no ROOT: the last instruction; no ENTRY: the last computation */
  m = parse("HloModule m\nf {\n  ROOT x = f32[] parameter(0)\n}\n"
            "g {\n  x = f32[] parameter(0)\n  y = f32[] negate(x)\n}\n");
  assert_string_equal(m->entry->name, "g");
  assert_true(m->entry->is_entry);
  assert_false(m->computations.data[0]->is_entry);
  assert_string_equal(m->entry->root->name, "y");
  kiln_hlo_module_destroy(m);
}

static void test_forward_references_and_late_computations(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add.1\n"
      "  n = f32[4] negate(later)\n"
      "  later = f32[4] abs(p)\n"
      "}\n"
      "add.1 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n");
  kiln_hlo_instruction_t *r = find(m, "e", "r");
  assert_int_equal(r->num_called_groups, 1);
  assert_string_equal(r->called_groups[0].key, "to_apply");
  assert_false(r->called_groups[0].braced);
  assert_ptr_equal(kiln_hlo_instruction_called(r, "to_apply"), kiln_hlo_module_find_computation(m, "add.1"));
  assert_ptr_equal(find(m, "e", "n")->operands[0], find(m, "e", "later"));
  assert_string_equal(m->entry->name, "e");
  kiln_hlo_module_destroy(m);
}

static void test_module_attributes(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[2,3]{0,1}, "
      "/*index=1*/s32[])->(f32[2,3]{1,0}, s32[])}, input_output_alias={ {0}: (0, {}, may-alias), "
      "{1}: (1, {2}) }, replica_count=2, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}},"
      " allow_spmd_sharding_propagation_to_output={true}\n"
      "ENTRY e {\n  a = f32[2,3]{0,1} parameter(0)\n  b = s32[] parameter(1)\n  ROOT t = (f32[2,3], s32[]) tuple(a, b)\n}\n");
  assert_true(m->has_entry_layout);
  assert_int_equal(m->num_entry_layout_params, 2);
  assert_shape(m->entry_layout_params[0], "f32[2,3]{0,1}");
  assert_shape(m->entry_layout_params[1], "s32[]");
  assert_shape(m->entry_layout_result, "(f32[2,3]{1,0}, s32[])");
  assert_int_equal(m->num_io_aliases, 2);
  assert_list(m->io_aliases[0].output_index, 1, 0);
  assert_int_equal(m->io_aliases[0].param_number, 0);
  assert_list(m->io_aliases[0].param_index, 0);
  assert_string_equal(m->io_aliases[0].kind, "may-alias");
  assert_int_equal(m->io_aliases[1].param_number, 1);
  assert_list(m->io_aliases[1].param_index, 1, 2);
  assert_null(m->io_aliases[1].kind);
  assert_int_equal(m->num_raw_attrs, 4);
  assert_string_equal(m->raw_attrs[0].key, "is_scheduled");
  assert_string_equal(m->raw_attrs[0].value, "true");
  assert_string_equal(m->raw_attrs[1].key, "replica_count");
  assert_string_equal(m->raw_attrs[1].value, "2");
  assert_string_equal(m->raw_attrs[2].value, "{xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}}");
  assert_string_equal(m->raw_attrs[3].value, "{true}");
  kiln_hlo_module_destroy(m);
}

static void test_raw_attributes_verbatim_with_normalized_whitespace(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  ROOT p = f32[4] parameter(0), metadata={op_type=\"add\"   op_name=\"jit(f)/a \\\"q\\\", b\"\n"
      "     source_file=\"x.py\" source_line=3 /* c */}, sharding={devices=[4,1]<=[4]},\n"
      "     frontend_attributes={_xla_compute_type=\"host\"}, unknown_key=[1, 2]<=[2]T(1,0)\n"
      "}\n");
  kiln_hlo_instruction_t *p = m->entry->root;
  assert_int_equal(p->num_raw_attrs, 4);
  assert_string_equal(kiln_hlo_instruction_raw_attr(p, "metadata"),
                      "{op_type=\"add\" op_name=\"jit(f)/a \\\"q\\\", b\" source_file=\"x.py\" source_line=3 }");
  assert_string_equal(kiln_hlo_instruction_raw_attr(p, "sharding"), "{devices=[4,1]<=[4]}");
  assert_string_equal(kiln_hlo_instruction_raw_attr(p, "frontend_attributes"),
                      "{_xla_compute_type=\"host\"}");
  assert_string_equal(kiln_hlo_instruction_raw_attr(p, "unknown_key"), "[1, 2]<=[2]T(1,0)");
  assert_string_equal(p->raw_attrs[0].key, "metadata"); /* order kept */
  kiln_hlo_module_destroy(m);
  /* tuple sharding with comments */
  m = parse("HloModule m\nENTRY e {\n  ROOT p = (f32[], f32[]) parameter(0), "
            "sharding={{replicated}, /*index=1*/{maximal device=0}}\n}\n");
  assert_string_equal(kiln_hlo_instruction_raw_attr(m->entry->root, "sharding"),
                      "{{replicated}, {maximal device=0}}");
  kiln_hlo_module_destroy(m);
}

static void test_backend_config_forms(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[2] parameter(0)\n"
      "  a = f32[2] custom-call(p), custom_call_target=\"__cublas$gemm\", "
      "backend_config={\"alpha\": 1, \"s\": \"x, y\"}\n"
      "  b = f32[2] custom-call(p), custom_call_target=\"q\\\"t\", backend_config=\"{\\\"k\\\":\\\"v\\\"}\"\n"
      "  c = f32[2] custom-call(p), custom_call_target=\"r\", backend_config=\"\\000\\001x\", "
      "api_version=API_VERSION_STATUS_RETURNING\n"
      "  ROOT d = f32[2] custom-call(p), custom_call_target=\"s\", backend_config=opaque_thing\n"
      "}\n");
  kiln_hlo_instruction_t *a = find(m, NULL, "a"), *b = find(m, NULL, "b");
  kiln_hlo_instruction_t *c = find(m, NULL, "c"), *d = find(m, NULL, "d");
  assert_string_equal(a->custom_call_target, "__cublas$gemm");
  assert_int_equal(a->backend_config_form, KILN_BACKEND_CONFIG_JSON);
  assert_string_equal(a->backend_config, "{\"alpha\": 1, \"s\": \"x, y\"}");
  assert_string_equal(b->custom_call_target, "q\"t");
  assert_int_equal(b->backend_config_form, KILN_BACKEND_CONFIG_STRING);
  assert_string_equal(b->backend_config, "{\"k\":\"v\"}");
  assert_int_equal(c->backend_config_form, KILN_BACKEND_CONFIG_RAW); /* opaque bytes */
  assert_string_equal(c->backend_config, "\"\\000\\001x\"");
  assert_int_equal(c->api_version, 2);
  assert_string_equal(c->api_version_text, "API_VERSION_STATUS_RETURNING");
  assert_int_equal(a->api_version, 0);
  assert_int_equal(d->backend_config_form, KILN_BACKEND_CONFIG_RAW);
  assert_string_equal(d->backend_config, "opaque_thing");
  kiln_hlo_module_destroy(m);
}

static void test_layouts_tiles_memory_space_and_dynamic_dims(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[8,128]{1,0:T(8,128)(2,1)} parameter(0)\n"
      "  b = f32[4,2]{0,1:S(1)} parameter(1)\n"
      "  c = s4[16]{0:E(4)} parameter(2)\n"
      "  d = f32[16,<=8]{1,0} parameter(3)\n"
      "  e = bf16[2,3]{1,0:T(2,*)L(4)#(u8)S(2)} parameter(4)\n"
      "  f = f16[] parameter(5)\n"
      "  g = f16[]{:T(256)} parameter(6)\n"
      "  ROOT t = ((f32[], token[]), opaque[], (s32[<=4])) parameter(7)\n"
      "}\n");
  kiln_hlo_instruction_t *a = find(m, NULL, "a");
  assert_true(a->shape->has_layout);
  assert_int_equal(a->shape->layout.num_tiles, 2);
  assert_int_equal(a->shape->layout.tiles[0].num_dims, 2);
  assert_int_equal(a->shape->layout.tiles[0].dims[0], 8);
  assert_int_equal(a->shape->layout.tiles[0].dims[1], 128);
  assert_int_equal(a->shape->layout.tiles[1].dims[0], 2);
  assert_int_equal(a->shape->layout.tiles[1].dims[1], 1);
  kiln_layout_t *lb = &find(m, NULL, "b")->shape->layout;
  assert_int_equal(lb->minor_to_major[0], 0);
  assert_int_equal(lb->minor_to_major[1], 1);
  assert_int_equal(lb->memory_space, 1);
  assert_int_equal(find(m, NULL, "c")->shape->layout.element_size_bits, 4);
  kiln_shape_t *d = find(m, NULL, "d")->shape;
  assert_non_null(d->dynamic);
  assert_false(d->dynamic[0]);
  assert_true(d->dynamic[1]);
  assert_int_equal(d->dims[1], 8);
  kiln_layout_t *le = &find(m, NULL, "e")->shape->layout;
  assert_int_equal(le->tiles[0].dims[1], -1);
  assert_string_equal(le->extra, "L(4)#(u8)");
  assert_int_equal(le->memory_space, 2);
  assert_false(find(m, NULL, "f")->shape->has_layout);
  assert_true(find(m, NULL, "g")->shape->has_layout);
  assert_int_equal(find(m, NULL, "g")->shape->layout.rank, 0);
  assert_shape(m->entry->root->shape, "((f32[], token[]), opaque[], (s32[<=4]))");
  kiln_hlo_module_destroy(m);
}

static void test_every_element_type(void **state) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "HloModule m\nENTRY e {\n");
  int n = 0;
  for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) {
    if (!kiln_elem_type_is_array((kiln_elem_type_t)t)) continue;
    kiln_strbuf_printf(&b, "  p%d = %s[2,3] parameter(%d)\n", n, kiln_elem_type_name((kiln_elem_type_t)t), n);
    n++;
  }
  kiln_strbuf_printf(&b, "  ROOT tok = token[] after-all()\n}\n");
  kiln_hlo_module_t *m = parse(kiln_strbuf_cstr(&b));
  assert_int_equal(m->entry->num_parameters, n);
  int k = 0;
  for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) {
    if (!kiln_elem_type_is_array((kiln_elem_type_t)t)) continue;
    assert_int_equal(m->entry->parameters[k]->shape->type, t);
    assert_int_equal(m->entry->parameters[k]->shape->rank, 2);
    k++;
  }
  assert_int_equal(m->entry->root->shape->type, KILN_TOKEN);
  kiln_hlo_module_destroy(m);
  kiln_strbuf_free(&b);
}

static void test_dot_conv_and_window_attributes(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[2,3,4] parameter(0)\n"
      "  b = f32[2,4,5] parameter(1)\n"
      "  d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={default,highest}, "
      "algorithm=dot_bf16_bf16_f32\n"
      "  x = f32[1,8,8,2] parameter(2)\n"
      "  k = f32[3,3,2,4] parameter(3)\n"
      "  ROOT c = f32[1,4,4,4] convolution(x, k), window={size=3x3 stride=2x2 pad=0_1x1_0 "
      "lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, "
      "feature_group_count=1, batch_group_count=1\n"
      "}\n");
  kiln_hlo_instruction_t *d = find(m, NULL, "d");
  assert_true(d->has_dot_dnums);
  assert_list(d->dot_dnums.lhs_batch, 1, 0);
  assert_list(d->dot_dnums.lhs_contracting, 1, 2);
  assert_list(d->dot_dnums.rhs_batch, 1, 0);
  assert_list(d->dot_dnums.rhs_contracting, 1, 1);
  assert_int_equal(d->num_operand_precision, 2);
  assert_string_equal(d->operand_precision[1], "highest");
  assert_null(d->rng_algorithm); /* algorithm= on dot stays raw */
  assert_string_equal(kiln_hlo_instruction_raw_attr(d, "algorithm"), "dot_bf16_bf16_f32");
  kiln_hlo_instruction_t *c = m->entry->root;
  assert_int_equal(c->num_window_dims, 2);
  kiln_window_dim_t w0 = c->window[0], w1 = c->window[1];
  assert_int_equal(w0.size, 3);
  assert_int_equal(w0.stride, 2);
  assert_int_equal(w0.pad_lo, 0);
  assert_int_equal(w0.pad_hi, 1);
  assert_int_equal(w1.pad_lo, 1);
  assert_int_equal(w1.pad_hi, 0);
  assert_int_equal(w0.lhs_dilate, 1);
  assert_int_equal(w1.lhs_dilate, 2);
  assert_int_equal(w0.rhs_dilate, 2);
  assert_false(w0.reversal);
  assert_true(w1.reversal);
  assert_true(c->has_conv_dnums);
  assert_int_equal(c->conv_dnums.num_spatial, 2);
  assert_int_equal(c->conv_dnums.input_batch, 0);
  assert_int_equal(c->conv_dnums.input_feature, 3);
  assert_int_equal(c->conv_dnums.input_spatial[0], 1);
  assert_int_equal(c->conv_dnums.input_spatial[1], 2);
  assert_int_equal(c->conv_dnums.kernel_input_feature, 2);
  assert_int_equal(c->conv_dnums.kernel_output_feature, 3);
  assert_int_equal(c->conv_dnums.kernel_spatial[1], 1);
  assert_int_equal(c->conv_dnums.output_feature, 3);
  assert_int_equal(c->feature_group_count, 1);
  assert_int_equal(c->batch_group_count, 1);
  kiln_hlo_module_destroy(m);
  /* empty window, permuted labels */
  m = parse("HloModule m\nENTRY e {\n  a = f32[4,1] parameter(0)\n  b = f32[1,2] parameter(1)\n"
            "  ROOT c = f32[4,2] convolution(a, b), window={}, dim_labels=bf_io->bf\n}\n");
  assert_int_equal(m->entry->root->num_window_dims, 0);
  assert_int_equal(m->entry->root->conv_dnums.num_spatial, 0);
  assert_int_equal(m->entry->root->feature_group_count, 0); /* not written */
  kiln_hlo_module_destroy(m);
}

static void test_slice_pad_and_dynamic_slice_attributes(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[4,10] parameter(0)\n"
      "  s = f32[2,4] slice(p), slice={[0:2], [1:9:2]}\n"
      "  z = f32[] constant(0)\n"
      "  q = f32[5,14] pad(p, z), padding=0_1x2_-1_1\n"
      "  i = s32[] parameter(1)\n"
      "  ROOT ds = f32[2,3] dynamic-slice(p, i, i), dynamic_slice_sizes={2,3}\n"
      "}\n");
  kiln_hlo_instruction_t *s = find(m, NULL, "s");
  assert_int_equal(s->num_slice_dims, 2);
  assert_int_equal(s->slice[0].start, 0);
  assert_int_equal(s->slice[0].limit, 2);
  assert_int_equal(s->slice[0].stride, 1);
  assert_int_equal(s->slice[1].start, 1);
  assert_int_equal(s->slice[1].limit, 9);
  assert_int_equal(s->slice[1].stride, 2);
  kiln_hlo_instruction_t *q = find(m, NULL, "q");
  assert_int_equal(q->num_pad_dims, 2);
  assert_int_equal(q->padding[0].lo, 0);
  assert_int_equal(q->padding[0].hi, 1);
  assert_int_equal(q->padding[0].interior, 0);
  assert_int_equal(q->padding[1].lo, 2);
  assert_int_equal(q->padding[1].hi, -1);
  assert_int_equal(q->padding[1].interior, 1);
  assert_list(m->entry->root->dynamic_slice_sizes, 2, 2, 3);
  kiln_hlo_module_destroy(m);
}

static void test_gather_and_scatter_dimension_numbers(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
      "ENTRY e {\n"
      "  o = f32[3,4] parameter(0)\n"
      "  i = s32[2,1] parameter(1)\n"
      "  g = f32[2,4] gather(o, i), offset_dims={1}, collapsed_slice_dims={0}, "
      "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, indices_are_sorted=true\n"
      "  ROOT sc = f32[3,4] scatter(o, i, g), update_window_dims={1}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=add\n"
      "}\n");
  kiln_hlo_instruction_t *g = find(m, NULL, "g");
  assert_true(g->has_gather_dnums);
  assert_false(g->has_scatter_dnums);
  assert_list(g->gather_dnums.offset_dims, 1, 1);
  assert_list(g->gather_dnums.collapsed_slice_dims, 1, 0);
  assert_list(g->gather_dnums.start_index_map, 1, 0);
  assert_int_equal(g->gather_dnums.index_vector_dim, 1);
  assert_list(g->gather_slice_sizes, 2, 1, 4);
  assert_true(g->indices_are_sorted);
  assert_false(g->unique_indices);
  kiln_hlo_instruction_t *sc = m->entry->root;
  assert_true(sc->has_scatter_dnums);
  assert_list(sc->scatter_dnums.update_window_dims, 1, 1);
  assert_list(sc->scatter_dnums.inserted_window_dims, 1, 0);
  assert_list(sc->scatter_dnums.scatter_dims_to_operand_dims, 1, 0);
  assert_int_equal(sc->scatter_dnums.index_vector_dim, 1);
  assert_true(sc->unique_indices);
  assert_ptr_equal(kiln_hlo_instruction_called(sc, "to_apply"), kiln_hlo_module_find_computation(m, "add"));
  kiln_hlo_module_destroy(m);
}

static void test_opcode_specific_attributes(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "cmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}\n"
      "fused {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  gte = f32[4] get-tuple-element(t), index=1\n"
      "  t = (f32[4], f32[4]) tuple(p, p)\n"
      "  io = s32[4] iota(), iota_dimension=0\n"
      "  so = f32[4] sort(p), dimensions={0}, is_stable=true, to_apply=cmp\n"
      "  f = f32[4] fusion(p), kind=kLoop, calls=fused\n"
      "  f2 = f32[4] fusion(p), kind=kScatter, calls=fused\n"
      "  rp = f32[4] reduce-precision(p), exponent_bits=5, mantissa_bits=10\n"
      "  c = c64[4] parameter(1)\n"
      "  ff = c64[4] fft(c), fft_type=FFT, fft_length={4}\n"
      "  lo = f32[] parameter(2)\n"
      "  r = f32[4] rng(lo, lo), distribution=rng_uniform\n"
      "  st = u64[2] parameter(3)\n"
      "  rb = (u64[2], u32[4]) rng-bit-generator(st), algorithm=rng_philox\n"
      "  m2 = f32[4,4] parameter(4)\n"
      "  ts = f32[4,4] triangular-solve(m2, m2), left_side=true, lower=true, unit_diagonal=false, "
      "transpose_a=NO_TRANSPOSE\n"
      "  ch = f32[4,4] cholesky(m2), lower=false\n"
      "  tk = (f32[2], s32[2]) topk(p), k=2, largest=true\n"
      "  ar = f32[4] all-reduce(p), channel_id=3, replica_groups={{0,1},{2,3}}, "
      "use_global_device_ids=true, constrain_layout=true, to_apply=cmp\n"
      "  ag = f32[8] all-gather(p), dimensions={0}, replica_groups=[2,2]<=[4], channel_id=1\n"
      "  ROOT ag2 = f32[8] all-gather(p), dimensions={0}, replica_groups={}\n"
      "}\n");
  kiln_hlo_instruction_t *lt = find(m, "cmp", "lt");
  assert_int_equal(lt->comparison_direction, KILN_CMP_LT);
  assert_int_equal(lt->comparison_type, KILN_CMP_TYPE_TOTALORDER);
  assert_int_equal(find(m, NULL, "gte")->tuple_index, 1);
  assert_int_equal(find(m, NULL, "io")->iota_dimension, 0);
  assert_true(find(m, NULL, "so")->is_stable);
  assert_true(find(m, NULL, "so")->has_dimensions);
  assert_int_equal(find(m, NULL, "f")->fusion_kind, KILN_HLO_FUSION_LOOP);
  assert_null(find(m, NULL, "f")->fusion_kind_text);
  assert_int_equal(find(m, NULL, "f2")->fusion_kind, KILN_HLO_FUSION_NONE);
  assert_string_equal(find(m, NULL, "f2")->fusion_kind_text, "kScatter");
  assert_int_equal(find(m, NULL, "rp")->exponent_bits, 5);
  assert_int_equal(find(m, NULL, "rp")->mantissa_bits, 10);
  assert_string_equal(find(m, NULL, "ff")->fft_type, "FFT");
  assert_list(find(m, NULL, "ff")->fft_length, 1, 4);
  assert_string_equal(find(m, NULL, "r")->rng_distribution, "rng_uniform");
  assert_string_equal(find(m, NULL, "rb")->rng_algorithm, "rng_philox");
  kiln_hlo_instruction_t *ts = find(m, NULL, "ts");
  assert_true(ts->left_side);
  assert_true(ts->lower);
  assert_true(ts->has_lower);
  assert_false(ts->unit_diagonal);
  assert_string_equal(ts->transpose_a, "NO_TRANSPOSE");
  assert_true(find(m, NULL, "ch")->has_lower);
  assert_false(find(m, NULL, "ch")->lower);
  assert_int_equal(find(m, NULL, "tk")->k, 2);
  assert_true(find(m, NULL, "tk")->largest);
  kiln_hlo_instruction_t *ar = find(m, NULL, "ar");
  assert_int_equal(ar->channel_id, 3);
  assert_string_equal(ar->replica_groups, "{{0,1},{2,3}}");
  assert_true(ar->use_global_device_ids);
  assert_true(ar->constrain_layout);
  assert_string_equal(find(m, NULL, "ag")->replica_groups, "[2,2]<=[4]");
  assert_string_equal(m->entry->root->replica_groups, "{}");
  assert_int_equal(find(m, NULL, "ag")->num_raw_attrs, 0);
  kiln_hlo_module_destroy(m);
}

static void test_called_computation_groups_keep_bracing(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "b0 {\n  ROOT p = f32[] parameter(0)\n}\n"
      "b1 {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p)\n}\n"
      "cond {\n  p = f32[] parameter(0)\n  ROOT t = pred[] constant(true)\n}\n"
      "ENTRY e {\n"
      "  i = s32[] parameter(0)\n"
      "  x = f32[] parameter(1)\n"
      "  c = f32[] conditional(i, x, x), branch_computations={%b0, b1}\n"
      "  w = f32[] while(x), condition=cond, body=b1\n"
      "  s = ((f32[]), f32[], u32[]) async-start(x), calls={b1}\n"
      "  s2 = ((f32[]), f32[], u32[]) async-start(x), calls=b1\n"
      "  ROOT cc = f32[] custom-call(x), custom_call_target=\"f\", called_computations={b0}\n"
      "}\n");
  kiln_hlo_instruction_t *c = find(m, NULL, "c");
  assert_int_equal(c->num_called_groups, 1);
  assert_string_equal(c->called_groups[0].key, "branch_computations");
  assert_true(c->called_groups[0].braced);
  assert_int_equal(c->called_groups[0].n, 2);
  assert_string_equal(c->called_groups[0].comps[1]->name, "b1");
  kiln_hlo_instruction_t *w = find(m, NULL, "w");
  assert_int_equal(w->num_called_groups, 2);
  assert_string_equal(w->called_groups[0].key, "condition");
  assert_string_equal(w->called_groups[1].key, "body");
  assert_true(find(m, NULL, "s")->called_groups[0].braced);
  assert_false(find(m, NULL, "s2")->called_groups[0].braced);
  assert_string_equal(m->entry->root->called_groups[0].key, "called_computations");
  kiln_hlo_module_destroy(m);
}

static void test_control_predecessors(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[] parameter(0)\n"
      "  a = f32[] negate(p), control-predecessors={b}\n"
      "  b = f32[] abs(p)\n"
      "  ROOT c = f32[] add(a, b), control-predecessors={%a, b}\n"
      "}\n");
  kiln_hlo_instruction_t *a = find(m, NULL, "a"), *b = find(m, NULL, "b"), *c = m->entry->root;
  assert_int_equal(a->num_control_predecessors, 1);
  assert_ptr_equal(a->control_predecessors[0], b);
  assert_int_equal(c->num_control_predecessors, 2);
  assert_ptr_equal(c->control_predecessors[0], a);
  assert_int_equal(b->control_successors.len, 2);
  assert_ptr_equal(b->control_successors.data[0], a);
  assert_ptr_equal(b->control_successors.data[1], c);
  kiln_hlo_module_destroy(m);
}

static void test_literal_values(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[2,3] constant({ {1, 2.5, -3}, {1e-3, 1., -0} })\n"
      "  b = f32[4] constant({inf, -inf, nan, -nan})\n"
      "  h = bf16[3] constant({1.00390625, 1.01171875, -2})\n"
      "  f = f16[2] constant({65504, 1e-8})\n"
      "  i = s8[3] constant({-128, 127, 0})\n"
      "  j = s4[2] constant({-8, 7})\n"
      "  u = u64[] constant(18446744073709551615)\n"
      "  s = s64[] constant(-9223372036854775808)\n"
      "  pr = pred[4] constant({true, false, 1, 0})\n"
      "  c = c64[2] constant({(1, -2), (0.5, inf)})\n"
      "  z = f32[0] constant({})\n"
      "  z2 = f32[2,0] constant({ {}, {} })\n"
      "  el = f32[1000,1000] constant({...})\n"
      "  bc = s32[2,2] constant(7)\n"
      "  np = f32[] constant(nan(0x123))\n"
      "  f8 = f8e4m3fn[2] constant({1, -448})\n"
      "  ROOT t = (f32[], (s32[2], pred[])) constant((1.5, ({3, 4}, true)))\n"
      "}\n");
  kiln_literal_t *a = find(m, NULL, "a")->literal;
  assert_int_equal(a->num_elements, 6);
  float fa[6];
  memcpy(fa, a->data, sizeof fa);
  assert_true(fa[0] == 1.0f && fa[1] == 2.5f && fa[2] == -3.0f && fa[3] == 1e-3f && fa[4] == 1.0f);
  assert_true(fa[5] == 0.0f && signbit(fa[5]));
  kiln_literal_t *b = find(m, NULL, "b")->literal;
  assert_int_equal(f32_bits_at(b, 0), 0x7f800000u);
  assert_int_equal(f32_bits_at(b, 1), 0xff800000u);
  assert_int_equal(f32_bits_at(b, 2), 0x7fc00000u);
  assert_int_equal(f32_bits_at(b, 3), 0xffc00000u);
  /* bf16 rounds to nearest even: 1+2^-8 -> 1.0, 1+3*2^-8 -> 1+2^-6 */
  kiln_literal_t *h = find(m, NULL, "h")->literal;
  assert_int_equal(u16_at(h, 0), 0x3f80);
  assert_int_equal(u16_at(h, 1), 0x3f82);
  assert_int_equal(u16_at(h, 2), 0xc000);
  kiln_literal_t *f = find(m, NULL, "f")->literal;
  assert_int_equal(u16_at(f, 0), 0x7bff);
  assert_int_equal(u16_at(f, 1), 0x0000); /* 1e-8 underflows to +0 in f16 */
  int8_t i8[3];
  memcpy(i8, find(m, NULL, "i")->literal->data, 3);
  assert_int_equal(i8[0], -128);
  assert_int_equal(i8[1], 127);
  uint8_t s4[2];
  memcpy(s4, find(m, NULL, "j")->literal->data, 2);
  assert_int_equal(s4[0], 0x8); /* low 4 bits of -8 */
  assert_int_equal(s4[1], 0x7);
  uint64_t u;
  memcpy(&u, find(m, NULL, "u")->literal->data, 8);
  assert_true(u == UINT64_MAX);
  int64_t s;
  memcpy(&s, find(m, NULL, "s")->literal->data, 8);
  assert_true(s == INT64_MIN);
  uint8_t pr[4];
  memcpy(pr, find(m, NULL, "pr")->literal->data, 4);
  assert_true(pr[0] == 1 && pr[1] == 0 && pr[2] == 1 && pr[3] == 0);
  float cc[4];
  memcpy(cc, find(m, NULL, "c")->literal->data, sizeof cc);
  assert_true(cc[0] == 1 && cc[1] == -2 && cc[2] == 0.5f && isinf(cc[3]));
  assert_int_equal(find(m, NULL, "z")->literal->num_elements, 0);
  assert_int_equal(find(m, NULL, "z2")->literal->num_elements, 0);
  kiln_literal_t *el = find(m, NULL, "el")->literal;
  assert_true(el->unknown);
  assert_null(el->data);
  int32_t bc[4];
  memcpy(bc, find(m, NULL, "bc")->literal->data, sizeof bc);
  assert_true(bc[0] == 7 && bc[3] == 7);
  assert_int_equal(f32_bits_at(find(m, NULL, "np")->literal, 0), 0x7f800123u);
  uint8_t f8[2];
  memcpy(f8, find(m, NULL, "f8")->literal->data, 2);
  assert_int_equal(f8[0], 0x38);
  assert_int_equal(f8[1], 0xfe);
  kiln_literal_t *t = m->entry->root->literal;
  assert_int_equal(t->num_tuple_elements, 2);
  assert_int_equal(f32_bits_at(t->tuple_elements[0], 0), 0x3fc00000u);
  kiln_literal_t *t1 = t->tuple_elements[1];
  assert_int_equal(t1->num_tuple_elements, 2);
  int32_t v34[2];
  memcpy(v34, t1->tuple_elements[0]->data, 8);
  assert_true(v34[0] == 3 && v34[1] == 4);
  assert_int_equal(*(uint8_t *)t1->tuple_elements[1]->data, 1);
  kiln_hlo_module_destroy(m);
}

static void test_multi_module_file_splits_on_separator_lines(void **state) {
  const char *text =
      "// RUN: tool -split-input-file %s\n"
      "HloModule a\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
      "// -----\n"
      "HloModule b\n"
      "// ----------------------  (decoration, not a separator)\n"
      "f {\n  ROOT p = s32[] parameter(0)\n}\n"
      "ENTRY e {\n  p = s32[] parameter(0)\n  ROOT c = s32[] call(p), to_apply=f\n}\n"
      "// -----\n"
      "// a piece with only comments is skipped\n"
      "// -----\n"
      "ENTRY headerless {\n  ROOT p = f32[] parameter(0)\n}\n";
  kiln_hlo_parse_options_t opts = {"dir/split.hlo", 0};
  kiln_hlo_module_t **mods;
  int n;
  kiln_status st = kiln_hlo_parse_modules(text, strlen(text), &opts, &mods, &n);
  assert_null(st);
  assert_int_equal(n, 3);
  assert_string_equal(mods[0]->name, "a");
  assert_string_equal(mods[1]->name, "b");
  assert_int_equal(mods[1]->computations.len, 2);
  assert_string_equal(mods[2]->name, "split");
  assert_string_equal(mods[2]->entry->name, "headerless");
  for (int i = 0; i < n; i++) kiln_hlo_module_destroy(mods[i]);
  kiln_free(mods);
}

static void test_bare_computations(void **state) {
  const char *text =
      "// RUN: fusion_to_mlir %s\n"
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "fusion {\n"
      "  p = f32[4,8] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add\n"
      "}\n";
  kiln_hlo_parse_options_t opts = {"/x/y/reduce_row.hlo", 0};
  kiln_hlo_module_t *m;
  kiln_status st = kiln_hlo_parse_computations(text, strlen(text), &opts, &m);
  assert_null(st);
  assert_string_equal(m->name, "reduce_row");
  assert_string_equal(m->entry->name, "fusion");
  assert_int_equal(m->entry->num_parameters, 1);
  kiln_hlo_module_destroy(m);
  /* with signatures and an ENTRY mark on the first one */
  const char *text2 = "ENTRY f (p: f32[2]) -> f32[2] {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n"
                      "g {\n  ROOT q = f32[] parameter(0)\n}\n";
  st = kiln_hlo_parse_computations(text2, strlen(text2), NULL, &m);
  assert_null(st);
  assert_string_equal(m->name, "computations");
  assert_string_equal(m->entry->name, "f");
  kiln_hlo_module_destroy(m);
  /* a whole module handed to parse_computations is parsed as a module */
  const char *text3 = "HloModule whole\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n";
  st = kiln_hlo_parse_computations(text3, strlen(text3), &opts, &m);
  assert_null(st);
  assert_string_equal(m->name, "whole");
  kiln_hlo_module_destroy(m);
}

static void test_nested_and_shapeless_instructions(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  r = f32[8,7] reshape(f32[1,8,1,7] parameter(0))\n"
      "  q = f32[8,7] parameter(1)\n"
      "  s = add(r, q)\n"
      "  ROOT t = tuple(s, r)\n"
      "}\n");
  kiln_hlo_computation_t *c = m->entry;
  assert_int_equal(c->instructions.len, 5);
  kiln_hlo_instruction_t *nested = c->instructions.data[0];
  assert_int_equal(nested->opcode, KILN_OP_PARAMETER);
  assert_ptr_equal(find(m, NULL, "r")->operands[0], nested);
  assert_ptr_equal(c->parameters[0], nested);
  assert_shape(find(m, NULL, "s")->shape, "f32[8,7]");
  assert_shape(c->root->shape, "(f32[8,7], f32[8,7])");
  kiln_hlo_module_destroy(m);
}

static void test_trailing_attributes_stack_frames_and_odd_headers(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule old.1:, num_partitions=8\n"
      "\n"
      "FileNames\n1 \"a.py\"\n2 \"b \\\"c\\\".py\"\n"
      "FunctionNames\n1 \"f\"\n"
      "FileLocations\n1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=2}\n"
      "StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n"
      "\n"
      "w {\n  ROOT p = f32[] parameter(0)\n}, execution_thread=\"thread\"\n"
      "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=w\n}\n");
  assert_string_equal(m->name, "old.1");
  assert_string_equal(m->raw_attrs[0].value, "8");
  assert_string_equal(kiln_hlo_module_find_computation(m, "w")->trailing_attrs,
                      "execution_thread=\"thread\"");
  assert_null(m->entry->trailing_attrs);
  kiln_hlo_module_destroy(m);
}

static void test_unbounded_and_buffer_shapes(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule m\nENTRY e {\n  p = f32[1,?] parameter(0)\n  ROOT b = b(f32[4, 16]) custom-call(p), "
      "custom_call_target=\"Pin\"\n}\n");
  kiln_shape_t *p = find(m, NULL, "p")->shape;
  assert_true(p->dynamic[1]);
  assert_int_equal(p->dims[1], -1);
  assert_shape(m->entry->root->shape, "f32[4,16]");
  kiln_hlo_module_destroy(m);
}

static void test_corpus_samples_parse(void **state) {
  /* A few real files of each kind (the full corpus runs in the corpus test). */
  const char *dir = getenv("KILN_CORPUS_DIR");
  if (!dir) dir = KILN_CORPUS_DIR;
  const char *files[] = {"xla/xla__tools__benchmarks__hlo__hlo_llama31_405b_bf16_64x8.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__while.hlo",
                         "xla/xla__tools__tests__data__invalid_concat.hlo",
                         "emitters/xla__codegen__emitters__tests__loop__tuple_nested.hlo"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    char *text;
    size_t len;
    kiln_status st = kiln_read_file(path, &text, &len);
    if (st) {
      printf("[  SKIP    ] %s\n", kiln_status_message(st));
      kiln_status_free(st);
      KILN_SKIPPED();
    }
    kiln_hlo_parse_options_t opts = {path, 0};
    if (strstr(files[i], "emitters/")) {
      kiln_hlo_module_t *m;
      st = kiln_hlo_parse_computations(text, len, &opts, &m);
      if (!st) kiln_hlo_module_destroy(m);
    } else {
      kiln_hlo_module_t **mods;
      int n;
      st = kiln_hlo_parse_modules(text, len, &opts, &mods, &n);
      if (!st) {
        assert_true(n >= 1);
        for (int k = 0; k < n; k++) kiln_hlo_module_destroy(mods[k]);
        kiln_free(mods);
      }
    }
    if (st) fprintf(stderr, "%s\n", kiln_status_message(st));
    assert_null(st);
    kiln_free(text);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_operands_and_comments),
      cmocka_unit_test(test_bare_entry_root_and_parameter_order),
      cmocka_unit_test(test_forward_references_and_late_computations),
      cmocka_unit_test(test_module_attributes),
      cmocka_unit_test(test_raw_attributes_verbatim_with_normalized_whitespace),
      cmocka_unit_test(test_backend_config_forms),
      cmocka_unit_test(test_layouts_tiles_memory_space_and_dynamic_dims),
      cmocka_unit_test(test_every_element_type),
      cmocka_unit_test(test_dot_conv_and_window_attributes),
      cmocka_unit_test(test_slice_pad_and_dynamic_slice_attributes),
      cmocka_unit_test(test_gather_and_scatter_dimension_numbers),
      cmocka_unit_test(test_opcode_specific_attributes),
      cmocka_unit_test(test_called_computation_groups_keep_bracing),
      cmocka_unit_test(test_control_predecessors),
      cmocka_unit_test(test_literal_values),
      cmocka_unit_test(test_multi_module_file_splits_on_separator_lines),
      cmocka_unit_test(test_bare_computations),
      cmocka_unit_test(test_nested_and_shapeless_instructions),
      cmocka_unit_test(test_trailing_attributes_stack_frames_and_odd_headers),
      cmocka_unit_test(test_unbounded_and_buffer_shapes),
      cmocka_unit_test(test_corpus_samples_parse),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
