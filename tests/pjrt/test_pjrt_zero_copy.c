/* Zero-copy host buffers (PJRT_Client_BufferFromHostBuffer): on the host platform the buffer
 * aliases the caller's memory (its UnsafePointer is the caller's pointer) and
 * done_with_host_buffer completes only when the last buffer using the memory is destroyed.
 * kMutableZeroCopy: an execute that donates it writes its aliased output into that memory.
 * kImmutableZeroCopy: nothing writes it, not even an execute donated the buffer, a control
 * dependency's buffer over it or an alias buffer fulfilled with it (the buffer reads as
 * donated, the run writes its output into a copy). Memory kiln
 * cannot use as it is (not 16-byte aligned, or strided differently from the device layout) is
 * copied, the done event ready at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"
#include "skip_util.h"

static const PJRT_Api *api;
static PJRT_Client *g_client;
static PJRT_Device *g_dev;

static int setup(void **state) {
  (void)state;
  api = pjrt_test_load();
  if (!api) return -1;
  g_client = pjrt_exec_client(api, NULL);
  g_dev = pjrt_exec_device(api, g_client, 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  pjrt_test_client_destroy(api, g_client);
  return 0;
}

static bool is_ready(PJRT_Event *e) {
  PJRT_Event_IsReady_Args a = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&a));
  return a.is_ready;
}

static void *unsafe_pointer(PJRT_Buffer *b) {
  PJRT_Buffer_UnsafePointer_Args a = {.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE,
                                      .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_UnsafePointer(&a));
  return (void *)(uintptr_t)a.buffer_pointer;
}

static bool is_deleted(PJRT_Buffer *b) {
  PJRT_Buffer_IsDeleted_Args a = {.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE,
                                  .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_IsDeleted(&a));
  return a.is_deleted;
}

/* f32[16] of `data` with `semantics`; *done gets its done_with_host_buffer. */
static PJRT_Buffer *zero_copy(float *data, const int64_t *byte_strides,
                              PJRT_HostBufferSemantics semantics, PJRT_Event **done) {
  const int64_t dims[1] = {16};
  PJRT_Client_BufferFromHostBuffer_Args a = {
      .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
      .client = g_client,
      .data = data,
      .type = PJRT_Buffer_Type_F32,
      .dims = dims,
      .num_dims = 1,
      .byte_strides = byte_strides,
      .num_byte_strides = byte_strides ? 1 : 0,
      .host_buffer_semantics = semantics,
      .device = g_dev};
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  assert_non_null(a.buffer);
  assert_non_null(a.done_with_host_buffer);
  *done = a.done_with_host_buffer;
  return a.buffer;
}

static PJRT_Buffer *mutable_zero_copy(float *data, const int64_t *byte_strides, PJRT_Event **done) {
  return zero_copy(data, byte_strides, PJRT_HostBufferSemantics_kMutableZeroCopy, done);
}

static const char kNeg[] =
    "HloModule neg\nENTRY main {\n  x = f32[16] parameter(0)\n  ROOT y = f32[16] negate(x)\n}\n";
static const char kNegInPlace[] =
    "HloModule neg_in_place, input_output_alias={ {}: (0, {}, must-alias) }\n"
    "ENTRY main {\n  x = f32[16] parameter(0)\n  ROOT y = f32[16] negate(x)\n}\n";

/* Expects `out` to hold -0 .. -15 and not to be at `mem`. */
static void expect_negated_elsewhere(PJRT_Buffer *out, const float *mem) {
  assert_ptr_not_equal(unsafe_pointer(out), mem);
  float y[16];
  pjrt_exec_read(api, out, y, sizeof(y));
  for (int i = 0; i < 16; i++) assert_float_equal(y[i], -(float)i, 0);
}

static void expect_untouched(const float *mem) {
  for (int i = 0; i < 16; i++) assert_float_equal(mem[i], (float)i, 0);
}

static void test_mutable_zero_copy_aliases_and_donation_writes_in_place(void **state) {
  (void)state;
  float *x = aligned_alloc(64, 64 * sizeof(float));
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  PJRT_Event *done = NULL;
  PJRT_Buffer *b = mutable_zero_copy(x, NULL, &done);
  assert_ptr_equal(unsafe_pointer(b), x);
  assert_false(is_ready(done)); /* kiln uses the memory while the buffer lives */
  /* a read-only execute leaves it alone */
  PJRT_LoadedExecutable *neg = pjrt_exec_compile(api, g_client, kNeg);
  PJRT_Buffer *out = NULL;
  pjrt_exec_run(api, neg, &b, 1, &out);
  float y[16];
  pjrt_exec_read(api, out, y, sizeof(y));
  for (int i = 0; i < 16; i++) assert_float_equal(y[i], -(float)i, 0);
  pjrt_exec_buffer_destroy(api, out);
  assert_float_equal(x[3], 3.0f, 0);
  /* donated: the output is written into the caller's memory and keeps it */
  PJRT_LoadedExecutable *neg_in_place = pjrt_exec_compile(api, g_client, kNegInPlace);
  pjrt_exec_run(api, neg_in_place, &b, 1, &out);
  assert_true(is_deleted(b));
  assert_ptr_equal(unsafe_pointer(out), x);
  for (int i = 0; i < 16; i++) assert_float_equal(x[i], -(float)i, 0);
  pjrt_exec_buffer_destroy(api, b);
  assert_false(is_ready(done)); /* the output still uses the memory */
  pjrt_exec_buffer_destroy(api, out);
  assert_true(is_ready(done));
  pjrt_exec_await(api, done);
  free(x); /* the caller may free it now */
  pjrt_exec_destroy(api, neg);
  pjrt_exec_destroy(api, neg_in_place);
}

static void test_mutable_zero_copy_destroy_completes_the_done_event(void **state) {
  (void)state;
  float *x = aligned_alloc(64, 64 * sizeof(float));
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  PJRT_Event *done = NULL;
  PJRT_Buffer *b = mutable_zero_copy(x, NULL, &done);
  /* a copy to another memory does not hold the caller's memory */
  float y[16];
  pjrt_exec_read(api, b, y, sizeof(y));
  assert_memory_equal(x, y, sizeof(y));
  assert_false(is_ready(done));
  pjrt_exec_buffer_destroy(api, b);
  assert_true(is_ready(done));
  pjrt_exec_await(api, done);
  free(x);
}

/* Memory kiln cannot alias is copied: unaligned, or strided unlike the device layout. */
static void test_mutable_zero_copy_copies_what_it_cannot_alias(void **state) {
  (void)state;
  float *mem = aligned_alloc(64, 64 * sizeof(float));
  for (int i = 0; i < 64; i++) mem[i] = (float)i;
  const int64_t every_other[1] = {2 * sizeof(float)};
  struct {
    float *data;
    const int64_t *strides;
  } cases[2] = {{mem + 1, NULL}, {mem, every_other}};
  for (int c = 0; c < 2; c++) {
    PJRT_Event *done = NULL;
    PJRT_Buffer *b = mutable_zero_copy(cases[c].data, cases[c].strides, &done);
    assert_true(is_ready(done));
    pjrt_exec_await(api, done);
    assert_ptr_not_equal(unsafe_pointer(b), cases[c].data);
    float y[16];
    pjrt_exec_read(api, b, y, sizeof(y));
    for (int i = 0; i < 16; i++)
      assert_float_equal(y[i], c == 0 ? (float)(i + 1) : (float)(2 * i), 0);
    pjrt_exec_buffer_destroy(api, b);
  }
  free(mem);
}

/* kImmutableZeroCopy aliases memory aligned to 16 bytes (XLA:CPU's rule; here not to 64): read
 * in place, copied when donated, the done event complete when the buffer is gone. */
static void test_immutable_zero_copy_aliases_and_donation_copies(void **state) {
  (void)state;
  float *mem = aligned_alloc(64, 64 * sizeof(float));
  float *x = mem + 4;
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  PJRT_Event *done = NULL;
  PJRT_Buffer *b = zero_copy(x, NULL, PJRT_HostBufferSemantics_kImmutableZeroCopy, &done);
  assert_ptr_equal(unsafe_pointer(b), x);
  assert_false(is_ready(done));
  PJRT_LoadedExecutable *neg = pjrt_exec_compile(api, g_client, kNeg);
  PJRT_LoadedExecutable *neg_in_place = pjrt_exec_compile(api, g_client, kNegInPlace);
  PJRT_Buffer *out = NULL;
  pjrt_exec_run(api, neg, &b, 1, &out);
  expect_negated_elsewhere(out, x);
  pjrt_exec_buffer_destroy(api, out);
  /* donated: the buffer reads as donated, the run writes its output into a copy, and the
   * caller's memory is released once the run is done */
  pjrt_exec_run(api, neg_in_place, &b, 1, &out);
  assert_true(is_deleted(b));
  expect_negated_elsewhere(out, x);
  expect_untouched(x);
  pjrt_exec_await(api, done);
  pjrt_exec_buffer_destroy(api, out);
  pjrt_exec_buffer_destroy(api, b);
  free(mem);
  pjrt_exec_destroy(api, neg);
  pjrt_exec_destroy(api, neg_in_place);
}

/* Views of immutable memory are not written either: a control dependency's buffer over it,
 * and an alias buffer an execute was donated before it was fulfilled with it. */
static void test_views_of_immutable_memory_are_never_written(void **state) {
  (void)state;
  float *x = aligned_alloc(64, 16 * sizeof(float));
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  PJRT_Event *done = NULL;
  PJRT_Buffer *b = zero_copy(x, NULL, PJRT_HostBufferSemantics_kImmutableZeroCopy, &done);
  PJRT_LoadedExecutable *neg_in_place = pjrt_exec_compile(api, g_client, kNegInPlace);
  /* DonateWithControlDependency: the new buffer views x */
  PJRT_Buffer_DonateWithControlDependency_Args d = pjrt_exec_donate_later(api, b);
  pjrt_exec_dependency_ready(&d);
  PJRT_Buffer *moved = d.out_buffer;
  assert_ptr_equal(unsafe_pointer(moved), x);
  /* a view of it is copied too: an alias buffer donated while it waits, then fulfilled with
   * the moved buffer */
  PJRT_Buffer *out = NULL;
  const int64_t dims[1] = {16};
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = pjrt_exec_alias_buffer(api, g_client, g_dev, dims, 1, &cb);
  PJRT_Event *ran = NULL;
  PJRT_CHECK(api, pjrt_exec_start(api, neg_in_place, &alias, 1, &out, NULL, &ran));
  PJRT_CHECK(api, pjrt_exec_fulfil(api, cb, moved));
  pjrt_exec_await(api, ran);
  expect_negated_elsewhere(out, x);
  expect_untouched(x);
  pjrt_exec_buffer_destroy(api, out);
  pjrt_exec_buffer_destroy(api, alias);
  pjrt_exec_buffer_destroy(api, b);
  assert_false(is_ready(done)); /* `moved` still uses x */
  /* the control dependency's buffer itself donated: copied as well */
  pjrt_exec_run(api, neg_in_place, &moved, 1, &out);
  assert_true(is_deleted(moved));
  expect_negated_elsewhere(out, x);
  expect_untouched(x);
  pjrt_exec_await(api, done); /* nothing uses x once that run is done */
  pjrt_exec_buffer_destroy(api, out);
  pjrt_exec_buffer_destroy(api, moved);
  free(x);
  pjrt_exec_destroy(api, neg_in_place);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mutable_zero_copy_aliases_and_donation_writes_in_place),
      cmocka_unit_test(test_mutable_zero_copy_destroy_completes_the_done_event),
      cmocka_unit_test(test_mutable_zero_copy_copies_what_it_cannot_alias),
      cmocka_unit_test(test_immutable_zero_copy_aliases_and_donation_copies),
      cmocka_unit_test(test_views_of_immutable_memory_are_never_written),
  };
  return kiln_run_tests(tests, setup, teardown);
}
