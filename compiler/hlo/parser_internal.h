/* State shared by the HLO text parser's files (parser.c, parser_literal.c). Internal. */
#ifndef KILN_HLO_PARSER_INTERNAL_H_
#define KILN_HLO_PARSER_INTERNAL_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/hashmap.h"
#include "base/str.h"
#include "base/vec.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/lexer.h"

/* Deepest nesting of tuple shapes / literal braces accepted. */
#define KILN_HLO_PARSE_MAX_DEPTH 128
/* Longest list stored in an `int` count (dims, operands, attributes, ...). */
#define KILN_HLO_PARSE_MAX_COUNT ((size_t)1 << 26)

/* A name as written (`pos` is the token start, `name` skips a '%'). */
typedef struct kiln_hlo_name_ref {
  const char *pos;
  const char *name;
  uint32_t len;
} kiln_hlo_name_ref_t;
typedef KILN_VEC(kiln_hlo_name_ref_t) kiln_hlo_name_refs_t;

/* An instruction of the computation being read, with its unresolved names. */
typedef struct kiln_hlo_instr_rec {
  kiln_hlo_instruction_t *instr;
  const char *pos;
  uint32_t ops_begin, ops_count;   /* into refs */
  uint32_t ctrl_begin, ctrl_count; /* into refs */
} kiln_hlo_instr_rec_t;

typedef struct kiln_hlo_comp_rec {
  kiln_hlo_computation_t *comp;
  const char *pos;
} kiln_hlo_comp_rec_t;

/* A called-computation group waiting for the end of the module. */
typedef struct kiln_hlo_called_rec {
  kiln_hlo_instruction_t *instr;
  const char *key;
  bool braced;
  uint32_t begin, count; /* into crefs */
} kiln_hlo_called_rec_t;

/* An instruction written without a shape (inferred at the end of the module). */
typedef struct kiln_hlo_shapeless {
  kiln_hlo_instruction_t *instr;
  const char *pos;
} kiln_hlo_shapeless_t;

/* An instruction written in XLA's async shorthand (`all-to-all-start(...)`, parser_async.c):
 * read as `wrapped` (a start) or as async-update / async-done; finished with the module. */
typedef struct kiln_hlo_async_rec {
  kiln_hlo_instruction_t *instr;
  kiln_hlo_opcode_t wrapped;
  const char *pos; /* the opcode */
} kiln_hlo_async_rec_t;

typedef struct kiln_hlo_parser {
  kiln_hlo_lexer_t L;
  kiln_hlo_module_t *m;
  int depth;
  kiln_strbuf_t sb; /* captured values, decoded strings */
  kiln_strbuf_t nb; /* NUL-terminated names */
  KILN_VEC(unsigned char) lit; /* literal storage being read */
  KILN_VEC(int64_t) ints;      /* int stack */
  KILN_VEC(bool) dyn;
  KILN_VEC(kiln_shape_t *) shapes;
  KILN_VEC(kiln_tile_t) tiles;
  KILN_VEC(char) extra;
  KILN_VEC(kiln_raw_attr_t) raws;
  KILN_VEC(char *) strs;
  /* current computation */
  kiln_hashmap_t instr_map; /* name -> index in instrs + 1 */
  KILN_VEC(kiln_hlo_instr_rec_t) instrs;
  kiln_hlo_name_refs_t refs;
  kiln_hlo_name_refs_t opstack; /* operands of the instructions being read (nesting) */
  unsigned nested_counter;      /* for names of nested instructions */
  int64_t root_index;
  bool seen[96]; /* decoded attributes seen on the current instruction */
  /* module */
  kiln_hashmap_t comp_map; /* name -> index in comps + 1 */
  KILN_VEC(kiln_hlo_comp_rec_t) comps;
  KILN_VEC(kiln_hlo_called_rec_t) called;
  kiln_hlo_name_refs_t crefs;
  kiln_hlo_computation_t *entry;
  KILN_VEC(kiln_hlo_shapeless_t) shapeless;
  KILN_VEC(kiln_hlo_async_rec_t) asyncs;
  kiln_hashmap_t opcodes;   /* spelling -> opcode + 1 */
  kiln_hashmap_t attr_keys; /* key -> attribute id + 1 */
  kiln_hashmap_t raw_seen;  /* raw key -> tag of the last owner (duplicate check) */
} kiln_hlo_parser_t;

/* Depth guard for recursive productions; the caller decrements P->depth on success. */
bool kiln_hlo_parser_enter(kiln_hlo_parser_t *P);
/* Reports RESOURCE_EXHAUSTED; returns false. */
bool kiln_hlo_parser_oom(kiln_hlo_parser_t *P);
bool kiln_hlo_parser_reserve(kiln_hlo_parser_t *P, size_t n, size_t allocs);
/* Arena allocation that reports RESOURCE_EXHAUSTED on NULL. */
void *kiln_hlo_parser_alloc(kiln_hlo_parser_t *P, size_t n);

char *kiln_hlo_parser_strndup(kiln_hlo_parser_t *P, const char *s, size_t n);
/* A NUL-terminated copy of [s, s+n) in P->nb (valid until the next call). */
const char *kiln_hlo_parser_cname(kiln_hlo_parser_t *P, const char *s, size_t n);
bool kiln_hlo_span_eq(const char *s, size_t n, const char *lit);
/* Moves ints [base, len) of P->ints into an arena list. */
bool kiln_hlo_parser_take_ints(kiln_hlo_parser_t *P, size_t base, kiln_i64_list_t *out);
bool kiln_hlo_parse_i64_list(kiln_hlo_parser_t *P, kiln_i64_list_t *out); /* {1,2} or {} */
bool kiln_hlo_parse_bool(kiln_hlo_parser_t *P, bool *out);
bool kiln_hlo_parse_word_dup(kiln_hlo_parser_t *P, const char *what, char **out);

/* Captures the value of raw attribute `k` into P->raws; `owner_tag` identifies the owner
 * (module or instruction) so a repeated key on the same owner is an error. */
bool kiln_hlo_parser_add_raw(kiln_hlo_parser_t *P, const char *k, size_t kn, const char *kpos,
                             uintptr_t owner_tag);
/* Moves P->raws into an arena array. */
bool kiln_hlo_parser_take_raws(kiln_hlo_parser_t *P, kiln_raw_attr_t **out, int *n);
/* One `key=value` attribute of `instr` (the cursor is after the ','). */
bool kiln_hlo_parse_instr_attr(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr,
                               kiln_hlo_instr_rec_t *rec);

/* XLA's async shorthand (parser_async.c). True when `s` is `X-start`, `X-update` or `X-done`
 * for an opcode X that may be wrapped: *op is async-start / -update / -done, *wrapped X. */
bool kiln_hlo_parser_async_opcode(const char *s, size_t n, kiln_hlo_opcode_t *op,
                                  kiln_hlo_opcode_t *wrapped);
/* Before called computations are resolved: each shorthand start (read as its X) becomes an
 * async-start calling a new computation whose root is X with X's attributes. */
bool kiln_hlo_parser_wrap_async_shorthand(kiln_hlo_parser_t *P);
/* After they are resolved: each shorthand -update / -done continues a start wrapping its X. */
bool kiln_hlo_parser_check_async_shorthand(kiln_hlo_parser_t *P);

/* A shape: f32[2,<=3]{1,0:T(2,128)}, (s32[], token[]), ... */
bool kiln_hlo_parse_shape_text(kiln_hlo_parser_t *P, kiln_shape_t **out);
/* The literal inside constant(...) for `shape`. */
bool kiln_hlo_parse_literal(kiln_hlo_parser_t *P, kiln_shape_t *shape, kiln_literal_t **out);

#endif /* KILN_HLO_PARSER_INTERNAL_H_ */
