/* Running StableHLO test files: see stablehlo_run.h. */
#include "tools/common/stablehlo_run.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "compiler/eval/eval.h"
#include "compiler/frontend/mlir_bytecode.h"
#include "compiler/frontend/mlir_text.h"
#include "compiler/frontend/stablehlo_to_hlo.h"
#include "tools/common/device_run.h"

void kiln_stablehlo_run_stats_free(kiln_stablehlo_run_stats_t *s) {
  kiln_strbuf_free(&s->failures);
}

bool kiln_stablehlo_is_mlir_path(const char *path) {
  return path && (kiln_str_ends_with(path, ".mlir") || kiln_str_ends_with(path, ".mlirbc") ||
                  kiln_str_ends_with(path, ".mlir.bc"));
}

/* First line of a status message (messages can be long). */
static void add_failure(kiln_stablehlo_run_stats_t *st, const char *file, const char *fn,
                        const char *reason) {
  const char *nl = strchr(reason, '\n');
  int n = nl ? (int)(nl - reason) : (int)strlen(reason);
  if (n > 400) n = 400;
  kiln_strbuf_printf(&st->failures, "  %s:@%s: %.*s\n", file, fn, n, reason);
}

static const char *func_name(const kiln_mlir_op_t *f) {
  const kiln_mlir_attr_t *a = kiln_mlir_op_attr(f, "sym_name");
  return a && a->str ? a->str : "?";
}

static bool take_sample(const kiln_stablehlo_run_options_t *o, kiln_stablehlo_run_stats_t *st) {
  int64_t k = st->seen++;
  return o->sample <= 1 || k % o->sample == 0;
}

static void run_function(const kiln_mlir_module_t *mm, const kiln_mlir_op_t *f, const char *file,
                         int line, const kiln_stablehlo_run_options_t *o,
                         kiln_stablehlo_run_stats_t *st) {
  const char *name = func_name(f);
  if (!take_sample(o, st)) return;
  st->functions++;
  kiln_hlo_module_t *hm = NULL;
  kiln_stablehlo_check_t *checks = NULL;
  int32_t nchecks = 0;
  kiln_literal_t **params = NULL;
  int32_t nparams = 0;
  kiln_status s = kiln_stablehlo_checks_to_hlo(mm, f, &hm, &checks, &nchecks,
                                               o->constants_as_params ? &params : NULL, &nparams);
  for (int32_t i = 0; i < nchecks; i++)
    if (checks[i].line > 0) checks[i].line += line - 1;
  if (s && line > 1) s = kiln_status_annotate(s, "(the part starts at line %d)", line);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *result = NULL;
  if (!s) {
    if (o->device) {
      kiln_device_run_options_t ro;
      memset(&ro, 0, sizeof ro);
      ro.device = o->device;
      ro.repeat = 1;
      ro.max_while_iterations = o->max_while_iterations;
      kiln_device_run_report_t rep;
      s = kiln_device_run_module(hm, params, nparams, &ro, &arena, &result, &rep);
      if (s) s = kiln_status_annotate(s, "while running on %s", o->device->name);
    } else {
      kiln_eval_options_t eo;
      memset(&eo, 0, sizeof eo);
      eo.max_while_iterations = o->max_while_iterations;
      s = kiln_eval_module(hm, &eo, nparams, params, &arena, &result);
      if (s) s = kiln_status_annotate(s, "while evaluating");
    }
  }
  int32_t passed = 0, failed = 0;
  char first[512] = "";
  bool fn_close = false; /* the function has an expect_close check */
  uint64_t fn_ulp = 0, fn_tol = 0;
  if (!s) {
    for (int32_t i = 0; i < nchecks; i++) {
      char msg[512];
      double worst = 0;
      bool ok = kiln_stablehlo_check_eval(&checks[i], result, msg, sizeof msg, &worst);
      if (checks[i].kind == KILN_STABLEHLO_CHECK_CLOSE) {
        /* worst holds a ulp count; 2^64 - 1 (not finite) rounds up to 2^64 as a double */
        uint64_t ulp = worst >= 0x1p64 ? UINT64_MAX : (uint64_t)worst;
        fn_close = true;
        if (ulp > fn_ulp) fn_ulp = ulp;
        if (checks[i].max_ulp > fn_tol) fn_tol = checks[i].max_ulp;
      }
      if (ok) {
        passed++;
      } else {
        if (!failed) snprintf(first, sizeof first, "%s", msg);
        failed++;
      }
    }
    st->checks_passed += passed;
    st->checks_failed += failed;
    if (failed) {
      add_failure(st, file, name, first);
    } else {
      st->passed++;
    }
    if (fn_ulp > st->max_ulp) st->max_ulp = fn_ulp;
    if (fn_tol > st->ulp_tolerance) st->ulp_tolerance = fn_tol;
    if (o->print) {
      printf("@%s: checks: %d passed, %d failed", name, (int)passed, (int)failed);
      if (fn_close) printf(" (max %" PRIu64 " ulp, tolerance %" PRIu64 ")", fn_ulp, fn_tol);
      printf("\n");
      if (failed) printf("  %s\n", first);
    }
  } else {
    add_failure(st, file, name, kiln_status_message(s));
    if (o->print) printf("@%s: error: %s\n", name, kiln_status_message(s));
    kiln_status_free(s);
  }
  kiln_arena_destroy(&arena);
  kiln_free(checks);
  kiln_free(params);
  if (hm) kiln_hlo_module_destroy(hm);
}

/* `line`: the file line the part starts on (messages name file lines). */
static void run_part(const char *text, size_t len, bool bytecode, const char *file, int line,
                     const kiln_stablehlo_run_options_t *o, kiln_stablehlo_run_stats_t *st) {
  kiln_mlir_module_t *mm = NULL;
  kiln_status s = bytecode ? kiln_mlir_read_bytecode(text, len, &mm)
                           : kiln_mlir_parse_text(text, len, file, &mm);
  if (s) {
    if (take_sample(o, st)) {
      st->functions++;
      char what[64];
      snprintf(what, sizeof what, "<part at line %d>", line);
      add_failure(st, file, what, kiln_status_message(s));
      if (o->print) printf("part at line %d: error: %s\n", line, kiln_status_message(s));
    }
    kiln_status_free(s);
    return;
  }
  for (int32_t i = 0; i < mm->body.num_ops; i++) {
    const kiln_mlir_op_t *f = mm->body.ops[i];
    if (strcmp(f->name, "func.func") != 0 || !kiln_stablehlo_func_has_checks(f)) continue;
    run_function(mm, f, file, line, o, st);
  }
  kiln_mlir_module_destroy(mm);
}

kiln_status kiln_stablehlo_run_bytes(const char *bytes, size_t len, const char *filename,
                                     const kiln_stablehlo_run_options_t *opts,
                                     kiln_stablehlo_run_stats_t *stats) {
  double t0 = kiln_clock_ms();
  if (!filename) filename = "<mlir>";
  const char *base = strrchr(filename, '/');
  base = base ? base + 1 : filename;
  if (kiln_mlir_bytes_are_bytecode(bytes, len)) {
    run_part(bytes, len, true, base, 1, opts, stats);
  } else {
    size_t n = kiln_mlir_split_text(bytes, len, NULL, 0);
    kiln_mlir_text_part_t *parts = kiln_calloc(n ? n : 1, sizeof *parts);
    n = kiln_mlir_split_text(bytes, len, parts, n);
    for (size_t i = 0; i < n; i++)
      run_part(parts[i].text, parts[i].len, false, base, parts[i].line, opts, stats);
    kiln_free(parts);
  }
  stats->seconds += (kiln_clock_ms() - t0) / 1e3;
  return NULL;
}

kiln_status kiln_stablehlo_run_file(const char *path, const kiln_stablehlo_run_options_t *opts,
                                    kiln_stablehlo_run_stats_t *stats) {
  char *data = NULL;
  size_t len = 0;
  KILN_RETURN_IF_ERROR(kiln_read_file(path, &data, &len), "while reading %s", path);
  kiln_status s = kiln_stablehlo_run_bytes(data, len, path, opts, stats);
  kiln_free(data);
  return s;
}

/* Calls fn(part text, len, bytecode, ctx) for each part; stops at the first error. */
typedef kiln_status (*part_fn)(const char *text, size_t len, bool bytecode, const char *file,
                               void *ctx);

static kiln_status for_each_part(const char *bytes, size_t len, const char *file, part_fn fn,
                                 void *ctx) {
  if (kiln_mlir_bytes_are_bytecode(bytes, len)) return fn(bytes, len, true, file, ctx);
  size_t n = kiln_mlir_split_text(bytes, len, NULL, 0);
  kiln_mlir_text_part_t *parts = kiln_calloc(n ? n : 1, sizeof *parts);
  n = kiln_mlir_split_text(bytes, len, parts, n);
  kiln_status s = NULL;
  for (size_t i = 0; i < n && !s; i++) s = fn(parts[i].text, parts[i].len, false, file, ctx);
  kiln_free(parts);
  return s;
}

static kiln_status read_part(const char *text, size_t len, bool bytecode, const char *file,
                             kiln_mlir_module_t **mm) {
  return bytecode ? kiln_mlir_read_bytecode(text, len, mm)
                  : kiln_mlir_parse_text(text, len, file, mm);
}

static kiln_status part_has_checks(const char *text, size_t len, bool bytecode, const char *file,
                                   void *ctx) {
  kiln_mlir_module_t *mm = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(read_part(text, len, bytecode, file, &mm));
  for (int32_t i = 0; i < mm->body.num_ops; i++)
    if (!strcmp(mm->body.ops[i]->name, "func.func") &&
        kiln_stablehlo_func_has_checks(mm->body.ops[i]))
      *(bool *)ctx = true;
  kiln_mlir_module_destroy(mm);
  return NULL;
}

kiln_status kiln_stablehlo_file_has_checks(const char *path, bool *out) {
  char *data = NULL;
  size_t len = 0;
  *out = false;
  KILN_RETURN_IF_ERROR(kiln_read_file(path, &data, &len), "while reading %s", path);
  kiln_status s = for_each_part(data, len, path, part_has_checks, out);
  kiln_free(data);
  return s;
}

static kiln_status part_to_module(const char *text, size_t len, bool bytecode, const char *file,
                                  void *ctx) {
  kiln_hlo_file_t *f = ctx;
  /* a part of only comments and blanks holds no module */
  bool blank = true;
  for (size_t i = 0; i < len && blank && !bytecode; i++) {
    if (text[i] == '/' && i + 1 < len && text[i + 1] == '/') {
      while (i < len && text[i] != '\n') i++;
      continue;
    }
    blank = text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r';
  }
  if (blank && !bytecode) return NULL;
  kiln_mlir_module_t *mm = NULL;
  KILN_RETURN_IF_ERROR(read_part(text, len, bytecode, file, &mm), "in part %d", f->num_modules);
  kiln_hlo_module_t *hm = NULL;
  kiln_status s = kiln_stablehlo_to_hlo(mm, NULL, &hm);
  kiln_mlir_module_destroy(mm);
  if (s) return kiln_status_annotate(s, "while converting part %d of %s", f->num_modules, file);
  f->modules = kiln_realloc(f->modules, sizeof *f->modules * (size_t)(f->num_modules + 1));
  f->modules[f->num_modules++] = hm;
  return NULL;
}

kiln_status kiln_stablehlo_file_load(const char *path, kiln_hlo_file_t **out) {
  *out = NULL;
  double t0 = kiln_clock_ms();
  kiln_hlo_file_t *f = kiln_calloc(1, sizeof *f);
  kiln_status s = kiln_read_file(path, &f->text, &f->len);
  if (!s) s = for_each_part(f->text, f->len, path, part_to_module, f);
  if (!s && f->num_modules == 0) s = KILN_ERR_INVALID("%s holds no function", path);
  if (s) {
    kiln_hlo_file_free(f);
    return s;
  }
  f->parse_seconds = (kiln_clock_ms() - t0) / 1e3;
  *out = f;
  return NULL;
}
