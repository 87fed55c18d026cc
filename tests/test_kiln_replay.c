/* Replay folders (benchmarks/kiln_bench/replay.h): a folder saved through the plugin replays in
 * a fresh process (kiln-replay) with every output equal bit for bit, and so does one kiln-run
 * --save wrote; a missing file, a manifest from another plugin version and a corrupted
 * executable each give a clear error naming what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "benchmarks/kiln_bench/replay.h"
#include "compiler/hlo/ir.h"
#include "tools/common/fake_args.h"

static const char *kModule =
    "HloModule replay_test\n"
    "ENTRY main {\n"
    "  x = f32[8,128] parameter(0)\n"
    "  y = bf16[8,128] parameter(1)\n"
    "  c = f32[8,128] convert(y)\n"
    "  s = f32[8,128] sine(x)\n"
    "  m = f32[8,128] multiply(s, c)\n"
    "  i = s32[8,128] convert(m)\n"
    "  ROOT t = (f32[8,128], s32[8,128]) tuple(m, i)\n"
    "}\n";

typedef struct fixture {
  kiln_bench_plugin_t plugin;
  kiln_bench_client_t client;
  char dir[64];
} fixture_t;

static int run_cmd(const char *cmd, kiln_strbuf_t *out) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) kiln_strbuf_append_n(out, buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int setup(void **state) {
  fixture_t *f = kiln_calloc(1, sizeof(*f));
  kiln_status s = kiln_bench_plugin_open(NULL, &f->plugin);
  kiln_bench_client_options_t o = {.platform = "cpu", .command_buffers = -1};
  if (!s) s = kiln_bench_client_create(&f->plugin, &o, &f->client);
  if (s) {
    fprintf(stderr, "%s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_free(f);
    return -1;
  }
  snprintf(f->dir, sizeof f->dir, "/tmp/kiln-replay-test-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  /* The folder every test starts from: the module saved with kiln's fake arguments. */
  kiln_hlo_module_t *m = NULL;
  s = kiln_hlo_parse_module(kModule, strlen(kModule), NULL, &m);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_fake_args_options_t fo;
  kiln_fake_args_options_init(&fo);
  kiln_literal_t **args = NULL;
  int n = 0;
  if (!s) s = kiln_fake_args_make(m, &fo, &arena, &args, &n);
  char saved[96];
  snprintf(saved, sizeof saved, "%s/saved", f->dir);
  if (!s)
    s = kiln_bench_replay_save(&f->client, saved, "replay_test", kModule, strlen(kModule), "hlo",
                               args, n);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  if (s) {
    fprintf(stderr, "%s\n", kiln_status_message(s));
    kiln_status_free(s);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
  int rc = system(cmd);
  kiln_bench_client_destroy(&f->client);
  kiln_free(f);
  return rc;
}

/* A copy of the saved folder, to damage. */
static void copy_saved(const fixture_t *f, const char *name, char *out, size_t n) {
  snprintf(out, n, "%s/%s", f->dir, name);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s/saved %s", out, f->dir, out);
  assert_int_equal(system(cmd), 0);
}

static void test_replay_in_a_fresh_process_is_bit_for_bit(void **state) {
  fixture_t *f = *state;
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s --plugin=%s %s/saved 2>&1", KILN_REPLAY_TOOL, f->plugin.path,
           f->dir);
  kiln_strbuf_t out = {0};
  int rc = run_cmd(cmd, &out);
  if (rc != 0) fail_msg("%s exited %d:\n%s", cmd, rc, kiln_strbuf_cstr(&out));
  assert_non_null(strstr(kiln_strbuf_cstr(&out), "all 2 outputs match the saved ones bit for bit"));
  kiln_strbuf_free(&out);

  /* A changed output value is caught (the comparison can fail). */
  char changed[128], path[256];
  copy_saved(f, "changed", changed, sizeof changed);
  snprintf(path, sizeof path, "%s/out1.npy", changed);
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, -1, SEEK_END), 0);
  int last = fgetc(fp);
  assert_int_equal(fseek(fp, -1, SEEK_END), 0);
  fputc(last ^ 1, fp);
  fclose(fp);
  snprintf(cmd, sizeof cmd, "%s %s 2>&1", KILN_REPLAY_TOOL, changed);
  rc = run_cmd(cmd, &out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(kiln_strbuf_cstr(&out), "MISMATCH: 1 of 2 outputs differ"));
  assert_non_null(strstr(kiln_strbuf_cstr(&out), "out1 element 1023"));
  kiln_strbuf_free(&out);
}

static void test_kiln_run_save_replays(void **state) {
  fixture_t *f = *state;
  char hlo[128], cmd[1024];
  snprintf(hlo, sizeof hlo, "%s/m.hlo", f->dir);
  FILE *fp = fopen(hlo, "w");
  assert_non_null(fp);
  fputs(kModule, fp);
  fclose(fp);
  snprintf(cmd, sizeof cmd,
           "%s/kiln-run --backend=host --save=%s/run %s >/dev/null 2>&1 && %s %s/run 2>&1",
           KILN_BUILD_DIR, f->dir, hlo, KILN_REPLAY_TOOL, f->dir);
  kiln_strbuf_t out = {0};
  int rc = run_cmd(cmd, &out);
  if (rc != 0) fail_msg("%s exited %d:\n%s", cmd, rc, kiln_strbuf_cstr(&out));
  assert_non_null(strstr(kiln_strbuf_cstr(&out), "bit for bit"));
  kiln_strbuf_free(&out);
}

static void expect_error(const fixture_t *f, const char *dir, kiln_status_code_t code,
                         const char *part) {
  kiln_bench_replay_report_t rep;
  kiln_status s = kiln_bench_replay_run(&f->plugin, NULL, dir, &rep);
  if (!s) fail_msg("%s replayed without an error", dir);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), part))
    fail_msg("%s: got %s: %s; want %s and \"%s\"", dir, kiln_status_code_name(kiln_status_code(s)),
             kiln_status_message(s), kiln_status_code_name(code), part);
  kiln_status_free(s);
}

static void test_missing_files_are_named(void **state) {
  fixture_t *f = *state;
  const char *files[] = {"arg1.npy", "out0.npy", "executable.bin", "MANIFEST"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char dir[128], cmd[512], want[256];
    copy_saved(f, "missing", dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "rm %s/%s", dir, files[i]);
    assert_int_equal(system(cmd), 0);
    snprintf(want, sizeof want, "%s/%s is missing", dir, files[i]);
    expect_error(f, dir, KILN_NOT_FOUND, want);
  }
}

static void test_another_plugin_version_is_refused(void **state) {
  fixture_t *f = *state;
  char dir[128], cmd[512];
  copy_saved(f, "version", dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           "sed -i 's/^plugin_version .*/plugin_version kiln 0.0.1-old/' %s/MANIFEST", dir);
  assert_int_equal(system(cmd), 0);
  expect_error(f, dir, KILN_FAILED_PRECONDITION, "was saved by kiln 0.0.1-old");
  expect_error(f, dir, KILN_FAILED_PRECONDITION, "replay it with that plugin");
}

static void test_corrupted_executable_is_rejected(void **state) {
  fixture_t *f = *state;
  char dir[128], path[256];
  copy_saved(f, "corrupt", dir, sizeof dir);
  snprintf(path, sizeof path, "%s/executable.bin", dir);
  char *blob = NULL;
  size_t len = 0;
  kiln_status s = kiln_read_file(path, &blob, &len);
  assert_null(s);
  assert_true(len > 200);
  blob[len - 100] ^= 0x20; /* inside the optimized module's text */
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(blob, 1, len, fp), len);
  fclose(fp);
  kiln_free(blob);
  expect_error(f, dir, KILN_INVALID_ARGUMENT, "executable.bin");
  expect_error(f, dir, KILN_INVALID_ARGUMENT, "corrupt");
  /* Truncated, too. */
  assert_int_equal(truncate(path, 10), 0);
  expect_error(f, dir, KILN_INVALID_ARGUMENT, "not a serialized kiln executable");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replay_in_a_fresh_process_is_bit_for_bit),
      cmocka_unit_test(test_kiln_run_save_replays),
      cmocka_unit_test(test_missing_files_are_named),
      cmocka_unit_test(test_another_plugin_version_is_refused),
      cmocka_unit_test(test_corrupted_executable_is_rejected),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
