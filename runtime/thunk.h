/* Thunks: the units of work an executable runs, device-independent.
 *
 * Kinds: kernel (a launch of a kernel from a loaded module), copy (device-to-device,
 * host-to-device, device-to-host), memset, gemm, custom call (a callback with its buffers;
 * the FFI that fills it comes later), while (the condition sequence writes a pred that is
 * read back to the host), conditional (a branch index or pred read back), sequential,
 * command buffer (command_buffer_thunk.h: a run of convertible thunks recorded once and
 * replayed), and collective (collective_thunk.h: a collective among the participants of an
 * SPMD run, or replica-id / partition-id).
 *
 * Stages, each over a whole tree of thunks:
 *   prepare    — static checks against the allocation sizes (every slice fits, sizes agree
 *                with what the thunk does); nothing touches the device;
 *   initialize — one-time device work: resolve kernels in their modules, pinned host scratch
 *                for read-backs, the command-buffer decision for the device;
 *   execute    — enqueue the work on the stream, with slices resolved against the buffer
 *                table of this execution (while/conditional synchronize to read back).
 * A thunk owns what it was created with (names copied, slices copied, child sequences taken
 * over); modules, kernels and host pointers are borrowed.
 *
 * Thread-safety. Construction, prepare, initialize, release and destroy: not thread-safe:
 * callers serialize (a loader does them once, before any execution). Execute: thread-safe
 * for executions that each pass their own kiln_thunk_exec_state_t (and their own buffer
 * table and stream), which holds everything an execution changes — read-back scratch,
 * the command-buffer thunks' commands, addresses and cache tickets; the thunks themselves
 * are read-only during execution except for the last_* diagnostics (atomics). Executions
 * that pass no state use the thunks' own: not thread-safe, callers serialize. A custom
 * call's handler is called from whichever thread executes it; it must be thread-safe if
 * executions run concurrently. kiln_thunk_t is opaque; runtime/thunk_internal.h holds its
 * layout for the runtime's own files. */
#ifndef KILN_RUNTIME_THUNK_H_
#define KILN_RUNTIME_THUNK_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"
#include "runtime/buffer.h"
#include "runtime/command_buffer.h"
#include "runtime/device.h"

typedef enum kiln_thunk_kind {
  KILN_THUNK_KERNEL = 0,
  KILN_THUNK_COPY,
  KILN_THUNK_MEMSET,
  KILN_THUNK_GEMM,
  KILN_THUNK_CUSTOM_CALL,
  KILN_THUNK_WHILE,
  KILN_THUNK_CONDITIONAL,
  KILN_THUNK_SEQUENTIAL,
  KILN_THUNK_COMMAND_BUFFER,
  KILN_THUNK_COLLECTIVE, /* runtime/collective_thunk.h */
} kiln_thunk_kind_t;

#define KILN_THUNK_NUM_KINDS (KILN_THUNK_COLLECTIVE + 1)

const char *kiln_thunk_kind_name(kiln_thunk_kind_t k);

typedef enum kiln_copy_kind {
  KILN_COPY_D2D = 0,
  KILN_COPY_H2D,
  KILN_COPY_D2H,
} kiln_copy_kind_t;

typedef struct kiln_thunk kiln_thunk_t;
typedef struct kiln_thunk_exec_state kiln_thunk_exec_state_t;

/* An owning sequence of thunks. */
typedef struct kiln_thunk_seq {
  kiln_thunk_t **items;
  size_t len, cap;
} kiln_thunk_seq_t;

void kiln_thunk_seq_init(kiln_thunk_seq_t *s);
void kiln_thunk_seq_push(kiln_thunk_seq_t *s, kiln_thunk_t *t); /* takes ownership */
void kiln_thunk_seq_free(kiln_thunk_seq_t *s);                  /* destroys the thunks */

/* A kernel argument: a slice's address or an 8-byte scalar. */
typedef struct kiln_kernel_arg {
  bool is_scalar;
  kiln_slice_t slice;
  uint64_t scalar;
} kiln_kernel_arg_t;

static inline kiln_kernel_arg_t kiln_kernel_arg_slice(kiln_slice_t s) {
  kiln_kernel_arg_t a = {false, s, 0};
  return a;
}
static inline kiln_kernel_arg_t kiln_kernel_arg_scalar(uint64_t v) {
  kiln_kernel_arg_t a = {true, {0, 0, 0}, v};
  return a;
}

/* A custom call: enqueue work for `operands` -> `results` on `stream`. */
typedef kiln_status (*kiln_custom_call_fn)(void *ctx, kiln_stream_t *stream,
                                           const kiln_devptr_t *operands, int num_operands,
                                           const kiln_devptr_t *results, int num_results);

/* What one execution tells its custom calls (XLA's ExecuteParams): the run id, one per
 * execution and shared by every custom call in it, and the caller's FFI user data
 * (PJRT_FFI_UserData_Add), borrowed for the execution. */
struct kiln_ffi_user_data;
typedef struct kiln_run_info {
  int64_t run_id;
  const struct kiln_ffi_user_data *user_data;
  size_t num_user_data;
} kiln_run_info_t;

/* A custom call that also reads the execution's run info (`run` may be NULL: run id 0, no user
 * data); set with kiln_thunk_custom_call_set_run, it replaces the plain function. */
typedef kiln_status (*kiln_custom_call_run_fn)(void *ctx, kiln_stream_t *stream,
                                               const kiln_run_info_t *run,
                                               const kiln_devptr_t *operands, int num_operands,
                                               const kiln_devptr_t *results, int num_results);

/* (optional) A custom call's one-time device work, run by the thunk's initialize stage (e.g.
 * the FFI's prepare and initialize stages: runtime/ffi_call.h). */
typedef kiln_status (*kiln_custom_call_init_fn)(void *ctx, kiln_device_t *device);

/* Which participant of an SPMD run an execution is (runtime/spmd.h): collective thunks meet
 * their peers in `world`; replica-id / partition-id write its coordinates. */
struct kiln_spmd_world;
typedef struct kiln_spmd_participant {
  struct kiln_spmd_world *world;
  int participant; /* replica * num_partitions + partition */
} kiln_spmd_participant_t;

/* ---- construction ----------------------------------------------------------------------- */

kiln_thunk_t *kiln_thunk_kernel_create(const char *name, kiln_device_module_t *module,
                                       const char *kernel_name, const kiln_launch_dims_t *dims,
                                       const kiln_kernel_arg_t *args, int num_args);
kiln_thunk_t *kiln_thunk_copy_create(const char *name, kiln_copy_kind_t dir, kiln_slice_t src,
                                     kiln_slice_t dst, void *host, int64_t size);
kiln_thunk_t *kiln_thunk_memset_create(const char *name, kiln_slice_t dst, uint32_t pattern,
                                       int elem_size);
kiln_thunk_t *kiln_thunk_gemm_create(const char *name, const kiln_gemm_desc_t *desc, kiln_slice_t a,
                                     kiln_slice_t b, kiln_slice_t c);
/* Gives gemm thunk `t` a bias vector (n elements of C's type, see kiln_gemm_desc_t): its
 * address goes into the descriptor's `bias` each run. */
void kiln_thunk_gemm_set_bias(kiln_thunk_t *t, kiln_slice_t bias);
kiln_thunk_t *kiln_thunk_custom_call_create(const char *name, const char *target,
                                            kiln_custom_call_fn fn, void *ctx,
                                            const kiln_slice_t *operands, int num_operands,
                                            const kiln_slice_t *results, int num_results,
                                            bool graph_compatible);
/* Sets the initialize hook of a custom-call thunk (before prepare/initialize). */
void kiln_thunk_custom_call_set_init(kiln_thunk_t *t, kiln_custom_call_init_fn init);
/* Makes a custom-call thunk call `fn` (with the run info) instead of its plain function. */
void kiln_thunk_custom_call_set_run(kiln_thunk_t *t, kiln_custom_call_run_fn fn);
/* Records how a custom-call thunk is made again in another process (`len` bytes, copied):
 * what the compiler that created it needs to rebuild its function and context, opaque to the
 * runtime (runtime/executable_serialize.h writes it next to the target name and the slices,
 * and hands it back to the caller's resolver). A custom call without one cannot be
 * serialized. */
void kiln_thunk_custom_call_set_recipe(kiln_thunk_t *t, const void *data, size_t len);
/* Lets a graph-compatible custom-call thunk (created with graph_compatible) be recorded into
 * command buffers: `in_stream` is what a KILN_CMD_CUSTOM_CALL command runs (command_buffer.h:
 * the call's work in stream order, never synchronizing the stream it is given). Without it,
 * or without graph_compatible, the thunk splits command buffers. */
void kiln_thunk_custom_call_set_command(kiln_thunk_t *t, kiln_custom_call_run_fn in_stream);
/* Takes over `cond` and `body` (they are reset to empty). */
kiln_thunk_t *kiln_thunk_while_create(const char *name, kiln_thunk_seq_t *cond, kiln_slice_t pred,
                                      kiln_thunk_seq_t *body, int64_t max_iterations);
/* Takes over the `num_branches` sequences of `branches` (each reset to empty). */
kiln_thunk_t *kiln_thunk_conditional_create(const char *name, kiln_slice_t index,
                                            bool index_is_pred, kiln_thunk_seq_t *branches,
                                            int num_branches);
kiln_thunk_t *kiln_thunk_sequential_create(const char *name, kiln_thunk_seq_t *seq);
void kiln_thunk_destroy(kiln_thunk_t *t);

/* ---- accessors ---------------------------------------------------------------------------- */

kiln_thunk_kind_t kiln_thunk_kind(const kiln_thunk_t *t);
/* Kernel thunks: which of an executable's modules kiln_thunk_seq_bind_modules binds. */
void kiln_thunk_kernel_set_module_index(kiln_thunk_t *t, int32_t module_index);
/* While thunks: the iteration bound (0: none; exceeding it is OUT_OF_RANGE). Set it before
 * executions start. */
void kiln_thunk_while_set_max_iterations(kiln_thunk_t *t, int64_t max_iterations);
/* Diagnostics of the most recent execution that finished (any thread): the trip count of a
 * while thunk, the branch a conditional took (-1 before the first). */
int64_t kiln_thunk_while_last_trip_count(const kiln_thunk_t *t);
int kiln_thunk_conditional_last_branch(const kiln_thunk_t *t);

/* Sets the module of every kernel thunk in `s` (recursively, through while, conditional,
 * sequential and command-buffer thunks) whose module_index is in [0, n) to modules[index].
 * Executables compile kernels before any device exists and bind them when loaded. */
kiln_status kiln_thunk_seq_bind_modules(kiln_thunk_seq_t *s, kiln_device_module_t *const *modules,
                                        int n);

/* Adds to counts[kind] the thunks of `s` of each kind, recursively: the thunks inside while,
 * conditional, sequential and command-buffer thunks count once each (static counts, not
 * per iteration). */
void kiln_thunk_seq_count_kinds(const kiln_thunk_seq_t *s, int64_t counts[KILN_THUNK_NUM_KINDS]);

/* ---- stages ------------------------------------------------------------------------------ */

typedef struct kiln_thunk_prepare_params {
  int32_t num_allocations;
  const uint64_t *allocation_sizes; /* bytes per allocation */
} kiln_thunk_prepare_params_t;

typedef struct kiln_thunk_init_params {
  kiln_device_t *device;
} kiln_thunk_init_params_t;

typedef struct kiln_thunk_profile kiln_thunk_profile_t;

typedef struct kiln_thunk_exec_params {
  kiln_device_t *device;
  kiln_stream_t *stream;
  const kiln_buffer_table_t *buffers;
  /* (optional) this execution's own state; NULL: the thunks' own (one caller at a time). */
  kiln_thunk_exec_state_t *state;
  /* (optional) times every thunk into this profile (see "profile" below); NULL: off, which
   * costs one branch per sequence executed. */
  kiln_thunk_profile_t *profile;
  /* Set by the profiled execution itself for nested sequences (leave zero). */
  const kiln_thunk_t *profile_parent;
  int profile_depth;
} kiln_thunk_exec_params_t;

/* The state one execution of a thunk tree changes (see the thread-safety note above), for
 * the thunks of `s` after prepare and initialize on `dev`. Executions that run at the same
 * time need one state each; a state is reused by later executions (its command-buffer
 * thunks then replay without patching when their addresses did not move). Not
 * thread-safe: one execution at a time uses a state. The caller owns *out. */
kiln_status kiln_thunk_exec_state_create(kiln_device_t *dev, const kiln_thunk_seq_t *s,
                                         kiln_thunk_exec_state_t **out);
void kiln_thunk_exec_state_destroy(kiln_thunk_exec_state_t *st);
/* What the custom calls of the next executions with `st` learn of them (run id, user data;
 * borrowed until changed; NULL: run id 0, no user data). */
void kiln_thunk_exec_state_set_run(kiln_thunk_exec_state_t *st, const kiln_run_info_t *run);
/* The SPMD participant the next executions with `st` are (borrowed until changed; NULL:
 * participant 0, alone). */
void kiln_thunk_exec_state_set_participant(kiln_thunk_exec_state_t *st,
                                           const kiln_spmd_participant_t *who);

kiln_status kiln_thunk_prepare(kiln_thunk_t *t, const kiln_thunk_prepare_params_t *p);
kiln_status kiln_thunk_initialize(kiln_thunk_t *t, const kiln_thunk_init_params_t *p);
kiln_status kiln_thunk_execute(kiln_thunk_t *t, const kiln_thunk_exec_params_t *p);

/* Also checks the sequence's async collective pairs (kiln_thunk_seq_check_async_pairs). */
kiln_status kiln_thunk_seq_prepare(kiln_thunk_seq_t *s, const kiln_thunk_prepare_params_t *p);
/* Every async collective START thunk of `s` (not its nested sequences) has a DONE of its name
 * later in `s`, before any other START of that name, describing the same collective (op,
 * reduction, world, operands, groups); every DONE has its START. INVALID_ARGUMENT naming the
 * collective otherwise (a lone start would leave its peers waiting until the deadline). */
kiln_status kiln_thunk_seq_check_async_pairs(const kiln_thunk_seq_t *s);
kiln_status kiln_thunk_seq_initialize(kiln_thunk_seq_t *s, const kiln_thunk_init_params_t *p);
kiln_status kiln_thunk_seq_execute(kiln_thunk_seq_t *s, const kiln_thunk_exec_params_t *p);
/* Frees what initialize took from the device (pinned scratch); call before destroying the
 * device when thunks outlive it. Safe to call more than once. */
void kiln_thunk_release(kiln_thunk_t *t);
void kiln_thunk_seq_release(kiln_thunk_seq_t *s);

/* ---- profile ----------------------------------------------------------------------------- */

/* A per-thunk profile, accumulated over executions: with kiln_thunk_exec_params_t.profile
 * set, every thunk a sequence executes (nested ones too: while bodies, branches, sequential)
 * is timed in wall time from its execute call until its stream has finished it (the stream is
 * synchronized after each thunk, so asynchronous devices are timed per thunk as well, at the
 * cost of the overlap between thunks). Entries are kept per thunk, in the order thunks first
 * ran; a thunk inside another one's sequence names it as parent, one level deeper, and its
 * time is also part of its parent's.
 *
 * Command buffers: in KILN_THUNK_PROFILE_THUNKS mode a command-buffer thunk runs as usual
 * (recorded once, replayed) and is one entry; in KILN_THUNK_PROFILE_COMMANDS mode it issues
 * its thunks one by one instead of replaying them, each timed as an entry of its own (the
 * command buffer's entry then holds their sum plus the issuing): what each command costs,
 * not what the replay saves.
 *
 * Thread-safety: thread-safe (one lock per recorded thunk); concurrent executions into one
 * profile add up, and the sum of the top-level entries is then no longer bounded by one
 * execution's wall time. */
typedef enum kiln_thunk_profile_mode {
  KILN_THUNK_PROFILE_OFF = 0,
  KILN_THUNK_PROFILE_THUNKS,
  KILN_THUNK_PROFILE_COMMANDS,
} kiln_thunk_profile_mode_t;

typedef struct kiln_thunk_profile_entry {
  const kiln_thunk_t *thunk;  /* borrowed: valid as long as the thunks are */
  const kiln_thunk_t *parent; /* the thunk whose sequence holds it; NULL at the top level */
  int depth;                  /* 0 at the top level */
  int64_t calls;
  uint64_t total_ns, min_ns, max_ns;
} kiln_thunk_profile_entry_t;

/* A profile in `mode` (OFF is treated as THUNKS). The caller owns it. */
kiln_thunk_profile_t *kiln_thunk_profile_create(kiln_thunk_profile_mode_t mode);
void kiln_thunk_profile_destroy(kiln_thunk_profile_t *p);
kiln_thunk_profile_mode_t kiln_thunk_profile_mode(const kiln_thunk_profile_t *p);
/* Forgets every entry and run. */
void kiln_thunk_profile_reset(kiln_thunk_profile_t *p);
/* Records one execution of a whole thunk tree taking `ns` of wall time (executables do it
 * around their runs: the step the entries are a share of). */
void kiln_thunk_profile_add_run(kiln_thunk_profile_t *p, uint64_t ns);
/* Executions recorded with kiln_thunk_profile_add_run; *total_ns (optional) their sum. */
int64_t kiln_thunk_profile_runs(const kiln_thunk_profile_t *p, uint64_t *total_ns);
/* Copies up to `cap` entries into `out` (in first-run order); returns how many there are. */
size_t kiln_thunk_profile_entries(const kiln_thunk_profile_t *p, kiln_thunk_profile_entry_t *out,
                                  size_t cap);

/* What a profile table shows of a thunk: its name (the HLO instruction it came from), a
 * kernel thunk's kernel name (NULL for others), and a short description without slices
 * (a gemm's types, sizes, transposes and epilogue; a copy's direction and bytes; a command
 * buffer's thunk count; a custom call's target). */
const char *kiln_thunk_name(const kiln_thunk_t *t);
const char *kiln_thunk_kernel_name(const kiln_thunk_t *t);
void kiln_thunk_describe(kiln_strbuf_t *b, const kiln_thunk_t *t);

/* Whether `t` can be part of a command buffer: kernel, device-to-device copy, memset, gemm,
 * and graph-compatible custom calls with an in-stream function
 * (kiln_thunk_custom_call_set_command). */
bool kiln_thunk_is_convertible(const kiln_thunk_t *t);

/* Appends the commands of a convertible thunk with its addresses resolved. */
kiln_status kiln_thunk_append_commands(const kiln_thunk_t *t, const kiln_buffer_table_t *buffers,
                                       kiln_cmd_list_t *list);

/* The sequence as indented text, one thunk per line with its slices
 * ("kernel fusion.1 vadd grid=4x1x1 block=256x1x1 args=(a0+0:1024, a1+0:1024)"). */
void kiln_thunk_seq_print(kiln_strbuf_t *b, const kiln_thunk_seq_t *s, int indent);

#endif /* KILN_RUNTIME_THUNK_H_ */
