/* Reduction emitter, continued (see reduction_emitter.h and reduction_internal.h): XLA's
 * multi-row and small-column reduction kernels, atomic output combining for reductions
 * split over several blocks, and the kernel that initializes their outputs. */
#include <string.h>

#include "compiler/codegen/reduction_internal.h"

#define MAX_LANES KILN_RED_MAX_LANES
#define MAX_VALS (KILN_RED_MAX_ACC * MAX_LANES)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* ---- atomics ---- */

kiln_kir_value_t *kiln_red_atomic_combine(kiln_hero_emit_t *h, kiln_red_state_t *rs, int j,
                                          kiln_kir_value_t *v, kiln_kir_value_t *out,
                                          kiln_kir_value_t *const *idx, int n) {
  const kiln_hlo_instruction_t *r = rs->reds[j];
  const kiln_hlo_computation_t *reducer = kiln_hlo_instruction_called(r, "to_apply");
  if (!v || !out) return NULL;
  kiln_elem_type_t t = out->type->elem;
  int bits = kiln_elem_type_bits(t), kind = kiln_hero_atomic_kind(reducer);
  /* Read-modify-write for 32/64-bit add (ints and floats) and integer min/max; float
   * min/max propagate NaN in HLO, so they go through the reducer in a CAS loop. */
  bool rmw = (bits == 32 || bits == 64) &&
             (kind == KILN_KIR_ATOMIC_ADD || ((kind == KILN_KIR_ATOMIC_MIN || kind == KILN_KIR_ATOMIC_MAX) &&
                                               kiln_elem_type_is_integral(t) && t != KILN_PRED));
  if (rmw) return kiln_kir_atomic_rmw(&h->b, (kiln_kir_atomic_t)kind, v, out, idx, (size_t)n);
  if (!reducer) {
    kiln_elemental_fail(&h->fn, KILN_ERR_INVALID("%s: no to_apply", r->name));
    return NULL;
  }
  return kiln_hero_atomic_cas_combine(h, reducer, v, out, idx, (size_t)n);
}

/* Starts a kernel of one x dimension: T threads, nb blocks; ids get th_x and bl_x. */
static kiln_status begin_1d(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                            const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                            int64_t T, int64_t nb, kiln_codegen_kernel_t *out,
                            kiln_kir_value_t **ids) {
  int64_t block[3] = {T, 1, 1}, grid[3] = {nb, 1, 1};
  KILN_RETURN_IF_ERROR_PLAIN(kiln_red_emit_begin(h, c, opts, rs, block, grid, out));
  ids[0] = kiln_kir_thread_id(&h->b, 0, 0, T - 1);
  ids[1] = kiln_kir_block_id(&h->b, 0, 0, nb - 1);
  kiln_kir_value_set_name(ids[0], "th_x");
  kiln_kir_value_set_name(ids[1], "bl_x");
  return NULL;
}

/* ---- the initializing kernel ---- */

kiln_status kiln_red_emit_init(const kiln_hlo_computation_t *c,
                               const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                               kiln_codegen_kernel_t *out) {
  const kiln_shape_t *os = rs->reds[0]->shape;
  if (kiln_shape_is_tuple(os)) return KILN_ERR_INTERNAL("%s: split reduction of a tuple", c->name);
  int64_t n = kiln_shape_num_elements(os);
  int64_t T = n < 256 ? round_up(n > 0 ? n : 1, 32) : 256, nb = ceil_div(n > 0 ? n : 1, T);
  if (nb > 2147483647) return KILN_ERR_UNIMPLEMENTED("%s: %lld outputs", c->name, (long long)n);
  kiln_hero_emit_t h;
  kiln_kir_value_t *ids[2];
  KILN_RETURN_IF_ERROR_PLAIN(begin_1d(&h, c, opts, rs, T, nb, out, ids));
  kiln_kir_module_t *m = out->kir;
  kiln_affine_ctx_t *x = m->ctx;
  kiln_kir_builder_t *b = &h.b;
  kiln_status st = NULL;
  const char *dn[2] = {"th_x", "bl_x"};
  kiln_kir_value_t *init[KILN_RED_MAX_ACC];
  int nout = h.part.num_outputs;
  if (!kiln_red_init_values(&h, rs, init)) goto done;
  {
    int64_t dhi[2] = {T - 1, nb - 1};
    kiln_indexing_map_t *map = kiln_hero_map(m, 2, dn, dhi, 0, NULL);
    kiln_affine_expr_t *lin = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), T), kiln_affine_dim(x, 0));
    if (nb * T > n) kiln_indexing_map_add_constraint(map, lin, 0, n - 1);
    kiln_indexing_map_add_result(map, lin);
    kiln_indexing_map_simplify(map);
    kiln_kir_op_t *loop = kiln_kir_loop(b, map, ids, 2, h.outs, (size_t)nout);
    if (!loop) goto done;
    kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
    kiln_kir_value_t *linv = kiln_kir_loop_index(loop, 0), *ys[KILN_HERO_MAX_ROOTS];
    bool ok = true;
    for (int o = 0; o < nout && ok; o++) {
      const kiln_partition_output_t *po = &h.part.outputs[o];
      int j = kiln_red_index(rs, po->instr);
      ys[o] = kiln_kir_loop_iter_arg(loop, (size_t)o);
      if (j < 0) continue;
      const kiln_shape_t *sh = kiln_shape_is_tuple(po->instr->shape) ? po->instr->shape->elements[po->output_index]
                                                                     : po->instr->shape;
      if (kiln_shape_num_elements(sh) != n) {
        st = KILN_ERR_UNIMPLEMENTED("%s: split reductions with different output sizes", c->name);
        ok = false;
        break;
      }
      kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
      ok = kiln_red_index_of(&h, sh, linv, idx);
      if (ok)
        ys[o] = kiln_hero_insert_output(&h, &init[rs->acc_first[j] + po->output_index],
                                        rs->complex_add[j] ? 2 : 1, ys[o], sh, idx);
    }
    if (ok) kiln_kir_yield(b, ys, (size_t)nout);
    kiln_kir_builder_exit(b);
    if (!ok) goto done;
    for (int o = 0; o < nout; o++) h.outs[o] = kiln_kir_op_result(loop, (size_t)o);
    kiln_kir_return(b, h.outs, (size_t)nout);
  }
done:
  return kiln_hero_emit_finish(&h, st, opts);
}

/* ---- per-lane accumulation ---- */

bool kiln_red_accumulate_lanes(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_indexing_map_t *map,
                               kiln_affine_expr_t *lin, int lanes, int64_t lane_stride,
                               kiln_kir_value_t *const *ids, int nids, kiln_kir_value_t **init,
                               kiln_kir_value_t **acc_out) {
  kiln_affine_ctx_t *x = h->out->kir->ctx;
  /* Per lane: every input shape's indices (kiln_red_add_input_indices), then the linear index. */
  int off[KILN_HERO_MAX_ROOTS], rank = 0;
  for (int v = 0; v < lanes; v++) {
    kiln_affine_expr_t *lv = kiln_affine_add(x, lin, kiln_affine_const(x, v * lane_stride));
    rank = kiln_red_add_input_indices(h, rs, map, lv, off);
    kiln_indexing_map_add_result(map, lv);
  }
  kiln_indexing_map_simplify(map);
  int nacc = rs->nacc, nside = 0, side[KILN_HERO_MAX_ROOTS];
  kiln_kir_value_t *inits[MAX_VALS + KILN_HERO_MAX_ROOTS];
  for (int k = 0; k < nacc; k++)
    for (int v = 0; v < lanes; v++) inits[k * lanes + v] = init[k];
  for (int o = 0; o < h->part.num_outputs; o++)
    if (kiln_red_is_side_output(rs, h->part.outputs[o].instr)) {
      side[nside] = o;
      inits[nacc * lanes + nside++] = h->outs[o];
    }
  kiln_kir_op_t *loop = kiln_kir_loop(&h->b, map, ids, (size_t)nids, inits, (size_t)(nacc * lanes + nside));
  if (!loop) return false;
  kiln_kir_builder_enter(&h->b, kiln_kir_op_region(loop, 0));
  size_t mark;
  kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
  kiln_kir_value_t *ys[MAX_VALS + KILN_HERO_MAX_ROOTS];
  for (int k = 0; k < nacc * lanes + nside; k++) ys[k] = kiln_kir_loop_iter_arg(loop, (size_t)k);
  bool ok = true;
  for (int v = 0; v < lanes && ok; v++) {
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK], *a[KILN_RED_MAX_ACC], *xv[KILN_RED_MAX_ACC];
    kiln_kir_value_t *linv = kiln_kir_loop_index(loop, (size_t)(v * (rank + 1) + rank));
    for (int j = 0; j < rs->nred && ok; j++) {
      const kiln_hlo_instruction_t *r = rs->reds[j];
      for (int i = 0; i < r->operands[0]->shape->rank; i++)
        idx[i] = kiln_kir_loop_index(loop, (size_t)(v * (rank + 1) + off[j] + i));
      ok = kiln_red_input_values(h, rs, j, idx, xv);
    }
    for (int k = 0; k < nside && ok; k++) {
      const kiln_hlo_instruction_t *r = h->part.outputs[side[k]].instr;
      kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK];
      kiln_kir_value_t *sv = kiln_red_index_of(h, r->shape, linv, sidx) ? kiln_hero_emit_value(h, r, sidx) : NULL;
      ok = sv != NULL;
      if (ok)
        ys[nacc * lanes + k] =
            kiln_hero_insert_output(h, &sv, 1, ys[nacc * lanes + k], r->shape, sidx);
    }
    if (!ok) break;
    for (int k = 0; k < nacc; k++) a[k] = ys[k * lanes + v];
    ok = kiln_red_combine(h, rs, a, xv);
    for (int k = 0; k < nacc && ok; k++) ys[k * lanes + v] = a[k];
  }
  kiln_elemental_exit(&h->fn, mark);
  if (ok) kiln_kir_yield(&h->b, ys, (size_t)(nacc * lanes + nside));
  kiln_kir_builder_exit(&h->b);
  if (!ok) return false;
  for (int k = 0; k < nacc * lanes; k++) acc_out[k] = kiln_kir_op_result(loop, (size_t)k);
  for (int k = 0; k < nside; k++) h->outs[side[k]] = kiln_kir_op_result(loop, (size_t)(nacc * lanes + k));
  return true;
}

/* ---- multi-row ---- */

/* XLA's MultiRowReductionFusion: `lanes` = R2 / vec threads per row, `rows` rows per block;
 * thread t of block b reads the vec contiguous elements starting at t * vec of the block's
 * rows (rows are contiguous: R2 = lanes * vec), for every major reduced row; a shuffle tree
 * over the row's lanes (offsets lanes / 2 .. 1, no shared memory); lane 0 of each row writes. */
kiln_status kiln_red_emit_multirow(const kiln_hlo_computation_t *c,
                                   const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                                   kiln_codegen_kernel_t *out) {
  const kiln_reduction_plan_t *pl = &rs->plan;
  int64_t R0 = rs->ha.reduction.dims[0], K = rs->ha.reduction.dims[1], R2 = rs->ha.reduction.dims[2];
  int64_t vec = pl->vector_size, lanes = pl->threads_reduced, rows = pl->threads_kept;
  if (vec * lanes != R2 || lanes > 32 || (lanes & (lanes - 1)))
    return KILN_ERR_INTERNAL("%s: bad multi-row plan (%lld lanes x %lld)", c->name, (long long)lanes, (long long)vec);
  int64_t T = round_up(lanes * rows, 32), nb = ceil_div(K, rows);
  if (nb > 2147483647) return KILN_ERR_UNIMPLEMENTED("%s: %lld row blocks", c->name, (long long)nb);
  kiln_hero_emit_t h;
  kiln_kir_value_t *ids[2];
  KILN_RETURN_IF_ERROR_PLAIN(begin_1d(&h, c, opts, rs, T, nb, out, ids));
  kiln_kir_module_t *m = out->kir;
  kiln_affine_ctx_t *x = m->ctx;
  kiln_kir_builder_t *b = &h.b;
  kiln_status st = NULL;
  const char *dn[2] = {"th_x", "bl_x"};
  kiln_kir_value_t *init[KILN_RED_MAX_ACC];
  if (!kiln_red_init_values(&h, rs, init)) goto done;
  {
    int64_t dhi[2] = {T - 1, nb - 1}, shi[2] = {R0 - 1, vec - 1};
    kiln_indexing_map_t *map = kiln_hero_map(m, 2, dn, dhi, 2, shi);
    kiln_indexing_map_set_name(map, KILN_INDEXING_SYM, 1, "v");
    kiln_affine_expr_t *within = kiln_affine_add(
        x, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), rows * R2),
                           kiln_affine_mul_const(x, kiln_affine_dim(x, 0), vec)),
        kiln_affine_sym(x, 1));
    bool bounded = nb * rows > K || T > rows * lanes;
    if (bounded) kiln_indexing_map_add_constraint(map, within, 0, K * R2 - 1);
    kiln_affine_expr_t *lin = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_sym(x, 0), K * R2), within);
    kiln_kir_op_t *loop = kiln_red_accumulate(&h, rs, map, lin, ids, 2, init);
    if (!loop) goto done;
    kiln_kir_value_t *acc[KILN_RED_MAX_ACC];
    for (int k = 0; k < rs->nacc; k++) acc[k] = kiln_kir_op_result(loop, (size_t)k);
    if (lanes > 1) kiln_red_shuffle_tree(&h, rs, acc, (int)(lanes / 2));
    kiln_kir_value_t *cond =
        lanes > 1 ? kiln_kir_cmp(b, KILN_KIR_CMP_EQ, kiln_kir_binary(b, KILN_KIR_AND, ids[0], kiln_kir_const_index(b, lanes - 1)),
                                 kiln_kir_const_index(b, 0))
                  : kiln_kir_cmp(b, KILN_KIR_CMP_LT, ids[0], kiln_kir_const_index(b, T));
    kiln_indexing_map_t *km = kiln_hero_map(m, 2, dn, dhi, 0, NULL);
    kiln_indexing_map_add_result(km, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), rows),
                                                     kiln_affine_floordiv(x, kiln_affine_dim(x, 0), kiln_affine_const(x, lanes))));
    kiln_kir_value_t *kept = kiln_kir_apply_indexing1(b, km, ids, 2);
    kiln_red_write_guarded(&h, rs, cond, bounded ? kept : NULL, K, kept, acc);
    kiln_kir_return(b, h.outs, (size_t)h.part.num_outputs);
  }
done:
  return kiln_hero_emit_finish(&h, st, opts);
}

/* ---- small column ---- */

/* XLA's SmallColumnReductionFusion for [M, R, N] with 32 % N == 0: block m walks the
 * flattened [R, N] (its split's rows) with T threads of vec lanes: thread t lane v
 * accumulates the elements at t * vec + v + s * T * vec, all of column (t * vec + v) % N.
 * The T * vec partials go to a shared tile [shared_rows][N + padding] at
 * ((t * vec + v) / N, (t * vec + v) % N); after a barrier, thread t reads for each s < vec
 * entry e = t + s * T at (e % shared_rows, e / shared_rows), so shared_rows consecutive
 * threads hold one column's partials; a shuffle tree over them and the first writes. */
kiln_status kiln_red_emit_small_column(const kiln_hlo_computation_t *c,
                                       const kiln_codegen_compile_options_t *opts,
                                       kiln_red_state_t *rs, kiln_codegen_kernel_t *out) {
  const kiln_reduction_plan_t *pl = &rs->plan;
  int64_t M = rs->ha.reduction.dims[0], R = rs->ha.reduction.dims[1], N = rs->ha.reduction.dims[2];
  int64_t vec = pl->vector_size, T = pl->threads_reduced, SR = pl->shared_rows;
  int64_t splits = pl->splits, chunk = pl->split_size;
  if (vec > MAX_LANES || rs->nacc * vec > MAX_VALS || SR * N != T * vec || SR > 32 || (SR & (SR - 1)))
    return KILN_ERR_INTERNAL("%s: bad small-column plan", c->name);
  int64_t flat = chunk * N, iters = ceil_div(flat, T * vec);
  if (M > 2147483647 || splits > 65535) return KILN_ERR_UNIMPLEMENTED("%s: grid %lld x %lld", c->name, (long long)M, (long long)splits);
  int64_t block[3] = {T, 1, 1}, grid[3] = {M, splits, 1};
  kiln_hero_emit_t h;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_red_emit_begin(&h, c, opts, rs, block, grid, out));
  kiln_kir_module_t *m = out->kir;
  kiln_affine_ctx_t *x = m->ctx;
  kiln_kir_builder_t *b = &h.b;
  kiln_status st = NULL;
  const char *dn[3] = {"th_x", "bl_x", "bl_y"};
  kiln_kir_value_t *ids[3] = {kiln_kir_thread_id(b, 0, 0, T - 1), kiln_kir_block_id(b, 0, 0, M - 1),
                              kiln_kir_block_id(b, 1, 0, splits - 1)};
  for (int i = 0; i < 3; i++) kiln_kir_value_set_name(ids[i], dn[i]);
  kiln_kir_value_t *th = ids[0];
  kiln_kir_value_t *init[KILN_RED_MAX_ACC];
  if (!kiln_red_init_values(&h, rs, init)) goto done;
  {
    int64_t dhi[3] = {T - 1, M - 1, splits - 1}, shi[1] = {iters - 1};
    kiln_indexing_map_t *map = kiln_hero_map(m, 3, dn, dhi, 1, shi);
    kiln_affine_expr_t *in_chunk = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 0), vec),
                                                   kiln_affine_mul_const(x, kiln_affine_sym(x, 0), T * vec));
    kiln_affine_expr_t *f = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 2), chunk * N), in_chunk);
    if (iters * T * vec > flat) kiln_indexing_map_add_constraint(map, in_chunk, 0, flat - 1);
    if (splits * chunk > R) kiln_indexing_map_add_constraint(map, f, 0, R * N - 1);
    kiln_affine_expr_t *lin = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), R * N), f);
    kiln_kir_value_t *acc[MAX_VALS];
    if (!kiln_red_accumulate_lanes(&h, rs, map, lin, (int)vec, 1, ids, 3, init, acc)) goto done;
    /* Partials into the shared tile. */
    int64_t tdims[2];
    kiln_reduction_tile_dims(pl, &rs->ha.reduction, tdims);
    const char *tn = "th_x";
    int64_t thi = T - 1;
    kiln_indexing_map_t *wm = kiln_hero_map(m, 1, &tn, &thi, 0, NULL);
    for (int v = 0; v < vec; v++) {
      kiln_affine_expr_t *e = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 0), vec), kiln_affine_const(x, v));
      kiln_indexing_map_add_result(wm, kiln_affine_floordiv(x, e, kiln_affine_const(x, N)));
      kiln_indexing_map_add_result(wm, kiln_affine_mod(x, e, kiln_affine_const(x, N)));
    }
    kiln_indexing_map_simplify(wm);
    kiln_kir_op_t *wap = kiln_kir_apply_indexing(b, wm, &th, 1, NULL, 0);
    if (!wap) goto done;
    kiln_kir_value_t *tile[KILN_RED_MAX_ACC];
    for (int k = 0; k < rs->nacc; k++) {
      tile[k] = kiln_kir_alloc_shared(b, init[k]->type->elem, 2, tdims);
      kiln_kir_value_set_name(tile[k], "tile");
      for (int v = 0; v < vec; v++) {
        kiln_kir_value_t *wi[2] = {kiln_kir_op_result(wap, (size_t)(2 * v)), kiln_kir_op_result(wap, (size_t)(2 * v + 1))};
        tile[k] = kiln_kir_insert(b, acc[k * vec + v], tile[k], wi, 2);
      }
    }
    kiln_kir_op_t *bar = kiln_kir_barrier(b, tile, (size_t)rs->nacc);
    if (!bar) goto done;
    kiln_indexing_map_t *rm = kiln_hero_map(m, 1, &tn, &thi, 0, NULL);
    for (int s = 0; s < vec; s++) {
      kiln_affine_expr_t *e = kiln_affine_add(x, kiln_affine_dim(x, 0), kiln_affine_const(x, s * T));
      kiln_indexing_map_add_result(rm, kiln_affine_mod(x, e, kiln_affine_const(x, SR)));
      kiln_indexing_map_add_result(rm, kiln_affine_floordiv(x, e, kiln_affine_const(x, SR)));
    }
    kiln_indexing_map_simplify(rm);
    kiln_kir_op_t *rap = kiln_kir_apply_indexing(b, rm, &th, 1, NULL, 0);
    if (!rap) goto done;
    kiln_kir_value_t *cond =
        SR > 1 ? kiln_kir_cmp(b, KILN_KIR_CMP_EQ, kiln_kir_binary(b, KILN_KIR_AND, th, kiln_kir_const_index(b, SR - 1)),
                              kiln_kir_const_index(b, 0))
               : kiln_kir_cmp(b, KILN_KIR_CMP_LT, th, kiln_kir_const_index(b, T));
    const char *kn[2] = {"col", "bl_x"};
    int64_t khi[2] = {N - 1, M - 1};
    kiln_indexing_map_t *km = kiln_hero_map(m, 2, kn, khi, 0, NULL);
    kiln_indexing_map_add_result(km, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), N), kiln_affine_dim(x, 0)));
    for (int s = 0; s < vec; s++) {
      kiln_kir_value_t *red[KILN_RED_MAX_ACC];
      kiln_kir_value_t *ri[2] = {kiln_kir_op_result(rap, (size_t)(2 * s)), kiln_kir_op_result(rap, (size_t)(2 * s + 1))};
      for (int k = 0; k < rs->nacc; k++) red[k] = kiln_kir_extract(b, kiln_kir_op_result(bar, (size_t)k), ri, 2);
      if (SR > 1) kiln_red_shuffle_tree(&h, rs, red, (int)(SR / 2));
      kiln_kir_value_t *kargs[2] = {ri[1], ids[1]};
      kiln_kir_value_t *kept = kiln_kir_apply_indexing1(b, km, kargs, 2);
      kiln_red_write_outputs(&h, rs, cond, kept, red);
    }
    kiln_kir_return(b, h.outs, (size_t)h.part.num_outputs);
  }
done:
  return kiln_hero_emit_finish(&h, st, opts);
}
