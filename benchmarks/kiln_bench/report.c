/* kiln-bench's results (report.h). */
#include "benchmarks/kiln_bench/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"

/* ---- results --------------------------------------------------------------------------- */

kiln_bench_result_t *kiln_bench_results_add(kiln_bench_results_t *rs, const char *module,
                                            const char *file, const char *mode) {
  if (rs->len == rs->cap) {
    rs->cap = rs->cap ? 2 * rs->cap : 16;
    rs->items = kiln_realloc(rs->items, rs->cap * sizeof(*rs->items));
  }
  kiln_bench_result_t *r = &rs->items[rs->len++];
  memset(r, 0, sizeof(*r));
  r->module = kiln_strdup(module ? module : "");
  r->file = kiln_strdup(file ? file : "");
  r->mode = kiln_strdup(mode ? mode : "");
  r->kernels = r->gemms = r->command_buffers = -1;
  return r;
}

void kiln_bench_results_free(kiln_bench_results_t *rs) {
  for (size_t i = 0; i < rs->len; i++) {
    kiln_free(rs->items[i].module);
    kiln_free(rs->items[i].file);
    kiln_free(rs->items[i].mode);
    kiln_free(rs->items[i].error);
  }
  kiln_free(rs->items);
  kiln_free(rs->plugin);
  kiln_free(rs->plugin_version);
  kiln_free(rs->platform);
  memset(rs, 0, sizeof(*rs));
}

bool kiln_bench_result_skipped(const kiln_bench_result_t *r) {
  return r->error && kiln_str_starts_with(r->error, "skipped:");
}

/* Nearest-rank percentile of sorted samples. */
static double percentile(const double *sorted, size_t n, double q) {
  size_t k = (size_t)ceil(q * (double)n);
  if (k < 1) k = 1;
  if (k > n) k = n;
  return sorted[k - 1];
}

void kiln_bench_result_set_samples(kiln_bench_result_t *r, double *samples_us, size_t n) {
  r->runs = (int64_t)n;
  if (!n) return;
  qsort(samples_us, n, sizeof(*samples_us), kiln_clock_cmp_double);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += samples_us[i];
  r->min_us = samples_us[0];
  r->p10_us = percentile(samples_us, n, 0.10);
  r->p50_us = percentile(samples_us, n, 0.50);
  r->p90_us = percentile(samples_us, n, 0.90);
  r->p99_us = percentile(samples_us, n, 0.99);
  r->mean_us = sum / (double)n;
  r->gbps = r->p50_us > 0 ? (double)r->bytes_per_run / (r->p50_us * 1e3) : 0;
}

/* ---- table ----------------------------------------------------------------------------- */

static void human_bytes(char *out, size_t n, int64_t bytes) {
  if (bytes >= (int64_t)1 << 30)
    snprintf(out, n, "%.1fG", (double)bytes / (double)((int64_t)1 << 30));
  else if (bytes >= 1 << 20)
    snprintf(out, n, "%.1fM", (double)bytes / (double)(1 << 20));
  else if (bytes >= 1 << 10)
    snprintf(out, n, "%.1fK", (double)bytes / 1024.0);
  else
    snprintf(out, n, "%lldB", (long long)bytes);
}

static void count_cell(char *out, size_t n, int64_t v) {
  if (v < 0)
    snprintf(out, n, "-");
  else
    snprintf(out, n, "%lld", (long long)v);
}

void kiln_bench_results_table(kiln_strbuf_t *b, const kiln_bench_results_t *rs) {
  kiln_strbuf_printf(b, "%-52s %-10s %9s %9s %10s %10s %10s %10s %8s %5s %4s %8s %8s\n", "module",
                     "mode", "cold ms", "warm ms", "p50 us", "p90 us", "p99 us", "min us",
                     "host us", "kern", "cmdb", "bytes", "GB/s");
  for (size_t i = 0; i < rs->len; i++) {
    const kiln_bench_result_t *r = &rs->items[i];
    const char *name = r->module;
    size_t nl = strlen(name);
    if (nl > 52) name += nl - 52;
    if (r->error) {
      kiln_strbuf_printf(b, "%-52s %-10s %s%.160s\n", name, r->mode,
                         kiln_bench_result_skipped(r) ? "" : "error: ", r->error);
      continue;
    }
    char kern[24], cmdb[24], bytes[24];
    count_cell(kern, sizeof kern, r->kernels);
    count_cell(cmdb, sizeof cmdb, r->command_buffers);
    human_bytes(bytes, sizeof bytes, r->bytes_per_run);
    kiln_strbuf_printf(
        b, "%-52s %-10s %9.1f %9.1f %10.1f %10.1f %10.1f %10.1f %8.1f %5s %4s %8s %8.2f\n", name,
        r->mode, r->compile_cold_ms, r->compile_warm_ms, r->p50_us, r->p90_us, r->p99_us, r->min_us,
        r->host_us, kern, cmdb, bytes, r->gbps);
  }
}

/* ---- JSON writing ------------------------------------------------------------------------ */

static void json_string(kiln_strbuf_t *b, const char *s) {
  kiln_strbuf_append_char(b, '"');
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\') {
      kiln_strbuf_append_char(b, '\\');
      kiln_strbuf_append_char(b, (char)*p);
    } else if (*p == '\n') {
      kiln_strbuf_append(b, "\\n");
    } else if (*p < 0x20) {
      kiln_strbuf_printf(b, "\\u%04x", *p);
    } else {
      kiln_strbuf_append_char(b, (char)*p);
    }
  }
  kiln_strbuf_append_char(b, '"');
}

static void json_key(kiln_strbuf_t *b, const char *k) {
  kiln_strbuf_append(b, ", ");
  json_string(b, k);
  kiln_strbuf_append(b, ": ");
}

static void json_num(kiln_strbuf_t *b, const char *k, double v) {
  json_key(b, k);
  kiln_strbuf_printf(b, "%.6g", isfinite(v) ? v : 0.0);
}

static void json_int(kiln_strbuf_t *b, const char *k, int64_t v) {
  json_key(b, k);
  kiln_strbuf_printf(b, "%lld", (long long)v);
}

void kiln_bench_results_json(kiln_strbuf_t *b, const kiln_bench_results_t *rs) {
  kiln_strbuf_append(b, "{\"schema\": ");
  json_string(b, KILN_BENCH_SCHEMA);
  json_key(b, "plugin");
  json_string(b, rs->plugin);
  json_key(b, "plugin_version");
  json_string(b, rs->plugin_version);
  json_key(b, "platform");
  json_string(b, rs->platform);
  kiln_strbuf_append(b, ",\n \"results\": [");
  for (size_t i = 0; i < rs->len; i++) {
    const kiln_bench_result_t *r = &rs->items[i];
    kiln_strbuf_append(b, i ? ",\n  {" : "\n  {");
    kiln_strbuf_append(b, "\"module\": ");
    json_string(b, r->module);
    json_key(b, "file");
    json_string(b, r->file);
    json_key(b, "mode");
    json_string(b, r->mode);
    json_key(b, "status");
    json_string(b, kiln_bench_result_skipped(r) ? "skipped" : r->error ? "error" : "ok");
    if (r->error) {
      json_key(b, "error");
      json_string(b, r->error);
    }
    json_num(b, "compile_cold_ms", r->compile_cold_ms);
    json_num(b, "compile_warm_ms", r->compile_warm_ms);
    json_num(b, "compile_ms", r->compile_ms);
    json_int(b, "warmup", r->warmup);
    json_int(b, "runs", r->runs);
    json_num(b, "min_us", r->min_us);
    json_num(b, "p10_us", r->p10_us);
    json_num(b, "p50_us", r->p50_us);
    json_num(b, "p90_us", r->p90_us);
    json_num(b, "p99_us", r->p99_us);
    json_num(b, "mean_us", r->mean_us);
    json_num(b, "host_us", r->host_us);
    json_int(b, "kernels", r->kernels);
    json_int(b, "gemms", r->gemms);
    json_int(b, "command_buffers", r->command_buffers);
    json_int(b, "bytes_per_run", r->bytes_per_run);
    json_num(b, "gbps", r->gbps);
    kiln_strbuf_append_char(b, '}');
  }
  kiln_strbuf_append(b, "\n]}\n");
}

/* ---- JSON reading: the subset the writer uses (objects, arrays, strings, numbers, literals) */

typedef struct json_reader {
  const char *start, *p, *end, *what;
} json_reader_t;

static void skip_ws(json_reader_t *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r')) r->p++;
}

static kiln_status json_error(const json_reader_t *r, const char *expected) {
  return KILN_ERR_INVALID("%s: not a kiln-bench JSON file: expected %s at byte %td", r->what,
                          expected, r->p - r->start);
}

static bool eat(json_reader_t *r, char c) {
  skip_ws(r);
  if (r->p < r->end && *r->p == c) {
    r->p++;
    return true;
  }
  return false;
}

/* A string (the escapes the writer makes, and \uXXXX below 0x80); *out kiln_malloc'ed. */
static kiln_status read_string(json_reader_t *r, char **out) {
  if (!eat(r, '"')) return json_error(r, "a string");
  kiln_strbuf_t b = {0};
  while (r->p < r->end && *r->p != '"') {
    char c = *r->p++;
    if (c == '\\' && r->p < r->end) {
      char e = *r->p++;
      if (e == 'n')
        c = '\n';
      else if (e == 't')
        c = '\t';
      else if (e == 'u' && r->end - r->p >= 4) {
        char hex[5] = {r->p[0], r->p[1], r->p[2], r->p[3], 0};
        c = (char)strtol(hex, NULL, 16);
        r->p += 4;
      } else
        c = e;
    }
    kiln_strbuf_append_char(&b, c);
  }
  if (!eat(r, '"')) {
    kiln_strbuf_free(&b);
    return json_error(r, "the end of a string");
  }
  kiln_strbuf_cstr(&b);
  *out = b.data ? kiln_strbuf_take(&b) : kiln_strdup("");
  return NULL;
}

static kiln_status read_number(json_reader_t *r, double *out) {
  skip_ws(r);
  char buf[64];
  size_t n = 0;
  while (r->p + n < r->end && n < sizeof(buf) - 1 && strchr("+-0123456789.eE", r->p[n])) n++;
  if (!n) return json_error(r, "a number");
  memcpy(buf, r->p, n);
  buf[n] = 0;
  char *endp;
  *out = strtod(buf, &endp);
  if (endp != buf + n) return json_error(r, "a number");
  r->p += n;
  return NULL;
}

static kiln_status skip_value(json_reader_t *r, int depth) {
  skip_ws(r);
  if (depth > 64) return json_error(r, "less nesting");
  if (r->p >= r->end) return json_error(r, "a value");
  if (*r->p == '"') {
    char *s = NULL;
    KILN_RETURN_IF_ERROR_PLAIN(read_string(r, &s));
    kiln_free(s);
    return NULL;
  }
  if (*r->p == '{' || *r->p == '[') {
    char close = *r->p == '{' ? '}' : ']';
    bool object = *r->p == '{';
    r->p++;
    if (eat(r, close)) return NULL;
    do {
      if (object) {
        char *k = NULL;
        KILN_RETURN_IF_ERROR_PLAIN(read_string(r, &k));
        kiln_free(k);
        if (!eat(r, ':')) return json_error(r, "':'");
      }
      KILN_RETURN_IF_ERROR_PLAIN(skip_value(r, depth + 1));
    } while (eat(r, ','));
    return eat(r, close) ? NULL : json_error(r, object ? "'}'" : "']'");
  }
  for (const char *const *w = (const char *const[]){"true", "false", "null", NULL}; *w; w++) {
    size_t n = strlen(*w);
    if ((size_t)(r->end - r->p) >= n && !memcmp(r->p, *w, n)) {
      r->p += n;
      return NULL;
    }
  }
  double d;
  return read_number(r, &d);
}

static kiln_status read_result(json_reader_t *r, kiln_bench_results_t *rs) {
  if (!eat(r, '{')) return json_error(r, "a result object");
  kiln_bench_result_t *res = kiln_bench_results_add(rs, "", "", "");
  if (eat(r, '}')) return NULL;
  do {
    char *k = NULL;
    KILN_RETURN_IF_ERROR_PLAIN(read_string(r, &k));
    kiln_status s = eat(r, ':') ? NULL : json_error(r, "':'");
    char **str = !strcmp(k, "module")  ? &res->module
                 : !strcmp(k, "file")  ? &res->file
                 : !strcmp(k, "mode")  ? &res->mode
                 : !strcmp(k, "error") ? &res->error
                                       : NULL;
    struct {
      const char *name;
      double *d;
      int64_t *i;
    } nums[] = {{"compile_cold_ms", &res->compile_cold_ms, NULL},
                {"compile_warm_ms", &res->compile_warm_ms, NULL},
                {"compile_ms", &res->compile_ms, NULL},
                {"warmup", NULL, &res->warmup},
                {"runs", NULL, &res->runs},
                {"min_us", &res->min_us, NULL},
                {"p10_us", &res->p10_us, NULL},
                {"p50_us", &res->p50_us, NULL},
                {"p90_us", &res->p90_us, NULL},
                {"p99_us", &res->p99_us, NULL},
                {"mean_us", &res->mean_us, NULL},
                {"host_us", &res->host_us, NULL},
                {"kernels", NULL, &res->kernels},
                {"gemms", NULL, &res->gemms},
                {"command_buffers", NULL, &res->command_buffers},
                {"bytes_per_run", NULL, &res->bytes_per_run},
                {"gbps", &res->gbps, NULL}};
    bool done = false;
    if (!s && str) {
      kiln_free(*str);
      *str = NULL;
      s = read_string(r, str);
      done = true;
    } else if (!s && !strcmp(k, "status")) {
      char *v = NULL;
      s = read_string(r, &v);
      if (v && strcmp(v, "ok") && !res->error) res->error = kiln_strdup(v);
      kiln_free(v);
      done = true;
    }
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]) && !s && !done; i++) {
      if (strcmp(k, nums[i].name)) continue;
      double d = 0;
      s = read_number(r, &d);
      if (nums[i].d) *nums[i].d = d;
      if (nums[i].i) *nums[i].i = (int64_t)d;
      done = true;
    }
    if (!s && !done) s = skip_value(r, 1);
    if (s) s = kiln_status_annotate(s, "in the value of \"%s\"", k);
    kiln_free(k);
    KILN_RETURN_IF_ERROR_PLAIN(s);
  } while (eat(r, ','));
  return eat(r, '}') ? NULL : json_error(r, "'}'");
}

static kiln_status parse_document(json_reader_t *r, kiln_bench_results_t *out) {
  if (!eat(r, '{')) return json_error(r, "'{'");
  bool schema_ok = false;
  do {
    char *k = NULL;
    KILN_RETURN_IF_ERROR_PLAIN(read_string(r, &k));
    kiln_status s = eat(r, ':') ? NULL : json_error(r, "':'");
    char **str = !strcmp(k, "plugin")           ? &out->plugin
                 : !strcmp(k, "plugin_version") ? &out->plugin_version
                 : !strcmp(k, "platform")       ? &out->platform
                                                : NULL;
    if (s) {
    } else if (!strcmp(k, "schema")) {
      char *v = NULL;
      s = read_string(r, &v);
      if (!s && strcmp(v, KILN_BENCH_SCHEMA))
        s = KILN_ERR_INVALID("%s: schema \"%s\", this kiln-bench reads \"%s\"", r->what, v,
                             KILN_BENCH_SCHEMA);
      schema_ok = !s;
      kiln_free(v);
    } else if (str) {
      kiln_free(*str);
      *str = NULL;
      s = read_string(r, str);
    } else if (!strcmp(k, "results")) {
      if (!eat(r, '['))
        s = json_error(r, "'['");
      else if (!eat(r, ']')) {
        do s = read_result(r, out);
        while (!s && eat(r, ','));
        if (!s && !eat(r, ']')) s = json_error(r, "']'");
      }
    } else {
      s = skip_value(r, 1);
    }
    kiln_free(k);
    KILN_RETURN_IF_ERROR_PLAIN(s);
  } while (eat(r, ','));
  if (!eat(r, '}')) return json_error(r, "'}'");
  if (!schema_ok)
    return KILN_ERR_INVALID("%s: no \"schema\": \"%s\" key", r->what, KILN_BENCH_SCHEMA);
  return NULL;
}

kiln_status kiln_bench_results_parse(const char *text, size_t len, const char *what,
                                     kiln_bench_results_t *out) {
  memset(out, 0, sizeof(*out));
  json_reader_t r = {text, text, text + len, what ? what : "JSON"};
  kiln_status s = parse_document(&r, out);
  if (s) kiln_bench_results_free(out);
  return s;
}

kiln_status kiln_bench_results_read_file(const char *path, kiln_bench_results_t *out) {
  memset(out, 0, sizeof(*out));
  char *text = NULL;
  size_t len = 0;
  KILN_RETURN_IF_ERROR(kiln_read_file(path, &text, &len), "while reading %s", path);
  kiln_status s = kiln_bench_results_parse(text, len, path, out);
  kiln_free(text);
  return s;
}

/* ---- comparison ------------------------------------------------------------------------ */

static double noise_of(const kiln_bench_result_t *r) {
  if (r->p50_us <= 0) return 0;
  return (r->p90_us - r->p10_us) / (2.0 * r->p50_us);
}

static const kiln_bench_result_t *find(const kiln_bench_results_t *rs, const char *module,
                                       const char *mode) {
  for (size_t i = 0; i < rs->len; i++)
    if (!strcmp(rs->items[i].module, module) && !strcmp(rs->items[i].mode, mode))
      return &rs->items[i];
  return NULL;
}

void kiln_bench_compare(const kiln_bench_results_t *base, const kiln_bench_results_t *cur,
                        double min_threshold, kiln_strbuf_t *b, int *regressions, int *improvements,
                        int *matched) {
  if (min_threshold <= 0) min_threshold = 0.05;
  int reg = 0, imp = 0, n = 0;
  kiln_strbuf_printf(b, "%-52s %-10s %10s %10s %7s %7s %9s  %s\n", "module", "mode", "base p50",
                     "new p50", "ratio", "noise", "compile", "verdict");
  for (size_t i = 0; i < cur->len; i++) {
    const kiln_bench_result_t *c = &cur->items[i];
    const kiln_bench_result_t *a = find(base, c->module, c->mode);
    if (!a || a->error || c->error || a->p50_us <= 0 || c->p50_us <= 0) continue;
    n++;
    double noise = fmax(noise_of(a), noise_of(c));
    double threshold = fmax(min_threshold, 3.0 * noise);
    double ratio = c->p50_us / a->p50_us;
    double cratio = a->compile_warm_ms > 0 ? c->compile_warm_ms / a->compile_warm_ms : 0;
    const char *verdict = "same (within noise)";
    if (ratio > 1.0 + threshold) {
      verdict = "REGRESSION";
      reg++;
    } else if (ratio < 1.0 / (1.0 + threshold)) {
      verdict = "improvement";
      imp++;
    }
    const char *name = c->module;
    size_t nl = strlen(name);
    if (nl > 52) name += nl - 52;
    kiln_strbuf_printf(b, "%-52s %-10s %10.1f %10.1f %6.2fx %6.1f%% %8.2fx  %s\n", name, c->mode,
                       a->p50_us, c->p50_us, ratio, 100.0 * threshold, cratio, verdict);
  }
  kiln_strbuf_printf(b,
                     "%d pairs compared: %d regressions, %d improvements (threshold: 3x the "
                     "larger (p90-p10)/(2 p50) of the two, at least %.0f%%)\n",
                     n, reg, imp, 100.0 * min_threshold);
  if (regressions) *regressions = reg;
  if (improvements) *improvements = imp;
  if (matched) *matched = n;
}

/* ---- plot ------------------------------------------------------------------------------ */

/* One data row per module: index, p50 on, p50 off, cold, warm (NaN where missing). */
static void plot_data(kiln_strbuf_t *d, const kiln_bench_results_t *rs, size_t *rows) {
  *rows = 0;
  for (size_t i = 0; i < rs->len; i++) {
    const kiln_bench_result_t *r = &rs->items[i];
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(rs->items[j].module, r->module);
    if (seen) continue;
    const kiln_bench_result_t *on = find(rs, r->module, "cmdbuf_on");
    const kiln_bench_result_t *off = find(rs, r->module, "cmdbuf_off");
    const kiln_bench_result_t *any = on && !on->error ? on : off;
    if (!any || any->error) continue;
    /* The file name without ".hlo", its last 28 characters: the part that tells them apart. */
    char name[512];
    const char *slash = strrchr(r->module, '/');
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : r->module);
    char *ext = strstr(name, ".hlo");
    if (ext) memmove(ext, ext + 4, strlen(ext + 4) + 1);
    size_t nl = strlen(name);
    char label[32];
    snprintf(label, sizeof label, "%.28s", nl > 28 ? name + nl - 28 : name);
    for (char *p = label; *p; p++)
      if (*p == '"' || *p == '_') *p = *p == '_' ? '-' : '\'';
    kiln_strbuf_printf(d, "%zu \"%s\" ", *rows, label);
    if (on && !on->error)
      kiln_strbuf_printf(d, "%.6g ", on->p50_us);
    else
      kiln_strbuf_append(d, "NaN ");
    if (off && !off->error)
      kiln_strbuf_printf(d, "%.6g ", off->p50_us);
    else
      kiln_strbuf_append(d, "NaN ");
    kiln_strbuf_printf(d, "%.6g %.6g\n", any->compile_cold_ms, any->compile_warm_ms);
    (*rows)++;
  }
}

static kiln_status write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f)
    return kiln_status_make(KILN_PERMISSION_DENIED, "cannot write %s: %s", path, strerror(errno));
  bool ok = fputs(text, f) >= 0;
  ok = fclose(f) == 0 && ok;
  return ok ? NULL : kiln_status_make(KILN_DATA_LOSS, "cannot write %s: %s", path, strerror(errno));
}

kiln_status kiln_bench_plot(const kiln_bench_results_t *rs, const char *svg_path) {
  kiln_strbuf_t data = {0}, script = {0};
  size_t rows = 0;
  plot_data(&data, rs, &rows);
  if (!rows) {
    kiln_strbuf_free(&data);
    return KILN_ERR_INVALID("--plot: no module ran without error: nothing to draw");
  }
  char dir[] = "/tmp/kiln-bench-plot-XXXXXX";
  if (!mkdtemp(dir)) {
    kiln_strbuf_free(&data);
    return kiln_status_make(KILN_UNAVAILABLE, "--plot: cannot make a temporary folder: %s",
                            strerror(errno));
  }
  char dat[sizeof dir + 16], gp[sizeof dir + 16];
  snprintf(dat, sizeof dat, "%s/data", dir);
  snprintf(gp, sizeof gp, "%s/plot.gp", dir);
  bool labels = rows <= 40;
  kiln_strbuf_printf(&script,
                     "set terminal %s size %d,900 enhanced font 'sans,10' background 'white'\n"
                     "set output '%s'\n"
                     "set multiplot layout 2,1 title '%s %s (%s): %zu modules'\n"
                     "set grid ytics\nset logscale y\nset key top left\n"
                     "set xrange [-1:%zu]\n%s\n"
                     "set ylabel 'run time p50 (us)'\n"
                     "plot '%s' using 1:3%s with points pt 7 ps 0.6 title 'command buffers on', "
                     "'' using 1:4 with points pt 6 ps 0.6 title 'command buffers off'\n"
                     "set ylabel 'compile time (ms)'\n"
                     "plot '%s' using 1:5%s with points pt 7 ps 0.6 title 'cold (empty disk "
                     "cache)', '' using 1:6 with points pt 6 ps 0.6 title 'warm (disk cache)'\n"
                     "unset multiplot\n",
                     kiln_str_ends_with(svg_path, ".png") ? "pngcairo" : "svg",
                     labels ? 1200 : 1600, svg_path, "kiln-bench",
                     rs->plugin_version ? rs->plugin_version : "", rs->platform ? rs->platform : "",
                     rows, rows,
                     labels ? "set xtics rotate by -45 font ',8'"
                            : "set xlabel 'module (the ones that ran, in the order of the JSON)'",
                     dat, labels ? ":xtic(2)" : "", dat, labels ? ":xtic(2)" : "");
  kiln_status s = write_text(dat, kiln_strbuf_cstr(&data));
  if (!s) s = write_text(gp, kiln_strbuf_cstr(&script));
  if (!s) {
    pid_t pid = fork();
    if (pid == 0) {
      execlp("gnuplot", "gnuplot", gp, (char *)NULL);
      _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
      s = kiln_status_make(KILN_UNAVAILABLE, "--plot: cannot run gnuplot: %s", strerror(errno));
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
      s = kiln_status_make(
          KILN_UNAVAILABLE,
          "--plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox)");
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      s = kiln_status_make(KILN_INTERNAL, "--plot: gnuplot failed on %s (exit %d)", gp,
                           WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  if (!s) {
    unlink(dat);
    unlink(gp);
    rmdir(dir);
  }
  kiln_strbuf_free(&data);
  kiln_strbuf_free(&script);
  return s;
}
