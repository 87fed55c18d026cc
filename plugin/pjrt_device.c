/* Devices, their descriptions and memories (pjrt_objects.h).
 *
 * Host devices: kind "cpu", ToString "CpuDevice(id=N)", DebugString "TFRT_CPU_N" (XLA's CPU
 * client's spelling, which tools grep for), attribute `cores` (int64: online processors).
 * CUDA devices: kind = the GPU's name, ToString "CudaDevice(id=N)", DebugString "cuda:N",
 * attributes `compute_capability` (string "9.0", XLA's spelling), `core_count` and
 * `sm_count` (int64: multiprocessors), `memory_size` (int64: bytes of device memory).
 *
 * Memories: every device has "device" (kind id 0, the default) and "pinned_host" (kind id
 * 1); memory ids are 2 * device index + kind id. Each memory starts with the 0.105 function
 * table, whose user data is a small locked list per memory.
 *
 * Memory statistics count the bytes of live buffers in the device's "device" memory:
 * bytes_in_use, its peak, and num_allocs (allocations made since the client was created);
 * the pool figures (bytes_reserved and pool_bytes with their peaks, largest_alloc_size,
 * largest_free_block_bytes) are the runtime device's caching allocator's
 * (kiln_device_memory_stats), which the host devices of a client share.
 *
 * Thread-safety: thread-safe. Everything but streams, statistics and user data is
 * immutable after the client's Create. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/host_pool.h"
#include "plugin/pjrt_objects.h"
#include "runtime/cuda/cuda_device.h"

/* ---- memories ---------------------------------------------------------------------------- */

typedef struct kiln_pjrt_user_data {
  const void *key;
  void *data;
  void (*dtor)(void *);
  struct kiln_pjrt_user_data *next;
} kiln_pjrt_user_data_t;

static void *memory_get_user_data(PJRT_Memory *memory, const void *key) {
  kiln_pjrt_memory_t *m = (kiln_pjrt_memory_t *)memory;
  if (!m) return NULL;
  void *out = NULL;
  kiln_mutex_lock(&m->mu);
  for (kiln_pjrt_user_data_t *u = m->user_data; u; u = u->next)
    if (u->key == key) {
      out = u->data;
      break;
    }
  kiln_mutex_unlock(&m->mu);
  return out;
}

/* Attaches `data` under `key`; data already under that key is replaced (its destructor runs,
 * outside the lock). */
static void memory_set_user_data(PJRT_Memory *memory, const void *key, void *data,
                                 void (*dtor)(void *)) {
  kiln_pjrt_memory_t *m = (kiln_pjrt_memory_t *)memory;
  if (!m) return;
  void *old = NULL;
  void (*old_dtor)(void *) = NULL;
  kiln_mutex_lock(&m->mu);
  kiln_pjrt_user_data_t *u = m->user_data;
  while (u && u->key != key) u = u->next;
  if (!u) {
    u = kiln_calloc(1, sizeof(*u));
    u->key = key;
    u->next = m->user_data;
    m->user_data = u;
  } else if (u->data != data) {
    old = u->data;
    old_dtor = u->dtor;
  }
  u->data = data;
  u->dtor = dtor;
  kiln_mutex_unlock(&m->mu);
  if (old && old_dtor) old_dtor(old);
}

static const PJRT_Memory_FunctionTable g_memory_table = {
    .struct_size = PJRT_Memory_FunctionTable_STRUCT_SIZE,
    .extension_start = NULL,
    .instance_struct_size = PJRT_Memory_STRUCT_SIZE,
    .get_user_data = memory_get_user_data,
    .set_user_data = memory_set_user_data,
};

/* The formatted text in a new block; `fallible`: NULL when refused (else it aborts on
 * exhaustion, as kiln_strdup does). */
static char *fmt_dup(bool fallible, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *fmt_dup(bool fallible, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (!fallible) return kiln_strdup(buf);
  size_t n = strlen(buf) + 1;
  char *p = kiln_try_malloc(n);
  if (p) memcpy(p, buf, n);
  return p;
}

/* NULL when out of host memory. */
static kiln_pjrt_memory_t *memory_new(PJRT_Device *dev, int32_t index, int32_t kind_id) {
  kiln_pjrt_memory_t *m = kiln_try_calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->base.vtable = &g_memory_table;
  m->id = 2 * index + kind_id;
  m->kind_id = kind_id;
  m->kind = kind_id == 0 ? "device" : "pinned_host";
  m->device = dev;
  m->debug_string =
      fmt_dup(true, "%s memory of %s (memory id %d)", m->kind, dev->desc.to_string, m->id);
  m->to_string = fmt_dup(true, "MEMORY_SPACE_%d(%s)", m->id, m->kind);
  if (!m->debug_string || !m->to_string) {
    kiln_free(m->debug_string);
    kiln_free(m->to_string);
    kiln_free(m);
    return NULL;
  }
  pthread_mutex_init(&m->mu, NULL);
  return m;
}

static void memory_free(kiln_pjrt_memory_t *m) {
  if (!m) return;
  kiln_pjrt_user_data_t *u = m->user_data;
  while (u) {
    kiln_pjrt_user_data_t *n = u->next;
    if (u->dtor && u->data) u->dtor(u->data);
    kiln_free(u);
    u = n;
  }
  pthread_mutex_destroy(&m->mu);
  kiln_free(m->debug_string);
  kiln_free(m->to_string);
  kiln_free(m);
}

/* ---- construction ------------------------------------------------------------------------ */

static PJRT_NamedValue attr_int(const char *name, int64_t v) {
  PJRT_NamedValue a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  a.name = name;
  a.name_size = strlen(name);
  a.type = PJRT_NamedValue_kInt64;
  a.int64_value = v;
  a.value_size = 1;
  return a;
}

static PJRT_NamedValue attr_str(const char *name, const char *v) {
  PJRT_NamedValue a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  a.name = name;
  a.name_size = strlen(name);
  a.type = PJRT_NamedValue_kString;
  a.string_value = v;
  a.value_size = strlen(v);
  return a;
}

static bool description_init(PJRT_DeviceDescription *x, int32_t index, const char *kind,
                             bool fallible);

kiln_status kiln_pjrt_device_init(PJRT_Client *c, PJRT_Device *dev, int32_t index,
                                  kiln_device_t *kdev, int32_t local_hardware_id) {
  memset(dev, 0, sizeof(*dev));
  dev->client = c;
  dev->kdev = kdev;
  dev->index = index;
  dev->local_hardware_id = local_hardware_id;
  /* Across processes (the client option mpi) ids are global: process r's devices are
   * r * L ... r * L + L - 1. */
  int32_t id = c->first_device_id + index;
  dev->desc.id = id;
  dev->desc.process_index = c->process_index;
  pthread_mutex_init(&dev->stream_mu, NULL);
  pthread_cond_init(&dev->stream_cv, NULL);
  kiln_pjrt_queue_init(&dev->queue);
  kiln_pjrt_queue_init(&dev->transfers);
  PJRT_DeviceDescription *x = &dev->desc;
  bool ok = true;
  if (kdev->kind == KILN_DEVICE_CUDA) {
    dev->desc.attributes = kiln_try_calloc(4, sizeof(PJRT_NamedValue));
    ok = dev->desc.attributes != NULL;
  }
  if (ok && kdev->kind == KILN_DEVICE_CUDA) {
    kiln_cuda_device_t *cd = (kiln_cuda_device_t *)kdev;
    size_t mem = 0;
    if (cd->drv && cd->drv->cuDeviceTotalMem) {
      kiln_status_free(kiln_cuda_device_activate(cd));
      if (cd->drv->cuDeviceTotalMem(&mem, cd->dev) != CUDA_SUCCESS) mem = 0;
    }
    snprintf(x->compute_capability, sizeof(x->compute_capability), "%d.%d", cd->cc_major,
             cd->cc_minor);
    /* The runtime names it "cuda:N <product name> (sm_XY, K SMs)"; the kind is the product
     * name, as XLA reports it. */
    const char *name = kdev->name;
    if (!strncmp(name, "cuda:", 5) && strchr(name, ' ')) name = strchr(name, ' ') + 1;
    snprintf(x->kind_buf, sizeof(x->kind_buf), "%s", name);
    char *paren = strstr(x->kind_buf, " (sm_");
    if (paren) *paren = 0;
    dev->desc.attributes[0] = attr_str("compute_capability", x->compute_capability);
    dev->desc.attributes[1] = attr_int("core_count", cd->sm_count);
    dev->desc.attributes[2] = attr_int("sm_count", cd->sm_count);
    dev->desc.attributes[3] = attr_int("memory_size", (int64_t)mem);
    dev->desc.num_attributes = 4;
    dev->desc.debug_string = fmt_dup(true, "cuda:%d", id);
    dev->desc.to_string = fmt_dup(true, "CudaDevice(id=%d)", id);
    ok = dev->desc.debug_string && dev->desc.to_string;
  } else if (ok) {
    ok = description_init(x, id, "cpu", true);
    x->process_index = c->process_index;
  }
  dev->desc.kind = x->kind_buf;
  for (int32_t k = 0; k < 2 && ok; k++) {
    dev->memories[k] = memory_new(dev, index, k);
    ok = dev->memories[k] != NULL;
    if (ok) dev->memory_handles[dev->num_memories++] = &dev->memories[k]->base;
  }
  if (!ok) {
    kiln_pjrt_device_fini(dev);
    return KILN_ERR_EXHAUSTED("out of host memory for the records of device %d", id);
  }
  return NULL;
}

void kiln_pjrt_device_init_remote(PJRT_Client *c, PJRT_Device *dev, int32_t id,
                                  int32_t process_index, const char *kind) {
  memset(dev, 0, sizeof(*dev));
  dev->client = c;
  dev->index = -1;
  dev->local_hardware_id = -1;
  pthread_mutex_init(&dev->stream_mu, NULL);
  pthread_cond_init(&dev->stream_cv, NULL);
  kiln_pjrt_queue_init(&dev->queue);
  kiln_pjrt_queue_init(&dev->transfers);
  kiln_pjrt_description_init(&dev->desc, id, kind);
  dev->desc.process_index = process_index;
}

static bool description_init(PJRT_DeviceDescription *x, int32_t index, const char *kind,
                             bool fallible) {
  memset(x, 0, sizeof(*x));
  x->id = index;
  x->attributes = fallible ? kiln_try_calloc(4, sizeof(PJRT_NamedValue))
                           : kiln_calloc(4, sizeof(PJRT_NamedValue));
  snprintf(x->kind_buf, sizeof(x->kind_buf), "%s", kind);
  x->kind = x->kind_buf;
  bool cpu = !strcmp(kind, "cpu");
  x->debug_string =
      cpu ? fmt_dup(fallible, "TFRT_CPU_%d", index) : fmt_dup(fallible, "cuda:%d", index);
  x->to_string = cpu ? fmt_dup(fallible, "CpuDevice(id=%d)", index)
                     : fmt_dup(fallible, "CudaDevice(id=%d)", index);
  if (!x->attributes || !x->debug_string || !x->to_string) {
    kiln_pjrt_description_fini(x);
    memset(x, 0, sizeof(*x));
    return false;
  }
  if (cpu) {
    x->attributes[0] = attr_int("cores", kiln_host_cpus());
    x->num_attributes = 1;
  }
  return true;
}

void kiln_pjrt_description_init(PJRT_DeviceDescription *x, int32_t index, const char *kind) {
  description_init(x, index, kind, false);
}

void kiln_pjrt_description_fini(PJRT_DeviceDescription *x) {
  kiln_free(x->attributes);
  kiln_free(x->debug_string);
  kiln_free(x->to_string);
}

void kiln_pjrt_device_fini(PJRT_Device *dev) {
  if (!dev) return;
  kiln_pjrt_buffer_spare_free(dev);
  for (int32_t i = 0; i < dev->num_free_streams; i++) kiln_stream_destroy(dev->free_streams[i]);
  kiln_stream_destroy((kiln_stream_t *)(atomic_exchange(&dev->stream_slot, 0) & ~(uintptr_t)1));
  kiln_free(dev->free_streams);
  dev->free_streams = NULL;
  dev->num_free_streams = dev->cap_free_streams = 0;
  for (int32_t k = 0; k < dev->num_memories; k++) memory_free(dev->memories[k]);
  kiln_pjrt_description_fini(&dev->desc);
  pthread_cond_destroy(&dev->stream_cv);
  pthread_mutex_destroy(&dev->stream_mu);
  kiln_pjrt_queue_fini(&dev->queue);
  kiln_pjrt_queue_fini(&dev->transfers);
}

/* ---- streams ----------------------------------------------------------------------------- */

kiln_status kiln_pjrt_device_stream_acquire(PJRT_Device *dev, kiln_stream_t **out) {
  if (!dev || !out) return KILN_ERR_INVALID("device stream acquire: NULL device or out");
  /* The fast path: the slot's stream (one compare-and-swap, no lock). */
  uintptr_t v = atomic_load(&dev->stream_slot);
  while (v && !(v & 1u))
    if (atomic_compare_exchange_weak(&dev->stream_slot, &v, 0)) {
      *out = (kiln_stream_t *)v;
      return NULL;
    }
  *out = NULL;
  kiln_mutex_lock(&dev->stream_mu);
  if (dev->num_free_streams > 0) {
    *out = dev->free_streams[--dev->num_free_streams];
    kiln_mutex_unlock(&dev->stream_mu);
    return NULL;
  }
  dev->num_streams++; /* counted before creating, so Client_Destroy waits for it */
  kiln_mutex_unlock(&dev->stream_mu);
  kiln_status s = kiln_stream_create(dev->kdev, out);
  if (s) {
    kiln_mutex_lock(&dev->stream_mu);
    dev->num_streams--;
    pthread_cond_broadcast(&dev->stream_cv);
    kiln_mutex_unlock(&dev->stream_mu);
    return kiln_status_annotate(s, "while making a stream on %s", dev->desc.to_string);
  }
  return NULL;
}

void kiln_pjrt_device_stream_release(PJRT_Device *dev, kiln_stream_t *s) {
  if (!dev || !s) return;
  _Static_assert(_Alignof(max_align_t) > 1, "bit 0 of a stream's address is free");
  /* Into the empty slot, unless a waiter marked it (then under the mutex, which wakes it). */
  uintptr_t empty = 0;
  if (atomic_compare_exchange_strong(&dev->stream_slot, &empty, (uintptr_t)s)) return;
  kiln_mutex_lock(&dev->stream_mu);
  if (dev->num_free_streams == dev->cap_free_streams) {
    int32_t cap = dev->cap_free_streams ? 2 * dev->cap_free_streams : 4;
    dev->free_streams = kiln_realloc(dev->free_streams, (size_t)cap * sizeof(kiln_stream_t *));
    dev->cap_free_streams = cap;
  }
  dev->free_streams[dev->num_free_streams++] = s;
  pthread_cond_broadcast(&dev->stream_cv);
  kiln_mutex_unlock(&dev->stream_mu);
}

void kiln_pjrt_device_wait_streams(PJRT_Device *dev) {
  kiln_mutex_lock(&dev->stream_mu);
  dev->stream_waiters++;
  atomic_fetch_or(&dev->stream_slot, 1u); /* releases now go through the mutex */
  while (dev->num_free_streams + ((atomic_load(&dev->stream_slot) & ~(uintptr_t)1) ? 1 : 0) <
         dev->num_streams)
    pthread_cond_wait(&dev->stream_cv, &dev->stream_mu);
  if (--dev->stream_waiters == 0) atomic_fetch_and(&dev->stream_slot, ~(uintptr_t)1);
  kiln_mutex_unlock(&dev->stream_mu);
}

/* ---- slots ------------------------------------------------------------------------------- */

#define NEED(fn, cond, what)                                                                     \
  do {                                                                                           \
    if (!(cond)) return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "%s: %s is NULL", fn, what); \
  } while (0)

static PJRT_Error *DeviceDescription_Id(PJRT_DeviceDescription_Id_Args *args) {
  KILN_PJRT_ARGS("PJRT_DeviceDescription_Id", args, id);
  NEED("PJRT_DeviceDescription_Id", args->device_description, "device_description");
  args->id = args->device_description->id;
  return NULL;
}

static PJRT_Error *DeviceDescription_ProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args *args) {
  KILN_PJRT_ARGS("PJRT_DeviceDescription_ProcessIndex", args, process_index);
  NEED("PJRT_DeviceDescription_ProcessIndex", args->device_description, "device_description");
  args->process_index = args->device_description->process_index;
  return NULL;
}

static PJRT_Error *DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args *args) {
  KILN_PJRT_ARGS("PJRT_DeviceDescription_Attributes", args, attributes);
  NEED("PJRT_DeviceDescription_Attributes", args->device_description, "device_description");
  args->attributes = args->device_description->attributes;
  args->num_attributes = args->device_description->num_attributes;
  return NULL;
}

static PJRT_Error *DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args *args) {
  KILN_PJRT_ARGS("PJRT_DeviceDescription_Kind", args, device_kind_size);
  NEED("PJRT_DeviceDescription_Kind", args->device_description, "device_description");
  args->device_kind = args->device_description->kind;
  args->device_kind_size = strlen(args->device_description->kind);
  return NULL;
}

static PJRT_Error *DeviceDescription_DebugString(PJRT_DeviceDescription_DebugString_Args *args) {
  KILN_PJRT_ARGS("PJRT_DeviceDescription_DebugString", args, debug_string_size);
  NEED("PJRT_DeviceDescription_DebugString", args->device_description, "device_description");
  args->debug_string = args->device_description->debug_string;
  args->debug_string_size = strlen(args->device_description->debug_string);
  return NULL;
}

static PJRT_Error *DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args *args) {
  KILN_PJRT_ARGS("PJRT_DeviceDescription_ToString", args, to_string_size);
  NEED("PJRT_DeviceDescription_ToString", args->device_description, "device_description");
  args->to_string = args->device_description->to_string;
  args->to_string_size = strlen(args->device_description->to_string);
  return NULL;
}

static PJRT_Error *Device_GetDescription(PJRT_Device_GetDescription_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_GetDescription", args, device_description);
  NEED("PJRT_Device_GetDescription", args->device, "device");
  args->device_description = &args->device->desc;
  return NULL;
}

static PJRT_Error *Device_IsAddressable(PJRT_Device_IsAddressable_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_IsAddressable", args, is_addressable);
  NEED("PJRT_Device_IsAddressable", args->device, "device");
  args->is_addressable = args->device->kdev != NULL; /* a device of another process: no */
  return NULL;
}

static PJRT_Error *Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_LocalHardwareId", args, local_hardware_id);
  NEED("PJRT_Device_LocalHardwareId", args->device, "device");
  args->local_hardware_id = args->device->local_hardware_id;
  return NULL;
}

static PJRT_Error *Device_AddressableMemories(PJRT_Device_AddressableMemories_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_AddressableMemories", args, num_memories);
  NEED("PJRT_Device_AddressableMemories", args->device, "device");
  args->memories = args->device->memory_handles;
  args->num_memories = (size_t)args->device->num_memories;
  return NULL;
}

static PJRT_Error *Device_DefaultMemory(PJRT_Device_DefaultMemory_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_DefaultMemory", args, memory);
  NEED("PJRT_Device_DefaultMemory", args->device, "device");
  if (!args->device->num_memories)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Device_DefaultMemory: device %d belongs to process %d, "
                                "not this one (%d)",
                                args->device->desc.id, args->device->desc.process_index,
                                args->device->client->process_index);
  args->memory = args->device->memory_handles[0];
  return NULL;
}

static PJRT_Error *Device_MemoryStats(PJRT_Device_MemoryStats_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_MemoryStats", args, num_allocs_is_set);
  NEED("PJRT_Device_MemoryStats", args->device, "device");
  PJRT_Device *d = args->device;
  /* Members the caller's struct has beyond num_allocs_is_set stay unset. */
  size_t keep = args->struct_size;
  size_t head = offsetof(PJRT_Device_MemoryStats_Args, bytes_in_use);
  if (keep > sizeof(*args)) keep = sizeof(*args);
  memset((char *)args + head, 0, keep - head);
  args->bytes_in_use = atomic_load(&d->bytes_in_use);
  args->peak_bytes_in_use = atomic_load(&d->peak_bytes_in_use);
  args->peak_bytes_in_use_is_set = true;
  args->num_allocs = atomic_load(&d->num_allocs);
  args->num_allocs_is_set = true;
  /* The pool of the runtime device's caching allocator (shared by the host devices). */
  kiln_device_allocator_stats_t st;
  memset(&st, 0, sizeof(st));
  if (d->kdev) kiln_device_memory_stats(d->kdev, &st); /* NULL: another process's device */
#define KILN_SET_STAT(field, value)                                         \
  if (keep >= offsetof(PJRT_Device_MemoryStats_Args, field##_is_set) + 1) { \
    args->field = (value);                                                  \
    args->field##_is_set = true;                                            \
  }
  KILN_SET_STAT(largest_alloc_size, st.largest_alloc_size);
  KILN_SET_STAT(bytes_reserved, st.pool_bytes);
  KILN_SET_STAT(peak_bytes_reserved, st.peak_pool_bytes);
  KILN_SET_STAT(largest_free_block_bytes, st.largest_free_block);
  KILN_SET_STAT(pool_bytes, st.pool_bytes);
  KILN_SET_STAT(peak_pool_bytes, st.peak_pool_bytes);
  if (st.bytes_limit) KILN_SET_STAT(bytes_limit, st.bytes_limit);
#undef KILN_SET_STAT
  return NULL;
}

static PJRT_Error *Device_ClearMemoryStats(PJRT_Device_ClearMemoryStats_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_ClearMemoryStats", args, device);
  NEED("PJRT_Device_ClearMemoryStats", args->device, "device");
  atomic_store(&args->device->peak_bytes_in_use, atomic_load(&args->device->bytes_in_use));
  return NULL;
}

static void device_attributes_deleter(PJRT_Device_Attributes *a) {
  (void)a;
}

/* The description's attributes (static for the client's life; the deleter does nothing). */
static PJRT_Error *Device_GetAttributes(PJRT_Device_GetAttributes_Args *args) {
  KILN_PJRT_ARGS("PJRT_Device_GetAttributes", args, attributes_deleter);
  NEED("PJRT_Device_GetAttributes", args->device, "device");
  args->attributes = args->device->desc.attributes;
  args->num_attributes = args->device->desc.num_attributes;
  args->device_attributes = NULL;
  args->attributes_deleter = device_attributes_deleter;
  return NULL;
}

#define MEM(args) ((kiln_pjrt_memory_t *)(args)->memory)

static PJRT_Error *Memory_Id(PJRT_Memory_Id_Args *args) {
  KILN_PJRT_ARGS("PJRT_Memory_Id", args, id);
  NEED("PJRT_Memory_Id", args->memory, "memory");
  args->id = MEM(args)->id;
  return NULL;
}

static PJRT_Error *Memory_Kind(PJRT_Memory_Kind_Args *args) {
  KILN_PJRT_ARGS("PJRT_Memory_Kind", args, kind_size);
  NEED("PJRT_Memory_Kind", args->memory, "memory");
  args->kind = MEM(args)->kind;
  args->kind_size = strlen(MEM(args)->kind);
  return NULL;
}

static PJRT_Error *Memory_Kind_Id(PJRT_Memory_Kind_Id_Args *args) {
  KILN_PJRT_ARGS("PJRT_Memory_Kind_Id", args, kind_id);
  NEED("PJRT_Memory_Kind_Id", args->memory, "memory");
  args->kind_id = MEM(args)->kind_id;
  return NULL;
}

static PJRT_Error *Memory_DebugString(PJRT_Memory_DebugString_Args *args) {
  KILN_PJRT_ARGS("PJRT_Memory_DebugString", args, debug_string_size);
  NEED("PJRT_Memory_DebugString", args->memory, "memory");
  args->debug_string = MEM(args)->debug_string;
  args->debug_string_size = strlen(MEM(args)->debug_string);
  return NULL;
}

static PJRT_Error *Memory_ToString(PJRT_Memory_ToString_Args *args) {
  KILN_PJRT_ARGS("PJRT_Memory_ToString", args, to_string_size);
  NEED("PJRT_Memory_ToString", args->memory, "memory");
  args->to_string = MEM(args)->to_string;
  args->to_string_size = strlen(MEM(args)->to_string);
  return NULL;
}

static PJRT_Error *Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args *args) {
  KILN_PJRT_ARGS("PJRT_Memory_AddressableByDevices", args, num_devices);
  NEED("PJRT_Memory_AddressableByDevices", args->memory, "memory");
  args->devices = &MEM(args)->device;
  args->num_devices = 1;
  return NULL;
}

void kiln_pjrt_fill_device(PJRT_Api *api) {
  api->PJRT_DeviceDescription_Id = DeviceDescription_Id;
  api->PJRT_DeviceDescription_ProcessIndex = DeviceDescription_ProcessIndex;
  api->PJRT_DeviceDescription_Attributes = DeviceDescription_Attributes;
  api->PJRT_DeviceDescription_Kind = DeviceDescription_Kind;
  api->PJRT_DeviceDescription_DebugString = DeviceDescription_DebugString;
  api->PJRT_DeviceDescription_ToString = DeviceDescription_ToString;
  api->PJRT_Device_GetDescription = Device_GetDescription;
  api->PJRT_Device_IsAddressable = Device_IsAddressable;
  api->PJRT_Device_LocalHardwareId = Device_LocalHardwareId;
  api->PJRT_Device_AddressableMemories = Device_AddressableMemories;
  api->PJRT_Device_DefaultMemory = Device_DefaultMemory;
  api->PJRT_Device_MemoryStats = Device_MemoryStats;
  api->PJRT_Device_ClearMemoryStats = Device_ClearMemoryStats;
  api->PJRT_Device_GetAttributes = Device_GetAttributes;
  api->PJRT_Memory_Id = Memory_Id;
  api->PJRT_Memory_Kind = Memory_Kind;
  api->PJRT_Memory_Kind_Id = Memory_Kind_Id;
  api->PJRT_Memory_DebugString = Memory_DebugString;
  api->PJRT_Memory_ToString = Memory_ToString;
  api->PJRT_Memory_AddressableByDevices = Memory_AddressableByDevices;
}
