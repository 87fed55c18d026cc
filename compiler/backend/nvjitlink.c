/* CUDA toolkit discovery and the dlopen'ed nvJitLink (PTX -> cubin). */
#define _GNU_SOURCE
#include "compiler/backend/nvjitlink.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/log.h"

/* ---- CUDA toolkit directories ---------------------------------------------------------- */

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Adds `dir` unless it does not exist or resolves to a root already listed. */
static void dirs_add_existing(kiln_cuda_dirs_t *d, const char *dir) {
  if (!dir || !dir[0] || d->count == KILN_CUDA_MAX_DIRS || !is_dir(dir)) return;
  char real[PATH_MAX], other[PATH_MAX];
  if (!realpath(dir, real)) return;
  for (size_t i = 0; i < d->count; i++)
    if (realpath(d->dirs[i], other) && strcmp(real, other) == 0) return;
  d->dirs[d->count++] = kiln_strdup(dir);
}

static int cmp_version_desc(const void *a, const void *b) {
  return strverscmp(*(const char *const *)b, *(const char *const *)a);
}

static void dirs_add_glob(kiln_cuda_dirs_t *d, const char *pattern) {
  glob_t g;
  if (glob(pattern, GLOB_ONLYDIR, NULL, &g) != 0) return;
  qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmp_version_desc);
  for (size_t i = 0; i < g.gl_pathc; i++) dirs_add_existing(d, g.gl_pathv[i]);
  globfree(&g);
}

void kiln_cuda_dirs_find(const kiln_cuda_search_t *search, kiln_cuda_dirs_t *out) {
  memset(out, 0, sizeof *out);
  static const kiln_cuda_search_t kDefaults = {0};
  if (!search) search = &kDefaults;
  const char *explicit_dir = search->dir;
  if (explicit_dir && explicit_dir[0]) {
    /* Kept even when it does not exist, so errors name the paths that were tried. */
    out->dirs[out->count++] = kiln_strdup(explicit_dir);
    out->explicit_dir = true;
    return;
  }
  dirs_add_existing(out, search->home);
  dirs_add_existing(out, search->path);
  dirs_add_existing(out, "/usr/local/cuda");
  dirs_add_glob(out, "/usr/local/cuda-13*");
  dirs_add_glob(out, "/usr/local/cuda-12*");
  dirs_add_existing(out, "/usr/lib/cuda");
}

void kiln_cuda_dirs_free(kiln_cuda_dirs_t *dirs) {
  for (size_t i = 0; i < dirs->count; i++) kiln_free(dirs->dirs[i]);
  memset(dirs, 0, sizeof *dirs);
}

char *kiln_cuda_dirs_find_file(const kiln_cuda_dirs_t *dirs, const char *rel,
                               kiln_strbuf_t *tried) {
  for (size_t i = 0; i < dirs->count; i++) {
    kiln_strbuf_t p = {0};
    kiln_strbuf_printf(&p, "%s/%s", dirs->dirs[i], rel);
    if (is_file(kiln_strbuf_cstr(&p))) return kiln_strbuf_take(&p);
    if (tried) {
      if (tried->len) kiln_strbuf_append(tried, ", ");
      kiln_strbuf_append(tried, kiln_strbuf_cstr(&p));
    }
    kiln_strbuf_free(&p);
  }
  return NULL;
}

/* ---- nvJitLink --------------------------------------------------------------------------- */

/* Our own declarations of nvJitLink's C ABI (nvJitLink.h is not included: the build must
 * work without the toolkit). Values follow nvJitLink 12/13. */
typedef struct kiln_nvjl_opaque *kiln_nvjl_handle;
typedef int kiln_nvjl_result; /* 0 = NVJITLINK_SUCCESS */
enum {
  KILN_NVJL_SUCCESS = 0,
  KILN_NVJL_ERROR_UNRECOGNIZED_OPTION = 1,
  KILN_NVJL_ERROR_MISSING_ARCH = 2,
  KILN_NVJL_ERROR_INVALID_INPUT = 3,
  KILN_NVJL_ERROR_PTX_COMPILE = 4,
  KILN_NVJL_ERROR_ARCH_MISMATCH = 13,
  KILN_NVJL_ERROR_UNRECOGNIZED_ARCH = 16,
  KILN_NVJL_ERROR_UNSUPPORTED_ARCH = 17,
};
enum { KILN_NVJL_INPUT_PTX = 2 };

/* X(name, return type, parameter list). Every entry is required. */
#define KILN_NVJITLINK_SYMBOLS(X)                                                             \
  X(nvJitLinkCreate, kiln_nvjl_result, (kiln_nvjl_handle * h, uint32_t n, const char **opts)) \
  X(nvJitLinkDestroy, kiln_nvjl_result, (kiln_nvjl_handle * h))                               \
  X(nvJitLinkAddData, kiln_nvjl_result,                                                       \
    (kiln_nvjl_handle h, int input_type, const void *data, size_t size, const char *name))    \
  X(nvJitLinkComplete, kiln_nvjl_result, (kiln_nvjl_handle h))                                \
  X(nvJitLinkGetLinkedCubinSize, kiln_nvjl_result, (kiln_nvjl_handle h, size_t * size))       \
  X(nvJitLinkGetLinkedCubin, kiln_nvjl_result, (kiln_nvjl_handle h, void *cubin))             \
  X(nvJitLinkGetErrorLogSize, kiln_nvjl_result, (kiln_nvjl_handle h, size_t * size))          \
  X(nvJitLinkGetErrorLog, kiln_nvjl_result, (kiln_nvjl_handle h, char *log))                  \
  X(nvJitLinkGetInfoLogSize, kiln_nvjl_result, (kiln_nvjl_handle h, size_t * size))           \
  X(nvJitLinkGetInfoLog, kiln_nvjl_result, (kiln_nvjl_handle h, char *log))

struct kiln_nvjitlink {
  void *handle;
  char *path;
  char *key; /* the search this entry was loaded for */
  int version;
#define KILN_NVJL_FIELD(name, ret, params) ret(*name) params;
  KILN_NVJITLINK_SYMBOLS(KILN_NVJL_FIELD)
#undef KILN_NVJL_FIELD
};

#define KILN_NVJL_CACHE_SIZE 8
static pthread_mutex_t nvjl_mutex = PTHREAD_MUTEX_INITIALIZER;
static kiln_nvjitlink_t *nvjl_cache[KILN_NVJL_CACHE_SIZE];

/* Resolves `name`, else its versioned aliases (`__name_13_0`, `__name_12_0`), which are what
 * nvJitLink.h's inline wrappers call. */
static void *resolve(void *handle, const char *name) {
  void *p = dlsym(handle, name);
  static const char *const versions[] = {"13_0", "12_0"};
  for (size_t i = 0; !p && i < sizeof versions / sizeof *versions; i++) {
    char versioned[128];
    snprintf(versioned, sizeof versioned, "__%s_%s", name, versions[i]);
    p = dlsym(handle, versioned);
  }
  return p;
}

/* Opens `path` and resolves the table. NULL on failure, with the reason appended to tried. */
static kiln_nvjitlink_t *try_open(const char *path, kiln_strbuf_t *tried) {
  if (tried->len) kiln_strbuf_append(tried, "; ");
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    kiln_strbuf_printf(tried, "%s (%s)", path, e ? e : "cannot open");
    return NULL;
  }
  kiln_nvjitlink_t *lib = kiln_calloc(1, sizeof *lib);
  lib->handle = h;
  const char *missing = NULL;
#define KILN_NVJL_RESOLVE(name, ret, params)  \
  if (!missing) {                             \
    *(void **)&lib->name = resolve(h, #name); \
    if (!lib->name) missing = #name;          \
  }
  KILN_NVJITLINK_SYMBOLS(KILN_NVJL_RESOLVE)
#undef KILN_NVJL_RESOLVE
  if (missing) {
    kiln_strbuf_printf(tried, "%s (opened, but symbol %s not found)", path, missing);
    dlclose(h);
    kiln_free(lib);
    return NULL;
  }
  int (*version_fn)(unsigned *, unsigned *) = NULL;
  *(void **)&version_fn = dlsym(h, "nvJitLinkVersion");
  unsigned major = 0, minor = 0;
  if (version_fn && version_fn(&major, &minor) == 0)
    lib->version = (int)(major * 1000 + minor * 10);
  lib->path = kiln_strdup(path);
  kiln_strbuf_printf(tried, "%s (loaded)", path);
  return lib;
}

kiln_status kiln_nvjitlink_load(const kiln_cuda_dirs_t *dirs, const kiln_nvjitlink_t **out) {
  *out = NULL;
  kiln_strbuf_t key = {0};
  kiln_strbuf_printf(&key, "%d", dirs->explicit_dir ? 1 : 0);
  for (size_t i = 0; i < dirs->count; i++) kiln_strbuf_printf(&key, ":%s", dirs->dirs[i]);

  kiln_mutex_lock(&nvjl_mutex);
  for (size_t i = 0; i < KILN_NVJL_CACHE_SIZE && nvjl_cache[i]; i++) {
    if (strcmp(nvjl_cache[i]->key, kiln_strbuf_cstr(&key)) == 0) {
      *out = nvjl_cache[i];
      kiln_mutex_unlock(&nvjl_mutex);
      kiln_strbuf_free(&key);
      return NULL;
    }
  }
  kiln_strbuf_t tried = {0};
  kiln_nvjitlink_t *lib = NULL;
  static const char *const sonames[] = {"libnvJitLink.so.13", "libnvJitLink.so.12",
                                        "libnvJitLink.so"};
  static const char *const rels[] = {"lib64/libnvJitLink.so.13", "lib64/libnvJitLink.so.12",
                                     "lib64/libnvJitLink.so",    "lib/libnvJitLink.so.13",
                                     "lib/libnvJitLink.so.12",   "lib/libnvJitLink.so"};
  if (!dirs->explicit_dir)
    for (size_t i = 0; !lib && i < sizeof sonames / sizeof *sonames; i++)
      lib = try_open(sonames[i], &tried);
  for (size_t d = 0; !lib && d < dirs->count; d++) {
    for (size_t i = 0; !lib && i < sizeof rels / sizeof *rels; i++) {
      kiln_strbuf_t p = {0};
      kiln_strbuf_printf(&p, "%s/%s", dirs->dirs[d], rels[i]);
      if (is_file(kiln_strbuf_cstr(&p))) {
        lib = try_open(kiln_strbuf_cstr(&p), &tried);
      } else {
        if (tried.len) kiln_strbuf_append(&tried, "; ");
        kiln_strbuf_printf(&tried, "%s (no such file)", kiln_strbuf_cstr(&p));
      }
      kiln_strbuf_free(&p);
    }
  }
  kiln_status s = NULL;
  if (lib) {
    lib->key = kiln_strbuf_take(&key);
    size_t slot = 0;
    while (slot < KILN_NVJL_CACHE_SIZE && nvjl_cache[slot]) slot++;
    if (slot < KILN_NVJL_CACHE_SIZE) nvjl_cache[slot] = lib;
    /* With a full cache the entry stays loaded for the process but is not cached; the
     * handle is deliberately never closed (cubins already handed out do not depend on it,
     * but other threads may still hold `lib`). */
    KILN_LOG_I("nvJitLink loaded from %s (version %d)", lib->path, lib->version);
    *out = lib;
  } else {
    s = kiln_status_make(KILN_UNAVAILABLE, "nvJitLink not found; tried: %s",
                         tried.len ? kiln_strbuf_cstr(&tried) : "(no candidates)");
  }
  kiln_mutex_unlock(&nvjl_mutex);
  kiln_strbuf_free(&tried);
  kiln_strbuf_free(&key);
  return s;
}

const char *kiln_nvjitlink_path(const kiln_nvjitlink_t *lib) {
  return lib ? lib->path : "";
}

/* Appends nvJitLink's error and info logs (when non-empty) to `log`. */
static void collect_logs(const kiln_nvjitlink_t *lib, kiln_nvjl_handle h, kiln_strbuf_t *log) {
  struct {
    kiln_nvjl_result (*size_fn)(kiln_nvjl_handle, size_t *);
    kiln_nvjl_result (*log_fn)(kiln_nvjl_handle, char *);
  } logs[2] = {{lib->nvJitLinkGetErrorLogSize, lib->nvJitLinkGetErrorLog},
               {lib->nvJitLinkGetInfoLogSize, lib->nvJitLinkGetInfoLog}};
  for (int i = 0; i < 2; i++) {
    size_t n = 0;
    if (logs[i].size_fn(h, &n) != KILN_NVJL_SUCCESS || n <= 1) continue;
    char *text = kiln_try_malloc(n + 1);
    if (!text) continue;
    if (logs[i].log_fn(h, text) == KILN_NVJL_SUCCESS) {
      text[n] = '\0';
      kiln_strbuf_append(log, text);
    }
    kiln_free(text);
  }
}

kiln_status kiln_nvjitlink_ptx_to_cubin(const kiln_nvjitlink_t *lib, const char *ptx,
                                        size_t ptx_len, const char *arch, void **cubin,
                                        size_t *cubin_size, char **log, bool *ptx_rejected) {
  *cubin = NULL;
  *cubin_size = 0;
  *log = NULL;
  *ptx_rejected = false;
  if (!lib || !ptx || !arch) return KILN_ERR_INVALID("nvJitLink: NULL library, PTX or arch");
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  const char *opts[] = {arch_opt};
  kiln_nvjl_handle h = NULL;
  kiln_nvjl_result r = lib->nvJitLinkCreate(&h, 1, opts);
  if (r != KILN_NVJL_SUCCESS) {
    bool bad_arch = r == KILN_NVJL_ERROR_UNRECOGNIZED_ARCH ||
                    r == KILN_NVJL_ERROR_UNSUPPORTED_ARCH ||
                    r == KILN_NVJL_ERROR_UNRECOGNIZED_OPTION || r == KILN_NVJL_ERROR_MISSING_ARCH;
    *ptx_rejected = bad_arch;
    return kiln_status_make(bad_arch ? KILN_INVALID_ARGUMENT : KILN_INTERNAL,
                            "nvJitLinkCreate(%s) failed with nvJitLink error %d", arch_opt, r);
  }
  kiln_strbuf_t logbuf = {0};
  kiln_status s = NULL;
  /* nvJitLink reads the PTX as a NUL-terminated string of `size` bytes. */
  char *copy = NULL;
  const char *data = ptx;
  if (ptx_len == 0 || ptx[ptx_len - 1] != '\0') {
    copy = kiln_try_malloc(ptx_len + 1);
    if (!copy) {
      lib->nvJitLinkDestroy(&h);
      return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory copying %zu bytes of PTX",
                              ptx_len);
    }
    memcpy(copy, ptx, ptx_len);
    copy[ptx_len] = '\0';
    data = copy;
  }
  const char *stage = "nvJitLinkAddData";
  r = lib->nvJitLinkAddData(h, KILN_NVJL_INPUT_PTX, data, strlen(data) + 1, "kiln.ptx");
  if (r == KILN_NVJL_SUCCESS) {
    stage = "nvJitLinkComplete";
    r = lib->nvJitLinkComplete(h);
  }
  size_t n = 0;
  if (r == KILN_NVJL_SUCCESS) {
    stage = "nvJitLinkGetLinkedCubinSize";
    r = lib->nvJitLinkGetLinkedCubinSize(h, &n);
  }
  void *bytes = NULL;
  if (r == KILN_NVJL_SUCCESS) {
    bytes = kiln_try_malloc(n ? n : 1);
    if (!bytes) {
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte cubin", n);
    } else {
      stage = "nvJitLinkGetLinkedCubin";
      r = lib->nvJitLinkGetLinkedCubin(h, bytes);
    }
  }
  collect_logs(lib, h, &logbuf);
  if (!s && r != KILN_NVJL_SUCCESS) {
    *ptx_rejected = r == KILN_NVJL_ERROR_PTX_COMPILE || r == KILN_NVJL_ERROR_INVALID_INPUT ||
                    r == KILN_NVJL_ERROR_ARCH_MISMATCH;
    s = kiln_status_make(*ptx_rejected ? KILN_INVALID_ARGUMENT : KILN_INTERNAL,
                         "%s failed (nvJitLink error %d, %s): %s", stage, r, arch_opt,
                         logbuf.len ? kiln_strbuf_cstr(&logbuf) : "(empty log)");
  }
  lib->nvJitLinkDestroy(&h);
  kiln_free(copy);
  if (s) {
    kiln_free(bytes);
  } else {
    *cubin = bytes;
    *cubin_size = n;
  }
  *log = logbuf.len ? kiln_strbuf_take(&logbuf) : NULL;
  kiln_strbuf_free(&logbuf);
  return s;
}
