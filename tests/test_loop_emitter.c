/* Loop emitter: the emitter document's GELU example stage by stage (dumps), its PTX (ptxas
 * -arch=sm_90, vector loads and stores), its host result against the evaluator (<= 1 ulp of
 * bf16), launch dimensions (128 threads, vector size, y split past the grid limit), XLA's
 * vectorization exclusions, multi-output fusions and error paths. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/str.h"
#include "plugin/env_options.h"
#include "tools/common/fusion_runner.h"
#include "tools/common/hlo_file.h"

static kiln_hlo_module_t *load_gelu(void) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/examples/gelu.hlo", KILN_SOURCE_DIR);
  size_t len = 0;
  char *text = NULL;
  kiln_status s = kiln_read_file(path, &text, &len);
  if (s) {
    fprintf(stderr, "%s: %s\n", path, kiln_status_message(s));
    fail();
  }
  kiln_hlo_module_t *m = NULL;
  s = kiln_hlo_parse_module(text, len, NULL, &m);
  kiln_free(text);
  assert_null(s);
  return m;
}

static kiln_hlo_module_t *parse_fusion(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &m);
  if (s) fprintf(stderr, "parse: %s\n", kiln_status_message(s));
  assert_null(s);
  return m;
}

static const kiln_hlo_computation_t *gelu_fusion(const kiln_hlo_module_t *m) {
  const kiln_hlo_computation_t **cs = NULL;
  int n = 0;
  kiln_runner_collect_fusions(m, &cs, &n);
  assert_int_equal(n, 1);
  const kiln_hlo_computation_t *c = cs[0];
  kiln_free(cs);
  assert_string_equal(c->name, "gelu");
  return c;
}

static char *read_dump(const char *dir, const char *file) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  char *text = NULL;
  size_t len = 0;
  kiln_status s = kiln_read_file(path, &text, &len);
  if (s) {
    fprintf(stderr, "missing dump %s: %s\n", path, kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
  return text;
}

__attribute__((noinline)) static int count(const char *hay, const char *needle) {
  int n = 0;
  size_t at = 0, len = strlen(hay);
  while (at < len) {
    const char *p = strstr(hay + at, needle);
    if (!p) break;
    n++;
    at = (size_t)(p - hay) + 1;
  }
  return n;
}

static void expect_contains(const char *text, const char *needle, const char *what) {
  if (!strstr(text, needle)) {
    fprintf(stderr, "%s lacks \"%s\":\n%s\n", what, needle, text);
    fail();
  }
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* The stages of the document's walk-through, as kiln's printer writes them. */
static void test_gelu_stages_dump_loop_inline_flatten_vectorize_unroll(void **state) {
  kiln_hlo_module_t *m = load_gelu();
  char dir[] = "/tmp/kiln_gelu_dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  kiln_codegen_compile_options_t o = {0};
  o.dump_dir = dir;
  o.kernel_name = "gelu_kernel";
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_codegen_kernel_emit(gelu_fusion(m), &o, &k);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);

  char *part = read_dump(dir, "gelu_kernel.41-partition.txt");
  printf("partition: %s", part);
  assert_int_equal(count(part, "\n"), 1); /* one subgraph function: @gelu */
  kiln_free(part);

  char *in = read_dump(dir, "gelu_kernel.50-kir-input.txt");
  expect_contains(in, "%th_x = thread_id x in [0, 127]", "input");
  expect_contains(in, "%bl_x = block_id x in [0, 24575]", "input");
  expect_contains(in, "loop (%th_x, %bl_x)[%v] -> (%dim0, %dim1, %dim2) in (th_x, bl_x)[v] -> "
                      "(bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + v)",
                  "input");
  expect_contains(in, "= call @gelu_multiply_0(%param, %dim0, %dim1, %dim2) -> (bf16)", "input");
  expect_contains(in, "tanh", "input");
  assert_int_equal(count(in, " = extract %param"), 1); /* read once, used five times */
  kiln_free(in);

  char *inl = read_dump(dir, "gelu_kernel.51-kir-inline.txt");
  assert_null(strstr(inl, "call @"));
  assert_null(strstr(inl, "func @gelu_multiply_0"));
  expect_contains(inl, "tanh", "inline");
  expect_contains(inl, "insert", "inline");
  kiln_free(inl);

  char *low = read_dump(dir, "gelu_kernel.52-kir-lower-loops.txt");
  expect_contains(low, "for %v = ", "lower-loops");
  kiln_free(low);

  char *flat = read_dump(dir, "gelu_kernel.53-kir-flatten.txt");
  expect_contains(flat, "-> (th_x * 4 + bl_x * 512 + v)", "flatten");
  expect_contains(flat, "tensor<12582912xbf16>", "flatten");
  kiln_free(flat);

  char *vec = read_dump(dir, "gelu_kernel.54-kir-vectorize.txt");
  expect_contains(vec, "vload %param", "vectorize");
  expect_contains(vec, "vector<4xbf16>", "vectorize");
  expect_contains(vec, "vstore", "vectorize");
  kiln_free(vec);

  char *unr = read_dump(dir, "gelu_kernel.55-kir-unroll.txt");
  assert_null(strstr(unr, "for %v"));
  assert_int_equal(count(unr, " tanh "), 4);
  assert_int_equal(count(unr, "vextract"), 4);
  assert_int_equal(count(unr, "vinsert"), 4);
  assert_int_equal(count(unr, "vload"), 1);
  assert_int_equal(count(unr, "vstore"), 1);
  kiln_free(unr);

  kiln_codegen_kernel_free(&k);
  remove_dir(dir);
  kiln_hlo_module_destroy(m);
}

static bool has_vector_access(const char *ptx, const char *op) {
  for (const char *p = strstr(ptx, op); p; p = strstr(p + 1, op)) {
    const char *eol = strchr(p, ' ');
    const char *tab = strchr(p, '\t');
    if (tab && (!eol || tab < eol)) eol = tab;
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*s", (int)(n < 63 ? n : 63), p);
    if (strstr(buf, ".v2") || strstr(buf, ".v4")) return true;
  }
  return false;
}

static void test_gelu_ptx_passes_ptxas_and_moves_vectors(void **state) {
  kiln_hlo_module_t *m = load_gelu();
  kiln_codegen_kernel_t k;
  assert_null(kiln_codegen_kernel_emit(gelu_fusion(m), NULL, &k));
  char *ptx = NULL;
  kiln_status s = kiln_codegen_kernel_ptxas_check(&k, &ptx);
  if (s && kiln_status_code(s) == KILN_UNAVAILABLE) {
    printf("SKIPPED ptxas: %s\n", kiln_status_message(s));
    kiln_status_free(s);
  } else {
    if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
    assert_null(s);
    printf("ptxas -arch=sm_90 accepted the GELU kernel\n");
  }
  assert_non_null(ptx);
  assert_true(has_vector_access(ptx, "ld.global"));
  assert_true(has_vector_access(ptx, "st.global"));
  kiln_free(ptx);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* Tolerance: at most 1 ulp of bf16 per element (each HLO op rounds to bf16; tanh may round
 * differently once). */
static void test_gelu_host_matches_evaluator_within_one_bf16_ulp(void **state) {
  kiln_hlo_module_t *m = load_gelu();
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.max_ulp = 1;
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(0, &pool));
  o.pool = pool;
  kiln_runner_report_t r;
  kiln_status s = kiln_runner_check(gelu_fusion(m), &o, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  printf("GELU bf16[6,512,4096]: %lld elements, %lld beyond 1 ulp, max %lld ulp, max abs err %g; "
         "run %.1f ms, evaluator %.1f ms\n",
         (long long)r.elements, (long long)r.mismatches, (long long)r.max_ulp, r.max_abs_err,
         r.run_ms, r.eval_ms);
  assert_int_equal(r.elements, 6 * 512 * 4096);
  assert_int_equal(r.mismatches, 0);
  assert_true(r.max_ulp <= 1);
  assert_int_equal(r.grid.threads, 128);
  assert_int_equal(r.grid.vector_size, 4);
  assert_int_equal(r.grid.blocks_x, 24576);
  kiln_host_pool_destroy(pool);
  kiln_hlo_module_destroy(m);
}

/* Every kernel this suite compiles also goes through ptxas -arch=sm_90 (skipped, with the
 * reason printed once, when there is no ptxas). */
static void expect_ptxas_ok(const kiln_codegen_kernel_t *k) {
  static bool skip_printed;
  kiln_status s = kiln_codegen_kernel_ptxas_check(k, NULL);
  if (s && kiln_status_code(s) == KILN_UNAVAILABLE) {
    if (!skip_printed) printf("SKIPPED ptxas: %s\n", kiln_status_message(s));
    skip_printed = true;
    kiln_status_free(s);
    return;
  }
  if (s) fprintf(stderr, "ptxas: %s\n", kiln_status_message(s));
  assert_null(s);
}

static kiln_launch_grid_t grid_of(const char *text, bool no_vectorize, char **kir_text) {
  kiln_hlo_module_t *m = parse_fusion(text);
  kiln_codegen_compile_options_t o = {0};
  o.no_vectorize = no_vectorize;
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_codegen_kernel_emit(m->entry, &o, &k);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  kiln_launch_grid_t g = k.grid;
  if (kir_text) *kir_text = kiln_kir_to_string(k.kir);
  expect_ptxas_ok(&k);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
  return g;
}

static void test_launch_dimensions(void **state) {
  /* Small: one block of 20 threads, no vectors. */
  kiln_launch_grid_t g = grid_of("neg {\n  p = f32[20] parameter(0)\n  ROOT n = f32[20] negate(p)\n}\n",
                                 false, NULL);
  assert_int_equal(g.threads, 20);
  assert_int_equal(g.blocks_x, 1);
  assert_int_equal(g.vector_size, 1);
  /* Enough work: 4 per thread, 128 threads. */
  const char *big = "f {\n  p = f32[6,512,4096] parameter(0)\n  ROOT n = f32[6,512,4096] negate(p)\n}\n";
  g = grid_of(big, false, NULL);
  assert_int_equal(g.threads, 128);
  assert_int_equal(g.vector_size, 4);
  assert_int_equal(g.blocks_x, 6 * 512 * 4096 / 512);
  g = grid_of(big, true, NULL);
  assert_int_equal(g.vector_size, 1);
  assert_int_equal(g.blocks_x, 6 * 512 * 4096 / 128);
  /* gcd(N, 4) = 2 for an N that is 2 mod 4. */
  g = grid_of("f {\n  p = f32[1000002] parameter(0)\n  ROOT n = f32[1000002] negate(p)\n}\n",
              false, NULL);
  assert_int_equal(g.vector_size, 2);
}

/* The host backend's grids (host_target): one element per thread, so the vector lanes read
 * contiguous memory, in blocks of the most of 512, 256 and 128 threads that divides the
 * output's physical minor dimension (a block stays in one row), else 128; fewer threads than
 * that only for fewer elements. Then two of them on the host pool against the evaluator:
 * a row-broadcast exp whose 128-thread blocks straddle rows of 100, and one in 256-thread
 * blocks. */
static void test_host_grids_take_one_element_per_thread(void **state) {
  (void)state;
  static const struct {
    const char *shape;
    int64_t threads, elems;
  } cases[] = {
      {"f32[1024,32000]", 256, 1024 * 32000},
      {"f32[6,512,4096]", 512, 6 * 512 * 4096},
      {"f32[50,100]", 128, 5000},
      {"f32[32000,1024]{0,1}", 256, 32000 * 1024},
      {"f32[20]", 20, 20},
      {"f32[3,640]", 128, 1920},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char text[256];
    snprintf(text, sizeof(text), "f {\n  p = %s parameter(0)\n  ROOT n = %s negate(p)\n}\n",
             cases[i].shape, cases[i].shape);
    kiln_hlo_module_t *m = parse_fusion(text);
    kiln_codegen_compile_options_t o = {.host_target = true};
    kiln_codegen_kernel_t k;
    assert_null(kiln_codegen_kernel_emit(m->entry, &o, &k));
    printf("host grid of %s: %lld threads x %lld blocks, %lld per thread\n", cases[i].shape,
           (long long)k.grid.threads, (long long)k.grid.blocks_x, (long long)k.grid.vector_size);
    assert_int_equal(k.grid.vector_size, 1);
    assert_int_equal(k.grid.threads, cases[i].threads);
    assert_int_equal(k.grid.blocks_x * k.grid.blocks_y,
                     (cases[i].elems + cases[i].threads - 1) / cases[i].threads);
    kiln_codegen_kernel_free(&k);
    kiln_hlo_module_destroy(m);
  }
  const char *rows[2] = {"50,100", "40,768"};
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(0, &pool));
  for (int i = 0; i < 2; i++) {
    char text[512];
    snprintf(text, sizeof(text),
             "f {\n  b = f32[%.2s] parameter(0)\n  p = f32[%s] parameter(1)\n"
             "  bb = f32[%s] broadcast(b), dimensions={0}\n  s = f32[%s] subtract(p, bb)\n"
             "  ROOT e = f32[%s] exponential(s)\n}\n",
             rows[i], rows[i], rows[i], rows[i], rows[i]);
    kiln_hlo_module_t *m = parse_fusion(text);
    kiln_runner_options_t o;
    kiln_runner_options_init(&o);
    o.pool = pool;
    o.compile.host_target = true;
    kiln_runner_report_t r;
    assert_null(kiln_runner_check(m->entry, &o, &r));
    printf("host exp(p - broadcast(b)) over [%s]: %lld threads a block, %lld mismatches\n", rows[i],
           (long long)r.grid.threads, (long long)r.mismatches);
    assert_int_equal(r.grid.threads, i == 0 ? 128 : 256);
    assert_int_equal(r.mismatches, 0);
    kiln_hlo_module_destroy(m);
  }
  kiln_host_pool_destroy(pool);
}

/* XLA's loop__broadcast_constant_block_dim_limit: more blocks than the x limit, so the grid
 * is split over y and the thread map uses bl_y. Compiled only (1.2e12 outputs). */
static void test_block_split_over_y(void **state) {
  char *kir = NULL;
  kiln_launch_grid_t g = grid_of(
      "bcast {\n  one = bf16[] constant(1)\n"
      "  ROOT broadcast = bf16[24,2048,2048,3,4096]{4,3,2,1,0} broadcast(one), dimensions={}\n}\n",
      false, &kir);
  printf("grid: %lld threads x (%lld, %lld) blocks, %lld per thread\n", (long long)g.threads,
         (long long)g.blocks_x, (long long)g.blocks_y, (long long)g.vector_size);
  assert_true(g.blocks_y > 1);
  assert_true(g.blocks_x <= 2147483647);
  assert_true(g.threads * g.blocks_x * g.blocks_y * g.vector_size >= 24LL * 2048 * 2048 * 3 * 4096);
  expect_contains(kir, "bl_y", "kernel");
  kiln_free(kir);
}

static void test_vectorization_disabled_by_sin_and_atan2(void **state) {
  const char *sin = "f {\n  p = f32[6,512,4096] parameter(0)\n  ROOT n = f32[6,512,4096] sine(p)\n}\n";
  assert_int_equal(grid_of(sin, false, NULL).vector_size, 1);
  const char *exp = "f {\n  p = f32[6,512,4096] parameter(0)\n  ROOT n = f32[6,512,4096] exponential(p)\n}\n";
  assert_int_equal(grid_of(exp, false, NULL).vector_size, 4);
  const char *at = "f {\n  p = f32[6,512,4096] parameter(0)\n"
                   "  ROOT n = f32[6,512,4096] atan2(p, p)\n}\n";
  assert_int_equal(grid_of(at, false, NULL).vector_size, 1);
}

static void run_text(const char *text, int64_t want_elements) {
  kiln_hlo_module_t *m = parse_fusion(text);
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.check_ptx = true;
  kiln_runner_report_t r;
  kiln_status s = kiln_runner_check(m->entry, &o, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  if (r.ptx_checked && !r.ptx_ok) fprintf(stderr, "%s\n", r.ptx_note);
  assert_true(!r.ptx_checked || r.ptx_ok);
  if (r.mismatches) fprintf(stderr, "%s\n", r.first_mismatch);
  assert_int_equal(r.mismatches, 0);
  assert_int_equal(r.elements, want_elements);
  kiln_hlo_module_destroy(m);
}

/* Multi-output: two outputs of one shape share a function; a third with other dims but the
 * same element count gets its index through a reshape; a parameter output is copied. */
static void test_multi_output_fusion(void **state) {
  run_text("f {\n"
           "  p0 = f32[4,6] parameter(0)\n"
           "  p1 = f32[4,6] parameter(1)\n"
           "  a = f32[4,6] add(p0, p1)\n"
           "  s = f32[4,6] subtract(p0, p1)\n"
           "  t = f32[6,4] transpose(a), dimensions={1,0}\n"
           "  ROOT r = (f32[4,6], f32[4,6], f32[6,4], f32[4,6]) tuple(a, s, t, p1)\n"
           "}\n",
           4 * 24);
}

/* Data movement through maps: pad with interior padding, concatenate, reverse, slice with
 * stride, dynamic-slice with clamped starts, iota, canonical gather, reduce-window with
 * padding, a reduce inside a loop fusion. */
static void test_index_transforms_run(void **state) {
  run_text("f {\n"
           "  p0 = f32[5,7] parameter(0)\n"
           "  z = f32[] constant(-2)\n"
           "  pad = f32[11,9] pad(p0, z), padding=1_1_1x0_2\n"
           "  rev = f32[11,9] reverse(pad), dimensions={0,1}\n"
           "  ROOT sl = f32[6,3] slice(rev), slice={[0:11:2], [1:9:3]}\n"
           "}\n",
           18);
  run_text("f {\n"
           "  p0 = s32[3,4] parameter(0)\n"
           "  p1 = s32[2,4] parameter(1)\n"
           "  i = s32[4,4] iota(), iota_dimension=1\n"
           "  c = s32[9,4] concatenate(p0, p1, i), dimensions={0}\n"
           "  ROOT n = s32[9,4] negate(c)\n"
           "}\n",
           36);
  run_text("f {\n"
           "  p0 = f32[8,8] parameter(0)\n"
           "  i0 = s32[] parameter(1)\n"
           "  i1 = s32[] parameter(2)\n"
           "  ROOT ds = f32[3,5] dynamic-slice(p0, i0, i1), dynamic_slice_sizes={3,5}\n"
           "}\n",
           15);
  /* Canonical gather: start indices read from the indices operand, clamped (the generated
   * indices lie in [-8, 7]). */
  run_text("f {\n"
           "  operand = f32[33,34] parameter(0)\n"
           "  indices = s32[18,2] parameter(1)\n"
           "  ROOT g = f32[18,7,8] gather(operand, indices), offset_dims={1,2}, "
           "collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={7,8}\n"
           "}\n",
           18 * 56);
  /* reduce-window with padding: window points on the padding are skipped. */
  run_text("add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
           "f {\n"
           "  p = f32[10,12] parameter(0)\n"
           "  z = f32[] constant(0)\n"
           "  rw = f32[5,12] reduce-window(p, z), window={size=3x3 stride=2x1 pad=1_1x1_1}, to_apply=add\n"
           "  ROOT n = f32[5,12] negate(rw)\n"
           "}\n",
           60);
  run_text("add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
           "f {\n"
           "  p0 = f32[3,4,5] parameter(0)\n"
           "  c = f32[] constant(0)\n"
           "  r = f32[4] reduce(p0, c), dimensions={0,2}, to_apply=add\n"
           "  ROOT e = f32[4] exponential(r)\n"
           "}\n",
           4);
}

/* Concatenates of many operands (the binary search over their starts): uneven sizes with
 * empty operands among them (first, middle, last), along an inner dimension, and c64. */
static void test_concatenate_of_many_operands_runs(void **state) {
  run_text(
      "f {\n"
      "  e = f32[2,0,3] parameter(0)\n"
      "  a = f32[2,1,3] parameter(1)\n"
      "  b = f32[2,4,3] parameter(2)\n"
      "  c = f32[2,2,3] parameter(3)\n"
      "  i = f32[2,3,3] iota(), iota_dimension=1\n"
      "  ROOT n = f32[2,20,3] concatenate(e, a, b, e, c, i, a, b, c, i, e), dimensions={1}\n"
      "}\n",
      2 * 20 * 3);
  run_text(
      "f {\n"
      "  a = c64[3,2] parameter(0)\n"
      "  b = c64[3,1] parameter(1)\n"
      "  c = c64[3,5] parameter(2)\n"
      "  k = c64[3,17] concatenate(a, b, c, b, a, c, b), dimensions={1}\n"
      "  ROOT n = c64[3,17] negate(k)\n"
      "}\n",
      3 * 17);
}

static void test_heroes_dispatch_to_their_emitters_or_are_unimplemented(void **state) {
  kiln_hlo_module_t *m = parse_fusion(
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "f {\n  p0 = f32[64,1024] parameter(0)\n  c = f32[] constant(0)\n"
      "  ROOT r = f32[64] reduce(p0, c), dimensions={1}, to_apply=add\n}\n");
  assert_int_equal(kiln_codegen_classify(m->entry, NULL), KILN_CODEGEN_EMITTER_REDUCTION);
  kiln_codegen_kernel_t k;
  /* Reductions and transposes go to their hero emitters. */
  kiln_status s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
  if (s) kiln_status_report(s, "reduction");
  assert_null(s);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);

  /* Scatter goes to the scatter emitter: a chain of an init and an update kernel. */
  m = parse_fusion(
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "f {\n  p0 = f32[8] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = f32[2] parameter(2)\n"
      "  ROOT r = f32[8] scatter(p0, i, u), update_window_dims={}, inserted_window_dims={0},"
      " scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n");
  assert_int_equal(kiln_codegen_classify(m->entry, NULL), KILN_CODEGEN_EMITTER_SCATTER);
  s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
  assert_null(s);
  assert_non_null(k.next);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);

  /* An op the elemental emitter has no complex form for: UNIMPLEMENTED naming it. */
  m = parse_fusion("f {\n  p0 = c64[4] parameter(0)\n  ROOT n = c64[4] atan2(p0, p0)\n}\n");
  s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "atan2"));
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

/* Excess precision (XLA's default --xla_allow_excess_precision=true): by default a bf16
 * fusion keeps its intermediates in f32 and rounds once per output, so it matches the same
 * fusion computed in f32 (the reference below) within one bf16 rounding, differs from the
 * per-op-rounded evaluator where rounding an intermediate matters (1 + tanh cancels for
 * negative inputs), and strict_precision / XLA_FLAGS restore per-op rounding. The second
 * output exercises compares of unrounded values. */
static const char kGeluSmall[] =
    "gelu_small {\n"
    "  x = bf16[8,1024] parameter(0)\n"
    "  c0 = bf16[] constant(0.5)\n  b0 = bf16[8,1024] broadcast(c0), dimensions={}\n"
    "  c1 = bf16[] constant(1)\n  b1 = bf16[8,1024] broadcast(c1), dimensions={}\n"
    "  c2 = bf16[] constant(0.79785)\n  b2 = bf16[8,1024] broadcast(c2), dimensions={}\n"
    "  c3 = bf16[] constant(0.044708)\n  b3 = bf16[8,1024] broadcast(c3), dimensions={}\n"
    "  sq = bf16[8,1024] multiply(x, x)\n  cube = bf16[8,1024] multiply(sq, x)\n"
    "  m3 = bf16[8,1024] multiply(cube, b3)\n  a1 = bf16[8,1024] add(x, m3)\n"
    "  m2 = bf16[8,1024] multiply(a1, b2)\n  t = bf16[8,1024] tanh(m2)\n"
    "  a0 = bf16[8,1024] add(t, b1)\n  m1 = bf16[8,1024] multiply(a0, b0)\n"
    "  g = bf16[8,1024] multiply(x, m1)\n"
    "  lt = pred[8,1024] compare(g, m3), direction=LT\n"
    "  ROOT out = (bf16[8,1024], pred[8,1024]) tuple(g, lt)\n"
    "}\n";
static const char kGeluSmallF32[] =
    "gelu_small_f32 {\n"
    "  p = bf16[8,1024] parameter(0)\n  x = f32[8,1024] convert(p)\n"
    "  c0 = f32[] constant(0.5)\n  b0 = f32[8,1024] broadcast(c0), dimensions={}\n"
    "  c1 = f32[] constant(1)\n  b1 = f32[8,1024] broadcast(c1), dimensions={}\n"
    "  c2 = f32[] constant(0.796875)\n  b2 = f32[8,1024] broadcast(c2), dimensions={}\n"
    "  c3 = f32[] constant(0.0446777344)\n  b3 = f32[8,1024] broadcast(c3), dimensions={}\n"
    "  sq = f32[8,1024] multiply(x, x)\n  cube = f32[8,1024] multiply(sq, x)\n"
    "  m3 = f32[8,1024] multiply(cube, b3)\n  a1 = f32[8,1024] add(x, m3)\n"
    "  m2 = f32[8,1024] multiply(a1, b2)\n  t = f32[8,1024] tanh(m2)\n"
    "  a0 = f32[8,1024] add(t, b1)\n  m1 = f32[8,1024] multiply(a0, b0)\n"
    "  g = f32[8,1024] multiply(x, m1)\n"
    "  lt = pred[8,1024] compare(g, m3), direction=LT\n"
    "  gb = bf16[8,1024] convert(g)\n"
    "  ROOT out = (bf16[8,1024], pred[8,1024]) tuple(gb, lt)\n"
    "}\n";

static kiln_runner_report_t run_gelu_small(const kiln_hlo_computation_t *c,
                                           const kiln_hlo_computation_t *ref, bool strict) {
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.compile.strict_precision = strict;
  o.reference = ref;
  o.float_lo = -4.0;
  o.float_hi = 4.0;
  kiln_runner_report_t r;
  kiln_status s = kiln_runner_check(c, &o, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  assert_int_equal(r.elements, 2 * 8 * 1024);
  return r;
}

static void test_bf16_excess_precision(void **state) {
  kiln_hlo_module_t *m = parse_fusion(kGeluSmall), *mf = parse_fusion(kGeluSmallF32);
  kiln_runner_report_t r = run_gelu_small(m->entry, mf->entry, false);
  printf("excess precision vs f32 semantics: %lld beyond 1 bf16 ulp (max %lld)\n",
         (long long)r.mismatches, (long long)r.max_ulp);
  assert_int_equal(r.mismatches, 0);
  r = run_gelu_small(m->entry, NULL, false);
  printf("excess precision vs per-op rounding: %lld differ (max %lld ulp)\n",
         (long long)r.mismatches, (long long)r.max_ulp);
  assert_true(r.mismatches > 0);
  r = run_gelu_small(m->entry, NULL, true);
  printf("strict precision vs per-op rounding: %lld beyond 1 bf16 ulp (max %lld)\n",
         (long long)r.mismatches, (long long)r.max_ulp);
  assert_int_equal(r.mismatches, 0);

  kiln_codegen_compile_options_t co = {0};
  assert_true(kiln_codegen_excess_precision(&co));
  /* The environment reaches codegen through the edges' reader only. */
  kiln_codegen_compile_options_t from_env = {0};
  assert_int_equal(setenv("XLA_FLAGS", "--xla_gpu_foo=1 --xla_allow_excess_precision=false", 1), 0);
  assert_true(kiln_codegen_excess_precision(&co));
  kiln_pjrt_codegen_options_from_env(&from_env);
  assert_false(kiln_codegen_excess_precision(&from_env));
  assert_int_equal(unsetenv("XLA_FLAGS"), 0);
  from_env.strict_precision = false;
  kiln_pjrt_codegen_options_from_env(&from_env);
  assert_true(kiln_codegen_excess_precision(&from_env));
  assert_int_equal(setenv("KILN_ALLOW_EXCESS_PRECISION", "0", 1), 0);
  kiln_pjrt_codegen_options_from_env(&from_env);
  assert_false(kiln_codegen_excess_precision(&from_env));
  assert_int_equal(unsetenv("KILN_ALLOW_EXCESS_PRECISION"), 0);
  co.strict_precision = true;
  assert_false(kiln_codegen_excess_precision(&co));
  kiln_hlo_module_destroy(m);
  kiln_hlo_module_destroy(mf);
}

/* A dynamic-update-slice under an epilogue cannot be done in place: the loop emitter
 * computes it elementally (the update inside the window at the clamped starts, the operand
 * elsewhere), real and complex, with start indices that need clamping on both sides. */
static void test_dus_under_epilogue_runs_as_loop(void **state) {
  static const char *const texts[] = {
      "fusion {\n  p0 = f32[9,7] parameter(0)\n  p1 = f32[3,4] parameter(1)\n"
      "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n"
      "  d = f32[9,7] dynamic-update-slice(p0, p1, i, j)\n  ROOT n = f32[9,7] negate(d)\n}\n",
      "fusion {\n  p0 = c64[5,6] parameter(0)\n  p1 = c64[2,2] parameter(1)\n"
      "  i = s64[] parameter(2)\n  j = s64[] parameter(3)\n"
      "  d = c64[5,6] dynamic-update-slice(p0, p1, i, j)\n  ROOT n = c64[5,6] negate(d)\n}\n",
  };
  for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++)
    for (uint64_t seed = 1; seed <= 6; seed++) {
      kiln_hlo_module_t *m = parse_fusion(texts[t]);
      assert_int_equal(kiln_codegen_classify(m->entry, NULL), KILN_CODEGEN_EMITTER_LOOP);
      kiln_runner_options_t o;
      kiln_runner_options_init(&o);
      o.seed = seed; /* the s32/s64 starts are drawn from [-8, 7]: clamped low and high */
      kiln_runner_report_t r;
      kiln_status s = kiln_runner_check(m->entry, &o, &r);
      if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
      assert_null(s);
      assert_int_equal(r.mismatches, 0);
      kiln_hlo_module_destroy(m);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_stages_dump_loop_inline_flatten_vectorize_unroll),
      cmocka_unit_test(test_gelu_ptx_passes_ptxas_and_moves_vectors),
      cmocka_unit_test(test_gelu_host_matches_evaluator_within_one_bf16_ulp),
      cmocka_unit_test(test_bf16_excess_precision),
      cmocka_unit_test(test_dus_under_epilogue_runs_as_loop),
      cmocka_unit_test(test_launch_dimensions),
      cmocka_unit_test(test_host_grids_take_one_element_per_thread),
      cmocka_unit_test(test_block_split_over_y),
      cmocka_unit_test(test_vectorization_disabled_by_sin_and_atan2),
      cmocka_unit_test(test_multi_output_fusion),
      cmocka_unit_test(test_index_transforms_run),
      cmocka_unit_test(test_concatenate_of_many_operands_runs),
      cmocka_unit_test(test_heroes_dispatch_to_their_emitters_or_are_unimplemented),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
