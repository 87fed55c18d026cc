#include "tools/common/corpus.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "base/vec.h"
#include "tools/common/hlo_file.h"

static const kiln_corpus_invalid_t kKnownInvalid[] = {
    {"xla__tools__tests__data__invalid_concat.hlo", 0, "concatenate",
     "invalid on purpose: concatenate operands differ outside the concatenated dimension"},
    {"xla__hlo__builder__tests__math_next_after.hlo", 1, "entry_computation_layout",
     "the entry layout says f32[], the parameters are f8e5m2fnuz[]"},
    {"xla__hlo__translate__hlo_to_mhlo__tests__layouts_and_names.hlo", 1,
     "entry_computation_layout", "the entry layout says f32[524,524,524], the parameter is f16"},
    {"xla__hlo__transforms__tests__operand_upcaster.hlo", 0, "dot",
     "dot(s8[8], s16[8]) without contracting dims is an outer product s32[8,8], not s32[8]"},
    {"xla__hlo__transforms__tests__rewrite_bf16_conv_to_onednn.hlo", 1, "convolution",
     "padding -1_-1 gives bf16[8,0,5,5,32], the module declares [4,4,5,5,32]"},
    {"xla__hlo__tools__tests__generate_hlo_test_checks_test_input.hlo", 4, "call",
     "a call passes f32[4] to a computation taking f32[] (input of a text tool's test)"},
    {"xla__hlo__tools__tests__generate_hlo_test_checks_test_output.hlo", 4, "call",
     "a call passes f32[4] to a computation taking f32[] (output of a text tool's test)"},
    {"xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", 0, "window size",
     "a convolution window of 3x3 over a 2x2 kernel"},
    {"xla__hlo__translate__hlo_to_mhlo__tests__while.hlo", 0, "broadcast",
     "broadcast f32[1] -> f32[3]: XLA requires equal sizes, no size-1 stretching"},
};

const kiln_corpus_invalid_t *kiln_corpus_invalid_list(size_t *out_n) {
  *out_n = sizeof kKnownInvalid / sizeof kKnownInvalid[0];
  return kKnownInvalid;
}

const kiln_corpus_invalid_t *kiln_corpus_find_invalid(const char *path, int module) {
  for (size_t i = 0; i < sizeof kKnownInvalid / sizeof kKnownInvalid[0]; i++)
    if (kiln_str_ends_with(path, kKnownInvalid[i].file_suffix) && kKnownInvalid[i].module == module)
      return &kKnownInvalid[i];
  return NULL;
}

bool kiln_corpus_under_asan(void) {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

long kiln_corpus_sample_rate(long asan_rate) {
  const char *env = getenv("KILN_CORPUS_SAMPLE");
  if (env) return strtol(env, NULL, 10) > 1 ? strtol(env, NULL, 10) : 1;
  return kiln_corpus_under_asan() && asan_rate > 1 ? asan_rate : 1;
}

bool kiln_corpus_sampled_at(const char *name, long rate) {
  if (rate <= 1) return true;
  /* Hash only the file's base name so the choice does not depend on where the corpus is. */
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  return kiln_hash_bytes(base, strlen(base)) % (unsigned long)rate == 0;
}

bool kiln_corpus_sampled(const char *name) {
  return kiln_corpus_sampled_at(name, kiln_corpus_sample_rate(KILN_CORPUS_ASAN_SAMPLE));
}

bool kiln_corpus_sampling(void) {
  return kiln_corpus_sample_rate(KILN_CORPUS_ASAN_SAMPLE) > 1;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

kiln_status kiln_corpus_for_each_module(const char *dir, const char *label,
                                        kiln_corpus_module_fn fn, void *ctx) {
  DIR *d = opendir(dir);
  if (!d) return kiln_status_make(KILN_NOT_FOUND, "cannot open corpus folder %s", dir);
  KILN_VEC(char *) names = {0};
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *n = e->d_name;
    if (n[0] == '.' || kiln_str_ends_with(n, ".tsv") || kiln_str_ends_with(n, ".md")) continue;
    kiln_vec_push(&names, kiln_strdup(n));
  }
  closedir(d);
  qsort(names.data, names.len, sizeof(char *), cmp_names);
  for (size_t i = 0; i < names.len; i++) {
    char path[8192], name[400];
    snprintf(path, sizeof path, "%s/%s", dir, names.data[i]);
    kiln_hlo_file_t *f = NULL; /* modules, or bare computations as kiln-run loads them */
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) {
      snprintf(name, sizeof name, "%s/%.300s", label, names.data[i]);
      fn(ctx, NULL, name, path, 0, s);
      kiln_status_free(s);
      continue;
    }
    for (int k = 0; k < f->num_modules; k++) {
      if (f->num_modules > 1)
        snprintf(name, sizeof name, "%s/%.300s#%d", label, names.data[i], k);
      else
        snprintf(name, sizeof name, "%s/%.300s", label, names.data[i]);
      fn(ctx, &f->modules[k], name, path, k, NULL);
    }
    kiln_hlo_file_free(f);
  }
  for (size_t i = 0; i < names.len; i++) kiln_free(names.data[i]);
  kiln_vec_free(&names);
  return NULL;
}

kiln_status kiln_corpus_for_each_whole_module(const char *root, kiln_corpus_module_fn fn, void *ctx) {
  static const char *const kFolders[] = {"xla", "real"};
  if (!root) root = kiln_corpus_dir();
  for (size_t i = 0; i < sizeof kFolders / sizeof kFolders[0]; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, kFolders[i]);
    KILN_RETURN_IF_ERROR_PLAIN(kiln_corpus_for_each_module(dir, kFolders[i], fn, ctx));
  }
  return NULL;
}

void kiln_corpus_repeats_init(kiln_corpus_repeats_t *r) {
  kiln_hashmap_init(&r->seen);
}

void kiln_corpus_repeats_free(kiln_corpus_repeats_t *r) {
  for (size_t i = 0; i < r->seen.cap; i++)
    if (r->seen.slots[i].key) kiln_free(r->seen.slots[i].value);
  kiln_hashmap_free(&r->seen);
}

const char *kiln_corpus_repeat_of(kiln_corpus_repeats_t *r, const kiln_hlo_module_t *m, const char *name) {
  char *text = kiln_hlo_module_to_string(m);
  const char *first = kiln_hashmap_get_str(&r->seen, text);
  if (!first) kiln_hashmap_put(&r->seen, text, strlen(text), kiln_strdup(name));
  kiln_free(text);
  return first;
}
