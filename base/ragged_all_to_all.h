/* The receiving side of XLA's ragged-all-to-all, shared by the reference evaluator
 * (compiler/eval) and the host runtime (runtime/collectives) so both give the same bytes and
 * the same errors.
 *
 * A group of `num_ranks` members each holds an input of `input_rows` rows, an output of
 * `output_rows` rows (a row: every dimension but the first, `row_bytes` bytes) and four
 * metadata arrays of num_ranks x `updates` entries (s32 or s64 in HLO, int64 here), laid out
 * peer-major: entry j * updates + u is update u exchanged with rank j. The sender's
 * input_offsets / send_sizes / output_offsets say which of its input rows go to rank j and
 * where in rank j's output they land; the receiver's recv_sizes say how many rows it takes
 * from rank j. The result is the output operand with every received update written over it.
 *
 * Receiving is a pull: rank `rank` copies from each sender in rank order (then update
 * order), so updates that overlap in the output resolve deterministically, the later one
 * winning (XLA leaves overlapping updates undefined). Every update is checked before its
 * copy: offsets and sizes non-negative, the rows inside the sender's input and the
 * receiver's output, and the receiver's recv_sizes equal to the sender's send_sizes;
 * otherwise INVALID_ARGUMENT naming the collective, both ranks, the update and the values. */
#ifndef KILN_BASE_RAGGED_ALL_TO_ALL_H_
#define KILN_BASE_RAGGED_ALL_TO_ALL_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* One sender as the receiver sees it (borrowed pointers). */
typedef struct kiln_ragged_sender {
  const void *input; /* input_rows x row_bytes */
  int64_t input_rows;
  const int64_t *input_offsets, *send_sizes, *output_offsets; /* num_ranks x updates each */
} kiln_ragged_sender_t;

/* Copies into `output` (output_rows x row_bytes, already holding the output operand) every
 * update the `num_ranks` senders (senders[k]: rank k, this rank included) address to `rank`.
 * `recv_sizes`: this rank's, num_ranks x updates entries. */
kiln_status kiln_ragged_all_to_all_receive(const char *name, int rank, int num_ranks,
                                           int64_t updates, const kiln_ragged_sender_t *senders,
                                           const int64_t *recv_sizes, void *output,
                                           int64_t output_rows, size_t row_bytes);

#endif /* KILN_BASE_RAGGED_ALL_TO_ALL_H_ */
