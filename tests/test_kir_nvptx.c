/* Kernel IR -> NVPTX: the GELU, row-reduction and transpose kernels lower to LLVM with the
 * PTX kernel calling convention, compile to PTX, and ptxas -arch=sm_90 accepts them. Tests
 * that need ptxas or libdevice print why and skip when they are absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/backend/llvm_compat.h"
#include "compiler/codegen/kir_pipeline.h"
#include "tests/kir_test_kernels.h"
#include "tests/skip_util.h"

static bool have_ptxas(void) {
  char *p = NULL;
  kiln_status s = kiln_nvptx_find_ptxas(NULL, &p);
  kiln_free(p);
  if (s) {
    printf("[  SKIP    ] no ptxas: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return false;
  }
  return true;
}

/* Runs the pipeline, compiles to PTX (no cubin) and checks it with ptxas -arch=sm_90. */
static char *ptx_of(kiln_kir_module_t *m) {
  assert_non_null(m);
  assert_null(kiln_kir_pipeline_run(m, NULL));
  kiln_nvptx_options_t o = {.arch = "sm_90", .cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_result_t r;
  kiln_status s = kiln_kir_compile_nvptx(m, &o, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  char *ptx = kiln_strdup(r.ptx);
  kiln_nvptx_result_free(&r);
  char *log = NULL;
  s = kiln_ptxas_check(ptx, "sm_90", &log);
  if (s) fprintf(stderr, "ptxas: %s\n%s\n", kiln_status_message(s), log ? log : "");
  assert_null(s);
  kiln_free(log);
  return ptx;
}

static void test_gelu_ptx_loads_and_stores_vectors_and_passes_ptxas(void **state) {
  (void)state;
  if (!have_ptxas()) KILN_SKIPPED();
  int64_t dims[3] = {6, 512, 4096};
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_BF16, dims, 4);
  char *ptx = ptx_of(m);
  assert_non_null(strstr(ptx, ".entry main("));
  assert_non_null(strstr(ptx, "ld.global.nc.v4.u16"));
  assert_non_null(strstr(ptx, "st.global.v4.u16"));
  assert_non_null(strstr(ptx, "%tid.x"));
  assert_non_null(strstr(ptx, "%ctaid.x"));
  kiln_free(ptx);
  kiln_kir_module_destroy(m);
}

static void test_gelu_f32_loads_v4_f32(void **state) {
  (void)state;
  if (!have_ptxas()) KILN_SKIPPED();
  int64_t dims[3] = {2, 64, 256};
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_F32, dims, 4);
  char *ptx = ptx_of(m);
  assert_non_null(strstr(ptx, "ld.global.nc.v4.f32"));
  assert_non_null(strstr(ptx, "st.global.v4.f32"));
  kiln_free(ptx);
  kiln_kir_module_destroy(m);
}

static void test_row_reduce_ptx_has_bar_sync_shfl_sync_and_shared(void **state) {
  (void)state;
  if (!have_ptxas()) KILN_SKIPPED();
  kiln_kir_module_t *m = kir_test_build_row_reduce(64, 1024);
  char *ptx = ptx_of(m);
  assert_non_null(strstr(ptx, ".entry row_reduce("));
  assert_non_null(strstr(ptx, ".maxntid 256, 1, 1")); /* the launch's block, for ptxas */
  assert_non_null(strstr(ptx, "bar.sync"));
  assert_non_null(strstr(ptx, "shfl.sync.down.b32"));
  assert_non_null(strstr(ptx, ".shared"));
  kiln_free(ptx);
  kiln_kir_module_destroy(m);
}

static void test_transpose_ptx_uses_a_33_wide_shared_tile(void **state) {
  (void)state;
  if (!have_ptxas()) KILN_SKIPPED();
  kiln_kir_module_t *m = kir_test_build_transpose(128, 256);
  char *ptx = ptx_of(m);
  assert_non_null(strstr(ptx, ".shared .align 16 .b8 __kiln_shmem_0[4224]")); /* 32 * 33 * 4 */
  assert_non_null(strstr(ptx, "bar.sync"));
  assert_non_null(strstr(ptx, "%tid.y"));
  kiln_free(ptx);
  kiln_kir_module_destroy(m);
}

static void test_kernel_is_ptx_kernel_with_noalias_params(void **state) {
  (void)state;
  int64_t dims[3] = {2, 3, 40};
  kiln_kir_module_t *m = kir_test_build_twice(KILN_S32, dims);
  assert_non_null(m);
  assert_null(kiln_kir_pipeline_run(m, NULL));
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  assert_null(kiln_kir_lower_nvptx(m, ctx, NULL, &mod));
  LLVMValueRef fn = LLVMGetNamedFunction(mod, "twice");
  assert_non_null(fn);
  assert_true(kiln_llvm_is_ptx_kernel(fn));
  char *ir = LLVMPrintModuleToString(mod);
  assert_non_null(strstr(ir, "ptr noalias readonly align 16"));
  assert_non_null(strstr(ir, "llvm.nvvm.read.ptx.sreg.tid.x"));
  assert_non_null(strstr(ir, "define internal i32 @twice.f(")); /* called twice: kept */
  LLVMDisposeMessage(ir);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  kiln_kir_module_destroy(m);
}

static void test_lowering_an_unlowered_loop_is_an_error(void **state) {
  (void)state;
  int64_t dims[3] = {2, 3, 40};
  kiln_kir_module_t *m = kir_test_build_twice(KILN_F32, dims);
  assert_non_null(m);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  kiln_status s = kiln_kir_lower_nvptx(m, ctx, NULL, &mod);
  assert_non_null(s);
  assert_null(mod);
  assert_non_null(strstr(kiln_status_message(s), "must be lowered first"));
  kiln_status_free(s);
  LLVMContextDispose(ctx);
  kiln_kir_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_ptx_loads_and_stores_vectors_and_passes_ptxas),
      cmocka_unit_test(test_gelu_f32_loads_v4_f32),
      cmocka_unit_test(test_row_reduce_ptx_has_bar_sync_shfl_sync_and_shared),
      cmocka_unit_test(test_transpose_ptx_uses_a_33_wide_shared_tile),
      cmocka_unit_test(test_kernel_is_ptx_kernel_with_noalias_params),
      cmocka_unit_test(test_lowering_an_unlowered_loop_is_an_error),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
