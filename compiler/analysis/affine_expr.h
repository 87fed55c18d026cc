/* Symbolic affine expressions for indexing maps.
 *
 * An expression ranges over dimension variables d_i, range symbols s_j and runtime
 * variables rt_k, built from integer constants, sums, products, floordiv, ceildiv, mod,
 * min and max. Every expression lives in a context (kiln_affine_ctx_t) that owns an arena
 * and hash-conses nodes: two expressions built in the same context are structurally equal
 * exactly when their pointers are equal. Expressions are immutable and are freed all at
 * once with the context; no function here hands the caller anything to free, except the
 * context itself.
 *
 * Constructors apply only domain-independent, meaning-preserving canonicalization:
 * constant folding, x*1, x*0, x floordiv 1, x mod 1, flattening of nested sums, merging
 * of like terms, constant coefficients distributed over sums, and a canonical term order
 * (non-variable terms first, then dims, symbols and runtime vars by index, the constant
 * last). When folding would overflow int64, the node is kept unfolded (meaning is kept:
 * evaluating it reports the overflow). Everything that needs the domain lives in the
 * indexing-map simplifier. */
#ifndef KILN_COMPILER_ANALYSIS_AFFINE_EXPR_H_
#define KILN_COMPILER_ANALYSIS_AFFINE_EXPR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/str.h"

typedef enum kiln_affine_kind {
  KILN_AFFINE_CONST = 0,
  KILN_AFFINE_DIM,
  KILN_AFFINE_SYM,
  KILN_AFFINE_RT,
  KILN_AFFINE_ADD, /* n-ary; canonical term order; constant (if any) last */
  KILN_AFFINE_MUL, /* binary; a constant factor is always the right operand */
  KILN_AFFINE_FLOORDIV,
  KILN_AFFINE_CEILDIV,
  KILN_AFFINE_MOD,
  KILN_AFFINE_MIN, /* n-ary */
  KILN_AFFINE_MAX, /* n-ary */
} kiln_affine_kind_t;

/* Read-only view of a node. Never write to one: nodes are shared. */
typedef struct kiln_affine_expr kiln_affine_expr_t;
struct kiln_affine_expr {
  kiln_affine_kind_t kind;
  uint32_t n;           /* operand count */
  int64_t value;        /* CONST: the value; DIM/SYM/RT: the index */
  uint64_t hash;
  kiln_affine_expr_t *chain; /* hash-cons bucket chain (private) */
  kiln_affine_expr_t *ops[]; /* n operands */
};

typedef struct kiln_affine_ctx kiln_affine_ctx_t;

/* Creates an empty context; the caller owns it and frees it with
 * kiln_affine_ctx_destroy, which frees every expression built in it. */
kiln_affine_ctx_t *kiln_affine_ctx_create(void);
void kiln_affine_ctx_destroy(kiln_affine_ctx_t *ctx);
/* The context's arena (for data with the context's lifetime, e.g. variable names). */
kiln_arena_t *kiln_affine_ctx_arena(kiln_affine_ctx_t *ctx);
/* Number of distinct nodes ever created in the context. */
size_t kiln_affine_ctx_node_count(const kiln_affine_ctx_t *ctx);

/* Constructors. All return borrowed pointers owned by `ctx`. */
kiln_affine_expr_t *kiln_affine_const(kiln_affine_ctx_t *ctx, int64_t v);
kiln_affine_expr_t *kiln_affine_dim(kiln_affine_ctx_t *ctx, int64_t i);
kiln_affine_expr_t *kiln_affine_sym(kiln_affine_ctx_t *ctx, int64_t i);
kiln_affine_expr_t *kiln_affine_rt(kiln_affine_ctx_t *ctx, int64_t i);
kiln_affine_expr_t *kiln_affine_add(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b);
kiln_affine_expr_t *kiln_affine_sub(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b);
/* Sum of n expressions (n == 0 gives 0). */
kiln_affine_expr_t *kiln_affine_sum(kiln_affine_ctx_t *ctx, size_t n,
                                    kiln_affine_expr_t *const *terms);
kiln_affine_expr_t *kiln_affine_mul(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b);
kiln_affine_expr_t *kiln_affine_mul_const(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                          int64_t k);
kiln_affine_expr_t *kiln_affine_add_const(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                          int64_t k);
kiln_affine_expr_t *kiln_affine_neg(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a);
kiln_affine_expr_t *kiln_affine_floordiv(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                         kiln_affine_expr_t *b);
kiln_affine_expr_t *kiln_affine_ceildiv(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                        kiln_affine_expr_t *b);
kiln_affine_expr_t *kiln_affine_mod(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b);
kiln_affine_expr_t *kiln_affine_min(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b);
kiln_affine_expr_t *kiln_affine_max(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b);
/* Builds a node of `kind` from operands (n == 2 for binary kinds, n >= 1 for
 * ADD/MIN/MAX) through the canonicalizing constructors above. */
kiln_affine_expr_t *kiln_affine_build(kiln_affine_ctx_t *ctx, kiln_affine_kind_t kind,
                                      size_t n, kiln_affine_expr_t *const *ops);

static inline bool kiln_affine_is_const(const kiln_affine_expr_t *e) {
  return e->kind == KILN_AFFINE_CONST;
}
static inline bool kiln_affine_is_var(const kiln_affine_expr_t *e) {
  return e->kind == KILN_AFFINE_DIM || e->kind == KILN_AFFINE_SYM || e->kind == KILN_AFFINE_RT;
}

/* Splits a sum term into atom * coefficient: MUL(x, k) gives (x, k); a constant c gives
 * (NULL, c); anything else (x, 1). */
kiln_affine_expr_t *kiln_affine_term_split(kiln_affine_expr_t *term, int64_t *coef);

/* Total, deterministic (pointer-independent) structural order; 0 only for equal
 * expressions. This is the order sums print their terms in. */
int kiln_affine_compare(const kiln_affine_expr_t *a, const kiln_affine_expr_t *b);

/* Evaluates at concrete values (floor semantics for floordiv and mod, so
 * -7 floordiv 2 == -4 and -7 mod 2 == 1; ceildiv rounds up). Returns false on division
 * by zero or int64 overflow, leaving *out unspecified. Arrays may be NULL if the
 * expression has no variables of that kind. */
bool kiln_affine_eval(const kiln_affine_expr_t *e, const int64_t *dims, const int64_t *syms,
                      const int64_t *rts, int64_t *out);

/* Scalar helpers with the same semantics (return false on overflow / zero divisor). */
bool kiln_affine_floordiv_i64(int64_t a, int64_t b, int64_t *out);
bool kiln_affine_ceildiv_i64(int64_t a, int64_t b, int64_t *out);
bool kiln_affine_mod_i64(int64_t a, int64_t b, int64_t *out);

/* Rebuilds `e` with every variable replaced: dims[i] for d_i (NULL array or NULL entry:
 * keep), likewise syms and rts. Replacements must belong to `ctx`. */
kiln_affine_expr_t *kiln_affine_replace(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *e,
                                        kiln_affine_expr_t *const *dims, size_t ndims,
                                        kiln_affine_expr_t *const *syms, size_t nsyms,
                                        kiln_affine_expr_t *const *rts, size_t nrts);

/* Variable usage: sets used[i] = true for each d_i (resp. s_j, rt_k) that occurs in e,
 * for indices below the given counts. Arrays may be NULL. */
void kiln_affine_collect_vars(const kiln_affine_expr_t *e, bool *dims, size_t ndims,
                              bool *syms, size_t nsyms, bool *rts, size_t nrts);

/* Variable names used when printing. A NULL array or NULL entry prints the default
 * name d<i>, s<i> or rt<i>. */
typedef struct kiln_affine_names {
  const char *const *dims;
  size_t ndims;
  const char *const *syms;
  size_t nsyms;
  const char *const *rts;
  size_t nrts;
} kiln_affine_names_t;

/* Appends the canonical text of `e` to `out` ("(d0 mod 8) * 512 + d1 * 4 + s0"). */
void kiln_affine_print(const kiln_affine_expr_t *e, const kiln_affine_names_t *names,
                       kiln_strbuf_t *out);
/* Returns the text of `e` in the context's arena (default names); borrowed. */
const char *kiln_affine_to_string(kiln_affine_ctx_t *ctx, const kiln_affine_expr_t *e);

#endif /* KILN_COMPILER_ANALYSIS_AFFINE_EXPR_H_ */
