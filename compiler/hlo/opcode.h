/* HLO opcodes: one X-macro table (opcodes.def) with text, arity and properties. */
#ifndef KILN_HLO_OPCODE_H_
#define KILN_HLO_OPCODE_H_

#include <stdbool.h>
#include <stddef.h>

enum {
  KILN_OPF_ELEMENTWISE = 1 << 0,
  KILN_OPF_COMMUTATIVE = 1 << 1,
  KILN_OPF_COLLECTIVE = 1 << 2,
};

typedef enum kiln_hlo_opcode {
#define X(e, text, arity, flags) KILN_OP_##e,
#include "compiler/hlo/opcodes.def"
#undef X
  KILN_OP_COUNT
} kiln_hlo_opcode_t;

const char *kiln_hlo_opcode_name(kiln_hlo_opcode_t op);
/* Looks up an opcode by its text; false when unknown. */
bool kiln_hlo_opcode_from_name(const char *s, size_t n, kiln_hlo_opcode_t *out);
int kiln_hlo_opcode_arity(kiln_hlo_opcode_t op); /* -1 = variadic */
unsigned kiln_hlo_opcode_flags(kiln_hlo_opcode_t op);
static inline bool kiln_hlo_opcode_is_elementwise(kiln_hlo_opcode_t op) {
  return (kiln_hlo_opcode_flags(op) & KILN_OPF_ELEMENTWISE) != 0;
}

/* The two halves of an asynchronous collective: all-reduce-, all-gather- and
 * collective-permute-start, and async-start (whatever it wraps); their -done forms and
 * async-done. */
bool kiln_hlo_opcode_starts_async(kiln_hlo_opcode_t op);
bool kiln_hlo_opcode_ends_async(kiln_hlo_opcode_t op);

#endif /* KILN_HLO_OPCODE_H_ */
