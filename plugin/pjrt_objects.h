/* The plugin's objects behind PJRT's opaque handles: client, devices and their descriptions,
 * memories, buffers, events. Executables are in pjrt_executable.h.
 *
 * Ownership: a client owns its devices, descriptions and memories (borrowed pointers live as
 * long as the client). Buffers, events and executables belong to the caller until their
 * *_Destroy; destroying a client with live buffers is the caller's error (PJRT's rule), but
 * kiln never touches freed memory because of it: buffers keep no pointer into a destroyed
 * client they would follow on Destroy.
 *
 * Thread-safety: every object is thread-safe unless a comment says otherwise. */
#ifndef KILN_PLUGIN_PJRT_OBJECTS_H_
#define KILN_PLUGIN_PJRT_OBJECTS_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "kiln/pjrt_c_api.h"
#include "plugin/pjrt_internal.h"
#include "runtime/buffer.h"
#include "runtime/device.h"

/* Client options, from PJRT_Client_Create's named values (and the environment where a value
 * is not given). */
typedef struct kiln_pjrt_client_options {
  char platform[16];        /* "cpu", "cuda" or "auto" (default: $KILN_PLATFORM, else auto) */
  int32_t num_host_devices; /* "num_devices"/"num_host_devices"; default $KILN_HOST_DEVICES or 1 */
  char *cache_dir;          /* "cache_dir"; default $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln,
                               else ~/.cache/kiln; "" disables the disk cache */
  char *dump_dir;           /* "dump_dir"; default $KILN_DUMP_TO */
  bool command_buffers;     /* "command_buffers"; default on */
  char *ffi_libraries;      /* "ffi_libraries": specs as KILN_FFI_HANDLERS takes them */
} kiln_pjrt_client_options_t;

typedef struct kiln_pjrt_compile_cache kiln_pjrt_compile_cache_t; /* pjrt_executable.h */

struct PJRT_DeviceDescription {
  int32_t id;
  int32_t process_index;
  const char *kind;          /* "cpu" or the GPU's name */
  char *debug_string;
  char *to_string;
  PJRT_NamedValue *attributes;
  size_t num_attributes;
};

typedef struct kiln_pjrt_memory {
  PJRT_Memory base; /* vtable: the memory function table (0.105) */
  int32_t id;
  int32_t kind_id;
  const char *kind; /* "device" or "pinned_host" */
  char *debug_string;
  char *to_string;
  PJRT_Device *device;
  pthread_mutex_t mu; /* user data */
  struct kiln_pjrt_user_data *user_data;
} kiln_pjrt_memory_t;

struct PJRT_Device {
  PJRT_DeviceDescription desc;
  PJRT_Client *client;
  kiln_device_t *kdev; /* the runtime device (owned by the client) */
  int32_t local_hardware_id;
  kiln_pjrt_memory_t *memories[2]; /* [0] "device" (default), [1] "pinned_host" */
  int32_t num_memories;
  /* Streams for executes and transfers, reused (kiln_pjrt_device_stream_acquire). */
  pthread_mutex_t stream_mu;
  kiln_stream_t **free_streams;
  int32_t num_free_streams, cap_free_streams;
  /* Memory statistics (bytes of buffers alive on the device). */
  _Atomic int64_t bytes_in_use, peak_bytes_in_use, num_allocs;
};

struct PJRT_Client {
  kiln_pjrt_client_options_t options;
  bool is_cuda; /* platform "cuda", else "cpu" */
  char platform_version[64];
  int32_t num_devices;
  PJRT_Device **devices;       /* all, addressable, in id order */
  int32_t num_memories;
  PJRT_Memory **memories;      /* every device's memories */
  kiln_device_t **kdevices;    /* runtime devices, owned */
  int32_t num_kdevices;
  kiln_pjrt_compile_cache_t *compile_cache; /* pjrt_executable.h; created by Create */
  /* Key-value store callbacks of PJRT_Client_Create, kept for multi-process use. */
  void *kv_get, *kv_get_user_arg, *kv_put, *kv_put_user_arg, *kv_try_get, *kv_try_get_user_arg;
};

/* A stream of `dev` for one execute or transfer; give it back with release (which keeps it
 * for the next caller). */
kiln_status kiln_pjrt_device_stream_acquire(PJRT_Device *dev, kiln_stream_t **out);
void kiln_pjrt_device_stream_release(PJRT_Device *dev, kiln_stream_t *s);

/* Events. An event is ready once, with OK or an error; callbacks registered with OnReady run
 * on a kiln thread after it is ready, never under a kiln lock. */
struct PJRT_Event {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool ready;
  kiln_status error; /* owned */
  struct kiln_pjrt_event_callback *callbacks;
  bool user_created; /* PJRT_Event_Create: completed by PJRT_Event_Set */
};

PJRT_Event *kiln_pjrt_event_create(void);
/* Completes `e` with `error` (taken over; NULL for OK) and schedules its callbacks. */
void kiln_pjrt_event_complete(PJRT_Event *e, kiln_status error);
/* An event that is already complete. */
PJRT_Event *kiln_pjrt_event_ready(kiln_status error);

/* Device memory shared by buffers (a buffer, its donated successor, external references). */
typedef struct kiln_pjrt_storage {
  _Atomic int32_t refs;
  kiln_device_buffer_t *buf; /* owned */
  PJRT_Device *device;
} kiln_pjrt_storage_t;

struct PJRT_Buffer {
  PJRT_Client *client;
  PJRT_Device *device;
  PJRT_Memory *memory;
  PJRT_Buffer_Type type;
  int32_t rank;
  int64_t *dims;
  int64_t *minor_to_major; /* the on-device layout (dense; default rank-1 ... 0) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  kiln_pjrt_storage_t *storage; /* NULL once deleted or donated */
  int32_t holds;                /* executes/copies reading it now; Delete waits for 0 */
  bool deleted;
  _Atomic int32_t external_refs;
};

/* A new buffer on `dev` that takes over `storage` (its data already in place), with a
 * dense default layout. */
kiln_status kiln_pjrt_buffer_create(PJRT_Device *dev, kiln_device_buffer_t *storage,
                                    PJRT_Buffer_Type type, const int64_t *dims, int32_t rank,
                                    PJRT_Buffer **out);
/* Holds `b`'s memory for reading by an execute or a copy: FAILED_PRECONDITION if it was
 * deleted or donated. Every successful acquire is paired with a release. */
kiln_status kiln_pjrt_buffer_acquire(PJRT_Buffer *b, kiln_devptr_t *ptr, uint64_t *size);
void kiln_pjrt_buffer_release(PJRT_Buffer *b);
/* Donation: takes `b`'s storage away (b reads as deleted from now on) and returns it in
 * *out for the execute's output to take over. FAILED_PRECONDITION as acquire, or when an
 * external reference is held. */
kiln_status kiln_pjrt_buffer_donate(PJRT_Buffer *b, kiln_pjrt_storage_t **out);
void kiln_pjrt_storage_unref(kiln_pjrt_storage_t *s);
/* A buffer over a storage (one reference taken over). */
kiln_status kiln_pjrt_buffer_from_storage(PJRT_Device *dev, kiln_pjrt_storage_t *storage,
                                          PJRT_Buffer_Type type, const int64_t *dims,
                                          int32_t rank, PJRT_Buffer **out);

#endif /* KILN_PLUGIN_PJRT_OBJECTS_H_ */
