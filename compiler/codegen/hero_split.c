/* Split scaffolding: kernels that read a private copy of a fusion (see hero_split.h). */
#include "compiler/codegen/hero_split.h"

#include <string.h>

/* Copies `x` (and what it depends on) into the private computation. */
static kiln_hlo_instruction_t *split_clone(kiln_hero_split_t *s, kiln_hlo_computation_t *dst,
                                           const kiln_hlo_instruction_t *x) {
  kiln_hlo_instruction_t *have = kiln_ptrmap_get(&s->clone_of, x);
  if (have) return have;
  kiln_hlo_instruction_t *ops[64];
  kiln_hlo_instruction_t **opv =
      x->num_operands <= 64 ? ops : kiln_calloc((size_t)x->num_operands, sizeof(*opv));
  for (int i = 0; i < x->num_operands; i++) opv[i] = split_clone(s, dst, x->operands[i]);
  kiln_hlo_instruction_t *d = kiln_hlo_instruction_clone(dst, x, x->name, x->num_operands, opv);
  if (opv != ops) kiln_free(opv);
  kiln_ptrmap_put(&s->clone_of, x, d);
  return d;
}

static void flatten_leaves(const kiln_shape_t *sh, const kiln_shape_t ***out, int *n, int *cap) {
  if (kiln_shape_is_tuple(sh)) {
    for (int i = 0; i < sh->num_elements; i++) flatten_leaves(sh->elements[i], out, n, cap);
    return;
  }
  if (*n == *cap) *out = kiln_realloc(*out, (size_t)(*cap = *cap ? *cap * 2 : 8) * sizeof(**out));
  (*out)[(*n)++] = sh;
}

static void split_release(kiln_hero_split_t *s) {
  if (s->mod) kiln_hlo_module_destroy(s->mod);
  s->mod = NULL;
  kiln_ptrmap_free(&s->clone_of);
  kiln_free(s->outputs);
  s->outputs = NULL;
}

kiln_status kiln_hero_split_begin(kiln_hero_split_t *s, const kiln_hlo_computation_t *c,
                                  const kiln_hlo_instruction_t *const *vals, int nvals,
                                  const kiln_codegen_compile_options_t *opts, const char *suffix,
                                  const int64_t block[3], const int64_t grid[3],
                                  kiln_codegen_kernel_t *out) {
  memset(s, 0, sizeof(*s));
  memset(out, 0, sizeof(*out));
  s->orig = c;
  kiln_ptrmap_init(&s->clone_of);
  int cap = 0;
  flatten_leaves(c->root->shape, &s->outputs, &s->num_outputs, &cap);
  for (int o = 0; o < s->num_outputs; o++)
    if (!kiln_shape_is_array(s->outputs[o])) {
      split_release(s);
      return KILN_ERR_UNIMPLEMENTED("%s: output %d is not an array", c->name, o);
    }
  /* The private copy: every parameter (so numbers match), the vals and their operands. */
  s->mod = kiln_hlo_module_create("kiln_split");
  kiln_hlo_computation_t *d = kiln_hlo_computation_create(s->mod, c->name);
  d->num_parameters = c->num_parameters;
  d->parameters =
      kiln_arena_alloc(&s->mod->arena, sizeof(*d->parameters) * ((size_t)c->num_parameters + 1));
  for (int i = 0; i < c->num_parameters; i++)
    d->parameters[i] = split_clone(s, d, c->parameters[i]);
  /* Every array constant too, in order: all kernels of a chain take the same inputs (the
   * elemental emitter's list: parameters by number, then array constants in order). */
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i]->opcode == KILN_OP_CONSTANT &&
        kiln_partition_is_tensor_leaf(c->instructions.data[i]))
      split_clone(s, d, c->instructions.data[i]);
  kiln_hlo_instruction_t **roots = kiln_calloc((size_t)nvals + 1, sizeof(*roots));
  kiln_shape_t **rshapes = kiln_calloc((size_t)nvals + 1, sizeof(*rshapes));
  int nr = 0;
  for (int i = 0; i < nvals; i++) {
    kiln_hlo_instruction_t *v = split_clone(s, d, vals[i]);
    if (kiln_partition_is_tensor_leaf(v)) continue; /* read directly */
    bool dup = false;
    for (int k = 0; k < nr; k++) dup |= roots[k] == v;
    if (dup) continue;
    rshapes[nr] = v->shape;
    roots[nr++] = v;
  }
  kiln_shape_t *ts = kiln_shape_make_tuple(&s->mod->arena, nr, rshapes);
  kiln_hlo_instruction_t *tup =
      kiln_hlo_instruction_create(d, KILN_OP_TUPLE, ts, "kiln_split_root");
  kiln_hlo_instruction_set_operands(tup, nr, roots);
  d->root = tup;
  kiln_free(roots);
  kiln_free(rshapes);

  kiln_hero_emit_t *h = &s->h;
  /* The kernel reads d but writes c's outputs: created here for those. d's root tuple is
   * never stored (its elements are values the kernel reads, computed in logical order), and
   * tensors are read at their physical index (kiln_hero_emit_value), so layouts are no
   * reason to refuse here: the emitters write c's outputs at physical indices. */
  kiln_hero_emit_setup_t setup = {NULL, NULL, true, NULL};
  kiln_status st = kiln_hero_emit_start(h, c, d, opts, suffix, &setup, out);
  if (!st) {
    st = kiln_hero_emit_kernel(h, s->outputs, s->num_outputs, block, grid);
    if (st) kiln_hero_emit_abort(h);
  }
  if (st) {
    split_release(s);
    return kiln_status_annotate(st, "while emitting fusion %s", c->name);
  }
  return NULL;
}

/* ---- atomics ---- */

int kiln_hero_atomic_kind(const kiln_hlo_computation_t *comb) {
  if (!comb || !comb->root || comb->num_parameters != 2) return -1;
  const kiln_hlo_instruction_t *r = comb->root;
  if (r->num_operands != 2) return -1;
  const kiln_hlo_instruction_t *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != KILN_OP_PARAMETER || b->opcode != KILN_OP_PARAMETER || a == b) return -1;
  switch (r->opcode) {
    case KILN_OP_ADD:
      return KILN_KIR_ATOMIC_ADD;
    case KILN_OP_MINIMUM:
      return KILN_KIR_ATOMIC_MIN;
    case KILN_OP_MAXIMUM:
      return KILN_KIR_ATOMIC_MAX;
    default:
      return -1;
  }
}

kiln_kir_value_t *kiln_hero_atomic_cas_combine(kiln_hero_emit_t *h,
                                               const kiln_hlo_computation_t *comb,
                                               kiln_kir_value_t *v, kiln_kir_value_t *out,
                                               kiln_kir_value_t *const *idx, size_t n) {
  kiln_kir_op_t *cas = kiln_kir_atomic_cas_loop(&h->b, out, idx, n);
  if (!cas) return NULL;
  kiln_kir_region_t *body = kiln_kir_op_region(cas, 0);
  kiln_kir_builder_enter(&h->b, body);
  size_t mark;
  kiln_elemental_enter(&h->fn, body, &mark);
  kiln_kir_value_t *args[2] = {kiln_kir_region_arg(body, 0), v},
                   *res[KILN_ELEM_MAX_OUTPUTS] = {NULL};
  bool ok = kiln_elemental_emit_scalar_computation(&h->fn, comb, args, 2, res) == 1;
  kiln_elemental_exit(&h->fn, mark);
  if (ok) kiln_kir_yield(&h->b, res, 1);
  kiln_kir_builder_exit(&h->b);
  return ok ? kiln_kir_op_result(cas, 0) : NULL;
}

/* ---- the private copy ---- */

kiln_kir_value_t *kiln_hero_split_value(kiln_hero_split_t *s, const kiln_hlo_instruction_t *instr,
                                        kiln_kir_value_t *const *idx) {
  const kiln_hlo_instruction_t *cl = kiln_ptrmap_get(&s->clone_of, instr);
  if (!cl) {
    kiln_elemental_fail(&s->h.fn, KILN_ERR_INTERNAL("%s is not read by this kernel", instr->name));
    return NULL;
  }
  return kiln_hero_emit_value(&s->h, cl, idx);
}

kiln_status kiln_hero_split_finish(kiln_hero_split_t *s, kiln_status st,
                                   const kiln_codegen_compile_options_t *opts) {
  kiln_codegen_kernel_t *out = s->h.out;
  /* kiln_hero_emit_finish records d's outputs; the kernel's are the original's. */
  st = kiln_hero_emit_finish(&s->h, st, opts);
  if (!st) {
    for (int i = 0; i < out->num_inputs; i++) {
      const kiln_hlo_instruction_t *in = out->inputs[i];
      const kiln_hlo_instruction_t *orig = NULL;
      if (in->opcode == KILN_OP_PARAMETER && in->parameter_number >= 0 &&
          in->parameter_number < s->orig->num_parameters) {
        orig = s->orig->parameters[in->parameter_number];
      } else {
        for (size_t k = 0; k < s->orig->instructions.len && !orig; k++)
          if (kiln_ptrmap_get(&s->clone_of, s->orig->instructions.data[k]) == in)
            orig = s->orig->instructions.data[k];
      }
      if (!orig) {
        st = KILN_ERR_INTERNAL("%s: kernel input %s has no original", s->orig->name, in->name);
        break;
      }
      out->inputs[i] = orig;
    }
    kiln_free(out->outputs);
    out->num_outputs = s->num_outputs;
    out->outputs = kiln_calloc((size_t)s->num_outputs + 1, sizeof(*out->outputs));
    for (int k = 0; k < s->num_outputs; k++) out->outputs[k] = s->outputs[k];
    if (st) kiln_codegen_kernel_free(out);
  }
  split_release(s);
  return st;
}
