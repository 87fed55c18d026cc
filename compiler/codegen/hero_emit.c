/* Hero-emit scaffolding (see hero_emit.h). */
#include "compiler/codegen/hero_emit.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "compiler/analysis/hlo_indexing.h"

bool kiln_hero_has_default_layout(const kiln_shape_t *s) {
  if (!s->has_layout || !s->layout.minor_to_major || s->layout.rank != s->rank) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->layout.minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

void kiln_hero_delinearize_physical(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                    kiln_affine_expr_t *linear, kiln_affine_expr_t **out) {
  if (s->rank == 0) return;
  int64_t pdims[KILN_KIR_MAX_RANK];
  int plog[KILN_KIR_MAX_RANK];
  bool dflt = kiln_hero_has_default_layout(s);
  for (int k = 0; k < s->rank; k++) {
    plog[k] = dflt ? k : (int)s->layout.minor_to_major[s->rank - 1 - k];
    pdims[k] = s->dims[plog[k]];
  }
  kiln_affine_expr_t *tmp[KILN_KIR_MAX_RANK];
  kiln_affine_delinearize(ctx, linear, pdims, (size_t)s->rank, tmp);
  for (int k = 0; k < s->rank; k++) out[plog[k]] = tmp[k];
}

kiln_indexing_map_t *kiln_hero_map(kiln_kir_module_t *m, int ndims, const char *const *dim_names,
                                   const int64_t *dim_hi, int nsyms, const int64_t *sym_hi) {
  kiln_indexing_map_t *map = kiln_indexing_map_create(m->ctx, (size_t)ndims, (size_t)nsyms, 0);
  for (int i = 0; i < ndims; i++) {
    if (dim_names && dim_names[i])
      kiln_indexing_map_set_name(map, KILN_INDEXING_DIM, (size_t)i, dim_names[i]);
    kiln_indexing_map_set_bounds(map, KILN_INDEXING_DIM, (size_t)i, 0, dim_hi[i]);
  }
  for (int i = 0; i < nsyms; i++)
    kiln_indexing_map_set_bounds(map, KILN_INDEXING_SYM, (size_t)i, 0, sym_hi[i]);
  return kiln_kir_module_adopt_map(m, map);
}

static void hero_emit_release(kiln_hero_emit_t *h) {
  kiln_vec_free(&h->fn.cache);
  kiln_status_free(h->fn.err);
  h->fn.err = NULL;
  if (h->have_elem) kiln_elemental_free(&h->elem);
  if (h->have_part) kiln_partition_free(&h->part);
  h->have_elem = h->have_part = false;
  kiln_free(h->tensors);
  kiln_free(h->outs);
  h->tensors = h->outs = NULL;
}

kiln_status kiln_hero_emit_start(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                 const kiln_hlo_computation_t *emit,
                                 const kiln_codegen_compile_options_t *opts, const char *suffix,
                                 const kiln_hero_emit_setup_t *setup, kiln_codegen_kernel_t *out) {
  memset(h, 0, sizeof(*h));
  memset(out, 0, sizeof(*out));
  h->c = emit;
  h->out = out;
  h->t0 = kiln_clock_ms();
  /* The fusion, then the private copy this kernel reads (its root tuple: what it reads). */
  h->dump_dir = kiln_codegen_kernel_start(out, c, emit != c ? emit : NULL, opts, suffix, h->name,
                                          sizeof(h->name));
  kiln_status s = kiln_partition_compute(out->ctx, emit, setup ? setup->is_root : NULL,
                                         setup ? setup->user : NULL, &h->part);
  if (!s) {
    h->have_part = true;
    s = kiln_elemental_init(&h->elem, out->kir, emit, &h->part);
  }
  if (!s) {
    h->have_elem = true;
    if (setup) {
      /* Hero emitters read tensors through kiln_hero_emit_value (at the physical index) and
       * the subgraph functions; a permuted output is UNIMPLEMENTED unless the caller writes
       * outputs at physical indices (physical_outputs: the split emitters, and emitters that
       * write through kiln_hero_insert_output). */
      h->elem.physical_layouts = setup->physical_outputs || h->elem.permuted_output == NULL;
      h->elem.caller_emits = setup->caller_emits;
      h->elem.caller_user = setup->user;
    }
    s = kiln_elemental_emit_functions(&h->elem);
  }
  if (s) {
    hero_emit_release(h);
    kiln_codegen_kernel_free(out);
    return kiln_status_annotate(s, "while emitting fusion %s", c->name);
  }
  kiln_codegen_dump_partition(h->dump_dir, h->name, &h->part);
  return NULL;
}

void kiln_hero_emit_abort(kiln_hero_emit_t *h) {
  hero_emit_release(h);
  kiln_codegen_kernel_free(h->out);
}

kiln_status kiln_hero_emit_begin_ex(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                    const kiln_codegen_compile_options_t *opts,
                                    kiln_partition_root_fn is_root, void *user,
                                    const int64_t block[3], const int64_t grid[3],
                                    bool physical_outputs, kiln_partition_root_fn caller_emits,
                                    kiln_codegen_kernel_t *out) {
  kiln_hero_emit_setup_t setup = {is_root, user, physical_outputs, caller_emits};
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_emit_start(h, c, c, opts, NULL, &setup, out));
  int nout = h->part.num_outputs;
  const kiln_shape_t **shapes = kiln_calloc((size_t)nout + 1, sizeof(*shapes));
  for (int o = 0; o < nout; o++) {
    const kiln_shape_t *sh = h->part.outputs[o].instr->shape;
    shapes[o] = kiln_shape_is_tuple(sh) ? sh->elements[h->part.outputs[o].output_index] : sh;
  }
  kiln_status s = kiln_hero_emit_kernel(h, shapes, nout, block, grid);
  kiln_free(shapes);
  if (s) kiln_hero_emit_abort(h);
  return s;
}

kiln_status kiln_hero_emit_begin(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                 const kiln_codegen_compile_options_t *opts,
                                 kiln_partition_root_fn is_root, void *user, const int64_t block[3],
                                 const int64_t grid[3], kiln_codegen_kernel_t *out) {
  return kiln_hero_emit_begin_ex(h, c, opts, is_root, user, block, grid, false, NULL, out);
}

void kiln_hero_set_kernel_io(kiln_codegen_kernel_t *out, const kiln_elemental_t *elem,
                             const kiln_partition_t *part) {
  out->num_inputs = elem->num_tensors;
  out->inputs = kiln_calloc((size_t)out->num_inputs + 1, sizeof(*out->inputs));
  for (int i = 0; i < out->num_inputs; i++) out->inputs[i] = elem->tensors[i];
  out->num_outputs = part->num_outputs;
  out->outputs = kiln_calloc((size_t)out->num_outputs + 1, sizeof(*out->outputs));
  for (int o = 0; o < out->num_outputs; o++) {
    const kiln_shape_t *sh = part->outputs[o].instr->shape;
    if (kiln_shape_is_tuple(sh)) sh = sh->elements[part->outputs[o].output_index];
    out->outputs[o] = sh;
  }
}

kiln_kir_value_t *kiln_hero_emit_value(kiln_hero_emit_t *h, const kiln_hlo_instruction_t *instr,
                                       kiln_kir_value_t *const *idx) {
  if (kiln_elemental_num_values(instr) != 1) {
    kiln_elemental_fail(&h->fn,
                        KILN_ERR_UNIMPLEMENTED("%s: %s values in a hero kernel", instr->name,
                                               kiln_elem_type_name(instr->shape->type)));
    return NULL;
  }
  if (kiln_partition_is_tensor_leaf(instr)) {
    for (int t = 0; t < h->elem.num_tensors; t++)
      if (h->elem.tensors[t] == instr) {
        /* Tensors are stored in physical dimension order. */
        kiln_kir_value_t *pidx[KILN_KIR_MAX_RANK];
        bool dflt = kiln_hero_has_default_layout(instr->shape);
        for (int k = 0; k < instr->shape->rank; k++)
          pidx[k] =
              idx[dflt ? k : (int)instr->shape->layout.minor_to_major[instr->shape->rank - 1 - k]];
        return kiln_kir_extract(&h->b, h->tensors[t], pidx, (size_t)instr->shape->rank);
      }
    kiln_elemental_fail(&h->fn, KILN_ERR_INTERNAL("%s is not a kernel input", instr->name));
    return NULL;
  }
  if (instr->opcode == KILN_OP_CONSTANT && instr->literal)
    return kiln_elemental_constant(&h->fn, instr->literal, 0);
  const kiln_partition_subgraph_t *sg = kiln_partition_subgraph_of(&h->part, instr);
  int r = sg ? kiln_elemental_root_result(&h->elem, sg->id, instr) : -1;
  if (r < 0) {
    kiln_elemental_fail(&h->fn, KILN_ERR_INTERNAL("%s heads no function", instr->name));
    return NULL;
  }
  kiln_kir_op_t *call = kiln_elemental_call(&h->elem, &h->b, sg->id, h->tensors, idx);
  return call ? kiln_kir_op_result(call, (size_t)r) : NULL;
}

kiln_status kiln_hero_emit_finish(kiln_hero_emit_t *h, kiln_status st,
                                  const kiln_codegen_compile_options_t *opts) {
  kiln_codegen_kernel_t *out = h->out;
  kiln_status bs = kiln_kir_builder_take_status(&h->b);
  kiln_kir_builder_finish(&h->b);
  if (!st && h->fn.err) {
    st = h->fn.err;
    h->fn.err = NULL;
  }
  if (!st)
    st = bs;
  else
    kiln_status_free(bs);
  if (!st) kiln_hero_set_kernel_io(out, &h->elem, &h->part);
  hero_emit_release(h);
  return kiln_codegen_kernel_finish(out, st, h->t0, h->dump_dir, h->name, opts, h->c);
}

void kiln_hero_grid_dims(const kiln_launch_grid_t *g, int64_t block[3], int64_t grid[3]) {
  block[0] = g->threads, block[1] = 1, block[2] = 1;
  grid[0] = g->blocks_x, grid[1] = g->blocks_y > 0 ? g->blocks_y : 1, grid[2] = 1;
}

kiln_kir_func_t *kiln_hero_kernel_create(kiln_kir_module_t *m, const char *name,
                                         const kiln_elemental_t *elem,
                                         const kiln_shape_t *const *outputs, int nout,
                                         const int64_t block[3], const int64_t grid[3]) {
  int nin = elem->num_tensors;
  size_t np = (size_t)(nin + nout);
  const kiln_kir_type_t **pt = kiln_calloc(np + 1, sizeof(*pt));
  const kiln_kir_type_t **rt = kiln_calloc((size_t)nout + 1, sizeof(*rt));
  char **names = kiln_calloc(np + 1, sizeof(*names));
  for (int i = 0; i < nin; i++) {
    pt[i] = elem->tensor_types[i];
    names[i] = kiln_strdup(elem->tensors[i]->name);
  }
  for (int o = 0; o < nout; o++) {
    pt[nin + o] = rt[o] = kiln_elemental_tensor_type(m, outputs[o]);
    char buf[32];
    snprintf(buf, sizeof(buf), nout == 1 ? "output" : "output%d", o);
    names[nin + o] = kiln_strdup(buf);
  }
  for (size_t i = 0; i < np; i++) kiln_codegen_sanitize_name(names[i]);
  kiln_kir_func_t *k = kiln_kir_func_create(m, name, KILN_KIR_FUNC_KERNEL, pt,
                                            (const char *const *)names, np, rt, (size_t)nout);
  for (size_t i = 0; i < np; i++) kiln_free(names[i]);
  kiln_free(names);
  kiln_free(pt);
  kiln_free(rt);
  if (!k) return NULL;
  for (int o = 0; o < nout; o++) kiln_kir_func_set_written(k, (size_t)(nin + o), true);
  kiln_kir_func_set_launch(k, block, grid);
  return k;
}

kiln_status kiln_hero_emit_kernel(kiln_hero_emit_t *h, const kiln_shape_t *const *outputs, int nout,
                                  const int64_t block[3], const int64_t grid[3]) {
  kiln_codegen_kernel_t *out = h->out;
  int nin = h->elem.num_tensors;
  h->kernel = kiln_hero_kernel_create(out->kir, h->name, &h->elem, outputs, nout, block, grid);
  if (!h->kernel) return KILN_ERR_INTERNAL("could not create kernel %s", h->name);
  out->grid.threads = block[0] * block[1] * block[2];
  out->grid.blocks_x = grid[0];
  out->grid.blocks_y = grid[1];
  h->tensors = kiln_calloc((size_t)nin + 1, sizeof(*h->tensors));
  h->outs = kiln_calloc((size_t)nout + 1, sizeof(*h->outs));
  for (int i = 0; i < nin; i++) h->tensors[i] = kiln_kir_func_param(h->kernel, (size_t)i);
  for (int o = 0; o < nout; o++) h->outs[o] = kiln_kir_func_param(h->kernel, (size_t)(nin + o));
  kiln_kir_builder_init(&h->b, out->kir, kiln_kir_func_body(h->kernel));
  h->fn.e = &h->elem;
  h->fn.b = &h->b;
  h->fn.sg = -1;
  h->fn.tensors = h->tensors;
  return NULL;
}

kiln_status kiln_hero_linear_grid(int64_t n, kiln_launch_grid_t *g) {
  memset(g, 0, sizeof(*g));
  g->num_elements = n;
  g->vector_size = 1;
  g->threads = n >= 128 ? 128 : n < 1 ? 1 : n;
  g->blocks_x = n > 0 ? (n + g->threads - 1) / g->threads : 1;
  g->blocks_y = 1;
  if (g->blocks_x > INT32_MAX)
    return KILN_ERR_UNIMPLEMENTED("%lld elements: too many blocks", (long long)n);
  return NULL;
}

kiln_kir_op_t *kiln_hero_grid_loop(kiln_hero_emit_t *h, const kiln_launch_grid_t *g,
                                   const kiln_shape_t *shape, kiln_kir_value_t *const *inits,
                                   int ninits) {
  kiln_kir_module_t *m = h->out->kir;
  kiln_affine_ctx_t *x = m->ctx;
  const char *dn[2] = {"th_x", "bl_x"};
  int64_t hi[2] = {g->threads - 1, g->blocks_x - 1};
  kiln_indexing_map_t *map = kiln_hero_map(m, 2, dn, hi, 0, NULL);
  kiln_affine_expr_t *lin = kiln_affine_add(
      x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), g->threads), kiln_affine_dim(x, 0));
  int64_t n = kiln_shape_num_elements(shape);
  if (n < g->threads * g->blocks_x) kiln_indexing_map_add_constraint(map, lin, 0, n - 1);
  kiln_affine_expr_t *ex[KILN_KIR_MAX_RANK];
  kiln_hero_delinearize_physical(x, shape, lin, ex);
  for (int i = 0; i < shape->rank; i++) kiln_indexing_map_add_result(map, ex[i]);
  kiln_indexing_map_simplify(map);
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&h->b, 0, 0, g->threads - 1),
                              kiln_kir_block_id(&h->b, 0, 0, g->blocks_x - 1)};
  kiln_kir_value_set_name(ids[0], "th_x");
  kiln_kir_value_set_name(ids[1], "bl_x");
  return kiln_kir_loop(&h->b, map, ids, 2, inits, (size_t)ninits);
}

/* idx (logical, shape `from`) -> the indices of the same linear position in shape `to`:
 * row-major, or in memory order (`physical`; false for tiled layouts). */
static bool position_index(kiln_hero_emit_t *h, const kiln_shape_t *from,
                           kiln_kir_value_t *const *idx, const kiln_shape_t *to, bool physical,
                           kiln_kir_value_t **out) {
  bool same = from->rank == to->rank && !physical;
  for (int i = 0; same && i < from->rank; i++) same = from->dims[i] == to->dims[i];
  if (same) {
    for (int i = 0; i < from->rank; i++) out[i] = idx[i];
    return true;
  }
  if (to->rank == 0) return true;
  kiln_kir_module_t *m = h->out->kir;
  int64_t hi[KILN_KIR_MAX_RANK];
  for (int i = 0; i < from->rank; i++) hi[i] = from->dims[i] - 1;
  kiln_indexing_map_t *map = kiln_hero_map(m, from->rank, NULL, hi, 0, NULL);
  kiln_affine_expr_t *d[KILN_KIR_MAX_RANK], *ex[KILN_KIR_MAX_RANK], *lin;
  for (int i = 0; i < from->rank; i++) d[i] = kiln_affine_dim(m->ctx, i);
  if (physical) {
    if (!kiln_hlo_indexing_linearize_physical(m->ctx, from, d, &lin) ||
        !kiln_hlo_indexing_delinearize_physical(m->ctx, to, lin, ex))
      return false;
  } else {
    lin = from->rank ? kiln_affine_linearize(m->ctx, d, from->dims, (size_t)from->rank)
                     : kiln_affine_const(m->ctx, 0);
    kiln_affine_delinearize(m->ctx, lin, to->dims, (size_t)to->rank, ex);
  }
  for (int i = 0; i < to->rank; i++) kiln_indexing_map_add_result(map, ex[i]);
  kiln_indexing_map_simplify(map);
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(&h->b, map, idx, (size_t)from->rank, NULL, 0);
  if (!ap) return false;
  for (int i = 0; i < to->rank; i++) out[i] = kiln_kir_op_result(ap, (size_t)i);
  return true;
}

bool kiln_hero_reshape_index(kiln_hero_emit_t *h, const kiln_shape_t *from,
                             kiln_kir_value_t *const *idx, const kiln_shape_t *to,
                             kiln_kir_value_t **out) {
  return position_index(h, from, idx, to, false, out);
}

bool kiln_hero_bitcast_index(kiln_hero_emit_t *h, const kiln_shape_t *from,
                             kiln_kir_value_t *const *idx, const kiln_shape_t *to,
                             kiln_kir_value_t **out) {
  return position_index(h, from, idx, to, true, out);
}

kiln_kir_value_t *kiln_hero_insert_output(kiln_hero_emit_t *h, kiln_kir_value_t *const *v, int nv,
                                          kiln_kir_value_t *t, const kiln_shape_t *s,
                                          kiln_kir_value_t *const *idx) {
  kiln_kir_value_t *pidx[KILN_KIR_MAX_RANK + 1];
  kiln_elemental_physical_index(s, idx, pidx);
  if (nv == 1) return v[0] && t ? kiln_kir_insert(&h->b, v[0], t, pidx, (size_t)s->rank) : NULL;
  for (int p = 0; p < nv && t; p++) {
    pidx[s->rank] = kiln_kir_const_index(&h->b, p);
    t = v[p] ? kiln_kir_insert(&h->b, v[p], t, pidx, (size_t)s->rank + 1) : NULL;
  }
  return t;
}

int kiln_hero_emit_values(kiln_hero_emit_t *h, const kiln_hlo_instruction_t *instr,
                          kiln_kir_value_t *const *idx, kiln_kir_value_t **out) {
  const kiln_shape_t *s = instr->shape;
  if (kiln_shape_is_tuple(s) || !kiln_elem_type_is_complex(s->type)) {
    out[0] = kiln_hero_emit_value(h, instr, idx);
    return out[0] ? 1 : -1;
  }
  kiln_elem_type_t pt = kiln_elemental_part_type(s->type);
  if (kiln_partition_is_tensor_leaf(instr)) {
    for (int t = 0; t < h->elem.num_tensors; t++)
      if (h->elem.tensors[t] == instr) {
        kiln_kir_value_t *pidx[KILN_KIR_MAX_RANK + 1];
        kiln_elemental_physical_index(s, idx, pidx);
        for (int p = 0; p < 2; p++) {
          pidx[s->rank] = kiln_kir_const_index(&h->b, p);
          out[p] = kiln_kir_extract(&h->b, h->tensors[t], pidx, (size_t)s->rank + 1);
        }
        return out[0] && out[1] ? 2 : -1;
      }
    kiln_elemental_fail(&h->fn, KILN_ERR_INTERNAL("%s is not a kernel input", instr->name));
    return -1;
  }
  if (instr->opcode == KILN_OP_CONSTANT && instr->literal && !instr->literal->unknown) {
    double re = 0, im = 0;
    kiln_literal_get_c128(instr->literal, 0, &re, &im);
    out[0] = kiln_kir_const_float(&h->b, pt, re);
    out[1] = kiln_kir_const_float(&h->b, pt, im);
    return 2;
  }
  const kiln_partition_subgraph_t *sg = kiln_partition_subgraph_of(&h->part, instr);
  int r = sg ? kiln_elemental_root_result(&h->elem, sg->id, instr) : -1;
  if (r < 0) {
    kiln_elemental_fail(&h->fn, KILN_ERR_INTERNAL("%s heads no function", instr->name));
    return -1;
  }
  kiln_kir_op_t *call = kiln_elemental_call(&h->elem, &h->b, sg->id, h->tensors, idx);
  if (!call) return -1;
  out[0] = kiln_kir_op_result(call, (size_t)r);
  out[1] = kiln_kir_op_result(call, (size_t)r + 1);
  return 2;
}
