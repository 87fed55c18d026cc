/* HLO text parser: module / computation / instruction structure, attributes, shapes and
 * layouts. Literals are parsed in parser_literal.c.
 *
 * One pass over the text with a hand-written scanner (lexer.c). Names are resolved through
 * hash maps after the enclosing scope is read: operands and control predecessors when
 * their computation ends (so forward references work), called computations when the
 * module ends. Everything lands in the module's arena, whose limit is set from the input
 * size, so no input can make the parser allocate without bound; scratch vectors grow only
 * with the text actually read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/hlo/ir.h"
#include "compiler/hlo/parser_internal.h"
#include "compiler/hlo/shape_inference.h"

/* ---- small helpers ---- */
bool kiln_hlo_parser_enter(kiln_hlo_parser_t *P) {
  if (++P->depth > KILN_HLO_PARSE_MAX_DEPTH)
    return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_INVALID_ARGUMENT,
                                   "nesting too deep (more than %d levels)",
                                   KILN_HLO_PARSE_MAX_DEPTH);
  return true;
}

bool kiln_hlo_parser_oom(kiln_hlo_parser_t *P) {
  return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_RESOURCE_EXHAUSTED,
                                 "input needs more than %zu bytes of memory to represent",
                                 P->m->arena.limit);
}

/* Fails with RESOURCE_EXHAUSTED unless `n` more bytes (in at most `allocs` allocations)
 * fit under the arena limit. Called before ir.c / shape.c helpers that do not check for
 * NULL from the arena. */
bool kiln_hlo_parser_reserve(kiln_hlo_parser_t *P, size_t n, size_t allocs) {
  kiln_arena_t *a = &P->m->arena;
  if (!a->limit) return true;
  size_t need = n + 16 * (allocs + 1);
  if (n > a->limit || a->total > a->limit - need || need > a->limit) return kiln_hlo_parser_oom(P);
  return true;
}

void *kiln_hlo_parser_alloc(kiln_hlo_parser_t *P, size_t n) {
  void *p = kiln_arena_alloc(&P->m->arena, n);
  if (!p) kiln_hlo_parser_oom(P);
  return p;
}

char *kiln_hlo_parser_strndup(kiln_hlo_parser_t *P, const char *s, size_t n) {
  char *d = kiln_arena_strndup(&P->m->arena, s, n);
  if (!d) kiln_hlo_parser_oom(P);
  return d;
}

/* A NUL-terminated copy of [s, s+n) in the parser's name buffer (valid until next use). */
const char *kiln_hlo_parser_cname(kiln_hlo_parser_t *P, const char *s, size_t n) {
  P->nb.len = 0;
  kiln_strbuf_append_n(&P->nb, s, n);
  return kiln_strbuf_cstr(&P->nb);
}

bool kiln_hlo_span_eq(const char *s, size_t n, const char *lit) {
  size_t m = strlen(lit);
  return n == m && memcmp(s, lit, n) == 0;
}

/* Copies ints [base, len) of the scratch stack into an arena list and pops them. */
bool kiln_hlo_parser_take_ints(kiln_hlo_parser_t *P, size_t base, kiln_i64_list_t *out) {
  size_t n = P->ints.len - base;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_INVALID_ARGUMENT, "list too long");
  out->n = (int)n;
  out->v = NULL;
  if (n) {
    out->v = kiln_hlo_parser_alloc(P, n * sizeof(int64_t));
    if (!out->v) return false;
    memcpy(out->v, P->ints.data + base, n * sizeof(int64_t));
  }
  P->ints.len = base;
  return true;
}

/* {1,2,3} or {} */
bool kiln_hlo_parse_i64_list(kiln_hlo_parser_t *P, kiln_i64_list_t *out) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  size_t base = P->ints.len;
  if (!kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      int64_t v;
      if (!kiln_hlo_lexer_int64(L, "integer", &v)) return false;
      kiln_vec_push(&P->ints, v);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, '}')) return false;
      break;
    }
  }
  return kiln_hlo_parser_take_ints(P, base, out);
}

bool kiln_hlo_parse_bool(kiln_hlo_parser_t *P, bool *out) {
  kiln_hlo_lexer_t *L = &P->L;
  if (kiln_hlo_lexer_accept_word(L, "true")) {
    *out = true;
    return true;
  }
  if (kiln_hlo_lexer_accept_word(L, "false")) {
    *out = false;
    return true;
  }
  return kiln_hlo_lexer_error_expected(L, "'true' or 'false'");
}

bool kiln_hlo_parse_word_dup(kiln_hlo_parser_t *P, const char *what, char **out) {
  const char *s;
  size_t n;
  if (!kiln_hlo_lexer_word(&P->L, what, &s, &n)) return false;
  *out = kiln_hlo_parser_strndup(P, s, n);
  return *out != NULL;
}

/* ---- instructions ---- */

static bool lookup_opcode(kiln_hlo_parser_t *P, const char *s, size_t n, kiln_hlo_opcode_t *op) {
  void *v = kiln_hashmap_get(&P->opcodes, s, n);
  if (v) {
    *op = (kiln_hlo_opcode_t)((uintptr_t)v - 1);
    return true;
  }
  if (!kiln_hlo_opcode_from_name(s, n, op)) return false;
  kiln_hashmap_put(&P->opcodes, s, n, (void *)(uintptr_t)(*op + 1));
  return true;
}

static bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* True when a shape starts at the cursor: `(`, `f32[`, `b(`. */
static bool at_shape(kiln_hlo_lexer_t *L) {
  char c = kiln_hlo_lexer_peek(L);
  if (c == '(') return true;
  const char *q = L->p;
  while (q < L->end && is_lower_alnum(*q)) q++;
  if (q >= L->end || q == L->p) return false;
  if (*q == '(') return q - L->p == 1 && L->p[0] == 'b';
  return *q == '['; /* an element type, or a bad one the shape parser reports */
}

static bool parse_instruction_rhs(kiln_hlo_parser_t *P, kiln_hlo_computation_t *c,
                                  const char *name, size_t nlen, const char *npos, bool is_root,
                                  kiln_shape_t *shape, bool nested, kiln_hlo_instruction_t **out);

/* An operand: a name, optionally typed (`f32[2]{0} %x`, `(f32[], s32[]) t`), or a nested
 * instruction (`f32[1,8] parameter(0)`), which is added to the computation under a
 * generated name. The reference goes on P->opstack. */
static bool parse_operand(kiln_hlo_parser_t *P, kiln_hlo_computation_t *c) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_name_ref_t r;
  if (at_shape(L)) {
    const char *spos = L->p;
    kiln_shape_t *shape;
    if (!kiln_hlo_parse_shape_text(P, &shape)) return false;
    kiln_hlo_lexer_skip_ws(L);
    const char *q = L->p;
    while (q < L->end && kiln_hlo_is_name_char(*q)) q++;
    if (q > L->p && q < L->end && *q == '(') {
      /* nested instruction */
      if (!kiln_hlo_parser_enter(P)) return false;
      char gen[64];
      const char *op = L->p;
      int opn = (int)(q - op) > 32 ? 32 : (int)(q - op);
      do {
        snprintf(gen, sizeof gen, "%.*s.inline.%u", opn, op, ++P->nested_counter);
      } while (kiln_hashmap_get(&P->instr_map, gen, strlen(gen)));
      kiln_hlo_instruction_t *instr;
      if (!parse_instruction_rhs(P, c, gen, strlen(gen), spos, false, shape, true, &instr))
        return false;
      P->depth--;
      r.pos = spos;
      r.name = instr->name;
      r.len = (uint32_t)strlen(instr->name);
      kiln_vec_push(&P->opstack, r);
      return true;
    }
  }
  size_t n;
  if (!kiln_hlo_lexer_name(L, "operand name", &r.name, &n, &r.pos)) return false;
  r.len = (uint32_t)n;
  kiln_vec_push(&P->opstack, r);
  return true;
}

/* `opcode(operands)[, attributes]` of the instruction `name` (with `shape`, or NULL when
 * the text gives none: inferred when the module is complete). Nested instructions take no
 * attributes (a ',' after them belongs to the enclosing operand list). */
static bool parse_instruction_rhs(kiln_hlo_parser_t *P, kiln_hlo_computation_t *c,
                                  const char *name, size_t nlen, const char *npos, bool is_root,
                                  kiln_shape_t *shape, bool nested, kiln_hlo_instruction_t **out) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *opos = L->p, *os;
  size_t on;
  if (!kiln_hlo_lexer_word(L, "opcode", &os, &on)) return false;
  kiln_hlo_opcode_t op, wrapped = KILN_OP_COUNT;
  if (!lookup_opcode(P, os, on, &op)) {
    if (!kiln_hlo_parser_async_opcode(os, on, &op, &wrapped))
      return kiln_hlo_lexer_error_at(L, opos, KILN_INVALID_ARGUMENT, "unknown opcode '%.*s'",
                                     (int)on, os);
    if (!shape && op == KILN_OP_ASYNC_START)
      return kiln_hlo_lexer_error_at(
          L, opos, KILN_INVALID_ARGUMENT,
          "%.*s '%.*s' needs a shape ((operands...), result, context...)", (int)on, os, (int)nlen,
          name);
  }
  if (!shape && (op == KILN_OP_PARAMETER || op == KILN_OP_CONSTANT))
    return kiln_hlo_lexer_error_at(L, opos, KILN_INVALID_ARGUMENT, "%s '%.*s' needs a shape",
                                   kiln_hlo_opcode_name(op), (int)nlen, name);
  if (!kiln_hlo_lexer_expect(L, '(')) return false;
  int64_t param_number = 0;
  kiln_literal_t *literal = NULL;
  size_t ops_base = P->opstack.len;
  if (op == KILN_OP_PARAMETER) {
    kiln_hlo_lexer_skip_ws(L);
    const char *ppos = L->p;
    if (!kiln_hlo_lexer_int64(L, "parameter number", &param_number)) return false;
    if (param_number < 0)
      return kiln_hlo_lexer_error_at(L, ppos, KILN_INVALID_ARGUMENT, "negative parameter number");
    if (!kiln_hlo_lexer_expect(L, ')')) return false;
  } else if (op == KILN_OP_CONSTANT) {
    if (!kiln_hlo_parse_literal(P, shape, &literal)) return false;
    if (!kiln_hlo_lexer_expect(L, ')')) return false;
  } else if (!kiln_hlo_lexer_accept(L, ')')) {
    for (;;) {
      if (!parse_operand(P, c)) return false;
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, ')')) return false;
      break;
    }
  }

  uintptr_t prev = (uintptr_t)kiln_hashmap_get(&P->instr_map, name, nlen);
  if (prev) {
    int line, col;
    kiln_hlo_lexer_line_col(L, P->instrs.data[prev - 1].pos, &line, &col);
    return kiln_hlo_lexer_error_at(L, npos, KILN_INVALID_ARGUMENT,
                                   "duplicate instruction name '%.*s' (first defined at %d:%d)",
                                   (int)nlen, name, line, col);
  }
  if (!kiln_hlo_parser_reserve(P, sizeof(kiln_hlo_instruction_t) + nlen + 1, 2)) return false;
  /* A shorthand start reads its attributes as the op it wraps (parser_async.c). */
  bool as_wrapped = op == KILN_OP_ASYNC_START && wrapped != KILN_OP_COUNT;
  kiln_hlo_instruction_t *instr = kiln_hlo_instruction_create(c, as_wrapped ? wrapped : op, shape,
                                                              kiln_hlo_parser_cname(P, name, nlen));
  if (!instr || !instr->name) return kiln_hlo_parser_oom(P);
  if (wrapped != KILN_OP_COUNT) {
    kiln_hlo_async_rec_t ar = {instr, wrapped, opos};
    kiln_vec_push(&P->asyncs, ar);
  }
  instr->parameter_number = param_number;
  instr->literal = literal;
  kiln_hashmap_put(&P->instr_map, name, nlen, (void *)(uintptr_t)(P->instrs.len + 1));
  if (!shape) {
    kiln_hlo_shapeless_t sl = {instr, npos};
    kiln_vec_push(&P->shapeless, sl);
  }
  if (is_root) {
    if (P->root_index >= 0) {
      int line, col;
      kiln_hlo_lexer_line_col(L, P->instrs.data[P->root_index].pos, &line, &col);
      return kiln_hlo_lexer_error_at(L, npos, KILN_INVALID_ARGUMENT,
                                     "second ROOT instruction in computation '%s' (first at %d:%d)",
                                     c->name, line, col);
    }
    P->root_index = (int64_t)P->instrs.len;
  }
  kiln_hlo_instr_rec_t rec = {0};
  rec.instr = instr;
  rec.pos = npos;
  rec.ops_begin = (uint32_t)P->refs.len;
  rec.ops_count = (uint32_t)(P->opstack.len - ops_base);
  for (size_t i = ops_base; i < P->opstack.len; i++) kiln_vec_push(&P->refs, P->opstack.data[i]);
  P->opstack.len = ops_base;

  if (!nested) {
    memset(P->seen, 0, sizeof P->seen);
    while (kiln_hlo_lexer_accept(L, ','))
      if (!kiln_hlo_parse_instr_attr(P, instr, &rec)) return false;
    if (!kiln_hlo_parser_take_raws(P, &instr->raw_attrs, &instr->num_raw_attrs)) return false;
  }
  kiln_vec_push(&P->instrs, rec);
  *out = instr;
  return true;
}

/* `[ROOT] name = [shape] opcode(operands)[, attributes]` */
static bool parse_instruction(kiln_hlo_parser_t *P, kiln_hlo_computation_t *c) {
  kiln_hlo_lexer_t *L = &P->L;
  bool is_root = kiln_hlo_lexer_accept_word(L, "ROOT");
  const char *name, *npos;
  size_t nlen;
  if (!kiln_hlo_lexer_name(L, "instruction name", &name, &nlen, &npos)) return false;
  if (!kiln_hlo_lexer_expect(L, '=')) return false;
  kiln_shape_t *shape = NULL;
  if (at_shape(L) && !kiln_hlo_parse_shape_text(P, &shape)) return false;
  kiln_hlo_instruction_t *instr;
  return parse_instruction_rhs(P, c, name, nlen, npos, is_root, shape, false, &instr);
}


/* ---- computations ---- */

/* Resolves the operands and control predecessors of the computation just read, finds its
 * root and parameters, and rejects cycles (possible because forward references are
 * accepted). */
static bool finish_computation(kiln_hlo_parser_t *P, kiln_hlo_computation_t *c, const char *cpos) {
  kiln_hlo_lexer_t *L = &P->L;
  size_t n = P->instrs.len;
  if (n == 0)
    return kiln_hlo_lexer_error_at(L, cpos, KILN_INVALID_ARGUMENT, "computation '%s' has no instructions",
                                   c->name);
  bool forward = false;
  size_t num_params = 0;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instr_rec_t *rec = &P->instrs.data[i];
    kiln_hlo_instruction_t *instr = rec->instr;
    if (instr->opcode == KILN_OP_PARAMETER) num_params++;
    for (int pass = 0; pass < 2; pass++) {
      uint32_t begin = pass ? rec->ctrl_begin : rec->ops_begin;
      uint32_t count = pass ? rec->ctrl_count : rec->ops_count;
      if (!count) continue;
      if (count > KILN_HLO_PARSE_MAX_COUNT)
        return kiln_hlo_lexer_error_at(L, rec->pos, KILN_INVALID_ARGUMENT, "too many operands");
      kiln_hlo_instruction_t **arr = kiln_hlo_parser_alloc(P, count * sizeof(*arr));
      if (!arr) return false;
      for (uint32_t j = 0; j < count; j++) {
        kiln_hlo_name_ref_t *r = &P->refs.data[begin + j];
        uintptr_t idx = (uintptr_t)kiln_hashmap_get(&P->instr_map, r->name, r->len);
        if (!idx)
          return kiln_hlo_lexer_error_at(L, r->pos, KILN_INVALID_ARGUMENT,
                                         pass ? "unknown control predecessor '%.*s' of instruction '%s'"
                                              : "unknown operand '%.*s' of instruction '%s'",
                                         (int)r->len, r->name, instr->name);
        if (idx - 1 >= i) forward = true;
        kiln_hlo_instruction_t *o = P->instrs.data[idx - 1].instr;
        arr[j] = o;
        /* Users/successors are distinct and in first-use order; since instructions are
         * wired in order, a repeat use by `instr` is always the last entry. */
        if (pass == 0) {
          if (!o->users.len || kiln_vec_last(&o->users) != instr) kiln_vec_push(&o->users, instr);
        } else if (!o->control_successors.len || kiln_vec_last(&o->control_successors) != instr) {
          kiln_vec_push(&o->control_successors, instr);
        }
      }
      if (pass == 0) {
        instr->operands = arr;
        instr->num_operands = (int)count;
      } else {
        instr->control_predecessors = arr;
        instr->num_control_predecessors = (int)count;
      }
    }
  }
  c->root = P->instrs.data[P->root_index >= 0 ? (size_t)P->root_index : n - 1].instr;

  /* Parameters: numbers 0..k-1, each exactly once. */
  if (num_params) {
    c->parameters = kiln_hlo_parser_alloc(P, num_params * sizeof(*c->parameters));
    if (!c->parameters) return false;
    c->num_parameters = (int)num_params;
    size_t first_unplaced = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
      kiln_hlo_instruction_t *instr = P->instrs.data[i].instr;
      if (instr->opcode != KILN_OP_PARAMETER) continue;
      int64_t k = instr->parameter_number;
      if ((uint64_t)k >= num_params) {
        if (first_unplaced == SIZE_MAX) first_unplaced = i;
        continue;
      }
      if (c->parameters[k]) {
        kiln_hlo_instruction_t *first = c->parameters[k];
        int line, col;
        kiln_hlo_lexer_line_col(L, P->instrs.data[first->id - P->instrs.data[0].instr->id].pos, &line, &col);
        return kiln_hlo_lexer_error_at(L, P->instrs.data[i].pos, KILN_INVALID_ARGUMENT,
                                       "duplicate parameter number %lld in computation '%s' "
                                       "(first used by '%s' at %d:%d)",
                                       (long long)k, c->name, first->name, line, col);
      }
      c->parameters[k] = instr;
    }
    if (first_unplaced != SIZE_MAX) {
      size_t missing = 0;
      while (missing < num_params && c->parameters[missing]) missing++;
      return kiln_hlo_lexer_error_at(L, P->instrs.data[first_unplaced].pos, KILN_INVALID_ARGUMENT,
                                     "computation '%s' has %zu parameters but no parameter %zu "
                                     "(parameter numbers must be 0..%zu)",
                                     c->name, num_params, missing, num_params - 1);
    }
  }

  if (forward) {
    /* Iterative DFS over operand and control edges; 1 = on stack, 2 = done. */
    int64_t base_id = P->instrs.data[0].instr->id;
    unsigned char *color = kiln_calloc(n, 1);
    KILN_VEC(struct { size_t node; int edge; }) stack = {0};
    bool ok = true;
    for (size_t s = 0; s < n && ok; s++) {
      if (color[s]) continue;
      color[s] = 1;
      kiln_vec_reserve(&stack, stack.len + 1);
      stack.data[stack.len].node = s;
      stack.data[stack.len].edge = 0;
      stack.len++;
      while (stack.len && ok) {
        size_t v = stack.data[stack.len - 1].node;
        int e = stack.data[stack.len - 1].edge++;
        kiln_hlo_instruction_t *vi = P->instrs.data[v].instr;
        if (e >= vi->num_operands + vi->num_control_predecessors) {
          color[v] = 2;
          stack.len--;
          continue;
        }
        kiln_hlo_instruction_t *w = e < vi->num_operands ? vi->operands[e]
                                                         : vi->control_predecessors[e - vi->num_operands];
        size_t wi = (size_t)(w->id - base_id);
        if (color[wi] == 1) {
          ok = false;
          kiln_hlo_lexer_error_at(L, P->instrs.data[wi].pos, KILN_INVALID_ARGUMENT,
                                  "instruction '%s' depends on itself (cycle through '%s')",
                                  w->name, vi->name);
        } else if (color[wi] == 0) {
          color[wi] = 1;
          kiln_vec_reserve(&stack, stack.len + 1);
          stack.data[stack.len].node = wi;
          stack.data[stack.len].edge = 0;
          stack.len++;
        }
      }
    }
    kiln_free(color);
    kiln_vec_free(&stack);
    if (!ok) return false;
  }
  return true;
}

/* `(p: shape, ...) -> shape` after a computation name; only checked for syntax. */
static bool parse_signature(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '(')) return false;
  if (!kiln_hlo_lexer_accept(L, ')')) {
    for (;;) {
      const char *s;
      size_t n;
      kiln_shape_t *sh;
      if (!kiln_hlo_lexer_name(L, "parameter name", &s, &n, NULL)) return false;
      if (!kiln_hlo_lexer_expect(L, ':')) return false;
      if (!kiln_hlo_parse_shape_text(P, &sh)) return false;
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, ')')) return false;
      break;
    }
  }
  if (!kiln_hlo_lexer_accept_op(L, "->")) return kiln_hlo_lexer_error_expected(L, "'->'");
  kiln_shape_t *result;
  return kiln_hlo_parse_shape_text(P, &result);
}

static bool parse_computation(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *cpos = L->p;
  bool is_entry = kiln_hlo_lexer_accept_word(L, "ENTRY");
  const char *name, *npos;
  size_t nlen;
  if (!kiln_hlo_lexer_name(L, "computation name", &name, &nlen, &npos)) return false;
  uintptr_t prev = (uintptr_t)kiln_hashmap_get(&P->comp_map, name, nlen);
  if (prev) {
    int line, col;
    kiln_hlo_lexer_line_col(L, P->comps.data[prev - 1].pos, &line, &col);
    return kiln_hlo_lexer_error_at(L, npos, KILN_INVALID_ARGUMENT,
                                   "duplicate computation name '%.*s' (first defined at %d:%d)",
                                   (int)nlen, name, line, col);
  }
  if (!kiln_hlo_parser_reserve(P, sizeof(kiln_hlo_computation_t) + nlen + 1, 2)) return false;
  kiln_hlo_computation_t *c = kiln_hlo_computation_create(P->m, kiln_hlo_parser_cname(P, name, nlen));
  if (!c || !c->name) return kiln_hlo_parser_oom(P);
  kiln_hlo_comp_rec_t crec = {c, npos};
  kiln_vec_push(&P->comps, crec);
  kiln_hashmap_put(&P->comp_map, name, nlen, (void *)(uintptr_t)P->comps.len);
  if (is_entry) {
    if (P->entry) {
      return kiln_hlo_lexer_error_at(L, cpos, KILN_INVALID_ARGUMENT,
                                     "second ENTRY computation '%s' (the first is '%s')", c->name,
                                     P->entry->name);
    }
    P->entry = c;
  }
  if (kiln_hlo_lexer_peek(L) == '(' && !parse_signature(P)) return false;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;

  kiln_hashmap_free(&P->instr_map);
  kiln_hashmap_init(&P->instr_map);
  P->instrs.len = 0;
  P->refs.len = 0;
  P->root_index = -1;
  for (;;) {
    char ch = kiln_hlo_lexer_peek(L);
    if (L->err) return false;
    if (ch == '}') {
      L->p++;
      break;
    }
    if (!ch) return kiln_hlo_lexer_error_expected(L, "instruction or '}'");
    if (!parse_instruction(P, c)) return false;
  }
  if (kiln_hlo_lexer_accept(L, ',')) {
    if (!kiln_hlo_lexer_capture(L, false, &P->sb)) return false;
    c->trailing_attrs = kiln_hlo_parser_strndup(P, P->sb.data, P->sb.len);
    if (!c->trailing_attrs) return false;
  }
  return finish_computation(P, c, npos);
}

/* ---- module ---- */

/* DFS over the call graph; a computation reachable from itself is an error (passes and
 * the evaluator recurse into called computations). */
static bool check_call_graph(kiln_hlo_parser_t *P) {
  size_t n = P->comps.len;
  kiln_ptrmap_t index;
  kiln_ptrmap_init(&index);
  for (size_t i = 0; i < n; i++) kiln_ptrmap_put(&index, P->comps.data[i].comp, (void *)(i + 1));
  unsigned char *color = kiln_calloc(n ? n : 1, 1);
  typedef struct { size_t comp, instr; int group, k; } frame_t;
  KILN_VEC(frame_t) st = {0};
  bool ok = true;
  for (size_t s = 0; s < n && ok; s++) {
    if (color[s]) continue;
    color[s] = 1;
    frame_t f0 = {s, 0, 0, 0};
    kiln_vec_push(&st, f0);
    while (st.len && ok) {
      frame_t *f = &st.data[st.len - 1];
      kiln_hlo_computation_t *c = P->comps.data[f->comp].comp;
      if (f->instr >= c->instructions.len) {
        color[f->comp] = 2;
        st.len--;
        continue;
      }
      kiln_hlo_instruction_t *instr = c->instructions.data[f->instr];
      if (f->group >= instr->num_called_groups) {
        f->instr++, f->group = 0, f->k = 0;
        continue;
      }
      kiln_called_group_t *g = &instr->called_groups[f->group];
      if (f->k >= g->n) {
        f->group++, f->k = 0;
        continue;
      }
      kiln_hlo_computation_t *callee = g->comps[f->k++];
      size_t ci = (size_t)(uintptr_t)kiln_ptrmap_get(&index, callee) - 1;
      if (color[ci] == 1) {
        ok = false;
        kiln_hlo_lexer_error_at(&P->L, P->comps.data[ci].pos, KILN_INVALID_ARGUMENT,
                                "computation '%s' calls itself (through '%s' in '%s')",
                                callee->name, instr->name, c->name);
      } else if (color[ci] == 0) {
        color[ci] = 1;
        frame_t f1 = {ci, 0, 0, 0};
        kiln_vec_push(&st, f1);
      }
    }
  }
  kiln_vec_free(&st);
  kiln_free(color);
  kiln_ptrmap_free(&index);
  return ok;
}

/* The e-th thing `instr`'s shape depends on: operands, then roots of called computations.
 * Sets *done past the end. */
static kiln_hlo_instruction_t *shape_dep(const kiln_hlo_instruction_t *instr, int e, bool *done) {
  *done = false;
  if (e < instr->num_operands) return instr->operands[e];
  e -= instr->num_operands;
  for (int g = 0; g < instr->num_called_groups; g++) {
    if (e < instr->called_groups[g].n) return instr->called_groups[g].comps[e]->root;
    e -= instr->called_groups[g].n;
  }
  *done = true;
  return NULL;
}

/* Opcodes whose result shape is not determined by operands and attributes alone. */
static bool shape_is_inferable(kiln_hlo_opcode_t op) {
  switch (op) {
    case KILN_OP_BROADCAST: case KILN_OP_RESHAPE: case KILN_OP_DYNAMIC_RESHAPE:
    case KILN_OP_BITCAST: case KILN_OP_IOTA: case KILN_OP_CONVERT: case KILN_OP_BITCAST_CONVERT:
    case KILN_OP_STOCHASTIC_CONVERT: case KILN_OP_CUSTOM_CALL: case KILN_OP_CUSTOM_CALL_START:
    case KILN_OP_CUSTOM_CALL_UPDATE: case KILN_OP_CUSTOM_CALL_DONE: case KILN_OP_RNG:
    case KILN_OP_RNG_BIT_GENERATOR: case KILN_OP_RNG_GET_AND_UPDATE_STATE: case KILN_OP_INFEED:
    case KILN_OP_RECV: case KILN_OP_RECV_DONE: case KILN_OP_SEND: case KILN_OP_SEND_DONE:
    case KILN_OP_ALL_GATHER: case KILN_OP_ALL_GATHER_START: case KILN_OP_ALL_GATHER_DONE:
    case KILN_OP_ALL_TO_ALL: case KILN_OP_RAGGED_ALL_TO_ALL: case KILN_OP_REDUCE_SCATTER:
    case KILN_OP_ALL_REDUCE_START: case KILN_OP_ALL_REDUCE_DONE:
    case KILN_OP_COLLECTIVE_PERMUTE_START: case KILN_OP_COLLECTIVE_PERMUTE_DONE:
    case KILN_OP_ASYNC_START:
    case KILN_OP_COPY_START: case KILN_OP_COPY_DONE: case KILN_OP_DOMAIN:
    case KILN_OP_SET_DIMENSION_SIZE: case KILN_OP_PARAMETER: case KILN_OP_CONSTANT:
      return false;
    default:
      return true;
  }
}

/* Infers the shapes of instructions written without one (`ROOT out = add(a, b)`),
 * dependencies first, with an explicit stack. */
static bool infer_missing_shapes(kiln_hlo_parser_t *P) {
  if (!P->shapeless.len) return true;
  kiln_hlo_lexer_t *L = &P->L;
  kiln_ptrmap_t where;
  kiln_ptrmap_init(&where);
  for (size_t i = 0; i < P->shapeless.len; i++)
    kiln_ptrmap_put(&where, P->shapeless.data[i].instr, &P->shapeless.data[i]);
  typedef struct { kiln_hlo_instruction_t *instr; int edge; } frame_t;
  KILN_VEC(frame_t) st = {0};
  kiln_shape_t *placeholder = NULL;
  bool ok = kiln_hlo_parser_reserve(P, sizeof(kiln_shape_t), 1);
  if (ok) placeholder = kiln_shape_make_token(&P->m->arena);
  ok = ok && (placeholder || kiln_hlo_parser_oom(P));
  for (size_t i = 0; i < P->shapeless.len && ok; i++) {
    if (P->shapeless.data[i].instr->shape) continue;
    frame_t f0 = {P->shapeless.data[i].instr, 0};
    kiln_vec_push(&st, f0);
    while (st.len && ok) {
      frame_t *f = &st.data[st.len - 1];
      kiln_hlo_instruction_t *instr = f->instr, *dep = NULL;
      if (instr->shape) {
        st.len--;
        continue;
      }
      for (;;) {
        bool done;
        kiln_hlo_instruction_t *d = shape_dep(instr, f->edge, &done);
        if (done) break;
        f->edge++;
        if (!d->shape) {
          dep = d;
          break;
        }
      }
      if (dep) {
        if (st.len > P->shapeless.len) { /* cannot happen: the graphs are acyclic */
          ok = kiln_hlo_lexer_error_at(L, ((kiln_hlo_shapeless_t *)kiln_ptrmap_get(&where, dep))->pos,
                                       KILN_INVALID_ARGUMENT, "cyclic shape dependency at '%s'",
                                       dep->name);
          break;
        }
        frame_t f1 = {dep, 0};
        kiln_vec_push(&st, f1);
        continue;
      }
      const kiln_hlo_shapeless_t *rec = kiln_ptrmap_get(&where, instr);
      if (!shape_is_inferable(instr->opcode)) {
        ok = kiln_hlo_lexer_error_at(L, rec->pos, KILN_INVALID_ARGUMENT,
                                     "cannot infer the shape of '%s' (write its shape: it is "
                                     "not a function of the operands)",
                                     instr->name);
        break;
      }
      if (!kiln_hlo_parser_reserve(P, 4096 + 64 * (size_t)instr->num_operands, 8)) {
        ok = false;
        break;
      }
      instr->shape = placeholder; /* seen by check-style rules, which then fail */
      kiln_shape_t *shape = NULL;
      kiln_status s = kiln_shape_infer_instruction(&P->m->arena, instr, &shape);
      if (s || !shape) {
        ok = kiln_hlo_lexer_error_at(
            L, rec->pos, KILN_INVALID_ARGUMENT, "cannot infer the shape of '%s'%s%s", instr->name,
            s ? ": " : " (write its shape: it is not a function of the operands)",
            s ? kiln_status_message(s) : "");
        kiln_status_free(s);
        break;
      }
      instr->shape = shape;
      st.len--;
    }
  }
  kiln_vec_free(&st);
  kiln_ptrmap_free(&where);
  return ok;
}

static bool finish_module(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_module_t *m = P->m;
  if (!P->comps.len) return kiln_hlo_lexer_error_expected(L, "computation");
  if (!kiln_hlo_parser_wrap_async_shorthand(P)) return false;
  KILN_VEC(kiln_hlo_computation_t *) tmp = {0};
  for (size_t i = 0; i < P->called.len; i++) {
    kiln_hlo_called_rec_t *rec = &P->called.data[i];
    tmp.len = 0;
    for (uint32_t j = 0; j < rec->count; j++) {
      kiln_hlo_name_ref_t *r = &P->crefs.data[rec->begin + j];
      uintptr_t idx = (uintptr_t)kiln_hashmap_get(&P->comp_map, r->name, r->len);
      if (!idx) {
        kiln_vec_free(&tmp);
        return kiln_hlo_lexer_error_at(L, r->pos, KILN_INVALID_ARGUMENT,
                                       "unknown computation '%.*s' in %s of instruction '%s'",
                                       (int)r->len, r->name, rec->key, rec->instr->name);
      }
      kiln_vec_push(&tmp, P->comps.data[idx - 1].comp);
    }
    if (!kiln_hlo_parser_reserve(P, sizeof(kiln_called_group_t) * (size_t)(rec->instr->num_called_groups + 1) +
                                        strlen(rec->key) + 1 + tmp.len * sizeof(void *), 3)) {
      kiln_vec_free(&tmp);
      return false;
    }
    kiln_hlo_instruction_add_called(rec->instr, rec->key, rec->braced, (int)tmp.len, tmp.data);
  }
  kiln_vec_free(&tmp);
  if (!kiln_hlo_parser_check_async_shorthand(P)) return false;
  if (!check_call_graph(P)) return false;
  if (!infer_missing_shapes(P)) return false;
  m->entry = P->entry ? P->entry : P->comps.data[P->comps.len - 1].comp;
  m->entry->is_entry = true;
  return true;
}

/* entry_computation_layout={(shape, ...)->shape} */
static bool parse_entry_layout(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_module_t *m = P->m;
  if (!kiln_hlo_lexer_expect(L, '{') || !kiln_hlo_lexer_expect(L, '(')) return false;
  size_t base = P->shapes.len;
  if (!kiln_hlo_lexer_accept(L, ')')) {
    for (;;) {
      kiln_shape_t *s;
      if (!kiln_hlo_parse_shape_text(P, &s)) return false;
      kiln_vec_push(&P->shapes, s);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, ')')) return false;
      break;
    }
  }
  if (!kiln_hlo_lexer_accept_op(L, "->")) return kiln_hlo_lexer_error_expected(L, "'->'");
  if (!kiln_hlo_parse_shape_text(P, &m->entry_layout_result)) return false;
  if (!kiln_hlo_lexer_expect(L, '}')) return false;
  size_t n = P->shapes.len - base;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "too many parameters");
  m->num_entry_layout_params = (int)n;
  if (n) {
    m->entry_layout_params = kiln_hlo_parser_alloc(P, n * sizeof(kiln_shape_t *));
    if (!m->entry_layout_params) return false;
    memcpy(m->entry_layout_params, P->shapes.data + base, n * sizeof(kiln_shape_t *));
  }
  P->shapes.len = base;
  m->has_entry_layout = true;
  return true;
}

/* input_output_alias={ {0}: (0, {}, may-alias), ... } */
static bool parse_io_alias(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_module_t *m = P->m;
  KILN_VEC(kiln_io_alias_t) v = {0};
  bool ok = kiln_hlo_lexer_expect(L, '{');
  if (ok && !kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      kiln_io_alias_t a = {0};
      ok = kiln_hlo_parse_i64_list(P, &a.output_index) && kiln_hlo_lexer_expect(L, ':') &&
           kiln_hlo_lexer_expect(L, '(') &&
           kiln_hlo_lexer_int64(L, "parameter number", &a.param_number) &&
           kiln_hlo_lexer_expect(L, ',') && kiln_hlo_parse_i64_list(P, &a.param_index);
      if (ok && kiln_hlo_lexer_accept(L, ',')) ok = kiln_hlo_parse_word_dup(P, "alias kind", &a.kind);
      ok = ok && kiln_hlo_lexer_expect(L, ')');
      if (!ok) break;
      kiln_vec_push(&v, a);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      ok = kiln_hlo_lexer_expect(L, '}');
      break;
    }
  }
  if (ok && v.len > KILN_HLO_PARSE_MAX_COUNT)
    ok = kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "too many aliases");
  if (ok && v.len) {
    m->io_aliases = kiln_hlo_parser_alloc(P, v.len * sizeof(kiln_io_alias_t));
    ok = m->io_aliases != NULL;
    if (ok) {
      memcpy(m->io_aliases, v.data, v.len * sizeof(kiln_io_alias_t));
      m->num_io_aliases = (int)v.len;
    }
  }
  kiln_vec_free(&v);
  return ok;
}

/* The stack-frame index some dumps print after the header (FileNames, FunctionNames,
 * FileLocations, StackFrames sections of `N "text"` or `N {...}` lines). It is checked for
 * syntax and dropped: kiln keeps no source locations beyond the raw metadata. */
static bool skip_stack_frame_index(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  static const char *const kSections[] = {"FileNames", "FunctionNames", "FileLocations",
                                          "StackFrames"};
  for (;;) {
    bool section = false;
    for (int i = 0; i < 4 && !section; i++) section = kiln_hlo_lexer_accept_word(L, kSections[i]);
    if (!section) return true;
    while (kiln_hlo_lexer_peek(L) >= '0' && kiln_hlo_lexer_peek(L) <= '9') {
      int64_t id;
      if (!kiln_hlo_lexer_int64(L, "index", &id)) return false;
      if (kiln_hlo_lexer_peek(L) == '"') {
        P->sb.len = 0;
        if (!kiln_hlo_lexer_string(L, &P->sb, NULL, NULL)) return false;
      } else if (kiln_hlo_lexer_peek(L) == '{') {
        if (!kiln_hlo_lexer_capture(L, true, &P->sb)) return false;
      } else {
        return kiln_hlo_lexer_error_expected(L, "string or '{'");
      }
    }
    if (L->err) return false;
  }
}

static bool parse_module_header(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_accept_word(L, "HloModule")) return kiln_hlo_lexer_error_expected(L, "'HloModule'");
  const char *s;
  size_t n;
  if (!kiln_hlo_lexer_name(L, "module name", &s, &n, NULL)) return false;
  P->m->name = kiln_hlo_parser_strndup(P, s, n);
  if (!P->m->name) return false;
  kiln_hlo_lexer_accept(L, ':'); /* `HloModule name:` in some old dumps */
  bool seen_layout = false, seen_alias = false;
  while (kiln_hlo_lexer_accept(L, ',')) {
    kiln_hlo_lexer_skip_ws(L);
    const char *kpos = L->p, *k;
    size_t kn;
    if (!kiln_hlo_lexer_word(L, "attribute name", &k, &kn)) return false;
    if (!kiln_hlo_lexer_expect(L, '=')) return false;
    bool is_layout = kiln_hlo_span_eq(k, kn, "entry_computation_layout");
    bool is_alias = kiln_hlo_span_eq(k, kn, "input_output_alias");
    if ((is_layout && seen_layout) || (is_alias && seen_alias))
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT, "duplicate attribute '%.*s'",
                                     (int)kn, k);
    if (is_layout) {
      seen_layout = true;
      if (!parse_entry_layout(P)) return false;
    } else if (is_alias) {
      seen_alias = true;
      if (!parse_io_alias(P)) return false;
    } else if (!kiln_hlo_parser_add_raw(P, k, kn, kpos, 1)) {
      return false;
    }
  }
  if (!kiln_hlo_parser_take_raws(P, &P->m->raw_attrs, &P->m->num_raw_attrs)) return false;
  return skip_stack_frame_index(P);
}

/* ---- entry points ---- */

enum { kModeModule, kModeComputations };

static void parser_free(kiln_hlo_parser_t *P) {
  kiln_strbuf_free(&P->sb);
  kiln_strbuf_free(&P->nb);
  kiln_vec_free(&P->lit);
  kiln_vec_free(&P->ints);
  kiln_vec_free(&P->dyn);
  kiln_vec_free(&P->shapes);
  kiln_vec_free(&P->tiles);
  kiln_vec_free(&P->extra);
  kiln_vec_free(&P->raws);
  kiln_vec_free(&P->strs);
  kiln_vec_free(&P->instrs);
  kiln_vec_free(&P->refs);
  kiln_vec_free(&P->opstack);
  kiln_vec_free(&P->shapeless);
  kiln_vec_free(&P->asyncs);
  kiln_vec_free(&P->comps);
  kiln_vec_free(&P->called);
  kiln_vec_free(&P->crefs);
  kiln_hashmap_free(&P->instr_map);
  kiln_hashmap_free(&P->comp_map);
  kiln_hashmap_free(&P->opcodes);
  kiln_hashmap_free(&P->attr_keys);
  kiln_hashmap_free(&P->raw_seen);
}

kiln_status kiln_hlo_parse_shape_list(kiln_hlo_module_t *m, const char *text, size_t len,
                                      kiln_shape_t ***out, int *count) {
  *out = NULL;
  *count = 0;
  kiln_hlo_parser_t P;
  memset(&P, 0, sizeof P);
  kiln_hlo_lexer_init(&P.L, text, text, text + len, NULL);
  kiln_vec_reserve(&P.ints, 16);
  kiln_vec_reserve(&P.shapes, 4);
  kiln_vec_reserve(&P.extra, 4);
  P.m = m; /* shapes go to the module's arena; the module stays the caller's */
  KILN_VEC(kiln_shape_t *) list = {0};
  bool ok = kiln_hlo_lexer_expect(&P.L, '{');
  if (ok && !kiln_hlo_lexer_accept(&P.L, '}')) {
    do {
      kiln_shape_t *sh = NULL;
      ok = kiln_hlo_parse_shape_text(&P, &sh);
      if (ok) kiln_vec_push(&list, sh);
    } while (ok && kiln_hlo_lexer_accept(&P.L, ','));
    ok = ok && kiln_hlo_lexer_expect(&P.L, '}');
  }
  ok = ok && !P.L.err;
  kiln_status st = P.L.err;
  P.L.err = NULL;
  parser_free(&P);
  if (ok && list.len) {
    *out = kiln_arena_alloc(&m->arena, sizeof(kiln_shape_t *) * list.len);
    if (!*out) {
      ok = false;
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "shape list: out of memory");
    } else {
      memcpy(*out, list.data, sizeof(kiln_shape_t *) * list.len);
      *count = (int)list.len;
    }
  }
  kiln_vec_free(&list);
  if (ok) return NULL;
  return st ? st : kiln_status_make(KILN_INVALID_ARGUMENT, "expected a list of shapes `{...}`");
}

/* Parses [begin, end) of the file starting at `base` as one module. */
static kiln_status parse_range(const char *base, const char *begin, const char *end,
                               const kiln_hlo_parse_options_t *opts, int mode,
                               const char *module_name, kiln_hlo_module_t **out) {
  kiln_hlo_parser_t P;
  memset(&P, 0, sizeof P);
  kiln_hlo_lexer_init(&P.L, base, begin, end, opts ? opts->filename : NULL);
  P.root_index = -1;
  /* Scratch stacks never have a NULL data pointer (`data + base` stays defined). */
  kiln_vec_reserve(&P.ints, 64);
  kiln_vec_reserve(&P.shapes, 16);
  kiln_vec_reserve(&P.lit, 64);
  kiln_vec_reserve(&P.extra, 16);
  kiln_vec_reserve(&P.opstack, 16);
  P.m = kiln_hlo_module_create(module_name);
  size_t factor = opts && opts->max_bytes_per_input_byte ? opts->max_bytes_per_input_byte : 64;
  size_t len = (size_t)(end - begin);
  const size_t kSlack = (size_t)1 << 20;
  size_t limit = len > (SIZE_MAX / 4 - kSlack) / factor ? SIZE_MAX / 4 : len * factor + kSlack;
  P.m->arena.limit = P.m->arena.total + limit;

  bool ok = true;
  if (mode == kModeModule) ok = parse_module_header(&P);
  while (ok && !kiln_hlo_lexer_at_end(&P.L) && !P.L.err) {
    const char *save = P.L.p;
    if (kiln_hlo_lexer_accept_word(&P.L, "HloModule")) {
      ok = kiln_hlo_lexer_error_at(&P.L, save, KILN_INVALID_ARGUMENT,
                                   "a second HloModule in one module (files with several "
                                   "modules separate them with `// -----` lines)");
      break;
    }
    ok = parse_computation(&P);
  }
  ok = ok && !P.L.err && finish_module(&P);
  kiln_status st = P.L.err;
  if (ok && st) ok = false;
  parser_free(&P);
  if (!ok) {
    kiln_hlo_module_destroy(P.m);
    *out = NULL;
    if (!st) st = kiln_status_make(KILN_INTERNAL, "HLO parser failed without a message");
    return st;
  }
  /* The limit bounds what parsing may allocate for this input; passes that later grow
   * the module (fusion, cloning) are not bound by the size of the text it came from. */
  P.m->arena.limit = 0;
  *out = P.m;
  return NULL;
}

static kiln_status check_args(const char *text, size_t len, const void *out) {
  if (!out) return kiln_status_make(KILN_INVALID_ARGUMENT, "HLO parser: NULL output pointer");
  if (!text && len) return kiln_status_make(KILN_INVALID_ARGUMENT, "HLO parser: NULL text");
  return NULL;
}

static kiln_status parse_module(const char *text, size_t len, const kiln_hlo_parse_options_t *opts,
                                kiln_hlo_module_t **out) {
  KILN_RETURN_IF_ERROR_PLAIN(check_args(text, len, out));
  *out = NULL;
  if (!text) text = "";
  return parse_range(text, text, text + len, opts, kModeModule, "module", out);
}

/* The file's base name without its extension, or "computations". */
static void name_from_file(const kiln_hlo_parse_options_t *opts, char *name, size_t cap) {
  const char *fn = opts ? opts->filename : NULL;
  snprintf(name, cap, "computations");
  if (!fn || !*fn) return;
  const char *slash = strrchr(fn, '/');
  const char *b = slash ? slash + 1 : fn;
  const char *dot = strrchr(b, '.');
  size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
  if (n >= cap) n = cap - 1;
  if (!n) return;
  memcpy(name, b, n);
  name[n] = 0;
}

static kiln_status parse_computations(const char *text, size_t len,
                                      const kiln_hlo_parse_options_t *opts,
                                      kiln_hlo_module_t **out) {
  KILN_RETURN_IF_ERROR_PLAIN(check_args(text, len, out));
  *out = NULL;
  if (!text) text = "";
  char name[256];
  name_from_file(opts, name, sizeof name);
  /* A whole module given here is parsed as one. */
  kiln_hlo_lexer_t probe;
  kiln_hlo_lexer_init(&probe, text, text, text + len, NULL);
  bool header = kiln_hlo_lexer_accept_word(&probe, "HloModule");
  kiln_status_free(probe.err);
  return parse_range(text, text, text + len, opts, header ? kModeModule : kModeComputations, name,
                     out);
}

/* True when the line [p, end) is a `// -----` separator (exactly five dashes). */
static bool is_separator_line(const char *p, const char *end) {
  while (end > p && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t')) end--;
  return end - p == 8 && memcmp(p, "// -----", 8) == 0;
}

static kiln_status parse_modules(const char *text, size_t len, const kiln_hlo_parse_options_t *opts,
                                 kiln_hlo_module_t ***out_modules, int *out_count) {
  KILN_RETURN_IF_ERROR_PLAIN(check_args(text, len, out_modules));
  if (!out_count) return kiln_status_make(KILN_INVALID_ARGUMENT, "HLO parser: NULL count pointer");
  *out_modules = NULL;
  *out_count = 0;
  if (!text) text = "";
  const char *end = text + len;
  /* Pieces between `// -----` lines. Longer dash lines (`// ----------`) are ordinary
   * comments: some files use them to decorate computations of one module. */
  KILN_VEC(const char *) starts = {0};
  kiln_vec_push(&starts, text);
  for (const char *line = text; line < end;) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    const char *next = nl ? nl + 1 : end;
    if (is_separator_line(line, next)) kiln_vec_push(&starts, next);
    line = next;
  }
  kiln_vec_push(&starts, end);
  size_t pieces = starts.len - 1;
  kiln_hlo_module_t **mods = kiln_calloc(pieces, sizeof *mods);
  kiln_status st = NULL;
  size_t count = 0;
  char name[256];
  name_from_file(opts, name, sizeof name);
  for (size_t i = 0; i < pieces && !st; i++) {
    const char *b = starts.data[i], *e = starts.data[i + 1];
    /* A piece with nothing but comments is skipped; one without a header holds bare
     * computations (XLA's split-input-file tests). */
    kiln_hlo_lexer_t probe;
    kiln_hlo_lexer_init(&probe, text, b, e, NULL);
    kiln_hlo_lexer_skip_ws(&probe);
    bool empty = probe.p >= e && !probe.err;
    bool header = kiln_hlo_lexer_accept_word(&probe, "HloModule");
    kiln_status_free(probe.err);
    if (empty) continue;
    st = parse_range(text, b, e, opts, header ? kModeModule : kModeComputations,
                     header ? "module" : name, &mods[count]);
    if (!st) count++;
  }
  kiln_vec_free(&starts);
  if (!st && count == 0) /* nothing but comments: report the missing header */
    st = parse_range(text, text, end, opts, kModeModule, "module", &mods[0]);
  if (st) {
    for (size_t i = 0; i < count; i++) kiln_hlo_module_destroy(mods[i]);
    kiln_free(mods);
    return st;
  }
  *out_modules = mods;
  *out_count = (int)count;
  return NULL;
}

/* The entry points: every allocation of a parse may fail (base/alloc.h, out-of-memory scopes). */
kiln_status kiln_hlo_parse_module(const char *text, size_t len,
                                  const kiln_hlo_parse_options_t *opts, kiln_hlo_module_t **out) {
  KILN_OOM_SCOPED_RETURN(parse_module(text, len, opts, out), if (out) *out = NULL,
                         "parsing an HLO module");
}

kiln_status kiln_hlo_parse_computations(const char *text, size_t len,
                                        const kiln_hlo_parse_options_t *opts,
                                        kiln_hlo_module_t **out) {
  KILN_OOM_SCOPED_RETURN(parse_computations(text, len, opts, out), if (out) *out = NULL,
                         "parsing HLO computations");
}

kiln_status kiln_hlo_parse_modules(const char *text, size_t len,
                                   const kiln_hlo_parse_options_t *opts,
                                   kiln_hlo_module_t ***out_modules, int *out_count) {
  KILN_OOM_SCOPED_RETURN(
      parse_modules(text, len, opts, out_modules, out_count),
      {
        if (out_modules) *out_modules = NULL;
        if (out_count) *out_count = 0;
      },
      "parsing HLO modules");
}
