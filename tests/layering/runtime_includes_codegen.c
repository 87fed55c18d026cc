/* A planted layer violation: a runtime file that includes a codegen header. The ctest
 * layering_runtime_cannot_include_codegen compiles it with kiln_runtime's include setup and
 * expects "No such file or directory" (the runtime never sees the compiler);
 * layering_thunks_may_include_codegen compiles it with kiln_thunks' setup and expects it to
 * compile (thunk emission may use codegen), so the failure comes from the layer rule alone.
 * Not part of any library. */
#include "compiler/codegen/kir.h"

int kiln_layering_planted_include(void);
int kiln_layering_planted_include(void) {
  return (int)sizeof(kiln_kir_module_t *);
}
