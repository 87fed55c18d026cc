/* HloModuleProto (xla/service/hlo.proto) -> kiln's HLO IR: what PJRT's "hlo" and
 * "hlo_with_config" program formats carry. The proto is decoded with the wire reader in
 * base/proto_wire.h and converted into the same module HLO text would parse into (then
 * verified). Malformed bytes, unknown opcodes and inconsistent ids are INVALID_ARGUMENT
 * naming the computation, the instruction and the field.
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_COMPILER_FRONTEND_HLO_PROTO_H_
#define KILN_COMPILER_FRONTEND_HLO_PROTO_H_

#include <stddef.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

/* A serialized HloModuleProto. */
kiln_status kiln_hlo_module_from_proto(const void *bytes, size_t n, kiln_hlo_module_t **out);
/* A serialized HloModuleProtoWithConfig (hlo_module = 1, config = 2): the module; the config's
 * replica and partition counts, when set, in *num_replicas / *num_partitions (else 1). */
kiln_status kiln_hlo_module_from_proto_with_config(const void *bytes, size_t n,
                                                   kiln_hlo_module_t **out, int64_t *num_replicas,
                                                   int64_t *num_partitions);
/* True when `bytes` look like HLO text rather than a proto (starts, after blanks and
 * comments, with "HloModule"). */
bool kiln_hlo_bytes_are_text(const void *bytes, size_t n);

#endif /* KILN_COMPILER_FRONTEND_HLO_PROTO_H_ */
