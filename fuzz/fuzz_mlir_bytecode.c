/* libFuzzer target for the MLIR bytecode reader (container, builtin and VHLO encodings, VHLO
 * upgrade). Whatever reads is walked end to end, so every pointer the reader hands out is
 * dereferenced under ASan; malformed input must come back as a status, never a crash. Then
 * the module is converted to HLO (an error is fine; a crash or leak is not). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "compiler/frontend/mlir_bytecode.h"
#include "compiler/frontend/stablehlo_to_hlo.h"
#include "compiler/hlo/ir.h"

static uint64_t walk_attr(const kiln_mlir_attr_t *a, int depth);

static uint64_t walk_type(const kiln_mlir_type_t *t, int depth) {
  if (t == NULL || depth > 64) return 0;
  uint64_t h = (uint64_t)t->kind;
  h += walk_type(t->element, depth + 1);
  for (int32_t i = 0; i < t->rank && t->kind == KILN_MLIR_TYPE_TENSOR; i++)
    h += (uint64_t)t->dims[i];
  for (int32_t i = 0; i < t->num_types; i++) h += walk_type(t->types[i], depth + 1);
  for (int32_t i = 0; i < t->num_results; i++) h += walk_type(t->results[i], depth + 1);
  if (t->text) h += strlen(t->text);
  h += walk_attr(t->encoding, depth + 1);
  return h;
}

static uint64_t walk_attr(const kiln_mlir_attr_t *a, int depth) {
  if (a == NULL || depth > 64) return 0;
  uint64_t h = (uint64_t)a->kind + walk_type(a->type, depth + 1);
  if (a->str && a->kind != KILN_MLIR_ATTR_STRING) h += strlen(a->str);
  if (a->kind == KILN_MLIR_ATTR_STRING && a->str_len) h += (uint8_t)a->str[a->str_len - 1];
  if (a->kind == KILN_MLIR_ATTR_ARRAY) {
    for (int32_t i = 0; i < a->num_elements; i++) h += walk_attr(a->elements[i], depth + 1);
  } else if (a->kind == KILN_MLIR_ATTR_DENSE_ARRAY) {
    for (int32_t i = 0; i < a->num_elements; i++)
      h += a->ints ? (uint64_t)a->ints[i] : (uint64_t)a->floats[i];
  } else if (a->kind == KILN_MLIR_ATTR_DICTIONARY || a->kind == KILN_MLIR_ATTR_STRUCT) {
    for (int32_t i = 0; i < a->num_elements; i++)
      h += strlen(a->fields[i].name) + walk_attr(a->fields[i].value, depth + 1);
  } else if (a->kind == KILN_MLIR_ATTR_DENSE_ELEMENTS && a->literal &&
             a->literal->num_elements > 0) {
    h += ((const uint8_t *)a->literal->data)[0];
  }
  return h;
}

static uint64_t walk_block(const kiln_mlir_block_t *b, int depth) {
  uint64_t h = 0;
  for (int32_t i = 0; i < b->num_args; i++) h += walk_type(b->args[i].type, 0);
  for (int32_t i = 0; i < b->num_ops; i++) {
    const kiln_mlir_op_t *op = b->ops[i];
    h += strlen(op->name);
    for (int32_t k = 0; k < op->num_operands; k++) h += walk_type(op->operands[k]->type, 0);
    for (int32_t k = 0; k < op->num_results; k++) h += walk_type(op->results[k].type, 0);
    for (int32_t k = 0; k < op->num_attrs; k++)
      h += strlen(op->attrs[k].name) + walk_attr(op->attrs[k].value, 0);
    for (int32_t r = 0; r < op->num_regions && depth < 256; r++) {
      for (int32_t k = 0; k < op->regions[r].num_blocks; k++)
        h += walk_block(&op->regions[r].blocks[k], depth + 1);
    }
  }
  return h;
}

volatile uint64_t kiln_fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_read_bytecode(data, size, &m);
  if (!s) {
    kiln_fuzz_sink += walk_block(&m->body, 0);
    for (int32_t i = 0; i < m->num_attrs; i++) kiln_fuzz_sink += walk_attr(m->attrs[i].value, 0);
    kiln_hlo_module_t *h = NULL;
    kiln_status cs = kiln_stablehlo_to_hlo(m, NULL, &h);
    kiln_status_free(cs);
    if (h) kiln_hlo_module_destroy(h);
  } else {
    kiln_fuzz_sink += strlen(kiln_status_message(s));
  }
  kiln_status_free(s);
  kiln_mlir_module_destroy(m);
  return 0;
}
