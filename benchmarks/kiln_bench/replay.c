/* Replay folders (replay.h). */
#include "benchmarks/kiln_bench/replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/str.h"
#include "tools/common/npy.h"
#include "tools/common/pjrt_run.h"

#define MANIFEST_MAGIC "kiln-replay 1"
#define MAX_RANK 16
#define MAX_ARRAYS 4096

static kiln_status write_bytes(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return kiln_status_make(KILN_PERMISSION_DENIED, "cannot write %s: %s", path, strerror(errno));
  bool ok = fwrite(data, 1, len, f) == len;
  ok = fclose(f) == 0 && ok;
  return ok ? NULL : kiln_status_make(KILN_DATA_LOSS, "cannot write %s: %s", path, strerror(errno));
}

static void describe(kiln_strbuf_t *b, const char *key, const kiln_literal_t *l) {
  kiln_strbuf_printf(b, "%s %s", key, kiln_elem_type_name(l->shape->type));
  for (int d = 0; d < l->shape->rank; d++)
    kiln_strbuf_printf(b, " %lld", (long long)l->shape->dims[d]);
  kiln_strbuf_append_char(b, '\n');
}

static void destroy_all(const kiln_bench_client_t *c, PJRT_Buffer **bufs, size_t n) {
  for (size_t i = 0; i < n; i++) kiln_bench_buffer_destroy(c, bufs[i]);
}

kiln_status kiln_bench_replay_save(const kiln_bench_client_t *c, const char *dir,
                                   const char *module_name, const char *code, size_t len,
                                   const char *format, kiln_literal_t *const *args, int num_args) {
  if (num_args > MAX_ARRAYS)
    return KILN_ERR_UNIMPLEMENTED("%s has %d inputs; a replay folder holds at most %d", module_name,
                                  num_args, MAX_ARRAYS);
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return kiln_status_make(KILN_PERMISSION_DENIED, "cannot make the replay folder %s: %s", dir,
                            strerror(errno));
  kiln_bench_exe_t exe;
  KILN_RETURN_IF_ERROR(kiln_bench_compile(c, code, len, format, &exe), "while compiling %s",
                       module_name);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  PJRT_Buffer **in = kiln_calloc((size_t)num_args + 1, sizeof(*in));
  PJRT_Buffer **out = kiln_calloc(exe.num_outputs + 1, sizeof(*out));
  kiln_strbuf_t m = {0};
  kiln_strbuf_printf(
      &m, "%s\nmodule %s\nplugin %s\nplugin_version %s\nplatform %s\nexecutable executable.bin\n",
      MANIFEST_MAGIC, module_name, c->plugin->path, c->plugin->version, c->platform);
  kiln_status s =
      exe.num_outputs > MAX_ARRAYS
          ? KILN_ERR_UNIMPLEMENTED("%s has %zu outputs; a replay folder holds at most %d",
                                   module_name, exe.num_outputs, MAX_ARRAYS)
          : NULL;
  for (int i = 0; i < num_args && !s; i++) {
    s = kiln_bench_upload(c, args[i], &in[i]);
    if (!s) s = kiln_npy_write_file(kiln_arena_printf(&arena, "%s/arg%d.npy", dir, i), args[i]);
    if (!s) describe(&m, kiln_arena_printf(&arena, "arg%d", i), args[i]);
    if (s) s = kiln_status_annotate(s, "for input %d", i);
  }
  if (!s) s = kiln_bench_execute(c, &exe, in, (size_t)num_args, out, KILN_BENCH_SPAN_NONE, NULL);
  for (size_t o = 0; o < exe.num_outputs && !s; o++) {
    kiln_literal_t *l = NULL;
    s = kiln_bench_download(c, out[o], &arena, &l);
    if (!s) s = kiln_npy_write_file(kiln_arena_printf(&arena, "%s/out%zu.npy", dir, o), l);
    if (!s) describe(&m, kiln_arena_printf(&arena, "out%zu", o), l);
    if (s) s = kiln_status_annotate(s, "for output %zu", o);
  }
  char *blob = NULL;
  size_t blob_len = 0;
  if (!s) s = kiln_bench_serialize(c, &exe, &blob, &blob_len);
  if (!s) s = write_bytes(kiln_arena_printf(&arena, "%s/executable.bin", dir), blob, blob_len);
  if (!s)
    s = write_bytes(kiln_arena_printf(&arena, "%s/MANIFEST", dir), kiln_strbuf_cstr(&m), m.len);
  kiln_free(blob);
  destroy_all(c, out, exe.num_outputs);
  destroy_all(c, in, (size_t)num_args);
  kiln_free(out);
  kiln_free(in);
  kiln_bench_exe_destroy(c, &exe);
  kiln_strbuf_free(&m);
  kiln_arena_destroy(&arena);
  return s;
}

/* ---- replay ---------------------------------------------------------------------------- */

typedef struct manifest_array {
  kiln_elem_type_t type;
  int rank;
  int64_t dims[MAX_RANK];
} manifest_array_t;

typedef struct manifest {
  char module[256], plugin[1024], version[96], platform[32], executable[256];
  int num_args, num_outs;
  manifest_array_t *args, *outs; /* kiln_malloc'ed, MAX_ARRAYS entries each */
} manifest_t;

static bool elem_type_named(const char *name, kiln_elem_type_t *out) {
  for (int t = 0; t < 64; t++) {
    kiln_elem_type_t k;
    if (kiln_pjrt_elem_type_of((PJRT_Buffer_Type)t, &k) && !strcmp(kiln_elem_type_name(k), name)) {
      *out = k;
      return true;
    }
  }
  return false;
}

static kiln_status missing(const char *dir, const char *file) {
  return kiln_status_make(KILN_NOT_FOUND,
                          "%s/%s is missing: the replay folder is incomplete (kiln-run "
                          "--save=DIR writes MANIFEST, executable.bin, arg<I>.npy and out<I>.npy)",
                          dir, file);
}

/* Reads "arg3 f32 2 3" into m->args[3] (or outs). */
static kiln_status read_array_line(manifest_t *m, const char *key, char *rest, const char *path,
                                   int line) {
  bool is_arg = key[0] == 'a';
  char *end;
  long idx = strtol(key + 3, &end, 10);
  if (*end || idx < 0 || idx >= MAX_ARRAYS)
    return KILN_ERR_INVALID("%s:%d: bad key \"%s\" (arg<I> or out<I>, I < %d)", path, line, key,
                            MAX_ARRAYS);
  manifest_array_t *a = is_arg ? &m->args[idx] : &m->outs[idx];
  char *tok = strtok(rest, " ");
  if (!tok || !elem_type_named(tok, &a->type))
    return KILN_ERR_INVALID("%s:%d: \"%s\" is not an element type a PJRT buffer holds", path, line,
                            tok ? tok : "");
  a->rank = 0;
  while ((tok = strtok(NULL, " ")) && a->rank < MAX_RANK)
    a->dims[a->rank++] = strtoll(tok, NULL, 10);
  int *count = is_arg ? &m->num_args : &m->num_outs;
  if (idx + 1 > *count) *count = (int)idx + 1;
  return NULL;
}

static kiln_status read_manifest(const char *dir, manifest_t *m) {
  memset(m, 0, sizeof(*m));
  m->args = kiln_calloc(MAX_ARRAYS, sizeof(*m->args));
  m->outs = kiln_calloc(MAX_ARRAYS, sizeof(*m->outs));
  char path[1200];
  snprintf(path, sizeof path, "%s/MANIFEST", dir);
  char *text = NULL;
  size_t len = 0;
  kiln_status s = kiln_read_file(path, &text, &len);
  if (s) {
    kiln_status_free(s);
    return missing(dir, "MANIFEST");
  }
  int line = 0;
  char *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l && !s; l = strtok_r(NULL, "\n", &save)) {
    line++;
    if (line == 1) {
      if (strcmp(l, MANIFEST_MAGIC))
        s = KILN_ERR_INVALID("%s: not a kiln replay manifest (its first line is not \"%s\")", path,
                             MANIFEST_MAGIC);
      continue;
    }
    char *sp = strchr(l, ' ');
    if (!sp) {
      s = KILN_ERR_INVALID("%s:%d: expected \"key value\", found \"%s\"", path, line, l);
      break;
    }
    *sp = 0;
    char *v = sp + 1;
    struct {
      const char *key;
      char *dst;
      size_t size;
    } strs[] = {{"module", m->module, sizeof m->module},
                {"plugin", m->plugin, sizeof m->plugin},
                {"plugin_version", m->version, sizeof m->version},
                {"platform", m->platform, sizeof m->platform},
                {"executable", m->executable, sizeof m->executable}};
    bool done = false;
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]) && !done; i++)
      if (!strcmp(l, strs[i].key)) {
        snprintf(strs[i].dst, strs[i].size, "%s", v);
        done = true;
      }
    if (!done && (kiln_str_starts_with(l, "arg") || kiln_str_starts_with(l, "out")))
      s = read_array_line(m, l, v, path, line);
    /* Other keys: written by a later kiln; ignored. */
  }
  kiln_free(text);
  if (!s && (!m->version[0] || !m->executable[0]))
    s = KILN_ERR_INVALID("%s: no plugin_version or executable line", path);
  return s;
}

static void manifest_free(manifest_t *m) {
  kiln_free(m->args);
  kiln_free(m->outs);
}

static kiln_status read_npy(const char *dir, const char *name, const manifest_array_t *a,
                            kiln_arena_t *arena, kiln_literal_t **out) {
  char *path = kiln_arena_printf(arena, "%s/%s", dir, name);
  struct stat st;
  if (stat(path, &st) != 0) return missing(dir, name);
  kiln_shape_t *sh = kiln_shape_make_array_with_default_layout(arena, a->type, a->rank, a->dims);
  return kiln_npy_read_file(path, sh, arena, out);
}

/* Bit-for-bit comparison of a saved output with this run's. */
static bool same_bits(const kiln_literal_t *want, const kiln_literal_t *got, const char *name,
                      char *why, size_t why_size) {
  if (!kiln_shape_equal(want->shape, got->shape, false)) {
    char *ws = kiln_shape_to_string(want->shape, false),
         *gs = kiln_shape_to_string(got->shape, false);
    snprintf(why, why_size, "%s: saved %s, replay made %s", name, ws, gs);
    kiln_free(ws);
    kiln_free(gs);
    return false;
  }
  size_t eb = kiln_elem_type_storage_bytes(want->shape->type);
  const unsigned char *w = want->data, *g = got->data;
  for (int64_t i = 0; i < want->num_elements; i++) {
    if (!memcmp(w + (size_t)i * eb, g + (size_t)i * eb, eb)) continue;
    uint64_t wv = 0, gv = 0;
    memcpy(&wv, w + (size_t)i * eb, eb < 8 ? eb : 8);
    memcpy(&gv, g + (size_t)i * eb, eb < 8 ? eb : 8);
    snprintf(why, why_size, "%s element %lld: 0x%llx saved, 0x%llx now", name, (long long)i,
             (unsigned long long)wv, (unsigned long long)gv);
    return false;
  }
  return true;
}

static kiln_status replay(const kiln_bench_plugin_t *p, const char *platform, const char *dir,
                          const manifest_t *m, kiln_arena_t *arena,
                          kiln_bench_replay_report_t *rep) {
  if (strcmp(m->version, p->version))
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "%s was saved by %s (%s); the plugin loaded is %s (%s): replay it with "
                            "that plugin (--plugin=PATH) or save it again with this one",
                            dir, m->version, m->plugin, p->version, p->path);
  kiln_literal_t **args = kiln_arena_alloc(arena, sizeof(*args) * (size_t)(m->num_args + 1));
  for (int i = 0; i < m->num_args; i++)
    KILN_RETURN_IF_ERROR_PLAIN(
        read_npy(dir, kiln_arena_printf(arena, "arg%d.npy", i), &m->args[i], arena, &args[i]));
  kiln_literal_t **want = kiln_arena_alloc(arena, sizeof(*want) * (size_t)(m->num_outs + 1));
  for (int i = 0; i < m->num_outs; i++)
    KILN_RETURN_IF_ERROR_PLAIN(
        read_npy(dir, kiln_arena_printf(arena, "out%d.npy", i), &m->outs[i], arena, &want[i]));
  char *blob_path = kiln_arena_printf(arena, "%s/%s", dir, m->executable);
  char *blob = NULL;
  size_t blob_len = 0;
  kiln_status s = kiln_read_file(blob_path, &blob, &blob_len);
  if (s) {
    kiln_status_free(s);
    return missing(dir, m->executable);
  }
  kiln_bench_client_options_t co = {.platform = platform ? platform : m->platform,
                                    .command_buffers = -1};
  kiln_bench_client_t c;
  s = kiln_bench_client_create(p, &co, &c);
  if (s) {
    kiln_free(blob);
    return s;
  }
  kiln_bench_exe_t exe = {0};
  double t0 = kiln_clock_ms();
  s = kiln_bench_deserialize(&c, blob, blob_len, &exe);
  rep->load_ms = kiln_clock_ms() - t0;
  kiln_free(blob);
  if (s) s = kiln_status_annotate(s, "while loading %s", blob_path);
  if (!s && exe.num_outputs != (size_t)m->num_outs)
    s = KILN_ERR_INVALID("%s: the executable has %zu outputs, the manifest lists %d", dir,
                         exe.num_outputs, m->num_outs);
  PJRT_Buffer **in = kiln_calloc((size_t)m->num_args + 1, sizeof(*in));
  PJRT_Buffer **out = kiln_calloc(exe.num_outputs + 1, sizeof(*out));
  for (int i = 0; i < m->num_args && !s; i++) {
    s = kiln_bench_upload(&c, args[i], &in[i]);
    if (s) s = kiln_status_annotate(s, "for arg%d.npy", i);
  }
  t0 = kiln_clock_ms();
  if (!s)
    s = kiln_bench_execute(&c, &exe, in, (size_t)m->num_args, out, KILN_BENCH_SPAN_NONE, NULL);
  rep->run_ms = kiln_clock_ms() - t0;
  for (size_t o = 0; o < exe.num_outputs && !s; o++) {
    kiln_literal_t *got = NULL;
    s = kiln_bench_download(&c, out[o], arena, &got);
    char name[32], why[sizeof rep->first_mismatch];
    snprintf(name, sizeof name, "out%zu", o);
    if (!s && !same_bits(want[o], got, name, why, sizeof why) && !rep->mismatches++)
      snprintf(rep->first_mismatch, sizeof rep->first_mismatch, "%s", why);
  }
  destroy_all(&c, out, exe.num_outputs);
  destroy_all(&c, in, (size_t)m->num_args);
  kiln_free(out);
  kiln_free(in);
  kiln_bench_exe_destroy(&c, &exe);
  kiln_bench_client_destroy(&c);
  return s;
}

kiln_status kiln_bench_replay_run(const kiln_bench_plugin_t *p, const char *platform,
                                  const char *dir, kiln_bench_replay_report_t *rep) {
  memset(rep, 0, sizeof(*rep));
  manifest_t m;
  kiln_status s = read_manifest(dir, &m);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  if (!s) {
    snprintf(rep->module, sizeof rep->module, "%s", m.module);
    rep->inputs = m.num_args;
    rep->outputs = m.num_outs;
    s = replay(p, platform, dir, &m, &arena, rep);
  }
  kiln_arena_destroy(&arena);
  manifest_free(&m);
  return s;
}
