/* libFuzzer target for the MLIR text reader (compiler/frontend/mlir_text.h). Whatever parses
 * is printed in generic form and parsed again; the second print must equal the first, so the
 * printer and the generic-form reader see every module the fuzzer invents. Then the module is
 * converted to HLO (compiler/frontend/stablehlo_to_hlo.h): an error is fine, a crash, leak or
 * a converted module that does not verify is not. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/frontend/mlir_ir.h"
#include "compiler/frontend/mlir_text.h"
#include "compiler/frontend/stablehlo_to_hlo.h"
#include "compiler/hlo/ir.h"

static char *print_module(const kiln_mlir_module_t *m) {
  kiln_strbuf_t b = {0};
  kiln_mlir_module_print(&b, m);
  return kiln_strbuf_take(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_mlir_module_t *m = NULL;
  kiln_status s = kiln_mlir_parse_text((const char *)data, size, "<fuzz>", &m);
  if (s) {
    kiln_status_free(s);
    return 0;
  }
  char *first = print_module(m);
  kiln_mlir_module_t *again = NULL;
  s = kiln_mlir_parse_text(first, strlen(first), "<reprint>", &again);
  if (s) {
    fprintf(stderr, "reparse of the generic print failed: %s\n--- print ---\n%s\n",
            kiln_status_message(s), first);
    __builtin_trap();
  }
  char *second = print_module(again);
  if (strcmp(first, second) != 0) {
    fprintf(stderr, "print is not a fixed point\n--- first ---\n%s\n--- second ---\n%s\n", first,
            second);
    __builtin_trap();
  }
  kiln_free(second);
  kiln_free(first);
  kiln_mlir_module_destroy(again);
  kiln_hlo_module_t *h = NULL;
  s = kiln_stablehlo_to_hlo(m, NULL, &h); /* verified when it succeeds */
  if (s) kiln_status_free(s);
  if (h) kiln_hlo_module_destroy(h);
  kiln_mlir_module_destroy(m);
  return 0;
}
