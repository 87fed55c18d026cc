#include "tools/common/hlo_file.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/str.h"

double kiln_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double kiln_thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *kiln_corpus_dir(void) {
  const char *env = getenv("KILN_CORPUS_DIR");
  if (env && *env) return env;
#ifdef KILN_CORPUS_DIR
  return KILN_CORPUS_DIR;
#else
  return "../shared/hlo-corpus";
#endif
}

bool kiln_hlo_text_has_module_header(const char *text, size_t len) {
  /* Looks for `HloModule` at the start of a line (ignoring leading blanks). */
  const char *p = text, *end = text + len;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if ((size_t)(end - p) >= 9 && memcmp(p, "HloModule", 9) == 0) return true;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) break;
    p = nl + 1;
  }
  return false;
}

kiln_status kiln_hlo_file_load(const char *path, kiln_hlo_file_t **out) {
  *out = NULL;
  kiln_hlo_file_t *f = kiln_calloc(1, sizeof *f);
  kiln_status s = kiln_read_file(path, &f->text, &f->len);
  if (s) {
    kiln_free(f);
    return s;
  }
  kiln_hlo_parse_options_t opts = {.filename = path};
  double t0 = kiln_now_seconds();
  if (kiln_hlo_text_has_module_header(f->text, f->len)) {
    s = kiln_hlo_parse_modules(f->text, f->len, &opts, &f->modules, &f->num_modules);
  } else {
    f->bare = true;
    kiln_hlo_module_t *m = NULL;
    s = kiln_hlo_parse_computations(f->text, f->len, &opts, &m);
    if (!s) {
      f->modules = kiln_malloc(sizeof *f->modules);
      f->modules[0] = m;
      f->num_modules = 1;
    }
  }
  f->parse_seconds = kiln_now_seconds() - t0;
  if (s) {
    kiln_hlo_file_free(f);
    return s;
  }
  *out = f;
  return NULL;
}

void kiln_hlo_file_free(kiln_hlo_file_t *f) {
  if (!f) return;
  for (int i = 0; i < f->num_modules; i++) kiln_hlo_module_destroy(f->modules[i]);
  kiln_free(f->modules);
  kiln_free(f->text);
  kiln_free(f);
}
