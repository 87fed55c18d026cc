/* Thunk construction, the three stages, and dumps (thunk.h). */
#include "runtime/thunk.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "runtime/collective_thunk.h"
#include "runtime/command_buffer_thunk.h"
#include "runtime/spmd.h"
#include "runtime/thunk_internal.h"

const char *kiln_thunk_kind_name(kiln_thunk_kind_t k) {
  switch (k) {
    case KILN_THUNK_KERNEL:
      return "kernel";
    case KILN_THUNK_COPY:
      return "copy";
    case KILN_THUNK_MEMSET:
      return "memset";
    case KILN_THUNK_GEMM:
      return "gemm";
    case KILN_THUNK_CUSTOM_CALL:
      return "custom-call";
    case KILN_THUNK_WHILE:
      return "while";
    case KILN_THUNK_CONDITIONAL:
      return "conditional";
    case KILN_THUNK_SEQUENTIAL:
      return "sequential";
    case KILN_THUNK_COMMAND_BUFFER:
      return "command-buffer";
    case KILN_THUNK_COLLECTIVE:
      return "collective";
  }
  return "?";
}

static const char *copy_kind_name(kiln_copy_kind_t k) {
  return k == KILN_COPY_D2D ? "d2d" : k == KILN_COPY_H2D ? "h2d" : "d2h";
}

/* ---- sequences ----------------------------------------------------------------------------- */

void kiln_thunk_seq_init(kiln_thunk_seq_t *s) {
  memset(s, 0, sizeof(*s));
}

void kiln_thunk_seq_push(kiln_thunk_seq_t *s, kiln_thunk_t *t) {
  if (s->len == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 8;
    s->items = kiln_realloc(s->items, s->cap * sizeof(kiln_thunk_t *));
  }
  s->items[s->len++] = t;
}

void kiln_thunk_seq_free(kiln_thunk_seq_t *s) {
  for (size_t i = 0; i < s->len; i++) kiln_thunk_destroy(s->items[i]);
  kiln_free(s->items);
  memset(s, 0, sizeof(*s));
}

/* Moves *src into a new value and leaves *src empty. */
static kiln_thunk_seq_t seq_take(kiln_thunk_seq_t *src) {
  kiln_thunk_seq_t s = {0};
  if (src) {
    s = *src;
    memset(src, 0, sizeof(*src));
  }
  return s;
}

/* ---- construction ----------------------------------------------------------------------- */

static kiln_thunk_t *thunk_new(kiln_thunk_kind_t kind, const char *name) {
  kiln_thunk_t *t = kiln_calloc(1, sizeof(*t));
  t->kind = kind;
  t->name = kiln_strdup(name ? name : kiln_thunk_kind_name(kind));
  return t;
}

static kiln_slice_t *slices_dup(const kiln_slice_t *s, int n) {
  if (n <= 0) return NULL;
  kiln_slice_t *d = kiln_malloc((size_t)n * sizeof(*d));
  memcpy(d, s, (size_t)n * sizeof(*d));
  return d;
}

kiln_thunk_t *kiln_thunk_kernel_create(const char *name, kiln_device_module_t *module,
                                       const char *kernel_name, const kiln_launch_dims_t *dims,
                                       const kiln_kernel_arg_t *args, int num_args) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_KERNEL, name);
  t->u.kernel.module = module;
  t->u.kernel.module_index = -1;
  t->u.kernel.kernel_name = kiln_strdup(kernel_name ? kernel_name : "");
  if (dims) t->u.kernel.dims = *dims;
  t->u.kernel.num_args = num_args > 0 ? num_args : 0;
  if (num_args > 0) {
    t->u.kernel.args = kiln_malloc((size_t)num_args * sizeof(kiln_kernel_arg_t));
    memcpy(t->u.kernel.args, args, (size_t)num_args * sizeof(kiln_kernel_arg_t));
  }
  return t;
}

kiln_thunk_t *kiln_thunk_copy_create(const char *name, kiln_copy_kind_t dir, kiln_slice_t src,
                                     kiln_slice_t dst, void *host, int64_t size) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_COPY, name);
  t->u.copy.dir = dir;
  t->u.copy.src = src;
  t->u.copy.dst = dst;
  t->u.copy.host = host;
  t->u.copy.size = size;
  return t;
}

kiln_thunk_t *kiln_thunk_memset_create(const char *name, kiln_slice_t dst, uint32_t pattern,
                                       int elem_size) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_MEMSET, name);
  t->u.memset.dst = dst;
  t->u.memset.pattern = pattern;
  t->u.memset.elem_size = elem_size;
  return t;
}

kiln_thunk_t *kiln_thunk_gemm_create(const char *name, const kiln_gemm_desc_t *desc, kiln_slice_t a,
                                     kiln_slice_t b, kiln_slice_t c) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_GEMM, name);
  if (desc) t->u.gemm.desc = *desc;
  t->u.gemm.a = a;
  t->u.gemm.b = b;
  t->u.gemm.c = c;
  return t;
}

void kiln_thunk_gemm_set_bias(kiln_thunk_t *t, kiln_slice_t bias) {
  if (!t || t->kind != KILN_THUNK_GEMM) return;
  t->u.gemm.has_bias = true;
  t->u.gemm.bias = bias;
}

kiln_thunk_t *kiln_thunk_custom_call_create(const char *name, const char *target,
                                            kiln_custom_call_fn fn, void *ctx,
                                            const kiln_slice_t *operands, int num_operands,
                                            const kiln_slice_t *results, int num_results,
                                            bool graph_compatible) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_CUSTOM_CALL, name);
  t->u.custom.fn = fn;
  t->u.custom.ctx = ctx;
  t->u.custom.target = kiln_strdup(target ? target : "");
  t->u.custom.num_operands = num_operands > 0 ? num_operands : 0;
  t->u.custom.num_results = num_results > 0 ? num_results : 0;
  t->u.custom.operands = slices_dup(operands, num_operands);
  t->u.custom.results = slices_dup(results, num_results);
  t->u.custom.graph_compatible = graph_compatible;
  return t;
}

void kiln_thunk_custom_call_set_init(kiln_thunk_t *t, kiln_custom_call_init_fn init) {
  if (t && t->kind == KILN_THUNK_CUSTOM_CALL) t->u.custom.init = init;
}

void kiln_thunk_custom_call_set_run(kiln_thunk_t *t, kiln_custom_call_run_fn fn) {
  if (t && t->kind == KILN_THUNK_CUSTOM_CALL) t->u.custom.run = fn;
}

void kiln_thunk_custom_call_set_recipe(kiln_thunk_t *t, const void *data, size_t len) {
  if (!t || t->kind != KILN_THUNK_CUSTOM_CALL) return;
  kiln_free(t->u.custom.recipe);
  t->u.custom.recipe = kiln_malloc(len ? len : 1);
  if (len) memcpy(t->u.custom.recipe, data, len);
  t->u.custom.recipe_len = len;
}

void kiln_thunk_custom_call_set_command(kiln_thunk_t *t, kiln_custom_call_run_fn in_stream) {
  if (!t || t->kind != KILN_THUNK_CUSTOM_CALL) return;
  kiln_cmd_custom_call_t *c = &t->u.custom.cmd;
  c->fn = in_stream;
  c->ctx = t->u.custom.ctx;
  c->uid = in_stream ? kiln_cmd_custom_call_next_uid() : 0;
  c->name = t->name;
  c->target = t->u.custom.target;
  c->num_operands = t->u.custom.num_operands;
}

kiln_thunk_t *kiln_thunk_while_create(const char *name, kiln_thunk_seq_t *cond, kiln_slice_t pred,
                                      kiln_thunk_seq_t *body, int64_t max_iterations) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_WHILE, name);
  t->u.loop.cond = seq_take(cond);
  t->u.loop.body = seq_take(body);
  t->u.loop.pred = pred;
  t->u.loop.max_iterations = max_iterations;
  atomic_init(&t->u.loop.last_trip_count, 0);
  return t;
}

kiln_thunk_t *kiln_thunk_conditional_create(const char *name, kiln_slice_t index,
                                            bool index_is_pred, kiln_thunk_seq_t *branches,
                                            int num_branches) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_CONDITIONAL, name);
  t->u.cond.index = index;
  t->u.cond.index_is_pred = index_is_pred;
  t->u.cond.num_branches = num_branches > 0 ? num_branches : 0;
  atomic_init(&t->u.cond.last_branch, -1);
  if (num_branches > 0) {
    t->u.cond.branches = kiln_calloc((size_t)num_branches, sizeof(kiln_thunk_seq_t));
    for (int i = 0; i < num_branches; i++) t->u.cond.branches[i] = seq_take(&branches[i]);
  }
  return t;
}

kiln_thunk_t *kiln_thunk_sequential_create(const char *name, kiln_thunk_seq_t *seq) {
  kiln_thunk_t *t = thunk_new(KILN_THUNK_SEQUENTIAL, name);
  t->u.sequential.seq = seq_take(seq);
  return t;
}

/* ---- accessors ---------------------------------------------------------------------------- */

kiln_thunk_kind_t kiln_thunk_kind(const kiln_thunk_t *t) {
  return t->kind;
}

void kiln_thunk_kernel_set_module_index(kiln_thunk_t *t, int32_t module_index) {
  if (t && t->kind == KILN_THUNK_KERNEL) t->u.kernel.module_index = module_index;
}

void kiln_thunk_while_set_max_iterations(kiln_thunk_t *t, int64_t max_iterations) {
  if (t && t->kind == KILN_THUNK_WHILE) t->u.loop.max_iterations = max_iterations;
}

int64_t kiln_thunk_while_last_trip_count(const kiln_thunk_t *t) {
  if (!t || t->kind != KILN_THUNK_WHILE) return 0;
  return atomic_load_explicit(&t->u.loop.last_trip_count, memory_order_relaxed);
}

int kiln_thunk_conditional_last_branch(const kiln_thunk_t *t) {
  if (!t || t->kind != KILN_THUNK_CONDITIONAL) return -1;
  return atomic_load_explicit(&t->u.cond.last_branch, memory_order_relaxed);
}

void kiln_thunk_release(kiln_thunk_t *t) {
  if (!t) return;
  switch (t->kind) {
    case KILN_THUNK_WHILE:
      if (t->u.loop.host_pred) kiln_device_host_free(t->u.loop.host_dev, t->u.loop.host_pred);
      t->u.loop.host_pred = NULL;
      kiln_thunk_seq_release(&t->u.loop.cond);
      kiln_thunk_seq_release(&t->u.loop.body);
      break;
    case KILN_THUNK_CONDITIONAL:
      if (t->u.cond.host_index) kiln_device_host_free(t->u.cond.host_dev, t->u.cond.host_index);
      t->u.cond.host_index = NULL;
      for (int i = 0; i < t->u.cond.num_branches; i++)
        kiln_thunk_seq_release(&t->u.cond.branches[i]);
      break;
    case KILN_THUNK_SEQUENTIAL:
      kiln_thunk_seq_release(&t->u.sequential.seq);
      break;
    case KILN_THUNK_COMMAND_BUFFER:
      kiln_thunk_seq_release(&t->u.cmdbuf.seq);
      break;
    default:
      break;
  }
}

void kiln_thunk_seq_release(kiln_thunk_seq_t *s) {
  for (size_t i = 0; i < s->len; i++) kiln_thunk_release(s->items[i]);
}

void kiln_thunk_destroy(kiln_thunk_t *t) {
  if (!t) return;
  kiln_thunk_release(t);
  switch (t->kind) {
    case KILN_THUNK_KERNEL:
      kiln_free(t->u.kernel.kernel_name);
      kiln_free(t->u.kernel.args);
      break;
    case KILN_THUNK_CUSTOM_CALL:
      kiln_free(t->u.custom.target);
      kiln_free(t->u.custom.recipe);
      kiln_free(t->u.custom.operands);
      kiln_free(t->u.custom.results);
      break;
    case KILN_THUNK_WHILE:
      kiln_thunk_seq_free(&t->u.loop.cond);
      kiln_thunk_seq_free(&t->u.loop.body);
      break;
    case KILN_THUNK_CONDITIONAL:
      for (int i = 0; i < t->u.cond.num_branches; i++) kiln_thunk_seq_free(&t->u.cond.branches[i]);
      kiln_free(t->u.cond.branches);
      break;
    case KILN_THUNK_SEQUENTIAL:
      kiln_thunk_seq_free(&t->u.sequential.seq);
      break;
    case KILN_THUNK_COMMAND_BUFFER:
      kiln_thunk_seq_free(&t->u.cmdbuf.seq);
      kiln_cmdbuf_run_free(&t->u.cmdbuf.own);
      kiln_free(t->u.cmdbuf.allocs);
      break;
    case KILN_THUNK_COLLECTIVE:
      kiln_coll_thunk_desc_destroy(t->u.coll.desc);
      break;
    default:
      break;
  }
  kiln_free(t->name);
  kiln_free(t);
}

/* ---- prepare ------------------------------------------------------------------------------ */

static kiln_status check_slice(const kiln_thunk_t *t, const char *what, kiln_slice_t s,
                               const kiln_thunk_prepare_params_t *p) {
  if (s.allocation < 0 || s.allocation >= p->num_allocations)
    return KILN_ERR_INVALID("%s %s: %s names allocation %d; there are %d",
                            kiln_thunk_kind_name(t->kind), t->name, what, s.allocation,
                            p->num_allocations);
  uint64_t cap = p->allocation_sizes[s.allocation];
  if (s.offset < 0 || s.size < 0 || (uint64_t)s.offset > cap ||
      (uint64_t)s.size > cap - (uint64_t)s.offset)
    return KILN_ERR_INVALID(
        "%s %s: %s [%" PRId64 ", +%" PRId64 ") exceeds allocation %d (%" PRIu64 " bytes)",
        kiln_thunk_kind_name(t->kind), t->name, what, s.offset, s.size, s.allocation, cap);
  return NULL;
}

#define CHECK_SLICE(what, s) KILN_RETURN_IF_ERROR_PLAIN(check_slice(t, what, s, p))

kiln_status kiln_thunk_prepare(kiln_thunk_t *t, const kiln_thunk_prepare_params_t *p) {
  if (!t || !p || (p->num_allocations > 0 && !p->allocation_sizes))
    return KILN_ERR_INVALID("thunk prepare: NULL argument");
  switch (t->kind) {
    case KILN_THUNK_KERNEL:
      if (t->u.kernel.num_args > KILN_KERNEL_MAX_ARGS)
        return KILN_ERR_INVALID("kernel %s: %d arguments (at most %d)", t->name,
                                t->u.kernel.num_args, KILN_KERNEL_MAX_ARGS);
      for (int i = 0; i < t->u.kernel.num_args; i++)
        if (!t->u.kernel.args[i].is_scalar) CHECK_SLICE("argument", t->u.kernel.args[i].slice);
      return NULL;
    case KILN_THUNK_COPY:
      if (t->u.copy.size < 0) return KILN_ERR_INVALID("copy %s: negative size", t->name);
      if (t->u.copy.dir != KILN_COPY_H2D) {
        CHECK_SLICE("source", t->u.copy.src);
        if (t->u.copy.src.size < t->u.copy.size)
          return KILN_ERR_INVALID("copy %s: source slice holds %" PRId64 " bytes, copying %" PRId64,
                                  t->name, t->u.copy.src.size, t->u.copy.size);
      }
      if (t->u.copy.dir != KILN_COPY_D2H) {
        CHECK_SLICE("destination", t->u.copy.dst);
        if (t->u.copy.dst.size < t->u.copy.size)
          return KILN_ERR_INVALID("copy %s: destination slice holds %" PRId64
                                  " bytes, copying %" PRId64,
                                  t->name, t->u.copy.dst.size, t->u.copy.size);
      }
      if (t->u.copy.dir != KILN_COPY_D2D && !t->u.copy.host && t->u.copy.size)
        return KILN_ERR_INVALID("copy %s: no host buffer", t->name);
      return NULL;
    case KILN_THUNK_MEMSET: {
      int es = t->u.memset.elem_size;
      if (es != 1 && es != 2 && es != 4)
        return KILN_ERR_INVALID("memset %s: element size %d (expected 1, 2 or 4)", t->name, es);
      CHECK_SLICE("destination", t->u.memset.dst);
      if (t->u.memset.dst.size % es)
        return KILN_ERR_INVALID("memset %s: %" PRId64 " bytes is not a multiple of %d", t->name,
                                t->u.memset.dst.size, es);
      return NULL;
    }
    case KILN_THUNK_GEMM: {
      size_t a, b, c;
      KILN_RETURN_IF_ERROR(kiln_gemm_desc_check(&t->u.gemm.desc, &a, &b, &c), "in gemm %s",
                           t->name);
      CHECK_SLICE("A", t->u.gemm.a);
      CHECK_SLICE("B", t->u.gemm.b);
      CHECK_SLICE("C", t->u.gemm.c);
      if ((uint64_t)t->u.gemm.a.size < a || (uint64_t)t->u.gemm.b.size < b ||
          (uint64_t)t->u.gemm.c.size < c)
        return KILN_ERR_INVALID("gemm %s: operand slices (%" PRId64 ", %" PRId64 ", %" PRId64
                                " bytes) are smaller than the operands (%zu, %zu, %zu)",
                                t->name, t->u.gemm.a.size, t->u.gemm.b.size, t->u.gemm.c.size, a, b,
                                c);
      if (t->u.gemm.has_bias) {
        CHECK_SLICE("bias", t->u.gemm.bias);
        uint64_t want = (uint64_t)t->u.gemm.desc.n *
                        kiln_gemm_dtype_size(kiln_gemm_desc_out_dtype(&t->u.gemm.desc));
        if ((uint64_t)t->u.gemm.bias.size < want)
          return KILN_ERR_INVALID("gemm %s: bias slice of %" PRId64
                                  " bytes holds fewer than n = %" PRId64 " elements",
                                  t->name, t->u.gemm.bias.size, t->u.gemm.desc.n);
      }
      return NULL;
    }
    case KILN_THUNK_CUSTOM_CALL:
      if (!t->u.custom.fn && !t->u.custom.run)
        return kiln_status_make(KILN_UNIMPLEMENTED, "custom call %s: no handler for target '%s'",
                                t->name, t->u.custom.target);
      for (int i = 0; i < t->u.custom.num_operands; i++)
        CHECK_SLICE("operand", t->u.custom.operands[i]);
      for (int i = 0; i < t->u.custom.num_results; i++)
        CHECK_SLICE("result", t->u.custom.results[i]);
      return NULL;
    case KILN_THUNK_WHILE:
      CHECK_SLICE("pred", t->u.loop.pred);
      if (t->u.loop.pred.size < 1) return KILN_ERR_INVALID("while %s: empty pred slice", t->name);
      KILN_RETURN_IF_ERROR(kiln_thunk_seq_prepare(&t->u.loop.cond, p),
                           "in the condition of while %s", t->name);
      KILN_RETURN_IF_ERROR(kiln_thunk_seq_prepare(&t->u.loop.body, p), "in the body of while %s",
                           t->name);
      return NULL;
    case KILN_THUNK_CONDITIONAL:
      if (t->u.cond.num_branches < 1 || (t->u.cond.index_is_pred && t->u.cond.num_branches != 2))
        return KILN_ERR_INVALID("conditional %s: %d branches%s", t->name, t->u.cond.num_branches,
                                t->u.cond.index_is_pred ? " (a pred selects between 2)" : "");
      CHECK_SLICE("index", t->u.cond.index);
      if (t->u.cond.index.size < (t->u.cond.index_is_pred ? 1 : 4))
        return KILN_ERR_INVALID("conditional %s: index slice too small", t->name);
      for (int i = 0; i < t->u.cond.num_branches; i++)
        KILN_RETURN_IF_ERROR(kiln_thunk_seq_prepare(&t->u.cond.branches[i], p),
                             "in branch %d of conditional %s", i, t->name);
      return NULL;
    case KILN_THUNK_SEQUENTIAL:
      return kiln_thunk_seq_prepare(&t->u.sequential.seq, p);
    case KILN_THUNK_COMMAND_BUFFER:
      return kiln_command_buffer_thunk_prepare(t, p);
    case KILN_THUNK_COLLECTIVE:
      return kiln_collective_thunk_prepare(t, p);
  }
  return KILN_ERR_INTERNAL("thunk %s: unknown kind %d", t->name, (int)t->kind);
}

/* ---- initialize --------------------------------------------------------------------------- */

kiln_status kiln_thunk_initialize(kiln_thunk_t *t, const kiln_thunk_init_params_t *p) {
  if (!t || !p || !p->device) return KILN_ERR_INVALID("thunk initialize: NULL argument");
  switch (t->kind) {
    case KILN_THUNK_KERNEL:
      if (t->u.kernel.kernel) return NULL;
      if (!t->u.kernel.module)
        return KILN_ERR_INVALID("kernel thunk %s: no module to find '%s' in", t->name,
                                t->u.kernel.kernel_name);
      if (t->u.kernel.module->device != p->device)
        return KILN_ERR_INVALID("kernel thunk %s: its module was loaded on another device",
                                t->name);
      KILN_RETURN_IF_ERROR(kiln_device_module_get_kernel(
                               t->u.kernel.module, t->u.kernel.kernel_name, &t->u.kernel.kernel),
                           "while initializing kernel thunk %s", t->name);
      return NULL;
    case KILN_THUNK_WHILE:
      if (!t->u.loop.host_pred) {
        KILN_RETURN_IF_ERROR_PLAIN(kiln_device_host_alloc(p->device, 1, &t->u.loop.host_pred));
        t->u.loop.host_dev = p->device;
      }
      KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_initialize(&t->u.loop.cond, p));
      return kiln_thunk_seq_initialize(&t->u.loop.body, p);
    case KILN_THUNK_CONDITIONAL:
      if (!t->u.cond.host_index) {
        KILN_RETURN_IF_ERROR_PLAIN(kiln_device_host_alloc(p->device, 4, &t->u.cond.host_index));
        t->u.cond.host_dev = p->device;
      }
      for (int i = 0; i < t->u.cond.num_branches; i++)
        KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_initialize(&t->u.cond.branches[i], p));
      return NULL;
    case KILN_THUNK_SEQUENTIAL:
      return kiln_thunk_seq_initialize(&t->u.sequential.seq, p);
    case KILN_THUNK_COMMAND_BUFFER:
      return kiln_command_buffer_thunk_initialize(t, p);
    case KILN_THUNK_CUSTOM_CALL:
      if (!t->u.custom.init) return NULL;
      KILN_RETURN_IF_ERROR(t->u.custom.init(t->u.custom.ctx, p->device),
                           "while initializing custom call %s (%s)", t->name, t->u.custom.target);
      return NULL;
    default:
      return NULL;
  }
}

/* ---- execution state ------------------------------------------------------------------------ */

/* The scratch is consumed right after each read-back (before any nested sequence runs), so
 * one word serves every while and conditional of the tree. */
#define READ_BACK_SCRATCH_BYTES 8

struct kiln_thunk_exec_state {
  kiln_device_t *device;
  void *scratch;         /* pinned, READ_BACK_SCRATCH_BYTES */
  kiln_ptrmap_t cmdbufs; /* command-buffer thunk -> its kiln_cmdbuf_run_t */
  kiln_cmdbuf_run_t *runs;
  size_t num_runs;
  const kiln_run_info_t *run; /* the execution's, for custom calls (borrowed) */
  const kiln_spmd_participant_t *who; /* the execution's, for collectives (borrowed) */
};

void kiln_thunk_exec_state_set_run(kiln_thunk_exec_state_t *st, const kiln_run_info_t *run) {
  if (st) st->run = run;
}

void kiln_thunk_exec_state_set_participant(kiln_thunk_exec_state_t *st,
                                           const kiln_spmd_participant_t *who) {
  if (st) st->who = who;
}

const kiln_run_info_t *kiln_thunk_exec_state_run(const kiln_thunk_exec_state_t *st) {
  return st ? st->run : NULL;
}

static size_t count_cmdbufs(const kiln_thunk_seq_t *s);

static size_t count_cmdbufs_in(const kiln_thunk_t *t) {
  switch (t->kind) {
    case KILN_THUNK_WHILE:
      return count_cmdbufs(&t->u.loop.cond) + count_cmdbufs(&t->u.loop.body);
    case KILN_THUNK_CONDITIONAL: {
      size_t n = 0;
      for (int i = 0; i < t->u.cond.num_branches; i++) n += count_cmdbufs(&t->u.cond.branches[i]);
      return n;
    }
    case KILN_THUNK_SEQUENTIAL:
      return count_cmdbufs(&t->u.sequential.seq);
    case KILN_THUNK_COMMAND_BUFFER:
      return 1; /* its children are convertible thunks, never command buffers */
    default:
      return 0;
  }
}

static size_t count_cmdbufs(const kiln_thunk_seq_t *s) {
  size_t n = 0;
  for (size_t i = 0; i < s->len; i++) n += count_cmdbufs_in(s->items[i]);
  return n;
}

static void add_cmdbuf_runs(kiln_thunk_exec_state_t *st, const kiln_thunk_seq_t *s) {
  for (size_t i = 0; i < s->len; i++) {
    const kiln_thunk_t *t = s->items[i];
    switch (t->kind) {
      case KILN_THUNK_WHILE:
        add_cmdbuf_runs(st, &t->u.loop.cond);
        add_cmdbuf_runs(st, &t->u.loop.body);
        break;
      case KILN_THUNK_CONDITIONAL:
        for (int b = 0; b < t->u.cond.num_branches; b++)
          add_cmdbuf_runs(st, &t->u.cond.branches[b]);
        break;
      case KILN_THUNK_SEQUENTIAL:
        add_cmdbuf_runs(st, &t->u.sequential.seq);
        break;
      case KILN_THUNK_COMMAND_BUFFER: {
        kiln_cmdbuf_run_t *run = &st->runs[st->num_runs++];
        kiln_cmdbuf_run_init(run, t);
        kiln_ptrmap_put(&st->cmdbufs, t, run);
        break;
      }
      default:
        break;
    }
  }
}

kiln_status kiln_thunk_exec_state_create(kiln_device_t *dev, const kiln_thunk_seq_t *s,
                                         kiln_thunk_exec_state_t **out) {
  if (!out) return KILN_ERR_INVALID("thunk execution state: NULL out");
  *out = NULL;
  if (!dev || !s) return KILN_ERR_INVALID("thunk execution state: NULL device or sequence");
  kiln_thunk_exec_state_t *st = kiln_try_calloc(1, sizeof(*st));
  if (!st) return KILN_ERR_EXHAUSTED("out of host memory for a thunk execution state");
  st->device = dev;
  kiln_status status = kiln_device_host_alloc(dev, READ_BACK_SCRATCH_BYTES, &st->scratch);
  if (status) {
    kiln_free(st);
    return kiln_status_annotate(status, "while creating a thunk execution state");
  }
  kiln_ptrmap_init(&st->cmdbufs);
  size_t n = count_cmdbufs(s);
  st->runs = kiln_try_calloc(n ? n : 1, sizeof(*st->runs));
  if (!st->runs || !kiln_ptrmap_reserve(&st->cmdbufs, n)) {
    kiln_thunk_exec_state_destroy(st);
    return KILN_ERR_EXHAUSTED("out of host memory for a thunk execution state");
  }
  add_cmdbuf_runs(st, s);
  *out = st;
  return NULL;
}

void kiln_thunk_exec_state_destroy(kiln_thunk_exec_state_t *st) {
  if (!st) return;
  for (size_t i = 0; i < st->num_runs; i++) kiln_cmdbuf_run_free(&st->runs[i]);
  kiln_free(st->runs);
  kiln_ptrmap_free(&st->cmdbufs);
  kiln_device_host_free(st->device, st->scratch);
  kiln_free(st);
}

kiln_cmdbuf_run_t *kiln_thunk_exec_state_cmdbuf_run(kiln_thunk_exec_state_t *st,
                                                    const kiln_thunk_t *t) {
  return kiln_ptrmap_get(&st->cmdbufs, t);
}

/* ---- execute ------------------------------------------------------------------------------ */

static kiln_status resolve(const kiln_thunk_exec_params_t *p, const kiln_thunk_t *t, kiln_slice_t s,
                           kiln_devptr_t *out) {
  KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(p->buffers, s, out), "in %s %s",
                       kiln_thunk_kind_name(t->kind), t->name);
  return NULL;
}

static kiln_status resolve_kernel_args(const kiln_thunk_t *t, const kiln_buffer_table_t *buffers,
                                       uint64_t *out) {
  for (int i = 0; i < t->u.kernel.num_args; i++) {
    const kiln_kernel_arg_t *a = &t->u.kernel.args[i];
    if (a->is_scalar) {
      out[i] = a->scalar;
    } else {
      KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, a->slice, &out[i]),
                           "argument %d of kernel %s", i, t->name);
    }
  }
  return NULL;
}

/* Reads `n` bytes at `s` back to `host` (synchronizes the stream). */
static kiln_status read_back(const kiln_thunk_exec_params_t *p, const kiln_thunk_t *t,
                             kiln_slice_t s, void *host, size_t n) {
  kiln_devptr_t src;
  KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, s, &src));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_stream_memcpy_d2h(p->stream, host, src, n));
  KILN_RETURN_IF_ERROR(kiln_stream_synchronize(p->stream), "while reading back for %s %s",
                       kiln_thunk_kind_name(t->kind), t->name);
  return NULL;
}

kiln_status kiln_thunk_execute(kiln_thunk_t *t, const kiln_thunk_exec_params_t *p) {
  if (!t || !p || !p->stream || !p->buffers)
    return KILN_ERR_INVALID("thunk execute: NULL argument");
  switch (t->kind) {
    case KILN_THUNK_KERNEL: {
      if (!t->u.kernel.kernel)
        return kiln_status_make(KILN_FAILED_PRECONDITION, "kernel thunk %s was not initialized",
                                t->name);
      uint64_t args[KILN_KERNEL_MAX_ARGS];
      if (t->u.kernel.num_args > KILN_KERNEL_MAX_ARGS)
        return KILN_ERR_INVALID("kernel %s: too many arguments", t->name);
      KILN_RETURN_IF_ERROR_PLAIN(resolve_kernel_args(t, p->buffers, args));
      KILN_RETURN_IF_ERROR(kiln_stream_launch(p->stream, t->u.kernel.kernel, &t->u.kernel.dims,
                                              args, t->u.kernel.num_args),
                           "in kernel thunk %s", t->name);
      return NULL;
    }
    case KILN_THUNK_COPY: {
      kiln_devptr_t src = 0, dst = 0;
      size_t n = (size_t)t->u.copy.size;
      if (t->u.copy.dir != KILN_COPY_H2D)
        KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, t->u.copy.src, &src));
      if (t->u.copy.dir != KILN_COPY_D2H)
        KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, t->u.copy.dst, &dst));
      if (t->u.copy.dir == KILN_COPY_D2D) return kiln_stream_memcpy_d2d(p->stream, dst, src, n);
      if (t->u.copy.dir == KILN_COPY_H2D)
        return kiln_stream_memcpy_h2d(p->stream, dst, t->u.copy.host, n);
      return kiln_stream_memcpy_d2h(p->stream, t->u.copy.host, src, n);
    }
    case KILN_THUNK_MEMSET: {
      kiln_devptr_t dst;
      KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, t->u.memset.dst, &dst));
      return kiln_stream_memset(p->stream, dst, t->u.memset.pattern, t->u.memset.elem_size,
                                (size_t)t->u.memset.dst.size / (size_t)t->u.memset.elem_size);
    }
    case KILN_THUNK_GEMM: {
      kiln_devptr_t a, b, c;
      kiln_gemm_desc_t g = t->u.gemm.desc;
      KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, t->u.gemm.a, &a));
      KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, t->u.gemm.b, &b));
      KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, t->u.gemm.c, &c));
      if (t->u.gemm.has_bias) KILN_RETURN_IF_ERROR_PLAIN(resolve(p, t, t->u.gemm.bias, &g.bias));
      KILN_RETURN_IF_ERROR(kiln_stream_gemm(p->stream, &g, a, b, c), "in gemm thunk %s", t->name);
      return NULL;
    }
    case KILN_THUNK_CUSTOM_CALL: {
      if (!t->u.custom.fn && !t->u.custom.run)
        return kiln_status_make(KILN_UNIMPLEMENTED, "custom call %s: no handler for target '%s'",
                                t->name, t->u.custom.target);
      int no = t->u.custom.num_operands, nr = t->u.custom.num_results;
      /* Small calls (the common case) resolve into the stack: no allocation per call. */
      kiln_devptr_t stack_ptrs[16];
      kiln_devptr_t *ptrs =
          no + nr <= 16 ? stack_ptrs : kiln_try_malloc((size_t)(no + nr) * sizeof(kiln_devptr_t));
      if (!ptrs) return KILN_ERR_EXHAUSTED("out of host memory calling custom call %s", t->name);
      kiln_status s = NULL;
      for (int i = 0; !s && i < no; i++) s = resolve(p, t, t->u.custom.operands[i], &ptrs[i]);
      for (int i = 0; !s && i < nr; i++) s = resolve(p, t, t->u.custom.results[i], &ptrs[no + i]);
      if (!s && t->u.custom.run)
        s = t->u.custom.run(t->u.custom.ctx, p->stream, p->state ? p->state->run : NULL, ptrs, no,
                            ptrs + no, nr);
      else if (!s)
        s = t->u.custom.fn(t->u.custom.ctx, p->stream, ptrs, no, ptrs + no, nr);
      if (ptrs != stack_ptrs) kiln_free(ptrs);
      if (s) return kiln_status_annotate(s, "in custom call %s (%s)", t->name, t->u.custom.target);
      return NULL;
    }
    case KILN_THUNK_WHILE: {
      void *pred = p->state ? p->state->scratch : t->u.loop.host_pred;
      if (!pred)
        return kiln_status_make(KILN_FAILED_PRECONDITION, "while %s was not initialized", t->name);
      int64_t trips = 0;
      for (;;) {
        KILN_RETURN_IF_ERROR(kiln_thunk_seq_execute(&t->u.loop.cond, p),
                             "in the condition of while %s (iteration %" PRId64 ")", t->name,
                             trips);
        KILN_RETURN_IF_ERROR_PLAIN(read_back(p, t, t->u.loop.pred, pred, 1));
        if (!*(const uint8_t *)pred) break;
        if (t->u.loop.max_iterations > 0 && trips >= t->u.loop.max_iterations)
          return kiln_status_make(KILN_OUT_OF_RANGE, "while %s: more than %" PRId64 " iterations",
                                  t->name, t->u.loop.max_iterations);
        KILN_RETURN_IF_ERROR(kiln_thunk_seq_execute(&t->u.loop.body, p),
                             "in the body of while %s (iteration %" PRId64 ")", t->name, trips);
        trips++;
      }
      atomic_store_explicit(&t->u.loop.last_trip_count, trips, memory_order_relaxed);
      return NULL;
    }
    case KILN_THUNK_CONDITIONAL: {
      void *index = p->state ? p->state->scratch : t->u.cond.host_index;
      if (!index)
        return kiln_status_make(KILN_FAILED_PRECONDITION, "conditional %s was not initialized",
                                t->name);
      int branch;
      if (t->u.cond.index_is_pred) {
        KILN_RETURN_IF_ERROR_PLAIN(read_back(p, t, t->u.cond.index, index, 1));
        branch = *(const uint8_t *)index ? 0 : 1; /* true -> first branch */
      } else {
        KILN_RETURN_IF_ERROR_PLAIN(read_back(p, t, t->u.cond.index, index, 4));
        int32_t idx;
        memcpy(&idx, index, 4);
        /* Out-of-range indices select the last branch (HLO's conditional semantics). */
        branch = idx < 0 || idx >= t->u.cond.num_branches ? t->u.cond.num_branches - 1 : idx;
      }
      atomic_store_explicit(&t->u.cond.last_branch, branch, memory_order_relaxed);
      KILN_RETURN_IF_ERROR(kiln_thunk_seq_execute(&t->u.cond.branches[branch], p),
                           "in branch %d of conditional %s", branch, t->name);
      return NULL;
    }
    case KILN_THUNK_SEQUENTIAL:
      return kiln_thunk_seq_execute(&t->u.sequential.seq, p);
    case KILN_THUNK_COMMAND_BUFFER:
      return kiln_command_buffer_thunk_execute(t, p);
    case KILN_THUNK_COLLECTIVE:
      return kiln_collective_thunk_execute(t, p, p->state ? p->state->who : NULL);
  }
  return KILN_ERR_INTERNAL("thunk %s: unknown kind %d", t->name, (int)t->kind);
}

static bool is_async_phase(const kiln_thunk_t *t, kiln_coll_thunk_phase_t phase) {
  return t->kind == KILN_THUNK_COLLECTIVE && t->u.coll.desc->phase == phase;
}

static bool is_async_named(const kiln_thunk_t *t, const char *name) {
  return t->kind == KILN_THUNK_COLLECTIVE && t->u.coll.desc->phase != KILN_COLL_PHASE_WHOLE &&
         strcmp(t->name, name) == 0;
}

/* The next async thunk after START thunk `j` of `s` of its name (its done, once
 * kiln_thunk_seq_check_async_pairs passed), or s->len. */
static size_t done_of(const kiln_thunk_seq_t *s, size_t j) {
  size_t k = j + 1;
  while (k < s->len && !is_async_named(s->items[k], s->items[j]->name)) k++;
  return k;
}

/* The previous async thunk before DONE thunk `k` of `s` of its name (its start, once paired),
 * or s->len. */
static size_t start_of(const kiln_thunk_seq_t *s, size_t k) {
  size_t j = k;
  while (j > 0 && !is_async_named(s->items[j - 1], s->items[k]->name)) j--;
  return j > 0 ? j - 1 : s->len;
}

kiln_status kiln_thunk_seq_check_async_pairs(const kiln_thunk_seq_t *s) {
  for (size_t i = 0; i < s->len; i++) {
    const kiln_thunk_t *t = s->items[i];
    if (is_async_phase(t, KILN_COLL_PHASE_START)) {
      size_t k = done_of(s, i);
      if (k == s->len || !is_async_phase(s->items[k], KILN_COLL_PHASE_DONE))
        return KILN_ERR_INVALID(
            "collective %s: its start has no done after it in the same thunk "
            "sequence",
            t->name);
      if (!kiln_coll_thunk_desc_same(t->u.coll.desc, s->items[k]->u.coll.desc))
        return KILN_ERR_INVALID(
            "collective %s: its done describes another collective than its "
            "start",
            t->name);
    } else if (is_async_phase(t, KILN_COLL_PHASE_DONE)) {
      size_t j = start_of(s, i);
      if (j == s->len || !is_async_phase(s->items[j], KILN_COLL_PHASE_START))
        return KILN_ERR_INVALID(
            "collective %s: its done has no start before it in the same thunk "
            "sequence",
            t->name);
    }
  }
  return NULL;
}

kiln_status kiln_thunk_seq_prepare(kiln_thunk_seq_t *s, const kiln_thunk_prepare_params_t *p) {
  for (size_t i = 0; i < s->len; i++)
    KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_prepare(s->items[i], p));
  return kiln_thunk_seq_check_async_pairs(s);
}

kiln_status kiln_thunk_seq_initialize(kiln_thunk_seq_t *s, const kiln_thunk_init_params_t *p) {
  for (size_t i = 0; i < s->len; i++)
    KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_initialize(s->items[i], p));
  return NULL;
}

kiln_status kiln_thunk_seq_failed(const kiln_thunk_seq_t *s, size_t failed, bool ran,
                                  const kiln_thunk_exec_params_t *p, kiln_status why) {
  const kiln_spmd_participant_t *who = p->state ? p->state->who : NULL;
  if (!who || !who->world) return why;
  /* Stop the peers first: one may wait elsewhere for this participant (at a collective it
   * will not reach) before it can finish what this one abandons below. (A no-op when the
   * world was aborted already: the first abort wins.) */
  kiln_spmd_world_abort(who->world, who->participant, kiln_status_message(why));
  /* The starts whose done had not finished, walked in the order of their dones (prepare
   * checked the pairs): the order every peer completes them in (nested pairs, start b ...
   * start a ... done a ... done b, end a first, or this one would wait at b for a peer
   * waiting at a). */
  for (size_t k = failed; k < s->len; k++) {
    if (!is_async_phase(s->items[k], KILN_COLL_PHASE_DONE)) continue;
    size_t j = start_of(s, k);
    if (j > failed) continue; /* not begun (a start that failed may have begun some operands) */
    /* It began the overlap if it returned, unless its done, which ends it first, ran. */
    bool began = (j < failed || ran) && k > failed;
    kiln_collective_thunk_abandon(s->items[j], p, who, began, kiln_status_message(why));
  }
  return why;
}

kiln_status kiln_thunk_seq_execute(kiln_thunk_seq_t *s, const kiln_thunk_exec_params_t *p) {
  if (__builtin_expect(p->profile != NULL, 0)) return kiln_thunk_seq_execute_profiled(s, p);
  for (size_t i = 0; i < s->len; i++) {
    kiln_status st = kiln_thunk_execute(s->items[i], p);
    if (st) return kiln_thunk_seq_failed(s, i, false, p, st);
  }
  return NULL;
}

/* ---- command-buffer support ---------------------------------------------------------------- */

bool kiln_thunk_is_convertible(const kiln_thunk_t *t) {
  switch (t->kind) {
    case KILN_THUNK_KERNEL:
    case KILN_THUNK_MEMSET:
    case KILN_THUNK_GEMM:
      return true;
    case KILN_THUNK_COPY:
      return t->u.copy.dir == KILN_COPY_D2D;
    case KILN_THUNK_CUSTOM_CALL:
      return t->u.custom.graph_compatible && t->u.custom.cmd.fn != NULL;
    default:
      return false;
  }
}

kiln_status kiln_thunk_append_commands(const kiln_thunk_t *t, const kiln_buffer_table_t *buffers,
                                       kiln_cmd_list_t *list) {
  switch (t->kind) {
    case KILN_THUNK_KERNEL: {
      if (!t->u.kernel.kernel)
        return kiln_status_make(KILN_FAILED_PRECONDITION, "kernel thunk %s was not initialized",
                                t->name);
      uint64_t args[KILN_KERNEL_MAX_ARGS];
      KILN_RETURN_IF_ERROR_PLAIN(resolve_kernel_args(t, buffers, args));
      kiln_cmd_list_push_kernel(list, t->u.kernel.kernel, &t->u.kernel.dims, args,
                                t->u.kernel.num_args);
      return NULL;
    }
    case KILN_THUNK_COPY: {
      if (t->u.copy.dir != KILN_COPY_D2D) break;
      kiln_devptr_t src, dst;
      KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, t->u.copy.src, &src), "copy %s",
                           t->name);
      KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, t->u.copy.dst, &dst), "copy %s",
                           t->name);
      kiln_cmd_list_push_memcpy(list, dst, src, (uint64_t)t->u.copy.size);
      return NULL;
    }
    case KILN_THUNK_MEMSET: {
      kiln_devptr_t dst;
      KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, t->u.memset.dst, &dst), "memset %s",
                           t->name);
      kiln_cmd_list_push_memset(list, dst, t->u.memset.pattern, t->u.memset.elem_size,
                                (uint64_t)t->u.memset.dst.size / (uint64_t)t->u.memset.elem_size);
      return NULL;
    }
    case KILN_THUNK_GEMM: {
      kiln_devptr_t a, b, c;
      KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, t->u.gemm.a, &a), "gemm %s", t->name);
      KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, t->u.gemm.b, &b), "gemm %s", t->name);
      KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, t->u.gemm.c, &c), "gemm %s", t->name);
      kiln_gemm_desc_t g = t->u.gemm.desc;
      if (t->u.gemm.has_bias)
        KILN_RETURN_IF_ERROR(kiln_buffer_table_resolve(buffers, t->u.gemm.bias, &g.bias), "gemm %s",
                             t->name);
      kiln_cmd_list_push_gemm(list, &g, a, b, c);
      return NULL;
    }
    case KILN_THUNK_CUSTOM_CALL: {
      if (!kiln_thunk_is_convertible(t)) break;
      int no = t->u.custom.num_operands, nr = t->u.custom.num_results;
      kiln_devptr_t stack_ptrs[16];
      kiln_devptr_t *ptrs =
          no + nr <= 16 ? stack_ptrs : kiln_try_malloc((size_t)(no + nr) * sizeof(kiln_devptr_t));
      if (!ptrs) return KILN_ERR_EXHAUSTED("out of host memory recording custom call %s", t->name);
      kiln_status s = NULL;
      for (int i = 0; !s && i < no; i++)
        s = kiln_buffer_table_resolve(buffers, t->u.custom.operands[i], &ptrs[i]);
      for (int i = 0; !s && i < nr; i++)
        s = kiln_buffer_table_resolve(buffers, t->u.custom.results[i], &ptrs[no + i]);
      /* The run info cell is the command-buffer thunk's to fill in (its execution's). */
      if (!s) kiln_cmd_list_push_custom_call(list, &t->u.custom.cmd, NULL, ptrs, no + nr);
      if (ptrs != stack_ptrs) kiln_free(ptrs);
      if (s) return kiln_status_annotate(s, "custom call %s", t->name);
      return NULL;
    }
    default:
      break;
  }
  return KILN_ERR_INVALID("%s thunk %s cannot be recorded into a command buffer",
                          kiln_thunk_kind_name(t->kind), t->name);
}

/* ---- dumps ---------------------------------------------------------------------------------- */

static void print_slice(kiln_strbuf_t *b, kiln_slice_t s) {
  kiln_strbuf_printf(b, "a%d+%" PRId64 ":%" PRId64, s.allocation, s.offset, s.size);
}

/* "bf16->f32 batch=1 m=2 n=3 k=4 A^T" */
static void print_gemm_shape(kiln_strbuf_t *b, const kiln_gemm_desc_t *g) {
  kiln_gemm_dtype_t out = kiln_gemm_desc_out_dtype(g);
  kiln_strbuf_append(b, kiln_gemm_dtype_name(g->dtype));
  if (out != g->dtype) kiln_strbuf_printf(b, "->%s", kiln_gemm_dtype_name(out));
  kiln_strbuf_printf(b, " batch=%" PRId64 " m=%" PRId64 " n=%" PRId64 " k=%" PRId64 "%s%s",
                     g->batch, g->m, g->n, g->k, g->trans_a ? " A^T" : "",
                     g->trans_b ? " B^T" : "");
}

static void print_thunk(kiln_strbuf_t *b, const kiln_thunk_t *t, int indent) {
  kiln_strbuf_printf(b, "%*s%s %s", indent, "", kiln_thunk_kind_name(t->kind), t->name);
  switch (t->kind) {
    case KILN_THUNK_KERNEL: {
      const kiln_launch_dims_t *d = &t->u.kernel.dims;
      kiln_strbuf_printf(b, " %s grid=%ux%ux%u block=%ux%ux%u", t->u.kernel.kernel_name, d->grid[0],
                         d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2]);
      if (d->shared_bytes) kiln_strbuf_printf(b, " smem=%u", d->shared_bytes);
      kiln_strbuf_append(b, " args=(");
      for (int i = 0; i < t->u.kernel.num_args; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        if (t->u.kernel.args[i].is_scalar)
          kiln_strbuf_printf(b, "#%" PRIu64, t->u.kernel.args[i].scalar);
        else
          print_slice(b, t->u.kernel.args[i].slice);
      }
      kiln_strbuf_append(b, ")\n");
      return;
    }
    case KILN_THUNK_COPY:
      kiln_strbuf_printf(b, " %s %" PRId64 " bytes ", copy_kind_name(t->u.copy.dir),
                         t->u.copy.size);
      if (t->u.copy.dir == KILN_COPY_H2D)
        kiln_strbuf_append(b, "host");
      else
        print_slice(b, t->u.copy.src);
      kiln_strbuf_append(b, " -> ");
      if (t->u.copy.dir == KILN_COPY_D2H)
        kiln_strbuf_append(b, "host");
      else
        print_slice(b, t->u.copy.dst);
      kiln_strbuf_append_char(b, '\n');
      return;
    case KILN_THUNK_MEMSET:
      kiln_strbuf_printf(b, " 0x%x x%d ", t->u.memset.pattern, t->u.memset.elem_size);
      print_slice(b, t->u.memset.dst);
      kiln_strbuf_append_char(b, '\n');
      return;
    case KILN_THUNK_GEMM: {
      const kiln_gemm_desc_t *g = &t->u.gemm.desc;
      kiln_strbuf_append_char(b, ' ');
      print_gemm_shape(b, g);
      kiln_strbuf_append_char(b, ' ');
      if (g->alpha != 1 || g->beta != 0)
        kiln_strbuf_printf(b, "alpha=%g beta=%g ", g->alpha, g->beta);
      print_slice(b, t->u.gemm.a);
      kiln_strbuf_append(b, " x ");
      print_slice(b, t->u.gemm.b);
      if (t->u.gemm.has_bias) {
        kiln_strbuf_append(b, " + bias ");
        print_slice(b, t->u.gemm.bias);
      }
      if (g->epilogue) kiln_strbuf_printf(b, " then %s", kiln_gemm_epilogue_name(g->epilogue));
      kiln_strbuf_append(b, " -> ");
      print_slice(b, t->u.gemm.c);
      kiln_strbuf_append_char(b, '\n');
      return;
    }
    case KILN_THUNK_CUSTOM_CALL:
      kiln_strbuf_printf(b, " \"%s\"%s (", t->u.custom.target,
                         t->u.custom.graph_compatible ? " graph-compatible" : "");
      for (int i = 0; i < t->u.custom.num_operands; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        print_slice(b, t->u.custom.operands[i]);
      }
      kiln_strbuf_append(b, ") -> (");
      for (int i = 0; i < t->u.custom.num_results; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        print_slice(b, t->u.custom.results[i]);
      }
      kiln_strbuf_append(b, ")\n");
      return;
    case KILN_THUNK_WHILE:
      kiln_strbuf_append(b, " pred=");
      print_slice(b, t->u.loop.pred);
      kiln_strbuf_printf(b, "\n%*scondition:\n", indent + 2, "");
      kiln_thunk_seq_print(b, &t->u.loop.cond, indent + 4);
      kiln_strbuf_printf(b, "%*sbody:\n", indent + 2, "");
      kiln_thunk_seq_print(b, &t->u.loop.body, indent + 4);
      return;
    case KILN_THUNK_CONDITIONAL:
      kiln_strbuf_printf(b, " %s=", t->u.cond.index_is_pred ? "pred" : "index");
      print_slice(b, t->u.cond.index);
      kiln_strbuf_append_char(b, '\n');
      for (int i = 0; i < t->u.cond.num_branches; i++) {
        kiln_strbuf_printf(b, "%*sbranch %d:\n", indent + 2, "", i);
        kiln_thunk_seq_print(b, &t->u.cond.branches[i], indent + 4);
      }
      return;
    case KILN_THUNK_SEQUENTIAL:
      kiln_strbuf_append_char(b, '\n');
      kiln_thunk_seq_print(b, &t->u.sequential.seq, indent + 2);
      return;
    case KILN_THUNK_COMMAND_BUFFER:
      kiln_strbuf_printf(b, " (%zu thunks)\n", t->u.cmdbuf.seq.len);
      kiln_thunk_seq_print(b, &t->u.cmdbuf.seq, indent + 2);
      return;
    case KILN_THUNK_COLLECTIVE:
      kiln_collective_thunk_print(b, t);
      return;
  }
}

const char *kiln_thunk_name(const kiln_thunk_t *t) {
  return t->name;
}

const char *kiln_thunk_kernel_name(const kiln_thunk_t *t) {
  return t->kind == KILN_THUNK_KERNEL ? t->u.kernel.kernel_name : NULL;
}

void kiln_thunk_describe(kiln_strbuf_t *b, const kiln_thunk_t *t) {
  switch (t->kind) {
    case KILN_THUNK_KERNEL: {
      const kiln_launch_dims_t *d = &t->u.kernel.dims;
      kiln_strbuf_printf(b, "grid=%ux%ux%u block=%ux%ux%u", d->grid[0], d->grid[1], d->grid[2],
                         d->block[0], d->block[1], d->block[2]);
      return;
    }
    case KILN_THUNK_COPY:
      kiln_strbuf_printf(b, "%s %" PRId64 " bytes", copy_kind_name(t->u.copy.dir), t->u.copy.size);
      return;
    case KILN_THUNK_MEMSET:
      kiln_strbuf_printf(b, "%" PRId64 " bytes", t->u.memset.dst.size);
      return;
    case KILN_THUNK_GEMM: {
      const kiln_gemm_desc_t *g = &t->u.gemm.desc;
      print_gemm_shape(b, g);
      if (t->u.gemm.has_bias) kiln_strbuf_append(b, " +bias");
      if (g->epilogue) kiln_strbuf_printf(b, " then %s", kiln_gemm_epilogue_name(g->epilogue));
      return;
    }
    case KILN_THUNK_CUSTOM_CALL:
      kiln_strbuf_printf(b, "\"%s\"", t->u.custom.target);
      return;
    case KILN_THUNK_WHILE:
      kiln_strbuf_printf(b, "cond %zu + body %zu thunks", t->u.loop.cond.len, t->u.loop.body.len);
      return;
    case KILN_THUNK_CONDITIONAL:
      kiln_strbuf_printf(b, "%d branches", t->u.cond.num_branches);
      return;
    case KILN_THUNK_SEQUENTIAL:
      kiln_strbuf_printf(b, "%zu thunks", t->u.sequential.seq.len);
      return;
    case KILN_THUNK_COMMAND_BUFFER:
      kiln_strbuf_printf(b, "%zu thunks", t->u.cmdbuf.seq.len);
      return;
    case KILN_THUNK_COLLECTIVE:
      return;
  }
}

void kiln_thunk_seq_print(kiln_strbuf_t *b, const kiln_thunk_seq_t *s, int indent) {
  for (size_t i = 0; i < s->len; i++) print_thunk(b, s->items[i], indent);
}

void kiln_thunk_seq_count_kinds(const kiln_thunk_seq_t *s, int64_t counts[KILN_THUNK_NUM_KINDS]) {
  for (size_t i = 0; i < s->len; i++) {
    const kiln_thunk_t *t = s->items[i];
    counts[t->kind]++;
    switch (t->kind) {
      case KILN_THUNK_WHILE:
        kiln_thunk_seq_count_kinds(&t->u.loop.cond, counts);
        kiln_thunk_seq_count_kinds(&t->u.loop.body, counts);
        break;
      case KILN_THUNK_CONDITIONAL:
        for (int b = 0; b < t->u.cond.num_branches; b++)
          kiln_thunk_seq_count_kinds(&t->u.cond.branches[b], counts);
        break;
      case KILN_THUNK_SEQUENTIAL:
        kiln_thunk_seq_count_kinds(&t->u.sequential.seq, counts);
        break;
      case KILN_THUNK_COMMAND_BUFFER:
        kiln_thunk_seq_count_kinds(&t->u.cmdbuf.seq, counts);
        break;
      default:
        break;
    }
  }
}

kiln_status kiln_thunk_seq_bind_modules(kiln_thunk_seq_t *s, kiln_device_module_t *const *modules,
                                        int n) {
  for (size_t i = 0; i < s->len; i++) {
    kiln_thunk_t *t = s->items[i];
    switch (t->kind) {
      case KILN_THUNK_KERNEL:
        if (t->u.kernel.module_index >= n)
          return kiln_status_make(KILN_INVALID_ARGUMENT,
                                  "kernel thunk %s names module %d of %d", t->name,
                                  (int)t->u.kernel.module_index, n);
        if (t->u.kernel.module_index >= 0) {
          t->u.kernel.module = modules[t->u.kernel.module_index];
          t->u.kernel.kernel = NULL; /* resolved again at initialize */
        }
        break;
      case KILN_THUNK_WHILE:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_bind_modules(&t->u.loop.cond, modules, n));
        KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_bind_modules(&t->u.loop.body, modules, n));
        break;
      case KILN_THUNK_CONDITIONAL:
        for (int b = 0; b < t->u.cond.num_branches; b++)
          KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_bind_modules(&t->u.cond.branches[b], modules, n));
        break;
      case KILN_THUNK_SEQUENTIAL:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_bind_modules(&t->u.sequential.seq, modules, n));
        break;
      case KILN_THUNK_COMMAND_BUFFER:
        KILN_RETURN_IF_ERROR_PLAIN(kiln_thunk_seq_bind_modules(&t->u.cmdbuf.seq, modules, n));
        break;
      default:
        break;
    }
  }
  return NULL;
}
