/* Collective thunks from HLO (collective_emitter.h). */
#include "compiler/thunks/collective_emitter.h"

#include <inttypes.h>

#include "compiler/hlo/collective_groups.h"
#include "compiler/hlo/opcode.h"
#include "compiler/passes/collective_util.h"
#include "runtime/collective_thunk.h"

int kiln_collective_result_leaf(const kiln_hlo_instruction_t *start, int k) {
  return kiln_hlo_collective_is_pair_start(start) ? start->num_operands + k : k;
}

static kiln_status slice_of(const kiln_buffer_assignment_t *ba, const kiln_hlo_instruction_t *in,
                            int leaf, kiln_slice_t *out) {
  kiln_buffer_slice_t bs;
  if (!kiln_buffer_assignment_slice_at(ba, in, leaf, &bs) || bs.allocation < 0)
    return KILN_ERR_INTERNAL("%s: leaf %d has no buffer slice", in->name, leaf);
  *out = kiln_slice_make(bs.allocation, bs.offset, bs.size);
  return KILN_STATUS_OK;
}

static kiln_status coll_dtype(const kiln_hlo_instruction_t *in, kiln_elem_type_t t,
                              kiln_coll_dtype_t *out) {
  /* Other types were rewritten by collective_reducer_expander, unless it left them alone. */
  if (!kiln_coll_runtime_reduces_type(t))
    return kiln_status_make(KILN_UNIMPLEMENTED, "%s '%s': reductions of %s",
                            kiln_hlo_opcode_name(in->opcode), in->name, kiln_elem_type_name(t));
  switch (t) {
    case KILN_PRED:
      *out = KILN_COLL_PRED;
      return KILN_STATUS_OK;
    case KILN_S8:
      *out = KILN_COLL_S8;
      return KILN_STATUS_OK;
    case KILN_U8:
      *out = KILN_COLL_U8;
      return KILN_STATUS_OK;
    case KILN_S16:
      *out = KILN_COLL_S16;
      return KILN_STATUS_OK;
    case KILN_U16:
      *out = KILN_COLL_U16;
      return KILN_STATUS_OK;
    case KILN_S32:
      *out = KILN_COLL_S32;
      return KILN_STATUS_OK;
    case KILN_U32:
      *out = KILN_COLL_U32;
      return KILN_STATUS_OK;
    case KILN_S64:
      *out = KILN_COLL_S64;
      return KILN_STATUS_OK;
    case KILN_U64:
      *out = KILN_COLL_U64;
      return KILN_STATUS_OK;
    case KILN_F32:
      *out = KILN_COLL_F32;
      return KILN_STATUS_OK;
    case KILN_F64:
      *out = KILN_COLL_F64;
      return KILN_STATUS_OK;
    case KILN_BF16:
      *out = KILN_COLL_BF16;
      return KILN_STATUS_OK;
    case KILN_F16:
      *out = KILN_COLL_F16;
      return KILN_STATUS_OK;
    default:
      return KILN_ERR_INTERNAL("%s '%s': no collective type for %s",
                               kiln_hlo_opcode_name(in->opcode), in->name, kiln_elem_type_name(t));
  }
}

/* The reducer: a binary op of the computation's two parameters. */
static kiln_status reduction_of(const kiln_hlo_instruction_t *in, kiln_elem_type_t t,
                                kiln_coll_reduction_t *out) {
  const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(in, "to_apply");
  if (!f)
    return KILN_ERR_INVALID("%s '%s' has no to_apply", kiln_hlo_opcode_name(in->opcode), in->name);
  const kiln_hlo_instruction_t *r = f->root;
  bool params = r && r->num_operands == 2 && f->num_parameters == 2 &&
                r->operands[0]->opcode == KILN_OP_PARAMETER &&
                r->operands[1]->opcode == KILN_OP_PARAMETER && r->operands[0] != r->operands[1];
  if (params) {
    switch (r->opcode) {
      case KILN_OP_ADD:
        *out = KILN_COLL_SUM;
        return KILN_STATUS_OK;
      case KILN_OP_MULTIPLY:
        *out = KILN_COLL_PRODUCT;
        return KILN_STATUS_OK;
      case KILN_OP_MINIMUM:
        *out = KILN_COLL_MIN;
        return KILN_STATUS_OK;
      case KILN_OP_MAXIMUM:
        *out = KILN_COLL_MAX;
        return KILN_STATUS_OK;
      case KILN_OP_AND:
        if (t == KILN_PRED) {
          *out = KILN_COLL_MIN;
          return KILN_STATUS_OK;
        }
        break;
      case KILN_OP_OR:
        if (t == KILN_PRED) {
          *out = KILN_COLL_MAX;
          return KILN_STATUS_OK;
        }
        break;
      default:
        break;
    }
  }
  return kiln_status_make(KILN_UNIMPLEMENTED,
                          "%s '%s': reducer computation %s is not add, multiply, minimum, maximum "
                          "(or and/or on pred) of its two parameters",
                          kiln_hlo_opcode_name(in->opcode), in->name, f->name);
}

/* Elements of `s` at dimension d and physically more minor (its layout; default: row-major);
 * *outer: the rest. */
static kiln_status split_at(const kiln_hlo_instruction_t *in, const kiln_shape_t *s, int d,
                            int64_t *outer, int64_t *inner) {
  if (d < 0 || d >= s->rank)
    return KILN_ERR_INVALID("%s '%s': dimension %d outside rank %d",
                            kiln_hlo_opcode_name(in->opcode), in->name, d, s->rank);
  bool dflt = !s->has_layout || kiln_layout_is_default(&s->layout);
  if (!dflt && (s->layout.num_tiles || s->layout.rank != s->rank))
    return kiln_status_make(KILN_UNIMPLEMENTED, "%s '%s': tiled layout",
                            kiln_hlo_opcode_name(in->opcode), in->name);
  int64_t in_elems = 1, all = 1;
  bool reached = false;
  for (int i = 0; i < s->rank; i++) {
    int dim = dflt ? s->rank - 1 - i : (int)s->layout.minor_to_major[i];
    all *= s->dims[dim];
    if (!reached) in_elems *= s->dims[dim];
    if (dim == d) reached = true;
  }
  *inner = in_elems;
  *outer = in_elems ? all / in_elems : 0;
  return KILN_STATUS_OK;
}

static bool same_layout(const kiln_shape_t *a, const kiln_shape_t *b) {
  bool da = !a->has_layout || kiln_layout_is_default(&a->layout);
  bool db = !b->has_layout || kiln_layout_is_default(&b->layout);
  if (da || db) return da && db;
  return kiln_layout_equal(&a->layout, &b->layout);
}

static kiln_coll_thunk_op_t op_of(const kiln_hlo_instruction_t *in) {
  switch (in->opcode) {
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_ALL_REDUCE_START:
      return KILN_COLL_THUNK_ALL_REDUCE;
    case KILN_OP_ALL_GATHER:
    case KILN_OP_ALL_GATHER_START:
      return KILN_COLL_THUNK_ALL_GATHER;
    case KILN_OP_REDUCE_SCATTER:
      return KILN_COLL_THUNK_REDUCE_SCATTER;
    case KILN_OP_ALL_TO_ALL:
      return in->has_dimensions ? KILN_COLL_THUNK_ALL_TO_ALL : KILN_COLL_THUNK_ALL_TO_ALL_TUPLE;
    case KILN_OP_COLLECTIVE_PERMUTE:
    case KILN_OP_COLLECTIVE_PERMUTE_START:
      return KILN_COLL_THUNK_PERMUTE;
    case KILN_OP_COLLECTIVE_BROADCAST:
      return KILN_COLL_THUNK_BROADCAST;
    case KILN_OP_RAGGED_ALL_TO_ALL:
      return KILN_COLL_THUNK_RAGGED_ALL_TO_ALL;
    case KILN_OP_REPLICA_ID:
      return KILN_COLL_THUNK_REPLICA_ID;
    default:
      return KILN_COLL_THUNK_PARTITION_ID;
  }
}

/* The layout of operand k and its result (shapes `os`, `rs`) for a group of `size`. */
static kiln_status fill_buffer(const kiln_hlo_instruction_t *in, kiln_coll_thunk_desc_t *d, int k,
                               const kiln_shape_t *os, const kiln_shape_t *rs, int size) {
  kiln_coll_thunk_buffer_t *b = &d->buffers[k];
  if (!kiln_shape_is_array(os) || !kiln_shape_is_array(rs) || os->type != rs->type)
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "%s '%s': operand %d is a tuple or differs in type "
                            "from its result",
                            kiln_hlo_opcode_name(in->opcode), in->name, k);
  int64_t n = kiln_shape_num_elements(os);
  size_t es = n > 0 ? (size_t)(b->send.size / n) : 1;
  bool reduce = d->op == KILN_COLL_THUNK_ALL_REDUCE || d->op == KILN_COLL_THUNK_REDUCE_SCATTER;
  if (reduce) {
    KILN_RETURN_IF_ERROR_PLAIN(coll_dtype(in, os->type, &b->dtype));
    if (k == 0) KILN_RETURN_IF_ERROR_PLAIN(reduction_of(in, os->type, &d->reduction));
  }
  bool split = d->op == KILN_COLL_THUNK_ALL_GATHER || d->op == KILN_COLL_THUNK_REDUCE_SCATTER ||
               d->op == KILN_COLL_THUNK_ALL_TO_ALL;
  if (split && !same_layout(os, rs))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "%s '%s': operand %d and its result differ in layout",
                            kiln_hlo_opcode_name(in->opcode), in->name, k);
  int dim = in->has_dimensions && in->dimensions.n == 1 ? (int)in->dimensions.v[0] : -1;
  if (split && dim < 0)
    return KILN_ERR_INVALID("%s '%s' needs dimensions={d}", kiln_hlo_opcode_name(in->opcode),
                            in->name);
  int64_t outer = 0, inner = 0;
  switch (d->op) {
    case KILN_COLL_THUNK_ALL_REDUCE:
      b->count = n;
      break;
    case KILN_COLL_THUNK_ALL_GATHER:
      KILN_RETURN_IF_ERROR_PLAIN(split_at(in, os, dim, &outer, &inner));
      b->outer = outer;
      b->block_bytes = (size_t)inner * es;
      break;
    case KILN_COLL_THUNK_REDUCE_SCATTER:
      KILN_RETURN_IF_ERROR_PLAIN(split_at(in, rs, dim, &outer, &inner));
      b->outer = outer;
      b->inner = inner;
      break;
    case KILN_COLL_THUNK_ALL_TO_ALL:
      KILN_RETURN_IF_ERROR_PLAIN(split_at(in, os, dim, &outer, &inner));
      if (size < 1 || inner % size)
        return KILN_ERR_INVALID("all-to-all '%s': dimension %d does not split into %d parts",
                                in->name, dim, size);
      b->outer = outer;
      b->block_bytes = (size_t)(inner / size) * es;
      break;
    default:
      break;
  }
  return KILN_STATUS_OK;
}

static const kiln_shape_t *result_shape(const kiln_hlo_instruction_t *in, int k) {
  const kiln_shape_t *s = in->shape;
  if (kiln_hlo_collective_is_pair_start(in)) {
    s = s->elements[1];
    if (in->num_operands == 1) return s;
  } else if (in->num_operands == 1 && s->type != KILN_TUPLE) {
    return s;
  }
  return s->type == KILN_TUPLE && k < s->num_elements ? s->elements[k] : NULL;
}

/* ragged-all-to-all's six buffers (runtime/collective_thunk.h): rows along dimension 0, which
 * must be the most major in the input's and output's layouts. */
static kiln_status fill_ragged(const kiln_hlo_instruction_t *in, const kiln_buffer_assignment_t *ba,
                               kiln_coll_thunk_desc_t *d) {
  if (in->num_operands != 6)
    return KILN_ERR_INVALID("ragged-all-to-all '%s' has %d operands, not 6", in->name,
                            in->num_operands);
  kiln_coll_thunk_buffer_t *b = d->buffers;
  const kiln_shape_t *xs = in->operands[0]->shape, *ys = in->operands[1]->shape;
  if (!kiln_shape_is_array(xs) || !kiln_shape_is_array(ys) || xs->rank < 1 || xs->rank != ys->rank)
    return KILN_ERR_INVALID("ragged-all-to-all '%s': input and output must be arrays of rank >= 1",
                            in->name);
  int64_t outer = 0, in_rows_elems = 0, out_rows_elems = 0;
  KILN_RETURN_IF_ERROR_PLAIN(split_at(in, xs, 0, &outer, &in_rows_elems));
  if (outer != 1 || !same_layout(xs, ys) || !same_layout(ys, in->shape))
    return kiln_status_make(
        KILN_UNIMPLEMENTED,
        "ragged-all-to-all '%s': dimension 0 must be the most major, and input, "
        "output and result laid out alike",
        in->name);
  KILN_RETURN_IF_ERROR_PLAIN(split_at(in, ys, 0, &outer, &out_rows_elems));
  for (int k = 0; k < 6; k++) {
    KILN_RETURN_IF_ERROR_PLAIN(slice_of(ba, in->operands[k], 0, &b[k].send));
    if (k >= 2) b[k].recv = b[k].send;
  }
  KILN_RETURN_IF_ERROR_PLAIN(slice_of(ba, in, 0, &b[0].recv));
  b[1].recv = b[0].recv;
  int64_t row = xs->dims[0] ? in_rows_elems / xs->dims[0] : 0;
  if (!row) row = ys->dims[0] ? out_rows_elems / ys->dims[0] : 0;
  size_t es = kiln_elem_type_storage_bytes(xs->type);
  b[0].outer = xs->dims[0];
  b[0].inner = ys->dims[0];
  b[0].block_bytes = (size_t)row * es;
  for (int k = 2; k < 6; k++) {
    const kiln_shape_t *m = in->operands[k]->shape;
    KILN_RETURN_IF_ERROR_PLAIN(coll_dtype(in, m->type, &b[k].dtype));
    if (!kiln_shape_is_array(m) || (b[k].dtype != KILN_COLL_S32 && b[k].dtype != KILN_COLL_S64))
      return KILN_ERR_INVALID("ragged-all-to-all '%s': operand %d must be s32 or s64", in->name, k);
    b[k].count = kiln_shape_num_elements(m);
  }
  return KILN_STATUS_OK;
}

/* Every participant's group, once. */
static kiln_status resolve_groups(const kiln_hlo_instruction_t *in, kiln_coll_thunk_desc_t *d) {
  int R = d->num_replicas, P = d->num_partitions;
  for (int p = 0; p < R * P; p++) {
    kiln_hlo_collective_group_t g;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_collective_group_resolve(in, R, P, p, NULL, &g));
    d->group_key[p] = g.key;
    d->rank[p] = g.rank;
    d->group_size[p] = g.size;
    kiln_status st = KILN_STATUS_OK;
    if (d->op == KILN_COLL_THUNK_PERMUTE) {
      int64_t src = -1;
      st = kiln_hlo_collective_permute_source(in, &g, R, P, NULL, &src);
      d->source[p] = (int)src;
    }
    kiln_hlo_collective_group_free(&g);
    KILN_RETURN_IF_ERROR_PLAIN(st);
  }
  return KILN_STATUS_OK;
}

/* A -start the runtime may split across it and its done begins the collective; anything
 * else runs all of it. */
static kiln_coll_thunk_phase_t start_phase(const kiln_hlo_instruction_t *in, bool split) {
  return split && kiln_hlo_async_split_done(in) ? KILN_COLL_PHASE_START : KILN_COLL_PHASE_WHOLE;
}

/* The thunk of collective `in` (its attributes), reading the buffers of `bufs`' operands and
 * writing result k to `bufs`' leaf result_leaf0 + k (result_leaf0 < 0: the -start forms' own
 * numbering, kiln_collective_result_leaf). `bufs` is `in` itself, or the async-start wrapping
 * it. */
static kiln_status emit(const kiln_hlo_instruction_t *in, const kiln_hlo_instruction_t *bufs,
                        int result_leaf0, const kiln_buffer_assignment_t *ba, int num_replicas,
                        int num_partitions, kiln_coll_thunk_phase_t phase, kiln_thunk_seq_t *seq) {
  kiln_coll_thunk_op_t op = op_of(in);
  bool id = op == KILN_COLL_THUNK_REPLICA_ID || op == KILN_COLL_THUNK_PARTITION_ID;
  int nops = id ? 1 : in->num_operands;
  if (nops < 1)
    return KILN_ERR_INVALID("%s '%s' has no operands", kiln_hlo_opcode_name(in->opcode), in->name);
  kiln_coll_thunk_desc_t *d = kiln_coll_thunk_desc_create(op, nops, num_replicas, num_partitions);
  d->phase = phase;
  kiln_status st = id ? KILN_STATUS_OK : resolve_groups(in, d);
  if (!st && op == KILN_COLL_THUNK_RAGGED_ALL_TO_ALL) {
    st = fill_ragged(in, ba, d);
    nops = 0; /* filled */
  }
  for (int k = 0; k < nops && !st; k++) {
    kiln_coll_thunk_buffer_t *b = &d->buffers[k];
    if (id) {
      st = slice_of(ba, in, 0, &b->recv);
      break;
    }
    const kiln_shape_t *rs = result_shape(in, k);
    if (!rs) {
      st = KILN_ERR_INVALID("%s '%s': its shape has no result %d", kiln_hlo_opcode_name(in->opcode),
                            in->name, k);
      break;
    }
    int leaf = result_leaf0 < 0 ? kiln_collective_result_leaf(in, k) : result_leaf0 + k;
    st = slice_of(ba, bufs->operands[k], 0, &b->send);
    if (!st) st = slice_of(ba, bufs, leaf, &b->recv);
    if (!st) st = fill_buffer(in, d, k, bufs->operands[k]->shape, rs, d->group_size[0]);
  }
  if (st) {
    kiln_coll_thunk_desc_destroy(d);
    return st;
  }
  kiln_thunk_seq_push(seq, kiln_thunk_collective_create(bufs->name, d));
  return KILN_STATUS_OK;
}

kiln_status kiln_collective_emit(const kiln_hlo_instruction_t *in,
                                 const kiln_buffer_assignment_t *ba, int num_replicas,
                                 int num_partitions, bool split, kiln_thunk_seq_t *seq) {
  return emit(in, in, -1, ba, num_replicas, num_partitions, start_phase(in, split), seq);
}

const kiln_hlo_instruction_t *kiln_collective_async_wrapped(const kiln_hlo_instruction_t *start) {
  if (start->opcode != KILN_OP_ASYNC_START) return NULL;
  const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(start, "calls");
  const kiln_hlo_instruction_t *x = c ? c->root : NULL;
  if (!x || x->num_operands != start->num_operands || x->num_operands != c->num_parameters)
    return NULL;
  switch (x->opcode) {
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_ALL_GATHER:
    case KILN_OP_REDUCE_SCATTER:
    case KILN_OP_ALL_TO_ALL:
    case KILN_OP_COLLECTIVE_PERMUTE:
    case KILN_OP_COLLECTIVE_BROADCAST:
      break;
    default:
      return NULL;
  }
  for (int k = 0; k < x->num_operands; k++)
    if (x->operands[k] != c->parameters[k] || !kiln_shape_is_array(x->operands[k]->shape))
      return NULL;
  return x;
}

kiln_status kiln_collective_emit_async(const kiln_hlo_instruction_t *start,
                                       const kiln_buffer_assignment_t *ba, int num_replicas,
                                       int num_partitions, bool split, kiln_thunk_seq_t *seq) {
  const kiln_hlo_instruction_t *x = kiln_collective_async_wrapped(start);
  if (!x)
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "async-start '%s' does not wrap a collective of its parameters (the "
                            "other async computations are inlined by call_inline)",
                            start->name);
  /* ((operands...), results, context...): the results follow the operands' leaves. */
  int first = kiln_shape_num_leaves(start->shape->elements[0]);
  return emit(x, start, first, ba, num_replicas, num_partitions, start_phase(start, split), seq);
}

kiln_status kiln_collective_emit_done(const kiln_hlo_instruction_t *done,
                                      const kiln_buffer_assignment_t *ba, int num_replicas,
                                      int num_partitions, bool split, kiln_thunk_seq_t *seq) {
  const kiln_hlo_instruction_t *start = done->num_operands == 1 ? done->operands[0] : NULL;
  if (!split || !start || kiln_hlo_async_split_done(start) != done) return KILN_STATUS_OK;
  if (start->opcode != KILN_OP_ASYNC_START)
    return emit(start, start, -1, ba, num_replicas, num_partitions, KILN_COLL_PHASE_DONE, seq);
  const kiln_hlo_instruction_t *x = kiln_collective_async_wrapped(start);
  if (!x) return KILN_STATUS_OK; /* the start was refused */
  int first = kiln_shape_num_leaves(start->shape->elements[0]);
  return emit(x, start, first, ba, num_replicas, num_partitions, KILN_COLL_PHASE_DONE, seq);
}
