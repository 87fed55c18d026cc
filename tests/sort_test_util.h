/* Shared by the sort emitter tests (test_sort_emitter*.c): seeded
 * inputs (distinct keys, many ties, float specials), a sort fusion compiled through
 * kiln_codegen_kernel_emit, run on the host and compared with the evaluator bit for bit, and
 * the fixture holding the JIT and pool a test's cases share. Static inline functions only;
 * include after <cmocka.h>. */
#ifndef KILN_TESTS_SORT_TEST_UTIL_H_
#define KILN_TESTS_SORT_TEST_UTIL_H_

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/sort_emitter.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "emitter_test_util.h"
#include "tools/common/hlo_file.h"

typedef enum fill_kind {
  FILL_DISTINCT = 0, /* operand 0: a shuffled 0..N-1 (no ties); others random */
  FILL_TIES,         /* small integers 0..7: many ties */
  FILL_SPECIAL,      /* floats: NaN (both signs), +-inf, +-0, +-1 and random values */
} fill_kind_t;

static inline uint64_t sort_splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline void sort_fill(kiln_literal_t *l, fill_kind_t kind, int operand, uint64_t seed) {
  kiln_elem_type_t t = l->shape->type;
  bool fl = kiln_elem_type_is_float(t);
  uint64_t st = seed * 7919u + (uint64_t)operand;
  int64_t n = l->num_elements;
  if (kind == FILL_DISTINCT && operand == 0) {
    /* Each run of the last dimension is a shuffled 0..w-1 (minus w/2): exact in any type
     * that holds w distinct integers (bf16: w <= 256). */
    int64_t w = l->shape->rank > 0 ? l->shape->dims[l->shape->rank - 1] : 1;
    int64_t *perm = malloc((size_t)(w > 0 ? w : 1) * sizeof(*perm));
    for (int64_t base = 0; w > 0 && base < n; base += w) {
      for (int64_t i = 0; i < w; i++) perm[i] = i;
      for (int64_t i = w - 1; i > 0; i--) {
        int64_t j = (int64_t)(sort_splitmix(&st) % (uint64_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
      }
      for (int64_t i = 0; i < w; i++) {
        if (fl)
          kiln_literal_set_f64(l, base + i, (double)(perm[i] - w / 2));
        else
          kiln_literal_set_s64(l, base + i, perm[i] - w / 2);
      }
    }
    free(perm);
    return;
  }
  static const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0};
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = sort_splitmix(&st);
    if (kind == FILL_TIES) {
      kiln_literal_set_s64(l, i, (int64_t)(r % 8));
      if (fl) kiln_literal_set_f64(l, i, (double)(r % 8) - 3.0);
    } else if (kind == FILL_SPECIAL && fl && (r & 3) == 0) {
      kiln_literal_set_f64(l, i, specials[(r >> 8) % 8]);
    } else if (fl) {
      kiln_literal_set_f64(l, i, -1.0 + 2.0 * (double)(r >> 11) / 9007199254740992.0);
    } else {
      kiln_literal_set_s64(l, i, (int64_t)(r % 2000001) - 1000000);
    }
  }
}

/* Depth-first array leaf `o` of literal `l`. */
static inline const kiln_literal_t *sort_leaf(const kiln_literal_t *l, int o, int *seen) {
  if (!kiln_shape_is_tuple(l->shape)) return (*seen)++ == o ? l : NULL;
  for (int e = 0; e < l->num_tuple_elements; e++) {
    const kiln_literal_t *x = sort_leaf(l->tuple_elements[e], o, seen);
    if (x) return x;
  }
  return NULL;
}

typedef struct sort_run {
  int64_t elements, mismatches;
  char first[256];
  double run_ms;
  kiln_sort_launch_t launch;
} sort_run_t;

/* Bytes past the end of every output and scratch buffer, set before the run and checked
 * after it: a kernel writing past a row's end into the next row or the buffer's end. */
#define SORT_GUARD_BYTES 64

/* Compiles computation `c` through kiln_codegen_kernel_emit (the dispatch the thunks use),
 * with the host's plan (`host`, kiln_codegen_compile_options_t.host_target) or the GPU's,
 * runs it on the host on inputs filled by `kind` and compares every output with the
 * evaluator bit for bit; a write past the end of an output or scratch buffer is an error. */
static inline kiln_status run_sort(const kiln_hlo_computation_t *c, bool host, fill_kind_t kind,
                                   uint64_t seed, kiln_host_jit_t *jit, kiln_host_pool_t *pool,
                                   sort_run_t *res) {
  memset(res, 0, sizeof(*res));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_sort_plan(c, host, &res->launch));
  kiln_codegen_kernel_t k;
  kiln_codegen_compile_options_t co = {0};
  co.host_target = host;
  static int counter;
  char kname[32];
  snprintf(kname, sizeof(kname), "sort_test%d", counter++);
  co.kernel_name = kname;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_codegen_kernel_emit(c, &co, &k));
  kiln_kir_host_kernel_t hk;
  kiln_status s = kiln_kir_compile_host(k.kir, jit, &hk);
  if (s) {
    kiln_codegen_kernel_free(&k);
    return s;
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **params = kiln_calloc((size_t)c->num_parameters + 1, sizeof(*params));
  int nwritten = k.num_outputs + k.num_scratch;
  void **args = kiln_calloc((size_t)(k.num_inputs + nwritten) + 1, sizeof(void *));
  for (int i = 0; i < c->num_parameters; i++) {
    params[i] = kiln_literal_make(&arena, c->parameters[i]->shape);
    sort_fill(params[i], kind, i, seed);
  }
  char empty[16] = {0}; /* an empty input's pointer: this call's own, never a shared static */
  for (int i = 0; i < k.num_inputs; i++) {
    const kiln_hlo_instruction_t *in = k.inputs[i];
    void *d =
        in->opcode == KILN_OP_PARAMETER ? params[in->parameter_number]->data : in->literal->data;
    args[i] = d ? d : empty;
  }
  for (int o = 0; o < k.num_outputs; o++) {
    size_t bytes = (size_t)(kiln_shape_num_elements(k.outputs[o]) *
                            (int64_t)kiln_elem_type_storage_bytes(k.outputs[o]->type));
    args[k.num_inputs + o] = kiln_malloc(bytes + SORT_GUARD_BYTES);
    memset(args[k.num_inputs + o], 0xA5, bytes + SORT_GUARD_BYTES); /* outputs start as garbage */
  }
  for (int i = 0; i < k.num_scratch; i++) { /* so does the merge sort's scratch */
    size_t bytes = (size_t)kiln_shape_byte_size(k.scratch[i]);
    args[k.num_inputs + k.num_outputs + i] = kiln_malloc(bytes + SORT_GUARD_BYTES);
    memset(args[k.num_inputs + k.num_outputs + i], 0x5A, bytes + SORT_GUARD_BYTES);
  }
  double t0 = kiln_now_seconds();
  s = kiln_kir_host_kernel_run(&hk, pool, args);
  res->run_ms = (kiln_now_seconds() - t0) * 1e3;
  for (int o = 0; o < nwritten && !s; o++) {
    const kiln_shape_t *sh = o < k.num_outputs ? k.outputs[o] : k.scratch[o - k.num_outputs];
    const unsigned char *g =
        (const unsigned char *)args[k.num_inputs + o] + kiln_shape_byte_size(sh);
    for (int i = 0; i < SORT_GUARD_BYTES && !s; i++)
      if (g[i] != (o < k.num_outputs ? 0xA5 : 0x5A))
        s = KILN_ERR_INTERNAL("%s %d: byte %d past its end was written",
                              o < k.num_outputs ? "output" : "scratch",
                              o < k.num_outputs ? o : o - k.num_outputs, i);
  }
  kiln_literal_t *want_all = NULL;
  if (!s) s = emt_eval(c, params, &arena, &want_all);
  for (int o = 0; o < k.num_outputs && !s; o++) {
    int seen = 0;
    const kiln_literal_t *want = sort_leaf(want_all, o, &seen);
    if (!want || want->num_elements != kiln_shape_num_elements(k.outputs[o])) {
      s = KILN_ERR_INTERNAL("evaluator result does not match output %d", o);
      break;
    }
    size_t sb = kiln_elem_type_storage_bytes(want->shape->type);
    const char *got = args[k.num_inputs + o];
    for (int64_t i = 0; i < want->num_elements; i++) {
      res->elements++;
      if (memcmp((const char *)want->data + (size_t)i * sb, got + (size_t)i * sb, sb) == 0)
        continue;
      if (!res->mismatches++) {
        kiln_literal_t g = *want;
        g.data = (void *)got;
        snprintf(res->first, sizeof(res->first), "output %d element %lld: got %g, want %g", o,
                 (long long)i, kiln_literal_get_f64(&g, i), kiln_literal_get_f64(want, i));
      }
    }
  }
  for (int o = 0; o < nwritten; o++) kiln_free(args[k.num_inputs + o]);
  kiln_free(args);
  kiln_free(params);
  kiln_arena_destroy(&arena);
  kiln_codegen_kernel_free(&k);
  return s;
}

typedef struct sort_fixture {
  kiln_host_jit_t *jit;
  kiln_host_pool_t *pool;
  bool host; /* compile with the host's plan (run_sort) */
} sort_fixture_t;

static inline int sort_setup(void **state) {
  sort_fixture_t *f = calloc(1, sizeof(*f));
  if (kiln_host_jit_create(NULL, &f->jit)) return -1;
  if (kiln_host_pool_create(4, &f->pool)) return -1;
  *state = f;
  return 0;
}

static inline int sort_teardown(void **state) {
  sort_fixture_t *f = *state;
  kiln_host_pool_destroy(f->pool);
  kiln_host_jit_destroy(f->jit);
  free(f);
  return 0;
}

/* Parses `text`, runs its entry as a sort fusion and asserts an exact match. */
static inline void sort_expect_match(sort_fixture_t *f, const char *text, fill_kind_t kind,
                                     uint64_t seed) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) fail_msg("parse: %s\n%s", kiln_status_message(s), text);
  sort_run_t r;
  s = run_sort(m->entry, f->host, kind, seed, f->jit, f->pool, &r);
  if (s) fail_msg("%s\n%s", kiln_status_message(s), text);
  if (r.mismatches)
    fail_msg("%lld/%lld mismatches, first: %s\n%s", (long long)r.mismatches, (long long)r.elements,
             r.first, text);
  assert_true(r.elements > 0 || strstr(text, "[0") || strstr(text, ",0]"));
  kiln_hlo_module_destroy(m);
}

/* A one-operand sort of `type[dims]` along `dim` with compare `dir` (and `cmp_type`). */
static inline void sort1(sort_fixture_t *f, const char *type, const char *dims, int dim,
                         const char *dir, const char *cmp_type, bool stable, fill_kind_t kind,
                         uint64_t seed) {
  char text[2048];
  snprintf(text, sizeof(text),
           "HloModule s\n\ncmp {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n"
           "  ROOT c = pred[] compare(a, b), direction=%s%s%s\n}\n\n"
           "ENTRY fused {\n  p0 = %s[%s] parameter(0)\n"
           "  ROOT s = %s[%s] sort(p0), dimensions={%d}%s, to_apply=cmp\n}\n",
           type, type, dir, cmp_type ? ", type=" : "", cmp_type ? cmp_type : "", type, dims, type,
           dims, dim, stable ? ", is_stable=true" : "");
  sort_expect_match(f, text, kind, seed);
}

#endif /* KILN_TESTS_SORT_TEST_UTIL_H_ */
