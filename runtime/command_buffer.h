/* Command buffers: record once, replay many (DESIGN.md principle 6).
 *
 * A command list is a device-independent description of a run of commands (kernel
 * launches, device-to-device copies, memsets, gemms, command-buffer compatible custom calls)
 * with their device addresses resolved.
 * A device turns a list into an executable form once (a CUDA graph with explicit nodes; a
 * flat list on the host) through its kiln_cmd_exec_ops_t, then replays it. The decisions —
 * record, replay, patch some nodes in place, re-instantiate after a failed update, fall back
 * to issuing commands one by one — are made here, by pure functions over the recorded
 * description, so they are tested without a device:
 *
 *   kiln_cmd_plan_update(recorded, next): same structure and addresses -> REPLAY;
 *     same structure, some addresses moved -> PATCH exactly the commands whose arguments
 *     changed; different structure -> RECORD.
 *   kiln_cmd_update_failure_action(n): the first failed update of an entry re-instantiates
 *     it; a second failure (or a failed instantiation) retires that structure to direct
 *     issue — never retried forever.
 *
 * The cache maps a list's structure (commands, kernels by uid, launch dims, sizes; not the
 * addresses) to an executable entry. It is bounded (least recently used entry evicted) and
 * keyed by content, not by pointer. KILN_DISABLE_COMMAND_BUFFERS=1 turns recording off
 * (every list is issued command by command). Each kind of decision is logged once per
 * cache at info level (failures at warning level).
 *
 * Thread-safety: lists and plans are not thread-safe: callers serialize (each execution
 * builds its own). The cache is thread-safe (below). A device's exec ops are called with
 * the cache's mutex held; `update` may find earlier launches of the same executable form
 * still queued or running and must keep them correct (the host waits for them; a CUDA graph
 * exec update applies to later launches only). */
#ifndef KILN_RUNTIME_COMMAND_BUFFER_H_
#define KILN_RUNTIME_COMMAND_BUFFER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"
#include "runtime/device.h"

typedef enum kiln_cmd_kind {
  KILN_CMD_KERNEL = 0,
  KILN_CMD_MEMCPY, /* device to device */
  KILN_CMD_MEMSET,
  KILN_CMD_GEMM,
  KILN_CMD_CUSTOM_CALL, /* a command-buffer compatible custom call (below) */
} kiln_cmd_kind_t;

const char *kiln_cmd_kind_name(kiln_cmd_kind_t k);

/* What one execution tells its custom calls (runtime/thunk.h: run id, FFI user data). */
struct kiln_run_info;

/* A custom call recorded as a command: `fn` enqueues (CUDA) or does (host) the call's work
 * in stream order on `stream` — it never synchronizes the stream, since on the host it runs
 * as one of the stream's own operations. Operands then results are the command's `args`.
 * Returns the handler's error (naming nothing: the caller adds the call's name). */
typedef kiln_status (*kiln_cmd_custom_fn)(void *ctx, kiln_stream_t *stream,
                                          const struct kiln_run_info *run,
                                          const kiln_devptr_t *operands, int num_operands,
                                          const kiln_devptr_t *results, int num_results);

/* The prepared call behind KILN_CMD_CUSTOM_CALL commands (owned by the custom-call thunk;
 * it outlives every list that points at it). `uid` identifies the call site — its handler and
 * attributes — and is the command's structure: two lists calling the same site with other
 * buffers differ only in addresses (patched, as kernel arguments). */
typedef struct kiln_cmd_custom_call {
  kiln_cmd_custom_fn fn;
  void *ctx;
  uint64_t uid;       /* unique per call site in the process (kiln_cmd_custom_call_next_uid) */
  const char *name;   /* the custom call, for errors */
  const char *target; /* its target, for errors */
  int num_operands;   /* args[0, num_operands) are operands, the rest results */
} kiln_cmd_custom_call_t;

/* A fresh call-site identity (never 0; process-wide, thread-safe). */
uint64_t kiln_cmd_custom_call_next_uid(void);

typedef struct kiln_cmd {
  kiln_cmd_kind_t kind;
  /* KERNEL */
  const kiln_kernel_t *kernel;
  kiln_launch_dims_t dims;
  int num_args;
  uint64_t *args; /* num_args values (addresses or scalars) */
  /* MEMCPY: dst <- src, `bytes` */
  /* MEMSET: dst, pattern, elem_size, count */
  /* GEMM: gemm, a, b, c (= dst) */
  kiln_devptr_t dst, src;
  uint64_t bytes;
  uint32_t pattern;
  int elem_size;
  uint64_t count;
  kiln_gemm_desc_t gemm;
  kiln_devptr_t a, b;
  /* CUSTOM_CALL: the call, args = operand then result addresses (num_args), and where the
   * execution's run info is read when the command runs (a cell owned by the execution that
   * built the list; compared like an address: another cell is a patch). */
  const kiln_cmd_custom_call_t *custom;
  const struct kiln_run_info *run;
  uint64_t custom_uid; /* custom->uid, kept here: structure checks never dereference `custom`
                          (a cache entry may outlive the executable that recorded it) */
} kiln_cmd_t;

/* A list owns its commands' argument arrays when built with kiln_cmd_list_push_* (they
 * live in `arg_pool`). A push that cannot have host memory is dropped and sets `refused`: the
 * list is incomplete until cleared (its builder reports RESOURCE_EXHAUSTED). */
struct kiln_cmd_list {
  kiln_cmd_t *cmds;
  size_t len, cap;
  uint64_t *arg_pool;
  size_t arg_len, arg_cap;
  bool refused;
};

void kiln_cmd_list_init(kiln_cmd_list_t *l);
void kiln_cmd_list_free(kiln_cmd_list_t *l);
/* Empties the list, keeping its capacity (no allocation when refilled to the same size). */
void kiln_cmd_list_clear(kiln_cmd_list_t *l);
void kiln_cmd_list_push_kernel(kiln_cmd_list_t *l, const kiln_kernel_t *k,
                               const kiln_launch_dims_t *d, const uint64_t *args, int num_args);
void kiln_cmd_list_push_memcpy(kiln_cmd_list_t *l, kiln_devptr_t dst, kiln_devptr_t src,
                               uint64_t bytes);
void kiln_cmd_list_push_memset(kiln_cmd_list_t *l, kiln_devptr_t dst, uint32_t pattern,
                               int elem_size, uint64_t count);
void kiln_cmd_list_push_gemm(kiln_cmd_list_t *l, const kiln_gemm_desc_t *g, kiln_devptr_t a,
                             kiln_devptr_t b, kiln_devptr_t c);
/* `addrs`: the call's operand then result addresses (num_operands + results). */
void kiln_cmd_list_push_custom_call(kiln_cmd_list_t *l, const kiln_cmd_custom_call_t *cc,
                                    const struct kiln_run_info *run, const kiln_devptr_t *addrs,
                                    int num_addrs);
/* Runs custom-call command `c` on `s` (in stream order: the caller makes sure what precedes
 * it on the stream has run, or is the stream itself); a failure names the call and target. */
kiln_status kiln_cmd_custom_call_invoke(const kiln_cmd_t *c, kiln_stream_t *s);
/* Deep copy (dst is initialized by this call); false (dst empty) without host memory. */
bool kiln_cmd_list_copy(kiln_cmd_list_t *dst, const kiln_cmd_list_t *src);

/* Hash of the structure (everything except device addresses). Equal structures hash equal. */
uint64_t kiln_cmd_list_structure_hash(const kiln_cmd_list_t *l);
bool kiln_cmd_list_same_structure(const kiln_cmd_list_t *a, const kiln_cmd_list_t *b);
/* True when command i of a and b (same structure) differ in any address or scalar. */
bool kiln_cmd_args_differ(const kiln_cmd_t *a, const kiln_cmd_t *b);

/* ---- decisions (pure) ---------------------------------------------------------------- */

typedef enum kiln_cmd_action {
  KILN_CMD_ACTION_RECORD = 0,     /* no entry with this structure: record + instantiate */
  KILN_CMD_ACTION_REPLAY,         /* nothing changed: launch as is */
  KILN_CMD_ACTION_PATCH,          /* patch `num_patch` commands in place, then launch */
  KILN_CMD_ACTION_REINSTANTIATE,  /* an in-place update failed: instantiate once more */
  KILN_CMD_ACTION_ISSUE_DIRECTLY, /* disabled, unsupported or retired: command by command */
} kiln_cmd_action_t;

const char *kiln_cmd_action_name(kiln_cmd_action_t a);

typedef struct kiln_cmd_plan {
  kiln_cmd_action_t action;
  size_t num_patch;
  size_t *patch; /* indices of the commands to patch, ascending */
  size_t patch_cap;
} kiln_cmd_plan_t;

/* A zeroed plan is ready for use; kiln_cmd_plan_free releases its index array. */

/* Compares a recorded list with the next one. `recorded` NULL means no entry: RECORD. */
void kiln_cmd_plan_update(const kiln_cmd_list_t *recorded, const kiln_cmd_list_t *next,
                          kiln_cmd_plan_t *plan);
void kiln_cmd_plan_free(kiln_cmd_plan_t *plan);
/* What to do after an in-place update failed, given how many times this entry was already
 * re-instantiated because of failed updates: REINSTANTIATE the first time, then
 * ISSUE_DIRECTLY. */
kiln_cmd_action_t kiln_cmd_update_failure_action(int reinstantiations_so_far);

/* ---- executable forms, provided by a device ------------------------------------------ */

struct kiln_cmd_exec_ops {
  const char *name; /* "cuda-graph", "host-command-list" */
  /* (optional) Whether the device can record this kind of command; NULL: all kinds. */
  bool (*supports)(kiln_device_t *dev, kiln_cmd_kind_t kind);
  /* Records `l` and instantiates it; *exec belongs to the cache entry. A failure here (a
   * checked instantiation status) retires the structure to direct issue. */
  kiln_status (*instantiate)(kiln_device_t *dev, const kiln_cmd_list_t *l, void **exec);
  /* Patches command `index` of `exec` in place to `cmd` (same structure). A failure makes
   * the caller re-instantiate (once). */
  kiln_status (*update)(void *exec, size_t index, const kiln_cmd_t *cmd);
  kiln_status (*launch)(void *exec, kiln_stream_t *s);
  void (*destroy)(void *exec);
  /* Issues `l` command by command on `s` (no recording). */
  kiln_status (*issue)(kiln_stream_t *s, const kiln_cmd_list_t *l);
};

/* ---- the cache and the execution engine ---------------------------------------------- */

typedef struct kiln_cmd_stats {
  int64_t records;          /* entries recorded (first execution of a structure) */
  int64_t instantiations;   /* successful instantiations, including re-instantiations */
  int64_t replays;          /* launches with nothing to patch */
  int64_t patched_launches; /* launches after an in-place patch */
  int64_t nodes_patched;    /* commands patched in place, in total */
  int64_t update_failures;
  int64_t reinstantiations;
  int64_t evictions;
  int64_t direct_issues; /* lists issued command by command */
  int64_t instantiate_failures;
} kiln_cmd_stats_t;

/* The cache is opaque (command_buffer.c); the functions below are its whole interface.
 *
 * Thread-safety: thread-safe. One mutex guards the entries, the statistics and the
 * executable forms' updates, so two threads running lists of the same structure take turns
 * patching the shared entry; each launch is enqueued before the mutex is released, so it
 * runs with the addresses it was patched to. */

/* Which entry ran a list and in which state. An entry's generation changes whenever its
 * executable form changes (patched in place or re-instantiated), so a caller holding a
 * ticket can tell "exactly what I launched last time" from "what someone else's list
 * turned it into". */
typedef struct kiln_cmd_ticket {
  uint64_t entry_id;   /* 0: none (issued command by command) */
  uint64_t generation; /* the entry's generation after this caller's launch */
} kiln_cmd_ticket_t;

/* Creates a cache for `ops` (capacity >= 1), or NULL when host memory is refused. `disabled`
 * forces direct issue. */
kiln_cmd_cache_t *kiln_cmd_cache_create(kiln_device_t *dev, const kiln_cmd_exec_ops_t *ops,
                                        size_t capacity, bool disabled);
void kiln_cmd_cache_destroy(kiln_cmd_cache_t *c);
/* Runs `l` on `s` through the cache: decides (see above), acts, launches. *action (may be
 * NULL) receives the decision taken. Thread-safe. */
kiln_status kiln_cmd_cache_execute(kiln_cmd_cache_t *c, kiln_stream_t *s, const kiln_cmd_list_t *l,
                                   kiln_cmd_action_t *action);
/* As kiln_cmd_cache_execute; *ticket (may be NULL) receives the entry that ran the list and
 * its generation ({0, 0} when the list was issued command by command). */
kiln_status kiln_cmd_cache_execute_ex(kiln_cmd_cache_t *c, kiln_stream_t *s,
                                      const kiln_cmd_list_t *l, kiln_cmd_action_t *action,
                                      kiln_cmd_ticket_t *ticket);
/* Replays the entry of `ticket` as it is, for a caller that knows its own addresses did not
 * change since it got the ticket (e.g. the command-buffer thunk, which compares the base
 * addresses of the allocations it uses). The entry is shared by every list of its
 * structure, so this checks that nobody patched or re-instantiated it since: *replayed is
 * false, and nothing runs, when the entry's generation moved on, or it was evicted or
 * retired. The caller then goes through kiln_cmd_cache_execute_ex, which patches the entry
 * back to its addresses. */
kiln_status kiln_cmd_cache_replay(kiln_cmd_cache_t *c, kiln_stream_t *s,
                                  const kiln_cmd_ticket_t *ticket, bool *replayed);
kiln_cmd_stats_t kiln_cmd_cache_stats(kiln_cmd_cache_t *c);
size_t kiln_cmd_cache_size(kiln_cmd_cache_t *c);
/* Destroys every entry whose commands launch a kernel of module `m` (called on unload). */
void kiln_cmd_cache_forget_module(kiln_cmd_cache_t *c, const kiln_device_module_t *m);

/* The device's cache (NULL when the device has none). */
static inline kiln_cmd_cache_t *kiln_device_cmd_cache(kiln_device_t *dev) {
  return dev ? dev->cmd_cache : NULL;
}

#endif /* KILN_RUNTIME_COMMAND_BUFFER_H_ */
