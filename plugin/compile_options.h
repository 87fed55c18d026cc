/* PJRT's compile options: a serialized xla.CompileOptionsProto (xla/pjrt/compile_options.proto)
 * decoded into what kiln honours. Unknown fields are skipped; malformed bytes are an
 * INVALID_ARGUMENT naming the field and byte offset.
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_PLUGIN_COMPILE_OPTIONS_H_
#define KILN_PLUGIN_COMPILE_OPTIONS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_pjrt_compile_options {
  /* ExecutableBuildOptionsProto */
  int64_t device_ordinal; /* -1 when not set */
  int64_t num_replicas;   /* 1 when not set */
  int64_t num_partitions; /* 1 when not set */
  bool use_spmd_partitioning;
  bool has_device_assignment;
  /* DeviceAssignmentProto: device_ids[replica * computation_count + computation]. */
  int32_t da_replica_count, da_computation_count;
  int64_t *device_ids; /* owned */
  /* Argument layouts (CompileOptionsProto.argument_layouts, ShapeProto) as HLO shape text,
   * e.g. "f32[2,3]{0,1}"; owned. */
  int32_t num_argument_layouts;
  char **argument_layouts;
  /* DebugOptions kiln honours. */
  char *xla_dump_to;              /* NULL when not set */
  bool has_command_buffer_option; /* xla_gpu_enable_command_buffer was given */
  bool command_buffers;           /* ... and non-empty */
  /* The collective combiners' thresholds in bytes: DebugOptions
   * xla_gpu_all_reduce_combine_threshold_bytes (157), xla_gpu_all_gather_... (212),
   * xla_gpu_reduce_scatter_... (213), or env_option_overrides of those names (which win, as in
   * XLA); KILN_PJRT_OPTION_UNSET when not given, 0 (also for a negative value) combines
   * nothing. */
  int64_t all_reduce_combine_threshold_bytes;
  int64_t all_gather_combine_threshold_bytes;
  int64_t reduce_scatter_combine_threshold_bytes;
  /* CompileOptionsProto.env_option_overrides kept as key=value text (owned); the ones kiln
   * honours (xla_dump_to, xla_gpu_enable_command_buffer and the three thresholds above) are
   * also applied to the fields above; the others are ignored. */
  int32_t num_env_overrides;
  char **env_overrides;
  /* ExecutableBuildOptionsProto.result_layout as HLO shape text (owned), NULL when not set. */
  char *result_layout;
} kiln_pjrt_compile_options_t;

#define KILN_PJRT_OPTION_UNSET (-1)

/* Decodes `n` bytes (n == 0: defaults) into *out (release with _free). */
kiln_status kiln_pjrt_compile_options_decode(const void *bytes, size_t n,
                                             kiln_pjrt_compile_options_t *out);
void kiln_pjrt_compile_options_free(kiln_pjrt_compile_options_t *o);

struct kiln_pass_options;
/* The passes' settings the options give: the combine thresholds (0 given: the combiner off;
 * not given: the pass's default). */
void kiln_pjrt_compile_options_to_passes(const kiln_pjrt_compile_options_t *o,
                                         struct kiln_pass_options *passes);

#endif /* KILN_PLUGIN_COMPILE_OPTIONS_H_ */
