/* Monotonic wall-clock time and small timing statistics, for compile-time reports, tools
 * and benchmarks. */
#ifndef KILN_BASE_CLOCK_H_
#define KILN_BASE_CLOCK_H_

#include <stdlib.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC (only differences mean anything). */
static inline double kiln_clock_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time of this process, all threads, in milliseconds (CLOCK_PROCESS_CPUTIME_ID): the
 * figure other jobs on a loaded machine do not inflate (only differences mean anything). */
static inline double kiln_clock_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* qsort comparator for doubles, ascending. */
static inline int kiln_clock_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif /* KILN_BASE_CLOCK_H_ */
