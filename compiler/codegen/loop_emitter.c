/* Loop emitter (see loop_emitter.h). */
#include "compiler/codegen/loop_emitter.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "compiler/analysis/hlo_indexing.h"
#include "compiler/codegen/hero_emit.h"

typedef struct loop_options {
  const kiln_launch_device_t *device; /* NULL: defaults (H100-like) */
  bool no_vectorize;                  /* force one element per thread */
  bool host_target;                   /* the host grid (loop_grid) */
} loop_options_t;

/* Threads of a host block (loop_grid): at most this many, at least kHostLoopMinThreads. */
enum { kHostLoopThreads = 512, kHostLoopMinThreads = 128 };

/* What the emitted kernel looks like from outside. */
typedef struct loop_kernel_info {
  kiln_launch_grid_t grid;
  int num_inputs;  /* tensor parameters before the outputs */
  int num_outputs; /* written tensor parameters after the inputs */
} loop_kernel_info_t;

bool kiln_loop_may_vectorize(const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    switch (in->opcode) {
      case KILN_OP_REDUCE_WINDOW: case KILN_OP_SORT: case KILN_OP_DOT: case KILN_OP_CONVOLUTION:
      case KILN_OP_SIN:
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

/* (logical loop index in `from`) -> the logical index of `to` at the same physical linear
 * position (row-major when neither has a layout). NULL for a malformed layout. */
static kiln_indexing_map_t *reshape_map(kiln_affine_ctx_t *ctx, const kiln_shape_t *from,
                                        const kiln_shape_t *to) {
  kiln_indexing_map_t *m = kiln_indexing_map_identity(ctx, from->dims, (size_t)from->rank);
  kiln_vec_clear(&m->results);
  kiln_affine_expr_t *idx[KILN_KIR_MAX_RANK], *lin = NULL, *out[KILN_KIR_MAX_RANK];
  for (int i = 0; i < from->rank; i++) idx[i] = kiln_affine_dim(ctx, i);
  if (!kiln_hlo_indexing_linearize_physical(ctx, from, idx, &lin) ||
      (to->rank > 0 && !kiln_hlo_indexing_delinearize_physical(ctx, to, lin, out))) {
    kiln_indexing_map_free(m);
    return NULL;
  }
  for (int i = 0; i < to->rank; i++) kiln_indexing_map_add_result(m, out[i]);
  kiln_indexing_map_simplify(m);
  return m;
}

static bool same_order(const kiln_shape_t *a, const kiln_shape_t *b) {
  int pa[KILN_KIR_MAX_RANK], pb[KILN_KIR_MAX_RANK];
  kiln_elemental_physical_order(a, pa);
  kiln_elemental_physical_order(b, pb);
  for (int i = 0; i < a->rank; i++)
    if (pa[i] != pb[i]) return false;
  return true;
}

/* The logical index `sidx` of shape `to` that loop iteration `idx` (over `loop_shape`)
 * covers: the same index when dims and layouts agree, else the element at the same physical
 * linear position. */
static bool loop_index_for(kiln_kir_builder_t *b, kiln_affine_ctx_t *ctx,
                           const kiln_shape_t *loop_shape, const kiln_shape_t *to,
                           kiln_kir_value_t *const *idx, kiln_kir_value_t **sidx) {
  if (same_dims(to->rank, to->dims, loop_shape) && same_order(to, loop_shape)) {
    for (int i = 0; i < to->rank; i++) sidx[i] = idx[i];
    return true;
  }
  if (to->rank == 0) return true;
  kiln_indexing_map_t *rm = reshape_map(ctx, loop_shape, to);
  if (!rm) return false;
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(b, rm, idx, (size_t)loop_shape->rank, NULL, 0);
  kiln_indexing_map_free(rm);
  if (!ap) return false;
  for (int i = 0; i < to->rank; i++) sidx[i] = kiln_kir_op_result(ap, (size_t)i);
  return true;
}

/* The shape a subgraph's index space is laid out by: the first output among its roots with
 * its dims; else `dflt` filled with its dims and no layout. */
static const kiln_shape_t *subgraph_shape(const kiln_partition_t *part, kiln_elemental_t *elem,
                                          int sgi, kiln_shape_t *dflt) {
  const kiln_partition_subgraph_t *sg = &part->subgraphs[sgi];
  for (int o = 0; o < part->num_outputs; o++) {
    if (kiln_elemental_root_result(elem, sgi, part->outputs[o].instr) < 0) continue;
    const kiln_shape_t *s = output_array_shape(&part->outputs[o]);
    if (same_dims(sg->rank, sg->dims, s)) return s;
  }
  memset(dflt, 0, sizeof(*dflt));
  dflt->type = KILN_F32;
  dflt->rank = sg->rank;
  dflt->dims = (int64_t *)sg->dims;
  return dflt;
}

/* Inserts the element at logical index `lidx` of an output of shape `s` (stored in physical
 * order): one value, or (re, im) into the trailing dimension. */
static kiln_kir_value_t *insert_elem(kiln_kir_builder_t *b, kiln_kir_value_t *const *vals, int nvals,
                                     kiln_kir_value_t *tensor, const kiln_shape_t *s,
                                     kiln_kir_value_t *const *lidx) {
  int rank = s->rank;
  kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
  kiln_elemental_physical_index(s, lidx, idx);
  if (nvals == 1) return kiln_kir_insert(b, vals[0], tensor, idx, (size_t)rank);
  kiln_kir_value_t *cidx[KILN_KIR_MAX_RANK + 1];
  for (int i = 0; i < rank; i++) cidx[i] = idx[i];
  for (int part = 0; part < nvals; part++) {
    cidx[rank] = kiln_kir_const_index(b, part);
    tensor = kiln_kir_insert(b, vals[part], tensor, cidx, (size_t)rank + 1);
  }
  return tensor;
}

/* Step 1: the launch grid over the first output, which every output must match in size. */
static kiln_status loop_grid(const kiln_hlo_computation_t *c, const kiln_partition_t *part,
                             const loop_options_t *opts, kiln_launch_grid_t *grid) {
  if (part->num_outputs < 1) return KILN_ERR_INVALID("%s: fusion without outputs", c->name);
  int64_t n = kiln_shape_num_elements(output_array_shape(&part->outputs[0]));
  for (int o = 1; o < part->num_outputs; o++)
    if (kiln_shape_num_elements(output_array_shape(&part->outputs[o])) != n)
      return KILN_ERR_UNIMPLEMENTED("%s: loop fusion outputs with different element counts",
                                    c->name);
  if (opts && opts->host_target) {
    /* On the host a block's threads are the vector lanes of one loop: one element per thread
     * keeps each lane's loads and stores contiguous across threads (the GPU's 4 adjacent
     * elements per thread became a 4 x 8 shuffle around every vector op: an exp over
     * f32[1024,32000] ran 41 ms instead of 23). Blocks of 512, 256 or 128 threads, the
     * most that divides the output's minor dimension (a block then stays in one row, where
     * values broadcast along the row are one load; 512 over rows of 32,000 ran 3x slower
     * than 256), else 128: fewer blocks run ops on scalars (AdamW's pow) fewer times. */
    const kiln_shape_t *os = output_array_shape(&part->outputs[0]);
    int64_t minor = os->rank > 0 ? os->dims[kiln_shape_physical_dim(os, os->rank - 1)] : 1;
    int64_t threads = kHostLoopThreads;
    while (threads > kHostLoopMinThreads && minor % threads != 0) threads /= 2;
    if (n < threads) threads = n > 1 ? n : 1;
    KILN_RETURN_IF_ERROR(kiln_launch_grid_make(n, 1, threads, opts->device, grid),
                         "launch grid of %s", c->name);
    return NULL;
  }
  bool vec = !(opts && opts->no_vectorize) && kiln_loop_may_vectorize(c);
  KILN_RETURN_IF_ERROR(kiln_launch_grid_for_loop(opts ? opts->device : NULL, n, vec, grid),
                       "launch grid of %s", c->name);
  return NULL;
}

/* Step 2: the kernel `name`: inputs, then outputs (written), launched over `g`. */
static kiln_kir_func_t *loop_kernel_create(kiln_kir_module_t *m, const kiln_partition_t *part,
                                           const kiln_elemental_t *elem, const char *name,
                                           const kiln_launch_grid_t *g) {
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
  if (!k) return NULL;
  for (int o = 0; o < part->num_outputs; o++)
    kiln_kir_func_set_written(k, (size_t)(elem->num_tensors + o), true);
  int64_t block[3] = {g->threads, 1, 1}, grid[3] = {g->blocks_x, g->blocks_y, 1};
  kiln_kir_func_set_launch(k, block, grid);
  return k;
}

/* Step 3: the `loop` over the thread map of `g` for `loop_shape`, threading `outs` through
 * it; its indices are named dim0, dim1, ... NULL with the error recorded in `b`. */
static kiln_kir_op_t *loop_thread_loop(kiln_kir_builder_t *b, kiln_indexing_map_t *tmap,
                                       const kiln_launch_grid_t *g, kiln_kir_value_t *const *outs,
                                       int nout) {
  kiln_kir_value_t *ids[3];
  size_t nids = 2;
  ids[0] = kiln_kir_thread_id(b, 0, 0, g->threads - 1);
  ids[1] = kiln_kir_block_id(b, 0, 0, g->blocks_x - 1);
  kiln_kir_value_set_name(ids[0], "th_x");
  kiln_kir_value_set_name(ids[1], "bl_x");
  if (g->blocks_y > 1) {
    ids[2] = kiln_kir_block_id(b, 1, 0, g->blocks_y - 1);
    kiln_kir_value_set_name(ids[2], "bl_y");
    nids = 3;
  }
  return kiln_kir_loop(b, tmap, ids, nids, outs, (size_t)nout);
}

/* What the loop body's steps share. */
typedef struct loop_body {
  kiln_kir_builder_t *b;
  kiln_affine_ctx_t *ctx;
  const kiln_hlo_computation_t *c;
  const kiln_partition_t *part;
  kiln_elemental_t *elem;
  const kiln_shape_t *loop_shape;
  kiln_kir_value_t **idx;     /* the loop's logical indices into loop_shape */
  kiln_kir_value_t **tensors; /* the kernel's input tensors */
  kiln_kir_value_t **iters;   /* the outputs as threaded through the loop */
} loop_body_t;

/* Step 4a: calls every output subgraph at this iteration's index and inserts its results
 * into the outputs it roots. */
static kiln_status loop_emit_output_subgraphs(loop_body_t *L) {
  const kiln_partition_t *part = L->part;
  for (int sgi = 0; sgi < part->num_subgraphs; sgi++) {
    const kiln_partition_subgraph_t *sg = &part->subgraphs[sgi];
    if (!sg->is_output) continue;
    kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK];
    kiln_shape_t dflt;
    const kiln_shape_t *ss = subgraph_shape(part, L->elem, sgi, &dflt);
    if (!loop_index_for(L->b, L->ctx, L->loop_shape, ss, L->idx, sidx))
      return KILN_ERR_UNIMPLEMENTED("%s: output layouts", L->c->name);
    kiln_kir_op_t *call = kiln_elemental_call(L->elem, L->b, sgi, L->tensors, sidx);
    if (!call) return NULL; /* recorded in the builder */
    for (int o = 0; o < part->num_outputs; o++) {
      const kiln_partition_output_t *po = &part->outputs[o];
      int first = kiln_elemental_root_result(L->elem, sgi, po->instr);
      if (first < 0) continue;
      for (int k = 0; k < po->output_index; k++)
        first += kiln_elemental_vals_per(kiln_elemental_output_type(po->instr, k));
      int nv = kiln_elemental_vals_per(kiln_elemental_output_type(po->instr, po->output_index));
      kiln_kir_value_t *v[2] = {kiln_kir_op_result(call, (size_t)first),
                                nv > 1 ? kiln_kir_op_result(call, (size_t)first + 1) : NULL};
      const kiln_shape_t *os = output_array_shape(po);
      if (os->rank != sg->rank)
        return KILN_ERR_INTERNAL("%s: output %d rank differs from its subgraph's", L->c->name, o);
      L->iters[o] = insert_elem(L->b, v, nv, L->iters[o], os, sidx);
    }
  }
  return NULL;
}

/* Step 4b: outputs that are inputs (a parameter or constant returned as is) are copied. */
static kiln_status loop_copy_input_outputs(loop_body_t *L) {
  const kiln_partition_t *part = L->part;
  kiln_elemental_t *elem = L->elem;
  for (int o = 0; o < part->num_outputs; o++) {
    const kiln_hlo_instruction_t *in = part->outputs[o].instr;
    if (!kiln_partition_is_tensor_leaf(in)) continue;
    int t = 0;
    while (t < elem->num_tensors && elem->tensors[t] != in) t++;
    if (t == elem->num_tensors)
      return KILN_ERR_INTERNAL("%s: output %s is not an input", L->c->name, in->name);
    kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK], *pidx[KILN_KIR_MAX_RANK];
    const kiln_shape_t *s = output_array_shape(&part->outputs[o]);
    if (!loop_index_for(L->b, L->ctx, L->loop_shape, s, L->idx, sidx))
      return KILN_ERR_UNIMPLEMENTED("%s: output layouts", L->c->name);
    kiln_elemental_physical_index(in->shape, sidx, pidx);
    int nv = kiln_elemental_vals_per(s->type);
    kiln_kir_value_t *v[2] = {NULL, NULL};
    if (nv == 1) {
      v[0] = kiln_kir_extract(L->b, L->tensors[t], pidx, (size_t)s->rank);
    } else {
      kiln_kir_value_t *cidx[KILN_KIR_MAX_RANK + 1];
      for (int i = 0; i < s->rank; i++) cidx[i] = pidx[i];
      for (int p = 0; p < 2; p++) {
        cidx[s->rank] = kiln_kir_const_index(L->b, p);
        v[p] = kiln_kir_extract(L->b, L->tensors[t], cidx, (size_t)s->rank + 1);
      }
    }
    L->iters[o] = insert_elem(L->b, v, nv, L->iters[o], s, sidx);
  }
  return NULL;
}

/* Step 4: the loop body: every output's value at this iteration, then the yield. */
static kiln_status loop_emit_body(loop_body_t *L, kiln_kir_op_t *loop) {
  const kiln_partition_t *part = L->part;
  kiln_kir_builder_enter(L->b, kiln_kir_op_region(loop, 0));
  for (int i = 0; i < L->loop_shape->rank; i++) {
    L->idx[i] = kiln_kir_loop_index(loop, (size_t)i);
    char nm[16];
    snprintf(nm, sizeof(nm), "dim%d", i);
    kiln_kir_value_set_name(L->idx[i], nm);
  }
  kiln_kir_value_set_name(kiln_kir_loop_sym(loop, 0), "v");
  for (int o = 0; o < part->num_outputs; o++) L->iters[o] = kiln_kir_loop_iter_arg(loop, (size_t)o);
  kiln_status st = loop_emit_output_subgraphs(L);
  if (!st) st = loop_copy_input_outputs(L);
  for (int o = 0; o < part->num_outputs && !st; o++)
    if (!L->iters[o]) st = KILN_ERR_INTERNAL("%s: output %d not written", L->c->name, o);
  if (!st) kiln_kir_yield(L->b, L->iters, (size_t)part->num_outputs);
  kiln_kir_builder_exit(L->b);
  return st;
}

/* Emits the kernel `name` for fusion computation `c` into `m`: uses `part` and `elem` (already
 * initialized for c; the subgraph functions are emitted here). UNIMPLEMENTED for outputs with
 * different element counts. */
static kiln_status loop_emit(kiln_kir_module_t *m, const kiln_hlo_computation_t *c,
                             const kiln_partition_t *part, kiln_elemental_t *elem, const char *name,
                             const loop_options_t *opts, loop_kernel_info_t *info) {
  memset(info, 0, sizeof(*info));
  KILN_RETURN_IF_ERROR_PLAIN(loop_grid(c, part, opts, &info->grid));
  info->num_inputs = elem->num_tensors;
  info->num_outputs = part->num_outputs;
  const kiln_shape_t *loop_shape = output_array_shape(&part->outputs[0]);

  elem->physical_layouts = true; /* inserts go through insert_elem, extracts permute */
  KILN_RETURN_IF_ERROR_PLAIN(kiln_elemental_emit_functions(elem));
  const kiln_launch_grid_t *g = &info->grid;
  kiln_kir_func_t *k = loop_kernel_create(m, part, elem, name, g);
  if (!k) return KILN_ERR_INTERNAL("could not create kernel %s", name);
  kiln_indexing_map_t *tmap = NULL;
  KILN_RETURN_IF_ERROR(kiln_launch_grid_thread_map(m->ctx, g, loop_shape, "v", &tmap),
                       "thread map of %s", c->name);
  kiln_kir_module_adopt_map(m, tmap);

  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  int nout = part->num_outputs;
  kiln_kir_value_t **outs = kiln_calloc((size_t)nout + 1, sizeof(*outs));
  kiln_kir_value_t **tensors = kiln_calloc((size_t)elem->num_tensors + 1, sizeof(*tensors));
  kiln_kir_value_t **iters = kiln_calloc((size_t)nout + 1, sizeof(*iters));
  for (int i = 0; i < elem->num_tensors; i++) tensors[i] = kiln_kir_func_param(k, (size_t)i);
  for (int o = 0; o < nout; o++) outs[o] = kiln_kir_func_param(k, (size_t)(elem->num_tensors + o));
  kiln_kir_op_t *loop = loop_thread_loop(&b, tmap, g, outs, nout);
  kiln_status st = NULL;
  if (loop) {
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
    loop_body_t L = {&b, m->ctx, c, part, elem, loop_shape, idx, tensors, iters};
    st = loop_emit_body(&L, loop);
    for (int o = 0; o < nout; o++) outs[o] = kiln_kir_op_result(loop, (size_t)o);
    if (!st) kiln_kir_return(&b, outs, (size_t)nout);
  }
  kiln_status bs = kiln_kir_builder_take_status(&b);
  kiln_kir_builder_finish(&b);
  kiln_free(iters);
  kiln_free(outs);
  kiln_free(tensors);
  if (st) {
    kiln_status_free(bs);
    return st;
  }
  if (bs) return kiln_status_annotate(bs, "while emitting the loop kernel of %s", c->name);
  return NULL;
}

kiln_status kiln_loop_kernel_emit(const kiln_hlo_computation_t *c,
                                  const kiln_codegen_compile_options_t *opts,
                                  kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  double t0 = kiln_clock_ms();
  char name[128];
  const char *dump_dir = kiln_codegen_kernel_start(out, c, NULL, opts, NULL, name, sizeof(name));
  kiln_partition_t part;
  kiln_status s = kiln_partition_compute(out->ctx, c, NULL, NULL, &part);
  if (s) {
    kiln_codegen_kernel_free(out);
    return s;
  }
  kiln_codegen_dump_partition(dump_dir, name, &part);
  kiln_elemental_t elem;
  s = kiln_elemental_init(&elem, out->kir, c, &part);
  loop_kernel_info_t info;
  if (!s) {
    loop_options_t lo = {0};
    lo.device = opts ? opts->device : NULL;
    lo.no_vectorize = opts && opts->no_vectorize;
    lo.host_target = opts && opts->host_target;
    s = loop_emit(out->kir, c, &part, &elem, name, &lo, &info);
  }
  if (!s) {
    out->grid = info.grid;
    kiln_hero_set_kernel_io(out, &elem, &part);
  }
  kiln_elemental_free(&elem);
  kiln_partition_free(&part);
  return kiln_codegen_kernel_finish(out, s, t0, dump_dir, name, opts, c);
}
