/* The command-buffer thunk: owns a run of convertible thunks (kernel, device-to-device copy,
 * memset, gemm, command-buffer compatible custom call) and runs them as one recorded command buffer
 * through the device's cache (command_buffer.h): recorded on first execution, replayed after,
 * patched in place when buffer addresses move. On a device without command buffers, or with
 * KILN_DISABLE_COMMAND_BUFFERS=1, the thunks are issued one by one.
 *
 * kiln_command_buffer_convert is the runtime side of the conversion pass: it replaces
 * every run of at least `min_run` consecutive convertible thunks of a sequence (and of
 * nested while/conditional/sequential sequences) by one command-buffer thunk.
 *
 * Thread-safety: as every thunk (thunk.h). Each execution state keeps its own commands,
 * base addresses and cache ticket for the thunk; the device's cache entry for the run's
 * structure is shared by every thunk and every state with that structure, and a replay
 * checks the entry's generation, so one never launches commands another patched in. */
#ifndef KILN_RUNTIME_COMMAND_BUFFER_THUNK_H_
#define KILN_RUNTIME_COMMAND_BUFFER_THUNK_H_

#include "base/status.h"
#include "runtime/thunk.h"

/* Takes over `seq` (reset to empty) when every thunk in it is convertible; otherwise
 * INVALID_ARGUMENT naming the first one that is not, and `seq` is left as it was. */
kiln_status kiln_command_buffer_thunk_create(const char *name, kiln_thunk_seq_t *seq,
                                             kiln_thunk_t **out);

/* The decision the most recent execution that finished took (RECORD, REPLAY, PATCH, ...),
 * whichever thread ran it. */
kiln_cmd_action_t kiln_command_buffer_thunk_last_action(const kiln_thunk_t *t);

/* Replaces runs of >= min_run (at least 1) convertible thunks by command-buffer thunks, in
 * place and recursively. Returns the number of command-buffer thunks made in *made (may be
 * NULL). */
kiln_status kiln_command_buffer_convert(kiln_thunk_seq_t *seq, size_t min_run, size_t *made);

/* What the conversion made of a sequence (recursively through while, conditional and
 * sequential thunks): command buffers, the thunks inside them, and the custom calls that run
 * inside a command buffer vs. outside (split runs: not command-buffer compatible, or in a run
 * shorter than the minimum). */
typedef struct kiln_command_buffer_counts {
  size_t command_buffers;
  size_t thunks;
  size_t custom_calls_inside;
  size_t custom_calls_outside;
} kiln_command_buffer_counts_t;

/* Adds the counts of `seq` to *counts. */
void kiln_command_buffer_count(const kiln_thunk_seq_t *seq, kiln_command_buffer_counts_t *counts);

/* Stages, called from thunk.c. */
kiln_status kiln_command_buffer_thunk_prepare(kiln_thunk_t *t,
                                              const kiln_thunk_prepare_params_t *p);
kiln_status kiln_command_buffer_thunk_initialize(kiln_thunk_t *t,
                                                 const kiln_thunk_init_params_t *p);
kiln_status kiln_command_buffer_thunk_execute(kiln_thunk_t *t, const kiln_thunk_exec_params_t *p);

#endif /* KILN_RUNTIME_COMMAND_BUFFER_THUNK_H_ */
