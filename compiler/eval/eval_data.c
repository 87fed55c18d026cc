/* Data movement: broadcast, reshape, transpose, bitcast, slice, dynamic-slice,
 * dynamic-update-slice, concatenate, pad, reverse, iota.
 *
 * dynamic-reshape is evaluated statically (sizes equal to the bounds).
 *
 * Almost everything is one strided copy: for every index of a box of `dims`, copy the
 * element at in_base + sum(idx * in_strides) to out_base + sum(idx * out_strides). Strides
 * are in elements and may be 0 (broadcast) or negative (reverse). */
#include <string.h>

#include "compiler/eval/eval.h"

#define MAX_RANK 64

typedef struct box {
  int rank;
  int64_t dims[MAX_RANK];
  int64_t in_strides[MAX_RANK];
  int64_t out_strides[MAX_RANK];
  int64_t in_base, out_base;
} box_t;

static void row_strides(const kiln_shape_t *s, int64_t *strides) {
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = st;
    st *= s->dims[i];
  }
}

/* `b` with its dimensions of extent 1 dropped and each run of dimensions that walk both
 * sides contiguously (outer stride = inner stride x inner extent, in and out; broadcast's 0
 * strides included) merged into one, so the inner loop of copy_box runs as long as the copy
 * allows rather than over a trailing dimension of a few elements. */
static void box_simplify(box_t *b) {
  int r = 0;
  for (int i = 0; i < b->rank; i++) {
    if (b->dims[i] == 1) continue;
    if (r > 0 && b->in_strides[r - 1] == b->in_strides[i] * b->dims[i] &&
        b->out_strides[r - 1] == b->out_strides[i] * b->dims[i]) {
      b->dims[r - 1] *= b->dims[i];
      b->in_strides[r - 1] = b->in_strides[i];
      b->out_strides[r - 1] = b->out_strides[i];
      continue;
    }
    b->dims[r] = b->dims[i];
    b->in_strides[r] = b->in_strides[i];
    b->out_strides[r] = b->out_strides[i];
    r++;
  }
  b->rank = r;
}

/* The dimension to pair with the innermost one in tiles, or -1: a transposing copy, whose
 * innermost dimension is contiguous on one side only while another dimension is contiguous
 * on the other. Walking rows would then touch a new cache line per element on the strided
 * side (copies of large transposes were half of the evaluator's time in the corpus tests). */
static int tile_partner(const box_t *b) {
  int r = b->rank;
  const int64_t is = b->in_strides[r - 1], os = b->out_strides[r - 1];
  if (r < 2 || is == 0 || os == 0 || (is == 1) == (os == 1)) return -1;
  for (int d = r - 2; d >= 0; d--)
    if ((is == 1 ? b->out_strides[d] : b->in_strides[d]) == 1) return d;
  return -1;
}

#define COPY_TILE 32

/* Copies the plane of the partner dimension (extent na) and the innermost (inner) at the
 * offsets, in COPY_TILE x COPY_TILE tiles. */
#define PLANE(C)                                                                       \
  do {                                                                                 \
    C *o = (C *)out + out_off;                                                         \
    const C *s = (const C *)in + in_off;                                               \
    for (int64_t a0 = 0; a0 < na; a0 += COPY_TILE)                                     \
      for (int64_t b0 = 0; b0 < inner; b0 += COPY_TILE) {                              \
        const int64_t a1 = a0 + COPY_TILE < na ? a0 + COPY_TILE : na;                  \
        const int64_t b1 = b0 + COPY_TILE < inner ? b0 + COPY_TILE : inner;            \
        for (int64_t i = a0; i < a1; i++)                                              \
          for (int64_t k = b0; k < b1; k++) o[i * osa + k * os] = s[i * isa + k * is]; \
      }                                                                                \
  } while (0)
#define ROW(C)                                                 \
  do {                                                         \
    C *o = (C *)out + out_off;                                 \
    const C *s = (const C *)in + in_off;                       \
    for (int64_t k = 0; k < inner; k++) o[k * os] = s[k * is]; \
  } while (0)

static void copy_box(void *out, const void *in, size_t es, const box_t *box) {
  for (int i = 0; i < box->rank; i++)
    if (box->dims[i] <= 0) return;
  box_t simple = *box;
  box_simplify(&simple);
  box_t *b = &simple;
  int r = b->rank;
  if (r == 0) {
    memcpy((char *)out + (size_t)b->out_base * es, (const char *)in + (size_t)b->in_base * es, es);
    return;
  }
  /* A tiled plane: its partner dimension moves next to the innermost one, and the odometer
   * below walks the rest (`loops` of them). */
  int partner = es <= 8 && (es & (es - 1)) == 0 ? tile_partner(b) : -1;
  int loops = r - 1;
  if (partner >= 0) {
    int64_t dim = b->dims[partner], ist = b->in_strides[partner], ost = b->out_strides[partner];
    for (int d = partner; d < r - 2; d++) {
      b->dims[d] = b->dims[d + 1];
      b->in_strides[d] = b->in_strides[d + 1];
      b->out_strides[d] = b->out_strides[d + 1];
    }
    b->dims[r - 2] = dim;
    b->in_strides[r - 2] = ist;
    b->out_strides[r - 2] = ost;
    loops = r - 2;
  }
  int64_t idx[MAX_RANK] = {0};
  int64_t in_off = b->in_base, out_off = b->out_base;
  const int64_t inner = b->dims[r - 1], is = b->in_strides[r - 1], os = b->out_strides[r - 1];
  const int64_t na = r >= 2 ? b->dims[r - 2] : 1;
  const int64_t isa = r >= 2 ? b->in_strides[r - 2] : 0, osa = r >= 2 ? b->out_strides[r - 2] : 0;
  for (;;) {
    if (partner >= 0) {
      switch (es) {
        case 1:
          PLANE(uint8_t);
          break;
        case 2:
          PLANE(uint16_t);
          break;
        case 4:
          PLANE(uint32_t);
          break;
        default:
          PLANE(uint64_t);
          break;
      }
    } else if (is == 1 && os == 1) {
      memcpy((char *)out + (size_t)out_off * es, (const char *)in + (size_t)in_off * es, (size_t)inner * es);
    } else {
      switch (es) {
      case 1: ROW(uint8_t); break;
      case 2: ROW(uint16_t); break;
      case 4: ROW(uint32_t); break;
      case 8: ROW(uint64_t); break;
      default:
        for (int64_t k = 0; k < inner; k++)
          memcpy((char *)out + (size_t)(out_off + k * os) * es, (const char *)in + (size_t)(in_off + k * is) * es, es);
      }
    }
    int d = loops - 1;
    for (; d >= 0; d--) {
      idx[d]++;
      in_off += b->in_strides[d];
      out_off += b->out_strides[d];
      if (idx[d] < b->dims[d]) break;
      in_off -= b->in_strides[d] * b->dims[d];
      out_off -= b->out_strides[d] * b->dims[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
#undef PLANE
#undef ROW

static kiln_status bad(const kiln_hlo_instruction_t *instr, const char *what) {
  return kiln_status_make(KILN_INVALID_ARGUMENT, "%s '%s': %s", kiln_hlo_opcode_name(instr->opcode),
                          instr->name, what);
}

static kiln_status check_rank(const kiln_hlo_instruction_t *instr, const kiln_shape_t *s) {
  if (s->rank > MAX_RANK) return bad(instr, "rank too large");
  return KILN_STATUS_OK;
}

/* Physical (layout order) strides of each logical dimension; default layout when none. */
static kiln_status phys_strides(const kiln_hlo_instruction_t *instr, const kiln_shape_t *s,
                                int64_t *strides) {
  if (!s->has_layout || s->layout.rank != s->rank) {
    row_strides(s, strides);
    return KILN_STATUS_OK;
  }
  if (s->layout.num_tiles > 0)
    return kiln_status_make(KILN_UNIMPLEMENTED, "bitcast '%s' with a tiled layout", instr->name);
  bool seen[MAX_RANK] = {0};
  int64_t st = 1;
  for (int i = 0; i < s->rank; i++) {
    int64_t d = s->layout.minor_to_major[i];
    if (d < 0 || d >= s->rank || seen[d]) return bad(instr, "invalid layout");
    seen[d] = true;
    strides[d] = st;
    st *= s->dims[d];
  }
  return KILN_STATUS_OK;
}

static kiln_status eval_bitcast(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                kiln_literal_t *op, kiln_literal_t **out) {
  /* The operand's layout comes from the operand instruction: a literal's storage is
   * logical row-major whatever layout its shape carries (e.g. an argument made for the
   * original entry layout after layout assignment changed the parameter's layout). */
  const kiln_shape_t *is = instr->num_operands > 0 && kiln_shape_is_array(instr->operands[0]->shape)
                               ? instr->operands[0]->shape
                               : op->shape;
  const kiln_shape_t *os = instr->shape;
  size_t es = kiln_elem_type_storage_bytes(os->type);
  if (kiln_elem_type_storage_bytes(is->type) != es || op->num_elements != kiln_shape_num_elements(os))
    return bad(instr, "operand and result sizes differ");
  int64_t ip[MAX_RANK], op_[MAX_RANK];
  KILN_RETURN_IF_ERROR_PLAIN(check_rank(instr, is));
  KILN_RETURN_IF_ERROR_PLAIN(check_rank(instr, os));
  KILN_RETURN_IF_ERROR_PLAIN(phys_strides(instr, is, ip));
  KILN_RETURN_IF_ERROR_PLAIN(phys_strides(instr, os, op_));
  int64_t irow[MAX_RANK], orow[MAX_RANK];
  row_strides(is, irow);
  row_strides(os, orow);
  bool in_rowmajor = memcmp(ip, irow, sizeof(int64_t) * (size_t)is->rank) == 0;
  bool out_rowmajor = memcmp(op_, orow, sizeof(int64_t) * (size_t)os->rank) == 0;
  if (in_rowmajor && out_rowmajor) return kiln_eval_literal_view(ctx, instr->shape, op, out);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, out));
  if (op->num_elements == 0) return KILN_STATUS_OK;
  /* 1. operand -> its physical order; 2. result element <- physical position. */
  const void *phys = op->data;
  void *tmp = NULL;
  if (!in_rowmajor) {
    tmp = kiln_try_malloc(es * (size_t)op->num_elements);
    if (!tmp) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "bitcast '%s': out of memory", instr->name);
    box_t b = {.rank = is->rank};
    for (int i = 0; i < is->rank; i++) {
      b.dims[i] = is->dims[i];
      b.in_strides[i] = irow[i];
      b.out_strides[i] = ip[i];
    }
    copy_box(tmp, op->data, es, &b);
    phys = tmp;
  }
  box_t b = {.rank = os->rank};
  for (int i = 0; i < os->rank; i++) {
    b.dims[i] = os->dims[i];
    b.in_strides[i] = op_[i];
    b.out_strides[i] = orow[i];
  }
  copy_box((*out)->data, phys, es, &b);
  kiln_free(tmp);
  return KILN_STATUS_OK;
}

/* Clamped start of a dynamic slice: XLA clamps each start into [0, dim - size]. */
static int64_t clamp_start(int64_t s, int64_t dim, int64_t size) {
  int64_t hi = dim - size;
  if (hi < 0) hi = 0;
  if (s < 0) return 0;
  if (s > hi) return hi;
  return s;
}

static kiln_status read_starts(const kiln_hlo_instruction_t *instr, kiln_literal_t *const *ops,
                               int first, int rank, const int64_t *dims, const int64_t *sizes,
                               int64_t *starts) {
  int n = instr->num_operands - first;
  if (n == 1 && ops[first]->shape->rank == 1 && rank != 1) {
    /* old form: one rank-1 index operand */
    const kiln_literal_t *l = ops[first];
    if (l->num_elements != rank) return bad(instr, "start index vector has the wrong length");
    for (int i = 0; i < rank; i++) {
      kiln_elem_type_t t = l->shape->type;
      int64_t v = kiln_eval_elem_get_s64(t, l->data, i);
      if (t == KILN_U64 && v < 0) v = INT64_MAX;
      starts[i] = clamp_start(v, dims[i], sizes[i]);
    }
    return KILN_STATUS_OK;
  }
  if (n == 1 && rank == 1 && ops[first]->shape->rank == 1 && ops[first]->num_elements == 1) {
    const kiln_literal_t *l = ops[first];
    starts[0] = clamp_start(kiln_eval_scalar_index(l), dims[0], sizes[0]);
    return KILN_STATUS_OK;
  }
  if (n != rank) return bad(instr, "needs one start index per dimension");
  for (int i = 0; i < rank; i++) {
    const kiln_literal_t *l = ops[first + i];
    if (!kiln_shape_is_array(l->shape) || l->num_elements != 1 || !kiln_elem_type_is_integral(l->shape->type))
      return bad(instr, "start indices must be integer scalars");
    starts[i] = clamp_start(kiln_eval_scalar_index(l), dims[i], sizes[i]);
  }
  return KILN_STATUS_OK;
}

static kiln_status eval_iota(const kiln_hlo_instruction_t *instr, kiln_literal_t *r) {
  const kiln_shape_t *s = r->shape;
  int64_t d = instr->iota_dimension;
  if (s->rank == 0 || d < 0 || d >= s->rank) return bad(instr, "iota_dimension out of range");
  int64_t inner = 1;
  for (int i = s->rank - 1; i > d; i--) inner *= s->dims[i];
  int64_t dim = s->dims[d];
  kiln_elem_type_t t = s->type;
  size_t es = kiln_elem_type_storage_bytes(t);
  if (r->num_elements == 0) return KILN_STATUS_OK;
  /* one row of values (0..dim-1 each repeated `inner` times), then copies of it */
  int64_t row = dim * inner;
  for (int64_t v = 0; v < dim; v++) {
    kiln_eval_elem_set_s64(t, r->data, v * inner, v);
    for (int64_t k = 1; k < inner; k++)
      memcpy((char *)r->data + (size_t)(v * inner + k) * es, (char *)r->data + (size_t)(v * inner) * es, es);
  }
  for (int64_t off = row; off < r->num_elements; off += row)
    memcpy((char *)r->data + (size_t)off * es, r->data, (size_t)row * es);
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_data_movement(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                    kiln_literal_t *const *ops, kiln_literal_t **out) {
  *out = NULL;
  kiln_hlo_opcode_t opc = instr->opcode;
  kiln_shape_t *os = instr->shape;
  if (!kiln_shape_is_array(os)) return bad(instr, "result must be an array");
  KILN_RETURN_IF_ERROR_PLAIN(check_rank(instr, os));
  for (int i = 0; i < instr->num_operands; i++) {
    if (!kiln_shape_is_array(ops[i]->shape) || (ops[i]->num_elements && !ops[i]->data))
      return bad(instr, "operands must be arrays");
    KILN_RETURN_IF_ERROR_PLAIN(check_rank(instr, ops[i]->shape));
  }
  size_t es = kiln_elem_type_storage_bytes(os->type);
  if (opc == KILN_OP_DYNAMIC_RESHAPE) {
    /* Static evaluation: the requested sizes must be the result's bounds. */
    if (instr->num_operands != os->rank + 1) return bad(instr, "needs one size operand per result dimension");
    for (int i = 0; i < os->rank; i++)
      if (kiln_eval_scalar_index(ops[i + 1]) != os->dims[i])
        return kiln_status_make(KILN_UNIMPLEMENTED,
                                "dynamic-reshape '%s' to sizes below the bounds (dynamic shapes)", instr->name);
    opc = KILN_OP_RESHAPE;
  }
  if (opc == KILN_OP_RESHAPE) {
    if (ops[0]->num_elements != kiln_shape_num_elements(os) || ops[0]->shape->type != os->type)
      return bad(instr, "element count or type differs");
    return kiln_eval_literal_view(ctx, os, ops[0], out);
  }
  if (opc == KILN_OP_BITCAST) return eval_bitcast(ctx, instr, ops[0], out);
  if (opc != KILN_OP_IOTA && opc != KILN_OP_DYNAMIC_SLICE && opc != KILN_OP_DYNAMIC_UPDATE_SLICE &&
      ops[0]->shape->type != os->type)
    return bad(instr, "operand and result element types differ");

  kiln_literal_t *r = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, os, &r));
  *out = r;
  if (opc == KILN_OP_IOTA) return eval_iota(instr, r);
  const kiln_literal_t *a = ops[0];
  const kiln_shape_t *is = a->shape;
  int64_t istr[MAX_RANK], ostr[MAX_RANK];
  row_strides(is, istr);
  row_strides(os, ostr);
  box_t b = {.rank = os->rank};
  for (int i = 0; i < os->rank; i++) {
    b.dims[i] = os->dims[i];
    b.out_strides[i] = ostr[i];
  }
  kiln_status st = KILN_STATUS_OK;
  switch (opc) {
  case KILN_OP_BROADCAST: {
    if (instr->dimensions.n != is->rank) {
      st = bad(instr, "dimensions must name one result dimension per operand dimension");
      break;
    }
    for (int i = 0; i < is->rank; i++) {
      int64_t d = instr->dimensions.v[i];
      if (d < 0 || d >= os->rank || os->dims[d] != is->dims[i]) {
        st = bad(instr, "dimensions do not match the shapes");
        break;
      }
      b.in_strides[d] = istr[i];
    }
    break;
  }
  case KILN_OP_TRANSPOSE: {
    if (instr->dimensions.n != os->rank || is->rank != os->rank) {
      st = bad(instr, "dimensions must be a permutation of the operand's");
      break;
    }
    for (int i = 0; i < os->rank; i++) {
      int64_t d = instr->dimensions.v[i];
      if (d < 0 || d >= is->rank || is->dims[d] != os->dims[i]) {
        st = bad(instr, "dimensions do not match the shapes");
        break;
      }
      b.in_strides[i] = istr[d];
    }
    break;
  }
  case KILN_OP_SLICE: {
    if (instr->num_slice_dims != is->rank || is->rank != os->rank) {
      st = bad(instr, "slice must give one range per dimension");
      break;
    }
    for (int i = 0; i < os->rank; i++) {
      const kiln_slice_dim_t *s = &instr->slice[i];
      int64_t stride = s->stride ? s->stride : 1;
      if (s->start < 0 || s->limit > is->dims[i] || s->start > s->limit || stride < 1 ||
          (s->limit - s->start + stride - 1) / stride != os->dims[i]) {
        st = bad(instr, "slice range does not match the shapes");
        break;
      }
      b.in_strides[i] = istr[i] * stride;
      b.in_base += s->start * istr[i];
    }
    break;
  }
  case KILN_OP_REVERSE: {
    for (int i = 0; i < os->rank; i++) b.in_strides[i] = istr[i];
    if (is->rank != os->rank) {
      st = bad(instr, "rank mismatch");
      break;
    }
    for (int k = 0; k < instr->dimensions.n; k++) {
      int64_t d = instr->dimensions.v[k];
      if (d < 0 || d >= is->rank) {
        st = bad(instr, "dimension out of range");
        break;
      }
      b.in_strides[d] = -istr[d];
      b.in_base += (is->dims[d] - 1) * istr[d];
    }
    break;
  }
  case KILN_OP_DYNAMIC_SLICE: {
    if (a->shape->type != os->type || is->rank != os->rank) {
      st = bad(instr, "operand and result differ in type or rank");
      break;
    }
    int64_t starts[MAX_RANK];
    for (int i = 0; i < os->rank; i++)
      if (os->dims[i] > is->dims[i]) st = bad(instr, "slice larger than the operand");
    if (!st) st = read_starts(instr, ops, 1, is->rank, is->dims, os->dims, starts);
    if (st) break;
    for (int i = 0; i < os->rank; i++) {
      b.in_strides[i] = istr[i];
      b.in_base += starts[i] * istr[i];
    }
    break;
  }
  case KILN_OP_DYNAMIC_UPDATE_SLICE: {
    const kiln_literal_t *u = ops[1];
    if (a->shape->type != os->type || u->shape->type != os->type || is->rank != os->rank ||
        u->shape->rank != os->rank) {
      st = bad(instr, "operand, update and result differ in type or rank");
      break;
    }
    for (int i = 0; i < os->rank; i++)
      if (u->shape->dims[i] > is->dims[i] || is->dims[i] != os->dims[i]) st = bad(instr, "update larger than the operand");
    int64_t starts[MAX_RANK];
    if (!st) st = read_starts(instr, ops, 2, is->rank, is->dims, u->shape->dims, starts);
    if (st) break;
    if (r->num_elements) memcpy(r->data, a->data, es * (size_t)r->num_elements);
    int64_t ustr[MAX_RANK];
    row_strides(u->shape, ustr);
    box_t ub = {.rank = os->rank};
    for (int i = 0; i < os->rank; i++) {
      ub.dims[i] = u->shape->dims[i];
      ub.in_strides[i] = ustr[i];
      ub.out_strides[i] = ostr[i];
      ub.out_base += starts[i] * ostr[i];
    }
    if (u->num_elements) copy_box(r->data, u->data, es, &ub);
    return KILN_STATUS_OK;
  }
  case KILN_OP_CONCATENATE: {
    if (instr->dimensions.n != 1) {
      st = bad(instr, "needs one dimension");
      break;
    }
    int64_t d = instr->dimensions.v[0], off = 0;
    if (d < 0 || d >= os->rank) {
      st = bad(instr, "dimension out of range");
      break;
    }
    for (int k = 0; k < instr->num_operands && !st; k++) {
      const kiln_literal_t *p = ops[k];
      if (p->shape->type != os->type || p->shape->rank != os->rank) {
        st = bad(instr, "operands differ in type or rank");
        break;
      }
      int64_t pstr[MAX_RANK];
      row_strides(p->shape, pstr);
      box_t cb = {.rank = os->rank, .out_base = off * ostr[d]};
      for (int i = 0; i < os->rank; i++) {
        if (i != d && p->shape->dims[i] != os->dims[i]) st = bad(instr, "operand dimensions differ");
        cb.dims[i] = p->shape->dims[i];
        cb.in_strides[i] = pstr[i];
        cb.out_strides[i] = ostr[i];
      }
      off += p->shape->dims[d];
      if (off > os->dims[d]) st = bad(instr, "operands do not fit the result");
      if (!st && p->num_elements) copy_box(r->data, p->data, es, &cb);
    }
    if (!st && off != os->dims[d]) st = bad(instr, "operands do not fill the result");
    return st;
  }
  case KILN_OP_PAD: {
    const kiln_literal_t *pv = ops[1];
    if (pv->num_elements != 1 || pv->shape->type != os->type || instr->num_pad_dims != is->rank ||
        is->rank != os->rank) {
      st = bad(instr, "padding value or padding config does not match");
      break;
    }
    /* XLA: result dim = lo + hi + n + (n - 1) * interior; negative lo/hi crop. */
    for (int i = 0; i < os->rank; i++) {
      const kiln_pad_dim_t *p = &instr->padding[i];
      int64_t n = is->dims[i];
      int64_t want = p->lo + p->hi + n + (n > 0 ? (n - 1) * p->interior : 0);
      if (p->interior < 0 || want != os->dims[i]) {
        st = bad(instr, "padding does not match the shapes");
        break;
      }
    }
    if (st) break;
    int64_t n = r->num_elements;
    for (int64_t k = 0; k < n; k++) memcpy((char *)r->data + (size_t)k * es, pv->data, es);
    box_t pb = {.rank = os->rank};
    for (int i = 0; i < os->rank; i++) {
      const kiln_pad_dim_t *p = &instr->padding[i];
      int64_t step = p->interior + 1;
      /* operand indices k with 0 <= lo + k*step < out_dim */
      int64_t kmin = p->lo >= 0 ? 0 : (-p->lo + step - 1) / step;
      int64_t kmax = os->dims[i] - 1 - p->lo < 0 ? -1 : (os->dims[i] - 1 - p->lo) / step;
      if (kmax > is->dims[i] - 1) kmax = is->dims[i] - 1;
      pb.dims[i] = kmax - kmin + 1;
      pb.in_strides[i] = istr[i];
      pb.out_strides[i] = ostr[i] * step;
      pb.in_base += kmin * istr[i];
      pb.out_base += (p->lo + kmin * step) * ostr[i];
    }
    if (a->num_elements) copy_box(r->data, a->data, es, &pb);
    return KILN_STATUS_OK;
  }
  default:
    return kiln_status_make(KILN_UNIMPLEMENTED, "evaluator does not support opcode '%s' (instruction '%s')",
                            kiln_hlo_opcode_name(opc), instr->name);
  }
  if (st) return st;
  if (r->num_elements) copy_box(r->data, a->data, es, &b);
  return KILN_STATUS_OK;
}
