/* Horizontal loop fusion, after XLA:GPU's HorizontalLoopFusion. Runs after priority and
 * multi-output fusion on every sequential computation.
 *
 * Small independent loop fusions that feed one consumer (the typical case: the parameter
 * updates of an optimizer step, all read by the root tuple) each cost a kernel launch for
 * little work. They merge into one fusion: every member's output is flattened to one
 * dimension (a bitcast: layouts are normalized by now), the pieces are concatenated and
 * the fusion's roots are unit-stride slices of that concatenation, one per member, which
 * codegen's input-slices emitter runs as one launch over the concatenation. Outside, each
 * member's users read a bitcast of its slice back to the member's shape.
 *
 * A member is a kLoop fusion with an array output of at most HF_MAX_ELEMENTS elements whose
 * body holds only elementwise work (no reduction, transpose, dot, scatter or other hero
 * that would choose another emitter). Members of one group share an element type (the
 * concatenation needs it), none reaches another, and the group stays within the fusion
 * size limits. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"

/* Bigger fusions are worth their own launch (XLA leaves the large updates alone too). */
#define HF_MAX_ELEMENTS (128 * 1024)
/* Members per merged fusion; each is a slice root the kernel checks per element. */
#define HF_MAX_MEMBERS 32
/* Reachability searches between candidates give up (no merge) past this many steps. */
#define HF_MAX_SEARCH 512

typedef KILN_VEC(kiln_hlo_instruction_t *) instr_vec_t;

/* Whether every instruction of fused body `c` computes elementwise (or only moves data
 * without a hero of its own), so the input-slices emitter can compute it per element. */
static bool body_is_elementwise(const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    switch (in->opcode) {
      case KILN_OP_PARAMETER:
      case KILN_OP_CONSTANT:
      case KILN_OP_BROADCAST:
      case KILN_OP_IOTA:
      case KILN_OP_BITCAST:
      case KILN_OP_SLICE:
        break;
      case KILN_OP_RESHAPE:
      case KILN_OP_TRANSPOSE:
        if (!kiln_fusion_is_bitcast_like(in)) return false;
        break;
      default:
        if (!kiln_hlo_opcode_is_elementwise(in->opcode)) return false;
        if (kiln_elem_type_is_complex(in->shape->type)) return false;
        break;
    }
  }
  return true;
}

static bool default_layout(const kiln_shape_t *s) {
  return !s->has_layout || kiln_layout_is_default(&s->layout);
}

/* A fusion that may join a horizontal fusion. */
static bool candidate(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_FUSION || in->fusion_kind != KILN_HLO_FUSION_LOOP) return false;
  if (in->num_control_predecessors || in->control_successors.len || !in->users.len) return false;
  const kiln_shape_t *s = in->shape;
  if (!kiln_shape_is_array(s) || kiln_shape_is_dynamic(s) || !default_layout(s)) return false;
  if (kiln_elem_type_is_complex(s->type) || s->type == KILN_PRED) return false;
  int64_t n = kiln_shape_num_elements(s);
  if (n < 1 || n > HF_MAX_ELEMENTS) return false;
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(in, "calls");
  return body && body->root && kiln_shape_is_array(body->root->shape) && body_is_elementwise(body);
}

typedef struct hf_state {
  kiln_hlo_computation_t *c;
  kiln_ptrmap_t *retired;
  kiln_fusion_order_t order;
  kiln_ptrmap_t taken; /* candidates already grouped (or merged away) */
} hf_state_t;

/* Distinct operands of the group plus `extra`. */
static int group_operand_count(const instr_vec_t *g, const kiln_hlo_instruction_t *extra) {
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  int n = 0;
  for (size_t i = 0; i <= g->len; i++) {
    const kiln_hlo_instruction_t *m = i < g->len ? g->data[i] : extra;
    for (int k = 0; k < m->num_operands; k++) {
      if (kiln_ptrmap_contains(&seen, m->operands[k])) continue;
      kiln_ptrmap_put(&seen, m->operands[k], (void *)1);
      n++;
    }
  }
  kiln_ptrmap_free(&seen);
  return n;
}

/* Whether `f` may join group `g` (same element type, independent, within the limits). */
static bool joins(hf_state_t *s, const instr_vec_t *g, kiln_hlo_instruction_t *f, int *size) {
  if (g->len && g->data[0]->shape->type != f->shape->type) return false;
  int body = kiln_fusion_body_size(f);
  /* The rewrite adds a bitcast, a slice per member and one concatenate. */
  if (*size + body + 2 > KILN_FUSION_MAX_INSTRUCTIONS - 1) return false;
  if (group_operand_count(g, f) > KILN_FUSION_MAX_OPERANDS) return false;
  for (size_t i = 0; i < g->len; i++)
    if (kiln_fusion_reaches(&s->order, g->data[i], f, NULL) ||
        kiln_fusion_reaches(&s->order, f, g->data[i], NULL))
      return false;
  *size += body + 2;
  return true;
}

static kiln_hlo_instruction_t *make(kiln_hlo_computation_t *c, kiln_hlo_opcode_t op,
                                    kiln_shape_t *shape, const char *hint, int n,
                                    kiln_hlo_instruction_t *const *ops) {
  kiln_hlo_instruction_t *in =
      kiln_hlo_instruction_create(c, op, shape, kiln_hlo_module_unique_name(c->module, hint));
  if (in) kiln_hlo_instruction_set_operands(in, n, ops);
  return in;
}

/* Rewrites the tuple root of the multi-output fusion `f` (one output per member, in
 * order) into slices of a concatenation of the flattened outputs, and gives the users of
 * each get-tuple-element a bitcast back to the member's shape. */
static kiln_status concatenate_roots(kiln_hlo_instruction_t *f) {
  kiln_hlo_computation_t *fc = (kiln_hlo_computation_t *)kiln_hlo_instruction_called(f, "calls");
  kiln_hlo_module_t *m = f->parent->module;
  kiln_arena_t *a = &m->arena;
  kiln_hlo_instruction_t *root = fc->root;
  int n = root->num_operands;
  kiln_hlo_instruction_t **flat = kiln_calloc((size_t)n, sizeof *flat);
  kiln_shape_t **slice_shapes = kiln_arena_alloc(a, sizeof(kiln_shape_t *) * (size_t)n);
  kiln_status st = NULL;
  int64_t total = 0;
  kiln_elem_type_t t = root->operands[0]->shape->type;
  for (int i = 0; i < n && slice_shapes; i++) {
    kiln_hlo_instruction_t *v = root->operands[i];
    int64_t e = kiln_shape_num_elements(v->shape);
    slice_shapes[i] = kiln_shape_make_array_with_default_layout(a, t, 1, &e);
    flat[i] = slice_shapes[i] ? make(fc, KILN_OP_BITCAST, slice_shapes[i], "bitcast", 1, &v) : NULL;
    if (!flat[i]) slice_shapes = NULL;
    total += e;
  }
  kiln_shape_t *cat_shape =
      slice_shapes ? kiln_shape_make_array_with_default_layout(a, t, 1, &total) : NULL;
  kiln_hlo_instruction_t *cat =
      cat_shape ? make(fc, KILN_OP_CONCATENATE, cat_shape, "concatenate", n, flat) : NULL;
  int64_t *cat_dim = kiln_arena_alloc(a, sizeof(int64_t));
  kiln_hlo_instruction_t **slices = kiln_calloc((size_t)n, sizeof *slices);
  if (!cat || !cat_dim) {
    st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory building a horizontal fusion");
  } else {
    *cat_dim = 0;
    cat->dimensions = (kiln_i64_list_t){1, cat_dim};
    cat->has_dimensions = true; /* printed, so the optimized module's text parses again */
  }
  int64_t offset = 0;
  for (int i = 0; i < n && !st; i++) {
    kiln_slice_dim_t *sd = kiln_arena_alloc(a, sizeof *sd);
    slices[i] = sd ? make(fc, KILN_OP_SLICE, slice_shapes[i], "slice", 1, &cat) : NULL;
    if (!slices[i]) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory building a horizontal fusion");
      break;
    }
    int64_t e = slice_shapes[i]->dims[0];
    *sd = (kiln_slice_dim_t){offset, offset + e, 1};
    slices[i]->num_slice_dims = 1;
    slices[i]->slice = sd;
    offset += e;
  }
  kiln_shape_t *tuple_shape = st ? NULL : kiln_shape_make_tuple(a, n, slice_shapes);
  kiln_hlo_instruction_t *new_root =
      tuple_shape ? make(fc, KILN_OP_TUPLE, tuple_shape, "tuple", n, slices) : NULL;
  if (!st && !new_root)
    st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory building a horizontal fusion");
  if (!st) {
    fc->root = new_root;
    st = kiln_hlo_instruction_remove(root);
  }
  if (!st) {
    kiln_hlo_computation_sort_post_order(fc);
    f->shape = tuple_shape;
    f->fusion_kind = kiln_fusion_kind_for(fc);
    /* Outside: get-tuple-element i now yields the flat slice; its users read a bitcast. */
    instr_vec_t gtes = {0};
    for (size_t u = 0; u < f->users.len; u++) kiln_vec_push(&gtes, f->users.data[u]);
    for (size_t u = 0; u < gtes.len && !st; u++) {
      kiln_hlo_instruction_t *g = gtes.data[u];
      if (g->opcode != KILN_OP_GET_TUPLE_ELEMENT || g->tuple_index < 0 || g->tuple_index >= n) {
        st = kiln_status_make(KILN_INTERNAL, "horizontal fusion: unexpected user '%s' of '%s'",
                              g->name, f->name);
        break;
      }
      kiln_shape_t *orig = g->shape;
      g->shape = slice_shapes[g->tuple_index];
      kiln_hlo_instruction_t *b = make(f->parent, KILN_OP_BITCAST, orig, "bitcast", 0, NULL);
      if (!b) {
        st =
            kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory building a horizontal fusion");
        break;
      }
      kiln_hlo_instruction_replace_all_uses(g, b);
      kiln_hlo_instruction_set_operands(b, 1, &g);
    }
    kiln_vec_free(&gtes);
  }
  kiln_free(flat);
  kiln_free(slices);
  return st;
}

/* Merges group `g` into one fusion. */
static kiln_status merge_group(hf_state_t *s, const instr_vec_t *g) {
  kiln_hlo_instruction_t *f = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fusion_create(s->c, (int)g->len, g->data, NULL, s->retired, &f));
  if (!kiln_shape_is_tuple(f->shape) || f->shape->num_elements != (int)g->len)
    return kiln_status_make(KILN_INTERNAL, "horizontal fusion of %zu members made %d outputs",
                            g->len, kiln_shape_is_tuple(f->shape) ? f->shape->num_elements : 1);
  /* Positions for the new fusion and its get-tuple-elements (their users have theirs),
   * then for the bitcasts between those and the users; a rebuild when one does not fit. */
  bool placed = kiln_fusion_order_place(&s->order, f);
  KILN_RETURN_IF_ERROR_PLAIN(concatenate_roots(f));
  for (size_t u = 0; u < f->users.len && placed; u++) {
    const kiln_hlo_instruction_t *gte = f->users.data[u];
    for (size_t k = 0; k < gte->users.len && placed; k++)
      placed = kiln_fusion_order_place(&s->order, gte->users.data[k]);
  }
  if (!placed) {
    kiln_fusion_order_free(&s->order);
    kiln_fusion_order_build(&s->order, s->c);
    s->order.max_visits = HF_MAX_SEARCH;
  }
  return NULL;
}

/* Groups the candidate operands of consumer `u` and merges each group of two or more. */
static kiln_status fuse_operands_of(hf_state_t *s, kiln_hlo_instruction_t *u, bool *changed) {
  instr_vec_t group = {0};
  kiln_status st = NULL;
  for (;;) {
    kiln_vec_clear(&group);
    int size = 0;
    for (int k = 0; k < u->num_operands && group.len < HF_MAX_MEMBERS; k++) {
      kiln_hlo_instruction_t *f = u->operands[k];
      if (kiln_ptrmap_contains(&s->taken, f) || !candidate(f)) continue;
      bool dup = false;
      for (size_t i = 0; i < group.len && !dup; i++) dup = group.data[i] == f;
      if (dup || !joins(s, &group, f, &size)) continue;
      kiln_vec_push(&group, f);
    }
    if (group.len < 2) break;
    for (size_t i = 0; i < group.len; i++) kiln_ptrmap_put(&s->taken, group.data[i], (void *)1);
    st = merge_group(s, &group);
    if (st) break;
    *changed = true;
  }
  kiln_vec_free(&group);
  return st;
}

static kiln_status fuse_computation(hf_state_t *s, bool *changed) {
  kiln_fusion_order_build(&s->order, s->c);
  s->order.max_visits = HF_MAX_SEARCH;
  kiln_ptrmap_init(&s->taken);
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(s->c, &n);
  kiln_status st = NULL;
  bool any = false;
  for (size_t i = 0; i < n && !st; i++) {
    if (kiln_ptrmap_contains(&s->taken, order[i])) continue; /* merged away */
    st = fuse_operands_of(s, order[i], &any);
  }
  kiln_free(order);
  kiln_ptrmap_free(&s->taken);
  kiln_fusion_order_free(&s->order);
  if (any) {
    kiln_hlo_computation_sort_post_order(s->c);
    *changed = true;
  }
  return st;
}

static kiln_status fuse_one(kiln_hlo_computation_t *c, kiln_fusion_scope_t *scope, bool *changed) {
  hf_state_t s = {.c = c, .retired = &scope->retired};
  return fuse_computation(&s, changed);
}

kiln_status kiln_pass_horizontal_fusion(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                        bool *changed) {
  (void)opts;
  return kiln_fusion_run_on_computations(m, "horizontal fusion", fuse_one, changed);
}
