/* Transpose emitter (see transpose_emitter.h). */
#include "compiler/codegen/transpose_emitter.h"

#include <string.h>

#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/hero_emit.h"

#define MAX_NODES 256

/* Shapes whose logical indices a phase's loop map computes directly (so the simplifier sees
 * the delinearization next to the tile arithmetic): results [first, first + rank). */
typedef struct idx_table {
  int n;
  const kiln_shape_t *shape[2 * KILN_HERO_MAX_ROOTS];
  int first[2 * KILN_HERO_MAX_ROOTS];
  kiln_kir_op_t *loop;
} idx_table_t;


typedef struct tr_state {
  kiln_hero_analysis_t ha;
  int nheroes;
  const kiln_hlo_instruction_t *heroes[KILN_HERO_MAX_ROOTS];
  /* Instructions between a root and its hero (hero and root included). */
  int npath;
  const kiln_hlo_instruction_t *path[MAX_NODES];
  const idx_table_t *tab; /* the table of the loop being emitted (NULL outside) */
} tr_state_t;

static bool on_path(const tr_state_t *ts, const kiln_hlo_instruction_t *x) {
  for (int i = 0; i < ts->npath; i++)
    if (ts->path[i] == x) return true;
  return false;
}

static int hero_index(const tr_state_t *ts, const kiln_hlo_instruction_t *x) {
  for (int i = 0; i < ts->nheroes; i++)
    if (ts->heroes[i] == x) return i;
  return -1;
}

/* Marks the instructions from `x` down to `hero`; returns whether x reaches the hero. */
static bool mark_path(tr_state_t *ts, const kiln_hlo_instruction_t *x, const kiln_hlo_instruction_t *hero) {
  if (on_path(ts, x)) return true;
  bool reaches = x == hero;
  if (!reaches && x->opcode != KILN_OP_PARAMETER)
    for (int i = 0; i < x->num_operands; i++) reaches |= mark_path(ts, x->operands[i], hero);
  if (reaches && ts->npath < MAX_NODES) ts->path[ts->npath++] = x;
  return reaches;
}

/* Functions of their own: the heroes' operands (read at the input index) and the other
 * operands of the consumers (read at the output index). */
static bool tr_is_root(void *user, const kiln_hlo_instruction_t *instr) {
  tr_state_t *ts = user;
  for (int h = 0; h < ts->nheroes; h++)
    if (ts->heroes[h]->operands[0] == instr) return true;
  if (on_path(ts, instr)) return false;
  for (int i = 0; i < ts->npath; i++) {
    const kiln_hlo_instruction_t *p = ts->path[i];
    if (hero_index(ts, p) >= 0) continue;
    for (int k = 0; k < p->num_operands; k++)
      if (p->operands[k] == instr) return true;
  }
  return false;
}


static void table_add(idx_table_t *t, kiln_affine_ctx_t *x, kiln_indexing_map_t *map, kiln_affine_expr_t *lin,
                      const kiln_shape_t *s, int *nres) {
  for (int i = 0; i < t->n; i++)
    if (kiln_shape_equal(t->shape[i], s, true)) return;
  if (t->n >= 2 * KILN_HERO_MAX_ROOTS || s->rank == 0) return;
  kiln_affine_expr_t *ex[KILN_KIR_MAX_RANK];
  kiln_hero_delinearize_physical(x, s, lin, ex);
  t->shape[t->n] = s;
  t->first[t->n++] = *nres;
  for (int i = 0; i < s->rank; i++) kiln_indexing_map_add_result(map, ex[i]);
  *nres += s->rank;
}

/* Logical indices of `s` for the physical linear index value `lin` (range [0, n-1]). */
static bool index_of(kiln_hero_emit_t *h, const idx_table_t *tab, const kiln_shape_t *s, kiln_kir_value_t *lin, kiln_kir_value_t **idx) {
  if (s->rank == 0) return true;
  for (int i = 0; tab && i < tab->n; i++)
    if (kiln_shape_equal(tab->shape[i], s, true)) {
      for (int k = 0; k < s->rank; k++) idx[k] = kiln_kir_loop_index(tab->loop, (size_t)(tab->first[i] + k));
      return true;
    }
  kiln_kir_module_t *m = h->out->kir;
  int64_t hi = kiln_shape_num_elements(s) - 1;
  const char *dn = "lin";
  kiln_indexing_map_t *map = kiln_hero_map(m, 1, &dn, &hi, 0, NULL);
  kiln_affine_expr_t *ex[KILN_KIR_MAX_RANK];
  kiln_hero_delinearize_physical(m->ctx, s, kiln_affine_dim(m->ctx, 0), ex);
  for (int i = 0; i < s->rank; i++) kiln_indexing_map_add_result(map, ex[i]);
  kiln_indexing_map_simplify(map);
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(&h->b, map, &lin, 1, NULL, 0);
  if (!ap) return false;
  for (int i = 0; i < s->rank; i++) idx[i] = kiln_kir_op_result(ap, (size_t)i);
  return true;
}

typedef struct memo {
  const kiln_hlo_instruction_t *x[MAX_NODES];
  kiln_kir_value_t *v[MAX_NODES];
  int n;
} memo_t;

/* Value of path node x at output linear index `lin`, the heroes' values being `tile_vals`. */
static kiln_kir_value_t *eval_path(kiln_hero_emit_t *h, tr_state_t *ts, const kiln_hlo_instruction_t *x,
                                   kiln_kir_value_t *lin, kiln_kir_value_t *const *tile_vals, memo_t *mm) {
  for (int i = 0; i < mm->n; i++)
    if (mm->x[i] == x) return mm->v[i];
  kiln_kir_value_t *v = NULL;
  int hi = hero_index(ts, x);
  if (hi >= 0) {
    v = tile_vals[hi];
  } else if (x->opcode == KILN_OP_BITCAST || x->opcode == KILN_OP_RESHAPE || x->opcode == KILN_OP_TRANSPOSE ||
             (x->opcode == KILN_OP_COPY && kiln_shape_equal(x->shape, x->operands[0]->shape, true))) {
    v = eval_path(h, ts, x->operands[0], lin, tile_vals, mm);
  } else if (kiln_hlo_opcode_is_elementwise(x->opcode) && x->num_operands <= 8) {
    kiln_kir_value_t *args[8];
    for (int k = 0; k < x->num_operands; k++) {
      const kiln_hlo_instruction_t *op = x->operands[k];
      if (on_path(ts, op)) {
        args[k] = eval_path(h, ts, op, lin, tile_vals, mm);
      } else {
        kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
        args[k] = index_of(h, ts->tab, op->shape, lin, idx) ? kiln_hero_emit_value(h, op, idx) : NULL;
      }
      if (!args[k]) return NULL;
    }
    v = kiln_elemental_scalar_op(&h->fn, x, args, x->num_operands);
  } else {
    kiln_elemental_fail(&h->fn, KILN_ERR_UNIMPLEMENTED("%s: %s after a transpose hero", x->name,
                                                       kiln_hlo_opcode_name(x->opcode)));
    return NULL;
  }
  if (v && mm->n < MAX_NODES) mm->x[mm->n] = x, mm->v[mm->n++] = v;
  return v;
}

/* XLA's packed transpose for elements under 32 bits: v = 32 / bits elements share a 32-bit
 * word (2 for 16-bit, 4 for 8-bit types), tiles are 32v x 32v. Used when every transpose
 * hero has the same 8- or 16-bit element type, both tiled dimensions span at least one
 * whole tile and the tiles fit in 48 KiB; else 1 (the 32 x 33 tile). */
static int packed_vector_size(const tr_state_t *ts, int64_t dim_a, int64_t dim_b) {
  int bits = kiln_elem_type_bits(ts->heroes[0]->shape->type);
  for (int h = 1; h < ts->nheroes; h++)
    if (kiln_elem_type_bits(ts->heroes[h]->shape->type) != bits) return 1;
  if (bits != 8 && bits != 16) return 1;
  int v = 32 / bits;
  /* Every tile in 48 KiB of static shared memory, as the 32 x 33 ones are. */
  if ((int64_t)ts->nheroes * (32 * v) * (32 * v) * (bits / 8) > 48 * 1024) return 1;
  return dim_a >= 32 * v && dim_b >= 32 * v ? v : 1;
}

/* Appends the shared-tile index of tile offsets (b_off, a_off) to `map`: [b][a] in the
 * 32 x 33 tile (plus the kept minor dimension, symbol 1); in the packed 32v x 32v tile the
 * column is swizzled, each v-row band rotated by v columns per band ((a + (b / v) v) mod
 * 32v), so the v x v blocks of phase 2 fall in distinct banks. */
static void add_tile_index(kiln_affine_ctx_t *x, kiln_indexing_map_t *map, kiln_affine_expr_t *b_off,
                           kiln_affine_expr_t *a_off, int v, bool keep) {
  kiln_indexing_map_add_result(map, b_off);
  if (v == 1) {
    kiln_indexing_map_add_result(map, a_off);
    if (keep) kiln_indexing_map_add_result(map, kiln_affine_sym(x, 1));
    return;
  }
  kiln_affine_expr_t *band = kiln_affine_mul_const(x, kiln_affine_floordiv(x, b_off, kiln_affine_const(x, v)), v);
  kiln_indexing_map_add_result(map, kiln_affine_mod(x, kiln_affine_add(x, a_off, band), kiln_affine_const(x, 32 * v)));
}

/* Where a kernel's tiles lie in the input. */
typedef struct tile_geom {
  kiln_affine_ctx_t *x;
  const kiln_transpose_desc_t *d;
  int nr, a, bdim, minor;        /* rank, tiled dims, kept minor dim (-1: none) */
  kiln_affine_expr_t *const *bex; /* block index -> batch dims..., tb, ta */
  const int *bpos;                /* batch dim -> its position in bex */
  kiln_affine_expr_t *taT, *tbT;  /* the tile's first a / b index */
  int64_t span_a, span_b;         /* tiles x tile edge along a / b */
} tile_geom_t;

/* The input coordinates of tile offset (a_off, b_off) (the kept minor dimension: symbol 1),
 * with constraints on `map` keeping partial tiles inside the input. */
static void input_coords(const tile_geom_t *g, kiln_indexing_map_t *map, kiln_affine_expr_t *a_off,
                         kiln_affine_expr_t *b_off, kiln_affine_expr_t **coord) {
  for (int i = 0; i < g->nr; i++)
    coord[i] = i == g->a || i == g->bdim || i == g->minor ? NULL : g->bex[g->bpos[i]];
  coord[g->a] = kiln_affine_add(g->x, g->taT, a_off);
  coord[g->bdim] = kiln_affine_add(g->x, g->tbT, b_off);
  if (g->minor >= 0) coord[g->minor] = kiln_affine_sym(g->x, 1);
  if (g->span_a > g->d->in_dims[g->a]) kiln_indexing_map_add_constraint(map, coord[g->a], 0, g->d->in_dims[g->a] - 1);
  if (g->span_b > g->d->in_dims[g->bdim])
    kiln_indexing_map_add_constraint(map, coord[g->bdim], 0, g->d->in_dims[g->bdim] - 1);
}

/* Step 1: the hero analysis, the "102" form, the transpose heroes and the paths from the
 * roots to them. */
static kiln_status tr_analyze(const kiln_hlo_computation_t *c, tr_state_t *ts, bool *keep) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hero_analyze(c, &ts->ha));
  if (ts->ha.emitter != KILN_HERO_EMITTER_TRANSPOSE)
    return KILN_ERR_INVALID("%s: not a transpose fusion (%s)", c->name,
                            kiln_hero_emitter_name(ts->ha.emitter));
  const kiln_transpose_desc_t *d = &ts->ha.transpose;
  int nr = d->rank;
  /* The "102" form keeps the (small) minor dimension: it rides along with every tile
   * element as an innermost loop over symbol 1 (tile [32][33][minor]); the tiled
   * dimensions are then the ones just above it. */
  *keep = nr >= 3 && d->perm[nr - 1] == nr - 1;
  if (!*keep && d->perm[nr - 1] == nr - 1)
    return KILN_ERR_UNIMPLEMENTED("%s: transpose keeping the minor dimension at rank %d", c->name,
                                  nr);
  for (int i = 0; i < ts->ha.num_roots; i++) {
    const kiln_hlo_instruction_t *hr = ts->ha.heroes[i];
    if (!kiln_hero_is_transpose_hero(hr, NULL)) continue;
    if (hero_index(ts, hr) < 0) ts->heroes[ts->nheroes++] = hr;
    if (!mark_path(ts, ts->ha.roots[i], hr))
      return KILN_ERR_INTERNAL("%s: root does not reach its hero", c->name);
  }
  return NULL;
}

/* The tiling of one transpose kernel. */
typedef struct tr_plan {
  bool keep;           /* "102": the minor dimension rides along */
  int minor, a, bdim;  /* kept minor dim (-1: none), the tiled input dims */
  int64_t nminor;      /* size of the kept minor dim (1: none) */
  int v;               /* elements per 32-bit word of the packed tile (1: the 32 x 33 tile) */
  int64_t T;           /* tile edge */
  int64_t na, nb, nbl; /* tiles along a / b; blocks */
} tr_plan_t;

/* Step 2: tile geometry and the launch (blocks of 32 x 4 threads, one tile each). */
static void tr_plan(const tr_state_t *ts, bool keep, const kiln_codegen_compile_options_t *opts,
                    tr_plan_t *p) {
  const kiln_transpose_desc_t *d = &ts->ha.transpose;
  int nr = d->rank;
  p->keep = keep;
  p->minor = keep ? nr - 1 : -1;
  p->a = keep ? nr - 2 : nr - 1;
  p->bdim = (int)d->perm[p->a];
  p->nminor = keep ? d->in_dims[p->minor] : 1;
  int pk = opts ? opts->packed_transpose : 0;
  bool want_packed = pk > 0 || (pk == 0 && !(opts && opts->host_target));
  p->v = keep || !want_packed ? 1 : packed_vector_size(ts, d->in_dims[p->a], d->in_dims[p->bdim]);
  p->T = 32 * p->v;
  p->na = (d->in_dims[p->a] + p->T - 1) / p->T;
  p->nb = (d->in_dims[p->bdim] + p->T - 1) / p->T;
  int64_t batch = 1;
  for (int i = 0; i < nr; i++)
    if (i != p->a && i != p->bdim && i != p->minor) batch *= d->in_dims[i];
  p->nbl = batch * p->na * p->nb;
}

/* What the two phases of the kernel body share. */
typedef struct tr_kernel {
  const kiln_hlo_computation_t *c;
  kiln_hero_emit_t *h;
  tr_state_t *ts;
  const tr_plan_t *p;
  kiln_kir_module_t *m;
  kiln_affine_ctx_t *x;
  kiln_kir_builder_t *b;
  const char *dn[3];
  int64_t dhi[3];
  kiln_kir_value_t *ids[3];
  tile_geom_t g;
  int ntix; /* tile rank */
  /* Tile offsets along a / b of phase 1 (reading) and 2 (writing), and their loop symbols. */
  kiln_affine_expr_t *a1, *b1, *a2, *b2;
  int64_t shi1[3], shi2[3];
  int nsym1, nsym2;
  int64_t bshape[18];
  int bpos[16];
  kiln_affine_expr_t *bex[18];
} tr_kernel_t;

/* Step 3: thread / block ids, block -> (batch dims..., tb, ta), and the tile offsets of both
 * phases. Unpacked: tile row of thread y at step s is 8 * ty + s, so consecutive steps of a
 * warp move along consecutive rows (on the host, where the steps of a thread run back to
 * back, this keeps reads and writes walking rows in order; on the GPU each step is still one
 * coalesced, bank-conflict-free row per warp). Packed (v elements to a 32-bit word, T = 32v):
 * phase 1 step (l, e) reads row (T/4) ty + l, column v tx + e (each thread one word of a
 * row); phase 2 step (l, h, w) takes the v x v block at rows v tx + w, columns v (8 ty + l) +
 * h, so a thread writes v consecutive output elements (one word). */
static void tr_geometry(tr_kernel_t *K) {
  const tr_plan_t *p = K->p;
  const kiln_transpose_desc_t *d = &K->ts->ha.transpose;
  kiln_affine_ctx_t *x = K->x;
  int nr = d->rank, v = p->v;
  int64_t T = p->T;
  K->dn[0] = "th_x", K->dn[1] = "th_y", K->dn[2] = "bl_x";
  K->dhi[0] = 31, K->dhi[1] = 3, K->dhi[2] = p->nbl - 1;
  K->ids[0] = kiln_kir_thread_id(K->b, 0, 0, 31);
  K->ids[1] = kiln_kir_thread_id(K->b, 1, 0, 3);
  K->ids[2] = kiln_kir_block_id(K->b, 0, 0, p->nbl - 1);
  for (int i = 0; i < 3; i++) kiln_kir_value_set_name(K->ids[i], K->dn[i]);
  int nbs = 0;
  for (int i = 0; i < nr; i++)
    if (i != p->a && i != p->bdim && i != p->minor)
      K->bpos[i] = nbs, K->bshape[nbs++] = d->in_dims[i];
  K->bshape[nbs] = p->nb;
  K->bshape[nbs + 1] = p->na;
  kiln_affine_delinearize(x, kiln_affine_dim(x, 2), K->bshape, (size_t)nbs + 2, K->bex);
  kiln_affine_expr_t *tbT = kiln_affine_mul_const(x, K->bex[nbs], T),
                     *taT = kiln_affine_mul_const(x, K->bex[nbs + 1], T);
  kiln_affine_expr_t *tx = kiln_affine_dim(x, 0), *ty = kiln_affine_dim(x, 1);
  int64_t shi[3] = {7, p->nminor - 1, 0};
  memcpy(K->shi1, shi, sizeof(shi));
  memcpy(K->shi2, shi, sizeof(shi));
  K->nsym1 = K->nsym2 = p->keep ? 2 : 1;
  K->ntix = p->keep ? 3 : 2;
  if (v == 1) {
    kiln_affine_expr_t *trow = kiln_affine_add(x, kiln_affine_mul_const(x, ty, 8), kiln_affine_sym(x, 0));
    K->a1 = tx, K->b1 = trow, K->a2 = trow, K->b2 = tx;
  } else {
    K->a1 = kiln_affine_add(x, kiln_affine_mul_const(x, tx, v), kiln_affine_sym(x, 1));
    K->b1 = kiln_affine_add(x, kiln_affine_mul_const(x, ty, T / 4), kiln_affine_sym(x, 0));
    K->a2 = kiln_affine_add(
        x,
        kiln_affine_mul_const(
            x, kiln_affine_add(x, kiln_affine_mul_const(x, ty, 8), kiln_affine_sym(x, 0)), v),
        kiln_affine_sym(x, 1));
    K->b2 = kiln_affine_add(x, kiln_affine_mul_const(x, tx, v), kiln_affine_sym(x, 2));
    K->shi1[0] = T / 4 - 1, K->shi1[1] = v - 1, K->nsym1 = 2;
    K->shi2[1] = v - 1, K->shi2[2] = v - 1, K->nsym2 = 3;
  }
  tile_geom_t g = {x,      d,       nr,  p->a, p->bdim,   p->minor,
                   K->bex, K->bpos, taT, tbT,  p->na * T, p->nb * T};
  K->g = g;
}

/* Step 4: phase 1, the input tiles (and side outputs shaped like the input), then the
 * barrier. Returns the barrier op (its results: the tiles), NULL with the error recorded. */
static kiln_kir_op_t *tr_emit_phase1(tr_kernel_t *K) {
  kiln_hero_emit_t *h = K->h;
  tr_state_t *ts = K->ts;
  kiln_affine_ctx_t *x = K->x;
  kiln_kir_builder_t *b = K->b;
  const kiln_transpose_desc_t *d = &ts->ha.transpose;
  int nout = h->part.num_outputs, ntix = K->ntix, v = K->p->v;
  int64_t T = K->p->T;
  int64_t nin_elems = kiln_shape_num_elements(ts->heroes[0]->operands[0]->shape);
  kiln_indexing_map_t *map = kiln_hero_map(K->m, 3, K->dn, K->dhi, K->nsym1, K->shi1);
  kiln_affine_expr_t *coord[16];
  input_coords(&K->g, map, K->a1, K->b1, coord);
  kiln_affine_expr_t *lin_e = kiln_affine_linearize(x, coord, d->in_dims, (size_t)d->rank);
  kiln_indexing_map_add_result(map, lin_e);
  add_tile_index(x, map, K->b1, K->a1, v, K->p->keep);
  idx_table_t tab1 = {0};
  int nres = 1 + ntix;
  for (int hh = 0; hh < ts->nheroes; hh++)
    table_add(&tab1, x, map, lin_e, ts->heroes[hh]->operands[0]->shape, &nres);
  for (int o = 0; o < nout; o++)
    if (!on_path(ts, h->part.outputs[o].instr))
      table_add(&tab1, x, map, lin_e, h->part.outputs[o].instr->shape, &nres);
  kiln_indexing_map_simplify(map);
  kiln_kir_value_t *inits[2 * KILN_HERO_MAX_ROOTS];
  int64_t tdims[3] = {T, v == 1 ? 33 : T, K->p->nminor};
  int ni = 0;
  for (int hh = 0; hh < ts->nheroes; hh++) {
    inits[ni] = kiln_kir_alloc_shared(b, ts->heroes[hh]->shape->type, ntix, tdims);
    kiln_kir_value_set_name(inits[ni++], "tile");
  }
  int side[KILN_HERO_MAX_ROOTS], nside = 0;
  for (int o = 0; o < nout; o++) {
    const kiln_hlo_instruction_t *r = h->part.outputs[o].instr;
    if (on_path(ts, r)) continue;
    if (kiln_shape_num_elements(r->shape) != nin_elems) {
      kiln_elemental_fail(
          &h->fn, KILN_ERR_UNIMPLEMENTED("%s: side output %s not shaped like the input", K->c->name,
                                         r->name));
      return NULL;
    }
    side[nside++] = o;
    inits[ni++] = h->outs[o];
  }
  kiln_kir_op_t *loop = kiln_kir_loop(b, map, K->ids, 3, inits, (size_t)ni);
  if (!loop) return NULL;
  tab1.loop = loop;
  ts->tab = &tab1;
  kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
  size_t mark;
  kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop, 0), &mark);
  kiln_kir_value_t *lin = kiln_kir_loop_index(loop, 0);
  kiln_kir_value_t *tix[3] = {kiln_kir_loop_index(loop, 1), kiln_kir_loop_index(loop, 2),
                              K->p->keep ? kiln_kir_loop_index(loop, 3) : NULL};
  kiln_kir_value_t *ys[2 * KILN_HERO_MAX_ROOTS];
  bool ok = true;
  for (int hh = 0; hh < ts->nheroes && ok; hh++) {
    const kiln_hlo_instruction_t *opnd = ts->heroes[hh]->operands[0];
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
    kiln_kir_value_t *e =
        index_of(h, ts->tab, opnd->shape, lin, idx) ? kiln_hero_emit_value(h, opnd, idx) : NULL;
    ok = e != NULL;
    if (ok)
      ys[hh] = kiln_kir_insert(b, e, kiln_kir_loop_iter_arg(loop, (size_t)hh), tix, (size_t)ntix);
  }
  for (int s = 0; s < nside && ok; s++) {
    const kiln_hlo_instruction_t *r = h->part.outputs[side[s]].instr;
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
    kiln_kir_value_t *e =
        index_of(h, ts->tab, r->shape, lin, idx) ? kiln_hero_emit_value(h, r, idx) : NULL;
    ok = e != NULL;
    if (ok)
      ys[ts->nheroes + s] =
          kiln_kir_insert(b, e, kiln_kir_loop_iter_arg(loop, (size_t)(ts->nheroes + s)), idx,
                          (size_t)r->shape->rank);
  }
  ts->tab = NULL;
  kiln_elemental_exit(&h->fn, mark);
  if (ok) kiln_kir_yield(b, ys, (size_t)ni);
  kiln_kir_builder_exit(b);
  if (!ok) return NULL;
  kiln_kir_value_t *tiles[KILN_HERO_MAX_ROOTS];
  for (int hh = 0; hh < ts->nheroes; hh++) tiles[hh] = kiln_kir_op_result(loop, (size_t)hh);
  for (int s = 0; s < nside; s++)
    h->outs[side[s]] = kiln_kir_op_result(loop, (size_t)(ts->nheroes + s));
  return kiln_kir_barrier(b, tiles, (size_t)ts->nheroes);
}

/* Step 5: phase 2, the transposed writes through the consumers, reading the tiles `bar`
 * gives; then the kernel's return. False with the error recorded. */
static bool tr_emit_phase2(tr_kernel_t *K, kiln_kir_op_t *bar) {
  kiln_hero_emit_t *h = K->h;
  tr_state_t *ts = K->ts;
  kiln_affine_ctx_t *x = K->x;
  kiln_kir_builder_t *b = K->b;
  const kiln_transpose_desc_t *d = &ts->ha.transpose;
  int nr = d->rank, nout = h->part.num_outputs, ntix = K->ntix;
  kiln_indexing_map_t *map2 = kiln_hero_map(K->m, 3, K->dn, K->dhi, K->nsym2, K->shi2);
  kiln_affine_expr_t *c2[16], *oc[16];
  input_coords(&K->g, map2, K->a2, K->b2, c2);
  for (int i = 0; i < nr; i++) oc[i] = c2[d->perm[i]];
  kiln_affine_expr_t *lin2_e = kiln_affine_linearize(x, oc, d->out_dims, (size_t)nr);
  kiln_indexing_map_add_result(map2, lin2_e);
  add_tile_index(x, map2, K->b2, K->a2, K->p->v, K->p->keep);
  idx_table_t tab2 = {0};
  int nres2 = 1 + ntix;
  for (int i = 0; i < ts->npath; i++) {
    const kiln_hlo_instruction_t *p = ts->path[i];
    if (kiln_shape_is_array(p->shape)) table_add(&tab2, x, map2, lin2_e, p->shape, &nres2);
  }
  kiln_indexing_map_simplify(map2);
  /* Every output on a path, by output index: a root the tuple lists twice is two outputs,
   * each written (eval_path's memo computes its value once). */
  int tro[KILN_HERO_MAX_ROOTS], ntr = 0;
  kiln_kir_value_t *inits2[KILN_HERO_MAX_ROOTS];
  for (int o = 0; o < nout; o++) {
    if (!on_path(ts, h->part.outputs[o].instr)) continue;
    tro[ntr] = o;
    inits2[ntr++] = h->outs[o];
  }
  kiln_kir_op_t *loop2 = kiln_kir_loop(b, map2, K->ids, 3, inits2, (size_t)ntr);
  if (!loop2) return false;
  tab2.loop = loop2;
  ts->tab = &tab2;
  kiln_kir_builder_enter(b, kiln_kir_op_region(loop2, 0));
  size_t mark;
  kiln_elemental_enter(&h->fn, kiln_kir_op_region(loop2, 0), &mark);
  kiln_kir_value_t *lin2 = kiln_kir_loop_index(loop2, 0);
  kiln_kir_value_t *rix[3] = {kiln_kir_loop_index(loop2, 1), kiln_kir_loop_index(loop2, 2),
                              K->p->keep ? kiln_kir_loop_index(loop2, 3) : NULL};
  kiln_kir_value_t *tv[KILN_HERO_MAX_ROOTS];
  for (int hh = 0; hh < ts->nheroes; hh++)
    tv[hh] = kiln_kir_extract(b, kiln_kir_op_result(bar, (size_t)hh), rix, (size_t)ntix);
  memo_t *mm = kiln_calloc(1, sizeof(*mm));
  kiln_kir_value_t *ys2[KILN_HERO_MAX_ROOTS];
  bool ok = true;
  for (int k = 0; k < ntr && ok; k++) {
    const kiln_hlo_instruction_t *r = h->part.outputs[tro[k]].instr;
    kiln_kir_value_t *e = eval_path(h, ts, r, lin2, tv, mm);
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
    ok = e && index_of(h, ts->tab, r->shape, lin2, idx);
    if (ok)
      ys2[k] = kiln_kir_insert(b, e, kiln_kir_loop_iter_arg(loop2, (size_t)k), idx,
                               (size_t)r->shape->rank);
  }
  kiln_free(mm);
  ts->tab = NULL;
  kiln_elemental_exit(&h->fn, mark);
  if (ok) kiln_kir_yield(b, ys2, (size_t)ntr);
  kiln_kir_builder_exit(b);
  if (!ok) return false;
  for (int k = 0; k < ntr; k++) h->outs[tro[k]] = kiln_kir_op_result(loop2, (size_t)k);
  kiln_kir_return(b, h->outs, (size_t)nout);
  return true;
}

kiln_status kiln_transpose_kernel_emit(const kiln_hlo_computation_t *c,
                                       const kiln_codegen_compile_options_t *opts,
                                       kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("transpose emitter: no computation");
  tr_state_t *ts = kiln_calloc(1, sizeof(*ts));
  bool keep = false;
  kiln_status st = tr_analyze(c, ts, &keep);
  if (st) {
    kiln_free(ts);
    return st;
  }
  tr_plan_t plan;
  tr_plan(ts, keep, opts, &plan);
  int64_t block[3] = {32, 4, 1}, grid[3] = {plan.nbl, 1, 1};
  kiln_hero_emit_t h;
  st = kiln_hero_emit_begin(&h, c, opts, tr_is_root, ts, block, grid, out);
  if (st) {
    kiln_free(ts);
    return st;
  }
  tr_kernel_t *K = kiln_calloc(1, sizeof(*K));
  K->c = c, K->h = &h, K->ts = ts, K->p = &plan, K->m = out->kir, K->x = out->kir->ctx, K->b = &h.b;
  tr_geometry(K);
  kiln_kir_op_t *bar = tr_emit_phase1(K);
  if (bar && tr_emit_phase2(K, bar)) {
    /* Both phases only move data: on the host the y thread loops stay rolled and the x
     * vector loops unroll under them (with the row order above, f32[4096,4096] went from
     * ~0.8x to ~1.0x a C tile loop; DESIGN.md "Host lowering"). */
    kiln_kir_func_t *kf = kiln_kir_module_kernel(out->kir);
    if (kf) kf->host_rolled_thread_loops = true;
  }
  kiln_free(K);
  kiln_free(ts);
  return kiln_hero_emit_finish(&h, NULL, opts);
}
