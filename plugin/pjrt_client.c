/* The client (pjrt_objects.h): Create with named options, Destroy, platform, devices,
 * memories, device assignment, and the client's topology (its devices' descriptions). Buffer
 * creation slots of the client (BufferFromHostBuffer, CreateUninitializedBuffer,
 * CreateViewOfDeviceBuffer) are in pjrt_buffer.c; Compile and DeserializeAndLoad in pjrt_compile.c.
 *
 * Named options (PJRT_Client_Create): `platform` (string: "cpu", "cuda" or "auto"; default
 * $KILN_PLATFORM, else auto = cuda when a driver and a GPU exist, else cpu), `num_devices`
 * (int64, also spelled `num_host_devices` or, as XLA's CPU plugin does, `cpu_device_count`:
 * host devices, default $KILN_HOST_DEVICES or 1; ignored on cuda, where every GPU is a
 * device), `cache_dir`, `dump_dir`, `ffi_libraries` (strings), `command_buffers` (bool), `mpi`
 * (bool, default $KILN_MPI=1: one client across the processes of mpirun, below),
 * `collective_timeout_ms` (int64, 1 ms .. 1 day, default $KILN_COLLECTIVE_TIMEOUT_MS, else
 * 30 s: how long a participant of a multi-device execution waits for its peers at a
 * collective before the execution fails with DEADLINE_EXCEEDED naming the missing ones),
 * `async_execute` (string "auto", "always" or "never", or a bool; default $KILN_ASYNC_EXECUTE,
 * else auto: which executes return before their run ends, pjrt_executable.c),
 * `async_transfers` (bool, default $KILN_ASYNC_TRANSFERS, else true: a large
 * BufferFromHostBuffer that may copy later does so on the device's transfer thread,
 * pjrt_buffer.c). Unknown names are ignored, as XLA's clients do; a known name with the wrong type
 * is INVALID_ARGUMENT.
 *
 * Across processes (`mpi`): every process of MPI_COMM_WORLD creates its client with the same
 * number L of devices (host: num_devices; CUDA: its GPUs, and the key-value callbacks are
 * required, for NCCL's unique ids) (checked: the counts are exchanged through the key-value store
 * of PJRT_Client_Create when kv_get / kv_put are given, as JAX's distributed client passes
 * them, else over MPI); ProcessIndex is the MPI rank r, Devices lists all P x L devices (ids
 * global, process r's are r * L ... r * L + L - 1, the others' not addressable),
 * AddressableDevices this process's L. Executables of N participants split evenly (participant
 * p in process p / (N / P)) run this process's share; collectives across processes go over
 * MPI (runtime/mpi.h). MPI is finalized at exit.
 *
 * Thread-safety: thread-safe; a client is immutable after Create except for the reference
 * count and its devices' streams and statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "ffi/ffi_registry.h"
#include "plugin/pjrt_executable.h"
#include "plugin/pjrt_nccl.h"
#include "plugin/pjrt_objects.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/host/host_device.h"
#include "runtime/mpi.h"

#define KILN_PJRT_MAX_HOST_DEVICES 1024

/* ---- options ----------------------------------------------------------------------------- */

static bool name_is(const PJRT_NamedValue *v, const char *name) {
  size_t n = strlen(name);
  return v->name && v->name_size == n && !memcmp(v->name, name, n);
}

static const char *type_name(PJRT_NamedValue_Type t) {
  switch (t) {
    case PJRT_NamedValue_kString:
      return "string";
    case PJRT_NamedValue_kInt64:
      return "int64";
    case PJRT_NamedValue_kInt64List:
      return "int64 list";
    case PJRT_NamedValue_kFloat:
      return "float";
    case PJRT_NamedValue_kBool:
      return "bool";
  }
  return "unknown";
}

static kiln_status want_type(const PJRT_NamedValue *v, const char *name, PJRT_NamedValue_Type t) {
  if (v->type == t) return NULL;
  return KILN_ERR_INVALID("PJRT_Client_Create: option '%s' must be a %s, got a %s", name,
                          type_name(t), type_name(v->type));
}

/* `n` bytes of `text` as a string in a new block; NULL when out of host memory. */
static char *dup_text(const char *text, size_t n) {
  char *s = kiln_try_malloc(n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, text, n);
  s[n] = 0;
  return s;
}

#define OPTIONS_OOM() KILN_ERR_EXHAUSTED("PJRT_Client_Create: out of host memory for its options")

static void options_free(kiln_pjrt_client_options_t *o) {
  kiln_free(o->cache_dir);
  kiln_free(o->dump_dir);
  kiln_free(o->ffi_libraries);
  memset(o, 0, sizeof(*o));
}

static kiln_status parse_num_devices(const char *text, int32_t *out) {
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (!*text || *end || v < 1 || v > KILN_PJRT_MAX_HOST_DEVICES)
    return KILN_ERR_INVALID(
        "PJRT_Client_Create: $KILN_HOST_DEVICES='%s' is not a device count "
        "in 1..%d",
        text, KILN_PJRT_MAX_HOST_DEVICES);
  *out = (int32_t)v;
  return NULL;
}

/* The longest collective timeout a client takes: a day. */
#define MAX_COLLECTIVE_TIMEOUT_MS (24LL * 3600 * 1000)

static kiln_status parse_timeout(const char *text, int64_t *out) {
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (!*text || *end || v < 1 || v > MAX_COLLECTIVE_TIMEOUT_MS)
    return KILN_ERR_INVALID(
        "PJRT_Client_Create: $KILN_COLLECTIVE_TIMEOUT_MS='%s' is not a number of milliseconds "
        "in 1..%lld",
        text, (long long)MAX_COLLECTIVE_TIMEOUT_MS);
  *out = (int64_t)v;
  return NULL;
}

static kiln_status set_platform(kiln_pjrt_client_options_t *o, const char *p, size_t n,
                                const char *where) {
  static const struct {
    const char *name, *canon;
  } known[] = {{"cpu", "cpu"},  {"host", "cpu"},  {"cuda", "cuda"},
               {"gpu", "cuda"}, {"auto", "auto"}, {"", "auto"}};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (strlen(known[i].name) == n && !memcmp(known[i].name, p, n)) {
      snprintf(o->platform, sizeof(o->platform), "%s", known[i].canon);
      return NULL;
    }
  return KILN_ERR_INVALID(
      "PJRT_Client_Create: %s '%.*s' is not a platform kiln knows (cpu, "
      "cuda or auto)",
      where, (int)n, p);
}

/* An async_execute setting ("auto", "always", "never", "1", "0"; `where` names its source). */
static kiln_status set_async(kiln_pjrt_client_options_t *o, const char *p, size_t n,
                             const char *where) {
  static const struct {
    const char *name;
    int32_t mode;
  } known[] = {{"auto", KILN_PJRT_ASYNC_AUTO},
               {"1", KILN_PJRT_ASYNC_AUTO},
               {"always", KILN_PJRT_ASYNC_ALWAYS},
               {"never", KILN_PJRT_ASYNC_NEVER},
               {"0", KILN_PJRT_ASYNC_NEVER}};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (strlen(known[i].name) == n && !memcmp(known[i].name, p, n)) {
      o->async_execute = known[i].mode;
      return NULL;
    }
  return KILN_ERR_INVALID("PJRT_Client_Create: %s '%.*s' is not auto, always or never", where,
                          (int)n, p);
}

static kiln_status parse_options(const PJRT_NamedValue *opts, size_t n,
                                 kiln_pjrt_client_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->command_buffers = true;
  o->num_host_devices = 1;
  const char *env = getenv("KILN_MPI");
  o->mpi = env && *env && strcmp(env, "0") != 0;
  env = getenv("KILN_ASYNC_TRANSFERS");
  o->async_transfers = !env || !*env || strcmp(env, "0") != 0;
  env = getenv("KILN_PLATFORM");
  KILN_RETURN_IF_ERROR_PLAIN(
      set_platform(o, env ? env : "auto", env ? strlen(env) : 4, "$KILN_PLATFORM"));
  env = getenv("KILN_HOST_DEVICES");
  if (env && *env) KILN_RETURN_IF_ERROR_PLAIN(parse_num_devices(env, &o->num_host_devices));
  env = getenv("KILN_COLLECTIVE_TIMEOUT_MS");
  if (env && *env) KILN_RETURN_IF_ERROR_PLAIN(parse_timeout(env, &o->collective_timeout_ms));
  env = getenv("KILN_ASYNC_EXECUTE");
  if (env && *env)
    KILN_RETURN_IF_ERROR_PLAIN(set_async(o, env, strlen(env), "$KILN_ASYNC_EXECUTE"));
  if (n && !opts)
    return KILN_ERR_INVALID(
        "PJRT_Client_Create: create_options is NULL with "
        "num_options %zu",
        n);
  for (size_t i = 0; i < n; i++) {
    const PJRT_NamedValue *v = &opts[i];
    if (name_is(v, "platform")) {
      KILN_RETURN_IF_ERROR_PLAIN(want_type(v, "platform", PJRT_NamedValue_kString));
      KILN_RETURN_IF_ERROR_PLAIN(
          set_platform(o, v->string_value ? v->string_value : "", v->value_size, "platform"));
    } else if (name_is(v, "num_devices") || name_is(v, "num_host_devices") ||
               name_is(v, "cpu_device_count")) {
      KILN_RETURN_IF_ERROR_PLAIN(want_type(v, "num_devices", PJRT_NamedValue_kInt64));
      if (v->int64_value < 1 || v->int64_value > KILN_PJRT_MAX_HOST_DEVICES)
        return KILN_ERR_INVALID("PJRT_Client_Create: num_devices %lld is not in 1..%d",
                                (long long)v->int64_value, KILN_PJRT_MAX_HOST_DEVICES);
      o->num_host_devices = (int32_t)v->int64_value;
    } else if (name_is(v, "cache_dir") || name_is(v, "dump_dir") || name_is(v, "ffi_libraries")) {
      const char *nm = name_is(v, "cache_dir")  ? "cache_dir"
                       : name_is(v, "dump_dir") ? "dump_dir"
                                                : "ffi_libraries";
      KILN_RETURN_IF_ERROR_PLAIN(want_type(v, nm, PJRT_NamedValue_kString));
      if (v->value_size && !v->string_value)
        return KILN_ERR_INVALID("PJRT_Client_Create: option '%s' has a NULL string", nm);
      char **dst = nm[0] == 'c' ? &o->cache_dir : nm[0] == 'd' ? &o->dump_dir : &o->ffi_libraries;
      kiln_free(*dst);
      *dst = dup_text(v->string_value, v->value_size);
      if (!*dst) return OPTIONS_OOM();
    } else if (name_is(v, "command_buffers")) {
      KILN_RETURN_IF_ERROR_PLAIN(want_type(v, "command_buffers", PJRT_NamedValue_kBool));
      o->command_buffers = v->bool_value;
    } else if (name_is(v, "async_transfers")) {
      KILN_RETURN_IF_ERROR_PLAIN(want_type(v, "async_transfers", PJRT_NamedValue_kBool));
      o->async_transfers = v->bool_value;
    } else if (name_is(v, "mpi")) {
      KILN_RETURN_IF_ERROR_PLAIN(want_type(v, "mpi", PJRT_NamedValue_kBool));
      o->mpi = v->bool_value;
    } else if (name_is(v, "async_execute")) {
      if (v->type == PJRT_NamedValue_kBool) {
        o->async_execute = v->bool_value ? KILN_PJRT_ASYNC_AUTO : KILN_PJRT_ASYNC_NEVER;
      } else {
        KILN_RETURN_IF_ERROR_PLAIN(want_type(v, "async_execute", PJRT_NamedValue_kString));
        KILN_RETURN_IF_ERROR_PLAIN(
            set_async(o, v->string_value ? v->string_value : "", v->value_size, "async_execute"));
      }
    } else if (name_is(v, "collective_timeout_ms")) {
      KILN_RETURN_IF_ERROR_PLAIN(want_type(v, "collective_timeout_ms", PJRT_NamedValue_kInt64));
      if (v->int64_value < 1 || v->int64_value > MAX_COLLECTIVE_TIMEOUT_MS)
        return KILN_ERR_INVALID("PJRT_Client_Create: collective_timeout_ms %lld is not in 1..%lld",
                                (long long)v->int64_value, (long long)MAX_COLLECTIVE_TIMEOUT_MS);
      o->collective_timeout_ms = v->int64_value;
    }
    /* Anything else: ignored. */
  }
  if (!o->cache_dir) {
    const char *d = getenv("KILN_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char buf[4096];
    if (d)
      snprintf(buf, sizeof(buf), "%s", d);
    else if (xdg && *xdg)
      snprintf(buf, sizeof(buf), "%s/kiln", xdg);
    else if (home && *home)
      snprintf(buf, sizeof(buf), "%s/.cache/kiln", home);
    else
      buf[0] = 0;
    o->cache_dir = dup_text(buf, strlen(buf));
    if (!o->cache_dir) return OPTIONS_OOM();
  }
  if (!o->dump_dir) {
    const char *d = getenv("KILN_DUMP_TO");
    if (d && *d && !(o->dump_dir = dup_text(d, strlen(d)))) return OPTIONS_OOM();
  }
  return NULL;
}

/* ---- lifetime ---------------------------------------------------------------------------- */

/* Clients created and not yet destroyed (Client_Destroy), process-wide. */
static atomic_int g_open_clients;

static void client_free(PJRT_Client *c) {
  kiln_pjrt_nccl_uninstall(c);
  kiln_pjrt_dma_forget_client(c);
  if (c->compile_cache) kiln_pjrt_compile_cache_destroy(c->compile_cache);
  for (int32_t i = 0; i < c->num_devices; i++) {
    kiln_pjrt_device_fini(c->devices[i]);
    kiln_free(c->devices[i]);
  }
  for (int32_t i = 0; i < c->num_all_devices - c->num_devices && c->remote_devices; i++)
    kiln_pjrt_device_fini(&c->remote_devices[i]);
  kiln_free(c->remote_devices);
  kiln_free(c->all_devices);
  if (c->topology) kiln_free(c->topology->descriptions);
  kiln_free(c->topology);
  kiln_free(c->devices);
  kiln_free(c->memories);
  for (int32_t i = 0; i < c->num_kdevices; i++) kiln_device_destroy(c->kdevices[i]);
  kiln_free(c->kdevices);
  options_free(&c->options);
  pthread_mutex_destroy(&c->outside_mu);
  kiln_free(c);
}

void kiln_pjrt_client_retain(PJRT_Client *c) {
  if (c) atomic_fetch_add(&c->refs, 1);
}

void kiln_pjrt_client_release(PJRT_Client *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) client_free(c);
}

/* The number of GPUs when a driver and at least one GPU exist, else 0 (why in *why). */
static int cuda_device_count(kiln_status *why) {
  *why = NULL;
  const kiln_cuda_driver_t *drv = NULL;
  kiln_status s = kiln_cuda_driver_get(&drv);
  if (s) {
    *why = s;
    return 0;
  }
  int count = 0;
  CUresult r = drv->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count <= 0) {
    *why = kiln_status_make(KILN_UNAVAILABLE,
                            "the CUDA driver reports no GPU (cuDeviceGetCount: "
                            "%d, count %d)",
                            (int)r, count);
    return 0;
  }
  return count;
}

static kiln_status make_runtime_devices(PJRT_Client *c) {
  bool want_cuda = !strcmp(c->options.platform, "cuda");
  bool automatic = !strcmp(c->options.platform, "auto");
  if (want_cuda || automatic) {
    kiln_status why = NULL;
    int n = cuda_device_count(&why);
    if (n > 0) {
      c->kdevices = kiln_try_calloc((size_t)n, sizeof(kiln_device_t *));
      if (!c->kdevices) why = KILN_ERR_EXHAUSTED("out of host memory for %d GPUs", n);
      for (int i = 0; i < n && !why; i++) {
        kiln_status s = kiln_cuda_device_create(i, &c->kdevices[i]);
        if (s) {
          why = kiln_status_annotate(s, "while opening GPU %d", i);
          break;
        }
        c->num_kdevices++;
      }
      if (!why) {
        c->is_cuda = true;
        c->cublaslt = kiln_cublaslt_available();
        KILN_LOG_I("PJRT client: CUDA compiles for %s",
                   c->cublaslt ? "cuBLASLt (bf16/f16 gemms, fused epilogues)"
                               : "classic cuBLAS (no libcublasLt: f32/f64 gemms, no epilogues)");
        return NULL;
      }
      for (int32_t i = 0; i < c->num_kdevices; i++) kiln_device_destroy(c->kdevices[i]);
      kiln_free(c->kdevices);
      c->kdevices = NULL;
      c->num_kdevices = 0;
    }
    if (want_cuda)
      return kiln_status_annotate(why ? why : kiln_status_make(KILN_UNAVAILABLE, "no GPU"),
                                  "so platform 'cuda' is not available");
    KILN_LOG_I("PJRT client: no usable GPU (%s); using the host platform",
               kiln_status_message(why));
    kiln_status_free(why);
  }
  c->kdevices = kiln_try_calloc(1, sizeof(kiln_device_t *));
  if (!c->kdevices) return KILN_ERR_EXHAUSTED("PJRT_Client_Create: out of host memory");
  KILN_RETURN_IF_ERROR(kiln_host_device_create(0, &c->kdevices[0]),
                       "while creating the host device");
  c->num_kdevices = 1;
  c->is_cuda = false;
  c->cublaslt = false;
  return NULL;
}

/* ---- across processes -------------------------------------------------------------------- */

#define KILN_PJRT_JOIN_TIMEOUT_MS 120000

static void finalize_mpi_at_exit(void) {
  atexit(kiln_mpi_finalize);
}

/* Every process's device count: through the key-value store when the client has one (each
 * process puts its own under kiln/devices/<k>/<rank> and gets the others'; k counts the
 * clients across processes this process made, the same in every process as they create them
 * together, so a second client puts no key twice), else an all-gather over MPI.
 * counts[num_processes]. */
static kiln_status exchange_device_counts(PJRT_Client *c, int32_t mine, int32_t *counts) {
  static _Atomic int clients;
  int k = atomic_fetch_add(&clients, 1);
  int rank = c->process_index, size = c->num_processes;
  if (c->kv_get && c->kv_put) {
    char key[64];
    snprintf(key, sizeof(key), "kiln/devices/%d/%d", k, rank);
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_kv_put(c, key, &mine, sizeof(mine)));
    for (int r = 0; r < size; r++) {
      if (r == rank) {
        counts[r] = mine;
        continue;
      }
      snprintf(key, sizeof(key), "kiln/devices/%d/%d", k, r);
      KILN_RETURN_IF_ERROR_PLAIN(
          kiln_pjrt_kv_get(c, key, KILN_PJRT_JOIN_TIMEOUT_MS, &counts[r], sizeof(counts[r])));
    }
    return NULL;
  }
  int *members = kiln_calloc((size_t)size, sizeof(*members));
  for (int r = 0; r < size; r++) members[r] = r;
  kiln_mpi_group_t g = {.mpi = c->mpi,
                        .members = members,
                        .size = size,
                        .rank = rank,
                        .local_devices = 1,
                        .timeout_ms = KILN_PJRT_JOIN_TIMEOUT_MS};
  kiln_status s = kiln_mpi_all_gather(&g, "PJRT_Client_Create", &mine, counts, 1, sizeof(mine));
  kiln_free(members);
  return s;
}

/* The client option mpi: this process's place among the processes of MPI_COMM_WORLD. */
static kiln_status join_processes(PJRT_Client *c) {
  /* CUDA: every GPU of every process is a device; collectives run through NCCL, whose unique
   * ids go through the key-value store (pjrt_nccl.c), so the store must be there. */
  if (c->is_cuda && !(c->kv_get && c->kv_put))
    return kiln_status_make(KILN_UNIMPLEMENTED,
                            "PJRT_Client_Create: a CUDA client across processes (option mpi) "
                            "needs PJRT_Client_Create's kv_get / kv_put callbacks for NCCL's "
                            "unique ids (no MPI fallback for them)");
  int32_t mine = c->is_cuda ? c->num_kdevices : c->options.num_host_devices;
  kiln_mpi_t *m = NULL;
  KILN_RETURN_IF_ERROR(kiln_mpi_get(&m), "PJRT_Client_Create: the option mpi (or $KILN_MPI)");
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  kiln_once(&once, finalize_mpi_at_exit);
  c->mpi = m;
  c->process_index = kiln_mpi_rank(m);
  c->num_processes = kiln_mpi_size(m);
  int32_t *counts = kiln_calloc((size_t)c->num_processes, sizeof(*counts));
  kiln_status s = exchange_device_counts(c, mine, counts);
  for (int r = 0; r < c->num_processes && !s; r++)
    if (counts[r] != counts[0]) {
      kiln_strbuf_t b = {0};
      for (int k = 0; k < c->num_processes; k++)
        kiln_strbuf_printf(&b, "%sprocess %d: %d", k ? ", " : "", k, (int)counts[k]);
      s = KILN_ERR_INVALID(
          "PJRT_Client_Create: the processes hold different numbers of %s devices (%s); "
          "every process must have the same number",
          c->is_cuda ? "CUDA" : "host", kiln_strbuf_cstr(&b));
      kiln_strbuf_free(&b);
    }
  kiln_free(counts);
  if (s)
    return kiln_status_annotate(s, "while process %d of %d joined the others", c->process_index,
                                c->num_processes);
  c->first_device_id = c->process_index * mine;
  return NULL;
}

/* all_devices: this process's devices and, across processes, descriptions of the others'. */
static kiln_status make_all_devices(PJRT_Client *c) {
  int32_t n = c->num_devices * (c->num_processes > 0 ? c->num_processes : 1);
  c->all_devices = kiln_try_calloc((size_t)n, sizeof(PJRT_Device *));
  if (c->all_devices && n > c->num_devices)
    c->remote_devices = kiln_try_calloc((size_t)(n - c->num_devices), sizeof(PJRT_Device));
  if (!c->all_devices || (n > c->num_devices && !c->remote_devices))
    return KILN_ERR_EXHAUSTED("PJRT_Client_Create: out of host memory for %d devices", n);
  int32_t k = 0;
  for (int32_t id = 0; id < n; id++) {
    int32_t li = kiln_pjrt_client_local_index(c, id);
    if (li >= 0) {
      c->all_devices[id] = c->devices[li];
    } else {
      kiln_pjrt_device_init_remote(c, &c->remote_devices[k], id, id / c->num_devices,
                                   c->devices[0]->desc.kind);
      c->all_devices[id] = &c->remote_devices[k++];
    }
  }
  c->num_all_devices = n;
  return NULL;
}

static PJRT_Error *Client_Create(PJRT_Client_Create_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_Create", args, client);
  args->client = NULL;
  PJRT_Client *c = kiln_try_calloc(1, sizeof(*c));
  if (!c)
    return kiln_pjrt_error_from_status(
        KILN_ERR_EXHAUSTED("PJRT_Client_Create: out of host memory for the client"));
  atomic_store(&c->refs, 1);
  pthread_mutex_init(&c->outside_mu, NULL);
  kiln_status s = parse_options(args->create_options, args->num_options, &c->options);
  /* Handler libraries named by the client go into the process-wide registry the compiler
   * looks custom calls up in (as KILN_FFI_HANDLERS does); a bad spec fails Create. */
  if (!s && c->options.ffi_libraries && *c->options.ffi_libraries)
    s = kiln_status_annotate(
        kiln_ffi_registry_load_spec(kiln_ffi_registry_default(), c->options.ffi_libraries),
        "in the client option ffi_libraries");
  if (!s) s = make_runtime_devices(c);
  c->kv_get = (void *)args->kv_get_callback;
  c->kv_get_user_arg = args->kv_get_user_arg;
  c->kv_put = (void *)args->kv_put_callback;
  c->kv_put_user_arg = args->kv_put_user_arg;
  if (KILN_PJRT_HAS(args, kv_try_get_user_arg)) {
    c->kv_try_get = (void *)args->kv_try_get_callback;
    c->kv_try_get_user_arg = args->kv_try_get_user_arg;
  }
  c->num_processes = 1;
  if (!s && c->options.mpi) s = join_processes(c);
  if (s) {
    for (int32_t i = 0; i < c->num_kdevices; i++) kiln_device_destroy(c->kdevices[i]);
    options_free(&c->options);
    kiln_free(c->kdevices);
    kiln_free(c);
    return kiln_pjrt_error_from_status(s);
  }
  int32_t n = c->is_cuda ? c->num_kdevices : c->options.num_host_devices;
  c->devices = kiln_try_calloc((size_t)n, sizeof(PJRT_Device *));
  c->memories = kiln_try_calloc((size_t)n * 2, sizeof(PJRT_Memory *));
  if (!c->devices || !c->memories)
    s = KILN_ERR_EXHAUSTED("PJRT_Client_Create: out of host memory for %d devices", n);
  for (int32_t i = 0; i < n && !s; i++) {
    c->devices[i] = kiln_try_calloc(1, sizeof(PJRT_Device));
    if (!c->devices[i]) {
      s = KILN_ERR_EXHAUSTED("PJRT_Client_Create: out of host memory for device %d", i);
      break;
    }
    kiln_device_t *kd = c->is_cuda ? c->kdevices[i] : c->kdevices[0];
    s = kiln_pjrt_device_init(c, c->devices[i], i, kd, i);
    if (s) {
      kiln_free(c->devices[i]);
      break;
    }
    c->num_devices++;
    for (int32_t k = 0; k < c->devices[i]->num_memories; k++)
      c->memories[c->num_memories++] = c->devices[i]->memory_handles[k];
  }
  if (c->is_cuda) {
    const kiln_cuda_driver_t *drv = ((kiln_cuda_device_t *)c->kdevices[0])->drv;
    int v = drv ? drv->driver_version : 0;
    snprintf(c->platform_version, sizeof(c->platform_version), "kiln %s; CUDA driver %d.%d",
             KILN_PJRT_KILN_VERSION, v / 1000, (v % 1000) / 10);
  } else {
    snprintf(c->platform_version, sizeof(c->platform_version), "kiln %s; host",
             KILN_PJRT_KILN_VERSION);
  }
  if (!s) s = make_all_devices(c);
  if (!s) {
    c->topology = kiln_try_calloc(1, sizeof(*c->topology));
    if (c->topology)
      c->topology->descriptions = kiln_try_calloc(
          c->num_all_devices ? (size_t)c->num_all_devices : 1, sizeof(PJRT_DeviceDescription *));
    if (!c->topology || !c->topology->descriptions)
      s = KILN_ERR_EXHAUSTED("PJRT_Client_Create: out of host memory for its topology");
  }
  if (!s) {
    c->topology->client = c;
    c->topology->is_cuda = c->is_cuda;
    snprintf(c->topology->platform_version, sizeof(c->topology->platform_version), "%s",
             c->platform_version);
    for (int32_t i = 0; i < c->num_all_devices; i++)
      c->topology->descriptions[c->topology->num_descriptions++] = &c->all_devices[i]->desc;
  }
  if (!s) s = kiln_pjrt_compile_cache_create(&c->options, &c->compile_cache);
  if (s) {
    client_free(c);
    return kiln_pjrt_error_from_status(s);
  }
  kiln_pjrt_nccl_install(c); /* NCCL unique ids through kv_get / kv_put */
  atomic_fetch_add(&g_open_clients, 1);
  args->client = c;
  return NULL;
}

/* Waits until the devices' queued executes have run and no stream of any device is out
 * (executes and transfers in flight), then drops the caller's reference: the client's memory
 * goes when the last buffer's does. */
static PJRT_Error *Client_Destroy(PJRT_Client_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_Destroy", args, client);
  PJRT_Client *c = args->client;
  if (!c) return NULL;
  /* Queued executes run to their end first (they hold the caller's executables' code); a run
   * waiting for memory nobody will fill now (an alias buffer never fulfilled, a transfer never
   * made) fails with the filling, ended here. */
  atomic_store(&c->destroyed, true);
  kiln_pjrt_client_end_outside_fills(c);
  for (int32_t i = 0; i < c->num_devices; i++) kiln_pjrt_queue_stop(&c->devices[i]->queue);
  /* then the uploads (the queued runs may wait for them, or make them from an FFI handler) */
  for (int32_t i = 0; i < c->num_devices; i++) kiln_pjrt_queue_stop(&c->devices[i]->transfers);
  for (int32_t i = 0; i < c->num_devices; i++) {
    kiln_pjrt_device_wait_streams(c->devices[i]);
    kiln_pjrt_buffer_spare_close(c->devices[i]); /* its client reference dropped */
  }
  kiln_pjrt_client_release(c);
  /* The last client gone: the callback thread is joined (queued callbacks run first), so no
   * plugin thread outlives the clients (a process that exits next, or unloads the plugin). */
  if (atomic_fetch_sub(&g_open_clients, 1) == 1) kiln_pjrt_event_thread_stop();
  return NULL;
}

#define CLIENT(fn, a)                                                               \
  do {                                                                              \
    if (!(a)->client)                                                               \
      return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "%s: client is NULL", fn); \
  } while (0)

static PJRT_Error *Client_PlatformName(PJRT_Client_PlatformName_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_PlatformName", args, platform_name_size);
  CLIENT("PJRT_Client_PlatformName", args);
  args->platform_name = args->client->is_cuda ? "cuda" : "cpu";
  args->platform_name_size = strlen(args->platform_name);
  return NULL;
}

static PJRT_Error *Client_ProcessIndex(PJRT_Client_ProcessIndex_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_ProcessIndex", args, process_index);
  CLIENT("PJRT_Client_ProcessIndex", args);
  args->process_index = args->client->process_index;
  return NULL;
}

static PJRT_Error *Client_PlatformVersion(PJRT_Client_PlatformVersion_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_PlatformVersion", args, platform_version_size);
  CLIENT("PJRT_Client_PlatformVersion", args);
  args->platform_version = args->client->platform_version;
  args->platform_version_size = strlen(args->client->platform_version);
  return NULL;
}

static PJRT_Error *Client_Devices(PJRT_Client_Devices_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_Devices", args, num_devices);
  CLIENT("PJRT_Client_Devices", args);
  args->devices = args->client->all_devices;
  args->num_devices = (size_t)args->client->num_all_devices;
  return NULL;
}

static PJRT_Error *Client_AddressableDevices(PJRT_Client_AddressableDevices_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_AddressableDevices", args, num_addressable_devices);
  CLIENT("PJRT_Client_AddressableDevices", args);
  args->addressable_devices = args->client->devices;
  args->num_addressable_devices = (size_t)args->client->num_devices;
  return NULL;
}

static PJRT_Error *Client_LookupDevice(PJRT_Client_LookupDevice_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_LookupDevice", args, device);
  CLIENT("PJRT_Client_LookupDevice", args);
  PJRT_Client *c = args->client;
  if (args->id >= 0 && args->id < c->num_all_devices) {
    args->device = c->all_devices[args->id];
    return NULL;
  }
  return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                              "PJRT_Client_LookupDevice: no device has id %d (the client has "
                              "ids 0..%d)",
                              args->id, c->num_all_devices - 1);
}

static PJRT_Error *Client_LookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_LookupAddressableDevice", args, addressable_device);
  CLIENT("PJRT_Client_LookupAddressableDevice", args);
  PJRT_Client *c = args->client;
  for (int32_t i = 0; i < c->num_devices; i++)
    if (c->devices[i]->local_hardware_id == args->local_hardware_id) {
      args->addressable_device = c->devices[i];
      return NULL;
    }
  return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                              "PJRT_Client_LookupAddressableDevice: no addressable device has "
                              "local hardware id %d",
                              args->local_hardware_id);
}

static PJRT_Error *Client_AddressableMemories(PJRT_Client_AddressableMemories_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_AddressableMemories", args, num_addressable_memories);
  CLIENT("PJRT_Client_AddressableMemories", args);
  args->addressable_memories = args->client->memories;
  args->num_addressable_memories = (size_t)args->client->num_memories;
  return NULL;
}

/* XLA's default placement: replica r, partition p runs on device r + p * num_replicas; the
 * array is written replica-major (index r * num_partitions + p). */
static PJRT_Error *Client_DefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_DefaultDeviceAssignment", args, default_assignment);
  CLIENT("PJRT_Client_DefaultDeviceAssignment", args);
  int r = args->num_replicas, p = args->num_partitions;
  if (r < 1 || p < 1)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Client_DefaultDeviceAssignment: num_replicas %d and "
                                "num_partitions %d must be at least 1",
                                r, p);
  int64_t need = (int64_t)r * p;
  if (need > args->client->num_all_devices)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Client_DefaultDeviceAssignment: %d replicas x %d partitions "
                                "need %lld devices; the client has %d",
                                r, p, (long long)need, args->client->num_all_devices);
  if (!args->default_assignment || args->default_assignment_size < (size_t)need)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Client_DefaultDeviceAssignment: default_assignment holds "
                                "%zu ids (%s); %lld are needed",
                                args->default_assignment_size,
                                args->default_assignment ? "too few" : "it is NULL",
                                (long long)need);
  for (int ri = 0; ri < r; ri++)
    for (int pi = 0; pi < p; pi++)
      args->default_assignment[ri * p + pi] = args->client->all_devices[ri + pi * r]->desc.id;
  return NULL;
}

/* ---- topology (the client's; topologies without a client: pjrt_topology.c) -------------- */

static PJRT_Error *Client_TopologyDescription(PJRT_Client_TopologyDescription_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_TopologyDescription", args, topology);
  CLIENT("PJRT_Client_TopologyDescription", args);
  args->topology = args->client->topology;
  return NULL;
}

#define TOPOLOGY(fn, a)                                                               \
  do {                                                                                \
    if (!(a)->topology)                                                               \
      return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "%s: topology is NULL", fn); \
  } while (0)

/* A client's topology belongs to the client: destroying it does nothing (the client frees
 * it); one without a client is freed. */
static PJRT_Error *TopologyDescription_Destroy(PJRT_TopologyDescription_Destroy_Args *args) {
  KILN_PJRT_ARGS("PJRT_TopologyDescription_Destroy", args, topology);
  if (args->topology && !args->topology->client) kiln_pjrt_topology_free(args->topology);
  return NULL;
}

static PJRT_Error *TopologyDescription_PlatformName(
    PJRT_TopologyDescription_PlatformName_Args *args) {
  KILN_PJRT_ARGS("PJRT_TopologyDescription_PlatformName", args, platform_name_size);
  TOPOLOGY("PJRT_TopologyDescription_PlatformName", args);
  args->platform_name = args->topology->is_cuda ? "cuda" : "cpu";
  args->platform_name_size = strlen(args->platform_name);
  return NULL;
}

static PJRT_Error *TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args *args) {
  KILN_PJRT_ARGS("PJRT_TopologyDescription_PlatformVersion", args, platform_version_size);
  TOPOLOGY("PJRT_TopologyDescription_PlatformVersion", args);
  args->platform_version = args->topology->platform_version;
  args->platform_version_size = strlen(args->platform_version);
  return NULL;
}

static PJRT_Error *TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args *args) {
  KILN_PJRT_ARGS("PJRT_TopologyDescription_GetDeviceDescriptions", args, num_descriptions);
  TOPOLOGY("PJRT_TopologyDescription_GetDeviceDescriptions", args);
  args->descriptions = args->topology->descriptions;
  args->num_descriptions = (size_t)args->topology->num_descriptions;
  return NULL;
}

static PJRT_Error *TopologyDescription_Attributes(PJRT_TopologyDescription_Attributes_Args *args) {
  KILN_PJRT_ARGS("PJRT_TopologyDescription_Attributes", args, num_attributes);
  TOPOLOGY("PJRT_TopologyDescription_Attributes", args);
  args->attributes = NULL;
  args->num_attributes = 0;
  return NULL;
}

static PJRT_Error *TopologyDescription_GetMemorySpaceKindIds(
    PJRT_TopologyDescription_GetMemorySpaceKindIds_Args *args) {
  static const int kKindIds[2] = {0, 1}; /* "device", "pinned_host" */
  KILN_PJRT_ARGS("PJRT_TopologyDescription_GetMemorySpaceKindIds", args, num_memory_space_kind_ids);
  TOPOLOGY("PJRT_TopologyDescription_GetMemorySpaceKindIds", args);
  args->memory_space_kind_ids = kKindIds;
  args->num_memory_space_kind_ids = 2;
  return NULL;
}

void kiln_pjrt_fill_client(PJRT_Api *api) {
  api->PJRT_Client_TopologyDescription = Client_TopologyDescription;
  api->PJRT_TopologyDescription_Destroy = TopologyDescription_Destroy;
  api->PJRT_TopologyDescription_PlatformName = TopologyDescription_PlatformName;
  api->PJRT_TopologyDescription_PlatformVersion = TopologyDescription_PlatformVersion;
  api->PJRT_TopologyDescription_GetDeviceDescriptions = TopologyDescription_GetDeviceDescriptions;
  api->PJRT_TopologyDescription_Attributes = TopologyDescription_Attributes;
  api->PJRT_TopologyDescription_GetMemorySpaceKindIds = TopologyDescription_GetMemorySpaceKindIds;
  api->PJRT_Client_Create = Client_Create;
  api->PJRT_Client_Destroy = Client_Destroy;
  api->PJRT_Client_PlatformName = Client_PlatformName;
  api->PJRT_Client_ProcessIndex = Client_ProcessIndex;
  api->PJRT_Client_PlatformVersion = Client_PlatformVersion;
  api->PJRT_Client_Devices = Client_Devices;
  api->PJRT_Client_AddressableDevices = Client_AddressableDevices;
  api->PJRT_Client_LookupDevice = Client_LookupDevice;
  api->PJRT_Client_LookupAddressableDevice = Client_LookupAddressableDevice;
  api->PJRT_Client_AddressableMemories = Client_AddressableMemories;
  api->PJRT_Client_DefaultDeviceAssignment = Client_DefaultDeviceAssignment;
}
