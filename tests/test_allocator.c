/* The caching device allocator (runtime/allocator.h): splitting, coalescing, best fit,
 * alignment, region growth, statistics, exhaustion, the pass-through mode, and the
 * device-level contract that repeated executes of a module make no raw allocation after the
 * first (counted with the allocator's raw-call statistics; KILN_ALLOCATOR=plain counts one
 * per output per run, so the count can fail). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/thunks/compile.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/executable.h"
#include "runtime/host/host_device.h"
#include "runtime/runtime_options.h"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

#define ASSERT_OK(expr)                                           \
  do {                                                            \
    kiln_status s__ = (expr);                                     \
    if (s__) fail_msg("%s: %s", #expr, kiln_status_message(s__)); \
  } while (0)

/* A raw allocator over a fake address space (addresses are never dereferenced) holding at
 * most `cap` bytes; blocks are placed with gaps so regions are never adjacent. */
typedef struct fake_raw {
  uint64_t next;
  size_t cap, held;
  int allocs, frees;
  uint64_t addr[64];
  size_t size[64];
} fake_raw_t;

static kiln_status fake_alloc(void *ctx, size_t size, uint64_t *out) {
  fake_raw_t *f = ctx;
  f->allocs++;
  if (f->held + size > f->cap)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "fake device: out of memory");
  for (int i = 0; i < 64; i++)
    if (!f->addr[i]) {
      f->addr[i] = f->next;
      f->size[i] = size;
      f->held += size;
      *out = f->next;
      f->next += (size + 2 * MIB) & ~(MIB - 1);
      return NULL;
    }
  return KILN_ERR_INTERNAL("fake device: too many blocks");
}

static void fake_free(void *ctx, uint64_t p) {
  fake_raw_t *f = ctx;
  f->frees++;
  for (int i = 0; i < 64; i++)
    if (f->addr[i] == p) {
      f->held -= f->size[i];
      f->addr[i] = 0;
      return;
    }
  fail_msg("fake device: free of 0x%llx, which it did not allocate", (unsigned long long)p);
}

static kiln_device_allocator_t *make(fake_raw_t *f, size_t cap, bool caching, size_t limit) {
  memset(f, 0, sizeof(*f));
  f->next = 1ull << 32;
  f->cap = cap;
  kiln_device_allocator_raw_t raw = {.alloc = fake_alloc, .free = fake_free, .ctx = f};
  kiln_device_allocator_options_t o = {
      .name = "test", .caching = caching, .alignment = 256, .initial_region = MIB, .limit = limit};
  kiln_device_allocator_t *a = NULL;
  ASSERT_OK(kiln_device_allocator_create(&raw, &o, &a));
  return a;
}

static uint64_t alloc_ok(kiln_device_allocator_t *a, size_t n) {
  uint64_t p = 0;
  ASSERT_OK(kiln_device_allocator_alloc(a, n, &p));
  assert_true(p != 0);
  return p;
}

static kiln_device_allocator_stats_t stats(kiln_device_allocator_t *a) {
  kiln_device_allocator_stats_t s;
  kiln_device_allocator_get_stats(a, &s);
  return s;
}

static void test_small_allocations_split_one_region_aligned(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 64 * MIB, true, 0);
  uint64_t p = alloc_ok(a, 1000), q = alloc_ok(a, 3000), r = alloc_ok(a, 1);
  assert_int_equal(f.allocs, 1);
  assert_int_equal(p % 256, 0);
  assert_int_equal(q, p + 1024); /* 1000 rounded to 256 */
  assert_int_equal(r, q + 3072);
  kiln_device_allocator_stats_t s = stats(a);
  assert_int_equal(s.bytes_in_use, 1024 + 3072 + 256);
  assert_int_equal(s.pool_bytes, MIB);
  assert_int_equal(s.num_allocs, 3);
  assert_int_equal(s.num_regions, 1);
  assert_int_equal(s.largest_alloc_size, 3072);
  assert_int_equal(s.largest_free_block, MIB - 1024 - 3072 - 256);
  kiln_device_allocator_destroy(a);
  assert_int_equal(f.frees, 1);
  assert_int_equal(f.held, 0);
}

static void test_freed_neighbours_coalesce_into_one_block(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 64 * MIB, true, 0);
  uint64_t x = alloc_ok(a, 4096), y = alloc_ok(a, 4096), z = alloc_ok(a, 4096);
  kiln_device_allocator_free(a, x);
  kiln_device_allocator_free(a, z); /* merges with the region's free tail */
  assert_int_equal(stats(a).largest_free_block, MIB - 2 * 4096);
  kiln_device_allocator_free(a, y); /* merges both sides: the whole region */
  kiln_device_allocator_stats_t s = stats(a);
  assert_int_equal(s.largest_free_block, MIB);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.peak_bytes_in_use, 3 * 4096);
  /* The whole region is one chunk again: a region-sized request fits without growing. */
  assert_int_equal(alloc_ok(a, MIB), x);
  assert_int_equal(f.allocs, 1);
  kiln_device_allocator_destroy(a);
}

static void test_best_fit_takes_the_smallest_hole_that_fits(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 64 * MIB, true, 0);
  uint64_t big = alloc_ok(a, 8192);
  alloc_ok(a, 256);
  uint64_t small = alloc_ok(a, 4096);
  alloc_ok(a, 256);
  kiln_device_allocator_free(a, big);
  kiln_device_allocator_free(a, small);
  /* The 8 KiB hole comes first in the address order; best fit skips it. */
  assert_int_equal(alloc_ok(a, 4000), small);
  assert_int_equal(alloc_ok(a, 8000), big);
  assert_int_equal(f.allocs, 1);
  kiln_device_allocator_destroy(a);
}

static void test_regions_grow_on_demand_and_double(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 64 * MIB, true, 0);
  alloc_ok(a, 768 * KIB);
  alloc_ok(a, 512 * KIB); /* does not fit the first region's rest: a second, of 2 MiB */
  assert_int_equal(f.allocs, 2);
  assert_int_equal(stats(a).pool_bytes, 3 * MIB);
  uint64_t huge = alloc_ok(a, 5 * MIB); /* larger than the next step: a region of its size */
  assert_int_equal(f.allocs, 3);
  assert_int_equal(stats(a).pool_bytes, 8 * MIB);
  kiln_device_allocator_free(a, huge);
  kiln_device_allocator_trim(a); /* the wholly free region goes back */
  assert_int_equal(f.frees, 1);
  assert_int_equal(stats(a).pool_bytes, 3 * MIB);
  assert_int_equal(stats(a).num_regions, 2);
  kiln_device_allocator_destroy(a);
  assert_int_equal(f.held, 0);
}

static void test_exhaustion_is_resource_exhausted_and_recovers(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 4 * MIB, true, 0);
  uint64_t p = alloc_ok(a, 3 * MIB);
  uint64_t q = 0;
  kiln_status s = kiln_device_allocator_alloc(a, 3 * MIB, &q);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(kiln_status_message(s), "device memory exhausted on test"));
  assert_non_null(strstr(kiln_status_message(s), "3145728 in use"));
  kiln_status_free(s);
  assert_int_equal(q, 0);
  assert_int_equal(stats(a).bytes_in_use, 3 * MIB);
  kiln_device_allocator_free(a, p);
  assert_int_equal(alloc_ok(a, 3 * MIB), p); /* the freed chunk, no raw call */
  kiln_device_allocator_destroy(a);
}

static void test_a_failing_raw_allocation_releases_free_regions_first(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 4 * MIB, true, 0);
  uint64_t p = alloc_ok(a, MIB), q = alloc_ok(a, 2 * MIB);
  kiln_device_allocator_free(a, p);
  kiln_device_allocator_free(a, q);
  /* 3 MiB held in two free regions; 3.5 MiB more does not fit the device until they go. */
  alloc_ok(a, 3 * MIB + 512 * KIB);
  assert_int_equal(f.frees, 2);
  assert_int_equal(stats(a).num_regions, 1);
  kiln_device_allocator_destroy(a);
}

static void test_the_byte_limit_bounds_the_pool(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 64 * MIB, true, 2 * MIB);
  uint64_t p = 0;
  kiln_status s = kiln_device_allocator_alloc(a, 3 * MIB, &p);
  assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(kiln_status_message(s), "limit of 2097152"));
  kiln_status_free(s);
  assert_int_equal(f.allocs, 0);
  alloc_ok(a, MIB);
  alloc_ok(a, 512 * KIB); /* a 2 MiB region would pass the limit: one of the request */
  alloc_ok(a, 512 * KIB);
  assert_int_equal(stats(a).pool_bytes, 2 * MIB);
  assert_int_equal(stats(a).bytes_limit, 2 * MIB);
  s = kiln_device_allocator_alloc(a, 1, &p);
  assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
  kiln_status_free(s);
  kiln_device_allocator_destroy(a);
}

static void test_plain_mode_passes_every_call_through(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 64 * MIB, false, 0);
  uint64_t p = alloc_ok(a, 100), q = alloc_ok(a, 5000);
  assert_int_equal(f.allocs, 2);
  kiln_device_allocator_stats_t s = stats(a);
  assert_int_equal(s.bytes_in_use, 256 + 5120);
  assert_int_equal(s.pool_bytes, 256 + 5120);
  assert_int_equal(s.largest_free_block, 0);
  kiln_device_allocator_free(a, p);
  assert_int_equal(f.frees, 1);
  kiln_device_allocator_destroy(a); /* q goes back with it */
  (void)q;
  assert_int_equal(f.frees, 2);
  assert_int_equal(f.held, 0);
}

static void test_unknown_and_double_frees_are_ignored(void **state) {
  (void)state;
  fake_raw_t f;
  kiln_device_allocator_t *a = make(&f, 64 * MIB, true, 0);
  uint64_t p = alloc_ok(a, 1024);
  kiln_device_allocator_free(a, p + 256);
  kiln_device_allocator_free(a, p);
  kiln_device_allocator_free(a, p);
  kiln_device_allocator_stats_t s = stats(a);
  assert_int_equal(s.bytes_in_use, 0);
  assert_int_equal(s.largest_free_block, MIB);
  kiln_device_allocator_destroy(a);
}

/* ---- the host device: executes reuse the pool ---- */

static const char kModule[] =
    "HloModule steady\n"
    "ENTRY e {\n"
    "  p = f32[65536] parameter(0)\n"
    "  x = f32[65536] exponential(p)\n"
    "  n = f32[65536] negate(p)\n"
    "  ROOT t = (f32[65536], f32[65536]) tuple(x, n)\n"
    "}\n";

/* Runs the module `runs` times on a new host device; returns the raw allocations counted
 * after the first run and after the last, and checks the outputs each time. */
static void count_raw_allocs(int runs, int64_t *after_first, int64_t *after_last) {
  kiln_device_t *dev = NULL;
  ASSERT_OK(kiln_host_device_create(2, &dev));
  kiln_hlo_module_t *m = NULL;
  ASSERT_OK(kiln_hlo_parse_module(kModule, strlen(kModule), NULL, &m));
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  kiln_executable_desc_t *d = NULL;
  ASSERT_OK(kiln_compile_module(m, &co, &d, NULL));
  kiln_executable_t *e = NULL;
  ASSERT_OK(kiln_executable_load(dev, d, &e));
  kiln_stream_t *stream = NULL;
  ASSERT_OK(kiln_stream_create(dev, &stream));
  enum { N = 65536 };
  float *x = kiln_malloc(N * 4), *y = kiln_malloc(N * 4);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 17) * 0.25f;
  kiln_devptr_t px = 0;
  ASSERT_OK(kiln_device_mem_alloc(dev, N * 4, &px));
  ASSERT_OK(kiln_stream_memcpy_h2d(stream, px, x, N * 4));
  uint64_t size = N * 4;
  for (int r = 0; r < runs; r++) {
    kiln_device_buffer_t *out[2] = {0};
    ASSERT_OK(kiln_executable_run(e, stream, &px, &size, 1, out));
    ASSERT_OK(kiln_stream_memcpy_d2h(stream, y, out[1]->ptr, N * 4));
    ASSERT_OK(kiln_stream_synchronize(stream));
    for (int i = 0; i < N; i += 997) assert_true(y[i] == -x[i]);
    kiln_device_buffer_destroy(out[0]);
    kiln_device_buffer_destroy(out[1]);
    kiln_device_allocator_stats_t s;
    kiln_device_memory_stats(dev, &s);
    if (r == 0) *after_first = s.raw_allocs;
    *after_last = s.raw_allocs;
  }
  kiln_device_mem_free(dev, px);
  kiln_free(x);
  kiln_free(y);
  kiln_stream_destroy(stream);
  kiln_executable_destroy(e);
  kiln_hlo_module_destroy(m);
  kiln_device_destroy(dev);
}

static void test_repeated_executes_make_no_raw_allocation_after_the_first(void **state) {
  (void)state;
  int64_t first = 0, last = 0;
  kiln_runtime_options_set(NULL);
  count_raw_allocs(6, &first, &last);
  assert_true(first > 0);
  assert_int_equal(last, first);
  /* The same runs without the pool: two outputs allocated from the device per run. */
  kiln_runtime_options_set(&(kiln_runtime_options_t){.plain_allocator = true});
  count_raw_allocs(6, &first, &last);
  kiln_runtime_options_set(NULL);
  assert_true(last >= first + 5 * 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_allocations_split_one_region_aligned),
      cmocka_unit_test(test_freed_neighbours_coalesce_into_one_block),
      cmocka_unit_test(test_best_fit_takes_the_smallest_hole_that_fits),
      cmocka_unit_test(test_regions_grow_on_demand_and_double),
      cmocka_unit_test(test_exhaustion_is_resource_exhausted_and_recovers),
      cmocka_unit_test(test_a_failing_raw_allocation_releases_free_regions_first),
      cmocka_unit_test(test_the_byte_limit_bounds_the_pool),
      cmocka_unit_test(test_plain_mode_passes_every_call_through),
      cmocka_unit_test(test_unknown_and_double_frees_are_ignored),
      cmocka_unit_test(test_repeated_executes_make_no_raw_allocation_after_the_first),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
