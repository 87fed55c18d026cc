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
#include "base/version.h"
#include "kiln/pjrt_c_api.h"
#include "plugin/pjrt_internal.h"
#include "plugin/pjrt_queue.h"
#include "runtime/buffer.h"
#include "runtime/device.h"

/* Client options, from PJRT_Client_Create's named values (and the environment where a value
 * is not given). */
typedef struct kiln_pjrt_client_options {
  char platform[16];        /* "cpu", "cuda" or "auto" (default: $KILN_PLATFORM, else auto) */
  int32_t num_host_devices; /* "num_devices" (or "num_host_devices", "cpu_device_count");
                               default $KILN_HOST_DEVICES or 1 */
  char *cache_dir;          /* "cache_dir"; default $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln,
                               else ~/.cache/kiln; "" disables the disk cache */
  char *dump_dir;           /* "dump_dir"; default $KILN_DUMP_TO */
  bool command_buffers;     /* "command_buffers"; default on */
  char *ffi_libraries;      /* "ffi_libraries": specs as KILN_FFI_HANDLERS takes them */
  bool mpi; /* "mpi": one client across the processes of mpirun (default $KILN_MPI=1) */
  /* "collective_timeout_ms": how long a multi-device execution's participant waits for its
   * peers at a collective (default $KILN_COLLECTIVE_TIMEOUT_MS, else 0:
   * KILN_SPMD_DEFAULT_TIMEOUT_MS) */
  int64_t collective_timeout_ms;
  /* "async_execute": which executes run on their device's queue and return before they end
   * (pjrt_executable.c): KILN_PJRT_ASYNC_AUTO (default; every one but a cheap run on an idle
   * device), _ALWAYS, or _NEVER (each Execute returns when its run has ended). String
   * "auto" / "always" / "never" (or a bool: true auto, false never); default
   * $KILN_ASYNC_EXECUTE (the same words, or 1 / 0). */
  int32_t async_execute;
  /* "async_transfers" (bool; default $KILN_ASYNC_TRANSFERS, else on): BufferFromHostBuffer
   * with kImmutableUntilTransferCompletes of KILN_PJRT_ASYNC_TRANSFER_BYTES or more copies on
   * the device's transfer thread and returns at once (host platform, executes not "never");
   * off, in the call. */
  bool async_transfers;
} kiln_pjrt_client_options_t;

/* Transfers from this size on are made asynchronously (async_transfers); smaller ones cost
 * less than handing them to another thread. XLA's CPU client draws its line at 100 KiB. */
#define KILN_PJRT_ASYNC_TRANSFER_BYTES 102400u

enum { KILN_PJRT_ASYNC_AUTO = 0, KILN_PJRT_ASYNC_ALWAYS = 1, KILN_PJRT_ASYNC_NEVER = 2 };

typedef struct kiln_pjrt_compile_cache kiln_pjrt_compile_cache_t; /* pjrt_executable.h */

/* What the plugin reports (PJRT_Plugin_Attributes, PlatformVersion): kiln's version is
 * base/version.h's; the StableHLO versions are the reader's own (KILN_VHLO_CURRENT and
 * KILN_VHLO_MINIMUM in compiler/frontend/mlir_bytecode_internal.h, read by pjrt_plugin.c),
 * so they change in that one place when the reader does. */
#define KILN_PJRT_KILN_VERSION KILN_VERSION_STRING
#define KILN_PJRT_XLA_VERSION 2
/* The program formats PJRT_Client_Compile accepts (comma-separated, as the attribute). */
#define KILN_PJRT_PROGRAM_FORMATS "mlir,hlo,hlo_with_config"

struct PJRT_DeviceDescription {
  int32_t id;
  int32_t process_index;
  const char *kind; /* "cpu" or the GPU's name */
  char *debug_string;
  char *to_string;
  PJRT_NamedValue *attributes;
  size_t num_attributes;
  char kind_buf[200];          /* what `kind` points at */
  char compute_capability[32]; /* CUDA: "9.0", an attribute's string */
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

/* Devices: on the host platform the client's N PJRT devices ("num_devices") share ONE
 * runtime host device (kdev): it is thread-safe and owns a worker pool sized to the machine,
 * so N devices do not make N pools. Each PJRT device has its own streams, memories and
 * statistics; a copy between two host devices is a device-to-device copy on that one
 * runtime device. On CUDA each GPU is its own runtime device. */
struct PJRT_Device {
  PJRT_DeviceDescription desc;
  PJRT_Client *client;
  kiln_device_t *kdev; /* the runtime device (owned by the client) */
  int32_t local_hardware_id;
  kiln_pjrt_memory_t *memories[2]; /* [0] "device" (default), [1] "pinned_host" */
  int32_t num_memories;
  PJRT_Memory *memory_handles[2]; /* the same, as the handles AddressableMemories returns */
  int32_t index;                  /* in client->devices */
  /* Streams for executes and transfers, reused (kiln_pjrt_device_stream_acquire): one free
   * stream in `stream_slot`, taken and given back with one compare-and-swap each (an execute
   * at a time needs no more), the others in `free_streams` under stream_mu. Bit 0 of the slot
   * is set while kiln_pjrt_device_wait_streams waits: releases then go through stream_mu. */
  _Atomic uintptr_t stream_slot;
  pthread_mutex_t stream_mu;
  kiln_stream_t **free_streams;
  int32_t num_free_streams, cap_free_streams;
  int32_t num_streams;    /* made (under stream_mu); the ones neither free nor in the slot are
                             out, and kiln_pjrt_device_wait_streams waits for them */
  int32_t stream_waiters; /* under stream_mu: threads in kiln_pjrt_device_wait_streams */
  pthread_cond_t stream_cv;
  /* Memory statistics (bytes of buffers alive on the device). */
  _Atomic int64_t bytes_in_use, peak_bytes_in_use, num_allocs;
  /* One destroyed execute output's allocation kept for the next (pjrt_buffer.c, spare
   * blocks): taken and given back with one compare-and-swap each; its mutex and condition
   * variable stay initialized and it keeps its storage's client reference for the next
   * output. PJRT_Client_Destroy frees it (and its reference) and closes the slot. */
  _Atomic(struct PJRT_Buffer *) spare_block;
  /* Asynchronous executes, in order (pjrt_queue.h; pjrt_executable.c says which go there). */
  kiln_pjrt_queue_t queue;
  /* Asynchronous uploads (pjrt_buffer.c, "asynchronous transfers"), in order, on a thread of
   * their own (started with the first): their work never waits for anything, so a run that
   * waits for an upload, or a caller waiting for room here, always sees it end. */
  kiln_pjrt_queue_t transfers;
};

struct PJRT_Client {
  kiln_pjrt_client_options_t options;
  bool is_cuda; /* platform "cuda", else "cpu" */
  /* CUDA: libcublasLt loads (kiln_cublaslt_available, probed when the client is created):
   * compiles set kiln_thunk_emit_options_t.cublaslt from it and cache keys include it. */
  bool cublaslt;
  char platform_version[64];
  int32_t num_devices;
  PJRT_Device **devices; /* addressable (this process's), in id order */
  /* Across processes (option mpi): num_processes processes of num_devices devices each; this
   * one is process_index (its MPI rank) and holds ids first_device_id ... + num_devices - 1.
   * all_devices: every process's devices in id order (id = index; the others' are
   * descriptions only: kdev NULL, not addressable, no memories). One process: 0, 1, 0, and
   * all_devices holds `devices`. */
  int32_t process_index, num_processes, first_device_id;
  PJRT_Device **all_devices;
  int32_t num_all_devices;
  PJRT_Device *remote_devices; /* the other processes' (num_all_devices - num_devices), owned */
  struct kiln_mpi *mpi;        /* the process's MPI (runtime/mpi.h); NULL: one process */
  int32_t num_memories;
  PJRT_Memory **memories;   /* every device's memories */
  kiln_device_t **kdevices; /* runtime devices, owned */
  int32_t num_kdevices;
  kiln_pjrt_compile_cache_t *compile_cache; /* pjrt_executable.h; created by Create,
                                               destroyed with the last reference (below),
                                               before the runtime devices */
  /* Key-value store callbacks of PJRT_Client_Create: NCCL unique ids (pjrt_nccl.h). */
  void *kv_get, *kv_get_user_arg, *kv_put, *kv_put_user_arg, *kv_try_get, *kv_try_get_user_arg;
  /* References: PJRT_Client_Destroy drops the caller's; every storage (device memory of a
   * buffer) and whatever calls kiln_pjrt_client_retain holds one. The runtime devices and
   * everything above are freed when the last goes, so a buffer or executable that outlives
   * its client (the caller's error) never touches freed memory. */
  _Atomic int32_t refs;
  /* PJRT_Client_Destroy was called: executes (the caller's error from then on) no longer
   * queue (the queues' threads are joined; a new one could end up dropping the last
   * reference, and freeing its own queue). */
  _Atomic bool destroyed;
  /* PJRT_Client_TopologyDescription: owned by the client (its descriptions, platform). */
  struct PJRT_TopologyDescription *topology;
  /* Fillings of buffers whose memory comes from outside the queues (an alias buffer's
   * fulfilment, a transfer manager's transfers, a donation's control dependency), listed
   * under `outside_mu` until they end: Client_Destroy ends the ones left with an error, so a
   * queued run waiting for one fails instead of holding up Destroy for ever
   * (kiln_pjrt_client_end_outside_fills, pjrt_buffer.c). */
  pthread_mutex_t outside_mu;
  struct kiln_pjrt_fill *outside;
};

/* A topology: its devices' descriptions, platform name and version. A client's (client set)
 * borrows its devices' descriptions and is freed with the client; one of
 * TopologyDescription_Create / _Deserialize (pjrt_topology.c; client NULL) owns its
 * descriptions and is freed by TopologyDescription_Destroy. */
struct PJRT_TopologyDescription {
  PJRT_Client *client;
  PJRT_DeviceDescription **descriptions; /* one per device */
  int32_t num_descriptions;
  bool is_cuda;                  /* platform "cuda", else "cpu" */
  char platform_version[64];     /* as the client's */
  PJRT_DeviceDescription *owned; /* client NULL: the descriptions, num_descriptions of them */
};

/* A description of device `index` of kind `kind` without a device ("cpu": the host's, with
 * its cores; else a GPU's name, without attributes); fini frees what init made. */
void kiln_pjrt_description_init(PJRT_DeviceDescription *x, int32_t index, const char *kind);
void kiln_pjrt_description_fini(PJRT_DeviceDescription *x);

/* Ends every filling listed in c->outside with a CANCELLED error naming Client_Destroy
 * (PJRT_Client_Destroy, before it waits for the queues). */
void kiln_pjrt_client_end_outside_fills(PJRT_Client *c);

/* Keeps the client's devices alive (see `refs`); release frees the client at the last. */
void kiln_pjrt_client_retain(PJRT_Client *c);
void kiln_pjrt_client_release(PJRT_Client *c);
/* The compile target in cache keys and fingerprints: "host", "cuda" (classic cuBLAS) or
 * "cuda+cublaslt", so no cache mixes programs compiled with and without cuBLASLt. */
static inline const char *kiln_pjrt_client_target_name(const PJRT_Client *c) {
  return !c->is_cuda ? "host" : c->cublaslt ? "cuda+cublaslt" : "cuda";
}

/* Builds device `index` of `c` over runtime device `kdev` (pjrt_device.c): description (id
 * c->first_device_id + index, process c->process_index), attributes, memories ("device" ids
 * 2*index, "pinned_host" 2*index+1). */
kiln_status kiln_pjrt_device_init(PJRT_Client *c, PJRT_Device *dev, int32_t index,
                                  kiln_device_t *kdev, int32_t local_hardware_id);
/* A device of another process of `c` (of `kind`, "cpu" or a GPU's name, as this process's):
 * its description only (no runtime device, no memories, index -1, local hardware id -1);
 * kiln_pjrt_device_fini frees it. */
void kiln_pjrt_device_init_remote(PJRT_Client *c, PJRT_Device *dev, int32_t id,
                                  int32_t process_index, const char *kind);
/* The index in c->devices of the device with global id `id`; -1 when it is another
 * process's (or no device). */
static inline int32_t kiln_pjrt_client_local_index(const PJRT_Client *c, int64_t id) {
  int64_t i = id - c->first_device_id;
  return i >= 0 && i < c->num_devices ? (int32_t)i : -1;
}
/* Frees what init made and the device's pooled streams (none may be out). */
void kiln_pjrt_device_fini(PJRT_Device *dev);

/* A stream of `dev` for one execute or transfer; give it back with release (which keeps it
 * for the next caller). */
kiln_status kiln_pjrt_device_stream_acquire(PJRT_Device *dev, kiln_stream_t **out);
void kiln_pjrt_device_stream_release(PJRT_Device *dev, kiln_stream_t *s);
/* Waits until every stream of `dev` is released (Client_Destroy: no execute or transfer of
 * the device is in flight). */
void kiln_pjrt_device_wait_streams(PJRT_Device *dev);

/* Events. An event is ready once, with OK or an error; callbacks registered with OnReady run
 * on a kiln thread after it is ready (also when registered on an event already ready),
 * never under a kiln lock.
 *
 * Lifetime: the caller owns an event it was handed and frees it with PJRT_Event_Destroy.
 * kiln may complete an event AFTER the caller destroyed it (Destroy of an event not yet
 * ready only marks it; kiln_pjrt_event_complete frees it then), so work that completes late
 * needs no reference of its own. (An event of PJRT_Event_Create is freed by Destroy at once:
 * only its caller sets it.) */
struct PJRT_Event {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool ready;
  kiln_status error; /* owned */
  struct kiln_pjrt_event_callback *callbacks;
  bool user_created; /* PJRT_Event_Create: completed by PJRT_Event_Set */
  bool destroyed;    /* PJRT_Event_Destroy came before completion */
  bool shared;       /* kiln_pjrt_event_ready(NULL)'s one event: never freed */
};

/* A new event, not ready; NULL when out of host memory. */
PJRT_Event *kiln_pjrt_event_create(void);
/* Joins the callback thread once its queue is empty (the last client's Client_Destroy calls
 * it; the next callback starts the thread again). A no-op on the callback thread itself. */
void kiln_pjrt_event_thread_stop(void);
/* Completes `e` with `error` (taken over; NULL for OK) and schedules its callbacks. */
void kiln_pjrt_event_complete(PJRT_Event *e, kiln_status error);
/* An event that is already complete. Without an error, every call returns the same static
 * event (PJRT_Event_Destroy leaves it): completed transfers and executes make no event. With
 * one and no memory for the event: a static event with RESOURCE_EXHAUSTED (error freed). */
PJRT_Event *kiln_pjrt_event_ready(kiln_status error);

/* Device memory shared by buffers (a buffer, its donated successor, external references).
 * The last unref frees the memory, takes it off the device's statistics and releases the
 * client reference the storage holds. */
typedef struct kiln_pjrt_storage {
  _Atomic int32_t refs;
  kiln_device_buffer_t *buf; /* owned */
  PJRT_Device *device;
  PJRT_Client *client;   /* one reference held */
  int64_t counted_bytes; /* what it added to device->bytes_in_use (0 for views) */
  void *pinned_host;     /* pinned_host memory of a CUDA device: freed with host_free */
  bool host_accessible;  /* buf->ptr is a host address (host platform, pinned_host) */
  int32_t memory_kind;   /* 0 "device", 1 "pinned_host": which of device->memories */
  /* CreateViewOfDeviceBuffer: memory owned by the caller, who is told when it is free. */
  void (*on_delete)(void *ptr, void *arg);
  void *on_delete_arg;
  /* AsyncHostToDeviceTransferManager: set while the caller still fills the memory; readers
   * of the buffer wait until it is filled (or failed). NULL otherwise. */
  struct kiln_pjrt_fill *fill;
  /* Client_CreateAliasBuffer: `buf` is NULL until FulfillAliasBuffer points it at the memory of
   * `target` (one reference held), and `fill` is pending until then. */
  struct kiln_pjrt_storage *target;
  /* An execute's output storage lives in its first buffer's allocation (`block`, saving an
   * allocation per output): that memory is freed when both are done, by whichever of the
   * buffer's Destroy and the storage's last unref comes second (`block_parts` counts them
   * down from 2; Destroy dropping the last reference itself frees it at once). NULL: the
   * storage is an allocation of its own. */
  void *block;
  _Atomic int32_t block_parts;
  /* CopyRawToHostFuture reads not done yet (their destination or the memory still to come):
   * donation of a buffer over this storage is refused meanwhile (an execute copies instead). */
  _Atomic int32_t raw_reads;
  /* The caller's memory under kImmutableZeroCopy, or a view of it (views take it from their
   * target): kiln only reads it (an execute donated a buffer over it takes the donation, so
   * the buffer reads as donated, but writes its output into a copy). */
  bool immutable;
} kiln_pjrt_storage_t;

#define KILN_PJRT_HOLD_WAITER 0x80000000u /* in PJRT_Buffer.holds: someone waits for 0 */

struct PJRT_Buffer {
  /* mu and cv first: a spare block (PJRT_Device.spare_block) is cleared from `client` on. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  PJRT_Client *client;
  PJRT_Device *device;
  PJRT_Memory *memory;
  PJRT_Buffer_Type type;
  int32_t rank;
  int64_t *dims;
  int64_t *minor_to_major; /* the on-device layout (dense; default rank-1 ... 0) */
  /* Holds (kiln_pjrt_buffer_acquire/_release) take no lock: a hold is an atomic increment
   * of `holds` followed by a check of `deleted`; Delete and donation set `deleted` under `mu`
   * and, while holds remain, wait on `cv` for them to end, and only then touch `storage`.
   * So a hold that saw `deleted` false reads `storage` safely. A waiter sets
   * KILN_PJRT_HOLD_WAITER in `holds`; the release of the last hold then takes `mu` BEFORE it
   * drops the hold (and wakes the waiters), so a waiter never returns (and Destroy never frees
   * the buffer) while a release still touches it. (mu and cv are at the top.) */
  kiln_pjrt_storage_t *storage; /* NULL once deleted or donated; written under mu */
  _Atomic uint32_t holds;       /* executes/copies reading it now, | KILN_PJRT_HOLD_WAITER */
  int32_t hold_waiters;         /* under mu: threads waiting for the holds to end */
  _Atomic bool deleted;         /* set under mu */
  _Atomic int32_t external_refs;
  kiln_pjrt_storage_t *external_storage; /* one reference while external_refs > 0 */
  kiln_pjrt_memory_t *kmemory;           /* `memory` as kiln's memory */
  size_t on_device_size;                 /* bytes of the data (storage may be larger) */
  bool default_layout;                   /* minor_to_major is rank-1 ... 0 */
  kiln_pjrt_storage_t *embedded;         /* a storage in this buffer's allocation (its block) */
  kiln_status error; /* Client_CreateErrorBuffer: what reading it gives (owned); no storage */
  bool spare_size;   /* allocated as a spare block (an embedded storage, rank <= 8) */
};

/* Frees a device's spare block and its client reference, and keeps blocks out from now on
 * (PJRT_Client_Destroy, before the caller's reference goes). */
void kiln_pjrt_buffer_spare_close(PJRT_Device *dev);
/* Frees a device's spare block, if any (kiln_pjrt_device_fini). */
void kiln_pjrt_buffer_spare_free(PJRT_Device *dev);

/* True when `b`'s device layout is the default dense row-major one (minor_to_major
 * rank-1 ... 0). BufferFromHostBuffer with a `device_layout` can make other dense
 * permutations: an execute that assumes the default must check (and refuse or relayout). */
static inline bool kiln_pjrt_buffer_has_default_layout(const PJRT_Buffer *b) {
  return b->default_layout;
}

/* A new buffer on `dev` that takes over `storage` (its data already in place), with a
 * dense default layout. `size`: the dense size of type x dims, known to the caller (an
 * executable's output leaf, whose type and dims its signature checked); INVALID_ARGUMENT
 * when `storage` holds less or the rank is out of range. */
kiln_status kiln_pjrt_buffer_create(PJRT_Device *dev, kiln_device_buffer_t *storage,
                                    PJRT_Buffer_Type type, const int64_t *dims, int32_t rank,
                                    uint64_t size, PJRT_Buffer **out);
/* Holds `b`'s memory for reading by an execute or a copy: FAILED_PRECONDITION if it was
 * deleted or donated. *ptr: its device address; *size: the bytes of its data (the shape's
 * dense size). Every successful acquire is paired with a release. While held,
 * Delete/Destroy of `b` wait. */
kiln_status kiln_pjrt_buffer_acquire(PJRT_Buffer *b, kiln_devptr_t *ptr, uint64_t *size);
void kiln_pjrt_buffer_release(PJRT_Buffer *b);
/* The same for an execute's argument, its usual case inline: true with *ptr when `b` is held
 * (not deleted, its memory there and filled), false with nothing held (then call acquire for
 * the error or the wait). */
static inline bool kiln_pjrt_buffer_try_acquire(PJRT_Buffer *b, kiln_devptr_t *ptr) {
  atomic_fetch_add(&b->holds, 1);
  kiln_pjrt_storage_t *st = atomic_load(&b->deleted) ? NULL : b->storage;
  if (st && !st->fill && st->buf) {
    *ptr = st->buf->ptr;
    return true;
  }
  kiln_pjrt_buffer_release(b);
  return false;
}
/* Whether `b`'s memory is still being filled (an execute's run, a copy, a transfer, an alias's
 * fulfilment, a control dependency): a snapshot, false for a deleted buffer. */
bool kiln_pjrt_buffer_is_pending(PJRT_Buffer *b);
/* kiln_pjrt_buffer_release with the usual case (no waiter on the last hold) inline. */
static inline void kiln_pjrt_buffer_release_inline(PJRT_Buffer *b) {
  uint32_t v = atomic_load(&b->holds);
  if (v != (KILN_PJRT_HOLD_WAITER | 1u) && atomic_compare_exchange_strong(&b->holds, &v, v - 1))
    return;
  kiln_pjrt_buffer_release(b);
}
/* Donation: takes `b`'s storage away (b reads as deleted from now on) and returns it in
 * *out for the execute's output to take over. FAILED_PRECONDITION as acquire, or when an
 * external reference is held. From then on `b` reads as donated (new holds fail); waits
 * until the holds taken before are released (so do not donate a buffer the calling thread
 * holds: that would wait forever). */
kiln_status kiln_pjrt_buffer_donate(PJRT_Buffer *b, kiln_pjrt_storage_t **out);
void kiln_pjrt_storage_unref(kiln_pjrt_storage_t *s);
/* Donation without waiting for the memory (an asynchronous execute waits on its queue):
 * kiln_pjrt_buffer_donate but `*out` may still be filled; read it through
 * kiln_pjrt_storage_wait. */
kiln_status kiln_pjrt_buffer_donate_pending(PJRT_Buffer *b, kiln_pjrt_storage_t **out);
/* A reference to `b`'s storage (FAILED_PRECONDITION when deleted or donated), whose memory may
 * still be filled: the memory stays while the reference does, whatever happens to `b`. */
kiln_status kiln_pjrt_buffer_ref_storage(PJRT_Buffer *b, kiln_pjrt_storage_t **out);
/* Waits until `st`'s memory is there (filled, fulfilled, computed): its address into *ptr
 * (when not NULL), or the error that stopped it. */
kiln_status kiln_pjrt_storage_wait(kiln_pjrt_storage_t *st, kiln_devptr_t *ptr);
/* Whether an execute donated `st` must not write its memory (it copies it instead): the
 * caller's immutable memory (kImmutableZeroCopy, or a view of it), or memory a
 * CopyRawToHostFuture still has to read (made on `st` or on the storage it views); false
 * while `st` is still being filled (ask again after kiln_pjrt_storage_wait). A snapshot. */
bool kiln_pjrt_storage_read_only(kiln_pjrt_storage_t *st);
/* Whether `st` is still to be filled from outside the device queues (an alias buffer, a
 * transfer manager's buffer, a control dependency): a snapshot. */
bool kiln_pjrt_storage_waits_outside(kiln_pjrt_storage_t *st);
/* An asynchronous execute's output: a buffer on `dev` (default layout, device memory) whose
 * memory comes when its *storage (a reference of the caller's) is completed. Readers wait. */
kiln_status kiln_pjrt_buffer_create_pending(PJRT_Device *dev, PJRT_Buffer_Type type,
                                            const int64_t *dims, int32_t rank, uint64_t size,
                                            PJRT_Buffer **out, kiln_pjrt_storage_t **storage);
/* Completes a pending storage and drops the caller's reference: with `own` (memory taken
 * over), a view of `target`'s memory (its reference taken over), or `error` (taken over; `own`
 * and `target` are then released). Waiting readers and ready events wake: at once, or, when
 * called from a hook on another storage's filling (a copy, a control dependency), on the same
 * thread once that filling has ended (so never wait for it there). A storage already ended
 * (Client_Destroy ended a control dependency's view) takes nothing: all is released. */
void kiln_pjrt_storage_complete(kiln_pjrt_storage_t *st, kiln_device_buffer_t *own,
                                kiln_pjrt_storage_t *target, kiln_status error);
/* A buffer over a storage (one reference taken over). */
kiln_status kiln_pjrt_buffer_from_storage(PJRT_Device *dev, kiln_pjrt_storage_t *storage,
                                          PJRT_Buffer_Type type, const int64_t *dims, int32_t rank,
                                          PJRT_Buffer **out);

#endif /* KILN_PLUGIN_PJRT_OBJECTS_H_ */
