/* The compile cache on disk: a module compiled in one process is compiled again in a fresh
 * process (this test re-executed as a child) from the disk cache — the optimized module and
 * the whole lowered executable (compiler/thunks/executable_cache.h) are hits: no pass, no
 * codegen, no LLVM, and no kernel object is read or made — and both compile times are
 * printed (Client_Compile plus the first Execute, where kiln's lazy JIT loads the device
 * code). Corrupted entries (the first of each folder truncated, the others with flipped
 * bytes) are detected, ignored and rebuilt, and the results stay right; a corrupted
 * executable entry alone falls back to lowering with the kernel objects from the disk.
 * Hits and misses are read from the executable's GetCostAnalysis properties
 * "kiln.compile_cache.*" and "kiln.executable.cache_loads". */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"

/* A softmax over rows and a transpose: several fusions, so several kernels. */
static const char *kModule =
    "HloModule cache_softmax\n"
    "max_f32 {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT m = f32[] maximum(a, b)\n"
    "}\n"
    "add_f32 {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "ENTRY main {\n"
    "  x = f32[8,64] parameter(0)\n"
    "  ninf = f32[] constant(-inf)\n"
    "  mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max_f32\n"
    "  mxb = f32[8,64] broadcast(mx), dimensions={0}\n"
    "  d = f32[8,64] subtract(x, mxb)\n"
    "  e = f32[8,64] exponential(d)\n"
    "  zero = f32[] constant(0)\n"
    "  sm = f32[8] reduce(e, zero), dimensions={1}, to_apply=add_f32\n"
    "  smb = f32[8,64] broadcast(sm), dimensions={0}\n"
    "  y = f32[8,64] divide(e, smb)\n"
    "  ROOT t = f32[64,8] transpose(y), dimensions={1,0}\n"
    "}\n";

static int64_t property(const PJRT_Api *api, PJRT_LoadedExecutable *l, const char *name) {
  PJRT_LoadedExecutable_GetExecutable_Args g;
  memset(&g, 0, sizeof(g));
  g.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  g.loaded_executable = l;
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetExecutable(&g));
  PJRT_Executable_GetCostAnalysis_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE;
  a.executable = g.executable;
  PJRT_CHECK(api, api->PJRT_Executable_GetCostAnalysis(&a));
  int64_t v = -1;
  for (size_t i = 0; i < a.num_properties; i++)
    if (a.properties[i].name_size == strlen(name) &&
        !memcmp(a.properties[i].name, name, strlen(name)))
      v = a.properties[i].int64_value;
  PJRT_Executable_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  d.executable = g.executable;
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&d));
  return v;
}

/* The child: compile, execute once, check the result, print times and cache counts. `expect`:
 * "miss" (an empty cache: everything built and written), "hit" (everything from the disk),
 * "rebuild" (corrupt entries rejected and rebuilt). Exit 0 when it went as expected. */
static int child(const char *dir, const char *expect) {
  const PJRT_Api *api = pjrt_test_load();
  if (!api) return 2;
  PJRT_Client *c = pjrt_exec_client(api, dir);
  PJRT_Device *dev = pjrt_exec_device(api, c, 0);
  float x[8 * 64], r[64 * 8];
  for (int i = 0; i < 8 * 64; i++) x[i] = (float)((i * 37) % 101) / 17.0f - 2.0f;
  int64_t dims[2] = {8, 64};
  double t0 = pjrt_exec_now_ms();
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, c, kModule);
  double t1 = pjrt_exec_now_ms();
  PJRT_Buffer *arg = pjrt_exec_buffer(api, c, dev, x, PJRT_Buffer_Type_F32, dims, 2);
  PJRT_Buffer *out[1] = {NULL};
  double t2 = pjrt_exec_now_ms();
  pjrt_exec_run(api, l, &arg, 1, out);
  double t3 = pjrt_exec_now_ms();
  pjrt_exec_read(api, out[0], r, sizeof(r));
  int bad = 0;
  for (int i = 0; i < 8; i++) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < 64; j++) mx = fmax(mx, x[i * 64 + j]);
    for (int j = 0; j < 64; j++) sum += exp(x[i * 64 + j] - mx);
    for (int j = 0; j < 64; j++) {
      double want = exp(x[i * 64 + j] - mx) / sum;
      if (fabs(r[j * 8 + i] - want) > 1e-5 + 1e-4 * want) bad++;
    }
  }
  int64_t mh = property(api, l, "kiln.compile_cache.module_disk_hits");
  int64_t mr = property(api, l, "kiln.compile_cache.module_disk_rejected");
  int64_t xh = property(api, l, "kiln.compile_cache.executable_disk_hits");
  int64_t xm = property(api, l, "kiln.compile_cache.executable_disk_misses");
  int64_t xr = property(api, l, "kiln.compile_cache.executable_disk_rejected");
  int64_t xl = property(api, l, "kiln.executable.cache_loads");
  int64_t oh = property(api, l, "kiln.compile_cache.object_disk_hits");
  int64_t om = property(api, l, "kiln.compile_cache.object_disk_misses");
  int64_t orj = property(api, l, "kiln.compile_cache.object_disk_rejected");
  printf(
      "[%s] compile %.2f ms + first execute (device code) %.2f ms = %.2f ms; module hits %lld "
      "(rejected %lld), executables: hits %lld, misses %lld, rejected %lld, loaded from the "
      "cache %lld; kernel objects: hits %lld, misses %lld, rejected %lld; %d wrong\n",
      expect, t1 - t0, t3 - t2, (t1 - t0) + (t3 - t2), (long long)mh, (long long)mr, (long long)xh,
      (long long)xm, (long long)xr, (long long)xl, (long long)oh, (long long)om, (long long)orj,
      bad);
  fflush(stdout);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, arg);
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
  if (bad) return 1;
  /* An empty cache: everything made and written. */
  if (!strcmp(expect, "miss")) return mh == 0 && xh == 0 && xm == 1 && oh == 0 && om > 0 ? 0 : 1;
  /* Everything from the disk: the executable, so no kernel object is even looked up. */
  if (!strcmp(expect, "hit"))
    return mh == 1 && xh == 1 && xm == 0 && xl == 1 && oh == 0 && om == 0 && orj == 0 ? 0 : 1;
  /* Every entry corrupt: each rejected and rebuilt. */
  if (!strcmp(expect, "rebuild"))
    return mh == 0 && mr == 1 && xh == 0 && xr == 1 && xl == 0 && om > 0 && orj == om ? 0 : 1;
  /* Only the executable corrupt: rejected, lowered again from the cached kernel objects. */
  if (!strcmp(expect, "relower"))
    return mh == 1 && xh == 0 && xr == 1 && xl == 0 && oh > 0 && om == 0 ? 0 : 1;
  return 2;
}

static int run_child(const char *dir, const char *expect) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "test_pjrt_cache", "child", dir, expect, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Calls `fn` on every regular file under dir/sub. */
static int for_each_entry(const char *dir, const char *sub, void (*fn)(const char *, int),
                          int *count) {
  char path[2048];
  snprintf(path, sizeof(path), "%s/%s", dir, sub);
  DIR *d = opendir(path);
  if (!d) return 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    if (ent->d_name[0] == '.') continue;
    char file[4096];
    snprintf(file, sizeof(file), "%s/%s", path, ent->d_name);
    fn(file, (*count)++);
  }
  closedir(d);
  return *count;
}

/* The first entry is truncated, the others get bytes flipped in the middle. */
static void corrupt(const char *file, int index) {
  struct stat st;
  assert_int_equal(stat(file, &st), 0);
  if (index == 0) {
    assert_int_equal(truncate(file, st.st_size / 2), 0);
    return;
  }
  FILE *f = fopen(file, "r+b");
  assert_non_null(f);
  fseek(f, st.st_size - st.st_size / 3, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, st.st_size - st.st_size / 3, SEEK_SET);
  fputc(ch ^ 0xff, f);
  fclose(f);
}

static void rm_rf(const char *dir) {
  char cmd[2200];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static void test_fresh_process_hits_disk_cache_and_rebuilds_corrupt_entries(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln_cache_test_XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_int_equal(run_child(dir, "miss"), 0);
  assert_int_equal(run_child(dir, "hit"), 0);
  /* The executable entry alone: the lowering runs again, its kernels from the disk. */
  int execs = 0;
  for_each_entry(dir, "executables", corrupt, &execs);
  assert_int_equal(execs, 1);
  assert_int_equal(run_child(dir, "relower"), 0);
  assert_int_equal(run_child(dir, "hit"), 0);
  /* Then every entry: the module and the executable entries are first in their folders
   * (truncated); kernel objects: one truncated, the rest flipped. All rejected, rebuilt,
   * results right; then hits again. */
  int modules = 0, objects = 0;
  execs = 0;
  for_each_entry(dir, "modules", corrupt, &modules);
  assert_int_equal(modules, 1);
  for_each_entry(dir, "executables", corrupt, &execs);
  assert_int_equal(execs, 1);
  int objs = 0;
  objects = for_each_entry(dir, "host-objects", corrupt, &objs);
  assert_true(objects >= 2);
  printf("corrupted %d module entry, %d executable entry and %d kernel objects\n", modules, execs,
         objects);
  assert_int_equal(run_child(dir, "rebuild"), 0);
  assert_int_equal(run_child(dir, "hit"), 0);
  rm_rf(dir);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "child")) return child(argv[2], argv[3]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fresh_process_hits_disk_cache_and_rebuilds_corrupt_entries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
