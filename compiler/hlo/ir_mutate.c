/* IR mutation and traversal helpers shared by the passes. */
#include <stdio.h>
#include <string.h>

#include "base/hashmap.h"
#include "compiler/hlo/ir.h"

static void note_name(kiln_hlo_module_t *m, const char *name) {
  if (m->names) kiln_hashmap_put(m->names, name, strlen(name), (void *)1);
}

static void build_name_set(kiln_hlo_module_t *m) {
  if (m->names) return;
  m->names = kiln_arena_alloc(&m->arena, sizeof *m->names);
  kiln_hashmap_init(m->names);
  for (size_t c = 0; c < m->computations.len; c++) {
    kiln_hlo_computation_t *comp = m->computations.data[c];
    note_name(m, comp->name);
    for (size_t i = 0; i < comp->instructions.len; i++)
      if (comp->instructions.data[i]) note_name(m, comp->instructions.data[i]->name);
  }
}

char *kiln_hlo_module_unique_name(kiln_hlo_module_t *m, const char *prefix) {
  build_name_set(m);
  /* Strip a numeric suffix so clones of `add.3` become `add.N`, not `add.3.N`. */
  size_t len = strlen(prefix);
  size_t cut = len;
  while (cut > 0 && prefix[cut - 1] >= '0' && prefix[cut - 1] <= '9') cut--;
  if (cut > 0 && cut < len && prefix[cut - 1] == '.') len = cut - 1;
  char buf[256];
  snprintf(buf, sizeof buf, "%.*s", (int)(len < 200 ? len : 200), prefix);
  if (!kiln_hashmap_contains(m->names, buf, strlen(buf))) {
    char *name = kiln_arena_strdup(&m->arena, buf);
    note_name(m, name);
    return name;
  }
  for (int64_t k = m->next_id;; k++) {
    char cand[300];
    snprintf(cand, sizeof cand, "%s.%lld", buf, (long long)k);
    if (!kiln_hashmap_contains(m->names, cand, strlen(cand))) {
      char *name = kiln_arena_strdup(&m->arena, cand);
      note_name(m, name);
      return name;
    }
  }
}

/* The index of `instr` in c->instructions (its slot hint when that is current), or len. */
static size_t index_of(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *instr) {
  size_t n = c->instructions.len;
  if (instr->slot >= 0 && (size_t)instr->slot < n && c->instructions.data[instr->slot] == instr)
    return (size_t)instr->slot;
  for (size_t i = 0; i < n; i++)
    if (c->instructions.data[i] == instr) return i;
  return n;
}

/* Takes `instr` out of c's list: a hole when removals are deferred, else the rest shifts
 * down. */
static void take_out(kiln_hlo_computation_t *c, kiln_hlo_instruction_t *instr) {
  size_t i = index_of(c, instr), n = c->instructions.len;
  if (i == n) return;
  if (c->defer_removals) {
    c->instructions.data[i] = NULL;
    c->num_holes++;
    return;
  }
  /* The shifted instructions' hints go stale (renumbering them would touch each one's
   * memory); removing one of them later searches, as it did before hints. */
  memmove(&c->instructions.data[i], &c->instructions.data[i + 1],
          (n - i - 1) * sizeof(c->instructions.data[0]));
  c->instructions.len--;
}

void kiln_hlo_computation_defer_removals(kiln_hlo_computation_t *c) {
  c->defer_removals = true;
}

void kiln_hlo_computation_compact(kiln_hlo_computation_t *c) {
  c->defer_removals = false;
  if (!c->num_holes) return;
  size_t w = 0;
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (!in) continue;
    in->slot = (int32_t)w;
    c->instructions.data[w++] = in;
  }
  c->instructions.len = w;
  c->num_holes = 0;
}

void kiln_hlo_instruction_move_to_end(kiln_hlo_instruction_t *instr) {
  kiln_hlo_computation_t *c = instr->parent;
  size_t i = index_of(c, instr), n = c->instructions.len;
  if (i == n || i + 1 == n) return;
  if (c->defer_removals) {
    c->instructions.data[i] = NULL;
    c->num_holes++;
    instr->slot = (int32_t)n;
    kiln_vec_push(&c->instructions, instr);
    return;
  }
  memmove(&c->instructions.data[i], &c->instructions.data[i + 1],
          (n - i - 1) * sizeof(c->instructions.data[0]));
  c->instructions.data[n - 1] = instr;
  instr->slot = (int32_t)(n - 1);
}

kiln_status kiln_hlo_elided_constant_error(const kiln_hlo_instruction_t *c) {
  char *shape = c && c->shape ? kiln_shape_to_string(c->shape, false) : NULL;
  kiln_status s = kiln_status_make(
      KILN_FAILED_PRECONDITION,
      "constant %s%s%s%s%s has elided contents (`constant({...})` in the text): the module was "
      "printed without its large constants and cannot run; print it with them (XLA: "
      "--xla_dump_large_constants, HloPrintOptions' print_large_constants)",
      c && c->name ? c->name : "(unnamed)", shape ? " " : "", shape ? shape : "",
      c && c->parent && c->parent->name ? " in computation " : "",
      c && c->parent && c->parent->name ? c->parent->name : "");
  kiln_free(shape);
  return s;
}

kiln_status kiln_hlo_instruction_remove(kiln_hlo_instruction_t *instr) {
  kiln_hlo_computation_t *c = instr->parent;
  if (instr->users.len)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "cannot remove instruction '%s': it still has %zu user(s)", instr->name,
                            instr->users.len);
  if (c->root == instr)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "cannot remove instruction '%s': it is the root of '%s'", instr->name,
                            c->name);
  kiln_hlo_instruction_set_operands(instr, 0, NULL);
  for (int i = 0; i < instr->num_control_predecessors; i++) {
    kiln_hlo_instruction_t *p = instr->control_predecessors[i];
    for (size_t k = 0; k < p->control_successors.len; k++) {
      if (p->control_successors.data[k] == instr) {
        p->control_successors.data[k] = kiln_vec_last(&p->control_successors);
        p->control_successors.len--;
        break;
      }
    }
  }
  instr->num_control_predecessors = 0;
  take_out(c, instr);
  kiln_vec_free(&instr->users);
  kiln_vec_free(&instr->control_successors);
  return NULL;
}

kiln_hlo_instruction_t *kiln_hlo_instruction_clone(kiln_hlo_computation_t *dest,
                                                   const kiln_hlo_instruction_t *src,
                                                   const char *name, int num_operands,
                                                   kiln_hlo_instruction_t *const *operands) {
  kiln_hlo_module_t *m = dest->module;
  const char *n = name ? name : kiln_hlo_module_unique_name(m, src->name);
  kiln_hlo_instruction_t *instr = kiln_hlo_instruction_create(dest, src->opcode, src->shape, n);
  if (!instr) return NULL;
  note_name(m, instr->name);
  /* Copy every attribute field; arrays live in the same module arena and are never
   * mutated in place, so sharing them is safe. */
  kiln_hlo_instruction_t saved = *instr;
  *instr = *src;
  instr->name = saved.name;
  instr->slot = saved.slot;
  instr->parent = dest;
  instr->id = saved.id;
  instr->users = saved.users;
  instr->control_successors = saved.control_successors;
  instr->num_control_predecessors = 0;
  instr->control_predecessors = NULL;
  instr->operands = NULL;
  instr->num_operands = 0;
  kiln_hlo_instruction_set_operands(instr, num_operands, operands);
  return instr;
}

kiln_hlo_computation_t *kiln_hlo_computation_clone(const kiln_hlo_computation_t *src,
                                                   const char *name_hint) {
  kiln_hlo_module_t *m = src->module;
  kiln_hlo_computation_t *c =
      kiln_hlo_computation_create(m, kiln_hlo_module_unique_name(m, name_hint ? name_hint : src->name));
  if (!c) return NULL;
  kiln_ptrmap_t map;
  kiln_ptrmap_init(&map);
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(src, &n);
  KILN_VEC(kiln_hlo_instruction_t *) ops = {0};
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *s = order[i];
    kiln_vec_clear(&ops);
    for (int k = 0; k < s->num_operands; k++) kiln_vec_push(&ops, kiln_ptrmap_get(&map, s->operands[k]));
    kiln_hlo_instruction_t *d =
        kiln_hlo_instruction_clone(c, s, kiln_hlo_module_unique_name(m, s->name), s->num_operands, ops.data);
    kiln_ptrmap_put(&map, s, d);
  }
  /* Control edges inside the computation. */
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *s = order[i];
    if (!s->num_control_predecessors) continue;
    kiln_hlo_instruction_t *d = kiln_ptrmap_get(&map, s);
    d->control_predecessors =
        kiln_arena_alloc(&m->arena, sizeof(kiln_hlo_instruction_t *) * (size_t)s->num_control_predecessors);
    d->num_control_predecessors = s->num_control_predecessors;
    for (int k = 0; k < s->num_control_predecessors; k++) {
      kiln_hlo_instruction_t *p = kiln_ptrmap_get(&map, s->control_predecessors[k]);
      d->control_predecessors[k] = p;
      kiln_vec_push(&p->control_successors, d);
    }
  }
  c->num_parameters = src->num_parameters;
  if (src->num_parameters) {
    c->parameters = kiln_arena_alloc(&m->arena, sizeof(kiln_hlo_instruction_t *) * (size_t)src->num_parameters);
    for (int i = 0; i < src->num_parameters; i++) c->parameters[i] = kiln_ptrmap_get(&map, src->parameters[i]);
  }
  c->root = kiln_ptrmap_get(&map, src->root);
  c->trailing_attrs = src->trailing_attrs;
  kiln_vec_free(&ops);
  kiln_free(order);
  kiln_ptrmap_free(&map);
  return c;
}

static void release_computation(kiln_hlo_computation_t *c) {
  for (size_t k = 0; k < c->instructions.len; k++) {
    if (!c->instructions.data[k]) continue;
    kiln_vec_free(&c->instructions.data[k]->users);
    kiln_vec_free(&c->instructions.data[k]->control_successors);
  }
  kiln_vec_free(&c->instructions);
}

void kiln_hlo_module_remove_computation(kiln_hlo_module_t *m, kiln_hlo_computation_t *c) {
  if (c == m->entry) return;
  for (size_t i = 0; i < m->computations.len; i++) {
    if (m->computations.data[i] != c) continue;
    memmove(&m->computations.data[i], &m->computations.data[i + 1],
            (m->computations.len - i - 1) * sizeof(m->computations.data[0]));
    m->computations.len--;
    release_computation(c);
    return;
  }
}

size_t kiln_hlo_module_remove_computations(kiln_hlo_module_t *m, const kiln_ptrmap_t *gone) {
  size_t w = 0, n = m->computations.len;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_computation_t *c = m->computations.data[i];
    if (c != m->entry && kiln_ptrmap_contains(gone, c))
      release_computation(c);
    else
      m->computations.data[w++] = c;
  }
  m->computations.len = w;
  return n - w;
}

/* Iterative DFS so deep chains cannot overflow the stack. */
kiln_hlo_instruction_t **kiln_hlo_computation_post_order(const kiln_hlo_computation_t *c,
                                                         size_t *out_n) {
  size_t n = c->instructions.len;
  kiln_hlo_instruction_t **out = kiln_malloc(sizeof(*out) * (n ? n : 1));
  size_t count = 0;
  kiln_ptrmap_t state; /* 1 = on stack, 2 = done */
  kiln_ptrmap_init(&state);
  typedef struct frame {
    kiln_hlo_instruction_t *instr;
    int next; /* next operand / control predecessor to visit */
  } frame_t;
  KILN_VEC(frame_t) stack = {0};
  for (size_t r = 0; r < n; r++) {
    kiln_hlo_instruction_t *start = c->instructions.data[r];
    if (!start || kiln_ptrmap_contains(&state, start)) continue;
    kiln_ptrmap_put(&state, start, (void *)1);
    kiln_vec_push(&stack, ((frame_t){start, 0}));
    while (stack.len) {
      frame_t *f = &stack.data[stack.len - 1];
      kiln_hlo_instruction_t *i = f->instr;
      int total = i->num_operands + i->num_control_predecessors;
      if (f->next < total) {
        int k = f->next++;
        kiln_hlo_instruction_t *dep =
            k < i->num_operands ? i->operands[k] : i->control_predecessors[k - i->num_operands];
        if (dep->parent != c || kiln_ptrmap_contains(&state, dep)) continue;
        kiln_ptrmap_put(&state, dep, (void *)1);
        kiln_vec_push(&stack, ((frame_t){dep, 0}));
      } else {
        kiln_ptrmap_put(&state, i, (void *)2);
        out[count++] = i;
        stack.len--;
      }
    }
  }
  kiln_vec_free(&stack);
  kiln_ptrmap_free(&state);
  *out_n = count;
  return out;
}

void kiln_hlo_computation_sort_post_order(kiln_hlo_computation_t *c) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  memcpy(c->instructions.data, order, n * sizeof(*order));
  c->instructions.len = n;
  c->num_holes = 0;
  for (size_t i = 0; i < n; i++) order[i]->slot = (int32_t)i;
  kiln_free(order);
}

kiln_hlo_computation_t **kiln_hlo_module_computation_post_order(const kiln_hlo_module_t *m,
                                                                size_t *out_n) {
  size_t n = m->computations.len;
  kiln_hlo_computation_t **out = kiln_malloc(sizeof(*out) * (n ? n : 1));
  size_t count = 0;
  kiln_ptrmap_t state;
  kiln_ptrmap_init(&state);
  typedef struct cframe {
    kiln_hlo_computation_t *comp;
    size_t instr;
    int group, k;
  } cframe_t;
  KILN_VEC(cframe_t) stack = {0};
  /* Visit the entry last so it ends the order even when others are unreachable. */
  for (size_t r = 0; r <= n; r++) {
    kiln_hlo_computation_t *start = r < n ? m->computations.data[r] : m->entry;
    if (!start || (r < n && start == m->entry)) continue;
    if (kiln_ptrmap_contains(&state, start)) continue;
    kiln_ptrmap_put(&state, start, (void *)1);
    kiln_vec_push(&stack, ((cframe_t){start, 0, 0, 0}));
    while (stack.len) {
      cframe_t *f = &stack.data[stack.len - 1];
      kiln_hlo_computation_t *next = NULL;
      while (!next && f->instr < f->comp->instructions.len) {
        kiln_hlo_instruction_t *i = f->comp->instructions.data[f->instr];
        if (!i || f->group >= i->num_called_groups) {
          f->instr++;
          f->group = f->k = 0;
          continue;
        }
        kiln_called_group_t *g = &i->called_groups[f->group];
        if (f->k >= g->n) {
          f->group++;
          f->k = 0;
          continue;
        }
        kiln_hlo_computation_t *callee = g->comps[f->k++];
        if (callee && !kiln_ptrmap_contains(&state, callee)) next = callee;
      }
      if (next) {
        kiln_ptrmap_put(&state, next, (void *)1);
        kiln_vec_push(&stack, ((cframe_t){next, 0, 0, 0}));
      } else {
        out[count++] = f->comp;
        stack.len--;
      }
    }
  }
  kiln_vec_free(&stack);
  kiln_ptrmap_free(&state);
  *out_n = count;
  return out;
}
