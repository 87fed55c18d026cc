/* Shape inference, part 1: elementwise ops, data movement, gather and scatter.
 * (Reductions, dot, convolution, control flow: shape_inference_ops.c; the per-instruction
 * dispatch: shape_inference_instr.c.) */
#include "compiler/hlo/shape_inference.h"

#include <string.h>

#include "compiler/hlo/shape_inference_internal.h"

/* ---- helpers shared by the shape inference files ---- */

const char *kiln__shape_str(kiln_arena_t *a, const kiln_shape_t *s) {
  if (!s) return "<null>";
  char *tmp = kiln_shape_to_string(s, false);
  char *r = kiln_arena_strdup(a, tmp);
  kiln_free(tmp);
  return r ? r : "<shape>";
}

const char *kiln__list_str(kiln_arena_t *a, const kiln_i64_list_t *l) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append_char(&b, '{');
  for (int i = 0; l && i < l->n; i++) kiln_strbuf_printf(&b, i ? ",%lld" : "%lld", (long long)l->v[i]);
  kiln_strbuf_append_char(&b, '}');
  char *r = kiln_arena_strdup(a, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return r ? r : "{...}";
}

kiln_status kiln__oom(void) {
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory during shape inference");
}

kiln_shape_t *kiln__array(kiln_arena_t *a, kiln_elem_type_t t, int rank, const int64_t *dims) {
  return kiln_shape_make_array(a, t, rank, dims);
}

kiln_shape_t *kiln__with_type(kiln_arena_t *a, const kiln_shape_t *s, kiln_elem_type_t t) {
  return kiln_shape_make_array(a, t, s->rank, s->dims);
}

bool kiln__same_dims(const kiln_shape_t *x, const kiln_shape_t *y) {
  if (x->rank != y->rank) return false;
  for (int i = 0; i < x->rank; i++)
    if (x->dims[i] != y->dims[i]) return false;
  return true;
}

bool kiln__is_scalar(const kiln_shape_t *s) { return kiln_shape_is_array(s) && s->rank == 0; }

/* True when the list's values are in [0, bound) and pairwise distinct. */
bool kiln__valid_dims(const kiln_i64_list_t *l, int64_t bound) {
  for (int i = 0; i < l->n; i++) {
    if (l->v[i] < 0 || l->v[i] >= bound) return false;
    for (int j = 0; j < i; j++)
      if (l->v[j] == l->v[i]) return false;
  }
  return true;
}

bool kiln__sorted(const kiln_i64_list_t *l) {
  for (int i = 1; i < l->n; i++)
    if (l->v[i] <= l->v[i - 1]) return false;
  return true;
}

bool kiln__contains(const kiln_i64_list_t *l, int64_t x) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == x) return true;
  return false;
}

kiln_status kiln__require_array(kiln_arena_t *a, const char *what, const kiln_shape_t *s) {
  if (!kiln_shape_is_array(s))
    return KILN_ERR_INVALID("%s must be an array, but is %s", what, kiln__shape_str(a, s));
  return KILN_STATUS_OK;
}

/* ---- elementwise ---- */

static bool is_float_or_complex(kiln_elem_type_t t) {
  return kiln_elem_type_is_float(t) || kiln_elem_type_is_complex(t);
}

static kiln_elem_type_t complex_component(kiln_elem_type_t t) {
  if (t == KILN_C64) return KILN_F32;
  if (t == KILN_C128) return KILN_F64;
  return t;
}

kiln_status kiln_shape_infer_unary(kiln_arena_t *a, kiln_hlo_opcode_t op,
                                   const kiln_shape_t *operand, kiln_shape_t **out) {
  *out = NULL;
  const char *name = kiln_hlo_opcode_name(op);
  if (op == KILN_OP_COPY || op == KILN_OP_DOMAIN || op == KILN_OP_OPTIMIZATION_BARRIER) {
    *out = kiln_shape_clone(a, operand); /* any shape, tuples included */
    return *out ? KILN_STATUS_OK : kiln__oom();
  }
  if (!kiln_shape_is_array(operand))
    return KILN_ERR_INVALID("%s operand must be an array, but is %s", name,
                            kiln__shape_str(a, operand));
  kiln_elem_type_t t = operand->type, rt = t;
  bool ok = true;
  const char *want = "";
  switch (op) {
    case KILN_OP_ABS:
      ok = kiln_elem_type_is_signed_int(t) || is_float_or_complex(t);
      want = "signed, floating-point or complex";
      rt = complex_component(t);
      break;
    case KILN_OP_NEGATE:
      ok = kiln_elem_type_is_integral(t) || is_float_or_complex(t);
      want = "integral, floating-point or complex";
      break;
    case KILN_OP_SIGN:
      ok = kiln_elem_type_is_signed_int(t) || is_float_or_complex(t);
      want = "signed, floating-point or complex";
      break;
    case KILN_OP_CEIL:
    case KILN_OP_FLOOR:
    case KILN_OP_ROUND_NEAREST_AFZ:
    case KILN_OP_ROUND_NEAREST_EVEN:
    case KILN_OP_CBRT:
    case KILN_OP_ERF:
      ok = kiln_elem_type_is_float(t);
      want = "floating-point";
      break;
    case KILN_OP_IS_FINITE:
      ok = kiln_elem_type_is_float(t);
      want = "floating-point";
      rt = KILN_PRED;
      break;
    case KILN_OP_REAL:
    case KILN_OP_IMAG:
      ok = is_float_or_complex(t);
      want = "floating-point or complex";
      rt = complex_component(t);
      break;
    case KILN_OP_NOT:
      ok = t == KILN_PRED || kiln_elem_type_is_integral(t);
      want = "pred or integral";
      break;
    case KILN_OP_CLZ:
    case KILN_OP_POPCNT:
      ok = kiln_elem_type_is_integral(t);
      want = "integral";
      break;
    case KILN_OP_ACOS: case KILN_OP_ACOSH: case KILN_OP_ASIN: case KILN_OP_ASINH:
    case KILN_OP_ATANH: case KILN_OP_COS: case KILN_OP_COSH: case KILN_OP_EXP:
    case KILN_OP_EXPM1: case KILN_OP_LOG: case KILN_OP_LOG1P: case KILN_OP_LOGISTIC:
    case KILN_OP_RSQRT: case KILN_OP_SIN: case KILN_OP_SINH: case KILN_OP_SQRT:
    case KILN_OP_TAN: case KILN_OP_TANH:
      ok = is_float_or_complex(t);
      want = "floating-point or complex";
      break;
    default:
      return KILN_ERR_INVALID("%s is not an elementwise unary op", name);
  }
  if (!ok)
    return KILN_ERR_INVALID("%s expects a %s operand, but it is %s", name, want,
                            kiln__shape_str(a, operand));
  *out = kiln__with_type(a, operand, rt);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_binary(kiln_arena_t *a, kiln_hlo_opcode_t op,
                                    const kiln_shape_t *lhs, const kiln_shape_t *rhs,
                                    kiln_shape_t **out) {
  *out = NULL;
  const char *name = kiln_hlo_opcode_name(op);
  if (!kiln_shape_is_array(lhs) || !kiln_shape_is_array(rhs))
    return KILN_ERR_INVALID("%s operands must be arrays, but are %s and %s", name,
                            kiln__shape_str(a, lhs), kiln__shape_str(a, rhs));
  if (!kiln__same_dims(lhs, rhs))
    return KILN_ERR_INVALID("%s operands must have the same dimensions, but are %s and %s", name,
                            kiln__shape_str(a, lhs), kiln__shape_str(a, rhs));
  if (lhs->type != rhs->type)
    return KILN_ERR_INVALID("%s operands must have the same element type, but are %s and %s",
                            name, kiln__shape_str(a, lhs), kiln__shape_str(a, rhs));
  kiln_elem_type_t t = lhs->type, rt = t;
  bool ok = true;
  const char *want = "";
  switch (op) {
    case KILN_OP_ADD: case KILN_OP_SUBTRACT: case KILN_OP_MULTIPLY: case KILN_OP_DIVIDE:
    case KILN_OP_MAXIMUM: case KILN_OP_MINIMUM: case KILN_OP_REMAINDER: case KILN_OP_POWER:
      break;
    case KILN_OP_COMPARE:
      rt = KILN_PRED;
      break;
    case KILN_OP_ATAN2:
      ok = is_float_or_complex(t);
      want = "floating-point or complex";
      break;
    case KILN_OP_AND: case KILN_OP_OR: case KILN_OP_XOR:
      ok = t == KILN_PRED || kiln_elem_type_is_integral(t);
      want = "pred or integral";
      break;
    case KILN_OP_SHIFT_LEFT: case KILN_OP_SHIFT_RIGHT_ARITHMETIC:
    case KILN_OP_SHIFT_RIGHT_LOGICAL:
      ok = kiln_elem_type_is_integral(t);
      want = "integral";
      break;
    case KILN_OP_COMPLEX:
      ok = t == KILN_F32 || t == KILN_F64;
      want = "f32 or f64";
      rt = t == KILN_F32 ? KILN_C64 : KILN_C128;
      break;
    default:
      return KILN_ERR_INVALID("%s is not an elementwise binary op", name);
  }
  if (!ok)
    return KILN_ERR_INVALID("%s expects %s operands, but they are %s", name, want,
                            kiln__shape_str(a, lhs));
  *out = kiln__with_type(a, lhs, rt);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_select(kiln_arena_t *a, const kiln_shape_t *pred,
                                    const kiln_shape_t *on_true, const kiln_shape_t *on_false,
                                    kiln_shape_t **out) {
  *out = NULL;
  if (!kiln_shape_is_array(pred) || pred->type != KILN_PRED)
    return KILN_ERR_INVALID("select predicate must be a pred array, but is %s",
                            kiln__shape_str(a, pred));
  if (!kiln_shape_is_array(on_true) || !kiln_shape_is_array(on_false))
    return KILN_ERR_INVALID("select operands must be arrays, but are %s and %s",
                            kiln__shape_str(a, on_true), kiln__shape_str(a, on_false));
  if (!kiln_shape_compatible(on_true, on_false))
    return KILN_ERR_INVALID("select on_true and on_false must have the same shape, but are %s and %s",
                            kiln__shape_str(a, on_true), kiln__shape_str(a, on_false));
  if (pred->rank != 0 && !kiln__same_dims(pred, on_true))
    return KILN_ERR_INVALID("select predicate %s must be a scalar or have the dimensions of %s",
                            kiln__shape_str(a, pred), kiln__shape_str(a, on_true));
  *out = kiln_shape_clone(a, on_true);
  if (*out) (*out)->has_layout = false;
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_clamp(kiln_arena_t *a, const kiln_shape_t *min,
                                   const kiln_shape_t *operand, const kiln_shape_t *max,
                                   kiln_shape_t **out) {
  *out = NULL;
  const kiln_shape_t *bounds[2] = {min, max};
  const char *names[2] = {"min", "max"};
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "clamp operand", operand));
  for (int i = 0; i < 2; i++) {
    const kiln_shape_t *b = bounds[i];
    if (!kiln_shape_is_array(b) || b->type != operand->type)
      return KILN_ERR_INVALID("clamp %s %s must have the element type of the operand %s",
                              names[i], kiln__shape_str(a, b), kiln__shape_str(a, operand));
    if (b->rank != 0 && !kiln__same_dims(b, operand))
      return KILN_ERR_INVALID("clamp %s %s must be a scalar or have the shape of the operand %s",
                              names[i], kiln__shape_str(a, b), kiln__shape_str(a, operand));
  }
  *out = kiln__with_type(a, operand, operand->type);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_convert(kiln_arena_t *a, const kiln_shape_t *operand,
                                     kiln_elem_type_t to, kiln_shape_t **out) {
  *out = NULL;
  if (!kiln_shape_is_array(operand) || !kiln_elem_type_is_array(to))
    return KILN_ERR_INVALID("convert needs an array operand and an array result type; operand is %s, result type %s",
                            kiln__shape_str(a, operand), kiln_elem_type_name(to));
  if (kiln_elem_type_is_complex(operand->type) && !kiln_elem_type_is_complex(to))
    return KILN_ERR_INVALID("convert from complex %s to real type %s is not allowed (use real)",
                            kiln__shape_str(a, operand), kiln_elem_type_name(to));
  *out = kiln__with_type(a, operand, to);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_bitcast_convert(kiln_arena_t *a, const kiln_shape_t *operand,
                                             kiln_elem_type_t to, kiln_shape_t **out) {
  *out = NULL;
  if (!kiln_shape_is_array(operand) || !kiln_elem_type_is_array(to))
    return KILN_ERR_INVALID("bitcast-convert needs array types; operand is %s, result type %s",
                            kiln__shape_str(a, operand), kiln_elem_type_name(to));
  int from_bits = kiln_elem_type_bits(operand->type), to_bits = kiln_elem_type_bits(to);
  if (from_bits == to_bits) {
    *out = kiln__with_type(a, operand, to);
  } else if (from_bits > to_bits) {
    if (from_bits % to_bits != 0)
      return KILN_ERR_INVALID("bitcast-convert from %s to %s: bit widths %d and %d do not divide",
                              kiln__shape_str(a, operand), kiln_elem_type_name(to), from_bits,
                              to_bits);
    int64_t dims[65];
    if (operand->rank >= 64) return KILN_ERR_INVALID("bitcast-convert operand rank too large");
    if (operand->rank > 0) memcpy(dims, operand->dims, sizeof(int64_t) * (size_t)operand->rank);
    dims[operand->rank] = from_bits / to_bits;
    *out = kiln__array(a, to, operand->rank + 1, dims);
  } else {
    if (to_bits % from_bits != 0 || operand->rank == 0 ||
        operand->dims[operand->rank - 1] != to_bits / from_bits)
      return KILN_ERR_INVALID(
          "bitcast-convert from %s to wider type %s needs a last dimension of size %d",
          kiln__shape_str(a, operand), kiln_elem_type_name(to),
          from_bits ? to_bits / from_bits : 0);
    *out = kiln__array(a, to, operand->rank - 1, operand->dims);
  }
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_stochastic_convert(kiln_arena_t *a, const kiln_shape_t *operand,
                                                const kiln_shape_t *random,
                                                kiln_elem_type_t to, kiln_shape_t **out) {
  *out = NULL;
  if (!kiln_shape_is_array(operand) || !kiln_elem_type_is_float(operand->type))
    return KILN_ERR_INVALID("stochastic-convert operand must be floating-point, but is %s",
                            kiln__shape_str(a, operand));
  if (!kiln_shape_is_array(random) || !kiln_elem_type_is_unsigned_int(random->type) ||
      kiln_elem_type_bits(random->type) != kiln_elem_type_bits(operand->type) ||
      !kiln__same_dims(random, operand))
    return KILN_ERR_INVALID(
        "stochastic-convert random bits %s must be unsigned with the operand's bit width and dimensions (%s)",
        kiln__shape_str(a, random), kiln__shape_str(a, operand));
  *out = kiln__with_type(a, operand, to);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_reduce_precision(kiln_arena_t *a, const kiln_shape_t *operand,
                                              int64_t exponent_bits, int64_t mantissa_bits,
                                              kiln_shape_t **out) {
  *out = NULL;
  if (!kiln_shape_is_array(operand) || !kiln_elem_type_is_float(operand->type))
    return KILN_ERR_INVALID("reduce-precision operand must be floating-point, but is %s",
                            kiln__shape_str(a, operand));
  if (exponent_bits < 1)
    return KILN_ERR_INVALID("reduce-precision exponent_bits must be >= 1, but is %lld",
                            (long long)exponent_bits);
  if (mantissa_bits < 0)
    return KILN_ERR_INVALID("reduce-precision mantissa_bits must be >= 0, but is %lld",
                            (long long)mantissa_bits);
  *out = kiln__with_type(a, operand, operand->type);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

/* ---- data movement ---- */

kiln_status kiln_shape_infer_concatenate(kiln_arena_t *a, int n,
                                         const kiln_shape_t *const *operands, int64_t dim,
                                         kiln_shape_t **out) {
  *out = NULL;
  if (n < 1) return KILN_ERR_INVALID("concatenate needs at least one operand");
  const kiln_shape_t *first = operands[0];
  for (int i = 0; i < n; i++)
    if (!kiln_shape_is_array(operands[i]))
      return KILN_ERR_INVALID("concatenate operand %d must be an array, but is %s", i,
                              kiln__shape_str(a, operands[i]));
  if (dim < 0 || dim >= first->rank)
    return KILN_ERR_INVALID("concatenate dimension %lld is out of range for rank %d",
                            (long long)dim, first->rank);
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const kiln_shape_t *s = operands[i];
    if (s->rank != first->rank)
      return KILN_ERR_INVALID("concatenate operands must have the same rank; operand %d is %s but operand 0 is %s",
                              i, kiln__shape_str(a, s), kiln__shape_str(a, first));
    if (s->type != first->type)
      return KILN_ERR_INVALID("concatenate operands must have the same element type; operand %d is %s but operand 0 is %s",
                              i, kiln__shape_str(a, s), kiln__shape_str(a, first));
    for (int d = 0; d < s->rank; d++)
      if (d != dim && s->dims[d] != first->dims[d])
        return KILN_ERR_INVALID(
            "concatenate operands must match in every dimension except %lld; operand %d is %s but operand 0 is %s",
            (long long)dim, i, kiln__shape_str(a, s), kiln__shape_str(a, first));
    if (__builtin_add_overflow(total, s->dims[dim], &total))
      return KILN_ERR_INVALID("concatenate result dimension overflows");
  }
  *out = kiln__with_type(a, first, first->type);
  if (!*out) return kiln__oom();
  (*out)->dims[dim] = total;
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_check_broadcast(kiln_arena_t *a, const kiln_shape_t *operand,
                                       const kiln_i64_list_t *dims, const kiln_shape_t *result) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "broadcast operand", operand));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "broadcast result", result));
  if (operand->type != result->type)
    return KILN_ERR_INVALID("broadcast changes the element type: operand %s, result %s",
                            kiln__shape_str(a, operand), kiln__shape_str(a, result));
  if (dims->n != operand->rank)
    return KILN_ERR_INVALID("broadcast dimensions=%s must have one entry per operand dimension (operand %s)",
                            kiln__list_str(a, dims), kiln__shape_str(a, operand));
  if (!kiln__valid_dims(dims, result->rank))
    return KILN_ERR_INVALID("broadcast dimensions=%s must be distinct dimensions of the result %s",
                            kiln__list_str(a, dims), kiln__shape_str(a, result));
  for (int i = 0; i < dims->n; i++)
    if (operand->dims[i] != result->dims[dims->v[i]])
      return KILN_ERR_INVALID(
          "broadcast operand dimension %d (size %lld) maps to result dimension %lld of size %lld; operand %s, result %s",
          i, (long long)operand->dims[i], (long long)dims->v[i],
          (long long)result->dims[dims->v[i]], kiln__shape_str(a, operand),
          kiln__shape_str(a, result));
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_transpose(kiln_arena_t *a, const kiln_shape_t *operand,
                                       const kiln_i64_list_t *perm, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "transpose operand", operand));
  if (perm->n != operand->rank || !kiln__valid_dims(perm, operand->rank))
    return KILN_ERR_INVALID("transpose dimensions=%s must be a permutation of the operand's %d dimensions (%s)",
                            kiln__list_str(a, perm), operand->rank, kiln__shape_str(a, operand));
  *out = kiln__with_type(a, operand, operand->type);
  if (!*out) return kiln__oom();
  for (int i = 0; i < perm->n; i++) (*out)->dims[i] = operand->dims[perm->v[i]];
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_check_reshape(kiln_arena_t *a, const kiln_shape_t *operand,
                                     const kiln_shape_t *result) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "reshape operand", operand));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "reshape result", result));
  if (operand->type != result->type)
    return KILN_ERR_INVALID("reshape changes the element type: operand %s, result %s",
                            kiln__shape_str(a, operand), kiln__shape_str(a, result));
  if (kiln_shape_num_elements(operand) != kiln_shape_num_elements(result))
    return KILN_ERR_INVALID("reshape changes the element count: operand %s has %lld, result %s has %lld",
                            kiln__shape_str(a, operand), (long long)kiln_shape_num_elements(operand),
                            kiln__shape_str(a, result), (long long)kiln_shape_num_elements(result));
  return KILN_STATUS_OK;
}

static int64_t total_bits(const kiln_shape_t *s) {
  int64_t n = kiln_shape_num_elements(s), b = kiln_elem_type_bits(s->type);
  if (b && n > INT64_MAX / b) return INT64_MAX;
  return n * b;
}

kiln_status kiln_shape_check_bitcast(kiln_arena_t *a, const kiln_shape_t *operand,
                                     const kiln_shape_t *result) {
  if (!kiln_shape_is_array(operand) || !kiln_shape_is_array(result)) {
    if (kiln_shape_compatible(operand, result)) return KILN_STATUS_OK;
    return KILN_ERR_INVALID("bitcast of non-array %s to %s must keep the shape",
                            kiln__shape_str(a, operand), kiln__shape_str(a, result));
  }
  if (total_bits(operand) != total_bits(result))
    return KILN_ERR_INVALID("bitcast changes the size in bits: operand %s, result %s",
                            kiln__shape_str(a, operand), kiln__shape_str(a, result));
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_slice(kiln_arena_t *a, const kiln_shape_t *operand, int n,
                                   const kiln_slice_dim_t *slice, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "slice operand", operand));
  if (n != operand->rank)
    return KILN_ERR_INVALID("slice has %d dimension ranges but the operand %s has rank %d", n,
                            kiln__shape_str(a, operand), operand->rank);
  *out = kiln__with_type(a, operand, operand->type);
  if (!*out) return kiln__oom();
  for (int i = 0; i < n; i++) {
    const kiln_slice_dim_t *s = &slice[i];
    if (s->stride < 1)
      return KILN_ERR_INVALID("slice stride in dimension %d must be positive, but is %lld", i,
                              (long long)s->stride);
    if (s->start < 0 || s->start > s->limit || s->limit > operand->dims[i])
      return KILN_ERR_INVALID(
          "slice [%lld:%lld] in dimension %d is out of range for operand %s (need 0 <= start <= limit <= %lld)",
          (long long)s->start, (long long)s->limit, i, kiln__shape_str(a, operand),
          (long long)operand->dims[i]);
    int64_t len = s->limit - s->start;
    (*out)->dims[i] = len == 0 ? 0 : (len - 1) / s->stride + 1;
  }
  return KILN_STATUS_OK;
}

/* Checks dynamic-slice / dynamic-update-slice start indices: `rank` scalars of one
 * integral type, or a single rank-1 integral vector of `rank` entries. */
static kiln_status check_start_indices(kiln_arena_t *a, const char *op, int rank, int n,
                                       const kiln_shape_t *const *idx) {
  if (n == 1 && rank != 1 && kiln_shape_is_array(idx[0]) && idx[0]->rank == 1) {
    if (!kiln_elem_type_is_integral(idx[0]->type) || idx[0]->dims[0] != rank)
      return KILN_ERR_INVALID("%s start index vector %s must be integral with %d entries", op,
                              kiln__shape_str(a, idx[0]), rank);
    return KILN_STATUS_OK;
  }
  if (n != rank)
    return KILN_ERR_INVALID("%s needs one start index per operand dimension (%d), but has %d", op,
                            rank, n);
  for (int i = 0; i < n; i++) {
    if (!kiln__is_scalar(idx[i]) || !kiln_elem_type_is_integral(idx[i]->type))
      return KILN_ERR_INVALID("%s start index %d must be an integer scalar, but is %s", op, i,
                              kiln__shape_str(a, idx[i]));
    if (idx[i]->type != idx[0]->type)
      return KILN_ERR_INVALID("%s start indices must all have the same type; index %d is %s but index 0 is %s",
                              op, i, kiln__shape_str(a, idx[i]), kiln__shape_str(a, idx[0]));
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_dynamic_slice(kiln_arena_t *a, const kiln_shape_t *operand,
                                           int num_indices, const kiln_shape_t *const *indices,
                                           const kiln_i64_list_t *sizes, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dynamic-slice operand", operand));
  KILN_RETURN_IF_ERROR_PLAIN(
      check_start_indices(a, "dynamic-slice", operand->rank, num_indices, indices));
  if (sizes->n != operand->rank)
    return KILN_ERR_INVALID("dynamic-slice dynamic_slice_sizes=%s must have one entry per dimension of %s",
                            kiln__list_str(a, sizes), kiln__shape_str(a, operand));
  for (int i = 0; i < sizes->n; i++)
    if (sizes->v[i] < 0 || sizes->v[i] > operand->dims[i])
      return KILN_ERR_INVALID("dynamic-slice size %lld in dimension %d is out of range for operand %s",
                              (long long)sizes->v[i], i, kiln__shape_str(a, operand));
  *out = kiln__array(a, operand->type, sizes->n, sizes->v);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_dynamic_update_slice(kiln_arena_t *a, const kiln_shape_t *operand,
                                                  const kiln_shape_t *update, int num_indices,
                                                  const kiln_shape_t *const *indices,
                                                  kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dynamic-update-slice operand", operand));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dynamic-update-slice update", update));
  if (update->type != operand->type || update->rank != operand->rank)
    return KILN_ERR_INVALID("dynamic-update-slice update %s must have the element type and rank of the operand %s",
                            kiln__shape_str(a, update), kiln__shape_str(a, operand));
  for (int i = 0; i < operand->rank; i++)
    if (update->dims[i] > operand->dims[i])
      return KILN_ERR_INVALID("dynamic-update-slice update %s is larger than the operand %s in dimension %d",
                              kiln__shape_str(a, update), kiln__shape_str(a, operand), i);
  KILN_RETURN_IF_ERROR_PLAIN(
      check_start_indices(a, "dynamic-update-slice", operand->rank, num_indices, indices));
  *out = kiln__with_type(a, operand, operand->type);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_pad(kiln_arena_t *a, const kiln_shape_t *operand,
                                 const kiln_shape_t *value, int n, const kiln_pad_dim_t *pad,
                                 kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "pad operand", operand));
  if (!kiln__is_scalar(value) || value->type != operand->type)
    return KILN_ERR_INVALID("pad value %s must be a scalar of the operand's element type (%s)",
                            kiln__shape_str(a, value), kiln__shape_str(a, operand));
  if (n != operand->rank)
    return KILN_ERR_INVALID("pad config has %d dimensions but the operand %s has rank %d", n,
                            kiln__shape_str(a, operand), operand->rank);
  *out = kiln__with_type(a, operand, operand->type);
  if (!*out) return kiln__oom();
  for (int i = 0; i < n; i++) {
    int64_t d = operand->dims[i], size = 0, interior = 0;
    if (pad[i].interior < 0)
      return KILN_ERR_INVALID("pad interior padding in dimension %d must be >= 0, but is %lld", i,
                              (long long)pad[i].interior);
    if ((d > 0 && __builtin_mul_overflow(d - 1, pad[i].interior, &interior)) ||
        __builtin_add_overflow(d, interior, &size) ||
        __builtin_add_overflow(size, pad[i].lo, &size) ||
        __builtin_add_overflow(size, pad[i].hi, &size))
      return KILN_ERR_INVALID("pad result size overflows in dimension %d", i);
    if (size < 0)
      return KILN_ERR_INVALID("pad %lld_%lld_%lld gives negative size %lld in dimension %d of %s",
                              (long long)pad[i].lo, (long long)pad[i].hi,
                              (long long)pad[i].interior, (long long)size, i,
                              kiln__shape_str(a, operand));
    (*out)->dims[i] = size;
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_reverse(kiln_arena_t *a, const kiln_shape_t *operand,
                                     const kiln_i64_list_t *dims, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "reverse operand", operand));
  if (!kiln__valid_dims(dims, operand->rank))
    return KILN_ERR_INVALID("reverse dimensions=%s must be distinct dimensions of %s",
                            kiln__list_str(a, dims), kiln__shape_str(a, operand));
  *out = kiln__with_type(a, operand, operand->type);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_check_iota(kiln_arena_t *a, const kiln_shape_t *result, int64_t dim) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "iota result", result));
  if (result->rank == 0) return KILN_ERR_INVALID("iota result must have rank >= 1");
  if (dim < 0 || dim >= result->rank)
    return KILN_ERR_INVALID("iota_dimension=%lld is out of range for %s", (long long)dim,
                            kiln__shape_str(a, result));
  return KILN_STATUS_OK;
}

/* ---- gather / scatter ---- */

/* The start indices with index_vector_dim == rank expanded by a trailing 1. */
static kiln_status expand_indices(kiln_arena_t *a, const char *op, const kiln_shape_t *indices,
                                  int64_t index_vector_dim, int64_t *dims, int *rank) {
  if (!kiln_shape_is_array(indices) || !kiln_elem_type_is_integral(indices->type))
    return KILN_ERR_INVALID("%s indices must be an integral array, but are %s", op,
                            kiln__shape_str(a, indices));
  if (indices->rank >= 63) return KILN_ERR_INVALID("%s indices rank too large", op);
  if (index_vector_dim < 0 || index_vector_dim > indices->rank)
    return KILN_ERR_INVALID("%s index_vector_dim=%lld is out of range for indices %s", op,
                            (long long)index_vector_dim, kiln__shape_str(a, indices));
  if (indices->rank > 0) memcpy(dims, indices->dims, sizeof(int64_t) * (size_t)indices->rank);
  *rank = indices->rank;
  if (index_vector_dim == indices->rank) dims[(*rank)++] = 1;
  return KILN_STATUS_OK;
}

static kiln_status check_dim_list(kiln_arena_t *a, const char *op, const char *name,
                                  const kiln_i64_list_t *l, int64_t bound, bool sorted) {
  if (!kiln__valid_dims(l, bound))
    return KILN_ERR_INVALID("%s %s=%s must be distinct and in [0, %lld)", op, name,
                            kiln__list_str(a, l), (long long)bound);
  if (sorted && !kiln__sorted(l))
    return KILN_ERR_INVALID("%s %s=%s must be sorted", op, name, kiln__list_str(a, l));
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_gather(kiln_arena_t *a, const kiln_shape_t *operand,
                                    const kiln_shape_t *indices, const kiln_gather_dnums_t *d,
                                    const kiln_i64_list_t *slice_sizes, kiln_shape_t **out) {
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "gather operand", operand));
  int64_t idims[64];
  int irank;
  KILN_RETURN_IF_ERROR_PLAIN(expand_indices(a, "gather", indices, d->index_vector_dim, idims, &irank));
  int out_rank = d->offset_dims.n + irank - 1;
  if (out_rank > 128 || operand->rank > 64)
    return KILN_ERR_INVALID("gather result rank %d is too large", out_rank);
  int orank = operand->rank;
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "gather", "offset_dims", &d->offset_dims, out_rank, true));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "gather", "collapsed_slice_dims", &d->collapsed_slice_dims, orank, true));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "gather", "start_index_map", &d->start_index_map, orank, false));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "gather", "operand_batching_dims", &d->operand_batching_dims, orank, true));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "gather", "start_indices_batching_dims", &d->start_indices_batching_dims, irank, false));
  if (d->start_index_map.n != idims[d->index_vector_dim])
    return KILN_ERR_INVALID("gather start_index_map=%s must have as many entries as the index vector (%lld) of indices %s",
                            kiln__list_str(a, &d->start_index_map),
                            (long long)idims[d->index_vector_dim], kiln__shape_str(a, indices));
  for (int i = 0; i < d->operand_batching_dims.n; i++)
    if (kiln__contains(&d->collapsed_slice_dims, d->operand_batching_dims.v[i]) ||
        kiln__contains(&d->start_index_map, d->operand_batching_dims.v[i]))
      return KILN_ERR_INVALID("gather operand batching dimension %lld must not be collapsed or in start_index_map",
                              (long long)d->operand_batching_dims.v[i]);
  if (kiln__contains(&d->start_indices_batching_dims, d->index_vector_dim))
    return KILN_ERR_INVALID("gather start_indices_batching_dims must not contain index_vector_dim");
  if (d->start_indices_batching_dims.n != d->operand_batching_dims.n)
    return KILN_ERR_INVALID("gather operand_batching_dims and start_indices_batching_dims must have the same length");
  for (int i = 0; i < d->operand_batching_dims.n; i++)
    if (operand->dims[d->operand_batching_dims.v[i]] != idims[d->start_indices_batching_dims.v[i]])
      return KILN_ERR_INVALID("gather batching dimension sizes differ: operand %s dimension %lld vs indices %s dimension %lld",
                              kiln__shape_str(a, operand), (long long)d->operand_batching_dims.v[i],
                              kiln__shape_str(a, indices), (long long)d->start_indices_batching_dims.v[i]);
  if (d->offset_dims.n + d->collapsed_slice_dims.n + d->operand_batching_dims.n != orank)
    return KILN_ERR_INVALID("gather offset_dims (%d) + collapsed_slice_dims (%d) + operand_batching_dims (%d) must equal the operand rank %d",
                            d->offset_dims.n, d->collapsed_slice_dims.n,
                            d->operand_batching_dims.n, orank);
  if (slice_sizes->n != orank)
    return KILN_ERR_INVALID("gather slice_sizes=%s must have one entry per dimension of the operand %s",
                            kiln__list_str(a, slice_sizes), kiln__shape_str(a, operand));
  for (int i = 0; i < orank; i++) {
    if (slice_sizes->v[i] < 0 || slice_sizes->v[i] > operand->dims[i])
      return KILN_ERR_INVALID("gather slice size %lld in dimension %d is out of range for operand %s",
                              (long long)slice_sizes->v[i], i, kiln__shape_str(a, operand));
    if ((kiln__contains(&d->collapsed_slice_dims, i) ||
         kiln__contains(&d->operand_batching_dims, i)) && slice_sizes->v[i] > 1)
      return KILN_ERR_INVALID("gather slice size of collapsed or batching dimension %d must be <= 1, but is %lld",
                              i, (long long)slice_sizes->v[i]);
  }
  int64_t odims[128];
  int next_offset = 0, next_batch = 0;
  for (int i = 0; i < out_rank; i++) {
    if (kiln__contains(&d->offset_dims, i)) {
      while (kiln__contains(&d->collapsed_slice_dims, next_offset) ||
             kiln__contains(&d->operand_batching_dims, next_offset))
        next_offset++;
      odims[i] = slice_sizes->v[next_offset++];
    } else {
      if (next_batch == d->index_vector_dim) next_batch++;
      odims[i] = idims[next_batch++];
    }
  }
  *out = kiln__array(a, operand->type, out_rank, odims);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

kiln_status kiln_shape_infer_scatter(kiln_arena_t *a, int num_operands,
                                     const kiln_shape_t *const *ops,
                                     const kiln_scatter_dnums_t *d,
                                     const kiln_hlo_computation_t *to_apply,
                                     kiln_shape_t **out) {
  *out = NULL;
  if (num_operands < 3 || num_operands % 2 == 0)
    return KILN_ERR_INVALID("scatter needs N inputs, indices and N updates (2N+1 operands), but has %d",
                            num_operands);
  int n = (num_operands - 1) / 2;
  const kiln_shape_t *operand = ops[0], *indices = ops[n], *updates = ops[n + 1];
  for (int i = 0; i < n; i++) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "scatter input", ops[i]));
    KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "scatter update", ops[n + 1 + i]));
    if (!kiln__same_dims(ops[i], operand))
      return KILN_ERR_INVALID("scatter inputs must have the same dimensions; input %d is %s but input 0 is %s",
                              i, kiln__shape_str(a, ops[i]), kiln__shape_str(a, operand));
    if (!kiln__same_dims(ops[n + 1 + i], updates))
      return KILN_ERR_INVALID("scatter updates must have the same dimensions; update %d is %s but update 0 is %s",
                              i, kiln__shape_str(a, ops[n + 1 + i]), kiln__shape_str(a, updates));
    if (ops[n + 1 + i]->type != ops[i]->type)
      return KILN_ERR_INVALID("scatter update %d %s must have the element type of input %d %s", i,
                              kiln__shape_str(a, ops[n + 1 + i]), i, kiln__shape_str(a, ops[i]));
  }
  int64_t idims[64];
  int irank;
  KILN_RETURN_IF_ERROR_PLAIN(expand_indices(a, "scatter", indices, d->index_vector_dim, idims, &irank));
  int orank = operand->rank, urank = updates->rank;
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "scatter", "update_window_dims", &d->update_window_dims, urank, true));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "scatter", "inserted_window_dims", &d->inserted_window_dims, orank, true));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "scatter", "input_batching_dims", &d->input_batching_dims, orank, true));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "scatter", "scatter_dims_to_operand_dims", &d->scatter_dims_to_operand_dims, orank, false));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(a, "scatter", "scatter_indices_batching_dims", &d->scatter_indices_batching_dims, irank, false));
  for (int i = 0; i < d->input_batching_dims.n; i++)
    if (kiln__contains(&d->inserted_window_dims, d->input_batching_dims.v[i]))
      return KILN_ERR_INVALID("scatter input batching dimension %lld must not be an inserted window dimension",
                              (long long)d->input_batching_dims.v[i]);
  if (kiln__contains(&d->scatter_indices_batching_dims, d->index_vector_dim))
    return KILN_ERR_INVALID("scatter scatter_indices_batching_dims must not contain index_vector_dim");
  if (d->scatter_indices_batching_dims.n != d->input_batching_dims.n)
    return KILN_ERR_INVALID("scatter input_batching_dims and scatter_indices_batching_dims must have the same length");
  if (d->scatter_dims_to_operand_dims.n != idims[d->index_vector_dim])
    return KILN_ERR_INVALID("scatter scatter_dims_to_operand_dims=%s must have as many entries as the index vector (%lld) of indices %s",
                            kiln__list_str(a, &d->scatter_dims_to_operand_dims),
                            (long long)idims[d->index_vector_dim], kiln__shape_str(a, indices));
  if (d->update_window_dims.n + d->inserted_window_dims.n + d->input_batching_dims.n != orank)
    return KILN_ERR_INVALID("scatter update_window_dims (%d) + inserted_window_dims (%d) + input_batching_dims (%d) must equal the operand rank %d",
                            d->update_window_dims.n, d->inserted_window_dims.n,
                            d->input_batching_dims.n, orank);
  if (urank != d->update_window_dims.n + irank - 1)
    return KILN_ERR_INVALID("scatter updates %s must have rank %d (update_window_dims plus scatter dimensions of indices %s)",
                            kiln__shape_str(a, updates), d->update_window_dims.n + irank - 1,
                            kiln__shape_str(a, indices));
  int next_operand = 0, next_index = 0;
  for (int i = 0; i < urank; i++) {
    if (kiln__contains(&d->update_window_dims, i)) {
      while (kiln__contains(&d->inserted_window_dims, next_operand) ||
             kiln__contains(&d->input_batching_dims, next_operand))
        next_operand++;
      if (updates->dims[i] > operand->dims[next_operand])
        return KILN_ERR_INVALID("scatter update window dimension %d (size %lld) exceeds operand dimension %d of %s",
                                i, (long long)updates->dims[i], next_operand,
                                kiln__shape_str(a, operand));
      next_operand++;
    } else {
      if (next_index == d->index_vector_dim) next_index++;
      if (updates->dims[i] != idims[next_index])
        return KILN_ERR_INVALID("scatter update dimension %d (size %lld) must equal indices dimension %d (size %lld); updates %s, indices %s",
                                i, (long long)updates->dims[i], next_index,
                                (long long)idims[next_index], kiln__shape_str(a, updates),
                                kiln__shape_str(a, indices));
      next_index++;
    }
  }
  kiln_elem_type_t types[64];
  if (n > 64) return KILN_ERR_INVALID("scatter has too many inputs");
  for (int i = 0; i < n; i++) types[i] = ops[i]->type;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__check_reducer(a, "scatter", to_apply, n, types, types));
  if (n == 1) {
    *out = kiln__with_type(a, operand, operand->type);
  } else {
    kiln_shape_t *elems[64];
    for (int i = 0; i < n; i++) {
      elems[i] = kiln__with_type(a, ops[i], ops[i]->type);
      if (!elems[i]) return kiln__oom();
    }
    *out = kiln_shape_make_tuple(a, n, elems);
  }
  return *out ? KILN_STATUS_OK : kiln__oom();
}
