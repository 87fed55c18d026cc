/* Sort emitter on the corpus: every sort of the xla/ and real/ corpus modules, as the fusion
 * the wrapper would build, compiled with the GPU's plan and with the host's (run on the host
 * both) matches the evaluator bit for bit (a sort
 * fusion whose text repeats one run earlier is listed and not compiled again: same fusion,
 * same inputs); whole corpus modules through the pass pipeline (topk decomposed into a
 * sort) compile their sort fusions, match the evaluator and pass ptxas (when present). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/hashmap.h"
#include "base/str.h"
#include "compiler/passes/pipeline.h"
#include "sort_test_util.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"
#include "tests/skip_util.h"

/* ---- corpus: every sort of the whole modules, as the fusion the wrapper would build ---- */

static void print_called(kiln_strbuf_t *b, const kiln_hlo_computation_t *c,
                         const kiln_hlo_computation_t **done, int *nd) {
  for (int i = 0; i < *nd; i++)
    if (done[i] == c) return;
  if (*nd >= 32) return;
  done[(*nd)++] = c;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    for (int g = 0; g < in->num_called_groups; g++)
      for (int k = 0; k < in->called_groups[g].n; k++)
        print_called(b, in->called_groups[g].comps[k], done, nd);
  }
  kiln_hlo_computation_print(b, c);
  kiln_strbuf_append(b, "\n\n");
}

/* Module text: the sort's comparator (and what it calls), then `ENTRY fused` with one
 * parameter per operand and the sort at the root. */
static char *sort_fusion_text(const kiln_hlo_instruction_t *s) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "HloModule sort_fusion\n\n");
  const kiln_hlo_computation_t *done[32];
  int nd = 0;
  const kiln_hlo_computation_t *cmp = kiln_hlo_instruction_called(s, "to_apply");
  if (cmp) print_called(&b, cmp, done, &nd);
  kiln_strbuf_append(&b, "ENTRY fused {\n");
  for (int i = 0; i < s->num_operands; i++) {
    char *sh = kiln_shape_to_string(s->operands[i]->shape, false);
    kiln_strbuf_printf(&b, "  p%d = %s parameter(%d)\n", i, sh, i);
    kiln_free(sh);
  }
  char *sh = kiln_shape_to_string(s->shape, false);
  kiln_strbuf_printf(&b, "  ROOT s = %s sort(", sh);
  kiln_free(sh);
  for (int i = 0; i < s->num_operands; i++) kiln_strbuf_printf(&b, "%sp%d", i ? ", " : "", i);
  kiln_strbuf_printf(&b, "), dimensions={%lld}%s, to_apply=%s\n}\n",
                     (long long)(s->dimensions.n ? s->dimensions.v[0] : 0),
                     s->is_stable ? ", is_stable=true" : "", cmp ? cmp->name : "none");
  return kiln_strbuf_take(&b);
}

static void test_corpus_sorts_match_evaluator(void **state) {
  sort_fixture_t *f = *state;
  static const char *const dirs[] = {"xla", "real"};
  KILN_SKIP_WITHOUT_CORPUS(kiln_corpus_dir());
  int total = 0, passed = 0, unsupported = 0, repeats = 0;
  kiln_hashmap_t seen; /* fusion text -> "<file> <sort>" of its first run (owned) */
  kiln_hashmap_init(&seen);
  for (int di = 0; di < 2; di++) {
    char dpath[2048];
    snprintf(dpath, sizeof(dpath), "%s/%s", kiln_corpus_dir(), dirs[di]);
    DIR *d = opendir(dpath);
    if (!d) fail_msg("corpus folder %s: %s", dpath, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
      if (de->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", dpath, de->d_name);
      char *text = NULL;
      size_t len = 0;
      kiln_status s = kiln_read_file(path, &text, &len);
      if (s) {
        kiln_status_free(s);
        continue;
      }
      bool has = strstr(text, " sort(") != NULL;
      kiln_free(text);
      if (!has || !kiln_corpus_sampled(de->d_name)) continue;
      kiln_hlo_file_t *hf = NULL;
      s = kiln_hlo_file_load(path, &hf);
      if (s) {
        kiln_status_free(s);
        continue;
      }
      for (int mi = 0; mi < hf->num_modules; mi++) {
        const kiln_hlo_module_t *m = hf->modules[mi];
        for (size_t ci = 0; ci < m->computations.len; ci++) {
          const kiln_hlo_computation_t *c = m->computations.data[ci];
          for (size_t ii = 0; ii < c->instructions.len; ii++) {
            const kiln_hlo_instruction_t *in = c->instructions.data[ii];
            if (in->opcode != KILN_OP_SORT) continue;
            char *ft = sort_fusion_text(in);
            const char *first = kiln_hashmap_get_str(&seen, ft);
            if (first) { /* the same fusion on the same inputs: its check is the first one */
              printf("same %s %s: the sort fusion of %s, checked once\n", de->d_name, in->name,
                     first);
              repeats++;
              kiln_free(ft);
              continue;
            }
            char label[1024];
            snprintf(label, sizeof(label), "%s %s", de->d_name, in->name);
            kiln_hashmap_put(&seen, ft, strlen(ft), kiln_strdup(label));
            kiln_hlo_module_t *fm = NULL;
            s = kiln_hlo_parse_module(ft, strlen(ft), NULL, &fm);
            total++;
            sort_run_t r, rh;
            if (!s)
              s = run_sort(fm->entry, false, in->is_stable ? FILL_TIES : FILL_DISTINCT, 5, f->jit,
                           f->pool, &r);
            /* and with the host's plan (merge sorts past 16 elements a row) */
            if (!s)
              s = run_sort(fm->entry, true, in->is_stable ? FILL_TIES : FILL_DISTINCT, 5, f->jit,
                           f->pool, &rh);
            if (!s && !r.mismatches && rh.mismatches) r = rh;
            if (s && kiln_status_code(s) == KILN_UNIMPLEMENTED) {
              printf("unsupported %s %s: %s\n", de->d_name, in->name, kiln_status_message(s));
              unsupported++;
              total--;
            } else if (s) {
              printf("FAIL %s %s: %s\n", de->d_name, in->name, kiln_status_message(s));
            } else if (r.mismatches) {
              printf("FAIL %s %s: %lld/%lld mismatches, first: %s\n", de->d_name, in->name,
                     (long long)r.mismatches, (long long)r.elements, r.first);
            } else {
              printf(
                  "ok %s %s: %lld elements, %lld rows x %lld, %lld threads x %lld blocks, %.1f "
                  "ms; host plan (%s) %.1f ms\n",
                  de->d_name, in->name, (long long)r.elements, (long long)r.launch.rows,
                  (long long)r.launch.row_length, (long long)r.launch.threads,
                  (long long)r.launch.blocks, r.run_ms, rh.launch.merge ? "merge" : "network",
                  rh.run_ms);
              passed++;
            }
            kiln_status_free(s);
            if (fm) kiln_hlo_module_destroy(fm);
            kiln_free(ft);
          }
        }
      }
      kiln_hlo_file_free(hf);
    }
    closedir(d);
  }
  printf("corpus sorts: %d/%d match the evaluator (%d unsupported, %d repeats checked once)\n",
         passed, total, unsupported, repeats);
  for (size_t i = 0; i < seen.cap; i++)
    if (seen.slots[i].key) kiln_free(seen.slots[i].value);
  kiln_hashmap_free(&seen);
  assert_int_equal(passed, total);
}

/* Whole corpus modules through the pass pipeline (topk decomposed into a sort, the sort
 * wrapped into a fusion): every sort fusion compiles, matches the evaluator on the fusion
 * runner's inputs and passes ptxas when it is there. */
static void test_pipelined_topk_and_argsort_modules_compile_their_sort_fusions(void **state) {
  (void)state;
  static const char *const files[] = {
      "xla/xla__backends__cpu__benchmarks__hlo__topk_logits_k10_1x50000_bf16.hlo",
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
      "xla/xla__backends__cpu__benchmarks__hlo__argsort_axis_1024x512_bf16.hlo",
  };
  KILN_SKIP_WITHOUT_CORPUS(kiln_corpus_dir());
  int sorts = 0;
  for (size_t fi = 0; fi < sizeof(files) / sizeof(files[0]); fi++) {
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", kiln_corpus_dir(), files[fi]);
    kiln_hlo_file_t *hf = NULL;
    kiln_status s = kiln_hlo_file_load(path, &hf);
    if (s) fail_msg("%s: %s", files[fi], kiln_status_message(s));
    for (int mi = 0; mi < hf->num_modules; mi++) {
      kiln_hlo_module_t *m = hf->modules[mi];
      bool has = false;
      for (size_t ci = 0; ci < m->computations.len && !has; ci++)
        for (size_t ii = 0; ii < m->computations.data[ci]->instructions.len && !has; ii++) {
          kiln_hlo_opcode_t op = m->computations.data[ci]->instructions.data[ii]->opcode;
          has = op == KILN_OP_SORT || op == KILN_OP_TOPK;
        }
      if (!has) continue;
      kiln_pipeline_lift_parse_limit(m);
      kiln_pass_options_t po = {.verify = -1};
      s = kiln_pipeline_run(m, &po);
      if (s) fail_msg("%s module %d: pipeline: %s", files[fi], mi, kiln_status_message(s));
      const kiln_hlo_computation_t **cs = NULL;
      int n = 0;
      kiln_runner_collect_fusions(m, &cs, &n);
      for (int i = 0; i < n; i++) {
        if (kiln_codegen_classify(cs[i], NULL) != KILN_CODEGEN_EMITTER_SORT) continue;
        kiln_runner_options_t o;
        kiln_runner_options_init(&o);
        o.check_ptx = true;
        kiln_runner_report_t r;
        s = kiln_runner_check(cs[i], &o, &r);
        if (s) fail_msg("%s %s: %s", files[fi], cs[i]->name, kiln_status_message(s));
        if (r.mismatches)
          fail_msg("%s %s: %lld mismatches: %s", files[fi], cs[i]->name, (long long)r.mismatches,
                   r.first_mismatch);
        if (r.ptx_checked && !r.ptx_ok)
          fail_msg("%s %s: ptxas: %s", files[fi], cs[i]->name, r.ptx_note);
        printf("%s %s: sort emitter, %lld elements match, ptxas %s\n", files[fi], cs[i]->name,
               (long long)r.elements, r.ptx_checked ? "ok" : r.ptx_note);
        sorts++;
      }
      kiln_free(cs);
    }
    kiln_hlo_file_free(hf);
  }
  assert_true(sorts > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_corpus_sorts_match_evaluator, sort_setup, sort_teardown),
      cmocka_unit_test(test_pipelined_topk_and_argsort_modules_compile_their_sort_fusions),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
