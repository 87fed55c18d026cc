/* Host command buffers: a 50-kernel sequence replayed as one recorded command list versus the
 * same 50 kernel thunks issued one by one, on the same device, buffers and stream, in the
 * same run. Prints the time per execution of both (the best of interleaved rounds, which is the
 * least disturbed by other load on the machine; the median is printed too) and the ratio, and
 * the floor: the same kernel functions called directly in a C loop, interleaved with the others
 * (what no runtime can go below), with what each path spends per kernel above it.
 *
 *   bench_command_buffer [kernels=50] [reps=2000] [cases=all|small]
 * (`small`: only the one-block case, e.g. for instruction counts under callgrind). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/host_pool.h"
#include "base/status.h"
#include "runtime/buffer.h"
#include "runtime/command_buffer.h"
#include "runtime/command_buffer_thunk.h"
#include "runtime/device.h"
#include "runtime/host/host_device.h"
#include "runtime/runtime_options.h"
#include "runtime/thunk.h"

#define BS 64

/* y = 0.5 x + y over blocks [b, e) of BS floats, in 4-float vectors as kiln's JIT emits its
 * kernels (a scalar loop over the same floats costs ~19 ns a block here, as much as the
 * launch overhead this benchmark is about; the floor line prints what the kernel costs by
 * itself). */
typedef float v4f __attribute__((vector_size(16)));

static void k_axpy(void **args, int64_t b, int64_t e) {
  const v4f half = {0.5f, 0.5f, 0.5f, 0.5f};
  for (int64_t blk = b; blk < e; blk++) {
    const char *x = (const char *)args[0] + blk * BS * 4;
    char *y = (char *)args[1] + blk * BS * 4;
    for (int i = 0; i < BS * 4; i += 16) {
      v4f vx, vy;
      memcpy(&vx, x + i, 16);
      memcpy(&vy, y + i, 16);
      vy = half * vx + vy;
      memcpy(y + i, &vy, 16);
    }
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check(kiln_status s, const char *what) {
  if (s) {
    fprintf(stderr, "%s: %s\n", what, kiln_status_message(s));
    exit(1);
  }
}

/* Median over `rounds` of the time per execution of `t` (reps executions + one sync). */
static double time_per_exec(kiln_thunk_t *t, const kiln_thunk_exec_params_t *p, int reps,
                            int rounds) {
  double *samples = kiln_malloc((size_t)rounds * sizeof(double));
  for (int r = 0; r < rounds; r++) {
    double t0 = now_s();
    for (int i = 0; i < reps; i++) check(kiln_thunk_execute(t, p), "execute");
    check(kiln_stream_synchronize(p->stream), "synchronize");
    samples[r] = (now_s() - t0) / reps;
  }
  qsort(samples, (size_t)rounds, sizeof(double), kiln_clock_cmp_double);
  double med = samples[rounds / 2];
  kiln_free(samples);
  return med;
}

/* Median over `rounds` of the time per execution of the kernels called directly: the same
 * functions, arguments and order as the thunks, no runtime in between. */
static double time_direct(kiln_host_kernel_fn kernel, void **args, int kernels, int reps) {
  kiln_host_kernel_fn volatile opaque = kernel; /* an indirect call, as the runtime makes */
  kiln_host_kernel_fn fn = opaque;
  double t0 = now_s();
  for (int i = 0; i < reps; i++)
    for (int k = 0; k < kernels; k++) fn(args + 2 * (k & 1), 0, 1);
  return (now_s() - t0) / reps;
}

static void run_case(kiln_device_t *dev, kiln_stream_t *s, kiln_device_module_t *m, int kernels,
                     uint32_t blocks, int reps) {
  int64_t bytes = (int64_t)blocks * BS * 4;
  kiln_buffer_table_t table;
  check(kiln_buffer_table_init(&table, dev, 2), "table");
  check(kiln_buffer_table_allocate(&table, 0, (uint64_t)bytes), "alloc");
  check(kiln_buffer_table_allocate(&table, 1, (uint64_t)bytes), "alloc");
  memset((void *)(uintptr_t)table.bases[0], 0, (size_t)bytes);
  memset((void *)(uintptr_t)table.bases[1], 0, (size_t)bytes);
  kiln_launch_dims_t d = {{blocks, 1, 1}, {BS, 1, 1}, 0};
  kiln_thunk_seq_t one_by_one, recorded;
  kiln_thunk_seq_init(&one_by_one);
  kiln_thunk_seq_init(&recorded);
  for (int i = 0; i < kernels; i++) {
    /* alternate directions so each kernel depends on the previous one */
    kiln_kernel_arg_t args[2] = {kiln_kernel_arg_slice(kiln_slice_make(i & 1, 0, bytes)),
                                 kiln_kernel_arg_slice(kiln_slice_make(!(i & 1), 0, bytes))};
    char name[32];
    snprintf(name, sizeof(name), "fusion.%d", i);
    kiln_thunk_seq_push(&one_by_one, kiln_thunk_kernel_create(name, m, "axpy", &d, args, 2));
    kiln_thunk_seq_push(&recorded, kiln_thunk_kernel_create(name, m, "axpy", &d, args, 2));
  }
  kiln_thunk_t *seq = kiln_thunk_sequential_create("issue", &one_by_one);
  kiln_thunk_t *cb = NULL;
  check(kiln_command_buffer_thunk_create("cb", &recorded, &cb), "command buffer");
  kiln_thunk_prepare_params_t pp = {table.num, table.sizes};
  kiln_thunk_init_params_t ip = {dev};
  check(kiln_thunk_prepare(seq, &pp), "prepare");
  check(kiln_thunk_prepare(cb, &pp), "prepare");
  check(kiln_thunk_initialize(seq, &ip), "init");
  check(kiln_thunk_initialize(cb, &ip), "init");
  kiln_thunk_exec_params_t ep = {.device = dev, .stream = s, .buffers = &table, .state = NULL};
  /* warm up: records the command list, wakes the workers */
  for (int i = 0; i < 50; i++) {
    check(kiln_thunk_execute(seq, &ep), "warmup");
    check(kiln_thunk_execute(cb, &ep), "warmup");
  }
  check(kiln_stream_synchronize(s), "sync");
  const int rounds = 15;
  /* interleave the two measurements round by round so drift hits both alike */
  double t_issue = 0, t_cb = 0, t_direct = 0, med_issue, med_cb;
  double *a = kiln_malloc(rounds * sizeof(double)), *b = kiln_malloc(rounds * sizeof(double));
  double *f = kiln_malloc(rounds * sizeof(double));
  /* the floor: one block per call, as the thunks launch it (multi-block kernels: not measured) */
  void *direct_args[4] = {(void *)(uintptr_t)table.bases[0], (void *)(uintptr_t)table.bases[1],
                          (void *)(uintptr_t)table.bases[1], (void *)(uintptr_t)table.bases[0]};
  for (int r = 0; r < rounds; r++) {
    a[r] = time_per_exec(seq, &ep, reps, 1);
    b[r] = time_per_exec(cb, &ep, reps, 1);
    f[r] = blocks == 1 ? time_direct(k_axpy, direct_args, kernels, reps) : 0;
  }
  qsort(a, rounds, sizeof(double), kiln_clock_cmp_double);
  qsort(b, rounds, sizeof(double), kiln_clock_cmp_double);
  qsort(f, rounds, sizeof(double), kiln_clock_cmp_double);
  t_issue = a[0];
  t_cb = b[0];
  t_direct = f[0];
  med_issue = a[rounds / 2];
  med_cb = b[rounds / 2];
  kiln_free(a);
  kiln_free(b);
  kiln_free(f);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(kiln_device_cmd_cache(dev));
  printf(
      "%d kernels x %u block(s) of %d floats: one by one %.2f us/exec (%.0f ns/kernel), "
      "command buffer %.2f us/exec (%.0f ns/kernel), ratio %.2fx (medians %.2f / %.2f us, "
      "%.2fx)  [last action %s, records %lld, replays %lld]\n",
      kernels, blocks, BS, t_issue * 1e6, t_issue * 1e9 / kernels, t_cb * 1e6, t_cb * 1e9 / kernels,
      t_issue / t_cb, med_issue * 1e6, med_cb * 1e6, med_issue / med_cb,
      kiln_cmd_action_name(kiln_command_buffer_thunk_last_action(cb)), (long long)st.records,
      (long long)st.replays);
  if (blocks == 1)
    printf(
        "  floor: the kernels called directly %.2f us/exec (%.1f ns/kernel); above it per kernel: "
        "one by one %.1f ns, command buffer %.1f ns\n",
        t_direct * 1e6, t_direct * 1e9 / kernels, (t_issue - t_direct) * 1e9 / kernels,
        (t_cb - t_direct) * 1e9 / kernels);
  kiln_thunk_destroy(seq);
  kiln_thunk_destroy(cb);
  kiln_buffer_table_free(&table);
}

int main(int argc, char **argv) {
  int kernels = argc > 1 ? atoi(argv[1]) : 50;
  int reps = argc > 2 ? atoi(argv[2]) : 2000;
  const char *cases = argc > 3 ? argv[3] : "all";
  if (kernels < 1 || reps < 1 || (strcmp(cases, "all") && strcmp(cases, "small"))) {
    fprintf(stderr, "usage: bench_command_buffer [kernels>=1] [reps>=1] [all|small]\n");
    return 2;
  }
  kiln_device_t *dev;
  check(kiln_host_device_create(0, &dev), "device");
  kiln_stream_t *s;
  check(kiln_stream_create(dev, &s), "stream");
  const char *names[] = {"axpy"};
  void *fns[] = {(void *)k_axpy};
  kiln_module_image_t img = {.names = names, .functions = fns, .num_functions = 1};
  kiln_device_module_t *m;
  check(kiln_device_module_load(dev, &img, &m), "module");
  printf("device: %s; command buffers %s\n", dev->name,
         kiln_runtime_options().no_command_buffers ? "DISABLED by KILN_DISABLE_COMMAND_BUFFERS"
                                                   : "on");
  run_case(dev, s, m, kernels, 1, reps);
  /* Multi-block kernels go through the worker pool; its wake-up dominates both paths. */
  if (!strcmp(cases, "all")) run_case(dev, s, m, kernels, 16, reps / 100 > 10 ? reps / 100 : 10);
  kiln_stream_destroy(s);
  kiln_device_module_unload(m);
  kiln_device_destroy(dev);
  return 0;
}
