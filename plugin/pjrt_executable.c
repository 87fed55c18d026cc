/* Executables and their entries (pjrt_executable.h): metadata, lazy lowering per device,
 * Execute, Delete/Destroy. Compile and DeserializeAndLoad are in pjrt_compile.c. */
#include "plugin/pjrt_executable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/str.h"
#include "compiler/passes/buffer_assignment.h"
#include "ffi/ffi_api.h"
#include "plugin/compile_cache.h"
#include "plugin/pjrt_ffi_ext.h"
#include "plugin/pjrt_relayout.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/spmd.h"
#include "plugin/env_options.h"

/* ---- the entry signature ---- */

typedef KILN_VEC(kiln_pjrt_leaf_t) leaf_vec_t;

/* Appends the array leaves of `s` depth first; a token or other leaf without data is
 * UNIMPLEMENTED (`what` names it). */
static kiln_status flatten(const kiln_shape_t *s, int32_t parameter, leaf_vec_t *out, int32_t *leaf,
                           const char *what) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      KILN_RETURN_IF_ERROR_PLAIN(flatten(s->elements[i], parameter, out, leaf, what));
    return NULL;
  }
  kiln_pjrt_leaf_t l;
  memset(&l, 0, sizeof(l));
  if (!kiln_shape_is_array(s) || !kiln_pjrt_type_from_elem(s->type, &l.type))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "%s has a %s leaf, which the PJRT plugin cannot pass as a buffer", what,
                            kiln_elem_type_name(s->type));
  l.rank = s->rank;
  l.dims = kiln_calloc((size_t)s->rank + 1, sizeof(int64_t));
  for (int d = 0; d < s->rank; d++) l.dims[d] = s->dims[d];
  l.m2m = kiln_calloc((size_t)s->rank + 1, sizeof(int64_t));
  bool given = s->has_layout && s->layout.rank == s->rank && !s->layout.num_tiles;
  l.m2m_default = true;
  for (int d = 0; d < s->rank; d++) {
    l.m2m[d] = given ? s->layout.minor_to_major[d] : s->rank - 1 - d;
    l.m2m_default = l.m2m_default && l.m2m[d] == s->rank - 1 - d;
  }
  l.parameter = parameter;
  l.leaf = (*leaf)++;
  l.bytes = (uint64_t)kiln_shape_byte_size(s);
  kiln_vec_push(out, l);
  return NULL;
}

/* The flat leaf index of the subshape at `index` (a shape index) of `s`, or -1. */
static int32_t leaf_of_index(const kiln_shape_t *s, const kiln_i64_list_t *index) {
  int32_t base = 0;
  for (int k = 0; k < index->n; k++) {
    if (!kiln_shape_is_tuple(s) || index->v[k] < 0 || index->v[k] >= s->num_elements) return -1;
    for (int64_t i = 0; i < index->v[k]; i++) {
      leaf_vec_t tmp = {0};
      int32_t n = 0;
      kiln_status st = flatten(s->elements[i], 0, &tmp, &n, "");
      for (size_t j = 0; j < tmp.len; j++) {
        kiln_free(tmp.data[j].dims);
        kiln_free(tmp.data[j].m2m);
      }
      kiln_vec_free(&tmp);
      if (st) {
        kiln_status_free(st);
        return -1;
      }
      base += n;
    }
    s = s->elements[index->v[k]];
  }
  return kiln_shape_is_tuple(s) ? -1 : base;
}

static void leaves_free(kiln_pjrt_leaf_t *l, int32_t n) {
  for (int32_t i = 0; l && i < n; i++) {
    kiln_free(l[i].dims);
    kiln_free(l[i].m2m);
  }
  kiln_free(l);
}

static kiln_status signature(PJRT_Executable *e) {
  const kiln_hlo_computation_t *entry = e->optimized->entry;
  leaf_vec_t params = {0}, outs = {0};
  kiln_status s = NULL;
  e->num_entry_params = entry->num_parameters;
  for (int p = 0; p < entry->num_parameters && !s; p++) {
    char what[64];
    snprintf(what, sizeof(what), "parameter %d", p);
    int32_t leaf = 0;
    s = flatten(entry->parameters[p]->shape, p, &params, &leaf, what);
  }
  int32_t leaf = 0;
  if (!s) s = flatten(entry->root->shape, -1, &outs, &leaf, "the result");
  e->num_params = (int32_t)params.len;
  e->params = params.data;
  e->num_outputs = (int32_t)outs.len;
  e->outputs = outs.data;
  if (s) return s;
  int32_t no = e->num_outputs, np = e->num_params;
  e->output_types = kiln_calloc((size_t)no + 1, sizeof(*e->output_types));
  e->output_dim_sizes = kiln_calloc((size_t)no + 1, sizeof(size_t));
  e->output_memory_kinds = kiln_calloc((size_t)no + 1, sizeof(char *));
  e->output_memory_kind_sizes = kiln_calloc((size_t)no + 1, sizeof(size_t));
  size_t total = 0;
  for (int32_t i = 0; i < no; i++) total += (size_t)e->outputs[i].rank;
  e->output_dims = kiln_calloc(total + 1, sizeof(int64_t));
  size_t at = 0;
  for (int32_t i = 0; i < no; i++) {
    e->output_types[i] = e->outputs[i].type;
    e->output_dim_sizes[i] = (size_t)e->outputs[i].rank;
    for (int32_t d = 0; d < e->outputs[i].rank; d++) e->output_dims[at++] = e->outputs[i].dims[d];
    e->output_memory_kinds[i] = "device";
    e->output_memory_kind_sizes[i] = strlen("device");
  }
  e->param_memory_kinds = kiln_calloc((size_t)np + 1, sizeof(char *));
  e->param_memory_kind_sizes = kiln_calloc((size_t)np + 1, sizeof(size_t));
  for (int32_t i = 0; i < np; i++) {
    e->param_memory_kinds[i] = "device";
    e->param_memory_kind_sizes[i] = strlen("device");
  }
  /* Donation: input_output_alias maps an output leaf to a parameter leaf. */
  e->param_output = kiln_malloc(((size_t)np + 1) * sizeof(int32_t));
  e->output_param = kiln_malloc(((size_t)no + 1) * sizeof(int32_t));
  for (int32_t i = 0; i < np; i++) e->param_output[i] = -1;
  for (int32_t i = 0; i < no; i++) e->output_param[i] = -1;
  const kiln_hlo_module_t *m = e->optimized;
  for (int a = 0; a < m->num_io_aliases; a++) {
    const kiln_io_alias_t *al = &m->io_aliases[a];
    int32_t out = leaf_of_index(entry->root->shape, &al->output_index);
    if (out < 0 || al->param_number < 0 || al->param_number >= entry->num_parameters) continue;
    int32_t pl = leaf_of_index(entry->parameters[al->param_number]->shape, &al->param_index);
    if (pl < 0) continue;
    int32_t flat = -1;
    for (int32_t i = 0; i < np; i++)
      if (e->params[i].parameter == al->param_number && e->params[i].leaf == pl) flat = i;
    if (flat < 0 || out >= no) continue;
    e->param_output[flat] = out;
    e->output_param[out] = flat;
  }
  return NULL;
}

/* ---- lifetime ---- */

static void executable_free(PJRT_Executable *e) {
  if (e->cache) kiln_pjrt_compile_cache_unregister(e->cache, e);
  kiln_pjrt_executable_detach(e);
  kiln_hlo_module_destroy(e->optimized);
  kiln_free(e->name);
  kiln_free(e->optimized_text);
  kiln_free(e->compile_options);
  kiln_free(e->dump_dir);
  kiln_free(e->kernel_cache_dir);
  leaves_free(e->params, e->num_params);
  leaves_free(e->outputs, e->num_outputs);
  kiln_free(e->output_types);
  kiln_free(e->output_dims);
  kiln_free(e->output_dim_sizes);
  kiln_free(e->output_memory_kinds);
  kiln_free(e->output_memory_kind_sizes);
  kiln_free(e->param_memory_kinds);
  kiln_free(e->param_memory_kind_sizes);
  kiln_free(e->param_output);
  kiln_free(e->output_param);
  kiln_free(e->devices);
  kiln_free(e->assignment);
  for (size_t i = 0; i < e->num_props; i++) kiln_free((char *)e->props[i].name);
  kiln_free(e->props);
  pthread_mutex_destroy(&e->lower_mu);
  pthread_mutex_destroy(&e->props_mu);
  kiln_free(e);
}

void kiln_pjrt_executable_ref(PJRT_Executable *e) {
  atomic_fetch_add(&e->refs, 1);
}

void kiln_pjrt_executable_unref(PJRT_Executable *e) {
  if (e && atomic_fetch_sub(&e->refs, 1) == 1) executable_free(e);
}

void kiln_pjrt_executable_detach(PJRT_Executable *e) {
  kiln_mutex_lock(&e->lower_mu);
  for (int32_t i = 0; i < e->num_devices; i++) {
    kiln_executable_t *x = atomic_exchange(&e->devices[i].loaded, NULL);
    kiln_executable_destroy(x);
  }
  e->client = NULL;
  kiln_mutex_unlock(&e->lower_mu);
}

static kiln_status executable_create(PJRT_Client *client, int32_t num_replicas,
                                     int32_t num_partitions, const int32_t *assignment,
                                     kiln_hlo_module_t *optimized, const char *options,
                                     size_t options_len, const kiln_pjrt_compile_options_t *co,
                                     double passes_ms, PJRT_Executable **out) {
  PJRT_Executable *e = kiln_calloc(1, sizeof(*e));
  atomic_init(&e->refs, 1);
  pthread_mutex_init(&e->lower_mu, NULL);
  pthread_mutex_init(&e->props_mu, NULL);
  e->client = client;
  e->optimized = optimized;
  e->name = kiln_strdup(optimized->name ? optimized->name : "module");
  e->optimized_text = kiln_hlo_module_to_string(optimized);
  e->optimized_text_len = strlen(e->optimized_text);
  e->compile_options = kiln_malloc(options_len ? options_len : 1);
  if (options_len) memcpy(e->compile_options, options, options_len);
  e->compile_options_len = options_len;
  e->num_replicas = num_replicas;
  e->num_partitions = num_partitions;
  e->num_participants = num_replicas * num_partitions;
  e->assignment = kiln_malloc(sizeof(int32_t) * (size_t)e->num_participants);
  memcpy(e->assignment, assignment, sizeof(int32_t) * (size_t)e->num_participants);
  e->device_index = kiln_pjrt_client_local_index(client, assignment[0]);
  e->passes_ms = passes_ms;
  e->target = client->is_cuda ? KILN_TARGET_CUDA : KILN_TARGET_HOST;
  const char *target_name = kiln_pjrt_client_target_name(client);
  kiln_hasher_t h;
  kiln_hash_init(&h, 0x66696e6765727072ull);
  kiln_hash_field(&h, e->optimized_text, e->optimized_text_len);
  kiln_hash_field(&h, target_name, strlen(target_name));
  int32_t world[2] = {num_replicas, num_partitions};
  kiln_hash_field(&h, world, sizeof(world));
  kiln_hash_field(&h, KILN_VERSION_STRING, strlen(KILN_VERSION_STRING));
  uint64_t fp[2];
  kiln_hash_final(&h, fp);
  kiln_hash_hex(fp, e->fingerprint);
  /* Lowering options: the dump folder (compile options, else the client's) and command
   * buffers (the client's setting, overridden by the compile options when they say). */
  const char *dump = co && co->xla_dump_to ? co->xla_dump_to : client->options.dump_dir;
  if (dump && *dump) e->dump_dir = kiln_strdup(dump);
  e->copts.emit.target = e->target;
  e->copts.emit.cublaslt = client->is_cuda && client->cublaslt;
  e->copts.emit.num_replicas = num_replicas;
  e->copts.emit.num_partitions = num_partitions;
  e->copts.emit.dump_dir = e->dump_dir ? e->dump_dir : "";
  bool cmdbufs = client->options.command_buffers;
  if (co && co->has_command_buffer_option) cmdbufs = co->command_buffers;
  e->copts.no_command_buffers = !cmdbufs;
  const char *cdir = kiln_pjrt_compile_cache_dir(client->compile_cache);
  if (cdir) e->kernel_cache_dir = kiln_strdup(cdir);
  e->copts.emit.kernel_cache_dir = e->kernel_cache_dir;
  /* The whole-executable cache (compiler/thunks/executable_cache.h): each device's lowering
   * looks the optimized module up there first, so a fresh process that finds the module in
   * the disk cache also skips buffer assignment, codegen and LLVM (only links the objects). */
  e->copts.executable_cache_dir = e->kernel_cache_dir;
  e->num_devices = client->num_devices;
  e->devices = kiln_calloc((size_t)e->num_devices + 1, sizeof(*e->devices));
  kiln_status s = signature(e);
  if (s) {
    kiln_pjrt_executable_unref(e);
    return s;
  }
  /* last: an unwind of the records' scope must not leave the cache pointing at them */
  if (client->compile_cache) kiln_pjrt_compile_cache_register(client->compile_cache, e);
  *out = e;
  return NULL;
}

/* The records are many small blocks (names, the signature's leaves and arrays): they are made
 * in an out-of-memory scope, so any of them may be refused; an unwind frees them all and
 * destroys `optimized` here, as the records would have on any other error. */
kiln_status kiln_pjrt_executable_create(PJRT_Client *client, int32_t num_replicas,
                                        int32_t num_partitions, const int32_t *assignment,
                                        kiln_hlo_module_t *optimized, const char *options,
                                        size_t options_len, const kiln_pjrt_compile_options_t *co,
                                        double passes_ms, PJRT_Executable **out) {
  *out = NULL;
  KILN_OOM_SCOPED_RETURN(executable_create(client, num_replicas, num_partitions, assignment,
                                           optimized, options, options_len, co, passes_ms, out),
                         (*out = NULL, kiln_hlo_module_destroy(optimized)),
                         "making the executable records of a compiled module");
}

/* This process's participants of `e`: [*first, *first + *num). Across processes the
 * participants split evenly in order (the runtime's MPI world, runtime/spmd.h): participant p
 * must be on a device of process p / (N / P); anything else is UNIMPLEMENTED. */
static kiln_status local_participants(const PJRT_Executable *e, int32_t *first, int32_t *num) {
  const PJRT_Client *c = e->client;
  int32_t n = e->num_participants, procs = c->num_processes;
  *first = 0;
  *num = n;
  if (procs <= 1) return NULL;
  if (n == 1) {
    if (kiln_pjrt_client_local_index(c, e->assignment[0]) < 0)
      return KILN_ERR_INVALID("device %d is another process's", e->assignment[0]);
    return NULL;
  }
  if (n % procs)
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "%s: %d participants do not split evenly over %d processes", e->name, n,
                            procs);
  int32_t per = n / procs;
  for (int32_t i = 0; i < n; i++) {
    int32_t proc = c->all_devices[e->assignment[i]]->desc.process_index;
    if (proc != i / per)
      return kiln_status_make(KILN_UNIMPLEMENTED,
                              "%s: participant %d is on device %d of process %d; across "
                              "processes participant p must be on a device of process p / %d "
                              "(the participants split evenly, in order, as the default "
                              "assignment of replicas does)",
                              e->name, i, e->assignment[i], proc, per);
  }
  *first = c->process_index * per;
  *num = per;
  return NULL;
}

kiln_status kiln_pjrt_loaded_create(PJRT_Executable *e, PJRT_LoadedExecutable **out) {
  *out = NULL;
  if (!e->client) return kiln_status_make(KILN_FAILED_PRECONDITION, "the client was destroyed");
  for (int32_t i = 0; i < e->num_participants; i++)
    if (e->assignment[i] < 0 || e->assignment[i] >= e->client->num_all_devices)
      return KILN_ERR_INVALID("device %d is not a device of the client", e->assignment[i]);
  int32_t first = 0, num = 0;
  KILN_RETURN_IF_ERROR_PLAIN(local_participants(e, &first, &num));
  PJRT_LoadedExecutable *l = kiln_try_calloc(1, sizeof(*l));
  if (l) l->devices = kiln_try_calloc((size_t)e->num_participants, sizeof(*l->devices));
  if (l) l->logical_ids = kiln_try_calloc((size_t)e->num_participants, sizeof(*l->logical_ids));
  if (!l || !l->devices || !l->logical_ids) {
    if (l) {
      kiln_free(l->devices);
      kiln_free(l->logical_ids);
    }
    kiln_free(l);
    return KILN_ERR_EXHAUSTED("out of host memory for the loaded executable of %s (%d devices)",
                              e->name, e->num_participants);
  }
  kiln_pjrt_executable_ref(e);
  l->exec = e;
  for (int32_t i = 0; i < e->num_participants; i++) {
    l->devices[i] = e->client->all_devices[e->assignment[i]];
    l->logical_ids[i].replica = i / e->num_partitions;
    l->logical_ids[i].partition = i % e->num_partitions;
  }
  l->first_local = first;
  l->num_local = num;
  l->device = l->devices[first];
  atomic_init(&l->deleted, false);
  *out = l;
  return NULL;
}

/* ---- lazy lowering ---- */

static int32_t device_index_of(const PJRT_Executable *e, const PJRT_Device *dev) {
  if (!e->client || !dev || dev->client != e->client) return -1;
  if (dev->index < 0 || dev->index >= e->num_devices || e->client->devices[dev->index] != dev)
    return -1;
  return dev->index;
}

/* Runs whose memory (parameters, outputs, temporaries, constants) stays under this, and that
 * have no loop, conditional, custom call or collective, are cheap: Execute runs them itself
 * when the device's queue is idle (a hand-off to the queue's thread and back would cost about
 * as much as the run). */
#define CHEAP_RUN_BYTES (256u << 10)

static bool run_is_cheap(const kiln_executable_desc_t *d) {
  int64_t kinds[KILN_THUNK_NUM_KINDS] = {0};
  kiln_thunk_seq_count_kinds(&d->thunks, kinds);
  if (kinds[KILN_THUNK_WHILE] || kinds[KILN_THUNK_CONDITIONAL] || kinds[KILN_THUNK_CUSTOM_CALL] ||
      kinds[KILN_THUNK_COLLECTIVE])
    return false;
  uint64_t bytes = 0;
  for (int32_t i = 0; i < d->num_allocations; i++) bytes += d->allocations[i].size;
  return bytes <= CHEAP_RUN_BYTES;
}

/* The code of `e` on device `di`, made on the first call (once, whoever calls at once). Every
 * allocation of the lowering may fail: the compile's out-of-memory scope and the runtime's
 * fallible load run under the lock, which does not hold the scope. */
static kiln_status device_code(PJRT_Executable *e, int32_t di, kiln_executable_t **out) {
  kiln_executable_t *x = atomic_load_explicit(&e->devices[di].loaded, memory_order_acquire);
  if (x) {
    *out = x;
    return NULL;
  }
  bool held = kiln_mutex_lock_around_scopes(&e->lower_mu);
  kiln_status s = NULL;
  x = atomic_load_explicit(&e->devices[di].loaded, memory_order_acquire);
  if (!x && !e->client)
    s = kiln_status_make(KILN_FAILED_PRECONDITION, "executable %s: its client was destroyed",
                         e->name);
  if (!x && !s) {
    double t0 = kiln_clock_ms();
    kiln_compile_options_t o = e->copts;
    kiln_pass_options_t po; /* the passes' settings, for the executable cache's key */
    kiln_pjrt_compile_options_from_env(&o, &po); /* command buffers, host JIT target */
    PJRT_Device *dev = e->client->devices[di];
    char arch[16] = "";
    if (dev->kdev->kind == KILN_DEVICE_CUDA) {
      kiln_cuda_device_arch(dev->kdev, arch, sizeof(arch));
      o.emit.arch = arch;
    }
    kiln_compile_stats_t st;
    memset(&st, 0, sizeof(st));
    kiln_executable_desc_t *d = NULL;
    s = kiln_compile_optimized_module(e->optimized, &o, &d, &st);
    int64_t code = 0;
    for (int32_t i = 0; !s && i < d->num_images; i++) code += (int64_t)d->images[i].size;
    if (!s) s = kiln_executable_load(dev->kdev, d, &x);
    if (s) {
      s = kiln_status_annotate(s, "while loading executable %s on device %d", e->name, di);
    } else {
      e->temp_bytes = st.temp_bytes;
      atomic_fetch_add(&e->code_bytes, code);
      atomic_fetch_add(&e->loads, 1);
      e->devices[di].lower_ms = kiln_clock_ms() - t0;
      e->devices[di].cheap = run_is_cheap(kiln_executable_desc(x));
      atomic_store_explicit(&e->devices[di].loaded, x, memory_order_release);
      if (st.executable_cache_hit) atomic_fetch_add(&e->cache_loads, 1);
      if (st.executable_cache_hit)
        KILN_LOG_I(
            "executable %s: loaded on device %d in %.2f ms from the executable cache "
            "(key %.2f ms, read %.2f ms, link %.2f ms, load %.2f ms)",
            e->name, di, e->devices[di].lower_ms, st.cache_key_ms, st.cache_read_ms,
            st.cache_load_ms, e->devices[di].lower_ms - st.cache_ms);
      else
        KILN_LOG_I("executable %s: loaded on device %d in %.1f ms (%d kernels compiled)", e->name,
                   di, e->devices[di].lower_ms, st.emit.kernels);
    }
  }
  kiln_mutex_unlock_around_scopes(&e->lower_mu, held);
  *out = x;
  return s;
}

/* ---- Execute ---- */

typedef struct arg_state {
  PJRT_Buffer *buf;
  kiln_devptr_t ptr;
  bool acquired;
  kiln_pjrt_storage_t *donated; /* the storage taken from buf (its output takes it over) */
  bool read_only;               /* donated but not to be written (kiln_pjrt_storage_read_only) */
  kiln_device_buffer_t *copy;   /* an aliased parameter that could not be donated: a copy */
  bool relayout;                /* buf's layout is not the parameter's (pjrt_relayout.h) */
  kiln_device_buffer_t *relaid; /* a plain parameter relaid out for the run */
} arg_state_t;

static bool in_list(const int64_t *v, size_t n, int64_t x) {
  for (size_t i = 0; v && i < n; i++)
    if (v[i] == x) return true;
  return false;
}

/* Why argument i does not fit (check_argument found it does not). */
static __attribute__((noinline)) kiln_status argument_error(const PJRT_Executable *e, int32_t i,
                                                            const PJRT_Buffer *b,
                                                            const PJRT_Device *dev) {
  const kiln_pjrt_leaf_t *p = &e->params[i];
  if (!b)
    return KILN_ERR_INVALID("argument %d (parameter %d of %s) is NULL", i, p->parameter, e->name);
  if (b->device != dev)
    return KILN_ERR_INVALID(
        "argument %d (parameter %d of %s) is on device %d, the execute is on "
        "device %d",
        i, p->parameter, e->name, b->device ? b->device->desc.id : -1, dev->desc.id);
  bool same = b->type == p->type && b->rank == p->rank;
  for (int32_t d = 0; same && d < p->rank; d++) same = b->dims[d] == p->dims[d];
  if (!same) {
    kiln_strbuf_t want = {0}, got = {0};
    kiln_strbuf_printf(&want, "%s[", kiln_pjrt_type_name(p->type));
    for (int32_t d = 0; d < p->rank; d++)
      kiln_strbuf_printf(&want, "%s%lld", d ? "," : "", (long long)p->dims[d]);
    kiln_strbuf_printf(&got, "%s[", kiln_pjrt_type_name(b->type));
    for (int32_t d = 0; d < b->rank; d++)
      kiln_strbuf_printf(&got, "%s%lld", d ? "," : "", (long long)b->dims[d]);
    kiln_status s = KILN_ERR_INVALID(
        "argument %d does not match parameter %d (leaf %d) of %s: expected %s], got %s]", i,
        p->parameter, p->leaf, e->name, kiln_strbuf_cstr(&want), kiln_strbuf_cstr(&got));
    kiln_strbuf_free(&want);
    kiln_strbuf_free(&got);
    return s;
  }
  return KILN_ERR_INTERNAL("argument %d of %s: no mismatch found", i, e->name);
}

/* Argument i on `dev` with parameter i's type and dims (the fast path inline, the message
 * out of line). */
static inline kiln_status check_argument(const PJRT_Executable *e, int32_t i, const PJRT_Buffer *b,
                                         const PJRT_Device *dev) {
  const kiln_pjrt_leaf_t *p = &e->params[i];
  bool same = b && b->device == dev && b->type == p->type && b->rank == p->rank;
  for (int32_t d = 0; same && d < p->rank; d++) same = b->dims[d] == p->dims[d];
  return same ? NULL : argument_error(e, i, b, dev);
}

/* Argument `b` of parameter i is in another layout than the parameter's. */
static inline bool needs_relayout(const PJRT_Executable *e, int32_t i, const PJRT_Buffer *b) {
  /* both default (the usual case): the same placement without comparing */
  return !(e->params[i].m2m_default && kiln_pjrt_buffer_has_default_layout(b)) &&
         !kiln_pjrt_m2m_same_placement(b->rank, b->dims, b->minor_to_major, e->params[i].m2m);
}

/* Parameter i may take a donation: an output lives in it and the caller's
 * non_donatable_input_indices do not list it (an argument to relay out is copied instead). */
static bool donatable(const PJRT_Executable *e, int32_t i, const PJRT_ExecuteOptions *opts) {
  if (e->param_output[i] < 0) return false;
  if (opts && KILN_PJRT_HAS(opts, num_non_donatable_input_indices))
    return !in_list(opts->non_donatable_input_indices, opts->num_non_donatable_input_indices, i);
  return true;
}

/* A copy of `size` bytes at `src` on `dev` (an aliased parameter that was not donated: the
 * executable writes into the copy), made on `stream`. */
static kiln_status copy_argument(PJRT_Device *dev, kiln_stream_t *stream, kiln_devptr_t src,
                                 uint64_t size, kiln_device_buffer_t **out) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln_device_buffer_create(dev->kdev, size ? size : 1, out));
  return size ? kiln_stream_memcpy_d2d(stream, (*out)->ptr, src, size) : NULL;
}

static void args_release(arg_state_t *st, int32_t n) {
  for (int32_t i = 0; i < n; i++) {
    if (st[i].acquired) kiln_pjrt_buffer_release(st[i].buf);
    if (st[i].donated) kiln_pjrt_storage_unref(st[i].donated);
    kiln_device_buffer_destroy(st[i].copy);
    kiln_device_buffer_destroy(st[i].relaid);
    st[i].relaid = NULL;
    st[i].acquired = false;
    st[i].donated = NULL;
    st[i].copy = NULL;
  }
}

/* Destroys the n output buffers of outs that exist (and NULLs them). */
static void outputs_destroy(PJRT_Buffer **outs, int32_t n) {
  PJRT_Buffer_Destroy_Args da;
  for (int32_t j = 0; j < n; j++) {
    if (!outs[j]) continue;
    memset(&da, 0, sizeof(da));
    da.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
    da.buffer = outs[j];
    PJRT_Error *err = GetPjrtApi()->PJRT_Buffer_Destroy(&da);
    if (err) {
      PJRT_Error_Destroy_Args ea;
      memset(&ea, 0, sizeof(ea));
      ea.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
      ea.error = err;
      GetPjrtApi()->PJRT_Error_Destroy(&ea);
    }
    outs[j] = NULL;
  }
}

/* One execute on `dev` (di: its index): arguments in `args` (e->num_params of them), outputs
 * into `outs` (e->num_outputs); `who`: its participant of an SPMD run (NULL: alone). `x`: the
 * device's code when the caller got it and checked the arguments already (else NULL).
 * `order`: a queue whose order lock the caller holds, released here once the arguments are
 * held or donated (NULL: none). */
static kiln_status execute_one(PJRT_Executable *e, PJRT_Device *dev, int32_t di,
                               kiln_executable_t *x, PJRT_Buffer *const *args,
                               const PJRT_ExecuteOptions *opts, const kiln_spmd_participant_t *who,
                               PJRT_Buffer **outs, kiln_pjrt_queue_t *order) {
  int32_t np = e->num_params, no = e->num_outputs;
  for (int32_t i = 0; i < np && !x; i++)
    KILN_RETURN_IF_ERROR_PLAIN(check_argument(e, i, args[i], dev));
  if (!x) KILN_RETURN_IF_ERROR_PLAIN(device_code(e, di, &x));
  /* Small signatures on the stack (each entry used is set in the first loop below). */
  arg_state_t local[16];
  arg_state_t *st = np <= 16 ? local : kiln_try_calloc((size_t)np, sizeof(*st));
  kiln_devptr_t pl[16];
  uint64_t sl[16];
  kiln_devptr_t *ptrs = np <= 16 ? pl : kiln_try_calloc((size_t)np, sizeof(*ptrs));
  uint64_t *sizes = np <= 16 ? sl : kiln_try_calloc((size_t)np, sizeof(*sizes));
  kiln_device_buffer_t *ol[16];
  kiln_device_buffer_t **kout = no <= 16 ? ol : kiln_try_calloc((size_t)no, sizeof(*kout));
  if (!st || !ptrs || !sizes || !kout) {
    if (order) kiln_pjrt_queue_order_unlock(order);
    if (st != local) kiln_free(st);
    if (ptrs != pl) kiln_free(ptrs);
    if (sizes != sl) kiln_free(sizes);
    if (kout != ol) kiln_free(kout);
    return KILN_ERR_EXHAUSTED("out of host memory for the %d arguments and %d outputs of %s", np,
                              no, e->name);
  }
  if (no) memset(kout, 0, sizeof(*kout) * (size_t)no);
  kiln_stream_t *stream = NULL;
  kiln_status s = NULL;
  /* Plain arguments are held for reading; aliased ones are donated (after every hold, so a
   * buffer passed twice fails before anything was taken), or copied when the caller said
   * they are not donatable or donation is refused (an external reference), or relaid out
   * when their layout is not the parameter's. */
  for (int32_t i = 0; i < np; i++) {
    bool relayout = needs_relayout(e, i, args[i]);
    st[i] = (arg_state_t){.buf = args[i], .relayout = relayout};
    if (s || (!relayout && donatable(e, i, opts)))
      continue; /* after an error: set only, for args_release */
    uint64_t size = 0;
    if (kiln_pjrt_buffer_try_acquire(args[i], &st[i].ptr)) {
      st[i].acquired = true;
      continue;
    }
    s = kiln_pjrt_buffer_acquire(args[i], &st[i].ptr, &size);
    if (s)
      s = kiln_status_annotate(s, "argument %d of %s", i, e->name);
    else
      st[i].acquired = true;
  }
  for (int32_t i = 0; i < np && !s; i++) {
    if (e->param_output[i] < 0 || st[i].acquired) continue;
    kiln_status ds = kiln_pjrt_buffer_donate(args[i], &st[i].donated);
    if (!ds) {
      st[i].ptr = st[i].donated->buf->ptr;
      st[i].read_only = kiln_pjrt_storage_read_only(st[i].donated);
      continue;
    }
    kiln_status_free(ds); /* refused: fall back to a copy */
    uint64_t size = 0;
    s = kiln_pjrt_buffer_acquire(args[i], &st[i].ptr, &size);
    if (s)
      s = kiln_status_annotate(s, "argument %d of %s", i, e->name);
    else
      st[i].acquired = true;
  }
  if (order) kiln_pjrt_queue_order_unlock(order); /* what the run reads is held now */
  if (!s) s = kiln_pjrt_device_stream_acquire(dev, &stream);
  for (int32_t i = 0; i < np && !s; i++) {
    sizes[i] = e->params[i].bytes;
    ptrs[i] = st[i].ptr;
    if (st[i].relayout) {
      /* another layout than the parameter's: a copy in its layout (aliased: the output's) */
      kiln_device_buffer_t *r = NULL;
      s = kiln_pjrt_relayout(dev, stream, args[i], st[i].ptr, e->params[i].m2m, &r);
      if (s) s = kiln_status_annotate(s, "argument %d of %s", i, e->name);
      if (!s) *(e->param_output[i] >= 0 ? &st[i].copy : &st[i].relaid) = r;
      if (!s) ptrs[i] = r->ptr;
    } else if (e->param_output[i] >= 0 && (!st[i].donated || st[i].read_only)) {
      s = copy_argument(dev, stream, st[i].ptr, sizes[i], &st[i].copy);
      if (!s) ptrs[i] = st[i].copy->ptr;
    }
  }
  if (!s) {
    /* XLA's run id: the launch id when the caller gives one (it ties the devices of one
     * launch together), else a fresh one; the execute context's FFI user data. */
    kiln_run_info_t run = {0, NULL, 0};
    if (opts && KILN_PJRT_HAS(opts, launch_id)) run.run_id = opts->launch_id;
    kiln_ffi_user_data_t *ud = NULL;
    if (opts && KILN_PJRT_HAS(opts, context) && opts->context)
      ud = kiln_pjrt_execute_context_user_data(opts->context, &run.num_user_data);
    run.user_data = ud;
    s = kiln_executable_run_participant(x, stream, ptrs, sizes, np, kout, &run, who);
    if (ud) kiln_free(ud);
  }
  if (stream) kiln_pjrt_device_stream_release(dev, stream);
  if (!s) {
    /* Reads are done: let go of the held arguments before wrapping the outputs. */
    for (int32_t i = 0; i < np; i++)
      if (st[i].acquired) {
        kiln_pjrt_buffer_release_inline(st[i].buf);
        st[i].acquired = false;
      }
    for (int32_t j = 0; j < no && !s; j++) {
      const kiln_pjrt_leaf_t *o = &e->outputs[j];
      int32_t pi = e->output_param[j];
      /* An aliased output comes back as a view of the parameter's memory (the runtime
       * wraps it, not owning it); an alias the compiler did not keep is a fresh buffer. */
      bool view = pi >= 0 && kout[j] && !kout[j]->owned && kout[j]->ptr == ptrs[pi];
      if (view && st[pi].donated && !st[pi].read_only) {
        kiln_device_buffer_destroy(kout[j]); /* a view of the donated storage */
        kout[j] = NULL;
        s = kiln_pjrt_buffer_from_storage(dev, st[pi].donated, o->type, o->dims, o->rank, &outs[j]);
        if (!s) st[pi].donated = NULL;
      } else if (view && st[pi].copy) {
        kiln_device_buffer_destroy(kout[j]); /* a view of the copy */
        kout[j] = NULL;
        s = kiln_pjrt_buffer_create(dev, st[pi].copy, o->type, o->dims, o->rank, o->bytes,
                                    &outs[j]);
        if (!s) st[pi].copy = NULL;
      } else {
        s = kiln_pjrt_buffer_create(dev, kout[j], o->type, o->dims, o->rank, o->bytes, &outs[j]);
        if (!s) kout[j] = NULL;
      }
    }
    if (s) outputs_destroy(outs, no);
  }
  for (int32_t j = 0; j < no; j++) kiln_device_buffer_destroy(kout[j]);
  args_release(st, np);
  if (st != local) kiln_free(st);
  if (ptrs != pl) kiln_free(ptrs);
  if (sizes != sl) kiln_free(sizes);
  if (kout != ol) kiln_free(kout);
  return s;
}

/* ---- Asynchronous execute ----
 *
 * Execute checks the arguments, takes a storage reference of each (a donated one: the storage
 * itself), makes the output buffers pending (their memory comes with the run), queues the run
 * on the device (pjrt_queue.h) and returns. The queue's thread waits for the arguments' memory
 * (an earlier execute may still compute it), runs, and completes the outputs and the event;
 * a failed run makes every output an error that its readers get, and the event carries it.
 * The arguments' memory stays while the run holds it, whatever the caller does with their
 * buffers (Delete and Destroy do not wait). Which executes go there: see loaded_execute. */

/* What the participants of one queued SPMD run share: its world, a start line (every
 * participant waits there until all have started, so a participant whose queue is still busy
 * with earlier work is not counted missing at a collective meanwhile: the world's deadline
 * counts from the start), and how many have not ended (the last frees it). */
typedef struct spmd_run {
  kiln_spmd_world_t *world;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int32_t n, started;
  bool failed; /* a participant could not be queued: the others stop at the start line */
  _Atomic int32_t left;
} spmd_run_t;

typedef struct exec_work {
  kiln_pjrt_work_t base;
  PJRT_Executable *e; /* one reference */
  PJRT_Device *dev;
  kiln_executable_t *x;
  int64_t run_id;
  PJRT_Event *done;          /* completed with the run's status; NULL when not asked for */
  kiln_pjrt_storage_t **in;  /* per parameter: its storage (one reference each) */
  kiln_pjrt_storage_t **out; /* per output: its pending storage (one reference each) */
  bool *donated;             /* per parameter: in[i] was donated (its output lives in it) */
  spmd_run_t *spmd;          /* a participant of an SPMD run (NULL: a run alone) */
  kiln_spmd_participant_t who;
  /* The ExecuteContext's FFI user data as of Execute (owned; the data it points to is the
   * caller's, valid until the run ends: PJRT's contract for the context). */
  kiln_ffi_user_data_t *user_data;
  size_t num_user_data;
} exec_work_t;

/* Participant's arrival at the start line; false when the run failed to start (then it does
 * not run). */
static bool spmd_start(spmd_run_t *r) {
  kiln_mutex_lock(&r->mu);
  if (++r->started == r->n) pthread_cond_broadcast(&r->cv);
  while (r->started < r->n && !r->failed) pthread_cond_wait(&r->cv, &r->mu);
  bool ok = !r->failed;
  kiln_mutex_unlock(&r->mu);
  return ok;
}

static void spmd_run_free(spmd_run_t *r) {
  kiln_spmd_world_destroy(r->world);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  kiln_free(r);
}

/* A participant is done; the last frees the run. */
static void spmd_leave(spmd_run_t *r) {
  if (atomic_fetch_sub(&r->left, 1) == 1) spmd_run_free(r);
}

static exec_work_t *work_new(PJRT_Executable *e) {
  size_t np = (size_t)e->num_params, no = (size_t)e->num_outputs;
  exec_work_t *w = kiln_try_calloc(
      1, sizeof(exec_work_t) + (np + no) * sizeof(kiln_pjrt_storage_t *) + np * sizeof(bool));
  if (!w) return NULL;
  w->in = (kiln_pjrt_storage_t **)(void *)(w + 1);
  w->out = w->in + np;
  w->donated = (bool *)(void *)(w->out + no);
  return w;
}

/* The queue's side: runs `base` (an exec_work_t) and completes what it made pending. */
static void work_run(kiln_pjrt_work_t *base) {
  exec_work_t *w = (exec_work_t *)base;
  PJRT_Executable *e = w->e;
  int32_t np = e->num_params, no = e->num_outputs;
  size_t nb = (size_t)(np > no ? np : no) + 1;
  kiln_devptr_t *ptrs = kiln_try_calloc(nb, sizeof(*ptrs));
  uint64_t *sizes = kiln_try_calloc(nb, sizeof(*sizes));
  kiln_device_buffer_t **copies = kiln_try_calloc(nb, sizeof(*copies));
  kiln_device_buffer_t **kout = kiln_try_calloc(nb, sizeof(*kout));
  kiln_status s = NULL;
  if (!ptrs || !sizes || !copies || !kout)
    s = KILN_ERR_EXHAUSTED("out of host memory for the %d arguments and %d outputs of %s", np, no,
                           e->name);
  for (int32_t i = 0; i < np && !s; i++) {
    /* (memory filled from outside: the caller may fill it only once Execute lets it go on) */
    const bool outside = kiln_pjrt_storage_waits_outside(w->in[i]);
    if (outside) atomic_store(&w->dev->queue.waiting_outside, true);
    s = kiln_pjrt_storage_wait(w->in[i], &ptrs[i]);
    if (outside) atomic_store(&w->dev->queue.waiting_outside, false);
    if (s) s = kiln_status_annotate(s, "argument %d of %s", i, e->name);
    sizes[i] = e->params[i].bytes;
    /* donated memory that must not be written (the caller's immutable memory, or memory a
     * raw read still reads: through a control dependency's buffer or an alias buffer too):
     * copied, as an undonated argument */
    if (!s && w->donated[i] && kiln_pjrt_storage_read_only(w->in[i])) w->donated[i] = false;
  }
  if (w->spmd && !spmd_start(w->spmd) && !s)
    s = kiln_status_make(KILN_ABORTED, "another participant's run could not be queued");
  kiln_stream_t *stream = NULL;
  if (!s) s = kiln_pjrt_device_stream_acquire(w->dev, &stream);
  for (int32_t i = 0; i < np && !s; i++) {
    if (e->param_output[i] < 0 || w->donated[i]) continue;
    s = copy_argument(w->dev, stream, ptrs[i], sizes[i], &copies[i]);
    if (!s) ptrs[i] = copies[i]->ptr;
  }
  if (!s) {
    kiln_run_info_t run = {w->run_id, w->user_data, w->num_user_data};
    s = kiln_executable_run_participant(w->x, stream, ptrs, sizes, np, kout, &run,
                                        w->spmd ? &w->who : NULL);
  }
  /* A participant that fails (before or in its run) stops its peers at once. */
  if (s && w->spmd) kiln_spmd_world_abort(w->who.world, w->who.participant, kiln_status_message(s));
  if (stream) kiln_pjrt_device_stream_release(w->dev, stream);
  if (s && w->spmd) {
    kiln_strbuf_t who = {0};
    kiln_spmd_world_describe(w->who.world, w->who.participant, &who);
    s = kiln_status_annotate(s, "participant %s", kiln_strbuf_cstr(&who));
    kiln_strbuf_free(&who);
  }
  if (s) s = kiln_status_annotate(s, "in the asynchronous run of %s", e->name);
  for (int32_t j = 0; j < no; j++) {
    if (s) {
      kiln_pjrt_storage_complete(w->out[j], NULL, NULL, kiln_status_copy(s));
      continue;
    }
    /* An aliased output is a view of the parameter's memory (as in execute_one). */
    int32_t pi = e->output_param[j];
    bool view = pi >= 0 && kout[j] && !kout[j]->owned && kout[j]->ptr == ptrs[pi];
    if (view) kiln_device_buffer_destroy(kout[j]);
    if (view && w->donated[pi]) {
      kiln_pjrt_storage_complete(w->out[j], NULL, w->in[pi], NULL);
      w->in[pi] = NULL;
    } else if (view && copies[pi]) {
      kiln_pjrt_storage_complete(w->out[j], copies[pi], NULL, NULL);
      copies[pi] = NULL;
    } else {
      kiln_pjrt_storage_complete(w->out[j], kout[j], NULL, NULL);
    }
    kout[j] = NULL;
  }
  for (int32_t i = 0; i < np; i++) {
    kiln_pjrt_storage_unref(w->in[i]);
    if (copies) kiln_device_buffer_destroy(copies[i]);
  }
  for (int32_t j = 0; kout && j < no; j++) kiln_device_buffer_destroy(kout[j]);
  kiln_free(ptrs);
  kiln_free(sizes);
  kiln_free(copies);
  kiln_free(kout);
  if (w->done)
    kiln_pjrt_event_complete(w->done, s);
  else
    kiln_status_free(s);
  if (w->spmd) spmd_leave(w->spmd);
  kiln_pjrt_executable_unref(e);
  kiln_free(w->user_data);
  kiln_free(w);
}

/* Argument i is passed again at another position (it is then read, not donated). */
static bool passed_twice(PJRT_Buffer *const *args, int32_t np, int32_t i) {
  for (int32_t k = 0; k < np; k++)
    if (k != i && args[k] == args[i]) return true;
  return false;
}

/* Undoes work_prepare's work `w` that will not run (`s`: why, for its outputs). */
static void work_discard(exec_work_t *w, PJRT_Buffer **outs, kiln_status s) {
  PJRT_Executable *e = w->e;
  for (int32_t j = 0; j < e->num_outputs; j++)
    if (w->out[j]) kiln_pjrt_storage_complete(w->out[j], NULL, NULL, kiln_status_copy(s));
  outputs_destroy(outs, e->num_outputs);
  for (int32_t i = 0; i < e->num_params; i++) kiln_pjrt_storage_unref(w->in[i]);
  if (w->done) { /* nobody was handed it: completed, then freed */
    kiln_pjrt_event_complete(w->done, NULL);
    PJRT_Event_Destroy_Args da = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                  .event = w->done};
    GetPjrtApi()->PJRT_Event_Destroy(&da);
  }
  kiln_pjrt_executable_unref(e);
  kiln_free(w->user_data);
  kiln_free(w);
}

/* Work for a run of `x` (e's code on `dev`) with `args` (checked): its outputs in `outs`
 * (made pending here) and, with `want_done`, its completion event in (*out)->done. The caller
 * holds the queue's order lock (what the run reads is taken in the queue's order). On an
 * error nothing is made or taken but the donations already done (as execute_one's). */
static kiln_status work_prepare(PJRT_Executable *e, PJRT_Device *dev, kiln_executable_t *x,
                                PJRT_Buffer *const *args, const PJRT_ExecuteOptions *opts,
                                PJRT_Buffer **outs, bool want_done, exec_work_t **out) {
  int32_t np = e->num_params, no = e->num_outputs;
  *out = NULL;
  exec_work_t *w = work_new(e);
  if (w && want_done && !(w->done = kiln_pjrt_event_create())) {
    kiln_free(w);
    w = NULL;
  }
  if (!w)
    return KILN_ERR_EXHAUSTED("out of host memory to queue a run of %s (%d arguments, %d outputs)",
                              e->name, np, no);
  w->base.run = work_run;
  w->e = e;
  kiln_pjrt_executable_ref(e);
  w->dev = dev;
  w->x = x;
  if (opts && KILN_PJRT_HAS(opts, launch_id)) w->run_id = opts->launch_id;
  if (opts && KILN_PJRT_HAS(opts, context) && opts->context)
    w->user_data = kiln_pjrt_execute_context_user_data(opts->context, &w->num_user_data);
  kiln_status s = NULL;
  for (int32_t j = 0; j < no && !s; j++) {
    const kiln_pjrt_leaf_t *o = &e->outputs[j];
    s = kiln_pjrt_buffer_create_pending(dev, o->type, o->dims, o->rank, o->bytes, &outs[j],
                                        &w->out[j]);
  }
  /* Plain arguments are referenced first, then donations (a buffer passed twice is read). */
  for (int32_t i = 0; i < np && !s; i++) {
    if (donatable(e, i, opts) && !passed_twice(args, np, i)) continue;
    s = kiln_pjrt_buffer_ref_storage(args[i], &w->in[i]);
    if (s) s = kiln_status_annotate(s, "argument %d of %s", i, e->name);
  }
  for (int32_t i = 0; i < np && !s; i++) {
    if (w->in[i]) continue;
    kiln_status ds = kiln_pjrt_buffer_donate_pending(args[i], &w->in[i]);
    w->donated[i] = !ds;
    if (!ds) continue;
    kiln_status_free(ds); /* refused (an external reference): the run copies it */
    s = kiln_pjrt_buffer_ref_storage(args[i], &w->in[i]);
    if (s) s = kiln_status_annotate(s, "argument %d of %s", i, e->name);
  }
  if (s) {
    work_discard(w, outs, s);
    return s;
  }
  *out = w;
  return NULL;
}

/* Queues `w` on its device (the caller holds the order lock); without a thread for the
 * queue, runs it here (it still completes everything). */
static void work_launch(exec_work_t *w) {
  kiln_status qs = kiln_pjrt_queue_push(&w->dev->queue, &w->base);
  if (!qs) return;
  KILN_LOG_W("%s; running %s on the calling thread", kiln_status_message(qs), w->e->name);
  kiln_status_free(qs);
  work_run(&w->base);
}

/* Queues a run of `x` on `dev` (work_prepare); *done (when not NULL) its completion event.
 * Releases the queue's order lock the caller holds. */
static kiln_status execute_async(PJRT_Executable *e, PJRT_Device *dev, kiln_executable_t *x,
                                 PJRT_Buffer *const *args, const PJRT_ExecuteOptions *opts,
                                 PJRT_Buffer **outs, PJRT_Event **done) {
  exec_work_t *w = NULL;
  kiln_status s = work_prepare(e, dev, x, args, opts, outs, done != NULL, &w);
  if (!s && done) *done = w->done;
  if (!s) work_launch(w);
  kiln_pjrt_queue_order_unlock(&dev->queue);
  return s;
}

/* ---- Execute on every device of an SPMD executable ---- */

typedef struct spmd_participant {
  PJRT_Executable *e;
  PJRT_Device *dev;
  PJRT_Buffer *const *args;
  const PJRT_ExecuteOptions *opts;
  kiln_spmd_participant_t who;
  PJRT_Buffer **outs;
  kiln_status status;
} spmd_participant_t;

static void *spmd_participant_main(void *arg) {
  spmd_participant_t *p = arg;
  p->status =
      execute_one(p->e, p->dev, p->dev->index, NULL, p->args, p->opts, &p->who, p->outs, NULL);
  if (p->status)
    kiln_spmd_world_abort(p->who.world, p->who.participant, kiln_status_message(p->status));
  return NULL;
}

/* Every participant of `l` in this process concurrently in one world of its own: local
 * participant d (participant first_local + d) on its device with argument list argv[d] (checked
 * already), outputs into outs[d]; across processes the world's other participants run in their
 * processes and meet these over MPI. On error every output is destroyed and the status is the
 * first participant's own failure (before its peers' ABORTED), annotated with the participant. */
/* A world for one execute of `l`: its participants' device ids, the client's deadline. */
static kiln_status world_create(const PJRT_LoadedExecutable *l, kiln_spmd_world_t **out) {
  const PJRT_Executable *e = l->exec;
  int32_t world = e->num_participants;
  int64_t *ids = kiln_try_calloc((size_t)world, sizeof(*ids));
  if (!ids) return KILN_ERR_EXHAUSTED("out of host memory for the ids of %d devices", world);
  for (int32_t i = 0; i < world; i++) ids[i] = l->devices[i]->desc.id;
  kiln_status s = kiln_spmd_world_create(e->num_replicas, e->num_partitions, ids,
                                         e->client->options.collective_timeout_ms, out);
  kiln_free(ids);
  return s;
}

static kiln_status execute_spmd(PJRT_LoadedExecutable *l, PJRT_Buffer *const *const *argv,
                                const PJRT_ExecuteOptions *opts, PJRT_Buffer **const *outs) {
  PJRT_Executable *e = l->exec;
  int32_t n = l->num_local;
  kiln_spmd_world_t *w = NULL;
  kiln_status s = world_create(l, &w);
  if (s) return s;
  if (e->client->num_processes > 1) kiln_spmd_world_set_mpi(w, e->client->mpi, n);
  spmd_participant_t *ps = kiln_try_calloc((size_t)n, sizeof(*ps));
  pthread_t *threads = kiln_try_calloc((size_t)n, sizeof(*threads));
  bool *started = kiln_try_calloc((size_t)n, sizeof(*started));
  if (!ps || !threads || !started) {
    kiln_free(started);
    kiln_free(threads);
    kiln_free(ps);
    kiln_spmd_world_destroy(w);
    return KILN_ERR_EXHAUSTED("out of host memory for %d participants", n);
  }
  for (int32_t i = 0; i < n; i++) {
    ps[i] = (spmd_participant_t){.e = e,
                                 .dev = l->devices[l->first_local + i],
                                 .args = argv[i],
                                 .opts = opts,
                                 .who = {.world = w, .participant = l->first_local + i},
                                 .outs = outs[i]};
    int err = pthread_create(&threads[i], NULL, spmd_participant_main, &ps[i]);
    if (err) {
      ps[i].status = kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                                      "cannot start the thread of participant %d of %d (%s)", i, n,
                                      strerror(err));
      kiln_spmd_world_abort(w, l->first_local + i, kiln_status_message(ps[i].status));
      break;
    }
    started[i] = true;
  }
  for (int32_t i = 0; i < n; i++)
    if (started[i]) pthread_join(threads[i], NULL);
  int32_t bad = -1;
  for (int32_t i = 0; i < n; i++)
    if (ps[i].status && (bad < 0 || (kiln_status_code(ps[bad].status) == KILN_ABORTED &&
                                     kiln_status_code(ps[i].status) != KILN_ABORTED)))
      bad = i;
  if (bad >= 0) {
    kiln_strbuf_t who = {0};
    kiln_spmd_world_describe(w, l->first_local + bad, &who);
    s = kiln_status_annotate(ps[bad].status, "participant %s", kiln_strbuf_cstr(&who));
    kiln_strbuf_free(&who);
    ps[bad].status = NULL;
    for (int32_t i = 0; i < n; i++) {
      kiln_status_free(ps[i].status);
      outputs_destroy(outs[i], e->num_outputs);
    }
  }
  kiln_spmd_world_destroy(w);
  kiln_free(started);
  kiln_free(threads);
  kiln_free(ps);
  return s;
}

/* The client's async_execute; never once PJRT_Client_Destroy was called (executes from then
 * on are the caller's error: they must not start queue threads again). */
static int32_t async_mode(const PJRT_Executable *e) {
  return atomic_load_explicit(&e->client->destroyed, memory_order_relaxed)
             ? KILN_PJRT_ASYNC_NEVER
             : e->client->options.async_execute;
}

/* Sorts the n devices of `l`'s local participants by index into `held` (the order their
 * order locks are taken in, so that executes over overlapping devices never wait on each
 * other's locks in a cycle). */
static void devices_in_order(const PJRT_LoadedExecutable *l, int32_t n, PJRT_Device **held) {
  for (int32_t d = 0; d < n; d++) {
    int32_t j = d;
    for (; j > 0 && held[j - 1]->index > l->devices[l->first_local + d]->index; j--)
      held[j] = held[j - 1];
    held[j] = l->devices[l->first_local + d];
  }
}

/* Every participant of `l` (one process) queued on its device (work_prepare, argument list
 * argv[d], outputs outs[d], completion event events[d] when `events`), all under their
 * devices' order locks, so every device's queue holds the participants of any two SPMD
 * executes in the same order. Each run then waits at the start line for its peers. On an
 * error nothing is queued (as execute_async). */
static kiln_status execute_spmd_async(PJRT_LoadedExecutable *l, PJRT_Buffer *const *const *argv,
                                      const PJRT_ExecuteOptions *opts, PJRT_Buffer **const *outs,
                                      PJRT_Event **events) {
  PJRT_Executable *e = l->exec;
  int32_t n = l->num_local; /* every participant: one process */
  spmd_run_t *r = kiln_try_calloc(1, sizeof(*r));
  exec_work_t **ws = kiln_try_calloc((size_t)n, sizeof(*ws));
  PJRT_Device **held = kiln_try_calloc((size_t)n, sizeof(*held));
  kiln_status s = NULL;
  if (!r || !ws || !held) s = KILN_ERR_EXHAUSTED("out of host memory for a run on %d devices", n);
  if (!s) s = world_create(l, &r->world);
  if (s) {
    kiln_free(r);
    kiln_free(ws);
    kiln_free(held);
    return s;
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->n = n;
  atomic_init(&r->left, n);
  devices_in_order(l, n, held);
  for (int32_t d = 0; d < n; d++) kiln_pjrt_queue_order_lock(&held[d]->queue);
  for (int32_t d = 0; d < n && !s; d++) {
    PJRT_Device *dev = l->devices[l->first_local + d];
    kiln_executable_t *x = atomic_load_explicit(&e->devices[dev->index].loaded,
                                                memory_order_acquire); /* made by the caller */
    s = work_prepare(e, dev, x, argv[d], opts, outs[d], events != NULL, &ws[d]);
    if (s) s = kiln_status_annotate(s, "in argument list %d", d);
    if (!s) {
      ws[d]->spmd = r;
      ws[d]->who = (kiln_spmd_participant_t){.world = r->world, .participant = l->first_local + d};
    }
  }
  if (s) {
    for (int32_t d = 0; d < n; d++)
      if (ws[d]) work_discard(ws[d], outs[d], s);
    for (int32_t d = 0; d < n; d++) kiln_pjrt_queue_order_unlock(&held[d]->queue);
    spmd_run_free(r);
    kiln_free(ws);
    kiln_free(held);
    return s;
  }
  /* Queued in participant order; one that cannot be (no thread) marks the run failed, so
   * every participant, its own run here too, passes the start line at once and fails. */
  for (int32_t d = 0; d < n; d++) {
    if (events) events[d] = ws[d]->done;
    kiln_status qs = kiln_pjrt_queue_push(&ws[d]->dev->queue, &ws[d]->base);
    if (!qs) continue;
    KILN_LOG_W("%s; participant %d of %s fails", kiln_status_message(qs), d, e->name);
    kiln_status_free(qs);
    kiln_mutex_lock(&r->mu);
    r->failed = true;
    pthread_cond_broadcast(&r->cv);
    kiln_mutex_unlock(&r->mu);
    work_run(&ws[d]->base);
  }
  for (int32_t d = 0; d < n; d++) kiln_pjrt_queue_order_unlock(&held[d]->queue);
  kiln_free(ws);
  kiln_free(held);
  return NULL;
}

/* Execute of an executable over several devices: one argument list per addressable device,
 * each argument on its list's device. */
static PJRT_Error *loaded_execute_spmd(PJRT_LoadedExecutable_Execute_Args *args) {
  PJRT_LoadedExecutable *l = args->executable;
  PJRT_Executable *e = l->exec;
  int32_t n = l->num_local;
  if (!e->client)
    return kiln_pjrt_error_make(KILN_FAILED_PRECONDITION,
                                "Execute: the executable's client was destroyed");
  if (KILN_PJRT_HAS(args, execute_device) && args->execute_device)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "Execute: %s runs on %d devices (%d replicas x %d partitions); "
                                "execute_device is for single-device executables",
                                e->name, n, e->num_replicas, e->num_partitions);
  if (args->num_devices != (size_t)n)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "Execute: %s runs on %d devices in this process (%d replicas "
                                "x %d partitions), num_devices is %zu",
                                e->name, n, e->num_replicas, e->num_partitions, args->num_devices);
  if (args->num_args != (size_t)e->num_params)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "Execute: %s takes %d arguments (parameters' leaves) per device, "
                                "num_args is %zu",
                                e->name, e->num_params, args->num_args);
  if ((e->num_params && !args->argument_lists) || !args->output_lists)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "Execute: argument_lists or output_lists is NULL");
  for (int32_t d = 0; d < n; d++) {
    if ((e->num_params && !args->argument_lists[d]) || (e->num_outputs && !args->output_lists[d]))
      return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                  "Execute: the argument or output list of device %d is NULL", d);
    for (int32_t i = 0; i < e->num_params; i++) {
      kiln_status s =
          check_argument(e, i, args->argument_lists[d][i], l->devices[l->first_local + d]);
      if (s)
        return kiln_pjrt_error_from_status(
            kiln_status_annotate(s, "in argument list %d of PJRT_LoadedExecutable_Execute", d));
    }
  }
  /* Every device's code first (lazy, once per device), so that no participant waits at a
   * collective while a peer is still lowering (the world's deadline counts from the run). */
  for (int32_t d = 0; d < n; d++) {
    kiln_executable_t *x = NULL;
    kiln_status s = device_code(e, l->devices[l->first_local + d]->index, &x);
    if (s)
      return kiln_pjrt_error_from_status(
          kiln_status_annotate(s, "in PJRT_LoadedExecutable_Execute"));
  }
  /* Across processes, the first run waits until every process has its code (up to 10 min):
   * one process compiling slower is not a collective's deadline. */
  if (e->client->num_processes > 1 && !atomic_exchange(&l->met, true)) {
    kiln_status s = kiln_mpi_barrier(e->client->mpi, e->fingerprint, 600000);
    if (s)
      return kiln_pjrt_error_from_status(kiln_status_annotate(
          s, "in PJRT_LoadedExecutable_Execute of %s, waiting for the other processes", e->name));
  }
  for (int32_t d = 0; d < n; d++)
    for (int32_t j = 0; j < e->num_outputs; j++) args->output_lists[d][j] = NULL;
  PJRT_Buffer *none = NULL;
  PJRT_Buffer *const **argv = kiln_try_calloc((size_t)n, sizeof(*argv));
  PJRT_Buffer *none_list[1] = {NULL};
  PJRT_Buffer **outs_none = none_list;
  PJRT_Buffer ***outv = kiln_try_calloc((size_t)n, sizeof(*outv));
  kiln_status s = NULL;
  if (!argv || !outv)
    s = KILN_ERR_EXHAUSTED("out of host memory for the argument lists of %d devices", n);
  for (int32_t d = 0; d < n && !s; d++) {
    argv[d] = e->num_params ? args->argument_lists[d] : &none;
    outv[d] = e->num_outputs ? args->output_lists[d] : outs_none;
  }
  /* Queued (one process; as single-device executes, an argument to relay out keeps it
   * here). */
  int32_t mode = async_mode(e);
  bool queue = !s && mode != KILN_PJRT_ASYNC_NEVER && e->client->num_processes == 1;
  for (int32_t d = 0; d < n && queue; d++)
    for (int32_t i = 0; i < e->num_params && queue; i++) queue = !needs_relayout(e, i, argv[d][i]);
  if (queue) {
    s = execute_spmd_async(l, argv, args->options, outv, args->device_complete_events);
    kiln_free(argv);
    kiln_free(outv);
    return s ? kiln_pjrt_error_from_status(
                   kiln_status_annotate(s, "in PJRT_LoadedExecutable_Execute"))
             : NULL;
  }
  /* After what the devices' queues hold, and with nothing queued meanwhile (their order
   * locks, taken in device order), so no queued run reads a buffer this one donates. */
  PJRT_Device **held = NULL;
  if (!s && mode != KILN_PJRT_ASYNC_NEVER) {
    held = kiln_try_calloc((size_t)n, sizeof(*held));
    if (!held) s = KILN_ERR_EXHAUSTED("out of host memory for the devices of %d participants", n);
    if (held) devices_in_order(l, n, held);
    for (int32_t d = 0; d < n && !s; d++) {
      kiln_pjrt_queue_order_lock(&held[d]->queue);
      kiln_pjrt_queue_drain(&held[d]->queue);
    }
  }
  if (!s) s = execute_spmd(l, argv, args->options, outv);
  for (int32_t d = 0; held && d < n; d++) kiln_pjrt_queue_order_unlock(&held[d]->queue);
  kiln_free(held);
  kiln_free(argv);
  kiln_free(outv);
  if (s)
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in PJRT_LoadedExecutable_Execute"));
  /* The runs are synchronous: every device's completion event is ready now. */
  if (args->device_complete_events)
    for (int32_t d = 0; d < n; d++) args->device_complete_events[d] = kiln_pjrt_event_ready(NULL);
  return NULL;
}

/* One execute on one device: queued (execute_async) or run here (execute_one), as the
 * client's async_execute says: `auto` runs here a cheap run (device_code) on a device with
 * nothing queued and no argument still being filled, and queues every other; `never` runs
 * every one here. Runs here also: an execute with an argument to relay out — after what is queued
 * (an ExecuteContext's user data is copied for a queued run: PJRT has the caller keep the context's
 * data valid until the execution ends). Sets *done (when not NULL) to the completion event. */
static kiln_status run_or_queue(PJRT_Executable *e, PJRT_Device *dev, int32_t di,
                                PJRT_Buffer *const *argv, const PJRT_ExecuteOptions *opts,
                                PJRT_Buffer **outs, PJRT_Event **done) {
  int32_t mode = async_mode(e);
  kiln_executable_t *x = NULL;
  kiln_pjrt_queue_t *order = NULL;
  if (mode != KILN_PJRT_ASYNC_NEVER) {
    bool here = false, donates = false;
    for (int32_t i = 0; i < e->num_params; i++) {
      KILN_RETURN_IF_ERROR_PLAIN(check_argument(e, i, argv[i], dev));
      here = here || needs_relayout(e, i, argv[i]);
      donates = donates || e->param_output[i] >= 0;
    }
    KILN_RETURN_IF_ERROR_PLAIN(device_code(e, di, &x));
    kiln_pjrt_queue_t *q = &dev->queue;
    bool idle = kiln_pjrt_queue_idle(q);
    bool queue = !here && (mode == KILN_PJRT_ASYNC_ALWAYS || !idle || !e->devices[di].cheap);
    /* A cheap run whose argument is still being filled (another device's run, a transfer, an
     * alias buffer) would wait here for it: it waits on the queue instead. */
    for (int32_t i = 0; i < e->num_params && !here && !queue; i++)
      queue = kiln_pjrt_buffer_is_pending(argv[i]);
    /* In the queue's order from here until the arguments are taken: execute_async, or a run
     * here that donates (a run queued before must not read a buffer it donates; a run here
     * that only reads needs no order against the queue, whose runs write only their own
     * outputs and what they were donated). */
    if (queue || donates) {
      kiln_pjrt_queue_order_lock(q);
      order = donates ? q : NULL;
      idle = kiln_pjrt_queue_idle(q);
      queue = queue || (!here && !idle);
      if (queue) return execute_async(e, dev, x, argv, opts, outs, done);
    }
    if (!idle) kiln_pjrt_queue_drain(q); /* runs here after what is queued */
  }
  KILN_RETURN_IF_ERROR_PLAIN(execute_one(e, dev, di, x, argv, opts, NULL, outs, order));
  /* The run is synchronous: its completion event is ready now. */
  if (done) *done = kiln_pjrt_event_ready(NULL);
  return NULL;
}

static PJRT_Error *loaded_execute(PJRT_LoadedExecutable_Execute_Args *args) {
  KILN_PJRT_ARGS("PJRT_LoadedExecutable_Execute", args, device_complete_events);
  PJRT_LoadedExecutable *l = args->executable;
  if (!l) return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "Execute: executable is NULL");
  if (atomic_load(&l->deleted))
    return kiln_pjrt_error_make(KILN_FAILED_PRECONDITION, "Execute: executable %s was deleted",
                                l->exec->name);
  PJRT_Executable *e = l->exec;
  if (e->num_participants > 1) return loaded_execute_spmd(args);
  PJRT_Device *dev = l->device;
  if (KILN_PJRT_HAS(args, execute_device) && args->execute_device) dev = args->execute_device;
  int32_t di = device_index_of(e, dev);
  if (di < 0)
    return kiln_pjrt_error_make(e->client ? KILN_INVALID_ARGUMENT : KILN_FAILED_PRECONDITION,
                                e->client ? "Execute: execute_device is not a device of the "
                                            "executable's client"
                                          : "Execute: the executable's client was destroyed");
  if (args->num_devices != 1)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "Execute: %s runs on 1 device, num_devices is %zu", e->name,
                                args->num_devices);
  if (args->num_args != (size_t)e->num_params)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "Execute: %s takes %d arguments (parameters' leaves), num_args "
                                "is %zu",
                                e->name, e->num_params, args->num_args);
  if ((e->num_params && (!args->argument_lists || !args->argument_lists[0])) ||
      !args->output_lists || (e->num_outputs && !args->output_lists[0]))
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "Execute: argument_lists or output_lists is NULL");
  PJRT_Buffer *none = NULL;
  PJRT_Buffer *const *argv = e->num_params ? args->argument_lists[0] : &none;
  PJRT_Buffer **outs = args->output_lists[0];
  for (int32_t j = 0; j < e->num_outputs; j++) outs[j] = NULL;
  kiln_status s =
      run_or_queue(e, dev, di, argv, args->options, outs,
                   args->device_complete_events ? &args->device_complete_events[0] : NULL);
  if (s)
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in PJRT_LoadedExecutable_Execute"));
  return NULL;
}

/* ---- metadata entries ---- */

#define EXEC_ARG(fn, args, member)  \
  KILN_PJRT_ARGS(fn, args, member); \
  if (!(args)->executable)          \
  return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "%s: executable is NULL", fn)

static PJRT_Error *exec_destroy(PJRT_Executable_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_Executable_Destroy", args, executable);
  kiln_pjrt_executable_unref(args->executable);
  return NULL;
}

static PJRT_Error *exec_name(PJRT_Executable_Name_Args *args) {
  EXEC_ARG("PJRT_Executable_Name", args, executable_name_size);
  args->executable_name = args->executable->name;
  args->executable_name_size = strlen(args->executable->name);
  return NULL;
}

static PJRT_Error *exec_num_replicas(PJRT_Executable_NumReplicas_Args *args) {
  EXEC_ARG("PJRT_Executable_NumReplicas", args, num_replicas);
  args->num_replicas = (size_t)args->executable->num_replicas;
  return NULL;
}

static PJRT_Error *exec_num_partitions(PJRT_Executable_NumPartitions_Args *args) {
  EXEC_ARG("PJRT_Executable_NumPartitions", args, num_partitions);
  args->num_partitions = (size_t)args->executable->num_partitions;
  return NULL;
}

static PJRT_Error *exec_num_outputs(PJRT_Executable_NumOutputs_Args *args) {
  EXEC_ARG("PJRT_Executable_NumOutputs", args, num_outputs);
  args->num_outputs = (size_t)args->executable->num_outputs;
  return NULL;
}

static PJRT_Error *exec_output_types(PJRT_Executable_OutputElementTypes_Args *args) {
  EXEC_ARG("PJRT_Executable_OutputElementTypes", args, num_output_types);
  args->output_types = args->executable->output_types;
  args->num_output_types = (size_t)args->executable->num_outputs;
  return NULL;
}

static PJRT_Error *exec_output_dims(PJRT_Executable_OutputDimensions_Args *args) {
  EXEC_ARG("PJRT_Executable_OutputDimensions", args, dim_sizes);
  args->num_outputs = (size_t)args->executable->num_outputs;
  args->dims = args->executable->output_dims;
  args->dim_sizes = args->executable->output_dim_sizes;
  return NULL;
}

static PJRT_Error *exec_output_memory_kinds(PJRT_Executable_OutputMemoryKinds_Args *args) {
  EXEC_ARG("PJRT_Executable_OutputMemoryKinds", args, memory_kind_sizes);
  args->num_outputs = (size_t)args->executable->num_outputs;
  args->memory_kinds = args->executable->output_memory_kinds;
  args->memory_kind_sizes = args->executable->output_memory_kind_sizes;
  return NULL;
}

/* Per parameter leaf (what Execute takes as arguments): kiln puts every one in device
 * memory. */
static PJRT_Error *exec_param_memory_kinds(PJRT_Executable_ParameterMemoryKinds_Args *args) {
  EXEC_ARG("PJRT_Executable_ParameterMemoryKinds", args, memory_kind_sizes);
  args->num_parameters = (size_t)args->executable->num_params;
  args->memory_kinds = args->executable->param_memory_kinds;
  args->memory_kind_sizes = args->executable->param_memory_kind_sizes;
  return NULL;
}

static PJRT_Error *exec_fingerprint(PJRT_Executable_Fingerprint_Args *args) {
  EXEC_ARG("PJRT_Executable_Fingerprint", args, executable_fingerprint_size);
  args->executable_fingerprint = args->executable->fingerprint;
  args->executable_fingerprint_size = strlen(args->executable->fingerprint);
  return NULL;
}

static PJRT_Error *loaded_fingerprint(PJRT_LoadedExecutable_Fingerprint_Args *args) {
  EXEC_ARG("PJRT_LoadedExecutable_Fingerprint", args, executable_fingerprint_size);
  args->executable_fingerprint = args->executable->exec->fingerprint;
  args->executable_fingerprint_size = strlen(args->executable->exec->fingerprint);
  return NULL;
}

static PJRT_Error *exec_code_size(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args *args) {
  EXEC_ARG("PJRT_Executable_SizeOfGeneratedCodeInBytes", args, size_in_bytes);
  args->size_in_bytes = atomic_load(&args->executable->code_bytes);
  return NULL;
}

/* PJRT_Program's two-call protocol: with code NULL, the size; then the bytes into the
 * caller's buffer of that size. */
static PJRT_Error *exec_optimized_program(PJRT_Executable_OptimizedProgram_Args *args) {
  EXEC_ARG("PJRT_Executable_OptimizedProgram", args, program);
  PJRT_Program *p = args->program;
  if (!p || p->struct_size < offsetof(PJRT_Program, format_size) + sizeof(size_t))
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Executable_OptimizedProgram: program is NULL or too small");
  const PJRT_Executable *e = args->executable;
  p->format = "hlo";
  p->format_size = 3;
  if (!p->code) {
    p->code_size = e->optimized_text_len;
    return NULL;
  }
  if (p->code_size < e->optimized_text_len)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Executable_OptimizedProgram: code_size %zu is smaller than "
                                "the program's %zu bytes (call with code NULL for the size)",
                                p->code_size, e->optimized_text_len);
  memcpy(p->code, e->optimized_text, e->optimized_text_len);
  p->code_size = e->optimized_text_len;
  return NULL;
}

static PJRT_Error *exec_memory_stats(PJRT_Executable_GetCompiledMemoryStats_Args *args) {
  EXEC_ARG("PJRT_Executable_GetCompiledMemoryStats", args, peak_unpadded_heap_bytes);
  PJRT_Executable *e = args->executable;
  kiln_buffer_assignment_t *ba = NULL;
  kiln_mutex_lock(&e->lower_mu); /* the module is read by lowering too */
  kiln_status s = kiln_buffer_assignment_run(e->optimized, NULL, &ba);
  kiln_mutex_unlock(&e->lower_mu);
  if (s) return kiln_pjrt_error_from_status(s);
  int64_t arg = 0, out = 0, alias = 0;
  for (int32_t i = 0; i < e->num_params; i++) {
    arg += (int64_t)e->params[i].bytes;
    if (e->param_output[i] >= 0) alias += (int64_t)e->params[i].bytes;
  }
  for (int32_t j = 0; j < e->num_outputs; j++) out += (int64_t)e->outputs[j].bytes;
  int64_t temp = ba->stats.temp_bytes;
  kiln_buffer_assignment_free(ba);
  int64_t code = atomic_load(&e->code_bytes);
  bool host = e->target == KILN_TARGET_HOST;
  args->generated_code_size_in_bytes = host ? 0 : code;
  args->argument_size_in_bytes = host ? 0 : arg;
  args->output_size_in_bytes = host ? 0 : out;
  args->alias_size_in_bytes = host ? 0 : alias;
  args->temp_size_in_bytes = host ? 0 : temp;
  args->host_generated_code_size_in_bytes = host ? code : 0;
  args->host_argument_size_in_bytes = host ? arg : 0;
  args->host_output_size_in_bytes = host ? out : 0;
  args->host_alias_size_in_bytes = host ? alias : 0;
  args->host_temp_size_in_bytes = host ? temp : 0;
  args->peak_memory_in_bytes = arg + out - alias + temp;
  args->total_size_in_bytes = arg + out - alias + temp + code;
  args->total_allocation_bytes = arg + out - alias + temp;
  args->indefinite_allocations = 0;
  args->peak_unpadded_heap_bytes = 0;
  return NULL;
}

/* Cost analysis: kiln has no cost model at this boundary yet; it reports what it knows about
 * the executable and the client's compile cache (which tests and tools read to see hits), and
 * what the first loaded device's thunk sequence holds (kiln.kernels, kiln.gemms,
 * kiln.command_buffers, kiln.thunks: static counts, nested sequences included; -1 until a
 * device executed it, since kernels are made on the first execute). */
static PJRT_Error *exec_cost_analysis(PJRT_Executable_GetCostAnalysis_Args *args) {
  EXEC_ARG("PJRT_Executable_GetCostAnalysis", args, properties);
  PJRT_Executable *e = args->executable;
  kiln_pjrt_compile_cache_counters_t c =
      kiln_pjrt_compile_cache_counters(e->client ? e->client->compile_cache : NULL);
  int64_t kinds[KILN_THUNK_NUM_KINDS] = {0}, thunks = -1;
  kiln_mutex_lock(&e->lower_mu);
  for (int32_t i = 0; i < e->num_devices && thunks < 0; i++) {
    kiln_executable_t *x = atomic_load_explicit(&e->devices[i].loaded, memory_order_acquire);
    if (!x) continue;
    kiln_thunk_seq_count_kinds(&kiln_executable_desc(x)->thunks, kinds);
    thunks = 0;
    for (int k = 0; k < KILN_THUNK_NUM_KINDS; k++) thunks += kinds[k];
  }
  kiln_mutex_unlock(&e->lower_mu);
  bool lowered = thunks >= 0;
  struct {
    const char *name;
    int64_t v;
  } vals[] = {
      {"kiln.compile_cache.memory_hits", c.memory_hits},
      {"kiln.compile_cache.memory_misses", c.memory_misses},
      {"kiln.compile_cache.module_disk_hits", c.module_disk_hits},
      {"kiln.compile_cache.module_disk_misses", c.module_disk_misses},
      {"kiln.compile_cache.module_disk_rejected", c.module_disk_rejected},
      {"kiln.compile_cache.object_disk_hits", c.object_disk_hits},
      {"kiln.compile_cache.object_disk_misses", c.object_disk_misses},
      {"kiln.compile_cache.object_disk_rejected", c.object_disk_rejected},
      {"kiln.compile_cache.executable_disk_hits", c.executable_disk_hits},
      {"kiln.compile_cache.executable_disk_misses", c.executable_disk_misses},
      {"kiln.compile_cache.executable_disk_rejected", c.executable_disk_rejected},
      {"kiln.passes_us", (int64_t)(e->passes_ms * 1000.0)},
      {"kiln.executable.loads", atomic_load(&e->loads)},
      {"kiln.executable.cache_loads", atomic_load(&e->cache_loads)},
      {"kiln.kernels", lowered ? kinds[KILN_THUNK_KERNEL] : -1},
      {"kiln.gemms", lowered ? kinds[KILN_THUNK_GEMM] : -1},
      {"kiln.command_buffers", lowered ? kinds[KILN_THUNK_COMMAND_BUFFER] : -1},
      {"kiln.thunks", thunks},
  };
  size_t n = sizeof(vals) / sizeof(vals[0]);
  kiln_mutex_lock(&e->props_mu);
  if (!e->props) {
    e->props = kiln_calloc(n, sizeof(*e->props));
    for (size_t i = 0; i < n; i++) e->props[i].name = kiln_strdup(vals[i].name);
    e->num_props = n;
  }
  /* Values as of this call (the array is the executable's; a later call refreshes it). */
  for (size_t i = 0; i < n; i++) {
    PJRT_NamedValue *v = &e->props[i];
    v->struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v->name_size = strlen(v->name);
    v->type = PJRT_NamedValue_kInt64;
    v->int64_value = vals[i].v;
    v->value_size = 1;
  }
  kiln_mutex_unlock(&e->props_mu);
  args->num_properties = n;
  args->properties = e->props;
  return NULL;
}

typedef struct kiln_pjrt_blob {
  char *data;
  size_t len;
} kiln_pjrt_blob_t;

static void compile_options_deleter(PJRT_SerializedCompileOptions *p) {
  kiln_pjrt_blob_t *b = (kiln_pjrt_blob_t *)p;
  if (!b) return;
  kiln_free(b->data);
  kiln_free(b);
}

static PJRT_Error *exec_compile_options(PJRT_Executable_GetCompileOptions_Args *args) {
  EXEC_ARG("PJRT_Executable_GetCompileOptions", args, serialized_compile_options_deleter);
  const PJRT_Executable *e = args->executable;
  kiln_pjrt_blob_t *b = kiln_calloc(1, sizeof(*b));
  b->data = kiln_malloc(e->compile_options_len + 1);
  memcpy(b->data, e->compile_options, e->compile_options_len);
  b->len = e->compile_options_len;
  args->serialized_bytes = b->data;
  args->serialized_bytes_size = b->len;
  args->serialized_compile_options = (PJRT_SerializedCompileOptions *)b;
  args->serialized_compile_options_deleter = compile_options_deleter;
  return NULL;
}

/* ---- loaded executables ---- */

static PJRT_Error *loaded_destroy(PJRT_LoadedExecutable_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_LoadedExecutable_Destroy", args, executable);
  PJRT_LoadedExecutable *l = args->executable;
  if (!l) return NULL;
  kiln_pjrt_executable_unref(l->exec);
  kiln_free(l->devices);
  kiln_free(l->logical_ids);
  kiln_free(l);
  return NULL;
}

static PJRT_Error *loaded_get_executable(PJRT_LoadedExecutable_GetExecutable_Args *args) {
  KILN_PJRT_ARGS("PJRT_LoadedExecutable_GetExecutable", args, executable);
  if (!args->loaded_executable)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_LoadedExecutable_GetExecutable: loaded_executable is NULL");
  kiln_pjrt_executable_ref(args->loaded_executable->exec);
  args->executable = args->loaded_executable->exec;
  return NULL;
}

static PJRT_Error *loaded_devices(PJRT_LoadedExecutable_AddressableDevices_Args *args) {
  EXEC_ARG("PJRT_LoadedExecutable_AddressableDevices", args, num_addressable_devices);
  args->addressable_devices = args->executable->devices + args->executable->first_local;
  args->num_addressable_devices = (size_t)args->executable->num_local;
  return NULL;
}

/* Each addressable device's (replica, partition), in AddressableDevices' order. */
static PJRT_Error *loaded_logical_ids(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args *args) {
  EXEC_ARG("PJRT_LoadedExecutable_AddressableDeviceLogicalIds", args,
           num_addressable_device_logical_ids);
  args->addressable_device_logical_ids =
      args->executable->logical_ids + args->executable->first_local;
  args->num_addressable_device_logical_ids = (size_t)args->executable->num_local;
  return NULL;
}

static PJRT_Error *loaded_delete(PJRT_LoadedExecutable_Delete_Args *args) {
  EXEC_ARG("PJRT_LoadedExecutable_Delete", args, executable);
  atomic_store(&args->executable->deleted, true);
  return NULL;
}

static PJRT_Error *loaded_is_deleted(PJRT_LoadedExecutable_IsDeleted_Args *args) {
  EXEC_ARG("PJRT_LoadedExecutable_IsDeleted", args, is_deleted);
  args->is_deleted = atomic_load(&args->executable->deleted);
  return NULL;
}

static void put_varint(kiln_strbuf_t *b, uint64_t u) {
  do {
    char c = (char)((u & 0x7f) | (u > 0x7f ? 0x80 : 0));
    kiln_strbuf_append_n(b, &c, 1);
    u >>= 7;
  } while (u);
}

/* The device assignment, as a serialized xla.DeviceAssignmentProto: replica_count,
 * computation_count (partitions), then per computation its replicas' device ids. */
static PJRT_Error *loaded_device_assignment(PJRT_LoadedExecutable_GetDeviceAssignment_Args *args) {
  EXEC_ARG("PJRT_LoadedExecutable_GetDeviceAssignment", args, serialized_device_assignment_deleter);
  const PJRT_LoadedExecutable *l = args->executable;
  int32_t reps = l->exec->num_replicas, parts = l->exec->num_partitions;
  kiln_strbuf_t out = {0}, inner = {0}, ids = {0};
  put_varint(&out, 0x08); /* replica_count (1), varint */
  put_varint(&out, (uint64_t)reps);
  put_varint(&out, 0x10); /* computation_count (2), varint */
  put_varint(&out, (uint64_t)parts);
  for (int32_t c = 0; c < parts; c++) {
    kiln_strbuf_free(&ids);
    for (int32_t r = 0; r < reps; r++)
      put_varint(&ids, (uint64_t)l->devices[r * parts + c]->desc.id);
    kiln_strbuf_free(&inner);
    put_varint(&inner, 0x0a); /* ComputationDevice.replica_device_ids (1), packed */
    put_varint(&inner, ids.len);
    kiln_strbuf_append_n(&inner, kiln_strbuf_cstr(&ids), ids.len);
    put_varint(&out, 0x1a); /* computation_devices (3), message */
    put_varint(&out, inner.len);
    kiln_strbuf_append_n(&out, kiln_strbuf_cstr(&inner), inner.len);
  }
  size_t n = out.len;
  const char *buf = kiln_strbuf_cstr(&out);
  kiln_pjrt_blob_t *b = kiln_calloc(1, sizeof(*b));
  b->data = kiln_malloc(n);
  memcpy(b->data, buf, n);
  b->len = n;
  kiln_strbuf_free(&out);
  kiln_strbuf_free(&inner);
  kiln_strbuf_free(&ids);
  args->serialized_bytes = b->data;
  args->serialized_bytes_size = n;
  args->serialized_device_assignment = (PJRT_DeviceAssignmentSerialized *)b;
  args->serialized_device_assignment_deleter =
      (void (*)(PJRT_DeviceAssignmentSerialized *))compile_options_deleter;
  return NULL;
}

void kiln_pjrt_fill_executable(PJRT_Api *api) {
  api->PJRT_Executable_Destroy = exec_destroy;
  api->PJRT_Executable_Name = exec_name;
  api->PJRT_Executable_NumReplicas = exec_num_replicas;
  api->PJRT_Executable_NumPartitions = exec_num_partitions;
  api->PJRT_Executable_NumOutputs = exec_num_outputs;
  api->PJRT_Executable_OutputElementTypes = exec_output_types;
  api->PJRT_Executable_OutputDimensions = exec_output_dims;
  api->PJRT_Executable_OutputMemoryKinds = exec_output_memory_kinds;
  api->PJRT_Executable_ParameterMemoryKinds = exec_param_memory_kinds;
  api->PJRT_Executable_Fingerprint = exec_fingerprint;
  api->PJRT_Executable_SizeOfGeneratedCodeInBytes = exec_code_size;
  api->PJRT_Executable_OptimizedProgram = exec_optimized_program;
  api->PJRT_Executable_GetCompiledMemoryStats = exec_memory_stats;
  api->PJRT_Executable_GetCostAnalysis = exec_cost_analysis;
  api->PJRT_Executable_GetCompileOptions = exec_compile_options;
  api->PJRT_LoadedExecutable_Destroy = loaded_destroy;
  api->PJRT_LoadedExecutable_GetExecutable = loaded_get_executable;
  api->PJRT_LoadedExecutable_AddressableDevices = loaded_devices;
  api->PJRT_LoadedExecutable_AddressableDeviceLogicalIds = loaded_logical_ids;
  api->PJRT_LoadedExecutable_Delete = loaded_delete;
  api->PJRT_LoadedExecutable_IsDeleted = loaded_is_deleted;
  api->PJRT_LoadedExecutable_Execute = loaded_execute;
  api->PJRT_LoadedExecutable_Fingerprint = loaded_fingerprint;
  api->PJRT_LoadedExecutable_GetDeviceAssignment = loaded_device_assignment;
}
