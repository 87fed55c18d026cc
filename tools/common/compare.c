/* Results against the reference: the one "close enough" rule (compare.h). */
#include "tools/common/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/common/run_report.h"

kiln_tolerance_t kiln_compare_kernel_tolerance(kiln_elem_type_t t) {
  kiln_tolerance_t tol = {0};
  if (t == KILN_C64) t = KILN_F32;
  if (t == KILN_C128) t = KILN_F64;
  if (!kiln_elem_type_is_float(t)) return tol;
  tol.max_ulp = t == KILN_F32 ? 4 : t == KILN_F64 ? 8 : 1;
  return tol;
}

double kiln_compare_summation_atol(kiln_elem_type_t t, double terms, double magnitude) {
  if (!kiln_elem_type_is_float(t)) return 0;
  double eps = t == KILN_F64    ? 0x1p-52
               : t == KILN_F32  ? 0x1p-23
               : t == KILN_F16  ? 0x1p-10
               : t == KILN_BF16 ? 0x1p-7
                                : 0x1p-3;
  return 4 * sqrt(terms < 1 ? 1 : terms) * eps * magnitude;
}

kiln_tolerance_t kiln_compare_module_tolerance(kiln_elem_type_t t, double magnitude) {
  kiln_tolerance_t tol = {0};
  if (!kiln_elem_type_is_float(t) && !kiln_elem_type_is_complex(t)) return tol;
  if (t == KILN_F64 || t == KILN_C128) {
    tol.rtol = 1e-9, tol.atol = 1e-9;
  } else if (t == KILN_F32 || t == KILN_C64) {
    tol.rtol = 1e-4, tol.atol = 1e-5;
  } else if (kiln_elem_type_bits(t) == 16) {
    tol.rtol = 2e-2, tol.atol = 1e-2;
  } else {
    tol.rtol = 0.25, tol.atol = 0.1;
  }
  tol.atol *= magnitude > 1 ? magnitude : 1;
  return tol;
}

double kiln_compare_magnitude(const kiln_literal_t *l) {
  kiln_elem_type_t t = l->shape->type;
  bool complex = kiln_elem_type_is_complex(t);
  if (!complex && !kiln_elem_type_is_float(t)) return 0;
  double m = 0;
  for (int64_t i = 0; i < l->num_elements; i++) {
    double v[2] = {0, 0};
    if (complex)
      kiln_literal_get_c128(l, i, &v[0], &v[1]);
    else
      v[0] = kiln_literal_get_f64(l, i);
    for (int p = 0; p < 2; p++)
      if (isfinite(v[p]) && fabs(v[p]) > m) m = fabs(v[p]);
  }
  return m;
}

/* Ordered integer key of a float's bits (sign-magnitude -> two's complement order). */
static int64_t float_key(kiln_elem_type_t t, const void *data, int64_t i) {
  size_t sb = kiln_elem_type_storage_bytes(t);
  uint64_t bits = 0;
  memcpy(&bits, (const char *)data + (size_t)i * sb, sb);
  int w = kiln_elem_type_bits(t);
  if (t == KILN_F8E8M0FNU) return (int64_t)bits;
  uint64_t sign = (bits >> (w - 1)) & 1;
  uint64_t mag = bits & (w >= 64 ? ~0ull >> 1 : (((uint64_t)1 << (w - 1)) - 1));
  return sign ? -(int64_t)mag : (int64_t)mag;
}

static int64_t key_distance(int64_t a, int64_t b) {
  uint64_t d = a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
  return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}

/* Whether a NaN or infinity on either side matches (NaN only NaN, infinity only itself). */
static bool special_matches(double w, double g) {
  return (isnan(w) && isnan(g)) || (!isnan(w) && !isnan(g) && w == g);
}

static bool is_special(double w, double g) {
  return isnan(w) || isnan(g) || isinf(w) || isinf(g);
}

/* Checks one finite float (part) `g` against `w`, `ulps` away, and tracks the errors. */
static bool within(double w, double g, int64_t ulps, const kiln_tolerance_t *tol,
                   kiln_compare_report_t *r) {
  double d = fabs(w - g);
  if (d > r->max_abs_err) r->max_abs_err = d;
  if (w != 0 && d / fabs(w) > r->max_rel_err) r->max_rel_err = d / fabs(w);
  if (ulps > r->max_ulp) r->max_ulp = ulps;
  return ulps <= tol->max_ulp || d <= tol->atol + tol->rtol * fabs(w);
}

/* Ulps between complex parts w and g of an element whose larger part has magnitude `mag`. */
static int64_t part_ulps(double w, double g, double mag, bool c64) {
  int e = 0;
  frexp(mag, &e);
  double ulp = mag > 0 ? ldexp(1.0, e - 1 - (c64 ? 23 : 52)) : (c64 ? 1.4e-45 : 4.9e-324);
  double u = ceil(fabs(w - g) / ulp);
  return u >= 9.2e18 ? INT64_MAX : (int64_t)u;
}

/* One element; writes what differs into `what` when it does not pass. */
static bool element_ok(const kiln_literal_t *want, const kiln_literal_t *got, int64_t i,
                       const kiln_tolerance_t *tol, kiln_compare_report_t *r, char *what,
                       size_t what_size) {
  kiln_elem_type_t t = want->shape->type;
  if (kiln_elem_type_is_complex(t)) {
    double w[2], g[2];
    kiln_literal_get_c128(want, i, &w[0], &w[1]);
    kiln_literal_get_c128(got, i, &g[0], &g[1]);
    double mag = fmax(fabs(w[0]), fabs(w[1]));
    bool ok = true;
    for (int k = 0; k < 2; k++) {
      if (is_special(w[k], g[k])) {
        if (!special_matches(w[k], g[k])) ok = false, r->max_ulp = INT64_MAX;
        continue;
      }
      ok &= within(w[k], g[k], part_ulps(w[k], g[k], mag, t == KILN_C64), tol, r);
    }
    if (!ok)
      snprintf(what, what_size, "want (%.9g, %.9g), got (%.9g, %.9g)", w[0], w[1], g[0], g[1]);
    return ok;
  }
  double a = kiln_literal_get_f64(want, i), b = kiln_literal_get_f64(got, i);
  if (!kiln_elem_type_is_float(t)) {
    bool same = kiln_literal_get_u64(want, i) == kiln_literal_get_u64(got, i);
    if (fabs(a - b) > r->max_abs_err) r->max_abs_err = fabs(a - b);
    if (!same && r->max_ulp < 1) r->max_ulp = 1;
    /* Sub-byte integers sit one to a byte, high bits zero (literal.h): equal values in other
     * bytes are a storage mismatch, named with both bytes. */
    if (same && kiln_elem_type_bits(t) < 8) {
      unsigned char wb = ((const unsigned char *)want->data)[i];
      unsigned char gb = ((const unsigned char *)got->data)[i];
      if (wb != gb) {
        if (r->max_ulp < 1) r->max_ulp = 1;
        snprintf(what, what_size, "want %lld (byte 0x%02x), got %lld (byte 0x%02x)",
                 (long long)kiln_literal_get_s64(want, i), wb,
                 (long long)kiln_literal_get_s64(got, i), gb);
        return false;
      }
    }
    if (!same && kiln_elem_type_is_unsigned_int(t))
      snprintf(what, what_size, "want %llu, got %llu",
               (unsigned long long)kiln_literal_get_u64(want, i),
               (unsigned long long)kiln_literal_get_u64(got, i));
    else if (!same)
      snprintf(what, what_size, "want %lld, got %lld", (long long)kiln_literal_get_s64(want, i),
               (long long)kiln_literal_get_s64(got, i));
    return same;
  }
  bool ok;
  if (is_special(a, b)) {
    ok = special_matches(a, b);
    if (!ok) r->max_ulp = INT64_MAX;
  } else {
    int64_t ulps = key_distance(float_key(t, want->data, i), float_key(t, got->data, i));
    ok = within(a, b, ulps, tol, r);
  }
  if (!ok) snprintf(what, what_size, "want %.9g, got %.9g", a, b);
  return ok;
}

void kiln_compare_array(const kiln_literal_t *want, const void *got, const kiln_tolerance_t *tol,
                        const char *label, kiln_compare_report_t *r) {
  kiln_literal_t g = *want;
  g.data = (void *)got;
  for (int64_t i = 0; i < want->num_elements; i++) {
    char what[200];
    r->elements++;
    if (element_ok(want, &g, i, tol, r, what, sizeof(what))) continue;
    if (r->mismatches++ == 0)
      snprintf(r->first, sizeof(r->first), "%s element %lld: %s", label, (long long)i, what);
  }
}

bool kiln_compare_literals(const kiln_literal_t *want, const kiln_literal_t *got,
                           const kiln_compare_options_t *opts, kiln_compare_report_t *r) {
  memset(r, 0, sizeof(*r));
  double scale = opts && opts->scale > 0 ? opts->scale : 1;
  int n = kiln_run_report_num_leaves(want);
  if (kiln_run_report_num_leaves(got) != n) {
    snprintf(r->first, sizeof(r->first), "%d leaves expected, %d got", n,
             kiln_run_report_num_leaves(got));
    r->mismatches = 1;
    return false;
  }
  for (int l = 0; l < n; l++) {
    const kiln_literal_t *w = kiln_run_report_leaf(want, l), *g = kiln_run_report_leaf(got, l);
    if (!w || !g || !kiln_shape_is_array(w->shape)) continue;
    if (!kiln_shape_is_array(g->shape) || w->shape->type != g->shape->type ||
        w->num_elements != g->num_elements) {
      snprintf(r->first, sizeof(r->first), "leaf %d: shapes differ", l);
      r->mismatches++;
      continue;
    }
    if (w->num_elements && (!w->data || !g->data)) continue;
    kiln_tolerance_t tol = kiln_compare_module_tolerance(w->shape->type, kiln_compare_magnitude(w));
    if (opts && opts->has_floor_type &&
        (kiln_elem_type_is_float(w->shape->type) || kiln_elem_type_is_complex(w->shape->type))) {
      kiln_tolerance_t floor =
          kiln_compare_module_tolerance(opts->floor_type, kiln_compare_magnitude(w));
      if (floor.rtol > tol.rtol) tol.rtol = floor.rtol;
      if (floor.atol > tol.atol) tol.atol = floor.atol;
    }
    tol.rtol *= scale;
    tol.atol *= scale;
    char label[32];
    snprintf(label, sizeof(label), "leaf %d", l);
    kiln_compare_array(w, g->data, &tol, label, r);
  }
  return r->mismatches == 0;
}
