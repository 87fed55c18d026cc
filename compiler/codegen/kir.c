/* Kernel IR: module, types, builder (see kir.h). The verifier is in kir_verify.c. */
#include "compiler/codegen/kir.h"

#include <stdarg.h>
#include <string.h>

static const char *const kOpNames[] = {
#define X(name, text, kind) text,
    KILN_KIR_OPS(X)
#undef X
};
static const char kOpKinds[] = {
#define X(name, text, kind) #kind[0],
    KILN_KIR_OPS(X)
#undef X
};

const char *kiln_kir_opcode_name(kiln_kir_opcode_t op) {
  return (unsigned)op < KILN_KIR_OPCODE_COUNT ? kOpNames[op] : "<bad-op>";
}
bool kiln_kir_opcode_is_binary(kiln_kir_opcode_t op) {
  return (unsigned)op < KILN_KIR_OPCODE_COUNT && kOpKinds[op] == 'B';
}
bool kiln_kir_opcode_is_unary(kiln_kir_opcode_t op) {
  return (unsigned)op < KILN_KIR_OPCODE_COUNT && kOpKinds[op] == 'U';
}

/* ---- module ---- */

kiln_kir_module_t *kiln_kir_module_create(const char *name, kiln_affine_ctx_t *ctx) {
  kiln_kir_module_t *m = kiln_calloc(1, sizeof(*m));
  kiln_arena_init(&m->arena);
  m->name = kiln_arena_strdup(&m->arena, name ? name : "kir");
  if (ctx) {
    m->ctx = ctx;
  } else {
    m->ctx = kiln_affine_ctx_create();
    m->owns_ctx = true;
  }
  return m;
}

void kiln_kir_module_destroy(kiln_kir_module_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->maps.len; i++) kiln_indexing_map_free(m->maps.data[i]);
  kiln_vec_free(&m->maps);
  for (size_t i = 0; i < m->funcs.len; i++) {
    kiln_kir_func_t *f = m->funcs.data[i];
    kiln_vec_free(&f->result_types);
  }
  kiln_vec_free(&m->funcs);
  /* Region op vectors are heap-allocated; regions are reachable only through ops, so the
   * module keeps a list of every region ever made. */
  for (size_t i = 0; i < m->regions.len; i++) kiln_vec_free(&m->regions.data[i]->ops);
  kiln_vec_free(&m->regions);
  if (m->owns_ctx) kiln_affine_ctx_destroy(m->ctx);
  kiln_arena_destroy(&m->arena);
  kiln_free(m);
}

kiln_kir_func_t *kiln_kir_module_find_func(const kiln_kir_module_t *m, const char *name) {
  for (size_t i = 0; i < m->funcs.len; i++)
    if (strcmp(m->funcs.data[i]->name, name) == 0) return m->funcs.data[i];
  return NULL;
}

kiln_kir_func_t *kiln_kir_module_kernel(const kiln_kir_module_t *m) {
  for (size_t i = 0; i < m->funcs.len; i++)
    if (m->funcs.data[i]->kind == KILN_KIR_FUNC_KERNEL) return m->funcs.data[i];
  return NULL;
}

kiln_indexing_map_t *kiln_kir_module_adopt_map(kiln_kir_module_t *m, kiln_indexing_map_t *map) {
  kiln_vec_push(&m->maps, map);
  return map;
}

/* ---- types ---- */

static kiln_kir_type_t *type_new(kiln_kir_module_t *m, kiln_kir_type_kind_t kind) {
  kiln_kir_type_t *t = kiln_arena_alloc(&m->arena, sizeof(*t));
  t->kind = kind;
  return t;
}

const kiln_kir_type_t *kiln_kir_type_scalar(kiln_kir_module_t *m, kiln_elem_type_t elem) {
  kiln_kir_type_t *t = type_new(m, KILN_KIR_TYPE_SCALAR);
  t->elem = elem;
  return t;
}

const kiln_kir_type_t *kiln_kir_type_index(kiln_kir_module_t *m) {
  return type_new(m, KILN_KIR_TYPE_INDEX);
}

const kiln_kir_type_t *kiln_kir_type_tensor(kiln_kir_module_t *m, kiln_elem_type_t elem,
                                            int rank, const int64_t *dims,
                                            kiln_kir_space_t space) {
  if (rank < 0 || rank > KILN_KIR_MAX_RANK) return NULL;
  kiln_kir_type_t *t = type_new(m, KILN_KIR_TYPE_TENSOR);
  t->elem = elem;
  t->rank = rank;
  t->space = space;
  int64_t *d = kiln_arena_alloc(&m->arena, sizeof(int64_t) * (size_t)(rank ? rank : 1));
  if (rank) memcpy(d, dims, sizeof(int64_t) * (size_t)rank);
  t->dims = d;
  return t;
}

const kiln_kir_type_t *kiln_kir_type_vector(kiln_kir_module_t *m, kiln_elem_type_t elem,
                                            int lanes) {
  kiln_kir_type_t *t = type_new(m, KILN_KIR_TYPE_VECTOR);
  t->elem = elem;
  t->lanes = lanes;
  return t;
}

bool kiln_kir_type_equal(const kiln_kir_type_t *a, const kiln_kir_type_t *b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind) return false;
  switch (a->kind) {
    case KILN_KIR_TYPE_INDEX:
      return true;
    case KILN_KIR_TYPE_SCALAR:
      return a->elem == b->elem;
    case KILN_KIR_TYPE_VECTOR:
      return a->elem == b->elem && a->lanes == b->lanes;
    case KILN_KIR_TYPE_TENSOR:
      if (a->elem != b->elem || a->rank != b->rank || a->space != b->space) return false;
      for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
      return true;
  }
  return false;
}

int64_t kiln_kir_type_num_elements(const kiln_kir_type_t *t) {
  int64_t n = 1;
  if (t->kind == KILN_KIR_TYPE_TENSOR)
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  else if (t->kind == KILN_KIR_TYPE_VECTOR)
    n = t->lanes;
  return n;
}

void kiln_kir_type_print(const kiln_kir_type_t *t, kiln_strbuf_t *out) {
  if (!t) {
    kiln_strbuf_append(out, "<null-type>");
    return;
  }
  switch (t->kind) {
    case KILN_KIR_TYPE_INDEX:
      kiln_strbuf_append(out, "index");
      return;
    case KILN_KIR_TYPE_SCALAR:
      kiln_strbuf_append(out, kiln_elem_type_name(t->elem));
      return;
    case KILN_KIR_TYPE_VECTOR:
      kiln_strbuf_printf(out, "vector<%dx%s>", t->lanes, kiln_elem_type_name(t->elem));
      return;
    case KILN_KIR_TYPE_TENSOR:
      kiln_strbuf_append(out, "tensor<");
      for (int i = 0; i < t->rank; i++) kiln_strbuf_printf(out, "%lldx", (long long)t->dims[i]);
      kiln_strbuf_append(out, kiln_elem_type_name(t->elem));
      if (t->space == KILN_KIR_SPACE_SHARED) kiln_strbuf_append(out, ", shared");
      kiln_strbuf_append_char(out, '>');
      return;
  }
}

/* ---- values, regions, functions ---- */

static kiln_kir_value_t *value_new(kiln_kir_module_t *m, const kiln_kir_type_t *type) {
  kiln_kir_value_t *v = kiln_arena_alloc(&m->arena, sizeof(*v));
  v->id = m->next_value_id++;
  v->type = type;
  return v;
}

void kiln_kir_value_set_name(kiln_kir_value_t *v, const char *name) {
  if (!v) return;
  kiln_kir_module_t *m = NULL;
  if (v->def && v->def->parent) m = v->def->parent->func->module;
  else if (v->region) m = v->region->func->module;
  if (!m || !name) {
    v->name = NULL;
    return;
  }
  v->name = kiln_arena_strdup(&m->arena, name);
}

kiln_kir_region_t *kiln_kir_region_new(kiln_kir_module_t *m, kiln_kir_func_t *f,
                                       kiln_kir_op_t *parent) {
  kiln_kir_region_t *r = kiln_arena_alloc(&m->arena, sizeof(*r));
  r->func = f;
  r->parent = parent;
  kiln_vec_push(&m->regions, r);
  return r;
}

kiln_kir_value_t *kiln_kir_region_add_arg(kiln_kir_module_t *m, kiln_kir_region_t *r,
                                          const kiln_kir_type_t *type) {
  kiln_kir_value_t *v = value_new(m, type);
  v->region = r;
  v->index = r->num_args;
  kiln_kir_value_t **args =
      kiln_arena_alloc(&m->arena, sizeof(*args) * (r->num_args + 1));
  if (r->num_args) memcpy(args, r->args, sizeof(*args) * r->num_args);
  args[r->num_args++] = v;
  r->args = args;
  return v;
}

kiln_kir_func_t *kiln_kir_func_create(kiln_kir_module_t *m, const char *name,
                                      kiln_kir_func_kind_t kind,
                                      const kiln_kir_type_t *const *param_types,
                                      const char *const *param_names, size_t num_params,
                                      const kiln_kir_type_t *const *result_types,
                                      size_t num_results) {
  if (!name || kiln_kir_module_find_func(m, name)) return NULL;
  for (size_t i = 0; i < num_params; i++)
    if (!param_types[i]) return NULL;
  for (size_t i = 0; i < num_results; i++)
    if (!result_types[i]) return NULL;
  kiln_kir_func_t *f = kiln_arena_alloc(&m->arena, sizeof(*f));
  f->name = kiln_arena_strdup(&m->arena, name);
  f->kind = kind;
  f->module = m;
  f->body = kiln_kir_region_new(m, f, NULL);
  f->param_written = kiln_arena_alloc(&m->arena, num_params + 1);
  for (size_t i = 0; i < num_params; i++) {
    kiln_kir_value_t *v = kiln_kir_region_add_arg(m, f->body, param_types[i]);
    if (param_names && param_names[i]) v->name = kiln_arena_strdup(&m->arena, param_names[i]);
  }
  for (size_t i = 0; i < num_results; i++) kiln_vec_push(&f->result_types, result_types[i]);
  for (int i = 0; i < 3; i++) f->block[i] = f->grid[i] = 1;
  kiln_vec_push(&m->funcs, f);
  return f;
}

kiln_kir_region_t *kiln_kir_func_body(kiln_kir_func_t *f) { return f->body; }
kiln_kir_value_t *kiln_kir_func_param(kiln_kir_func_t *f, size_t i) {
  return i < f->body->num_args ? f->body->args[i] : NULL;
}
size_t kiln_kir_func_num_params(const kiln_kir_func_t *f) { return f->body->num_args; }
void kiln_kir_func_set_written(kiln_kir_func_t *f, size_t i, bool written) {
  if (i < f->body->num_args) f->param_written[i] = written;
}
void kiln_kir_func_set_launch(kiln_kir_func_t *f, const int64_t block[3], const int64_t grid[3]) {
  for (int i = 0; i < 3; i++) {
    f->block[i] = block[i];
    f->grid[i] = grid[i];
  }
}

/* ---- builder ---- */

void kiln_kir_builder_init(kiln_kir_builder_t *b, kiln_kir_module_t *m,
                           kiln_kir_region_t *region) {
  memset(b, 0, sizeof(*b));
  b->m = m;
  b->region = region;
}

void kiln_kir_builder_finish(kiln_kir_builder_t *b) {
  kiln_vec_free(&b->stack);
  kiln_status_free(b->status);
  b->status = NULL;
}

void kiln_kir_builder_enter(kiln_kir_builder_t *b, kiln_kir_region_t *region) {
  kiln_vec_push(&b->stack, b->region);
  b->region = region;
}

void kiln_kir_builder_exit(kiln_kir_builder_t *b) {
  if (b->stack.len) b->region = kiln_vec_pop(&b->stack);
}

kiln_status kiln_kir_builder_take_status(kiln_kir_builder_t *b) {
  kiln_status s = b->status;
  b->status = NULL;
  return s;
}

bool kiln_kir_builder_ok(const kiln_kir_builder_t *b) { return b->status == NULL; }

static void *fail(kiln_kir_builder_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void *fail(kiln_kir_builder_t *b, const char *fmt, ...) {
  if (!b->status) {
    va_list ap;
    va_start(ap, fmt);
    b->status = kiln_status_make_va(KILN_INVALID_ARGUMENT, __FILE__, __LINE__, fmt, ap);
    va_end(ap);
  }
  return NULL;
}

/* Common entry check: no insertion point, an earlier error, or a NULL operand. */
static bool usable(kiln_kir_builder_t *b, kiln_kir_value_t *const *vals, size_t n) {
  if (b->status) return false;
  if (!b->region) {
    fail(b, "kir builder: no insertion point");
    return false;
  }
  for (size_t i = 0; i < n; i++)
    if (!vals[i]) {
      fail(b, "kir builder: NULL operand %zu", i);
      return false;
    }
  return true;
}

kiln_kir_op_t *kiln_kir_op_create(kiln_kir_builder_t *b, kiln_kir_opcode_t opcode,
                                  kiln_kir_value_t *const *operands, size_t num_operands,
                                  const kiln_kir_type_t *const *result_types, size_t num_results,
                                  size_t num_regions, const kiln_kir_op_t *attrs) {
  kiln_kir_module_t *m = b->m;
  kiln_kir_op_t *op = kiln_arena_alloc(&m->arena, sizeof(*op));
  if (attrs) {
    *op = *attrs;
    if (attrs->map)
      op->map = kiln_kir_module_adopt_map(m, kiln_indexing_map_clone(attrs->map));
  }
  op->opcode = opcode;
  op->parent = b->region;
  op->num_operands = (uint32_t)num_operands;
  op->operands = kiln_arena_alloc(&m->arena, sizeof(*op->operands) * (num_operands + 1));
  for (size_t i = 0; i < num_operands; i++) op->operands[i] = operands[i];
  op->num_results = (uint32_t)num_results;
  op->results = kiln_arena_alloc(&m->arena, sizeof(*op->results) * (num_results + 1));
  for (size_t i = 0; i < num_results; i++) {
    kiln_kir_value_t *v = value_new(m, result_types[i]);
    v->def = op;
    v->index = (uint32_t)i;
    op->results[i] = v;
  }
  op->num_regions = (uint32_t)num_regions;
  op->regions = kiln_arena_alloc(&m->arena, sizeof(*op->regions) * (num_regions + 1));
  for (size_t i = 0; i < num_regions; i++)
    op->regions[i] = kiln_kir_region_new(m, b->region->func, op);
  kiln_vec_push(&b->region->ops, op);
  return op;
}

static kiln_kir_value_t *op1(kiln_kir_builder_t *b, kiln_kir_opcode_t opc,
                             kiln_kir_value_t *const *ops, size_t n, const kiln_kir_type_t *rt,
                             const kiln_kir_op_t *attrs) {
  kiln_kir_op_t *op = kiln_kir_op_create(b, opc, ops, n, &rt, 1, 0, attrs);
  return op->results[0];
}

static bool is_int_like(const kiln_kir_type_t *t) {
  if (t->kind == KILN_KIR_TYPE_INDEX) return true;
  if (t->kind != KILN_KIR_TYPE_SCALAR && t->kind != KILN_KIR_TYPE_VECTOR) return false;
  return kiln_elem_type_is_integral(t->elem) || t->elem == KILN_PRED;
}
static bool is_float(const kiln_kir_type_t *t) {
  return (t->kind == KILN_KIR_TYPE_SCALAR || t->kind == KILN_KIR_TYPE_VECTOR) &&
         kiln_elem_type_is_float(t->elem);
}
static bool is_value_type(const kiln_kir_type_t *t) {
  return t->kind != KILN_KIR_TYPE_TENSOR;
}

static const char *tname(kiln_kir_builder_t *b, const kiln_kir_type_t *t) {
  kiln_strbuf_t s = {0};
  kiln_kir_type_print(t, &s);
  char *r = kiln_arena_strdup(&b->m->arena, kiln_strbuf_cstr(&s));
  kiln_strbuf_free(&s);
  return r;
}

kiln_kir_value_t *kiln_kir_const(kiln_kir_builder_t *b, const kiln_kir_type_t *type,
                                 kiln_kir_const_t value) {
  if (!usable(b, NULL, 0)) return NULL;
  if (!type || !is_value_type(type)) return fail(b, "constant: needs a scalar/index/vector type");
  kiln_kir_op_t attrs = {0};
  attrs.cst = value;
  return op1(b, KILN_KIR_CONSTANT, NULL, 0, type, &attrs);
}

kiln_kir_value_t *kiln_kir_const_int(kiln_kir_builder_t *b, kiln_elem_type_t elem, int64_t i) {
  kiln_kir_const_t c = {.i = i, .f = (double)i};
  return kiln_kir_const(b, kiln_kir_type_scalar(b->m, elem), c);
}
kiln_kir_value_t *kiln_kir_const_float(kiln_kir_builder_t *b, kiln_elem_type_t elem, double f) {
  kiln_kir_const_t c = {.i = 0, .f = f};
  return kiln_kir_const(b, kiln_kir_type_scalar(b->m, elem), c);
}
kiln_kir_value_t *kiln_kir_const_index(kiln_kir_builder_t *b, int64_t i) {
  kiln_kir_const_t c = {.i = i, .f = (double)i};
  return kiln_kir_const(b, kiln_kir_type_index(b->m), c);
}

/* Which element types an op accepts; shared with the verifier. */
bool kiln_kir_op_accepts_type(kiln_kir_opcode_t op, const kiln_kir_type_t *t) {
  if (!is_value_type(t)) return false;
  if (t->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_complex(t->elem)) return false;
  switch (op) {
    case KILN_KIR_ADD: case KILN_KIR_SUB: case KILN_KIR_MUL: case KILN_KIR_DIV:
    case KILN_KIR_REM: case KILN_KIR_MIN: case KILN_KIR_MAX:
      return is_int_like(t) || is_float(t);
    case KILN_KIR_AND: case KILN_KIR_OR: case KILN_KIR_XOR: case KILN_KIR_NOT:
      return is_int_like(t);
    case KILN_KIR_SHL: case KILN_KIR_SHR_LOGICAL: case KILN_KIR_SHR_ARITH:
    case KILN_KIR_POPCNT: case KILN_KIR_CLZ:
      return is_int_like(t) && (t->kind == KILN_KIR_TYPE_INDEX || t->elem != KILN_PRED);
    case KILN_KIR_NEG: case KILN_KIR_ABS: case KILN_KIR_SIGN:
      return (is_int_like(t) && (t->kind == KILN_KIR_TYPE_INDEX || t->elem != KILN_PRED)) ||
             is_float(t);
    default:
      return is_float(t);
  }
}

kiln_kir_value_t *kiln_kir_binary(kiln_kir_builder_t *b, kiln_kir_opcode_t op,
                                  kiln_kir_value_t *lhs, kiln_kir_value_t *rhs) {
  kiln_kir_value_t *ops[2] = {lhs, rhs};
  if (!usable(b, ops, 2)) return NULL;
  if (!kiln_kir_opcode_is_binary(op)) return fail(b, "%s is not a binary op", kiln_kir_opcode_name(op));
  if (!kiln_kir_type_equal(lhs->type, rhs->type))
    return fail(b, "%s: operand types differ (%s vs %s)", kiln_kir_opcode_name(op),
                tname(b, lhs->type), tname(b, rhs->type));
  if (!kiln_kir_op_accepts_type(op, lhs->type))
    return fail(b, "%s: type %s not supported", kiln_kir_opcode_name(op), tname(b, lhs->type));
  return op1(b, op, ops, 2, lhs->type, NULL);
}

kiln_kir_value_t *kiln_kir_unary(kiln_kir_builder_t *b, kiln_kir_opcode_t op,
                                 kiln_kir_value_t *x) {
  if (!usable(b, &x, 1)) return NULL;
  if (!kiln_kir_opcode_is_unary(op)) return fail(b, "%s is not a unary op", kiln_kir_opcode_name(op));
  if (!kiln_kir_op_accepts_type(op, x->type))
    return fail(b, "%s: type %s not supported", kiln_kir_opcode_name(op), tname(b, x->type));
  return op1(b, op, &x, 1, x->type, NULL);
}

static const kiln_kir_type_t *pred_like(kiln_kir_module_t *m, const kiln_kir_type_t *t) {
  if (t->kind == KILN_KIR_TYPE_VECTOR) return kiln_kir_type_vector(m, KILN_PRED, t->lanes);
  return kiln_kir_type_scalar(m, KILN_PRED);
}

kiln_kir_value_t *kiln_kir_is_finite(kiln_kir_builder_t *b, kiln_kir_value_t *x) {
  if (!usable(b, &x, 1)) return NULL;
  if (!is_float(x->type)) return fail(b, "is_finite: needs a float, got %s", tname(b, x->type));
  return op1(b, KILN_KIR_IS_FINITE, &x, 1, pred_like(b->m, x->type), NULL);
}

kiln_kir_value_t *kiln_kir_cmp(kiln_kir_builder_t *b, kiln_kir_cmp_t pred, kiln_kir_value_t *lhs,
                               kiln_kir_value_t *rhs) {
  kiln_kir_value_t *ops[2] = {lhs, rhs};
  if (!usable(b, ops, 2)) return NULL;
  if (!kiln_kir_type_equal(lhs->type, rhs->type) || !is_value_type(lhs->type))
    return fail(b, "cmp: operand types differ or are not values (%s vs %s)", tname(b, lhs->type),
                tname(b, rhs->type));
  if ((unsigned)pred > KILN_KIR_CMP_GE) return fail(b, "cmp: bad predicate %d", (int)pred);
  kiln_kir_op_t attrs = {0};
  attrs.cmp = pred;
  return op1(b, KILN_KIR_CMP, ops, 2, pred_like(b->m, lhs->type), &attrs);
}

kiln_kir_value_t *kiln_kir_select(kiln_kir_builder_t *b, kiln_kir_value_t *cond,
                                  kiln_kir_value_t *on_true, kiln_kir_value_t *on_false) {
  kiln_kir_value_t *ops[3] = {cond, on_true, on_false};
  if (!usable(b, ops, 3)) return NULL;
  if (cond->type->kind != KILN_KIR_TYPE_SCALAR || cond->type->elem != KILN_PRED)
    return fail(b, "select: condition must be pred, got %s", tname(b, cond->type));
  if (!kiln_kir_type_equal(on_true->type, on_false->type))
    return fail(b, "select: branch types differ (%s vs %s)", tname(b, on_true->type),
                tname(b, on_false->type));
  return op1(b, KILN_KIR_SELECT, ops, 3, on_true->type, NULL);
}

kiln_kir_value_t *kiln_kir_convert(kiln_kir_builder_t *b, kiln_kir_value_t *x,
                                   const kiln_kir_type_t *to) {
  if (!usable(b, &x, 1)) return NULL;
  if (!to || !is_value_type(to) || !is_value_type(x->type))
    return fail(b, "convert: needs scalar/index/vector types");
  if ((x->type->kind == KILN_KIR_TYPE_VECTOR) != (to->kind == KILN_KIR_TYPE_VECTOR) ||
      (to->kind == KILN_KIR_TYPE_VECTOR && to->lanes != x->type->lanes))
    return fail(b, "convert: vector shapes differ");
  if ((to->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_complex(to->elem)) ||
      (x->type->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_complex(x->type->elem)))
    return fail(b, "convert: complex types are not supported");
  return op1(b, KILN_KIR_CONVERT, &x, 1, to, NULL);
}

/* Bit width of a value type's element (index: 64). */
int kiln_kir_type_bits(const kiln_kir_type_t *t) {
  if (t->kind == KILN_KIR_TYPE_INDEX) return 64;
  return kiln_elem_type_bits(t->elem);
}

kiln_kir_value_t *kiln_kir_bitcast(kiln_kir_builder_t *b, kiln_kir_value_t *x,
                                   const kiln_kir_type_t *to) {
  if (!usable(b, &x, 1)) return NULL;
  if (!to || to->kind != x->type->kind || to->kind == KILN_KIR_TYPE_TENSOR ||
      to->kind == KILN_KIR_TYPE_INDEX || kiln_kir_type_bits(to) != kiln_kir_type_bits(x->type) ||
      to->lanes != x->type->lanes)
    return fail(b, "bitcast: needs scalar/vector types of equal width");
  return op1(b, KILN_KIR_BITCAST, &x, 1, to, NULL);
}

static kiln_kir_value_t *gpu_id(kiln_kir_builder_t *b, kiln_kir_opcode_t opc, int axis,
                                int64_t lo, int64_t hi) {
  if (!usable(b, NULL, 0)) return NULL;
  if (axis < 0 || axis > 2) return fail(b, "%s: axis %d not in 0..2", kiln_kir_opcode_name(opc), axis);
  if (lo < 0 || lo > hi) return fail(b, "%s: bad range [%lld, %lld]", kiln_kir_opcode_name(opc),
                                     (long long)lo, (long long)hi);
  kiln_kir_op_t attrs = {0};
  attrs.axis = axis;
  attrs.range_lo = lo;
  attrs.range_hi = hi;
  kiln_kir_value_t *v = op1(b, opc, NULL, 0, kiln_kir_type_index(b->m), &attrs);
  static const char *const kNames[2][3] = {{"th_x", "th_y", "th_z"}, {"bl_x", "bl_y", "bl_z"}};
  v->name = kNames[opc == KILN_KIR_BLOCK_ID][axis];
  return v;
}

kiln_kir_value_t *kiln_kir_thread_id(kiln_kir_builder_t *b, int axis, int64_t lo, int64_t hi) {
  return gpu_id(b, KILN_KIR_THREAD_ID, axis, lo, hi);
}
kiln_kir_value_t *kiln_kir_block_id(kiln_kir_builder_t *b, int axis, int64_t lo, int64_t hi) {
  return gpu_id(b, KILN_KIR_BLOCK_ID, axis, lo, hi);
}

static bool all_index(kiln_kir_value_t *const *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (v[i]->type->kind != KILN_KIR_TYPE_INDEX) return false;
  return true;
}

kiln_kir_op_t *kiln_kir_apply_indexing(kiln_kir_builder_t *b, const kiln_indexing_map_t *map,
                                       kiln_kir_value_t *const *dims, size_t num_dims,
                                       kiln_kir_value_t *const *syms, size_t num_syms) {
  if (!usable(b, dims, num_dims) || !usable(b, syms, num_syms)) return NULL;
  if (!map) return fail(b, "apply_indexing: NULL map");
  if (map->ctx != b->m->ctx) return fail(b, "apply_indexing: map from another affine context");
  if (kiln_indexing_map_num_dims(map) != num_dims || kiln_indexing_map_num_syms(map) != num_syms ||
      kiln_indexing_map_num_rts(map) != 0)
    return fail(b, "apply_indexing: map has %zu dims, %zu symbols, %zu runtime vars; got %zu + %zu "
                "operands", kiln_indexing_map_num_dims(map), kiln_indexing_map_num_syms(map),
                kiln_indexing_map_num_rts(map), num_dims, num_syms);
  if (!all_index(dims, num_dims) || !all_index(syms, num_syms))
    return fail(b, "apply_indexing: operands must be index values");
  kiln_kir_value_t *ops[2 * KILN_KIR_MAX_RANK + 8];
  if (num_dims + num_syms > sizeof(ops) / sizeof(ops[0]))
    return fail(b, "apply_indexing: too many operands");
  for (size_t i = 0; i < num_dims; i++) ops[i] = dims[i];
  for (size_t i = 0; i < num_syms; i++) ops[num_dims + i] = syms[i];
  const kiln_kir_type_t *rt[KILN_KIR_MAX_RANK * 2];
  size_t nres = kiln_indexing_map_num_results(map);
  if (nres > sizeof(rt) / sizeof(rt[0])) return fail(b, "apply_indexing: too many results");
  for (size_t i = 0; i < nres; i++) rt[i] = kiln_kir_type_index(b->m);
  kiln_kir_op_t attrs = {0};
  attrs.map = (kiln_indexing_map_t *)map;
  attrs.num_map_dims = (uint32_t)num_dims;
  return kiln_kir_op_create(b, KILN_KIR_APPLY_INDEXING, ops, num_dims + num_syms, rt, nres, 0,
                            &attrs);
}

kiln_kir_value_t *kiln_kir_apply_indexing1(kiln_kir_builder_t *b, const kiln_indexing_map_t *map,
                                           kiln_kir_value_t *const *dims, size_t num_dims) {
  if (map && kiln_indexing_map_num_results(map) != 1)
    return fail(b, "apply_indexing1: map must have one result");
  kiln_kir_op_t *op = kiln_kir_apply_indexing(b, map, dims, num_dims, NULL, 0);
  return op ? op->results[0] : NULL;
}

kiln_kir_op_t *kiln_kir_loop(kiln_kir_builder_t *b, const kiln_indexing_map_t *map,
                             kiln_kir_value_t *const *dims, size_t num_dims,
                             kiln_kir_value_t *const *inits, size_t num_inits) {
  if (!usable(b, dims, num_dims) || !usable(b, inits, num_inits)) return NULL;
  if (!map) return fail(b, "loop: NULL map");
  if (map->ctx != b->m->ctx) return fail(b, "loop: map from another affine context");
  if (kiln_indexing_map_num_dims(map) != num_dims || kiln_indexing_map_num_rts(map) != 0)
    return fail(b, "loop: map has %zu dims (and %zu runtime vars), got %zu dim operands",
                kiln_indexing_map_num_dims(map), kiln_indexing_map_num_rts(map), num_dims);
  if (!all_index(dims, num_dims)) return fail(b, "loop: dim operands must be index values");
  for (size_t i = 0; i < kiln_indexing_map_num_syms(map); i++) {
    kiln_interval_t iv = map->vars[KILN_INDEXING_SYM].data[i].bounds;
    if (iv.lo == INT64_MIN || iv.hi == INT64_MAX)
      return fail(b, "loop: symbol s%zu is unbounded", i);
  }
  size_t n = num_dims + num_inits;
  kiln_kir_value_t **ops = kiln_arena_alloc(&b->m->arena, sizeof(*ops) * (n + 1));
  if (num_dims) memcpy(ops, dims, sizeof(*ops) * num_dims);
  if (num_inits) memcpy(ops + num_dims, inits, sizeof(*ops) * num_inits);
  const kiln_kir_type_t **rt = kiln_arena_alloc(&b->m->arena, sizeof(*rt) * (num_inits + 1));
  for (size_t i = 0; i < num_inits; i++) rt[i] = inits[i]->type;
  kiln_kir_op_t attrs = {0};
  attrs.map = (kiln_indexing_map_t *)map;
  attrs.num_map_dims = (uint32_t)num_dims;
  kiln_kir_op_t *op = kiln_kir_op_create(b, KILN_KIR_LOOP, ops, n, rt, num_inits, 1, &attrs);
  kiln_kir_region_t *r = op->regions[0];
  kiln_indexing_map_t *mm = op->map;
  for (size_t i = 0; i < kiln_indexing_map_num_syms(mm); i++) {
    kiln_kir_value_t *v = kiln_kir_region_add_arg(b->m, r, kiln_kir_type_index(b->m));
    v->name = mm->vars[KILN_INDEXING_SYM].data[i].name;
  }
  for (size_t i = 0; i < kiln_indexing_map_num_results(mm); i++)
    kiln_kir_region_add_arg(b->m, r, kiln_kir_type_index(b->m));
  for (size_t i = 0; i < num_inits; i++) kiln_kir_region_add_arg(b->m, r, inits[i]->type);
  return op;
}

kiln_kir_region_t *kiln_kir_op_region(kiln_kir_op_t *op, size_t i) {
  return op && i < op->num_regions ? op->regions[i] : NULL;
}
kiln_kir_value_t *kiln_kir_op_result(kiln_kir_op_t *op, size_t i) {
  return op && i < op->num_results ? op->results[i] : NULL;
}
kiln_kir_value_t *kiln_kir_region_arg(kiln_kir_region_t *r, size_t i) {
  return r && i < r->num_args ? r->args[i] : NULL;
}
kiln_kir_value_t *kiln_kir_loop_sym(kiln_kir_op_t *loop, size_t i) {
  if (!loop || i >= kiln_indexing_map_num_syms(loop->map)) return NULL;
  return loop->regions[0]->args[i];
}
kiln_kir_value_t *kiln_kir_loop_index(kiln_kir_op_t *loop, size_t i) {
  if (!loop || i >= kiln_indexing_map_num_results(loop->map)) return NULL;
  return loop->regions[0]->args[kiln_indexing_map_num_syms(loop->map) + i];
}
kiln_kir_value_t *kiln_kir_loop_iter_arg(kiln_kir_op_t *loop, size_t i) {
  if (!loop || i >= loop->num_results) return NULL;
  return loop->regions[0]
      ->args[kiln_indexing_map_num_syms(loop->map) + kiln_indexing_map_num_results(loop->map) + i];
}

kiln_kir_op_t *kiln_kir_for(kiln_kir_builder_t *b, kiln_kir_value_t *lb, kiln_kir_value_t *ub,
                            kiln_kir_value_t *step, kiln_kir_value_t *const *inits,
                            size_t num_inits) {
  kiln_kir_value_t *bounds[3] = {lb, ub, step};
  if (!usable(b, bounds, 3) || !usable(b, inits, num_inits)) return NULL;
  if (!all_index(bounds, 3)) return fail(b, "for: bounds must be index values");
  size_t n = 3 + num_inits;
  kiln_kir_value_t **ops = kiln_arena_alloc(&b->m->arena, sizeof(*ops) * (n + 1));
  memcpy(ops, bounds, sizeof(bounds));
  if (num_inits) memcpy(ops + 3, inits, sizeof(*ops) * num_inits);
  const kiln_kir_type_t **rt = kiln_arena_alloc(&b->m->arena, sizeof(*rt) * (num_inits + 1));
  for (size_t i = 0; i < num_inits; i++) rt[i] = inits[i]->type;
  kiln_kir_op_t *op = kiln_kir_op_create(b, KILN_KIR_FOR, ops, n, rt, num_inits, 1, NULL);
  kiln_kir_region_add_arg(b->m, op->regions[0], kiln_kir_type_index(b->m));
  for (size_t i = 0; i < num_inits; i++)
    kiln_kir_region_add_arg(b->m, op->regions[0], inits[i]->type);
  return op;
}

kiln_kir_op_t *kiln_kir_if(kiln_kir_builder_t *b, kiln_kir_value_t *cond,
                           const kiln_kir_type_t *const *result_types, size_t num_results) {
  if (!usable(b, &cond, 1)) return NULL;
  if (cond->type->kind != KILN_KIR_TYPE_SCALAR || cond->type->elem != KILN_PRED)
    return fail(b, "if: condition must be pred, got %s", tname(b, cond->type));
  for (size_t i = 0; i < num_results; i++)
    if (!result_types[i]) return fail(b, "if: NULL result type");
  return kiln_kir_op_create(b, KILN_KIR_IF, &cond, 1, result_types, num_results, 2, NULL);
}

void kiln_kir_yield(kiln_kir_builder_t *b, kiln_kir_value_t *const *values, size_t n) {
  if (!usable(b, values, n)) return;
  kiln_kir_op_create(b, KILN_KIR_YIELD, values, n, NULL, 0, 0, NULL);
}

void kiln_kir_return(kiln_kir_builder_t *b, kiln_kir_value_t *const *values, size_t n) {
  if (!usable(b, values, n)) return;
  kiln_kir_op_create(b, KILN_KIR_RETURN, values, n, NULL, 0, 0, NULL);
}

kiln_kir_op_t *kiln_kir_call(kiln_kir_builder_t *b, kiln_kir_func_t *callee,
                             kiln_kir_value_t *const *args, size_t num_args) {
  if (!usable(b, args, num_args)) return NULL;
  if (!callee || callee->kind != KILN_KIR_FUNC_SUBGRAPH || callee->module != b->m)
    return fail(b, "call: callee must be a subgraph function of this module");
  if (num_args != callee->body->num_args)
    return fail(b, "call @%s: %zu arguments, expected %u", callee->name, num_args,
                callee->body->num_args);
  for (size_t i = 0; i < num_args; i++)
    if (!kiln_kir_type_equal(args[i]->type, callee->body->args[i]->type))
      return fail(b, "call @%s: argument %zu has type %s, expected %s", callee->name, i,
                  tname(b, args[i]->type), tname(b, callee->body->args[i]->type));
  kiln_kir_op_t attrs = {0};
  attrs.callee = callee;
  return kiln_kir_op_create(b, KILN_KIR_CALL, args, num_args, callee->result_types.data,
                            callee->result_types.len, 0, &attrs);
}

/* Checks `tensor` and n index operands; writes operands [prefix..., tensor, indices...]. */
static kiln_kir_value_t **tensor_operands(kiln_kir_builder_t *b, const char *what,
                                          kiln_kir_value_t *const *prefix, size_t np,
                                          kiln_kir_value_t *tensor,
                                          kiln_kir_value_t *const *indices, size_t n) {
  if (!usable(b, prefix, np) || !usable(b, &tensor, 1) || !usable(b, indices, n)) return NULL;
  if (tensor->type->kind != KILN_KIR_TYPE_TENSOR)
    return fail(b, "%s: not a tensor (%s)", what, tname(b, tensor->type));
  if ((int)n != tensor->type->rank)
    return fail(b, "%s: %zu indices for a rank-%d tensor", what, n, tensor->type->rank);
  if (!all_index(indices, n)) return fail(b, "%s: indices must be index values", what);
  kiln_kir_value_t **ops = kiln_arena_alloc(&b->m->arena, sizeof(*ops) * (np + n + 2));
  for (size_t i = 0; i < np; i++) ops[i] = prefix[i];
  ops[np] = tensor;
  for (size_t i = 0; i < n; i++) ops[np + 1 + i] = indices[i];
  return ops;
}

kiln_kir_value_t *kiln_kir_extract(kiln_kir_builder_t *b, kiln_kir_value_t *tensor,
                                   kiln_kir_value_t *const *indices, size_t n) {
  kiln_kir_value_t **ops = tensor_operands(b, "extract", NULL, 0, tensor, indices, n);
  if (!ops) return NULL;
  return op1(b, KILN_KIR_EXTRACT, ops, n + 1, kiln_kir_type_scalar(b->m, tensor->type->elem),
             NULL);
}

kiln_kir_value_t *kiln_kir_insert(kiln_kir_builder_t *b, kiln_kir_value_t *value,
                                  kiln_kir_value_t *tensor, kiln_kir_value_t *const *indices,
                                  size_t n) {
  kiln_kir_value_t **ops = tensor_operands(b, "insert", &value, 1, tensor, indices, n);
  if (!ops) return NULL;
  if (value->type->kind != KILN_KIR_TYPE_SCALAR || value->type->elem != tensor->type->elem)
    return fail(b, "insert: value type %s does not match %s", tname(b, value->type),
                tname(b, tensor->type));
  return op1(b, KILN_KIR_INSERT, ops, n + 2, tensor->type, NULL);
}

static bool lanes_ok(int lanes) { return lanes >= 1 && lanes <= KILN_KIR_MAX_LANES; }

kiln_kir_value_t *kiln_kir_vload(kiln_kir_builder_t *b, kiln_kir_value_t *tensor,
                                 kiln_kir_value_t *const *indices, size_t n, int lanes) {
  kiln_kir_value_t **ops = tensor_operands(b, "vload", NULL, 0, tensor, indices, n);
  if (!ops) return NULL;
  if (!lanes_ok(lanes) || n == 0) return fail(b, "vload: bad lane count %d or rank 0", lanes);
  return op1(b, KILN_KIR_VLOAD, ops, n + 1, kiln_kir_type_vector(b->m, tensor->type->elem, lanes),
             NULL);
}

kiln_kir_value_t *kiln_kir_vstore(kiln_kir_builder_t *b, kiln_kir_value_t *vec,
                                  kiln_kir_value_t *tensor, kiln_kir_value_t *const *indices,
                                  size_t n) {
  kiln_kir_value_t **ops = tensor_operands(b, "vstore", &vec, 1, tensor, indices, n);
  if (!ops) return NULL;
  if (vec->type->kind != KILN_KIR_TYPE_VECTOR || vec->type->elem != tensor->type->elem || n == 0)
    return fail(b, "vstore: %s does not match %s", tname(b, vec->type), tname(b, tensor->type));
  return op1(b, KILN_KIR_VSTORE, ops, n + 2, tensor->type, NULL);
}

kiln_kir_value_t *kiln_kir_vextract(kiln_kir_builder_t *b, kiln_kir_value_t *vec,
                                    kiln_kir_value_t *lane, int64_t const_lane) {
  if (!usable(b, &vec, 1)) return NULL;
  if (vec->type->kind != KILN_KIR_TYPE_VECTOR) return fail(b, "vextract: not a vector");
  if (!lane && (const_lane < 0 || const_lane >= vec->type->lanes))
    return fail(b, "vextract: lane %lld out of range", (long long)const_lane);
  if (lane && lane->type->kind != KILN_KIR_TYPE_INDEX) return fail(b, "vextract: lane not index");
  kiln_kir_value_t *ops[2] = {vec, lane};
  kiln_kir_op_t attrs = {0};
  attrs.lane = lane ? -1 : const_lane;
  return op1(b, KILN_KIR_VEXTRACT, ops, lane ? 2 : 1, kiln_kir_type_scalar(b->m, vec->type->elem),
             &attrs);
}

kiln_kir_value_t *kiln_kir_vinsert(kiln_kir_builder_t *b, kiln_kir_value_t *value,
                                   kiln_kir_value_t *vec, kiln_kir_value_t *lane,
                                   int64_t const_lane) {
  kiln_kir_value_t *ops[3] = {value, vec, lane};
  if (!usable(b, ops, 2)) return NULL;
  if (vec->type->kind != KILN_KIR_TYPE_VECTOR || value->type->kind != KILN_KIR_TYPE_SCALAR ||
      value->type->elem != vec->type->elem)
    return fail(b, "vinsert: %s into %s", tname(b, value->type), tname(b, vec->type));
  if (!lane && (const_lane < 0 || const_lane >= vec->type->lanes))
    return fail(b, "vinsert: lane %lld out of range", (long long)const_lane);
  if (lane && lane->type->kind != KILN_KIR_TYPE_INDEX) return fail(b, "vinsert: lane not index");
  kiln_kir_op_t attrs = {0};
  attrs.lane = lane ? -1 : const_lane;
  return op1(b, KILN_KIR_VINSERT, ops, lane ? 3 : 2, vec->type, &attrs);
}

kiln_kir_value_t *kiln_kir_alloc_shared(kiln_kir_builder_t *b, kiln_elem_type_t elem, int rank,
                                        const int64_t *dims) {
  if (!usable(b, NULL, 0)) return NULL;
  if (rank < 0 || rank > KILN_KIR_MAX_RANK) return fail(b, "allocate_shared: bad rank %d", rank);
  for (int i = 0; i < rank; i++)
    if (dims[i] <= 0) return fail(b, "allocate_shared: bad dim %lld", (long long)dims[i]);
  const kiln_kir_type_t *t = kiln_kir_type_tensor(b->m, elem, rank, dims, KILN_KIR_SPACE_SHARED);
  return op1(b, KILN_KIR_ALLOC_SHARED, NULL, 0, t, NULL);
}

kiln_kir_op_t *kiln_kir_barrier(kiln_kir_builder_t *b, kiln_kir_value_t *const *tensors,
                                size_t n) {
  if (!usable(b, tensors, n)) return NULL;
  const kiln_kir_type_t **rt = kiln_arena_alloc(&b->m->arena, sizeof(*rt) * (n + 1));
  for (size_t i = 0; i < n; i++) {
    if (tensors[i]->type->kind != KILN_KIR_TYPE_TENSOR) return fail(b, "barrier: not a tensor");
    rt[i] = tensors[i]->type;
  }
  return kiln_kir_op_create(b, KILN_KIR_BARRIER, tensors, n, rt, n, 0, NULL);
}

kiln_kir_value_t *kiln_kir_shuffle(kiln_kir_builder_t *b, kiln_kir_shuffle_mode_t mode,
                                   kiln_kir_value_t *x, int32_t offset, int32_t width) {
  if (!usable(b, &x, 1)) return NULL;
  if (x->type->kind != KILN_KIR_TYPE_SCALAR && x->type->kind != KILN_KIR_TYPE_INDEX)
    return fail(b, "shuffle: needs a scalar");
  if (kiln_kir_type_bits(x->type) > 64) return fail(b, "shuffle: wider than 64 bits");
  if ((unsigned)mode > KILN_KIR_SHUFFLE_IDX || width < 1 || width > 32 || (width & (width - 1)) ||
      offset < 0 || offset >= 32)
    return fail(b, "shuffle: bad mode/offset/width (%d, %d, %d)", (int)mode, offset, width);
  kiln_kir_op_t attrs = {0};
  attrs.shuffle = mode;
  attrs.offset = offset;
  attrs.width = width;
  return op1(b, KILN_KIR_SHUFFLE, &x, 1, x->type, &attrs);
}

kiln_kir_value_t *kiln_kir_atomic_rmw(kiln_kir_builder_t *b, kiln_kir_atomic_t kind,
                                      kiln_kir_value_t *value, kiln_kir_value_t *tensor,
                                      kiln_kir_value_t *const *indices, size_t n) {
  kiln_kir_value_t **ops = tensor_operands(b, "atomic_rmw", &value, 1, tensor, indices, n);
  if (!ops) return NULL;
  if (value->type->kind != KILN_KIR_TYPE_SCALAR || value->type->elem != tensor->type->elem)
    return fail(b, "atomic_rmw: value type does not match the tensor");
  int bits = kiln_elem_type_bits(value->type->elem);
  if ((unsigned)kind > KILN_KIR_ATOMIC_EXCH || (bits != 32 && bits != 64))
    return fail(b, "atomic_rmw: needs a 32- or 64-bit element");
  kiln_kir_op_t attrs = {0};
  attrs.atomic = kind;
  return op1(b, KILN_KIR_ATOMIC_RMW, ops, n + 2, tensor->type, &attrs);
}

kiln_kir_op_t *kiln_kir_atomic_cas_loop(kiln_kir_builder_t *b, kiln_kir_value_t *tensor,
                                        kiln_kir_value_t *const *indices, size_t n) {
  kiln_kir_value_t **ops = tensor_operands(b, "atomic_cas_loop", NULL, 0, tensor, indices, n);
  if (!ops) return NULL;
  int bits = kiln_elem_type_bits(tensor->type->elem);
  if (bits != 16 && bits != 32 && bits != 64)
    return fail(b, "atomic_cas_loop: needs a 16-, 32- or 64-bit element");
  kiln_kir_op_t *op =
      kiln_kir_op_create(b, KILN_KIR_ATOMIC_CAS, ops, n + 1, &tensor->type, 1, 1, NULL);
  kiln_kir_region_add_arg(b->m, op->regions[0], kiln_kir_type_scalar(b->m, tensor->type->elem));
  return op;
}
