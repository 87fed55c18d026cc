/* libFuzzer target for kiln's own ELF loader (compiler/backend/host_elf.h), which maps the host
 * objects of cached executables without LLVM: any input must be loaded or refused, never
 * crash, leak or hang. The input is one relocatable object; seeds are the objects of corpus
 * modules compiled for the host (gen_executable_seeds --objects). Undefined symbols resolve to
 * one dummy address (far from the mapping, so calls take the GOT stubs and 32-bit PC-relative
 * references to it are refused); nothing loaded is ever run. Each loaded image is asked for a
 * symbol it does not define, then destroyed. */
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/backend/host_elf.h"

static char g_dummy[64];

static void *resolve(void *user, const char *name) {
  (void)user;
  (void)name;
  return g_dummy;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const void *objects[1] = {data};
  size_t sizes[1] = {size};
  kiln_host_elf_t *img = NULL;
  kiln_status s = kiln_host_elf_load(objects, sizes, 1, resolve, NULL, &img);
  if (!s) {
    void *addr = NULL;
    kiln_status_free(kiln_host_elf_lookup(img, "kiln_fuzz_no_such_symbol", &addr));
    if (kiln_host_elf_mapped_bytes(img) == 0) __builtin_trap(); /* a loaded image maps pages */
    kiln_host_elf_destroy(img);
  }
  kiln_status_free(s);
  return 0;
}
