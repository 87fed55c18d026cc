/* The per-thunk profile as a table (profile_report.h). */
#include "tools/common/profile_report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"

static int by_total_desc(const void *a, const void *b) {
  const kiln_thunk_profile_entry_t *x = a, *y = b;
  if (x->total_ns != y->total_ns) return x->total_ns < y->total_ns ? 1 : -1;
  return strcmp(kiln_thunk_name(x->thunk), kiln_thunk_name(y->thunk));
}

static void index_module(kiln_hashmap_t *names, const kiln_hlo_module_t *m) {
  if (!m) return;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      kiln_hlo_instruction_t *in = comp->instructions.data[i];
      if (in && !kiln_hashmap_contains(names, in->name, strlen(in->name)))
        kiln_hashmap_put(names, in->name, strlen(in->name), in);
    }
  }
}

static void append_shape(kiln_strbuf_t *b, const kiln_shape_t *s) {
  char *text = kiln_shape_to_string(s, false);
  kiln_strbuf_append(b, text);
  kiln_free(text);
}

static const char *fusion_kind_name(const kiln_hlo_instruction_t *in) {
  const char *k = kiln_hlo_fusion_kind_name(in->fusion_kind);
  return k ? k : in->fusion_kind_text ? in->fusion_kind_text : "?";
}

/* "fusion(kLoop:multiply) bf16[8,128,256] <- bf16[8,128,256], f32[256]" */
static void describe_hlo(kiln_strbuf_t *b, const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_FUSION) {
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(in, "calls");
    kiln_strbuf_printf(b, "fusion(%s:%s) ", fusion_kind_name(in),
                       body && body->root ? kiln_hlo_opcode_name(body->root->opcode) : "?");
  } else {
    kiln_strbuf_printf(b, "%s ", kiln_hlo_opcode_name(in->opcode));
  }
  append_shape(b, in->shape);
  for (int i = 0; i < in->num_operands && i < 4; i++) {
    kiln_strbuf_append(b, i ? ", " : " <- ");
    append_shape(b, in->operands[i]->shape);
  }
  if (in->num_operands > 4) kiln_strbuf_printf(b, ", ... (%d operands)", in->num_operands);
}

void kiln_profile_report_format(kiln_strbuf_t *b, const kiln_thunk_profile_t *p,
                                const kiln_hlo_module_t *m, int max_rows) {
  uint64_t run_ns = 0;
  int64_t runs = kiln_thunk_profile_runs(p, &run_ns);
  size_t n = kiln_thunk_profile_entries(p, NULL, 0);
  kiln_thunk_profile_entry_t *e = kiln_calloc(n + 1, sizeof(*e));
  n = kiln_thunk_profile_entries(p, e, n);
  /* Which thunks hold profiled thunks (their time is their children's too). */
  kiln_ptrmap_t parents;
  kiln_ptrmap_init(&parents);
  uint64_t top_ns = 0;
  for (size_t i = 0; i < n; i++) {
    if (e[i].parent) kiln_ptrmap_put(&parents, e[i].parent, (void *)1);
    if (e[i].depth == 0) top_ns += e[i].total_ns;
  }
  double step_ms = runs ? (double)run_ns / 1e6 / (double)runs : 0;
  double per_run = runs ? 1.0 / (double)runs : 0;
  kiln_strbuf_printf(b,
                     "profile: %" PRId64
                     " runs, %.3f ms per step (mean wall time of a run); "
                     "top-level thunks %.3f ms (%.1f%%), %zu thunks profiled%s\n",
                     runs, step_ms, (double)top_ns / 1e6 * per_run,
                     run_ns ? 100.0 * (double)top_ns / (double)run_ns : 0.0, n,
                     kiln_thunk_profile_mode(p) == KILN_THUNK_PROFILE_COMMANDS
                         ? " (command buffers issued one by one)"
                         : "");
  /* Per kind, the thunks that hold none. */
  uint64_t kind_ns[KILN_THUNK_NUM_KINDS] = {0};
  int64_t kind_n[KILN_THUNK_NUM_KINDS] = {0};
  for (size_t i = 0; i < n; i++) {
    if (kiln_ptrmap_contains(&parents, e[i].thunk)) continue;
    kiln_thunk_kind_t k = kiln_thunk_kind(e[i].thunk);
    kind_ns[k] += e[i].total_ns;
    kind_n[k]++;
  }
  kiln_strbuf_append(b, "by kind:");
  for (int k = 0; k < KILN_THUNK_NUM_KINDS; k++)
    if (kind_n[k])
      kiln_strbuf_printf(b, " %s %.3f ms (%.1f%%, %" PRId64 " thunks);",
                         kiln_thunk_kind_name((kiln_thunk_kind_t)k),
                         (double)kind_ns[k] / 1e6 * per_run,
                         run_ns ? 100.0 * (double)kind_ns[k] / (double)run_ns : 0.0, kind_n[k]);
  kiln_strbuf_append_char(b, '\n');
  qsort(e, n, sizeof(*e), by_total_desc);
  kiln_hashmap_t names;
  kiln_hashmap_init(&names);
  index_module(&names, m);
  kiln_strbuf_printf(b, "%6s %10s %9s %9s %6s  %-14s %-16s %-22s %s\n", "%step", "total ms",
                     "mean ms", "max ms", "calls", "kind", "thunk", "kernel", "what | HLO");
  size_t rows = max_rows > 0 && (size_t)max_rows < n ? (size_t)max_rows : n;
  for (size_t i = 0; i < rows; i++) {
    const kiln_thunk_t *t = e[i].thunk;
    const char *name = kiln_thunk_name(t);
    const char *kernel = kiln_thunk_kernel_name(t);
    kiln_strbuf_printf(b, "%6.2f %10.3f %9.3f %9.3f %6" PRId64 "  %-14s %-16s %-22s ",
                       run_ns ? 100.0 * (double)e[i].total_ns / (double)run_ns : 0.0,
                       (double)e[i].total_ns / 1e6,
                       e[i].calls ? (double)e[i].total_ns / 1e6 / (double)e[i].calls : 0.0,
                       (double)e[i].max_ns / 1e6, e[i].calls,
                       kiln_thunk_kind_name(kiln_thunk_kind(t)), name, kernel ? kernel : "-");
    kiln_thunk_describe(b, t);
    const kiln_hlo_instruction_t *in = kiln_hashmap_get_str(&names, name);
    if (in) {
      kiln_strbuf_append(b, " | ");
      describe_hlo(b, in);
    }
    if (e[i].parent) kiln_strbuf_printf(b, " (in %s)", kiln_thunk_name(e[i].parent));
    kiln_strbuf_append_char(b, '\n');
  }
  if (rows < n) kiln_strbuf_printf(b, "... %zu more thunks\n", n - rows);
  kiln_hashmap_free(&names);
  kiln_ptrmap_free(&parents);
  kiln_free(e);
}
