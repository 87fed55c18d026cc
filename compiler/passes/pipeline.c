/* The whole optimization pipeline; see pipeline.h. */
#include "compiler/passes/pipeline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define MAX_STEP_PASSES 16

typedef struct pipeline_step {
  const char *stage;                     /* what XLA calls this part of the journey */
  const char *passes[MAX_STEP_PASSES];   /* NULL-terminated */
  bool fixed_point;
} pipeline_step_t;

static const pipeline_step_t kSteps[] = {
    /* call_inline first drops computations nothing calls (some test modules carry invalid
     * dead ones the verifier would name after custom_call_rewrite), and again after it to
     * inline the calls xla_builder.* custom calls became. */
    {"call inlining",
     {"call_inline", "custom_call_rewrite", "call_inline", "fusion_inline"},
     false},
    {"simplification",
     {"simplify", "constant_folding", "tuple_simplify", "while_loop_constants",
      "while_loop_invariant_code_motion", "while_loop_dead_state", "while_loop_unroll", "dce",
      "cse"},
     true},
    /* XLA's collective optimizations after simplification (AllReduceSimplifier's
     * single-participant removal, ReduceScatterCreator), then reducers the runtime does not
     * fold expanded into an all-gather and maps. */
    {"collective optimizations",
     {"collective_simplifier", "reduce_scatter_creator", "collective_reducer_expander"},
     false},
    {"expansion",
     {"rng_expander", "rng_bit_generator_expander", "batch_norm_expander", "cholesky_expander",
      "triangular_solve_expander", "scaled_dot_expander", "ragged_dot_expander", "fft_expander",
      "scan_expander", "dynamic_shape_remover", "select_and_scatter_expander",
      "stochastic_convert_decomposer", "concat_splitter"},
     false},
    {"topk decomposition", {"topk_decomposer", "complex_splitter"}, false},
    {"layout assignment", {"layout_assignment"}, false},
    {"layout normalization", {"layout_normalization"}, false},
    {"dot canonicalization", {"conv_gemm_rewriter", "dot_canonicalizer"}, false},
    /* XLA's TreeReductionRewriter, after layout normalization (physical order = logical). */
    {"reduction splitting", {"tree_reduction"}, false},
    {"post-layout simplification", {"simplify_layout", "dce"}, true},
    {"gemm epilogue fusion", {"gemm_epilogue_fusion"}, false},
    {"priority fusion", {"fusion_unfuse", "priority_fusion"}, false},
    {"multi-output fusion", {"multi_output_fusion"}, false},
    {"horizontal fusion", {"horizontal_fusion"}, false},
    {"cse after fusion", {"cse", "dce"}, false},
    /* XLA:GPU's post-fusion collective combiners, in its order. */
    {"collective combiners",
     {"all_gather_combiner", "all_reduce_combiner", "reduce_scatter_combiner", "tuple_simplify"},
     false},
    {"async collectives", {"async_collective_creator"}, false},
    {"fusion wrapper", {"fusion_wrapper"}, false},
    {"copy insertion", {"copy_insertion"}, false},
    {"scheduling", {"schedule", "collective_overlap_schedule"}, false},
    {"buffer assignment", {"buffer_assignment"}, false},
};
#define NUM_STEPS (sizeof kSteps / sizeof kSteps[0])
/* Steps 0 and 1 are the simplification stages. */
#define NUM_SIMPLIFICATION_STEPS 2

void kiln_pipeline_lift_parse_limit(kiln_hlo_module_t *m) { m->arena.limit = 0; }

const kiln_pass_t *kiln_pipeline_find_pass(const char *name) {
  const kiln_pass_t *p = kiln_pass_find(name);
  if (p) return p;
  char alt[128];
  size_t n = strlen(name);
  if (n >= sizeof alt) return NULL;
  bool differs = false;
  for (size_t i = 0; i <= n; i++) {
    char ch = name[i];
    if (ch == '_') ch = '-', differs = true;
    else if (ch == '-') ch = '_', differs = true;
    alt[i] = ch;
  }
  return differs ? kiln_pass_find(alt) : NULL;
}

int kiln_pipeline_missing_passes(const char **names, int max) {
  const char *seen[NUM_STEPS * MAX_STEP_PASSES];
  int num_seen = 0, total = 0;
  for (size_t s = 0; s < NUM_STEPS; s++)
    for (int k = 0; k < MAX_STEP_PASSES && kSteps[s].passes[k]; k++) {
      const char *name = kSteps[s].passes[k];
      bool dup = false;
      for (int i = 0; i < num_seen && !dup; i++) dup = strcmp(seen[i], name) == 0;
      if (dup) continue;
      seen[num_seen++] = name;
      if (kiln_pipeline_find_pass(name)) continue;
      if (total < max) names[total] = name;
      total++;
    }
  return total;
}

void kiln_pipeline_describe(kiln_strbuf_t *b) {
  for (size_t s = 0; s < NUM_STEPS; s++) {
    kiln_strbuf_printf(b, "%2zu. %-27s %s", s + 1, kSteps[s].stage, kSteps[s].fixed_point ? "(" : "");
    for (int k = 0; k < MAX_STEP_PASSES && kSteps[s].passes[k]; k++) {
      const char *name = kSteps[s].passes[k];
      kiln_strbuf_printf(b, "%s%s%s", k ? ", " : "", name,
                         kiln_pipeline_find_pass(name) ? "" : " [not registered]");
    }
    kiln_strbuf_printf(b, "%s\n", kSteps[s].fixed_point ? ")  fixed point" : "");
  }
}

static pthread_once_t g_logged = PTHREAD_ONCE_INIT;

static void log_missing(void) {
  const char *names[64];
  int n = kiln_pipeline_missing_passes(names, 64);
  if (!n) return;
  kiln_strbuf_t b = {0};
  for (int i = 0; i < n && i < 64; i++) kiln_strbuf_printf(&b, "%s%s", i ? ", " : "", names[i]);
  fprintf(stderr, "kiln: pipeline: %d pass(es) not available yet, their stages are skipped: %s\n", n,
          kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
}

/* Whether `list` (kiln_pass_options_t.disabled_passes: a,b like XLA's
 * --xla_disable_hlo_passes) names pass `name`. */
static bool disabled(const char *list, const char *name) {
  if (!list || !*list) return false;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n) {
      bool same = true;
      for (size_t i = 0; i < n && same; i++) {
        char a = p[i] == '-' ? '_' : p[i], b = name[i] == '-' ? '_' : name[i];
        same = a == b;
      }
      if (same) return true;
    }
    p += len;
    if (*p == ',') p++;
  }
  return false;
}

/* Said once per process, the first time a pipeline runs with passes disabled. */
static atomic_bool g_logged_disabled;

static void log_disabled(const char *list) {
  if (!list || !*list || atomic_exchange(&g_logged_disabled, true)) return;
  fprintf(stderr, "kiln: pipeline: passes disabled (KILN_DISABLE_PASSES=%s): they are skipped\n",
          list);
}

static kiln_status run_steps(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, size_t num_steps) {
  kiln_pipeline_lift_parse_limit(m);
  kiln_once(&g_logged, log_missing);
  kiln_pass_runner_t r;
  kiln_pass_runner_init(&r, opts);
  log_disabled(r.opts->disabled_passes);
  for (size_t s = 0; s < num_steps; s++) {
    const kiln_pass_t *group[MAX_STEP_PASSES];
    int n = 0;
    for (int k = 0; k < MAX_STEP_PASSES && kSteps[s].passes[k]; k++) {
      const kiln_pass_t *p = kiln_pipeline_find_pass(kSteps[s].passes[k]);
      if (p && !disabled(r.opts->disabled_passes, p->name)) group[n++] = p;
    }
    if (!n) continue;
    if (kSteps[s].fixed_point) {
      KILN_RETURN_IF_ERROR(kiln_pass_runner_run_fixed_point(&r, group, n, m, NULL),
                           "in pipeline stage '%s'", kSteps[s].stage);
    } else {
      for (int i = 0; i < n; i++)
        KILN_RETURN_IF_ERROR(kiln_pass_runner_run(&r, group[i], m, NULL), "in pipeline stage '%s'",
                             kSteps[s].stage);
    }
  }
  return NULL;
}

kiln_status kiln_pipeline_run(kiln_hlo_module_t *m, const kiln_pass_options_t *opts) {
  return run_steps(m, opts, NUM_STEPS);
}

kiln_status kiln_pipeline_run_simplification(kiln_hlo_module_t *m, const kiln_pass_options_t *opts) {
  return run_steps(m, opts, NUM_SIMPLIFICATION_STEPS);
}
