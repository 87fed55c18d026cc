/* Sort emitter (see sort_emitter.h). */
#include "compiler/codegen/sort_emitter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"
#include "compiler/codegen/hero_emit.h"

#define SORT_MAX_OPERANDS 16
/* Block-shared positions of a stable sort: the static shared-memory limit. */
#define SORT_MAX_SHARED_BYTES (48 * 1024)
/* Rows of fewer pairs than this share a block. */
#define SORT_MIN_BLOCK_THREADS 128
#define SORT_MAX_THREADS 1024
/* Working tensors threaded through the kernel's loops: outputs, scratch, positions or radix
 * counters. */
#define SORT_MAX_WORK (2 * SORT_MAX_OPERANDS + 1)
/* Step distances 2^0 .. 2^(N-1) get a step with a constant distance (emit_steps). */
#define SORT_CONST_DISTANCES 4

static int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

static int64_t log2_exact(int64_t n) {
  int64_t k = 0;
  while (((int64_t)1 << k) < n) k++;
  return k;
}

/* ---- analysis of the fusion ---- */

typedef struct sort_outputs {
  int num_outputs;                         /* fusion output leaves */
  int sort_output[SORT_MAX_OPERANDS];      /* leaf -> sort output */
  int output_of[SORT_MAX_OPERANDS];        /* sort output -> leaf */
  const kiln_shape_t *shapes[SORT_MAX_OPERANDS];
} sort_outputs_t;

static const kiln_hlo_instruction_t *find_sort(const kiln_hlo_computation_t *c) {
  const kiln_hlo_instruction_t *r = c->root;
  if (!r) return NULL;
  if (r->opcode == KILN_OP_SORT) return r;
  if (r->opcode == KILN_OP_GET_TUPLE_ELEMENT && r->num_operands == 1 && r->operands[0]->opcode == KILN_OP_SORT)
    return r->operands[0];
  if (r->opcode == KILN_OP_TUPLE)
    for (int i = 0; i < r->num_operands; i++) {
      const kiln_hlo_instruction_t *x = r->operands[i];
      if (x->opcode == KILN_OP_SORT) return x;
      if (x->opcode == KILN_OP_GET_TUPLE_ELEMENT && x->num_operands == 1 && x->operands[0]->opcode == KILN_OP_SORT)
        return x->operands[0];
    }
  return NULL;
}

static kiln_status add_leaf(sort_outputs_t *so, const kiln_hlo_instruction_t *sort, int k,
                            const kiln_shape_t *shape, const char *cname) {
  if (so->num_outputs >= SORT_MAX_OPERANDS)
    return KILN_ERR_UNIMPLEMENTED("sort fusion %s: more than %d outputs", cname, SORT_MAX_OPERANDS);
  if (k < 0 || k >= sort->num_operands)
    return KILN_ERR_INVALID("sort fusion %s: output %d of a %d-operand sort", cname, k, sort->num_operands);
  if (so->output_of[k] >= 0)
    return KILN_ERR_UNIMPLEMENTED("sort fusion %s: sort output %d is a fusion output twice", cname, k);
  so->output_of[k] = so->num_outputs;
  so->sort_output[so->num_outputs] = k;
  so->shapes[so->num_outputs++] = shape;
  return NULL;
}

static kiln_status add_root(sort_outputs_t *so, const kiln_hlo_instruction_t *sort,
                            const kiln_hlo_instruction_t *x, const char *cname) {
  if (x == sort) {
    if (kiln_shape_is_tuple(x->shape)) {
      for (int k = 0; k < x->shape->num_elements; k++)
        KILN_RETURN_IF_ERROR_PLAIN(add_leaf(so, sort, k, x->shape->elements[k], cname));
      return NULL;
    }
    return add_leaf(so, sort, 0, x->shape, cname);
  }
  if (x->opcode == KILN_OP_GET_TUPLE_ELEMENT && x->num_operands == 1 && x->operands[0] == sort)
    return add_leaf(so, sort, (int)x->tuple_index, x->shape, cname);
  return KILN_ERR_UNIMPLEMENTED("sort fusion %s: root %s (%s) is not an output of %s", cname, x->name,
                                kiln_hlo_opcode_name(x->opcode), sort->name);
}

/* Lexicographic keys a radix sort takes (JAX's num_keys). */
#define SORT_MAX_RADIX_KEYS 4

/* One key of a radix sort: operand `op`'s element, or key function `fn` of it (reading
 * comparator parameter 2 op), `bits` wide, and how its bits map to an unsigned order. */
typedef struct radix_key {
  int op;
  const kiln_hlo_instruction_t *fn;
  int bits;
  bool is_float, is_signed, descending;
} radix_key_t;

typedef struct sort_plan {
  kiln_sort_launch_t l;
  const kiln_hlo_computation_t *cmp;
  int nops;
  int rank, dim;
  int64_t dims[KILN_KIR_MAX_RANK];
  int64_t pairs;      /* H = N / 2 */
  int64_t pair_iters; /* P: pairs per thread per step */
  int64_t copy_iters; /* E: elements per thread in the copy */
  int64_t chunk;      /* merge: the N / T consecutive positions a thread merges in each pass */
  sort_outputs_t so;
  /* The comparator as compare(key(p[2i]), key(p[2i+1])) (comparator_keys), else key_op -1. */
  int key_op;
  const kiln_hlo_instruction_t *key_a, *key_b;
  /* Radix (l.radix): the keys, most significant first. */
  radix_key_t radix[SORT_MAX_RADIX_KEYS];
  int nradix;
} sort_plan_t;

/* Whether `x` (reading only parameter px) and `y` (only py) compute the same function of their
 * parameter: same opcodes, shapes and attributes, operands pairwise alike, shared
 * instructions (no parameter below them) shared. Opcodes whose attributes this does not
 * compare are refused, and so is everything once `budget` visits are spent. */
static bool same_function(const kiln_hlo_instruction_t *x, const kiln_hlo_instruction_t *y,
                          int64_t px, int64_t py, int *budget) {
  if (--*budget < 0) return false;
  if (x == y) return x->opcode != KILN_OP_PARAMETER;
  if (x->opcode != y->opcode || x->num_operands != y->num_operands ||
      !kiln_shape_equal(x->shape, y->shape, false))
    return false;
  switch (x->opcode) {
    case KILN_OP_PARAMETER:
      return x->parameter_number == px && y->parameter_number == py;
    case KILN_OP_CONSTANT:
      return x->literal && y->literal && !x->literal->unknown && !y->literal->unknown &&
             kiln_literal_equal(x->literal, y->literal);
    case KILN_OP_COMPARE:
      if (x->comparison_direction != y->comparison_direction ||
          x->comparison_type != y->comparison_type)
        return false;
      break;
    case KILN_OP_SELECT:
    case KILN_OP_CONVERT:
    case KILN_OP_BITCAST_CONVERT:
    case KILN_OP_NEGATE:
    case KILN_OP_ABS:
    case KILN_OP_NOT:
    case KILN_OP_AND:
    case KILN_OP_OR:
    case KILN_OP_XOR:
    case KILN_OP_ADD:
    case KILN_OP_SUBTRACT:
    case KILN_OP_MULTIPLY:
    case KILN_OP_MAXIMUM:
    case KILN_OP_MINIMUM:
    case KILN_OP_IS_FINITE:
    case KILN_OP_SIGN:
      break;
    default:
      return false;
  }
  for (int k = 0; k < x->num_operands; k++)
    if (!same_function(x->operands[k], y->operands[k], px, py, budget)) return false;
  return true;
}

/* Whether every parameter `x` reads is parameter `p`. */
static bool reads_only(const kiln_hlo_instruction_t *x, int64_t p, int *budget) {
  if (--*budget < 0) return false;
  if (x->opcode == KILN_OP_PARAMETER) return x->parameter_number == p;
  for (int k = 0; k < x->num_operands; k++)
    if (!reads_only(x->operands[k], p, budget)) return false;
  return true;
}

/* The operand i whose key `a` (a function of comparator parameter 2i only) and `b` (the same
 * function of 2i + 1) compare; -1 when there is none. */
static int key_function_operand(const sort_plan_t *p, const kiln_hlo_instruction_t *a,
                                const kiln_hlo_instruction_t *b) {
  for (int i = 0; i < p->nops; i++) {
    /* Paths, not instructions, are walked: a budget keeps a comparator of shared values cheap. */
    int budget = 4096;
    if (reads_only(a, 2 * i, &budget) && reads_only(b, 2 * i + 1, &budget) &&
        same_function(a, b, 2 * i, 2 * i + 1, &budget))
      return i;
  }
  return -1;
}

/* A comparator compare(key(p[2i]), key(p[2i+1])) with a key that does work (JAX's comparators
 * canonicalize NaN and -0 before a total-order compare): sets p->key_op / key_a / key_b. The
 * merge then computes each element's key once, as it loads it, off the compare -> select
 * chain that bounds a merge step, where the comparator recomputed both heads' keys every step. */
static void comparator_keys(sort_plan_t *p) {
  p->key_op = -1;
  const kiln_hlo_instruction_t *r = p->cmp->root;
  if (r->opcode != KILN_OP_COMPARE || r->num_operands != 2) return;
  const kiln_hlo_instruction_t *a = r->operands[0], *b = r->operands[1];
  if (a->opcode == KILN_OP_PARAMETER) return;
  p->key_op = key_function_operand(p, a, b);
  if (p->key_op >= 0) {
    p->key_a = a;
    p->key_b = b;
  }
}

/* Appends the key compared by `cmp` (LT or GT of a, b) to p->radix: operand i's elements
 * (parameters 2i, 2i + 1) or one function of them for both sides (comparator_keys' rule), a
 * scalar of 8, 16, 32 or 64 bits compared in its type's total order (bf16, f16, f32 or f64
 * with TOTALORDER; an integer as its signedness says). */
static bool add_radix_key(sort_plan_t *p, const kiln_hlo_instruction_t *cmp) {
  if (cmp->opcode != KILN_OP_COMPARE || cmp->num_operands != 2 ||
      (cmp->comparison_direction != KILN_CMP_LT && cmp->comparison_direction != KILN_CMP_GT) ||
      p->nradix == SORT_MAX_RADIX_KEYS)
    return false;
  const kiln_hlo_instruction_t *a = cmp->operands[0], *b = cmp->operands[1];
  radix_key_t k = {.op = -1, .descending = cmp->comparison_direction == KILN_CMP_GT};
  if (a->opcode == KILN_OP_PARAMETER || b->opcode == KILN_OP_PARAMETER) {
    if (a->opcode == b->opcode && a->parameter_number % 2 == 0 &&
        b->parameter_number == a->parameter_number + 1)
      k.op = (int)(a->parameter_number / 2);
  } else {
    k.op = key_function_operand(p, a, b);
    k.fn = a;
  }
  if (k.op < 0 || !kiln_shape_is_array(a->shape) || a->shape->rank != 0) return false;
  kiln_elem_type_t t = a->shape->type;
  k.bits = kiln_elem_type_bits(t);
  kiln_cmp_type_t ct = cmp->comparison_type;
  k.is_float = kiln_elem_type_is_float(t);
  k.is_signed = kiln_elem_type_is_signed_int(t);
  if (k.is_float) {
    /* 8-bit floats' NaN encodings (fnuz: the negative zero) leave sign-magnitude order. */
    if (ct != KILN_CMP_TYPE_TOTALORDER || (k.bits != 16 && k.bits != 32 && k.bits != 64))
      return false;
  } else if (k.is_signed || kiln_elem_type_is_unsigned_int(t)) {
    kiln_cmp_type_t own = k.is_signed ? KILN_CMP_TYPE_SIGNED : KILN_CMP_TYPE_UNSIGNED;
    if ((ct != KILN_CMP_TYPE_DEFAULT && ct != own) ||
        (k.bits != 8 && k.bits != 16 && k.bits != 32 && k.bits != 64))
      return false;
  } else {
    return false;
  }
  p->radix[p->nradix++] = k;
  return true;
}

/* Appends the keys of comparator expression `r`, most significant first: LT / GT(a, b) is
 * one key, or(LT(a, b), and(EQ(a, b), rest)) that key then rest's (JAX's comparator for
 * num_keys > 1; either operand order of or / and / eq). */
static bool add_radix_keys(sort_plan_t *p, const kiln_hlo_instruction_t *r) {
  if (r->opcode == KILN_OP_COMPARE) return add_radix_key(p, r);
  if (r->opcode != KILN_OP_OR || r->num_operands != 2) return false;
  for (int s = 0; s < 2; s++) {
    const kiln_hlo_instruction_t *lt = r->operands[s], *tie = r->operands[1 - s];
    if (lt->opcode != KILN_OP_COMPARE || tie->opcode != KILN_OP_AND || tie->num_operands != 2)
      continue;
    for (int t = 0; t < 2; t++) {
      const kiln_hlo_instruction_t *eq = tie->operands[t], *rest = tie->operands[1 - t];
      if (eq->opcode != KILN_OP_COMPARE || eq->comparison_direction != KILN_CMP_EQ ||
          eq->comparison_type != lt->comparison_type || eq->num_operands != 2 ||
          lt->num_operands != 2)
        continue;
      const kiln_hlo_instruction_t *a = lt->operands[0], *b = lt->operands[1];
      if (!((eq->operands[0] == a && eq->operands[1] == b) ||
            (eq->operands[0] == b && eq->operands[1] == a)))
        continue;
      int saved = p->nradix;
      if (add_radix_key(p, lt) && add_radix_keys(p, rest)) return true;
      p->nradix = saved;
    }
  }
  return false;
}

/* Whether the comparator sorts by the bits of its keys (sort_emitter.h, "Radix"): sets
 * p->radix / nradix and returns the passes, one per key byte (0: not a radix sort). */
static int radix_plan(sort_plan_t *p) {
  p->nradix = 0;
  if (!add_radix_keys(p, p->cmp->root)) {
    p->nradix = 0;
    return 0;
  }
  int passes = 0;
  for (int k = 0; k < p->nradix; k++) passes += p->radix[k].bits / 8;
  return passes;
}

static kiln_status plan(const kiln_hlo_computation_t *c, bool host, sort_plan_t *p) {
  memset(p, 0, sizeof(*p));
  p->key_op = -1;
  for (int k = 0; k < SORT_MAX_OPERANDS; k++) p->so.output_of[k] = -1;
  const kiln_hlo_instruction_t *s = find_sort(c);
  if (!s) return KILN_ERR_INVALID("fusion %s: the root is not a sort", c ? c->name : "?");
  p->l.sort = s;
  if (s->num_operands < 1 || s->num_operands > SORT_MAX_OPERANDS)
    return KILN_ERR_UNIMPLEMENTED("%s: %d sort operands", s->name, s->num_operands);
  p->nops = s->num_operands;
  p->cmp = kiln_hlo_instruction_called(s, "to_apply");
  if (!p->cmp) return KILN_ERR_INVALID("%s: no comparator (to_apply)", s->name);
  if (p->cmp->num_parameters != 2 * p->nops)
    return KILN_ERR_INVALID("%s: comparator %s takes %d parameters, the sort has %d operands", s->name,
                            p->cmp->name, p->cmp->num_parameters, p->nops);
  const kiln_shape_t *sh = s->operands[0]->shape;
  if (!kiln_shape_is_array(sh)) return KILN_ERR_INVALID("%s: operand 0 is not an array", s->name);
  if (sh->rank > KILN_KIR_MAX_RANK) return KILN_ERR_UNIMPLEMENTED("%s: rank %d", s->name, sh->rank);
  p->rank = sh->rank;
  for (int i = 0; i < sh->rank; i++) p->dims[i] = sh->dims[i];
  for (int k = 0; k < p->nops; k++) {
    const kiln_hlo_instruction_t *x = s->operands[k];
    if (!kiln_shape_is_array(x->shape) || x->shape->rank != sh->rank)
      return KILN_ERR_INVALID("%s: operand %d's shape differs from operand 0's", s->name, k);
    for (int i = 0; i < sh->rank; i++)
      if (x->shape->dims[i] != sh->dims[i])
        return KILN_ERR_INVALID("%s: operand %d's shape differs from operand 0's", s->name, k);
    /* The kernel IR holds no complex scalars; other emitters split them into parts, this
     * one moves whole elements. */
    if (kiln_elem_type_is_complex(x->shape->type))
      return KILN_ERR_UNIMPLEMENTED(
          "%s: operand %d is %s: the sort emitter does not move complex elements", s->name, k,
          kiln_elem_type_name(x->shape->type));
    if (!kiln_partition_is_tensor_leaf(x))
      return KILN_ERR_UNIMPLEMENTED("%s: operand %d (%s, %s) is not a fusion parameter or constant", s->name, k,
                                    x->name, kiln_hlo_opcode_name(x->opcode));
  }
  if (sh->rank == 0) {
    p->dim = -1;
  } else {
    if (s->dimensions.n != 1 || s->dimensions.v[0] < 0 || s->dimensions.v[0] >= sh->rank)
      return KILN_ERR_INVALID("%s: needs one sort dimension in [0, %d)", s->name, sh->rank);
    p->dim = (int)s->dimensions.v[0];
  }
  const kiln_hlo_instruction_t *r = c->root;
  if (r->opcode == KILN_OP_TUPLE && r != s) {
    for (int i = 0; i < r->num_operands; i++) KILN_RETURN_IF_ERROR_PLAIN(add_root(&p->so, s, r->operands[i], c->name));
  } else {
    KILN_RETURN_IF_ERROR_PLAIN(add_root(&p->so, s, r, c->name));
  }
  for (int k = 0; k < p->nops; k++)
    if (p->so.output_of[k] < 0)
      return KILN_ERR_UNIMPLEMENTED("sort fusion %s: sort output %d is not a fusion output (no buffer to sort in)",
                                    c->name, k);
  int64_t n = p->dim >= 0 ? p->dims[p->dim] : 1, total = kiln_shape_num_elements(sh);
  p->l.row_length = n;
  p->l.rows = n > 0 ? total / n : 0;
  p->l.stable = s->is_stable;
  p->l.padded = pow2_at_least(n);
  p->pairs = p->l.padded / 2;
  int64_t lg = log2_exact(p->l.padded);
  p->l.steps = lg * (lg + 1) / 2;
  int64_t rows = p->l.rows > 0 ? p->l.rows : 1;
  if (p->pairs >= SORT_MIN_BLOCK_THREADS) {
    p->l.rows_per_block = 1;
    p->l.threads = p->pairs < SORT_MAX_THREADS ? p->pairs : SORT_MAX_THREADS;
  } else {
    int64_t per = p->pairs > 0 ? p->pairs : 1;
    int64_t g = SORT_MIN_BLOCK_THREADS / per, rg = pow2_at_least(rows);
    p->l.rows_per_block = g < rg ? g : rg;
    p->l.threads = p->l.rows_per_block * per;
  }
  p->pair_iters = p->pairs > 0 ? p->l.rows_per_block * p->pairs / p->l.threads : 0;
  int64_t elems = p->l.rows_per_block * n;
  p->copy_iters = (elems + p->l.threads - 1) / p->l.threads;
  p->l.blocks = (rows + p->l.rows_per_block - 1) / p->l.rows_per_block;
  if (host && lg > SORT_CONST_DISTANCES) {
    /* The host merges sorted runs, one thread per row: a network this long needs steps at
     * run-time distances, whose pairs the host cannot vectorize (scalar compare-exchanges,
     * n log^2 n / 4 of them), where a sequential merge makes n log n comparator calls and
     * needs no merge-path search (a thread's chunk is its whole row). Stable whatever the
     * sort asked for (a stable order is one an unstable sort allows). */
    p->l.merge = true;
    p->l.steps = lg;
    p->l.rows_per_block = 1;
    p->l.threads = 1;
    p->l.blocks = rows;
    p->chunk = p->l.padded;
    p->copy_iters = n;
    p->pair_iters = 0;
    comparator_keys(p);
    p->l.keyed = p->key_op >= 0;
    int passes = n <= INT32_MAX ? radix_plan(p) : 0;
    if (passes > 0 && n >= KILN_SORT_RADIX_MIN_ROW_PER_BYTE * (int64_t)passes) {
      p->l.radix = true;
      p->l.steps = passes;
    }
  } else if (p->l.stable && p->l.steps > 0) {
    p->l.shared_bytes = elems * 4;
    if (p->l.shared_bytes > SORT_MAX_SHARED_BYTES) {
      /* Positions do not fit: merge sorted runs instead (see sort_emitter.h). One block per
       * row (rows_per_block is 1: pairs >= SORT_MIN_BLOCK_THREADS here). */
      p->l.merge = true;
      p->l.shared_bytes = 0;
      p->l.steps = lg;
      p->chunk = p->l.padded / p->l.threads;
    }
  }
  /* Rows that fit (with their positions) in shared memory are sorted there: barriers then
   * order shared-memory accesses, and the steps touch no global memory. */
  if (!p->l.merge && p->l.steps > 0) {
    int64_t bytes = p->l.shared_bytes;
    for (int k = 0; k < p->nops; k++) bytes += elems * (int64_t)kiln_elem_type_storage_bytes(s->operands[k]->shape->type);
    if (bytes <= SORT_MAX_SHARED_BYTES) {
      p->l.in_shared = true;
      p->l.shared_bytes = bytes;
    }
  }
  if (p->l.blocks > INT32_MAX)
    return KILN_ERR_UNIMPLEMENTED("%s: %lld blocks", s->name, (long long)p->l.blocks);
  return NULL;
}

kiln_status kiln_sort_plan(const kiln_hlo_computation_t *c, bool host, kiln_sort_launch_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("sort emitter: no computation");
  sort_plan_t *p = kiln_calloc(1, sizeof(*p));
  kiln_status s = plan(c, host, p);
  if (!s) *out = p->l;
  kiln_free(p);
  return s;
}

/* ---- emission ---- */

typedef struct sort_emit {
  sort_plan_t p;
  kiln_kir_module_t *m;
  kiln_affine_ctx_t *x;
  kiln_kir_builder_t b;
  kiln_elemental_t elem;
  kiln_elemental_fn_t fn;
  kiln_partition_t part; /* empty: the sort has no subgraph functions */
  kiln_kir_func_t *kernel;
  int in_tensor[SORT_MAX_OPERANDS];  /* sort operand -> kernel tensor parameter */
  kiln_kir_value_t *tensors[64];     /* the kernel's input tensors (elem order) */
  kiln_kir_value_t *work[SORT_MAX_OPERANDS]; /* current value of sort output k's buffer */
  kiln_kir_value_t *scr[SORT_MAX_OPERANDS];  /* merge: current value of scratch tensor k */
  kiln_kir_value_t *pos;             /* stable: shared positions, else NULL */
  kiln_kir_value_t *counts;          /* radix: the shared counters, else NULL */
  kiln_kir_value_t *staged[SORT_MAX_OPERANDS]; /* in_shared: the sorted rows, for the copy out */
  kiln_kir_value_t *th, *bl;
} sort_emit_t;

/* Row index `row` and position `i` (affine expressions) -> the element's logical index. */
static void element_index(sort_emit_t *e, kiln_affine_expr_t *row, kiln_affine_expr_t *i,
                          kiln_affine_expr_t **out) {
  sort_plan_t *p = &e->p;
  int64_t other[KILN_KIR_MAX_RANK];
  int no = 0;
  for (int d = 0; d < p->rank; d++)
    if (d != p->dim) other[no++] = p->dims[d];
  kiln_affine_expr_t *oi[KILN_KIR_MAX_RANK];
  if (no > 0) kiln_affine_delinearize(e->x, row, other, (size_t)no, oi);
  int k = 0;
  for (int d = 0; d < p->rank; d++) out[d] = d == p->dim ? i : oi[k++];
}

/* A map over (th_x, bl_x, it) with the given upper bounds. */
static kiln_indexing_map_t *step_map(sort_emit_t *e, int64_t iters) {
  const char *names[3] = {"th_x", "bl_x", "it"};
  int64_t hi[3] = {e->p.l.threads - 1, e->p.l.blocks - 1, iters - 1};
  kiln_indexing_map_t *map = kiln_indexing_map_create(e->x, 3, 0, 0);
  for (int i = 0; i < 3; i++) {
    kiln_indexing_map_set_name(map, KILN_INDEXING_DIM, (size_t)i, names[i]);
    kiln_indexing_map_set_bounds(map, KILN_INDEXING_DIM, (size_t)i, 0, hi[i]);
  }
  return kiln_kir_module_adopt_map(e->m, map);
}

/* A map over (th_x, bl_x, it, pos), `it` below `iters`, giving the logical index of element
 * pos of row `row` (an expression over the first three). */
static kiln_indexing_map_t *position_map(sort_emit_t *e, int64_t iters, kiln_affine_expr_t *row) {
  const char *names[4] = {"th_x", "bl_x", "it", "pos"};
  int64_t hi[4] = {e->p.l.threads - 1, e->p.l.blocks - 1, iters - 1, e->p.l.padded - 1};
  kiln_indexing_map_t *map = kiln_indexing_map_create(e->x, 4, 0, 0);
  for (int d = 0; d < 4; d++) {
    kiln_indexing_map_set_name(map, KILN_INDEXING_DIM, (size_t)d, names[d]);
    kiln_indexing_map_set_bounds(map, KILN_INDEXING_DIM, (size_t)d, 0, hi[d]);
  }
  map = kiln_kir_module_adopt_map(e->m, map);
  kiln_affine_expr_t *idx[KILN_KIR_MAX_RANK];
  element_index(e, row, kiln_affine_dim(e->x, 3), idx);
  for (int d = 0; d < e->p.rank; d++) kiln_indexing_map_add_result(map, idx[d]);
  kiln_indexing_map_simplify(map);
  return map;
}

static const kiln_kir_type_t *const *work_types(sort_emit_t *e, const kiln_kir_type_t **t, size_t *n) {
  size_t k = 0;
  for (int i = 0; i < e->p.nops; i++) t[k++] = e->work[i]->type;
  for (int i = 0; e->p.l.merge && i < e->p.nops; i++) t[k++] = e->scr[i]->type;
  if (e->pos) t[k++] = e->pos->type;
  if (e->counts) t[k++] = e->counts->type;
  *n = k;
  return t;
}

static size_t work_values(sort_emit_t *e, kiln_kir_value_t **v) {
  size_t k = 0;
  for (int i = 0; i < e->p.nops; i++) v[k++] = e->work[i];
  for (int i = 0; e->p.l.merge && i < e->p.nops; i++) v[k++] = e->scr[i];
  if (e->pos) v[k++] = e->pos;
  if (e->counts) v[k++] = e->counts;
  return k;
}

static void set_work(sort_emit_t *e, kiln_kir_value_t *const *v) {
  int k = 0;
  for (int i = 0; i < e->p.nops; i++) e->work[i] = v[k++];
  for (int i = 0; e->p.l.merge && i < e->p.nops; i++) e->scr[i] = v[k++];
  if (e->pos) e->pos = v[k++];
  if (e->counts) e->counts = v[k];
}

/* Opens `for iv in [lb, ub) step step` threading the working tensors; the builder is left in
 * its body with the working tensors set to the body's arguments. Returns the loop (close
 * with close_region). open_work_loop: constant bounds, step 1. */
static kiln_kir_op_t *open_work_loop_over(sort_emit_t *e, kiln_kir_value_t *lb,
                                          kiln_kir_value_t *ub, kiln_kir_value_t *step,
                                          kiln_kir_value_t **iv) {
  kiln_kir_builder_t *b = &e->b;
  kiln_kir_value_t *init[SORT_MAX_WORK] = {0};
  size_t nw = work_values(e, init);
  kiln_kir_op_t *loop = kiln_kir_for(b, lb, ub, step, init, nw);
  if (!loop) return NULL;
  kiln_kir_region_t *body = kiln_kir_op_region(loop, 0);
  kiln_kir_builder_enter(b, body);
  *iv = kiln_kir_region_arg(body, 0);
  kiln_kir_value_t *args[SORT_MAX_WORK] = {0};
  for (size_t i = 0; i < nw; i++) args[i] = kiln_kir_region_arg(body, i + 1);
  set_work(e, args);
  return loop;
}

static kiln_kir_op_t *open_work_loop(sort_emit_t *e, int64_t lb, int64_t ub,
                                     kiln_kir_value_t **iv) {
  kiln_kir_builder_t *b = &e->b;
  return open_work_loop_over(e, kiln_kir_const_index(b, lb), kiln_kir_const_index(b, ub),
                             kiln_kir_const_index(b, 1), iv);
}

/* A thread's own loop: `for it in [0, iters)` (see open_work_loop). */
static kiln_kir_op_t *open_thread_loop(sort_emit_t *e, int64_t iters, kiln_kir_value_t **it) {
  return open_work_loop(e, 0, iters, it);
}

/* Opens `if cond` over the working tensors (the else branch yields them unchanged); the
 * builder is left in the then branch. Returns the if (close with close_region). */
static kiln_kir_op_t *open_guard(sort_emit_t *e, kiln_kir_value_t *cond) {
  kiln_kir_builder_t *b = &e->b;
  const kiln_kir_type_t *types[SORT_MAX_WORK] = {0};
  size_t nw;
  work_types(e, types, &nw);
  kiln_kir_op_t *iff = kiln_kir_if(b, cond, types, nw);
  if (!iff) return NULL;
  kiln_kir_value_t *cur[SORT_MAX_WORK] = {0};
  work_values(e, cur);
  kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 1));
  kiln_kir_yield(b, cur, nw);
  kiln_kir_builder_exit(b);
  kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 0));
  return iff;
}

/* Yields the working tensors from the current region, leaves it, and takes `op`'s results
 * as the new working tensors. */
static void close_region(sort_emit_t *e, kiln_kir_op_t *op) {
  kiln_kir_value_t *cur[SORT_MAX_WORK] = {0};
  size_t nw = work_values(e, cur);
  kiln_kir_yield(&e->b, cur, nw);
  kiln_kir_builder_exit(&e->b);
  for (size_t i = 0; i < nw; i++) cur[i] = kiln_kir_op_result(op, i);
  set_work(e, cur);
}

static void barrier(sort_emit_t *e) {
  kiln_kir_value_t *cur[SORT_MAX_WORK] = {0};
  size_t nw = work_values(e, cur);
  kiln_kir_op_t *bar = kiln_kir_barrier(&e->b, cur, nw);
  if (!bar) return;
  for (size_t i = 0; i < nw; i++) cur[i] = kiln_kir_op_result(bar, i);
  set_work(e, cur);
}

static kiln_kir_value_t *in_range(sort_emit_t *e, kiln_kir_value_t *v, int64_t limit, kiln_kir_value_t *acc) {
  kiln_kir_value_t *c = kiln_kir_cmp(&e->b, KILN_KIR_CMP_LT, v, kiln_kir_const_index(&e->b, limit));
  return acc ? kiln_kir_binary(&e->b, KILN_KIR_AND, acc, c) : c;
}

typedef enum copy_kind {
  COPY_IN = 0, /* inputs -> working tensors (outputs, or shared rows), positions */
  COPY_OUT,    /* staged shared rows -> outputs */
} copy_kind_t;

/* Copies every element of the block's rows: operand rows into the working tensors (and
 * positions into shared memory), or the sorted shared rows out to the outputs. */
static bool emit_copy(sort_emit_t *e, copy_kind_t kind) {
  sort_plan_t *p = &e->p;
  kiln_affine_ctx_t *x = e->x;
  kiln_kir_builder_t *b = &e->b;
  int64_t n = p->l.row_length, G = p->l.rows_per_block;
  kiln_indexing_map_t *map = step_map(e, p->copy_iters);
  /* lin = it * T + th: the element of the block's rows; row = bl * G + lin / n. */
  kiln_affine_expr_t *lin = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 2), p->l.threads),
                                            kiln_affine_dim(x, 0));
  kiln_affine_expr_t *row = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), G),
                                            kiln_affine_floordiv(x, lin, kiln_affine_const(x, n)));
  kiln_affine_expr_t *i = kiln_affine_mod(x, lin, kiln_affine_const(x, n));
  kiln_affine_expr_t *idx[KILN_KIR_MAX_RANK];
  element_index(e, row, i, idx);
  kiln_indexing_map_add_result(map, lin);
  kiln_indexing_map_add_result(map, row);
  kiln_indexing_map_add_result(map, i);
  for (int d = 0; d < p->rank; d++) kiln_indexing_map_add_result(map, idx[d]);
  kiln_indexing_map_simplify(map);
  kiln_kir_value_t *it = NULL;
  kiln_kir_op_t *loop = open_thread_loop(e, p->copy_iters, &it);
  if (!loop) return false;
  kiln_kir_value_t *dims[3] = {e->th, e->bl, it};
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(b, map, dims, 3, NULL, 0);
  if (!ap) return false;
  kiln_kir_value_t *vlin = kiln_kir_op_result(ap, 0), *vrow = kiln_kir_op_result(ap, 1);
  kiln_kir_value_t *cond = NULL;
  if (p->copy_iters * p->l.threads > G * n) cond = in_range(e, vlin, G * n, cond);
  if (p->l.blocks * G > p->l.rows) cond = in_range(e, vrow, p->l.rows, cond);
  kiln_kir_op_t *iff = cond ? open_guard(e, cond) : NULL;
  if (cond && !iff) return false;
  kiln_kir_value_t *vidx[KILN_KIR_MAX_RANK];
  for (int d = 0; d < p->rank; d++) vidx[d] = kiln_kir_op_result(ap, (size_t)(3 + d));
  /* Global tensors are indexed by element, shared rows by lin. */
  kiln_kir_value_t *const *gi = vidx, *const *si = p->l.in_shared ? &vlin : vidx;
  size_t gn = (size_t)p->rank, sn = p->l.in_shared ? 1 : (size_t)p->rank;
  for (int k = 0; k < p->nops; k++) {
    if (kind == COPY_IN) {
      kiln_kir_value_t *v = kiln_kir_extract(b, e->tensors[e->in_tensor[k]], gi, gn);
      e->work[k] = kiln_kir_insert(b, v, e->work[k], si, sn);
    } else {
      kiln_kir_value_t *v = kiln_kir_extract(b, e->staged[k], si, sn);
      e->work[k] = kiln_kir_insert(b, v, e->work[k], gi, gn);
    }
  }
  if (e->pos && kind == COPY_IN) {
    kiln_kir_value_t *pi = kiln_kir_convert(b, kiln_kir_op_result(ap, 2), kiln_kir_type_scalar(e->m, KILN_S32));
    e->pos = kiln_kir_insert(b, pi, e->pos, &vlin, 1);
  }
  if (iff) close_region(e, iff);
  close_region(e, loop);
  return kiln_kir_builder_ok(b);
}

/* less(a, b) by the comparator: a's elements as the lhs parameters (2k), b's as the rhs. */
static kiln_kir_value_t *less(sort_emit_t *e, kiln_kir_value_t *const *a, kiln_kir_value_t *const *b) {
  kiln_kir_value_t *args[2 * SORT_MAX_OPERANDS], *res[KILN_ELEM_MAX_OUTPUTS];
  for (int k = 0; k < e->p.nops; k++) {
    args[2 * k] = a[k];
    args[2 * k + 1] = b[k];
  }
  int n = kiln_elemental_emit_scalar_computation(&e->fn, e->p.cmp, args, 2 * e->p.nops, res);
  if (n != 1) {
    if (n >= 0)
      kiln_elemental_fail(&e->fn, KILN_ERR_INVALID("comparator %s gives %d results, not one pred",
                                                   e->p.cmp->name, n));
    return NULL;
  }
  if (!res[0] || res[0]->type->kind != KILN_KIR_TYPE_SCALAR || res[0]->type->elem != KILN_PRED) {
    kiln_elemental_fail(&e->fn,
                        KILN_ERR_INVALID("comparator %s does not return pred", e->p.cmp->name));
    return NULL;
  }
  return res[0];
}

/* Key function `fn` of the comparator (reading one operand's parameter only: comparator_keys,
 * add_radix_key) applied to that operand's element x. */
static kiln_kir_value_t *sort_key(sort_emit_t *e, const kiln_hlo_instruction_t *fn,
                                  kiln_kir_value_t *x) {
  kiln_kir_value_t *args[2 * SORT_MAX_OPERANDS];
  for (int k = 0; k < 2 * e->p.nops; k++) args[k] = x;
  return kiln_elemental_emit_scalar_value(&e->fn, e->p.cmp, args, 2 * e->p.nops, fn, NULL, NULL, 0);
}

/* The comparator on keys: whether the element keyed `ka` goes before the one keyed `kb`. */
static kiln_kir_value_t *keys_less(sort_emit_t *e, kiln_kir_value_t *ka, kiln_kir_value_t *kb) {
  const kiln_hlo_instruction_t *bound[2] = {e->p.key_a, e->p.key_b};
  kiln_kir_value_t *vals[2] = {ka, kb};
  return kiln_elemental_emit_scalar_value(&e->fn, e->p.cmp, NULL, 0, e->p.cmp->root, bound, vals,
                                          2);
}

/* select(c, x, y) of one element: a float element goes through its bits, since the host
 * gives an integer select a conditional move but a float one (its condition not a float
 * compare) a branch, which a merge step mispredicts half the time on random data. */
static kiln_kir_value_t *select_element(sort_emit_t *e, kiln_kir_value_t *c, kiln_kir_value_t *x,
                                        kiln_kir_value_t *y) {
  kiln_kir_builder_t *b = &e->b;
  kiln_elem_type_t t = x->type->elem, bits = KILN_ELEM_TYPE_COUNT;
  if (kiln_elem_type_is_float(t)) {
    int bytes = kiln_elem_type_storage_bytes(t);
    bits = bytes == 2   ? KILN_S16
           : bytes == 4 ? KILN_S32
           : bytes == 8 ? KILN_S64
                        : KILN_ELEM_TYPE_COUNT;
  }
  if (bits == KILN_ELEM_TYPE_COUNT) return kiln_kir_select(b, c, x, y);
  const kiln_kir_type_t *it = kiln_kir_type_scalar(e->m, bits);
  return kiln_kir_bitcast(
      b, kiln_kir_select(b, c, kiln_kir_bitcast(b, x, it), kiln_kir_bitcast(b, y, it)), x->type);
}

static kiln_kir_value_t *idx_op(sort_emit_t *e, kiln_kir_opcode_t op, kiln_kir_value_t *a,
                                kiln_kir_value_t *b) {
  return kiln_kir_binary(&e->b, op, a, b);
}

static kiln_kir_value_t *idx_c(sort_emit_t *e, int64_t v) {
  return kiln_kir_const_index(&e->b, v);
}

/* One compare-exchange step of the network: merge size k = 2^lk, distance j = 2^lj (the
 * step flips when lj + 1 == lk), both run-time values of the step loop. Pair qq of a row
 * compares i = (qq >> lj) << (lj + 1) | (qq & (j - 1)) with l = i + j, or, flipping, with
 * the mirror element (qq >> lj) << (lj + 1) + 2j - 1 - (qq & (j - 1)). */
static bool emit_step(sort_emit_t *e, kiln_kir_value_t *lk, kiln_kir_value_t *lj) {
  sort_plan_t *p = &e->p;
  kiln_affine_ctx_t *x = e->x;
  kiln_kir_builder_t *b = &e->b;
  int64_t n = p->l.row_length, G = p->l.rows_per_block, H = p->pairs;
  /* (th_x, bl_x, it) -> (qq, row, g * n): the thread's pair in its row. */
  kiln_indexing_map_t *map = step_map(e, p->pair_iters);
  kiln_affine_expr_t *q = kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 2), p->l.threads),
                                          kiln_affine_dim(x, 0));
  kiln_affine_expr_t *g = kiln_affine_floordiv(x, q, kiln_affine_const(x, H));
  kiln_indexing_map_add_result(map, kiln_affine_mod(x, q, kiln_affine_const(x, H)));
  kiln_indexing_map_add_result(
      map, kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), G), g));
  kiln_indexing_map_add_result(map, kiln_affine_mul_const(x, g, n));
  kiln_indexing_map_simplify(map);
  /* (th_x, bl_x, it, pos) -> the logical index of element pos of the thread's row. */
  kiln_indexing_map_t *emap =
      p->l.in_shared
          ? NULL
          : position_map(e, p->pair_iters,
                         kiln_affine_add(x, kiln_affine_mul_const(x, kiln_affine_dim(x, 1), G), g));

  kiln_kir_value_t *it = NULL;
  kiln_kir_op_t *loop = open_thread_loop(e, p->pair_iters, &it);
  if (!loop) return false;
  kiln_kir_value_t *dims[4] = {e->th, e->bl, it, NULL};
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(b, map, dims, 3, NULL, 0);
  if (!ap) return false;
  kiln_kir_value_t *qq = kiln_kir_op_result(ap, 0), *gn = kiln_kir_op_result(ap, 2);
  kiln_kir_value_t *one = idx_c(e, 1);
  kiln_kir_value_t *j = idx_op(e, KILN_KIR_SHL, one, lj);
  kiln_kir_value_t *base = idx_op(e, KILN_KIR_SHL, idx_op(e, KILN_KIR_SHR_LOGICAL, qq, lj),
                                  idx_op(e, KILN_KIR_ADD, lj, one));
  kiln_kir_value_t *off = idx_op(e, KILN_KIR_AND, qq, idx_op(e, KILN_KIR_SUB, j, one));
  kiln_kir_value_t *vi_pos = idx_op(e, KILN_KIR_ADD, base, off);
  kiln_kir_value_t *mirror = idx_op(
      e, KILN_KIR_SUB,
      idx_op(e, KILN_KIR_ADD, base, idx_op(e, KILN_KIR_SUB, idx_op(e, KILN_KIR_SHL, j, one), one)),
      off);
  kiln_kir_value_t *flip = kiln_kir_cmp(b, KILN_KIR_CMP_EQ, idx_op(e, KILN_KIR_ADD, lj, one), lk);
  kiln_kir_value_t *vl_pos = kiln_kir_select(b, flip, mirror, idx_op(e, KILN_KIR_ADD, vi_pos, j));
  kiln_kir_value_t *cond = NULL;
  if (p->l.padded > n) cond = in_range(e, vl_pos, n, cond);
  if (p->l.blocks * G > p->l.rows) cond = in_range(e, kiln_kir_op_result(ap, 1), p->l.rows, cond);
  if (!kiln_kir_builder_ok(b)) return false;
  kiln_kir_op_t *iff = cond ? open_guard(e, cond) : NULL;
  if (cond && !iff) return false;
  size_t mark;
  kiln_elemental_enter(&e->fn, b->region, &mark);
  kiln_kir_value_t *vi[KILN_KIR_MAX_RANK], *vl[KILN_KIR_MAX_RANK];
  kiln_kir_value_t *psi = idx_op(e, KILN_KIR_ADD, gn, vi_pos),
                   *psl = idx_op(e, KILN_KIR_ADD, gn, vl_pos);
  if (!p->l.in_shared) {
    dims[3] = vi_pos;
    kiln_kir_op_t *api = kiln_kir_apply_indexing(b, emap, dims, 4, NULL, 0);
    dims[3] = vl_pos;
    kiln_kir_op_t *apl = kiln_kir_apply_indexing(b, emap, dims, 4, NULL, 0);
    if (!api || !apl) return false;
    for (int d = 0; d < p->rank; d++) {
      vi[d] = kiln_kir_op_result(api, (size_t)d);
      vl[d] = kiln_kir_op_result(apl, (size_t)d);
    }
  }
  kiln_kir_value_t *const *wi = p->l.in_shared ? &psi : vi, *const *wl = p->l.in_shared ? &psl : vl;
  size_t wn = p->l.in_shared ? 1 : (size_t)p->rank;
  kiln_kir_value_t *ai[SORT_MAX_OPERANDS], *al[SORT_MAX_OPERANDS];
  for (int o = 0; o < p->nops; o++) {
    ai[o] = kiln_kir_extract(b, e->work[o], wi, wn);
    al[o] = kiln_kir_extract(b, e->work[o], wl, wn);
  }
  kiln_kir_value_t *swap = less(e, al, ai);
  kiln_kir_value_t *pi = NULL, *pl = NULL;
  if (swap && e->pos) {
    pi = kiln_kir_extract(b, e->pos, &psi, 1);
    pl = kiln_kir_extract(b, e->pos, &psl, 1);
    kiln_kir_value_t *after = less(e, ai, al);
    if (after) {
      kiln_kir_value_t *tie = kiln_kir_binary(
          b, KILN_KIR_AND, kiln_kir_unary(b, KILN_KIR_NOT, after), kiln_kir_cmp(b, KILN_KIR_CMP_LT, pl, pi));
      swap = kiln_kir_binary(b, KILN_KIR_OR, swap, tie);
    } else {
      swap = NULL;
    }
  }
  kiln_elemental_exit(&e->fn, mark);
  if (!swap) return false;
  for (int o = 0; o < p->nops; o++) {
    kiln_kir_value_t *ni = select_element(e, swap, al[o], ai[o]);
    kiln_kir_value_t *nl = select_element(e, swap, ai[o], al[o]);
    e->work[o] = kiln_kir_insert(b, ni, e->work[o], wi, wn);
    e->work[o] = kiln_kir_insert(b, nl, e->work[o], wl, wn);
  }
  if (e->pos) {
    e->pos = kiln_kir_insert(b, kiln_kir_select(b, swap, pl, pi), e->pos, &psi, 1);
    e->pos = kiln_kir_insert(b, kiln_kir_select(b, swap, pi, pl), e->pos, &psl, 1);
  }
  if (iff) close_region(e, iff);
  close_region(e, loop);
  return kiln_kir_builder_ok(b);
}

/* The network as one loop over its steps, so the kernel's size does not grow with them:
 *   for s in [0, steps) iter (working tensors) { barrier; step(2^lk, 2^lj); yield }
 * with lk = 1 + #{m in [1, log2 N) : s >= m (m + 1) / 2} (stage lk starts at step
 * lk (lk - 1) / 2) and lj = lk - 1 - (s - lk (lk - 1) / 2), computed from s alone so that
 * they stay uniform (the host hoists them out of its thread loops). The barrier opens each
 * iteration (the copy or the previous step wrote the rows). */
static bool emit_steps(sort_emit_t *e) {
  kiln_kir_builder_t *b = &e->b;
  kiln_kir_value_t *step = NULL;
  kiln_kir_op_t *loop = open_work_loop(e, 0, e->p.l.steps, &step);
  if (!loop) return false;
  barrier(e);
  kiln_kir_value_t *one = idx_c(e, 1), *lk = one;
  for (int64_t m = 1; m < log2_exact(e->p.l.padded); m++) {
    kiln_kir_value_t *past = kiln_kir_cmp(b, KILN_KIR_CMP_GE, step, idx_c(e, m * (m + 1) / 2));
    lk = idx_op(e, KILN_KIR_ADD, lk, kiln_kir_select(b, past, one, idx_c(e, 0)));
  }
  kiln_kir_value_t *lk1 = idx_op(e, KILN_KIR_SUB, lk, one);
  kiln_kir_value_t *stage_start =
      idx_op(e, KILN_KIR_SHR_LOGICAL, idx_op(e, KILN_KIR_MUL, lk, lk1), one);
  kiln_kir_value_t *lj = idx_op(e, KILN_KIR_SUB, lk1, idx_op(e, KILN_KIR_SUB, step, stage_start));
  /* Distances below SORT_CONST_DISTANCES get a step of their own with j constant (their
   * element patterns are then known: the host vectorizes them without gathers); the rest
   * share one step with j at run time. Exactly one of the guarded steps runs. */
  for (int64_t c = 0; c <= SORT_CONST_DISTANCES && c < log2_exact(e->p.l.padded); c++) {
    bool generic = c == SORT_CONST_DISTANCES;
    kiln_kir_value_t *which =
        kiln_kir_cmp(b, generic ? KILN_KIR_CMP_GE : KILN_KIR_CMP_EQ, lj, idx_c(e, c));
    kiln_kir_op_t *iff = open_guard(e, which);
    if (!iff || !emit_step(e, lk, generic ? lj : idx_c(e, c))) return false;
    close_region(e, iff);
  }
  close_region(e, loop);
  return kiln_kir_builder_ok(b);
}

/* Index values for the element at position `pos` of the block's row. */
static bool row_element(sort_emit_t *e, kiln_indexing_map_t *map, kiln_kir_value_t *it,
                        kiln_kir_value_t *pos, kiln_kir_value_t **idx) {
  kiln_kir_value_t *dims[4] = {e->th, e->bl, it, pos};
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(&e->b, map, dims, 4, NULL, 0);
  if (!ap) return false;
  for (int d = 0; d < e->p.rank; d++) idx[d] = kiln_kir_op_result(ap, (size_t)d);
  return true;
}

/* Every operand's element at position `pos` of the block's row, read from `from`. */
static bool row_elements(sort_emit_t *e, kiln_indexing_map_t *map, kiln_kir_value_t *it,
                         kiln_kir_value_t *pos, kiln_kir_value_t *const *from,
                         kiln_kir_value_t **out) {
  kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
  if (!row_element(e, map, it, pos, idx)) return false;
  for (int k = 0; k < e->p.nops; k++)
    out[k] = kiln_kir_extract(&e->b, from[k], idx, (size_t)e->p.rank);
  return kiln_kir_builder_ok(&e->b);
}

static kiln_kir_value_t *idx_min(sort_emit_t *e, kiln_kir_value_t *a, kiln_kir_value_t *b) {
  return kiln_kir_select(&e->b, kiln_kir_cmp(&e->b, KILN_KIR_CMP_LT, a, b), a, b);
}

static kiln_kir_value_t *idx_max(sort_emit_t *e, kiln_kir_value_t *a, kiln_kir_value_t *b) {
  return kiln_kir_select(&e->b, kiln_kir_cmp(&e->b, KILN_KIR_CMP_LT, a, b), b, a);
}

/* A binary search for the length of a counted prefix of at most min(2^lw, limit) positions:
 *   for step in [0, lw + 1) iter (count = 0) {
 *     cand = count + (2^lw >> step); inside = cand <= limit
 *     count = inside && counted(cand - 1) ? cand : count }
 * search_open leaves the builder in the body with cand and inside set; the caller emits
 * whether position cand - 1 is counted (reading only valid positions, also when not inside)
 * and hands it to search_close, which returns the count. */
typedef struct prefix_search {
  kiln_kir_op_t *loop;
  kiln_kir_value_t *count, *cand, *inside;
  size_t mark;
} prefix_search_t;

static bool search_open(sort_emit_t *e, kiln_kir_value_t *lw, kiln_kir_value_t *limit,
                        prefix_search_t *ps) {
  kiln_kir_builder_t *b = &e->b;
  kiln_kir_value_t *one = idx_c(e, 1), *zero = idx_c(e, 0);
  kiln_kir_value_t *w = idx_op(e, KILN_KIR_SHL, one, lw);
  ps->loop = kiln_kir_for(b, zero, idx_op(e, KILN_KIR_ADD, lw, one), one, &zero, 1);
  if (!ps->loop) return false;
  kiln_kir_region_t *body = kiln_kir_op_region(ps->loop, 0);
  kiln_kir_builder_enter(b, body);
  kiln_elemental_enter(&e->fn, body, &ps->mark);
  ps->count = kiln_kir_region_arg(body, 1);
  ps->cand = idx_op(e, KILN_KIR_ADD, ps->count,
                    idx_op(e, KILN_KIR_SHR_LOGICAL, w, kiln_kir_region_arg(body, 0)));
  ps->inside = kiln_kir_cmp(b, KILN_KIR_CMP_LE, ps->cand, limit);
  return kiln_kir_builder_ok(b);
}

static kiln_kir_value_t *search_close(sort_emit_t *e, prefix_search_t *ps,
                                      kiln_kir_value_t *counted) {
  kiln_kir_builder_t *b = &e->b;
  kiln_kir_value_t *next = kiln_kir_select(b, kiln_kir_binary(b, KILN_KIR_AND, ps->inside, counted),
                                           ps->cand, ps->count);
  kiln_kir_yield(b, &next, 1);
  kiln_elemental_exit(&e->fn, ps->mark);
  kiln_kir_builder_exit(b);
  return kiln_kir_op_result(ps->loop, 0);
}

/* The pair of sorted runs A = [s, s + w), B = [s + w, s + 2w) (w = 2^lw) holding position
 * `pos` of the row, cut at the row's end: len_a >= 1 when pos < n, len_b may be 0. */
typedef struct run_pair {
  kiln_kir_value_t *a_start, *b_start, *len_a, *len_b;
} run_pair_t;

static run_pair_t pair_of(sort_emit_t *e, kiln_kir_value_t *pos, kiln_kir_value_t *lw) {
  run_pair_t r;
  kiln_kir_value_t *one = idx_c(e, 1), *vn = idx_c(e, e->p.l.row_length);
  kiln_kir_value_t *w = idx_op(e, KILN_KIR_SHL, one, lw), *lw1 = idx_op(e, KILN_KIR_ADD, lw, one);
  r.a_start = idx_op(e, KILN_KIR_SHL, idx_op(e, KILN_KIR_SHR_LOGICAL, pos, lw1), lw1);
  r.b_start = idx_op(e, KILN_KIR_ADD, r.a_start, w);
  r.len_a = idx_min(e, w, idx_op(e, KILN_KIR_SUB, vn, r.a_start));
  r.len_b = idx_max(e, idx_c(e, 0), idx_min(e, w, idx_op(e, KILN_KIR_SUB, vn, r.b_start)));
  return r;
}

/* Loop-carried values of a merge: ia, ib, A's and B's head element of every operand, their keys
 * (emit_row_merge_pass with comparator keys), then the working tensors. */
#define MERGE_MAX_ITER (4 + 2 * SORT_MAX_OPERANDS + SORT_MAX_WORK)

/* Every operand's element `i` of the run at `start` of `len` elements: for i past its end, the
 * run's last element or, given `past` (a run that may be empty), the element at `past`
 * (always valid positions). */
static bool merge_head(sort_emit_t *e, kiln_indexing_map_t *map, kiln_kir_value_t *start,
                       kiln_kir_value_t *len, kiln_kir_value_t *i, kiln_kir_value_t *past,
                       kiln_kir_value_t *const *from, kiln_kir_value_t **out) {
  kiln_kir_builder_t *b = &e->b;
  kiln_kir_value_t *in = kiln_kir_cmp(b, KILN_KIR_CMP_LT, i, len);
  kiln_kir_value_t *pos =
      past ? kiln_kir_select(b, in, idx_op(e, KILN_KIR_ADD, start, i), past)
           : idx_op(e, KILN_KIR_ADD, start,
                    kiln_kir_select(b, in, i, idx_op(e, KILN_KIR_SUB, len, idx_c(e, 1))));
  return row_elements(e, map, idx_c(e, 0), pos, from, out);
}

/* Opens a merge loop `for pos in [lb, ub)` carrying init[0..1] (the heads' positions),
 * init[2 .. 2 + 2 nops) (A's and B's heads), `nextra` more values after them (the caller's)
 * and the working tensors (filled in here); the builder is left in its body with the
 * tensors set to its arguments, args[] holding all of them. *nw: how many values the loop
 * carries; *inner: the elemental scope to close. */
static kiln_kir_op_t *merge_loop_open(sort_emit_t *e, kiln_kir_value_t *lb, kiln_kir_value_t *ub,
                                      kiln_kir_value_t **init, int nextra, kiln_kir_value_t **args,
                                      kiln_kir_value_t **pos, size_t *nw, size_t *inner) {
  kiln_kir_builder_t *b = &e->b;
  size_t base = 2 + 2 * (size_t)e->p.nops + (size_t)nextra;
  *nw = work_values(e, init + base) + base;
  kiln_kir_op_t *loop = kiln_kir_for(b, lb, ub, idx_c(e, 1), init, *nw);
  if (!loop) return NULL;
  kiln_kir_region_t *body = kiln_kir_op_region(loop, 0);
  kiln_kir_builder_enter(b, body);
  kiln_elemental_enter(&e->fn, body, inner);
  for (size_t k = 0; k < *nw; k++) args[k] = kiln_kir_region_arg(body, k + 1);
  set_work(e, args + base);
  *pos = kiln_kir_region_arg(body, 0);
  return loop;
}

/* The end of a merge loop's body: when `take_b`, B's head (xb) is written at `pos` and B's run
 * advances, else A's: the head positions cur[0] (A) and cur[1] (B) step to nxt[0] / nxt[1],
 * the taken head is replaced by its successor (na / nb, loaded before the compare);
 * `extra[0 .. nextra)` are yielded after the heads. Yields the loop's values, leaves its body
 * and takes its results as the working tensors. */
static bool merge_step_finish(sort_emit_t *e, bool into_scratch, kiln_indexing_map_t *map,
                              kiln_kir_value_t *pos, kiln_kir_value_t *const *cur,
                              kiln_kir_value_t *const *nxt, kiln_kir_value_t *take_b,
                              kiln_kir_value_t *const *xa, kiln_kir_value_t *const *xb,
                              kiln_kir_value_t *const *na, kiln_kir_value_t *const *nb,
                              kiln_kir_value_t *const *extra, int nextra, kiln_kir_op_t *loop,
                              size_t nw, size_t inner) {
  kiln_kir_builder_t *b = &e->b;
  int no = e->p.nops;
  size_t base = 2 + 2 * (size_t)no + (size_t)nextra;
  kiln_kir_value_t *vidx[KILN_KIR_MAX_RANK];
  if (!take_b || !row_element(e, map, idx_c(e, 0), pos, vidx)) return false;
  kiln_kir_value_t *next[MERGE_MAX_ITER] = {kiln_kir_select(b, take_b, cur[0], nxt[0]),
                                            kiln_kir_select(b, take_b, nxt[1], cur[1])};
  for (int k = 0; k < no; k++) {
    kiln_kir_value_t **to = into_scratch ? &e->scr[k] : &e->work[k];
    *to = kiln_kir_insert(b, select_element(e, take_b, xb[k], xa[k]), *to, vidx, (size_t)e->p.rank);
    next[2 + k] = select_element(e, take_b, xa[k], na[k]);
    next[2 + no + k] = select_element(e, take_b, nb[k], xb[k]);
  }
  for (int k = 0; k < nextra; k++) next[2 + 2 * no + k] = extra[k];
  work_values(e, next + base);
  kiln_kir_yield(b, next, nw);
  kiln_elemental_exit(&e->fn, inner);
  kiln_kir_builder_exit(b);
  kiln_kir_value_t *res[MERGE_MAX_ITER] = {0};
  for (size_t k = base; k < nw; k++) res[k] = kiln_kir_op_result(loop, k);
  set_work(e, res + base);
  return kiln_kir_builder_ok(b);
}

/* Whether to take B's head: b_ok and (not a_ok, or B goes first). */
static kiln_kir_value_t *take_b_of(sort_emit_t *e, kiln_kir_value_t *a_ok, kiln_kir_value_t *b_ok,
                                   kiln_kir_value_t *b_first) {
  kiln_kir_builder_t *b = &e->b;
  if (!b_first) return NULL;
  return kiln_kir_binary(
      b, KILN_KIR_AND, b_ok,
      kiln_kir_binary(b, KILN_KIR_OR, kiln_kir_unary(b, KILN_KIR_NOT, a_ok), b_first));
}

/* One merge pass (pass `lw`: sorted runs of w = 2^lw become runs of 2w) along the merge
 * path: thread th writes the C = N / T consecutive positions [th C, th C + C) of the row
 * (both powers of two, so the chunk holds whole pairs of runs when 2w <= C and lies inside
 * one pair otherwise). Where the chunk starts inside a pair, at diagonal d = th C - s, the
 * number of A elements among the pair's first d outputs is found by a binary search (lw + 1
 * probes: A[i] goes first unless B[d - i - 1] goes before it, which holds for a prefix of i);
 * then the thread merges sequentially, starting afresh at each pair's first position, taking
 * B's element only when it goes before A's, so equal elements keep their order: about one
 * comparator call per element and pass. Reads the outputs and writes every position of the
 * row once into the scratch tensors, or the other way round. */
static bool emit_merge_pass(sort_emit_t *e, bool into_scratch, kiln_kir_value_t *lw) {
  sort_plan_t *p = &e->p;
  kiln_kir_builder_t *b = &e->b;
  int64_t n = p->l.row_length, C = p->chunk;
  kiln_indexing_map_t *map = position_map(e, 1, kiln_affine_dim(e->x, 1));
  kiln_kir_value_t *one = idx_c(e, 1), *zero = idx_c(e, 0);
  kiln_kir_value_t *c0 = idx_op(e, KILN_KIR_MUL, e->th, idx_c(e, C));
  kiln_kir_op_t *iff = p->l.padded > n ? open_guard(e, in_range(e, c0, n, NULL)) : NULL;
  if (p->l.padded > n && !iff) return false;
  size_t mark;
  kiln_elemental_enter(&e->fn, b->region, &mark);
  kiln_kir_value_t *from[SORT_MAX_OPERANDS];
  for (int k = 0; k < p->nops; k++) from[k] = into_scratch ? e->work[k] : e->scr[k];
  run_pair_t r = pair_of(e, c0, lw);
  kiln_kir_value_t *d = idx_op(e, KILN_KIR_SUB, c0, r.a_start);
  kiln_kir_value_t *lo = idx_max(e, zero, idx_op(e, KILN_KIR_SUB, d, r.len_b));
  kiln_kir_value_t *span = idx_op(e, KILN_KIR_SUB, idx_min(e, d, r.len_a), lo);
  /* The search: i = lo + cand - 1 is counted while A[i] goes first (probes outside the span
   * read the chunk's first element, a valid position). */
  prefix_search_t ps;
  if (!search_open(e, lw, span, &ps)) return false;
  kiln_kir_value_t *i = idx_op(e, KILN_KIR_SUB, idx_op(e, KILN_KIR_ADD, lo, ps.cand), one);
  kiln_kir_value_t *ai = kiln_kir_select(b, ps.inside, idx_op(e, KILN_KIR_ADD, r.a_start, i), c0);
  kiln_kir_value_t *bi =
      kiln_kir_select(b, ps.inside,
                      idx_op(e, KILN_KIR_SUB, idx_op(e, KILN_KIR_ADD, r.b_start, d),
                             idx_op(e, KILN_KIR_ADD, i, one)),
                      c0);
  kiln_kir_value_t *xa[SORT_MAX_OPERANDS], *xb[SORT_MAX_OPERANDS];
  if (!row_elements(e, map, zero, ai, from, xa) || !row_elements(e, map, zero, bi, from, xb))
    return false;
  kiln_kir_value_t *b_first = less(e, xb, xa);
  if (!b_first) return false;
  kiln_kir_value_t *ia =
      idx_op(e, KILN_KIR_ADD, lo, search_close(e, &ps, kiln_kir_unary(b, KILN_KIR_NOT, b_first)));
  /* The merge: for pos in [c0, min(c0 + C, n)) iter (ia, ib, A[ia], B[ib], working tensors).
   * The heads A[ia] and B[ib] ride in the loop and both successors are loaded before the
   * comparison decides, so the loads are off the step-to-step chain (compare, select). */
  int no = p->nops;
  kiln_kir_value_t *init[MERGE_MAX_ITER] = {ia, idx_op(e, KILN_KIR_SUB, d, ia)};
  if (!merge_head(e, map, r.a_start, r.len_a, ia, NULL, from, init + 2) ||
      !merge_head(e, map, r.b_start, r.len_b, init[1], c0, from, init + 2 + no))
    return false;
  size_t nw, inner;
  kiln_kir_value_t *args[MERGE_MAX_ITER] = {0}, *pos = NULL;
  kiln_kir_op_t *loop =
      merge_loop_open(e, c0, idx_min(e, idx_op(e, KILN_KIR_ADD, c0, idx_c(e, C)), idx_c(e, n)),
                      init, 0, args, &pos, &nw, &inner);
  if (!loop) return false;
  r = pair_of(e, pos, lw);
  /* A pair's first position starts afresh: both heads at its runs' starts. */
  kiln_kir_value_t *fresh = kiln_kir_cmp(b, KILN_KIR_CMP_EQ, pos, r.a_start);
  ia = kiln_kir_select(b, fresh, zero, args[0]);
  kiln_kir_value_t *ib = kiln_kir_select(b, fresh, zero, args[1]);
  kiln_kir_value_t *fa[SORT_MAX_OPERANDS], *fb[SORT_MAX_OPERANDS], *na[SORT_MAX_OPERANDS],
      *nb[SORT_MAX_OPERANDS];
  if (!merge_head(e, map, r.a_start, r.len_a, zero, NULL, from, fa) ||
      !merge_head(e, map, r.b_start, r.len_b, zero, pos, from, fb))
    return false;
  for (int k = 0; k < no; k++) {
    xa[k] = select_element(e, fresh, fa[k], args[2 + k]);
    xb[k] = select_element(e, fresh, fb[k], args[2 + no + k]);
  }
  kiln_kir_value_t *a_ok = kiln_kir_cmp(b, KILN_KIR_CMP_LT, ia, r.len_a);
  kiln_kir_value_t *b_ok = kiln_kir_cmp(b, KILN_KIR_CMP_LT, ib, r.len_b);
  kiln_kir_value_t *ia1 = idx_op(e, KILN_KIR_ADD, ia, one), *ib1 = idx_op(e, KILN_KIR_ADD, ib, one);
  if (!merge_head(e, map, r.a_start, r.len_a, ia1, NULL, from, na) ||
      !merge_head(e, map, r.b_start, r.len_b, ib1, pos, from, nb))
    return false;
  kiln_kir_value_t *cur[2] = {ia, ib}, *nxt[2] = {ia1, ib1};
  kiln_kir_value_t *take_b = take_b_of(e, a_ok, b_ok, less(e, xb, xa));
  if (!merge_step_finish(e, into_scratch, map, pos, cur, nxt, take_b, xa, xb, na, nb, NULL, 0, loop,
                         nw, inner))
    return false;
  kiln_elemental_exit(&e->fn, mark);
  if (iff) close_region(e, iff);
  return kiln_kir_builder_ok(b);
}

/* One merge pass of a row owned by one thread (the host's plan): the pairs of runs one after
 * another, each merged by a loop of its own, so the loop over positions carries no search and
 * finds no run boundaries:
 *   for s in [0, n) step 2w {
 *     A = [s, m), B = [m, e) with m = min(s + w, n), e = min(s + 2w, n)
 *     for pos in [s, e) iter (a = s, b = m, A's head at a, B's head at b (at s when B is empty)) {
 *       take B's head when b < e and (a == m or B's head goes before A's head)
 *       out[pos] = the head taken; its run advances, the successor loaded before the compare } }
 * The heads' positions are absolute, so few values stay live across the loop (the host keeps
 * them in registers). Equal elements keep their order (A's first); reads `from`, writes every
 * position of the row once. */
static bool emit_row_merge_pass(sort_emit_t *e, bool into_scratch, kiln_kir_value_t *lw) {
  sort_plan_t *p = &e->p;
  kiln_kir_builder_t *b = &e->b;
  int no = p->nops;
  kiln_indexing_map_t *map = position_map(e, 1, kiln_affine_dim(e->x, 1));
  kiln_kir_value_t *one = idx_c(e, 1), *zero = idx_c(e, 0), *vn = idx_c(e, p->l.row_length);
  kiln_kir_value_t *w = idx_op(e, KILN_KIR_SHL, one, lw);
  kiln_kir_value_t *s = NULL;
  kiln_kir_op_t *outer = open_work_loop_over(e, zero, vn, idx_op(e, KILN_KIR_SHL, w, one), &s);
  if (!outer) return false;
  size_t mark;
  kiln_elemental_enter(&e->fn, b->region, &mark);
  kiln_kir_value_t *from[SORT_MAX_OPERANDS];
  for (int k = 0; k < no; k++) from[k] = into_scratch ? e->work[k] : e->scr[k];
  kiln_kir_value_t *mid = idx_min(e, idx_op(e, KILN_KIR_ADD, s, w), vn);
  kiln_kir_value_t *end = idx_min(e, idx_op(e, KILN_KIR_ADD, mid, w), vn);
  kiln_kir_value_t *init[MERGE_MAX_ITER] = {s, mid};
  kiln_kir_value_t *b_head = kiln_kir_select(b, kiln_kir_cmp(b, KILN_KIR_CMP_LT, mid, end), mid, s);
  if (!row_elements(e, map, zero, s, from, init + 2) ||
      !row_elements(e, map, zero, b_head, from, init + 2 + no))
    return false;
  /* With comparator keys, the heads' keys ride in the loop too (A's, then B's). */
  int nk = e->p.key_op >= 0 ? 2 : 0;
  if (nk) {
    init[2 + 2 * no] = sort_key(e, e->p.key_a, init[2 + e->p.key_op]);
    init[3 + 2 * no] = sort_key(e, e->p.key_a, init[2 + no + e->p.key_op]);
    if (!init[2 + 2 * no] || !init[3 + 2 * no]) return false;
  }
  size_t nw, inner;
  kiln_kir_value_t *args[MERGE_MAX_ITER] = {0}, *pos = NULL;
  kiln_kir_op_t *loop = merge_loop_open(e, s, end, init, nk, args, &pos, &nw, &inner);
  if (!loop) return false;
  kiln_kir_value_t *pa = args[0], *pb = args[1];
  kiln_kir_value_t *xa[SORT_MAX_OPERANDS], *xb[SORT_MAX_OPERANDS], *na[SORT_MAX_OPERANDS],
      *nb[SORT_MAX_OPERANDS];
  for (int k = 0; k < no; k++) {
    xa[k] = args[2 + k];
    xb[k] = args[2 + no + k];
  }
  /* The successors, at valid positions: A's clamped to its last, B's past its end at s. */
  kiln_kir_value_t *pa1 = idx_op(e, KILN_KIR_ADD, pa, one), *pb1 = idx_op(e, KILN_KIR_ADD, pb, one);
  kiln_kir_value_t *na_pos = idx_min(e, pa1, idx_op(e, KILN_KIR_SUB, mid, one));
  kiln_kir_value_t *nb_pos = kiln_kir_select(b, kiln_kir_cmp(b, KILN_KIR_CMP_LT, pb1, end), pb1, s);
  if (!row_elements(e, map, zero, na_pos, from, na) ||
      !row_elements(e, map, zero, nb_pos, from, nb))
    return false;
  kiln_kir_value_t *a_ok = kiln_kir_cmp(b, KILN_KIR_CMP_LT, pa, mid);
  kiln_kir_value_t *b_ok = kiln_kir_cmp(b, KILN_KIR_CMP_LT, pb, end);
  kiln_kir_value_t *cur[2] = {pa, pb}, *nxt[2] = {pa1, pb1}, *keys[2] = {NULL, NULL}, *take_b;
  if (nk) {
    /* The successors' keys are computed as they are loaded, off the compare -> select chain. */
    kiln_kir_value_t *ka = args[2 + 2 * no], *kb = args[3 + 2 * no];
    kiln_kir_value_t *nka = sort_key(e, e->p.key_a, na[e->p.key_op]),
                     *nkb = sort_key(e, e->p.key_a, nb[e->p.key_op]);
    take_b = take_b_of(e, a_ok, b_ok, nka && nkb ? keys_less(e, kb, ka) : NULL);
    if (!take_b) return false;
    keys[0] = select_element(e, take_b, ka, nka);
    keys[1] = select_element(e, take_b, nkb, kb);
  } else {
    take_b = take_b_of(e, a_ok, b_ok, less(e, xb, xa));
  }
  if (!merge_step_finish(e, into_scratch, map, pos, cur, nxt, take_b, xa, xb, na, nb, keys, nk,
                         loop, nw, inner))
    return false;
  kiln_elemental_exit(&e->fn, mark);
  close_region(e, outer);
  return kiln_kir_builder_ok(b);
}

static void swap_work_and_scratch(sort_emit_t *e) {
  for (int k = 0; k < e->p.nops; k++) {
    kiln_kir_value_t *t = e->work[k];
    e->work[k] = e->scr[k];
    e->scr[k] = t;
  }
}

/* The merge sort (stable rows too long for positions in shared memory): P = log2(N) passes,
 * alternating between the outputs and the scratch tensors so that the last one writes the
 * outputs: pass lw writes the outputs when P - 1 - lw is even and reads the other buffer,
 * into which the inputs are copied first. The passes are one loop (its size does not grow
 * with P) whose body opens with the barrier (the host runs a loop whose barriers lead its
 * body) and holds both directions, each under a uniform `if` on the pass's parity: two
 * copies of the pass, where reading the inputs in a pass of its own took a third (its
 * comparator calls are most of the kernel's compile time). */
static bool emit_merge(sort_emit_t *e) {
  kiln_kir_builder_t *b = &e->b;
  int64_t P = e->p.l.steps;
  bool copy_to_scratch = (P - 1) % 2 == 0;
  if (copy_to_scratch) swap_work_and_scratch(e);
  bool copied = emit_copy(e, COPY_IN);
  if (copy_to_scratch) swap_work_and_scratch(e);
  if (!copied) return false;
  kiln_kir_value_t *lw = NULL;
  kiln_kir_op_t *loop = open_work_loop(e, 0, P, &lw);
  if (!loop) return false;
  barrier(e);
  kiln_kir_value_t *odd =
      idx_op(e, KILN_KIR_AND, idx_op(e, KILN_KIR_SUB, idx_c(e, P - 1), lw), idx_c(e, 1));
  for (int to_scratch = 1; to_scratch >= 0; to_scratch--) {
    kiln_kir_value_t *which = kiln_kir_cmp(b, KILN_KIR_CMP_EQ, odd, idx_c(e, to_scratch));
    kiln_kir_op_t *iff = open_guard(e, which);
    if (!iff) return false;
    if (!(e->p.l.threads == 1 ? emit_row_merge_pass(e, to_scratch, lw)
                              : emit_merge_pass(e, to_scratch, lw)))
      return false;
    close_region(e, iff);
  }
  close_region(e, loop);
  return kiln_kir_builder_ok(b);
}

/* Key `k` of element x (operand k->op's element) as an unsigned integer in the comparator's
 * order (sort_emitter.h, "Radix"), an index value below 2^bits. */
static kiln_kir_value_t *radix_key(sort_emit_t *e, const radix_key_t *rk, kiln_kir_value_t *x) {
  kiln_kir_builder_t *b = &e->b;
  kiln_kir_value_t *k = rk->fn ? sort_key(e, rk->fn, x) : x;
  if (!k) return NULL;
  int bits = rk->bits;
  kiln_elem_type_t ut = bits == 8    ? KILN_U8
                        : bits == 16 ? KILN_U16
                        : bits == 32 ? KILN_U32
                                     : KILN_U64;
  if (k->type->elem != ut) k = kiln_kir_bitcast(b, k, kiln_kir_type_scalar(e->m, ut));
  /* Zero-extended (64 bits: the same bits in the index type). */
  kiln_kir_value_t *u = kiln_kir_convert(b, k, kiln_kir_type_index(e->m));
  kiln_kir_value_t *sign = idx_c(e, bits == 64 ? INT64_MIN : (int64_t)1 << (bits - 1));
  kiln_kir_value_t *all = idx_c(e, bits == 64 ? -1 : ((int64_t)1 << bits) - 1);
  if (rk->is_float) {
    /* Total order: negatives (sign set) reversed below the positives. */
    kiln_kir_value_t *neg =
        kiln_kir_cmp(b, KILN_KIR_CMP_NE, idx_op(e, KILN_KIR_AND, u, sign), idx_c(e, 0));
    u = kiln_kir_select(b, neg, idx_op(e, KILN_KIR_XOR, u, all), idx_op(e, KILN_KIR_OR, u, sign));
  } else if (rk->is_signed) {
    u = idx_op(e, KILN_KIR_XOR, u, sign);
  }
  return rk->descending ? idx_op(e, KILN_KIR_XOR, u, all) : u;
}

/* The counter of pass `d`, which sorts by byte `byte` of key `u`:
 * 256 d + ((u >> 8 byte) & 255). */
static kiln_kir_value_t *radix_slot(sort_emit_t *e, kiln_kir_value_t *u, int byte, int d) {
  kiln_kir_value_t *v = idx_op(
      e, KILN_KIR_AND, idx_op(e, KILN_KIR_SHR_LOGICAL, u, idx_c(e, 8 * byte)), idx_c(e, 255));
  return idx_op(e, KILN_KIR_ADD, v, idx_c(e, 256 * d));
}

/* The key and byte pass `d` sorts by: the least significant key's bytes first, each key's
 * least significant byte first. */
static const radix_key_t *radix_pass(const sort_plan_t *p, int d, int *byte) {
  for (int k = p->nradix - 1; k >= 0; k--) {
    int bytes = p->radix[k].bits / 8;
    if (d < bytes) {
      *byte = d;
      return &p->radix[k];
    }
    d -= bytes;
  }
  return NULL;
}

/* counts[slot] += delta (an s32 counter); returns the new count. */
static kiln_kir_value_t *radix_bump(sort_emit_t *e, kiln_kir_value_t *slot, int delta) {
  kiln_kir_builder_t *b = &e->b;
  kiln_kir_value_t *c = kiln_kir_binary(b, KILN_KIR_ADD, kiln_kir_extract(b, e->counts, &slot, 1),
                                        kiln_kir_const_int(b, KILN_S32, delta));
  e->counts = kiln_kir_insert(b, c, e->counts, &slot, 1);
  return c;
}

/* The radix sort of the block's row (sort_emitter.h, "Radix"; one thread per row, the merge's
 * launch and scratch tensors):
 *   counts[0 .. 256 P) = 0;  for i in [0, n): counts[slot(key(i), d)] += 1 for each byte d
 *   for j in [1, 256): counts[256 d + j] += counts[256 d + j - 1] for each d (inclusive sums)
 *   pass d in [0, P): for i = n - 1 down to 0: to[--counts[slot(key(i), d)]] = from[i]
 * Walking the row backwards from each byte's end keeps equal bytes in order. The passes
 * alternate between the outputs and the scratch tensors as the merge's do (the inputs copied
 * into the one the first pass reads, the last pass writing the outputs); the passes are
 * unrolled here (one per key byte), so each byte's shift is a constant. With several keys
 * (lexicographic), the least significant key's passes come first. */
static bool emit_radix(sort_emit_t *e) {
  sort_plan_t *p = &e->p;
  kiln_kir_builder_t *b = &e->b;
  int P = (int)p->l.steps;
  int64_t n = p->l.row_length, nbins = 256 * (int64_t)P;
  e->counts = kiln_kir_alloc_shared(b, KILN_S32, 1, &nbins);
  kiln_kir_value_set_name(e->counts, "counts");
  bool copy_to_scratch = P % 2 == 1;
  if (copy_to_scratch) swap_work_and_scratch(e);
  bool copied = emit_copy(e, COPY_IN);
  if (copy_to_scratch) swap_work_and_scratch(e);
  if (!copied) return false;
  kiln_indexing_map_t *map = position_map(e, 1, kiln_affine_dim(e->x, 1));
  kiln_kir_value_t *zero = idx_c(e, 0), *iv = NULL, *xs[SORT_MAX_OPERANDS];
  kiln_kir_op_t *loop = open_work_loop(e, 0, nbins, &iv);
  if (!loop) return false;
  e->counts = kiln_kir_insert(b, kiln_kir_const_int(b, KILN_S32, 0), e->counts, &iv, 1);
  close_region(e, loop);
  /* The histograms, read from the buffer the first pass reads. */
  loop = open_work_loop(e, 0, n, &iv);
  if (!loop) return false;
  size_t mark;
  kiln_elemental_enter(&e->fn, b->region, &mark);
  kiln_kir_value_t *const *first = copy_to_scratch ? e->scr : e->work;
  kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
  if (!row_element(e, map, zero, iv, idx)) return false;
  kiln_kir_value_t *u = NULL;
  const radix_key_t *rk = NULL;
  for (int d = 0; d < P; d++) {
    int byte = 0;
    const radix_key_t *pk = radix_pass(p, d, &byte);
    if (pk != rk) {
      rk = pk;
      u = rk ? radix_key(e, rk, kiln_kir_extract(b, first[rk->op], idx, (size_t)p->rank)) : NULL;
    }
    if (!u) return false;
    radix_bump(e, radix_slot(e, u, byte, d), 1);
  }
  kiln_elemental_exit(&e->fn, mark);
  close_region(e, loop);
  loop = open_work_loop(e, 1, 256, &iv);
  if (!loop) return false;
  for (int d = 0; d < P; d++) {
    kiln_kir_value_t *j = idx_op(e, KILN_KIR_ADD, iv, idx_c(e, 256 * d));
    kiln_kir_value_t *j1 = idx_op(e, KILN_KIR_SUB, j, idx_c(e, 1));
    kiln_kir_value_t *sum = kiln_kir_binary(b, KILN_KIR_ADD, kiln_kir_extract(b, e->counts, &j, 1),
                                            kiln_kir_extract(b, e->counts, &j1, 1));
    e->counts = kiln_kir_insert(b, sum, e->counts, &j, 1);
  }
  close_region(e, loop);
  for (int d = 0; d < P; d++) {
    bool into_scratch = (P - 1 - d) % 2 == 1;
    loop = open_work_loop(e, 0, n, &iv);
    if (!loop) return false;
    kiln_elemental_enter(&e->fn, b->region, &mark);
    kiln_kir_value_t *from[SORT_MAX_OPERANDS];
    for (int k = 0; k < p->nops; k++) from[k] = into_scratch ? e->work[k] : e->scr[k];
    kiln_kir_value_t *i = idx_op(e, KILN_KIR_SUB, idx_c(e, n - 1), iv);
    if (!row_elements(e, map, zero, i, from, xs)) return false;
    int byte = 0;
    rk = radix_pass(p, d, &byte);
    u = rk ? radix_key(e, rk, xs[rk->op]) : NULL;
    if (!u) return false;
    kiln_kir_value_t *slot = kiln_kir_convert(b, radix_bump(e, radix_slot(e, u, byte, d), -1),
                                              kiln_kir_type_index(e->m));
    if (!row_element(e, map, zero, slot, idx)) return false;
    for (int k = 0; k < p->nops; k++) {
      kiln_kir_value_t **to = into_scratch ? &e->scr[k] : &e->work[k];
      *to = kiln_kir_insert(b, xs[k], *to, idx, (size_t)p->rank);
    }
    kiln_elemental_exit(&e->fn, mark);
    close_region(e, loop);
  }
  e->counts = NULL;
  return kiln_kir_builder_ok(b);
}

/* Creates the kernel: the fusion's tensors, then one written tensor per output leaf, then
 * (merge) one scratch tensor per sort operand. */
static kiln_status create_kernel(sort_emit_t *e, const char *name) {
  int nin = e->elem.num_tensors, nout = e->p.so.num_outputs, nops = e->p.nops;
  if (nin > 64) return KILN_ERR_UNIMPLEMENTED("sort fusion: %d inputs", nin);
  int64_t block[3] = {e->p.l.threads, 1, 1}, grid[3] = {e->p.l.blocks, 1, 1};
  const kiln_shape_t *written[2 * SORT_MAX_OPERANDS];
  int nw = nout;
  for (int o = 0; o < nout; o++) written[o] = e->p.so.shapes[o];
  for (int k = 0; e->p.l.merge && k < nops; k++) written[nw++] = e->p.l.sort->operands[k]->shape;
  e->kernel = kiln_hero_kernel_create(e->m, name, &e->elem, written, nw, block, grid);
  if (!e->kernel) return KILN_ERR_INTERNAL("could not create kernel %s", name);
  /* Rows in global memory: keep the copy loop rolled (kir.h); a shared-memory sort's copies
   * measured ~5% faster unrolled, at no compile cost. */
  e->kernel->host_rolled_for_loops = !e->p.l.in_shared;
  for (int i = 0; i < nin; i++) e->tensors[i] = kiln_kir_func_param(e->kernel, (size_t)i);
  for (int k = 0; k < nops; k++) {
    e->in_tensor[k] = -1;
    for (int i = 0; i < nin; i++)
      if (e->elem.tensors[i] == e->p.l.sort->operands[k]) e->in_tensor[k] = i;
    if (e->in_tensor[k] < 0) return KILN_ERR_INTERNAL("sort operand %d is not a kernel input", k);
    e->work[k] = kiln_kir_func_param(e->kernel, (size_t)(nin + e->p.so.output_of[k]));
    if (e->p.l.merge) {
      e->scr[k] = kiln_kir_func_param(e->kernel, (size_t)(nin + nout + k));
      kiln_kir_value_set_name(e->scr[k], "scratch");
    }
  }
  return NULL;
}

static kiln_status emit_body(sort_emit_t *e) {
  kiln_kir_builder_t *b = &e->b;
  sort_plan_t *p = &e->p;
  kiln_kir_builder_init(b, e->m, kiln_kir_func_body(e->kernel));
  e->fn.e = &e->elem;
  e->fn.b = b;
  e->fn.sg = -1;
  e->fn.tensors = e->tensors;
  bool ok = true;
  if (p->l.rows > 0 && p->l.row_length > 0) {
    e->th = kiln_kir_thread_id(b, 0, 0, p->l.threads - 1);
    e->bl = kiln_kir_block_id(b, 0, 0, p->l.blocks - 1);
    kiln_kir_value_set_name(e->th, "th_x");
    kiln_kir_value_set_name(e->bl, "bl_x");
    int64_t np = p->l.rows_per_block * p->l.row_length;
    if (p->l.stable && p->l.shared_bytes > 0) {
      e->pos = kiln_kir_alloc_shared(b, KILN_S32, 1, &np);
      kiln_kir_value_set_name(e->pos, "positions");
    }
    kiln_kir_value_t *outs[SORT_MAX_OPERANDS];
    for (int k = 0; k < p->nops; k++) {
      outs[k] = e->work[k];
      if (p->l.in_shared) {
        e->work[k] = kiln_kir_alloc_shared(b, p->l.sort->operands[k]->shape->type, 1, &np);
        kiln_kir_value_set_name(e->work[k], "rows");
      }
    }
    ok = p->l.radix ? emit_radix(e) : p->l.merge ? emit_merge(e) : emit_copy(e, COPY_IN);
    if (ok && !p->l.merge && p->l.steps > 0) ok = emit_steps(e);
    if (ok && p->l.in_shared) {
      barrier(e);
      for (int k = 0; k < p->nops; k++) {
        e->staged[k] = e->work[k];
        e->work[k] = outs[k];
      }
      e->pos = NULL;
      ok = emit_copy(e, COPY_OUT);
    }
  }
  kiln_status st = NULL;
  if (e->fn.err) {
    st = e->fn.err;
    e->fn.err = NULL;
  }
  kiln_status bs = kiln_kir_builder_take_status(b);
  if (!st) st = bs;
  else kiln_status_free(bs);
  if (!st && !ok) st = KILN_ERR_INTERNAL("sort emitter: emission failed");
  if (!st) {
    kiln_kir_value_t *outs[2 * SORT_MAX_OPERANDS];
    int no = p->so.num_outputs;
    for (int o = 0; o < p->so.num_outputs; o++) outs[o] = e->work[p->so.sort_output[o]];
    for (int k = 0; p->l.merge && k < p->nops; k++) outs[no++] = e->scr[k];
    kiln_kir_return(b, outs, (size_t)no);
    st = kiln_kir_builder_take_status(b);
  }
  kiln_kir_builder_finish(b);
  kiln_vec_free(&e->fn.cache);
  return st;
}

kiln_status kiln_sort_kernel_emit(const kiln_hlo_computation_t *c,
                                  const kiln_codegen_compile_options_t *opts,
                                  kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("sort emitter: no computation");
  double t0 = kiln_clock_ms();
  sort_emit_t *e = kiln_calloc(1, sizeof(*e));
  kiln_status st = plan(c, opts && opts->host_target, &e->p);
  if (st) {
    kiln_free(e);
    return kiln_status_annotate(st, "while compiling fusion %s", c->name);
  }
  char name[160];
  const char *dump_dir = kiln_codegen_kernel_start(out, c, NULL, opts, NULL, name, sizeof(name));
  e->m = out->kir;
  e->x = out->ctx;
  e->part.comp = c;
  st = kiln_elemental_init(&e->elem, e->m, c, &e->part);
  bool have_elem = !st;
  if (!st) st = create_kernel(e, name);
  if (!st) st = emit_body(e);
  if (!st) {
    out->grid.num_elements = e->p.l.rows * e->p.l.row_length;
    out->grid.vector_size = 1;
    out->grid.threads = e->p.l.threads;
    out->grid.blocks_x = e->p.l.blocks;
    out->grid.blocks_y = 1;
    out->num_inputs = e->elem.num_tensors;
    out->inputs = kiln_calloc((size_t)out->num_inputs + 1, sizeof(*out->inputs));
    for (int i = 0; i < out->num_inputs; i++) out->inputs[i] = e->elem.tensors[i];
    out->num_outputs = e->p.so.num_outputs;
    out->outputs = kiln_calloc((size_t)out->num_outputs + 1, sizeof(*out->outputs));
    for (int o = 0; o < out->num_outputs; o++) out->outputs[o] = e->p.so.shapes[o];
    if (e->p.l.merge) {
      out->num_scratch = e->p.nops;
      out->scratch = kiln_calloc((size_t)out->num_scratch + 1, sizeof(*out->scratch));
      for (int k = 0; k < e->p.nops; k++) out->scratch[k] = e->p.l.sort->operands[k]->shape;
    }
  }
  if (have_elem) kiln_elemental_free(&e->elem);
  kiln_free(e);
  return kiln_codegen_kernel_finish(out, st, t0, dump_dir, name, opts, c);
}
