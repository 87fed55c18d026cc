/* Fusion quality against XLA: the corpus's real/ folder holds dumps of the same programs
 * before and after XLA:GPU's optimizations. For each pair, kiln's pipeline runs on the
 * "before" module and its kernels are counted next to the kernels of XLA's "after" module,
 * with one counting rule (kiln_fusion_count_kernels: fusions plus unfused non-trivial ops
 * over the entry and the computations control flow calls; parameters, constants, tuples,
 * get-tuple-elements and bitcast-like ops are free). */
#ifndef KILN_TOOLS_COMMON_FUSION_REPORT_H_
#define KILN_TOOLS_COMMON_FUSION_REPORT_H_

#include <stdint.h>

#include "base/status.h"
#include "base/str.h"

typedef struct kiln_report_pair {
  char *name;             /* the before file's name without the "before_optimizations" part */
  char *before_path;      /* owned */
  char *after_path;       /* owned */
  int64_t before_kernels; /* the before module, unfused */
  int64_t kiln_kernels;   /* after kiln's passes */
  int64_t xla_kernels;    /* XLA's after module */
  char *error;            /* owned; NULL when the pair ran */
} kiln_report_pair_t;

/* Finds the GPU pairs in `dir` (files holding `before_optimizations` and the matching
 * `after_optimizations` file whose name says gpu), sorted by name. The caller frees the
 * array with kiln_report_pairs_free. */
kiln_status kiln_report_pairs_find(const char *dir, kiln_report_pair_t **out, int *out_n);
void kiln_report_pairs_free(kiln_report_pair_t *pairs, int n);

/* The pass list the report runs: the simplification passes registered under the names
 * kiln's pipeline uses (those not registered are left out), then priority_fusion and
 * multi_output_fusion, then cse/dce when registered. Written to `b`. */
void kiln_report_pass_list(kiln_strbuf_t *b);

/* Loads both files of `p`, runs `passes` on the before module(s) and fills the counts;
 * a failure is recorded in p->error (and returned). */
kiln_status kiln_report_pair_run(kiln_report_pair_t *p, const char *passes);

/* Appends the table (pair, before, kiln, XLA, kiln - XLA) and the totals. */
void kiln_report_fusions_print(kiln_strbuf_t *b, const kiln_report_pair_t *pairs, int n);

#endif /* KILN_TOOLS_COMMON_FUSION_REPORT_H_ */
