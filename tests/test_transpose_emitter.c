/* Transpose emitter: every corpus transpose fusion the emitter supports compiles, its PTX
 * passes `ptxas -arch=sm_90` (skipped with the reason when ptxas is missing) and contains
 * bar.sync, and on the host it matches the evaluator on seeded inputs (data movement is
 * exact; fused math within 1e-6 relative for f32, 1e-12 for f64, 4 epsilons for narrower
 * floats; integers exact). Unsupported ones are listed with the reason. Prints
 * passed/total. Also a large transpose with producer and consumer ops, the dumped kernel IR
 * (32x33 shared tile, barrier, 32x4 threads), the thread-to-tile-row mapping, and a fused
 * transpose keeping the minor dimension ("102": 32x33xminor tile) with partial tiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/transpose_emitter.h"
#include "hero_test_util.h"
#include "tests/skip_util.h"

static void test_corpus_transposes_match_evaluator(void **state) {
  size_t n = 0;
  char **names = emt_corpus_files("__transpose__", &n);
  if (!names) {
    KILN_SKIP("no corpus");
  }
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  int total = 0, passed = 0, unsupported = 0, ptx_ok = 0, ptx_checked = 0;
  bool skip_printed = false;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_file_t *f = NULL;
    const kiln_hlo_computation_t **cs = emt_load_fusions(names[i], &f);
    total++;
    if (!cs) continue;
    kiln_codegen_kernel_t k;
    kiln_codegen_compile_options_t co = {0};
    char kname[32];
    snprintf(kname, sizeof(kname), "tr%zu", i);
    co.kernel_name = kname;
    kiln_status s = kiln_transpose_kernel_emit(cs[0], &co, &k);
    if (s && kiln_status_code(s) == KILN_UNIMPLEMENTED) {
      printf("unsupported %s: %s\n", names[i], kiln_status_message(s));
      unsupported++;
      total--;
    } else if (s) {
      printf("FAIL %s: %s\n", names[i], kiln_status_message(s));
    } else {
      bool ok = true;
      char *ptx = NULL;
      kiln_status ps = kiln_codegen_kernel_ptxas_check(&k, &ptx);
      if (ps && kiln_status_code(ps) == KILN_UNAVAILABLE) {
        if (!skip_printed) printf("ptxas check skipped: %s\n", kiln_status_message(ps));
        skip_printed = true;
      } else {
        ptx_checked++;
        if (ps) printf("FAIL %s: ptxas: %.300s\n", names[i], kiln_status_message(ps));
        else if (!strstr(ptx, "bar.sync")) printf("FAIL %s: no bar.sync\n", names[i]);
        else ptx_ok++;
        ok = !ps && strstr(ptx, "bar.sync");
      }
      kiln_status_free(ps);
      kiln_free(ptx);
      hero_run_result_t rr;
      kiln_status rs = hero_run_check(cs[0], &k, jit, NULL, false, 1, false, 11, &rr);
      if (rs) {
        printf("FAIL %s: run: %s\n", names[i], kiln_status_message(rs));
        kiln_status_free(rs);
        ok = false;
      } else if (rr.mismatches) {
        printf("FAIL %s: %lld/%lld mismatches, first: %s\n", names[i], (long long)rr.mismatches,
               (long long)rr.elements, rr.first);
        ok = false;
      } else {
        printf("ok   %s: %lld elements, %lld blocks\n", names[i], (long long)rr.elements,
               (long long)k.grid.blocks_x);
      }
      passed += ok;
      kiln_codegen_kernel_free(&k);
    }
    kiln_status_free(s);
    kiln_free(cs);
    kiln_hlo_file_free(f);
  }
  for (size_t i = 0; i < n; i++) kiln_free(names[i]);
  kiln_free(names);
  kiln_host_jit_destroy(jit);
  printf("transpose emitter: %d/%d corpus transposes match the evaluator (%d unsupported); ptxas ok %d/%d\n",
         passed, total, unsupported, ptx_ok, ptx_checked);
  assert_true(total >= 26);
  assert_int_equal(unsupported, 0);
  assert_int_equal(passed, total);
}

static char *read_dump(const char *dir, const char *kname, const char *suffix);

/* Parses `text`, emits its transpose kernel `kname` with dumps in a new directory made from
 * the template `dir` (updated in place) and reads the kernel-IR input dump into *dump
 * (kiln_free). Fails the test on any error. */
static void emit_dumped_opts(const char *text, const char *kname, char *dir, int packed,
                             bool host_target, kiln_hlo_module_t **m, kiln_codegen_kernel_t *k,
                             char **dump) {
  *m = NULL;
  assert_null(kiln_hlo_parse_computations(text, strlen(text), NULL, m));
  assert_non_null(mkdtemp(dir));
  kiln_codegen_compile_options_t o = {0};
  o.dump_dir = dir;
  o.kernel_name = kname;
  o.packed_transpose = packed;
  o.host_target = host_target;
  kiln_status s = kiln_transpose_kernel_emit((*m)->entry, &o, k);
  if (s) fail_msg("%s", kiln_status_message(s));
  *dump = read_dump(dir, kname, "50-kir-input.txt");
}

static void emit_dumped(const char *text, const char *kname, char *dir, kiln_hlo_module_t **m,
                        kiln_codegen_kernel_t *k, char **dump) {
  emit_dumped_opts(text, kname, dir, 0, false, m, k, dump);
}

/* Frees what emit_dumped made and removes its directory. */
static void emitted_free(kiln_hlo_module_t *m, kiln_codegen_kernel_t *k, const char *dir) {
  kiln_codegen_kernel_free(k);
  kiln_hlo_module_destroy(m);
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* Runs kernel k of m's entry on the host against the evaluator (exact, inputs from `seed`):
 * on a pool of `threads` workers (0: the calling thread), the JIT dumping into `dump_dir`
 * (NULL: no dumps); fails the test on an error. */
static void run_on_host(const kiln_hlo_module_t *m, const kiln_codegen_kernel_t *k, int threads,
                        const char *dump_dir, uint64_t seed, hero_run_result_t *rr) {
  kiln_host_jit_t *jit = NULL;
  kiln_host_jit_options_t jo = {0};
  jo.dump_dir = dump_dir;
  assert_null(kiln_host_jit_create(&jo, &jit));
  kiln_host_pool_t *pool = NULL;
  if (threads > 0) assert_null(kiln_host_pool_create(threads, &pool));
  kiln_status s = hero_run_check(m->entry, k, jit, pool, true, 1, false, seed, rr);
  if (s) fail_msg("%s", kiln_status_message(s));
  if (pool) kiln_host_pool_destroy(pool);
  kiln_host_jit_destroy(jit);
}

/* The dump `dir`/`kname`.`suffix` (kiln_free). */
static char *read_dump(const char *dir, const char *kname, const char *suffix) {
  char path[256];
  snprintf(path, sizeof(path), "%s/%s.%s", dir, kname, suffix);
  char *text = NULL;
  size_t len = 0;
  assert_null(kiln_read_file(path, &text, &len));
  return text;
}

/* Lowers `k` for a host with LLVM features `features` and checks that its IR holds `want`. */
static void expect_host_ir(const kiln_codegen_kernel_t *k, const char *features, const char *want) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  kiln_status s = kiln_kir_lower_host_for(k->kir, ctx, features, &mod);
  if (s) fail_msg("lowering for %s: %s", features, kiln_status_message(s));
  char *ir = LLVMPrintModuleToString(mod);
  bool found = strstr(ir, want) != NULL;
  LLVMDisposeMessage(ir);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  if (!found) fail_msg("lowered for %s, the host IR has no \"%s\"", features, want);
}

/* Checks k's PTX with `ptxas -arch=sm_90` (skipped with the reason when ptxas is missing):
 * it must assemble and synchronize the block (bar.sync). */
static void check_ptx_syncs(const char *kname, const kiln_codegen_kernel_t *k) {
  char *ptx = NULL;
  kiln_status ps = kiln_codegen_kernel_ptxas_check(k, &ptx);
  if (ps && kiln_status_code(ps) == KILN_UNAVAILABLE) {
    printf("%s: ptxas check skipped: %s\n", kname, kiln_status_message(ps));
  } else {
    if (ps) fail_msg("%s: ptxas: %.300s", kname, kiln_status_message(ps));
    assert_non_null(strstr(ptx, "bar.sync"));
  }
  kiln_status_free(ps);
  kiln_free(ptx);
}

/* A transpose of [3, 200, 333] elements of `type` with partial tiles on both tiled
 * dimensions between a fused producer (negate) and consumer (add). */
static void fused_text(char *buf, size_t n, const char *type) {
  snprintf(buf, n,
           "fusion {\n p = %s[3,200,333] parameter(0)\n q = %s[3,333,200] parameter(1)\n"
           " e = %s[3,200,333] negate(p)\n t = %s[3,333,200] transpose(e), dimensions={0,2,1}\n"
           " ROOT a = %s[3,333,200] add(t, q)\n}\n",
           type, type, type, type, type);
}

static void test_fused_transpose_with_partial_tiles_matches_evaluator(void **state) {
  kiln_hlo_module_t *m = NULL;
  kiln_codegen_kernel_t k;
  char dir[] = "/tmp/kiln_tr_dumpXXXXXX";
  char *dump = NULL;
  char text[512];
  fused_text(text, sizeof(text), "f32");
  emit_dumped(text, "trfused", dir, &m, &k, &dump);
  assert_non_null(strstr(dump, "tensor<32x33xf32, shared>"));
  assert_non_null(strstr(dump, "barrier"));
  assert_non_null(strstr(dump, "block=[32, 4, 1]"));
  kiln_free(dump);
  hero_run_result_t rr;
  run_on_host(m, &k, 2, NULL, 5, &rr);
  assert_int_equal(rr.elements, 3 * 333 * 200);
  assert_int_equal(rr.mismatches, 0);
  emitted_free(m, &k, dir);
}

static const char *k_tr40 =
    "fusion {\n p = f32[40,72] parameter(0)\n ROOT t = f32[72,40] transpose(p), dimensions={1,0}\n}\n";

/* Thread y at step s owns tile row 8 * y + s in both phases, so the steps of a warp (run back
 * to back on the host) walk consecutive rows; the loop maps compute it directly, and the
 * kernel asks the host lowering to keep its y thread loops rolled. A 40x72 input leaves the
 * last tiles with 8 rows: only thread row 0 works there. */
static void test_warp_steps_walk_consecutive_tile_rows(void **state) {
  kiln_hlo_module_t *m = NULL;
  kiln_codegen_kernel_t k;
  char dir[] = "/tmp/kiln_tr_rowsXXXXXX";
  char *dump = NULL;
  emit_dumped(k_tr40, "trrows", dir, &m, &k, &dump);
  /* Both loops (input tile, transposed write) use the row 8 * th_y + s0 ... */
  const char *first = strstr(dump, "th_y * 8 + s0");
  assert_non_null(first);
  assert_non_null(strstr(first + 1, "th_y * 8 + s0"));
  /* ... and never the strided row th_y + 4 * s0. */
  assert_null(strstr(dump, "s0 * 4,"));
  kiln_free(dump);
  /* The phases only move data: the host lowering keeps their y thread loops rolled. */
  const kiln_kir_func_t *kf = kiln_kir_module_kernel(k.kir);
  assert_non_null(kf);
  assert_true(kf->host_rolled_thread_loops);
  hero_run_result_t rr;
  run_on_host(m, &k, 0, dir, 3, &rr);
  assert_int_equal(rr.elements, 40 * 72);
  /* The host IR: the y thread loops carry unroll.disable, the x loops a vectorize follow-up
   * that lets their vector loop unroll. */
  dump = read_dump(dir, "trrows", "90-llvm-input.ll");
  assert_non_null(strstr(dump, "br label %ty, !llvm.loop"));
  assert_non_null(strstr(dump, "llvm.loop.vectorize.followup_vectorized"));
  kiln_free(dump);
  assert_int_equal(rr.mismatches, 0);
  emitted_free(m, &k, dir);
}

/* A "102" transpose (keeps the small minor dimension, 2 x f32 = 8 bytes) with a batch
 * dimension, partial tiles on both tiled dimensions (70 = 2 * 32 + 6, 45 = 32 + 13) and a
 * fused producer and consumer: classify picks the transpose emitter, the shared tile carries
 * the minor dimension (32 x 33 x 2), the PTX passes ptxas and the host run matches the
 * evaluator. */
static const char *k_fused_102 =
    "fusion {\n p = f32[2,70,45,2] parameter(0)\n q = f32[2,45,70,2] parameter(1)\n"
    " e = f32[2,70,45,2] negate(p)\n t = f32[2,45,70,2] transpose(e), dimensions={0,2,1,3}\n"
    " ROOT a = f32[2,45,70,2] add(t, q)\n}\n";

static void test_transpose_keeping_minor_dimension_moves_it_with_each_tile_element(void **state) {
  kiln_hlo_module_t *m = NULL;
  kiln_codegen_kernel_t k;
  char dir[] = "/tmp/kiln_tr102XXXXXX";
  char *dump = NULL;
  emit_dumped(k_fused_102, "tr102", dir, &m, &k, &dump);
  const kiln_hlo_instruction_t *hero = NULL;
  assert_int_equal(kiln_codegen_classify(m->entry, &hero), KILN_CODEGEN_EMITTER_TRANSPOSE);
  assert_string_equal(hero->name, "t");
  /* batch 2 x tiles ceil(45/32) x ceil(70/32) */
  assert_int_equal(k.grid.blocks_x, 2 * 2 * 3);
  assert_non_null(strstr(dump, "tensor<32x33x2xf32, shared>"));
  assert_non_null(strstr(dump, "barrier"));
  kiln_free(dump);
  check_ptx_syncs("tr102", &k);
  hero_run_result_t rr;
  run_on_host(m, &k, 0, NULL, 7, &rr);
  assert_int_equal(rr.elements, 2 * 45 * 70 * 2);
  assert_int_equal(rr.mismatches, 0);
  emitted_free(m, &k, dir);
}

/* Emits `text` with the packed tile forced on, checks the dump shows `tile` (e.g.
 * "tensor<64x64xbf16, shared>"), its `swizzle` (the simplified column index: a word index
 * rotated mod 32, times the elements per word) and a barrier, runs it on the host against the
 * evaluator (exact: the fusion only moves and negates/adds), and checks its PTX with ptxas
 * when present. */
static void run_packed(const char *text, const char *kname, const char *tile, const char *swizzle,
                       int64_t elements) {
  kiln_hlo_module_t *m = NULL;
  kiln_codegen_kernel_t k;
  char dir[] = "/tmp/kiln_tr_dumpXXXXXX";
  char *dump = NULL;
  emit_dumped_opts(text, kname, dir, 1, false, &m, &k, &dump);
  if (!strstr(dump, tile)) fail_msg("%s: no %s in\n%.2000s", kname, tile, dump);
  assert_non_null(strstr(dump, "barrier"));
  if (!strstr(dump, swizzle)) fail_msg("%s: no swizzle (%s) in the tile index", kname, swizzle);
  kiln_free(dump);
  hero_run_result_t rr;
  run_on_host(m, &k, 2, NULL, 9, &rr);
  printf("%s: %lld elements through %s, %lld mismatches\n", kname, (long long)rr.elements, tile,
         (long long)rr.mismatches);
  assert_int_equal(rr.elements, elements);
  assert_int_equal(rr.mismatches, 0);
  check_ptx_syncs(kname, &k);
  emitted_free(m, &k, dir);
}

/* XLA's packed transpose for elements under 32 bits: 16-bit elements move through a 64 x 64
 * tile (two to a 32-bit word), 8-bit ones through 128 x 128, the columns swizzled per band of
 * rows; partial tiles on both dimensions, fused producer and consumer. The host target keeps
 * the 32 x 33 tile by default (its lowering runs the word-per-thread steps as strided thread
 * loops; with AVX-512F it holds the tile's bf16 elements in 32-bit slots, without in 16-bit
 * ones), and the packed tile is not used when a tiled dimension is shorter than a tile. */
static void test_packed_transpose_moves_narrow_elements_through_a_swizzled_word_tile(void **state) {
  char text[512];
  fused_text(text, sizeof(text), "bf16");
  run_packed(text, "trpacked16", "tensor<64x64xbf16, shared>", "mod 32) * 2", 3 * 333 * 200);
  run_packed("fusion {\n p = s8[300,260] parameter(0)\n"
             " ROOT t = s8[260,300] transpose(p), dimensions={1,0}\n}\n",
             "trpacked8", "tensor<128x128xs8, shared>", "mod 32) * 4", 300 * 260);
  kiln_hlo_module_t *m = NULL;
  kiln_codegen_kernel_t k;
  char dir[] = "/tmp/kiln_tr_dumpXXXXXX";
  char *dump = NULL;
  emit_dumped_opts(text, "trhost16", dir, 0, true, &m, &k, &dump);
  assert_non_null(strstr(dump, "tensor<32x33xbf16, shared>"));
  kiln_free(dump);
  /* With AVX-512F each bf16 of the tile sits in a 32-bit slot (kir_llvm_tensor_slot), so the
   * vectorized thread loops can gather it; without, in 16 bits (LLVM uses no AVX2 gathers on
   * every CPU: on a Zen 3 the 32-bit slots were moved one element at a time). This host's
   * run takes its own choice, and the result is unchanged. */
  hero_run_result_t rr;
  run_on_host(m, &k, 2, dir, 4, &rr);
  assert_int_equal(rr.elements, 3 * 333 * 200);
  assert_int_equal(rr.mismatches, 0);
  char *host_features = LLVMGetHostCPUFeatures();
  bool avx512 = kiln_host_feature_on(host_features, "avx512f");
  LLVMDisposeMessage(host_features);
  dump = read_dump(dir, "trhost16", "90-llvm-input.ll");
  const char *want = avx512 ? "alloca i32, i64 1056" : "alloca i16, i64 1056";
  if (!strstr(dump, want)) fail_msg("trhost16: this host's tile is not \"%s\"", want);
  kiln_free(dump);
  expect_host_ir(&k, "+avx2,+avx512f", "alloca i32, i64 1056");
  expect_host_ir(&k, "+avx2,+avx512f,-avx512f", "alloca i16, i64 1056");
  expect_host_ir(&k, "+neon", "alloca i16, i64 1056");
  emitted_free(m, &k, dir);
  char dir2[] = "/tmp/kiln_tr_dumpXXXXXX";
  emit_dumped_opts("fusion {\n p = bf16[40,500] parameter(0)\n"
                   " ROOT t = bf16[500,40] transpose(p), dimensions={1,0}\n}\n",
                   "trshort16", dir2, 1, false, &m, &k, &dump);
  assert_non_null(strstr(dump, "tensor<32x33xbf16, shared>"));
  kiln_free(dump);
  emitted_free(m, &k, dir2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_transposes_match_evaluator),
      cmocka_unit_test(test_fused_transpose_with_partial_tiles_matches_evaluator),
      cmocka_unit_test(test_warp_steps_walk_consecutive_tile_rows),
      cmocka_unit_test(test_transpose_keeping_minor_dimension_moves_it_with_each_tile_element),
      cmocka_unit_test(test_packed_transpose_moves_narrow_elements_through_a_swizzled_word_tile),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
