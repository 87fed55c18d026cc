/* Executables: load a compiled description on a device and run it (executable.h). */
#include "runtime/executable.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "runtime/runtime_options.h"

/* Every allocation gets at least this many bytes, so empty arrays still have an address. */
#define MIN_ALLOCATION_BYTES 64
/* A run of an executable with at most this many allocations keeps its bookkeeping on the stack. */
#define SMALL_ALLOCATIONS 32

const char *kiln_exec_alloc_kind_name(kiln_exec_alloc_kind_t k) {
  switch (k) {
    case KILN_EXEC_ALLOC_PARAMETER: return "parameter";
    case KILN_EXEC_ALLOC_CONSTANT: return "constant";
    case KILN_EXEC_ALLOC_OUTPUT: return "output";
    case KILN_EXEC_ALLOC_TEMP: return "temp";
  }
  return "?";
}

/* ---- description ------------------------------------------------------------------------- */

kiln_executable_desc_t *kiln_executable_desc_create(const char *name) {
  kiln_executable_desc_t *d = kiln_calloc(1, sizeof(*d));
  d->name = kiln_strdup(name ? name : "module");
  kiln_thunk_seq_init(&d->thunks);
  return d;
}

void kiln_executable_desc_destroy(kiln_executable_desc_t *d) {
  if (!d) return;
  kiln_thunk_seq_free(&d->thunks);
  for (int32_t i = 0; i < d->num_allocations; i++) kiln_free(d->allocations[i].data);
  kiln_free(d->allocations);
  kiln_free(d->parameter_sizes);
  kiln_free(d->outputs);
  for (int32_t i = 0; i < d->num_images; i++) {
    kiln_module_image_t *im = &d->images[i];
    kiln_free((void *)im->data);
    for (size_t f = 0; f < im->num_functions; f++) kiln_free((void *)im->names[f]);
    kiln_free((void *)im->names);
    kiln_free((void *)im->functions);
  }
  kiln_free(d->images);
  for (int32_t i = 0; d->image_objects && i < d->num_images; i++) {
    kiln_exec_image_objects_t *o = &d->image_objects[i];
    for (int32_t j = 0; j < o->num_objects; j++) { /* a description half built: arrays NULL */
      if (o->symbols) kiln_free(o->symbols[j]);
      if (o->data) kiln_free(o->data[j]);
    }
    kiln_free(o->symbols);
    kiln_free(o->data);
    kiln_free(o->sizes);
    kiln_free(o->function_object);
  }
  kiln_free(d->image_objects);
  if (d->keepalive_free) d->keepalive_free(d->keepalive);
  for (int32_t i = 0; i < d->num_owned; i++) {
    if (d->owned_free[i])
      d->owned_free[i](d->owned[i]);
    else
      kiln_free(d->owned[i]);
  }
  kiln_free(d->owned);
  kiln_free(d->owned_free);
  kiln_free(d->name);
  kiln_free(d);
}

int32_t kiln_executable_desc_add_allocation(kiln_executable_desc_t *d,
                                            const kiln_exec_allocation_t *a) {
  d->allocations = kiln_realloc(d->allocations,
                                (size_t)(d->num_allocations + 1) * sizeof(*d->allocations));
  d->allocations[d->num_allocations] = *a;
  return d->num_allocations++;
}

void *kiln_executable_desc_own_with(kiln_executable_desc_t *d, void *p, void (*free_fn)(void *)) {
  d->owned = kiln_realloc(d->owned, (size_t)(d->num_owned + 1) * sizeof(*d->owned));
  d->owned_free = kiln_realloc(d->owned_free, (size_t)(d->num_owned + 1) * sizeof(*d->owned_free));
  d->owned[d->num_owned] = p;
  d->owned_free[d->num_owned++] = free_fn;
  return p;
}

void *kiln_executable_desc_own(kiln_executable_desc_t *d, void *p) {
  return kiln_executable_desc_own_with(d, p, NULL);
}

int32_t kiln_executable_desc_add_image(kiln_executable_desc_t *d, const void *data, size_t size,
                                       const char *const *names, void *const *functions,
                                       size_t num_functions) {
  d->images = kiln_realloc(d->images, (size_t)(d->num_images + 1) * sizeof(*d->images));
  if (d->image_objects) {
    d->image_objects =
        kiln_realloc(d->image_objects, (size_t)(d->num_images + 1) * sizeof(*d->image_objects));
    memset(&d->image_objects[d->num_images], 0, sizeof(*d->image_objects));
  }
  kiln_module_image_t *im = &d->images[d->num_images];
  memset(im, 0, sizeof(*im));
  if (data && size) {
    void *copy = kiln_malloc(size);
    memcpy(copy, data, size);
    im->data = copy;
    im->size = size;
  }
  if (num_functions) {
    const char **n = kiln_calloc(num_functions, sizeof(*n));
    void **f = kiln_calloc(num_functions, sizeof(*f));
    for (size_t i = 0; i < num_functions; i++) {
      n[i] = kiln_strdup(names[i]);
      f[i] = functions ? functions[i] : NULL;
    }
    im->names = n;
    im->functions = f;
    im->num_functions = num_functions;
  }
  return d->num_images++;
}

void kiln_executable_desc_set_image_objects(kiln_executable_desc_t *d, int32_t image, int32_t num,
                                            const char *const *symbols, const void *const *data,
                                            const size_t *sizes, const int32_t *function_object) {
  if (!d || image < 0 || image >= d->num_images || num < 0) return;
  if (!d->image_objects)
    d->image_objects = kiln_calloc((size_t)d->num_images, sizeof(*d->image_objects));
  kiln_exec_image_objects_t *o = &d->image_objects[image];
  if (o->num_objects) return; /* set once */
  size_t nf = d->images[image].num_functions;
  o->num_objects = num;
  o->symbols = kiln_calloc((size_t)num + 1, sizeof(*o->symbols));
  o->data = kiln_calloc((size_t)num + 1, sizeof(*o->data));
  o->sizes = kiln_calloc((size_t)num + 1, sizeof(*o->sizes));
  o->function_object = kiln_calloc(nf + 1, sizeof(*o->function_object));
  for (int32_t j = 0; j < num; j++) {
    o->symbols[j] = kiln_strdup(symbols[j]);
    o->sizes[j] = sizes[j];
    o->data[j] = kiln_malloc(sizes[j] ? sizes[j] : 1);
    if (sizes[j]) memcpy(o->data[j], data[j], sizes[j]);
  }
  if (nf) memcpy(o->function_object, function_object, nf * sizeof(*o->function_object));
}

void kiln_executable_desc_print(kiln_strbuf_t *b, const kiln_executable_desc_t *d) {
  kiln_strbuf_printf(b, "executable %s: %d allocations, %d parameters, %d outputs, %d images\n",
                     d->name, d->num_allocations, d->num_parameters, d->num_outputs,
                     d->num_images);
  for (int32_t i = 0; i < d->num_allocations; i++) {
    const kiln_exec_allocation_t *a = &d->allocations[i];
    kiln_strbuf_printf(b, "  a%d %s %" PRIu64 " bytes", i, kiln_exec_alloc_kind_name(a->kind),
                       a->size);
    if (a->kind == KILN_EXEC_ALLOC_PARAMETER)
      kiln_strbuf_printf(b, " param %d%s", a->parameter, a->donated ? " donated" : "");
    kiln_strbuf_append(b, "\n");
  }
  for (int32_t i = 0; i < d->num_outputs; i++) {
    const kiln_slice_t *s = &d->outputs[i].slice;
    kiln_strbuf_printf(b, "  out%d = a%d+%" PRId64 ":%" PRId64 "\n", i, s->allocation, s->offset,
                       s->size);
  }
  kiln_strbuf_append(b, "thunks:\n");
  kiln_thunk_seq_print(b, &d->thunks, 1);
}

/* ---- loaded executable ------------------------------------------------------------------- */

/* What one run changes: its buffer table (parameters and outputs bound per run, its own
 * temporaries, the shared constants bound read-only) and its thunk execution state (read-back
 * scratch, command-buffer addresses). A run takes a context from the pool, or makes one when
 * every pooled context is in use, and gives it back: concurrent runs never share one, and a
 * single caller reuses the same one (its temporaries stay put, so its command buffers replay
 * without patching them). The last context given back waits in a one-context slot taken and
 * filled with one atomic exchange each, so a lone caller's runs take no lock; the pool behind it
 * (under its mutex) holds the others when runs overlap. */
typedef struct exec_context {
  struct exec_context *next;
  kiln_buffer_table_t table;
  kiln_thunk_exec_state_t *state;
} exec_context_t;

struct kiln_executable {
  kiln_device_t *dev;
  kiln_executable_desc_t *desc;
  kiln_device_module_t **modules;
  kiln_buffer_table_t constants; /* CONSTANT allocations, uploaded once, read by every run */
  bool initialized;
  _Atomic(exec_context_t *) slot; /* a free context, taken without the mutex (or NULL) */
  pthread_mutex_t pool_mu;        /* guards free_contexts */
  exec_context_t *free_contexts;
  kiln_thunk_profile_t *profile; /* NULL: off */
};

kiln_thunk_profile_t *kiln_executable_profile(const kiln_executable_t *e) {
  return e ? e->profile : NULL;
}

void kiln_executable_set_profile(kiln_executable_t *e, kiln_thunk_profile_mode_t mode) {
  if (!e) return;
  kiln_thunk_profile_destroy(e->profile);
  e->profile = mode == KILN_THUNK_PROFILE_OFF ? NULL : kiln_thunk_profile_create(mode);
}

const kiln_executable_desc_t *kiln_executable_desc(const kiln_executable_t *e) {
  return e ? e->desc : NULL;
}

static uint64_t padded(uint64_t size) {
  return size < MIN_ALLOCATION_BYTES ? MIN_ALLOCATION_BYTES : size;
}

static void context_destroy(exec_context_t *c) {
  if (!c) return;
  kiln_thunk_exec_state_destroy(c->state);
  kiln_buffer_table_free(&c->table);
  kiln_free(c);
}

static kiln_status context_create(kiln_executable_t *e, exec_context_t **out) {
  const kiln_executable_desc_t *d = e->desc;
  exec_context_t *c = kiln_try_calloc(1, sizeof(*c));
  if (!c) return KILN_ERR_EXHAUSTED("out of host memory for an execution context of %s", d->name);
  kiln_status s = kiln_buffer_table_init(&c->table, e->dev, d->num_allocations);
  for (int32_t i = 0; i < d->num_allocations && !s; i++) {
    const kiln_exec_allocation_t *a = &d->allocations[i];
    if (a->kind == KILN_EXEC_ALLOC_TEMP)
      s = kiln_buffer_table_allocate(&c->table, i, padded(a->size));
    else if (a->kind == KILN_EXEC_ALLOC_CONSTANT)
      s = kiln_buffer_table_bind(&c->table, i, e->constants.bases[i], e->constants.sizes[i]);
  }
  if (!s) s = kiln_thunk_exec_state_create(e->dev, &d->thunks, &c->state);
  if (s) {
    context_destroy(c);
    return kiln_status_annotate(s, "while making an execution context for %s", d->name);
  }
  *out = c;
  return NULL;
}

static kiln_status context_take(kiln_executable_t *e, exec_context_t **out) {
  exec_context_t *c = atomic_exchange_explicit(&e->slot, NULL, memory_order_acquire);
  if (c) {
    *out = c;
    return NULL;
  }
  kiln_mutex_lock(&e->pool_mu);
  c = e->free_contexts;
  if (c) e->free_contexts = c->next;
  kiln_mutex_unlock(&e->pool_mu);
  if (c) {
    c->next = NULL;
    *out = c;
    return NULL;
  }
  return context_create(e, out);
}

static void context_give_back(kiln_executable_t *e, exec_context_t *c) {
  c->next = NULL;
  exec_context_t *empty = NULL;
  if (atomic_compare_exchange_strong_explicit(&e->slot, &empty, c, memory_order_release,
                                              memory_order_relaxed))
    return;
  kiln_mutex_lock(&e->pool_mu);
  c->next = e->free_contexts;
  e->free_contexts = c;
  kiln_mutex_unlock(&e->pool_mu);
}

void kiln_executable_destroy(kiln_executable_t *e) {
  if (!e) return;
  context_destroy(atomic_load(&e->slot));
  for (exec_context_t *c = e->free_contexts; c;) {
    exec_context_t *next = c->next;
    context_destroy(c);
    c = next;
  }
  pthread_mutex_destroy(&e->pool_mu);
  kiln_thunk_profile_destroy(e->profile);
  if (e->desc) kiln_thunk_seq_release(&e->desc->thunks);
  kiln_buffer_table_free(&e->constants);
  if (e->modules)
    for (int32_t i = 0; i < e->desc->num_images; i++) kiln_device_module_unload(e->modules[i]);
  kiln_free(e->modules);
  kiln_executable_desc_destroy(e->desc);
  kiln_free(e);
}

static kiln_status load(kiln_executable_t *e) {
  kiln_executable_desc_t *d = e->desc;
  e->modules = kiln_try_calloc((size_t)d->num_images + 1, sizeof(*e->modules));
  if (!e->modules) return KILN_ERR_EXHAUSTED("out of host memory loading %s", d->name);
  for (int32_t i = 0; i < d->num_images; i++)
    KILN_RETURN_IF_ERROR(kiln_device_module_load(e->dev, &d->images[i], &e->modules[i]),
                         "while loading kernel image %d of %s", i, d->name);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_bind_modules(&d->thunks, e->modules, d->num_images));

  KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_init(&e->constants, e->dev, d->num_allocations));
  uint64_t *sizes = kiln_try_calloc((size_t)d->num_allocations + 1, sizeof(*sizes));
  if (!sizes) return KILN_ERR_EXHAUSTED("out of host memory loading %s", d->name);
  kiln_status s = NULL;
  kiln_stream_t *stream = NULL;
  for (int32_t i = 0; i < d->num_allocations && !s; i++) {
    const kiln_exec_allocation_t *a = &d->allocations[i];
    sizes[i] = a->size;
    if (a->kind != KILN_EXEC_ALLOC_CONSTANT) continue;
    s = kiln_buffer_table_allocate(&e->constants, i, padded(a->size));
    if (!s && a->size) {
      if (!a->data) {
        s = KILN_ERR_INVALID("constant allocation %d of %s has no contents", i, d->name);
        break;
      }
      if (!stream) s = kiln_stream_create(e->dev, &stream);
      if (!s) s = kiln_stream_memcpy_h2d(stream, e->constants.bases[i], a->data, (size_t)a->size);
    }
  }
  if (stream) {
    if (!s) s = kiln_stream_synchronize(stream);
    kiln_stream_destroy(stream);
  }
  if (!s) {
    kiln_thunk_prepare_params_t pp = {d->num_allocations, sizes};
    s = kiln_thunk_seq_prepare(&d->thunks, &pp);
  }
  kiln_free(sizes);
  if (!s) {
    kiln_thunk_init_params_t ip = {e->dev};
    s = kiln_thunk_seq_initialize(&d->thunks, &ip);
  }
  /* The first context (temporaries allocated once) is made here, so a lone caller's runs
   * allocate nothing but their outputs. */
  exec_context_t *c = NULL;
  if (!s) s = context_create(e, &c);
  if (!s) {
    context_give_back(e, c);
    e->initialized = true;
  }
  return s;
}

kiln_status kiln_executable_load(kiln_device_t *dev, kiln_executable_desc_t *desc,
                                 kiln_executable_t **out) {
  if (out) *out = NULL;
  if (!dev || !desc || !out) {
    kiln_executable_desc_destroy(desc);
    return KILN_ERR_INVALID("executable load: NULL device, description or out");
  }
  kiln_executable_t *e = kiln_try_calloc(1, sizeof(*e));
  if (!e) {
    kiln_executable_desc_destroy(desc);
    return KILN_ERR_EXHAUSTED("out of host memory loading an executable on %s", dev->name);
  }
  e->dev = dev;
  kiln_executable_set_profile(e, (kiln_thunk_profile_mode_t)kiln_runtime_options().profile);
  e->desc = desc;
  atomic_init(&e->slot, NULL);
  pthread_mutex_init(&e->pool_mu, NULL);
  kiln_status s = load(e);
  if (s) {
    s = kiln_status_annotate(s, "while loading executable %s on %s", desc->name, dev->name);
    kiln_executable_destroy(e);
    return s;
  }
  *out = e;
  return NULL;
}

/* Where output leaf i comes from once the thunks ran. */
static kiln_status make_output(kiln_executable_t *e, exec_context_t *ctx, kiln_stream_t *stream,
                               int32_t i, kiln_device_buffer_t **owned_outputs, bool *handed_over,
                               const kiln_devptr_t *params, kiln_device_buffer_t **out) {
  const kiln_executable_desc_t *d = e->desc;
  kiln_slice_t sl = d->outputs[i].slice;
  if (sl.allocation == -1) return NULL; /* a token leaf: no data, no buffer */
  if (sl.allocation < 0 || sl.allocation >= d->num_allocations)
    return KILN_ERR_INVALID("output %d names allocation %d of %d", i, sl.allocation,
                            d->num_allocations);
  const kiln_exec_allocation_t *a = &d->allocations[sl.allocation];
  if (a->kind == KILN_EXEC_ALLOC_OUTPUT && sl.offset == 0 && !handed_over[sl.allocation] &&
      owned_outputs[sl.allocation]) {
    handed_over[sl.allocation] = true;
    *out = owned_outputs[sl.allocation];
    owned_outputs[sl.allocation] = NULL;
    (*out)->size = (uint64_t)sl.size; /* the leaf's own size (the allocation is padded) */
    return NULL;
  }
  if (a->kind == KILN_EXEC_ALLOC_PARAMETER && a->donated && sl.offset == 0)
    return kiln_device_buffer_wrap(e->dev, params[a->parameter], (uint64_t)sl.size, out);
  kiln_devptr_t src = 0;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_buffer_table_resolve(&ctx->table, sl, &src));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_device_buffer_create(e->dev, padded((uint64_t)sl.size), out));
  (*out)->size = (uint64_t)sl.size;
  if (sl.size) return kiln_stream_memcpy_d2d(stream, (*out)->ptr, src, (size_t)sl.size);
  return NULL;
}

kiln_status kiln_executable_run(kiln_executable_t *e, kiln_stream_t *stream,
                                const kiln_devptr_t *params, const uint64_t *param_sizes,
                                int32_t num_params, kiln_device_buffer_t **outputs) {
  return kiln_executable_run_with(e, stream, params, param_sizes, num_params, outputs, NULL);
}

/* Run ids handed out to executions that bring none (XLA's RunId: unique per execution). */
static atomic_int_fast64_t g_next_run_id = 1;

kiln_status kiln_executable_run_with(kiln_executable_t *e, kiln_stream_t *stream,
                                     const kiln_devptr_t *params, const uint64_t *param_sizes,
                                     int32_t num_params, kiln_device_buffer_t **outputs,
                                     const kiln_run_info_t *run) {
  return kiln_executable_run_participant(e, stream, params, param_sizes, num_params, outputs, run,
                                         NULL);
}

kiln_status kiln_executable_run_participant(kiln_executable_t *e, kiln_stream_t *stream,
                                            const kiln_devptr_t *params,
                                            const uint64_t *param_sizes, int32_t num_params,
                                            kiln_device_buffer_t **outputs,
                                            const kiln_run_info_t *run,
                                            const kiln_spmd_participant_t *who) {
  if (!e || !stream || !outputs || (num_params && (!params || !param_sizes)))
    return KILN_ERR_INVALID("executable run: NULL executable, stream, parameters or outputs");
  double t_start = e->profile ? kiln_clock_ms() : 0;
  const kiln_executable_desc_t *d = e->desc;
  if (!e->initialized) return kiln_status_make(KILN_FAILED_PRECONDITION, "executable %s is not loaded", d->name);
  if (stream->device != e->dev)
    return KILN_ERR_INVALID("executable %s was loaded on %s, the stream is on %s", d->name,
                            e->dev->name, stream->device->name);
  if (num_params != d->num_parameters)
    return KILN_ERR_INVALID("executable %s takes %d parameter buffers, got %d", d->name,
                            d->num_parameters, num_params);
  for (int32_t i = 0; i < num_params; i++)
    if (param_sizes[i] != d->parameter_sizes[i])
      return KILN_ERR_INVALID("parameter %d of %s must be %" PRIu64 " bytes, got %" PRIu64, i,
                              d->name, d->parameter_sizes[i], param_sizes[i]);
  for (int32_t i = 0; i < d->num_outputs; i++) outputs[i] = NULL;

  exec_context_t *ctx = NULL;
  KILN_RETURN_IF_ERROR(context_take(e, &ctx), "while running %s", d->name);
  kiln_buffer_table_t *table = &ctx->table;
  int32_t na = d->num_allocations;
  /* Per-allocation bookkeeping: on the stack for small executables (no heap per run). */
  kiln_device_buffer_t *owned_local[SMALL_ALLOCATIONS];
  bool handed_local[SMALL_ALLOCATIONS];
  bool small = na <= SMALL_ALLOCATIONS;
  kiln_device_buffer_t **owned =
      small ? owned_local : kiln_try_calloc((size_t)na + 1, sizeof(*owned));
  bool *handed = small ? handed_local : kiln_try_calloc((size_t)na + 1, sizeof(*handed));
  if (!owned || !handed) {
    if (!small) {
      kiln_free(owned);
      kiln_free(handed);
    }
    context_give_back(e, ctx);
    return KILN_ERR_EXHAUSTED("out of host memory running %s", d->name);
  }
  if (small && na) {
    memset(owned, 0, (size_t)na * sizeof(*owned));
    memset(handed, 0, (size_t)na * sizeof(*handed));
  }
  kiln_status s = NULL;
  for (int32_t i = 0; i < na && !s; i++) {
    const kiln_exec_allocation_t *a = &d->allocations[i];
    if (a->kind == KILN_EXEC_ALLOC_PARAMETER) {
      if (a->parameter < 0 || a->parameter >= num_params) {
        s = KILN_ERR_INVALID("allocation %d binds parameter %d of %d", i, a->parameter,
                             num_params);
      } else if (a->size && !params[a->parameter]) {
        s = KILN_ERR_INVALID("parameter %d of %s: NULL address", a->parameter, d->name);
      } else if (!a->size) {
        /* An empty array: any valid address will do; keep the padded temp-like buffer. */
        s = kiln_buffer_table_allocate(table, i, MIN_ALLOCATION_BYTES);
      } else {
        s = kiln_buffer_table_bind(table, i, params[a->parameter], a->size);
      }
    } else if (a->kind == KILN_EXEC_ALLOC_OUTPUT) {
      s = kiln_device_buffer_create(e->dev, padded(a->size), &owned[i]);
      if (!s) {
        table->bases[i] = owned[i]->ptr;
        table->sizes[i] = padded(a->size);
      }
    }
  }
  if (!s) {
    kiln_run_info_t ri = {0, NULL, 0};
    if (run) ri = *run;
    if (!ri.run_id) ri.run_id = atomic_fetch_add(&g_next_run_id, 1);
    kiln_thunk_exec_state_set_run(ctx->state, &ri);
    kiln_thunk_exec_state_set_participant(ctx->state, who);
    kiln_thunk_exec_params_t xp = {
        .device = e->dev, .stream = stream, .buffers = table, .state = ctx->state};
    xp.profile = e->profile;
    s = kiln_thunk_seq_execute(&e->desc->thunks, &xp);
    kiln_thunk_exec_state_set_run(ctx->state, NULL);
    kiln_thunk_exec_state_set_participant(ctx->state, NULL);
  }
  for (int32_t i = 0; i < d->num_outputs && !s; i++)
    s = make_output(e, ctx, stream, i, owned, handed, params, &outputs[i]);
  kiln_status sync = kiln_stream_synchronize(stream);
  if (!s) s = sync;
  else kiln_status_free(sync);
  for (int32_t i = 0; i < na; i++) {
    kiln_device_buffer_destroy(owned[i]);
    if (d->allocations[i].kind == KILN_EXEC_ALLOC_OUTPUT) {
      table->bases[i] = 0;
      table->sizes[i] = 0;
    }
  }
  if (!small) {
    kiln_free(owned);
    kiln_free(handed);
  }
  context_give_back(e, ctx);
  if (s) {
    for (int32_t i = 0; i < d->num_outputs; i++) {
      kiln_device_buffer_destroy(outputs[i]);
      outputs[i] = NULL;
    }
    return kiln_status_annotate(s, "while running %s", d->name);
  }
  if (e->profile)
    kiln_thunk_profile_add_run(e->profile, (uint64_t)((kiln_clock_ms() - t_start) * 1e6));
  return NULL;
}
