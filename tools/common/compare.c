/* Backend vs reference comparison (compare.h). */
#include "tools/common/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/common/run_report.h"

void kiln_compare_tolerance(kiln_elem_type_t t, double *rtol, double *atol) {
  *rtol = *atol = 0;
  if (!kiln_elem_type_is_float(t) && !kiln_elem_type_is_complex(t)) return;
  int bits = kiln_elem_type_bits(t);
  if (t == KILN_F64 || t == KILN_C128) {
    *rtol = 1e-9, *atol = 1e-9;
  } else if (t == KILN_F32 || t == KILN_C64) {
    *rtol = 1e-4, *atol = 1e-5;
  } else if (bits == 16) {
    *rtol = 2e-2, *atol = 1e-2;
  } else {
    *rtol = 0.25, *atol = 0.1;
  }
}

static bool close_enough(double w, double g, double rtol, double atol, double *abs_err,
                         double *rel_err) {
  *abs_err = *rel_err = 0;
  if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
  if (isinf(w) || isinf(g)) return w == g;
  double d = fabs(w - g);
  *abs_err = d;
  *rel_err = w != 0 ? d / fabs(w) : (d ? INFINITY : 0);
  return d <= atol + rtol * fabs(w);
}

static void note(kiln_compare_report_t *r, int leaf, int64_t i, const char *what) {
  if (r->mismatches++ == 0)
    snprintf(r->first, sizeof(r->first), "leaf %d element %lld: %s", leaf, (long long)i, what);
}

static void compare_leaf(const kiln_literal_t *w, const kiln_literal_t *g, int leaf, double scale,
                         kiln_compare_report_t *r) {
  kiln_elem_type_t t = w->shape->type;
  double rtol, atol;
  kiln_compare_tolerance(t, &rtol, &atol);
  rtol *= scale;
  atol *= scale;
  bool exact = rtol == 0 && atol == 0;
  size_t eb = kiln_elem_type_storage_bytes(t);
  if (!exact) {
    /* The absolute tolerance scales with the leaf's largest magnitude: an element that sums
     * many terms (a reduction) carries the rounding of its terms, not of its own value. */
    double big = 1;
    for (int64_t i = 0; i < w->num_elements; i++) {
      double v[2] = {0, 0};
      if (kiln_elem_type_is_complex(t)) kiln_literal_get_c128(w, i, &v[0], &v[1]);
      else v[0] = kiln_literal_get_f64(w, i);
      for (int p = 0; p < 2; p++)
        if (isfinite(v[p]) && fabs(v[p]) > big) big = fabs(v[p]);
    }
    atol *= big;
  }
  for (int64_t i = 0; i < w->num_elements; i++) {
    r->elements++;
    char what[200];
    if (exact) {
      if (memcmp((const char *)w->data + (size_t)i * eb, (const char *)g->data + (size_t)i * eb,
                 eb) != 0) {
        long long wv = (long long)kiln_literal_get_s64(w, i),
                  gv = (long long)kiln_literal_get_s64(g, i);
        if (wv == gv && eb == 1) /* sub-byte: same value, other high bits (literal.h) */
          snprintf(what, sizeof(what), "want %lld (byte 0x%02x), got %lld (byte 0x%02x)", wv,
                   ((const unsigned char *)w->data)[i], gv, ((const unsigned char *)g->data)[i]);
        else
          snprintf(what, sizeof(what), "want %lld, got %lld", wv, gv);
        note(r, leaf, i, what);
      }
      continue;
    }
    double wv[2], gv[2];
    int parts = 1;
    if (kiln_elem_type_is_complex(t)) {
      kiln_literal_get_c128(w, i, &wv[0], &wv[1]);
      kiln_literal_get_c128(g, i, &gv[0], &gv[1]);
      parts = 2;
    } else {
      wv[0] = kiln_literal_get_f64(w, i);
      gv[0] = kiln_literal_get_f64(g, i);
    }
    for (int p = 0; p < parts; p++) {
      double ae, re;
      bool ok = close_enough(wv[p], gv[p], rtol, atol, &ae, &re);
      if (ae > r->max_abs_err) r->max_abs_err = ae;
      if (re > r->max_rel_err && !isinf(re)) r->max_rel_err = re;
      if (!ok) {
        snprintf(what, sizeof(what), "want %.9g, got %.9g%s", wv[p], gv[p],
                 parts == 2 ? (p ? " (imaginary part)" : " (real part)") : "");
        note(r, leaf, i, what);
        break;
      }
    }
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
    compare_leaf(w, g, l, scale, r);
  }
  return r->mismatches == 0;
}
