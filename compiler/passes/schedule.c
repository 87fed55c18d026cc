/* Memory-minimizing scheduling; see schedule.h. */
#include "compiler/passes/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "compiler/passes/dataflow.h"
#include "compiler/passes/pass.h"

const char *kiln_scheduler_name(kiln_scheduler_t s) {
  switch (s) {
    case KILN_SCHEDULER_BEST: return "best";
    case KILN_SCHEDULER_CURRENT: return "current";
    case KILN_SCHEDULER_LIST: return "list";
    case KILN_SCHEDULER_DFS: return "dfs";
    default: return "?";
  }
}

typedef KILN_VEC(int) int_vec_t;

/* The memory model of one sequential computation. Instructions are numbered by their
 * position in the instruction list when the model was built; buffers locally. */
typedef struct comp_model {
  kiln_hlo_computation_t *c;
  int n;
  kiln_hlo_instruction_t **instrs;
  kiln_ptrmap_t index;       /* instr -> (void *)(idx + 1) */
  int_vec_t *defs;           /* per instruction: local buffers it allocates */
  int_vec_t *touches;        /* per instruction: local buffers it uses or defines (distinct) */
  int_vec_t *preds;          /* per instruction: distinct operands + control predecessors */
  int_vec_t *succs;
  int64_t *extra;            /* peak of called computations while it runs */
  int nb;
  int64_t *bsize;
  bool *pinned;
  int *ntouch;
  int64_t base;              /* parameters and constants: present throughout */
  int64_t peak;              /* of the chosen order */
} comp_model_t;

static int idx_of(const comp_model_t *cm, const kiln_hlo_instruction_t *in) {
  return (int)(intptr_t)kiln_ptrmap_get(&cm->index, in) - 1;
}

static void push_distinct(int_vec_t *v, int x) {
  for (size_t i = 0; i < v->len; i++)
    if (v->data[i] == x) return;
  kiln_vec_push(v, x);
}

static void model_free(comp_model_t *cm) {
  for (int i = 0; i < cm->n; i++) {
    kiln_vec_free(&cm->defs[i]);
    kiln_vec_free(&cm->touches[i]);
    kiln_vec_free(&cm->preds[i]);
    kiln_vec_free(&cm->succs[i]);
  }
  kiln_free(cm->defs);
  kiln_free(cm->touches);
  kiln_free(cm->preds);
  kiln_free(cm->succs);
  kiln_free(cm->extra);
  kiln_free(cm->instrs);
  kiln_free(cm->bsize);
  kiln_free(cm->pinned);
  kiln_free(cm->ntouch);
  kiln_ptrmap_free(&cm->index);
}

/* Everything the models of all sequential computations need, built in one sweep. */
typedef struct module_model {
  kiln_dataflow_t *df;
  int ncomps;
  comp_model_t *comps;   /* parallel to df->comps */
  kiln_ptrmap_t comp_idx; /* computation -> (void *)(idx + 1) */
} module_model_t;

static int comp_depth(kiln_dataflow_t *df, const kiln_hlo_computation_t *c) {
  int d = 0;
  for (kiln_dataflow_comp_t *dc = kiln_dataflow_comp(df, c); dc && dc->caller;
       dc = kiln_dataflow_comp(df, dc->caller->parent))
    d++;
  return d;
}

static void module_model_free(module_model_t *mm) {
  for (int i = 0; i < mm->ncomps; i++) model_free(&mm->comps[i]);
  kiln_free(mm->comps);
  kiln_ptrmap_free(&mm->comp_idx);
  kiln_dataflow_free(mm->df);
}

static kiln_status module_model_build(const kiln_hlo_module_t *m, module_model_t *mm) {
  memset(mm, 0, sizeof *mm);
  KILN_RETURN_IF_ERROR(kiln_dataflow_run(m, &mm->df), "scheduling");
  kiln_dataflow_t *df = mm->df;
  kiln_dataflow_alias(df);
  mm->ncomps = (int)df->comps.len;
  mm->comps = kiln_calloc((size_t)mm->ncomps + 1, sizeof(comp_model_t));
  kiln_ptrmap_init(&mm->comp_idx);
  for (int ci = 0; ci < mm->ncomps; ci++) {
    comp_model_t *cm = &mm->comps[ci];
    cm->c = df->comps.data[ci]->comp;
    cm->n = (int)cm->c->instructions.len;
    cm->instrs = kiln_malloc(sizeof *cm->instrs * (size_t)(cm->n + 1));
    memcpy(cm->instrs, cm->c->instructions.data, sizeof *cm->instrs * (size_t)cm->n);
    kiln_ptrmap_init(&cm->index);
    for (int i = 0; i < cm->n; i++) kiln_ptrmap_put(&cm->index, cm->instrs[i], (void *)(intptr_t)(i + 1));
    cm->defs = kiln_calloc((size_t)cm->n + 1, sizeof(int_vec_t));
    cm->touches = kiln_calloc((size_t)cm->n + 1, sizeof(int_vec_t));
    cm->preds = kiln_calloc((size_t)cm->n + 1, sizeof(int_vec_t));
    cm->succs = kiln_calloc((size_t)cm->n + 1, sizeof(int_vec_t));
    cm->extra = kiln_calloc((size_t)cm->n + 1, sizeof(int64_t));
    for (int i = 0; i < cm->n; i++) {
      kiln_hlo_instruction_t *in = cm->instrs[i];
      int total = in->num_operands + in->num_control_predecessors;
      for (int k = 0; k < total; k++) {
        const kiln_hlo_instruction_t *p =
            k < in->num_operands ? in->operands[k] : in->control_predecessors[k - in->num_operands];
        int j = idx_of(cm, p);
        if (j < 0 || j == i) continue;
        size_t before = cm->preds[i].len;
        push_distinct(&cm->preds[i], j);
        if (cm->preds[i].len != before) kiln_vec_push(&cm->succs[j], i);
      }
    }
    kiln_ptrmap_put(&mm->comp_idx, cm->c, (void *)(intptr_t)(ci + 1));
  }
  /* Owner computation of each buffer: the shallowest one defining a value of it. */
  size_t nv = df->values.len;
  int *owner = kiln_malloc(sizeof(int) * (nv + 1));
  int *owner_depth = kiln_malloc(sizeof(int) * (nv + 1));
  int *local = kiln_malloc(sizeof(int) * (nv + 1));
  for (size_t i = 0; i < nv; i++) owner[i] = -1, owner_depth[i] = 1 << 30, local[i] = -1;
  for (size_t i = 0; i < nv; i++) {
    kiln_hlo_value_t *v = df->values.data[i];
    int b = kiln_dataflow_buffer_of(df, v->id);
    int d = comp_depth(df, v->def->parent);
    if (d < owner_depth[b]) {
      owner_depth[b] = d;
      owner[b] = (int)(intptr_t)kiln_ptrmap_get(&mm->comp_idx, v->def->parent) - 1;
    }
  }
  for (size_t i = 0; i < nv; i++) {
    kiln_hlo_value_t *v = df->values.data[i];
    int b = kiln_dataflow_buffer_of(df, v->id);
    if (owner[b] < 0) continue;
    comp_model_t *cm = &mm->comps[owner[b]];
    if (local[b] < 0) {
      local[b] = cm->nb++;
      cm->bsize = kiln_realloc(cm->bsize, sizeof(int64_t) * (size_t)cm->nb);
      cm->pinned = kiln_realloc(cm->pinned, sizeof(bool) * (size_t)cm->nb);
      cm->bsize[local[b]] = 0;
      cm->pinned[local[b]] = false;
    }
    int lb = local[b];
    bool fixed = v->kind == KILN_VALUE_PARAMETER || v->kind == KILN_VALUE_CONSTANT;
    if (v->size > cm->bsize[lb]) cm->bsize[lb] = v->size;
    if (fixed) cm->pinned[lb] = true;
    for (int r = 0; r < v->num_root_comps; r++)
      if (v->root_comps[r] == cm->c) cm->pinned[lb] = true;
    if (v->live_out) cm->pinned[lb] = true;
    kiln_hlo_instruction_t *d = kiln_dataflow_ancestor_in(df, v->def, cm->c);
    if (d) {
      int di = idx_of(cm, d);
      if (d == v->def) push_distinct(&cm->defs[di], lb);
      push_distinct(&cm->touches[di], lb);
    }
    for (int u = 0; u < v->num_uses; u++) {
      kiln_hlo_instruction_t *a = kiln_dataflow_ancestor_in(df, v->uses[u].instr, cm->c);
      if (a) push_distinct(&cm->touches[idx_of(cm, a)], lb);
    }
  }
  /* Parameters and constants are present throughout: count them once as a base. */
  for (int ci = 0; ci < mm->ncomps; ci++) {
    comp_model_t *cm = &mm->comps[ci];
    cm->ntouch = kiln_calloc((size_t)cm->nb + 1, sizeof(int));
    bool *fixed_seen = kiln_calloc((size_t)cm->nb + 1, sizeof(bool));
    for (int i = 0; i < cm->n; i++) {
      for (size_t k = 0; k < cm->touches[i].len; k++) cm->ntouch[cm->touches[i].data[k]]++;
      kiln_hlo_instruction_t *in = cm->instrs[i];
      if (in->opcode != KILN_OP_PARAMETER && in->opcode != KILN_OP_CONSTANT) continue;
      /* Move fixed buffers out of the dynamic model. */
      for (size_t k = 0; k < cm->defs[i].len; k++) {
        int b = cm->defs[i].data[k];
        if (cm->pinned[b] && !fixed_seen[b]) {
          fixed_seen[b] = true;
          cm->base += cm->bsize[b];
        }
      }
      kiln_vec_clear(&cm->defs[i]);
    }
    /* Buffers of fixed values that were defined: never allocated dynamically. */
    for (int b = 0; b < cm->nb; b++)
      if (fixed_seen[b]) cm->bsize[b] = 0;
    kiln_free(fixed_seen);
  }
  kiln_free(owner);
  kiln_free(owner_depth);
  kiln_free(local);
  return NULL;
}

/* ---- simulation ---- */

static int64_t simulate(const comp_model_t *cm, const int *order) {
  int *rem = kiln_malloc(sizeof(int) * (size_t)(cm->nb + 1));
  bool *alloc = kiln_calloc((size_t)cm->nb + 1, sizeof(bool));
  if (cm->nb) memcpy(rem, cm->ntouch, sizeof(int) * (size_t)cm->nb);
  int64_t cur = cm->base, peak = cm->base;
  for (int k = 0; k < cm->n; k++) {
    int i = order[k];
    for (size_t d = 0; d < cm->defs[i].len; d++) {
      int b = cm->defs[i].data[d];
      if (!alloc[b]) alloc[b] = true, cur += cm->bsize[b];
    }
    if (cur + cm->extra[i] > peak) peak = cur + cm->extra[i];
    for (size_t t = 0; t < cm->touches[i].len; t++) {
      int b = cm->touches[i].data[t];
      if (--rem[b] == 0 && !cm->pinned[b] && alloc[b]) cur -= cm->bsize[b];
    }
  }
  kiln_free(rem);
  kiln_free(alloc);
  return peak;
}

static bool order_valid(const comp_model_t *cm, const int *order) {
  int *pos = kiln_malloc(sizeof(int) * (size_t)(cm->n + 1));
  for (int i = 0; i < cm->n; i++) pos[i] = -1;
  for (int k = 0; k < cm->n; k++) pos[order[k]] = k;
  bool ok = true;
  for (int i = 0; i < cm->n && ok; i++) {
    if (pos[i] < 0) ok = false;
    for (size_t p = 0; p < cm->preds[i].len && ok; p++)
      if (pos[cm->preds[i].data[p]] > pos[i]) ok = false;
  }
  kiln_free(pos);
  return ok;
}

/* The current list order when valid, else post order. */
static void schedule_current(const comp_model_t *cm, int *order) {
  for (int i = 0; i < cm->n; i++) order[i] = i;
  if (order_valid(cm, order)) return;
  size_t n = 0;
  kiln_hlo_instruction_t **po = kiln_hlo_computation_post_order(cm->c, &n);
  for (size_t k = 0; k < n && (int)k < cm->n; k++) order[k] = idx_of(cm, po[k]);
  kiln_free(po);
}

/* The ready instructions of the list scheduler: a binary heap on (priority descending,
 * index ascending), with each instruction's place in it so a changed priority can move. */
typedef struct ready_heap {
  int *heap, len;
  int *pos;      /* per instruction: index in heap, or -1 */
  int64_t *prio; /* per instruction */
} ready_heap_t;

static bool ready_before(const ready_heap_t *h, int a, int b) {
  return h->prio[a] > h->prio[b] || (h->prio[a] == h->prio[b] && a < b);
}

static void ready_swap(ready_heap_t *h, int x, int y) {
  int a = h->heap[x], b = h->heap[y];
  h->heap[x] = b, h->heap[y] = a;
  h->pos[b] = x, h->pos[a] = y;
}

static void ready_sift(ready_heap_t *h, int x) {
  while (x > 0 && ready_before(h, h->heap[x], h->heap[(x - 1) / 2])) {
    ready_swap(h, x, (x - 1) / 2);
    x = (x - 1) / 2;
  }
  for (;;) {
    int l = 2 * x + 1, r = l + 1, best = x;
    if (l < h->len && ready_before(h, h->heap[l], h->heap[best])) best = l;
    if (r < h->len && ready_before(h, h->heap[r], h->heap[best])) best = r;
    if (best == x) return;
    ready_swap(h, x, best);
    x = best;
  }
}

/* Bytes freed minus bytes allocated by running `i` next. */
static int64_t list_priority(const comp_model_t *cm, const bool *alloc, const int *rem, int i) {
  int64_t freed = 0, allocd = 0;
  for (size_t d = 0; d < cm->defs[i].len; d++) {
    int b = cm->defs[i].data[d];
    if (!alloc[b]) allocd += cm->bsize[b];
  }
  for (size_t t = 0; t < cm->touches[i].len; t++) {
    int b = cm->touches[i].data[t];
    if (rem[b] == 1 && !cm->pinned[b]) freed += cm->bsize[b];
  }
  return freed - allocd;
}

/* Re-prices the ready instructions among [from, to). */
static void reprice(const comp_model_t *cm, const bool *alloc, const int *rem, ready_heap_t *h,
                    const int *from, const int *to) {
  for (const int *x = from; x < to; x++) {
    if (h->pos[*x] < 0) continue;
    h->prio[*x] = list_priority(cm, alloc, rem, *x);
    ready_sift(h, h->pos[*x]);
  }
}

/* Per buffer, the instructions whose list (defs or touches) holds it, as offsets into one
 * array: start[b] .. start[b + 1]. */
static void invert_lists(const comp_model_t *cm, const int_vec_t *lists, int **start_out,
                         int **items_out) {
  int *start = kiln_calloc((size_t)cm->nb + 2, sizeof(int));
  for (int i = 0; i < cm->n; i++)
    for (size_t k = 0; k < lists[i].len; k++) start[lists[i].data[k] + 1]++;
  for (int b = 0; b < cm->nb; b++) start[b + 1] += start[b];
  int *fill = kiln_malloc(sizeof(int) * (size_t)(cm->nb + 1));
  if (cm->nb) memcpy(fill, start, sizeof(int) * (size_t)cm->nb);
  int *items = kiln_malloc(sizeof(int) * (size_t)(start[cm->nb] + 1));
  for (int i = 0; i < cm->n; i++)
    for (size_t k = 0; k < lists[i].len; k++) items[fill[lists[i].data[k]]++] = i;
  kiln_free(fill);
  *start_out = start;
  *items_out = items;
}

/* Greedy list scheduling: among ready instructions take the one with the largest
 * bytes-freed minus bytes-allocated; ties go to the earliest in the current order.
 * A priority changes only when a buffer the instruction defines is first allocated or one
 * it touches reaches (or leaves) its last remaining use, so only the ready instructions
 * of such a buffer are re-priced, and the ready set is a heap: O((n + edges) log n), not a
 * scan of every ready instruction per step. */
static void schedule_list(const comp_model_t *cm, int *order) {
  int n = cm->n;
  int *npred = kiln_malloc(sizeof(int) * (size_t)(n + 1));
  int *rem = kiln_malloc(sizeof(int) * (size_t)(cm->nb + 1));
  bool *alloc = kiln_calloc((size_t)cm->nb + 1, sizeof(bool));
  if (cm->nb) memcpy(rem, cm->ntouch, sizeof(int) * (size_t)cm->nb);
  int *def_start, *def_items, *touch_start, *touch_items;
  invert_lists(cm, cm->defs, &def_start, &def_items);
  invert_lists(cm, cm->touches, &touch_start, &touch_items);
  ready_heap_t h = {.heap = kiln_malloc(sizeof(int) * (size_t)(n + 1)),
                    .pos = kiln_malloc(sizeof(int) * (size_t)(n + 1)),
                    .prio = kiln_malloc(sizeof(int64_t) * (size_t)(n + 1))};
  for (int i = 0; i < n; i++) {
    h.pos[i] = -1;
    npred[i] = (int)cm->preds[i].len;
    if (!npred[i]) {
      h.prio[i] = list_priority(cm, alloc, rem, i);
      h.heap[h.len] = i;
      h.pos[i] = h.len++;
      ready_sift(&h, h.len - 1);
    }
  }
  for (int k = 0; k < n; k++) {
    if (!h.len) break; /* a cycle; cannot happen on a verified module */
    int i = h.heap[0];
    ready_swap(&h, 0, h.len - 1);
    h.len--;
    h.pos[i] = -1;
    if (h.len) ready_sift(&h, 0);
    order[k] = i;
    for (size_t d = 0; d < cm->defs[i].len; d++) {
      int b = cm->defs[i].data[d];
      if (alloc[b]) continue;
      alloc[b] = true;
      reprice(cm, alloc, rem, &h, def_items + def_start[b], def_items + def_start[b + 1]);
    }
    for (size_t t = 0; t < cm->touches[i].len; t++) {
      int b = cm->touches[i].data[t];
      if (--rem[b] > 1 || cm->pinned[b]) continue; /* rem[b] == 1 did not change */
      reprice(cm, alloc, rem, &h, touch_items + touch_start[b], touch_items + touch_start[b + 1]);
    }
    for (size_t s = 0; s < cm->succs[i].len; s++) {
      int j = cm->succs[i].data[s];
      if (--npred[j]) continue;
      h.prio[j] = list_priority(cm, alloc, rem, j);
      h.heap[h.len] = j;
      h.pos[j] = h.len++;
      ready_sift(&h, h.len - 1);
    }
  }
  kiln_free(h.heap);
  kiln_free(h.pos);
  kiln_free(h.prio);
  kiln_free(def_start);
  kiln_free(def_items);
  kiln_free(touch_start);
  kiln_free(touch_items);
  kiln_free(npred);
  kiln_free(rem);
  kiln_free(alloc);
}

/* qsort context: thread-local, as compilations run on many threads at once (the plugin). */
static _Thread_local const comp_model_t *g_sort_cm;
static _Thread_local const double *g_sort_cost;
static int cmp_cost_desc(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  double cx = g_sort_cost[x], cy = g_sort_cost[y];
  if (cx != cy) return cx > cy ? -1 : 1;
  return x - y;
}

/* DFS post order from the sinks (the root last), visiting the operands whose subtrees
 * allocate the most first, so big subtrees finish before small results are held. */
static void schedule_dfs(const comp_model_t *cm, int *order) {
  int n = cm->n;
  int *topo = kiln_malloc(sizeof(int) * (size_t)(n + 1));
  schedule_current(cm, topo);
  double *cost = kiln_calloc((size_t)n + 1, sizeof(double));
  for (int k = 0; k < n; k++) {
    int i = topo[k];
    double c = 0;
    for (size_t d = 0; d < cm->defs[i].len; d++) c += (double)cm->bsize[cm->defs[i].data[d]];
    for (size_t p = 0; p < cm->preds[i].len; p++) c += cost[cm->preds[i].data[p]];
    cost[i] = c > 1e30 ? 1e30 : c;
  }
  int_vec_t *kids = kiln_calloc((size_t)n + 1, sizeof(int_vec_t));
  g_sort_cost = cost;
  g_sort_cm = cm;
  for (int i = 0; i < n; i++) {
    for (size_t p = 0; p < cm->preds[i].len; p++) kiln_vec_push(&kids[i], cm->preds[i].data[p]);
    if (kids[i].len > 1) qsort(kids[i].data, kids[i].len, sizeof(int), cmp_cost_desc);
  }
  char *state = kiln_calloc((size_t)n + 1, 1); /* 0 new, 1 open, 2 done */
  int *stack = kiln_malloc(sizeof(int) * (size_t)(n + 1));
  int *next = kiln_calloc((size_t)n + 1, sizeof(int));
  int out = 0;
  int root = idx_of(cm, cm->c->root);
  for (int pass = 0; pass < 2; pass++) {
    for (int s = 0; s < n; s++) {
      int start = topo[s];
      bool sink = cm->succs[start].len == 0;
      if (pass == 0 ? (!sink || start == root) : start != root) continue;
      if (state[start]) continue;
      int sp = 0;
      stack[sp++] = start;
      state[start] = 1;
      while (sp) {
        int i = stack[sp - 1];
        if (next[i] < (int)kids[i].len) {
          int j = kids[i].data[next[i]++];
          if (!state[j]) {
            state[j] = 1;
            stack[sp++] = j;
          }
        } else {
          state[i] = 2;
          order[out++] = i;
          sp--;
        }
      }
    }
  }
  /* Anything left (not reachable from a sink: cannot happen) keeps its relative order. */
  for (int k = 0; k < n && out < n; k++)
    if (!state[topo[k]]) order[out++] = topo[k];
  for (int i = 0; i < n; i++) kiln_vec_free(&kids[i]);
  kiln_free(kids);
  kiln_free(state);
  kiln_free(stack);
  kiln_free(next);
  kiln_free(cost);
  kiln_free(topo);
}

/* ---- module ---- */

static void set_module_attr(kiln_hlo_module_t *m, const char *key, const char *value, bool *changed) {
  for (int i = 0; i < m->num_raw_attrs; i++) {
    if (strcmp(m->raw_attrs[i].key, key) == 0) {
      if (strcmp(m->raw_attrs[i].value, value) != 0) {
        m->raw_attrs[i].value = kiln_arena_strdup(&m->arena, value);
        *changed = true;
      }
      return;
    }
  }
  kiln_raw_attr_t *a = kiln_arena_alloc(&m->arena, sizeof *a * (size_t)(m->num_raw_attrs + 1));
  if (m->num_raw_attrs) memcpy(a, m->raw_attrs, sizeof *a * (size_t)m->num_raw_attrs);
  a[m->num_raw_attrs].key = kiln_arena_strdup(&m->arena, key);
  a[m->num_raw_attrs].value = kiln_arena_strdup(&m->arena, value);
  m->raw_attrs = a;
  m->num_raw_attrs++;
  *changed = true;
}

/* Called computations' peak while `in` runs. */
static int64_t nested_peak(module_model_t *mm, const kiln_hlo_instruction_t *in) {
  if (!kiln_dataflow_is_control_flow(in)) return 0;
  int64_t best = 0;
  for (int g = 0; g < in->num_called_groups; g++)
    for (int k = 0; k < in->called_groups[g].n; k++) {
      int ci = (int)(intptr_t)kiln_ptrmap_get(&mm->comp_idx, in->called_groups[g].comps[k]) - 1;
      if (ci >= 0 && mm->comps[ci].peak > best) best = mm->comps[ci].peak;
    }
  return best;
}

kiln_status kiln_schedule_module(kiln_hlo_module_t *m, kiln_scheduler_t which,
                                 kiln_schedule_stats_t *stats, bool *changed) {
  bool dummy = false;
  if (!changed) changed = &dummy;
  kiln_schedule_stats_t local_stats;
  if (!stats) stats = &local_stats;
  memset(stats, 0, sizeof *stats);
  if (!m || !m->entry) return kiln_status_make(KILN_INVALID_ARGUMENT, "scheduling: module has no entry");
  module_model_t mm;
  kiln_status s = module_model_build(m, &mm);
  if (s) {
    module_model_free(&mm);
    return s;
  }
  /* Callees come after their callers in df->comps: schedule in reverse. */
  for (int ci = mm.ncomps - 1; ci >= 0; ci--) {
    comp_model_t *cm = &mm.comps[ci];
    for (int i = 0; i < cm->n; i++) cm->extra[i] = nested_peak(&mm, cm->instrs[i]);
    int *orders[KILN_SCHEDULER_COUNT] = {0};
    int64_t peaks[KILN_SCHEDULER_COUNT] = {0};
    int chosen = KILN_SCHEDULER_CURRENT;
    for (int k = KILN_SCHEDULER_CURRENT; k < KILN_SCHEDULER_COUNT; k++) {
      if (which != KILN_SCHEDULER_BEST && (int)which != k) continue;
      orders[k] = kiln_malloc(sizeof(int) * (size_t)(cm->n + 1));
      if (k == KILN_SCHEDULER_CURRENT) schedule_current(cm, orders[k]);
      else if (k == KILN_SCHEDULER_LIST) schedule_list(cm, orders[k]);
      else schedule_dfs(cm, orders[k]);
      if (!order_valid(cm, orders[k])) {
        kiln_free(orders[k]);
        orders[k] = NULL;
        continue;
      }
      peaks[k] = simulate(cm, orders[k]);
      if ((int)which == k || !orders[chosen] || peaks[k] < peaks[chosen]) chosen = k;
    }
    if (!orders[chosen]) {
      for (int k = 0; k < KILN_SCHEDULER_COUNT; k++) kiln_free(orders[k]);
      module_model_free(&mm);
      return kiln_status_make(KILN_INTERNAL, "scheduling %s: no valid order", cm->c->name);
    }
    cm->peak = peaks[chosen];
    stats->computations++;
    stats->chosen_count[chosen]++;
    if (ci == 0) {
      for (int k = KILN_SCHEDULER_CURRENT; k < KILN_SCHEDULER_COUNT; k++)
        stats->entry_peak_by[k] = orders[k] ? peaks[k] : -1;
      stats->entry_peak_by[KILN_SCHEDULER_BEST] = peaks[chosen];
      stats->peak_bytes = peaks[chosen];
    }
    for (int k = 0; k < cm->n; k++) {
      kiln_hlo_instruction_t *in = cm->instrs[orders[chosen][k]];
      if (cm->c->instructions.data[k] != in) *changed = true;
      cm->c->instructions.data[k] = in;
    }
    for (int k = 0; k < KILN_SCHEDULER_COUNT; k++) kiln_free(orders[k]);
  }
  /* Computations run inside ops: post order. */
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    if (kiln_ptrmap_contains(&mm.comp_idx, c)) continue;
    size_t n = c->instructions.len;
    kiln_hlo_instruction_t **before = kiln_malloc(sizeof *before * (n + 1));
    memcpy(before, c->instructions.data, sizeof *before * n);
    kiln_hlo_computation_sort_post_order(c);
    if (memcmp(before, c->instructions.data, sizeof *before * n) != 0) *changed = true;
    kiln_free(before);
  }
  module_model_free(&mm);
  set_module_attr(m, "is_scheduled", "true", changed);
  return NULL;
}

kiln_status kiln_schedule_peak_memory(const kiln_hlo_module_t *m, int64_t *out_peak) {
  *out_peak = 0;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_schedule_verify(m));
  module_model_t mm;
  kiln_status s = module_model_build(m, &mm);
  if (s) {
    module_model_free(&mm);
    return s;
  }
  for (int ci = mm.ncomps - 1; ci >= 0; ci--) {
    comp_model_t *cm = &mm.comps[ci];
    for (int i = 0; i < cm->n; i++) cm->extra[i] = nested_peak(&mm, cm->instrs[i]);
    int *order = kiln_malloc(sizeof(int) * (size_t)(cm->n + 1));
    for (int i = 0; i < cm->n; i++) order[i] = i;
    cm->peak = simulate(cm, order);
    kiln_free(order);
  }
  *out_peak = mm.comps[0].peak;
  module_model_free(&mm);
  return NULL;
}

kiln_status kiln_schedule_verify(const kiln_hlo_module_t *m) {
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    const kiln_hlo_computation_t *c = m->computations.data[ci];
    kiln_ptrmap_t seen;
    kiln_ptrmap_init(&seen);
    kiln_status s = NULL;
    for (size_t i = 0; i < c->instructions.len && !s; i++) {
      const kiln_hlo_instruction_t *in = c->instructions.data[i];
      int total = in->num_operands + in->num_control_predecessors;
      for (int k = 0; k < total && !s; k++) {
        const kiln_hlo_instruction_t *p =
            k < in->num_operands ? in->operands[k] : in->control_predecessors[k - in->num_operands];
        if (!kiln_ptrmap_contains(&seen, p))
          s = kiln_status_make(KILN_FAILED_PRECONDITION, "%s: %s comes before its %s %s", c->name,
                               in->name, k < in->num_operands ? "operand" : "control predecessor",
                               p->name);
      }
      kiln_ptrmap_put(&seen, in, (void *)1);
    }
    kiln_ptrmap_free(&seen);
    if (s) return s;
  }
  return NULL;
}

kiln_status kiln_pass_schedule(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  return kiln_schedule_module(m, KILN_SCHEDULER_BEST, NULL, changed);
}
