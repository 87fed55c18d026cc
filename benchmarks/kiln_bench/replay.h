/* Replay folders: a compiled executable and the inputs and outputs of one run of it, so that a
 * bug report (or a benchmark) is a folder anyone can replay through the plugin.
 *
 *   DIR/MANIFEST        "kiln-replay 1", then one "key value" line each:
 *                         module <name>            the module the executable came from
 *                         plugin <path>            the plugin that compiled it
 *                         plugin_version <v>       its version (kiln_bench_plugin_t.version)
 *                         platform <name>          its client's platform ("cpu", "cuda")
 *                         executable <file>        the serialized executable
 * (PJRT_Executable_Serialize) arg<I> <type> <dims...>  input I (a flattened parameter leaf):
 * arg<I>.npy out<I> <type> <dims...>  output I as the saving run made it: out<I>.npy
 *   DIR/executable.bin, DIR/arg<I>.npy, DIR/out<I>.npy
 *
 * kiln_bench_replay_run loads the executable through PJRT_Executable_DeserializeAndLoad of
 * the plugin given, runs it on the inputs and compares every output with the saved one bit
 * for bit. A missing file is NOT_FOUND naming it; a plugin whose version differs from the
 * manifest's is FAILED_PRECONDITION (saying which plugin made it); an executable the plugin
 * rejects (corrupted, truncated) is the plugin's error naming the file. */
#ifndef KILN_BENCHMARKS_KILN_BENCH_REPLAY_H_
#define KILN_BENCHMARKS_KILN_BENCH_REPLAY_H_

#include <stdint.h>

#include "base/status.h"
#include "benchmarks/kiln_bench/client.h"
#include "compiler/hlo/literal.h"

/* Compiles `code` (`format`) on `c`, runs it once on `args` (array literals, one per flattened
 * parameter), and writes the folder `dir` (created if missing; existing files replaced). */
kiln_status kiln_bench_replay_save(const kiln_bench_client_t *c, const char *dir,
                                   const char *module_name, const char *code, size_t len,
                                   const char *format, kiln_literal_t *const *args, int num_args);

typedef struct kiln_bench_replay_report {
  char module[256];
  int inputs, outputs;
  int mismatches;           /* outputs that differ from the saved ones */
  char first_mismatch[512]; /* "out0: f32[2,3] element 4: 0x3f800000 saved, 0x3f800001 now" */
  double load_ms, run_ms;   /* DeserializeAndLoad; the execute (the first builds kernels) */
} kiln_bench_replay_report_t;

/* Replays `dir` on a client of plugin `p` (`platform`: NULL means the manifest's). */
kiln_status kiln_bench_replay_run(const kiln_bench_plugin_t *p, const char *platform,
                                  const char *dir, kiln_bench_replay_report_t *rep);

#endif /* KILN_BENCHMARKS_KILN_BENCH_REPLAY_H_ */
