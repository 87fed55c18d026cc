/* Fusion wrapper: one fusion per remaining kernel; see fusion_wrapper.h. */
#include "compiler/passes/fusion_wrapper.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/vec.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"

/* ---- gemm ---- */

static bool default_layout(const kiln_shape_t *s) {
  return !s->has_layout || kiln_layout_is_default(&s->layout);
}

static bool plain_array(const kiln_shape_t *s, kiln_elem_type_t t) {
  return kiln_shape_is_array(s) && s->type == t && !kiln_shape_is_dynamic(s) && default_layout(s);
}

/* One operand of a gemm: after its `nb` leading batch dims, a contracting dim `kd` and the
 * other dims as one run on one side of it. Sets the product of the free dims, the
 * contracting size, and whether the contracting dim comes first among the non-batch dims. */
static bool gemm_operand(const kiln_shape_t *s, int nb, const kiln_i64_list_t *contracting,
                         int64_t *free_elems, int64_t *k, bool *contracting_first) {
  if (contracting->n != 1) return false;
  int64_t kd = contracting->v[0];
  if (kd < nb || kd >= s->rank) return false;
  *k = s->dims[kd];
  *free_elems = 1;
  for (int d = nb; d < s->rank; d++)
    if (d != kd) *free_elems *= s->dims[d];
  /* The free dims are [nb, kd) or (kd, rank): contiguous in row-major order only if the
   * contracting dim is the first or the last non-batch dim. */
  bool first = kd == nb, last = kd == s->rank - 1;
  if (!first && !last) return false;
  /* With no free dims (or only size-1 ones) either orientation reads the same memory. */
  *contracting_first = first && !last;
  return true;
}

/* The integer types of kiln_gemm_desc_t (products and sums modulo 2^32, then truncated). */
static bool gemm_int_type(kiln_elem_type_t t) {
  return t == KILN_S8 || t == KILN_S16 || t == KILN_S32 || t == KILN_U8 || t == KILN_U16 ||
         t == KILN_U32;
}

/* Whether the host gemm takes operands of type `in` with a result of type `out` (the table of
 * kiln_gemm_desc_t in runtime/device.h). */
bool kiln_gemm_types_take(kiln_elem_type_t in, kiln_elem_type_t out, kiln_gemm_types_t types) {
  if (in == KILN_F32 || in == KILN_F64) return out == in;
  if (types == KILN_GEMM_TYPES_CUBLAS) return false;
  if (types == KILN_GEMM_TYPES_CUBLASLT && in != KILN_BF16 && in != KILN_F16) return false;
  switch (in) {
    case KILN_C64:
    case KILN_C128:
      return out == in;
    case KILN_BF16:
    case KILN_F16: /* not bf16 <-> f16: the dot rounds its operands to the result type first */
      return out == in || out == KILN_F32;
    case KILN_S8:
    case KILN_S16:
    case KILN_S32:
    case KILN_U8:
    case KILN_U16:
    case KILN_U32:
      return gemm_int_type(out);
    default:
      return false;
  }
}

/* Whether every value of type x is exact in float type t (t one of bf16, f16, f32, f64). */
static bool float_holds(kiln_elem_type_t t, kiln_elem_type_t x) {
  if (x == t || x == KILN_PRED) return true; /* pred: 0 and 1 */
  bool small_int = kiln_elem_type_is_integral(x) && kiln_elem_type_bits(x) <= 8;
  bool f8 = kiln_elem_type_is_float(x) && kiln_elem_type_bits(x) <= 8;
  switch (t) {
    case KILN_BF16:
      return small_int || f8; /* 8 significant bits, f32's exponent range */
    case KILN_F16:            /* 11 significant bits, exponents down to 2^-24 */
      return small_int || (f8 && x != KILN_F8E8M0FNU);
    case KILN_F32:
      return float_holds(KILN_BF16, x) || float_holds(KILN_F16, x) || x == KILN_BF16 ||
             x == KILN_F16 || x == KILN_S16 || x == KILN_U16;
    case KILN_F64:
      return float_holds(KILN_F32, x) || x == KILN_F32 || x == KILN_S32 || x == KILN_U32;
    default:
      return false;
  }
}

/* The largest magnitude of an integer type of up to 32 bits. */
static double int_magnitude(kiln_elem_type_t t) {
  int bits = kiln_elem_type_bits(t);
  return kiln_elem_type_is_signed_int(t) ? ldexp(1.0, bits - 1) : ldexp(1.0, bits) - 1;
}

bool kiln_gemm_upcast_types(kiln_elem_type_t lt, kiln_elem_type_t rt, kiln_elem_type_t out,
                            double k, kiln_gemm_types_t types, kiln_elem_type_t *op,
                            kiln_elem_type_t *res) {
  if (lt == rt && kiln_gemm_types_take(lt, out, types)) return false;
  *res = out;
  if (kiln_elem_type_is_float(out)) {
    /* A dot rounds its operands to the result type first (the evaluator, the elemental
     * kernel): both must be exact in `out` as well as in the gemm's type, the result type
     * itself tried first. */
    if (!float_holds(out, lt) || !float_holds(out, rt)) return false;
    static const kiln_elem_type_t kFloats[] = {KILN_BF16, KILN_F16, KILN_F32, KILN_F64};
    *op = out;
    if (kiln_gemm_types_take(*op, out, types)) return true;
    for (size_t i = 0; i < sizeof kFloats / sizeof kFloats[0]; i++) {
      *op = kFloats[i];
      if (float_holds(*op, lt) && float_holds(*op, rt) && kiln_gemm_types_take(*op, out, types))
        return true;
    }
    return false;
  }
  if (!kiln_elem_type_is_integral(out) || !kiln_elem_type_is_integral(lt) ||
      !kiln_elem_type_is_integral(rt) || kiln_elem_type_bits(lt) > 32 ||
      kiln_elem_type_bits(rt) > 32)
    return false;
  static const kiln_elem_type_t kInts[] = {KILN_S8, KILN_U8, KILN_S16, KILN_S32};
  *op = KILN_S32; /* modulo 2^32 holds u32 too */
  for (size_t i = 0; i < sizeof kInts / sizeof kInts[0]; i++) {
    kiln_elem_type_t t = kInts[i];
    bool holds = true; /* each operand's type is t, or narrower and t signed or both unsigned */
    for (int j = 0; j < 2; j++) {
      kiln_elem_type_t x = j ? rt : lt;
      holds = holds &&
              (x == t || (kiln_elem_type_bits(x) < kiln_elem_type_bits(t) &&
                          (kiln_elem_type_is_signed_int(t) || kiln_elem_type_is_unsigned_int(x))));
    }
    if (holds) {
      *op = t;
      break;
    }
  }
  if (kiln_elem_type_bits(out) == 64) { /* through 32 bits, when no sum can overflow them */
    bool unsigned_ops = kiln_elem_type_is_unsigned_int(lt) && kiln_elem_type_is_unsigned_int(rt);
    *res = unsigned_ops ? KILN_U32 : KILN_S32;
    if (k * int_magnitude(lt) * int_magnitude(rt) >= ldexp(1.0, unsigned_ops ? 32 : 31))
      return false;
  }
  return kiln_gemm_types_take(*op, *res, types);
}

kiln_gemm_types_t kiln_gemm_types_of(const kiln_pass_options_t *opts) {
  if (!opts || !opts->gemm_f32_f64_only) return KILN_GEMM_TYPES_HOST;
  return opts->gemm_cublaslt ? KILN_GEMM_TYPES_CUBLASLT : KILN_GEMM_TYPES_CUBLAS;
}

bool kiln_fusion_wrapper_is_gemm_for(const kiln_hlo_instruction_t *dot, kiln_gemm_types_t types,
                                     kiln_gemm_form_t *form) {
  if (dot->opcode != KILN_OP_DOT || dot->num_operands != 2) return false;
  const kiln_shape_t *out = dot->shape, *lhs = dot->operands[0]->shape,
                     *rhs = dot->operands[1]->shape;
  if (!kiln_shape_is_array(out) || !kiln_shape_is_array(lhs)) return false;
  kiln_elem_type_t t = lhs->type;
  if (!kiln_gemm_types_take(t, out->type, types)) return false;
  if (!plain_array(out, out->type) || !plain_array(lhs, t) || !plain_array(rhs, t)) return false;
  const kiln_dot_dnums_t *dn = &dot->dot_dnums;
  int nb = dn->lhs_batch.n;
  if (dn->rhs_batch.n != nb) return false;
  int64_t batch = 1;
  for (int i = 0; i < nb; i++) {
    if (dn->lhs_batch.v[i] != i || dn->rhs_batch.v[i] != i) return false;
    if (i >= lhs->rank || i >= rhs->rank || lhs->dims[i] != rhs->dims[i]) return false;
    batch *= lhs->dims[i];
  }
  int64_t m = 1, n = 1, k = 0, k2 = 0;
  bool lhs_kfirst = false, rhs_kfirst = false;
  if (!gemm_operand(lhs, nb, &dn->lhs_contracting, &m, &k, &lhs_kfirst)) return false;
  if (!gemm_operand(rhs, nb, &dn->rhs_contracting, &n, &k2, &rhs_kfirst)) return false;
  if (k != k2) return false;
  /* The result is [batch..., lhs free..., rhs free...] in row-major order: batch x m x n. */
  if (kiln_shape_num_elements(out) != batch * m * n) return false;
  if (form) {
    form->batch = batch;
    form->m = m;
    form->n = n;
    form->k = k;
    /* lhs stored m x k unless its contracting dim comes first (k x m); rhs stored k x n
     * unless its contracting dim comes last (n x k). */
    form->transpose_lhs = lhs_kfirst;
    form->transpose_rhs = !rhs_kfirst && rhs->rank - nb > 1;
    form->type = t;
    form->out_type = out->type;
  }
  return true;
}

bool kiln_fusion_wrapper_is_gemm(const kiln_hlo_instruction_t *dot, kiln_gemm_form_t *form) {
  return kiln_fusion_wrapper_is_gemm_for(dot, KILN_GEMM_TYPES_HOST, form);
}

/* ---- which instructions need a kernel ---- */

static bool same_physical_layout(const kiln_shape_t *a, const kiln_shape_t *b) {
  if (!kiln_shape_is_array(a) || !kiln_shape_is_array(b)) return true;
  bool da = default_layout(a), db = default_layout(b);
  if (da || db) return da && db;
  return kiln_layout_equal(&a->layout, &b->layout);
}

bool kiln_fusion_wrapper_needs_kernel(const kiln_hlo_instruction_t *in,
                                      const kiln_pass_options_t *opts) {
  switch (in->opcode) {
    case KILN_OP_PARAMETER:
    case KILN_OP_CONSTANT:
    case KILN_OP_TUPLE:
    case KILN_OP_GET_TUPLE_ELEMENT:
    case KILN_OP_BITCAST:
    case KILN_OP_FUSION:
    case KILN_OP_WHILE:
    case KILN_OP_CONDITIONAL:
    case KILN_OP_CALL:
    case KILN_OP_ASYNC_START:
    case KILN_OP_ASYNC_UPDATE:
    case KILN_OP_ASYNC_DONE:
    case KILN_OP_CUSTOM_CALL:
    case KILN_OP_CUSTOM_CALL_START:
    case KILN_OP_CUSTOM_CALL_UPDATE:
    case KILN_OP_CUSTOM_CALL_DONE:
    case KILN_OP_AFTER_ALL:
    case KILN_OP_ADD_DEPENDENCY:
    case KILN_OP_OPTIMIZATION_BARRIER:
    case KILN_OP_DOMAIN:
    case KILN_OP_PARTITION_ID:
    case KILN_OP_REPLICA_ID:
    case KILN_OP_COPY_START:
    case KILN_OP_COPY_DONE:
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_ALL_REDUCE_START:
    case KILN_OP_ALL_REDUCE_DONE:
    case KILN_OP_ALL_GATHER:
    case KILN_OP_ALL_GATHER_START:
    case KILN_OP_ALL_GATHER_DONE:
    case KILN_OP_REDUCE_SCATTER:
    case KILN_OP_ALL_TO_ALL:
    case KILN_OP_RAGGED_ALL_TO_ALL:
    case KILN_OP_COLLECTIVE_PERMUTE:
    case KILN_OP_COLLECTIVE_PERMUTE_START:
    case KILN_OP_COLLECTIVE_PERMUTE_DONE:
    case KILN_OP_COLLECTIVE_BROADCAST:
    case KILN_OP_INFEED:
    case KILN_OP_OUTFEED:
    case KILN_OP_SEND:
    case KILN_OP_SEND_DONE:
    case KILN_OP_RECV:
    case KILN_OP_RECV_DONE:
    case KILN_OP_RNG_GET_AND_UPDATE_STATE:
      return false;
    case KILN_OP_COPY:
      /* Between equal layouts the runtime copies the bytes; a layout change is a kernel. */
      return in->num_operands == 1 && !same_physical_layout(in->shape, in->operands[0]->shape);
    case KILN_OP_DOT:
      return (opts && opts->no_gemm_library) ||
             !kiln_fusion_wrapper_is_gemm_for(in, kiln_gemm_types_of(opts), NULL);
    default:
      return true;
  }
}

/* ---- wrapping ---- */

/* Replaces `old` by `repl` in the control edges around `old`; `old` is left without any. */
static void move_control_edges(kiln_hlo_instruction_t *old, kiln_hlo_instruction_t *repl) {
  for (int i = 0; i < old->num_control_predecessors; i++) {
    kiln_hlo_instruction_t *p = old->control_predecessors[i];
    for (size_t k = 0; k < p->control_successors.len; k++)
      if (p->control_successors.data[k] == old) p->control_successors.data[k] = repl;
  }
  repl->control_predecessors = old->control_predecessors;
  repl->num_control_predecessors = old->num_control_predecessors;
  old->control_predecessors = NULL;
  old->num_control_predecessors = 0;
  for (size_t k = 0; k < old->control_successors.len; k++) {
    kiln_hlo_instruction_t *s = old->control_successors.data[k];
    for (int i = 0; i < s->num_control_predecessors; i++)
      if (s->control_predecessors[i] == old) s->control_predecessors[i] = repl;
    kiln_vec_push(&repl->control_successors, s);
  }
  old->control_successors.len = 0;
}

/* A parameter name for operand `k` that differs from the root's name `root_name`. */
static const char *param_name(kiln_hlo_module_t *m, int k, const char *root_name, char *buf,
                              size_t n) {
  snprintf(buf, n, "p%d", k);
  if (strcmp(buf, root_name) != 0) return buf;
  snprintf(buf, n, "param_%d", k);
  if (strcmp(buf, root_name) != 0) return buf;
  return kiln_hlo_module_unique_name(m, buf);
}

/* Wraps `in` (an instruction of sequential computation `c`) into a fusion of its own. */
static kiln_status wrap(kiln_hlo_computation_t *c, kiln_hlo_instruction_t *in) {
  kiln_hlo_module_t *m = c->module;
  const char *name = in->name;
  size_t at = 0;
  while (at < c->instructions.len && c->instructions.data[at] != in) at++;
  if (at == c->instructions.len)
    return kiln_status_make(KILN_INTERNAL, "'%s' is not in computation '%s'", name, c->name);

  char cname[256];
  snprintf(cname, sizeof cname, "fused_%.200s", name);
  kiln_hlo_computation_t *fc =
      kiln_hlo_computation_create(m, kiln_hlo_module_unique_name(m, cname));
  int n = in->num_operands;
  kiln_hlo_instruction_t **params =
      fc ? kiln_arena_alloc(&m->arena, sizeof(*params) * (size_t)(n + 1)) : NULL;
  if (!params)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory wrapping '%s'", name);
  for (int k = 0; k < n; k++) {
    char buf[64];
    params[k] = kiln_hlo_instruction_create(fc, KILN_OP_PARAMETER, in->operands[k]->shape,
                                            param_name(m, k, name, buf, sizeof buf));
    if (!params[k])
      return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory wrapping '%s'", name);
    params[k]->parameter_number = k;
  }
  fc->parameters = params;
  fc->num_parameters = n;
  fc->root = kiln_hlo_instruction_clone(fc, in, name, n, params);
  kiln_hlo_instruction_t *fusion =
      fc->root ? kiln_hlo_instruction_create(c, KILN_OP_FUSION, in->shape, name) : NULL;
  if (!fusion)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory wrapping '%s'", name);
  kiln_hlo_instruction_set_operands(fusion, n, in->operands);
  kiln_hlo_instruction_add_called(fusion, "calls", false, 1, &fc);
  fusion->fusion_kind = KILN_HLO_FUSION_LOOP;

  move_control_edges(in, fusion);
  kiln_hlo_instruction_replace_all_uses(in, fusion);
  KILN_RETURN_IF_ERROR(kiln_hlo_instruction_remove(in), "while wrapping '%s'", name);
  /* The fusion takes the instruction's place in the order (the schedule, when there is one). */
  size_t last = c->instructions.len - 1;
  if (c->instructions.data[last] == fusion && at < last) {
    memmove(&c->instructions.data[at + 1], &c->instructions.data[at],
            (last - at) * sizeof(c->instructions.data[0]));
    c->instructions.data[at] = fusion;
  }
  return NULL;
}

kiln_status kiln_pass_fusion_wrapper(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                     bool *changed) {
  kiln_fusion_make_arena_room(m);
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  kiln_status st = NULL;
  bool any = false;
  KILN_VEC(kiln_hlo_instruction_t *) worklist = {0};
  for (size_t i = 0; i < nc && !st; i++) {
    kiln_hlo_computation_t *c = comps[i];
    kiln_vec_clear(&worklist);
    for (size_t k = 0; k < c->instructions.len; k++)
      if (kiln_fusion_wrapper_needs_kernel(c->instructions.data[k], opts))
        kiln_vec_push(&worklist, c->instructions.data[k]);
    for (size_t k = 0; k < worklist.len && !st; k++) {
      st = wrap(c, worklist.data[k]);
      if (st) st = kiln_status_annotate(st, "in computation '%s'", c->name);
      any = true;
    }
  }
  kiln_vec_free(&worklist);
  kiln_free(comps);
  if (changed) *changed = *changed || any;
  return st;
}
