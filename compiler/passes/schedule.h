/* Memory-minimizing scheduling of sequential computations.
 *
 * Each sequential computation (the entry and the callees of call / while / conditional)
 * gets a topological order of its instructions — operands and control predecessors first —
 * chosen to minimize simulated peak memory. Three candidates are simulated and the best
 * kept (ties keep the earlier one): the current order (when it is a valid topological
 * order), a list scheduler that greedily picks the ready instruction freeing the most
 * bytes net of what it allocates, and a DFS post-order scheduler that visits the operands
 * whose subtrees need the most memory first.
 *
 * Memory model: buffers come from the dataflow's aliasing (dataflow.h), each counted in the
 * outermost computation holding one of its values. A buffer is allocated when the first of
 * its values is defined there and freed after the last instruction there that uses or
 * defines one of its values, unless it is a parameter or escapes through the root. A
 * while / conditional / call adds the peak of what it calls while it runs.
 *
 * The pass reorders each computation's instruction list to its schedule (other
 * computations — fusion bodies, reducers — are put in post order) and sets the module
 * attribute is_scheduled=true. */
#ifndef KILN_PASSES_SCHEDULE_H_
#define KILN_PASSES_SCHEDULE_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

typedef enum kiln_scheduler {
  KILN_SCHEDULER_BEST = 0, /* the best of the three below */
  KILN_SCHEDULER_CURRENT,  /* keep the instruction-list order (post order if it is invalid) */
  KILN_SCHEDULER_LIST,
  KILN_SCHEDULER_DFS,
  KILN_SCHEDULER_COUNT
} kiln_scheduler_t;

const char *kiln_scheduler_name(kiln_scheduler_t s);

typedef struct kiln_schedule_stats {
  int64_t peak_bytes;                           /* entry peak of the chosen schedules */
  int64_t entry_peak_by[KILN_SCHEDULER_COUNT];  /* entry peak per candidate (BEST: chosen) */
  int computations;                             /* sequential computations scheduled */
  int chosen_count[KILN_SCHEDULER_COUNT];       /* how often each candidate won */
} kiln_schedule_stats_t;

/* Schedules `m` with scheduler `which` (see above); `stats` and `changed` may be NULL. */
kiln_status kiln_schedule_module(kiln_hlo_module_t *m, kiln_scheduler_t which,
                                 kiln_schedule_stats_t *stats, bool *changed);

/* Simulated peak memory of the entry when every sequential computation runs in its
 * current instruction-list order, which must be a valid topological order. */
kiln_status kiln_schedule_peak_memory(const kiln_hlo_module_t *m, int64_t *out_peak);

/* True when each sequential computation's instruction list is a topological order of
 * its instructions (operands and control predecessors first); otherwise the message
 * names the first offending instruction. */
kiln_status kiln_schedule_verify(const kiln_hlo_module_t *m);

#endif /* KILN_PASSES_SCHEDULE_H_ */
