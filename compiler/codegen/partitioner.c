/* Computation partitioner (see partitioner.h for the rule). */
#include "compiler/codegen/partitioner.h"

#include <stdio.h>
#include <string.h>

#include "base/vec.h"
#include "compiler/analysis/hlo_indexing.h"

typedef KILN_VEC(const kiln_hlo_instruction_t *) instr_vec_t;
typedef KILN_VEC(kiln_partition_output_t) out_vec_t;

typedef struct sg_build {
  instr_vec_t roots;
  int rank;
  const int64_t *dims;
  bool is_output;
} sg_build_t;

typedef struct part_state {
  kiln_affine_ctx_t *ctx;
  kiln_partition_t *p;
  KILN_VEC(sg_build_t) sgs;
  kiln_ptrmap_t maps; /* instr -> kiln_indexing_map_t* (its function's root index -> its index) */
  KILN_VEC(kiln_indexing_map_t *) owned;
} part_state_t;

bool kiln_partition_is_tensor_leaf(const kiln_hlo_instruction_t *instr) {
  if (instr->opcode == KILN_OP_PARAMETER) return true;
  return instr->opcode == KILN_OP_CONSTANT && kiln_shape_is_array(instr->shape) &&
         instr->shape->rank > 0;
}

/* The array shape an instruction's function indexes: its own, or its first tuple element. */
static const kiln_shape_t *index_shape(const kiln_hlo_instruction_t *instr) {
  const kiln_shape_t *s = instr->shape;
  while (s && kiln_shape_is_tuple(s)) s = s->num_elements > 0 ? s->elements[0] : NULL;
  return s;
}

static void add_outputs(kiln_partition_t *p, const kiln_hlo_instruction_t *instr,
                        out_vec_t *outs) {
  if (instr->opcode == KILN_OP_TUPLE) {
    for (int i = 0; i < instr->num_operands; i++) add_outputs(p, instr->operands[i], outs);
    return;
  }
  if (kiln_shape_is_tuple(instr->shape)) {
    for (int i = 0; i < instr->shape->num_elements; i++) {
      kiln_partition_output_t o = {instr, i};
      kiln_vec_push(outs, o);
    }
    return;
  }
  kiln_partition_output_t o = {instr, 0};
  kiln_vec_push(outs, o);
}

static bool is_output(const kiln_partition_t *p, const kiln_hlo_instruction_t *instr) {
  for (int i = 0; i < p->num_outputs; i++)
    if (p->outputs[i].instr == instr) return true;
  return false;
}

static bool is_root_tuple(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *instr) {
  if (instr->opcode != KILN_OP_TUPLE) return false;
  if (instr == c->root) return true;
  for (size_t i = 0; i < instr->users.len; i++)
    if (!is_root_tuple(c, instr->users.data[i])) return false;
  return instr->users.len > 0;
}

static int sg_of(const kiln_partition_t *p, const kiln_hlo_instruction_t *instr) {
  uintptr_t v = (uintptr_t)kiln_ptrmap_get(&p->of, instr);
  return (int)v - 1;
}

static int new_subgraph(part_state_t *st, const kiln_hlo_instruction_t *root, bool output) {
  const kiln_shape_t *s = index_shape(root);
  sg_build_t sg = {0};
  sg.rank = s ? s->rank : 0;
  sg.dims = s ? s->dims : NULL;
  sg.is_output = output;
  kiln_vec_push(&sg.roots, root);
  kiln_vec_push(&st->sgs, sg);
  return (int)st->sgs.len - 1;
}

static bool same_dims(int r1, const int64_t *d1, int r2, const int64_t *d2) {
  if (r1 != r2) return false;
  for (int i = 0; i < r1; i++)
    if (d1[i] != d2[i]) return false;
  return true;
}

static kiln_status assign(part_state_t *st, const kiln_hlo_instruction_t *instr, int sg,
                          kiln_indexing_map_t *map) {
  kiln_ptrmap_put(&st->p->of, instr, (void *)(uintptr_t)(sg + 1));
  kiln_ptrmap_put(&st->maps, instr, map);
  kiln_vec_push(&st->owned, map);
  return NULL;
}

static kiln_indexing_map_t *identity_of(part_state_t *st, const kiln_hlo_instruction_t *instr) {
  const kiln_shape_t *s = index_shape(instr);
  return kiln_indexing_map_identity(st->ctx, s ? s->dims : NULL, s ? (size_t)s->rank : 0);
}

/* Decides whether `instr` can join the function of its users; returns that function's id
 * and the composed map in *out_map (owned by the caller), or -1. */
static kiln_status try_join(part_state_t *st, const kiln_hlo_instruction_t *instr, int *out_sg,
                            kiln_indexing_map_t **out_map) {
  *out_sg = -1;
  *out_map = NULL;
  int sg = -1, uses = 0;
  char *text = NULL;
  kiln_indexing_map_t *first = NULL;
  bool ok = true, has_rt = false;
  kiln_status s = NULL;
  for (size_t u = 0; u < instr->users.len && ok; u++) {
    const kiln_hlo_instruction_t *user = instr->users.data[u];
    int usg = sg_of(st->p, user);
    if (usg < 0) {
      ok = false; /* a user outside every function (e.g. a dead end): keep it separate */
      break;
    }
    if (sg >= 0 && usg != sg) {
      ok = false;
      break;
    }
    sg = usg;
    const kiln_indexing_map_t *umap = kiln_ptrmap_get(&st->maps, user);
    kiln_hlo_indexing_t ix = {0};
    bool gte = user->opcode == KILN_OP_GET_TUPLE_ELEMENT;
    if (!gte) {
      s = kiln_hlo_indexing_output_to_input(st->ctx, user, 0, &ix);
      if (s) break;
    }
    for (int k = 0; k < user->num_operands && ok; k++) {
      if (user->operands[k] != instr) continue;
      uses++;
      kiln_indexing_map_t *opmap = NULL;
      if (gte) {
        opmap = identity_of(st, user);
      } else if (k < ix.num_operands && ix.operands[k].map) {
        opmap = kiln_indexing_map_clone(ix.operands[k].map);
      } else {
        ok = false;
        break;
      }
      kiln_indexing_map_t *comp = NULL;
      s = kiln_indexing_map_compose(umap, opmap, &comp);
      kiln_indexing_map_free(opmap);
      if (s) {
        ok = false;
        break;
      }
      if (kiln_indexing_map_num_results(comp) > 0) { /* nothing to simplify in `-> ()` */
        kiln_indexing_map_simplify(comp);
        kiln_indexing_map_remove_unused_symbols(comp);
      }
      if (kiln_indexing_map_num_rts(comp) > 0) has_rt = true;
      char *t = kiln_indexing_map_to_string(comp);
      if (!first) {
        first = comp;
        text = t;
      } else {
        if (strcmp(t, text) != 0) ok = false;
        kiln_free(t);
        kiln_indexing_map_free(comp);
      }
    }
    kiln_hlo_indexing_free(&ix);
    if (s) break;
  }
  kiln_free(text);
  if (s || !ok || sg < 0 || (has_rt && uses > 1)) {
    kiln_indexing_map_free(first);
    return s;
  }
  *out_sg = sg;
  *out_map = first;
  return NULL;
}

static const char *func_name(kiln_partition_t *p, const kiln_hlo_computation_t *c,
                             const kiln_hlo_instruction_t *root) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s_%s", c->name ? c->name : "fusion", root->name);
  for (char *q = buf; *q; q++)
    if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')))
      *q = '_';
  /* Unique among the functions made so far. */
  char *name = kiln_arena_strdup(&p->arena, buf);
  for (int n = 1;; n++) {
    bool clash = false;
    for (int i = 0; i < p->num_subgraphs; i++)
      if (p->subgraphs[i].name && strcmp(p->subgraphs[i].name, name) == 0) clash = true;
    if (!clash) return name;
    name = kiln_arena_printf(&p->arena, "%s_%d", buf, n);
  }
}

/* Whether the functions of `p` call each other in a cycle (one function's instruction reads
 * another's, which reads back into the first): function A holding outputs o1 and o2, where o2
 * reads o1 through an instruction that heads function B, calls B, which calls A (kiln-fuzz
 * seed 500038: batch-norm-training's mean and its operand as two outputs; an endless
 * recursion in the kernel). */
static bool calls_cycle(const kiln_partition_t *p) {
  int n = p->num_subgraphs;
  if (n < 2) return false;
  bool *edge = kiln_calloc((size_t)n * (size_t)n, sizeof *edge);
  for (int g = 0; g < n; g++)
    for (int i = 0; i < p->subgraphs[g].num_instrs; i++) {
      const kiln_hlo_instruction_t *in = p->subgraphs[g].instrs[i];
      for (int k = 0; k < in->num_operands; k++) {
        int h = sg_of(p, in->operands[k]);
        if (h >= 0 && h != g) edge[g * n + h] = true;
      }
    }
  /* Transitive closure (a handful of functions): a cycle is a function reaching itself. */
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      if (edge[i * n + k])
        for (int j = 0; j < n; j++)
          if (edge[k * n + j]) edge[i * n + j] = true;
  bool cycle = false;
  for (int i = 0; i < n; i++) cycle |= edge[i * n + i];
  kiln_free(edge);
  return cycle;
}

static kiln_status partition_run(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                 kiln_partition_root_fn is_root, void *user, bool share_outputs,
                                 kiln_partition_t *out);

kiln_status kiln_partition_compute(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                   kiln_partition_root_fn is_root, void *user,
                                   kiln_partition_t *out) {
  kiln_status s = partition_run(ctx, c, is_root, user, true, out);
  if (s || !calls_cycle(out)) return s;
  /* Outputs sharing a function made a cycle: one function per output has none (a function's
   * non-root instructions have all their users inside it, so a cycle would be one in the
   * computation). */
  kiln_partition_free(out);
  return partition_run(ctx, c, is_root, user, false, out);
}

static kiln_status partition_run(kiln_affine_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                 kiln_partition_root_fn is_root, void *user, bool share_outputs,
                                 kiln_partition_t *out) {
  memset(out, 0, sizeof(*out));
  kiln_arena_init(&out->arena);
  kiln_ptrmap_init(&out->of);
  out->comp = c;
  if (!c || !c->root) return KILN_ERR_INVALID("partition: computation without a root");

  out_vec_t outs = {0};
  add_outputs(out, c->root, &outs);
  for (size_t i = 0; i < outs.len; i++) {
    const kiln_shape_t *s = outs.data[i].instr->shape;
    if (kiln_shape_is_tuple(s)) s = s->elements[outs.data[i].output_index];
    if (!kiln_shape_is_array(s) || kiln_shape_is_tuple(s)) {
      kiln_vec_free(&outs);
      return KILN_ERR_UNIMPLEMENTED("partition: output %zu of %s is not an array", i, c->name);
    }
  }
  out->num_outputs = (int)outs.len;
  out->outputs = kiln_arena_alloc(&out->arena, sizeof(*out->outputs) * (outs.len + 1));
  if (outs.len) memcpy(out->outputs, outs.data, sizeof(*out->outputs) * outs.len);
  kiln_vec_free(&outs);

  part_state_t st = {0};
  st.ctx = ctx;
  st.p = out;
  kiln_ptrmap_init(&st.maps);
  size_t n = 0;
  kiln_hlo_instruction_t **po = kiln_hlo_computation_post_order(c, &n);
  kiln_status s = NULL;
  /* Output functions first, in output order; outputs of equal dims share one. */
  for (int o = 0; o < out->num_outputs; o++) {
    const kiln_hlo_instruction_t *instr = out->outputs[o].instr;
    if (sg_of(out, instr) >= 0 || kiln_partition_is_tensor_leaf(instr)) continue;
    const kiln_shape_t *is = index_shape(instr);
    int sg = -1;
    for (size_t k = 0; share_outputs && k < st.sgs.len && sg < 0; k++)
      if (same_dims(st.sgs.data[k].rank, st.sgs.data[k].dims, is->rank, is->dims)) sg = (int)k;
    if (sg >= 0) kiln_vec_push(&st.sgs.data[sg].roots, instr);
    else sg = new_subgraph(&st, instr, true);
    assign(&st, instr, sg, identity_of(&st, instr));
  }
  for (size_t i = n; i-- > 0 && !s;) {
    const kiln_hlo_instruction_t *instr = po[i];
    if (kiln_partition_is_tensor_leaf(instr) || is_root_tuple(c, instr)) continue;
    bool output = is_output(out, instr);
    if (!output && instr->users.len == 0) continue; /* dead: never emitted */
    int sg = -1;
    kiln_indexing_map_t *map = NULL;
    if (output) {
      continue; /* assigned above, in output order */
    } else if (is_root && is_root(user, instr)) {
      sg = new_subgraph(&st, instr, false);
      map = identity_of(&st, instr);
    } else {
      s = try_join(&st, instr, &sg, &map);
      if (s) break;
      if (sg < 0) {
        sg = new_subgraph(&st, instr, false);
        map = identity_of(&st, instr);
      }
    }
    assign(&st, instr, sg, map);
  }

  if (!s) {
    out->num_subgraphs = (int)st.sgs.len;
    out->subgraphs = kiln_arena_alloc(&out->arena, sizeof(*out->subgraphs) * (st.sgs.len + 1));
    int *counts = kiln_calloc(st.sgs.len + 1, sizeof(int));
    for (size_t i = 0; i < n; i++) {
      int g = sg_of(out, po[i]);
      if (g >= 0) counts[g]++;
    }
    for (size_t g = 0; g < st.sgs.len; g++) {
      kiln_partition_subgraph_t *sg = &out->subgraphs[g];
      sg_build_t *b = &st.sgs.data[g];
      sg->id = (int)g;
      sg->num_roots = (int)b->roots.len;
      sg->roots = kiln_arena_alloc(&out->arena, sizeof(*sg->roots) * b->roots.len);
      memcpy(sg->roots, b->roots.data, sizeof(*sg->roots) * b->roots.len);
      sg->instrs = kiln_arena_alloc(&out->arena, sizeof(*sg->instrs) * ((size_t)counts[g] + 1));
      sg->rank = b->rank;
      sg->dims = b->dims;
      sg->is_output = b->is_output;
      sg->name = func_name(out, c, b->roots.data[0]);
    }
    for (size_t i = 0; i < n; i++) {
      int g = sg_of(out, po[i]);
      if (g >= 0) out->subgraphs[g].instrs[out->subgraphs[g].num_instrs++] = po[i];
    }
    kiln_free(counts);
  }
  for (size_t i = 0; i < st.sgs.len; i++) kiln_vec_free(&st.sgs.data[i].roots);
  kiln_vec_free(&st.sgs);
  for (size_t i = 0; i < st.owned.len; i++) kiln_indexing_map_free(st.owned.data[i]);
  kiln_vec_free(&st.owned);
  kiln_ptrmap_free(&st.maps);
  kiln_free(po);
  if (s) {
    kiln_partition_free(out);
    return kiln_status_annotate(s, "while partitioning %s", c->name);
  }
  return NULL;
}

void kiln_partition_free(kiln_partition_t *p) {
  if (!p) return;
  kiln_ptrmap_free(&p->of);
  kiln_arena_destroy(&p->arena);
  memset(p, 0, sizeof(*p));
}

const kiln_partition_subgraph_t *kiln_partition_subgraph_of(const kiln_partition_t *p,
                                                            const kiln_hlo_instruction_t *instr) {
  int g = sg_of(p, instr);
  return g >= 0 && g < p->num_subgraphs ? &p->subgraphs[g] : NULL;
}

void kiln_partition_print(const kiln_partition_t *p, kiln_strbuf_t *out) {
  for (int g = 0; g < p->num_subgraphs; g++) {
    const kiln_partition_subgraph_t *sg = &p->subgraphs[g];
    kiln_strbuf_printf(out, "%s: roots={", sg->name);
    for (int i = 0; i < sg->num_roots; i++)
      kiln_strbuf_printf(out, "%s%s", i ? ", " : "", sg->roots[i]->name);
    kiln_strbuf_append(out, "} instrs={");
    for (int i = 0; i < sg->num_instrs; i++)
      kiln_strbuf_printf(out, "%s%s", i ? ", " : "", sg->instrs[i]->name);
    kiln_strbuf_append(out, "} dims=[");
    for (int i = 0; i < sg->rank; i++)
      kiln_strbuf_printf(out, "%s%lld", i ? "," : "", (long long)sg->dims[i]);
    kiln_strbuf_append(out, "]\n");
  }
}
