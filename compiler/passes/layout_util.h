/* Small layout helpers shared by layout assignment and layout normalization.
 *
 * A layout is handled as its minor_to_major permutation ("m2m"); a shape without a layout
 * (or with a malformed one) reads as the default descending layout {rank-1, ..., 0}.
 * "Physical order" is the major-to-minor list of logical dimensions: phys[k] =
 * m2m[rank-1-k]. Shapes are immutable and may be shared: every helper that changes a
 * layout returns a fresh arena copy. */
#ifndef KILN_PASSES_LAYOUT_UTIL_H_
#define KILN_PASSES_LAYOUT_UTIL_H_

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/hlo/shape.h"

/* Ranks above this are left alone by the layout passes (their arrays live on the stack). */
#define KILN_LAYOUT_MAX_RANK 32

static inline bool kiln_layout_has_plain_m2m(const kiln_shape_t *s) {
  return s->has_layout && s->layout.rank == s->rank && s->layout.minor_to_major;
}

/* Fills m2m[0..rank) with the shape's minor_to_major (default when it has none). */
static inline void kiln_layout_m2m(const kiln_shape_t *s, int64_t *m2m) {
  if (kiln_layout_has_plain_m2m(s)) {
    memcpy(m2m, s->layout.minor_to_major, sizeof(int64_t) * (size_t)s->rank);
    return;
  }
  for (int i = 0; i < s->rank; i++) m2m[i] = s->rank - 1 - i;
}

/* Major-to-minor logical dimensions. */
static inline void kiln_layout_phys(const kiln_shape_t *s, int64_t *phys) {
  int64_t m2m[KILN_LAYOUT_MAX_RANK];
  kiln_layout_m2m(s, m2m);
  for (int i = 0; i < s->rank; i++) phys[i] = m2m[s->rank - 1 - i];
}

static inline bool kiln_layout_m2m_is_default(int rank, const int64_t *m2m) {
  for (int i = 0; i < rank; i++)
    if (m2m[i] != rank - 1 - i) return false;
  return true;
}

static inline bool kiln_layout_is_tiled(const kiln_shape_t *s) {
  return s->has_layout && (s->layout.num_tiles > 0 || s->layout.extra != NULL);
}

/* Same physical arrangement: arrays compare minor_to_major and tiling (memory space and
 * element size bits are not a matter of arrangement); tuples compare leaf by leaf. */
static inline bool kiln_layout_phys_equal(const kiln_shape_t *a, const kiln_shape_t *b) {
  if (kiln_shape_is_tuple(a) || kiln_shape_is_tuple(b)) {
    if (!kiln_shape_is_tuple(a) || !kiln_shape_is_tuple(b) || a->num_elements != b->num_elements)
      return false;
    for (int i = 0; i < a->num_elements; i++)
      if (!kiln_layout_phys_equal(a->elements[i], b->elements[i])) return false;
    return true;
  }
  if (!kiln_shape_is_array(a) || !kiln_shape_is_array(b)) return true;
  if (a->rank != b->rank || a->rank > KILN_LAYOUT_MAX_RANK) return a->rank == b->rank;
  int64_t x[KILN_LAYOUT_MAX_RANK], y[KILN_LAYOUT_MAX_RANK];
  kiln_layout_m2m(a, x);
  kiln_layout_m2m(b, y);
  if (memcmp(x, y, sizeof(int64_t) * (size_t)a->rank) != 0) return false;
  bool ta = kiln_layout_is_tiled(a), tb = kiln_layout_is_tiled(b);
  if (ta != tb) return false;
  if (ta) return kiln_layout_equal(&a->layout, &b->layout);
  return true;
}

/* A copy of array shape `s` whose layout is exactly `m2m` (no tiles, default memory
 * space). */
static inline kiln_shape_t *kiln_layout_with_m2m(kiln_arena_t *a, const kiln_shape_t *s,
                                                 const int64_t *m2m) {
  if (s->rank == 0 && !s->has_layout) return (kiln_shape_t *)s; /* scalars print without {} */
  kiln_shape_t *r = kiln_shape_clone(a, s);
  r->has_layout = true;
  memset(&r->layout, 0, sizeof r->layout);
  r->layout.rank = s->rank;
  r->layout.minor_to_major = kiln_arena_alloc(a, sizeof(int64_t) * (size_t)(s->rank ? s->rank : 1));
  if (s->rank) memcpy(r->layout.minor_to_major, m2m, sizeof(int64_t) * (size_t)s->rank);
  return r;
}

/* `s` with every array leaf that has no layout given the default one; leaves that have one
 * keep it. Returns `s` itself when nothing changes. */
static inline kiln_shape_t *kiln_layout_fill_default(kiln_arena_t *a, kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    kiln_shape_t **el = NULL;
    for (int i = 0; i < s->num_elements; i++) {
      kiln_shape_t *e = kiln_layout_fill_default(a, s->elements[i]);
      if (e != s->elements[i] && !el) {
        el = kiln_arena_alloc(a, sizeof *el * (size_t)s->num_elements);
        memcpy(el, s->elements, sizeof *el * (size_t)s->num_elements);
      }
      if (el) el[i] = e;
    }
    return el ? kiln_shape_make_tuple(a, s->num_elements, el) : s;
  }
  if (!kiln_shape_is_array(s) || kiln_layout_has_plain_m2m(s) || s->rank == 0) return s;
  kiln_shape_t *r = kiln_shape_clone(a, s);
  kiln_shape_set_default_layout(a, r);
  return r;
}

/* `s` with every array leaf given the plain default layout (tiles etc. dropped). */
static inline kiln_shape_t *kiln_layout_all_default(kiln_arena_t *a, kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    kiln_shape_t **el = kiln_arena_alloc(a, sizeof *el * (size_t)(s->num_elements ? s->num_elements : 1));
    for (int i = 0; i < s->num_elements; i++) el[i] = kiln_layout_all_default(a, s->elements[i]);
    return kiln_shape_make_tuple(a, s->num_elements, el);
  }
  if (!kiln_shape_is_array(s)) return s;
  if (s->has_layout ? kiln_layout_is_default(&s->layout) : s->rank == 0) return s;
  kiln_shape_t *r = kiln_shape_clone(a, s);
  kiln_shape_set_default_layout(a, r);
  return r;
}

/* Reshape as a bitcast. Given the operand's dims and layout, decides whether a reshape to
 * `out` moves no bytes. When `out_m2m` is NULL it instead looks for an output layout that
 * makes the reshape a bitcast and writes it to `chosen` (size-1 output dimensions go
 * major-most). Size-1 dimensions never matter; a reshape of zero elements always is one.
 *
 * Rule: split the non-1 dimensions of both sides into the smallest groups with equal
 * products (in logical order). The reshape is a bitcast iff, in both physical orders, each
 * group's dimensions sit together in ascending logical order, and the groups come in the
 * same order on both sides. */
static inline bool kiln_layout_reshape_bitcast(const kiln_shape_t *in, const int64_t *in_m2m,
                                               const kiln_shape_t *out, const int64_t *out_m2m,
                                               int64_t *chosen) {
  int ri = in->rank, ro = out->rank;
  if (ri > KILN_LAYOUT_MAX_RANK || ro > KILN_LAYOUT_MAX_RANK) return false;
  bool empty = false;
  for (int i = 0; i < ri; i++) empty |= in->dims[i] == 0;
  if (empty) {
    if (chosen)
      for (int i = 0; i < ro; i++) chosen[i] = ro - 1 - i;
    return true;
  }
  int li[KILN_LAYOUT_MAX_RANK], lo[KILN_LAYOUT_MAX_RANK], nli = 0, nlo = 0;
  int gin[KILN_LAYOUT_MAX_RANK], gout[KILN_LAYOUT_MAX_RANK];
  for (int i = 0; i < ri; i++) {
    gin[i] = -1;
    if (in->dims[i] != 1) li[nli++] = i;
  }
  for (int i = 0; i < ro; i++) {
    gout[i] = -1;
    if (out->dims[i] != 1) lo[nlo++] = i;
  }
  int i = 0, j = 0, g = 0;
  while (i < nli && j < nlo) {
    int64_t pi = in->dims[li[i]], po = out->dims[lo[j]];
    gin[li[i++]] = g;
    gout[lo[j++]] = g;
    while (pi != po) {
      if (pi < po) {
        if (i >= nli) return false;
        pi *= in->dims[li[i]];
        gin[li[i++]] = g;
      } else {
        if (j >= nlo) return false;
        po *= out->dims[lo[j]];
        gout[lo[j++]] = g;
      }
    }
    g++;
  }
  if (i < nli || j < nlo) return false;
  /* Group order along one side's physical order; -1 on a violation. */
  int order_in[KILN_LAYOUT_MAX_RANK], order_out[KILN_LAYOUT_MAX_RANK];
  const kiln_shape_t *sides[2] = {in, out};
  const int64_t *m2ms[2] = {in_m2m, out_m2m};
  const int *groups[2] = {gin, gout};
  int *orders[2] = {order_in, order_out};
  for (int side = 0; side < (out_m2m ? 2 : 1); side++) {
    const kiln_shape_t *s = sides[side];
    int n = 0, cur = -1;
    int64_t last = -1;
    for (int k = s->rank - 1; k >= 0; k--) {
      int64_t d = m2ms[side][k];
      if (d < 0 || d >= s->rank) return false;
      if (s->dims[d] == 1) continue;
      int gd = groups[side][d];
      if (gd != cur) {
        for (int q = 0; q < n; q++)
          if (orders[side][q] == gd) return false; /* group split in two */
        /* a group starts at its smallest dimension */
        for (int64_t e = 0; e < d; e++)
          if (s->dims[e] != 1 && groups[side][e] == gd) return false;
        orders[side][n++] = gd;
        cur = gd;
      } else {
        /* next dimension of the group in logical order */
        for (int64_t e = last + 1; e < d; e++)
          if (s->dims[e] != 1 && groups[side][e] == gd) return false;
        if (d < last) return false;
      }
      last = d;
    }
  }
  if (out_m2m) return memcmp(order_in, order_out, sizeof(int) * (size_t)g) == 0;
  /* Choose: size-1 dims major-most, then the groups in the operand's order. */
  int64_t phys[KILN_LAYOUT_MAX_RANK];
  int n = 0;
  for (int d = 0; d < ro; d++)
    if (out->dims[d] == 1) phys[n++] = d;
  for (int q = 0; q < g; q++)
    for (int d = 0; d < ro; d++)
      if (gout[d] == order_in[q]) phys[n++] = d;
  for (int k = 0; k < ro; k++) chosen[k] = phys[ro - 1 - k];
  return true;
}

#endif /* KILN_PASSES_LAYOUT_UTIL_H_ */
