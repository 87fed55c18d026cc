/* Loading HLO files for the tools and tests: whole modules (several per file, split on
 * `// -----`) or, when the text has no `HloModule`, bare computations. */
#ifndef KILN_TOOLS_HLO_FILE_H_
#define KILN_TOOLS_HLO_FILE_H_

#include "base/status.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_hlo_file {
  char *text; /* file contents (owned) */
  size_t len;
  kiln_hlo_module_t **modules; /* owned, each destroyed by kiln_hlo_file_free */
  int num_modules;
  bool bare; /* parsed as bare computations */
  double parse_seconds;
} kiln_hlo_file_t;

/* True when the text holds a module header (`HloModule`) outside comments. */
bool kiln_hlo_text_has_module_header(const char *text, size_t len);

/* Reads and parses `path`. On error *out is NULL and the status carries the message. */
kiln_status kiln_hlo_file_load(const char *path, kiln_hlo_file_t **out);
void kiln_hlo_file_free(kiln_hlo_file_t *f);

/* Monotonic clock in seconds. */
double kiln_now_seconds(void);
/* CPU time of the calling thread in seconds: what a single-threaded benchmark measures on a
 * loaded machine, where the wall clock counts the time other processes hold the core. */
double kiln_thread_cpu_seconds(void);

/* The corpus folder: $KILN_CORPUS_DIR, else the path compiled in. */
const char *kiln_corpus_dir(void);

#endif /* KILN_TOOLS_HLO_FILE_H_ */
