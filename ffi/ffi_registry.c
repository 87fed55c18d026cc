/* The FFI handler registry and handler-library loading (see ffi_registry.h for the contract).
 *
 * Entries live in a growable array of pointers so a lookup's borrowed target name stays valid
 * while the array grows. Libraries are cached by path and closed newest first, as Lua's
 * loadlib does, so a library that depends on an earlier one goes first. */
#define _GNU_SOURCE /* dladdr */
#include "ffi/ffi_registry.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "ffi/ffi_api.h"

typedef struct entry {
  char *target;
  size_t target_len;
  kiln_ffi_handler_t h;
} entry_t;

typedef struct library {
  char *path;
  void *handle;
} library_t;

struct kiln_ffi_registry {
  pthread_mutex_t mu;      /* entries */
  pthread_mutex_t load_mu; /* libraries; held across dlopen (never together with mu) */
  entry_t **entries;
  size_t len, cap;
  library_t *libs;
  size_t nlibs, libs_cap;
};

/* The registry whose load is running on this thread: where self-registration goes. */
static _Thread_local kiln_ffi_registry_t *t_loading;

static pthread_mutex_t g_default_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_ffi_registry_t *g_default;

kiln_status kiln_ffi_registry_create(kiln_ffi_registry_t **out) {
  if (!out) return KILN_ERR_INVALID("kiln_ffi_registry_create: NULL out");
  kiln_ffi_registry_t *r = kiln_calloc(1, sizeof(*r));
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->load_mu, NULL);
  *out = r;
  return NULL;
}

void kiln_ffi_registry_destroy(kiln_ffi_registry_t *r) {
  if (!r) return;
  for (size_t i = 0; i < r->len; i++) {
    kiln_free(r->entries[i]->target);
    kiln_free(r->entries[i]);
  }
  kiln_free(r->entries);
  for (size_t i = r->nlibs; i-- > 0;) {
    if (r->libs[i].handle) dlclose(r->libs[i].handle);
    kiln_free(r->libs[i].path);
  }
  kiln_free(r->libs);
  pthread_mutex_destroy(&r->mu);
  pthread_mutex_destroy(&r->load_mu);
  kiln_free(r);
}

kiln_ffi_registry_t *kiln_ffi_registry_default(void) {
  kiln_mutex_lock(&g_default_mu);
  if (!g_default) kiln_status_free(kiln_ffi_registry_create(&g_default));
  kiln_ffi_registry_t *r = g_default;
  kiln_mutex_unlock(&g_default_mu);
  return r;
}

void kiln_ffi_registry_default_shutdown(void) {
  kiln_mutex_lock(&g_default_mu);
  kiln_ffi_registry_t *r = g_default;
  g_default = NULL;
  kiln_mutex_unlock(&g_default_mu);
  kiln_ffi_registry_destroy(r);
}

size_t kiln_ffi_registry_size(kiln_ffi_registry_t *r) {
  kiln_mutex_lock(&r->mu);
  size_t n = r->len;
  kiln_mutex_unlock(&r->mu);
  return n;
}

/*----------------------------------------- Metadata -----------------------------------------*/

kiln_status kiln_ffi_query_metadata(XLA_FFI_Handler *execute, XLA_FFI_Metadata *out) {
  if (!execute) return KILN_ERR_INVALID("FFI handler bundle has no execute handler");
  XLA_FFI_Metadata md;
  memset(&md, 0, sizeof(md));
  md.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  XLA_FFI_Metadata_Extension ext;
  memset(&ext, 0, sizeof(ext));
  ext.extension_base.struct_size = XLA_FFI_Metadata_Extension_STRUCT_SIZE;
  ext.extension_base.type = XLA_FFI_Extension_Metadata;
  ext.metadata = &md;
  XLA_FFI_CallFrame frame;
  memset(&frame, 0, sizeof(frame));
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.extension_start = &ext.extension_base;
  frame.api = kiln_ffi_api();
  frame.stage = XLA_FFI_ExecutionStage_EXECUTE;
  frame.args.struct_size = XLA_FFI_Args_STRUCT_SIZE;
  frame.rets.struct_size = XLA_FFI_Rets_STRUCT_SIZE;
  frame.attrs.struct_size = XLA_FFI_Attrs_STRUCT_SIZE;
  kiln_status s = kiln_ffi_error_to_status(execute(&frame));
  if (s) return kiln_status_annotate(s, "while asking the FFI handler for its metadata");
  if (md.api_version.major_version == 0 && md.api_version.minor_version == 0)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "the FFI handler did not report its metadata (API version); build it "
                            "against XLA FFI 0.1 to 0.4 and answer the metadata extension");
  *out = md;
  return NULL;
}

static bool version_accepted(int major, int minor) {
  return major == XLA_FFI_API_MAJOR && minor >= 1 && minor <= XLA_FFI_API_MINOR;
}

/*--------------------------------------- Registration ---------------------------------------*/

static bool same_bundle(const XLA_FFI_Handler_Bundle *a, const XLA_FFI_Handler_Bundle *b) {
  return a->instantiate == b->instantiate && a->prepare == b->prepare &&
         a->initialize == b->initialize && a->execute == b->execute && a->record == b->record;
}

static entry_t *find_locked(kiln_ffi_registry_t *r, const char *name, size_t len,
                            kiln_ffi_platform_t p) {
  for (size_t i = 0; i < r->len; i++) {
    entry_t *e = r->entries[i];
    if (e->h.platform == p && e->target_len == len && memcmp(e->target, name, len) == 0) return e;
  }
  return NULL;
}

/* A new entry for (name, p), appended; the caller holds r->mu. */
static entry_t *new_entry_locked(kiln_ffi_registry_t *r, const char *name, size_t len,
                                 kiln_ffi_platform_t p) {
  entry_t *e = kiln_calloc(1, sizeof(*e));
  e->target = kiln_malloc(len + 1);
  memcpy(e->target, name, len);
  e->target[len] = '\0';
  e->target_len = len;
  e->h.target = e->target;
  e->h.platform = p;
  if (r->len == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    r->entries = kiln_realloc(r->entries, r->cap * sizeof(*r->entries));
  }
  r->entries[r->len++] = e;
  return e;
}

kiln_status kiln_ffi_registry_register(kiln_ffi_registry_t *r, const char *name, size_t name_len,
                                       const char *platform, size_t platform_len,
                                       const XLA_FFI_Handler_Bundle *bundle,
                                       XLA_FFI_Handler_Traits traits) {
  if (!r) return KILN_ERR_INVALID("FFI handler registration: NULL registry");
  if (!name || name_len == 0) return KILN_ERR_INVALID("FFI handler registration: empty target");
  if (memchr(name, '\0', name_len))
    return KILN_ERR_INVALID("FFI handler registration: target name contains a NUL byte");
  if (!bundle || !bundle->execute)
    return KILN_ERR_INVALID("FFI handler for '%.*s': the bundle has no execute handler",
                            (int)name_len, name);
  kiln_ffi_platform_t p;
  KILN_RETURN_IF_ERROR(kiln_ffi_platform_parse(platform, platform_len, &p),
                       "while registering FFI handler '%.*s'", (int)name_len, name);
  XLA_FFI_Metadata md;
  KILN_RETURN_IF_ERROR(kiln_ffi_query_metadata(bundle->execute, &md),
                       "while registering FFI handler '%.*s' on %s", (int)name_len, name,
                       kiln_ffi_platform_name(p));
  if (!version_accepted(md.api_version.major_version, md.api_version.minor_version))
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "FFI handler '%.*s' was built for XLA FFI API %d.%d; kiln accepts "
                            "%d.1 to %d.%d",
                            (int)name_len, name, md.api_version.major_version,
                            md.api_version.minor_version, XLA_FFI_API_MAJOR, XLA_FFI_API_MAJOR,
                            XLA_FFI_API_MINOR);
  kiln_status s = NULL;
  kiln_mutex_lock(&r->mu);
  entry_t *e = find_locked(r, name, name_len, p);
  if (e && !e->h.bundle.execute) {
    /* A legacy handler's entry: the typed handler joins it (XLA keeps the two apart). */
    e->h.bundle = *bundle;
    e->h.traits = traits | md.traits;
    e->h.api_major = md.api_version.major_version;
    e->h.api_minor = md.api_version.minor_version;
    e->h.state_type_id = md.state_type_id;
  } else if (e) {
    if (!same_bundle(&e->h.bundle, bundle))
      s = kiln_status_make(KILN_ALREADY_EXISTS,
                           "duplicate FFI handler registration for '%.*s' on platform %s",
                           (int)name_len, name, kiln_ffi_platform_name(p));
  } else {
    e = new_entry_locked(r, name, name_len, p);
    e->h.bundle = *bundle;
    e->h.traits = traits | md.traits;
    e->h.api_major = md.api_version.major_version;
    e->h.api_minor = md.api_version.minor_version;
    e->h.state_type_id = md.state_type_id;
  }
  kiln_mutex_unlock(&r->mu);
  return s;
}

kiln_status kiln_ffi_registry_register_legacy(kiln_ffi_registry_t *r, const char *name,
                                              size_t name_len, const char *platform,
                                              size_t platform_len, void *fn) {
  if (!r) return KILN_ERR_INVALID("FFI handler registration: NULL registry");
  if (!name || name_len == 0) return KILN_ERR_INVALID("FFI handler registration: empty target");
  if (memchr(name, '\0', name_len))
    return KILN_ERR_INVALID("FFI handler registration: target name contains a NUL byte");
  if (!fn) return KILN_ERR_INVALID("legacy handler for '%.*s': NULL function", (int)name_len, name);
  kiln_ffi_platform_t p;
  KILN_RETURN_IF_ERROR(kiln_ffi_platform_parse(platform, platform_len, &p),
                       "while registering legacy handler '%.*s'", (int)name_len, name);
  kiln_status s = NULL;
  kiln_mutex_lock(&r->mu);
  entry_t *e = find_locked(r, name, name_len, p);
  if (e && !e->h.legacy) {
    e->h.legacy = fn; /* joins the typed handler registered for the target */
  } else if (e) {
    if (e->h.legacy != fn)
      s = kiln_status_make(KILN_ALREADY_EXISTS,
                           "duplicate FFI handler registration for '%.*s' on platform %s",
                           (int)name_len, name, kiln_ffi_platform_name(p));
  } else {
    e = new_entry_locked(r, name, name_len, p);
    e->h.legacy = fn;
  }
  kiln_mutex_unlock(&r->mu);
  return s;
}

XLA_FFI_Error *kiln_ffi_registry_register_from_api(XLA_FFI_Handler_Register_Args *args) {
  kiln_ffi_registry_t *r = t_loading ? t_loading : kiln_ffi_registry_default();
  return kiln_ffi_error_from_status(
      kiln_ffi_registry_register(r, args->name.ptr, args->name.len, args->platform.ptr,
                                 args->platform.len, &args->bundle, args->traits));
}

kiln_status kiln_ffi_registry_lookup(kiln_ffi_registry_t *r, const char *target,
                                     kiln_ffi_platform_t platform, kiln_ffi_handler_t *out) {
  if (!r || !target || !out) return KILN_ERR_INVALID("kiln_ffi_registry_lookup: NULL argument");
  size_t len = strlen(target);
  kiln_mutex_lock(&r->mu);
  entry_t *e = find_locked(r, target, len, platform);
  if (e) *out = e->h;
  kiln_ffi_platform_t other =
      platform == KILN_FFI_PLATFORM_HOST ? KILN_FFI_PLATFORM_CUDA : KILN_FFI_PLATFORM_HOST;
  bool elsewhere = !e && find_locked(r, target, len, other);
  kiln_mutex_unlock(&r->mu);
  if (e) return NULL;
  if (elsewhere)
    return kiln_status_make(
        KILN_NOT_FOUND, "no FFI handler for target '%s' on platform %s (there is one on %s)",
        target, kiln_ffi_platform_name(platform), kiln_ffi_platform_name(other));
  return kiln_status_make(KILN_NOT_FOUND, "no FFI handler for target '%s' on platform %s", target,
                          kiln_ffi_platform_name(platform));
}

/*------------------------------------------ Loading -----------------------------------------*/

/* Handler libraries find kiln's entry points (XLA_FFI_GetApi, xla::ffi::GetXlaFfiApi, the
 * legacy status setters) by name in the global scope. A framework loads libkiln_pjrt.so with
 * RTLD_LOCAL, which keeps them out of it; so before the first handler library is opened, the
 * object that defines them (the plugin, or an executable that links kiln) is promoted to
 * RTLD_GLOBAL. Its version script exports only those few names. */
static void promote_entry_points(void) {
  Dl_info info;
  if (!dladdr((void *)kiln_ffi_api, &info) || !info.dli_fname) return;
  void *self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  /* The reference keeps the promotion; the object stays loaded while kiln runs anyway. */
  (void)self;
}

static pthread_once_t g_promote_once = PTHREAD_ONCE_INIT;

static void publish_entry_points(void) {
  kiln_once(&g_promote_once, promote_entry_points);
}

kiln_status kiln_ffi_registry_open_library(kiln_ffi_registry_t *r, const char *path,
                                           void **out_handle) {
  if (out_handle) *out_handle = NULL;
  if (!r || !path || !*path) return KILN_ERR_INVALID("FFI handler library: empty path");
  kiln_mutex_lock(&r->load_mu);
  for (size_t i = 0; i < r->nlibs; i++) {
    if (strcmp(r->libs[i].path, path) == 0) {
      if (out_handle) *out_handle = r->libs[i].handle;
      kiln_mutex_unlock(&r->load_mu);
      return NULL;
    }
  }
  kiln_ffi_registry_t *saved = t_loading;
  t_loading = r;
  publish_entry_points();
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  t_loading = saved;
  if (!h) {
    const char *why = dlerror();
    kiln_status s = kiln_status_make(KILN_UNAVAILABLE, "cannot open FFI handler library '%s': %s",
                                     path, why ? why : "unknown dlopen error");
    kiln_mutex_unlock(&r->load_mu);
    return s;
  }
  if (r->nlibs == r->libs_cap) {
    r->libs_cap = r->libs_cap ? 2 * r->libs_cap : 8;
    r->libs = kiln_realloc(r->libs, r->libs_cap * sizeof(*r->libs));
  }
  r->libs[r->nlibs].path = kiln_strdup(path);
  r->libs[r->nlibs].handle = h;
  r->nlibs++;
  if (out_handle) *out_handle = h;
  kiln_mutex_unlock(&r->load_mu);
  return NULL;
}

static kiln_status resolve(void *handle, const char *lib, const char *sym, size_t len,
                           XLA_FFI_Handler **out) {
  char name[256];
  if (len == 0 || len >= sizeof(name))
    return KILN_ERR_INVALID("FFI handler spec: bad symbol name '%.*s' for library '%s'", (int)len,
                            sym, lib);
  memcpy(name, sym, len);
  name[len] = '\0';
  dlerror();
  void *p = dlsym(handle, name);
  if (!p) {
    const char *why = dlerror();
    return kiln_status_make(KILN_NOT_FOUND, "symbol '%s' not found in FFI handler library '%s'%s%s",
                            name, lib, why ? ": " : "", why ? why : "");
  }
  *out = (XLA_FFI_Handler *)p;
  return NULL;
}

/* Parses "stage=sym/stage=sym" or a bare "sym" (execute) into a bundle. */
static kiln_status parse_bundle(void *handle, const char *lib, const char *s, size_t n,
                                XLA_FFI_Handler_Bundle *b) {
  memset(b, 0, sizeof(*b));
  if (!memchr(s, '=', n)) return resolve(handle, lib, s, n, &b->execute);
  static const char *const stages[] = {"instantiate", "prepare", "initialize", "execute", "record"};
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && s[j] != '/') j++;
    const char *eq = memchr(s + i, '=', j - i);
    if (!eq)
      return KILN_ERR_INVALID("FFI handler spec: expected stage=symbol, got '%.*s'", (int)(j - i),
                              s + i);
    size_t klen = (size_t)(eq - (s + i));
    int st = -1;
    for (int k = 0; k < 5; k++)
      if (strlen(stages[k]) == klen && memcmp(stages[k], s + i, klen) == 0) st = k;
    if (st < 0)
      return KILN_ERR_INVALID(
          "FFI handler spec: unknown stage '%.*s' (instantiate, prepare, "
          "initialize, execute, record)",
          (int)klen, s + i);
    XLA_FFI_Handler **slot = st == 0   ? &b->instantiate
                             : st == 1 ? &b->prepare
                             : st == 2 ? &b->initialize
                             : st == 3 ? &b->execute
                                       : &b->record;
    KILN_RETURN_IF_ERROR_PLAIN(resolve(handle, lib, eq + 1, (size_t)(s + j - eq - 1), slot));
    i = j + 1;
  }
  if (!b->execute)
    return KILN_ERR_INVALID("FFI handler spec: the bundle from '%s' has no execute= symbol", lib);
  return NULL;
}

static kiln_status load_entry(kiln_ffi_registry_t *r, const char *s, size_t n) {
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  if (n == 0) return NULL;
  const char *eq = memchr(s, '=', n);
  if (!eq) {
    /* A self-registering library. */
    char *path = kiln_malloc(n + 1);
    memcpy(path, s, n);
    path[n] = '\0';
    kiln_status st = kiln_ffi_registry_open_library(r, path, NULL);
    kiln_free(path);
    return st;
  }
  const char *target = s;
  size_t tlen = (size_t)(eq - s);
  const char *at = memchr(s, '@', tlen);
  const char *platform = "Host";
  size_t plen = 4;
  if (at) {
    platform = at + 1;
    plen = (size_t)(eq - at - 1);
    tlen = (size_t)(at - s);
  }
  if (tlen == 0) return KILN_ERR_INVALID("FFI handler spec '%.*s': empty target name", (int)n, s);
  const char *rest = eq + 1;
  size_t rlen = n - (size_t)(rest - s);
  const char *colon = NULL;
  for (size_t i = rlen; i-- > 0;)
    if (rest[i] == ':') {
      colon = rest + i;
      break;
    }
  if (!colon || colon == rest || (size_t)(colon - rest) + 1 == rlen)
    return KILN_ERR_INVALID("FFI handler spec '%.*s': expected target=library:symbol", (int)n, s);
  size_t llen = (size_t)(colon - rest);
  char *lib = kiln_malloc(llen + 1);
  memcpy(lib, rest, llen);
  lib[llen] = '\0';
  void *handle = NULL;
  kiln_status st = kiln_ffi_registry_open_library(r, lib, &handle);
  const char *sym = colon + 1;
  size_t slen = rlen - llen - 1;
  static const char kLegacy[] = "legacy=";
  if (!st && slen > sizeof(kLegacy) - 1 && memcmp(sym, kLegacy, sizeof(kLegacy) - 1) == 0) {
    XLA_FFI_Handler *fn = NULL;
    st = resolve(handle, lib, sym + sizeof(kLegacy) - 1, slen - (sizeof(kLegacy) - 1), &fn);
    if (!st) st = kiln_ffi_registry_register_legacy(r, target, tlen, platform, plen, (void *)fn);
  } else if (!st) {
    XLA_FFI_Handler_Bundle b;
    st = parse_bundle(handle, lib, sym, slen, &b);
    if (!st) st = kiln_ffi_registry_register(r, target, tlen, platform, plen, &b, 0);
  }
  if (st) st = kiln_status_annotate(st, "in FFI handler spec entry '%.*s'", (int)n, s);
  kiln_free(lib);
  return st;
}

kiln_status kiln_ffi_registry_load_spec(kiln_ffi_registry_t *r, const char *spec) {
  if (!r || !spec) return KILN_ERR_INVALID("kiln_ffi_registry_load_spec: NULL argument");
  const char *p = spec;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    KILN_RETURN_IF_ERROR_PLAIN(load_entry(r, p, n));
    p += n;
    if (*p == ',') p++;
  }
  return NULL;
}

kiln_status kiln_ffi_registry_load_named_spec(kiln_ffi_registry_t *r, const char *spec,
                                              const char *origin) {
  if (!spec || !*spec) return NULL;
  KILN_RETURN_IF_ERROR(kiln_ffi_registry_load_spec(r, spec), "in %s", origin ? origin : "spec");
  return NULL;
}

/* The default spec (guarded by g_default_mu): what the edges found in $KILN_FFI_HANDLERS. */
static char *g_default_spec, *g_default_origin;

void kiln_ffi_registry_set_default_spec(const char *spec, const char *origin) {
  kiln_mutex_lock(&g_default_mu);
  kiln_free(g_default_spec);
  kiln_free(g_default_origin);
  g_default_spec = spec && *spec ? kiln_strdup(spec) : NULL;
  g_default_origin = g_default_spec && origin ? kiln_strdup(origin) : NULL;
  kiln_mutex_unlock(&g_default_mu);
}

kiln_status kiln_ffi_registry_load_default_spec(kiln_ffi_registry_t *r) {
  kiln_mutex_lock(&g_default_mu);
  char *spec = g_default_spec ? kiln_strdup(g_default_spec) : NULL;
  char *origin = g_default_origin ? kiln_strdup(g_default_origin) : NULL;
  kiln_mutex_unlock(&g_default_mu);
  kiln_status s = kiln_ffi_registry_load_named_spec(r, spec, origin);
  kiln_free(spec);
  kiln_free(origin);
  return s;
}
