/* The reduction emitter's rules (see reduction_rule.h). */
#include "compiler/analysis/reduction_rule.h"

#include <string.h>

/* XLA's race-free bounds: MinThreadsXRowReduction (1024) x 16 row elements, 8 major reduced
 * rows (the batched row bound), warp (32) x 128 column rows. */
#define ROW_RACE_FREE_BOUND KILN_REDUCTION_ROW_RACE_FREE_BOUND
#define BATCH_RACE_FREE_BOUND KILN_REDUCTION_BATCH_RACE_FREE_BOUND
#define COLUMN_RACE_FREE_BOUND KILN_REDUCTION_COLUMN_RACE_FREE_BOUND

bool kiln_reduction_is_race_free(const kiln_reduction_dims_t *rd) {
  if (rd->is_row) return rd->dims[2] <= ROW_RACE_FREE_BOUND && rd->dims[0] <= BATCH_RACE_FREE_BOUND;
  return rd->dims[1] <= COLUMN_RACE_FREE_BOUND;
}

bool kiln_reduction_dims_of(const kiln_hlo_instruction_t *r, kiln_reduction_dims_t *out) {
  if (!r || r->opcode != KILN_OP_REDUCE || r->num_operands < 2 || r->num_operands % 2) return false;
  const kiln_shape_t *in = r->operands[0]->shape;
  if (!kiln_shape_is_array(in) || in->rank > 16) return false;
  bool red[16] = {0};
  for (int i = 0; i < r->dimensions.n; i++) {
    int64_t d = r->dimensions.v[i];
    if (d < 0 || d >= in->rank) return false;
    red[d] = true;
  }
  int64_t total = kiln_shape_num_elements(in);
  int nkeep = in->rank - (int)r->dimensions.n;
  if (nkeep <= 0) {
    out->is_row = true;
    out->dims[0] = 1, out->dims[1] = 1, out->dims[2] = total;
    return true;
  }
  /* Physical positions of the kept (or reduced) dims must be one run. */
  bool keep_run = true, red_run = true;
  int first_keep = -1, last_keep = -1, first_red = -1, last_red = -1;
  for (int k = 0; k < in->rank; k++) {
    bool rd = red[kiln_shape_physical_dim(in, k)];
    if (rd) {
      if (first_red < 0)
        first_red = k;
      else if (last_red != k - 1)
        red_run = false;
      last_red = k;
    } else {
      if (first_keep < 0)
        first_keep = k;
      else if (last_keep != k - 1)
        keep_run = false;
      last_keep = k;
    }
  }
  if (first_red < 0) red_run = false; /* no reduced dims: treat as kept-consecutive */
  int lo, hi;
  if (keep_run)
    lo = first_keep, hi = last_keep;
  else if (red_run)
    lo = first_red, hi = last_red;
  else
    return false;
  int64_t part[3] = {1, 1, 1};
  for (int k = 0; k < in->rank; k++) {
    int64_t n = in->dims[kiln_shape_physical_dim(in, k)];
    part[k < lo ? 0 : k <= hi ? 1 : 2] *= n;
  }
  if (keep_run) {
    if (part[1] == 1) {
      out->is_row = true;
      out->dims[0] = 1, out->dims[1] = 1, out->dims[2] = part[0] * part[2];
    } else if (part[2] == 1) {
      out->is_row = false;
      out->dims[0] = 1, out->dims[1] = part[0], out->dims[2] = part[1];
    } else {
      out->is_row = true;
      memcpy(out->dims, part, sizeof(part));
    }
  } else {
    if (part[2] == 1) {
      out->is_row = true;
      out->dims[0] = 1, out->dims[1] = part[0], out->dims[2] = part[1];
    } else {
      out->is_row = false;
      memcpy(out->dims, part, sizeof(part));
    }
  }
  return true;
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
static int64_t round_up_to(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

/* XLA's GetVectorSizeForMlir: vector loads along the minor dimension when every thread
 * still gets work. */
static int plan_vector_size(int64_t minor, int64_t threads, int smallest_input_bits, bool complex) {
  if (minor % 2 != 0 || threads * 2 > minor || complex) return 1;
  if (smallest_input_bits >= 64) return 1; /* XLA's emitter test reduce_column/vectorize_x1_f64 */
  if (smallest_input_bits >= 32) return 2;
  if (threads * 4 > minor) return 2;
  return minor % 4 == 0 ? 4 : 2;
}

/* MULTI_ROW rows-per-block: lanes per row, then rows while the block stays <= 256 (at least
 * one: a row of more than 256 lanes, e.g. 1,024 s2 elements at 2 per lane, gave 0 and a
 * division by zero, fuzz-2940611). */
static int64_t multirow_rows(int64_t K, int64_t lanes) {
  if (K <= 0) return 1; /* no kept rows (an empty output): one row per block, no division by 0 */
  if (K * lanes <= 256) return K;
  return lanes < 256 ? 256 / lanes : 1;
}

void kiln_reduction_plan_make(const kiln_reduction_dims_t *rd, const kiln_reduction_facts_t *f,
                              int64_t core_count, kiln_reduction_plan_t *out) {
  memset(out, 0, sizeof(*out));
  if (core_count <= 0) core_count = 132;
  const int64_t warp = 32;
  int in_lo = f->input_bits_min, out_lo = f->output_bits_min;
  bool complex = f->complex;
  out->race_free = kiln_reduction_is_race_free(rd);
  out->splits = out->r0_splits = 1;
  out->atomic = !out->race_free && f->atomic_ok;
  if (rd->is_row) {
    int64_t R0 = rd->dims[0], K = rd->dims[1], R2 = rd->dims[2];
    /* MULTI_ROW (XLA's MultiRowReductionFusion::TryCreate). */
    if (R2 > 0 && (R2 & (R2 - 1)) == 0 && out->race_free) {
      int small = in_lo < out_lo ? in_lo : out_lo;
      int large = in_lo > out_lo ? in_lo : out_lo;
      if (in_lo == 1 << 30) large = out_lo; /* no inputs */
      int64_t vec = 64 / (small > 0 ? small : 8);
      if (vec > R2) vec = R2;
      if (vec < 1) vec = 1;
      if (large >= 32 && 128 / large < vec) vec = 128 / large;
      if (vec < 1) vec = 1;
      if (R2 <= warp * vec) {
        while (vec > 1 && ceil_div(K, multirow_rows(K, R2 / vec)) < core_count) vec /= 2;
        if (R2 <= warp * vec) {
          out->kind = KILN_REDUCTION_MULTI_ROW;
          out->vector_size = (int)vec;
          out->threads_reduced = R2 / vec;
          out->threads_kept = multirow_rows(K, R2 / vec);
          out->minor_tile = 1;
          return;
        }
      }
    }
    out->kind = KILN_REDUCTION_ROW;
    int64_t extent = R2;
    if (out->atomic) {
      if (R2 > ROW_RACE_FREE_BOUND) {
        out->split_size = ROW_RACE_FREE_BOUND;
        out->splits = ceil_div(R2, ROW_RACE_FREE_BOUND);
        while (out->splits > 32768)
          out->split_size *= 2, out->splits = ceil_div(R2, out->split_size);
        extent = out->split_size;
      }
      if (R0 > BATCH_RACE_FREE_BOUND)
        out->r0_chunk = BATCH_RACE_FREE_BOUND, out->r0_splits = ceil_div(R0, BATCH_RACE_FREE_BOUND);
    }
    if (!out->split_size) out->split_size = R2;
    if (!out->r0_chunk) out->r0_chunk = R0;
    /* XLA's RowReductionFusion: 32 elements per thread, up to 1024 threads per row. */
    const int64_t per_thread = 32, target = 256;
    int64_t tr = round_up_to(ceil_div(extent, per_thread), warp);
    if (tr > 1024) tr = 1024;
    int64_t tk = 1;
    if (tr * 2 <= target) tk = K * tr <= target ? K : target / tr;
    int vec = plan_vector_size(R2, tr, in_lo, complex);
    if (out->splits > 1 && out->split_size % vec) vec = 1;
    int64_t tile = ceil_div(ceil_div(extent, vec), tr);
    out->vector_size = vec;
    out->threads_reduced = tr;
    out->threads_kept = tk;
    out->minor_tile = tile;
    return;
  }
  int64_t R = rd->dims[1], N = rd->dims[2];
  if (out->atomic && R > COLUMN_RACE_FREE_BOUND) {
    out->split_size = COLUMN_RACE_FREE_BOUND;
    out->splits = ceil_div(R, COLUMN_RACE_FREE_BOUND);
    while (out->splits > 32768) out->split_size *= 2, out->splits = ceil_div(R, out->split_size);
  } else {
    out->split_size = R;
  }
  if (N > 0 && warp % N == 0) { /* N == 0: an empty output, no small-column plan */
    /* XLA's SmallColumnReductionFusion. */
    out->kind = KILN_REDUCTION_SMALL_COLUMN;
    int vec = plan_vector_size(R * N, warp, in_lo, complex);
    if (out->splits > 1 && (out->split_size * N) % vec) vec = 1;
    int64_t threads = 128, rows = vec * threads / N;
    while (rows > warp && vec > 1) vec /= 2, rows /= 2;
    if (rows > warp) threads /= rows / warp, rows = warp;
    out->vector_size = vec;
    out->threads_reduced = threads;
    out->threads_kept = 1;
    out->shared_rows = rows;
    return;
  }
  out->kind = KILN_REDUCTION_COLUMN;
  out->vector_size = plan_vector_size(N, warp, in_lo, complex);
  out->threads_reduced = warp;
  out->threads_kept = warp;
  return;
}

bool kiln_reduction_tile_dims(const kiln_reduction_plan_t *p, const kiln_reduction_dims_t *rd,
                              int64_t tdims[2]) {
  tdims[0] = tdims[1] = 0;
  switch (p->kind) {
    case KILN_REDUCTION_ROW:
      if (p->threads_reduced <= 32) return false;
      tdims[0] = p->threads_kept;
      tdims[1] = p->threads_reduced / 32 + 1; /* one entry of padding */
      return true;
    case KILN_REDUCTION_MULTI_ROW:
      return false;
    case KILN_REDUCTION_COLUMN:
      tdims[0] = 32;
      tdims[1] = 32 * (int64_t)p->vector_size + 1;
      return true;
    case KILN_REDUCTION_SMALL_COLUMN: {
      int64_t tv = p->threads_reduced * p->vector_size;
      bool one_warp = p->threads_reduced == 32 && p->vector_size == 1;
      tdims[0] = p->shared_rows;
      tdims[1] = rd->dims[2] + (one_warp ? 0 : ceil_div(rd->dims[2], tv));
      return true;
    }
  }
  return false;
}

int64_t kiln_reduction_shared_bytes(const kiln_reduction_plan_t *p, const kiln_reduction_dims_t *rd,
                                    int64_t acc_bytes) {
  int64_t tdims[2];
  return kiln_reduction_tile_dims(p, rd, tdims) ? tdims[0] * tdims[1] * acc_bytes : 0;
}

bool kiln_reduction_faster_than_elemental(bool is_row, const int64_t dims[3]) {
  const int64_t warp = 32;
  if (is_row) return dims[2] >= warp || (dims[2] > 0 && warp % dims[2] == 0);
  int64_t major = dims[1], minor = dims[2];
  bool elemental = major < warp || (major < 2 * warp && minor < warp) ||
                   (major < 4 * warp && minor < 8) || (major < 8 * warp && minor < 3);
  return !elemental;
}

bool kiln_reduction_reduces_complex(const kiln_hlo_instruction_t *r) {
  for (int k = 0; k < r->num_operands / 2; k++)
    if (kiln_elem_type_is_complex(r->operands[k]->shape->type)) return true;
  return false;
}

bool kiln_reduction_of_complex_ok(const kiln_hlo_instruction_t *r) {
  if (!kiln_reduction_reduces_complex(r)) return true;
  const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(r, "to_apply");
  const kiln_hlo_instruction_t *a = f && f->num_parameters == 2 ? f->root : NULL;
  return r->num_operands == 2 && a && a->opcode == KILN_OP_ADD && a->num_operands == 2 &&
         a->operands[0]->opcode == KILN_OP_PARAMETER &&
         a->operands[1]->opcode == KILN_OP_PARAMETER && a->operands[0] != a->operands[1];
}
