/* Scatter emitter: the fusion compiles to a chain (init kernel writing output = operand,
 * then the update kernel), each kernel passes `ptxas -arch=sm_90` (skipped with the reason
 * when ptxas is missing), and on the host the chain matches the evaluator: every corpus
 * scatter fusion, plus fusions written here for the strategies the corpus does not reach
 * (computed operands and indices, a general combiner in a compare-and-swap loop, variadic
 * scatter with duplicate indices on the serial path, out-of-bounds windows, blocks run in
 * parallel on a thread pool with atomics). Tolerances: kiln_compare_kernel_tolerance, except the
 * sorted-indices path with a float add, which sums each run of equal indices in registers
 * before one atomic (XLA's reassociation): those run on inputs in [0.5, 1) (no
 * cancellation) within 64 ulp. Prints passed/total for the corpus. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compiler/codegen/scatter_emitter.h"
#include "emitter_test_util.h"
#include "tests/skip_util.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = emt_parse(text);
  assert_non_null(m);
  return m;
}

static bool run_one(const char *what, const kiln_hlo_computation_t *c, kiln_host_jit_t *jit, kiln_host_pool_t *pool,
                    double lo, double hi, int64_t max_ulp) {
  return emt_run_one(what, c, KILN_CODEGEN_EMITTER_SCATTER, jit, pool, lo, hi, max_ulp);
}

/* The update kernel's kernel-IR text (kiln_free), emitted for the GPU or the host. */
static char *update_kir_for(const kiln_hlo_computation_t *c, bool host, kiln_codegen_kernel_t *k) {
  kiln_codegen_compile_options_t co = {.host_target = host};
  kiln_status s = kiln_scatter_kernel_emit(c, &co, k);
  if (s) printf("emit: %s\n", kiln_status_message(s));
  assert_null(s);
  assert_non_null(k->next);
  return kiln_kir_to_string(k->next->kir);
}

static char *update_kir(const kiln_hlo_computation_t *c, kiln_codegen_kernel_t *k) {
  return update_kir_for(c, false, k);
}

static void test_corpus_scatter_fusions_match_evaluator(void **state) {
  int passed = 0, total = 0;
  emt_run_corpus("__scatter__", KILN_CODEGEN_EMITTER_SCATTER, &passed, &total);
  assert_true(total >= 15);
  assert_int_equal(passed, total);
}

/* The same corpus fusions as the host backend compiles them (host_target): updates whose order
 * matters run in order (split over window columns where it can), the rest unique or with
 * order-free atomics, so every one gives the evaluator's bits, on a pool of 3 workers. */
static void test_corpus_scatter_fusions_in_host_form_give_the_evaluators_bits(void **state) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/emitters", kiln_corpus_dir());
  KILN_SKIP_WITHOUT_CORPUS(dir);
  size_t n = 0;
  char **names = emt_corpus_files("__scatter__", &n);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(3, &pool));
  int passed = 0, split = 0;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_file_t *f = NULL;
    const kiln_hlo_computation_t **cs = emt_load_fusions(names[i], &f);
    assert_non_null(cs);
    kiln_codegen_compile_options_t co = {.host_target = true};
    kiln_codegen_kernel_t k;
    assert_null(kiln_scatter_kernel_emit(cs[0], &co, &k));
    char *kir = k.next ? kiln_kir_to_string(k.next->kir) : NULL;
    bool in_order = kir && !strstr(kir, "atomic") && strstr(kir, "for ");
    int64_t threads = k.next ? k.next->grid.threads * k.next->grid.blocks_x : 0;
    split += in_order && threads > 1;
    kiln_free(kir);
    kiln_codegen_kernel_free(&k);
    kiln_runner_options_t o;
    kiln_runner_options_init(&o);
    o.jit = jit, o.pool = pool, o.compile.host_target = true, o.max_ulp = 0;
    kiln_runner_report_t r;
    kiln_status st = kiln_runner_check(cs[0], &o, &r);
    if (st)
      printf("FAIL %s: %s\n", emt_short_name(names[i]), kiln_status_message(st));
    else
      printf("%s %-45s %lld elements, %lld differ%s\n", r.mismatches ? "FAIL" : "ok  ",
             emt_short_name(names[i]), (long long)r.elements, (long long)r.mismatches,
             !in_order     ? ""
             : threads > 1 ? " (in order, split)"
                           : " (in order, one thread)");
    passed += !st && r.mismatches == 0;
    kiln_status_free(st);
    kiln_free(cs);
    kiln_hlo_file_free(f);
  }
  printf(
      "corpus scatter fusions in host form: %d/%zu with the evaluator's bits, %d split in order\n",
      passed, n, split);
  assert_int_equal(passed, (int)n);
  assert_true(split >= 1);
  emt_free_names(names, n);
  kiln_host_pool_destroy(pool);
  kiln_host_jit_destroy(jit);
}

/* Operand, indices and updates computed inside the fusion; a multiply combiner (no atomic
 * instruction: compare-and-swap loop); duplicate and out-of-bounds indices. */
static const char *k_computed = "mul {\n"
                                "  a = f32[] parameter(0)\n"
                                "  b = f32[] parameter(1)\n"
                                "  ROOT m = f32[] multiply(a, b)\n"
                                "}\n"
                                "fusion {\n"
                                "  p0 = f32[16,8] parameter(0)\n"
                                "  p1 = s32[30] parameter(1)\n"
                                "  p2 = f32[30,2,8] parameter(2)\n"
                                "  e = f32[16,8] exponential(p0)\n"
                                "  operand = f32[16,8] add(e, p0)\n"
                                "  three = s32[] constant(3)\n"
                                "  b3 = s32[30] broadcast(three), dimensions={}\n"
                                "  shifted = s32[30] add(p1, b3)\n"
                                "  indices = s32[30,1] reshape(shifted)\n"
                                "  half = f32[] constant(0.5)\n"
                                "  bh = f32[30,2,8] broadcast(half), dimensions={}\n"
                                "  updates = f32[30,2,8] add(p2, bh)\n"
                                "  ROOT s = f32[16,8] scatter(operand, indices, updates), update_window_dims={1,2},\n"
                                "      inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
                                "      to_apply=mul\n"
                                "}\n";

static void test_scatter_computed_operand_and_cas_combiner(void **state) {
  kiln_hlo_module_t *m = parse(k_computed);
  kiln_codegen_kernel_t k;
  char *kir = update_kir(m->entry, &k);
  assert_non_null(strstr(kir, "atomic_cas_loop"));
  assert_null(strstr(kir, "atomic_rmw"));
  /* The update kernel covers the updates (480 elements), the init kernel the operand. */
  assert_true(k.grid.threads * k.grid.blocks_x >= 128 && k.grid.threads * k.grid.blocks_x < 480);
  assert_true(k.next->grid.threads * k.next->grid.blocks_x >= 480);
  assert_int_equal(k.num_inputs, 3);
  assert_int_equal(k.num_outputs, 1);
  kiln_free(kir);
  kiln_codegen_kernel_free(&k);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  assert_true(run_one("computed operand, multiply (CAS)", m->entry, jit, NULL, 0.5, 1.5, -1));
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
}

static const char *k_int_add = "add {\n"
                               "  a = s32[] parameter(0)\n"
                               "  b = s32[] parameter(1)\n"
                               "  ROOT s = s32[] add(a, b)\n"
                               "}\n"
                               "fusion {\n"
                               "  operand = s32[50,40] parameter(0)\n"
                               "  indices = s32[4000,2] parameter(1)\n"
                               "  updates = s32[4000,3] parameter(2)\n"
                               "  ROOT s = s32[50,40] scatter(operand, indices, updates), update_window_dims={1},\n"
                               "      inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1,\n"
                               "      to_apply=add\n"
                               "}\n";

/* Many duplicate indices, blocks in parallel on a pool: the atomic add keeps every update. */
static void test_scatter_atomic_add_on_parallel_blocks(void **state) {
  kiln_hlo_module_t *m = parse(k_int_add);
  kiln_codegen_kernel_t k;
  char *kir = update_kir(m->entry, &k);
  assert_non_null(strstr(kir, "atomic_rmw"));
  kiln_free(kir);
  kiln_codegen_kernel_free(&k);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(4, &pool));
  assert_true(run_one("s32 add, 4000 updates, 4 workers", m->entry, jit, pool, 0, 0, -1));
  kiln_host_pool_destroy(pool);
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
}

/* On the host, a combiner whose result depends on the order (the CAS multiply above, a
 * float add) runs in order, as XLA:CPU runs scatters, so every run gives the same bits;
 * order-free integer adds keep their atomics (test_host_determinism runs whole modules). The
 * multiply's window spans the operand's 8 columns: one thread per column walks every update
 * in order (the split serial path), as for a window over the first 64 of 128 columns that no
 * index moves; a scatter of scalars runs on one thread. */
static const char *k_scalar_add =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n}\n"
    "fusion {\n  o = f32[40] parameter(0)\n  i = s32[300,1] parameter(1)\n"
    "  u = f32[300] parameter(2)\n"
    "  ROOT s = f32[40] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0},\n"
    "      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n";

static void test_order_dependent_scatters_run_in_order_on_the_host(void **state) {
  /* Half of each row, which no index addresses: the window starts at column 0. */
  const char *half_rows =
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\n"
      "fusion {\n  o = f32[40,128] parameter(0)\n  i = s32[500,1] parameter(1)\n"
      "  u = f32[500,64] parameter(2)\n"
      "  ROOT s = f32[40,128] scatter(o, i, u), update_window_dims={1}, inserted_window_dims={0},\n"
      "      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n";
  const char *cases[4] = {k_computed, k_int_add, k_scalar_add, half_rows};
  const int64_t threads[4] = {8, -1, 1, 64}; /* -1: a grid over the 12000 updates, with atomics */
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  for (int i = 0; i < 4; i++) {
    kiln_hlo_module_t *m = parse(cases[i]);
    kiln_codegen_kernel_t k;
    char *kir = update_kir_for(m->entry, true, &k);
    int64_t cover = k.next->grid.threads * k.next->grid.blocks_x;
    if (threads[i] > 0)
      assert_int_equal(cover, threads[i]);
    else
      assert_true(cover >= 12000);
    assert_int_equal(strstr(kir, "atomic") == NULL, threads[i] > 0);
    kiln_free(kir);
    kiln_codegen_kernel_free(&k);
    if (i >= 2) { /* in order: the evaluator's bits */
      kiln_runner_options_t o;
      kiln_runner_options_init(&o);
      o.jit = jit, o.compile.host_target = true;
      o.float_lo = 0.5, o.float_hi = 1.5, o.max_ulp = 0;
      kiln_runner_report_t r;
      assert_null(kiln_runner_check(m->entry, &o, &r));
      assert_int_equal(r.mismatches, 0);
    }
    kiln_hlo_module_destroy(m);
  }
  kiln_host_jit_destroy(jit);
}

/* Deterministic ops (XLA's --xla_gpu_deterministic_ops): the GPU kernel of an order-dependent
 * scatter runs in order too (a thread per column of the window), and passes ptxas. */
static void test_deterministic_ops_make_gpu_scatters_run_in_order(void **state) {
  kiln_hlo_module_t *m = parse(k_computed);
  kiln_codegen_compile_options_t co = {.deterministic = true};
  kiln_codegen_kernel_t k;
  assert_null(kiln_scatter_kernel_emit(m->entry, &co, &k));
  assert_int_equal(k.next->grid.threads * k.next->grid.blocks_x, 8);
  char *kir = kiln_kir_to_string(k.next->kir);
  assert_null(strstr(kir, "atomic"));
  kiln_free(kir);
  kiln_codegen_kernel_free(&k);
  /* run on the host against the evaluator, its PTX through ptxas */
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.check_ptx = true;
  o.compile.deterministic = true;
  o.float_lo = 0.5, o.float_hi = 1.5;
  kiln_runner_report_t r;
  assert_null(kiln_runner_check(m->entry, &o, &r));
  printf("deterministic scatter: %lld elements, %lld mismatches, ptxas %s\n", (long long)r.elements,
         (long long)r.mismatches, r.ptx_checked ? (r.ptx_ok ? "ok" : r.ptx_note) : r.ptx_note);
  assert_int_equal(r.mismatches, 0);
  assert_true(!r.ptx_checked || r.ptx_ok);
  kiln_hlo_module_destroy(m);
}

static const char *k_variadic = "comb {\n"
                                "  a0 = f32[] parameter(0)\n"
                                "  a1 = s32[] parameter(1)\n"
                                "  b0 = f32[] parameter(2)\n"
                                "  b1 = s32[] parameter(3)\n"
                                "  s0 = f32[] add(a0, b0)\n"
                                "  s1 = s32[] maximum(a1, b1)\n"
                                "  ROOT t = (f32[], s32[]) tuple(s0, s1)\n"
                                "}\n"
                                "fusion {\n"
                                "  o0 = f32[6,5] parameter(0)\n"
                                "  o1 = s32[6,5] parameter(1)\n"
                                "  indices = s32[20] parameter(2)\n"
                                "  u0 = f32[20,5] parameter(3)\n"
                                "  u1 = s32[20,5] parameter(4)\n"
                                "  ROOT s = (f32[6,5], s32[6,5]) scatter(o0, o1, indices, u0, u1), update_window_dims={1},\n"
                                "      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
                                "      to_apply=comb\n"
                                "}\n";

/* A variadic scatter with duplicate indices has no single atomic: each of the window's 5
 * columns has a thread that walks every update in order. */
static void test_variadic_scatter_with_duplicates_runs_in_order(void **state) {
  kiln_hlo_module_t *m = parse(k_variadic);
  kiln_codegen_kernel_t k;
  char *kir = update_kir(m->entry, &k);
  assert_int_equal(k.next->grid.threads * k.next->grid.blocks_x, 5);
  assert_null(strstr(kir, "atomic"));
  assert_int_equal(k.num_outputs, 2);
  kiln_free(kir);
  kiln_codegen_kernel_free(&k);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  assert_true(run_one("variadic (f32 add, s32 max), duplicates", m->entry, jit, NULL, 0, 0, -1));
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
}

/* Sorted indices: runs of equal indices are combined in registers (a `for` over the run
 * carrying the accumulator) before one atomic per run. */
static void test_sorted_indices_accumulate_runs(void **state) {
  char path[2048];
  snprintf(path, sizeof(path), "%s/emitters/xla__backends__gpu__codegen__emitters__tests__scatter__sorted_indices_large.hlo",
           kiln_corpus_dir());
  char dir[2048];
  snprintf(dir, sizeof(dir), "%s/emitters", kiln_corpus_dir());
  KILN_SKIP_WITHOUT_CORPUS(dir);
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, &f);
  if (s) fail_msg("%s: %s", path, kiln_status_message(s));
  const kiln_hlo_computation_t **cs = NULL;
  int nc = 0;
  kiln_runner_collect_fusions(f->modules[0], &cs, &nc);
  kiln_codegen_kernel_t k;
  char *kir = update_kir(cs[0], &k);
  assert_non_null(strstr(kir, "for "));
  assert_non_null(strstr(kir, "atomic_cas_loop")); /* s32 multiply */
  /* 2008 indices in runs of 8 -> 251 runs, times 64 window elements. */
  int64_t cover = k.next->grid.threads * k.next->grid.blocks_x;
  assert_true(cover >= 251 * 64 && cover < 251 * 64 + 128);
  kiln_free(kir);
  kiln_codegen_kernel_free(&k);
  kiln_free(cs);
  kiln_hlo_file_free(f);
}

/* Layouts: operands, updates and outputs stored column-major. Outputs are written at their
 * physical index (a logical index into a column-major buffer scrambles it), and the
 * operands are read at theirs. The variadic form runs serially; the single add is
 * atomic, with an operand in the default layout under a column-major output. */
static void test_scatter_with_non_default_layouts(void **state) {
  const char *variadic =
      "comb {\n  a0 = f32[] parameter(0)\n  a1 = s32[] parameter(1)\n  b0 = f32[] parameter(2)\n"
      "  b1 = s32[] parameter(3)\n  s0 = f32[] add(a0, b0)\n  s1 = s32[] maximum(a1, b1)\n"
      "  ROOT t = (f32[], s32[]) tuple(s0, s1)\n}\n"
      "fusion {\n  o0 = f32[6,5]{0,1} parameter(0)\n  o1 = s32[6,5]{1,0} parameter(1)\n"
      "  indices = s32[20] parameter(2)\n  u0 = f32[20,5]{0,1} parameter(3)\n  u1 = s32[20,5]{0,1} "
      "parameter(4)\n"
      "  ROOT s = (f32[6,5]{0,1}, s32[6,5]{0,1}) scatter(o0, o1, indices, u0, u1), "
      "update_window_dims={1},\n"
      "      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
      "to_apply=comb\n}\n";
  const char *atomic =
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "fusion {\n  o = f32[7,4]{1,0} parameter(0)\n  i = s32[9,1] parameter(1)\n  u = "
      "f32[9,4]{0,1} parameter(2)\n"
      "  e = f32[7,4]{1,0} exponential(o)\n"
      "  ROOT s = f32[7,4]{0,1} scatter(e, i, u), update_window_dims={1}, "
      "inserted_window_dims={0},\n"
      "      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n";
  /* Overlapping windows of a variadic "keep the update" scatter: element 2 is written by
   * updates (0,2), (1,1), (2,0); the serial kernel must visit them in row-major order of the
   * logical update index, as the evaluator does, not in the column-major memory order. */
  const char *order =
      "comb {\n  a0 = f32[] parameter(0)\n  a1 = s32[] parameter(1)\n  b0 = f32[] parameter(2)\n"
      "  b1 = s32[] parameter(3)\n  ROOT t = (f32[], s32[]) tuple(b0, b1)\n}\n"
      "fusion {\n  o0 = f32[8] parameter(0)\n  o1 = s32[8] parameter(1)\n"
      "  indices = s32[4,1] constant({{0},{1},{2},{3}})\n  u0 = f32[4,3]{0,1} parameter(2)\n"
      "  u1 = s32[4,3]{0,1} parameter(3)\n"
      "  ROOT s = (f32[8], s32[8]) scatter(o0, o1, indices, u0, u1), update_window_dims={1},\n"
      "      inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
      "to_apply=comb\n}\n";
  const char *texts[3] = {variadic, atomic, order};
  const char *what[3] = {"variadic, column-major outputs",
                         "atomic add, column-major output over exp(operand)",
                         "variadic, column-major updates in row-major order"};
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  for (int t = 0; t < 3; t++) {
    kiln_hlo_module_t *m = parse(texts[t]);
    assert_true(run_one(what[t], m->entry, jit, NULL, 0.5, 1.5, -1));
    kiln_hlo_module_destroy(m);
  }
  kiln_host_jit_destroy(jit);
}

/* The split serial path against the one-thread kernel and the evaluator, bit for bit: a float
 * add with repeated indices whose windows overlap in a partial dim (3 of 6 rows, starting
 * anywhere) and span the 256 columns, the columns split over 4 blocks run by 4 workers; the
 * same module with the split off runs on one thread. Floats in [0.5, 1.5): every sum rounds,
 * so any other order would show. */
static void test_split_serial_scatter_gives_the_serial_bits(void **state) {
  const char *text =
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "fusion {\n  o = f32[50,6,256] parameter(0)\n  i = s32[700,2] parameter(1)\n"
      "  u = f32[700,3,256] parameter(2)\n"
      "  ROOT s = f32[50,6,256] scatter(o, i, u), update_window_dims={1,2}, "
      "inserted_window_dims={0},\n"
      "      scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add\n}\n";
  kiln_hlo_module_t *m = parse(text);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  kiln_host_pool_t *pool = NULL;
  assert_null(kiln_host_pool_create(4, &pool));
  for (int split = 1; split >= 0; split--) {
    kiln_scatter_emitter_set_split(split);
    for (int host = 0; host < 2; host++) {
      kiln_codegen_kernel_t k;
      kiln_codegen_compile_options_t co = {.host_target = host, .deterministic = !host};
      assert_null(kiln_scatter_kernel_emit(m->entry, &co, &k));
      char *kir = kiln_kir_to_string(k.next->kir);
      int64_t cover = k.next->grid.threads * k.next->grid.blocks_x;
      assert_int_equal(cover, split ? 256 : 1);
      if (split && host) assert_int_equal(k.next->grid.blocks_x, 4); /* 64 columns a block */
      assert_null(strstr(kir, "atomic"));
      kiln_free(kir);
      kiln_codegen_kernel_free(&k);
    }
    kiln_runner_options_t o;
    kiln_runner_options_init(&o);
    o.jit = jit, o.pool = pool, o.compile.host_target = true;
    o.float_lo = 0.5, o.float_hi = 1.5, o.max_ulp = 0;
    kiln_runner_report_t r;
    assert_null(kiln_runner_check(m->entry, &o, &r));
    printf("%s: %lld elements, %lld differ from the evaluator (max %lld ulp)\n",
           split ? "f32 add, columns split, 4 workers" : "f32 add, one thread",
           (long long)r.elements, (long long)r.mismatches, (long long)r.max_ulp);
    assert_int_equal(r.mismatches, 0);
  }
  kiln_scatter_emitter_set_split(true);
  kiln_host_pool_destroy(pool);
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
}

static void test_scatter_root_must_be_the_scatter(void **state) {
  const char *text = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
                     "fusion {\n  o = f32[8] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = f32[2] parameter(2)\n"
                     "  s = f32[8] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0},\n"
                     "      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n"
                     "  ROOT n = f32[8] negate(s)\n}\n";
  kiln_hlo_module_t *m = parse(text);
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_scatter_kernel_emit(m->entry, NULL, &k);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "root is not the scatter"));
  kiln_status_free(s);
  assert_null(k.kir);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_scatter_fusions_match_evaluator),
      cmocka_unit_test(test_corpus_scatter_fusions_in_host_form_give_the_evaluators_bits),
      cmocka_unit_test(test_scatter_computed_operand_and_cas_combiner),
      cmocka_unit_test(test_scatter_atomic_add_on_parallel_blocks),
      cmocka_unit_test(test_order_dependent_scatters_run_in_order_on_the_host),
      cmocka_unit_test(test_deterministic_ops_make_gpu_scatters_run_in_order),
      cmocka_unit_test(test_variadic_scatter_with_duplicates_runs_in_order),
      cmocka_unit_test(test_split_serial_scatter_gives_the_serial_bits),
      cmocka_unit_test(test_sorted_indices_accumulate_runs),
      cmocka_unit_test(test_scatter_with_non_default_layouts),
      cmocka_unit_test(test_scatter_root_must_be_the_scatter),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
