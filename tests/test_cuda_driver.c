/* The CUDA layer without a GPU: the driver symbol table (complete, well-formed, resolved at
 * the pinned ABI version), error mapping, a missing driver reported as UNAVAILABLE with the
 * paths tried, the CUDA graph node parameters, and the command-buffer decisions (replay,
 * patch only changed nodes, re-instantiate once after a failed update, retire after a second
 * failure, bounded LRU cache) driven through a fake device, and custom-call commands captured
 * into child graph nodes (recaptured when patched, issued one by one when capture fails)
 * through a fake driver table. */
#include <dlfcn.h>
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
#include "runtime/command_buffer.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_graph.h"
#include "runtime/device.h"
#include "runtime/runtime_options.h"
#include "tests/skip_util.h"

/* ---- symbol table ------------------------------------------------------------------------ */

static void test_symbol_table_is_complete_and_well_formed(void **state) {
  (void)state;
  size_t n = kiln_cuda_symbol_count();
  assert_true(n >= 40);
  for (size_t i = 0; i < n; i++) {
    const char *name = kiln_cuda_symbol_name(i);
    assert_non_null(name);
    assert_true(strncmp(name, "cu", 2) == 0);
    /* Versions are chosen by cuGetProcAddress; versioned names never appear. */
    assert_null(strstr(name, "_v2"));
    assert_null(strstr(name, "_v3"));
    assert_null(strstr(name, "_ptsz"));
    assert_null(strstr(name, "_ptds"));
    for (size_t j = 0; j < i; j++) assert_string_not_equal(name, kiln_cuda_symbol_name(j));
  }
  assert_null(kiln_cuda_symbol_name(n));
  /* What the runtime calls must be in the table. */
  static const char *const required[] = {"cuInit",
                                         "cuGetErrorString",
                                         "cuDevicePrimaryCtxRetain",
                                         "cuCtxSetCurrent",
                                         "cuMemAlloc",
                                         "cuMemAllocHost",
                                         "cuMemcpyHtoDAsync",
                                         "cuMemcpyDtoHAsync",
                                         "cuMemcpyDtoDAsync",
                                         "cuMemsetD32Async",
                                         "cuStreamCreate",
                                         "cuEventRecord",
                                         "cuStreamWaitEvent",
                                         "cuModuleLoadDataEx",
                                         "cuModuleGetFunction",
                                         "cuFuncSetAttribute",
                                         "cuLaunchKernelEx",
                                         "cuGraphCreate",
                                         "cuGraphAddKernelNode",
                                         "cuGraphAddMemcpyNode",
                                         "cuGraphAddMemsetNode",
                                         "cuGraphInstantiateWithFlags",
                                         "cuGraphLaunch",
                                         "cuGraphExecKernelNodeSetParams",
                                         "cuGraphExecMemcpyNodeSetParams",
                                         "cuGraphExecMemsetNodeSetParams",
                                         "cuGraphExecDestroy"};
  for (size_t r = 0; r < sizeof(required) / sizeof(required[0]); r++) {
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) found = !strcmp(kiln_cuda_symbol_name(i), required[r]);
    if (!found) fail_msg("symbol %s missing from cuda_symbols.def", required[r]);
  }
}

/* A fake cuGetProcAddress_v2: hands out a distinct non-NULL address per symbol, records the
 * requests, and can pretend one symbol is missing. */
static struct {
  int requests;
  int bad_version;
  int bad_flags;
  const char *missing;
  char seen[128][64];
} g_fake;

static CUresult fake_get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                              CUdriverProcAddressQueryResult *status) {
  if (version != KILN_CUDA_DRIVER_ABI_VERSION) g_fake.bad_version++;
  if (flags != CU_GET_PROC_ADDRESS_DEFAULT) g_fake.bad_flags++;
  if (g_fake.requests < 128) snprintf(g_fake.seen[g_fake.requests], 64, "%s", symbol);
  g_fake.requests++;
  if (g_fake.missing && !strcmp(symbol, g_fake.missing)) {
    *pfn = NULL;
    *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return 500;  /* CUDA_ERROR_NOT_FOUND */
  }
  *pfn = (void *)(uintptr_t)(0x1000 + 16 * g_fake.requests);
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

static void test_resolve_requests_every_symbol_at_the_pinned_version(void **state) {
  (void)state;
  memset(&g_fake, 0, sizeof(g_fake));
  kiln_cuda_driver_t d;
  memset(&d, 0, sizeof(d));
  for (size_t i = 0; i < kiln_cuda_symbol_count(); i++)
    assert_false(kiln_cuda_symbol_is_set(&d, i));
  ASSERT_OK(kiln_cuda_driver_resolve(&d, fake_get_proc));
  assert_int_equal(g_fake.requests, (int)kiln_cuda_symbol_count());
  assert_int_equal(g_fake.bad_version, 0);
  assert_int_equal(g_fake.bad_flags, 0);
  for (size_t i = 0; i < kiln_cuda_symbol_count(); i++) {
    assert_true(kiln_cuda_symbol_is_set(&d, i));
    assert_string_equal(g_fake.seen[i], kiln_cuda_symbol_name(i));
  }
  assert_non_null(d.cuLaunchKernelEx);
  assert_non_null(d.cuGraphExecKernelNodeSetParams);
}

static void test_resolve_names_the_symbol_an_old_driver_lacks(void **state) {
  (void)state;
  memset(&g_fake, 0, sizeof(g_fake));
  g_fake.missing = "cuLaunchKernelEx";
  kiln_cuda_driver_t d;
  memset(&d, 0, sizeof(d));
  kiln_status s = kiln_cuda_driver_resolve(&d, fake_get_proc);
  assert_non_null(strstr(kiln_status_message(s), "cuLaunchKernelEx"));
  assert_non_null(strstr(kiln_status_message(s), "12000"));
  assert_code(s, KILN_UNAVAILABLE);
}

/* ---- errors ------------------------------------------------------------------------------ */

static CUresult fake_error_string(CUresult r, const char **str) {
  if (r == 2) {
    *str = "driver says: out of memory";
    return CUDA_SUCCESS;
  }
  *str = NULL;
  return 1;
}

static void test_cuda_errors_map_to_status_codes_with_name_and_text(void **state) {
  (void)state;
  const struct {
    CUresult r;
    kiln_status_code_t code;
    const char *name;
  } cases[] = {
      {1, KILN_INVALID_ARGUMENT, "CUDA_ERROR_INVALID_VALUE"},
      {2, KILN_RESOURCE_EXHAUSTED, "CUDA_ERROR_OUT_OF_MEMORY"},
      {3, KILN_FAILED_PRECONDITION, "CUDA_ERROR_NOT_INITIALIZED"},
      {34, KILN_UNAVAILABLE, "CUDA_ERROR_STUB_LIBRARY"},
      {100, KILN_UNAVAILABLE, "CUDA_ERROR_NO_DEVICE"},
      {200, KILN_INVALID_ARGUMENT, "CUDA_ERROR_INVALID_IMAGE"},
      {209, KILN_INVALID_ARGUMENT, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
      {218, KILN_INVALID_ARGUMENT, "CUDA_ERROR_INVALID_PTX"},
      {500, KILN_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
      {700, KILN_INTERNAL, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {701, KILN_RESOURCE_EXHAUSTED, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
      {702, KILN_DEADLINE_EXCEEDED, "CUDA_ERROR_LAUNCH_TIMEOUT"},
      {801, KILN_UNIMPLEMENTED, "CUDA_ERROR_NOT_SUPPORTED"},
      {910, KILN_FAILED_PRECONDITION, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"},
      {999, KILN_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(kiln_cuda_error_code(cases[i].r), cases[i].code);
    assert_string_equal(kiln_cuda_error_name(cases[i].r), cases[i].name);
    kiln_status s = kiln_cuda_status_make(NULL, cases[i].r, __FILE__, __LINE__, "cuThing(%d)", 7);
    const char *msg = kiln_status_message(s);
    assert_non_null(strstr(msg, "cuThing(7)"));
    assert_non_null(strstr(msg, cases[i].name));
    assert_code(s, cases[i].code);
  }
  assert_null(kiln_cuda_status_make(NULL, CUDA_SUCCESS, __FILE__, __LINE__, "fine"));
  /* A value the table does not know is UNKNOWN and still says which number it was. */
  assert_int_equal(kiln_cuda_error_code(12345), KILN_UNKNOWN);
  assert_null(kiln_cuda_error_name(12345));
  kiln_status s = kiln_cuda_status_make(NULL, 12345, __FILE__, __LINE__, "cuOdd");
  assert_non_null(strstr(kiln_status_message(s), "12345"));
  assert_code(s, KILN_UNKNOWN);
  /* The driver's own text is preferred when it has one. */
  kiln_cuda_driver_t d;
  memset(&d, 0, sizeof(d));
  d.cuGetErrorString = fake_error_string;
  s = kiln_cuda_status_make(&d, 2, __FILE__, __LINE__, "cuMemAlloc(%d bytes)", 64);
  assert_string_equal(
      kiln_status_message(s),
      "cuMemAlloc(64 bytes): CUDA_ERROR_OUT_OF_MEMORY (2): driver says: out of memory");
  assert_code(s, KILN_RESOURCE_EXHAUSTED);
  s = kiln_cuda_status_make(&d, 700, __FILE__, __LINE__, "launch");
  assert_non_null(strstr(kiln_status_message(s), "illegal memory access"));
  assert_code(s, KILN_INTERNAL);
}

/* ---- missing driver ---------------------------------------------------------------------- */

static void test_missing_driver_is_unavailable_naming_every_path(void **state) {
  (void)state;
  const char *paths[] = {"/nonexistent/a/libcuda.so.1", "/nonexistent/b/libcuda.so"};
  kiln_cuda_driver_t *d = (kiln_cuda_driver_t *)(uintptr_t)1;
  kiln_status s = kiln_cuda_driver_open(paths, 2, &d);
  assert_null(d);
  assert_non_null(strstr(kiln_status_message(s), "/nonexistent/a/libcuda.so.1"));
  assert_non_null(strstr(kiln_status_message(s), "/nonexistent/b/libcuda.so"));
  assert_code(s, KILN_UNAVAILABLE);
}

static void test_library_without_get_proc_address_is_unavailable(void **state) {
  (void)state;
  const char *paths[] = {"libm.so.6"}; /* opens, but is no CUDA driver */
  kiln_cuda_driver_t *d = NULL;
  kiln_status s = kiln_cuda_driver_open(paths, 1, &d);
  assert_null(d);
  assert_non_null(strstr(kiln_status_message(s), "cuInit not found"));
  assert_non_null(strstr(kiln_status_message(s), "libm.so.6"));
  assert_code(s, KILN_UNAVAILABLE);
}

static void test_default_search_without_driver_reports_sonames_and_best_falls_back(void **state) {
  (void)state;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    printf("[  SKIP    ] a CUDA driver is installed here; the no-driver path is not testable\n");
    KILN_SKIPPED();
  }
  kiln_runtime_options_t ro = kiln_runtime_options();
  ro.cuda_driver = NULL; /* the default search, whatever the environment named */
  kiln_runtime_options_set(&ro);
  const kiln_cuda_driver_t *drv = NULL;
  kiln_status s = kiln_cuda_driver_get(&drv);
  assert_null(drv);
  assert_non_null(strstr(kiln_status_message(s), "libcuda.so.1"));
  assert_non_null(strstr(kiln_status_message(s), "libcuda.so ("));
  assert_code(s, KILN_UNAVAILABLE);
  /* Asking again gives the same answer without a crash or a retry storm. */
  assert_code(kiln_cuda_driver_get(&drv), KILN_UNAVAILABLE);
  kiln_device_t *dev = NULL;
  assert_code(kiln_device_create("cuda", &dev), KILN_UNAVAILABLE);
  assert_null(dev);
  ASSERT_OK(kiln_device_create("best", &dev));
  assert_int_equal(dev->kind, KILN_DEVICE_HOST);
  kiln_device_destroy(dev);
}

/* ---- CUDA graph node parameters ---------------------------------------------------------- */

static void test_graph_node_params_describe_the_commands(void **state) {
  (void)state;
  kiln_kernel_t k = {.name = "vadd", .handle = (void *)(uintptr_t)0xF00, .uid = 9};
  kiln_launch_dims_t dims = {{4, 2, 1}, {256, 1, 1}, 65536};
  uint64_t args[3] = {0x1000, 0x2000, 77};
  kiln_cmd_list_t l;
  kiln_cmd_list_init(&l);
  kiln_cmd_list_push_kernel(&l, &k, &dims, args, 3);
  kiln_cmd_list_push_memcpy(&l, 0xA000, 0xB000, 4096);
  kiln_cmd_list_push_memset(&l, 0xC000, 0x3F800000u, 4, 100);
  void *ptrs[3];
  CUDA_KERNEL_NODE_PARAMS kp;
  kiln_cuda_graph_kernel_params(&l.cmds[0], ptrs, &kp);
  assert_ptr_equal(kp.func, (void *)(uintptr_t)0xF00);
  assert_int_equal(kp.gridDimX, 4);
  assert_int_equal(kp.gridDimY, 2);
  assert_int_equal(kp.blockDimX, 256);
  assert_int_equal(kp.sharedMemBytes, 65536);
  assert_ptr_equal(kp.kernelParams, ptrs);
  assert_int_equal(*(uint64_t *)kp.kernelParams[1], 0x2000);
  assert_int_equal(*(uint32_t *)kp.kernelParams[2], 77); /* a 4-byte parameter reads the low half */
  assert_null(kp.extra);
  assert_null(kp.kern);
  CUDA_MEMCPY3D cp;
  ASSERT_OK(kiln_cuda_graph_memcpy_params(&l.cmds[1], (size_t)1 << 31, &cp));
  assert_int_equal(cp.srcMemoryType, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(cp.dstMemoryType, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(cp.srcDevice, 0xB000);
  assert_int_equal(cp.dstDevice, 0xA000);
  assert_int_equal(cp.WidthInBytes, 4096);
  assert_int_equal(cp.srcPitch, 4096);
  assert_int_equal(cp.dstPitch, 4096);
  assert_int_equal(cp.Height, 1);
  assert_int_equal(cp.Depth, 1);
  CUDA_MEMSET_NODE_PARAMS mp;
  ASSERT_OK(kiln_cuda_graph_memset_params(&l.cmds[2], (size_t)1 << 31, &mp));
  assert_int_equal(mp.dst, 0xC000);
  assert_int_equal(mp.value, 0x3F800000u);
  assert_int_equal(mp.elementSize, 4);
  assert_int_equal(mp.width, 100);
  assert_int_equal(mp.height, 1);
  /* The ABI layouts: CUDA_KERNEL_NODE_PARAMS_v2 ends with kern and ctx. */
  assert_int_equal(offsetof(CUDA_KERNEL_NODE_PARAMS, kernelParams), 40);
  assert_int_equal(sizeof(CUDA_KERNEL_NODE_PARAMS), 72);
  assert_int_equal(sizeof(CUDA_MEMSET_NODE_PARAMS), 40);
  assert_int_equal(sizeof(CUDA_MEMCPY3D), 200);
  kiln_cmd_list_free(&l);
}

/* A copy or memset larger than the device's pitch limit becomes rows of at most that pitch
 * that cover exactly the same bytes; one without such a shape is refused (it stays outside
 * the graph); zero-length commands get no node. */
static void test_graph_copies_over_the_pitch_limit_become_rows(void **state) {
  (void)state;
  const size_t max_pitch = 2147483647;    /* H100/H200's CU_DEVICE_ATTRIBUTE_MAX_PITCH */
  const uint64_t big = (uint64_t)6 << 30; /* 6 GiB */
  kiln_cmd_list_t l;
  kiln_cmd_list_init(&l);
  kiln_cmd_list_push_memcpy(&l, 0xA000, 0xB000, big);
  kiln_cmd_list_push_memset(&l, 0xC000, 7, 2, big / 2);
  kiln_cmd_list_push_memcpy(&l, 0xA000, 0xB000, (uint64_t)3 * 1000 * 1000 * 1001); /* 3e9+3e6 */
  kiln_cmd_list_push_memcpy(&l, 0xA000, 0xB000, 0);
  kiln_cmd_list_push_memset(&l, 0xA000, 0, 4, 0);
  CUDA_MEMCPY3D cp;
  ASSERT_OK(kiln_cuda_graph_memcpy_params(&l.cmds[0], max_pitch, &cp));
  assert_true(cp.srcPitch <= max_pitch && cp.dstPitch <= max_pitch);
  assert_int_equal(cp.srcPitch, cp.WidthInBytes);
  assert_int_equal(cp.dstPitch, cp.WidthInBytes);
  assert_int_equal(cp.srcHeight, cp.Height);
  assert_int_equal((uint64_t)cp.WidthInBytes * cp.Height, big);
  assert_int_equal(cp.WidthInBytes, (size_t)1 << 30);
  CUDA_MEMSET_NODE_PARAMS mp;
  ASSERT_OK(kiln_cuda_graph_memset_params(&l.cmds[1], max_pitch, &mp));
  assert_true(mp.pitch <= max_pitch);
  assert_int_equal(mp.pitch, mp.width * 2);
  assert_int_equal((uint64_t)mp.width * mp.height, big / 2);
  /* 3,003,000,000 = 2^6 * 46921875: rows of 64 bytes would be absurd, so it is refused. */
  kiln_status s = kiln_cuda_graph_memcpy_params(&l.cmds[2], max_pitch, &cp);
  assert_non_null(strstr(kiln_status_message(s), "pitch limit"));
  assert_code(s, KILN_UNIMPLEMENTED);
  /* The same copy under a limit it fits: one row whose pitch is its size. */
  ASSERT_OK(kiln_cuda_graph_memcpy_params(&l.cmds[2], (size_t)4 << 30, &cp));
  assert_int_equal(cp.Height, 1);
  assert_int_equal(cp.srcPitch, l.cmds[2].bytes);
  assert_false(kiln_cuda_graph_cmd_is_empty(&l.cmds[0]));
  assert_false(kiln_cuda_graph_cmd_is_empty(&l.cmds[1]));
  assert_true(kiln_cuda_graph_cmd_is_empty(&l.cmds[3]));
  assert_true(kiln_cuda_graph_cmd_is_empty(&l.cmds[4]));
  kiln_cmd_list_free(&l);
}

/* The launch check sees what the driver would refuse: more threads than the compiled kernel
 * allows, and static + dynamic shared memory past the opt-in limit; the opt-in is asked for
 * exactly when static + dynamic passes 48 KiB. */
static void test_launch_check_counts_threads_and_static_shared_memory(void **state) {
  (void)state;
  kiln_cuda_kernel_t k = {.base = {.name = "column_reduce"},
                          .max_threads = 1024,
                          .static_shared = 40 * 1024,
                          .num_regs = 64};
  const int optin_max = 227 * 1024; /* sm_90 */
  uint32_t optin = 99;
  kiln_launch_dims_t d = {{1, 1, 1}, {1024, 1, 1}, 0};
  ASSERT_OK(kiln_cuda_launch_check(&k, &d, optin_max, &optin));
  assert_int_equal(optin, 0);
  /* 40 KiB static + 16 KiB dynamic = 56 KiB: above 48 KiB, so the dynamic part opts in. */
  d.shared_bytes = 16 * 1024;
  ASSERT_OK(kiln_cuda_launch_check(&k, &d, optin_max, &optin));
  assert_int_equal(optin, 16 * 1024);
  /* 40 KiB static + 190 KiB dynamic passes 227 KiB although the dynamic part alone does not. */
  d.shared_bytes = 190 * 1024;
  kiln_status s = kiln_cuda_launch_check(&k, &d, optin_max, &optin);
  assert_non_null(strstr(kiln_status_message(s), "40960 static"));
  assert_code(s, KILN_INVALID_ARGUMENT);
  /* A kernel compiled with too many registers for 1024 threads. */
  k.max_threads = 512;
  k.static_shared = 0;
  d.shared_bytes = 0;
  s = kiln_cuda_launch_check(&k, &d, optin_max, &optin);
  assert_non_null(strstr(kiln_status_message(s), "at most 512"));
  assert_non_null(strstr(kiln_status_message(s), "column_reduce"));
  assert_code(s, KILN_INVALID_ARGUMENT);
  d.block[0] = 32;
  d.block[1] = 16;
  ASSERT_OK(kiln_cuda_launch_check(&k, &d, optin_max, &optin));
  d.block[2] = 2;
  assert_code(kiln_cuda_launch_check(&k, &d, optin_max, &optin), KILN_INVALID_ARGUMENT);
}

/* ---- driver start order ------------------------------------------------------------------- */

static struct {
  char order[8][32];
  int n;
  int version;
  CUresult init_result;
} g_start;

static void start_note(const char *what) {
  if (g_start.n < 8) snprintf(g_start.order[g_start.n], 32, "%s", what);
  g_start.n++;
}
static CUresult start_version(int *v) {
  start_note("cuDriverGetVersion");
  *v = g_start.version;
  return CUDA_SUCCESS;
}
static CUresult start_init(unsigned int flags) {
  (void)flags;
  start_note("cuInit");
  return g_start.init_result;
}
static CUresult start_get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                               CUdriverProcAddressQueryResult *status) {
  if (!strcmp(symbol, "cuInit")) start_note("cuGetProcAddress");
  return fake_get_proc(symbol, pfn, version, flags, status);
}

static void test_driver_start_checks_version_then_inits_then_resolves(void **state) {
  (void)state;
  const kiln_cuda_entry_points_t ep = {start_init, start_version, start_get_proc};
  kiln_cuda_driver_t d;
  memset(&d, 0, sizeof(d));
  memset(&g_start, 0, sizeof(g_start));
  memset(&g_fake, 0, sizeof(g_fake));
  g_start.version = 13000;
  ASSERT_OK(kiln_cuda_driver_start(&d, &ep));
  assert_int_equal(g_start.n, 3);
  assert_string_equal(g_start.order[0], "cuDriverGetVersion");
  assert_string_equal(g_start.order[1], "cuInit");
  assert_string_equal(g_start.order[2], "cuGetProcAddress");
  assert_int_equal(d.driver_version, 13000);
  /* An old driver hears that it is old, not that some entry point is missing. */
  memset(&d, 0, sizeof(d));
  memset(&g_start, 0, sizeof(g_start));
  snprintf(d.path, sizeof(d.path), "libcuda.so.1");
  g_start.version = 11040;
  kiln_status s = kiln_cuda_driver_start(&d, &ep);
  assert_non_null(strstr(kiln_status_message(s), "supports CUDA 11.4; 12.0 or newer"));
  assert_code(s, KILN_UNAVAILABLE);
  assert_int_equal(g_start.n, 1);
  /* cuInit without a device: UNAVAILABLE, and no symbol is looked up. */
  memset(&g_start, 0, sizeof(g_start));
  g_start.version = 12040;
  g_start.init_result = 100;
  s = kiln_cuda_driver_start(&d, &ep);
  assert_non_null(strstr(kiln_status_message(s), "CUDA_ERROR_NO_DEVICE"));
  assert_code(s, KILN_UNAVAILABLE);
  assert_int_equal(g_start.n, 2);
}

/* ---- decisions (pure) --------------------------------------------------------------------- */

static kiln_kernel_t g_k1 = {.name = "k1", .handle = (void *)1, .uid = 101};
static kiln_kernel_t g_k2 = {.name = "k2", .handle = (void *)2, .uid = 102};

/* Five commands: k1(a, b), k2(b, c), memcpy c->d, memset d, k1(d, e); addresses from base. */
static void make_list(kiln_cmd_list_t *l, uint64_t base) {
  kiln_cmd_list_init(l);
  kiln_launch_dims_t d = {{8, 1, 1}, {128, 1, 1}, 0};
  uint64_t a1[2] = {base + 0x000, base + 0x100};
  uint64_t a2[2] = {base + 0x100, base + 0x200};
  uint64_t a3[2] = {base + 0x300, base + 0x400};
  kiln_cmd_list_push_kernel(l, &g_k1, &d, a1, 2);
  kiln_cmd_list_push_kernel(l, &g_k2, &d, a2, 2);
  kiln_cmd_list_push_memcpy(l, base + 0x300, base + 0x200, 256);
  kiln_cmd_list_push_memset(l, base + 0x300, 0, 4, 16);
  kiln_cmd_list_push_kernel(l, &g_k1, &d, a3, 2);
}

static void test_plan_unchanged_addresses_replay(void **state) {
  (void)state;
  kiln_cmd_list_t a, b;
  make_list(&a, 0x10000);
  make_list(&b, 0x10000);
  kiln_cmd_plan_t plan = {0};
  kiln_cmd_plan_update(&a, &b, &plan);
  assert_int_equal(plan.action, KILN_CMD_ACTION_REPLAY);
  assert_int_equal(plan.num_patch, 0);
  assert_int_equal(kiln_cmd_list_structure_hash(&a), kiln_cmd_list_structure_hash(&b));
  kiln_cmd_plan_update(NULL, &b, &plan);
  assert_int_equal(plan.action, KILN_CMD_ACTION_RECORD);
  kiln_cmd_plan_free(&plan);
  kiln_cmd_list_free(&a);
  kiln_cmd_list_free(&b);
}

static void test_plan_changed_kernel_args_patch_only_those_nodes(void **state) {
  (void)state;
  kiln_cmd_list_t a, b;
  make_list(&a, 0x10000);
  make_list(&b, 0x10000);
  b.cmds[1].args[1] = 0x99000; /* k2's output moved */
  b.cmds[4].args[0] = 0x98000; /* last kernel's input moved */
  kiln_cmd_plan_t plan = {0};
  kiln_cmd_plan_update(&a, &b, &plan);
  assert_int_equal(plan.action, KILN_CMD_ACTION_PATCH);
  assert_int_equal(plan.num_patch, 2);
  assert_int_equal(plan.patch[0], 1);
  assert_int_equal(plan.patch[1], 4);
  /* Moving everything patches every node, still without re-recording. */
  kiln_cmd_list_free(&b);
  make_list(&b, 0x50000);
  kiln_cmd_plan_update(&a, &b, &plan);
  assert_int_equal(plan.action, KILN_CMD_ACTION_PATCH);
  assert_int_equal(plan.num_patch, 5);
  assert_int_equal(kiln_cmd_list_structure_hash(&a), kiln_cmd_list_structure_hash(&b));
  /* A change of structure (launch dims, sizes, kernels) is a new recording. */
  b.cmds[0].dims.grid[0] = 9;
  kiln_cmd_plan_update(&a, &b, &plan);
  assert_int_equal(plan.action, KILN_CMD_ACTION_RECORD);
  assert_int_not_equal(kiln_cmd_list_structure_hash(&a), kiln_cmd_list_structure_hash(&b));
  b.cmds[0].dims.grid[0] = 8;
  b.cmds[2].bytes = 128;
  kiln_cmd_plan_update(&a, &b, &plan);
  assert_int_equal(plan.action, KILN_CMD_ACTION_RECORD);
  b.cmds[2].bytes = 256;
  b.cmds[4].kernel = &g_k2;
  kiln_cmd_plan_update(&a, &b, &plan);
  assert_int_equal(plan.action, KILN_CMD_ACTION_RECORD);
  kiln_cmd_plan_free(&plan);
  kiln_cmd_list_free(&a);
  kiln_cmd_list_free(&b);
}

static void test_update_failure_reinstantiates_once_then_gives_up(void **state) {
  (void)state;
  assert_int_equal(kiln_cmd_update_failure_action(0), KILN_CMD_ACTION_REINSTANTIATE);
  assert_int_equal(kiln_cmd_update_failure_action(1), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  assert_int_equal(kiln_cmd_update_failure_action(5), KILN_CMD_ACTION_ISSUE_DIRECTLY);
}

/* ---- the engine with a fake device ------------------------------------------------------ */

typedef struct fake_exec {
  kiln_cmd_list_t list;
} fake_exec_t;

static struct {
  int instantiates, updates, launches, destroys, issues, live;
  int fail_updates;      /* updates left to fail */
  int fail_instantiates; /* instantiations left to fail */
  kiln_cmd_list_t last_launched;
} g_dev;

static kiln_status fake_instantiate(kiln_device_t *dev, const kiln_cmd_list_t *l, void **out) {
  if (g_dev.fail_instantiates > 0) {
    g_dev.fail_instantiates--;
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "fake: cannot instantiate");
  }
  g_dev.instantiates++;
  g_dev.live++;
  fake_exec_t *x = kiln_calloc(1, sizeof(*x));
  kiln_cmd_list_copy(&x->list, l);
  *out = x;
  return NULL;
}

static kiln_status fake_update(void *xp, size_t i, const kiln_cmd_t *c) {
  if (g_dev.fail_updates > 0) {
    g_dev.fail_updates--;
    return kiln_status_make(KILN_FAILED_PRECONDITION, "fake: update rejected");
  }
  g_dev.updates++;
  fake_exec_t *x = xp;
  memcpy(x->list.cmds[i].args, c->args, (size_t)c->num_args * 8);
  x->list.cmds[i].dst = c->dst;
  x->list.cmds[i].src = c->src;
  return NULL;
}

static kiln_status fake_launch(void *xp, kiln_stream_t *s) {
  g_dev.launches++;
  fake_exec_t *x = xp;
  kiln_cmd_list_free(&g_dev.last_launched);
  kiln_cmd_list_copy(&g_dev.last_launched, &x->list);
  return NULL;
}

static void fake_destroy(void *xp) {
  fake_exec_t *x = xp;
  g_dev.destroys++;
  g_dev.live--;
  kiln_cmd_list_free(&x->list);
  kiln_free(x);
}

static kiln_status fake_issue(kiln_stream_t *s, const kiln_cmd_list_t *l) {
  g_dev.issues++;
  return NULL;
}

static const kiln_cmd_exec_ops_t fake_ops = {.name = "fake",
                                             .instantiate = fake_instantiate,
                                             .update = fake_update,
                                             .launch = fake_launch,
                                             .destroy = fake_destroy,
                                             .issue = fake_issue};

static kiln_stream_t g_stream; /* never dereferenced by the fake */

static kiln_cmd_action_t run(kiln_cmd_cache_t *c, const kiln_cmd_list_t *l) {
  kiln_cmd_action_t a;
  ASSERT_OK(kiln_cmd_cache_execute(c, &g_stream, l, &a));
  return a;
}

static void reset_fake(void) {
  kiln_cmd_list_free(&g_dev.last_launched);
  memset(&g_dev, 0, sizeof(g_dev));
}

static void test_engine_records_once_replays_and_patches_in_place(void **state) {
  (void)state;
  reset_fake();
  kiln_cmd_cache_t *c = kiln_cmd_cache_create(NULL, &fake_ops, 8, false);
  kiln_cmd_list_t a, moved;
  make_list(&a, 0x10000);
  make_list(&moved, 0x10000);
  moved.cmds[1].args[1] = 0x77000;
  assert_int_equal(run(c, &a), KILN_CMD_ACTION_RECORD);
  for (int i = 0; i < 100; i++) assert_int_equal(run(c, &a), KILN_CMD_ACTION_REPLAY);
  assert_int_equal(run(c, &moved), KILN_CMD_ACTION_PATCH);
  assert_int_equal(g_dev.instantiates, 1);
  assert_int_equal(g_dev.updates, 1); /* only the kernel whose argument moved */
  assert_int_equal(g_dev.last_launched.cmds[1].args[1], 0x77000);
  assert_int_equal(run(c, &moved), KILN_CMD_ACTION_REPLAY);
  assert_int_equal(run(c, &a), KILN_CMD_ACTION_PATCH); /* and back */
  assert_int_equal(g_dev.last_launched.cmds[1].args[1], 0x10200);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(c);
  assert_int_equal(st.records, 1);
  assert_int_equal(st.replays, 101);
  assert_int_equal(st.patched_launches, 2);
  assert_int_equal(st.nodes_patched, 2);
  assert_int_equal(g_dev.launches, 104);
  kiln_cmd_cache_destroy(c);
  assert_int_equal(g_dev.live, 0);
  kiln_cmd_list_free(&a);
  kiln_cmd_list_free(&moved);
}

static void test_engine_failed_update_reinstantiates_once_then_issues_directly(void **state) {
  (void)state;
  reset_fake();
  kiln_cmd_cache_t *c = kiln_cmd_cache_create(NULL, &fake_ops, 8, false);
  kiln_cmd_list_t a, b, d;
  make_list(&a, 0x10000);
  make_list(&b, 0x20000);
  make_list(&d, 0x30000);
  assert_int_equal(run(c, &a), KILN_CMD_ACTION_RECORD);
  g_dev.fail_updates = 1;
  assert_int_equal(run(c, &b), KILN_CMD_ACTION_REINSTANTIATE);
  assert_int_equal(g_dev.instantiates, 2);
  assert_int_equal(g_dev.last_launched.cmds[0].args[0], 0x20000); /* the new addresses */
  assert_int_equal(run(c, &b), KILN_CMD_ACTION_REPLAY);
  /* A second failure retires the entry: no third instantiation, no retries after. */
  g_dev.fail_updates = 1;
  assert_int_equal(run(c, &d), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  assert_int_equal(run(c, &a), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  assert_int_equal(run(c, &d), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  assert_int_equal(g_dev.instantiates, 2);
  assert_int_equal(g_dev.issues, 3);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(c);
  assert_int_equal(st.update_failures, 2);
  assert_int_equal(st.reinstantiations, 1);
  kiln_cmd_cache_destroy(c);
  assert_int_equal(g_dev.live, 0);
  kiln_cmd_list_free(&a);
  kiln_cmd_list_free(&b);
  kiln_cmd_list_free(&d);
}

static void test_engine_failed_instantiation_is_not_retried(void **state) {
  (void)state;
  reset_fake();
  kiln_cmd_cache_t *c = kiln_cmd_cache_create(NULL, &fake_ops, 8, false);
  kiln_cmd_list_t a;
  make_list(&a, 0x10000);
  g_dev.fail_instantiates = 1;
  assert_int_equal(run(c, &a), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  for (int i = 0; i < 5; i++) assert_int_equal(run(c, &a), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  assert_int_equal(g_dev.instantiates, 0);
  assert_int_equal(g_dev.issues, 6);
  assert_int_equal(kiln_cmd_cache_stats(c).instantiate_failures, 1);
  kiln_cmd_cache_destroy(c);
  kiln_cmd_list_free(&a);
}

static void test_cache_bound_evicts_least_recently_used(void **state) {
  (void)state;
  reset_fake();
  kiln_cmd_cache_t *c = kiln_cmd_cache_create(NULL, &fake_ops, 2, false);
  kiln_launch_dims_t d1 = {{1, 1, 1}, {32, 1, 1}, 0}, d2 = d1, d3 = d1;
  d2.grid[0] = 2;
  d3.grid[0] = 3;
  uint64_t arg = 0x1000;
  kiln_cmd_list_t A, B, C;
  kiln_cmd_list_init(&A);
  kiln_cmd_list_init(&B);
  kiln_cmd_list_init(&C);
  kiln_cmd_list_push_kernel(&A, &g_k1, &d1, &arg, 1);
  kiln_cmd_list_push_kernel(&B, &g_k1, &d2, &arg, 1);
  kiln_cmd_list_push_kernel(&C, &g_k1, &d3, &arg, 1);
  assert_int_equal(run(c, &A), KILN_CMD_ACTION_RECORD);
  assert_int_equal(run(c, &B), KILN_CMD_ACTION_RECORD);
  assert_int_equal(run(c, &A), KILN_CMD_ACTION_REPLAY); /* A is now more recent than B */
  assert_int_equal(run(c, &C), KILN_CMD_ACTION_RECORD); /* evicts B */
  assert_int_equal(kiln_cmd_cache_size(c), 2);
  assert_int_equal(g_dev.live, 2);
  assert_int_equal(run(c, &A), KILN_CMD_ACTION_REPLAY);
  assert_int_equal(run(c, &B), KILN_CMD_ACTION_RECORD); /* was evicted; evicts C */
  assert_int_equal(run(c, &A), KILN_CMD_ACTION_REPLAY);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(c);
  assert_int_equal(st.evictions, 2);
  assert_int_equal(st.records, 4);
  assert_int_equal(g_dev.live, 2);
  /* Same structure with other addresses shares the entry (keyed by content). */
  uint64_t other = 0x9000;
  kiln_cmd_list_t A2;
  kiln_cmd_list_init(&A2);
  kiln_cmd_list_push_kernel(&A2, &g_k1, &d1, &other, 1);
  assert_int_equal(run(c, &A2), KILN_CMD_ACTION_PATCH);
  assert_int_equal(kiln_cmd_cache_size(c), 2);
  kiln_cmd_cache_destroy(c);
  assert_int_equal(g_dev.live, 0);
  kiln_cmd_list_free(&A);
  kiln_cmd_list_free(&B);
  kiln_cmd_list_free(&C);
  kiln_cmd_list_free(&A2);
}

static void test_disabled_cache_never_records(void **state) {
  (void)state;
  reset_fake();
  kiln_cmd_cache_t *c = kiln_cmd_cache_create(NULL, &fake_ops, 4, true);
  kiln_cmd_list_t a;
  make_list(&a, 0x10000);
  for (int i = 0; i < 3; i++) assert_int_equal(run(c, &a), KILN_CMD_ACTION_ISSUE_DIRECTLY);
  assert_int_equal(g_dev.instantiates, 0);
  assert_int_equal(g_dev.issues, 3);
  kiln_cmd_cache_destroy(c);
  kiln_cmd_list_free(&a);
}

static void test_cuda_graphs_record_no_gemm_and_list_args_survive_growth(void **state) {
  (void)state;
  /* CUDA graphs record kernels, copies and memsets; gemm goes command by command. */
  assert_non_null(kiln_cuda_graph_ops.supports);
  assert_true(kiln_cuda_graph_ops.supports(NULL, KILN_CMD_KERNEL));
  assert_true(kiln_cuda_graph_ops.supports(NULL, KILN_CMD_MEMSET));
  assert_false(kiln_cuda_graph_ops.supports(NULL, KILN_CMD_GEMM));
  /* Argument storage moves as the list grows; earlier commands still see their values. */
  kiln_cmd_list_t l;
  kiln_cmd_list_init(&l);
  kiln_launch_dims_t d = {{1, 1, 1}, {1, 1, 1}, 0};
  for (uint64_t i = 0; i < 300; i++) {
    uint64_t args[3] = {i, i + 1, i + 2};
    kiln_cmd_list_push_kernel(&l, &g_k1, &d, args, 3);
  }
  for (uint64_t i = 0; i < 300; i++) assert_int_equal(l.cmds[i].args[2], i + 2);
  kiln_cmd_list_t copy;
  kiln_cmd_list_copy(&copy, &l);
  assert_true(kiln_cmd_list_same_structure(&l, &copy));
  assert_ptr_not_equal(copy.cmds[5].args, l.cmds[5].args);
  assert_int_equal(copy.cmds[299].args[0], 299);
  kiln_cmd_list_free(&copy);
  kiln_cmd_list_free(&l);
}

/* ---- custom calls captured into child graphs, through a fake driver ----------------------- */

/* The driver calls a custom-call command makes, as the fake counts them. */
static struct {
  int streams_created, streams_destroyed, captures_begun, captures_ended;
  int graphs_created, graphs_destroyed, child_nodes, child_updates, instantiates, launches;
  int execs_destroyed;
  bool capturing;              /* between begin and end capture */
  CUresult end_capture_result; /* what cuStreamEndCapture returns */
  int handler_calls, handler_calls_capturing;
  kiln_devptr_t last_operand;
  CUstream last_stream;
  bool handler_fails;
} g_cc;

#define FAKE_CAPTURE_STREAM ((CUstream)(uintptr_t)0x5000)
#define FAKE_LAUNCH_STREAM ((CUstream)(uintptr_t)0x6000)

static CUresult cc_ctx_set_current(CUcontext c) {
  (void)c;
  return CUDA_SUCCESS;
}
static CUresult cc_stream_create(CUstream *s, unsigned int flags) {
  assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
  g_cc.streams_created++;
  *s = FAKE_CAPTURE_STREAM;
  return CUDA_SUCCESS;
}
static CUresult cc_stream_destroy(CUstream s) {
  assert_ptr_equal(s, FAKE_CAPTURE_STREAM);
  g_cc.streams_destroyed++;
  return CUDA_SUCCESS;
}
static CUresult cc_begin_capture(CUstream s, int mode) {
  assert_ptr_equal(s, FAKE_CAPTURE_STREAM);
  assert_int_equal(mode, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  g_cc.captures_begun++;
  g_cc.capturing = true;
  return CUDA_SUCCESS;
}
static CUresult cc_end_capture(CUstream s, CUgraph *g) {
  assert_ptr_equal(s, FAKE_CAPTURE_STREAM);
  g_cc.captures_ended++;
  g_cc.capturing = false;
  g_cc.graphs_created++; /* the driver hands back a graph also when it reports an error */
  *g = (CUgraph)(uintptr_t)(0x7000 + g_cc.graphs_created);
  return g_cc.end_capture_result;
}
static CUresult cc_graph_create(CUgraph *g, unsigned int flags) {
  (void)flags;
  g_cc.graphs_created++;
  *g = (CUgraph)(uintptr_t)0x8000;
  return CUDA_SUCCESS;
}
static CUresult cc_graph_destroy(CUgraph g) {
  (void)g;
  g_cc.graphs_destroyed++;
  return CUDA_SUCCESS;
}
static CUresult cc_add_child(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                             size_t num_deps, CUgraph child) {
  (void)graph;
  (void)deps;
  assert_int_equal(num_deps, 0); /* the only node of its graph */
  assert_non_null(child);
  g_cc.child_nodes++;
  *node = (CUgraphNode)(uintptr_t)0x9000;
  return CUDA_SUCCESS;
}
static CUresult cc_child_set_params(CUgraphExec exec, CUgraphNode node, CUgraph child) {
  (void)exec;
  assert_ptr_equal(node, (CUgraphNode)(uintptr_t)0x9000);
  assert_non_null(child);
  g_cc.child_updates++;
  return CUDA_SUCCESS;
}
static CUresult cc_instantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  (void)graph;
  (void)flags;
  g_cc.instantiates++;
  *exec = (CUgraphExec)(uintptr_t)0xA000;
  return CUDA_SUCCESS;
}
static CUresult cc_exec_destroy(CUgraphExec exec) {
  (void)exec;
  g_cc.execs_destroyed++;
  return CUDA_SUCCESS;
}
static CUresult cc_launch(CUgraphExec exec, CUstream s) {
  (void)exec;
  assert_ptr_equal(s, FAKE_LAUNCH_STREAM);
  g_cc.launches++;
  return CUDA_SUCCESS;
}

/* The handler's side: where it was called (capturing or not) and with which stream. */
static kiln_status cc_handler(void *ctx, kiln_stream_t *stream, const struct kiln_run_info *run,
                              const kiln_devptr_t *ops, int no, const kiln_devptr_t *res, int nr) {
  (void)ctx;
  (void)run;
  (void)res;
  assert_int_equal(no, 1);
  assert_int_equal(nr, 1);
  g_cc.handler_calls++;
  g_cc.handler_calls_capturing += g_cc.capturing;
  g_cc.last_operand = ops[0];
  g_cc.last_stream = ((kiln_cuda_stream_t *)stream)->stream;
  if (g_cc.handler_fails) return kiln_status_make(KILN_INTERNAL, "handler: cannot enqueue");
  return NULL;
}

static void fake_capture_device(kiln_cuda_driver_t *drv, kiln_cuda_device_t *d) {
  memset(&g_cc, 0, sizeof(g_cc));
  memset(drv, 0, sizeof(*drv));
  drv->cuCtxSetCurrent = cc_ctx_set_current;
  drv->cuStreamCreate = cc_stream_create;
  drv->cuStreamDestroy = cc_stream_destroy;
  drv->cuStreamBeginCapture = cc_begin_capture;
  drv->cuStreamEndCapture = cc_end_capture;
  drv->cuGraphCreate = cc_graph_create;
  drv->cuGraphDestroy = cc_graph_destroy;
  drv->cuGraphAddChildGraphNode = cc_add_child;
  drv->cuGraphExecChildGraphNodeSetParams = cc_child_set_params;
  drv->cuGraphInstantiateWithFlags = cc_instantiate;
  drv->cuGraphExecDestroy = cc_exec_destroy;
  drv->cuGraphLaunch = cc_launch;
  memset(d, 0, sizeof(*d));
  d->base.kind = KILN_DEVICE_CUDA;
  d->drv = drv;
}

static void test_custom_call_commands_are_captured_into_child_graphs_and_recaptured_on_patch(
    void **state) {
  (void)state;
  kiln_cuda_driver_t drv;
  kiln_cuda_device_t dev;
  fake_capture_device(&drv, &dev);
  assert_true(kiln_cuda_graph_ops.supports(NULL, KILN_CMD_CUSTOM_CALL));
  kiln_cmd_custom_call_t cc = {cc_handler, NULL, kiln_cmd_custom_call_next_uid(), "cc", "t", 1};
  kiln_devptr_t addrs[2] = {0x1000, 0x2000}, moved[2] = {0x3000, 0x2000};
  kiln_cmd_list_t a, b;
  kiln_cmd_list_init(&a);
  kiln_cmd_list_init(&b);
  kiln_cmd_list_push_custom_call(&a, &cc, NULL, addrs, 2);
  kiln_cmd_list_push_custom_call(&b, &cc, NULL, moved, 2);
  assert_true(kiln_cmd_list_same_structure(&a, &b)); /* the call site, not its addresses */
  assert_true(kiln_cmd_args_differ(&a.cmds[0], &b.cmds[0]));
  kiln_cmd_cache_t *c = kiln_cmd_cache_create(&dev.base, &kiln_cuda_graph_ops, 4, false);
  kiln_cuda_stream_t s = {{&dev.base}, FAKE_LAUNCH_STREAM};
  kiln_cmd_action_t act;
  /* Recorded: the handler runs once, on a capturing stream of its own, into a child node. */
  ASSERT_OK(kiln_cmd_cache_execute(c, &s.base, &a, &act));
  assert_int_equal(act, KILN_CMD_ACTION_RECORD);
  assert_int_equal(g_cc.handler_calls, 1);
  assert_int_equal(g_cc.handler_calls_capturing, 1);
  assert_ptr_equal(g_cc.last_stream, FAKE_CAPTURE_STREAM);
  assert_int_equal(g_cc.last_operand, 0x1000);
  assert_int_equal(g_cc.child_nodes, 1);
  assert_int_equal(g_cc.streams_destroyed, g_cc.streams_created);
  /* Replayed: the graph launches, the handler is not called again. */
  ASSERT_OK(kiln_cmd_cache_execute(c, &s.base, &a, &act));
  assert_int_equal(act, KILN_CMD_ACTION_REPLAY);
  assert_int_equal(g_cc.handler_calls, 1);
  assert_int_equal(g_cc.launches, 2);
  /* Moved: captured again with the new address and swapped into the node in place. */
  ASSERT_OK(kiln_cmd_cache_execute(c, &s.base, &b, &act));
  assert_int_equal(act, KILN_CMD_ACTION_PATCH);
  assert_int_equal(g_cc.handler_calls, 2);
  assert_int_equal(g_cc.last_operand, 0x3000);
  assert_int_equal(g_cc.child_updates, 1);
  assert_int_equal(g_cc.instantiates, 1);
  kiln_cmd_cache_destroy(c);
  /* Every captured graph, the parent graph and the exec are gone; no capture left open. */
  assert_int_equal(g_cc.graphs_destroyed, g_cc.graphs_created);
  assert_int_equal(g_cc.execs_destroyed, 1);
  assert_int_equal(g_cc.captures_ended, g_cc.captures_begun);
  kiln_cmd_list_free(&a);
  kiln_cmd_list_free(&b);
}

static void test_failed_custom_call_capture_falls_back_to_issuing_the_list(void **state) {
  (void)state;
  kiln_cuda_driver_t drv;
  kiln_cuda_device_t dev;
  fake_capture_device(&drv, &dev);
  kiln_cmd_custom_call_t cc = {cc_handler, NULL, kiln_cmd_custom_call_next_uid(), "cc", "t", 1};
  kiln_devptr_t addrs[2] = {0x1000, 0x2000};
  kiln_cmd_list_t a;
  kiln_cmd_list_init(&a);
  kiln_cmd_list_push_custom_call(&a, &cc, NULL, addrs, 2);
  /* The capture is invalidated (the handler did something capture cannot hold). */
  g_cc.end_capture_result = 901; /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
  CUgraph g = NULL;
  kiln_status st = kiln_cuda_graph_capture_custom_call(&dev, &a.cmds[0], &g);
  assert_non_null(st);
  assert_null(g);
  assert_non_null(strstr(kiln_status_message(st), "cuStreamEndCapture (custom call cc"));
  kiln_status_free(st);
  assert_int_equal(g_cc.graphs_destroyed, g_cc.graphs_created); /* the invalid graph too */
  assert_int_equal(g_cc.streams_destroyed, 1);
  /* Through the engine: instantiation fails, the list is issued one by one (the handler
   * called on the execution's stream), and the structure is not captured again. */
  kiln_cmd_cache_t *c = kiln_cmd_cache_create(&dev.base, &kiln_cuda_graph_ops, 4, false);
  kiln_cuda_stream_t s = {{&dev.base}, FAKE_LAUNCH_STREAM};
  kiln_cmd_action_t act;
  int calls = g_cc.handler_calls;
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(kiln_cmd_cache_execute(c, &s.base, &a, &act));
    assert_int_equal(act, KILN_CMD_ACTION_ISSUE_DIRECTLY);
    assert_ptr_equal(g_cc.last_stream, FAKE_LAUNCH_STREAM);
  }
  assert_int_equal(g_cc.handler_calls - calls, 4); /* one capture attempt + 3 issues */
  assert_int_equal(g_cc.captures_begun, 2);
  assert_int_equal(kiln_cmd_cache_stats(c).instantiate_failures, 1);
  /* A handler error while capturing ends the capture and names the call. */
  g_cc.end_capture_result = CUDA_SUCCESS;
  g_cc.handler_fails = true;
  st = kiln_cuda_graph_capture_custom_call(&dev, &a.cmds[0], &g);
  assert_non_null(st);
  assert_non_null(strstr(kiln_status_message(st), "handler: cannot enqueue"));
  assert_non_null(strstr(kiln_status_message(st), "custom call cc (t)"));
  kiln_status_free(st);
  assert_false(g_cc.capturing);
  kiln_cmd_cache_destroy(c);
  assert_int_equal(g_cc.graphs_destroyed, g_cc.graphs_created);
  assert_int_equal(g_cc.streams_destroyed, g_cc.streams_created);
  kiln_cmd_list_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_symbol_table_is_complete_and_well_formed),
      cmocka_unit_test(test_resolve_requests_every_symbol_at_the_pinned_version),
      cmocka_unit_test(test_resolve_names_the_symbol_an_old_driver_lacks),
      cmocka_unit_test(test_cuda_errors_map_to_status_codes_with_name_and_text),
      cmocka_unit_test(test_missing_driver_is_unavailable_naming_every_path),
      cmocka_unit_test(test_library_without_get_proc_address_is_unavailable),
      cmocka_unit_test(test_default_search_without_driver_reports_sonames_and_best_falls_back),
      cmocka_unit_test(test_graph_node_params_describe_the_commands),
      cmocka_unit_test(test_graph_copies_over_the_pitch_limit_become_rows),
      cmocka_unit_test(test_launch_check_counts_threads_and_static_shared_memory),
      cmocka_unit_test(test_driver_start_checks_version_then_inits_then_resolves),
      cmocka_unit_test(test_plan_unchanged_addresses_replay),
      cmocka_unit_test(test_plan_changed_kernel_args_patch_only_those_nodes),
      cmocka_unit_test(test_update_failure_reinstantiates_once_then_gives_up),
      cmocka_unit_test(test_engine_records_once_replays_and_patches_in_place),
      cmocka_unit_test(test_engine_failed_update_reinstantiates_once_then_issues_directly),
      cmocka_unit_test(test_engine_failed_instantiation_is_not_retried),
      cmocka_unit_test(test_cache_bound_evicts_least_recently_used),
      cmocka_unit_test(test_disabled_cache_never_records),
      cmocka_unit_test(test_cuda_graphs_record_no_gemm_and_list_args_survive_growth),
      cmocka_unit_test(
          test_custom_call_commands_are_captured_into_child_graphs_and_recaptured_on_patch),
      cmocka_unit_test(test_failed_custom_call_capture_falls_back_to_issuing_the_list),
  };
  int rc = kiln_run_tests(tests, NULL, NULL);
  kiln_cmd_list_free(&g_dev.last_launched);
  return rc;
}
