/* Concatenate emitter (see concat_emitter.h). */
#include "compiler/codegen/concat_emitter.h"

#include <string.h>

#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/hero_emit.h"

#define CC_MAX_PATH 256

typedef struct cc_state {
  kiln_hero_analysis_t ha;
  const kiln_hlo_instruction_t *concat;
  int npath; /* instructions from the root down to the concatenate (both included) */
  const kiln_hlo_instruction_t *path[CC_MAX_PATH];
} cc_state_t;

static bool cc_on_path(const cc_state_t *cs, const kiln_hlo_instruction_t *x) {
  for (int i = 0; i < cs->npath; i++)
    if (cs->path[i] == x) return true;
  return false;
}

static bool cc_mark_path(cc_state_t *cs, const kiln_hlo_instruction_t *x) {
  if (cc_on_path(cs, x)) return true;
  bool reaches = x == cs->concat;
  if (!reaches && x->opcode != KILN_OP_PARAMETER)
    for (int i = 0; i < x->num_operands; i++) reaches |= cc_mark_path(cs, x->operands[i]);
  if (reaches && cs->npath < CC_MAX_PATH) cs->path[cs->npath++] = x;
  return reaches;
}

/* Functions of their own: the concatenate's operands and the epilogue's other operands. */
static bool cc_is_root(void *user, const kiln_hlo_instruction_t *instr) {
  cc_state_t *cs = user;
  for (int k = 0; k < cs->concat->num_operands; k++)
    if (cs->concat->operands[k] == instr) return true;
  if (cc_on_path(cs, instr)) return false;
  for (int i = 0; i < cs->npath; i++) {
    const kiln_hlo_instruction_t *p = cs->path[i];
    if (p == cs->concat) continue;
    for (int k = 0; k < p->num_operands; k++)
      if (p->operands[k] == instr) return true;
  }
  return false;
}

typedef struct cc_memo {
  int n;
  const kiln_hlo_instruction_t *x[CC_MAX_PATH];
  kiln_kir_value_t *v[CC_MAX_PATH];
} cc_memo_t;

/* Value of path node x at the concatenated position `cidx` (indices of the concatenate's
 * shape), the concatenate's value there being `hv`. */
static kiln_kir_value_t *cc_eval(kiln_hero_emit_t *h, cc_state_t *cs, const kiln_hlo_instruction_t *x,
                                 kiln_kir_value_t *const *cidx, kiln_kir_value_t *hv, cc_memo_t *mm) {
  for (int i = 0; i < mm->n; i++)
    if (mm->x[i] == x) return mm->v[i];
  kiln_kir_value_t *v = NULL;
  if (x == cs->concat) {
    v = hv;
  } else if (x->opcode == KILN_OP_BITCAST || x->opcode == KILN_OP_RESHAPE ||
             (x->opcode == KILN_OP_COPY && kiln_shape_equal(x->shape, x->operands[0]->shape, true))) {
    v = cc_eval(h, cs, x->operands[0], cidx, hv, mm);
  } else if (kiln_hlo_opcode_is_elementwise(x->opcode) && x->num_operands <= 8) {
    kiln_kir_value_t *args[8];
    for (int k = 0; k < x->num_operands; k++) {
      const kiln_hlo_instruction_t *op = x->operands[k];
      if (cc_on_path(cs, op)) {
        args[k] = cc_eval(h, cs, op, cidx, hv, mm);
      } else {
        kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
        bool scalar = op->shape->rank == 0;
        args[k] = scalar || kiln_hero_reshape_index(h, cs->concat->shape, cidx, op->shape, idx)
                      ? kiln_hero_emit_value(h, op, scalar ? NULL : idx)
                      : NULL;
      }
      if (!args[k]) return NULL;
    }
    v = kiln_elemental_scalar_op(&h->fn, x, args, x->num_operands);
  } else {
    kiln_elemental_fail(&h->fn, KILN_ERR_UNIMPLEMENTED("%s: %s after a concatenate hero", x->name,
                                                       kiln_hlo_opcode_name(x->opcode)));
    return NULL;
  }
  if (v && mm->n < CC_MAX_PATH) mm->x[mm->n] = x, mm->v[mm->n++] = v;
  return v;
}

kiln_status kiln_concat_kernel_emit(const kiln_hlo_computation_t *c,
                                    const kiln_codegen_compile_options_t *opts,
                                    kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("concatenate emitter: no computation");
  cc_state_t *cs = kiln_calloc(1, sizeof(*cs));
  kiln_status st = kiln_hero_analyze(c, &cs->ha);
  if (!st && (cs->ha.emitter != KILN_HERO_EMITTER_CONCATENATE || cs->ha.num_roots != 1))
    st = KILN_ERR_INVALID("%s: not a concatenate fusion (%s)", c->name, kiln_hero_emitter_name(cs->ha.emitter));
  const kiln_hlo_instruction_t *root = st ? NULL : cs->ha.roots[0];
  if (!st) {
    cs->concat = cs->ha.hero;
    if (!cs->concat->has_dimensions || cs->concat->dimensions.n != 1 || cs->concat->num_operands < 1)
      st = KILN_ERR_INVALID("%s: malformed concatenate %s", c->name, cs->concat->name);
    else if (!cc_mark_path(cs, root))
      st = KILN_ERR_INTERNAL("%s: root does not reach the concatenate", c->name);
  }
  int64_t nmax = 1;
  for (int k = 0; !st && k < cs->concat->num_operands; k++) {
    int64_t n = kiln_shape_num_elements(cs->concat->operands[k]->shape);
    if (n > nmax) nmax = n;
  }
  kiln_launch_grid_t g;
  if (!st) st = kiln_hero_linear_grid(nmax, &g);
  if (st) {
    kiln_free(cs);
    return st;
  }
  int64_t block[3], grid[3];
  kiln_hero_grid_dims(&g, block, grid);
  kiln_hero_emit_t h;
  st = kiln_hero_emit_begin(&h, c, opts, cc_is_root, cs, block, grid, out);
  if (st) {
    kiln_free(cs);
    return st;
  }
  kiln_kir_builder_t *b = &h.b;
  int64_t dim = cs->concat->dimensions.v[0], offset = 0;
  bool ok = h.part.num_outputs == 1;
  if (!ok) kiln_elemental_fail(&h.fn, KILN_ERR_INTERNAL("%s: one output expected", c->name));
  cc_memo_t *mm = kiln_calloc(1, sizeof(*mm));
  for (int k = 0; k < cs->concat->num_operands && ok; k++) {
    const kiln_hlo_instruction_t *opnd = cs->concat->operands[k];
    const kiln_shape_t *os = opnd->shape;
    if (kiln_shape_num_elements(os) == 0) {
      offset += os->dims[dim];
      continue;
    }
    kiln_kir_op_t *loop = kiln_hero_grid_loop(&h, &g, os, &h.outs[0], 1);
    if (!loop) break;
    kiln_kir_builder_enter(b, kiln_kir_op_region(loop, 0));
    size_t mark;
    kiln_elemental_enter(&h.fn, kiln_kir_op_region(loop, 0), &mark);
    kiln_kir_value_t *idx[KILN_KIR_MAX_RANK], *cidx[KILN_KIR_MAX_RANK], *ridx[KILN_KIR_MAX_RANK], *y = NULL;
    for (int d = 0; d < os->rank; d++) cidx[d] = idx[d] = kiln_kir_loop_index(loop, (size_t)d);
    if (offset) cidx[dim] = kiln_kir_binary(b, KILN_KIR_ADD, idx[dim], kiln_kir_const_index(b, offset));
    kiln_kir_value_t *v = kiln_hero_emit_value(&h, opnd, idx);
    mm->n = 0;
    v = v ? cc_eval(&h, cs, root, cidx, v, mm) : NULL;
    ok = v && kiln_hero_reshape_index(&h, cs->concat->shape, cidx, root->shape, ridx);
    if (ok) y = kiln_kir_insert(b, v, kiln_kir_loop_iter_arg(loop, 0), ridx, (size_t)root->shape->rank);
    ok = ok && y;
    kiln_elemental_exit(&h.fn, mark);
    if (ok) kiln_kir_yield(b, &y, 1);
    kiln_kir_builder_exit(b);
    if (ok) h.outs[0] = kiln_kir_op_result(loop, 0);
    offset += os->dims[dim];
  }
  kiln_free(mm);
  if (ok) kiln_kir_return(b, h.outs, 1);
  kiln_free(cs);
  return kiln_hero_emit_finish(&h, NULL, opts);
}
