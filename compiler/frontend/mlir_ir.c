/* The generic MLIR IR: module lifetime, attribute lookup and the generic printer. */
#include "compiler/frontend/mlir_ir.h"

#include <string.h>

kiln_mlir_module_t *kiln_mlir_module_create(void) {
  kiln_mlir_module_t *m = kiln_calloc(1, sizeof(*m));
  kiln_arena_init(&m->arena);
  return m;
}

void kiln_mlir_module_destroy(kiln_mlir_module_t *m) {
  if (m == NULL) return;
  kiln_arena_destroy(&m->arena);
  kiln_free(m);
}

static const kiln_mlir_attr_t *find_named(const kiln_mlir_named_attr_t *attrs, int32_t n,
                                          const char *name) {
  for (int32_t i = 0; i < n; i++) {
    if (attrs[i].name != NULL && strcmp(attrs[i].name, name) == 0) return attrs[i].value;
  }
  return NULL;
}

const kiln_mlir_attr_t *kiln_mlir_op_attr(const kiln_mlir_op_t *op, const char *name) {
  if (op == NULL || name == NULL) return NULL;
  return find_named(op->attrs, op->num_attrs, name);
}

const kiln_mlir_attr_t *kiln_mlir_attr_field(const kiln_mlir_attr_t *a, const char *name) {
  if (a == NULL || name == NULL) return NULL;
  if (a->kind != KILN_MLIR_ATTR_DICTIONARY && a->kind != KILN_MLIR_ATTR_STRUCT) return NULL;
  return find_named(a->fields, a->num_elements, name);
}

const kiln_mlir_op_t *kiln_mlir_module_func(const kiln_mlir_module_t *m, const char *name) {
  if (m == NULL || name == NULL) return NULL;
  for (int32_t i = 0; i < m->body.num_ops; i++) {
    const kiln_mlir_op_t *op = m->body.ops[i];
    if (strcmp(op->name, "func.func") != 0) continue;
    const kiln_mlir_attr_t *sym = kiln_mlir_op_attr(op, "sym_name");
    if (sym != NULL && sym->kind == KILN_MLIR_ATTR_STRING && sym->str != NULL &&
        strlen(sym->str) == sym->str_len && strcmp(sym->str, name) == 0) {
      return op;
    }
  }
  return NULL;
}
