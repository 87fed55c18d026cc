/* HLO verifier: structural checks of a module, then the shape rules of every instruction
 * (shape_inference.h) compared with the shapes the module states.
 *
 * Structural rules: an entry computation among the module's computations; computation
 * names unique; every computation has a root of its own; instruction names unique within
 * their computation (not module-wide: real dumps reuse names such as `p0` across
 * computations); operands, users and control edges stay inside the computation and agree
 * with each other; no data cycles; parameter numbers dense 0..n-1; called computations
 * belong to the module and no computation calls itself, directly or not; layouts have
 * the shape's rank and a permutation as minor_to_major; entry_computation_layout matches
 * the entry's parameters and root in element types and dimensions.
 *
 * Layouts are not compared between entry_computation_layout and the entry computation:
 * before layout assignment the entry layout is a request that may differ from the
 * instructions' layouts (XLA compares them only in its layout-sensitive mode, and the
 * corpus has modules that differ). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/hashmap.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/shape_inference.h"
#include "compiler/hlo/shape_inference_internal.h"

/* Wraps `inner` (consumed) as "in computation 'c', instruction 'i': <message>". */
static kiln_status in_instruction(const kiln_hlo_computation_t *c,
                                  const kiln_hlo_instruction_t *instr, kiln_status inner) {
  kiln_status s = kiln_status_make(kiln_status_code(inner),
                                   "in computation '%s', instruction '%s': %s", c->name,
                                   instr->name, kiln_status_message(inner));
  kiln_status_free(inner);
  return s;
}

static kiln_status comp_error(const kiln_hlo_computation_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static kiln_status comp_error(const kiln_hlo_computation_t *c, const char *fmt, ...) {
  kiln_strbuf_t b = {0};
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  kiln_status s = KILN_ERR_INVALID("in computation '%s': %s", c->name, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return s;
}

static kiln_status layout_error(kiln_arena_t *a, const kiln_shape_t *s) {
  return KILN_ERR_INVALID("layout of %s must list each of its %d dimensions once",
                          kiln__shape_str(a, s) /* without layout */, s->rank);
}

/* Layout rank equals the shape's rank and minor_to_major is a permutation. */
static kiln_status check_layout(kiln_arena_t *a, const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      KILN_RETURN_IF_ERROR_PLAIN(check_layout(a, s->elements[i]));
    return KILN_STATUS_OK;
  }
  if (!kiln_shape_is_array(s) || !s->has_layout) return KILN_STATUS_OK;
  const kiln_layout_t *l = &s->layout;
  if (l->rank != s->rank) {
    char *text = kiln_shape_to_string(s, true);
    kiln_status st = KILN_ERR_INVALID("layout of %s has %d entries but the shape has rank %d",
                                      text, l->rank, s->rank);
    kiln_free(text);
    return st;
  }
  kiln_i64_list_t perm = {l->rank, l->minor_to_major};
  if (!kiln__valid_dims(&perm, s->rank)) return layout_error(a, s);
  return KILN_STATUS_OK;
}

static bool contains_ptr(kiln_hlo_instruction_t *const *v, size_t n, const void *p) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == p) return true;
  return false;
}

static kiln_status check_edges(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *in) {
  if (in->parent != c) return comp_error(c, "instruction '%s' names another parent", in->name);
  for (int i = 0; i < in->num_operands; i++) {
    const kiln_hlo_instruction_t *o = in->operands[i];
    if (!o) return comp_error(c, "instruction '%s' operand %d is missing", in->name, i);
    if (o->parent != c)
      return comp_error(c, "instruction '%s' operand %d '%s' belongs to computation '%s'",
                        in->name, i, o->name, o->parent ? o->parent->name : "<none>");
    if (!contains_ptr(o->users.data, o->users.len, in))
      return comp_error(c, "instruction '%s' uses '%s', which does not list it as a user",
                        in->name, o->name);
  }
  for (size_t u = 0; u < in->users.len; u++) {
    const kiln_hlo_instruction_t *user = in->users.data[u];
    if (!user || user->parent != c)
      return comp_error(c, "instruction '%s' lists a user outside the computation", in->name);
    if (!contains_ptr(user->operands, (size_t)user->num_operands, in))
      return comp_error(c, "instruction '%s' lists '%s' as a user, but it is not an operand of it",
                        in->name, user->name);
  }
  for (int i = 0; i < in->num_control_predecessors; i++) {
    const kiln_hlo_instruction_t *p = in->control_predecessors[i];
    if (!p || p->parent != c)
      return comp_error(c, "instruction '%s' has a control predecessor outside the computation",
                        in->name);
  }
  for (int g = 0; g < in->num_called_groups; g++)
    for (int k = 0; k < in->called_groups[g].n; k++)
      if (!in->called_groups[g].comps[k])
        return comp_error(c, "instruction '%s' calls a missing computation under %s=", in->name,
                          in->called_groups[g].key);
  return KILN_STATUS_OK;
}

/* Parameters: numbers dense 0..n-1, each the one c->parameters holds for its number. */
static kiln_status check_parameters(const kiln_hlo_computation_t *c) {
  int count = 0;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (in->opcode != KILN_OP_PARAMETER) continue;
    count++;
    int64_t k = in->parameter_number;
    if (k < 0 || k >= c->num_parameters || !c->parameters || c->parameters[k] != in)
      return comp_error(c, "parameter '%s' has number %lld, but parameter numbers must be dense 0..n-1 and unique",
                        in->name, (long long)k);
  }
  if (count != c->num_parameters)
    return comp_error(c, "has %d parameter instructions but %d parameter slots", count,
                      c->num_parameters);
  return KILN_STATUS_OK;
}

/* No instruction reaches itself through operands or control predecessors (iterative DFS:
 * color 1 = on the stack, 2 = done). */
static kiln_status check_acyclic(const kiln_hlo_computation_t *c) {
  kiln_ptrmap_t color;
  kiln_ptrmap_init(&color);
  KILN_VEC(const kiln_hlo_instruction_t *) stack = {0};
  KILN_VEC(int) next = {0};
  kiln_status st = KILN_STATUS_OK;
  for (size_t r = 0; r < c->instructions.len && !st; r++) {
    const kiln_hlo_instruction_t *start = c->instructions.data[r];
    if (kiln_ptrmap_get(&color, start)) continue;
    kiln_ptrmap_put(&color, start, (void *)1);
    kiln_vec_push(&stack, start);
    kiln_vec_push(&next, 0);
    while (stack.len && !st) {
      const kiln_hlo_instruction_t *in = kiln_vec_last(&stack);
      int k = next.data[next.len - 1]++;
      int total = in->num_operands + in->num_control_predecessors;
      if (k >= total) {
        kiln_ptrmap_put(&color, in, (void *)2);
        stack.len--;
        next.len--;
        continue;
      }
      const kiln_hlo_instruction_t *o = k < in->num_operands
                                            ? in->operands[k]
                                            : in->control_predecessors[k - in->num_operands];
      void *col = kiln_ptrmap_get(&color, o);
      if (col == (void *)1) {
        st = comp_error(c, "instruction '%s' depends on itself (a cycle through '%s')", o->name,
                        in->name);
      } else if (!col) {
        kiln_ptrmap_put(&color, o, (void *)1);
        kiln_vec_push(&stack, o);
        kiln_vec_push(&next, 0);
      }
    }
  }
  kiln_vec_free(&stack);
  kiln_vec_free(&next);
  kiln_ptrmap_free(&color);
  return st;
}

static kiln_status check_computation_structure(const kiln_hlo_computation_t *c) {
  if (!c->root) return comp_error(c, "has no root instruction");
  if (c->root->parent != c)
    return comp_error(c, "root '%s' belongs to another computation", c->root->name);
  kiln_hashmap_t names;
  kiln_hashmap_init(&names);
  kiln_status st = KILN_STATUS_OK;
  for (size_t i = 0; i < c->instructions.len && !st; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (kiln_hashmap_put(&names, in->name, strlen(in->name), (void *)in))
      st = comp_error(c, "instruction name '%s' is used more than once", in->name);
    else
      st = check_edges(c, in);
  }
  kiln_hashmap_free(&names);
  KILN_RETURN_IF_ERROR_PLAIN(st);
  KILN_RETURN_IF_ERROR_PLAIN(check_parameters(c));
  return check_acyclic(c);
}

/* Call graph: every called computation is in the module, and no computation reaches
 * itself. `state` maps computation -> 1 (in progress) / 2 (done). Depth is bounded by the
 * number of computations. */
static kiln_status check_calls_from(const kiln_hlo_computation_t *c, kiln_ptrmap_t *members,
                                    kiln_ptrmap_t *state) {
  kiln_ptrmap_put(state, c, (void *)1);
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    for (int g = 0; g < in->num_called_groups; g++) {
      for (int k = 0; k < in->called_groups[g].n; k++) {
        const kiln_hlo_computation_t *callee = in->called_groups[g].comps[k];
        if (!kiln_ptrmap_contains(members, callee))
          return in_instruction(c, in, KILN_ERR_INVALID("calls a computation that is not in the module"));
        void *s = kiln_ptrmap_get(state, callee);
        if (s == (void *)1)
          return in_instruction(
              c, in,
              KILN_ERR_INVALID("calls computation '%s', which is already being called (a call cycle)",
                               callee->name));
        if (!s) KILN_RETURN_IF_ERROR_PLAIN(check_calls_from(callee, members, state));
      }
    }
  }
  kiln_ptrmap_put(state, c, (void *)2);
  return KILN_STATUS_OK;
}

static kiln_status check_instruction_shape(kiln_arena_t *a, const kiln_hlo_computation_t *c,
                                           const kiln_hlo_instruction_t *in) {
  if (!in->shape) return in_instruction(c, in, KILN_ERR_INVALID("has no shape"));
  kiln_status st = check_layout(a, in->shape);
  if (st) return in_instruction(c, in, st);
  if (in->opcode == KILN_OP_PARAMETER) return KILN_STATUS_OK;
  kiln_shape_t *inferred = NULL;
  st = kiln_shape_infer_instruction(a, in, &inferred);
  if (st) return in_instruction(c, in, st);
  if (inferred && !kiln_shape_compatible(inferred, in->shape))
    return in_instruction(c, in,
                          KILN_ERR_INVALID("%s result is %s, but its operands give %s",
                                           kiln_hlo_opcode_name(in->opcode),
                                           kiln__shape_str(a, in->shape),
                                           kiln__shape_str(a, inferred)));
  return KILN_STATUS_OK;
}

/* A custom call's operand_layout_constraints: one array shape with a layout per operand, of
 * the operand's type and dimensions. */
static kiln_status check_layout_constraints(kiln_arena_t *a, const kiln_hlo_computation_t *c,
                                            const kiln_hlo_instruction_t *in) {
  const char *raw = in->opcode == KILN_OP_CUSTOM_CALL
                        ? kiln_hlo_instruction_raw_attr(in, "operand_layout_constraints")
                        : NULL;
  if (!raw) return KILN_STATUS_OK;
  kiln_hlo_module_t *scratch = kiln_hlo_module_create("operand_layout_constraints");
  if (!scratch) return KILN_ERR_INVALID("operand_layout_constraints: out of memory");
  kiln_shape_t **want = NULL;
  int n = 0;
  kiln_status st = kiln_hlo_parse_shape_list(scratch, raw, strlen(raw), &want, &n);
  if (!st && n != in->num_operands)
    st = KILN_ERR_INVALID("operand_layout_constraints names %d shapes for %d operands", n,
                          in->num_operands);
  for (int i = 0; !st && i < n; i++) {
    const kiln_shape_t *o = in->operands[i]->shape;
    if (!kiln_shape_is_array(want[i]) || !kiln_shape_compatible(want[i], o))
      st = KILN_ERR_INVALID("operand_layout_constraints shape %d is %s, but operand %d is %s", i,
                            kiln__shape_str(a, want[i]), i, kiln__shape_str(a, o));
    else if (want[i]->rank > 0 && !want[i]->has_layout)
      st = KILN_ERR_INVALID("operand_layout_constraints shape %d (%s) has no layout", i,
                            kiln__shape_str(a, want[i]));
  }
  kiln_hlo_module_destroy(scratch);
  return st ? in_instruction(c, in, st) : KILN_STATUS_OK;
}

static kiln_status check_entry_layout(kiln_arena_t *a, const kiln_hlo_module_t *m) {
  const kiln_hlo_computation_t *e = m->entry;
  if (!m->has_entry_layout) return KILN_STATUS_OK;
  if (m->num_entry_layout_params != e->num_parameters)
    return KILN_ERR_INVALID("entry_computation_layout has %d parameters but entry computation '%s' has %d",
                            m->num_entry_layout_params, e->name, e->num_parameters);
  for (int i = 0; i < e->num_parameters; i++) {
    const kiln_shape_t *want = m->entry_layout_params[i], *have = e->parameters[i]->shape;
    if (!want) return KILN_ERR_INVALID("entry_computation_layout parameter %d is missing", i);
    kiln_status st = check_layout(a, want);
    if (st) return kiln_status_annotate(st, "in entry_computation_layout");
    if (!kiln_shape_compatible(want, have)) {
      char *w = kiln_shape_to_string(want, true), *h = kiln_shape_to_string(have, true);
      st = KILN_ERR_INVALID("entry_computation_layout parameter %d is %s but parameter '%s' of '%s' is %s",
                            i, w, e->parameters[i]->name, e->name, h);
      kiln_free(w);
      kiln_free(h);
      return st;
    }
  }
  if (m->entry_layout_result) {
    kiln_status st = check_layout(a, m->entry_layout_result);
    if (st) return kiln_status_annotate(st, "in entry_computation_layout");
    if (!kiln_shape_compatible(m->entry_layout_result, e->root->shape)) {
      char *w = kiln_shape_to_string(m->entry_layout_result, true);
      char *h = kiln_shape_to_string(e->root->shape, true);
      st = KILN_ERR_INVALID("entry_computation_layout result is %s but the root '%s' of '%s' is %s",
                            w, e->root->name, e->name, h);
      kiln_free(w);
      kiln_free(h);
      return st;
    }
  }
  return KILN_STATUS_OK;
}

static kiln_status verify_module(kiln_arena_t *a, const kiln_hlo_module_t *m,
                                 kiln_ptrmap_t *members, kiln_ptrmap_t *state) {
  if (!m->entry) return KILN_ERR_INVALID("module '%s' has no entry computation", m->name);
  kiln_hashmap_t names;
  kiln_hashmap_init(&names);
  kiln_status st = KILN_STATUS_OK;
  for (size_t i = 0; i < m->computations.len && !st; i++) {
    const kiln_hlo_computation_t *c = m->computations.data[i];
    kiln_ptrmap_put(members, c, (void *)c);
    if (kiln_hashmap_put(&names, c->name, strlen(c->name), (void *)c))
      st = KILN_ERR_INVALID("computation name '%s' is used more than once", c->name);
  }
  kiln_hashmap_free(&names);
  KILN_RETURN_IF_ERROR_PLAIN(st);
  if (!kiln_ptrmap_contains(members, m->entry))
    return KILN_ERR_INVALID("entry computation '%s' is not among the module's computations",
                            m->entry->name);
  for (size_t i = 0; i < m->computations.len; i++)
    KILN_RETURN_IF_ERROR_PLAIN(check_computation_structure(m->computations.data[i]));
  for (size_t i = 0; i < m->computations.len; i++) {
    const kiln_hlo_computation_t *c = m->computations.data[i];
    if (!kiln_ptrmap_get(state, c)) KILN_RETURN_IF_ERROR_PLAIN(check_calls_from(c, members, state));
  }
  for (size_t i = 0; i < m->computations.len; i++) {
    const kiln_hlo_computation_t *c = m->computations.data[i];
    for (size_t k = 0; k < c->instructions.len; k++) {
      KILN_RETURN_IF_ERROR_PLAIN(check_instruction_shape(a, c, c->instructions.data[k]));
      KILN_RETURN_IF_ERROR_PLAIN(check_layout_constraints(a, c, c->instructions.data[k]));
    }
  }
  st = check_entry_layout(a, m);
  if (st) {
    kiln_status wrapped = kiln_status_make(kiln_status_code(st), "in module '%s': %s", m->name,
                                           kiln_status_message(st));
    kiln_status_free(st);
    return wrapped;
  }
  return KILN_STATUS_OK;
}

static kiln_status verify(const kiln_hlo_module_t *m) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_ptrmap_t members, state;
  kiln_ptrmap_init(&members);
  kiln_ptrmap_init(&state);
  kiln_status st = verify_module(&arena, m, &members, &state);
  kiln_ptrmap_free(&members);
  kiln_ptrmap_free(&state);
  kiln_arena_destroy(&arena);
  return st;
}

/* Every allocation of the check may fail (base/alloc.h, out-of-memory scopes); the module is
 * only read. */
kiln_status kiln_hlo_module_verify(const kiln_hlo_module_t *m) {
  if (!m) return KILN_ERR_INVALID("no module to verify");
  KILN_OOM_SCOPED_RETURN(verify(m), (void)0, "verifying an HLO module");
}
