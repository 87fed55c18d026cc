/* The on-disk blob cache (disk_cache.h). */
#include "base/disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/str.h"
#include "base/version.h"

#define MAGIC "KILNDC01"
#define MAX_KINDS 8

typedef struct kind_counters {
  char name[32];
  _Atomic int64_t hits, misses, rejected, writes;
} kind_counters_t;

static kind_counters_t g_kinds[MAX_KINDS];
static _Atomic int g_num_kinds;
static pthread_mutex_t g_kinds_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool g_warned;

static kind_counters_t *counters_of(const char *kind) {
  int n = atomic_load(&g_num_kinds);
  for (int i = 0; i < n; i++)
    if (!strcmp(g_kinds[i].name, kind)) return &g_kinds[i];
  pthread_mutex_lock(&g_kinds_mu);
  n = atomic_load(&g_num_kinds);
  kind_counters_t *k = NULL;
  for (int i = 0; i < n && !k; i++)
    if (!strcmp(g_kinds[i].name, kind)) k = &g_kinds[i];
  if (!k && n < MAX_KINDS) {
    k = &g_kinds[n];
    snprintf(k->name, sizeof(k->name), "%s", kind);
    atomic_store(&g_num_kinds, n + 1);
  }
  pthread_mutex_unlock(&g_kinds_mu);
  return k ? k : &g_kinds[MAX_KINDS - 1];
}

static void warn_once(const char *what, const char *path) {
  if (atomic_exchange(&g_warned, true)) return;
  KILN_LOG_W("compile cache: cannot %s %s: %s (the cache is skipped)", what, path, strerror(errno));
}

char *kiln_disk_cache_path(const char *dir, const char *kind, const uint64_t key[2]) {
  char hex[33];
  kiln_hash_hex(key, hex);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "%s/%s/%s", dir, kind, hex);
  return kiln_strbuf_take(&b);
}

/* The header: magic, kind (32 bytes), version (16 bytes), key, payload length, checksum. */
typedef struct header {
  char magic[8];
  char kind[32];
  char version[16];
  uint64_t key[2];
  uint64_t len;
  uint64_t sum[2];
} header_t;

static void make_header(header_t *h, const char *kind, const uint64_t key[2], const void *data,
                        size_t len) {
  memset(h, 0, sizeof(*h));
  memcpy(h->magic, MAGIC, 8);
  snprintf(h->kind, sizeof(h->kind), "%s", kind);
  snprintf(h->version, sizeof(h->version), "%s", KILN_VERSION_STRING);
  h->key[0] = key[0];
  h->key[1] = key[1];
  h->len = len;
  kiln_hash128(data, len, h->sum);
}

bool kiln_disk_cache_get(const char *dir, const char *kind, const uint64_t key[2], void **data,
                         size_t *len) {
  *data = NULL;
  *len = 0;
  if (!dir || !*dir) return false;
  kind_counters_t *kc = counters_of(kind);
  char *path = kiln_disk_cache_path(dir, kind, key);
  FILE *f = fopen(path, "rb");
  if (!f) {
    atomic_fetch_add(&kc->misses, 1);
    kiln_free(path);
    return false;
  }
  header_t h, want;
  bool ok = fread(&h, sizeof(h), 1, f) == 1;
  void *buf = NULL;
  if (ok) {
    char kind_field[32] = {0}, version_field[16] = {0};
    snprintf(kind_field, sizeof(kind_field), "%s", kind);
    snprintf(version_field, sizeof(version_field), "%s", KILN_VERSION_STRING);
    ok = !memcmp(h.magic, MAGIC, 8) && !memcmp(h.kind, kind_field, sizeof(kind_field)) &&
         !memcmp(h.version, version_field, sizeof(version_field)) && h.key[0] == key[0] &&
         h.key[1] == key[1] && h.len < ((uint64_t)1 << 40);
  }
  if (ok) {
    buf = kiln_malloc(h.len ? (size_t)h.len : 1);
    ok = fread(buf, 1, (size_t)h.len, f) == h.len && fgetc(f) == EOF;
  }
  fclose(f);
  if (ok) {
    make_header(&want, kind, key, buf, (size_t)h.len);
    ok = want.sum[0] == h.sum[0] && want.sum[1] == h.sum[1];
  }
  if (!ok) {
    KILN_LOG_W("compile cache: ignoring corrupt or foreign entry %s (it will be rebuilt)", path);
    kiln_free(buf);
    unlink(path);
    atomic_fetch_add(&kc->rejected, 1);
    atomic_fetch_add(&kc->misses, 1);
    kiln_free(path);
    return false;
  }
  kiln_free(path);
  atomic_fetch_add(&kc->hits, 1);
  *data = buf;
  *len = (size_t)h.len;
  return true;
}

/* mkdir -p for `path`'s folders up to and including `path`. */
static bool make_dirs(const char *path) {
  char *p = kiln_strdup(path);
  bool ok = true;
  for (char *c = p + 1; *c && ok; c++) {
    if (*c != '/') continue;
    *c = 0;
    if (mkdir(p, 0755) && errno != EEXIST) ok = false;
    *c = '/';
  }
  if (ok && mkdir(p, 0755) && errno != EEXIST) ok = false;
  kiln_free(p);
  return ok;
}

void kiln_disk_cache_put(const char *dir, const char *kind, const uint64_t key[2], const void *data,
                         size_t len) {
  if (!dir || !*dir) return;
  kind_counters_t *kc = counters_of(kind);
  kiln_strbuf_t folder = {0};
  kiln_strbuf_printf(&folder, "%s/%s", dir, kind);
  if (!make_dirs(kiln_strbuf_cstr(&folder))) {
    warn_once("create", kiln_strbuf_cstr(&folder));
    kiln_strbuf_free(&folder);
    return;
  }
  char *path = kiln_disk_cache_path(dir, kind, key);
  kiln_strbuf_t tmp = {0};
  static _Atomic uint64_t counter;
  kiln_strbuf_printf(&tmp, "%s.tmp.%ld.%llu", path, (long)getpid(),
                     (unsigned long long)atomic_fetch_add(&counter, 1));
  header_t h;
  make_header(&h, kind, key, data, len);
  int fd = open(kiln_strbuf_cstr(&tmp), O_WRONLY | O_CREAT | O_EXCL, 0644);
  bool ok = fd >= 0;
  if (ok) {
    FILE *f = fdopen(fd, "wb");
    ok = f && fwrite(&h, sizeof(h), 1, f) == 1 && (len == 0 || fwrite(data, 1, len, f) == len);
    if (f)
      ok = fclose(f) == 0 && ok;
    else
      close(fd);
  }
  if (ok && rename(kiln_strbuf_cstr(&tmp), path) == 0) {
    atomic_fetch_add(&kc->writes, 1);
  } else {
    warn_once("write", kiln_strbuf_cstr(&tmp));
    unlink(kiln_strbuf_cstr(&tmp));
  }
  kiln_strbuf_free(&tmp);
  kiln_strbuf_free(&folder);
  kiln_free(path);
}

kiln_disk_cache_counters_t kiln_disk_cache_counters(const char *kind) {
  kiln_disk_cache_counters_t c = {0};
  int n = atomic_load(&g_num_kinds);
  for (int i = 0; i < n; i++) {
    if (kind && strcmp(g_kinds[i].name, kind)) continue;
    c.hits += atomic_load(&g_kinds[i].hits);
    c.misses += atomic_load(&g_kinds[i].misses);
    c.rejected += atomic_load(&g_kinds[i].rejected);
    c.writes += atomic_load(&g_kinds[i].writes);
  }
  return c;
}
