/* XLA's async shorthand in HLO text: an opcode `X-start`, `X-update` or `X-done`, where X is
 * an opcode without a dedicated asynchronous opcode of its own (all-to-all, reduce-scatter,
 * add, ...), stands for async-start / async-update / async-done around X:
 *
 *   s = ((f32[8]), f32[4]) reduce-scatter-start(x), dimensions={0}, to_apply=add
 *   d = f32[4] reduce-scatter-done(s)
 *
 * is read as XLA's parser reads it: an async-start whose `calls` computation (a new one,
 * named async_wrapped[.N], placed before the computation holding the start) has one
 * parameter per element of the start's first tuple element and the root X, shaped like the
 * start's second tuple element, carrying X's attributes; the start keeps the attributes every
 * instruction has (metadata, sharding, frontend_attributes, statistics, backend_config,
 * control-predecessors) and async_execution_thread. `calls=` belongs to the long form, so on a
 * shorthand start it is an error unless X is a fusion. -update / -done must read an
 * async-start or -update wrapping the same X (a `calls=` there must name that computation).
 * Opcodes that have their own (all-reduce-start, all-gather-start, collective-permute-start,
 * copy-start, custom-call-start, ...) are found in the opcode table first and keep theirs.
 * The printer writes the long form. */
#include <string.h>

#include "base/hashmap.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/parser_internal.h"

bool kiln_hlo_parser_async_opcode(const char *s, size_t n, kiln_hlo_opcode_t *op,
                                  kiln_hlo_opcode_t *wrapped) {
  static const struct {
    const char *suffix;
    kiln_hlo_opcode_t op;
  } kForms[] = {{"-start", KILN_OP_ASYNC_START},
                {"-update", KILN_OP_ASYNC_UPDATE},
                {"-done", KILN_OP_ASYNC_DONE}};
  for (size_t i = 0; i < sizeof kForms / sizeof kForms[0]; i++) {
    size_t k = strlen(kForms[i].suffix);
    if (n <= k || memcmp(s + n - k, kForms[i].suffix, k) != 0) continue;
    kiln_hlo_opcode_t x;
    if (!kiln_hlo_opcode_from_name(s, n - k, &x)) return false;
    switch (x) {
      case KILN_OP_PARAMETER:
      case KILN_OP_CONSTANT:
      case KILN_OP_ASYNC_START:
      case KILN_OP_ASYNC_UPDATE:
      case KILN_OP_ASYNC_DONE:
        return false;
      default:
        break;
    }
    *op = kForms[i].op;
    *wrapped = x;
    return true;
  }
  return false;
}

/* Attributes every instruction has: they stay on the async-start (XLA parses them for the
 * instruction written, not for the wrapped one). */
static bool stays_on_start(const char *key) {
  static const char *const kKeys[] = {"metadata",   "sharding",       "frontend_attributes",
                                      "statistics", "original_value", "async_execution_thread"};
  for (size_t i = 0; i < sizeof kKeys / sizeof kKeys[0]; i++)
    if (strcmp(key, kKeys[i]) == 0) return true;
  return false;
}

/* The start's shape ((operands...), result, context...) with one operand shape per operand. */
static bool start_shape_ok(const kiln_hlo_instruction_t *start) {
  const kiln_shape_t *s = start->shape;
  return s && kiln_shape_is_tuple(s) && s->num_elements >= 2 &&
         kiln_shape_is_tuple(s->elements[0]) && s->elements[0]->num_elements == start->num_operands;
}

static const char *opname(kiln_hlo_opcode_t op) {
  return kiln_hlo_opcode_name(op);
}

/* Splits the start parsed as X into the async-start and its wrapped X; returns X. */
static kiln_hlo_instruction_t *wrap(kiln_hlo_parser_t *P, const kiln_hlo_async_rec_t *r) {
  kiln_hlo_module_t *m = P->m;
  kiln_hlo_instruction_t *start = r->instr;
  int n = start->num_operands;
  const kiln_shape_t *s = start->shape;
  if (!kiln_hlo_parser_reserve(P,
                               sizeof(kiln_hlo_computation_t) +
                                   sizeof(kiln_hlo_instruction_t) * (size_t)(n + 2) +
                                   sizeof(void *) * (size_t)(2 * n + 4) + 1024,
                               (size_t)(3 * n + 12)))
    return NULL;
  kiln_hlo_computation_t *wc =
      kiln_hlo_computation_create(m, kiln_hlo_module_unique_name(m, "async_wrapped"));
  if (!wc) return kiln_hlo_parser_oom(P), NULL;
  /* Before the computation holding the start, as XLA prints callees. */
  size_t at = 0;
  while (at < m->computations.len && m->computations.data[at] != start->parent) at++;
  if (at < m->computations.len) {
    memmove(&m->computations.data[at + 1], &m->computations.data[at],
            sizeof(void *) * (m->computations.len - 1 - at));
    m->computations.data[at] = wc;
  }
  kiln_hlo_instruction_t **params = n ? kiln_hlo_parser_alloc(P, sizeof(void *) * (size_t)n) : NULL;
  if (n && !params) return NULL;
  for (int i = 0; i < n; i++) {
    params[i] = kiln_hlo_instruction_create(wc, KILN_OP_PARAMETER, s->elements[0]->elements[i],
                                            kiln_hlo_module_unique_name(m, "async_param"));
    if (!params[i]) return kiln_hlo_parser_oom(P), NULL;
    params[i]->parameter_number = i;
  }
  wc->parameters = params;
  wc->num_parameters = n;
  kiln_hlo_instruction_t *x = kiln_hlo_instruction_clone(
      wc, start, kiln_hlo_module_unique_name(m, opname(r->wrapped)), n, params);
  if (!x) return kiln_hlo_parser_oom(P), NULL;
  x->opcode = r->wrapped;
  x->shape = s->elements[1];
  x->backend_config = NULL;
  x->backend_config_form = KILN_BACKEND_CONFIG_NONE;
  wc->root = x;
  /* Raw attributes: the common ones stay on the start, X's go with X (the clone shares the
   * start's array: X gets one of its own). */
  int total = start->num_raw_attrs, keep = 0, moved = 0;
  kiln_raw_attr_t *mine =
      total ? kiln_hlo_parser_alloc(P, sizeof(kiln_raw_attr_t) * (size_t)total) : NULL;
  if (total && !mine) return NULL;
  for (int i = 0; i < total; i++) {
    kiln_raw_attr_t a = start->raw_attrs[i];
    if (stays_on_start(a.key))
      start->raw_attrs[keep++] = a;
    else
      mine[moved++] = a;
  }
  x->raw_attrs = moved ? mine : NULL;
  x->num_raw_attrs = moved;
  if (!keep) start->raw_attrs = NULL;
  start->num_raw_attrs = keep;
  /* The start keeps only what every instruction has; X's typed attributes are X's. */
  kiln_hlo_instruction_t clean;
  memset(&clean, 0, sizeof clean);
  clean.name = start->name;
  clean.opcode = KILN_OP_ASYNC_START;
  clean.slot = start->slot;
  clean.shape = start->shape;
  clean.parent = start->parent;
  clean.id = start->id;
  clean.num_operands = start->num_operands;
  clean.operands = start->operands;
  clean.users = start->users;
  clean.num_control_predecessors = start->num_control_predecessors;
  clean.control_predecessors = start->control_predecessors;
  clean.control_successors = start->control_successors;
  clean.backend_config_form = start->backend_config_form;
  clean.backend_config = start->backend_config;
  clean.raw_attrs = start->raw_attrs;
  clean.num_raw_attrs = start->num_raw_attrs;
  *start = clean;
  kiln_hlo_instruction_add_called(start, "calls", false, 1, &wc);
  kiln_hlo_comp_rec_t crec = {wc, r->pos};
  kiln_vec_push(&P->comps, crec);
  return x;
}

bool kiln_hlo_parser_wrap_async_shorthand(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_ptrmap_t wrapped; /* start -> its X */
  kiln_ptrmap_init(&wrapped);
  bool ok = true;
  for (size_t i = 0; i < P->asyncs.len && ok; i++) {
    const kiln_hlo_async_rec_t *r = &P->asyncs.data[i];
    kiln_hlo_instruction_t *start = r->instr;
    if (start->opcode != r->wrapped) continue; /* -update / -done */
    if (!start_shape_ok(start)) {
      ok = kiln_hlo_lexer_error_at(L, r->pos, KILN_INVALID_ARGUMENT,
                                   "%s-start '%s' needs the shape ((operands...), result, "
                                   "context...) with one operand shape per operand (%d)",
                                   opname(r->wrapped), start->name, start->num_operands);
      break;
    }
    kiln_hlo_instruction_t *x = wrap(P, r);
    if (!x)
      ok = false;
    else
      kiln_ptrmap_put(&wrapped, start, x);
  }
  /* X's called computations (to_apply=...) are X's; `calls=` only where X takes it. */
  for (size_t i = 0; i < P->called.len && ok; i++) {
    kiln_hlo_called_rec_t *c = &P->called.data[i];
    kiln_hlo_instruction_t *x = kiln_ptrmap_get(&wrapped, c->instr);
    if (!x) continue;
    if (strcmp(c->key, "calls") == 0 && x->opcode != KILN_OP_FUSION) {
      ok = kiln_hlo_lexer_error_at(L, P->crefs.data[c->begin].pos, KILN_INVALID_ARGUMENT,
                                   "%s-start '%s' is the async shorthand: it takes %s's "
                                   "attributes, and calls= belongs to the long form async-start",
                                   opname(x->opcode), c->instr->name, opname(x->opcode));
      break;
    }
    c->instr = x;
  }
  kiln_ptrmap_free(&wrapped);
  return ok;
}

/* The async-start at the head of `in`'s chain (through async-updates), or NULL. */
static const kiln_hlo_instruction_t *chain_start(const kiln_hlo_instruction_t *in) {
  for (int hops = 0; in && hops < 1 << 20; hops++) {
    if (in->opcode == KILN_OP_ASYNC_START) return in;
    if (in->opcode != KILN_OP_ASYNC_UPDATE || in->num_operands != 1) return NULL;
    in = in->operands[0];
  }
  return NULL;
}

bool kiln_hlo_parser_check_async_shorthand(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  for (size_t i = 0; i < P->asyncs.len; i++) {
    const kiln_hlo_async_rec_t *r = &P->asyncs.data[i];
    const kiln_hlo_instruction_t *in = r->instr;
    if (in->opcode == KILN_OP_ASYNC_START) continue;
    const char *form = in->opcode == KILN_OP_ASYNC_UPDATE ? "update" : "done";
    const kiln_hlo_instruction_t *op = in->num_operands == 1 ? in->operands[0] : NULL;
    const kiln_hlo_instruction_t *start = op ? chain_start(op) : NULL;
    const kiln_hlo_computation_t *wc = start ? kiln_hlo_instruction_called(start, "calls") : NULL;
    if (!op)
      return kiln_hlo_lexer_error_at(L, r->pos, KILN_INVALID_ARGUMENT,
                                     "%s-%s '%s' needs one operand, the async start or update "
                                     "it continues",
                                     opname(r->wrapped), form, in->name);
    if (!wc || !wc->root || wc->root->opcode != r->wrapped)
      return kiln_hlo_lexer_error_at(
          L, r->pos, KILN_INVALID_ARGUMENT,
          "%s-%s '%s' needs an async start or update wrapping %s, but its operand '%s' is %s%s",
          opname(r->wrapped), form, in->name, opname(r->wrapped), op->name,
          wc && wc->root ? "an async op wrapping " : "",
          wc && wc->root ? opname(wc->root->opcode) : opname(op->opcode));
    const kiln_hlo_computation_t *named = kiln_hlo_instruction_called(in, "calls");
    if (named && named != wc)
      return kiln_hlo_lexer_error_at(L, r->pos, KILN_INVALID_ARGUMENT,
                                     "%s-%s '%s' names calls=%s, but its start '%s' wraps %s",
                                     opname(r->wrapped), form, in->name, named->name, start->name,
                                     wc->name);
  }
  return true;
}
