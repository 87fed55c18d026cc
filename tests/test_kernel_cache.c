/* The kernels of an executable compiled together (kir_pipeline.h "compiling several
 * kernels", compiler/backend/kernel_cache.h, base/disk_cache.h): parallel compilation gives
 * the same objects as serial, identical kernels compile once, the per-kernel cache answers
 * from memory and from disk, corrupt entries are rejected and rebuilt, the disk cache stays
 * under its size bound by evicting the least recently used entries, small straight-line
 * kernels take the host's small tier. */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/disk_cache.h"
#include "base/str.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/ir.h"

/* Four fusions; `twice_a` and `twice_b` are the same computation under other names. */
static const char kFusions[] =
    "add {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "twice_a {\n"
    "  p = f32[256,64] parameter(0)\n"
    "  two = f32[] constant(2)\n"
    "  b2 = f32[256,64] broadcast(two), dimensions={}\n"
    "  m = f32[256,64] multiply(p, b2)\n"
    "  one = f32[] constant(1)\n"
    "  b1 = f32[256,64] broadcast(one), dimensions={}\n"
    "  ROOT r = f32[256,64] add(m, b1)\n"
    "}\n"
    "twice_b {\n"
    "  x = f32[256,64] parameter(0)\n"
    "  c2 = f32[] constant(2)\n"
    "  bb2 = f32[256,64] broadcast(c2), dimensions={}\n"
    "  mm = f32[256,64] multiply(x, bb2)\n"
    "  c1 = f32[] constant(1)\n"
    "  bb1 = f32[256,64] broadcast(c1), dimensions={}\n"
    "  ROOT rr = f32[256,64] add(mm, bb1)\n"
    "}\n"
    "row_sum {\n"
    "  p = f32[256,64] parameter(0)\n"
    "  e = f32[256,64] exponential(p)\n"
    "  z = f32[] constant(0)\n"
    "  ROOT r = f32[256] reduce(e, z), dimensions={1}, to_apply=add\n"
    "}\n"
    "ENTRY tanh_all {\n"
    "  p = f32[256,64] parameter(0)\n"
    "  ROOT t = f32[256,64] tanh(p)\n"
    "}\n";

typedef struct fixture {
  kiln_hlo_module_t *m;
  kiln_codegen_kernel_t k[4];
  const kiln_kir_module_t *mods[4];
} fixture_t;

static const char *const kNames[4] = {"twice_a", "twice_b", "row_sum", "tanh_all"};

static int setup(void **state) {
  fixture_t *f = kiln_calloc(1, sizeof(*f));
  kiln_status s = kiln_hlo_parse_computations(kFusions, sizeof(kFusions) - 1, NULL, &f->m);
  for (int i = 0; i < 4 && !s; i++) {
    const kiln_hlo_computation_t *c = NULL;
    for (size_t j = 0; j < f->m->computations.len; j++)
      if (!strcmp(f->m->computations.data[j]->name, kNames[i])) c = f->m->computations.data[j];
    if (!c) {
      s = KILN_ERR_INTERNAL("no computation %s", kNames[i]);
      break;
    }
    char kname[64];
    snprintf(kname, sizeof(kname), "k%d_%s", i, kNames[i]);
    kiln_codegen_compile_options_t o = {0};
    o.kernel_name = kname;
    o.dump_dir = "";
    o.host_target = true;
    s = kiln_codegen_kernel_emit(c, &o, &f->k[i]);
    if (!s) f->mods[i] = f->k[i].kir;
  }
  if (s) {
    printf("setup: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  for (int i = 0; i < 4; i++) kiln_codegen_kernel_free(&f->k[i]);
  kiln_hlo_module_destroy(f->m);
  kiln_free(f);
  return 0;
}

static void make_temp_dir(char *dir) {
  assert_non_null(mkdtemp(dir));
}

static void rm_rf(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Entries of dir/kind, sorted; returns the count. */
static int list_dir(const char *dir, const char *kind, char names[][64], int max) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s", dir, kind);
  DIR *d = opendir(path);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < max) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= 64) continue;
    memcpy(names[n++], e->d_name, strlen(e->d_name) + 1);
  }
  closedir(d);
  qsort(names, (size_t)n, 64, (int (*)(const void *, const void *))strcmp);
  return n;
}

static void *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = kiln_malloc((size_t)n + 1);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Compiles the fixture's four kernels into a new JIT; fills out[4] and stats. */
static kiln_host_jit_t *compile_all(fixture_t *f, const char *dir, int threads,
                                    kiln_kir_host_kernel_t out[4], kiln_kir_batch_stats_t *st) {
  kiln_host_jit_t *jit = NULL;
  kiln_host_jit_options_t jo = {0};
  jo.dump_dir = "";
  assert_null(kiln_host_jit_create(&jo, &jit));
  kiln_kir_batch_options_t bo = {dir, threads, false};
  kiln_status s = kiln_kir_compile_host_batch(f->mods, 4, jit, &bo, out, st);
  if (s) printf("compile: %s\n", kiln_status_message(s));
  assert_null(s);
  return jit;
}

/* Runs the fixture's kernels on x (f32[256,64]) and checks each result. */
static void check_results(const kiln_kir_host_kernel_t k[4]) {
  float *x = kiln_malloc(256 * 64 * sizeof(float));
  float *y = kiln_malloc(256 * 64 * sizeof(float));
  for (int i = 0; i < 256 * 64; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int w = 0; w < 2; w++) {
    void *args[2] = {x, y};
    assert_null(kiln_kir_host_kernel_run(&k[w], NULL, args));
    for (int i = 0; i < 256 * 64; i++) assert_float_equal(y[i], 2.0f * x[i] + 1.0f, 1e-6);
  }
  void *args[2] = {x, y};
  assert_null(kiln_kir_host_kernel_run(&k[2], NULL, args));
  for (int r = 0; r < 256; r++) {
    double want = 0;
    for (int c = 0; c < 64; c++) want += exp(x[r * 64 + c]);
    assert_float_equal(y[r], want, 1e-4 * want);
  }
  assert_null(kiln_kir_host_kernel_run(&k[3], NULL, args));
  for (int i = 0; i < 256 * 64; i++) assert_float_equal(y[i], tanh(x[i]), 1e-5);
  kiln_free(x);
  kiln_free(y);
}

static void test_identical_kernels_compile_once_and_run_right(void **state) {
  fixture_t *f = *state;
  kiln_kernel_cache_clear();
  kiln_kir_host_kernel_t k[4];
  kiln_kir_batch_stats_t st;
  kiln_host_jit_t *jit = compile_all(f, NULL, 0, k, &st);
  printf("4 kernels: %d distinct, %d compiled on %d workers (lower %.1f ms, compile %.1f ms)\n",
         st.unique, st.compiled, st.threads, st.lower_ms, st.compile_ms);
  assert_int_equal(st.kernels, 4);
  assert_int_equal(st.unique, 3);
  assert_int_equal(st.compiled, 3);
  /* twice_a and twice_b: one entry point, each under its own kernel name */
  assert_ptr_equal(k[0].fn, k[1].fn);
  assert_ptr_not_equal(k[0].fn, k[2].fn);
  assert_string_equal(k[0].name, "k0_twice_a");
  assert_string_equal(k[1].name, "k1_twice_b");
  check_results(k);
  kiln_host_jit_destroy(jit);

  /* Again in a new JIT: every distinct kernel from the memory cache, nothing compiled. */
  jit = compile_all(f, NULL, 0, k, &st);
  assert_int_equal(st.memory_hits, 3);
  assert_int_equal(st.compiled, 0);
  check_results(k);
  kiln_host_jit_destroy(jit);
}

static void test_parallel_compilation_equals_serial(void **state) {
  fixture_t *f = *state;
  char serial[] = "/tmp/kiln_kcache_serial_XXXXXX", parallel[] = "/tmp/kiln_kcache_par_XXXXXX";
  make_temp_dir(serial);
  make_temp_dir(parallel);
  kiln_kir_host_kernel_t k[4];
  kiln_kir_batch_stats_t st;
  kiln_kernel_cache_clear();
  kiln_host_jit_destroy(compile_all(f, serial, 1, k, &st));
  assert_int_equal(st.threads, 1);
  kiln_kernel_cache_clear();
  kiln_host_jit_t *jit = compile_all(f, parallel, 3, k, &st);
  assert_int_equal(st.threads, 3);
  assert_int_equal(st.compiled, 3);
  check_results(k);
  kiln_host_jit_destroy(jit);
  /* The same entries (keys) with the same bytes. */
  char a[8][64], b[8][64];
  int na = list_dir(serial, KILN_KERNEL_CACHE_HOST, a, 8);
  int nb = list_dir(parallel, KILN_KERNEL_CACHE_HOST, b, 8);
  assert_int_equal(na, 3);
  assert_int_equal(nb, 3);
  for (int i = 0; i < na; i++) {
    assert_string_equal(a[i], b[i]);
    char pa[1200], pb[1200];
    snprintf(pa, sizeof(pa), "%s/%s/%s", serial, KILN_KERNEL_CACHE_HOST, a[i]);
    snprintf(pb, sizeof(pb), "%s/%s/%s", parallel, KILN_KERNEL_CACHE_HOST, b[i]);
    size_t la, lb;
    void *da = read_all(pa, &la), *db = read_all(pb, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    kiln_free(da);
    kiln_free(db);
  }
  rm_rf(serial);
  rm_rf(parallel);
}

static void test_disk_cache_hits_and_rebuilds_corrupt_entries(void **state) {
  fixture_t *f = *state;
  char dir[] = "/tmp/kiln_kcache_disk_XXXXXX";
  make_temp_dir(dir);
  kiln_kir_host_kernel_t k[4];
  kiln_kir_batch_stats_t st;
  kiln_kernel_cache_clear();
  kiln_host_jit_destroy(compile_all(f, dir, 0, k, &st));
  assert_int_equal(st.compiled, 3);

  /* A fresh memory cache (as in a new process): all three from disk. */
  kiln_kernel_cache_clear();
  kiln_host_jit_t *jit = compile_all(f, dir, 0, k, &st);
  assert_int_equal(st.disk_hits, 3);
  assert_int_equal(st.compiled, 0);
  check_results(k);
  kiln_host_jit_destroy(jit);

  /* Truncate one entry, flip a byte in another: both rejected, rebuilt, results right. */
  char names[8][64];
  int n = list_dir(dir, KILN_KERNEL_CACHE_HOST, names, 8);
  assert_int_equal(n, 3);
  char p0[1200], p1[1200];
  snprintf(p0, sizeof(p0), "%s/%s/%s", dir, KILN_KERNEL_CACHE_HOST, names[0]);
  snprintf(p1, sizeof(p1), "%s/%s/%s", dir, KILN_KERNEL_CACHE_HOST, names[1]);
  struct stat sb;
  assert_int_equal(stat(p0, &sb), 0);
  assert_int_equal(truncate(p0, sb.st_size / 2), 0);
  assert_int_equal(stat(p1, &sb), 0);
  FILE *fp = fopen(p1, "r+b");
  assert_non_null(fp);
  fseek(fp, sb.st_size - 17, SEEK_SET);
  int ch = fgetc(fp);
  fseek(fp, sb.st_size - 17, SEEK_SET);
  fputc(ch ^ 0x5a, fp);
  fclose(fp);
  int64_t rejected = kiln_disk_cache_counters(KILN_KERNEL_CACHE_HOST).rejected;
  kiln_kernel_cache_clear();
  jit = compile_all(f, dir, 0, k, &st);
  assert_int_equal(kiln_disk_cache_counters(KILN_KERNEL_CACHE_HOST).rejected - rejected, 2);
  assert_int_equal(st.disk_hits, 1);
  assert_int_equal(st.compiled, 2);
  check_results(k);
  kiln_host_jit_destroy(jit);
  /* The rebuilt entries are good. */
  kiln_kernel_cache_clear();
  jit = compile_all(f, dir, 0, k, &st);
  assert_int_equal(st.disk_hits, 3);
  kiln_host_jit_destroy(jit);
  rm_rf(dir);
}

static void test_cache_key_includes_the_pipeline(void **state) {
  fixture_t *f = *state;
  kiln_kernel_cache_clear();
  kiln_kir_host_kernel_t k[4];
  kiln_kir_batch_stats_t st;
  kiln_host_jit_destroy(compile_all(f, NULL, 0, k, &st));
  kiln_host_jit_t *jit = NULL;
  kiln_host_jit_options_t jo = {0};
  jo.dump_dir = "";
  jo.pipeline = "default<O1>";
  assert_null(kiln_host_jit_create(&jo, &jit));
  assert_null(kiln_kir_compile_host_batch(f->mods, 4, jit, NULL, k, &st));
  assert_int_equal(st.memory_hits, 0);
  assert_int_equal(st.compiled, 3);
  check_results(k);
  kiln_host_jit_destroy(jit);
}

static void test_cuda_kernels_compile_once_in_parallel_and_cache(void **state) {
  fixture_t *f = *state;
  kiln_kernel_cache_clear();
  kiln_kir_gpu_kernel_t g[4], h[4];
  kiln_kir_batch_stats_t st;
  kiln_nvptx_options_t no = {0};
  no.dump_dir = "";
  kiln_kir_batch_options_t serial = {NULL, 1, false}, parallel = {NULL, 3, false};
  kiln_status s = kiln_kir_compile_nvptx_batch(f->mods, 4, &no, &serial, g, &st);
  if (s && kiln_status_code(s) == KILN_UNAVAILABLE) {
    printf("SKIP: no cubin tool here: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_kir_gpu_kernels_free(g, 4);
    skip();
  }
  if (s) printf("nvptx: %s\n", kiln_status_message(s));
  assert_null(s);
  assert_int_equal(st.unique, 3);
  assert_int_equal(st.compiled, 3);
  /* twice_b is twice_a's image under the same entry point */
  assert_int_equal(g[0].unique, 0);
  assert_int_equal(g[1].unique, 0);
  assert_int_equal(g[2].unique, 2);
  assert_string_equal(g[0].symbol, g[1].symbol);
  assert_string_not_equal(g[0].symbol, g[2].symbol);
  /* in parallel: the same cubins */
  kiln_kernel_cache_clear();
  assert_null(kiln_kir_compile_nvptx_batch(f->mods, 4, &no, &parallel, h, &st));
  assert_int_equal(st.compiled, 3);
  assert_int_equal(st.threads, 3);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(g[i].size, h[i].size);
    assert_memory_equal(g[i].image, h[i].image, g[i].size);
    assert_string_equal(g[i].symbol, h[i].symbol);
  }
  kiln_kir_gpu_kernels_free(h, 4);
  /* again: from the memory cache */
  assert_null(kiln_kir_compile_nvptx_batch(f->mods, 4, &no, &parallel, h, &st));
  assert_int_equal(st.memory_hits, 3);
  assert_int_equal(st.compiled, 0);
  for (int i = 0; i < 4; i++) assert_memory_equal(g[i].image, h[i].image, g[i].size);
  kiln_kir_gpu_kernels_free(h, 4);
  kiln_kir_gpu_kernels_free(g, 4);
}

/* Sets `path`'s modification time to `age` seconds ago. */
static void age_file(const char *path, int age) {
  struct timespec ts[2];
  clock_gettime(CLOCK_REALTIME, &ts[0]);
  ts[0].tv_sec -= age;
  ts[1] = ts[0];
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void test_disk_cache_evicts_least_recently_used_over_its_bound(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln_kcache_lru_XXXXXX";
  make_temp_dir(dir);
  char payload[1000];
  memset(payload, 7, sizeof(payload));
  /* Eight entries written "an hour apart", entry 0 the oldest. */
  for (int i = 0; i < 8; i++) {
    uint64_t key[2] = {1, (uint64_t)i};
    kiln_disk_cache_put(dir, "lru-test", key, payload, sizeof(payload));
    char *p = kiln_disk_cache_path(dir, "lru-test", key);
    age_file(p, 3600 * (10 - i));
    kiln_free(p);
  }
  /* Reading entry 0 makes it the most recently used. */
  uint64_t k0[2] = {1, 0};
  void *data = NULL;
  size_t len = 0;
  assert_true(kiln_disk_cache_get(dir, "lru-test", k0, &data, &len));
  kiln_free(data);
  /* A bound of about five entries: the next write evicts down to 3/4 of it. */
  int64_t evicted = kiln_disk_cache_counters("lru-test").evicted;
  int64_t entry = 1000 + 128;
  kiln_disk_cache_set_max_bytes(5 * entry);
  uint64_t k8[2] = {1, 8};
  kiln_disk_cache_put(dir, "lru-test", k8, payload, sizeof(payload));
  kiln_disk_cache_set_max_bytes(-1);
  char names[16][64];
  int n = list_dir(dir, "lru-test", names, 16);
  printf("9 entries of %lld bytes, bound %lld: %d left, %lld evicted\n", (long long)entry,
         (long long)(5 * entry), n,
         (long long)(kiln_disk_cache_counters("lru-test").evicted - evicted));
  assert_true(n * entry <= 5 * entry * 3 / 4 + entry);
  assert_int_equal(kiln_disk_cache_counters("lru-test").evicted - evicted, 9 - n);
  /* Survivors: the newest write, entry 0 (just read), and the most recently written others. */
  assert_true(kiln_disk_cache_get(dir, "lru-test", k8, &data, &len));
  kiln_free(data);
  assert_true(kiln_disk_cache_get(dir, "lru-test", k0, &data, &len));
  kiln_free(data);
  uint64_t k1[2] = {1, 1}, k7[2] = {1, 7};
  assert_false(kiln_disk_cache_get(dir, "lru-test", k1, &data, &len));
  assert_true(kiln_disk_cache_get(dir, "lru-test", k7, &data, &len));
  kiln_free(data);
  rm_rf(dir);
}

/* Which kernels the batch compiles on the host's small tier (kiln_kir_host_small_kernel): a
 * map over f32[4] (its applied computation inlined: the regions a KIR module keeps for ops
 * that passes replaced are not loops of the kernel) and an f32[8,8] elementwise chain are
 * small; a reduction of 4 rows of 8,192 (1,024 work items, each looping over its part of a
 * row) and an f32[16,16] elementwise chain (256 items) are not.
 * Both tiers give the right values; a pipeline set for the JIT, even the default one, applies
 * to every kernel, and such a JIT's kernels are cached apart. */
static const char kTiers[] =
    "double {\n"
    "  a = f32[] parameter(0)\n"
    "  ROOT d = f32[] add(a, a)\n"
    "}\n"
    "add {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "mapped {\n"
    "  x = f32[4] parameter(0)\n"
    "  ROOT m = f32[4] map(x), dimensions={0}, to_apply=double\n"
    "}\n"
    "small_chain {\n"
    "  p = f32[8,8] parameter(0)\n"
    "  t = f32[8,8] tanh(p)\n"
    "  ROOT e = f32[8,8] multiply(t, p)\n"
    "}\n"
    "row_sum {\n"
    "  p = f32[4,8192] parameter(0)\n"
    "  z = f32[] constant(0)\n"
    "  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add\n"
    "}\n"
    "ENTRY big_chain {\n"
    "  p = f32[16,16] parameter(0)\n"
    "  t = f32[16,16] tanh(p)\n"
    "  ROOT e = f32[16,16] multiply(t, p)\n"
    "}\n";

static void test_small_straight_line_kernels_take_the_small_tier(void **state) {
  (void)state;
  kiln_kernel_cache_clear();
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_computations(kTiers, sizeof(kTiers) - 1, NULL, &m));
  static const char *const names[4] = {"mapped", "small_chain", "row_sum", "big_chain"};
  static const bool small[4] = {true, true, false, false};
  kiln_codegen_kernel_t k[4];
  const kiln_kir_module_t *mods[4];
  for (int i = 0; i < 4; i++) {
    const kiln_hlo_computation_t *c = NULL;
    for (size_t j = 0; j < m->computations.len; j++)
      if (!strcmp(m->computations.data[j]->name, names[i])) c = m->computations.data[j];
    assert_non_null(c);
    kiln_codegen_compile_options_t o = {0};
    o.kernel_name = names[i];
    o.dump_dir = "";
    o.host_target = true;
    assert_null(kiln_codegen_kernel_emit(c, &o, &k[i]));
    mods[i] = k[i].kir;
    assert_int_equal(kiln_kir_host_small_kernel(mods[i]), small[i]);
  }
  float *x = kiln_malloc(4 * 8192 * sizeof(float));
  float *y = kiln_malloc(16 * 16 * sizeof(float));
  for (int i = 0; i < 4 * 8192; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  static const char *const pipelines[2] = {NULL, KILN_HOST_JIT_DEFAULT_PIPELINE};
  for (int p = 0; p < 2; p++) {
    kiln_host_jit_t *jit = NULL;
    kiln_host_jit_options_t jo = {0};
    jo.dump_dir = "";
    jo.pipeline = pipelines[p];
    assert_null(kiln_host_jit_create(&jo, &jit));
    kiln_kir_batch_options_t bo = {NULL, 2, true};
    kiln_kir_host_kernel_t out[4];
    kiln_kir_batch_stats_t st;
    assert_null(kiln_kir_compile_host_batch(mods, 4, jit, &bo, out, &st));
    /* No unwind table on either tier (kernels are nounwind): nothing for the loader to
     * register with libgcc. */
    for (int i = 0; i < 4; i++) {
      assert_non_null(out[i].object);
      assert_null(memmem(out[i].object, out[i].object_size, ".eh_frame", 9));
    }
    assert_int_equal(st.compiled, 4); /* the second JIT's kernels are not the first's */
    assert_int_equal(st.small_tier, p == 0 ? 2 : 0);
    assert_int_equal(st.small_tier_kernels, p == 0 ? 2 : 0);
    assert_int_equal(kiln_host_jit_small_tier(jit), p == 0);
    /* Again into a JIT like it, small_chain given twice: every kernel from the memory cache,
     * none compiled, and each module still counts with the tier its code was compiled on. */
    kiln_host_jit_t *again = NULL;
    assert_null(kiln_host_jit_create(&jo, &again));
    const kiln_kir_module_t *twice[5] = {mods[0], mods[1], mods[2], mods[3], mods[1]};
    kiln_kir_host_kernel_t out2[5];
    kiln_kir_batch_stats_t st2;
    assert_null(kiln_kir_compile_host_batch(twice, 5, again, NULL, out2, &st2));
    assert_int_equal(st2.memory_hits, 4);
    assert_int_equal(st2.compiled, 0);
    assert_int_equal(st2.small_tier, 0);
    assert_int_equal(st2.small_tier_kernels, p == 0 ? 3 : 0);
    kiln_host_jit_destroy(again);
    void *args[2] = {x, y};
    assert_null(kiln_kir_host_kernel_run(&out[0], NULL, args));
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], 2.0f * x[i], 0);
    for (int c = 1; c < 4; c += 2) { /* the two elementwise chains */
      assert_null(kiln_kir_host_kernel_run(&out[c], NULL, args));
      int n = c == 1 ? 8 * 8 : 16 * 16;
      for (int i = 0; i < n; i++) assert_float_equal(y[i], tanh(x[i]) * x[i], 1e-6);
    }
    assert_null(kiln_kir_host_kernel_run(&out[2], NULL, args));
    for (int r = 0; r < 4; r++) {
      double want = 0;
      for (int c = 0; c < 8192; c++) want += x[r * 8192 + c];
      assert_float_equal(y[r], want, 1e-3);
    }
    kiln_kir_host_kernels_free(out, 4);
    kiln_host_jit_destroy(jit);
  }
  kiln_free(x);
  kiln_free(y);
  for (int i = 0; i < 4; i++) kiln_codegen_kernel_free(&k[i]);
  kiln_hlo_module_destroy(m);
  /* The whole-executable cache's target id tells the two apart as well. */
  kiln_host_jit_options_t unset = {0}, set = {0};
  set.pipeline = KILN_HOST_JIT_DEFAULT_PIPELINE;
  kiln_strbuf_t a = {0}, b = {0};
  kiln_host_jit_target_id(&unset, &a);
  kiln_host_jit_target_id(&set, &b);
  assert_string_not_equal(kiln_strbuf_cstr(&a), kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&a);
  kiln_strbuf_free(&b);
}

/* A chain of 24 rounds, each reading both elements of the one before (y'[i] = y[i] ^
 * (y[1-i] << 13), as a threefry round reads both halves of its state), compiles on the small
 * tier, and its code computes each value once: the elemental code is one function per
 * instruction read at another index, so without inlining and common subexpressions a round
 * would call the one before twice, 2^24 calls per element. The optimized IR holds no call
 * (but LLVM's intrinsics) and two xors per round at most. */
static void test_deep_shared_chains_take_the_small_tier_and_compute_each_value_once(void **state) {
  (void)state;
  enum { ROUNDS = 24 };
  kiln_strbuf_t t = {0};
  kiln_strbuf_printf(&t,
                     "deep {\n  y0 = u32[2] parameter(0)\n  c = u32[] constant(13)\n"
                     "  cb = u32[2] broadcast(c), dimensions={}\n");
  for (int r = 1; r <= ROUNDS; r++)
    kiln_strbuf_printf(&t,
                       "  v%d = u32[2] reverse(y%d), dimensions={0}\n"
                       "  s%d = u32[2] shift-left(v%d, cb)\n  %sy%d = u32[2] xor(y%d, s%d)\n",
                       r, r - 1, r, r, r == ROUNDS ? "ROOT " : "", r, r - 1, r);
  kiln_strbuf_printf(&t, "}\n");
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_computations(kiln_strbuf_cstr(&t), t.len, NULL, &m));
  kiln_strbuf_free(&t);
  kiln_codegen_compile_options_t o = {0};
  o.kernel_name = "deep";
  o.dump_dir = "";
  o.host_target = true;
  kiln_codegen_kernel_t k;
  assert_null(kiln_codegen_kernel_emit(m->computations.data[0], &o, &k));
  assert_true(kiln_kir_host_small_kernel(k.kir));
  kiln_kernel_cache_clear();
  char dir[] = "/tmp/kiln_test_deepXXXXXX";
  make_temp_dir(dir);
  kiln_host_jit_t *jit = NULL;
  kiln_host_jit_options_t jo = {0};
  jo.dump_dir = dir;
  assert_null(kiln_host_jit_create(&jo, &jit));
  const kiln_kir_module_t *mods[1] = {k.kir};
  kiln_kir_host_kernel_t out[1];
  kiln_kir_batch_stats_t st;
  assert_null(kiln_kir_compile_host_batch(mods, 1, jit, NULL, out, &st));
  assert_int_equal(st.small_tier_kernels, 1);
  /* the optimized IR */
  char *ir = NULL;
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (!strstr(e->d_name, ".92-llvm-opt.ll")) continue;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    kiln_strbuf_t b = {0};
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) kiln_strbuf_append_n(&b, buf, n);
    fclose(f);
    ir = kiln_strbuf_take(&b);
  }
  closedir(d);
  assert_non_null(ir);
  int xors = 0, calls = 0;
  for (const char *p = ir; (p = strstr(p, " = xor ")); p++) xors++;
  for (const char *p = ir; (p = strstr(p, " call ")); p++) /* LLVM's intrinsics aside */
    calls += strncmp(p, " call void @llvm.", 17) != 0;
  if (calls || xors > 2 * ROUNDS + 2) fail_msg("%d calls, %d xors:\n%s", calls, xors, ir);
  kiln_free(ir);
  /* and the values */
  uint32_t x[2] = {0x12345678u, 0x9abcdef0u}, y[2] = {0, 0};
  void *args[2] = {x, y};
  assert_null(kiln_kir_host_kernel_run(&out[0], NULL, args));
  uint32_t want[2] = {x[0], x[1]};
  for (int r = 0; r < ROUNDS; r++) {
    const uint32_t a = want[0] ^ (want[1] << 13), b = want[1] ^ (want[0] << 13);
    want[0] = a, want[1] = b;
  }
  assert_int_equal(y[0], want[0]);
  assert_int_equal(y[1], want[1]);
  kiln_kir_host_kernels_free(out, 1);
  kiln_host_jit_destroy(jit);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
  rm_rf(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identical_kernels_compile_once_and_run_right),
      cmocka_unit_test(test_parallel_compilation_equals_serial),
      cmocka_unit_test(test_disk_cache_hits_and_rebuilds_corrupt_entries),
      cmocka_unit_test(test_cache_key_includes_the_pipeline),
      cmocka_unit_test(test_cuda_kernels_compile_once_in_parallel_and_cache),
      cmocka_unit_test(test_disk_cache_evicts_least_recently_used_over_its_bound),
      cmocka_unit_test(test_small_straight_line_kernels_take_the_small_tier),
      cmocka_unit_test(test_deep_shared_chains_take_the_small_tier_and_compute_each_value_once),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
