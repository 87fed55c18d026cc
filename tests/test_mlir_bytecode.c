/* MLIR bytecode of the VHLO dialect -> the generic IR, upgraded to current StableHLO: every
 * portable artifact of StableHLO's test suite (versions 0.9 ... 1.20) reads, the future
 * version is refused naming both versions, the upgraded IR has the current StableHLO forms,
 * a function reads the same from every version that has it, and malformed bytes (truncated,
 * flipped, hand-made bad varints and indices, unknown dialects) are errors that name the
 * section and offset. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
// clang-format off
#include <cmocka.h>
// clang-format on

#include "base/str.h"
#include "compiler/frontend/mlir_bytecode.h"
#include "compiler/frontend/mlir_text.h"
#include "compiler/frontend/stablehlo_to_hlo.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "tests/skip_util.h"

#define VHLO_DIR KILN_SOURCE_DIR "/../shared/stablehlo/stablehlo/tests/vhlo"

static bool read_file(const char *path, char **data, size_t *n) {
  kiln_status s = kiln_read_file(path, data, n);
  if (s) {
    kiln_status_free(s);
    return false;
  }
  return true;
}

static kiln_mlir_module_t *read_bc(const char *name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", VHLO_DIR, name);
  char *data;
  size_t n;
  if (!read_file(path, &data, &n)) return NULL;
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_read_bytecode(data, n, &m);
  if (s) {
    fprintf(stderr, "%s: %s\n", name, kiln_status_message(s));
    kiln_status_free(s);
  }
  free(data);
  return m;
}

/* ---- structural equality of generic IR (values compared by position) ---- */

static bool type_equal(const kiln_mlir_type_t *a, const kiln_mlir_type_t *b);

static bool types_equal(int32_t n, const kiln_mlir_type_t **a, int32_t m,
                        const kiln_mlir_type_t **b) {
  if (n != m) return false;
  for (int32_t i = 0; i < n; i++) {
    if (!type_equal(a[i], b[i])) return false;
  }
  return true;
}

static bool type_equal(const kiln_mlir_type_t *a, const kiln_mlir_type_t *b) {
  if (a == NULL || b == NULL) return a == b;
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case KILN_MLIR_TYPE_INTEGER:
      return a->width == b->width && a->signedness == b->signedness;
    case KILN_MLIR_TYPE_FLOAT:
      return a->elem == b->elem;
    case KILN_MLIR_TYPE_COMPLEX:
      return type_equal(a->element, b->element);
    case KILN_MLIR_TYPE_TENSOR:
      if (a->unranked != b->unranked || a->rank != b->rank || !type_equal(a->element, b->element))
        return false;
      for (int32_t i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i]) return false;
      }
      return (a->encoding == NULL) == (b->encoding == NULL);
    case KILN_MLIR_TYPE_TUPLE:
      return types_equal(a->num_types, a->types, b->num_types, b->types);
    case KILN_MLIR_TYPE_FUNCTION:
      return types_equal(a->num_types, a->types, b->num_types, b->types) &&
             types_equal(a->num_results, a->results, b->num_results, b->results);
    case KILN_MLIR_TYPE_OTHER:
      return strcmp(a->text, b->text) == 0;
    default:
      return true;
  }
}

static bool attr_equal(const kiln_mlir_attr_t *a, const kiln_mlir_attr_t *b);

static bool named_equal(int32_t n, const kiln_mlir_named_attr_t *a, int32_t m,
                        const kiln_mlir_named_attr_t *b) {
  if (n != m) return false;
  /* Attribute order is not significant: look each one up by name. */
  for (int32_t i = 0; i < n; i++) {
    bool found = false;
    for (int32_t j = 0; j < m && !found; j++) {
      if (strcmp(a[i].name, b[j].name) == 0) found = attr_equal(a[i].value, b[j].value);
    }
    if (!found) return false;
  }
  return true;
}

static bool attr_equal(const kiln_mlir_attr_t *a, const kiln_mlir_attr_t *b) {
  if (a == NULL || b == NULL) return a == b;
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case KILN_MLIR_ATTR_BOOL:
      return a->b == b->b;
    case KILN_MLIR_ATTR_INTEGER:
      return a->i == b->i && type_equal(a->type, b->type);
    case KILN_MLIR_ATTR_FLOAT:
      return a->f == b->f && type_equal(a->type, b->type);
    case KILN_MLIR_ATTR_STRING:
      return a->str_len == b->str_len && memcmp(a->str, b->str, a->str_len) == 0;
    case KILN_MLIR_ATTR_TYPE:
      return type_equal(a->type, b->type);
    case KILN_MLIR_ATTR_ARRAY:
      if (a->num_elements != b->num_elements) return false;
      for (int32_t i = 0; i < a->num_elements; i++) {
        if (!attr_equal(a->elements[i], b->elements[i])) return false;
      }
      return true;
    case KILN_MLIR_ATTR_DENSE_ARRAY:
      if (a->num_elements != b->num_elements || !type_equal(a->type, b->type)) return false;
      for (int32_t i = 0; i < a->num_elements; i++) {
        if (a->ints ? a->ints[i] != b->ints[i] : a->floats[i] != b->floats[i]) return false;
      }
      return true;
    case KILN_MLIR_ATTR_DENSE_ELEMENTS:
      return type_equal(a->type, b->type) && kiln_literal_equal(a->literal, b->literal);
    case KILN_MLIR_ATTR_STRUCT:
      if (strcmp(a->dialect, b->dialect) != 0) return false;
      return named_equal(a->num_elements, a->fields, b->num_elements, b->fields);
    case KILN_MLIR_ATTR_DICTIONARY:
      return named_equal(a->num_elements, a->fields, b->num_elements, b->fields);
    case KILN_MLIR_ATTR_SYMBOL_REF:
    case KILN_MLIR_ATTR_OTHER:
      return strcmp(a->str, b->str) == 0;
    case KILN_MLIR_ATTR_ENUM:
      return strcmp(a->enum_name, b->enum_name) == 0 && strcmp(a->str, b->str) == 0;
    default:
      return true;
  }
}

static bool op_equal(const kiln_mlir_op_t *a, const kiln_mlir_op_t *b);

static bool block_equal(const kiln_mlir_block_t *a, const kiln_mlir_block_t *b) {
  if (a->num_args != b->num_args || a->num_ops != b->num_ops) return false;
  for (int32_t i = 0; i < a->num_args; i++) {
    if (!type_equal(a->args[i].type, b->args[i].type)) return false;
  }
  for (int32_t i = 0; i < a->num_ops; i++) {
    if (!op_equal(a->ops[i], b->ops[i])) return false;
  }
  return true;
}

/* Where a value comes from, as (op position in its block or -1 for an argument, index). */
static int32_t value_pos(const kiln_mlir_value_t *v) {
  if (v->def == NULL) return -1 - v->index;
  const kiln_mlir_block_t *blk = NULL;
  (void)blk;
  return v->index;
}

/* Regions, where a body-less function's one empty region counts as none. */
static int32_t num_regions(const kiln_mlir_op_t *op) {
  for (int32_t r = 0; r < op->num_regions; r++) {
    if (op->regions[r].num_blocks > 0) return op->num_regions;
  }
  return 0;
}

static bool op_equal(const kiln_mlir_op_t *a, const kiln_mlir_op_t *b) {
  if (strcmp(a->name, b->name) != 0 || a->num_operands != b->num_operands ||
      a->num_results != b->num_results || num_regions(a) != num_regions(b))
    return false;
  for (int32_t i = 0; i < a->num_results; i++) {
    if (!type_equal(a->results[i].type, b->results[i].type)) return false;
  }
  for (int32_t i = 0; i < a->num_operands; i++) {
    if (value_pos(a->operands[i]) != value_pos(b->operands[i])) return false;
    if ((a->operands[i]->def == NULL) != (b->operands[i]->def == NULL)) return false;
    if (a->operands[i]->def && strcmp(a->operands[i]->def->name, b->operands[i]->def->name) != 0)
      return false;
  }
  if (!named_equal(a->num_attrs, a->attrs, b->num_attrs, b->attrs)) return false;
  for (int32_t r = 0; r < num_regions(a); r++) {
    if (a->regions[r].num_blocks != b->regions[r].num_blocks) return false;
    for (int32_t k = 0; k < a->regions[r].num_blocks; k++) {
      if (!block_equal(&a->regions[r].blocks[k], &b->regions[r].blocks[k])) return false;
    }
  }
  return true;
}

/* Prints the first op (depth-first) where two functions differ, with both attribute lists. */
static bool show_first_difference(const kiln_mlir_op_t *a, const kiln_mlir_op_t *b) {
  bool shallow_equal = strcmp(a->name, b->name) == 0 && a->num_operands == b->num_operands &&
                       a->num_results == b->num_results && num_regions(a) == num_regions(b) &&
                       named_equal(a->num_attrs, a->attrs, b->num_attrs, b->attrs);
  for (int32_t i = 0; shallow_equal && i < a->num_results; i++)
    shallow_equal = type_equal(a->results[i].type, b->results[i].type);
  if (shallow_equal) {
    for (int32_t r = 0; r < num_regions(a); r++) {
      for (int32_t k = 0; k < a->regions[r].num_blocks && k < b->regions[r].num_blocks; k++) {
        const kiln_mlir_block_t *x = &a->regions[r].blocks[k], *y = &b->regions[r].blocks[k];
        for (int32_t i = 0; i < x->num_ops && i < y->num_ops; i++) {
          if (!op_equal(x->ops[i], y->ops[i])) return show_first_difference(x->ops[i], y->ops[i]);
        }
      }
    }
  }
  const kiln_mlir_op_t *ops[2] = {a, b};
  for (int w = 0; w < 2; w++) {
    kiln_strbuf_t buf = {0};
    for (int32_t i = 0; i < ops[w]->num_attrs; i++) {
      kiln_strbuf_printf(&buf, "%s%s = ", i ? ", " : "", ops[w]->attrs[i].name);
      kiln_mlir_attr_print(&buf, ops[w]->attrs[i].value);
    }
    kiln_strbuf_append(&buf, " :");
    for (int32_t i = 0; i < ops[w]->num_results; i++) {
      kiln_strbuf_append(&buf, " ");
      kiln_mlir_type_print(&buf, ops[w]->results[i].type);
    }
    printf("      %s %s {%s}\n", w == 0 ? "bytecode:" : "text:    ", ops[w]->name,
           kiln_strbuf_cstr(&buf));
    kiln_strbuf_free(&buf);
  }
  return true;
}

static const char *func_name(const kiln_mlir_op_t *op) {
  const kiln_mlir_attr_t *s = kiln_mlir_op_attr(op, "sym_name");
  return s && s->kind == KILN_MLIR_ATTR_STRING ? s->str : NULL;
}

/* Every op is in the current dialects, every operand is defined, every func has its name
 * and type. Returns the number of problems (printed). */
static int check_upgraded_ops(const char *file, const kiln_mlir_block_t *blk) {
  int bad = 0;
  for (int32_t i = 0; i < blk->num_ops; i++) {
    const kiln_mlir_op_t *op = blk->ops[i];
    if (!kiln_str_starts_with(op->name, "stablehlo.") && !kiln_str_starts_with(op->name, "func.")) {
      printf("  %s: op %s is not upgraded\n", file, op->name);
      bad++;
    }
    for (int32_t k = 0; k < op->num_operands; k++) {
      if (op->operands[k] == NULL || op->operands[k]->type == NULL) {
        printf("  %s: %s operand %d undefined\n", file, op->name, k);
        bad++;
      }
    }
    for (int32_t k = 0; k < op->num_attrs; k++) {
      const kiln_mlir_attr_t *a = op->attrs[k].value;
      if (a->kind == KILN_MLIR_ATTR_ENUM && strcmp(a->dialect, "stablehlo") != 0) bad++;
    }
    if (strcmp(op->name, "func.func") == 0) {
      const kiln_mlir_attr_t *t = kiln_mlir_op_attr(op, "function_type");
      if (func_name(op) == NULL || t == NULL || t->kind != KILN_MLIR_ATTR_TYPE ||
          t->type->kind != KILN_MLIR_TYPE_FUNCTION) {
        printf("  %s: func.func without sym_name/function_type\n", file);
        bad++;
      }
    }
    for (int32_t r = 0; r < op->num_regions; r++) {
      for (int32_t b = 0; b < op->regions[r].num_blocks; b++)
        bad += check_upgraded_ops(file, &op->regions[r].blocks[b]);
    }
  }
  return bad;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **list_bytecode_files(size_t *count) {
  DIR *d = opendir(VHLO_DIR);
  if (d == NULL) return NULL;
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!kiln_str_ends_with(e->d_name, ".mlir.bc")) continue;
    names = realloc(names, (n + 1) * sizeof(char *));
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof(char *), cmp_names);
  *count = n;
  return names;
}

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static void test_every_vhlo_artifact_reads_and_is_upgraded(void **state) {
  (void)state;
  size_t n = 0;
  char **names = list_bytecode_files(&n);
  if (names == NULL) KILN_SKIP("no %s", VHLO_DIR);
  int valid = 0, ok = 0, refused = 0, invalid = 0;
  for (size_t i = 0; i < n; i++) {
    bool expect_invalid = kiln_str_starts_with(names[i], "invalid_");
    invalid += expect_invalid;
    valid += !expect_invalid;
    kiln_mlir_module_t *m = read_bc(names[i]);
    if (expect_invalid) {
      if (m == NULL)
        refused++;
      else
        printf("  %s: read, but the file is marked invalid\n", names[i]);
    } else if (m == NULL) {
      printf("  %s: FAILED (reason above)\n", names[i]);
    } else if (m->body.num_ops == 0) {
      printf("  %s: FAILED: empty module\n", names[i]);
    } else {
      int bad = check_upgraded_ops(names[i], &m->body);
      if (bad == 0)
        ok++;
      else
        printf("  %s: FAILED: %d ops not in current StableHLO form\n", names[i], bad);
    }
    kiln_mlir_module_destroy(m);
  }
  printf("vhlo bytecode: %d/%d artifacts read and upgraded, %d/%d invalid ones refused\n", ok,
         valid, refused, invalid);
  free_names(names, n);
  assert_true(valid >= 30);
  assert_int_equal(ok, valid);
  assert_int_equal(refused, invalid);
}

static void test_future_version_is_refused_naming_both_versions(void **state) {
  (void)state;
  char *data;
  size_t n;
  if (!read_file(VHLO_DIR "/invalid_vhlo_future.mlir.bc", &data, &n))
    KILN_SKIP("no invalid_vhlo_future.mlir.bc");
  kiln_mlir_module_t *m = (kiln_mlir_module_t *)1;
  kiln_status s = kiln_mlir_read_bytecode(data, n, &m);
  assert_non_null(s);
  assert_null(m);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  printf("%s\n", kiln_status_message(s));
  assert_non_null(strstr(kiln_status_message(s), "2.0.0"));
  assert_non_null(strstr(kiln_status_message(s), "1.20.0"));
  kiln_status_free(s);
  free(data);
}

static const kiln_mlir_op_t *first_op_named(const kiln_mlir_block_t *blk, const char *name) {
  for (int32_t i = 0; i < blk->num_ops; i++) {
    if (strcmp(blk->ops[i]->name, name) == 0) return blk->ops[i];
    for (int32_t r = 0; r < blk->ops[i]->num_regions; r++) {
      for (int32_t b = 0; b < blk->ops[i]->regions[r].num_blocks; b++) {
        const kiln_mlir_op_t *o = first_op_named(&blk->ops[i]->regions[r].blocks[b], name);
        if (o) return o;
      }
    }
  }
  return NULL;
}

static const kiln_mlir_op_t *op_in_func(const kiln_mlir_module_t *m, const char *func,
                                        const char *name) {
  const kiln_mlir_op_t *f = kiln_mlir_module_func(m, func);
  if (f == NULL || f->num_regions != 1 || f->regions[0].num_blocks != 1) return NULL;
  return first_op_named(&f->regions[0].blocks[0], name);
}

static void test_upgrade_gives_current_stablehlo_forms(void **state) {
  (void)state;
  kiln_mlir_module_t *m = read_bc("stablehlo_legalize_to_vhlo.1_20_0.mlir.bc");
  if (m == NULL) KILN_SKIP("stablehlo_legalize_to_vhlo.1_20_0.mlir.bc unreadable or absent");
  /* vhlo.compare_v1 + #vhlo<comparison_direction_v1 EQ> -> stablehlo.compare + ENUM. */
  const kiln_mlir_op_t *cmp = op_in_func(m, "attr_comparison_direction_eq", "stablehlo.compare");
  assert_non_null(cmp);
  const kiln_mlir_attr_t *dir = kiln_mlir_op_attr(cmp, "comparison_direction");
  assert_non_null(dir);
  assert_int_equal(dir->kind, KILN_MLIR_ATTR_ENUM);
  assert_string_equal(dir->enum_name, "comparison_direction");
  assert_string_equal(dir->str, "EQ");
  assert_null(kiln_mlir_op_attr(cmp, "compare_type")); /* NOTYPE is the absent default */
  /* func_v1 / return_v1 -> func.func / func.return; a function's entry block args typed. */
  const kiln_mlir_op_t *f = kiln_mlir_module_func(m, "attr_comparison_direction_eq");
  assert_non_null(f);
  assert_string_equal(f->name, "func.func");
  assert_int_equal(f->regions[0].blocks[0].num_args, 2);
  assert_int_equal(f->regions[0].blocks[0].args[0].type->kind, KILN_MLIR_TYPE_TENSOR);
  assert_string_equal(f->regions[0].blocks[0].ops[1]->name, "func.return");
  assert_ptr_equal(f->regions[0].blocks[0].ops[1]->operands[0], &cmp->results[0]);
  /* The four dot_general lists become one #stablehlo.dot struct. */
  const kiln_mlir_op_t *dot = first_op_named(&m->body, "stablehlo.dot_general");
  assert_non_null(dot);
  const kiln_mlir_attr_t *dn = kiln_mlir_op_attr(dot, "dot_dimension_numbers");
  assert_non_null(dn);
  assert_int_equal(dn->kind, KILN_MLIR_ATTR_STRUCT);
  assert_string_equal(dn->dialect, "stablehlo.dot");
  const kiln_mlir_attr_t *lc = kiln_mlir_attr_field(dn, "lhs_contracting_dimensions");
  assert_non_null(lc);
  assert_int_equal(lc->kind, KILN_MLIR_ATTR_DENSE_ARRAY);
  assert_null(kiln_mlir_op_attr(dot, "lhs_batching_dimensions"));
  /* i64 tensors StableHLO holds as array<i64: ...> are dense arrays; replica groups stay dense. */
  const kiln_mlir_op_t *tr = first_op_named(&m->body, "stablehlo.transpose");
  assert_non_null(tr);
  const kiln_mlir_attr_t *perm = kiln_mlir_op_attr(tr, "permutation");
  assert_int_equal(perm->kind, KILN_MLIR_ATTR_DENSE_ARRAY);
  assert_int_equal(perm->num_elements, 2);
  assert_int_equal(perm->ints[0], 1);
  assert_int_equal(perm->ints[1], 0);
  const kiln_mlir_op_t *ar = first_op_named(&m->body, "stablehlo.all_reduce");
  assert_non_null(ar);
  assert_int_equal(kiln_mlir_op_attr(ar, "replica_groups")->kind, KILN_MLIR_ATTR_DENSE_ELEMENTS);
  assert_int_equal(ar->num_regions, 1);
  assert_string_equal(first_op_named(&ar->regions[0].blocks[0], "stablehlo.return")->name,
                      "stablehlo.return");
  /* send/recv channel id + type -> #stablehlo.channel_handle. */
  const kiln_mlir_op_t *send = first_op_named(&m->body, "stablehlo.send");
  assert_non_null(send);
  const kiln_mlir_attr_t *ch = kiln_mlir_op_attr(send, "channel_handle");
  assert_non_null(ch);
  assert_string_equal(ch->dialect, "stablehlo.channel_handle");
  assert_non_null(kiln_mlir_attr_field(ch, "type"));
  /* Constants carry their literal. */
  const kiln_mlir_op_t *c = first_op_named(&m->body, "stablehlo.constant");
  assert_non_null(c);
  const kiln_mlir_attr_t *v = kiln_mlir_op_attr(c, "value");
  assert_int_equal(v->kind, KILN_MLIR_ATTR_DENSE_ELEMENTS);
  assert_non_null(v->literal);
  kiln_mlir_module_destroy(m);
}

/* Test functions whose source text changed between the versions' files (not the reader's
 * doing): send/recv gained source_target_pairs in 1.12's file, dynamic_conv's padding operand
 * went from i32 to i64, byte_packed_boolean gained a fifth constant. */
static const char *const kChangedTests[] = {"default_send", "op_dynamic_conv",
                                            "default_dynamic_conv", "byte_packed_boolean", NULL};

static bool in_list(const char *s, const char *const *list) {
  for (; *list; list++) {
    if (strcmp(s, *list) == 0) return true;
  }
  return false;
}

/* A function of the same name reads the same from every version that has it. */
static void test_functions_read_the_same_from_every_version(void **state) {
  (void)state;
  size_t n = 0;
  char **names = list_bytecode_files(&n);
  if (names == NULL) KILN_SKIP("no %s", VHLO_DIR);
  kiln_mlir_module_t *ref = read_bc("stablehlo_legalize_to_vhlo.1_20_0.mlir.bc");
  if (ref == NULL) {
    free_names(names, n);
    KILN_SKIP("no 1.20 artifact");
  }
  int same = 0, differ = 0, changed = 0;
  for (size_t i = 0; i < n; i++) {
    if (!kiln_str_starts_with(names[i], "stablehlo_legalize_to_vhlo.")) continue;
    kiln_mlir_module_t *m = read_bc(names[i]);
    assert_non_null(m);
    for (int32_t k = 0; k < m->body.num_ops; k++) {
      const char *fn = func_name(m->body.ops[k]);
      const kiln_mlir_op_t *other = fn ? kiln_mlir_module_func(ref, fn) : NULL;
      if (other == NULL) continue;
      if (op_equal(m->body.ops[k], other)) {
        same++;
      } else if (in_list(fn, kChangedTests)) {
        changed++;
      } else {
        differ++;
        printf("  %s: @%s differs from 1.20.0\n", names[i], fn);
      }
    }
    kiln_mlir_module_destroy(m);
  }
  printf("functions equal to their 1.20.0 reading: %d, whose source changed: %d, different: %d\n",
         same, changed, differ);
  kiln_mlir_module_destroy(ref);
  free_names(names, n);
  assert_true(same > 6000);
  assert_int_equal(differ, 0);
}

/* Every prefix of a real artifact is refused with a message naming a section and offset,
 * and a byte changed anywhere never crashes (ASan builds check the reads). */
static void test_truncated_and_corrupted_files_fail_cleanly(void **state) {
  (void)state;
  char *data;
  size_t n;
  if (!read_file(VHLO_DIR "/vhlo_emit_version_api.1_1_0.mlir.bc", &data, &n))
    KILN_SKIP("no vhlo_emit_version_api.1_1_0.mlir.bc");
  for (size_t len = 0; len < n; len++) {
    char *copy = malloc(len ? len : 1);
    memcpy(copy, data, len);
    kiln_mlir_module_t *m = NULL;
    kiln_status s = kiln_mlir_read_bytecode(copy, len, &m);
    if (s == NULL) fail_msg("prefix of %zu bytes was accepted", len);
    assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
    const char *msg = kiln_status_message(s);
    if (len >= 4 && (strstr(msg, "section") == NULL || strstr(msg, "offset") == NULL))
      fail_msg("prefix %zu: '%s' names no section/offset", len, msg);
    kiln_status_free(s);
    free(copy);
  }
  int accepted = 0, refused = 0;
  for (size_t at = 4; at < n; at++) {
    static const uint8_t kValues[] = {0x00, 0x01, 0xff, 0x80, 0x7f};
    for (size_t k = 0; k < sizeof(kValues); k++) {
      char *copy = malloc(n);
      memcpy(copy, data, n);
      if ((uint8_t)copy[at] == kValues[k])
        copy[at] ^= 0x55;
      else
        copy[at] = (char)kValues[k];
      kiln_mlir_module_t *m = NULL;
      kiln_status s = kiln_mlir_read_bytecode(copy, n, &m);
      if (s) {
        assert_null(m);
        /* Malformed, or a well-formed splat too large to expand. */
        if (kiln_status_code(s) != KILN_INVALID_ARGUMENT)
          assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
        refused++;
      } else {
        assert_non_null(m);
        accepted++;
      }
      kiln_status_free(s);
      kiln_mlir_module_destroy(m);
      free(copy);
    }
  }
  printf("corrupted artifacts: %d refused, %d still well-formed\n", refused, accepted);
  assert_true(refused > accepted);
  free(data);
}

/* ---- hand-made files ---- */

typedef struct bytes {
  uint8_t b[512];
  size_t n;
} bytes_t;

static void put(bytes_t *o, const void *p, size_t n) {
  memcpy(o->b + o->n, p, n);
  o->n += n;
}
static void put_byte(bytes_t *o, uint8_t v) {
  o->b[o->n++] = v;
}
static void put_varint(bytes_t *o, uint64_t v) { /* up to 14 bits */
  if (v < 128) {
    put_byte(o, (uint8_t)(v << 1 | 1));
  } else {
    uint16_t w = (uint16_t)(v << 2 | 2);
    put(o, &w, 2);
  }
}
static void put_section(bytes_t *o, uint8_t id, const bytes_t *s) {
  put_byte(o, id);
  put_varint(o, s->n);
  put(o, s->b, s->n);
}

/* A version-6 file: strings {"builtin", "module", dialect2}, dialect 0 builtin, op names
 * builtin.module (registered); an attr/type section given by the caller; IR as given. */
static bytes_t make_file(const bytes_t *attrs, const bytes_t *offsets, const bytes_t *ir,
                         const char *dialect2) {
  bytes_t f = {0}, s = {0}, d = {0}, props = {0};
  put(&f, "ML\xefR", 4);
  put_varint(&f, 6);
  put(&f, "kiln-test", 10);
  const char *strs[] = {"builtin", "module", dialect2};
  put_varint(&s, 3);
  for (int i = 2; i >= 0; i--) put_varint(&s, strlen(strs[i]) + 1);
  for (int i = 0; i < 3; i++) put(&s, strs[i], strlen(strs[i]) + 1);
  put_section(&f, 0, &s);
  put_varint(&d, 2);
  put_varint(&d, 0 << 1); /* builtin, no version */
  put_varint(&d, 2 << 1); /* dialect2, no version */
  put_varint(&d, 1);      /* one op name */
  put_varint(&d, 0);      /* group: dialect 0 */
  put_varint(&d, 1);
  put_varint(&d, 1 << 1 | 1); /* "module", registered */
  put_section(&f, 1, &d);
  put_section(&f, 2, attrs);
  put_section(&f, 3, offsets);
  put_section(&f, 4, ir);
  put_section(&f, 8, &props);
  return f;
}

static char *expect_error(const bytes_t *f) {
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_read_bytecode(f->b, f->n, &m);
  assert_non_null(s);
  assert_null(m);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  char *msg = strdup(kiln_status_message(s));
  printf("  %s\n", msg);
  kiln_status_free(s);
  return msg;
}

static void test_bad_varints_indices_and_dialects_name_section_and_offset(void **state) {
  (void)state;
  /* A 9-byte varint cut short in the header. */
  bytes_t f = {0};
  put(&f, "ML\xefR", 4);
  put_byte(&f, 0x00);
  put_byte(&f, 0x01);
  char *msg = expect_error(&f);
  assert_non_null(strstr(msg, "header section, offset 4"));
  assert_non_null(strstr(msg, "varint"));
  free(msg);
  /* A container version from the future. */
  f.n = 4;
  put_varint(&f, 7);
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "bytecode version 7"));
  free(msg);
  /* One attribute: builtin unknown-location (code 15); IR with an op name index out of range. */
  bytes_t attrs = {0}, offs = {0}, ir = {0};
  put_varint(&attrs, 15);
  put_varint(&offs, 1); /* attrs */
  put_varint(&offs, 0); /* types */
  put_varint(&offs, 0); /* dialect 0 */
  put_varint(&offs, 1);
  put_varint(&offs, 1 << 1 | 1); /* one byte, custom */
  put_varint(&ir, 1 << 1);       /* one op, no args */
  put_varint(&ir, 5);            /* op name 5 of 1 */
  f = make_file(&attrs, &offs, &ir, "foo");
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "IR section, offset"));
  assert_non_null(strstr(msg, "op name index 5 out of range"));
  free(msg);
  /* The location attribute index out of range. */
  ir.n = 0;
  put_varint(&ir, 1 << 1);
  put_varint(&ir, 0);  /* builtin.module */
  put_byte(&ir, 0x00); /* nothing but the location */
  put_varint(&ir, 9);  /* attribute 9 of 1 */
  f = make_file(&attrs, &offs, &ir, "foo");
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "IR section, offset"));
  assert_non_null(strstr(msg, "attribute index 9 out of range"));
  free(msg);
  /* An attribute of an unknown dialect with a custom encoding. */
  offs.n = 0;
  put_varint(&offs, 1);
  put_varint(&offs, 0);
  put_varint(&offs, 1); /* dialect 1: "foo" */
  put_varint(&offs, 1);
  put_varint(&offs, 1 << 1 | 1);
  ir.n = 0;
  put_varint(&ir, 1 << 1);
  put_varint(&ir, 0);
  put_byte(&ir, 0x00);
  put_varint(&ir, 0);
  f = make_file(&attrs, &offs, &ir, "foo");
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "attribute/type section, offset"));
  assert_non_null(strstr(msg, "dialect 'foo'"));
  free(msg);
  /* A dialect index out of range in the offsets table. */
  offs.b[2] = (uint8_t)(7 << 1 | 1);
  f = make_file(&attrs, &offs, &ir, "foo");
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "attribute/type offset section, offset"));
  assert_non_null(strstr(msg, "dialect index 7 out of range"));
  free(msg);
  /* A splat constant of 4096^3 f32 is refused before it is expanded. */
  {
    bytes_t big_attrs = {0}, big_offs = {0}, big_ir = {0};
    put_varint(&big_attrs, 18); /* dense int-or-fp elements */
    put_varint(&big_attrs, 0);  /* type 0 */
    put_varint(&big_attrs, 4);
    put(&big_attrs, "\0\0\0\0", 4);
    size_t attr_len = big_attrs.n;
    put_varint(&big_attrs, 13); /* type 0: ranked tensor 4096x4096x4096 of type 1 */
    put_varint(&big_attrs, 3);
    for (int i = 0; i < 3; i++) put_varint(&big_attrs, 4096 * 2);
    put_varint(&big_attrs, 1);
    size_t type0_len = big_attrs.n - attr_len;
    put_varint(&big_attrs, 5); /* type 1: f32 */
    put_varint(&big_offs, 1);
    put_varint(&big_offs, 2);
    put_varint(&big_offs, 0);
    put_varint(&big_offs, 1);
    put_varint(&big_offs, attr_len << 1 | 1);
    put_varint(&big_offs, 0);
    put_varint(&big_offs, 2);
    put_varint(&big_offs, type0_len << 1 | 1);
    put_varint(&big_offs, 1 << 1 | 1);
    put_varint(&big_ir, 1 << 1);
    put_varint(&big_ir, 0);
    put_byte(&big_ir, 0x00);
    put_varint(&big_ir, 0); /* its location: the constant */
    f = make_file(&big_attrs, &big_offs, &big_ir, "foo");
    kiln_mlir_module_t *m = NULL;
    kiln_status s = kiln_mlir_read_bytecode(f.b, f.n, &m);
    assert_non_null(s);
    assert_null(m);
    assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
    printf("  %s\n", kiln_status_message(s));
    assert_non_null(strstr(kiln_status_message(s), "68719476736 elements"));
    kiln_status_free(s);
  }
  /* A well-formed file of an empty module with the unknown location reads. */
  offs.b[2] = 0 << 1 | 1;
  ir.n = 0;
  put_varint(&ir, 1 << 1);
  put_varint(&ir, 0);
  put_byte(&ir, 0x10); /* regions */
  put_varint(&ir, 0);
  put_varint(&ir, 1 << 1 | 1); /* one region, isolated */
  bytes_t region = {0};
  put_varint(&region, 0); /* no blocks */
  put_section(&ir, 4, &region);
  f = make_file(&attrs, &offs, &ir, "foo");
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_read_bytecode(f.b, f.n, &m);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_non_null(m);
  assert_int_equal(m->body.num_ops, 0);
  kiln_mlir_module_destroy(m);
  /* The fuzzer's find: two strings, the first's 10 bytes a 9-byte varint and its NUL, so the
   * second size is read from the first string's data and its (huge) value must not index. */
  bytes_t strs = {0};
  put_varint(&strs, 2);
  put_varint(&strs, 10);
  static const uint8_t kData[10] = {0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
  put(&strs, kData, sizeof kData);
  f.n = 0;
  put(&f, "ML\xefR", 4);
  put_varint(&f, 6);
  put(&f, "kiln-test", 10);
  put_section(&f, 0, &strs);
  bytes_t empty = {0};
  for (uint8_t id = 1; id <= 4; id++) put_section(&f, id, &empty);
  put_section(&f, 8, &empty);
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "the size of string 0 runs into the string data"));
  free(msg);
}

/* A module whose attribute `kiln.w = dense_resource<module> : tensor<3xi32>` names a blob of
 * the builtin dialect's resources (bytecode resource sections, hand-encoded after MLIR's
 * BytecodeFormat: an external group that is skipped, a bool entry before the blob, the blob
 * 4-aligned in the file with 0xCB padding). `elems` is the tensor's length, `handle` the
 * resource index, `pad_byte` the padding. */
static bytes_t make_resource_file(int elems, int handle, uint8_t pad_byte) {
  bytes_t attrs = {0}, offs = {0}, ir = {0}, res = {0}, roff = {0};
  size_t len[6];
  size_t at = attrs.n;
  put_varint(&attrs, 15); /* attr 0: unknown loc */
  len[0] = attrs.n - at, at = attrs.n;
  put_varint(&attrs, 2); /* attr 1: string "kiln.w" (string 2) */
  put_varint(&attrs, 2);
  len[1] = attrs.n - at, at = attrs.n;
  put_varint(&attrs, 16); /* attr 2: dense resource of type 0, handle */
  put_varint(&attrs, 0);
  put_varint(&attrs, (uint64_t)handle);
  len[2] = attrs.n - at, at = attrs.n;
  put_varint(&attrs, 1); /* attr 3: dictionary {attr 1 = attr 2} */
  put_varint(&attrs, 1);
  put_varint(&attrs, 1);
  put_varint(&attrs, 2);
  len[3] = attrs.n - at, at = attrs.n;
  put_varint(&attrs, 13); /* type 0: tensor<elems x type 1> */
  put_varint(&attrs, 1);
  put_varint(&attrs, (uint64_t)elems * 2);
  put_varint(&attrs, 1);
  len[4] = attrs.n - at, at = attrs.n;
  put_varint(&attrs, 0); /* type 1: integer, i32 (width << 2, signless) */
  put_varint(&attrs, 32 << 2);
  len[5] = attrs.n - at;
  put_varint(&offs, 4);
  put_varint(&offs, 2);
  put_varint(&offs, 0);
  put_varint(&offs, 4);
  for (int i = 0; i < 4; i++) put_varint(&offs, len[i] << 1 | 1);
  put_varint(&offs, 0);
  put_varint(&offs, 2);
  for (int i = 4; i < 6; i++) put_varint(&offs, len[i] << 1 | 1);
  put_varint(&ir, 1 << 1);
  put_varint(&ir, 0);  /* builtin.module */
  put_byte(&ir, 0x11); /* attributes, regions */
  put_varint(&ir, 0);  /* location */
  put_varint(&ir, 3);  /* attribute dictionary */
  put_varint(&ir, 1 << 1 | 1);
  bytes_t region = {0};
  put_varint(&region, 0);
  put_section(&ir, 4, &region);
  bytes_t f = make_file(&attrs, &offs, &ir, "kiln.w");
  /* The resource section's data starts after its id and one-byte length. */
  size_t data_at = f.n + 2;
  put_byte(&res, 1); /* the external group's bool entry */
  size_t blob_at = res.n;
  put_varint(&res, 4);  /* alignment */
  put_varint(&res, 12); /* size */
  while ((data_at + res.n) % 4 != 0) put_byte(&res, pad_byte);
  static const int32_t kVals[3] = {1, -2, 0x01020304};
  put(&res, kVals, sizeof kVals);
  put_varint(&roff, 1); /* one external group: "builtin" (string 0), one bool entry */
  put_varint(&roff, 0);
  put_varint(&roff, 1);
  put_varint(&roff, 1);
  put_varint(&roff, 1);
  put_byte(&roff, 1);
  put_varint(&roff, 0); /* dialect 0 (builtin): one blob keyed "module" (string 1) */
  put_varint(&roff, 1);
  put_varint(&roff, 1);
  put_varint(&roff, res.n - blob_at);
  put_byte(&roff, 0);
  put_section(&f, 5, &res);
  put_section(&f, 6, &roff);
  return f;
}

/* A module as JAX 0.11 sends it with Shardy on: `sdy.mesh @grid = <["x"=2, "y"=4]>` at its
 * top, a registered op of a dialect kiln does not otherwise know, whose properties are its two
 * attributes sorted by name (mesh, textual since Shardy has no bytecode encoding; sym_name);
 * `mesh_index` replaces the mesh's attribute index (one out of range must not stop the read). */
static bytes_t make_sdy_mesh_file(uint64_t mesh_index) {
  static const char kMesh[] = "#sdy.mesh<[\"x\"=2, \"y\"=4]>";
  bytes_t f = {0}, s = {0}, d = {0}, attrs = {0}, offs = {0}, ir = {0}, region = {0}, props = {0};
  put(&f, "ML\xefR", 4);
  put_varint(&f, 6);
  put(&f, "kiln-test", 10);
  const char *strs[] = {"builtin", "module", "sdy", "mesh", "grid"};
  put_varint(&s, 5);
  for (int i = 4; i >= 0; i--) put_varint(&s, strlen(strs[i]) + 1);
  for (int i = 0; i < 5; i++) put(&s, strs[i], strlen(strs[i]) + 1);
  put_section(&f, 0, &s);
  put_varint(&d, 2);
  put_varint(&d, 0 << 1); /* builtin */
  put_varint(&d, 2 << 1); /* sdy */
  put_varint(&d, 2);      /* two op names */
  put_varint(&d, 0);      /* builtin: module, registered */
  put_varint(&d, 1);
  put_varint(&d, 1 << 1 | 1);
  put_varint(&d, 1); /* sdy: mesh, registered */
  put_varint(&d, 1);
  put_varint(&d, 3 << 1 | 1);
  put_section(&f, 1, &d);
  put_varint(&attrs, 15); /* attr 0: unknown location */
  put_varint(&attrs, 2);  /* attr 1: string "grid" (string 4) */
  put_varint(&attrs, 4);
  put(&attrs, kMesh, sizeof kMesh); /* attr 2: sdy's, as text */
  put_varint(&offs, 3);
  put_varint(&offs, 0);
  put_varint(&offs, 0); /* builtin: two custom-encoded */
  put_varint(&offs, 2);
  put_varint(&offs, 1 << 1 | 1);
  put_varint(&offs, 2 << 1 | 1);
  put_varint(&offs, 1); /* sdy: one textual */
  put_varint(&offs, 1);
  put_varint(&offs, sizeof kMesh << 1);
  put_section(&f, 2, &attrs);
  put_section(&f, 3, &offs);
  put_varint(&ir, 1 << 1); /* one op, no block arguments */
  put_varint(&ir, 0);      /* builtin.module */
  put_byte(&ir, 0x10);     /* regions */
  put_varint(&ir, 0);
  put_varint(&ir, 1 << 1 | 1); /* one region, isolated */
  put_varint(&region, 1);      /* one block */
  put_varint(&region, 0);      /* no values */
  put_varint(&region, 1 << 1); /* one op */
  put_varint(&region, 1);      /* sdy.mesh */
  put_byte(&region, 0x40);     /* properties */
  put_varint(&region, 0);
  put_varint(&region, 0); /* properties entry 0 */
  put_section(&ir, 4, &region);
  put_section(&f, 4, &ir);
  put_varint(&props, 1);
  put_varint(&props, 2);
  put_varint(&props, mesh_index);
  put_varint(&props, 1);
  put_section(&f, 8, &props);
  return f;
}

static void test_shardy_mesh_op_reads_with_its_properties(void **state) {
  (void)state;
  for (int bad = 0; bad < 2; bad++) {
    bytes_t f = make_sdy_mesh_file(bad ? 60 : 2);
    kiln_mlir_module_t *m = NULL;
    kiln_status s = kiln_mlir_read_bytecode(f.b, f.n, &m);
    if (s) fail_msg("%s", kiln_status_message(s));
    assert_int_equal(m->body.num_ops, 1);
    const kiln_mlir_op_t *op = m->body.ops[0];
    assert_string_equal(op->name, "sdy.mesh");
    const kiln_mlir_attr_t *sym = kiln_mlir_op_attr(op, "sym_name");
    const kiln_mlir_attr_t *mesh = kiln_mlir_op_attr(op, "mesh");
    if (bad) {
      assert_null(mesh); /* out of range: left out, and the rest is not read */
      assert_null(sym);
    } else {
      assert_non_null(sym);
      assert_int_equal(sym->kind, KILN_MLIR_ATTR_STRING);
      assert_int_equal(sym->str_len, 4);
      assert_memory_equal(sym->str, "grid", 4);
      assert_non_null(mesh);
      assert_string_equal(mesh->str, "#sdy.mesh<[\"x\"=2, \"y\"=4]>");
    }
    kiln_mlir_module_destroy(m);
  }
}

static void test_dense_resource_blobs_are_read(void **state) {
  (void)state;
  bytes_t f = make_resource_file(3, 0, 0xCB);
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_read_bytecode(f.b, f.n, &m);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(m->num_attrs, 1);
  assert_string_equal(m->attrs[0].name, "kiln.w");
  const kiln_mlir_attr_t *a = m->attrs[0].value;
  assert_int_equal(a->kind, KILN_MLIR_ATTR_DENSE_ELEMENTS);
  assert_int_equal(a->literal->num_elements, 3);
  assert_int_equal(kiln_literal_get_s64(a->literal, 0), 1);
  assert_int_equal(kiln_literal_get_s64(a->literal, 1), -2);
  assert_int_equal(kiln_literal_get_s64(a->literal, 2), 0x01020304);
  kiln_mlir_module_destroy(m);
  /* A wrong padding byte, a handle out of range, a blob of the wrong size. */
  f = make_resource_file(3, 0, 0x00);
  char *msg = expect_error(&f);
  assert_non_null(strstr(msg, "resource section, offset"));
  assert_non_null(strstr(msg, "is not 0xCB"));
  free(msg);
  f = make_resource_file(3, 5, 0xCB);
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "resource handle 5 out of range (1 resources)"));
  free(msg);
  f = make_resource_file(4, 0, 0xCB);
  msg = expect_error(&f);
  assert_non_null(strstr(msg, "dense_resource<module> holds 12 bytes, its type needs 4 elements"));
  free(msg);
  /* Every prefix of the file is refused cleanly. */
  f = make_resource_file(3, 0, 0xCB);
  for (size_t n = 0; n < f.n; n++) {
    s = kiln_mlir_read_bytecode(f.b, n, &m);
    assert_non_null(s);
    assert_null(m);
    kiln_status_free(s);
  }
}

/* What the text twins spell that the artifact cannot carry, made alike before comparing: an
 * attribute written at its default value (api_version = 1, the default result_accuracy) is
 * absent after VHLO's round trip; and a float attribute of type f32 holds the f32 value the
 * decimal rounds to (mlir_ir.h: the double holds the narrower format's value exactly), which
 * the text reader leaves unrounded. */
static void normalize_text_twin(kiln_mlir_block_t *blk) {
  for (int32_t i = 0; i < blk->num_ops; i++) {
    kiln_mlir_op_t *op = blk->ops[i];
    int32_t n = 0;
    for (int32_t k = 0; k < op->num_attrs; k++) {
      kiln_mlir_attr_t *v = (kiln_mlir_attr_t *)op->attrs[k].value;
      const char *name = op->attrs[k].name;
      if (strcmp(name, "api_version") == 0 && v->kind == KILN_MLIR_ATTR_INTEGER && v->i == 1)
        continue;
      if (strcmp(name, "result_accuracy") == 0 && v->kind == KILN_MLIR_ATTR_STRUCT) {
        const kiln_mlir_attr_t *mode = kiln_mlir_attr_field(v, "mode");
        const kiln_mlir_attr_t *atol = kiln_mlir_attr_field(v, "atol"),
                               *rtol = kiln_mlir_attr_field(v, "rtol");
        const kiln_mlir_attr_t *ulps = kiln_mlir_attr_field(v, "ulps");
        if (mode && mode->str && strcmp(mode->str, "DEFAULT") == 0 && (!atol || atol->f == 0) &&
            (!rtol || rtol->f == 0) && (!ulps || ulps->i == 0))
          continue;
      }
      if (v->kind == KILN_MLIR_ATTR_FLOAT && v->type && v->type->kind == KILN_MLIR_TYPE_FLOAT &&
          v->type->elem == KILN_F32)
        v->f = (double)(float)v->f;
      op->attrs[n++] = op->attrs[k];
    }
    op->num_attrs = n;
    for (int32_t r = 0; r < op->num_regions; r++) {
      for (int32_t b = 0; b < op->regions[r].num_blocks; b++)
        normalize_text_twin(&op->regions[r].blocks[b]);
    }
  }
}

/* Each artifact against its text twin (the StableHLO program the artifact was serialized
 * from): every function reads to the same generic IR, and converts to the same HLO. */
static char *convert_to_hlo_text(const kiln_mlir_module_t *m, const char *entry, char **err) {
  kiln_hlo_module_t *h = NULL;
  kiln_status s = kiln_stablehlo_to_hlo(m, entry, &h);
  if (s) {
    *err = strdup(kiln_status_message(s));
    kiln_status_free(s);
    return NULL;
  }
  char *text = kiln_hlo_module_to_string(h);
  char *copy = strdup(text);
  kiln_free(text);
  kiln_hlo_module_destroy(h);
  *err = NULL;
  return copy;
}

static void test_each_artifact_reads_and_converts_as_its_text_twin(void **state) {
  (void)state;
  size_t n = 0;
  char **names = list_bytecode_files(&n);
  if (names == NULL) KILN_SKIP("no %s", VHLO_DIR);
  int files = 0, ir_same = 0, ir_differ = 0, missing = 0;
  int hlo_same = 0, hlo_differ = 0, hlo_both_refused = 0, hlo_one_refused = 0;
  for (size_t i = 0; i < n; i++) {
    if (kiln_str_starts_with(names[i], "invalid_")) continue;
    char twin[1024], *text;
    size_t len;
    snprintf(twin, sizeof(twin), "%s/%.*s", VHLO_DIR, (int)(strlen(names[i]) - 3), names[i]);
    if (!read_file(twin, &text, &len)) continue;
    kiln_mlir_module_t *t = NULL;
    kiln_status s = kiln_mlir_parse_text(text, len, twin, &t);
    free(text);
    if (s) {
      printf("  %s: text twin unreadable: %s\n", names[i], kiln_status_message(s));
      kiln_status_free(s);
      ir_differ++;
      continue;
    }
    normalize_text_twin(&t->body);
    kiln_mlir_module_t *b = read_bc(names[i]);
    assert_non_null(b);
    files++;
    int shown = 0;
    for (int32_t k = 0; k < t->body.num_ops; k++) {
      const char *fn = func_name(t->body.ops[k]);
      if (fn == NULL) continue;
      const kiln_mlir_op_t *bf = kiln_mlir_module_func(b, fn);
      if (bf == NULL) {
        printf("  %s: @%s missing from the artifact\n", names[i], fn);
        missing++;
        continue;
      }
      if (op_equal(bf, t->body.ops[k])) {
        ir_same++;
      } else {
        ir_differ++;
        if (shown++ < 3) {
          printf("  %s: @%s reads differently from its text\n", names[i], fn);
          show_first_difference(bf, t->body.ops[k]);
        }
      }
      char *e1, *e2;
      char *h1 = convert_to_hlo_text(b, fn, &e1), *h2 = convert_to_hlo_text(t, fn, &e2);
      if (h1 && h2) {
        if (strcmp(h1, h2) == 0) {
          hlo_same++;
        } else {
          hlo_differ++;
          printf("  %s: @%s converts to different HLO:\n--- bytecode\n%s--- text\n%s", names[i], fn,
                 h1, h2);
        }
      } else if (!h1 && !h2) {
        hlo_both_refused++;
      } else {
        hlo_one_refused++;
        printf("  %s: @%s: only the %s converts (%s)\n", names[i], fn, h1 ? "bytecode" : "text",
               h1 ? e2 : e1);
      }
      free(h1);
      free(h2);
      free(e1);
      free(e2);
    }
    kiln_mlir_module_destroy(t);
    kiln_mlir_module_destroy(b);
  }
  free_names(names, n);
  printf(
      "artifacts vs text twins (%d files): generic IR equal for %d functions, different for %d, "
      "missing %d\n",
      files, ir_same, ir_differ, missing);
  printf("  converted HLO: same %d, different %d, refused by both %d, by one side only %d\n",
         hlo_same, hlo_differ, hlo_both_refused, hlo_one_refused);
  assert_true(files >= 30);
  assert_int_equal(missing, 0);
  assert_int_equal(ir_differ, 0);
  assert_true(ir_same > 6500);
  assert_int_equal(hlo_differ, 0);
  assert_int_equal(hlo_one_refused, 0);
  assert_true(hlo_same > 0);
}

static void test_magic_detection(void **state) {
  (void)state;
  assert_true(kiln_mlir_bytes_are_bytecode("ML\xefR\x0d", 5));
  assert_false(kiln_mlir_bytes_are_bytecode("ML\xefR", 3));
  assert_false(kiln_mlir_bytes_are_bytecode("module {}", 9));
  assert_false(kiln_mlir_bytes_are_bytecode(NULL, 0));
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_read_bytecode("module {}", 9, &m);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "magic"));
  kiln_status_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_vhlo_artifact_reads_and_is_upgraded),
      cmocka_unit_test(test_dense_resource_blobs_are_read),
      cmocka_unit_test(test_shardy_mesh_op_reads_with_its_properties),
      cmocka_unit_test(test_future_version_is_refused_naming_both_versions),
      cmocka_unit_test(test_upgrade_gives_current_stablehlo_forms),
      cmocka_unit_test(test_functions_read_the_same_from_every_version),
      cmocka_unit_test(test_each_artifact_reads_and_converts_as_its_text_twin),
      cmocka_unit_test(test_truncated_and_corrupted_files_fail_cleanly),
      cmocka_unit_test(test_bad_varints_indices_and_dialects_name_section_and_offset),
      cmocka_unit_test(test_magic_detection),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
