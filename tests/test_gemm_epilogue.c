/* Gemm epilogue fusion (compiler/passes/gemm_epilogue.c) end to end on the host: each
 * epilogue (alpha, C, bias, ReLU, JAX's tanh GELU and their combinations) x element type (f32,
 * f64, bf16) x operand form (plain, A^T, B^T, batched) compiles to one gemm thunk carrying it
 * and no kernel, and matches the reference evaluator; patterns that must not fuse (a second
 * user, a bias along the wrong dimension, maximum with a non-zero) stay a gemm plus a loop
 * kernel; the corpus's dot + bias / ReLU / C chains are counted after the pipeline, and the
 * corpus modules that run on the host match the evaluator with their epilogues fused. The
 * CUDA pipeline fuses (and sends bf16 dots to gemms) only when compiled with cuBLASLt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/host_pool.h"
#include "base/str.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "compiler/thunks/executable_cache.h"
#include "runtime/command_buffer.h"
#include "runtime/host/host_device.h"
#include "tests/host_device_fixture.h"
#include "tests/host_run_util.h"
#include "tests/skip_util.h"
#include "tests/temp_dir_util.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

/* Runs `text` against the evaluator; the executable must hold `gemms` gemm thunks,
 * `kernels` kernel thunks, and `want` (NULL: none) in its thunk text. */
static void check(const char *text, int gemms, int kernels, const char *want) {
  char *thunks = NULL;
  run_and_compare_on(g_dev, text, 1, &thunks);
  const char *seq = strstr(thunks, "thunks:");
  printf("%s", seq ? seq : thunks);
  assert_int_equal(count_in(thunks, " gemm "), gemms);
  assert_int_equal(count_in(thunks, " kernel "), kernels);
  if (want && !strstr(thunks, want)) fail_msg("thunks lack '%s'", want);
  kiln_free(thunks);
}

/* One module: dot(a, b) of `ty` (lhs m x k, or k x m when ta; rhs k x n, or n x k when tb;
 * `batch` > 0 adds a leading batch dim) followed by `epi` (HLO lines reading `d` and ending in
 * ROOT). Extra parameters the epilogue needs are declared by it as parameter(2), (3). */
static char *module(const char *ty, int batch, bool ta, bool tb, int m, int n, int k,
                    const char *epi) {
  kiln_strbuf_t b = {0};
  char bp[16] = "", bd[16] = "";
  if (batch) snprintf(bp, sizeof bp, "%d,", batch), snprintf(bd, sizeof bd, "%d,", batch);
  int ld = batch ? 1 : 0;
  kiln_strbuf_printf(&b, "HloModule g\nENTRY e {\n");
  kiln_strbuf_printf(&b, "  a = %s[%s%d,%d] parameter(0)\n", ty, bp, ta ? k : m, ta ? m : k);
  kiln_strbuf_printf(&b, "  b = %s[%s%d,%d] parameter(1)\n", ty, bp, tb ? n : k, tb ? k : n);
  kiln_strbuf_printf(
      &b, "  d = %s[%s%d,%d] dot(a, b), %slhs_contracting_dims={%d}, %srhs_contracting_dims={%d}\n",
      ty, bd, m, n, batch ? "lhs_batch_dims={0}, " : "", ld + (ta ? 0 : 1),
      batch ? "rhs_batch_dims={0}, " : "", ld + (tb ? 1 : 0));
  /* The epilogue text uses T for the type, S for the result shape's dims and N for n. */
  char shape[64], nbuf[16], last[16];
  snprintf(shape, sizeof shape, "%s%d,%d", bp, m, n);
  snprintf(nbuf, sizeof nbuf, "%d", n);
  snprintf(last, sizeof last, "%d", ld + 1);
  for (const char *p = epi; *p; p++) {
    if (*p == 'T' && p[1] == '[')
      kiln_strbuf_append(&b, ty);
    else if (*p == 'S' && p[-1] == '[')
      kiln_strbuf_append(&b, shape);
    else if (*p == 'N' && p[-1] == '[')
      kiln_strbuf_append(&b, nbuf);
    else if (*p == 'L' && p[-1] == '{')
      kiln_strbuf_append(&b, last);
    else
      kiln_strbuf_append_char(&b, *p);
  }
  kiln_strbuf_printf(&b, "}\n");
  return kiln_strbuf_take(&b);
}

/* bias along the last dim (L), then ReLU or GELU, as JAX's dense + activation emit them. */
static const char kBias[] =
    "  v = T[N] parameter(2)\n  bv = T[S] broadcast(v), dimensions={L}\n"
    "  ROOT x = T[S] add(d, bv)\n";
static const char kBiasRelu[] =
    "  v = T[N] parameter(2)\n  bv = T[S] broadcast(v), dimensions={L}\n"
    "  x = T[S] add(d, bv)\n  z = T[] constant(0)\n  bz = T[S] broadcast(z), dimensions={}\n"
    "  ROOT r = T[S] maximum(x, bz)\n";
static const char kBiasGelu[] =
    "  v = T[N] parameter(2)\n  bv = T[S] broadcast(v), dimensions={L}\n"
    "  x = T[S] add(bv, d)\n"
    "  x2 = T[S] multiply(x, x)\n  x3 = T[S] multiply(x, x2)\n"
    "  c0 = T[] constant(0.044715)\n  b0 = T[S] broadcast(c0), dimensions={}\n"
    "  t0 = T[S] multiply(b0, x3)\n  s0 = T[S] add(x, t0)\n"
    "  c1 = T[] constant(0.7978845608)\n  b1 = T[S] broadcast(c1), dimensions={}\n"
    "  t1 = T[S] multiply(b1, s0)\n  th = T[S] tanh(t1)\n"
    "  c2 = T[] constant(1)\n  b2 = T[S] broadcast(c2), dimensions={}\n  s1 = T[S] add(b2, th)\n"
    "  c3 = T[] constant(0.5)\n  b3 = T[S] broadcast(c3), dimensions={}\n"
    "  t2 = T[S] multiply(b3, s1)\n  ROOT g = T[S] multiply(x, t2)\n";
/* alpha and a full-matrix addend (beta = 1), then ReLU; the other GELU form (0.5 x) * S. */
static const char kAlphaCRelu[] =
    "  c = T[S] parameter(2)\n  al = T[] constant(0.25)\n  ba = T[S] broadcast(al), dimensions={}\n"
    "  sc = T[S] multiply(ba, d)\n  y = T[S] add(sc, c)\n"
    "  z = T[] constant(0)\n  bz = T[S] broadcast(z), dimensions={}\n  ROOT r = T[S] maximum(bz, "
    "y)\n";
static const char kGeluHalfX[] =
    "  x2 = T[S] multiply(d, d)\n  x3 = T[S] multiply(x2, d)\n"
    "  c0 = T[] constant(0.044715)\n  b0 = T[S] broadcast(c0), dimensions={}\n"
    "  t0 = T[S] multiply(x3, b0)\n  s0 = T[S] add(t0, d)\n"
    "  c1 = T[] constant(0.7978845608)\n  b1 = T[S] broadcast(c1), dimensions={}\n"
    "  t1 = T[S] multiply(s0, b1)\n  th = T[S] tanh(t1)\n"
    "  c2 = T[] constant(1)\n  b2 = T[S] broadcast(c2), dimensions={}\n  s1 = T[S] add(th, b2)\n"
    "  c3 = T[] constant(0.5)\n  b3 = T[S] broadcast(c3), dimensions={}\n"
    "  hx = T[S] multiply(d, b3)\n  ROOT g = T[S] multiply(hx, s1)\n";

static void each_form(const char *epi, const char *want) {
  static const char *const types[] = {"f32", "f64", "bf16"};
  static const struct {
    int batch;
    bool ta, tb;
  } forms[] = {
      {0, false, false}, {0, true, false}, {0, false, true}, {3, false, false}, {2, true, true}};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
      /* Sizes past the tiny-gemm cutoff (the library path) and odd ones. */
      char *text = module(types[t], forms[f].batch, forms[f].ta, forms[f].tb, 37, 29, 19, epi);
      check(text, 1, 0, want);
      kiln_free(text);
    }
  /* A gemm large enough to be cut into epilogue panels (65536 elements each). */
  char *text = module("f32", 0, false, true, 700, 200, 64, epi);
  check(text, 1, 0, want);
  kiln_free(text);
}

static void test_bias_fuses_into_the_gemm(void **state) {
  (void)state;
  each_form(kBias, "+ bias");
}

static void test_bias_then_relu_fuses_into_the_gemm(void **state) {
  (void)state;
  each_form(kBiasRelu, "then relu");
}

static void test_bias_then_jax_tanh_gelu_fuses_into_the_gemm(void **state) {
  (void)state;
  each_form(kBiasGelu, "then gelu_tanh");
  each_form(kGeluHalfX, "then gelu_tanh");
}

static void test_alpha_and_addend_fuse_as_alpha_and_beta(void **state) {
  (void)state;
  each_form(kAlphaCRelu, "alpha=0.25 beta=1");
}

static void test_patterns_that_must_not_fuse_stay_a_gemm_and_a_kernel(void **state) {
  (void)state;
  /* The dot has a second user (the tuple): the bias add is a loop kernel. */
  check(
      "HloModule u\nENTRY e {\n  a = f32[32,16] parameter(0)\n  b = f32[16,24] parameter(1)\n"
      "  v = f32[24] parameter(2)\n"
      "  d = f32[32,24] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  bv = f32[32,24] broadcast(v), dimensions={1}\n  x = f32[32,24] add(d, bv)\n"
      "  ROOT t = (f32[32,24], f32[32,24]) tuple(x, d)\n}\n",
      1, 1, NULL);
  /* A vector broadcast along the rows (dim 0), not the gemm's n. */
  check(
      "HloModule w\nENTRY e {\n  a = f32[32,16] parameter(0)\n  b = f32[16,24] parameter(1)\n"
      "  v = f32[32] parameter(2)\n"
      "  d = f32[32,24] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  bv = f32[32,24] broadcast(v), dimensions={0}\n  ROOT x = f32[32,24] add(d, bv)\n}\n",
      1, 1, NULL);
  /* maximum with 0.5 is no ReLU: the bias fuses, the maximum is a kernel. */
  check(
      "HloModule h\nENTRY e {\n  a = f32[32,16] parameter(0)\n  b = f32[16,24] parameter(1)\n"
      "  v = f32[24] parameter(2)\n"
      "  d = f32[32,24] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  bv = f32[32,24] broadcast(v), dimensions={1}\n  x = f32[32,24] add(d, bv)\n"
      "  h = f32[] constant(0.5)\n  bh = f32[32,24] broadcast(h), dimensions={}\n"
      "  ROOT r = f32[32,24] maximum(x, bh)\n}\n",
      1, 1, "+ bias");
  /* A GELU whose inner value is also returned: the bias fuses, the GELU stays a kernel. */
  char *text = module("f32", 0, false, false, 16, 8, 12,
                      "  v = T[N] parameter(2)\n  bv = T[S] broadcast(v), dimensions={L}\n"
                      "  x = T[S] add(d, bv)\n  x2 = T[S] multiply(x, x)\n"
                      "  x3 = T[S] multiply(x, x2)\n  c0 = T[] constant(0.044715)\n"
                      "  b0 = T[S] broadcast(c0), dimensions={}\n  t0 = T[S] multiply(b0, x3)\n"
                      "  s0 = T[S] add(x, t0)\n  c1 = T[] constant(0.7978845608)\n"
                      "  b1 = T[S] broadcast(c1), dimensions={}\n  t1 = T[S] multiply(b1, s0)\n"
                      "  th = T[S] tanh(t1)\n  c2 = T[] constant(1)\n"
                      "  b2 = T[S] broadcast(c2), dimensions={}\n  s1 = T[S] add(b2, th)\n"
                      "  c3 = T[] constant(0.5)\n  b3 = T[S] broadcast(c3), dimensions={}\n"
                      "  t2 = T[S] multiply(b3, s1)\n  g = T[S] multiply(x, t2)\n"
                      "  ROOT o = (T[S], T[S]) tuple(g, s0)\n");
  check(text, 1, 1, "+ bias");
  kiln_free(text);
  /* With no gemm library nothing fuses (every dot is a kernel). */
  kiln_hlo_module_t *m = parse(
      "HloModule n\nENTRY e {\n  a = f32[32,16] parameter(0)\n  b = f32[16,24] parameter(1)\n"
      "  v = f32[24] parameter(2)\n"
      "  d = f32[32,24] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  bv = f32[32,24] broadcast(v), dimensions={1}\n  ROOT x = f32[32,24] add(d, bv)\n}\n");
  kiln_pass_options_t o = {.verify = 1, .no_gemm_library = true};
  assert_null(kiln_pipeline_run(m, &o));
  char *out = kiln_hlo_module_to_string(m);
  assert_null(strstr(out, "kiln_gemm_epilogue"));
  kiln_free(out);
  kiln_hlo_module_destroy(m);
}

/* ---- the host runtime's epilogue on its own ---- */

static float bf16_f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* kiln_host_gemm with bias + activation, through the library (with row panels for the big
 * shape) and the C kernel, f32 / f64 / bf16 -> bf16 / bf16 -> f32, against a plain loop that
 * applies the same epilogue in double. */
static void test_host_gemm_applies_bias_and_activation_on_every_path(void **state) {
  (void)state;
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(2, &pool));
  const struct {
    kiln_gemm_dtype_t in, out;
  } types[] = {{KILN_GEMM_F32, KILN_GEMM_SAME},
               {KILN_GEMM_F64, KILN_GEMM_SAME},
               {KILN_GEMM_BF16, KILN_GEMM_SAME},
               {KILN_GEMM_BF16, KILN_GEMM_F32}};
  const int64_t shapes[][4] = {
      {2, 5, 7, 3}, {1, 70, 33, 40}, {1, 2100, 300, 17}, {3, 41, 9, 130}, {2, 300, 40, 150}};
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (int act = 0; act < 3; act++)
        for (int choice = 0; choice < 2; choice++) {
          const int64_t B = shapes[si][0], M = shapes[si][1], N = shapes[si][2], K = shapes[si][3];
          kiln_gemm_desc_t g;
          memset(&g, 0, sizeof g);
          g.dtype = types[ti].in;
          g.out_dtype = types[ti].out;
          g.batch = B, g.m = M, g.n = N, g.k = K;
          g.trans_a = (si & 1) != 0, g.trans_b = act == 1;
          g.alpha = 0.5;
          g.beta = si == 3 ? 1 : 0;
          g.epilogue = (kiln_gemm_epilogue_t)act;
          kiln_gemm_dtype_t ot = kiln_gemm_desc_out_dtype(&g);
          size_t es = kiln_gemm_dtype_size(g.dtype), os = kiln_gemm_dtype_size(ot);
          char *a = kiln_malloc((size_t)(B * M * K) * es),
               *b = kiln_malloc((size_t)(B * K * N) * es);
          char *c = kiln_malloc((size_t)(B * M * N) * os), *bias = kiln_malloc((size_t)N * os);
          double *want = kiln_malloc((size_t)(B * M * N) * sizeof(double));
#define SET(buf, t, i, v)                          \
  do {                                             \
    if ((t) == KILN_GEMM_F64)                      \
      ((double *)(buf))[i] = (v);                  \
    else if ((t) == KILN_GEMM_BF16)                \
      ((uint16_t *)(buf))[i] = f_bf16((float)(v)); \
    else                                           \
      ((float *)(buf))[i] = (float)(v);            \
  } while (0)
#define GET(buf, t, i)                                              \
  ((t) == KILN_GEMM_F64    ? ((double *)(buf))[i]                   \
   : (t) == KILN_GEMM_BF16 ? (double)bf16_f(((uint16_t *)(buf))[i]) \
                           : (double)((float *)(buf))[i])
          for (int64_t i = 0; i < B * M * K; i++) SET(a, g.dtype, i, ((i * 7) % 13 - 6) / 8.0);
          for (int64_t i = 0; i < B * K * N; i++) SET(b, g.dtype, i, ((i * 5) % 11 - 5) / 8.0);
          for (int64_t i = 0; i < N; i++) SET(bias, ot, i, (i % 5 - 2) / 4.0);
          for (int64_t i = 0; i < B * M * N; i++) SET(c, ot, i, (i % 3 - 1) / 2.0);
          for (int64_t bi = 0; bi < B; bi++)
            for (int64_t i = 0; i < M; i++)
              for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t q = 0; q < K; q++)
                  acc += GET(a, g.dtype, bi * M * K + (g.trans_a ? q * M + i : i * K + q)) *
                         GET(b, g.dtype, bi * K * N + (g.trans_b ? j * K + q : q * N + j));
                int64_t at = bi * M * N + i * N + j;
                double v = 0.5 * acc + g.beta * GET(c, ot, at) + GET(bias, ot, j);
                if (act == 1) v = v > 0 ? v : 0;
                if (act == 2)
                  v = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
                want[at] = v;
              }
          g.bias = (kiln_devptr_t)(uintptr_t)bias;
          assert_null(kiln_host_gemm(&g, a, b, c,
                                     choice ? KILN_HOST_BLAS_FALLBACK : KILN_HOST_BLAS_AUTO, pool));
          const double tol = ot == KILN_GEMM_BF16 ? 1.0 / 64 : ot == KILN_GEMM_F32 ? 1e-5 : 1e-12;
          for (int64_t i = 0; i < B * M * N; i++)
            if (fabs(GET(c, ot, i) - want[i]) > tol * (1 + fabs(want[i])))
              fail_msg("%s->%s %lldx%lldx%lldx%lld act %d choice %d: C[%lld] = %g, want %g",
                       kiln_gemm_dtype_name(g.dtype), kiln_gemm_dtype_name(ot), (long long)B,
                       (long long)M, (long long)N, (long long)K, act, choice, (long long)i,
                       GET(c, ot, i), want[i]);
#undef SET
#undef GET
          kiln_free(a), kiln_free(b), kiln_free(c), kiln_free(bias), kiln_free(want);
        }
  kiln_host_pool_destroy(pool);
}

/* A recorded command buffer keeps a gemm's epilogue in its structure and its bias address
 * among the arguments: a moved bias is patched, not re-recorded; adding one is a new
 * structure. */
/* The f32 epilogue runs with the CPU's AVX2 + FMA where it has them (as the JIT's loop kernels
 * do), the baseline copy otherwise or under KILN_HOST_EPILOGUE_ISA=base (ctest runs this
 * file a second time that way: test_gemm_epilogue_baseline_isa, so both copies are checked
 * against the loop above). */
static void test_host_epilogue_takes_the_cpus_vector_isa(void **state) {
  (void)state;
  const char *isa = kiln_host_epilogue_isa();
  const char *env = getenv("KILN_HOST_EPILOGUE_ISA");
  bool want_avx2 = false;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  want_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              !(env && strcmp(env, "base") == 0);
#endif
  printf("host gemm epilogue ISA: %s\n", isa);
  assert_string_equal(isa, want_avx2 ? "avx2+fma" : "base");
  assert_string_equal(kiln_host_epilogue_isa(), isa); /* chosen once */
}

static void test_command_buffers_patch_a_moved_bias(void **state) {
  (void)state;
  kiln_gemm_desc_t g;
  memset(&g, 0, sizeof g);
  g.dtype = KILN_GEMM_F32;
  g.batch = 1, g.m = 4, g.n = 8, g.k = 2;
  g.alpha = 1;
  g.epilogue = KILN_GEMM_EPILOGUE_RELU;
  g.bias = 0x1000;
  kiln_cmd_list_t a, b, c;
  kiln_cmd_list_init(&a);
  kiln_cmd_list_init(&b);
  kiln_cmd_list_init(&c);
  kiln_cmd_list_push_gemm(&a, &g, 0x100, 0x200, 0x300);
  g.bias = 0x2000;
  kiln_cmd_list_push_gemm(&b, &g, 0x100, 0x200, 0x300);
  g.bias = 0;
  kiln_cmd_list_push_gemm(&c, &g, 0x100, 0x200, 0x300);
  assert_true(kiln_cmd_list_same_structure(&a, &b));
  assert_int_equal(kiln_cmd_list_structure_hash(&a), kiln_cmd_list_structure_hash(&b));
  assert_true(kiln_cmd_args_differ(&a.cmds[0], &b.cmds[0]));
  assert_false(kiln_cmd_list_same_structure(&a, &c));
  assert_true(kiln_cmd_list_structure_hash(&a) != kiln_cmd_list_structure_hash(&c));
  kiln_cmd_list_free(&a);
  kiln_cmd_list_free(&b);
  kiln_cmd_list_free(&c);
}

/* Serialization (runtime/executable_serialize.h): a gemm's epilogue and bias slice are written
 * and read back. Each epilogue module compiles, goes to bytes and back with the same printed
 * thunks (the bias and the activation shown), and the executable read back gives the bits of
 * the one compiled; through the compile driver's executable cache the second compile is a hit
 * (the serializer once refused epilogues, so such modules were never cached). */
static void round_trip(const char *text, const char *want, const char *cache_dir) {
  kiln_hlo_module_t *m = parse(text);
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  co.emit.dump_dir = "";
  kiln_executable_desc_t *d = NULL, *back = NULL;
  assert_null(kiln_compile_module(m, &co, &d, NULL));
  void *bytes = NULL;
  size_t len = 0;
  assert_null(kiln_executable_desc_to_bytes(d, &bytes, &len));
  assert_null(kiln_executable_desc_from_bytes(bytes, len, &co.emit, &back));
  kiln_strbuf_t p1 = {0}, p2 = {0};
  kiln_executable_desc_print(&p1, d);
  kiln_executable_desc_print(&p2, back);
  assert_string_equal(kiln_strbuf_cstr(&p1), kiln_strbuf_cstr(&p2));
  if (!strstr(kiln_strbuf_cstr(&p2), want)) fail_msg("read back without '%s'", want);
  kiln_strbuf_free(&p1);
  kiln_strbuf_free(&p2);
  kiln_executable_desc_destroy(back);
  kiln_executable_desc_destroy(d);
  kiln_free(bytes);
  kiln_hlo_module_destroy(m);

  m = parse(text);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *direct = NULL, *read_back = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = g_dev;
  o.dump_dir = "";
  assert_null(kiln_device_run_module(m, args, n, &o, &arena, &direct, NULL));
  o.serialize_round_trip = true;
  assert_null(kiln_device_run_module(m, args, n, &o, &arena, &read_back, NULL));
  assert_true(kiln_literal_equal(direct, read_back));
  kiln_arena_destroy(&arena);

  co.executable_cache_dir = cache_dir;
  kiln_compile_stats_t st;
  for (int pass = 0; pass < 2; pass++) {
    kiln_hlo_module_t *c = parse(text);
    assert_null(kiln_compile_module(c, &co, &d, &st));
    assert_int_equal(st.executable_cache_hit, pass == 1);
    kiln_executable_desc_destroy(d);
    kiln_hlo_module_destroy(c);
  }
  kiln_hlo_module_destroy(m);
}

static void test_epilogues_round_trip_through_serialization_bit_identically(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln_test_epilogue_cacheXXXXXX";
  kiln_test_temp_dir_make(dir);
  static const struct {
    const char *epi, *want;
  } epis[] = {{kBiasRelu, "+ bias"},
              {kBiasRelu, "then relu"},
              {kBiasGelu, "then gelu_tanh"},
              {kAlphaCRelu, "beta=1"}};
  static const char *const types[] = {"f32", "f64", "bf16"};
  int cases = 0;
  for (size_t e = 0; e < sizeof epis / sizeof epis[0]; e++)
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
      char *text = module(types[t], e % 2 ? 2 : 0, e == 1, e == 2, 37, 29, 19, epis[e].epi);
      round_trip(text, epis[e].want, dir);
      kiln_free(text);
      cases++;
    }
  printf("%d epilogue modules round-trip bit-identically and hit the executable cache\n", cases);
  kiln_test_temp_dir_remove(dir);
}

/* Fused gemms in a module after the pipeline with options `o`. */
static int fused_after_pipeline(const char *text, const kiln_pass_options_t *o, int *gemm_dots) {
  kiln_hlo_module_t *m = parse(text);
  assert_null(kiln_pipeline_run(m, o));
  char *out = kiln_hlo_module_to_string(m);
  int n = count_in(out, "\"kiln_gemm_epilogue\"");
  /* Dots outside fusions: gemm thunks. */
  *gemm_dots = 0;
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  for (size_t i = 0; i < nc; i++)
    for (size_t k = 0; k < comps[i]->instructions.len; k++)
      *gemm_dots += comps[i]->instructions.data[k]->opcode == KILN_OP_DOT;
  kiln_free(comps);
  kiln_free(out);
  kiln_hlo_module_destroy(m);
  return n;
}

static void test_cuda_fuses_and_takes_bf16_only_with_cublaslt(void **state) {
  (void)state;
  const char *f32 =
      "HloModule c\nENTRY e {\n  a = f32[64,32] parameter(0)\n  b = f32[32,48] parameter(1)\n"
      "  v = f32[48] parameter(2)\n"
      "  d = f32[64,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  bv = f32[64,48] broadcast(v), dimensions={1}\n  x = f32[64,48] add(d, bv)\n"
      "  z = f32[] constant(0)\n  bz = f32[64,48] broadcast(z), dimensions={}\n"
      "  ROOT r = f32[64,48] maximum(x, bz)\n}\n";
  const char *bf16 =
      "HloModule c\nENTRY e {\n  a = bf16[64,32] parameter(0)\n  b = bf16[32,48] parameter(1)\n"
      "  ROOT d = bf16[64,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  kiln_pass_options_t cublas = {.verify = 1, .gemm_f32_f64_only = true};
  kiln_pass_options_t lt = cublas;
  lt.gemm_cublaslt = true;
  int dots = 0;
  /* Classic cuBLAS: no epilogue, the f32 dot a gemm, the bf16 one a kernel. */
  assert_int_equal(fused_after_pipeline(f32, &cublas, &dots), 0);
  assert_int_equal(dots, 1);
  assert_int_equal(fused_after_pipeline(bf16, &cublas, &dots), 0);
  assert_int_equal(dots, 0);
  /* cuBLASLt: bias + ReLU fused, the bf16 dot a gemm. */
  assert_int_equal(fused_after_pipeline(f32, &lt, &dots), 1);
  assert_int_equal(fused_after_pipeline(bf16, &lt, &dots), 0);
  assert_int_equal(dots, 1);
}

/* ---- the corpus ---- */

typedef struct {
  int modules, fused, bias, relu, addend, alpha, gelu;
  kiln_strbuf_t report;
} corpus_stats_t;

static bool has_sequential_dot(kiln_hlo_module_t *m) {
  size_t nc = 0;
  bool found = false;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  for (size_t i = 0; i < nc && !found; i++)
    for (size_t k = 0; k < comps[i]->instructions.len && !found; k++)
      found = comps[i]->instructions.data[k]->opcode == KILN_OP_DOT;
  kiln_free(comps);
  return found;
}

static void corpus_module(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                          int index, kiln_status error) {
  corpus_stats_t *st = ctx;
  if (error || kiln_corpus_find_invalid(path, index) || !kiln_corpus_sampled(name)) return;
  if (!has_sequential_dot(*mp)) return;
  kiln_pass_options_t o = {.verify = 0};
  if (kiln_pipeline_run(*mp, &o)) return; /* counted by test_dot_canonical_corpus */
  st->modules++;
  char *out = kiln_hlo_module_to_string(*mp);
  int n = count_in(out, "\"kiln_gemm_epilogue\"");
  if (n) kiln_strbuf_printf(&st->report, "  %3d  %s\n", n, name);
  st->fused += n;
  /* The marker names what each fusion holds: {"kiln_gemm_epilogue":"bias+relu","dot":"d"}. */
  for (const char *p = strstr(out, "kiln_gemm_epilogue\":\""); p;
       p = strstr(p + 1, "kiln_gemm_epilogue\":\"")) {
    const char *v = p + strlen("kiln_gemm_epilogue\":\"");
    const char *end = strchr(v, '"');
    char what[64];
    snprintf(what, sizeof what, "%.*s", end ? (int)(end - v) : 0, v);
    st->bias += strstr(what, "bias") != NULL;
    st->relu += strstr(what, "relu") != NULL;
    st->gelu += strstr(what, "gelu") != NULL;
    st->alpha += strstr(what, "alpha") != NULL;
    st->addend += strstr(what, "C") != NULL;
  }
  kiln_free(out);
}

static void test_corpus_dense_layers_compile_with_fused_epilogues(void **state) {
  (void)state;
  if (access(kiln_corpus_dir(), R_OK) != 0) KILN_SKIP("no corpus at %s", kiln_corpus_dir());
  corpus_stats_t st;
  memset(&st, 0, sizeof st);
  kiln_status walk = kiln_corpus_for_each_whole_module(NULL, corpus_module, &st);
  if (walk) fail_msg("%s", kiln_status_message(walk));
  printf(
      "gemm epilogues over %d corpus modules with dots: %d fused gemms (bias %d, relu %d, "
      "gelu %d, alpha %d, C %d):\n%s",
      st.modules, st.fused, st.bias, st.relu, st.gelu, st.alpha, st.addend,
      kiln_strbuf_cstr(&st.report));
  kiln_strbuf_free(&st.report);
  const bool all = !kiln_corpus_sampling();
  assert_true(st.fused >= (all ? 60 : 5));
  assert_true(st.bias >= (all ? 30 : 1));
  assert_true(st.relu >= (all ? 5 : 0));
  assert_true(st.addend >= (all ? 20 : 0));
}

/* Corpus modules that run on the host, each with fused gemms, against the evaluator. */
static void test_corpus_modules_with_fused_epilogues_match_the_evaluator(void **state) {
  (void)state;
  static const char *const files[] = {
      "real/sail-sg__hloenv__tests__hlo_texts__hlo_test.txt",
      "real/sail-sg__hloenv__tests__hlo_texts__test_hlos__jaxrl__1652091810809638.module_0083."
      "jit_get_td_target.657.before_optimizations.txt",
      "real/sail-sg__hloenv__tests__hlo_texts__test_hlos__maml_flax__module_0067.jit_train_step."
      "26.before_optimizations.txt",
      "xla/xla__backends__cpu__tests__thunk_coverage__cpu.hlo",
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__fully_connected_reference_model.hlo",
  };
  if (access(kiln_corpus_dir(), R_OK) != 0) KILN_SKIP("no corpus at %s", kiln_corpus_dir());
  int fused = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), files[i]);
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) fail_msg("%s: %s", files[i], kiln_status_message(s));
    char *text = kiln_hlo_module_to_string(f->modules[0]);
    kiln_hlo_file_free(f);
    char *thunks = NULL;
    run_and_compare_on(g_dev, text, 1, &thunks);
    /* A fused gemm prints its bias, beta or activation. */
    int n =
        count_in(thunks, " + bias ") + count_in(thunks, " beta=1 ") + count_in(thunks, " then ");
    int gemms = count_in(thunks, " gemm ");
    printf("%s: %d gemm thunks, %d with an epilogue feature, matches the evaluator\n", files[i],
           gemms, n);
    assert_true(n > 0);
    fused += n;
    kiln_free(thunks);
    kiln_free(text);
  }
  assert_true(fused >= 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bias_fuses_into_the_gemm),
      cmocka_unit_test(test_bias_then_relu_fuses_into_the_gemm),
      cmocka_unit_test(test_bias_then_jax_tanh_gelu_fuses_into_the_gemm),
      cmocka_unit_test(test_alpha_and_addend_fuse_as_alpha_and_beta),
      cmocka_unit_test(test_patterns_that_must_not_fuse_stay_a_gemm_and_a_kernel),
      cmocka_unit_test(test_host_gemm_applies_bias_and_activation_on_every_path),
      cmocka_unit_test(test_host_epilogue_takes_the_cpus_vector_isa),
      cmocka_unit_test(test_command_buffers_patch_a_moved_bias),
      cmocka_unit_test(test_epilogues_round_trip_through_serialization_bit_identically),
      cmocka_unit_test(test_cuda_fuses_and_takes_bf16_only_with_cublaslt),
      cmocka_unit_test(test_corpus_dense_layers_compile_with_fused_epilogues),
      cmocka_unit_test(test_corpus_modules_with_fused_epilogues_match_the_evaluator),
  };
  return kiln_run_tests(tests, host_device_setup, host_device_teardown);
}
