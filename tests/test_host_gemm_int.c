/* The host's integer gemm (runtime/host/host_gemm_int.c): every operand type (s8, s16, s32,
 * u8, u16, u32) with results of several widths, on every kernel set the CPU runs (portable C,
 * AVX2, AVX-512, AVX-512 VNNI), with transposes, batches, strips and row blocks that end
 * early, k past one packed panel and not a multiple of 4, the transposed (swapped) form for
 * narrow results, operands at their extremes (sums that wrap), with and without a pool —
 * against a loop in 64-bit arithmetic truncated to the result's width (what the reference
 * evaluator does); and whole modules: the corpus's integer dots and one of each operand type
 * become gemm thunks and match the evaluator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "skip_util.h"
#include "status_test_util.h"

#include "base/alloc.h"
#include "compiler/eval/eval.h"
#include "compiler/passes/fusion_wrapper.h"
#include "runtime/host/host_device.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"

static kiln_host_pool_t *g_pool;
static kiln_device_t *g_dev;

static int setup(void **state) {
  (void)state;
  if (kiln_host_pool_create(3, &g_pool)) return -1;
  return kiln_host_device_create(2, &g_dev) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  kiln_host_pool_destroy(g_pool);
  kiln_device_destroy(g_dev);
  return 0;
}

static uint64_t mix(uint64_t h) {
  h *= 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

/* Element i of an operand of type t: the type's extremes every 5th element, else any value. */
static int64_t value(kiln_gemm_dtype_t t, uint64_t i, int tag) {
  uint64_t h = mix(i * 4 + (uint64_t)tag);
  bool extreme = h % 5 == 0;
  h >>= 3;
  switch (t) {
    case KILN_GEMM_S8:
      return extreme ? (h & 1 ? 127 : -128) : (int8_t)h;
    case KILN_GEMM_U8:
      return extreme ? 255 : (uint8_t)h;
    case KILN_GEMM_S16:
      return extreme ? (h & 1 ? 32767 : -32768) : (int16_t)h;
    case KILN_GEMM_U16:
      return extreme ? 65535 : (uint16_t)h;
    case KILN_GEMM_S32:
      return extreme ? (h & 1 ? INT32_MAX : INT32_MIN) : (int32_t)h;
    default:
      return extreme ? UINT32_MAX : (uint32_t)h;
  }
}

static void put(kiln_gemm_dtype_t t, void *p, int64_t i, int64_t v) {
  switch (kiln_gemm_dtype_size(t)) {
    case 1:
      ((uint8_t *)p)[i] = (uint8_t)v;
      return;
    case 2:
      ((uint16_t *)p)[i] = (uint16_t)v;
      return;
    default:
      ((uint32_t *)p)[i] = (uint32_t)v;
      return;
  }
}

static uint32_t get_bits(kiln_gemm_dtype_t t, const void *p, int64_t i) {
  switch (kiln_gemm_dtype_size(t)) {
    case 1:
      return ((const uint8_t *)p)[i];
    case 2:
      return ((const uint16_t *)p)[i];
    default:
      return ((const uint32_t *)p)[i];
  }
}

typedef struct shape {
  int64_t batch, m, n, k;
} shape_t;

/* Runs one gemm and compares every element with the 64-bit loop; false (and a message) on the
 * first mismatch. */
static bool check_one(kiln_gemm_dtype_t in, kiln_gemm_dtype_t out, shape_t s, bool ta, bool tb,
                      kiln_host_pool_t *pool) {
  kiln_gemm_desc_t g = {in, s.batch, s.m, s.n, s.k, ta, tb, 1, 0, out, KILN_GEMM_EPILOGUE_NONE, 0};
  size_t ab, bb, cb;
  kiln_status st = kiln_gemm_desc_check(&g, &ab, &bb, &cb);
  if (st) {
    kiln_status_report(st, "desc");
    return false;
  }
  int64_t na = s.batch * s.m * s.k, nb = s.batch * s.k * s.n, nc = s.batch * s.m * s.n;
  int64_t *av = kiln_malloc((size_t)na * 8), *bv = kiln_malloc((size_t)nb * 8);
  void *a = kiln_malloc(ab), *b = kiln_malloc(bb), *c = kiln_malloc(cb);
  for (int64_t i = 0; i < na; i++) put(in, a, i, av[i] = value(in, (uint64_t)i, 1));
  for (int64_t i = 0; i < nb; i++) put(in, b, i, bv[i] = value(in, (uint64_t)i, 2));
  memset(c, 0xa5, cb);
  st = kiln_host_gemm(&g, a, b, c, KILN_HOST_BLAS_AUTO, pool);
  bool ok = st == NULL;
  if (st) kiln_status_report(st, "gemm");
  const uint32_t mask = kiln_gemm_dtype_size(out) == 4   ? 0xffffffffu
                        : kiln_gemm_dtype_size(out) == 2 ? 0xffffu
                                                         : 0xffu;
  for (int64_t e = 0; ok && e < nc; e++) {
    const int64_t bi = e / (s.m * s.n), i = e / s.n % s.m, j = e % s.n;
    uint64_t sum = 0;
    for (int64_t p = 0; p < s.k; p++) {
      int64_t x = av[bi * s.m * s.k + (ta ? p * s.m + i : i * s.k + p)];
      int64_t y = bv[bi * s.k * s.n + (tb ? j * s.k + p : p * s.n + j)];
      sum += (uint64_t)x * (uint64_t)y;
    }
    const uint32_t want = (uint32_t)sum & mask, got = get_bits(out, c, e);
    if (want != got) {
      fprintf(stderr,
              "%s x %s -> %s batch %lld m %lld n %lld k %lld ta %d tb %d (kernel %s, pool %d): "
              "element (%lld, %lld, %lld) is %u, want %u\n",
              kiln_gemm_dtype_name(in), kiln_gemm_dtype_name(in), kiln_gemm_dtype_name(out),
              (long long)s.batch, (long long)s.m, (long long)s.n, (long long)s.k, ta, tb,
              kiln_host_gemm_int_kernel(), pool != NULL, (long long)bi, (long long)i, (long long)j,
              got, want);
      ok = false;
    }
  }
  kiln_free(av);
  kiln_free(bv);
  kiln_free(a);
  kiln_free(b);
  kiln_free(c);
  return ok;
}

static const kiln_gemm_dtype_t kInts[] = {KILN_GEMM_S8,  KILN_GEMM_U8,  KILN_GEMM_S16,
                                          KILN_GEMM_U16, KILN_GEMM_S32, KILN_GEMM_U32};

/* Shapes: tiny (the in-order loop), one strip, strips and row blocks ending early, k past
 * one panel (256) and not a multiple of 4, batches, a narrow result (the swapped form) and a
 * matrix-vector product. */
static const shape_t kShapes[] = {
    {1, 3, 5, 7},    {2, 9, 40, 13},  {1, 300, 70, 301}, {3, 17, 33, 520},
    {2, 260, 5, 67}, {1, 1, 100, 90}, {1, 129, 1, 77},   {5, 8, 32, 4},
};

static void test_every_integer_type_kernel_and_shape_matches_the_64_bit_loop(void **state) {
  (void)state;
  static const char *const kernels[] = {"base", "avx2", "avx512", "avx512vnni"};
  int sets = 0, gemms = 0, bad = 0;
  for (size_t ks = 0; ks < sizeof(kernels) / sizeof(kernels[0]); ks++) {
    kiln_status st = kiln_host_gemm_int_set_kernel(kernels[ks]);
    if (st) {
      printf("[  INFO    ] kernel set %s: not on this CPU\n", kernels[ks]);
      kiln_status_free(st);
      continue;
    }
    sets++;
    for (size_t t = 0; t < sizeof(kInts) / sizeof(kInts[0]); t++) {
      /* Results: s32, the operand's own type, and a narrower or unsigned one. */
      const kiln_gemm_dtype_t outs[] = {KILN_GEMM_S32, kInts[t],
                                        t % 2 ? KILN_GEMM_S8 : KILN_GEMM_U16};
      for (size_t sh = 0; sh < sizeof(kShapes) / sizeof(kShapes[0]); sh++)
        for (int tr = 0; tr < 4; tr++) {
          /* Every result type on the first transpose; the others with s32. */
          for (size_t o = 0; o < (tr == 0 ? 3u : 1u); o++) {
            kiln_host_pool_t *pool = (sh + (size_t)tr) % 2 ? g_pool : NULL;
            gemms++;
            if (!check_one(kInts[t], outs[o], kShapes[sh], tr & 1, tr & 2, pool)) bad++;
          }
        }
    }
  }
  ASSERT_OK(kiln_host_gemm_int_set_kernel(NULL));
  printf("[  INFO    ] %d kernel sets (best: %s), %d gemms, %d mismatched\n", sets,
         kiln_host_gemm_int_kernel(), gemms, bad);
  assert_true(sets >= 1);
  assert_int_equal(bad, 0);
}

static void test_unknown_or_missing_kernel_set_is_refused(void **state) {
  (void)state;
  const char *before = kiln_host_gemm_int_kernel();
  assert_code(kiln_host_gemm_int_set_kernel("avx9000"), KILN_UNIMPLEMENTED);
  assert_string_equal(kiln_host_gemm_int_kernel(), before);
  kiln_gemm_desc_t g = {KILN_GEMM_F32,           1, 2, 2, 2, false, false, 1, 0, KILN_GEMM_SAME,
                        KILN_GEMM_EPILOGUE_NONE, 0};
  float x[4] = {0};
  assert_code(kiln_host_gemm_int(&g, x, x, x, NULL), KILN_INVALID_ARGUMENT);
}

/* A module's integer dots run as gemm thunks and the module matches the evaluator. */
static void check_module(kiln_hlo_module_t *m, const char *what) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *want = NULL, *got = NULL;
  int n = 0;
  ASSERT_OK(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  ASSERT_OK(kiln_eval_module(m, NULL, n, args, &arena, &want));
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = g_dev;
  o.repeat = 2;
  kiln_device_run_report_t rep;
  ASSERT_OK(kiln_device_run_module(m, args, n, &o, &arena, &got, &rep));
  if (rep.compile.emit.gemms < 1) {
    fprintf(stderr, "%s: no gemm thunk\n", what);
    fail();
  }
  kiln_compare_report_t cr;
  memset(&cr, 0, sizeof cr);
  if (!kiln_compare_literals(want, got, NULL, &cr)) {
    fprintf(stderr, "%s: mismatch: %s\n", what, cr.first);
    fail();
  }
  assert_true(cr.elements > 0);
  kiln_arena_destroy(&arena);
}

static bool int_gemm_type(kiln_elem_type_t t) {
  return t == KILN_S8 || t == KILN_S16 || t == KILN_S32 || t == KILN_U8 || t == KILN_U16 ||
         t == KILN_U32;
}

/* A dot of integer operands of one type the gemm takes (in any dimension order: the dot
 * canonicalizer brings it into gemm form). */
static bool is_int_dot(const kiln_hlo_instruction_t *in) {
  return in->opcode == KILN_OP_DOT && in->num_operands == 2 && kiln_shape_is_array(in->shape) &&
         int_gemm_type(in->shape->type) && int_gemm_type(in->operands[0]->shape->type) &&
         in->operands[1]->shape->type == in->operands[0]->shape->type;
}

static void test_corpus_integer_dots_run_as_gemm_thunks_and_match_the_evaluator(void **state) {
  (void)state;
  if (access(kiln_corpus_dir(), R_OK) != 0) KILN_SKIP("no corpus at %s", kiln_corpus_dir());
  static const char *const files[] = {
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo",
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
  };
  int found = 0;
  for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), files[f]);
    kiln_hlo_file_t *file = NULL;
    ASSERT_OK(kiln_hlo_file_load(path, &file));
    for (int i = 0; i < file->num_modules; i++) {
      kiln_hlo_module_t *m = file->modules[i];
      bool has = false;
      /* The entry's dots (the other computations of import.hlo are never called). */
      for (size_t j = 0; j < m->entry->instructions.len && !has; j++)
        has = is_int_dot(m->entry->instructions.data[j]);
      if (!has) continue;
      char what[1200];
      snprintf(what, sizeof what, "%s module %d (%s)", files[f], i, m->name);
      check_module(m, what);
      found++;
    }
    kiln_hlo_file_free(file);
  }
  printf("[  INFO    ] %d corpus modules with integer gemm dots matched\n", found);
  /* s8 x s8 -> s32 batched, s32 x s32 -> s32 (import.hlo's s16 dot sits in a computation
   * nothing calls: the next test runs its form) */
  assert_true(found >= 2);
}

static void test_dots_of_each_integer_type_run_as_gemm_thunks(void **state) {
  (void)state;
  static const char *const mods[] = {
      "HloModule d\nENTRY e {\n  a = s8[3,40,29] parameter(0)\n  b = s8[3,23,29] parameter(1)\n"
      "  ROOT d = s8[3,40,23] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={2}\n}\n",
      "HloModule d\nENTRY e {\n  a = u8[70,33] parameter(0)\n  b = u8[70,45] parameter(1)\n"
      "  ROOT d = u32[33,45] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n",
      "HloModule d\nENTRY e {\n  a = s16[50,61] parameter(0)\n  b = s16[61,37] parameter(1)\n"
      "  ROOT d = s16[50,37] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      "HloModule d\nENTRY e {\n  a = u16[40,64] parameter(0)\n  b = u16[9,64] parameter(1)\n"
      "  ROOT d = s32[40,9] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n",
      "HloModule d\nENTRY e {\n  a = s32[2,35,300] parameter(0)\n  b = s32[2,300,20] "
      "parameter(1)\n  ROOT d = s32[2,35,20] dot(a, b), lhs_batch_dims={0}, "
      "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
      "HloModule d\nENTRY e {\n  a = u32[64,100] parameter(0)\n  b = u32[100] parameter(1)\n"
      "  ROOT d = u32[64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      "HloModule d\nENTRY e {\n  a = s16[14,6,1,12,16] parameter(0)\n  b = s16[6,3] parameter(1)\n"
      "  ROOT d = s16[14,1,12,16,3] dot(a, b), lhs_contracting_dims={1}, "
      "rhs_contracting_dims={0}\n}\n",
  };
  for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
    kiln_hlo_module_t *m = NULL;
    ASSERT_OK(kiln_hlo_parse_module(mods[i], strlen(mods[i]), NULL, &m));
    /* The last one (import.hlo's test_dot_general_high_rank) only after canonicalization. */
    if (i + 1 < sizeof(mods) / sizeof(mods[0]))
      assert_true(kiln_fusion_wrapper_is_gemm(m->entry->root, NULL));
    check_module(m, mods[i]);
    kiln_hlo_module_destroy(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_integer_type_kernel_and_shape_matches_the_64_bit_loop),
      cmocka_unit_test(test_unknown_or_missing_kernel_set_is_refused),
      cmocka_unit_test(test_corpus_integer_dots_run_as_gemm_thunks_and_match_the_evaluator),
      cmocka_unit_test(test_dots_of_each_integer_type_run_as_gemm_thunks),
  };
  return kiln_run_tests(tests, setup, teardown);
}
