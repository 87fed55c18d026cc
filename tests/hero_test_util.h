/* Shared by the hero-emitter tests (test_reduction_emitter.c, test_transpose_emitter.c):
 * run an emitted fusion kernel on the host on seeded inputs and compare it with the reference
 * evaluator; list the corpus emitter files of one kind. Static functions only. */
#ifndef KILN_TESTS_HERO_TEST_UTIL_H_
#define KILN_TESTS_HERO_TEST_UTIL_H_

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/numeric.h"
#include "emitter_test_util.h"
#include "tools/common/compare.h"
#include "tools/common/hlo_file.h"
#include "tools/common/run_report.h"

static uint64_t hero_splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void hero_fill(kiln_literal_t *l, uint64_t seed) {
  kiln_elem_type_t t = l->shape->type;
  uint64_t st = seed;
  for (int64_t i = 0; i < l->num_elements; i++) {
    uint64_t r = hero_splitmix(&st);
    if (kiln_elem_type_is_float(t)) {
      kiln_literal_set_f64(l, i, -1.0 + 2.0 * (double)(r >> 11) / 9007199254740992.0);
    } else if (t == KILN_PRED) {
      kiln_literal_set_s64(l, i, (int64_t)(r & 1));
    } else if (kiln_elem_type_is_unsigned_int(t)) {
      int bits = kiln_elem_type_bits(t);
      kiln_literal_set_u64(l, i, r % (bits < 4 ? (1u << bits) : 16u));
    } else {
      int bits = kiln_elem_type_bits(t);
      int64_t lo = bits < 4 ? -(1 << (bits - 1)) : -8, hi = bits < 4 ? (1 << (bits - 1)) - 1 : 7;
      kiln_literal_set_s64(l, i, lo + (int64_t)(r % (uint64_t)(hi - lo + 1)));
    }
  }
}

/* Distance in units in the last place between two values of float type t at index i. */
/* Copies between logical row-major storage (literals) and a tensor's physical dimension
 * order (kernel buffers of shapes with a non-default layout). to_physical: logical ->
 * physical. Returns a kiln_malloc'ed buffer, or NULL when the layout is the default. */
static void *hero_relayout(const kiln_shape_t *s, const void *src, bool to_physical) {
  int perm[KILN_KIR_MAX_RANK]; /* logical dim at physical position j (most major first) */
  if (s->rank > KILN_KIR_MAX_RANK || s->rank < 2 || !s->has_layout || s->layout.rank != s->rank ||
      !s->layout.minor_to_major)
    return NULL;
  bool identity = true;
  for (int j = 0; j < s->rank; j++) {
    perm[j] = (int)s->layout.minor_to_major[s->rank - 1 - j];
    identity = identity && perm[j] == j;
  }
  if (identity) return NULL;
  size_t eb = kiln_elem_type_storage_bytes(s->type);
  int64_t n = kiln_shape_num_elements(s), pstride[KILN_KIR_MAX_RANK], lstride[KILN_KIR_MAX_RANK];
  for (int j = s->rank - 1, ps = 1, ls = 1; j >= 0; j--) {
    pstride[perm[j]] = ps, ps *= (int)s->dims[perm[j]];
    lstride[j] = ls, ls *= (int)s->dims[j];
  }
  char *dst = kiln_malloc((size_t)n * eb + 16);
  for (int64_t i = 0; i < n; i++) {
    int64_t p = 0;
    for (int d = 0; d < s->rank; d++) p += (i / lstride[d]) % s->dims[d] * pstride[d];
    if (to_physical) memcpy(dst + (size_t)p * eb, (const char *)src + (size_t)i * eb, eb);
    else memcpy(dst + (size_t)i * eb, (const char *)src + (size_t)p * eb, eb);
  }
  return dst;
}

typedef struct hero_run_result {
  int64_t elements, mismatches;
  double max_rel;
  int64_t max_ulp;
  char first[256];
  double run_ms;
} hero_run_result_t;

/* Runs kernel k (emitted for c; with its chain, in order) on the host, on outputs that start
 * as a 0x5a byte pattern, and compares with the evaluator through the one comparator
 * (tools/common/compare.h): the kernel tolerance of each output's type and, when each output
 * element sums `summed` > 1 values (a reduction), its summation slack; with `exact`, every
 * element bit for bit (data movement: transposes). With zero_scalars,
 * scalar parameters are 0 (reduce init values must be the reducer's identity: the GPU
 * algorithm combines the init once per thread, as XLA's does). */
static kiln_status hero_run_check(const kiln_hlo_computation_t *c, const kiln_codegen_kernel_t *k,
                                  kiln_host_jit_t *jit, kiln_host_pool_t *pool, bool exact,
                                  int64_t summed, bool zero_scalars, uint64_t seed,
                                  hero_run_result_t *res) {
  memset(res, 0, sizeof(*res));
  kiln_compare_report_t cmp = {0};
  /* A chain (e.g. initialize the outputs, then reduce with atomics) runs kernel by kernel. */
  kiln_kir_host_kernel_t hk[8];
  int nchain = 0;
  for (const kiln_codegen_kernel_t *x = k; x; x = x->next) {
    if (nchain == 8) return KILN_ERR_UNIMPLEMENTED("kernel chain longer than 8");
    KILN_RETURN_IF_ERROR_PLAIN(kiln_kir_compile_host(x->kir, jit, &hk[nchain]));
    nchain++;
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **params = kiln_calloc((size_t)c->num_parameters + 1, sizeof(*params));
  void **args = kiln_calloc((size_t)(k->num_inputs + k->num_outputs) + 1, sizeof(void *));
  kiln_status s = NULL;
  for (int i = 0; i < c->num_parameters; i++) {
    params[i] = kiln_literal_make(&arena, c->parameters[i]->shape);
    hero_fill(params[i], seed * 1000003u + (uint64_t)i);
    if (zero_scalars && params[i]->shape->rank == 0) kiln_literal_set_f64(params[i], 0, 0.0);
  }
  char empty[8] = {0}; /* an empty input's pointer: this call's own, never a shared static */
  /* Buffers in physical order for tensors with non-default layouts. */
  void **relaid = kiln_calloc((size_t)(k->num_inputs + k->num_outputs) + 1, sizeof(void *));
  int nrelaid = 0;
  for (int i = 0; i < k->num_inputs; i++) {
    const kiln_hlo_instruction_t *in = k->inputs[i];
    void *d = in->opcode == KILN_OP_PARAMETER ? params[in->parameter_number]->data : in->literal->data;
    args[i] = d ? d : empty;
    void *phys = d ? hero_relayout(in->shape, d, true) : NULL;
    if (phys) args[i] = relaid[nrelaid++] = phys;
  }
  /* Outputs start as garbage (as in thunk execution): every element must be written. */
  for (int o = 0; o < k->num_outputs; o++) {
    size_t bytes = (size_t)(kiln_shape_num_elements(k->outputs[o]) *
                            (int64_t)kiln_elem_type_storage_bytes(k->outputs[o]->type)) + 16;
    args[k->num_inputs + o] = kiln_calloc(bytes, 1);
    memset(args[k->num_inputs + o], 0x5a, bytes);
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int ci = 0; ci < nchain && !s; ci++) s = kiln_kir_host_kernel_run(&hk[ci], pool, args);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  res->run_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  kiln_literal_t *want_all = NULL;
  if (!s) s = emt_eval(c, params, &arena, &want_all);
  for (int o = 0; o < k->num_outputs && !s; o++) {
    const kiln_literal_t *want = kiln_run_report_leaf(want_all, o); /* depth-first leaf o */
    if (!want || want->num_elements != kiln_shape_num_elements(k->outputs[o])) {
      s = KILN_ERR_INTERNAL("evaluator result does not match output %d", o);
      break;
    }
    kiln_elem_type_t t = want->shape->type;
    kiln_tolerance_t tol = {0};
    if (!exact) {
      tol = kiln_compare_kernel_tolerance(t);
      if (summed > 1)
        tol.atol = kiln_compare_summation_atol(t, (double)summed, kiln_compare_magnitude(want));
    }
    void *got = args[k->num_inputs + o];
    void *logical = hero_relayout(k->outputs[o], got, false);
    if (logical) got = relaid[nrelaid++] = logical;
    char label[32];
    snprintf(label, sizeof(label), "output %d", o);
    kiln_compare_array(want, got, &tol, label, &cmp);
  }
  res->elements = cmp.elements;
  res->mismatches = cmp.mismatches;
  res->max_ulp = cmp.max_ulp;
  res->max_rel = cmp.max_rel_err;
  snprintf(res->first, sizeof(res->first), "%.255s", cmp.first);
  for (int o = 0; o < k->num_outputs; o++) kiln_free(args[k->num_inputs + o]);
  for (int i = 0; i < nrelaid; i++) kiln_free(relaid[i]);
  kiln_free(relaid);
  kiln_free(args);
  kiln_free(params);
  kiln_arena_destroy(&arena);
  return s;
}

#endif /* KILN_TESTS_HERO_TEST_UTIL_H_ */
