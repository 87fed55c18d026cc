/* The control side of the fake CUDA driver (fake_cuda.c): what it counts, for tests that
 * dlopen it (RTLD_NOLOAD) after kiln loaded it through $KILN_CUDA_DRIVER or
 * kiln_cuda_driver_open. */
#ifndef KILN_TESTS_FAKE_CUDA_FAKE_CUDA_H_
#define KILN_TESTS_FAKE_CUDA_FAKE_CUDA_H_

typedef struct fake_cuda_stats {
  int event_records, stream_waits, waits_on_unrecorded, streams_alive, allocs_alive;
  int unsupported_calls; /* entry points the fake does not implement (CUDA_ERROR_NOT_SUPPORTED) */
  int stream_syncs;
  int waited_stream_syncs; /* of streams made to wait for an event (collective streams) */
} fake_cuda_stats_t;

typedef void (*fake_cuda_get_stats_fn)(fake_cuda_stats_t *out);
/* fake_cuda_fail_event_records_after(n): the next n event records succeed, every later one
 * fails with CUDA_ERROR_LAUNCH_FAILED; a negative n ends the failures. */
typedef void (*fake_cuda_fail_event_records_after_fn)(int n);

#endif /* KILN_TESTS_FAKE_CUDA_FAKE_CUDA_H_ */
