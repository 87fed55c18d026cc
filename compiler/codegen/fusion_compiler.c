/* Fusion dispatcher: classify a fusion, call its emitter through a table (see
 * fusion_compiler.h). */
#include "compiler/codegen/fusion_compiler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"
#include "compiler/codegen/concat_emitter.h"
#include "compiler/codegen/dus_emitter.h"
#include "compiler/codegen/elemental.h"
#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/input_slices_emitter.h"
#include "compiler/codegen/loop_emitter.h"
#include "compiler/codegen/reduction_emitter.h"
#include "compiler/codegen/scatter_emitter.h"
#include "compiler/codegen/sort_emitter.h"
#include "compiler/codegen/transpose_emitter.h"

/* ---- classification ---- */

const char *kiln_codegen_emitter_name(kiln_codegen_emitter_t e) {
  switch (e) {
    case KILN_CODEGEN_EMITTER_LOOP:
      return "loop";
    case KILN_CODEGEN_EMITTER_REDUCTION:
      return "reduction";
    case KILN_CODEGEN_EMITTER_TRANSPOSE:
      return "transpose";
    case KILN_CODEGEN_EMITTER_CONCATENATE:
      return "concatenate";
    case KILN_CODEGEN_EMITTER_SCATTER:
      return "scatter";
    case KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE:
      return "dynamic-update-slice";
    case KILN_CODEGEN_EMITTER_SORT:
      return "sort";
    case KILN_CODEGEN_EMITTER_INPUT_SLICES:
      return "input-slices";
  }
  return "?";
}

/* A reduce the reduction emitter takes: the hero analysis's rule (reduced or kept dims
 * contiguous in memory, and XLA's "unnested reduction is faster than elemental",
 * kiln_reduction_faster_than_elemental), for a reduce over at least one dim of an array. */
static bool is_reduce_hero(const kiln_hlo_instruction_t *r) {
  if (r->opcode != KILN_OP_REDUCE || r->num_operands < 2 || r->dimensions.n == 0) return false;
  const kiln_shape_t *in = r->operands[0]->shape;
  if (!kiln_shape_is_array(in) || in->rank == 0) return false;
  return kiln_hero_is_reduction_hero(r);
}

/* A transpose hero as XLA's rules pick it (kiln_hero_is_transpose_hero), including the form
 * that keeps a small minor dimension ("102"), except layout-changing copies (XLA's layout
 * normalization makes them transposes first; here the loop emitter's physical indexing
 * handles them): those are loop fusions. */
static bool is_transpose_hero(const kiln_hlo_instruction_t *t) {
  return t->opcode == KILN_OP_TRANSPOSE && kiln_hero_is_transpose_hero(t, NULL);
}

/* Whether `x` is a root of `c` (the root or a tuple root's operand) through bitcasts. */
static bool is_root_through_bitcasts(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *x) {
  const kiln_hlo_instruction_t *r = c->root;
  int n = r->opcode == KILN_OP_TUPLE ? r->num_operands : 1;
  for (int i = 0; i < n; i++) {
    const kiln_hlo_instruction_t *y = r->opcode == KILN_OP_TUPLE ? r->operands[i] : r;
    while (y->opcode == KILN_OP_BITCAST && y->num_operands == 1) y = y->operands[0];
    if (y == x) return true;
  }
  return false;
}

/* The dispatcher's kind for the hero analysis's choice. */
static kiln_codegen_emitter_t kind_of_hero_emitter(kiln_hero_emitter_t e) {
  static const kiln_codegen_emitter_t kinds[] = {
      [KILN_HERO_EMITTER_LOOP] = KILN_CODEGEN_EMITTER_LOOP,
      [KILN_HERO_EMITTER_REDUCTION] = KILN_CODEGEN_EMITTER_REDUCTION,
      [KILN_HERO_EMITTER_TRANSPOSE] = KILN_CODEGEN_EMITTER_TRANSPOSE,
      [KILN_HERO_EMITTER_SCATTER] = KILN_CODEGEN_EMITTER_SCATTER,
      [KILN_HERO_EMITTER_SORT] = KILN_CODEGEN_EMITTER_SORT,
      [KILN_HERO_EMITTER_CONCATENATE] = KILN_CODEGEN_EMITTER_CONCATENATE,
      [KILN_HERO_EMITTER_INPUT_SLICES] = KILN_CODEGEN_EMITTER_INPUT_SLICES,
      [KILN_HERO_EMITTER_DYNAMIC_UPDATE_SLICE] = KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE,
  };
  return (size_t)e < sizeof(kinds) / sizeof(kinds[0]) ? kinds[e] : KILN_CODEGEN_EMITTER_LOOP;
}

kiln_codegen_emitter_t kiln_codegen_classify(const kiln_hlo_computation_t *c,
                                             const kiln_hlo_instruction_t **hero) {
  const kiln_hlo_instruction_t *dummy;
  if (!hero) hero = &dummy;
  *hero = NULL;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    *hero = in;
    switch (in->opcode) {
      case KILN_OP_SCATTER:
        return KILN_CODEGEN_EMITTER_SCATTER;
      case KILN_OP_SORT:
        return KILN_CODEGEN_EMITTER_SORT;
      case KILN_OP_DYNAMIC_UPDATE_SLICE:
        /* A DUS root (through bitcasts) gets the DUS emitter (in place when its operand is a
         * parameter, else copy + update); a DUS under an epilogue is a loop, as in XLA. */
        if (is_root_through_bitcasts(c, in)) return KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE;
        break;
      default: break;
    }
  }
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    *hero = in;
    if (is_reduce_hero(in)) return KILN_CODEGEN_EMITTER_REDUCTION;
    if (is_transpose_hero(in)) return KILN_CODEGEN_EMITTER_TRANSPOSE;
  }
  /* Concatenate (a hero concatenate of <= 4 operands, possibly under an epilogue) and input
   * slices as the hero analysis decides. */
  kiln_hero_analysis_t ha;
  kiln_status hs = kiln_hero_analyze(c, &ha);
  if (!hs && ha.emitter == KILN_HERO_EMITTER_CONCATENATE) {
    *hero = ha.hero;
    return KILN_CODEGEN_EMITTER_CONCATENATE;
  }
  if (!hs && ha.emitter == KILN_HERO_EMITTER_INPUT_SLICES) {
    *hero = ha.hero;
    return KILN_CODEGEN_EMITTER_INPUT_SLICES;
  }

  kiln_status_free(hs);
  *hero = NULL;
  return KILN_CODEGEN_EMITTER_LOOP;
}

/* ---- dispatch ---- */

typedef kiln_status (*emit_fn)(const kiln_hlo_computation_t *c,
                               const kiln_codegen_compile_options_t *opts,
                               kiln_codegen_kernel_t *out);

static kiln_status emit_reduction(const kiln_hlo_computation_t *c,
                                  const kiln_codegen_compile_options_t *opts,
                                  kiln_codegen_kernel_t *out) {
  return kiln_reduction_kernel_emit(c, opts, NULL, out);
}

/* The emitter of each kind. */
static const emit_fn kEmitters[] = {
    [KILN_CODEGEN_EMITTER_LOOP] = kiln_loop_kernel_emit,
    [KILN_CODEGEN_EMITTER_REDUCTION] = emit_reduction,
    [KILN_CODEGEN_EMITTER_TRANSPOSE] = kiln_transpose_kernel_emit,
    [KILN_CODEGEN_EMITTER_CONCATENATE] = kiln_concat_kernel_emit,
    [KILN_CODEGEN_EMITTER_SCATTER] = kiln_scatter_kernel_emit,
    [KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE] = kiln_dus_kernel_emit,
    [KILN_CODEGEN_EMITTER_SORT] = kiln_sort_kernel_emit,
    [KILN_CODEGEN_EMITTER_INPUT_SLICES] = kiln_input_slices_kernel_emit,
};

kiln_status kiln_codegen_choose_emitter(const kiln_hlo_computation_t *c,
                                        kiln_codegen_emitter_t *kind) {
  *kind = kiln_codegen_classify(c, NULL);
  switch (*kind) {
    case KILN_CODEGEN_EMITTER_REDUCTION:
    case KILN_CODEGEN_EMITTER_TRANSPOSE:
    case KILN_CODEGEN_EMITTER_CONCATENATE:
    case KILN_CODEGEN_EMITTER_INPUT_SLICES: {
      kiln_hero_analysis_t ha;
      KILN_RETURN_IF_ERROR(kiln_hero_analyze(c, &ha), "while choosing the emitter of %s", c->name);
      *kind = kind_of_hero_emitter(ha.emitter);
      return NULL;
    }
    default:
      return NULL;
  }
}

/* Bytes of block-shared memory allocated in region `r` and the regions nested in it. */
static int64_t shared_bytes_in(const kiln_kir_region_t *r) {
  int64_t total = 0;
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_ALLOC_SHARED && op->num_results == 1) {
      const kiln_kir_type_t *t = op->results[0]->type;
      total += kiln_kir_type_num_elements(t) * (int64_t)kiln_elem_type_storage_bytes(t->elem);
    }
    for (uint32_t j = 0; j < op->num_regions; j++) total += shared_bytes_in(op->regions[j]);
  }
  return total;
}

/* Every launch of the chain must fit the target: a kernel that does not would fail at launch
 * on the GPU (or silently run a different grid on the host). */
static kiln_status validate_launches(const kiln_hlo_computation_t *c,
                                     const kiln_codegen_kernel_t *out,
                                     const kiln_launch_device_t *device) {
  int idx = 0;
  for (const kiln_codegen_kernel_t *k = out; k; k = k->next, idx++) {
    const kiln_kir_func_t *f = k->kir ? kiln_kir_module_kernel(k->kir) : NULL;
    if (!f) continue;
    kiln_status s =
        kiln_launch_validate(f->block, f->grid, shared_bytes_in(f->body), false, device);
    if (s) return kiln_status_annotate(s, "kernel %d of fusion %s", idx, c->name);
  }
  return NULL;
}

kiln_status kiln_codegen_kernel_emit(const kiln_hlo_computation_t *c,
                                     const kiln_codegen_compile_options_t *opts,
                                     kiln_codegen_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("fusion compiler: no computation");
  kiln_codegen_compile_options_t o = {0};
  if (opts) o = *opts;
  kiln_codegen_emitter_t kind;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_codegen_choose_emitter(c, &kind));
  KILN_RETURN_IF_ERROR_PLAIN(kEmitters[kind](c, &o, out));
  for (kiln_codegen_kernel_t *k = out; k; k = k->next)
    if (k->kir) k->kir->excess_precision = !o.strict_precision;
  kiln_status s = validate_launches(c, out, o.device);
  if (s) kiln_codegen_kernel_free(out);
  return s;
}
