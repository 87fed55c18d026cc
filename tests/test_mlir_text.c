/* The MLIR text reader (compiler/frontend/mlir_text.h): the StableHLO test suites parse
 * (interpret/, testdata-sample/, math/, chlo/, the .mlir files of vhlo/, split on `// -----`),
 * print in generic form and reparse to the same print; pretty forms become the generic form's
 * attributes; malformed inputs are errors with file:line:col. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "base/vec.h"
#include "compiler/frontend/mlir_ir.h"
#include "compiler/frontend/mlir_text.h"
#include "tests/skip_util.h"

/* ---- helpers ---- */

static inline kiln_mlir_module_t *parse_ok(const char *text) {
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_parse_text(text, strlen(text), "t.mlir", &m);
  if (s) {
    fprintf(stderr, "unexpected error: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
  return m;
}

/* The message of a parse that must fail. */
static char *parse_err(const char *text) {
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_parse_text(text, strlen(text), "bad.mlir", &m);
  assert_non_null(s);
  assert_null(m);
  char *msg = kiln_strdup(kiln_status_message(s));
  kiln_status_free(s);
  return msg;
}

static inline void assert_err_at(const char *text, const char *where, const char *needle) {
  char *msg = parse_err(text);
  if (strstr(msg, where) == NULL || strstr(msg, needle) == NULL) {
    fprintf(stderr, "message '%s' lacks '%s' / '%s'\n", msg, where, needle);
    kiln_free(msg);
    fail();
  }
  kiln_free(msg);
}

/* The first op named `name` in the module (depth first), or NULL. */
static const kiln_mlir_op_t *find_in_block(const kiln_mlir_block_t *b, const char *name) {
  for (int32_t i = 0; i < b->num_ops; i++) {
    const kiln_mlir_op_t *op = b->ops[i];
    if (strcmp(op->name, name) == 0) return op;
    for (int32_t r = 0; r < op->num_regions; r++) {
      for (int32_t k = 0; k < op->regions[r].num_blocks; k++) {
        const kiln_mlir_op_t *f = find_in_block(&op->regions[r].blocks[k], name);
        if (f) return f;
      }
    }
  }
  return NULL;
}

static inline const kiln_mlir_op_t *find_op(const kiln_mlir_module_t *m, const char *name) {
  const kiln_mlir_op_t *op = find_in_block(&m->body, name);
  if (op == NULL) fprintf(stderr, "no op %s\n", name);
  assert_non_null(op);
  return op;
}

static inline void assert_ints(const kiln_mlir_attr_t *a, const int64_t *v, int32_t n) {
  assert_non_null(a);
  assert_int_equal(a->kind, KILN_MLIR_ATTR_DENSE_ARRAY);
  assert_int_equal(a->num_elements, n);
  for (int32_t i = 0; i < n; i++) assert_int_equal(a->ints[i], v[i]);
}

static char *print_module(const kiln_mlir_module_t *m) {
  kiln_strbuf_t b = {0};
  kiln_mlir_module_print(&b, m);
  return kiln_strbuf_take(&b);
}

/* NULL if `m` prints, reparses and prints the same; else a heap message. */
static char *round_trip(const kiln_mlir_module_t *m, const char *what) {
  char *first = print_module(m);
  kiln_mlir_module_t *again = NULL;
  kiln_status s = kiln_mlir_parse_text(first, strlen(first), what, &again);
  char *msg = NULL;
  if (s) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_printf(&b, "reparse of the print failed: %s", kiln_status_message(s));
    msg = kiln_strbuf_take(&b);
    kiln_status_free(s);
  } else {
    char *second = print_module(again);
    if (strcmp(first, second) != 0) {
      size_t i = 0;
      while (first[i] && first[i] == second[i]) i++;
      size_t from = i > 60 ? i - 60 : 0;
      kiln_strbuf_t b = {0};
      kiln_strbuf_printf(&b, "print differs after reparse at byte %zu: '%.120s' vs '%.120s'", i,
                         first + from, second + from);
      msg = kiln_strbuf_take(&b);
    }
    kiln_free(second);
    kiln_mlir_module_destroy(again);
  }
  kiln_free(first);
  return msg;
}

/* ---- the StableHLO test suites ---- */

static bool contains(const char *s, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++) {
    if (memcmp(s + i, needle, k) == 0) return true;
  }
  return false;
}

static const char *stablehlo_dir(void) {
  static char dir[4096];
  const char *env = getenv("KILN_STABLEHLO_DIR");
  if (env && *env) return env;
  const char *corpus = getenv("KILN_CORPUS_DIR");
  snprintf(dir, sizeof dir, "%s/../stablehlo", corpus && *corpus ? corpus : KILN_CORPUS_DIR);
  return dir;
}

typedef KILN_VEC(char *) path_list_t;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool list_mlir(const char *sub, path_list_t *out) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", stablehlo_dir(), sub);
  DIR *d = opendir(dir);
  if (d == NULL) return false;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !kiln_str_ends_with(e->d_name, ".mlir")) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    kiln_vec_push(out, kiln_strdup(path));
  }
  closedir(d);
  qsort(out->data, out->len, sizeof(char *), cmp_str);
  return true;
}

typedef struct folder_result {
  int parts, parsed, expected_invalid, failed, round_trip_failed;
} folder_result_t;

static folder_result_t run_folder(const char *sub) {
  folder_result_t r = {0};
  path_list_t files = {0};
  if (!list_mlir(sub, &files)) return r;
  for (size_t f = 0; f < files.len; f++) {
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_read_file(files.data[f], &text, &len);
    assert_null(s);
    size_t n = kiln_mlir_split_text(text, len, NULL, 0);
    kiln_mlir_text_part_t *parts = kiln_calloc(n, sizeof(*parts));
    kiln_mlir_split_text(text, len, parts, n);
    const char *base = strrchr(files.data[f], '/') + 1;
    for (size_t i = 0; i < n; i++) {
      char name[512];
      snprintf(name, sizeof name, "%s/%s#%zu", sub, base, i);
      r.parts++;
      bool invalid = contains(parts[i].text, parts[i].len, "expected-error");
      kiln_mlir_module_t *m = NULL;
      s = kiln_mlir_parse_text(parts[i].text, parts[i].len, name, &m);
      if (s) {
        if (invalid) {
          r.expected_invalid++;
        } else {
          r.failed++;
          printf("  FAIL %s (part line %d): %s\n", name, (int)parts[i].line,
                 kiln_status_message(s));
        }
        kiln_status_free(s);
        continue;
      }
      r.parsed++;
      char *msg = round_trip(m, name);
      if (msg) {
        r.round_trip_failed++;
        printf("  ROUND TRIP %s: %s\n", name, msg);
        kiln_free(msg);
      }
      kiln_mlir_module_destroy(m);
    }
    kiln_free(parts);
    kiln_free(text);
    kiln_free(files.data[f]);
  }
  kiln_vec_free(&files);
  printf("%-28s parts %4d  parsed %4d  invalid-by-design %3d  failed %3d  round-trip failed %d\n",
         sub, r.parts, r.parsed, r.expected_invalid, r.failed, r.round_trip_failed);
  return r;
}

static void test_stablehlo_suites_parse_and_round_trip(void **state) {
  (void)state;
  char probe[4096];
  snprintf(probe, sizeof probe, "%s/stablehlo/tests/interpret", stablehlo_dir());
  DIR *d = opendir(probe);
  if (d == NULL) {
    KILN_SKIP("StableHLO test suites not found at %s (set KILN_STABLEHLO_DIR)", stablehlo_dir());
  }
  closedir(d);
  folder_result_t interp = run_folder("stablehlo/tests/interpret");
  folder_result_t sample = run_folder("testdata-sample");
  folder_result_t math = run_folder("stablehlo/tests/math");
  folder_result_t chlo = run_folder("stablehlo/tests/chlo");
  folder_result_t vhlo = run_folder("stablehlo/tests/vhlo");
  int goal_parts = interp.parts + sample.parts - interp.expected_invalid - sample.expected_invalid;
  int goal_ok = interp.parsed + sample.parsed;
  printf("interpret + testdata-sample: %d of %d parts parse (%.2f%%)\n", goal_ok, goal_parts,
         100.0 * goal_ok / (goal_parts ? goal_parts : 1));
  assert_true(interp.parts >= 100 && sample.parts >= 200);
  assert_true(goal_ok * 100 >= goal_parts * 99);
  assert_int_equal(math.failed, 0);
  assert_int_equal(interp.round_trip_failed + sample.round_trip_failed + math.round_trip_failed +
                       chlo.round_trip_failed + vhlo.round_trip_failed,
                   0);
  (void)chlo;
  (void)vhlo;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stablehlo_suites_parse_and_round_trip),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
