/* Corpus evaluation eligibility and cost; see corpus_eval.h. (Taken from
 * tests/test_corpus_eval.c so several corpus tests share one set of rules.) */
#include "tools/common/corpus_eval.h"
#include "tools/common/corpus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t module_int_attr(const kiln_hlo_module_t *m, const char *key) {
  for (int i = 0; i < m->num_raw_attrs; i++)
    if (strcmp(m->raw_attrs[i].key, key) == 0) return strtoll(m->raw_attrs[i].value, NULL, 10);
  return 1;
}

/* The largest group in a replica_groups value: {{0,1},{2,3}} -> 2, [2,4]<=[8] -> 4,
 * {} -> 0 (all participants), a mesh form -> INT64_MAX (treated as many). */
int64_t kiln_corpus_largest_replica_group(const char *g) {
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
bool kiln_corpus_permute_moves_data(const char *pairs) {
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

/* Why instruction `in` needs several participants (a static string), NULL when it does not. */
static const char *several_participants(const kiln_hlo_instruction_t *in, int64_t replicas,
                                        int64_t partitions) {
  if (in->opcode == KILN_OP_COLLECTIVE_PERMUTE || in->opcode == KILN_OP_COLLECTIVE_PERMUTE_START)
    return kiln_corpus_permute_moves_data(kiln_hlo_instruction_raw_attr(in, "source_target_pairs"))
               ? "collective-permute between devices"
               : NULL;
  if (!(kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE)) return NULL;
  int64_t g = kiln_corpus_largest_replica_group(in->replica_groups);
  if (g > 1) return "multi-participant collective (replica_groups)";
  if (g == 0 && (replicas > 1 || (in->channel_id != 0 && partitions > 1)))
    return "multi-participant collective (replica_count/num_partitions)";
  return NULL;
}

/* NULL when eligible, else why not (a static string). */
const char *kiln_corpus_eval_ineligible_reason(const kiln_hlo_module_t *m) {
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
        default: {
          const char *why = several_participants(in, replicas, partitions);
          if (why) return why;
          break;
        }
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

const char *kiln_corpus_eval_too_costly(const kiln_hlo_module_t *m, double max_cost, char *why, size_t why_n) {
  double params = 0;
  for (int i = 0; i < m->entry->num_parameters; i++)
    params += elems(m->entry->parameters[i]->shape);
  if (params > (double)KILN_CORPUS_MAX_PARAM_ELEMENTS) {
    snprintf(why, why_n, "parameters hold %.3g elements (bound %.3g)", params,
             (double)KILN_CORPUS_MAX_PARAM_ELEMENTS);
    return why;
  }
  double cost = kiln_corpus_eval_cost(m);
  if (cost > max_cost) {
    snprintf(why, why_n, "estimated %.3g element-operations (bound %.3g)", cost, max_cost);
    return why;
  }
  return NULL;
}

double kiln_corpus_spmd_max_cost(double fallback) {
  const char *v = getenv("KILN_CORPUS_SPMD_MAX_COST");
  char *end = NULL;
  double bound = v ? strtod(v, &end) : 0;
  return v && end != v && *end == '\0' && bound > 0 ? bound : fallback;
}

double kiln_corpus_eval_cost(const kiln_hlo_module_t *m) {
  return m->entry ? comp_cost(m->entry, 0) : 0;
}

/* Whether computation `c` or one it calls holds a collective over several participants. */
static bool reaches_several(const kiln_hlo_computation_t *c, int64_t replicas, int64_t partitions,
                            int depth) {
  if (depth > 64) return false;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (several_participants(in, replicas, partitions)) return true;
    for (int g = 0; g < in->num_called_groups; g++)
      for (int k = 0; k < in->called_groups[g].n; k++)
        if (reaches_several(in->called_groups[g].comps[k], replicas, partitions, depth + 1))
          return true;
  }
  return false;
}

void kiln_corpus_multi_device_module(const kiln_hlo_module_t *m, const char *path, int index,
                                     bool *multi, const char **skip) {
  *multi = false;
  *skip = NULL;
  int64_t replicas = module_int_attr(m, "replica_count");
  int64_t partitions = module_int_attr(m, "num_partitions");
  /* Multi-device: some collective the entry reaches needs several participants, whatever
   * else the module holds (a custom call does not matter; an all-reduce over one replica, or
   * a collective in a computation nothing calls, does not make it one). */
  if (!m->entry || !reaches_several(m->entry, replicas, partitions, 0)) return;
  *multi = true;
  /* Left out only for what no participant can run: custom calls are not a reason here (the
   * evaluator runs XLA's well-known targets; an unknown one is reported by the test when the
   * evaluator refuses it, naming the target). */
  if (kiln_corpus_find_invalid(path, index)) {
    *skip = "invalid on purpose";
    return;
  }
  for (size_t c = 0; c < m->computations.len && !*skip; c++)
    for (size_t i = 0; i < m->computations.data[c]->instructions.len && !*skip; i++) {
      const kiln_hlo_instruction_t *in = m->computations.data[c]->instructions.data[i];
      switch (in->opcode) {
        case KILN_OP_INFEED:
        case KILN_OP_OUTFEED:
        case KILN_OP_SEND:
        case KILN_OP_SEND_DONE:
        case KILN_OP_RECV:
        case KILN_OP_RECV_DONE:
          *skip = "infeed/outfeed/send/recv";
          break;
        case KILN_OP_CONSTANT:
          if (in->literal && in->literal->unknown) *skip = "elided constant";
          break;
        default:
          break;
      }
    }
}
