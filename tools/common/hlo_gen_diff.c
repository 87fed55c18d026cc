/* The differential test of generated modules; see hlo_gen_diff.h. */
#include "plugin/env_options.h"
#include "tools/common/hlo_gen_diff.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#define DIFF_MAX_WHILE 1000
#define DIFF_GEMM_ROW (KILN_DIFF_EMITTERS - 1)

const char *kiln_diff_outcome_name(kiln_diff_outcome_t o) {
  switch (o) {
    case KILN_DIFF_PASSED:
      return "passed";
    case KILN_DIFF_SKIPPED:
      return "skipped (evaluator)";
    case KILN_DIFF_UNSUPPORTED:
      return "unsupported (UNIMPLEMENTED)";
    case KILN_DIFF_INVALID:
      return "INVALID";
    case KILN_DIFF_ERROR:
      return "ERROR";
    case KILN_DIFF_MISMATCH:
      return "MISMATCH";
    case KILN_DIFF_CRASH:
      return "CRASH";
    case KILN_DIFF_TIMEOUT:
      return "TIMEOUT";
    case KILN_DIFF_OUTCOMES:
      break;
  }
  return "?";
}

bool kiln_diff_outcome_is_failure(kiln_diff_outcome_t o) {
  return o == KILN_DIFF_INVALID || o == KILN_DIFF_ERROR || o == KILN_DIFF_MISMATCH ||
         o == KILN_DIFF_CRASH || o == KILN_DIFF_TIMEOUT;
}

static void set_what(kiln_diff_result_t *r, kiln_diff_outcome_t o, const char *prefix,
                     kiln_status s) {
  r->outcome = o;
  snprintf(r->what, sizeof r->what, "%s%s%s", prefix, s ? ": " : "",
           s ? kiln_status_message(s) : "");
}

static kiln_elem_type_t leaf_type(const kiln_shape_t *s) {
  while (s->type == KILN_TUPLE && s->num_elements > 0) s = s->elements[0];
  return s->type;
}

/* The float or complex type of `m` with the loosest module tolerance (compare.h's floor
 * type), or false when the module holds neither. Complex types count by their parts: a c64
 * FFT converted to c128 carries f32 rounding (fuzz-2090862). */
static bool loosest_float(const kiln_hlo_module_t *m, kiln_elem_type_t *out) {
  bool found = false;
  double rtol = 0;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      kiln_elem_type_t t = leaf_type(comp->instructions.data[i]->shape);
      if (!kiln_elem_type_is_float(t) && !kiln_elem_type_is_complex(t)) continue;
      double r = kiln_compare_module_tolerance(t, 1).rtol;
      if (!found || r > rtol) *out = t, rtol = r, found = true;
    }
  }
  return found;
}

static void count_ops(const kiln_hlo_module_t *m, kiln_diff_coverage_t *cov) {
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      cov->op_type[in->opcode][leaf_type(in->shape)]++;
    }
  }
}

/* Counts the emitter of every fusion (and the library gemms) of optimized module `m`. */
static void count_emitters(const kiln_hlo_module_t *m, kiln_diff_coverage_t *cov) {
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      kiln_elem_type_t t = leaf_type(in->shape);
      if (in->opcode == KILN_OP_DOT) {
        cov->emitter_type[DIFF_GEMM_ROW][t]++;
        continue;
      }
      if (in->opcode != KILN_OP_FUSION) continue;
      const kiln_hlo_computation_t *fused = kiln_hlo_instruction_called(in, "calls");
      kiln_codegen_emitter_t kind;
      kiln_status s = fused ? kiln_codegen_choose_emitter(fused, &kind) : NULL;
      if (fused && !s && (int)kind < DIFF_GEMM_ROW) cov->emitter_type[kind][t]++;
      kiln_status_free(s);
    }
  }
}

/* ---- pipeline-prefix bisection ---- */

typedef struct bisect_ctx {
  const kiln_compare_options_t *compare;
  kiln_literal_t *const *args;
  int num_args;
  const kiln_literal_t *want; /* the evaluator on the module as written */
  char culprit[96];
  char detail[400];
} bisect_ctx_t;

static kiln_status after_pass(void *ctx, const char *pass, const kiln_hlo_module_t *m) {
  bisect_ctx_t *b = ctx;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_eval_options_t eo = {0};
  eo.rng_seed = 42;
  eo.max_while_iterations = DIFF_MAX_WHILE;
  kiln_literal_t *got = NULL;
  kiln_status s = kiln_eval_module(m, &eo, b->num_args, b->args, &arena, &got);
  kiln_status stop = NULL;
  if (s) {
    /* The evaluator cannot follow past this pass (a layout or op it does not take): the
     * prefixes after it cannot be judged. */
    snprintf(b->detail, sizeof b->detail, "the evaluator stops after pass '%s': %s", pass,
             kiln_status_message(s));
    kiln_status_free(s);
    stop = KILN_ERR_INTERNAL("bisection stops");
  } else {
    kiln_compare_report_t cr;
    if (!kiln_compare_literals(b->want, got, b->compare, &cr)) {
      snprintf(b->culprit, sizeof b->culprit, "pass %s", pass);
      snprintf(b->detail, sizeof b->detail, "after pass '%s' the evaluator gives: %s", pass,
               cr.first);
      stop = KILN_ERR_INTERNAL("bisection found the pass");
    }
  }
  kiln_arena_destroy(&arena);
  return stop;
}

/* Runs the pipeline on a fresh parse of `text`, counting emitters into `cov` (may be NULL)
 * and, when `b` is set, evaluating after every pass. */
static void run_pipeline(const char *text, kiln_diff_coverage_t *cov, bisect_ctx_t *b) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) {
    kiln_status_free(s);
    return;
  }
  kiln_pipeline_lift_parse_limit(m);
  kiln_pass_options_t po;
  memset(&po, 0, sizeof po);
  po.verify = -1;
  kiln_pjrt_pass_options_from_env(&po);
  if (b) {
    po.after_pass = after_pass;
    po.after_pass_ctx = b;
  }
  s = kiln_pipeline_run(m, &po);
  if (!s && cov) count_emitters(m, cov);
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

void kiln_diff_check_text(const char *text, const kiln_diff_options_t *o, kiln_diff_result_t *out) {
  memset(out, 0, sizeof *out);
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) {
    set_what(out, KILN_DIFF_INVALID, "parse", s);
    kiln_status_free(s);
    goto done;
  }
  if ((s = kiln_hlo_module_verify(m)) != NULL) {
    set_what(out, KILN_DIFF_INVALID, "verify", s);
    kiln_status_free(s);
    goto done;
  }
  if (o->coverage) count_ops(m, o->coverage);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_literal_t *want = NULL, *got = NULL;
  s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
  if (!s) {
    kiln_eval_options_t eo = {0};
    eo.rng_seed = 42;
    eo.max_while_iterations = DIFF_MAX_WHILE;
    /* Every value freed once nothing live uses it: a value freed too early shows up as a
     * difference (generated programs are small, the cost is a malloc per value). */
    eo.collect_eagerly = true;
    s = kiln_eval_module(m, &eo, n, args, &arena, &want);
  }
  if (s) {
    set_what(out, KILN_DIFF_SKIPPED, "evaluator", s);
    kiln_status_free(s);
    kiln_arena_destroy(&arena);
    goto done;
  }
  kiln_compare_options_t co = {0};
  co.has_floor_type = loosest_float(m, &co.floor_type);
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = o->device;
  ro.max_while_iterations = DIFF_MAX_WHILE;
  ro.rng_seed = 42;
  kiln_device_run_report_t rep;
  s = kiln_device_run_module(m, args, n, &ro, &arena, &got, &rep);
  if (s) {
    set_what(out,
             kiln_status_code(s) == KILN_UNIMPLEMENTED ? KILN_DIFF_UNSUPPORTED : KILN_DIFF_ERROR,
             kiln_status_code_name(kiln_status_code(s)), s);
    kiln_status_free(s);
  } else {
    kiln_compare_report_t cr;
    if (!kiln_compare_literals(want, got, &co, &cr)) {
      out->outcome = KILN_DIFF_MISMATCH;
      snprintf(out->what, sizeof out->what, "%lld of %lld elements differ; %.400s",
               (long long)cr.mismatches, (long long)cr.elements, cr.first);
    }
  }
  bisect_ctx_t b = {&co, args, n, want, "", ""};
  bool bisect = o->bisect && out->outcome == KILN_DIFF_MISMATCH;
  if (o->coverage || bisect) run_pipeline(text, o->coverage, bisect ? &b : NULL);
  if (bisect) {
    snprintf(out->culprit, sizeof out->culprit, "%s",
             b.culprit[0] ? b.culprit : "after the passes (emitters, LLVM, runtime)");
    if (b.detail[0]) {
      size_t len = strlen(out->what);
      snprintf(out->what + len, sizeof out->what - len, " [%s]", b.detail);
    }
  }
  kiln_arena_destroy(&arena);
done:
  if (o->coverage) o->coverage->outcomes[out->outcome]++;
  kiln_hlo_module_destroy(m);
}

/* The width of element type t's column: its whole name and a space, at least 8. */
static int type_width(int t) {
  int n = (int)strlen(kiln_elem_type_name((kiln_elem_type_t)t)) + 1;
  return n < 8 ? 8 : n;
}

static void print_header(FILE *f, const bool *used_type) {
  fprintf(f, "%-22s", "");
  for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++)
    if (used_type[t]) fprintf(f, "%*s", type_width(t), kiln_elem_type_name((kiln_elem_type_t)t));
  fprintf(f, "\n");
}

static void print_row(FILE *f, const char *name, const int64_t *counts, const bool *used_type) {
  fprintf(f, "%-22s", name);
  for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) {
    if (!used_type[t]) continue;
    if (counts[t])
      fprintf(f, "%*lld", type_width(t), (long long)counts[t]);
    else
      fprintf(f, "%*s", type_width(t), ".");
  }
  fprintf(f, "\n");
}

static const char *emitter_name(int e) {
  return e == DIFF_GEMM_ROW ? "gemm (library)"
                            : kiln_codegen_emitter_name((kiln_codegen_emitter_t)e);
}

void kiln_diff_coverage_print(FILE *f, const kiln_diff_coverage_t *c) {
  bool used_type[KILN_ELEM_TYPE_COUNT] = {0};
  for (int op = 0; op < KILN_OP_COUNT; op++)
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) used_type[t] |= c->op_type[op][t] > 0;
  fprintf(f, "coverage: instructions by opcode (rows) and element type (columns)\n");
  print_header(f, used_type);
  int ops_reached = 0, cells = 0, types = 0;
  for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) types += used_type[t];
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    int64_t total = 0;
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) {
      total += c->op_type[op][t];
      cells += c->op_type[op][t] > 0;
    }
    if (!total) continue;
    ops_reached++;
    print_row(f, kiln_hlo_opcode_name((kiln_hlo_opcode_t)op), c->op_type[op], used_type);
  }
  fprintf(f, "coverage: %d opcodes, %d opcode x type cells reached\n", ops_reached, cells);
  /* A pass may make fusions of a type no instruction of the input has (batch-norm's f64
   * statistics): their columns join this table's. */
  for (int e = 0; e < KILN_DIFF_EMITTERS; e++)
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) used_type[t] |= c->emitter_type[e][t] > 0;
  fprintf(f, "coverage: fusions by emitter (rows) and root element type (columns)\n");
  print_header(f, used_type);
  int emitters = 0, ecells = 0;
  for (int e = 0; e < KILN_DIFF_EMITTERS; e++) {
    int64_t total = 0;
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) {
      total += c->emitter_type[e][t];
      ecells += c->emitter_type[e][t] > 0;
    }
    emitters += total > 0;
    print_row(f, emitter_name(e), c->emitter_type[e], used_type);
  }
  fprintf(
      f, "coverage: %d of %d emitters (with the library gemm), %d emitter x type cells, %d types\n",
      emitters, KILN_DIFF_EMITTERS, ecells, types);
  fprintf(f, "outcomes:");
  for (int k = 0; k < KILN_DIFF_OUTCOMES; k++)
    fprintf(f, " %s %lld%s", kiln_diff_outcome_name((kiln_diff_outcome_t)k),
            (long long)c->outcomes[k], k < KILN_DIFF_OUTCOMES - 1 ? "," : "\n");
}

/* ---- reading printed tables back ---- */

#define READ_MAX_TOKENS 64

/* Splits line [s, e) into whitespace-separated tokens (pointers into `buf`). */
static int split_line(const char *s, const char *e, char *buf, size_t buf_len, char **tok) {
  size_t n = (size_t)(e - s);
  if (n >= buf_len) n = buf_len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  int k = 0;
  for (char *p = strtok(buf, " \t\r"); p && k < READ_MAX_TOKENS; p = strtok(NULL, " \t\r"))
    tok[k++] = p;
  return k;
}

/* Maps header tokens to element types: the columns come in the enum's order, names whole
 * or cut to 7 characters (older logs). Returns false when one does not match. */
static bool read_header(char **tok, int n, int *col_type) {
  int t = 0;
  for (int k = 0; k < n; k++) {
    for (; t < KILN_ELEM_TYPE_COUNT; t++) {
      const char *name = kiln_elem_type_name((kiln_elem_type_t)t);
      size_t len = strlen(tok[k]);
      if (!strcmp(name, tok[k]) || (len == 7 && strlen(name) > 7 && !strncmp(name, tok[k], 7)))
        break;
    }
    if (t == KILN_ELEM_TYPE_COUNT) return false;
    col_type[k] = t++;
  }
  return true;
}

/* Adds one row (`n` tokens: a name of one or more words, then `cols` counts) to `counts`;
 * returns the row's name (joined with spaces into `name`) or false. */
static bool read_row(char **tok, int n, int cols, const int *col_type, int64_t *counts, char *name,
                     size_t name_len) {
  if (n <= cols) return false;
  name[0] = '\0';
  for (int k = 0; k < n - cols; k++) {
    size_t len = strlen(name);
    snprintf(name + len, name_len - len, "%s%s", k ? " " : "", tok[k]);
  }
  for (int k = 0; k < cols; k++) {
    const char *v = tok[n - cols + k];
    if (!strcmp(v, ".")) continue;
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (!end || *end || x < 0) return false;
    counts[col_type[k]] += x;
  }
  return true;
}

static bool read_outcomes(const char *line, kiln_diff_coverage_t *c) {
  const char *p = line + strlen("outcomes:");
  while (*p) {
    while (*p == ' ') p++;
    int k = 0;
    for (; k < KILN_DIFF_OUTCOMES; k++) {
      const char *name = kiln_diff_outcome_name((kiln_diff_outcome_t)k);
      size_t len = strlen(name);
      if (!strncmp(p, name, len) && p[len] == ' ') {
        p += len;
        break;
      }
    }
    if (k == KILN_DIFF_OUTCOMES) return false;
    char *end = NULL;
    c->outcomes[k] += strtoll(p, &end, 10);
    if (end == p) return false;
    p = end;
    if (*p == ',') p++;
  }
  return true;
}

int kiln_diff_coverage_read(const char *text, kiln_diff_coverage_t *c, char *err, size_t err_len) {
  enum { NONE, OPS_HEADER, OPS, EMITTERS_HEADER, EMITTERS } state = NONE;
  int tables = 0, cols = 0, line_no = 0;
  int col_type[READ_MAX_TOKENS];
  char buf[4096], name[128];
  char *tok[READ_MAX_TOKENS];
  for (const char *s = text; *s;) {
    const char *e = strchr(s, '\n');
    if (!e) e = s + strlen(s);
    line_no++;
    bool ok = true;
    if (!strncmp(s, "coverage: instructions by opcode", 32)) {
      state = OPS_HEADER;
    } else if (!strncmp(s, "coverage: fusions by emitter", 28)) {
      state = EMITTERS_HEADER;
    } else if (!strncmp(s, "coverage: ", 10)) {
      /* a summary line */
    } else if (!strncmp(s, "outcomes:", 9) && state == EMITTERS) {
      size_t n = (size_t)(e - s) < sizeof buf ? (size_t)(e - s) : sizeof buf - 1;
      memcpy(buf, s, n);
      buf[n] = '\0';
      ok = read_outcomes(buf, c);
      tables++;
      state = NONE;
    } else if (state == OPS_HEADER || state == EMITTERS_HEADER) {
      cols = split_line(s, e, buf, sizeof buf, tok);
      ok = read_header(tok, cols, col_type);
      state = state == OPS_HEADER ? OPS : EMITTERS;
    } else if (state == OPS || state == EMITTERS) {
      int n = split_line(s, e, buf, sizeof buf, tok);
      int64_t counts[KILN_ELEM_TYPE_COUNT] = {0};
      ok = read_row(tok, n, cols, col_type, counts, name, sizeof name);
      int row = -1;
      if (ok && state == OPS) {
        kiln_hlo_opcode_t op;
        ok = kiln_hlo_opcode_from_name(name, strlen(name), &op);
        row = (int)op;
      } else if (ok) {
        for (int k = 0; k < KILN_DIFF_EMITTERS; k++)
          if (!strcmp(emitter_name(k), name)) row = k;
        ok = row >= 0;
      }
      for (int t = 0; ok && t < KILN_ELEM_TYPE_COUNT; t++) {
        if (state == OPS)
          c->op_type[row][t] += counts[t];
        else
          c->emitter_type[row][t] += counts[t];
      }
    }
    if (!ok) {
      snprintf(err, err_len, "line %d: not a coverage table line: %.*s", line_no,
               (int)(e - s > 80 ? 80 : e - s), s);
      return -1;
    }
    s = *e ? e + 1 : e;
  }
  return tables;
}
