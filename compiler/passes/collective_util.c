/* Helpers shared by the collective passes; see collective_util.h. */
#include "compiler/passes/collective_util.h"

#include <stdio.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/hlo/collective_groups.h"
#include "compiler/hlo/replica_groups.h"

kiln_hlo_opcode_t kiln_coll_reducer_op(const kiln_hlo_computation_t *f, kiln_elem_type_t *type) {
  if (!f || f->num_parameters != 2 || !f->root) return KILN_OP_COUNT;
  const kiln_hlo_instruction_t *r = f->root;
  if (r->num_operands != 2 || r->operands[0]->opcode != KILN_OP_PARAMETER ||
      r->operands[1]->opcode != KILN_OP_PARAMETER || r->operands[0] == r->operands[1])
    return KILN_OP_COUNT;
  const kiln_shape_t *a = r->operands[0]->shape, *b = r->operands[1]->shape;
  if (!a || !b || !kiln_shape_is_array(a) || a->rank != 0 || b->type != a->type || !r->shape ||
      r->shape->type != a->type)
    return KILN_OP_COUNT;
  switch (r->opcode) {
    case KILN_OP_ADD:
    case KILN_OP_MULTIPLY:
    case KILN_OP_MINIMUM:
    case KILN_OP_MAXIMUM:
    case KILN_OP_AND:
    case KILN_OP_OR:
      *type = a->type;
      return r->opcode;
    default:
      return KILN_OP_COUNT;
  }
}

bool kiln_coll_runtime_reduces_type(kiln_elem_type_t t) {
  switch (t) {
    case KILN_PRED:
    case KILN_S8:
    case KILN_U8:
    case KILN_S16:
    case KILN_U16:
    case KILN_S32:
    case KILN_U32:
    case KILN_S64:
    case KILN_U64:
    case KILN_F16:
    case KILN_BF16:
    case KILN_F32:
    case KILN_F64:
      return true;
    default:
      return false;
  }
}

bool kiln_coll_same_reducer(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  const kiln_hlo_computation_t *fa = kiln_hlo_instruction_called(a, "to_apply");
  const kiln_hlo_computation_t *fb = kiln_hlo_instruction_called(b, "to_apply");
  if (!fa || !fb) return false;
  if (fa == fb) return true;
  kiln_elem_type_t ta, tb;
  kiln_hlo_opcode_t oa = kiln_coll_reducer_op(fa, &ta), ob = kiln_coll_reducer_op(fb, &tb);
  return oa != KILN_OP_COUNT && oa == ob && ta == tb;
}

static const char *module_attr(const kiln_hlo_module_t *m, const char *key) {
  for (int i = 0; i < m->num_raw_attrs; i++)
    if (strcmp(m->raw_attrs[i].key, key) == 0) return m->raw_attrs[i].value;
  return NULL;
}

bool kiln_coll_single_participant(const kiln_hlo_module_t *m, const kiln_hlo_instruction_t *in) {
  if (!in->replica_groups) return false;
  kiln_hlo_group_mode_t mode;
  kiln_status s = kiln_hlo_collective_group_mode(in, &mode);
  if (s) {
    kiln_status_free(s);
    return false;
  }
  if (mode == KILN_GROUP_CROSS_REPLICA_AND_PARTITION) {
    const char *p = module_attr(m, "num_partitions");
    if (!p || strcmp(p, "1") != 0) return false;
  }
  kiln_hlo_replica_groups_t g;
  s = kiln_hlo_replica_groups_parse(in->replica_groups, &g);
  if (s) {
    kiln_status_free(s);
    return false;
  }
  bool one = g.num_groups > 0 && g.group_size == 1;
  kiln_hlo_replica_groups_free(&g);
  return one;
}

static void set_module_attr(kiln_hlo_module_t *m, const char *key, int value) {
  char text[32];
  snprintf(text, sizeof text, "%d", value);
  kiln_raw_attr_t *attrs =
      kiln_arena_alloc(&m->arena, sizeof *attrs * (size_t)(m->num_raw_attrs + 1));
  if (m->num_raw_attrs) memcpy(attrs, m->raw_attrs, sizeof *attrs * (size_t)m->num_raw_attrs);
  attrs[m->num_raw_attrs].key = kiln_arena_strdup(&m->arena, key);
  attrs[m->num_raw_attrs].value = kiln_arena_strdup(&m->arena, text);
  m->raw_attrs = attrs;
  m->num_raw_attrs++;
}

kiln_status kiln_coll_pin_world(kiln_hlo_module_t *m) {
  bool has_r = module_attr(m, "replica_count") != NULL,
       has_p = module_attr(m, "num_partitions") != NULL;
  if (has_r && has_p) return KILN_STATUS_OK;
  int R = 1, P = 1;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_spmd_world_size(m, &R, &P));
  if (!has_r && R > 1) set_module_attr(m, "replica_count", R);
  if (!has_p && P > 1) set_module_attr(m, "num_partitions", P);
  return KILN_STATUS_OK;
}

bool kiln_coll_has_control_edges(const kiln_hlo_instruction_t *in) {
  return in->num_control_predecessors > 0 || in->control_successors.len > 0;
}

/* Whether `c` holds an instruction whose opcode `takes`. */
static bool holds_opcode(const kiln_hlo_computation_t *c, kiln_coll_opcode_fn takes) {
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i] && takes(c->instructions.data[i]->opcode)) return true;
  return false;
}

kiln_status kiln_coll_rewrite_each(kiln_hlo_module_t *m, kiln_coll_opcode_fn takes,
                                   kiln_coll_rewrite_fn fn, void *ctx, bool *changed) {
  kiln_status st = KILN_STATUS_OK;
  for (size_t ci = 0; ci < m->computations.len && !st; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    /* fn would pass over every instruction: no post order (a walk through operands and a
     * hash map keyed by instruction, which misses the caches once the module outgrows them). */
    if (!holds_opcode(c, takes)) continue;
    size_t n = 0;
    kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
    bool comp_changed = false;
    for (size_t i = 0; i < n && !st; i++) {
      bool replaced = false;
      st = fn(ctx, order[i], &replaced);
      comp_changed |= replaced;
    }
    kiln_free(order);
    if (comp_changed) {
      kiln_hlo_computation_sort_post_order(c);
      *changed = true;
    }
  }
  return st;
}
