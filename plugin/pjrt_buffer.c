/* Buffers (pjrt_objects.h): storage shared through references, holds that make Delete wait,
 * donation, host transfers with any byte strides and dense layouts, copies between devices
 * and memories. Also the client's buffer-making slots: BufferFromHostBuffer,
 * CreateUninitializedBuffer, CreateViewOfDeviceBuffer (api_table.c fills buffers after the
 * client, so these replace nothing of pjrt_client.c's).
 *
 * Transfers to the device are synchronous: every copy has finished before the call returns,
 * and the event it hands out is already ready (reads and copies of a buffer still being
 * filled — an execute's output, a transfer, an alias, a control dependency — are done when
 * that ends: see "reads to the host"). That is what PJRT allows (an
 * event may be ready at once), and it makes the two copying host-buffer semantics correct at
 * once: done_with_host_buffer is ready when BufferFromHostBuffer returns, because kiln no longer
 * reads `data` by then. The exception: a large kImmutableUntilTransferCompletes upload on the
 * host, copied on the device's transfer thread ("asynchronous transfers"). The two zero-copy
 * semantics alias the caller's memory on the host platform when its layout and alignment allow
 * (zero_copy_possible; else they copy, as PJRT lets a plugin do), the done event completing when
 * the memory is released; kImmutableZeroCopy memory is never written (storage `immutable`: an
 * execute donated it copies it).
 *
 * Layouts: a buffer's device layout is a dense minor_to_major permutation (default rank-1 ...
 * 0). A requested layout with tiles other than trivial ones (every tile dimension 1) is
 * UNIMPLEMENTED, as are strides that are not a dense permutation. Host data with any byte
 * strides (negative ones too, with `data` pointing inside the array as PJRT says) is
 * densified into the device layout; ToHostBuffer writes any dense permutation the caller
 * asks for (default: the buffer's own layout, as PJRT specifies).
 *
 * Sub-byte types (s2/s4/u2/u4, f4) and pred take one byte per element on the host and on
 * the device, as kiln stores them.
 *
 * Alias buffers (Client_CreateAliasBuffer): a storage without memory whose `fill` is pending
 * until FulfillAliasBuffer gives it another storage's memory (held through `target`) or an
 * error; reads and copies to the host or another device hook on the fill (done by the
 * fulfilling thread); everything else that reads a buffer goes through
 * kiln_pjrt_buffer_acquire, which waits for the fill. Fillings from outside the queues (aliases,
 * transfer managers, control dependencies) are listed on the client (fill_list) until they
 * end; Client_Destroy ends those left with an error, so nothing queued waits for them for ever.
 *
 * Thread-safety: thread-safe; a buffer's mutex guards its storage and deletion, its holds are
 * atomic (taken without the mutex, pjrt_objects.h); the storage's reference count is atomic;
 * streams are taken from the device's pool. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "plugin/pjrt_objects.h"
#include "plugin/pjrt_relayout.h"

#define ERR(code, ...) kiln_pjrt_error_make((code), __VA_ARGS__)

/* ---- storage ----------------------------------------------------------------------------- */

static void stats_add(PJRT_Device *d, int64_t n) {
  int64_t now = atomic_fetch_add(&d->bytes_in_use, n) + n;
  int64_t peak = atomic_load(&d->peak_bytes_in_use);
  while (now > peak && !atomic_compare_exchange_weak(&d->peak_bytes_in_use, &peak, now)) {
  }
  atomic_fetch_add(&d->num_allocs, 1);
}

/* Sets up storage `st` (zeroed) over `buf` (NULL: memory that comes later, counted then): one
 * reference, one on the client (`retain`: taken here; else the caller's, handed over). */
static void storage_setup(kiln_pjrt_storage_t *st, PJRT_Device *dev, kiln_device_buffer_t *buf,
                          int32_t memory_kind, bool count, bool retain) {
  atomic_init(&st->refs, 1);
  st->buf = buf;
  st->device = dev;
  st->client = dev->client;
  st->memory_kind = memory_kind;
  st->host_accessible = !dev->client->is_cuda;
  if (retain) kiln_pjrt_client_retain(dev->client);
  if (count && buf) {
    st->counted_bytes = (int64_t)buf->size;
    stats_add(dev, st->counted_bytes);
  }
}

/* A storage owning `buf`; NULL (buf not taken) when host memory is refused. */
static kiln_pjrt_storage_t *storage_new(PJRT_Device *dev, kiln_device_buffer_t *buf,
                                        int32_t memory_kind, bool count) {
  kiln_pjrt_storage_t *st = kiln_try_calloc(1, sizeof(*st));
  if (st) storage_setup(st, dev, buf, memory_kind, count, true);
  return st;
}

static kiln_status no_host_memory(const char *what, const PJRT_Device *dev) {
  return KILN_ERR_EXHAUSTED("out of host memory for %s on %s", what, dev->desc.to_string);
}

/* Work to do when a filling ends (fill_hook): run by the thread that ends it, before anyone
 * waiting for the filling goes on, with its outcome (`error` owned by the hook: NULL when the
 * memory is there, else why not, with the fill's `failure`). `run` frees the hook. */
typedef struct fill_hook {
  struct fill_hook *next;
  void (*run)(struct fill_hook *h, kiln_status error);
} fill_hook_t;

/* The filling of a storage whose memory comes later (an AsyncHostToDeviceTransferManager's
 * transfers, an alias's fulfilment, an asynchronous execute's output, a copy of one, a
 * donation's control dependency): `pending` until it is there or failed; ready events asked
 * for meanwhile wait in `waiters`, reads and copies in `hooks`. */
typedef struct kiln_pjrt_fill {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool pending;
  bool ending;         /* fill_end is running the hooks */
  _Atomic bool ended;  /* `pending` false: readable without `mu` (execute's fast path) */
  const char *failure; /* what a reader's error says happened (a static string) */
  kiln_status error; /* owned */
  PJRT_Event **waiters;
  size_t num_waiters, cap_waiters;
  fill_hook_t *hooks, **hooks_tail;
  /* Filled from outside the queues: on the `outside` list of `client` (set by fill_list
   * before the filling is shared) until it ends, `listed` holding a reference to the storage
   * it fills. `listed`, `prev`, `next`: under the client's outside_mu. */
  PJRT_Client *client;
  kiln_pjrt_storage_t *listed;
  struct kiln_pjrt_fill *prev, *next;
  /* An end a hook asked for, kept for later on its thread (storage_complete): the storage
   * (the completer's reference) and the error, in the thread's list of ends to make. */
  struct kiln_pjrt_fill *later_next;
  kiln_pjrt_storage_t *later_storage;
  kiln_status later_error;
} kiln_pjrt_fill_t;

static kiln_pjrt_fill_t *fill_new(const char *failure) {
  kiln_pjrt_fill_t *f = kiln_calloc(1, sizeof(*f));
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  f->pending = true;
  atomic_init(&f->ended, false);
  f->failure = failure;
  f->hooks_tail = &f->hooks;
  return f;
}

static void fill_free(kiln_pjrt_fill_t *f) {
  if (!f) return;
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  kiln_status_free(f->error);
  kiln_free(f->waiters);
  kiln_free(f);
}

static void fill_end(kiln_pjrt_fill_t *f, kiln_status error);

/* What Client_Destroy ends a listed filling with. */
static kiln_status client_destroyed_error(void) {
  return kiln_status_make(KILN_CANCELLED,
                          "the client was destroyed (PJRT_Client_Destroy) before "
                          "the buffer's memory came");
}

/* Puts the filling of `st` (filled from outside the queues) on its client's list, so that
 * Client_Destroy can end it (or ends it now, after Client_Destroy). */
static void fill_list(kiln_pjrt_storage_t *st) {
  kiln_pjrt_fill_t *f = st->fill;
  PJRT_Client *c = st->client;
  f->client = c;
  kiln_mutex_lock(&c->outside_mu);
  /* After Client_Destroy ended the list (a call racing with it): ended at once instead. */
  const bool late = atomic_load(&c->destroyed);
  if (!late) {
    atomic_fetch_add(&st->refs, 1);
    f->listed = st;
    f->prev = NULL;
    f->next = c->outside;
    if (c->outside) c->outside->prev = f;
    c->outside = f;
  }
  kiln_mutex_unlock(&c->outside_mu);
  if (late) fill_end(f, client_destroyed_error());
}

/* Takes `f` off its client's list, if it is on it (with c->outside_mu held): the storage
 * whose reference the list held (the caller drops it), else NULL. */
static kiln_pjrt_storage_t *fill_unlist_locked(PJRT_Client *c, kiln_pjrt_fill_t *f) {
  kiln_pjrt_storage_t *st = f->listed;
  if (!st) return NULL;
  if (f->prev)
    f->prev->next = f->next;
  else
    c->outside = f->next;
  if (f->next) f->next->prev = f->prev;
  f->listed = NULL;
  f->prev = f->next = NULL;
  return st;
}

/* This thread is inside fill_end; the ends that hooks made meanwhile (a copy's new buffer,
 * a control dependency's view), made by the outermost fill_end in a loop once its own is done:
 * a chain of copies of copies then ends one link after another, not one stack frame group
 * deeper per link. */
static _Thread_local bool t_ending;
static _Thread_local kiln_pjrt_fill_t *t_later, **t_later_tail; /* tail NULL: empty */

/* Claims the end of `f` (true) unless it has ended or another end has claimed it: the claimer
 * publishes the memory, then ends it (fill_finish). */
static bool fill_claim(kiln_pjrt_fill_t *f) {
  kiln_mutex_lock(&f->mu);
  bool ok = f->pending && !f->ending;
  f->ending = true; /* (already, when not ok) */
  kiln_mutex_unlock(&f->mu);
  return ok;
}

/* Ends the claimed filling `f` (error: taken over, NULL for OK): its hooks first, in the order
 * they came, the filling still pending, so whoever waits for it (an execute that donates the
 * memory among them) goes on only after they read it (no hook joins once `ending` is set:
 * fill_hook); then the waiting events complete. A listed filling leaves its client's list
 * last: the reference the list held may be the storage's last, freeing `f` too. */
static void fill_finish_one(kiln_pjrt_fill_t *f, kiln_status error) {
  kiln_mutex_lock(&f->mu);
  fill_hook_t *h = f->hooks;
  f->hooks = NULL;
  f->hooks_tail = &f->hooks;
  kiln_mutex_unlock(&f->mu);
  while (h) {
    fill_hook_t *next = h->next;
    h->run(h, error ? kiln_status_annotate(kiln_status_copy(error), "%s", f->failure) : NULL);
    h = next;
  }
  kiln_mutex_lock(&f->mu);
  f->pending = false;
  atomic_store_explicit(&f->ended, true, memory_order_release);
  f->error = error;
  PJRT_Event **w = f->waiters;
  size_t n = f->num_waiters;
  f->waiters = NULL;
  f->num_waiters = f->cap_waiters = 0;
  pthread_cond_broadcast(&f->cv);
  kiln_mutex_unlock(&f->mu);
  for (size_t i = 0; i < n; i++) kiln_pjrt_event_complete(w[i], kiln_status_copy(error));
  kiln_free(w);
  /* (The client is alive: whoever ends a filling holds a reference to its storage.) */
  PJRT_Client *c = f->client;
  if (!c) return;
  kiln_mutex_lock(&c->outside_mu);
  kiln_pjrt_storage_t *st = fill_unlist_locked(c, f);
  kiln_mutex_unlock(&c->outside_mu);
  kiln_pjrt_storage_unref(st);
}

/* fill_finish_one, and then (outermost on this thread) the ends hooks asked for meanwhile. */
static void fill_finish(kiln_pjrt_fill_t *f, kiln_status error) {
  if (t_ending) {
    fill_finish_one(f, error);
    return;
  }
  t_ending = true;
  fill_finish_one(f, error);
  while (t_later) {
    kiln_pjrt_fill_t *l = t_later;
    t_later = l->later_next;
    if (!t_later) t_later_tail = NULL;
    kiln_pjrt_storage_t *st = l->later_storage;
    fill_finish_one(l, l->later_error);
    kiln_pjrt_storage_unref(st);
  }
  t_ending = false;
}

/* Ends the filling (error: taken over, NULL for OK); the waiting events complete. Only the
 * first end counts. */
static void fill_end(kiln_pjrt_fill_t *f, kiln_status error) {
  if (!fill_claim(f)) {
    kiln_status_free(error);
    return;
  }
  fill_finish(f, error);
}

/* Ends `st`'s claimed filling (fill_finish) and drops the caller's reference to `st`; inside
 * a hook, once the hook's own filling has ended (see t_later: never wait there for it). */
static void storage_end(kiln_pjrt_storage_t *st, kiln_status error) {
  if (!t_ending) {
    fill_finish(st->fill, error);
    kiln_pjrt_storage_unref(st);
    return;
  }
  kiln_pjrt_fill_t *f = st->fill;
  f->later_storage = st;
  f->later_error = error;
  f->later_next = NULL;
  *(t_later_tail ? t_later_tail : &t_later) = f;
  t_later_tail = &f->later_next;
}

void kiln_pjrt_client_end_outside_fills(PJRT_Client *c) {
  for (;;) {
    kiln_mutex_lock(&c->outside_mu);
    kiln_pjrt_fill_t *f = c->outside;
    kiln_pjrt_storage_t *st = f ? fill_unlist_locked(c, f) : NULL;
    kiln_mutex_unlock(&c->outside_mu);
    if (!f) return;
    fill_end(f, client_destroyed_error());
    kiln_pjrt_storage_unref(st);
  }
}

/* Whether `f` has not ended yet (nor is ending). */
static bool fill_is_pending(kiln_pjrt_fill_t *f) {
  kiln_mutex_lock(&f->mu);
  bool pending = f->pending && !f->ending;
  kiln_mutex_unlock(&f->mu);
  return pending;
}

/* Adds `h` to the hooks of `f` while it is pending (true); false when it has ended or is
 * ending (a hook added then would join fill_end's loop, and readers hooking on again and
 * again could keep the filling pending for ever: the caller waits for the end instead). */
static bool fill_hook(kiln_pjrt_fill_t *f, fill_hook_t *h) {
  kiln_mutex_lock(&f->mu);
  bool pending = f->pending && !f->ending;
  if (pending) {
    h->next = NULL;
    *f->hooks_tail = h;
    f->hooks_tail = &h->next;
  }
  kiln_mutex_unlock(&f->mu);
  return pending;
}

/* Waits for the filling of `st` (if any) to end: NULL, or a copy of its error. */
static kiln_status fill_wait(kiln_pjrt_storage_t *st) {
  kiln_pjrt_fill_t *f = st ? st->fill : NULL;
  if (!f) return NULL;
  kiln_mutex_lock(&f->mu);
  while (f->pending) pthread_cond_wait(&f->cv, &f->mu);
  kiln_status s = kiln_status_copy(f->error);
  kiln_mutex_unlock(&f->mu);
  return s;
}

/* Drops one reference of `s`; at the last, frees what it holds (not its own memory: see
 * storage_free) and returns its client, whose reference the caller releases after that. */
static PJRT_Client *storage_drop(kiln_pjrt_storage_t *s) {
  if (!s) return NULL;
  /* The only reference (the usual case: an execute's output destroyed): nobody else can
   * take one (taking one needs one), so no read-modify-write is needed to drop it. */
  if (atomic_load_explicit(&s->refs, memory_order_acquire) != 1 &&
      atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
    return NULL;
  fill_free(s->fill);
  PJRT_Device *dev = s->device;
  if (s->on_delete && s->buf) s->on_delete((void *)(uintptr_t)s->buf->ptr, s->on_delete_arg);
  kiln_pjrt_storage_unref(s->target);
  if (s->pinned_host) kiln_device_host_free(dev->kdev, s->pinned_host);
  kiln_device_buffer_destroy(s->buf);
  if (s->counted_bytes) atomic_fetch_sub(&dev->bytes_in_use, s->counted_bytes);
  return s->client;
}

/* The memory of a dropped storage: its own allocation, or its part of a buffer's block. */
static void storage_free(kiln_pjrt_storage_t *s) {
  if (!s->block)
    kiln_free(s);
  else if (atomic_fetch_sub(&s->block_parts, 1) == 1)
    kiln_free(s->block);
}

void kiln_pjrt_storage_unref(kiln_pjrt_storage_t *s) {
  PJRT_Client *c = storage_drop(s);
  if (!c) return;
  storage_free(s);
  kiln_pjrt_client_release(c);
}

/* New memory of `size` bytes in memory kind `kind` of `dev`. */
static kiln_status storage_alloc(PJRT_Device *dev, int32_t kind, uint64_t size,
                                 kiln_pjrt_storage_t **out) {
  *out = NULL;
  if (kind == 1 && dev->client->is_cuda) {
    void *p = NULL;
    KILN_RETURN_IF_ERROR(kiln_device_host_alloc(dev->kdev, size ? size : 1, &p),
                         "while allocating %llu bytes of pinned host memory for %s",
                         (unsigned long long)size, dev->desc.to_string);
    kiln_device_buffer_t *b = NULL;
    kiln_status s = kiln_device_buffer_wrap(dev->kdev, (kiln_devptr_t)(uintptr_t)p, size, &b);
    if (s) {
      kiln_device_host_free(dev->kdev, p);
      return s;
    }
    kiln_pjrt_storage_t *st = storage_new(dev, b, 1, false);
    if (!st) {
      kiln_device_buffer_destroy(b);
      kiln_device_host_free(dev->kdev, p);
      return no_host_memory("a buffer's storage", dev);
    }
    st->pinned_host = p;
    st->host_accessible = true;
    *out = st;
    return NULL;
  }
  kiln_device_buffer_t *b = NULL;
  KILN_RETURN_IF_ERROR(kiln_device_buffer_create(dev->kdev, size, &b), "for a buffer on %s",
                       dev->desc.to_string);
  *out = storage_new(dev, b, kind, kind == 0);
  if (*out) return NULL;
  kiln_device_buffer_destroy(b);
  return no_host_memory("a buffer's storage", dev);
}

/* Copies between host memory and a storage, synchronously. */
/* An alias buffer's storage before FulfillAliasBuffer has no memory. */
static kiln_status check_memory(const kiln_pjrt_storage_t *st) {
  if (st->buf) return NULL;
  return kiln_status_make(KILN_FAILED_PRECONDITION,
                          "the alias buffer was not fulfilled (PJRT_Client_FulfillAliasBuffer)");
}

static kiln_status storage_write(kiln_pjrt_storage_t *st, uint64_t off, const void *src,
                                 uint64_t n) {
  if (!n) return NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_memory(st));
  if (st->host_accessible) {
    memcpy((char *)(uintptr_t)st->buf->ptr + off, src, n);
    return NULL;
  }
  kiln_stream_t *s = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_device_stream_acquire(st->device, &s));
  kiln_status e = kiln_stream_memcpy_h2d(s, st->buf->ptr + off, src, n);
  e = kiln_status_join(e, kiln_stream_synchronize(s));
  kiln_pjrt_device_stream_release(st->device, s);
  return e;
}

static kiln_status storage_read(kiln_pjrt_storage_t *st, uint64_t off, void *dst, uint64_t n) {
  if (!n) return NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_memory(st));
  if (st->host_accessible) {
    memcpy(dst, (const char *)(uintptr_t)st->buf->ptr + off, n);
    return NULL;
  }
  kiln_stream_t *s = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_device_stream_acquire(st->device, &s));
  kiln_status e = kiln_stream_memcpy_d2h(s, dst, st->buf->ptr + off, n);
  e = kiln_status_join(e, kiln_stream_synchronize(s));
  kiln_pjrt_device_stream_release(st->device, s);
  return e;
}

static kiln_status storage_copy(kiln_pjrt_storage_t *dst, kiln_pjrt_storage_t *src, uint64_t n) {
  if (!n) return NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_memory(dst));
  KILN_RETURN_IF_ERROR_PLAIN(check_memory(src));
  if (dst->host_accessible) return storage_read(src, 0, (void *)(uintptr_t)dst->buf->ptr, n);
  if (src->host_accessible) return storage_write(dst, 0, (const void *)(uintptr_t)src->buf->ptr, n);
  if (dst->device->kdev == src->device->kdev) {
    kiln_stream_t *s = NULL;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_device_stream_acquire(dst->device, &s));
    kiln_status e = kiln_stream_memcpy_d2d(s, dst->buf->ptr, src->buf->ptr, n);
    e = kiln_status_join(e, kiln_stream_synchronize(s));
    kiln_pjrt_device_stream_release(dst->device, s);
    return e;
  }
  void *tmp = kiln_try_malloc(n);
  if (!tmp)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cannot stage %llu bytes",
                            (unsigned long long)n);
  kiln_status e = storage_read(src, 0, tmp, n);
  if (!e) e = storage_write(dst, 0, tmp, n);
  kiln_free(tmp);
  return e;
}

/* ---- shapes and layouts ------------------------------------------------------------------ */

/* Bytes of a dense array, or an error naming `fn` for negative dims or overflow. */
static kiln_status dense_size(const char *fn, PJRT_Buffer_Type type, const int64_t *dims,
                              int32_t rank, size_t *elem_out, uint64_t *bytes_out) {
  kiln_elem_type_t e;
  if (!kiln_pjrt_type_to_elem(type, &e))
    return KILN_ERR_INVALID("%s: element type %d is not one kiln supports", fn, (int)type);
  size_t elem = kiln_pjrt_type_bytes(type);
  if (!elem)
    return KILN_ERR_INVALID("%s: element type %s holds no data", fn, kiln_pjrt_type_name(type));
  if (rank > 0 && !dims) return KILN_ERR_INVALID("%s: dims is NULL for rank %d", fn, rank);
  uint64_t n = elem;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return KILN_ERR_INVALID("%s: dimension %d is negative (%lld)", fn, i, (long long)dims[i]);
    if (dims[i] && n > (UINT64_MAX >> 2) / (uint64_t)dims[i])
      return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: the array's size overflows", fn);
    n *= (uint64_t)dims[i];
  }
  *elem_out = elem;
  *bytes_out = n;
  return NULL;
}

static void default_m2m(int32_t rank, int64_t *m2m) {
  for (int32_t i = 0; i < rank; i++) m2m[i] = rank - 1 - i;
}

static bool m2m_is_default(int32_t rank, const int64_t *m2m) {
  for (int32_t i = 0; i < rank; i++)
    if (m2m[i] != rank - 1 - i) return false;
  return true;
}

/* A requested layout as a dense minor_to_major permutation (pjrt_relayout.h). */
kiln_status kiln_pjrt_parse_layout(const char *fn, const char *what,
                                   const PJRT_Buffer_MemoryLayout *l, int32_t rank,
                                   const int64_t *dims, size_t elem, int64_t *m2m) {
  if (l->type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
    const PJRT_Buffer_MemoryLayout_Tiled *t = &l->tiled;
    if (t->minor_to_major_size != (size_t)rank)
      return KILN_ERR_INVALID("%s: %s minor_to_major has %zu entries for rank %d", fn, what,
                              t->minor_to_major_size, rank);
    if (rank && !t->minor_to_major)
      return KILN_ERR_INVALID("%s: %s minor_to_major is NULL", fn, what);
    bool seen[64] = {false};
    if (rank > 64) return KILN_ERR_UNIMPLEMENTED("%s: rank %d is above 64", fn, rank);
    for (int32_t i = 0; i < rank; i++) {
      int64_t d = t->minor_to_major[i];
      if (d < 0 || d >= rank || seen[d])
        return KILN_ERR_INVALID("%s: %s minor_to_major is not a permutation of 0..%d", fn, what,
                                rank - 1);
      seen[d] = true;
      m2m[i] = d;
    }
    if (t->num_tiles) {
      if (!t->tile_dim_sizes || !t->tile_dims)
        return KILN_ERR_INVALID("%s: %s has %zu tiles but no tile arrays", fn, what, t->num_tiles);
      size_t k = 0;
      for (size_t i = 0; i < t->num_tiles; i++)
        for (size_t j = 0; j < t->tile_dim_sizes[i]; j++, k++)
          if (t->tile_dims[k] != 1)
            return KILN_ERR_UNIMPLEMENTED(
                "%s: %s is tiled; kiln supports dense layouts only "
                "(tiles whose dimensions are all 1)",
                fn, what);
    }
    return NULL;
  }
  if (l->type == PJRT_Buffer_MemoryLayout_Type_Strides) {
    const PJRT_Buffer_MemoryLayout_Strides *s = &l->strides;
    if (s->num_byte_strides != (size_t)rank)
      return KILN_ERR_INVALID("%s: %s has %zu byte strides for rank %d", fn, what,
                              s->num_byte_strides, rank);
    if (rank && !s->byte_strides) return KILN_ERR_INVALID("%s: %s byte_strides is NULL", fn, what);
    if (rank > 64) return KILN_ERR_UNIMPLEMENTED("%s: rank %d is above 64", fn, rank);
    /* Order dimensions by stride (ties: the higher dimension is more minor), then check that
     * each is the product of the ones inside it. */
    for (int32_t i = 0; i < rank; i++) m2m[i] = rank - 1 - i;
    for (int32_t i = 1; i < rank; i++)
      for (int32_t j = i; j > 0 && s->byte_strides[m2m[j]] < s->byte_strides[m2m[j - 1]]; j--) {
        int64_t t = m2m[j];
        m2m[j] = m2m[j - 1];
        m2m[j - 1] = t;
      }
    int64_t expect = (int64_t)elem;
    bool empty = false;
    for (int32_t i = 0; i < rank; i++) empty |= dims[i] == 0;
    for (int32_t i = 0; i < rank && !empty; i++) {
      int64_t d = m2m[i];
      if (dims[d] > 1 && s->byte_strides[d] != expect)
        return KILN_ERR_UNIMPLEMENTED(
            "%s: %s byte strides are not a dense layout; kiln's "
            "buffers are dense",
            fn, what);
      expect *= dims[d];
    }
    return NULL;
  }
  return KILN_ERR_INVALID("%s: %s has unknown layout type %d", fn, what, (int)l->type);
}

/* Writes a dense array laid out with `src_strides` (bytes) into `st` laid out with
 * `dst_strides`: one write when they agree, else a strided copy (staged when the memory is not
 * host-accessible). */
static kiln_status storage_write_strided(const char *fn, kiln_pjrt_storage_t *st, const void *src,
                                         const int64_t *src_strides, const int64_t *dst_strides,
                                         const int64_t *dims, int32_t rank, size_t elem,
                                         uint64_t size) {
  if (!size) return NULL;
  bool same = true;
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] > 1 && src_strides[i] != dst_strides[i]) same = false;
  if (same) return storage_write(st, 0, src, size);
  if (st->host_accessible) {
    kiln_pjrt_copy_strided((char *)(uintptr_t)st->buf->ptr, dst_strides, src, src_strides, dims,
                           rank, elem);
    return NULL;
  }
  char *tmp = kiln_try_malloc(size);
  if (!tmp)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: cannot stage %llu bytes", fn,
                            (unsigned long long)size);
  kiln_pjrt_copy_strided(tmp, dst_strides, src, src_strides, dims, rank, elem);
  kiln_status s = storage_write(st, 0, tmp, size);
  kiln_free(tmp);
  return s;
}

/* ---- buffers ----------------------------------------------------------------------------- */

_Static_assert(sizeof(PJRT_Buffer) % _Alignof(int64_t) == 0, "dims follow the buffer");

/* Spare blocks: an execute makes a buffer with an embedded storage per output and the caller
 * destroys it soon after, so Destroy keeps one such allocation per device (PJRT_Device's
 * spare_block) for the next output instead of freeing it: no malloc, free, mutex and
 * condition variable set-up per output. Blocks of rank <= SPARE_RANK, all of one size. */
#define SPARE_RANK 8

/* Frees `b`'s allocation (its mutex and condition variable first). */
static void block_free(PJRT_Buffer *b) {
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
  kiln_free(b);
}

#define SPARE_CLOSED ((PJRT_Buffer *)(uintptr_t)1) /* the slot after PJRT_Client_Destroy */

void kiln_pjrt_buffer_spare_close(PJRT_Device *dev) {
  PJRT_Buffer *b = atomic_exchange_explicit(&dev->spare_block, SPARE_CLOSED, memory_order_acquire);
  if (b && b != SPARE_CLOSED) {
    block_free(b);
    kiln_pjrt_client_release(dev->client); /* the block's (the caller's is still held) */
  }
}

void kiln_pjrt_buffer_spare_free(PJRT_Device *dev) {
  /* closed by Client_Destroy before the last reference; a block here holds none to drop */
  PJRT_Buffer *b = atomic_exchange_explicit(&dev->spare_block, NULL, memory_order_acquire);
  if (b && b != SPARE_CLOSED) block_free(b);
}

/* The device's spare block (it brings a client reference), or NULL. */
static PJRT_Buffer *spare_take(PJRT_Device *dev) {
  PJRT_Buffer *b = atomic_load_explicit(&dev->spare_block, memory_order_relaxed);
  while (b && b != SPARE_CLOSED)
    if (atomic_compare_exchange_weak_explicit(&dev->spare_block, &b, NULL, memory_order_acquire,
                                              memory_order_relaxed))
      return b;
  return NULL;
}

/* Keeps `b` (a spare-size block, dropped for good) as its device's spare with the client
 * reference `c` its storage held; else frees it and releases `c`. */
static void block_recycle(PJRT_Buffer *b, PJRT_Client *c) {
  PJRT_Buffer *none = NULL;
  if (b->spare_size &&
      atomic_compare_exchange_strong_explicit(&b->device->spare_block, &none, b,
                                              memory_order_release, memory_order_relaxed))
    return;
  block_free(b);
  kiln_pjrt_client_release(c);
}

/* A buffer over `st` (NULL: none, an error buffer), or with `embed` over a storage of that
 * memory (taken over) made in the same allocation; `pending` (embed NULL): over a storage made
 * in the same allocation whose memory comes later (an asynchronous execute's output). */
static PJRT_Buffer *buffer_make(PJRT_Device *dev, int32_t memory_kind, kiln_pjrt_storage_t *st,
                                kiln_device_buffer_t *embed, const char *pending,
                                PJRT_Buffer_Type type, const int64_t *dims, int32_t rank,
                                const int64_t *m2m, uint64_t size) {
  /* One allocation: the buffer, then its dims and its layout, then (embed) its storage (an
   * execute makes one per output, so each malloc counts in the per-call overhead). */
  bool embedded = embed || pending;
  size_t n = rank ? (size_t)rank : 1;
  bool spare = embedded && rank <= SPARE_RANK;
  if (spare) n = SPARE_RANK; /* every spare block has room for SPARE_RANK dims */
  size_t bytes = sizeof(PJRT_Buffer) + 2 * n * sizeof(int64_t);
  size_t total = bytes + (embedded ? sizeof(kiln_pjrt_storage_t) : 0);
  PJRT_Buffer *b = spare ? spare_take(dev) : NULL;
  bool adopted = b != NULL; /* the spare's client reference is the new storage's */
  if (b) {
    /* a spare block: cleared as calloc would (its dims and layout are written below), its
     * mutex and condition variable kept */
    memset(&b->client, 0, sizeof(PJRT_Buffer) - offsetof(PJRT_Buffer, client));
    memset((char *)b + bytes, 0, sizeof(kiln_pjrt_storage_t));
  } else {
    b = kiln_try_calloc(1, total);
    if (!b) return NULL;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
  }
  b->spare_size = spare;
  if (embedded) {
    st = (kiln_pjrt_storage_t *)(void *)((char *)b + bytes);
    storage_setup(st, dev, embed, memory_kind, memory_kind == 0, !adopted);
    if (pending) st->fill = fill_new(pending);
    st->block = b;
    atomic_init(&st->block_parts, 2);
    b->embedded = st;
  }
  b->client = dev->client;
  b->device = dev;
  b->kmemory = dev->memories[memory_kind];
  b->memory = &b->kmemory->base;
  b->type = type;
  b->rank = rank;
  b->dims = (int64_t *)(void *)(b + 1);
  b->minor_to_major = b->dims + n;
  if (rank) memcpy(b->dims, dims, (size_t)rank * sizeof(int64_t));
  if (m2m)
    memcpy(b->minor_to_major, m2m, (size_t)rank * sizeof(int64_t));
  else
    default_m2m(rank, b->minor_to_major);
  b->default_layout = m2m_is_default(rank, b->minor_to_major);
  b->on_device_size = size;
  b->storage = st;
  return b;
}

/* A buffer on storage `st` (taking the caller's reference), or NULL when host memory is
 * refused: the caller still holds its reference. */
static PJRT_Buffer *buffer_new(PJRT_Device *dev, int32_t memory_kind, kiln_pjrt_storage_t *st,
                               PJRT_Buffer_Type type, const int64_t *dims, int32_t rank,
                               const int64_t *m2m, uint64_t size) {
  return buffer_make(dev, memory_kind, st, NULL, NULL, type, dims, rank, m2m, size);
}

/* buffer_new for paths not yet written for refusal: aborts with a message instead. */
static PJRT_Buffer *buffer_new_or_abort(PJRT_Device *dev, int32_t memory_kind,
                                        kiln_pjrt_storage_t *st, PJRT_Buffer_Type type,
                                        const int64_t *dims, int32_t rank, const int64_t *m2m,
                                        uint64_t size) {
  PJRT_Buffer *b = buffer_new(dev, memory_kind, st, type, dims, rank, m2m, size);
  if (!b) {
    fprintf(stderr, "kiln: out of host memory making a PJRT buffer\n");
    abort();
  }
  return b;
}

static kiln_status check_shape(const char *fn, PJRT_Buffer_Type type, const int64_t *dims,
                               int32_t rank, uint64_t have, uint64_t *size) {
  if (rank < 0 || rank > 64) return KILN_ERR_INVALID("%s: rank %d is out of range", fn, rank);
  size_t elem;
  KILN_RETURN_IF_ERROR_PLAIN(dense_size(fn, type, dims, rank, &elem, size));
  if (have < *size)
    return KILN_ERR_INVALID("%s: the storage holds %llu bytes; the shape needs %llu", fn,
                            (unsigned long long)have, (unsigned long long)*size);
  return NULL;
}

kiln_status kiln_pjrt_buffer_create(PJRT_Device *dev, kiln_device_buffer_t *storage,
                                    PJRT_Buffer_Type type, const int64_t *dims, int32_t rank,
                                    uint64_t size, PJRT_Buffer **out) {
  if (!dev || !storage || !out || (rank && !dims))
    return KILN_ERR_INVALID("kiln_pjrt_buffer_create: NULL argument");
  *out = NULL;
  if (rank < 0 || rank > 64)
    return KILN_ERR_INVALID("kiln_pjrt_buffer_create: rank %d is out of range", rank);
  if (storage->size < size)
    return KILN_ERR_INVALID(
        "kiln_pjrt_buffer_create: the storage holds %llu bytes; the shape "
        "needs %llu",
        (unsigned long long)storage->size, (unsigned long long)size);
  *out = buffer_make(dev, 0, NULL, storage, NULL, type, dims, rank, NULL, size);
  return *out ? NULL : no_host_memory("a buffer", dev);
}

kiln_status kiln_pjrt_buffer_from_storage(PJRT_Device *dev, kiln_pjrt_storage_t *storage,
                                          PJRT_Buffer_Type type, const int64_t *dims, int32_t rank,
                                          PJRT_Buffer **out) {
  if (!dev || !storage || !out)
    return KILN_ERR_INVALID("kiln_pjrt_buffer_from_storage: NULL argument");
  *out = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(check_memory(storage));
  uint64_t size;
  KILN_RETURN_IF_ERROR_PLAIN(
      check_shape("kiln_pjrt_buffer_from_storage", type, dims, rank, storage->buf->size, &size));
  *out = buffer_new(dev, storage->memory_kind, storage, type, dims, rank, NULL, size);
  return *out ? NULL : no_host_memory("a buffer", dev);
}

kiln_status kiln_pjrt_buffer_create_pending(PJRT_Device *dev, PJRT_Buffer_Type type,
                                            const int64_t *dims, int32_t rank, uint64_t size,
                                            PJRT_Buffer **out, kiln_pjrt_storage_t **storage) {
  *out = NULL;
  *storage = NULL;
  PJRT_Buffer *b = buffer_make(dev, 0, NULL, NULL, "the execution that computes the buffer failed",
                               type, dims, rank, NULL, size);
  if (!b) return no_host_memory("a buffer", dev);
  atomic_fetch_add(&b->storage->refs, 1); /* the caller's, until it completes the storage */
  *out = b;
  *storage = b->storage;
  return NULL;
}

void kiln_pjrt_storage_complete(kiln_pjrt_storage_t *st, kiln_device_buffer_t *own,
                                kiln_pjrt_storage_t *target, kiln_status error) {
  if (!fill_claim(st->fill)) {
    /* Ended already (Client_Destroy ended a control dependency's view): nothing is published. */
    kiln_device_buffer_destroy(own);
    kiln_pjrt_storage_unref(target);
    kiln_status_free(error);
    kiln_pjrt_storage_unref(st);
    return;
  }
  if (!error && own) {
    st->buf = own; /* published to readers by fill_finish's lock */
    if (st->memory_kind == 0) {
      st->counted_bytes = (int64_t)own->size;
      stats_add(st->device, st->counted_bytes);
    }
  } else if (!error && target) {
    /* A view of the memory itself: of the storage `target` views, if it is a view, so that
     * outputs donated step after step never make a chain of views. */
    kiln_pjrt_storage_t *root = target->target ? target->target : target;
    kiln_device_buffer_t *view = NULL;
    error = kiln_device_buffer_wrap(st->device->kdev, root->buf->ptr, root->buf->size, &view);
    if (!error) {
      atomic_fetch_add(&root->refs, 1);
      st->target = root;
      st->host_accessible = root->host_accessible;
      st->immutable = root->immutable;
      st->buf = view;
    }
  } else if (!error) {
    error = KILN_ERR_INTERNAL("a pending buffer completed without memory");
  }
  if (error) kiln_device_buffer_destroy(own);
  kiln_pjrt_storage_unref(target);
  storage_end(st, error);
}

bool kiln_pjrt_storage_read_only(kiln_pjrt_storage_t *st) {
  /* (a view's `immutable` and `target` are written when its filling ends, before `ended`) */
  if (st->fill && !atomic_load_explicit(&st->fill->ended, memory_order_acquire)) return false;
  if (st->immutable) return true;
  /* A CopyRawToHostFuture still to read this memory, counted on the storage it was made on:
   * this one, or the one this views (a control dependency's buffer, an alias's target, which
   * may itself view another). */
  for (int depth = 0; st && depth < 4; depth++, st = st->target)
    if (atomic_load(&st->raw_reads) > 0) return true;
  return false;
}

bool kiln_pjrt_storage_waits_outside(kiln_pjrt_storage_t *st) {
  kiln_pjrt_fill_t *f = st ? st->fill : NULL;
  return f && f->client && fill_is_pending(f); /* (client: set before the filling is shared) */
}

kiln_status kiln_pjrt_storage_wait(kiln_pjrt_storage_t *st, kiln_devptr_t *ptr) {
  kiln_status s = fill_wait(st);
  if (!s) s = check_memory(st);
  if (s) return st->fill ? kiln_status_annotate(s, "%s", st->fill->failure) : s;
  if (ptr) *ptr = st->buf->ptr;
  return NULL;
}

static kiln_status deleted_error(const char *fn, const PJRT_Buffer *b) {
  if (b && b->error)
    return kiln_status_make(kiln_status_code(b->error), "%s: the buffer is an error buffer: %s", fn,
                            kiln_status_message(b->error));
  return kiln_status_make(KILN_FAILED_PRECONDITION, "%s: the buffer was deleted or donated", fn);
}

kiln_status kiln_pjrt_buffer_acquire(PJRT_Buffer *b, kiln_devptr_t *ptr, uint64_t *size) {
  if (!b) return KILN_ERR_INVALID("buffer acquire: NULL buffer");
  /* Lock-free (pjrt_objects.h): the hold first, then the check; a Delete or donation that
   * set `deleted` after this check waits for the hold before it touches `storage`. */
  atomic_fetch_add(&b->holds, 1);
  if (atomic_load(&b->deleted) || !b->storage) {
    kiln_pjrt_buffer_release(b);
    return deleted_error("buffer acquire", b);
  }
  kiln_pjrt_storage_t *st = b->storage;
  if (size) *size = b->on_device_size;
  /* Memory an async host-to-device transfer still fills, an alias buffer not fulfilled yet or
   * an execute's run still computes: wait for it (held, so it stays). */
  kiln_status s = kiln_pjrt_storage_wait(st, ptr);
  if (s) kiln_pjrt_buffer_release(b);
  return s;
}

void kiln_pjrt_buffer_release(PJRT_Buffer *b) {
  if (!b) return;
  uint32_t v = atomic_load(&b->holds);
  for (;;) {
    if (v == (KILN_PJRT_HOLD_WAITER | 1u)) {
      /* The last hold while someone waits: dropped under the mutex, so the waiter (which
       * may free the buffer next) wakes only after this thread is done with it. */
      kiln_mutex_lock(&b->mu);
      atomic_fetch_sub(&b->holds, 1);
      pthread_cond_broadcast(&b->cv);
      kiln_mutex_unlock(&b->mu);
      return;
    }
    if (atomic_compare_exchange_weak(&b->holds, &v, v - 1)) return;
  }
}

kiln_status kiln_pjrt_buffer_ref_storage(PJRT_Buffer *b, kiln_pjrt_storage_t **out) {
  *out = NULL;
  atomic_fetch_add(&b->holds, 1);
  if (atomic_load(&b->deleted) || !b->storage) {
    kiln_pjrt_buffer_release(b);
    return deleted_error("buffer reference", b);
  }
  kiln_pjrt_storage_t *st = b->storage; /* stable while held */
  atomic_fetch_add(&st->refs, 1);
  kiln_pjrt_buffer_release(b);
  *out = st;
  return NULL;
}

/* With b->mu held and `deleted` set: waits until no hold of `b` is left. */
static void wait_for_holds(PJRT_Buffer *b) {
  if (!(atomic_load(&b->holds) & ~KILN_PJRT_HOLD_WAITER)) return;
  b->hold_waiters++;
  atomic_fetch_or(&b->holds, KILN_PJRT_HOLD_WAITER);
  while (atomic_load(&b->holds) & ~KILN_PJRT_HOLD_WAITER) pthread_cond_wait(&b->cv, &b->mu);
  if (--b->hold_waiters == 0) atomic_fetch_and(&b->holds, ~KILN_PJRT_HOLD_WAITER);
}

kiln_status kiln_pjrt_buffer_donate(PJRT_Buffer *b, kiln_pjrt_storage_t **out) {
  if (!b || !out) return KILN_ERR_INVALID("buffer donate: NULL buffer or out");
  /* Donated memory must be there: wait for a filling or an alias's fulfilment first. */
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_buffer_acquire(b, NULL, NULL));
  kiln_pjrt_buffer_release(b);
  return kiln_pjrt_buffer_donate_pending(b, out);
}

/* kiln_pjrt_buffer_donate_pending; `moving` (DonateWithControlDependency, which moves the
 * memory to a new buffer without writing it): also while CopyRawToHostFuture reads of the
 * buffer wait (their count stays with this storage: the new buffer's own donation does not
 * see it). */
static kiln_status donate_take(PJRT_Buffer *b, bool moving, kiln_pjrt_storage_t **out) {
  *out = NULL;
  kiln_mutex_lock(&b->mu);
  if (b->deleted || !b->storage) {
    kiln_mutex_unlock(&b->mu);
    return deleted_error("buffer donation", b);
  }
  if (atomic_load(&b->external_refs) > 0) {
    kiln_mutex_unlock(&b->mu);
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "buffer donation: the buffer has an external reference "
                            "(PJRT_Buffer_IncreaseExternalReferenceCount) and cannot be "
                            "donated");
  }
  if (!moving && atomic_load(&b->storage->raw_reads) > 0) {
    kiln_mutex_unlock(&b->mu);
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "buffer donation: a PJRT_Buffer_CopyRawToHostFuture of the buffer "
                            "is not done (its destination or its memory is still to come), so "
                            "it cannot be donated");
  }
  /* From here the buffer reads as donated: new holds fail, the ones taken end first. */
  b->deleted = true;
  wait_for_holds(b);
  kiln_pjrt_storage_t *st = b->storage; /* NULL: a Delete waiting alongside took it */
  b->storage = NULL;
  kiln_mutex_unlock(&b->mu);
  if (!st) return deleted_error("buffer donation", b);
  *out = st;
  return NULL;
}

kiln_status kiln_pjrt_buffer_donate_pending(PJRT_Buffer *b, kiln_pjrt_storage_t **out) {
  return donate_take(b, false, out);
}

/* Marks `b` deleted, waits for its holds, and takes its storage (the reference it held). */
static kiln_pjrt_storage_t *buffer_take(PJRT_Buffer *b) {
  kiln_mutex_lock(&b->mu);
  b->deleted = true;
  wait_for_holds(b); /* none left: none can come that reads the storage (sees `deleted`) */
  kiln_pjrt_storage_t *st = b->storage;
  b->storage = NULL;
  kiln_mutex_unlock(&b->mu);
  return st;
}

/* Marks `b` deleted, waits for its holds, and drops its storage. */
static void buffer_delete(PJRT_Buffer *b) {
  kiln_pjrt_storage_unref(buffer_take(b));
}

/* ---- lookups of handles ------------------------------------------------------------------ */

static bool client_has_device(PJRT_Client *c, PJRT_Device *d) {
  for (int32_t i = 0; i < c->num_devices; i++)
    if (c->devices[i] == d) return true;
  return false;
}

static kiln_pjrt_memory_t *client_memory(PJRT_Client *c, PJRT_Memory *m) {
  for (int32_t i = 0; i < c->num_memories; i++)
    if (c->memories[i] == m) return (kiln_pjrt_memory_t *)m;
  return NULL;
}

/* The target of a new buffer from (device, memory): either may be NULL (then the other
 * decides; both NULL: the first device's default memory). */
static kiln_status resolve_target(const char *fn, PJRT_Client *c, PJRT_Device *device,
                                  PJRT_Memory *memory, PJRT_Device **dev_out, int32_t *kind_out) {
  if (device && !client_has_device(c, device))
    return KILN_ERR_INVALID("%s: device is not one of the client's devices", fn);
  if (memory) {
    kiln_pjrt_memory_t *m = client_memory(c, memory);
    if (!m) return KILN_ERR_INVALID("%s: memory is not one of the client's memories", fn);
    if (device && m->device != device)
      return KILN_ERR_INVALID("%s: memory %s does not belong to device %s", fn, m->to_string,
                              device->desc.to_string);
    *dev_out = m->device;
    *kind_out = m->kind_id;
    return NULL;
  }
  *dev_out = device ? device : c->devices[0];
  *kind_out = 0;
  return NULL;
}

/* ---- client slots ------------------------------------------------------------------------ */

#define FN_BFHB "PJRT_Client_BufferFromHostBuffer"

/* The zero-copy semantics alias the caller's memory where kiln's kernels can use it as it is:
 * on the host platform, dense in the device layout (the strides agree), aligned to 16 bytes
 * (XLA:CPU's minimum; kiln's host kernels assume no more than element alignment, its own
 * buffers are 64-byte aligned). Anywhere else they copy, as PJRT allows (XLA's CPU client does
 * the same), and done_with_host_buffer is ready at once. */
static bool zero_copy_possible(const PJRT_Device *dev, int32_t kind, const void *data,
                               const int64_t *src_strides, const int64_t *dst_strides,
                               const int64_t *dims, int32_t rank) {
  (void)kind; /* both memories of a host device are host memory */
  if (dev->client->is_cuda) return false;
  if (!data || (uintptr_t)data % 16) return false;
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] > 1 && src_strides[i] != dst_strides[i]) return false;
  return true;
}

/* The storage's memory is the caller's: its release completes the done event. */
static void zero_copy_done(void *ptr, void *arg) {
  (void)ptr;
  kiln_pjrt_event_complete((PJRT_Event *)arg, NULL);
}

/* A buffer over the caller's host memory. kMutableZeroCopy: executes read it and, donated,
 * write their aliased outputs into it. kImmutableZeroCopy (`immutable`): executes only read it
 * (a donation copies it). done_with_host_buffer completes when the last buffer using the memory
 * (this one, the output it was donated to, a view) is gone. */
static kiln_status buffer_alias_host(PJRT_Device *dev, int32_t kind,
                                     PJRT_Client_BufferFromHostBuffer_Args *args,
                                     const int64_t *m2m, uint64_t size, bool immutable) {
  kiln_device_buffer_t *b = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(
      kiln_device_buffer_wrap(dev->kdev, (kiln_devptr_t)(uintptr_t)args->data, size, &b));
  kiln_pjrt_storage_t *st = storage_new(dev, b, kind, false);
  if (!st) {
    kiln_device_buffer_destroy(b);
    return no_host_memory("a buffer's storage", dev);
  }
  PJRT_Event *done = kiln_pjrt_event_create();
  if (!done) {
    kiln_pjrt_storage_unref(st); /* its buffer wraps the caller's memory: nothing else freed */
    return no_host_memory("the event done_with_host_buffer", dev);
  }
  st->on_delete = zero_copy_done;
  st->on_delete_arg = done;
  st->immutable = immutable;
  args->buffer = buffer_new_or_abort(dev, kind, st, args->type, args->dims, (int32_t)args->num_dims,
                                     m2m, size);
  args->done_with_host_buffer = done;
  return NULL;
}

/* ---- asynchronous transfers ------------------------------------------------------------ */

/* Whether BufferFromHostBuffer of `size` bytes with kImmutableUntilTransferCompletes on `dev`
 * may copy on the device's transfer thread (the caller keeps its data until
 * done_with_host_buffer): on the host platform, from KILN_PJRT_ASYNC_TRANSFER_BYTES on, with
 * the client's async_transfers and asynchronous executes on. Never on CUDA (its copies go
 * through a stream the calling thread takes: not moved off it until they ran on a GPU). */
static bool transfer_async(const PJRT_Device *dev, uint64_t size) {
  const PJRT_Client *c = dev->client;
  return size >= KILN_PJRT_ASYNC_TRANSFER_BYTES && c->options.async_transfers &&
         c->options.async_execute != KILN_PJRT_ASYNC_NEVER && !c->is_cuda;
}

/* Whether an upload's copy may join its device's transfer queue now (asked by
 * kiln_pjrt_queue_try_push under the queue's lock; `arg` the client): not after
 * Client_Destroy, whose stop of the queue would not wait for it (and a thread started later
 * could drop the client's last reference and free its own queue). A full queue refuses too:
 * the caller then copies in the call instead of waiting for room. */
static bool upload_admit(void *arg) {
  return !atomic_load(&((PJRT_Client *)arg)->destroyed);
}

/* A copy of the caller's host data into a new buffer's memory, on the device's transfer
 * thread. */
typedef struct h2d_async {
  kiln_pjrt_work_t work;
  kiln_pjrt_storage_t *st; /* the work's reference; its filling ends when the copy does */
  PJRT_Event *done;        /* done_with_host_buffer */
  const void *src;
  int32_t rank;
  size_t elem;
  uint64_t size;
  int64_t dims[64], src_strides[64], dst_strides[64];
} h2d_async_t;

/* Makes the copy and ends its buffer's filling. */
static void h2d_async_run(kiln_pjrt_work_t *w) {
  h2d_async_t *t = (h2d_async_t *)w;
  kiln_status s = storage_write_strided(FN_BFHB, t->st, t->src, t->src_strides, t->dst_strides,
                                        t->dims, t->rank, t->elem, t->size);
  kiln_pjrt_event_complete(t->done, NULL); /* the caller's data is not read again */
  /* (the filling is not on the client's outside list: nothing else ends it, the claim holds) */
  if (fill_claim(t->st->fill))
    storage_end(t->st, s ? kiln_status_annotate(s, "in " FN_BFHB) : NULL);
  kiln_free(t);
}

/* BufferFromHostBuffer into new memory `st` (the caller's reference, taken over: true) copied
 * on the device's transfer thread: the buffer reads as pending until the copy is done (reads
 * hooked on it are made by that thread then; a run waits for it), and so does
 * done_with_host_buffer. The copies are not ordered after the device's runs (nothing needs
 * that: a run waits for its arguments' memory), so an upload never waits for a run — one
 * waiting for an alias buffer the caller fulfils with this very upload, say.
 * False: no host memory for it, `st` still the caller's, which copies in the call instead. */
static bool bfhb_async(PJRT_Client_BufferFromHostBuffer_Args *args, PJRT_Device *dev, int32_t kind,
                       kiln_pjrt_storage_t *st, const int64_t *m2m, const int64_t *src_strides,
                       const int64_t *dst_strides, size_t elem, uint64_t size) {
  int32_t rank = (int32_t)args->num_dims;
  h2d_async_t *t = kiln_try_calloc(1, sizeof(*t));
  PJRT_Event *done = t ? kiln_pjrt_event_create() : NULL;
  st->fill = done ? fill_new("the buffer's host-to-device transfer failed") : NULL;
  PJRT_Buffer *b =
      st->fill ? buffer_new(dev, kind, st, args->type, args->dims, rank, m2m, size) : NULL;
  if (!b) {
    if (done) {
      done->destroyed = true; /* never handed out: completing it frees it */
      kiln_pjrt_event_complete(done, NULL);
    }
    fill_free(st->fill);
    st->fill = NULL;
    kiln_free(t);
    return false;
  }
  atomic_fetch_add(&st->refs, 1); /* the work's */
  t->work.run = h2d_async_run;
  t->st = st;
  t->done = done;
  t->src = args->data;
  t->rank = rank;
  t->elem = elem;
  t->size = size;
  memcpy(t->dims, args->dims, (size_t)rank * sizeof(int64_t));
  memcpy(t->src_strides, src_strides, (size_t)rank * sizeof(int64_t));
  memcpy(t->dst_strides, dst_strides, (size_t)rank * sizeof(int64_t));
  args->buffer = b;
  args->done_with_host_buffer = done;
  if (!kiln_pjrt_queue_try_push(&dev->transfers, &t->work, upload_admit, dev->client))
    h2d_async_run(&t->work); /* not admitted: made here (the events come back complete) */
  return true;
}

static PJRT_Error *Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args *args) {
  KILN_PJRT_ARGS(FN_BFHB, args, buffer);
  args->buffer = NULL;
  args->done_with_host_buffer = NULL;
  PJRT_Client *c = args->client;
  if (!c) return ERR(KILN_INVALID_ARGUMENT, FN_BFHB ": client is NULL");
  if (args->num_dims > 64)
    return ERR(KILN_INVALID_ARGUMENT, FN_BFHB ": num_dims %zu is above 64", args->num_dims);
  int32_t rank = (int32_t)args->num_dims;
  size_t elem;
  uint64_t size;
  kiln_status s = dense_size(FN_BFHB, args->type, args->dims, rank, &elem, &size);
  if (s) return kiln_pjrt_error_from_status(s);
  switch (args->host_buffer_semantics) {
    case PJRT_HostBufferSemantics_kImmutableOnlyDuringCall:
    case PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes:
    case PJRT_HostBufferSemantics_kImmutableZeroCopy:
    case PJRT_HostBufferSemantics_kMutableZeroCopy:
      break;
    default:
      return ERR(KILN_INVALID_ARGUMENT, FN_BFHB ": host_buffer_semantics %d is unknown",
                 (int)args->host_buffer_semantics);
  }
  bool empty = false;
  for (int32_t i = 0; i < rank; i++) empty |= args->dims[i] == 0;
  if (!args->data && !empty) return ERR(KILN_INVALID_ARGUMENT, FN_BFHB ": data is NULL");
  /* Source strides. */
  int64_t src_strides[64];
  if (args->byte_strides && args->num_byte_strides) {
    if (args->num_byte_strides != args->num_dims)
      return ERR(KILN_INVALID_ARGUMENT, FN_BFHB ": %zu byte strides for %zu dimensions",
                 args->num_byte_strides, args->num_dims);
    /* Negative strides are allowed (`data` then points inside the array, PJRT's rule). */
    for (int32_t i = 0; i < rank; i++) src_strides[i] = args->byte_strides[i];
  } else if (args->num_byte_strides) {
    return ERR(KILN_INVALID_ARGUMENT, FN_BFHB ": byte_strides is NULL with %zu entries",
               args->num_byte_strides);
  } else {
    int64_t d[64];
    default_m2m(rank, d);
    kiln_pjrt_m2m_strides(rank, args->dims, d, elem, src_strides);
  }
  PJRT_Memory *memory = KILN_PJRT_HAS(args, memory) ? args->memory : NULL;
  PJRT_Device *dev;
  int32_t kind;
  s = resolve_target(FN_BFHB, c, args->device, memory, &dev, &kind);
  if (s) return kiln_pjrt_error_from_status(s);
  int64_t m2m[64];
  default_m2m(rank, m2m);
  if (KILN_PJRT_HAS(args, device_layout) && args->device_layout) {
    s = kiln_pjrt_parse_layout(FN_BFHB, "device_layout", args->device_layout, rank, args->dims,
                               elem, m2m);
    if (s) return kiln_pjrt_error_from_status(s);
  }
  int64_t dst_strides[64];
  kiln_pjrt_m2m_strides(rank, args->dims, m2m, elem, dst_strides);
  const bool zero_copy = args->host_buffer_semantics == PJRT_HostBufferSemantics_kMutableZeroCopy ||
                         args->host_buffer_semantics == PJRT_HostBufferSemantics_kImmutableZeroCopy;
  if (zero_copy &&
      zero_copy_possible(dev, kind, args->data, src_strides, dst_strides, args->dims, rank)) {
    s = buffer_alias_host(
        dev, kind, args, m2m, size,
        args->host_buffer_semantics == PJRT_HostBufferSemantics_kImmutableZeroCopy);
    return s ? kiln_pjrt_error_from_status(kiln_status_annotate(s, "in " FN_BFHB)) : NULL;
  }
  kiln_pjrt_storage_t *st = NULL;
  s = storage_alloc(dev, kind, size, &st);
  /* The caller keeps the data until done_with_host_buffer: a large copy goes to the device's
   * transfer thread (XLA's CPU client makes it on another thread too); the call returns. */
  if (!s &&
      args->host_buffer_semantics == PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes &&
      transfer_async(dev, size) &&
      bfhb_async(args, dev, kind, st, m2m, src_strides, dst_strides, elem, size))
    return NULL;
  if (!s)
    s = storage_write_strided(FN_BFHB, st, args->data, src_strides, dst_strides, args->dims, rank,
                              elem, size);
  if (s) {
    kiln_pjrt_storage_unref(st);
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in " FN_BFHB));
  }
  args->buffer = buffer_new(dev, kind, st, args->type, args->dims, rank, m2m, size);
  if (!args->buffer) {
    kiln_pjrt_storage_unref(st);
    return kiln_pjrt_error_from_status(
        kiln_status_annotate(no_host_memory("a buffer", dev), "in " FN_BFHB));
  }
  /* The copy is done: the caller may reuse `data` at once, whatever the semantics. */
  args->done_with_host_buffer = kiln_pjrt_event_ready(NULL);
  return NULL;
}

/* A buffer shape of the client slots that make buffers (shape_* members) and where it goes:
 * *dev, *kind, its layout in m2m (64 entries) and its byte size. */
typedef struct shape_args {
  PJRT_Buffer_Type type;
  const int64_t *dims;
  size_t num_dims;
  const PJRT_Buffer_MemoryLayout *layout;
} shape_args_t;

static kiln_status resolve_shape(const char *fn, PJRT_Client *c, PJRT_Device *device,
                                 PJRT_Memory *memory, const shape_args_t *sa, PJRT_Device **dev,
                                 int32_t *kind, int64_t *m2m, uint64_t *size) {
  if (sa->num_dims > 64)
    return KILN_ERR_INVALID("%s: shape_num_dims %zu is above 64", fn, sa->num_dims);
  int32_t rank = (int32_t)sa->num_dims;
  size_t elem;
  KILN_RETURN_IF_ERROR_PLAIN(dense_size(fn, sa->type, sa->dims, rank, &elem, size));
  KILN_RETURN_IF_ERROR_PLAIN(resolve_target(fn, c, device, memory, dev, kind));
  default_m2m(rank, m2m);
  if (sa->layout)
    KILN_RETURN_IF_ERROR_PLAIN(
        kiln_pjrt_parse_layout(fn, "shape_layout", sa->layout, rank, sa->dims, elem, m2m));
  return NULL;
}

#define FN_CUB "PJRT_Client_CreateUninitializedBuffer"

static PJRT_Error *Client_CreateUninitializedBuffer(
    PJRT_Client_CreateUninitializedBuffer_Args *args) {
  KILN_PJRT_ARGS(FN_CUB, args, buffer);
  args->buffer = NULL;
  PJRT_Client *c = args->client;
  if (!c) return ERR(KILN_INVALID_ARGUMENT, FN_CUB ": client is NULL");
  int32_t rank = (int32_t)args->shape_num_dims;
  shape_args_t sa = {args->shape_element_type, args->shape_dims, args->shape_num_dims,
                     args->shape_layout};
  PJRT_Device *dev = NULL;
  int32_t kind = 0;
  int64_t m2m[64];
  uint64_t size = 0;
  kiln_status s =
      resolve_shape(FN_CUB, c, args->device, args->memory, &sa, &dev, &kind, m2m, &size);
  kiln_pjrt_storage_t *st = NULL;
  if (!s) s = storage_alloc(dev, kind, size, &st);
  if (s) return kiln_pjrt_error_from_status(s);
  args->buffer = buffer_new_or_abort(dev, kind, st, args->shape_element_type, args->shape_dims,
                                     rank, m2m, size);
  return NULL;
}

/* ---- alias buffers ---------------------------------------------------------------------- */

#define FN_CAB "PJRT_Client_CreateAliasBuffer"
#define FN_FAB "PJRT_Client_FulfillAliasBuffer"

/* What CreateAliasBuffer hands out and FulfillAliasBuffer takes (and frees): the alias's
 * storage (one reference) and its shape's size. */
struct PJRT_FulfillAliasBufferCallback {
  PJRT_Client *client;
  kiln_pjrt_storage_t *storage;
  uint64_t size;
};

/* A buffer whose memory comes later (XLA's CreateAliasBuffer): until FulfillAliasBuffer gives
 * it another buffer's memory (or an error), its ready event is pending, reads and copies of it
 * are done by the fulfilment, executes that take it wait on their device's queue (and
 * UnsafePointer in its call); after an error they fail with it. */
static PJRT_Error *Client_CreateAliasBuffer(PJRT_Client_CreateAliasBuffer_Args *args) {
  KILN_PJRT_ARGS(FN_CAB, args, fulfill_alias_buffer_cb);
  args->alias_buffer = NULL;
  args->fulfill_alias_buffer_cb = NULL;
  PJRT_Client *c = args->client;
  if (!c) return ERR(KILN_INVALID_ARGUMENT, FN_CAB ": client is NULL");
  if (!args->memory) return ERR(KILN_INVALID_ARGUMENT, FN_CAB ": memory is NULL");
  int32_t rank = (int32_t)args->shape_num_dims;
  shape_args_t sa = {args->shape_element_type, args->shape_dims, args->shape_num_dims,
                     args->shape_layout};
  PJRT_Device *dev = NULL;
  int32_t kind = 0;
  int64_t m2m[64];
  uint64_t size = 0;
  kiln_status s = resolve_shape(FN_CAB, c, NULL, args->memory, &sa, &dev, &kind, m2m, &size);
  if (s) return kiln_pjrt_error_from_status(s);
  kiln_pjrt_storage_t *st = kiln_calloc(1, sizeof(*st));
  atomic_store(&st->refs, 2); /* the buffer's and the callback's */
  st->device = dev;
  st->client = c;
  st->memory_kind = kind;
  st->fill = fill_new("the alias buffer's fulfilment failed");
  kiln_pjrt_client_retain(c);
  fill_list(st);
  PJRT_FulfillAliasBufferCallback *cb = kiln_calloc(1, sizeof(*cb));
  cb->client = c;
  cb->storage = st;
  cb->size = size;
  args->alias_buffer = buffer_new_or_abort(dev, kind, st, args->shape_element_type,
                                           args->shape_dims, rank, m2m, size);
  args->fulfill_alias_buffer_cb = cb;
  return NULL;
}

/* Only Client_Destroy ends an alias's filling without FulfillAliasBuffer. */
static kiln_status alias_ended_error(void) {
  return kiln_status_make(KILN_FAILED_PRECONDITION, FN_FAB
                          ": the client was destroyed before the alias buffer was "
                          "fulfilled; it was failed then and nothing is fulfilled");
}

/* The alias takes `target`'s memory (held while the alias's storage lives) and its filling's
 * end is claimed (*used: the callback is used up; false: an error about the arguments). */
static kiln_status alias_fulfill(kiln_pjrt_storage_t *st, uint64_t size, PJRT_Buffer *target,
                                 bool *used) {
  *used = false;
  if (target->device != st->device || target->kmemory != st->device->memories[st->memory_kind])
    return KILN_ERR_INVALID(FN_FAB ": the buffer is not in the alias buffer's memory");
  if (target->on_device_size < size)
    return KILN_ERR_INVALID(FN_FAB ": the buffer holds %llu bytes; the alias buffer needs %llu",
                            (unsigned long long)target->on_device_size, (unsigned long long)size);
  KILN_RETURN_IF_ERROR(kiln_pjrt_buffer_acquire(target, NULL, NULL), "in " FN_FAB);
  kiln_pjrt_storage_t *ts = target->storage; /* stable while held */
  kiln_device_buffer_t *view = NULL;
  kiln_status s = kiln_device_buffer_wrap(st->device->kdev, ts->buf->ptr, ts->buf->size, &view);
  if (!s && fill_claim(st->fill)) {
    atomic_fetch_add(&ts->refs, 1);
    st->target = ts;
    st->host_accessible = ts->host_accessible;
    st->immutable = ts->immutable;
    st->buf = view; /* published to readers by fill_finish's lock */
    *used = true;
  } else if (!s) {
    /* Client_Destroy ended it while the target was being computed */
    kiln_device_buffer_destroy(view);
    *used = true;
    s = alias_ended_error();
  }
  kiln_pjrt_buffer_release(target);
  return s;
}

static PJRT_Error *Client_FulfillAliasBuffer(PJRT_Client_FulfillAliasBuffer_Args *args) {
  KILN_PJRT_ARGS(FN_FAB, args, fulfill_alias_buffer_cb);
  PJRT_FulfillAliasBufferCallback *cb = args->fulfill_alias_buffer_cb;
  if (!cb) return ERR(KILN_INVALID_ARGUMENT, FN_FAB ": fulfill_alias_buffer_cb is NULL");
  if (args->client && args->client != cb->client)
    return ERR(KILN_INVALID_ARGUMENT, FN_FAB ": the callback is another client's");
  kiln_status s = NULL;
  kiln_pjrt_fill_t *f = cb->storage->fill;
  if (!fill_is_pending(f)) {
    s = alias_ended_error(); /* the callback is used up */
  } else if (args->status_code != PJRT_Error_Code_OK) {
    if ((int)args->status_code < 0 || (int)args->status_code > KILN_UNAUTHENTICATED)
      return ERR(KILN_INVALID_ARGUMENT, FN_FAB ": status_code %d is unknown",
                 (int)args->status_code);
    if (fill_claim(f))
      fill_finish(f, kiln_status_make((kiln_status_code_t)args->status_code, "%.*s",
                                      args->error_message ? (int)args->error_message_size : 0,
                                      args->error_message ? args->error_message : ""));
    else
      s = alias_ended_error();
  } else if (!args->buffer) {
    return ERR(KILN_INVALID_ARGUMENT, FN_FAB ": buffer is NULL with status OK");
  } else {
    bool used = false;
    s = alias_fulfill(cb->storage, cb->size, args->buffer, &used);
    if (!used) return kiln_pjrt_error_from_status(s); /* the callback stays usable */
    if (!s) fill_finish(f, NULL);
  }
  /* Used: the callback is gone (XLA's is called once). */
  kiln_pjrt_storage_unref(cb->storage);
  kiln_free(cb);
  return s ? kiln_pjrt_error_from_status(s) : NULL;
}

#define FN_ERRB "PJRT_Client_CreateErrorBuffer"

/* A buffer of the given shape that holds an error instead of data: its ready event, reads,
 * copies and executes that take it fail with that error (as XLA's error buffers). */
static PJRT_Error *Client_CreateErrorBuffer(PJRT_Client_CreateErrorBuffer_Args *args) {
  KILN_PJRT_ARGS(FN_ERRB, args, buffer);
  args->buffer = NULL;
  PJRT_Client *c = args->client;
  if (!c) return ERR(KILN_INVALID_ARGUMENT, FN_ERRB ": client is NULL");
  if (args->error_code == PJRT_Error_Code_OK || (int)args->error_code > KILN_UNAUTHENTICATED)
    return ERR(KILN_INVALID_ARGUMENT, FN_ERRB ": error_code %d is not an error",
               (int)args->error_code);
  int32_t rank = (int32_t)args->shape_num_dims;
  shape_args_t sa = {args->shape_element_type, args->shape_dims, args->shape_num_dims,
                     args->shape_layout};
  PJRT_Device *dev = NULL;
  int32_t kind = 0;
  int64_t m2m[64];
  uint64_t size = 0;
  kiln_status s = resolve_shape(FN_ERRB, c, NULL, args->memory, &sa, &dev, &kind, m2m, &size);
  if (s) return kiln_pjrt_error_from_status(s);
  PJRT_Buffer *b = buffer_new_or_abort(dev, kind, NULL, args->shape_element_type, args->shape_dims,
                                       rank, m2m, 0);
  b->error = kiln_status_make((kiln_status_code_t)args->error_code, "%.*s",
                              args->error_message ? (int)args->error_message_size : 0,
                              args->error_message ? args->error_message : "");
  args->buffer = b;
  return NULL;
}

#define FN_VIEW "PJRT_Client_CreateViewOfDeviceBuffer"

static PJRT_Error *Client_CreateViewOfDeviceBuffer(
    PJRT_Client_CreateViewOfDeviceBuffer_Args *args) {
  KILN_PJRT_ARGS(FN_VIEW, args, buffer);
  args->buffer = NULL;
  PJRT_Client *c = args->client;
  if (!c) return ERR(KILN_INVALID_ARGUMENT, FN_VIEW ": client is NULL");
  if (args->num_dims > 64)
    return ERR(KILN_INVALID_ARGUMENT, FN_VIEW ": num_dims %zu is above 64", args->num_dims);
  int32_t rank = (int32_t)args->num_dims;
  size_t elem;
  uint64_t size;
  kiln_status s = dense_size(FN_VIEW, args->element_type, args->dims, rank, &elem, &size);
  if (!s && !args->device_buffer_ptr && size)
    s = KILN_ERR_INVALID(FN_VIEW ": device_buffer_ptr is NULL");
  PJRT_Device *dev = NULL;
  int32_t kind = 0;
  PJRT_Memory *memory = KILN_PJRT_HAS(args, memory) ? args->memory : NULL;
  if (!s) s = resolve_target(FN_VIEW, c, args->device, memory, &dev, &kind);
  int64_t m2m[64];
  default_m2m(rank, m2m);
  if (!s && args->layout)
    s = kiln_pjrt_parse_layout(FN_VIEW, "layout", args->layout, rank, args->dims, elem, m2m);
  kiln_device_buffer_t *b = NULL;
  if (!s)
    s = kiln_device_buffer_wrap(dev->kdev, (kiln_devptr_t)(uintptr_t)args->device_buffer_ptr, size,
                                &b);
  if (s) return kiln_pjrt_error_from_status(s);
  kiln_pjrt_storage_t *st = storage_new(dev, b, kind, false);
  if (!st) {
    kiln_device_buffer_destroy(b);
    return kiln_pjrt_error_from_status(no_host_memory("a buffer's storage", dev));
  }
  if (kind == 1) st->host_accessible = true;
  st->on_delete = args->on_delete_callback;
  st->on_delete_arg = args->on_delete_callback_arg;
  args->buffer =
      buffer_new_or_abort(dev, kind, st, args->element_type, args->dims, rank, m2m, size);
  return NULL;
}

/* ---- buffer slots ------------------------------------------------------------------------ */

#define BUF(fn, b)                                                         \
  do {                                                                     \
    if (!(b)) return ERR(KILN_INVALID_ARGUMENT, "%s: buffer is NULL", fn); \
  } while (0)

static bool is_deleted(PJRT_Buffer *b) {
  kiln_mutex_lock(&b->mu);
  bool d = b->deleted;
  kiln_mutex_unlock(&b->mu);
  return d;
}

static PJRT_Error *Buffer_Destroy(PJRT_Buffer_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_Destroy", args, buffer);
  PJRT_Buffer *b = args->buffer;
  if (!b) return NULL;
  /* No hold (the usual case): nothing reads the storage now and nothing may start to (the
   * caller destroys the buffer), so it is taken without the lock; an execute or copy still
   * holding it is waited for under the lock (buffer_take). */
  kiln_pjrt_storage_t *st;
  if (atomic_load_explicit(&b->holds, memory_order_acquire) == 0) {
    st = b->storage;
    b->storage = NULL;
  } else {
    st = buffer_take(b);
  }
  kiln_pjrt_storage_unref(b->external_storage); /* never the last while `st` is held */
  kiln_status_free(b->error);
  kiln_pjrt_storage_t *own = b->embedded;
  PJRT_Client *c = storage_drop(st);
  if (c && st == own) {
    /* The buffer's own storage, dropped for good here: the whole block goes now (kept as
     * the device's spare with its client reference, which keeps the device alive). */
    block_recycle(b, c);
    return NULL;
  }
  if (c) {
    storage_free(st);
    kiln_pjrt_client_release(c);
  }
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
  if (own)
    storage_free(own); /* the buffer's part of the block: the storage may live on elsewhere */
  else
    kiln_free(b); /* dims and layout with it */
  return NULL;
}

static PJRT_Error *Buffer_Delete(PJRT_Buffer_Delete_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_Delete", args, buffer);
  BUF("PJRT_Buffer_Delete", args->buffer);
  buffer_delete(args->buffer);
  return NULL;
}

static PJRT_Error *Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_IsDeleted", args, is_deleted);
  BUF("PJRT_Buffer_IsDeleted", args->buffer);
  args->is_deleted = is_deleted(args->buffer);
  return NULL;
}

static PJRT_Error *Buffer_ElementType(PJRT_Buffer_ElementType_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_ElementType", args, type);
  BUF("PJRT_Buffer_ElementType", args->buffer);
  args->type = args->buffer->type;
  return NULL;
}

static PJRT_Error *Buffer_Dimensions(PJRT_Buffer_Dimensions_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_Dimensions", args, num_dims);
  BUF("PJRT_Buffer_Dimensions", args->buffer);
  args->dims = args->buffer->dims;
  args->num_dims = (size_t)args->buffer->rank;
  return NULL;
}

static PJRT_Error *Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_UnpaddedDimensions", args, num_dims);
  BUF("PJRT_Buffer_UnpaddedDimensions", args->buffer);
  args->unpadded_dims = args->buffer->dims;
  args->num_dims = (size_t)args->buffer->rank;
  return NULL;
}

static PJRT_Error *Buffer_DynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_DynamicDimensionIndices", args, num_dynamic_dims);
  BUF("PJRT_Buffer_DynamicDimensionIndices", args->buffer);
  args->dynamic_dim_indices = NULL;
  args->num_dynamic_dims = 0;
  return NULL;
}

static PJRT_Error *Buffer_GetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_GetMemoryLayout", args, layout);
  BUF("PJRT_Buffer_GetMemoryLayout", args->buffer);
  PJRT_Buffer *b = args->buffer;
  memset(&args->layout, 0, sizeof(args->layout));
  args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  args->layout.tiled.minor_to_major = b->minor_to_major;
  args->layout.tiled.minor_to_major_size = (size_t)b->rank;
  args->layout.tiled.num_tiles = 0;
  return NULL;
}

static PJRT_Error *Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_OnDeviceSizeInBytes", args, on_device_size_in_bytes);
  BUF("PJRT_Buffer_OnDeviceSizeInBytes", args->buffer);
  if (is_deleted(args->buffer))
    return kiln_pjrt_error_from_status(deleted_error("PJRT_Buffer_OnDeviceSizeInBytes", NULL));
  args->on_device_size_in_bytes = args->buffer->on_device_size;
  return NULL;
}

static PJRT_Error *Buffer_Device(PJRT_Buffer_Device_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_Device", args, device);
  BUF("PJRT_Buffer_Device", args->buffer);
  args->device = args->buffer->device;
  return NULL;
}

static PJRT_Error *Buffer_Memory(PJRT_Buffer_Memory_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_Memory", args, memory);
  BUF("PJRT_Buffer_Memory", args->buffer);
  args->memory = args->buffer->memory;
  return NULL;
}

static PJRT_Error *Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_IsOnCpu", args, is_on_cpu);
  BUF("PJRT_Buffer_IsOnCpu", args->buffer);
  args->is_on_cpu = !args->buffer->client->is_cuda;
  return NULL;
}

/* A buffer still being filled (an asynchronous execute's output, a copy of one, an alias, a
 * transfer manager's, a donation waiting for its dependency) gets an event that completes
 * when the filling ends; any other's is ready: OK, or FAILED_PRECONDITION when deleted. */
static PJRT_Error *Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_ReadyEvent", args, event);
  BUF("PJRT_Buffer_ReadyEvent", args->buffer);
  PJRT_Buffer *b = args->buffer;
  if (is_deleted(b) || b->error) {
    args->event = kiln_pjrt_event_ready(deleted_error("PJRT_Buffer_ReadyEvent", b));
    return NULL;
  }
  /* Being filled by a transfer manager: ready when the filling ends. */
  kiln_mutex_lock(&b->mu);
  kiln_pjrt_fill_t *f = b->storage ? b->storage->fill : NULL;
  kiln_status done = NULL;
  PJRT_Event *e = NULL;
  bool no_event = false;
  if (f) {
    kiln_mutex_lock(&f->mu);
    if (f->pending && !(e = kiln_pjrt_event_create())) {
      no_event = true;
    } else if (f->pending) {
      if (f->num_waiters == f->cap_waiters) {
        f->cap_waiters = f->cap_waiters ? 2 * f->cap_waiters : 4;
        f->waiters = kiln_realloc(f->waiters, f->cap_waiters * sizeof(*f->waiters));
      }
      f->waiters[f->num_waiters++] = e;
    } else {
      done = kiln_status_copy(f->error);
    }
    kiln_mutex_unlock(&f->mu);
  }
  kiln_mutex_unlock(&b->mu);
  if (no_event) /* the buffer is still being filled: no completed event stands for it */
    return ERR(KILN_RESOURCE_EXHAUSTED, "PJRT_Buffer_ReadyEvent: out of host memory for the event");
  args->event = e ? e : kiln_pjrt_event_ready(done);
  return NULL;
}

/* The buffer's address once its memory is there (an execute still computing it is waited
 * for). */
static PJRT_Error *buffer_pointer(const char *fn, PJRT_Buffer *b, kiln_devptr_t *p) {
  kiln_mutex_lock(&b->mu);
  bool gone = b->deleted || !b->storage;
  kiln_mutex_unlock(&b->mu);
  if (gone) return kiln_pjrt_error_from_status(deleted_error(fn, b));
  kiln_status s = kiln_pjrt_buffer_acquire(b, p, NULL);
  if (!s) kiln_pjrt_buffer_release(b);
  return s ? kiln_pjrt_error_from_status(kiln_status_annotate(s, "%s", fn)) : NULL;
}

static PJRT_Error *Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_UnsafePointer", args, buffer_pointer);
  BUF("PJRT_Buffer_UnsafePointer", args->buffer);
  kiln_devptr_t p = 0;
  PJRT_Error *e = buffer_pointer("PJRT_Buffer_UnsafePointer", args->buffer, &p);
  if (!e) args->buffer_pointer = (uintptr_t)p;
  return e;
}

static PJRT_Error *Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_OpaqueDeviceMemoryDataPointer", args, device_memory_ptr);
  BUF("PJRT_Buffer_OpaqueDeviceMemoryDataPointer", args->buffer);
  kiln_devptr_t p = 0;
  PJRT_Error *e = buffer_pointer("PJRT_Buffer_OpaqueDeviceMemoryDataPointer", args->buffer, &p);
  if (!e) args->device_memory_ptr = (void *)(uintptr_t)p;
  return e;
}

static PJRT_Error *Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_IncreaseExternalReferenceCount", args, buffer);
  BUF("PJRT_Buffer_IncreaseExternalReferenceCount", args->buffer);
  PJRT_Buffer *b = args->buffer;
  kiln_mutex_lock(&b->mu);
  if (b->deleted || !b->storage) {
    kiln_mutex_unlock(&b->mu);
    return kiln_pjrt_error_from_status(
        deleted_error("PJRT_Buffer_IncreaseExternalReferenceCount", b));
  }
  if (atomic_fetch_add(&b->external_refs, 1) == 0) {
    atomic_fetch_add(&b->storage->refs, 1);
    b->external_storage = b->storage;
  }
  kiln_mutex_unlock(&b->mu);
  return NULL;
}

static PJRT_Error *Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_DecreaseExternalReferenceCount", args, buffer);
  BUF("PJRT_Buffer_DecreaseExternalReferenceCount", args->buffer);
  PJRT_Buffer *b = args->buffer;
  kiln_pjrt_storage_t *drop = NULL;
  kiln_mutex_lock(&b->mu);
  if (atomic_load(&b->external_refs) == 0) {
    kiln_mutex_unlock(&b->mu);
    return ERR(KILN_FAILED_PRECONDITION,
               "PJRT_Buffer_DecreaseExternalReferenceCount: the "
               "buffer has no external reference");
  }
  if (atomic_fetch_sub(&b->external_refs, 1) == 1) {
    drop = b->external_storage;
    b->external_storage = NULL;
  }
  kiln_mutex_unlock(&b->mu);
  kiln_pjrt_storage_unref(drop);
  return NULL;
}

/* ---- reads to the host ------------------------------------------------------------------ */

/* What a read to the host copies: `size` bytes from `offset` of the memory, or (`strided`) the
 * whole array, permuted from the device layout to the host layout the caller asked for. */
typedef struct host_read {
  fill_hook_t hook; /* a read that waits for the memory (first: the fill hands this back) */
  kiln_pjrt_storage_t *st;
  PJRT_Event *event; /* a waiting read's, completed when the copy ends */
  const char *fn;
  void *dst;
  uint64_t offset, size;
  bool strided;
  int32_t rank;
  size_t elem;
  int64_t dims[64], src_strides[64], dst_strides[64];
} host_read_t;

/* Copies what `r` says from its (filled) storage. */
static kiln_status host_read_copy(const host_read_t *r) {
  if (!r->strided) return storage_read(r->st, r->offset, r->dst, r->size);
  if (r->st->host_accessible) {
    KILN_RETURN_IF_ERROR_PLAIN(check_memory(r->st));
    kiln_pjrt_copy_strided(r->dst, r->dst_strides, (const char *)(uintptr_t)r->st->buf->ptr,
                           r->src_strides, r->dims, r->rank, r->elem);
    return NULL;
  }
  char *tmp = kiln_try_malloc(r->size ? r->size : 1);
  if (!tmp)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: cannot stage %llu bytes", r->fn,
                            (unsigned long long)r->size);
  kiln_status s = storage_read(r->st, 0, tmp, r->size);
  if (!s)
    kiln_pjrt_copy_strided(r->dst, r->dst_strides, tmp, r->src_strides, r->dims, r->rank, r->elem);
  kiln_free(tmp);
  return s;
}

/* A read that waited for the memory: run when its filling ends (see fill_end). */
static void host_read_run(fill_hook_t *h, kiln_status error) {
  host_read_t *r = (host_read_t *)h;
  kiln_status s = error ? error : host_read_copy(r);
  if (s) s = kiln_status_annotate(s, "in %s", r->fn);
  kiln_pjrt_storage_unref(r->st);
  kiln_pjrt_event_complete(r->event, s);
  kiln_free(r);
}

bool kiln_pjrt_buffer_is_pending(PJRT_Buffer *b) {
  bool pending = false;
  atomic_fetch_add(&b->holds, 1);
  kiln_pjrt_storage_t *st = atomic_load(&b->deleted) ? NULL : b->storage;
  /* (every cheap execute asks this of each argument: an ended filling, an earlier execute's
   * output most often, answers without the mutex) */
  if (st && st->fill && !atomic_load_explicit(&st->fill->ended, memory_order_acquire)) {
    kiln_mutex_lock(&st->fill->mu);
    pending = st->fill->pending;
    kiln_mutex_unlock(&st->fill->mu);
  }
  kiln_pjrt_buffer_release(b);
  return pending;
}

/* Takes a reference to `b`'s memory into *src and hooks `h` (which reads it) on its filling,
 * or, if that has ended meanwhile, runs `h` now. The device's order lock is held from the
 * reference until then, so an execute that donates `b` after this call runs after `h` (a
 * donating run waits for the filling, which ends after its hooks). An error (b deleted or
 * donated): `h` not run, still the caller's. */
static kiln_status read_after_fill(PJRT_Buffer *b, fill_hook_t *h, kiln_pjrt_storage_t **src) {
  kiln_pjrt_queue_t *q = &b->device->queue;
  kiln_pjrt_queue_order_lock(q);
  kiln_status s = kiln_pjrt_buffer_ref_storage(b, src);
  if (!s && !((*src)->fill && fill_hook((*src)->fill, h)))
    h->run(h, kiln_pjrt_storage_wait(*src, NULL));
  kiln_pjrt_queue_order_unlock(q);
  return s;
}

/* The read `plan` of `b` once the work filling its memory is done: *event is its
 * event. */
static PJRT_Error *host_read_later(PJRT_Buffer *b, const host_read_t *plan, PJRT_Event **event) {
  host_read_t *r = kiln_try_malloc(sizeof(*r));
  PJRT_Event *e = r ? kiln_pjrt_event_create() : NULL;
  if (!e) {
    kiln_free(r);
    return ERR(KILN_RESOURCE_EXHAUSTED, "%s: out of host memory for the read", plan->fn);
  }
  *r = *plan;
  r->hook.run = host_read_run;
  r->event = e;
  kiln_status s = read_after_fill(b, &r->hook, &r->st);
  if (s) {
    kiln_free(r);
    e->destroyed = true; /* never handed out: completing it frees it */
    kiln_pjrt_event_complete(e, NULL);
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in %s", plan->fn));
  }
  *event = e;
  return NULL;
}

/* Reads `plan` of `b` to the host; *event is the read's event. While the memory is still
 * being filled (an execute, a copy of its output, a transfer, an alias's fulfilment, a
 * control dependency), the read is done by whoever ends that and the call returns at once
 * (XLA's reads return before the data is there; their event says when it is: a caller that
 * fills the buffer itself after the read must not wait here). Else now. */
static PJRT_Error *host_read(PJRT_Buffer *b, host_read_t *plan, PJRT_Event **event) {
  if (kiln_pjrt_buffer_is_pending(b)) return host_read_later(b, plan, event);
  kiln_status s = kiln_pjrt_buffer_acquire(b, NULL, NULL);
  if (!s) {
    plan->st = b->storage; /* stable while held */
    s = host_read_copy(plan);
    kiln_pjrt_buffer_release(b);
  }
  if (s) return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in %s", plan->fn));
  *event = kiln_pjrt_event_ready(NULL); /* the copy is complete */
  return NULL;
}

#define FN_TH "PJRT_Buffer_ToHostBuffer"

static PJRT_Error *Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args *args) {
  KILN_PJRT_ARGS(FN_TH, args, event);
  args->event = NULL;
  PJRT_Buffer *b = args->src;
  if (!b) return ERR(KILN_INVALID_ARGUMENT, FN_TH ": src is NULL");
  host_read_t plan = {.fn = FN_TH, .rank = b->rank, .elem = kiln_pjrt_type_bytes(b->type)};
  int64_t m2m[64];
  memcpy(m2m, b->minor_to_major, (size_t)b->rank * sizeof(int64_t));
  if (args->host_layout) {
    kiln_status s = kiln_pjrt_parse_layout(FN_TH, "host_layout", args->host_layout, b->rank,
                                           b->dims, plan.elem, m2m);
    if (s) return kiln_pjrt_error_from_status(s);
  }
  plan.size = b->on_device_size;
  if (!args->dst) {
    args->dst_size = plan.size;
    return NULL;
  }
  if (args->dst_size < plan.size)
    return ERR(KILN_INVALID_ARGUMENT, FN_TH ": dst_size is %zu bytes; the buffer needs %llu",
               args->dst_size, (unsigned long long)plan.size);
  plan.dst = args->dst;
  for (int32_t i = 0; i < b->rank; i++) plan.strided |= m2m[i] != b->minor_to_major[i];
  if (plan.strided) {
    memcpy(plan.dims, b->dims, (size_t)b->rank * sizeof(int64_t));
    kiln_pjrt_m2m_strides(b->rank, b->dims, b->minor_to_major, plan.elem, plan.src_strides);
    kiln_pjrt_m2m_strides(b->rank, b->dims, m2m, plan.elem, plan.dst_strides);
  }
  return host_read(b, &plan, &args->event);
}

#define FN_RAW "PJRT_Buffer_CopyRawToHost"

static PJRT_Error *Buffer_CopyRawToHost(PJRT_Buffer_CopyRawToHost_Args *args) {
  KILN_PJRT_ARGS(FN_RAW, args, event);
  args->event = NULL;
  PJRT_Buffer *b = args->buffer;
  BUF(FN_RAW, b);
  if (args->offset < 0 || args->transfer_size < 0 ||
      (uint64_t)args->offset + (uint64_t)args->transfer_size > b->on_device_size)
    return ERR(KILN_INVALID_ARGUMENT,
               FN_RAW ": bytes %lld..%lld are outside the buffer's %llu bytes",
               (long long)args->offset, (long long)(args->offset + args->transfer_size),
               (unsigned long long)b->on_device_size);
  if (!args->dst && args->transfer_size) return ERR(KILN_INVALID_ARGUMENT, FN_RAW ": dst is NULL");
  host_read_t plan = {.fn = FN_RAW,
                      .dst = args->dst,
                      .offset = (uint64_t)args->offset,
                      .size = (uint64_t)args->transfer_size};
  return host_read(b, &plan, &args->event);
}

/* ---- DonateWithControlDependency ----------------------------------------------------------- */

#define FN_DWCD "PJRT_Buffer_DonateWithControlDependency"

/* A donation waiting for its control dependency: the new buffer's storage (`pending`, one
 * reference) becomes a view of the donated memory (`donated`, one reference) once both the
 * caller said the dependency is ready and the donated memory is there (it may still be being
 * computed: the donation does not wait for it). The donated storage itself is not touched (a
 * read of the old buffer made before the donation may still hold it). Whichever of the two
 * ends second completes the view and frees this. */
typedef struct dwcd {
  fill_hook_t hook; /* on the donated memory's filling */
  kiln_pjrt_storage_t *pending, *donated;
  kiln_status fill_error, dependency_error; /* each written by its own side before `left` */
  _Atomic int32_t left;
} dwcd_t;

static void dwcd_part_done(dwcd_t *d) {
  if (atomic_fetch_sub_explicit(&d->left, 1, memory_order_acq_rel) != 1) return;
  kiln_status error = d->fill_error ? d->fill_error : d->dependency_error;
  if (d->fill_error) kiln_status_free(d->dependency_error);
  kiln_pjrt_storage_complete(d->pending, NULL, d->donated, error);
  kiln_free(d);
}

/* The donated memory is there (or failed). */
static void dwcd_filled(fill_hook_t *h, kiln_status error) {
  dwcd_t *d = (dwcd_t *)h;
  d->fill_error = error;
  dwcd_part_done(d);
}

/* The caller's signal that the dependency is ready: readers of the new buffer go on (or fail
 * with the dependency's error) once the donated memory is there too. */
static void dependency_ready(PJRT_Buffer_DonateWithControlDependency_Callback_Args *args) {
  if (!args || !args->callback_data) return;
  dwcd_t *d = args->callback_data;
  if (args->error_code != PJRT_Error_Code_OK)
    d->dependency_error = kiln_status_make((kiln_status_code_t)args->error_code, "%.*s",
                                           args->error_message ? (int)args->error_message_size : 0,
                                           args->error_message ? args->error_message : "");
  dwcd_part_done(d);
}

/* The buffer's memory moves to a new buffer (the old one reads as donated) whose readers
 * wait until the caller calls dependency_ready_callback(callback_data) exactly once. */
static PJRT_Error *Buffer_DonateWithControlDependency(
    PJRT_Buffer_DonateWithControlDependency_Args *args) {
  KILN_PJRT_ARGS(FN_DWCD, args, out_buffer);
  args->callback_data = NULL;
  args->dependency_ready_callback = NULL;
  args->out_buffer = NULL;
  PJRT_Buffer *b = args->buffer;
  if (!b) return ERR(KILN_INVALID_ARGUMENT, FN_DWCD ": buffer is NULL");
  /* The new buffer first: running out of memory then leaves `b` as it was. */
  dwcd_t *d = kiln_try_calloc(1, sizeof(*d));
  PJRT_Buffer *nb = d ? buffer_make(b->device, b->kmemory->kind_id, NULL, NULL,
                                    "the donated buffer's control dependency failed", b->type,
                                    b->dims, b->rank, b->minor_to_major, b->on_device_size)
                      : NULL;
  if (!nb) {
    kiln_free(d);
    return kiln_pjrt_error_from_status(
        kiln_status_annotate(no_host_memory("a buffer", b->device), "in " FN_DWCD));
  }
  fill_list(nb->storage); /* filled by the caller's callback */
  d->pending = nb->storage;
  atomic_fetch_add(&d->pending->refs, 1); /* the callback's */
  /* Under the device's order lock, as a read's reference and hook (read_after_fill): a read
   * that took the memory first has its hook run before this donation's. */
  kiln_pjrt_queue_t *q = &b->device->queue;
  kiln_pjrt_queue_order_lock(q);
  kiln_status s = donate_take(b, true, &d->donated);
  if (s) {
    kiln_pjrt_queue_order_unlock(q);
    kiln_pjrt_storage_complete(d->pending, NULL, NULL, kiln_status_copy(s));
    PJRT_Buffer_Destroy_Args da = {PJRT_Buffer_Destroy_Args_STRUCT_SIZE, NULL, nb};
    (void)Buffer_Destroy(&da); /* never fails on a valid struct */
    kiln_free(d);
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in " FN_DWCD));
  }
  /* Without waiting for the donated memory (an execute may still compute it: waiting here
   * could wait for work the caller starts only after this call). */
  atomic_init(&d->left, 2);
  d->hook.run = dwcd_filled;
  const bool hooked = d->donated->fill && fill_hook(d->donated->fill, &d->hook);
  kiln_pjrt_queue_order_unlock(q);
  if (!hooked) dwcd_filled(&d->hook, kiln_pjrt_storage_wait(d->donated, NULL));
  args->out_buffer = nb;
  args->callback_data = d;
  args->dependency_ready_callback = dependency_ready;
  return NULL;
}

/* ---- AsyncHostToDeviceTransferManager ------------------------------------------------ */

/* Buffers made up front and filled by the caller's TransferData calls (jax.device_put);
 * reads and copies of a buffer are done by its last transfer (or fail with its error),
 * executes wait for it on their queue. Transfers are synchronous
 * copies. Thread-safety: calls on one manager are serialized by its mutex. */
typedef struct h2d_slot {
  PJRT_Buffer *buffer;          /* until retrieved */
  kiln_pjrt_storage_t *storage; /* one reference */
  uint64_t size;
  /* The buffer's shape and device layout (TransferLiteral checks and lays out against them). */
  PJRT_Buffer_Type type;
  int32_t rank;
  int64_t *dims, *m2m; /* owned */
} h2d_slot_t;

struct PJRT_AsyncHostToDeviceTransferManager {
  pthread_mutex_t mu;
  PJRT_Device *device;
  h2d_slot_t *slots;
  size_t n;
};

#define FN_H2D "PJRT_Client_CreateBuffersForAsyncHostToDevice"

static void h2d_free(PJRT_AsyncHostToDeviceTransferManager *m) {
  for (size_t i = 0; i < m->n; i++) {
    h2d_slot_t *s = &m->slots[i];
    if (s->storage && s->storage->fill)
      fill_end(s->storage->fill,
               kiln_status_make(KILN_CANCELLED,
                                "the transfer manager was destroyed before buffer %zu was "
                                "filled",
                                i));
    kiln_pjrt_storage_unref(s->storage);
    kiln_free(s->dims);
    kiln_free(s->m2m);
    if (s->buffer) {
      PJRT_Buffer_Destroy_Args d = {PJRT_Buffer_Destroy_Args_STRUCT_SIZE, NULL, s->buffer};
      (void)Buffer_Destroy(&d); /* never fails on a valid struct */
    }
  }
  pthread_mutex_destroy(&m->mu);
  kiln_free(m->slots);
  kiln_free(m);
}

static PJRT_Error *Client_CreateBuffersForAsyncHostToDevice(
    PJRT_Client_CreateBuffersForAsyncHostToDevice_Args *args) {
  KILN_PJRT_ARGS(FN_H2D, args, transfer_manager);
  args->transfer_manager = NULL;
  PJRT_Client *c = args->client;
  if (!c) return ERR(KILN_INVALID_ARGUMENT, FN_H2D ": client is NULL");
  if (!args->shape_specs && args->num_shape_specs)
    return ERR(KILN_INVALID_ARGUMENT, FN_H2D ": shape_specs is NULL");
  if (args->device_layouts && args->num_device_layouts != args->num_shape_specs)
    return ERR(KILN_INVALID_ARGUMENT, FN_H2D ": %zu device layouts for %zu shapes",
               args->num_device_layouts, args->num_shape_specs);
  PJRT_Device *dev = NULL;
  int32_t kind = 0;
  kiln_status s = resolve_target(FN_H2D, c, NULL, args->memory, &dev, &kind);
  if (s) return kiln_pjrt_error_from_status(s);
  PJRT_AsyncHostToDeviceTransferManager *m = kiln_calloc(1, sizeof(*m));
  pthread_mutex_init(&m->mu, NULL);
  m->device = dev;
  m->slots = kiln_calloc(args->num_shape_specs + 1, sizeof(*m->slots));
  for (size_t i = 0; i < args->num_shape_specs && !s; i++) {
    const PJRT_ShapeSpec *sp = &args->shape_specs[i];
    if (sp->num_dims > 64) {
      s = KILN_ERR_INVALID(FN_H2D ": shape %zu has %zu dims (at most 64)", i, sp->num_dims);
      break;
    }
    int32_t rank = (int32_t)sp->num_dims;
    size_t elem;
    uint64_t size;
    int64_t m2m[64];
    default_m2m(rank, m2m);
    s = dense_size(FN_H2D, sp->element_type, sp->dims, rank, &elem, &size);
    if (!s && args->device_layouts && args->device_layouts[i])
      s = kiln_pjrt_parse_layout(FN_H2D, "device_layouts", args->device_layouts[i], rank, sp->dims,
                                 elem, m2m);
    kiln_pjrt_storage_t *st = NULL;
    if (!s) s = storage_alloc(dev, kind, size, &st);
    if (s) break;
    st->fill = fill_new("the buffer's host-to-device transfer failed");
    fill_list(st);
    atomic_fetch_add(&st->refs, 1); /* the manager's */
    m->slots[i].storage = st;
    m->slots[i].size = size;
    m->slots[i].type = sp->element_type;
    m->slots[i].rank = rank;
    m->slots[i].dims = kiln_calloc(rank ? (size_t)rank : 1, sizeof(int64_t));
    m->slots[i].m2m = kiln_calloc(rank ? (size_t)rank : 1, sizeof(int64_t));
    if (rank) memcpy(m->slots[i].dims, sp->dims, (size_t)rank * sizeof(int64_t));
    if (rank) memcpy(m->slots[i].m2m, m2m, (size_t)rank * sizeof(int64_t));
    m->slots[i].buffer =
        buffer_new_or_abort(dev, kind, st, sp->element_type, sp->dims, rank, m2m, size);
    m->n = i + 1;
  }
  if (s) {
    h2d_free(m);
    return kiln_pjrt_error_from_status(s);
  }
  args->transfer_manager = m;
  return NULL;
}

#define H2D_ARGS(fn, args, last)  \
  KILN_PJRT_ARGS(fn, args, last); \
  if (!(args)->transfer_manager)  \
  return ERR(KILN_INVALID_ARGUMENT, "%s: transfer_manager is NULL", fn)

#define H2D_INDEX(fn, m, i)             \
  if ((i) < 0 || (size_t)(i) >= (m)->n) \
  return ERR(KILN_INVALID_ARGUMENT, "%s: buffer_index %d is outside [0, %zu)", fn, (int)(i), (m)->n)

static PJRT_Error *H2D_Destroy(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_AsyncHostToDeviceTransferManager_Destroy", args, transfer_manager);
  if (args->transfer_manager) h2d_free(args->transfer_manager);
  return NULL;
}

#define FN_TD "PJRT_AsyncHostToDeviceTransferManager_TransferData"

/* Claims the end of a slot's filling (with the manager's mutex held) and takes a reference
 * to its storage for storage_end, called after the mutex is let go. */
static bool h2d_claim(kiln_pjrt_storage_t *st) {
  if (!fill_claim(st->fill)) return false;
  atomic_fetch_add(&st->refs, 1);
  return true;
}

static PJRT_Error *H2D_TransferData(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args *args) {
  H2D_ARGS(FN_TD, args, done_with_h2d_transfer);
  args->done_with_h2d_transfer = NULL;
  PJRT_AsyncHostToDeviceTransferManager *m = args->transfer_manager;
  H2D_INDEX(FN_TD, m, args->buffer_index);
  h2d_slot_t *sl = &m->slots[args->buffer_index];
  if (args->offset < 0 || args->transfer_size < 0 ||
      (uint64_t)args->offset + (uint64_t)args->transfer_size > sl->size)
    return ERR(KILN_INVALID_ARGUMENT, FN_TD ": bytes %lld..%lld are outside buffer %d's %llu",
               (long long)args->offset, (long long)(args->offset + args->transfer_size),
               args->buffer_index, (unsigned long long)sl->size);
  if (!args->data && args->transfer_size) return ERR(KILN_INVALID_ARGUMENT, FN_TD ": data is NULL");
  kiln_mutex_lock(&m->mu);
  kiln_pjrt_storage_t *st = sl->storage;
  kiln_status s =
      fill_is_pending(st->fill)
          ? storage_write(st, (uint64_t)args->offset, args->data, (uint64_t)args->transfer_size)
          : kiln_status_make(KILN_FAILED_PRECONDITION,
                             FN_TD ": buffer %d was already completed or failed",
                             args->buffer_index);
  bool finish = !s && args->is_last_transfer && h2d_claim(st);
  kiln_mutex_unlock(&m->mu);
  if (finish) storage_end(st, NULL); /* its hooks (reads, copies) not under the manager's lock */
  if (s) return kiln_pjrt_error_from_status(s);
  /* The copy is done: the caller's data may be reused now. */
  args->done_with_h2d_transfer = kiln_pjrt_event_ready(NULL);
  return NULL;
}

#define FN_TL "PJRT_AsyncHostToDeviceTransferManager_TransferLiteral"

/* The whole buffer at once from a host literal of its shape (any dense host layout); it
 * completes the buffer. */
static PJRT_Error *H2D_TransferLiteral(
    PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args *args) {
  H2D_ARGS(FN_TL, args, done_with_h2d_transfer);
  args->done_with_h2d_transfer = NULL;
  PJRT_AsyncHostToDeviceTransferManager *m = args->transfer_manager;
  H2D_INDEX(FN_TL, m, args->buffer_index);
  h2d_slot_t *sl = &m->slots[args->buffer_index];
  bool same_shape =
      args->shape_element_type == sl->type && args->shape_num_dims == (size_t)sl->rank &&
      (!sl->rank || (args->shape_dims &&
                     !memcmp(args->shape_dims, sl->dims, (size_t)sl->rank * sizeof(int64_t))));
  if (!same_shape)
    return ERR(KILN_INVALID_ARGUMENT,
               FN_TL ": the literal (%s, rank %zu) does not have buffer %d's shape (%s, rank %d)",
               kiln_pjrt_type_name(args->shape_element_type), args->shape_num_dims,
               args->buffer_index, kiln_pjrt_type_name(sl->type), (int)sl->rank);
  if (!args->data && sl->size) return ERR(KILN_INVALID_ARGUMENT, FN_TL ": data is NULL");
  size_t elem = kiln_pjrt_type_bytes(sl->type);
  int64_t lit_m2m[64], src_strides[64], dst_strides[64];
  default_m2m(sl->rank, lit_m2m);
  kiln_status s = NULL;
  if (args->shape_layout)
    s = kiln_pjrt_parse_layout(FN_TL, "shape_layout", args->shape_layout, sl->rank, sl->dims, elem,
                               lit_m2m);
  if (s) return kiln_pjrt_error_from_status(s);
  kiln_pjrt_m2m_strides(sl->rank, sl->dims, lit_m2m, elem, src_strides);
  kiln_pjrt_m2m_strides(sl->rank, sl->dims, sl->m2m, elem, dst_strides);
  kiln_mutex_lock(&m->mu);
  kiln_pjrt_storage_t *st = sl->storage;
  s = fill_is_pending(st->fill)
          ? storage_write_strided(FN_TL, st, args->data, src_strides, dst_strides, sl->dims,
                                  sl->rank, elem, sl->size)
          : kiln_status_make(KILN_FAILED_PRECONDITION,
                             FN_TL ": buffer %d was already completed or failed",
                             args->buffer_index);
  bool finish = !s && h2d_claim(st);
  kiln_mutex_unlock(&m->mu);
  if (finish) storage_end(st, NULL);
  if (s) return kiln_pjrt_error_from_status(s);
  args->done_with_h2d_transfer = kiln_pjrt_event_ready(NULL);
  return NULL;
}

static PJRT_Error *H2D_RetrieveBuffer(
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args *args) {
  const char *fn = "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer";
  H2D_ARGS(fn, args, buffer_out);
  args->buffer_out = NULL;
  PJRT_AsyncHostToDeviceTransferManager *m = args->transfer_manager;
  H2D_INDEX(fn, m, args->buffer_index);
  kiln_mutex_lock(&m->mu);
  PJRT_Buffer *b = m->slots[args->buffer_index].buffer;
  m->slots[args->buffer_index].buffer = NULL;
  kiln_mutex_unlock(&m->mu);
  if (!b)
    return ERR(KILN_FAILED_PRECONDITION, "%s: buffer %d was already retrieved", fn,
               args->buffer_index);
  args->buffer_out = b;
  return NULL;
}

static PJRT_Error *H2D_Device(PJRT_AsyncHostToDeviceTransferManager_Device_Args *args) {
  H2D_ARGS("PJRT_AsyncHostToDeviceTransferManager_Device", args, device_out);
  args->device_out = args->transfer_manager->device;
  return NULL;
}

static PJRT_Error *H2D_BufferCount(PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args *args) {
  H2D_ARGS("PJRT_AsyncHostToDeviceTransferManager_BufferCount", args, buffer_count);
  args->buffer_count = args->transfer_manager->n;
  return NULL;
}

static PJRT_Error *H2D_BufferSize(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args *args) {
  const char *fn = "PJRT_AsyncHostToDeviceTransferManager_BufferSize";
  H2D_ARGS(fn, args, buffer_size);
  H2D_INDEX(fn, args->transfer_manager, args->buffer_index);
  args->buffer_size = (size_t)args->transfer_manager->slots[args->buffer_index].size;
  return NULL;
}

static PJRT_Error *H2D_SetBufferError(
    PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args *args) {
  const char *fn = "PJRT_AsyncHostToDeviceTransferManager_SetBufferError";
  H2D_ARGS(fn, args, error_message_size);
  PJRT_AsyncHostToDeviceTransferManager *m = args->transfer_manager;
  H2D_INDEX(fn, m, args->buffer_index);
  if (args->error_code == PJRT_Error_Code_OK)
    return ERR(KILN_INVALID_ARGUMENT, "%s: error_code is OK", fn);
  fill_end(m->slots[args->buffer_index].storage->fill,
           kiln_status_make((kiln_status_code_t)args->error_code, "%.*s",
                            args->error_message ? (int)args->error_message_size : 0,
                            args->error_message ? args->error_message : ""));
  return NULL;
}

/* Metadata is a hint for the transfer (XLA passes it to its device layer): kiln has no use
 * for it and accepts it. */
static PJRT_Error *H2D_AddMetadata(PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args *args) {
  H2D_ARGS("PJRT_AsyncHostToDeviceTransferManager_AddMetadata", args, num_metadata);
  return NULL;
}

#define FN_RAWF "PJRT_Buffer_CopyRawToHostFuture"

/* A copy to host that waits for both the caller's destination (future_ready_callback) and the
 * memory (an execute may still compute it: a hook on its filling), made by whichever comes
 * second, on its thread; neither waits for the other. Until then the storage is held (one
 * reference) and counted in its raw_reads, so a donation of the buffer is refused (an execute
 * copies the argument instead) and nothing overwrites what the read will see. */
typedef struct raw_future {
  fill_hook_t hook; /* on the memory's filling (first: the fill hands this back) */
  kiln_pjrt_storage_t *storage;
  uint64_t offset, size;
  PJRT_Event *event;
  void *dst;
  kiln_status fill_error, dst_error; /* each written by its own side before `left` */
  _Atomic int32_t left;
} raw_future_t;

static void raw_future_part_done(raw_future_t *f) {
  if (atomic_fetch_sub_explicit(&f->left, 1, memory_order_acq_rel) != 1) return;
  kiln_status s = f->fill_error ? f->fill_error : f->dst_error;
  if (f->fill_error) kiln_status_free(f->dst_error);
  if (!s) s = storage_read(f->storage, f->offset, f->dst, f->size);
  if (s) s = kiln_status_annotate(s, "in " FN_RAWF);
  atomic_fetch_sub(&f->storage->raw_reads, 1);
  kiln_pjrt_storage_unref(f->storage);
  kiln_pjrt_event_complete(f->event, s);
  kiln_free(f);
}

/* The memory is there (or failed). */
static void raw_future_filled(fill_hook_t *h, kiln_status error) {
  raw_future_t *f = (raw_future_t *)h;
  f->fill_error = error;
  raw_future_part_done(f);
}

static void raw_future_ready(PJRT_Buffer_CopyRawToHostFuture_Callback_Args *args) {
  if (!args || !args->callback_data) return;
  raw_future_t *f = args->callback_data;
  if (args->error_code != PJRT_Error_Code_OK)
    f->dst_error =
        kiln_status_make((kiln_status_code_t)args->error_code, "the destination failed: %.*s",
                         args->error_message ? (int)args->error_message_size : 0,
                         args->error_message ? args->error_message : "");
  else if (!args->dst && f->size)
    f->dst_error = kiln_status_make(KILN_INVALID_ARGUMENT, "dst is NULL");
  else
    f->dst = args->dst;
  raw_future_part_done(f);
}

static PJRT_Error *Buffer_CopyRawToHostFuture(PJRT_Buffer_CopyRawToHostFuture_Args *args) {
  KILN_PJRT_ARGS(FN_RAWF, args, future_ready_callback);
  args->event = NULL;
  args->callback_data = NULL;
  args->future_ready_callback = NULL;
  PJRT_Buffer *b = args->buffer;
  BUF(FN_RAWF, b);
  if (args->offset < 0 || args->transfer_size < 0 ||
      (uint64_t)args->offset + (uint64_t)args->transfer_size > b->on_device_size)
    return ERR(KILN_INVALID_ARGUMENT,
               FN_RAWF ": bytes %lld..%lld are outside the buffer's %llu bytes",
               (long long)args->offset, (long long)(args->offset + args->transfer_size),
               (unsigned long long)b->on_device_size);
  raw_future_t *f = kiln_try_calloc(1, sizeof(*f));
  if (f) f->event = kiln_pjrt_event_create();
  if (!f || !f->event) {
    kiln_free(f);
    return ERR(KILN_RESOURCE_EXHAUSTED, FN_RAWF ": out of host memory for the future");
  }
  /* Counted under the buffer's mutex, where a donation checks it. */
  kiln_mutex_lock(&b->mu);
  kiln_pjrt_storage_t *st = b->deleted ? NULL : b->storage;
  if (st) {
    atomic_fetch_add(&st->refs, 1);
    atomic_fetch_add(&st->raw_reads, 1);
  }
  kiln_mutex_unlock(&b->mu);
  if (!st) {
    f->event->destroyed = true; /* never handed out: completing it frees it */
    kiln_pjrt_event_complete(f->event, NULL);
    kiln_free(f);
    return kiln_pjrt_error_from_status(deleted_error(FN_RAWF, b));
  }
  f->storage = st;
  f->offset = (uint64_t)args->offset;
  f->size = (uint64_t)args->transfer_size;
  atomic_init(&f->left, 2);
  f->hook.run = raw_future_filled;
  if (!(st->fill && fill_hook(st->fill, &f->hook)))
    raw_future_filled(&f->hook, kiln_pjrt_storage_wait(st, NULL));
  args->event = f->event;
  args->callback_data = f;
  args->future_ready_callback = raw_future_ready;
  return NULL;
}

/* A copy to another device or memory made when the source's filling ends (copy_buffer): the
 * new buffer is pending until then (its memory a view of memory of the copy's own). */
typedef struct copy_work {
  fill_hook_t hook;
  kiln_pjrt_storage_t *src; /* one reference */
  kiln_pjrt_storage_t *dst; /* the pending storage (the copy's reference) */
  PJRT_Device *dev;
  int32_t kind;
  uint64_t size;
  const char *fn;
} copy_work_t;

static void copy_run(fill_hook_t *h, kiln_status error) {
  copy_work_t *c = (copy_work_t *)h;
  kiln_pjrt_storage_t *mem = NULL;
  kiln_status s = error;
  if (!s) s = storage_alloc(c->dev, c->kind, c->size, &mem);
  if (!s) s = storage_copy(mem, c->src, c->size);
  if (s) {
    kiln_pjrt_storage_unref(mem);
    mem = NULL;
    s = kiln_status_annotate(s, "in %s", c->fn);
  }
  kiln_pjrt_storage_unref(c->src);
  kiln_pjrt_storage_complete(c->dst, NULL, mem, s);
  kiln_free(c);
}

static PJRT_Error *copy_later(const char *fn, PJRT_Buffer *b, PJRT_Device *dev, int32_t kind,
                              PJRT_Buffer **out) {
  copy_work_t *c = kiln_try_calloc(1, sizeof(*c));
  PJRT_Buffer *nb = c ? buffer_make(dev, kind, NULL, NULL, "the copy that fills the buffer failed",
                                    b->type, b->dims, b->rank, b->minor_to_major, b->on_device_size)
                      : NULL;
  if (!nb) {
    kiln_free(c);
    return kiln_pjrt_error_from_status(
        kiln_status_annotate(no_host_memory("a buffer", dev), "in %s", fn));
  }
  c->hook.run = copy_run;
  c->dst = nb->storage;
  atomic_fetch_add(&c->dst->refs, 1); /* the copy's, until it completes the storage */
  c->dev = dev;
  c->kind = kind;
  c->size = b->on_device_size;
  c->fn = fn;
  kiln_status s = read_after_fill(b, &c->hook, &c->src);
  if (s) {
    kiln_pjrt_storage_complete(c->dst, NULL, NULL, kiln_status_copy(s));
    kiln_free(c);
    PJRT_Buffer_Destroy_Args d = {PJRT_Buffer_Destroy_Args_STRUCT_SIZE, NULL, nb};
    (void)Buffer_Destroy(&d); /* never fails on a valid struct */
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in %s", fn));
  }
  *out = nb;
  return NULL;
}

/* A copy of `b` in memory kind `kind` of `dev`, same shape and layout: made when the work
 * filling `b` ends (the copy pending until then; as host_read), else now. */
static PJRT_Error *copy_buffer(const char *fn, PJRT_Buffer *b, PJRT_Device *dev, int32_t kind,
                               PJRT_Buffer **out) {
  if (kiln_pjrt_buffer_is_pending(b)) return copy_later(fn, b, dev, kind, out);
  kiln_status s = kiln_pjrt_buffer_acquire(b, NULL, NULL);
  if (s) return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in %s", fn));
  kiln_pjrt_storage_t *st = NULL;
  s = storage_alloc(dev, kind, b->on_device_size, &st);
  if (!s) s = storage_copy(st, b->storage, b->on_device_size);
  kiln_pjrt_buffer_release(b);
  if (s) {
    kiln_pjrt_storage_unref(st);
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in %s", fn));
  }
  *out = buffer_new(dev, kind, st, b->type, b->dims, b->rank, b->minor_to_major, b->on_device_size);
  if (*out) return NULL;
  kiln_pjrt_storage_unref(st);
  return kiln_pjrt_error_from_status(
      kiln_status_annotate(no_host_memory("a buffer", dev), "in %s", fn));
}

static PJRT_Error *Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_CopyToDevice", args, dst_buffer);
  args->dst_buffer = NULL;
  BUF("PJRT_Buffer_CopyToDevice", args->buffer);
  if (!args->dst_device)
    return ERR(KILN_INVALID_ARGUMENT, "PJRT_Buffer_CopyToDevice: dst_device is NULL");
  if (!client_has_device(args->buffer->client, args->dst_device))
    return ERR(KILN_INVALID_ARGUMENT,
               "PJRT_Buffer_CopyToDevice: dst_device is not a device of the buffer's client");
  /* PJRT's header: an error when the buffer is already there (CopyToMemory copies within a
   * device). */
  if (args->dst_device == args->buffer->device)
    return ERR(KILN_INVALID_ARGUMENT,
               "PJRT_Buffer_CopyToDevice: the buffer is already on %s (to copy it within the "
               "device, use PJRT_Buffer_CopyToMemory)",
               args->buffer->device->desc.to_string);
  return copy_buffer("PJRT_Buffer_CopyToDevice", args->buffer, args->dst_device, 0,
                     &args->dst_buffer);
}

static PJRT_Error *Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args *args) {
  KILN_PJRT_ARGS("PJRT_Buffer_CopyToMemory", args, dst_buffer);
  args->dst_buffer = NULL;
  BUF("PJRT_Buffer_CopyToMemory", args->buffer);
  if (!args->dst_memory)
    return ERR(KILN_INVALID_ARGUMENT, "PJRT_Buffer_CopyToMemory: dst_memory is NULL");
  kiln_pjrt_memory_t *m = client_memory(args->buffer->client, args->dst_memory);
  if (!m)
    return ERR(KILN_INVALID_ARGUMENT,
               "PJRT_Buffer_CopyToMemory: dst_memory is not a memory of the buffer's client");
  return copy_buffer("PJRT_Buffer_CopyToMemory", args->buffer, m->device, m->kind_id,
                     &args->dst_buffer);
}

void kiln_pjrt_fill_buffer(PJRT_Api *api) {
  api->PJRT_Client_BufferFromHostBuffer = Client_BufferFromHostBuffer;
  api->PJRT_Client_CreateUninitializedBuffer = Client_CreateUninitializedBuffer;
  api->PJRT_Client_CreateErrorBuffer = Client_CreateErrorBuffer;
  api->PJRT_Client_CreateAliasBuffer = Client_CreateAliasBuffer;
  api->PJRT_Client_FulfillAliasBuffer = Client_FulfillAliasBuffer;
  api->PJRT_Client_CreateBuffersForAsyncHostToDevice = Client_CreateBuffersForAsyncHostToDevice;
  api->PJRT_AsyncHostToDeviceTransferManager_Destroy = H2D_Destroy;
  api->PJRT_AsyncHostToDeviceTransferManager_TransferData = H2D_TransferData;
  api->PJRT_AsyncHostToDeviceTransferManager_TransferLiteral = H2D_TransferLiteral;
  api->PJRT_Buffer_DonateWithControlDependency = Buffer_DonateWithControlDependency;
  api->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer = H2D_RetrieveBuffer;
  api->PJRT_AsyncHostToDeviceTransferManager_Device = H2D_Device;
  api->PJRT_AsyncHostToDeviceTransferManager_BufferCount = H2D_BufferCount;
  api->PJRT_AsyncHostToDeviceTransferManager_BufferSize = H2D_BufferSize;
  api->PJRT_AsyncHostToDeviceTransferManager_SetBufferError = H2D_SetBufferError;
  api->PJRT_AsyncHostToDeviceTransferManager_AddMetadata = H2D_AddMetadata;
  api->PJRT_Client_CreateViewOfDeviceBuffer = Client_CreateViewOfDeviceBuffer;
  api->PJRT_Buffer_Destroy = Buffer_Destroy;
  api->PJRT_Buffer_ElementType = Buffer_ElementType;
  api->PJRT_Buffer_Dimensions = Buffer_Dimensions;
  api->PJRT_Buffer_UnpaddedDimensions = Buffer_UnpaddedDimensions;
  api->PJRT_Buffer_DynamicDimensionIndices = Buffer_DynamicDimensionIndices;
  api->PJRT_Buffer_GetMemoryLayout = Buffer_GetMemoryLayout;
  api->PJRT_Buffer_OnDeviceSizeInBytes = Buffer_OnDeviceSizeInBytes;
  api->PJRT_Buffer_Device = Buffer_Device;
  api->PJRT_Buffer_Memory = Buffer_Memory;
  api->PJRT_Buffer_Delete = Buffer_Delete;
  api->PJRT_Buffer_IsDeleted = Buffer_IsDeleted;
  api->PJRT_Buffer_ToHostBuffer = Buffer_ToHostBuffer;
  api->PJRT_Buffer_CopyRawToHost = Buffer_CopyRawToHost;
  api->PJRT_Buffer_CopyRawToHostFuture = Buffer_CopyRawToHostFuture;
  api->PJRT_Buffer_CopyToDevice = Buffer_CopyToDevice;
  api->PJRT_Buffer_CopyToMemory = Buffer_CopyToMemory;
  api->PJRT_Buffer_IsOnCpu = Buffer_IsOnCpu;
  api->PJRT_Buffer_ReadyEvent = Buffer_ReadyEvent;
  api->PJRT_Buffer_UnsafePointer = Buffer_UnsafePointer;
  api->PJRT_Buffer_OpaqueDeviceMemoryDataPointer = Buffer_OpaqueDeviceMemoryDataPointer;
  api->PJRT_Buffer_IncreaseExternalReferenceCount = Buffer_IncreaseExternalReferenceCount;
  api->PJRT_Buffer_DecreaseExternalReferenceCount = Buffer_DecreaseExternalReferenceCount;
}
