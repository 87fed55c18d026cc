/* The host lowering's fast paths give the same results as the plain semantics:
 *   - a top-level `for` (uniform bounds) runs interchanged with the thread loops, with its
 *     iteration values in per-thread slots: bit for bit the per-thread sequential result;
 *   - bf16 add / sub / mul / div round with the short (no NaN test) sequence: bit for bit
 *     kiln_f32_to_bf16 of the f32 result, NaN stays NaN;
 *   - bf16 tanh (the rational approximation): within one bf16 ulp of the correctly rounded
 *     tanh for every one of the 65,536 bf16 inputs, exact at 0, +-inf, NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/numeric.h"
#include "tests/kir_test_kernels.h"

static kiln_host_pool_t *g_pool;

static int setup(void **state) {
  (void)state;
  return kiln_host_pool_create(2, &g_pool) ? -1 : 0;
}
static int teardown(void **state) {
  (void)state;
  kiln_host_pool_destroy(g_pool);
  return 0;
}

enum { FX = 8, FY = 4, FB = 3, FS = 37 }; /* block 8x4, 3 blocks, 37 loop trips */

/* Per thread (tx, ty) of block bx, with w = tx + 1 computed before the loop:
 *   sum = 0, big = -inf; for s in [1, 2 * FS + 1) step 2: v = in[(bx * FS + s / 2) * 32 +
 *   ty * 8 + tx] * w; sum += v; big = max(big, v)
 *   out[bx * 32 + ty * 8 + tx] = sum + big. */
static kiln_kir_module_t *build_for_kernel(void) {
  kiln_kir_module_t *m = kiln_kir_module_create("for_threads", NULL);
  int64_t nin = FB * FS * 32, nout = FB * 32;
  const kiln_kir_type_t *ti = kiln_kir_type_tensor(m, KILN_F32, 1, &nin, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *to = kiln_kir_type_tensor(m, KILN_F32, 1, &nout, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *ps[2] = {ti, to};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "for_threads", KILN_KIR_FUNC_KERNEL, ps, NULL, 2, &to, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {FX, FY, 1}, grid[3] = {FB, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[3] = {kiln_kir_thread_id(&b, 0, 0, FX - 1), kiln_kir_thread_id(&b, 1, 0, FY - 1),
                              kiln_kir_block_id(&b, 0, 0, FB - 1)};
  kiln_kir_value_t *w = kiln_kir_binary(&b, KILN_KIR_ADD,
                                        kiln_kir_convert(&b, ids[0], kiln_kir_type_scalar(m, KILN_F32)),
                                        kiln_kir_const_float(&b, KILN_F32, 1.0));
  kiln_kir_value_t *inits[2] = {kiln_kir_const_float(&b, KILN_F32, 0.0),
                                kiln_kir_const_float(&b, KILN_F32, -INFINITY)};
  kiln_kir_op_t *f = kiln_kir_for(&b, kiln_kir_const_index(&b, 1), kiln_kir_const_index(&b, 2 * FS + 1),
                                  kiln_kir_const_index(&b, 2), inits, 2);
  kiln_kir_region_t *r = kiln_kir_op_region(f, 0);
  kiln_kir_builder_enter(&b, r);
  kiln_kir_value_t *dims[4] = {ids[0], ids[1], ids[2], kiln_kir_region_arg(r, 0)};
  kiln_kir_value_t *idx = kiln_kir_apply_indexing1(
      &b,
      kir_test_map(m, "(tx, ty, bx, s) -> ((bx * 37 + s floordiv 2) * 32 + ty * 8 + tx), "
                      "domain: tx in [0, 7], ty in [0, 3], bx in [0, 2], s in [1, 73]"),
      dims, 4);
  kiln_kir_value_t *v = kiln_kir_binary(&b, KILN_KIR_MUL, kiln_kir_extract(&b, kiln_kir_func_param(k, 0), &idx, 1), w);
  kiln_kir_value_t *ys[2] = {kiln_kir_binary(&b, KILN_KIR_ADD, kiln_kir_region_arg(r, 1), v),
                             kiln_kir_binary(&b, KILN_KIR_MAX, kiln_kir_region_arg(r, 2), v)};
  kiln_kir_yield(&b, ys, 2);
  kiln_kir_builder_exit(&b);
  kiln_kir_value_t *res = kiln_kir_binary(&b, KILN_KIR_ADD, kiln_kir_op_result(f, 0), kiln_kir_op_result(f, 1));
  kiln_kir_value_t *oi = kiln_kir_apply_indexing1(
      &b, kir_test_map(m, "(tx, ty, bx) -> (bx * 32 + ty * 8 + tx), domain: tx in [0, 7], ty in [0, 3], bx in [0, 2]"),
      ids, 3);
  kiln_kir_value_t *out = kiln_kir_insert(&b, res, kiln_kir_func_param(k, 1), &oi, 1);
  kiln_kir_return(&b, &out, 1);
  return kir_test_finish(&b, m);
}

static void test_for_loop_runs_interchanged_with_threads_bit_for_bit(void **state) {
  (void)state;
  kiln_host_jit_t *jit;
  kiln_kir_module_t *m = build_for_kernel();
  kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
  float *in = malloc(sizeof(float) * FB * FS * 32), *out = calloc(FB * 32, sizeof(float));
  for (int i = 0; i < FB * FS * 32; i++) in[i] = (float)((i * 7919) % 1000) / 997.0f - 0.4f;
  void *args[2] = {in, out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  for (int bx = 0; bx < FB; bx++)
    for (int t = 0; t < 32; t++) {
      float w = (float)(t % 8) + 1.0f, sum = 0.0f, big = -INFINITY;
      for (int s = 1; s < 2 * FS + 1; s += 2) {
        float v = in[(bx * FS + s / 2) * 32 + t] * w;
        sum += v;
        big = fmaxf(big, v);
      }
      float want = sum + big;
      if (memcmp(&want, &out[bx * 32 + t], 4) != 0) {
        fprintf(stderr, "block %d thread %d: got %.9g want %.9g\n", bx, t, out[bx * 32 + t], want);
        fail();
      }
    }
  free(in);
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

/* out[i] = op(a[i], b[i]) (or op(a[i]) for unary ops) over bf16[n]. */
static kiln_kir_module_t *build_bf16_op(kiln_kir_opcode_t op, int64_t n) {
  kiln_kir_module_t *m = kiln_kir_module_create("bf16_op", NULL);
  const kiln_kir_type_t *t = kiln_kir_type_tensor(m, KILN_BF16, 1, &n, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *ps[3] = {t, t, t};
  char name[64];
  snprintf(name, sizeof(name), "bf16_%s", kiln_kir_opcode_name(op));
  kiln_kir_func_t *k = kiln_kir_func_create(m, name, KILN_KIR_FUNC_KERNEL, ps, NULL, 3, &t, 1);
  kiln_kir_func_set_written(k, 2, true);
  int64_t block[3] = {128, 1, 1}, grid[3] = {n / 128, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, 127), kiln_kir_block_id(&b, 0, 0, n / 128 - 1)};
  char map[160];
  snprintf(map, sizeof(map), "(th, bl) -> (bl * 128 + th), domain: th in [0, 127], bl in [0, %lld]",
           (long long)(n / 128 - 1));
  kiln_kir_value_t *i = kiln_kir_apply_indexing1(&b, kir_test_map(m, map), ids, 2);
  kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), &i, 1);
  kiln_kir_value_t *y = kiln_kir_extract(&b, kiln_kir_func_param(k, 1), &i, 1);
  kiln_kir_value_t *r = kiln_kir_opcode_is_binary(op) ? kiln_kir_binary(&b, op, x, y) : kiln_kir_unary(&b, op, x);
  kiln_kir_value_t *o = kiln_kir_insert(&b, r, kiln_kir_func_param(k, 2), &i, 1);
  kiln_kir_return(&b, &o, 1);
  return kir_test_finish(&b, m);
}

static uint16_t next_bits(uint64_t *st) {
  *st = *st * 6364136223846793005ull + 1442695040888963407ull;
  return (uint16_t)(*st >> 48);
}

static void test_bf16_arithmetic_rounds_like_the_reference(void **state) {
  (void)state;
  enum { N = 1 << 16 };
  static const kiln_kir_opcode_t kOps[] = {KILN_KIR_ADD, KILN_KIR_SUB, KILN_KIR_MUL, KILN_KIR_DIV};
  uint16_t *a = malloc(2 * N), *bb = malloc(2 * N), *out = malloc(2 * N);
  uint64_t st = 42;
  /* Random bit patterns (all classes: NaN, inf, subnormal, ties), plus a run of exact ties:
   * 1 + 2^-8 (a tie at bf16 precision) times odd / even neighbours. */
  for (int i = 0; i < N; i++) {
    a[i] = next_bits(&st);
    bb[i] = next_bits(&st);
  }
  for (int i = 0; i < 512; i++) {
    a[i] = kiln_f32_to_bf16(1.0f + (float)i / 128.0f);
    bb[i] = kiln_f32_to_bf16(1.0f / 256.0f);
  }
  for (size_t o = 0; o < sizeof(kOps) / sizeof(kOps[0]); o++) {
    kiln_host_jit_t *jit;
    kiln_kir_module_t *m = build_bf16_op(kOps[o], N);
    kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
    void *args[3] = {a, bb, out};
    assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
    for (int i = 0; i < N; i++) {
      float x = kiln_bf16_to_f32(a[i]), y = kiln_bf16_to_f32(bb[i]);
      float r = kOps[o] == KILN_KIR_ADD ? x + y : kOps[o] == KILN_KIR_SUB ? x - y : kOps[o] == KILN_KIR_MUL ? x * y : x / y;
      uint16_t want = kiln_f32_to_bf16(r);
      bool ok = isnan(r) ? isnan(kiln_bf16_to_f32(out[i])) : out[i] == want;
      if (!ok) {
        fprintf(stderr, "%s(%#06x, %#06x) = %#06x, want %#06x\n", kiln_kir_opcode_name(kOps[o]), a[i], bb[i],
                out[i], want);
        fail();
      }
    }
    kiln_host_jit_destroy(jit);
    kiln_kir_module_destroy(m);
  }
  free(a);
  free(bb);
  free(out);
}

/* Position of a non-NaN bf16 on a line where neighbours differ by one. */
static int32_t bf16_order(uint16_t h) { return (h & 0x8000) ? -(int32_t)(h & 0x7fff) : (int32_t)h; }

static void test_bf16_tanh_within_one_ulp_for_every_input(void **state) {
  (void)state;
  enum { N = 1 << 16 };
  uint16_t *x = malloc(2 * N), *out = malloc(2 * N);
  for (int i = 0; i < N; i++) x[i] = (uint16_t)i;
  kiln_host_jit_t *jit;
  kiln_kir_module_t *m = build_bf16_op(KILN_KIR_TANH, N);
  kiln_kir_host_kernel_t k = kir_test_compile_host(m, &jit);
  void *args[3] = {x, x, out};
  assert_null(kiln_kir_host_kernel_run(&k, g_pool, args));
  int worst = 0, exact = 0;
  for (int i = 0; i < N; i++) {
    double xf = kiln_bf16_to_f32(x[i]);
    if (isnan(xf)) {
      assert_true(isnan(kiln_bf16_to_f32(out[i])));
      continue;
    }
    uint16_t want = kiln_f64_to_bf16(tanh(xf));
    int d = abs(bf16_order(out[i]) - bf16_order(want));
    if (d > worst) worst = d;
    exact += d == 0;
    if (d > 1 || (xf == 0.0 && out[i] != x[i]) || (isinf(xf) && out[i] != want)) {
      fprintf(stderr, "tanh(%#06x = %g) = %#06x, want %#06x\n", x[i], xf, out[i], want);
      fail();
    }
  }
  printf("  bf16 tanh: max %d ulp, %d of the non-NaN inputs exact\n", worst, exact);
  free(x);
  free(out);
  kiln_host_jit_destroy(jit);
  kiln_kir_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_for_loop_runs_interchanged_with_threads_bit_for_bit),
      cmocka_unit_test(test_bf16_arithmetic_rounds_like_the_reference),
      cmocka_unit_test(test_bf16_tanh_within_one_ulp_for_every_input),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
