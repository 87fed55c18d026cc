/* kiln-fuzz: differential fuzzing of the whole compiler (tools/common/hlo_gen.h for the
 * programs, tools/common/hlo_gen_diff.h for the test). Each generated module is compiled and
 * run on the host backend and compared with the reference evaluator; a failure is bisected to
 * the pass that introduced it, minimized, and written as a small .hlo reproducer.
 *
 * With --fork (the default from 1,000 programs up) every test runs in a forked worker process
 * that makes its own host device and takes one test after another (the module text, result
 * and coverage pass through a shared mapping, a byte on a pipe each way says when), so a
 * crash, abort or hang (past --timeout) is caught in the parent, reported with its seed and
 * minimized like a mismatch; the next test starts a new worker. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/str.h"
#include "runtime/device.h"
#include "tools/common/hlo_file.h"
#include "tools/common/hlo_gen.h"
#include "tools/common/hlo_gen_diff.h"

#define FORK_DEFAULT_FROM 1000 /* programs: a run this long forks unless --no-fork */
#define MINIMIZE_TRIES 300
#define MINIMIZE_TIMEOUT_TRIES 12 /* a hang costs a whole timeout per try */

/* SIGINT / SIGTERM: finish the program under test, then print the table and stop. */
static volatile sig_atomic_t g_stop;
static void on_stop_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: kiln-fuzz [--programs=N] [--seed=S] [--max-nodes=K] [--max-elements=E]\n"
      "                 [--out=DIR] [--fork|--no-fork] [--timeout=SECONDS] [--no-minimize]\n"
      "                 [--verbose] [--quiet] [--selftest-crash=TEXT] [--selftest-hang=TEXT]\n"
      "       kiln-fuzz --print=SEED           print the program of one seed\n"
      "       kiln-fuzz [--fork] FILE.hlo ...  run the differential test on files\n"
      "       kiln-fuzz --merge-coverage LOG ...  add up the coverage tables of kiln-fuzz logs\n"
      "Generates N programs (default 100) from seed S (default 1; program i uses seed S+i),\n"
      "compiles and runs each on the host backend and compares it with the evaluator.\n"
      "--fork runs each program in a child process (default from 1,000 programs), so a\n"
      "crash or a run past --timeout (default 120 s) is a failure like a mismatch;\n"
      "--selftest-crash / --selftest-hang make the worker crash / hang on a module\n"
      "holding TEXT (the harness's own test; they imply --fork).\n"
      "A failure is bisected over the pass pipeline, minimized (one output, instructions\n"
      "dropped, dimensions shrunk) and written to DIR/fuzz-<seed>.hlo (default DIR: .).\n"
      "SIGINT or SIGTERM stops the run after the current program, with its table.\n"
      "Prints the coverage table; exits 1 on any failure (mismatch, compile or run error,\n"
      "crash, timeout, or a generated module that does not verify). A program kiln refuses\n"
      "(UNIMPLEMENTED) is not a failure; its seed and reason go to stderr.\n");
}

#define SHARED_TEXT_MAX (8u << 20) /* module text a --fork worker takes */

/* What the parent and a forked worker share: the request and the answer. */
typedef struct shared_result {
  kiln_diff_result_t result;
  kiln_diff_coverage_t coverage; /* this test's counts only */
  bool bisect;
  char crash_on[64], hang_on[64]; /* --selftest-crash / --selftest-hang */
  char text[SHARED_TEXT_MAX];
} shared_result_t;

typedef struct fuzz_ctx {
  kiln_device_t *dev;          /* without --fork */
  shared_result_t *shared;     /* --fork: the mapping the worker reads and writes */
  pid_t worker;                /* --fork: the worker process, 0 when none runs */
  int cmd_w, res_r;            /* its pipes: a byte asks for a test, a byte says it is done */
  int timeout_s;               /* --fork */
  kiln_diff_outcome_t outcome; /* the failure being minimized */
} fuzz_ctx_t;

/* Runs the differential test on `text` in this process. */
static void check_here(kiln_device_t *dev, const char *text, bool bisect, kiln_diff_coverage_t *cov,
                       kiln_diff_result_t *r) {
  kiln_diff_options_t o = {dev, bisect, cov};
  kiln_diff_check_text(text, &o, r);
}

/* The worker: makes a host device, then runs one test per byte read on cmd_r, answering a
 * byte on res_w, until the parent closes cmd_r. */
static void worker_main(shared_result_t *sh, int cmd_r, int res_w) {
  /* A Ctrl-C or SIGTERM is the parent's to handle (it stops after this test); the worker
   * ends when the parent closes its pipe, or is killed by it. */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_device_create("host", &dev);
  for (char c; read(cmd_r, &c, 1) == 1;) {
    if (s) {
      sh->result.outcome = KILN_DIFF_ERROR;
      snprintf(sh->result.what, sizeof sh->result.what, "no host device: %s",
               kiln_status_message(s));
    } else {
      /* The harness's own test: a crash or a hang on a module holding the given text. */
      if (sh->crash_on[0] && strstr(sh->text, sh->crash_on)) raise(SIGSEGV);
      while (sh->hang_on[0] && strstr(sh->text, sh->hang_on)) pause();
      check_here(dev, sh->text, sh->bisect, &sh->coverage, &sh->result);
    }
    if (write(res_w, "d", 1) != 1) break;
  }
  kiln_status_free(s);
  kiln_device_destroy(dev);
  _exit(0);
}

static void stop_worker(fuzz_ctx_t *fc, bool kill_it, int *status) {
  if (!fc->worker) return;
  if (kill_it) kill(fc->worker, SIGKILL);
  close(fc->cmd_w);
  close(fc->res_r);
  int st = 0;
  while (waitpid(fc->worker, &st, 0) < 0 && errno == EINTR) {
  }
  if (status) *status = st;
  fc->worker = 0;
}

static bool start_worker(fuzz_ctx_t *fc, kiln_diff_result_t *r) {
  int cmd[2], res[2];
  if (pipe(cmd) != 0) goto fail;
  if (pipe(res) != 0) {
    close(cmd[0]);
    close(cmd[1]);
    goto fail;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(cmd[1]);
    close(res[0]);
    worker_main(fc->shared, cmd[0], res[1]);
  }
  close(cmd[0]);
  close(res[1]);
  if (pid < 0) {
    close(cmd[1]);
    close(res[0]);
    goto fail;
  }
  fc->worker = pid;
  fc->cmd_w = cmd[1];
  fc->res_r = res[0];
  return true;
fail:
  r->outcome = KILN_DIFF_ERROR;
  snprintf(r->what, sizeof r->what, "kiln-fuzz: cannot start a worker: %s", strerror(errno));
  return false;
}

/* Runs the differential test on `text` in the forked worker, which is killed after
 * fc->timeout_s: a worker that dies gives CRASH, one killed for time TIMEOUT (the next test
 * starts a new one). Coverage goes into `cov`. */
static void check_forked(fuzz_ctx_t *fc, const char *text, bool bisect, kiln_diff_coverage_t *cov,
                         kiln_diff_result_t *r) {
  shared_result_t *sh = fc->shared;
  memset(r, 0, sizeof *r);
  size_t len = strlen(text);
  if (len >= SHARED_TEXT_MAX) {
    r->outcome = KILN_DIFF_ERROR;
    snprintf(r->what, sizeof r->what, "kiln-fuzz: module text over %u bytes for --fork",
             SHARED_TEXT_MAX);
    return;
  }
  memcpy(sh->text, text, len + 1);
  memset(&sh->coverage, 0, sizeof sh->coverage);
  memset(&sh->result, 0, sizeof sh->result);
  sh->result.outcome = KILN_DIFF_CRASH;
  sh->bisect = bisect;
  if (!fc->worker && !start_worker(fc, r)) return;
  char c = 'r';
  bool asked = write(fc->cmd_w, &c, 1) == 1;
  if (!asked) { /* the worker died after its last answer: that test is done; start anew */
    stop_worker(fc, false, NULL);
    if (!start_worker(fc, r)) return;
    asked = write(fc->cmd_w, &c, 1) == 1;
  }
  struct pollfd pfd = {fc->res_r, POLLIN, 0};
  int rc = 1;
  double t0 = kiln_now_seconds();
  for (int left_ms = fc->timeout_s * 1000;
       asked && (rc = poll(&pfd, 1, left_ms)) < 0 && errno == EINTR;) {
    left_ms = fc->timeout_s * 1000 - (int)(1e3 * (kiln_now_seconds() - t0));
    if (left_ms < 0) left_ms = 0;
  }
  bool done = asked && rc > 0 && read(fc->res_r, &c, 1) == 1;
  if (done) {
    *r = sh->result;
  } else {
    int status = 0;
    stop_worker(fc, rc == 0, &status);
    if (rc == 0) {
      r->outcome = KILN_DIFF_TIMEOUT;
      snprintf(r->what, sizeof r->what, "killed after %d s", fc->timeout_s);
    } else {
      r->outcome = KILN_DIFF_CRASH;
      if (WIFSIGNALED(status))
        snprintf(r->what, sizeof r->what, "signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
      else
        snprintf(r->what, sizeof r->what, "the worker exited with status %d", WEXITSTATUS(status));
    }
  }
  if (!cov) return;
  for (int op = 0; op < KILN_OP_COUNT; op++)
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++)
      cov->op_type[op][t] += sh->coverage.op_type[op][t];
  for (int e = 0; e < KILN_DIFF_EMITTERS; e++)
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++)
      cov->emitter_type[e][t] += sh->coverage.emitter_type[e][t];
  cov->outcomes[r->outcome]++; /* the worker's own count is not taken: it may not have run */
}

static void check(fuzz_ctx_t *fc, const char *text, bool bisect, kiln_diff_coverage_t *cov,
                  kiln_diff_result_t *r) {
  if (fc->shared)
    check_forked(fc, text, bisect, cov, r);
  else
    check_here(fc->dev, text, bisect, cov, r);
}

static bool still_fails(void *ctx, const char *text) {
  fuzz_ctx_t *fc = ctx;
  kiln_diff_result_t r;
  check(fc, text, false, NULL, &r);
  return r.outcome == fc->outcome;
}

static int write_file(const char *path, const char *header, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "kiln-fuzz: cannot write %s\n", path);
    return -1;
  }
  fprintf(f, "%s%s", header, text);
  fclose(f);
  return 0;
}

static void print_result(const char *name, const kiln_diff_result_t *r) {
  printf("%s: %s%s%s%s%s\n", name, kiln_diff_outcome_name(r->outcome), r->what[0] ? ": " : "",
         r->what, r->culprit[0] ? "; introduced " : "", r->culprit);
}

static int run_files(fuzz_ctx_t *fc, int argc, char **argv, int first) {
  int failures = 0;
  kiln_diff_coverage_t *cov = kiln_calloc(1, sizeof *cov);
  for (int i = first; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(argv[i], &f);
    if (s) {
      fprintf(stderr, "%s: %s\n", argv[i], kiln_status_message(s));
      kiln_status_free(s);
      failures++;
      continue;
    }
    kiln_diff_result_t r;
    check(fc, f->text, true, cov, &r);
    print_result(argv[i], &r);
    failures += kiln_diff_outcome_is_failure(r.outcome);
    kiln_hlo_file_free(f);
  }
  kiln_free(cov);
  return failures ? 1 : 0;
}

static int merge_coverage(int argc, char **argv, int first) {
  kiln_diff_coverage_t *cov = kiln_calloc(1, sizeof *cov);
  int tables = 0, rc = 0;
  for (int i = first; i < argc; i++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(argv[i], &text, &len);
    if (s) {
      fprintf(stderr, "%s: %s\n", argv[i], kiln_status_message(s));
      kiln_status_free(s);
      rc = 1;
      continue;
    }
    char err[160];
    int n = kiln_diff_coverage_read(text, cov, err, sizeof err);
    if (n < 0) {
      fprintf(stderr, "%s: %s\n", argv[i], err);
      rc = 1;
    } else {
      tables += n;
    }
    kiln_free(text);
  }
  kiln_diff_coverage_print(stdout, cov);
  int64_t programs = 0;
  for (int k = 0; k < KILN_DIFF_OUTCOMES; k++) programs += cov->outcomes[k];
  printf("kiln-fuzz: merged %d coverage tables: %lld programs\n", tables, (long long)programs);
  kiln_free(cov);
  return rc;
}

/* Minimizes the failing program `*p` (its seed in go), writes the reproducer. */
static void minimize_and_write(fuzz_ctx_t *fc, kiln_hlo_gen_program_t **p, uint64_t seed,
                               const kiln_diff_result_t *r, bool minimize, const char *out_dir) {
  int tries = 0;
  char *small = NULL;
  if (minimize) {
    fc->outcome = r->outcome;
    int budget = r->outcome == KILN_DIFF_TIMEOUT ? MINIMIZE_TIMEOUT_TRIES : MINIMIZE_TRIES;
    tries = kiln_hlo_gen_minimize(p, still_fails, fc, budget);
    char *text = kiln_hlo_gen_render(*p);
    small = kiln_hlo_gen_shrink_dims(text, still_fails, fc, budget, &tries);
    kiln_free(text);
  } else {
    small = kiln_hlo_gen_render(*p);
  }
  char path[4096], header[1024];
  snprintf(path, sizeof path, "%s/fuzz-%llu.hlo", out_dir, (unsigned long long)seed);
  snprintf(header, sizeof header,
           "// kiln-fuzz seed %llu, minimized in %d tries (%d instructions): %s: %.600s%s%s\n",
           (unsigned long long)seed, tries, kiln_hlo_gen_size(*p),
           kiln_diff_outcome_name(r->outcome), r->what, r->culprit[0] ? "; introduced " : "",
           r->culprit);
  for (char *c = header + 3; *c && c[1]; c++)
    if (*c == '\n') *c = ' ';
  if (!write_file(path, header, small)) printf("  reproducer: %s\n", path);
  kiln_free(small);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  long long programs = 100, seed = 1, print_seed = -1;
  kiln_hlo_gen_options_t go;
  memset(&go, 0, sizeof go);
  const char *out_dir = ".";
  bool minimize = true, verbose = false, quiet = false, merge = false;
  int fork_mode = -1, timeout_s = 120; /* fork_mode -1: by the number of programs */
  const char *crash_on = "", *hang_on = "";
  int first_file = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strncmp(a, "--programs=", 11))
      programs = atoll(a + 11);
    else if (!strncmp(a, "--seed=", 7))
      seed = atoll(a + 7);
    else if (!strncmp(a, "--max-nodes=", 12))
      go.max_nodes = atoi(a + 12);
    else if (!strncmp(a, "--max-elements=", 15))
      go.max_elements = atoll(a + 15);
    else if (!strncmp(a, "--out=", 6))
      out_dir = a + 6;
    else if (!strncmp(a, "--print=", 8))
      print_seed = atoll(a + 8);
    else if (!strncmp(a, "--timeout=", 10))
      timeout_s = atoi(a + 10);
    else if (!strncmp(a, "--selftest-crash=", 17))
      crash_on = a + 17;
    else if (!strncmp(a, "--selftest-hang=", 16))
      hang_on = a + 16;
    else if (!strcmp(a, "--fork"))
      fork_mode = 1;
    else if (!strcmp(a, "--no-fork"))
      fork_mode = 0;
    else if (!strcmp(a, "--merge-coverage"))
      merge = true;
    else if (!strcmp(a, "--no-minimize"))
      minimize = false;
    else if (!strcmp(a, "--verbose"))
      verbose = true;
    else if (!strcmp(a, "--quiet"))
      quiet = true;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage();
      return 0;
    } else if (a[0] == '-') {
      fprintf(stderr, "kiln-fuzz: unknown flag %s\n", a);
      usage();
      return 2;
    } else if (!first_file) {
      first_file = i;
    }
  }
  if (timeout_s < 1) {
    fprintf(stderr, "kiln-fuzz: --timeout must be at least 1 second\n");
    return 2;
  }
  if (merge) return first_file ? merge_coverage(argc, argv, first_file) : 2;
  if (print_seed >= 0) {
    go.seed = (uint64_t)print_seed;
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
    char *text = kiln_hlo_gen_render(p);
    fputs(text, stdout);
    kiln_free(text);
    kiln_hlo_gen_free(p);
    return 0;
  }
  if (fork_mode < 0) fork_mode = !first_file && programs >= FORK_DEFAULT_FROM;
  if (crash_on[0] || hang_on[0]) fork_mode = 1;
  fuzz_ctx_t fc = {NULL, NULL, 0, -1, -1, timeout_s, KILN_DIFF_PASSED};
  if (fork_mode) {
    /* The parent makes no device (no threads to lose in a fork): each child makes its own. */
    void *m =
        mmap(NULL, sizeof *fc.shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      fprintf(stderr, "kiln-fuzz: mmap: %s\n", strerror(errno));
      return 2;
    }
    fc.shared = m;
    snprintf(fc.shared->crash_on, sizeof fc.shared->crash_on, "%s", crash_on);
    snprintf(fc.shared->hang_on, sizeof fc.shared->hang_on, "%s", hang_on);
    signal(SIGPIPE, SIG_IGN); /* a dead worker's pipe: write fails, the test is a crash */
  } else {
    kiln_status s = kiln_device_create("host", &fc.dev);
    if (s) {
      fprintf(stderr, "kiln-fuzz: no host device: %s\n", kiln_status_message(s));
      kiln_status_free(s);
      return 2;
    }
  }
  int rc = 0;
  if (first_file) {
    rc = run_files(&fc, argc, argv, first_file);
  } else {
    kiln_diff_coverage_t *cov = kiln_calloc(1, sizeof *cov);
    int failures = 0;
    double t0 = kiln_now_seconds();
    int64_t instructions = 0;
    /* No SA_RESTART: a wait in poll() returns, the worker's answer is still read. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    long long requested = programs;
    for (long long i = 0; i < programs; i++) {
      if (g_stop) {
        printf("kiln-fuzz: stopped by a signal after %lld of %lld programs\n", i, requested);
        programs = i;
        break;
      }
      go.seed = (uint64_t)(seed + i);
      kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
      char *text = kiln_hlo_gen_render(p);
      instructions += kiln_hlo_gen_size(p);
      if (verbose) fprintf(stderr, "kiln-fuzz: seed %llu\n", (unsigned long long)go.seed);
      kiln_diff_result_t r;
      check(&fc, text, true, cov, &r);
      if (kiln_diff_outcome_is_failure(r.outcome)) {
        failures++;
        char name[64];
        snprintf(name, sizeof name, "seed %llu", (unsigned long long)go.seed);
        print_result(name, &r);
        minimize_and_write(&fc, &p, go.seed, &r, minimize, out_dir);
      } else if (verbose) {
        fprintf(stderr, "  %s%s%s\n", kiln_diff_outcome_name(r.outcome), r.what[0] ? ": " : "",
                r.what);
      } else if (r.outcome == KILN_DIFF_UNSUPPORTED) { /* not a failure, but worth its seed */
        fprintf(stderr, "kiln-fuzz: seed %llu: %s%s%s\n", (unsigned long long)go.seed,
                kiln_diff_outcome_name(r.outcome), r.what[0] ? ": " : "", r.what);
      }
      kiln_free(text);
      kiln_hlo_gen_free(p);
    }
    double secs = kiln_now_seconds() - t0;
    if (!quiet) kiln_diff_coverage_print(stdout, cov);
    printf(
        "kiln-fuzz: %lld programs (seeds %lld..%lld, %lld instructions), %d failures, %.1f s "
        "(%.1f ms per program)%s\n",
        programs, seed, seed + programs - 1, (long long)instructions, failures, secs,
        programs ? 1e3 * secs / (double)programs : 0.0, fork_mode ? ", in a forked worker" : "");
    kiln_free(cov);
    rc = failures ? 1 : 0;
  }
  stop_worker(&fc, false, NULL);
  if (fc.shared) munmap(fc.shared, sizeof *fc.shared);
  kiln_device_destroy(fc.dev);
  return rc;
}
