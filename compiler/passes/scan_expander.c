/* scan_expander: scan -> a while loop over the scanned dimension, so the loop, slice and
 * in-place emitters compile it (no backend has a scan kernel).
 *
 * Semantics are the evaluator's (eval_extra.c, XLA's ScanExpander): with inputs x_1..x_n
 * and carries c_1..c_m (the last num_carries operands), step t of len (the length of
 * dimension d = dimensions[0] of the inputs and outputs) calls
 *   to_apply(x_1[t], ..., x_n[t], c_1, ..., c_m) -> (y_1, ..., y_k, c'_1, ..., c'_m)
 * where x[t] is slice t along d with d dropped, writes y_j into slice t of output j and
 * carries c' into the next step; is_reverse=true walks t from len - 1 down to 0. The result
 * is (outputs..., carries...) — one array when there is only one. A scan of length 0 (or
 * with nothing to scan along) returns empty outputs and its initial carries.
 *
 * The loop state is (t, inputs..., outputs..., carries...); outputs start as zeros. Each
 * step slices its inputs with dynamic-slice, calls to_apply and writes its outputs back with
 * dynamic-update-slice (kiln_builder_set_slice). The calls are inlined when the pass is done
 * (call_inline), so fusion sees the body's instructions.
 *
 * Refused, naming the scan (INVALID_ARGUMENT): what the evaluator rejects — a missing
 * to_apply, num_carries outside [0, operands], not one scan dimension, inputs or outputs that
 * are not arrays along it or disagree on its length, a to_apply whose parameters or results
 * are not the slices' and carries' shapes; UNIMPLEMENTED: dynamic shapes, more than 64
 * operands or results, tuple carries, a length over 2^31 - 1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_VALUES 64
#define MAX_RANK 64

typedef struct scan {
  kiln_hlo_computation_t *fn;
  int nin, ncar, nout, d;
  int64_t len;
  bool reverse, tuple_result, tuple_body;
} scan_t;

/* The shape `s` without dimension `d`, in the module's arena. */
static kiln_shape_t *without_dim(kiln_builder_t *b, const kiln_shape_t *s, int d) {
  int64_t dims[MAX_RANK];
  int r = 0;
  for (int i = 0; i < s->rank; i++)
    if (i != d) dims[r++] = s->dims[i];
  return kiln_builder_shape(b, s->type, r, dims);
}

static bool same_array(const kiln_shape_t *a, const kiln_shape_t *b) {
  return a && b && kiln_shape_is_array(a) && kiln_shape_is_array(b) && a->type == b->type &&
         kiln_shape_compatible(a, b);
}

/* The result shape of value i: output i (i < nout) or carry i - nout. */
static const kiln_shape_t *result_part(const kiln_hlo_instruction_t *in, const scan_t *s, int i) {
  return s->tuple_result ? in->shape->elements[i] : in->shape;
}

static const kiln_shape_t *body_part(const scan_t *s, int i) {
  const kiln_shape_t *r = s->fn->root->shape;
  return s->tuple_body ? r->elements[i] : r;
}

#define BAD(...) kiln_status_make(KILN_INVALID_ARGUMENT, __VA_ARGS__)

/* Reads the scan's attributes and checks its shapes as the evaluator does. */
static kiln_status describe(kiln_builder_t *b, const kiln_hlo_instruction_t *in, scan_t *s) {
  memset(s, 0, sizeof *s);
  const char *name = in->name;
  s->fn = kiln_hlo_instruction_called(in, "to_apply");
  const char *nc = kiln_hlo_instruction_raw_attr(in, "num_carries");
  const char *rev = kiln_hlo_instruction_raw_attr(in, "is_reverse");
  char *end = NULL;
  long long ncar = nc ? strtoll(nc, &end, 10) : -1;
  if (!s->fn || !s->fn->root) return BAD("scan '%s' has no to_apply computation", name);
  if (!nc || !end || *end || ncar < 0 || ncar > in->num_operands)
    return BAD("scan '%s' needs num_carries=N, N in [0, %d] (its operands)", name,
               in->num_operands);
  if (!in->has_dimensions || in->dimensions.n != 1)
    return BAD("scan '%s' needs one scan dimension: dimensions={d}", name);
  s->ncar = (int)ncar;
  s->nin = in->num_operands - s->ncar;
  if (in->dimensions.v[0] < 0 || in->dimensions.v[0] >= MAX_RANK)
    return BAD("scan '%s': scan dimension %lld is out of range", name,
               (long long)in->dimensions.v[0]);
  s->d = (int)in->dimensions.v[0];
  s->reverse = rev && !strcmp(rev, "true");
  s->tuple_result = in->shape->type == KILN_TUPLE;
  int nres = s->tuple_result ? in->shape->num_elements : 1;
  s->nout = nres - s->ncar;
  if (s->nout < 0) return BAD("scan '%s': its result does not hold %d carries", name, s->ncar);
  if (nres > MAX_VALUES || in->num_operands > MAX_VALUES)
    return kiln_status_make(KILN_UNIMPLEMENTED, "scan '%s': more than %d operands or results", name,
                            MAX_VALUES);
  if (kiln_shape_is_dynamic(in->shape))
    return kiln_status_make(KILN_UNIMPLEMENTED, "scan '%s': a dynamic result shape", name);
  s->tuple_body = s->fn->root->shape->type == KILN_TUPLE;
  int nbody = s->tuple_body ? s->fn->root->shape->num_elements : 1;
  if (nbody != nres || s->fn->num_parameters != in->num_operands)
    return BAD(
        "scan '%s': to_apply '%s' takes %d values and returns %d; the scan passes %d and "
        "expects %d",
        name, s->fn->name, s->fn->num_parameters, nbody, in->num_operands, nres);
  s->len = -1;
  for (int i = 0; i < s->nin + s->nout; i++) {
    bool input = i < s->nin;
    int k = input ? i : i - s->nin;
    const kiln_shape_t *x = input ? in->operands[i]->shape : result_part(in, s, k);
    if (!kiln_shape_is_array(x) || kiln_shape_is_dynamic(x) || s->d < 0 || s->d >= x->rank ||
        x->rank > MAX_RANK)
      return BAD("scan '%s': %s %d is not a static array with dimension %d", name,
                 input ? "input" : "output", k, s->d);
    if (s->len >= 0 && x->dims[s->d] != s->len)
      return BAD("scan '%s': %s %d has %lld along dimension %d, not %lld as the others", name,
                 input ? "input" : "output", k, (long long)x->dims[s->d], s->d, (long long)s->len);
    s->len = x->dims[s->d];
    /* the slice the body takes (inputs) or gives (outputs) */
    const kiln_shape_t *part = input ? s->fn->parameters[i]->shape : body_part(s, k);
    if (!same_array(part, without_dim(b, x, s->d)))
      return BAD("scan '%s': to_apply's %s %d is not a slice of %s %d along dimension %d", name,
                 input ? "parameter" : "result", k, input ? "input" : "output", k, s->d);
  }
  for (int j = 0; j < s->ncar; j++) {
    const kiln_shape_t *c = in->operands[s->nin + j]->shape;
    if (!kiln_shape_is_array(c))
      return kiln_status_make(KILN_UNIMPLEMENTED, "scan '%s': carry %d is a tuple, not an array",
                              name, j);
    if (!same_array(c, s->fn->parameters[s->nin + j]->shape) ||
        !same_array(c, body_part(s, s->nout + j)) ||
        !same_array(c, result_part(in, s, s->nout + j)))
      return BAD("scan '%s': carry %d does not keep its shape through to_apply and the result",
                 name, j);
  }
  if (s->len < 0) s->len = 0;
  if (s->len > INT32_MAX) /* the loop counts in s32 */
    return kiln_status_make(KILN_UNIMPLEMENTED, "scan '%s': a length of %lld is over 2^31 - 1",
                            name, (long long)s->len);
  return KILN_STATUS_OK;
}

/* One step on the state (t, inputs..., outputs..., carries...). */
static kiln_hlo_computation_t *step(kiln_hlo_module_t *m, kiln_shape_t *state, const scan_t *s,
                                    bool layouts) {
  kiln_hlo_instruction_t *p = NULL;
  kiln_hlo_computation_t *body = kiln_builder_computation(m, "scan_body", state, &p);
  if (!body) return NULL;
  kiln_builder_t bb;
  kiln_builder_t *b = &bb;
  kiln_builder_init(b, body, NULL, layouts);
  kiln_hlo_instruction_t *t = kiln_builder_gte(b, p, 0);
  kiln_hlo_instruction_t *at = t;
  if (s->reverse)
    at = kiln_builder_binary(b, KILN_OP_SUBTRACT,
                             kiln_builder_const_u64(b, KILN_S32, (uint64_t)(s->len - 1)), t);
  kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, KILN_S32, 0);
  kiln_hlo_instruction_t *args[MAX_VALUES], *next[1 + 2 * MAX_VALUES];
  int nstate = 1 + s->nin + s->nout + s->ncar;
  for (int i = 0; i < s->nin; i++) {
    kiln_hlo_instruction_t *x = kiln_builder_gte(b, p, 1 + i);
    if (!x) return NULL;
    kiln_hlo_instruction_t *starts[MAX_RANK];
    int64_t sizes[MAX_RANK];
    for (int k = 0; k < x->shape->rank; k++) {
      starts[k] = k == s->d ? at : zero;
      sizes[k] = k == s->d ? 1 : x->shape->dims[k];
    }
    kiln_shape_t *slice = without_dim(b, x->shape, s->d);
    args[i] = slice ? kiln_builder_reshape(b, kiln_builder_dynamic_slice(b, x, starts, sizes),
                                           slice->rank, slice->dims)
                    : NULL;
    next[1 + i] = x;
  }
  for (int j = 0; j < s->ncar; j++)
    args[s->nin + j] = kiln_builder_gte(b, p, 1 + s->nin + s->nout + j);
  kiln_hlo_instruction_t *call =
      kiln_builder_op(b, KILN_OP_CALL, s->fn->root->shape, s->nin + s->ncar, args);
  if (!call) return NULL;
  kiln_hlo_instruction_add_called(call, "to_apply", false, 1, &s->fn);
  for (int i = 0; i < s->nout + s->ncar; i++) {
    kiln_hlo_instruction_t *v = s->tuple_body ? kiln_builder_gte(b, call, i) : call;
    if (i < s->nout)
      v = kiln_builder_set_slice(b, kiln_builder_gte(b, p, 1 + s->nin + i), v, s->d, at);
    next[1 + s->nin + i] = v;
  }
  next[0] = kiln_builder_binary(b, KILN_OP_ADD, t, kiln_builder_const_u64(b, KILN_S32, 1));
  body->root = kiln_builder_tuple(b, nstate, next);
  if (b->failed || !body->root) return NULL;
  kiln_hlo_computation_sort_post_order(body);
  return body;
}

/* The first scan refused (the driver's expand function has no error channel). */
typedef struct run {
  kiln_status error;
} run_t;

/* Zeros of array shape `o`. */
static kiln_hlo_instruction_t *zeros(kiln_builder_t *b, const kiln_shape_t *o) {
  return kiln_builder_broadcast(b, kiln_builder_const_f64(b, o->type, 0), o->rank, o->dims, NULL);
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  run_t *run = ctx;
  scan_t s;
  kiln_status st = describe(b, in, &s);
  if (st || run->error) {
    if (!run->error)
      run->error = st;
    else
      kiln_status_free(st);
    return NULL;
  }
  int nres = s.nout + s.ncar;
  kiln_hlo_instruction_t *vals[MAX_VALUES];
  if (s.len == 0) { /* nothing to walk: empty outputs, the carries as they came */
    for (int i = 0; i < nres; i++)
      vals[i] = i < s.nout ? zeros(b, result_part(in, &s, i)) : in->operands[s.nin + i - s.nout];
    return kiln_builder_result(b, in->shape, nres, vals);
  }
  kiln_hlo_instruction_t *init[1 + 2 * MAX_VALUES];
  int nstate = 1 + s.nin + nres;
  init[0] = kiln_builder_const_u64(b, KILN_S32, 0);
  for (int i = 0; i < s.nin; i++) init[1 + i] = in->operands[i];
  for (int i = 0; i < s.nout; i++) init[1 + s.nin + i] = zeros(b, result_part(in, &s, i));
  for (int j = 0; j < s.ncar; j++) init[1 + s.nin + s.nout + j] = in->operands[s.nin + j];
  kiln_hlo_instruction_t *tup = kiln_builder_tuple(b, nstate, init);
  if (!tup) return NULL;
  kiln_hlo_computation_t *cond =
      kiln_builder_counter_below(b->m, "scan_cond", tup->shape, s.len, b->layouts);
  kiln_hlo_computation_t *body = step(b->m, tup->shape, &s, b->layouts);
  if (!cond || !body) {
    b->failed = true;
    return NULL;
  }
  kiln_hlo_instruction_t *w = kiln_builder_while(b, tup, cond, body);
  for (int i = 0; i < nres; i++) vals[i] = kiln_builder_gte(b, w, 1 + s.nin + i);
  return kiln_builder_result(b, in->shape, nres, vals);
}

kiln_status kiln_pass_scan_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                    bool *changed) {
  run_t run = {0};
  kiln_status s = kiln_builder_expand_all(m, KILN_OP_SCAN, expand, &run, "scan_expander", changed);
  if (run.error) {
    kiln_status_free(s);
    return run.error;
  }
  KILN_RETURN_IF_ERROR_PLAIN(s);
  if (!*changed) return KILN_STATUS_OK;
  bool inlined = false;
  return kiln_pass_call_inline(m, opts, &inlined);
}
