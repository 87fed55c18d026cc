/* A PJRT client for kiln-bench and kiln-replay: the plugin (any PJRT plugin; kiln's by default)
 * loaded with dlopen(RTLD_LOCAL) and driven only through its PJRT_Api table, as a framework
 * drives it. Clients with named options (cache folder, command buffers), compile, serialize
 * and deserialize, buffers from and to literals, execute, and the executable's cost-analysis
 * properties.
 *
 * Ownership: the plugin outlives its clients; a client outlives its executables and buffers.
 * Not thread-safe: callers serialize uses of one client. */
#ifndef KILN_BENCHMARKS_KILN_BENCH_CLIENT_H_
#define KILN_BENCHMARKS_KILN_BENCH_CLIENT_H_

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/literal.h"
#include "kiln/pjrt_c_api.h"

typedef struct kiln_bench_plugin {
  void *handle; /* stays loaded: a plugin's threads may outlive its clients */
  const PJRT_Api *api;
  char path[PATH_MAX];
  /* Its `kiln_version` attribute; for another plugin, `xla_version` as "xla <n>", else
   * "PJRT <major>.<minor>". */
  char version[96];
} kiln_bench_plugin_t;

/* Loads and initializes the plugin at `path` (NULL: kiln's, found as kiln-run finds it). */
kiln_status kiln_bench_plugin_open(const char *path, kiln_bench_plugin_t *out);

typedef struct kiln_bench_client_options {
  const char *platform;  /* "cpu", "cuda", "auto"; NULL: the plugin's default */
  const char *cache_dir; /* the disk compile cache's folder; NULL: the plugin's default */
  int command_buffers;   /* 1 on, 0 off, -1: the plugin's default */
} kiln_bench_client_options_t;

typedef struct kiln_bench_client {
  const kiln_bench_plugin_t *plugin;
  PJRT_Client *client;
  PJRT_Device *device; /* the first addressable device */
  char platform[32];
} kiln_bench_client_t;

kiln_status kiln_bench_client_create(const kiln_bench_plugin_t *p,
                                     const kiln_bench_client_options_t *o,
                                     kiln_bench_client_t *out);
void kiln_bench_client_destroy(kiln_bench_client_t *c);

typedef struct kiln_bench_exe {
  PJRT_LoadedExecutable *exe;
  size_t num_outputs;
} kiln_bench_exe_t;

/* PJRT_Client_Compile of `code` in `format` ("hlo", "mlir", "hlo_with_config"). */
kiln_status kiln_bench_compile(const kiln_bench_client_t *c, const char *code, size_t len,
                               const char *format, kiln_bench_exe_t *out);
/* PJRT_Executable_Serialize: *bytes (kiln_malloc'ed, the caller frees) of *len bytes. */
kiln_status kiln_bench_serialize(const kiln_bench_client_t *c, const kiln_bench_exe_t *e,
                                 char **bytes, size_t *len);
kiln_status kiln_bench_deserialize(const kiln_bench_client_t *c, const char *bytes, size_t len,
                                   kiln_bench_exe_t *out);
void kiln_bench_exe_destroy(const kiln_bench_client_t *c, kiln_bench_exe_t *e);

/* An int64 property of PJRT_Executable_GetCostAnalysis; false when the plugin has none of
 * that name (or no cost analysis). */
bool kiln_bench_cost_property(const kiln_bench_client_t *c, const kiln_bench_exe_t *e,
                              const char *name, int64_t *value);

/* A device buffer holding array literal `l` (its dims; its layout as the device layout when
 * it is not row-major). */
kiln_status kiln_bench_upload(const kiln_bench_client_t *c, const kiln_literal_t *l,
                              PJRT_Buffer **out);
/* The buffer's contents in row-major order as a new literal in `arena`. */
kiln_status kiln_bench_download(const kiln_bench_client_t *c, PJRT_Buffer *b, kiln_arena_t *arena,
                                kiln_literal_t **out);
/* Bytes the buffer takes on the device (0 when the plugin does not say). */
int64_t kiln_bench_buffer_bytes(const kiln_bench_client_t *c, PJRT_Buffer *b);
void kiln_bench_buffer_destroy(const kiln_bench_client_t *c, PJRT_Buffer *b);

/* What kiln_bench_execute times: the clock is read right before PJRT_LoadedExecutable_Execute
 * and right after the PJRT call that ends the span, so the span holds those calls and nothing of
 * kiln-bench's (its argument setup, status handling and event destruction are outside). */
typedef enum kiln_bench_span {
  KILN_BENCH_SPAN_NONE,    /* no clock read */
  KILN_BENCH_SPAN_RUN,     /* Execute, then the wait for its completion event */
  KILN_BENCH_SPAN_ENQUEUE, /* the Execute call alone (the host's part on an asynchronous device) */
} kiln_bench_span_t;

/* One execute on the client's device: `outs` (e->num_outputs) gets the results; waits for
 * completion; no argument is donated (the same buffers feed every execute). *span_ms (with a
 * span other than NONE): the time of `span`. */
kiln_status kiln_bench_execute(const kiln_bench_client_t *c, const kiln_bench_exe_t *e,
                               PJRT_Buffer *const *args, size_t num_args, PJRT_Buffer **outs,
                               kiln_bench_span_t span, double *span_ms);

#endif /* KILN_BENCHMARKS_KILN_BENCH_CLIENT_H_ */
