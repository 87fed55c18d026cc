/* Loop emitter (see loop_emitter.h). */
#include "compiler/codegen/loop_emitter.h"

#include <stdio.h>
#include <string.h>

#include "compiler/codegen/elemental_internal.h"

bool kiln_loop_may_vectorize(const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    switch (in->opcode) {
      case KILN_OP_REDUCE_WINDOW: case KILN_OP_SORT: case KILN_OP_DOT: case KILN_OP_SIN:
      case KILN_OP_COS: case KILN_OP_TAN: case KILN_OP_POWER: case KILN_OP_ATAN2:
        return false;
      case KILN_OP_REDUCE:
        if (kiln_shape_is_tuple(in->shape)) return false;
        break;
      default:
        break;
    }
  }
  return true;
}

static const kiln_shape_t *output_array_shape(const kiln_partition_output_t *o) {
  const kiln_shape_t *s = o->instr->shape;
  if (kiln_shape_is_tuple(s)) s = s->elements[o->output_index];
  return s;
}

static bool same_dims(int r1, const int64_t *d1, const kiln_shape_t *s) {
  if (r1 != s->rank) return false;
  for (int i = 0; i < r1; i++)
    if (d1[i] != s->dims[i]) return false;
  return true;
}

/* (loop index in `from`) -> the same linear position in `to_dims`. */
static kiln_indexing_map_t *reshape_map(kiln_affine_ctx_t *ctx, const kiln_shape_t *from, int to_rank,
                                        const int64_t *to_dims) {
  kiln_indexing_map_t *m = kiln_indexing_map_identity(ctx, from->dims, (size_t)from->rank);
  kiln_vec_clear(&m->results);
  kiln_affine_expr_t *idx[KILN_KIR_MAX_RANK];
  for (int i = 0; i < from->rank; i++) idx[i] = kiln_affine_dim(ctx, i);
  kiln_affine_expr_t *lin = kiln_affine_linearize(ctx, idx, from->dims, (size_t)from->rank);
  kiln_affine_expr_t *out[KILN_KIR_MAX_RANK];
  if (to_rank > 0) {
    kiln_affine_delinearize(ctx, lin, to_dims, (size_t)to_rank, out);
    for (int i = 0; i < to_rank; i++) kiln_indexing_map_add_result(m, out[i]);
  }
  kiln_indexing_map_simplify(m);
  return m;
}

/* Inserts an output element: one value, or (re, im) into the trailing dimension. */
static kiln_kir_value_t *insert_elem(kiln_kir_builder_t *b, kiln_kir_value_t *const *vals, int nvals,
                                     kiln_kir_value_t *tensor, kiln_kir_value_t *const *idx, int rank) {
  if (nvals == 1) return kiln_kir_insert(b, vals[0], tensor, idx, (size_t)rank);
  kiln_kir_value_t *cidx[KILN_KIR_MAX_RANK + 1];
  for (int i = 0; i < rank; i++) cidx[i] = idx[i];
  for (int part = 0; part < nvals; part++) {
    cidx[rank] = kiln_kir_const_index(b, part);
    tensor = kiln_kir_insert(b, vals[part], tensor, cidx, (size_t)rank + 1);
  }
  return tensor;
}

kiln_status kiln_loop_emit(kiln_kir_module_t *m, const kiln_hlo_computation_t *c,
                           const kiln_partition_t *part, kiln_elemental_t *elem, const char *name,
                           const kiln_loop_emitter_options_t *opts, kiln_loop_kernel_info_t *info) {
  memset(info, 0, sizeof(*info));
  if (part->num_outputs < 1) return KILN_ERR_INVALID("%s: fusion without outputs", c->name);
  const kiln_shape_t *loop_shape = output_array_shape(&part->outputs[0]);
  int64_t n = kiln_shape_num_elements(loop_shape);
  for (int o = 1; o < part->num_outputs; o++)
    if (kiln_shape_num_elements(output_array_shape(&part->outputs[o])) != n)
      return KILN_ERR_UNIMPLEMENTED("%s: loop fusion outputs with different element counts",
                                    c->name);
  bool vec = !(opts && opts->no_vectorize) && kiln_loop_may_vectorize(c);
  KILN_RETURN_IF_ERROR(kiln_launch_grid_for_loop(opts ? opts->device : NULL, n, vec, &info->grid),
                       "launch grid of %s", c->name);
  info->num_inputs = elem->num_tensors;
  info->num_outputs = part->num_outputs;

  KILN_RETURN_IF_ERROR_PLAIN(kiln_elemental_emit_functions(elem));

  /* Signature: inputs, then outputs (written). */
  size_t np = (size_t)elem->num_tensors + (size_t)part->num_outputs;
  const kiln_kir_type_t **pt = kiln_calloc(np + 1, sizeof(*pt));
  const kiln_kir_type_t **rt = kiln_calloc((size_t)part->num_outputs + 1, sizeof(*rt));
  char **names = kiln_calloc(np + 1, sizeof(*names));
  for (int i = 0; i < elem->num_tensors; i++) {
    pt[i] = elem->tensor_types[i];
    names[i] = kiln_strdup(elem->tensors[i]->name);
  }
  for (int o = 0; o < part->num_outputs; o++) {
    const kiln_shape_t *s = output_array_shape(&part->outputs[o]);
    rt[o] = pt[elem->num_tensors + o] = kiln_elemental_tensor_type(m, s);
    char buf[32];
    snprintf(buf, sizeof(buf), part->num_outputs == 1 ? "output" : "output%d", o);
    names[elem->num_tensors + o] = kiln_strdup(buf);
  }
  for (size_t i = 0; i < np; i++)
    for (char *q = names[i]; *q; q++)
      if (*q == '.' || *q == '-') *q = '_';
  kiln_kir_func_t *k = kiln_kir_func_create(m, name, KILN_KIR_FUNC_KERNEL, pt, (const char *const *)names,
                                            np, rt, (size_t)part->num_outputs);
  for (size_t i = 0; i < np; i++) kiln_free(names[i]);
  kiln_free(names);
  kiln_free(pt);
  kiln_free(rt);
  if (!k) return KILN_ERR_INTERNAL("could not create kernel %s", name);
  for (int o = 0; o < part->num_outputs; o++) kiln_kir_func_set_written(k, (size_t)(elem->num_tensors + o), true);
  const kiln_launch_grid_t *g = &info->grid;
  int64_t block[3] = {g->threads, 1, 1}, grid[3] = {g->blocks_x, g->blocks_y, 1};
  kiln_kir_func_set_launch(k, block, grid);

  kiln_indexing_map_t *tmap = NULL;
  KILN_RETURN_IF_ERROR(kiln_launch_grid_thread_map(m->ctx, g, loop_shape, "v", &tmap),
                       "thread map of %s", c->name);
  kiln_kir_module_adopt_map(m, tmap);

  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[3];
  size_t nids = 2;
  ids[0] = kiln_kir_thread_id(&b, 0, 0, g->threads - 1);
  ids[1] = kiln_kir_block_id(&b, 0, 0, g->blocks_x - 1);
  kiln_kir_value_set_name(ids[0], "th_x");
  kiln_kir_value_set_name(ids[1], "bl_x");
  if (g->blocks_y > 1) {
    ids[2] = kiln_kir_block_id(&b, 1, 0, g->blocks_y - 1);
    kiln_kir_value_set_name(ids[2], "bl_y");
    nids = 3;
  }
  kiln_kir_value_t **outs = kiln_calloc((size_t)part->num_outputs + 1, sizeof(*outs));
  kiln_kir_value_t **tensors = kiln_calloc((size_t)elem->num_tensors + 1, sizeof(*tensors));
  for (int i = 0; i < elem->num_tensors; i++) tensors[i] = kiln_kir_func_param(k, (size_t)i);
  for (int o = 0; o < part->num_outputs; o++) outs[o] = kiln_kir_func_param(k, (size_t)(elem->num_tensors + o));
  kiln_kir_op_t *loop = kiln_kir_loop(&b, tmap, ids, nids, outs, (size_t)part->num_outputs);
  kiln_status st = NULL;
  if (loop) {
    kiln_kir_builder_enter(&b, kiln_kir_op_region(loop, 0));
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
    for (int i = 0; i < loop_shape->rank; i++) {
      idx[i] = kiln_kir_loop_index(loop, (size_t)i);
      char nm[16];
      snprintf(nm, sizeof(nm), "dim%d", i);
      kiln_kir_value_set_name(idx[i], nm);
    }
    kiln_kir_value_set_name(kiln_kir_loop_sym(loop, 0), "v");
    kiln_kir_value_t **iters = kiln_calloc((size_t)part->num_outputs + 1, sizeof(*iters));
    for (int o = 0; o < part->num_outputs; o++) iters[o] = kiln_kir_loop_iter_arg(loop, (size_t)o);
    for (int sgi = 0; sgi < part->num_subgraphs && !st; sgi++) {
      const kiln_partition_subgraph_t *sg = &part->subgraphs[sgi];
      if (!sg->is_output) continue;
      kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK];
      if (same_dims(sg->rank, sg->dims, loop_shape)) {
        for (int i = 0; i < sg->rank; i++) sidx[i] = idx[i];
      } else if (sg->rank > 0) {
        kiln_indexing_map_t *rm = reshape_map(m->ctx, loop_shape, sg->rank, sg->dims);
        kiln_kir_op_t *ap = kiln_kir_apply_indexing(&b, rm, idx, (size_t)loop_shape->rank, NULL, 0);
        kiln_indexing_map_free(rm);
        if (!ap) break;
        for (int i = 0; i < sg->rank; i++) sidx[i] = kiln_kir_op_result(ap, (size_t)i);
      }
      kiln_kir_op_t *call = kiln_elemental_call(elem, &b, sgi, tensors, sidx);
      if (!call) break;
      for (int o = 0; o < part->num_outputs; o++) {
        const kiln_partition_output_t *po = &part->outputs[o];
        int first = kiln_elemental_root_result(elem, sgi, po->instr);
        if (first < 0) continue;
        for (int k = 0; k < po->output_index; k++)
          first += kiln_elem_vals_per(kiln_elem_output_type(po->instr, k));
        int nv = kiln_elem_vals_per(kiln_elem_output_type(po->instr, po->output_index));
        kiln_kir_value_t *v[2] = {kiln_kir_op_result(call, (size_t)first),
                                  nv > 1 ? kiln_kir_op_result(call, (size_t)first + 1) : NULL};
        iters[o] = insert_elem(&b, v, nv, iters[o], sidx, sg->rank);
      }
    }
    /* Outputs that are inputs (a parameter or constant returned as is): copied. */
    for (int o = 0; o < part->num_outputs; o++) {
      const kiln_hlo_instruction_t *in = part->outputs[o].instr;
      if (!kiln_partition_is_tensor_leaf(in)) continue;
      int t = 0;
      while (t < elem->num_tensors && elem->tensors[t] != in) t++;
      if (t == elem->num_tensors) {
        st = KILN_ERR_INTERNAL("%s: output %s is not an input", c->name, in->name);
        break;
      }
      kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK];
      const kiln_shape_t *s = in->shape;
      if (same_dims(s->rank, s->dims, loop_shape)) {
        for (int i = 0; i < s->rank; i++) sidx[i] = idx[i];
      } else if (s->rank > 0) {
        kiln_indexing_map_t *rm = reshape_map(m->ctx, loop_shape, s->rank, s->dims);
        kiln_kir_op_t *ap = kiln_kir_apply_indexing(&b, rm, idx, (size_t)loop_shape->rank, NULL, 0);
        kiln_indexing_map_free(rm);
        if (!ap) break;
        for (int i = 0; i < s->rank; i++) sidx[i] = kiln_kir_op_result(ap, (size_t)i);
      }
      int nv = kiln_elem_vals_per(s->type);
      kiln_kir_value_t *v[2] = {NULL, NULL};
      if (nv == 1) {
        v[0] = kiln_kir_extract(&b, tensors[t], sidx, (size_t)s->rank);
      } else {
        kiln_kir_value_t *cidx[KILN_KIR_MAX_RANK + 1];
        for (int i = 0; i < s->rank; i++) cidx[i] = sidx[i];
        for (int part = 0; part < 2; part++) {
          cidx[s->rank] = kiln_kir_const_index(&b, part);
          v[part] = kiln_kir_extract(&b, tensors[t], cidx, (size_t)s->rank + 1);
        }
      }
      iters[o] = insert_elem(&b, v, nv, iters[o], sidx, s->rank);
    }
    for (int o = 0; o < part->num_outputs && !st; o++)
      if (!iters[o]) st = KILN_ERR_INTERNAL("%s: output %d not written", c->name, o);
    if (!st) kiln_kir_yield(&b, iters, (size_t)part->num_outputs);
    kiln_free(iters);
    kiln_kir_builder_exit(&b);
    for (int o = 0; o < part->num_outputs; o++) outs[o] = kiln_kir_op_result(loop, (size_t)o);
    if (!st) kiln_kir_return(&b, outs, (size_t)part->num_outputs);
  }
  kiln_status bs = kiln_kir_builder_take_status(&b);
  kiln_kir_builder_finish(&b);
  kiln_free(outs);
  kiln_free(tensors);
  if (st) {
    kiln_status_free(bs);
    return st;
  }
  if (bs) return kiln_status_annotate(bs, "while emitting the loop kernel of %s", c->name);
  return NULL;
}
