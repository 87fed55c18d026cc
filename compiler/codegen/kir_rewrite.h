/* Internal to compiler/codegen: the rewriting machinery the kernel-IR stages share.
 *
 * A stage rebuilds each function body op by op into a fresh region: a value mapping sends
 * old values to new ones, a handler may replace an op by other ops (setting the mapping of
 * the op's results), and every op the handler leaves alone is cloned with mapped operands
 * (its regions rewritten recursively through the same handler). The new ops then replace
 * the old ones in the function body. Dead pure ops are removed afterwards. */
#ifndef KILN_COMPILER_CODEGEN_KIR_REWRITE_H_
#define KILN_COMPILER_CODEGEN_KIR_REWRITE_H_

#include "compiler/codegen/kir.h"

typedef struct kir_rewriter kir_rewriter_t;

/* Returns true when it emitted a replacement for `op` (and mapped its results). */
typedef bool (*kir_rewrite_fn)(kir_rewriter_t *rw, kiln_kir_op_t *op);
/* Optional: the new type of a value (e.g. flattened tensors); NULL keeps types. */
typedef const kiln_kir_type_t *(*kir_type_fn)(kir_rewriter_t *rw, const kiln_kir_type_t *t);

struct kir_rewriter {
  kiln_kir_module_t *m;
  kiln_kir_builder_t b;
  kiln_kir_func_t *func;      /* function being rewritten */
  kiln_kir_value_t **map;     /* by old value id */
  size_t map_cap;
  kir_rewrite_fn fn;
  kir_type_fn type_fn;
  void *user;
  kiln_status status;
};

kiln_kir_value_t *kir_map(kir_rewriter_t *rw, kiln_kir_value_t *old);
void kir_map_set(kir_rewriter_t *rw, kiln_kir_value_t *old, kiln_kir_value_t *new_value);
/* Clones `op` at the insertion point with mapped operands and regions rewritten. */
kiln_kir_op_t *kir_clone_op(kir_rewriter_t *rw, kiln_kir_op_t *op);
/* Rewrites all ops of `src` at the insertion point. */
void kir_rewrite_ops(kir_rewriter_t *rw, const kiln_kir_region_t *src);
/* Rewrites all ops of `src` but the terminator; returns the terminator's mapped operands
 * (an array in the module arena with src's terminator operand count entries). */
kiln_kir_value_t **kir_rewrite_body(kir_rewriter_t *rw, const kiln_kir_region_t *src,
                                    uint32_t *num_yielded);
/* Records an error (first one wins). */
void kir_rewrite_fail(kir_rewriter_t *rw, kiln_status s);

/* Rewrites every function of `m` (each body rebuilt), then removes dead pure ops and
 * verifies. */
kiln_status kir_rewrite_module(kiln_kir_module_t *m, kir_rewrite_fn fn, kir_type_fn type_fn,
                               void *user);

/* Removes ops without side effects whose results are unused, in every function. */
void kir_dce(kiln_kir_module_t *m);

/* The integer value of a CONSTANT of index/integer type. */
bool kir_const_value(const kiln_kir_value_t *v, int64_t *out);
/* True when `v` is defined inside `r` or a region nested in it. */
bool kir_defined_in(const kiln_kir_value_t *v, const kiln_kir_region_t *r);
/* A copy of `src` (vars, bounds, constraints optional) with the given results, owned by m. */
kiln_indexing_map_t *kir_map_with_results(kiln_kir_module_t *m, const kiln_indexing_map_t *src,
                                          kiln_affine_expr_t *const *results, size_t n,
                                          bool keep_constraints);

#endif /* KILN_COMPILER_CODEGEN_KIR_REWRITE_H_ */
