/* The on-disk blob cache (disk_cache.h). */
#define _GNU_SOURCE /* dladdr */
#include "base/disk_cache.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
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
  _Atomic int64_t hits, misses, rejected, writes, evicted;
} kind_counters_t;

static kind_counters_t g_kinds[MAX_KINDS];
static _Atomic int g_num_kinds;
static pthread_mutex_t g_kinds_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool g_warned;

static kind_counters_t *counters_of(const char *kind) {
  int n = atomic_load(&g_num_kinds);
  for (int i = 0; i < n; i++)
    if (!strcmp(g_kinds[i].name, kind)) return &g_kinds[i];
  kiln_mutex_lock(&g_kinds_mu);
  n = atomic_load(&g_num_kinds);
  kind_counters_t *k = NULL;
  for (int i = 0; i < n && !k; i++)
    if (!strcmp(g_kinds[i].name, kind)) k = &g_kinds[i];
  if (!k && n < MAX_KINDS) {
    k = &g_kinds[n];
    snprintf(k->name, sizeof(k->name), "%s", kind);
    atomic_store(&g_num_kinds, n + 1);
  }
  kiln_mutex_unlock(&g_kinds_mu);
  return k ? k : &g_kinds[MAX_KINDS - 1];
}

static void warn_once(const char *what, const char *path) {
  if (atomic_exchange(&g_warned, true)) return;
  KILN_LOG_W("compile cache: cannot %s %s: %s (the cache is skipped)", what, path, strerror(errno));
}

/* The build of kiln this code belongs to: the size and modification time of the binary that
 * holds it (the plugin or an executable). Mixed into every key, so entries written by a
 * rebuilt kiln that still carries the same version string are never read back as current. */
static pthread_once_t g_build_once = PTHREAD_ONCE_INIT;
static uint64_t g_build_identity[2];

static void compute_build_identity(void) {
  kiln_hasher_t h;
  kiln_hash_init(&h, 0x6275696c64ull);
  kiln_hash_field(&h, KILN_VERSION_STRING, strlen(KILN_VERSION_STRING));
  Dl_info info;
  struct stat st;
  if (dladdr((void *)&compute_build_identity, &info) && info.dli_fname &&
      stat(info.dli_fname, &st) == 0) {
    int64_t facts[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                        (int64_t)st.st_mtim.tv_nsec};
    kiln_hash_field(&h, facts, sizeof(facts));
  }
  kiln_hash_final(&h, g_build_identity);
}

/* `key` as stored: mixed with the build identity. */
static void stored_key(const uint64_t key[2], uint64_t out[2]) {
  kiln_once(&g_build_once, compute_build_identity);
  kiln_hasher_t h;
  kiln_hash_init(&h, 0x73746f726564ull);
  kiln_hash_field(&h, g_build_identity, sizeof(g_build_identity));
  kiln_hash_field(&h, key, 2 * sizeof(uint64_t));
  kiln_hash_final(&h, out);
}

char *kiln_disk_cache_path(const char *dir, const char *kind, const uint64_t key[2]) {
  char hex[33];
  uint64_t sk[2];
  stored_key(key, sk);
  kiln_hash_hex(sk, hex);
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
  stored_key(key, h->key);
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
  uint64_t sk[2];
  stored_key(key, sk);
  bool ok = fread(&h, sizeof(h), 1, f) == 1;
  void *buf = NULL;
  if (ok) {
    char kind_field[32] = {0}, version_field[16] = {0};
    snprintf(kind_field, sizeof(kind_field), "%s", kind);
    snprintf(version_field, sizeof(version_field), "%s", KILN_VERSION_STRING);
    ok = !memcmp(h.magic, MAGIC, 8) && !memcmp(h.kind, kind_field, sizeof(kind_field)) &&
         !memcmp(h.version, version_field, sizeof(version_field)) && h.key[0] == sk[0] &&
         h.key[1] == sk[1] && h.len < ((uint64_t)1 << 40);
  }
  if (ok) {
    /* The header's length is not trusted before it matches the file's: a flipped bit there
     * must not make us allocate terabytes. */
    struct stat st;
    ok = fstat(fileno(f), &st) == 0 && (uint64_t)st.st_size == sizeof(h) + h.len;
  }
  if (ok) {
    buf = kiln_try_malloc(h.len ? (size_t)h.len : 1);
    ok = buf && fread(buf, 1, (size_t)h.len, f) == h.len && fgetc(f) == EOF;
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
  /* Used now: the LRU order is the entries' modification times. */
  utimensat(AT_FDCWD, path, NULL, 0);
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

/* ---- the size bound ---- */

#define DEFAULT_MAX_BYTES ((int64_t)1 << 30)

static _Atomic int64_t g_max_override = -1;
static pthread_mutex_t g_size_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_size_dir;     /* the folder g_size_bytes measures (guarded by g_size_mu) */
static int64_t g_size_bytes; /* its entries' bytes as this process knows them */

int64_t kiln_disk_cache_max_bytes(void) {
  int64_t o = atomic_load(&g_max_override);
  return o >= 0 ? o : DEFAULT_MAX_BYTES;
}

bool kiln_disk_cache_parse_size(const char *s, int64_t *out) {
  if (!s || !*s) return false;
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  if (*end == 'K' || *end == 'k') v *= 1024.0;
  if (*end == 'M' || *end == 'm') v *= 1024.0 * 1024.0;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024.0 * 1024.0;
  *out = (int64_t)v;
  return true;
}

void kiln_disk_cache_set_max_bytes(int64_t bytes) {
  atomic_store(&g_max_override, bytes < 0 ? -1 : bytes);
}

typedef struct cache_file {
  char *path;
  char kind[32];
  int64_t size;
  struct timespec mtime;
} cache_file_t;

typedef struct cache_files {
  cache_file_t *data;
  size_t len, cap;
  int64_t bytes;
} cache_files_t;

/* Every finished entry under dir/<kind>/ (temporary files of writes in progress are left
 * alone). */
static void list_entries(const char *dir, cache_files_t *out) {
  DIR *top = opendir(dir);
  if (!top) return;
  struct dirent *k;
  while ((k = readdir(top))) {
    if (k->d_name[0] == '.') continue;
    kiln_strbuf_t sub = {0};
    kiln_strbuf_printf(&sub, "%s/%s", dir, k->d_name);
    DIR *d = opendir(kiln_strbuf_cstr(&sub));
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp.")) continue;
      kiln_strbuf_t path = {0};
      kiln_strbuf_printf(&path, "%s/%s", kiln_strbuf_cstr(&sub), e->d_name);
      struct stat st;
      if (stat(kiln_strbuf_cstr(&path), &st) != 0 || !S_ISREG(st.st_mode)) {
        kiln_strbuf_free(&path);
        continue;
      }
      if (out->len == out->cap) {
        out->cap = out->cap ? 2 * out->cap : 64;
        cache_file_t *grown = kiln_calloc(out->cap, sizeof(*grown));
        if (out->len) memcpy(grown, out->data, out->len * sizeof(*grown));
        kiln_free(out->data);
        out->data = grown;
      }
      cache_file_t *f = &out->data[out->len++];
      f->path = kiln_strbuf_take(&path);
      size_t kl = strnlen(k->d_name, sizeof(f->kind) - 1);
      memcpy(f->kind, k->d_name, kl);
      f->kind[kl] = 0;
      f->size = (int64_t)st.st_size;
      f->mtime = st.st_mtim;
      out->bytes += f->size;
    }
    if (d) closedir(d);
    kiln_strbuf_free(&sub);
  }
  closedir(top);
}

static void files_free(cache_files_t *f) {
  for (size_t i = 0; i < f->len; i++) kiln_free(f->data[i].path);
  kiln_free(f->data);
}

static int cmp_oldest_first(const void *a, const void *b) {
  const cache_file_t *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->path, y->path);
}

/* Evicts down to `target` bytes; returns the entries removed and the bytes left in *left. */
static int64_t evict(const char *dir, int64_t target, int64_t *left) {
  cache_files_t files = {0};
  list_entries(dir, &files);
  qsort(files.data, files.len, sizeof(cache_file_t), cmp_oldest_first);
  int64_t bytes = files.bytes, removed = 0;
  for (size_t i = 0; i < files.len && bytes > target; i++) {
    if (unlink(files.data[i].path) != 0) continue;
    bytes -= files.data[i].size;
    removed++;
    atomic_fetch_add(&counters_of(files.data[i].kind)->evicted, 1);
  }
  if (removed)
    KILN_LOG_I("compile cache: evicted %lld least recently used entries of %s (%lld bytes left)",
               (long long)removed, dir, (long long)bytes);
  files_free(&files);
  *left = bytes;
  return removed;
}

int64_t kiln_disk_cache_evict(const char *dir, int64_t target) {
  if (!dir || !*dir) return 0;
  kiln_mutex_lock(&g_size_mu);
  int64_t left = 0, removed = evict(dir, target < 0 ? 0 : target, &left);
  if (g_size_dir && !strcmp(g_size_dir, dir)) g_size_bytes = left;
  kiln_mutex_unlock(&g_size_mu);
  return removed;
}

/* A write of `bytes` into `dir` happened: keeps the running total and evicts when over. */
static void account_write(const char *dir, int64_t bytes) {
  int64_t limit = kiln_disk_cache_max_bytes();
  kiln_mutex_lock(&g_size_mu);
  if (!g_size_dir || strcmp(g_size_dir, dir)) {
    kiln_free(g_size_dir);
    g_size_dir = kiln_strdup(dir);
    cache_files_t files = {0};
    list_entries(dir, &files);
    g_size_bytes = files.bytes;
    files_free(&files);
  } else {
    g_size_bytes += bytes;
  }
  if (limit > 0 && g_size_bytes > limit) evict(dir, limit - limit / 4, &g_size_bytes);
  kiln_mutex_unlock(&g_size_mu);
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
    account_write(dir, (int64_t)(sizeof(h) + len));
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
    c.evicted += atomic_load(&g_kinds[i].evicted);
  }
  return c;
}
