/* Kernel IR verifier (see kiln_kir_verify in kir.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compiler/codegen/kir.h"

typedef struct verifier {
  const kiln_kir_module_t *m;
  const kiln_kir_func_t *f;
  uint8_t *visible;                /* by value id: defined and in scope */
  const kiln_kir_value_t **root;   /* by value id: the buffer a tensor value comes from */
  kiln_status status;
} verifier_t;

static bool err(verifier_t *v, const kiln_kir_op_t *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool err(verifier_t *v, const kiln_kir_op_t *op, const char *fmt, ...) {
  if (v->status) return false;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  v->status = kiln_status_make(KILN_INVALID_ARGUMENT, "kir verify: @%s: %s%s%s",
                               v->f ? v->f->name : "?", op ? kiln_kir_opcode_name(op->opcode) : "",
                               op ? ": " : "", msg);
  return false;
}

static bool is_kind(const kiln_kir_value_t *x, kiln_kir_type_kind_t k) {
  return x && x->type && x->type->kind == k;
}
static bool is_pred(const kiln_kir_value_t *x) {
  return is_kind(x, KILN_KIR_TYPE_SCALAR) && x->type->elem == KILN_PRED;
}

static const kiln_kir_value_t *root_of(verifier_t *v, const kiln_kir_value_t *x) {
  return v->root[x->id] ? v->root[x->id] : x;
}
static void set_root(verifier_t *v, const kiln_kir_value_t *x, const kiln_kir_value_t *from) {
  if (x->type->kind == KILN_KIR_TYPE_TENSOR) v->root[x->id] = root_of(v, from);
}

static bool check_region(verifier_t *v, const kiln_kir_region_t *r, kiln_kir_opcode_t term,
                         const kiln_kir_type_t *const *types, size_t ntypes);

static bool check_tensor_access(verifier_t *v, const kiln_kir_op_t *op, size_t first) {
  const kiln_kir_value_t *t = op->operands[first];
  if (!is_kind(t, KILN_KIR_TYPE_TENSOR)) return err(v, op, "operand %zu is not a tensor", first);
  if ((int)(op->num_operands - first - 1) != t->type->rank)
    return err(v, op, "%u indices for rank %d", op->num_operands - (uint32_t)first - 1,
               t->type->rank);
  for (uint32_t i = (uint32_t)first + 1; i < op->num_operands; i++)
    if (!is_kind(op->operands[i], KILN_KIR_TYPE_INDEX)) return err(v, op, "index %u not index", i);
  return true;
}

static bool check_op(verifier_t *v, const kiln_kir_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const kiln_kir_value_t *x = op->operands[i];
    if (!x || !x->type) return err(v, op, "operand %u is NULL", i);
    if (x->id >= v->m->next_value_id || !v->visible[x->id])
      return err(v, op, "operand %u (value %u) is not defined before its use", i, x->id);
  }
  for (uint32_t i = 0; i < op->num_results; i++)
    if (!op->results[i] || !op->results[i]->type) return err(v, op, "result %u has no type", i);
  kiln_kir_value_t *const *a = op->operands;
  uint32_t n = op->num_operands;
  const kiln_kir_type_t *rt = op->num_results ? op->results[0]->type : NULL;
  switch (op->opcode) {
    case KILN_KIR_CONSTANT:
      if (n || op->num_results != 1 || rt->kind == KILN_KIR_TYPE_TENSOR)
        return err(v, op, "malformed constant");
      break;
    case KILN_KIR_IS_FINITE:
    case KILN_KIR_VSPLAT:
    case KILN_KIR_CONVERT:
    case KILN_KIR_BITCAST:
      if (n != 1 || op->num_results != 1) return err(v, op, "needs one operand and one result");
      if (op->opcode != KILN_KIR_CONVERT && op->opcode != KILN_KIR_BITCAST) break;
      if (a[0]->type->kind == KILN_KIR_TYPE_TENSOR || rt->kind == KILN_KIR_TYPE_TENSOR)
        return err(v, op, "cannot convert tensors");
      if ((a[0]->type->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_complex(a[0]->type->elem)) ||
          (rt->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_complex(rt->elem)))
        return err(v, op, "complex types are not supported by the kernel IR");
      break;
    case KILN_KIR_CMP:
      if (n != 2 || !kiln_kir_type_equal(a[0]->type, a[1]->type))
        return err(v, op, "operands must have one type");
      break;
    case KILN_KIR_SELECT:
      if (n != 3 || !is_pred(a[0]) || !kiln_kir_type_equal(a[1]->type, a[2]->type) ||
          !kiln_kir_type_equal(a[1]->type, rt))
        return err(v, op, "needs pred, T, T -> T");
      set_root(v, op->results[0], a[1]);
      break;
    case KILN_KIR_THREAD_ID:
    case KILN_KIR_BLOCK_ID: {
      if (op->axis < 0 || op->axis > 2) return err(v, op, "bad axis");
      const kiln_kir_func_t *f = v->f;
      if (f->kind == KILN_KIR_FUNC_KERNEL) {
        int64_t lim = op->opcode == KILN_KIR_THREAD_ID ? f->block[op->axis] : f->grid[op->axis];
        if (op->range_lo < 0 || op->range_hi >= lim)
          return err(v, op, "range [%lld, %lld] outside the launch dimension %lld",
                     (long long)op->range_lo, (long long)op->range_hi, (long long)lim);
      }
      break;
    }
    case KILN_KIR_APPLY_INDEXING:
      if (!op->map || op->num_map_dims != kiln_indexing_map_num_dims(op->map) ||
          n != op->num_map_dims + kiln_indexing_map_num_syms(op->map) ||
          op->num_results != kiln_indexing_map_num_results(op->map))
        return err(v, op, "operands/results do not match the map");
      break;
    case KILN_KIR_LOOP: {
      if (!op->map || op->num_map_dims != kiln_indexing_map_num_dims(op->map) ||
          n != op->num_map_dims + op->num_results || op->num_regions != 1)
        return err(v, op, "operands/results do not match the map");
      const kiln_kir_region_t *r = op->regions[0];
      size_t nsyms = kiln_indexing_map_num_syms(op->map);
      size_t nres = kiln_indexing_map_num_results(op->map);
      if (r->num_args != nsyms + nres + op->num_results)
        return err(v, op, "body has %u arguments, expected %zu", r->num_args,
                   nsyms + nres + op->num_results);
      const kiln_kir_type_t **tys = kiln_calloc(op->num_results + 1, sizeof(*tys));
      for (uint32_t i = 0; i < op->num_results; i++) {
        tys[i] = op->results[i]->type;
        if (!kiln_kir_type_equal(a[op->num_map_dims + i]->type, tys[i]))
          return kiln_free(tys), err(v, op, "init %u type differs from result", i);
        set_root(v, r->args[nsyms + nres + i], a[op->num_map_dims + i]);
        set_root(v, op->results[i], a[op->num_map_dims + i]);
      }
      bool ok = check_region(v, r, KILN_KIR_YIELD, tys, op->num_results);
      kiln_free(tys);
      if (!ok) return false;
      break;
    }
    case KILN_KIR_FOR: {
      if (n != 3 + op->num_results || op->num_regions != 1) return err(v, op, "malformed for");
      for (int i = 0; i < 3; i++)
        if (!is_kind(a[i], KILN_KIR_TYPE_INDEX)) return err(v, op, "bounds must be index");
      const kiln_kir_region_t *r = op->regions[0];
      if (r->num_args != 1 + op->num_results) return err(v, op, "body argument count");
      const kiln_kir_type_t **tys = kiln_calloc(op->num_results + 1, sizeof(*tys));
      for (uint32_t i = 0; i < op->num_results; i++) {
        tys[i] = op->results[i]->type;
        if (!kiln_kir_type_equal(a[3 + i]->type, tys[i]) ||
            !kiln_kir_type_equal(r->args[1 + i]->type, tys[i]))
          return kiln_free(tys), err(v, op, "iteration argument %u types differ", i);
        set_root(v, r->args[1 + i], a[3 + i]);
        set_root(v, op->results[i], a[3 + i]);
      }
      bool ok = check_region(v, r, KILN_KIR_YIELD, tys, op->num_results);
      kiln_free(tys);
      if (!ok) return false;
      break;
    }
    case KILN_KIR_IF: {
      if (n != 1 || !is_pred(a[0]) || op->num_regions != 2) return err(v, op, "malformed if");
      const kiln_kir_type_t **tys = kiln_calloc(op->num_results + 1, sizeof(*tys));
      for (uint32_t i = 0; i < op->num_results; i++) tys[i] = op->results[i]->type;
      bool ok = check_region(v, op->regions[0], KILN_KIR_YIELD, tys, op->num_results) &&
                check_region(v, op->regions[1], KILN_KIR_YIELD, tys, op->num_results);
      kiln_free(tys);
      if (!ok) return false;
      for (uint32_t i = 0; i < op->num_results; i++) {
        const kiln_kir_region_t *t = op->regions[0], *e = op->regions[1];
        const kiln_kir_op_t *ty = t->ops.data[t->ops.len - 1], *ey = e->ops.data[e->ops.len - 1];
        if (op->results[i]->type->kind == KILN_KIR_TYPE_TENSOR) {
          if (root_of(v, ty->operands[i]) != root_of(v, ey->operands[i]))
            return err(v, op, "tensor result %u comes from different buffers in then/else", i);
          set_root(v, op->results[i], ty->operands[i]);
        }
      }
      break;
    }
    case KILN_KIR_CALL: {
      const kiln_kir_func_t *c = op->callee;
      if (!c || c->module != v->m || c->kind != KILN_KIR_FUNC_SUBGRAPH)
        return err(v, op, "callee is not a subgraph function of the module");
      if (n != c->body->num_args || op->num_results != c->result_types.len)
        return err(v, op, "@%s: argument/result counts differ", c->name);
      for (uint32_t i = 0; i < n; i++)
        if (!kiln_kir_type_equal(a[i]->type, c->body->args[i]->type))
          return err(v, op, "@%s: argument %u type differs", c->name, i);
      for (uint32_t i = 0; i < op->num_results; i++)
        if (!kiln_kir_type_equal(op->results[i]->type, c->result_types.data[i]) ||
            op->results[i]->type->kind == KILN_KIR_TYPE_TENSOR)
          return err(v, op, "@%s: result %u type differs (or is a tensor)", c->name, i);
      break;
    }
    case KILN_KIR_EXTRACT:
      if (!check_tensor_access(v, op, 0)) return false;
      if (!is_kind(op->results[0], KILN_KIR_TYPE_SCALAR) || rt->elem != a[0]->type->elem)
        return err(v, op, "result type differs from the element type");
      break;
    case KILN_KIR_VLOAD:
      if (!check_tensor_access(v, op, 0)) return false;
      if (!is_kind(op->results[0], KILN_KIR_TYPE_VECTOR) || rt->elem != a[0]->type->elem)
        return err(v, op, "result must be a vector of the element type");
      break;
    case KILN_KIR_INSERT:
    case KILN_KIR_VSTORE:
    case KILN_KIR_ATOMIC_RMW:
      if (!check_tensor_access(v, op, 1)) return false;
      if (a[0]->type->elem != a[1]->type->elem ||
          a[0]->type->kind != (op->opcode == KILN_KIR_VSTORE ? KILN_KIR_TYPE_VECTOR
                                                             : KILN_KIR_TYPE_SCALAR))
        return err(v, op, "value type does not match the tensor");
      if (!kiln_kir_type_equal(rt, a[1]->type)) return err(v, op, "result type differs");
      set_root(v, op->results[0], a[1]);
      break;
    case KILN_KIR_ATOMIC_CAS: {
      if (!check_tensor_access(v, op, 0)) return false;
      if (op->num_regions != 1 || op->regions[0]->num_args != 1)
        return err(v, op, "needs one region with one argument");
      const kiln_kir_type_t *et = op->regions[0]->args[0]->type;
      if (!check_region(v, op->regions[0], KILN_KIR_YIELD, &et, 1)) return false;
      set_root(v, op->results[0], a[0]);
      break;
    }
    case KILN_KIR_VEXTRACT:
    case KILN_KIR_VINSERT: {
      uint32_t vi = op->opcode == KILN_KIR_VINSERT;
      if (n < vi + 1 || !is_kind(a[vi], KILN_KIR_TYPE_VECTOR)) return err(v, op, "needs a vector");
      if (op->lane < 0 ? (n != vi + 2 || !is_kind(a[vi + 1], KILN_KIR_TYPE_INDEX))
                       : (n != vi + 1 || op->lane >= a[vi]->type->lanes))
        return err(v, op, "bad lane");
      break;
    }
    case KILN_KIR_ALLOC_SHARED:
      if (!is_kind(op->results[0], KILN_KIR_TYPE_TENSOR) ||
          rt->space != KILN_KIR_SPACE_SHARED)
        return err(v, op, "result must be a shared tensor");
      if (v->f->kind != KILN_KIR_FUNC_KERNEL) return err(v, op, "only in a kernel");
      break;
    case KILN_KIR_BARRIER:
      if (op->num_results != n) return err(v, op, "one result per operand");
      for (uint32_t i = 0; i < n; i++) {
        if (!is_kind(a[i], KILN_KIR_TYPE_TENSOR)) return err(v, op, "operands must be tensors");
        set_root(v, op->results[i], a[i]);
      }
      break;
    case KILN_KIR_SHUFFLE:
      if (n != 1 || op->width < 1 || op->width > 32 || (op->width & (op->width - 1)) ||
          op->offset < 0 || op->offset > 31)
        return err(v, op, "malformed shuffle");
      break;
    case KILN_KIR_YIELD:
    case KILN_KIR_RETURN:
      return err(v, op, "terminator in the middle of a region");
    default:
      if (kiln_kir_opcode_is_binary(op->opcode)) {
        if (n != 2 || !kiln_kir_type_equal(a[0]->type, a[1]->type) ||
            !kiln_kir_type_equal(a[0]->type, rt))
          return err(v, op, "operands and result must have one type");
      } else if (kiln_kir_opcode_is_unary(op->opcode)) {
        if (n != 1 || !kiln_kir_type_equal(a[0]->type, rt)) return err(v, op, "type mismatch");
      } else {
        return err(v, op, "unknown opcode %d", (int)op->opcode);
      }
      if (!kiln_kir_op_accepts_type(op->opcode, rt)) return err(v, op, "unsupported type");
      break;
  }
  for (uint32_t i = 0; i < op->num_results; i++) v->visible[op->results[i]->id] = 1;
  return true;
}

/* Checks a region whose terminator must be `term` with operand types `types`. */
static bool check_region(verifier_t *v, const kiln_kir_region_t *r, kiln_kir_opcode_t term,
                         const kiln_kir_type_t *const *types, size_t ntypes) {
  for (uint32_t i = 0; i < r->num_args; i++) v->visible[r->args[i]->id] = 1;
  if (r->ops.len == 0) return err(v, NULL, "empty region (missing %s)", kiln_kir_opcode_name(term));
  for (size_t i = 0; i + 1 < r->ops.len; i++) {
    if (r->ops.data[i]->parent != r) return err(v, r->ops.data[i], "op's parent is wrong");
    if (!check_op(v, r->ops.data[i])) return false;
  }
  const kiln_kir_op_t *t = r->ops.data[r->ops.len - 1];
  if (t->opcode != term)
    return err(v, t, "region must end with %s", kiln_kir_opcode_name(term));
  if (t->num_operands != ntypes)
    return err(v, t, "%u values, expected %zu", t->num_operands, ntypes);
  for (uint32_t i = 0; i < t->num_operands; i++) {
    const kiln_kir_value_t *x = t->operands[i];
    if (!x || x->id >= v->m->next_value_id || !v->visible[x->id])
      return err(v, t, "operand %u is not defined before its use", i);
    if (!kiln_kir_type_equal(x->type, types[i])) return err(v, t, "operand %u has the wrong type", i);
  }
  /* Leaving the region: its values go out of scope. */
  for (uint32_t i = 0; i < r->num_args; i++) v->visible[r->args[i]->id] = 0;
  for (size_t i = 0; i + 1 < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    for (uint32_t j = 0; j < op->num_results; j++) v->visible[op->results[j]->id] = 0;
  }
  return true;
}

static bool check_func(verifier_t *v, const kiln_kir_func_t *f) {
  v->f = f;
  const kiln_kir_region_t *body = f->body;
  if (f->kind == KILN_KIR_FUNC_KERNEL) {
    for (int i = 0; i < 3; i++)
      if (f->block[i] < 1 || f->grid[i] < 1) return err(v, NULL, "launch dimensions must be >= 1");
    for (uint32_t i = 0; i < body->num_args; i++)
      if (!is_kind(body->args[i], KILN_KIR_TYPE_TENSOR))
        return err(v, NULL, "kernel parameter %u is not a tensor", i);
  }
  for (uint32_t i = 0; i < body->num_args; i++) {
    const kiln_kir_type_t *t = body->args[i]->type;
    if (t->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_complex(t->elem))
      return err(v, NULL, "parameter %u: complex types are not supported by the kernel IR", i);
    if (t->kind == KILN_KIR_TYPE_TENSOR && t->space != KILN_KIR_SPACE_GLOBAL)
      return err(v, NULL, "parameter %u is a shared tensor", i);
  }
  if (!check_region(v, body, KILN_KIR_RETURN, f->result_types.data, f->result_types.len))
    return false;
  if (f->kind == KILN_KIR_FUNC_KERNEL) {
    const kiln_kir_op_t *ret = body->ops.data[body->ops.len - 1];
    for (uint32_t i = 0; i < ret->num_operands; i++) {
      const kiln_kir_value_t *r = root_of(v, ret->operands[i]);
      if (!r->region || r->region != body || !f->param_written[r->index])
        return err(v, ret, "result %u does not come from a written tensor parameter", i);
    }
  } else {
    for (size_t i = 0; i < f->result_types.len; i++)
      if (f->result_types.data[i]->kind == KILN_KIR_TYPE_TENSOR)
        return err(v, NULL, "subgraph functions return scalars, result %zu is a tensor", i);
  }
  return true;
}

kiln_status kiln_kir_verify(const kiln_kir_module_t *m) {
  if (!m) return KILN_ERR_INVALID("kir verify: NULL module");
  verifier_t v = {.m = m};
  v.visible = kiln_calloc(m->next_value_id + 1, 1);
  v.root = kiln_calloc(m->next_value_id + 1, sizeof(*v.root));
  for (size_t i = 0; i < m->funcs.len && !v.status; i++) {
    memset(v.visible, 0, m->next_value_id + 1);
    check_func(&v, m->funcs.data[i]);
  }
  kiln_free(v.visible);
  kiln_free(v.root);
  return v.status;
}
