/* Corpus evaluation: every eligible whole module of the HLO corpus (xla/ and real/) is
 * parsed, verified, given deterministic fake arguments and evaluated by the reference
 * evaluator. The test prints `evaluated X / eligible Y`, every failure with its message,
 * every module left out and why, and fails below 95%.
 *
 * A module is not eligible when it
 *   - has a custom-call (its target's semantics are not the evaluator's to know),
 *   - has infeed/outfeed/send/recv (they talk to the host or other devices),
 *   - has a collective with more than one participant in a group: replica_groups with a
 *     group of two or more ({{0,1}}, the iota form [G,S]<=[N] with S > 1, any mesh form),
 *     empty groups with replica_count > 1 (or, with a channel_id, num_partitions > 1), or a
 *     collective-permute whose pairs move data between devices,
 *   - has an elided constant `constant({...})`,
 *   - is too costly to interpret here: more than KILN_CORPUS_MAX_PARAM_ELEMENTS parameter
 *     elements, or an estimated KILN_CORPUS_MAX_COST element-operations (each
 *     instruction's output elements, dot/convolution multiply-adds, reductions' input
 *     elements times their reducer's size, fusions and calls by their bodies, while loops
 *     by their body times the known_trip_count when one is given, else the constant
 *     their condition compares with (`i < N`), else once),
 *   - runs a while loop past KILN_CORPUS_MAX_WHILE iterations on the fake inputs (the
 *     evaluator's RESOURCE_EXHAUSTED; the loop's condition depends on data), or
 *   - is in a file that is invalid on purpose (xla's invalid_concat test input).
 * Each of these is printed with its reason. Parse and verify failures of other files count
 * as failures. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "tools/common/corpus.h"
#include "tools/common/fake_args.h"

#define KILN_CORPUS_MAX_PARAM_ELEMENTS (INT64_C(1) << 26)
#define KILN_CORPUS_MAX_COST 2.0e9
#define KILN_CORPUS_MAX_WHILE 20000
#define KILN_CORPUS_MIN_PASS_RATE 0.95

static const char *corpus_dir(void) {
  const char *d = getenv("KILN_CORPUS_DIR");
  return d && *d ? d : KILN_CORPUS_DIR;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- eligibility ---- */

static int64_t module_int_attr(const kiln_hlo_module_t *m, const char *key) {
  for (int i = 0; i < m->num_raw_attrs; i++)
    if (strcmp(m->raw_attrs[i].key, key) == 0) return strtoll(m->raw_attrs[i].value, NULL, 10);
  return 1;
}

/* The largest group in a replica_groups value: {{0,1},{2,3}} -> 2, [2,4]<=[8] -> 4,
 * {} -> 0 (all participants), a mesh form -> INT64_MAX (treated as many). */
static int64_t largest_replica_group(const char *g) {
  if (!g) return 0;
  while (*g == ' ') g++;
  if (strncmp(g, "mesh", 4) == 0) return INT64_MAX;
  if (*g == '[') { /* iota list: [G,S1,S2..]<=[...]: groups of S1*S2*... */
    const char *p = g + 1;
    int64_t size = 1;
    bool first = true;
    while (*p && *p != ']') {
      char *end;
      long long v = strtoll(p, &end, 10);
      if (end == p) break;
      if (!first) size *= v;
      first = false;
      p = end;
      if (*p == ',') p++;
    }
    return first ? 0 : size;
  }
  int64_t best = 0, cur = 0;
  int depth = 0;
  bool any = false;
  for (const char *p = g; *p; p++) {
    if (*p == '{') {
      depth++;
      if (depth == 2) {
        cur = 0;
        any = false;
      }
    } else if (*p == '}') {
      if (depth == 2) {
        int64_t n = any ? cur + 1 : 0;
        if (n > best) best = n;
      }
      if (--depth == 0) break;
    } else if (depth == 2 && *p == ',') {
      cur++;
    } else if (depth == 2 && *p >= '0' && *p <= '9') {
      any = true;
    }
  }
  return best;
}

/* A collective-permute moves data when some pair has source != target. */
static bool permute_moves_data(const char *pairs) {
  if (!pairs) return false;
  const char *p = pairs;
  while ((p = strchr(p, '{')) != NULL) {
    p++;
    char *end;
    long long a = strtoll(p, &end, 10);
    if (end == p) continue;
    if (*end != ',') continue;
    const char *q = end + 1;
    long long b = strtoll(q, &end, 10);
    if (end == q) continue;
    if (a != b) return true;
    p = end;
  }
  return false;
}

/* NULL when eligible, else why not (a static string). */
static const char *ineligible_reason(const kiln_hlo_module_t *m) {
  int64_t replicas = module_int_attr(m, "replica_count");
  int64_t partitions = module_int_attr(m, "num_partitions");
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      switch (in->opcode) {
        case KILN_OP_CUSTOM_CALL:
        case KILN_OP_CUSTOM_CALL_START:
        case KILN_OP_CUSTOM_CALL_DONE:
        case KILN_OP_CUSTOM_CALL_UPDATE:
          return "custom-call";
        case KILN_OP_INFEED:
        case KILN_OP_OUTFEED:
        case KILN_OP_SEND:
        case KILN_OP_SEND_DONE:
        case KILN_OP_RECV:
        case KILN_OP_RECV_DONE:
          return "infeed/outfeed/send/recv";
        case KILN_OP_CONSTANT:
          if (in->literal && in->literal->unknown) return "elided constant";
          break;
        case KILN_OP_COLLECTIVE_PERMUTE:
        case KILN_OP_COLLECTIVE_PERMUTE_START:
          if (permute_moves_data(kiln_hlo_instruction_raw_attr(in, "source_target_pairs")))
            return "collective-permute between devices";
          break;
        default:
          if (kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) {
            int64_t g = largest_replica_group(in->replica_groups);
            if (g > 1) return "multi-participant collective (replica_groups)";
            if (g == 0 && (replicas > 1 || (in->channel_id != 0 && partitions > 1)))
              return "multi-participant collective (replica_count/num_partitions)";
          }
          break;
      }
    }
  }
  return NULL;
}

/* ---- cost estimate ---- */

static double comp_cost(const kiln_hlo_computation_t *c, int depth);

static double elems(const kiln_shape_t *s) {
  if (!s) return 0;
  if (kiln_shape_is_tuple(s)) {
    double n = 0;
    for (int i = 0; i < s->num_elements; i++) n += elems(s->elements[i]);
    return n;
  }
  return kiln_shape_is_array(s) ? (double)kiln_shape_num_elements(s) : 0;
}

static double called_cost(const kiln_hlo_instruction_t *in, const char *key, int depth) {
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(in, key);
  double r = c ? comp_cost(c, depth + 1) : 1;
  return r < 1 ? 1 : r;
}

static double condition_trip_estimate(const kiln_hlo_computation_t *cond);

static double trip_count(const kiln_hlo_instruction_t *in) {
  const char *bc = in->backend_config;
  const char *k = bc ? strstr(bc, "known_trip_count") : NULL;
  if (!k) return condition_trip_estimate(kiln_hlo_instruction_called(in, "condition"));
  const char *n = strstr(k, "\"n\"");
  if (!n) n = strstr(k, "\\\"n\\\"");
  if (!n) return 1;
  while (*n && (*n < '0' || *n > '9')) n++;
  double v = strtod(n, NULL);
  return v > 1 ? v : 1;
}

/* Without a known_trip_count, a loop whose condition compares against a constant is
 * taken to run |constant| times (the common `i < N` form); otherwise once. */
static double condition_trip_estimate(const kiln_hlo_computation_t *cond) {
  const kiln_hlo_instruction_t *root = cond ? cond->root : NULL;
  if (!root || root->opcode != KILN_OP_COMPARE) return 1;
  double best = 1;
  for (int i = 0; i < root->num_operands; i++) {
    const kiln_hlo_instruction_t *v = root->operands[i];
    while ((v->opcode == KILN_OP_CONVERT || v->opcode == KILN_OP_RESHAPE ||
            v->opcode == KILN_OP_BROADCAST || v->opcode == KILN_OP_COPY) &&
           v->num_operands == 1)
      v = v->operands[0];
    if (v->opcode == KILN_OP_CONSTANT && v->literal && !v->literal->unknown &&
        v->literal->num_elements == 1 && kiln_shape_is_array(v->literal->shape)) {
      double c = fabs(kiln_literal_get_f64(v->literal, 0));
      if (c > best) best = c;
    }
  }
  return best;
}

static double instr_cost(const kiln_hlo_instruction_t *in, int depth) {
  double out = elems(in->shape);
  switch (in->opcode) {
    case KILN_OP_DOT: {
      double k = 1;
      const kiln_shape_t *lhs = in->num_operands > 0 ? in->operands[0]->shape : NULL;
      for (int i = 0; lhs && i < in->dot_dnums.lhs_contracting.n; i++) {
        int64_t d = in->dot_dnums.lhs_contracting.v[i];
        if (d >= 0 && d < lhs->rank) k *= (double)lhs->dims[d];
      }
      return out * k;
    }
    case KILN_OP_CONVOLUTION: {
      /* Each output element reads the whole kernel window over its feature group. */
      const kiln_shape_t *rhs = in->num_operands > 1 ? in->operands[1]->shape : NULL;
      double kernel = rhs ? elems(rhs) : 1;
      double of = 1;
      if (rhs && in->has_conv_dnums && in->conv_dnums.kernel_output_feature < rhs->rank)
        of = (double)rhs->dims[in->conv_dnums.kernel_output_feature];
      return out * (of > 0 ? kernel / of : kernel);
    }
    case KILN_OP_REDUCE:
    case KILN_OP_SCATTER:
    case KILN_OP_MAP:
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_REDUCE_SCATTER: {
      double in_elems = 0;
      for (int i = 0; i < in->num_operands; i++) in_elems += elems(in->operands[i]->shape);
      return (in_elems + out) * called_cost(in, "to_apply", depth);
    }
    case KILN_OP_REDUCE_WINDOW:
    case KILN_OP_SELECT_AND_SCATTER: {
      double window = 1;
      for (int i = 0; i < in->num_window_dims; i++) window *= (double)in->window[i].size;
      double in_elems = in->num_operands ? elems(in->operands[0]->shape) : 0;
      const char *key = in->opcode == KILN_OP_REDUCE_WINDOW ? "to_apply" : "select";
      return (in_elems + out * window) * called_cost(in, key, depth) * 2;
    }
    case KILN_OP_SORT: {
      double n = in->num_operands ? elems(in->operands[0]->shape) : 0;
      double lg = 1;
      while ((1 << (int)lg) < n && lg < 62) lg++;
      return n * lg * called_cost(in, "to_apply", depth);
    }
    case KILN_OP_FUSION:
      return out + called_cost(in, "calls", depth);
    case KILN_OP_CALL:
    case KILN_OP_ASYNC_START:
      return out + called_cost(in, in->opcode == KILN_OP_CALL ? "to_apply" : "calls", depth);
    case KILN_OP_WHILE:
      return trip_count(in) *
             (called_cost(in, "body", depth) + called_cost(in, "condition", depth));
    case KILN_OP_CONDITIONAL: {
      double worst = 1;
      for (int g = 0; g < in->num_called_groups; g++)
        for (int k = 0; k < in->called_groups[g].n; k++) {
          double c = comp_cost(in->called_groups[g].comps[k], depth + 1);
          if (c > worst) worst = c;
        }
      return out + worst;
    }
    default:
      return out;
  }
}

static double comp_cost(const kiln_hlo_computation_t *c, int depth) {
  if (!c || depth > 32) return 1e30;
  double total = 0;
  for (size_t i = 0; i < c->instructions.len; i++)
    total += instr_cost(c->instructions.data[i], depth);
  return total;
}

static const char *too_costly(const kiln_hlo_module_t *m, char *why, size_t why_n) {
  double params = 0;
  for (int i = 0; i < m->entry->num_parameters; i++)
    params += elems(m->entry->parameters[i]->shape);
  if (params > (double)KILN_CORPUS_MAX_PARAM_ELEMENTS) {
    snprintf(why, why_n, "parameters hold %.3g elements (bound %.3g)", params,
             (double)KILN_CORPUS_MAX_PARAM_ELEMENTS);
    return why;
  }
  double cost = comp_cost(m->entry, 0);
  if (cost > KILN_CORPUS_MAX_COST) {
    snprintf(why, why_n, "estimated %.3g element-operations (bound %.3g)", cost,
             KILN_CORPUS_MAX_COST);
    return why;
  }
  return NULL;
}

/* ---- the run ---- */

typedef struct corpus_stats {
  int eligible, evaluated, skipped;
  kiln_strbuf_t failures, skips;
  double slowest_s[5];
  char slowest_name[5][200];
} corpus_stats_t;

static void note_time(corpus_stats_t *st, const char *name, double s) {
  for (int i = 0; i < 5; i++) {
    if (s > st->slowest_s[i]) {
      for (int j = 4; j > i; j--) {
        st->slowest_s[j] = st->slowest_s[j - 1];
        memcpy(st->slowest_name[j], st->slowest_name[j - 1], sizeof st->slowest_name[j]);
      }
      st->slowest_s[i] = s;
      snprintf(st->slowest_name[i], sizeof st->slowest_name[i], "%s", name);
      return;
    }
  }
}

static void record_failure(corpus_stats_t *st, const char *name, const char *what, kiln_status s) {
  st->eligible++;
  const char *msg = kiln_status_message(s);
  kiln_strbuf_printf(&st->failures, "  FAIL %s: %s: %s: %.600s\n", name, what,
                     kiln_status_code_name(kiln_status_code(s)), msg);
  kiln_status_free(s);
}

static void record_skip(corpus_stats_t *st, const char *name, const char *why) {
  st->skipped++;
  kiln_strbuf_printf(&st->skips, "  skip %s: %s\n", name, why);
}

/* KILN_CORPUS_VERBOSE=1 prints each module as it starts (to find a slow one). */
static bool verbose(void) {
  const char *v = getenv("KILN_CORPUS_VERBOSE");
  return v && *v && strcmp(v, "0") != 0;
}

static void run_module(corpus_stats_t *st, const kiln_hlo_module_t *m, const char *name) {
  if (verbose()) fprintf(stderr, "corpus eval: %s\n", name);
  const char *why = ineligible_reason(m);
  if (why) {
    record_skip(st, name, why);
    return;
  }
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    record_failure(st, name, "verify", s);
    return;
  }
  if (!m->entry) {
    record_failure(st, name, "entry",
                   kiln_status_make(KILN_INVALID_ARGUMENT, "no entry computation"));
    return;
  }
  char buf[160];
  if ((why = too_costly(m, buf, sizeof buf)) != NULL) {
    record_skip(st, name, why);
    return;
  }
  kiln_arena_t args_arena, out_arena;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&out_arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  double t0 = now_s();
  s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
  if (s) {
    record_failure(st, name, "fake args", s);
  } else {
    kiln_eval_options_t eo = {0};
    eo.rng_seed = 42;
    eo.max_while_iterations = KILN_CORPUS_MAX_WHILE;
    kiln_literal_t *result = NULL;
    s = kiln_eval_module(m, &eo, n, args, &out_arena, &result);
    if (s && kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED &&
        strstr(kiln_status_message(s), "while")) {
      snprintf(buf, sizeof buf, "while loop past %d iterations on fake inputs",
               KILN_CORPUS_MAX_WHILE);
      record_skip(st, name, buf);
      kiln_status_free(s);
    } else if (s) {
      record_failure(st, name, "eval", s);
    } else if (!result || !kiln_shape_compatible(result->shape, m->entry->root->shape)) {
      char *got = result ? kiln_shape_to_string(result->shape, false) : kiln_strdup("nothing");
      char *want = kiln_shape_to_string(m->entry->root->shape, false);
      record_failure(st, name, "eval",
                     kiln_status_make(KILN_INTERNAL, "result is %s, the root is %s", got, want));
      kiln_free(got);
      kiln_free(want);
    } else {
      st->eligible++;
      st->evaluated++;
    }
  }
  note_time(st, name, now_s() - t0);
  kiln_arena_destroy(&out_arena);
  kiln_arena_destroy(&args_arena);
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_folder(corpus_stats_t *st, const char *sub) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", corpus_dir(), sub);
  DIR *d = opendir(dir);
  if (!d) fail_msg("cannot open corpus folder %s", dir);
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
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, names.data[i]);
    char label[160];
    snprintf(label, sizeof label, "%s/%.140s", sub, names.data[i]);
    char *text;
    size_t len;
    kiln_status s = kiln_read_file(path, &text, &len);
    if (s) {
      record_failure(st, label, "read", s);
      continue;
    }
    kiln_hlo_parse_options_t po = {0};
    po.filename = path;
    kiln_hlo_module_t **mods = NULL;
    int count = 0;
    s = kiln_hlo_parse_modules(text, len, &po, &mods, &count);
    kiln_free(text);
    if (s) {
      if (strstr(names.data[i], "invalid_concat")) {
        record_skip(st, label, "invalid on purpose (rejected by the parser or verifier)");
        kiln_status_free(s);
      } else {
        record_failure(st, label, "parse", s);
      }
      continue;
    }
    for (int k = 0; k < count; k++) {
      char name[200];
      if (count > 1)
        snprintf(name, sizeof name, "%s#%d", label, k);
      else
        snprintf(name, sizeof name, "%s", label);
      const kiln_corpus_invalid_t *known = kiln_corpus_find_invalid(path, k);
      if (known) {
        kiln_status v = kiln_hlo_module_verify(mods[k]);
        if (v) {
          char why[300];
          snprintf(why, sizeof why, "invalid HLO, rejected by the verifier: %s", known->why);
          record_skip(st, name, why);
          kiln_status_free(v);
          continue;
        }
      }
      run_module(st, mods[k], name);
      kiln_hlo_module_destroy(mods[k]);
      mods[k] = NULL;
    }
    for (int k = 0; k < count; k++)
      if (mods[k]) kiln_hlo_module_destroy(mods[k]);
    kiln_free(mods);
  }
  for (size_t i = 0; i < names.len; i++) kiln_free(names.data[i]);
  kiln_vec_free(&names);
}

static void test_corpus_modules_evaluate_on_fake_inputs(void **state) {
  corpus_stats_t st;
  memset(&st, 0, sizeof st);
  double t0 = now_s();
  run_folder(&st, "xla");
  run_folder(&st, "real");
  double rate = st.eligible ? (double)st.evaluated / st.eligible : 0;
  printf("corpus eval: evaluated %d / eligible %d (%.1f%%), %d not eligible, %.1f s\n",
         st.evaluated, st.eligible, 100 * rate, st.skipped, now_s() - t0);
  printf("not eligible:\n%s", kiln_strbuf_cstr(&st.skips));
  printf("failures:\n%s", kiln_strbuf_cstr(&st.failures));
  printf("slowest:\n");
  for (int i = 0; i < 5 && st.slowest_s[i] > 0; i++)
    printf("  %.2f s %s\n", st.slowest_s[i], st.slowest_name[i]);
  fflush(stdout);
  kiln_strbuf_free(&st.skips);
  kiln_strbuf_free(&st.failures);
  assert_true(st.eligible > 100);
  assert_true(rate >= KILN_CORPUS_MIN_PASS_RATE);
}

/* The eligibility rules themselves, on small modules. */
static void test_corpus_eligibility_classifies_collectives(void **state) {
  static const struct {
    const char *attrs, *groups;
    bool eligible;
  } cases[] = {
      {"", "replica_groups={{0},{1}}", true},
      {"", "replica_groups={{0,1}}", false},
      {"", "replica_groups=[2,1]<=[2]", true},
      {"", "replica_groups=[1,2]<=[2]", false},
      {"", "replica_groups=[64,2]<=[2,64]T(1,0)", false},
      {"", "replica_groups={}", true},
      {", replica_count=2", "replica_groups={}", false},
      {", replica_count=2", "replica_groups={{0},{1}}", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule m%s\n"
             "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
             "  ROOT s = f32[] add(x, y)\n}\n"
             "ENTRY main {\n  p = f32[4] parameter(0)\n"
             "  ROOT r = f32[4] all-reduce(p), %s, to_apply=add\n}\n",
             cases[i].attrs, cases[i].groups);
    kiln_hlo_module_t *m = NULL;
    kiln_hlo_parse_options_t po = {0};
    kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
    if (s) fail_msg("case %zu: %s", i, kiln_status_message(s));
    const char *why = ineligible_reason(m);
    if ((why == NULL) != cases[i].eligible)
      fail_msg("case %zu (%s%s): eligible=%d, reason %s", i, cases[i].groups, cases[i].attrs,
               why == NULL, why ? why : "-");
    kiln_hlo_module_destroy(m);
  }
  assert_false(permute_moves_data("{{0,0}}"));
  assert_true(permute_moves_data("{{0,1},{1,0}}"));
  assert_int_equal(largest_replica_group("{{0,1,2},{3}}"), 3);
  assert_int_equal(largest_replica_group("mesh['axis_0'=2] {'axis_0'}"), INT64_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_eligibility_classifies_collectives),
      cmocka_unit_test(test_corpus_modules_evaluate_on_fake_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
