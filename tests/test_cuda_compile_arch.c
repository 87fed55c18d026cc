/* Compiling a module for the CUDA target without a GPU: the kernels' images follow the
 * device's processor (not always sm_90): a cubin for a processor LLVM knows, PTX for the
 * driver (targeting the newest known older processor) for one it does not; and every kernel
 * carries `.maxntid` of its launch block. Skips where nvJitLink/ptxas or the CUDA toolkit
 * are absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "status_test_util.h"

#include "base/alloc.h"
#include "compiler/backend/nvptx.h"
#include "compiler/hlo/ir.h"
#include "compiler/thunks/compile.h"
#include "runtime/executable.h"
#include "tests/skip_util.h"

static const char kModule[] =
    "HloModule m\n"
    "ENTRY e {\n"
    "  p = f32[4096,512] parameter(0)\n"
    "  e = f32[4096,512] exponential(p)\n"
    "  ROOT t = f32[512,4096] transpose(e), dimensions={1,0}\n"
    "}\n";

static bool have_cubin_tool(void) {
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

/* Compiles kModule for `arch`; returns the description (caller destroys). */
static kiln_executable_desc_t *compile_for(const char *arch) {
  kiln_hlo_module_t *m = NULL;
  ASSERT_OK(kiln_hlo_parse_module(kModule, strlen(kModule), NULL, &m));
  kiln_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.emit.target = KILN_TARGET_CUDA;
  o.emit.arch = arch;
  o.no_command_buffers = true;
  kiln_executable_desc_t *d = NULL;
  kiln_status s = kiln_compile_module(m, &o, &d, NULL);
  kiln_hlo_module_destroy(m);
  ASSERT_OK(s);
  assert_true(d->num_images >= 1);
  return d;
}

static bool is_elf(const kiln_module_image_t *img) {
  return img->size > 4 && !memcmp(img->data,
                                  "\x7f"
                                  "ELF",
                                  4);
}

static void test_known_processor_gets_a_cubin(void **state) {
  (void)state;
  if (!have_cubin_tool()) KILN_SKIPPED();
  kiln_executable_desc_t *d = compile_for("sm_89");
  for (int32_t i = 0; i < d->num_images; i++) assert_true(is_elf(&d->images[i]));
  kiln_executable_desc_destroy(d);
}

static void test_unknown_processor_gets_ptx_for_the_driver(void **state) {
  (void)state;
  /* sm_103 is in no LLVM 19-21 processor table. */
  kiln_executable_desc_t *d = compile_for("sm_103");
  for (int32_t i = 0; i < d->num_images; i++) {
    const kiln_module_image_t *img = &d->images[i];
    assert_false(is_elf(img));
    const char *ptx = img->data;
    assert_int_equal(ptx[img->size - 1], '\0'); /* the driver takes NUL-terminated PTX */
    assert_non_null(strstr(ptx, ".target sm_"));
    assert_null(strstr(ptx, ".target sm_90a"));
    assert_non_null(strstr(ptx, ".maxntid "));
  }
  kiln_executable_desc_destroy(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_processor_gets_a_cubin),
      cmocka_unit_test(test_unknown_processor_gets_ptx_for_the_driver),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
