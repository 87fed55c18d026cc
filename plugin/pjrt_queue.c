/* Device execution queues (pjrt_queue.h). */
#include "plugin/pjrt_queue.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"

void kiln_pjrt_queue_init(kiln_pjrt_queue_t *q) {
  memset(q, 0, sizeof(*q));
  pthread_mutex_init(&q->order_mu, NULL);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->work_cv, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&q->room_cv, &ca);
  pthread_condattr_destroy(&ca);
  atomic_init(&q->pending, 0);
}

static void *queue_main(void *arg) {
  kiln_pjrt_queue_t *q = arg;
  kiln_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !q->stop) pthread_cond_wait(&q->work_cv, &q->mu);
    kiln_pjrt_work_t *w = q->head;
    if (!w) break; /* stopped and empty */
    q->head = w->next;
    if (!q->head) q->tail = NULL;
    kiln_mutex_unlock(&q->mu);
    w->run(w);
    kiln_mutex_lock(&q->mu);
    atomic_fetch_sub_explicit(&q->pending, 1, memory_order_release);
    q->ended++;
    pthread_cond_broadcast(&q->room_cv);
  }
  kiln_mutex_unlock(&q->mu);
  return NULL;
}

void kiln_pjrt_queue_order_lock(kiln_pjrt_queue_t *q) {
  kiln_mutex_lock(&q->order_mu);
}

void kiln_pjrt_queue_order_unlock(kiln_pjrt_queue_t *q) {
  kiln_mutex_unlock(&q->order_mu);
}

/* A stall period from now (room_cv's clock). */
static struct timespec stall_deadline(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_nsec += (long)KILN_PJRT_QUEUE_STALL_MS * 1000000L;
  t.tv_sec += t.tv_nsec / 1000000000L;
  t.tv_nsec %= 1000000000L;
  return t;
}

/* With q->mu held: waits for room, or until no work has ended for a stall period. */
static void wait_for_room(kiln_pjrt_queue_t *q) {
  uint64_t seen = q->ended;
  struct timespec deadline = stall_deadline();
  while (atomic_load_explicit(&q->pending, memory_order_relaxed) >= KILN_PJRT_QUEUE_DEPTH) {
    if (pthread_cond_timedwait(&q->room_cv, &q->mu, &deadline) != ETIMEDOUT) continue;
    /* stalled on memory the caller may fill itself: queue past the depth */
    if (q->ended == seen && atomic_load(&q->waiting_outside)) return;
    seen = q->ended;
    deadline = stall_deadline();
  }
}

/* With q->mu held: starts the thread if it is not running (an errno value when it cannot). */
static int start_thread(kiln_pjrt_queue_t *q) {
  if (q->started) return 0;
  int err = pthread_create(&q->thread, NULL, queue_main, q);
  if (!err) q->started = true;
  return err;
}

/* With q->mu held and the thread running: appends `w`, lets go of q->mu. */
static void append_and_unlock(kiln_pjrt_queue_t *q, kiln_pjrt_work_t *w) {
  w->next = NULL;
  if (q->tail)
    q->tail->next = w;
  else
    q->head = w;
  q->tail = w;
  atomic_fetch_add_explicit(&q->pending, 1, memory_order_relaxed);
  pthread_cond_signal(&q->work_cv);
  kiln_mutex_unlock(&q->mu);
}

kiln_status kiln_pjrt_queue_push(kiln_pjrt_queue_t *q, kiln_pjrt_work_t *w) {
  kiln_mutex_lock(&q->mu);
  wait_for_room(q);
  int err = start_thread(q);
  if (err) {
    kiln_mutex_unlock(&q->mu);
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "cannot start a device's execution thread (%s)", strerror(err));
  }
  append_and_unlock(q, w);
  return NULL;
}

bool kiln_pjrt_queue_try_push(kiln_pjrt_queue_t *q, kiln_pjrt_work_t *w, bool (*admit)(void *arg),
                              void *arg) {
  kiln_mutex_lock(&q->mu);
  if (atomic_load_explicit(&q->pending, memory_order_relaxed) >= KILN_PJRT_QUEUE_DEPTH ||
      !admit(arg) || start_thread(q)) {
    kiln_mutex_unlock(&q->mu);
    return false;
  }
  append_and_unlock(q, w);
  return true;
}

void kiln_pjrt_queue_drain(kiln_pjrt_queue_t *q) {
  kiln_mutex_lock(&q->mu);
  while (atomic_load_explicit(&q->pending, memory_order_relaxed) > 0)
    pthread_cond_wait(&q->room_cv, &q->mu);
  kiln_mutex_unlock(&q->mu);
}

void kiln_pjrt_queue_stop(kiln_pjrt_queue_t *q) {
  kiln_mutex_lock(&q->mu);
  bool started = q->started;
  q->stop = true;
  pthread_cond_signal(&q->work_cv);
  kiln_mutex_unlock(&q->mu);
  if (started) pthread_join(q->thread, NULL); /* it runs what is queued before it ends */
  kiln_mutex_lock(&q->mu);
  q->started = false;
  q->stop = false;
  kiln_mutex_unlock(&q->mu);
}

void kiln_pjrt_queue_fini(kiln_pjrt_queue_t *q) {
  kiln_pjrt_queue_stop(q);
  pthread_cond_destroy(&q->room_cv);
  pthread_cond_destroy(&q->work_cv);
  pthread_mutex_destroy(&q->mu);
  pthread_mutex_destroy(&q->order_mu);
}
