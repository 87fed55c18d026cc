/* Reductions: reduce (variadic), reduce-window (variadic, padding, strides, dilations),
 * select-and-scatter.
 *
 * Order follows XLA's evaluator: each output element starts from the init value(s) and
 * folds the reduced elements in row-major order of the reduced (or window) dimensions,
 * acc = reducer(acc, element). A reducer that is one add/multiply/maximum/minimum/and/or
 * of its two parameters runs on a typed fast path with the same order and the same
 * rounding (narrow floats round after every step); any other reducer is called through
 * kiln_eval_computation on scalars. */
#include <math.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/hlo/numeric.h"

#define MAX_RANK 64
#define MAX_INPUTS 16

static kiln_status bad(const kiln_hlo_instruction_t *instr, const char *what) {
  return kiln_status_make(KILN_INVALID_ARGUMENT, "%s '%s': %s", kiln_hlo_opcode_name(instr->opcode),
                          instr->name, what);
}

static void row_strides(const kiln_shape_t *s, int64_t *strides) {
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = st;
    st *= s->dims[i];
  }
}

/* ---- fast path: binary reducers ---- */

kiln_hlo_opcode_t kiln_eval_binary_reducer(const kiln_hlo_computation_t *c, kiln_elem_type_t t,
                                           bool *swapped) {
  if (!c || c->num_parameters != 2 || !c->root) return KILN_OP_COUNT;
  /* The typed accumulators hold one real value: complex reductions take the slow path. */
  if (kiln_elem_type_is_complex(t)) return KILN_OP_COUNT;
  const kiln_hlo_instruction_t *r = c->root;
  switch (r->opcode) {
  case KILN_OP_ADD: case KILN_OP_MULTIPLY: case KILN_OP_MAXIMUM: case KILN_OP_MINIMUM:
  case KILN_OP_AND: case KILN_OP_OR:
    break;
  default:
    return KILN_OP_COUNT;
  }
  if (r->num_operands != 2 || r->shape->type != t || r->shape->rank != 0) return KILN_OP_COUNT;
  const kiln_hlo_instruction_t *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != KILN_OP_PARAMETER || b->opcode != KILN_OP_PARAMETER) return KILN_OP_COUNT;
  if (a->parameter_number + b->parameter_number != 1 || a == b) return KILN_OP_COUNT;
  if (a->shape->type != t || b->shape->type != t || a->shape->rank || b->shape->rank) return KILN_OP_COUNT;
  /* and/or only on integers and pred */
  if ((r->opcode == KILN_OP_AND || r->opcode == KILN_OP_OR) &&
      !(kiln_elem_type_is_integral(t) || t == KILN_PRED))
    return KILN_OP_COUNT;
  if (swapped) *swapped = a->parameter_number == 1;
  return r->opcode;
}

static inline int64_t istep(kiln_hlo_opcode_t op, bool sg, int64_t acc, int64_t x) {
  switch (op) {
  case KILN_OP_ADD: return (int64_t)((uint64_t)acc + (uint64_t)x);
  case KILN_OP_MULTIPLY: return (int64_t)((uint64_t)acc * (uint64_t)x);
  case KILN_OP_MAXIMUM: return (sg ? acc < x : (uint64_t)acc < (uint64_t)x) ? x : acc;
  case KILN_OP_MINIMUM: return (sg ? x < acc : (uint64_t)x < (uint64_t)acc) ? x : acc;
  case KILN_OP_AND: return acc & x;
  default: return acc | x;
  }
}

/* The element set of one output: a list of input offsets relative to a base. Reductions
 * and windows both become "for each output, fold these offsets", with a per-offset
 * validity flag for windows that hang over the padding. */
typedef struct folder {
  kiln_hlo_opcode_t op; /* fast-path opcode, or KILN_OP_COUNT for the slow path */
  int n_in;
  kiln_elem_type_t type[MAX_INPUTS];
  size_t es[MAX_INPUTS];
  const kiln_literal_t *in[MAX_INPUTS];
  const kiln_literal_t *init[MAX_INPUTS];
  kiln_literal_t *out[MAX_INPUTS];
  kiln_eval_scalar_fn_t fn;
  /* fast path accumulator for the current output */
  double facc;
  float facc32;
  int64_t iacc;
  unsigned char acc_bytes[MAX_INPUTS][16]; /* slow path accumulators */
} folder_t;

static void fold_begin(folder_t *f) {
  kiln_elem_type_t t = f->type[0];
  if (f->op != KILN_OP_COUNT) {
    if (t == KILN_F64) f->facc = kiln_eval_elem_get_f64(t, f->init[0]->data, 0);
    else if (kiln_elem_type_is_float(t)) f->facc32 = (float)kiln_eval_elem_get_f64(t, f->init[0]->data, 0);
    else f->iacc = kiln_eval_elem_get_s64(t, f->init[0]->data, 0);
    return;
  }
  for (int i = 0; i < f->n_in; i++) memcpy(f->acc_bytes[i], f->init[i]->data, f->es[i]);
}

static kiln_status fold_step(folder_t *f, int64_t off) {
  kiln_elem_type_t t = f->type[0];
  if (f->op != KILN_OP_COUNT) {
    const void *d = f->in[0]->data;
    if (t == KILN_F32) {
      f->facc32 = kiln_eval_fstepf(f->op, f->facc32, ((const float *)d)[off]);
    } else if (t == KILN_F64) {
      f->facc = kiln_eval_fstep(f->op, f->facc, ((const double *)d)[off]);
    } else if (t == KILN_BF16) { /* round to bf16 after every step, as the reducer would */
      float x = kiln_bf16_to_f32(((const uint16_t *)d)[off]);
      f->facc32 = kiln_bf16_to_f32(kiln_f32_to_bf16(kiln_eval_fstepf(f->op, f->facc32, x)));
    } else if (t == KILN_F16) {
      float x = kiln_f16_to_f32(((const uint16_t *)d)[off]);
      f->facc32 = kiln_f16_to_f32(kiln_f32_to_f16(kiln_eval_fstepf(f->op, f->facc32, x)));
    } else if (kiln_elem_type_is_float(t)) {
      float x = (float)kiln_eval_elem_get_f64(t, d, off);
      float v = kiln_eval_fstepf(f->op, f->facc32, x);
      unsigned char tmp[2];
      kiln_eval_elem_set_f64(t, tmp, 0, v);
      f->facc32 = (float)kiln_eval_elem_get_f64(t, tmp, 0);
    } else {
      f->iacc = istep(f->op, kiln_elem_type_is_signed_int(t), f->iacc, kiln_eval_elem_get_s64(t, d, off));
    }
    return KILN_STATUS_OK;
  }
  const void *args[2 * MAX_INPUTS];
  kiln_elem_type_t types[2 * MAX_INPUTS];
  void *res[MAX_INPUTS];
  unsigned char out_bytes[MAX_INPUTS][16];
  for (int i = 0; i < f->n_in; i++) {
    args[i] = f->acc_bytes[i];
    types[i] = f->type[i];
    args[f->n_in + i] = (const char *)f->in[i]->data + (size_t)off * f->es[i];
    types[f->n_in + i] = f->type[i];
    res[i] = out_bytes[i];
  }
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_scalar_fn_call(&f->fn, 2 * f->n_in, types, args, f->n_in, res));
  for (int i = 0; i < f->n_in; i++) memcpy(f->acc_bytes[i], out_bytes[i], f->es[i]);
  return KILN_STATUS_OK;
}

static void fold_end(folder_t *f, int64_t out_index) {
  kiln_elem_type_t t = f->type[0];
  if (f->op != KILN_OP_COUNT) {
    void *d = f->out[0]->data;
    if (t == KILN_F64) ((double *)d)[out_index] = f->facc;
    else if (t == KILN_F32) ((float *)d)[out_index] = f->facc32;
    else if (kiln_elem_type_is_float(t)) kiln_eval_elem_set_f64(t, d, out_index, f->facc32);
    else kiln_eval_elem_set_s64(t, d, out_index, f->iacc);
    return;
  }
  for (int i = 0; i < f->n_in; i++)
    memcpy((char *)f->out[i]->data + (size_t)out_index * f->es[i], f->acc_bytes[i], f->es[i]);
}

/* Sets up inputs, inits and outputs (array or tuple result) of a variadic reduction. */
static kiln_status folder_init(folder_t *f, kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               kiln_literal_t *const *ops, const kiln_hlo_computation_t *reducer,
                               kiln_literal_t **result) {
  memset(f, 0, sizeof *f);
  int n = instr->num_operands / 2;
  if (n < 1 || n > MAX_INPUTS || instr->num_operands != 2 * n) return bad(instr, "needs inputs and as many init values");
  if (!reducer) return bad(instr, "has no to_apply computation");
  f->n_in = n;
  for (int i = 0; i < n; i++) {
    f->in[i] = ops[i];
    f->init[i] = ops[n + i];
    f->type[i] = ops[i]->shape->type;
    f->es[i] = kiln_elem_type_storage_bytes(f->type[i]);
    if (!kiln_shape_is_array(ops[i]->shape) || (ops[i]->num_elements && !ops[i]->data))
      return bad(instr, "inputs must be arrays");
    if (ops[n + i]->num_elements != 1 || ops[n + i]->shape->type != f->type[i] || !ops[n + i]->data)
      return bad(instr, "init values must be scalars of the input types");
    if (f->es[i] > 16) return bad(instr, "element type too wide");
    if (i > 0 && !kiln_shape_compatible(ops[i]->shape, ops[0]->shape) &&
        !(ops[i]->shape->rank == ops[0]->shape->rank &&
          memcmp(ops[i]->shape->dims, ops[0]->shape->dims, sizeof(int64_t) * (size_t)ops[0]->shape->rank) == 0))
      return bad(instr, "inputs must have the same dimensions");
  }
  kiln_shape_t *rs = instr->shape;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, rs, result));
  if (n == 1 && rs->type != KILN_TUPLE) {
    f->out[0] = *result;
  } else {
    if (rs->type != KILN_TUPLE || rs->num_elements != n) return bad(instr, "result must be a tuple of one array per input");
    for (int i = 0; i < n; i++) f->out[i] = (*result)->tuple_elements[i];
  }
  for (int i = 0; i < n; i++)
    if (!kiln_shape_is_array(f->out[i]->shape) || f->out[i]->shape->type != f->type[i])
      return bad(instr, "result element types must match the inputs");
  f->op = n == 1 ? kiln_eval_binary_reducer(reducer, f->type[0], NULL) : KILN_OP_COUNT;
  kiln_eval_scalar_fn_init(&f->fn, ctx, reducer);
  return KILN_STATUS_OK;
}

/* ---- reduce ---- */

static kiln_status eval_reduce(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               kiln_literal_t *const *ops, kiln_literal_t **out) {
  folder_t f;
  kiln_literal_t *result = NULL;
  kiln_status st = folder_init(&f, ctx, instr, ops, kiln_hlo_instruction_called(instr, "to_apply"), &result);
  if (st) {
    if (f.fn.ctx) kiln_eval_scalar_fn_destroy(&f.fn);
    return st;
  }
  const kiln_shape_t *is = f.in[0]->shape;
  int rank = is->rank;
  if (rank > MAX_RANK) st = bad(instr, "rank too large");
  bool reduced[MAX_RANK] = {0};
  for (int k = 0; k < instr->dimensions.n && !st; k++) {
    int64_t d = instr->dimensions.v[k];
    if (d < 0 || d >= rank || reduced[d]) st = bad(instr, "bad reduce dimensions");
    else reduced[d] = true;
  }
  int64_t str[MAX_RANK];
  row_strides(is, str);
  int64_t kdims[MAX_RANK], kstr[MAX_RANK], rdims[MAX_RANK], rstr[MAX_RANK];
  int nk = 0, nr = 0;
  int64_t n_red = 1, n_out = 1;
  for (int d = 0; d < rank && !st; d++) {
    if (reduced[d]) {
      rdims[nr] = is->dims[d];
      rstr[nr++] = str[d];
      n_red *= is->dims[d];
    } else {
      kdims[nk] = is->dims[d];
      kstr[nk++] = str[d];
      n_out *= is->dims[d];
    }
  }
  if (!st && n_out != f.out[0]->num_elements) st = bad(instr, "result shape does not match the kept dimensions");
  int64_t kidx[MAX_RANK] = {0};
  int64_t base = 0;
  for (int64_t o = 0; o < n_out && !st; o++) {
    fold_begin(&f);
    if (n_red > 0) {
      if (f.op != KILN_OP_COUNT && nr == 1 && f.type[0] == KILN_F32) {
        /* common case: one reduced dimension of f32 */
        const float *d = (const float *)f.in[0]->data + base;
        float acc = f.facc32;
        int64_t s = rstr[0];
        for (int64_t k = 0; k < rdims[0]; k++) acc = kiln_eval_fstepf(f.op, acc, d[k * s]);
        f.facc32 = acc;
      } else {
        int64_t ridx[MAX_RANK] = {0};
        int64_t off = base;
        for (;;) {
          if ((st = fold_step(&f, off))) break;
          int d = nr - 1;
          for (; d >= 0; d--) {
            ridx[d]++;
            off += rstr[d];
            if (ridx[d] < rdims[d]) break;
            off -= rstr[d] * rdims[d];
            ridx[d] = 0;
          }
          if (d < 0) break;
        }
      }
    }
    fold_end(&f, o);
    for (int d = nk - 1; d >= 0; d--) {
      kidx[d]++;
      base += kstr[d];
      if (kidx[d] < kdims[d]) break;
      base -= kstr[d] * kdims[d];
      kidx[d] = 0;
    }
  }
  kiln_eval_scalar_fn_destroy(&f.fn);
  if (st) return kiln_status_annotate(st, "in reduce '%s'", instr->name);
  *out = result;
  return KILN_STATUS_OK;
}

/* ---- windows ---- */

typedef struct window {
  int rank;
  int64_t in_dims[MAX_RANK], in_str[MAX_RANK];
  int64_t size[MAX_RANK], stride[MAX_RANK], pad_lo[MAX_RANK], lhs_dil[MAX_RANK], rhs_dil[MAX_RANK];
  int64_t n_win;
} window_t;

static kiln_status window_init(window_t *w, const kiln_hlo_instruction_t *instr, const kiln_shape_t *is,
                               const kiln_shape_t *os) {
  memset(w, 0, sizeof *w);
  if (is->rank > MAX_RANK) return bad(instr, "rank too large");
  if (instr->num_window_dims != is->rank) return bad(instr, "window must have one entry per dimension");
  if (os->rank != is->rank) return bad(instr, "result rank differs from the input's");
  w->rank = is->rank;
  row_strides(is, w->in_str);
  w->n_win = 1;
  for (int i = 0; i < is->rank; i++) {
    const kiln_window_dim_t *d = &instr->window[i];
    w->in_dims[i] = is->dims[i];
    w->size[i] = d->size;
    w->stride[i] = d->stride ? d->stride : 1;
    w->pad_lo[i] = d->pad_lo;
    w->lhs_dil[i] = d->lhs_dilate ? d->lhs_dilate : 1;
    w->rhs_dil[i] = d->rhs_dilate ? d->rhs_dilate : 1;
    if (d->size < 0 || w->stride[i] < 1 || w->lhs_dil[i] < 1 || w->rhs_dil[i] < 1)
      return bad(instr, "invalid window");
    int64_t dilated = is->dims[i] == 0 ? 0 : (is->dims[i] - 1) * w->lhs_dil[i] + 1;
    int64_t padded = dilated + d->pad_lo + d->pad_hi;
    int64_t eff = d->size == 0 ? 0 : (d->size - 1) * w->rhs_dil[i] + 1;
    int64_t want = padded < eff ? 0 : (padded - eff) / w->stride[i] + 1;
    if (want != os->dims[i]) return bad(instr, "window does not match the result shape");
    w->n_win *= d->size;
  }
  return KILN_STATUS_OK;
}

/* Offsets of the window elements of output `oidx` that fall on real input elements
 * (padding and base-dilation holes are skipped, as XLA's evaluator does), in row-major
 * window order. Returns the count. */
static int64_t window_offsets(const window_t *w, const int64_t *oidx, int64_t *offs) {
  int r = w->rank;
  int64_t widx[MAX_RANK] = {0};
  int64_t count = 0;
  if (w->n_win == 0) return 0;
  for (;;) {
    int64_t off = 0;
    bool ok = true;
    for (int d = 0; d < r && ok; d++) {
      int64_t pos = oidx[d] * w->stride[d] + widx[d] * w->rhs_dil[d] - w->pad_lo[d];
      if (pos < 0 || pos % w->lhs_dil[d]) { ok = false; break; }
      pos /= w->lhs_dil[d];
      if (pos >= w->in_dims[d]) { ok = false; break; }
      off += pos * w->in_str[d];
    }
    if (ok) offs[count++] = off;
    int d = r - 1;
    for (; d >= 0; d--) {
      if (++widx[d] < w->size[d]) break;
      widx[d] = 0;
    }
    if (d < 0) break;
  }
  return count;
}

static kiln_status eval_reduce_window(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                      kiln_literal_t *const *ops, kiln_literal_t **out) {
  folder_t f;
  kiln_literal_t *result = NULL;
  kiln_status st = folder_init(&f, ctx, instr, ops, kiln_hlo_instruction_called(instr, "to_apply"), &result);
  if (st) {
    if (f.fn.ctx) kiln_eval_scalar_fn_destroy(&f.fn);
    return st;
  }
  window_t w;
  st = window_init(&w, instr, f.in[0]->shape, f.out[0]->shape);
  int64_t *offs = NULL;
  if (!st) {
    offs = kiln_try_malloc(sizeof(int64_t) * (size_t)(w.n_win ? w.n_win : 1));
    if (!offs) st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "reduce-window '%s': window too large", instr->name);
  }
  const kiln_shape_t *os = f.out[0]->shape;
  int64_t oidx[MAX_RANK] = {0};
  for (int64_t o = 0; o < f.out[0]->num_elements && !st; o++) {
    int64_t cnt = window_offsets(&w, oidx, offs);
    fold_begin(&f);
    for (int64_t k = 0; k < cnt && !st; k++) st = fold_step(&f, offs[k]);
    fold_end(&f, o);
    for (int d = os->rank - 1; d >= 0; d--) {
      if (++oidx[d] < os->dims[d]) break;
      oidx[d] = 0;
    }
  }
  kiln_free(offs);
  kiln_eval_scalar_fn_destroy(&f.fn);
  if (st) return kiln_status_annotate(st, "in reduce-window '%s'", instr->name);
  *out = result;
  return KILN_STATUS_OK;
}

/* select-and-scatter(operand, source, init): for each source element, pick the window
 * element of `operand` that `select` prefers (keep the current choice while
 * select(current, candidate) is true), then result[chosen] = scatter(source, result[chosen]). */
static kiln_status eval_select_and_scatter(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                           kiln_literal_t *const *ops, kiln_literal_t **out) {
  const kiln_literal_t *operand = ops[0], *source = ops[1], *init = ops[2];
  const kiln_hlo_computation_t *sel = kiln_hlo_instruction_called(instr, "select");
  const kiln_hlo_computation_t *sc = kiln_hlo_instruction_called(instr, "scatter");
  if (!sel || !sc) return bad(instr, "needs select and scatter computations");
  kiln_elem_type_t t = operand->shape->type;
  size_t es = kiln_elem_type_storage_bytes(t);
  if (es > 16 || source->shape->type != t || init->shape->type != t || init->num_elements != 1 ||
      instr->shape->type != t || kiln_shape_num_elements(instr->shape) != operand->num_elements)
    return bad(instr, "operand, source, init and result must share the element type");
  window_t w;
  KILN_RETURN_IF_ERROR_PLAIN(window_init(&w, instr, operand->shape, source->shape));
  for (int i = 0; i < w.rank; i++)
    if (w.lhs_dil[i] != 1 || w.rhs_dil[i] != 1) return bad(instr, "window dilation is not allowed");
  kiln_literal_t *r = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, &r));
  for (int64_t k = 0; k < r->num_elements; k++) memcpy((char *)r->data + (size_t)k * es, init->data, es);
  int64_t *offs = kiln_try_malloc(sizeof(int64_t) * (size_t)(w.n_win ? w.n_win : 1));
  if (!offs) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "select-and-scatter '%s': window too large", instr->name);
  kiln_eval_scalar_fn_t fsel, fsc;
  kiln_eval_scalar_fn_init(&fsel, ctx, sel);
  kiln_eval_scalar_fn_init(&fsc, ctx, sc);
  kiln_status st = KILN_STATUS_OK;
  const kiln_shape_t *ss = source->shape;
  int64_t sidx[MAX_RANK] = {0};
  kiln_elem_type_t types[2] = {t, t};
  for (int64_t s = 0; s < source->num_elements && !st; s++) {
    int64_t cnt = window_offsets(&w, sidx, offs);
    int64_t chosen = -1;
    for (int64_t k = 0; k < cnt && !st; k++) {
      if (chosen < 0) {
        chosen = offs[k];
        continue;
      }
      const void *args[2] = {(const char *)operand->data + (size_t)chosen * es,
                             (const char *)operand->data + (size_t)offs[k] * es};
      unsigned char keep = 0;
      void *res = &keep;
      kiln_elem_type_t pt[2] = {t, t};
      st = kiln_eval_scalar_fn_call(&fsel, 2, pt, args, 1, &res);
      if (!st && !keep) chosen = offs[k];
    }
    if (!st && chosen >= 0) {
      unsigned char acc[16];
      void *slot = (char *)r->data + (size_t)chosen * es;
      const void *args[2] = {(const char *)source->data + (size_t)s * es, slot};
      void *res = acc;
      st = kiln_eval_scalar_fn_call(&fsc, 2, types, args, 1, &res);
      if (!st) memcpy(slot, acc, es);
    }
    for (int d = ss->rank - 1; d >= 0; d--) {
      if (++sidx[d] < ss->dims[d]) break;
      sidx[d] = 0;
    }
  }
  kiln_free(offs);
  kiln_eval_scalar_fn_destroy(&fsel);
  kiln_eval_scalar_fn_destroy(&fsc);
  if (st) return kiln_status_annotate(st, "in select-and-scatter '%s'", instr->name);
  *out = r;
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_reduction(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                kiln_literal_t *const *operands, kiln_literal_t **out) {
  *out = NULL;
  switch (instr->opcode) {
  case KILN_OP_REDUCE: return eval_reduce(ctx, instr, operands, out);
  case KILN_OP_REDUCE_WINDOW: return eval_reduce_window(ctx, instr, operands, out);
  case KILN_OP_SELECT_AND_SCATTER: return eval_select_and_scatter(ctx, instr, operands, out);
  default:
    return kiln_status_make(KILN_UNIMPLEMENTED, "evaluator does not support opcode '%s' (instruction '%s')",
                            kiln_hlo_opcode_name(instr->opcode), instr->name);
  }
}
