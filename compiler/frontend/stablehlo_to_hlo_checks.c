/* The StableHLO interpreter's check ops applied to converted results:
 *   expect_eq(_const)        every element equal (floats: equal values, NaN matches NaN);
 *   expect_almost_eq(_const) floats and complex parts within `tolerance` (default 1e-4),
 *                            absolute, or relative to the expected value when that is larger;
 *                            other types equal;
 *   expect_close             floats within [min_ulp_difference, max_ulp_difference] units in
 *                            the last place (defaults 0 and 3); other types equal. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/frontend/stablehlo_to_hlo.h"

static uint64_t elem_bits(const kiln_literal_t *l, int64_t i, size_t part, size_t bytes) {
  uint64_t v = 0;
  memcpy(&v,
         (const char *)l->data + (size_t)i * kiln_elem_type_storage_bytes(l->shape->type) +
             part * bytes,
         bytes);
  return v;
}

/* Ordered integer of a float's bits (monotonic in value): sign-magnitude to two's complement. */
static int64_t ordered(uint64_t bits, int nbits) {
  uint64_t sign = 1ull << (nbits - 1);
  uint64_t mag = bits & (sign - 1);
  return (bits & sign) ? -(int64_t)mag : (int64_t)mag;
}

static bool close_part(double w, double g, uint64_t wb, uint64_t gb, int nbits,
                       const kiln_stablehlo_check_t *k, double *err) {
  *err = 0;
  if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
  if (k->kind == KILN_STABLEHLO_CHECK_EQ) return w == g;
  if (isinf(w) || isinf(g)) return w == g;
  if (k->kind == KILN_STABLEHLO_CHECK_ALMOST_EQ) {
    double d = fabs(w - g);
    *err = d;
    return d <= k->tolerance || d <= k->tolerance * fabs(w);
  }
  int64_t d = ordered(wb, nbits) - ordered(gb, nbits);
  if (d < 0) d = -d;
  *err = (double)d;
  return d >= k->min_ulp && d <= k->max_ulp;
}

bool kiln_stablehlo_check_eval(const kiln_stablehlo_check_t *k, const kiln_literal_t *outputs,
                               char *msg, size_t msg_size) {
  if (msg_size) msg[0] = 0;
  if (k->kind == KILN_STABLEHLO_CHECK_UNSUPPORTED) {
    snprintf(msg, msg_size, "%s is not supported (it needs the interpreter's probe files)",
             k->op_name);
    return false;
  }
  if (!outputs || outputs->num_tuple_elements <= k->got ||
      (k->want >= 0 && outputs->num_tuple_elements <= k->want)) {
    snprintf(msg, msg_size, "the outputs do not hold the checked values");
    return false;
  }
  const kiln_literal_t *got = outputs->tuple_elements[k->got];
  const kiln_literal_t *want = k->want >= 0 ? outputs->tuple_elements[k->want] : k->want_const;
  if (!want || !got->shape || !want->shape || got->num_elements != want->num_elements ||
      got->shape->type != want->shape->type) {
    snprintf(msg, msg_size, "line %d: %s: the checked value and the expected value differ in shape",
             (int)k->line, k->op_name);
    return false;
  }
  kiln_elem_type_t t = got->shape->type;
  bool cplx = kiln_elem_type_is_complex(t), flt = kiln_elem_type_is_float(t);
  size_t part_bytes = cplx ? kiln_elem_type_storage_bytes(t) / 2 : kiln_elem_type_storage_bytes(t);
  int nbits = cplx ? (t == KILN_C64 ? 32 : 64) : kiln_elem_type_bits(t);
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < got->num_elements; i++) {
    bool ok;
    double err = 0;
    if (cplx) {
      double wr, wi, gr, gi, e1 = 0, e2 = 0;
      kiln_literal_get_c128(want, i, &wr, &wi);
      kiln_literal_get_c128(got, i, &gr, &gi);
      ok = close_part(wr, gr, elem_bits(want, i, 0, part_bytes), elem_bits(got, i, 0, part_bytes),
                      nbits, k, &e1) &&
           close_part(wi, gi, elem_bits(want, i, 1, part_bytes), elem_bits(got, i, 1, part_bytes),
                      nbits, k, &e2);
      err = e1 > e2 ? e1 : e2;
    } else if (flt) {
      ok = close_part(kiln_literal_get_f64(want, i), kiln_literal_get_f64(got, i),
                      elem_bits(want, i, 0, part_bytes), elem_bits(got, i, 0, part_bytes), nbits, k,
                      &err);
    } else {
      ok = elem_bits(want, i, 0, part_bytes) == elem_bits(got, i, 0, part_bytes);
    }
    if (err > worst) worst = err;
    if (ok) continue;
    if (bad++ == 0) {
      if (cplx) {
        double wr, wi, gr, gi;
        kiln_literal_get_c128(want, i, &wr, &wi);
        kiln_literal_get_c128(got, i, &gr, &gi);
        snprintf(msg, msg_size,
                 "line %d: %s: element %" PRId64 ": want (%.9g, %.9g), got (%.9g, %.9g)",
                 (int)k->line, k->op_name, i, wr, wi, gr, gi);
      } else if (flt) {
        snprintf(msg, msg_size, "line %d: %s: element %" PRId64 ": want %.9g, got %.9g",
                 (int)k->line, k->op_name, i, kiln_literal_get_f64(want, i),
                 kiln_literal_get_f64(got, i));
      } else {
        snprintf(msg, msg_size, "line %d: %s: element %" PRId64 ": want %" PRId64 ", got %" PRId64,
                 (int)k->line, k->op_name, i, kiln_literal_get_s64(want, i),
                 kiln_literal_get_s64(got, i));
      }
    }
  }
  if (bad) {
    size_t len = strlen(msg);
    snprintf(msg + len, msg_size - len, " (%" PRId64 " of %" PRId64 " elements differ%s)", bad,
             got->num_elements, k->kind == KILN_STABLEHLO_CHECK_CLOSE ? "; ulp" : "");
    return false;
  }
  return true;
}
