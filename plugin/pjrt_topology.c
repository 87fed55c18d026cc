/* Topologies without a client: PJRT_TopologyDescription_Create (from named options) and
 * PJRT_TopologyDescription_Deserialize (of what TopologyDescription_Serialize writes,
 * pjrt_extras.c). They own their device descriptions; TopologyDescription_Destroy frees them
 * (pjrt_client.c). PJRT_Compile compiles for one (pjrt_compile.c).
 *
 * Create: the platform is the option `platform` ("cpu"; default), else the topology name when
 * it is one; `num_devices` (also `num_host_devices`, `cpu_device_count`, as Client_Create
 * reads them) host devices, default 1. A CUDA topology needs the driver to describe its GPUs:
 * UNIMPLEMENTED here (a client's PJRT_Client_TopologyDescription has it).
 *
 * MakeCanonicalShapeForMemorySpace: the ShapeProto of a buffer of a shape in one of kiln's two
 * memory kinds (its dense layout; pinned_host: XLA's host memory space).
 *
 * Thread-safety: thread-safe (a topology is only read after it is made). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/frontend/shape_proto.h"
#include "plugin/pjrt_objects.h"
#include "plugin/pjrt_relayout.h"

#define FN_CREATE "PJRT_TopologyDescription_Create"
#define FN_DESER "PJRT_TopologyDescription_Deserialize"
#define MAX_DEVICES 4096

void kiln_pjrt_topology_free(PJRT_TopologyDescription *t) {
  if (!t || t->client) return;
  for (int32_t i = 0; t->owned && i < t->num_descriptions; i++)
    kiln_pjrt_description_fini(&t->owned[i]);
  kiln_free(t->owned);
  kiln_free(t->descriptions);
  kiln_free(t);
}

/* A topology of `n` devices of `platform`; kind(i) names each device's kind (NULL: "cpu"). */
static PJRT_TopologyDescription *topology_new(bool is_cuda, const char *version, int32_t n) {
  PJRT_TopologyDescription *t = kiln_calloc(1, sizeof(*t));
  t->is_cuda = is_cuda;
  snprintf(t->platform_version, sizeof(t->platform_version), "%s", version);
  t->owned = kiln_calloc((size_t)n + 1, sizeof(*t->owned));
  t->descriptions = kiln_calloc((size_t)n + 1, sizeof(*t->descriptions));
  return t;
}

static void topology_add(PJRT_TopologyDescription *t, int32_t id, int32_t process,
                         const char *kind) {
  PJRT_DeviceDescription *d = &t->owned[t->num_descriptions];
  kiln_pjrt_description_init(d, id, kind);
  d->process_index = process;
  t->descriptions[t->num_descriptions++] = d;
}

static bool name_is(const PJRT_NamedValue *v, const char *name) {
  return v->name && v->name_size == strlen(name) && !memcmp(v->name, name, v->name_size);
}

static PJRT_Error *TopologyDescription_Create(PJRT_TopologyDescription_Create_Args *args) {
  KILN_PJRT_ARGS(FN_CREATE, args, topology);
  args->topology = NULL;
  char platform[16] = "cpu";
  if (args->topology_name && (args->topology_name_size == 3 || args->topology_name_size == 4))
    snprintf(platform, sizeof(platform), "%.*s", (int)args->topology_name_size,
             args->topology_name);
  if (strcmp(platform, "cpu") && strcmp(platform, "cuda")) snprintf(platform, 16, "cpu");
  int64_t n = 1;
  if (args->num_options && !args->create_options)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, FN_CREATE ": create_options is NULL");
  for (size_t i = 0; i < args->num_options; i++) {
    const PJRT_NamedValue *v = &args->create_options[i];
    if (name_is(v, "platform")) {
      if (v->type != PJRT_NamedValue_kString || !v->string_value || v->value_size >= 16)
        return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, FN_CREATE
                                    ": option platform must be a string "
                                    "(\"cpu\" or \"cuda\")");
      snprintf(platform, sizeof(platform), "%.*s", (int)v->value_size, v->string_value);
    } else if (name_is(v, "num_devices") || name_is(v, "num_host_devices") ||
               name_is(v, "cpu_device_count")) {
      if (v->type != PJRT_NamedValue_kInt64)
        return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                    FN_CREATE ": option %.*s must be an int64", (int)v->name_size,
                                    v->name);
      n = v->int64_value;
    }
  }
  if (!strcmp(platform, "cuda"))
    return kiln_pjrt_error_make(KILN_UNIMPLEMENTED, FN_CREATE
                                ": a CUDA topology is read from the driver; use "
                                "PJRT_Client_TopologyDescription of a CUDA client");
  if (strcmp(platform, "cpu"))
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                FN_CREATE ": unknown platform \"%s\" (kiln's: \"cpu\", \"cuda\")",
                                platform);
  if (n < 1 || n > MAX_DEVICES)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                FN_CREATE ": num_devices %lld is outside 1..%d", (long long)n,
                                MAX_DEVICES);
  char version[64];
  snprintf(version, sizeof(version), "kiln %s; host", KILN_PJRT_KILN_VERSION);
  PJRT_TopologyDescription *t = topology_new(false, version, (int32_t)n);
  for (int32_t i = 0; i < (int32_t)n; i++) topology_add(t, i, 0, "cpu");
  args->topology = t;
  return NULL;
}

/* ---- Deserialize: the text of topology_text (pjrt_extras.c) ---- */

typedef struct reader {
  const char *p, *end;
  int line;
} reader_t;

/* The next line (without its newline) into buf; false at the end or when it does not fit. */
static bool next_line(reader_t *r, char *buf, size_t n) {
  if (r->p >= r->end) return false;
  const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
  const char *stop = nl ? nl : r->end;
  size_t len = (size_t)(stop - r->p);
  r->line++;
  if (len >= n || memchr(r->p, 0, len)) return false;
  memcpy(buf, r->p, len);
  buf[len] = 0;
  r->p = nl ? nl + 1 : r->end;
  return true;
}

static kiln_status deserialize(const char *bytes, size_t size, PJRT_TopologyDescription **out) {
  *out = NULL;
  reader_t r = {bytes, bytes + size, 0};
  char line[256], platform[16] = "", version[64] = "";
  int n = 0, used = 0;
  if (!next_line(&r, line, sizeof(line)) || strcmp(line, "kiln-topology/1"))
    return KILN_ERR_INVALID("not a kiln topology (no \"kiln-topology/1\" line)");
  if (!next_line(&r, line, sizeof(line)) || sscanf(line, "platform %15s%n", platform, &used) != 1 ||
      line[used] || (strcmp(platform, "cpu") && strcmp(platform, "cuda")))
    return KILN_ERR_INVALID("line %d: expected \"platform cpu|cuda\"", r.line);
  if (!next_line(&r, line, sizeof(line)) || strncmp(line, "version ", 8) ||
      strlen(line + 8) >= sizeof(version))
    return KILN_ERR_INVALID("line %d: expected \"version <text>\"", r.line);
  snprintf(version, sizeof(version), "%s", line + 8);
  if (!next_line(&r, line, sizeof(line)) || sscanf(line, "devices %d%n", &n, &used) != 1 ||
      line[used] || n < 1 || n > MAX_DEVICES)
    return KILN_ERR_INVALID("line %d: expected \"devices N\" with N in 1..%d", r.line, MAX_DEVICES);
  PJRT_TopologyDescription *t = topology_new(!strcmp(platform, "cuda"), version, n);
  for (int i = 0; i < n; i++) {
    int id = 0, process = 0, kind_at = 0;
    if (!next_line(&r, line, sizeof(line)) ||
        sscanf(line, "device %d process %d kind %n", &id, &process, &kind_at) != 2 || !kind_at ||
        !line[kind_at] || id < 0 || process < 0 || (!t->is_cuda && strcmp(line + kind_at, "cpu"))) {
      kiln_pjrt_topology_free(t);
      return KILN_ERR_INVALID("line %d: expected \"device I process P kind K\" (device %d of %d)",
                              r.line, i, n);
    }
    topology_add(t, id, process, line + kind_at);
  }
  if (r.p != r.end) {
    kiln_pjrt_topology_free(t);
    return KILN_ERR_INVALID("line %d: more than the %d devices the topology lists", r.line + 1, n);
  }
  *out = t;
  return NULL;
}

static PJRT_Error *TopologyDescription_Deserialize(
    PJRT_TopologyDescription_Deserialize_Args *args) {
  KILN_PJRT_ARGS(FN_DESER, args, topology);
  args->topology = NULL;
  if (!args->serialized_topology && args->serialized_topology_size)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, FN_DESER ": serialized_topology is NULL");
  kiln_status s = deserialize(args->serialized_topology ? args->serialized_topology : "",
                              args->serialized_topology_size, &args->topology);
  return s ? kiln_pjrt_error_from_status(kiln_status_annotate(s, "in " FN_DESER)) : NULL;
}

/* ---- MakeCanonicalShapeForMemorySpace ---- */

#define FN_CANON "PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace"

/* xla::Layout::kHostMemorySpace: the memory space number of host memory in a layout. */
#define XLA_HOST_MEMORY_SPACE 5

static void pb_varint(kiln_strbuf_t *b, uint64_t v) {
  do {
    unsigned char c = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v) c |= 0x80;
    kiln_strbuf_append_char(b, (char)c);
  } while (v);
}

static void pb_packed(kiln_strbuf_t *b, uint32_t field, const int64_t *v, size_t n) {
  kiln_strbuf_t body = {0};
  for (size_t i = 0; i < n; i++) pb_varint(&body, (uint64_t)v[i]);
  pb_varint(b, (uint64_t)field << 3 | 2);
  pb_varint(b, body.len);
  if (body.len) kiln_strbuf_append_n(b, body.data, body.len);
  kiln_strbuf_free(&body);
}

static void shape_deleter(const char *p) {
  kiln_free((void *)p);
}

/* The ShapeProto a buffer of this shape has in memory kind `memory_space_kind_id` (0
 * "device", 1 "pinned_host", GetMemorySpaceKindIds' numbers): the given dense layout or the
 * default one, and on pinned_host XLA's host memory space. */
static PJRT_Error *TopologyDescription_MakeCanonicalShapeForMemorySpace(
    PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args *args) {
  KILN_PJRT_ARGS(FN_CANON, args, serialized_shape_deleter);
  args->serialized_shape = NULL;
  args->serialized_shape_size = 0;
  args->serialized_shape_deleter = NULL;
  if (!args->topology)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, FN_CANON ": topology is NULL");
  if (args->memory_space_kind_id != 0 && args->memory_space_kind_id != 1)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                FN_CANON
                                ": memory_space_kind_id %d is not one of kiln's (0 "
                                "\"device\", 1 \"pinned_host\")",
                                args->memory_space_kind_id);
  kiln_elem_type_t e;
  int64_t type = 0;
  size_t elem = kiln_pjrt_type_bytes(args->element_type);
  if (!kiln_pjrt_type_to_elem(args->element_type, &e) || !kiln_elem_type_to_proto(e, &type) ||
      !elem)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                FN_CANON ": element type %d is not an array type kiln supports",
                                (int)args->element_type);
  if (args->num_dims > 64 || (args->num_dims && !args->dims))
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, FN_CANON ": dims is NULL or above rank 64");
  int32_t rank = (int32_t)args->num_dims;
  for (int32_t i = 0; i < rank; i++)
    if (args->dims[i] < 0)
      return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, FN_CANON ": dimension %d is negative", i);
  int64_t m2m[64], dynamic[64] = {0};
  for (int32_t i = 0; i < rank; i++) m2m[i] = rank - 1 - i;
  if (args->layout) {
    kiln_status s =
        kiln_pjrt_parse_layout(FN_CANON, "layout", args->layout, rank, args->dims, elem, m2m);
    if (s) return kiln_pjrt_error_from_status(s);
  }
  /* ShapeProto: element_type 2, dimensions 3, layout 5 { minor_to_major 1, memory_space 8 },
   * is_dynamic_dimension 6. */
  kiln_strbuf_t b = {0}, layout = {0};
  pb_varint(&b, 2 << 3);
  pb_varint(&b, (uint64_t)type);
  pb_packed(&b, 3, args->dims, (size_t)rank);
  pb_packed(&layout, 1, m2m, (size_t)rank);
  if (args->memory_space_kind_id == 1) {
    pb_varint(&layout, 8 << 3);
    pb_varint(&layout, XLA_HOST_MEMORY_SPACE);
  }
  pb_varint(&b, 5 << 3 | 2);
  pb_varint(&b, layout.len);
  kiln_strbuf_append_n(&b, layout.data, layout.len);
  kiln_strbuf_free(&layout);
  pb_packed(&b, 6, dynamic, (size_t)rank);
  args->serialized_shape_size = b.len;
  args->serialized_shape = kiln_strbuf_take(&b);
  args->serialized_shape_deleter = shape_deleter;
  return NULL;
}

void kiln_pjrt_fill_topology(PJRT_Api *api) {
  api->PJRT_TopologyDescription_Create = TopologyDescription_Create;
  api->PJRT_TopologyDescription_Deserialize = TopologyDescription_Deserialize;
  api->PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace =
      TopologyDescription_MakeCanonicalShapeForMemorySpace;
}
