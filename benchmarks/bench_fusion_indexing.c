/* Fusion indexing throughput: composes and simplifies the output -> input maps of every
 * fusion root in the corpus: every bare fusion computation in emitters/, and every
 * computation called by a `fusion` instruction in the modules of xla/ and real/. Prints
 * maps per second, how many instruction groups were "unknown" (nested fusions are
 * composed through; a bare file whose entry calls its fusion counts the fusion), and, as a baseline
 * measured in the same run, the cost of computing only the per-instruction (uncomposed)
 * maps of the same computations.
 *
 *   bench_fusion_indexing [corpus_dir] [min_seconds]   (defaults: $KILN_CORPUS_DIR, 1.0) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/vec.h"
#include "compiler/analysis/fusion_indexing.h"
#include "compiler/analysis/hlo_indexing.h"
#include "compiler/hlo/ir.h"
#include "tools/common/hlo_file.h"

typedef KILN_VEC(const kiln_hlo_computation_t *) comp_vec_t;
typedef KILN_VEC(kiln_hlo_file_t *) file_vec_t;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads every .hlo file of `dir` (sorted); bare files contribute their entry
 * computation, module files every computation a fusion instruction calls. */
static void load_dir(const char *corpus, const char *sub, file_vec_t *files, comp_vec_t *comps,
                     int *failed) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", corpus, sub);
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "cannot open %s\n", path);
    return;
  }
  KILN_VEC(char *) names = {0};
  struct dirent *e;
  while ((e = readdir(d)))
    if (strlen(e->d_name) > 4 && strcmp(e->d_name + strlen(e->d_name) - 4, ".hlo") == 0)
      kiln_vec_push(&names, strdup(e->d_name));
  closedir(d);
  if (names.len) qsort(names.data, names.len, sizeof *names.data, cmp_str);
  for (size_t i = 0; i < names.len; i++) {
    snprintf(path, sizeof path, "%s/%s/%s", corpus, sub, names.data[i]);
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    free(names.data[i]);
    if (s) {
      (*failed)++;
      kiln_status_free(s);
      continue;
    }
    kiln_vec_push(files, f);
    for (int m = 0; m < f->num_modules; m++) {
      const kiln_hlo_module_t *mod = f->modules[m];
      size_t first = comps->len;
      for (size_t c = 0; c < mod->computations.len; c++) {
        const kiln_hlo_computation_t *comp = mod->computations.data[c];
        for (size_t k = 0; k < comp->instructions.len; k++) {
          const kiln_hlo_instruction_t *x = comp->instructions.data[k];
          if (x->opcode != KILN_OP_FUSION) continue;
          const kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(x, "calls");
          bool dup = !callee;
          for (size_t j = first; j < comps->len && !dup; j++) dup = comps->data[j] == callee;
          if (!dup) kiln_vec_push(comps, callee);
        }
      }
      /* A bare fusion computation with no caller is the fusion itself. */
      if (f->bare && comps->len == first && mod->entry) kiln_vec_push(comps, mod->entry);
    }
  }
  kiln_vec_free(&names);
}

typedef struct totals {
  int64_t fusions, roots, groups, maps, unknown_groups, errors, fusions_with_unknown;
} totals_t;

static void run_once(const comp_vec_t *comps, totals_t *t, bool print_errors) {
  memset(t, 0, sizeof *t);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  for (size_t i = 0; i < comps->len; i++) {
    kiln_indexing_fusion_t fi;
    kiln_status s = kiln_indexing_fusion_compute(ctx, comps->data[i], NULL, &fi);
    t->fusions++;
    if (s) {
      if (print_errors) fprintf(stderr, "  %s: %s\n", comps->data[i]->name, kiln_status_message(s));
      kiln_status_free(s);
      t->errors++;
      continue;
    }
    t->roots += fi.num_roots;
    for (int r = 0; r < fi.num_roots; r++) t->groups += fi.roots[r].num_groups;
    t->maps += fi.num_maps;
    t->unknown_groups += fi.num_unknown;
    t->fusions_with_unknown += fi.num_unknown > 0;
    kiln_indexing_fusion_free(&fi);
    /* A fresh context now and then keeps the hash-consing table from growing forever. */
    if (kiln_affine_ctx_node_count(ctx) > 1000000) {
      kiln_affine_ctx_destroy(ctx);
      ctx = kiln_affine_ctx_create();
    }
  }
  kiln_affine_ctx_destroy(ctx);
}

/* Baseline: only the per-instruction maps (no composition) of the same computations. */
static int64_t run_per_op(const comp_vec_t *comps) {
  int64_t maps = 0;
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  for (size_t i = 0; i < comps->len; i++) {
    const kiln_hlo_computation_t *c = comps->data[i];
    for (size_t k = 0; k < c->instructions.len; k++) {
      kiln_hlo_indexing_t ix;
      kiln_status s = kiln_hlo_indexing_output_to_input(ctx, c->instructions.data[k], 0, &ix);
      if (s) {
        kiln_status_free(s);
        continue;
      }
      for (int j = 0; j < ix.num_operands; j++) maps += ix.operands[j].map != NULL;
      kiln_hlo_indexing_free(&ix);
    }
  }
  kiln_affine_ctx_destroy(ctx);
  return maps;
}

static void measure(const char *label, const comp_vec_t *comps, double min_seconds) {
  totals_t t;
  run_once(comps, &t, true);
  int reps = 0;
  double t0 = kiln_now_seconds(), dt;
  do {
    totals_t tt;
    run_once(comps, &tt, false);
    reps++;
    dt = kiln_now_seconds() - t0;
  } while (dt < min_seconds);
  double per = dt / reps;
  int breps = 0;
  int64_t bmaps = 0;
  double b0 = kiln_now_seconds(), bdt;
  do {
    bmaps = run_per_op(comps);
    breps++;
    bdt = kiln_now_seconds() - b0;
  } while (bdt < min_seconds / 4);
  double bper = bdt / breps;
  printf("%-8s fusions %5lld  roots %5lld  groups %6lld  maps %6lld  unknown groups %4lld "
         "(in %lld fusions)  errors %lld\n",
         label, (long long)t.fusions, (long long)t.roots, (long long)t.groups, (long long)t.maps,
         (long long)t.unknown_groups, (long long)t.fusions_with_unknown, (long long)t.errors);
  printf("         composed+simplified: %.2f ms per pass, %.0f maps/s, %.0f fusions/s; "
         "per-op maps only: %.2f ms (%lld maps, %.0f maps/s); composition costs %.1fx\n",
         per * 1e3, (double)t.maps / per, (double)t.fusions / per, bper * 1e3, (long long)bmaps,
         (double)bmaps / bper, per / bper);
}

int main(int argc, char **argv) {
  const char *corpus = argc > 1 ? argv[1] : kiln_corpus_dir();
  double min_seconds = argc > 2 ? atof(argv[2]) : 1.0;
  file_vec_t files = {0};
  comp_vec_t emit = {0}, mods = {0}, all = {0};
  int failed = 0;
  load_dir(corpus, "emitters", &files, &emit, &failed);
  load_dir(corpus, "xla", &files, &mods, &failed);
  load_dir(corpus, "real", &files, &mods, &failed);
  printf("corpus %s: %zu files loaded (%d failed to parse)\n", corpus, files.len, failed);
  measure("emitters", &emit, min_seconds);
  measure("modules", &mods, min_seconds);
  for (size_t i = 0; i < emit.len; i++) kiln_vec_push(&all, emit.data[i]);
  for (size_t i = 0; i < mods.len; i++) kiln_vec_push(&all, mods.data[i]);
  measure("all", &all, min_seconds);
  for (size_t i = 0; i < files.len; i++) kiln_hlo_file_free(files.data[i]);
  kiln_vec_free(&files);
  kiln_vec_free(&emit);
  kiln_vec_free(&mods);
  kiln_vec_free(&all);
  return 0;
}
