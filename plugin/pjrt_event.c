/* Events (pjrt_objects.h): completed once with OK or an error; OnReady callbacks run on the
 * plugin's callback thread, never under a kiln lock.
 *
 * The callback thread: one process-wide worker, started on the first callback, draining a
 * FIFO queue, and joined when the last client is destroyed (kiln_pjrt_event_thread_stop; the
 * next callback starts it again), so no plugin thread outlives the clients. A callback registered
 * on an event that is already ready is queued too, so a callback never runs on the thread that
 * registers or completes it (a completer may hold its own locks). Each callback receives its own
 * copy of the event's error.
 *
 * Thread-safety: thread-safe; the event's mutex guards its state, the queue's mutex the
 * queue, and neither is held while a callback runs. */
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "plugin/pjrt_objects.h"

typedef struct kiln_pjrt_event_callback {
  PJRT_Event_OnReadyCallback fn;
  void *user_arg;
  kiln_status error; /* the copy handed to fn (owned until then) */
  struct kiln_pjrt_event_callback *next;
} kiln_pjrt_event_callback_t;

/* ---- the callback thread ---------------------------------------------------------------- */

static pthread_mutex_t g_cb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cb_cv = PTHREAD_COND_INITIALIZER;
static kiln_pjrt_event_callback_t *g_cb_head, *g_cb_tail;
static bool g_cb_started, g_cb_exit, g_cb_stopping;
static pthread_t g_cb_thread;

static void *callback_thread(void *arg) {
  (void)arg;
  for (;;) {
    kiln_mutex_lock(&g_cb_mu);
    while (!g_cb_head && !g_cb_exit) pthread_cond_wait(&g_cb_cv, &g_cb_mu);
    if (!g_cb_head) { /* asked to stop, and nothing is left */
      kiln_mutex_unlock(&g_cb_mu);
      return NULL;
    }
    kiln_pjrt_event_callback_t *cb = g_cb_head;
    g_cb_head = cb->next;
    if (!g_cb_head) g_cb_tail = NULL;
    kiln_mutex_unlock(&g_cb_mu);
    /* No kiln lock is held here. The callback owns the error. */
    cb->fn(kiln_pjrt_error_from_status(cb->error), cb->user_arg);
    kiln_free(cb);
  }
  return NULL;
}

/* Starts the callback thread unless it runs (g_cb_mu held). */
static void start_locked(void) {
  if (!g_cb_started && pthread_create(&g_cb_thread, NULL, callback_thread, NULL) == 0)
    g_cb_started = true;
}

void kiln_pjrt_event_thread_stop(void) {
  kiln_mutex_lock(&g_cb_mu);
  /* From a callback (the thread itself) there is nothing to join: it stays. */
  if (!g_cb_started || g_cb_stopping || pthread_equal(pthread_self(), g_cb_thread)) {
    kiln_mutex_unlock(&g_cb_mu);
    return;
  }
  g_cb_stopping = true; /* one joiner */
  g_cb_exit = true;
  pthread_cond_signal(&g_cb_cv);
  pthread_t t = g_cb_thread;
  kiln_mutex_unlock(&g_cb_mu);
  pthread_join(t, NULL); /* it drains the queue first */
  kiln_mutex_lock(&g_cb_mu);
  g_cb_started = false;
  g_cb_exit = false;
  g_cb_stopping = false;
  if (g_cb_head) start_locked(); /* queued while it was stopping */
  kiln_mutex_unlock(&g_cb_mu);
}

/* Queues a list of callbacks (in order) for the callback thread. */
static void dispatch(kiln_pjrt_event_callback_t *list) {
  if (!list) return;
  kiln_pjrt_event_callback_t *last = list;
  while (last->next) last = last->next;
  kiln_mutex_lock(&g_cb_mu);
  if (!g_cb_started) {
    start_locked();
    if (!g_cb_started) {
      /* No thread could be made: run them here (still under no event lock), rather than
       * never. */
      kiln_mutex_unlock(&g_cb_mu);
      while (list) {
        kiln_pjrt_event_callback_t *n = list->next;
        list->fn(kiln_pjrt_error_from_status(list->error), list->user_arg);
        kiln_free(list);
        list = n;
      }
      return;
    }
  }
  if (g_cb_tail)
    g_cb_tail->next = list;
  else
    g_cb_head = list;
  g_cb_tail = last;
  pthread_cond_signal(&g_cb_cv);
  kiln_mutex_unlock(&g_cb_mu);
}

/* ---- events ----------------------------------------------------------------------------- */

PJRT_Event *kiln_pjrt_event_create(void) {
  PJRT_Event *e = kiln_try_calloc(1, sizeof(*e));
  if (!e) return NULL;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  return e;
}

static void event_free(PJRT_Event *e) {
  kiln_pjrt_event_callback_t *cb = e->callbacks;
  while (cb) { /* only on an event never completed */
    kiln_pjrt_event_callback_t *n = cb->next;
    kiln_free(cb);
    cb = n;
  }
  kiln_status_free(e->error);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  kiln_free(e);
}

void kiln_pjrt_event_complete(PJRT_Event *e, kiln_status error) {
  if (!e) {
    kiln_status_free(error);
    return;
  }
  kiln_mutex_lock(&e->mu);
  if (e->ready) { /* completed twice: keep the first outcome */
    kiln_mutex_unlock(&e->mu);
    kiln_status_free(error);
    return;
  }
  e->ready = true;
  e->error = error;
  kiln_pjrt_event_callback_t *list = e->callbacks;
  e->callbacks = NULL;
  for (kiln_pjrt_event_callback_t *cb = list; cb; cb = cb->next)
    cb->error = kiln_status_copy(error);
  bool destroyed = e->destroyed;
  pthread_cond_broadcast(&e->cv);
  kiln_mutex_unlock(&e->mu);
  /* From here on `e` may already be freed by a concurrent PJRT_Event_Destroy (unless it was
   * destroyed before, in which case it is ours to free). */
  dispatch(list);
  if (destroyed) event_free(e);
}

static PJRT_Event g_ready_event = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .ready = true, .shared = true};

/* The completed event handed out when an event with an error cannot be allocated. */
static PJRT_Event g_oom_event = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .ready = true, .shared = true};

static void oom_event_init(void) {
  g_oom_event.error = kiln_status_out_of_memory();
}

PJRT_Event *kiln_pjrt_event_ready(kiln_status error) {
  if (!error) return &g_ready_event;
  PJRT_Event *e = kiln_pjrt_event_create();
  if (!e) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    kiln_once(&once, oom_event_init);
    kiln_status_free(error);
    return &g_oom_event;
  }
  e->ready = true;
  e->error = error;
  return e;
}

#define EVENT_ARG(fn, a)                                                                          \
  do {                                                                                            \
    if (!(a)->event) return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "%s: event is NULL", fn); \
  } while (0)

static PJRT_Error *Event_Destroy(PJRT_Event_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_Event_Destroy", args, event);
  PJRT_Event *e = args->event;
  if (!e || e->shared) return NULL;
  kiln_mutex_lock(&e->mu);
  if (!e->ready && !e->user_created) {
    e->destroyed = true; /* kiln's completer frees it */
    kiln_mutex_unlock(&e->mu);
    return NULL;
  }
  kiln_mutex_unlock(&e->mu);
  event_free(e);
  return NULL;
}

static PJRT_Error *Event_IsReady(PJRT_Event_IsReady_Args *args) {
  KILN_PJRT_ARGS("PJRT_Event_IsReady", args, is_ready);
  EVENT_ARG("PJRT_Event_IsReady", args);
  if (args->event->shared) { /* the one ready event: ready, no error, never changes */
    args->is_ready = true;
    return NULL;
  }
  kiln_mutex_lock(&args->event->mu);
  args->is_ready = args->event->ready;
  kiln_mutex_unlock(&args->event->mu);
  return NULL;
}

static PJRT_Error *Event_Error(PJRT_Event_Error_Args *args) {
  KILN_PJRT_ARGS("PJRT_Event_Error", args, event);
  EVENT_ARG("PJRT_Event_Error", args);
  PJRT_Event *e = args->event;
  if (e->shared) return NULL;
  kiln_mutex_lock(&e->mu);
  bool ready = e->ready;
  kiln_status copy = ready ? kiln_status_copy(e->error) : NULL;
  kiln_mutex_unlock(&e->mu);
  if (!ready)
    return kiln_pjrt_error_make(KILN_FAILED_PRECONDITION,
                                "PJRT_Event_Error: the event is not ready yet (check "
                                "PJRT_Event_IsReady or use PJRT_Event_Await)");
  return kiln_pjrt_error_from_status(copy);
}

static PJRT_Error *Event_Await(PJRT_Event_Await_Args *args) {
  KILN_PJRT_ARGS("PJRT_Event_Await", args, event);
  EVENT_ARG("PJRT_Event_Await", args);
  PJRT_Event *e = args->event;
  /* The one ready event (what every synchronous execute and transfer hands out): nothing to
   * wait for and no error, so no lock (threads awaiting it at once would contend on it). */
  if (e->shared) return NULL;
  kiln_mutex_lock(&e->mu);
  while (!e->ready) pthread_cond_wait(&e->cv, &e->mu);
  kiln_status copy = kiln_status_copy(e->error);
  kiln_mutex_unlock(&e->mu);
  return kiln_pjrt_error_from_status(copy);
}

static PJRT_Error *Event_OnReady(PJRT_Event_OnReady_Args *args) {
  KILN_PJRT_ARGS("PJRT_Event_OnReady", args, user_arg);
  EVENT_ARG("PJRT_Event_OnReady", args);
  if (!args->callback)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "PJRT_Event_OnReady: callback is NULL");
  PJRT_Event *e = args->event;
  kiln_pjrt_event_callback_t *cb = kiln_try_calloc(1, sizeof(*cb));
  if (!cb)
    return kiln_pjrt_error_make(KILN_RESOURCE_EXHAUSTED,
                                "PJRT_Event_OnReady: out of host memory for the callback");
  cb->fn = args->callback;
  cb->user_arg = args->user_arg;
  kiln_mutex_lock(&e->mu);
  if (!e->ready) {
    /* Appended, so callbacks run in registration order. */
    kiln_pjrt_event_callback_t **p = &e->callbacks;
    while (*p) p = &(*p)->next;
    *p = cb;
    kiln_mutex_unlock(&e->mu);
    return NULL;
  }
  cb->error = kiln_status_copy(e->error);
  kiln_mutex_unlock(&e->mu);
  dispatch(cb);
  return NULL;
}

static PJRT_Error *Event_Create(PJRT_Event_Create_Args *args) {
  KILN_PJRT_ARGS("PJRT_Event_Create", args, event);
  PJRT_Event *e = kiln_pjrt_event_create();
  if (!e)
    return kiln_pjrt_error_make(KILN_RESOURCE_EXHAUSTED,
                                "PJRT_Event_Create: out of host memory for the event");
  e->user_created = true;
  args->event = e;
  return NULL;
}

static PJRT_Error *Event_Set(PJRT_Event_Set_Args *args) {
  KILN_PJRT_ARGS("PJRT_Event_Set", args, error_message_size);
  EVENT_ARG("PJRT_Event_Set", args);
  PJRT_Event *e = args->event;
  if (!e->user_created)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Event_Set: the event was not made by PJRT_Event_Create; "
                                "kiln completes its own events");
  if ((int)args->error_code < 0 || (int)args->error_code > (int)PJRT_Error_Code_UNAUTHENTICATED)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Event_Set: error_code %d is not a "
                                "PJRT error code",
                                (int)args->error_code);
  if (args->error_message_size && !args->error_message)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Event_Set: error_message is NULL with size %zu",
                                args->error_message_size);
  kiln_mutex_lock(&e->mu);
  bool ready = e->ready;
  kiln_mutex_unlock(&e->mu);
  if (ready)
    return kiln_pjrt_error_make(KILN_FAILED_PRECONDITION,
                                "PJRT_Event_Set: the event was already set");
  kiln_status err = NULL;
  if (args->error_code != PJRT_Error_Code_OK)
    err = kiln_status_make_at((kiln_status_code_t)args->error_code, NULL, 0, "%.*s",
                              (int)args->error_message_size,
                              args->error_message ? args->error_message : "");
  /* Two concurrent Sets: the first wins; complete drops the second's error. */
  kiln_pjrt_event_complete(e, err);
  return NULL;
}

void kiln_pjrt_fill_event(PJRT_Api *api) {
  api->PJRT_Event_Destroy = Event_Destroy;
  api->PJRT_Event_IsReady = Event_IsReady;
  api->PJRT_Event_Error = Event_Error;
  api->PJRT_Event_Await = Event_Await;
  api->PJRT_Event_OnReady = Event_OnReady;
  api->PJRT_Event_Create = Event_Create;
  api->PJRT_Event_Set = Event_Set;
}
