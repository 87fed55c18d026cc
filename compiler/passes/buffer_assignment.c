/* Buffer assignment; see buffer_assignment.h. */
#include "compiler/passes/buffer_assignment.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compiler/passes/pass.h"

const char *kiln_allocation_kind_name(kiln_allocation_kind_t k) {
  switch (k) {
    case KILN_ALLOCATION_PARAMETER: return "parameter";
    case KILN_ALLOCATION_CONSTANT: return "constant";
    case KILN_ALLOCATION_OUTPUT: return "output";
    case KILN_ALLOCATION_TEMP: return "temp";
  }
  return "?";
}

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static int cmp_value_start(const void *pa, const void *pb) {
  const kiln_hlo_value_t *a = *(kiln_hlo_value_t *const *)pa, *b = *(kiln_hlo_value_t *const *)pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end < b->end ? -1 : 1;
  return a->id - b->id;
}

/* ---- buffers ---- */

static void value_name(kiln_strbuf_t *b, const kiln_hlo_value_t *v) { kiln_dataflow_print_value(b, v); }

static kiln_status precondition(const char *what, const kiln_hlo_value_t *a, const kiln_hlo_value_t *b) {
  kiln_strbuf_t s = {0};
  value_name(&s, a);
  kiln_strbuf_append(&s, " and ");
  value_name(&s, b);
  kiln_status st = kiln_status_make(KILN_FAILED_PRECONDITION, "%s: %s (run copy_insertion first)", what,
                                    kiln_strbuf_cstr(&s));
  kiln_strbuf_free(&s);
  return st;
}

/* Groups values into buffers and validates each one: at most one parameter or constant,
 * and no two values live at the same time unless one may be written over the other. */
static kiln_status build_buffers(kiln_buffer_assignment_t *ba) {
  kiln_dataflow_t *df = ba->df;
  size_t nv = df->values.len;
  int *buf_of_root = kiln_malloc(sizeof(int) * (nv + 1));
  int *count = kiln_calloc(nv + 1, sizeof(int));
  for (size_t i = 0; i < nv; i++) buf_of_root[i] = -1;
  int nb = 0;
  for (size_t i = 0; i < nv; i++) {
    int r = kiln_dataflow_buffer_of(df, (int)i);
    if (buf_of_root[r] < 0) buf_of_root[r] = nb++;
    count[buf_of_root[r]]++;
  }
  ba->num_buffers = nb;
  ba->buffers = kiln_arena_alloc(&df->arena, sizeof(kiln_logical_buffer_t) * (size_t)(nb + 1));
  for (int b = 0; b < nb; b++) {
    ba->buffers[b].index = b;
    ba->buffers[b].values = kiln_arena_alloc(&df->arena, sizeof(kiln_hlo_value_t *) * (size_t)(count[b] + 1));
    ba->buffers[b].allocation = -1;
    ba->buffers[b].reuses = -1;
    ba->buffers[b].start = INT64_MAX;
    ba->buffers[b].end = INT64_MIN;
  }
  ba->num_slices = (int)nv;
  ba->slices = kiln_arena_alloc(&df->arena, sizeof(kiln_buffer_slice_t) * (nv + 1));
  for (size_t i = 0; i < nv; i++) {
    kiln_hlo_value_t *v = df->values.data[i];
    int b = buf_of_root[kiln_dataflow_buffer_of(df, (int)i)];
    kiln_logical_buffer_t *lb = &ba->buffers[b];
    lb->values[lb->num_values++] = v;
    if (v->size > lb->size) lb->size = v->size;
    if (v->start < lb->start) lb->start = v->start;
    if (v->end > lb->end) lb->end = v->end;
    ba->slices[i].buffer = b;
    ba->slices[i].allocation = -1;
  }
  kiln_free(buf_of_root);
  kiln_free(count);
  for (int b = 0; b < nb; b++) {
    kiln_logical_buffer_t *lb = &ba->buffers[b];
    qsort(lb->values, (size_t)lb->num_values, sizeof(kiln_hlo_value_t *), cmp_value_start);
    const kiln_hlo_value_t *fixed = NULL;
    for (int i = 0; i < lb->num_values; i++) {
      const kiln_hlo_value_t *v = lb->values[i];
      if (v->kind == KILN_VALUE_CONSTANT || v->kind == KILN_VALUE_PARAMETER) {
        if (fixed) return precondition("two parameters or constants share a buffer", fixed, v);
        fixed = v;
      }
    }
    if (fixed && fixed->kind == KILN_VALUE_CONSTANT && lb->num_values > 1)
      return precondition("a constant shares a buffer (it would be written)", fixed,
                          lb->values[lb->values[0] == fixed ? 1 : 0]);
    /* Sweep in start order, remembering the value that lives longest so far. */
    const kiln_hlo_value_t *longest = NULL;
    for (int i = 0; i < lb->num_values; i++) {
      const kiln_hlo_value_t *v = lb->values[i];
      if (longest && v->start <= longest->end) {
        bool ok = v->start == longest->end && kiln_dataflow_may_reuse(df, longest, v);
        /* Every value ending exactly there must be overwritable too. */
        for (int j = 0; j < i && ok; j++)
          if (lb->values[j]->end >= v->start && lb->values[j] != longest)
            ok = lb->values[j]->end == v->start && kiln_dataflow_may_reuse(df, lb->values[j], v);
        if (!ok) return precondition("values share a buffer but are live at the same time", longest, v);
      }
      if (!longest || v->end > longest->end) longest = v;
    }
  }
  return NULL;
}

/* ---- allocations ---- */

static int add_allocation(kiln_buffer_assignment_t *ba, kiln_allocation_kind_t kind, int64_t size) {
  int i = ba->num_allocations++;
  ba->allocations = kiln_realloc(ba->allocations, sizeof(kiln_buffer_allocation_t) * (size_t)ba->num_allocations);
  kiln_buffer_allocation_t *a = &ba->allocations[i];
  memset(a, 0, sizeof *a);
  a->index = i;
  a->kind = kind;
  a->size = size;
  a->parameter_number = -1;
  a->output_leaf = -1;
  return i;
}

static int output_leaf_of(const kiln_buffer_assignment_t *ba, const kiln_logical_buffer_t *lb) {
  kiln_dataflow_instr_t *rd = kiln_dataflow_instr(ba->df, ba->module->entry->root);
  for (int l = 0; rd && l < rd->num_leaves; l++)
    for (int i = 0; i < lb->num_values; i++)
      if (rd->leaves[l] == lb->values[i]) return l;
  return -1;
}

static bool buffer_live_out(const kiln_logical_buffer_t *lb) {
  for (int i = 0; i < lb->num_values; i++)
    if (lb->values[i]->live_out) return true;
  return false;
}

static const kiln_hlo_value_t *buffer_fixed(const kiln_logical_buffer_t *lb, kiln_value_kind_t kind) {
  for (int i = 0; i < lb->num_values; i++)
    if (lb->values[i]->kind == kind) return lb->values[i];
  return NULL;
}

/* ---- heap simulation over temp buffers ---- */

typedef struct heap_item {
  int64_t start, end, size; /* size aligned */
  int64_t offset;
  int first_buffer;         /* chain of buffers sharing the slice, linked by next */
  int rank;                 /* position in start order (heap_best_fit_size's index) */
} heap_item_t;

typedef struct chunk {
  int64_t offset, size;
} chunk_t;
typedef KILN_VEC(chunk_t) chunk_vec_t;

static int cmp_item_start(const void *pa, const void *pb) {
  const heap_item_t *a = *(heap_item_t *const *)pa, *b = *(heap_item_t *const *)pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  return a->first_buffer - b->first_buffer;
}

static int cmp_item_size(const void *pa, const void *pb) {
  const heap_item_t *a = *(heap_item_t *const *)pa, *b = *(heap_item_t *const *)pb;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->first_buffer - b->first_buffer;
}

/* Greedy in time order: free what died before, then take the smallest free chunk that
 * fits (or grow the heap). Offsets go to out[i]; returns the heap size. */
static int64_t heap_best_fit_time(heap_item_t **items, int n, int64_t *out) {
  heap_item_t **order = kiln_malloc(sizeof *order * (size_t)(n + 1));
  memcpy(order, items, sizeof *order * (size_t)n);
  qsort(order, (size_t)n, sizeof *order, cmp_item_start);
  KILN_VEC(chunk_t) free_list = {0}; /* sorted by offset, coalesced */
  KILN_VEC(int) live = {0};          /* indices into order */
  int64_t *off = kiln_malloc(sizeof(int64_t) * (size_t)(n + 1));
  int64_t top = 0;
  for (int k = 0; k < n; k++) {
    heap_item_t *it = order[k];
    /* Release items that ended before this one starts. */
    for (size_t j = 0; j < live.len;) {
      heap_item_t *d = order[live.data[j]];
      if (d->end < it->start) {
        chunk_t c = {off[live.data[j]], d->size};
        size_t pos = 0;
        while (pos < free_list.len && free_list.data[pos].offset < c.offset) pos++;
        kiln_vec_push(&free_list, c);
        memmove(&free_list.data[pos + 1], &free_list.data[pos], (free_list.len - 1 - pos) * sizeof(chunk_t));
        free_list.data[pos] = c;
        if (pos + 1 < free_list.len && free_list.data[pos].offset + free_list.data[pos].size == free_list.data[pos + 1].offset) {
          free_list.data[pos].size += free_list.data[pos + 1].size;
          memmove(&free_list.data[pos + 1], &free_list.data[pos + 2], (free_list.len - pos - 2) * sizeof(chunk_t));
          free_list.len--;
        }
        if (pos > 0 && free_list.data[pos - 1].offset + free_list.data[pos - 1].size == free_list.data[pos].offset) {
          free_list.data[pos - 1].size += free_list.data[pos].size;
          memmove(&free_list.data[pos], &free_list.data[pos + 1], (free_list.len - pos - 1) * sizeof(chunk_t));
          free_list.len--;
        }
        live.data[j] = kiln_vec_last(&live);
        live.len--;
      } else {
        j++;
      }
    }
    size_t best = SIZE_MAX;
    for (size_t c = 0; c < free_list.len; c++)
      if (free_list.data[c].size >= it->size &&
          (best == SIZE_MAX || free_list.data[c].size < free_list.data[best].size))
        best = c;
    if (best != SIZE_MAX) {
      off[k] = free_list.data[best].offset;
      free_list.data[best].offset += it->size;
      free_list.data[best].size -= it->size;
      if (!free_list.data[best].size) {
        memmove(&free_list.data[best], &free_list.data[best + 1], (free_list.len - best - 1) * sizeof(chunk_t));
        free_list.len--;
      }
    } else if (free_list.len && free_list.data[free_list.len - 1].offset + free_list.data[free_list.len - 1].size == top) {
      /* Extend the last free chunk at the top of the heap. */
      chunk_t *c = &free_list.data[free_list.len - 1];
      off[k] = c->offset;
      top = c->offset + it->size;
      free_list.len--;
    } else {
      off[k] = top;
      top += it->size;
    }
    kiln_vec_push(&live, k);
  }
  for (int k = 0; k < n; k++) order[k]->offset = off[k];
  for (int i = 0; i < n; i++) out[i] = items[i]->offset;
  kiln_free(off);
  kiln_free(order);
  kiln_vec_free(&free_list);
  kiln_vec_free(&live);
  return top;
}

/* Placed items overlapping a time range, found without scanning every placed item: the
 * items sorted by start, and over them a tree holding each range's latest end among placed
 * items (INT64_MIN where none is placed). A query walks only into ranges that hold an item
 * starting no later than the range's end and ending no earlier than its start, so it costs
 * O((1 + reported) log n). */
typedef struct placed_index {
  int leaves;             /* a power of two >= n */
  int64_t *max_end;       /* 2 * leaves nodes; node 1 is the root */
  heap_item_t **by_start; /* n items, sorted by cmp_item_start */
  int n;
} placed_index_t;

static void placed_index_init(placed_index_t *t, heap_item_t **items, int n) {
  t->n = n;
  t->leaves = 1;
  while (t->leaves < n) t->leaves *= 2;
  t->max_end = kiln_malloc(sizeof(int64_t) * 2 * (size_t)t->leaves);
  for (int i = 0; i < 2 * t->leaves; i++) t->max_end[i] = INT64_MIN;
  t->by_start = kiln_malloc(sizeof(heap_item_t *) * (size_t)(n + 1));
  memcpy(t->by_start, items, sizeof(heap_item_t *) * (size_t)n);
  qsort(t->by_start, (size_t)n, sizeof(heap_item_t *), cmp_item_start);
  for (int i = 0; i < n; i++) t->by_start[i]->rank = i;
}

static void placed_index_free(placed_index_t *t) {
  kiln_free(t->max_end);
  kiln_free(t->by_start);
}

static void placed_index_place(placed_index_t *t, const heap_item_t *it) {
  int node = t->leaves + it->rank;
  t->max_end[node] = it->end;
  for (node /= 2; node >= 1; node /= 2) {
    int64_t l = t->max_end[2 * node], r = t->max_end[2 * node + 1];
    t->max_end[node] = l > r ? l : r;
  }
}

/* Pushes the chunk of every placed item in positions [lo, hi) of the node's range that
 * starts before position `limit` and ends at or after `start`. */
static void placed_index_collect(const placed_index_t *t, int node, int lo, int hi, int limit,
                                 int64_t start, chunk_vec_t *busy) {
  if (lo >= limit || t->max_end[node] < start) return;
  if (hi - lo == 1) {
    const heap_item_t *p = t->by_start[lo];
    chunk_t c = {p->offset, p->size};
    kiln_vec_push(busy, c);
    return;
  }
  int mid = lo + (hi - lo) / 2;
  placed_index_collect(t, 2 * node, lo, mid, limit, start, busy);
  placed_index_collect(t, 2 * node + 1, mid, hi, limit, start, busy);
}

static int cmp_chunk_offset(const void *pa, const void *pb) {
  const chunk_t *a = pa, *b = pb;
  if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
  return (a->size > b->size) - (a->size < b->size);
}

/* Global decreasing-size best fit: place each item (largest first) in the smallest gap
 * left by already placed items that overlap it in time, or on top of them. The placed
 * items overlapping it come from a placed_index, so the whole costs O(n log n) plus the
 * number of overlapping pairs, not O(n^2). */
static int64_t heap_best_fit_size(heap_item_t **items, int n, int64_t *out) {
  heap_item_t **order = kiln_malloc(sizeof *order * (size_t)(n + 1));
  memcpy(order, items, sizeof *order * (size_t)n);
  qsort(order, (size_t)n, sizeof *order, cmp_item_size);
  placed_index_t index;
  placed_index_init(&index, items, n);
  chunk_vec_t busy = {0};
  int64_t top = 0;
  for (int k = 0; k < n; k++) {
    heap_item_t *it = order[k];
    /* Items starting no later than it ends: a prefix of by_start. */
    int lo = 0, hi = n;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      if (index.by_start[mid]->start <= it->end)
        lo = mid + 1;
      else
        hi = mid;
    }
    kiln_vec_clear(&busy);
    placed_index_collect(&index, 1, 0, index.leaves, lo, it->start, &busy);
    /* Ties in offset need no order: sizes are positive, so after the first of them the
     * cursor is past the offset and the others' gaps are negative. */
    if (busy.len > 16) {
      qsort(busy.data, busy.len, sizeof(chunk_t), cmp_chunk_offset);
    } else {
      for (size_t i = 1; i < busy.len; i++) {
        chunk_t c = busy.data[i];
        size_t j = i;
        for (; j > 0 && busy.data[j - 1].offset > c.offset; j--) busy.data[j] = busy.data[j - 1];
        busy.data[j] = c;
      }
    }
    int64_t best_off = -1, best_gap = INT64_MAX, cursor = 0;
    for (size_t b = 0; b < busy.len; b++) {
      int64_t gap = busy.data[b].offset - cursor;
      if (gap >= it->size && gap < best_gap) best_gap = gap, best_off = cursor;
      int64_t e = busy.data[b].offset + busy.data[b].size;
      if (e > cursor) cursor = e;
    }
    if (best_off < 0) best_off = cursor;
    it->offset = best_off;
    if (best_off + it->size > top) top = best_off + it->size;
    placed_index_place(&index, it);
  }
  for (int i = 0; i < n; i++) out[i] = items[i]->offset;
  kiln_vec_free(&busy);
  placed_index_free(&index);
  kiln_free(order);
  return top;
}

static int cmp_event(const void *pa, const void *pb) {
  const int64_t *a = pa, *b = pb;
  if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
  return a[1] > b[1] ? -1 : (a[1] < b[1]); /* allocations (+) before frees (-) at one time */
}

static int64_t live_lower_bound(heap_item_t *items, int n) {
  int64_t *ev = kiln_malloc(sizeof(int64_t) * 2 * (size_t)(2 * n + 1));
  for (int i = 0; i < n; i++) {
    ev[4 * i] = items[i].start, ev[4 * i + 1] = items[i].size;
    ev[4 * i + 2] = items[i].end + 1, ev[4 * i + 3] = -items[i].size;
  }
  qsort(ev, (size_t)(2 * n), 2 * sizeof(int64_t), cmp_event);
  /* Frees at time t happen before allocations at t: re-sort ties that way. */
  int64_t cur = 0, peak = 0;
  for (int i = 0; i < 2 * n;) {
    int64_t t = ev[2 * i];
    int j = i;
    for (; j < 2 * n && ev[2 * j] == t; j++)
      if (ev[2 * j + 1] < 0) cur += ev[2 * j + 1];
    for (int k = i; k < j; k++)
      if (ev[2 * k + 1] > 0) cur += ev[2 * k + 1];
    if (cur > peak) peak = cur;
    i = j;
  }
  kiln_free(ev);
  return peak;
}

static void assign_temps(kiln_buffer_assignment_t *ba, const int *temps, int nt, int *next,
                         bool reuse) {
  kiln_dataflow_t *df = ba->df;
  int64_t align = ba->alignment;
  /* In-place reuse: chain a single-value buffer onto an operand's single-value buffer that
   * dies at its definition. */
  bool *is_temp = kiln_calloc((size_t)ba->num_buffers + 1, sizeof(bool));
  bool *taken = kiln_calloc((size_t)ba->num_buffers + 1, sizeof(bool));
  int *head = kiln_malloc(sizeof(int) * (size_t)(ba->num_buffers + 1));
  for (int i = 0; i < nt; i++) is_temp[temps[i]] = true;
  for (int b = 0; b < ba->num_buffers; b++) head[b] = b, next[b] = -1;
  int reuses = 0;
  for (int i = 0; i < nt && reuse; i++) {
    kiln_logical_buffer_t *lb = &ba->buffers[temps[i]];
    if (lb->num_values != 1 || lb->values[0]->kind != KILN_VALUE_OP) continue;
    const kiln_hlo_value_t *v = lb->values[0];
    const kiln_hlo_instruction_t *t = v->def;
    for (int k = 0; k < t->num_operands; k++) {
      const kiln_hlo_value_t *a = kiln_dataflow_value_at(df, t->operands[k], 0);
      if (!a || kiln_shape_num_leaves(t->operands[k]->shape) != 1) continue;
      int ab = ba->slices[a->id].buffer;
      kiln_logical_buffer_t *la = &ba->buffers[ab];
      if (!is_temp[ab] || taken[ab] || la->num_values != 1 || ab == lb->index) continue;
      if (align_up(la->size, align) != align_up(lb->size, align)) continue;
      if (!kiln_dataflow_may_reuse(df, a, v)) continue;
      taken[ab] = true;
      next[ab] = lb->index;
      head[lb->index] = head[ab];
      lb->reuses = ab;
      reuses++;
      break;
    }
  }
  ba->stats.num_inplace_reuses = reuses;
  /* Items: chains. */
  heap_item_t *items = kiln_calloc((size_t)nt + 1, sizeof(heap_item_t));
  heap_item_t **ptrs = kiln_malloc(sizeof(heap_item_t *) * (size_t)(nt + 1));
  int ni = 0;
  int64_t sum = 0;
  for (int i = 0; i < nt; i++) {
    int b = temps[i];
    sum += align_up(ba->buffers[b].size, align);
    if (head[b] != b) continue;
    heap_item_t *it = &items[ni];
    it->first_buffer = b;
    it->start = INT64_MAX;
    it->end = INT64_MIN;
    for (int x = b; x >= 0; x = next[x]) {
      kiln_logical_buffer_t *lx = &ba->buffers[x];
      if (lx->start < it->start) it->start = lx->start;
      if (lx->end > it->end) it->end = lx->end;
      if (align_up(lx->size, align) > it->size) it->size = align_up(lx->size, align);
    }
    if (it->size == 0) continue; /* empty arrays: offset 0, no space */
    ptrs[ni++] = it;
  }
  ba->stats.temp_sum = sum;
  ba->stats.temp_lower_bound = live_lower_bound(items, ni);
  int64_t *off_a = kiln_malloc(sizeof(int64_t) * (size_t)(ni + 1));
  int64_t *off_b = kiln_malloc(sizeof(int64_t) * (size_t)(ni + 1));
  int64_t size_a = heap_best_fit_time(ptrs, ni, off_a);
  int64_t size_b = ni <= 20000 ? heap_best_fit_size(ptrs, ni, off_b) : INT64_MAX;
  ba->stats.heap_best_fit_time = size_a;
  ba->stats.heap_best_fit_size = size_b == INT64_MAX ? -1 : size_b;
  const int64_t *off = size_b < size_a ? off_b : off_a;
  ba->stats.heap_algorithm = size_b < size_a ? "decreasing-size best-fit" : "time-order best-fit";
  int64_t heap = size_b < size_a ? size_b : size_a;
  int alloc = -1;
  if (nt > 0) {
    alloc = add_allocation(ba, KILN_ALLOCATION_TEMP, heap);
  }
  for (int i = 0; i < ni; i++)
    for (int x = ptrs[i]->first_buffer; x >= 0; x = next[x]) ba->buffers[x].offset = off[i];
  for (int i = 0; i < nt; i++) {
    ba->buffers[temps[i]].allocation = alloc;
    if (ba->buffers[temps[i]].size == 0) ba->buffers[temps[i]].offset = 0;
  }
  ba->stats.temp_bytes = heap;
  kiln_free(off_a);
  kiln_free(off_b);
  kiln_free(items);
  kiln_free(ptrs);
  kiln_free(is_temp);
  kiln_free(taken);
  kiln_free(head);
}

kiln_status kiln_buffer_assignment_run(const kiln_hlo_module_t *m,
                                       const kiln_buffer_assignment_options_t *opts,
                                       kiln_buffer_assignment_t **out) {
  *out = NULL;
  kiln_buffer_assignment_t *ba = kiln_calloc(1, sizeof *ba);
  ba->module = m;
  ba->alignment = opts && opts->alignment > 0 ? opts->alignment : 64;
  kiln_status s = kiln_dataflow_run(m, &ba->df);
  if (!s) s = kiln_dataflow_liveness(ba->df);
  if (!s) {
    kiln_dataflow_alias(ba->df);
    s = build_buffers(ba);
  }
  if (s) {
    kiln_buffer_assignment_free(ba);
    return kiln_status_annotate(s, "buffer assignment of %s", m->name);
  }
  /* Parameters (by number, leaf), then constants, then outputs, then temps. */
  int nb = ba->num_buffers;
  const kiln_hlo_computation_t *e = m->entry;
  for (int p = 0; p < e->num_parameters; p++) {
    const kiln_hlo_instruction_t *pi = e->parameters[p];
    kiln_dataflow_instr_t *pd = pi ? kiln_dataflow_instr(ba->df, pi) : NULL;
    for (int l = 0; pd && l < pd->num_leaves; l++) {
      kiln_hlo_value_t *v = pd->leaves[l];
      if (!v) continue;
      kiln_logical_buffer_t *lb = &ba->buffers[ba->slices[v->id].buffer];
      int a = add_allocation(ba, KILN_ALLOCATION_PARAMETER, lb->size);
      ba->allocations[a].parameter_number = p;
      ba->allocations[a].parameter_leaf = l;
      ba->allocations[a].output_leaf = buffer_live_out(lb) ? output_leaf_of(ba, lb) : -1;
      ba->allocations[a].read_only = ba->allocations[a].output_leaf < 0 && lb->num_values == 1;
      lb->allocation = a;
      ba->stats.parameter_bytes += lb->size;
    }
  }
  for (int b = 0; b < nb; b++) {
    kiln_logical_buffer_t *lb = &ba->buffers[b];
    if (lb->allocation >= 0) continue;
    const kiln_hlo_value_t *c = buffer_fixed(lb, KILN_VALUE_CONSTANT);
    if (!c) continue;
    int a = add_allocation(ba, KILN_ALLOCATION_CONSTANT, lb->size);
    ba->allocations[a].read_only = true;
    ba->allocations[a].constant = c->def;
    ba->allocations[a].output_leaf = buffer_live_out(lb) ? output_leaf_of(ba, lb) : -1;
    lb->allocation = a;
    ba->stats.constant_bytes += lb->size;
  }
  kiln_dataflow_instr_t *rd = kiln_dataflow_instr(ba->df, e->root);
  for (int l = 0; rd && l < rd->num_leaves; l++) {
    kiln_hlo_value_t *v = rd->leaves[l];
    if (!v) continue;
    kiln_logical_buffer_t *lb = &ba->buffers[ba->slices[v->id].buffer];
    if (lb->allocation >= 0) continue;
    int a = add_allocation(ba, KILN_ALLOCATION_OUTPUT, lb->size);
    ba->allocations[a].output_leaf = l;
    lb->allocation = a;
    ba->stats.output_bytes += lb->size;
  }
  int *temps = kiln_malloc(sizeof(int) * (size_t)(nb + 1));
  int *next = kiln_malloc(sizeof(int) * (size_t)(nb + 1));
  int nt = 0;
  for (int b = 0; b < nb; b++)
    if (ba->buffers[b].allocation < 0) temps[nt++] = b;
  assign_temps(ba, temps, nt, next, !(opts && opts->no_inplace_reuse));
  kiln_free(temps);
  kiln_free(next);
  for (int i = 0; i < ba->num_slices; i++) {
    kiln_hlo_value_t *v = ba->df->values.data[i];
    kiln_logical_buffer_t *lb = &ba->buffers[ba->slices[i].buffer];
    ba->slices[i].allocation = lb->allocation;
    ba->slices[i].offset = lb->offset;
    ba->slices[i].size = v->size;
  }
  for (int a = 0; a < ba->num_allocations; a++) ba->stats.total_bytes += ba->allocations[a].size;
  ba->stats.num_values = ba->num_slices;
  ba->stats.num_buffers = nb;
  ba->stats.num_temp_buffers = nt;
  if (!ba->stats.heap_algorithm) ba->stats.heap_algorithm = "none";
  *out = ba;
  return NULL;
}

void kiln_buffer_assignment_free(kiln_buffer_assignment_t *ba) {
  if (!ba) return;
  kiln_free(ba->allocations);
  kiln_dataflow_free(ba->df);
  kiln_free(ba);
}

bool kiln_buffer_assignment_slice_at(const kiln_buffer_assignment_t *ba,
                                     const kiln_hlo_instruction_t *instr, int leaf,
                                     kiln_buffer_slice_t *out) {
  kiln_hlo_value_t *v = kiln_dataflow_value_at(ba->df, instr, leaf);
  if (!v) return false;
  *out = ba->slices[v->id];
  return true;
}

/* ---- printing ---- */

void kiln_buffer_assignment_print_stats(kiln_strbuf_t *b, const kiln_buffer_assignment_t *ba) {
  const kiln_buffer_assignment_stats_t *s = &ba->stats;
  kiln_strbuf_printf(b,
                     "total %lld bytes in %d allocations: parameters %lld, constants %lld, outputs "
                     "%lld, temp %lld (sum of temp buffers %lld, live lower bound %lld; %s; "
                     "%d in-place reuses); %d values in %d buffers\n",
                     (long long)s->total_bytes, ba->num_allocations, (long long)s->parameter_bytes,
                     (long long)s->constant_bytes, (long long)s->output_bytes, (long long)s->temp_bytes,
                     (long long)s->temp_sum, (long long)s->temp_lower_bound, s->heap_algorithm,
                     s->num_inplace_reuses, s->num_values, s->num_buffers);
}

void kiln_buffer_assignment_print(kiln_strbuf_t *b, const kiln_buffer_assignment_t *ba) {
  kiln_strbuf_printf(b, "BufferAssignment for %s (alignment %lld, %lld positions)\n", ba->module->name,
                     (long long)ba->alignment, (long long)ba->df->num_positions);
  for (int a = 0; a < ba->num_allocations; a++) {
    const kiln_buffer_allocation_t *al = &ba->allocations[a];
    kiln_strbuf_printf(b, "allocation %d: size %lld, %s", a, (long long)al->size,
                       kiln_allocation_kind_name(al->kind));
    if (al->kind == KILN_ALLOCATION_PARAMETER) {
      kiln_strbuf_printf(b, " %lld", (long long)al->parameter_number);
      const kiln_hlo_instruction_t *p = ba->module->entry->parameters[al->parameter_number];
      kiln_shape_leaf(p->shape, al->parameter_leaf, b);
    }
    if (al->kind == KILN_ALLOCATION_CONSTANT) kiln_strbuf_printf(b, " %s", al->constant->name);
    if (al->output_leaf >= 0) {
      kiln_strbuf_append(b, ", output ");
      kiln_shape_leaf(ba->module->entry->root->shape, al->output_leaf, b);
    }
    if (al->read_only) kiln_strbuf_append(b, ", read-only");
    kiln_strbuf_append(b, ":\n");
    /* Buffers of this allocation by offset. */
    KILN_VEC(const kiln_logical_buffer_t *) list = {0};
    for (int i = 0; i < ba->num_buffers; i++)
      if (ba->buffers[i].allocation == a) kiln_vec_push(&list, &ba->buffers[i]);
    for (size_t i = 1; i < list.len; i++)
      for (size_t j = i; j > 0 && (list.data[j - 1]->offset > list.data[j]->offset ||
                                   (list.data[j - 1]->offset == list.data[j]->offset &&
                                    list.data[j - 1]->start > list.data[j]->start));
           j--) {
        const kiln_logical_buffer_t *t = list.data[j];
        list.data[j] = list.data[j - 1];
        list.data[j - 1] = t;
      }
    for (size_t i = 0; i < list.len; i++) {
      const kiln_logical_buffer_t *lb = list.data[i];
      kiln_strbuf_printf(b, "  buffer %d: offset %lld size %lld live [%lld, %lld]", lb->index,
                         (long long)lb->offset, (long long)lb->size, (long long)lb->start,
                         (long long)lb->end);
      if (lb->reuses >= 0) kiln_strbuf_printf(b, " (in place of buffer %d)", lb->reuses);
      kiln_strbuf_append(b, "\n");
      for (int k = 0; k < lb->num_values; k++) {
        const kiln_hlo_value_t *v = lb->values[k];
        kiln_strbuf_append(b, "    ");
        value_name(b, v);
        kiln_strbuf_append(b, " ");
        kiln_shape_print(b, v->shape, true);
        kiln_strbuf_printf(b, " size %lld live [%lld, %lld]%s%s\n", (long long)v->size,
                           (long long)v->start, (long long)v->end,
                           v->kind == KILN_VALUE_PHI ? " phi" : "", v->live_out ? " live-out" : "");
      }
    }
    kiln_vec_free(&list);
  }
  kiln_buffer_assignment_print_stats(b, ba);
}

/* ---- the pass ---- */

static kiln_status dump(const char *dir, const kiln_buffer_assignment_t *ba) {
  mkdir(dir, 0755);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.buffer-assignment.txt", dir, ba->module->name);
  FILE *f = fopen(path, "w");
  if (!f) return kiln_status_make(KILN_UNAVAILABLE, "cannot write %s: %s", path, strerror(errno));
  kiln_strbuf_t b = {0};
  kiln_buffer_assignment_print(&b, ba);
  fwrite(kiln_strbuf_cstr(&b), 1, b.len, f);
  kiln_strbuf_free(&b);
  fclose(f);
  return NULL;
}

kiln_status kiln_pass_buffer_assignment(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                        bool *changed) {
  kiln_buffer_assignment_t *ba = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_assignment_run(m, NULL, &ba));
  kiln_status s = kiln_buffer_assignment_check(ba);
  const char *dir = opts ? opts->dump_dir : NULL;
  if (!s && dir && *dir) s = dump(dir, ba);
  kiln_buffer_assignment_free(ba);
  return s;
}
