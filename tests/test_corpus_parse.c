/* Corpus conformance for the HLO front end: every whole module under hlo-corpus/xla and
 * hlo-corpus/real parses, verifies and prints to a fixed point
 * (print(parse(print(parse(x)))) == print(parse(x))); invalid_concat.hlo is rejected with a
 * message naming the bad concatenate; every emitter fusion parses as a bare computation. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

#define INVALID_CONCAT "xla__tools__tests__data__invalid_concat.hlo"


typedef KILN_VEC(char *) path_list_t;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_dir(const char *sub, path_list_t *out) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", kiln_corpus_dir(), sub);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (kiln_str_ends_with(e->d_name, ".tsv") || kiln_str_ends_with(e->d_name, ".md")) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    kiln_vec_push(out, kiln_strdup(path));
  }
  closedir(d);
  qsort(out->data, out->len, sizeof(char *), cmp_str);
}

static void free_list(path_list_t *l) {
  for (size_t i = 0; i < l->len; i++) kiln_free(l->data[i]);
  kiln_vec_free(l);
}

/* Returns NULL when module `m` prints to a fixed point, else a heap message. */
static char *check_fixed_point(const kiln_hlo_module_t *m, const char *path) {
  char *first = kiln_hlo_module_to_string(m);
  kiln_hlo_module_t *again = NULL;
  kiln_hlo_parse_options_t opts = {.filename = path};
  kiln_status s = kiln_hlo_parse_module(first, strlen(first), &opts, &again);
  char *msg = NULL;
  if (s) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_printf(&b, "printed text does not parse: %s", kiln_status_message(s));
    msg = kiln_strbuf_take(&b);
    kiln_status_free(s);
  } else {
    char *second = kiln_hlo_module_to_string(again);
    if (strcmp(first, second) != 0) {
      size_t i = 0;
      while (first[i] && first[i] == second[i]) i++;
      size_t start = i > 60 ? i - 60 : 0;
      kiln_strbuf_t b = {0};
      kiln_strbuf_printf(&b, "not a fixed point at byte %zu:\n  first:  %.120s\n  second: %.120s", i,
                         first + start, second + start);
      msg = kiln_strbuf_take(&b);
    }
    kiln_free(second);
    kiln_hlo_module_destroy(again);
  }
  kiln_free(first);
  return msg;
}

static void test_whole_modules_parse_verify_and_round_trip(void **state) {
  (void)state;
  path_list_t files = {0};
  list_dir("xla", &files);
  list_dir("real", &files);
  int modules = 0, passed = 0, files_ok = 0, rejected_as_expected = 0;
  for (size_t i = 0; i < files.len; i++) {
    const char *path = files.data[i];
    if (kiln_str_ends_with(path, INVALID_CONCAT)) continue;
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) {
      printf("FAIL parse %s\n  %s\n", path, kiln_status_message(s));
      kiln_status_free(s);
      modules++;
      continue;
    }
    bool all_ok = true;
    for (int k = 0; k < f->num_modules; k++) {
      modules++;
      kiln_status vs = kiln_hlo_module_verify(f->modules[k]);
      const kiln_corpus_invalid_t *known = kiln_corpus_find_invalid(path, k);
      if (known) {
        char *msg = check_fixed_point(f->modules[k], path);
        if (vs && strstr(kiln_status_message(vs), known->message_part) && !msg) {
          rejected_as_expected++;
        } else {
          printf("FAIL known-invalid %s (module %d): verifier said '%s'; round trip: %s\n", path, k,
                 vs ? kiln_status_message(vs) : "OK", msg ? msg : "OK");
          all_ok = false;
        }
        kiln_free(msg);
        kiln_status_free(vs);
        continue;
      }
      if (vs) {
        printf("FAIL verify %s (module %d '%s')\n  %s\n", path, k, f->modules[k]->name,
               kiln_status_message(vs));
        kiln_status_free(vs);
        all_ok = false;
        continue;
      }
      char *msg = check_fixed_point(f->modules[k], path);
      if (msg) {
        printf("FAIL round-trip %s (module %d '%s')\n  %s\n", path, k, f->modules[k]->name, msg);
        kiln_free(msg);
        all_ok = false;
        continue;
      }
      passed++;
    }
    files_ok += all_ok;
    kiln_hlo_file_free(f);
  }
  size_t num_known = 0;
  kiln_corpus_invalid_list(&num_known);
  num_known--; /* invalid_concat is checked by its own test */
  printf("corpus xla+real: %d/%d modules parse, verify and round-trip; %d/%zu known-invalid "
         "modules parse, round-trip and are rejected for the expected reason (%d/%zu files)\n",
         passed, modules - (int)num_known, rejected_as_expected, num_known, files_ok, files.len - 1);
  free_list(&files);
  assert_true(modules > 150);
  assert_int_equal(rejected_as_expected, (int)num_known);
  assert_int_equal(passed + rejected_as_expected, modules);
}

static void test_invalid_concat_is_rejected_naming_the_concatenate(void **state) {
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/xla/%s", kiln_corpus_dir(), INVALID_CONCAT);
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, &f);
  if (!s) {
    assert_int_equal(f->num_modules, 1);
    s = kiln_hlo_module_verify(f->modules[0]);
    kiln_hlo_file_free(f);
  }
  assert_non_null(s);
  printf("invalid_concat rejected: %s\n", kiln_status_message(s));
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "cat.3"));
  assert_non_null(strstr(kiln_status_message(s), "concatenate"));
  kiln_status_free(s);
}

static void test_emitter_fusions_parse_as_bare_computations(void **state) {
  (void)state;
  path_list_t files = {0};
  list_dir("emitters", &files);
  int passed = 0;
  for (size_t i = 0; i < files.len; i++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(files.data[i], &text, &len);
    assert_null(s);
    kiln_hlo_parse_options_t opts = {.filename = files.data[i]};
    kiln_hlo_module_t *m = NULL;
    s = kiln_hlo_parse_computations(text, len, &opts, &m);
    if (s) {
      printf("FAIL %s\n  %s\n", files.data[i], kiln_status_message(s));
      kiln_status_free(s);
    } else {
      char *msg = check_fixed_point(m, files.data[i]);
      if (msg) {
        printf("FAIL round-trip %s\n  %s\n", files.data[i], msg);
        kiln_free(msg);
      } else {
        passed++;
      }
      kiln_hlo_module_destroy(m);
    }
    kiln_free(text);
  }
  printf("corpus emitters: %d/%zu fusions parse as bare computations and round-trip\n", passed,
         files.len);
  assert_true(files.len >= 100);
  assert_int_equal((size_t)passed, files.len);
  free_list(&files);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_whole_modules_parse_verify_and_round_trip),
      cmocka_unit_test(test_invalid_concat_is_rejected_naming_the_concatenate),
      cmocka_unit_test(test_emitter_fusions_parse_as_bare_computations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
