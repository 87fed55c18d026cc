/* Executables: PJRT_Executable (the optimized program and what it returns, shared) and
 * PJRT_LoadedExecutable (a handle a caller executes through), plus the client's compile
 * cache (compile_cache.h).
 *
 * Lazy JIT: Compile parses, verifies and runs the passes (kiln_compile_module_passes) and
 * keeps the optimized module; the first execute on a device does buffer assignment, thunk
 * emission (the kernels) and the load (kiln_compile_optimized_module, kiln_executable_load)
 * and keeps the loaded kiln_executable_t. That happens once per device however many threads
 * execute at once: the loaded pointer is read without a lock, and the threads that find it
 * missing line up on the executable's lowering mutex, the first lowers, the others find it
 * done.
 *
 * Sharing: a PJRT_Executable is reference-counted. Its loaded handles, the handles
 * GetExecutable gives out, and the client's in-memory compile cache each hold one, so a cache
 * hit returns a new handle on the same executable, whose kernels are already loaded.
 * LoadedExecutable_Delete marks that handle deleted (executes through it then fail); the code
 * goes when the last reference does. Destroying the client detaches every executable it made
 * (its loaded code is released then; later executes fail with FAILED_PRECONDITION).
 *
 * Entry layouts: results get the default (descending) layout, the layout PJRT buffers
 * have by default. Each parameter leaf keeps the dense layout the program gives it (its
 * entry_computation_layout, else the parameter's shape), or the compile options' argument
 * layout when one is given; a tiled layout, or a parameter an output aliases, gets the
 * default one (pjrt_compile.c). The optimized module's entry parameters carry the result, which
 * is the layout Execute wants (params[i].m2m); an argument buffer in another dense layout is
 * relaid out for the run (pjrt_relayout.h), one in that layout is read as it is.
 *
 * Thread-safety: thread-safe. */
#ifndef KILN_PLUGIN_PJRT_EXECUTABLE_H_
#define KILN_PLUGIN_PJRT_EXECUTABLE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/version.h"
#include "compiler/hlo/ir.h"
#include "compiler/thunks/compile.h"
#include "plugin/compile_options.h"
#include "plugin/pjrt_objects.h"
#include "runtime/executable.h"

/* One array leaf of the entry signature (tuples are flattened depth first). */
typedef struct kiln_pjrt_leaf {
  PJRT_Buffer_Type type;
  int32_t rank;
  int64_t *dims;     /* owned */
  int64_t *m2m;      /* owned: its layout's minor_to_major (parameters: what Execute wants) */
  bool m2m_default;  /* m2m is the default rank-1 ... 0 (an argument in the default layout
                        is then read as it is without comparing placements) */
  int32_t parameter; /* parameters: the entry parameter number it belongs to */
  int32_t leaf;      /* parameters: its leaf index within that parameter */
  uint64_t bytes;    /* dense size */
} kiln_pjrt_leaf_t;

/* What one device holds of an executable: its loaded code, made on the first execute. */
typedef struct kiln_pjrt_device_code {
  _Atomic(kiln_executable_t *) loaded;
  double lower_ms; /* buffer assignment + emission + load, when it was made */
  bool cheap;      /* a run costs less than a hand-off to the device's queue (set before
                      `loaded` is published) */
} kiln_pjrt_device_code_t;

struct PJRT_Executable {
  _Atomic int32_t refs;
  PJRT_Client *client;                             /* NULL once the client was destroyed */
  struct kiln_pjrt_compile_cache *cache;           /* the client's, which lists this executable */
  struct PJRT_Executable *cache_prev, *cache_next; /* the cache's list of live executables */
  char *name;
  kiln_hlo_module_t *optimized; /* after the passes; only read from here on */
  char *optimized_text;         /* its canonical text (OptimizedProgram, Serialize) */
  size_t optimized_text_len;
  char *compile_options; /* the serialized CompileOptionsProto given to Compile */
  size_t compile_options_len;
  char fingerprint[33]; /* hex: optimized text + target + kiln's version */
  kiln_compile_target_t target;
  kiln_compile_options_t copts; /* what lowering uses (dump dir, command buffers) */
  char *dump_dir;               /* owned; copts.emit.dump_dir points here */
  char *kernel_cache_dir;       /* owned; copts.emit.kernel_cache_dir points here */
  int32_t device_index;         /* its first participant's device (index in client->devices; -1:
                                   another process's) */
  /* The world: num_replicas x num_partitions participants (participant = replica *
   * num_partitions + partition), participant i on the device of id assignment[i]
   * (client->all_devices[assignment[i]]). */
  int32_t num_replicas, num_partitions, num_participants;
  int32_t *assignment; /* owned */
  /* The entry signature. */
  int32_t num_params;
  kiln_pjrt_leaf_t *params;
  int32_t num_entry_params; /* entry parameters before flattening */
  int32_t num_outputs;
  kiln_pjrt_leaf_t *outputs;
  PJRT_Buffer_Type *output_types;
  int64_t *output_dims; /* all outputs' dims, concatenated */
  size_t *output_dim_sizes;
  const char **output_memory_kinds;
  size_t *output_memory_kind_sizes;
  const char **param_memory_kinds; /* per parameter leaf: "device" (kiln places all there) */
  size_t *param_memory_kind_sizes;
  int32_t *param_output; /* per flattened parameter: the output leaf donated into it, or -1 */
  int32_t *output_param; /* per output leaf: the flattened parameter it lives in, or -1 */
  /* Per device of the client (client->num_devices entries). */
  pthread_mutex_t lower_mu;
  kiln_pjrt_device_code_t *devices;
  int32_t num_devices;
  _Atomic int64_t code_bytes; /* generated code of the loaded devices (images' sizes) */
  _Atomic int32_t loads;      /* lowerings done (one per device that executed it) */
  _Atomic int32_t cache_loads; /* ... of which read from the executable cache */
  int64_t temp_bytes;
  double passes_ms; /* Compile's pass pipeline */
  /* Cost-analysis properties (GetCostAnalysis), built on first request. */
  pthread_mutex_t props_mu;
  PJRT_NamedValue *props;
  size_t num_props;
};

struct PJRT_LoadedExecutable {
  PJRT_Executable *exec; /* one reference */
  PJRT_Device *device;   /* its first participant's device */
  _Atomic bool deleted;
  /* Every participant's device in participant order (exec->num_participants entries, owned),
   * with their (replica, partition). Its addressable ones (this process's) are participants
   * first_local ... first_local + num_local - 1: all of them in one process. */
  PJRT_Device **devices;
  PJRT_LogicalDeviceIds *logical_ids;
  int32_t first_local, num_local;
  _Atomic bool met; /* across processes: the processes met before its first run */
};

/* Builds an executable of `client` for a world of num_replicas x num_partitions participants,
 * participant i on the device of id assignment[i] (copied), from a module the passes
 * already ran on (`optimized`, taken over in every case; its entry signature is the
 * program's, with default layouts). `options` (options_len bytes, the serialized
 * CompileOptionsProto) is kept for GetCompileOptions and Serialize; `co` is its decoded form.
 * *out holds one reference. */
kiln_status kiln_pjrt_executable_create(PJRT_Client *client, int32_t num_replicas,
                                        int32_t num_partitions, const int32_t *assignment,
                                        kiln_hlo_module_t *optimized, const char *options,
                                        size_t options_len, const kiln_pjrt_compile_options_t *co,
                                        double passes_ms, PJRT_Executable **out);
void kiln_pjrt_executable_ref(PJRT_Executable *e);
void kiln_pjrt_executable_unref(PJRT_Executable *e);
/* A loaded handle over `e` (one more reference taken). */
kiln_status kiln_pjrt_loaded_create(PJRT_Executable *e, PJRT_LoadedExecutable **out);
/* Drops every device's loaded code and the client pointer (client destruction). */
void kiln_pjrt_executable_detach(PJRT_Executable *e);

/* The client's compile cache (compile_cache.c). */
kiln_status kiln_pjrt_compile_cache_create(const kiln_pjrt_client_options_t *opts,
                                           kiln_pjrt_compile_cache_t **out);
void kiln_pjrt_compile_cache_destroy(kiln_pjrt_compile_cache_t *c);

#endif /* KILN_PLUGIN_PJRT_EXECUTABLE_H_ */
