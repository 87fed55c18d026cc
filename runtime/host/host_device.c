/* The host device (host_device.h).
 *
 * Streams: each stream owns a worker thread that drains a FIFO of operations in order (an
 * operation submitted to an idle stream runs on the submitting thread: op_submit, and without
 * the stream's lock for kernels, copies, memsets and gemms: submit);
 * operations are recycled through a per-stream free list, so the steady state does not
 * allocate. Kernels split their blocks over the device's kiln_host_pool. An operation that
 * fails makes the stream sticky-failed: later work is skipped (events still complete, so
 * nothing waits forever) and the error comes back from the next synchronize. */
#include "runtime/host/host_device.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/host_pool.h"
#include "runtime/command_buffer.h"

typedef struct host_device {
  kiln_device_t base;
  kiln_host_pool_t *pool;
} host_device_t;

typedef struct host_event {
  kiln_event_t base;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t recorded;  /* generation of the last record */
  uint64_t completed; /* highest generation that completed */
} host_event_t;

typedef struct host_exec host_exec_t;

typedef enum op_kind {
  OP_KERNEL,
  OP_COPY,
  OP_MEMSET,
  OP_GEMM,
  OP_EVENT_RECORD,
  OP_EVENT_WAIT,
  OP_CMD_LIST,
} op_kind_t;

#define OP_INLINE_ARGS 16

typedef struct host_op {
  struct host_op *next;
  op_kind_t kind;
  void **heap_args; /* kernel arguments beyond OP_INLINE_ARGS; kept across reuse */
  int heap_cap;
  union {
    struct {
      kiln_host_kernel_fn fn;
      int64_t num_blocks;
      void **args; /* points at inline_args or heap_args */
      void *inline_args[OP_INLINE_ARGS];
      int num_args;
      const char *name;
    } k;
    struct {
      void *dst;
      const void *src;
      size_t n;
    } copy;
    struct {
      void *dst;
      uint32_t pattern;
      int elem_size;
      size_t count;
    } set;
    struct {
      kiln_gemm_desc_t g;
      const void *a, *b;
      void *c;
    } gemm;
    struct {
      host_event_t *e;
      uint64_t gen;
    } ev;
    struct {
      host_exec_t *x;
    } list;
  } u;
} host_op_t;

typedef struct host_stream {
  kiln_stream_t base;
  host_device_t *dev;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  host_op_t *head, *tail, *free_list;
  uint64_t submitted;         /* written by the thread that uses the stream, under mu */
  _Atomic uint64_t completed; /* written by whoever ran the operation, under mu */
  bool stop;
  kiln_status error; /* first failure since the last synchronize */
  /* kiln_stream_overlap_begin's depth; while > 0 nothing runs on the submitting thread.
   * Only the thread that uses the stream reads and writes it. */
  int overlap;
} host_stream_t;

/* One command of a recorded list as its replay runs it. A one-block kernel (whose block
 * kiln_host_pool_launch would run on the calling thread anyway) is a direct call
 * `fn(args, 0, 1)` with its arguments resolved at record time; every other command has `fn`
 * NULL and goes through run_cmd (multi-block kernels through the pool, copies, memsets,
 * gemms, custom calls). */
typedef struct host_step {
  kiln_host_kernel_fn fn;
  void **args; /* into host_exec.kernel_args */
  int64_t blocks;
} host_step_t;

/* A recorded command list: the description, each kernel's arguments already in the kernel
 * ABI's form (void * array) and the flat array of steps the replay runs, replayed by one
 * stream operation (or directly on the launching thread when the stream is idle). */
struct host_exec {
  host_device_t *dev;
  kiln_cmd_list_t list;
  void **kernel_args; /* all kernel arguments, back to back */
  size_t *arg_offset; /* per command */
  host_step_t *steps; /* per command */
  size_t num_direct;  /* steps with a direct call (all of them: the list never fails) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int inflight; /* launches queued or running on the stream's worker */
};

static host_device_t *dev_of(kiln_device_t *d) {
  return (host_device_t *)d;
}

/* ---- memory ----------------------------------------------------------------------------- */

/* Buffers of at least this many bytes are aligned to it and advised as transparent huge pages
 * (where the kernel offers them: "madvise" or "always" in
 * /sys/kernel/mm/transparent_hugepage/enabled): a fresh buffer is faulted in 2 MiB at a time
 * instead of 4 KiB, which is most of a first execute that writes large outputs (two fresh
 * 128 MiB results: 792 ms for the first run vs 10-13 ms for the next ones on 4 KiB pages). */
enum { kHostHugePage = 2 << 20 };

static void *host_aligned_alloc(size_t rounded) {
  if (kiln_alloc_injected_failure()) return NULL;
#ifdef MADV_HUGEPAGE
  if (rounded >= kHostHugePage) {
    size_t huge = (rounded + kHostHugePage - 1) & ~(size_t)(kHostHugePage - 1);
    void *p = huge >= rounded ? aligned_alloc(kHostHugePage, huge) : NULL;
    if (p) {
      (void)madvise(p, huge, MADV_HUGEPAGE); /* advice only: a kernel without THP ignores it */
      return p;
    }
  }
#endif
  return aligned_alloc(64, rounded);
}

static kiln_status host_mem_alloc(kiln_device_t *d, size_t size, kiln_devptr_t *out) {
  size_t rounded = (size + 63) & ~(size_t)63;
  if (rounded < size) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host alloc: size overflow");
  /* Device memory is sized by the user: fallible, and reached by the failure injection. */
  void *p = host_aligned_alloc(rounded);
  if (!p)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host device: cannot allocate %zu bytes",
                            size);
  *out = (kiln_devptr_t)(uintptr_t)p;
  return NULL;
}

static void host_mem_free(kiln_device_t *d, kiln_devptr_t p) {
  free((void *)(uintptr_t)p);
}

static kiln_status host_host_alloc(kiln_device_t *d, size_t size, void **out) {
  kiln_devptr_t p = 0;
  KILN_RETURN_IF_ERROR_PLAIN(host_mem_alloc(d, size, &p));
  *out = (void *)(uintptr_t)p;
  return NULL;
}

static void host_host_free(kiln_device_t *d, void *p) {
  free(p);
}

/* ---- operations ------------------------------------------------------------------------- */

static kiln_status run_cmd_list(host_stream_t *s, host_exec_t *x);

static kiln_status run_op(host_stream_t *s, host_op_t *op) {
  switch (op->kind) {
    case OP_KERNEL:
      return kiln_host_pool_launch(s->dev->pool, op->u.k.fn, op->u.k.args, op->u.k.num_blocks, 0);
    case OP_COPY:
      memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.n);
      return NULL;
    case OP_MEMSET: {
      size_t n = op->u.set.count;
      uint32_t p = op->u.set.pattern;
      if (op->u.set.elem_size == 1) {
        memset(op->u.set.dst, (int)(p & 0xff), n);
      } else if (op->u.set.elem_size == 2) {
        uint16_t v = (uint16_t)p, *d = op->u.set.dst;
        for (size_t i = 0; i < n; i++) d[i] = v;
      } else {
        uint32_t *d = op->u.set.dst;
        for (size_t i = 0; i < n; i++) d[i] = p;
      }
      return NULL;
    }
    case OP_GEMM:
      return kiln_host_gemm(&op->u.gemm.g, op->u.gemm.a, op->u.gemm.b, op->u.gemm.c,
                            KILN_HOST_BLAS_AUTO, s->dev->pool);
    case OP_EVENT_RECORD: /* handled by the worker (also when failed) */
    case OP_EVENT_WAIT:
      return NULL;
    case OP_CMD_LIST:
      return run_cmd_list(s, op->u.list.x);
  }
  return KILN_ERR_INTERNAL("host stream: unknown operation %d", (int)op->kind);
}

static void event_complete(host_event_t *e, uint64_t gen) {
  kiln_mutex_lock(&e->mu);
  if (gen > e->completed) e->completed = gen;
  pthread_cond_broadcast(&e->cv);
  kiln_mutex_unlock(&e->mu);
}

static void event_wait_for(host_event_t *e, uint64_t gen) {
  kiln_mutex_lock(&e->mu);
  while (e->completed < gen) pthread_cond_wait(&e->cv, &e->mu);
  kiln_mutex_unlock(&e->mu);
}

static void exec_release(host_exec_t *x) {
  kiln_mutex_lock(&x->mu);
  if (--x->inflight == 0) pthread_cond_broadcast(&x->cv);
  kiln_mutex_unlock(&x->mu);
}

/* Records the outcome of an operation that ran (the caller holds s->mu): the stream's first
 * failure is kept for the next synchronize. */
static void op_finish(host_stream_t *s, kiln_status st) {
  if (st && !s->error)
    s->error = st;
  else
    kiln_status_free(st);
  /* A release store (every writer holds mu, so no read-modify-write is needed): what the
   * operation did, and the error above, are seen by stream_idle_unlocked. */
  uint64_t done = atomic_load_explicit(&s->completed, memory_order_relaxed) + 1;
  atomic_store_explicit(&s->completed, done, memory_order_release);
  if (done == s->submitted) pthread_cond_broadcast(&s->done_cv);
}

/* Whether an operation submitted now may run on the submitting thread (the caller holds
 * s->mu): nothing queued, nothing running. See op_submit. */
static bool stream_idle(host_stream_t *s) {
  return !s->head && atomic_load_explicit(&s->completed, memory_order_relaxed) == s->submitted &&
         !s->stop;
}

/* Whether every operation submitted has completed, read without the mutex by the thread that
 * uses the stream (streams are not thread-safe, device.h: one thread enqueues and synchronizes
 * at a time, so `submitted` is that thread's own count). The acquire pairs with op_finish's
 * release: when it holds, the queue is empty, the worker waits for work and touches nothing
 * until this thread submits again, and `error` is as the last operation left it. */
static bool stream_idle_unlocked(host_stream_t *s) {
  return atomic_load_explicit(&s->completed, memory_order_acquire) == s->submitted;
}

/* Returns `op` to the free list (the caller holds s->mu). */
static void op_put(host_stream_t *s, host_op_t *op) {
  op->next = s->free_list;
  s->free_list = op;
}

/* Runs one dequeued operation (the caller holds s->mu; it is released while the operation runs
 * and held again on return), then records its outcome and recycles it. Used by the worker and
 * by op_submit for an idle stream. */
static void op_execute(host_stream_t *s, host_op_t *op) {
  bool failed = s->error != NULL;
  kiln_mutex_unlock(&s->mu);
  kiln_status st = NULL;
  if (op->kind == OP_EVENT_RECORD) {
    event_complete(op->u.ev.e, op->u.ev.gen);
  } else if (op->kind == OP_EVENT_WAIT) {
    event_wait_for(op->u.ev.e, op->u.ev.gen);
  } else if (!failed) {
    st = run_op(s, op);
  }
  if (op->kind == OP_CMD_LIST) exec_release(op->u.list.x);
  kiln_mutex_lock(&s->mu);
  op_put(s, op);
  op_finish(s, st);
}

static void *stream_worker(void *arg) {
  host_stream_t *s = arg;
  kiln_mutex_lock(&s->mu);
  for (;;) {
    while (!s->stop && !s->head) pthread_cond_wait(&s->work_cv, &s->mu);
    if (!s->head) break; /* stop requested and the queue is drained */
    host_op_t *op = s->head;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    op_execute(s, op);
  }
  kiln_mutex_unlock(&s->mu);
  return NULL;
}

/* Takes an operation from the free list, or a new one (the caller holds s->mu); NULL when the
 * allocation is refused. */
static host_op_t *op_get(host_stream_t *s) {
  host_op_t *op = s->free_list;
  if (op) {
    s->free_list = op->next;
  } else {
    op = kiln_try_calloc(1, sizeof(*op));
    if (!op) return NULL;
  }
  op->next = NULL;
  return op;
}

/* After op_get refused: unlocks the stream and says so. */
static kiln_status op_refused(host_stream_t *s) {
  kiln_mutex_unlock(&s->mu);
  return KILN_ERR_EXHAUSTED("host stream: out of host memory for an operation");
}

/* Makes sure the next op_get finds an operation on the free list (only this thread enqueues:
 * streams are not thread-safe), for callers that change other state before they enqueue. */
static kiln_status op_reserve(host_stream_t *s) {
  kiln_mutex_lock(&s->mu);
  host_op_t *op = op_get(s);
  if (!op) return op_refused(s);
  op_put(s, op);
  kiln_mutex_unlock(&s->mu);
  return NULL;
}

/* Queues `op` (the caller holds s->mu; it is held again on return). An idle stream — nothing
 * queued, nothing running — runs the operation right here instead: the order is the same
 * (there is nothing before it) and the two thread handoffs of the worker (wake it, wait for
 * it) are saved, which is most of a small kernel's launch cost. Only a wait for an event is
 * always queued: blocking the caller on it could deadlock a thread that records the event
 * later. Streams are not thread-safe (device.h), so no other thread enqueues meanwhile. */
static void op_submit(host_stream_t *s, host_op_t *op) {
  op->next = NULL;
  if (!s->overlap && stream_idle(s) && op->kind != OP_EVENT_WAIT) {
    s->submitted++;
    op_execute(s, op);
    return;
  }
  if (s->tail)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  s->submitted++;
  pthread_cond_signal(&s->work_cv);
}

static void host_stream_overlap(kiln_stream_t *base, bool begin) {
  host_stream_t *s = (host_stream_t *)base;
  if (begin)
    s->overlap++;
  else if (s->overlap > 0)
    s->overlap--;
}

static kiln_status host_stream_create(kiln_device_t *d, kiln_stream_t **out) {
  host_stream_t *s = kiln_try_calloc(1, sizeof(*s));
  if (!s) return KILN_ERR_EXHAUSTED("host stream: out of host memory");
  atomic_init(&s->completed, 0);
  s->base.device = d;
  s->dev = dev_of(d);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    kiln_free(s);
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host stream: cannot start its thread");
  }
  *out = &s->base;
  return NULL;
}

static kiln_status host_stream_synchronize(kiln_stream_t *base) {
  host_stream_t *s = (host_stream_t *)base;
  if (stream_idle_unlocked(s) && !s->error) return NULL; /* nothing to wait for: no lock */
  kiln_mutex_lock(&s->mu);
  while (atomic_load_explicit(&s->completed, memory_order_relaxed) != s->submitted)
    pthread_cond_wait(&s->done_cv, &s->mu);
  kiln_status err = s->error;
  s->error = NULL;
  kiln_mutex_unlock(&s->mu);
  return err;
}

static void host_stream_destroy(kiln_stream_t *base) {
  host_stream_t *s = (host_stream_t *)base;
  kiln_status_free(host_stream_synchronize(base));
  kiln_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_signal(&s->work_cv);
  kiln_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  for (host_op_t *op = s->free_list; op;) {
    host_op_t *next = op->next;
    kiln_free(op->heap_args);
    kiln_free(op);
    op = next;
  }
  kiln_status_free(s->error);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work_cv);
  pthread_cond_destroy(&s->done_cv);
  kiln_free(s);
}

/* Runs `req` (a kernel, copy, memset or gemm) right here when the stream is idle, as
 * host_exec_launch runs a recorded list: nothing queued or running, so no lock and no
 * operation are needed, which is most of what a scalar kernel in a while loop's body costs
 * (stream_idle_unlocked says why reading without the mutex is safe). Otherwise queues a copy
 * of it, which op_submit may still run here. A kernel's arguments are copied into the queued
 * operation; the caller's array may go away on return. */
static kiln_status submit(host_stream_t *s, host_op_t *req) {
  if (!s->overlap && stream_idle_unlocked(s) && !s->error) {
    kiln_status st = run_op(s, req);
    if (st) { /* kept for the next synchronize, as op_finish keeps a queued one's */
      kiln_mutex_lock(&s->mu);
      if (!s->error)
        s->error = st;
      else
        kiln_status_free(st);
      kiln_mutex_unlock(&s->mu);
    }
    return NULL;
  }
  kiln_mutex_lock(&s->mu);
  host_op_t *op = op_get(s);
  if (!op) return op_refused(s);
  op->kind = req->kind;
  op->u = req->u; /* the parts the kind does not use are copied uninitialized, never read */
  if (req->kind == OP_KERNEL) {
    int n = req->u.k.num_args;
    if (n <= OP_INLINE_ARGS) {
      op->u.k.args = op->u.k.inline_args;
    } else {
      if (op->heap_cap < n) {
        void **args = kiln_try_realloc(op->heap_args, (size_t)n * sizeof(void *));
        if (!args) {
          op_put(s, op);
          return op_refused(s);
        }
        op->heap_args = args;
        op->heap_cap = n;
      }
      op->u.k.args = op->heap_args;
    }
    memcpy(op->u.k.args, req->u.k.args, (size_t)n * sizeof(void *));
  }
  op_submit(s, op);
  kiln_mutex_unlock(&s->mu);
  return NULL;
}

static kiln_status host_memcpy(kiln_stream_t *base, void *dst, const void *src, size_t n) {
  host_op_t req; /* not zeroed: see host_launch */
  req.kind = OP_COPY;
  req.u.copy.dst = dst;
  req.u.copy.src = src;
  req.u.copy.n = n;
  return submit((host_stream_t *)base, &req);
}

static kiln_status host_memcpy_d2d(kiln_stream_t *s, kiln_devptr_t dst, kiln_devptr_t src,
                                   size_t n) {
  return host_memcpy(s, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
}
static kiln_status host_memcpy_h2d(kiln_stream_t *s, kiln_devptr_t dst, const void *src, size_t n) {
  return host_memcpy(s, (void *)(uintptr_t)dst, src, n);
}
static kiln_status host_memcpy_d2h(kiln_stream_t *s, void *dst, kiln_devptr_t src, size_t n) {
  return host_memcpy(s, dst, (const void *)(uintptr_t)src, n);
}

static kiln_status host_memset(kiln_stream_t *base, kiln_devptr_t dst, uint32_t pattern,
                               int elem_size, size_t count) {
  host_op_t req; /* not zeroed: see host_launch */
  req.kind = OP_MEMSET;
  req.u.set.dst = (void *)(uintptr_t)dst;
  req.u.set.pattern = pattern;
  req.u.set.elem_size = elem_size;
  req.u.set.count = count;
  return submit((host_stream_t *)base, &req);
}

static kiln_status host_launch(kiln_stream_t *base, const kiln_kernel_t *k,
                               const kiln_launch_dims_t *d, const uint64_t *args, int num_args) {
  void *argv[KILN_KERNEL_MAX_ARGS];
  if (num_args < 0 || num_args > KILN_KERNEL_MAX_ARGS)
    return KILN_ERR_INVALID("host launch of %s: %d arguments (at most %d)", k->name, num_args,
                            KILN_KERNEL_MAX_ARGS);
  for (int i = 0; i < num_args; i++) argv[i] = (void *)(uintptr_t)args[i];
  host_op_t req; /* not zeroed: the union is a gemm's size, and this is a hot path */
  req.kind = OP_KERNEL;
  req.u.k.fn = (kiln_host_kernel_fn)k->handle;
  req.u.k.num_blocks = (int64_t)kiln_launch_dims_num_blocks(d);
  req.u.k.args = argv;
  req.u.k.num_args = num_args;
  req.u.k.name = k->name;
  return submit((host_stream_t *)base, &req);
}

static kiln_status host_gemm_op(kiln_stream_t *base, const kiln_gemm_desc_t *g, kiln_devptr_t a,
                                kiln_devptr_t b, kiln_devptr_t c) {
  host_op_t req; /* not zeroed: see host_launch */
  req.kind = OP_GEMM;
  req.u.gemm.g = *g;
  req.u.gemm.a = (const void *)(uintptr_t)a;
  req.u.gemm.b = (const void *)(uintptr_t)b;
  req.u.gemm.c = (void *)(uintptr_t)c;
  return submit((host_stream_t *)base, &req);
}

/* ---- events ----------------------------------------------------------------------------- */

static kiln_status host_event_create(kiln_device_t *d, kiln_event_t **out) {
  host_event_t *e = kiln_try_calloc(1, sizeof(*e));
  if (!e) return KILN_ERR_EXHAUSTED("host event: out of host memory");
  e->base.device = d;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  *out = &e->base;
  return NULL;
}

static void host_event_destroy(kiln_event_t *base) {
  host_event_t *e = (host_event_t *)base;
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  kiln_free(e);
}

static kiln_status host_event_record(kiln_event_t *base, kiln_stream_t *sbase) {
  host_event_t *e = (host_event_t *)base;
  host_stream_t *s = (host_stream_t *)sbase;
  /* A generation that is never completed would hang its waiters: the operation first. */
  KILN_RETURN_IF_ERROR_PLAIN(op_reserve(s));
  kiln_mutex_lock(&e->mu);
  uint64_t gen = ++e->recorded;
  kiln_mutex_unlock(&e->mu);
  kiln_mutex_lock(&s->mu);
  host_op_t *op = op_get(s);
  op->kind = OP_EVENT_RECORD;
  op->u.ev.e = e;
  op->u.ev.gen = gen;
  op_submit(s, op);
  kiln_mutex_unlock(&s->mu);
  return NULL;
}

static kiln_status host_stream_wait_event(kiln_stream_t *sbase, kiln_event_t *base) {
  host_event_t *e = (host_event_t *)base;
  host_stream_t *s = (host_stream_t *)sbase;
  kiln_mutex_lock(&e->mu);
  uint64_t gen = e->recorded; /* wait for the record made before this call */
  kiln_mutex_unlock(&e->mu);
  if (gen == 0) return NULL; /* never recorded: nothing to wait for (as in CUDA) */
  kiln_mutex_lock(&s->mu);
  host_op_t *op = op_get(s);
  if (!op) return op_refused(s);
  op->kind = OP_EVENT_WAIT;
  op->u.ev.e = e;
  op->u.ev.gen = gen;
  op_submit(s, op);
  kiln_mutex_unlock(&s->mu);
  return NULL;
}

static kiln_status host_event_synchronize(kiln_event_t *base) {
  host_event_t *e = (host_event_t *)base;
  kiln_mutex_lock(&e->mu);
  uint64_t gen = e->recorded;
  kiln_mutex_unlock(&e->mu);
  event_wait_for(e, gen);
  return NULL;
}

/* ---- modules ----------------------------------------------------------------------------- */

typedef struct host_module {
  kiln_device_module_t base;
  size_t num;
  kiln_kernel_t *kernels;
  char **names;
} host_module_t;

static void host_module_unload(kiln_device_module_t *base);

static kiln_status host_module_load(kiln_device_t *d, const kiln_module_image_t *img,
                                    kiln_device_module_t **out) {
  if (img->num_functions == 0 || !img->names || !img->functions)
    return KILN_ERR_INVALID("host module: the image lists no kernel functions");
  for (size_t i = 0; i < img->num_functions; i++)
    if (!img->names[i] || !img->functions[i])
      return KILN_ERR_INVALID("host module: kernel %zu has no name or no function", i);
  host_module_t *m = kiln_try_calloc(1, sizeof(*m));
  if (!m) return KILN_ERR_EXHAUSTED("host module: out of host memory");
  m->base.device = d;
  m->kernels = kiln_try_calloc(img->num_functions, sizeof(kiln_kernel_t));
  m->names = kiln_try_calloc(img->num_functions, sizeof(char *));
  if (m->kernels && m->names) m->num = img->num_functions;
  for (size_t i = 0; i < m->num; i++) {
    size_t n = strlen(img->names[i]) + 1;
    m->names[i] = kiln_try_malloc(n);
    if (!m->names[i]) break;
    memcpy(m->names[i], img->names[i], n);
  }
  if (!m->num || !m->names[m->num - 1]) {
    host_module_unload(&m->base);
    return KILN_ERR_EXHAUSTED("host module: out of host memory for %zu kernels",
                              img->num_functions);
  }
  for (size_t i = 0; i < m->num; i++) {
    m->kernels[i].name = m->names[i];
    m->kernels[i].module = &m->base;
    m->kernels[i].handle = img->functions[i];
    m->kernels[i].uid = kiln_kernel_next_uid();
  }
  *out = &m->base;
  return NULL;
}

static void host_module_unload(kiln_device_module_t *base) {
  host_module_t *m = (host_module_t *)base;
  for (size_t i = 0; i < m->num; i++) kiln_free(m->names[i]);
  kiln_free(m->names);
  kiln_free(m->kernels);
  kiln_free(m);
}

static kiln_status host_module_get_kernel(kiln_device_module_t *base, const char *name,
                                          const kiln_kernel_t **out) {
  host_module_t *m = (host_module_t *)base;
  for (size_t i = 0; i < m->num; i++)
    if (!strcmp(m->names[i], name)) {
      *out = &m->kernels[i];
      return NULL;
    }
  return kiln_status_make(KILN_NOT_FOUND, "host module: no kernel named '%s'", name);
}

/* ---- recorded command lists ----------------------------------------------------------- */

/* Resolves command i's kernel arguments and its replay step (see host_step_t). */
static void exec_fill(host_exec_t *x, size_t i) {
  const kiln_cmd_t *c = &x->list.cmds[i];
  void **args = x->kernel_args + x->arg_offset[i];
  for (int a = 0; a < c->num_args; a++) args[a] = (void *)(uintptr_t)c->args[a];
  host_step_t *st = &x->steps[i];
  x->num_direct -= st->fn != NULL;
  st->fn = NULL;
  st->args = args;
  st->blocks = 0;
  if (c->kind != KILN_CMD_KERNEL) return;
  st->blocks = (int64_t)kiln_launch_dims_num_blocks(&c->dims);
  if (st->blocks == 1) st->fn = (kiln_host_kernel_fn)c->kernel->handle;
  x->num_direct += st->fn != NULL;
}

static kiln_status host_exec_instantiate(kiln_device_t *d, const kiln_cmd_list_t *l, void **out) {
  for (size_t i = 0; i < l->len; i++)
    if (l->cmds[i].kind == KILN_CMD_KERNEL && (!l->cmds[i].kernel || !l->cmds[i].kernel->handle))
      return KILN_ERR_INVALID("host command list: command %zu launches no kernel function", i);
  host_exec_t *x = kiln_try_calloc(1, sizeof(*x));
  if (!x) return KILN_ERR_EXHAUSTED("host command list: out of host memory");
  x->dev = dev_of(d);
  size_t total = 0;
  for (size_t i = 0; i < l->len; i++) total += (size_t)l->cmds[i].num_args;
  bool copied = kiln_cmd_list_copy(&x->list, l);
  x->arg_offset = kiln_try_calloc(l->len ? l->len : 1, sizeof(size_t));
  x->steps = kiln_try_calloc(l->len ? l->len : 1, sizeof(host_step_t));
  x->kernel_args = kiln_try_calloc(total ? total : 1, sizeof(void *));
  if (!copied || !x->arg_offset || !x->steps || !x->kernel_args) {
    kiln_cmd_list_free(&x->list);
    kiln_free(x->arg_offset);
    kiln_free(x->steps);
    kiln_free(x->kernel_args);
    kiln_free(x);
    return KILN_ERR_EXHAUSTED("host command list: out of host memory for %zu commands", l->len);
  }
  total = 0;
  for (size_t i = 0; i < l->len; i++) {
    x->arg_offset[i] = total;
    total += (size_t)l->cmds[i].num_args;
  }
  for (size_t i = 0; i < l->len; i++) exec_fill(x, i);
  pthread_mutex_init(&x->mu, NULL);
  pthread_cond_init(&x->cv, NULL);
  *out = x;
  return NULL;
}

static void exec_wait_idle(host_exec_t *x) {
  kiln_mutex_lock(&x->mu);
  while (x->inflight > 0) pthread_cond_wait(&x->cv, &x->mu);
  kiln_mutex_unlock(&x->mu);
}

/* Patching waits until queued replays of this list ran: a replay must see the addresses it
 * was launched with (a CUDA graph exec behaves the same way). A replay that runs on the
 * launching thread is over before its launch returns (both run under the cache's mutex, as
 * this does). */
static kiln_status host_exec_update(void *xp, size_t index, const kiln_cmd_t *cmd) {
  host_exec_t *x = xp;
  if (index >= x->list.len) return KILN_ERR_INVALID("host command list: no command %zu", index);
  kiln_cmd_t *r = &x->list.cmds[index];
  if (cmd->kind != r->kind || cmd->num_args != r->num_args ||
      (cmd->kind == KILN_CMD_KERNEL && (!cmd->kernel || !cmd->kernel->handle)))
    return KILN_ERR_INVALID("host command list: command %zu changed its structure", index);
  exec_wait_idle(x);
  uint64_t *args = r->args;
  *r = *cmd;
  r->args = args;
  if (r->num_args) memcpy(args, cmd->args, (size_t)r->num_args * sizeof(uint64_t));
  exec_fill(x, index);
  return NULL;
}

/* Runs `n` steps that are all direct calls. */
static void run_steps(const host_step_t *st, size_t n) {
  for (const host_step_t *end = st + n; st < end; st++) st->fn(st->args, 0, st->blocks);
}

/* An idle stream runs the list right here (see op_submit): no operation object and no
 * in-flight count, since the cache's mutex, held by our caller, keeps updates and destroys
 * out until it returns. A list of direct kernel calls only (which can neither fail nor touch
 * the stream) on a stream with nothing in flight and no sticky error runs as if it were never
 * submitted, without the stream's mutex (stream_idle_unlocked); else the same check under the
 * mutex decides (one lock in all: a sticky error skips the list, work that finished meanwhile
 * lets it run). Otherwise the list is queued behind the stream's work. */
static kiln_status host_exec_launch(void *xp, kiln_stream_t *base) {
  host_exec_t *x = xp;
  host_stream_t *s = (host_stream_t *)base;
  if (!s->overlap && x->num_direct == x->list.len && stream_idle_unlocked(s) && !s->error) {
    run_steps(x->steps, x->list.len);
    return NULL;
  }
  kiln_mutex_lock(&s->mu);
  if (!s->overlap && x->num_direct == x->list.len && stream_idle(s)) {
    if (!s->error) run_steps(x->steps, x->list.len);
    kiln_mutex_unlock(&s->mu);
    return NULL;
  }
  if (!s->overlap && stream_idle(s)) {
    bool failed = s->error != NULL;
    s->submitted++;
    kiln_mutex_unlock(&s->mu);
    kiln_status st = failed ? NULL : run_cmd_list(s, x);
    kiln_mutex_lock(&s->mu);
    op_finish(s, st);
    kiln_mutex_unlock(&s->mu);
    return NULL;
  }
  host_op_t *op = op_get(s);
  if (!op) return op_refused(s);
  kiln_mutex_lock(&x->mu);
  x->inflight++;
  kiln_mutex_unlock(&x->mu);
  op->kind = OP_CMD_LIST;
  op->u.list.x = x;
  op_submit(s, op);
  kiln_mutex_unlock(&s->mu);
  return NULL;
}

static void host_exec_destroy(void *xp) {
  host_exec_t *x = xp;
  exec_wait_idle(x);
  kiln_cmd_list_free(&x->list);
  kiln_free(x->kernel_args);
  kiln_free(x->arg_offset);
  kiln_free(x->steps);
  pthread_mutex_destroy(&x->mu);
  pthread_cond_destroy(&x->cv);
  kiln_free(x);
}

/* Command i of a recorded list that is not a direct kernel call. */
static kiln_status run_cmd(host_stream_t *s, host_exec_t *x, size_t i) {
  const kiln_cmd_t *c = &x->list.cmds[i];
  switch (c->kind) {
    case KILN_CMD_KERNEL:
      KILN_RETURN_IF_ERROR(
          kiln_host_pool_launch(x->dev->pool, (kiln_host_kernel_fn)c->kernel->handle,
                                x->steps[i].args, x->steps[i].blocks, 0),
          "in command %zu (kernel %s) of a recorded list", i, c->kernel->name);
      return NULL;
    case KILN_CMD_MEMCPY:
      memmove((void *)(uintptr_t)c->dst, (const void *)(uintptr_t)c->src, c->bytes);
      return NULL;
    case KILN_CMD_MEMSET: {
      host_op_t op = {.kind = OP_MEMSET};
      op.u.set.dst = (void *)(uintptr_t)c->dst;
      op.u.set.pattern = c->pattern;
      op.u.set.elem_size = c->elem_size;
      op.u.set.count = c->count;
      return run_op(s, &op);
    }
    case KILN_CMD_GEMM:
      KILN_RETURN_IF_ERROR(
          kiln_host_gemm(&c->gemm, (const void *)(uintptr_t)c->a, (const void *)(uintptr_t)c->b,
                         (void *)(uintptr_t)c->dst, KILN_HOST_BLAS_AUTO, x->dev->pool),
          "in command %zu (gemm) of a recorded list", i);
      return NULL;
    case KILN_CMD_CUSTOM_CALL:
      /* In order, on this thread, after the commands before it: no synchronization. */
      KILN_RETURN_IF_ERROR(kiln_cmd_custom_call_invoke(c, &s->base),
                           "in command %zu of a recorded list", i);
      return NULL;
  }
  return KILN_ERR_INTERNAL("host command list: unknown command kind %d", (int)c->kind);
}

/* The whole list back to back, on the stream's worker or the launching thread: a direct
 * call per one-block kernel, nothing else in between. */
static kiln_status run_cmd_list(host_stream_t *s, host_exec_t *x) {
  const host_step_t *steps = x->steps;
  const size_t n = x->list.len;
  for (size_t i = 0; i < n; i++) {
    const host_step_t *st = &steps[i];
    if (st->fn) {
      st->fn(st->args, 0, st->blocks);
      continue;
    }
    KILN_RETURN_IF_ERROR_PLAIN(run_cmd(s, x, i));
  }
  return NULL;
}

static kiln_status host_issue(kiln_stream_t *s, const kiln_cmd_list_t *l) {
  for (size_t i = 0; i < l->len; i++) {
    const kiln_cmd_t *c = &l->cmds[i];
    switch (c->kind) {
      case KILN_CMD_KERNEL:
        KILN_RETURN_IF_ERROR_PLAIN(
            kiln_stream_launch(s, c->kernel, &c->dims, c->args, c->num_args));
        break;
      case KILN_CMD_MEMCPY:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_memcpy_d2d(s, c->dst, c->src, c->bytes));
        break;
      case KILN_CMD_MEMSET:
        KILN_RETURN_IF_ERROR_PLAIN(
            kiln_stream_memset(s, c->dst, c->pattern, c->elem_size, c->count));
        break;
      case KILN_CMD_GEMM:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_gemm(s, &c->gemm, c->a, c->b, c->dst));
        break;
      case KILN_CMD_CUSTOM_CALL:
        /* Issued one by one, the handler runs on this thread: what is queued must have run
         * (as the custom-call thunk does outside command buffers). */
        KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_synchronize(s));
        KILN_RETURN_IF_ERROR_PLAIN(kiln_cmd_custom_call_invoke(c, s));
        break;
    }
  }
  return NULL;
}

static const kiln_cmd_exec_ops_t host_cmd_ops = {
    .name = "host-command-list",
    .supports = NULL,
    .instantiate = host_exec_instantiate,
    .update = host_exec_update,
    .launch = host_exec_launch,
    .destroy = host_exec_destroy,
    .issue = host_issue,
};

/* ---- device ----------------------------------------------------------------------------- */

static void host_device_destroy(kiln_device_t *d) {
  host_device_t *h = dev_of(d);
  kiln_device_fini_common(d);
  kiln_host_pool_destroy(h->pool);
  kiln_free(h);
}

static const kiln_device_vtable_t host_vtable = {
    .destroy = host_device_destroy,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .host_alloc = host_host_alloc,
    .host_free = host_host_free,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .stream_synchronize = host_stream_synchronize,
    .stream_overlap = host_stream_overlap,
    .memcpy_d2d = host_memcpy_d2d,
    .memcpy_h2d = host_memcpy_h2d,
    .memcpy_d2h = host_memcpy_d2h,
    .memset = host_memset,
    .launch = host_launch,
    .gemm = host_gemm_op,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_record = host_event_record,
    .stream_wait_event = host_stream_wait_event,
    .event_synchronize = host_event_synchronize,
    .module_load = host_module_load,
    .module_unload = host_module_unload,
    .module_get_kernel = host_module_get_kernel,
    .cmd_ops = &host_cmd_ops,
};

kiln_status kiln_host_device_create(int num_threads, kiln_device_t **out) {
  if (!out) return KILN_ERR_INVALID("host device: NULL out");
  *out = NULL;
  host_device_t *h = kiln_try_calloc(1, sizeof(*h));
  if (!h) return KILN_ERR_EXHAUSTED("host device: out of host memory");
  kiln_status s = kiln_host_pool_create(num_threads, &h->pool);
  if (s) {
    kiln_free(h);
    return kiln_status_annotate(s, "while creating the host device");
  }
  char name[64];
  snprintf(name, sizeof(name), "host (%d threads)", kiln_host_pool_num_workers(h->pool));
  s = kiln_device_init_common(&h->base, &host_vtable, KILN_DEVICE_HOST, name);
  if (s) {
    host_device_destroy(&h->base);
    return kiln_status_annotate(s, "while creating the host device");
  }
  *out = &h->base;
  return NULL;
}
