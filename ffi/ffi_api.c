/* The XLA_FFI_Api table: 19 functions a handler calls through `call_frame->api`, and the
 * objects behind them (errors, the type registry, futures, per-instance state).
 *
 * Every entry checks its args struct first: NULL or a struct_size smaller than the one kiln
 * reads is an INVALID_ARGUMENT error object, never a crash. */
#include "ffi/ffi_api.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "ffi/ffi_registry.h"

/*------------------------------------------ Errors ------------------------------------------*/

struct XLA_FFI_Error {
  XLA_FFI_Error_Code errc;
  char message[]; /* NUL-terminated */
};

static XLA_FFI_Error *error_new(XLA_FFI_Error_Code errc, const char *msg, size_t len) {
  XLA_FFI_Error *e = kiln_malloc(sizeof(*e) + len + 1);
  e->errc = (errc > XLA_FFI_Error_Code_OK && errc <= XLA_FFI_Error_Code_UNAUTHENTICATED)
                ? errc
                : XLA_FFI_Error_Code_UNKNOWN;
  memcpy(e->message, msg, len);
  e->message[len] = '\0';
  return e;
}

XLA_FFI_Error *kiln_ffi_error_make(XLA_FFI_Error_Code errc, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof(buf)) n = (int)sizeof(buf) - 1;
  return error_new(errc, buf, (size_t)n);
}

void kiln_ffi_error_free(XLA_FFI_Error *err) {
  kiln_free(err);
}

kiln_status kiln_ffi_error_to_status(XLA_FFI_Error *err) {
  if (!err) return NULL;
  kiln_status s = kiln_status_make((kiln_status_code_t)err->errc, "%s", err->message);
  kiln_free(err);
  return s;
}

XLA_FFI_Error *kiln_ffi_error_from_status(kiln_status s) {
  if (!s) return NULL;
  const char *m = kiln_status_message(s);
  XLA_FFI_Error *e = error_new((XLA_FFI_Error_Code)kiln_status_code(s), m, strlen(m));
  kiln_status_free(s);
  return e;
}

#define INVALID(...) kiln_ffi_error_make(XLA_FFI_Error_Code_INVALID_ARGUMENT, __VA_ARGS__)

/* NULL args or a struct smaller than kiln reads: an error naming the struct and both sizes. */
#define CHECK_ARGS(type, args)                                                                \
  do {                                                                                        \
    if (!(args)) return INVALID("%s: NULL argument struct", #type);                           \
    if ((args)->struct_size < type##_STRUCT_SIZE)                                             \
      return INVALID("%s: struct_size %zu is smaller than %zu; check the FFI version", #type, \
                     (size_t)(args)->struct_size, (size_t)type##_STRUCT_SIZE);                \
  } while (0)

#define CHECK_CTX(type, args)                                              \
  do {                                                                     \
    CHECK_ARGS(type, args);                                                \
    if (!(args)->ctx) return INVALID("%s: NULL execution context", #type); \
  } while (0)

static XLA_FFI_Error *api_error_create(XLA_FFI_Error_Create_Args *args) {
  CHECK_ARGS(XLA_FFI_Error_Create_Args, args);
  if (args->errc == XLA_FFI_Error_Code_OK) return NULL;
  const char *m = args->message ? args->message : "";
  return error_new(args->errc, m, strlen(m));
}

static void api_error_get_details(XLA_FFI_Error_GetDetails_Args *args) {
  /* No way to report a problem here: a too-small struct is left alone. */
  if (!args || args->struct_size < XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE) return;
  if (!args->error) {
    args->message = "";
    args->errc = XLA_FFI_Error_Code_OK;
    return;
  }
  args->message = args->error->message;
  args->errc = args->error->errc;
}

static void api_error_destroy(XLA_FFI_Error_Destroy_Args *args) {
  if (!args || args->struct_size < XLA_FFI_Error_Destroy_Args_STRUCT_SIZE) return;
  kiln_free(args->error);
}

/*-------------------------------------- Type registry ---------------------------------------*/

typedef struct type_entry {
  char *name;
  size_t len;
  int64_t id;
  void (*deleter)(void *);
} type_entry_t;

static struct {
  pthread_mutex_t mu;
  type_entry_t *entries;
  size_t len, cap;
  int64_t next_id;
} g_types = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 1};

static type_entry_t *types_find_name(const char *name, size_t len) {
  for (size_t i = 0; i < g_types.len; i++)
    if (g_types.entries[i].len == len && memcmp(g_types.entries[i].name, name, len) == 0)
      return &g_types.entries[i];
  return NULL;
}

static type_entry_t *types_find_id(int64_t id) {
  for (size_t i = 0; i < g_types.len; i++)
    if (g_types.entries[i].id == id) return &g_types.entries[i];
  return NULL;
}

kiln_status kiln_ffi_type_register(const char *name, size_t len, XLA_FFI_TypeId *id,
                                   const XLA_FFI_TypeInfo *info) {
  if (!id) return KILN_ERR_INVALID("FFI type registration: NULL type id");
  if (!name || len == 0) return KILN_ERR_INVALID("FFI type registration: empty type name");
  if (id->type_id < 0)
    return KILN_ERR_INVALID("FFI type '%.*s': negative type id %lld", (int)len, name,
                            (long long)id->type_id);
  void (*deleter)(void *) = NULL;
  if (info) {
    if (info->struct_size < XLA_FFI_TypeInfo_STRUCT_SIZE)
      return KILN_ERR_INVALID("FFI type '%.*s': XLA_FFI_TypeInfo struct_size %zu < %zu", (int)len,
                              name, (size_t)info->struct_size,
                              (size_t)XLA_FFI_TypeInfo_STRUCT_SIZE);
    deleter = info->deleter;
  }
  kiln_status s = NULL;
  kiln_mutex_lock(&g_types.mu);
  type_entry_t *e = types_find_name(name, len);
  if (e) {
    if (id->type_id == 0) {
      id->type_id = e->id;
    } else if (id->type_id != e->id) {
      s = kiln_status_make(KILN_ALREADY_EXISTS,
                           "FFI type '%.*s' is registered with type id %lld, not %lld", (int)len,
                           name, (long long)e->id, (long long)id->type_id);
    }
    if (!s && deleter) e->deleter = deleter;
  } else if (id->type_id != 0 && types_find_id(id->type_id)) {
    type_entry_t *other = types_find_id(id->type_id);
    s = kiln_status_make(KILN_ALREADY_EXISTS, "FFI type id %lld already belongs to type '%.*s'",
                         (long long)id->type_id, (int)other->len, other->name);
  } else {
    if (g_types.len == g_types.cap) {
      g_types.cap = g_types.cap ? 2 * g_types.cap : 16;
      g_types.entries = kiln_realloc(g_types.entries, g_types.cap * sizeof(type_entry_t));
    }
    e = &g_types.entries[g_types.len++];
    e->name = kiln_malloc(len + 1);
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->len = len;
    if (id->type_id == 0) {
      while (types_find_id(g_types.next_id)) g_types.next_id++;
      id->type_id = g_types.next_id++;
    }
    e->id = id->type_id;
    e->deleter = deleter;
  }
  kiln_mutex_unlock(&g_types.mu);
  return s;
}

kiln_status kiln_ffi_type_lookup(const char *name, size_t len, XLA_FFI_TypeId *out) {
  kiln_mutex_lock(&g_types.mu);
  type_entry_t *e = types_find_name(name, len);
  if (e) out->type_id = e->id;
  kiln_mutex_unlock(&g_types.mu);
  if (!e) return kiln_status_make(KILN_NOT_FOUND, "no FFI type named '%.*s'", (int)len, name);
  return NULL;
}

/* Whether `id` is registered; its deleter (may be NULL) in *deleter. */
static bool type_known(int64_t id, void (**deleter)(void *)) {
  kiln_mutex_lock(&g_types.mu);
  type_entry_t *e = types_find_id(id);
  *deleter = e ? e->deleter : NULL;
  kiln_mutex_unlock(&g_types.mu);
  return e != NULL;
}

static XLA_FFI_Error *api_type_register(XLA_FFI_Type_Register_Args *args) {
  CHECK_ARGS(XLA_FFI_Type_Register_Args, args);
  /* type_info sits past OpenXLA's STRUCT_SIZE (which stops at type_id), so XLA's C++ binding
   * passes a size that leaves it out; it is read regardless, as OpenXLA does (without it,
   * state objects could never be freed). */
  return kiln_ffi_error_from_status(
      kiln_ffi_type_register(args->name.ptr, args->name.len, args->type_id, args->type_info));
}

/*------------------------------------------ State -------------------------------------------*/

#define KILN_FFI_STATE_STAGES 3 /* instantiate, prepare, initialize */

struct kiln_ffi_state {
  struct {
    int64_t type_id;
    void *object;
    void (*deleter)(void *);
  } slot[KILN_FFI_STATE_STAGES];
};

kiln_ffi_state_t *kiln_ffi_state_create(void) {
  return kiln_calloc(1, sizeof(kiln_ffi_state_t));
}

void kiln_ffi_state_destroy(kiln_ffi_state_t *s) {
  if (!s) return;
  for (int i = KILN_FFI_STATE_STAGES - 1; i >= 0; i--)
    if (s->slot[i].object && s->slot[i].deleter) s->slot[i].deleter(s->slot[i].object);
  kiln_free(s);
}

static const char *stage_name(int stage) {
  static const char *const names[] = {"instantiate", "prepare", "initialize", "execute", "record"};
  return stage >= 0 && stage < 5 ? names[stage] : "unknown stage";
}

static XLA_FFI_Error *api_state_set(XLA_FFI_State_Set_Args *args) {
  CHECK_CTX(XLA_FFI_State_Set_Args, args);
  if (!args->type_id) return INVALID("XLA_FFI_State_Set: NULL type id");
  if ((int)args->stage < 0 || (int)args->stage >= KILN_FFI_STATE_STAGES)
    return INVALID(
        "XLA_FFI_State_Set: state can be set at instantiate, prepare or initialize, "
        "not at %s",
        stage_name((int)args->stage));
  kiln_ffi_state_t *st = args->ctx->state;
  if (!st)
    return kiln_ffi_error_make(XLA_FFI_Error_Code_FAILED_PRECONDITION,
                               "XLA_FFI_State_Set: this call has no state storage");
  int64_t id = args->type_id->type_id;
  void (*deleter)(void *) = NULL;
  if (id <= 0 || !type_known(id, &deleter))
    return INVALID("XLA_FFI_State_Set: type id %lld is not registered", (long long)id);
  if (st->slot[args->stage].object)
    return kiln_ffi_error_make(XLA_FFI_Error_Code_ALREADY_EXISTS,
                               "XLA_FFI_State_Set: state for stage %s is already set",
                               stage_name((int)args->stage));
  st->slot[args->stage].type_id = id;
  st->slot[args->stage].object = args->state;
  st->slot[args->stage].deleter = deleter;
  return NULL;
}

static XLA_FFI_Error *api_state_get(XLA_FFI_State_Get_Args *args) {
  CHECK_CTX(XLA_FFI_State_Get_Args, args);
  if (!args->type_id) return INVALID("XLA_FFI_State_Get: NULL type id");
  if ((int)args->stage < 0 || (int)args->stage >= KILN_FFI_STATE_STAGES)
    return INVALID("XLA_FFI_State_Get: no state is kept for stage %s",
                   stage_name((int)args->stage));
  kiln_ffi_state_t *st = args->ctx->state;
  if (!st || !st->slot[args->stage].object)
    return kiln_ffi_error_make(XLA_FFI_Error_Code_NOT_FOUND,
                               "XLA_FFI_State_Get: no state was set at stage %s",
                               stage_name((int)args->stage));
  if (st->slot[args->stage].type_id != args->type_id->type_id)
    return INVALID("XLA_FFI_State_Get: state at stage %s has type id %lld, not %lld",
                   stage_name((int)args->stage), (long long)st->slot[args->stage].type_id,
                   (long long)args->type_id->type_id);
  args->state = st->slot[args->stage].object;
  return NULL;
}

/*----------------------------------------- Futures ------------------------------------------*/

enum { FUTURE_PENDING, FUTURE_AVAILABLE, FUTURE_ERROR };

struct XLA_FFI_Future {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state;
  int refs; /* the completer's and the runtime's */
  XLA_FFI_Error *error;
};

static void future_unref(XLA_FFI_Future *f) {
  kiln_mutex_lock(&f->mu);
  int left = --f->refs;
  kiln_mutex_unlock(&f->mu);
  if (left > 0) return;
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  kiln_free(f->error);
  kiln_free(f);
}

static XLA_FFI_Error *api_future_create(XLA_FFI_Future_Create_Args *args) {
  CHECK_ARGS(XLA_FFI_Future_Create_Args, args);
  XLA_FFI_Future *f = kiln_calloc(1, sizeof(*f));
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  f->state = FUTURE_PENDING;
  f->refs = 2;
  /* OpenXLA's STRUCT_SIZE stops before `future`; it is written regardless (see header). */
  args->future = f;
  return NULL;
}

static XLA_FFI_Error *future_complete(XLA_FFI_Future *f, XLA_FFI_Error *error, const char *who) {
  kiln_mutex_lock(&f->mu);
  if (f->state != FUTURE_PENDING) {
    kiln_mutex_unlock(&f->mu);
    kiln_free(error);
    return kiln_ffi_error_make(XLA_FFI_Error_Code_FAILED_PRECONDITION,
                               "%s: the future is already completed", who);
  }
  f->state = error ? FUTURE_ERROR : FUTURE_AVAILABLE;
  f->error = error;
  pthread_cond_broadcast(&f->cv);
  kiln_mutex_unlock(&f->mu);
  future_unref(f);
  return NULL;
}

static XLA_FFI_Error *api_future_set_available(XLA_FFI_Future_SetAvailable_Args *args) {
  CHECK_ARGS(XLA_FFI_Future_SetAvailable_Args, args);
  if (!args->future) return INVALID("XLA_FFI_Future_SetAvailable: NULL future");
  return future_complete(args->future, NULL, "XLA_FFI_Future_SetAvailable");
}

static XLA_FFI_Error *api_future_set_error(XLA_FFI_Future_SetError_Args *args) {
  CHECK_ARGS(XLA_FFI_Future_SetError_Args, args);
  if (!args->future) return INVALID("XLA_FFI_Future_SetError: NULL future");
  XLA_FFI_Error *e = args->error;
  if (!e) e = kiln_ffi_error_make(XLA_FFI_Error_Code_UNKNOWN, "future completed with a NULL error");
  return future_complete(args->future, e, "XLA_FFI_Future_SetError");
}

bool kiln_ffi_future_is_ready(XLA_FFI_Future *f) {
  kiln_mutex_lock(&f->mu);
  bool r = f->state != FUTURE_PENDING;
  kiln_mutex_unlock(&f->mu);
  return r;
}

kiln_status kiln_ffi_future_wait(XLA_FFI_Future *f) {
  kiln_mutex_lock(&f->mu);
  while (f->state == FUTURE_PENDING) pthread_cond_wait(&f->cv, &f->mu);
  kiln_status s = NULL;
  if (f->state == FUTURE_ERROR)
    s = kiln_status_make((kiln_status_code_t)f->error->errc, "%s", f->error->message);
  kiln_mutex_unlock(&f->mu);
  return s;
}

void kiln_ffi_future_release(XLA_FFI_Future *f) {
  if (f) future_unref(f);
}

/*------------------------------------- Context queries --------------------------------------*/

static XLA_FFI_Error *api_stream_get(XLA_FFI_Stream_Get_Args *args) {
  CHECK_CTX(XLA_FFI_Stream_Get_Args, args);
  args->stream = args->ctx->stream;
  return NULL;
}

static XLA_FFI_Error *api_invoke_context_get(XLA_FFI_InvokeContext_Get_Args *args) {
  CHECK_CTX(XLA_FFI_InvokeContext_Get_Args, args);
  if (!args->type_id) return INVALID("XLA_FFI_InvokeContext_Get: NULL type id");
  const kiln_ffi_context_t *c = args->ctx;
  for (size_t i = 0; i < c->num_user_data; i++) {
    if (c->user_data[i].type_id == args->type_id->type_id) {
      args->data = c->user_data[i].data;
      return NULL;
    }
  }
  return kiln_ffi_error_make(XLA_FFI_Error_Code_NOT_FOUND,
                             "no user data of type id %lld in the execution context",
                             (long long)args->type_id->type_id);
}

static bool is_pow2(size_t x) {
  return x && !(x & (x - 1));
}

static XLA_FFI_Error *api_device_memory_allocate(XLA_FFI_DeviceMemory_Allocate_Args *args) {
  CHECK_CTX(XLA_FFI_DeviceMemory_Allocate_Args, args);
  kiln_ffi_context_t *c = args->ctx;
  size_t align = args->alignment ? args->alignment : 1;
  if (!is_pow2(align))
    return INVALID("XLA_FFI_DeviceMemory_Allocate: alignment %zu is not a power of two",
                   args->alignment);
  args->data = NULL;
  if (args->size == 0) return NULL;
  if (c->allocate)
    return kiln_ffi_error_from_status(
        c->allocate(c->allocator_user, args->size, align, &args->data));
  if (c->platform != KILN_FFI_PLATFORM_HOST)
    return kiln_ffi_error_make(XLA_FFI_Error_Code_UNIMPLEMENTED,
                               "XLA_FFI_DeviceMemory_Allocate: no device allocator on %s",
                               kiln_ffi_platform_name(c->platform));
  if (align < sizeof(void *)) align = sizeof(void *);
  void *p = NULL;
  if (posix_memalign(&p, align, args->size) != 0)
    return kiln_ffi_error_make(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                               "XLA_FFI_DeviceMemory_Allocate: cannot allocate %zu bytes",
                               args->size);
  args->data = p;
  return NULL;
}

static XLA_FFI_Error *api_device_memory_free(XLA_FFI_DeviceMemory_Free_Args *args) {
  CHECK_CTX(XLA_FFI_DeviceMemory_Free_Args, args);
  kiln_ffi_context_t *c = args->ctx;
  if (!args->data) return NULL;
  if (c->allocate) {
    if (!c->deallocate)
      return kiln_ffi_error_make(XLA_FFI_Error_Code_UNIMPLEMENTED,
                                 "XLA_FFI_DeviceMemory_Free: the runtime gave no deallocator");
    return kiln_ffi_error_from_status(c->deallocate(c->allocator_user, args->data, args->size));
  }
  if (c->platform != KILN_FFI_PLATFORM_HOST)
    return kiln_ffi_error_make(XLA_FFI_Error_Code_UNIMPLEMENTED,
                               "XLA_FFI_DeviceMemory_Free: no device allocator on %s",
                               kiln_ffi_platform_name(c->platform));
  free(args->data);
  return NULL;
}

static XLA_FFI_Error *api_thread_pool_schedule(XLA_FFI_ThreadPool_Schedule_Args *args) {
  CHECK_CTX(XLA_FFI_ThreadPool_Schedule_Args, args);
  if (!args->task) return INVALID("XLA_FFI_ThreadPool_Schedule: NULL task");
  kiln_ffi_context_t *c = args->ctx;
  if (!c->schedule)
    return kiln_ffi_error_make(XLA_FFI_Error_Code_UNIMPLEMENTED,
                               "XLA_FFI_ThreadPool_Schedule: no host thread pool in this context");
  return kiln_ffi_error_from_status(c->schedule(c->pool_user, args->task, args->data));
}

static XLA_FFI_Error *api_thread_pool_num_threads(XLA_FFI_ThreadPool_NumThreads_Args *args) {
  CHECK_CTX(XLA_FFI_ThreadPool_NumThreads_Args, args);
  if (!args->num_threads) return INVALID("XLA_FFI_ThreadPool_NumThreads: NULL num_threads");
  if (!args->ctx->schedule)
    return kiln_ffi_error_make(
        XLA_FFI_Error_Code_UNIMPLEMENTED,
        "XLA_FFI_ThreadPool_NumThreads: no host thread pool in this context");
  *args->num_threads = args->ctx->num_threads;
  return NULL;
}

static XLA_FFI_Error *api_run_id_get(XLA_FFI_RunId_Get_Args *args) {
  CHECK_CTX(XLA_FFI_RunId_Get_Args, args);
  args->run_id = args->ctx->run_id;
  return NULL;
}

static XLA_FFI_Error *api_device_ordinal_get(XLA_FFI_DeviceOrdinal_Get_Args *args) {
  CHECK_CTX(XLA_FFI_DeviceOrdinal_Get_Args, args);
  args->device_ordinal = args->ctx->device_ordinal;
  return NULL;
}

static XLA_FFI_Error *api_find_extension(XLA_FFI_InvokeContext_FindExtension_Args *args) {
  CHECK_CTX(XLA_FFI_InvokeContext_FindExtension_Args, args);
  args->extension = NULL;
  int guard = 0;
  for (const XLA_FFI_Extension *e = args->ctx->extensions; e && guard < 1024;
       e = e->next, guard++) {
    if (e->id.extension_type == args->extension_type) {
      args->extension = e;
      return NULL;
    }
  }
  return kiln_ffi_error_make(XLA_FFI_Error_Code_NOT_FOUND,
                             "no extension of type %lld in the execution context",
                             (long long)args->extension_type);
}

static XLA_FFI_Error *api_handler_register(XLA_FFI_Handler_Register_Args *args) {
  CHECK_ARGS(XLA_FFI_Handler_Register_Args, args);
  return kiln_ffi_registry_register_from_api(args);
}

/*------------------------------------------ Table -------------------------------------------*/

static const XLA_FFI_Api g_api = {
    .struct_size = XLA_FFI_Api_STRUCT_SIZE,
    .extension_start = NULL,
    .api_version = {XLA_FFI_Api_Version_STRUCT_SIZE, NULL, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR},
    .internal_api = NULL,
    .XLA_FFI_Error_Create = api_error_create,
    .XLA_FFI_Error_GetDetails = api_error_get_details,
    .XLA_FFI_Error_Destroy = api_error_destroy,
    .XLA_FFI_Handler_Register = api_handler_register,
    .XLA_FFI_Stream_Get = api_stream_get,
    .XLA_FFI_Type_Register = api_type_register,
    .XLA_FFI_InvokeContext_Get = api_invoke_context_get,
    .XLA_FFI_State_Set = api_state_set,
    .XLA_FFI_State_Get = api_state_get,
    .XLA_FFI_DeviceMemory_Allocate = api_device_memory_allocate,
    .XLA_FFI_DeviceMemory_Free = api_device_memory_free,
    .XLA_FFI_ThreadPool_Schedule = api_thread_pool_schedule,
    .XLA_FFI_ThreadPool_NumThreads = api_thread_pool_num_threads,
    .XLA_FFI_Future_Create = api_future_create,
    .XLA_FFI_Future_SetAvailable = api_future_set_available,
    .XLA_FFI_Future_SetError = api_future_set_error,
    .XLA_FFI_RunId_Get = api_run_id_get,
    .XLA_FFI_DeviceOrdinal_Get = api_device_ordinal_get,
    .XLA_FFI_InvokeContext_FindExtension = api_find_extension,
};

const XLA_FFI_Api *kiln_ffi_api(void) {
  return &g_api;
}

/*----------------------------------------- Platforms ----------------------------------------*/

const char *kiln_ffi_platform_name(kiln_ffi_platform_t p) {
  return p == KILN_FFI_PLATFORM_CUDA ? "CUDA" : "Host";
}

kiln_status kiln_ffi_platform_parse(const char *name, size_t len, kiln_ffi_platform_t *out) {
  static const struct {
    const char *name;
    kiln_ffi_platform_t p;
  } names[] = {{"host", KILN_FFI_PLATFORM_HOST},
               {"cpu", KILN_FFI_PLATFORM_HOST},
               {"cuda", KILN_FFI_PLATFORM_CUDA},
               {"gpu", KILN_FFI_PLATFORM_CUDA}};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (name && strlen(names[i].name) == len && strncasecmp(names[i].name, name, len) == 0) {
      *out = names[i].p;
      return NULL;
    }
  }
  return KILN_ERR_INVALID("unknown FFI platform '%.*s' (kiln has Host and CUDA)", (int)len,
                          name ? name : "");
}

/*------------------------------------------ Dtypes ------------------------------------------*/

/* clang-format off */
/* Every FFI data type: name, bits per element, printed name. */
#define KILN_FFI_DTYPES(X)                   \
  X(PRED, 8, "pred")                   \
  X(S1, 1, "s1")                       \
  X(S2, 2, "s2")                       \
  X(S4, 4, "s4")                       \
  X(S8, 8, "s8")                       \
  X(S16, 16, "s16")                    \
  X(S32, 32, "s32")                    \
  X(S64, 64, "s64")                    \
  X(U1, 1, "u1")                       \
  X(U2, 2, "u2")                       \
  X(U4, 4, "u4")                       \
  X(U8, 8, "u8")                       \
  X(U16, 16, "u16")                    \
  X(U32, 32, "u32")                    \
  X(U64, 64, "u64")                    \
  X(F16, 16, "f16")                    \
  X(F32, 32, "f32")                    \
  X(F64, 64, "f64")                    \
  X(BF16, 16, "bf16")                  \
  X(C64, 64, "c64")                    \
  X(C128, 128, "c128")                 \
  X(TOKEN, 0, "token")                 \
  X(F8E5M2, 8, "f8e5m2")               \
  X(F8E3M4, 8, "f8e3m4")               \
  X(F8E4M3, 8, "f8e4m3")               \
  X(F8E4M3FN, 8, "f8e4m3fn")           \
  X(F8E4M3B11FNUZ, 8, "f8e4m3b11fnuz") \
  X(F8E5M2FNUZ, 8, "f8e5m2fnuz")       \
  X(F8E4M3FNUZ, 8, "f8e4m3fnuz")       \
  X(F4E2M1FN, 4, "f4e2m1fn")           \
  X(F8E8M0FNU, 8, "f8e8m0fnu")
/* clang-format on */

int kiln_ffi_dtype_bits(XLA_FFI_DataType t) {
  switch (t) {
#define X(n, bits, name)     \
  case XLA_FFI_DataType_##n: \
    return bits;
    KILN_FFI_DTYPES(X)
#undef X
    default:
      return 0;
  }
}

bool kiln_ffi_dtype_is_valid(XLA_FFI_DataType t) {
  switch (t) {
#define X(n, bits, name) case XLA_FFI_DataType_##n:
    KILN_FFI_DTYPES(X)
#undef X
    return true;
    default:
      return false;
  }
}

size_t kiln_ffi_dtype_byte_size(XLA_FFI_DataType t) {
  int bits = kiln_ffi_dtype_bits(t);
  return bits == 0 ? 0 : bits < 8 ? 1 : (size_t)bits / 8;
}

const char *kiln_ffi_dtype_name(XLA_FFI_DataType t) {
  switch (t) {
#define X(n, bits, name)     \
  case XLA_FFI_DataType_##n: \
    return name;
    KILN_FFI_DTYPES(X)
#undef X
    default:
      return "invalid";
  }
}
