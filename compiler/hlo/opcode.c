#include "compiler/hlo/opcode.h"

#include <string.h>

typedef struct opcode_info {
  const char *name;
  int arity;
  unsigned flags;
} opcode_info_t;

static const opcode_info_t kOpcodes[KILN_OP_COUNT] = {
#define X(e, text, arity, flags) {text, arity, flags},
#include "compiler/hlo/opcodes.def"
#undef X
};

const char *kiln_hlo_opcode_name(kiln_hlo_opcode_t op) {
  return (unsigned)op < KILN_OP_COUNT ? kOpcodes[op].name : "<bad-opcode>";
}

bool kiln_hlo_opcode_from_name(const char *s, size_t n, kiln_hlo_opcode_t *out) {
  /* The table is small (≈135); a linear scan costs nothing next to parsing a line. The
   * parser caches lookups per distinct spelling anyway. */
  for (int i = 0; i < KILN_OP_COUNT; i++) {
    const char *name = kOpcodes[i].name;
    if (strncmp(name, s, n) == 0 && name[n] == 0) {
      *out = (kiln_hlo_opcode_t)i;
      return true;
    }
  }
  return false;
}

int kiln_hlo_opcode_arity(kiln_hlo_opcode_t op) {
  return (unsigned)op < KILN_OP_COUNT ? kOpcodes[op].arity : 0;
}

unsigned kiln_hlo_opcode_flags(kiln_hlo_opcode_t op) {
  return (unsigned)op < KILN_OP_COUNT ? kOpcodes[op].flags : 0;
}

bool kiln_hlo_opcode_starts_async(kiln_hlo_opcode_t op) {
  return op == KILN_OP_ALL_REDUCE_START || op == KILN_OP_ALL_GATHER_START ||
         op == KILN_OP_COLLECTIVE_PERMUTE_START || op == KILN_OP_ASYNC_START;
}

bool kiln_hlo_opcode_ends_async(kiln_hlo_opcode_t op) {
  return op == KILN_OP_ALL_REDUCE_DONE || op == KILN_OP_ALL_GATHER_DONE ||
         op == KILN_OP_COLLECTIVE_PERMUTE_DONE || op == KILN_OP_ASYNC_DONE;
}
