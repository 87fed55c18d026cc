/* Stable text form of the kernel IR (see kir.h). Value names: a value with a name hint
 * prints as %hint (a repeated hint gets _1, _2, ... in print order), others as %0, %1, ...
 * numbered per function in print order, so equal IR always prints equal text. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/hashmap.h"
#include "compiler/codegen/kir.h"

typedef struct printer {
  kiln_strbuf_t *out;
  kiln_hashmap_t used;  /* names handed out in this function */
  kiln_ptrmap_t names;  /* value -> char* (heap, freed at the end) */
  KILN_VEC(char *) owned;
  int next_num;
  bool canonical; /* kiln_kir_print_canonical: no name hints, functions by position */
} printer_t;

/* A function's printed name: its own, or in canonical form "kernel" / "f<position>". */
static void func_name(printer_t *p, const kiln_kir_func_t *f) {
  if (!p->canonical) {
    kiln_strbuf_append(p->out, f->name);
    return;
  }
  if (f->kind == KILN_KIR_FUNC_KERNEL) {
    kiln_strbuf_append(p->out, "kernel");
    return;
  }
  size_t i = 0;
  while (i < f->module->funcs.len && f->module->funcs.data[i] != f) i++;
  kiln_strbuf_printf(p->out, "f%zu", i);
}

static const char *name_of(printer_t *p, const kiln_kir_value_t *v) {
  if (!v) return "<null>";
  char *n = kiln_ptrmap_get(&p->names, v);
  if (n) return n;
  char buf[128];
  if (v->name && !p->canonical) {
    snprintf(buf, sizeof(buf), "%s", v->name);
    for (int k = 1; kiln_hashmap_get_str(&p->used, buf); k++)
      snprintf(buf, sizeof(buf), "%s_%d", v->name, k);
  } else {
    do snprintf(buf, sizeof(buf), "%d", p->next_num++);
    while (kiln_hashmap_get_str(&p->used, buf));
  }
  n = kiln_strdup(buf);
  kiln_vec_push(&p->owned, n);
  kiln_hashmap_put(&p->used, n, strlen(n), (void *)1);
  kiln_ptrmap_put(&p->names, v, n);
  return n;
}

static void val(printer_t *p, const kiln_kir_value_t *v) {
  kiln_strbuf_append_char(p->out, '%');
  kiln_strbuf_append(p->out, name_of(p, v));
}

static void vals(printer_t *p, kiln_kir_value_t *const *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (i) kiln_strbuf_append(p->out, ", ");
    val(p, v[i]);
  }
}

static void type(printer_t *p, const kiln_kir_type_t *t) { kiln_kir_type_print(t, p->out); }

static void types(printer_t *p, kiln_kir_value_t *const *v, size_t n) {
  kiln_strbuf_append_char(p->out, '(');
  for (size_t i = 0; i < n; i++) {
    if (i) kiln_strbuf_append(p->out, ", ");
    type(p, v[i]->type);
  }
  kiln_strbuf_append_char(p->out, ')');
}

static void indent(printer_t *p, int depth) {
  for (int i = 0; i < depth; i++) kiln_strbuf_append(p->out, "  ");
}

/* Prints a constant value of element type `elem` (floats round-trip their type). */
static void const_text(printer_t *p, const kiln_kir_type_t *t, kiln_kir_const_t c) {
  bool flt = t->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_float(t->elem);
  if (!flt) {
    if (t->kind != KILN_KIR_TYPE_INDEX && t->elem == KILN_PRED)
      kiln_strbuf_append(p->out, c.i ? "true" : "false");
    else if (t->kind != KILN_KIR_TYPE_INDEX && kiln_elem_type_is_unsigned_int(t->elem))
      kiln_strbuf_printf(p->out, "%" PRIu64, (uint64_t)c.i);
    else
      kiln_strbuf_printf(p->out, "%" PRId64, c.i);
    return;
  }
  if (isnan(c.f)) {
    kiln_strbuf_append(p->out, "nan");
    return;
  }
  if (isinf(c.f)) {
    kiln_strbuf_append(p->out, c.f < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  snprintf(buf, sizeof(buf), t->elem == KILN_F64 ? "%.17g" : "%.9g", c.f);
  kiln_strbuf_append(p->out, buf);
  if (!strpbrk(buf, ".e")) kiln_strbuf_append(p->out, ".0");
}

static void region(printer_t *p, const kiln_kir_region_t *r, int depth);

static void indices(printer_t *p, const kiln_kir_op_t *op, size_t first) {
  kiln_strbuf_append_char(p->out, '[');
  vals(p, op->operands + first, op->num_operands - first);
  kiln_strbuf_append_char(p->out, ']');
}

static void iter_args(printer_t *p, const kiln_kir_region_t *r, size_t first_arg,
                      kiln_kir_value_t *const *inits, size_t n) {
  if (n == 0) return;
  kiln_strbuf_append(p->out, " iter_args(");
  for (size_t i = 0; i < n; i++) {
    if (i) kiln_strbuf_append(p->out, ", ");
    val(p, r->args[first_arg + i]);
    kiln_strbuf_append(p->out, " = ");
    val(p, inits[i]);
  }
  kiln_strbuf_append(p->out, ") -> ");
  types(p, inits, n);
}

static void op(printer_t *p, const kiln_kir_op_t *o, int depth) {
  static const char *const kAxis[] = {"x", "y", "z"};
  static const char *const kCmp[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  static const char *const kShfl[] = {"down", "up", "xor", "idx"};
  static const char *const kAtomic[] = {"add", "min", "max", "exch"};
  indent(p, depth);
  if (o->num_results) {
    vals(p, o->results, o->num_results);
    kiln_strbuf_append(p->out, " = ");
  }
  kiln_strbuf_append(p->out, kiln_kir_opcode_name(o->opcode));
  kiln_kir_value_t *const *a = o->operands;
  size_t n = o->num_operands;
  switch (o->opcode) {
    case KILN_KIR_CONSTANT:
      kiln_strbuf_append_char(p->out, ' ');
      const_text(p, o->results[0]->type, o->cst);
      kiln_strbuf_append(p->out, " : ");
      type(p, o->results[0]->type);
      break;
    case KILN_KIR_CMP:
      kiln_strbuf_printf(p->out, " %s ", kCmp[o->cmp % 6]);
      vals(p, a, n);
      kiln_strbuf_append(p->out, " : ");
      type(p, a[0]->type);
      break;
    case KILN_KIR_CONVERT:
    case KILN_KIR_BITCAST:
      kiln_strbuf_append_char(p->out, ' ');
      val(p, a[0]);
      kiln_strbuf_append(p->out, " : ");
      type(p, a[0]->type);
      kiln_strbuf_append(p->out, " -> ");
      type(p, o->results[0]->type);
      break;
    case KILN_KIR_THREAD_ID:
    case KILN_KIR_BLOCK_ID:
      kiln_strbuf_printf(p->out, " %s in [%" PRId64 ", %" PRId64 "]", kAxis[o->axis % 3],
                         o->range_lo, o->range_hi);
      break;
    case KILN_KIR_APPLY_INDEXING:
    case KILN_KIR_LOOP: {
      kiln_strbuf_append(p->out, " (");
      vals(p, a, o->num_map_dims);
      kiln_strbuf_append_char(p->out, ')');
      const kiln_kir_region_t *r = o->opcode == KILN_KIR_LOOP ? o->regions[0] : NULL;
      size_t nsyms = kiln_indexing_map_num_syms(o->map);
      size_t nres = kiln_indexing_map_num_results(o->map);
      if (nsyms) {
        kiln_strbuf_append_char(p->out, '[');
        if (r) vals(p, r->args, nsyms);
        else vals(p, a + o->num_map_dims, nsyms);
        kiln_strbuf_append_char(p->out, ']');
      }
      if (r) {
        kiln_strbuf_append(p->out, " -> (");
        vals(p, r->args + nsyms, nres);
        kiln_strbuf_append_char(p->out, ')');
      }
      kiln_strbuf_append(p->out, " in ");
      kiln_indexing_map_print(o->map, p->out);
      if (r) iter_args(p, r, nsyms + nres, a + o->num_map_dims, n - o->num_map_dims);
      break;
    }
    case KILN_KIR_FOR: {
      const kiln_kir_region_t *r = o->regions[0];
      kiln_strbuf_append_char(p->out, ' ');
      val(p, r->args[0]);
      kiln_strbuf_append(p->out, " = ");
      val(p, a[0]);
      kiln_strbuf_append(p->out, " to ");
      val(p, a[1]);
      kiln_strbuf_append(p->out, " step ");
      val(p, a[2]);
      iter_args(p, r, 1, a + 3, n - 3);
      break;
    }
    case KILN_KIR_IF:
      kiln_strbuf_append_char(p->out, ' ');
      val(p, a[0]);
      if (o->num_results) {
        kiln_strbuf_append(p->out, " -> ");
        types(p, o->results, o->num_results);
      }
      break;
    case KILN_KIR_CALL:
      kiln_strbuf_append(p->out, " @");
      if (o->callee)
        func_name(p, o->callee);
      else
        kiln_strbuf_append(p->out, "<null>");
      kiln_strbuf_append_char(p->out, '(');
      vals(p, a, n);
      kiln_strbuf_append(p->out, ") -> ");
      types(p, o->results, o->num_results);
      break;
    case KILN_KIR_EXTRACT:
    case KILN_KIR_VLOAD:
      kiln_strbuf_append_char(p->out, ' ');
      val(p, a[0]);
      indices(p, o, 1);
      kiln_strbuf_append(p->out, " : ");
      type(p, a[0]->type);
      if (o->opcode == KILN_KIR_VLOAD) {
        kiln_strbuf_append(p->out, " -> ");
        type(p, o->results[0]->type);
      }
      break;
    case KILN_KIR_INSERT:
    case KILN_KIR_VSTORE:
      kiln_strbuf_append_char(p->out, ' ');
      val(p, a[0]);
      kiln_strbuf_append(p->out, " into ");
      val(p, a[1]);
      indices(p, o, 2);
      kiln_strbuf_append(p->out, " : ");
      if (o->opcode == KILN_KIR_VSTORE) {
        type(p, a[0]->type);
        kiln_strbuf_append(p->out, " -> ");
      }
      type(p, a[1]->type);
      break;
    case KILN_KIR_VEXTRACT:
    case KILN_KIR_VINSERT: {
      size_t vi = o->opcode == KILN_KIR_VINSERT ? 1 : 0;
      kiln_strbuf_append_char(p->out, ' ');
      if (vi) {
        val(p, a[0]);
        kiln_strbuf_append(p->out, " into ");
      }
      val(p, a[vi]);
      kiln_strbuf_append_char(p->out, '[');
      if (o->lane < 0) val(p, a[vi + 1]);
      else kiln_strbuf_printf(p->out, "%" PRId64, o->lane);
      kiln_strbuf_append(p->out, "] : ");
      type(p, a[vi]->type);
      break;
    }
    case KILN_KIR_SHUFFLE:
      kiln_strbuf_printf(p->out, " %s ", kShfl[o->shuffle % 4]);
      val(p, a[0]);
      kiln_strbuf_printf(p->out, ", %d, width %d : ", o->offset, o->width);
      type(p, a[0]->type);
      break;
    case KILN_KIR_ATOMIC_RMW:
      kiln_strbuf_printf(p->out, " %s ", kAtomic[o->atomic % 4]);
      val(p, a[0]);
      kiln_strbuf_append(p->out, ", ");
      val(p, a[1]);
      indices(p, o, 2);
      kiln_strbuf_append(p->out, " : ");
      type(p, a[1]->type);
      break;
    case KILN_KIR_ATOMIC_CAS:
      kiln_strbuf_append_char(p->out, ' ');
      val(p, a[0]);
      indices(p, o, 1);
      kiln_strbuf_append(p->out, " : ");
      type(p, a[0]->type);
      kiln_strbuf_append(p->out, " (");
      val(p, o->regions[0]->args[0]);
      kiln_strbuf_append(p->out, ")");
      break;
    case KILN_KIR_ALLOC_SHARED:
      kiln_strbuf_append(p->out, " : ");
      type(p, o->results[0]->type);
      break;
    default:
      /* binary, unary, is_finite, select, vsplat, yield, return, barrier */
      if (n) {
        kiln_strbuf_append_char(p->out, ' ');
        vals(p, a, n);
      }
      if (kiln_kir_opcode_is_binary(o->opcode) || kiln_kir_opcode_is_unary(o->opcode) ||
          o->opcode == KILN_KIR_IS_FINITE || o->opcode == KILN_KIR_SELECT ||
          o->opcode == KILN_KIR_VSPLAT) {
        kiln_strbuf_append(p->out, " : ");
        type(p, o->results[0]->type);
      }
      break;
  }
  if (o->num_regions) {
    kiln_strbuf_append(p->out, " {\n");
    region(p, o->regions[0], depth + 1);
    indent(p, depth);
    kiln_strbuf_append_char(p->out, '}');
    for (uint32_t i = 1; i < o->num_regions; i++) {
      kiln_strbuf_append(p->out, " else {\n");
      region(p, o->regions[i], depth + 1);
      indent(p, depth);
      kiln_strbuf_append_char(p->out, '}');
    }
  }
  kiln_strbuf_append_char(p->out, '\n');
}

static void region(printer_t *p, const kiln_kir_region_t *r, int depth) {
  for (size_t i = 0; i < r->ops.len; i++) op(p, r->ops.data[i], depth);
}

static void func(printer_t *p, const kiln_kir_func_t *f) {
  kiln_strbuf_append(p->out, "func @");
  func_name(p, f);
  kiln_strbuf_append_char(p->out, '(');
  for (uint32_t i = 0; i < f->body->num_args; i++) {
    if (i) kiln_strbuf_append(p->out, ", ");
    val(p, f->body->args[i]);
    kiln_strbuf_append(p->out, ": ");
    type(p, f->body->args[i]->type);
    if (f->param_written[i]) kiln_strbuf_append(p->out, " {written}");
  }
  kiln_strbuf_append(p->out, ") -> (");
  for (size_t i = 0; i < f->result_types.len; i++) {
    if (i) kiln_strbuf_append(p->out, ", ");
    type(p, f->result_types.data[i]);
  }
  kiln_strbuf_append_char(p->out, ')');
  if (f->kind == KILN_KIR_FUNC_KERNEL)
    kiln_strbuf_printf(p->out,
                       " kernel block=[%" PRId64 ", %" PRId64 ", %" PRId64 "] grid=[%" PRId64
                       ", %" PRId64 ", %" PRId64 "]",
                       f->block[0], f->block[1], f->block[2], f->grid[0], f->grid[1], f->grid[2]);
  kiln_strbuf_append(p->out, " {\n");
  region(p, f->body, 1);
  kiln_strbuf_append(p->out, "}\n");
}

static void printer_run(const kiln_kir_func_t *f, kiln_strbuf_t *out, bool canonical) {
  printer_t p = {.out = out, .canonical = canonical};
  kiln_hashmap_init(&p.used);
  kiln_ptrmap_init(&p.names);
  func(&p, f);
  for (size_t i = 0; i < p.owned.len; i++) kiln_free(p.owned.data[i]);
  kiln_vec_free(&p.owned);
  kiln_hashmap_free(&p.used);
  kiln_ptrmap_free(&p.names);
}

void kiln_kir_print(const kiln_kir_module_t *m, kiln_strbuf_t *out) {
  for (size_t i = 0; i < m->funcs.len; i++) {
    if (i) kiln_strbuf_append_char(out, '\n');
    printer_run(m->funcs.data[i], out, false);
  }
}

void kiln_kir_print_canonical(const kiln_kir_module_t *m, kiln_strbuf_t *out) {
  for (size_t i = 0; i < m->funcs.len; i++) {
    if (i) kiln_strbuf_append_char(out, '\n');
    printer_run(m->funcs.data[i], out, true);
  }
  kiln_strbuf_printf(out, "\nexcess_precision=%d\n", m->excess_precision ? 1 : 0);
  for (size_t i = 0; i < m->funcs.len; i++)
    if (m->funcs.data[i]->host_rolled_thread_loops) kiln_strbuf_printf(out, "rolled f%zu\n", i);
  for (size_t i = 0; i < m->funcs.len; i++)
    if (m->funcs.data[i]->host_rolled_for_loops) kiln_strbuf_printf(out, "rolled_for f%zu\n", i);
}

char *kiln_kir_to_string(const kiln_kir_module_t *m) {
  kiln_strbuf_t s = {0};
  kiln_kir_print(m, &s);
  if (!s.data) return kiln_strdup("");
  return kiln_strbuf_take(&s);
}
