/* NVPTX backend: PTX emission, lazy libdevice linking, cubin through nvJitLink and ptxas,
 * and the error paths (broken PTX, wrong arch, missing CUDA). Tests that need a CUDA tool
 * print why and skip when it is absent. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/backend/nvjitlink.h"
#include "compiler/backend/nvptx.h"
#include "plugin/env_options.h"
#include "tests/backend_test_kernels.h"
#include "tests/skip_util.h"

static size_t count_occurrences(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Compiles vadd (calling `nv_fn`) with `opts`; returns the status, fills `out`. */
static kiln_status compile_vadd(const char *nv_fn, const kiln_nvptx_options_t *opts,
                                kiln_nvptx_result_t *out) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = kiln_test_build_vadd(ctx, "vadd", nv_fn);
  kiln_status s = kiln_nvptx_compile(m, opts, out);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  return s;
}

static bool libdevice_present(void) {
  kiln_cuda_dirs_t dirs;
  kiln_cuda_dirs_find(NULL, &dirs);
  char *p = kiln_cuda_dirs_find_file(&dirs, "nvvm/libdevice/libdevice.10.bc", NULL);
  kiln_cuda_dirs_free(&dirs);
  bool ok = p != NULL;
  kiln_free(p);
  if (!ok) printf("[  SKIP    ] libdevice.10.bc not found in any CUDA directory\n");
  return ok;
}

static void test_vadd_emits_entry_for_sm90_with_libdevice_inlined(void **state) {
  (void)state;
  if (!libdevice_present()) KILN_SKIPPED();
  kiln_nvptx_options_t opts = {.arch = "sm_90", .cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_result_t r;
  kiln_status s = compile_vadd("__nv_expf", &opts, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  assert_non_null(r.ptx);
  assert_int_equal(strlen(r.ptx), r.ptx_size);
  assert_non_null(strstr(r.ptx, ".entry vadd("));
  assert_null(strstr(r.ptx, ".func vadd"));
  assert_non_null(strstr(r.ptx, ".target sm_90"));
  assert_null(strstr(r.ptx, ".target sm_90a"));
  assert_non_null(strstr(r.ptx, ".version 8.0"));
  assert_non_null(strstr(r.ptx, ".address_size 64"));
  /* libdevice was linked and __nv_expf inlined: no call or declaration of it remains, and
   * expf's body (ex2.approx) is there. */
  assert_non_null(r.libdevice_path);
  assert_null(strstr(r.ptx, "__nv_"));
  assert_null(strstr(r.ptx, "call.uni"));
  assert_non_null(strstr(r.ptx, "ex2.approx"));
  /* Lazy linking brought in only what expf needs, not libdevice's ~350 functions. */
  assert_true(r.libdevice_functions >= 1);
  assert_true(r.libdevice_functions <= 8);
  assert_int_equal(count_occurrences(r.ptx, ".func"), 0);
  assert_true(r.ptx_size < 8192);
  assert_null(r.cubin);
  assert_int_equal(r.method, KILN_CUBIN_METHOD_NONE);
  assert_true(r.opt_ms > 0 && r.ptx_ms > 0);
  kiln_nvptx_result_free(&r);
}

static void test_vadd_without_libdevice_calls_links_nothing(void **state) {
  (void)state;
  kiln_nvptx_options_t opts = {.cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_result_t r;
  assert_null(compile_vadd(NULL, &opts, &r));
  assert_null(r.libdevice_path);
  assert_int_equal(r.libdevice_functions, 0);
  assert_non_null(strstr(r.ptx, ".entry vadd("));
  assert_non_null(strstr(r.ptx, ".target sm_90")); /* the default arch */
  assert_non_null(strstr(r.ptx, "%tid.x"));
  assert_non_null(strstr(r.ptx, "%ctaid.x"));
  assert_non_null(strstr(r.ptx, "%ntid.x"));
  kiln_nvptx_result_free(&r);
}

static void test_vadd_ptx_is_accepted_by_ptxas(void **state) {
  (void)state;
  if (!libdevice_present()) KILN_SKIPPED();
  kiln_nvptx_options_t opts = {.arch = "sm_90", .cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_result_t r;
  assert_null(compile_vadd("__nv_tanhf", &opts, &r));
  char *log = NULL;
  kiln_status s = kiln_ptxas_check(r.ptx, "sm_90", &log);
  if (kiln_status_code(s) == KILN_UNAVAILABLE) {
    printf("[  SKIP    ] %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_nvptx_result_free(&r);
    KILN_SKIPPED();
  }
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  kiln_free(log);
  kiln_nvptx_result_free(&r);
}

/* Compiles vadd to a cubin with `via`; skips when the tool is not there. */
static void check_cubin_via(kiln_cubin_via_t via, kiln_cubin_method_t expected) {
  kiln_nvptx_options_t opts = {.arch = "sm_90", .cubin_via = via};
  kiln_nvptx_result_t r;
  kiln_status s = compile_vadd(libdevice_present() ? "__nv_expf" : NULL, &opts, &r);
  if (kiln_status_code(s) == KILN_UNAVAILABLE) {
    printf("[  SKIP    ] %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_nvptx_result_free(&r);
    KILN_SKIPPED();
  }
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  assert_int_equal(r.method, expected);
  assert_non_null(r.cubin);
  assert_true(r.cubin_size > 64);
  assert_memory_equal(r.cubin,
                      "\x7f"
                      "ELF",
                      4);
  assert_true(r.cubin_ms > 0);
  kiln_nvptx_result_free(&r);
}

static void test_cubin_via_nvjitlink_is_an_elf(void **state) {
  (void)state;
  check_cubin_via(KILN_CUBIN_VIA_NVJITLINK, KILN_CUBIN_METHOD_NVJITLINK);
}

static void test_cubin_via_ptxas_is_an_elf(void **state) {
  (void)state;
  check_cubin_via(KILN_CUBIN_VIA_PTXAS, KILN_CUBIN_METHOD_PTXAS);
}

static void test_cubin_auto_prefers_nvjitlink(void **state) {
  (void)state;
  kiln_cuda_dirs_t dirs;
  kiln_cuda_dirs_find(NULL, &dirs);
  const kiln_nvjitlink_t *lib = NULL;
  kiln_status s = kiln_nvjitlink_load(&dirs, &lib);
  kiln_cuda_dirs_free(&dirs);
  if (s) {
    printf("[  SKIP    ] %s\n", kiln_status_message(s));
    kiln_status_free(s);
    KILN_SKIPPED();
  }
  assert_non_null(strstr(kiln_nvjitlink_path(lib), "libnvJitLink"));
  check_cubin_via(KILN_CUBIN_VIA_AUTO, KILN_CUBIN_METHOD_NVJITLINK);
}

static const char kBrokenPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry broken()\n{\n  this_is_not_an_instruction %r1;\n  ret;\n}\n";

static void check_broken_ptx(kiln_cubin_via_t via, const char *tool) {
  kiln_nvptx_options_t opts = {.arch = "sm_90", .cubin_via = via};
  kiln_nvptx_result_t r;
  kiln_status s = kiln_nvptx_ptx_to_cubin(kBrokenPtx, sizeof kBrokenPtx - 1, &opts, &r);
  if (kiln_status_code(s) == KILN_UNAVAILABLE) {
    printf("[  SKIP    ] %s: %s\n", tool, kiln_status_message(s));
    kiln_status_free(s);
    kiln_nvptx_result_free(&r);
    KILN_SKIPPED();
  }
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  /* The assembler's own complaint travels in the status and the result's log. */
  assert_non_null(strstr(kiln_status_message(s), "this_is_not_an_instruction"));
  assert_non_null(r.cubin_log);
  assert_non_null(strstr(r.cubin_log, tool));
  assert_null(r.cubin);
  assert_int_equal(r.method, KILN_CUBIN_METHOD_NONE);
  kiln_status_free(s);
  kiln_nvptx_result_free(&r);
}

static void test_broken_ptx_reports_nvjitlink_log(void **state) {
  (void)state;
  check_broken_ptx(KILN_CUBIN_VIA_NVJITLINK, "nvJitLink");
}

static void test_broken_ptx_reports_ptxas_log(void **state) {
  (void)state;
  check_broken_ptx(KILN_CUBIN_VIA_PTXAS, "ptxas");
}

/* PTX for sm_90a does not assemble for -arch=sm_90: the arch must match exactly. */
static void test_sm90a_ptx_is_rejected_for_sm90(void **state) {
  (void)state;
  kiln_nvptx_options_t opts = {.arch = "sm_90a", .cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_result_t r;
  assert_null(compile_vadd(NULL, &opts, &r));
  assert_non_null(strstr(r.ptx, ".target sm_90a"));
  kiln_nvptx_options_t wrong = {.arch = "sm_90", .cubin_via = KILN_CUBIN_VIA_PTXAS};
  kiln_nvptx_result_t c;
  kiln_status s = kiln_nvptx_ptx_to_cubin(r.ptx, r.ptx_size, &wrong, &c);
  if (kiln_status_code(s) == KILN_UNAVAILABLE) {
    printf("[  SKIP    ] %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_nvptx_result_free(&c);
    kiln_nvptx_result_free(&r);
    KILN_SKIPPED();
  }
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "-arch=sm_90"));
  assert_non_null(c.cubin_log);
  kiln_status_free(s);
  kiln_nvptx_result_free(&c);
  /* The same PTX assembles for its own arch. */
  kiln_nvptx_options_t right = {.arch = "sm_90a", .cubin_via = KILN_CUBIN_VIA_PTXAS};
  assert_null(kiln_nvptx_ptx_to_cubin(r.ptx, r.ptx_size, &right, &c));
  assert_memory_equal(c.cubin,
                      "\x7f"
                      "ELF",
                      4);
  kiln_nvptx_result_free(&c);
  kiln_nvptx_result_free(&r);
}

static void test_missing_cuda_dir_needing_libdevice_is_unavailable(void **state) {
  (void)state;
  kiln_nvptx_options_t opts = {.cuda.dir = "/nonexistent/kiln-cuda"};
  kiln_nvptx_result_t r;
  kiln_status s = compile_vadd("__nv_expf", &opts, &r);
  assert_int_equal(kiln_status_code(s), KILN_UNAVAILABLE);
  assert_non_null(
      strstr(kiln_status_message(s), "/nonexistent/kiln-cuda/nvvm/libdevice/libdevice.10.bc"));
  assert_null(r.ptx);
  kiln_status_free(s);
  kiln_nvptx_result_free(&r);
}

static void test_missing_cuda_dir_leaves_ptx_for_the_driver(void **state) {
  (void)state;
  kiln_nvptx_options_t opts = {.cuda.dir = "/nonexistent/kiln-cuda"};
  kiln_nvptx_result_t r;
  kiln_status s = compile_vadd(NULL, &opts, &r);
  assert_int_equal(kiln_status_code(s), KILN_UNAVAILABLE);
  const char *msg = kiln_status_message(s);
  assert_non_null(strstr(msg, "/nonexistent/kiln-cuda/lib64/libnvJitLink.so"));
  assert_non_null(strstr(msg, "/nonexistent/kiln-cuda/bin/ptxas"));
  assert_non_null(strstr(msg, "driver"));
  /* The PTX is still there for the driver to JIT. */
  assert_non_null(r.ptx);
  assert_non_null(strstr(r.ptx, ".entry vadd("));
  assert_null(r.cubin);
  assert_int_equal(r.method, KILN_CUBIN_METHOD_NONE);
  kiln_status_free(s);
  kiln_nvptx_result_free(&r);
}

/* $KILN_CUDA_DIR, read at the edges into kiln_cuda_search_t.dir, replaces the search: with a
 * bogus directory ptxas is not found even though it is on PATH, and the status names the path
 * tried. The backend itself does not see the variable. */
static void test_kiln_cuda_dir_env_overrides_the_search(void **state) {
  (void)state;
  const char *old = getenv("KILN_CUDA_DIR");
  char *saved = old ? kiln_strdup(old) : NULL;
  assert_int_equal(setenv("KILN_CUDA_DIR", "/nonexistent/env-cuda", 1), 0);
  kiln_cuda_search_t search = {0};
  kiln_pjrt_cuda_search_from_env(&search);
  assert_string_equal(search.dir, "/nonexistent/env-cuda");
  char *ptxas = NULL;
  kiln_status s = kiln_nvptx_find_ptxas(&search, &ptxas);
  assert_int_equal(kiln_status_code(s), KILN_UNAVAILABLE);
  assert_non_null(strstr(kiln_status_message(s), "/nonexistent/env-cuda/bin/ptxas"));
  assert_null(ptxas);
  kiln_status_free(s);
  kiln_cuda_dirs_t dirs; /* without the options, the standard search */
  kiln_cuda_dirs_find(NULL, &dirs);
  assert_false(dirs.explicit_dir);
  for (size_t i = 0; i < dirs.count; i++) assert_null(strstr(dirs.dirs[i], "env-cuda"));
  kiln_cuda_dirs_free(&dirs);
  if (saved) {
    setenv("KILN_CUDA_DIR", saved, 1);
    kiln_free(saved);
  } else {
    unsetenv("KILN_CUDA_DIR");
  }
}

static void test_unknown_libdevice_function_is_not_found(void **state) {
  (void)state;
  if (!libdevice_present()) KILN_SKIPPED();
  kiln_nvptx_options_t opts = {.cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_result_t r;
  kiln_status s = compile_vadd("__nv_kiln_no_such_fn", &opts, &r);
  assert_int_equal(kiln_status_code(s), KILN_NOT_FOUND);
  assert_non_null(strstr(kiln_status_message(s), "__nv_kiln_no_such_fn"));
  kiln_status_free(s);
  kiln_nvptx_result_free(&r);
}

static void test_module_without_kernel_cc_is_rejected(void **state) {
  (void)state;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = kiln_test_build_vadd(ctx, "vadd", NULL);
  LLVMSetFunctionCallConv(LLVMGetNamedFunction(m, "vadd"), LLVMCCallConv);
  kiln_nvptx_result_t r;
  kiln_status s = kiln_nvptx_compile(m, NULL, &r);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "LLVMPTXKernelCallConv"));
  kiln_status_free(s);
  kiln_nvptx_result_free(&r);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
}

static void test_invalid_module_is_rejected(void **state) {
  (void)state;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("bad", ctx);
  LLVMValueRef fn =
      LLVMAddFunction(m, "k", LLVMFunctionType(LLVMVoidTypeInContext(ctx), NULL, 0, 0));
  kiln_llvm_mark_ptx_kernel(fn);
  LLVMAppendBasicBlockInContext(ctx, fn, "no_terminator");
  kiln_nvptx_result_t r;
  kiln_status s = kiln_nvptx_compile(m, NULL, &r);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "invalid LLVM module"));
  kiln_status_free(s);
  kiln_nvptx_result_free(&r);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
}

static void test_unknown_arch_is_rejected(void **state) {
  (void)state;
  const char *features = NULL;
  assert_null(kiln_nvptx_arch_features("sm_89", &features));
  assert_string_equal(features, "+ptx78");
  assert_null(kiln_nvptx_arch_features("sm_90", &features));
  assert_string_equal(features, "+ptx80");
  kiln_status s = kiln_nvptx_arch_features("sm_999", &features);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "sm_90a"));
  kiln_status_free(s);
  kiln_nvptx_options_t opts = {.arch = "compute_90"};
  kiln_nvptx_result_t r;
  s = compile_vadd(NULL, &opts, &r);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  kiln_nvptx_result_free(&r);
#if KILN_LLVM_VERSION_MAJOR < 20
  s = kiln_nvptx_arch_features("sm_100", &features);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  kiln_status_free(s);
#endif
}

/* A kernel declared for 1024 threads per block carries `.maxntid 1024, 1, 1` in its PTX (so
 * ptxas caps its registers at 64 per thread); one without the declaration carries none. */
static void test_max_threads_become_maxntid_in_the_ptx(void **state) {
  (void)state;
  kiln_nvptx_options_t opts = {.arch = "sm_90", .cubin_via = KILN_CUBIN_VIA_SKIP};
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = kiln_test_build_vadd(ctx, "vadd", NULL);
  kiln_nvptx_set_max_threads(LLVMGetNamedFunction(m, "vadd"), 1024, 1, 1);
  kiln_nvptx_result_t r;
  kiln_status s = kiln_nvptx_compile(m, &opts, &r);
  LLVMDisposeModule(m);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  assert_non_null(strstr(r.ptx, ".maxntid 1024, 1, 1"));
  kiln_nvptx_result_free(&r);
  m = kiln_test_build_vadd(ctx, "vadd", NULL);
  kiln_nvptx_set_max_threads(LLVMGetNamedFunction(m, "vadd"), 32, 8, 2);
  assert_null(kiln_nvptx_compile(m, &opts, &r));
  LLVMDisposeModule(m);
  assert_non_null(strstr(r.ptx, ".maxntid 32, 8, 2"));
  kiln_nvptx_result_free(&r);
  m = kiln_test_build_vadd(ctx, "vadd", NULL);
  assert_null(kiln_nvptx_compile(m, &opts, &r));
  LLVMDisposeModule(m);
  assert_null(strstr(r.ptx, ".maxntid"));
  kiln_nvptx_result_free(&r);
  LLVMContextDispose(ctx);
}

/* A device's compute capability picks the processor: a known one as is (a cubin for it), an
 * unknown newer one the newest known older processor with PTX for the driver. */
static void test_arch_for_a_device_falls_back_to_ptx_for_unknown_processors(void **state) {
  (void)state;
  char arch[16];
  bool ptx_only = true;
  assert_null(kiln_nvptx_arch_resolve("sm_90", arch, sizeof(arch), &ptx_only));
  assert_string_equal(arch, "sm_90");
  assert_false(ptx_only);
  assert_null(kiln_nvptx_arch_resolve("sm_89", arch, sizeof(arch), &ptx_only));
  assert_string_equal(arch, "sm_89");
  assert_false(ptx_only);
  assert_null(kiln_nvptx_arch_resolve(NULL, arch, sizeof(arch), &ptx_only));
  assert_string_equal(arch, "sm_90");
  /* sm_103 (B300) is in no LLVM table here: PTX for the newest known processor. */
  assert_null(kiln_nvptx_arch_resolve("sm_103", arch, sizeof(arch), &ptx_only));
  assert_true(ptx_only);
#if KILN_LLVM_VERSION_MAJOR < 20
  assert_string_equal(arch, "sm_90");
  assert_null(kiln_nvptx_arch_resolve("sm_100", arch, sizeof(arch), &ptx_only));
  assert_string_equal(arch, "sm_90");
  assert_true(ptx_only);
#else
  assert_string_equal(arch, "sm_101");
#endif
  /* sm_91 (hypothetical): sm_90, never sm_90a (whose PTX is not forward compatible). */
  assert_null(kiln_nvptx_arch_resolve("sm_91", arch, sizeof(arch), &ptx_only));
  assert_string_equal(arch, "sm_90");
  assert_true(ptx_only);
  kiln_status s = kiln_nvptx_arch_resolve("sm_30", arch, sizeof(arch), &ptx_only);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  s = kiln_nvptx_arch_resolve("compute_90", arch, sizeof(arch), &ptx_only);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
}

static void test_keep_module_leaves_the_input_untouched(void **state) {
  (void)state;
  if (!libdevice_present()) KILN_SKIPPED();
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = kiln_test_build_vadd(ctx, "vadd", "__nv_expf");
  char *before = LLVMPrintModuleToString(m);
  kiln_nvptx_options_t opts = {.keep_module = true, .cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_result_t r;
  assert_null(kiln_nvptx_compile(m, &opts, &r));
  char *after = LLVMPrintModuleToString(m);
  assert_string_equal(before, after);
  /* A second compile of the same module gives the same PTX. */
  kiln_nvptx_result_t r2;
  assert_null(kiln_nvptx_compile(m, &opts, &r2));
  assert_string_equal(r.ptx, r2.ptx);
  LLVMDisposeMessage(before);
  LLVMDisposeMessage(after);
  kiln_nvptx_result_free(&r);
  kiln_nvptx_result_free(&r2);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
}

static void test_lazy_and_eager_libdevice_give_the_same_ptx(void **state) {
  (void)state;
  if (!libdevice_present()) KILN_SKIPPED();
  kiln_nvptx_options_t lazy = {.cubin_via = KILN_CUBIN_VIA_SKIP};
  kiln_nvptx_options_t eager = {.cubin_via = KILN_CUBIN_VIA_SKIP, .libdevice_eager = true};
  kiln_nvptx_result_t a, b;
  assert_null(compile_vadd("__nv_tanhf", &lazy, &a));
  assert_null(compile_vadd("__nv_tanhf", &eager, &b));
  assert_string_equal(a.ptx, b.ptx);
  assert_int_equal(a.libdevice_functions, b.libdevice_functions);
  printf("libdevice link: lazy %.2f ms, eager %.2f ms (%zu functions linked)\n", a.libdevice_ms,
         b.libdevice_ms, a.libdevice_functions);
  kiln_nvptx_result_free(&a);
  kiln_nvptx_result_free(&b);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_dumps_sort_in_pipeline_order(void **state) {
  (void)state;
  if (!libdevice_present()) KILN_SKIPPED();
  char dir[] = "/tmp/kiln-dump-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  kiln_nvptx_options_t opts = {
      .cubin_via = KILN_CUBIN_VIA_SKIP, .dump_dir = dir, .dump_name = "fusion.1"};
  kiln_nvptx_result_t r;
  assert_null(compile_vadd("__nv_expf", &opts, &r));
  kiln_nvptx_result_free(&r);
  DIR *d = opendir(dir);
  assert_non_null(d);
  char *names[16];
  size_t n = 0;
  for (struct dirent *e = readdir(d); e; e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    assert_true(n < 16);
    names[n++] = kiln_strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_str);
  const char *expected[] = {"fusion.1.90-llvm-input.ll", "fusion.1.91-llvm-libdevice.ll",
                            "fusion.1.92-llvm-opt.ll", "fusion.1.93-ptx.ptx"};
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(names[i], expected[i]);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    assert_int_equal(unlink(path), 0);
    kiln_free(names[i]);
  }
  assert_int_equal(rmdir(dir), 0);
}

typedef struct thread_job {
  kiln_nvptx_result_t result;
  kiln_status status;
} thread_job_t;

static void *compile_in_thread(void *arg) {
  thread_job_t *job = arg;
  kiln_nvptx_options_t opts = {.cubin_via = KILN_CUBIN_VIA_SKIP};
  job->status = compile_vadd("__nv_expf", &opts, &job->result);
  return NULL;
}

/* Threads compiling their own modules (own contexts) concurrently get identical PTX: target
 * initialization, the libdevice cache and the tool lookups are thread-safe. */
static void test_concurrent_compiles_give_identical_ptx(void **state) {
  (void)state;
  if (!libdevice_present()) KILN_SKIPPED();
  enum { kThreads = 4 };
  thread_job_t jobs[kThreads];
  pthread_t threads[kThreads];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < kThreads; i++)
    assert_int_equal(pthread_create(&threads[i], NULL, compile_in_thread, &jobs[i]), 0);
  for (int i = 0; i < kThreads; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
  for (int i = 0; i < kThreads; i++) {
    assert_null(jobs[i].status);
    assert_non_null(jobs[i].result.ptx);
    assert_string_equal(jobs[i].result.ptx, jobs[0].result.ptx);
  }
  for (int i = 0; i < kThreads; i++) kiln_nvptx_result_free(&jobs[i].result);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vadd_emits_entry_for_sm90_with_libdevice_inlined),
      cmocka_unit_test(test_vadd_without_libdevice_calls_links_nothing),
      cmocka_unit_test(test_vadd_ptx_is_accepted_by_ptxas),
      cmocka_unit_test(test_cubin_via_nvjitlink_is_an_elf),
      cmocka_unit_test(test_cubin_via_ptxas_is_an_elf),
      cmocka_unit_test(test_cubin_auto_prefers_nvjitlink),
      cmocka_unit_test(test_broken_ptx_reports_nvjitlink_log),
      cmocka_unit_test(test_broken_ptx_reports_ptxas_log),
      cmocka_unit_test(test_sm90a_ptx_is_rejected_for_sm90),
      cmocka_unit_test(test_missing_cuda_dir_needing_libdevice_is_unavailable),
      cmocka_unit_test(test_missing_cuda_dir_leaves_ptx_for_the_driver),
      cmocka_unit_test(test_kiln_cuda_dir_env_overrides_the_search),
      cmocka_unit_test(test_unknown_libdevice_function_is_not_found),
      cmocka_unit_test(test_module_without_kernel_cc_is_rejected),
      cmocka_unit_test(test_invalid_module_is_rejected),
      cmocka_unit_test(test_unknown_arch_is_rejected),
      cmocka_unit_test(test_max_threads_become_maxntid_in_the_ptx),
      cmocka_unit_test(test_arch_for_a_device_falls_back_to_ptx_for_unknown_processors),
      cmocka_unit_test(test_keep_module_leaves_the_input_untouched),
      cmocka_unit_test(test_lazy_and_eager_libdevice_give_the_same_ptx),
      cmocka_unit_test(test_dumps_sort_in_pipeline_order),
      cmocka_unit_test(test_concurrent_compiles_give_identical_ptx),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
