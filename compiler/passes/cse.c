/* Common subexpression elimination: within each computation, an instruction identical to
 * an earlier one — same opcode, operands, shape (layout included), attributes and called
 * computations — is replaced by it. Operands of commutative ops (add, multiply, and, or,
 * xor, maximum, minimum) are compared as an unordered pair. `metadata` is ignored; every
 * other attribute counts (sharding, frontend_attributes, backend_config, ...).
 *
 * Never merged: parameters, instructions with a side effect (rng, collectives, custom-calls
 * with side effects, ... see pass_util.h), instructions with control dependencies, and
 * anything producing a token. Constants are compared by shape and literal bytes.
 *
 * The key of an instruction is its canonical text with the name left out: operands print
 * by name, and names are unique, so equal text means equal operands. Instructions are
 * visited in post order and replaced as they are found, so chains collapse in one run. */
#include <string.h>

#include "base/str.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

static bool has_token(const kiln_shape_t *s) {
  if (s->type == KILN_TOKEN) return true;
  if (s->type == KILN_TUPLE)
    for (int i = 0; i < s->num_elements; i++)
      if (has_token(s->elements[i])) return true;
  return false;
}

static bool mergeable(const kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  if (in->opcode == KILN_OP_PARAMETER || !in->shape || has_token(in->shape)) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  if (in->opcode == KILN_OP_CONSTANT && (!in->literal || in->literal->unknown)) return false;
  return !kiln_pass_effects_instruction(effects, in);
}

/* Appends the key of `in` to `b`. */
static void build_key(kiln_strbuf_t *b, kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_CONSTANT) {
    /* Large literals would make long keys: shape + a hash, then bytes compared on a hit. */
    kiln_strbuf_append(b, "constant ");
    kiln_shape_print(b, in->shape, true);
    const kiln_literal_t *l = in->literal;
    size_t bytes = l->data && l->shape ? (size_t)kiln_shape_byte_size(l->shape) : 0;
    kiln_strbuf_printf(b, " %llx", (unsigned long long)kiln_hash_bytes(l->data, bytes));
    return;
  }
  /* Print a normalized view: sorted commutative operands, no metadata. */
  kiln_hlo_instruction_t *saved_ops[2] = {NULL, NULL};
  bool swapped = false;
  if ((kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COMMUTATIVE) && in->num_operands == 2 &&
      in->operands[0]->id > in->operands[1]->id) {
    saved_ops[0] = in->operands[0];
    saved_ops[1] = in->operands[1];
    in->operands[0] = saved_ops[1];
    in->operands[1] = saved_ops[0];
    swapped = true;
  }
  kiln_raw_attr_t *saved_attrs = in->raw_attrs;
  int saved_n = in->num_raw_attrs;
  kiln_raw_attr_t small[16], *kept = small;
  if (saved_n > 16) kept = kiln_malloc(sizeof *kept * (size_t)saved_n);
  int n = 0;
  for (int i = 0; i < saved_n; i++)
    if (strcmp(saved_attrs[i].key, "metadata") != 0) kept[n++] = saved_attrs[i];
  in->raw_attrs = kept;
  in->num_raw_attrs = n;
  kiln_strbuf_t text = {0};
  kiln_hlo_instruction_print(&text, in);
  in->raw_attrs = saved_attrs;
  in->num_raw_attrs = saved_n;
  if (kept != small) kiln_free(kept);
  if (swapped) {
    in->operands[0] = saved_ops[0];
    in->operands[1] = saved_ops[1];
  }
  const char *t = kiln_strbuf_cstr(&text);
  const char *eq = strstr(t, " = "); /* drop `[ROOT ]name = ` */
  kiln_strbuf_append(b, eq ? eq + 3 : t);
  kiln_strbuf_free(&text);
}

static bool same_constant(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  if (!kiln_pass_same_shape(a->shape, b->shape)) return false;
  const kiln_literal_t *x = a->literal, *y = b->literal;
  if (x->num_elements != y->num_elements || !x->shape || !y->shape || x->shape->type != y->shape->type)
    return false;
  size_t bytes = x->data ? (size_t)kiln_shape_byte_size(x->shape) : 0;
  if (bytes != (y->data ? (size_t)kiln_shape_byte_size(y->shape) : 0)) return false;
  return bytes == 0 || memcmp(x->data, y->data, bytes) == 0;
}

static bool cse_computation(kiln_hlo_computation_t *c, kiln_pass_effects_t *effects) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  kiln_hashmap_t seen;
  kiln_hashmap_init(&seen);
  kiln_strbuf_t key = {0};
  bool changed = false;
  kiln_hlo_computation_defer_removals(c); /* merged instructions leave holes until compact */
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *in = order[i];
    if (!mergeable(in, effects)) continue;
    key.len = 0;
    if (key.data) key.data[0] = 0;
    build_key(&key, in);
    const char *k = kiln_strbuf_cstr(&key);
    kiln_hlo_instruction_t *prev = kiln_hashmap_get(&seen, k, key.len);
    if (prev && (in->opcode != KILN_OP_CONSTANT || same_constant(prev, in))) {
      kiln_hlo_instruction_replace_all_uses(in, prev);
      kiln_pass_remove_if_dead(in, effects);
      changed = true;
    } else if (!prev) {
      kiln_hashmap_put(&seen, k, key.len, in);
    }
  }
  kiln_hlo_computation_compact(c);
  kiln_strbuf_free(&key);
  kiln_hashmap_free(&seen);
  kiln_free(order);
  return changed;
}

kiln_status kiln_pass_cse(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    if (cse_computation(c, &effects)) {
      kiln_hlo_computation_sort_post_order(c);
      *changed = true;
    }
  }
  kiln_pass_effects_free(&effects);
  return NULL;
}
