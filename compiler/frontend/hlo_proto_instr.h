/* One HloInstructionProto -> one line of HLO text (internal to compiler/frontend/).
 *
 * hlo_proto.c walks modules and computations; this file turns the fields of one
 * instruction into `[ROOT ]name = shape opcode(operands), attr=value, ...` in the syntax
 * kiln's parser reads. */
#ifndef KILN_COMPILER_FRONTEND_HLO_PROTO_INSTR_H_
#define KILN_COMPILER_FRONTEND_HLO_PROTO_INSTR_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/proto_wire.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/shape.h"

/* What an instruction's text needs from the rest of the module. */
typedef struct kiln_hlo_proto_scope {
  const char *computation;       /* name of the computation, for errors */
  kiln_hashmap_t *instr_by_id;   /* int64 id (8 bytes) -> index + 1 into names/types */
  char **instr_names;            /* names of the computation's instructions */
  kiln_elem_type_t *instr_types; /* element type of each (KILN_TUPLE for tuples) */
  kiln_hashmap_t *comp_by_id;    /* int64 id -> index + 1 into comp_names */
  char **comp_names;
  kiln_arena_t *arena; /* scratch for shapes and literals */
  /* HloModuleProto.payloads (field 22, bytes each): what an instruction's
   * backend_config_payload {id=2} names; read with the module's reader */
  const kiln_pw_field_t *payloads;
  size_t num_payloads;
  const kiln_pw_reader_t *module_reader;
} kiln_hlo_proto_scope_t;

/* Appends the text of the instruction `r` spans. `is_root` prefixes ROOT. */
kiln_status kiln_hlo_proto_instruction_text(kiln_pw_reader_t *r,
                                            const kiln_hlo_proto_scope_t *scope, bool is_root,
                                            kiln_strbuf_t *out);

/* Appends `s` quoted with C escapes (as kiln's printer writes strings). */
void kiln_hlo_proto_append_quoted(kiln_strbuf_t *b, const char *s, size_t n);
/* Appends the ShapeProto / ProgramShapeProto-element that field `f` holds as shape text. */
kiln_status kiln_hlo_proto_append_shape(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                        kiln_arena_t *arena, kiln_strbuf_t *out,
                                        kiln_shape_t **shape_out);
/* FrontendAttributes -> {key="value",...} (a value that is itself {...} stays bare). */
kiln_status kiln_hlo_proto_append_frontend_attrs(kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                                 kiln_strbuf_t *out);

#endif /* KILN_COMPILER_FRONTEND_HLO_PROTO_INSTR_H_ */
