/* ragged-all-to-all's receiving side (ragged_all_to_all.h). */
#include "base/ragged_all_to_all.h"

#include <inttypes.h>
#include <string.h>

/* Whether rows [at, at + n) lie inside [0, rows). */
static int rows_inside(int64_t at, int64_t n, int64_t rows) {
  return at >= 0 && n >= 0 && at <= rows && n <= rows - at;
}

kiln_status kiln_ragged_all_to_all_receive(const char *name, int rank, int num_ranks,
                                           int64_t updates, const kiln_ragged_sender_t *senders,
                                           const int64_t *recv_sizes, void *output,
                                           int64_t output_rows, size_t row_bytes) {
  if (!name) name = "?";
  if (rank < 0 || rank >= num_ranks || updates < 0 || output_rows < 0)
    return KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d of %d, %" PRId64 " updates", name,
                            rank, num_ranks, updates);
  for (int k = 0; k < num_ranks; k++) {
    const kiln_ragged_sender_t *s = &senders[k];
    for (int64_t u = 0; u < updates; u++) {
      int64_t at = (int64_t)rank * updates + u, mine = (int64_t)k * updates + u;
      int64_t in_off = s->input_offsets[at], n = s->send_sizes[at], out_off = s->output_offsets[at];
      if (recv_sizes[mine] != n)
        return KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d sends %" PRId64
                                " rows to rank %d (send_sizes[%" PRId64 "]), which expects %" PRId64
                                " (recv_sizes[%" PRId64
                                "]); recv_sizes must mirror the senders' "
                                "send_sizes",
                                name, k, n, rank, at, recv_sizes[mine], mine);
      if (!rows_inside(in_off, n, s->input_rows))
        return KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d's update %" PRId64
                                " to rank %d (input_offsets[%" PRId64 "] = %" PRId64
                                ", send_sizes = %" PRId64 ") lies outside its input of %" PRId64
                                " rows",
                                name, k, u, rank, at, in_off, n, s->input_rows);
      if (!rows_inside(out_off, n, output_rows))
        return KILN_ERR_INVALID("ragged-all-to-all '%s': rank %d's update %" PRId64
                                " to rank %d (output_offsets[%" PRId64 "] = %" PRId64
                                ", send_sizes = %" PRId64 ") lies outside the output of %" PRId64
                                " rows",
                                name, k, u, rank, at, out_off, n, output_rows);
      if (n && row_bytes)
        memmove((char *)output + (size_t)out_off * row_bytes,
                (const char *)s->input + (size_t)in_off * row_bytes, (size_t)n * row_bytes);
    }
  }
  return KILN_STATUS_OK;
}
