/* Collectives between processes over OpenMPI loaded with dlopen (mpi.h). */
#include "runtime/mpi.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/str.h"
#include "runtime/runtime_options.h"

/* OpenMPI 4's ABI (its mpi.h): every handle is a pointer to one of its structures; the
 * predefined ones are addresses of exported globals. */
typedef void *mpi_handle_t;
typedef struct mpi_status {
  int source, tag, error, cancelled;
  size_t ucount;
} mpi_status_t;
#define MPI_OK 0
#define MPI_THREAD_SERIALIZED_LEVEL 2
#define MPI_MAX_ERROR_STRING_LEN 256
#define MPI_TAG_UB_KEYVAL 0 /* OpenMPI's MPI_TAG_UB: the first of its predefined attributes */

struct kiln_mpi {
  void *lib;
  int (*initialized)(int *);
  int (*finalized)(int *);
  int (*init_thread)(int *, char ***, int, int *);
  int (*query_thread)(int *);
  int (*finalize)(void);
  int (*comm_rank)(mpi_handle_t, int *);
  int (*comm_size)(mpi_handle_t, int *);
  int (*comm_dup)(mpi_handle_t, mpi_handle_t *);
  int (*comm_free)(mpi_handle_t *);
  int (*comm_set_errhandler)(mpi_handle_t, mpi_handle_t);
  int (*comm_get_attr)(mpi_handle_t, int, void *, int *);
  int (*isend)(const void *, int, mpi_handle_t, int, int, mpi_handle_t, mpi_handle_t *);
  int (*irecv)(void *, int, mpi_handle_t, int, int, mpi_handle_t, mpi_handle_t *);
  int (*test)(mpi_handle_t *, int *, mpi_status_t *);
  int (*cancel)(mpi_handle_t *);
  int (*request_free)(mpi_handle_t *);
  int (*error_string)(int, char *, int *);
  mpi_handle_t byte, world, errors_return;
  mpi_handle_t comm; /* kiln's duplicate of MPI_COMM_WORLD, errors returned */
  bool we_initialized;
  int rank, size;
  int tag_ub;         /* the largest tag */
  int abandoned;      /* requests freed while still open, after a failure */
  pthread_mutex_t mu; /* every MPI call, and `broken` */
  kiln_status broken;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_mpi_t *g_mpi;
static kiln_status g_error; /* loading or initializing failed: returned again */
static bool g_finalized;

static kiln_status mpi_error(kiln_mpi_t *m, int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING_LEN + 1] = "";
  int len = 0;
  if (m->error_string && m->error_string(rc, msg, &len) != MPI_OK) len = 0;
  msg[len > 0 && len <= MPI_MAX_ERROR_STRING_LEN ? len : 0] = '\0';
  return kiln_status_make(KILN_INTERNAL, "MPI: %s failed: error %d (%s)", what, rc,
                          *msg ? msg : "?");
}

static kiln_status load(kiln_mpi_t *m) {
  const char *lib = kiln_runtime_options().mpi_library;
  if (!lib) lib = KILN_MPI_LIBRARY;
  /* RTLD_GLOBAL: OpenMPI's own components, loaded by it, resolve libmpi's symbols. */
  m->lib = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (!m->lib) {
    const char *e = dlerror();
    return kiln_status_make(KILN_UNAVAILABLE,
                            "MPI: cannot load %s (%s): install OpenMPI (Debian: apt-get install "
                            "libopenmpi3 openmpi-bin) to run across processes",
                            lib, e ? e : "?");
  }
  static const struct {
    size_t offset;
    const char *name;
  } syms[] = {
#define SYM(field, name) {offsetof(kiln_mpi_t, field), name}
      SYM(initialized, "MPI_Initialized"),
      SYM(finalized, "MPI_Finalized"),
      SYM(init_thread, "MPI_Init_thread"),
      SYM(query_thread, "MPI_Query_thread"),
      SYM(finalize, "MPI_Finalize"),
      SYM(comm_rank, "MPI_Comm_rank"),
      SYM(comm_size, "MPI_Comm_size"),
      SYM(comm_dup, "MPI_Comm_dup"),
      SYM(comm_free, "MPI_Comm_free"),
      SYM(comm_set_errhandler, "MPI_Comm_set_errhandler"),
      SYM(comm_get_attr, "MPI_Comm_get_attr"),
      SYM(isend, "MPI_Isend"),
      SYM(irecv, "MPI_Irecv"),
      SYM(test, "MPI_Test"),
      SYM(cancel, "MPI_Cancel"),
      SYM(request_free, "MPI_Request_free"),
      SYM(error_string, "MPI_Error_string"),
      SYM(byte, "ompi_mpi_byte"),
      SYM(world, "ompi_mpi_comm_world"),
      SYM(errors_return, "ompi_mpi_errors_return"),
#undef SYM
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *p = dlsym(m->lib, syms[i].name);
    if (!p)
      return kiln_status_make(KILN_UNAVAILABLE,
                              "MPI: %s has no symbol %s (kiln needs OpenMPI 4, Debian's "
                              "libopenmpi3)",
                              lib, syms[i].name);
    memcpy((char *)m + syms[i].offset, &p, sizeof p);
  }
  return KILN_STATUS_OK;
}

static kiln_status init(kiln_mpi_t *m) {
  KILN_RETURN_IF_ERROR_PLAIN(load(m));
  int inited = 0, fin = 0, provided = 0, rc;
  if ((rc = m->finalized(&fin)) != MPI_OK) return mpi_error(m, rc, "MPI_Finalized");
  if (fin) return kiln_status_make(KILN_FAILED_PRECONDITION, "MPI: already finalized");
  if ((rc = m->initialized(&inited)) != MPI_OK) return mpi_error(m, rc, "MPI_Initialized");
  if (!inited) {
    if ((rc = m->init_thread(NULL, NULL, MPI_THREAD_SERIALIZED_LEVEL, &provided)) != MPI_OK)
      return mpi_error(m, rc, "MPI_Init_thread");
    m->we_initialized = true;
  } else if ((rc = m->query_thread(&provided)) != MPI_OK) {
    return mpi_error(m, rc, "MPI_Query_thread");
  }
  if (provided < MPI_THREAD_SERIALIZED_LEVEL)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "MPI: thread level %d; kiln needs MPI_THREAD_SERIALIZED (2)", provided);
  if ((rc = m->comm_dup(m->world, &m->comm)) != MPI_OK) return mpi_error(m, rc, "MPI_Comm_dup");
  if ((rc = m->comm_set_errhandler(m->comm, m->errors_return)) != MPI_OK)
    return mpi_error(m, rc, "MPI_Comm_set_errhandler");
  if ((rc = m->comm_rank(m->comm, &m->rank)) != MPI_OK) return mpi_error(m, rc, "MPI_Comm_rank");
  if ((rc = m->comm_size(m->comm, &m->size)) != MPI_OK) return mpi_error(m, rc, "MPI_Comm_size");
  int *ub = NULL, flag = 0;
  if ((rc = m->comm_get_attr(m->world, MPI_TAG_UB_KEYVAL, &ub, &flag)) != MPI_OK)
    return mpi_error(m, rc, "MPI_Comm_get_attr(MPI_TAG_UB)");
  m->tag_ub = flag && ub ? *ub : 32767; /* the least the standard allows */
  return KILN_STATUS_OK;
}

static kiln_status copy_status(kiln_status s) {
  return kiln_status_make(kiln_status_code(s), "%s", kiln_status_message(s));
}

kiln_status kiln_mpi_get(kiln_mpi_t **out) {
  *out = NULL;
  kiln_status st = KILN_STATUS_OK;
  kiln_mutex_lock(&g_mu);
  if (g_finalized) {
    st = kiln_status_make(KILN_FAILED_PRECONDITION, "MPI: already finalized by kiln");
  } else if (g_error) {
    st = copy_status(g_error);
  } else if (!g_mpi) {
    kiln_mpi_t *m = kiln_calloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    st = init(m);
    if (st) {
      /* the library stays loaded: OpenMPI does not support being unloaded */
      g_error = copy_status(st);
      pthread_mutex_destroy(&m->mu);
      kiln_free(m);
    } else {
      g_mpi = m;
    }
  }
  if (!st) *out = g_mpi;
  kiln_mutex_unlock(&g_mu);
  return st;
}

int kiln_mpi_rank(const kiln_mpi_t *m) {
  return m->rank;
}

int kiln_mpi_size(const kiln_mpi_t *m) {
  return m->size;
}

/* With m->mu held. */
static void set_broken(kiln_mpi_t *m, kiln_status_code_t code, const char *why) {
  if (!m->broken) m->broken = kiln_status_make(code, "%s", why ? why : "?");
}

void kiln_mpi_break(kiln_mpi_t *m, const char *why) {
  if (!m) return;
  kiln_mutex_lock(&m->mu);
  set_broken(m, KILN_ABORTED, why);
  kiln_mutex_unlock(&m->mu);
}

void kiln_mpi_finalize(void) {
  kiln_mutex_lock(&g_mu);
  kiln_mpi_t *m = g_mpi;
  if (m) {
    /* Open transfers abandoned after a failure name buffers their owners have freed since:
     * MPI_Finalize would move them. Such a process exits without finalizing (mpirun reports
     * it; the run failed anyway). */
    if (m->abandoned) {
      fprintf(stderr,
              "kiln: MPI not finalized: %d transfers were left open by a failed collective\n",
              m->abandoned);
    } else {
      m->comm_free(&m->comm);
      if (m->we_initialized) m->finalize();
    }
    kiln_status_free(m->broken);
    pthread_mutex_destroy(&m->mu);
    kiln_free(m);
    g_mpi = NULL;
    g_finalized = true;
  }
  kiln_status_free(g_error);
  g_error = NULL;
  kiln_mutex_unlock(&g_mu);
}

/* ---- point to point transfers ---- */

#define HDR_MAGIC 0x4b4c4e4du         /* "KLNM" */
#define CHUNK_BYTES ((size_t)1 << 30) /* MPI counts are ints */

typedef struct hdr {
  uint32_t magic, kind;
  int64_t a, b;
  char name[64];
} hdr_t;

typedef enum {
  K_ALL_REDUCE,
  K_ALL_REDUCE_GATHER, /* the all-reduce's second phase */
  K_REDUCE_SCATTER,
  K_ALL_GATHER,
  K_ALL_TO_ALL,
  K_PERMUTE,
  K_BROADCAST
} kind_t;

static const char *const kind_names[] = {"all-reduce",          "all-reduce", "reduce-scatter",
                                         "all-gather",          "all-to-all", "collective-permute",
                                         "collective-broadcast"};

static const char *kind_name(uint32_t k) {
  return k < sizeof kind_names / sizeof kind_names[0] ? kind_names[k] : "?";
}

typedef struct xfer {
  int peer; /* group rank */
  bool recv;
  char *buf;
  size_t bytes;
  hdr_t hdr; /* sent, or received */
  int nreq;  /* 1 (the header) + data chunks */
  mpi_handle_t *req;
  bool *fin;
  int posted;       /* requests [0, posted) were started */
  bool data_posted; /* receives: the data after a checked header */
  bool done;
} xfer_t;

typedef struct call {
  const kiln_mpi_group_t *g;
  hdr_t me;
  xfer_t *x;
  int n;
} call_t;

static int nchunks(size_t bytes) {
  return (int)((bytes + CHUNK_BYTES - 1) / CHUNK_BYTES);
}

static void add(call_t *c, bool recv, int peer, void *buf, size_t bytes) {
  xfer_t *x = &c->x[c->n++];
  memset(x, 0, sizeof *x);
  x->peer = peer;
  x->recv = recv;
  x->buf = buf;
  x->bytes = bytes;
  x->nreq = 1 + nchunks(bytes);
  x->req = kiln_calloc((size_t)x->nreq, sizeof *x->req);
  x->fin = kiln_calloc((size_t)x->nreq, sizeof *x->fin);
}

static void peer_route(const kiln_mpi_group_t *g, int peer, int *proc, int *send_tag,
                       int *recv_tag) {
  int L = g->local_devices, q = g->members[peer], mine = g->members[g->rank] % L;
  *proc = q / L;
  *send_tag = mine * L + q % L;
  *recv_tag = (q % L) * L + mine;
}

/* With m->mu held: posts the data chunks of x (a send, or a receive whose header checked). */
static kiln_status post_data(const call_t *c, xfer_t *x) {
  kiln_mpi_t *m = c->g->mpi;
  int proc, st, rt;
  peer_route(c->g, x->peer, &proc, &st, &rt);
  for (int i = 1; i < x->nreq; i++) {
    size_t off = (size_t)(i - 1) * CHUNK_BYTES, len = x->bytes - off;
    if (len > CHUNK_BYTES) len = CHUNK_BYTES;
    int rc = x->recv ? m->irecv(x->buf + off, (int)len, m->byte, proc, rt, m->comm, &x->req[i])
                     : m->isend(x->buf + off, (int)len, m->byte, proc, st, m->comm, &x->req[i]);
    if (rc != MPI_OK) return mpi_error(m, rc, x->recv ? "MPI_Irecv" : "MPI_Isend");
    x->posted = i + 1;
  }
  x->data_posted = true;
  return KILN_STATUS_OK;
}

static kiln_status post(const call_t *c, xfer_t *x) {
  kiln_mpi_t *m = c->g->mpi;
  int proc, st, rt;
  peer_route(c->g, x->peer, &proc, &st, &rt);
  int rc;
  if (x->recv) {
    rc = m->irecv(&x->hdr, (int)sizeof x->hdr, m->byte, proc, rt, m->comm, &x->req[0]);
  } else {
    x->hdr = c->me;
    rc = m->isend(&x->hdr, (int)sizeof x->hdr, m->byte, proc, st, m->comm, &x->req[0]);
  }
  if (rc != MPI_OK) return mpi_error(m, rc, x->recv ? "MPI_Irecv" : "MPI_Isend");
  x->posted = 1;
  return x->recv ? KILN_STATUS_OK : post_data(c, x);
}

static kiln_status check_header(const call_t *c, const xfer_t *x) {
  const hdr_t *h = &x->hdr, *me = &c->me;
  char theirs[sizeof h->name + 1];
  memcpy(theirs, h->name, sizeof h->name);
  theirs[sizeof h->name] = '\0';
  if (h->magic != HDR_MAGIC)
    return kiln_status_make(KILN_INTERNAL, "%s '%s': rank %d sent a message that is not kiln's",
                            kind_name(me->kind), me->name, x->peer);
  if (h->kind != me->kind || h->a != me->a || h->b != me->b ||
      strncmp(h->name, me->name, sizeof h->name) != 0)
    return KILN_ERR_INVALID("ranks run different collectives: rank %d runs %s '%s' (sizes %" PRId64
                            ", %" PRId64 "), rank %d runs %s '%s' (sizes %" PRId64 ", %" PRId64
                            "); every device must run the same collectives in the same order",
                            c->g->rank, kind_name(me->kind), me->name, me->a, me->b, x->peer,
                            kind_name(h->kind), theirs, h->a, h->b);
  return KILN_STATUS_OK;
}

/* With m->mu held: tests x's open requests; *progress when one finished. */
static kiln_status step(const call_t *c, xfer_t *x, bool *progress) {
  kiln_mpi_t *m = c->g->mpi;
  bool all = true;
  for (int i = 0; i < x->posted; i++) {
    if (x->fin[i]) continue;
    int flag = 0;
    int rc = m->test(&x->req[i], &flag, NULL);
    if (rc != MPI_OK) {
      x->fin[i] = true;
      return mpi_error(m, rc, "MPI_Test");
    }
    if (flag) {
      x->fin[i] = true;
      *progress = true;
    } else {
      all = false;
    }
  }
  if (!all) return KILN_STATUS_OK;
  if (x->recv && !x->data_posted) {
    KILN_RETURN_IF_ERROR_PLAIN(check_header(c, x));
    KILN_RETURN_IF_ERROR_PLAIN(post_data(c, x));
    *progress = true;
    return step(c, x, progress);
  }
  x->done = true;
  return KILN_STATUS_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static kiln_status deadline_error(const call_t *c) {
  kiln_strbuf_t b = {0}, s = {0};
  int missing = 0, unsent = 0;
  for (int i = 0; i < c->n; i++) {
    const xfer_t *x = &c->x[i];
    if (x->done) continue;
    if (x->recv)
      kiln_strbuf_printf(&b, "%s%d", missing++ ? ", " : "", x->peer);
    else
      kiln_strbuf_printf(&s, "%s%d", unsent++ ? ", " : "", x->peer);
  }
  if (!missing) kiln_strbuf_printf(&b, "%s (did not receive)", kiln_strbuf_cstr(&s));
  kiln_status st = kiln_status_make(
      KILN_DEADLINE_EXCEEDED,
      "%s '%s' (%d ranks across processes): rank(s) %s did not arrive within %" PRId64
      " ms; every device must run the same collectives in the same order (or raise the "
      "collective timeout)",
      kind_name(c->me.kind), c->me.name, c->g->size, kiln_strbuf_cstr(&b), c->g->timeout_ms);
  kiln_strbuf_free(&b);
  kiln_strbuf_free(&s);
  return st;
}

/* With m->mu held, after a failure: cancels what is still open. */
static void cancel_open(const call_t *c) {
  kiln_mpi_t *m = c->g->mpi;
  for (int i = 0; i < c->n; i++) {
    xfer_t *x = &c->x[i];
    for (int k = 0; k < x->posted; k++) {
      if (x->fin[k]) continue;
      if (x->recv) {
        /* an unmatched receive completes as cancelled at once; wait for it briefly so the
         * buffer is not written later */
        m->cancel(&x->req[k]);
        int flag = 0;
        for (int tries = 0; tries < 1000 && !flag; tries++)
          if (m->test(&x->req[k], &flag, NULL) != MPI_OK) break;
        if (!flag) {
          m->request_free(&x->req[k]);
          m->abandoned++;
        }
      } else {
        /* a send cannot be called back: MPI may still read its buffer */
        m->request_free(&x->req[k]);
        m->abandoned++;
      }
      x->fin[k] = true;
    }
  }
}

/* Runs every transfer of c to completion, or fails (then the process's MPI is broken). */
static kiln_status run(call_t *c) {
  kiln_mpi_t *m = c->g->mpi;
  kiln_status st = KILN_STATUS_OK;
  kiln_mutex_lock(&m->mu);
  if (m->broken) st = copy_status(m->broken);
  for (int i = 0; i < c->n && !st; i++) st = post(c, &c->x[i]);
  kiln_mutex_unlock(&m->mu);
  /* Polling: MPI moves data only inside its calls (large messages take several rounds), so
   * a waiting rank yields its core for the first milliseconds without progress, then sleeps
   * between polls. */
  double last = now_ms(), deadline = last + (double)c->g->timeout_ms;
  for (bool pending = !st; pending && !st;) {
    bool progress = false;
    pending = false;
    kiln_mutex_lock(&m->mu);
    if (m->broken) st = copy_status(m->broken);
    for (int i = 0; i < c->n && !st; i++)
      if (!c->x[i].done) {
        st = step(c, &c->x[i], &progress);
        pending |= !c->x[i].done;
      }
    kiln_mutex_unlock(&m->mu);
    if (st || !pending) break;
    double now = now_ms();
    if (progress) { /* the deadline is for a rank that never arrives, not a long transfer */
      last = now;
      deadline = now + (double)c->g->timeout_ms;
    } else if (now > deadline) {
      st = deadline_error(c);
    } else if (now - last < 5.0) {
      sched_yield();
    } else {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
  if (st) {
    kiln_mutex_lock(&m->mu);
    cancel_open(c);
    set_broken(m, kiln_status_code(st), kiln_status_message(st));
    kiln_mutex_unlock(&m->mu);
  }
  for (int i = 0; i < c->n; i++) {
    kiln_free(c->x[i].req);
    kiln_free(c->x[i].fin);
  }
  c->n = 0;
  return st;
}

static kiln_status begin(call_t *c, const kiln_mpi_group_t *g, const char *name, kind_t kind,
                         int64_t a, int64_t b) {
  memset(c, 0, sizeof *c);
  if (!name) name = "?";
  if (!g || !g->mpi || !g->members || g->size < 1 || g->rank < 0 || g->rank >= g->size ||
      g->local_devices < 1 || g->timeout_ms <= 0)
    return KILN_ERR_INVALID("%s '%s' across processes: bad group", kind_name(kind), name);
  for (int k = 0; k < g->size; k++) {
    int q = g->members[k];
    if (q < 0 || q / g->local_devices >= g->mpi->size)
      return KILN_ERR_INVALID("%s '%s': rank %d is participant %d; %d processes hold %d each",
                              kind_name(kind), name, k, q, g->mpi->size, g->local_devices);
  }
  /* one tag per (sending, receiving) local device */
  if ((int64_t)g->local_devices * g->local_devices - 1 > g->mpi->tag_ub)
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "%s '%s': %d participants per process need %lld MPI tags; this MPI "
                            "has %d",
                            kind_name(kind), name, g->local_devices,
                            (long long)g->local_devices * g->local_devices, g->mpi->tag_ub + 1);
  if (a < 0 || b < 0)
    return KILN_ERR_INVALID("%s '%s': sizes %" PRId64 ", %" PRId64, kind_name(kind), name, a, b);
  c->g = g;
  c->me.magic = HDR_MAGIC;
  c->me.kind = kind;
  c->me.a = a;
  c->me.b = b;
  snprintf(c->me.name, sizeof c->me.name, "%s", name);
  c->x = kiln_calloc((size_t)(2 * g->size), sizeof *c->x);
  return KILN_STATUS_OK;
}

static void end(call_t *c) {
  kiln_free(c->x);
}

static bool overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && x < y + bn && y < x + an;
}

/* send, or a copy of it when it overlaps recv (*staged to free). */
static const char *stage(const void *send, size_t send_bytes, const void *recv, size_t recv_bytes,
                         char **staged) {
  *staged = NULL;
  if (!overlap(send, send_bytes, recv, recv_bytes)) return send;
  *staged = kiln_malloc(send_bytes);
  memcpy(*staged, send, send_bytes);
  return *staged;
}

/* ---- the collectives ---- */

static int64_t chunk_start(int64_t n, int s, int k) {
  return (n / s) * k + (k < n % s ? k : n % s);
}

static int64_t chunk_len(int64_t n, int s, int k) {
  return n / s + (k < n % s);
}

/* dst = slots[0] op slots[1] op ..., in rank order (slots of `bytes` each, contiguous). */
static void fold_slots(kiln_coll_dtype_t t, kiln_coll_reduction_t op, char *slots, int s,
                       int64_t n) {
  size_t bytes = (size_t)n * kiln_coll_dtype_bytes(t);
  for (int k = 1; k < s; k++) kiln_coll_fold(t, op, slots, slots + (size_t)k * bytes, n);
}

kiln_status kiln_mpi_all_reduce(const kiln_mpi_group_t *g, const char *name, kiln_coll_dtype_t t,
                                kiln_coll_reduction_t op, const void *send, void *recv,
                                int64_t count) {
  call_t c;
  KILN_RETURN_IF_ERROR_PLAIN(
      begin(&c, g, name, K_ALL_REDUCE, count, (int64_t)t << 8 | (int64_t)op));
  size_t es = kiln_coll_dtype_bytes(t);
  int s = g->size, r = g->rank;
  int64_t mine = chunk_len(count, s, r);
  size_t slot = (size_t)mine * es;
  char *slots = kiln_malloc(slot * (size_t)s + 1);
  /* phase 1: rank k's chunk r into slot k; this rank's chunk k to rank k */
  memcpy(slots + (size_t)r * slot, (const char *)send + (size_t)chunk_start(count, s, r) * es,
         slot);
  for (int k = 0; k < s; k++) {
    if (k == r) continue;
    add(&c, false, k, (char *)send + (size_t)chunk_start(count, s, k) * es,
        (size_t)chunk_len(count, s, k) * es);
    add(&c, true, k, slots + (size_t)k * slot, slot);
  }
  kiln_status st = run(&c);
  if (!st) {
    fold_slots(t, op, slots, s, mine);
    char *out = recv;
    memcpy(out + (size_t)chunk_start(count, s, r) * es, slots, slot);
    /* phase 2: every folded chunk to every rank */
    c.me.kind = K_ALL_REDUCE_GATHER;
    for (int k = 0; k < s; k++) {
      if (k == r) continue;
      add(&c, false, k, out + (size_t)chunk_start(count, s, r) * es, slot);
      add(&c, true, k, out + (size_t)chunk_start(count, s, k) * es,
          (size_t)chunk_len(count, s, k) * es);
    }
    st = run(&c);
  }
  kiln_free(slots);
  end(&c);
  return st;
}

/* The block exchange of reduce-scatter and all-to-all: send is [outer][size][blk] bytes; rank
 * k gets this rank's blocks k, packed [outer][blk]; *slots (the caller frees it) receives
 * [size][outer][blk], slot k rank k's blocks `rank` (slot `rank` this rank's own). */
static kiln_status exchange_blocks(call_t *c, const void *send, int64_t outer, size_t blk,
                                   char **slots) {
  int s = c->g->size, r = c->g->rank;
  size_t part = (size_t)outer * blk;
  /* One row: the blocks are already where packing would put them. */
  char *packed = outer == 1 ? NULL : kiln_malloc(part * (size_t)s + 1);
  *slots = kiln_malloc(part * (size_t)s + 1);
  for (int k = 0; k < s && packed; k++)
    for (int64_t o = 0; o < outer; o++)
      memcpy(packed + (size_t)k * part + (size_t)o * blk,
             (const char *)send + ((size_t)o * (size_t)s + (size_t)k) * blk, blk);
  const char *from = packed ? packed : (const char *)send;
  memcpy(*slots + (size_t)r * part, from + (size_t)r * part, part);
  for (int k = 0; k < s; k++) {
    if (k == r) continue;
    add(c, false, k, (char *)from + (size_t)k * part, part);
    add(c, true, k, *slots + (size_t)k * part, part);
  }
  kiln_status st = run(c);
  kiln_free(packed);
  return st;
}

/* recv [outer][size][blk] from slots [size][outer][blk]. */
static void unpack_slots(void *recv, const char *slots, int64_t outer, int s, size_t blk) {
  size_t part = (size_t)outer * blk;
  for (int64_t o = 0; o < outer; o++)
    for (int k = 0; k < s; k++)
      memcpy((char *)recv + ((size_t)o * (size_t)s + (size_t)k) * blk,
             slots + (size_t)k * part + (size_t)o * blk, blk);
}

kiln_status kiln_mpi_reduce_scatter(const kiln_mpi_group_t *g, const char *name,
                                    kiln_coll_dtype_t t, kiln_coll_reduction_t op, const void *send,
                                    void *recv, int64_t outer, int64_t inner) {
  call_t c;
  KILN_RETURN_IF_ERROR_PLAIN(
      begin(&c, g, name, K_REDUCE_SCATTER, outer * inner, (int64_t)t << 8 | (int64_t)op));
  size_t es = kiln_coll_dtype_bytes(t), blk = (size_t)inner * es;
  char *slots = NULL;
  kiln_status st = exchange_blocks(&c, send, outer, blk, &slots);
  if (!st) {
    fold_slots(t, op, slots, g->size, outer * inner);
    memcpy(recv, slots, (size_t)outer * blk);
  }
  kiln_free(slots);
  end(&c);
  return st;
}

kiln_status kiln_mpi_all_gather(const kiln_mpi_group_t *g, const char *name, const void *send,
                                void *recv, int64_t outer, size_t block_bytes) {
  call_t c;
  KILN_RETURN_IF_ERROR_PLAIN(begin(&c, g, name, K_ALL_GATHER, outer, (int64_t)block_bytes));
  int s = g->size, r = g->rank;
  size_t part = (size_t)outer * block_bytes;
  char *staged, *slots = kiln_malloc(part * (size_t)s + 1);
  const char *in = stage(send, part, recv, part * (size_t)s, &staged);
  for (int k = 0; k < s; k++) {
    if (k == r) continue;
    add(&c, false, k, (char *)in, part);
    add(&c, true, k, slots + (size_t)k * part, part);
  }
  kiln_status st = run(&c);
  if (!st) {
    memcpy(slots + (size_t)r * part, in, part);
    unpack_slots(recv, slots, outer, s, block_bytes);
  }
  kiln_free(staged);
  kiln_free(slots);
  end(&c);
  return st;
}

kiln_status kiln_mpi_all_to_all(const kiln_mpi_group_t *g, const char *name, const void *send,
                                void *recv, int64_t outer, size_t block_bytes) {
  call_t c;
  KILN_RETURN_IF_ERROR_PLAIN(begin(&c, g, name, K_ALL_TO_ALL, outer, (int64_t)block_bytes));
  char *slots = NULL;
  kiln_status st = exchange_blocks(&c, send, outer, block_bytes, &slots);
  if (!st) unpack_slots(recv, slots, outer, g->size, block_bytes);
  kiln_free(slots);
  end(&c);
  return st;
}

kiln_status kiln_mpi_permute(const kiln_mpi_group_t *g, const char *name, int source,
                             const int *targets, int num_targets, const void *send, void *recv,
                             size_t bytes) {
  call_t c;
  KILN_RETURN_IF_ERROR_PLAIN(begin(&c, g, name, K_PERMUTE, (int64_t)bytes, 0));
  kiln_status st = KILN_STATUS_OK;
  if (source < -1 || source >= g->size || num_targets < 0 || (num_targets && !targets))
    st = KILN_ERR_INVALID("collective-permute '%s': source %d, %d targets, a group of %d",
                          c.me.name, source, num_targets, g->size);
  for (int i = 0; i < num_targets && !st; i++)
    if (targets[i] < 0 || targets[i] >= g->size)
      st = KILN_ERR_INVALID("collective-permute '%s': target %d in a group of %d", c.me.name,
                            targets[i], g->size);
  if (st) {
    end(&c);
    return st;
  }
  char *staged;
  const char *in = stage(send, bytes, recv, bytes, &staged);
  for (int i = 0; i < num_targets; i++)
    if (targets[i] != g->rank) add(&c, false, targets[i], (char *)in, bytes);
  if (source >= 0 && source != g->rank) add(&c, true, source, recv, bytes);
  st = run(&c);
  if (!st && source == g->rank && in != recv) memcpy(recv, in, bytes);
  if (!st && source < 0 && bytes) memset(recv, 0, bytes);
  kiln_free(staged);
  end(&c);
  return st;
}

kiln_status kiln_mpi_broadcast(const kiln_mpi_group_t *g, const char *name, const void *send,
                               void *recv, size_t bytes) {
  call_t c;
  KILN_RETURN_IF_ERROR_PLAIN(begin(&c, g, name, K_BROADCAST, (int64_t)bytes, 0));
  if (g->rank == 0)
    for (int k = 1; k < g->size; k++) add(&c, false, k, (char *)send, bytes);
  else
    add(&c, true, 0, recv, bytes);
  kiln_status st = run(&c);
  if (!st && g->rank == 0 && send != recv && bytes) memmove(recv, send, bytes);
  end(&c);
  return st;
}

kiln_status kiln_mpi_barrier(kiln_mpi_t *m, const char *name, int64_t timeout_ms) {
  int n = m->size;
  int *members = kiln_calloc((size_t)n, sizeof *members);
  for (int k = 0; k < n; k++) members[k] = k;
  kiln_mpi_group_t g = {.mpi = m,
                        .members = members,
                        .size = n,
                        .rank = m->rank,
                        .local_devices = 1,
                        .timeout_ms = timeout_ms};
  char mine = 1, *all = kiln_calloc((size_t)n, 1);
  kiln_status st = kiln_mpi_all_gather(&g, name, &mine, all, 1, 1);
  kiln_free(all);
  kiln_free(members);
  return st;
}
