/* TEMPORARY: the bytecode reader's entry points until wt-shbc lands them on this branch
 * (deleted then): bytecode is refused as UNIMPLEMENTED. */
#include "compiler/frontend/mlir_bytecode.h"

bool kiln_mlir_bytes_are_bytecode(const void *bytes, size_t n) {
  const unsigned char *b = bytes;
  return n >= 4 && b[0] == 'M' && b[1] == 'L' && b[2] == 0xef && b[3] == 'R';
}

kiln_status kiln_mlir_read_bytecode(const void *bytes, size_t n, kiln_mlir_module_t **out) {
  (void)bytes;
  (void)n;
  *out = NULL;
  return KILN_ERR_UNIMPLEMENTED("the MLIR bytecode reader is not built in yet");
}
