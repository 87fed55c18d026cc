/* Persistent worker pool for host kernels (host_pool.h).
 *
 * One job at a time, published in a single atomic word: generation (32 bits) | next chunk
 * (16) | chunk count (16). Every thread, the launcher included, claims a chunk with a
 * compare-and-swap of that word, so a claim succeeds only while its job is current and has a
 * chunk left: a worker that wakes (or is scheduled) late finds the job gone and runs
 * nothing. The launcher runs chunks itself from the start and then waits only for chunks
 * other threads already claimed — never for a worker to wake up or check in, so a worker
 * descheduled by another process costs at most the chunk it holds.
 *
 * Waiting is bounded spinning, then sleeping: a worker spins (with a pause and, every few
 * rounds, sched_yield so it gives way to a thread that shares its core) up to SPIN_NS after
 * its last job before it sleeps on work_cv; the launcher spins up to SPIN_NS for the chunks
 * still running, then sleeps on done_cv. On a loaded machine (spin_budget) or once a
 * spinning thread notices it was descheduled, the spin ends after a few rounds. Sleeping workers
 * are woken only once the launcher has run chunks for WAKE_AFTER_NS and some are still unclaimed,
 * so a grid the launcher finishes quickly never pays for a wake-up. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "base/host_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"

#define SPIN_NS 100000      /* a worker's (and the launcher's) spin before sleeping */
#define WAKE_AFTER_NS 3000  /* the launcher's own work before it wakes sleeping workers */
#define CHUNKS_PER_WORKER 8 /* dynamic claiming: a few chunks each, to balance */
#define MAX_CHUNKS 0xffff

#define ST_GEN(s) ((uint32_t)((s) >> 32))
#define ST_NEXT(s) ((uint32_t)((s) >> 16) & 0xffffu)
#define ST_COUNT(s) ((uint32_t)(s)&0xffffu)
#define ST_ONE_CHUNK ((uint64_t)1 << 16)

struct kiln_host_pool {
  _Atomic uint64_t state; /* generation | next chunk | chunks */
  char pad0[64 - sizeof(uint64_t)];
  atomic_int done; /* chunks of the current job that finished */
  char pad1[64 - sizeof(int)];
  /* the current job: written by the launcher before it publishes state, read by a thread
   * after it claimed a chunk (so never while being rewritten) */
  kiln_host_kernel_fn fn;
  void **args;
  int64_t num_blocks, chunk;
  int num_workers; /* including the launching thread */
  pthread_t *threads;
  pthread_mutex_t launch_mu; /* serializes launches */
  pthread_mutex_t mu;        /* guards sleeping on the condition variables */
  pthread_cond_t work_cv;    /* sleeping workers wait for a new generation */
  pthread_cond_t done_cv;    /* a sleeping launcher waits for done == chunks */
  atomic_int sleepers;       /* workers asleep (or about to be) on work_cv */
  atomic_bool launcher_sleeps;
  atomic_bool stop;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Claims the next chunk of the job in *s (a recent value of state), following newer jobs:
 * true with *s the value it claimed from (its chunk is ST_NEXT(*s)); false when the job in
 * *s (now the latest value seen) has no chunk left. */
static bool claim(kiln_host_pool_t *p, uint64_t *s) {
  uint64_t cur = *s;
  while (ST_NEXT(cur) < ST_COUNT(cur)) {
    if (atomic_compare_exchange_weak_explicit(&p->state, &cur, cur + ST_ONE_CHUNK,
                                              memory_order_acq_rel, memory_order_acquire)) {
      *s = cur;
      return true;
    }
  }
  *s = cur;
  return false;
}

/* The kernels are JIT code (LLVM's) without the type signature that clang's
 * -fsanitize=function reads just before a function called through a pointer: checking such a
 * call reads the bytes before the kernel, unmapped when it starts a page (a SEGV in the
 * fuzzers' clang UBSan build, fuzz/fuzz_pjrt_deserialize.c). The two calls are not checked. */
#if defined(__clang__)
#define CALLS_JIT_CODE __attribute__((no_sanitize("function")))
#else
#define CALLS_JIT_CODE
#endif

/* Runs the chunk claimed from state value s and counts it done; the last one wakes a
 * sleeping launcher. */
CALLS_JIT_CODE static void run_claimed(kiln_host_pool_t *p, uint64_t s) {
  int64_t b = (int64_t)ST_NEXT(s) * p->chunk;
  int64_t e = b + p->chunk < p->num_blocks ? b + p->chunk : p->num_blocks;
  p->fn(p->args, b, e);
  if (atomic_fetch_add(&p->done, 1) + 1 == (int)ST_COUNT(s) && atomic_load(&p->launcher_sleeps)) {
    kiln_mutex_lock(&p->mu);
    pthread_cond_signal(&p->done_cv);
    kiln_mutex_unlock(&p->mu);
  }
}

/* The spin budget: SPIN_NS on a machine with cores to spare, none (a few rounds only) while
 * the 1-minute load average exceeds the online cores + 1 (our own spinning threads count
 * there too). Kernels' threads share their process's CPU share with other processes (and,
 * under the scheduler's autogroups, with their whole session), so spinning on a busy
 * machine takes time from the thread that has work. Refreshed every LOAD_CHECK_NS by
 * whichever thread spins. */
#define LOAD_CHECK_NS 50000000
static _Atomic int64_t g_spin_budget_ns = SPIN_NS;
static _Atomic int64_t g_load_checked_ns;

static int64_t spin_budget(int64_t now) {
  int64_t checked = atomic_load_explicit(&g_load_checked_ns, memory_order_relaxed);
  if (now - checked > LOAD_CHECK_NS &&
      atomic_compare_exchange_strong(&g_load_checked_ns, &checked, now)) {
    double load[1];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN); /* the load average counts the whole machine */
    bool busy = getloadavg(load, 1) == 1 && cpus > 0 && load[0] > (double)cpus + 1.0;
    atomic_store_explicit(&g_spin_budget_ns, busy ? 0 : SPIN_NS, memory_order_relaxed);
  }
  return atomic_load_explicit(&g_spin_budget_ns, memory_order_relaxed);
}

/* Round i (from 1) of a bounded spin: a pause, every 32nd round a sched_yield (a thread
 * sharing the core runs); false once the spin budget passed since round 32 (*start, 0 at
 * first) or when a round took over 50 µs (this thread was descheduled: the cores are
 * contended). *last: the previous check's time. */
static bool spin_round(int i, int64_t *start, int64_t *last) {
  cpu_relax();
  if ((i & 31) == 0) {
    int64_t t = now_ns();
    if (!*start) *start = t;
    if (*last && t - *last > 50000) return false;
    *last = t;
    if (t - *start > spin_budget(t)) return false;
    sched_yield();
  }
  return true;
}

static bool job_or_stop(kiln_host_pool_t *p, uint32_t seen) {
  return ST_GEN(atomic_load_explicit(&p->state, memory_order_relaxed)) != seen ||
         atomic_load_explicit(&p->stop, memory_order_relaxed);
}

/* Waits (bounded spin, then sleep) until state's generation differs from `seen` or stop. */
static void wait_for_job(kiln_host_pool_t *p, uint32_t seen) {
  int64_t start = 0, last = 0;
  for (int i = 1; !job_or_stop(p, seen); i++) {
    if (!spin_round(i, &start, &last)) break;
  }
  if (job_or_stop(p, seen)) return;
  kiln_mutex_lock(&p->mu);
  atomic_fetch_add(&p->sleepers, 1);
  while (!atomic_load(&p->stop) && ST_GEN(atomic_load(&p->state)) == seen)
    pthread_cond_wait(&p->work_cv, &p->mu);
  atomic_fetch_sub(&p->sleepers, 1);
  kiln_mutex_unlock(&p->mu);
}

static void *worker(void *arg) {
  kiln_host_pool_t *p = arg;
  uint32_t seen = 0; /* the generation whose chunks are all claimed, as far as we know */
  for (;;) {
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    if (ST_GEN(s) != seen) {
      while (claim(p, &s)) run_claimed(p, s);
      seen = ST_GEN(s);
      continue;
    }
    if (atomic_load(&p->stop)) break;
    wait_for_job(p, seen);
  }
  return NULL;
}

/* The first number in `path` (0 when absent or unreadable). */
static long long read_number(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  long long v = 0;
  if (fscanf(f, "%lld", &v) != 1) v = 0;
  fclose(f);
  return v;
}

int kiln_host_cgroup_cpu_limit(const char *root) {
  char path[512];
  long long q = 0, period = 0;
  snprintf(path, sizeof path, "%s/cpu.max", root);
  FILE *f = fopen(path, "r");
  if (f) {
    char quota[32] = {0};
    if (fscanf(f, "%31s %lld", quota, &period) == 2) {
      char *end = NULL;
      q = strtoll(quota, &end, 10);
      if (!end || *end) q = 0; /* "max": unlimited */
    }
    fclose(f);
  } else {
    snprintf(path, sizeof path, "%s/cpu/cpu.cfs_quota_us", root);
    q = read_number(path);
    snprintf(path, sizeof path, "%s/cpu/cpu.cfs_period_us", root);
    period = read_number(path);
  }
  if (q <= 0 || period <= 0) return 0;
  long long cpus = (q + period - 1) / period;
  return cpus > 1024 ? 1024 : (int)cpus;
}

int kiln_host_cpus(void) {
  int cpus = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  int limit = kiln_host_cgroup_cpu_limit("/sys/fs/cgroup");
  if (limit > 0 && limit < cpus) cpus = limit;
  return cpus > 0 ? cpus : 1;
}

static _Atomic int g_default_workers;

void kiln_host_pool_set_default_workers(int num_workers) {
  atomic_store(&g_default_workers, num_workers > 0 ? num_workers : 0);
}

kiln_status kiln_host_pool_create(int num_workers, kiln_host_pool_t **out) {
  *out = NULL;
  if (num_workers <= 0) {
    num_workers = atomic_load(&g_default_workers);
    if (num_workers <= 0) num_workers = kiln_host_cpus();
  }
  if (num_workers > 1024) return KILN_ERR_INVALID("host pool: %d workers is too many", num_workers);
  kiln_host_pool_t *p = kiln_try_calloc(1, sizeof(*p));
  pthread_t *threads = kiln_try_calloc((size_t)num_workers, sizeof(pthread_t));
  if (!p || !threads) {
    kiln_free(p);
    kiln_free(threads);
    return KILN_ERR_EXHAUSTED("host pool: out of host memory for %d workers", num_workers);
  }
  p->num_workers = num_workers;
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->launch_mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  p->threads = threads;
  for (int i = 0; i < num_workers - 1; i++) {
    if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
      p->num_workers = i + 1; /* the ones started, plus the launcher */
      kiln_host_pool_destroy(p);
      return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host pool: cannot create worker %d", i);
    }
  }
  *out = p;
  return NULL;
}

void kiln_host_pool_destroy(kiln_host_pool_t *p) {
  if (!p) return;
  kiln_mutex_lock(&p->mu);
  atomic_store(&p->stop, true);
  pthread_cond_broadcast(&p->work_cv);
  kiln_mutex_unlock(&p->mu);
  for (int i = 0; i < p->num_workers - 1; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->launch_mu);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  kiln_free(p->threads);
  kiln_free(p);
}

int kiln_host_pool_num_workers(const kiln_host_pool_t *p) {
  return p ? p->num_workers : 1;
}

static void wake_sleepers(kiln_host_pool_t *p) {
  kiln_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->work_cv);
  kiln_mutex_unlock(&p->mu);
}

/* The launcher's wait for chunks that other threads claimed: bounded spin, then sleep. */
static void wait_done(kiln_host_pool_t *p, int count) {
  int64_t start = 0, last = 0;
  for (int i = 1; atomic_load_explicit(&p->done, memory_order_acquire) != count; i++) {
    if (!spin_round(i, &start, &last)) break;
  }
  if (atomic_load(&p->done) == count) return;
  atomic_store(&p->launcher_sleeps, true);
  if (atomic_load(&p->done) != count) {
    kiln_mutex_lock(&p->mu);
    while (atomic_load(&p->done) != count) pthread_cond_wait(&p->done_cv, &p->mu);
    kiln_mutex_unlock(&p->mu);
  }
  atomic_store(&p->launcher_sleeps, false);
}

CALLS_JIT_CODE kiln_status kiln_host_pool_launch(kiln_host_pool_t *p, kiln_host_kernel_fn fn,
                                                 void **args, int64_t num_blocks,
                                                 int64_t min_chunk) {
  if (!fn || num_blocks < 0) return KILN_ERR_INVALID("host launch: bad kernel or block count");
  if (num_blocks == 0) return NULL;
  if (num_blocks == 1 || !p || p->num_workers == 1) { /* no split: skip the divisions below */
    fn(args, 0, num_blocks);
    return NULL;
  }
  int64_t chunk = num_blocks / ((int64_t)p->num_workers * CHUNKS_PER_WORKER);
  if (chunk < 1) chunk = 1;
  if (chunk < min_chunk) chunk = min_chunk;
  int64_t count = num_blocks / chunk + (num_blocks % chunk != 0);
  if (count > MAX_CHUNKS) {
    chunk = num_blocks / MAX_CHUNKS + 1;
    count = num_blocks / chunk + (num_blocks % chunk != 0);
  }
  if (count <= 1) {
    fn(args, 0, num_blocks);
    return NULL;
  }
  kiln_mutex_lock(&p->launch_mu);
  p->fn = fn;
  p->args = args;
  p->num_blocks = num_blocks;
  p->chunk = chunk;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  uint64_t prev = atomic_load_explicit(&p->state, memory_order_relaxed);
  uint64_t s = ((uint64_t)(ST_GEN(prev) + 1) << 32) | (uint64_t)count;
  atomic_store(&p->state, s); /* publishes the job (release, and ordered before `sleepers`) */
  /* run chunks; wake sleeping workers only if the grid outlasts WAKE_AFTER_NS */
  bool woke = atomic_load(&p->sleepers) == 0;
  int64_t start = woke ? 0 : now_ns();
  while (claim(p, &s)) {
    run_claimed(p, s);
    if (!woke && now_ns() - start > WAKE_AFTER_NS) {
      woke = true;
      uint64_t cur = atomic_load(&p->state);
      if (ST_GEN(cur) == ST_GEN(s) && ST_NEXT(cur) < ST_COUNT(cur) && atomic_load(&p->sleepers))
        wake_sleepers(p);
    }
  }
  wait_done(p, (int)count);
  kiln_mutex_unlock(&p->launch_mu);
  return NULL;
}
