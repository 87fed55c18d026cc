/* Shape inference, part 2: reductions, windows, dot, convolution, tuples, control flow,
 * linear algebra. */
#include <stdio.h>
#include <string.h>

#include "compiler/hlo/shape_inference.h"
#include "compiler/hlo/shape_inference_internal.h"

#define KILN_MAX_RANK 64

const kiln_shape_t *kiln__param_shape(const kiln_hlo_computation_t *c, int i) {
  if (!c || i < 0 || i >= c->num_parameters || !c->parameters || !c->parameters[i]) return NULL;
  return c->parameters[i]->shape;
}

static bool same_type_ignoring_fp(kiln_elem_type_t x, kiln_elem_type_t y) {
  return x == y || (kiln_elem_type_is_float(x) && kiln_elem_type_is_float(y));
}

static bool is_scalar_of(const kiln_shape_t *s, kiln_elem_type_t t) {
  return s && kiln__is_scalar(s) && s->type == t;
}

static kiln_status need_computation(const char *op, const char *role,
                                    const kiln_hlo_computation_t *c) {
  if (!c) return KILN_ERR_INVALID("%s needs a %s computation", op, role);
  if (!c->root) return KILN_ERR_INVALID("%s %s computation '%s' has no root", op, role, c->name);
  return KILN_STATUS_OK;
}

kiln_status kiln__check_reducer(kiln_arena_t *a, const char *op, const kiln_hlo_computation_t *c,
                                int n, const kiln_elem_type_t *acc_types,
                                const kiln_elem_type_t *input_types) {
  KILN_RETURN_IF_ERROR_PLAIN(need_computation(op, "reducer", c));
  if (c->num_parameters != 2 * n)
    return KILN_ERR_INVALID("%s reducer '%s' must take %d parameters, but takes %d", op, c->name,
                            2 * n, c->num_parameters);
  for (int i = 0; i < n; i++) {
    const kiln_shape_t *acc = kiln__param_shape(c, i), *in = kiln__param_shape(c, n + i);
    if (!is_scalar_of(acc, acc_types[i]))
      return KILN_ERR_INVALID("%s reducer '%s' parameter %d must be %s[], but is %s", op, c->name,
                              i, kiln_elem_type_name(acc_types[i]), kiln__shape_str(a, acc));
    if (!in || !kiln__is_scalar(in) || !same_type_ignoring_fp(in->type, input_types[i]))
      return KILN_ERR_INVALID("%s reducer '%s' parameter %d must be %s[], but is %s", op, c->name,
                              n + i, kiln_elem_type_name(input_types[i]), kiln__shape_str(a, in));
  }
  const kiln_shape_t *r = c->root->shape;
  bool ok;
  if (n == 1 && !kiln_shape_is_tuple(r)) {
    ok = is_scalar_of(r, acc_types[0]);
  } else {
    ok = kiln_shape_is_tuple(r) && r->num_elements == n;
    for (int i = 0; ok && i < n; i++) ok = is_scalar_of(r->elements[i], acc_types[i]);
  }
  if (!ok) {
    kiln_strbuf_t b = {0};
    if (n > 1) kiln_strbuf_append_char(&b, '(');
    for (int i = 0; i < n; i++)
      kiln_strbuf_printf(&b, "%s%s[]", i ? ", " : "", kiln_elem_type_name(acc_types[i]));
    if (n > 1) kiln_strbuf_append_char(&b, ')');
    kiln_status s = KILN_ERR_INVALID("%s reducer '%s' must return %s, but returns %s", op, c->name,
                                     kiln_strbuf_cstr(&b), kiln__shape_str(a, r));
    kiln_strbuf_free(&b);
    return s;
  }
  return KILN_STATUS_OK;
}

static kiln_shape_t *tuple_or_single(kiln_arena_t *a, int n, kiln_shape_t **elems) {
  return n == 1 ? elems[0] : kiln_shape_make_tuple(a, n, elems);
}

kiln_status kiln_shape_infer_reduce(kiln_arena_t *a, int num_operands,
                                    const kiln_shape_t *const *ops, const kiln_i64_list_t *dims,
                                    const kiln_hlo_computation_t *to_apply, kiln_shape_t **out) {
  *out = NULL;
  if (num_operands < 2 || num_operands % 2 != 0 || num_operands > 128)
    return KILN_ERR_INVALID("reduce needs N inputs and N init values (an even count), but has %d operands",
                            num_operands);
  int n = num_operands / 2;
  const kiln_shape_t *in0 = ops[0];
  kiln_elem_type_t acc[64], in_types[64];
  for (int i = 0; i < n; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "reduce input", ops[i]));
    if (!kiln__same_dims(ops[i], in0))
      return KILN_ERR_INVALID("reduce inputs must have the same dimensions; input %d is %s but input 0 is %s",
                              i, kiln__shape_str(a, ops[i]), kiln__shape_str(a, in0));
    if (!kiln__is_scalar(ops[n + i]))
      return KILN_ERR_INVALID("reduce init value %d must be a scalar, but is %s", i,
                              kiln__shape_str(a, ops[n + i]));
    acc[i] = ops[n + i]->type;
    in_types[i] = ops[i]->type;
  }
  if (in0->rank > KILN_MAX_RANK) return KILN_ERR_INVALID("reduce input rank too large");
  if (!kiln__valid_dims(dims, in0->rank))
    return KILN_ERR_INVALID("reduce dimensions=%s must be distinct dimensions of %s",
                            kiln__list_str(a, dims), kiln__shape_str(a, in0));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__check_reducer(a, "reduce", to_apply, n, acc, in_types));
  int64_t odims[KILN_MAX_RANK];
  int orank = 0;
  for (int d = 0; d < in0->rank; d++)
    if (!kiln__contains(dims, d)) odims[orank++] = in0->dims[d];
  kiln_shape_t *elems[64];
  for (int i = 0; i < n; i++)
    if (!(elems[i] = kiln__array(a, acc[i], orank, odims))) return kiln__oom();
  *out = tuple_or_single(a, n, elems);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_window_output(kiln_arena_t *a, const kiln_shape_t *operand, int n,
                                           const kiln_window_dim_t *w, kiln_elem_type_t type,
                                           kiln_shape_t **out) {
  *out = NULL;
  if (n != operand->rank)
    return KILN_ERR_INVALID("window has %d dimensions but the operand %s has rank %d", n,
                            kiln__shape_str(a, operand), operand->rank);
  int64_t odims[KILN_MAX_RANK];
  if (n > KILN_MAX_RANK) return KILN_ERR_INVALID("window rank too large");
  for (int i = 0; i < n; i++) {
    if (w[i].size < 1 || w[i].stride < 1 || w[i].lhs_dilate < 1 || w[i].rhs_dilate < 1)
      return KILN_ERR_INVALID("window dimension %d needs size, stride and dilations >= 1 (size=%lld stride=%lld lhs_dilate=%lld rhs_dilate=%lld)",
                              i, (long long)w[i].size, (long long)w[i].stride,
                              (long long)w[i].lhs_dilate, (long long)w[i].rhs_dilate);
    const int64_t lim = (int64_t)1 << 40;
    if (operand->dims[i] > lim || w[i].size > lim || w[i].lhs_dilate > lim ||
        w[i].rhs_dilate > lim || w[i].pad_lo > lim || w[i].pad_hi > lim || w[i].pad_lo < -lim ||
        w[i].pad_hi < -lim)
      return KILN_ERR_INVALID("window dimension %d has out-of-range values", i);
    /* padded = dilated(dim, lhs_dilate) + lo + hi; eff = dilated(size, rhs_dilate) */
    int64_t padded = 0, eff = 0;
    int64_t d = operand->dims[i];
    if ((d > 0 && (__builtin_mul_overflow(d - 1, w[i].lhs_dilate, &padded) ||
                   __builtin_add_overflow(padded, 1, &padded))) ||
        __builtin_add_overflow(padded, w[i].pad_lo, &padded) ||
        __builtin_add_overflow(padded, w[i].pad_hi, &padded) ||
        __builtin_mul_overflow(w[i].size - 1, w[i].rhs_dilate, &eff) ||
        __builtin_add_overflow(eff, 1, &eff))
      return KILN_ERR_INVALID("window dimension %d overflows", i);
    odims[i] = padded < eff ? 0 : (padded - eff) / w[i].stride + 1;
  }
  *out = kiln__array(a, type, n, odims);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_reduce_window(kiln_arena_t *a, int num_operands,
                                           const kiln_shape_t *const *ops, int nw,
                                           const kiln_window_dim_t *window,
                                           const kiln_hlo_computation_t *to_apply,
                                           kiln_shape_t **out) {
  *out = NULL;
  if (num_operands < 2 || num_operands % 2 != 0 || num_operands > 128)
    return KILN_ERR_INVALID("reduce-window needs N inputs and N init values, but has %d operands",
                            num_operands);
  int n = num_operands / 2;
  kiln_elem_type_t acc[64], in_types[64];
  kiln_shape_t *elems[64];
  for (int i = 0; i < n; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "reduce-window input", ops[i]));
    if (!kiln__same_dims(ops[i], ops[0]))
      return KILN_ERR_INVALID("reduce-window inputs must have the same dimensions; input %d is %s but input 0 is %s",
                              i, kiln__shape_str(a, ops[i]), kiln__shape_str(a, ops[0]));
    if (!kiln__is_scalar(ops[n + i]))
      return KILN_ERR_INVALID("reduce-window init value %d must be a scalar, but is %s", i,
                              kiln__shape_str(a, ops[n + i]));
    acc[i] = ops[n + i]->type;
    in_types[i] = ops[i]->type;
  }
  KILN_RETURN_IF_ERROR_PLAIN(kiln__check_reducer(a, "reduce-window", to_apply, n, acc, in_types));
  for (int i = 0; i < n; i++) {
    kiln_status s = kiln_shape_infer_window_output(a, ops[i], nw, window, acc[i], &elems[i]);
    if (s) return kiln_status_annotate(s, "in reduce-window");
  }
  *out = tuple_or_single(a, n, elems);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_select_and_scatter(
    kiln_arena_t *a, const kiln_shape_t *operand, const kiln_shape_t *source,
    const kiln_shape_t *init, int nw, const kiln_window_dim_t *window,
    const kiln_hlo_computation_t *select, const kiln_hlo_computation_t *scatter,
    kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "select-and-scatter operand", operand));
  kiln_elem_type_t t = operand->type;
  KILN_RETURN_IF_ERROR_PLAIN(need_computation("select-and-scatter", "select", select));
  if (select->num_parameters != 2 || !is_scalar_of(kiln__param_shape(select, 0), t) ||
      !is_scalar_of(kiln__param_shape(select, 1), t) || !is_scalar_of(select->root->shape, KILN_PRED))
    return KILN_ERR_INVALID("select-and-scatter select computation '%s' must be (%s[], %s[]) -> pred[]",
                            select->name, kiln_elem_type_name(t), kiln_elem_type_name(t));
  if (!is_scalar_of(init, t))
    return KILN_ERR_INVALID("select-and-scatter init value %s must be a %s scalar",
                            kiln__shape_str(a, init), kiln_elem_type_name(t));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "select-and-scatter source", source));
  kiln_elem_type_t st = source->type;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__check_reducer(a, "select-and-scatter", scatter, 1, &t, &st));
  kiln_shape_t *wout;
  kiln_status s = kiln_shape_infer_window_output(a, operand, nw, window, st, &wout);
  if (s) return kiln_status_annotate(s, "in select-and-scatter");
  if (!kiln__same_dims(wout, source))
    return KILN_ERR_INVALID("select-and-scatter source %s must have the windowed operand's dimensions %s",
                            kiln__shape_str(a, source), kiln__shape_str(a, wout));
  *out = kiln__with_type(a, operand, t);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_map(kiln_arena_t *a, int n, const kiln_shape_t *const *ops,
                                 const kiln_i64_list_t *dims,
                                 const kiln_hlo_computation_t *to_apply, kiln_shape_t **out) {
  *out = NULL;
  if (n < 1) return KILN_ERR_INVALID("map needs at least one operand");
  for (int i = 0; i < n; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "map operand", ops[i]));
    if (!kiln__same_dims(ops[i], ops[0]))
      return KILN_ERR_INVALID("map operands must have the same dimensions; operand %d is %s but operand 0 is %s",
                              i, kiln__shape_str(a, ops[i]), kiln__shape_str(a, ops[0]));
  }
  if (dims && dims->n) {
    bool identity = dims->n == ops[0]->rank;
    for (int i = 0; identity && i < dims->n; i++) identity = dims->v[i] == i;
    if (!identity)
      return KILN_ERR_INVALID("map dimensions=%s must be {0,...,rank-1}", kiln__list_str(a, dims));
  }
  KILN_RETURN_IF_ERROR_PLAIN(need_computation("map", "to_apply", to_apply));
  if (to_apply->num_parameters != n)
    return KILN_ERR_INVALID("map computation '%s' must take %d parameters, but takes %d",
                            to_apply->name, n, to_apply->num_parameters);
  for (int i = 0; i < n; i++)
    if (!is_scalar_of(kiln__param_shape(to_apply, i), ops[i]->type))
      return KILN_ERR_INVALID("map computation '%s' parameter %d must be %s[], but is %s",
                              to_apply->name, i, kiln_elem_type_name(ops[i]->type),
                              kiln__shape_str(a, kiln__param_shape(to_apply, i)));
  const kiln_shape_t *r = to_apply->root->shape;
  if (!kiln__is_scalar(r))
    return KILN_ERR_INVALID("map computation '%s' must return a scalar, but returns %s",
                            to_apply->name, kiln__shape_str(a, r));
  *out = kiln__with_type(a, ops[0], r->type);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_sort(kiln_arena_t *a, int n, const kiln_shape_t *const *ops,
                                  int64_t dim, const kiln_hlo_computation_t *cmp,
                                  kiln_shape_t **out) {
  *out = NULL;
  if (n < 1 || n > 64) return KILN_ERR_INVALID("sort needs 1 to 64 operands, but has %d", n);
  for (int i = 0; i < n; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "sort operand", ops[i]));
    if (!kiln__same_dims(ops[i], ops[0]))
      return KILN_ERR_INVALID("sort operands must have the same dimensions; operand %d is %s but operand 0 is %s",
                              i, kiln__shape_str(a, ops[i]), kiln__shape_str(a, ops[0]));
  }
  if (dim < 0 || dim >= (ops[0]->rank ? ops[0]->rank : 1))
    return KILN_ERR_INVALID("sort dimension %lld is out of range for %s", (long long)dim,
                            kiln__shape_str(a, ops[0]));
  KILN_RETURN_IF_ERROR_PLAIN(need_computation("sort", "comparator", cmp));
  if (cmp->num_parameters != 2 * n)
    return KILN_ERR_INVALID("sort comparator '%s' must take %d parameters, but takes %d",
                            cmp->name, 2 * n, cmp->num_parameters);
  for (int i = 0; i < 2 * n; i++)
    if (!is_scalar_of(kiln__param_shape(cmp, i), ops[i / 2]->type))
      return KILN_ERR_INVALID("sort comparator '%s' parameter %d must be %s[], but is %s",
                              cmp->name, i, kiln_elem_type_name(ops[i / 2]->type),
                              kiln__shape_str(a, kiln__param_shape(cmp, i)));
  if (!is_scalar_of(cmp->root->shape, KILN_PRED))
    return KILN_ERR_INVALID("sort comparator '%s' must return pred[], but returns %s", cmp->name,
                            kiln__shape_str(a, cmp->root->shape));
  kiln_shape_t *elems[64];
  for (int i = 0; i < n; i++)
    if (!(elems[i] = kiln__with_type(a, ops[i], ops[i]->type))) return kiln__oom();
  *out = tuple_or_single(a, n, elems);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_dot(kiln_arena_t *a, const kiln_shape_t *lhs,
                                 const kiln_shape_t *rhs, const kiln_dot_dnums_t *d,
                                 kiln_elem_type_t result_type, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dot lhs", lhs));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dot rhs", rhs));
  if (lhs->rank > KILN_MAX_RANK || rhs->rank > KILN_MAX_RANK)
    return KILN_ERR_INVALID("dot operand rank too large");
  if (d->lhs_batch.n != d->rhs_batch.n)
    return KILN_ERR_INVALID("dot lhs_batch_dims=%s and rhs_batch_dims=%s must have the same length",
                            kiln__list_str(a, &d->lhs_batch), kiln__list_str(a, &d->rhs_batch));
  if (d->lhs_contracting.n != d->rhs_contracting.n)
    return KILN_ERR_INVALID("dot lhs_contracting_dims=%s and rhs_contracting_dims=%s must have the same length",
                            kiln__list_str(a, &d->lhs_contracting),
                            kiln__list_str(a, &d->rhs_contracting));
  const kiln_shape_t *sides[2] = {lhs, rhs};
  const kiln_i64_list_t *batch[2] = {&d->lhs_batch, &d->rhs_batch};
  const kiln_i64_list_t *contr[2] = {&d->lhs_contracting, &d->rhs_contracting};
  const char *side_names[2] = {"lhs", "rhs"};
  for (int s = 0; s < 2; s++) {
    int64_t all[2 * KILN_MAX_RANK];
    kiln_i64_list_t l = {0, all};
    if (batch[s]->n + contr[s]->n > 2 * KILN_MAX_RANK) return KILN_ERR_INVALID("dot has too many dimension numbers");
    for (int i = 0; i < batch[s]->n; i++) all[l.n++] = batch[s]->v[i];
    for (int i = 0; i < contr[s]->n; i++) all[l.n++] = contr[s]->v[i];
    if (!kiln__valid_dims(&l, sides[s]->rank))
      return KILN_ERR_INVALID("dot %s batch and contracting dimensions %s %s must be distinct dimensions of %s",
                              side_names[s], kiln__list_str(a, batch[s]), kiln__list_str(a, contr[s]),
                              kiln__shape_str(a, sides[s]));
  }
  for (int i = 0; i < d->lhs_batch.n; i++)
    if (lhs->dims[d->lhs_batch.v[i]] != rhs->dims[d->rhs_batch.v[i]])
      return KILN_ERR_INVALID("dot batch dimension sizes differ: lhs %s dimension %lld vs rhs %s dimension %lld",
                              kiln__shape_str(a, lhs), (long long)d->lhs_batch.v[i],
                              kiln__shape_str(a, rhs), (long long)d->rhs_batch.v[i]);
  for (int i = 0; i < d->lhs_contracting.n; i++)
    if (lhs->dims[d->lhs_contracting.v[i]] != rhs->dims[d->rhs_contracting.v[i]])
      return KILN_ERR_INVALID("dot contracting dimension sizes differ: lhs %s dimension %lld vs rhs %s dimension %lld",
                              kiln__shape_str(a, lhs), (long long)d->lhs_contracting.v[i],
                              kiln__shape_str(a, rhs), (long long)d->rhs_contracting.v[i]);
  int64_t odims[2 * KILN_MAX_RANK];
  int orank = 0;
  for (int i = 0; i < d->lhs_batch.n; i++) odims[orank++] = lhs->dims[d->lhs_batch.v[i]];
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < sides[s]->rank && orank < 2 * KILN_MAX_RANK; i++)
      if (!kiln__contains(batch[s], i) && !kiln__contains(contr[s], i))
        odims[orank++] = sides[s]->dims[i];
  *out = kiln__array(a, result_type, orank, odims);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_convolution(kiln_arena_t *a, const kiln_shape_t *lhs,
                                         const kiln_shape_t *rhs, const kiln_conv_dnums_t *d,
                                         int nw, const kiln_window_dim_t *window,
                                         int64_t fgc, int64_t bgc, kiln_elem_type_t result_type,
                                         kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "convolution lhs", lhs));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "convolution rhs", rhs));
  int ns = d->num_spatial;
  if (ns < 0 || ns + 2 > KILN_MAX_RANK) return KILN_ERR_INVALID("convolution has a bad spatial rank");
  if (lhs->rank != ns + 2 || rhs->rank != ns + 2)
    return KILN_ERR_INVALID("convolution with %d spatial dimensions needs rank-%d operands, but has %s and %s",
                            ns, ns + 2, kiln__shape_str(a, lhs), kiln__shape_str(a, rhs));
  if (nw != ns)
    return KILN_ERR_INVALID("convolution window has %d dimensions but dim_labels have %d spatial dimensions",
                            nw, ns);
  /* Dimension numbers must be distinct and in range for each operand. */
  int64_t in_d[KILN_MAX_RANK], k_d[KILN_MAX_RANK], o_d[KILN_MAX_RANK];
  in_d[0] = d->input_batch, in_d[1] = d->input_feature;
  k_d[0] = d->kernel_input_feature, k_d[1] = d->kernel_output_feature;
  o_d[0] = d->output_batch, o_d[1] = d->output_feature;
  for (int i = 0; i < ns; i++) {
    in_d[2 + i] = d->input_spatial[i];
    k_d[2 + i] = d->kernel_spatial[i];
    o_d[2 + i] = d->output_spatial[i];
  }
  kiln_i64_list_t li = {ns + 2, in_d}, lk = {ns + 2, k_d}, lo = {ns + 2, o_d};
  if (!kiln__valid_dims(&li, ns + 2) || !kiln__valid_dims(&lk, ns + 2) ||
      !kiln__valid_dims(&lo, ns + 2))
    return KILN_ERR_INVALID("convolution dim_labels do not name each dimension once");
  if (fgc == 0) fgc = 1;
  if (bgc == 0) bgc = 1;
  if (fgc < 1 || bgc < 1)
    return KILN_ERR_INVALID("convolution feature_group_count and batch_group_count must be >= 1");
  if (fgc > 1 && bgc > 1)
    return KILN_ERR_INVALID("convolution cannot have both feature_group_count (%lld) and batch_group_count (%lld) > 1",
                            (long long)fgc, (long long)bgc);
  int64_t batch = lhs->dims[d->input_batch], in_f = lhs->dims[d->input_feature];
  int64_t k_in = rhs->dims[d->kernel_input_feature], k_out = rhs->dims[d->kernel_output_feature];
  if (in_f % fgc != 0)
    return KILN_ERR_INVALID("convolution input features (%lld) must be a multiple of feature_group_count (%lld)",
                            (long long)in_f, (long long)fgc);
  if (in_f / fgc != k_in)
    return KILN_ERR_INVALID("convolution input features (%lld) / feature_group_count (%lld) must equal the kernel input features (%lld); lhs %s, rhs %s",
                            (long long)in_f, (long long)fgc, (long long)k_in,
                            kiln__shape_str(a, lhs), kiln__shape_str(a, rhs));
  if (k_out % fgc != 0)
    return KILN_ERR_INVALID("convolution kernel output features (%lld) must be a multiple of feature_group_count (%lld)",
                            (long long)k_out, (long long)fgc);
  if (batch % bgc != 0 || k_out % bgc != 0)
    return KILN_ERR_INVALID("convolution batch (%lld) and kernel output features (%lld) must be multiples of batch_group_count (%lld)",
                            (long long)batch, (long long)k_out, (long long)bgc);
  int64_t in_sp[KILN_MAX_RANK];
  kiln_window_dim_t w[KILN_MAX_RANK];
  for (int i = 0; i < ns; i++) {
    in_sp[i] = lhs->dims[d->input_spatial[i]];
    w[i] = window[i];
    if (window[i].size != rhs->dims[d->kernel_spatial[i]])
      return KILN_ERR_INVALID("convolution window size %lld in spatial dimension %d must equal the kernel's size %lld (rhs %s)",
                              (long long)window[i].size, i,
                              (long long)rhs->dims[d->kernel_spatial[i]], kiln__shape_str(a, rhs));
  }
  kiln_shape_t *spatial = kiln__array(a, lhs->type, ns, in_sp), *sp_out;
  if (!spatial) return kiln__oom();
  kiln_status s = kiln_shape_infer_window_output(a, spatial, ns, w, result_type, &sp_out);
  if (s) return kiln_status_annotate(s, "in convolution");
  int64_t odims[KILN_MAX_RANK];
  odims[d->output_batch] = batch / bgc;
  odims[d->output_feature] = k_out;
  for (int i = 0; i < ns; i++) odims[d->output_spatial[i]] = sp_out->dims[i];
  *out = kiln__array(a, result_type, ns + 2, odims);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_tuple(kiln_arena_t *a, int n, const kiln_shape_t *const *ops,
                                   kiln_shape_t **out) {
  *out = kiln_shape_make_tuple(a, n, (kiln_shape_t *const *)ops);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_get_tuple_element(kiln_arena_t *a, const kiln_shape_t *operand,
                                               int64_t index, kiln_shape_t **out) {
  *out = NULL;
  if (!kiln_shape_is_tuple(operand))
    return KILN_ERR_INVALID("get-tuple-element operand must be a tuple, but is %s",
                            kiln__shape_str(a, operand));
  if (index < 0 || index >= operand->num_elements)
    return KILN_ERR_INVALID("get-tuple-element index=%lld is out of range for %s", (long long)index,
                            kiln__shape_str(a, operand));
  *out = operand->elements[index];
  return KILN_STATUS_OK;
}

/* Checks that computation `c` takes exactly the shapes `ops[0..n-1]`. */
static kiln_status check_params(kiln_arena_t *a, const char *op, const char *role,
                                const kiln_hlo_computation_t *c, int n,
                                const kiln_shape_t *const *ops) {
  KILN_RETURN_IF_ERROR_PLAIN(need_computation(op, role, c));
  if (c->num_parameters != n)
    return KILN_ERR_INVALID("%s %s computation '%s' takes %d parameters but is given %d operands",
                            op, role, c->name, c->num_parameters, n);
  for (int i = 0; i < n; i++) {
    const kiln_shape_t *p = kiln__param_shape(c, i);
    if (!p || !kiln_shape_compatible(p, ops[i]))
      return KILN_ERR_INVALID("%s %s computation '%s' parameter %d is %s but the operand is %s", op,
                              role, c->name, i, kiln__shape_str(a, p), kiln__shape_str(a, ops[i]));
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_while(kiln_arena_t *a, const kiln_shape_t *operand,
                                   const kiln_hlo_computation_t *cond,
                                   const kiln_hlo_computation_t *body, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_params(a, "while", "condition", cond, 1, &operand));
  KILN_RETURN_IF_ERROR_PLAIN(check_params(a, "while", "body", body, 1, &operand));
  if (!is_scalar_of(cond->root->shape, KILN_PRED))
    return KILN_ERR_INVALID("while condition '%s' must return pred[], but returns %s", cond->name,
                            kiln__shape_str(a, cond->root->shape));
  if (!kiln_shape_compatible(body->root->shape, operand))
    return KILN_ERR_INVALID("while body '%s' must return the loop state %s, but returns %s",
                            body->name, kiln__shape_str(a, operand),
                            kiln__shape_str(a, body->root->shape));
  *out = (kiln_shape_t *)operand;
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_conditional(kiln_arena_t *a, int num_operands,
                                         const kiln_shape_t *const *ops, int nb,
                                         kiln_hlo_computation_t *const *branches,
                                         kiln_shape_t **out) {
  *out = NULL;
  if (num_operands < 1) return KILN_ERR_INVALID("conditional needs a selector operand");
  const kiln_shape_t *sel = ops[0];
  if (is_scalar_of(sel, KILN_PRED)) {
    if (nb != 2)
      return KILN_ERR_INVALID("conditional with a pred selector needs true and false computations, but has %d branches",
                              nb);
  } else if (is_scalar_of(sel, KILN_S32)) {
    if (nb < 1) return KILN_ERR_INVALID("conditional needs at least one branch computation");
  } else {
    return KILN_ERR_INVALID("conditional selector must be pred[] or s32[], but is %s",
                            kiln__shape_str(a, sel));
  }
  if (num_operands != nb + 1)
    return KILN_ERR_INVALID("conditional with %d branches needs %d operands, but has %d", nb, nb + 1,
                            num_operands);
  for (int i = 0; i < nb; i++) {
    char role[32];
    snprintf(role, sizeof role, "branch %d", i);
    KILN_RETURN_IF_ERROR_PLAIN(check_params(a, "conditional", role, branches[i], 1, &ops[i + 1]));
    if (!kiln_shape_compatible(branches[i]->root->shape, branches[0]->root->shape))
      return KILN_ERR_INVALID("conditional branches must return the same shape; branch %d '%s' returns %s but branch 0 '%s' returns %s",
                              i, branches[i]->name, kiln__shape_str(a, branches[i]->root->shape),
                              branches[0]->name, kiln__shape_str(a, branches[0]->root->shape));
  }
  *out = branches[0]->root->shape;
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_call(kiln_arena_t *a, const char *what, int n,
                                  const kiln_shape_t *const *ops,
                                  const kiln_hlo_computation_t *callee, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_params(a, what, "called", callee, n, ops));
  *out = callee->root->shape;
  return KILN_STATUS_OK;
}

static kiln_status check_square_batch(kiln_arena_t *a, const char *op, const kiln_shape_t *s) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, op, s));
  if (!kiln_elem_type_is_float(s->type) && !kiln_elem_type_is_complex(s->type))
    return KILN_ERR_INVALID("%s needs a floating-point or complex matrix, but has %s", op,
                            kiln__shape_str(a, s));
  if (s->rank < 2 || s->dims[s->rank - 1] != s->dims[s->rank - 2])
    return KILN_ERR_INVALID("%s needs square matrices in the last two dimensions, but has %s", op,
                            kiln__shape_str(a, s));
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_cholesky(kiln_arena_t *a, const kiln_shape_t *operand,
                                      kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_square_batch(a, "cholesky", operand));
  *out = kiln__with_type(a, operand, operand->type);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_triangular_solve(kiln_arena_t *a, const kiln_shape_t *lhs,
                                              const kiln_shape_t *rhs, bool left_side,
                                              kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_square_batch(a, "triangular-solve", lhs));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "triangular-solve b", rhs));
  if (rhs->type != lhs->type || rhs->rank != lhs->rank)
    return KILN_ERR_INVALID("triangular-solve a %s and b %s must have the same element type and rank",
                            kiln__shape_str(a, lhs), kiln__shape_str(a, rhs));
  int r = lhs->rank;
  for (int i = 0; i < r - 2; i++)
    if (lhs->dims[i] != rhs->dims[i])
      return KILN_ERR_INVALID("triangular-solve batch dimensions differ: a %s, b %s",
                              kiln__shape_str(a, lhs), kiln__shape_str(a, rhs));
  int64_t bdim = left_side ? rhs->dims[r - 2] : rhs->dims[r - 1];
  if (bdim != lhs->dims[r - 1])
    return KILN_ERR_INVALID("triangular-solve a %s does not fit b %s on the %s side",
                            kiln__shape_str(a, lhs), kiln__shape_str(a, rhs),
                            left_side ? "left" : "right");
  *out = kiln__with_type(a, rhs, rhs->type);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_fft(kiln_arena_t *a, const kiln_shape_t *operand,
                                 const char *fft_type, const kiln_i64_list_t *len,
                                 kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "fft operand", operand));
  int n = len->n, r = operand->rank;
  if (n < 1 || n > 3)
    return KILN_ERR_INVALID("fft_length=%s must have 1 to 3 entries", kiln__list_str(a, len));
  if (r < n)
    return KILN_ERR_INVALID("fft operand %s has fewer dimensions than fft_length=%s",
                            kiln__shape_str(a, operand), kiln__list_str(a, len));
  if (!fft_type) return KILN_ERR_INVALID("fft needs fft_type");
  bool is_rfft = strcmp(fft_type, "RFFT") == 0, is_irfft = strcmp(fft_type, "IRFFT") == 0;
  bool is_c = strcmp(fft_type, "FFT") == 0 || strcmp(fft_type, "IFFT") == 0;
  if (!is_rfft && !is_irfft && !is_c)
    return KILN_ERR_INVALID("fft_type=%s is not FFT, IFFT, RFFT or IRFFT", fft_type);
  kiln_elem_type_t t = operand->type, rt = t;
  if (is_rfft) {
    if (t != KILN_F32 && t != KILN_F64)
      return KILN_ERR_INVALID("RFFT needs an f32 or f64 operand, but has %s", kiln__shape_str(a, operand));
    rt = t == KILN_F32 ? KILN_C64 : KILN_C128;
  } else {
    if (!kiln_elem_type_is_complex(t))
      return KILN_ERR_INVALID("%s needs a complex operand, but has %s", fft_type,
                              kiln__shape_str(a, operand));
    if (is_irfft) rt = t == KILN_C64 ? KILN_F32 : KILN_F64;
  }
  *out = kiln__with_type(a, operand, rt);
  if (!*out) return kiln__oom();
  for (int i = 0; i < n; i++) {
    int64_t want = len->v[i], dim = r - n + i;
    if (is_irfft && i == n - 1) want = len->v[i] == 0 ? 0 : len->v[i] / 2 + 1;
    if (operand->dims[dim] != want)
      return KILN_ERR_INVALID("%s operand %s dimension %lld must be %lld for fft_length=%s", fft_type,
                              kiln__shape_str(a, operand), (long long)dim, (long long)want,
                              kiln__list_str(a, len));
    if (is_rfft && i == n - 1) (*out)->dims[dim] = len->v[i] == 0 ? 0 : len->v[i] / 2 + 1;
    if (is_irfft) (*out)->dims[dim] = len->v[i];
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_topk(kiln_arena_t *a, const kiln_shape_t *operand, int64_t k,
                                  kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "topk operand", operand));
  if (operand->rank < 1) return KILN_ERR_INVALID("topk operand must have rank >= 1");
  if (k < 0 || k > operand->dims[operand->rank - 1])
    return KILN_ERR_INVALID("topk k=%lld is out of range for %s", (long long)k,
                            kiln__shape_str(a, operand));
  kiln_shape_t *e[2] = {kiln__with_type(a, operand, operand->type),
                        kiln__with_type(a, operand, KILN_S32)};
  if (!e[0] || !e[1]) return kiln__oom();
  e[0]->dims[operand->rank - 1] = k;
  e[1]->dims[operand->rank - 1] = k;
  *out = kiln_shape_make_tuple(a, 2, e);
  return *out ? KILN_STATUS_OK : kiln__oom();
}
