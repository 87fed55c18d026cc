/* kiln-fusion-report: kiln's kernel count against XLA's on the corpus's before/after pairs.
 *   kiln-fusion-report [--dir=DIR] [--passes=LIST] [--dump=FILE]
 * DIR defaults to $KILN_CORPUS_DIR/real. --dump=FILE prints the fused module of every pair
 * whose name contains FILE (for looking at what kiln did). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "plugin/env_options.h"
#include "tools/common/fusion_report.h"
#include "tools/common/hlo_file.h"

static int dump_pair(const kiln_report_pair_t *p, const char *passes, const char *which) {
  kiln_hlo_file_t *f = NULL;
  kiln_status st = kiln_hlo_file_load(strcmp(which, "after") ? p->before_path : p->after_path, &f);
  for (int i = 0; !st && i < f->num_modules; i++) {
    if (strcmp(which, "after")) {
      kiln_pass_options_t o = {.verify = 1};
      kiln_pjrt_pass_options_from_env(&o);
      st = kiln_pass_run_list(f->modules[i], passes, &o);
    }
    if (!st) {
      char *text = kiln_hlo_module_to_string(f->modules[i]);
      fputs(text, stdout);
      kiln_free(text);
    }
  }
  if (f) kiln_hlo_file_free(f);
  if (st) {
    fprintf(stderr, "kiln-fusion-report: %s\n", kiln_status_message(st));
    kiln_status_free(st);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *dir_arg = NULL, *passes_arg = NULL, *dump = NULL, *which = "kiln";
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--dir=", 6))
      dir_arg = argv[i] + 6;
    else if (!strncmp(argv[i], "--passes=", 9))
      passes_arg = argv[i] + 9;
    else if (!strncmp(argv[i], "--dump=", 7))
      dump = argv[i] + 7;
    else if (!strcmp(argv[i], "--dump-xla"))
      which = "after";
    else {
      fprintf(stderr,
              "usage: kiln-fusion-report [--dir=DIR] [--passes=LIST] [--dump=NAME [--dump-xla]]\n");
      return 2;
    }
  }
  kiln_strbuf_t dir = {0}, passes = {0};
  if (dir_arg)
    kiln_strbuf_append(&dir, dir_arg);
  else
    kiln_strbuf_printf(&dir, "%s/real", kiln_corpus_dir());
  if (passes_arg)
    kiln_strbuf_append(&passes, passes_arg);
  else
    kiln_report_pass_list(&passes);

  kiln_report_pair_t *pairs = NULL;
  int n = 0;
  kiln_status st = kiln_report_pairs_find(kiln_strbuf_cstr(&dir), &pairs, &n);
  if (st) {
    fprintf(stderr, "kiln-fusion-report: %s\n", kiln_status_message(st));
    return 1;
  }
  int rc = 0;
  if (dump) {
    for (int i = 0; i < n; i++)
      if (strstr(pairs[i].name, dump)) rc |= dump_pair(&pairs[i], kiln_strbuf_cstr(&passes), which);
  } else {
    printf("passes: %s\n", kiln_strbuf_cstr(&passes));
    for (int i = 0; i < n; i++)
      kiln_status_free(kiln_report_pair_run(&pairs[i], kiln_strbuf_cstr(&passes)));
    kiln_strbuf_t out = {0};
    kiln_report_fusions_print(&out, pairs, n);
    fputs(kiln_strbuf_cstr(&out), stdout);
    kiln_strbuf_free(&out);
  }
  kiln_report_pairs_free(pairs, n);
  kiln_strbuf_free(&dir);
  kiln_strbuf_free(&passes);
  return rc;
}
