/* Stage 1: inline subgraph calls (the emitter document's rule: a function called from two or
 * more sites stays a function). Functions left without callers are removed. */
#include <string.h>

#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/kir_rewrite.h"

typedef struct inline_state {
  uint32_t *sites;  /* call sites per function index */
  int depth;
} inline_state_t;

static size_t func_index(const kiln_kir_module_t *m, const kiln_kir_func_t *f) {
  for (size_t i = 0; i < m->funcs.len; i++)
    if (m->funcs.data[i] == f) return i;
  return m->funcs.len;
}

static void count_sites(const kiln_kir_module_t *m, const kiln_kir_region_t *r, uint32_t *sites) {
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_CALL) sites[func_index(m, op->callee)]++;
    for (uint32_t j = 0; j < op->num_regions; j++) count_sites(m, op->regions[j], sites);
  }
}

static bool inline_call(kir_rewriter_t *rw, kiln_kir_op_t *op) {
  inline_state_t *st = rw->user;
  if (op->opcode != KILN_KIR_CALL) return false;
  kiln_kir_func_t *callee = op->callee;
  if (st->sites[func_index(rw->m, callee)] >= 2) return false;
  if (st->depth > 64) {
    kir_rewrite_fail(rw, kiln_status_make(KILN_INVALID_ARGUMENT,
                                          "kir inline: call chain through @%s is too deep "
                                          "(recursion?)", callee->name));
    return false;
  }
  for (uint32_t i = 0; i < op->num_operands; i++)
    kir_map_set(rw, callee->body->args[i], kir_map(rw, op->operands[i]));
  st->depth++;
  uint32_t n = 0;
  kiln_kir_value_t **ret = kir_rewrite_body(rw, callee->body, &n);
  st->depth--;
  for (uint32_t i = 0; i < op->num_results && i < n; i++) kir_map_set(rw, op->results[i], ret[i]);
  return true;
}

kiln_status kiln_kir_inline(kiln_kir_module_t *m) {
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before kir inline");
  uint32_t *sites = kiln_calloc(m->funcs.len + 1, sizeof(*sites));
  for (size_t i = 0; i < m->funcs.len; i++) count_sites(m, m->funcs.data[i]->body, sites);
  inline_state_t st = {.sites = sites};
  kiln_status s = kir_rewrite_module(m, inline_call, NULL, &st);
  kiln_free(sites);
  if (s) return kiln_status_annotate(s, "in kir inline");
  /* Drop subgraph functions nobody calls any more. */
  for (bool changed = true; changed;) {
    changed = false;
    uint32_t *now = kiln_calloc(m->funcs.len + 1, sizeof(*now));
    for (size_t i = 0; i < m->funcs.len; i++) count_sites(m, m->funcs.data[i]->body, now);
    for (size_t i = m->funcs.len; i-- > 0;) {
      kiln_kir_func_t *f = m->funcs.data[i];
      if (f->kind == KILN_KIR_FUNC_KERNEL || now[i]) continue;
      kiln_vec_free(&f->result_types);
      memmove(m->funcs.data + i, m->funcs.data + i + 1,
              (m->funcs.len - i - 1) * sizeof(*m->funcs.data));
      m->funcs.len--;
      changed = true;
    }
    kiln_free(now);
  }
  return NULL;
}
