/* What every file of the plugin shares: PJRT errors built from kiln statuses, the args-struct
 * checks every entry point makes, element types, and the functions each file uses to fill its
 * slots of the table.
 *
 * Args structs: an entry point reads only what the caller's `struct_size` covers. It needs
 * the members up to some `last_required` one (KILN_PJRT_ARGS); a NULL struct, or one whose
 * size does not reach that member, is INVALID_ARGUMENT naming the function. Members appended
 * after that (newer minor versions) are read only when KILN_PJRT_HAS says the caller's struct
 * has them; otherwise they take their documented default.
 *
 * Errors: a PJRT_Error is a kiln_pjrt_error_t (the 0.107 function table first, then the kiln
 * status it wraps). Codes are kiln's status codes, which are PJRT's (absl's) numbers.
 *
 * Thread-safety: everything here is thread-safe. */
#ifndef KILN_PLUGIN_PJRT_INTERNAL_H_
#define KILN_PLUGIN_PJRT_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/hlo/shape.h"
#include "kiln/pjrt_c_api.h"

typedef struct kiln_pjrt_error {
  PJRT_Error base; /* vtable: the error function table (0.107) */
  kiln_status status;
} kiln_pjrt_error_t;

/* Wraps `s` (taken over) in a PJRT_Error; NULL for NULL. */
PJRT_Error *kiln_pjrt_error_from_status(kiln_status s);
/* The status of one of kiln's own errors (which it frees); NULL for NULL. */
kiln_status kiln_pjrt_error_take_status(PJRT_Error *error);
PJRT_Error *kiln_pjrt_error_make(kiln_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* True when the caller's args struct reaches `member`. */
#define KILN_PJRT_HAS(args, member) \
  ((args)->struct_size >= offsetof(__typeof__(*(args)), member) + sizeof((args)->member))

/* Rejects a NULL args struct or one too small to hold the members up to `last_required`:
 * returns INVALID_ARGUMENT naming `fn` from the enclosing entry point. */
#define KILN_PJRT_ARGS(fn, args, last_required)                                              \
  do {                                                                                       \
    if (!(args)) return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "%s: args is NULL", fn); \
    if (!KILN_PJRT_HAS(args, last_required))                                                 \
      return kiln_pjrt_error_make(                                                           \
          KILN_INVALID_ARGUMENT,                                                             \
          "%s: args->struct_size is %zu, smaller than the %zu bytes up to member '%s' "      \
          "(a client built against PJRT 0.114 passes %s_STRUCT_SIZE)",                       \
          fn, (size_t)(args)->struct_size,                                                   \
          offsetof(__typeof__(*(args)), last_required) + sizeof((args)->last_required),      \
          #last_required, fn);                                                               \
  } while (0)

/* Element types: PJRT's numbering <-> kiln's. False for types kiln has no equivalent of
 * (PJRT_Buffer_Type_INVALID, S1/U1, F6*). */
bool kiln_pjrt_type_to_elem(PJRT_Buffer_Type t, kiln_elem_type_t *out);
bool kiln_pjrt_type_from_elem(kiln_elem_type_t e, PJRT_Buffer_Type *out);
/* Bytes per element as a PJRT host buffer stores it (sub-byte types one byte each, pred one
 * byte); 0 for types without data. */
size_t kiln_pjrt_type_bytes(PJRT_Buffer_Type t);
const char *kiln_pjrt_type_name(PJRT_Buffer_Type t);

/* Each file fills the slots it implements (api_table.c calls them after the defaults). */
void kiln_pjrt_fill_error(PJRT_Api *api);      /* pjrt_error.c */
void kiln_pjrt_fill_plugin(PJRT_Api *api);     /* pjrt_plugin.c: Initialize, Attributes */
void kiln_pjrt_fill_event(PJRT_Api *api);      /* pjrt_event.c */
void kiln_pjrt_fill_client(PJRT_Api *api);     /* pjrt_client.c */
void kiln_pjrt_fill_device(PJRT_Api *api);     /* pjrt_device.c: devices, descriptions, memories */
void kiln_pjrt_fill_buffer(PJRT_Api *api);     /* pjrt_buffer.c */
void kiln_pjrt_fill_compile(PJRT_Api *api);    /* pjrt_compile.c: Compile, Load, Deserialize */
void kiln_pjrt_fill_executable(PJRT_Api *api); /* pjrt_executable.c: executables, Execute */
/* pjrt_extras.c: DmaMap/DmaUnmap, async tracking events, PoisonExecution, Buffer_Bitcast,
 * topology Serialize/Fingerprint. */
void kiln_pjrt_fill_extras(PJRT_Api *api);
/* pjrt_topology.c: TopologyDescription_Create / _Deserialize (topologies without a client). */
void kiln_pjrt_fill_topology(PJRT_Api *api);
/* Frees a topology without a client (TopologyDescription_Destroy). */
void kiln_pjrt_topology_free(struct PJRT_TopologyDescription *t);
/* Drops the DMA mapping records of a client being freed (pjrt_client.c). */
void kiln_pjrt_dma_forget_client(const PJRT_Client *c);
/* The extension chain PJRT_Api.extension_start points at (FFI first); NULL until it lands. */
PJRT_Extension_Base *kiln_pjrt_extensions(void);

#endif /* KILN_PLUGIN_PJRT_INTERNAL_H_ */
