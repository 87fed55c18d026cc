/* A device's execution queue: the plugin's asynchronous executes of one device run on a thread
 * of the queue's own, one after another in the order they were queued, so Execute returns
 * before the run ends (its completion event and output buffers become ready later).
 *
 * At most KILN_PJRT_QUEUE_DEPTH pieces of work wait or run at once: a caller that would queue
 * more waits for room (a loop of executes cannot run arbitrarily far ahead of the device) —
 * unless no work has ended for KILN_PJRT_QUEUE_STALL_MS while the running work waits for a
 * buffer filled from outside the queues (`waiting_outside`): the waiting caller may be the one
 * that fills it next (fulfils an alias buffer, makes a transfer), so it then queues past the
 * depth, one piece per stall period.
 * The thread starts with the first work and is joined by kiln_pjrt_queue_stop
 * (PJRT_Client_Destroy).
 *
 * Thread-safety: thread-safe. */
#ifndef KILN_PLUGIN_PJRT_QUEUE_H_
#define KILN_PLUGIN_PJRT_QUEUE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

#define KILN_PJRT_QUEUE_DEPTH 32
#define KILN_PJRT_QUEUE_STALL_MS 200

/* One piece of work: `run` does it and frees it (the queue no longer touches it). */
typedef struct kiln_pjrt_work {
  struct kiln_pjrt_work *next;
  void (*run)(struct kiln_pjrt_work *w);
} kiln_pjrt_work_t;

typedef struct kiln_pjrt_queue {
  /* Held by a caller from the moment it takes what its work reads (references to buffers'
   * memory, donations) until the work is queued: work queued later cannot have read a buffer
   * before work queued earlier donated it (kiln_pjrt_queue_order_lock). Taken before mu. */
  pthread_mutex_t order_mu;
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* the thread waits here for work */
  pthread_cond_t room_cv; /* callers wait here for room, and fini for the end of the work */
  kiln_pjrt_work_t *head, *tail;
  _Atomic int32_t pending; /* queued or running (written under mu) */
  uint64_t ended;          /* pieces of work done (under mu) */
  /* The running work waits for a buffer filled from outside the queues (set by the work). */
  _Atomic bool waiting_outside;
  bool started; /* the thread exists */
  bool stop;    /* fini: the thread ends once the queue is empty */
  pthread_t thread;
} kiln_pjrt_queue_t;

void kiln_pjrt_queue_init(kiln_pjrt_queue_t *q);
/* Waits for every queued work to end and joins the thread (a later push starts another). Not
 * on the queue's own thread. */
void kiln_pjrt_queue_stop(kiln_pjrt_queue_t *q);
/* kiln_pjrt_queue_stop, then frees what init made. */
void kiln_pjrt_queue_fini(kiln_pjrt_queue_t *q);
/* Waits until no work is queued or running (the thread stays). */
void kiln_pjrt_queue_drain(kiln_pjrt_queue_t *q);
/* True when nothing is queued or running (a snapshot: work may be queued right after). */
static inline bool kiln_pjrt_queue_idle(kiln_pjrt_queue_t *q) {
  return atomic_load_explicit(&q->pending, memory_order_acquire) == 0;
}
/* The order lock (order_mu above). */
void kiln_pjrt_queue_order_lock(kiln_pjrt_queue_t *q);
void kiln_pjrt_queue_order_unlock(kiln_pjrt_queue_t *q);
/* Queues `w` (waiting for room first). RESOURCE_EXHAUSTED when the thread cannot be started;
 * `w` is then not queued and still the caller's. */
kiln_status kiln_pjrt_queue_push(kiln_pjrt_queue_t *q, kiln_pjrt_work_t *w);
/* Queues `w` only if that needs no waiting and `admit(arg)` (asked under the queue's lock)
 * agrees: not past the depth, not when the thread cannot be started. True: queued; false:
 * still the caller's. */
bool kiln_pjrt_queue_try_push(kiln_pjrt_queue_t *q, kiln_pjrt_work_t *w, bool (*admit)(void *arg),
                              void *arg);

#endif /* KILN_PLUGIN_PJRT_QUEUE_H_ */
