/* concat_splitter: a concatenate of more than KILN_FUSION_MAX_OPERANDS operands becomes a
 * concatenate of concatenates of at most that many consecutive operands each (nested again
 * while the outer one has too many), so no kernel needs more arguments than a launch takes
 * (KILN_KERNEL_MAX_ARGS: a concatenate of 150 parameters was one kernel of 151 arguments,
 * refused when the executable loaded). The groups are as even as the count allows; fusion
 * may merge groups back while the operand limit holds. */
#include <string.h>

#include "compiler/passes/fusion_util.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_GROUP KILN_FUSION_MAX_OPERANDS
#define MAX_RANK 64

/* concatenate(xs[0..n)) along `dim`, split into groups while n > MAX_GROUP. */
static kiln_hlo_instruction_t *concat_tree(kiln_builder_t *b, kiln_hlo_instruction_t *const *xs,
                                           int n, int64_t dim, const kiln_shape_t *like) {
  if (n > MAX_GROUP) {
    int groups = (n + MAX_GROUP - 1) / MAX_GROUP;
    if (groups > MAX_GROUP) groups = MAX_GROUP;
    kiln_hlo_instruction_t **parts = kiln_arena_alloc(&b->m->arena, sizeof *parts * (size_t)groups);
    if (!parts) {
      b->failed = true;
      return NULL;
    }
    for (int g = 0, at = 0; g < groups; g++) {
      int size = n / groups + (g < n % groups);
      parts[g] = concat_tree(b, xs + at, size, dim, like);
      if (!parts[g]) return NULL;
      at += size;
    }
    return concat_tree(b, parts, groups, dim, like);
  }
  if (n == 1) return xs[0];
  int64_t dims[MAX_RANK];
  memcpy(dims, like->dims, sizeof(int64_t) * (size_t)like->rank);
  dims[dim] = 0;
  for (int i = 0; i < n; i++) dims[dim] += xs[i]->shape->dims[dim];
  kiln_hlo_instruction_t *c = kiln_builder_op(
      b, KILN_OP_CONCATENATE, kiln_builder_shape(b, like->type, like->rank, dims), n, xs);
  if (!c || !kiln_builder_list(b, &c->dimensions, 1, &dim)) return NULL;
  c->has_dimensions = true;
  return c;
}

static kiln_hlo_instruction_t *split(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  (void)ctx;
  const kiln_shape_t *s = in->shape;
  if (in->num_operands <= MAX_GROUP || !kiln_shape_is_array(s) || kiln_shape_is_dynamic(s) ||
      s->rank > MAX_RANK || !in->has_dimensions || in->dimensions.n != 1 ||
      in->dimensions.v[0] < 0 || in->dimensions.v[0] >= s->rank)
    return NULL;
  for (int i = 0; i < in->num_operands; i++) {
    const kiln_shape_t *x = in->operands[i]->shape;
    if (!kiln_shape_is_array(x) || x->rank != s->rank || x->type != s->type) return NULL;
  }
  kiln_hlo_instruction_t *root =
      concat_tree(b, in->operands, in->num_operands, in->dimensions.v[0], s);
  if (root) root->shape = in->shape; /* in's layout; the inner ones get the default */
  return root;
}

kiln_status kiln_pass_concat_splitter(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                      bool *changed) {
  (void)opts;
  bool any = false;
  kiln_status s =
      kiln_builder_expand_all(m, KILN_OP_CONCATENATE, split, NULL, "concat_splitter", &any);
  if (changed) *changed = any;
  return s;
}
