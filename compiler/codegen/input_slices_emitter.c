/* Input-slices emitter (see input_slices_emitter.h). */
#include "compiler/codegen/input_slices_emitter.h"

#include <string.h>

#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/hero_emit.h"

typedef struct is_state {
  kiln_hero_analysis_t ha;
} is_state_t;

/* The value root r writes at each index of its window: the slice's operand, or the root
 * itself when it is the whole window. */
static const kiln_hlo_instruction_t *window_value(const kiln_hlo_instruction_t *r) {
  return r->opcode == KILN_OP_SLICE ? r->operands[0] : r;
}

/* The window values head their own functions (read at the input index). */
static bool is_is_root(void *user, const kiln_hlo_instruction_t *instr) {
  is_state_t *st = user;
  for (int i = 0; i < st->ha.num_roots; i++)
    if (window_value(st->ha.roots[i]) == instr) return true;
  return false;
}

kiln_status kiln_input_slices_kernel_emit(const kiln_hlo_computation_t *c,
                                          const kiln_codegen_compile_options_t *opts,
                                          kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("input slices emitter: no computation");
  is_state_t *st = kiln_calloc(1, sizeof(*st));
  kiln_status s = kiln_hero_analyze(c, &st->ha);
  if (!s && st->ha.emitter != KILN_HERO_EMITTER_INPUT_SLICES)
    s = KILN_ERR_INVALID("%s: not an input slices fusion (%s)", c->name, kiln_hero_emitter_name(st->ha.emitter));
  const kiln_shape_t *in = s ? NULL : st->ha.hero->shape;
  for (int i = 0; i < st->ha.num_roots && !s; i++)
    if (kiln_elem_type_is_complex(st->ha.roots[i]->shape->type))
      s = KILN_ERR_UNIMPLEMENTED("%s: %s slice root", c->name, kiln_elem_type_name(st->ha.roots[i]->shape->type));
  kiln_launch_grid_t g;
  if (!s) s = kiln_hero_linear_grid(kiln_shape_num_elements(in), &g);
  if (s) {
    kiln_free(st);
    return s;
  }
  int64_t block[3], grid[3];
  kiln_hero_grid_dims(&g, block, grid);
  kiln_hero_emit_t h;
  s = kiln_hero_emit_begin(&h, c, opts, is_is_root, st, block, grid, out);
  if (s) {
    kiln_free(st);
    return s;
  }
  kiln_kir_builder_t *b = &h.b;
  int nout = h.part.num_outputs;
  /* Output o <-> root: the partition's outputs are the flattened root tuple, in order. */
  int root_of[KILN_HERO_MAX_ROOTS];
  bool ok = nout == st->ha.num_roots;
  for (int o = 0; o < nout && ok; o++) {
    root_of[o] = -1;
    for (int i = 0; i < st->ha.num_roots; i++)
      if (st->ha.roots[i] == h.part.outputs[o].instr) root_of[o] = i;
    ok = root_of[o] >= 0;
  }
  if (!ok)
    kiln_elemental_fail(&h.fn,
                        KILN_ERR_INTERNAL("%s: outputs do not match the slice roots", c->name));
  kiln_kir_op_t *loop = ok ? kiln_hero_grid_loop(&h, &g, in, h.outs, nout) : NULL;
  if (loop) {
    kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
    size_t mark;
    kiln_elemental_enter(&h.fn, kiln_kir_op_region(loop, 0), &mark);
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK], *ys[KILN_HERO_MAX_ROOTS];
    for (int d = 0; d < in->rank; d++) idx[d] = kiln_kir_loop_index(loop, (size_t)d);
    for (int o = 0; o < nout; o++) ys[o] = kiln_kir_loop_iter_arg(loop, (size_t)o);
    for (int o = 0; o < nout && ok; o++) {
      const kiln_hlo_instruction_t *r = st->ha.roots[root_of[o]];
      kiln_kir_value_t *cond = NULL, *oidx[KILN_KIR_MAX_RANK];
      for (int d = 0; d < in->rank; d++) {
        const kiln_slice_dim_t *sd = r->opcode == KILN_OP_SLICE ? &r->slice[d] : NULL;
        if (!sd || (sd->start == 0 && sd->limit == in->dims[d])) {
          oidx[d] = idx[d];
          continue;
        }
        kiln_kir_value_t *c1 = kiln_kir_binary(b, KILN_KIR_AND, kiln_kir_cmp(b, KILN_KIR_CMP_GE, idx[d], kiln_kir_const_index(b, sd->start)),
                                               kiln_kir_cmp(b, KILN_KIR_CMP_LT, idx[d], kiln_kir_const_index(b, sd->limit)));
        cond = cond ? kiln_kir_binary(b, KILN_KIR_AND, cond, c1) : c1;
        oidx[d] = kiln_kir_binary(b, KILN_KIR_SUB, idx[d], kiln_kir_const_index(b, sd->start));
      }
      if (!cond) {
        kiln_kir_value_t *v = kiln_hero_emit_value(&h, window_value(r), idx);
        ys[o] = v ? kiln_kir_insert(b, v, ys[o], oidx, (size_t)in->rank) : NULL;
        ok = ys[o] != NULL;
        continue;
      }
      const kiln_kir_type_t *rt = ys[o]->type;
      kiln_kir_op_t *iff = kiln_kir_if(b, cond, &rt, 1);
      if (!iff) {
        ok = false;
        break;
      }
      kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 0));
      size_t m2;
      kiln_elemental_enter(&h.fn, kiln_kir_op_region(iff, 0), &m2);
      kiln_kir_value_t *v = kiln_hero_emit_value(&h, window_value(r), idx);
      kiln_kir_value_t *y = v ? kiln_kir_insert(b, v, ys[o], oidx, (size_t)in->rank) : NULL;
      kiln_elemental_exit(&h.fn, m2);
      ok = y != NULL;
      if (ok) kiln_kir_yield(b, &y, 1);
      kiln_kir_builder_exit(b);
      kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 1));
      kiln_kir_yield(b, &ys[o], 1);
      kiln_kir_builder_exit(b);
      ys[o] = kiln_kir_op_result(iff, 0);
    }
    kiln_elemental_exit(&h.fn, mark);
    if (ok) kiln_kir_yield(b, ys, (size_t)nout);
    kiln_kir_builder_exit(b);
    if (ok) {
      for (int o = 0; o < nout; o++) h.outs[o] = kiln_kir_op_result(loop, (size_t)o);
      kiln_kir_return(b, h.outs, (size_t)nout);
    }
  }
  kiln_free(st);
  return kiln_hero_emit_finish(&h, NULL, opts);
}
