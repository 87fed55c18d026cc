/* Copy insertion: makes every buffer the dataflow aliases (dataflow.h) safe to share, by
 * adding `copy` instructions where sharing would overwrite a value still needed.
 *
 * First the call graph is flattened: a sequential computation (callee of call / while /
 * conditional) reached from more than one place is cloned, so each has one caller.
 *
 * Then, on the dataflow of the module, copies are added:
 *  - In-place ops (dynamic-update-slice, scatter, in-place fusions, custom-calls with
 *    output_to_operand_aliasing): the in-place operand is copied when its value is a
 *    constant, an entry parameter (unless input_output_alias donates it to the output this
 *    op produces), a while condition's parameter, a value from another computation, is
 *    held by its computation's root, appears in another operand position of the op, or
 *    has another use that is not guaranteed to run before the op (not a transitive
 *    operand / control predecessor of it).
 *  - While loops: an init leaf is copied when it is a constant, a parameter (entry or an
 *    enclosing computation's), comes from another computation, appears twice in the
 *    state, escapes through its computation's root, or has another use not guaranteed
 *    before the loop. A body root leaf is copied when it is not the body parameter's leaf
 *    at the same index and: it is a constant or parameter, appears twice, its in-place
 *    origin is not that leaf, or a use of that parameter leaf may run after the value is
 *    first written; the copy then gets every such use as a control predecessor.
 *  - Conditionals: a branch root leaf that is not produced inside the branch (a branch
 *    parameter, an outer value, a constant) or appears twice is copied.
 *  - The entry root: constants, parameters (unless input_output_alias maps that parameter
 *    to that output) and repeated leaves are copied; an aliased output whose value is not
 *    the parameter updated in place is copied after every use of the parameter, so it can
 *    be written into the parameter's buffer.
 * The analysis repeats until no copy is needed (the new copies are uses too). */
#include <stdio.h>
#include <string.h>

#include "compiler/hlo/collective_groups.h"
#include "compiler/passes/dataflow.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

/* ---- call graph flattening ---- */

/* Instructions of `c` and of everything it calls as control flow (an estimate of what
 * cloning it costs). */
static int64_t subtree_size(const kiln_hlo_computation_t *c, int depth) {
  int64_t n = (int64_t)c->instructions.len;
  if (depth > 64) return n;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (!kiln_dataflow_is_control_flow(in)) continue;
    for (int g = 0; g < in->num_called_groups; g++)
      for (int k = 0; k < in->called_groups[g].n; k++)
        if (in->called_groups[g].comps[k]) n += subtree_size(in->called_groups[g].comps[k], depth + 1);
  }
  return n;
}

/* Arena bytes one cloned instruction takes, generously (struct, name, operand arrays). */
#define CLONE_BYTES_PER_INSTRUCTION 2048

static kiln_status flatten_comp(kiln_hlo_module_t *m, kiln_hlo_computation_t *c, kiln_ptrmap_t *seen,
                                bool *changed, int depth) {
  if (depth > 256) return kiln_status_make(KILN_INVALID_ARGUMENT, "call nesting deeper than 256 at %s", c->name);
  kiln_ptrmap_put(seen, c, (void *)1);
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (!kiln_dataflow_is_control_flow(in)) continue;
    for (int g = 0; g < in->num_called_groups; g++) {
      for (int k = 0; k < in->called_groups[g].n; k++) {
        kiln_hlo_computation_t *callee = in->called_groups[g].comps[k];
        if (!callee) continue;
        if (kiln_ptrmap_contains(seen, callee)) {
          int64_t need = subtree_size(callee, 0) * CLONE_BYTES_PER_INSTRUCTION;
          if (m->arena.limit && m->arena.total + (size_t)need > m->arena.limit)
            return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                                    "flattening the call graph: cloning %s (called from several "
                                    "places) would pass the module's memory bound",
                                    callee->name);
          kiln_hlo_computation_t *clone = kiln_hlo_computation_clone(callee, callee->name);
          if (!clone)
            return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "could not clone %s", callee->name);
          /* Clones share attribute arrays with their source: copy before writing. */
          kiln_called_group_t *groups =
              kiln_arena_alloc(&m->arena, sizeof *groups * (size_t)in->num_called_groups);
          kiln_hlo_computation_t **comps =
              kiln_arena_alloc(&m->arena, sizeof *comps * (size_t)in->called_groups[g].n);
          if (!groups || !comps) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "module arena full");
          memcpy(groups, in->called_groups, sizeof *groups * (size_t)in->num_called_groups);
          memcpy(comps, in->called_groups[g].comps, sizeof *comps * (size_t)in->called_groups[g].n);
          comps[k] = clone;
          groups[g].comps = comps;
          in->called_groups = groups;
          callee = clone;
          *changed = true;
        }
        KILN_RETURN_IF_ERROR_PLAIN(flatten_comp(m, callee, seen, changed, depth + 1));
      }
    }
  }
  return NULL;
}

/* ---- building copies ---- */

static kiln_hlo_instruction_t *make_copy(kiln_hlo_instruction_t *x, kiln_hlo_computation_t *c) {
  kiln_hlo_module_t *m = c->module;
  kiln_hlo_instruction_t *cp =
      kiln_hlo_instruction_create(c, KILN_OP_COPY, x->shape, kiln_hlo_module_unique_name(m, "copy"));
  kiln_hlo_instruction_set_operands(cp, 1, &x);
  return cp;
}

static void add_control_pred(kiln_hlo_instruction_t *in, kiln_hlo_instruction_t *pred) {
  if (pred == in || pred->parent != in->parent) return;
  for (int i = 0; i < in->num_control_predecessors; i++)
    if (in->control_predecessors[i] == pred) return;
  kiln_arena_t *a = &in->parent->module->arena;
  kiln_hlo_instruction_t **p = kiln_arena_alloc(a, sizeof *p * (size_t)(in->num_control_predecessors + 1));
  if (in->num_control_predecessors)
    memcpy(p, in->control_predecessors, sizeof *p * (size_t)in->num_control_predecessors);
  p[in->num_control_predecessors++] = pred;
  in->control_predecessors = p;
  kiln_vec_push(&pred->control_successors, in);
}

/* Per-leaf copy request: copy the leaf, with these control predecessors. */
typedef struct leaf_req {
  bool copy;
  KILN_VEC(kiln_hlo_instruction_t *) preds;
} leaf_req_t;

/* Returns `x` with the selected leaves (numbered from `base`) replaced by copies: tuples
 * are rebuilt from their operands (or get-tuple-elements of `x`). */
static kiln_hlo_instruction_t *deep_copy(kiln_hlo_computation_t *c, kiln_hlo_instruction_t *x,
                                         leaf_req_t *req, int base) {
  int n = kiln_shape_num_leaves(x->shape);
  bool any = false;
  for (int l = 0; l < n; l++) any |= req[base + l].copy;
  if (!any) return x;
  if (!kiln_shape_is_tuple(x->shape)) {
    kiln_hlo_instruction_t *cp = make_copy(x, c);
    for (size_t k = 0; k < req[base].preds.len; k++) add_control_pred(cp, req[base].preds.data[k]);
    return cp;
  }
  int ne = x->shape->num_elements;
  kiln_hlo_instruction_t **elems = kiln_malloc(sizeof *elems * (size_t)(ne + 1));
  int off = base;
  for (int k = 0; k < ne; k++) {
    kiln_hlo_instruction_t *e;
    if (x->opcode == KILN_OP_TUPLE && k < x->num_operands) {
      e = x->operands[k];
    } else {
      e = kiln_hlo_instruction_create(c, KILN_OP_GET_TUPLE_ELEMENT, x->shape->elements[k],
                                      kiln_hlo_module_unique_name(c->module, "get-tuple-element"));
      e->tuple_index = k;
      kiln_hlo_instruction_set_operands(e, 1, &x);
    }
    elems[k] = deep_copy(c, e, req, off);
    off += kiln_shape_num_leaves(x->shape->elements[k]);
  }
  kiln_hlo_instruction_t *t = kiln_hlo_instruction_create(c, KILN_OP_TUPLE, x->shape,
                                                          kiln_hlo_module_unique_name(c->module, "tuple"));
  kiln_hlo_instruction_set_operands(t, ne, elems);
  kiln_free(elems);
  return t;
}

static leaf_req_t *reqs_new(int n) { return kiln_calloc((size_t)n + 1, sizeof(leaf_req_t)); }

static void reqs_free(leaf_req_t *r, int n) {
  if (!r) return;
  for (int i = 0; i < n; i++) kiln_vec_free(&r[i].preds);
  kiln_free(r);
}

/* ---- decisions ---- */

typedef struct inplace_copy {
  kiln_hlo_instruction_t *instr;
  int operand;
} inplace_copy_t;

typedef struct plan {
  KILN_VEC(inplace_copy_t) inplace;
  KILN_VEC(kiln_hlo_instruction_t *) whiles; /* with reqs in while_reqs */
  KILN_VEC(leaf_req_t *) while_reqs;
  KILN_VEC(kiln_hlo_computation_t *) roots;  /* with reqs in root_reqs */
  KILN_VEC(leaf_req_t *) root_reqs;
  kiln_ptrmap_t donated;                     /* in-place instr -> (void *)1: may update its param */
} plan_t;

static bool is_param_phi(const kiln_hlo_value_t *v) {
  return v->kind == KILN_VALUE_PHI && v->def->opcode == KILN_OP_PARAMETER;
}

/* The value whose buffer `v` is written into by in-place ops: follows in-place pairs down
 * to the first value of the chain. */
static kiln_hlo_value_t *inplace_origin(kiln_dataflow_t *df, kiln_hlo_value_t *v) {
  for (int guard = 0; guard < 10000; guard++) {
    kiln_inplace_pair_t pairs[16];
    int np = kiln_dataflow_inplace_pairs(v->def, pairs, 16);
    kiln_hlo_value_t *next = NULL;
    for (int p = 0; p < np && !next; p++)
      if (pairs[p].out_leaf == v->leaf)
        next = kiln_dataflow_value_at(df, v->def->operands[pairs[p].operand], 0);
    if (!next || !kiln_dataflow_instr(df, v->def)) return v;
    v = next;
  }
  return v;
}

/* The done of a split async start `user` (kiln_hlo_async_split_done: the runtime reads the
 * start's operands until its done, runtime/collective_thunk.h), or NULL; mutable, as the
 * dataflow's ancestor lookups take it. */
static kiln_hlo_instruction_t *split_done_of(const kiln_hlo_instruction_t *user) {
  return (kiln_hlo_instruction_t *)kiln_hlo_async_split_done(user);
}

/* True when every use of `x` (mapped into computation `c`) other than `at` is guaranteed to
 * run before `at` (a split start's use lasting until its done); uses at `at` itself must be
 * sharable into output leaf `out_leaf` (or `at` may be skipped entirely when `allow_at` is
 * false). */
static bool uses_precede(kiln_dataflow_t *df, const kiln_hlo_value_t *x, kiln_hlo_instruction_t *at,
                         int out_leaf, bool allow_at) {
  for (int u = 0; u < x->num_uses; u++) {
    kiln_hlo_instruction_t *done = split_done_of(x->uses[u].instr);
    if (done) {
      kiln_hlo_instruction_t *b = kiln_dataflow_ancestor_in(df, done, at->parent);
      if (!b || b == at || !kiln_dataflow_reaches(b, at)) return false;
    }
    kiln_hlo_instruction_t *a = kiln_dataflow_ancestor_in(df, x->uses[u].instr, at->parent);
    if (!a) return false;
    if (a == at) {
      if (!allow_at) return false;
      if (x->uses[u].instr != at || !kiln_dataflow_can_share(at, x->uses[u].operand, out_leaf))
        return false;
      continue;
    }
    if (!kiln_dataflow_reaches(a, at)) return false;
  }
  return true;
}

/* Instructions of `c` through which `x` is used (for control predecessors). */
static void uses_in(kiln_dataflow_t *df, const kiln_hlo_value_t *x, kiln_hlo_computation_t *c,
                    leaf_req_t *req) {
  for (int u = 0; u < x->num_uses; u++) {
    kiln_hlo_instruction_t *a = kiln_dataflow_ancestor_in(df, x->uses[u].instr, c);
    if (a) kiln_vec_push(&req->preds, a);
    kiln_hlo_instruction_t *done = split_done_of(x->uses[u].instr);
    a = done ? kiln_dataflow_ancestor_in(df, done, c) : NULL;
    if (a) kiln_vec_push(&req->preds, a);
  }
}

static void mark_donated(kiln_dataflow_t *df, const kiln_hlo_module_t *m, plan_t *pl) {
  kiln_dataflow_instr_t *rd = kiln_dataflow_instr(df, m->entry->root);
  for (int a = 0; a < m->num_io_aliases; a++) {
    const kiln_io_alias_t *io = &m->io_aliases[a];
    if (io->param_number < 0 || io->param_number >= m->entry->num_parameters) continue;
    kiln_hlo_instruction_t *p = m->entry->parameters[io->param_number];
    kiln_hlo_value_t *v = NULL;
    const kiln_shape_t *s = m->entry->root->shape;
    int leaf = 0;
    bool ok = true;
    for (int k = 0; k < io->output_index.n && ok; k++) {
      if (!kiln_shape_is_tuple(s) || io->output_index.v[k] >= s->num_elements) ok = false;
      else {
        leaf += kiln_shape_leaf_offset(s, io->output_index.v[k]);
        s = s->elements[io->output_index.v[k]];
      }
    }
    if (!ok || !rd || leaf >= rd->num_leaves || !p) continue;
    v = rd->leaves[leaf];
    /* Walk the in-place chain; if it starts at the donated parameter, its ops may write. */
    KILN_VEC(kiln_hlo_instruction_t *) chain = {0};
    for (int guard = 0; v && guard < 10000; guard++) {
      if (v->kind == KILN_VALUE_PARAMETER) break;
      kiln_inplace_pair_t pairs[16];
      int np = kiln_dataflow_inplace_pairs(v->def, pairs, 16);
      kiln_hlo_value_t *next = NULL;
      for (int q = 0; q < np && !next; q++)
        if (pairs[q].out_leaf == v->leaf) next = kiln_dataflow_value_at(df, v->def->operands[pairs[q].operand], 0);
      if (!next) break;
      kiln_vec_push(&chain, v->def);
      v = next;
    }
    if (v && v->kind == KILN_VALUE_PARAMETER && v->def == p)
      for (size_t k = 0; k < chain.len; k++) kiln_ptrmap_put(&pl->donated, chain.data[k], (void *)1);
    kiln_vec_free(&chain);
  }
}

static void plan_inplace(kiln_dataflow_t *df, kiln_hlo_instruction_t *t, plan_t *pl) {
  kiln_inplace_pair_t pairs[16];
  int np = kiln_dataflow_inplace_pairs(t, pairs, 16);
  for (int p = 0; p < np; p++) {
    int op = pairs[p].operand;
    kiln_hlo_value_t *x = kiln_dataflow_value_at(df, t->operands[op], 0);
    if (!x) continue;
    bool copy = false;
    if (x->kind == KILN_VALUE_CONSTANT) copy = true;
    if (x->kind == KILN_VALUE_PARAMETER && !kiln_ptrmap_contains(&pl->donated, t)) copy = true;
    if (is_param_phi(x)) {
      kiln_dataflow_comp_t *dc = kiln_dataflow_comp(df, x->def->parent);
      if (dc && dc->caller && dc->caller->opcode == KILN_OP_WHILE &&
          kiln_hlo_instruction_called(dc->caller, "condition") == x->def->parent)
        copy = true;
    }
    if (x->def->parent != t->parent) copy = true;
    if (x->num_root_comps > 0) copy = true;
    for (int k = 0; k < t->num_operands && !copy; k++) {
      if (k == op) continue;
      kiln_dataflow_instr_t *od = kiln_dataflow_instr(df, t->operands[k]);
      for (int l = 0; od && l < od->num_leaves; l++)
        if (od->leaves[l] == x) copy = true;
    }
    if (!copy && !uses_precede(df, x, t, pairs[p].out_leaf, true)) copy = true;
    if (copy) kiln_vec_push(&pl->inplace, ((inplace_copy_t){t, op}));
  }
}

static bool is_fixed_source(const kiln_hlo_value_t *v) {
  return v->kind == KILN_VALUE_CONSTANT || v->kind == KILN_VALUE_PARAMETER || is_param_phi(v);
}

static void plan_while(kiln_dataflow_t *df, kiln_hlo_instruction_t *w, plan_t *pl) {
  kiln_hlo_computation_t *body = kiln_hlo_instruction_called(w, "body");
  kiln_dataflow_instr_t *id = kiln_dataflow_instr(df, w->operands[0]);
  kiln_dataflow_instr_t *rd = kiln_dataflow_instr(df, body->root);
  kiln_dataflow_instr_t *pd = body->num_parameters ? kiln_dataflow_instr(df, body->parameters[0]) : NULL;
  if (!id || !rd || !pd) return;
  int n = id->num_leaves;
  leaf_req_t *init = reqs_new(n), *root = reqs_new(n);
  bool any_init = false, any_root = false;
  for (int l = 0; l < n; l++) {
    kiln_hlo_value_t *a = id->leaves[l];
    if (!a) continue;
    bool copy = is_fixed_source(a) || a->def->parent != w->parent || a->num_root_comps > 0;
    for (int l2 = 0; l2 < l && !copy; l2++) copy = id->leaves[l2] == a;
    for (int u = 0; u < a->num_uses && !copy; u++) {
      kiln_hlo_instruction_t *anc = kiln_dataflow_ancestor_in(df, a->uses[u].instr, w->parent);
      if (anc == w && a->uses[u].instr == w) continue;
      if (!anc || anc == w || !kiln_dataflow_reaches(anc, w)) copy = true;
    }
    if (copy) init[l].copy = any_init = true;
  }
  for (int l = 0; l < n && l < rd->num_leaves && l < pd->num_leaves; l++) {
    kiln_hlo_value_t *v = rd->leaves[l], *p = pd->leaves[l];
    if (!v || !p || v == p) continue;
    bool copy = is_fixed_source(v) || v->def->parent != body;
    /* Repeated: keep the leaf where the value passes through unchanged, else the first. */
    for (int l2 = 0; l2 < rd->num_leaves && !copy; l2++) {
      if (l2 == l || rd->leaves[l2] != v) continue;
      if (l2 < pd->num_leaves && pd->leaves[l2] == v) copy = true;
      else if (l2 < l) copy = true;
    }
    if (!copy) {
      kiln_hlo_value_t *o = inplace_origin(df, v);
      if (o != p) {
        if (is_fixed_source(o) || o->def->parent != body) copy = true;
        else if (!uses_precede(df, p, o->def, o->leaf, true)) copy = true;
      }
    }
    if (copy) {
      root[l].copy = any_root = true;
      uses_in(df, p, body, &root[l]);
    }
  }
  if (any_init) {
    kiln_vec_push(&pl->whiles, w);
    kiln_vec_push(&pl->while_reqs, init);
  } else {
    reqs_free(init, n);
  }
  if (any_root) {
    kiln_vec_push(&pl->roots, body);
    kiln_vec_push(&pl->root_reqs, root);
  } else {
    reqs_free(root, n);
  }
}

static void plan_branch_root(kiln_dataflow_t *df, kiln_hlo_computation_t *br, plan_t *pl) {
  kiln_dataflow_instr_t *rd = kiln_dataflow_instr(df, br->root);
  if (!rd) return;
  int n = rd->num_leaves;
  leaf_req_t *req = reqs_new(n);
  bool any = false;
  for (int l = 0; l < n; l++) {
    kiln_hlo_value_t *v = rd->leaves[l];
    if (!v) continue;
    bool copy = is_fixed_source(v) || v->def->parent != br;
    for (int l2 = 0; l2 < l && !copy; l2++) copy = rd->leaves[l2] == v;
    if (!copy) {
      kiln_hlo_value_t *o = inplace_origin(df, v);
      if (is_fixed_source(o) || o->def->parent != br) copy = true;
    }
    if (copy) req[l].copy = any = true;
  }
  if (any) {
    kiln_vec_push(&pl->roots, br);
    kiln_vec_push(&pl->root_reqs, req);
  } else {
    reqs_free(req, n);
  }
}

static void plan_entry_root(kiln_dataflow_t *df, const kiln_hlo_module_t *m, plan_t *pl) {
  kiln_hlo_computation_t *e = m->entry;
  kiln_dataflow_instr_t *rd = kiln_dataflow_instr(df, e->root);
  if (!rd) return;
  int n = rd->num_leaves;
  leaf_req_t *req = reqs_new(n);
  bool any = false;
  /* Which parameter value each output leaf is aliased with (NULL: none). */
  kiln_hlo_value_t **alias = kiln_calloc((size_t)n + 1, sizeof *alias);
  for (int a = 0; a < m->num_io_aliases; a++) {
    const kiln_io_alias_t *io = &m->io_aliases[a];
    if (io->param_number < 0 || io->param_number >= e->num_parameters) continue;
    const kiln_shape_t *s = e->root->shape;
    int leaf = 0;
    bool ok = true;
    for (int k = 0; k < io->output_index.n && ok; k++) {
      if (!kiln_shape_is_tuple(s) || io->output_index.v[k] >= s->num_elements) ok = false;
      else {
        leaf += kiln_shape_leaf_offset(s, io->output_index.v[k]);
        s = s->elements[io->output_index.v[k]];
      }
    }
    const kiln_hlo_instruction_t *p = e->parameters[io->param_number];
    const kiln_shape_t *ps = p->shape;
    int pleaf = 0;
    for (int k = 0; k < io->param_index.n && ok; k++) {
      if (!kiln_shape_is_tuple(ps) || io->param_index.v[k] >= ps->num_elements) ok = false;
      else {
        pleaf += kiln_shape_leaf_offset(ps, io->param_index.v[k]);
        ps = ps->elements[io->param_index.v[k]];
      }
    }
    if (ok && leaf < n) alias[leaf] = kiln_dataflow_value_at(df, p, pleaf);
  }
  for (int l = 0; l < n; l++) {
    kiln_hlo_value_t *v = rd->leaves[l];
    if (!v) continue;
    kiln_hlo_value_t *pv = alias[l];
    bool copy = false;
    if (pv && v == pv) {
      /* passes the donated parameter through unchanged */
    } else if (pv) {
      kiln_hlo_value_t *o = inplace_origin(df, v);
      if (o != pv) {
        if (is_fixed_source(o)) copy = true;
        else if (!uses_precede(df, pv, o->def->parent == e ? o->def : kiln_dataflow_ancestor_in(df, o->def, e),
                               o->leaf, o->def->parent == e))
          copy = true;
        if (copy) uses_in(df, pv, e, &req[l]);
      }
    } else {
      copy = v->kind == KILN_VALUE_CONSTANT || v->kind == KILN_VALUE_PARAMETER;
      if (!copy) {
        kiln_hlo_value_t *o = inplace_origin(df, v);
        copy = o->kind == KILN_VALUE_CONSTANT || o->kind == KILN_VALUE_PARAMETER;
      }
    }
    for (int l2 = 0; l2 < l && !copy; l2++) copy = rd->leaves[l2] == v;
    if (copy) req[l].copy = any = true;
  }
  kiln_free(alias);
  if (any) {
    kiln_vec_push(&pl->roots, e);
    kiln_vec_push(&pl->root_reqs, req);
  } else {
    reqs_free(req, n);
  }
}

/* ---- the pass ---- */

static void plan_free(plan_t *pl) {
  for (size_t i = 0; i < pl->whiles.len; i++)
    reqs_free(pl->while_reqs.data[i], kiln_shape_num_leaves(pl->whiles.data[i]->operands[0]->shape));
  for (size_t i = 0; i < pl->roots.len; i++)
    reqs_free(pl->root_reqs.data[i], kiln_shape_num_leaves(pl->roots.data[i]->root->shape));
  kiln_vec_free(&pl->inplace);
  kiln_vec_free(&pl->whiles);
  kiln_vec_free(&pl->while_reqs);
  kiln_vec_free(&pl->roots);
  kiln_vec_free(&pl->root_reqs);
  kiln_ptrmap_free(&pl->donated);
}

typedef KILN_VEC(kiln_hlo_computation_t *) comp_vec_t;

static void mark_touched(kiln_ptrmap_t *touched, comp_vec_t *list, kiln_hlo_computation_t *c) {
  if (kiln_ptrmap_contains(touched, c)) return;
  kiln_ptrmap_put(touched, c, (void *)1);
  kiln_vec_push(list, c);
}

/* One round: analyse, decide, apply. Returns the number of copies added. */
static kiln_status round_once(kiln_hlo_module_t *m, int *added) {
  *added = 0;
  kiln_dataflow_t *df = NULL;
  KILN_RETURN_IF_ERROR(kiln_dataflow_run(m, &df), "copy insertion");
  plan_t pl;
  memset(&pl, 0, sizeof pl);
  kiln_ptrmap_init(&pl.donated);
  mark_donated(df, m, &pl);
  for (size_t ci = 0; ci < df->comps.len; ci++) {
    kiln_dataflow_comp_t *dc = df->comps.data[ci];
    kiln_hlo_computation_t *c = dc->comp;
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_hlo_instruction_t *in = c->instructions.data[i];
      plan_inplace(df, in, &pl);
      if (in->opcode == KILN_OP_WHILE) plan_while(df, in, &pl);
    }
    if (dc->caller && dc->caller->opcode == KILN_OP_CONDITIONAL) plan_branch_root(df, c, &pl);
  }
  plan_entry_root(df, m, &pl);

  kiln_ptrmap_t touched;
  kiln_ptrmap_init(&touched);
  comp_vec_t touched_list = {0};
  for (size_t i = 0; i < pl.inplace.len; i++) {
    kiln_hlo_instruction_t *t = pl.inplace.data[i].instr;
    int op = pl.inplace.data[i].operand;
    kiln_hlo_instruction_t *cp = make_copy(t->operands[op], t->parent);
    kiln_hlo_instruction_t **ops = kiln_malloc(sizeof *ops * (size_t)t->num_operands);
    for (int k = 0; k < t->num_operands; k++) ops[k] = k == op ? cp : t->operands[k];
    kiln_hlo_instruction_set_operands(t, t->num_operands, ops);
    kiln_free(ops);
    mark_touched(&touched, &touched_list, t->parent);
    (*added)++;
  }
  for (size_t i = 0; i < pl.whiles.len; i++) {
    kiln_hlo_instruction_t *w = pl.whiles.data[i];
    kiln_hlo_instruction_t *old = w->operands[0];
    leaf_req_t *req = pl.while_reqs.data[i];
    int n = kiln_shape_num_leaves(old->shape);
    for (int l = 0; l < n; l++) *added += req[l].copy;
    kiln_hlo_instruction_t *repl = deep_copy(w->parent, old, req, 0);
    kiln_pass_replace_operand(w, old, repl);
    mark_touched(&touched, &touched_list, w->parent);
  }
  for (size_t i = 0; i < pl.roots.len; i++) {
    kiln_hlo_computation_t *c = pl.roots.data[i];
    leaf_req_t *req = pl.root_reqs.data[i];
    int n = kiln_shape_num_leaves(c->root->shape);
    for (int l = 0; l < n; l++) *added += req[l].copy;
    c->root = deep_copy(c, c->root, req, 0);
    mark_touched(&touched, &touched_list, c);
  }
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  for (size_t i = 0; i < touched_list.len; i++) {
    kiln_hlo_computation_t *c = touched_list.data[i];
    /* Tuples the copies replaced are dead now. */
    KILN_VEC(kiln_hlo_instruction_t *) dead = {0};
    for (size_t k = 0; k < c->instructions.len; k++) {
      kiln_hlo_instruction_t *in = c->instructions.data[k];
      if ((in->opcode == KILN_OP_TUPLE || in->opcode == KILN_OP_GET_TUPLE_ELEMENT) && !in->users.len &&
          in != c->root && !in->control_successors.len && !in->num_control_predecessors)
        kiln_vec_push(&dead, in);
    }
    for (size_t k = 0; k < dead.len; k++) {
      kiln_hlo_instruction_t *in = dead.data[k];
      if (!in->users.len && in != c->root) kiln_status_free(kiln_hlo_instruction_remove(in));
    }
    kiln_vec_free(&dead);
    kiln_hlo_computation_sort_post_order(c);
  }
  kiln_pass_effects_free(&effects);
  kiln_vec_free(&touched_list);
  kiln_ptrmap_free(&touched);
  plan_free(&pl);
  kiln_dataflow_free(df);
  return NULL;
}

kiln_status kiln_pass_copy_insertion(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                     bool *changed) {
  if (!m->entry) return kiln_status_make(KILN_INVALID_ARGUMENT, "copy insertion: module has no entry");
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  kiln_status s = flatten_comp(m, m->entry, &seen, changed, 0);
  kiln_ptrmap_free(&seen);
  if (s) return kiln_status_annotate(s, "copy insertion");
  for (int r = 0; r < 16; r++) {
    int added = 0;
    KILN_RETURN_IF_ERROR_PLAIN(round_once(m, &added));
    if (!added) return NULL;
    *changed = true;
  }
  return kiln_status_make(KILN_INTERNAL, "copy insertion did not converge in 16 rounds on %s", m->name);
}
