/* libFuzzer target for the HLO text parser: modules, multi-module files and bare
 * computations. Whatever parses is also printed, re-parsed and verified, so the printer
 * and verifier see every shape of module the fuzzer invents. */
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include <string.h>

static void exercise(kiln_hlo_module_t *m) {
  kiln_status_free(kiln_hlo_module_verify(m));
  char *text = kiln_hlo_module_to_string(m);
  kiln_hlo_module_t *again = NULL;
  kiln_hlo_parse_options_t opts = {.filename = "<reprint>"};
  kiln_status_free(kiln_hlo_parse_module(text, strlen(text), &opts, &again));
  kiln_hlo_module_destroy(again);
  kiln_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_hlo_parse_options_t opts = {.filename = "<fuzz>"};
  kiln_hlo_module_t **mods = NULL;
  int n = 0;
  kiln_status s = kiln_hlo_parse_modules((const char *)data, size, &opts, &mods, &n);
  if (!s) {
    for (int i = 0; i < n; i++) {
      exercise(mods[i]);
      kiln_hlo_module_destroy(mods[i]);
    }
    kiln_free(mods);
  }
  kiln_status_free(s);

  kiln_hlo_module_t *m = NULL;
  s = kiln_hlo_parse_computations((const char *)data, size, &opts, &m);
  if (!s) exercise(m);
  kiln_hlo_module_destroy(m);
  kiln_status_free(s);
  return 0;
}
