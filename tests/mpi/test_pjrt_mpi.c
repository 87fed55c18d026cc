/* The PJRT plugin's client across the processes of mpirun (client option `mpi`), through
 * GetPjrtApi as a framework loads it (dlopen). Run as two processes by tests/mpi/mpirun2.sh;
 * skips (77) with the reason when not started by mpirun or without the corpus.
 *
 * - The client spans the processes: ProcessIndex is the MPI rank, Devices lists both
 *   processes' host devices (global ids, the other process's not addressable, no memory),
 *   AddressableDevices this process's, the default device assignment is global.
 * - The corpus's data-parallel JAX mnist step (16 replicas, 8 per process, its gradient
 *   all-reduces across the processes): every output of this process's 8 participants equals,
 *   bit for bit, the same participant's output of a single-process client with 16 devices
 *   (inputs: fake arguments of seed 42 + participant, a batch of its own).
 * - With PJRT_Client_Create's key-value callbacks (a store in files both processes see, as
 *   JAX's distributed client passes its store) the device counts go through the store, and an
 *   all-reduce across the processes is exact.
 * - Processes giving different device counts, and an assignment that does not split over the
 *   processes, are refused on both. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "pjrt_exec_util.h"
#include "skip_util.h"
#include "tools/common/fake_args.h"

#define LOCAL 8 /* host devices per process */
#define MAX_OUT 16

#define KMNIST_FILE \
  "/paragraph-sim__hlo-examples__jax__mnist__hlo_files__hlo_after_optimizations_mnist_16_cpus.txt"
static const char kMnist[] = KMNIST_FILE;

static const PJRT_Api *api;
static int g_rank, g_size;

static int setup(void **state) {
  (void)state;
  api = pjrt_test_load();
  return api ? 0 : -1;
}

static PJRT_Client *mpi_client(int num_devices) {
  PJRT_NamedValue o[4] = {
      pjrt_test_opt_string("platform", "cpu"), pjrt_test_opt_string("cache_dir", ""),
      pjrt_test_opt_int("num_devices", num_devices), pjrt_test_opt_bool("mpi", true)};
  return pjrt_test_client(api, o, 4);
}

/* CompileOptionsProto { executable_build_options { num_replicas: r, num_partitions: 1 } } */
static size_t world_options(char *b, int r) {
  const char o[] = {0x1a, 0x04, 0x20, (char)r, 0x28, 1};
  memcpy(b, o, sizeof o);
  return sizeof o;
}

static void client_devices(PJRT_Client *c, bool addressable, PJRT_Device *const **d, size_t *n) {
  if (addressable) {
    PJRT_Client_AddressableDevices_Args a = {
        .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = c};
    PJRT_CHECK(api, api->PJRT_Client_AddressableDevices(&a));
    *d = a.addressable_devices;
    *n = a.num_addressable_devices;
  } else {
    PJRT_Client_Devices_Args a = {.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE, .client = c};
    PJRT_CHECK(api, api->PJRT_Client_Devices(&a));
    *d = a.devices;
    *n = a.num_devices;
  }
}

static void describe(PJRT_Device *d, int *id, int *process) {
  PJRT_Device_GetDescription_Args g = {.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE,
                                       .device = d};
  PJRT_CHECK(api, api->PJRT_Device_GetDescription(&g));
  PJRT_DeviceDescription_Id_Args i = {.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE,
                                      .device_description = g.device_description};
  PJRT_CHECK(api, api->PJRT_DeviceDescription_Id(&i));
  PJRT_DeviceDescription_ProcessIndex_Args p = {
      .struct_size = PJRT_DeviceDescription_ProcessIndex_Args_STRUCT_SIZE,
      .device_description = g.device_description};
  PJRT_CHECK(api, api->PJRT_DeviceDescription_ProcessIndex(&p));
  *id = i.id;
  *process = p.process_index;
}

static bool is_addressable(PJRT_Device *d) {
  PJRT_Device_IsAddressable_Args a = {.struct_size = PJRT_Device_IsAddressable_Args_STRUCT_SIZE,
                                      .device = d};
  PJRT_CHECK(api, api->PJRT_Device_IsAddressable(&a));
  return a.is_addressable;
}

static void test_mpi_client_spans_the_processes(void **state) {
  (void)state;
  PJRT_Client *c = mpi_client(LOCAL);
  PJRT_Client_ProcessIndex_Args pi = {.struct_size = PJRT_Client_ProcessIndex_Args_STRUCT_SIZE,
                                      .client = c};
  PJRT_CHECK(api, api->PJRT_Client_ProcessIndex(&pi));
  assert_int_equal(pi.process_index, g_rank);
  PJRT_Device *const *all = NULL, *const *mine = NULL;
  size_t n_all = 0, n_mine = 0;
  client_devices(c, false, &all, &n_all);
  client_devices(c, true, &mine, &n_mine);
  assert_int_equal(n_all, (size_t)(LOCAL * g_size));
  assert_int_equal(n_mine, LOCAL);
  for (size_t i = 0; i < n_all; i++) {
    int id = -1, proc = -1;
    describe(all[i], &id, &proc);
    assert_int_equal(id, (int)i);
    assert_int_equal(proc, (int)i / LOCAL);
    assert_int_equal(is_addressable(all[i]), proc == g_rank);
    PJRT_Device_LocalHardwareId_Args lh = {
        .struct_size = PJRT_Device_LocalHardwareId_Args_STRUCT_SIZE, .device = all[i]};
    PJRT_CHECK(api, api->PJRT_Device_LocalHardwareId(&lh));
    assert_int_equal(lh.local_hardware_id, proc == g_rank ? (int)i % LOCAL : -1);
    PJRT_Client_LookupDevice_Args lk = {
        .struct_size = PJRT_Client_LookupDevice_Args_STRUCT_SIZE, .client = c, .id = (int)i};
    PJRT_CHECK(api, api->PJRT_Client_LookupDevice(&lk));
    assert_ptr_equal(lk.device, all[i]);
  }
  for (size_t i = 0; i < n_mine; i++) {
    int id = -1, proc = -1;
    describe(mine[i], &id, &proc);
    assert_int_equal(id, g_rank * LOCAL + (int)i);
    assert_int_equal(proc, g_rank);
  }
  PJRT_Client_TopologyDescription_Args td = {
      .struct_size = PJRT_Client_TopologyDescription_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_TopologyDescription(&td));
  PJRT_TopologyDescription_GetDeviceDescriptions_Args tdd = {
      .struct_size = PJRT_TopologyDescription_GetDeviceDescriptions_Args_STRUCT_SIZE,
      .topology = td.topology};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_GetDeviceDescriptions(&tdd));
  assert_int_equal(tdd.num_descriptions, n_all);
  int ids[2 * LOCAL * 2];
  PJRT_Client_DefaultDeviceAssignment_Args da = {
      .struct_size = PJRT_Client_DefaultDeviceAssignment_Args_STRUCT_SIZE,
      .client = c,
      .num_replicas = LOCAL * g_size,
      .num_partitions = 1,
      .default_assignment_size = sizeof ids / sizeof ids[0],
      .default_assignment = ids};
  PJRT_CHECK(api, api->PJRT_Client_DefaultDeviceAssignment(&da));
  for (int i = 0; i < LOCAL * g_size; i++) assert_int_equal(ids[i], i);
  /* Another process's device holds no memory of this one. */
  PJRT_Device *other = all[((size_t)g_rank + 1) % (size_t)g_size * LOCAL];
  PJRT_Device_DefaultMemory_Args dm = {.struct_size = PJRT_Device_DefaultMemory_Args_STRUCT_SIZE,
                                       .device = other};
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_DefaultMemory(&dm), PJRT_Error_Code_INVALID_ARGUMENT,
                    "not this one");
  float x = 1;
  PJRT_Client_BufferFromHostBuffer_Args b;
  memset(&b, 0, sizeof(b));
  b.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  b.client = c;
  b.data = &x;
  b.type = PJRT_Buffer_Type_F32;
  b.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  b.device = other;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_BufferFromHostBuffer(&b),
                    PJRT_Error_Code_INVALID_ARGUMENT, "not one of the client's devices");
  pjrt_test_client_destroy(api, c);
}

/* A host buffer of literal `l` (an f32 array) on `d`. */
static PJRT_Buffer *literal_buffer(PJRT_Client *c, PJRT_Device *d, const kiln_literal_t *l) {
  assert_int_equal(l->shape->type, KILN_F32);
  return pjrt_exec_buffer(api, c, d, l->data, PJRT_Buffer_Type_F32, l->shape->dims,
                          (size_t)l->shape->rank);
}

/* `b`'s bytes (kiln_malloc'd) and size. */
static void *read_all(PJRT_Buffer *b, size_t *size) {
  PJRT_Buffer_ToHostBuffer_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  a.src = b;
  PJRT_CHECK(api, api->PJRT_Buffer_ToHostBuffer(&a));
  *size = a.dst_size;
  void *dst = kiln_malloc(a.dst_size ? a.dst_size : 1);
  pjrt_exec_read(api, b, dst, a.dst_size);
  return dst;
}

static PJRT_Error *execute(PJRT_LoadedExecutable *l, PJRT_Buffer *const *const *argv, size_t n,
                           size_t num_args, PJRT_Buffer **const *outv) {
  PJRT_ExecuteOptions opts;
  memset(&opts, 0, sizeof(opts));
  opts.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  PJRT_LoadedExecutable_Execute_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  a.executable = l;
  a.options = &opts;
  a.argument_lists = argv;
  a.num_devices = n;
  a.num_args = num_args;
  a.output_lists = outv;
  return api->PJRT_LoadedExecutable_Execute(&a);
}

static void addressable(PJRT_LoadedExecutable *l, PJRT_Device *const **devs, size_t *n) {
  PJRT_LoadedExecutable_AddressableDevices_Args ad = {
      .struct_size = PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE, .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_AddressableDevices(&ad));
  *devs = ad.addressable_devices;
  *n = ad.num_addressable_devices;
}

/* Runs `l` on its addressable devices, participant first + d on device d with args[first + d];
 * every output's bytes into out[first + d][j] (kiln_malloc'd), sizes too. */
static void run_participants(PJRT_Client *c, PJRT_LoadedExecutable *l, int first,
                             kiln_literal_t **const *args, int num_args, int num_out,
                             void *(*out)[MAX_OUT], size_t (*sizes)[MAX_OUT]) {
  PJRT_Device *const *devs = NULL;
  size_t n = 0;
  addressable(l, &devs, &n);
  PJRT_Buffer ***argv = kiln_calloc(n, sizeof(*argv));
  PJRT_Buffer ***outv = kiln_calloc(n, sizeof(*outv));
  for (size_t d = 0; d < n; d++) {
    argv[d] = kiln_calloc((size_t)num_args, sizeof(PJRT_Buffer *));
    outv[d] = kiln_calloc(MAX_OUT, sizeof(PJRT_Buffer *));
    for (int i = 0; i < num_args; i++)
      argv[d][i] = literal_buffer(c, devs[d], args[first + (int)d][i]);
  }
  PJRT_CHECK(api, execute(l, (PJRT_Buffer *const *const *)argv, n, (size_t)num_args,
                          (PJRT_Buffer * *const *)outv));
  for (size_t d = 0; d < n; d++) {
    for (int j = 0; j < num_out; j++) {
      assert_non_null(outv[d][j]);
      out[first + (int)d][j] = read_all(outv[d][j], &sizes[first + (int)d][j]);
      pjrt_exec_buffer_destroy(api, outv[d][j]);
    }
    for (int i = 0; i < num_args; i++) pjrt_exec_buffer_destroy(api, argv[d][i]);
    kiln_free(argv[d]);
    kiln_free(outv[d]);
  }
  kiln_free(argv);
  kiln_free(outv);
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *t = kiln_malloc((size_t)n + 1);
  size_t got = fread(t, 1, (size_t)n, f);
  fclose(f);
  t[got] = 0;
  *len = got;
  return t;
}

static void test_mpi_client_runs_the_mnist_step_bit_for_bit_with_one_process(void **state) {
  (void)state;
  KILN_SKIP_WITHOUT_CORPUS(KILN_CORPUS_DIR "/real");
  size_t len = 0;
  char *text = read_text(KILN_CORPUS_DIR "/real" KMNIST_FILE, &len);
  if (!text) KILN_SKIP("no %s in the corpus", kMnist);
  const int n = LOCAL * g_size, num_out = 6;
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, len, &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t ***args = kiln_calloc((size_t)n, sizeof(*args));
  int num_args = 0;
  for (int p = 0; p < n; p++) {
    kiln_fake_args_options_t fo;
    kiln_fake_args_options_init(&fo);
    fo.seed = 42 + (uint64_t)p;
    s = kiln_fake_args_make(m, &fo, &arena, &args[p], &num_args);
    if (s) fail_msg("fake args: %s", kiln_status_message(s));
  }
  void *(*two)[MAX_OUT] = kiln_calloc((size_t)n, sizeof(*two));
  void *(*one)[MAX_OUT] = kiln_calloc((size_t)n, sizeof(*one));
  size_t(*two_sz)[MAX_OUT] = kiln_calloc((size_t)n, sizeof(*two_sz));
  size_t(*one_sz)[MAX_OUT] = kiln_calloc((size_t)n, sizeof(*one_sz));
  char opts[8];
  size_t opts_len = world_options(opts, n);

  /* Across the processes: this process's 8 participants. */
  PJRT_Client *c = mpi_client(LOCAL);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api, pjrt_exec_try_compile(api, c, "hlo", text, len, opts, opts_len, &l));
  PJRT_Device *const *devs = NULL;
  size_t nd = 0;
  addressable(l, &devs, &nd);
  assert_int_equal(nd, LOCAL);
  for (size_t d = 0; d < nd; d++) {
    int id = -1, proc = -1;
    describe(devs[d], &id, &proc);
    assert_int_equal(id, g_rank * LOCAL + (int)d);
  }
  PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args li = {
      .struct_size = PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args_STRUCT_SIZE,
      .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_AddressableDeviceLogicalIds(&li));
  assert_int_equal(li.num_addressable_device_logical_ids, LOCAL);
  for (int d = 0; d < LOCAL; d++)
    assert_int_equal(li.addressable_device_logical_ids[d].replica, g_rank * LOCAL + d);
  double t0 = pjrt_exec_now_ms();
  run_participants(c, l, g_rank * LOCAL, args, num_args, num_out, two, two_sz);
  double t_two = pjrt_exec_now_ms() - t0;
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);

  /* One process, 16 host devices: the reference. */
  PJRT_NamedValue o[4] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", ""),
                          pjrt_test_opt_int("num_devices", n), pjrt_test_opt_bool("mpi", false)};
  c = pjrt_test_client(api, o, 4);
  PJRT_CHECK(api, pjrt_exec_try_compile(api, c, "hlo", text, len, opts, opts_len, &l));
  t0 = pjrt_exec_now_ms();
  run_participants(c, l, 0, args, num_args, num_out, one, one_sz);
  double t_one = pjrt_exec_now_ms() - t0;
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);

  int equal = 0, differ = 0;
  for (int p = g_rank * LOCAL; p < (g_rank + 1) * LOCAL; p++)
    for (int j = 0; j < num_out; j++) {
      assert_int_equal(one_sz[p][j], two_sz[p][j]);
      if (memcmp(one[p][j], two[p][j], one_sz[p][j]) == 0)
        equal++;
      else
        differ++;
    }
  int p0 = g_rank * LOCAL;
  printf(
      "process %d: %d of %d output leaves of participants %d..%d equal the single-process "
      "run bit for bit (first run %.0f ms as %d x %d, %.0f ms on %d devices in one process)\n",
      g_rank, equal, equal + differ, p0, p0 + LOCAL - 1, t_two, g_size, LOCAL, t_one, n);
  assert_int_equal(differ, 0);
  for (int p = 0; p < n; p++)
    for (int j = 0; j < MAX_OUT; j++) {
      kiln_free(one[p][j]);
      kiln_free(two[p][j]);
    }
  kiln_free(one);
  kiln_free(two);
  kiln_free(one_sz);
  kiln_free(two_sz);
  kiln_free(args);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

/* ---- a key-value store in files (one directory per mpirun job) --------------------------- */

typedef struct {
  char dir[512];
  int puts, gets;
  char last_get[128];
  char put_paths[8][1024]; /* what this process put, removed at the end */
} file_store_t;

static file_store_t g_store;

static PJRT_Error *store_error(PJRT_CallbackError *err, PJRT_Error_Code code, const char *msg) {
  return (*err)(code, msg, strlen(msg));
}

static PJRT_Error *store_put(PJRT_KeyValuePutCallback_Args *a) {
  file_store_t *st = a->user_arg;
  char path[1024], tmp[1100];
  snprintf(path, sizeof path, "%s/%.*s", st->dir, (int)a->key_size, a->key);
  for (char *q = path + strlen(st->dir) + 1; *q; q++)
    if (*q == '/') *q = '_';
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return store_error(a->callback_error, PJRT_Error_Code_INTERNAL, "cannot write");
  fwrite(a->value, 1, a->value_size, f);
  fclose(f);
  if (rename(tmp, path)) return store_error(a->callback_error, PJRT_Error_Code_INTERNAL, "rename");
  if (st->puts < 8) snprintf(st->put_paths[st->puts], sizeof st->put_paths[0], "%s", path);
  st->puts++;
  return NULL;
}

static void store_free(char *v) {
  free(v);
}

static PJRT_Error *store_get(PJRT_KeyValueGetCallback_Args *a) {
  file_store_t *st = a->user_arg;
  char path[1024];
  snprintf(path, sizeof path, "%s/%.*s", st->dir, (int)a->key_size, a->key);
  for (char *q = path + strlen(st->dir) + 1; *q; q++)
    if (*q == '/') *q = '_';
  snprintf(st->last_get, sizeof st->last_get, "%.*s", (int)a->key_size, a->key);
  for (int waited = 0; waited <= a->timeout_in_ms; waited += 10) {
    FILE *f = fopen(path, "rb");
    if (f) {
      char *v = malloc(256);
      size_t n = fread(v, 1, 256, f);
      fclose(f);
      a->value = v;
      a->value_size = n;
      a->value_deleter_callback = store_free;
      st->gets++;
      return NULL;
    }
    usleep(10000);
  }
  return store_error(a->callback_error, PJRT_Error_Code_DEADLINE_EXCEEDED, "no such key");
}

static const char kAllReduce4[] =
    "HloModule ar4\n"
    "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
    "ENTRY e {\n"
    "  p = f32[4] parameter(0)\n"
    "  ROOT ar = f32[4] all-reduce(p), replica_groups={}, to_apply=add\n"
    "}\n";

/* The job's store folder (both processes name the same one); false: no job id to name it. */
static bool store_open(void) {
  const char *job = getenv("OMPI_MCA_ess_base_jobid");
  if (!job) job = getenv("PMIX_NAMESPACE");
  if (!job) return false;
  const char *tmp = getenv("TMPDIR");
  memset(&g_store, 0, sizeof g_store);
  snprintf(g_store.dir, sizeof g_store.dir, "%s/kiln-kv-%s", tmp && *tmp ? tmp : "/tmp", job);
  if (mkdir(g_store.dir, 0700) && errno != EEXIST) fail_msg("mkdir %s", g_store.dir);
  return true;
}

/* Removes what this process put (call once the others have read it). */
static void store_close(void) {
  for (int i = 0; i < g_store.puts && i < 8; i++) unlink(g_store.put_paths[i]);
  rmdir(g_store.dir); /* the last one out removes it */
}

/* A client with options o[n] and, when `kv`, the store's callbacks. */
static PJRT_Error *create_with_store(const PJRT_NamedValue *o, size_t n, bool kv,
                                     PJRT_Client **out) {
  PJRT_Client_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = o;
  a.num_options = n;
  if (kv) {
    a.kv_get_callback = store_get;
    a.kv_get_user_arg = &g_store;
    a.kv_put_callback = store_put;
    a.kv_put_user_arg = &g_store;
  }
  PJRT_Error *e = api->PJRT_Client_Create(&a);
  *out = a.client;
  return e;
}

static void test_mpi_client_exchanges_device_counts_through_the_kv_store(void **state) {
  (void)state;
  if (!store_open()) KILN_SKIP("no OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE to name the store");
  PJRT_NamedValue o[4] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", ""),
                          pjrt_test_opt_int("num_devices", 2), pjrt_test_opt_bool("mpi", true)};
  PJRT_Client *c = NULL;
  PJRT_CHECK(api, create_with_store(o, 4, true, &c));
  assert_int_equal(g_store.puts, 1);
  assert_int_equal(g_store.gets, g_size - 1);
  /* the second client across processes (after test_mpi_client_spans_the_processes') */
  char want[64];
  snprintf(want, sizeof want, "kiln/devices/1/%d", (g_rank + g_size - 1) % g_size);
  assert_string_equal(g_store.last_get, want);
  /* An all-reduce over the 4 devices of both processes: participant p gives p * 10 + j. */
  char opts[8];
  size_t opts_len = world_options(opts, 2 * g_size);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api, pjrt_exec_try_compile(api, c, "hlo", kAllReduce4, strlen(kAllReduce4), opts,
                                        opts_len, &l));
  PJRT_Device *const *devs = NULL;
  size_t nd = 0;
  addressable(l, &devs, &nd);
  assert_int_equal(nd, 2);
  PJRT_Buffer *in[2], *out[2][1] = {{NULL}, {NULL}};
  const int64_t dims[1] = {4};
  for (int d = 0; d < 2; d++) {
    int p = g_rank * 2 + d;
    float v[4];
    for (int j = 0; j < 4; j++) v[j] = (float)(p * 10 + j);
    in[d] = pjrt_exec_buffer(api, c, devs[d], v, PJRT_Buffer_Type_F32, dims, 1);
  }
  PJRT_Buffer *const *argv[2] = {&in[0], &in[1]};
  PJRT_Buffer **outv[2] = {out[0], out[1]};
  PJRT_CHECK(api, execute(l, argv, 2, 1, outv));
  int n = 2 * g_size;
  for (int d = 0; d < 2; d++) {
    float got[4];
    pjrt_exec_read(api, out[d][0], got, sizeof got);
    for (int j = 0; j < 4; j++) assert_true(got[j] == (float)(10 * (n * (n - 1) / 2) + n * j));
    pjrt_exec_buffer_destroy(api, out[d][0]);
    pjrt_exec_buffer_destroy(api, in[d]);
  }
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
  /* Both processes got each other's key before the all-reduce could finish: drop ours. */
  store_close();
}

/* A CUDA client across the processes on fake GPUs (tests/fake_cuda, tests/fake_nccl: NCCL's
 * ranks as threads of one process, so the groups stay inside each process): 2 GPUs each, ids
 * global, an all-reduce per process's pair through NCCL, its unique id put in the store by the
 * process holding the group's rank 0; without the callbacks, UNIMPLEMENTED. */
static const char kPairSum[] =
    "HloModule pair_sum\n"
    "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
    "ENTRY e {\n"
    "  p = f32[4] parameter(0)\n"
    "  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add\n"
    "}\n";

static void test_mpi_cuda_client_puts_nccl_ids_in_the_kv_store(void **state) {
  (void)state;
  if (!store_open()) KILN_SKIP("no OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE to name the store");
  PJRT_NamedValue o[3] = {pjrt_test_opt_string("platform", "cuda"),
                          pjrt_test_opt_string("cache_dir", ""), pjrt_test_opt_bool("mpi", true)};
  PJRT_Client *c = NULL;
  PJRT_EXPECT_ERROR(api, create_with_store(o, 3, false, &c), PJRT_Error_Code_UNIMPLEMENTED,
                    "needs PJRT_Client_Create's kv_get / kv_put callbacks");
  assert_null(c);
  PJRT_CHECK(api, create_with_store(o, 3, true, &c));
  PJRT_Device *const *all = NULL, *const *mine = NULL;
  size_t n_all = 0, n_mine = 0;
  client_devices(c, false, &all, &n_all);
  client_devices(c, true, &mine, &n_mine);
  assert_int_equal(n_mine, 2);
  assert_int_equal(n_all, 4);
  for (size_t i = 0; i < n_all; i++) {
    int id = -1, proc = -1;
    describe(all[i], &id, &proc);
    assert_int_equal(id, (int)i);
    assert_int_equal(proc, (int)i / 2);
    assert_int_equal(is_addressable(all[i]), proc == g_rank);
  }
  char opts[8];
  size_t opts_len = world_options(opts, 4);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api,
             pjrt_exec_try_compile(api, c, "hlo", kPairSum, strlen(kPairSum), opts, opts_len, &l));
  PJRT_Device *const *devs = NULL;
  size_t nd = 0;
  addressable(l, &devs, &nd);
  assert_int_equal(nd, 2);
  PJRT_Buffer *in[2], *out[2][1] = {{NULL}, {NULL}};
  const int64_t dims[1] = {4};
  for (int d = 0; d < 2; d++) {
    float v[4];
    for (int j = 0; j < 4; j++) v[j] = (float)((g_rank * 2 + d) * 10 + j);
    in[d] = pjrt_exec_buffer(api, c, devs[d], v, PJRT_Buffer_Type_F32, dims, 1);
  }
  PJRT_Buffer *const *argv[2] = {&in[0], &in[1]};
  PJRT_Buffer **outv[2] = {out[0], out[1]};
  PJRT_CHECK(api, execute(l, argv, 2, 1, outv));
  for (int d = 0; d < 2; d++) {
    float got[4];
    pjrt_exec_read(api, out[d][0], got, sizeof got);
    for (int j = 0; j < 4; j++) assert_true(got[j] == (float)(40 * g_rank + 10 + 2 * j));
    pjrt_exec_buffer_destroy(api, out[d][0]);
    pjrt_exec_buffer_destroy(api, in[d]);
  }
  /* its GPU count, then its pair's NCCL id */
  assert_int_equal(g_store.puts, 2);
  assert_non_null(strstr(g_store.put_paths[1], "/kiln_nccl_"));
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
  store_close();
}

static void test_mpi_client_refuses_different_device_counts(void **state) {
  (void)state;
  PJRT_NamedValue o[4] = {
      pjrt_test_opt_string("platform", "cpu"), pjrt_test_opt_string("cache_dir", ""),
      pjrt_test_opt_int("num_devices", 1 + g_rank), pjrt_test_opt_bool("mpi", true)};
  PJRT_Client_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = o;
  a.num_options = 4;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "different numbers of host devices (process 0: 1, process 1: 2)");
  assert_null(a.client);
}

static void test_mpi_client_refuses_an_assignment_that_does_not_split(void **state) {
  (void)state;
  PJRT_Client *c = mpi_client(2);
  /* 2 replicas, both on process 0's devices 0 and 1: replica 1 belongs to process 1. */
  const char opts[] = {0x1a, 0x10, 0x20, 2,    0x28, 1,    0x4a, 0x0a, 0x08,
                       2,    0x10, 1,    0x1a, 0x04, 0x0a, 0x02, 0,    1};
  PJRT_LoadedExecutable *l = NULL;
  PJRT_EXPECT_ERROR(
      api,
      pjrt_exec_try_compile(api, c, "hlo", kAllReduce4, strlen(kAllReduce4), opts, sizeof opts, &l),
      PJRT_Error_Code_UNIMPLEMENTED,
      "participant 1 is on device 1 of process 0; across processes participant p "
      "must be on a device of process p / 1");
  assert_null(l);
  pjrt_test_client_destroy(api, c);
}

int main(void) {
  const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
  if (!rank || !size) {
    printf("SKIP: not started by mpirun (run it with tests/mpi/mpirun2.sh)\n");
    return KILN_TEST_SKIPPED;
  }
  g_rank = atoi(rank);
  g_size = atoi(size);
  if (g_size != 2) {
    printf("SKIP: written for 2 processes (mpirun -np 2), started as %d\n", g_size);
    return KILN_TEST_SKIPPED;
  }
  const char *mode = getenv("KILN_PJRT_MPI_TEST_MODE");
  if (mode && strcmp(mode, "cuda") == 0) {
    if (!getenv("KILN_CUDA_DRIVER")) {
      printf("SKIP: cuda mode runs on the fake libcuda (KILN_CUDA_DRIVER, FAKE_CUDA_DEVICES=2)\n");
      return KILN_TEST_SKIPPED;
    }
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_mpi_cuda_client_puts_nccl_ids_in_the_kv_store)};
    return kiln_run_tests(t, setup, NULL);
  }
  const struct CMUnitTest t[] = {
      cmocka_unit_test(test_mpi_client_spans_the_processes),
      cmocka_unit_test(test_mpi_client_exchanges_device_counts_through_the_kv_store),
      cmocka_unit_test(test_mpi_client_refuses_different_device_counts),
      cmocka_unit_test(test_mpi_client_refuses_an_assignment_that_does_not_split),
      cmocka_unit_test(test_mpi_client_runs_the_mnist_step_bit_for_bit_with_one_process),
  };
  return kiln_run_tests(t, setup, NULL);
}
