/* The participants of one execution of a collective: XLA's CollectiveOpGroupMode, the group
 * a participant belongs to (members in rank order) and collective-permute's source, for a
 * world of num_replicas x num_partitions participants (participant = replica * P + partition).
 * Shared by the evaluator (compiler/eval/eval_collectives.c) and the thunk emitter, which
 * resolves every participant's group once, at compile time.
 *
 * Modes (XLA's GetCollectiveOpGroupMode): no channel_id: cross-replica; a channel and no
 * use_global_device_ids flag on the op (all-to-all, collective-permute, collective-broadcast):
 * cross-partition; all-reduce / all-gather / reduce-scatter with a channel: cross-replica-and-
 * partition, or flattened ids with use_global_device_ids=true.
 *
 * Thread safety: the functions are pure; a group value is owned by one thread at a time. */
#ifndef KILN_COMPILER_HLO_COLLECTIVE_GROUPS_H
#define KILN_COMPILER_HLO_COLLECTIVE_GROUPS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

typedef enum kiln_hlo_group_mode {
  KILN_GROUP_CROSS_REPLICA,
  KILN_GROUP_CROSS_PARTITION,
  KILN_GROUP_CROSS_REPLICA_AND_PARTITION,
  KILN_GROUP_FLATTENED_ID,
} kiln_hlo_group_mode_t;

const char *kiln_hlo_group_mode_name(kiln_hlo_group_mode_t m);
kiln_status kiln_hlo_collective_group_mode(const kiln_hlo_instruction_t *in,
                                           kiln_hlo_group_mode_t *out);

/* One participant's group of a collective: members (participant indices) in rank order, its
 * own rank, and a key telling the groups of one instruction apart (equal for every member). */
typedef struct kiln_hlo_collective_group {
  int *members; /* heap (kiln_free via kiln_hlo_collective_group_free) */
  int size, rank;
  int64_t key;
  kiln_hlo_group_mode_t mode;
} kiln_hlo_collective_group_t;

void kiln_hlo_collective_group_free(kiln_hlo_collective_group_t *g);

/* The done a runtime may split async `start` across (begin the collective at the start, end
 * it at the done, other work in between): the start's only user, a -done or async-done of it
 * in the same computation. NULL otherwise; the start then completes the collective itself. */
const kiln_hlo_instruction_t *kiln_hlo_async_split_done(const kiln_hlo_instruction_t *start);

/* The group of `participant` in a world of R x P. `alone_hint` non-NULL: the caller runs
 * without a world (R = P = 1), and an id outside it is UNIMPLEMENTED "multi-participant
 * collective ...: <alone_hint>"; NULL: INVALID_ARGUMENT naming the id and the world. A
 * collective-permute's group is every participant with the same other coordinate, rank = id. */
kiln_status kiln_hlo_collective_group_resolve(const kiln_hlo_instruction_t *in, int R, int P,
                                              int participant, const char *alone_hint,
                                              kiln_hlo_collective_group_t *g);

/* collective-permute: which rank of `g` sends to g->rank (-1: nobody; the result is zeros),
 * after checking every pair against the group. */
kiln_status kiln_hlo_collective_permute_source(const kiln_hlo_instruction_t *in,
                                               const kiln_hlo_collective_group_t *g, int R, int P,
                                               const char *alone_hint, int64_t *source);

/* all-gather-start / collective-permute-start returning (operand(s), result(s), ...), or an
 * older all-reduce-start of one operand returning (operand, result): its results are the
 * tuple's element 1; other modules write them returning the result alone. */
bool kiln_hlo_collective_is_pair_start(const kiln_hlo_instruction_t *in);

#endif
