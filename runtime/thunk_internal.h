/* The thunk object's layout, private to the runtime (thunk.c, command_buffer_thunk.c).
 *
 * Everything outside runtime/ sees kiln_thunk_t as opaque (thunk.h) and goes through the
 * constructors and accessors there. A thunk's fields split in two:
 *   - what construction, prepare and initialize set (names, slices, kernels, pinned
 *     read-back scratch for callers without an execution state): written before the first
 *     execution, read-only after, so concurrent executions may share them;
 *   - what one execution changes: kept in the execution state (kiln_thunk_exec_state_t) when
 *     the caller passes one, else in the thunk itself (`own` below, one caller at a time).
 * The last_* fields are diagnostics for tests and dumps, relaxed atomics: "what the most
 * recent execution that finished decided", whichever thread ran it. */
#ifndef KILN_RUNTIME_THUNK_INTERNAL_H_
#define KILN_RUNTIME_THUNK_INTERNAL_H_

#include <stdatomic.h>

#include "runtime/command_buffer.h"
#include "runtime/thunk.h"

/* What one execution of a command-buffer thunk remembers for the next one: the commands it
 * built (the list keeps its capacity, so the steady state does not allocate), the base
 * addresses of the allocations they use, and the cache ticket of the launch. */
typedef struct kiln_cmdbuf_run {
  kiln_cmd_list_t list;
  kiln_devptr_t *bases; /* num_allocs entries */
  kiln_cmd_ticket_t ticket;
  /* The run info the custom-call commands of `list` read when they run (their `run` points
   * here): this execution's, copied in before each launch. */
  kiln_run_info_t run_info;
} kiln_cmdbuf_run_t;

struct kiln_thunk {
  kiln_thunk_kind_t kind;
  char *name; /* for dumps and errors (e.g. the HLO instruction it came from) */
  union {
    struct {
      kiln_device_module_t *module; /* borrowed */
      int32_t module_index;         /* executables: which of their modules (-1: none) */
      char *kernel_name;
      const kiln_kernel_t *kernel; /* resolved at initialize */
      kiln_launch_dims_t dims;
      int num_args;
      kiln_kernel_arg_t *args;
    } kernel;
    struct {
      kiln_copy_kind_t dir;
      kiln_slice_t src, dst; /* the device side(s) */
      void *host;            /* H2D source / D2H destination, borrowed */
      int64_t size;
    } copy;
    struct {
      kiln_slice_t dst;
      uint32_t pattern;
      int elem_size;
    } memset;
    struct {
      kiln_gemm_desc_t desc;
      kiln_slice_t a, b, c;
      bool has_bias;
      kiln_slice_t bias; /* when has_bias: n elements of C's type */
    } gemm;
    struct {
      kiln_custom_call_fn fn;
      kiln_custom_call_init_fn init; /* (optional) */
      kiln_custom_call_run_fn run;   /* (optional) replaces fn */
      void *ctx;
      char *target;
      int num_operands, num_results;
      kiln_slice_t *operands, *results;
      bool graph_compatible;
      void *recipe; /* (optional) how to rebuild it: kiln_thunk_custom_call_set_recipe */
      size_t recipe_len;
      /* As a command (set_command; cmd.fn NULL: never recorded). */
      kiln_cmd_custom_call_t cmd;
    } custom;
    struct {
      kiln_thunk_seq_t cond, body;
      kiln_slice_t pred;      /* 1-byte pred written by `cond` */
      int64_t max_iterations; /* 0: unbounded; else exceeding it is an error */
      atomic_int_fast64_t last_trip_count;
      void *host_pred; /* pinned, from initialize; executions without a state */
      kiln_device_t *host_dev;
    } loop;
    struct {
      kiln_slice_t index; /* s32 branch index, or a 1-byte pred */
      bool index_is_pred;
      int num_branches;
      kiln_thunk_seq_t *branches;
      atomic_int last_branch;
      void *host_index; /* pinned, from initialize; executions without a state */
      kiln_device_t *host_dev;
    } cond;
    struct {
      kiln_thunk_seq_t seq;
    } sequential;
    struct {
      kiln_thunk_seq_t seq;   /* convertible thunks only */
      atomic_int last_action; /* a kiln_cmd_action_t */
      bool use_cache;         /* decided at initialize */
      /* The allocations the commands use (from prepare): unchanged bases since the last
       * launch mean unchanged commands. */
      int32_t *allocs;
      int num_allocs;
      kiln_cmdbuf_run_t own; /* executions without a state */
    } cmdbuf;
    struct {
      struct kiln_coll_thunk_desc *desc; /* owned (runtime/collective_thunk.h) */
    } coll;
  } u;
};

/* The execution state's per-thunk parts (thunk.c), for command_buffer_thunk.c. */
kiln_cmdbuf_run_t *kiln_thunk_exec_state_cmdbuf_run(kiln_thunk_exec_state_t *st,
                                                    const kiln_thunk_t *t);
/* The run info of the execution using `st` (NULL: none set). */
const kiln_run_info_t *kiln_thunk_exec_state_run(const kiln_thunk_exec_state_t *st);
/* kiln_thunk_seq_execute with p->profile set (thunk_profile.c): each thunk timed until its
 * stream finished it, its children one level deeper. */
kiln_status kiln_thunk_seq_execute_profiled(kiln_thunk_seq_t *s, const kiln_thunk_exec_params_t *p);
/* Thunk `failed` of `s` failed with `why` (`ran`: it returned, and the work it queued
 * failed): in a world, aborts it (unless `why` is ABORTED) and ends the async collectives the
 * sequence started whose done had not finished, in the order of their dones
 * (kiln_collective_thunk_abandon), so nothing the caller then frees is still read by a peer.
 * Returns `why`. */
kiln_status kiln_thunk_seq_failed(const kiln_thunk_seq_t *s, size_t failed, bool ran,
                                  const kiln_thunk_exec_params_t *p, kiln_status why);
/* Sizes run->bases for t's allocations (after prepare) and clears its ticket. */
void kiln_cmdbuf_run_init(kiln_cmdbuf_run_t *run, const kiln_thunk_t *t);
void kiln_cmdbuf_run_free(kiln_cmdbuf_run_t *run);

#endif /* KILN_RUNTIME_THUNK_INTERNAL_H_ */
