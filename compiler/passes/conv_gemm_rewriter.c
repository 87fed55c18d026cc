/* conv_gemm_rewriter: convolutions as im2col + one gemm-form dot (what XLA:CPU gets from
 * Eigen's spatial convolution, in HLO the rest of the pipeline already handles).
 *
 * For a convolution with S spatial dims, input [N, I..., C] (any dimension numbers),
 * kernel [W..., C / G, Co] and output [N, O..., Co]:
 *   x    = transpose(input) to [N, I..., C], then pad(x, 0) with the window's low / high
 *          padding and lhs dilation - 1 as interior padding;
 *   col  = concatenate over the K = prod(W) window offsets w (row-major) of the strided
 *          slices x[:, w * rhs_dilate + o * stride, :] ([N, O..., C] each) along the
 *          feature dim: [N, O..., K * C] = [M, K, C] with M = N * prod(O);
 *   w    = transpose(reverse(kernel) where the window is reversed) to [W..., C / G, Co],
 *          reshaped to [K * C / G, Co];
 *   out  = dot(col, w) contracting K * C / G, as [M, Co], reshaped to [N, O..., Co] and
 *          transposed to the output's dimension numbers.
 * With feature_group_count G > 1 the groups become the dot's batch dim: x as [N, I..., G,
 * C / G] -> [G * N, I..., C / G] before im2col, whose columns are then [G, M, K * C / G];
 * the kernel's [K * C / G, G, Co / G] ->
 * [G, K * C / G, Co / G], and the [G, M, Co / G] result back to [M, Co]. A 1 x 1
 * convolution without padding, strides or dilation needs no slice: it is the dot alone.
 * The slices, pad and concatenate fuse into one loop kernel; the dot reaches the gemm
 * thunk through dot_canonicalizer.
 *
 * Taken: element types whose dot is a gemm the target takes, directly (f32, f64, and on the
 * host bf16 / f16) or once dot_canonicalizer converts its operands (integer, mixed and pred
 * operands: kiln_gemm_upcast_types), static shapes with default layouts, padding >= 0, every window
 * dimension's stride, size and dilations >= 1, at most MAX_OFFSETS window offsets, with
 * feature groups at least MIN_GROUP_OUTPUTS output features per group. Left to the
 * elemental kernel (stated in the README): batch_group_count > 1, depthwise-like groups
 * (bench_conv: a 3x3 depthwise convolution runs 10x slower as 256 tiny gemms), complex
 * convolutions, types no gemm takes even converted (f8 results), negative padding, larger
 * windows; everything
 * when there is no gemm library (KILN_GEMM_LIBRARY=none). */
#include <string.h>

#include "base/alloc.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/passes/pass.h"

#define MAX_OFFSETS 64
#define MAX_SPATIAL 8
#define MIN_GROUP_OUTPUTS 8

static bool default_layout(const kiln_shape_t *s) {
  return kiln_shape_is_array(s) && !kiln_shape_is_dynamic(s) &&
         (!s->has_layout || kiln_layout_is_default(&s->layout));
}

/* Whether the dot of `in`'s element types, contracting k elements, is a gemm once
 * dot_canonicalizer converted its operands where needed (kiln_gemm_upcast_types). */
static bool types_taken(const kiln_hlo_instruction_t *in, double k, const kiln_pass_options_t *o) {
  kiln_elem_type_t lt = in->operands[0]->shape->type, rt = in->operands[1]->shape->type;
  kiln_elem_type_t out = in->shape->type, op, res;
  kiln_gemm_types_t types = kiln_gemm_types_of(o);
  return (lt == rt && kiln_gemm_types_take(lt, out, types)) ||
         kiln_gemm_upcast_types(lt, rt, out, k, types, &op, &res);
}

/* Whether the rewrite takes convolution `in` (see the file comment). */
static bool taken(const kiln_hlo_instruction_t *in, const kiln_pass_options_t *o) {
  if (in->num_operands != 2 || !in->has_conv_dnums || in->batch_group_count > 1) return false;
  const kiln_shape_t *ls = in->operands[0]->shape, *rs = in->operands[1]->shape, *os = in->shape;
  if (!default_layout(ls) || !default_layout(rs) || !default_layout(os)) return false;
  const kiln_conv_dnums_t *dn = &in->conv_dnums;
  int S = dn->num_spatial;
  if (S > MAX_SPATIAL || in->num_window_dims != S || ls->rank != S + 2) return false;
  int64_t G = in->feature_group_count > 1 ? in->feature_group_count : 1;
  int64_t C = ls->dims[dn->input_feature], Co = rs->dims[dn->kernel_output_feature];
  if (C % G || Co % G || rs->dims[dn->kernel_input_feature] * G != C) return false;
  /* Per group a gemm of n = Co / G columns: below MIN_GROUP_OUTPUTS (depthwise) the
   * transposes and the matrix-vector gemms cost more than the elemental kernel. */
  if (G > 1 && Co / G < MIN_GROUP_OUTPUTS) return false;
  int64_t offsets = 1;
  for (int i = 0; i < S; i++) {
    const kiln_window_dim_t *w = &in->window[i];
    if (w->size < 1 || w->stride < 1 || w->lhs_dilate < 1 || w->rhs_dilate < 1 || w->pad_lo < 0 ||
        w->pad_hi < 0)
      return false;
    if (w->size != rs->dims[dn->kernel_spatial[i]]) return false;
    offsets *= w->size;
    if (offsets > MAX_OFFSETS) return false;
  }
  for (int d = 0; d < ls->rank; d++)
    if (ls->dims[d] == 0) return false;
  if (!types_taken(in, (double)(offsets * (C / G)), o)) return false;
  /* im2col pads with zero, which f8e8m0fnu (powers of two) cannot hold */
  bool pads = false;
  for (int i = 0; i < S; i++)
    pads |= in->window[i].pad_lo || in->window[i].pad_hi || in->window[i].lhs_dilate > 1;
  if (pads && ls->type == KILN_F8E8M0FNU) return false;
  return kiln_shape_num_elements(os) > 0;
}

/* dot(x, y) -> `type` with `nb` leading batch dims, contracting x's last with y's dim nb. */
static kiln_hlo_instruction_t *gemm_dot(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                        kiln_hlo_instruction_t *y, int nb, kiln_elem_type_t type) {
  if (!x || !y) return NULL;
  int64_t dims[3], batch[1] = {0}, lc[1] = {x->shape->rank - 1}, rc[1] = {nb};
  for (int i = 0; i < nb; i++) dims[i] = x->shape->dims[i];
  dims[nb] = x->shape->dims[nb];
  dims[nb + 1] = y->shape->dims[nb + 1];
  kiln_hlo_instruction_t *ops[2] = {x, y};
  kiln_hlo_instruction_t *d =
      kiln_builder_op(b, KILN_OP_DOT, kiln_builder_shape(b, type, nb + 2, dims), 2, ops);
  if (!d) return NULL;
  d->has_dot_dnums = true;
  kiln_dot_dnums_t *dn = &d->dot_dnums;
  if (!kiln_builder_list(b, &dn->lhs_batch, nb, batch) ||
      !kiln_builder_list(b, &dn->rhs_batch, nb, batch) ||
      !kiln_builder_list(b, &dn->lhs_contracting, 1, lc) ||
      !kiln_builder_list(b, &dn->rhs_contracting, 1, rc)) {
    b->failed = true;
    return NULL;
  }
  return d;
}

/* The im2col columns [M, K * C]: strided slices of the padded input, concatenated. */
static kiln_hlo_instruction_t *im2col(kiln_builder_t *b, const kiln_hlo_instruction_t *in,
                                      kiln_hlo_instruction_t *x, const int64_t *out_spatial) {
  int S = in->conv_dnums.num_spatial, r = S + 2;
  int64_t lo[MAX_SPATIAL + 2] = {0}, hi[MAX_SPATIAL + 2] = {0}, interior[MAX_SPATIAL + 2] = {0};
  bool padded = false;
  for (int i = 0; i < S; i++) {
    const kiln_window_dim_t *w = &in->window[i];
    lo[1 + i] = w->pad_lo, hi[1 + i] = w->pad_hi, interior[1 + i] = w->lhs_dilate - 1;
    padded |= w->pad_lo || w->pad_hi || w->lhs_dilate > 1;
  }
  if (padded)
    x = kiln_builder_pad(b, x, kiln_builder_const_f64(b, x->shape->type, 0), lo, hi, interior);
  if (!x) return NULL;
  int64_t count[MAX_SPATIAL + 2], stride[MAX_SPATIAL + 2],
      start[MAX_SPATIAL + 2] = {0}, at[MAX_SPATIAL] = {0};
  int64_t C = x->shape->dims[r - 1], K = 1;
  count[0] = x->shape->dims[0], count[r - 1] = C, stride[0] = stride[r - 1] = 1;
  for (int i = 0; i < S; i++) {
    count[1 + i] = out_spatial[i], stride[1 + i] = in->window[i].stride;
    K *= in->window[i].size;
  }
  kiln_hlo_instruction_t *cols[MAX_OFFSETS];
  for (int64_t k = 0; k < K; k++) {
    bool whole = true;
    for (int i = 0; i < S; i++) {
      start[1 + i] = at[i] * in->window[i].rhs_dilate;
      whole &= start[1 + i] == 0 && stride[1 + i] == 1 && count[1 + i] == x->shape->dims[1 + i];
    }
    cols[k] = whole ? x : kiln_builder_strided_slice(b, x, start, count, stride);
    if (!cols[k]) return NULL;
    for (int i = S - 1; i >= 0; i--) {
      if (++at[i] < in->window[i].size) break;
      at[i] = 0;
    }
  }
  kiln_hlo_instruction_t *col = cols[0];
  if (K > 1) {
    int64_t dims[MAX_SPATIAL + 2];
    memcpy(dims, count, sizeof(int64_t) * (size_t)r);
    dims[r - 1] = K * C;
    col = kiln_builder_op(b, KILN_OP_CONCATENATE, kiln_builder_shape(b, x->shape->type, r, dims),
                          (int)K, cols);
    int64_t cat = r - 1;
    if (!col || !kiln_builder_list(b, &col->dimensions, 1, &cat)) {
      b->failed = true;
      return NULL;
    }
    col->has_dimensions = true;
  }
  int64_t M = 1;
  for (int d = 0; d < r - 1; d++) M *= count[d];
  int64_t flat[2] = {M, K * C};
  return kiln_builder_reshape(b, col, 2, flat);
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  if (!taken(in, ctx)) return NULL;
  const kiln_conv_dnums_t *dn = &in->conv_dnums;
  int S = dn->num_spatial, r = S + 2;
  kiln_hlo_instruction_t *lhs = in->operands[0], *rhs = in->operands[1];
  int64_t G = in->feature_group_count > 1 ? in->feature_group_count : 1;
  int64_t C = lhs->shape->dims[dn->input_feature], Co = rhs->shape->dims[dn->kernel_output_feature];
  int64_t Cg = C / G, Cog = Co / G, K = 1, N = lhs->shape->dims[dn->input_batch];
  int64_t perm[MAX_SPATIAL + 2], out_spatial[MAX_SPATIAL], rev[MAX_SPATIAL];
  int nrev = 0;
  /* The input as [N, I..., C]; the kernel as [W..., C / G, Co]. */
  perm[0] = dn->input_batch, perm[r - 1] = dn->input_feature;
  for (int i = 0; i < S; i++) {
    perm[1 + i] = dn->input_spatial[i];
    out_spatial[i] = in->shape->dims[dn->output_spatial[i]];
    K *= in->window[i].size;
    if (in->window[i].reversal) rev[nrev++] = dn->kernel_spatial[i];
  }
  kiln_hlo_instruction_t *x = kiln_builder_transpose(b, lhs, perm);
  if (G > 1 && x) {
    /* The groups join the batch: [N, I..., G, Cg] -> [G, N, I..., Cg] -> [G * N, I..., Cg], so
     * im2col's rows come out group-major ([G, M, K * Cg]), moving the input rather than the K
     * times larger columns. */
    int64_t d5[MAX_SPATIAL + 3], p5[MAX_SPATIAL + 3], d4[MAX_SPATIAL + 2];
    memcpy(d5, x->shape->dims, sizeof(int64_t) * (size_t)(r - 1));
    d5[r - 1] = G, d5[r] = Cg;
    p5[0] = r - 1;
    for (int d = 0; d < r - 1; d++) p5[1 + d] = d;
    p5[r] = r;
    memcpy(d4, x->shape->dims, sizeof(int64_t) * (size_t)r);
    d4[0] = G * N, d4[r - 1] = Cg;
    x = kiln_builder_reshape(
        b, kiln_builder_transpose(b, kiln_builder_reshape(b, x, r + 1, d5), p5), r, d4);
  }
  kiln_hlo_instruction_t *col = im2col(b, in, x, out_spatial);
  if (nrev) rhs = kiln_builder_reverse(b, rhs, nrev, rev);
  for (int i = 0; i < S; i++) perm[i] = dn->kernel_spatial[i];
  perm[S] = dn->kernel_input_feature, perm[S + 1] = dn->kernel_output_feature;
  kiln_hlo_instruction_t *w = kiln_builder_transpose(b, rhs, perm);
  if (!col || !w) return NULL;
  int64_t M = col->shape->dims[0] / G;
  kiln_hlo_instruction_t *out;
  if (G == 1) {
    int64_t wd[2] = {K * C, Co};
    out = gemm_dot(b, col, kiln_builder_reshape(b, w, 2, wd), 0, in->shape->type);
  } else {
    int64_t c3[3] = {G, M, K * Cg};
    kiln_hlo_instruction_t *gc = kiln_builder_reshape(b, col, 3, c3);
    int64_t w3[3] = {K * Cg, G, Cog}, wp[3] = {1, 0, 2}, o3p[3] = {1, 0, 2};
    kiln_hlo_instruction_t *gw = kiln_builder_transpose(b, kiln_builder_reshape(b, w, 3, w3), wp);
    int64_t od[2] = {M, Co};
    out = kiln_builder_reshape(
        b, kiln_builder_transpose(b, gemm_dot(b, gc, gw, 1, in->shape->type), o3p), 2, od);
  }
  /* [M, Co] -> [N, O..., Co] -> the output's dimension order. */
  int64_t nd[MAX_SPATIAL + 2];
  nd[0] = N, nd[r - 1] = Co;
  for (int i = 0; i < S; i++) nd[1 + i] = out_spatial[i];
  out = kiln_builder_reshape(b, out, r, nd);
  perm[dn->output_batch] = 0, perm[dn->output_feature] = r - 1;
  for (int i = 0; i < S; i++) perm[dn->output_spatial[i]] = 1 + i;
  return kiln_builder_transpose(b, out, perm);
}

kiln_status kiln_pass_conv_gemm_rewriter(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                         bool *changed) {
  if (opts && opts->no_gemm_library) return NULL;
  return kiln_builder_expand_all(m, KILN_OP_CONVOLUTION, expand, (void *)opts, "conv_gemm_rewriter",
                                 changed);
}
