/* Fusion runner (fusion_runner.h). */
#include "tools/common/fusion_runner.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "compiler/codegen/elemental.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/eval/eval.h"
#include "plugin/env_options.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/run_report.h"

void kiln_runner_options_init(kiln_runner_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->seed = 42;
  o->float_lo = -1.0;
  o->float_hi = 1.0;
  o->max_ulp = -1;
  o->compile.strict_precision = true;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill_random(kiln_literal_t *l, uint64_t seed, double lo, double hi) {
  kiln_elem_type_t t = l->shape->type;
  uint64_t st = seed;
  for (int64_t i = 0; i < l->num_elements; i++) {
    uint64_t r = splitmix(&st);
    if (kiln_elem_type_is_complex(t)) {
      double u = (double)(r >> 11) / 9007199254740992.0;
      double w = (double)(splitmix(&st) >> 11) / 9007199254740992.0;
      kiln_literal_set_c128(l, i, lo + (hi - lo) * u, lo + (hi - lo) * w);
    } else if (kiln_elem_type_is_float(t)) {
      double u = (double)(r >> 11) / 9007199254740992.0;
      kiln_literal_set_f64(l, i, lo + (hi - lo) * u);
    } else if (t == KILN_PRED) {
      kiln_literal_set_s64(l, i, (int64_t)(r & 1));
    } else if (kiln_elem_type_is_unsigned_int(t)) {
      int bits = kiln_elem_type_bits(t);
      uint64_t hi_v = bits < 4 ? ((1u << bits) - 1) : 15;
      kiln_literal_set_u64(l, i, r % (hi_v + 1));
    } else {
      int bits = kiln_elem_type_bits(t);
      int64_t lo_v = bits < 4 ? -(1 << (bits - 1)) : -8,
              hi_v = bits < 4 ? (1 << (bits - 1)) - 1 : 7;
      kiln_literal_set_s64(l, i, lo_v + (int64_t)(r % (uint64_t)(hi_v - lo_v + 1)));
    }
  }
}

/* The number of terms an output element of `c` sums when its result `want` comes from a
 * reduction: the largest parameter's elements per output element (at least 1). */
static double summed_terms(const kiln_hlo_computation_t *c, const kiln_literal_t *want) {
  int64_t in = 1;
  for (int i = 0; i < c->num_parameters; i++)
    if (kiln_shape_is_array(c->parameters[i]->shape)) {
      int64_t e = kiln_shape_num_elements(c->parameters[i]->shape);
      if (e > in) in = e;
    }
  return want->num_elements ? (double)in / (double)want->num_elements : 1;
}

/* Copies an array between logical row-major order and the physical order of `s`'s layout
 * (kiln_elemental_physical_order): to_physical, else back. Returns false when the layout
 * is the default one (nothing to do). */
static bool relayout(const kiln_shape_t *s, const void *src, void *dst, bool to_physical) {
  int perm[KILN_KIR_MAX_RANK];
  if (s->rank > KILN_KIR_MAX_RANK || !kiln_elemental_physical_order(s, perm)) return false;
  size_t es = kiln_elem_type_storage_bytes(s->type);
  int64_t pstride[KILN_KIR_MAX_RANK], idx[KILN_KIR_MAX_RANK] = {0};
  int64_t st = 1;
  for (int j = s->rank - 1; j >= 0; j--) pstride[perm[j]] = st, st *= s->dims[perm[j]];
  int64_t n = kiln_shape_num_elements(s), poff = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *from = (const char *)src + (size_t)(to_physical ? i : poff) * es;
    memcpy((char *)dst + (size_t)(to_physical ? poff : i) * es, from, es);
    for (int d = s->rank - 1; d >= 0; d--) {
      poff += pstride[d];
      if (++idx[d] < s->dims[d]) break;
      poff -= pstride[d] * idx[d];
      idx[d] = 0;
    }
  }
  return true;
}

static atomic_int g_kernel_counter;

kiln_status kiln_runner_check(const kiln_hlo_computation_t *c, const kiln_runner_options_t *opts,
                              kiln_runner_report_t *rep) {
  kiln_runner_options_t dflt;
  if (!opts) {
    kiln_runner_options_init(&dflt);
    opts = &dflt;
  }
  memset(rep, 0, sizeof(*rep));
  /* The emitter that runs the fusion, as the dispatcher picks it (not only the
   * classification: a reduce hero with roots the reduction emitter cannot take runs loop). */
  KILN_RETURN_IF_ERROR_PLAIN(kiln_codegen_choose_emitter(c, &rep->emitter));
  /* Elements that sum many terms (a reduce hero, whichever emitter runs it) may add them in
   * another order than the evaluator. */
  bool sums = rep->emitter == KILN_CODEGEN_EMITTER_REDUCTION ||
              kiln_codegen_classify(c, NULL) == KILN_CODEGEN_EMITTER_REDUCTION;
  kiln_codegen_compile_options_t co = opts->compile;
  kiln_pjrt_codegen_options_from_env(&co); /* the edge: KILN_DUMP_TO, excess precision */
  char kname[160];
  if (!co.kernel_name) {
    snprintf(kname, sizeof(kname), "%s_k%d", c->name, atomic_fetch_add(&g_kernel_counter, 1));
    kiln_codegen_sanitize_name(kname);
    co.kernel_name = kname;
  }
  kiln_codegen_kernel_t k;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_codegen_kernel_emit(c, &co, &k));
  rep->grid = k.grid;
  rep->emit_ms = k.emit_ms;
  rep->pipeline_ms = k.pipeline_ms;
  rep->num_outputs = k.num_outputs;

  kiln_status s = NULL;
  if (opts->check_ptx && kiln_corpus_under_asan()) {
    /* ptxas is another program: the ASan build has nothing to add to the normal build's check. */
    snprintf(rep->ptx_note, sizeof(rep->ptx_note),
             "skipped: the ASan build leaves ptxas to the normal build");
  } else if (opts->check_ptx) {
    s = kiln_codegen_kernel_ptxas_check(&k, NULL);
    rep->ptx_checked = true;
    if (!s) {
      rep->ptx_ok = true;
      snprintf(rep->ptx_note, sizeof(rep->ptx_note), "ptxas -arch=sm_90: ok");
    } else if (kiln_status_code(s) == KILN_UNAVAILABLE) {
      rep->ptx_checked = false;
      snprintf(rep->ptx_note, sizeof(rep->ptx_note), "skipped: %.200s", kiln_status_message(s));
    } else {
      snprintf(rep->ptx_note, sizeof(rep->ptx_note), "ptxas rejected: %.200s",
               kiln_status_message(s));
    }
    kiln_status_free(s);
    s = NULL;
  }

  kiln_host_jit_t *jit = opts->jit;
  if (!jit) s = kiln_host_jit_create(NULL, &jit);
  int nchain = 0;
  for (const kiln_codegen_kernel_t *x = &k; x; x = x->next) nchain++;
  kiln_kir_host_kernel_t *hk = kiln_calloc((size_t)nchain, sizeof(*hk));
  if (!s) {
    double t0 = kiln_clock_ms();
    int ci = 0;
    for (const kiln_codegen_kernel_t *x = &k; x && !s; x = x->next)
      s = kiln_kir_compile_host(x->kir, jit, &hk[ci++]);
    rep->host_compile_ms = kiln_clock_ms() - t0;
  }

  kiln_arena_t arena;
  kiln_arena_init(&arena);
  int nin = k.num_inputs, nout = k.num_outputs, nscr = k.num_scratch;
  void **args = kiln_calloc((size_t)(nin + nout + nscr) + 1, sizeof(void *));
  kiln_literal_t **params = kiln_calloc((size_t)c->num_parameters + 1, sizeof(*params));
  int64_t max_bytes = opts->max_bytes > 0 ? opts->max_bytes : ((int64_t)1 << 31);
  for (int i = 0; i < nin && !s; i++) {
    const kiln_shape_t *sh = k.inputs[i]->shape;
    if (kiln_shape_num_elements(sh) > max_bytes / 8)
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                           "input %s of %s is too large to run (%lld elements)", k.inputs[i]->name,
                           c->name, (long long)kiln_shape_num_elements(sh));
  }
  for (int o = 0; o < nout && !s; o++)
    if (kiln_shape_num_elements(k.outputs[o]) > max_bytes / 8)
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                           "output %d of %s is too large to run (%lld elements)", o, c->name,
                           (long long)kiln_shape_num_elements(k.outputs[o]));
  double lo = opts->float_lo, hi = opts->float_hi;
  if (lo == 0 && hi == 0) lo = -1, hi = 1;
  for (int i = 0; i < c->num_parameters && !s; i++) {
    kiln_shape_t *sh = c->parameters[i]->shape;
    if (!kiln_shape_is_array(sh) || kiln_shape_is_tuple(sh)) {
      s = KILN_ERR_UNIMPLEMENTED("parameter %d of %s is not an array", i, c->name);
      break;
    }
    params[i] = kiln_literal_make(&arena, sh);
    if (!params[i]) {
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "input %d of %s too large", i, c->name);
      break;
    }
    fill_random(params[i], opts->seed * 1000003u + (uint64_t)i, lo, hi);
  }
  /* An empty tensor gets a valid pointer that is never read, owned by this run (not a static
   * that concurrent runs would share). */
  void *empty = kiln_arena_alloc(&arena, 16);
  for (int i = 0; i < nin && !s; i++) {
    const kiln_hlo_instruction_t *in = k.inputs[i];
    void *d =
        in->opcode == KILN_OP_PARAMETER ? params[in->parameter_number]->data : in->literal->data;
    args[i] = d ? d : empty;
    /* Kernels read tensors in their layout's physical order; literals are logical. */
    size_t bytes =
        (size_t)kiln_shape_num_elements(in->shape) * kiln_elem_type_storage_bytes(in->shape->type);
    void *phys = d && bytes ? kiln_arena_alloc(&arena, bytes) : NULL;
    if (phys && relayout(in->shape, d, phys, true)) args[i] = phys;
  }
  for (int o = 0; o < nout && !s; o++) {
    int64_t bytes = kiln_shape_num_elements(k.outputs[o]) *
                    (int64_t)kiln_elem_type_storage_bytes(k.outputs[o]->type);
    args[nin + o] = kiln_try_calloc((size_t)bytes + 16, 1);
    if (!args[nin + o])
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "output %d of %s: out of memory", o, c->name);
  }
  for (int i = 0; i < nscr && !s; i++) {
    args[nin + nout + i] = kiln_try_malloc((size_t)kiln_shape_byte_size(k.scratch[i]) + 16);
    if (!args[nin + nout + i])
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scratch %d of %s: out of memory", i, c->name);
  }
  if (!s) {
    double t0 = kiln_clock_ms();
    for (int ci = 0; ci < nchain && !s; ci++)
      s = kiln_kir_host_kernel_run(&hk[ci], opts->pool, args);
    rep->run_ms = kiln_clock_ms() - t0;
  }
  kiln_literal_t *result = NULL;
  if (!s) {
    double t0 = kiln_clock_ms();
    kiln_eval_options_t eo = {0};
    kiln_eval_ctx_t ectx = {0};
    ectx.opts = &eo;
    ectx.arena = &arena;
    const kiln_hlo_computation_t *ref = opts->reference ? opts->reference : c;
    if (ref->num_parameters != c->num_parameters)
      s = KILN_ERR_INVALID("reference %s takes %d parameters, fusion %s takes %d", ref->name,
                           ref->num_parameters, c->name, c->num_parameters);
    else
      s = kiln_eval_computation(&ectx, ref, c->num_parameters, params, &result);
    rep->eval_ms = kiln_clock_ms() - t0;
  }
  if (!s) {
    kiln_compare_report_t cmp = {0};
    int64_t tol0 = -1;
    for (int o = 0; o < nout; o++) {
      /* The evaluator's result: flattened tuple leaves in output order. */
      const kiln_literal_t *want = kiln_run_report_leaf(result, o);
      if (!want || want->num_elements != kiln_shape_num_elements(k.outputs[o])) {
        s = KILN_ERR_INTERNAL("evaluator result does not match output %d", o);
        break;
      }
      kiln_elem_type_t wt = want->shape->type;
      kiln_tolerance_t tol = kiln_compare_kernel_tolerance(wt);
      if (opts->max_ulp >= 0) tol.max_ulp = opts->max_ulp;
      if (sums)
        tol.atol =
            kiln_compare_summation_atol(wt, summed_terms(c, want), kiln_compare_magnitude(want));
      if (tol0 < 0) tol0 = tol.max_ulp;
      size_t obytes = (size_t)want->num_elements * kiln_elem_type_storage_bytes(k.outputs[o]->type);
      void *logical = obytes ? kiln_try_malloc(obytes) : NULL;
      bool relaid = logical && relayout(k.outputs[o], args[nin + o], logical, false);
      char label[32];
      snprintf(label, sizeof(label), "output %d", o);
      kiln_compare_array(want, relaid ? logical : args[nin + o], &tol, label, &cmp);
      kiln_free(logical);
    }
    rep->elements = cmp.elements;
    rep->mismatches = cmp.mismatches;
    rep->max_ulp = cmp.max_ulp;
    rep->max_abs_err = cmp.max_abs_err;
    rep->max_rel_err = cmp.max_rel_err;
    rep->tolerance = tol0;
    snprintf(rep->first_mismatch, sizeof(rep->first_mismatch), "%.255s", cmp.first);
  }
  for (int o = 0; o < nout + nscr; o++) kiln_free(args[nin + o]);
  kiln_free(hk);
  kiln_free(args);
  kiln_free(params);
  kiln_arena_destroy(&arena);
  if (jit && !opts->jit) kiln_host_jit_destroy(jit);
  kiln_codegen_kernel_free(&k);
  if (s) return kiln_status_annotate(s, "while running fusion %s", c->name);
  return NULL;
}

void kiln_runner_collect_fusions(const kiln_hlo_module_t *m, const kiln_hlo_computation_t ***out,
                                 int *n) {
  *n = 0;
  *out = kiln_calloc(m->computations.len + 1, sizeof(**out));
  const kiln_hlo_computation_t *entry = m->entry;
  if (!entry) return;
  for (size_t i = 0; i < entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = entry->instructions.data[i];
    if (in->opcode != KILN_OP_FUSION) continue;
    const kiln_hlo_computation_t *fc = kiln_hlo_instruction_called(in, "calls");
    if (!fc) continue;
    bool dup = false;
    for (int k = 0; k < *n; k++) dup |= (*out)[k] == fc;
    if (!dup) (*out)[(*n)++] = fc;
  }
  if (*n == 0) (*out)[(*n)++] = entry;
}
