/* The control side of the fake libnccl (fake_nccl.c): what it counts, for tests that dlopen
 * it (RTLD_NOLOAD) after kiln loaded it through $KILN_NCCL_LIBRARY. */
#ifndef KILN_TESTS_FAKE_NCCL_FAKE_NCCL_H_
#define KILN_TESTS_FAKE_NCCL_FAKE_NCCL_H_

typedef struct fake_nccl_stats {
  int unique_ids, inits, destroys, aborts;
  int group_starts, group_ends, ungrouped_calls;
  int all_reduce, all_gather, reduce_scatter, broadcast, send, recv;
  int dtypes[16]; /* calls per ncclDataType_t */
  int redops[8];  /* calls per ncclRedOp_t */
  void *last_stream;
  int cliques_alive;
} fake_nccl_stats_t;

typedef void (*fake_nccl_get_stats_fn)(fake_nccl_stats_t *out);
typedef void (*fake_nccl_reset_fn)(void);
/* The next call of `fn` (e.g. "ncclAllReduce") returns `result` instead of running. */
typedef void (*fake_nccl_fail_next_fn)(const char *fn, int result);

#endif /* KILN_TESTS_FAKE_NCCL_FAKE_NCCL_H_ */
