/* kiln-bench (benchmarks/kiln_bench/): the JSON schema (written, read back, every documented
 * key present, other schemas rejected), the comparison's noise threshold (a synthetic 2x
 * regression is flagged, noise within the threshold is not), and the tool itself on a small
 * module through the plugin (one JSON object per module and mode, the table, the exit code of
 * --compare). */
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
#include "benchmarks/kiln_bench/report.h"

/* A result with p50 `p50` and a relative spread of +-`spread` (p10 and p90). */
static void add_result(kiln_bench_results_t *rs, const char *module, const char *mode, double p50,
                       double spread) {
  kiln_bench_result_t *r = kiln_bench_results_add(rs, module, "f.hlo", mode);
  r->runs = 100;
  r->warmup = 2;
  r->p10_us = p50 * (1 - spread);
  r->min_us = r->p10_us;
  r->p50_us = r->mean_us = p50;
  r->p90_us = r->p99_us = p50 * (1 + spread);
  r->compile_cold_ms = 100;
  r->compile_warm_ms = 5;
  r->kernels = 3;
  r->command_buffers = 1;
  r->gemms = 0;
  r->bytes_per_run = 4096;
}

static void test_json_round_trip_keeps_every_field(void **state) {
  (void)state;
  kiln_bench_results_t rs = {0};
  rs.plugin = kiln_strdup("/x/libkiln_pjrt.so");
  rs.plugin_version = kiln_strdup("kiln 9.9.9");
  rs.platform = kiln_strdup("cpu");
  add_result(&rs, "xla/a \"quoted\".hlo", "cmdbuf_on", 12.5, 0.02);
  kiln_bench_result_t *e = kiln_bench_results_add(&rs, "b.hlo", "f.hlo", "cmdbuf_off");
  e->error = kiln_strdup("PJRT_Client_Compile: UNIMPLEMENTED\nsecond line");
  kiln_bench_result_t *k = kiln_bench_results_add(&rs, "c.hlo", "f.hlo", "cmdbuf_on");
  k->error = kiln_strdup("skipped: estimated 1e+11 element-operations per run > --max-cost=2e+09");
  double samples[] = {5, 1, 4, 2, 3};
  kiln_bench_result_set_samples(&rs.items[0], samples, 5);
  kiln_strbuf_t j = {0};
  kiln_bench_results_json(&j, &rs);
  const char *text = kiln_strbuf_cstr(&j);
  const char *keys[] = {"\"schema\": \"kiln-bench/1\"",
                        "\"plugin\"",
                        "\"plugin_version\"",
                        "\"platform\"",
                        "\"results\"",
                        "\"module\"",
                        "\"file\"",
                        "\"mode\"",
                        "\"status\": \"ok\"",
                        "\"status\": \"error\"",
                        "\"status\": \"skipped\"",
                        "\"error\"",
                        "\"compile_cold_ms\"",
                        "\"compile_warm_ms\"",
                        "\"compile_ms\"",
                        "\"warmup\"",
                        "\"runs\"",
                        "\"min_us\"",
                        "\"p10_us\"",
                        "\"p50_us\"",
                        "\"p90_us\"",
                        "\"p99_us\"",
                        "\"mean_us\"",
                        "\"host_us\"",
                        "\"kernels\"",
                        "\"gemms\"",
                        "\"command_buffers\"",
                        "\"bytes_per_run\"",
                        "\"gbps\""};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    if (!strstr(text, keys[i])) fail_msg("key %s missing from %s", keys[i], text);

  kiln_bench_results_t back;
  kiln_status s = kiln_bench_results_parse(text, j.len, "test", &back);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(back.len, 3);
  assert_false(kiln_bench_result_skipped(&back.items[1]));
  assert_true(kiln_bench_result_skipped(&back.items[2]));
  assert_string_equal(back.plugin_version, "kiln 9.9.9");
  assert_string_equal(back.platform, "cpu");
  assert_string_equal(back.items[0].module, "xla/a \"quoted\".hlo");
  assert_string_equal(back.items[0].mode, "cmdbuf_on");
  assert_null(back.items[0].error);
  assert_int_equal(back.items[0].runs, 5);
  assert_true(back.items[0].min_us == 1 && back.items[0].p50_us == 3 && back.items[0].p99_us == 5);
  assert_int_equal(back.items[0].kernels, 3);
  assert_int_equal(back.items[0].command_buffers, 1);
  assert_int_equal(back.items[0].bytes_per_run, 4096);
  assert_string_equal(back.items[1].error, "PJRT_Client_Compile: UNIMPLEMENTED\nsecond line");
  assert_int_equal(back.items[1].kernels, -1);
  kiln_bench_results_free(&back);
  kiln_strbuf_free(&j);
  kiln_bench_results_free(&rs);
}

static void test_json_reader_rejects_other_documents(void **state) {
  (void)state;
  const char *bad[] = {"{\"schema\": \"kiln-bench/0\", \"results\": []}",
                       "{\"results\": []}",
                       "{\"schema\": \"kiln-bench/1\", \"results\": [{\"p50_us\": }]}",
                       "[1, 2]",
                       "{\"schema\": \"kiln-bench/1\", \"results\": [",
                       ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    kiln_bench_results_t rs;
    kiln_status s = kiln_bench_results_parse(bad[i], strlen(bad[i]), "bad.json", &rs);
    if (!s) fail_msg("accepted: %s", bad[i]);
    assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_status_message(s), "bad.json"));
    kiln_status_free(s);
  }
  /* Unknown keys and nested values are skipped. */
  const char *ok =
      "{\"schema\": \"kiln-bench/1\", \"extra\": {\"a\": [1, true, null]}, \"results\": "
      "[{\"module\": \"m\", \"mode\": \"cmdbuf_on\", \"new_key\": [1, {\"x\": 2}], \"p50_us\": "
      "7.5e1}]}";
  kiln_bench_results_t rs;
  kiln_status s = kiln_bench_results_parse(ok, strlen(ok), "ok.json", &rs);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(rs.len, 1);
  assert_true(rs.items[0].p50_us == 75);
  kiln_bench_results_free(&rs);
}

static void compare(const kiln_bench_results_t *a, const kiln_bench_results_t *b, int *reg,
                    int *imp, kiln_strbuf_t *t) {
  int matched = 0;
  kiln_bench_compare(a, b, 0.05, t, reg, imp, &matched);
  assert_int_equal(matched, (int)b->len);
}

static void test_compare_flags_a_2x_regression_not_noise(void **state) {
  (void)state;
  kiln_bench_results_t base = {0}, cur = {0};
  /* Spread +-3%: noise (p90-p10)/(2 p50) = 3%, threshold 9%. */
  add_result(&base, "slow", "cmdbuf_on", 100, 0.03);
  add_result(&base, "noisy", "cmdbuf_on", 100, 0.03);
  add_result(&base, "faster", "cmdbuf_off", 100, 0.03);
  add_result(&cur, "slow", "cmdbuf_on", 200, 0.03);   /* 2x: a regression */
  add_result(&cur, "noisy", "cmdbuf_on", 107, 0.03);  /* +7%, inside 9% */
  add_result(&cur, "faster", "cmdbuf_off", 50, 0.03); /* 0.5x: an improvement */
  int reg = 0, imp = 0;
  kiln_strbuf_t t = {0};
  compare(&base, &cur, &reg, &imp, &t);
  assert_int_equal(reg, 1);
  assert_int_equal(imp, 1);
  const char *text = kiln_strbuf_cstr(&t);
  const char *slow = strstr(text, "slow");
  const char *noisy = strstr(text, "noisy");
  assert_non_null(slow);
  assert_non_null(noisy);
  assert_true(strstr(slow, "REGRESSION") && strstr(slow, "REGRESSION") < noisy);
  const char *verdict = strstr(noisy, "same (within noise)");
  assert_non_null(verdict);
  assert_true(verdict < strchr(noisy, '\n'));
  kiln_strbuf_free(&t);

  /* The same +7% with a tight spread (0.5%: threshold the 5% floor) is a regression; a 2x
   * change with a huge spread (40%: threshold 120%) is noise. */
  kiln_bench_results_t b2 = {0}, c2 = {0};
  add_result(&b2, "tight", "cmdbuf_on", 100, 0.005);
  add_result(&c2, "tight", "cmdbuf_on", 107, 0.005);
  add_result(&b2, "wild", "cmdbuf_on", 100, 0.40);
  add_result(&c2, "wild", "cmdbuf_on", 200, 0.40);
  kiln_strbuf_t t2 = {0};
  compare(&b2, &c2, &reg, &imp, &t2);
  assert_int_equal(reg, 1);
  assert_non_null(strstr(strstr(kiln_strbuf_cstr(&t2), "tight"), "REGRESSION"));
  kiln_strbuf_free(&t2);
  kiln_bench_results_free(&b2);
  kiln_bench_results_free(&c2);
  kiln_bench_results_free(&base);
  kiln_bench_results_free(&cur);
}

static const char *kModule =
    "HloModule bench_test\n"
    "add_f32 {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "ENTRY main {\n"
    "  x = f32[64,256] parameter(0)\n"
    "  y = f32[64,256] parameter(1)\n"
    "  m = f32[64,256] multiply(x, y)\n"
    "  e = f32[64,256] exponential(m)\n"
    "  z = f32[] constant(0)\n"
    "  r = f32[64] reduce(e, z), dimensions={1}, to_apply=add_f32\n"
    "  ROOT t = (f32[64,256], f32[64]) tuple(e, r)\n"
    "}\n";

static int run_cmd(const char *cmd, kiln_strbuf_t *out) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) kiln_strbuf_append_n(out, buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_tool_writes_one_object_per_module_and_mode(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln-bench-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char hlo[128], json[128], json2[128], cmd[1024];
  snprintf(hlo, sizeof hlo, "%s/m.hlo", dir);
  snprintf(json, sizeof json, "%s/a.json", dir);
  snprintf(json2, sizeof json2, "%s/b.json", dir);
  FILE *f = fopen(hlo, "w");
  assert_non_null(f);
  fputs(kModule, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s --runs=20 --time=0.5 --json=%s %s 2>&1", KILN_BENCH_TOOL, json,
           hlo);
  kiln_strbuf_t out = {0};
  int rc = run_cmd(cmd, &out);
  if (rc != 0) fail_msg("%s exited %d:\n%s", cmd, rc, kiln_strbuf_cstr(&out));
  assert_non_null(strstr(kiln_strbuf_cstr(&out), "p50 us"));
  kiln_bench_results_t rs;
  kiln_status s = kiln_bench_results_read_file(json, &rs);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(rs.len, 2);
  assert_string_equal(rs.items[0].mode, "cmdbuf_on");
  assert_string_equal(rs.items[1].mode, "cmdbuf_off");
  for (size_t i = 0; i < 2; i++) {
    const kiln_bench_result_t *r = &rs.items[i];
    if (r->error) fail_msg("%s: %s", r->mode, r->error);
    assert_string_equal(r->module, "m.hlo");
    assert_true(r->runs >= 1 && r->runs <= 20);
    assert_true(r->min_us > 0 && r->min_us <= r->p50_us && r->p50_us <= r->p90_us &&
                r->p90_us <= r->p99_us);
    assert_true(r->compile_cold_ms > 0 && r->compile_warm_ms > 0);
    assert_true(r->kernels >= 1); /* the plugin's cost analysis reports them */
    /* Two f32[64,256] inputs, an f32[64,256] and an f32[64] output. */
    assert_int_equal(r->bytes_per_run, 3 * 64 * 256 * 4 + 64 * 4);
    assert_true(r->gbps > 0);
  }
  assert_int_equal(rs.items[1].command_buffers, 0); /* off means off */
  kiln_bench_results_free(&rs);

  /* --compare of a file with itself: nothing flagged, exit 0. */
  kiln_strbuf_free(&out);
  snprintf(cmd, sizeof cmd, "%s --compare=%s,%s 2>&1", KILN_BENCH_TOOL, json, json);
  rc = run_cmd(cmd, &out);
  if (rc != 0) fail_msg("%s exited %d:\n%s", cmd, rc, kiln_strbuf_cstr(&out));
  assert_non_null(strstr(kiln_strbuf_cstr(&out), "2 pairs compared: 0 regressions"));
  /* A copy whose run times doubled: flagged, exit 1. */
  kiln_bench_results_t twice;
  s = kiln_bench_results_read_file(json, &twice);
  if (s) fail_msg("%s", kiln_status_message(s));
  for (size_t i = 0; i < twice.len; i++) {
    kiln_bench_result_t *r = &twice.items[i];
    r->min_us *= 2, r->p10_us *= 2, r->p50_us *= 2, r->p90_us *= 2, r->p99_us *= 2;
  }
  kiln_strbuf_t j = {0};
  kiln_bench_results_json(&j, &twice);
  f = fopen(json2, "w");
  assert_non_null(f);
  fputs(kiln_strbuf_cstr(&j), f);
  fclose(f);
  kiln_strbuf_free(&j);
  kiln_bench_results_free(&twice);
  kiln_strbuf_free(&out);
  snprintf(cmd, sizeof cmd, "%s --compare=%s,%s --threshold=0.2 2>&1", KILN_BENCH_TOOL, json,
           json2);
  rc = run_cmd(cmd, &out);
  /* Unless the run itself was noisier than 2x (then nothing is flagged, honestly). */
  if (rc != 1 && !strstr(kiln_strbuf_cstr(&out), "within noise"))
    fail_msg("%s exited %d:\n%s", cmd, rc, kiln_strbuf_cstr(&out));
  kiln_strbuf_free(&out);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_round_trip_keeps_every_field),
      cmocka_unit_test(test_json_reader_rejects_other_documents),
      cmocka_unit_test(test_compare_flags_a_2x_regression_not_noise),
      cmocka_unit_test(test_tool_writes_one_object_per_module_and_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
