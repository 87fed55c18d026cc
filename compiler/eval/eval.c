/* Evaluator driver: evaluation order, value bookkeeping, opcode dispatch, control flow,
 * tuples and calls. The per-family handlers live in the
 * other eval_*.c files. */
#include "compiler/eval/eval.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/hashmap.h"

/* ---- evaluation plans: post-order of the instructions reachable from the root ---- */

typedef struct eval_plan {
  const kiln_hlo_computation_t *comp;
  int n;                                /* instructions in post order */
  const kiln_hlo_instruction_t **order;
  int **operand_slots;                  /* per instruction: slot of each operand */
  int *last_use;                        /* per slot: its last user's slot (the root: n) */
} eval_plan_t;

/* A computation being evaluated: a collection keeps its arguments and every value computed
 * before instruction `at` (the one in flight, or next) that `at` or a later one uses. */
struct kiln_eval_frame {
  const eval_plan_t *plan;
  kiln_literal_t *const *vals;
  int at;
  int num_args;
  kiln_literal_t *const *args;
  struct kiln_eval_frame *up;
};

struct kiln_eval_plans {
  kiln_arena_t arena;
  kiln_ptrmap_t by_comp; /* computation -> eval_plan_t */
};

static kiln_status plans_create(struct kiln_eval_plans **out) {
  struct kiln_eval_plans *p = kiln_calloc(1, sizeof *p);
  kiln_arena_init(&p->arena);
  kiln_ptrmap_init(&p->by_comp);
  *out = p;
  return KILN_STATUS_OK;
}

static void plans_destroy(struct kiln_eval_plans *p) {
  if (!p) return;
  kiln_ptrmap_free(&p->by_comp);
  kiln_arena_destroy(&p->arena);
  kiln_free(p);
}

/* Builds the post order with an explicit stack (deep graphs must not overflow the C stack). */
static kiln_status plan_build(struct kiln_eval_plans *plans, const kiln_hlo_computation_t *c,
                              eval_plan_t **out) {
  if (!c->root)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "computation '%s' has no root", c->name);
  size_t cap = c->instructions.len + 1;
  kiln_ptrmap_t slot_of; /* instr -> slot + 1 (0 = unvisited; -1 cast = on stack) */
  kiln_ptrmap_init(&slot_of);
  const kiln_hlo_instruction_t **order = kiln_arena_alloc(&plans->arena, sizeof(*order) * cap);
  typedef struct { const kiln_hlo_instruction_t *instr; int next; } frame_t;
  frame_t *stack = kiln_malloc(sizeof(frame_t) * cap);
  kiln_status st = KILN_STATUS_OK;
  if (!order) {
    st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluation plan for '%s'", c->name);
    goto done;
  }
  int n = 0, sp = 0;
  static char on_stack_marker;
  stack[sp++] = (frame_t){c->root, 0};
  kiln_ptrmap_put(&slot_of, c->root, &on_stack_marker);
  while (sp > 0) {
    frame_t *f = &stack[sp - 1];
    if (f->next < f->instr->num_operands) {
      const kiln_hlo_instruction_t *op = f->instr->operands[f->next++];
      void *seen = kiln_ptrmap_get(&slot_of, op);
      if (seen == &on_stack_marker) {
        st = kiln_status_make(KILN_INVALID_ARGUMENT, "cycle through instruction '%s' in '%s'",
                              op->name, c->name);
        goto done;
      }
      if (seen) continue;
      if ((size_t)sp >= cap) {
        st = kiln_status_make(KILN_INVALID_ARGUMENT,
                              "instruction '%s' has an operand outside computation '%s'",
                              f->instr->name, c->name);
        goto done;
      }
      kiln_ptrmap_put(&slot_of, op, &on_stack_marker);
      stack[sp++] = (frame_t){op, 0};
      continue;
    }
    if ((size_t)n >= cap) {
      st = kiln_status_make(KILN_INVALID_ARGUMENT,
                            "computation '%s' reaches instructions outside itself", c->name);
      goto done;
    }
    order[n] = f->instr;
    kiln_ptrmap_put(&slot_of, f->instr, (void *)(intptr_t)(n + 1));
    n++;
    sp--;
  }
  eval_plan_t *p = kiln_arena_alloc(&plans->arena, sizeof *p);
  int **slots = kiln_arena_alloc(&plans->arena, sizeof(int *) * (size_t)(n ? n : 1));
  int *last_use = kiln_arena_alloc(&plans->arena, sizeof(int) * (size_t)(n ? n : 1));
  if (!p || !slots || !last_use) {
    st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluation plan for '%s'", c->name);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    const kiln_hlo_instruction_t *instr = order[i];
    int no = instr->num_operands;
    slots[i] = kiln_arena_alloc(&plans->arena, sizeof(int) * (size_t)(no ? no : 1));
    if (!slots[i]) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluation plan for '%s'", c->name);
      goto done;
    }
    last_use[i] = i;
    for (int j = 0; j < no; j++) {
      slots[i][j] = (int)(intptr_t)kiln_ptrmap_get(&slot_of, instr->operands[j]) - 1;
      last_use[slots[i][j]] = i;
    }
  }
  if (n) last_use[n - 1] = n;
  p->comp = c;
  p->n = n;
  p->order = order;
  p->operand_slots = slots;
  p->last_use = last_use;
  kiln_ptrmap_put(&plans->by_comp, c, p);
  *out = p;
done:
  kiln_free(stack);
  kiln_ptrmap_free(&slot_of);
  return st;
}

/* ---- literal helpers ---- */

/* Array data: a heap block of its own when large (and a heap is given), else in `a`. */
static void *alloc_data(kiln_arena_t *a, kiln_eval_heap_t *heap, size_t bytes) {
  if (heap && kiln_eval_heap_takes(heap, bytes)) return kiln_eval_heap_alloc(heap, bytes);
  return kiln_arena_alloc(a, bytes);
}

static kiln_status alloc_rec(kiln_arena_t *a, kiln_eval_heap_t *heap, kiln_shape_t *shape,
                             kiln_literal_t **out) {
  kiln_literal_t *l = kiln_arena_alloc(a, sizeof *l);
  if (!l) goto oom;
  l->shape = shape;
  if (shape->type == KILN_TUPLE) {
    l->num_tuple_elements = shape->num_elements;
    if (shape->num_elements) {
      l->tuple_elements = kiln_arena_alloc(a, sizeof(kiln_literal_t *) * (size_t)shape->num_elements);
      if (!l->tuple_elements) goto oom;
      for (int i = 0; i < shape->num_elements; i++)
        KILN_RETURN_IF_ERROR_PLAIN(alloc_rec(a, heap, shape->elements[i], &l->tuple_elements[i]));
    }
  } else if (kiln_shape_is_array(shape)) {
    int64_t bytes = kiln_shape_byte_size(shape);
    l->num_elements = kiln_shape_num_elements(shape);
    if (bytes == INT64_MAX || (uint64_t)bytes > SIZE_MAX / 2) goto oom;
    if (bytes > 0) {
      l->data = alloc_data(a, heap, (size_t)bytes);
      if (!l->data) goto oom;
    }
  }
  *out = l;
  return KILN_STATUS_OK;
oom:
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: cannot allocate a literal of %" PRId64
                          " bytes", kiln_shape_byte_size(shape));
}

kiln_status kiln_eval_literal_alloc(kiln_eval_ctx_t *ctx, kiln_shape_t *shape,
                                    kiln_literal_t **out) {
  *out = NULL;
  return alloc_rec(ctx->arena, ctx->heap, shape, out);
}

kiln_literal_t *kiln_eval_literal_make(kiln_eval_ctx_t *ctx, kiln_shape_t *shape) {
  kiln_literal_t *l = NULL;
  kiln_status st = alloc_rec(ctx->arena, ctx->heap, shape, &l);
  if (st) {
    kiln_status_free(st);
    return NULL;
  }
  return l;
}

kiln_status kiln_eval_literal_view(kiln_eval_ctx_t *ctx, kiln_shape_t *shape,
                                   const kiln_literal_t *src, kiln_literal_t **out) {
  *out = NULL;
  if (!kiln_shape_is_array(shape) || !kiln_shape_is_array(src->shape) ||
      kiln_shape_byte_size(shape) != kiln_shape_byte_size(src->shape))
    return kiln_status_make(KILN_INVALID_ARGUMENT, "evaluator: cannot view a literal as another shape");
  kiln_literal_t *l = kiln_arena_alloc(ctx->arena, sizeof *l);
  if (!l) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: out of memory");
  l->shape = shape;
  l->num_elements = kiln_shape_num_elements(shape);
  l->data = src->data;
  *out = l;
  return KILN_STATUS_OK;
}

static kiln_literal_t *clone_into(kiln_arena_t *a, kiln_eval_heap_t *heap,
                                  const kiln_literal_t *src) {
  kiln_literal_t *l = kiln_arena_alloc(a, sizeof *l);
  if (!l) return NULL;
  *l = *src;
  l->shape = kiln_shape_clone(a, src->shape);
  if (!l->shape) return NULL;
  if (src->num_tuple_elements) {
    l->tuple_elements = kiln_arena_alloc(a, sizeof(kiln_literal_t *) * (size_t)src->num_tuple_elements);
    if (!l->tuple_elements) return NULL;
    for (int i = 0; i < src->num_tuple_elements; i++) {
      l->tuple_elements[i] = clone_into(a, heap, src->tuple_elements[i]);
      if (!l->tuple_elements[i]) return NULL;
    }
  }
  if (src->data) {
    int64_t bytes = kiln_shape_byte_size(src->shape);
    l->data = bytes > 0 ? alloc_data(a, heap, (size_t)bytes) : NULL;
    if (bytes > 0 && !l->data) return NULL;
    if (bytes > 0) memcpy(l->data, src->data, (size_t)bytes);
  }
  return l;
}

kiln_literal_t *kiln_eval_literal_clone(kiln_arena_t *a, const kiln_literal_t *src) {
  return clone_into(a, NULL, src);
}

int64_t kiln_eval_scalar_index(const kiln_literal_t *l) {
  if (!l->data || l->num_elements < 1) return 0;
  kiln_elem_type_t t = l->shape->type;
  if (kiln_elem_type_is_unsigned_int(t) || t == KILN_PRED) {
    uint64_t u = (uint64_t)kiln_eval_elem_get_s64(t, l->data, 0);
    if (t == KILN_U64 && u > (uint64_t)INT64_MAX) return INT64_MAX;
    return (int64_t)u;
  }
  return kiln_eval_elem_get_s64(t, l->data, 0);
}

kiln_status kiln_eval_tuple_make(kiln_eval_ctx_t *ctx, kiln_shape_t *shape, int n,
                                 kiln_literal_t *const *elems, kiln_literal_t **out) {
  kiln_literal_t *l = kiln_arena_alloc(ctx->arena, sizeof *l);
  kiln_literal_t **e = kiln_arena_alloc(ctx->arena, sizeof(kiln_literal_t *) * (size_t)(n ? n : 1));
  if (!l || !e) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: out of memory");
  for (int i = 0; i < n; i++) e[i] = elems[i];
  l->shape = shape;
  l->num_tuple_elements = n;
  l->tuple_elements = e;
  *out = l;
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_relabel(kiln_eval_ctx_t *ctx, kiln_shape_t *shape, kiln_literal_t *v,
                              kiln_literal_t **out) {
  if (v->shape->type == KILN_TUPLE || !kiln_shape_is_array(v->shape) ||
      !kiln_shape_is_array(shape)) {
    kiln_literal_t *l = kiln_arena_alloc(ctx->arena, sizeof *l);
    if (!l) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: out of memory");
    *l = *v;
    l->shape = shape;
    *out = l;
    return KILN_STATUS_OK;
  }
  return kiln_eval_literal_view(ctx, shape, v, out);
}

static bool literal_matches_shape(const kiln_literal_t *l, const kiln_shape_t *s) {
  if (!l || !l->shape) return false;
  if (s->type == KILN_TUPLE) {
    if (l->shape->type != KILN_TUPLE || l->num_tuple_elements != s->num_elements) return false;
    for (int i = 0; i < s->num_elements; i++)
      if (!literal_matches_shape(l->tuple_elements[i], s->elements[i])) return false;
    return true;
  }
  if (!kiln_shape_is_array(s)) return l->shape->type == s->type;
  if (l->unknown) return false;
  return kiln_shape_compatible(l->shape, s) &&
         (l->num_elements == 0 || l->data != NULL);
}

/* ---- scalar computation calls with a recycled scratch arena ---- */

/* The fast path's op (kiln_eval_scalar_fn_t): an f32 / f64 add, multiply, maximum or minimum
 * of the two parameters, else KILN_OP_COUNT. */
static kiln_hlo_opcode_t fast_binary(const kiln_hlo_computation_t *c, kiln_elem_type_t *type,
                                     bool *swapped) {
  const kiln_hlo_instruction_t *r = c ? c->root : NULL;
  if (!r || !r->shape || (r->shape->type != KILN_F32 && r->shape->type != KILN_F64))
    return KILN_OP_COUNT;
  *type = r->shape->type;
  return kiln_eval_binary_reducer(c, r->shape->type, swapped); /* and/or: not on floats */
}

void kiln_eval_scalar_fn_init(kiln_eval_scalar_fn_t *fn, kiln_eval_ctx_t *ctx,
                              const kiln_hlo_computation_t *comp) {
  memset(fn, 0, sizeof *fn);
  fn->ctx = ctx;
  fn->comp = comp;
  kiln_arena_init(&fn->scratch);
  fn->scratch.limit = ctx->arena->limit;
  fn->fast_op = fast_binary(comp, &fn->fast_type, &fn->fast_swapped);
}

static bool scalar_fn_fast(const kiln_eval_scalar_fn_t *fn, int num_args,
                           const kiln_elem_type_t *arg_types, const void *const *args,
                           int num_results, void *const *results) {
  if (fn->fast_op == KILN_OP_COUNT || num_args != 2 || num_results != 1 ||
      arg_types[0] != fn->fast_type || arg_types[1] != fn->fast_type)
    return false;
  const void *a = args[fn->fast_swapped ? 1 : 0], *b = args[fn->fast_swapped ? 0 : 1];
  /* Which NaN a sum or product of two NaNs returns is the compiler's choice (it may commute
   * them): those go through the interpreter, whose kernel made that choice. */
  bool arith = fn->fast_op == KILN_OP_ADD || fn->fast_op == KILN_OP_MULTIPLY;
  if (fn->fast_type == KILN_F32) {
    float x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    if (arith && (isnan(x) || isnan(y))) return false;
    float r = kiln_eval_fstepf(fn->fast_op, x, y);
    memcpy(results[0], &r, sizeof r);
  } else {
    double x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    if (arith && (isnan(x) || isnan(y))) return false;
    double r = kiln_eval_fstep(fn->fast_op, x, y);
    memcpy(results[0], &r, sizeof r);
  }
  return true;
}

kiln_status kiln_eval_scalar_fn_fold(kiln_eval_scalar_fn_t *fn, kiln_elem_type_t type, void *acc,
                                     const void *src, int64_t n) {
  size_t es = kiln_elem_type_storage_bytes(type);
  const kiln_elem_type_t types[2] = {type, type};
  bool arith = fn->fast_op == KILN_OP_ADD || fn->fast_op == KILN_OP_MULTIPLY;
  if (fn->fast_op != KILN_OP_COUNT && type == KILN_F32 && fn->fast_type == KILN_F32) {
    float *a = acc;
    const float *b = src;
    for (int64_t e = 0; e < n; e++) { /* scalar_fn_fast's expression, without a call */
      float x = fn->fast_swapped ? b[e] : a[e], y = fn->fast_swapped ? a[e] : b[e];
      if (arith && (isnan(x) || isnan(y))) {
        void *pa = &a[e];
        const void *args[2] = {pa, &b[e]};
        KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_scalar_fn_call(fn, 2, types, args, 1, &pa));
      } else {
        a[e] = kiln_eval_fstepf(fn->fast_op, x, y);
      }
    }
    return KILN_STATUS_OK;
  }
  for (int64_t e = 0; e < n; e++) {
    void *a = (char *)acc + (size_t)e * es;
    const void *args[2] = {a, (const char *)src + (size_t)e * es};
    if (scalar_fn_fast(fn, 2, types, args, 1, &a)) continue;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_scalar_fn_call(fn, 2, types, args, 1, &a));
  }
  return KILN_STATUS_OK;
}

void kiln_eval_scalar_fn_destroy(kiln_eval_scalar_fn_t *fn) {
  kiln_arena_destroy(&fn->scratch);
}

kiln_status kiln_eval_scalar_fn_call(kiln_eval_scalar_fn_t *fn, int num_args,
                                     const kiln_elem_type_t *arg_types,
                                     const void *const *args, int num_results,
                                     void *const *results) {
  if (scalar_fn_fast(fn, num_args, arg_types, args, num_results, results)) return KILN_STATUS_OK;
  if (fn->calls_since_reset >= 4096) {
    size_t limit = fn->scratch.limit;
    kiln_arena_destroy(&fn->scratch);
    kiln_arena_init(&fn->scratch);
    fn->scratch.limit = limit;
    fn->calls_since_reset = 0;
  }
  fn->calls_since_reset++;
  kiln_literal_t *argv[16];
  if (num_args > 16)
    return kiln_status_make(KILN_UNIMPLEMENTED, "evaluator: scalar computation '%s' with %d arguments",
                            fn->comp->name, num_args);
  for (int i = 0; i < num_args; i++) {
    kiln_shape_t *s = kiln_shape_make_scalar(&fn->scratch, arg_types[i]);
    kiln_literal_t *l = s ? kiln_arena_alloc(&fn->scratch, sizeof *l) : NULL;
    size_t es = kiln_elem_type_storage_bytes(arg_types[i]);
    void *d = l ? kiln_arena_alloc(&fn->scratch, es ? es : 1) : NULL;
    if (!d) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: out of memory");
    memcpy(d, args[i], es);
    l->shape = s;
    l->num_elements = 1;
    l->data = d;
    argv[i] = l;
  }
  kiln_arena_t *saved = fn->ctx->arena;
  fn->ctx->arena = &fn->scratch;
  kiln_literal_t *res = NULL;
  kiln_status st = kiln_eval_computation(fn->ctx, fn->comp, num_args, argv, &res);
  fn->ctx->arena = saved;
  if (st) return st;
  for (int i = 0; i < num_results; i++) {
    const kiln_literal_t *r = res;
    if (res->shape->type == KILN_TUPLE) {
      if (i >= res->num_tuple_elements)
        return kiln_status_make(KILN_INVALID_ARGUMENT, "computation '%s' returns %d values, expected %d",
                                fn->comp->name, res->num_tuple_elements, num_results);
      r = res->tuple_elements[i];
    } else if (num_results != 1) {
      return kiln_status_make(KILN_INVALID_ARGUMENT, "computation '%s' returns one value, expected %d",
                              fn->comp->name, num_results);
    }
    if (!kiln_shape_is_array(r->shape) || r->num_elements != 1 || !r->data)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "computation '%s' must return scalars",
                              fn->comp->name);
    memcpy(results[i], r->data, kiln_elem_type_storage_bytes(r->shape->type));
  }
  return KILN_STATUS_OK;
}

/* ---- control flow and calls ---- */

static kiln_status unimplemented(const kiln_hlo_instruction_t *instr) {
  return kiln_status_make(KILN_UNIMPLEMENTED,
                          "evaluator does not support opcode '%s' (instruction '%s')",
                          kiln_hlo_opcode_name(instr->opcode), instr->name);
}

static kiln_status call_comp(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             const char *key, int n, kiln_literal_t *const *args,
                             kiln_literal_t **out) {
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(instr, key);
  if (!c && instr->num_called_groups > 0 && instr->called_groups[0].n > 0 &&
      (instr->opcode == KILN_OP_CALL || instr->opcode == KILN_OP_FUSION))
    c = instr->called_groups[0].comps[0];
  if (!c)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "instruction '%s' has no %s computation",
                            instr->name, key);
  KILN_RETURN_IF_ERROR(kiln_eval_computation(ctx, c, n, args, out), "in %s '%s'",
                       kiln_hlo_opcode_name(instr->opcode), instr->name);
  return KILN_STATUS_OK;
}

static kiln_status read_pred(const kiln_literal_t *l, const char *what, bool *out) {
  if (!l || !kiln_shape_is_array(l->shape) || l->num_elements != 1 || !l->data)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "%s must be a scalar", what);
  *out = kiln_eval_elem_get_s64(l->shape->type, l->data, 0) != 0;
  return KILN_STATUS_OK;
}

/* while: the loop state lives in its own arena, copied out after each iteration so that
 * the evaluator's memory stays bounded by one iteration's intermediates. */
static kiln_status eval_while(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                              kiln_literal_t *init, kiln_literal_t **out) {
  const kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(instr, "condition");
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(instr, "body");
  if (!cond || !body)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "while '%s' needs condition and body", instr->name);
  kiln_arena_t *outer = ctx->arena;
  kiln_arena_t state_arena, work;
  kiln_arena_init(&state_arena);
  kiln_arena_init(&work);
  state_arena.limit = work.limit = outer->limit;
  kiln_literal_t *state = init;
  kiln_status st = KILN_STATUS_OK;
  int64_t max_iter = ctx->opts ? ctx->opts->max_while_iterations : 0;
  for (int64_t iter = 0;; iter++) {
    ctx->arena = &work;
    uint64_t iteration_blocks = ctx->heap ? kiln_eval_heap_serial(ctx->heap) : 0;
    kiln_literal_t *pred = NULL;
    st = kiln_eval_computation(ctx, cond, 1, &state, &pred);
    if (st) {
      st = kiln_status_annotate(st, "in condition of while '%s' (iteration %" PRId64 ")", instr->name, iter);
      break;
    }
    bool go = false;
    if ((st = read_pred(pred, "while condition result", &go))) break;
    if (!go) {
      if (ctx->heap) kiln_eval_heap_free_since(ctx->heap, iteration_blocks);
      break;
    }
    if (max_iter > 0 && iter >= max_iter) {
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "while '%s' exceeded max_while_iterations=%" PRId64, instr->name, max_iter);
      break;
    }
    kiln_literal_t *next = NULL;
    st = kiln_eval_computation(ctx, body, 1, &state, &next);
    if (st) {
      st = kiln_status_annotate(st, "in body of while '%s' (iteration %" PRId64 ")", instr->name, iter);
      break;
    }
    kiln_arena_t fresh;
    kiln_arena_init(&fresh);
    fresh.limit = outer->limit;
    kiln_literal_t *copy = kiln_eval_literal_clone(&fresh, next);
    if (ctx->heap) kiln_eval_heap_free_since(ctx->heap, iteration_blocks);
    kiln_arena_destroy(&work);
    kiln_arena_init(&work);
    work.limit = outer->limit;
    if (!copy) {
      kiln_arena_destroy(&fresh);
      st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "while '%s': loop state too large", instr->name);
      break;
    }
    kiln_arena_destroy(&state_arena);
    state_arena = fresh;
    state = copy;
  }
  ctx->arena = outer;
  if (!st) {
    *out = clone_into(outer, ctx->heap, state);
    if (!*out) st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "while '%s': result too large", instr->name);
  }
  kiln_arena_destroy(&work);
  kiln_arena_destroy(&state_arena);
  return st;
}

static kiln_status eval_conditional(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                    kiln_literal_t *const *ops, kiln_literal_t **out) {
  const kiln_literal_t *sel = ops[0];
  if (!kiln_shape_is_array(sel->shape) || sel->num_elements != 1 || !sel->data)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "conditional '%s': selector must be a scalar", instr->name);
  const kiln_hlo_computation_t *branch = NULL;
  int64_t which;
  if (sel->shape->type == KILN_PRED) {
    bool p = kiln_eval_elem_get_s64(KILN_PRED, sel->data, 0) != 0;
    which = p ? 0 : 1;
    /* true_computation/false_computation, else branch_computations={true, false} below */
    branch = kiln_hlo_instruction_called(instr, p ? "true_computation" : "false_computation");
  } else {
    which = kiln_eval_scalar_index(sel);
  }
  if (!branch) {
    const kiln_called_group_t *g = NULL;
    for (int i = 0; i < instr->num_called_groups; i++)
      if (strcmp(instr->called_groups[i].key, "branch_computations") == 0) g = &instr->called_groups[i];
    if (!g || g->n == 0)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "conditional '%s' has no branch computations", instr->name);
    /* XLA: an out-of-range index runs the last branch. */
    if (which < 0 || which >= g->n) which = g->n - 1;
    branch = g->comps[which];
  }
  int64_t arg_index = which + 1;
  if (arg_index >= instr->num_operands)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "conditional '%s' lacks an operand for branch %" PRId64,
                            instr->name, which);
  KILN_RETURN_IF_ERROR(kiln_eval_computation(ctx, branch, 1, &ops[arg_index], out),
                       "in branch %" PRId64 " of conditional '%s'", which, instr->name);
  return KILN_STATUS_OK;
}

/* map: applies to_apply to each element tuple of the operands. */
static kiln_status eval_map(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                            kiln_literal_t *const *ops, kiln_literal_t **out) {
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(instr, "to_apply");
  if (!c) return kiln_status_make(KILN_INVALID_ARGUMENT, "map '%s' has no to_apply", instr->name);
  int n = instr->num_operands;
  if (n > 16) return unimplemented(instr);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, out));
  kiln_literal_t *r = *out;
  kiln_elem_type_t types[16];
  size_t es[16];
  for (int i = 0; i < n; i++) {
    if (ops[i]->num_elements != r->num_elements)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "map '%s': operand %d has %" PRId64 " elements, expected %" PRId64,
                              instr->name, i, ops[i]->num_elements, r->num_elements);
    types[i] = ops[i]->shape->type;
    es[i] = kiln_elem_type_storage_bytes(types[i]);
  }
  size_t res_es = kiln_elem_type_storage_bytes(r->shape->type);
  kiln_eval_scalar_fn_t fn;
  kiln_eval_scalar_fn_init(&fn, ctx, c);
  kiln_status st = KILN_STATUS_OK;
  for (int64_t k = 0; k < r->num_elements && !st; k++) {
    const void *args[16];
    for (int i = 0; i < n; i++) args[i] = (const char *)ops[i]->data + (size_t)k * es[i];
    void *res = (char *)r->data + (size_t)k * res_es;
    st = kiln_eval_scalar_fn_call(&fn, n, types, args, 1, &res);
  }
  kiln_eval_scalar_fn_destroy(&fn);
  if (st) return kiln_status_annotate(st, "in map '%s'", instr->name);
  return KILN_STATUS_OK;
}

/* ---- asynchronous pairs, evaluated synchronously ---- */

/* copy-start -> (destination, source, context); async-start -> ((operands), result,
 * context...) with the called computation evaluated now. The *-done ops take the result
 * element back out; updates pass the tuple through. */
static kiln_status eval_async(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                              kiln_literal_t *const *ops, kiln_literal_t **out) {
  kiln_shape_t *s = instr->shape;
  switch (instr->opcode) {
  case KILN_OP_COPY_START: {
    if (s->type != KILN_TUPLE || s->num_elements < 2) return unimplemented(instr);
    kiln_literal_t *el[8];
    if (s->num_elements > 8) return unimplemented(instr);
    for (int i = 0; i < s->num_elements; i++) {
      if (i < 2)
        KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_relabel(ctx, s->elements[i], ops[0], &el[i]));
      else
        KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, s->elements[i], &el[i]));
    }
    return kiln_eval_tuple_make(ctx, s, s->num_elements, el, out);
  }
  case KILN_OP_COPY_DONE:
    if (ops[0]->shape->type != KILN_TUPLE || ops[0]->num_tuple_elements < 1) return unimplemented(instr);
    return kiln_eval_relabel(ctx, s, ops[0]->tuple_elements[0], out);
  case KILN_OP_ASYNC_START: {
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(instr, "calls");
    if (!c || s->type != KILN_TUPLE || s->num_elements < 2 || s->num_elements > 8)
      return unimplemented(instr);
    kiln_literal_t *el[8], *res = NULL;
    KILN_RETURN_IF_ERROR(kiln_eval_computation(ctx, c, instr->num_operands, ops, &res),
                         "in async-start '%s'", instr->name);
    KILN_RETURN_IF_ERROR_PLAIN(
        kiln_eval_tuple_make(ctx, s->elements[0], instr->num_operands, ops, &el[0]));
    el[1] = res;
    for (int i = 2; i < s->num_elements; i++)
      KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, s->elements[i], &el[i]));
    return kiln_eval_tuple_make(ctx, s, s->num_elements, el, out);
  }
  case KILN_OP_ASYNC_UPDATE:
    *out = ops[0];
    return KILN_STATUS_OK;
  case KILN_OP_ASYNC_DONE:
    if (ops[0]->shape->type != KILN_TUPLE || ops[0]->num_tuple_elements < 2) return unimplemented(instr);
    *out = ops[0]->tuple_elements[1];
    return KILN_STATUS_OK;
  default:
    return unimplemented(instr);
  }
}

/* ---- dispatch ---- */

static kiln_status eval_instruction(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                    kiln_literal_t *const *ops, int num_args,
                                    kiln_literal_t *const *args, kiln_literal_t **out) {
  kiln_hlo_opcode_t op = instr->opcode;
  switch (op) {
  case KILN_OP_PARAMETER: {
    int64_t k = instr->parameter_number;
    if (k < 0 || k >= num_args)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "parameter %" PRId64 " ('%s') has no argument",
                              k, instr->name);
    *out = args[k];
    return KILN_STATUS_OK;
  }
  case KILN_OP_CONSTANT:
    if (!instr->literal)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "constant '%s' has no literal", instr->name);
    if (instr->literal->unknown) return kiln_hlo_elided_constant_error(instr);
    *out = instr->literal;
    return KILN_STATUS_OK;
  case KILN_OP_TUPLE:
    return kiln_eval_tuple_make(ctx, instr->shape, instr->num_operands, ops, out);
  case KILN_OP_GET_TUPLE_ELEMENT: {
    const kiln_literal_t *t = ops[0];
    if (t->shape->type != KILN_TUPLE || instr->tuple_index < 0 ||
        instr->tuple_index >= t->num_tuple_elements)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "get-tuple-element '%s': index %" PRId64 " out of range",
                              instr->name, instr->tuple_index);
    *out = t->tuple_elements[instr->tuple_index];
    return KILN_STATUS_OK;
  }
  case KILN_OP_CALL:
    return call_comp(ctx, instr, "to_apply", instr->num_operands, ops, out);
  case KILN_OP_FUSION:
    return call_comp(ctx, instr, "calls", instr->num_operands, ops, out);
  case KILN_OP_MAP:
    return eval_map(ctx, instr, ops, out);
  case KILN_OP_WHILE:
    return eval_while(ctx, instr, ops[0], out);
  case KILN_OP_CONDITIONAL:
    return eval_conditional(ctx, instr, ops, out);
  case KILN_OP_OPTIMIZATION_BARRIER:
  case KILN_OP_DOMAIN:
  case KILN_OP_COPY:
    return kiln_eval_relabel(ctx, instr->shape, ops[0], out);
  case KILN_OP_COPY_START:
  case KILN_OP_COPY_DONE:
  case KILN_OP_ASYNC_START:
  case KILN_OP_ASYNC_UPDATE:
  case KILN_OP_ASYNC_DONE:
    return eval_async(ctx, instr, ops, out);
  case KILN_OP_SET_DIMENSION_SIZE: /* static shapes: the data is the operand's */
    return kiln_eval_relabel(ctx, instr->shape, ops[0], out);
  case KILN_OP_ADD_DEPENDENCY:
    *out = ops[0];
    return KILN_STATUS_OK;
  case KILN_OP_AFTER_ALL:
    return kiln_eval_literal_alloc(ctx, instr->shape, out);
  case KILN_OP_PARTITION_ID:
  case KILN_OP_REPLICA_ID: {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, out));
    int64_t v = ctx->opts ? (op == KILN_OP_PARTITION_ID ? ctx->opts->partition_id : ctx->opts->replica_id) : 0;
    if ((*out)->num_elements != 1) return unimplemented(instr);
    kiln_eval_elem_set_s64((*out)->shape->type, (*out)->data, 0, v);
    return KILN_STATUS_OK;
  }
  case KILN_OP_GET_DIMENSION_SIZE: {
    int64_t d = instr->dimensions.n > 0 ? instr->dimensions.v[0] : -1;
    const kiln_shape_t *s = ops[0]->shape;
    if (d < 0 || d >= s->rank)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "get-dimension-size '%s': bad dimension", instr->name);
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, out));
    if ((*out)->num_elements != 1) return unimplemented(instr);
    kiln_eval_elem_set_s64((*out)->shape->type, (*out)->data, 0, s->dims[d]);
    return KILN_STATUS_OK;
  }
  case KILN_OP_ALL_REDUCE:
  case KILN_OP_ALL_REDUCE_START:
  case KILN_OP_ALL_REDUCE_DONE:
  case KILN_OP_ALL_GATHER:
  case KILN_OP_ALL_GATHER_START:
  case KILN_OP_ALL_GATHER_DONE:
  case KILN_OP_REDUCE_SCATTER:
  case KILN_OP_ALL_TO_ALL:
  case KILN_OP_RAGGED_ALL_TO_ALL:
  case KILN_OP_COLLECTIVE_BROADCAST:
  case KILN_OP_COLLECTIVE_PERMUTE:
  case KILN_OP_COLLECTIVE_PERMUTE_START:
  case KILN_OP_COLLECTIVE_PERMUTE_DONE:
    return kiln_eval_collective(ctx, instr, ops, out);

  case KILN_OP_BROADCAST:
  case KILN_OP_RESHAPE:
  case KILN_OP_DYNAMIC_RESHAPE:
  case KILN_OP_TRANSPOSE:
  case KILN_OP_BITCAST:
  case KILN_OP_SLICE:
  case KILN_OP_DYNAMIC_SLICE:
  case KILN_OP_DYNAMIC_UPDATE_SLICE:
  case KILN_OP_CONCATENATE:
  case KILN_OP_PAD:
  case KILN_OP_REVERSE:
  case KILN_OP_IOTA:
    return kiln_eval_data_movement(ctx, instr, ops, out);

  case KILN_OP_REDUCE:
  case KILN_OP_REDUCE_WINDOW:
  case KILN_OP_SELECT_AND_SCATTER:
    return kiln_eval_reduction(ctx, instr, ops, out);

  case KILN_OP_BITCAST_CONVERT:
    return kiln_eval_elementwise(ctx, instr, ops, out);
  case KILN_OP_DOT:
  case KILN_OP_CONVOLUTION:
    return kiln_eval_dot_conv(ctx, instr, ops, out);
  case KILN_OP_GATHER:
  case KILN_OP_SCATTER:
    return kiln_eval_gather_scatter(ctx, instr, ops, out);
  case KILN_OP_SORT:
  case KILN_OP_TOPK:
    return kiln_eval_sort(ctx, instr, ops, out);
  case KILN_OP_RNG:
  case KILN_OP_RNG_BIT_GENERATOR:
    return kiln_eval_rng(ctx, instr, ops, out);
  case KILN_OP_CHOLESKY:
  case KILN_OP_TRIANGULAR_SOLVE:
  case KILN_OP_FFT:
    return kiln_eval_linalg(ctx, instr, ops, out);
  case KILN_OP_CUSTOM_CALL:
    return kiln_eval_custom_call(ctx, instr, ops, out);
  case KILN_OP_RNG_GET_AND_UPDATE_STATE:
  case KILN_OP_BATCH_NORM_TRAINING:
  case KILN_OP_BATCH_NORM_INFERENCE:
  case KILN_OP_BATCH_NORM_GRAD:
  case KILN_OP_SCAN:
  case KILN_OP_RAGGED_DOT:
  case KILN_OP_SCALED_DOT:
    return kiln_eval_extra(ctx, instr, ops, out);

  default:
    if (kiln_hlo_opcode_is_elementwise(op) && op != KILN_OP_MAP)
      return kiln_eval_elementwise(ctx, instr, ops, out);
    return unimplemented(instr);
  }
}

static bool is_array_valued_op(kiln_hlo_opcode_t op) {
  return (kiln_hlo_opcode_is_elementwise(op) && op != KILN_OP_MAP) || op == KILN_OP_BITCAST_CONVERT;
}

/* Whether an instruction in flight keeps every value it still needs where a collection sees
 * it: operands (in its frame) and the arguments of the computations it calls (their frames).
 * Others (a sort with its comparator, a reduce with its reducer, ...) may hold a result
 * being filled while they call a computation, so no collection runs under them. */
static bool keeps_values_in_frames(kiln_hlo_opcode_t op) {
  return op == KILN_OP_CALL || op == KILN_OP_FUSION || op == KILN_OP_WHILE ||
         op == KILN_OP_CONDITIONAL || op == KILN_OP_ASYNC_START;
}

/* Frees the large values no frame still uses. */
static void collect(kiln_eval_ctx_t *ctx) {
  kiln_eval_heap_t *h = ctx->heap;
  kiln_eval_heap_begin_collection(h);
  for (const struct kiln_eval_frame *f = ctx->frames; f; f = f->up) {
    for (int j = 0; j < f->num_args; j++) kiln_eval_heap_mark_literal(h, f->args[j]);
    for (int j = 0; j < f->at; j++)
      if (f->plan->last_use[j] >= f->at) kiln_eval_heap_mark_literal(h, f->vals[j]);
  }
  kiln_eval_heap_sweep(h);
}

void kiln_eval_collect_before_waiting(kiln_eval_ctx_t *ctx) {
  if (ctx->heap && ctx->collection_blocked == 1 &&
      kiln_eval_heap_allocated_since_collection(ctx->heap))
    collect(ctx);
}

kiln_status kiln_eval_computation(kiln_eval_ctx_t *ctx, const kiln_hlo_computation_t *c,
                                  int num_args, kiln_literal_t *const *args,
                                  kiln_literal_t **out_result) {
  *out_result = NULL;
  if (ctx->depth >= KILN_EVAL_MAX_DEPTH)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "evaluator: call depth exceeds %d at computation '%s'",
                            KILN_EVAL_MAX_DEPTH, c->name);
  if (num_args != c->num_parameters)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "computation '%s' takes %d arguments, got %d",
                            c->name, c->num_parameters, num_args);
  bool own_plans = false;
  if (!ctx->plans) {
    KILN_RETURN_IF_ERROR_PLAIN(plans_create(&ctx->plans));
    own_plans = true;
  }
  kiln_status st = KILN_STATUS_OK;
  kiln_literal_t *small[32];
  kiln_literal_t **vals = small;
  eval_plan_t *plan = kiln_ptrmap_get(&ctx->plans->by_comp, c);
  if (!plan && (st = plan_build(ctx->plans, c, &plan))) goto done;
  if (plan->n > 32) vals = kiln_calloc((size_t)plan->n, sizeof *vals);
  ctx->depth++;
  struct kiln_eval_frame frame = {plan, vals, 0, num_args, args, ctx->frames};
  ctx->frames = &frame;
  for (int i = 0; i < plan->n && !st; i++) {
    const kiln_hlo_instruction_t *instr = plan->order[i];
    frame.at = i;
    if (ctx->heap && !ctx->collection_blocked && kiln_eval_heap_wants_collection(ctx->heap))
      collect(ctx);
    kiln_literal_t *opv_small[8];
    kiln_literal_t **opv = opv_small;
    int no = instr->num_operands;
    if (no > 8) opv = kiln_malloc(sizeof *opv * (size_t)no);
    for (int j = 0; j < no; j++) opv[j] = vals[plan->operand_slots[i][j]];
    /* Elementwise handlers and the data-movement family take arrays only. */
    if (is_array_valued_op(instr->opcode)) {
      for (int j = 0; j < no && !st; j++)
        if (!kiln_shape_is_array(opv[j]->shape) || (opv[j]->num_elements && !opv[j]->data))
          st = kiln_status_make(KILN_INVALID_ARGUMENT, "operand %d of '%s' is not an array value", j,
                                instr->name);
    }
    kiln_literal_t *v = NULL;
    bool blocks = !keeps_values_in_frames(instr->opcode);
    ctx->collection_blocked += blocks;
    if (!st) st = eval_instruction(ctx, instr, opv, num_args, args, &v);
    ctx->collection_blocked -= blocks;
    if (!st && !v) st = kiln_status_make(KILN_INTERNAL, "evaluator produced no value for '%s'", instr->name);
    if (st && kiln_status_code(st) != KILN_RESOURCE_EXHAUSTED && instr->opcode != KILN_OP_CALL &&
        instr->opcode != KILN_OP_FUSION && instr->opcode != KILN_OP_WHILE &&
        instr->opcode != KILN_OP_CONDITIONAL)
      st = kiln_status_annotate(st, "at instruction '%s' in computation '%s'", instr->name, c->name);
    vals[i] = v;
    if (opv != opv_small) kiln_free(opv);
  }
  ctx->depth--;
  ctx->frames = frame.up;
  if (!st) *out_result = vals[plan->n - 1];
done:
  if (vals != small) kiln_free(vals);
  if (own_plans) {
    plans_destroy(ctx->plans);
    ctx->plans = NULL;
  }
  return st;
}

kiln_status kiln_eval_module(const kiln_hlo_module_t *m, const kiln_eval_options_t *opts,
                             int num_args, kiln_literal_t *const *args, kiln_arena_t *out_arena,
                             kiln_literal_t **out_result) {
  return kiln_eval_module_participant(m, opts, NULL, 0, num_args, args, out_arena, out_result);
}

kiln_status kiln_eval_module_participant(const kiln_hlo_module_t *m,
                                         const kiln_eval_options_t *opts,
                                         struct kiln_eval_world *world, int participant,
                                         int num_args, kiln_literal_t *const *args,
                                         kiln_arena_t *out_arena, kiln_literal_t **out_result) {
  *out_result = NULL;
  if (!m || !m->entry)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "evaluator: module has no entry computation");
  const kiln_hlo_computation_t *entry = m->entry;
  if (num_args != entry->num_parameters)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "entry computation '%s' takes %d arguments, got %d",
                            entry->name, entry->num_parameters, num_args);
  for (int i = 0; i < num_args; i++) {
    const kiln_hlo_instruction_t *p = entry->parameters ? entry->parameters[i] : NULL;
    if (!p) return kiln_status_make(KILN_INVALID_ARGUMENT, "entry parameter %d is missing", i);
    if (!literal_matches_shape(args[i], p->shape)) {
      char *want = kiln_shape_to_string(p->shape, false);
      char *got = args[i] && args[i]->shape ? kiln_shape_to_string(args[i]->shape, false) : kiln_strdup("<none>");
      kiln_status st = kiln_status_make(KILN_INVALID_ARGUMENT,
                                        "argument %d has shape %s, parameter '%s' expects %s", i, got,
                                        p->name, want);
      kiln_free(want);
      kiln_free(got);
      return st;
    }
  }
  kiln_eval_options_t default_opts = {0};
  kiln_arena_t work;
  kiln_arena_init(&work);
  work.limit = out_arena->limit;
  kiln_eval_ctx_t ctx = {.opts = opts ? opts : &default_opts,
                         .arena = &work,
                         .world = world,
                         .participant = participant};
  kiln_ptrmap_t coll_seq;
  kiln_ptrmap_init(&coll_seq);
  ctx.coll_seq = &coll_seq;
  ctx.heap = kiln_eval_heap_create(work.limit, ctx.opts->collect_eagerly);
  kiln_status st = ctx.heap ? plans_create(&ctx.plans)
                            : kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: out of memory");
  kiln_literal_t *res = NULL;
  if (!st) st = kiln_eval_computation(&ctx, entry, num_args, args, &res);
  if (!st) {
    *out_result = kiln_eval_literal_clone(out_arena, res);
    if (!*out_result) st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: result does not fit the output arena");
  }
  plans_destroy(ctx.plans);
  kiln_ptrmap_free(&coll_seq);
  kiln_eval_heap_destroy(ctx.heap);
  kiln_arena_destroy(&work);
  return st;
}
