/* Collective thunks on CUDA devices through NCCL (runtime/cuda/nccl.h), without a GPU: the
 * CUDA devices are real kiln CUDA devices over a fake libcuda (tests/fake_cuda/fake_cuda.c,
 * opened with kiln_cuda_driver_open) whose device memory is host memory and whose streams run
 * every copy at once; NCCL is a fake libnccl
 * (tests/fake_nccl/fake_nccl.c, loaded through $KILN_NCCL_LIBRARY) that records its calls and
 * does the math on that memory. Every collective (all-reduce over each element type and
 * reduction, all-gather, reduce-scatter and all-to-all with rows, the tuple all-to-all,
 * collective-permute with a rank nobody sends to, collective-broadcast, variadic and
 * overlapping operands) runs on 4 fake GPUs, one thread each, and matches the same thunk on 4
 * host devices (the in-process clique) bit for bit, with the NCCL type and reduction numbering
 * checked call by call. Also: one communicator per (group, device set), reused and released
 * with the devices; the -start/-done events around the collective stream; NCCL results mapped
 * to kiln codes; the unique-id exchange for ranks in other processes; a library that is not
 * NCCL or too old. Run with --without-nccl (ctest test_nccl_collectives_without_nccl, whose
 * $KILN_NCCL_LIBRARY names no library): a collective on CUDA devices is UNAVAILABLE naming
 * libnccl.so.2 and how to get it. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "status_test_util.h"

#include "base/alloc.h"
#include "base/status.h"
#include "runtime/buffer.h"
#include "runtime/collective_thunk.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nccl.h"
#include "runtime/device.h"
#include "runtime/runtime_options.h"
#include "base/half.h"
#include "runtime/spmd.h"
#include "tests/fake_cuda/fake_cuda.h"
#include "tests/fake_nccl/fake_nccl.h"

#define NDEV 4
#define MAXB 4 /* operands */

/* ---- the fake CUDA driver ---------------------------------------------------------------- */

static kiln_cuda_driver_t *g_fake_driver; /* kiln_cuda_driver_open of the fake libcuda */
static fake_cuda_get_stats_fn g_cuda_stats_fn;
static fake_cuda_fail_event_records_after_fn g_cuda_fail_records;

static fake_cuda_stats_t cuda_stats(void) {
  fake_cuda_stats_t s;
  g_cuda_stats_fn(&s);
  return s;
}

static int fake_driver_init(void) {
  if (g_fake_driver) return 0;
  const char *path[] = {KILN_FAKE_CUDA};
  kiln_status s = kiln_cuda_driver_open(path, 1, &g_fake_driver);
  if (s) {
    fprintf(stderr, "%s\n", kiln_status_message(s));
    kiln_status_free(s);
    return -1;
  }
  void *h = dlopen(KILN_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  *(void **)&g_cuda_stats_fn = dlsym(h, "fake_cuda_get_stats");
  *(void **)&g_cuda_fail_records = dlsym(h, "fake_cuda_fail_event_records_after");
  dlclose(h);
  return g_cuda_stats_fn && g_cuda_fail_records ? 0 : -1;
}

/* ---- the fake NCCL's control side --------------------------------------------------------- */

static fake_nccl_get_stats_fn g_stats_fn;
static fake_nccl_reset_fn g_reset_fn;
static fake_nccl_fail_next_fn g_fail_fn;

static fake_nccl_stats_t stats(void) {
  fake_nccl_stats_t s;
  g_stats_fn(&s);
  return s;
}

/* ---- devices and a runner ----------------------------------------------------------------- */

static kiln_device_t *g_gpu[NDEV], *g_host;

static int setup(void **state) {
  (void)state;
  kiln_runtime_options_t ro = kiln_runtime_options(); /* the environment's, read at start */
  if (!ro.nccl_library) ro.nccl_library = KILN_FAKE_NCCL;
  kiln_runtime_options_set(&ro);
  if (fake_driver_init()) return -1;
  for (int i = 0; i < NDEV; i++) {
    kiln_status s = kiln_cuda_device_create_with_driver(g_fake_driver, i, &g_gpu[i]);
    if (s) {
      fprintf(stderr, "%s\n", kiln_status_message(s));
      kiln_status_free(s);
      return -1;
    }
  }
  kiln_status s = kiln_device_create("host", &g_host);
  if (s) {
    kiln_status_free(s);
    return -1;
  }
  const kiln_nccl_t *n = NULL;
  s = kiln_nccl_get(&n); /* loads the fake */
  if (s) {
    fprintf(stderr, "%s\n", kiln_status_message(s));
    kiln_status_free(s);
    return -1;
  }
  void *h = dlopen(KILN_FAKE_NCCL, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  *(void **)&g_stats_fn = dlsym(h, "fake_nccl_get_stats");
  *(void **)&g_reset_fn = dlsym(h, "fake_nccl_reset");
  *(void **)&g_fail_fn = dlsym(h, "fake_nccl_fail_next");
  dlclose(h); /* kiln's handle keeps it loaded */
  return g_stats_fn && g_reset_fn && g_fail_fn ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < NDEV; i++) kiln_device_destroy(g_gpu[i]);
  kiln_device_destroy(g_host);
  kiln_nccl_cache_stats_t cs;
  kiln_nccl_cache_stats(&cs);
  /* Every communicator went with its device; every fake stream and allocation too. */
  fake_nccl_stats_t st = stats();
  fake_cuda_stats_t g_drv = cuda_stats();
  kiln_cuda_driver_close(g_fake_driver);
  /* The one communicator a collective failed on (the error-mapping test) was aborted. */
  if (cs.groups || cs.comms || st.cliques_alive || g_drv.streams_alive || g_drv.allocs_alive ||
      g_drv.unsupported_calls || st.aborts != 1) {
    fprintf(stderr,
            "left behind: %d groups, %d comms, %d cliques, %d streams, %d allocations; %d "
            "aborts\n",
            cs.groups, cs.comms, st.cliques_alive, g_drv.streams_alive, g_drv.allocs_alive,
            st.aborts);
    return -1;
  }
  return 0;
}

/* One participant's run of a thunk. Allocation 0 holds every slice. */
typedef struct participant {
  kiln_thunk_t *t;
  kiln_device_t *dev;
  kiln_stream_t *stream;
  kiln_buffer_table_t table;
  kiln_spmd_participant_t who;
  kiln_status status;
} participant_t;

static void *participant_main(void *arg) {
  participant_t *p = arg;
  kiln_thunk_exec_params_t ep = {.device = p->dev, .stream = p->stream, .buffers = &p->table};
  p->status = kiln_collective_thunk_execute(p->t, &ep, &p->who);
  if (!p->status) p->status = kiln_stream_synchronize(p->stream);
  if (p->status) kiln_spmd_world_abort(p->who.world, p->who.participant, "failed");
  return NULL;
}

/* Runs `t` (prepared for one allocation of `bytes`) on `n` participants of devices devs[i],
 * allocation i's initial contents init[i]; out[i] receives the allocation afterwards. The
 * world's device ids are devs' ordinals (ids[i], NULL: i). Returns the first failure. */
static kiln_status run_on(kiln_thunk_t *t, kiln_device_t *const *devs, int n, const int64_t *ids,
                          uint64_t bytes, unsigned char *const *init, unsigned char **out,
                          int runs) {
  const kiln_coll_thunk_desc_t *d = kiln_thunk_collective_desc(t);
  kiln_spmd_world_t *w = NULL;
  ASSERT_OK(kiln_spmd_world_create(d->num_replicas, d->num_partitions, ids, 5000, &w));
  participant_t ps[16];
  memset(ps, 0, sizeof(ps));
  for (int i = 0; i < n; i++) {
    participant_t *p = &ps[i];
    p->t = t;
    p->dev = devs[i];
    p->who = (kiln_spmd_participant_t){.world = w, .participant = i};
    ASSERT_OK(kiln_stream_create(p->dev, &p->stream));
    ASSERT_OK(kiln_buffer_table_init(&p->table, p->dev, 1));
    ASSERT_OK(kiln_buffer_table_allocate(&p->table, 0, bytes));
    kiln_devptr_t base;
    ASSERT_OK(kiln_buffer_table_resolve(&p->table, kiln_slice_make(0, 0, (int64_t)bytes), &base));
    ASSERT_OK(kiln_stream_memcpy_h2d(p->stream, base, init[i], bytes));
    ASSERT_OK(kiln_stream_synchronize(p->stream));
  }
  kiln_status first = NULL;
  for (int r = 0; r < runs && !first; r++) {
    pthread_t th[16];
    for (int i = 0; i < n; i++)
      assert_int_equal(pthread_create(&th[i], NULL, participant_main, &ps[i]), 0);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) {
      if (ps[i].status && !first)
        first = ps[i].status;
      else
        kiln_status_free(ps[i].status);
      ps[i].status = NULL;
    }
  }
  for (int i = 0; i < n; i++) {
    participant_t *p = &ps[i];
    kiln_devptr_t base;
    ASSERT_OK(kiln_buffer_table_resolve(&p->table, kiln_slice_make(0, 0, (int64_t)bytes), &base));
    if (!first) ASSERT_OK(kiln_stream_memcpy_d2h(p->stream, out[i], base, bytes));
    ASSERT_OK(kiln_stream_synchronize(p->stream));
    kiln_buffer_table_free(&p->table);
    kiln_stream_destroy(p->stream);
  }
  kiln_spmd_world_destroy(w);
  return first;
}

/* Deterministic, distinct per participant and byte; floats stay small and finite. */
static void fill(unsigned char *b, uint64_t n, int participant, kiln_coll_dtype_t t) {
  size_t es = kiln_coll_dtype_bytes(t);
  for (uint64_t i = 0; i < n; i++) b[i] = (unsigned char)(37 * i + 101 * (uint64_t)participant + 7);
  if (t == KILN_COLL_PRED)
    for (uint64_t i = 0; i < n; i++) b[i] &= 1;
  for (uint64_t i = 0; i + es <= n; i += es) {
    float v = (float)((int)((i / es) * 7 + (uint64_t)participant * 13) % 23 - 11) * 0.375f;
    if (t == KILN_COLL_F32) memcpy(b + i, &v, 4);
    if (t == KILN_COLL_F64) {
      double dv = v * 1.0000001;
      memcpy(b + i, &dv, 8);
    }
    if (t == KILN_COLL_BF16 || t == KILN_COLL_F16) {
      uint16_t h = t == KILN_COLL_BF16 ? kiln_f32_to_bf16(v) : kiln_f32_to_f16(v);
      memcpy(b + i, &h, 2);
    }
  }
}

/* Runs the thunk on the NDEV fake GPUs and on NDEV host devices and compares every
 * participant's allocation bit for bit. */
static void run_and_compare(kiln_thunk_t *t, const char *name, uint64_t bytes,
                            kiln_coll_dtype_t fill_type) {
  unsigned char *init[NDEV] = {0}, *gpu[NDEV] = {0}, *host[NDEV] = {0};
  const kiln_coll_thunk_desc_t *d = kiln_thunk_collective_desc(t);
  int n = d->num_replicas * d->num_partitions;
  assert_true(n <= NDEV);
  for (int i = 0; i < n; i++) {
    init[i] = kiln_malloc(bytes);
    gpu[i] = kiln_malloc(bytes);
    host[i] = kiln_malloc(bytes);
    fill(init[i], bytes, i, fill_type);
  }
  uint64_t sizes[1] = {bytes};
  kiln_thunk_prepare_params_t pp = {1, sizes};
  ASSERT_OK(kiln_collective_thunk_prepare(t, &pp));
  ASSERT_OK(run_on(t, g_gpu, n, NULL, bytes, init, gpu, 1));
  kiln_device_t *hosts[NDEV] = {0};
  for (int i = 0; i < n; i++) hosts[i] = g_host;
  ASSERT_OK(run_on(t, hosts, n, NULL, bytes, init, host, 1));
  for (int i = 0; i < n; i++) {
    if (memcmp(gpu[i], host[i], bytes)) {
      for (uint64_t k = 0; k < bytes; k++)
        if (gpu[i][k] != host[i][k])
          fail_msg("%s: participant %d byte %llu: NCCL %u, host %u", name, i, (unsigned long long)k,
                   gpu[i][k], host[i][k]);
    }
    assert_memory_not_equal(gpu[i], init[i], bytes); /* the collective wrote something */
    kiln_free(init[i]);
    kiln_free(gpu[i]);
    kiln_free(host[i]);
  }
}

/* A description for `n` participants (R = n, P = 1) in groups of `gs` consecutive ones. */
static kiln_coll_thunk_desc_t *desc_groups(kiln_coll_thunk_op_t op, int nb, int n, int gs) {
  kiln_coll_thunk_desc_t *d = kiln_coll_thunk_desc_create(op, nb, n, 1);
  for (int i = 0; i < n; i++) {
    d->group_key[i] = i / gs;
    d->rank[i] = i % gs;
    d->group_size[i] = gs;
  }
  return d;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_all_reduce_maps_every_type_and_reduction_and_matches_the_host_clique(
    void **state) {
  (void)state;
  static const struct {
    kiln_coll_dtype_t t;
    kiln_coll_reduction_t r;
    int nccl_type, nccl_op;
  } cases[] = {
      {KILN_COLL_F32, KILN_COLL_SUM, 7, 0},  {KILN_COLL_F64, KILN_COLL_PRODUCT, 8, 1},
      {KILN_COLL_S32, KILN_COLL_MAX, 2, 2},  {KILN_COLL_U32, KILN_COLL_MIN, 3, 3},
      {KILN_COLL_S64, KILN_COLL_SUM, 4, 0},  {KILN_COLL_U64, KILN_COLL_MAX, 5, 2},
      {KILN_COLL_S8, KILN_COLL_MIN, 0, 3},   {KILN_COLL_U8, KILN_COLL_SUM, 1, 0},
      {KILN_COLL_PRED, KILN_COLL_MAX, 1, 2}, {KILN_COLL_PRED, KILN_COLL_MIN, 1, 3},
      {KILN_COLL_BF16, KILN_COLL_SUM, 9, 0}, {KILN_COLL_F16, KILN_COLL_MIN, 6, 3},
      {KILN_COLL_F16, KILN_COLL_SUM, 6, 0},  {KILN_COLL_S32, KILN_COLL_PRODUCT, 2, 1},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    size_t es = kiln_coll_dtype_bytes(cases[c].t);
    int64_t count = 37;
    uint64_t half = ((uint64_t)count * es + 255) & ~(uint64_t)255;
    kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_REDUCE, 1, NDEV, NDEV);
    d->reduction = cases[c].r;
    d->buffers[0] =
        (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, count * (int64_t)es),
                                   .recv = kiln_slice_make(0, (int64_t)half, count * (int64_t)es),
                                   .dtype = cases[c].t,
                                   .count = count};
    kiln_thunk_t *t = kiln_thunk_collective_create("all-reduce.1", d);
    fake_nccl_stats_t before = stats();
    run_and_compare(t, "all-reduce.1", 2 * half, cases[c].t);
    fake_nccl_stats_t after = stats();
    assert_int_equal(after.all_reduce - before.all_reduce, NDEV);
    assert_int_equal(after.dtypes[cases[c].nccl_type] - before.dtypes[cases[c].nccl_type], NDEV);
    assert_int_equal(after.redops[cases[c].nccl_op] - before.redops[cases[c].nccl_op], NDEV);
    assert_int_equal(after.ungrouped_calls, before.ungrouped_calls);
    kiln_thunk_destroy(t);
  }
}

static void test_in_place_and_variadic_all_reduce_in_one_group(void **state) {
  (void)state;
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_REDUCE, 2, NDEV, 2);
  d->reduction = KILN_COLL_SUM;
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 64),
                                             .recv = kiln_slice_make(0, 0, 64), /* in place */
                                             .dtype = KILN_COLL_F32,
                                             .count = 16};
  d->buffers[1] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 256, 80),
                                             .recv = kiln_slice_make(0, 512, 80),
                                             .dtype = KILN_COLL_S64,
                                             .count = 10};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-reduce.variadic", d);
  fake_nccl_stats_t before = stats();
  run_and_compare(t, "all-reduce.variadic", 768, KILN_COLL_F32);
  fake_nccl_stats_t after = stats();
  /* Two operands, one group per rank. */
  assert_int_equal(after.all_reduce - before.all_reduce, 2 * NDEV);
  assert_int_equal(after.group_starts - before.group_starts, NDEV);
  assert_int_equal(after.group_ends - before.group_ends, NDEV);
  kiln_thunk_destroy(t);
}

static void test_all_gather_reduce_scatter_and_all_to_all_with_rows(void **state) {
  (void)state;
  /* all-gather: send [2][12 bytes] -> recv [2][4][12]. */
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_GATHER, 1, NDEV, NDEV);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 24),
                                             .recv = kiln_slice_make(0, 256, 96),
                                             .dtype = KILN_COLL_S16,
                                             .outer = 2,
                                             .block_bytes = 12};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-gather.1", d);
  fake_nccl_stats_t before = stats();
  run_and_compare(t, "all-gather.1", 512, KILN_COLL_S16);
  fake_nccl_stats_t after = stats();
  assert_int_equal(after.all_gather - before.all_gather, 2 * NDEV); /* a call per row */
  kiln_thunk_destroy(t);
  /* reduce-scatter in pairs: send [3][2][5] f32 -> recv [3][5]. */
  d = desc_groups(KILN_COLL_THUNK_REDUCE_SCATTER, 1, NDEV, 2);
  d->reduction = KILN_COLL_SUM;
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 120),
                                             .recv = kiln_slice_make(0, 256, 60),
                                             .dtype = KILN_COLL_F32,
                                             .outer = 3,
                                             .inner = 5};
  t = kiln_thunk_collective_create("reduce-scatter.1", d);
  before = stats();
  run_and_compare(t, "reduce-scatter.1", 512, KILN_COLL_F32);
  after = stats();
  assert_int_equal(after.reduce_scatter - before.reduce_scatter, 3 * NDEV);
  assert_int_equal(after.dtypes[7] - before.dtypes[7], 3 * NDEV);
  kiln_thunk_destroy(t);
  /* all-to-all with a split dimension: [2][4][8 bytes] both ways, grouped send/recv. */
  d = desc_groups(KILN_COLL_THUNK_ALL_TO_ALL, 1, NDEV, NDEV);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 64),
                                             .recv = kiln_slice_make(0, 256, 64),
                                             .dtype = KILN_COLL_U8,
                                             .outer = 2,
                                             .block_bytes = 8};
  t = kiln_thunk_collective_create("all-to-all.1", d);
  before = stats();
  run_and_compare(t, "all-to-all.1", 512, KILN_COLL_U8);
  after = stats();
  assert_int_equal(after.send - before.send, 2 * NDEV * NDEV);
  assert_int_equal(after.recv - before.recv, 2 * NDEV * NDEV);
  assert_int_equal(after.group_ends - before.group_ends, NDEV);
  assert_int_equal(after.ungrouped_calls, before.ungrouped_calls);
  kiln_thunk_destroy(t);
}

static void test_tuple_all_to_all_permute_and_broadcast(void **state) {
  (void)state;
  /* Tuple all-to-all: operand j (16 bytes) to rank j. */
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_TO_ALL_TUPLE, NDEV, NDEV, NDEV);
  for (int j = 0; j < NDEV; j++)
    d->buffers[j] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 16 * j, 16),
                                               .recv = kiln_slice_make(0, 256 + 16 * j, 16),
                                               .dtype = KILN_COLL_U8};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-to-all.tuple", d);
  fake_nccl_stats_t before = stats();
  run_and_compare(t, "all-to-all.tuple", 512, KILN_COLL_U8);
  fake_nccl_stats_t after = stats();
  assert_int_equal(after.send - before.send, NDEV * NDEV);
  kiln_thunk_destroy(t);
  /* Permute 0 -> 1 -> 2, and 3 -> 3 (to itself); rank 0 gets zeros. */
  d = desc_groups(KILN_COLL_THUNK_PERMUTE, 1, NDEV, NDEV);
  int source[NDEV] = {-1, 0, 1, 3};
  for (int i = 0; i < NDEV; i++) d->source[i] = source[i];
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 40),
                                             .recv = kiln_slice_make(0, 256, 40),
                                             .dtype = KILN_COLL_F32};
  t = kiln_thunk_collective_create("collective-permute.1", d);
  before = stats();
  run_and_compare(t, "collective-permute.1", 512, KILN_COLL_F32);
  after = stats();
  assert_int_equal(after.send - before.send, 3); /* 0->1, 1->2, 3->3; 2 sends to nobody */
  assert_int_equal(after.recv - before.recv, 3);
  kiln_thunk_destroy(t);
  /* Broadcast in pairs from each pair's rank 0. */
  d = desc_groups(KILN_COLL_THUNK_BROADCAST, 1, NDEV, 2);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 24),
                                             .recv = kiln_slice_make(0, 256, 24),
                                             .dtype = KILN_COLL_F64};
  t = kiln_thunk_collective_create("collective-broadcast.1", d);
  before = stats();
  run_and_compare(t, "collective-broadcast.1", 512, KILN_COLL_F64);
  after = stats();
  assert_int_equal(after.broadcast - before.broadcast, NDEV);
  kiln_thunk_destroy(t);
}

static void test_operands_overlapping_their_results_are_staged(void **state) {
  (void)state;
  /* all-gather whose operand is the result's second block (NCCL's in-place form for rank 1
   * only) and a permute whose result overlaps its operand by half. */
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_GATHER, 1, NDEV, NDEV);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 32, 32),
                                             .recv = kiln_slice_make(0, 0, 128),
                                             .dtype = KILN_COLL_U8,
                                             .outer = 1,
                                             .block_bytes = 32};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-gather.overlap", d);
  run_and_compare(t, "all-gather.overlap", 256, KILN_COLL_U8);
  kiln_thunk_destroy(t);
  d = desc_groups(KILN_COLL_THUNK_PERMUTE, 1, NDEV, NDEV);
  for (int i = 0; i < NDEV; i++) d->source[i] = (i + NDEV - 1) % NDEV;
  d->buffers[0] = (kiln_coll_thunk_buffer_t){
      .send = kiln_slice_make(0, 0, 64), .recv = kiln_slice_make(0, 32, 64), .dtype = KILN_COLL_U8};
  t = kiln_thunk_collective_create("collective-permute.overlap", d);
  run_and_compare(t, "collective-permute.overlap", 256, KILN_COLL_U8);
  kiln_thunk_destroy(t);
}

static void test_sixteen_bit_integer_reductions_are_unimplemented(void **state) {
  (void)state;
  ncclDataType_t nt;
  assert_code(kiln_nccl_dtype(KILN_COLL_S16, &nt), KILN_UNIMPLEMENTED);
  assert_code(kiln_nccl_dtype(KILN_COLL_U16, &nt), KILN_UNIMPLEMENTED);
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_REDUCE, 1, 2, 2);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 8),
                                             .recv = kiln_slice_make(0, 256, 8),
                                             .dtype = KILN_COLL_S16,
                                             .count = 4};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-reduce.s16", d);
  uint64_t sizes[1] = {512};
  kiln_thunk_prepare_params_t pp = {1, sizes};
  ASSERT_OK(kiln_collective_thunk_prepare(t, &pp));
  unsigned char a[512] = {0}, b[512] = {0}, oa[512], ob[512];
  unsigned char *init[2] = {a, b}, *out[2] = {oa, ob};
  kiln_status s = run_on(t, g_gpu, 2, NULL, 512, init, out, 1);
  assert_non_null(strstr(kiln_status_message(s), "16-bit integer"));
  assert_code(s, KILN_UNIMPLEMENTED);
  kiln_thunk_destroy(t);
}

/* An f32 all-reduce of 16 elements (bytes 0..64 -> 256..320) over groups of `gs`, prepared for
 * one 512-byte allocation. */
static kiln_thunk_t *all_reduce16(const char *name, int gs, kiln_coll_thunk_phase_t phase) {
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_REDUCE, 1, NDEV, gs);
  d->phase = phase;
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 64),
                                             .recv = kiln_slice_make(0, 256, 64),
                                             .dtype = KILN_COLL_F32,
                                             .count = 16};
  kiln_thunk_t *t = kiln_thunk_collective_create(name, d);
  uint64_t sizes[1] = {512};
  kiln_thunk_prepare_params_t pp = {1, sizes};
  ASSERT_OK(kiln_collective_thunk_prepare(t, &pp));
  return t;
}

static void test_one_communicator_per_group_and_device_set_is_cached_and_released(void **state) {
  (void)state;
  kiln_device_t *devs[NDEV];
  for (int i = 0; i < NDEV; i++)
    ASSERT_OK(kiln_cuda_device_create_with_driver(g_fake_driver, i, &devs[i]));
  kiln_nccl_cache_stats_t c0, c1;
  kiln_nccl_cache_stats(&c0);
  fake_nccl_stats_t s0 = stats();
  fake_cuda_stats_t d0 = cuda_stats();
  unsigned char *init[NDEV], *out[NDEV];
  for (int i = 0; i < NDEV; i++) {
    init[i] = kiln_calloc(1, 512);
    out[i] = kiln_calloc(1, 512);
    fill(init[i], 512, i, KILN_COLL_F32);
  }
  /* Two collectives over all four devices (different names), each run three times. */
  kiln_thunk_t *ts[3];
  for (int k = 0; k < 2; k++) {
    ts[k] = all_reduce16(k ? "all-reduce.b" : "all-reduce.a", NDEV, KILN_COLL_PHASE_WHOLE);
    ASSERT_OK(run_on(ts[k], devs, NDEV, NULL, 512, init, out, 3));
  }
  fake_nccl_stats_t s1 = stats();
  kiln_nccl_cache_stats(&c1);
  assert_int_equal(s1.unique_ids - s0.unique_ids, 1);
  assert_int_equal(s1.inits - s0.inits, NDEV);
  assert_int_equal(c1.groups - c0.groups, 1);
  assert_int_equal(c1.comms - c0.comms, NDEV);
  assert_int_equal(s1.all_reduce - s0.all_reduce, 6 * NDEV);
  /* -start/-done: per rank and run, the execution stream's event is recorded and the
   * collective stream waits for it, then the other way round; the NCCL calls went to the
   * collective stream, never waited on before it was recorded. */
  fake_cuda_stats_t d1 = cuda_stats();
  assert_int_equal(d1.event_records - d0.event_records, 2 * 6 * NDEV);
  assert_int_equal(d1.stream_waits - d0.stream_waits, 2 * 6 * NDEV);
  assert_int_equal(d1.waits_on_unrecorded, 0);
  assert_non_null(s1.last_stream);
  /* Pairs of the same devices are other device sets: a communicator each. */
  ts[2] = all_reduce16("all-reduce.pairs", 2, KILN_COLL_PHASE_WHOLE);
  ASSERT_OK(run_on(ts[2], devs, NDEV, NULL, 512, init, out, 2));
  /* The same participants on devices with other ids: another device set. */
  int64_t ids[NDEV] = {3, 2, 1, 0};
  kiln_device_t *rev[NDEV] = {devs[3], devs[2], devs[1], devs[0]};
  ASSERT_OK(run_on(ts[0], rev, NDEV, ids, 512, init, out, 1));
  fake_nccl_stats_t s2 = stats();
  kiln_nccl_cache_stats(&c1);
  assert_int_equal(s2.inits - s0.inits, 3 * NDEV);
  assert_int_equal(c1.groups - c0.groups, 4);
  /* The devices go, and their communicators, streams and events with them. */
  int streams = cuda_stats().streams_alive;
  for (int i = 0; i < NDEV; i++) kiln_device_destroy(devs[i]);
  fake_nccl_stats_t s3 = stats();
  kiln_nccl_cache_stats(&c1);
  assert_int_equal(s3.destroys - s0.destroys, 3 * NDEV);
  assert_int_equal(c1.groups, c0.groups);
  assert_int_equal(c1.comms, c0.comms);
  assert_int_equal(streams - cuda_stats().streams_alive, 3 * NDEV);
  for (int k = 0; k < 3; k++) kiln_thunk_destroy(ts[k]);
  for (int i = 0; i < NDEV; i++) {
    kiln_free(init[i]);
    kiln_free(out[i]);
  }
}

/* A split all-reduce (an async pair the runtime splits, runtime/collective_thunk.h): its START
 * thunk makes the collective stream wait for the execution's work and records the done event
 * without making the execution's stream wait; its DONE thunk is that wait, and nothing else.
 * The results are the whole collective's. */
static void test_split_all_reduce_waits_for_the_collective_at_its_done(void **state) {
  (void)state;
  unsigned char *init[NDEV], *whole[NDEV], *split[NDEV];
  for (int i = 0; i < NDEV; i++) {
    init[i] = kiln_calloc(1, 512);
    whole[i] = kiln_calloc(1, 512);
    split[i] = kiln_calloc(1, 512);
    fill(init[i], 512, i, KILN_COLL_F32);
  }
  kiln_thunk_t *ts[3]; /* whole, start, done */
  for (int k = 0; k < 3; k++)
    ts[k] = all_reduce16(k ? "all-reduce-start.split" : "all-reduce.whole", NDEV,
                         (kiln_coll_thunk_phase_t)k);
  ASSERT_OK(run_on(ts[0], g_gpu, NDEV, NULL, 512, init, whole, 1));
  fake_cuda_stats_t d0 = cuda_stats();
  ASSERT_OK(run_on(ts[1], g_gpu, NDEV, NULL, 512, init, split, 1));
  fake_cuda_stats_t d1 = cuda_stats();
  assert_int_equal(d1.event_records - d0.event_records, 2 * NDEV);
  assert_int_equal(d1.stream_waits - d0.stream_waits, NDEV); /* the collective stream's */
  /* The fake runs NCCL at once, so the start's results are already there. */
  for (int i = 0; i < NDEV; i++) assert_memory_equal(whole[i], split[i], 512);
  ASSERT_OK(run_on(ts[2], g_gpu, NDEV, NULL, 512, init, split, 1));
  fake_cuda_stats_t d2 = cuda_stats();
  assert_int_equal(d2.event_records - d1.event_records, 0);
  assert_int_equal(d2.stream_waits - d1.stream_waits, NDEV); /* the execution stream's */
  assert_int_equal(d2.waits_on_unrecorded, 0);
  for (int k = 0; k < 3; k++) kiln_thunk_destroy(ts[k]);
  for (int i = 0; i < NDEV; i++) {
    kiln_free(init[i]);
    kiln_free(whole[i]);
    kiln_free(split[i]);
  }
}

/* A start whose done event cannot be recorded after NCCL took the collective: nothing would
 * tell when the collective ends, and the caller frees its buffers on the error, so each
 * participant drains its collective stream before returning the error. (Every participant
 * records its ready event before any passes the fake NCCL's group end, so the records after
 * the first NDEV are the done events.) */
static void test_a_start_failing_after_its_enqueue_drains_the_collective_stream(void **state) {
  (void)state;
  unsigned char *init[NDEV], *out[NDEV];
  for (int i = 0; i < NDEV; i++) {
    init[i] = kiln_calloc(1, 512);
    out[i] = kiln_calloc(1, 512);
    fill(init[i], 512, i, KILN_COLL_F32);
  }
  kiln_thunk_t *t = all_reduce16("all-reduce-start.undone", NDEV, KILN_COLL_PHASE_START);
  fake_cuda_stats_t d0 = cuda_stats();
  ASSERT_OK(run_on(t, g_gpu, NDEV, NULL, 512, init, out, 1)); /* the syncs of a good run */
  fake_cuda_stats_t d1 = cuda_stats();
  g_cuda_fail_records(NDEV);
  kiln_status s = run_on(t, g_gpu, NDEV, NULL, 512, init, out, 1);
  g_cuda_fail_records(-1);
  fake_cuda_stats_t d2 = cuda_stats();
  assert_non_null(s);
  if (!strstr(kiln_status_message(s), "after collective all-reduce-start.undone"))
    fail_msg("%s", kiln_status_message(s));
  kiln_status_free(s);
  /* one more per participant: its collective stream's (in a start only the collective
   * stream is made to wait for an event) */
  assert_int_equal(d1.waited_stream_syncs - d0.waited_stream_syncs, 0);
  assert_int_equal(d2.waited_stream_syncs - d1.waited_stream_syncs, NDEV);
  kiln_thunk_destroy(t);
  for (int i = 0; i < NDEV; i++) {
    kiln_free(init[i]);
    kiln_free(out[i]);
  }
}

static void test_nccl_results_map_to_codes_with_the_library_text(void **state) {
  (void)state;
  const kiln_nccl_t *n = NULL;
  ASSERT_OK(kiln_nccl_get(&n));
  assert_true(n->version >= KILN_NCCL_MIN_VERSION);
  assert_null(kiln_nccl_status_make(n, ncclSuccess, "x"));
  kiln_status s = kiln_nccl_status_make(n, ncclInvalidArgument, "ncclAllReduce (%s)", "ar");
  assert_string_equal(kiln_status_message(s),
                      "ncclAllReduce (ar): ncclInvalidArgument (4): fake: invalid argument");
  assert_code(s, KILN_INVALID_ARGUMENT);
  assert_int_equal(kiln_nccl_error_code(ncclSystemError), KILN_UNAVAILABLE);
  assert_int_equal(kiln_nccl_error_code(ncclInvalidUsage), KILN_FAILED_PRECONDITION);
  assert_int_equal(kiln_nccl_error_code(ncclUnhandledCudaError), KILN_INTERNAL);
  assert_int_equal(kiln_nccl_error_code(99), KILN_UNKNOWN);
  assert_null(kiln_nccl_result_name(99));
  /* Through a thunk (a group of one on a CUDA device in a world): a failing call's result
   * comes back mapped, naming the collective. */
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_REDUCE, 1, 1, 1);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 16),
                                             .recv = kiln_slice_make(0, 256, 16),
                                             .dtype = KILN_COLL_F32,
                                             .count = 4};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-reduce.fails", d);
  uint64_t sizes[1] = {512};
  kiln_thunk_prepare_params_t pp = {1, sizes};
  ASSERT_OK(kiln_collective_thunk_prepare(t, &pp));
  unsigned char a[512] = {1}, o[512];
  unsigned char *init[1] = {a}, *out[1] = {o};
  ASSERT_OK(run_on(t, g_gpu, 1, NULL, 512, init, out, 1));
  g_fail_fn("ncclAllReduce", ncclInvalidUsage);
  s = run_on(t, g_gpu, 1, NULL, 512, init, out, 1);
  assert_non_null(strstr(kiln_status_message(s), "ncclAllReduce (all-reduce.fails)"));
  assert_non_null(strstr(kiln_status_message(s), "ncclInvalidUsage"));
  assert_code(s, KILN_FAILED_PRECONDITION);
  /* The group was closed: the next run works. */
  ASSERT_OK(run_on(t, g_gpu, 1, NULL, 512, init, out, 1));
  kiln_thunk_destroy(t);
}

static void test_a_library_that_is_not_nccl_or_too_old_is_unavailable(void **state) {
  (void)state;
  kiln_nccl_t *n = NULL;
  const char *missing[] = {"libnccl-kiln-test-missing.so.2"};
  kiln_status s = kiln_nccl_open(missing, 1, &n);
  assert_non_null(strstr(kiln_status_message(s), "libnccl.so.2"));
  assert_non_null(strstr(kiln_status_message(s), "nvidia-nccl-cu13"));
  assert_code(s, KILN_UNAVAILABLE);
  const char *libm[] = {"libm.so.6"};
  s = kiln_nccl_open(libm, 1, &n);
  assert_non_null(strstr(kiln_status_message(s), "does not export ncclGetVersion"));
  assert_code(s, KILN_UNAVAILABLE);
  const char *fake[] = {KILN_FAKE_NCCL};
  setenv("FAKE_NCCL_VERSION", "20903", 1);
  s = kiln_nccl_open(fake, 1, &n);
  unsetenv("FAKE_NCCL_VERSION");
  assert_non_null(strstr(kiln_status_message(s), "NCCL 2.10 or newer"));
  assert_code(s, KILN_UNAVAILABLE);
  ASSERT_OK(kiln_nccl_open(fake, 1, &n));
  assert_int_equal(n->version, 22703);
  kiln_nccl_close(n);
}

/* ---- the unique-id exchange ---- */

static struct {
  pthread_mutex_t mu;
  char key[8][128];
  ncclUniqueId id[8];
  int n, puts, gets;
  int64_t remote_device; /* is_local is false for it */
} g_kv = {.mu = PTHREAD_MUTEX_INITIALIZER};

static kiln_status kv_put(void *ctx, const char *key, const ncclUniqueId *id) {
  (void)ctx;
  pthread_mutex_lock(&g_kv.mu);
  snprintf(g_kv.key[g_kv.n], sizeof(g_kv.key[0]), "%s", key);
  g_kv.id[g_kv.n++] = *id;
  g_kv.puts++;
  pthread_mutex_unlock(&g_kv.mu);
  return NULL;
}
static kiln_status kv_get(void *ctx, const char *key, ncclUniqueId *id) {
  (void)ctx;
  kiln_status s = kiln_status_make(KILN_DEADLINE_EXCEEDED, "kv: no key %s", key);
  pthread_mutex_lock(&g_kv.mu);
  g_kv.gets++;
  for (int i = 0; i < g_kv.n; i++)
    if (!strcmp(g_kv.key[i], key)) {
      *id = g_kv.id[i];
      kiln_status_free(s);
      s = NULL;
    }
  pthread_mutex_unlock(&g_kv.mu);
  return s;
}
static bool kv_is_local(void *ctx, int64_t device) {
  (void)ctx;
  return device != g_kv.remote_device;
}

static void test_unique_ids_go_through_the_exchange_for_other_processes(void **state) {
  (void)state;
  kiln_nccl_id_exchange_t x = {kv_put, kv_get, NULL, kv_is_local};
  kiln_nccl_set_id_exchange(&x);
  kiln_device_t *devs[2];
  for (int i = 0; i < 2; i++)
    ASSERT_OK(kiln_cuda_device_create_with_driver(g_fake_driver, i, &devs[i]));
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_REDUCE, 1, 2, 2);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 16),
                                             .recv = kiln_slice_make(0, 256, 16),
                                             .dtype = KILN_COLL_S32,
                                             .count = 4};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-reduce.kv", d);
  uint64_t sizes[1] = {512};
  kiln_thunk_prepare_params_t pp = {1, sizes};
  ASSERT_OK(kiln_collective_thunk_prepare(t, &pp));
  unsigned char a[512], b[512], oa[512], ob[512];
  fill(a, 512, 0, KILN_COLL_S32);
  fill(b, 512, 1, KILN_COLL_S32);
  unsigned char *init[2] = {a, b}, *out[2] = {oa, ob};
  /* Rank 0 here: the id is fetched once and published under the group's key. */
  g_kv.remote_device = -1;
  int64_t ids[2] = {40, 41};
  ASSERT_OK(run_on(t, devs, 2, ids, 512, init, out, 1));
  assert_int_equal(g_kv.puts, 1);
  assert_int_equal(g_kv.gets, 0);
  assert_string_equal(g_kv.key[0], "nccl group of 2: devices 40,41");
  int32_t x0, x1, want;
  memcpy(&x0, a, 4);
  memcpy(&x1, b, 4);
  memcpy(&want, oa + 256, 4);
  assert_int_equal(want, (int32_t)((uint32_t)x0 + (uint32_t)x1));
  /* Rank 0 in "another process" (device 50): the id is read from the store, whoever put it. */
  ncclUniqueId remote;
  const kiln_nccl_t *n = NULL;
  ASSERT_OK(kiln_nccl_get(&n));
  assert_int_equal(n->ncclGetUniqueId(&remote), ncclSuccess);
  ASSERT_OK(kv_put(NULL, "nccl group of 2: devices 50,41", &remote));
  g_kv.remote_device = 50;
  int64_t ids2[2] = {50, 41};
  ASSERT_OK(run_on(t, devs, 2, ids2, 512, init, out, 1));
  assert_int_equal(g_kv.gets, 1);
  assert_int_equal(g_kv.puts, 2); /* the test's own */
  /* A key nobody published: the store's error, naming the group. */
  g_kv.remote_device = 60;
  int64_t ids3[2] = {60, 41};
  kiln_status s = run_on(t, devs, 2, ids3, 512, init, out, 1);
  assert_non_null(strstr(kiln_status_message(s), "devices 60,41"));
  assert_code(s, KILN_DEADLINE_EXCEEDED);
  kiln_nccl_set_id_exchange(NULL);
  kiln_thunk_destroy(t);
  for (int i = 0; i < 2; i++) kiln_device_destroy(devs[i]);
}

/* ---- without NCCL ---- */

static void test_without_nccl_a_collective_on_cuda_devices_is_unavailable(void **state) {
  (void)state;
  kiln_device_t *devs[2];
  for (int i = 0; i < 2; i++)
    ASSERT_OK(kiln_cuda_device_create_with_driver(g_fake_driver, i, &devs[i]));
  kiln_coll_thunk_desc_t *d = desc_groups(KILN_COLL_THUNK_ALL_GATHER, 1, 2, 2);
  d->buffers[0] = (kiln_coll_thunk_buffer_t){.send = kiln_slice_make(0, 0, 16),
                                             .recv = kiln_slice_make(0, 256, 32),
                                             .dtype = KILN_COLL_F32,
                                             .outer = 1,
                                             .block_bytes = 16};
  kiln_thunk_t *t = kiln_thunk_collective_create("all-gather.no-nccl", d);
  uint64_t sizes[1] = {512};
  kiln_thunk_prepare_params_t pp = {1, sizes};
  ASSERT_OK(kiln_collective_thunk_prepare(t, &pp));
  unsigned char a[512] = {0}, b[512] = {0}, oa[512], ob[512];
  unsigned char *init[2] = {a, b}, *out[2] = {oa, ob};
  kiln_status s = run_on(t, devs, 2, NULL, 512, init, out, 1);
  const char *m = kiln_status_message(s);
  assert_non_null(strstr(m, "NCCL (libnccl.so.2) not found"));
  assert_non_null(strstr(m, "pip install nvidia-nccl-cu13"));
  assert_non_null(strstr(m, "collective all-gather.no-nccl on cuda:0"));
  printf("without NCCL: %s\n", m);
  assert_code(s, KILN_UNAVAILABLE);
  kiln_thunk_destroy(t);
  for (int i = 0; i < 2; i++) kiln_device_destroy(devs[i]);
}

static int setup_without_nccl(void **state) {
  (void)state;
  return fake_driver_init();
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--without-nccl")) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_nccl_a_collective_on_cuda_devices_is_unavailable),
    };
    return cmocka_run_group_tests(tests, setup_without_nccl, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce_maps_every_type_and_reduction_and_matches_the_host_clique),
      cmocka_unit_test(test_in_place_and_variadic_all_reduce_in_one_group),
      cmocka_unit_test(test_all_gather_reduce_scatter_and_all_to_all_with_rows),
      cmocka_unit_test(test_tuple_all_to_all_permute_and_broadcast),
      cmocka_unit_test(test_operands_overlapping_their_results_are_staged),
      cmocka_unit_test(test_sixteen_bit_integer_reductions_are_unimplemented),
      cmocka_unit_test(test_one_communicator_per_group_and_device_set_is_cached_and_released),
      cmocka_unit_test(test_split_all_reduce_waits_for_the_collective_at_its_done),
      cmocka_unit_test(test_a_start_failing_after_its_enqueue_drains_the_collective_stream),
      cmocka_unit_test(test_nccl_results_map_to_codes_with_the_library_text),
      cmocka_unit_test(test_a_library_that_is_not_nccl_or_too_old_is_unavailable),
      cmocka_unit_test(test_unique_ids_go_through_the_exchange_for_other_processes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
