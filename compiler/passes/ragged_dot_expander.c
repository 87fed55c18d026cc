/* ragged_dot_expander: ragged-dot(lhs, rhs, group_sizes) -> dense HLO the dot and loop
 * emitters compile, computing what the reference evaluator computes (eval_extra.c).
 *
 * lhs_ragged_dims={d} names the ragged lhs dimension; its mode is decided like the
 * evaluator (and ragged_dot_general) does:
 *   - ragged non-contracting (d is neither batch nor contracting; rhs_group_dims={r}):
 *       dot(E(lhs), rhs) contracting the group dimension with rhs dimension r
 *   - ragged contracting (d is contracting; rhs dimension rc of the same pair is ragged too):
 *       dot(E(lhs), E(rhs)) with the group dimension as the leading batch dimension
 *   - ragged batch (d is a batch dimension): the plain dot
 * where E(x) densifies x into [g, x dims...]: element (j, idx) is x[idx] when idx[d] lies
 * in group j, zero otherwise. Groups are consecutive runs of the ragged dimension: group j
 * is [start_j, end_j) with end = the prefix sums of group_sizes (in s64) along its last
 * dimension and start = end - size; group_sizes of rank > 1 picks the sizes of each element
 * by its "prefix" dimensions (batch dimensions, then the dimensions before d of its kind).
 * An index in several groups (negative sizes) belongs to the first, like the evaluator:
 *
 *   in[j, idx]  = start_j <= idx[d] && idx[d] < end_j          (iota, compare, and)
 *   first[idx]  = reduce(min, select(in, iota_j, g)) over j
 *   E(x)        = select(iota_j == first, broadcast(x), 0)
 *
 * Forms the evaluator rejects are left as they are. */
#include <stdlib.h>
#include <string.h>

#include "compiler/passes/expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

#define MAX_RANK 30

enum ragged_mode { RAGGED_NON_CONTRACTING, RAGGED_CONTRACTING, RAGGED_BATCH };

/* The decoded ragged dimension numbers of one ragged-dot. */
typedef struct ragged_plan {
  enum ragged_mode mode;
  int64_t rd;     /* lhs ragged dim */
  int64_t rg;     /* rhs group dim (non-contracting mode) */
  int ci;         /* index of rd among the contracting dims (contracting mode) */
  int64_t g;      /* number of groups */
  int np;         /* lhs prefix dims indexing group_sizes */
  int64_t prefix[MAX_RANK];
  int nrp;        /* rhs prefix dims (contracting mode) */
  int64_t rprefix[MAX_RANK];
} ragged_plan_t;

/* `{1,2}` -> out; the count, or -1 when malformed or longer than cap. */
static int parse_list(const char *v, int64_t *out, int cap) {
  if (!v || *v != '{') return -1;
  const char *p = v + 1;
  int n = 0;
  while (*p == ' ') p++;
  if (*p == '}') return 0;
  for (;;) {
    char *end = NULL;
    long long x = strtoll(p, &end, 10);
    if (end == p || n >= cap) return -1;
    out[n++] = x;
    for (p = end; *p == ' '; p++) {}
    if (*p == '}') return n;
    if (*p != ',') return -1;
    p++;
  }
}

static bool has(const int64_t *v, int n, int64_t x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

/* Decodes and checks `in` like the evaluator; false for forms it rejects. */
static bool plan_ragged(const kiln_hlo_instruction_t *in, ragged_plan_t *p) {
  memset(p, 0, sizeof *p);
  if (in->opcode != KILN_OP_RAGGED_DOT || in->num_operands != 3) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  if (!kiln_shape_is_array(in->shape) || kiln_shape_is_dynamic(in->shape)) return false;
  for (int i = 0; i < 3; i++) {
    const kiln_shape_t *s = in->operands[i]->shape;
    if (!kiln_shape_is_array(s) || kiln_shape_is_dynamic(s) || s->rank > MAX_RANK) return false;
  }
  const kiln_shape_t *ls = in->operands[0]->shape, *rs = in->operands[1]->shape,
                     *gs = in->operands[2]->shape;
  if (!kiln_elem_type_is_integral(gs->type) || gs->rank < 1) return false;
  int64_t lr[4], rg[4];
  int nlr = parse_list(kiln_hlo_instruction_raw_attr(in, "lhs_ragged_dims"), lr, 4);
  const char *rgt = kiln_hlo_instruction_raw_attr(in, "rhs_group_dims");
  int nrg = rgt ? parse_list(rgt, rg, 4) : 0;
  if (nlr != 1 || nrg < 0 || nrg > 1) return false;
  const kiln_dot_dnums_t *dn = &in->dot_dnums;
  const int64_t *lb = dn->lhs_batch.v, *rb = dn->rhs_batch.v, *lc = dn->lhs_contracting.v;
  int nb = dn->lhs_batch.n, ncn = dn->lhs_contracting.n;
  if (dn->rhs_batch.n != nb || dn->rhs_contracting.n != ncn || nb + ncn > MAX_RANK - 2) return false;
  p->rd = lr[0];
  if (p->rd < 0 || p->rd >= ls->rank) return false;
  p->g = gs->dims[gs->rank - 1];
  p->ci = -1;
  for (int i = 0; i < ncn; i++)
    if (lc[i] == p->rd) p->ci = i;
  if (p->ci >= 0) {
    p->mode = RAGGED_CONTRACTING;
    for (int i = 0; i < nb; i++) p->prefix[p->np++] = lb[i], p->rprefix[p->nrp++] = rb[i];
    for (int i = 0; i < p->ci; i++)
      p->prefix[p->np++] = lc[i], p->rprefix[p->nrp++] = dn->rhs_contracting.v[i];
    if (nrg) return false;
  } else if (has(lb, nb, p->rd)) {
    p->mode = RAGGED_BATCH;
    for (int i = 0; i < nb && lb[i] != p->rd; i++) p->prefix[p->np++] = lb[i];
    if (nrg) return false;
  } else {
    p->mode = RAGGED_NON_CONTRACTING;
    for (int i = 0; i < nb; i++) p->prefix[p->np++] = lb[i];
    for (int d = 0; d < p->rd; d++)
      if (!has(lb, nb, d) && !has(lc, ncn, d)) p->prefix[p->np++] = d;
    if (nrg != 1 || rg[0] < 0 || rg[0] >= rs->rank || rs->dims[rg[0]] != p->g) return false;
    p->rg = rg[0];
  }
  if (gs->rank != 1) {
    if (gs->rank != p->np + 1) return false;
    for (int k = 0; k < p->np; k++)
      if (gs->dims[k] != ls->dims[p->prefix[k]]) return false;
    if (p->mode == RAGGED_CONTRACTING)
      for (int k = 0; k < p->nrp; k++)
        if (gs->dims[k] != rs->dims[p->rprefix[k]]) return false;
  }
  return true;
}

static bool expandable(const kiln_hlo_instruction_t *in) {
  ragged_plan_t p;
  return plan_ragged(in, &p);
}

/* The prefix sums of the s64 group sizes `sizes` [P..., g] along the last dimension. */
static kiln_hlo_instruction_t *prefix_sums(kiln_builder_t *b, kiln_hlo_instruction_t *sizes,
                                           kiln_hlo_computation_t *add) {
  const kiln_shape_t *s = sizes->shape;
  int r = s->rank;
  int64_t dims[MAX_RANK + 2], map[MAX_RANK + 1];
  for (int k = 0; k < r; k++) dims[k] = s->dims[k], map[k] = k;
  dims[r] = s->dims[r - 1];
  map[r - 1] = r; /* sizes[p, i] at [p, j, i] */
  kiln_hlo_instruction_t *all = kiln_builder_broadcast(b, sizes, r + 1, dims, map);
  kiln_hlo_instruction_t *i = kiln_builder_iota(b, KILN_S64, r + 1, dims, r);
  kiln_hlo_instruction_t *j = kiln_builder_iota(b, KILN_S64, r + 1, dims, r - 1);
  kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, KILN_S64, 0);
  kiln_hlo_instruction_t *upto = kiln_builder_select(b, kiln_builder_compare(b, KILN_CMP_LE, i, j), all,
                                                     kiln_builder_splat(b, zero, all));
  int64_t last = r;
  return kiln_builder_reduce(b, upto, zero, 1, &last, add);
}

/* E(x) (see the file comment): x [D] densified into [g, D] along its ragged dim `rd`, with
 * `starts`/`ends` [P..., g] selected by x's dims `prefix` (all of them when P is empty). */
static kiln_hlo_instruction_t *densify(kiln_builder_t *b, kiln_hlo_instruction_t *x, int64_t rd,
                                       const int64_t *prefix, kiln_hlo_instruction_t *starts,
                                       kiln_hlo_instruction_t *ends, int64_t g,
                                       kiln_hlo_computation_t *min) {
  const kiln_shape_t *xs = x->shape;
  int r = xs->rank;
  int64_t dims[MAX_RANK + 1], map[MAX_RANK + 1];
  dims[0] = g;
  for (int k = 0; k < r; k++) dims[k + 1] = xs->dims[k], map[k] = k + 1;
  kiln_hlo_instruction_t *xe = kiln_builder_broadcast(b, x, r + 1, dims, map);
  /* starts/ends [P..., g] -> [g, P...] -> [g, D]: g at 0, P dim k at prefix[k] + 1 */
  int gr = starts ? starts->shape->rank : 1;
  int64_t perm[MAX_RANK + 1];
  perm[0] = gr - 1;
  map[0] = 0;
  for (int k = 0; k < gr - 1; k++) perm[k + 1] = k, map[k + 1] = prefix[k] + 1;
  if (gr > 1) {
    starts = kiln_builder_transpose(b, starts, perm);
    ends = kiln_builder_transpose(b, ends, perm);
  }
  kiln_hlo_instruction_t *sb = kiln_builder_broadcast(b, starts, r + 1, dims, map);
  kiln_hlo_instruction_t *eb = kiln_builder_broadcast(b, ends, r + 1, dims, map);
  kiln_hlo_instruction_t *v = kiln_builder_iota(b, KILN_S64, r + 1, dims, (int)rd + 1);
  kiln_hlo_instruction_t *j = kiln_builder_iota(b, KILN_S64, r + 1, dims, 0);
  kiln_hlo_instruction_t *in = kiln_builder_binary(b, KILN_OP_AND, kiln_builder_compare(b, KILN_CMP_LE, sb, v),
                                                   kiln_builder_compare(b, KILN_CMP_LT, v, eb));
  kiln_hlo_instruction_t *none = kiln_builder_const_u64(b, KILN_S64, (uint64_t)g);
  kiln_hlo_instruction_t *cand = kiln_builder_select(b, in, j, kiln_builder_splat(b, none, j));
  int64_t gdim = 0;
  kiln_hlo_instruction_t *first = kiln_builder_reduce(b, cand, none, 1, &gdim, min);
  for (int k = 0; k < r; k++) map[k] = k + 1;
  kiln_hlo_instruction_t *fb = kiln_builder_broadcast(b, first, r + 1, dims, map);
  kiln_hlo_instruction_t *mine = kiln_builder_compare(b, KILN_CMP_EQ, j, fb);
  kiln_hlo_instruction_t *zero = kiln_builder_const_f64(b, xs->type, 0);
  if (kiln_elem_type_is_integral(xs->type) || xs->type == KILN_PRED)
    zero = kiln_builder_const_u64(b, xs->type, 0);
  return kiln_builder_select(b, mine, xe, kiln_builder_splat(b, zero, xe));
}

/* dot(l, r) of `shape` with the given dimension numbers (copied into the arena). */
static kiln_hlo_instruction_t *make_dot(kiln_builder_t *b, kiln_hlo_instruction_t *l,
                                        kiln_hlo_instruction_t *r, kiln_shape_t *shape,
                                        const int64_t *lb, const int64_t *rb, int nb,
                                        const int64_t *lc, const int64_t *rc, int nc) {
  kiln_hlo_instruction_t *ops[2] = {l, r};
  kiln_hlo_instruction_t *dot = kiln_builder_op(b, KILN_OP_DOT, shape, 2, ops);
  int64_t *v = dot ? kiln_arena_alloc(&b->m->arena, sizeof(int64_t) * (size_t)(2 * nb + 2 * nc + 1)) : NULL;
  if (!v) {
    b->failed = true;
    return NULL;
  }
  kiln_i64_list_t *lists[4] = {&dot->dot_dnums.lhs_batch, &dot->dot_dnums.rhs_batch,
                               &dot->dot_dnums.lhs_contracting, &dot->dot_dnums.rhs_contracting};
  const int64_t *src[4] = {lb, rb, lc, rc};
  int n[4] = {nb, nb, nc, nc};
  for (int i = 0; i < 4; i++) {
    lists[i]->n = n[i];
    lists[i]->v = n[i] ? v : NULL;
    if (n[i]) memcpy(v, src[i], sizeof(int64_t) * (size_t)n[i]);
    v += n[i];
  }
  dot->has_dot_dnums = true;
  return dot;
}

static kiln_status expand(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  ragged_plan_t p;
  plan_ragged(in, &p);
  kiln_hlo_module_t *m = in->parent->module;
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, in->name, in->shape->has_layout);
  kiln_hlo_instruction_t *lhs = in->operands[0], *rhs = in->operands[1], *gs = in->operands[2];
  const kiln_dot_dnums_t *dn = &in->dot_dnums;
  const int64_t *lb = dn->lhs_batch.v, *rb = dn->rhs_batch.v, *lc = dn->lhs_contracting.v,
                *rc = dn->rhs_contracting.v;
  int nb = dn->lhs_batch.n, nc = dn->lhs_contracting.n;
  kiln_hlo_instruction_t *dot = NULL;
  if (p.mode == RAGGED_BATCH) {
    dot = make_dot(&b, lhs, rhs, in->shape, lb, rb, nb, lc, rc, nc);
  } else {
    kiln_hlo_computation_t *add = kiln_builder_scalar_computation(m, "ragged_add", KILN_OP_ADD, KILN_S64);
    kiln_hlo_computation_t *min = kiln_builder_scalar_computation(m, "ragged_min", KILN_OP_MINIMUM, KILN_S64);
    if (!add || !min) b.failed = true;
    kiln_hlo_instruction_t *sizes = b.failed ? NULL : kiln_builder_convert(&b, gs, KILN_S64);
    kiln_hlo_instruction_t *ends = sizes ? prefix_sums(&b, sizes, add) : NULL;
    kiln_hlo_instruction_t *starts = kiln_builder_binary(&b, KILN_OP_SUBTRACT, ends, sizes);
    kiln_hlo_instruction_t *le = densify(&b, lhs, p.rd, p.prefix, starts, ends, p.g, min);
    int64_t a[MAX_RANK + 1], bb[MAX_RANK + 1], c[MAX_RANK + 1], e[MAX_RANK + 1];
    if (p.mode == RAGGED_NON_CONTRACTING) {
      for (int i = 0; i < nb; i++) a[i] = lb[i] + 1;
      for (int i = 0; i < nc; i++) c[i] = lc[i] + 1, e[i] = rc[i];
      c[nc] = 0;
      e[nc] = p.rg;
      dot = le ? make_dot(&b, le, rhs, in->shape, a, rb, nb, c, e, nc + 1) : NULL;
    } else {
      kiln_hlo_instruction_t *re =
          densify(&b, rhs, rc[p.ci], p.rprefix, starts, ends, p.g, min);
      a[0] = bb[0] = 0;
      for (int i = 0; i < nb; i++) a[i + 1] = lb[i] + 1, bb[i + 1] = rb[i] + 1;
      for (int i = 0; i < nc; i++) c[i] = lc[i] + 1, e[i] = rc[i] + 1;
      dot = le && re ? make_dot(&b, le, re, in->shape, a, bb, nb + 1, c, e, nc) : NULL;
    }
  }
  if (!dot || b.failed)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "ragged_dot_expander: out of memory expanding '%s'",
                            in->name);
  kiln_pass_replace_instruction(in, dot, effects);
  return NULL;
}

kiln_status kiln_pass_ragged_dot_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  return kiln_expander_run(m, expandable, expand, changed);
}
