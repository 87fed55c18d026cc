/* Stage 5: unroll `for` loops with constant bounds and at most `max_trip` iterations (the
 * emitter document's optimize_loops: the vector loop disappears), unless that would put more
 * than KIR_UNROLL_MAX_IFS `if`s in straight-line code or the loop holds one that stays a loop
 * (below). The induction variable
 * becomes a constant per copy; lane operands of vextract / vinsert that become constants are
 * folded into the op (printed `[2]`). */
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/kir_rewrite.h"

typedef struct unroll_user {
  int max_trip;
} unroll_user_t;

/* At most this many `if`s in the straight-line code that unrolling one loop nest makes. A
 * kernel body of many conditional blocks in sequence, each reading memory and feeding the
 * next (a padded reduce-window: one in-bounds test per window element), sends LLVM 19's loop
 * vectorizer into superlinear work: 32 of them with f8e3m4 maximum compile in 0.3 s of CPU,
 * 48 (kiln-fuzz seed 700182, window 2x3x4x2) in 15-17 s, 64 in over a minute. Loops without
 * an `if` unroll as before. */
#define KIR_UNROLL_MAX_IFS 16

static bool unroll_trips(kir_rewriter_t *rw, const kiln_kir_op_t *op, int64_t *lb, int64_t *step,
                         int64_t *trips) {
  int64_t ub;
  if (!kir_const_value(kir_map(rw, op->operands[0]), lb) ||
      !kir_const_value(kir_map(rw, op->operands[1]), &ub) ||
      !kir_const_value(kir_map(rw, op->operands[2]), step) || *step <= 0)
    return false;
  *trips = ub > *lb ? (ub - *lb + *step - 1) / *step : 0;
  return true;
}

/* The `if`s that unrolling would put in `r`'s straight-line code: each `if` and what its
 * branches hold, times the trips of each loop inside that will be unrolled too (a loop that
 * stays a loop keeps its `if`s in its own body). Saturates above the limit. */
static int64_t unrolled_ifs(kir_rewriter_t *rw, const kiln_kir_region_t *r, int max_trip) {
  int64_t n = 0;
  for (size_t i = 0; i < r->ops.len && n <= KIR_UNROLL_MAX_IFS; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_FOR) {
      int64_t lb, step, trips;
      if (!unroll_trips(rw, op, &lb, &step, &trips) || trips > max_trip) continue;
      int64_t body = unrolled_ifs(rw, op->regions[0], max_trip);
      if (trips * body <= KIR_UNROLL_MAX_IFS) n += trips * body;
      continue;
    }
    n += op->opcode == KILN_KIR_IF;
    for (uint32_t k = 0; k < op->num_regions; k++) n += unrolled_ifs(rw, op->regions[k], max_trip);
  }
  return n;
}

static bool holds_kept_loop(kir_rewriter_t *rw, const kiln_kir_region_t *r, int max_trip);

/* Whether `for` op `op` stays a loop: bounds not constant, more than max_trip trips, too many
 * `if`s once unrolled, or more than one trip around a loop that stays a loop (one trip is no
 * copy: that loop always goes). */
static bool stays_loop(kir_rewriter_t *rw, const kiln_kir_op_t *op, int max_trip) {
  int64_t lb, step, trips;
  if (!unroll_trips(rw, op, &lb, &step, &trips) || trips > max_trip) return true;
  const kiln_kir_region_t *body = op->regions[0];
  return trips * unrolled_ifs(rw, body, max_trip) > KIR_UNROLL_MAX_IFS ||
         (trips > 1 && holds_kept_loop(rw, body, max_trip));
}

/* Whether region `r` holds (at any depth) a `for` that stays a loop. A loop around one is not
 * unrolled: its copies would each hold the inner loop, which LLVM then fully unrolls or
 * vectorizes copy by copy, and the straight-line result is what its optimizer is slowest on
 * (a 3x3 window around a 32-channel s8 convolution loop became 9 unrolled 32-load chains:
 * GVN's memory-dependence walk was 51% of a 1.2 G-instruction compile) while the loop it
 * saves runs once per inner loop. */
static bool holds_kept_loop(kir_rewriter_t *rw, const kiln_kir_region_t *r, int max_trip) {
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_FOR && stays_loop(rw, op, max_trip)) return true;
    for (uint32_t k = 0; k < op->num_regions; k++) /* an unrolled loop's body is copied */
      if (holds_kept_loop(rw, op->regions[k], max_trip)) return true;
  }
  return false;
}

static bool unroll_op(kir_rewriter_t *rw, kiln_kir_op_t *op) {
  unroll_user_t *u = rw->user;
  kiln_kir_builder_t *b = &rw->b;
  if (op->opcode == KILN_KIR_VEXTRACT || op->opcode == KILN_KIR_VINSERT) {
    size_t vi = op->opcode == KILN_KIR_VINSERT;
    int64_t lane;
    if (op->lane >= 0 || !kir_const_value(kir_map(rw, op->operands[vi + 1]), &lane)) return false;
    kiln_kir_value_t *vec = kir_map(rw, op->operands[vi]);
    kiln_kir_value_t *r = vi ? kiln_kir_vinsert(b, kir_map(rw, op->operands[0]), vec, NULL, lane)
                             : kiln_kir_vextract(b, vec, NULL, lane);
    if (!r) {
      kir_rewrite_fail(rw, kiln_kir_builder_take_status(b));
      return true;
    }
    r->name = op->results[0]->name;
    kir_map_set(rw, op->results[0], r);
    return true;
  }
  if (op->opcode != KILN_KIR_FOR) return false;
  int64_t lb = 0, step = 1, trips = 0;
  if (stays_loop(rw, op, u->max_trip)) return false;
  unroll_trips(rw, op, &lb, &step, &trips);
  const kiln_kir_region_t *body = op->regions[0];
  uint32_t niter = op->num_results;
  kiln_kir_value_t **cur = kiln_arena_alloc(&rw->m->arena, sizeof(*cur) * (niter + 1));
  for (uint32_t i = 0; i < niter; i++) cur[i] = kir_map(rw, op->operands[3 + i]);
  for (int64_t k = 0; k < trips; k++) {
    kir_map_set(rw, body->args[0], kiln_kir_const_index(b, lb + k * step));
    for (uint32_t i = 0; i < niter; i++) kir_map_set(rw, body->args[1 + i], cur[i]);
    uint32_t n = 0;
    cur = kir_rewrite_body(rw, body, &n);
  }
  for (uint32_t i = 0; i < niter; i++) kir_map_set(rw, op->results[i], cur[i]);
  return true;
}

kiln_status kiln_kir_unroll(kiln_kir_module_t *m, int max_trip) {
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before kir unroll");
  unroll_user_t u = {max_trip};
  KILN_RETURN_IF_ERROR(kir_rewrite_module(m, unroll_op, NULL, &u), "in kir unroll");
  return NULL;
}
