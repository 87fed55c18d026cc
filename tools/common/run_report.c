/* Result summaries; see run_report.h. */
#include "tools/common/run_report.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/hlo/shape.h"

int kiln_run_report_num_leaves(const kiln_literal_t *l) {
  if (!l) return 0;
  if (!l->shape || !kiln_shape_is_tuple(l->shape)) return 1;
  int n = 0;
  for (int i = 0; i < l->num_tuple_elements; i++)
    n += kiln_run_report_num_leaves(l->tuple_elements[i]);
  return n;
}

static const kiln_literal_t *leaf_at(const kiln_literal_t *l, int *index) {
  if (!l) return NULL;
  if (!l->shape || !kiln_shape_is_tuple(l->shape)) return (*index)-- == 0 ? l : NULL;
  for (int i = 0; i < l->num_tuple_elements; i++) {
    const kiln_literal_t *r = leaf_at(l->tuple_elements[i], index);
    if (r) return r;
  }
  return NULL;
}

const kiln_literal_t *kiln_run_report_leaf(const kiln_literal_t *l, int index) {
  if (index < 0) return NULL;
  return leaf_at(l, &index);
}

static void add_part(double v, double *sum, bool *nan, bool *inf) {
  if (isnan(v))
    *nan = true;
  else if (isinf(v))
    *inf = true;
  else
    *sum += v;
}

void kiln_run_report_summarize(const kiln_literal_t *leaf, kiln_run_report_summary_t *out) {
  memset(out, 0, sizeof *out);
  if (!leaf || !leaf->shape || !kiln_shape_is_array(leaf->shape) || leaf->unknown) return;
  kiln_elem_type_t t = leaf->shape->type;
  out->num_elements = leaf->num_elements;
  bool cplx = kiln_elem_type_is_complex(t);
  if (t == KILN_F32 || t == KILN_BF16 || t == KILN_F64) { /* fast paths, same sums */
    for (int64_t i = 0; i < leaf->num_elements; i++) {
      double v;
      if (t == KILN_F32) {
        v = ((const float *)leaf->data)[i];
      } else if (t == KILN_F64) {
        v = ((const double *)leaf->data)[i];
      } else {
        uint32_t bits = (uint32_t)((const uint16_t *)leaf->data)[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        v = f;
      }
      bool nan = false, inf = false;
      add_part(v, &out->sum, &nan, &inf);
      out->nan_count += nan;
      out->inf_count += inf;
    }
  } else {
    for (int64_t i = 0; i < leaf->num_elements; i++) {
      bool nan = false, inf = false;
      if (cplx) {
        double re, im;
        kiln_literal_get_c128(leaf, i, &re, &im);
        add_part(re, &out->sum, &nan, &inf);
        add_part(im, &out->sum_imag, &nan, &inf);
      } else if (kiln_elem_type_is_unsigned_int(t)) {
        out->sum += (double)kiln_literal_get_u64(leaf, i);
      } else {
        add_part(kiln_literal_get_f64(leaf, i), &out->sum, &nan, &inf);
      }
      out->nan_count += nan;
      out->inf_count += inf;
    }
  }
  size_t bytes = (size_t)leaf->num_elements * kiln_elem_type_storage_bytes(t);
  out->fnv1a = kiln_hash_bytes(bytes ? leaf->data : "", bytes);
}

static void print_value(kiln_strbuf_t *b, const kiln_literal_t *l, int64_t i) {
  kiln_elem_type_t t = l->shape->type;
  if (t == KILN_PRED) {
    kiln_strbuf_append(b, kiln_literal_get_u64(l, i) ? "true" : "false");
  } else if (kiln_elem_type_is_signed_int(t)) {
    kiln_strbuf_printf(b, "%" PRId64, kiln_literal_get_s64(l, i));
  } else if (kiln_elem_type_is_unsigned_int(t)) {
    kiln_strbuf_printf(b, "%" PRIu64, kiln_literal_get_u64(l, i));
  } else if (kiln_elem_type_is_complex(t)) {
    double re, im;
    kiln_literal_get_c128(l, i, &re, &im);
    kiln_strbuf_printf(b, "(%.6g, %.6g)", re, im);
  } else {
    kiln_strbuf_printf(b, "%.6g", kiln_literal_get_f64(l, i));
  }
}

void kiln_run_report_print_leaf(kiln_strbuf_t *b, const char *label, const kiln_literal_t *leaf,
                                int max_values) {
  if (!leaf || !leaf->shape) {
    kiln_strbuf_printf(b, "%s <none>\n", label);
    return;
  }
  char *shape = kiln_shape_to_string(leaf->shape, false);
  kiln_strbuf_printf(b, "%s %s", label, shape);
  kiln_free(shape);
  if (!kiln_shape_is_array(leaf->shape)) {
    kiln_strbuf_append_char(b, '\n');
    return;
  }
  if (leaf->unknown) {
    kiln_strbuf_append(b, " {...}\n");
    return;
  }
  kiln_strbuf_append(b, " {");
  int64_t n = leaf->num_elements;
  int64_t shown = n < max_values ? n : (max_values < 0 ? 0 : max_values);
  for (int64_t i = 0; i < shown; i++) {
    if (i) kiln_strbuf_append(b, ", ");
    print_value(b, leaf, i);
  }
  if (shown < n) kiln_strbuf_append(b, shown ? ", ..." : "...");
  kiln_strbuf_append_char(b, '}');
  kiln_run_report_summary_t s;
  kiln_run_report_summarize(leaf, &s);
  if (kiln_elem_type_is_complex(leaf->shape->type))
    kiln_strbuf_printf(b, " sum=(%.9g, %.9g)", s.sum, s.sum_imag);
  else
    kiln_strbuf_printf(b, " sum=%.9g", s.sum);
  if (s.nan_count) kiln_strbuf_printf(b, " nan=%" PRId64, s.nan_count);
  if (s.inf_count) kiln_strbuf_printf(b, " inf=%" PRId64, s.inf_count);
  kiln_strbuf_printf(b, " fnv1a=0x%016" PRIx64 "\n", s.fnv1a);
}
