/* Priority fusion, after XLA:GPU's PriorityFusion.
 *
 * For every producer that can be fused, the cost model estimates the time saved by fusing
 * it into all of its users at once (duplicating it when there are several):
 *   saved = time(producer) + sum time(consumer) - sum time(fused(producer, consumer)).
 * Producers are processed highest saving first from a priority queue; a producer is fused
 * only when the saving is not negative and every user can take it (emitter rules in
 * fusion_util.h, size limits). Fusing into all users removes the producer, so no cycle can
 * appear. After each fusion the new fusions and their operands get fresh priorities (queue
 * entries carry a version; stale ones are skipped, and a popped entry whose priority moved
 * is pushed back with the new value).
 * Finally every fusible instruction left on its own is wrapped in a single-instruction
 * fusion, so codegen sees one fusion per kernel (XLA's FusionWrapper). */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/passes/cost_model.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"

typedef struct heap_entry {
  double priority;
  uint64_t version;
  kiln_hlo_instruction_t *in;
} heap_entry_t;

typedef struct fusion_queue {
  KILN_VEC(heap_entry_t) heap;
  kiln_ptrmap_t version; /* instruction -> current version */
  kiln_ptrmap_t gone;    /* instructions removed from the computation */
  uint64_t next_version;
  const kiln_cost_device_t *dev;
  kiln_cost_cache_t *cost; /* forgets every instruction marked gone */
  kiln_hlo_computation_t *c;
} fusion_queue_t;

/* Marks `in` removed from the computation: no more queue entries, no cached cost. */
static void mark_gone(fusion_queue_t *q, const kiln_hlo_instruction_t *in) {
  kiln_ptrmap_put(&q->gone, in, (void *)1);
  kiln_cost_cache_forget(q->cost, in);
}

static void heap_push(fusion_queue_t *q, heap_entry_t e) {
  kiln_vec_push(&q->heap, e);
  size_t i = q->heap.len - 1;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (q->heap.data[p].priority >= q->heap.data[i].priority) break;
    heap_entry_t t = q->heap.data[p];
    q->heap.data[p] = q->heap.data[i];
    q->heap.data[i] = t;
    i = p;
  }
}

static heap_entry_t heap_pop(fusion_queue_t *q) {
  heap_entry_t top = q->heap.data[0];
  q->heap.data[0] = q->heap.data[--q->heap.len];
  size_t i = 0, n = q->heap.len;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, best = i;
    if (l < n && q->heap.data[l].priority > q->heap.data[best].priority) best = l;
    if (r < n && q->heap.data[r].priority > q->heap.data[best].priority) best = r;
    if (best == i) break;
    heap_entry_t t = q->heap.data[best];
    q->heap.data[best] = q->heap.data[i];
    q->heap.data[i] = t;
    i = best;
  }
  return top;
}

/* Operands of the fusion of `p` into `c`, counted without duplicates. */
static int fused_operand_count(const kiln_hlo_instruction_t *p, const kiln_hlo_instruction_t *c) {
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  int n = 0;
  for (int k = 0; k < c->num_operands; k++) {
    const kiln_hlo_instruction_t *o = c->operands[k];
    if (o == p || kiln_ptrmap_contains(&seen, o)) continue;
    kiln_ptrmap_put(&seen, o, (void *)1);
    n++;
  }
  for (int k = 0; k < p->num_operands; k++) {
    const kiln_hlo_instruction_t *o = p->operands[k];
    if (kiln_ptrmap_contains(&seen, o)) continue;
    kiln_ptrmap_put(&seen, o, (void *)1);
    n++;
  }
  kiln_ptrmap_free(&seen);
  return n;
}

/* Whether `in` reads and writes at most KILN_FUSION_TINY_ELEMENTS elements a value. */
static bool tiny(const kiln_hlo_instruction_t *in) {
  if (kiln_cost_shape_elements(in->shape) > KILN_FUSION_TINY_ELEMENTS) return false;
  for (int k = 0; k < in->num_operands; k++)
    if (kiln_cost_shape_elements(in->operands[k]->shape) > KILN_FUSION_TINY_ELEMENTS) return false;
  return true;
}

/* The largest fused body for loop producer `p` fused into `c`: KILN_FUSION_MAX_INSTRUCTIONS,
 * or KILN_FUSION_MAX_TINY_INSTRUCTIONS when both are tiny (a chain of scalar rounds, such as
 * threefry's key splits, then is one kernel of one thread: its launches cost more than its
 * instructions). */
static int size_limit(const kiln_hlo_instruction_t *p, const kiln_hlo_instruction_t *c) {
  return tiny(p) && tiny(c) ? KILN_FUSION_MAX_TINY_INSTRUCTIONS : KILN_FUSION_MAX_INSTRUCTIONS;
}

/* The time saved by fusing `p` into all its users; false when it cannot be fused. */
static bool producer_priority(fusion_queue_t *q, const kiln_hlo_instruction_t *p, double *out) {
  if (p->parent != q->c || p == q->c->root || !p->users.len || p->control_successors.len)
    return false;
  int size = kiln_fusion_body_size(p);
  if (kiln_fusion_is_reduction_producer(p)) {
    /* A reduction is never duplicated: it takes its single user as an epilogue. */
    const kiln_hlo_instruction_t *c = p->users.data[0];
    if (p->users.len != 1 || !kiln_fusion_can_take_epilogue(c, p)) return false;
    if (kiln_fusion_body_size(c) + size > KILN_FUSION_MAX_INSTRUCTIONS) return false;
    if (fused_operand_count(p, c) > KILN_FUSION_MAX_OPERANDS) return false;
    *out = kiln_cost_instruction_time_cached(q->cost, q->dev, p) +
           kiln_cost_instruction_time_cached(q->cost, q->dev, c) -
           kiln_cost_fused_time_cached(q->cost, q->dev, p, c, false);
    return true;
  }
  if (!kiln_fusion_can_be_producer(p)) return false;
  double unfused = kiln_cost_instruction_time_cached(q->cost, q->dev, p), fused = 0;
  for (size_t u = 0; u < p->users.len; u++) {
    const kiln_hlo_instruction_t *c = p->users.data[u];
    if (!kiln_fusion_can_consume(c, p, NULL)) return false;
    if (kiln_fusion_body_size(c) + size > size_limit(p, c)) return false;
    if (fused_operand_count(p, c) > KILN_FUSION_MAX_OPERANDS) return false;
    unfused += kiln_cost_instruction_time_cached(q->cost, q->dev, c);
    fused += kiln_cost_fused_time_cached(q->cost, q->dev, p, c, false);
  }
  *out = unfused - fused;
  return true;
}

static void queue_update(fusion_queue_t *q, kiln_hlo_instruction_t *in) {
  if (kiln_ptrmap_contains(&q->gone, in)) return;
  uint64_t v = ++q->next_version;
  kiln_ptrmap_put(&q->version, in, (void *)(uintptr_t)v);
  double prio;
  if (producer_priority(q, in, &prio)) heap_push(q, (heap_entry_t){prio, v, in});
}

/* Fuses `p` into each of its users; the producer is removed afterwards. A consumer fusion
 * takes the producer into its own fused computation (kiln_fusion_merge), and so does the
 * producer fusion its last consumer: no fused computation is copied whole. */
static kiln_status fuse_into_users(fusion_queue_t *q, kiln_hlo_instruction_t *p,
                                   kiln_fusion_scope_t *scope) {
  KILN_VEC(kiln_hlo_instruction_t *) users = {0}, made = {0};
  for (size_t u = 0; u < p->users.len; u++) kiln_vec_push(&users, p->users.data[u]);
  kiln_status st = NULL;
  bool p_merged = false; /* p went into its last consumer's fusion (or hosts it) */
  for (size_t u = 0; u < users.len && !st; u++) {
    kiln_hlo_instruction_t *c = users.data[u];
    if (!c->users.len && c != q->c->root && !c->control_successors.len) {
      /* A dead fusible consumer has no output to fuse into: drop it. */
      st = kiln_hlo_instruction_remove(c);
      if (!st) mark_gone(q, c);
      continue;
    }
    /* The last reader of p takes it whole: p is not kept for other users (the same fusion
     * as duplicating it and removing it afterwards). */
    bool last = p->users.len == 1;
    kiln_hlo_instruction_t *members[2] = {p, c};
    bool dup[2] = {!last, false};
    kiln_hlo_instruction_t *f = NULL;
    st = kiln_fusion_merge(scope, q->c, 2, members, dup, &f);
    if (st) break;
    if (f == c)
      kiln_cost_cache_forget(q->cost, c);
    else
      mark_gone(q, c);
    if (last) {
      p_merged = true;
      if (f == p)
        kiln_cost_cache_forget(q->cost, p);
      else
        mark_gone(q, p);
    }
    kiln_vec_push(&made, f);
  }
  if (!st && !p_merged && !p->users.len) {
    if (p->opcode == KILN_OP_FUSION) {
      const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(p, "calls");
      if (body) kiln_ptrmap_put(&scope->retired, (void *)body, (void *)1);
    }
    st = kiln_hlo_instruction_remove(p);
    if (!st) mark_gone(q, p);
  }
  for (size_t i = 0; i < made.len && !st; i++) {
    kiln_hlo_instruction_t *f = made.data[i];
    queue_update(q, f);
    for (int k = 0; k < f->num_operands; k++) queue_update(q, f->operands[k]);
  }
  kiln_vec_free(&users);
  kiln_vec_free(&made);
  return st;
}

/* Whether a lone instruction becomes a single-instruction fusion. */
static bool wants_wrapper(const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_FUSION || kiln_fusion_is_free(in)) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  if (!in->users.len && in != in->parent->root) return false; /* dead: left to DCE */
  if (in->opcode == KILN_OP_REDUCE || in->opcode == KILN_OP_SCATTER ||
      in->opcode == KILN_OP_DYNAMIC_UPDATE_SLICE)
    return !kiln_shape_is_dynamic(in->shape);
  return kiln_fusion_is_loop_fusible(in);
}

static kiln_status fuse_computation(kiln_hlo_computation_t *c, kiln_fusion_scope_t *scope,
                                    bool *changed) {
  fusion_queue_t q;
  memset(&q, 0, sizeof q);
  kiln_ptrmap_init(&q.version);
  kiln_ptrmap_init(&q.gone);
  q.dev = kiln_cost_device_default();
  kiln_cost_cache_t cost;
  kiln_cost_cache_init(&cost);
  q.cost = &cost;
  q.c = c;
  kiln_status st = NULL;
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  for (size_t i = 0; i < n; i++) queue_update(&q, order[i]);
  kiln_free(order);

  /* Each fuse removes members: holes instead of shifting the list, closed once below. */
  kiln_hlo_computation_defer_removals(c);
  while (q.heap.len && !st) {
    heap_entry_t e = heap_pop(&q);
    if (kiln_ptrmap_contains(&q.gone, e.in)) continue;
    if ((uint64_t)(uintptr_t)kiln_ptrmap_get(&q.version, e.in) != e.version) continue;
    double now;
    if (!producer_priority(&q, e.in, &now)) continue;
    if (now < e.priority - 1e-12 || now > e.priority + 1e-12) {
      heap_push(&q, (heap_entry_t){now, e.version, e.in});
      continue;
    }
    if (now < -1e-12) break; /* nothing left that saves time */
    st = fuse_into_users(&q, e.in, scope);
    if (!st) *changed = true;
  }

  /* Wrap what is left alone. */
  if (!st) {
    order = kiln_hlo_computation_post_order(c, &n);
    for (size_t i = 0; i < n && !st; i++) {
      if (!wants_wrapper(order[i])) continue;
      kiln_hlo_instruction_t *f = NULL;
      st = kiln_fusion_create(c, 1, &order[i], NULL, &scope->retired, &f);
      if (!st) *changed = true;
    }
    kiln_free(order);
  }
  kiln_hlo_computation_compact(c);
  if (*changed) kiln_hlo_computation_sort_post_order(c);
  kiln_vec_free(&q.heap);
  kiln_ptrmap_free(&q.version);
  kiln_ptrmap_free(&q.gone);
  kiln_cost_cache_free(&cost);
  return st;
}

kiln_status kiln_pass_priority_fusion(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                      bool *changed) {
  (void)opts;
  return kiln_fusion_run_on_computations(m, "priority fusion", fuse_computation, changed);
}
