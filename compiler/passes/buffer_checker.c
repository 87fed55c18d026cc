/* Buffer assignment checker: an independent proof that an assignment is safe.
 *
 * It recomputes the dataflow, aliasing and liveness of the module from scratch and checks
 * the assignment's slices against them:
 *   1. every array value has a slice inside its allocation, at least as large as the value;
 *   2. entry parameters live in their PARAMETER allocation, constants in CONSTANT ones,
 *      program outputs in OUTPUT allocations (or a donated parameter's), and nothing else
 *      in a parameter or constant allocation;
 *   3. values that must alias (one buffer) have the same slice, and no two of them are live
 *      at the same time unless the later one may be written over the earlier where it
 *      dies (kiln_dataflow_may_reuse);
 *   4. two buffers whose slices overlap in memory are never live at the same time, except
 *      that one may start at the instruction where the other dies when that instruction
 *      may write over it.
 * Buffers are compared by the hull of their values' live ranges: a loop's state is live
 * across the whole loop even where no value of it is in use. */
#include <stdlib.h>
#include <string.h>

#include "compiler/passes/buffer_assignment.h"

typedef struct cbuf {
  int alloc;
  int64_t offset, size, start, end;
  KILN_VEC(const kiln_hlo_value_t *) values;
} cbuf_t;

static kiln_status fail_values(const char *what, const kiln_hlo_value_t *a, const kiln_hlo_value_t *b) {
  kiln_strbuf_t s = {0};
  kiln_dataflow_print_value(&s, a);
  kiln_strbuf_printf(&s, " [%lld, %lld]", (long long)a->start, (long long)a->end);
  if (b) {
    kiln_strbuf_append(&s, " and ");
    kiln_dataflow_print_value(&s, b);
    kiln_strbuf_printf(&s, " [%lld, %lld]", (long long)b->start, (long long)b->end);
  }
  kiln_status st = kiln_status_make(KILN_INTERNAL, "buffer check: %s: %s", what, kiln_strbuf_cstr(&s));
  kiln_strbuf_free(&s);
  return st;
}

static int cmp_val_start(const void *pa, const void *pb) {
  const kiln_hlo_value_t *a = *(const kiln_hlo_value_t *const *)pa, *b = *(const kiln_hlo_value_t *const *)pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->id - b->id;
}

static _Thread_local const cbuf_t *g_bufs; /* qsort context, per compiling thread */
static int cmp_buf_start(const void *pa, const void *pb) {
  const cbuf_t *a = &g_bufs[*(const int *)pa], *b = &g_bufs[*(const int *)pb];
  if (a->alloc != b->alloc) return a->alloc < b->alloc ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return *(const int *)pa - *(const int *)pb;
}

static kiln_status check_slices(const kiln_buffer_assignment_t *ba, kiln_dataflow_t *df,
                                kiln_buffer_slice_t *slice_of) {
  for (size_t i = 0; i < df->values.len; i++) {
    const kiln_hlo_value_t *v = df->values.data[i];
    const kiln_hlo_value_t *bv = kiln_dataflow_value_at(ba->df, v->def, v->leaf);
    if (!bv || bv->def != v->def || bv->leaf != v->leaf || bv->id >= ba->num_slices)
      return fail_values("value not in the assignment", v, NULL);
    kiln_buffer_slice_t sl = ba->slices[bv->id];
    if (sl.allocation < 0 || sl.allocation >= ba->num_allocations)
      return fail_values("value has no slice", v, NULL);
    const kiln_buffer_allocation_t *al = &ba->allocations[sl.allocation];
    if (sl.offset < 0 || sl.size < v->size || sl.offset + sl.size > al->size)
      return fail_values("slice does not fit its allocation or the value", v, NULL);
    switch (v->kind) {
      case KILN_VALUE_PARAMETER:
        if (al->kind != KILN_ALLOCATION_PARAMETER || al->parameter_number != v->def->parameter_number ||
            al->parameter_leaf != v->leaf)
          return fail_values("parameter not in its parameter allocation", v, NULL);
        break;
      case KILN_VALUE_CONSTANT:
        if (al->kind != KILN_ALLOCATION_CONSTANT || al->constant != v->def)
          return fail_values("constant not in its constant allocation", v, NULL);
        break;
      default:
        if (al->kind == KILN_ALLOCATION_CONSTANT)
          return fail_values("value written into a constant allocation", v, NULL);
        if (al->kind == KILN_ALLOCATION_PARAMETER && al->output_leaf < 0)
          return fail_values("value written into a read-only parameter allocation", v, NULL);
        break;
    }
    if (v->live_out && al->kind != KILN_ALLOCATION_OUTPUT && al->kind != KILN_ALLOCATION_PARAMETER)
      return fail_values("program output not in an output allocation", v, NULL);
    if (al->kind == KILN_ALLOCATION_OUTPUT && al->output_leaf < 0)
      return fail_values("output allocation without an output leaf", v, NULL);
    slice_of[i] = sl;
  }
  return NULL;
}

/* Every value of `a` ending at its end may be overwritten by every value of `b` starting
 * at its start. */
static bool meet_ok(kiln_dataflow_t *df, const cbuf_t *a, const cbuf_t *b) {
  for (size_t i = 0; i < a->values.len; i++) {
    const kiln_hlo_value_t *x = a->values.data[i];
    if (x->end != a->end) continue;
    for (size_t j = 0; j < b->values.len; j++) {
      const kiln_hlo_value_t *y = b->values.data[j];
      if (y->start != b->start) continue;
      if (!kiln_dataflow_may_reuse(df, x, y)) return false;
    }
  }
  return true;
}

kiln_status kiln_buffer_assignment_check(const kiln_buffer_assignment_t *ba) {
  kiln_dataflow_t *df = NULL;
  kiln_status s = kiln_dataflow_run(ba->module, &df);
  if (!s) s = kiln_dataflow_liveness(df);
  if (s) {
    kiln_dataflow_free(df);
    return kiln_status_annotate(s, "buffer check");
  }
  kiln_dataflow_alias(df);
  size_t nv = df->values.len;
  kiln_buffer_slice_t *slice_of = kiln_calloc(nv + 1, sizeof *slice_of);
  int *buf_of_root = kiln_malloc(sizeof(int) * (nv + 1));
  cbuf_t *bufs = kiln_calloc(nv + 1, sizeof(cbuf_t));
  int nb = 0;
  s = check_slices(ba, df, slice_of);
  /* Group by the checker's own aliasing; all values of a buffer share one slice. */
  for (size_t i = 0; i < nv; i++) buf_of_root[i] = -1;
  for (size_t i = 0; i < nv && !s; i++) {
    const kiln_hlo_value_t *v = df->values.data[i];
    int r = kiln_dataflow_buffer_of(df, (int)i);
    if (buf_of_root[r] < 0) {
      buf_of_root[r] = nb;
      bufs[nb].alloc = slice_of[i].allocation;
      bufs[nb].offset = slice_of[i].offset;
      bufs[nb].start = INT64_MAX;
      bufs[nb].end = INT64_MIN;
      nb++;
    }
    cbuf_t *cb = &bufs[buf_of_root[r]];
    if (cb->alloc != slice_of[i].allocation || cb->offset != slice_of[i].offset)
      s = fail_values("aliased values have different slices", cb->values.data[0], v);
    kiln_vec_push(&cb->values, v);
    if (slice_of[i].size > cb->size) cb->size = slice_of[i].size;
    if (v->start < cb->start) cb->start = v->start;
    if (v->end > cb->end) cb->end = v->end;
  }
  /* 3: values within one buffer, in start order. Only values still live where the next
   * one starts can clash with it; the others are dropped from `open` for good (starts only
   * grow), keeping their order, so each value meets only the values overlapping it. */
  KILN_VEC(const kiln_hlo_value_t *) open = {0};
  for (int b = 0; b < nb && !s; b++) {
    cbuf_t *cb = &bufs[b];
    qsort(cb->values.data, cb->values.len, sizeof(cb->values.data[0]), cmp_val_start);
    kiln_vec_clear(&open);
    for (size_t i = 0; i < cb->values.len && !s; i++) {
      const kiln_hlo_value_t *y = cb->values.data[i];
      size_t kept = 0;
      for (size_t j = 0; j < open.len; j++)
        if (open.data[j]->end >= y->start) open.data[kept++] = open.data[j];
      open.len = kept;
      for (size_t j = 0; j < open.len && !s; j++) {
        const kiln_hlo_value_t *x = open.data[j];
        if (x->end == y->start && kiln_dataflow_may_reuse(df, x, y)) continue;
        s = fail_values("aliased values live at the same time", x, y);
      }
      kiln_vec_push(&open, y);
    }
  }
  kiln_vec_free(&open);
  /* 4: buffers overlapping in memory, swept in time order one allocation at a time (only
   * buffers of one allocation can overlap): the buffers live at once in one allocation, not
   * every buffer live at that time (the parameters live throughout), are compared. */
  if (!s) {
    int *order = kiln_malloc(sizeof(int) * (size_t)(nb + 1));
    int n = 0;
    for (int b = 0; b < nb; b++)
      if (bufs[b].size > 0) order[n++] = b;
    g_bufs = bufs;
    qsort(order, (size_t)n, sizeof(int), cmp_buf_start);
    KILN_VEC(int) active = {0};
    for (int k = 0; k < n && !s; k++) {
      cbuf_t *cb = &bufs[order[k]];
      if (k > 0 && bufs[order[k - 1]].alloc != cb->alloc) kiln_vec_clear(&active);
      for (size_t a = 0; a < active.len;) {
        if (bufs[active.data[a]].end < cb->start) {
          active.data[a] = kiln_vec_last(&active);
          active.len--;
        } else {
          a++;
        }
      }
      for (size_t a = 0; a < active.len && !s; a++) {
        cbuf_t *ab = &bufs[active.data[a]];
        if (ab->offset >= cb->offset + cb->size || cb->offset >= ab->offset + ab->size) continue;
        if (ab->end == cb->start && meet_ok(df, ab, cb)) continue;
        s = fail_values("buffers overlap in memory while both are live", ab->values.data[0],
                        cb->values.data[0]);
      }
      kiln_vec_push(&active, order[k]);
    }
    kiln_vec_free(&active);
    kiln_free(order);
  }
  for (int b = 0; b < nb; b++) kiln_vec_free(&bufs[b].values);
  kiln_free(bufs);
  kiln_free(buf_of_root);
  kiln_free(slice_of);
  kiln_dataflow_free(df);
  return s;
}
