/* The plugin beside another LLVM: a process that has already loaded a different LLVM into its
 * global symbol scope (libLLVM-15 or -14, RTLD_NOW | RTLD_GLOBAL, as a framework with its own
 * JIT would) loads libkiln_pjrt.so with RTLD_LOCAL, creates a client, compiles and runs an
 * HLO module, and gets the right numbers: kiln's LLVM calls bind to kiln's LLVM, not to the
 * one loaded first. Skips (77) when no other LLVM is installed (Debian: libllvm15). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pjrt_test_util.h"

static const char *const kOtherLlvms[] = {"libLLVM-15.so.1", "libLLVM-14.so.1", "libLLVM-16.so.1",
                                          "libLLVM-17.so.1", "libLLVM-13.so.1"};
static void *g_other_llvm;
static const char *g_other_llvm_name;

/* y = x * x + x over f32[64], then reduced to its sum: a loop fusion and a reduction, so the
 * host JIT generates real code through kiln's LLVM. */
static const char kModule[] =
    "HloModule other_llvm\n"
    "\n"
    "add {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  x = f32[64] parameter(0)\n"
    "  sq = f32[64] multiply(x, x)\n"
    "  y = f32[64] add(sq, x)\n"
    "  zero = f32[] constant(0)\n"
    "  total = f32[] reduce(y, zero), dimensions={0}, to_apply=add\n"
    "  ROOT t = (f32[64], f32[]) tuple(y, total)\n"
    "}\n";

static void await_and_destroy(const PJRT_Api *api, PJRT_Event *ev) {
  if (!ev) return;
  PJRT_Event_Await_Args wa = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = ev};
  PJRT_CHECK(api, api->PJRT_Event_Await(&wa));
  PJRT_Event_Destroy_Args da = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = ev};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&da));
}

static void read_back(const PJRT_Api *api, PJRT_Buffer *b, void *dst, size_t size) {
  PJRT_Buffer_ToHostBuffer_Args a = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                     .src = b,
                                     .dst = dst,
                                     .dst_size = size};
  PJRT_CHECK(api, api->PJRT_Buffer_ToHostBuffer(&a));
  await_and_destroy(api, a.event);
}

static void destroy_buffer(const PJRT_Api *api, PJRT_Buffer *b) {
  PJRT_Buffer_Destroy_Args a = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_Destroy(&a));
}

static void test_other_llvm_is_in_the_global_scope(void **state) {
  (void)state;
  /* The other LLVM's C API is what an unversioned global lookup finds. */
  void *sym = dlsym(RTLD_DEFAULT, "LLVMContextCreate");
  assert_non_null(sym);
  Dl_info info;
  assert_true(dladdr(sym, &info) != 0);
  printf("LLVMContextCreate in the global scope comes from %s\n", info.dli_fname);
  assert_non_null(strstr(info.dli_fname, g_other_llvm_name));
}

static void test_plugin_compiles_and_runs_beside_it(void **state) {
  (void)state;
  const PJRT_Api *api = pjrt_test_load();
  assert_non_null(api);
  assert_null(dlsym(RTLD_DEFAULT, "GetPjrtApi"));
  PJRT_Plugin_Initialize_Args init = {.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE};
  PJRT_CHECK(api, api->PJRT_Plugin_Initialize(&init));
  PJRT_NamedValue platform = pjrt_test_opt_string("platform", "cpu");
  PJRT_Client *client = pjrt_test_client(api, &platform, 1);
  assert_non_null(client);

  PJRT_Client_AddressableDevices_Args ad = {
      .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = client};
  PJRT_CHECK(api, api->PJRT_Client_AddressableDevices(&ad));
  assert_true(ad.num_addressable_devices > 0);
  PJRT_Device *device = ad.addressable_devices[0];

  PJRT_Program program = {.struct_size = PJRT_Program_STRUCT_SIZE,
                          .code = (char *)kModule,
                          .code_size = sizeof(kModule) - 1,
                          .format = "hlo",
                          .format_size = 3};
  PJRT_Client_Compile_Args ca = {
      .struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE, .client = client, .program = &program};
  PJRT_CHECK(api, api->PJRT_Client_Compile(&ca));
  assert_non_null(ca.executable);

  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)(i - 32) / 8.0f;
  int64_t dims[1] = {64};
  PJRT_Client_BufferFromHostBuffer_Args ba = {
      .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
      .client = client,
      .data = x,
      .type = PJRT_Buffer_Type_F32,
      .dims = dims,
      .num_dims = 1,
      .host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
      .device = device};
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&ba));
  await_and_destroy(api, ba.done_with_host_buffer);

  PJRT_ExecuteOptions opts = {.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE};
  PJRT_Buffer *args[1] = {ba.buffer};
  PJRT_Buffer *const *arg_lists[1] = {args};
  PJRT_Buffer *outs[2] = {NULL, NULL};
  PJRT_Buffer **out_lists[1] = {outs};
  PJRT_Event *done[1] = {NULL};
  PJRT_LoadedExecutable_Execute_Args ea = {
      .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
      .executable = ca.executable,
      .options = &opts,
      .argument_lists = arg_lists,
      .num_devices = 1,
      .num_args = 1,
      .output_lists = out_lists,
      .device_complete_events = done};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Execute(&ea));
  await_and_destroy(api, done[0]);
  assert_non_null(outs[0]);
  assert_non_null(outs[1]);

  float y[64], total = 0;
  read_back(api, outs[0], y, sizeof(y));
  read_back(api, outs[1], &total, sizeof(total));
  double want_total = 0;
  for (int i = 0; i < 64; i++) {
    float want = x[i] * x[i] + x[i];
    want_total += want;
    if (y[i] != want) fail_msg("y[%d] = %g, expected %g", i, (double)y[i], (double)want);
  }
  if (total < want_total - 1e-3 * (1 + want_total) || total > want_total + 1e-3 * (1 + want_total))
    fail_msg("sum = %g, expected %g", (double)total, want_total);
  printf("beside %s: y and sum(y) = %g correct\n", g_other_llvm_name, (double)total);

  destroy_buffer(api, outs[0]);
  destroy_buffer(api, outs[1]);
  destroy_buffer(api, ba.buffer);
  PJRT_LoadedExecutable_Destroy_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = ca.executable};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Destroy(&ld));
  pjrt_test_client_destroy(api, client);

  /* The other LLVM still works after kiln ran: a context of its own, created and disposed. */
  void *(*ctx_create)(void) = (void *(*)(void))dlsym(g_other_llvm, "LLVMContextCreate");
  void (*ctx_dispose)(void *) = (void (*)(void *))dlsym(g_other_llvm, "LLVMContextDispose");
  assert_non_null(ctx_create);
  assert_non_null(ctx_dispose);
  void *ctx = ctx_create();
  assert_non_null(ctx);
  ctx_dispose(ctx);
}

int main(void) {
  for (size_t i = 0; i < sizeof(kOtherLlvms) / sizeof(kOtherLlvms[0]) && !g_other_llvm; i++) {
    g_other_llvm = dlopen(kOtherLlvms[i], RTLD_NOW | RTLD_GLOBAL);
    if (g_other_llvm) g_other_llvm_name = kOtherLlvms[i];
  }
  if (!g_other_llvm) {
    printf(
        "skipped: no other LLVM to load beside the plugin (tried libLLVM-15.so.1, "
        "libLLVM-14.so.1, ...; Debian: apt-get install libllvm15)\n");
    return 77;
  }
  printf("loaded %s RTLD_GLOBAL before the plugin\n", g_other_llvm_name);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_other_llvm_is_in_the_global_scope),
      cmocka_unit_test(test_plugin_compiles_and_runs_beside_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
