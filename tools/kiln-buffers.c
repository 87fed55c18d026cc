/* kiln-buffers: buffer assignment of HLO modules, printed.
 *
 *   kiln-buffers [options] FILE.hlo...
 *
 * Each module (several per file, split on `// -----`) runs the passes needed — by default
 * the fusion passes when they are registered, then copy_insertion and schedule — then
 * buffer assignment and its checker, and prints the assignment (or only its statistics)
 * with peak memory against the sum of all temp buffers and the live lower bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/buffer_assignment.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "compiler/passes/schedule.h"
#include "plugin/env_options.h"
#include "tools/common/hlo_file.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: kiln-buffers [options] FILE.hlo...\n"
          "  Runs fusion (when registered), copy_insertion and schedule on each module, then\n"
          "  buffer assignment and its checker, and prints the assignment.\n"
          "options:\n"
          "  --passes=LIST   run these passes instead of the default list before\n"
          "                  buffer assignment (copy_insertion and schedule are appended\n"
          "                  when missing)\n"
          "  --pipeline      run the whole optimization pipeline first\n"
          "  --no-fusion     do not run the fusion passes\n"
          "  --summary       print one line of statistics per module instead of the text\n"
          "  --module=N      only the N-th module of a multi-module file (0-based)\n"
          "  --no-reuse      disable in-place reuse of dying operands' slices\n"
          "  -h, --help      this text\n");
}

typedef struct opts {
  const char *passes;
  bool pipeline, no_fusion, summary, no_reuse;
  int module;
} opts_t;

static kiln_status prepare(kiln_hlo_module_t *m, const opts_t *o) {
  kiln_pass_options_t po = {.verify = 1};
  kiln_pjrt_pass_options_from_env(&po);
  if (o->pipeline) return kiln_pipeline_run(m, &po);
  kiln_strbuf_t list = {0};
  if (o->passes) {
    kiln_strbuf_append(&list, o->passes);
  } else if (!o->no_fusion) {
    const char *fusion[] = {"priority_fusion", "multi_output_fusion"};
    for (int i = 0; i < 2; i++)
      if (kiln_pass_find(fusion[i])) kiln_strbuf_printf(&list, "%s%s", list.len ? "," : "", fusion[i]);
  }
  const char *need[] = {"copy_insertion", "schedule"};
  for (int i = 0; i < 2; i++)
    if (!strstr(kiln_strbuf_cstr(&list), need[i]))
      kiln_strbuf_printf(&list, "%s%s", list.len ? "," : "", need[i]);
  kiln_status s = kiln_pass_run_list(m, kiln_strbuf_cstr(&list), &po);
  kiln_strbuf_free(&list);
  return s;
}

static int run_module(kiln_hlo_module_t *m, const char *label, const opts_t *o) {
  kiln_status s = prepare(m, o);
  if (s) {
    fprintf(stderr, "%s: ", label);
    kiln_status_report(s, "passes");
    return 1;
  }
  int64_t sched_peak = 0;
  s = kiln_schedule_peak_memory(m, &sched_peak);
  if (s) {
    fprintf(stderr, "%s: ", label);
    kiln_status_report(s, "schedule");
    return 1;
  }
  kiln_buffer_assignment_options_t bo = {0};
  bo.no_inplace_reuse = o->no_reuse;
  kiln_buffer_assignment_t *ba = NULL;
  s = kiln_buffer_assignment_run(m, &bo, &ba);
  if (s) {
    fprintf(stderr, "%s: ", label);
    kiln_status_report(s, "buffer assignment");
    return 1;
  }
  kiln_status check = kiln_buffer_assignment_check(ba);
  kiln_strbuf_t b = {0};
  if (o->summary) {
    const kiln_buffer_assignment_stats_t *st = &ba->stats;
    kiln_strbuf_printf(&b,
                       "%s: temp %lld / sum %lld / lower bound %lld (%.2fx bound), total %lld, "
                       "%d allocations, %d reuses, scheduler-simulated peak %lld, check %s\n",
                       label, (long long)st->temp_bytes, (long long)st->temp_sum,
                       (long long)st->temp_lower_bound,
                       st->temp_lower_bound ? (double)st->temp_bytes / (double)st->temp_lower_bound : 1.0,
                       (long long)st->total_bytes, ba->num_allocations, st->num_inplace_reuses,
                       (long long)sched_peak, check ? "FAILED" : "ok");
  } else {
    kiln_strbuf_printf(&b, "// %s\n", label);
    kiln_buffer_assignment_print(&b, ba);
    kiln_strbuf_printf(&b, "scheduler-simulated peak %lld bytes; checker: %s\n\n", (long long)sched_peak,
                       check ? "FAILED" : "no overlap of simultaneously live values");
  }
  fputs(kiln_strbuf_cstr(&b), stdout);
  kiln_strbuf_free(&b);
  kiln_buffer_assignment_free(ba);
  if (check) {
    fprintf(stderr, "%s: ", label);
    kiln_status_report(check, "buffer check");
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  opts_t o = {.module = -1};
  int nfiles = 0, rc = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strncmp(a, "--passes=", 9)) {
      o.passes = a + 9;
    } else if (!strcmp(a, "--pipeline")) {
      o.pipeline = true;
    } else if (!strcmp(a, "--no-fusion")) {
      o.no_fusion = true;
    } else if (!strcmp(a, "--summary")) {
      o.summary = true;
    } else if (!strcmp(a, "--no-reuse")) {
      o.no_reuse = true;
    } else if (!strncmp(a, "--module=", 9)) {
      o.module = atoi(a + 9);
    } else if (a[0] == '-') {
      fprintf(stderr, "kiln-buffers: unknown option %s\n", a);
      usage(stderr);
      return 2;
    } else {
      nfiles++;
    }
  }
  if (!nfiles) {
    usage(stderr);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(argv[i], &f);
    if (s) {
      kiln_status_report(s, argv[i]);
      rc = 1;
      continue;
    }
    for (int k = 0; k < f->num_modules; k++) {
      if (o.module >= 0 && k != o.module) continue;
      char label[4200];
      if (f->num_modules > 1) snprintf(label, sizeof label, "%s#%d", argv[i], k);
      else snprintf(label, sizeof label, "%s", argv[i]);
      if (run_module(f->modules[k], label, &o)) rc = 1;
    }
    kiln_hlo_file_free(f);
  }
  return rc;
}
