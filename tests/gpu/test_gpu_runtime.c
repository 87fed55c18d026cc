/* The runtime on a real GPU: a kernel compiled by compiler/backend/nvptx.h loaded from its
 * cubin, launches (with the >48 KiB shared-memory opt-in), a 50-kernel CUDA graph replayed
 * many times, the graph patched in place after its buffers move (no re-instantiation, only
 * the affected nodes), the command-buffer thunk over kernel thunks, the bounded graph cache,
 * cuBLAS gemm, and replay vs one-by-one launch timings.
 *
 * Without a CUDA driver or GPU it prints "SKIP: <reason>" and exits KILN_TEST_SKIPPED (77),
 * which ctest reports as skipped; scripts/run-gpu.sh runs it too. Exit status otherwise: 0
 * when every check passed (or skipped), 1 otherwise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/backend/nvptx.h"
#include "runtime/buffer.h"
#include "runtime/command_buffer.h"
#include "runtime/command_buffer_thunk.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_graph.h"
#include "runtime/device.h"
#include "runtime/runtime_options.h"
#include "runtime/thunk.h"
#include "tests/backend_test_kernels.h"
#include "tests/skip_util.h"

static int g_failures, g_checks;

#define CHECK(cond)                                                   \
  do {                                                                \
    g_checks++;                                                       \
    if (!(cond)) {                                                    \
      g_failures++;                                                   \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                 \
  } while (0)

#define CHECK_OK(expr)                                                   \
  do {                                                                   \
    kiln_status s__ = (expr);                                            \
    g_checks++;                                                          \
    if (s__) {                                                           \
      g_failures++;                                                      \
      fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, \
              kiln_status_message(s__));                                 \
      kiln_status_free(s__);                                             \
    }                                                                    \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { N = 1 << 16, BLOCK = 256, CHAIN = 50 };

/* Compiles vadd(a, b, c, n): c = a + b for the device's architecture; falls back to PTX for
 * the driver's JIT when no cubin tool is present. */
static kiln_status load_vadd(kiln_device_t *dev, kiln_device_module_t **out) {
  char want[16], arch[16];
  bool ptx_only = false;
  kiln_cuda_device_arch(dev, want, sizeof(want));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_nvptx_arch_resolve(want, arch, sizeof(arch), &ptx_only));
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = kiln_test_build_vadd(ctx, "vadd", NULL);
  kiln_nvptx_set_max_threads(LLVMGetNamedFunction(m, "vadd"), BLOCK, 1, 1);
  kiln_nvptx_options_t opts = {.arch = arch,
                               .cubin_via = ptx_only ? KILN_CUBIN_VIA_SKIP : KILN_CUBIN_VIA_AUTO};
  kiln_nvptx_result_t r;
  kiln_status s = kiln_nvptx_compile(m, &opts, &r);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  kiln_module_image_t img = {0};
  if (r.cubin) {
    img.data = r.cubin;
    img.size = r.cubin_size;
    printf("vadd: %zu-byte cubin for %s via %s\n", r.cubin_size, arch,
           r.method == KILN_CUBIN_METHOD_NVJITLINK ? "nvJitLink" : "ptxas");
  } else if (r.ptx) {
    printf("vadd: no cubin (%s); loading PTX through the driver JIT\n",
           s ? kiln_status_message(s) : "skipped");
    img.data = r.ptx;
    img.size = r.ptx_size + 1;
  }
  kiln_status_free(s);
  s = img.data ? kiln_device_module_load(dev, &img, out)
               : kiln_status_make(KILN_INTERNAL, "vadd: no PTX was produced");
  if (!s)
    printf("JIT log: %s\n",
           kiln_cuda_module_jit_log(*out)[0] ? kiln_cuda_module_jit_log(*out) : "(empty)");
  kiln_nvptx_result_free(&r);
  return s;
}

static kiln_launch_dims_t vadd_dims(uint32_t shared) {
  kiln_launch_dims_t d = {{(N + BLOCK - 1) / BLOCK, 1, 1}, {BLOCK, 1, 1}, shared};
  return d;
}

static void upload_const(kiln_stream_t *s, kiln_devptr_t p, float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  CHECK_OK(kiln_stream_memset(s, p, bits, 4, N));
}

static float read_at(kiln_stream_t *s, kiln_devptr_t p, size_t i) {
  float v = NAN;
  CHECK_OK(kiln_stream_memcpy_d2h(s, &v, p + i * 4, 4));
  CHECK_OK(kiln_stream_synchronize(s));
  return v;
}

/* x <- x + ones, y <- ... : CHAIN kernels alternating x->y->x, each adding `ones`; then a
 * memset of z and a copy z -> w. */
static void build_chain(kiln_cmd_list_t *l, const kiln_kernel_t *k, kiln_devptr_t x,
                        kiln_devptr_t y, kiln_devptr_t ones, kiln_devptr_t z, kiln_devptr_t w) {
  kiln_cmd_list_clear(l);
  kiln_launch_dims_t d = vadd_dims(0);
  for (int i = 0; i < CHAIN; i++) {
    uint64_t args[4] = {i & 1 ? y : x, ones, i & 1 ? x : y, N};
    kiln_cmd_list_push_kernel(l, k, &d, args, 4);
  }
  kiln_cmd_list_push_memset(l, z, 0x40000000u /* 2.0f */, 4, N);
  kiln_cmd_list_push_memcpy(l, w, z, N * 4);
}

/* Distinct small values (exact in f32 products and sums of a few terms): a transposition or
 * a wrong leading dimension changes the result. */
static float gemm_value(size_t i, int salt) {
  return (float)((int)((i * 7 + (size_t)salt * 5) % 23) - 11) / 8.0f;
}

/* C = 1.5 op(A) op(B) + 0.5 C for a batch of 3 odd-sized matrices in each of the four
 * transpose forms, every element compared with a host computation. With KILN_REQUIRE_GPU=1
 * a missing cuBLAS is a failure. */
static void check_gemm(kiln_device_t *dev, kiln_stream_t *st) {
  enum { B = 3, M = 37, NN = 29, K = 19 };
  const size_t na = (size_t)B * M * K, nb = (size_t)B * K * NN, nc = (size_t)B * M * NN;
  float *ha = malloc(na * 4), *hb = malloc(nb * 4), *hc = malloc(nc * 4), *out = malloc(nc * 4);
  for (size_t i = 0; i < na; i++) ha[i] = gemm_value(i, 1);
  for (size_t i = 0; i < nb; i++) hb[i] = gemm_value(i, 2);
  for (size_t i = 0; i < nc; i++) hc[i] = gemm_value(i, 3);
  kiln_devptr_t a, b, c;
  CHECK_OK(kiln_device_mem_alloc(dev, na * 4, &a));
  CHECK_OK(kiln_device_mem_alloc(dev, nb * 4, &b));
  CHECK_OK(kiln_device_mem_alloc(dev, nc * 4, &c));
  CHECK_OK(kiln_stream_memcpy_h2d(st, a, ha, na * 4));
  CHECK_OK(kiln_stream_memcpy_h2d(st, b, hb, nb * 4));
  for (int form = 0; form < 4; form++) {
    const bool ta = form & 1, tb = form & 2;
    kiln_gemm_desc_t g = {KILN_GEMM_F32,           B, M, NN, K, ta, tb, 1.5, 0.5, KILN_GEMM_SAME,
                          KILN_GEMM_EPILOGUE_NONE, 0};
    CHECK_OK(kiln_stream_memcpy_h2d(st, c, hc, nc * 4));
    kiln_status gs = kiln_stream_gemm(st, &g, a, b, c);
    if (gs && kiln_status_code(gs) == KILN_UNAVAILABLE && !kiln_gpu_required()) {
      printf("SKIP gemm: %s\n", kiln_status_message(gs));
      kiln_status_free(gs);
      break;
    }
    CHECK_OK(gs);
    CHECK_OK(kiln_stream_memcpy_d2h(st, out, c, nc * 4));
    CHECK_OK(kiln_stream_synchronize(st));
    int bad = 0;
    for (int bi = 0; bi < B; bi++)
      for (int i = 0; i < M; i++)
        for (int j = 0; j < NN; j++) {
          double acc = 0;
          for (int p = 0; p < K; p++) {
            /* op(A)[i][p]: A is M x K, or K x M when transposed; likewise B. */
            double x = ha[(size_t)bi * M * K + (ta ? (size_t)p * M + i : (size_t)i * K + p)];
            double y = hb[(size_t)bi * K * NN + (tb ? (size_t)j * K + p : (size_t)p * NN + j)];
            acc += x * y;
          }
          size_t ci = (size_t)bi * M * NN + (size_t)i * NN + j;
          double want = 1.5 * acc + 0.5 * hc[ci];
          if (fabs(out[ci] - want) > 1e-4 * (1 + fabs(want)) && bad++ < 3)
            fprintf(stderr, "gemm ta=%d tb=%d: C[%d][%d][%d] = %g, want %g\n", ta, tb, bi, i, j,
                    out[ci], want);
        }
    CHECK(bad == 0);
    printf("gemm f32 %dx%dx%dx%d ta=%d tb=%d: %d of %zu elements wrong\n", B, M, NN, K, ta, tb, bad,
           nc);
  }
  kiln_device_mem_free(dev, a);
  kiln_device_mem_free(dev, b);
  kiln_device_mem_free(dev, c);
  free(ha);
  free(hb);
  free(hc);
  free(out);
}

int main(void) {
  kiln_device_t *dev = NULL;
  kiln_runtime_options_t ro = kiln_runtime_options();
  ro.command_buffer_cache_size = 8;
  kiln_runtime_options_set(&ro);
  kiln_status s = kiln_device_create("cuda", &dev);
  if (s) {
    int rc = kiln_status_code(s) == KILN_UNAVAILABLE
                 ? kiln_gpu_unavailable_exit(kiln_status_message(s))
                 : (fprintf(stderr, "FAIL: %s\n", kiln_status_message(s)), 1);
    kiln_status_free(s);
    return rc;
  }
  printf("device: %s\n", dev->name);
  kiln_stream_t *st;
  CHECK_OK(kiln_stream_create(dev, &st));
  kiln_device_module_t *mod = NULL;
  s = load_vadd(dev, &mod);
  if (s) {
    fprintf(stderr, "FAIL: cannot load vadd: %s\n", kiln_status_message(s));
    return 1;
  }
  const kiln_kernel_t *k = NULL;
  CHECK_OK(kiln_device_module_get_kernel(mod, "vadd", &k));
  kiln_status miss = kiln_device_module_get_kernel(mod, "nope", &(const kiln_kernel_t *){NULL});
  CHECK(kiln_status_code(miss) == KILN_NOT_FOUND);
  kiln_status_free(miss);

  /* ---- launches ---- */
  kiln_devptr_t x, y, ones, z, w;
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &x));
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &y));
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &ones));
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &z));
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &w));
  upload_const(st, x, 3.0f);
  upload_const(st, ones, 1.0f);
  uint64_t args[4] = {x, ones, y, N};
  kiln_launch_dims_t d = vadd_dims(0);
  CHECK_OK(kiln_stream_launch(st, k, &d, args, 4));
  CHECK(read_at(st, y, N - 1) == 4.0f);
  kiln_launch_dims_t big = vadd_dims(64 * 1024); /* needs the opt-in */
  CHECK_OK(kiln_stream_launch(st, k, &big, args, 4));
  CHECK_OK(kiln_stream_synchronize(st));
  CHECK(k->shared_opt_in == 64 * 1024);
  kiln_launch_dims_t huge = vadd_dims(1u << 30);
  kiln_status hs = kiln_stream_launch(st, k, &huge, args, 4);
  CHECK(kiln_status_code(hs) == KILN_INVALID_ARGUMENT);
  kiln_status_free(hs);

  /* ---- a graph replayed many times ---- */
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(dev);
  kiln_cmd_list_t l;
  kiln_cmd_list_init(&l);
  upload_const(st, x, 0.0f);
  build_chain(&l, k, x, y, ones, z, w);
  const int R = 1000;
  kiln_cmd_action_t act;
  for (int r = 0; r < R; r++) CHECK_OK(kiln_cmd_cache_execute(cache, st, &l, &act));
  CHECK(act == KILN_CMD_ACTION_REPLAY);
  CHECK(read_at(st, x, 12345) == (float)(CHAIN * R));
  CHECK(read_at(st, w, 7) == 2.0f);
  kiln_cmd_stats_t s0 = kiln_cmd_cache_stats(cache);
  printf("replayed %d times: records %lld, instantiations %lld, replays %lld\n", R,
         (long long)s0.records, (long long)s0.instantiations, (long long)s0.replays);
  CHECK(s0.instantiations == 1);
  CHECK(s0.replays == R - 1);

  /* ---- buffers move: patch in place, never re-instantiate ---- */
  kiln_devptr_t x2, y2, z2;
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &x2));
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &y2));
  CHECK_OK(kiln_device_mem_alloc(dev, N * 4, &z2));
  upload_const(st, x2, 100.0f);
  build_chain(&l, k, x2, y2, ones, z, w);
  CHECK_OK(kiln_cmd_cache_execute(cache, st, &l, &act));
  CHECK(act == KILN_CMD_ACTION_PATCH);
  CHECK(read_at(st, x2, 999) == 100.0f + CHAIN);
  kiln_cmd_stats_t s1 = kiln_cmd_cache_stats(cache);
  CHECK(s1.instantiations == 1);
  CHECK(s1.reinstantiations == 0);
  CHECK(s1.nodes_patched - s0.nodes_patched == CHAIN); /* every kernel touches x or y */
  /* Only z moves: the memset and the copy are patched, the 50 kernels are not. */
  build_chain(&l, k, x2, y2, ones, z2, w);
  CHECK_OK(kiln_cmd_cache_execute(cache, st, &l, &act));
  CHECK(act == KILN_CMD_ACTION_PATCH);
  kiln_cmd_stats_t s2 = kiln_cmd_cache_stats(cache);
  CHECK(s2.nodes_patched - s1.nodes_patched == 2);
  CHECK(s2.instantiations == 1);
  CHECK(read_at(st, w, 5) == 2.0f);
  printf("after moves: patched launches %lld, nodes patched %lld, instantiations %lld\n",
         (long long)s2.patched_launches, (long long)s2.nodes_patched, (long long)s2.instantiations);

  /* ---- timing: graph replay vs one by one ---- */
  {
    const int T = 200;
    for (int r = 0; r < 10; r++) CHECK_OK(kiln_cmd_cache_execute(cache, st, &l, NULL));
    CHECK_OK(kiln_stream_synchronize(st));
    double t0 = now_s();
    for (int r = 0; r < T; r++) CHECK_OK(kiln_cmd_cache_execute(cache, st, &l, NULL));
    CHECK_OK(kiln_stream_synchronize(st));
    double t_graph = (now_s() - t0) / T;
    t0 = now_s();
    for (int r = 0; r < T; r++) CHECK_OK(kiln_cuda_graph_ops.issue(st, &l));
    CHECK_OK(kiln_stream_synchronize(st));
    double t_issue = (now_s() - t0) / T;
    printf(
        "GPU %d kernels + memset + copy of %d floats: graph replay %.1f us/exec, one by one "
        "%.1f us/exec, ratio %.2fx\n",
        CHAIN, N, t_graph * 1e6, t_issue * 1e6, t_issue / t_graph);
  }

  /* ---- the command-buffer thunk over kernel thunks ---- */
  {
    kiln_buffer_table_t t;
    CHECK_OK(kiln_buffer_table_init(&t, dev, 2));
    CHECK_OK(kiln_buffer_table_allocate(&t, 0, N * 4));
    CHECK_OK(kiln_buffer_table_allocate(&t, 1, N * 4));
    upload_const(st, t.bases[0], 1.0f);
    kiln_thunk_seq_t seq;
    kiln_thunk_seq_init(&seq);
    kiln_kernel_arg_t ka[4] = {kiln_kernel_arg_slice(kiln_slice_make(0, 0, N * 4)),
                               kiln_kernel_arg_slice(kiln_slice_make(0, 0, N * 4)),
                               kiln_kernel_arg_slice(kiln_slice_make(1, 0, N * 4)),
                               kiln_kernel_arg_scalar(N)};
    kiln_thunk_seq_push(&seq, kiln_thunk_kernel_create("double", mod, "vadd", &d, ka, 4));
    kiln_thunk_seq_push(&seq, kiln_thunk_memset_create("zero", kiln_slice_make(0, 0, 64), 0, 4));
    CHECK_OK(kiln_command_buffer_convert(&seq, 2, NULL));
    CHECK(seq.len == 1 && kiln_thunk_kind(seq.items[0]) == KILN_THUNK_COMMAND_BUFFER);
    kiln_thunk_prepare_params_t pp = {t.num, t.sizes};
    kiln_thunk_init_params_t ip = {dev};
    kiln_thunk_exec_params_t ep = {.device = dev, .stream = st, .buffers = &t, .state = NULL};
    CHECK_OK(kiln_thunk_seq_prepare(&seq, &pp));
    CHECK_OK(kiln_thunk_seq_initialize(&seq, &ip));
    CHECK_OK(kiln_thunk_seq_execute(&seq, &ep));
    CHECK(kiln_command_buffer_thunk_last_action(seq.items[0]) == KILN_CMD_ACTION_RECORD);
    CHECK_OK(kiln_thunk_seq_execute(&seq, &ep));
    CHECK(kiln_command_buffer_thunk_last_action(seq.items[0]) == KILN_CMD_ACTION_REPLAY);
    CHECK(read_at(st, t.bases[1], 100) == 2.0f);
    CHECK(read_at(st, t.bases[0], 3) == 0.0f);
    kiln_thunk_seq_free(&seq);
    kiln_buffer_table_free(&t);
  }

  /* ---- the cache bound (8 here): 12 structures evict 4+ ---- */
  {
    kiln_cmd_stats_t b0 = kiln_cmd_cache_stats(cache);
    for (uint32_t g = 1; g <= 12; g++) {
      kiln_cmd_list_t one;
      kiln_cmd_list_init(&one);
      kiln_launch_dims_t dg = {{g, 1, 1}, {BLOCK, 1, 1}, 0};
      uint64_t a1[4] = {x, ones, y, N};
      kiln_cmd_list_push_kernel(&one, k, &dg, a1, 4);
      CHECK_OK(kiln_cmd_cache_execute(cache, st, &one, &act));
      CHECK(act == KILN_CMD_ACTION_RECORD);
      kiln_cmd_list_free(&one);
    }
    CHECK_OK(kiln_stream_synchronize(st));
    kiln_cmd_stats_t b1 = kiln_cmd_cache_stats(cache);
    CHECK(kiln_cmd_cache_size(cache) == 8);
    CHECK(b1.evictions - b0.evictions >= 4);
    printf("cache bound 8: size %zu after 12 new structures, evictions %lld\n",
           kiln_cmd_cache_size(cache), (long long)(b1.evictions - b0.evictions));
  }

  /* ---- gemm through cuBLAS: every element of every transpose form ---- */
  check_gemm(dev, st);

  kiln_cmd_list_free(&l);
  kiln_devptr_t all[] = {x, y, ones, z, w, x2, y2, z2};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) kiln_device_mem_free(dev, all[i]);
  kiln_stream_destroy(st);
  kiln_device_module_unload(mod);
  kiln_device_destroy(dev);
  printf("%s: %d checks, %d failures\n", g_failures ? "FAILED" : "PASSED", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
