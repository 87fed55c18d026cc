/* Hero analysis and emitter choice (see hero_analysis.h). */
#include "compiler/codegen/hero_analysis.h"

#include <string.h>

#include "base/alloc.h"
#include "compiler/analysis/fusion_indexing.h"
#include "compiler/analysis/reduction_rule.h"
#include "compiler/hlo/opcode.h"

const char *kiln_hero_emitter_name(kiln_hero_emitter_t e) {
  switch (e) {
    case KILN_HERO_EMITTER_LOOP: return "loop";
    case KILN_HERO_EMITTER_REDUCTION: return "reduction";
    case KILN_HERO_EMITTER_TRANSPOSE: return "transpose";
    case KILN_HERO_EMITTER_SCATTER: return "scatter";
    case KILN_HERO_EMITTER_SORT: return "sort";
    case KILN_HERO_EMITTER_CONCATENATE: return "concatenate";
    case KILN_HERO_EMITTER_INPUT_SLICES: return "input_slices";
    case KILN_HERO_EMITTER_DYNAMIC_UPDATE_SLICE: return "dynamic_update_slice";
  }
  return "?";
}

/* ---- layouts ---- */

static bool has_default_layout(const kiln_shape_t *s) {
  if (!s->has_layout || s->layout.rank != s->rank || !s->layout.minor_to_major) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->layout.minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

/* Logical dim at physical position k (0 = most major). */
static int phys_dim(const kiln_shape_t *s, int k) {
  return kiln_shape_physical_dim(s, k);
}

/* The dims of `s` of more than one element, major to minor. Returns how many. */
static int nonunit_physical_order(const kiln_shape_t *s, int *order) {
  int n = 0;
  for (int k = 0; k < s->rank; k++) {
    int d = phys_dim(s, k);
    if (s->dims[d] != 1) order[n++] = d;
  }
  return n;
}

/* Whether a and b lay their elements out in the same order of dims. */
static bool same_physical_order(const kiln_shape_t *a, const kiln_shape_t *b) {
  int oa[16], ob[16];
  if (a->rank > 16 || b->rank > 16) return false;
  int n = nonunit_physical_order(a, oa);
  return n == nonunit_physical_order(b, ob) && !memcmp(oa, ob, sizeof(int) * (size_t)n);
}

/* Whether s lays its elements out in logical (row-major) order. */
static bool row_major(const kiln_shape_t *s) {
  int o[16];
  if (s->rank > 16) return false;
  int n = nonunit_physical_order(s, o);
  for (int k = 1; k < n; k++)
    if (o[k] < o[k - 1]) return false;
  return true;
}

static bool same_dims(const kiln_shape_t *a, const kiln_shape_t *b) {
  return kiln_shape_is_array(a) && kiln_shape_is_array(b) && a->rank == b->rank &&
         !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}

unsigned kiln_hero_reduce_output_mode(const kiln_hlo_instruction_t *x,
                                      const kiln_hlo_instruction_t *r) {
  if (x == r || !kiln_shape_is_tuple(r->shape) || r->shape->num_elements < 1)
    return KILN_HERO_BY_LOGICAL | KILN_HERO_BY_PHYSICAL;
  bool same = kiln_shape_is_array(x->shape) && same_physical_order(x->shape, r->shape->elements[0]);
  return KILN_HERO_BY_LOGICAL | (same ? KILN_HERO_BY_PHYSICAL : 0);
}

unsigned kiln_hero_epilogue_step(const kiln_hlo_instruction_t *x, const kiln_hlo_instruction_t *y,
                                 unsigned mode_y) {
  bool dims = same_dims(x->shape, y->shape);
  bool order = dims && same_physical_order(x->shape, y->shape);
  switch (x->opcode) {
    case KILN_OP_BITCAST:
      return order ? mode_y : mode_y & ~KILN_HERO_BY_LOGICAL;
    case KILN_OP_RESHAPE:
      if (!dims) mode_y &= ~KILN_HERO_BY_LOGICAL;
      if (!row_major(x->shape) || !row_major(y->shape)) mode_y &= ~KILN_HERO_BY_PHYSICAL;
      return mode_y;
    default:
      return order ? mode_y : mode_y & ~KILN_HERO_BY_PHYSICAL;
  }
}

/* The mode of root (kiln_hero_epilogue_step down the one-operand chain to reduce hero). */
static unsigned chain_mode(const kiln_hlo_instruction_t *root, const kiln_hlo_instruction_t *hero) {
  if (root == hero || root->num_operands < 1 ||
      (root->opcode == KILN_OP_GET_TUPLE_ELEMENT && root->operands[0] == hero))
    return kiln_hero_reduce_output_mode(root, hero);
  const kiln_hlo_instruction_t *y = root->operands[0];
  return kiln_hero_epilogue_step(root, y, chain_mode(y, hero));
}

/* ---- reductions ---- */

const char *kiln_reduction_kind_name(kiln_reduction_kind_t k) {
  switch (k) {
    case KILN_REDUCTION_ROW: return "reduce_row";
    case KILN_REDUCTION_MULTI_ROW: return "reduce_multirow";
    case KILN_REDUCTION_COLUMN: return "reduce_column";
    case KILN_REDUCTION_SMALL_COLUMN: return "reduce_column_small";
  }
  return "?";
}

bool kiln_hero_is_reduction_hero(const kiln_hlo_instruction_t *r) {
  kiln_reduction_dims_t rd;
  if (!kiln_reduction_dims_of(r, &rd) || !kiln_reduction_of_complex_ok(r)) return false;
  return kiln_reduction_faster_than_elemental(rd.is_row, rd.dims);
}

static bool is_real_reduction_hero(const kiln_hlo_instruction_t *root,
                                   const kiln_hlo_instruction_t *hero) {
  if (!kiln_hero_is_reduction_hero(hero)) return false;
  if (root == hero) return true;
  if (kiln_reduction_reduces_complex(hero))
    return false; /* no complex epilogues: the loop emitter's */
  /* a root whose index is not the reduce's (a bitcast across layouts, then a layout change) */
  if (!chain_mode(root, hero)) return false;
  kiln_reduction_dims_t rd;
  kiln_reduction_dims_of(hero, &rd);
  return kiln_reduction_is_race_free(&rd);
}

/* Bits of an element as XLA counts them for vectorization (pred is a byte). */
static int plan_bits(kiln_elem_type_t t) {
  return t == KILN_PRED ? 8 : kiln_elem_type_bits(t);
}

static void leaf_bits(const kiln_shape_t *s, int *lo, int *hi, bool *complex) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++) leaf_bits(s->elements[i], lo, hi, complex);
    return;
  }
  int b = plan_bits(s->type);
  if (b < *lo) *lo = b;
  if (b > *hi) *hi = b;
  if (kiln_elem_type_is_complex(s->type)) *complex = true;
}

static kiln_status reduction_plan(const kiln_hlo_computation_t *c, const kiln_hero_analysis_t *ha,
                                  int64_t core_count, bool host_target, bool no_atomics,
                                  kiln_reduction_plan_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !ha || ha->emitter != KILN_HERO_EMITTER_REDUCTION || !ha->hero)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "reduction plan: not a reduction fusion");
  int hi = 0;
  kiln_reduction_facts_t f = {.input_bits_min = 1 << 30, .output_bits_min = 1 << 30};
  for (int i = 0; i < c->num_parameters; i++)
    leaf_bits(c->parameters[i]->shape, &f.input_bits_min, &hi, &f.complex);
  for (int i = 0; i < ha->num_roots; i++)
    leaf_bits(ha->roots[i]->shape, &f.output_bits_min, &hi, &f.complex);
  for (int i = 0; i < ha->num_roots; i++) {
    const kiln_hlo_instruction_t *h = ha->heroes[i];
    if (h->opcode == KILN_OP_REDUCE)
      for (int k = 0; k < h->num_operands; k++)
        f.complex |= kiln_elem_type_is_complex(h->operands[k]->shape->type);
  }
  /* Atomics combine the partials of several blocks: single-value reduces, 16/32/64-bit. */
  f.atomic_ok = true;
  for (int i = 0; i < ha->num_roots && f.atomic_ok; i++) {
    const kiln_hlo_instruction_t *h = ha->heroes[i];
    if (h->opcode != KILN_OP_REDUCE) continue;
    int b = kiln_elem_type_bits(h->shape->type);
    f.atomic_ok = h->num_operands == 2 && ha->roots[i] == h && !kiln_shape_is_tuple(h->shape) &&
                  !kiln_elem_type_is_complex(h->shape->type) && (b == 16 || b == 32 || b == 64);
  }
  /* On the host a block is one core's sequential work, so a row past XLA's race-free bound
   * stays in one block (no initializing kernel, no atomics, and no column bound check on
   * every element of a split row, which kept the loop from vectorizing its per-row loads)
   * while the kept rows alone give every core four blocks or more (16 cores when the count
   * is not known: 64 rows). */
  const kiln_reduction_dims_t *rd = &ha->reduction;
  if (host_target && rd->is_row && rd->dims[1] >= 4 * (core_count > 0 ? core_count : 16))
    f.atomic_ok = false;
  if (no_atomics) f.atomic_ok = false;
  kiln_reduction_plan_make(rd, &f, core_count, out);
  return NULL;
}

kiln_status kiln_hero_reduction_plan(const kiln_hlo_computation_t *c,
                                     const kiln_hero_analysis_t *ha, int64_t core_count,
                                     kiln_reduction_plan_t *out) {
  return reduction_plan(c, ha, core_count, false, false, out);
}

kiln_status kiln_hero_reduction_plan_host(const kiln_hlo_computation_t *c,
                                          const kiln_hero_analysis_t *ha, int64_t core_count,
                                          kiln_reduction_plan_t *out) {
  return reduction_plan(c, ha, core_count, true, false, out);
}

kiln_status kiln_hero_reduction_plan_deterministic(const kiln_hlo_computation_t *c,
                                                   const kiln_hero_analysis_t *ha,
                                                   int64_t core_count, bool host_target,
                                                   kiln_reduction_plan_t *out) {
  return reduction_plan(c, ha, core_count, host_target, true, out);
}

/* ---- transposes ---- */

bool kiln_hero_transpose_normalize(const kiln_hlo_instruction_t *t, kiln_transpose_desc_t *out) {
  if (!t || t->num_operands != 1) return false;
  const kiln_shape_t *in = t->operands[0]->shape, *os = t->shape;
  if (!kiln_shape_is_array(in) || !kiln_shape_is_array(os) || in->rank != os->rank ||
      in->rank > 16 || in->rank < 1)
    return false;
  int r = in->rank;
  int64_t lperm[16];
  if (t->opcode == KILN_OP_TRANSPOSE) {
    if (t->dimensions.n != r) return false;
    for (int i = 0; i < r; i++) {
      lperm[i] = t->dimensions.v[i];
      if (lperm[i] < 0 || lperm[i] >= r) return false;
    }
  } else if (t->opcode == KILN_OP_COPY) {
    for (int i = 0; i < r; i++) lperm[i] = i;
  } else {
    return false;
  }
  int in_pos[16];
  for (int k = 0; k < r; k++) in_pos[phys_dim(in, k)] = k;
  /* Physical permutation: output physical k reads input physical p[k]. */
  int64_t p[16];
  for (int k = 0; k < r; k++) p[k] = in_pos[lperm[phys_dim(os, k)]];
  /* Drop size-1 input dims and renumber. */
  int newid[16], n = 0;
  for (int k = 0; k < r; k++) newid[k] = in->dims[phys_dim(in, k)] == 1 ? -1 : n++;
  int64_t q[16];
  int m = 0;
  for (int k = 0; k < r; k++)
    if (newid[p[k]] >= 0) q[m++] = newid[p[k]];
  int64_t idims[16];
  for (int k = 0, j = 0; k < r; k++)
    if (newid[k] >= 0) idims[j++] = in->dims[phys_dim(in, k)];
  /* Merge runs q[k] == q[k-1] + 1. */
  int group_of_in[16];
  int ng = 0;
  int64_t gperm_first[16];
  for (int k = 0; k < m; k++) {
    if (k > 0 && q[k] == q[k - 1] + 1) continue;
    gperm_first[ng++] = q[k];
  }
  /* Groups are numbered in output order; sort group starts to get input order. */
  int order[16];
  for (int g = 0; g < ng; g++) order[g] = g;
  for (int a = 0; a < ng; a++)
    for (int b = a + 1; b < ng; b++)
      if (gperm_first[order[b]] < gperm_first[order[a]]) {
        int tmp = order[a];
        order[a] = order[b];
        order[b] = tmp;
      }
  int in_rank_of_group[16];
  for (int j = 0; j < ng; j++) in_rank_of_group[order[j]] = j;
  memset(out, 0, sizeof(*out));
  out->rank = ng;
  for (int j = 0; j < ng; j++) out->in_dims[j] = 1;
  for (int k = 0, g = -1; k < m; k++) {
    if (!(k > 0 && q[k] == q[k - 1] + 1)) g++;
    group_of_in[q[k]] = g;
  }
  for (int i = 0; i < m; i++) out->in_dims[in_rank_of_group[group_of_in[i]]] *= idims[i];
  for (int g = 0; g < ng; g++) {
    out->perm[g] = in_rank_of_group[g];
    out->out_dims[g] = out->in_dims[out->perm[g]];
  }
  for (int g = 0; g < ng; g++)
    if (out->perm[g] != g) return true;
  return false;
}

bool kiln_hero_is_transpose_hero(const kiln_hlo_instruction_t *t, kiln_transpose_desc_t *out) {
  kiln_transpose_desc_t d;
  if (!t || (t->opcode != KILN_OP_TRANSPOSE && t->opcode != KILN_OP_COPY)) return false;
  if (!kiln_hero_transpose_normalize(t, &d) || d.rank < 2) return false;
  int r = d.rank;
  bool ok;
  if (d.perm[r - 1] != r - 1) {
    int64_t a = d.in_dims[r - 1], b = d.out_dims[r - 1];
    ok = (a >= 16 && b >= 16) || (a >= 8 && b >= 8 && a * b >= 8192);
    /* Packed transposes (elements under 32 bits): a narrow side still fills a few words. */
    int bits = kiln_elem_type_bits(t->shape->type);
    int64_t lo = a < b ? a : b, hi = a < b ? b : a;
    if (bits < 32 && lo * bits >= 64 && hi >= 16) ok = true;
  } else {
    /* Bits as stored (pred and sub-byte types take a byte each in buffers and tiles): the
     * tile holds 32 x 33 x the minor dimension, and counting pred as one bit let a pred[.., 48]
     * ask for 50,688 bytes of shared memory (fuzz-1079734). */
    int64_t bits = (int64_t)kiln_elem_type_storage_bytes(t->shape->type) * 8 * d.out_dims[r - 1];
    int64_t a = d.in_dims[r - 2], b = d.out_dims[r - 2];
    ok = r >= 3 && bits <= 64 && (a < b ? a : b) * bits >= 16 * 8;
  }
  if (ok && out) *out = d;
  return ok;
}

/* ---- heroes ---- */

static bool reshape_is_bitcast(const kiln_hlo_instruction_t *x) {
  return has_default_layout(x->shape) && has_default_layout(x->operands[0]->shape);
}

static bool transpose_is_bitcast(const kiln_hlo_instruction_t *x) {
  if (!has_default_layout(x->shape) || !has_default_layout(x->operands[0]->shape)) return false;
  const kiln_shape_t *in = x->operands[0]->shape;
  int64_t last = -1;
  for (int i = 0; i < x->dimensions.n; i++) {
    int64_t d = x->dimensions.v[i];
    if (d < 0 || d >= in->rank) return false;
    if (in->dims[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

static bool is_intermediate(const kiln_hlo_instruction_t *x, int max_operands) {
  if (x->num_operands > max_operands || x->num_operands < 1) return false;
  if (!kiln_shape_is_array(x->shape)) return false;
  switch (x->opcode) {
    case KILN_OP_BITCAST: return true;
    case KILN_OP_RESHAPE: return reshape_is_bitcast(x);
    case KILN_OP_TRANSPOSE: return transpose_is_bitcast(x);
    case KILN_OP_COPY: return false;
    default: return kiln_hlo_opcode_is_elementwise(x->opcode);
  }
}

typedef bool (*hero_pred_fn)(const kiln_hlo_instruction_t *);

static bool pred_transpose(const kiln_hlo_instruction_t *x) {
  return kiln_hero_is_transpose_hero(x, NULL);
}
/* The concatenate emitter writes each operand in a loop of its own; the loop emitter picks
 * each element's operand by a binary search, whose branches mispredict when the operands
 * alternate every few elements (im2col's columns: C per window offset). Up to 4 operands
 * (XLA's bound) always; up to 64 when the result has at least 2^18 elements, where the loops
 * pay for the code they add (a 7x7 convolution's 49 columns of C = 3, 1.8M elements: 6.1 ms
 * as a loop, 0.7 ms here, but 140 ms more LLVM time to compile). */
#define CONCAT_MAX_OPERANDS 4
#define CONCAT_MAX_OPERANDS_LARGE 64
#define CONCAT_LARGE_ELEMENTS ((int64_t)1 << 18)

static bool concat_emitter_takes(const kiln_hlo_instruction_t *c) {
  if (c->num_operands <= CONCAT_MAX_OPERANDS) return true;
  return c->num_operands <= CONCAT_MAX_OPERANDS_LARGE && kiln_shape_is_array(c->shape) &&
         kiln_shape_num_elements(c->shape) >= CONCAT_LARGE_ELEMENTS;
}

static bool pred_concat(const kiln_hlo_instruction_t *x) {
  return x->opcode == KILN_OP_CONCATENATE;
}

/* Breadth-first search upwards from `start` through 3-operand intermediates for exactly
 * one instruction satisfying `pred`, from which only intermediates (and tuples) are
 * reachable downwards. */
static const kiln_hlo_instruction_t *find_nontrivial(const kiln_hlo_instruction_t *start,
                                                     hero_pred_fn pred) {
  const kiln_hlo_instruction_t *queue[512];
  int qh = 0, qt = 0;
  const kiln_hlo_instruction_t *found = NULL;
  queue[qt++] = start;
  while (qh < qt) {
    const kiln_hlo_instruction_t *x = queue[qh++];
    if (pred(x)) {
      if (found && found != x) return NULL;
      found = x;
      continue;
    }
    if (!is_intermediate(x, 3)) continue;
    for (int i = 0; i < x->num_operands && qt < 512; i++) {
      bool seen = false;
      for (int j = 0; j < qt && !seen; j++) seen = queue[j] == x->operands[i];
      if (!seen) queue[qt++] = x->operands[i];
    }
  }
  if (!found) return NULL;
  /* Downwards from the hero only intermediates. */
  qh = qt = 0;
  for (size_t u = 0; u < found->users.len && qt < 512; u++) queue[qt++] = found->users.data[u];
  while (qh < qt) {
    const kiln_hlo_instruction_t *x = queue[qh++];
    if (x->opcode == KILN_OP_TUPLE) continue;
    if (!is_intermediate(x, 3)) return NULL;
    for (size_t u = 0; u < x->users.len && qt < 512; u++) {
      bool seen = false;
      for (int j = 0; j < qt && !seen; j++) seen = queue[j] == x->users.data[u];
      if (!seen) queue[qt++] = x->users.data[u];
    }
  }
  return found;
}

const kiln_hlo_instruction_t *kiln_hero_find(const kiln_hlo_instruction_t *root) {
  const kiln_hlo_instruction_t *h = root;
  while (is_intermediate(h, 1) && h->operands[0]->opcode != KILN_OP_PARAMETER) h = h->operands[0];
  /* an element of a variadic reduce (argmax's index) */
  if (h->opcode == KILN_OP_GET_TUPLE_ELEMENT && h->num_operands == 1 &&
      h->operands[0]->opcode == KILN_OP_REDUCE)
    return h->operands[0];
  const kiln_hlo_instruction_t *t = find_nontrivial(h, pred_transpose);
  if (t) return t;
  const kiln_hlo_instruction_t *c = find_nontrivial(h, pred_concat);
  if (c) return c;
  return h->opcode == KILN_OP_REDUCE ? h : root;
}

/* ---- emitter choice ---- */

static const kiln_hlo_instruction_t *skip_bitcasts(const kiln_hlo_instruction_t *x) {
  while ((x->opcode == KILN_OP_BITCAST || (x->opcode == KILN_OP_RESHAPE && reshape_is_bitcast(x))) &&
         x->num_operands == 1)
    x = x->operands[0];
  return x;
}

static bool is_complex_array(const kiln_shape_t *s) {
  return kiln_shape_is_array(s) && kiln_elem_type_is_complex(s->type);
}

/* Whether a value on the way from a hero to one of the roots (the hero excluded) is complex:
 * the reduction and concatenate emitters build their epilogues from real kernel-IR values
 * only, while the loop emitter carries complex values as (re, im) pairs and takes the same
 * body elementally (fuzz-1038678: concatenate -> convert to c64 -> real; fuzz-1039937:
 * reduce -> convert to c128). */
static bool complex_epilogue(const kiln_hlo_computation_t *c, const kiln_hero_analysis_t *ha) {
  size_t cap = c->instructions.len + 1, len = 0, seen_len = 0, stack_cap = 1;
  for (size_t i = 0; i < c->instructions.len; i++)
    stack_cap += (size_t)c->instructions.data[i]->num_operands; /* each pushed once per use */
  const kiln_hlo_instruction_t **stack = kiln_malloc(stack_cap * sizeof *stack);
  const kiln_hlo_instruction_t **seen = kiln_malloc(cap * sizeof *seen);
  bool found = false;
  for (int i = 0; i < ha->num_roots && !found; i++) {
    len = 0;
    stack[len++] = ha->roots[i];
    while (len && !found) {
      const kiln_hlo_instruction_t *x = stack[--len];
      if (x == ha->heroes[i] || x->opcode == KILN_OP_PARAMETER) continue;
      bool visited = false;
      for (size_t k = 0; k < seen_len && !visited; k++) visited = seen[k] == x;
      if (visited || seen_len == cap) continue;
      seen[seen_len++] = x;
      found = is_complex_array(x->shape);
      for (int k = 0; k < x->num_operands && len < stack_cap; k++) stack[len++] = x->operands[k];
    }
  }
  kiln_free(stack);
  kiln_free(seen);
  return found;
}

/* Whether any value of the fusion is complex: the transpose emitter's tiles and the values it
 * reads around them are real kernel-IR values only (a plain c64 transpose could not compile);
 * the loop emitter takes such fusions elementally. */
static bool any_complex(const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++)
    if (is_complex_array(c->instructions.data[i]->shape)) return true;
  return false;
}

/* Whether an output of the fusion keeps a non-default layout (layout normalization left it:
 * e.g. a reduce-window whose fold order a transposed layout would change). The transpose
 * emitter writes its outputs in logical order; the loop emitter writes them at their
 * physical index. */
static bool any_permuted_root(const kiln_hero_analysis_t *ha) {
  for (int i = 0; i < ha->num_roots; i++) {
    const kiln_shape_t *s = ha->roots[i]->shape;
    if (!kiln_shape_is_array(s) || !s->has_layout || s->layout.rank != s->rank ||
        !s->layout.minor_to_major)
      continue;
    for (int k = 0; k < s->rank; k++)
      if (s->layout.minor_to_major[k] != s->rank - 1 - k) return true;
  }
  return false;
}

static bool reductions_compatible(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  kiln_reduction_dims_t ra, rb;
  if (!kiln_reduction_dims_of(a, &ra) || !kiln_reduction_dims_of(b, &rb)) return false;
  return ra.is_row == rb.is_row && memcmp(ra.dims, rb.dims, sizeof(ra.dims)) == 0;
}

static int64_t array_elements(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) return s->num_elements > 0 ? array_elements(s->elements[0]) : 0;
  return kiln_shape_num_elements(s);
}

/* A root is an in-place dynamic-update-slice: DUS (through bitcasts) whose operand 0 is a
 * parameter (through bitcasts) with no other users on the way. */
static bool is_inplace_dus(const kiln_hlo_instruction_t *root) {
  const kiln_hlo_instruction_t *d = skip_bitcasts(root);
  if (d->opcode != KILN_OP_DYNAMIC_UPDATE_SLICE || d->num_operands < 2) return false;
  const kiln_hlo_instruction_t *x = d->operands[0];
  while (true) {
    if (x->users.len != 1) return false;
    if (x->opcode == KILN_OP_PARAMETER) return true;
    if (x->opcode != KILN_OP_BITCAST || x->num_operands != 1) return false;
    x = x->operands[0];
  }
}

static bool is_unit_slice(const kiln_hlo_instruction_t *x) {
  if (x->opcode != KILN_OP_SLICE || x->num_operands != 1) return false;
  for (int i = 0; i < x->num_slice_dims; i++)
    if (x->slice[i].stride != 1) return false;
  return true;
}

/* Ranks and variables the read-order check evaluates (kernel IR's rank bound). */
#define HERO_MAX_RANK 16

/* Whether the element at `base` and the one a step along dim `j` further are neighbours in
 * the parameter `m` maps to (its minor index one higher, the others equal). */
static bool step_is_contiguous(const kiln_indexing_map_t *m, int64_t *base, size_t j) {
  size_t nr = kiln_indexing_map_num_results(m);
  int64_t syms[HERO_MAX_RANK * 4] = {0}, rts[HERO_MAX_RANK * 4] = {0};
  int64_t r0[HERO_MAX_RANK], r1[HERO_MAX_RANK];
  if (nr == 0 || nr > HERO_MAX_RANK || kiln_indexing_map_num_syms(m) > HERO_MAX_RANK * 4 ||
      kiln_indexing_map_num_rts(m) > HERO_MAX_RANK * 4)
    return false;
  if (!kiln_indexing_map_eval(m, base, syms, rts, r0)) return false;
  base[j]++;
  bool ok = kiln_indexing_map_eval(m, base, syms, rts, r1);
  base[j]--;
  if (!ok || r1[nr - 1] != r0[nr - 1] + 1) return false;
  for (size_t k = 0; k + 1 < nr; k++)
    if (r1[k] != r0[k]) return false;
  return true;
}

/* Whether `m` (root index -> parameter index) reads consecutive elements as dim `j` of the
 * root's index space (sizes `dims`, rank `rank`) steps: checked from the origin and from
 * the middle of the index space. */
static bool reads_contiguously_along(const kiln_indexing_map_t *m, const int64_t *dims, int rank,
                                     int j) {
  if (dims[j] < 2) return true;
  if ((size_t)rank != kiln_indexing_map_num_dims(m) || rank > HERO_MAX_RANK) return false;
  int64_t base[HERO_MAX_RANK] = {0};
  if (!step_is_contiguous(m, base, (size_t)j)) return false;
  for (int d = 0; d < rank; d++) base[d] = d == j ? (dims[d] - 2) / 2 : dims[d] / 2;
  return step_is_contiguous(m, base, (size_t)j);
}

/* Whether the loop emitter reads fewer of `c`'s parameter bytes out of order than the
 * transpose emitter would for hero transpose `tr` (the only root, no epilogue): the
 * transpose emitter walks its tiles along the dim of the result that holds the hero
 * operand's minor dim, the loop emitter along the result's minor dim, and a parameter read
 * through other transposes (a pad + add of transposed pieces, as JAX's gradients of slices
 * build) may be in order along one and out of order along the other. Out of order is a
 * gather per element on the host and an uncoalesced read on a GPU; the tile pays only when
 * it puts more of the reads in order. */
static bool loop_reads_better(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *tr) {
  const kiln_shape_t *rs = c->root->shape;
  if (c->root != tr || !kiln_shape_is_array(rs) || !has_default_layout(rs) || rs->rank < 2 ||
      rs->rank > HERO_MAX_RANK || tr->dimensions.n != rs->rank)
    return false;
  int in_minor = tr->operands[0]->shape->rank - 1, j_tile = -1;
  for (int i = 0; i < tr->dimensions.n; i++)
    if (tr->dimensions.v[i] == in_minor) j_tile = i;
  int j_loop = rs->rank - 1;
  if (j_tile < 0 || j_tile == j_loop) return false;
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_fusion_t fi;
  memset(&fi, 0, sizeof fi);
  kiln_status s = ctx ? kiln_indexing_fusion_compute(ctx, c, NULL, &fi) : NULL;
  bool better = false;
  if (ctx && !s && fi.num_roots == 1) {
    double out_of_order_tile = 0, out_of_order_loop = 0;
    const kiln_indexing_fusion_root_t *r = &fi.roots[0];
    for (int g = 0; g < r->num_groups; g++) {
      const kiln_indexing_fusion_group_t *grp = &r->groups[g];
      const kiln_hlo_instruction_t *p = grp->instr;
      if (p->opcode != KILN_OP_PARAMETER || !kiln_shape_is_array(p->shape) || grp->num_maps == 0)
        continue;
      double bytes = (double)kiln_shape_byte_size(p->shape) / grp->num_maps;
      bool dflt = has_default_layout(p->shape) && !grp->unknown;
      for (int k = 0; k < grp->num_maps; k++) {
        if (!dflt || !reads_contiguously_along(grp->maps[k], rs->dims, rs->rank, j_tile))
          out_of_order_tile += bytes;
        if (!dflt || !reads_contiguously_along(grp->maps[k], rs->dims, rs->rank, j_loop))
          out_of_order_loop += bytes;
      }
    }
    better = out_of_order_loop < out_of_order_tile;
  }
  kiln_status_free(s);
  kiln_indexing_fusion_free(&fi);
  if (ctx) kiln_affine_ctx_destroy(ctx);
  return better;
}

kiln_status kiln_hero_analyze(const kiln_hlo_computation_t *c, kiln_hero_analysis_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return kiln_status_make(KILN_INVALID_ARGUMENT, "hero analysis: no root");
  const kiln_hlo_instruction_t *root = c->root;
  if (root->opcode == KILN_OP_TUPLE) {
    if (root->num_operands > KILN_HERO_MAX_ROOTS)
      return kiln_status_make(KILN_UNIMPLEMENTED, "hero analysis: %d roots (at most %d)",
                              root->num_operands, KILN_HERO_MAX_ROOTS);
    for (int i = 0; i < root->num_operands; i++) out->roots[out->num_roots++] = root->operands[i];
  } else {
    out->roots[out->num_roots++] = root;
  }
  int n = out->num_roots;
  for (int i = 0; i < n; i++) out->heroes[i] = kiln_hero_find(out->roots[i]);

  /* 1. reduction */
  const kiln_hlo_instruction_t *first = NULL;
  for (int i = 0; i < n && !first; i++)
    if (is_real_reduction_hero(out->roots[i], out->heroes[i])) first = out->heroes[i];
  if (first) {
    bool ok = true;
    int64_t in_elems = kiln_shape_num_elements(first->operands[0]->shape);
    for (int i = 0; i < n && ok; i++) {
      /* another root of the same reduce: an epilogue the kernel can index too */
      if (out->heroes[i] == first) {
        ok = out->roots[i] == first || is_real_reduction_hero(out->roots[i], first);
        continue;
      }
      if (!is_real_reduction_hero(out->roots[i], out->heroes[i]))
        ok = array_elements(out->roots[i]->shape) == in_elems;
      else
        ok = reductions_compatible(out->heroes[i], first);
    }
    if (ok && !complex_epilogue(c, out)) {
      out->emitter = KILN_HERO_EMITTER_REDUCTION;
      out->hero = first;
      kiln_reduction_dims_of(first, &out->reduction);
      kiln_reduction_plan_t plan;
      if (!kiln_hero_reduction_plan(c, out, 0, &plan)) out->reduction_kind = plan.kind;
      return NULL;
    }
  }
  /* 2. transpose */
  const kiln_hlo_instruction_t *tr = NULL;
  kiln_transpose_desc_t td;
  bool consistent = true;
  for (int i = 0; i < n && consistent; i++) {
    kiln_transpose_desc_t d;
    if (!kiln_hero_is_transpose_hero(out->heroes[i], &d)) continue;
    if (!tr) {
      tr = out->heroes[i];
      td = d;
    } else if (d.rank != td.rank || memcmp(d.out_dims, td.out_dims, sizeof(int64_t) * (size_t)d.rank) ||
               memcmp(d.perm, td.perm, sizeof(int64_t) * (size_t)d.rank)) {
      consistent = false;
    }
  }
  if (tr && consistent && !any_complex(c) && !any_permuted_root(out)) {
    int64_t in_elems = kiln_shape_num_elements(tr->operands[0]->shape);
    for (int i = 0; i < n && consistent; i++)
      if (!kiln_hero_is_transpose_hero(out->heroes[i], NULL))
        consistent = array_elements(out->roots[i]->shape) == in_elems;
    if (consistent && !(n == 1 && loop_reads_better(c, tr))) {
      out->emitter = KILN_HERO_EMITTER_TRANSPOSE;
      out->hero = tr;
      out->transpose = td;
      return NULL;
    }
  }
  /* 3. several roots */
  if (n > 1) {
    /* Input slices: a root that is no slice but has the slices' input shape is the whole
     * window (a full slice the simplifier removed). */
    const kiln_hlo_instruction_t *slice = NULL;
    for (int i = 0; i < n && !slice; i++)
      if (is_unit_slice(out->roots[i])) slice = out->roots[i];
    bool all_dus = true, all_slices = slice != NULL;
    for (int i = 0; i < n; i++) {
      const kiln_hlo_instruction_t *r = out->roots[i];
      all_dus = all_dus && is_inplace_dus(r);
      const kiln_shape_t *window = is_unit_slice(r) ? r->operands[0]->shape : r->shape;
      all_slices = all_slices && (is_unit_slice(r) || r->opcode != KILN_OP_SLICE) &&
                   kiln_shape_equal(window, slice->operands[0]->shape, false);
    }
    if (all_dus) {
      out->emitter = KILN_HERO_EMITTER_DYNAMIC_UPDATE_SLICE;
      out->hero = skip_bitcasts(out->roots[0]);
    } else if (all_slices) {
      out->emitter = KILN_HERO_EMITTER_INPUT_SLICES;
      out->hero = slice->operands[0];
    }
    return NULL;
  }
  const kiln_hlo_instruction_t *r0 = out->roots[0], *h0 = out->heroes[0];
  if (r0->opcode == KILN_OP_SCATTER) {
    out->emitter = KILN_HERO_EMITTER_SCATTER;
    out->hero = r0;
    return NULL;
  }
  const kiln_hlo_instruction_t *s0 = r0->opcode == KILN_OP_GET_TUPLE_ELEMENT ? r0->operands[0] : r0;
  if (s0->opcode == KILN_OP_SORT) {
    out->emitter = KILN_HERO_EMITTER_SORT;
    out->hero = s0;
    return NULL;
  }
  /* Complex concatenates take the loop emitter, whose elemental concatenate reads (re, im). */
  if (h0->opcode == KILN_OP_CONCATENATE && concat_emitter_takes(h0) &&
      !kiln_shape_is_tuple(r0->shape) && !kiln_elem_type_is_complex(h0->shape->type) &&
      !kiln_elem_type_is_complex(r0->shape->type) && !complex_epilogue(c, out)) {
    out->emitter = KILN_HERO_EMITTER_CONCATENATE;
    out->hero = h0;
    return NULL;
  }
  if (is_inplace_dus(r0)) {
    out->emitter = KILN_HERO_EMITTER_DYNAMIC_UPDATE_SLICE;
    out->hero = skip_bitcasts(r0);
  }
  return NULL;
}
