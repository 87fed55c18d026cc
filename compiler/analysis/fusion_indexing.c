/* Fusion-level composition of per-opcode indexing maps (see fusion_indexing.h). */
#include "compiler/analysis/fusion_indexing.h"

#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/analysis/hlo_indexing.h"
#include "compiler/analysis/hlo_indexing_internal.h"

typedef struct node {
  bool reached, unknown;
  KILN_VEC(kiln_indexing_map_t *) maps;
  KILN_VEC(int) outs;
  kiln_hashmap_t seen; /* printed map + output index -> (void*)1 */
} node_t;

typedef struct walk {
  kiln_affine_ctx_t *ctx;
  int max_maps;
  int depth; /* fusion nesting */
  kiln_hlo_instruction_t **po;
  size_t n;
  kiln_ptrmap_t pos; /* instr -> index in po, plus one */
  node_t *nodes;
  kiln_strbuf_t key;
} walk_t;

static kiln_status compute(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                           const kiln_indexing_fusion_options_t *opts, int depth,
                           kiln_indexing_fusion_t *out);

static node_t *node_of(walk_t *w, const kiln_hlo_instruction_t *instr) {
  uintptr_t p = (uintptr_t)kiln_ptrmap_get(&w->pos, instr);
  return p ? &w->nodes[p - 1] : NULL;
}

/* Takes ownership of `m`: adds it to the node unless an equal map is there already. */
static void node_add(walk_t *w, node_t *nd, kiln_indexing_map_t *m, int out) {
  nd->reached = true;
  if (nd->maps.len >= (size_t)w->max_maps) {
    nd->unknown = true;
    kiln_indexing_map_free(m);
    return;
  }
  w->key.len = 0;
  kiln_indexing_map_print(m, &w->key);
  kiln_strbuf_printf(&w->key, "#%d", out);
  if (kiln_hashmap_contains(&nd->seen, w->key.data, w->key.len)) {
    kiln_indexing_map_free(m);
    return;
  }
  kiln_hashmap_put(&nd->seen, w->key.data, w->key.len, (void *)1);
  kiln_vec_push(&nd->maps, m);
  kiln_vec_push(&nd->outs, out);
}

static void node_mark_unknown(node_t *nd) {
  if (nd) {
    nd->reached = true;
    nd->unknown = true;
  }
}

/* Composes `m` (root -> instr output) with operand map `om` and adds it to the operand. */
static void push_composed(walk_t *w, const kiln_indexing_map_t *m, const kiln_indexing_map_t *om,
                          node_t *dst) {
  kiln_indexing_map_t *c = NULL;
  kiln_status st = kiln_indexing_map_compose(m, om, &c);
  if (st) { /* arity mismatch: cannot happen for well-formed maps; treat as unknown */
    kiln_status_free(st);
    node_mark_unknown(dst);
    return;
  }
  kiln_hlo_ix_simplify(c);
  kiln_indexing_map_remove_unused_symbols(c);
  if (c->known_empty || kiln_indexing_map_check_empty(c)) {
    kiln_indexing_map_free(c);
    dst->reached = true;
    return;
  }
  node_add(w, dst, c, 0);
}

/* A nested fusion: its output k reads operand j through the maps of the callee's root k
 * to its parameter j. */
static kiln_status visit_fusion(walk_t *w, const kiln_hlo_instruction_t *x, node_t *nd) {
  const kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(x, "calls");
  if (!callee || w->depth >= 16) {
    for (int j = 0; j < x->num_operands; j++) node_mark_unknown(node_of(w, x->operands[j]));
    return KILN_STATUS_OK;
  }
  kiln_indexing_fusion_options_t o = {.max_maps_per_instruction = w->max_maps};
  kiln_indexing_fusion_t fi;
  KILN_RETURN_IF_ERROR(compute(w->ctx, callee, &o, w->depth + 1, &fi), "in fusion '%s'", x->name);
  for (size_t i = 0; i < nd->maps.len; i++) {
    int k = nd->outs.data[i];
    const kiln_indexing_fusion_root_t *r = k >= 0 && k < fi.num_roots ? &fi.roots[k] : NULL;
    for (int j = 0; j < x->num_operands; j++) {
      node_t *dst = node_of(w, x->operands[j]);
      if (!dst) continue;
      const kiln_hlo_instruction_t *param = j < callee->num_parameters ? callee->parameters[j] : NULL;
      const kiln_indexing_fusion_group_t *g = NULL;
      for (int e = 0; r && param && e < r->num_groups; e++)
        if (r->groups[e].instr == param) g = &r->groups[e];
      if (!r || !param) {
        node_mark_unknown(dst);
        continue;
      }
      if (!g) continue; /* the root does not read this parameter */
      if (g->unknown) node_mark_unknown(dst);
      for (int e = 0; e < g->num_maps; e++) push_composed(w, nd->maps.data[i], g->maps[e], dst);
    }
  }
  kiln_indexing_fusion_free(&fi);
  return KILN_STATUS_OK;
}

static kiln_status visit(walk_t *w, const kiln_hlo_instruction_t *x, node_t *nd) {
  if (nd->unknown)
    for (int j = 0; j < x->num_operands; j++) node_mark_unknown(node_of(w, x->operands[j]));
  if (x->opcode == KILN_OP_GET_TUPLE_ELEMENT) {
    node_t *dst = x->num_operands == 1 ? node_of(w, x->operands[0]) : NULL;
    if (!dst) return KILN_STATUS_OK;
    for (size_t i = 0; i < nd->maps.len; i++)
      node_add(w, dst, kiln_indexing_map_clone(nd->maps.data[i]), (int)x->tuple_index);
    return KILN_STATUS_OK;
  }
  if (x->num_operands == 0 || nd->maps.len == 0) return KILN_STATUS_OK;
  if (x->opcode == KILN_OP_FUSION) return visit_fusion(w, x, nd);
  if (x->opcode == KILN_OP_CALL) {
    /* Calls are not composed through. */
    for (int j = 0; j < x->num_operands; j++) node_mark_unknown(node_of(w, x->operands[j]));
    return KILN_STATUS_OK;
  }
  /* Maps grouped by output index, one per-opcode indexing per distinct index. */
  for (size_t i = 0; i < nd->maps.len; i++) {
    int k = nd->outs.data[i];
    bool done = false;
    for (size_t e = 0; e < i; e++) done |= nd->outs.data[e] == k;
    if (done) continue;
    kiln_hlo_indexing_t ix;
    KILN_RETURN_IF_ERROR(kiln_hlo_indexing_output_to_input(w->ctx, x, k, &ix), "in fusion '%s'",
                         x->parent && x->parent->name ? x->parent->name : "?");
    for (int j = 0; j < x->num_operands; j++) {
      node_t *dst = node_of(w, x->operands[j]);
      if (!dst) continue;
      const kiln_indexing_map_t *om = ix.operands[j].map;
      if (!om) {
        node_mark_unknown(dst);
        continue;
      }
      if (om->known_empty) continue;
      for (size_t e = i; e < nd->maps.len; e++)
        if (nd->outs.data[e] == k) push_composed(w, nd->maps.data[e], om, dst);
    }
    kiln_hlo_indexing_free(&ix);
  }
  return KILN_STATUS_OK;
}

static void nodes_reset(walk_t *w) {
  for (size_t i = 0; i < w->n; i++) {
    node_t *nd = &w->nodes[i];
    for (size_t k = 0; k < nd->maps.len; k++) kiln_indexing_map_free(nd->maps.data[k]);
    kiln_vec_free(&nd->maps);
    kiln_vec_free(&nd->outs);
    kiln_hashmap_free(&nd->seen);
    memset(nd, 0, sizeof *nd);
    kiln_hashmap_init(&nd->seen);
  }
}

/* Computes the groups of one root; moves the maps out of the nodes into `r`. */
static kiln_status one_root(walk_t *w, const kiln_hlo_instruction_t *root, int out,
                            kiln_indexing_fusion_root_t *r, kiln_indexing_fusion_t *fi) {
  r->root = root;
  r->output_index = out;
  const kiln_shape_t *s = kiln_hlo_indexing_output_shape(root, out);
  if (!s) return KILN_ERR_INVALID("fusion root '%s' output %d is not an array", root->name, out);
  nodes_reset(w);
  node_t *rn = node_of(w, root);
  if (!rn) return KILN_ERR_INVALID("fusion root '%s' is not in its computation", root->name);
  node_add(w, rn, kiln_indexing_map_identity(w->ctx, s->dims, (size_t)s->rank), out);
  for (size_t i = w->n; i-- > 0;) {
    node_t *nd = &w->nodes[i];
    if (nd->reached) KILN_RETURN_IF_ERROR_PLAIN(visit(w, w->po[i], nd));
  }
  size_t count = 0;
  for (size_t i = 0; i < w->n; i++) count += w->nodes[i].reached;
  r->groups = kiln_calloc(count ? count : 1, sizeof *r->groups);
  for (size_t i = w->n; i-- > 0;) {
    node_t *nd = &w->nodes[i];
    if (!nd->reached) continue;
    kiln_indexing_fusion_group_t *g = &r->groups[r->num_groups++];
    g->instr = w->po[i];
    g->unknown = nd->unknown;
    g->num_maps = (int)nd->maps.len;
    g->maps = nd->maps.data;
    g->output_index = nd->outs.data;
    nd->maps.data = NULL;
    nd->maps.len = nd->maps.cap = 0;
    nd->outs.data = NULL;
    nd->outs.len = nd->outs.cap = 0;
    fi->num_maps += g->num_maps;
    fi->num_unknown += g->unknown;
  }
  return KILN_STATUS_OK;
}

typedef KILN_VEC(kiln_indexing_fusion_root_t) root_vec_t;
typedef struct root_ref {
  const kiln_hlo_instruction_t *instr;
  int out;
} root_ref_t;
typedef KILN_VEC(root_ref_t) root_ref_vec_t;

static kiln_status collect_roots(const kiln_hlo_instruction_t *x, int depth, root_ref_vec_t *out) {
  if (depth > 64) return KILN_ERR_INVALID("fusion root tuples nest too deeply");
  if (x->opcode == KILN_OP_TUPLE) {
    for (int j = 0; j < x->num_operands; j++)
      KILN_RETURN_IF_ERROR_PLAIN(collect_roots(x->operands[j], depth + 1, out));
    return KILN_STATUS_OK;
  }
  if (x->shape && kiln_shape_is_tuple(x->shape)) {
    for (int k = 0; k < x->shape->num_elements; k++) {
      root_ref_t r = {x, k};
      kiln_vec_push(out, r);
    }
    return KILN_STATUS_OK;
  }
  root_ref_t r = {x, 0};
  kiln_vec_push(out, r);
  return KILN_STATUS_OK;
}

kiln_status kiln_indexing_fusion_compute(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                         const kiln_indexing_fusion_options_t *opts,
                                         kiln_indexing_fusion_t *out) {
  return compute(ctx, c, opts, 0, out);
}

static kiln_status compute(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                           const kiln_indexing_fusion_options_t *opts, int depth,
                           kiln_indexing_fusion_t *out) {
  memset(out, 0, sizeof *out);
  if (!ctx || !c || !c->root) return KILN_ERR_INVALID("fusion indexing: no computation or root");
  walk_t w = {0};
  w.ctx = ctx;
  w.depth = depth;
  w.max_maps = opts && opts->max_maps_per_instruction > 0 ? opts->max_maps_per_instruction : 64;
  w.po = kiln_hlo_computation_post_order(c, &w.n);
  kiln_ptrmap_init(&w.pos);
  for (size_t i = 0; i < w.n; i++) kiln_ptrmap_put(&w.pos, w.po[i], (void *)(uintptr_t)(i + 1));
  w.nodes = kiln_calloc(w.n ? w.n : 1, sizeof *w.nodes);
  for (size_t i = 0; i < w.n; i++) kiln_hashmap_init(&w.nodes[i].seen);
  root_ref_vec_t refs = {0};
  kiln_status st = collect_roots(c->root, 0, &refs);
  if (!st) {
    out->roots = kiln_calloc(refs.len ? refs.len : 1, sizeof *out->roots);
    for (size_t i = 0; i < refs.len && !st; i++) {
      st = one_root(&w, refs.data[i].instr, refs.data[i].out, &out->roots[i], out);
      out->num_roots = (int)i + 1;
    }
  }
  nodes_reset(&w);
  for (size_t i = 0; i < w.n; i++) kiln_hashmap_free(&w.nodes[i].seen);
  kiln_free(w.nodes);
  kiln_ptrmap_free(&w.pos);
  kiln_free(w.po);
  kiln_strbuf_free(&w.key);
  kiln_vec_free(&refs);
  if (st) kiln_indexing_fusion_free(out);
  return st;
}

void kiln_indexing_fusion_free(kiln_indexing_fusion_t *fi) {
  if (!fi) return;
  for (int r = 0; r < fi->num_roots; r++) {
    kiln_indexing_fusion_root_t *ri = &fi->roots[r];
    for (int g = 0; g < ri->num_groups; g++) {
      for (int k = 0; k < ri->groups[g].num_maps; k++) kiln_indexing_map_free(ri->groups[g].maps[k]);
      kiln_free(ri->groups[g].maps);
      kiln_free(ri->groups[g].output_index);
    }
    kiln_free(ri->groups);
  }
  kiln_free(fi->roots);
  memset(fi, 0, sizeof *fi);
}

const kiln_indexing_fusion_group_t *kiln_indexing_fusion_find(const kiln_indexing_fusion_root_t *r,
                                                              const char *name) {
  for (int g = 0; g < r->num_groups; g++)
    if (r->groups[g].instr->name && strcmp(r->groups[g].instr->name, name) == 0) return &r->groups[g];
  return NULL;
}

void kiln_indexing_fusion_print(kiln_strbuf_t *b, const kiln_indexing_fusion_t *fi) {
  for (int r = 0; r < fi->num_roots; r++) {
    const kiln_indexing_fusion_root_t *ri = &fi->roots[r];
    kiln_strbuf_printf(b, "root %s", ri->root->name);
    if (ri->root->shape && kiln_shape_is_tuple(ri->root->shape))
      kiln_strbuf_printf(b, " output %d", ri->output_index);
    kiln_strbuf_append(b, ":\n");
    for (int g = 0; g < ri->num_groups; g++) {
      const kiln_indexing_fusion_group_t *gr = &ri->groups[g];
      kiln_strbuf_printf(b, "  %s%s:\n", gr->instr->name, gr->unknown ? " (unknown)" : "");
      for (int k = 0; k < gr->num_maps; k++) {
        kiln_strbuf_append(b, "    ");
        if (gr->output_index[k] != 0 ||
            (gr->instr->shape && kiln_shape_is_tuple(gr->instr->shape)))
          kiln_strbuf_printf(b, "output %d: ", gr->output_index[k]);
        kiln_indexing_map_print(gr->maps[k], b);
        kiln_strbuf_append_char(b, '\n');
      }
    }
  }
}
