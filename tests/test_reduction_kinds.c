/* Reduction kinds (XLA's reduction emitter variants) and split reductions:
 *  - corpus files reduce_multirow__* plan as MULTI_ROW and reduce_column_small__* as
 *    SMALL_COLUMN (the other folders are topics; their kinds are printed), with the vector sizes,
 *    thread counts and shared tiles of XLA's emitter tests (their CHECK lines, on a device
 *    with 84 cores as XLA's test device);
 *  - row parameters follow XLA's RowReductionFusion / GetVectorSizeForMlir;
 *  - multi-row kernels shuffle without shared memory; small-column kernels use the
 *    [shared_rows][N + 1] tile;
 *  - reductions that are not race-free (huge rows, many major rows, long columns) compile to
 *    an initializing kernel plus a kernel whose blocks combine with atomics (add as an
 *    atomic read-modify-write, other reducers as a CAS loop), and match the evaluator when
 *    run on a 4-worker pool; ptxas accepts them (skipped with the reason without ptxas);
 *  - a row reduction's KILN_DUMP_TO kernel-IR dump shows shared memory, barrier, shuffles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/reduction_emitter.h"
#include "hero_test_util.h"
#include "tests/skip_util.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  return m;
}

static kiln_reduction_plan_t plan_of(const kiln_hlo_computation_t *c, int64_t cores) {
  kiln_hero_analysis_t ha;
  assert_null(kiln_hero_analyze(c, &ha));
  assert_int_equal(ha.emitter, KILN_HERO_EMITTER_REDUCTION);
  kiln_reduction_plan_t p;
  assert_null(kiln_hero_reduction_plan(c, &ha, cores, &p));
  return p;
}

/* Loads corpus file emitters/<stem>.hlo; ends the test as skipped when there is no corpus, as
 * failed when the file does not load. */
static kiln_hlo_file_t *load_corpus(const char *stem, const kiln_hlo_computation_t **c) {
  char path[2048];
  snprintf(path, sizeof(path), "%s/emitters/xla__backends__gpu__codegen__emitters__tests__%s.hlo", kiln_corpus_dir(),
           stem);
  char dir[2048];
  snprintf(dir, sizeof(dir), "%s/emitters", kiln_corpus_dir());
  KILN_SKIP_WITHOUT_CORPUS(dir);
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, &f);
  if (s) fail_msg("%s: %s", stem, kiln_status_message(s));
  const kiln_hlo_computation_t **cs = NULL;
  int nc = 0;
  kiln_runner_collect_fusions(f->modules[0], &cs, &nc);
  *c = cs[0];
  kiln_free(cs);
  return f;
}

static void test_corpus_reduction_kinds_follow_file_names(void **state) {
  size_t n = 0;
  char **names = emt_corpus_files("__reduce_", &n);
  if (!names) {
    KILN_SKIP("no corpus");
  }
  int checked = 0;
  for (size_t i = 0; i < n; i++) {
    const char *kind = strstr(names[i], "__tests__");
    if (!kind) continue;
    kind += 9;
    char stem[512];
    snprintf(stem, sizeof(stem), "%.*s", (int)(strlen(kind) - 4), kind);
    const kiln_hlo_computation_t *c = NULL;
    kiln_hlo_file_t *f = load_corpus(stem, &c);
    if (!f) continue;
    kiln_hero_analysis_t ha;
    assert_null(kiln_hero_analyze(c, &ha));
    assert_int_equal(ha.emitter, KILN_HERO_EMITTER_REDUCTION);
    kiln_reduction_kind_t k = ha.reduction_kind;
    printf("%-60s %s\n", stem, kiln_reduction_kind_name(k));
    if (strncmp(kind, "reduce_multirow__", 17) == 0) assert_int_equal(k, KILN_REDUCTION_MULTI_ROW);
    else if (strncmp(kind, "reduce_column_small__", 21) == 0) assert_int_equal(k, KILN_REDUCTION_SMALL_COLUMN);
    /* reduce_row / reduce_column are XLA's topic folders: e.g.
     * reduce_row/reduction_groups_two_in_same_group reduces [128, 288, 32] over the middle
     * dim, a small column reduction by XLA's rule; there the kind is reported only. */
    checked++;
    kiln_hlo_file_free(f);
  }
  for (size_t i = 0; i < n; i++) kiln_free(names[i]);
  kiln_free(names);
  assert_true(checked >= 30);
}

/* XLA's emitter tests' CHECK lines (vector widths, threads, shuffle distances, tiles) on
 * XLA's test device (84 cores). */
static void test_plans_match_xla_emitter_tests(void **state) {
  static const struct {
    const char *stem;
    kiln_reduction_kind_t kind;
    int vec;
    int64_t lanes, shared_rows;
  } want[] = {
      {"reduce_multirow__f32_x8", KILN_REDUCTION_MULTI_ROW, 1, 4, 0},              /* shuffle to 2, 8 rows/warp */
      {"reduce_multirow__f32_x8_no_inputs", KILN_REDUCTION_MULTI_ROW, 1, 4, 0},
      {"reduce_multirow__f16_v4", KILN_REDUCTION_MULTI_ROW, 4, 16, 0},             /* vector<4xf16> */
      {"reduce_multirow__maximum_vector_size", KILN_REDUCTION_MULTI_ROW, 2, 1, 0}, /* vector<2xi8> */
      {"reduce_multirow__pred_mof_x2_v4", KILN_REDUCTION_MULTI_ROW, 4, 4, 0},      /* vector<4xf32> */
      {"reduce_column__vectorize_x1_f64", KILN_REDUCTION_COLUMN, 1, 32, 0},        /* no vector< */
      {"reduce_column__vectorize_x1_c64", KILN_REDUCTION_COLUMN, 1, 32, 0},
      {"reduce_column__vectorize_x2_f32", KILN_REDUCTION_COLUMN, 2, 32, 0},        /* vector<2xf32> */
      {"reduce_column__vectorize_x4_s16", KILN_REDUCTION_COLUMN, 4, 32, 0},        /* vector<4xi16> */
      {"reduce_column_small__f32_2", KILN_REDUCTION_SMALL_COLUMN, 1, 64, 32},       /* tid [0, 63], 32x3 */
      {"reduce_column_small__f32_32_v2", KILN_REDUCTION_SMALL_COLUMN, 2, 128, 8},   /* 8x33, to 4 */
      {"reduce_column_small__f32_8_v2", KILN_REDUCTION_SMALL_COLUMN, 2, 128, 32},   /* 32x9, to 16 */
      {"reduce_column_small__s8_f32_32_v4", KILN_REDUCTION_SMALL_COLUMN, 4, 128, 16}, /* 16x33, to 8 */
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    const kiln_hlo_computation_t *c = NULL;
    kiln_hlo_file_t *f = load_corpus(want[i].stem, &c);
    if (!f) continue;
    kiln_reduction_plan_t p = plan_of(c, 84);
    printf("%-45s %s vec %d threads %lld x %lld shared rows %lld\n", want[i].stem, kiln_reduction_kind_name(p.kind),
           p.vector_size, (long long)p.threads_kept, (long long)p.threads_reduced, (long long)p.shared_rows);
    assert_int_equal(p.kind, want[i].kind);
    assert_int_equal(p.vector_size, want[i].vec);
    assert_int_equal(p.threads_reduced, want[i].lanes);
    if (want[i].kind == KILN_REDUCTION_SMALL_COLUMN) assert_int_equal(p.shared_rows, want[i].shared_rows);
    kiln_hlo_file_free(f);
  }
}

static const char *k_reduce =
    "%s {\n a = %s[] parameter(0)\n b = %s[] parameter(1)\n ROOT r = %s[] %s(a, b)\n}\n"
    "fusion {\n p = %s[%s] parameter(0)\n c = %s[] constant(%s)\n"
    " ROOT r = %s[%s] reduce(p, c), dimensions={%s}, to_apply=%s\n}\n";

/* A one-reduce fusion: `ty`[in_dims] reduced over `dims` to [out_dims] with `op`. */
static kiln_hlo_module_t *make_reduce(const char *ty, const char *op, const char *init, const char *in_dims,
                                      const char *dims, const char *out_dims) {
  char text[2048];
  snprintf(text, sizeof(text), k_reduce, op, ty, ty, ty, op, ty, in_dims, ty, init, ty, out_dims, dims, op);
  return parse(text);
}

static void test_row_plans_follow_xla_row_reduction_rules(void **state) {
  static const struct {
    const char *ty, *in, *out;
    int64_t tr, tk;
    int vec;
  } want[] = {
      {"f32", "64,4096", "64", 128, 2, 2},   /* 32 elements per thread, 256-thread blocks */
      {"f32", "8,16384", "8", 512, 1, 2},    /* >= 32-bit inputs: 2-wide */
      {"f16", "8,4096", "8", 128, 2, 4},     /* narrow inputs: 4-wide when 4 * threads <= R2 */
      {"f16", "8,4098", "8", 160, 1, 2},     /* R2 % 4 != 0: 2-wide */
      {"f32", "100,1000", "100", 32, 8, 2},  /* one warp per row, 8 rows per block */
      {"f32", "100,1001", "100", 32, 8, 1},  /* odd rows are not vectorized */
      {"f64", "10,512", "10", 32, 8, 1},     /* 64-bit: no vectors (XLA's vectorize_x1_f64) */
      {"f32", "5,40", "5", 32, 5, 1},        /* 2 * threads > R2: no vectors */
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    kiln_hlo_module_t *m = make_reduce(want[i].ty, "add", "0", want[i].in, "1", want[i].out);
    kiln_reduction_plan_t p = plan_of(m->entry, 0);
    printf("%s[%s]: %s threads %lld x %lld vec %d tile %lld\n", want[i].ty, want[i].in, kiln_reduction_kind_name(p.kind),
           (long long)p.threads_kept, (long long)p.threads_reduced, p.vector_size, (long long)p.minor_tile);
    assert_int_equal(p.kind, KILN_REDUCTION_ROW);
    assert_int_equal(p.threads_reduced, want[i].tr);
    assert_int_equal(p.threads_kept, want[i].tk);
    assert_int_equal(p.vector_size, want[i].vec);
    assert_true(p.race_free);
    assert_int_equal(p.splits, 1);
    kiln_hlo_module_destroy(m);
  }
}

/* Narrow element types vectorize MULTI_ROW reductions up to 64 / bits wide, so a row of a few
 * thousand elements asks for more than 256 lanes: every narrow type and power-of-two row
 * length plans (fuzz-2940611: an s2[32,32] maximum over both dimensions divided by zero). */
static void test_narrow_long_rows_plan(void **state) {
  static const char *const types[] = {"pred", "s1", "u1", "s2", "u2",
                                      "s4",   "u4", "s8", "u8", "f8e4m3fn"};
  static const char *const rows[] = {"1,256", "1,1024", "3,2048", "1,4096", "2,8192"};
  int planned = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
      const char *out = rows[r][0] == '1' ? "1" : rows[r][0] == '3' ? "3" : "2";
      bool pred = strcmp(types[t], "pred") == 0;
      kiln_hlo_module_t *m =
          make_reduce(types[t], pred ? "or" : "maximum", pred ? "false" : "0", rows[r], "1", out);
      kiln_reduction_plan_t p = plan_of(m->entry, 0);
      assert_true(p.threads_reduced >= 1 && p.threads_kept >= 1 && p.vector_size >= 1);
      planned++;
      kiln_hlo_module_destroy(m);
    }
  assert_int_equal(planned, 50);
}

static char *kir_text(const kiln_codegen_kernel_t *k) {
  return kiln_kir_to_string(k->kir);
}

static void test_multirow_shuffles_without_shared_memory(void **state) {
  const kiln_hlo_computation_t *c = NULL;
  kiln_hlo_file_t *f = load_corpus("reduce_multirow__f32_x8", &c);
  if (!f) return;
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_reduction_kernel_emit(c, NULL, NULL, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  char *t = kir_text(&k);
  assert_non_null(strstr(t, "shuffle"));
  assert_null(strstr(t, "allocate_shared"));
  assert_null(strstr(t, "barrier"));
  assert_int_equal(k.grid.threads, 256); /* 64 rows of 4 lanes */
  assert_int_equal(k.grid.blocks_x, 16);
  kiln_free(t);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_file_free(f);
}

static void test_small_column_uses_padded_shared_rows_tile(void **state) {
  static const struct {
    const char *stem, *tile;
  } want[] = {
      {"reduce_column_small__f32_2", "tensor<32x3xf32, shared>"},
      {"reduce_column_small__f32_32_v2", "tensor<8x33xf32, shared>"},
      {"reduce_column_small__f32_8_v2", "tensor<32x9xf32, shared>"},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    const kiln_hlo_computation_t *c = NULL;
    kiln_hlo_file_t *f = load_corpus(want[i].stem, &c);
    if (!f) continue;
    char dir[] = "/tmp/kiln_redsmall_XXXXXX";
    assert_non_null(mkdtemp(dir));
    kiln_codegen_compile_options_t o = {0};
    o.dump_dir = dir;
    o.kernel_name = "small";
    kiln_codegen_kernel_t k;
    kiln_status s = kiln_reduction_kernel_emit(c, &o, NULL, &k);
    if (s) fail_msg("%s", kiln_status_message(s));
    char path[256], *t = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/small.50-kir-input.txt", dir);
    assert_null(kiln_read_file(path, &t, &len));
    if (!strstr(t, want[i].tile)) fail_msg("%s: no %s in\n%.3000s", want[i].stem, want[i].tile, t);
    assert_non_null(strstr(t, "barrier"));
    assert_non_null(strstr(t, "shuffle"));
    kiln_free(t);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    kiln_codegen_kernel_free(&k);
    kiln_hlo_file_free(f);
  }
}

typedef struct split_case {
  const char *ty, *op, *init, *in, *dims, *out;
  kiln_reduction_kind_t kind;
  int64_t splits, r0_splits; /* expected */
  bool rmw;                  /* expect atomic_rmw (else atomic_cas_loop) */
  int64_t summed;
} split_case_t;

static void run_split(int idx, const split_case_t *sc, kiln_host_jit_t *jit, kiln_host_pool_t *pool,
                      bool *ptx_skip_printed) {
  kiln_hlo_module_t *m = make_reduce(sc->ty, sc->op, sc->init, sc->in, sc->dims, sc->out);
  char kname[32];
  snprintf(kname, sizeof(kname), "split%d", idx); /* unique symbols in the shared JIT */
  kiln_codegen_compile_options_t o = {0};
  o.kernel_name = kname;
  kiln_reduction_plan_t p = plan_of(m->entry, 0);
  assert_int_equal(p.kind, sc->kind);
  assert_false(p.race_free);
  assert_int_equal(p.splits, sc->splits);
  assert_int_equal(p.r0_splits, sc->r0_splits);
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_reduction_kernel_emit(m->entry, &o, NULL, &k);
  if (s) fail_msg("%s[%s] %s: %s", sc->ty, sc->in, sc->op, kiln_status_message(s));
  bool split = sc->splits * sc->r0_splits > 1;
  if (split) {
    /* Kernel 1 initializes the outputs, kernel 2 combines with atomics. */
    assert_non_null(k.next);
    assert_null(k.next->next);
    char *t = kir_text(k.next);
    assert_non_null(strstr(t, sc->rmw ? "atomic_rmw" : "atomic_cas_loop"));
    kiln_free(t);
  } else {
    assert_null(k.next);
  }
  hero_run_result_t rr;
  s = hero_run_check(m->entry, &k, jit, pool, false, sc->summed, true, 11, &rr);
  if (s) fail_msg("run: %s", kiln_status_message(s));
  printf("%s %s[%s] dims={%s}: %s, %lld splits x %lld, %lld outputs, max rel %.2g, %.2f ms\n", sc->op, sc->ty, sc->in,
         sc->dims, kiln_reduction_kind_name(p.kind), (long long)p.splits, (long long)p.r0_splits, (long long)rr.elements,
         rr.max_rel, rr.run_ms);
  if (rr.mismatches) fail_msg("%lld mismatches: %s", (long long)rr.mismatches, rr.first);
  char *ptx = NULL;
  s = kiln_codegen_kernel_ptxas_check(&k, &ptx);
  if (s && kiln_status_code(s) == KILN_UNAVAILABLE) {
    if (!*ptx_skip_printed) printf("ptxas check skipped: %s\n", kiln_status_message(s));
    *ptx_skip_printed = true;
  } else if (s) {
    fail_msg("ptxas: %.2000s", kiln_status_message(s));
  } else if (split) {
    assert_non_null(strstr(ptx, sc->rmw ? "atom." : "atom.global.cas"));
  }
  kiln_status_free(s);
  kiln_free(ptx);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

static void test_split_reductions_combine_blocks_with_atomics(void **state) {
  static const split_case_t cases[] = {
      /* scalar sum of 1M: 64 blocks of 16384 */
      {"f32", "add", "0", "1048576", "0", "", KILN_REDUCTION_ROW, 64, 1, true, 1048576},
      /* a few rows of 40000: 3 chunks each */
      {"f32", "add", "0", "3,40000", "1", "3", KILN_REDUCTION_ROW, 3, 1, true, 40000},
      /* integer max: atomic max */
      {"s32", "maximum", "-2147483648", "100000", "0", "", KILN_REDUCTION_ROW, 7, 1, true, 1},
      /* float max propagates NaN: CAS loop around the reducer */
      {"f32", "maximum", "-inf", "70000", "0", "", KILN_REDUCTION_ROW, 5, 1, false, 1},
      /* f16 sum: 16-bit CAS loop */
      {"f16", "add", "0", "50000", "0", "", KILN_REDUCTION_ROW, 4, 1, false, 50000},
      /* many major reduced rows: [R0 = 20, K = 4, R2 = 512] -> 3 chunks of 8 major rows */
      {"f32", "add", "0", "20,4,512", "0,2", "4", KILN_REDUCTION_ROW, 1, 3, true, 20 * 512},
      /* long column: 10000 rows of 64 columns */
      {"f32", "add", "0", "10000,64", "0", "64", KILN_REDUCTION_COLUMN, 3, 1, true, 10000},
      /* long small column: 9000 rows of 4 columns */
      {"f32", "multiply", "1", "9000,4", "0", "4", KILN_REDUCTION_SMALL_COLUMN, 3, 1, false, 1},
      {"s32", "add", "0", "9000,4", "0", "4", KILN_REDUCTION_SMALL_COLUMN, 3, 1, true, 1},
      /* pred has no atomics: one block per output walks everything */
      {"pred", "and", "true", "100000", "0", "", KILN_REDUCTION_ROW, 1, 1, false, 1},
  };
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(4, &pool));
  bool skip_printed = false;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) run_split((int)i, &cases[i], jit, pool, &skip_printed);
  kiln_host_pool_destroy(pool);
  kiln_host_jit_destroy(jit);
}

/* On the host a row past XLA's race-free bound stays in one block while the kept rows give
 * every core 4 blocks (16 cores when the count is unknown: 64 rows): no initializing kernel,
 * no atomics, and the result matches the evaluator. Fewer rows, or another device, keep the
 * split (the training step's [1024, 32000] cross-entropy reduction ran 2.3x faster whole). */
static void test_host_keeps_long_rows_whole_when_rows_are_many(void **state) {
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  static const struct {
    const char *in, *out;
    int64_t cores, splits;
  } cases[] = {{"64,20000", "64", 0, 1},
               {"63,20000", "63", 0, 2},
               {"16,20000", "16", 4, 1},
               {"15,20000", "15", 4, 2}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kiln_hlo_module_t *m = make_reduce("f32", "add", "0", cases[i].in, "1", cases[i].out);
    kiln_hero_analysis_t ha;
    assert_null(kiln_hero_analyze(m->entry, &ha));
    kiln_reduction_plan_t host, gpu;
    assert_null(kiln_hero_reduction_plan_host(m->entry, &ha, cases[i].cores, &host));
    assert_null(kiln_hero_reduction_plan(m->entry, &ha, cases[i].cores, &gpu));
    assert_int_equal(host.splits, cases[i].splits);
    assert_int_equal(gpu.splits, 2);
    if (cases[i].cores == 0) {
      char kname[32];
      snprintf(kname, sizeof(kname), "hostrow%d", (int)i);
      kiln_codegen_compile_options_t o = {0};
      o.kernel_name = kname;
      o.host_target = true;
      kiln_codegen_kernel_t k;
      kiln_status s = kiln_reduction_kernel_emit(m->entry, &o, NULL, &k);
      if (s) fail_msg("%s: %s", cases[i].in, kiln_status_message(s));
      assert_int_equal(k.next != NULL, cases[i].splits > 1);
      hero_run_result_t rr;
      s = hero_run_check(m->entry, &k, jit, NULL, false, 20000, true, 11, &rr);
      if (s) fail_msg("run: %s", kiln_status_message(s));
      if (rr.mismatches) fail_msg("%lld mismatches: %s", (long long)rr.mismatches, rr.first);
      kiln_codegen_kernel_free(&k);
    }
    kiln_hlo_module_destroy(m);
  }
  kiln_host_jit_destroy(jit);
}

/* Variadic reduces cannot combine with one atomic: not split, still correct. */
static void test_variadic_huge_reduction_stays_in_one_block(void **state) {
  const char *text =
      "argmax {\n a = f32[] parameter(0)\n ai = s32[] parameter(1)\n b = f32[] parameter(2)\n"
      " bi = s32[] parameter(3)\n gt = pred[] compare(a, b), direction=GT\n"
      " eq = pred[] compare(a, b), direction=EQ\n lt = pred[] compare(ai, bi), direction=LT\n"
      " tie = pred[] and(eq, lt)\n pick = pred[] or(gt, tie)\n v = f32[] select(pick, a, b)\n"
      " i = s32[] select(pick, ai, bi)\n ROOT t = (f32[], s32[]) tuple(v, i)\n}\n"
      "fusion {\n p = f32[2,40000] parameter(0)\n io = s32[2,40000] iota(), iota_dimension=1\n"
      " c = f32[] constant(-inf)\n z = s32[] constant(0)\n"
      " ROOT r = (f32[2], s32[2]) reduce(p, io, c, z), dimensions={1}, to_apply=argmax\n}\n";
  kiln_hlo_module_t *m = parse(text);
  kiln_reduction_plan_t p = plan_of(m->entry, 0);
  assert_false(p.race_free);
  assert_false(p.atomic);
  assert_int_equal(p.splits, 1);
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_reduction_kernel_emit(m->entry, NULL, NULL, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_null(k.next);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  hero_run_result_t rr;
  s = hero_run_check(m->entry, &k, jit, NULL, false, 1, true, 5, &rr);
  if (s) fail_msg("%s", kiln_status_message(s));
  if (rr.mismatches) fail_msg("%lld mismatches: %s", (long long)rr.mismatches, rr.first);
  kiln_host_jit_destroy(jit);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* Ragged shapes: multi-row with major reduced rows, a kept size that is not a multiple of
 * the rows per block, two reduces and a side output; small column with a partial last
 * block of rows and two reduces (sum and max); a row reduction whose two reduces read
 * inputs of different shapes (f32[300,2048] and a bitcast f32[300,32,64]). */
static void test_multirow_and_small_column_ragged_shapes_match_evaluator(void **state) {
  static const struct {
    const char *text;
    kiln_reduction_kind_t kind;
  } cases[] = {
      {"add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
       "mx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b)\n}\n"
       "fusion {\n p = f32[3,1001,8] parameter(0)\n e = f32[3,1001,8] exponential(p)\n"
       " c = f32[] constant(0)\n m = f32[] constant(-inf)\n"
       " r1 = f32[1001] reduce(e, c), dimensions={0,2}, to_apply=add\n"
       " r2 = f32[1001] reduce(p, m), dimensions={0,2}, to_apply=mx\n"
       " ROOT t = (f32[1001], f32[3,1001,8], f32[1001]) tuple(r1, e, r2)\n}\n",
       KILN_REDUCTION_MULTI_ROW},
      {"add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
       "mx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b)\n}\n"
       "fusion {\n p = f32[5,333,8] parameter(0)\n c = f32[] constant(0)\n m = f32[] constant(-inf)\n"
       " r1 = f32[5,8] reduce(p, c), dimensions={1}, to_apply=add\n"
       " r2 = f32[5,8] reduce(p, m), dimensions={1}, to_apply=mx\n"
       " ROOT t = (f32[5,8], f32[5,8]) tuple(r1, r2)\n}\n",
       KILN_REDUCTION_SMALL_COLUMN},
      /* reduce inputs of different shapes with one [R0, K, R2] form (row) */
      {"add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
       "fusion {\n p = f32[300,2048] parameter(0)\n c = f32[] constant(0)\n"
       " r1 = f32[300] reduce(p, c), dimensions={1}, to_apply=add\n n = f32[300,2048] negate(p)\n"
       " bc = f32[300,32,64] bitcast(n)\n r2 = f32[300] reduce(bc, c), dimensions={1,2}, to_apply=add\n"
       " ROOT t = (f32[300], f32[300]) tuple(r1, r2)\n}\n",
       KILN_REDUCTION_ROW},
  };
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kiln_hlo_module_t *m = parse(cases[i].text);
    kiln_reduction_plan_t p = plan_of(m->entry, 0);
    assert_int_equal(p.kind, cases[i].kind);
    char kname[32];
    snprintf(kname, sizeof(kname), "ragged%zu", i);
    kiln_codegen_compile_options_t o = {0};
    o.kernel_name = kname;
    kiln_codegen_kernel_t k;
    kiln_status s = kiln_reduction_kernel_emit(m->entry, &o, NULL, &k);
    if (s) fail_msg("%s", kiln_status_message(s));
    hero_run_result_t rr;
    s = hero_run_check(m->entry, &k, jit, NULL, false, 2048, true, 9, &rr);
    if (s) fail_msg("%s", kiln_status_message(s));
    printf("%s: %lld elements, block %lld, grid %lld, max rel %.2g\n", kiln_reduction_kind_name(p.kind),
           (long long)rr.elements, (long long)k.grid.threads, (long long)k.grid.blocks_x, rr.max_rel);
    if (rr.mismatches) fail_msg("%lld mismatches: %s", (long long)rr.mismatches, rr.first);
    kiln_codegen_kernel_free(&k);
    kiln_hlo_module_destroy(m);
  }
  kiln_host_jit_destroy(jit);
}

/* Through the fusion compiler and its runner (kiln_runner_check, exact for integers):
 * a split integer sum to a scalar (a chain of two launches) and integer multi-row and
 * small-column reductions. */
static void test_fusion_runner_runs_reduction_kinds_exactly(void **state) {
  static const struct {
    const char *ty, *op, *init, *in, *dims, *out;
    kiln_reduction_kind_t kind;
    bool chain;
  } cases[] = {
      {"s32", "add", "0", "300000", "0", "", KILN_REDUCTION_ROW, true},
      {"s32", "add", "0", "4096,8", "1", "4096", KILN_REDUCTION_MULTI_ROW, false},
      {"s16", "maximum", "-32768", "2000,16", "0", "16", KILN_REDUCTION_SMALL_COLUMN, false},
      {"u32", "add", "0", "9000,100", "0", "100", KILN_REDUCTION_COLUMN, true},
  };
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(4, &pool));
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    kiln_hlo_module_t *m = make_reduce(cases[i].ty, cases[i].op, cases[i].init, cases[i].in, cases[i].dims, cases[i].out);
    assert_int_equal(plan_of(m->entry, 0).kind, cases[i].kind);
    kiln_codegen_kernel_t k;
    kiln_status s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
    if (s) fail_msg("%s", kiln_status_message(s));
    assert_int_equal(k.next != NULL, cases[i].chain);
    kiln_codegen_kernel_free(&k);
    kiln_runner_options_t o;
    kiln_runner_options_init(&o);
    o.pool = pool;
    char kname[32];
    snprintf(kname, sizeof(kname), "runner%zu", i);
    o.compile.kernel_name = kname;
    kiln_runner_report_t r;
    s = kiln_runner_check(m->entry, &o, &r);
    if (s) fail_msg("%s", kiln_status_message(s));
    printf("%s %s[%s] -> %s: %s, %lld elements, %lld mismatches\n", cases[i].op, cases[i].ty,
           cases[i].in, cases[i].out, kiln_codegen_emitter_name(r.emitter), (long long)r.elements,
           (long long)r.mismatches);
    assert_int_equal(r.emitter, KILN_CODEGEN_EMITTER_REDUCTION);
    if (r.mismatches) fail_msg("%s", r.first_mismatch);
    kiln_hlo_module_destroy(m);
  }
  kiln_host_pool_destroy(pool);
}

/* The dump folder (the edges' KILN_DUMP_TO): the row reduction's kernel IR shows the GPU
 * algorithm. */
static void test_row_reduction_dump_shows_shared_barrier_shuffles(void **state) {
  kiln_hlo_module_t *m = make_reduce("f32", "add", "0", "64,4096", "1", "64");
  char dir[] = "/tmp/kiln_redkinds_dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  kiln_codegen_compile_options_t o = {0};
  o.kernel_name = "rowdump";
  o.dump_dir = dir;
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_codegen_kernel_emit(m->entry, &o, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  char path[256];
  snprintf(path, sizeof(path), "%s/rowdump.50-kir-input.txt", dir);
  char *dump = NULL;
  size_t len = 0;
  assert_null(kiln_read_file(path, &dump, &len));
  assert_non_null(strstr(dump, "allocate_shared"));
  assert_non_null(strstr(dump, "tensor<2x5xf32, shared>")); /* 2 rows x (4 warps + 1 padding) */
  assert_non_null(strstr(dump, "barrier"));
  assert_non_null(strstr(dump, "shuffle"));
  assert_non_null(strstr(dump, "block=[128, 2, 1]")); /* 128 threads per row, 2 rows */
  kiln_free(dump);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_reduction_kinds_follow_file_names),
      cmocka_unit_test(test_plans_match_xla_emitter_tests),
      cmocka_unit_test(test_row_plans_follow_xla_row_reduction_rules),
      cmocka_unit_test(test_narrow_long_rows_plan),
      cmocka_unit_test(test_multirow_shuffles_without_shared_memory),
      cmocka_unit_test(test_small_column_uses_padded_shared_rows_tile),
      cmocka_unit_test(test_split_reductions_combine_blocks_with_atomics),
      cmocka_unit_test(test_variadic_huge_reduction_stays_in_one_block),
      cmocka_unit_test(test_host_keeps_long_rows_whole_when_rows_are_many),
      cmocka_unit_test(test_multirow_and_small_column_ragged_shapes_match_evaluator),
      cmocka_unit_test(test_fusion_runner_runs_reduction_kinds_exactly),
      cmocka_unit_test(test_row_reduction_dump_shows_shared_barrier_shuffles),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
