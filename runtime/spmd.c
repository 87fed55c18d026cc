/* SPMD runs on N host devices (spmd.h). */
#include "runtime/spmd.h"

#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"

typedef struct clique_entry {
  char *op; /* the collective's name (owned) */
  int64_t key;
  int part; /* kiln_spmd_world_clique */
  kiln_coll_clique_t *clique;
  struct clique_entry *next;
} clique_entry_t;

/* An async collective begun over MPI (kiln_spmd_world_put_pending). */
typedef struct pending_entry {
  char *op;
  int participant;
  void *handle;
  void (*finish)(void *handle);
  struct pending_entry *next;
} pending_entry_t;

struct kiln_spmd_world {
  int num_replicas, num_partitions;
  int64_t *device_assignment; /* NULL: identity */
  int64_t timeout_ms;
  pthread_mutex_t mu; /* guards the list and `aborted` */
  clique_entry_t *cliques;
  pending_entry_t *pending;
  kiln_status aborted;
  kiln_mpi_t *mpi; /* NULL: every participant in this process */
  int local_devices;
};

kiln_status kiln_spmd_world_create(int num_replicas, int num_partitions,
                                   const int64_t *device_assignment, int64_t timeout_ms,
                                   kiln_spmd_world_t **out) {
  *out = NULL;
  if (num_replicas < 1 || num_partitions < 1 || (int64_t)num_replicas * num_partitions > 4096 ||
      timeout_ms < 0)
    return KILN_ERR_INVALID(
        "SPMD world: %d replicas x %d partitions (1..4096 participants), "
        "timeout %" PRId64 " ms",
        num_replicas, num_partitions, timeout_ms);
  kiln_spmd_world_t *w = kiln_try_calloc(1, sizeof *w);
  size_t n = (size_t)num_replicas * (size_t)num_partitions;
  if (w && device_assignment) {
    w->device_assignment = kiln_try_malloc(n * sizeof(int64_t));
    if (w->device_assignment) {
      memcpy(w->device_assignment, device_assignment, n * sizeof(int64_t));
    } else {
      kiln_free(w);
      w = NULL;
    }
  }
  if (!w) return KILN_ERR_EXHAUSTED("SPMD world: out of host memory for %zu participants", n);
  w->num_replicas = num_replicas;
  w->num_partitions = num_partitions;
  w->timeout_ms = timeout_ms ? timeout_ms : KILN_SPMD_DEFAULT_TIMEOUT_MS;
  pthread_mutex_init(&w->mu, NULL);
  *out = w;
  return KILN_STATUS_OK;
}

void kiln_spmd_world_destroy(kiln_spmd_world_t *w) {
  if (!w) return;
  while (w->cliques) {
    clique_entry_t *e = w->cliques;
    w->cliques = e->next;
    kiln_coll_clique_destroy(e->clique);
    kiln_free(e->op);
    kiln_free(e);
  }
  /* A participant left one behind (a start without its done: refused at load, so not
   * expected): stop MPI so it ends, and end it before the world goes. */
  if (w->pending && w->mpi)
    kiln_mpi_break(w->mpi, "an SPMD world ended with a collective under way");
  while (w->pending) {
    pending_entry_t *e = w->pending;
    w->pending = e->next;
    e->finish(e->handle);
    kiln_free(e->op);
    kiln_free(e);
  }
  kiln_status_free(w->aborted);
  kiln_free(w->device_assignment);
  pthread_mutex_destroy(&w->mu);
  kiln_free(w);
}

int kiln_spmd_world_replicas(const kiln_spmd_world_t *w) {
  return w->num_replicas;
}

int kiln_spmd_world_partitions(const kiln_spmd_world_t *w) {
  return w->num_partitions;
}

int64_t kiln_spmd_world_device(const kiln_spmd_world_t *w, int participant) {
  return w->device_assignment ? w->device_assignment[participant] : participant;
}

void kiln_spmd_world_describe(const kiln_spmd_world_t *w, int participant, kiln_strbuf_t *b) {
  int64_t dev = kiln_spmd_world_device(w, participant);
  kiln_strbuf_printf(b, "replica %d partition %d (device %" PRId64 ")",
                     participant / w->num_partitions, participant % w->num_partitions, dev);
}

void kiln_spmd_world_set_mpi(kiln_spmd_world_t *w, kiln_mpi_t *mpi, int local_devices) {
  w->mpi = mpi;
  w->local_devices = local_devices;
}

kiln_mpi_t *kiln_spmd_world_mpi(const kiln_spmd_world_t *w, int *local_devices) {
  if (local_devices) *local_devices = w->local_devices;
  return w->mpi;
}

int64_t kiln_spmd_world_timeout_ms(const kiln_spmd_world_t *w) {
  return w->timeout_ms;
}

/* With w->mu held. */
static clique_entry_t *lookup(kiln_spmd_world_t *w, const char *op, int64_t key, int part) {
  clique_entry_t *e = w->cliques;
  while (e && (e->key != key || e->part != part || strcmp(e->op, op) != 0)) e = e->next;
  return e;
}

kiln_status kiln_spmd_world_clique(kiln_spmd_world_t *w, const char *op, int64_t key, int part,
                                   int size, kiln_coll_clique_t **out) {
  *out = NULL;
  kiln_status st = KILN_STATUS_OK;
  kiln_mutex_lock(&w->mu);
  if (w->aborted) {
    st = kiln_status_make(KILN_ABORTED, "%s", kiln_status_message(w->aborted));
  } else {
    clique_entry_t *e = lookup(w, op, key, part);
    if (!e) {
      size_t len = strlen(op) + 1;
      e = kiln_try_calloc(1, sizeof *e);
      if (e) e->op = kiln_try_malloc(len);
      if (e && e->op) {
        memcpy(e->op, op, len);
        e->key = key;
        e->part = part;
        st = kiln_coll_clique_create(size, w->timeout_ms, &e->clique);
      } else {
        st = KILN_ERR_EXHAUSTED("out of host memory for the clique of %s (group %" PRId64 ")", op,
                                key);
      }
      if (st) {
        if (e) kiln_free(e->op);
        kiln_free(e);
        e = NULL;
      } else {
        e->next = w->cliques;
        w->cliques = e;
      }
    }
    if (e && kiln_coll_clique_size(e->clique) != size)
      st = KILN_ERR_INTERNAL("participants disagree on the size of a group (%d vs %d)",
                             kiln_coll_clique_size(e->clique), size);
    if (!st) *out = e->clique;
  }
  kiln_mutex_unlock(&w->mu);
  return st;
}

kiln_coll_clique_t *kiln_spmd_world_find_clique(kiln_spmd_world_t *w, const char *op, int64_t key,
                                                int part) {
  kiln_mutex_lock(&w->mu);
  clique_entry_t *e = lookup(w, op, key, part);
  kiln_mutex_unlock(&w->mu);
  return e ? e->clique : NULL;
}

kiln_status kiln_spmd_world_put_pending(kiln_spmd_world_t *w, const char *op, int participant,
                                        void *handle, void (*finish)(void *handle)) {
  size_t len = strlen(op) + 1;
  pending_entry_t *e = kiln_try_calloc(1, sizeof *e);
  if (e) e->op = kiln_try_malloc(len);
  if (!e || !e->op) {
    if (e) kiln_free(e);
    return KILN_ERR_EXHAUSTED("out of host memory for the pending collective %s", op);
  }
  memcpy(e->op, op, len);
  e->participant = participant;
  e->handle = handle;
  e->finish = finish;
  kiln_mutex_lock(&w->mu);
  e->next = w->pending;
  w->pending = e;
  kiln_mutex_unlock(&w->mu);
  return KILN_STATUS_OK;
}

int kiln_spmd_world_pending_of(kiln_spmd_world_t *w, int participant, void **out, int max) {
  int n = 0;
  kiln_mutex_lock(&w->mu);
  for (pending_entry_t *e = w->pending; e; e = e->next)
    if (e->participant == participant) {
      if (n < max) out[n] = e->handle;
      n++;
    }
  kiln_mutex_unlock(&w->mu);
  return n;
}

void *kiln_spmd_world_take_pending(kiln_spmd_world_t *w, const char *op, int participant) {
  kiln_mutex_lock(&w->mu);
  pending_entry_t **at = &w->pending;
  while (*at && ((*at)->participant != participant || strcmp((*at)->op, op) != 0))
    at = &(*at)->next;
  pending_entry_t *e = *at;
  if (e) *at = e->next;
  kiln_mutex_unlock(&w->mu);
  if (!e) return NULL;
  void *h = e->handle;
  kiln_free(e->op);
  kiln_free(e);
  return h;
}

void kiln_spmd_world_abort(kiln_spmd_world_t *w, int participant, const char *why) {
  kiln_mutex_lock(&w->mu);
  if (!w->aborted) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_append(&b, "stopped: participant ");
    kiln_spmd_world_describe(w, participant, &b);
    kiln_strbuf_printf(&b, " failed (%s)", why ? why : "?");
    w->aborted = kiln_status_make(KILN_ABORTED, "%s", kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
    for (clique_entry_t *e = w->cliques; e; e = e->next)
      kiln_coll_clique_abort(e->clique, kiln_status_message(w->aborted));
    if (w->mpi) kiln_mpi_break(w->mpi, kiln_status_message(w->aborted));
  }
  kiln_mutex_unlock(&w->mu);
}

/* ---- running every participant ---- */

typedef struct {
  kiln_executable_t *e;
  const kiln_spmd_run_params_t *p;
  kiln_spmd_participant_t who;
  int local; /* index into the run's streams, params and outputs */
  int32_t num_outputs;
  kiln_status status;
} participant_t;

static void *participant_main(void *arg) {
  participant_t *x = arg;
  const kiln_spmd_run_params_t *p = x->p;
  int i = x->local;
  x->status = kiln_executable_run_participant(
      x->e, p->streams[i], p->params[i], p->param_sizes, p->num_params,
      p->outputs + (size_t)i * (size_t)x->num_outputs, NULL, &x->who);
  if (x->status && kiln_status_code(x->status) != KILN_ABORTED)
    kiln_spmd_world_abort(x->who.world, x->who.participant, kiln_status_message(x->status));
  return NULL;
}

kiln_status kiln_executable_run_spmd(kiln_executable_t *e, const kiln_spmd_run_params_t *p) {
  if (!e || !p || !p->streams || !p->outputs || (p->num_params && (!p->params || !p->param_sizes)))
    return KILN_ERR_INVALID("SPMD run: NULL executable, streams, parameters or outputs");
  kiln_spmd_world_t *w = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_spmd_world_create(p->num_replicas, p->num_partitions,
                                                    p->device_assignment, p->timeout_ms, &w));
  int world = p->num_replicas * p->num_partitions, n = world, first = 0;
  if (p->mpi) {
    int procs = kiln_mpi_size(p->mpi);
    if (world % procs) {
      kiln_spmd_world_destroy(w);
      return KILN_ERR_INVALID("SPMD run: %d participants do not split over %d MPI processes", world,
                              procs);
    }
    n = world / procs;
    first = kiln_mpi_rank(p->mpi) * n;
    kiln_spmd_world_set_mpi(w, p->mpi, n);
  }
  int32_t no = kiln_executable_desc(e)->num_outputs;
  for (size_t i = 0; i < (size_t)n * (size_t)no; i++) p->outputs[i] = NULL;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (p->streams[i] == p->streams[j]) {
        kiln_spmd_world_destroy(w);
        return KILN_ERR_INVALID("SPMD run: participants %d and %d share a stream", j, i);
      }
  participant_t *xs = kiln_try_calloc((size_t)n, sizeof *xs);
  pthread_t *threads = kiln_try_calloc((size_t)n, sizeof *threads);
  bool *started = kiln_try_calloc((size_t)n, sizeof *started);
  if (!xs || !threads || !started) {
    kiln_free(started);
    kiln_free(threads);
    kiln_free(xs);
    kiln_spmd_world_destroy(w);
    return KILN_ERR_EXHAUSTED("SPMD run: out of host memory for %d participants", n);
  }
  kiln_status st = KILN_STATUS_OK;
  for (int i = 0; i < n; i++) {
    xs[i].e = e;
    xs[i].p = p;
    xs[i].who.world = w;
    xs[i].who.participant = first + i;
    xs[i].local = i;
    xs[i].num_outputs = no;
  }
  for (int i = 0; i < n && !st; i++) {
    int err = pthread_create(&threads[i], NULL, participant_main, &xs[i]);
    if (err) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "SPMD run: cannot start the thread of participant %d of %d (%s)", i, n,
                            strerror(err));
      kiln_spmd_world_abort(w, first + i, "its thread did not start");
    } else {
      started[i] = true;
    }
  }
  for (int i = 0; i < n; i++)
    if (started[i]) pthread_join(threads[i], NULL);
  /* The error to report: a participant's own failure before any peer's ABORTED. */
  int pick = -1;
  for (int i = 0; i < n; i++)
    if (xs[i].status && (pick < 0 || (kiln_status_code(xs[pick].status) == KILN_ABORTED &&
                                      kiln_status_code(xs[i].status) != KILN_ABORTED)))
      pick = i;
  if (!st && pick >= 0) {
    kiln_strbuf_t b = {0};
    kiln_spmd_world_describe(w, first + pick, &b);
    st = kiln_status_annotate(xs[pick].status, "on %s", kiln_strbuf_cstr(&b));
    xs[pick].status = KILN_STATUS_OK;
    kiln_strbuf_free(&b);
  }
  for (int i = 0; i < n; i++) kiln_status_free(xs[i].status);
  if (st)
    for (size_t i = 0; i < (size_t)n * (size_t)no; i++) {
      kiln_device_buffer_destroy(p->outputs[i]);
      p->outputs[i] = NULL;
    }
  kiln_free(started);
  kiln_free(threads);
  kiln_free(xs);
  kiln_spmd_world_destroy(w);
  return st;
}
