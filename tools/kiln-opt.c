/* kiln-opt FILE: parse, verify and print an HLO file; --stats adds the op histogram, the
 * number of computations and instructions, and the parse time. --passes=LIST runs a list
 * of registered passes ("a,b,(c,d)": parentheses make a fixed-point group) and
 * --pipeline the whole optimization pipeline before printing; --stats then describes the
 * result and adds the pass time. --emitters prints, instead of the module text, one line per
 * fusion: its computation, the emitter that runs it (kiln_codegen_choose_emitter, what the
 * dispatcher itself calls), the fusion compiler's classification and the hero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/str.h"
#include "plugin/env_options.h"
#include "tools/common/fusion_runner.h"
#include "compiler/codegen/hero_analysis.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/hlo_file.h"
#include "tools/common/stablehlo_run.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: kiln-opt [options] FILE.hlo | FILE.mlir | FILE.mlirbc (StableHLO: each part's\n"
          "       entry function converted to HLO)\n"
          "  Parses an HLO file (modules, several split on '// -----', or bare\n"
          "  computations), verifies it and prints it in canonical form.\n"
          "options:\n"
          "  --stats        print op histogram, computation/instruction counts, parse time\n"
          "  --no-verify    skip the verifier\n"
          "  --no-print     do not print the module text\n"
          "  --module=N     only the N-th module of a multi-module file (0-based)\n"
          "  --passes=LIST  run registered passes in order before printing, e.g.\n"
          "                 --passes=call_inline,(simplify,constant_folding,dce,cse)\n"
          "                 (parentheses: run the group until nothing changes)\n"
          "  --pipeline     run the whole optimization pipeline before printing\n"
          "  --list-passes  print the registered passes and the pipeline's stages\n"
          "  --emitters     instead of the module text, print one line per fusion (after\n"
          "                 the passes): computation, the emitter that runs it,\n"
          "                 classification, hero\n"
          "  --pass-times   print each pass's wall time (total over its runs), run count and\n"
          "                 time per instruction of the input, slowest first\n"
          "  --log-passes   print each pass that changed the module to stderr\n"
          "  --dump-to=DIR  write the module after each pass that changed it (as\n"
          "                 KILN_DUMP_TO=DIR does)\n"
          "  --combine-threshold-bytes=N  the all-reduce / all-gather / reduce-scatter\n"
          "                 combiners' size bound (default 30 MiB; negative: off)\n"
          "  -h, --help     this text\n");
}

static void list_passes(FILE *out) {
  int n = 0;
  const kiln_pass_t *p = kiln_pass_registry(&n);
  fprintf(out, "registered passes:\n");
  for (int i = 0; i < n; i++) fprintf(out, "  %-24s %s\n", p[i].name, p[i].summary);
  kiln_strbuf_t b = {0};
  kiln_pipeline_describe(&b);
  fprintf(out, "pipeline (--pipeline):\n%s", kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
}

/* One line per fusion computation of `m` (kiln_runner_collect_fusions): the emitter the
 * dispatcher runs it with (kiln_codegen_choose_emitter), the fusion compiler's
 * classification and the deciding hero (the hero analysis's, else the classification's). */
static void print_emitters(const kiln_hlo_module_t *m, FILE *out) {
  const kiln_hlo_computation_t **cs = NULL;
  int n = 0;
  kiln_runner_collect_fusions(m, &cs, &n);
  for (int i = 0; i < n; i++) {
    const kiln_hlo_instruction_t *chero = NULL;
    kiln_codegen_emitter_t kind = kiln_codegen_classify(cs[i], &chero), chosen;
    kiln_status s = kiln_codegen_choose_emitter(cs[i], &chosen);
    kiln_hero_analysis_t ha;
    if (!s) s = kiln_hero_analyze(cs[i], &ha);
    if (s) {
      fprintf(out, "fusion %s: emitter=? (%s) classify=%s\n", cs[i]->name, kiln_status_message(s),
              kiln_codegen_emitter_name(kind));
      kiln_status_free(s);
      continue;
    }
    const kiln_hlo_instruction_t *hero = ha.hero ? ha.hero : chero;
    fprintf(out, "fusion %s: emitter=%s classify=%s hero=%s\n", cs[i]->name,
            kiln_codegen_emitter_name(chosen), kiln_codegen_emitter_name(kind),
            hero ? hero->name : "-");
  }
  kiln_free(cs);
}

static void print_stats(const kiln_hlo_module_t *m, FILE *out) {
  int64_t hist[KILN_OP_COUNT] = {0};
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) hist[comp->instructions.data[i]->opcode]++;
  }
  fprintf(out, "// module %s: %zu computations, %lld instructions\n", m->name,
          m->computations.len, (long long)kiln_hlo_module_instruction_count(m));
  /* Histogram sorted by count, descending. */
  int order[KILN_OP_COUNT];
  int n = 0;
  for (int i = 0; i < KILN_OP_COUNT; i++)
    if (hist[i]) order[n++] = i;
  for (int i = 1; i < n; i++) {
    int v = order[i], j = i;
    while (j > 0 && hist[order[j - 1]] < hist[v]) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = v;
  }
  for (int i = 0; i < n; i++)
    fprintf(out, "//   %-28s %lld\n", kiln_hlo_opcode_name((kiln_hlo_opcode_t)order[i]),
            (long long)hist[order[i]]);
}

/* --pass-times: one line per pass, slowest first, with the time per input instruction. */
static void print_pass_times(kiln_pass_timings_t *t, int64_t instrs, FILE *out) {
  double total = 0;
  for (int i = 0; i < t->num_entries; i++) total += t->entries[i].seconds;
  for (int i = 1; i < t->num_entries; i++) /* insertion sort, slowest first */
    for (int j = i; j > 0 && t->entries[j].seconds > t->entries[j - 1].seconds; j--) {
      kiln_pass_timing_t x = t->entries[j];
      t->entries[j] = t->entries[j - 1];
      t->entries[j - 1] = x;
    }
  fprintf(out,
          "// pass times (%lld instructions in): pass, wall ms, cpu ms, runs, changed, "
          "wall us/instruction\n",
          (long long)instrs);
  for (int i = 0; i < t->num_entries; i++) {
    const kiln_pass_timing_t *e = &t->entries[i];
    fprintf(out, "//   %-28s %10.3f %10.3f %4d %4d %10.3f\n", e->name, e->seconds * 1e3,
            e->cpu_seconds * 1e3, e->runs, e->changed,
            instrs ? e->seconds * 1e6 / (double)instrs : 0.0);
  }
  fprintf(out, "//   %-28s %10.3f\n", "total", total * 1e3);
}

int main(int argc, char **argv) {
  bool stats = false, verify = true, print = true, pipeline = false, emitters = false;
  int only_module = -1;
  const char *path = NULL, *passes = NULL;
  kiln_pass_options_t popts = {.verify = -1};
  kiln_pass_timings_t timings = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--stats")) {
      stats = true;
    } else if (!strcmp(a, "--no-verify")) {
      verify = false;
    } else if (!strcmp(a, "--no-print")) {
      print = false;
    } else if (!strncmp(a, "--module=", 9)) {
      only_module = atoi(a + 9);
    } else if (!strncmp(a, "--passes=", 9)) {
      passes = a + 9;
    } else if (!strcmp(a, "--emitters")) {
      emitters = true;
    } else if (!strcmp(a, "--pipeline")) {
      pipeline = true;
    } else if (!strcmp(a, "--pass-times")) {
      popts.timings = &timings;
    } else if (!strcmp(a, "--log-passes")) {
      popts.log_changes = true;
    } else if (!strncmp(a, "--dump-to=", 10)) {
      popts.dump_dir = a + 10;
    } else if (!strncmp(a, "--combine-threshold-bytes=", 26)) {
      char *end = NULL;
      long long v = strtoll(a + 26, &end, 10);
      if (!a[26] || *end) {
        fprintf(stderr, "kiln-opt: --combine-threshold-bytes needs an integer, not '%s'\n", a + 26);
        return 2;
      }
      popts.all_reduce_combine_threshold_bytes = popts.all_gather_combine_threshold_bytes =
          popts.reduce_scatter_combine_threshold_bytes = (int64_t)v;
    } else if (!strcmp(a, "--list-passes")) {
      list_passes(stdout);
      return 0;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (a[0] == '-') {
      fprintf(stderr, "kiln-opt: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    } else if (path) {
      fprintf(stderr, "kiln-opt: only one input file is accepted ('%s' and '%s')\n", path, a);
      return 2;
    } else {
      path = a;
    }
  }
  if (!path) {
    usage(stderr);
    return 2;
  }
  if (passes && pipeline) {
    fprintf(stderr, "kiln-opt: --passes and --pipeline are exclusive\n");
    return 2;
  }
  kiln_pjrt_pass_options_from_env(&popts); /* what the flags left unset */
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_stablehlo_is_mlir_path(path) ? kiln_stablehlo_file_load(path, &f)
                                                    : kiln_hlo_file_load(path, &f);
  if (s) {
    kiln_status_report(s, "kiln-opt");
    return 1;
  }
  if (only_module >= f->num_modules) {
    fprintf(stderr, "kiln-opt: --module=%d but '%s' holds %d module(s)\n", only_module, path,
            f->num_modules);
    kiln_hlo_file_free(f);
    return 2;
  }
  int rc = 0;
  int64_t total_instrs = 0;
  double pass_seconds = 0;
  for (int i = 0; i < f->num_modules; i++) {
    if (only_module >= 0 && i != only_module) continue;
    kiln_hlo_module_t *m = f->modules[i];
    total_instrs += kiln_hlo_module_instruction_count(m);
    if (verify) {
      kiln_status vs = kiln_hlo_module_verify(m);
      if (vs) {
        kiln_status_report(kiln_status_annotate(vs, "in module '%s' of %s", m->name, path),
                           "kiln-opt");
        rc = 1;
        continue;
      }
    }
    if (passes || pipeline) {
      if (!verify) popts.verify = 0;
      kiln_pipeline_lift_parse_limit(m);
      double t0 = kiln_now_seconds();
      kiln_status ps = pipeline ? kiln_pipeline_run(m, &popts) : kiln_pass_run_list(m, passes, &popts);
      pass_seconds += kiln_now_seconds() - t0;
      if (!ps && verify) ps = kiln_status_annotate(kiln_hlo_module_verify(m), "after the passes");
      if (ps) {
        kiln_status_report(kiln_status_annotate(ps, "in module '%s' of %s", m->name, path),
                           "kiln-opt");
        rc = 1;
        continue;
      }
    }
    if (emitters) {
      print_emitters(m, stdout);
    } else if (print) {
      if (i > 0 && only_module < 0) fputs("// -----\n", stdout);
      char *text = kiln_hlo_module_to_string(m);
      fputs(text, stdout);
      kiln_free(text);
    }
    if (stats) print_stats(m, stdout);
  }
  if (stats) {
    double mb = (double)f->len / 1e6;
    fprintf(stdout, "// file %s: %d module(s), %lld instructions, %.3f MB parsed in %.3f ms (%.1f MB/s)\n",
            path, f->num_modules, (long long)total_instrs, mb, f->parse_seconds * 1e3,
            f->parse_seconds > 0 ? mb / f->parse_seconds : 0.0);
    if (passes || pipeline)
      fprintf(stdout, "// passes (%s): %.3f ms\n", pipeline ? "pipeline" : passes, pass_seconds * 1e3);
  }
  if (popts.timings) print_pass_times(&timings, total_instrs, stdout);
  kiln_hlo_file_free(f);
  return rc;
}
