/* NCCL unique ids through the PJRT client's key-value store (pjrt_nccl.c).
 *
 * A CUDA client created with PJRT_Client_Create's kv_get / kv_put callbacks installs an id
 * exchange (runtime/cuda/nccl.h) over them while it lives: the process holding a group's rank
 * 0 puts its ncclUniqueId (128 bytes) under "kiln/nccl/<group key>", the others get it (120 s
 * timeout). A device id is local when it is one of the client's devices. */
#ifndef KILN_PLUGIN_PJRT_NCCL_H_
#define KILN_PLUGIN_PJRT_NCCL_H_

#include <stddef.h>

#include "plugin/pjrt_objects.h"
#include "runtime/cuda/nccl.h"

#define KILN_PJRT_KV_TIMEOUT_MS 120000

/* kv_put of `value` under `key`; FAILED_PRECONDITION without callbacks; the callback's error
 * as a status naming the key. */
kiln_status kiln_pjrt_kv_put(PJRT_Client *c, const char *key, const void *value, size_t size);
/* kv_get of `key` into value[size]: a value of another size is DATA_LOSS naming both. */
kiln_status kiln_pjrt_kv_get(PJRT_Client *c, const char *key, int timeout_ms, void *value,
                             size_t size);

/* The exchange over `c`'s callbacks (borrowing `c`). */
void kiln_pjrt_nccl_exchange(PJRT_Client *c, kiln_nccl_id_exchange_t *out);
/* Installs it when `c` is a CUDA client with both callbacks; uninstall drops it again if `c`
 * installed the current one. */
void kiln_pjrt_nccl_install(PJRT_Client *c);
void kiln_pjrt_nccl_uninstall(PJRT_Client *c);

#endif /* KILN_PLUGIN_PJRT_NCCL_H_ */
