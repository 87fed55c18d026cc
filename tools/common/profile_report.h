/* The per-thunk profile of an executable (runtime/thunk.h, "profile") as a table for people:
 * one row per thunk, sorted by total time, with the HLO instruction each thunk came from when
 * the compiled module is at hand (kiln-run --profile). */
#ifndef KILN_TOOLS_COMMON_PROFILE_REPORT_H_
#define KILN_TOOLS_COMMON_PROFILE_REPORT_H_

#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "runtime/thunk.h"

/* Appends the table of `p` to `b`: a header (runs, the mean step, what the top-level thunks
 * add up to), the time per thunk kind (thunks that hold no profiled thunk), then one row per
 * thunk sorted by total time — % of the step, total, mean and max ms (a slow first
 * run shows as max well above mean), calls, kind, the thunk's
 * name (its HLO instruction), the kernel, what it does (kiln_thunk_describe) and, when `m`
 * (the module as compiled: the thunks' names are its instructions'; may be NULL) has the
 * instruction, its opcode (a fusion's kind and root opcode) and shapes — and the thunk
 * holding it when nested. `max_rows` <= 0: every row. */
void kiln_profile_report_format(kiln_strbuf_t *b, const kiln_thunk_profile_t *p,
                                const kiln_hlo_module_t *m, int max_rows);

#endif /* KILN_TOOLS_COMMON_PROFILE_REPORT_H_ */
