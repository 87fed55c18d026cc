/* Roofline cost model (see cost_model.h). */
#include "compiler/passes/cost_model.h"

#include <math.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "compiler/passes/fusion_util.h"

static const kiln_cost_device_t kDefaultDevice = {
    .name = "H100/H200-like GPU",
    .memory_bytes_per_s = 3.3e12,
    .flops_per_s = 60e12,
    .launch_s = 5e-6,
};

const kiln_cost_device_t *kiln_cost_device_default(void) {
  return &kDefaultDevice;
}

double kiln_cost_shape_elements(const kiln_shape_t *s) {
  if (!s) return 0;
  if (kiln_shape_is_tuple(s)) {
    double n = 0;
    for (int i = 0; i < s->num_elements; i++) n += kiln_cost_shape_elements(s->elements[i]);
    return n;
  }
  return kiln_shape_is_array(s) ? (double)kiln_shape_num_elements(s) : 0;
}

static double elems(const kiln_shape_t *s) {
  return kiln_cost_shape_elements(s);
}

int64_t kiln_cost_shape_bytes(const kiln_shape_t *s) {
  if (!s) return 0;
  if (kiln_shape_is_tuple(s)) {
    int64_t n = 0;
    for (int i = 0; i < s->num_elements; i++) n += kiln_cost_shape_bytes(s->elements[i]);
    return n;
  }
  if (!kiln_shape_is_array(s)) return 0;
  int bits = kiln_elem_type_bits(s->type);
  int64_t e = kiln_shape_num_elements(s);
  return (e * (bits > 0 ? bits : 8) + 7) / 8;
}

double kiln_cost_elementwise_flops(kiln_hlo_opcode_t op, kiln_elem_type_t t) {
  double f;
  switch (op) {
    case KILN_OP_EXP:
    case KILN_OP_EXPM1:
    case KILN_OP_LOG:
    case KILN_OP_LOG1P:
    case KILN_OP_LOGISTIC:
    case KILN_OP_TANH:
    case KILN_OP_SIN:
    case KILN_OP_COS:
    case KILN_OP_TAN:
    case KILN_OP_ATAN2:
    case KILN_OP_POWER:
    case KILN_OP_ERF:
    case KILN_OP_CBRT:
    case KILN_OP_ACOS:
    case KILN_OP_ACOSH:
    case KILN_OP_ASIN:
    case KILN_OP_ASINH:
    case KILN_OP_ATANH:
    case KILN_OP_COSH:
    case KILN_OP_SINH:
      f = 16;
      break;
    case KILN_OP_DIVIDE:
    case KILN_OP_REMAINDER:
    case KILN_OP_SQRT:
    case KILN_OP_RSQRT:
      f = 4;
      break;
    case KILN_OP_COPY:
    case KILN_OP_BITCAST_CONVERT:
      f = 0;
      break;
    default:
      f = kiln_hlo_opcode_is_elementwise(op) ? 1 : 0;
      break;
  }
  if (t == KILN_F64 || t == KILN_S64 || t == KILN_U64) f *= 2;
  if (kiln_elem_type_is_complex(t)) f *= 4;
  return f;
}

/* Weighted flops of one run of a scalar computation (reducer, comparator, map body). */
static double scalar_computation_flops(const kiln_hlo_computation_t *c) {
  if (!c) return 1;
  double f = 0;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    kiln_elem_type_t t = kiln_shape_is_array(in->shape) ? in->shape->type : KILN_F32;
    f += kiln_cost_elementwise_flops(in->opcode, t);
  }
  return f < 1 ? 1 : f;
}

static double read_factor(const kiln_hlo_instruction_t *in, int k) {
  const kiln_hlo_instruction_t *op = in->operands[k];
  double in_e = elems(op->shape), out_e = elems(in->shape);
  switch (in->opcode) {
    case KILN_OP_REDUCE:
    case KILN_OP_CONCATENATE:
    case KILN_OP_TUPLE:
    case KILN_OP_GET_TUPLE_ELEMENT:
      return 1;
    case KILN_OP_BROADCAST:
      return in_e > 0 ? out_e / in_e : 1;
    case KILN_OP_REDUCE_WINDOW: {
      if (k >= in->num_operands / 2) return 1;
      double w = 1;
      for (int i = 0; i < in->num_window_dims; i++) w *= (double)in->window[i].size;
      return in_e > 0 ? out_e * w / in_e : 1;
    }
    case KILN_OP_DYNAMIC_UPDATE_SLICE:
      return k == 0 ? 0 : 1;
    case KILN_OP_SCATTER:
      return k < (in->num_operands - 1) / 2 ? 0 : 1;
    case KILN_OP_FUSION:
      return kiln_cost_operand_utilization(in, k);
    default:
      if (in_e <= 0) return 1;
      return out_e / in_e < 1 ? out_e / in_e : 1;
  }
}

/* Whether `in` reads operand `k` at its own output index (elementwise, same element count):
 * the kernel then computes that operand once per index whatever the number of such users
 * (the elemental emitter caches a value per instruction and index). */
static bool reads_at_own_index(const kiln_hlo_instruction_t *in, int k) {
  return kiln_hlo_opcode_is_elementwise(in->opcode) &&
         elems(in->operands[k]->shape) == elems(in->shape);
}

/* Utilization of every instruction of fused computation `c` (parallel to `order`): how many
 * times per kernel run each is evaluated, in units of its own elements. Users that read a
 * value at their own index count once, with the largest utilization among them (a DAG whose
 * values feed two elementwise users each — threefry's rounds — would double per level
 * otherwise, 2^depth, and reach inf); other reads add up. */
static double *computation_utilization(const kiln_hlo_computation_t *c,
                                       kiln_hlo_instruction_t ***out_order, size_t *out_n,
                                       kiln_ptrmap_t *index) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  double *util = kiln_malloc(sizeof(double) * (n ? n : 1));
  double *same = kiln_calloc(n ? n : 1, sizeof(double));
  for (size_t i = 0; i < n; i++) {
    util[i] = order[i] == c->root ? 1 : 0;
    kiln_ptrmap_put(index, order[i], (void *)(uintptr_t)(i + 1));
  }
  /* Reverse post order: every user of order[i] has given its share before order[i] gives. */
  for (size_t i = n; i-- > 0;) {
    const kiln_hlo_instruction_t *in = order[i];
    util[i] += same[i];
    if (util[i] == 0) continue;
    for (int k = 0; k < in->num_operands; k++) {
      uintptr_t j = (uintptr_t)kiln_ptrmap_get(index, in->operands[k]);
      if (!j) continue;
      double u = util[i] * read_factor(in, k);
      if (reads_at_own_index(in, k)) {
        if (u > same[j - 1]) same[j - 1] = u;
      } else {
        util[j - 1] += u;
      }
    }
  }
  kiln_free(same);
  *out_order = order;
  *out_n = n;
  return util;
}

/* Flops of an instruction that is not a fusion. */
static double op_flops(const kiln_hlo_instruction_t *in) {
  double out = elems(in->shape);
  switch (in->opcode) {
    case KILN_OP_REDUCE: {
      double e = 0;
      for (int k = 0; k < in->num_operands / 2; k++) e += elems(in->operands[k]->shape);
      return e * scalar_computation_flops(kiln_hlo_instruction_called(in, "to_apply"));
    }
    case KILN_OP_REDUCE_WINDOW: {
      double w = 1;
      for (int i = 0; i < in->num_window_dims; i++) w *= (double)in->window[i].size;
      return out * w * scalar_computation_flops(kiln_hlo_instruction_called(in, "to_apply"));
    }
    case KILN_OP_MAP:
      return out * scalar_computation_flops(kiln_hlo_instruction_called(in, "to_apply"));
    case KILN_OP_DOT: {
      double kdim = 1;
      const kiln_shape_t *lhs = in->operands[0]->shape;
      for (int i = 0; i < in->dot_dnums.lhs_contracting.n; i++) {
        int64_t d = in->dot_dnums.lhs_contracting.v[i];
        if (d >= 0 && d < lhs->rank) kdim *= (double)lhs->dims[d];
      }
      return 2 * out * kdim;
    }
    case KILN_OP_CONVOLUTION: {
      const kiln_shape_t *rhs = in->operands[1]->shape;
      double kernel = elems(rhs), of = 1;
      if (in->has_conv_dnums && in->conv_dnums.kernel_output_feature < rhs->rank)
        of = (double)rhs->dims[in->conv_dnums.kernel_output_feature];
      return 2 * out * (of > 0 ? kernel / of : kernel);
    }
    case KILN_OP_SORT: {
      double n = elems(in->operands[0]->shape), lg = n > 1 ? log2(n) : 1;
      return n * lg * scalar_computation_flops(kiln_hlo_instruction_called(in, "to_apply"));
    }
    default: {
      if (!kiln_hlo_opcode_is_elementwise(in->opcode)) return 0;
      kiln_elem_type_t t = in->num_operands && kiln_shape_is_array(in->operands[0]->shape)
                               ? in->operands[0]->shape->type
                               : (kiln_shape_is_array(in->shape) ? in->shape->type : KILN_F32);
      return out * kiln_cost_elementwise_flops(in->opcode, t);
    }
  }
}

/* Bytes an instruction writes when it is (or roots) a kernel: in-place ops write only
 * their updates. */
static double op_bytes_written(const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_DYNAMIC_UPDATE_SLICE && in->num_operands > 1)
    return (double)kiln_cost_shape_bytes(in->operands[1]->shape);
  if (in->opcode == KILN_OP_SCATTER) {
    int n = (in->num_operands - 1) / 2;
    double b = 0;
    for (int k = 0; k < n; k++) b += (double)kiln_cost_shape_bytes(in->operands[n + 1 + k]->shape);
    return b;
  }
  return (double)kiln_cost_shape_bytes(in->shape);
}

/* Bytes read from the operands of an instruction that is not a fusion. */
static double op_bytes_read(const kiln_hlo_instruction_t *in) {
  double b = 0;
  for (int k = 0; k < in->num_operands; k++) {
    double u = read_factor(in, k);
    b += (double)kiln_cost_shape_bytes(in->operands[k]->shape) * (u < 1 ? u : 1);
  }
  return b;
}

/* Everything the model knows about one instruction run as a kernel, computed in one walk
 * of its fused computation (the walk is what costs; every query reads this). */
typedef struct cost_summary {
  double flops, bytes_read, bytes_written;
  int num_operands;
  double util[]; /* per operand slot: kiln_cost_operand_utilization */
} cost_summary_t;

static cost_summary_t *summarize(const kiln_hlo_instruction_t *in) {
  int nops = in->num_operands;
  cost_summary_t *s = kiln_calloc(1, sizeof *s + sizeof(double) * (size_t)(nops ? nops : 1));
  s->num_operands = nops;
  const kiln_hlo_computation_t *c =
      in->opcode == KILN_OP_FUSION ? kiln_hlo_instruction_called(in, "calls") : NULL;
  if (in->opcode != KILN_OP_FUSION) {
    s->flops = op_flops(in);
    for (int k = 0; k < nops; k++) s->util[k] = read_factor(in, k);
    if (!kiln_fusion_is_free(in)) {
      s->bytes_read = op_bytes_read(in);
      s->bytes_written = op_bytes_written(in);
    }
    return s;
  }
  if (!c) {
    for (int k = 0; k < nops; k++) s->util[k] = 1;
    return s;
  }
  kiln_ptrmap_t index;
  kiln_ptrmap_init(&index);
  kiln_hlo_instruction_t **order;
  size_t n;
  double *util = computation_utilization(c, &order, &n, &index);
  for (size_t i = 0; i < n; i++)
    if (order[i]->opcode != KILN_OP_PARAMETER)
      s->flops += op_flops(order[i]) * (util[i] > 0 ? util[i] : 0);
  for (int k = 0; k < nops; k++) {
    if (k >= c->num_parameters) {
      s->util[k] = 1;
      continue;
    }
    uintptr_t j = (uintptr_t)kiln_ptrmap_get(&index, c->parameters[k]);
    s->util[k] = j ? util[j - 1] : 0;
  }
  if (!kiln_fusion_is_free(in)) {
    for (int k = 0; k < c->num_parameters; k++) {
      uintptr_t j = (uintptr_t)kiln_ptrmap_get(&index, c->parameters[k]);
      double u = j ? util[j - 1] : 0;
      s->bytes_read += (double)kiln_cost_shape_bytes(c->parameters[k]->shape) * (u < 1 ? u : 1);
    }
    if (c->root && c->root->opcode != KILN_OP_TUPLE) {
      s->bytes_written = op_bytes_written(c->root);
    } else if (c->root) {
      for (int k = 0; k < c->root->num_operands; k++)
        s->bytes_written += op_bytes_written(c->root->operands[k]);
    }
  }
  kiln_free(util);
  kiln_free(order);
  kiln_ptrmap_free(&index);
  return s;
}

void kiln_cost_cache_init(kiln_cost_cache_t *cache) {
  kiln_ptrmap_init(&cache->summaries);
}

void kiln_cost_cache_free(kiln_cost_cache_t *cache) {
  for (size_t i = 0; i < cache->summaries.cap; i++)
    if (cache->summaries.keys[i]) kiln_free(cache->summaries.values[i]);
  kiln_ptrmap_free(&cache->summaries);
}

void kiln_cost_cache_forget(kiln_cost_cache_t *cache, const kiln_hlo_instruction_t *in) {
  cost_summary_t *s = kiln_ptrmap_get(&cache->summaries, in);
  if (!s) return;
  kiln_free(s);
  kiln_ptrmap_put(&cache->summaries, in, NULL);
}

/* The summary of `in`: from `cache` when it holds one for the same operand count, else
 * computed (and kept when `cache` is set; `*owned` says the caller frees it). */
static cost_summary_t *summary_of(kiln_cost_cache_t *cache, const kiln_hlo_instruction_t *in,
                                  bool *owned) {
  *owned = false;
  if (cache) {
    cost_summary_t *s = kiln_ptrmap_get(&cache->summaries, in);
    if (s && s->num_operands == in->num_operands) return s;
    kiln_free(s);
    s = summarize(in);
    kiln_ptrmap_put(&cache->summaries, in, s);
    return s;
  }
  *owned = true;
  return summarize(in);
}

double kiln_cost_operand_utilization(const kiln_hlo_instruction_t *in, int k) {
  if (k < 0 || k >= in->num_operands) return 0;
  if (in->opcode != KILN_OP_FUSION) return read_factor(in, k);
  cost_summary_t *s = summarize(in);
  double u = s->util[k];
  kiln_free(s);
  return u;
}

static double utilization_in(const cost_summary_t *s, const kiln_hlo_instruction_t *consumer,
                             const kiln_hlo_instruction_t *operand) {
  double u = 0;
  for (int k = 0; k < consumer->num_operands; k++)
    if (consumer->operands[k] == operand) u += s->util[k];
  return u;
}

double kiln_cost_utilization_of(const kiln_hlo_instruction_t *consumer,
                                const kiln_hlo_instruction_t *operand) {
  cost_summary_t *s = summarize(consumer);
  double u = utilization_in(s, consumer, operand);
  kiln_free(s);
  return u;
}

double kiln_cost_flops(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_FUSION) return op_flops(in);
  cost_summary_t *s = summarize(in);
  double f = s->flops;
  kiln_free(s);
  return f;
}

double kiln_cost_bytes_read(const kiln_hlo_instruction_t *in) {
  if (kiln_fusion_is_free(in)) return 0;
  if (in->opcode != KILN_OP_FUSION) return op_bytes_read(in);
  cost_summary_t *s = summarize(in);
  double b = s->bytes_read;
  kiln_free(s);
  return b;
}

double kiln_cost_bytes_written(const kiln_hlo_instruction_t *in) {
  if (kiln_fusion_is_free(in)) return 0;
  if (in->opcode != KILN_OP_FUSION) return op_bytes_written(in);
  cost_summary_t *s = summarize(in);
  double b = s->bytes_written;
  kiln_free(s);
  return b;
}

double kiln_cost_kernel_time(const kiln_cost_device_t *d, double bytes_read, double bytes_written,
                             double flops) {
  double mem = (bytes_read + bytes_written) / d->memory_bytes_per_s;
  double compute = flops / d->flops_per_s;
  return d->launch_s + (mem > compute ? mem : compute);
}

double kiln_cost_instruction_time_cached(kiln_cost_cache_t *cache, const kiln_cost_device_t *d,
                                         const kiln_hlo_instruction_t *in) {
  if (kiln_fusion_is_free(in)) return 0;
  bool owned;
  cost_summary_t *s = summary_of(cache, in, &owned);
  double t = kiln_cost_kernel_time(d, s->bytes_read, s->bytes_written, s->flops);
  if (owned) kiln_free(s);
  return t;
}

double kiln_cost_instruction_time(const kiln_cost_device_t *d, const kiln_hlo_instruction_t *in) {
  return kiln_cost_instruction_time_cached(NULL, d, in);
}

double kiln_cost_fused_time_cached(kiln_cost_cache_t *cache, const kiln_cost_device_t *d,
                                   const kiln_hlo_instruction_t *producer,
                                   const kiln_hlo_instruction_t *consumer, bool extra_output) {
  bool own_p, own_c;
  cost_summary_t *ps = summary_of(cache, producer, &own_p);
  cost_summary_t *cs = summary_of(cache, consumer, &own_c);
  double u = utilization_in(cs, consumer, producer);
  double used = u < 1 ? u : 1;
  if (extra_output) used = 1; /* the producer is computed whole for its own output */
  double read = cs->bytes_read - (double)kiln_cost_shape_bytes(producer->shape) * (u < 1 ? u : 1) +
                ps->bytes_read * used;
  if (read < 0) read = 0;
  double written = cs->bytes_written;
  if (extra_output) written += ps->bytes_written;
  double flops = cs->flops + ps->flops * (extra_output && u < 1 ? 1 : u);
  if (own_p) kiln_free(ps);
  if (own_c) kiln_free(cs);
  return kiln_cost_kernel_time(d, read, written, flops);
}

double kiln_cost_fused_time(const kiln_cost_device_t *d, const kiln_hlo_instruction_t *producer,
                            const kiln_hlo_instruction_t *consumer, bool extra_output) {
  return kiln_cost_fused_time_cached(NULL, d, producer, consumer, extra_output);
}
