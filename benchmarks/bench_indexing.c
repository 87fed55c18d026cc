/* Indexing-map benchmark: builds realistic chains of maps (the loop emitter's launch map
 * composed with reshape, transpose and broadcast output-to-input maps over shapes of rank
 * 1-4), composes and simplifies them, and prints maps/second. Deterministic (seeded).
 *
 *   bench_indexing [chains]        (default 20000)
 *
 * Times are this process's CPU time. Reported: the rate of compose+simplify, and as a baseline in the same run the rate of
 * composing alone (so the ratio is the simplifier's cost). Every 64th chain is spot-checked:
 * simplified and unsimplified maps must agree on sampled domain points. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/alloc.h"
#include "compiler/analysis/indexing_map.h"

typedef struct rng {
  uint64_t s;
} rng_t;
static uint64_t rng_next(rng_t *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}
static int64_t rng_range(rng_t *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: other jobs share the machine */
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define MAX_RANK 4

typedef struct shape {
  int64_t d[MAX_RANK];
  size_t rank;
} shape_t;

static int64_t num_elements(const shape_t *s) {
  int64_t n = 1;
  for (size_t i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

static const int64_t kDims[] = {1, 2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 512, 1024};

static shape_t random_shape(rng_t *r) {
  shape_t s = {{0}, (size_t)rng_range(r, 1, MAX_RANK)};
  for (;;) {
    for (size_t i = 0; i < s.rank; i++) s.d[i] = kDims[rng_range(r, 0, 12)];
    if (num_elements(&s) <= (1 << 24) && num_elements(&s) >= 64) return s;
  }
}

/* Another factorization of the same element count (for reshapes). */
static shape_t refactor(rng_t *r, const shape_t *s) {
  int64_t n = num_elements(s);
  shape_t o = {{0}, (size_t)rng_range(r, 1, MAX_RANK)};
  int64_t left = n;
  for (size_t i = 0; i + 1 < o.rank; i++) {
    int64_t f = 1;
    for (int tries = 0; tries < 8; tries++) {
      int64_t c = kDims[rng_range(r, 1, 12)];
      if (left % c == 0) {
        f = c;
        break;
      }
    }
    o.d[i] = f;
    left /= f;
  }
  o.d[o.rank - 1] = left;
  return o;
}

static kiln_indexing_map_t *reshape_map(kiln_affine_ctx_t *ctx, const shape_t *out, const shape_t *in) {
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, out->rank, 0, 0);
  kiln_affine_expr_t *dims[MAX_RANK], *idx[MAX_RANK];
  for (size_t i = 0; i < out->rank; i++) {
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, i, 0, out->d[i] - 1);
    dims[i] = kiln_affine_dim(ctx, (int64_t)i);
  }
  kiln_affine_delinearize(ctx, kiln_affine_linearize(ctx, dims, out->d, out->rank), in->d, in->rank, idx);
  for (size_t i = 0; i < in->rank; i++) kiln_indexing_map_add_result(m, idx[i]);
  return m;
}

/* Output-to-input map of a transpose producing `out` with permutation perm:
 * out dim i = in dim perm[i]. Sets *in to the operand shape. */
static kiln_indexing_map_t *transpose_map(kiln_affine_ctx_t *ctx, rng_t *r, const shape_t *out, shape_t *in) {
  size_t perm[MAX_RANK];
  for (size_t i = 0; i < out->rank; i++) perm[i] = i;
  for (size_t i = out->rank; i > 1; i--) {
    size_t j = (size_t)rng_range(r, 0, (int64_t)i - 1), t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, out->rank, 0, 0);
  in->rank = out->rank;
  kiln_affine_expr_t *res[MAX_RANK];
  for (size_t i = 0; i < out->rank; i++) {
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, i, 0, out->d[i] - 1);
    in->d[perm[i]] = out->d[i];
    res[perm[i]] = kiln_affine_dim(ctx, (int64_t)i);
  }
  for (size_t i = 0; i < out->rank; i++) kiln_indexing_map_add_result(m, res[i]);
  return m;
}

/* Broadcast: the operand keeps a subset of the output dims. */
static kiln_indexing_map_t *broadcast_map(kiln_affine_ctx_t *ctx, rng_t *r, const shape_t *out, shape_t *in) {
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, out->rank, 0, 0);
  in->rank = 0;
  for (size_t i = 0; i < out->rank; i++) {
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, i, 0, out->d[i] - 1);
    if (rng_range(r, 0, 2) != 0 || (i + 1 == out->rank && in->rank == 0)) {
      in->d[in->rank++] = out->d[i];
      kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, (int64_t)i));
    }
  }
  return m;
}

/* The loop emitter's launch map over `s`: (th_x, bl_x)[v] -> delinearized linear index. */
static kiln_indexing_map_t *launch_map(kiln_affine_ctx_t *ctx, const shape_t *s) {
  int64_t n = num_elements(s), vec = n % 4 == 0 ? 4 : 1, threads = 128;
  while (threads > 1 && n % (threads * vec) != 0) threads /= 2;
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, 2, 1, 0);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 0, 0, threads - 1);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 1, 0, n / (threads * vec) - 1);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, 0, 0, vec - 1);
  kiln_affine_expr_t *lin = kiln_affine_add(
      ctx,
      kiln_affine_add(ctx, kiln_affine_mul_const(ctx, kiln_affine_dim(ctx, 1), threads * vec),
                      kiln_affine_mul_const(ctx, kiln_affine_dim(ctx, 0), vec)),
      kiln_affine_sym(ctx, 0));
  kiln_affine_expr_t *idx[MAX_RANK];
  kiln_affine_delinearize(ctx, lin, s->d, s->rank, idx);
  for (size_t i = 0; i < s->rank; i++) kiln_indexing_map_add_result(m, idx[i]);
  return m;
}

#define CHAIN_LEN 4

typedef struct chain {
  kiln_indexing_map_t *maps[CHAIN_LEN + 1];
  size_t len;
} chain_t;

static void build_chain(kiln_affine_ctx_t *ctx, rng_t *r, chain_t *c) {
  shape_t s = random_shape(r);
  c->len = 0;
  c->maps[c->len++] = launch_map(ctx, &s);
  for (int i = 0; i < CHAIN_LEN; i++) {
    shape_t in;
    int kind = (int)rng_range(r, 0, 2);
    if (kind == 0) {
      in = refactor(r, &s);
      c->maps[c->len++] = reshape_map(ctx, &s, &in);
    } else if (kind == 1) {
      c->maps[c->len++] = transpose_map(ctx, r, &s, &in);
    } else {
      c->maps[c->len++] = broadcast_map(ctx, r, &s, &in);
    }
    s = in;
  }
}

static void free_chain(chain_t *c) {
  for (size_t i = 0; i < c->len; i++) kiln_indexing_map_free(c->maps[i]);
}

/* Composes the chain left to right; simplifies after each step when asked. */
static kiln_indexing_map_t *compose_chain(const chain_t *c, bool simplify) {
  kiln_indexing_map_t *acc = kiln_indexing_map_clone(c->maps[0]);
  if (simplify) kiln_indexing_map_simplify(acc);
  for (size_t i = 1; i < c->len; i++) {
    kiln_indexing_map_t *next = NULL;
    kiln_status st = kiln_indexing_map_compose(acc, c->maps[i], &next);
    if (st) {
      kiln_status_report(st, "bench_indexing: compose");
      exit(1);
    }
    kiln_indexing_map_free(acc);
    acc = next;
    if (simplify) {
      kiln_indexing_map_simplify(acc);
      kiln_indexing_map_remove_unused_symbols(acc);
    }
  }
  return acc;
}

/* Samples domain points of `raw` and checks `simp` agrees. Returns mismatches. */
static int spot_check(rng_t *r, const kiln_indexing_map_t *raw, const kiln_indexing_map_t *simp) {
  int bad = 0;
  int64_t d[2], s[1] = {0}, a[MAX_RANK], b[MAX_RANK];
  for (int k = 0; k < 64; k++) {
    for (size_t i = 0; i < 2; i++)
      d[i] = rng_range(r, raw->vars[0].data[i].bounds.lo, raw->vars[0].data[i].bounds.hi);
    s[0] = rng_range(r, raw->vars[1].data[0].bounds.lo, raw->vars[1].data[0].bounds.hi);
    bool in_raw = kiln_indexing_map_contains(raw, d, s, NULL);
    if (in_raw != kiln_indexing_map_contains(simp, d, s, NULL)) bad++;
    if (!in_raw) continue;
    kiln_indexing_map_eval(raw, d, s, NULL, a);
    kiln_indexing_map_eval(simp, d, s, NULL, b);
    for (size_t i = 0; i < raw->results.len; i++) bad += a[i] != b[i];
  }
  return bad;
}

int main(int argc, char **argv) {
  int chains = argc > 1 ? atoi(argv[1]) : 20000;
  if (chains <= 0) chains = 20000;
  const int kBatch = 500; /* chains per affine context (bounds its memory) */
  rng_t r = {0x1badb002ull};
  double t_compose = 0, t_full = 0;
  uint64_t maps_composed = 0, mismatches = 0, checked = 0;
  size_t nodes = 0;
  int printed = 0;
  for (int done = 0; done < chains; done += kBatch) {
    int n = chains - done < kBatch ? chains - done : kBatch;
    kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
    chain_t *cs = kiln_malloc((size_t)n * sizeof *cs);
    for (int i = 0; i < n; i++) build_chain(ctx, &r, &cs[i]);
    /* Baseline: composition alone. */
    double t0 = now_s();
    kiln_indexing_map_t **raw = kiln_malloc((size_t)n * sizeof *raw);
    for (int i = 0; i < n; i++) raw[i] = compose_chain(&cs[i], false);
    double t1 = now_s();
    kiln_indexing_map_t **simp = kiln_malloc((size_t)n * sizeof *simp);
    for (int i = 0; i < n; i++) simp[i] = compose_chain(&cs[i], true);
    double t2 = now_s();
    t_compose += t1 - t0;
    t_full += t2 - t1;
    for (int i = 0; i < n; i++) {
      maps_composed += cs[i].len - 1;
      if (i % 64 == 0) {
        mismatches += (uint64_t)spot_check(&r, raw[i], simp[i]);
        checked++;
      }
      if (printed < 3 && i % 97 == 5) {
        char *a = kiln_indexing_map_to_string(simp[i]);
        printf("example: %s\n", a);
        kiln_free(a);
        printed++;
      }
      kiln_indexing_map_free(raw[i]);
      kiln_indexing_map_free(simp[i]);
      free_chain(&cs[i]);
    }
    nodes += kiln_affine_ctx_node_count(ctx);
    kiln_free(raw);
    kiln_free(simp);
    kiln_free(cs);
    kiln_affine_ctx_destroy(ctx);
  }
  printf("chains: %d (launch map + %d reshape/transpose/broadcast maps each, shapes of rank 1-%d)\n", chains,
         CHAIN_LEN, MAX_RANK);
  printf("compose only:        %10.0f maps/s  (%.3f s)\n", (double)maps_composed / t_compose, t_compose);
  printf("compose + simplify:  %10.0f maps/s  (%.3f s)  = %.1fx the compose-only time\n",
         (double)maps_composed / t_full, t_full, t_full / t_compose);
  printf("chains/s (compose + simplify): %.0f; expression nodes created: %zu\n", chains / t_full, nodes);
  printf("spot checks: %" PRIu64 " chains, %" PRIu64 " mismatches\n", checked, mismatches);
  return mismatches == 0 ? 0 : 1;
}
