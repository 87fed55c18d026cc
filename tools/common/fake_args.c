/* Deterministic fake arguments; see fake_args.h for the value conventions. */
#include "tools/common/fake_args.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "compiler/hlo/collective_groups.h"
#include "compiler/hlo/numeric.h"

#define FAKE_MAX_PATH 16      /* tuple nesting followed through */
#define FAKE_MAX_DEPTH 64     /* walk recursion */
#define FAKE_MAX_STEPS 200000 /* user edges visited per leaf */

void kiln_fake_args_options_init(kiln_fake_args_options_t *o) {
  memset(o, 0, sizeof *o);
  o->seed = 42;
  o->float_lo = -1.0;
  o->float_hi = 1.0;
  o->int_lo = -8;
  o->int_hi = 7;
  o->uint_hi = 15;
  o->index_bounds = true;
}

/* ---- random numbers: splitmix64 ---- */

static uint64_t splitmix64_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double rand_unit(uint64_t *state) { /* [0, 1) */
  return (double)(splitmix64_next(state) >> 11) * 0x1.0p-53;
}

/* Uniform in [lo, hi] (inclusive) for hi >= lo. */
static int64_t rand_range(uint64_t *state, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
  uint64_t r = splitmix64_next(state);
  if (span == 0) return (int64_t)r; /* the whole 64-bit range */
  return (int64_t)((uint64_t)lo + r % span);
}

static uint64_t param_stream(uint64_t seed, int param_number) {
  uint64_t s = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(param_number + 1));
  splitmix64_next(&s);
  return s;
}

/* ---- index-use analysis ---- */

/* The identity a reducer gives its init value (fake_args.h). */
typedef enum fake_identity {
  FAKE_ID_NONE,
  FAKE_ID_ZERO,    /* add, or, xor */
  FAKE_ID_ONE,     /* multiply */
  FAKE_ID_LOWEST,  /* maximum: -inf, or the type's lowest value */
  FAKE_ID_HIGHEST, /* minimum: +inf, or the type's highest value */
  FAKE_ID_ONES,    /* and: true, all bits set */
  FAKE_ID_CONFLICT /* init of reducers that disagree, or of one kiln does not recognize */
} fake_identity_t;

typedef struct fake_walk {
  bool found;
  int64_t bound;
  int64_t steps;
  fake_identity_t identity;
} fake_walk_t;

static void walk_note(fake_walk_t *w, int64_t bound) {
  if (bound < 0) bound = 0;
  if (!w->found || bound < w->bound) w->bound = bound;
  w->found = true;
}

static int64_t dim_or(const kiln_shape_t *s, int64_t d, int64_t dflt) {
  if (!s || !kiln_shape_is_array(s) || d < 0 || d >= s->rank) return dflt;
  return s->dims[d];
}

static bool list_has(const kiln_i64_list_t *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

static void note_gather(fake_walk_t *w, const kiln_hlo_instruction_t *g) {
  if (!g->has_gather_dnums || g->num_operands < 2) return;
  const kiln_shape_t *op = g->operands[0]->shape;
  const kiln_i64_list_t *map = &g->gather_dnums.start_index_map;
  for (int j = 0; j < map->n; j++) {
    int64_t d = map->v[j];
    if (!kiln_shape_is_array(op) || d < 0 || d >= op->rank) continue;
    int64_t size = d < g->gather_slice_sizes.n ? g->gather_slice_sizes.v[d] : 1;
    walk_note(w, op->dims[d] - size);
  }
}

static void note_scatter(fake_walk_t *w, const kiln_hlo_instruction_t *s) {
  if (!s->has_scatter_dnums || s->num_operands < 3 || s->num_operands % 2 == 0) return;
  int n = (s->num_operands - 1) / 2;
  const kiln_shape_t *op = s->operands[0]->shape;
  const kiln_shape_t *upd = s->operands[n + 1]->shape;
  if (!kiln_shape_is_array(op) || !kiln_shape_is_array(upd)) return;
  const kiln_scatter_dnums_t *dn = &s->scatter_dnums;
  for (int j = 0; j < dn->scatter_dims_to_operand_dims.n; j++) {
    int64_t d = dn->scatter_dims_to_operand_dims.v[j];
    if (d < 0 || d >= op->rank) continue;
    /* Window dims of the operand, ascending, pair up with update_window_dims in order. */
    int64_t window = 1;
    if (!list_has(&dn->inserted_window_dims, d) && !list_has(&dn->input_batching_dims, d)) {
      int k = 0;
      for (int64_t e = 0; e < d; e++)
        if (!list_has(&dn->inserted_window_dims, e) && !list_has(&dn->input_batching_dims, e)) k++;
      if (k < dn->update_window_dims.n) window = dim_or(upd, dn->update_window_dims.v[k], 1);
    }
    walk_note(w, op->dims[d] - window);
  }
}

static void walk_value(fake_walk_t *w, const kiln_hlo_instruction_t *v, const int64_t *path,
                       int plen, int depth);

static const kiln_hlo_instruction_t *reducer_param(const kiln_hlo_computation_t *r, int i) {
  return i >= 0 && i < r->num_parameters ? r->parameters[i] : NULL;
}

/* The identity of reducer `r` for its accumulator j of n (parameters j and n + j, result j):
 * its root (or the root tuple's element j) must be add / multiply / maximum / minimum / and /
 * or / xor of exactly those two parameters. */
static fake_identity_t reducer_identity(const kiln_hlo_computation_t *r, int j, int n) {
  if (!r || !r->root || r->num_parameters != 2 * n) return FAKE_ID_CONFLICT;
  const kiln_hlo_instruction_t *x = r->root;
  if (x->opcode == KILN_OP_TUPLE)
    x = j < x->num_operands ? x->operands[j] : NULL;
  else if (n != 1)
    return FAKE_ID_CONFLICT;
  if (!x || x->num_operands != 2) return FAKE_ID_CONFLICT;
  const kiln_hlo_instruction_t *a = reducer_param(r, j), *b = reducer_param(r, n + j);
  if (!((x->operands[0] == a && x->operands[1] == b) ||
        (x->operands[0] == b && x->operands[1] == a)))
    return FAKE_ID_CONFLICT;
  switch (x->opcode) {
    case KILN_OP_ADD:
    case KILN_OP_OR:
    case KILN_OP_XOR:
      return FAKE_ID_ZERO;
    case KILN_OP_MULTIPLY:
      return FAKE_ID_ONE;
    case KILN_OP_MAXIMUM:
      return FAKE_ID_LOWEST;
    case KILN_OP_MINIMUM:
      return FAKE_ID_HIGHEST;
    case KILN_OP_AND:
      return FAKE_ID_ONES;
    default:
      return FAKE_ID_CONFLICT;
  }
}

static void note_init(fake_walk_t *w, fake_identity_t id) {
  if (w->identity == FAKE_ID_NONE)
    w->identity = id;
  else if (w->identity != id)
    w->identity = FAKE_ID_CONFLICT;
}

/* Operand k of reduce / reduce-window `u` (inputs, then as many inits): an init's identity. */
static void note_reduce_init(fake_walk_t *w, const kiln_hlo_instruction_t *u, int k) {
  int n = u->num_operands / 2;
  if (u->num_operands % 2 != 0 || k < n) return;
  note_init(w, reducer_identity(kiln_hlo_instruction_called(u, "to_apply"), k - n, n));
}

static void walk_into(fake_walk_t *w, const kiln_hlo_computation_t *c, int64_t param,
                      const int64_t *path, int plen, int depth) {
  if (!c || param < 0 || param >= c->num_parameters || !c->parameters[param]) return;
  walk_value(w, c->parameters[param], path, plen, depth + 1);
}

/* One use of the value at `path` inside `v`'s result, as operand `k` of `u`. */
static void walk_use(fake_walk_t *w, const kiln_hlo_instruction_t *u, int k, const int64_t *path,
                     int plen, int depth) {
  switch (u->opcode) {
    case KILN_OP_GET_TUPLE_ELEMENT:
      if (plen > 0 && u->tuple_index == path[0]) walk_value(w, u, path + 1, plen - 1, depth + 1);
      return;
    case KILN_OP_TUPLE: {
      if (plen >= FAKE_MAX_PATH) return;
      int64_t p[FAKE_MAX_PATH + 1];
      p[0] = k;
      memcpy(p + 1, path, sizeof(int64_t) * (size_t)plen);
      walk_value(w, u, p, plen + 1, depth + 1);
      return;
    }
    case KILN_OP_WHILE:
      walk_into(w, kiln_hlo_instruction_called(u, "body"), 0, path, plen, depth);
      walk_into(w, kiln_hlo_instruction_called(u, "condition"), 0, path, plen, depth);
      walk_value(w, u, path, plen, depth + 1);
      return;
    case KILN_OP_FUSION:
      walk_into(w, kiln_hlo_instruction_called(u, "calls"), k, path, plen, depth);
      return;
    case KILN_OP_CALL:
      walk_into(w, kiln_hlo_instruction_called(u, "to_apply"), k, path, plen, depth);
      return;
    case KILN_OP_ASYNC_START:
      walk_into(w, kiln_hlo_instruction_called(u, "calls"), k, path, plen, depth);
      return;
    case KILN_OP_CONDITIONAL: {
      if (k == 0) return;
      const kiln_hlo_computation_t *branch = NULL;
      for (int g = 0; g < u->num_called_groups; g++) {
        const kiln_called_group_t *grp = &u->called_groups[g];
        if (strcmp(grp->key, "branch_computations") == 0 && k - 1 < grp->n)
          branch = grp->comps[k - 1];
        else if (strcmp(grp->key, "true_computation") == 0 && k == 1 && grp->n > 0)
          branch = grp->comps[0];
        else if (strcmp(grp->key, "false_computation") == 0 && k == 2 && grp->n > 0)
          branch = grp->comps[0];
      }
      walk_into(w, branch, 0, path, plen, depth);
      return;
    }
    default:
      break;
  }
  if (plen != 0) return; /* the rest only see whole arrays */
  switch (u->opcode) {
    case KILN_OP_CONVERT:
    case KILN_OP_RESHAPE:
    case KILN_OP_BROADCAST:
    case KILN_OP_BITCAST:
    case KILN_OP_COPY:
    case KILN_OP_TRANSPOSE:
    case KILN_OP_SLICE:
    case KILN_OP_REVERSE:
    case KILN_OP_CONCATENATE:
      walk_value(w, u, path, 0, depth + 1);
      return;
    case KILN_OP_GATHER:
      if (k == 1) note_gather(w, u);
      return;
    case KILN_OP_SCATTER:
      if (u->num_operands % 2 == 1 && k == (u->num_operands - 1) / 2) note_scatter(w, u);
      return;
    case KILN_OP_REDUCE:
    case KILN_OP_REDUCE_WINDOW:
      note_reduce_init(w, u, k);
      return;
    case KILN_OP_SELECT_AND_SCATTER: /* (operand, source, init), combined with `scatter` */
      if (k == 2) note_init(w, reducer_identity(kiln_hlo_instruction_called(u, "scatter"), 0, 1));
      return;
    case KILN_OP_DYNAMIC_SLICE: {
      if (k < 1) return;
      const kiln_shape_t *op = u->operands[0]->shape;
      const kiln_shape_t *idx = u->operands[k]->shape;
      if (!kiln_shape_is_array(op)) return;
      if (idx->rank == 1 && u->num_operands == 2) { /* old form: one vector of starts */
        for (int64_t d = 0; d < op->rank; d++) walk_note(w, op->dims[d] - dim_or(u->shape, d, 1));
      } else {
        int64_t d = k - 1;
        int64_t size =
            d < u->dynamic_slice_sizes.n ? u->dynamic_slice_sizes.v[d] : dim_or(u->shape, d, 1);
        if (d < op->rank) walk_note(w, op->dims[d] - size);
      }
      return;
    }
    case KILN_OP_DYNAMIC_UPDATE_SLICE: {
      if (k < 2) return;
      const kiln_shape_t *op = u->operands[0]->shape;
      const kiln_shape_t *upd = u->operands[1]->shape;
      const kiln_shape_t *idx = u->operands[k]->shape;
      if (!kiln_shape_is_array(op) || !kiln_shape_is_array(upd)) return;
      if (idx->rank == 1 && u->num_operands == 3) {
        for (int64_t d = 0; d < op->rank; d++) walk_note(w, op->dims[d] - dim_or(upd, d, 1));
      } else if (k - 2 < op->rank) {
        walk_note(w, op->dims[k - 2] - dim_or(upd, k - 2, 1));
      }
      return;
    }
    default:
      return;
  }
}

static void walk_value(fake_walk_t *w, const kiln_hlo_instruction_t *v, const int64_t *path,
                       int plen, int depth) {
  if (depth > FAKE_MAX_DEPTH) return;
  for (size_t i = 0; i < v->users.len; i++) {
    const kiln_hlo_instruction_t *u = v->users.data[i];
    for (int k = 0; k < u->num_operands; k++) {
      if (u->operands[k] != v) continue;
      if (++w->steps > FAKE_MAX_STEPS) return;
      walk_use(w, u, k, path, plen, depth);
    }
  }
}

/* Finds the index path of flattened leaf `leaf` in `s`; returns its shape or NULL. */
static const kiln_shape_t *leaf_path(const kiln_shape_t *s, int *leaf, int64_t *path, int *plen) {
  if (!kiln_shape_is_tuple(s)) {
    if ((*leaf)-- == 0) return s;
    return NULL;
  }
  if (*plen >= FAKE_MAX_PATH) return NULL;
  for (int i = 0; i < s->num_elements; i++) {
    path[*plen] = i;
    (*plen)++;
    const kiln_shape_t *r = leaf_path(s->elements[i], leaf, path, plen);
    if (r) return r;
    (*plen)--;
  }
  return NULL;
}

/* Walks the uses of the value at `path` in `param`: its index bound (when it feeds index
 * operands) and the identity its reduction-init uses ask for. */
static void analyse_uses(const kiln_hlo_instruction_t *param, const int64_t *path, int plen,
                         fake_walk_t *w) {
  memset(w, 0, sizeof(*w));
  walk_value(w, param, path, plen, 0);
}

static bool index_bound_at(const kiln_hlo_instruction_t *param, const int64_t *path, int plen,
                           int64_t *out) {
  fake_walk_t w;
  analyse_uses(param, path, plen, &w);
  if (w.found) *out = w.bound;
  return w.found;
}

bool kiln_fake_args_index_bound(const kiln_hlo_module_t *m, int param_number, int leaf,
                                int64_t *out_max_start) {
  const kiln_hlo_computation_t *e = m ? m->entry : NULL;
  if (!e || param_number < 0 || param_number >= e->num_parameters || leaf < 0) return false;
  const kiln_hlo_instruction_t *p = e->parameters[param_number];
  if (!p) return false;
  int64_t path[FAKE_MAX_PATH];
  int plen = 0;
  if (!leaf_path(p->shape, &leaf, path, &plen)) return false;
  return index_bound_at(p, path, plen, out_max_start);
}

/* ---- filling ---- */

/* The lowest (or, with `highest`, the highest) value of float type t: an infinity where t
 * has one, else its largest finite magnitude, found among its bit patterns (narrow types). */
static double float_extreme(kiln_elem_type_t t, bool highest) {
  double inf = highest ? INFINITY : -INFINITY;
  int bits = kiln_elem_type_bits(t);
  if (bits > 16) return inf;
  double best = NAN;
  for (uint32_t b = 0; b < (UINT32_C(1) << bits); b++) {
    double v = kiln_narrow_to_f64(t, b);
    if (isnan(v)) continue;
    if (isinf(v) && v == inf) return inf;
    if (isnan(best) || (highest ? v > best : v < best)) best = v;
  }
  return best;
}

/* Every element of `l` set to identity `id` (fake_args.h). */
static void fill_identity(kiln_literal_t *l, fake_identity_t id) {
  kiln_elem_type_t t = l->shape->type;
  int bits = kiln_elem_type_bits(t);
  bool cplx = kiln_elem_type_is_complex(t), flt = kiln_elem_type_is_float(t);
  bool sgn = kiln_elem_type_is_signed_int(t),
       uns = kiln_elem_type_is_unsigned_int(t) || t == KILN_PRED;
  double fv = id == FAKE_ID_ONE ? 1 : 0;
  if (flt && (id == FAKE_ID_LOWEST || id == FAKE_ID_HIGHEST))
    fv = float_extreme(t, id == FAKE_ID_HIGHEST);
  int64_t lo = bits >= 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1)), hi = -(lo + 1);
  int64_t sv = id == FAKE_ID_ONE       ? 1
               : id == FAKE_ID_LOWEST  ? lo
               : id == FAKE_ID_HIGHEST ? hi
               : id == FAKE_ID_ONES    ? -1
                                       : 0;
  uint64_t uhi = t == KILN_PRED ? 1 : bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
  uint64_t uv = id == FAKE_ID_ONE ? 1 : id == FAKE_ID_HIGHEST || id == FAKE_ID_ONES ? uhi : 0;
  for (int64_t i = 0; i < l->num_elements; i++) {
    if (cplx)
      kiln_literal_set_c128(l, i, fv, 0);
    else if (flt)
      kiln_literal_set_f64(l, i, fv);
    else if (sgn)
      kiln_literal_set_s64(l, i, sv);
    else if (uns)
      kiln_literal_set_u64(l, i, uv);
  }
}

static void fill_array(kiln_literal_t *l, const kiln_fake_args_options_t *o, bool is_index,
                       int64_t bound, uint64_t *rng) {
  kiln_elem_type_t t = l->shape->type;
  int64_t n = l->num_elements;
  if (!l->data || n == 0) return;
  if (is_index && (kiln_elem_type_is_integral(t) || kiln_elem_type_is_float(t))) {
    /* Clip the bound to what the type can hold. */
    int bits = kiln_elem_type_bits(t);
    int64_t tmax = bound;
    if (kiln_elem_type_is_signed_int(t) && bits < 64) tmax = (INT64_C(1) << (bits - 1)) - 1;
    if (kiln_elem_type_is_unsigned_int(t) && bits < 64) tmax = (INT64_C(1) << bits) - 1;
    if (bound > tmax) bound = tmax;
    for (int64_t i = 0; i < n; i++) kiln_literal_set_s64(l, i, rand_range(rng, 0, bound));
    return;
  }
  if (t == KILN_PRED) {
    unsigned char *p = l->data;
    for (int64_t i = 0; i < n; i++) p[i] = (unsigned char)(splitmix64_next(rng) >> 63);
    return;
  }
  if (kiln_elem_type_is_signed_int(t)) {
    int bits = kiln_elem_type_bits(t);
    int64_t lo = o->int_lo, hi = o->int_hi;
    if (bits < 64) {
      int64_t tmin = -(INT64_C(1) << (bits - 1)), tmax = (INT64_C(1) << (bits - 1)) - 1;
      if (lo < tmin) lo = tmin;
      if (hi > tmax) hi = tmax;
    }
    if (hi < lo) hi = lo;
    for (int64_t i = 0; i < n; i++) kiln_literal_set_s64(l, i, rand_range(rng, lo, hi));
    return;
  }
  if (kiln_elem_type_is_unsigned_int(t)) {
    int bits = kiln_elem_type_bits(t);
    uint64_t hi = o->uint_hi;
    if (bits < 64 && hi > (UINT64_C(1) << bits) - 1) hi = (UINT64_C(1) << bits) - 1;
    for (int64_t i = 0; i < n; i++) {
      uint64_t r = splitmix64_next(rng);
      kiln_literal_set_u64(l, i, hi == UINT64_MAX ? r : r % (hi + 1));
    }
    return;
  }
  double lo = o->float_lo, span = o->float_hi - o->float_lo;
  if (kiln_elem_type_is_complex(t)) {
    for (int64_t i = 0; i < n; i++) {
      double re = lo + span * rand_unit(rng);
      double im = lo + span * rand_unit(rng);
      kiln_literal_set_c128(l, i, re, im);
    }
    return;
  }
  if (t == KILN_F8E8M0FNU) {
    for (int64_t i = 0; i < n; i++)
      kiln_literal_set_f64(l, i, ldexp(1.0, (int)rand_range(rng, -4, 3)));
    return;
  }
  if (t == KILN_F32) {
    float *p = l->data;
    for (int64_t i = 0; i < n; i++) p[i] = (float)(lo + span * rand_unit(rng));
    return;
  }
  if (t == KILN_BF16) { /* fast path: round the f32 draw (the values need not be f64-exact) */
    uint16_t *p = l->data;
    for (int64_t i = 0; i < n; i++) p[i] = kiln_f32_to_bf16((float)(lo + span * rand_unit(rng)));
    return;
  }
  for (int64_t i = 0; i < n; i++) kiln_literal_set_f64(l, i, lo + span * rand_unit(rng));
}

/* Fills `l` (of `param`'s shape, or a sub-tuple of it at `path`) leaf by leaf. */
static void fill_value(kiln_literal_t *l, const kiln_hlo_instruction_t *param, int64_t *path,
                       int plen, const kiln_fake_args_options_t *o, uint64_t *rng) {
  if (kiln_shape_is_tuple(l->shape)) {
    for (int i = 0; i < l->num_tuple_elements; i++) {
      if (plen < FAKE_MAX_PATH) path[plen] = i;
      fill_value(l->tuple_elements[i], param, path, plen + 1, o, rng); /* deeper: no path */
    }
    return;
  }
  if (!kiln_shape_is_array(l->shape)) return; /* token: nothing to fill */
  fake_walk_t w = {0};
  if (o->index_bounds && plen <= FAKE_MAX_PATH) analyse_uses(param, path, plen, &w);
  fill_array(l, o, w.found, w.bound, rng);
  if (!w.found && w.identity != FAKE_ID_NONE && w.identity != FAKE_ID_CONFLICT)
    fill_identity(l, w.identity);
}

uint64_t kiln_fake_args_memory_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
      found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    if (found) return (uint64_t)kib * 1024u;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

static double gib(uint64_t bytes) {
  return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* Checks parameters [first, last] of `m`'s entry (copies of each). */
static kiln_status check_memory(const kiln_hlo_module_t *m, int first, int last, int copies) {
  const kiln_hlo_computation_t *e = m ? m->entry : NULL;
  if (!e || copies < 1) return NULL;
  uint64_t total = 0, largest = 0;
  int which = -1;
  for (int i = first; i <= last && i < e->num_parameters; i++) {
    const kiln_shape_t *sh = e->parameters[i] ? e->parameters[i]->shape : NULL;
    int64_t b = sh ? kiln_shape_byte_size(sh) : 0;
    uint64_t bytes = b > 0 ? (uint64_t)b : 0;
    if (bytes > largest) {
      largest = bytes;
      which = i;
    }
    uint64_t all = bytes > UINT64_MAX / (uint64_t)copies ? UINT64_MAX : bytes * (uint64_t)copies;
    total = total > UINT64_MAX - all ? UINT64_MAX : total + all;
  }
  uint64_t avail = kiln_fake_args_memory_available();
  if (avail == 0 || total <= avail) return NULL;
  char *shape = kiln_shape_to_string(e->parameters[which]->shape, false);
  char copies_text[64] = "";
  if (copies > 1) snprintf(copies_text, sizeof copies_text, " (%d copies)", copies);
  kiln_status s = kiln_status_make(
      KILN_RESOURCE_EXHAUSTED,
      "fake args: the inputs need %.2f GiB%s (largest: parameter %d, %s, %.2f GiB), more than "
      "the %.2f GiB of memory available on this machine (MemAvailable); run the module where "
      "there is more memory, or give smaller inputs",
      gib(total), copies_text, which, shape, gib(largest), gib(avail));
  kiln_free(shape);
  return s;
}

kiln_status kiln_fake_args_check_memory(const kiln_hlo_module_t *m, int copies) {
  return check_memory(m, 0, m && m->entry ? m->entry->num_parameters - 1 : -1, copies);
}

/* kiln_fake_args_make_one; `checked`: the caller compared the memory already. */
static kiln_status make_one(const kiln_hlo_module_t *m, const kiln_fake_args_options_t *o,
                            int param_number, bool checked, kiln_arena_t *arena,
                            kiln_literal_t **out) {
  *out = NULL;
  kiln_fake_args_options_t dflt;
  if (!o) {
    kiln_fake_args_options_init(&dflt);
    o = &dflt;
  }
  const kiln_hlo_computation_t *e = m ? m->entry : NULL;
  if (!e) return KILN_ERR_INVALID("fake args: module has no entry computation");
  if (param_number < 0 || param_number >= e->num_parameters || !e->parameters[param_number])
    return KILN_ERR_INVALID("fake args: entry computation has no parameter %d", param_number);
  const kiln_hlo_instruction_t *p = e->parameters[param_number];
  if (!checked) KILN_RETURN_IF_ERROR_PLAIN(check_memory(m, param_number, param_number, 1));
  kiln_shape_t *shape = kiln_shape_clone(arena, p->shape);
  kiln_literal_t *l = shape ? kiln_literal_make(arena, shape) : NULL;
  if (!l) {
    char *s = kiln_shape_to_string(p->shape, false);
    kiln_status st =
        kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                         "fake args: cannot allocate parameter %d of shape %s", param_number, s);
    kiln_free(s);
    return st;
  }
  uint64_t rng = param_stream(o->seed, param_number);
  int64_t path[FAKE_MAX_PATH];
  fill_value(l, p, path, 0, o, &rng);
  *out = l;
  return NULL;
}

kiln_status kiln_fake_args_make_one(const kiln_hlo_module_t *m, const kiln_fake_args_options_t *o,
                                    int param_number, kiln_arena_t *arena, kiln_literal_t **out) {
  return make_one(m, o, param_number, false, arena, out);
}

kiln_status kiln_fake_args_make(const kiln_hlo_module_t *m, const kiln_fake_args_options_t *o,
                                kiln_arena_t *arena, kiln_literal_t ***out_args, int *out_num) {
  *out_args = NULL;
  *out_num = 0;
  const kiln_hlo_computation_t *e = m ? m->entry : NULL;
  if (!e) return KILN_ERR_INVALID("fake args: module has no entry computation");
  int n = e->num_parameters;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fake_args_check_memory(m, 1));
  kiln_literal_t **args = NULL;
  if (n > 0) {
    args = kiln_arena_alloc(arena, sizeof(*args) * (size_t)n);
    if (!args) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "fake args: arena is full");
  }
  for (int i = 0; i < n; i++) KILN_RETURN_IF_ERROR_PLAIN(make_one(m, o, i, true, arena, &args[i]));
  *out_args = args;
  *out_num = n;
  return NULL;
}

/* ---- ragged-all-to-all metadata, per participant ---- */

/* The four metadata operands of `in` as distinct entry parameters (param numbers), or false. */
static bool ragged_params(const kiln_hlo_computation_t *e, const kiln_hlo_instruction_t *in,
                          int num[4]) {
  if (in->opcode != KILN_OP_RAGGED_ALL_TO_ALL || in->num_operands != 6) return false;
  const kiln_shape_t *x = in->operands[0]->shape, *y = in->operands[1]->shape;
  if (!kiln_shape_is_array(x) || !kiln_shape_is_array(y) || x->rank < 1 || y->rank < 1)
    return false;
  for (int k = 0; k < 4; k++) {
    const kiln_hlo_instruction_t *p = in->operands[2 + k];
    if (p->opcode != KILN_OP_PARAMETER || p->parent != e || !kiln_shape_is_array(p->shape) ||
        (p->shape->type != KILN_S32 && p->shape->type != KILN_S64))
      return false;
    num[k] = (int)p->parameter_number;
    for (int j = 0; j < k; j++)
      if (num[j] == num[k]) return false;
  }
  return true;
}

bool kiln_fake_args_per_participant(const kiln_hlo_module_t *m) {
  const kiln_hlo_computation_t *e = m ? m->entry : NULL;
  int num[4];
  for (size_t i = 0; e && i < e->instructions.len; i++)
    if (ragged_params(e, e->instructions.data[i], num)) return true;
  return false;
}

/* Rows rank s sends rank d in update u: uniform in [0, cap], the same on every participant. */
static int64_t ragged_rows(uint64_t seed, int s, int d, int64_t u, int64_t cap) {
  uint64_t st = seed ^ (0x9E3779B97F4A7C15ull * ((uint64_t)s * 0x10001u + (uint64_t)d + 1)) ^
                ((uint64_t)u << 40);
  return rand_range(&st, 0, cap);
}

static void put_s64(kiln_literal_t *l, int64_t i, int64_t v) {
  if (l->shape->type == KILN_S32)
    ((int32_t *)l->data)[i] = (int32_t)v;
  else
    ((int64_t *)l->data)[i] = v;
}

static kiln_status ragged_fill(const kiln_hlo_instruction_t *in, const int num[4], int R, int P,
                               int participant, uint64_t seed, kiln_literal_t **args) {
  kiln_hlo_collective_group_t g;
  KILN_RETURN_IF_ERROR(kiln_hlo_collective_group_resolve(in, R, P, participant, NULL, &g),
                       "fake args for ragged-all-to-all '%s'", in->name);
  int n = g.size, r = g.rank;
  kiln_hlo_collective_group_free(&g);
  kiln_literal_t *in_off = args[num[0]], *send = args[num[1]], *out_off = args[num[2]],
                 *recv = args[num[3]];
  int64_t count = in_off->num_elements;
  if (count % n || send->num_elements != count || out_off->num_elements != count ||
      recv->num_elements != count)
    return KILN_STATUS_OK; /* the verifier's and the evaluator's to reject */
  int64_t U = count / n, rows = in->operands[0]->shape->dims[0];
  if (in->operands[1]->shape->dims[0] < rows) rows = in->operands[1]->shape->dims[0];
  int64_t cap = U ? rows / (n * U) : 0, at = 0;
  for (int d = 0; d < n; d++)
    for (int64_t u = 0; u < U; u++) {
      int64_t sz = ragged_rows(seed, r, d, u, cap), where = 0;
      /* Receiver d's output: every earlier sender's updates, then ours before u. */
      for (int s = 0; s < r; s++)
        for (int64_t v = 0; v < U; v++) where += ragged_rows(seed, s, d, v, cap);
      for (int64_t v = 0; v < u; v++) where += ragged_rows(seed, r, d, v, cap);
      put_s64(in_off, d * U + u, at);
      put_s64(send, d * U + u, sz);
      put_s64(out_off, d * U + u, where);
      put_s64(recv, d * U + u, ragged_rows(seed, d, r, u, cap));
      at += sz;
    }
  return KILN_STATUS_OK;
}

kiln_status kiln_fake_args_make_participant(const kiln_hlo_module_t *m,
                                            const kiln_fake_args_options_t *o, int num_replicas,
                                            int num_partitions, int participant,
                                            kiln_arena_t *arena, kiln_literal_t ***out_args,
                                            int *out_num) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fake_args_make(m, o, arena, out_args, out_num));
  const kiln_hlo_computation_t *e = m->entry;
  uint64_t seed = o ? o->seed : 42;
  int num[4];
  for (size_t i = 0; i < e->instructions.len; i++)
    if (ragged_params(e, e->instructions.data[i], num))
      KILN_RETURN_IF_ERROR_PLAIN(ragged_fill(e->instructions.data[i], num, num_replicas,
                                             num_partitions, participant, seed, *out_args));
  return KILN_STATUS_OK;
}

kiln_status kiln_fake_args_make_world(const kiln_hlo_module_t *m, const kiln_fake_args_options_t *o,
                                      int num_replicas, int num_partitions, kiln_arena_t *arena,
                                      kiln_literal_t *const **per, int *out_num, bool *differ) {
  *differ = kiln_fake_args_per_participant(m);
  kiln_literal_t **args = NULL;
  int n = num_replicas * num_partitions;
  for (int i = 0; i < n; i++) {
    if (*differ || i == 0)
      KILN_RETURN_IF_ERROR_PLAIN(*differ ? kiln_fake_args_make_participant(m, o, num_replicas,
                                                                           num_partitions, i, arena,
                                                                           &args, out_num)
                                         : kiln_fake_args_make(m, o, arena, &args, out_num));
    per[i] = args;
  }
  return KILN_STATUS_OK;
}
