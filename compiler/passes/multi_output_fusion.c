/* Multi-output fusion, after XLA:GPU's GpuMultiOutputFusion. Runs after priority fusion on
 * fusion instructions (kLoop / kInput) of every sequential computation:
 *
 *  1. Producer into consumer with an extra output: a loop fusion P that its consumer C
 *     could not take by duplication (P has other users) is merged into C anyway; the merged
 *     fusion's root becomes a tuple holding C's result(s) and P's, and P's other users read
 *     P's value through get-tuple-element. Refused when another path leads from P to C (the
 *     merged fusion would both feed and read that path: a cycle), when the loop shapes are
 *     incompatible, or when the cost model sees no saving.
 *  2. Siblings: two fusions reading the same non-scalar value merge into one with a tuple
 *     root (e.g. two reductions of the same input), unless one reaches the other.
 *
 * Both need the emitters to iterate over one shape: loop fusions of equal output dims,
 * reductions of equal input dims and reduced dimensions, or loop outputs shaped like a
 * reduction's input (fusion_util.h); and the merged outputs must be what one emitter
 * produces as the codegen's hero analysis sees them (kiln_fusion_can_share_kernel): a
 * reduction counts only when the reduction emitter takes it (unnested, race-free unless it
 * is an output itself), otherwise the kernel is a loop and every output has one element
 * count (XLA's rule: a loop multi-output fusion's outputs share a shape). Fusions holding
 * in-place heroes (scatter, dynamic-update-slice) are left alone. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/passes/cost_model.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"

/* A fusion that may join a multi-output fusion. */
static bool mof_candidate(const kiln_hlo_instruction_t *in) {
  if (!kiln_fusion_is_growable(in)) return false;
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
  if (kiln_fusion_computation_has_in_place_hero(c)) return false;
  if (kiln_shape_is_tuple(in->shape)) {
    for (size_t u = 0; u < in->users.len; u++)
      if (in->users.data[u]->opcode != KILN_OP_GET_TUPLE_ELEMENT) return false;
  } else if (!kiln_shape_is_array(in->shape)) {
    return false;
  }
  return true;
}

static bool compatible(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  kiln_fusion_loop_shape_t la, lb;
  if (!kiln_fusion_loop_shape(a, &la) || !kiln_fusion_loop_shape(b, &lb)) return false;
  return kiln_fusion_loop_shapes_compatible(&la, &lb) && kiln_fusion_can_share_kernel(a, b);
}

/* Distinct operands of the merge of `a` and `b`, not counting values produced by either. */
static int merged_operand_count(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  int n = 0;
  const kiln_hlo_instruction_t *both[2] = {a, b};
  for (int j = 0; j < 2; j++)
    for (int k = 0; k < both[j]->num_operands; k++) {
      const kiln_hlo_instruction_t *o = both[j]->operands[k];
      if (o == a || o == b || kiln_ptrmap_contains(&seen, o)) continue;
      if (o->opcode == KILN_OP_GET_TUPLE_ELEMENT && (o->operands[0] == a || o->operands[0] == b))
        continue;
      kiln_ptrmap_put(&seen, o, (void *)1);
      n++;
    }
  kiln_ptrmap_free(&seen);
  return n;
}

static bool fits(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  return kiln_fusion_body_size(a) + kiln_fusion_body_size(b) <= KILN_FUSION_MAX_INSTRUCTIONS &&
         merged_operand_count(a, b) <= KILN_FUSION_MAX_OPERANDS;
}

/* Whether `c` reads `p` directly (or through a get-tuple-element of it). */
static bool reads(const kiln_hlo_instruction_t *c, const kiln_hlo_instruction_t *p) {
  for (int k = 0; k < c->num_operands; k++) {
    const kiln_hlo_instruction_t *o = c->operands[k];
    if (o == p || (o->opcode == KILN_OP_GET_TUPLE_ELEMENT && o->operands[0] == p)) return true;
  }
  return false;
}

/* Whether merging producer `p` into consumer `c` keeps the graph acyclic: no path from p
 * to c other than the direct edges (through p's get-tuple-elements when p is multi-output). */
static bool producer_consumer_acyclic(const kiln_fusion_order_t *o, const kiln_hlo_instruction_t *p,
                                      const kiln_hlo_instruction_t *c) {
  for (size_t u = 0; u < p->users.len; u++) {
    const kiln_hlo_instruction_t *user = p->users.data[u];
    if (user == c) continue;
    if (user->opcode == KILN_OP_GET_TUPLE_ELEMENT) {
      for (size_t v = 0; v < user->users.len; v++) {
        const kiln_hlo_instruction_t *w = user->users.data[v];
        if (w != c && kiln_fusion_reaches(o, w, c, NULL)) return false;
      }
      continue;
    }
    if (kiln_fusion_reaches(o, user, c, NULL)) return false;
  }
  return true;
}

typedef struct mof_state {
  kiln_hlo_computation_t *c;
  kiln_fusion_scope_t *scope;
  const kiln_cost_device_t *dev;
  kiln_cost_cache_t cost; /* per computation; merged fusions are forgotten */
  kiln_fusion_order_t order;
  kiln_ptrmap_t gone;           /* instructions merged away */
  kiln_ptrmap_t hosts;          /* fusions that took a merge into themselves this round */
  kiln_hlo_instruction_t *made; /* the fusion the last merge made (or grew) */
} mof_state_t;

/* Reachability queries give up (answering "reaches": no merge) past this many instructions,
 * so a value read in every layer of a deep model does not make each sibling query walk the
 * layers in between; fusions that far apart gain nothing from sharing a kernel. */
#define MOF_MAX_SEARCH 512

static void build_order(mof_state_t *s) {
  kiln_fusion_order_build(&s->order, s->c);
  s->order.max_visits = MOF_MAX_SEARCH;
}

static kiln_status merge(mof_state_t *s, kiln_hlo_instruction_t *a, kiln_hlo_instruction_t *b) {
  kiln_hlo_instruction_t *members[2] = {a, b}, *f = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fusion_merge(s->scope, s->c, 2, members, NULL, &f));
  for (int i = 0; i < 2; i++) {
    /* The member that hosts the merge lives on as the merged fusion: a new one to this
     * round's scan, which passes over it as it would over the members of a new fusion. */
    kiln_ptrmap_put(members[i] == f ? &s->hosts : &s->gone, members[i], (void *)1);
    kiln_cost_cache_forget(&s->cost, members[i]);
  }
  s->made = f;
  /* Positions keep reachability queries pruned; only when the new fusion fits nowhere
   * between its operands and users is the whole order rebuilt. */
  if (!kiln_fusion_order_place(&s->order, f)) {
    kiln_fusion_order_free(&s->order);
    build_order(s);
  }
  return NULL;
}

/* Tries to merge one of consumer `c`'s producers into it. */
static kiln_status try_producer_consumer(mof_state_t *s, kiln_hlo_instruction_t *c, bool *done) {
  *done = false;
  if (!mof_candidate(c)) return NULL;
  for (int k = 0; k < c->num_operands; k++) {
    kiln_hlo_instruction_t *p = c->operands[k];
    if (p->opcode == KILN_OP_GET_TUPLE_ELEMENT) p = p->operands[0];
    if (p == c || !mof_candidate(p) || p->fusion_kind != KILN_HLO_FUSION_LOOP) continue;
    if (kiln_fusion_computation_has_reduction(kiln_hlo_instruction_called(p, "calls"))) continue;
    if (p->users.len < 2 && !kiln_shape_is_tuple(p->shape)) continue; /* priority fusion's job */
    if (!compatible(p, c) || !fits(p, c)) continue;
    if (!kiln_shape_is_tuple(p->shape)) {
      double before = kiln_cost_instruction_time_cached(&s->cost, s->dev, p) +
                      kiln_cost_instruction_time_cached(&s->cost, s->dev, c);
      double after = kiln_cost_fused_time_cached(&s->cost, s->dev, p, c, true);
      if (after > before) continue;
    }
    if (!producer_consumer_acyclic(&s->order, p, c)) continue;
    *done = true;
    return merge(s, p, c);
  }
  return NULL;
}

/* Tries to merge two of `x`'s users that read it. */
static kiln_status try_siblings(mof_state_t *s, kiln_hlo_instruction_t *x, bool *done) {
  *done = false;
  if (!kiln_shape_is_array(x->shape) || kiln_shape_num_elements(x->shape) <= 1) return NULL;
  if (x->opcode == KILN_OP_CONSTANT) return NULL;
  size_t n = x->users.len;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *a = x->users.data[i];
    if (!mof_candidate(a)) continue;
    for (size_t j = i + 1; j < n; j++) {
      kiln_hlo_instruction_t *b = x->users.data[j];
      if (!mof_candidate(b) || !compatible(a, b) || !fits(a, b)) continue;
      if (reads(a, b) || reads(b, a)) continue; /* producer/consumer, not siblings */
      if (kiln_fusion_reaches(&s->order, a, b, NULL) || kiln_fusion_reaches(&s->order, b, a, NULL))
        continue;
      *done = true;
      return merge(s, a, b);
    }
  }
  return NULL;
}

/* Merges around `x` until nothing more merges there: as a consumer, then the users it
 * feeds as siblings; a merge made through `x` is retried as a consumer too. */
static kiln_status fuse_around(mof_state_t *s, kiln_hlo_instruction_t *x, bool *any) {
  kiln_hlo_instruction_t *work[2];
  int n = 0;
  work[n++] = x;
  kiln_status st = NULL;
  while (n && !st) {
    kiln_hlo_instruction_t *in = work[--n];
    if (kiln_ptrmap_contains(&s->gone, in)) continue;
    bool done = false;
    st = try_producer_consumer(s, in, &done);
    if (!st && !done) st = try_siblings(s, in, &done);
    if (st || !done) continue;
    *any = true;
    /* `in` again when it survived (more siblings), then the new fusion first. */
    if (!kiln_ptrmap_contains(&s->gone, in) && in != s->made) work[n++] = in;
    work[n++] = s->made;
  }
  return st;
}

static kiln_status fuse_computation(mof_state_t *s, bool *changed) {
  kiln_status st = NULL;
  /* One scan in post order; merges keep the order up to date (merge), so each round costs
   * about one walk of the computation. A bound keeps pathological inputs finite. */
  for (int round = 0; round < 4 && !st; round++) {
    bool any = false;
    build_order(s);
    kiln_ptrmap_init(&s->gone);
    kiln_ptrmap_init(&s->hosts);
    size_t n = 0;
    kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(s->c, &n);
    kiln_hlo_computation_defer_removals(s->c); /* merges leave holes, closed after the scan */
    for (size_t i = 0; i < n && !st; i++)
      if (!kiln_ptrmap_contains(&s->hosts, order[i])) st = fuse_around(s, order[i], &any);
    kiln_hlo_computation_compact(s->c);
    kiln_free(order);
    kiln_ptrmap_free(&s->gone);
    kiln_ptrmap_free(&s->hosts);
    kiln_fusion_order_free(&s->order);
    if (any) *changed = true;
    if (!any) break;
  }
  if (*changed) kiln_hlo_computation_sort_post_order(s->c);
  return st;
}

static kiln_status fuse_one(kiln_hlo_computation_t *c, kiln_fusion_scope_t *scope, bool *changed) {
  mof_state_t s = {.c = c, .scope = scope, .dev = kiln_cost_device_default()};
  kiln_cost_cache_init(&s.cost);
  kiln_status st = fuse_computation(&s, changed);
  kiln_cost_cache_free(&s.cost);
  return st;
}

kiln_status kiln_pass_multi_output_fusion(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  (void)opts;
  return kiln_fusion_run_on_computations(m, "multi-output fusion", fuse_one, changed);
}
