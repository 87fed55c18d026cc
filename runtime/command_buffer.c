/* Command lists, the record/replay/patch decisions and the bounded cache
 * (command_buffer.h). */
#include "runtime/command_buffer.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

const char *kiln_cmd_kind_name(kiln_cmd_kind_t k) {
  switch (k) {
    case KILN_CMD_KERNEL:
      return "kernel";
    case KILN_CMD_MEMCPY:
      return "memcpy";
    case KILN_CMD_MEMSET:
      return "memset";
    case KILN_CMD_GEMM:
      return "gemm";
    case KILN_CMD_CUSTOM_CALL:
      return "custom-call";
  }
  return "?";
}

uint64_t kiln_cmd_custom_call_next_uid(void) {
  static atomic_uint_fast64_t next = 1;
  return (uint64_t)atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
}

const char *kiln_cmd_action_name(kiln_cmd_action_t a) {
  switch (a) {
    case KILN_CMD_ACTION_RECORD:
      return "record";
    case KILN_CMD_ACTION_REPLAY:
      return "replay";
    case KILN_CMD_ACTION_PATCH:
      return "patch";
    case KILN_CMD_ACTION_REINSTANTIATE:
      return "reinstantiate";
    case KILN_CMD_ACTION_ISSUE_DIRECTLY:
      return "issue-directly";
  }
  return "?";
}

/* ---- lists ----------------------------------------------------------------------------- */

void kiln_cmd_list_init(kiln_cmd_list_t *l) {
  memset(l, 0, sizeof(*l));
}

void kiln_cmd_list_free(kiln_cmd_list_t *l) {
  kiln_free(l->cmds);
  kiln_free(l->arg_pool);
  memset(l, 0, sizeof(*l));
}

void kiln_cmd_list_clear(kiln_cmd_list_t *l) {
  l->len = 0;
  l->arg_len = 0;
  l->refused = false;
}

/* A new command at the end, or NULL (the list marked refused) without host memory. */
static kiln_cmd_t *push_cmd(kiln_cmd_list_t *l, kiln_cmd_kind_t kind) {
  if (l->refused) return NULL;
  if (l->len == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    kiln_cmd_t *cmds = kiln_try_realloc(l->cmds, cap * sizeof(kiln_cmd_t));
    if (!cmds) {
      l->refused = true;
      return NULL;
    }
    l->cmds = cmds;
    l->cap = cap;
  }
  kiln_cmd_t *c = &l->cmds[l->len++];
  memset(c, 0, sizeof(*c));
  c->kind = kind;
  return c;
}

/* Reserves `n` argument slots; re-points earlier commands when the pool moves. NULL (the list
 * marked refused) without host memory. */
static uint64_t *reserve_args(kiln_cmd_list_t *l, size_t n) {
  if (l->refused) return NULL;
  if (l->arg_len + n > l->arg_cap) {
    size_t cap = l->arg_cap ? l->arg_cap * 2 : 64;
    while (cap < l->arg_len + n) cap *= 2;
    uint64_t *old = l->arg_pool;
    uint64_t *pool = kiln_try_realloc(l->arg_pool, cap * sizeof(uint64_t));
    if (!pool) {
      l->refused = true;
      return NULL;
    }
    l->arg_pool = pool;
    l->arg_cap = cap;
    if (old != l->arg_pool)
      for (size_t i = 0; i < l->len; i++)
        if (l->cmds[i].args) l->cmds[i].args = l->arg_pool + (l->cmds[i].args - old);
  }
  uint64_t *p = l->arg_pool + l->arg_len;
  l->arg_len += n;
  return p;
}

void kiln_cmd_list_push_kernel(kiln_cmd_list_t *l, const kiln_kernel_t *k,
                               const kiln_launch_dims_t *d, const uint64_t *args, int num_args) {
  if (num_args < 0) num_args = 0;
  uint64_t *a = num_args ? reserve_args(l, (size_t)num_args) : NULL;
  if (num_args && !a) return;
  if (num_args) memcpy(a, args, (size_t)num_args * sizeof(uint64_t));
  kiln_cmd_t *c = push_cmd(l, KILN_CMD_KERNEL);
  if (!c) return;
  c->kernel = k;
  c->dims = *d;
  c->num_args = num_args;
  c->args = a;
}

void kiln_cmd_list_push_memcpy(kiln_cmd_list_t *l, kiln_devptr_t dst, kiln_devptr_t src,
                               uint64_t bytes) {
  kiln_cmd_t *c = push_cmd(l, KILN_CMD_MEMCPY);
  if (!c) return;
  c->dst = dst;
  c->src = src;
  c->bytes = bytes;
}

void kiln_cmd_list_push_memset(kiln_cmd_list_t *l, kiln_devptr_t dst, uint32_t pattern,
                               int elem_size, uint64_t count) {
  kiln_cmd_t *c = push_cmd(l, KILN_CMD_MEMSET);
  if (!c) return;
  c->dst = dst;
  c->pattern = pattern;
  c->elem_size = elem_size;
  c->count = count;
}

void kiln_cmd_list_push_gemm(kiln_cmd_list_t *l, const kiln_gemm_desc_t *g, kiln_devptr_t a,
                             kiln_devptr_t b, kiln_devptr_t c) {
  kiln_cmd_t *cmd = push_cmd(l, KILN_CMD_GEMM);
  if (!cmd) return;
  cmd->gemm = *g;
  cmd->a = a;
  cmd->b = b;
  cmd->dst = c;
}

void kiln_cmd_list_push_custom_call(kiln_cmd_list_t *l, const kiln_cmd_custom_call_t *cc,
                                    const struct kiln_run_info *run, const kiln_devptr_t *addrs,
                                    int num_addrs) {
  if (num_addrs < 0) num_addrs = 0;
  uint64_t *a = num_addrs ? reserve_args(l, (size_t)num_addrs) : NULL;
  if (num_addrs && !a) return;
  if (num_addrs) memcpy(a, addrs, (size_t)num_addrs * sizeof(uint64_t));
  kiln_cmd_t *c = push_cmd(l, KILN_CMD_CUSTOM_CALL);
  if (!c) return;
  c->custom = cc;
  c->custom_uid = cc ? cc->uid : 0;
  c->run = run;
  c->num_args = num_addrs;
  c->args = a;
}

kiln_status kiln_cmd_custom_call_invoke(const kiln_cmd_t *c, kiln_stream_t *s) {
  const kiln_cmd_custom_call_t *cc = c->custom;
  if (c->kind != KILN_CMD_CUSTOM_CALL || !cc || !cc->fn)
    return KILN_ERR_INTERNAL("command buffer: not a prepared custom-call command");
  int no = cc->num_operands;
  if (no < 0 || no > c->num_args)
    return KILN_ERR_INTERNAL("custom call %s: %d operands in a command of %d addresses", cc->name,
                             no, c->num_args);
  kiln_status st = cc->fn(cc->ctx, s, c->run, c->args, no, c->args + no, c->num_args - no);
  if (st)
    return kiln_status_annotate(st, "in custom call %s (%s)", cc->name ? cc->name : "?",
                                cc->target ? cc->target : "?");
  return NULL;
}

bool kiln_cmd_list_copy(kiln_cmd_list_t *dst, const kiln_cmd_list_t *src) {
  kiln_cmd_list_init(dst);
  size_t total = 0;
  for (size_t i = 0; i < src->len; i++) total += (size_t)src->cmds[i].num_args;
  if (src->len && !(dst->cmds = kiln_try_malloc(src->len * sizeof(kiln_cmd_t)))) return false;
  if (total && !(dst->arg_pool = kiln_try_malloc(total * sizeof(uint64_t)))) {
    kiln_cmd_list_free(dst);
    return false;
  }
  if (src->len) memcpy(dst->cmds, src->cmds, src->len * sizeof(kiln_cmd_t));
  dst->len = dst->cap = src->len;
  dst->arg_len = dst->arg_cap = total;
  size_t at = 0;
  for (size_t i = 0; i < src->len; i++) {
    kiln_cmd_t *c = &dst->cmds[i];
    if (c->num_args) {
      memcpy(dst->arg_pool + at, src->cmds[i].args, (size_t)c->num_args * sizeof(uint64_t));
      c->args = dst->arg_pool + at;
      at += (size_t)c->num_args;
    } else {
      c->args = NULL;
    }
  }
  return true;
}

/* ---- structure and differences --------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static uint64_t gemm_key(const kiln_gemm_desc_t *g) {
  uint64_t h = mix((uint64_t)g->dtype | ((uint64_t)g->out_dtype << 8), (uint64_t)g->batch);
  h = mix(h, (uint64_t)g->m);
  h = mix(h, (uint64_t)g->n);
  h = mix(h, (uint64_t)g->k);
  h = mix(h, (uint64_t)g->trans_a | ((uint64_t)g->trans_b << 1) | ((uint64_t)(g->bias != 0) << 2) |
                 ((uint64_t)g->epilogue << 3));
  uint64_t alpha, beta;
  memcpy(&alpha, &g->alpha, 8);
  memcpy(&beta, &g->beta, 8);
  return mix(mix(h, alpha), beta);
}

uint64_t kiln_cmd_list_structure_hash(const kiln_cmd_list_t *l) {
  uint64_t h = mix(0x6b696c6eull, l->len);
  for (size_t i = 0; i < l->len; i++) {
    const kiln_cmd_t *c = &l->cmds[i];
    h = mix(h, (uint64_t)c->kind);
    switch (c->kind) {
      case KILN_CMD_KERNEL:
        h = mix(h, c->kernel ? c->kernel->uid : 0);
        for (int d = 0; d < 3; d++) h = mix(mix(h, c->dims.grid[d]), c->dims.block[d]);
        h = mix(mix(h, c->dims.shared_bytes), (uint64_t)c->num_args);
        break;
      case KILN_CMD_MEMCPY:
        h = mix(h, c->bytes);
        break;
      case KILN_CMD_MEMSET:
        h = mix(mix(mix(h, c->pattern), (uint64_t)c->elem_size), c->count);
        break;
      case KILN_CMD_GEMM:
        h = mix(h, gemm_key(&c->gemm));
        break;
      case KILN_CMD_CUSTOM_CALL:
        h = mix(mix(h, c->custom_uid), (uint64_t)c->num_args);
        break;
    }
  }
  return h;
}

static bool same_cmd_structure(const kiln_cmd_t *a, const kiln_cmd_t *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case KILN_CMD_KERNEL:
      if ((a->kernel ? a->kernel->uid : 0) != (b->kernel ? b->kernel->uid : 0)) return false;
      return memcmp(&a->dims, &b->dims, sizeof(a->dims)) == 0 && a->num_args == b->num_args;
    case KILN_CMD_MEMCPY:
      return a->bytes == b->bytes;
    case KILN_CMD_MEMSET:
      return a->pattern == b->pattern && a->elem_size == b->elem_size && a->count == b->count;
    case KILN_CMD_GEMM: {
      /* The bias address is an argument (kiln_cmd_args_differ), whether there is one is not. */
      kiln_gemm_desc_t ga = a->gemm, gb = b->gemm;
      if ((ga.bias != 0) != (gb.bias != 0)) return false;
      ga.bias = gb.bias = 0;
      return memcmp(&ga, &gb, sizeof(ga)) == 0;
    }
    case KILN_CMD_CUSTOM_CALL:
      return a->custom_uid == b->custom_uid && a->num_args == b->num_args;
  }
  return false;
}

bool kiln_cmd_list_same_structure(const kiln_cmd_list_t *a, const kiln_cmd_list_t *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++)
    if (!same_cmd_structure(&a->cmds[i], &b->cmds[i])) return false;
  return true;
}

bool kiln_cmd_args_differ(const kiln_cmd_t *a, const kiln_cmd_t *b) {
  switch (a->kind) {
    case KILN_CMD_KERNEL:
      return a->num_args && memcmp(a->args, b->args, (size_t)a->num_args * sizeof(uint64_t));
    case KILN_CMD_MEMCPY:
      return a->dst != b->dst || a->src != b->src;
    case KILN_CMD_MEMSET:
      return a->dst != b->dst;
    case KILN_CMD_GEMM:
      return a->a != b->a || a->b != b->b || a->dst != b->dst || a->gemm.bias != b->gemm.bias;
    case KILN_CMD_CUSTOM_CALL:
      return a->run != b->run ||
             (a->num_args && memcmp(a->args, b->args, (size_t)a->num_args * sizeof(uint64_t)));
  }
  return true;
}

/* ---- decisions ------------------------------------------------------------------------- */

void kiln_cmd_plan_update(const kiln_cmd_list_t *recorded, const kiln_cmd_list_t *next,
                          kiln_cmd_plan_t *plan) {
  plan->num_patch = 0;
  if (!recorded || !kiln_cmd_list_same_structure(recorded, next)) {
    plan->action = KILN_CMD_ACTION_RECORD;
    return;
  }
  for (size_t i = 0; i < next->len; i++) {
    if (!kiln_cmd_args_differ(&recorded->cmds[i], &next->cmds[i])) continue;
    if (plan->num_patch == plan->patch_cap) { /* reused plans stop allocating */
      plan->patch_cap = plan->patch_cap ? plan->patch_cap * 2 : 16;
      plan->patch = kiln_realloc(plan->patch, plan->patch_cap * sizeof(size_t));
    }
    plan->patch[plan->num_patch++] = i;
  }
  plan->action = plan->num_patch ? KILN_CMD_ACTION_PATCH : KILN_CMD_ACTION_REPLAY;
}

void kiln_cmd_plan_free(kiln_cmd_plan_t *plan) {
  kiln_free(plan->patch);
  memset(plan, 0, sizeof(*plan));
}

kiln_cmd_action_t kiln_cmd_update_failure_action(int reinstantiations_so_far) {
  return reinstantiations_so_far < 1 ? KILN_CMD_ACTION_REINSTANTIATE
                                     : KILN_CMD_ACTION_ISSUE_DIRECTLY;
}

/* ---- cache ------------------------------------------------------------------------------ */

typedef struct cmd_entry {
  uint64_t id; /* unique within the cache */
  /* Bumped whenever the executable form changes (patch, re-instantiation): a ticket of an
   * older generation no longer describes what the entry would launch. */
  uint64_t generation;
  uint64_t hash;
  kiln_cmd_list_t recorded; /* the description the executable form currently holds */
  void *exec;               /* NULL when retired (direct issue) */
  uint64_t last_use;
  int reinstantiations;
} cmd_entry_t;

struct kiln_cmd_cache {
  kiln_device_t *device;
  const kiln_cmd_exec_ops_t *ops;
  size_t capacity;
  bool disabled;
  pthread_mutex_t mu; /* guards everything below */
  cmd_entry_t **entries;
  size_t len;
  uint64_t clock;
  uint64_t next_id;
  kiln_cmd_stats_t stats;
  unsigned logged;      /* bit per kiln_cmd_action_t (+ extra bits): decisions already logged */
  kiln_cmd_plan_t plan; /* scratch, reused */
};

enum { LOG_EVICT = 8, LOG_INSTANTIATE_FAILED = 9, LOG_UPDATE_FAILED = 10, LOG_UNSUPPORTED = 11 };

/* Logs `what` the first time decision bit `bit` is taken in this cache. */
#define LOG_ONCE(c, bit, level, ...)      \
  do {                                    \
    if (!((c)->logged & (1u << (bit)))) { \
      (c)->logged |= 1u << (bit);         \
      KILN_LOG(level, __VA_ARGS__);       \
    }                                     \
  } while (0)

kiln_cmd_cache_t *kiln_cmd_cache_create(kiln_device_t *dev, const kiln_cmd_exec_ops_t *ops,
                                        size_t capacity, bool disabled) {
  kiln_cmd_cache_t *c = kiln_try_calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->device = dev;
  c->ops = ops;
  c->capacity = capacity ? capacity : 1;
  c->disabled = disabled;
  c->entries = kiln_try_calloc(c->capacity, sizeof(cmd_entry_t *));
  if (!c->entries) {
    kiln_free(c);
    return NULL;
  }
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

static void entry_destroy(kiln_cmd_cache_t *c, cmd_entry_t *e) {
  if (e->exec) c->ops->destroy(e->exec);
  kiln_cmd_list_free(&e->recorded);
  kiln_free(e);
}

void kiln_cmd_cache_destroy(kiln_cmd_cache_t *c) {
  if (!c) return;
  for (size_t i = 0; i < c->len; i++) entry_destroy(c, c->entries[i]);
  kiln_free(c->entries);
  kiln_cmd_plan_free(&c->plan);
  pthread_mutex_destroy(&c->mu);
  kiln_free(c);
}

/* Finds an entry with l's structure; among several, the one with the fewest changed
 * commands (so two runs of the same shape do not patch each other back and forth). */
static cmd_entry_t *cache_find(kiln_cmd_cache_t *c, uint64_t hash, const kiln_cmd_list_t *l) {
  cmd_entry_t *best = NULL;
  size_t best_diff = SIZE_MAX;
  for (size_t i = 0; i < c->len; i++) {
    cmd_entry_t *e = c->entries[i];
    if (e->hash != hash || !kiln_cmd_list_same_structure(&e->recorded, l)) continue;
    size_t diff = 0;
    for (size_t j = 0; j < l->len && diff < best_diff; j++)
      diff += kiln_cmd_args_differ(&e->recorded.cmds[j], &l->cmds[j]);
    if (diff < best_diff) {
      best = e;
      best_diff = diff;
    }
  }
  return best;
}

static void cache_remove_at(kiln_cmd_cache_t *c, size_t i) {
  entry_destroy(c, c->entries[i]);
  c->entries[i] = c->entries[--c->len];
}

/* Makes room for one entry by evicting the least recently used one. */
static void cache_make_room(kiln_cmd_cache_t *c) {
  if (c->len < c->capacity) return;
  size_t lru = 0;
  for (size_t i = 1; i < c->len; i++)
    if (c->entries[i]->last_use < c->entries[lru]->last_use) lru = i;
  LOG_ONCE(c, LOG_EVICT, KILN_LOG_INFO,
           "command buffers (%s): cache full (%zu entries), evicting the least recently used",
           c->ops->name, c->capacity);
  cache_remove_at(c, lru);
  c->stats.evictions++;
}

static kiln_status issue_directly(kiln_cmd_cache_t *c, kiln_stream_t *s, const kiln_cmd_list_t *l) {
  c->stats.direct_issues++;
  return c->ops->issue(s, l);
}

static bool list_supported(kiln_cmd_cache_t *c, const kiln_cmd_list_t *l) {
  if (!c->ops->supports) return true;
  for (size_t i = 0; i < l->len; i++)
    if (!c->ops->supports(c->device, l->cmds[i].kind)) {
      LOG_ONCE(c, LOG_UNSUPPORTED, KILN_LOG_INFO,
               "command buffers (%s): %s commands cannot be recorded; such lists are issued "
               "command by command",
               c->ops->name, kiln_cmd_kind_name(l->cmds[i].kind));
      return false;
    }
  return true;
}

/* Records a new entry for `l` (evicting if full). On an instantiation failure the entry is
 * kept retired (exec NULL) so the structure is never retried; returns that failure. */
static kiln_status cache_record(kiln_cmd_cache_t *c, uint64_t hash, const kiln_cmd_list_t *l,
                                cmd_entry_t **out) {
  cmd_entry_t *e = kiln_try_calloc(1, sizeof(*e));
  if (e && !kiln_cmd_list_copy(&e->recorded, l)) {
    kiln_free(e);
    e = NULL;
  }
  if (!e) return KILN_ERR_EXHAUSTED("command buffers: out of host memory recording a list");
  cache_make_room(c);
  e->id = ++c->next_id;
  e->generation = 1;
  e->hash = hash;
  e->last_use = ++c->clock;
  c->entries[c->len++] = e;
  *out = e;
  c->stats.records++;
  kiln_status s = c->ops->instantiate(c->device, l, &e->exec);
  if (s) {
    e->exec = NULL;
    c->stats.instantiate_failures++;
    return s;
  }
  c->stats.instantiations++;
  return NULL;
}

kiln_status kiln_cmd_cache_execute(kiln_cmd_cache_t *c, kiln_stream_t *s, const kiln_cmd_list_t *l,
                                   kiln_cmd_action_t *action) {
  return kiln_cmd_cache_execute_ex(c, s, l, action, NULL);
}

kiln_status kiln_cmd_cache_replay(kiln_cmd_cache_t *c, kiln_stream_t *s,
                                  const kiln_cmd_ticket_t *ticket, bool *replayed) {
  *replayed = false;
  if (!c || !s || !ticket) return KILN_ERR_INVALID("command buffer replay: NULL argument");
  if (!ticket->entry_id) return NULL;
  kiln_status st = NULL;
  kiln_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->len; i++) {
    cmd_entry_t *e = c->entries[i];
    if (e->id != ticket->entry_id) continue;
    /* Another list of this structure may have patched the entry since the ticket's launch. */
    if (e->exec && e->generation == ticket->generation) {
      e->last_use = ++c->clock;
      c->stats.replays++;
      *replayed = true;
      st = c->ops->launch(e->exec, s);
    }
    break;
  }
  kiln_mutex_unlock(&c->mu);
  return st;
}

/* Launches entry `e` and hands the caller its ticket. */
static kiln_status launch_entry(kiln_cmd_cache_t *c, cmd_entry_t *e, kiln_stream_t *s,
                                kiln_cmd_ticket_t *ticket) {
  ticket->entry_id = e->id;
  ticket->generation = e->generation;
  return c->ops->launch(e->exec, s);
}

kiln_status kiln_cmd_cache_execute_ex(kiln_cmd_cache_t *c, kiln_stream_t *s,
                                      const kiln_cmd_list_t *l, kiln_cmd_action_t *action,
                                      kiln_cmd_ticket_t *ticket) {
  kiln_cmd_action_t dummy;
  kiln_cmd_ticket_t dummy_ticket;
  if (!action) action = &dummy;
  if (!ticket) ticket = &dummy_ticket;
  ticket->entry_id = 0;
  ticket->generation = 0;
  if (!c || !s || !l) return KILN_ERR_INVALID("command buffer: NULL cache, stream or list");
  kiln_mutex_lock(&c->mu);
  kiln_status st = NULL;
  if (c->disabled || l->len == 0 || !list_supported(c, l)) {
    if (c->disabled)
      LOG_ONCE(c, KILN_CMD_ACTION_ISSUE_DIRECTLY, KILN_LOG_INFO,
               "command buffers (%s): disabled (KILN_DISABLE_COMMAND_BUFFERS); issuing "
               "commands one by one",
               c->ops->name);
    *action = KILN_CMD_ACTION_ISSUE_DIRECTLY;
    st = issue_directly(c, s, l);
    goto done;
  }
  uint64_t hash = kiln_cmd_list_structure_hash(l);
  cmd_entry_t *e = cache_find(c, hash, l);
  if (!e) {
    *action = KILN_CMD_ACTION_RECORD;
    kiln_status rs = cache_record(c, hash, l, &e);
    if (rs) {
      LOG_ONCE(c, LOG_INSTANTIATE_FAILED, KILN_LOG_WARNING,
               "command buffers (%s): instantiation failed (%s); this structure is issued "
               "command by command from now on",
               c->ops->name, kiln_status_message(rs));
      kiln_status_free(rs);
      *action = KILN_CMD_ACTION_ISSUE_DIRECTLY;
      st = issue_directly(c, s, l);
      goto done;
    }
    LOG_ONCE(c, KILN_CMD_ACTION_RECORD, KILN_LOG_INFO,
             "command buffers (%s): recorded and instantiated %zu commands", c->ops->name, l->len);
    st = launch_entry(c, e, s, ticket);
    goto done;
  }
  e->last_use = ++c->clock;
  if (!e->exec) { /* retired */
    *action = KILN_CMD_ACTION_ISSUE_DIRECTLY;
    st = issue_directly(c, s, l);
    goto done;
  }
  kiln_cmd_plan_update(&e->recorded, l, &c->plan);
  *action = c->plan.action;
  if (c->plan.action == KILN_CMD_ACTION_REPLAY) {
    LOG_ONCE(c, KILN_CMD_ACTION_REPLAY, KILN_LOG_INFO,
             "command buffers (%s): replaying a recorded list of %zu commands", c->ops->name,
             l->len);
    c->stats.replays++;
    st = launch_entry(c, e, s, ticket);
    goto done;
  }
  /* PATCH: only the commands whose addresses moved. */
  kiln_status us = NULL;
  size_t patched = 0;
  for (; patched < c->plan.num_patch && !us; patched++) {
    size_t i = c->plan.patch[patched];
    us = c->ops->update(e->exec, i, &l->cmds[i]);
    if (!us) {
      /* Keep the description in step with what the executable form holds. */
      kiln_cmd_t *r = &e->recorded.cmds[i];
      uint64_t *args = r->args;
      *r = l->cmds[i];
      r->args = args;
      if (r->num_args) memcpy(args, l->cmds[i].args, (size_t)r->num_args * sizeof(uint64_t));
    }
  }
  if (patched) e->generation++; /* also when a later update failed: it was modified */
  if (!us) {
    LOG_ONCE(c, KILN_CMD_ACTION_PATCH, KILN_LOG_INFO,
             "command buffers (%s): addresses moved; patched %zu of %zu commands in place",
             c->ops->name, c->plan.num_patch, l->len);
    c->stats.patched_launches++;
    c->stats.nodes_patched += (int64_t)c->plan.num_patch;
    st = launch_entry(c, e, s, ticket);
    goto done;
  }
  c->stats.update_failures++;
  kiln_cmd_action_t next = kiln_cmd_update_failure_action(e->reinstantiations);
  LOG_ONCE(c, LOG_UPDATE_FAILED, KILN_LOG_WARNING,
           "command buffers (%s): in-place update failed (%s); %s", c->ops->name,
           kiln_status_message(us),
           next == KILN_CMD_ACTION_REINSTANTIATE ? "re-instantiating once"
                                                 : "issuing command by command from now on");
  kiln_status_free(us);
  c->ops->destroy(e->exec);
  e->exec = NULL;
  e->generation++;
  kiln_cmd_list_free(&e->recorded);
  kiln_cmd_list_copy(&e->recorded, l);
  if (next == KILN_CMD_ACTION_REINSTANTIATE) {
    e->reinstantiations++;
    c->stats.reinstantiations++;
    kiln_status is = c->ops->instantiate(c->device, l, &e->exec);
    if (!is) {
      c->stats.instantiations++;
      *action = KILN_CMD_ACTION_REINSTANTIATE;
      LOG_ONCE(c, KILN_CMD_ACTION_REINSTANTIATE, KILN_LOG_INFO,
               "command buffers (%s): re-instantiated after a failed update", c->ops->name);
      st = launch_entry(c, e, s, ticket);
      goto done;
    }
    e->exec = NULL;
    c->stats.instantiate_failures++;
    kiln_status_free(is);
  }
  *action = KILN_CMD_ACTION_ISSUE_DIRECTLY;
  st = issue_directly(c, s, l);
done:
  kiln_mutex_unlock(&c->mu);
  return st;
}

kiln_cmd_stats_t kiln_cmd_cache_stats(kiln_cmd_cache_t *c) {
  kiln_cmd_stats_t st = {0};
  if (!c) return st;
  kiln_mutex_lock(&c->mu);
  st = c->stats;
  kiln_mutex_unlock(&c->mu);
  return st;
}

size_t kiln_cmd_cache_size(kiln_cmd_cache_t *c) {
  if (!c) return 0;
  kiln_mutex_lock(&c->mu);
  size_t n = c->len;
  kiln_mutex_unlock(&c->mu);
  return n;
}

void kiln_cmd_cache_forget_module(kiln_cmd_cache_t *c, const kiln_device_module_t *m) {
  if (!c) return;
  kiln_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->len;) {
    bool uses = false;
    const kiln_cmd_list_t *l = &c->entries[i]->recorded;
    for (size_t j = 0; j < l->len && !uses; j++)
      uses =
          l->cmds[j].kind == KILN_CMD_KERNEL && l->cmds[j].kernel && l->cmds[j].kernel->module == m;
    if (uses)
      cache_remove_at(c, i);
    else
      i++;
  }
  kiln_mutex_unlock(&c->mu);
}
