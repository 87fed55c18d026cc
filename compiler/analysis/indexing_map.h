/* Indexing maps: the shared language for index arithmetic (DESIGN.md, principle 3).
 *
 * A map sends dimension variables (d0, d1, ...) to result expressions, with range
 * symbols [s0, ...] and runtime variables {rt0, ...} as extra inputs, over a domain: an
 * inclusive interval per variable plus constraints `expr in [lo, hi]`. Text form:
 *
 *   (d0, d1)[s0] -> (d1, d0 floordiv 8 + s0), domain: d0 in [0, 31], d1 in [0, 7],
 *   s0 in [0, 3], d0 mod 8 in [0, 0]
 *
 * Variables may be given names ("(th_x, bl_x)[v] -> ..."); names are kept for printing.
 * Runtime variables follow the symbols: "(d0)[s0]{rt0} -> ...". A variable left out of
 * the domain is unbounded (printed intervals never mention an unbounded variable).
 * Printing is canonical: results and constraints use the expression printer's term order,
 * constraints are sorted, so equal maps print equal strings and parse(print(m)) prints
 * the same text.
 *
 * Meaning: for a point (d, s, rt) that lies in every interval and satisfies every
 * constraint, the map yields results(d, s, rt). A map whose domain is provably empty is
 * "known empty" and prints its domain as "KNOWN EMPTY".
 *
 * Ownership: a map is created by the functions below and owned by the caller, who frees
 * it with kiln_indexing_map_free. Its expressions and names live in the affine context
 * it was built with, which must outlive it. */
#ifndef KILN_COMPILER_ANALYSIS_INDEXING_MAP_H_
#define KILN_COMPILER_ANALYSIS_INDEXING_MAP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"
#include "base/vec.h"
#include "compiler/analysis/affine_expr.h"

typedef struct kiln_interval {
  int64_t lo, hi; /* inclusive; lo > hi is empty; INT64_MIN/INT64_MAX mean unbounded */
} kiln_interval_t;

#define KILN_INTERVAL_FULL ((kiln_interval_t){INT64_MIN, INT64_MAX})

static inline bool kiln_interval_is_full(kiln_interval_t i) {
  return i.lo == INT64_MIN && i.hi == INT64_MAX;
}
static inline bool kiln_interval_is_empty(kiln_interval_t i) { return i.lo > i.hi; }

typedef enum kiln_indexing_var_kind {
  KILN_INDEXING_DIM = 0,
  KILN_INDEXING_SYM = 1,
  KILN_INDEXING_RT = 2,
} kiln_indexing_var_kind_t;

typedef struct kiln_indexing_var {
  const char *name; /* NULL: default name d<i> / s<i> / rt<i>; lives in the ctx arena */
  kiln_interval_t bounds;
} kiln_indexing_var_t;

typedef struct kiln_indexing_constraint {
  kiln_affine_expr_t *expr;
  kiln_interval_t range;
} kiln_indexing_constraint_t;

typedef KILN_VEC(kiln_indexing_var_t) kiln_indexing_var_vec_t;

typedef struct kiln_indexing_map {
  kiln_affine_ctx_t *ctx; /* borrowed */
  kiln_indexing_var_vec_t vars[3]; /* indexed by kiln_indexing_var_kind_t */
  KILN_VEC(kiln_affine_expr_t *) results;
  KILN_VEC(kiln_indexing_constraint_t) constraints;
  bool known_empty;
} kiln_indexing_map_t;

static inline size_t kiln_indexing_map_num_dims(const kiln_indexing_map_t *m) {
  return m->vars[KILN_INDEXING_DIM].len;
}
static inline size_t kiln_indexing_map_num_syms(const kiln_indexing_map_t *m) {
  return m->vars[KILN_INDEXING_SYM].len;
}
static inline size_t kiln_indexing_map_num_rts(const kiln_indexing_map_t *m) {
  return m->vars[KILN_INDEXING_RT].len;
}
static inline size_t kiln_indexing_map_num_results(const kiln_indexing_map_t *m) {
  return m->results.len;
}

/* ---- construction (indexing_map.c) ---- */

/* A map with the given variables (unbounded, unnamed), no results, no constraints. */
kiln_indexing_map_t *kiln_indexing_map_create(kiln_affine_ctx_t *ctx, size_t ndims,
                                              size_t nsyms, size_t nrts);
void kiln_indexing_map_free(kiln_indexing_map_t *m);
kiln_indexing_map_t *kiln_indexing_map_clone(const kiln_indexing_map_t *m);
void kiln_indexing_map_add_result(kiln_indexing_map_t *m, kiln_affine_expr_t *e);
void kiln_indexing_map_add_constraint(kiln_indexing_map_t *m, kiln_affine_expr_t *e,
                                      int64_t lo, int64_t hi);
void kiln_indexing_map_set_bounds(kiln_indexing_map_t *m, kiln_indexing_var_kind_t kind,
                                  size_t i, int64_t lo, int64_t hi);
/* Names a variable (copied into the ctx arena). INVALID_ARGUMENT unless `name` is an
 * identifier that is not a keyword (floordiv, ceildiv, mod, min, max, in, domain). NULL
 * restores the default name. */
kiln_status kiln_indexing_map_set_name(kiln_indexing_map_t *m, kiln_indexing_var_kind_t kind,
                                       size_t i, const char *name);

/* Identity over a shape: (d0, ..., dn-1) -> (d0, ..., dn-1), d_i in [0, shape[i]-1]. */
kiln_indexing_map_t *kiln_indexing_map_identity(kiln_affine_ctx_t *ctx, const int64_t *shape,
                                                size_t rank);
/* Row-major delinearization of `linear` into `shape` (rank >= 1): writes rank
 * expressions: out[0] = linear floordiv (s1*...*sn-1), ..., out[rank-1] = linear mod sn-1.
 * The first index is not reduced mod shape[0] (it is in range when linear is). */
void kiln_affine_delinearize(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *linear,
                             const int64_t *shape, size_t rank, kiln_affine_expr_t **out);
/* Row-major linearization: sum_i idx[i] * stride_i. */
kiln_affine_expr_t *kiln_affine_linearize(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *const *idx,
                                          const int64_t *shape, size_t rank);

/* ---- text (indexing_map.c, indexing_map_parse.c) ---- */

/* Appends the canonical text to `out`. */
void kiln_indexing_map_print(const kiln_indexing_map_t *m, kiln_strbuf_t *out);
/* Returns the canonical text; the caller frees it with kiln_free. */
char *kiln_indexing_map_to_string(const kiln_indexing_map_t *m);
/* Parses the text form into a new map (owned by the caller) built in `ctx`. On bad input
 * returns INVALID_ARGUMENT "line:col: expected <what>, found <what>" and sets *out to
 * NULL. Input nesting is limited (deep nesting is an error, not a stack overflow). */
kiln_status kiln_indexing_map_parse(kiln_affine_ctx_t *ctx, const char *text,
                                    kiln_indexing_map_t **out);
/* Parses one expression over the default variable names (d<i>, s<i>, rt<i>). */
kiln_status kiln_affine_parse(kiln_affine_ctx_t *ctx, const char *text,
                              kiln_affine_expr_t **out);

/* ---- evaluation and brute force (indexing_map.c) ---- */

/* True when the point lies in every interval and satisfies every constraint. */
bool kiln_indexing_map_contains(const kiln_indexing_map_t *m, const int64_t *dims,
                                const int64_t *syms, const int64_t *rts);
/* Evaluates all results at a point (out has num_results entries). False on overflow or
 * division by zero. Does not check the domain. */
bool kiln_indexing_map_eval(const kiln_indexing_map_t *m, const int64_t *dims,
                            const int64_t *syms, const int64_t *rts, int64_t *out);

/* Called for every point of the domain, in lexicographic order (dims, then symbols,
 * then runtime vars, last index fastest); `results` holds the evaluated results. Return
 * false to stop. */
typedef bool (*kiln_indexing_point_fn)(void *user, const int64_t *dims, const int64_t *syms,
                                       const int64_t *rts, const int64_t *results);
/* Enumerates the domain by brute force. OUT_OF_RANGE if a variable is unbounded or the
 * box holds more than max_points points; INVALID_ARGUMENT if a result cannot be
 * evaluated at a domain point. */
kiln_status kiln_indexing_map_for_each_point(const kiln_indexing_map_t *m, uint64_t max_points,
                                             kiln_indexing_point_fn fn, void *user);
/* Brute-force test (for tests; small domains only): is the map, taking (d, s, rt) as
 * input, a bijection from its domain onto the box [0, sizes[i]) of the results? */
kiln_status kiln_indexing_map_is_bijection_brute(const kiln_indexing_map_t *m,
                                                 const int64_t *sizes, uint64_t max_points,
                                                 bool *out);

/* ---- transformations ---- */

/* Composition: a: x -> y then b: y -> z gives x -> z = b(a(x)). Requires
 * num_results(a) == num_dims(b) and the same context. The result has a's dims, the
 * symbols of a followed by those of b (likewise runtime vars), a's constraints, b's dim
 * intervals as constraints on a's results, and b's constraints with a substituted. It is
 * not simplified. *out is a new map owned by the caller. (indexing_map.c) */
kiln_status kiln_indexing_map_compose(const kiln_indexing_map_t *a, const kiln_indexing_map_t *b,
                                      kiln_indexing_map_t **out);

/* Removes range symbols and runtime vars that occur in no result and no constraint
 * (renumbering the rest). Returns true if anything was removed. (indexing_map.c) */
bool kiln_indexing_map_remove_unused_symbols(kiln_indexing_map_t *m);

/* For each constraint `s mod k in [c, c]` on a range symbol s, substitutes
 * s = s' * k + c (s' a fresh range with the matching interval) and drops the constraint.
 * The set of (dims -> results) pairs is unchanged. Returns true if anything changed.
 * (indexing_map_simplify.c) */
bool kiln_indexing_map_rescale_symbols(kiln_indexing_map_t *m);

/* Simplifies results and constraints to a fixed point without changing the map's
 * meaning (see indexing_map_simplify.c for the rules); tightens variable intervals from
 * single-variable constraints and detects empty domains. Returns true if anything
 * changed. */
bool kiln_indexing_map_simplify(kiln_indexing_map_t *m);
/* Simplifies one expression against the map's domain (the map is not changed). */
kiln_affine_expr_t *kiln_indexing_map_simplify_expr(const kiln_indexing_map_t *m,
                                                    kiln_affine_expr_t *e);
/* Sound bounds of `e` over the map's variable intervals: every value e takes at a domain
 * point lies in the interval (which may be wider than necessary; full if unknown). */
kiln_interval_t kiln_indexing_map_bounds(const kiln_indexing_map_t *m, const kiln_affine_expr_t *e);
/* True if the domain is provably empty (an empty variable interval, or a constraint that
 * no point of the intervals can satisfy). Sets m->known_empty when so. False means
 * "not proven empty". */
bool kiln_indexing_map_check_empty(kiln_indexing_map_t *m);

#endif /* KILN_COMPILER_ANALYSIS_INDEXING_MAP_H_ */
