/* kiln-replay: replays a saved executable (a folder kiln-run --save=DIR wrote; replay.h) through
 * a PJRT plugin and checks its outputs against the saved ones bit for bit.
 *
 *   kiln-replay [--plugin=PATH] [--platform=NAME] DIR
 *
 * Exit 0 when every output matches, 1 when one differs or the folder cannot be replayed (the
 * reason printed), 2 for bad usage. */
#include <stdio.h>
#include <string.h>

#include "benchmarks/kiln_bench/replay.h"

int main(int argc, char **argv) {
  const char *plugin = NULL, *platform = NULL, *dir = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--plugin=", 9))
      plugin = argv[i] + 9;
    else if (!strncmp(argv[i], "--platform=", 11))
      platform = argv[i] + 11;
    else if (argv[i][0] != '-' && !dir)
      dir = argv[i];
    else {
      fprintf(stderr, "kiln-replay: unexpected argument %s\n", argv[i]);
      dir = NULL;
      break;
    }
  }
  if (!dir) {
    fputs("usage: kiln-replay [--plugin=PATH] [--platform=NAME] DIR\n", stderr);
    return 2;
  }
  kiln_bench_plugin_t p;
  kiln_bench_replay_report_t rep;
  kiln_status s = kiln_bench_plugin_open(plugin, &p);
  if (!s) s = kiln_bench_replay_run(&p, platform, dir, &rep);
  if (s) {
    fprintf(stderr, "kiln-replay: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return 1;
  }
  printf("kiln-replay: %s (%s): %d inputs, %d outputs; loaded in %.1f ms, ran in %.1f ms\n",
         rep.module, p.version, rep.inputs, rep.outputs, rep.load_ms, rep.run_ms);
  if (rep.mismatches) {
    printf("kiln-replay: MISMATCH: %d of %d outputs differ from the saved ones; first: %s\n",
           rep.mismatches, rep.outputs, rep.first_mismatch);
    return 1;
  }
  printf("kiln-replay: all %d outputs match the saved ones bit for bit\n", rep.outputs);
  return 0;
}
