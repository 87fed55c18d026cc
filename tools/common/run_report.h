/* Summaries of evaluation results for tools and corpus runners: flatten a (possibly
 * tuple) literal into its array leaves, and describe each leaf with its shape, its first
 * values and two checksums — the sum of its values as a double (real and imaginary parts
 * summed separately for complex types; NaN and Inf counted apart and left out of the sum)
 * and a 64-bit FNV-1a hash of its storage bytes, which is bit-exact. */
#ifndef KILN_TOOLS_COMMON_RUN_REPORT_H_
#define KILN_TOOLS_COMMON_RUN_REPORT_H_

#include <stdint.h>

#include "base/str.h"
#include "compiler/hlo/literal.h"

/* Number of array (and token) leaves of `l`, depth-first; 1 for an array. */
int kiln_run_report_num_leaves(const kiln_literal_t *l);
/* The `index`-th leaf of `l` in depth-first order, or NULL when out of range. Borrowed. */
const kiln_literal_t *kiln_run_report_leaf(const kiln_literal_t *l, int index);

typedef struct kiln_run_report_summary {
  int64_t num_elements;
  double sum;        /* of finite values (real parts for complex) */
  double sum_imag;   /* complex types: of finite imaginary parts */
  int64_t nan_count; /* elements with a NaN part */
  int64_t inf_count; /* elements with an infinite part */
  uint64_t fnv1a;    /* of the storage bytes (kiln_hash_bytes) */
} kiln_run_report_summary_t;

void kiln_run_report_summarize(const kiln_literal_t *leaf, kiln_run_report_summary_t *out);

/* Appends one line: `<label> <shape> {v0, v1, ...} sum=<g> [nan=N] [inf=N] fnv1a=0x...`
 * with at most `max_values` values (`...` when there are more). */
void kiln_run_report_print_leaf(kiln_strbuf_t *b, const char *label, const kiln_literal_t *leaf,
                                int max_values);

#endif /* KILN_TOOLS_COMMON_RUN_REPORT_H_ */
