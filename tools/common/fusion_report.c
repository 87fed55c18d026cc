/* Fusion quality report: kiln's kernel count against XLA's on the corpus's pairs. */
#include "plugin/env_options.h"
#include "tools/common/fusion_report.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/vec.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"
#include "tools/common/hlo_file.h"

/* The name with `marker` and an optional platform prefix before it ("sm_7.0_gpu_",
 * "cpu_") cut out: the key both files of a pair share. */
static char *pair_key(const char *name, const char *marker) {
  const char *at = strstr(name, marker);
  if (!at) return NULL;
  size_t pre = (size_t)(at - name);
  static const char *const kPrefixes[] = {"sm_7.0_gpu_", "sm_8.0_gpu_", "sm_9.0_gpu_", "gpu_",
                                          "cpu_"};
  for (size_t i = 0; i < sizeof kPrefixes / sizeof kPrefixes[0]; i++) {
    size_t l = strlen(kPrefixes[i]);
    if (pre >= l && strncmp(at - l, kPrefixes[i], l) == 0) {
      pre -= l;
      break;
    }
  }
  kiln_strbuf_t b = {0};
  kiln_strbuf_append_n(&b, name, pre);
  kiln_strbuf_append(&b, "*");
  kiln_strbuf_append(&b, at + strlen(marker));
  return kiln_strbuf_take(&b);
}

static int cmp_pairs(const void *a, const void *b) {
  return strcmp(((const kiln_report_pair_t *)a)->name, ((const kiln_report_pair_t *)b)->name);
}

kiln_status kiln_report_pairs_find(const char *dir, kiln_report_pair_t **out, int *out_n) {
  *out = NULL;
  *out_n = 0;
  DIR *d = opendir(dir);
  if (!d) return kiln_status_make(KILN_NOT_FOUND, "cannot open folder '%s'", dir);
  KILN_VEC(char *) names = {0};
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') kiln_vec_push(&names, kiln_strdup(e->d_name));
  closedir(d);
  KILN_VEC(kiln_report_pair_t) pairs = {0};
  for (size_t i = 0; i < names.len; i++) {
    char *key = pair_key(names.data[i], "before_optimizations");
    if (!key) continue;
    for (size_t j = 0; j < names.len; j++) {
      const char *after = names.data[j];
      if (!strstr(after, "gpu")) continue;
      char *akey = pair_key(after, "after_optimizations");
      bool match = akey && strcmp(akey, key) == 0;
      kiln_free(akey);
      if (!match) continue;
      kiln_report_pair_t p = {0};
      p.name = kiln_strdup(key);
      kiln_strbuf_t b = {0};
      kiln_strbuf_printf(&b, "%s/%s", dir, names.data[i]);
      p.before_path = kiln_strbuf_take(&b);
      kiln_strbuf_printf(&b, "%s/%s", dir, after);
      p.after_path = kiln_strbuf_take(&b);
      kiln_vec_push(&pairs, p);
      break;
    }
    kiln_free(key);
  }
  for (size_t i = 0; i < names.len; i++) kiln_free(names.data[i]);
  kiln_vec_free(&names);
  if (pairs.len) qsort(pairs.data, pairs.len, sizeof pairs.data[0], cmp_pairs);
  *out = pairs.data;
  *out_n = (int)pairs.len;
  return NULL;
}

void kiln_report_pairs_free(kiln_report_pair_t *pairs, int n) {
  for (int i = 0; i < n; i++) {
    kiln_free(pairs[i].name);
    kiln_free(pairs[i].before_path);
    kiln_free(pairs[i].after_path);
    kiln_free(pairs[i].error);
  }
  kiln_free(pairs);
}

void kiln_report_pass_list(kiln_strbuf_t *b) {
  /* Simplification passes by the names the pipeline registers them under. */
  static const char *const kSimplify[] = {
      "call_inline", "simplify", "constant_folding", "tuple_simplify", "while_loop_constants",
      "dce",         "cse",
  };
  KILN_VEC(const char *) found = {0};
  for (size_t i = 0; i < sizeof kSimplify / sizeof kSimplify[0]; i++)
    if (kiln_pass_find(kSimplify[i])) kiln_vec_push(&found, kSimplify[i]);
  if (found.len > 1) kiln_strbuf_append(b, "(");
  for (size_t i = 0; i < found.len; i++) {
    if (i) kiln_strbuf_append(b, ",");
    kiln_strbuf_append(b, found.data[i]);
  }
  if (found.len > 1) kiln_strbuf_append(b, ")");
  if (found.len) kiln_strbuf_append(b, ",");
  /* The collective optimizations after simplification, as the pipeline runs them. */
  if (kiln_pass_find("collective_simplifier")) kiln_strbuf_append(b, "collective_simplifier,");
  if (kiln_pass_find("reduce_scatter_creator")) kiln_strbuf_append(b, "reduce_scatter_creator,");
  kiln_strbuf_append(b, "priority_fusion,multi_output_fusion");
  if (kiln_pass_find("horizontal_fusion")) kiln_strbuf_append(b, ",horizontal_fusion");
  if (kiln_pass_find("cse")) kiln_strbuf_append(b, ",cse");
  if (kiln_pass_find("dce")) kiln_strbuf_append(b, ",dce");
  /* XLA:GPU's post-fusion combiners. */
  static const char *const kCombiners[] = {"all_gather_combiner", "all_reduce_combiner",
                                           "reduce_scatter_combiner"};
  for (size_t i = 0; i < sizeof kCombiners / sizeof kCombiners[0]; i++)
    if (kiln_pass_find(kCombiners[i])) kiln_strbuf_printf(b, ",%s", kCombiners[i]);
  kiln_vec_free(&found);
}

static kiln_status count_file(const char *path, const char *passes, int64_t *before,
                              int64_t *after) {
  kiln_hlo_file_t *f = NULL;
  KILN_RETURN_IF_ERROR(kiln_hlo_file_load(path, &f), "loading %s", path);
  kiln_status st = NULL;
  *before = *after = 0;
  for (int i = 0; i < f->num_modules && !st; i++) {
    kiln_hlo_module_t *m = f->modules[i];
    st = kiln_hlo_module_verify(m);
    if (st) break;
    *before += kiln_fusion_count_kernels(m);
    if (passes) {
      kiln_pass_options_t o = {.verify = 1};
      kiln_pjrt_pass_options_from_env(&o);
      st = kiln_pass_run_list(m, passes, &o);
      if (!st) st = kiln_hlo_module_verify(m);
    }
    *after += kiln_fusion_count_kernels(m);
  }
  kiln_hlo_file_free(f);
  return st;
}

kiln_status kiln_report_pair_run(kiln_report_pair_t *p, const char *passes) {
  kiln_free(p->error);
  p->error = NULL;
  int64_t unused = 0;
  kiln_status st = count_file(p->before_path, passes, &p->before_kernels, &p->kiln_kernels);
  if (!st) st = count_file(p->after_path, NULL, &unused, &p->xla_kernels);
  if (st) p->error = kiln_strdup(kiln_status_message(st));
  return st;
}

void kiln_report_fusions_print(kiln_strbuf_t *b, const kiln_report_pair_t *pairs, int n) {
  int64_t tb = 0, tk = 0, tx = 0;
  int worse = 0, ran = 0;
  kiln_strbuf_printf(b, "%-96s %7s %6s %6s %6s\n", "pair", "before", "kiln", "xla", "diff");
  for (int i = 0; i < n; i++) {
    const kiln_report_pair_t *p = &pairs[i];
    const char *name = p->name;
    size_t len = strlen(name);
    if (len > 96) name += len - 96;
    if (p->error) {
      kiln_strbuf_printf(b, "%-96s  error: %s\n", name, p->error);
      continue;
    }
    ran++;
    tb += p->before_kernels;
    tk += p->kiln_kernels;
    tx += p->xla_kernels;
    if (p->kiln_kernels > p->xla_kernels) worse++;
    kiln_strbuf_printf(b, "%-96s %7lld %6lld %6lld %+6lld\n", name, (long long)p->before_kernels,
                       (long long)p->kiln_kernels, (long long)p->xla_kernels,
                       (long long)(p->kiln_kernels - p->xla_kernels));
  }
  kiln_strbuf_printf(b, "%-96s %7lld %6lld %6lld %+6lld\n", "total", (long long)tb, (long long)tk,
                     (long long)tx, (long long)(tk - tx));
  kiln_strbuf_printf(b, "pairs: %d run, %d with more kernels than XLA\n", ran, worse);
}
