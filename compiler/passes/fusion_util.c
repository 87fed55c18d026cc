/* Fusion helpers: emitter rules, kernel counting, building fusions, reachability. */
#include "compiler/passes/fusion_util.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/vec.h"
#include "compiler/analysis/launch_grid.h"
#include "compiler/analysis/reduction_rule.h"
#include "compiler/passes/pass_util.h"

typedef KILN_VEC(kiln_hlo_instruction_t *) instr_vec_t;

/* ---- hero analysis ---- */

static bool default_layout(const kiln_shape_t *s) {
  return !s->has_layout || kiln_layout_is_default(&s->layout);
}

static int64_t array_elems(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) return s->num_elements ? array_elems(s->elements[0]) : 0;
  return kiln_shape_is_array(s) ? kiln_shape_num_elements(s) : 0;
}

bool kiln_fusion_is_reduction_hero(const kiln_hlo_instruction_t *in) {
  return in->opcode == KILN_OP_REDUCE && in->num_operands >= 1 &&
         kiln_shape_is_array(in->operands[0]->shape) && in->operands[0]->shape->rank > 0 &&
         array_elems(in->operands[0]->shape) > array_elems(in->shape);
}

/* An op the reduction emitter can apply to a reduction's result element by element. */
static bool is_epilogue_op(const kiln_hlo_instruction_t *in) {
  if (!kiln_shape_is_array(in->shape)) return false;
  if (kiln_hlo_opcode_is_elementwise(in->opcode) || kiln_fusion_is_bitcast_like(in)) return true;
  /* broadcast or reshape that only adds or drops size-1 dimensions */
  if ((in->opcode == KILN_OP_BROADCAST || in->opcode == KILN_OP_RESHAPE) && in->num_operands == 1)
    return array_elems(in->shape) == array_elems(in->operands[0]->shape);
  /* a reduce over size-1 dimensions: one reducer call per element */
  return in->opcode == KILN_OP_REDUCE && in->num_operands == 2 &&
         array_elems(in->shape) == array_elems(in->operands[0]->shape);
}

/* An op the codegen's hero analysis walks through from a root to its hero: one operand,
 * elementwise (not copy), a bitcast, or a reshape/transpose that is a bitcast between
 * default layouts (XLA's IsIntermediate with one allowed operand). */
static bool is_intermediate(const kiln_hlo_instruction_t *in) {
  if (in->num_operands != 1 || !kiln_shape_is_array(in->shape)) return false;
  switch (in->opcode) {
    case KILN_OP_BITCAST:
      return true;
    case KILN_OP_COPY:
      return false;
    case KILN_OP_RESHAPE:
    case KILN_OP_TRANSPOSE:
      return default_layout(in->shape) && default_layout(in->operands[0]->shape) &&
             kiln_fusion_is_bitcast_like(in);
    default:
      return kiln_hlo_opcode_is_elementwise(in->opcode);
  }
}

/* Where the codegen's walk from `root` through intermediates stops. */
static const kiln_hlo_instruction_t *walk_up(const kiln_hlo_instruction_t *root) {
  const kiln_hlo_instruction_t *x = root;
  for (int depth = 0; depth < KILN_FUSION_MAX_INSTRUCTIONS * 4 && is_intermediate(x); depth++) {
    if (x->operands[0]->opcode == KILN_OP_PARAMETER) break;
    x = x->operands[0];
  }
  return x;
}

const kiln_hlo_instruction_t *kiln_fusion_hero(const kiln_hlo_instruction_t *root) {
  const kiln_hlo_instruction_t *x = walk_up(root);
  return kiln_fusion_is_reduction_hero(x) ? x : root;
}

/* Logical dimensions in physical order, most major first, leaving out size-1 dimensions.
 * Returns the count written to `out` (capacity `cap`), or -1 when the shape is odd. */
static int physical_dims(const kiln_shape_t *s, int64_t *out, int cap) {
  if (!kiln_shape_is_array(s) || s->rank > cap) return -1;
  int n = 0;
  bool layout = s->has_layout && s->layout.rank == s->rank && s->layout.num_tiles == 0;
  for (int k = 0; k < s->rank; k++) {
    int64_t d = layout ? s->layout.minor_to_major[s->rank - 1 - k] : k;
    if (d < 0 || d >= s->rank) return -1;
    if (s->dims[d] != 1) out[n++] = d;
  }
  return n;
}

bool kiln_fusion_is_bitcast_like(const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_BITCAST) return true;
  if (in->num_operands != 1) return false;
  const kiln_shape_t *a = in->operands[0]->shape, *r = in->shape;
  if (!kiln_shape_is_array(a) || !kiln_shape_is_array(r) || a->type != r->type) return false;
  if (kiln_shape_is_dynamic(a) || kiln_shape_is_dynamic(r)) return false;
  int64_t pa[64], pr[64];
  int na = physical_dims(a, pa, 64), nr = physical_dims(r, pr, 64);
  if (na < 0 || nr < 0) return false;
  if (in->opcode == KILN_OP_RESHAPE) {
    if (default_layout(a) && default_layout(r)) return true;
    /* Only size-1 dimensions added or removed: the other sizes appear in the same physical
     * order on both sides. */
    if (na != nr) return false;
    for (int k = 0; k < na; k++)
      if (a->dims[pa[k]] != r->dims[pr[k]]) return false;
    return true;
  }
  if (in->opcode == KILN_OP_TRANSPOSE) {
    if (in->dimensions.n != r->rank || na != nr) return false;
    for (int k = 0; k < nr; k++) {
      int64_t src = in->dimensions.v[pr[k]];
      if (src != pa[k]) return false;
    }
    return true;
  }
  return false;
}

bool kiln_fusion_is_transpose_hero(const kiln_hlo_instruction_t *in) {
  return in->opcode == KILN_OP_TRANSPOSE && !kiln_fusion_is_bitcast_like(in);
}

bool kiln_fusion_is_free(const kiln_hlo_instruction_t *in) {
  switch (in->opcode) {
    case KILN_OP_PARAMETER:
    case KILN_OP_CONSTANT:
    case KILN_OP_TUPLE:
    case KILN_OP_GET_TUPLE_ELEMENT:
    case KILN_OP_BITCAST:
    case KILN_OP_AFTER_ALL:
    case KILN_OP_ADD_DEPENDENCY:
    case KILN_OP_OPTIMIZATION_BARRIER:
    case KILN_OP_DOMAIN:
      return true;
    case KILN_OP_RESHAPE:
    case KILN_OP_TRANSPOSE:
      return kiln_fusion_is_bitcast_like(in);
    default:
      return false;
  }
}

bool kiln_fusion_is_loop_fusible(const kiln_hlo_instruction_t *in) {
  if (in->num_control_predecessors || in->control_successors.len) return false;
  if (!kiln_shape_is_array(in->shape) || kiln_shape_is_dynamic(in->shape)) return false;
  if (kiln_hlo_opcode_is_elementwise(in->opcode)) return true;
  switch (in->opcode) {
    case KILN_OP_BROADCAST:
    case KILN_OP_RESHAPE:
    case KILN_OP_BITCAST:
    case KILN_OP_TRANSPOSE:
    case KILN_OP_SLICE:
    case KILN_OP_CONCATENATE:
    case KILN_OP_PAD:
    case KILN_OP_REVERSE:
    case KILN_OP_IOTA:
    case KILN_OP_GATHER:
    case KILN_OP_DYNAMIC_SLICE:
    case KILN_OP_REDUCE_WINDOW:
    case KILN_OP_BITCAST_CONVERT:
      return true;
    case KILN_OP_REDUCE: /* a reduce over size-1 dimensions only moves data */
      return in->num_operands == 2 && !kiln_fusion_is_reduction_hero(in);
    default:
      return false;
  }
}

bool kiln_fusion_is_growable(const kiln_hlo_instruction_t *in) {
  return in->opcode == KILN_OP_FUSION && !in->fusion_kind_text &&
         (in->fusion_kind == KILN_HLO_FUSION_LOOP || in->fusion_kind == KILN_HLO_FUSION_INPUT) &&
         kiln_hlo_instruction_called(in, "calls") != NULL && !in->num_control_predecessors &&
         !in->control_successors.len;
}

bool kiln_fusion_computation_has_in_place_hero(const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++) {
    if (!c->instructions.data[i]) continue;
    kiln_hlo_opcode_t op = c->instructions.data[i]->opcode;
    if (op == KILN_OP_SCATTER || op == KILN_OP_DYNAMIC_UPDATE_SLICE) return true;
  }
  return false;
}

bool kiln_fusion_computation_has_reduction(const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++)
    if (kiln_fusion_is_reduction_hero(c->instructions.data[i])) return true;
  return false;
}

kiln_hlo_fusion_kind_t kiln_fusion_kind_for(const kiln_hlo_computation_t *fused) {
  for (size_t i = 0; i < fused->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = fused->instructions.data[i];
    if (kiln_fusion_is_reduction_hero(in) || in->opcode == KILN_OP_SCATTER)
      return KILN_HLO_FUSION_INPUT;
  }
  return KILN_HLO_FUSION_LOOP;
}

bool kiln_fusion_can_be_producer(const kiln_hlo_instruction_t *in) {
  if (!kiln_shape_is_array(in->shape)) return false;
  if (in->opcode == KILN_OP_FUSION) {
    if (!kiln_fusion_is_growable(in) || in->fusion_kind != KILN_HLO_FUSION_LOOP) return false;
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
    return !kiln_fusion_computation_has_in_place_hero(c) &&
           !kiln_fusion_computation_has_reduction(c);
  }
  if (in->opcode == KILN_OP_CONSTANT || in->opcode == KILN_OP_PARAMETER) return false;
  return kiln_fusion_is_loop_fusible(in);
}

/* ---- reductions the reduction emitter takes ---- */

/* A reduce's input collapsed, in physical order, to [a, b, c]: a row reduction reduces a
 * and c and keeps b; a column reduction keeps a and c and reduces b. False when neither
 * the kept nor the reduced dimensions form one physical run (the codegen then emits the
 * reduce elementally). Mirrors the codegen's hero analysis, which passes may not call. */
typedef struct reduction_form {
  bool row;
  int64_t d[3];
} reduction_form_t;

static bool reduction_form(const kiln_hlo_instruction_t *r, reduction_form_t *out) {
  if (r->opcode != KILN_OP_REDUCE || r->num_operands < 2 || r->num_operands % 2) return false;
  const kiln_shape_t *in = r->operands[0]->shape;
  if (!kiln_shape_is_array(in) || in->rank > 64) return false;
  bool reduced[64] = {false};
  for (int i = 0; i < r->dimensions.n; i++) {
    if (r->dimensions.v[i] < 0 || r->dimensions.v[i] >= in->rank) return false;
    reduced[r->dimensions.v[i]] = true;
  }
  int64_t logical[64];
  bool layout = in->has_layout && in->layout.rank == in->rank && !default_layout(in);
  for (int k = 0; k < in->rank; k++) {
    int64_t d = layout ? in->layout.minor_to_major[in->rank - 1 - k] : k;
    logical[k] = d >= 0 && d < in->rank ? d : k;
  }
  /* Physical positions of the first/last kept and reduced dims, and whether each kind
   * forms one run. */
  int first[2] = {-1, -1}, last[2] = {-1, -1};
  bool run[2] = {true, true};
  for (int k = 0; k < in->rank; k++) {
    int kind = reduced[logical[k]] ? 1 : 0;
    if (first[kind] < 0)
      first[kind] = k;
    else if (last[kind] != k - 1)
      run[kind] = false;
    last[kind] = k;
  }
  int64_t total = kiln_shape_num_elements(in);
  if (first[0] < 0) { /* everything reduced */
    *out = (reduction_form_t){true, {1, 1, total}};
    return true;
  }
  if (first[1] < 0) run[1] = false;
  int kind = run[0] ? 0 : run[1] ? 1 : -1;
  if (kind < 0) return false;
  int64_t part[3] = {1, 1, 1};
  for (int k = 0; k < in->rank; k++)
    part[k < first[kind] ? 0 : k <= last[kind] ? 1 : 2] *= in->dims[logical[k]];
  if (kind == 0) { /* kept dims in the middle */
    if (part[1] == 1)
      *out = (reduction_form_t){true, {1, 1, part[0] * part[2]}};
    else if (part[2] == 1)
      *out = (reduction_form_t){false, {1, part[0], part[1]}};
    else
      *out = (reduction_form_t){true, {part[0], part[1], part[2]}};
  } else { /* reduced dims in the middle */
    if (part[2] == 1)
      *out = (reduction_form_t){true, {1, part[0], part[1]}};
    else
      *out = (reduction_form_t){false, {part[0], part[1], part[2]}};
  }
  return true;
}

bool kiln_fusion_reduction_is_unnested(const kiln_hlo_instruction_t *r) {
  reduction_form_t f;
  if (!kiln_fusion_is_reduction_hero(r) || !reduction_form(r, &f) ||
      !kiln_reduction_of_complex_ok(r))
    return false;
  return kiln_reduction_faster_than_elemental(f.row, f.d);
}

bool kiln_fusion_reduction_is_race_free(const kiln_hlo_instruction_t *r) {
  reduction_form_t f;
  if (!reduction_form(r, &f)) return false;
  kiln_reduction_dims_t rd = {f.row, {f.d[0], f.d[1], f.d[2]}};
  return kiln_reduction_is_race_free(&rd);
}

/* The reduction hero of a reduction producer (a reduce, or a fusion whose root's hero is
 * one), or NULL. */
static const kiln_hlo_instruction_t *producer_hero(const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_REDUCE) return kiln_fusion_is_reduction_hero(in) ? in : NULL;
  if (in->opcode != KILN_OP_FUSION) return NULL;
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
  if (!c || !c->root) return NULL;
  const kiln_hlo_instruction_t *h = kiln_fusion_hero(c->root);
  return kiln_fusion_is_reduction_hero(h) ? h : NULL;
}

bool kiln_fusion_is_reduction_producer(const kiln_hlo_instruction_t *in) {
  if (!kiln_shape_is_array(in->shape) || in->control_successors.len) return false;
  if (in->opcode == KILN_OP_REDUCE) return kiln_fusion_is_reduction_hero(in);
  if (!kiln_fusion_is_growable(in) || in->fusion_kind != KILN_HLO_FUSION_INPUT) return false;
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
  if (kiln_fusion_computation_has_in_place_hero(c)) return false;
  return producer_hero(in) != NULL;
}

/* Whether every instruction of fused computation `c` that depends on parameter `param`
 * is an epilogue op (and no reduction). */
static bool body_is_epilogue_of(const kiln_hlo_computation_t *c,
                                const kiln_hlo_instruction_t *param) {
  kiln_ptrmap_t dep;
  kiln_ptrmap_init(&dep);
  kiln_ptrmap_put(&dep, param, (void *)1);
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    const kiln_hlo_instruction_t *in = order[i];
    bool d = false;
    for (int k = 0; k < in->num_operands && !d; k++)
      d = kiln_ptrmap_contains(&dep, in->operands[k]);
    if (!d) continue;
    if (!is_epilogue_op(in)) ok = false;
    kiln_ptrmap_put(&dep, in, (void *)1);
  }
  kiln_free(order);
  kiln_ptrmap_free(&dep);
  return ok;
}

/* A fused computation with one parameter and nothing but intermediates otherwise: what
 * XLA lets follow an unnested reduction in its kernel. */
static bool body_is_intermediate_chain(const kiln_hlo_computation_t *c) {
  if (c->num_parameters != 1) return false;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (in->opcode != KILN_OP_PARAMETER && !is_intermediate(in)) return false;
  }
  return true;
}

/* Whether `in` or (for a fusion) any instruction of its body produces complex values. */
static bool makes_complex_values(const kiln_hlo_instruction_t *in) {
  if (kiln_shape_is_array(in->shape) && kiln_elem_type_is_complex(in->shape->type)) return true;
  if (in->opcode != KILN_OP_FUSION) return false;
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
  for (size_t i = 0; c && i < c->instructions.len; i++) {
    const kiln_shape_t *s = c->instructions.data[i]->shape;
    if (kiln_shape_is_array(s) && kiln_elem_type_is_complex(s->type)) return true;
  }
  return false;
}

bool kiln_fusion_can_take_epilogue(const kiln_hlo_instruction_t *consumer,
                                   const kiln_hlo_instruction_t *producer) {
  if (consumer->parent != producer->parent || consumer->num_control_predecessors ||
      consumer->control_successors.len)
    return false;
  /* The reduction emitter takes an epilogue of one-operand intermediates after a
   * race-free reduction (XLA's rule); a reduce it does not take is emitted elementally
   * by the loop emitter, where any elementwise epilogue works. */
  const kiln_hlo_instruction_t *hero = producer_hero(producer);
  bool unnested = hero && kiln_fusion_reduction_is_unnested(hero);
  if (unnested && !kiln_fusion_reduction_is_race_free(hero)) return false;
  /* The reduction emitter's epilogues are real-valued (complex reductions take none); the
   * codegen may pick it for reductions this pass prices as elemental, so no reduction takes a
   * complex-valued epilogue. */
  if (hero && makes_complex_values(consumer)) return false;
  if (consumer->opcode == KILN_OP_FUSION) {
    if (!kiln_fusion_is_growable(consumer) || consumer->fusion_kind != KILN_HLO_FUSION_LOOP)
      return false;
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(consumer, "calls");
    if (kiln_fusion_computation_has_in_place_hero(c) || kiln_fusion_computation_has_reduction(c))
      return false;
    if (unnested) return body_is_intermediate_chain(c);
    for (int k = 0; k < consumer->num_operands && k < c->num_parameters; k++)
      if (consumer->operands[k] == producer && !body_is_epilogue_of(c, c->parameters[k]))
        return false;
    return true;
  }
  if (!kiln_fusion_is_loop_fusible(consumer)) return false;
  return unnested ? is_intermediate(consumer) : is_epilogue_op(consumer);
}

/* The number of the in-place operands of a scatter (its inputs) / dynamic-update-slice. */
static int in_place_operands(const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_SCATTER) return (in->num_operands - 1) / 2;
  if (in->opcode == KILN_OP_DYNAMIC_UPDATE_SLICE) return 1;
  return 0;
}

/* Whether `param` of a fused computation feeds a scatter/dynamic-update-slice as the
 * operand it updates in place. */
static bool param_is_in_place_operand(const kiln_hlo_instruction_t *param) {
  for (size_t u = 0; u < param->users.len; u++) {
    const kiln_hlo_instruction_t *user = param->users.data[u];
    int k = in_place_operands(user);
    for (int i = 0; i < k; i++)
      if (user->operands[i] == param) return true;
  }
  return false;
}

/* Whether `producer` reads `v`: fused into a consumer that updates v in place, it would give
 * the kernel a second read of the buffer it writes, and the update could no longer be made in
 * place (dataflow's only_updated_operand): every run would copy the whole buffer to change a
 * slice. Left as its own kernel it runs before the update (which reads its result). */
static bool reads_value(const kiln_hlo_instruction_t *producer, const kiln_hlo_instruction_t *v) {
  for (int i = 0; i < producer->num_operands; i++)
    if (producer->operands[i] == v) return true;
  return false;
}

bool kiln_fusion_can_consume(const kiln_hlo_instruction_t *consumer,
                             const kiln_hlo_instruction_t *producer, const char **why) {
  const char *dummy;
  if (!why) why = &dummy;
  *why = NULL;
  if (consumer->parent != producer->parent) return (*why = "different computations"), false;
  if (consumer->num_control_predecessors || consumer->control_successors.len)
    return (*why = "consumer has control dependencies"), false;
  if (consumer->opcode == KILN_OP_FUSION) {
    if (!kiln_fusion_is_growable(consumer)) return (*why = "consumer fusion kind"), false;
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(consumer, "calls");
    for (int i = 0; i < consumer->num_operands && i < c->num_parameters; i++) {
      if (!param_is_in_place_operand(c->parameters[i])) continue;
      if (consumer->operands[i] == producer) return (*why = "producer is updated in place"), false;
      if (reads_value(producer, consumer->operands[i]))
        return (*why = "producer reads the buffer updated in place"), false;
    }
    return true;
  }
  if (kiln_fusion_is_bitcast_like(consumer)) return (*why = "consumer is a bitcast"), false;
  if (consumer->opcode == KILN_OP_REDUCE) {
    if (kiln_shape_is_dynamic(consumer->operands[0]->shape)) return (*why = "dynamic shape"), false;
    return true;
  }
  if (consumer->opcode == KILN_OP_SCATTER || consumer->opcode == KILN_OP_DYNAMIC_UPDATE_SLICE) {
    int k = in_place_operands(consumer);
    for (int i = 0; i < k; i++) {
      if (consumer->operands[i] == producer) return (*why = "producer is updated in place"), false;
      if (reads_value(producer, consumer->operands[i]))
        return (*why = "producer reads the buffer updated in place"), false;
    }
    return true;
  }
  if (consumer->opcode == KILN_OP_CONSTANT || consumer->opcode == KILN_OP_PARAMETER)
    return (*why = "not a consumer"), false;
  if (!kiln_fusion_is_loop_fusible(consumer)) return (*why = "consumer cannot be fused"), false;
  return true;
}

int kiln_fusion_body_size(const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_FUSION) {
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
    return c ? (int)c->instructions.len : 1;
  }
  return 1;
}

/* Whether the codegen emits `root` (of a fusion) with the reduction emitter around `hero`:
 * an unnested reduction, race-free unless it is the root itself. */
static bool is_emitted_reduction(const kiln_hlo_instruction_t *root,
                                 const kiln_hlo_instruction_t *hero) {
  if (!kiln_fusion_reduction_is_unnested(hero)) return false;
  /* a complex reduction takes no epilogue */
  return hero == root ||
         (!kiln_reduction_reduces_complex(hero) && kiln_fusion_reduction_is_race_free(hero));
}

/* One output of a fusion (or of a lone op): its element count and, when the reduction
 * emitter would take it, its reduction hero. */
typedef struct root_info {
  const kiln_hlo_instruction_t *root;
  int64_t elems;
  const kiln_hlo_instruction_t *reduction;
  const kiln_hlo_instruction_t *reduce; /* any reduce the walk from the root ends at */
  bool complex;                         /* the output is complex */
} root_info_t;

/* Appends the outputs of `in` to `out` (capacity `cap`); false when there are too many or
 * one is not an array. */
static bool collect_roots(const kiln_hlo_instruction_t *in, root_info_t *out, int *n, int cap) {
  const kiln_hlo_instruction_t *single[1] = {in};
  const kiln_hlo_instruction_t *const *roots = single;
  int nr = 1;
  bool fused = in->opcode == KILN_OP_FUSION;
  if (fused) {
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
    if (!c || !c->root) return false;
    single[0] = c->root;
    if (c->root->opcode == KILN_OP_TUPLE) {
      roots = (const kiln_hlo_instruction_t *const *)c->root->operands;
      nr = c->root->num_operands;
    }
  }
  for (int i = 0; i < nr; i++) {
    if (*n >= cap || !kiln_shape_is_array(roots[i]->shape)) return false;
    const kiln_hlo_instruction_t *w = fused ? walk_up(roots[i]) : roots[i];
    const kiln_hlo_instruction_t *h = kiln_fusion_is_reduction_hero(w) ? w : roots[i];
    out[*n].root = roots[i];
    out[*n].elems = kiln_shape_num_elements(roots[i]->shape);
    out[*n].reduction = is_emitted_reduction(roots[i], h) ? h : NULL;
    out[*n].reduce = w->opcode == KILN_OP_REDUCE && w->num_operands >= 2 ? w : NULL;
    out[*n].complex = kiln_elem_type_is_complex(roots[i]->shape->type);
    (*n)++;
  }
  return true;
}

static bool same_dims(const kiln_shape_t *a, const kiln_shape_t *b);

static bool same_reduction_form(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  reduction_form_t fa, fb;
  if (!reduction_form(a, &fa) || !reduction_form(b, &fb)) return false;
  return fa.row == fb.row && fa.d[0] == fb.d[0] && fa.d[1] == fb.d[1] && fa.d[2] == fb.d[2];
}

/* Bits of an element as the reduction plan counts them (pred is a byte). */
static int plan_bits(kiln_elem_type_t t) {
  return t == KILN_PRED ? 8 : kiln_elem_type_bits(t);
}

static void shape_bits(const kiln_shape_t *s, int *lo, bool *complex) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++) shape_bits(s->elements[i], lo, complex);
    return;
  }
  if (plan_bits(s->type) < *lo) *lo = plan_bits(s->type);
  if (kiln_elem_type_is_complex(s->type)) *complex = true;
}

/* Accumulator bytes per element of reduce `r`: the element sizes of its results (a complex
 * add's two accumulators are the complex element's two halves). */
static int64_t reduce_acc_bytes(const kiln_hlo_instruction_t *r) {
  const kiln_shape_t *s = r->shape;
  if (!kiln_shape_is_tuple(s)) return kiln_elem_type_bits(s->type) / 8;
  int64_t n = 0;
  for (int i = 0; i < s->num_elements; i++) n += kiln_elem_type_bits(s->elements[i]->type) / 8;
  return n;
}

/* Whether the reduction kernel of merging `a` and `b` around `hero` keeps its block-shared
 * tiles within the default device's static shared memory: the plan for the hero's form
 * (kiln_reduction_plan_make, as the codegen plans it) with every distinct reduce among the
 * roots holding accumulators in the tiles (kiln_reduction_shared_bytes, the emitter's tile
 * sizes). Conservative where the merge is not built yet: the smallest input bits are taken
 * over both operand lists (a value one produces for the other only lowers the bound, which
 * can only raise the vector size), and no split (a split only shrinks the tiles). */
static bool reduction_tiles_fit(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b,
                                const root_info_t *roots, int n,
                                const kiln_hlo_instruction_t *hero) {
  reduction_form_t form;
  if (!reduction_form(hero, &form)) return false;
  kiln_reduction_dims_t rd = {form.row, {form.d[0], form.d[1], form.d[2]}};
  kiln_reduction_facts_t f = {.input_bits_min = 1 << 30, .output_bits_min = 1 << 30};
  const kiln_hlo_instruction_t *both[2] = {a, b};
  for (int j = 0; j < 2; j++) {
    for (int k = 0; k < both[j]->num_operands; k++)
      shape_bits(both[j]->operands[k]->shape, &f.input_bits_min, &f.complex);
    shape_bits(both[j]->shape, &f.output_bits_min, &f.complex);
  }
  int64_t acc_bytes = 0;
  for (int i = 0; i < n; i++) {
    const kiln_hlo_instruction_t *r = roots[i].reduction ? roots[i].reduction : roots[i].reduce;
    bool seen = false;
    for (int j = 0; j < i && r && !seen; j++)
      seen = r == (roots[j].reduction ? roots[j].reduction : roots[j].reduce);
    if (!r || seen) continue;
    acc_bytes += reduce_acc_bytes(r);
    for (int k = 0; k < r->num_operands; k++)
      f.complex |= kiln_elem_type_is_complex(r->operands[k]->shape->type);
  }
  kiln_reduction_plan_t plan;
  kiln_reduction_plan_make(&rd, &f, 0, &plan);
  return kiln_reduction_shared_bytes(&plan, &rd, acc_bytes) <=
         kiln_launch_shared_bytes_limit(NULL, false);
}

bool kiln_fusion_can_share_kernel(const kiln_hlo_instruction_t *a,
                                  const kiln_hlo_instruction_t *b) {
  root_info_t roots[2 * KILN_FUSION_MAX_OPERANDS];
  int n = 0;
  if (!collect_roots(a, roots, &n, 2 * KILN_FUSION_MAX_OPERANDS) ||
      !collect_roots(b, roots, &n, 2 * KILN_FUSION_MAX_OPERANDS))
    return false;
  const kiln_hlo_instruction_t *hero = NULL;
  for (int i = 0; i < n && !hero; i++) hero = roots[i].reduction;
  /* With a reduction: every other output is a reduction of the same form or is shaped
   * like the reduction's input. Without: a loop kernel, one element count for all. */
  int64_t elems = hero ? kiln_shape_num_elements(hero->operands[0]->shape) : roots[0].elems;
  for (int i = 0; i < n; i++) {
    if (roots[i].reduction) {
      if (!same_reduction_form(roots[i].reduction, hero)) return false;
    } else if (roots[i].elems != elems) {
      return false;
    } else if (hero && roots[i].complex) {
      /* The reduction emitter writes its other outputs one scalar per element: a complex
       * one (fuzz 2962480: a c64 transpose beside a c64 reduction) does not compile. */
      return false;
    } else if (hero && roots[i].reduce && !same_reduction_form(roots[i].reduce, hero)) {
      /* The reduction emitter reduces every reduce it finds at a root's end in the hero's
       * [R0, K, R2] form: one of another form (a reduce over size-1 dims) does not fit. */
      return false;
    }
  }
  return !hero || reduction_tiles_fit(a, b, roots, n, hero);
}

/* A sort, or one of its outputs: what the sort emitter takes at the root. */
static bool is_sort_output(const kiln_hlo_instruction_t *x) {
  return x->opcode == KILN_OP_SORT ||
         (x->opcode == KILN_OP_GET_TUPLE_ELEMENT && x->num_operands == 1 &&
          x->operands[0]->opcode == KILN_OP_SORT);
}

bool kiln_fusion_hero_off_root(const kiln_hlo_instruction_t *f) {
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(f, "calls");
  if (!c || !c->root) return false;
  const kiln_hlo_instruction_t *r = c->root;
  bool sort_at_root = is_sort_output(r);
  for (int i = 0; r->opcode == KILN_OP_TUPLE && i < r->num_operands; i++)
    sort_at_root |= is_sort_output(r->operands[i]);
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (!in) continue;
    if (in->opcode == KILN_OP_SCATTER && in != r) return true;
    if (in->opcode == KILN_OP_SORT && !sort_at_root) return true;
  }
  return false;
}

static bool is_unit_slice(const kiln_hlo_instruction_t *x) {
  if (x->opcode != KILN_OP_SLICE || x->num_operands != 1) return false;
  for (int i = 0; i < x->num_slice_dims; i++)
    if (x->slice[i].stride != 1) return false;
  return true;
}

/* The input-slices emitter's outputs: unit-stride slices of one input shape, and values of
 * that shape (whole windows), at least one a slice. */
static bool input_slices(const root_info_t *roots, int n) {
  const kiln_shape_t *window = NULL;
  for (int i = 0; i < n && !window; i++)
    if (is_unit_slice(roots[i].root)) window = roots[i].root->operands[0]->shape;
  for (int i = 0; i < n && window; i++) {
    const kiln_hlo_instruction_t *r = roots[i].root;
    if (r->opcode == KILN_OP_SLICE && !is_unit_slice(r)) return false;
    if (!kiln_shape_equal(is_unit_slice(r) ? r->operands[0]->shape : r->shape, window, false))
      return false;
  }
  return window != NULL;
}

bool kiln_fusion_outputs_fit_one_kernel(const kiln_hlo_instruction_t *f) {
  root_info_t roots[KILN_FUSION_MAX_OUTPUTS_CHECKED];
  int n = 0;
  if (!collect_roots(f, roots, &n, KILN_FUSION_MAX_OUTPUTS_CHECKED)) return true;
  /* With a scatter, sort or dynamic-update-slice the codegen picks those emitters first;
   * they take outputs of several sizes or name what they refuse. Without a reduce, outputs
   * of several sizes are otherwise input slices or no kernel's. */
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(f, "calls");
  bool any_reduce = false;
  for (size_t i = 0; i < c->instructions.len; i++) {
    if (!c->instructions.data[i]) continue;
    kiln_hlo_opcode_t op = c->instructions.data[i]->opcode;
    if (op == KILN_OP_SCATTER || op == KILN_OP_SORT || op == KILN_OP_DYNAMIC_UPDATE_SLICE)
      return true;
    any_reduce |= op == KILN_OP_REDUCE;
  }
  if (!any_reduce) {
    for (int i = 1; i < n; i++)
      if (roots[i].elems != roots[0].elems) return input_slices(roots, n);
    return true;
  }
  const kiln_hlo_instruction_t *hero = NULL;
  for (int i = 0; i < n && !hero; i++) hero = roots[i].reduction;
  if (hero) {
    int64_t elems = kiln_shape_num_elements(hero->operands[0]->shape);
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
      ok = roots[i].reduction ? same_reduction_form(roots[i].reduction, hero)
                              : roots[i].elems == elems;
    if (ok) return true;
  }
  for (int i = 1; i < n; i++)
    if (roots[i].elems != roots[0].elems) return false;
  return true;
}

bool kiln_fusion_loop_shape(const kiln_hlo_instruction_t *in, kiln_fusion_loop_shape_t *out) {
  memset(out, 0, sizeof *out);
  const kiln_hlo_instruction_t *roots[1] = {in};
  const kiln_hlo_instruction_t *const *r = roots;
  int nr = 1;
  if (in->opcode == KILN_OP_FUSION) {
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, "calls");
    if (!c || !c->root) return false;
    if (c->root->opcode == KILN_OP_TUPLE) {
      r = (const kiln_hlo_instruction_t *const *)c->root->operands;
      nr = c->root->num_operands;
    } else {
      roots[0] = c->root;
    }
  }
  for (int i = 0; i < nr; i++) {
    const kiln_hlo_instruction_t *h = in->opcode == KILN_OP_FUSION ? kiln_fusion_hero(r[i]) : r[i];
    if (is_emitted_reduction(r[i], h)) {
      out->reduction = true;
      out->shape = h->operands[0]->shape;
      out->reduce_dims = &h->dimensions;
      return true;
    }
  }
  for (int i = 0; i < nr; i++) {
    const kiln_shape_t *s = r[i]->shape;
    if (kiln_shape_is_array(s)) {
      out->shape = s;
      return true;
    }
  }
  return false;
}

static bool same_dims(const kiln_shape_t *a, const kiln_shape_t *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool kiln_fusion_loop_shapes_compatible(const kiln_fusion_loop_shape_t *a,
                                        const kiln_fusion_loop_shape_t *b) {
  if (!a->shape || !b->shape) return false;
  if (!same_dims(a->shape, b->shape)) return false;
  if (a->reduction && b->reduction) {
    if (a->reduce_dims->n != b->reduce_dims->n) return false;
    for (int i = 0; i < a->reduce_dims->n; i++)
      if (a->reduce_dims->v[i] != b->reduce_dims->v[i]) return false;
  }
  return true;
}

/* ---- kernels ---- */

static bool calls_sequential(const kiln_hlo_instruction_t *in) {
  return in->opcode == KILN_OP_WHILE || in->opcode == KILN_OP_CONDITIONAL ||
         in->opcode == KILN_OP_CALL || in->opcode == KILN_OP_ASYNC_START;
}

kiln_hlo_computation_t **kiln_fusion_sequential_computations(const kiln_hlo_module_t *m,
                                                             size_t *out_n) {
  KILN_VEC(kiln_hlo_computation_t *) list = {0};
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  if (m->entry) {
    kiln_vec_push(&list, m->entry);
    kiln_ptrmap_put(&seen, m->entry, (void *)1);
  }
  for (size_t k = 0; k < list.len; k++) {
    kiln_hlo_computation_t *c = list.data[k];
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_hlo_instruction_t *in = c->instructions.data[i];
      if (!calls_sequential(in)) continue;
      for (int g = 0; g < in->num_called_groups; g++)
        for (int j = 0; j < in->called_groups[g].n; j++) {
          kiln_hlo_computation_t *callee = in->called_groups[g].comps[j];
          if (!callee || kiln_ptrmap_contains(&seen, callee)) continue;
          kiln_ptrmap_put(&seen, callee, (void *)1);
          kiln_vec_push(&list, callee);
        }
    }
  }
  kiln_ptrmap_free(&seen);
  *out_n = list.len;
  if (!list.data) return kiln_malloc(sizeof(kiln_hlo_computation_t *));
  return list.data;
}

kiln_status kiln_fusion_run_on_computations(kiln_hlo_module_t *m, const char *what,
                                            kiln_fusion_computation_fn fn, bool *changed) {
  kiln_fusion_make_arena_room(m);
  size_t n = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &n);
  kiln_fusion_scope_t scope;
  kiln_ptrmap_init(&scope.retired);
  kiln_ptrmap_init(&scope.callers);
  kiln_pass_count_callers(m, &scope.callers);
  kiln_status st = NULL;
  bool any = false;
  for (size_t i = 0; i < n && !st; i++) {
    bool ch = false;
    st = fn(comps[i], &scope, &ch);
    if (st) st = kiln_status_annotate(st, "%s of '%s'", what, comps[i]->name);
    any |= ch;
  }
  kiln_fusion_remove_retired(m, &scope.retired);
  kiln_ptrmap_free(&scope.retired);
  kiln_ptrmap_free(&scope.callers);
  kiln_free(comps);
  if (changed) *changed = *changed || any;
  return st;
}

bool kiln_fusion_is_kernel(const kiln_hlo_instruction_t *in) {
  if (kiln_fusion_is_free(in) || calls_sequential(in)) return false;
  switch (in->opcode) {
    case KILN_OP_ASYNC_UPDATE:
    case KILN_OP_ASYNC_DONE:
    case KILN_OP_ALL_GATHER_DONE:
    case KILN_OP_ALL_REDUCE_DONE:
    case KILN_OP_COLLECTIVE_PERMUTE_DONE:
    case KILN_OP_COPY_DONE:
    case KILN_OP_CUSTOM_CALL_DONE:
    case KILN_OP_CUSTOM_CALL_UPDATE:
    case KILN_OP_RECV_DONE:
    case KILN_OP_SEND_DONE:
      return false;
    default:
      return true;
  }
}

int64_t kiln_fusion_count_kernels(const kiln_hlo_module_t *m) {
  size_t n = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &n);
  int64_t count = 0;
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < comps[k]->instructions.len; i++)
      if (kiln_fusion_is_kernel(comps[k]->instructions.data[i])) count++;
  kiln_free(comps);
  return count;
}

/* ---- building fusions ---- */

enum { MEMBER = 1, DUPLICATE = 2 };

static uintptr_t member_flags(const kiln_ptrmap_t *set, const kiln_hlo_instruction_t *in) {
  return (uintptr_t)kiln_ptrmap_get(set, in);
}

/* Members in an order where operands come before users (DFS over member operands). */
static void order_members(const instr_vec_t *members, const kiln_ptrmap_t *set, instr_vec_t *out) {
  kiln_ptrmap_t state;
  kiln_ptrmap_init(&state);
  typedef struct frame {
    kiln_hlo_instruction_t *in;
    int next;
  } frame_t;
  KILN_VEC(frame_t) stack = {0};
  for (size_t r = 0; r < members->len; r++) {
    kiln_hlo_instruction_t *start = members->data[r];
    if (kiln_ptrmap_contains(&state, start)) continue;
    kiln_ptrmap_put(&state, start, (void *)1);
    kiln_vec_push(&stack, ((frame_t){start, 0}));
    while (stack.len) {
      frame_t *f = &stack.data[stack.len - 1];
      if (f->next < f->in->num_operands) {
        kiln_hlo_instruction_t *op = f->in->operands[f->next++];
        if (!member_flags(set, op) || kiln_ptrmap_contains(&state, op)) continue;
        kiln_ptrmap_put(&state, op, (void *)1);
        kiln_vec_push(&stack, ((frame_t){op, 0}));
      } else {
        kiln_vec_push(out, f->in);
        stack.len--;
      }
    }
  }
  kiln_vec_free(&stack);
  kiln_ptrmap_free(&state);
}

typedef struct builder {
  kiln_hlo_module_t *m;
  kiln_hlo_computation_t *fc;
  kiln_ptrmap_t val; /* original (member or outside value) -> instruction in fc */
  instr_vec_t params, operands;
  kiln_ptrmap_t *made_on_demand; /* when set: parameters and constants outside_value made */
  /* When set (growing in place): call counts; a member fusion (not duplicated) whose fused
   * computation only it calls has its instructions moved in instead of cloned. */
  const kiln_ptrmap_t *callers;
  /* Set by fusion_set_root when the root is a variadic scatter whose results are the outputs
   * (all or some of them): output i is then element slot[i] of the fusion's tuple. */
  bool scatter_root;
  int64_t *slot;
} builder_t;

/* The fusion result element output i of n becomes (-1: the whole result). */
static int64_t output_slot(const builder_t *b, size_t i, size_t n) {
  if (b->scatter_root) return b->slot[i];
  return n == 1 ? -1 : (int64_t)i;
}

/* The fused computation's value for an instruction outside the set: a parameter (created
 * on first use) or, for a scalar constant, a clone of it. */
static kiln_hlo_instruction_t *outside_value(builder_t *b, kiln_hlo_instruction_t *op) {
  kiln_hlo_instruction_t *v = kiln_ptrmap_get(&b->val, op);
  if (v) return v;
  if (op->opcode == KILN_OP_CONSTANT && kiln_shape_is_array(op->shape) && op->shape->rank == 0 &&
      op->literal && !op->literal->unknown) {
    v = kiln_hlo_instruction_clone(b->fc, op, NULL, 0, NULL);
  } else {
    char name[32];
    snprintf(name, sizeof name, "param_%zu", b->params.len);
    v = kiln_hlo_instruction_create(b->fc, KILN_OP_PARAMETER, op->shape,
                                    kiln_hlo_module_unique_name(b->m, name));
    if (!v) return NULL;
    v->parameter_number = (int64_t)b->params.len;
    kiln_vec_push(&b->params, v);
    kiln_vec_push(&b->operands, op);
  }
  if (v) kiln_ptrmap_put(&b->val, op, v);
  if (v && b->made_on_demand) kiln_ptrmap_put(b->made_on_demand, v, (void *)1);
  return v;
}

static kiln_hlo_instruction_t *value_of(builder_t *b, kiln_hlo_instruction_t *op,
                                        const kiln_ptrmap_t *set) {
  uintptr_t f = member_flags(set, op);
  if (f) return kiln_ptrmap_get(&b->val, op);
  return outside_value(b, op);
}

/* Clones fused computation `body` of member fusion `fus` into the builder; returns the
 * clone of its root. */
static kiln_hlo_instruction_t *inline_fusion(builder_t *b, kiln_hlo_instruction_t *fus,
                                             const kiln_hlo_computation_t *body,
                                             const kiln_ptrmap_t *set) {
  kiln_ptrmap_t sub;
  kiln_ptrmap_init(&sub);
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(body, &n);
  instr_vec_t ops = {0};
  kiln_hlo_instruction_t *root = NULL;
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    kiln_hlo_instruction_t *s = order[i];
    if (s->opcode == KILN_OP_PARAMETER) continue;
    kiln_vec_clear(&ops);
    for (int k = 0; k < s->num_operands; k++) {
      kiln_hlo_instruction_t *o = s->operands[k], *v;
      if (o->opcode == KILN_OP_PARAMETER && o->parent == body) {
        int64_t p = o->parameter_number;
        if (p < 0 || p >= fus->num_operands) {
          ok = false;
          break;
        }
        v = value_of(b, fus->operands[p], set);
      } else {
        v = kiln_ptrmap_get(&sub, o);
      }
      if (!v) {
        ok = false;
        break;
      }
      kiln_vec_push(&ops, v);
    }
    if (!ok) break;
    kiln_hlo_instruction_t *d =
        kiln_hlo_instruction_clone(b->fc, s, NULL, s->num_operands, ops.data);
    if (!d)
      ok = false;
    else
      kiln_ptrmap_put(&sub, s, d);
  }
  if (ok) {
    if (body->root->opcode == KILN_OP_PARAMETER) {
      int64_t p = body->root->parameter_number;
      root = p >= 0 && p < fus->num_operands ? value_of(b, fus->operands[p], set) : NULL;
    } else {
      root = kiln_ptrmap_get(&sub, body->root);
    }
  }
  kiln_vec_free(&ops);
  kiln_free(order);
  kiln_ptrmap_free(&sub);
  return root;
}

/* Removes instructions of `c` that nothing uses (not the root, not parameters). */
static void remove_dead(kiln_hlo_computation_t *c) {
  bool again = true;
  while (again) {
    again = false;
    for (size_t i = c->instructions.len; i-- > 0;) {
      kiln_hlo_instruction_t *in = c->instructions.data[i];
      if (in == c->root || in->opcode == KILN_OP_PARAMETER || in->users.len ||
          in->control_successors.len)
        continue;
      kiln_status s = kiln_hlo_instruction_remove(in);
      if (s)
        kiln_status_free(s);
      else
        again = true;
    }
  }
}

/* kiln_fusion_create, step 1: the member set (flags MEMBER / DUPLICATE) and list, with the
 * get-tuple-element users of multi-output members; checks that members can be fused. */
static kiln_status fusion_collect_members(const kiln_hlo_computation_t *c, int n,
                                          kiln_hlo_instruction_t *const *members,
                                          const bool *duplicate, kiln_ptrmap_t *set,
                                          instr_vec_t *list) {
  for (int i = 0; i < n; i++) {
    kiln_hlo_instruction_t *in = members[i];
    if (in->parent != c)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "'%s' is not in computation '%s'", in->name,
                              c->name);
    if (in->opcode == KILN_OP_PARAMETER || in->num_control_predecessors ||
        in->control_successors.len)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "'%s' cannot be fused", in->name);
    if (!member_flags(set, in)) {
      kiln_ptrmap_put(set, in,
                      (void *)(uintptr_t)(MEMBER | (duplicate && duplicate[i] ? DUPLICATE : 0)));
      kiln_vec_push(list, in);
    }
  }
  /* Multi-output members bring their get-tuple-element users. */
  for (size_t i = 0; i < list->len; i++) {
    kiln_hlo_instruction_t *in = list->data[i];
    if (in->opcode != KILN_OP_FUSION || !kiln_shape_is_tuple(in->shape)) continue;
    if (member_flags(set, in) & DUPLICATE) continue;
    for (size_t u = 0; u < in->users.len; u++) {
      kiln_hlo_instruction_t *g = in->users.data[u];
      if (g->opcode != KILN_OP_GET_TUPLE_ELEMENT || member_flags(set, g)) continue;
      if (g->num_control_predecessors || g->control_successors.len) continue;
      kiln_ptrmap_put(set, g, (void *)(uintptr_t)MEMBER);
      kiln_vec_push(list, g);
    }
  }
  for (size_t i = 0; i < list->len; i++) {
    kiln_hlo_instruction_t *in = list->data[i];
    if (!(member_flags(set, in) & DUPLICATE)) continue;
    for (int k = 0; k < in->num_operands; k++)
      if (member_flags(set, in->operands[k]))
        return kiln_status_make(KILN_INVALID_ARGUMENT, "duplicated member '%s' reads member '%s'",
                                in->name, in->operands[k]->name);
  }
  return NULL;
}

/* A variadic scatter, or a fusion whose root is one. */
static bool is_scatter_value(const kiln_hlo_instruction_t *x) {
  if (x->opcode == KILN_OP_SCATTER) return true;
  const kiln_hlo_computation_t *f =
      x->opcode == KILN_OP_FUSION ? kiln_hlo_instruction_called(x, "calls") : NULL;
  return f && f->root && f->root->opcode == KILN_OP_SCATTER;
}

/* Step 2: the outputs, members (not duplicated) used outside the set or being c's root. */
static kiln_status fusion_find_outputs(const kiln_hlo_computation_t *c, const instr_vec_t *order,
                                       kiln_ptrmap_t *set, instr_vec_t *outputs) {
  for (size_t i = 0; i < order->len; i++) {
    kiln_hlo_instruction_t *in = order->data[i];
    if (member_flags(set, in) & DUPLICATE) continue;
    bool outside = in == c->root;
    for (size_t u = 0; u < in->users.len && !outside; u++)
      if (!member_flags(set, in->users.data[u])) outside = true;
    if (outside) kiln_vec_push(outputs, in);
  }
  if (!outputs->len)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "fusion of '%s' would have no output",
                            order->data[0]->name);
  /* Outputs that are all get-tuple-elements of one variadic scatter (a multi-output member's
   * users, brought in with it) go in tuple order, so the root can be the scatter itself
   * (fusion_set_root): a variadic scatter fused with a producer of its updates kept its users'
   * order, and the scatter emitter wants the scatter as the root. */
  const kiln_hlo_instruction_t *x = NULL;
  bool one_source = true;
  for (size_t i = 0; i < outputs->len && one_source; i++) {
    const kiln_hlo_instruction_t *g = outputs->data[i];
    one_source = g->opcode == KILN_OP_GET_TUPLE_ELEMENT && g->num_operands == 1 &&
                 is_scatter_value(g->operands[0]) && (!x || g->operands[0] == x);
    x = one_source ? g->operands[0] : x;
  }
  for (size_t i = 1; i < outputs->len && one_source; i++) /* insertion sort: a handful */
    for (size_t j = i; j > 0 && outputs->data[j - 1]->tuple_index > outputs->data[j]->tuple_index;
         j--) {
      kiln_hlo_instruction_t *t = outputs->data[j];
      outputs->data[j] = outputs->data[j - 1];
      outputs->data[j - 1] = t;
    }
  for (size_t i = 0; i < outputs->len && outputs->len > 1; i++)
    if (!kiln_shape_is_array(outputs->data[i]->shape))
      return kiln_status_make(KILN_UNIMPLEMENTED,
                              "multi-output fusion with tuple-shaped output '%s'",
                              outputs->data[i]->name);
  return NULL;
}

static bool has_control_edges(const kiln_hlo_computation_t *body);

/* Whether member fusion `fus`'s instructions can move into b->fc (kiln_fusion_merge): it
 * goes away with the merge and nothing else calls its fused computation. */
static bool movable_body(const builder_t *b, const kiln_hlo_instruction_t *fus,
                         const kiln_hlo_computation_t *body, const kiln_ptrmap_t *set) {
  if (!b->callers || (member_flags(set, fus) & DUPLICATE) || fus->num_called_groups != 1)
    return false;
  if (body == b->fc || (intptr_t)kiln_ptrmap_get(b->callers, body) > 1) return false;
  if (!body->root || body->num_parameters != fus->num_operands) return false;
  return !has_control_edges(body);
}

/* inline_fusion without copies: moves the instructions of `body` (in the order
 * inline_fusion clones them) into b->fc, their parameters replaced by the values of `fus`'s
 * operands; `body` is left holding its parameters only (it is retired with `fus`). */
static kiln_hlo_instruction_t *move_fusion_body(builder_t *b, kiln_hlo_instruction_t *fus,
                                                kiln_hlo_computation_t *body,
                                                const kiln_ptrmap_t *set) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(body, &n);
  kiln_hlo_instruction_t *root = NULL;
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    kiln_hlo_instruction_t *s = order[i];
    if (s->opcode == KILN_OP_PARAMETER) continue;
    for (int k = 0; k < s->num_operands && ok; k++) {
      kiln_hlo_instruction_t *o = s->operands[k];
      if (o->opcode != KILN_OP_PARAMETER || o->parent != body) continue;
      int64_t p = o->parameter_number;
      kiln_hlo_instruction_t *v =
          p >= 0 && p < fus->num_operands ? value_of(b, fus->operands[p], set) : NULL;
      if (!v) {
        ok = false;
        break;
      }
      s->operands[k] = v;
      bool have = false;
      for (size_t u = 0; u < v->users.len && !have; u++) have = v->users.data[u] == s;
      if (!have) kiln_vec_push(&v->users, s);
    }
    s->parent = b->fc;
    s->name =
        kiln_hlo_module_unique_name(b->m, s->name); /* parsed names repeat across computations */
    kiln_vec_push(&b->fc->instructions, s);
  }
  if (ok) {
    if (body->root->opcode == KILN_OP_PARAMETER) {
      int64_t p = body->root->parameter_number;
      root = p >= 0 && p < fus->num_operands ? value_of(b, fus->operands[p], set) : NULL;
    } else {
      root = body->root;
    }
  }
  /* The body keeps its parameters (their user lists name moved instructions; nothing reads
   * them again) and no root of its own. */
  size_t w = 0;
  for (size_t i = 0; i < body->instructions.len; i++)
    if (body->instructions.data[i]->parent == body)
      body->instructions.data[w++] = body->instructions.data[i];
  body->instructions.len = w;
  kiln_free(order);
  return root;
}

/* The value of member `in` in b->fc: its clone, the clone of its fused computation's root
 * (the body inlined, the computation added to `retired`), or for a get-tuple-element of a
 * member whose value is a tuple, that tuple's operand. */
static kiln_status clone_member(builder_t *b, kiln_hlo_instruction_t *in, const kiln_ptrmap_t *set,
                                kiln_ptrmap_t *retired) {
  kiln_hlo_instruction_t *v = NULL;
  const kiln_hlo_computation_t *body =
      in->opcode == KILN_OP_FUSION ? kiln_hlo_instruction_called(in, "calls") : NULL;
  if (body) {
    kiln_hlo_computation_t *own = kiln_hlo_instruction_called(in, "calls");
    v = movable_body(b, in, own, set) ? move_fusion_body(b, in, own, set)
                                      : inline_fusion(b, in, body, set);
    if (retired) kiln_ptrmap_put(retired, (void *)body, (void *)1);
  } else {
    kiln_hlo_instruction_t *t =
        in->opcode == KILN_OP_GET_TUPLE_ELEMENT && member_flags(set, in->operands[0])
            ? kiln_ptrmap_get(&b->val, in->operands[0])
            : NULL;
    if (t && t->opcode == KILN_OP_TUPLE && in->tuple_index >= 0 &&
        in->tuple_index < t->num_operands) {
      v = t->operands[in->tuple_index];
    } else {
      kiln_hlo_instruction_t *small[8], **ops = small;
      if (in->num_operands > 8) ops = kiln_malloc(sizeof *ops * (size_t)in->num_operands);
      int k = 0;
      for (; k < in->num_operands; k++)
        if (!(ops[k] = value_of(b, in->operands[k], set))) break;
      if (k == in->num_operands) v = kiln_hlo_instruction_clone(b->fc, in, NULL, k, ops);
      if (ops != small) kiln_free(ops);
    }
  }
  if (!v)
    return kiln_status_make(b->m->arena.limit ? KILN_RESOURCE_EXHAUSTED : KILN_INTERNAL,
                            "could not clone '%s' into a fusion (module arena: %zu of %zu bytes)",
                            in->name, b->m->arena.total, b->m->arena.limit);
  kiln_ptrmap_put(&b->val, in, v);
  return NULL;
}

/* Step 3: the fused computation b->fc with a clone of every member, in `order` (fusions
 * inlined, their computations added to `retired`). */
static kiln_status fusion_clone_members(builder_t *b, const instr_vec_t *order, kiln_ptrmap_t *set,
                                        kiln_ptrmap_t *retired) {
  kiln_hlo_module_t *m = b->m;
  b->fc = kiln_hlo_computation_create(m, kiln_hlo_module_unique_name(m, "fused_computation"));
  if (!b->fc) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory creating a fusion");
  kiln_status st = NULL;
  for (size_t i = 0; i < order->len && !st; i++) st = clone_member(b, order->data[i], set, retired);
  return st;
}

/* Step 4: the fused computation's root (one output, or a tuple of them), dead clones and
 * unread parameters removed, the rest renumbered. */
/* The fused computation's root: the value of the one output, or a tuple of them. */
static kiln_status fusion_set_root(builder_t *b, const instr_vec_t *outputs) {
  kiln_hlo_module_t *m = b->m;
  /* get-tuple-elements of one variadic scatter, in increasing order (every element or some):
   * the scatter is the root (the scatter emitter's form; other ops keep their tuple root), and
   * a result nobody reads is an output all the same. */
  kiln_hlo_instruction_t *whole = NULL;
  for (size_t i = 0, prev = 0; i < outputs->len; i++) {
    kiln_hlo_instruction_t *v = kiln_ptrmap_get(&b->val, outputs->data[i]);
    bool next = v && v->opcode == KILN_OP_GET_TUPLE_ELEMENT && v->num_operands == 1 &&
                v->tuple_index >= 0 &&
                (!i || (v->operands[0] == whole && (size_t)v->tuple_index > prev));
    whole = next ? v->operands[0] : NULL;
    if (!whole) break;
    prev = (size_t)v->tuple_index;
  }
  if (whole && whole->opcode == KILN_OP_SCATTER && kiln_shape_is_tuple(whole->shape) &&
      whole->shape->num_elements >= (int)outputs->len) {
    b->fc->root = whole;
    b->scatter_root = true;
    b->slot = kiln_arena_alloc(&m->arena, sizeof(int64_t) * outputs->len);
    if (!b->slot) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory in fusion");
    for (size_t i = 0; i < outputs->len; i++)
      b->slot[i] =
          ((kiln_hlo_instruction_t *)kiln_ptrmap_get(&b->val, outputs->data[i]))->tuple_index;
  } else if (outputs->len == 1) {
    b->fc->root = kiln_ptrmap_get(&b->val, outputs->data[0]);
  } else {
    kiln_shape_t **shapes = kiln_arena_alloc(&m->arena, sizeof(kiln_shape_t *) * outputs->len);
    instr_vec_t vals = {0};
    for (size_t i = 0; i < outputs->len; i++) {
      kiln_hlo_instruction_t *v = kiln_ptrmap_get(&b->val, outputs->data[i]);
      shapes[i] = v->shape;
      kiln_vec_push(&vals, v);
    }
    kiln_shape_t *ts = kiln_shape_make_tuple(&m->arena, (int)outputs->len, shapes);
    kiln_hlo_instruction_t *t = kiln_hlo_instruction_create(
        b->fc, KILN_OP_TUPLE, ts, kiln_hlo_module_unique_name(m, "tuple"));
    kiln_hlo_instruction_set_operands(t, (int)vals.len, vals.data);
    kiln_vec_free(&vals);
    b->fc->root = t;
  }
  /* A root that is a parameter (a member that only forwards) needs a real instruction. */
  if (b->fc->root->opcode == KILN_OP_PARAMETER)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "fusion root would be a parameter");
  return NULL;
}

static kiln_status fusion_finish_computation(builder_t *b, const instr_vec_t *outputs) {
  kiln_hlo_module_t *m = b->m;
  KILN_RETURN_IF_ERROR_PLAIN(fusion_set_root(b, outputs));
  remove_dead(b->fc);
  /* Drop parameters nothing reads any more and renumber the rest. */
  size_t w = 0;
  for (size_t i = 0; i < b->params.len; i++) {
    kiln_hlo_instruction_t *p = b->params.data[i];
    if (!p->users.len && p != b->fc->root) {
      kiln_status r = kiln_hlo_instruction_remove(p);
      if (r) kiln_status_free(r);
      continue;
    }
    p->parameter_number = (int64_t)w;
    b->params.data[w] = p;
    b->operands.data[w] = b->operands.data[i];
    w++;
  }
  b->params.len = b->operands.len = w;
  b->fc->num_parameters = (int)b->params.len;
  b->fc->parameters =
      kiln_arena_alloc(&m->arena, sizeof(kiln_hlo_instruction_t *) * (b->params.len + 1));
  for (size_t i = 0; i < b->params.len; i++) b->fc->parameters[i] = b->params.data[i];
  kiln_hlo_computation_sort_post_order(b->fc);
  return NULL;
}

/* Removes the members (not duplicated, not `keep`), users first. */
static kiln_status remove_members(const instr_vec_t *order, const kiln_ptrmap_t *set,
                                  const kiln_hlo_instruction_t *keep) {
  for (size_t i = order->len; i-- > 0;) {
    kiln_hlo_instruction_t *in = order->data[i];
    if (in == keep || (member_flags(set, in) & DUPLICATE)) continue;
    kiln_status r = kiln_hlo_instruction_remove(in);
    if (r) {
      kiln_status st = kiln_status_make(KILN_INTERNAL, "fusion left '%s' in place: %s", in->name,
                                        kiln_status_message(r));
      kiln_status_free(r);
      return st;
    }
  }
  return NULL;
}

/* Step 5: the fusion instruction in c, the outputs' uses moved to it (or to its
 * get-tuple-elements) and the members (not duplicated) removed. */
static kiln_status fusion_replace_members(kiln_hlo_computation_t *c, builder_t *b,
                                          const instr_vec_t *order, kiln_ptrmap_t *set,
                                          const instr_vec_t *outputs,
                                          kiln_hlo_instruction_t **out_fusion) {
  kiln_hlo_module_t *m = b->m;
  kiln_hlo_instruction_t *fusion = kiln_hlo_instruction_create(
      c, KILN_OP_FUSION, b->fc->root->shape, kiln_hlo_module_unique_name(m, "fusion"));
  kiln_hlo_instruction_set_operands(fusion, (int)b->operands.len, b->operands.data);
  kiln_hlo_instruction_add_called(fusion, "calls", false, 1, &b->fc);
  fusion->fusion_kind = kiln_fusion_kind_for(b->fc);

  for (size_t i = 0; i < outputs->len; i++) {
    kiln_hlo_instruction_t *o = outputs->data[i], *g = fusion;
    int64_t slot = output_slot(b, i, outputs->len);
    if (slot >= 0) {
      g = kiln_hlo_instruction_create(c, KILN_OP_GET_TUPLE_ELEMENT, o->shape,
                                      kiln_hlo_module_unique_name(m, "get-tuple-element"));
      g->tuple_index = slot;
      kiln_hlo_instruction_set_operands(g, 1, &fusion);
    }
    kiln_hlo_instruction_replace_all_uses(o, g);
  }
  *out_fusion = fusion;
  return remove_members(order, set, NULL);
}

kiln_status kiln_fusion_create(kiln_hlo_computation_t *c, int n,
                               kiln_hlo_instruction_t *const *members, const bool *duplicate,
                               kiln_ptrmap_t *retired, kiln_hlo_instruction_t **out_fusion) {
  *out_fusion = NULL;
  if (n <= 0) return kiln_status_make(KILN_INVALID_ARGUMENT, "a fusion needs members");
  kiln_ptrmap_t set;
  kiln_ptrmap_init(&set);
  instr_vec_t list = {0}, order = {0}, outputs = {0};
  builder_t b = {.m = c->module};
  kiln_ptrmap_init(&b.val);
  kiln_status st = fusion_collect_members(c, n, members, duplicate, &set, &list);
  if (!st) {
    order_members(&list, &set, &order);
    st = fusion_find_outputs(c, &order, &set, &outputs);
  }
  if (!st) st = fusion_clone_members(&b, &order, &set, retired);
  if (!st) st = fusion_finish_computation(&b, &outputs);
  if (!st) st = fusion_replace_members(c, &b, &order, &set, &outputs, out_fusion);
  kiln_vec_free(&list);
  kiln_vec_free(&order);
  kiln_vec_free(&outputs);
  kiln_vec_free(&b.params);
  kiln_vec_free(&b.operands);
  kiln_ptrmap_free(&b.val);
  kiln_ptrmap_free(&set);
  return st;
}

/* ---- growing a fusion in place (kiln_fusion_merge) ---- */

/* Whether fused computation `body` has control edges (the copy path drops them). */
static bool has_control_edges(const kiln_hlo_computation_t *body) {
  for (size_t i = 0; i < body->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = body->instructions.data[i];
    if (in->num_control_predecessors || in->control_successors.len) return true;
  }
  return false;
}

/* The member whose fused computation can take the others (kiln_fusion_merge), or NULL. */
static kiln_hlo_instruction_t *pick_host(const kiln_fusion_scope_t *scope, const instr_vec_t *order,
                                         const kiln_ptrmap_t *set) {
  kiln_hlo_instruction_t *best = NULL;
  size_t best_n = 0;
  for (size_t i = 0; i < order->len; i++) {
    kiln_hlo_instruction_t *in = order->data[i];
    if (in->opcode != KILN_OP_FUSION || (member_flags(set, in) & DUPLICATE)) continue;
    if (in->num_called_groups != 1) continue;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(in, "calls");
    if (!body || body == in->parent || (intptr_t)kiln_ptrmap_get(&scope->callers, body) > 1)
      continue;
    if (!body->root || body->root->opcode == KILN_OP_PARAMETER ||
        body->num_parameters != in->num_operands || body->instructions.len <= best_n)
      continue;
    bool params_ok = true;
    for (int k = 0; k < body->num_parameters && params_ok; k++)
      params_ok = body->parameters[k] && body->parameters[k]->parent == body &&
                  body->parameters[k]->opcode == KILN_OP_PARAMETER;
    if (!params_ok || has_control_edges(body)) continue;
    best = in;
    best_n = body->instructions.len;
  }
  return best;
}

/* The host's fused computation before the merge, seen as the copy path sees it: each operand
 * value gets one parameter (a repeated operand's parameters replaced by the first), a scalar
 * constant operand is cloned inside, and a parameter fed by another member waits in
 * `pending` (member, parameter pairs) for that member's clone. */
static void host_values(builder_t *b, kiln_hlo_instruction_t *host, const kiln_ptrmap_t *set,
                        instr_vec_t *pending) {
  for (int k = 0; k < host->num_operands; k++) {
    kiln_hlo_instruction_t *o = host->operands[k], *p = b->fc->parameters[k];
    if (member_flags(set, o)) {
      kiln_vec_push(pending, o);
      kiln_vec_push(pending, p);
      continue;
    }
    kiln_hlo_instruction_t *v = kiln_ptrmap_get(&b->val, o);
    if (!v && o->opcode == KILN_OP_CONSTANT && kiln_shape_is_array(o->shape) &&
        o->shape->rank == 0 && o->literal && !o->literal->unknown) {
      v = outside_value(b, o);
    }
    if (v) {
      kiln_hlo_instruction_replace_all_uses(p, v);
      continue;
    }
    kiln_ptrmap_put(&b->val, o, p);
    kiln_vec_push(&b->params, p);
    kiln_vec_push(&b->operands, o);
  }
}

/* Puts the fused computation's instructions in the order the copy path creates them: the
 * members' clones and the host's own instructions in member order (`walk`), each parameter
 * or cloned constant where it is first read (dead clones included); then removes what is
 * dead and rebuilds every user list in that order (as creating them does). */
static void order_like_copy(builder_t *b, const instr_vec_t *walk) {
  kiln_hlo_computation_t *fc = b->fc;
  kiln_ptrmap_t listed;
  kiln_ptrmap_init(&listed);
  instr_vec_t list = {0};
  for (size_t i = 0; i < walk->len; i++) {
    kiln_vec_push(&list, walk->data[i]);
    kiln_ptrmap_put(&listed, walk->data[i], (void *)1);
  }
  for (size_t i = 0; i < fc->instructions.len; i++)
    if (!kiln_ptrmap_contains(&listed, fc->instructions.data[i]))
      kiln_vec_push(&list, fc->instructions.data[i]);
  memcpy(fc->instructions.data, list.data, sizeof(list.data[0]) * list.len);
  kiln_vec_free(&list);
  kiln_ptrmap_free(&listed);
  /* Sorted before dead clones go: they placed parameters where they read them first. */
  kiln_hlo_computation_sort_post_order(fc);
  remove_dead(fc);
  for (size_t i = fc->instructions.len; i-- > 0;) {
    kiln_hlo_instruction_t *p = fc->instructions.data[i];
    if (p->opcode == KILN_OP_PARAMETER && !p->users.len && p != fc->root) {
      kiln_status r = kiln_hlo_instruction_remove(p);
      if (r) kiln_status_free(r);
    }
  }
  for (size_t i = 0; i < fc->instructions.len; i++) fc->instructions.data[i]->users.len = 0;
  for (size_t i = 0; i < fc->instructions.len; i++) {
    kiln_hlo_instruction_t *in = fc->instructions.data[i];
    for (int k = 0; k < in->num_operands; k++) {
      kiln_hlo_instruction_t *o = in->operands[k];
      if (!o->users.len || kiln_vec_last(&o->users) != in) kiln_vec_push(&o->users, in);
    }
  }
}

/* Numbers the fused computation's parameters in instruction order and lists the fusion's
 * operands to match (`ops`, the outside value of each). */
static void number_parameters(builder_t *b, instr_vec_t *ops) {
  kiln_hlo_computation_t *fc = b->fc;
  kiln_ptrmap_t outside;
  kiln_ptrmap_init(&outside);
  for (size_t i = 0; i < b->params.len; i++)
    kiln_ptrmap_put(&outside, b->params.data[i], b->operands.data[i]);
  kiln_vec_clear(&b->params);
  for (size_t i = 0; i < fc->instructions.len; i++) {
    kiln_hlo_instruction_t *p = fc->instructions.data[i];
    if (p->opcode != KILN_OP_PARAMETER) continue;
    p->parameter_number = (int64_t)b->params.len;
    kiln_vec_push(&b->params, p);
    kiln_vec_push(ops, kiln_ptrmap_get(&outside, p));
  }
  kiln_ptrmap_free(&outside);
  fc->num_parameters = (int)b->params.len;
  fc->parameters =
      kiln_arena_alloc(&b->m->arena, sizeof(kiln_hlo_instruction_t *) * (b->params.len + 1));
  for (size_t i = 0; i < b->params.len; i++) fc->parameters[i] = b->params.data[i];
}

/* Gives `to` the users `stash` held of `from`, last first, reading `to` instead (what
 * kiln_hlo_instruction_replace_all_uses does). */
static void move_users(const instr_vec_t *stash, kiln_hlo_instruction_t *from,
                       kiln_hlo_instruction_t *to) {
  for (size_t i = stash->len; i-- > 0;) {
    kiln_hlo_instruction_t *u = stash->data[i];
    for (int k = 0; k < u->num_operands; k++)
      if (u->operands[k] == from) u->operands[k] = to;
    bool have = false;
    for (size_t j = 0; j < to->users.len && !have; j++) have = to->users.data[j] == u;
    if (!have) kiln_vec_push(&to->users, u);
  }
}

/* The host made the merged fusion, as a fusion created in its place would be: fresh
 * attributes, the new operands, at the end of `c`, the outputs' uses moved to it (or its
 * get-tuple-elements), the other members (not duplicated) removed. */
static kiln_status host_replace_members(kiln_hlo_computation_t *c, builder_t *b,
                                        kiln_hlo_instruction_t *host, const instr_vec_t *ops,
                                        const instr_vec_t *order, kiln_ptrmap_t *set,
                                        const instr_vec_t *outputs) {
  kiln_hlo_module_t *m = b->m;
  instr_vec_t stash = {0};
  for (size_t u = 0; u < host->users.len; u++) kiln_vec_push(&stash, host->users.data[u]);
  host->users.len = 0;
  kiln_hlo_instruction_set_operands(host, 0, NULL);
  kiln_hlo_instruction_move_to_end(host);
  kiln_shape_t *host_shape = host->shape; /* its output's shape, for a get-tuple-element */
  kiln_hlo_instruction_t fresh = {0};
  fresh.name = host->name;
  fresh.opcode = KILN_OP_FUSION;
  fresh.parent = host->parent;
  fresh.id = host->id;
  fresh.slot = host->slot;
  fresh.users = host->users;
  fresh.control_successors = host->control_successors;
  *host = fresh;
  host->shape = b->fc->root->shape;
  kiln_hlo_instruction_set_operands(host, (int)ops->len, ops->data);
  kiln_hlo_instruction_add_called(host, "calls", false, 1, &b->fc);
  host->fusion_kind = kiln_fusion_kind_for(b->fc);
  for (size_t i = 0; i < outputs->len; i++) {
    kiln_hlo_instruction_t *o = outputs->data[i], *to = host;
    int64_t slot = output_slot(b, i, outputs->len);
    if (slot >= 0) {
      to = kiln_hlo_instruction_create(c, KILN_OP_GET_TUPLE_ELEMENT,
                                       o == host ? host_shape : o->shape,
                                       kiln_hlo_module_unique_name(m, "get-tuple-element"));
      to->tuple_index = slot;
      kiln_hlo_instruction_set_operands(to, 1, &host);
    }
    if (o != host) {
      kiln_hlo_instruction_replace_all_uses(o, to);
      continue;
    }
    move_users(&stash, host, to);
    if (c->root == host) c->root = to;
  }
  kiln_vec_free(&stash);
  return remove_members(order, set, host);
}

/* kiln_fusion_merge with `host` holding the result. */
static kiln_status grow_in_place(kiln_fusion_scope_t *scope, kiln_hlo_computation_t *c,
                                 kiln_hlo_instruction_t *host, const instr_vec_t *order,
                                 kiln_ptrmap_t *set, const instr_vec_t *outputs) {
  kiln_ptrmap_t on_demand;
  kiln_ptrmap_init(&on_demand);
  builder_t b = {.m = c->module,
                 .fc = kiln_hlo_instruction_called(host, "calls"),
                 .made_on_demand = &on_demand,
                 .callers = &scope->callers};
  kiln_ptrmap_init(&b.val);
  instr_vec_t walk = {0}, pending = {0}, own = {0}, ops = {0};
  /* The host's instructions in the order the copy path inlines them. */
  size_t n_body = 0;
  kiln_hlo_instruction_t **body = kiln_hlo_computation_post_order(b.fc, &n_body);
  for (size_t i = 0; i < n_body; i++)
    if (body[i]->opcode != KILN_OP_PARAMETER) kiln_vec_push(&own, body[i]);
  kiln_free(body);
  host_values(&b, host, set, &pending);
  kiln_ptrmap_put(&b.val, host, b.fc->root);
  kiln_status st = NULL;
  for (size_t i = 0; i < order->len && !st; i++) {
    kiln_hlo_instruction_t *in = order->data[i];
    if (in == host) {
      for (size_t j = 0; j < own.len; j++) kiln_vec_push(&walk, own.data[j]);
      continue;
    }
    size_t before = b.fc->instructions.len;
    st = clone_member(&b, in, set, &scope->retired);
    /* Parameters and constants made for outside values are placed where first read. */
    for (size_t j = before; !st && j < b.fc->instructions.len; j++)
      if (!kiln_ptrmap_contains(&on_demand, b.fc->instructions.data[j]))
        kiln_vec_push(&walk, b.fc->instructions.data[j]);
  }
  for (size_t i = 0; i + 1 < pending.len && !st; i += 2) {
    kiln_hlo_instruction_t *v = kiln_ptrmap_get(&b.val, pending.data[i]);
    if (!v)
      st = kiln_status_make(KILN_INTERNAL, "'%s' has no value in '%s'", pending.data[i]->name,
                            b.fc->name);
    else
      kiln_hlo_instruction_replace_all_uses(pending.data[i + 1], v);
  }
  if (!st) {
    size_t before = b.fc->instructions.len;
    st = fusion_set_root(&b, outputs);
    if (b.fc->instructions.len > before) kiln_vec_push(&walk, b.fc->root);
  }
  if (!st) {
    order_like_copy(&b, &walk);
    number_parameters(&b, &ops);
    st = host_replace_members(c, &b, host, &ops, order, set, outputs);
  }
  kiln_vec_free(&walk);
  kiln_vec_free(&pending);
  kiln_vec_free(&own);
  kiln_vec_free(&ops);
  kiln_vec_free(&b.params);
  kiln_vec_free(&b.operands);
  kiln_ptrmap_free(&b.val);
  kiln_ptrmap_free(&on_demand);
  return st;
}

kiln_status kiln_fusion_merge(kiln_fusion_scope_t *scope, kiln_hlo_computation_t *c, int n,
                              kiln_hlo_instruction_t *const *members, const bool *duplicate,
                              kiln_hlo_instruction_t **out_fusion) {
  *out_fusion = NULL;
  if (n <= 0) return kiln_status_make(KILN_INVALID_ARGUMENT, "a fusion needs members");
  kiln_ptrmap_t set;
  kiln_ptrmap_init(&set);
  instr_vec_t list = {0}, order = {0}, outputs = {0};
  kiln_hlo_instruction_t *host = NULL;
  kiln_status st = fusion_collect_members(c, n, members, duplicate, &set, &list);
  if (!st) {
    order_members(&list, &set, &order);
    st = fusion_find_outputs(c, &order, &set, &outputs);
  }
  if (!st) host = pick_host(scope, &order, &set);
  if (!st && host) {
    st = grow_in_place(scope, c, host, &order, &set, &outputs);
    if (!st) *out_fusion = host;
  }
  kiln_vec_free(&list);
  kiln_vec_free(&order);
  kiln_vec_free(&outputs);
  kiln_ptrmap_free(&set);
  if (st || host) return st;
  return kiln_fusion_create(c, n, members, duplicate, &scope->retired, out_fusion);
}

void kiln_fusion_remove_retired(kiln_hlo_module_t *m, kiln_ptrmap_t *retired) {
  if (!retired->len) return;
  kiln_ptrmap_t called;
  kiln_ptrmap_init(&called);
  for (size_t k = 0; k < m->computations.len; k++) {
    kiln_hlo_computation_t *c = m->computations.data[k];
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_hlo_instruction_t *in = c->instructions.data[i];
      for (int g = 0; g < in->num_called_groups; g++)
        for (int j = 0; j < in->called_groups[g].n; j++)
          kiln_ptrmap_put(&called, in->called_groups[g].comps[j], (void *)1);
    }
  }
  kiln_ptrmap_t gone;
  kiln_ptrmap_init(&gone);
  for (size_t k = 0; k < m->computations.len; k++) {
    kiln_hlo_computation_t *c = m->computations.data[k];
    if (c != m->entry && kiln_ptrmap_contains(retired, c) && !kiln_ptrmap_contains(&called, c))
      kiln_ptrmap_put(&gone, c, (void *)1);
  }
  kiln_hlo_module_remove_computations(m, &gone);
  kiln_ptrmap_free(&gone);
  kiln_ptrmap_free(&called);
  kiln_ptrmap_free(retired);
  kiln_ptrmap_init(retired);
}

void kiln_fusion_make_arena_room(kiln_hlo_module_t *m) {
  if (!m->arena.limit) return;
  size_t want = m->arena.total * 4 + ((size_t)64 << 20);
  if (m->arena.limit < want) m->arena.limit = want;
}

/* ---- reachability ---- */

void kiln_fusion_order_build(kiln_fusion_order_t *o, const kiln_hlo_computation_t *c) {
  kiln_ptrmap_init(&o->pos);
  o->max_visits = 0;
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  for (size_t i = 0; i < n; i++) kiln_ptrmap_put(&o->pos, order[i], (void *)(uintptr_t)(i + 1));
  o->n = n;
  kiln_free(order);
}

void kiln_fusion_order_free(kiln_fusion_order_t *o) {
  kiln_ptrmap_free(&o->pos);
}

/* Lowers `*hi` to the positions of `in`'s users and control successors; false when one has
 * none. */
static bool lower_to_users(const kiln_fusion_order_t *o, const kiln_hlo_instruction_t *in,
                           uintptr_t *hi) {
  size_t nu = in->users.len, nc = in->control_successors.len;
  for (size_t k = 0; k < nu + nc; k++) {
    const kiln_hlo_instruction_t *y =
        k < nu ? in->users.data[k] : in->control_successors.data[k - nu];
    uintptr_t p = (uintptr_t)kiln_ptrmap_get(&o->pos, y);
    if (!p) return false;
    if (p < *hi) *hi = p;
  }
  return true;
}

bool kiln_fusion_order_place(kiln_fusion_order_t *o, const kiln_hlo_instruction_t *in) {
  uintptr_t lo = 1, hi = UINTPTR_MAX;
  for (int k = 0; k < in->num_operands + in->num_control_predecessors; k++) {
    const kiln_hlo_instruction_t *x =
        k < in->num_operands ? in->operands[k] : in->control_predecessors[k - in->num_operands];
    uintptr_t p = (uintptr_t)kiln_ptrmap_get(&o->pos, x);
    if (!p) return false;
    if (p > lo) lo = p;
  }
  for (size_t u = 0; u < in->users.len; u++) {
    const kiln_hlo_instruction_t *g = in->users.data[u];
    if (g->opcode == KILN_OP_GET_TUPLE_ELEMENT && !kiln_ptrmap_get(&o->pos, g)) {
      if (!lower_to_users(o, g, &hi)) return false;
    } else {
      uintptr_t p = (uintptr_t)kiln_ptrmap_get(&o->pos, g);
      if (!p) return false;
      if (p < hi) hi = p;
    }
  }
  for (size_t k = 0; k < in->control_successors.len; k++) {
    uintptr_t p = (uintptr_t)kiln_ptrmap_get(&o->pos, in->control_successors.data[k]);
    if (!p) return false;
    if (p < hi) hi = p;
  }
  if (lo > hi) return false;
  kiln_ptrmap_put(&o->pos, in, (void *)lo);
  for (size_t u = 0; u < in->users.len; u++)
    if (!kiln_ptrmap_get(&o->pos, in->users.data[u]))
      kiln_ptrmap_put(&o->pos, in->users.data[u], (void *)lo);
  return true;
}

bool kiln_fusion_reaches(const kiln_fusion_order_t *o, const kiln_hlo_instruction_t *from,
                         const kiln_hlo_instruction_t *to, const kiln_ptrmap_t *skip) {
  uintptr_t limit = (uintptr_t)kiln_ptrmap_get(&o->pos, to);
  if (!limit) limit = UINTPTR_MAX;
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  KILN_VEC(const kiln_hlo_instruction_t *) stack = {0};
  kiln_vec_push(&stack, from);
  bool found = false;
  size_t visits = 0;
  while (stack.len && !found) {
    if (o->max_visits && ++visits > o->max_visits) {
      found = true; /* too far to tell: say it does */
      break;
    }
    const kiln_hlo_instruction_t *x = kiln_vec_pop(&stack);
    size_t nu = x->users.len, nc = x->control_successors.len;
    for (size_t k = 0; k < nu + nc; k++) {
      const kiln_hlo_instruction_t *y =
          k < nu ? x->users.data[k] : x->control_successors.data[k - nu];
      if (y == to) {
        found = true;
        break;
      }
      if (kiln_ptrmap_contains(&seen, y) || (skip && kiln_ptrmap_contains(skip, y))) continue;
      uintptr_t p = (uintptr_t)kiln_ptrmap_get(&o->pos, y);
      if (p && p > limit) continue;
      kiln_ptrmap_put(&seen, y, (void *)1);
      kiln_vec_push(&stack, y);
    }
  }
  kiln_vec_free(&stack);
  kiln_ptrmap_free(&seen);
  return found;
}
