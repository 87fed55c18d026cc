/* Participant groups of collectives (collective_groups.h). */
#include "compiler/hlo/collective_groups.h"

#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/replica_groups.h"

const char *kiln_hlo_group_mode_name(kiln_hlo_group_mode_t m) {
  switch (m) {
    case KILN_GROUP_CROSS_REPLICA:
      return "cross-replica";
    case KILN_GROUP_CROSS_PARTITION:
      return "cross-partition";
    case KILN_GROUP_CROSS_REPLICA_AND_PARTITION:
      return "cross-replica-and-partition";
    default:
      return "flattened-id";
  }
}

kiln_status kiln_hlo_collective_group_mode(const kiln_hlo_instruction_t *in,
                                           kiln_hlo_group_mode_t *out) {
  bool has_global_flag = false;
  switch (in->opcode) {
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_ALL_REDUCE_START:
    case KILN_OP_ALL_GATHER:
    case KILN_OP_ALL_GATHER_START:
    case KILN_OP_REDUCE_SCATTER:
      has_global_flag = true;
      break;
    default:
      break;
  }
  if (in->channel_id == 0) {
    if (in->use_global_device_ids)
      return KILN_ERR_INVALID("%s '%s': use_global_device_ids=true needs a channel_id",
                              kiln_hlo_opcode_name(in->opcode), in->name);
    *out = KILN_GROUP_CROSS_REPLICA;
  } else if (!has_global_flag) {
    *out = KILN_GROUP_CROSS_PARTITION;
  } else {
    *out = in->use_global_device_ids ? KILN_GROUP_FLATTENED_ID
                                     : KILN_GROUP_CROSS_REPLICA_AND_PARTITION;
  }
  return KILN_STATUS_OK;
}

void kiln_hlo_collective_group_free(kiln_hlo_collective_group_t *g) {
  kiln_free(g->members);
  g->members = NULL;
}

/* The ids of the mode's space: replicas, partitions or flattened ids. */
static int64_t id_space(kiln_hlo_group_mode_t mode, int R, int P) {
  switch (mode) {
    case KILN_GROUP_CROSS_PARTITION:
      return P;
    case KILN_GROUP_FLATTENED_ID:
      return (int64_t)R * P;
    default:
      return R;
  }
}

static int64_t my_id(kiln_hlo_group_mode_t mode, int P, int participant) {
  switch (mode) {
    case KILN_GROUP_CROSS_PARTITION:
      return participant % P;
    case KILN_GROUP_FLATTENED_ID:
      return participant;
    default:
      return participant / P;
  }
}

/* A group's ids -> participants, in XLA's order. */
static void ids_to_members(kiln_hlo_group_mode_t mode, int P, int participant, const int64_t *ids,
                           int nids, kiln_hlo_collective_group_t *g) {
  int r = participant / P, p = participant % P;
  int n = 0;
  for (int i = 0; i < nids; i++) {
    switch (mode) {
      case KILN_GROUP_CROSS_REPLICA:
        g->members[n++] = (int)ids[i] * P + p;
        break;
      case KILN_GROUP_CROSS_PARTITION:
        g->members[n++] = r * P + (int)ids[i];
        break;
      case KILN_GROUP_FLATTENED_ID:
        g->members[n++] = (int)ids[i];
        break;
      case KILN_GROUP_CROSS_REPLICA_AND_PARTITION:
        for (int q = 0; q < P; q++) g->members[n++] = (int)ids[i] * P + q;
        break;
    }
  }
  g->size = n;
  for (int i = 0; i < n; i++)
    if (g->members[i] == participant) g->rank = i;
}

/* Refusal of an id outside the world: alone, the collective needs more participants. */
static kiln_status out_of_world(const kiln_hlo_instruction_t *in, kiln_hlo_group_mode_t mode,
                                int64_t id, int64_t space, const char *what, const char *text,
                                int R, int P, const char *alone_hint) {
  if (alone_hint)
    return kiln_status_make(KILN_UNIMPLEMENTED, "multi-participant collective '%s' (%s, %s=%s): %s",
                            in->name, kiln_hlo_opcode_name(in->opcode), what, text, alone_hint);
  return KILN_ERR_INVALID("%s '%s' (%s): %s=%s names id %" PRId64 ", but there are only %" PRId64
                          " ids (%d replicas x %d partitions)",
                          kiln_hlo_opcode_name(in->opcode), in->name,
                          kiln_hlo_group_mode_name(mode), what, text, id, space, R, P);
}

static kiln_status resolve_permute(const kiln_hlo_instruction_t *in, int R, int P, int participant,
                                   kiln_hlo_collective_group_t *g) {
  int64_t space = id_space(g->mode, R, P);
  g->members = kiln_malloc(sizeof(int) * (size_t)space);
  int64_t *ids = kiln_malloc(sizeof(int64_t) * (size_t)space);
  for (int64_t i = 0; i < space; i++) ids[i] = i;
  ids_to_members(g->mode, P, participant, ids, (int)space, g);
  kiln_free(ids);
  (void)in;
  g->key = g->mode == KILN_GROUP_CROSS_REPLICA ? participant % P : participant / P;
  return KILN_STATUS_OK;
}

kiln_status kiln_hlo_collective_group_resolve(const kiln_hlo_instruction_t *in, int R, int P,
                                              int participant, const char *alone_hint,
                                              kiln_hlo_collective_group_t *g) {
  memset(g, 0, sizeof *g);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_collective_group_mode(in, &g->mode));
  if (in->opcode == KILN_OP_COLLECTIVE_PERMUTE || in->opcode == KILN_OP_COLLECTIVE_PERMUTE_START)
    return resolve_permute(in, R, P, participant, g);
  int64_t space = id_space(g->mode, R, P), me = my_id(g->mode, P, participant);
  const char *text = in->replica_groups ? in->replica_groups : "{}";
  kiln_hlo_replica_groups_t groups;
  KILN_RETURN_IF_ERROR(kiln_hlo_replica_groups_parse(text, &groups), "%s '%s'",
                       kiln_hlo_opcode_name(in->opcode), in->name);
  kiln_status st = KILN_STATUS_OK;
  int64_t *all = NULL;
  const int64_t *ids = NULL;
  int nids = 0, which = -1;
  if (groups.num_groups == 0) { /* one group of every id */
    all = kiln_malloc(sizeof *all * (size_t)space);
    for (int64_t i = 0; i < space; i++) all[i] = i;
    ids = all;
    nids = (int)space;
    which = 0;
  } else {
    for (int k = 0; k < groups.num_groups && which < 0; k++)
      for (int j = groups.offsets[k]; j < groups.offsets[k + 1]; j++)
        if (groups.ids[j] == me) which = k;
    if (which < 0) {
      st = !alone_hint
               ? KILN_ERR_INVALID("%s '%s' (%s): replica_groups=%s leaves out id %" PRId64
                                  "; every participant must belong to a group",
                                  kiln_hlo_opcode_name(in->opcode), in->name,
                                  kiln_hlo_group_mode_name(g->mode), text, me)
               : out_of_world(in, g->mode, me, space, "replica_groups", text, R, P, alone_hint);
      goto done;
    }
    ids = groups.ids + groups.offsets[which];
    nids = groups.offsets[which + 1] - groups.offsets[which];
    for (int j = 0; j < nids; j++)
      if (ids[j] >= space) {
        st = out_of_world(in, g->mode, ids[j], space, "replica_groups", text, R, P, alone_hint);
        goto done;
      }
  }
  g->members = kiln_malloc(sizeof(int) * (size_t)nids * (size_t)P);
  ids_to_members(g->mode, P, participant, ids, nids, g);
  /* Groups of different instructions never meet; within one instruction, the group index
   * and (for the per-partition / per-replica modes) the other coordinate tell them apart. */
  g->key = (int64_t)which * ((int64_t)R * P + 1);
  if (g->mode == KILN_GROUP_CROSS_REPLICA) g->key += participant % P;
  if (g->mode == KILN_GROUP_CROSS_PARTITION) g->key += participant / P;
done:
  kiln_free(all);
  kiln_hlo_replica_groups_free(&groups);
  if (st) kiln_hlo_collective_group_free(g);
  return st;
}

kiln_status kiln_hlo_collective_permute_source(const kiln_hlo_instruction_t *in,
                                               const kiln_hlo_collective_group_t *g, int R, int P,
                                               const char *alone_hint, int64_t *source) {
  const char *text = kiln_hlo_instruction_raw_attr(in, "source_target_pairs");
  int64_t *pairs = NULL;
  int n = 0;
  *source = -1;
  if (text)
    KILN_RETURN_IF_ERROR(kiln_hlo_source_target_pairs_parse(text, &pairs, &n), "%s '%s'",
                         kiln_hlo_opcode_name(in->opcode), in->name);
  kiln_status st = KILN_STATUS_OK;
  for (int k = 0; k < 2 * n && !st; k++)
    if (pairs[k] >= g->size)
      st = out_of_world(in, g->mode, pairs[k], g->size, "source_target_pairs", text, R, P,
                        alone_hint);
  for (int k = 0; k < n && !st; k++)
    if (pairs[2 * k + 1] == g->rank) *source = pairs[2 * k];
  kiln_free(pairs);
  return st;
}

bool kiln_hlo_collective_is_pair_start(const kiln_hlo_instruction_t *in) {
  const kiln_shape_t *s = in->shape;
  if (s->type != KILN_TUPLE || s->num_elements < 2) return false;
  if (in->opcode == KILN_OP_ALL_REDUCE_START) /* older: (operand, result) of one operand */
    return in->num_operands == 1 && s->num_elements == 2 && s->elements[0]->type != KILN_TUPLE;
  return (in->opcode == KILN_OP_ALL_GATHER_START ||
          in->opcode == KILN_OP_COLLECTIVE_PERMUTE_START) &&
         (in->num_operands > 1 || s->elements[0]->type != KILN_TUPLE);
}

const kiln_hlo_instruction_t *kiln_hlo_async_split_done(const kiln_hlo_instruction_t *start) {
  if (!kiln_hlo_opcode_starts_async(start->opcode) || start->users.len != 1) return NULL;
  const kiln_hlo_instruction_t *d = start->users.data[0];
  if (!kiln_hlo_opcode_ends_async(d->opcode) || d->num_operands != 1 || d->operands[0] != start ||
      d->parent != start->parent)
    return NULL;
  return d;
}
