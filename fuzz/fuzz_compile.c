/* libFuzzer target for the whole compile pipeline: an input that parses as an HLO module and
 * verifies, within a compile budget (at most 64 instructions, 2^14 elements per array, no
 * custom calls, collectives or host transfers: what makes a compile slow or needs another
 * process rather than what is wrong), goes through the passes, the emitters, the kernel IR
 * pipeline and LLVM for the host (kiln_compile_module). Any error status is fine; a crash,
 * leak, sanitizer report or hang is a bug. Seeded from generated programs (fuzz/run.sh runs
 * `kiln-fuzz --print`) and small corpus modules. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/opcode.h"
#include "compiler/passes/pipeline.h"
#include "compiler/thunks/compile.h"

#define BUDGET_INSTRUCTIONS 64
#define BUDGET_ELEMENTS (1 << 14)

static bool shape_in_budget(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      if (!shape_in_budget(s->elements[i])) return false;
    return true;
  }
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i] > BUDGET_ELEMENTS) return false;
    n *= s->dims[i];
    if (n > BUDGET_ELEMENTS) return false;
  }
  return true;
}

static bool in_budget(const kiln_hlo_module_t *m) {
  if (kiln_hlo_module_instruction_count(m) > BUDGET_INSTRUCTIONS) return false;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      if (!shape_in_budget(in->shape)) return false;
      switch (in->opcode) {
        case KILN_OP_CUSTOM_CALL:
        case KILN_OP_INFEED:
        case KILN_OP_OUTFEED:
        case KILN_OP_SEND:
        case KILN_OP_RECV:
          return false;
        default:
          break;
      }
      if (kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) return false;
      /* Windows and paddings multiply work without growing any one shape. */
      for (int w = 0; w < in->num_window_dims; w++)
        if (in->window[w].size > 64 || in->window[w].lhs_dilate > 16 ||
            in->window[w].rhs_dilate > 16)
          return false;
    }
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_hlo_parse_options_t po = {.filename = "<fuzz>"};
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module((const char *)data, size, &po, &m);
  if (!s) s = kiln_hlo_module_verify(m);
  if (!s && in_budget(m)) {
    kiln_pipeline_lift_parse_limit(m);
    kiln_compile_options_t co;
    memset(&co, 0, sizeof co);
    co.emit.target = KILN_TARGET_HOST;
    co.emit.max_while_iterations = 1000;
    kiln_executable_desc_t *desc = NULL;
    s = kiln_compile_module(m, &co, &desc, NULL);
    kiln_executable_desc_destroy(desc);
  }
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
  return 0;
}
