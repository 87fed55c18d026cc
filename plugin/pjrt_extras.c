/* Slots with a meaning on kiln's devices that came after the first landing of the plugin:
 * Client_DmaMap / DmaUnmap (a registration record per client: host memory needs no pinning
 * for kiln's copies, so the record is what makes a double map or a stray unmap an error, as
 * in XLA), Device_CreateAsyncTrackingEvent / AsyncTrackingEvent_Destroy (a described marker;
 * kiln's executes complete before they return, so there is nothing asynchronous to tie it
 * to), Device_PoisonExecution (no execution is ever pending: poisoned is false),
 * Buffer_Bitcast (a new buffer sharing the memory under another type and dims of the same
 * byte size) and TopologyDescription_Serialize / Fingerprint (the topology's platform,
 * version and device descriptions as text, and its FNV-1a hash).
 *
 * Thread-safety: every entry point is thread-safe (the DMA records are under one mutex). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "plugin/pjrt_objects.h"

#define ERR(code, ...) kiln_pjrt_error_make((code), __VA_ARGS__)

/* ---- DMA mappings --------------------------------------------------------------------- */

typedef struct dma_record {
  const PJRT_Client *client;
  uintptr_t begin, end;
} dma_record_t;

static struct {
  pthread_mutex_t mu;
  dma_record_t *records;
  size_t n, cap;
} g_dma = {.mu = PTHREAD_MUTEX_INITIALIZER};

void kiln_pjrt_dma_forget_client(const PJRT_Client *c) {
  kiln_mutex_lock(&g_dma.mu);
  size_t k = 0;
  for (size_t i = 0; i < g_dma.n; i++)
    if (g_dma.records[i].client != c) g_dma.records[k++] = g_dma.records[i];
  g_dma.n = k;
  if (!k) {
    kiln_free(g_dma.records);
    g_dma.records = NULL;
    g_dma.cap = 0;
  }
  kiln_mutex_unlock(&g_dma.mu);
}

#define FN_MAP "PJRT_Client_DmaMap"
#define FN_UNMAP "PJRT_Client_DmaUnmap"

static PJRT_Error *Client_DmaMap(PJRT_Client_DmaMap_Args *args) {
  KILN_PJRT_ARGS(FN_MAP, args, size);
  if (!args->client) return ERR(KILN_INVALID_ARGUMENT, FN_MAP ": client is NULL");
  if (!args->data || !args->size)
    return ERR(KILN_INVALID_ARGUMENT, FN_MAP ": data is NULL or size is 0");
  uintptr_t b = (uintptr_t)args->data, e = b + args->size;
  if (e < b) return ERR(KILN_INVALID_ARGUMENT, FN_MAP ": data + size overflows");
  kiln_mutex_lock(&g_dma.mu);
  for (size_t i = 0; i < g_dma.n; i++) {
    const dma_record_t *r = &g_dma.records[i];
    if (r->client == args->client && b < r->end && r->begin < e) {
      kiln_mutex_unlock(&g_dma.mu);
      return ERR(KILN_INVALID_ARGUMENT,
                 FN_MAP ": [%p, +%zu) overlaps the mapping at %p (%zu bytes): unmap it first",
                 args->data, args->size, (void *)r->begin, (size_t)(r->end - r->begin));
    }
  }
  if (g_dma.n == g_dma.cap) {
    g_dma.cap = g_dma.cap ? 2 * g_dma.cap : 8;
    g_dma.records = kiln_realloc(g_dma.records, g_dma.cap * sizeof(*g_dma.records));
  }
  g_dma.records[g_dma.n++] = (dma_record_t){args->client, b, e};
  kiln_mutex_unlock(&g_dma.mu);
  return NULL;
}

static PJRT_Error *Client_DmaUnmap(PJRT_Client_DmaUnmap_Args *args) {
  KILN_PJRT_ARGS(FN_UNMAP, args, data);
  if (!args->client) return ERR(KILN_INVALID_ARGUMENT, FN_UNMAP ": client is NULL");
  kiln_mutex_lock(&g_dma.mu);
  for (size_t i = 0; i < g_dma.n; i++) {
    if (g_dma.records[i].client == args->client &&
        g_dma.records[i].begin == (uintptr_t)args->data) {
      g_dma.records[i] = g_dma.records[--g_dma.n];
      kiln_mutex_unlock(&g_dma.mu);
      return NULL;
    }
  }
  kiln_mutex_unlock(&g_dma.mu);
  return ERR(KILN_INVALID_ARGUMENT, FN_UNMAP ": %p is not the start of a mapping of this client",
             args->data);
}

/* ---- async tracking events, poisoning --------------------------------------------------- */

struct PJRT_AsyncTrackingEvent {
  PJRT_Device *device;
  char *description;
};

static PJRT_Error *Device_CreateAsyncTrackingEvent(
    PJRT_Device_CreateAsyncTrackingEvent_Args *args) {
  const char *fn = "PJRT_Device_CreateAsyncTrackingEvent";
  KILN_PJRT_ARGS(fn, args, event);
  args->event = NULL;
  if (!args->device) return ERR(KILN_INVALID_ARGUMENT, "%s: device is NULL", fn);
  if (!args->description && args->description_size)
    return ERR(KILN_INVALID_ARGUMENT, "%s: description is NULL", fn);
  PJRT_AsyncTrackingEvent *e = kiln_calloc(1, sizeof(*e));
  e->device = args->device;
  e->description = kiln_malloc(args->description_size + 1);
  if (args->description_size) memcpy(e->description, args->description, args->description_size);
  e->description[args->description_size] = '\0';
  args->event = e;
  return NULL;
}

static PJRT_Error *AsyncTrackingEvent_Destroy(PJRT_AsyncTrackingEvent_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_AsyncTrackingEvent_Destroy", args, event);
  if (args->event) {
    kiln_free(args->event->description);
    kiln_free(args->event);
  }
  return NULL;
}

static PJRT_Error *Device_PoisonExecution(PJRT_Device_PoisonExecution_Args *args) {
  const char *fn = "PJRT_Device_PoisonExecution";
  KILN_PJRT_ARGS(fn, args, poisoned);
  if (!args->device) return ERR(KILN_INVALID_ARGUMENT, "%s: device is NULL", fn);
  if (args->error_code == PJRT_Error_Code_OK)
    return ERR(KILN_INVALID_ARGUMENT, "%s: error_code is OK (poisoning needs an error)", fn);
  if (!args->error_message && args->error_message_size)
    return ERR(KILN_INVALID_ARGUMENT, "%s: error_message is NULL", fn);
  /* Executes finish before PJRT_LoadedExecutable_Execute returns: launch_id names no
   * execution still pending on the device. */
  args->poisoned = false;
  return NULL;
}

/* ---- Buffer_Bitcast ---------------------------------------------------------------------- */

#define FN_BITCAST "PJRT_Buffer_Bitcast"

static bool layout_is_default_dense(const PJRT_Buffer_MemoryLayout *l, size_t rank) {
  if (!l) return true;
  if (l->type != PJRT_Buffer_MemoryLayout_Type_Tiled || l->tiled.num_tiles) return false;
  if (l->tiled.minor_to_major_size != rank || (rank && !l->tiled.minor_to_major)) return false;
  for (size_t i = 0; i < rank; i++)
    if (l->tiled.minor_to_major[i] != (int64_t)(rank - 1 - i)) return false;
  return true;
}

/* Types whose device storage is not one element per whole byte (kiln keeps them widened). */
static bool sub_byte(PJRT_Buffer_Type t) {
  kiln_elem_type_t e;
  return !kiln_pjrt_type_to_elem(t, &e) || (e != KILN_PRED && kiln_elem_type_bits(e) < 8);
}

static PJRT_Error *Buffer_Bitcast(PJRT_Buffer_Bitcast_Args *args) {
  KILN_PJRT_ARGS(FN_BITCAST, args, out_buffer);
  args->out_buffer = NULL;
  PJRT_Buffer *b = args->buffer;
  if (!b) return ERR(KILN_INVALID_ARGUMENT, FN_BITCAST ": buffer is NULL");
  if (!args->dims && args->num_dims) return ERR(KILN_INVALID_ARGUMENT, FN_BITCAST ": dims is NULL");
  if (args->num_dims > 64)
    return ERR(KILN_INVALID_ARGUMENT, FN_BITCAST ": %zu dims (at most 64)", args->num_dims);
  kiln_elem_type_t et;
  size_t elem = kiln_pjrt_type_bytes(args->element_type);
  if (!kiln_pjrt_type_to_elem(args->element_type, &et) || !elem)
    return ERR(KILN_INVALID_ARGUMENT, FN_BITCAST ": element type %d is not one kiln has",
               (int)args->element_type);
  if (sub_byte(args->element_type) || sub_byte(b->type))
    return ERR(KILN_UNIMPLEMENTED, FN_BITCAST ": sub-byte element types (%s to %s) are not bitcast",
               kiln_pjrt_type_name(b->type), kiln_pjrt_type_name(args->element_type));
  uint64_t bytes = elem;
  for (size_t i = 0; i < args->num_dims; i++) {
    if (args->dims[i] < 0)
      return ERR(KILN_INVALID_ARGUMENT, FN_BITCAST ": dimension %zu is negative", i);
    bytes *= (uint64_t)args->dims[i];
  }
  if (!layout_is_default_dense(args->device_layout, args->num_dims) ||
      !kiln_pjrt_buffer_has_default_layout(b))
    return ERR(KILN_UNIMPLEMENTED,
               FN_BITCAST ": only the default dense row-major layout is bitcast (on both sides)");
  kiln_mutex_lock(&b->mu);
  kiln_pjrt_storage_t *st = b->deleted ? NULL : b->storage;
  uint64_t have = b->on_device_size;
  if (st && bytes == have) atomic_fetch_add(&st->refs, 1);
  kiln_mutex_unlock(&b->mu);
  if (!st)
    return ERR(KILN_FAILED_PRECONDITION, FN_BITCAST ": the buffer was deleted or donated%s",
               b->error ? " (an error buffer)" : "");
  if (bytes != have)
    return ERR(KILN_INVALID_ARGUMENT,
               FN_BITCAST ": the new shape holds %llu bytes, the buffer %llu: they must be equal",
               (unsigned long long)bytes, (unsigned long long)have);
  kiln_status s = kiln_pjrt_buffer_from_storage(b->device, st, args->element_type, args->dims,
                                                (int32_t)args->num_dims, &args->out_buffer);
  if (s) {
    kiln_pjrt_storage_unref(st);
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in " FN_BITCAST));
  }
  return NULL;
}

/* ---- topology serialization ------------------------------------------------------------- */

static void topology_text(const PJRT_TopologyDescription *t, kiln_strbuf_t *out) {
  kiln_strbuf_printf(out, "kiln-topology/1\nplatform %s\nversion %s\ndevices %d\n",
                     t->is_cuda ? "cuda" : "cpu", t->platform_version, (int)t->num_descriptions);
  for (int32_t i = 0; i < t->num_descriptions; i++) {
    const PJRT_DeviceDescription *d = t->descriptions[i];
    kiln_strbuf_printf(out, "device %d process %d kind %s\n", (int)d->id, (int)d->process_index,
                       d->kind ? d->kind : "");
  }
}

typedef struct serialized {
  kiln_strbuf_t text;
} serialized_t;

static void serialized_delete(PJRT_SerializedTopology *p) {
  serialized_t *s = (serialized_t *)p;
  if (!s) return;
  kiln_strbuf_free(&s->text);
  kiln_free(s);
}

static PJRT_Error *TopologyDescription_Serialize(PJRT_TopologyDescription_Serialize_Args *args) {
  const char *fn = "PJRT_TopologyDescription_Serialize";
  KILN_PJRT_ARGS(fn, args, serialized_topology_deleter);
  args->serialized_bytes = NULL;
  args->serialized_bytes_size = 0;
  args->serialized_topology = NULL;
  args->serialized_topology_deleter = NULL;
  if (!args->topology) return ERR(KILN_INVALID_ARGUMENT, "%s: topology is NULL", fn);
  serialized_t *s = kiln_calloc(1, sizeof(*s));
  topology_text(args->topology, &s->text);
  args->serialized_bytes = kiln_strbuf_cstr(&s->text);
  args->serialized_bytes_size = strlen(args->serialized_bytes);
  args->serialized_topology = (PJRT_SerializedTopology *)s;
  args->serialized_topology_deleter = serialized_delete;
  return NULL;
}

static PJRT_Error *TopologyDescription_Fingerprint(
    PJRT_TopologyDescription_Fingerprint_Args *args) {
  const char *fn = "PJRT_TopologyDescription_Fingerprint";
  KILN_PJRT_ARGS(fn, args, fingerprint);
  if (!args->topology) return ERR(KILN_INVALID_ARGUMENT, "%s: topology is NULL", fn);
  kiln_strbuf_t t = {0};
  topology_text(args->topology, &t);
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *p = kiln_strbuf_cstr(&t); *p; p++)
    h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
  kiln_strbuf_free(&t);
  args->fingerprint = h;
  return NULL;
}

void kiln_pjrt_fill_extras(PJRT_Api *api) {
  api->PJRT_Client_DmaMap = Client_DmaMap;
  api->PJRT_Client_DmaUnmap = Client_DmaUnmap;
  api->PJRT_Device_CreateAsyncTrackingEvent = Device_CreateAsyncTrackingEvent;
  api->PJRT_AsyncTrackingEvent_Destroy = AsyncTrackingEvent_Destroy;
  api->PJRT_Device_PoisonExecution = Device_PoisonExecution;
  api->PJRT_Buffer_Bitcast = Buffer_Bitcast;
  api->PJRT_TopologyDescription_Serialize = TopologyDescription_Serialize;
  api->PJRT_TopologyDescription_Fingerprint = TopologyDescription_Fingerprint;
}
