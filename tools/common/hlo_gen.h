/* Random valid HLO modules for differential testing (kiln-fuzz, tests/test_fuzz_*.c), in the
 * spirit of Csmith and YARPGen: a seeded generator draws a small program from the opcode table
 * and the shape rules (elementwise chains with broadcasts and converts, reductions and
 * reduce-windows over random dimension sets with the add / multiply / maximum / minimum /
 * and / or reducers, transposes, reshapes, reverses, slices, pads, concatenates, dynamic
 * slices and updates, gathers and scatters, dots, convolutions, sorts, bounded while loops,
 * conditionals, tuples, iotas, clamps, bitcast-converts; erf, tan, the hyperbolic and inverse
 * trigonometric functions on in-domain operands, complex, map, call, select-and-scatter, topk,
 * fft, cholesky and triangular-solve of well-conditioned matrices, reduce-precision,
 * batch-norm-*, a built-in custom-call, rng-bit-generator, collectives on a world of one,
 * opt-barrier, stochastic-convert, ragged-dot) over every array element type, with
 * odd sizes (1, primes, 2^k +- 1, sometimes 0), degenerate dimensions and non-default layouts.
 * The same options always give the same program, so a seed is a reproducer.
 *
 * Index operands of gathers and scatters are entry parameters, which the fake-argument
 * generator (fake_args.h) fills with in-range starts; reduction inits are parameters too, so
 * they get the reducer's identity. Dynamic-slice starts are constants, sometimes out of range
 * (the clamping is part of the semantics under test).
 *
 * A program is a list of nodes (each one instruction, plus the computations it calls) that
 * renders to HLO text; the minimizer shrinks the failing program itself (one root, then
 * instructions bypassed or whole subtrees replaced by parameters of their shape, then the
 * dimensions of its text) while a predicate still holds. Not thread-safe per program; distinct
 * programs are independent. */
#ifndef KILN_TOOLS_COMMON_HLO_GEN_H_
#define KILN_TOOLS_COMMON_HLO_GEN_H_

#include <stdbool.h>
#include <stdint.h>

typedef struct kiln_hlo_gen_options {
  uint64_t seed;
  int max_nodes;        /* operations drawn (not counting parameters); 0: 10 */
  int64_t max_elements; /* elements of any array; 0: 1024 */
} kiln_hlo_gen_options_t;

typedef struct kiln_hlo_gen_program kiln_hlo_gen_program_t;

/* Draws a program. Never fails (allocation failure aborts, as for any tool). */
kiln_hlo_gen_program_t *kiln_hlo_gen_make(const kiln_hlo_gen_options_t *o);
kiln_hlo_gen_program_t *kiln_hlo_gen_clone(const kiln_hlo_gen_program_t *p);
void kiln_hlo_gen_free(kiln_hlo_gen_program_t *p);

/* The module text (kiln_free it). Only what the root reaches is printed. */
char *kiln_hlo_gen_render(const kiln_hlo_gen_program_t *p);
/* Instructions the rendered text holds in its entry computation. */
int kiln_hlo_gen_size(const kiln_hlo_gen_program_t *p);

/* Float divides the rendered text holds; *inexact_divisors (if not NULL) gets how many of them
 * divide by a value carrying float rounding, which the generator never draws (a cancelling
 * sum's unbounded relative error passes whole into the quotient). */
int kiln_hlo_gen_float_divides(const kiln_hlo_gen_program_t *p, int *inexact_divisors);

/* Whether `text` still shows the failure being minimized. */
typedef bool (*kiln_hlo_gen_predicate_fn)(void *ctx, const char *text);

/* Shrinks the failing program `*p` itself (replacing it) while `fails` holds on its text: a
 * single root, then instructions dropped (a node bypassed for an operand of its shape, or its
 * subtree replaced by a parameter); at most `max_tries` predicate calls. Returns the number
 * of calls made. */
int kiln_hlo_gen_minimize(kiln_hlo_gen_program_t **p, kiln_hlo_gen_predicate_fn fails, void *ctx,
                          int max_tries);

/* Shrinks the shapes of module text `text` while `fails` holds: every dimension of one size
 * (largest first) made 1, else half, else one less, in all shapes at once; where that fails,
 * the same with the size also changed where attributes name it (slice starts and limits,
 * window sizes, slice_sizes, dynamic_slice_sizes, fft_length). A candidate whose attributes
 * no longer fit does not verify, so `fails` rejects it. Adds its predicate calls
 * to *tries (at most max_tries in all). Returns the smallest failing text (kiln_free it). */
char *kiln_hlo_gen_shrink_dims(const char *text, kiln_hlo_gen_predicate_fn fails, void *ctx,
                               int max_tries, int *tries);

#endif /* KILN_TOOLS_COMMON_HLO_GEN_H_ */
