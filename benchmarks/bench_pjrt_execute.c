/* Per-call overhead of Execute through the PJRT table, next to a direct call of the runtime.
 *
 *   bench_pjrt_execute [iterations]     (default 10000)
 *
 * The module is a tiny f32[16] add on the host device. Through the plugin (dlopen'ed with
 * RTLD_LOCAL, only the table): PJRT_LoadedExecutable_Execute with two argument buffers, then
 * PJRT_Buffer_Destroy of the output and PJRT_Event_Destroy of the completion event, per call.
 * Directly: kiln_executable_run on the same module compiled with kiln_compile_module and
 * loaded on a runtime host device, then kiln_device_buffer_destroy of the output, per call.
 * The two run in 20 interleaved rounds (iterations / 20 calls each), so load drift on a shared
 * machine hits both alike. Prints both per-call times in microseconds (the best round, the
 * least disturbed by other load, and the median) and their ratio (goals: <= 5 us per call
 * through the table, <= 2x the direct call), and compile-cache hits (goal <= 1 ms): in memory
 * (PJRT_Client_Compile of the same program again on the same client), and from the disk
 * cache in a new client of this process and in a fresh process (this program re-executed):
 * PJRT_Client_Compile (the optimized module from the disk) plus the first Execute (the
 * whole executable from the disk, compiler/thunks/executable_cache.h: objects linked, no
 * codegen), each checked to be a disk hit through the executable's GetCostAnalysis. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "compiler/hlo/ir.h"
#include "compiler/thunks/compile.h"
#include "kiln/pjrt_c_api.h"
#include "pjrt_bench_util.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/executable.h"

static const char *kAdd =
    "HloModule bench_add16\n"
    "ENTRY main {\n"
    "  x = f32[16] parameter(0)\n"
    "  y = f32[16] parameter(1)\n"
    "  ROOT s = f32[16] add(x, y)\n"
    "}\n";

static const PJRT_Api *api;

#define CHECK(call) pjrt_bench_check(api, (call), #call)

static void event_destroy(PJRT_Event *ev) {
  pjrt_bench_event_destroy(api, ev);
}

static PJRT_LoadedExecutable *compile(PJRT_Client *c) {
  return pjrt_bench_compile(api, c, kAdd);
}

static void loaded_destroy(PJRT_LoadedExecutable *l) {
  pjrt_bench_loaded_destroy(api, l);
}

static void buffer_destroy(PJRT_Buffer *b) {
  pjrt_bench_buffer_destroy(api, b);
}

static PJRT_Client *client_create(const char *cache_dir) {
  const char *names[2] = {"platform", "cache_dir"}, *vals[2] = {"cpu", cache_dir};
  return pjrt_bench_client(api, names, vals, 2);
}

static void client_destroy(PJRT_Client *c) {
  pjrt_bench_client_destroy(api, c);
}

static int fail(kiln_status s, const char *what) {
  fprintf(stderr, "%s: %s\n", what, kiln_status_message(s));
  kiln_status_free(s);
  return 1;
}

/* The runtime directly: the same module compiled with kiln_compile_module and loaded on a
 * runtime host device of its own, run with kiln_executable_run (then the output destroyed). */
typedef struct direct {
  kiln_device_t *dev;
  kiln_executable_t *x;
  kiln_stream_t *stream;
  kiln_device_buffer_t *a, *b;
} direct_t;

static bool direct_setup(direct_t *r) {
  memset(r, 0, sizeof(*r));
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(kAdd, strlen(kAdd), NULL, &m);
  if (s) return !fail(s, "parse");
  kiln_executable_desc_t *d = NULL;
  s = kiln_compile_module(m, NULL, &d, NULL);
  kiln_hlo_module_destroy(m);
  if (s) return !fail(s, "compile");
  s = kiln_device_create("host", &r->dev);
  if (s) return !fail(s, "device");
  s = kiln_executable_load(r->dev, d, &r->x);
  if (s) return !fail(s, "load");
  s = kiln_stream_create(r->dev, &r->stream);
  if (s) return !fail(s, "stream");
  s = kiln_device_buffer_create(r->dev, 64, &r->a);
  if (!s) s = kiln_device_buffer_create(r->dev, 64, &r->b);
  if (s) return !fail(s, "buffers");
  return true;
}

/* `n` calls; false on error. */
static bool direct_round(direct_t *r, int n) {
  kiln_devptr_t ptrs[2] = {r->a->ptr, r->b->ptr};
  uint64_t sizes[2] = {64, 64};
  kiln_device_buffer_t *out[1];
  for (int i = 0; i < n; i++) {
    kiln_status s = kiln_executable_run(r->x, r->stream, ptrs, sizes, 2, out);
    if (s) return !fail(s, "run");
    kiln_device_buffer_destroy(out[0]);
  }
  return true;
}

static void direct_teardown(direct_t *r) {
  kiln_device_buffer_destroy(r->a);
  kiln_device_buffer_destroy(r->b);
  kiln_stream_destroy(r->stream);
  kiln_executable_destroy(r->x);
  kiln_device_destroy(r->dev);
}

/* A client with the two argument buffers and an execute ready to issue. */
typedef struct plugin_run {
  PJRT_Client *c;
  PJRT_Buffer *args[2], *out[1];
  PJRT_Buffer *const *lists[1];
  PJRT_Buffer **out_lists[1];
  PJRT_Event *done[1];
  PJRT_ExecuteOptions eo;
  PJRT_LoadedExecutable_Execute_Args ea;
} plugin_run_t;

/* A client over `cache_dir` and the arguments x, y (f32[16]) on its first device. */
static void plugin_open(plugin_run_t *r, const char *cache_dir, const float *x, const float *y) {
  memset(r, 0, sizeof(*r));
  r->c = client_create(cache_dir);
  PJRT_Client_AddressableDevices_Args da;
  memset(&da, 0, sizeof(da));
  da.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  da.client = r->c;
  CHECK(api->PJRT_Client_AddressableDevices(&da));
  int64_t dims[1] = {16};
  const float *srcs[2] = {x, y};
  for (int i = 0; i < 2; i++) {
    PJRT_Client_BufferFromHostBuffer_Args b;
    memset(&b, 0, sizeof(b));
    b.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    b.client = r->c;
    b.data = srcs[i];
    b.type = PJRT_Buffer_Type_F32;
    b.dims = dims;
    b.num_dims = 1;
    b.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
    b.device = da.addressable_devices[0];
    CHECK(api->PJRT_Client_BufferFromHostBuffer(&b));
    event_destroy(b.done_with_host_buffer);
    r->args[i] = b.buffer;
  }
}

/* Sets r->ea up to execute `l` on the arguments (outputs into r->out, event r->done[0]). */
static void plugin_prepare(plugin_run_t *r, PJRT_LoadedExecutable *l) {
  memset(&r->eo, 0, sizeof(r->eo));
  r->eo.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  r->lists[0] = r->args;
  r->out_lists[0] = r->out;
  memset(&r->ea, 0, sizeof(r->ea));
  r->ea.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  r->ea.executable = l;
  r->ea.options = &r->eo;
  r->ea.argument_lists = r->lists;
  r->ea.num_devices = 1;
  r->ea.num_args = 2;
  r->ea.output_lists = r->out_lists;
  r->ea.device_complete_events = r->done;
}

static void plugin_close(plugin_run_t *r) {
  buffer_destroy(r->args[0]);
  buffer_destroy(r->args[1]);
  client_destroy(r->c);
}

/* Through the table, in `rounds` rounds of `iters` executes interleaved with rounds of the
 * direct call `d` (so load drift hits both alike): us[0] / us[1] the best round's microseconds
 * per call through the table / directly, us[2] / us[3] the medians; *hit_us the in-memory
 * compile-cache hit time. False when the direct call failed. */
static bool bench_plugin(int iters, int rounds, direct_t *d, double us[4], double *hit_us,
                         float *check_out) {
  float x[16], y[16];
  for (int i = 0; i < 16; i++) {
    x[i] = (float)i;
    y[i] = 0.5f;
  }
  plugin_run_t pr;
  plugin_open(&pr, "", x, y);
  PJRT_Client *c = pr.c;
  PJRT_LoadedExecutable *l = compile(c);
  /* the in-memory cache: the same program again */
  const int hits = 200;
  double t0 = kiln_clock_ms();
  for (int i = 0; i < hits; i++) loaded_destroy(compile(c));
  *hit_us = (kiln_clock_ms() - t0) * 1000.0 / hits;
  plugin_prepare(&pr, l);
  PJRT_LoadedExecutable_Execute_Args ea = pr.ea;
  PJRT_Buffer **out = pr.out;
  PJRT_Event **done = pr.done;
  /* the first execute makes the kernels (lazy JIT): not timed */
  CHECK(api->PJRT_LoadedExecutable_Execute(&ea));
  event_destroy(done[0]);
  PJRT_Buffer_ToHostBuffer_Args th;
  memset(&th, 0, sizeof(th));
  th.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  th.src = out[0];
  th.dst = check_out;
  th.dst_size = 16 * sizeof(float);
  CHECK(api->PJRT_Buffer_ToHostBuffer(&th));
  if (th.event) {
    PJRT_Event_Await_Args aw;
    memset(&aw, 0, sizeof(aw));
    aw.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
    aw.event = th.event;
    CHECK(api->PJRT_Event_Await(&aw));
    event_destroy(th.event);
  }
  buffer_destroy(out[0]);
  bool ok = direct_round(d, 100); /* warm-up */
  double *tp = calloc((size_t)rounds, sizeof(double)), *td = calloc((size_t)rounds, sizeof(double));
  for (int r = 0; r < rounds && ok; r++) {
    double t1 = kiln_clock_ms();
    for (int i = 0; i < iters; i++) {
      CHECK(api->PJRT_LoadedExecutable_Execute(&ea));
      event_destroy(done[0]);
      buffer_destroy(out[0]);
    }
    double t2 = kiln_clock_ms();
    ok = direct_round(d, iters);
    tp[r] = (t2 - t1) * 1000.0 / iters;
    td[r] = (kiln_clock_ms() - t2) * 1000.0 / iters;
  }
  qsort(tp, (size_t)rounds, sizeof(double), kiln_clock_cmp_double);
  qsort(td, (size_t)rounds, sizeof(double), kiln_clock_cmp_double);
  us[0] = tp[0];
  us[1] = td[0];
  us[2] = tp[rounds / 2];
  us[3] = td[rounds / 2];
  free(tp);
  free(td);
  loaded_destroy(l);
  plugin_close(&pr);
  return ok;
}

static int64_t property(PJRT_LoadedExecutable *l, const char *name) {
  PJRT_LoadedExecutable_GetExecutable_Args g;
  memset(&g, 0, sizeof(g));
  g.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  g.loaded_executable = l;
  CHECK(api->PJRT_LoadedExecutable_GetExecutable(&g));
  PJRT_Executable_GetCostAnalysis_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE;
  a.executable = g.executable;
  CHECK(api->PJRT_Executable_GetCostAnalysis(&a));
  int64_t v = -1;
  for (size_t i = 0; i < a.num_properties; i++)
    if (a.properties[i].name_size == strlen(name) &&
        !memcmp(a.properties[i].name, name, strlen(name)))
      v = a.properties[i].int64_value;
  PJRT_Executable_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  d.executable = g.executable;
  CHECK(api->PJRT_Executable_Destroy(&d));
  return v;
}

/* A new client over the disk cache `dir`: Compile, then the first Execute (where the device
 * code is loaded), each timed in ms; *disk_hit whether both came from the disk (the module
 * and the whole executable, this process's counters grown by one each). */
static void disk_compile(const char *dir, double *compile_ms, double *first_ms, bool *disk_hit) {
  float x[16] = {0};
  plugin_run_t pr;
  plugin_open(&pr, dir, x, x);
  double t0 = kiln_clock_ms();
  PJRT_LoadedExecutable *l = compile(pr.c);
  double t1 = kiln_clock_ms();
  plugin_prepare(&pr, l);
  CHECK(api->PJRT_LoadedExecutable_Execute(&pr.ea));
  double t2 = kiln_clock_ms();
  event_destroy(pr.done[0]);
  buffer_destroy(pr.out[0]);
  *compile_ms = t1 - t0;
  *first_ms = t2 - t1;
  *disk_hit = property(l, "kiln.executable.cache_loads") == 1 &&
              property(l, "kiln.compile_cache.memory_hits") == 0;
  static int64_t module_hits, exec_hits;
  int64_t mh = property(l, "kiln.compile_cache.module_disk_hits");
  int64_t xh = property(l, "kiln.compile_cache.executable_disk_hits");
  *disk_hit = *disk_hit && mh == module_hits + 1 && xh == exec_hits + 1;
  module_hits = mh;
  exec_hits = xh;
  loaded_destroy(l);
  plugin_close(&pr);
}

/* The fresh process's half (argv: --disk-hit DIR): prints "compile first_execute hit". */
static int disk_hit_child(const char *dir) {
  double cm = 0, fm = 0;
  bool hit = false;
  disk_compile(dir, &cm, &fm, &hit);
  printf("%.6f %.6f %d\n", cm, fm, hit ? 1 : 0);
  return 0;
}

/* Runs this program as `--disk-hit DIR` and reads its line; false on failure. */
static bool fresh_process(const char *self, const char *dir, double *cm, double *fm, bool *hit) {
  int fds[2];
  if (pipe(fds)) return false;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(self, self, "--disk-hit", dir, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char line[256] = "";
  FILE *f = fdopen(fds[0], "r");
  bool ok = f && fgets(line, sizeof(line), f);
  if (f) fclose(f);
  int status = 0;
  waitpid(pid, &status, 0);
  int h = 0;
  ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
       sscanf(line, "%lf %lf %d", cm, fm, &h) == 3;
  *hit = h == 1;
  return ok;
}

int main(int argc, char **argv) {
  bool child = argc == 3 && !strcmp(argv[1], "--disk-hit");
  int iters = argc > 1 && !child ? atoi(argv[1]) : 10000;
  if (iters < 1) iters = 10000;
  api = pjrt_bench_load(KILN_PJRT_PLUGIN);
  if (!api) return 1;
  if (child) return disk_hit_child(argv[2]);
  double hit_us = 0, us[4];
  float r[16];
  direct_t direct;
  const int rounds = 20;
  int per_round = iters / rounds > 0 ? iters / rounds : 1;
  if (!direct_setup(&direct)) return 1;
  if (!bench_plugin(per_round, rounds, &direct, us, &hit_us, r)) return 1;
  direct_teardown(&direct);
  for (int i = 0; i < 16; i++)
    if (r[i] != (float)i + 0.5f) {
      fprintf(stderr, "wrong result at %d: %g\n", i, r[i]);
      return 1;
    }
  printf(
      "f32[16] add, %d rounds of %d executes on the host device, interleaved (best round; "
      "median):\n",
      rounds, per_round);
  printf("  through the PJRT table   %8.2f us/call  (%.2f; goal <= 5 us)\n", us[0], us[2]);
  printf("  kiln_executable_run      %8.2f us/call  (%.2f)\n", us[1], us[3]);
  printf("  ratio table/direct       %8.2fx         (%.2fx; goal <= 2x)\n", us[0] / us[1],
         us[2] / us[3]);
  printf("compile-cache hit (in memory, PJRT_Client_Compile): %.1f us (goal <= 1000 us)\n", hit_us);

  /* The disk cache: filled by a first client (a miss: passes, codegen, LLVM), then hit by a
   * new client here (the best of 10: the least disturbed by other load) and by fresh processes
   * (the best of 4). */
  char dir[] = "/tmp/kiln_bench_pjrt_cache_XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  double cold_c = 0, cold_f = 0, best[2][2] = {{1e30, 1e30}, {1e30, 1e30}};
  bool hit = false, all_hit = true, ok = true;
  disk_compile(dir, &cold_c, &cold_f, &hit);
  all_hit = !hit; /* the first is a miss */
  for (int r = 0; r < 10; r++) {
    double cm, fm;
    disk_compile(dir, &cm, &fm, &hit);
    all_hit = all_hit && hit;
    if (cm + fm < best[0][0] + best[0][1]) best[0][0] = cm, best[0][1] = fm;
    if (r % 3) continue; /* 4 fresh processes */
    ok = ok && fresh_process(argv[0], dir, &cm, &fm, &hit);
    all_hit = all_hit && hit;
    if (ok && cm + fm < best[1][0] + best[1][1]) best[1][0] = cm, best[1][1] = fm;
  }
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  if (!ok || !all_hit) {
    fprintf(stderr, "disk cache: %s\n", ok ? "an expected hit missed" : "the fresh process failed");
    return 1;
  }
  printf("compile-cache miss (empty disk cache): compile %.2f ms + first execute %.2f ms\n", cold_c,
         cold_f);
  printf(
      "compile-cache hit from disk, new client:    compile %.3f ms + first execute %.3f ms = "
      "%.3f ms (goal <= 1 ms; %.0fx faster than the miss)\n",
      best[0][0], best[0][1], best[0][0] + best[0][1],
      (cold_c + cold_f) / (best[0][0] + best[0][1]));
  printf(
      "compile-cache hit from disk, fresh process: compile %.3f ms + first execute %.3f ms = "
      "%.3f ms (goal <= 1 ms)\n",
      best[1][0], best[1][1], best[1][0] + best[1][1]);
  return 0;
}
