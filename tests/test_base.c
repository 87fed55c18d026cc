/* Unit tests for the base library: status, allocator/arena, vectors, hash maps, strings,
 * logging level. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/log.h"
#include "base/status.h"
#include "base/str.h"
#include "base/vec.h"

static kiln_status fail_inner(int x) {
  return kiln_status_make(KILN_INVALID_ARGUMENT, "bad value %d", x);
}

static kiln_status fail_outer(void) {
  KILN_RETURN_IF_ERROR(fail_inner(7), "while reading field '%s'", "size");
  return NULL;
}

static void test_status_carries_code_message_and_location(void **state) {
  (void)state;
  kiln_status s = fail_inner(3);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_string_equal(kiln_status_message(s), "bad value 3");
  assert_true(kiln_str_ends_with(kiln_status_file(s), "test_base.c"));
  assert_true(kiln_status_line(s) > 0);
  assert_string_equal(kiln_status_code_name(kiln_status_code(s)), "INVALID_ARGUMENT");
  kiln_status_free(s);
  assert_null(kiln_status_make(KILN_OK, "ignored"));
  assert_int_equal(kiln_status_code(NULL), KILN_OK);
  assert_string_equal(kiln_status_message(NULL), "");
}

static void test_status_is_annotated_while_propagating(void **state) {
  (void)state;
  kiln_status s = fail_outer();
  assert_string_equal(kiln_status_message(s), "bad value 7; while reading field 'size'");
  kiln_status_free(s);
}

static void test_status_join_keeps_primary_and_appends_cleanup_failure(void **state) {
  (void)state;
  kiln_status a = kiln_status_make(KILN_INTERNAL, "launch failed");
  kiln_status b = kiln_status_make(KILN_UNAVAILABLE, "free failed");
  kiln_status j = kiln_status_join(a, b);
  assert_int_equal(kiln_status_code(j), KILN_INTERNAL);
  assert_string_equal(kiln_status_message(j), "launch failed; free failed");
  kiln_status_free(j);
  kiln_status c = kiln_status_make(KILN_UNAVAILABLE, "only cleanup");
  kiln_status k = kiln_status_join(NULL, c);
  assert_ptr_equal(k, c);
  kiln_status_free(k);
}

static void test_arena_returns_zeroed_aligned_memory_and_honors_limit(void **state) {
  (void)state;
  kiln_arena_t a;
  kiln_arena_init(&a);
  for (int i = 0; i < 1000; i++) {
    unsigned char *p = kiln_arena_alloc(&a, (size_t)(i % 97) + 1);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    for (int k = 0; k < (i % 97) + 1; k++) assert_int_equal(p[k], 0);
    memset(p, 0xab, (size_t)(i % 97) + 1);
  }
  char *big = kiln_arena_alloc(&a, 3u << 20); /* larger than a chunk */
  assert_non_null(big);
  char *s = kiln_arena_printf(&a, "%s-%d", "x", 42);
  assert_string_equal(s, "x-42");
  kiln_arena_destroy(&a);

  kiln_arena_init(&a);
  a.limit = 1024;
  assert_non_null(kiln_arena_alloc(&a, 512));
  assert_null(kiln_arena_alloc(&a, 1024));
  kiln_arena_destroy(&a);
}

/* A counting hook over libc: every allocation, resize and free of kiln goes through it. */
typedef struct counting_alloc {
  int allocs, frees;
} counting_alloc_t;

static void *counting_realloc(void *ctx, void *p, size_t n) {
  counting_alloc_t *c = ctx;
  if (n == 0) {
    if (p) c->frees++;
    free(p);
    return NULL;
  }
  if (!p) c->allocs++;
  return realloc(p, n);
}

static void test_allocator_hook_sees_every_allocation_and_free(void **state) {
  (void)state;
  counting_alloc_t c = {0};
  kiln_allocator_set(&(kiln_allocator_t){counting_realloc, &c});
  char *s = kiln_strdup("kiln");
  int *v = kiln_calloc(16, sizeof(int));
  v = kiln_realloc(v, 64 * sizeof(int));
  kiln_arena_t a;
  kiln_arena_init(&a);
  assert_non_null(kiln_arena_alloc(&a, 100));
  kiln_arena_destroy(&a);
  kiln_free(v);
  kiln_free(s);
  kiln_allocator_set(NULL); /* back to libc */
  assert_true(c.allocs >= 3);
  assert_int_equal(c.allocs, c.frees);
  char *after = kiln_strdup("libc");
  kiln_free(after);
  assert_int_equal(c.allocs, c.frees);
}

static void test_vec_grows_and_keeps_order(void **state) {
  (void)state;
  KILN_VEC(int) v = {0};
  for (int i = 0; i < 10000; i++) kiln_vec_push(&v, i * 3);
  assert_int_equal(v.len, 10000);
  for (int i = 0; i < 10000; i++) assert_int_equal(v.data[i], i * 3);
  assert_int_equal(kiln_vec_pop(&v), 9999 * 3);
  assert_int_equal(kiln_vec_last(&v), 9998 * 3);
  kiln_vec_free(&v);
  assert_null(v.data);
}

static void test_hashmap_insert_replace_lookup(void **state) {
  (void)state;
  kiln_hashmap_t m;
  kiln_hashmap_init(&m);
  char key[32];
  for (intptr_t i = 0; i < 5000; i++) {
    int n = snprintf(key, sizeof key, "name.%ld", (long)i);
    assert_null(kiln_hashmap_put(&m, key, (size_t)n, (void *)(i + 1)));
  }
  assert_int_equal(m.len, 5000);
  for (intptr_t i = 0; i < 5000; i++) {
    int n = snprintf(key, sizeof key, "name.%ld", (long)i);
    assert_ptr_equal(kiln_hashmap_get(&m, key, (size_t)n), (void *)(i + 1));
  }
  assert_null(kiln_hashmap_get_str(&m, "name.5000"));
  assert_false(kiln_hashmap_contains(&m, "name", 4));
  assert_ptr_equal(kiln_hashmap_put(&m, "name.7", 6, (void *)99), (void *)8);
  assert_ptr_equal(kiln_hashmap_get_str(&m, "name.7"), (void *)99);
  kiln_hashmap_free(&m);

  kiln_ptrmap_t pm;
  kiln_ptrmap_init(&pm);
  int objs[300];
  for (int i = 0; i < 300; i++) kiln_ptrmap_put(&pm, &objs[i], (void *)(intptr_t)(i + 10));
  for (int i = 0; i < 300; i++) assert_ptr_equal(kiln_ptrmap_get(&pm, &objs[i]), (void *)(intptr_t)(i + 10));
  assert_false(kiln_ptrmap_contains(&pm, &pm));
  kiln_ptrmap_free(&pm);
}

static void test_strbuf_printf_append_and_take(void **state) {
  (void)state;
  kiln_strbuf_t b = {0};
  assert_string_equal(kiln_strbuf_cstr(&b), "");
  kiln_strbuf_append(&b, "f32[");
  kiln_strbuf_printf(&b, "%d,%d", 2, 3);
  kiln_strbuf_append_char(&b, ']');
  assert_string_equal(kiln_strbuf_cstr(&b), "f32[2,3]");
  for (int i = 0; i < 1000; i++) kiln_strbuf_append(&b, "0123456789");
  assert_int_equal(b.len, 8 + 10000);
  char *s = kiln_strbuf_take(&b);
  assert_null(b.data);
  assert_int_equal(strlen(s), 10008);
  kiln_free(s);
  assert_true(kiln_str_starts_with("HloModule m", "HloModule"));
  assert_false(kiln_str_ends_with("a.hlo", ".txt"));
  assert_true(kiln_hash_bytes("a", 1) != kiln_hash_bytes("b", 1));
}

static void test_read_file_reports_missing_path(void **state) {
  (void)state;
  char *text = NULL;
  kiln_status s = kiln_read_file("/nonexistent/kiln.hlo", &text, NULL);
  assert_int_equal(kiln_status_code(s), KILN_NOT_FOUND);
  assert_non_null(strstr(kiln_status_message(s), "/nonexistent/kiln.hlo"));
  assert_null(text);
  kiln_status_free(s);
}

static void test_log_level_is_settable(void **state) {
  (void)state;
  kiln_log_set_level(KILN_LOG_DEBUG);
  assert_int_equal(kiln_log_level(), KILN_LOG_DEBUG);
  kiln_log_set_level(KILN_LOG_ERROR);
  assert_int_equal(kiln_log_level(), KILN_LOG_ERROR);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_carries_code_message_and_location),
      cmocka_unit_test(test_status_is_annotated_while_propagating),
      cmocka_unit_test(test_status_join_keeps_primary_and_appends_cleanup_failure),
      cmocka_unit_test(test_arena_returns_zeroed_aligned_memory_and_honors_limit),
      cmocka_unit_test(test_allocator_hook_sees_every_allocation_and_free),
      cmocka_unit_test(test_vec_grows_and_keeps_order),
      cmocka_unit_test(test_hashmap_insert_replace_lookup),
      cmocka_unit_test(test_strbuf_printf_append_and_take),
      cmocka_unit_test(test_read_file_reports_missing_path),
      cmocka_unit_test(test_log_level_is_settable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
