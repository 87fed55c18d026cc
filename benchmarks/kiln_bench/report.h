/* kiln-bench's results: run-time statistics, the terminal table, the JSON file (written and
 * read back), the comparison of two JSON files, and the gnuplot SVG.
 *
 * JSON schema "kiln-bench/1" (one object per module and mode):
 *   {
 *     "schema": "kiln-bench/1",
 *     "plugin": "<path>", "plugin_version": "kiln 0.x.y", "platform": "cpu",
 *     "results": [
 *       {
 *         "module": "xla/foo.hlo#1",     the module's name (file, #index in a multi-module file)
 *         "file": "<path>",
 *         "mode": "cmdbuf_on" | "cmdbuf_off",   command buffers on / off in the client
 *         "status": "ok" | "error" | "skipped",
 *         "error": "<message>",           the error, or why it was skipped ("skipped: ...")
 *         "compile_cold_ms": 12.5,        PJRT_Client_Compile + the first execute (kiln makes
 *                                         its kernels then), empty disk cache, first client
 *         "compile_warm_ms": 1.2,         the same in a new client of this mode, served by
 *                                         the disk cache the cold compile filled
 *         "compile_ms": 0.8,              ... of which PJRT_Client_Compile alone (warm)
 *         "warmup": 2, "runs": 100,       executes before timing; timed executes
 *         "min_us", "p10_us", "p50_us", "p90_us", "p99_us", "mean_us": run time per execute
 *                                         (Execute + wait for completion between two clock
 *                                         reads), microseconds
 *         "host_us": 3.1,                 mean time inside the Execute call (before the wait),
 *                                         on probe executes (one per 8 runs, not in "runs")
 *         "kernels": 4, "gemms": 0, "command_buffers": 1,   in the executable (the plugin's
 *                                         cost analysis: kiln.kernels, ...; -1: not reported)
 *         "bytes_per_run": 1048576,       argument + output bytes on the device
 *         "gbps": 12.3                    bytes_per_run / p50, GB/s (1e9 bytes per second)
 *       }, ...
 *     ]
 *   }
 * Numbers of an "error" or "skipped" object are 0 (counts -1). Readers ignore unknown keys. */
#ifndef KILN_BENCHMARKS_KILN_BENCH_REPORT_H_
#define KILN_BENCHMARKS_KILN_BENCH_REPORT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"

#define KILN_BENCH_SCHEMA "kiln-bench/1"

typedef struct kiln_bench_result {
  char *module, *file, *mode, *error; /* owned; error NULL when ok */
  double compile_cold_ms, compile_warm_ms, compile_ms;
  int64_t warmup, runs;
  double min_us, p10_us, p50_us, p90_us, p99_us, mean_us, host_us;
  int64_t kernels, gemms, command_buffers;
  int64_t bytes_per_run;
  double gbps;
} kiln_bench_result_t;

typedef struct kiln_bench_results {
  char *plugin, *plugin_version, *platform; /* owned */
  kiln_bench_result_t *items;
  size_t len, cap;
} kiln_bench_results_t;

/* Appends a zeroed result (counts -1) with copies of the strings; returns it. */
kiln_bench_result_t *kiln_bench_results_add(kiln_bench_results_t *rs, const char *module,
                                            const char *file, const char *mode);
void kiln_bench_results_free(kiln_bench_results_t *rs);

/* A result left out on purpose (its error starts with "skipped:"). */
bool kiln_bench_result_skipped(const kiln_bench_result_t *r);

/* Fills the run-time statistics of `r` from `n` samples (microseconds; sorted in place). */
void kiln_bench_result_set_samples(kiln_bench_result_t *r, double *samples_us, size_t n);

/* The terminal table, one row per result. */
void kiln_bench_results_table(kiln_strbuf_t *b, const kiln_bench_results_t *rs);
/* The JSON document above. */
void kiln_bench_results_json(kiln_strbuf_t *b, const kiln_bench_results_t *rs);
/* Reads a JSON document of the schema above (other schemas are INVALID_ARGUMENT). */
kiln_status kiln_bench_results_parse(const char *text, size_t len, const char *what,
                                     kiln_bench_results_t *out);
kiln_status kiln_bench_results_read_file(const char *path, kiln_bench_results_t *out);

/* Comparison of `base` and `cur` (results matched by module and mode): per pair the ratio
 * cur/base of p50 run time and of the warm compile time, and the noise threshold: the larger
 * relative spread of the two, (p90 - p10) / (2 * p50), times 3, at least `min_threshold`
 * (0.05 when <= 0). A pair whose ratio exceeds 1 + threshold is a regression, below
 * 1 / (1 + threshold) an improvement. Writes the table to `b` and the counts to the outs
 * (optional). */
void kiln_bench_compare(const kiln_bench_results_t *base, const kiln_bench_results_t *cur,
                        double min_threshold, kiln_strbuf_t *b, int *regressions, int *improvements,
                        int *matched);

/* Writes an SVG (a PNG when the path ends in .png) with gnuplot: run time p50 per module with
 * command buffers on and off, and compile time cold vs warm. UNAVAILABLE when gnuplot is not
 * installed (Debian: gnuplot-nox). */
kiln_status kiln_bench_plot(const kiln_bench_results_t *rs, const char *svg_path);

#endif /* KILN_BENCHMARKS_KILN_BENCH_REPORT_H_ */
