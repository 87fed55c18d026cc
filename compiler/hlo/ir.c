#include "compiler/hlo/ir.h"

#include <string.h>

kiln_hlo_module_t *kiln_hlo_module_create(const char *name) {
  kiln_hlo_module_t *m = kiln_calloc(1, sizeof *m);
  kiln_arena_init(&m->arena);
  m->name = kiln_arena_strdup(&m->arena, name ? name : "module");
  return m;
}

static void free_users(kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_hlo_instruction_t *instr = c->instructions.data[i];
    if (!instr) continue; /* a hole left by deferred removal */
    kiln_vec_free(&instr->users);
    kiln_vec_free(&instr->control_successors);
  }
  kiln_vec_free(&c->instructions);
}

void kiln_hlo_module_destroy(kiln_hlo_module_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->computations.len; i++) free_users(m->computations.data[i]);
  kiln_vec_free(&m->computations);
  if (m->names) kiln_hashmap_free(m->names);
  kiln_arena_destroy(&m->arena);
  kiln_free(m);
}

void kiln_hlo_module_oom_adopt(kiln_hlo_module_t *m) {
  for (size_t i = 0; i < m->computations.len; i++) {
    kiln_hlo_computation_t *c = m->computations.data[i];
    for (size_t j = 0; j < c->instructions.len; j++) {
      kiln_hlo_instruction_t *instr = c->instructions.data[j];
      if (!instr) continue;
      kiln_oom_adopt(instr->users.data);
      kiln_oom_adopt(instr->control_successors.data);
    }
    kiln_oom_adopt(c->instructions.data);
  }
  kiln_oom_adopt(m->computations.data);
  if (m->names) {
    for (size_t i = 0; i < m->names->cap; i++) kiln_oom_adopt(m->names->slots[i].key);
    kiln_oom_adopt(m->names->slots);
  }
}

kiln_hlo_computation_t *kiln_hlo_computation_create(kiln_hlo_module_t *m, const char *name) {
  kiln_hlo_computation_t *c = kiln_arena_alloc(&m->arena, sizeof *c);
  if (!c) return NULL;
  c->name = kiln_arena_strdup(&m->arena, name);
  c->module = m;
  kiln_vec_push(&m->computations, c);
  if (m->names) kiln_hashmap_put(m->names, c->name, strlen(c->name), (void *)1);
  return c;
}

kiln_hlo_instruction_t *kiln_hlo_instruction_create(kiln_hlo_computation_t *c,
                                                    kiln_hlo_opcode_t op, kiln_shape_t *shape,
                                                    const char *name) {
  kiln_hlo_module_t *m = c->module;
  kiln_hlo_instruction_t *instr = kiln_arena_alloc(&m->arena, sizeof *instr);
  if (!instr) return NULL;
  instr->name = kiln_arena_strdup(&m->arena, name);
  instr->opcode = op;
  instr->shape = shape;
  instr->parent = c;
  instr->id = m->next_id++;
  if (op == KILN_OP_TOPK) instr->largest = true; /* XLA's default when not written */
  instr->slot = (int32_t)c->instructions.len;
  kiln_vec_push(&c->instructions, instr);
  if (m->names) kiln_hashmap_put(m->names, instr->name, strlen(instr->name), (void *)1);
  return instr;
}

static void add_user(kiln_hlo_instruction_t *operand, kiln_hlo_instruction_t *user) {
  for (size_t i = 0; i < operand->users.len; i++)
    if (operand->users.data[i] == user) return;
  kiln_vec_push(&operand->users, user);
}

static void remove_user(kiln_hlo_instruction_t *operand, kiln_hlo_instruction_t *user) {
  for (int i = 0; i < user->num_operands; i++)
    if (user->operands[i] == operand) return; /* still used through another operand slot */
  for (size_t i = 0; i < operand->users.len; i++) {
    if (operand->users.data[i] == user) {
      memmove(&operand->users.data[i], &operand->users.data[i + 1],
              (operand->users.len - i - 1) * sizeof(operand->users.data[0]));
      operand->users.len--;
      return;
    }
  }
}

void kiln_hlo_instruction_set_operands(kiln_hlo_instruction_t *instr, int n,
                                       kiln_hlo_instruction_t *const *operands) {
  kiln_hlo_instruction_t **old = instr->operands;
  int old_n = instr->num_operands;
  kiln_arena_t *a = &instr->parent->module->arena;
  instr->operands = n ? kiln_arena_alloc(a, sizeof(*operands) * (size_t)n) : NULL;
  if (n) memcpy(instr->operands, operands, sizeof(*operands) * (size_t)n);
  instr->num_operands = n;
  for (int i = 0; i < old_n; i++) remove_user(old[i], instr);
  for (int i = 0; i < n; i++) add_user(operands[i], instr);
}

void kiln_hlo_instruction_replace_all_uses(kiln_hlo_instruction_t *old,
                                           kiln_hlo_instruction_t *repl) {
  if (old == repl) return;
  while (old->users.len) {
    kiln_hlo_instruction_t *user = old->users.data[old->users.len - 1];
    old->users.len--;
    for (int i = 0; i < user->num_operands; i++)
      if (user->operands[i] == old) user->operands[i] = repl;
    add_user(repl, user);
  }
  if (old->parent->root == old) old->parent->root = repl;
}

void kiln_hlo_instruction_add_called(kiln_hlo_instruction_t *instr, const char *key,
                                     bool braced, int n, kiln_hlo_computation_t *const *comps) {
  kiln_arena_t *a = &instr->parent->module->arena;
  kiln_called_group_t *groups = kiln_arena_realloc(
      a, instr->called_groups, sizeof(*groups) * (size_t)instr->num_called_groups,
      sizeof(*groups) * (size_t)(instr->num_called_groups + 1));
  kiln_called_group_t *g = &groups[instr->num_called_groups];
  g->key = kiln_arena_strdup(a, key);
  g->braced = braced;
  g->n = n;
  g->comps = n ? kiln_arena_alloc(a, sizeof(*comps) * (size_t)n) : NULL;
  if (n) memcpy(g->comps, comps, sizeof(*comps) * (size_t)n);
  instr->called_groups = groups;
  instr->num_called_groups++;
}

void kiln_hlo_instruction_set_raw_attr(kiln_hlo_instruction_t *instr, const char *key,
                                       const char *value) {
  kiln_arena_t *a = &instr->parent->module->arena;
  for (int i = 0; i < instr->num_raw_attrs; i++) {
    if (strcmp(instr->raw_attrs[i].key, key) == 0) {
      instr->raw_attrs[i].value = kiln_arena_strdup(a, value);
      return;
    }
  }
  kiln_raw_attr_t *attrs =
      kiln_arena_realloc(a, instr->raw_attrs, sizeof(*attrs) * (size_t)instr->num_raw_attrs,
                         sizeof(*attrs) * (size_t)(instr->num_raw_attrs + 1));
  attrs[instr->num_raw_attrs].key = kiln_arena_strdup(a, key);
  attrs[instr->num_raw_attrs].value = kiln_arena_strdup(a, value);
  instr->raw_attrs = attrs;
  instr->num_raw_attrs++;
}

kiln_hlo_computation_t *kiln_hlo_instruction_called(const kiln_hlo_instruction_t *instr,
                                                    const char *key) {
  for (int i = 0; i < instr->num_called_groups; i++)
    if (strcmp(instr->called_groups[i].key, key) == 0 && instr->called_groups[i].n > 0)
      return instr->called_groups[i].comps[0];
  return NULL;
}

const char *kiln_hlo_instruction_raw_attr(const kiln_hlo_instruction_t *instr, const char *key) {
  for (int i = 0; i < instr->num_raw_attrs; i++)
    if (strcmp(instr->raw_attrs[i].key, key) == 0) return instr->raw_attrs[i].value;
  return NULL;
}

kiln_hlo_computation_t *kiln_hlo_module_find_computation(const kiln_hlo_module_t *m,
                                                         const char *name) {
  for (size_t i = 0; i < m->computations.len; i++)
    if (strcmp(m->computations.data[i]->name, name) == 0) return m->computations.data[i];
  return NULL;
}

kiln_hlo_instruction_t *kiln_hlo_computation_find(const kiln_hlo_computation_t *c,
                                                  const char *name) {
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i] && strcmp(c->instructions.data[i]->name, name) == 0)
      return c->instructions.data[i];
  return NULL;
}

int64_t kiln_hlo_module_instruction_count(const kiln_hlo_module_t *m) {
  int64_t n = 0;
  for (size_t i = 0; i < m->computations.len; i++) {
    const kiln_hlo_computation_t *c = m->computations.data[i];
    n += (int64_t)(c->instructions.len - c->num_holes);
  }
  return n;
}
