/* Out-of-memory scopes (base/alloc.h): an allocation that fails inside a scope unwinds it,
 * freeing every block and running every cleanup it made, and leaves older objects intact. The
 * allocator hook counts live blocks, so "nothing leaks" is checked exactly. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"

typedef struct counting {
  pthread_mutex_t mu;
  long live; /* blocks allocated and not freed */
} counting_t;

static counting_t g_count = {PTHREAD_MUTEX_INITIALIZER, 0};

static void *counting_realloc(void *ctx, void *p, size_t n) {
  counting_t *c = ctx;
  if (n == 0) {
    if (p) {
      pthread_mutex_lock(&c->mu);
      c->live--;
      pthread_mutex_unlock(&c->mu);
    }
    free(p);
    return NULL;
  }
  void *q = realloc(p, n);
  if (q && !p) {
    pthread_mutex_lock(&c->mu);
    c->live++;
    pthread_mutex_unlock(&c->mu);
  }
  return q;
}

static int setup(void **state) {
  (void)state;
  kiln_allocator_set(&(kiln_allocator_t){counting_realloc, &g_count});
  return 0;
}
static int teardown(void **state) {
  (void)state;
  kiln_alloc_fail_nth(0);
  kiln_allocator_set(NULL);
  return 0;
}

static long live(void) {
  pthread_mutex_lock(&g_count.mu);
  long n = g_count.live;
  pthread_mutex_unlock(&g_count.mu);
  return n;
}

typedef struct older {
  char *block;        /* allocated before the scope */
  kiln_arena_t arena; /* made before the scope */
} older_t;

static int g_cleanups;
static void count_cleanup(void *arg) {
  (void)arg;
  g_cleanups++;
}

/* Work that allocates in every way a scope records, grows the older objects, and registers
 * a cleanup; `n` rounds. */
static kiln_status work(older_t *o, int n) {
  kiln_oom_cleanup_t c;
  kiln_oom_defer(&c, count_cleanup, NULL);
  kiln_arena_t mine;
  kiln_arena_init(&mine);
  char **kept = NULL;
  for (int i = 0; i < n; i++) {
    kept = kiln_realloc(kept, sizeof(char *) * (size_t)(i + 1));
    kept[i] = kiln_strdup("a block the scope records");
    int *v = kiln_calloc(100, sizeof(int));
    v = kiln_realloc(v, 5000 * sizeof(int));
    kiln_free(v);
    assert_non_null(kiln_arena_alloc(&mine, 3000));
    assert_non_null(kiln_arena_alloc(&o->arena, 3000));
    o->block = kiln_realloc(o->block, 64 + (size_t)i * 512);
    o->block[0] = 'k';
  }
  for (int i = 0; i < n; i++) kiln_free(kept[i]);
  kiln_free(kept);
  kiln_arena_destroy(&mine);
  kiln_oom_undefer(&c);
  return NULL;
}

/* Runs work() in a scope with the `nth` allocation refused (0: none, counting them into
 * *points). */
static kiln_status scoped_work(older_t *o, int n, int64_t nth, int64_t *points) {
  kiln_oom_scope_t scope;
  kiln_alloc_fail_nth(nth ? nth : INT64_MAX);
  kiln_oom_scope_enter(&scope);
  if (setjmp(scope.env)) {
    kiln_alloc_fail_nth(0);
    return kiln_oom_scope_error(&scope, "doing the work");
  }
  kiln_status s = work(o, n);
  s = kiln_oom_scope_leave(&scope, s);
  if (points) *points = kiln_alloc_fallible_count();
  kiln_alloc_fail_nth(0);
  return s;
}

static void test_every_allocation_of_a_scope_can_fail_and_nothing_leaks(void **state) {
  (void)state;
  older_t o;
  o.block = kiln_strdup("older");
  kiln_arena_init(&o.arena);
  int64_t points = 0;
  kiln_status s = scoped_work(&o, 12, 0, &points);
  assert_null(s);
  assert_true(points > 12 * 5);
  int unwound = 0;
  for (int64_t nth = 1; nth <= points; nth++) {
    /* the same older objects each time, so that every run makes the same allocations */
    kiln_free(o.block);
    o.block = kiln_strdup("older");
    kiln_arena_destroy(&o.arena);
    kiln_arena_init(&o.arena);
    g_cleanups = 0;
    s = scoped_work(&o, 12, nth, NULL);
    if (s) {
      assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
      assert_non_null(strstr(kiln_status_message(s), "while doing the work"));
      assert_int_equal(g_cleanups, 1);
      unwound++;
    }
    kiln_status_free(s);
    /* the older objects grew or not, but hold no freed memory: use them */
    assert_true(o.block[0] == 'k' || o.block[0] == 'o');
    assert_non_null(kiln_arena_alloc(&o.arena, 10));
  }
  assert_int_equal(unwound, points);
  /* everything the scopes allocated is gone: only the older objects remain, then nothing */
  kiln_free(o.block);
  kiln_arena_destroy(&o.arena);
  assert_int_equal(live(), 0);
}

static kiln_status inner_entry(older_t *o) {
  kiln_oom_scope_t scope;
  kiln_oom_scope_enter(&scope);
  if (setjmp(scope.env)) return kiln_oom_scope_error(&scope, "inner");
  return kiln_oom_scope_leave(&scope, work(o, 3));
}

static void test_a_nested_scope_unwinds_to_the_outermost(void **state) {
  (void)state;
  older_t o;
  o.block = kiln_strdup("older");
  kiln_arena_init(&o.arena);
  kiln_oom_scope_t scope;
  kiln_alloc_fail_nth(20);
  kiln_oom_scope_enter(&scope);
  if (setjmp(scope.env)) {
    kiln_alloc_fail_nth(0);
    kiln_status s = kiln_oom_scope_error(&scope, "outer");
    assert_non_null(strstr(kiln_status_message(s), "while outer"));
    kiln_status_free(s);
    kiln_free(o.block);
    kiln_arena_destroy(&o.arena);
    assert_int_equal(live(), 0);
    return;
  }
  (void)kiln_malloc(10); /* recorded: freed by the unwind */
  kiln_status s = inner_entry(&o);
  s = inner_entry(&o);
  s = kiln_oom_scope_leave(&scope, s);
  fail_msg("the 20th allocation did not unwind (%s)", s ? kiln_status_message(s) : "ok");
}

typedef struct worker_arg {
  kiln_oom_region_t *region;
  older_t *o;
  char *result; /* handed to the owner */
  kiln_status status;
} worker_arg_t;

static void *worker(void *p) {
  worker_arg_t *w = p;
  kiln_oom_scope_t scope;
  kiln_oom_scope_join(&scope, w->region);
  if (setjmp(scope.env)) {
    w->status = kiln_oom_scope_error(&scope, "in a worker");
    return NULL;
  }
  kiln_arena_t a;
  kiln_arena_init(&a);
  for (int i = 0; i < 50; i++) assert_non_null(kiln_arena_alloc(&a, 2000));
  w->result = kiln_strdup("made by a worker");
  kiln_arena_destroy(&a);
  w->status = kiln_oom_scope_leave(&scope, NULL);
  return NULL;
}

static int64_t g_points;

/* The owner runs a worker that joins its region, then allocates some more. */
static kiln_status owner_with_worker(int64_t nth, char **result) {
  kiln_oom_scope_t scope;
  kiln_alloc_fail_nth(nth ? nth : INT64_MAX);
  kiln_oom_scope_enter(&scope);
  if (setjmp(scope.env)) {
    kiln_alloc_fail_nth(0);
    return kiln_oom_scope_error(&scope, "owning");
  }
  char *mine = kiln_strdup("the owner's");
  worker_arg_t w = {kiln_oom_current_region(), NULL, NULL, NULL};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, worker, &w), 0);
  pthread_join(t, NULL);
  kiln_status s = w.status;
  if (!s) {
    *result = kiln_malloc(strlen(w.result) + strlen(mine) + 2);
    strcpy(*result, w.result);
    kiln_free(w.result);
  }
  kiln_free(mine);
  s = kiln_oom_scope_leave(&scope, s);
  g_points = kiln_alloc_fallible_count();
  kiln_alloc_fail_nth(0);
  if (s) *result = NULL; /* freed with the region */
  return s;
}

static void test_a_worker_failure_fails_the_owner_and_nothing_leaks(void **state) {
  (void)state;
  char *r = NULL;
  assert_null(owner_with_worker(0, &r));
  int64_t points = g_points;
  assert_true(points > 5);
  assert_string_equal(r, "made by a worker");
  kiln_free(r);
  assert_int_equal(live(), 0);
  for (int64_t nth = 1; nth <= points; nth++) {
    r = NULL;
    kiln_status s = owner_with_worker(nth, &r);
    assert_non_null(s);
    assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
    kiln_status_free(s);
    assert_null(r);
    assert_int_equal(live(), 0);
  }
}

static void test_blocks_of_a_scope_left_normally_are_the_callers(void **state) {
  (void)state;
  older_t o;
  o.block = NULL;
  kiln_arena_init(&o.arena);
  assert_null(scoped_work(&o, 2, 0, NULL));
  kiln_oom_scope_t scope;
  kiln_oom_scope_enter(&scope);
  if (setjmp(scope.env)) fail_msg("unexpected unwind");
  char *kept = kiln_strdup("kept");
  kiln_arena_t a;
  kiln_arena_init(&a);
  char *in_arena = kiln_arena_strdup(&a, "arena");
  assert_null(kiln_oom_scope_leave(&scope, NULL));
  /* after the scope: still valid, freed by their owner; a later scope does not record them */
  assert_string_equal(kept, "kept");
  assert_string_equal(in_arena, "arena");
  kiln_alloc_fail_nth(1);
  kiln_oom_scope_enter(&scope);
  if (setjmp(scope.env)) {
    kiln_alloc_fail_nth(0);
    kiln_status s = kiln_oom_scope_error(&scope, "second");
    kiln_status_free(s);
    assert_string_equal(kept, "kept");
    assert_string_equal(in_arena, "arena");
    kiln_free(kept);
    kiln_arena_destroy(&a);
    kiln_free(o.block);
    kiln_arena_destroy(&o.arena);
    assert_int_equal(live(), 0);
    return;
  }
  (void)kiln_malloc(1);
  fail_msg("the first allocation did not unwind");
}

static void test_outside_a_scope_nothing_bookkeeping_is_refused(void **state) {
  (void)state;
  kiln_alloc_fail_nth(1);
  char *s = kiln_strdup("never refused outside a scope");
  assert_int_equal(kiln_alloc_fallible_count(), 0);
  assert_int_equal(kiln_alloc_unchecked_count(), 1); /* what a sweep cannot reach */
  assert_null(kiln_try_malloc(10)); /* fallible ones still are */
  assert_int_equal(kiln_alloc_unchecked_count(), 1);
  kiln_alloc_fail_nth(0);
  kiln_free(s);
  assert_int_equal(live(), 0);
}

static kiln_status allocate_one(void) {
  kiln_free(kiln_malloc(16));
  return NULL;
}

/* An entry point of its own: a scope that returns RESOURCE_EXHAUSTED when its allocation is
 * refused. */
static kiln_status scoped_allocation(void) {
  KILN_OOM_SCOPED_RETURN(allocate_one(), (void)0, "a test allocation");
}

static void test_a_lock_around_scopes_holds_only_inside_a_scope(void **state) {
  (void)state;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  /* Outside a scope: the call under the lock opens its own, whose allocation can fail. */
  bool held = kiln_mutex_lock_around_scopes(&mu);
  assert_false(held);
  kiln_alloc_fail_nth(1);
  kiln_status s = scoped_allocation();
  assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
  kiln_status_free(s);
  kiln_mutex_unlock_around_scopes(&mu, held);
  /* Inside a scope the lock holds it: an unwind must not cross the lock. */
  kiln_oom_scope_t scope;
  kiln_oom_scope_enter(&scope);
  if (setjmp(scope.env)) fail_msg("an allocation under the lock unwound");
  kiln_alloc_fail_nth(1);
  held = kiln_mutex_lock_around_scopes(&mu);
  assert_true(held);
  assert_null(scoped_allocation()); /* nested and held: not refused */
  kiln_mutex_unlock_around_scopes(&mu, held);
  kiln_alloc_fail_nth(0);
  assert_null(kiln_oom_scope_leave(&scope, NULL));
  assert_int_equal(live(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_allocation_of_a_scope_can_fail_and_nothing_leaks,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_nested_scope_unwinds_to_the_outermost, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_worker_failure_fails_the_owner_and_nothing_leaks,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_blocks_of_a_scope_left_normally_are_the_callers, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_outside_a_scope_nothing_bookkeeping_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_lock_around_scopes_holds_only_inside_a_scope, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
