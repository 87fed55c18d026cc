/* A small HLO builder for expander passes; see hlo_builder.h. */
#include "compiler/passes/hlo_builder.h"

#include <string.h>

#include "compiler/passes/pass_util.h"

#define MAX_RANK 64

void kiln_builder_init(kiln_builder_t *b, kiln_hlo_computation_t *c, const char *name_hint,
                       bool layouts) {
  memset(b, 0, sizeof *b);
  b->m = c->module;
  b->c = c;
  b->name_hint = name_hint;
  b->layouts = layouts;
}

static void *fail(kiln_builder_t *b) {
  b->failed = true;
  return NULL;
}

kiln_shape_t *kiln_builder_shape(kiln_builder_t *b, kiln_elem_type_t type, int rank,
                                 const int64_t *dims) {
  kiln_shape_t *s = b->layouts ? kiln_shape_make_array_with_default_layout(&b->m->arena, type, rank, dims)
                               : kiln_shape_make_array(&b->m->arena, type, rank, dims);
  return s ? s : fail(b);
}

kiln_hlo_instruction_t *kiln_builder_op(kiln_builder_t *b, kiln_hlo_opcode_t op, kiln_shape_t *shape,
                                        int n, kiln_hlo_instruction_t *const *operands) {
  if (!shape) return fail(b);
  for (int i = 0; i < n; i++)
    if (!operands[i]) return fail(b);
  char *name = kiln_hlo_module_unique_name(b->m, b->name_hint ? b->name_hint : kiln_hlo_opcode_name(op));
  kiln_hlo_instruction_t *in = name ? kiln_hlo_instruction_create(b->c, op, shape, name) : NULL;
  if (!in) return fail(b);
  if (n) kiln_hlo_instruction_set_operands(in, n, operands);
  return in;
}

static kiln_hlo_instruction_t *constant(kiln_builder_t *b, kiln_elem_type_t type, bool is_float,
                                        uint64_t u, double f) {
  kiln_shape_t *s = kiln_builder_shape(b, type, 0, NULL);
  if (!s) return NULL;
  kiln_literal_t *l = kiln_literal_make(&b->m->arena, s);
  if (!l) return fail(b);
  if (is_float) kiln_literal_set_f64(l, 0, f);
  else kiln_literal_set_u64(l, 0, u);
  kiln_hlo_instruction_t *in = kiln_builder_op(b, KILN_OP_CONSTANT, s, 0, NULL);
  if (in) in->literal = l;
  return in;
}

kiln_hlo_instruction_t *kiln_builder_const_u64(kiln_builder_t *b, kiln_elem_type_t type, uint64_t v) {
  return constant(b, type, false, v, 0);
}

kiln_hlo_instruction_t *kiln_builder_const_f64(kiln_builder_t *b, kiln_elem_type_t type, double v) {
  return constant(b, type, true, 0, v);
}

/* The dims of x with element type `type`. */
static kiln_shape_t *like(kiln_builder_t *b, const kiln_hlo_instruction_t *x, kiln_elem_type_t type) {
  if (!x || !kiln_shape_is_array(x->shape)) return fail(b);
  return kiln_builder_shape(b, type, x->shape->rank, x->shape->dims);
}

kiln_hlo_instruction_t *kiln_builder_unary(kiln_builder_t *b, kiln_hlo_opcode_t op,
                                           kiln_hlo_instruction_t *x) {
  if (!x) return fail(b);
  return kiln_builder_op(b, op, like(b, x, x->shape->type), 1, &x);
}

kiln_hlo_instruction_t *kiln_builder_binary(kiln_builder_t *b, kiln_hlo_opcode_t op,
                                            kiln_hlo_instruction_t *x, kiln_hlo_instruction_t *y) {
  if (!x || !y) return fail(b);
  kiln_hlo_instruction_t *ops[2] = {x, y};
  return kiln_builder_op(b, op, like(b, x, x->shape->type), 2, ops);
}

kiln_hlo_instruction_t *kiln_builder_compare(kiln_builder_t *b, kiln_cmp_dir_t dir,
                                             kiln_hlo_instruction_t *x, kiln_hlo_instruction_t *y) {
  if (!x || !y) return fail(b);
  kiln_hlo_instruction_t *ops[2] = {x, y};
  kiln_hlo_instruction_t *in = kiln_builder_op(b, KILN_OP_COMPARE, like(b, x, KILN_PRED), 2, ops);
  if (in) in->comparison_direction = dir;
  return in;
}

kiln_hlo_instruction_t *kiln_builder_select(kiln_builder_t *b, kiln_hlo_instruction_t *pred,
                                            kiln_hlo_instruction_t *on_true,
                                            kiln_hlo_instruction_t *on_false) {
  if (!pred || !on_true || !on_false) return fail(b);
  kiln_hlo_instruction_t *ops[3] = {pred, on_true, on_false};
  return kiln_builder_op(b, KILN_OP_SELECT, like(b, on_true, on_true->shape->type), 3, ops);
}

kiln_hlo_instruction_t *kiln_builder_convert(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                             kiln_elem_type_t type) {
  return kiln_builder_op(b, KILN_OP_CONVERT, like(b, x, type), 1, &x);
}

kiln_hlo_instruction_t *kiln_builder_bitcast_convert(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                     kiln_elem_type_t type) {
  return kiln_builder_op(b, KILN_OP_BITCAST_CONVERT, like(b, x, type), 1, &x);
}

static bool set_dimensions(kiln_builder_t *b, kiln_hlo_instruction_t *in, int n, const int64_t *v) {
  in->has_dimensions = true;
  in->dimensions.n = n;
  in->dimensions.v = kiln_arena_alloc(&b->m->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!in->dimensions.v) return fail(b), false;
  if (n > 0 && v) memcpy(in->dimensions.v, v, sizeof(int64_t) * (size_t)n);
  return true;
}

kiln_hlo_instruction_t *kiln_builder_broadcast(kiln_builder_t *b, kiln_hlo_instruction_t *x, int rank,
                                               const int64_t *dims, const int64_t *map) {
  if (!x) return fail(b);
  kiln_hlo_instruction_t *in =
      kiln_builder_op(b, KILN_OP_BROADCAST, kiln_builder_shape(b, x->shape->type, rank, dims), 1, &x);
  if (in && !set_dimensions(b, in, x->shape->rank, map)) return NULL;
  return in;
}

kiln_hlo_instruction_t *kiln_builder_splat(kiln_builder_t *b, kiln_hlo_instruction_t *scalar,
                                           const kiln_hlo_instruction_t *like_this) {
  if (!scalar || !like_this || scalar->shape->rank != 0) return fail(b);
  if (like_this->shape->rank == 0) return scalar;
  return kiln_builder_broadcast(b, scalar, like_this->shape->rank, like_this->shape->dims, NULL);
}

kiln_hlo_instruction_t *kiln_builder_reshape(kiln_builder_t *b, kiln_hlo_instruction_t *x, int rank,
                                             const int64_t *dims) {
  if (!x) return fail(b);
  return kiln_builder_op(b, KILN_OP_RESHAPE, kiln_builder_shape(b, x->shape->type, rank, dims), 1, &x);
}

kiln_hlo_instruction_t *kiln_builder_slice_dim(kiln_builder_t *b, kiln_hlo_instruction_t *x, int dim,
                                               int64_t start, int64_t limit) {
  if (!x || dim < 0 || dim >= x->shape->rank || x->shape->rank > MAX_RANK) return fail(b);
  int r = x->shape->rank;
  int64_t dims[MAX_RANK];
  for (int d = 0; d < r; d++) dims[d] = d == dim ? limit - start : x->shape->dims[d];
  kiln_hlo_instruction_t *in =
      kiln_builder_op(b, KILN_OP_SLICE, kiln_builder_shape(b, x->shape->type, r, dims), 1, &x);
  if (!in) return NULL;
  in->slice = kiln_arena_alloc(&b->m->arena, sizeof(kiln_slice_dim_t) * (size_t)r);
  if (!in->slice) return fail(b);
  in->num_slice_dims = r;
  for (int d = 0; d < r; d++) {
    in->slice[d].start = d == dim ? start : 0;
    in->slice[d].limit = d == dim ? limit : x->shape->dims[d];
    in->slice[d].stride = 1;
  }
  return in;
}

kiln_hlo_instruction_t *kiln_builder_pad(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                         kiln_hlo_instruction_t *value, const int64_t *lo,
                                         const int64_t *hi, const int64_t *interior) {
  if (!x || !value || x->shape->rank > MAX_RANK) return fail(b);
  int r = x->shape->rank;
  int64_t dims[MAX_RANK];
  for (int d = 0; d < r; d++)
    dims[d] = lo[d] + hi[d] + x->shape->dims[d] +
              (x->shape->dims[d] ? (x->shape->dims[d] - 1) * interior[d] : 0);
  kiln_hlo_instruction_t *ops[2] = {x, value};
  kiln_hlo_instruction_t *p =
      kiln_builder_op(b, KILN_OP_PAD, kiln_builder_shape(b, x->shape->type, r, dims), 2, ops);
  kiln_pad_dim_t *pd =
      p ? kiln_arena_alloc(&b->m->arena, sizeof(kiln_pad_dim_t) * (size_t)r) : NULL;
  if (!pd) return fail(b);
  for (int d = 0; d < r; d++) pd[d] = (kiln_pad_dim_t){lo[d], hi[d], interior[d]};
  p->padding = pd;
  p->num_pad_dims = r;
  return p;
}

kiln_hlo_instruction_t *kiln_builder_strided_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                   const int64_t *start, const int64_t *count,
                                                   const int64_t *stride) {
  if (!x) return fail(b);
  int r = x->shape->rank;
  kiln_hlo_instruction_t *s =
      kiln_builder_op(b, KILN_OP_SLICE, kiln_builder_shape(b, x->shape->type, r, count), 1, &x);
  kiln_slice_dim_t *sd =
      s ? kiln_arena_alloc(&b->m->arena, sizeof(kiln_slice_dim_t) * (size_t)r) : NULL;
  if (!sd) return fail(b);
  for (int d = 0; d < r; d++)
    sd[d] = (kiln_slice_dim_t){
        start[d], count[d] ? start[d] + (count[d] - 1) * stride[d] + 1 : start[d], stride[d]};
  s->slice = sd;
  s->num_slice_dims = r;
  return s;
}

kiln_hlo_instruction_t *kiln_builder_slice1(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                            int64_t start, int64_t limit) {
  return kiln_builder_slice_dim(b, x, 0, start, limit);
}

bool kiln_builder_list(kiln_builder_t *b, kiln_i64_list_t *l, int n, const int64_t *v) {
  l->n = n;
  l->v = kiln_arena_alloc(&b->m->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!l->v) {
    b->failed = true;
    return false;
  }
  if (n) memcpy(l->v, v, sizeof(int64_t) * (size_t)n);
  return true;
}

kiln_hlo_instruction_t *kiln_builder_iota(kiln_builder_t *b, kiln_elem_type_t type, int rank,
                                          const int64_t *dims, int dim) {
  kiln_hlo_instruction_t *in = kiln_builder_op(b, KILN_OP_IOTA, kiln_builder_shape(b, type, rank, dims), 0, NULL);
  if (in) in->iota_dimension = dim;
  return in;
}

kiln_hlo_instruction_t *kiln_builder_tuple(kiln_builder_t *b, int n, kiln_hlo_instruction_t *const *xs) {
  kiln_shape_t *shapes[MAX_RANK];
  if (n > MAX_RANK) return fail(b);
  for (int i = 0; i < n; i++) {
    if (!xs[i]) return fail(b);
    shapes[i] = xs[i]->shape;
  }
  kiln_shape_t *s = kiln_shape_make_tuple(&b->m->arena, n, shapes);
  return kiln_builder_op(b, KILN_OP_TUPLE, s, n, xs);
}

kiln_hlo_instruction_t *kiln_builder_gte(kiln_builder_t *b, kiln_hlo_instruction_t *t, int64_t index) {
  if (!t || !kiln_shape_is_tuple(t->shape) || index < 0 || index >= t->shape->num_elements)
    return fail(b);
  kiln_hlo_instruction_t *in =
      kiln_builder_op(b, KILN_OP_GET_TUPLE_ELEMENT, t->shape->elements[index], 1, &t);
  if (in) in->tuple_index = index;
  return in;
}

kiln_hlo_instruction_t *kiln_builder_reduce(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                            kiln_hlo_instruction_t *init, int num_dims,
                                            const int64_t *dims, kiln_hlo_computation_t *fn) {
  if (!x || !init || !fn || x->shape->rank > MAX_RANK) return fail(b);
  int64_t kept[MAX_RANK];
  int r = 0;
  for (int d = 0; d < x->shape->rank; d++) {
    bool reduced = false;
    for (int k = 0; k < num_dims; k++) reduced |= dims[k] == d;
    if (!reduced) kept[r++] = x->shape->dims[d];
  }
  kiln_hlo_instruction_t *ops[2] = {x, init};
  kiln_hlo_instruction_t *in =
      kiln_builder_op(b, KILN_OP_REDUCE, kiln_builder_shape(b, x->shape->type, r, kept), 2, ops);
  if (!in || !set_dimensions(b, in, num_dims, dims)) return NULL;
  kiln_hlo_instruction_add_called(in, "to_apply", false, 1, &fn);
  return in;
}

static kiln_elem_type_t component_type(kiln_elem_type_t t) {
  return t == KILN_C128 ? KILN_F64 : t == KILN_C64 ? KILN_F32 : t;
}

kiln_hlo_instruction_t *kiln_builder_real(kiln_builder_t *b, kiln_hlo_instruction_t *x) {
  if (!x) return fail(b);
  return kiln_builder_op(b, KILN_OP_REAL, like(b, x, component_type(x->shape->type)), 1, &x);
}

kiln_hlo_instruction_t *kiln_builder_imag(kiln_builder_t *b, kiln_hlo_instruction_t *x) {
  if (!x) return fail(b);
  return kiln_builder_op(b, KILN_OP_IMAG, like(b, x, component_type(x->shape->type)), 1, &x);
}

kiln_hlo_instruction_t *kiln_builder_complex(kiln_builder_t *b, kiln_hlo_instruction_t *re,
                                             kiln_hlo_instruction_t *im) {
  if (!re || !im) return fail(b);
  kiln_hlo_instruction_t *ops[2] = {re, im};
  kiln_elem_type_t t = re->shape->type == KILN_F64 ? KILN_C128 : KILN_C64;
  return kiln_builder_op(b, KILN_OP_COMPLEX, like(b, re, t), 2, ops);
}

kiln_hlo_instruction_t *kiln_builder_conj(kiln_builder_t *b, kiln_hlo_instruction_t *x) {
  if (!x || !kiln_elem_type_is_complex(x->shape->type)) return x ? x : fail(b);
  return kiln_builder_complex(b, kiln_builder_real(b, x), kiln_builder_unary(b, KILN_OP_NEGATE, kiln_builder_imag(b, x)));
}

kiln_hlo_instruction_t *kiln_builder_transpose(kiln_builder_t *b, kiln_hlo_instruction_t *x, const int64_t *perm) {
  if (!x || x->shape->rank > MAX_RANK) return fail(b);
  int64_t dims[MAX_RANK];
  for (int d = 0; d < x->shape->rank; d++) dims[d] = x->shape->dims[perm[d]];
  kiln_hlo_instruction_t *in =
      kiln_builder_op(b, KILN_OP_TRANSPOSE, kiln_builder_shape(b, x->shape->type, x->shape->rank, dims), 1, &x);
  if (in && !set_dimensions(b, in, x->shape->rank, perm)) return NULL;
  return in;
}

kiln_hlo_instruction_t *kiln_builder_reverse(kiln_builder_t *b, kiln_hlo_instruction_t *x, int num_dims,
                                             const int64_t *dims) {
  if (!x) return fail(b);
  kiln_hlo_instruction_t *in = kiln_builder_op(b, KILN_OP_REVERSE, like(b, x, x->shape->type), 1, &x);
  if (in && !set_dimensions(b, in, num_dims, dims)) return NULL;
  return in;
}

kiln_hlo_instruction_t *kiln_builder_dynamic_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                   kiln_hlo_instruction_t *const *starts, const int64_t *sizes) {
  if (!x || x->shape->rank > MAX_RANK - 1) return fail(b);
  int r = x->shape->rank;
  kiln_hlo_instruction_t *ops[MAX_RANK];
  ops[0] = x;
  for (int d = 0; d < r; d++) ops[1 + d] = starts[d];
  kiln_hlo_instruction_t *in =
      kiln_builder_op(b, KILN_OP_DYNAMIC_SLICE, kiln_builder_shape(b, x->shape->type, r, sizes), 1 + r, ops);
  if (!in) return NULL;
  in->dynamic_slice_sizes.n = r;
  in->dynamic_slice_sizes.v = kiln_arena_alloc(&b->m->arena, sizeof(int64_t) * (size_t)(r ? r : 1));
  if (!in->dynamic_slice_sizes.v) return fail(b);
  if (r) memcpy(in->dynamic_slice_sizes.v, sizes, sizeof(int64_t) * (size_t)r);
  return in;
}

kiln_hlo_instruction_t *kiln_builder_dynamic_update_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                          kiln_hlo_instruction_t *update,
                                                          kiln_hlo_instruction_t *const *starts) {
  if (!x || x->shape->rank > MAX_RANK - 2) return fail(b);
  int r = x->shape->rank;
  kiln_hlo_instruction_t *ops[MAX_RANK];
  ops[0] = x;
  ops[1] = update;
  for (int d = 0; d < r; d++) ops[2 + d] = starts[d];
  return kiln_builder_op(b, KILN_OP_DYNAMIC_UPDATE_SLICE, like(b, x, x->shape->type), 2 + r, ops);
}

kiln_hlo_instruction_t *kiln_builder_set_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                               kiln_hlo_instruction_t *update, int dim, kiln_hlo_instruction_t *index) {
  if (!x || !update || !index || dim < 0 || dim >= x->shape->rank || x->shape->rank > MAX_RANK) return fail(b);
  int r = x->shape->rank;
  if (kiln_elem_type_is_complex(x->shape->type)) {
    int64_t map[MAX_RANK];
    for (int d = 0, k = 0; d < r; d++)
      if (d != dim) map[k++] = d;
    kiln_hlo_instruction_t *at = kiln_builder_iota(b, KILN_S32, r, x->shape->dims, dim);
    return kiln_builder_select(b, kiln_builder_compare(b, KILN_CMP_EQ, at, kiln_builder_splat(b, index, at)),
                               kiln_builder_broadcast(b, update, r, x->shape->dims, map), x);
  }
  int64_t dims[MAX_RANK];
  kiln_hlo_instruction_t *starts[MAX_RANK];
  kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, KILN_S32, 0);
  for (int d = 0; d < r; d++) {
    dims[d] = d == dim ? 1 : x->shape->dims[d];
    starts[d] = d == dim ? index : zero;
  }
  return kiln_builder_dynamic_update_slice(b, x, kiln_builder_reshape(b, update, r, dims), starts);
}

kiln_hlo_instruction_t *kiln_builder_result(kiln_builder_t *b, kiln_shape_t *shape, int n,
                                            kiln_hlo_instruction_t *const *vals) {
  bool tuple = shape->type == KILN_TUPLE;
  if (n < 1 || n > 64 || (tuple ? shape->num_elements != n : n != 1)) return fail(b);
  kiln_hlo_instruction_t *copies[64];
  for (int i = 0; i < n; i++) {
    copies[i] = kiln_builder_unary(b, KILN_OP_COPY, vals[i]);
    if (copies[i]) copies[i]->shape = tuple ? shape->elements[i] : shape;
  }
  if (!tuple) return copies[0];
  kiln_hlo_instruction_t *t = kiln_builder_tuple(b, n, copies);
  if (t) t->shape = shape;
  return t;
}

kiln_hlo_instruction_t *kiln_builder_while(kiln_builder_t *b, kiln_hlo_instruction_t *init,
                                           kiln_hlo_computation_t *cond, kiln_hlo_computation_t *body) {
  if (!init || !cond || !body) return fail(b);
  kiln_hlo_instruction_t *in = kiln_builder_op(b, KILN_OP_WHILE, init->shape, 1, &init);
  if (!in) return NULL;
  kiln_hlo_instruction_add_called(in, "condition", false, 1, &cond);
  kiln_hlo_instruction_add_called(in, "body", false, 1, &body);
  return in;
}

kiln_hlo_instruction_t *kiln_builder_sum(kiln_builder_t *b, kiln_hlo_instruction_t *x, int num_dims,
                                         const int64_t *dims, kiln_hlo_computation_t *add) {
  if (!x) return fail(b);
  if (!kiln_elem_type_is_complex(x->shape->type))
    return kiln_builder_reduce(b, x, kiln_builder_const_f64(b, x->shape->type, 0), num_dims, dims, add);
  kiln_hlo_instruction_t *re = kiln_builder_real(b, x), *im = kiln_builder_imag(b, x);
  if (!re) return NULL;
  kiln_hlo_instruction_t *zero = kiln_builder_const_f64(b, re->shape->type, 0);
  return kiln_builder_complex(b, kiln_builder_reduce(b, re, zero, num_dims, dims, add),
                              kiln_builder_reduce(b, im, zero, num_dims, dims, add));
}

kiln_hlo_computation_t *kiln_builder_computation_n(kiln_hlo_module_t *m, const char *name_hint,
                                                   const char *param_hint, int n,
                                                   kiln_shape_t *const *shapes,
                                                   kiln_hlo_instruction_t **params) {
  char *name = kiln_hlo_module_unique_name(m, name_hint);
  kiln_hlo_computation_t *c = name ? kiln_hlo_computation_create(m, name) : NULL;
  kiln_hlo_instruction_t **ps = kiln_arena_alloc(&m->arena, sizeof *ps * (size_t)(n ? n : 1));
  if (!c || !ps) return NULL;
  for (int i = 0; i < n; i++) {
    char *pn = kiln_hlo_module_unique_name(m, param_hint);
    ps[i] =
        pn && shapes[i] ? kiln_hlo_instruction_create(c, KILN_OP_PARAMETER, shapes[i], pn) : NULL;
    if (!ps[i]) return NULL;
    ps[i]->parameter_number = i;
    params[i] = ps[i];
  }
  c->num_parameters = n;
  c->parameters = ps;
  return c;
}

kiln_hlo_computation_t *kiln_builder_computation(kiln_hlo_module_t *m, const char *name_hint,
                                                 kiln_shape_t *param_shape,
                                                 kiln_hlo_instruction_t **param) {
  *param = NULL;
  return kiln_builder_computation_n(m, name_hint, "param", 1, &param_shape, param);
}

kiln_hlo_computation_t *kiln_builder_counter_below(kiln_hlo_module_t *m, const char *name_hint, kiln_shape_t *state,
                                                   int64_t n, bool layouts) {
  kiln_hlo_instruction_t *p = NULL;
  kiln_hlo_computation_t *c = kiln_builder_computation(m, name_hint, state, &p);
  if (!c) return NULL;
  kiln_builder_t b;
  kiln_builder_init(&b, c, NULL, layouts);
  c->root = kiln_builder_compare(&b, KILN_CMP_LT, kiln_builder_gte(&b, p, 0), kiln_builder_const_u64(&b, KILN_S32, (uint64_t)n));
  return b.failed ? NULL : c;
}

kiln_hlo_computation_t *kiln_builder_scalar_computation(kiln_hlo_module_t *m, const char *name_hint,
                                                        kiln_hlo_opcode_t op, kiln_elem_type_t type) {
  char *name = kiln_hlo_module_unique_name(m, name_hint);
  kiln_hlo_computation_t *c = name ? kiln_hlo_computation_create(m, name) : NULL;
  kiln_shape_t *s = kiln_shape_make_scalar(&m->arena, type);
  kiln_hlo_instruction_t **params = kiln_arena_alloc(&m->arena, 2 * sizeof *params);
  if (!c || !s || !params) return NULL;
  static const char *const pnames[2] = {"lhs", "rhs"};
  for (int i = 0; i < 2; i++) {
    char *pn = kiln_hlo_module_unique_name(m, pnames[i]);
    params[i] = pn ? kiln_hlo_instruction_create(c, KILN_OP_PARAMETER, s, pn) : NULL;
    if (!params[i]) return NULL;
    params[i]->parameter_number = i;
  }
  c->num_parameters = 2;
  c->parameters = params;
  char *rn = kiln_hlo_module_unique_name(m, kiln_hlo_opcode_name(op));
  kiln_hlo_instruction_t *root = rn ? kiln_hlo_instruction_create(c, op, s, rn) : NULL;
  if (!root) return NULL;
  kiln_hlo_instruction_set_operands(root, 2, params);
  c->root = root;
  return c;
}

static bool has_layout(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) return s->num_elements > 0 && has_layout(s->elements[0]);
  return s->has_layout;
}

kiln_status kiln_builder_expand_all(kiln_hlo_module_t *m, kiln_hlo_opcode_t op, kiln_builder_expand_fn expand,
                                    void *ctx, const char *pass_name, bool *changed) {
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  kiln_status st = NULL;
  size_t num_comps = m->computations.len;
  for (size_t ci = 0; ci < num_comps && !st; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    /* collect first: expansions append to the instruction list */
    KILN_VEC(kiln_hlo_instruction_t *) worklist = {0};
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_hlo_instruction_t *in = c->instructions.data[i];
      if (in->opcode == op && !in->num_control_predecessors && !in->control_successors.len)
        kiln_vec_push(&worklist, in);
    }
    bool any = false;
    for (size_t i = 0; i < worklist.len && !st; i++) {
      kiln_hlo_instruction_t *in = worklist.data[i];
      kiln_builder_t b;
      kiln_builder_init(&b, c, NULL, has_layout(in->shape));
      kiln_hlo_instruction_t *r = expand(&b, in, ctx);
      if (b.failed) {
        st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "%s: out of memory expanding '%s'", pass_name, in->name);
      } else if (r) {
        kiln_pass_replace_instruction(in, r, &effects);
        any = true;
      }
    }
    if (any) {
      kiln_hlo_computation_sort_post_order(c);
      *changed = true;
    }
    kiln_vec_free(&worklist);
  }
  kiln_pass_effects_free(&effects);
  return st;
}
