/* Replica groups of a collective (and collective-permute's source-target pairs): the three textual
 * forms XLA prints, expanded to explicit id lists. explicit  {{0,1},{2,3}}  ({} = one group of
 * every participant, resolved at run time) iota      [G,S]<=[d0,d1,...]T(p0,p1,...)  iota over
 * prod(d), reshaped to d, transposed by p, flattened and cut into G groups of S ids mesh
 * mesh['a'=2,'b'=4] {'b'}  a row-major device mesh; one group per index of the axes not listed,
 * enumerating the listed axes in the order given Thread safety: the functions are pure; a groups
 * value is owned by one thread at a time. */
#ifndef KILN_COMPILER_HLO_REPLICA_GROUPS_H
#define KILN_COMPILER_HLO_REPLICA_GROUPS_H

#include <stdint.h>

#include "base/status.h"

typedef struct {
  int num_groups; /* 0 for {}: all participants form one group */
  int64_t *ids;   /* the groups' ids, concatenated (heap, kiln_free) */
  int *offsets;   /* num_groups + 1 entries: group g is ids[offsets[g] .. offsets[g+1]) */
  int group_size; /* size shared by every group; -1 when sizes differ or num_groups == 0 */
} kiln_hlo_replica_groups_t;

/* Parses `text` (one of the forms above) and checks every id is non-negative and appears
 * once. On error *out is left empty and the message quotes the text. */
kiln_status kiln_hlo_replica_groups_parse(const char *text, kiln_hlo_replica_groups_t *out);
void kiln_hlo_replica_groups_free(kiln_hlo_replica_groups_t *g);

/* collective-permute's source_target_pairs={{s,t},...}: checks every pair has two ids, no
 * source and no target appears twice, and returns the number of pairs in *num_pairs. */
kiln_status kiln_hlo_source_target_pairs_check(const char *text, int *num_pairs);
/* The same checks; on success *out_pairs (heap, kiln_free; NULL when there are no pairs)
 * holds source, target, source, target, ... for the *num_pairs pairs. */
kiln_status kiln_hlo_source_target_pairs_parse(const char *text, int64_t **out_pairs,
                                               int *num_pairs);

#endif
