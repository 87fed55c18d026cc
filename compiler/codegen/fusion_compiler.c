/* Fusion dispatcher (classify a fusion, call its emitter through a table) and the fusion
 * runner (see fusion_compiler.h). */
#include "compiler/codegen/fusion_compiler.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
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
#include "compiler/eval/eval.h"

/* ---- classification ---- */

const char *kiln_fusion_emitter_name(kiln_fusion_emitter_t e) {
  switch (e) {
    case KILN_FUSION_EMITTER_LOOP: return "loop";
    case KILN_FUSION_EMITTER_REDUCTION: return "reduction";
    case KILN_FUSION_EMITTER_TRANSPOSE: return "transpose";
    case KILN_FUSION_EMITTER_CONCATENATE: return "concatenate";
    case KILN_FUSION_EMITTER_SCATTER: return "scatter";
    case KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE: return "dynamic-update-slice";
    case KILN_FUSION_EMITTER_SORT: return "sort";
    case KILN_FUSION_EMITTER_INPUT_SLICES: return "input-slices";
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
static kiln_fusion_emitter_t kind_of_hero_emitter(kiln_hero_emitter_t e) {
  static const kiln_fusion_emitter_t kinds[] = {
      [KILN_HERO_EMITTER_LOOP] = KILN_FUSION_EMITTER_LOOP,
      [KILN_HERO_EMITTER_REDUCTION] = KILN_FUSION_EMITTER_REDUCTION,
      [KILN_HERO_EMITTER_TRANSPOSE] = KILN_FUSION_EMITTER_TRANSPOSE,
      [KILN_HERO_EMITTER_SCATTER] = KILN_FUSION_EMITTER_SCATTER,
      [KILN_HERO_EMITTER_SORT] = KILN_FUSION_EMITTER_SORT,
      [KILN_HERO_EMITTER_CONCATENATE] = KILN_FUSION_EMITTER_CONCATENATE,
      [KILN_HERO_EMITTER_INPUT_SLICES] = KILN_FUSION_EMITTER_INPUT_SLICES,
      [KILN_HERO_EMITTER_DYNAMIC_UPDATE_SLICE] = KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE,
  };
  return (size_t)e < sizeof(kinds) / sizeof(kinds[0]) ? kinds[e] : KILN_FUSION_EMITTER_LOOP;
}

kiln_fusion_emitter_t kiln_fusion_classify(const kiln_hlo_computation_t *c,
                                           const kiln_hlo_instruction_t **hero) {
  const kiln_hlo_instruction_t *dummy;
  if (!hero) hero = &dummy;
  *hero = NULL;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    *hero = in;
    switch (in->opcode) {
      case KILN_OP_SCATTER: return KILN_FUSION_EMITTER_SCATTER;
      case KILN_OP_SORT: return KILN_FUSION_EMITTER_SORT;
      case KILN_OP_DYNAMIC_UPDATE_SLICE:
        /* A DUS root (through bitcasts) gets the DUS emitter (in place when its operand is a
         * parameter, else copy + update); a DUS under an epilogue is a loop, as in XLA. */
        if (is_root_through_bitcasts(c, in)) return KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE;
        break;
      default: break;
    }
  }
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    *hero = in;
    if (is_reduce_hero(in)) return KILN_FUSION_EMITTER_REDUCTION;
    if (is_transpose_hero(in)) return KILN_FUSION_EMITTER_TRANSPOSE;
  }
  /* Concatenate (a hero concatenate of <= 4 operands, possibly under an epilogue) and input
   * slices as the hero analysis decides. */
  kiln_hero_analysis_t ha;
  kiln_status hs = kiln_hero_analyze(c, &ha);
  if (!hs && ha.emitter == KILN_HERO_EMITTER_CONCATENATE) {
    *hero = ha.hero;
    return KILN_FUSION_EMITTER_CONCATENATE;
  }
  if (!hs && ha.emitter == KILN_HERO_EMITTER_INPUT_SLICES) {
    *hero = ha.hero;
    return KILN_FUSION_EMITTER_INPUT_SLICES;
  }

  kiln_status_free(hs);
  *hero = NULL;
  return KILN_FUSION_EMITTER_LOOP;
}

/* ---- dispatch ---- */

typedef kiln_status (*emit_fn)(const kiln_hlo_computation_t *c, const kiln_fusion_compile_options_t *opts,
                               kiln_fusion_kernel_t *out);

static kiln_status emit_reduction(const kiln_hlo_computation_t *c, const kiln_fusion_compile_options_t *opts,
                                  kiln_fusion_kernel_t *out) {
  return kiln_reduction_kernel_emit(c, opts, NULL, out);
}

/* The emitter of each kind. */
static const emit_fn kEmitters[] = {
    [KILN_FUSION_EMITTER_LOOP] = kiln_loop_kernel_emit,
    [KILN_FUSION_EMITTER_REDUCTION] = emit_reduction,
    [KILN_FUSION_EMITTER_TRANSPOSE] = kiln_transpose_kernel_emit,
    [KILN_FUSION_EMITTER_CONCATENATE] = kiln_concat_kernel_emit,
    [KILN_FUSION_EMITTER_SCATTER] = kiln_scatter_kernel_emit,
    [KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE] = kiln_dus_kernel_emit,
    [KILN_FUSION_EMITTER_SORT] = kiln_sort_kernel_emit,
    [KILN_FUSION_EMITTER_INPUT_SLICES] = kiln_input_slices_kernel_emit,
};

kiln_status kiln_fusion_choose_emitter(const kiln_hlo_computation_t *c, kiln_fusion_emitter_t *kind) {
  *kind = kiln_fusion_classify(c, NULL);
  switch (*kind) {
    case KILN_FUSION_EMITTER_REDUCTION:
    case KILN_FUSION_EMITTER_TRANSPOSE:
    case KILN_FUSION_EMITTER_CONCATENATE:
    case KILN_FUSION_EMITTER_INPUT_SLICES: {
      kiln_hero_analysis_t ha;
      KILN_RETURN_IF_ERROR(kiln_hero_analyze(c, &ha), "while choosing the emitter of %s", c->name);
      *kind = kind_of_hero_emitter(ha.emitter);
      return NULL;
    }
    default: return NULL;
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
static kiln_status validate_launches(const kiln_hlo_computation_t *c, const kiln_fusion_kernel_t *out,
                                     const kiln_launch_device_t *device) {
  int idx = 0;
  for (const kiln_fusion_kernel_t *k = out; k; k = k->next, idx++) {
    const kiln_kir_func_t *f = k->kir ? kiln_kir_module_kernel(k->kir) : NULL;
    if (!f) continue;
    kiln_status s = kiln_launch_validate(f->block, f->grid, shared_bytes_in(f->body), false, device);
    if (s) return kiln_status_annotate(s, "kernel %d of fusion %s", idx, c->name);
  }
  return NULL;
}

kiln_status kiln_fusion_kernel_emit(const kiln_hlo_computation_t *c,
                                    const kiln_fusion_compile_options_t *opts,
                                    kiln_fusion_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("fusion compiler: no computation");
  /* The environment is read here, once per fusion, never inside the emitters. */
  kiln_fusion_compile_options_t o = {0};
  if (opts) o = *opts;
  kiln_fusion_compile_options_from_env(&o);
  kiln_fusion_emitter_t kind;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fusion_choose_emitter(c, &kind));
  KILN_RETURN_IF_ERROR_PLAIN(kEmitters[kind](c, &o, out));
  for (kiln_fusion_kernel_t *k = out; k; k = k->next)
    if (k->kir) k->kir->excess_precision = !o.strict_precision;
  kiln_status s = validate_launches(c, out, o.device);
  if (s) kiln_fusion_kernel_free(out);
  return s;
}

/* ---- runner ---- */

void kiln_fusion_run_options_init(kiln_fusion_run_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->seed = 42;
  o->float_lo = -1.0;
  o->float_hi = 1.0;
  o->max_ulp = -1;
  o->compile.strict_precision = true;
}

int64_t kiln_fusion_default_ulp(kiln_elem_type_t t) {
  if (!kiln_elem_type_is_float(t)) return 0;
  if (t == KILN_F32) return 4;
  if (t == KILN_F64) return 8;
  return 1;
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
      int64_t lo_v = bits < 4 ? -(1 << (bits - 1)) : -8, hi_v = bits < 4 ? (1 << (bits - 1)) - 1 : 7;
      kiln_literal_set_s64(l, i, lo_v + (int64_t)(r % (uint64_t)(hi_v - lo_v + 1)));
    }
  }
}

/* Ordered integer key of a float's bits (sign-magnitude -> two's complement order). */
static int64_t float_key(kiln_elem_type_t t, const void *data, int64_t i) {
  size_t sb = kiln_elem_type_storage_bytes(t);
  uint64_t bits = 0;
  memcpy(&bits, (const char *)data + (size_t)i * sb, sb);
  int w = kiln_elem_type_bits(t);
  if (t == KILN_F8E8M0FNU) return (int64_t)bits;
  uint64_t sign = (bits >> (w - 1)) & 1;
  uint64_t mag = bits & (w >= 64 ? ~0ull >> 1 : (((uint64_t)1 << (w - 1)) - 1));
  return sign ? -(int64_t)mag : (int64_t)mag;
}

typedef struct cmp_acc {
  double sum_abs_ok; /* > 0: a float element this close in absolute terms passes (sums) */
  int64_t mismatches, max_ulp;
  double max_abs, max_rel;
  char first[256];
} cmp_acc_t;

/* A reduction kernel adds in a tree where the evaluator adds in order: the two sums differ by
 * rounding that grows with the number of terms and the size of the partial sums, which a
 * ulp bound on the (possibly cancelled) result does not capture. An output element of a
 * reduction fusion also passes within 4 * sqrt(n) * eps * M, where n is the number of terms
 * (largest parameter / output elements) and M the output's largest magnitude. */
static double summation_tolerance(const kiln_hlo_computation_t *c, const kiln_literal_t *want) {
  kiln_elem_type_t t = want->shape->type;
  if (!kiln_elem_type_is_float(t) || want->num_elements == 0) return 0;
  int64_t in = 1;
  for (int i = 0; i < c->num_parameters; i++)
    if (kiln_shape_is_array(c->parameters[i]->shape)) {
      int64_t e = kiln_shape_num_elements(c->parameters[i]->shape);
      if (e > in) in = e;
    }
  double n = (double)in / (double)want->num_elements;
  if (n < 1) n = 1;
  double eps = t == KILN_F64 ? 0x1p-52 : t == KILN_F32 ? 0x1p-23 : t == KILN_F16 ? 0x1p-10
             : t == KILN_BF16 ? 0x1p-7 : 0x1p-3;
  double m = 0;
  for (int64_t i = 0; i < want->num_elements; i++) {
    double v = fabs(kiln_literal_get_f64(want, i));
    if (isfinite(v) && v > m) m = v;
  }
  return 4 * sqrt(n) * eps * m;
}

static void compare_output(const kiln_literal_t *want0, const void *got, int64_t tol, int out_index,
                           cmp_acc_t *acc) {
  if (kiln_elem_type_is_complex(want0->shape->type)) {
    /* Complex: both parts within `tol` ulps of the element's larger part (a part that
     * cancels to a small value keeps the absolute error of the whole number). */
    bool c64 = want0->shape->type == KILN_C64;
    int mant = c64 ? 23 : 52;
    for (int64_t i = 0; i < want0->num_elements; i++) {
      double w[2], g[2];
      kiln_literal_get_c128(want0, i, &w[0], &w[1]);
      if (c64) {
        const float *gp = (const float *)got + 2 * i;
        g[0] = gp[0], g[1] = gp[1];
      } else {
        const double *gp = (const double *)got + 2 * i;
        g[0] = gp[0], g[1] = gp[1];
      }
      bool bad = false;
      int64_t ulps = 0;
      double mag = fmax(fabs(w[0]), fabs(w[1]));
      for (int k = 0; k < 2; k++) {
        if (isnan(w[k]) || isnan(g[k]) || isinf(w[k]) || isinf(g[k])) {
          bool same = (isnan(w[k]) && isnan(g[k])) || w[k] == g[k];
          if (!same) bad = true, ulps = INT64_MAX;
          continue;
        }
        double d = fabs(w[k] - g[k]);
        if (d > acc->max_abs) acc->max_abs = d;
        int e = 0;
        frexp(mag, &e);
        double ulp = mag > 0 ? ldexp(1.0, e - 1 - mant) : (c64 ? 1.4e-45 : 4.9e-324);
        int64_t u = (int64_t)ceil(d / ulp);
        if (u > ulps) ulps = u;
      }
      if (ulps > tol) bad = true;
      if (ulps > acc->max_ulp) acc->max_ulp = ulps;
      if (bad) {
        if (acc->mismatches == 0)
          snprintf(acc->first, sizeof(acc->first),
                   "output %d element %lld: want (%.9g, %.9g) got (%.9g, %.9g)", out_index,
                   (long long)i, w[0], w[1], g[0], g[1]);
        acc->mismatches++;
      }
    }
    return;
  }
  const kiln_literal_t *want = want0;
  kiln_elem_type_t t = want->shape->type;
  kiln_literal_t g = *want;
  g.data = (void *)got;
  for (int64_t i = 0; i < want->num_elements; i++) {
    bool bad = false;
    int64_t ulp = 0;
    double a = kiln_literal_get_f64(want, i), b = kiln_literal_get_f64(&g, i);
    if (kiln_elem_type_is_float(t)) {
      bool na = isnan(a), nb = isnan(b);
      if (na || nb) {
        bad = na != nb;
        ulp = bad ? INT64_MAX : 0;
      } else if (isinf(a) || isinf(b)) {
        bad = a != b;
        ulp = bad ? INT64_MAX : 0;
      } else {
        int64_t ka = float_key(t, want->data, i), kb = float_key(t, got, i);
        ulp = ka > kb ? ka - kb : kb - ka;
        double d = fabs(a - b);
        bad = ulp > tol && !(acc->sum_abs_ok > 0 && d <= acc->sum_abs_ok);
        if (d > acc->max_abs) acc->max_abs = d;
        if (a != 0 && d / fabs(a) > acc->max_rel) acc->max_rel = d / fabs(a);
      }
    } else {
      bad = kiln_literal_get_u64(want, i) != kiln_literal_get_u64(&g, i);
      ulp = bad ? 1 : 0;
      double d = fabs(a - b);
      if (d > acc->max_abs) acc->max_abs = d;
    }
    if (ulp > acc->max_ulp) acc->max_ulp = ulp;
    if (bad) {
      if (acc->mismatches == 0)
        snprintf(acc->first, sizeof(acc->first), "output %d element %lld: want %.9g got %.9g",
                 out_index, (long long)i, a, b);
      acc->mismatches++;
    }
  }
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

kiln_status kiln_fusion_run_check(const kiln_hlo_computation_t *c,
                                  const kiln_fusion_run_options_t *opts,
                                  kiln_fusion_run_report_t *rep) {
  kiln_fusion_run_options_t dflt;
  if (!opts) {
    kiln_fusion_run_options_init(&dflt);
    opts = &dflt;
  }
  memset(rep, 0, sizeof(*rep));
  rep->emitter = kiln_fusion_classify(c, NULL);
  kiln_fusion_compile_options_t co = opts->compile;
  char kname[160];
  if (!co.kernel_name) {
    snprintf(kname, sizeof(kname), "%s_k%d", c->name, atomic_fetch_add(&g_kernel_counter, 1));
    kiln_fusion_sanitize_name(kname);
    co.kernel_name = kname;
  }
  kiln_fusion_kernel_t k;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fusion_kernel_emit(c, &co, &k));
  rep->grid = k.grid;
  rep->emit_ms = k.emit_ms;
  rep->pipeline_ms = k.pipeline_ms;
  rep->num_outputs = k.num_outputs;

  kiln_status s = NULL;
  if (opts->check_ptx) {
    s = kiln_fusion_kernel_ptxas_check(&k, NULL);
    rep->ptx_checked = true;
    if (!s) {
      rep->ptx_ok = true;
      snprintf(rep->ptx_note, sizeof(rep->ptx_note), "ptxas -arch=sm_90: ok");
    } else if (kiln_status_code(s) == KILN_UNAVAILABLE) {
      rep->ptx_checked = false;
      snprintf(rep->ptx_note, sizeof(rep->ptx_note), "skipped: %.200s", kiln_status_message(s));
    } else {
      snprintf(rep->ptx_note, sizeof(rep->ptx_note), "ptxas rejected: %.200s", kiln_status_message(s));
    }
    kiln_status_free(s);
    s = NULL;
  }

  kiln_host_jit_t *jit = opts->jit;
  if (!jit) s = kiln_host_jit_create(NULL, &jit);
  int nchain = 0;
  for (const kiln_fusion_kernel_t *x = &k; x; x = x->next) nchain++;
  kiln_kir_host_kernel_t *hk = kiln_calloc((size_t)nchain, sizeof(*hk));
  if (!s) {
    double t0 = kiln_clock_ms();
    int ci = 0;
    for (const kiln_fusion_kernel_t *x = &k; x && !s; x = x->next) s = kiln_kir_compile_host(x->kir, jit, &hk[ci++]);
    rep->host_compile_ms = kiln_clock_ms() - t0;
  }

  kiln_arena_t arena;
  kiln_arena_init(&arena);
  int nin = k.num_inputs, nout = k.num_outputs;
  void **args = kiln_calloc((size_t)(nin + nout) + 1, sizeof(void *));
  kiln_literal_t **params = kiln_calloc((size_t)c->num_parameters + 1, sizeof(*params));
  int64_t max_bytes = opts->max_bytes > 0 ? opts->max_bytes : ((int64_t)1 << 31);
  for (int i = 0; i < nin && !s; i++) {
    const kiln_shape_t *sh = k.inputs[i]->shape;
    if (kiln_shape_num_elements(sh) > max_bytes / 8)
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "input %s of %s is too large to run (%lld elements)",
                           k.inputs[i]->name, c->name, (long long)kiln_shape_num_elements(sh));
  }
  for (int o = 0; o < nout && !s; o++)
    if (kiln_shape_num_elements(k.outputs[o]) > max_bytes / 8)
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "output %d of %s is too large to run (%lld elements)",
                           o, c->name, (long long)kiln_shape_num_elements(k.outputs[o]));
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
  static char empty[8];
  for (int i = 0; i < nin && !s; i++) {
    const kiln_hlo_instruction_t *in = k.inputs[i];
    void *d = in->opcode == KILN_OP_PARAMETER ? params[in->parameter_number]->data : in->literal->data;
    args[i] = d ? d : empty;
    /* Kernels read tensors in their layout's physical order; literals are logical. */
    size_t bytes = (size_t)kiln_shape_num_elements(in->shape) * kiln_elem_type_storage_bytes(in->shape->type);
    void *phys = d && bytes ? kiln_arena_alloc(&arena, bytes) : NULL;
    if (phys && relayout(in->shape, d, phys, true)) args[i] = phys;
  }
  for (int o = 0; o < nout && !s; o++) {
    int64_t bytes = kiln_shape_num_elements(k.outputs[o]) * (int64_t)kiln_elem_type_storage_bytes(k.outputs[o]->type);
    args[nin + o] = kiln_try_calloc((size_t)bytes + 16, 1);
    if (!args[nin + o])
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "output %d of %s: out of memory", o, c->name);
  }
  if (!s) {
    double t0 = kiln_clock_ms();
    for (int ci = 0; ci < nchain && !s; ci++) s = kiln_kir_host_kernel_run(&hk[ci], opts->pool, args);
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
    cmp_acc_t acc = {0};
    int64_t tol0 = -1;
    for (int o = 0; o < nout; o++) {
      /* The evaluator's result: flattened tuple leaves in output order. */
      const kiln_literal_t *want = result;
      if (nout > 1 || kiln_shape_is_tuple(result->shape)) {
        /* Walk the nested tuple in depth-first order to leaf o. */
        int seen = 0;
        const kiln_literal_t *stack[64];
        int sp = 0;
        stack[sp++] = result;
        want = NULL;
        while (sp > 0 && !want) {
          const kiln_literal_t *l = stack[--sp];
          if (kiln_shape_is_tuple(l->shape)) {
            for (int e = l->num_tuple_elements - 1; e >= 0 && sp < 64; e--) stack[sp++] = l->tuple_elements[e];
          } else if (seen++ == o) {
            want = l;
          }
        }
      }
      if (!want || want->num_elements != kiln_shape_num_elements(k.outputs[o])) {
        s = KILN_ERR_INTERNAL("evaluator result does not match output %d", o);
        break;
      }
      kiln_elem_type_t wt = want->shape->type;
      if (kiln_elem_type_is_complex(wt)) wt = wt == KILN_C64 ? KILN_F32 : KILN_F64;
      int64_t tol = opts->max_ulp >= 0 ? opts->max_ulp : kiln_fusion_default_ulp(wt);
      if (tol0 < 0) tol0 = tol;
      size_t obytes = (size_t)want->num_elements * kiln_elem_type_storage_bytes(k.outputs[o]->type);
      void *logical = obytes ? kiln_try_malloc(obytes) : NULL;
      bool relaid = logical && relayout(k.outputs[o], args[nin + o], logical, false);
      acc.sum_abs_ok = rep->emitter == KILN_FUSION_EMITTER_REDUCTION
                           ? summation_tolerance(c, want)
                           : 0;
      compare_output(want, relaid ? logical : args[nin + o], tol, o, &acc);
      kiln_free(logical);
      rep->elements += want->num_elements;
    }
    rep->mismatches = acc.mismatches;
    rep->max_ulp = acc.max_ulp;
    rep->max_abs_err = acc.max_abs;
    rep->max_rel_err = acc.max_rel;
    rep->tolerance = tol0;
    snprintf(rep->first_mismatch, sizeof(rep->first_mismatch), "%s", acc.first);
  }
  for (int o = 0; o < nout; o++) kiln_free(args[nin + o]);
  kiln_free(hk);
  kiln_free(args);
  kiln_free(params);
  kiln_arena_destroy(&arena);
  if (jit && !opts->jit) kiln_host_jit_destroy(jit);
  kiln_fusion_kernel_free(&k);
  if (s) return kiln_status_annotate(s, "while running fusion %s", c->name);
  return NULL;
}

void kiln_fusion_collect(const kiln_hlo_module_t *m, const kiln_hlo_computation_t ***out, int *n) {
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
