/* The FFI handler registry: custom-call targets by (name, platform), with their handler bundle
 * (instantiate / prepare / initialize / execute / record), traits and the metadata the execute
 * handler reported at registration, plus the handler libraries it opened.
 *
 * Handlers arrive three ways:
 *  (a) XLA_FFI_Handler_Register through the API table (libraries that register themselves when
 *      loaded, XLA_FFI_REGISTER_HANDLER). It goes to the registry that is loading the library
 *      on this thread, else to the process-wide default registry;
 *  (b) a spec string (client option, `kiln-run --ffi=`, KILN_FFI_HANDLERS), see
 *      kiln_ffi_registry_load_spec;
 *  (c) kiln_ffi_registry_register from C (PJRT's FFI extension, tests).
 *
 * Every registration asks the execute handler for its metadata (a call frame carrying the
 * metadata extension; the handler reports its FFI version and traits without running) and
 * refuses handlers built for an FFI version kiln does not accept (0.1 to 0.4).
 *
 * Names: target names compare exactly (XLA keys its registry by the exact name); platform
 * names are canonicalized as XLA does (case-insensitive; "cpu" = Host, "gpu" = CUDA).
 *
 * Thread safety: every function may be called from any thread at any time, except
 * kiln_ffi_registry_destroy, which must not race with anything else on that registry.
 * Lookups return copies; the target name they point to lives until the registry is destroyed.
 * Handler libraries stay open until the registry is destroyed, then close in reverse order
 * of opening. A library's static initializers run once per process (dlopen of a library that
 * is already loaded returns it as is), so its self-registration lands in the registry that
 * opened it first. */
#ifndef KILN_FFI_FFI_REGISTRY_H_
#define KILN_FFI_FFI_REGISTRY_H_

#include <stddef.h>

#include "base/status.h"
#include "ffi/ffi_api.h"
#include "kiln/ffi_c_api.h"

typedef struct kiln_ffi_registry kiln_ffi_registry_t;

/* A registered handler, as returned by a lookup. */
typedef struct kiln_ffi_handler {
  const char *target; /* borrowed from the registry */
  kiln_ffi_platform_t platform;
  XLA_FFI_Handler_Bundle bundle;
  XLA_FFI_Handler_Traits traits; /* registration traits | metadata traits */
  int api_major, api_minor;      /* the FFI version the handler was built against */
  XLA_FFI_TypeId state_type_id;  /* from the metadata (0 if none) */
  /* A legacy custom-call handler (ffi_legacy.h; HLO api_version 1-3), or NULL. A target may
   * have both (as XLA keeps two registries): custom calls pick by api_version. Without a
   * typed handler the bundle is all NULL and api_major/minor 0. */
  void *legacy;
} kiln_ffi_handler_t;

kiln_status kiln_ffi_registry_create(kiln_ffi_registry_t **out);
/* Frees the entries and closes the libraries this registry opened, newest first. */
void kiln_ffi_registry_destroy(kiln_ffi_registry_t *r);

/* The process-wide registry XLA_FFI_Handler_Register fills outside a load. Created on first
 * use; kiln_ffi_registry_default_shutdown destroys it (the plugin's unload; tests). */
kiln_ffi_registry_t *kiln_ffi_registry_default(void);
void kiln_ffi_registry_default_shutdown(void);

/* Registers `bundle` (execute required) for target `name` on `platform` (a name as above).
 * Registering the same bundle again is a no-op; a different bundle for the same target and
 * platform is ALREADY_EXISTS. */
kiln_status kiln_ffi_registry_register(kiln_ffi_registry_t *r, const char *name, size_t name_len,
                                       const char *platform, size_t platform_len,
                                       const XLA_FFI_Handler_Bundle *bundle,
                                       XLA_FFI_Handler_Traits traits);

/* Registers a legacy handler (ffi_legacy.h) for `name` on `platform`, next to a typed handler
 * the target may have; the same function again is a no-op, another legacy function for the
 * target and platform is ALREADY_EXISTS. */
kiln_status kiln_ffi_registry_register_legacy(kiln_ffi_registry_t *r, const char *name,
                                              size_t name_len, const char *platform,
                                              size_t platform_len, void *fn);

/* Loads handlers from a spec: entries separated by ',':
 *   target[@platform]=library:symbol          execute handler `symbol` (platform: Host)
 *   target[@platform]=library:stage=sym/...   a bundle: stages instantiate, prepare,
 *                                             initialize, execute, record (execute required)
 *   target[@platform]=library:legacy=symbol   a legacy handler (api_version 1-3, see
 *                                             ffi_legacy.h); no metadata query
 *   library                                   a library that registers itself when loaded
 * The library part is everything before the last ':'. Errors: INVALID_ARGUMENT for a
 * malformed spec, UNAVAILABLE "cannot open FFI handler library" (with dlerror()), NOT_FOUND
 * "symbol ... not found", FAILED_PRECONDITION for an unaccepted FFI version. Entries before a
 * failing one stay registered. */
kiln_status kiln_ffi_registry_load_spec(kiln_ffi_registry_t *r, const char *spec);
/* kiln_ffi_registry_load_spec, with errors annotated "in <origin>" (e.g. the variable the
 * spec came from); NULL or "" loads nothing. */
kiln_status kiln_ffi_registry_load_named_spec(kiln_ffi_registry_t *r, const char *spec,
                                              const char *origin);
/* The spec custom calls load into the default registry before their first lookup
 * (compiler/thunks/custom_call_emitter.c), kept as a copy; the edges pass $KILN_FFI_HANDLERS
 * (origin "KILN_FFI_HANDLERS"). NULL or "": none. Thread-safe. */
void kiln_ffi_registry_set_default_spec(const char *spec, const char *origin);
/* Loads the default spec (above) into `r`; nothing when none is set. */
kiln_status kiln_ffi_registry_load_default_spec(kiln_ffi_registry_t *r);
/* Opens a library (cached by path); its static initializers may register handlers, which
 * then land in `r`. *out_handle is the dlopen handle (borrowed; may be NULL). */
kiln_status kiln_ffi_registry_open_library(kiln_ffi_registry_t *r, const char *path,
                                           void **out_handle);

/* The handler for `target` on `platform`; NOT_FOUND "no FFI handler for target ... on platform
 * ..." (naming the platforms it does have, if any). */
kiln_status kiln_ffi_registry_lookup(kiln_ffi_registry_t *r, const char *target,
                                     kiln_ffi_platform_t platform, kiln_ffi_handler_t *out);
size_t kiln_ffi_registry_size(kiln_ffi_registry_t *r);

/* Asks `execute` for its metadata (the call the registry makes at registration). */
kiln_status kiln_ffi_query_metadata(XLA_FFI_Handler *execute, XLA_FFI_Metadata *out);

/* The XLA_FFI_Handler_Register entry of the API table. */
XLA_FFI_Error *kiln_ffi_registry_register_from_api(XLA_FFI_Handler_Register_Args *args);

#endif /* KILN_FFI_FFI_REGISTRY_H_ */
