/* The host device and the thunks on it: memory, in-order streams, events, modules, gemm
 * (CBLAS and the C kernel against a naive reference), every thunk kind, and command buffers
 * (record, replay, patch only the moved commands, disable switch, conversion of runs, a
 * command-buffer compatible custom call recorded between kernels). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "status_test_util.h"

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "runtime/buffer.h"
#include "runtime/command_buffer.h"
#include "runtime/command_buffer_thunk.h"
#include "runtime/device.h"
#include "runtime/host/host_device.h"
#include "runtime/runtime_options.h"
#include "runtime/thunk.h"

#define BS 64 /* elements per block of the test kernels */

static void k_add_one(void **args, int64_t b, int64_t e) {
  const float *in = args[0];
  float *out = args[1];
  for (int64_t i = b * BS; i < e * BS; i++) out[i] = in[i] + 1.0f;
}

static void k_scale2(void **args, int64_t b, int64_t e) {
  const float *in = args[0];
  float *out = args[1];
  for (int64_t i = b * BS; i < e * BS; i++) out[i] = in[i] * 2.0f;
}

/* args[0]: int32 counter; args[1]: pred = counter < args[2] (a scalar passed by value). */
static void k_counter_lt(void **args, int64_t b, int64_t e) {
  const int32_t *c = args[0];
  uint8_t *pred = args[1];
  int64_t limit = (int64_t)(intptr_t)args[2];
  if (b == 0) *pred = c[0] < limit;
}

static void k_counter_inc(void **args, int64_t b, int64_t e) {
  int32_t *c = args[0];
  if (b == 0) c[0]++;
}

static void k_slow_fill(void **args, int64_t b, int64_t e) {
  float *out = args[0];
  for (int64_t i = b * BS; i < e * BS; i++) {
    volatile float x = 0;
    for (int r = 0; r < 200; r++) x += 1.0f;
    out[i] = x;
  }
}

/* args[0]: float, 1 once g_flag was seen set, 0 when it stayed clear for 20 s. */
static atomic_int g_flag;
static void k_wait_flag(void **args, int64_t b, int64_t e) {
  (void)e;
  float *out = args[0];
  if (b != 0) return;
  out[0] = 0;
  for (int i = 0; i < 20000 && !atomic_load(&g_flag); i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  out[0] = atomic_load(&g_flag) ? 1.0f : 0.0f;
}

static const char *const kNames[] = {"add_one",     "scale2",    "counter_lt",
                                     "counter_inc", "slow_fill", "wait_flag"};
static void *const kFns[] = {(void *)k_add_one,     (void *)k_scale2,    (void *)k_counter_lt,
                             (void *)k_counter_inc, (void *)k_slow_fill, (void *)k_wait_flag};

typedef struct fixture {
  kiln_device_t *dev;
  kiln_stream_t *stream;
  kiln_device_module_t *module;
} fixture_t;

/* A host device of its own (so a fresh command-buffer cache, configured from the environment
 * as it is now), a stream, and the test kernels loaded. */
static fixture_t fresh_fixture(void) {
  fixture_t g;
  ASSERT_OK(kiln_host_device_create(2, &g.dev));
  ASSERT_OK(kiln_stream_create(g.dev, &g.stream));
  kiln_module_image_t img = {.names = kNames, .functions = kFns, .num_functions = 6};
  ASSERT_OK(kiln_device_module_load(g.dev, &img, &g.module));
  return g;
}

static void fixture_release(fixture_t *g) {
  kiln_stream_destroy(g->stream);
  kiln_device_module_unload(g->module);
  kiln_device_destroy(g->dev);
}

static int setup(void **state) {
  fixture_t *f = kiln_calloc(1, sizeof(*f));
  *f = fresh_fixture();
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_release(*state);
  kiln_free(*state);
  return 0;
}

static const kiln_kernel_t *kernel(fixture_t *f, const char *name) {
  const kiln_kernel_t *k = NULL;
  ASSERT_OK(kiln_device_module_get_kernel(f->module, name, &k));
  return k;
}

static kiln_launch_dims_t dims1(uint32_t blocks) {
  kiln_launch_dims_t d = {{blocks, 1, 1}, {BS, 1, 1}, 0};
  return d;
}

/* ---- device ---------------------------------------------------------------------------- */

static void test_host_copy_kernel_copy_back_round_trips(void **state) {
  fixture_t *f = *state;
  enum { N = 8 * BS };
  float in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = (float)i;
  kiln_devptr_t a, b;
  ASSERT_OK(kiln_device_mem_alloc(f->dev, sizeof(in), &a));
  ASSERT_OK(kiln_device_mem_alloc(f->dev, sizeof(in), &b));
  ASSERT_OK(kiln_stream_memcpy_h2d(f->stream, a, in, sizeof(in)));
  uint64_t args[2] = {a, b};
  kiln_launch_dims_t d = dims1(N / BS);
  ASSERT_OK(kiln_stream_launch(f->stream, kernel(f, "add_one"), &d, args, 2));
  ASSERT_OK(kiln_stream_memcpy_d2h(f->stream, out, b, sizeof(out)));
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  for (int i = 0; i < N; i++) assert_true(out[i] == (float)i + 1.0f);
  kiln_device_mem_free(f->dev, a);
  kiln_device_mem_free(f->dev, b);
}

/* Buffers of 2 MiB and more start on a 2 MiB boundary (advised as transparent huge pages, so
 * a fresh one is faulted in 2 MiB at a time); smaller ones on 64 bytes. Each is usable to its
 * last byte. (Whether the kernel backs them with huge pages is its choice: not asserted.) */
static void test_host_large_buffers_are_aligned_for_huge_pages(void **state) {
  fixture_t *f = *state;
  static const size_t sizes[] = {64, 100, (2u << 20) - 64, 2u << 20, (2u << 20) + 1, 5u << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    kiln_devptr_t p;
    ASSERT_OK(kiln_device_mem_alloc(f->dev, sizes[i], &p));
    const uint64_t align = sizes[i] >= (2u << 20) ? (2u << 20) : 64;
    assert_int_equal(p % align, 0);
    memset((void *)(uintptr_t)p, 0x5a, sizes[i]);
    assert_int_equal(((unsigned char *)(uintptr_t)p)[sizes[i] - 1], 0x5a);
    kiln_device_mem_free(f->dev, p);
  }
}

static void test_host_stream_runs_operations_in_submission_order(void **state) {
  fixture_t *f = *state;
  enum { N = 4 * BS };
  kiln_devptr_t a, b;
  ASSERT_OK(kiln_device_mem_alloc(f->dev, N * 4, &a));
  ASSERT_OK(kiln_device_mem_alloc(f->dev, N * 4, &b));
  float one = 1.0f;
  uint32_t bits;
  memcpy(&bits, &one, 4);
  kiln_launch_dims_t d = dims1(N / BS);
  /* memset a=1 -> b=a*2 -> a=b+1 -> b=a*2: (1*2+1)*2 = 6, only in this order. */
  ASSERT_OK(kiln_stream_memset(f->stream, a, bits, 4, N));
  uint64_t ab[2] = {a, b}, ba[2] = {b, a};
  for (int rep = 0; rep < 50; rep++) {
    ASSERT_OK(kiln_stream_memset(f->stream, a, bits, 4, N));
    ASSERT_OK(kiln_stream_launch(f->stream, kernel(f, "scale2"), &d, ab, 2));
    ASSERT_OK(kiln_stream_launch(f->stream, kernel(f, "add_one"), &d, ba, 2));
    ASSERT_OK(kiln_stream_launch(f->stream, kernel(f, "scale2"), &d, ab, 2));
  }
  float out[N];
  ASSERT_OK(kiln_stream_memcpy_d2h(f->stream, out, b, sizeof(out)));
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  for (int i = 0; i < N; i++) assert_true(out[i] == 6.0f);
  kiln_device_mem_free(f->dev, a);
  kiln_device_mem_free(f->dev, b);
}

/* Between kiln_stream_overlap_begin and _end a launch on an idle stream is queued to the
 * stream's thread, so the caller goes on at once: here it sets the flag the kernel waits for
 * (a launch run on the calling thread would wait 20 s and write 0). */
static void test_host_stream_overlap_runs_work_on_the_streams_thread(void **state) {
  fixture_t *f = *state;
  kiln_devptr_t out;
  ASSERT_OK(kiln_device_mem_alloc(f->dev, sizeof(float), &out));
  kiln_launch_dims_t d = dims1(1);
  uint64_t args[1] = {out};
  atomic_store(&g_flag, 0);
  kiln_stream_overlap_begin(f->stream);
  ASSERT_OK(kiln_stream_launch(f->stream, kernel(f, "wait_flag"), &d, args, 1));
  atomic_store(&g_flag, 1);
  kiln_stream_overlap_end(f->stream);
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  float got = 0;
  ASSERT_OK(kiln_stream_memcpy_d2h(f->stream, &got, out, sizeof got));
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  assert_true(got == 1.0f);
  kiln_stream_overlap_end(f->stream); /* an unmatched end changes nothing */
  kiln_device_mem_free(f->dev, out);
}

static void test_host_memset_fills_1_2_and_4_byte_patterns(void **state) {
  fixture_t *f = *state;
  kiln_devptr_t a;
  ASSERT_OK(kiln_device_mem_alloc(f->dev, 64, &a));
  uint8_t out[64];
  ASSERT_OK(kiln_stream_memset(f->stream, a, 0xAB, 1, 64));
  ASSERT_OK(kiln_stream_memset(f->stream, a + 8, 0x1234, 2, 4));
  ASSERT_OK(kiln_stream_memset(f->stream, a + 16, 0xDEADBEEF, 4, 2));
  ASSERT_OK(kiln_stream_memcpy_d2h(f->stream, out, a, 64));
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  assert_int_equal(out[0], 0xAB);
  assert_int_equal(out[7], 0xAB);
  uint16_t h;
  memcpy(&h, out + 14, 2);
  assert_int_equal(h, 0x1234);
  uint32_t w;
  memcpy(&w, out + 20, 4);
  assert_int_equal(w, 0xDEADBEEF);
  assert_int_equal(out[24], 0xAB);
  assert_code(kiln_stream_memset(f->stream, a, 0, 3, 4), KILN_INVALID_ARGUMENT);
  kiln_device_mem_free(f->dev, a);
}

static void test_host_event_orders_work_across_streams(void **state) {
  fixture_t *f = *state;
  enum { N = 64 * BS };
  kiln_stream_t *other;
  ASSERT_OK(kiln_stream_create(f->dev, &other));
  kiln_event_t *ev;
  ASSERT_OK(kiln_event_create(f->dev, &ev));
  kiln_devptr_t a, b;
  ASSERT_OK(kiln_device_mem_alloc(f->dev, N * 4, &a));
  ASSERT_OK(kiln_device_mem_alloc(f->dev, N * 4, &b));
  ASSERT_OK(kiln_stream_memset(f->stream, a, 0, 4, N));
  uint64_t fa[1] = {a};
  kiln_launch_dims_t d = dims1(N / BS);
  ASSERT_OK(kiln_stream_launch(f->stream, kernel(f, "slow_fill"), &d, fa, 1)); /* a = 200 */
  ASSERT_OK(kiln_event_record(ev, f->stream));
  ASSERT_OK(kiln_stream_wait_event(other, ev));
  uint64_t ab[2] = {a, b};
  ASSERT_OK(kiln_stream_launch(other, kernel(f, "add_one"), &d, ab, 2)); /* b = a + 1 */
  float out[N];
  ASSERT_OK(kiln_stream_memcpy_d2h(other, out, b, sizeof(out)));
  ASSERT_OK(kiln_stream_synchronize(other));
  for (int i = 0; i < N; i++) assert_true(out[i] == 201.0f);
  ASSERT_OK(kiln_event_synchronize(ev));
  kiln_event_destroy(ev);
  kiln_stream_destroy(other);
  kiln_device_mem_free(f->dev, a);
  kiln_device_mem_free(f->dev, b);
}

static void test_host_bad_requests_are_errors_not_crashes(void **state) {
  fixture_t *f = *state;
  const kiln_kernel_t *k = NULL;
  kiln_status s = kiln_device_module_get_kernel(f->module, "no_such_kernel", &k);
  assert_non_null(strstr(kiln_status_message(s), "no_such_kernel"));
  assert_code(s, KILN_NOT_FOUND);
  assert_null(k);
  kiln_module_image_t empty = {0};
  kiln_device_module_t *m = NULL;
  assert_code(kiln_device_module_load(f->dev, &empty, &m), KILN_INVALID_ARGUMENT);
  assert_null(m);
  kiln_launch_dims_t zero = {{0, 1, 1}, {1, 1, 1}, 0};
  uint64_t args[1] = {0};
  assert_code(kiln_stream_launch(f->stream, kernel(f, "add_one"), &zero, args, 1),
              KILN_INVALID_ARGUMENT);
  assert_code(kiln_stream_launch(NULL, kernel(f, "add_one"), &zero, args, 1),
              KILN_INVALID_ARGUMENT);
  assert_code(kiln_stream_memcpy_d2d(f->stream, 0, 8, 4), KILN_INVALID_ARGUMENT);
  kiln_device_t *none = NULL;
  assert_code(kiln_device_create("tpu", &none), KILN_INVALID_ARGUMENT);
  assert_null(none);
}

/* ---- gemm ------------------------------------------------------------------------------ */

static double ref_at(const double *m, int64_t rows, int64_t cols, bool trans, int64_t i,
                     int64_t j) {
  /* element (i, j) of op(M), M stored row-major as rows x cols */
  return trans ? m[j * cols + i] : m[i * cols + j];
}

static void check_gemm(kiln_gemm_dtype_t dt, int64_t batch, int64_t m, int64_t n, int64_t k,
                       bool ta, bool tb, double alpha, double beta,
                       kiln_host_blas_choice_t choice) {
  int64_t na = batch * m * k, nb = batch * k * n, nc = batch * m * n;
  double *A = kiln_malloc((size_t)na * 8), *B = kiln_malloc((size_t)nb * 8),
         *C = kiln_malloc((size_t)nc * 8), *R = kiln_malloc((size_t)nc * 8);
  for (int64_t i = 0; i < na; i++) A[i] = (double)((i * 7) % 13) - 6;
  for (int64_t i = 0; i < nb; i++) B[i] = (double)((i * 5) % 11) - 5;
  for (int64_t i = 0; i < nc; i++) C[i] = (double)(i % 3);
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += ref_at(A + bi * m * k, ta ? k : m, ta ? m : k, ta, i, p) *
                 ref_at(B + bi * k * n, tb ? n : k, tb ? k : n, tb, p, j);
        R[bi * m * n + i * n + j] = alpha * acc + beta * C[bi * m * n + i * n + j];
      }
  kiln_gemm_desc_t g = {
      dt, batch, m, n, k, ta, tb, alpha, beta, KILN_GEMM_SAME, KILN_GEMM_EPILOGUE_NONE, 0};
  if (dt == KILN_GEMM_F64) {
    ASSERT_OK(kiln_host_gemm(&g, A, B, C, choice, NULL));
    for (int64_t i = 0; i < nc; i++) assert_true(C[i] == R[i]); /* small integers: exact */
  } else {
    float *a = kiln_malloc((size_t)na * 4), *b = kiln_malloc((size_t)nb * 4),
          *c = kiln_malloc((size_t)nc * 4);
    for (int64_t i = 0; i < na; i++) a[i] = (float)A[i];
    for (int64_t i = 0; i < nb; i++) b[i] = (float)B[i];
    for (int64_t i = 0; i < nc; i++) c[i] = (float)C[i];
    ASSERT_OK(kiln_host_gemm(&g, a, b, c, choice, NULL));
    for (int64_t i = 0; i < nc; i++) assert_true(c[i] == (float)R[i]);
    kiln_free(a);
    kiln_free(b);
    kiln_free(c);
  }
  kiln_free(A);
  kiln_free(B);
  kiln_free(C);
  kiln_free(R);
}

static void test_host_gemm_matches_reference_with_transposes_batches_and_beta(void **state) {
  (void)state;
  const char *tried = NULL;
  const char *lib = kiln_host_blas_library(&tried);
  printf("[  INFO    ] host CBLAS: %s (tried: %s)\n", lib ? lib : "none, C kernel", tried);
  for (int choice = 0; choice < 2; choice++)
    for (int t = 0; t < 4; t++) {
      check_gemm(KILN_GEMM_F32, 1, 7, 5, 3, t & 1, t & 2, 1.0, 0.0,
                 (kiln_host_blas_choice_t)choice);
      check_gemm(KILN_GEMM_F64, 3, 17, 9, 130, t & 1, t & 2, 2.0, 1.0,
                 (kiln_host_blas_choice_t)choice);
      check_gemm(KILN_GEMM_F32, 2, 33, 520, 11, t & 1, t & 2, -1.0, 0.5,
                 (kiln_host_blas_choice_t)choice);
    }
}

static void test_gemm_desc_rejects_bad_dimensions(void **state) {
  (void)state;
  kiln_gemm_desc_t g = {KILN_GEMM_F32,           1, 0, 4, 4, false, false, 1, 0, KILN_GEMM_SAME,
                        KILN_GEMM_EPILOGUE_NONE, 0};
  assert_code(kiln_gemm_desc_check(&g, NULL, NULL, NULL), KILN_INVALID_ARGUMENT);
  g.m = (int64_t)1 << 40;
  assert_code(kiln_gemm_desc_check(&g, NULL, NULL, NULL), KILN_INVALID_ARGUMENT);
  g.m = 3;
  g.dtype = (kiln_gemm_dtype_t)99;
  assert_code(kiln_gemm_desc_check(&g, NULL, NULL, NULL), KILN_INVALID_ARGUMENT);
  g.dtype = KILN_GEMM_F64;
  size_t a, b, c;
  ASSERT_OK(kiln_gemm_desc_check(&g, &a, &b, &c));
  assert_int_equal(a, 3 * 4 * 8);
  assert_int_equal(c, 3 * 4 * 8);
}

/* ---- thunks ------------------------------------------------------------------------------ */

/* Allocations: 0 = in (N floats), 1 = out (N floats), 2 = temp (4 KiB). */
#define N1 (4 * BS)

static void table_make(fixture_t *f, kiln_buffer_table_t *t) {
  ASSERT_OK(kiln_buffer_table_init(t, f->dev, 3));
  ASSERT_OK(kiln_buffer_table_allocate(t, 0, N1 * 4));
  ASSERT_OK(kiln_buffer_table_allocate(t, 1, N1 * 4));
  ASSERT_OK(kiln_buffer_table_allocate(t, 2, 4096));
}

static void prepare_init(fixture_t *f, kiln_thunk_seq_t *seq, const kiln_buffer_table_t *t) {
  kiln_thunk_prepare_params_t pp = {t->num, t->sizes};
  ASSERT_OK(kiln_thunk_seq_prepare(seq, &pp));
  kiln_thunk_init_params_t ip = {f->dev};
  ASSERT_OK(kiln_thunk_seq_initialize(seq, &ip));
}

static void fill_in(fixture_t *f, kiln_buffer_table_t *t) {
  float *in = (float *)(uintptr_t)t->bases[0];
  for (int i = 0; i < N1; i++) in[i] = (float)i;
}

static void test_thunks_kernel_copy_memset_gemm_run_in_sequence(void **state) {
  fixture_t *f = *state;
  kiln_buffer_table_t t;
  table_make(f, &t);
  fill_in(f, &t);
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_launch_dims_t d = dims1(N1 / BS);
  kiln_kernel_arg_t args[2] = {kiln_kernel_arg_slice(kiln_slice_make(0, 0, N1 * 4)),
                               kiln_kernel_arg_slice(kiln_slice_make(2, 0, N1 * 4))};
  kiln_thunk_seq_push(&seq,
                      kiln_thunk_kernel_create("fusion.1", f->module, "add_one", &d, args, 2));
  /* temp -> out, then zero the first 16 bytes of out */
  kiln_thunk_seq_push(&seq,
                      kiln_thunk_copy_create("copy.1", KILN_COPY_D2D, kiln_slice_make(2, 0, N1 * 4),
                                             kiln_slice_make(1, 0, N1 * 4), NULL, N1 * 4));
  kiln_thunk_seq_push(&seq, kiln_thunk_memset_create("zero.1", kiln_slice_make(1, 0, 16), 0, 4));
  /* gemm on the first 16 floats of in viewed as 4x4: temp[1024..] = in4x4 * in4x4 */
  kiln_gemm_desc_t g = {KILN_GEMM_F32,           1, 4, 4, 4, false, false, 1.0, 0.0, KILN_GEMM_SAME,
                        KILN_GEMM_EPILOGUE_NONE, 0};
  kiln_thunk_seq_push(
      &seq, kiln_thunk_gemm_create("dot.1", &g, kiln_slice_make(0, 0, 64),
                                   kiln_slice_make(0, 0, 64), kiln_slice_make(2, 1024, 64)));
  prepare_init(f, &seq, &t);
  kiln_thunk_exec_params_t ep = {
      .device = f->dev, .stream = f->stream, .buffers = &t, .state = NULL};
  ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  const float *out = (const float *)(uintptr_t)t.bases[1];
  for (int i = 0; i < 4; i++) assert_true(out[i] == 0.0f);
  for (int i = 4; i < N1; i++) assert_true(out[i] == (float)i + 1.0f);
  const float *c = (const float *)(uintptr_t)(t.bases[2] + 1024);
  /* row 1, col 2 of M*M with M[i][j] = 4i + j: sum_p (4 + p) * (4p + 2) */
  float expect = 0;
  for (int p = 0; p < 4; p++) expect += (float)(4 + p) * (float)(4 * p + 2);
  assert_true(c[1 * 4 + 2] == expect);
  kiln_strbuf_t dump = {0};
  kiln_thunk_seq_print(&dump, &seq, 0);
  assert_string_equal(
      kiln_strbuf_cstr(&dump),
      "kernel fusion.1 add_one grid=4x1x1 block=64x1x1 args=(a0+0:1024, a2+0:1024)\n"
      "copy copy.1 d2d 1024 bytes a2+0:1024 -> a1+0:1024\n"
      "memset zero.1 0x0 x4 a1+0:16\n"
      "gemm dot.1 f32 batch=1 m=4 n=4 k=4 a0+0:64 x a0+0:64 -> a2+1024:64\n");
  kiln_strbuf_free(&dump);
  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t);
}

static void test_thunk_prepare_rejects_slices_outside_their_allocation(void **state) {
  fixture_t *f = *state;
  kiln_buffer_table_t t;
  table_make(f, &t);
  kiln_thunk_prepare_params_t pp = {t.num, t.sizes};
  kiln_thunk_t *bad = kiln_thunk_memset_create("m", kiln_slice_make(2, 4000, 200), 0, 4);
  kiln_status s = kiln_thunk_prepare(bad, &pp);
  assert_non_null(strstr(kiln_status_message(s), "exceeds allocation 2"));
  assert_code(s, KILN_INVALID_ARGUMENT);
  kiln_thunk_destroy(bad);
  bad = kiln_thunk_copy_create("c", KILN_COPY_D2D, kiln_slice_make(7, 0, 4),
                               kiln_slice_make(0, 0, 4), NULL, 4);
  assert_code(kiln_thunk_prepare(bad, &pp), KILN_INVALID_ARGUMENT);
  kiln_thunk_destroy(bad);
  kiln_gemm_desc_t g = {KILN_GEMM_F32,           1, 8, 8, 8, false, false, 1, 0, KILN_GEMM_SAME,
                        KILN_GEMM_EPILOGUE_NONE, 0};
  bad = kiln_thunk_gemm_create("g", &g, kiln_slice_make(0, 0, 64), kiln_slice_make(0, 0, 256),
                               kiln_slice_make(2, 0, 256));
  assert_code(kiln_thunk_prepare(bad, &pp), KILN_INVALID_ARGUMENT); /* A needs 256 bytes */
  kiln_thunk_destroy(bad);
  /* Executing a kernel thunk that was never initialized is an error, not a NULL call. */
  kiln_launch_dims_t d = dims1(1);
  kiln_kernel_arg_t arg = kiln_kernel_arg_slice(kiln_slice_make(0, 0, 4));
  bad = kiln_thunk_kernel_create("k", f->module, "add_one", &d, &arg, 1);
  kiln_thunk_exec_params_t ep = {
      .device = f->dev, .stream = f->stream, .buffers = &t, .state = NULL};
  assert_code(kiln_thunk_execute(bad, &ep), KILN_FAILED_PRECONDITION);
  kiln_thunk_destroy(bad);
  /* A resolution past the table's end fails even without prepare. */
  kiln_devptr_t p;
  assert_code(kiln_buffer_table_resolve(&t, kiln_slice_make(1, N1 * 4 - 2, 4), &p),
              KILN_INVALID_ARGUMENT);
  kiln_buffer_table_free(&t);
}

static void test_while_thunk_reads_back_pred_and_counts_trips(void **state) {
  fixture_t *f = *state;
  kiln_buffer_table_t t;
  table_make(f, &t);
  memset((void *)(uintptr_t)t.bases[2], 0, 8); /* counter at temp+0, pred at temp+4 */
  kiln_launch_dims_t d = dims1(1);
  kiln_thunk_seq_t cond, body, seq;
  kiln_thunk_seq_init(&cond);
  kiln_thunk_seq_init(&body);
  kiln_thunk_seq_init(&seq);
  kiln_kernel_arg_t cargs[3] = {kiln_kernel_arg_slice(kiln_slice_make(2, 0, 4)),
                                kiln_kernel_arg_slice(kiln_slice_make(2, 4, 1)),
                                kiln_kernel_arg_scalar(5)};
  kiln_thunk_seq_push(&cond, kiln_thunk_kernel_create("lt", f->module, "counter_lt", &d, cargs, 3));
  kiln_kernel_arg_t bargs[1] = {kiln_kernel_arg_slice(kiln_slice_make(2, 0, 4))};
  kiln_thunk_seq_push(&body,
                      kiln_thunk_kernel_create("inc", f->module, "counter_inc", &d, bargs, 1));
  kiln_thunk_t *w = kiln_thunk_while_create("while.1", &cond, kiln_slice_make(2, 4, 1), &body, 0);
  assert_int_equal(cond.len, 0); /* taken over */
  kiln_thunk_seq_push(&seq, w);
  prepare_init(f, &seq, &t);
  kiln_thunk_exec_params_t ep = {
      .device = f->dev, .stream = f->stream, .buffers = &t, .state = NULL};
  ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  assert_int_equal(*(int32_t *)(uintptr_t)t.bases[2], 5);
  assert_int_equal(kiln_thunk_while_last_trip_count(w), 5);
  /* A bound on iterations turns a runaway loop into an error. */
  memset((void *)(uintptr_t)t.bases[2], 0, 8);
  kiln_thunk_while_set_max_iterations(w, 3);
  assert_code(kiln_thunk_seq_execute(&seq, &ep), KILN_OUT_OF_RANGE);
  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t);
}

static void test_conditional_thunk_picks_branch_by_index_and_pred(void **state) {
  fixture_t *f = *state;
  kiln_buffer_table_t t;
  table_make(f, &t);
  fill_in(f, &t);
  kiln_launch_dims_t d = dims1(N1 / BS);
  kiln_kernel_arg_t args[2] = {kiln_kernel_arg_slice(kiln_slice_make(0, 0, N1 * 4)),
                               kiln_kernel_arg_slice(kiln_slice_make(1, 0, N1 * 4))};
  kiln_thunk_seq_t br[3];
  for (int i = 0; i < 3; i++) kiln_thunk_seq_init(&br[i]);
  kiln_thunk_seq_push(&br[0], kiln_thunk_kernel_create("b0", f->module, "add_one", &d, args, 2));
  kiln_thunk_seq_push(&br[1], kiln_thunk_kernel_create("b1", f->module, "scale2", &d, args, 2));
  kiln_thunk_seq_push(&br[2], kiln_thunk_memset_create("b2", kiln_slice_make(1, 0, N1 * 4), 0, 4));
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_thunk_t *c = kiln_thunk_conditional_create("cond.1", kiln_slice_make(2, 0, 4), false, br, 3);
  kiln_thunk_seq_push(&seq, c);
  prepare_init(f, &seq, &t);
  kiln_thunk_exec_params_t ep = {
      .device = f->dev, .stream = f->stream, .buffers = &t, .state = NULL};
  int32_t *index = (int32_t *)(uintptr_t)t.bases[2];
  const float *out = (const float *)(uintptr_t)t.bases[1];
  const int32_t cases[] = {1, 0, 7, -1};
  const int expect[] = {1, 0, 2, 2}; /* out of range -> last branch */
  for (int i = 0; i < 4; i++) {
    *index = cases[i];
    ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
    ASSERT_OK(kiln_stream_synchronize(f->stream));
    assert_int_equal(kiln_thunk_conditional_last_branch(c), expect[i]);
    float want = expect[i] == 0 ? 11.0f : expect[i] == 1 ? 20.0f : 0.0f;
    assert_true(out[10] == want);
  }
  kiln_thunk_seq_free(&seq);
  /* A pred selects between two branches: true -> 0. */
  kiln_thunk_seq_init(&br[0]);
  kiln_thunk_seq_init(&br[1]);
  kiln_thunk_seq_push(&br[0], kiln_thunk_kernel_create("t", f->module, "add_one", &d, args, 2));
  kiln_thunk_seq_push(&br[1], kiln_thunk_kernel_create("f", f->module, "scale2", &d, args, 2));
  c = kiln_thunk_conditional_create("cond.2", kiln_slice_make(2, 0, 1), true, br, 2);
  kiln_thunk_seq_push(&seq, c);
  prepare_init(f, &seq, &t);
  *(uint8_t *)index = 0;
  ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
  ASSERT_OK(kiln_stream_synchronize(f->stream));
  assert_int_equal(kiln_thunk_conditional_last_branch(c), 1);
  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t);
}

typedef struct cc_record {
  int calls;
  kiln_devptr_t operand, result;
  int num_operands, num_results;
} cc_record_t;

static kiln_status record_custom_call(void *ctx, kiln_stream_t *stream, const kiln_devptr_t *ops,
                                      int no, const kiln_devptr_t *res, int nr) {
  cc_record_t *r = ctx;
  r->calls++;
  r->operand = ops[0];
  r->result = res[0];
  r->num_operands = no;
  r->num_results = nr;
  return NULL;
}

static void test_custom_call_thunk_passes_resolved_buffers(void **state) {
  fixture_t *f = *state;
  kiln_buffer_table_t t;
  table_make(f, &t);
  cc_record_t rec = {0};
  kiln_slice_t op = kiln_slice_make(0, 128, 64), res = kiln_slice_make(2, 256, 64);
  kiln_thunk_t *cc = kiln_thunk_custom_call_create("cc.1", "my_target", record_custom_call, &rec,
                                                   &op, 1, &res, 1, false);
  assert_false(kiln_thunk_is_convertible(cc));
  kiln_thunk_prepare_params_t pp = {t.num, t.sizes};
  ASSERT_OK(kiln_thunk_prepare(cc, &pp));
  kiln_thunk_exec_params_t ep = {
      .device = f->dev, .stream = f->stream, .buffers = &t, .state = NULL};
  ASSERT_OK(kiln_thunk_execute(cc, &ep));
  assert_int_equal(rec.calls, 1);
  assert_int_equal(rec.operand, t.bases[0] + 128);
  assert_int_equal(rec.result, t.bases[2] + 256);
  assert_int_equal(rec.num_operands, 1);
  kiln_thunk_destroy(cc);
  /* Without a handler the thunk says which target is missing. */
  cc = kiln_thunk_custom_call_create("cc.2", "unregistered", NULL, NULL, &op, 1, &res, 1, false);
  kiln_status s = kiln_thunk_prepare(cc, &pp);
  assert_non_null(strstr(kiln_status_message(s), "unregistered"));
  assert_code(s, KILN_UNIMPLEMENTED);
  kiln_thunk_destroy(cc);
  kiln_buffer_table_free(&t);
}

/* ---- command buffers --------------------------------------------------------------------- */

/* in -> add_one -> temp -> scale2 -> out, then out[0..3] = 0 and a d2d copy temp -> temp+2048. */
static kiln_thunk_t *make_cmdbuf(fixture_t *f) {
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_launch_dims_t d = dims1(N1 / BS);
  kiln_kernel_arg_t a1[2] = {kiln_kernel_arg_slice(kiln_slice_make(0, 0, N1 * 4)),
                             kiln_kernel_arg_slice(kiln_slice_make(2, 0, N1 * 4))};
  kiln_kernel_arg_t a2[2] = {kiln_kernel_arg_slice(kiln_slice_make(2, 0, N1 * 4)),
                             kiln_kernel_arg_slice(kiln_slice_make(1, 0, N1 * 4))};
  kiln_thunk_seq_push(&seq, kiln_thunk_kernel_create("k1", f->module, "add_one", &d, a1, 2));
  kiln_thunk_seq_push(&seq, kiln_thunk_kernel_create("k2", f->module, "scale2", &d, a2, 2));
  kiln_thunk_seq_push(&seq, kiln_thunk_memset_create("z", kiln_slice_make(1, 0, 16), 0, 4));
  kiln_thunk_seq_push(&seq, kiln_thunk_copy_create("c", KILN_COPY_D2D, kiln_slice_make(2, 0, 1024),
                                                   kiln_slice_make(2, 2048, 1024), NULL, 1024));
  kiln_thunk_t *cb = NULL;
  ASSERT_OK(kiln_command_buffer_thunk_create("cb", &seq, &cb));
  return cb;
}

static void check_cmdbuf_output(const kiln_buffer_table_t *t) {
  const float *out = (const float *)(uintptr_t)t->bases[1];
  for (int i = 0; i < 4; i++) assert_true(out[i] == 0.0f);
  for (int i = 4; i < N1; i++) assert_true(out[i] == ((float)i + 1.0f) * 2.0f);
  const float *copy = (const float *)(uintptr_t)(t->bases[2] + 2048);
  assert_true(copy[5] == 6.0f);
}

static void test_command_buffer_records_replays_and_patches_only_moved_commands(void **state) {
  fixture_t *f = *state;
  fixture_t g = fresh_fixture(); /* a fresh cache */
  kiln_device_t *dev = g.dev;
  kiln_stream_t *s = g.stream;
  kiln_device_module_t *m = g.module;
  kiln_buffer_table_t t;
  table_make(&g, &t);
  fill_in(&g, &t);
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_thunk_t *cb = make_cmdbuf(&g);
  kiln_thunk_seq_push(&seq, cb);
  prepare_init(&g, &seq, &t);
  kiln_thunk_exec_params_t ep = {.device = dev, .stream = s, .buffers = &t, .state = NULL};
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(dev);

  ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
  ASSERT_OK(kiln_stream_synchronize(s));
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_RECORD);
  check_cmdbuf_output(&t);

  for (int i = 0; i < 10; i++) ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
  ASSERT_OK(kiln_stream_synchronize(s));
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_REPLAY);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(cache);
  assert_int_equal(st.records, 1);
  assert_int_equal(st.instantiations, 1);
  assert_int_equal(st.replays, 10);

  /* Move the output allocation: only k2 (writes out) and the memset (zeroes out) change. */
  kiln_devptr_t moved;
  ASSERT_OK(kiln_device_mem_alloc(dev, N1 * 4, &moved));
  ASSERT_OK(kiln_buffer_table_bind(&t, 1, moved, N1 * 4));
  ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
  ASSERT_OK(kiln_stream_synchronize(s));
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_PATCH);
  st = kiln_cmd_cache_stats(cache);
  assert_int_equal(st.nodes_patched, 2);
  assert_int_equal(st.instantiations, 1); /* patched, not re-instantiated */
  check_cmdbuf_output(&t);

  ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_REPLAY);
  ASSERT_OK(kiln_stream_synchronize(s));
  kiln_strbuf_t dump = {0};
  kiln_thunk_seq_print(&dump, &seq, 0);
  assert_non_null(
      strstr(kiln_strbuf_cstr(&dump), "command-buffer cb (4 thunks)\n  kernel k1 add_one"));
  kiln_strbuf_free(&dump);

  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t);
  kiln_device_mem_free(dev, moved);
  kiln_stream_destroy(s);
  kiln_device_module_unload(m);
  assert_int_equal(kiln_cmd_cache_size(cache), 0); /* unloading forgot its recorded lists */
  kiln_device_destroy(dev);
  (void)f;
}

static void test_command_buffers_disabled_by_the_options_issue_one_by_one(void **state) {
  kiln_runtime_options_set(&(kiln_runtime_options_t){.no_command_buffers = true});
  fixture_t g = fresh_fixture();
  kiln_runtime_options_set(NULL);
  kiln_device_t *dev = g.dev;
  kiln_stream_t *s = g.stream;
  kiln_buffer_table_t t;
  table_make(&g, &t);
  fill_in(&g, &t);
  kiln_thunk_t *cb = make_cmdbuf(&g);
  kiln_thunk_prepare_params_t pp = {t.num, t.sizes};
  ASSERT_OK(kiln_thunk_prepare(cb, &pp));
  kiln_thunk_init_params_t ip = {dev};
  ASSERT_OK(kiln_thunk_initialize(cb, &ip));
  kiln_thunk_exec_params_t ep = {.device = dev, .stream = s, .buffers = &t, .state = NULL};
  for (int i = 0; i < 3; i++) ASSERT_OK(kiln_thunk_execute(cb, &ep));
  ASSERT_OK(kiln_stream_synchronize(s));
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(kiln_device_cmd_cache(dev));
  assert_int_equal(st.records, 0);
  assert_int_equal(st.direct_issues, 3);
  check_cmdbuf_output(&t);
  kiln_thunk_destroy(cb);
  kiln_buffer_table_free(&t);
  fixture_release(&g);
  (void)state;
}

static void test_command_buffers_alternating_in_a_cache_of_one_rerecord_after_eviction(
    void **state) {
  (void)state;
  kiln_runtime_options_set(&(kiln_runtime_options_t){.command_buffer_cache_size = 1});
  fixture_t g = fresh_fixture();
  kiln_runtime_options_set(NULL);
  kiln_device_t *dev = g.dev;
  kiln_stream_t *s = g.stream;
  kiln_device_module_t *m = g.module;
  kiln_buffer_table_t t;
  table_make(&g, &t);
  fill_in(&g, &t);
  kiln_thunk_t *a = make_cmdbuf(&g);
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_launch_dims_t d = dims1(N1 / BS);
  kiln_kernel_arg_t args[2] = {kiln_kernel_arg_slice(kiln_slice_make(0, 0, N1 * 4)),
                               kiln_kernel_arg_slice(kiln_slice_make(2, 0, N1 * 4))};
  kiln_thunk_seq_push(&seq, kiln_thunk_kernel_create("other", m, "add_one", &d, args, 2));
  kiln_thunk_t *b = NULL;
  ASSERT_OK(kiln_command_buffer_thunk_create("cb2", &seq, &b));
  kiln_thunk_seq_push(&seq, a);
  kiln_thunk_seq_push(&seq, b);
  prepare_init(&g, &seq, &t);
  kiln_thunk_exec_params_t ep = {.device = dev, .stream = s, .buffers = &t, .state = NULL};
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(kiln_thunk_seq_execute(&seq, &ep));
    assert_int_equal(kiln_command_buffer_thunk_last_action(a), KILN_CMD_ACTION_RECORD);
    assert_int_equal(kiln_command_buffer_thunk_last_action(b), KILN_CMD_ACTION_RECORD);
  }
  ASSERT_OK(kiln_stream_synchronize(s));
  check_cmdbuf_output(&t);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(kiln_device_cmd_cache(dev));
  assert_int_equal(st.records, 6);
  assert_int_equal(st.evictions, 5);
  assert_int_equal(kiln_cmd_cache_size(kiln_device_cmd_cache(dev)), 1);
  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t);
  fixture_release(&g);
}

/* A command-buffer thunk of one add_one kernel (in -> out), or of one memset (dst = 7s),
 * for the collision test: same structure, different buffers. */
static kiln_thunk_t *make_one_kernel_cmdbuf(kiln_device_module_t *m, kiln_slice_t in,
                                            kiln_slice_t out) {
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_launch_dims_t d = dims1(N1 / BS);
  kiln_kernel_arg_t args[2] = {kiln_kernel_arg_slice(in), kiln_kernel_arg_slice(out)};
  kiln_thunk_seq_push(&seq, kiln_thunk_kernel_create("k", m, "add_one", &d, args, 2));
  kiln_thunk_t *cb = NULL;
  ASSERT_OK(kiln_command_buffer_thunk_create("cb", &seq, &cb));
  return cb;
}

static kiln_thunk_t *make_one_memset_cmdbuf(kiln_slice_t dst) {
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_thunk_seq_push(&seq, kiln_thunk_memset_create("z", dst, 7, 4));
  kiln_thunk_t *cb = NULL;
  ASSERT_OK(kiln_command_buffer_thunk_create("cb", &seq, &cb));
  return cb;
}

/* Runs thunk `a` with `ea`, then `b` with `eb` (same structure, other buffers: it patches the
 * shared cache entry), then `a` again with its addresses unchanged. `a`'s second run must
 * write a's buffer (`a_out`), not b's (`b_out`): both are cleared before it. `a` and `b` may
 * be one thunk run with two execution states. */
static void check_no_collision(fixture_t *g, kiln_thunk_t *a, const kiln_thunk_exec_params_t *ea,
                               kiln_thunk_t *b, const kiln_thunk_exec_params_t *eb, float *a_out,
                               float *b_out, float want) {
  ASSERT_OK(kiln_thunk_execute(a, ea));
  assert_int_equal(kiln_command_buffer_thunk_last_action(a), KILN_CMD_ACTION_RECORD);
  ASSERT_OK(kiln_thunk_execute(b, eb));
  assert_int_equal(kiln_command_buffer_thunk_last_action(b), KILN_CMD_ACTION_PATCH);
  ASSERT_OK(kiln_stream_synchronize(g->stream));
  memset(a_out, 0, N1 * 4);
  memset(b_out, 0, N1 * 4);
  ASSERT_OK(kiln_thunk_execute(a, ea));
  ASSERT_OK(kiln_stream_synchronize(g->stream));
  /* The entry holds b's addresses now: a patches it back instead of replaying it. */
  if (a_out[5] != want || b_out[5] != 0.0f)
    fail_msg("a's replay wrote %s", b_out[5] != 0.0f ? "b's buffer" : "nothing");
  assert_int_equal(kiln_command_buffer_thunk_last_action(a), KILN_CMD_ACTION_PATCH);
  /* Nobody touched the entry since: a replays it. */
  ASSERT_OK(kiln_thunk_execute(a, ea));
  ASSERT_OK(kiln_stream_synchronize(g->stream));
  assert_int_equal(kiln_command_buffer_thunk_last_action(a), KILN_CMD_ACTION_REPLAY);
}

/* Prepares and initializes `a` and `b` against `t`, then check_no_collision without states. */
static void check_two_thunks_no_collision(fixture_t *g, kiln_buffer_table_t *t, kiln_thunk_t *a,
                                          kiln_thunk_t *b, float *a_out, float *b_out, float want) {
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_thunk_seq_push(&seq, a);
  kiln_thunk_seq_push(&seq, b);
  prepare_init(g, &seq, t);
  kiln_thunk_exec_params_t ep = {
      .device = g->dev, .stream = g->stream, .buffers = t, .state = NULL};
  check_no_collision(g, a, &ep, b, &ep, a_out, b_out, want);
  kiln_thunk_seq_free(&seq);
}

static void test_command_buffer_replay_never_runs_another_thunks_patched_entry(void **state) {
  (void)state;
  fixture_t g = fresh_fixture(); /* a fresh cache */
  kiln_device_t *dev = g.dev;
  kiln_device_module_t *m = g.module;
  kiln_buffer_table_t t;
  ASSERT_OK(kiln_buffer_table_init(&t, dev, 4)); /* in, a's out, b's out, unused */
  for (int i = 0; i < 4; i++) ASSERT_OK(kiln_buffer_table_allocate(&t, i, N1 * 4));
  fill_in(&g, &t);
  float *a_out = (float *)(uintptr_t)t.bases[1], *b_out = (float *)(uintptr_t)t.bases[2];
  /* Kernels: a = add_one(in -> a_out), b = add_one(in -> b_out). */
  kiln_thunk_t *a =
      make_one_kernel_cmdbuf(m, kiln_slice_make(0, 0, N1 * 4), kiln_slice_make(1, 0, N1 * 4));
  kiln_thunk_t *b =
      make_one_kernel_cmdbuf(m, kiln_slice_make(0, 0, N1 * 4), kiln_slice_make(2, 0, N1 * 4));
  check_two_thunks_no_collision(&g, &t, a, b, a_out, b_out, 6.0f);
  /* Runs of only memsets have no kernel to tell them apart: they collide the same way. */
  a = make_one_memset_cmdbuf(kiln_slice_make(1, 0, N1 * 4));
  b = make_one_memset_cmdbuf(kiln_slice_make(2, 0, N1 * 4));
  float seven;
  uint32_t bits = 7;
  memcpy(&seven, &bits, 4);
  check_two_thunks_no_collision(&g, &t, a, b, a_out, b_out, seven);
  kiln_buffer_table_free(&t);
  fixture_release(&g);
}

/* One thunk, two executions at once (as two runs of an executable): each passes its own state
 * and buffer table, and neither replays the addresses the other patched in. */
static void test_execution_states_of_one_command_buffer_keep_their_own_addresses(void **state) {
  (void)state;
  fixture_t g = fresh_fixture(); /* a fresh cache */
  kiln_buffer_table_t t1, t2;
  table_make(&g, &t1);
  table_make(&g, &t2);
  fill_in(&g, &t1);
  fill_in(&g, &t2);
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_thunk_t *cb = make_one_kernel_cmdbuf(g.module, kiln_slice_make(0, 0, N1 * 4),
                                            kiln_slice_make(1, 0, N1 * 4));
  kiln_thunk_seq_push(&seq, cb);
  prepare_init(&g, &seq, &t1);
  kiln_thunk_exec_state_t *s1 = NULL, *s2 = NULL;
  ASSERT_OK(kiln_thunk_exec_state_create(g.dev, &seq, &s1));
  ASSERT_OK(kiln_thunk_exec_state_create(g.dev, &seq, &s2));
  kiln_thunk_exec_params_t e1 = {.device = g.dev, .stream = g.stream, .buffers = &t1, .state = s1},
                           e2 = {.device = g.dev, .stream = g.stream, .buffers = &t2, .state = s2};
  check_no_collision(&g, cb, &e1, cb, &e2, (float *)(uintptr_t)t1.bases[1],
                     (float *)(uintptr_t)t2.bases[1], 6.0f);
  kiln_thunk_exec_state_destroy(s1);
  kiln_thunk_exec_state_destroy(s2);
  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t1);
  kiln_buffer_table_free(&t2);
  fixture_release(&g);
}

static void test_conversion_wraps_runs_of_convertible_thunks_recursively(void **state) {
  fixture_t *f = *state;
  kiln_launch_dims_t d = dims1(1);
  kiln_kernel_arg_t a = kiln_kernel_arg_slice(kiln_slice_make(0, 0, 4));
  float host[1];
#define K(n) kiln_thunk_kernel_create(n, f->module, "add_one", &d, &a, 1)
  kiln_thunk_seq_t body, cond, seq;
  kiln_thunk_seq_init(&body);
  kiln_thunk_seq_init(&cond);
  kiln_thunk_seq_init(&seq);
  kiln_thunk_seq_push(&body, K("b1"));
  kiln_thunk_seq_push(&body, K("b2"));
  kiln_thunk_seq_push(&cond, K("c1"));
  kiln_thunk_seq_push(&seq, K("k1"));
  kiln_thunk_seq_push(&seq, K("k2"));
  kiln_thunk_seq_push(&seq,
                      kiln_thunk_while_create("w", &cond, kiln_slice_make(0, 0, 1), &body, 0));
  kiln_thunk_seq_push(&seq, K("k3"));
  kiln_thunk_seq_push(&seq, kiln_thunk_copy_create("h2d", KILN_COPY_H2D, kiln_slice_make(0, 0, 4),
                                                   kiln_slice_make(0, 0, 4), host, 4));
  kiln_thunk_seq_push(&seq, K("k4"));
  kiln_thunk_seq_push(&seq, kiln_thunk_memset_create("z", kiln_slice_make(0, 0, 4), 0, 4));
#undef K
  size_t made = 0;
  ASSERT_OK(kiln_command_buffer_convert(&seq, 2, &made));
  assert_int_equal(made, 3); /* k1+k2, b1+b2, k4+z; k3 and c1 are runs of one */
  kiln_strbuf_t dump = {0};
  kiln_thunk_seq_print(&dump, &seq, 0);
  assert_string_equal(kiln_strbuf_cstr(&dump),
                      "command-buffer command_buffer.0 (2 thunks)\n"
                      "  kernel k1 add_one grid=1x1x1 block=64x1x1 args=(a0+0:4)\n"
                      "  kernel k2 add_one grid=1x1x1 block=64x1x1 args=(a0+0:4)\n"
                      "while w pred=a0+0:1\n"
                      "  condition:\n"
                      "    kernel c1 add_one grid=1x1x1 block=64x1x1 args=(a0+0:4)\n"
                      "  body:\n"
                      "    command-buffer command_buffer.1 (2 thunks)\n"
                      "      kernel b1 add_one grid=1x1x1 block=64x1x1 args=(a0+0:4)\n"
                      "      kernel b2 add_one grid=1x1x1 block=64x1x1 args=(a0+0:4)\n"
                      "kernel k3 add_one grid=1x1x1 block=64x1x1 args=(a0+0:4)\n"
                      "copy h2d h2d 4 bytes host -> a0+0:4\n"
                      "command-buffer command_buffer.2 (2 thunks)\n"
                      "  kernel k4 add_one grid=1x1x1 block=64x1x1 args=(a0+0:4)\n"
                      "  memset z 0x0 x4 a0+0:4\n");
  kiln_strbuf_free(&dump);
  /* A non-convertible thunk cannot be put in a command buffer by hand either. */
  kiln_thunk_seq_t bad;
  kiln_thunk_seq_init(&bad);
  kiln_thunk_seq_push(&bad, kiln_thunk_copy_create("d2h", KILN_COPY_D2H, kiln_slice_make(0, 0, 4),
                                                   kiln_slice_make(0, 0, 4), host, 4));
  kiln_thunk_t *cb = NULL;
  assert_code(kiln_command_buffer_thunk_create("x", &bad, &cb), KILN_INVALID_ARGUMENT);
  assert_null(cb);
  assert_int_equal(bad.len, 1);
  kiln_thunk_seq_free(&bad);
  kiln_thunk_seq_free(&seq);
}

/* ---- custom calls inside command buffers --------------------------------------------------- */

/* A custom call as a command: out[i] = 3 * in[i] (N1 floats), counting its calls and keeping
 * the run id it saw; `fail` makes it return an error instead. */
typedef struct cb_call {
  int calls;
  int64_t last_run_id;
  bool fail;
} cb_call_t;

static kiln_status triple_call(void *ctx, kiln_stream_t *stream, const kiln_run_info_t *run,
                               const kiln_devptr_t *ops, int no, const kiln_devptr_t *res, int nr) {
  (void)stream;
  cb_call_t *c = ctx;
  c->calls++;
  c->last_run_id = run ? run->run_id : -1;
  if (c->fail) return kiln_status_make(KILN_INVALID_ARGUMENT, "triple: asked to fail");
  if (no != 1 || nr != 1) return KILN_ERR_INVALID("triple: 1 operand, 1 result");
  const float *in = (const float *)(uintptr_t)ops[0];
  float *out = (float *)(uintptr_t)res[0];
  for (int i = 0; i < N1; i++) out[i] = 3.0f * in[i];
  return NULL;
}

static kiln_status plain_call(void *ctx, kiln_stream_t *stream, const kiln_devptr_t *ops, int no,
                              const kiln_devptr_t *res, int nr) {
  (void)stream;
  (void)ctx;
  (void)no;
  (void)nr;
  const float *in = (const float *)(uintptr_t)ops[0];
  float *out = (float *)(uintptr_t)res[0];
  for (int i = 0; i < N1; i++) out[i] = in[i] - 1.0f;
  return NULL;
}

/* in(a0) -add_one-> a2[0:] -triple-> a1 -scale2-> a2[2048:]: ((i + 1) * 3) * 2. */
static void check_triple_chain(const kiln_buffer_table_t *t) {
  const float *r = (const float *)(uintptr_t)(t->bases[2] + 2048);
  for (int i = 0; i < N1; i++)
    if (r[i] != ((float)i + 1.0f) * 6.0f) fail_msg("element %d: %g", i, (double)r[i]);
}

/* Appends k1 (in a0 -add_one-> a2[0:]), the compatible custom call cc.1 (a2[0:] -triple-> a1)
 * and k2 (a1 -scale2-> a2[2048:]) to `seq`; the call is returned (its command form is set only
 * when `command`). */
static kiln_thunk_t *push_triple_chain(fixture_t *g, cb_call_t *cc, bool command,
                                       kiln_thunk_seq_t *seq) {
  kiln_launch_dims_t d = dims1(N1 / BS);
  kiln_slice_t a0 = kiln_slice_make(0, 0, N1 * 4), a1 = kiln_slice_make(1, 0, N1 * 4);
  kiln_slice_t a2 = kiln_slice_make(2, 0, N1 * 4), a2_hi = kiln_slice_make(2, 2048, N1 * 4);
  kiln_kernel_arg_t k1[2] = {kiln_kernel_arg_slice(a0), kiln_kernel_arg_slice(a2)};
  kiln_kernel_arg_t k2[2] = {kiln_kernel_arg_slice(a1), kiln_kernel_arg_slice(a2_hi)};
  kiln_thunk_seq_push(seq, kiln_thunk_kernel_create("k1", g->module, "add_one", &d, k1, 2));
  kiln_thunk_t *tc =
      kiln_thunk_custom_call_create("cc.1", "triple", NULL, cc, &a2, 1, &a1, 1, true);
  kiln_thunk_custom_call_set_run(tc, triple_call);
  if (command) kiln_thunk_custom_call_set_command(tc, triple_call);
  kiln_thunk_seq_push(seq, tc);
  kiln_thunk_seq_push(seq, kiln_thunk_kernel_create("k2", g->module, "scale2", &d, k2, 2));
  return tc;
}

static void test_compatible_custom_call_is_recorded_between_kernels_and_patched(void **state) {
  (void)state;
  fixture_t g = fresh_fixture(); /* a fresh cache */
  kiln_buffer_table_t t;
  table_make(&g, &t);
  fill_in(&g, &t);
  cb_call_t cc = {0};
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  kiln_thunk_t *tc = push_triple_chain(&g, &cc, false, &seq);
  assert_false(kiln_thunk_is_convertible(tc)); /* compatible, but no in-stream form yet */
  kiln_thunk_custom_call_set_command(tc, triple_call);
  assert_true(kiln_thunk_is_convertible(tc));
  kiln_launch_dims_t d = dims1(N1 / BS);
  kiln_slice_t a0 = kiln_slice_make(0, 0, N1 * 4), a2 = kiln_slice_make(2, 0, N1 * 4);
  kiln_kernel_arg_t k1[2] = {kiln_kernel_arg_slice(a0), kiln_kernel_arg_slice(a2)};
  /* Not compatible: splits the run (the kernel after it is a run of one). */
  kiln_thunk_t *tp =
      kiln_thunk_custom_call_create("cc.2", "minus_one", plain_call, NULL, &a0, 1, &a2, 1, false);
  kiln_thunk_custom_call_set_command(tp, triple_call);
  assert_false(kiln_thunk_is_convertible(tp));
  kiln_thunk_seq_push(&seq, tp);
  kiln_thunk_seq_push(&seq, kiln_thunk_kernel_create("k3", g.module, "add_one", &d, k1, 2));
  size_t made = 0;
  ASSERT_OK(kiln_command_buffer_convert(&seq, 2, &made));
  assert_int_equal(made, 1);
  kiln_command_buffer_counts_t counts = {0};
  kiln_command_buffer_count(&seq, &counts);
  assert_int_equal(counts.command_buffers, 1);
  assert_int_equal(counts.thunks, 3);
  assert_int_equal(counts.custom_calls_inside, 1);
  assert_int_equal(counts.custom_calls_outside, 1);
  kiln_strbuf_t dump = {0};
  kiln_thunk_seq_print(&dump, &seq, 0);
  assert_non_null(strstr(kiln_strbuf_cstr(&dump),
                         "command-buffer command_buffer.0 (3 thunks)\n"
                         "  kernel k1 add_one"));
  assert_non_null(strstr(kiln_strbuf_cstr(&dump), "\n  custom-call cc.1"));
  assert_non_null(strstr(kiln_strbuf_cstr(&dump), "\ncustom-call cc.2"));
  kiln_strbuf_free(&dump);
  /* Only the command buffer runs below (the split call and k3 write a2[0:] again). */
  kiln_thunk_t *cb = seq.items[0];
  assert_int_equal(kiln_thunk_kind(cb), KILN_THUNK_COMMAND_BUFFER);
  prepare_init(&g, &seq, &t);
  kiln_thunk_exec_state_t *st = NULL;
  ASSERT_OK(kiln_thunk_exec_state_create(g.dev, &seq, &st));
  kiln_run_info_t ri = {41, NULL, 0};
  kiln_thunk_exec_state_set_run(st, &ri);
  kiln_thunk_exec_params_t ep = {.device = g.dev, .stream = g.stream, .buffers = &t, .state = st};
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(g.dev);

  /* Recorded once, then replayed: the handler runs at every replay, in order between the
   * kernels, with this execution's run id (the cell changes, not the commands). */
  for (int i = 0; i < 4; i++) {
    ri.run_id = 41 + i;
    ASSERT_OK(kiln_thunk_execute(cb, &ep));
    ASSERT_OK(kiln_stream_synchronize(g.stream));
    assert_int_equal(cc.last_run_id, 41 + i);
    check_triple_chain(&t);
  }
  assert_int_equal(cc.calls, 4);
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_REPLAY);
  kiln_cmd_stats_t cs = kiln_cmd_cache_stats(cache);
  assert_int_equal(cs.records, 1);
  assert_int_equal(cs.replays, 3);

  /* The custom call's result moves: the call and the kernel reading it are patched. */
  kiln_devptr_t moved;
  ASSERT_OK(kiln_device_mem_alloc(g.dev, N1 * 4, &moved));
  ASSERT_OK(kiln_buffer_table_bind(&t, 1, moved, N1 * 4));
  memset((void *)(uintptr_t)(t.bases[2] + 2048), 0, N1 * 4);
  ASSERT_OK(kiln_thunk_execute(cb, &ep));
  ASSERT_OK(kiln_stream_synchronize(g.stream));
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_PATCH);
  cs = kiln_cmd_cache_stats(cache);
  assert_int_equal(cs.nodes_patched, 2);
  assert_int_equal(cs.instantiations, 1);
  check_triple_chain(&t);
  const float *mid = (const float *)(uintptr_t)moved;
  assert_true(mid[7] == 24.0f); /* the call wrote the moved buffer */

  /* A failing handler fails the execution with its message and the call's name... */
  cc.fail = true;
  kiln_status s = kiln_thunk_execute(cb, &ep);
  if (!s) s = kiln_stream_synchronize(g.stream);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "triple: asked to fail"));
  assert_non_null(strstr(kiln_status_message(s), "custom call cc.1 (triple)"));
  assert_code(s, KILN_INVALID_ARGUMENT);
  /* ...and leaves the recorded entry working: the next execution replays it. */
  cc.fail = false;
  memset((void *)(uintptr_t)(t.bases[2] + 2048), 0, N1 * 4);
  ASSERT_OK(kiln_thunk_execute(cb, &ep));
  ASSERT_OK(kiln_stream_synchronize(g.stream));
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_REPLAY);
  check_triple_chain(&t);
  cs = kiln_cmd_cache_stats(cache);
  assert_int_equal(cs.records, 1);
  assert_int_equal(cs.instantiate_failures, 0);

  kiln_thunk_exec_state_destroy(st);
  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t);
  kiln_device_mem_free(g.dev, moved);
  fixture_release(&g);
}

/* ---- the host's recorded lists ------------------------------------------------------------ */

/* A list of one-block kernels (run as direct calls), a multi-block kernel (through the pool),
 * a memset and a copy: every replay recomputes from the current input, and patching one
 * one-block kernel's output sends exactly that kernel's writes to the new place. */
static void test_host_replay_runs_every_command_kind_in_order_and_patches_one_kernel(void **state) {
  (void)state;
  fixture_t g = fresh_fixture();
  enum { N = 4 * BS };
  kiln_devptr_t a, b, c, d;
  ASSERT_OK(kiln_device_mem_alloc(g.dev, N * 4, &a));
  ASSERT_OK(kiln_device_mem_alloc(g.dev, N * 4, &b));
  ASSERT_OK(kiln_device_mem_alloc(g.dev, N * 4, &c));
  ASSERT_OK(kiln_device_mem_alloc(g.dev, N * 4, &d));
  float *fa = (float *)(uintptr_t)a, *fb = (float *)(uintptr_t)b, *fc = (float *)(uintptr_t)c;
  float *fd = (float *)(uintptr_t)d;
  kiln_launch_dims_t one = dims1(1), four = dims1(4);
  const kiln_kernel_t *add_one = kernel(&g, "add_one"), *scale2 = kernel(&g, "scale2");
  /* b[0:64] = a + 1; c = 2a; c[0:4] = 0; b[64:128] = c[64:128]; b[128:192] = b[0:64] + 1 */
  uint64_t k1[2] = {a, b}, k2[2] = {a, c}, k5[2] = {b, b + 128 * 4};
  kiln_cmd_list_t l;
  kiln_cmd_list_init(&l);
  kiln_cmd_list_push_kernel(&l, add_one, &one, k1, 2);
  kiln_cmd_list_push_kernel(&l, scale2, &four, k2, 2);
  kiln_cmd_list_push_memset(&l, c, 0, 4, 4);
  kiln_cmd_list_push_memcpy(&l, b + 64 * 4, c + 64 * 4, 64 * 4);
  kiln_cmd_list_push_kernel(&l, add_one, &one, k5, 2);
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(g.dev);
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < N; i++) fa[i] = (float)(i * (round + 1));
    memset(fb, 0, N * 4);
    kiln_cmd_action_t action;
    ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &l, &action));
    ASSERT_OK(kiln_stream_synchronize(g.stream));
    assert_int_equal(action, round ? KILN_CMD_ACTION_REPLAY : KILN_CMD_ACTION_RECORD);
    for (int i = 0; i < N; i++) {
      float x = (float)(i * (round + 1));
      assert_true(fc[i] == (i < 4 ? 0.0f : 2.0f * x));
    }
    for (int i = 0; i < 64; i++) {
      float x = (float)(i * (round + 1)), x64 = (float)((i + 64) * (round + 1));
      assert_true(fb[i] == x + 1.0f);
      assert_true(fb[64 + i] == 2.0f * x64);
      assert_true(fb[128 + i] == x + 2.0f);
      assert_true(fb[192 + i] == 0.0f);
    }
  }
  /* The last kernel writes d instead: one command patched in place, the others as they were. */
  kiln_cmd_list_t moved;
  kiln_cmd_list_init(&moved);
  uint64_t k5d[2] = {b, d};
  kiln_cmd_list_push_kernel(&moved, add_one, &one, k1, 2);
  kiln_cmd_list_push_kernel(&moved, scale2, &four, k2, 2);
  kiln_cmd_list_push_memset(&moved, c, 0, 4, 4);
  kiln_cmd_list_push_memcpy(&moved, b + 64 * 4, c + 64 * 4, 64 * 4);
  kiln_cmd_list_push_kernel(&moved, add_one, &one, k5d, 2);
  memset(fb, 0, N * 4);
  memset(fd, 0, N * 4);
  kiln_cmd_action_t action;
  ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &moved, &action));
  ASSERT_OK(kiln_stream_synchronize(g.stream));
  assert_int_equal(action, KILN_CMD_ACTION_PATCH);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(cache);
  assert_int_equal(st.nodes_patched, 1);
  assert_int_equal(st.instantiations, 1);
  for (int i = 0; i < 64; i++) {
    float x = (float)(i * 4);
    assert_true(fb[i] == x + 1.0f);
    assert_true(fd[i] == x + 2.0f);
    assert_true(fb[128 + i] == 0.0f); /* no longer written */
  }
  kiln_cmd_list_free(&l);
  kiln_cmd_list_free(&moved);
  kiln_device_mem_free(g.dev, a);
  kiln_device_mem_free(g.dev, b);
  kiln_device_mem_free(g.dev, c);
  kiln_device_mem_free(g.dev, d);
  fixture_release(&g);
}

/* A replay launched while its stream is busy is queued behind the stream's work and runs after
 * it; patching the list for the next launch waits until that queued replay ran with the
 * addresses it was launched with. The stream is held by a wait on an event that another
 * stream records after a slow kernel, so both replays must see that kernel's output. */
static void test_host_replay_queued_behind_a_busy_stream_runs_in_order_before_a_patch(
    void **state) {
  (void)state;
  fixture_t g = fresh_fixture();
  enum { N = 64 * BS };
  kiln_stream_t *other;
  ASSERT_OK(kiln_stream_create(g.dev, &other));
  kiln_event_t *ev;
  ASSERT_OK(kiln_event_create(g.dev, &ev));
  kiln_devptr_t slow, out1, out2;
  ASSERT_OK(kiln_device_mem_alloc(g.dev, N * 4, &slow));
  ASSERT_OK(kiln_device_mem_alloc(g.dev, BS * 4, &out1));
  ASSERT_OK(kiln_device_mem_alloc(g.dev, BS * 4, &out2));
  memset((void *)(uintptr_t)slow, 0, N * 4);
  memset((void *)(uintptr_t)out1, 0, BS * 4);
  memset((void *)(uintptr_t)out2, 0, BS * 4);
  uint64_t fill_args[1] = {slow};
  kiln_launch_dims_t all = dims1(N / BS), one = dims1(1);
  ASSERT_OK(kiln_stream_launch(other, kernel(&g, "slow_fill"), &all, fill_args, 1));
  ASSERT_OK(kiln_event_record(ev, other));
  ASSERT_OK(kiln_stream_wait_event(g.stream, ev));
  const kiln_kernel_t *add_one = kernel(&g, "add_one");
  kiln_cmd_list_t l1, l2;
  kiln_cmd_list_init(&l1);
  kiln_cmd_list_init(&l2);
  uint64_t a1[2] = {slow + (N - BS) * 4, out1}, a2[2] = {slow + (N - BS) * 4, out2};
  kiln_cmd_list_push_kernel(&l1, add_one, &one, a1, 2);
  kiln_cmd_list_push_memset(&l1, out1 + 4, 0, 4, 1);
  kiln_cmd_list_push_kernel(&l2, add_one, &one, a2, 2);
  kiln_cmd_list_push_memset(&l2, out2 + 4, 0, 4, 1);
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(g.dev);
  kiln_cmd_action_t action;
  ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &l1, &action));
  assert_int_equal(action, KILN_CMD_ACTION_RECORD);
  ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &l2, &action));
  assert_int_equal(action, KILN_CMD_ACTION_PATCH);
  ASSERT_OK(kiln_stream_synchronize(g.stream));
  ASSERT_OK(kiln_stream_synchronize(other));
  const float *o1 = (const float *)(uintptr_t)out1, *o2 = (const float *)(uintptr_t)out2;
  for (int i = 0; i < BS; i++) {
    assert_true(o1[i] == (i == 1 ? 0.0f : 201.0f)); /* slow_fill writes 200 */
    assert_true(o2[i] == (i == 1 ? 0.0f : 201.0f));
  }
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(cache);
  assert_int_equal(st.records, 1);
  assert_int_equal(st.patched_launches, 1);
  assert_int_equal(st.nodes_patched, 2);
  kiln_cmd_list_free(&l1);
  kiln_cmd_list_free(&l2);
  kiln_device_mem_free(g.dev, slow);
  kiln_device_mem_free(g.dev, out1);
  kiln_device_mem_free(g.dev, out2);
  kiln_event_destroy(ev);
  kiln_stream_destroy(other);
  fixture_release(&g);
}

/* A list of one-block kernels only runs on the launching thread without the stream's mutex
 * only when nothing is in flight on the stream: launched behind queued work (a wait for an
 * event, always queued, and a slow fill submitted after it) it is queued too, and reads what
 * the fill wrote, as recorded and as replayed. */
static void test_host_replay_of_direct_kernels_waits_for_work_queued_before_it(void **state) {
  (void)state;
  fixture_t g = fresh_fixture();
  enum { N = 64 * BS };
  kiln_devptr_t slow, out;
  ASSERT_OK(kiln_device_mem_alloc(g.dev, N * 4, &slow));
  ASSERT_OK(kiln_device_mem_alloc(g.dev, BS * 4, &out));
  kiln_event_t *ev; /* recorded by the stream itself, then waited for: a queued no-op */
  ASSERT_OK(kiln_event_create(g.dev, &ev));
  uint64_t fill_args[1] = {slow}, add_args[2] = {slow + (N - BS) * 4, out};
  kiln_launch_dims_t all = dims1(N / BS), one = dims1(1);
  kiln_cmd_list_t l;
  kiln_cmd_list_init(&l);
  kiln_cmd_list_push_kernel(&l, kernel(&g, "add_one"), &one, add_args, 2);
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(g.dev);
  const float *o = (const float *)(uintptr_t)out;
  for (int round = 0; round < 3; round++) {
    memset((void *)(uintptr_t)slow, 0, N * 4);
    memset((void *)(uintptr_t)out, 0, BS * 4);
    ASSERT_OK(kiln_event_record(ev, g.stream));
    ASSERT_OK(kiln_stream_wait_event(g.stream, ev));
    ASSERT_OK(kiln_stream_launch(g.stream, kernel(&g, "slow_fill"), &all, fill_args, 1));
    kiln_cmd_action_t action;
    ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &l, &action));
    assert_int_equal(action, round ? KILN_CMD_ACTION_REPLAY : KILN_CMD_ACTION_RECORD);
    ASSERT_OK(kiln_stream_synchronize(g.stream));
    for (int i = 0; i < BS; i++) assert_true(o[i] == 201.0f); /* slow_fill writes 200 */
  }
  kiln_cmd_list_free(&l);
  kiln_device_mem_free(g.dev, slow);
  kiln_device_mem_free(g.dev, out);
  kiln_event_destroy(ev);
  fixture_release(&g);
}

static kiln_status failing_command(void *ctx, kiln_stream_t *stream,
                                   const struct kiln_run_info *run, const kiln_devptr_t *operands,
                                   int num_operands, const kiln_devptr_t *results,
                                   int num_results) {
  (void)stream, (void)run, (void)operands, (void)num_operands, (void)results, (void)num_results;
  (*(int *)ctx)++;
  return kiln_status_make(KILN_INTERNAL, "failing_command: asked to fail");
}

/* n buffers of one block of floats each. */
static void alloc_blocks(fixture_t *g, kiln_devptr_t *out, int n) {
  for (int i = 0; i < n; i++) ASSERT_OK(kiln_device_mem_alloc(g->dev, BS * 4, &out[i]));
}

/* A custom-call command that fails, counting its calls in *calls. */
static kiln_cmd_custom_call_t failing_call(int *calls) {
  return (kiln_cmd_custom_call_t){.fn = failing_command,
                                  .ctx = calls,
                                  .uid = kiln_cmd_custom_call_next_uid(),
                                  .name = "cc.fail",
                                  .target = "failing_command",
                                  .num_operands = 1};
}

/* A list of one-block kernels only (direct calls, without the stream's lock when it is idle)
 * behaves as any other stream work after a failure: skipped until the failure is returned by a
 * synchronize, then replayed again. */
static void test_host_replay_of_direct_kernels_is_skipped_after_a_stream_failure(void **state) {
  (void)state;
  fixture_t g = fresh_fixture();
  kiln_devptr_t blocks[3];
  alloc_blocks(&g, blocks, 3);
  kiln_devptr_t a = blocks[0], b = blocks[1], c = blocks[2];
  float *fa = (float *)(uintptr_t)a, *fc = (float *)(uintptr_t)c;
  for (int i = 0; i < BS; i++) fa[i] = (float)i;
  kiln_launch_dims_t one = dims1(1);
  uint64_t k1[2] = {a, b}, k2[2] = {b, c};
  kiln_cmd_list_t direct, failing;
  kiln_cmd_list_init(&direct);
  kiln_cmd_list_init(&failing);
  kiln_cmd_list_push_kernel(&direct, kernel(&g, "add_one"), &one, k1, 2);
  kiln_cmd_list_push_kernel(&direct, kernel(&g, "scale2"), &one, k2, 2);
  int calls = 0;
  kiln_cmd_custom_call_t cc = failing_call(&calls);
  kiln_devptr_t addrs[2] = {a, b};
  kiln_cmd_list_push_custom_call(&failing, &cc, NULL, addrs, 2);
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(g.dev);
  kiln_cmd_action_t action;
  for (int round = 0; round < 2; round++) {
    memset(fc, 0, BS * 4);
    ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &direct, &action));
    ASSERT_OK(kiln_stream_synchronize(g.stream));
    assert_int_equal(action, round ? KILN_CMD_ACTION_REPLAY : KILN_CMD_ACTION_RECORD);
    for (int i = 0; i < BS; i++) assert_true(fc[i] == 2.0f * ((float)i + 1.0f));
  }
  ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &failing, &action));
  assert_int_equal(action, KILN_CMD_ACTION_RECORD);
  memset(fc, 0, BS * 4);
  ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &direct, &action));
  assert_int_equal(action, KILN_CMD_ACTION_REPLAY);
  kiln_status s = kiln_stream_synchronize(g.stream);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "failing_command: asked to fail"));
  assert_non_null(strstr(kiln_status_message(s), "cc.fail"));
  kiln_status_free(s);
  assert_int_equal(calls, 1);
  for (int i = 0; i < BS; i++) assert_true(fc[i] == 0.0f); /* skipped */
  ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &direct, &action));
  ASSERT_OK(kiln_stream_synchronize(g.stream));
  for (int i = 0; i < BS; i++) assert_true(fc[i] == 2.0f * ((float)i + 1.0f));
  kiln_cmd_list_free(&direct);
  kiln_cmd_list_free(&failing);
  for (int i = 0; i < 3; i++) kiln_device_mem_free(g.dev, blocks[i]);
  fixture_release(&g);
}

/* A kernel, memset or copy submitted to an idle stream runs on the calling thread without the
 * stream's lock or an operation object (submit); after a failure the stream is idle too, and
 * they are skipped as queued work would be until a synchronize returns the failure, then run
 * again. */
static void test_host_idle_stream_skips_kernels_copies_and_memsets_after_a_failure(void **state) {
  (void)state;
  fixture_t g = fresh_fixture();
  kiln_devptr_t blocks[3];
  alloc_blocks(&g, blocks, 3);
  kiln_devptr_t a = blocks[0], b = blocks[1], c = blocks[2];
  float *fa = (float *)(uintptr_t)a, *fb = (float *)(uintptr_t)b, *fc = (float *)(uintptr_t)c;
  kiln_launch_dims_t one = dims1(1);
  uint64_t ab[2] = {a, b};
  float two = 2.0f;
  uint32_t two_bits;
  memcpy(&two_bits, &two, 4);
  int calls = 0;
  kiln_cmd_custom_call_t cc = failing_call(&calls);
  kiln_devptr_t addrs[2] = {a, b};
  kiln_cmd_list_t failing;
  kiln_cmd_list_init(&failing);
  kiln_cmd_list_push_custom_call(&failing, &cc, NULL, addrs, 2);
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(g.dev);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < BS; i++) fa[i] = (float)i, fb[i] = -1.0f, fc[i] = -1.0f;
    kiln_cmd_action_t action;
    if (round == 0) ASSERT_OK(kiln_cmd_cache_execute(cache, g.stream, &failing, &action));
    ASSERT_OK(kiln_stream_launch(g.stream, kernel(&g, "add_one"), &one, ab, 2)); /* b = a + 1 */
    ASSERT_OK(kiln_stream_memset(g.stream, a, two_bits, 4, BS));                 /* a = 2 */
    ASSERT_OK(kiln_stream_memcpy_d2d(g.stream, c, a, BS * 4));                   /* c = a */
    kiln_status s = kiln_stream_synchronize(g.stream);
    if (round == 0) {
      assert_non_null(s);
      assert_non_null(strstr(kiln_status_message(s), "failing_command: asked to fail"));
      kiln_status_free(s);
      for (int i = 0; i < BS; i++)
        assert_true(fa[i] == (float)i && fb[i] == -1.0f && fc[i] == -1.0f); /* all skipped */
    } else {
      ASSERT_OK(s);
      for (int i = 0; i < BS; i++)
        assert_true(fa[i] == 2.0f && fb[i] == (float)i + 1.0f && fc[i] == 2.0f);
    }
  }
  assert_int_equal(calls, 1);
  kiln_cmd_list_free(&failing);
  for (int i = 0; i < 3; i++) kiln_device_mem_free(g.dev, blocks[i]);
  fixture_release(&g);
}

static void test_custom_call_commands_issue_one_by_one_when_disabled(void **state) {
  (void)state;
  kiln_runtime_options_set(&(kiln_runtime_options_t){.no_command_buffers = true});
  fixture_t g = fresh_fixture();
  kiln_runtime_options_set(NULL);
  kiln_buffer_table_t t;
  table_make(&g, &t);
  fill_in(&g, &t);
  cb_call_t cc = {0};
  kiln_thunk_seq_t seq;
  kiln_thunk_seq_init(&seq);
  push_triple_chain(&g, &cc, true, &seq);
  kiln_thunk_t *cb = NULL;
  ASSERT_OK(kiln_command_buffer_thunk_create("cb", &seq, &cb));
  kiln_thunk_seq_push(&seq, cb);
  prepare_init(&g, &seq, &t);
  kiln_thunk_exec_params_t ep = {.device = g.dev, .stream = g.stream, .buffers = &t, .state = NULL};
  for (int i = 0; i < 2; i++) {
    memset((void *)(uintptr_t)(t.bases[2] + 2048), 0, N1 * 4);
    /* Issued one by one: the host call waits for k1 itself (no stream sync here). */
    ASSERT_OK(kiln_thunk_execute(cb, &ep));
    ASSERT_OK(kiln_stream_synchronize(g.stream));
    check_triple_chain(&t);
  }
  assert_int_equal(kiln_command_buffer_thunk_last_action(cb), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  assert_int_equal(cc.calls, 2);
  assert_int_equal(kiln_cmd_cache_stats(kiln_device_cmd_cache(g.dev)).records, 0);
  kiln_thunk_seq_free(&seq);
  kiln_buffer_table_free(&t);
  fixture_release(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_copy_kernel_copy_back_round_trips),
      cmocka_unit_test(test_host_large_buffers_are_aligned_for_huge_pages),
      cmocka_unit_test(test_host_stream_runs_operations_in_submission_order),
      cmocka_unit_test(test_host_memset_fills_1_2_and_4_byte_patterns),
      cmocka_unit_test(test_host_stream_overlap_runs_work_on_the_streams_thread),
      cmocka_unit_test(test_host_event_orders_work_across_streams),
      cmocka_unit_test(test_host_bad_requests_are_errors_not_crashes),
      cmocka_unit_test(test_host_gemm_matches_reference_with_transposes_batches_and_beta),
      cmocka_unit_test(test_gemm_desc_rejects_bad_dimensions),
      cmocka_unit_test(test_thunks_kernel_copy_memset_gemm_run_in_sequence),
      cmocka_unit_test(test_thunk_prepare_rejects_slices_outside_their_allocation),
      cmocka_unit_test(test_while_thunk_reads_back_pred_and_counts_trips),
      cmocka_unit_test(test_conditional_thunk_picks_branch_by_index_and_pred),
      cmocka_unit_test(test_custom_call_thunk_passes_resolved_buffers),
      cmocka_unit_test(test_command_buffer_records_replays_and_patches_only_moved_commands),
      cmocka_unit_test(test_command_buffers_disabled_by_the_options_issue_one_by_one),
      cmocka_unit_test(test_command_buffers_alternating_in_a_cache_of_one_rerecord_after_eviction),
      cmocka_unit_test(test_command_buffer_replay_never_runs_another_thunks_patched_entry),
      cmocka_unit_test(test_execution_states_of_one_command_buffer_keep_their_own_addresses),
      cmocka_unit_test(test_conversion_wraps_runs_of_convertible_thunks_recursively),
      cmocka_unit_test(test_compatible_custom_call_is_recorded_between_kernels_and_patched),
      cmocka_unit_test(test_custom_call_commands_issue_one_by_one_when_disabled),
      cmocka_unit_test(test_host_replay_runs_every_command_kind_in_order_and_patches_one_kernel),
      cmocka_unit_test(test_host_replay_queued_behind_a_busy_stream_runs_in_order_before_a_patch),
      cmocka_unit_test(test_host_replay_of_direct_kernels_is_skipped_after_a_stream_failure),
      cmocka_unit_test(test_host_idle_stream_skips_kernels_copies_and_memsets_after_a_failure),
      cmocka_unit_test(test_host_replay_of_direct_kernels_waits_for_work_queued_before_it),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
