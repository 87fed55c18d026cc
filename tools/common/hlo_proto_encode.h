/* kiln HLO module -> serialized xla.HloModuleProto (or HloModuleProtoWithConfig), for
 * tests only: written from the field numbers of xla/service/hlo.proto and
 * xla/xla_data.proto independently of the product's decoder (compiler/frontend/), so that
 * text -> encode -> decode -> print checks the decoder against real protobuf bytes.
 *
 * What it carries: every decoded attribute of kiln's IR, and these raw attributes:
 * metadata, frontend_attributes, parameter_replication, source_target_pairs,
 * operand_layout_constraints, output_to_operand_aliasing, schedule, infeed_config,
 * outfeed_config, outfeed_shape, is_host_transfer, custom_call_has_side_effect, delta,
 * epsilon, feature_index, is_composite, result_accuracy (mode), async_execution_thread;
 * module attributes is_scheduled, frontend_attributes and (with a config) replica_count /
 * num_partitions. Raw attributes in `dropped` are left out; any other one makes the
 * encoder return UNIMPLEMENTED naming it, so tests can count what they did not cover. */
#ifndef KILN_TOOLS_HLO_PROTO_ENCODE_H_
#define KILN_TOOLS_HLO_PROTO_ENCODE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

/* Where an instruction's backend_config goes. */
typedef enum kiln_proto_config_form {
  KILN_PROTO_CONFIG_FIELD,         /* backend_config (43) */
  KILN_PROTO_CONFIG_PAYLOAD_VALUE, /* backend_config_payload (99) {value=1} */
  KILN_PROTO_CONFIG_PAYLOAD_ID,    /* backend_config_payload {id=2} into the module's payloads */
} kiln_proto_config_form_t;

typedef struct kiln_hlo_proto_encode_options {
  bool with_config;           /* HloModuleProtoWithConfig around the module */
  bool packed;                /* repeated scalars packed (true) or one field each */
  bool iota_at_instruction;   /* iota groups in field 92, not inside collective_device_list */
  kiln_proto_config_form_t config_payload;
  const char *const *dropped; /* raw attribute keys to leave out (NULL-terminated) */
} kiln_hlo_proto_encode_options_t;

/* *out is kiln_malloc'ed (free with kiln_free). */
kiln_status kiln_hlo_proto_encode(const kiln_hlo_module_t *m,
                                  const kiln_hlo_proto_encode_options_t *opts, uint8_t **out,
                                  size_t *out_len);

#endif /* KILN_TOOLS_HLO_PROTO_ENCODE_H_ */
