#include "compiler/passes/pass.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/log.h"
#include "base/str.h"

static const kiln_pass_t kPasses[] = {
#define KILN_PASS(name, fn, summary) {name, fn, summary},
#include "compiler/passes/passes.def"
#undef KILN_PASS
    {NULL, NULL, NULL},
};

const kiln_pass_t *kiln_pass_registry(int *out_count) {
  *out_count = (int)(sizeof kPasses / sizeof kPasses[0]) - 1;
  return kPasses;
}

const kiln_pass_t *kiln_pass_find(const char *name) {
  for (const kiln_pass_t *p = kPasses; p->name; p++)
    if (strcmp(p->name, name) == 0) return p;
  return NULL;
}

void kiln_pass_runner_init(kiln_pass_runner_t *r, const kiln_pass_options_t *opts) {
  memset(r, 0, sizeof *r);
  if (opts) {
    r->own = *opts;
  } else {
    r->own.verify = -1;
  }
  if (r->own.dump_dir && !*r->own.dump_dir) r->own.dump_dir = NULL;
  if (r->own.verify < 0) r->own.verify = KILN_PASS_VERIFY_DEFAULT;
  r->opts = &r->own;
  r->dump_dir = r->own.dump_dir;
  r->verify = r->own.verify != 0;
}

kiln_status kiln_pass_dump_module(const char *dir, int index, const kiln_hlo_module_t *m,
                                  const char *suffix) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return kiln_status_make(KILN_PERMISSION_DENIED, "cannot create dump folder '%s': %s", dir,
                            strerror(errno));
  kiln_strbuf_t path = {0};
  kiln_strbuf_printf(&path, "%s/%04d.%s.%s.hlo", dir, index, m->name, suffix);
  FILE *f = fopen(path.data, "w");
  if (!f) {
    kiln_status s = kiln_status_make(KILN_PERMISSION_DENIED, "cannot write dump '%s': %s",
                                     path.data, strerror(errno));
    kiln_strbuf_free(&path);
    return s;
  }
  char *text = kiln_hlo_module_to_string(m);
  fputs(text, f);
  kiln_free(text);
  fclose(f);
  kiln_strbuf_free(&path);
  return NULL;
}

static double clock_seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Adds one run of `pass` to `t` (passes beyond KILN_PASS_TIMINGS_MAX are not recorded). */
static void record_timing(kiln_pass_timings_t *t, const kiln_pass_t *pass, double seconds,
                          double cpu_seconds, bool did) {
  int i = 0;
  while (i < t->num_entries && strcmp(t->entries[i].name, pass->name) != 0) i++;
  if (i == t->num_entries) {
    if (i == KILN_PASS_TIMINGS_MAX) return;
    t->entries[t->num_entries++] = (kiln_pass_timing_t){.name = pass->name};
  }
  t->entries[i].seconds += seconds;
  t->entries[i].cpu_seconds += cpu_seconds;
  t->entries[i].runs++;
  t->entries[i].changed += did;
}

kiln_status kiln_pass_runner_run(kiln_pass_runner_t *r, const kiln_pass_t *pass,
                                 kiln_hlo_module_t *m, bool *changed) {
  bool did = false;
  kiln_pass_timings_t *timings = r->opts->timings;
  double t0 = timings ? clock_seconds(CLOCK_MONOTONIC) : 0;
  double c0 = timings ? clock_seconds(CLOCK_THREAD_CPUTIME_ID) : 0;
  kiln_status st = pass->run(m, r->opts, &did);
  if (timings)
    record_timing(timings, pass, clock_seconds(CLOCK_MONOTONIC) - t0,
                  clock_seconds(CLOCK_THREAD_CPUTIME_ID) - c0, did);
  KILN_RETURN_IF_ERROR(st, "in pass '%s' on module '%s'", pass->name, m->name);
  if (!did) return NULL;
  if (changed) *changed = true;
  if (r->opts->log_changes) fprintf(stderr, "kiln: pass %s changed %s\n", pass->name, m->name);
  KILN_LOG_D("pass %s changed module %s", pass->name, m->name);
  if (r->verify)
    KILN_RETURN_IF_ERROR(kiln_hlo_module_verify(m), "module is invalid after pass '%s'", pass->name);
  if (r->dump_dir) KILN_RETURN_IF_ERROR_PLAIN(kiln_pass_dump_module(r->dump_dir, r->dump_counter++, m, pass->name));
  if (r->opts->after_pass) return r->opts->after_pass(r->opts->after_pass_ctx, pass->name, m);
  return NULL;
}

kiln_status kiln_pass_runner_run_fixed_point(kiln_pass_runner_t *r, const kiln_pass_t *const *passes,
                                             int n, kiln_hlo_module_t *m, bool *changed) {
  int limit = r->opts->max_fixed_point_iterations > 0 ? r->opts->max_fixed_point_iterations : 25;
  for (int iter = 0; iter < limit; iter++) {
    bool any = false;
    for (int i = 0; i < n; i++) KILN_RETURN_IF_ERROR_PLAIN(kiln_pass_runner_run(r, passes[i], m, &any));
    if (!any) return NULL;
    if (changed) *changed = true;
  }
  KILN_LOG_W("fixed-point group starting with '%s' did not converge in %d iterations on %s",
             n ? passes[0]->name : "?", limit, m->name);
  return NULL;
}

static kiln_status unknown_pass(const char *name, size_t len) {
  kiln_strbuf_t b = {0};
  for (const kiln_pass_t *p = kPasses; p->name; p++) kiln_strbuf_printf(&b, "%s%s", b.len ? ", " : "", p->name);
  kiln_status s = kiln_status_make(KILN_INVALID_ARGUMENT, "unknown pass '%.*s'; registered passes: %s",
                                   (int)len, name, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return s;
}

kiln_status kiln_pass_run_list(kiln_hlo_module_t *m, const char *list,
                               const kiln_pass_options_t *opts) {
  kiln_pass_runner_t r;
  kiln_pass_runner_init(&r, opts);
  const char *p = list;
  const kiln_pass_t *group[64] = {0};
  while (*p) {
    while (*p == ',' || *p == ' ') p++;
    if (!*p) break;
    bool in_group = *p == '(';
    if (in_group) p++;
    int n = 0;
    for (;;) {
      while (*p == ' ') p++;
      const char *start = p;
      while (*p && *p != ',' && *p != ')' && *p != ' ' && *p != '(') p++;
      size_t len = (size_t)(p - start);
      if (len) {
        char name[128];
        if (len >= sizeof name) return unknown_pass(start, len);
        memcpy(name, start, len);
        name[len] = 0;
        const kiln_pass_t *pass = kiln_pass_find(name);
        if (!pass) return unknown_pass(start, len);
        if (n == 64) return kiln_status_make(KILN_INVALID_ARGUMENT, "a pass group holds at most 64 passes");
        group[n++] = pass;
      }
      while (*p == ' ') p++;
      if (!in_group) break;
      if (*p == ',') {
        p++;
        continue;
      }
      if (*p == ')') {
        p++;
        break;
      }
      return kiln_status_make(KILN_INVALID_ARGUMENT, "pass list '%s': missing ')' for a group", list);
    }
    if (*p == '(')
      return kiln_status_make(KILN_INVALID_ARGUMENT, "pass list '%s': expected ',' before '('", list);
    if (in_group)
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pass_runner_run_fixed_point(&r, group, n, m, NULL));
    else if (n)
      KILN_RETURN_IF_ERROR_PLAIN(kiln_pass_runner_run(&r, group[0], m, NULL));
  }
  return NULL;
}
