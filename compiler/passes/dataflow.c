/* HLO dataflow: values, positions, uses, aliasing and liveness. See dataflow.h. */
#include "compiler/passes/dataflow.h"

#include <stdlib.h>
#include <string.h>

#include "compiler/hlo/collective_groups.h"

/* ---- shape leaves ---- */

int kiln_shape_num_leaves(const kiln_shape_t *s) {
  if (!kiln_shape_is_tuple(s)) return 1;
  int n = 0;
  for (int i = 0; i < s->num_elements; i++) n += kiln_shape_num_leaves(s->elements[i]);
  return n;
}

int kiln_shape_leaf_offset(const kiln_shape_t *s, int64_t index) {
  int n = 0;
  if (!kiln_shape_is_tuple(s)) return 0;
  for (int64_t i = 0; i < index && i < s->num_elements; i++)
    n += kiln_shape_num_leaves(s->elements[i]);
  return n;
}

const kiln_shape_t *kiln_shape_leaf(const kiln_shape_t *s, int leaf, kiln_strbuf_t *b) {
  if (b) kiln_strbuf_append_char(b, '{');
  bool first = true;
  while (kiln_shape_is_tuple(s)) {
    int i = 0;
    for (; i < s->num_elements; i++) {
      int n = kiln_shape_num_leaves(s->elements[i]);
      if (leaf < n) break;
      leaf -= n;
    }
    if (i == s->num_elements) return NULL;
    if (b) kiln_strbuf_printf(b, "%s%d", first ? "" : ",", i);
    first = false;
    s = s->elements[i];
  }
  if (b) kiln_strbuf_append_char(b, '}');
  return leaf == 0 ? s : NULL;
}

/* Leaf number of shape index `idx` (a path of tuple indices); -1 when it is not a leaf. */
static int leaf_of_index(const kiln_shape_t *s, const kiln_i64_list_t *idx) {
  int leaf = 0;
  for (int k = 0; k < idx->n; k++) {
    if (!kiln_shape_is_tuple(s) || idx->v[k] < 0 || idx->v[k] >= s->num_elements) return -1;
    leaf += kiln_shape_leaf_offset(s, idx->v[k]);
    s = s->elements[idx->v[k]];
  }
  return kiln_shape_is_tuple(s) ? -1 : leaf;
}

/* ---- sharing rules ---- */

bool kiln_dataflow_is_control_flow(const kiln_hlo_instruction_t *in) {
  return in->opcode == KILN_OP_WHILE || in->opcode == KILN_OP_CONDITIONAL ||
         in->opcode == KILN_OP_CALL;
}

/* Parses `output_to_operand_aliasing={ {0}: (0, {}), {1}: (1, {}) }` (operand indices
 * other than {} are ignored). */
static int parse_output_to_operand(const kiln_hlo_instruction_t *in, kiln_inplace_pair_t *out,
                                   int n, int max) {
  const char *t = kiln_hlo_instruction_raw_attr(in, "output_to_operand_aliasing");
  if (!t) return n;
  const char *p = strchr(t, '{');
  if (!p) return n;
  p++;
  while (*p && n < max) {
    const char *open = strchr(p, '{');
    if (!open) break;
    int64_t path[8];
    int depth = 0;
    const char *q = open + 1;
    while (*q && *q != '}') {
      char *end;
      long long v = strtoll(q, &end, 10);
      if (end == q) {
        q++;
        continue;
      }
      if (depth < 8) path[depth++] = v;
      q = end;
    }
    if (*q != '}') break;
    const char *paren = strchr(q, '(');
    if (!paren) break;
    char *end;
    long long opnd = strtoll(paren + 1, &end, 10);
    const char *ob = strchr(end, '{'), *cb = ob ? strchr(ob, '}') : NULL;
    if (!ob || !cb) break;
    bool empty_index = true;
    for (const char *r = ob + 1; r < cb; r++)
      if (*r != ' ') empty_index = false;
    kiln_i64_list_t idx = {depth, path};
    int leaf = leaf_of_index(in->shape, &idx);
    if (empty_index && leaf >= 0 && opnd >= 0 && opnd < in->num_operands &&
        !kiln_shape_is_tuple(in->operands[opnd]->shape)) {
      out[n].operand = (int)opnd;
      out[n].out_leaf = leaf;
      n++;
    }
    p = strchr(cb, ')');
    if (!p) break;
    p++;
  }
  return n;
}

/* Whether fused parameter `p` is read by `r` alone, and only as its operand 0: a kernel that
 * updates p's buffer in place must not read p's old values through another operand (a scatter
 * whose updates are its operand read the values it had just written). */
static bool only_updated_operand(const kiln_hlo_instruction_t *r, const kiln_hlo_instruction_t *p) {
  if (p->users.len != 1) return false;
  for (int i = 1; i < r->num_operands; i++)
    if (r->operands[i] == p) return false;
  return true;
}

static bool same_physical_array(const kiln_shape_t *a, const kiln_shape_t *b);

/* In-place pairs of a fused root element `r` at output leaf `leaf`: its operand 0 when that is
 * a parameter laid out as the result (the copy kernel reads and writes each element at one
 * physical position; another layout would move elements within the shared buffer). */
static int fused_inplace(const kiln_hlo_instruction_t *r, int leaf, kiln_inplace_pair_t *out,
                         int n, int max) {
  if (n >= max) return n;
  if (r->num_operands > 0 && !same_physical_array(r->operands[0]->shape, r->shape)) return n;
  if (r->num_operands > 0 && r->operands[0]->opcode == KILN_OP_PARAMETER &&
      !only_updated_operand(r, r->operands[0]))
    return n;
  if (r->opcode == KILN_OP_DYNAMIC_UPDATE_SLICE && r->num_operands > 0 &&
      r->operands[0]->opcode == KILN_OP_PARAMETER) {
    out[n].operand = (int)r->operands[0]->parameter_number;
    out[n].out_leaf = leaf;
    return n + 1;
  }
  if (r->opcode == KILN_OP_SCATTER && r->num_operands == 3 &&
      r->operands[0]->opcode == KILN_OP_PARAMETER) {
    out[n].operand = (int)r->operands[0]->parameter_number;
    out[n].out_leaf = leaf;
    return n + 1;
  }
  return n;
}

int kiln_dataflow_inplace_pairs(const kiln_hlo_instruction_t *in, kiln_inplace_pair_t *out,
                                int max) {
  int n = 0;
  switch (in->opcode) {
    case KILN_OP_DYNAMIC_UPDATE_SLICE:
      if (max > 0 && in->num_operands > 0) out[n++] = (kiln_inplace_pair_t){0, 0};
      break;
    case KILN_OP_SCATTER: {
      int k = (in->num_operands - 1) / 2;
      for (int j = 0; j < k && n < max; j++) out[n++] = (kiln_inplace_pair_t){j, j};
      break;
    }
    case KILN_OP_FUSION: {
      const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(in, "calls");
      if (f && f->root) {
        const kiln_hlo_instruction_t *r = f->root;
        if (r->opcode == KILN_OP_TUPLE) {
          int leaf = 0;
          for (int i = 0; i < r->num_operands; i++) {
            if (!kiln_shape_is_tuple(r->operands[i]->shape))
              n = fused_inplace(r->operands[i], leaf, out, n, max);
            leaf += kiln_shape_num_leaves(r->operands[i]->shape);
          }
        } else {
          n = fused_inplace(r, 0, out, n, max);
        }
      }
      n = parse_output_to_operand(in, out, n, max);
      break;
    }
    case KILN_OP_CUSTOM_CALL:
      n = parse_output_to_operand(in, out, n, max);
      break;
    default:
      break;
  }
  /* Drop pairs whose operand is not a single array of the output leaf's byte size. */
  int k = 0;
  for (int i = 0; i < n; i++) {
    const kiln_hlo_instruction_t *op = in->operands[out[i].operand];
    const kiln_shape_t *ls = kiln_shape_leaf(in->shape, out[i].out_leaf, NULL);
    if (!ls || !kiln_shape_is_array(op->shape) || !kiln_shape_is_array(ls)) continue;
    if (kiln_shape_byte_size(op->shape) != kiln_shape_byte_size(ls)) continue;
    out[k++] = out[i];
  }
  return k;
}

static bool same_physical_array(const kiln_shape_t *a, const kiln_shape_t *b) {
  if (!kiln_shape_is_array(a) || !kiln_shape_is_array(b)) return false;
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  if (kiln_elem_type_storage_bytes(a->type) != kiln_elem_type_storage_bytes(b->type))
    return false;
  if (kiln_elem_type_bits(a->type) != kiln_elem_type_bits(b->type)) return false;
  bool ad = !a->has_layout || kiln_layout_is_default(&a->layout);
  bool bd = !b->has_layout || kiln_layout_is_default(&b->layout);
  if (ad && bd) return true;
  if (!a->has_layout || !b->has_layout) return false;
  return kiln_layout_equal(&a->layout, &b->layout);
}

/* True when every transitive user of `p` inside its fused computation is an elementwise
 * array op (or the root tuple), so each output element reads `p` only at its own index, and
 * (several outputs) only output `out_leaf` is computed from `p`: the kernel's parameters are
 * noalias, so LLVM may store another output before the loads of `p` that output `out_leaf`
 * does not depend on (fuzz-1093356: an output sharing a parameter's buffer was stored before
 * the other output read the parameter). */
static bool fused_param_elementwise(const kiln_hlo_instruction_t *p, int out_leaf) {
  KILN_VEC(const kiln_hlo_instruction_t *) stack = {0};
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  kiln_vec_push(&stack, p);
  bool ok = true;
  while (stack.len && ok) {
    const kiln_hlo_instruction_t *x = kiln_vec_pop(&stack);
    for (size_t u = 0; u < x->users.len && ok; u++) {
      const kiln_hlo_instruction_t *y = x->users.data[u];
      if (y->opcode == KILN_OP_TUPLE && y == y->parent->root) {
        for (int k = 0; k < y->num_operands; k++)
          if (y->operands[k] == x && k != out_leaf) ok = false;
        continue;
      }
      if (kiln_ptrmap_contains(&seen, y)) continue;
      kiln_ptrmap_put(&seen, y, (void *)1);
      if (!kiln_hlo_opcode_is_elementwise(y->opcode) || !kiln_shape_is_array(y->shape) ||
          y->shape->rank != p->shape->rank) {
        ok = false;
        break;
      }
      for (int d = 0; d < y->shape->rank && ok; d++)
        if (y->shape->dims[d] != p->shape->dims[d]) ok = false;
      kiln_vec_push(&stack, y);
    }
  }
  kiln_ptrmap_free(&seen);
  kiln_vec_free(&stack);
  return ok;
}

bool kiln_dataflow_can_share(const kiln_hlo_instruction_t *in, int operand, int out_leaf) {
  kiln_inplace_pair_t pairs[16];
  int n = kiln_dataflow_inplace_pairs(in, pairs, 16);
  for (int i = 0; i < n; i++)
    if (pairs[i].operand == operand && pairs[i].out_leaf == out_leaf) return true;
  if (operand < 0 || operand >= in->num_operands) return false;
  const kiln_hlo_instruction_t *op = in->operands[operand];
  const kiln_shape_t *ls = kiln_shape_leaf(in->shape, out_leaf, NULL);
  if (!ls || !same_physical_array(op->shape, ls)) return false;
  if (kiln_hlo_opcode_is_elementwise(in->opcode) && !kiln_shape_is_tuple(in->shape)) return true;
  if (in->opcode == KILN_OP_FUSION && in->fusion_kind == KILN_HLO_FUSION_LOOP) {
    const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(in, "calls");
    if (!f || operand >= f->num_parameters || !f->parameters[operand]) return false;
    const kiln_hlo_instruction_t *p = f->parameters[operand];
    if (!same_physical_array(p->shape, ls)) return false;
    return fused_param_elementwise(p, out_leaf);
  }
  return false;
}

bool kiln_dataflow_may_reuse(const kiln_dataflow_t *df, const kiln_hlo_value_t *a,
                             const kiln_hlo_value_t *b) {
  const kiln_hlo_instruction_t *t = b->def;
  kiln_dataflow_instr_t *td = kiln_dataflow_instr(df, t);
  if (!td || td->use_pos != td->def_pos || a->end != td->def_pos || b->start != td->def_pos)
    return false;
  if (a->live_out || a->num_root_comps > 0 || b->kind != KILN_VALUE_OP) return false;
  bool used = false;
  for (int k = 0; k < t->num_operands; k++) {
    kiln_dataflow_instr_t *od = kiln_dataflow_instr(df, t->operands[k]);
    for (int l = 0; od && l < od->num_leaves; l++) {
      if (od->leaves[l] != a) continue;
      if (!kiln_dataflow_can_share(t, k, b->leaf)) return false;
      used = true;
    }
  }
  return used;
}

bool kiln_dataflow_reaches(const kiln_hlo_instruction_t *from, const kiln_hlo_instruction_t *to) {
  if (from == to) return true;
  if (from->parent != to->parent) return false;
  KILN_VEC(const kiln_hlo_instruction_t *) stack = {0};
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  kiln_vec_push(&stack, to);
  bool found = false;
  while (stack.len && !found) {
    const kiln_hlo_instruction_t *x = kiln_vec_pop(&stack);
    int total = x->num_operands + x->num_control_predecessors;
    for (int k = 0; k < total; k++) {
      const kiln_hlo_instruction_t *y =
          k < x->num_operands ? x->operands[k] : x->control_predecessors[k - x->num_operands];
      if (y == from) {
        found = true;
        break;
      }
      if (kiln_ptrmap_contains(&seen, y)) continue;
      kiln_ptrmap_put(&seen, y, (void *)1);
      kiln_vec_push(&stack, y);
    }
  }
  kiln_ptrmap_free(&seen);
  kiln_vec_free(&stack);
  return found;
}

/* ---- the analysis ---- */

kiln_dataflow_instr_t *kiln_dataflow_instr(const kiln_dataflow_t *df,
                                           const kiln_hlo_instruction_t *instr) {
  return kiln_ptrmap_get(&df->instrs, instr);
}

kiln_dataflow_comp_t *kiln_dataflow_comp(const kiln_dataflow_t *df,
                                         const kiln_hlo_computation_t *c) {
  return kiln_ptrmap_get(&df->comp_map, c);
}

kiln_hlo_value_t *kiln_dataflow_value_at(const kiln_dataflow_t *df,
                                         const kiln_hlo_instruction_t *instr, int leaf) {
  kiln_dataflow_instr_t *di = kiln_dataflow_instr(df, instr);
  if (!di || leaf < 0 || leaf >= di->num_leaves) return NULL;
  return di->leaves[leaf];
}

kiln_hlo_instruction_t *kiln_dataflow_ancestor_in(const kiln_dataflow_t *df,
                                                  const kiln_hlo_instruction_t *instr,
                                                  const kiln_hlo_computation_t *c) {
  while (instr) {
    if (instr->parent == c) return (kiln_hlo_instruction_t *)instr;
    kiln_dataflow_comp_t *dc = kiln_dataflow_comp(df, instr->parent);
    if (!dc) return NULL;
    instr = dc->caller;
  }
  return NULL;
}

static kiln_hlo_value_t *new_value(kiln_dataflow_t *df, kiln_value_kind_t kind,
                                   kiln_hlo_instruction_t *def, int leaf) {
  const kiln_shape_t *s = kiln_shape_leaf(def->shape, leaf, NULL);
  if (!s || !kiln_shape_is_array(s)) return NULL;
  kiln_hlo_value_t *v = kiln_arena_alloc(&df->arena, sizeof *v);
  v->id = (int)df->values.len;
  v->kind = kind;
  v->def = def;
  v->leaf = leaf;
  v->shape = s;
  v->size = kiln_shape_byte_size(s);
  kiln_vec_push(&df->values, v);
  return v;
}

static kiln_dataflow_instr_t *new_instr_info(kiln_dataflow_t *df, kiln_hlo_instruction_t *in) {
  kiln_dataflow_instr_t *di = kiln_arena_alloc(&df->arena, sizeof *di);
  di->num_leaves = kiln_shape_num_leaves(in->shape);
  di->leaves = kiln_arena_alloc(&df->arena, sizeof(kiln_hlo_value_t *) * (size_t)(di->num_leaves + 1));
  di->use_pos = di->def_pos = -1;
  kiln_ptrmap_put(&df->instrs, in, di);
  return di;
}

static void define_all(kiln_dataflow_t *df, kiln_dataflow_instr_t *di, kiln_hlo_instruction_t *in,
                       kiln_value_kind_t kind) {
  for (int l = 0; l < di->num_leaves; l++) di->leaves[l] = new_value(df, kind, in, l);
}

/* Copies `n` leaves of `src` starting at `first` into `di`; false on a count mismatch. */
static bool forward(kiln_dataflow_instr_t *di, const kiln_dataflow_instr_t *src, int first) {
  if (!src || first < 0 || first + di->num_leaves > src->num_leaves) return false;
  for (int l = 0; l < di->num_leaves; l++) di->leaves[l] = src->leaves[first + l];
  return true;
}

/* Parameter binding of a sequential computation: `mode` says how parameters get values. */
typedef enum { BIND_ENTRY, BIND_PHI, BIND_OPERANDS } bind_mode_t;

static kiln_status process_comp(kiln_dataflow_t *df, kiln_hlo_computation_t *c,
                                kiln_hlo_instruction_t *caller, bind_mode_t mode,
                                int first_operand, int depth);

static void called_branches(const kiln_hlo_instruction_t *in, kiln_hlo_computation_t **out,
                            int *n, int max) {
  *n = 0;
  for (int g = 0; g < in->num_called_groups; g++) {
    const kiln_called_group_t *cg = &in->called_groups[g];
    if (strcmp(cg->key, "branch_computations") == 0) {
      for (int k = 0; k < cg->n && *n < max; k++) out[(*n)++] = cg->comps[k];
    }
  }
  if (*n == 0) {
    kiln_hlo_computation_t *t = kiln_hlo_instruction_called(in, "true_computation");
    kiln_hlo_computation_t *f = kiln_hlo_instruction_called(in, "false_computation");
    if (t && f) {
      out[0] = t;
      out[1] = f;
      *n = 2;
    }
  }
}

#define MAX_BRANCHES 4096

static kiln_status process_instr(kiln_dataflow_t *df, kiln_hlo_instruction_t *in,
                                 kiln_hlo_instruction_t *caller, bind_mode_t mode,
                                 int first_operand, int depth) {
  kiln_dataflow_instr_t *di = new_instr_info(df, in);
  switch (in->opcode) {
    case KILN_OP_PARAMETER:
      if (mode == BIND_ENTRY) {
        define_all(df, di, in, KILN_VALUE_PARAMETER);
      } else if (mode == BIND_PHI) {
        define_all(df, di, in, KILN_VALUE_PHI);
      } else {
        int k = first_operand + (int)in->parameter_number;
        if (!caller || k >= caller->num_operands ||
            !forward(di, kiln_dataflow_instr(df, caller->operands[k]), 0))
          return kiln_status_make(KILN_INVALID_ARGUMENT,
                                  "parameter %s of %s does not match operand %d of %s", in->name,
                                  in->parent->name, k, caller ? caller->name : "?");
      }
      return NULL;
    case KILN_OP_CONSTANT:
      define_all(df, di, in, KILN_VALUE_CONSTANT);
      return NULL;
    case KILN_OP_TUPLE: {
      int l = 0;
      for (int k = 0; k < in->num_operands; k++) {
        kiln_dataflow_instr_t *od = kiln_dataflow_instr(df, in->operands[k]);
        for (int j = 0; od && j < od->num_leaves && l < di->num_leaves; j++)
          di->leaves[l++] = od->leaves[j];
      }
      if (l != di->num_leaves) define_all(df, di, in, KILN_VALUE_OP);
      return NULL;
    }
    case KILN_OP_GET_TUPLE_ELEMENT: {
      const kiln_hlo_instruction_t *op = in->operands[0];
      if (!forward(di, kiln_dataflow_instr(df, op),
                   kiln_shape_leaf_offset(op->shape, in->tuple_index)))
        define_all(df, di, in, KILN_VALUE_OP);
      return NULL;
    }
    case KILN_OP_BITCAST:
    case KILN_OP_OPTIMIZATION_BARRIER:
    case KILN_OP_DOMAIN:
    case KILN_OP_ADD_DEPENDENCY:
      if (in->num_operands < 1 || !forward(di, kiln_dataflow_instr(df, in->operands[0]), 0) ||
          kiln_shape_num_leaves(in->operands[0]->shape) != di->num_leaves)
        define_all(df, di, in, KILN_VALUE_OP);
      return NULL;
    case KILN_OP_CALL: {
      kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(in, "to_apply");
      if (!callee) break;
      KILN_RETURN_IF_ERROR(process_comp(df, callee, in, BIND_OPERANDS, 0, depth + 1),
                           "in call %s", in->name);
      if (!forward(di, kiln_dataflow_instr(df, callee->root), 0))
        return kiln_status_make(KILN_INVALID_ARGUMENT, "call %s: result shape mismatch", in->name);
      return NULL;
    }
    case KILN_OP_WHILE: {
      kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(in, "condition");
      kiln_hlo_computation_t *body = kiln_hlo_instruction_called(in, "body");
      if (!cond || !body) return kiln_status_make(KILN_INVALID_ARGUMENT, "while %s lacks a condition or body", in->name);
      KILN_RETURN_IF_ERROR(process_comp(df, cond, in, BIND_PHI, 0, depth + 1), "in while %s", in->name);
      KILN_RETURN_IF_ERROR(process_comp(df, body, in, BIND_PHI, 0, depth + 1), "in while %s", in->name);
      define_all(df, di, in, KILN_VALUE_PHI);
      return NULL;
    }
    case KILN_OP_ASYNC_START: {
      /* ((operands...), results, context...): the operand part holds the operands' own values
       * (as XLA aliases them), the rest is new. */
      const kiln_shape_t *s = in->shape;
      int l = 0;
      bool forwarded = kiln_shape_is_tuple(s) && s->num_elements >= 1 &&
                       kiln_shape_is_tuple(s->elements[0]) &&
                       s->elements[0]->num_elements == in->num_operands;
      for (int k = 0; forwarded && k < in->num_operands; k++) {
        kiln_dataflow_instr_t *od = kiln_dataflow_instr(df, in->operands[k]);
        forwarded = od && od->num_leaves == kiln_shape_num_leaves(s->elements[0]->elements[k]) &&
                    l + od->num_leaves <= di->num_leaves;
        for (int j = 0; forwarded && j < od->num_leaves; j++) di->leaves[l++] = od->leaves[j];
      }
      if (!forwarded) l = 0;
      for (; l < di->num_leaves; l++) di->leaves[l] = new_value(df, KILN_VALUE_OP, in, l);
      return NULL;
    }
    case KILN_OP_CONDITIONAL: {
      kiln_hlo_computation_t *br[64];
      int nb = 0;
      called_branches(in, br, &nb, 64);
      if (nb == 0) break;
      for (int b = 0; b < nb; b++)
        KILN_RETURN_IF_ERROR(process_comp(df, br[b], in, BIND_OPERANDS, b + 1, depth + 1),
                             "in conditional %s", in->name);
      define_all(df, di, in, KILN_VALUE_PHI);
      return NULL;
    }
    default:
      break;
  }
  define_all(df, di, in, KILN_VALUE_OP);
  return NULL;
}

static kiln_status process_comp(kiln_dataflow_t *df, kiln_hlo_computation_t *c,
                                kiln_hlo_instruction_t *caller, bind_mode_t mode,
                                int first_operand, int depth) {
  if (depth > 256) return kiln_status_make(KILN_INVALID_ARGUMENT, "call nesting too deep at %s", c->name);
  if (kiln_ptrmap_contains(&df->comp_map, c))
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "computation %s is called from more than one place (flatten the "
                            "call graph, e.g. with copy_insertion)",
                            c->name);
  if (!c->root) return kiln_status_make(KILN_INVALID_ARGUMENT, "computation %s has no root", c->name);
  kiln_dataflow_comp_t *dc = kiln_arena_alloc(&df->arena, sizeof *dc);
  dc->comp = c;
  dc->caller = caller;
  dc->start = dc->end = -1;
  kiln_ptrmap_put(&df->comp_map, c, dc);
  kiln_vec_push(&df->comps, dc);
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  kiln_status s = NULL;
  for (size_t i = 0; i < n && !s; i++) s = process_instr(df, order[i], caller, mode, first_operand, depth);
  kiln_free(order);
  return s;
}

/* Operand `k` of `in` is forwarded, not used (its values flow on unchanged). */
static bool forwards_operand(const kiln_hlo_instruction_t *in, int k) {
  switch (in->opcode) {
    case KILN_OP_TUPLE:
    case KILN_OP_GET_TUPLE_ELEMENT:
    case KILN_OP_BITCAST:
    case KILN_OP_OPTIMIZATION_BARRIER:
    case KILN_OP_DOMAIN:
    case KILN_OP_ADD_DEPENDENCY:
    case KILN_OP_CALL:
      return true;
    case KILN_OP_CONDITIONAL:
      return k > 0;
    default:
      return false;
  }
}

static void add_root_comp(kiln_dataflow_t *df, kiln_hlo_value_t *v, kiln_hlo_computation_t *c) {
  for (int i = 0; i < v->num_root_comps; i++)
    if (v->root_comps[i] == c) return;
  kiln_hlo_computation_t **a = kiln_arena_alloc(&df->arena, sizeof *a * (size_t)(v->num_root_comps + 1));
  if (v->num_root_comps) memcpy(a, v->root_comps, sizeof *a * (size_t)v->num_root_comps);
  a[v->num_root_comps++] = c;
  v->root_comps = a;
}

static void compute_uses(kiln_dataflow_t *df) {
  size_t nv = df->values.len;
  int *count = kiln_calloc(nv + 1, sizeof(int));
  for (int pass = 0; pass < 2; pass++) {
    for (size_t ci = 0; ci < df->comps.len; ci++) {
      kiln_hlo_computation_t *c = df->comps.data[ci]->comp;
      for (size_t i = 0; i < c->instructions.len; i++) {
        kiln_hlo_instruction_t *in = c->instructions.data[i];
        for (int k = 0; k < in->num_operands; k++) {
          if (forwards_operand(in, k)) continue;
          kiln_dataflow_instr_t *od = kiln_dataflow_instr(df, in->operands[k]);
          if (!od) continue;
          for (int l = 0; l < od->num_leaves; l++) {
            kiln_hlo_value_t *v = od->leaves[l];
            if (!v) continue;
            /* An operand may hold a value twice (tuple(x, x)); record the use once. */
            bool dup = false;
            for (int l2 = 0; l2 < l && !dup; l2++) dup = od->leaves[l2] == v;
            if (dup) continue;
            if (pass == 0) {
              count[v->id]++;
            } else {
              v->uses[v->num_uses++] = (kiln_hlo_use_t){in, k};
            }
          }
        }
      }
    }
    if (pass == 0) {
      for (size_t i = 0; i < nv; i++) {
        kiln_hlo_value_t *v = df->values.data[i];
        v->uses = kiln_arena_alloc(&df->arena, sizeof(kiln_hlo_use_t) * (size_t)(count[i] + 1));
        v->num_uses = 0;
      }
    }
  }
  kiln_free(count);
  for (size_t ci = 0; ci < df->comps.len; ci++) {
    kiln_hlo_computation_t *c = df->comps.data[ci]->comp;
    kiln_dataflow_instr_t *rd = kiln_dataflow_instr(df, c->root);
    for (int l = 0; rd && l < rd->num_leaves; l++) {
      kiln_hlo_value_t *v = rd->leaves[l];
      if (!v) continue;
      add_root_comp(df, v, c);
      if (c->is_entry || c == df->module->entry) v->live_out = true;
    }
  }
}

kiln_status kiln_dataflow_run(const kiln_hlo_module_t *m, kiln_dataflow_t **out) {
  *out = NULL;
  if (!m || !m->entry) return kiln_status_make(KILN_INVALID_ARGUMENT, "module has no entry computation");
  kiln_dataflow_t *df = kiln_calloc(1, sizeof *df);
  df->module = m;
  kiln_arena_init(&df->arena);
  kiln_ptrmap_init(&df->instrs);
  kiln_ptrmap_init(&df->comp_map);
  kiln_status s = process_comp(df, m->entry, NULL, BIND_ENTRY, 0, 0);
  if (s) {
    kiln_dataflow_free(df);
    return s;
  }
  compute_uses(df);
  df->buffer_parent = kiln_malloc(sizeof(int) * (df->values.len + 1));
  for (size_t i = 0; i < df->values.len; i++) df->buffer_parent[i] = (int)i;
  *out = df;
  return NULL;
}

void kiln_dataflow_free(kiln_dataflow_t *df) {
  if (!df) return;
  kiln_vec_free(&df->values);
  kiln_vec_free(&df->comps);
  kiln_vec_free(&df->sequence);
  kiln_ptrmap_free(&df->instrs);
  kiln_ptrmap_free(&df->comp_map);
  kiln_free(df->buffer_parent);
  kiln_arena_destroy(&df->arena);
  kiln_free(df);
}

/* ---- liveness ---- */

static kiln_status layout_comp(kiln_dataflow_t *df, kiln_dataflow_comp_t *dc, int64_t *pos);

static kiln_status layout_callee(kiln_dataflow_t *df, kiln_hlo_computation_t *c, int64_t *pos) {
  kiln_dataflow_comp_t *dc = kiln_dataflow_comp(df, c);
  if (!dc) return kiln_status_make(KILN_INTERNAL, "computation %s was not analysed", c->name);
  return layout_comp(df, dc, pos);
}

static kiln_status layout_comp(kiln_dataflow_t *df, kiln_dataflow_comp_t *dc, int64_t *pos) {
  kiln_hlo_computation_t *c = dc->comp;
  dc->start = *pos;
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_hlo_instruction_t *in = c->instructions.data[i];
    kiln_dataflow_instr_t *di = kiln_dataflow_instr(df, in);
    if (!di) return kiln_status_make(KILN_INTERNAL, "%s was not analysed", in->name);
    int total = in->num_operands + in->num_control_predecessors;
    for (int k = 0; k < total; k++) {
      const kiln_hlo_instruction_t *p =
          k < in->num_operands ? in->operands[k] : in->control_predecessors[k - in->num_operands];
      kiln_dataflow_instr_t *pd = kiln_dataflow_instr(df, p);
      if (!pd || pd->def_pos < 0)
        return kiln_status_make(KILN_FAILED_PRECONDITION,
                                "computation %s is not in a valid order: %s comes before its %s %s",
                                c->name, in->name,
                                k < in->num_operands ? "operand" : "control predecessor", p->name);
    }
    kiln_vec_push(&df->sequence, in);
    di->use_pos = (*pos)++;
    if (in->opcode == KILN_OP_WHILE) {
      KILN_RETURN_IF_ERROR_PLAIN(layout_callee(df, kiln_hlo_instruction_called(in, "condition"), pos));
      KILN_RETURN_IF_ERROR_PLAIN(layout_callee(df, kiln_hlo_instruction_called(in, "body"), pos));
      di->def_pos = (*pos)++;
    } else if (in->opcode == KILN_OP_CONDITIONAL) {
      kiln_hlo_computation_t *br[64];
      int nb = 0;
      called_branches(in, br, &nb, 64);
      for (int b = 0; b < nb; b++) KILN_RETURN_IF_ERROR_PLAIN(layout_callee(df, br[b], pos));
      di->def_pos = (*pos)++;
    } else if (in->opcode == KILN_OP_CALL && kiln_hlo_instruction_called(in, "to_apply")) {
      KILN_RETURN_IF_ERROR_PLAIN(layout_callee(df, kiln_hlo_instruction_called(in, "to_apply"), pos));
      di->def_pos = (*pos)++;
    } else {
      di->def_pos = di->use_pos;
    }
  }
  dc->end = *pos - 1;
  return NULL;
}

kiln_status kiln_dataflow_liveness(kiln_dataflow_t *df) {
  kiln_vec_clear(&df->sequence);
  for (size_t ci = 0; ci < df->comps.len; ci++) {
    kiln_hlo_computation_t *c = df->comps.data[ci]->comp;
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_dataflow_instr_t *di = kiln_dataflow_instr(df, c->instructions.data[i]);
      if (di) di->use_pos = di->def_pos = -1;
    }
  }
  int64_t pos = 0;
  KILN_RETURN_IF_ERROR_PLAIN(layout_comp(df, df->comps.data[0], &pos));
  df->num_positions = pos;
  for (size_t i = 0; i < df->values.len; i++) {
    kiln_hlo_value_t *v = df->values.data[i];
    kiln_dataflow_instr_t *dd = kiln_dataflow_instr(df, v->def);
    v->start = v->kind == KILN_VALUE_PARAMETER ? 0 : dd->def_pos;
    v->end = v->start;
    for (int u = 0; u < v->num_uses; u++) {
      const kiln_hlo_instruction_t *user = v->uses[u].instr;
      kiln_dataflow_instr_t *ud = kiln_dataflow_instr(df, user);
      if (ud && ud->use_pos > v->end) v->end = ud->use_pos;
      /* An async start's operands are read until its done (a runtime may run the collective
       * between the two): they stay live that long. */
      const kiln_hlo_instruction_t *done = kiln_hlo_async_split_done(user);
      kiln_dataflow_instr_t *done_di = done ? kiln_dataflow_instr(df, done) : NULL;
      if (done_di && done_di->use_pos > v->end) v->end = done_di->use_pos;
    }
    for (int r = 0; r < v->num_root_comps; r++) {
      kiln_dataflow_comp_t *dc = kiln_dataflow_comp(df, v->root_comps[r]);
      if (dc && dc->end > v->end) v->end = dc->end;
    }
    if (v->live_out) v->end = df->num_positions;
  }
  df->has_liveness = true;
  return NULL;
}

/* ---- aliasing ---- */

int kiln_dataflow_buffer_of(kiln_dataflow_t *df, int id) {
  int r = id;
  while (df->buffer_parent[r] != r) r = df->buffer_parent[r];
  while (df->buffer_parent[id] != r) {
    int next = df->buffer_parent[id];
    df->buffer_parent[id] = r;
    id = next;
  }
  return r;
}

static void unite(kiln_dataflow_t *df, const kiln_hlo_value_t *a, const kiln_hlo_value_t *b) {
  if (!a || !b) return;
  int ra = kiln_dataflow_buffer_of(df, a->id), rb = kiln_dataflow_buffer_of(df, b->id);
  if (ra == rb) return;
  /* The smaller id stays the representative, so buffers are named by their first value. */
  if (ra < rb) df->buffer_parent[rb] = ra;
  else df->buffer_parent[ra] = rb;
}

static kiln_hlo_value_t *leaf_value(kiln_dataflow_t *df, const kiln_hlo_instruction_t *in, int l) {
  return kiln_dataflow_value_at(df, in, l);
}

void kiln_dataflow_alias(kiln_dataflow_t *df) {
  for (size_t ci = 0; ci < df->comps.len; ci++) {
    kiln_hlo_computation_t *c = df->comps.data[ci]->comp;
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_hlo_instruction_t *in = c->instructions.data[i];
      kiln_dataflow_instr_t *di = kiln_dataflow_instr(df, in);
      if (!di) continue;
      if (in->opcode == KILN_OP_WHILE) {
        kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(in, "condition");
        kiln_hlo_computation_t *body = kiln_hlo_instruction_called(in, "body");
        for (int l = 0; l < di->num_leaves; l++) {
          kiln_hlo_value_t *w = di->leaves[l];
          unite(df, w, leaf_value(df, in->operands[0], l));
          if (body->num_parameters > 0 && body->parameters[0])
            unite(df, w, leaf_value(df, body->parameters[0], l));
          if (cond->num_parameters > 0 && cond->parameters[0])
            unite(df, w, leaf_value(df, cond->parameters[0], l));
          unite(df, w, leaf_value(df, body->root, l));
        }
      } else if (in->opcode == KILN_OP_CONDITIONAL) {
        kiln_hlo_computation_t *br[64];
        int nb = 0;
        called_branches(in, br, &nb, 64);
        for (int l = 0; l < di->num_leaves; l++)
          for (int b = 0; b < nb; b++) unite(df, di->leaves[l], leaf_value(df, br[b]->root, l));
      }
      kiln_inplace_pair_t pairs[16];
      int np = kiln_dataflow_inplace_pairs(in, pairs, 16);
      for (int p = 0; p < np; p++)
        unite(df, leaf_value(df, in, pairs[p].out_leaf), leaf_value(df, in->operands[pairs[p].operand], 0));
    }
  }
  const kiln_hlo_module_t *m = df->module;
  for (int a = 0; a < m->num_io_aliases; a++) {
    const kiln_io_alias_t *io = &m->io_aliases[a];
    if (io->param_number < 0 || io->param_number >= m->entry->num_parameters) continue;
    const kiln_hlo_instruction_t *p = m->entry->parameters[io->param_number];
    if (!p) continue;
    int pl = leaf_of_index(p->shape, &io->param_index);
    int ol = leaf_of_index(m->entry->root->shape, &io->output_index);
    if (pl < 0 || ol < 0) continue;
    unite(df, leaf_value(df, p, pl), leaf_value(df, m->entry->root, ol));
  }
}

void kiln_dataflow_print_value(kiln_strbuf_t *b, const kiln_hlo_value_t *v) {
  kiln_strbuf_append(b, v->def->name);
  if (kiln_shape_is_tuple(v->def->shape)) kiln_shape_leaf(v->def->shape, v->leaf, b);
}
