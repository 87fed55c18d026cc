/* A persistent worker pool that runs host kernels' blocks in parallel.
 *
 * Workers are created once (kiln_host_pool_create) and sleep on a condition variable between
 * launches; a launch splits [0, num_blocks) into chunks that workers (and the launching
 * thread) claim with an atomic counter, then waits until all chunks are done.
 *
 * Thread-safety: kiln_host_pool_launch is thread-safe: launches from several threads (e.g.
 * the worker threads of several host streams) take turns on a mutex, one job at a time over
 * all workers, each returning when its own blocks ran. A kernel must not launch on the pool
 * it runs on (it would wait for itself). Create and destroy: not thread-safe: callers
 * serialize, and destroy only when no launch is in progress. */
#ifndef KILN_BASE_HOST_POOL_H_
#define KILN_BASE_HOST_POOL_H_

#include <stdint.h>

#include "base/status.h"

/* The host kernel ABI: runs blocks [block_begin, block_end) with tensor base pointers args. */
typedef void (*kiln_host_kernel_fn)(void **args, int64_t block_begin, int64_t block_end);

typedef struct kiln_host_pool kiln_host_pool_t;

/* Creates a pool with `num_workers` threads in total, counting the launching thread
 * (0: the default, below). The caller owns *out. RESOURCE_EXHAUSTED when threads cannot be
 * created. */
kiln_status kiln_host_pool_create(int num_workers, kiln_host_pool_t **out);
/* The default size of pools created after the call (0: kiln_host_cpus()); the edges set
 * $KILN_HOST_THREADS here. Thread-safe. */
void kiln_host_pool_set_default_workers(int num_workers);
void kiln_host_pool_destroy(kiln_host_pool_t *pool);
/* The CPUs this process may run on, as XLA and `nproc` count them: the calling thread's
 * affinity mask, capped by a cgroup CPU quota (v2 cpu.max or v1 cpu.cfs_quota_us, rounded
 * up); at least 1. A container given 2 CPUs of a 64-core host gets 2 workers, not 64 spinning
 * on 2 CPUs. */
int kiln_host_cpus(void);
/* The CPU bandwidth of the cgroup mounted at `root` (/sys/fs/cgroup: the process's own, as seen
 * from inside a container's namespace), rounded up to CPUs; 0 when unlimited or unreadable.
 * cgroup v2: root/cpu.max holds "max <period>" or "<quota> <period>"; v1:
 * root/cpu/cpu.cfs_quota_us (-1: unlimited) and root/cpu/cpu.cfs_period_us. */
int kiln_host_cgroup_cpu_limit(const char *root);
int kiln_host_pool_num_workers(const kiln_host_pool_t *pool);

/* Runs fn(args, b, e) over [0, num_blocks) in chunks of at least `min_chunk` blocks (0: an
 * automatic size giving each worker a few chunks). Returns when every block ran. */
kiln_status kiln_host_pool_launch(kiln_host_pool_t *pool, kiln_host_kernel_fn fn, void **args,
                                  int64_t num_blocks, int64_t min_chunk);

#endif /* KILN_BASE_HOST_POOL_H_ */
