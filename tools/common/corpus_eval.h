/* Corpus modules: the rules test_corpus_eval applies to decide whether the reference
 * evaluator can run a module here (factored out so other corpus tests share them).
 *
 * A module is not eligible when it has a custom-call, infeed/outfeed/send/recv, a collective
 * with more than one participant in a group (replica_groups with a group of two or more,
 * empty groups with replica_count > 1, or with a channel_id and num_partitions > 1), a
 * collective-permute that moves data between devices, or an elided constant. A module is
 * too costly when its parameters hold more than KILN_CORPUS_MAX_PARAM_ELEMENTS elements or
 * its estimated element-operations exceed a bound (instructions' output elements,
 * dot/convolution multiply-adds, reductions' input elements times their reducer's size,
 * fusions and calls by their bodies, while loops by their body times known_trip_count,
 * else the constant their condition compares with, else once). */
#ifndef KILN_TOOLS_CORPUS_EVAL_H_
#define KILN_TOOLS_CORPUS_EVAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler/hlo/ir.h"

#define KILN_CORPUS_MAX_PARAM_ELEMENTS (INT64_C(1) << 26)
#define KILN_CORPUS_MAX_COST 2.0e9

/* NULL when eligible, else why not (a static string). */
const char *kiln_corpus_eval_ineligible_reason(const kiln_hlo_module_t *m);
/* NULL when cheap enough under `max_cost` element-operations, else `why` filled. */
const char *kiln_corpus_eval_too_costly(const kiln_hlo_module_t *m, double max_cost, char *why,
                                        size_t why_n);
/* The multi-device corpus tests' bound on element-operations over all participants:
 * `fallback` (kept for CI time), or KILN_CORPUS_SPMD_MAX_COST when set to a positive number
 * (a developer's longer run: KILN_CORPUS_SPMD_MAX_COST=1e9 ./build/test_corpus_host_spmd). */
double kiln_corpus_spmd_max_cost(double fallback);
/* The estimated element-operations of evaluating the entry computation once. */
double kiln_corpus_eval_cost(const kiln_hlo_module_t *m);
/* The largest group in a replica_groups value: {{0,1},{2,3}} -> 2, [2,4]<=[8] -> 4,
 * {} -> 0 (all participants), a mesh form -> INT64_MAX. */
int64_t kiln_corpus_largest_replica_group(const char *g);
/* A collective-permute moves data when some pair has source != target. */
bool kiln_corpus_permute_moves_data(const char *pairs);

/* The multi-device corpus tests (test_corpus_eval_spmd, test_corpus_host_spmd): whether
 * module `index` of `path` is a multi-device module (a collective, and ineligible for the
 * single-device tests for needing several participants; *multi) and, if so, why it is left out
 * (*skip: infeed/outfeed/send/recv, an elided constant, "invalid on purpose", or NULL: run it;
 * a custom call is no reason: the evaluator says whether it knows the target). */
void kiln_corpus_multi_device_module(const kiln_hlo_module_t *m, const char *path, int index,
                                     bool *multi, const char **skip);

#endif /* KILN_TOOLS_CORPUS_EVAL_H_ */
