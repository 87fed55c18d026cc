/* NCCL, loaded at run time, and the collective thunks on CUDA devices that use it.
 *
 * libnccl is dlopen'ed (the runtime options' nccl_library, the edges' $KILN_NCCL_LIBRARY,
 * names a library to use instead, else libnccl.so.2 then libnccl.so) and every entry point below is
 * looked up by name with dlsym. The types are kiln's own declarations with NCCL's ABI (numbering
 * from NCCL's public documentation), so the build needs no NCCL header. A missing library is
 * UNAVAILABLE naming libnccl.so.2 and how to get it; a library without an entry point is
 * UNAVAILABLE naming the symbol; NCCL older than 2.10 (no bf16, different version encoding) is
 * UNAVAILABLE saying so. ncclResult_t values map to kiln status codes with the result's name and
 * ncclGetErrorString's text.
 *
 * Collectives on CUDA devices (nccl_collective.c): a collective thunk executed in an SPMD world
 * on a CUDA device runs through NCCL instead of the in-process clique (collective_thunk.c calls
 * kiln_nccl_collective_execute). Each rank runs on its own thread with its own device, as the
 * PJRT plugin's executes do. One communicator per (group, device set): the group's devices in
 * rank order (their ids in the world's device assignment) key a process-wide cache whose
 * entries hold one communicator, one collective stream and two events per rank, created by the
 * rank's first collective (ncclCommInitRank with the entry's unique id, which the first member
 * to arrive fetched with ncclGetUniqueId, or an exchange installed with
 * kiln_nccl_set_id_exchange for ranks in other processes) and kept until the rank's device is
 * destroyed (kiln_nccl_device_release, called by the CUDA device's destroy): for the lifetime of
 * the client that owns the devices (ncclCommDestroy, or ncclCommAbort for a communicator a
 * collective failed on). A collective is ordered after the work on the execution's
 * stream by an event the collective stream waits for, issues one NCCL group on the collective
 * stream (every operand of a variadic collective, every row of a blocked layout, the send/recv
 * pairs of all-to-all and collective-permute), and the execution's stream waits for its done
 * event: the -start/-done pair of an async collective is those two events — a split pair's
 * START thunk records the done event and returns, its DONE thunk makes the execution's stream
 * wait for it, so the kernels between them run while NCCL moves the data. Layouts are
 * collective_thunk.h's; rows of [outer][size][block] buffers are one NCCL call each inside the
 * group. Operands whose bytes overlap their result's (other than an exact in-place all-reduce) are
 * staged through a per-rank scratch buffer on the collective stream. Reductions are NCCL's (its
 * order, not the host clique's rank order: floating-point sums may differ in the last bits); 16-bit
 * integers have no NCCL type and are UNIMPLEMENTED for reductions.
 *
 * Thread safety: kiln_nccl_get and the cache are thread-safe; a rank's communicator is used
 * under its entry's lock. */
#ifndef KILN_RUNTIME_CUDA_NCCL_H_
#define KILN_RUNTIME_CUDA_NCCL_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "runtime/collective_thunk.h"
#include "runtime/cuda/cuda_driver.h"

/* ---- NCCL's ABI ---------------------------------------------------------------------------- */

typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct ncclComm *ncclComm_t;

enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9, /* NCCL 2.10 and newer */
};

enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 };

#define KILN_NCCL_UNIQUE_ID_BYTES 128
typedef struct ncclUniqueId {
  char internal[KILN_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* The oldest NCCL kiln accepts (ncclGetVersion's code: major * 10000 + minor * 100 + patch). */
#define KILN_NCCL_MIN_VERSION 21000

/* KILN_NCCL_SYM(return type, name, (parameters)): the entry points kiln uses. */
#define KILN_NCCL_SYMBOLS(X)                                                                    \
  X(ncclResult_t, ncclGetVersion, (int *version))                                               \
  X(const char *, ncclGetErrorString, (ncclResult_t result))                                    \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id))                                         \
  X(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank)) \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                                           \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t comm))                                             \
  X(ncclResult_t, ncclGroupStart, (void))                                                       \
  X(ncclResult_t, ncclGroupEnd, (void))                                                         \
  X(ncclResult_t, ncclAllReduce,                                                                \
    (const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,              \
     ncclComm_t comm, CUstream s))                                                              \
  X(ncclResult_t, ncclAllGather,                                                                \
    (const void *send, void *recv, size_t send_count, ncclDataType_t t, ncclComm_t comm,        \
     CUstream s))                                                                               \
  X(ncclResult_t, ncclReduceScatter,                                                            \
    (const void *send, void *recv, size_t recv_count, ncclDataType_t t, ncclRedOp_t op,         \
     ncclComm_t comm, CUstream s))                                                              \
  X(ncclResult_t, ncclBroadcast,                                                                \
    (const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,   \
     CUstream s))                                                                               \
  X(ncclResult_t, ncclSend,                                                                     \
    (const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, CUstream s))  \
  X(ncclResult_t, ncclRecv,                                                                     \
    (void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, CUstream s))

typedef struct kiln_nccl {
  void *handle;   /* dlopen handle */
  char path[512]; /* the library loaded */
  int version;    /* ncclGetVersion */
#define KILN_NCCL_FIELD(ret, name, params) ret(*name) params;
  KILN_NCCL_SYMBOLS(KILN_NCCL_FIELD)
#undef KILN_NCCL_FIELD
} kiln_nccl_t;

/* Opens the first of `names` that dlopen accepts (NULL/0: the runtime options'
 * nccl_library, else libnccl.so.2 then libnccl.so), looks every entry point up and checks the
 * version. The caller owns *out (kiln_nccl_close). */
kiln_status kiln_nccl_open(const char *const *names, size_t num_names, kiln_nccl_t **out);
void kiln_nccl_close(kiln_nccl_t *n);

/* The process-wide NCCL, opened on first use and never unloaded; a failure is remembered and
 * returned again (as a fresh status). */
kiln_status kiln_nccl_get(const kiln_nccl_t **out);

/* "ncclInvalidArgument", or NULL for a value not in NCCL's table. */
const char *kiln_nccl_result_name(ncclResult_t r);
/* The kiln code for a result (UNKNOWN for values not in the table). */
kiln_status_code_t kiln_nccl_error_code(ncclResult_t r);
/* NULL for ncclSuccess, else "<what>: ncclX (n): <ncclGetErrorString when `n` is given>". */
kiln_status kiln_nccl_status_make(const kiln_nccl_t *n, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* NCCL's type for elements of `t` in a reduction; UNIMPLEMENTED for s16/u16 (NCCL has no
 * 16-bit integers). pred travels as uint8 (0/1: its min and max are and and or). */
kiln_status kiln_nccl_dtype(kiln_coll_dtype_t t, ncclDataType_t *out);
/* NCCL's reduction for `r`; INVALID_ARGUMENT for a value out of the enum. */
kiln_status kiln_nccl_redop(kiln_coll_reduction_t r, ncclRedOp_t *out);

/* ---- collectives on CUDA devices (nccl_collective.c) ------------------------------------- */

/* Runs collective `name` (description `d`, prepared) for participant `me` of `who`'s world on
 * p->device, a CUDA device (see above). UNAVAILABLE naming libnccl.so.2 when NCCL cannot be
 * loaded. Thread-safe: the ranks of a group call concurrently, one thread each. */
kiln_status kiln_nccl_collective_execute(const char *name, const kiln_coll_thunk_desc_t *d,
                                         const kiln_thunk_exec_params_t *p,
                                         const kiln_spmd_participant_t *who);

/* Destroys the communicators, collective streams and events the cache holds for `dev` (any
 * device; nothing when it holds none). The CUDA device's destroy calls it. Thread-safe, while
 * no collective of `dev` runs. */
void kiln_nccl_device_release(kiln_device_t *dev);

/* How ranks in other processes learn a group's unique id. `key` names the group (its device
 * ids in rank order) and is the same in every process; the process holding the group's rank 0
 * (is_local of its device id) fetches the id with ncclGetUniqueId and publishes it with `put`,
 * the others read it with `get` (blocking, with the store's own timeout). Without an exchange
 * every group's ranks must live in this process (the first member to arrive fetches the id). */
typedef struct kiln_nccl_id_exchange {
  kiln_status (*put)(void *ctx, const char *key, const ncclUniqueId *id);
  kiln_status (*get)(void *ctx, const char *key, ncclUniqueId *id);
  void *ctx;
  /* Whether the device with id `device_id` belongs to this process. */
  bool (*is_local)(void *ctx, int64_t device_id);
} kiln_nccl_id_exchange_t;

/* Installs `x` (copied; NULL: none) for groups created from now on. Thread-safe. */
void kiln_nccl_set_id_exchange(const kiln_nccl_id_exchange_t *x);
/* The exchange installed now into *out; false (and *out zeroed) when none. Thread-safe. */
bool kiln_nccl_get_id_exchange(kiln_nccl_id_exchange_t *out);

/* Statistics of the communicator cache, for tests and logs. */
typedef struct kiln_nccl_cache_stats {
  int groups;        /* entries (group, device set) alive */
  int comms;         /* communicators alive */
  int comms_created; /* since the process started */
  int ids_exchanged; /* unique ids put or got through an exchange */
} kiln_nccl_cache_stats_t;
void kiln_nccl_cache_stats(kiln_nccl_cache_stats_t *out);

#endif /* KILN_RUNTIME_CUDA_NCCL_H_ */
