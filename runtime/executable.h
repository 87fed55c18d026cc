/* Executables: a compiled module in the runtime's terms (no HLO), loaded on one device.
 *
 * The compiler (compiler/thunks/) fills a kiln_executable_desc_t: the allocations of
 * buffer assignment (parameters, constants with their contents, outputs, temporaries),
 * which allocation each flattened parameter binds to and where each output leaf lives, the
 * thunk sequence (kernel thunks name their module by index), and the kernel images (a
 * cubin per module on CUDA; one table of JIT'ed functions on the host). Then:
 *
 *   kiln_executable_load  — loads the images on the device, binds the kernel thunks to
 *                           the loaded modules, allocates the temporaries once, uploads
 *                           the constants, and runs the thunks' prepare and initialize
 *                           stages;
 *   kiln_executable_run   — binds the caller's parameter buffers without copying,
 *                           allocates the outputs, executes the thunks on the stream and
 *                           waits; the steady state allocates nothing but the outputs.
 *
 * Thread-safety: kiln_executable_run is thread-safe. Each run takes an execution context of
 * its own from a small pool (a buffer table with its own temporaries, the read-back scratch
 * of while/conditional thunks, the command-buffer thunks' addresses): concurrent runs share
 * only what they read (constants, kernels, the thunk sequence) and what is locked (the
 * device's command-buffer cache, the rng-get-and-update-state counter: concurrent runs'
 * values interleave, each run gets values of its own). The pool keeps as many contexts as
 * runs were ever in flight at once. Give each concurrent run its own stream (a stream is
 * synchronized by the run, and its errors go to whoever synchronizes it). Load and destroy:
 * not thread-safe: callers serialize, and destroy only after every run returned.
 *
 * Outputs: each output leaf comes back as a buffer the caller owns. A leaf that is a whole
 * OUTPUT allocation is handed over as is; a leaf held in a donated parameter
 * (input_output_alias) comes back as a view of the caller's parameter buffer (wrapped, not
 * owned: freeing it frees only the wrapper); any other leaf (e.g. an output that is a
 * constant, or a parameter passed through) is copied into a fresh buffer. A leaf without
 * data (a token; its slice names allocation -1) comes back as NULL.
 *
 * Ownership: load takes over the description (also on error). */
#ifndef KILN_RUNTIME_EXECUTABLE_H_
#define KILN_RUNTIME_EXECUTABLE_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/thunk.h"

typedef enum kiln_exec_alloc_kind {
  KILN_EXEC_ALLOC_PARAMETER = 0,
  KILN_EXEC_ALLOC_CONSTANT,
  KILN_EXEC_ALLOC_OUTPUT,
  KILN_EXEC_ALLOC_TEMP,
} kiln_exec_alloc_kind_t;

const char *kiln_exec_alloc_kind_name(kiln_exec_alloc_kind_t k);

typedef struct kiln_exec_allocation {
  kiln_exec_alloc_kind_t kind;
  uint64_t size;
  int32_t parameter; /* PARAMETER: index into the flattened parameters */
  bool donated;      /* PARAMETER: an output lives in it (input_output_alias) */
  void *data;        /* CONSTANT: `size` bytes of contents (owned, kiln_malloc) */
} kiln_exec_allocation_t;

typedef struct kiln_exec_output {
  kiln_slice_t slice;
} kiln_exec_output_t;

/* The object files a host image's functions were linked from (kept so that the description
 * can be serialized: runtime/executable_serialize.h; a loader links them again). */
typedef struct kiln_exec_image_objects {
  int32_t num_objects;
  char **symbols; /* each object's defining symbol (the kernel's "kiln_<hex>") */
  void **data;    /* each object file (owned) */
  size_t *sizes;
  int32_t *function_object; /* per function of the image: the object defining it */
} kiln_exec_image_objects_t;

typedef struct kiln_executable_desc {
  char *name;
  int32_t num_allocations;
  kiln_exec_allocation_t *allocations;
  int32_t num_parameters; /* flattened leaves: parameter number, then leaf, depth first */
  uint64_t *parameter_sizes;
  int32_t num_outputs;    /* leaves of the result, depth first */
  kiln_exec_output_t *outputs;
  kiln_thunk_seq_t thunks;
  int32_t num_images;
  kiln_module_image_t *images; /* data, names and functions owned (kiln_malloc) */
  /* (optional) num_images entries: a host image's objects (num_objects 0 where none). */
  kiln_exec_image_objects_t *image_objects;
  /* What keeps the images' code alive (the host JIT), released with the description. */
  void *keepalive;
  void (*keepalive_free)(void *);
  /* Contexts of custom-call thunks the description owns, released with it by their free
   * function (NULL: kiln_free). */
  int32_t num_owned;
  void **owned;
  void (**owned_free)(void *);
} kiln_executable_desc_t;

kiln_executable_desc_t *kiln_executable_desc_create(const char *name);
void kiln_executable_desc_destroy(kiln_executable_desc_t *d);
/* Appends an allocation; returns its index. */
int32_t kiln_executable_desc_add_allocation(kiln_executable_desc_t *d,
                                            const kiln_exec_allocation_t *a);
/* Appends a module image, copying `size` bytes of `data` and the name/function tables;
 * returns its index. */
int32_t kiln_executable_desc_add_image(kiln_executable_desc_t *d, const void *data, size_t size,
                                       const char *const *names, void *const *functions,
                                       size_t num_functions);
/* Records the objects image `image` (a host image of n functions) was linked from: `num`
 * objects (symbols, data, sizes copied) and, per function, the index of its object. */
void kiln_executable_desc_set_image_objects(kiln_executable_desc_t *d, int32_t image, int32_t num,
                                            const char *const *symbols, const void *const *data,
                                            const size_t *sizes, const int32_t *function_object);
/* Takes ownership of `p` (a kiln_malloc'ed context a thunk borrows); returns it. */
void *kiln_executable_desc_own(kiln_executable_desc_t *d, void *p);
/* As kiln_executable_desc_own, released with `free_fn(p)` (e.g. a context holding a mutex). */
void *kiln_executable_desc_own_with(kiln_executable_desc_t *d, void *p, void (*free_fn)(void *));
/* Readable text: allocations, parameters, outputs, then the thunk sequence. */
void kiln_executable_desc_print(kiln_strbuf_t *b, const kiln_executable_desc_t *d);

typedef struct kiln_executable kiln_executable_t;

/* Loads `desc` (taken over) on `dev`. */
kiln_status kiln_executable_load(kiln_device_t *dev, kiln_executable_desc_t *desc,
                                 kiln_executable_t **out);
void kiln_executable_destroy(kiln_executable_t *e);
const kiln_executable_desc_t *kiln_executable_desc(const kiln_executable_t *e);

/* Runs once on `stream` and waits for it. `params[i]` is parameter i's device address
 * (`param_sizes[i]` bytes, which must match); `outputs` receives num_outputs buffers the
 * caller owns. */
kiln_status kiln_executable_run(kiln_executable_t *e, kiln_stream_t *stream,
                                const kiln_devptr_t *params, const uint64_t *param_sizes,
                                int32_t num_params, kiln_device_buffer_t **outputs);
/* As kiln_executable_run, telling the custom calls `run` (a run id and user data; NULL or a
 * run id of 0: a fresh run id from a process-wide count, one per execution). */
kiln_status kiln_executable_run_with(kiln_executable_t *e, kiln_stream_t *stream,
                                     const kiln_devptr_t *params, const uint64_t *param_sizes,
                                     int32_t num_params, kiln_device_buffer_t **outputs,
                                     const kiln_run_info_t *run);
/* As kiln_executable_run_with, as participant `who` of an SPMD run (runtime/spmd.h: its
 * collectives meet the other participants' in who->world; NULL: participant 0 alone). */
kiln_status kiln_executable_run_participant(kiln_executable_t *e, kiln_stream_t *stream,
                                            const kiln_devptr_t *params,
                                            const uint64_t *param_sizes, int32_t num_params,
                                            kiln_device_buffer_t **outputs,
                                            const kiln_run_info_t *run,
                                            const kiln_spmd_participant_t *who);

/* The per-thunk profile of this executable's runs (runtime/thunk.h, "profile"): every run
 * adds its thunks' times and its own wall time (kiln_thunk_profile_add_run, from the call
 * until the outputs are ready). On from load when kiln_runtime_options().profile is, or with
 * kiln_executable_set_profile; NULL when off (borrowed: valid until the profile is set again
 * or the executable destroyed). */
kiln_thunk_profile_t *kiln_executable_profile(const kiln_executable_t *e);
/* Starts a fresh profile in `mode` (dropping the one before) or turns it off
 * (KILN_THUNK_PROFILE_OFF). Not thread-safe: no run may be in flight. */
void kiln_executable_set_profile(kiln_executable_t *e, kiln_thunk_profile_mode_t mode);

#endif /* KILN_RUNTIME_EXECUTABLE_H_ */
