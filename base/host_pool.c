/* Persistent worker pool for host kernels (host_pool.h). */
#include "base/host_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"

struct kiln_host_pool {
  int num_workers; /* including the launching thread */
  pthread_t *threads;
  pthread_mutex_t mu;        /* guards the job fields and generation */
  pthread_cond_t work_cv;    /* workers wait for a new generation */
  pthread_cond_t done_cv;    /* the launcher waits for busy == 0 */
  pthread_mutex_t launch_mu; /* serializes launches */
  uint64_t generation;
  bool stop;
  /* current job */
  kiln_host_kernel_fn fn;
  void **args;
  int64_t num_blocks, chunk;
  atomic_int_fast64_t next;
  int busy; /* workers still inside the current job */
};

static void run_chunks(kiln_host_pool_t *p) {
  for (;;) {
    int64_t b = atomic_fetch_add(&p->next, p->chunk);
    if (b >= p->num_blocks) return;
    int64_t e = b + p->chunk < p->num_blocks ? b + p->chunk : p->num_blocks;
    p->fn(p->args, b, e);
  }
}

static void *worker(void *arg) {
  kiln_host_pool_t *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->mu);
    run_chunks(p);
    pthread_mutex_lock(&p->mu);
    if (--p->busy == 0) pthread_cond_signal(&p->done_cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static _Atomic int g_default_workers;

void kiln_host_pool_set_default_workers(int num_workers) {
  atomic_store(&g_default_workers, num_workers > 0 ? num_workers : 0);
}

kiln_status kiln_host_pool_create(int num_workers, kiln_host_pool_t **out) {
  *out = NULL;
  if (num_workers <= 0) {
    num_workers = atomic_load(&g_default_workers);
    if (num_workers <= 0) num_workers = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (num_workers <= 0) num_workers = 1;
  }
  if (num_workers > 1024) return KILN_ERR_INVALID("host pool: %d workers is too many", num_workers);
  kiln_host_pool_t *p = kiln_calloc(1, sizeof(*p));
  p->num_workers = num_workers;
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->launch_mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  p->threads = kiln_calloc((size_t)num_workers, sizeof(pthread_t));
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
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->num_workers - 1; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->launch_mu);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  kiln_free(p->threads);
  kiln_free(p);
}

int kiln_host_pool_num_workers(const kiln_host_pool_t *p) { return p ? p->num_workers : 1; }

kiln_status kiln_host_pool_launch(kiln_host_pool_t *p, kiln_host_kernel_fn fn, void **args,
                                  int64_t num_blocks, int64_t min_chunk) {
  if (!fn || num_blocks < 0) return KILN_ERR_INVALID("host launch: bad kernel or block count");
  if (num_blocks == 0) return NULL;
  if (!p || p->num_workers == 1 || num_blocks == 1) {
    fn(args, 0, num_blocks);
    return NULL;
  }
  pthread_mutex_lock(&p->launch_mu);
  int64_t chunk = num_blocks / ((int64_t)p->num_workers * 4);
  if (chunk < 1) chunk = 1;
  if (chunk < min_chunk) chunk = min_chunk;
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->args = args;
  p->num_blocks = num_blocks;
  p->chunk = chunk;
  atomic_store(&p->next, 0);
  p->busy = p->num_workers - 1;
  p->generation++;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  run_chunks(p);
  pthread_mutex_lock(&p->mu);
  while (p->busy > 0) pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->launch_mu);
  return NULL;
}
