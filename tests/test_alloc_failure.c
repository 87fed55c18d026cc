/* Allocation-failure injection, as SQLite tests it: parse + compile + run of five corpus
 * modules on the host backend with the N-th allocation refused (base/alloc.h:
 * kiln_alloc_fail_nth), for every N up to the number of allocations that can fail a clean
 * run makes (with a stride in CI: KILN_ALLOC_SWEEP_STRIDE, default so that about 4 points per
 * module run, 1 under ASan; KILN_ALLOC_SWEEP_STRIDE=1 is the full sweep, KILN_ALLOC_SWEEP_JOBS=N
 * runs N children at a time). Each N runs in a child process, which must
 *   - end the failing run with an error status carrying a message, or succeed (a refused
 *     allocation with a fallback: the caches);
 *   - not crash, and leak nothing (under ASan, LeakSanitizer checks the child before it exits:
 *     exit status 7);
 *   - leave what it was given usable: the device and the module parsed before the failure,
 *     when they were made, then compile and run without injection and match the evaluator.
 * The failure policy (base/alloc.h): what is sized by the user is fallible and reported as
 * RESOURCE_EXHAUSTED (kiln_try_*, the parser's bounded arena, arena blocks over the 1 MiB
 * chunk: literals, arguments) wherever it is allocated; every other allocation (kiln_malloc
 * and its kind, chunks of unbounded arenas: IR, kernel IR, analyses) can fail inside the
 * parsers' and the compiler's out-of-memory scopes, which unwind and return RESOURCE_EXHAUSTED.
 * Those count here too. The runtime's loading and running allocate fallibly (kiln_try_*, errors
 * returned up the call chain), so they count as well, as does what is done while LLVM's
 * results are in hand (the ELF loader, the object-code copy, the kernel cache, the JIT's
 * creation: fallible since session 16). What cannot fail aborts on exhaustion: each module's
 * line gives that count (the test's own argument literals and result shapes, and the client
 * side's arrays in tools/common/pjrt_run.c), and KILN_ALLOC_SWEEP_WHERE=1 prints where each of
 * them is. KILN_ALLOC_SWEEP_ONLY=runtime|plugin|
 * stablehlo|spmd|plugin_spmd runs one sweep; KILN_ALLOC_SWEEP_POINT=N fails point N alone.
 *
 * The same sweep through the PJRT plugin API (GetPjrtApi(), the table linked into this test so
 * that the injection reaches it): PJRT_Client_Create, then PJRT_Client_Compile,
 * PJRT_Client_BufferFromHostBuffer, PJRT_LoadedExecutable_Execute and PJRT_Buffer_ToHostBuffer
 * of a module (tools/common/pjrt_run.h, the way a framework drives the plugin), the N-th
 * allocation refused: every failure must come back as a PJRT error with a code and a
 * message, leak nothing, and leave the client (when it was made) usable: the module then
 * compiles and runs through it and matches the evaluator. The disk cache is off
 * (KILN_CACHE_DIR=""), so every run compiles.
 *
 * The multi-device run path (session 16): a module with an all-reduce and an all-gather on 4
 * host devices, through the runtime (kiln_device_run_module_spmd) and through the plugin (a
 * client of 4 devices, one Execute over all of them). A refusal in any participant must end
 * the run with an error without waiting for the collective deadline (exit status 6; an alarm
 * ends a child that hangs), and the device or client then runs the module again, every
 * participant matching the evaluator. */
#include <execinfo.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/frontend/stablehlo_to_hlo.h"
#include "compiler/hlo/ir.h"
#include "runtime/device.h"
#include "runtime/spmd.h"
#include "tests/skip_util.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "tools/common/pjrt_run.h"

/* The plugin's table, linked into this test (kiln_core holds the plugin layer). */
const PJRT_Api *GetPjrtApi(void);

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif
#if UNDER_ASAN
#include <sanitizer/lsan_interface.h>
#endif

static const char *const kModules[] = {
    "xla/xla__backends__cpu__benchmarks__hlo__mean_axis_1x4096x1024_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__sum_axis_1x4096x1024_bf16.hlo",
    "xla/xla__backends__cpu__benchmarks__hlo__layer_norm_1x4096x768_bf16.hlo",
    "xla/xla__backends__cpu__lite_aot__tests__hlos__multiple_outputs.hlo",
    "xla/xla__tools__tests__data__cholesky.hlo",
};
#define NUM_MODULES (int)(sizeof kModules / sizeof kModules[0])

/* Whether `got`, the result of `m` on `args`, is the evaluator's. */
static kiln_status matches_evaluator(const kiln_hlo_module_t *m, kiln_literal_t **args, int n,
                                     const kiln_literal_t *got, kiln_arena_t *arena) {
  kiln_literal_t *want = NULL;
  kiln_eval_options_t eo = {0};
  kiln_status s = kiln_eval_module(m, &eo, n, args, arena, &want);
  kiln_compare_report_t cr;
  if (!s && !kiln_compare_literals(want, got, NULL, &cr))
    s = KILN_ERR_INTERNAL("differs from the evaluator after an allocation failure: %s", cr.first);
  return s;
}

/* Compiles and runs `m` on `dev` with fake arguments; with `check`, compares with the
 * evaluator. */
static kiln_status run_module(kiln_device_t *dev, const kiln_hlo_module_t *m, bool check) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *got = NULL;
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  kiln_device_run_report_t rep;
  if (!s) s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
  if (!s && check) s = matches_evaluator(m, args, n, got, &arena);
  kiln_arena_destroy(&arena);
  return s;
}

/* KILN_ALLOC_SWEEP_WHERE=1: each allocation the sweep cannot refuse prints its call stack
 * (addr2line turns the offsets into lines). */
static void print_unchecked(size_t n) {
  void *frames[32];
  int k = backtrace(frames, 32);
  fprintf(stderr, "unchecked allocation of %zu bytes:\n", n);
  backtrace_symbols_fd(frames + 1, k - 1, 2);
}

/* Starts the injection for failure point `nth` (0: count only). */
static void injection_start(int64_t nth) {
  const char *where = getenv("KILN_ALLOC_SWEEP_WHERE");
  if (where && atoi(where)) kiln_alloc_set_unchecked_hook(print_unchecked);
  kiln_alloc_fail_nth(nth ? nth : INT64_MAX);
}

/* Ends it; writes the counts (the allocations that could fail, those that could not) to
 * `count_fd` when it is one. False when that write failed. */
static bool injection_stop(int count_fd) {
  int64_t counts[2] = {kiln_alloc_fallible_count(), kiln_alloc_unchecked_count()};
  kiln_alloc_fail_nth(0);
  kiln_alloc_set_unchecked_hook(NULL);
  return count_fd < 0 || write(count_fd, counts, sizeof counts) == (ssize_t)sizeof counts;
}

typedef kiln_status (*device_run_fn)(kiln_device_t *dev, const kiln_hlo_module_t *m, bool check);

/* A failing run that took `ms` of a collective deadline of `deadline_ms` (0: none) waited for
 * it: a participant's peers were not released when it failed. */
static bool waited_for_deadline(double ms, int64_t deadline_ms) {
  return deadline_ms > 0 && ms > (double)deadline_ms / 2;
}

/* The child's whole job for failure point `nth` (0: none, count only), the module run by
 * `run`. Returns its exit code: 0 handled, 2 the failing run returned an error without a
 * message, 3 not usable after, 6 it waited for the collective deadline `deadline_ms`. */
static int child_with(const char *text, size_t len, int64_t nth, int count_fd, device_run_fn run,
                      int64_t deadline_ms) {
  injection_start(nth);
  double t0 = kiln_clock_ms();
  kiln_device_t *dev = NULL;
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_device_create("host", &dev);
  if (!s) s = kiln_hlo_parse_module(text, len, NULL, &m);
  if (!s) s = kiln_hlo_module_verify(m);
  if (!s) s = run(dev, m, false);
  double ms = kiln_clock_ms() - t0;
  int rc = injection_stop(count_fd) ? 0 : 4;
  if (s && !kiln_status_message(s)[0]) rc = 2;
  if (waited_for_deadline(ms, deadline_ms)) rc = 6;
  if (nth) /* the error a user sees (or none: a refusal with a fallback) */
    printf("    point %lld: %s\n", (long long)nth, s ? kiln_status_message(s) : "succeeded");
  kiln_status_free(s);
  /* Usable after: what was made before the failure, then a clean run. */
  s = dev ? NULL : kiln_device_create("host", &dev);
  if (!s && !m) s = kiln_hlo_parse_module(text, len, NULL, &m);
  if (!s) s = run(dev, m, true);
  if (s) {
    fprintf(stderr, "  after failing allocation %lld: %s\n", (long long)nth,
            kiln_status_message(s));
    rc = rc ? rc : 3;
  }
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
  if (dev) kiln_device_destroy(dev);
  return rc;
}

static int child(const char *text, size_t len, int64_t nth, int count_fd) {
  return child_with(text, len, nth, count_fd, run_module, 0);
}

/* Ends a sweep's child with `rc` without running the parent's exit handlers; under ASan,
 * LeakSanitizer checks it first (_exit would skip its check): a leak is exit status 7. */
static void child_exit(int rc) {
  fflush(NULL);
#if UNDER_ASAN
  if (__lsan_do_recoverable_leak_check() && !rc) rc = 7;
#endif
  _exit(rc);
}

/* In a child: a crash must end it (cmocka's handlers would carry on in it). */
static void default_crash_signals(void) {
  signal(SIGSEGV, SIG_DFL);
  signal(SIGBUS, SIG_DFL);
  signal(SIGFPE, SIG_DFL);
  signal(SIGABRT, SIG_DFL);
  signal(SIGILL, SIG_DFL);
}

typedef int (*child_fn)(const char *text, size_t len, int64_t nth, int count_fd);

/* Runs `fn` in a fork; its exit status (or 128 + signal). counts[0..1]: what it wrote
 * (injection_stop), -1 if nothing. */
static int in_child_with(child_fn fn, const char *text, size_t len, int64_t nth, int64_t *counts) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    default_crash_signals();
    close(fds[0]);
    int rc = fn(text, len, nth, fds[1]);
    close(fds[1]);
    fflush(NULL);
    exit(rc);
  }
  close(fds[1]);
  int64_t c[2] = {-1, -1};
  if (read(fds[0], c, sizeof c) != (ssize_t)sizeof c) c[0] = c[1] = -1;
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  memcpy(counts, c, sizeof c);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct sweep {
  int64_t counted, unchecked, points, swept, failures;
} sweep_t;

/* Sweeps the failure points of corpus module `name` (the `i`-th of its test) with `fn` in
 * children: counts them in a clean run, then fails every `stride`-th (odd offsets so that a
 * strided sweep still reaches the last points) and prints what was not handled. */
static void sweep_text(child_fn fn, const char *name, const char *text, size_t len, const char *how,
                       int i, int64_t fixed_stride, int points_per_module, int64_t default_last,
                       bool first, sweep_t *out) {
  int64_t counts[2];
  int rc = in_child_with(fn, text, len, 0, counts);
  assert_int_equal(rc, 0);
  int64_t k = counts[0];
  out->counted = k;
  out->unchecked = counts[1];
  if (k == 0) k = 1; /* none counted: still fail the first, which must be harmless */
  /* KILN_ALLOC_SWEEP_LAST=K: only the last K points (a module's load and run come last);
   * default_last (0: all) when it is not set */
  const char *last_env = getenv("KILN_ALLOC_SWEEP_LAST");
  int64_t want_last = last_env ? atoll(last_env) : default_last;
  int64_t last = want_last > 0 && want_last < k ? want_last : k;
  int64_t stride =
      fixed_stride > 0 ? fixed_stride : (last + points_per_module - 1) / points_per_module;
  /* KILN_ALLOC_SWEEP_POINT=N: that point alone (a developer's look at one failure) */
  const char *point_env = getenv("KILN_ALLOC_SWEEP_POINT");
  if (point_env && atoll(point_env) <= 0) point_env = NULL;
  if (point_env) {
    last = k - atoll(point_env) + 1;
    stride = k + 1;
  }
  /* KILN_ALLOC_SWEEP_JOBS children at a time (default 1) */
  const char *jobs_env = getenv("KILN_ALLOC_SWEEP_JOBS");
  int jobs = jobs_env && atoi(jobs_env) > 0 ? atoi(jobs_env) : 1;
  pid_t *pids = calloc((size_t)jobs, sizeof *pids);
  int64_t *points = calloc((size_t)jobs, sizeof *points);
  int running = 0;
  /* the window: the last `last` points, or with `first`, the first ones (what comes first:
   * a client's creation) */
  int64_t lo = first && !point_env ? 1 : k - last + 1, hi = point_env ? lo : lo + last - 1;
  int64_t n = lo + (stride > 1 && stride <= k ? (int64_t)(i % stride) : 0);
  while (n <= hi || running > 0) {
    if (n <= hi && running < jobs) {
      int slot = 0;
      while (pids[slot]) slot++;
      fflush(NULL);
      pid_t pid = fork();
      if (pid == 0) {
        default_crash_signals();
        child_exit(fn(text, len, n, -1));
      }
      pids[slot] = pid;
      points[slot] = n;
      running++;
      n += stride;
      continue;
    }
    int st = 0;
    pid_t done = wait(&st);
    int slot = 0;
    while (slot < jobs && pids[slot] != done) slot++;
    if (slot == jobs) continue;
    pids[slot] = 0;
    running--;
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    out->swept++;
    if (rc != 0) {
      out->failures++;
      printf("  %s: failing allocation %lld of %lld%s: child exit %d\n", name,
             (long long)points[slot], (long long)k, how, rc);
    }
  }
  free(pids);
  free(points);
  printf(
      "%s%s: %lld allocations that can fail, %lld failure points swept (stride %lld, points "
      "%lld..%lld), %lld not handled; %lld that cannot fail (since session 16 the test's and the "
      "client side's own; KILN_ALLOC_SWEEP_WHERE=1 prints where)\n",
      name, how, (long long)k, (long long)out->swept, (long long)stride, (long long)lo,
      (long long)hi, (long long)out->failures, (long long)out->unchecked);
  out->points = k;
}

/* sweep_text over the corpus module `name` (or a file, given by absolute path). */
static void sweep_module(child_fn fn, const char *name, const char *how, int i,
                         int64_t fixed_stride, int points_per_module, sweep_t *out) {
  char path[4096];
  if (name[0] == '/')
    snprintf(path, sizeof path, "%s", name);
  else
    snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), name);
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, &f);
  if (s) {
    kiln_status_free(s);
    KILN_SKIP("corpus module %s is absent", path);
  }
  sweep_text(fn, name, f->text, f->len, how, i, fixed_stride, points_per_module, 0, false, out);
  kiln_hlo_file_free(f);
}

/* KILN_ALLOC_SWEEP_ONLY=<word> (runtime, plugin, stablehlo, spmd, plugin_spmd) runs only that
 * sweep, for a developer's run; the others print that they were left out. */
static bool sweep_selected(const char *word) {
  const char *only = getenv("KILN_ALLOC_SWEEP_ONLY");
  if (!only || !*only || !strcmp(only, word)) return true;
  printf("sweep '%s' left out (KILN_ALLOC_SWEEP_ONLY=%s)\n", word, only);
  return false;
}

static void test_every_allocation_failure_is_handled(void **state) {
  (void)state;
  if (!sweep_selected("runtime")) return;
  /* KILN_ALLOC_SWEEP_DEBUG=<module index>:<N> runs that one point in this process (for gdb);
   * KILN_ALLOC_SWEEP_FILE=<path> takes that module instead. */
  const char *dbg = getenv("KILN_ALLOC_SWEEP_DEBUG");
  if (dbg) {
    char path[4096];
    int mi = atoi(dbg);
    const char *file = getenv("KILN_ALLOC_SWEEP_FILE"); /* another module, for a look */
    if (file)
      snprintf(path, sizeof path, "%s", file);
    else
      snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), kModules[mi % NUM_MODULES]);
    kiln_hlo_file_t *f = NULL;
    assert_null(kiln_hlo_file_load(path, &f));
    int64_t nth = atoll(strchr(dbg, ':') ? strchr(dbg, ':') + 1 : "1");
    int fds[2] = {-1, -1};
    if (!nth) assert_int_equal(pipe(fds), 0); /* N = 0: count, and print the counts */
    int rc = child(f->text, f->len, nth, fds[1]);
    if (!nth) {
      int64_t counts[2] = {0, 0};
      assert_int_equal(read(fds[0], counts, sizeof counts), (ssize_t)sizeof counts);
      printf("%lld allocations that can fail, %lld that cannot\n", (long long)counts[0],
             (long long)counts[1]);
      close(fds[0]);
      close(fds[1]);
    }
    kiln_hlo_file_free(f);
    assert_int_equal(rc, 0);
    return;
  }
  const char *env = getenv("KILN_ALLOC_SWEEP_STRIDE");
  int64_t fixed_stride = env ? atoll(env) : 0;
  const char *file = getenv("KILN_ALLOC_SWEEP_FILE");
  if (file) { /* one module of the caller's (a ctest: a generated training step) */
    sweep_t sw = {0};
    sweep_module(child, file, "", 0, fixed_stride, UNDER_ASAN ? 8 : 40, &sw);
    assert_int_equal(sw.failures, 0);
    return;
  }
  int points_per_module = UNDER_ASAN ? 1 : 4;
  int64_t total_points = 0, swept = 0, failures = 0;
  /* Under ASan the three benchmark modules (millions of elements through the evaluator in
   * every child) are left to the normal build. */
  int first = UNDER_ASAN ? 3 : 0;
  for (int i = first; i < NUM_MODULES; i++) {
    sweep_t sw = {0};
    sweep_module(child, kModules[i], "", i, fixed_stride, points_per_module, &sw);
    total_points += sw.points;
    swept += sw.swept;
    failures += sw.failures;
  }
  printf(
      "allocation-failure sweep: %lld allocations that can fail over %d modules, %lld swept, %lld "
      "not "
      "handled\n",
      (long long)total_points, NUM_MODULES - first, (long long)swept, (long long)failures);
  assert_true(total_points >= NUM_MODULES - first);
  assert_int_equal(failures, 0);
}

/* ---- multi-device runs ----
 * A module with an all-reduce and an all-gather on SPMD_DEVICES host devices, the world's
 * participants told apart by replica-id. */
#define SPMD_DEVICES 4
/* The runs' collective deadline: a failing run that takes half of it waited for it (exit 6),
 * and an alarm of three times it ends a child that hangs. */
#define SPMD_TIMEOUT_MS 20000

static const char kSpmdModule[] =
    "HloModule spmd_alloc, replica_count=4\n"
    "\n"
    "add {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  p = f32[8,3] parameter(0)\n"
    "  id = u32[] replica-id()\n"
    "  idf = f32[] convert(id)\n"
    "  b = f32[8,3] broadcast(idf), dimensions={}\n"
    "  x = f32[8,3] add(p, b)\n"
    "  ar = f32[8,3] all-reduce(x), replica_groups={}, to_apply=add\n"
    "  ag = f32[32,3] all-gather(x), dimensions={0}, replica_groups={}\n"
    "  ROOT t = (f32[8,3], f32[32,3]) tuple(ar, ag)\n"
    "}\n";

/* Whether got[d], participant d's result of `m` on `args` (the same on every participant), is
 * the evaluator's, for each of the SPMD_DEVICES participants. */
static kiln_status matches_evaluator_spmd(const kiln_hlo_module_t *m, kiln_literal_t **args, int n,
                                          kiln_literal_t *const *got, kiln_arena_t *arena) {
  kiln_literal_t *const *per[SPMD_DEVICES];
  kiln_literal_t *want[SPMD_DEVICES] = {0};
  for (int d = 0; d < SPMD_DEVICES; d++) per[d] = args;
  kiln_eval_spmd_options_t eo = {
      .num_replicas = SPMD_DEVICES, .num_partitions = 1, .timeout_ms = SPMD_TIMEOUT_MS};
  kiln_status s = kiln_eval_module_spmd(m, &eo, n, per, arena, want);
  for (int d = 0; d < SPMD_DEVICES && !s; d++) {
    kiln_compare_report_t cr;
    memset(&cr, 0, sizeof cr);
    if (!got[d] || !kiln_compare_literals(want[d], got[d], NULL, &cr))
      s = KILN_ERR_INTERNAL(
          "participant %d differs from the evaluator after an allocation "
          "failure: %s",
          d, got[d] ? cr.first : "no result");
  }
  return s;
}

/* Compiles and runs `m` on SPMD_DEVICES host devices sharing `dev` (kiln_device_run_module_spmd:
 * collective thunks, kiln_executable_run_spmd's world of participant threads and cliques) with
 * fake arguments; with `check`, compares every participant with the evaluator. */
static kiln_status run_module_spmd(kiln_device_t *dev, const kiln_hlo_module_t *m, bool check) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *got[SPMD_DEVICES] = {0};
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  o.collective_timeout_ms = SPMD_TIMEOUT_MS;
  if (!s) s = kiln_device_run_module_spmd(m, args, n, SPMD_DEVICES, 1, &o, &arena, got, NULL);
  if (!s && check) s = matches_evaluator_spmd(m, args, n, got, &arena);
  kiln_arena_destroy(&arena);
  return s;
}

/* A hang ends the child (SIGALRM: exit status 142) instead of the sweep. */
static void hang_alarm(void) {
  alarm((unsigned)(3 * SPMD_TIMEOUT_MS / 1000) * (UNDER_ASAN ? 4 : 1));
}

static int spmd_child(const char *text, size_t len, int64_t nth, int count_fd) {
  hang_alarm();
  return child_with(text, len, nth, count_fd, run_module_spmd, SPMD_TIMEOUT_MS);
}

/* Compiles and runs `m` through the plugin client of *r (opened first when NULL, with
 * `devices` host devices) with fake arguments made before, on one device or on `devices`
 * replicas (Compile's num_replicas, Execute with one argument list per device); with `check`,
 * compares with the evaluator (every participant's result). */
static kiln_status plugin_run(kiln_pjrt_runner_t **r, const kiln_hlo_module_t *m,
                              kiln_literal_t **args, int n, int devices, bool check) {
  kiln_status s = NULL;
  if (!*r) {
    kiln_pjrt_runner_options_t ro;
    memset(&ro, 0, sizeof ro);
    ro.platform = "cpu";
    ro.num_devices = devices > 1 ? devices : 0;
    ro.api = GetPjrtApi();
    s = kiln_pjrt_runner_open(&ro, r);
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *got[SPMD_DEVICES] = {0};
  kiln_pjrt_run_report_t rep;
  if (!s && devices > 1)
    s = kiln_pjrt_run_module_spmd(*r, m, args, n, devices, 1, NULL, &arena, got, &rep);
  else if (!s)
    s = kiln_pjrt_run_module(*r, m, args, n, NULL, &arena, &got[0], &rep);
  if (!s && check)
    s = devices > 1 ? matches_evaluator_spmd(m, args, n, got, &arena)
                    : matches_evaluator(m, args, n, got[0], &arena);
  kiln_arena_destroy(&arena);
  return s;
}

/* The child's job for failure point `nth` through the plugin (0: none, count only) on
 * `devices` devices: the module is parsed and its arguments made before the injection starts,
 * so only the plugin's allocations count. Exit codes as child_with(). */
static int plugin_child_with(const char *text, size_t len, int64_t nth, int count_fd, int devices) {
  kiln_hlo_module_t *m = NULL;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_status s = kiln_hlo_parse_module(text, len, NULL, &m);
  if (!s) s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
  if (s) {
    fprintf(stderr, "  %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
    kiln_arena_destroy(&arena);
    return 5;
  }
  kiln_pjrt_runner_t *r = NULL;
  injection_start(nth);
  double t0 = kiln_clock_ms();
  s = plugin_run(&r, m, args, n, devices, false);
  double ms = kiln_clock_ms() - t0;
  int rc = injection_stop(count_fd) ? 0 : 4;
  if (s && (!kiln_status_message(s)[0] || kiln_status_code(s) == KILN_OK)) rc = 2;
  /* the plugin's SPMD runs take the default collective deadline */
  if (devices > 1 && waited_for_deadline(ms, KILN_SPMD_DEFAULT_TIMEOUT_MS)) rc = 6;
  if (nth) /* the error a framework sees (or none: a refusal with a fallback) */
    printf("    point %lld: %s\n", (long long)nth, s ? kiln_status_message(s) : "succeeded");
  kiln_status_free(s);
  /* Usable after: the client made before the failure (or a new one), then a clean run. */
  s = plugin_run(&r, m, args, n, devices, true);
  if (s) {
    fprintf(stderr, "  after failing allocation %lld through the plugin: %s\n", (long long)nth,
            kiln_status_message(s));
    rc = rc ? rc : 3;
  }
  kiln_status_free(s);
  kiln_pjrt_runner_close(r);
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&arena);
  return rc;
}

static int plugin_child(const char *text, size_t len, int64_t nth, int count_fd) {
  return plugin_child_with(text, len, nth, count_fd, 1);
}

static int plugin_spmd_child(const char *text, size_t len, int64_t nth, int count_fd) {
  hang_alarm();
  return plugin_child_with(text, len, nth, count_fd, SPMD_DEVICES);
}

/* The modules of the plugin sweep: small ones (each point compiles the module again). */
static const char *const kPluginModules[] = {
    "xla/xla__backends__cpu__lite_aot__tests__hlos__multiple_outputs.hlo",
    "xla/xla__tools__tests__data__cholesky.hlo",
};
#define NUM_PLUGIN_MODULES (int)(sizeof kPluginModules / sizeof kPluginModules[0])

static void test_every_allocation_failure_through_the_plugin_is_handled(void **state) {
  (void)state;
  if (!sweep_selected("plugin")) return;
  setenv("KILN_CACHE_DIR", "", 1);
  const char *env = getenv("KILN_ALLOC_SWEEP_STRIDE");
  int64_t fixed_stride = env ? atoll(env) : 0;
  int points_per_module = UNDER_ASAN ? 2 : 6;
  int64_t total_points = 0, swept = 0, failures = 0;
  for (int i = 0; i < NUM_PLUGIN_MODULES; i++) {
    sweep_t sw = {0};
    sweep_module(plugin_child, kPluginModules[i], " through the plugin", i, fixed_stride,
                 points_per_module, &sw);
    /* The plugin's allocations of user-sized data (programs, device buffers) are fallible. */
    assert_true(sw.counted > 0);
    total_points += sw.points;
    swept += sw.swept;
    failures += sw.failures;
  }
  printf(
      "plugin allocation-failure sweep: %lld allocations that can fail over %d modules, %lld "
      "swept, "
      "%lld not handled\n",
      (long long)total_points, NUM_PLUGIN_MODULES, (long long)swept, (long long)failures);
  assert_int_equal(failures, 0);
}

/* The StableHLO path a JAX program takes (MLIR text read, converted to HLO, parsed, all in
 * out-of-memory scopes): every allocation it makes fails in turn, in this process (an unwind
 * returns; under ASan, LeakSanitizer checks at exit that nothing of the failed reads leaked),
 * and each failure is RESOURCE_EXHAUSTED with a message, each success the same module as a
 * clean read. A JAX-style test of StableHLO's suite (testdata-sample, beside the corpus). */
static void test_every_allocation_failure_of_a_stablehlo_read_is_handled(void **state) {
  (void)state;
  if (!sweep_selected("stablehlo")) return;
  char path[4096];
  snprintf(path, sizeof path,
           "%s/../stablehlo/testdata-sample/add_float16_20_20_float16_20_20.mlir",
           kiln_corpus_dir());
  char *text = NULL;
  size_t len = 0;
  kiln_status s = kiln_read_file(path, &text, &len);
  if (s) {
    kiln_status_free(s);
    KILN_SKIP("%s is absent", path);
  }
  kiln_hlo_module_t *clean = NULL;
  kiln_alloc_fail_nth(INT64_MAX);
  s = kiln_stablehlo_module_from_bytes(text, len, path, &clean);
  int64_t points = kiln_alloc_fallible_count();
  kiln_alloc_fail_nth(0);
  assert_null(s);
  char *want = kiln_hlo_module_to_string(clean);
  kiln_hlo_module_destroy(clean);
  assert_true(points > 100); /* the reader's, the converter's and the HLO parser's */
  int64_t failed = 0;
  for (int64_t n = 1; n <= points; n++) {
    kiln_hlo_module_t *m = NULL;
    kiln_alloc_fail_nth(n);
    s = kiln_stablehlo_module_from_bytes(text, len, path, &m);
    kiln_alloc_fail_nth(0);
    if (s) {
      /* an unwound scope's "out of host memory ..." or a fallible refusal's own message */
      assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
      assert_true(kiln_status_message(s)[0] != 0);
      assert_null(m);
      failed++;
    } else {
      char *got = kiln_hlo_module_to_string(m);
      assert_string_equal(got, want);
      kiln_free(got);
      kiln_hlo_module_destroy(m);
    }
    kiln_status_free(s);
  }
  printf("StableHLO read: %lld allocations that can fail, %lld failed with RESOURCE_EXHAUSTED\n",
         (long long)points, (long long)failed);
  assert_int_equal(failed, points);
  kiln_free(want);
  kiln_free(text);
}

/* The multi-device run path: every allocation of parse + compile + load + run of kSpmdModule on
 * SPMD_DEVICES host devices (kiln_device_run_module_spmd) can be refused; a refusal in one
 * participant (its thread, its buffers, a clique, a collective's staging) aborts the world, so
 * its peers return at once instead of at the collective deadline; nothing leaks and the device
 * then runs the module again, every participant matching the evaluator. CI sweeps a stride of
 * the last SPMD_LAST_POINTS points (the load, uploads, the world's run and downloads);
 * KILN_ALLOC_SWEEP_STRIDE=1 KILN_ALLOC_SWEEP_LAST=0 is the full sweep. */
#define SPMD_LAST_POINTS 150

/* Sweeps kSpmdModule with `fn`: the last SPMD_LAST_POINTS points (or KILN_ALLOC_SWEEP_LAST's)
 * and, with `first_points` and no KILN_ALLOC_SWEEP_LAST, the first ones too. */
static void sweep_spmd(child_fn fn, const char *what, const char *how, int64_t first_points) {
  const char *env = getenv("KILN_ALLOC_SWEEP_STRIDE");
  int64_t fixed_stride = env ? atoll(env) : 0;
  for (int w = first_points > 0 && !getenv("KILN_ALLOC_SWEEP_LAST") ? 0 : 1; w < 2; w++) {
    sweep_t sw = {0};
    sweep_text(fn, what, kSpmdModule, strlen(kSpmdModule), how, 0, fixed_stride, UNDER_ASAN ? 3 : 8,
               w == 0 ? first_points : SPMD_LAST_POINTS, w == 0, &sw);
    assert_true(sw.counted > 0);
    assert_int_equal(sw.failures, 0);
  }
}

static void test_every_allocation_failure_of_a_multi_device_run_is_handled(void **state) {
  (void)state;
  if (!sweep_selected("spmd")) return;
  sweep_spmd(spmd_child, "all-reduce + all-gather on 4 host devices", "", 0);
}

/* The same module through the plugin: PJRT_Client_Create of a client with SPMD_DEVICES host
 * devices, Compile for that many replicas, BufferFromHostBuffer per device, one Execute with
 * an argument list per device, ToHostBuffer of every result. CI sweeps a stride of the first
 * SPMD_CLIENT_POINTS points (the client's creation: 55 in session 16) and of the last
 * SPMD_LAST_POINTS (the execute). */
#define SPMD_CLIENT_POINTS 60
static void test_every_allocation_failure_of_a_multi_device_execute_through_the_plugin_is_handled(
    void **state) {
  (void)state;
  if (!sweep_selected("plugin_spmd")) return;
  setenv("KILN_CACHE_DIR", "", 1);
  sweep_spmd(plugin_spmd_child, "all-reduce + all-gather on 4 host devices", " through the plugin",
             SPMD_CLIENT_POINTS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_allocation_failure_is_handled),
      cmocka_unit_test(test_every_allocation_failure_through_the_plugin_is_handled),
      cmocka_unit_test(test_every_allocation_failure_of_a_stablehlo_read_is_handled),
      cmocka_unit_test(test_every_allocation_failure_of_a_multi_device_run_is_handled),
      cmocka_unit_test(
          test_every_allocation_failure_of_a_multi_device_execute_through_the_plugin_is_handled),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
