/* Compiling programs into executables: PJRT_Client_Compile, PJRT_Compile (for a topology),
 * PJRT_Client_Load, PJRT_Executable_Serialize and PJRT_Executable_DeserializeAndLoad.
 *
 * Compile: look the program up in the client's compile cache (compile_cache.h); on a miss
 * decode the options, parse the program (kiln_pjrt_program_parse: every program format goes
 * through that one function), verify it, settle its entry layouts (pjrt_executable.h), run the
 * passes and keep the optimized module. Kernels are made on the first execute (pjrt_executable.c).
 * The optimized module's text goes to the disk cache too, so another process compiling the same
 * program skips parsing and the passes.
 *
 * Serialized executables: a header (magic "KILNEXE1", the blob format's version, kiln's
 * version, the lengths of the parts and a 128-bit checksum of them) then the compile options
 * and the optimized module's text. DeserializeAndLoad checks all of it: a blob from another
 * kiln version, a truncated or altered one is INVALID_ARGUMENT; nothing in it is trusted
 * before the checksum matched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/disk_cache.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/str.h"
#include "base/version.h"
#include "compiler/frontend/hlo_proto.h"
#include "compiler/frontend/stablehlo_to_hlo.h"
#include "compiler/passes/pipeline.h"
#include "plugin/compile_cache.h"
#include "plugin/compile_options.h"
#include "plugin/pjrt_blob.h"
#include "plugin/pjrt_executable.h"
#include "plugin/pjrt_internal.h"
#include "plugin/env_options.h"

#define ACCEPTED_FORMATS "\"hlo\" (HloModuleProto or HLO text), \"hlo_with_config\", \"mlir\""

/* Parses a program in `format` into a module (verified): "hlo" (HLO text when it reads as
 * text, else an HloModuleProto), "hlo_with_config" (likewise, or HloModuleProtoWithConfig),
 * "mlir" (StableHLO text or VHLO bytecode). num_replicas / num_partitions are what the
 * program itself says (hlo_with_config's config), else 1. The one place a new program format
 * plugs in. */
kiln_status kiln_pjrt_program_parse(const char *format, size_t format_len, const void *code,
                                    size_t code_len, kiln_hlo_module_t **out, int64_t *num_replicas,
                                    int64_t *num_partitions);

kiln_status kiln_pjrt_program_parse(const char *format, size_t format_len, const void *code,
                                    size_t code_len, kiln_hlo_module_t **out, int64_t *num_replicas,
                                    int64_t *num_partitions) {
  *out = NULL;
  *num_replicas = 1;
  *num_partitions = 1;
  bool is_hlo = format_len == 3 && !memcmp(format, "hlo", 3);
  bool is_cfg = format_len == 15 && !memcmp(format, "hlo_with_config", 15);
  bool is_mlir = format_len == 4 && !memcmp(format, "mlir", 4);
  if (!is_hlo && !is_cfg && !is_mlir)
    return KILN_ERR_INVALID("unknown program format \"%.*s\": kiln accepts " ACCEPTED_FORMATS,
                            (int)(format_len > 64 ? 64 : format_len), format ? format : "");
  if (!code && code_len) return KILN_ERR_INVALID("program code is NULL");
  kiln_hlo_module_t *m = NULL;
  kiln_status s;
  if (is_mlir) {
    /* StableHLO text or VHLO bytecode (compiler/frontend/stablehlo_to_hlo.h) */
    s = kiln_stablehlo_module_from_bytes(code, code_len, "<program>", &m);
  } else if (kiln_hlo_bytes_are_text(code, code_len)) {
    kiln_hlo_parse_options_t po = {0};
    po.filename = "<program>";
    s = kiln_hlo_parse_module((const char *)code, code_len, &po, &m);
  } else if (is_cfg) {
    s = kiln_hlo_module_from_proto_with_config(code, code_len, &m, num_replicas, num_partitions);
  } else {
    s = kiln_hlo_module_from_proto(code, code_len, &m);
  }
  if (!s) s = kiln_hlo_module_verify(m);
  if (s) {
    kiln_hlo_module_destroy(m);
    return kiln_status_annotate(s, "while reading the \"%.*s\" program", (int)format_len, format);
  }
  *out = m;
  return NULL;
}

/* ---- entry layouts ---- */

/* A layout Execute can take as it is: a dense minor_to_major permutation without tiles. */
static bool dense_permutation(const kiln_shape_t *s) {
  if (!s->has_layout || s->layout.rank != s->rank || s->layout.num_tiles || s->rank > 64)
    return false;
  bool seen[64] = {false};
  for (int i = 0; i < s->rank; i++) {
    int64_t d = s->layout.minor_to_major[i];
    if (d < 0 || d >= s->rank || seen[d]) return false;
    seen[d] = true;
  }
  return true;
}

/* Gives every array leaf of `s` the default layout, or (keep) its own dense one on the
 * default memory space (a tiled or missing layout becomes the default). */
static void entry_layouts(kiln_arena_t *a, kiln_shape_t *s, bool keep) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++) entry_layouts(a, s->elements[i], keep);
  } else if (keep && dense_permutation(s)) {
    int64_t *m2m = s->layout.minor_to_major;
    memset(&s->layout, 0, sizeof(s->layout));
    s->layout.rank = s->rank;
    s->layout.minor_to_major = m2m;
  } else {
    kiln_shape_set_default_layout(a, s);
  }
}

/* The array leaves of `s`, depth first. */
static void array_leaves(kiln_shape_t *s, kiln_shape_t **out, int *n, int cap) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++) array_leaves(s->elements[i], out, n, cap);
  } else if (*n < cap) {
    out[(*n)++] = s;
  } else {
    (*n)++;
  }
}

/* Applies argument layout `text` of the compile options (a shape text like "f32[2,3]{0,1}" or
 * "(f32[2,3]{0,1}, s32[])": each array's {minor_to_major}, where given, in depth-first leaf
 * order) to parameter shape `s`. */
static kiln_status apply_argument_layout(kiln_arena_t *a, kiln_shape_t *s, int param,
                                         const char *text) {
  kiln_shape_t *leaves[256];
  int n = 0, k = 0;
  array_leaves(s, leaves, &n, 256);
  if (n > 256) return KILN_ERR_UNIMPLEMENTED("argument layout %d: %d array leaves", param, n);
  for (const char *p = text; p && *p; p++) {
    if (*p != '[') continue;
    const char *close = strchr(p, ']');
    if (!close) break;
    int rank = close == p + 1 ? 0 : 1;
    for (const char *q = p + 1; q < close; q++) rank += *q == ',';
    if (k >= n || leaves[k]->rank != rank)
      return KILN_ERR_INVALID(
          "compile options: argument layout %d (%s) does not match parameter %d's shape", param,
          text, param);
    kiln_shape_t *leaf = leaves[k++];
    p = close;
    if (close[1] != '{') continue;
    int64_t m2m[64];
    int got = 0;
    const char *q = close + 2;
    while (*q && *q != '}' && *q != ':') {
      char *end = NULL;
      long v = strtol(q, &end, 10);
      if (end == q) break;
      if (got < 64) m2m[got] = v;
      got++;
      q = *end == ',' ? end + 1 : end;
    }
    if (*q == ':')
      return kiln_status_make(KILN_UNIMPLEMENTED,
                              "compile options: argument layout %d (%s) is tiled; kiln's PJRT "
                              "buffers have dense layouts",
                              param, text);
    kiln_shape_t want = *leaf;
    want.has_layout = true;
    memset(&want.layout, 0, sizeof(want.layout));
    want.layout.rank = got;
    want.layout.minor_to_major = m2m;
    if (got != rank || !dense_permutation(&want))
      return KILN_ERR_INVALID(
          "compile options: argument layout %d (%s) is not a permutation of the dimensions "
          "of parameter %d",
          param, text, param);
    kiln_shape_set_default_layout(a, leaf);
    for (int i = 0; i < rank; i++) leaf->layout.minor_to_major[i] = m2m[i];
  }
  if (k != n)
    return KILN_ERR_INVALID(
        "compile options: argument layout %d (%s) does not match parameter %d's shape", param, text,
        param);
  return NULL;
}

static bool is_default_everywhere(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      if (!is_default_everywhere(s->elements[i])) return false;
    return true;
  }
  for (int i = 0; i < s->rank; i++)
    if (s->layout.minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

/* The entry's layouts, which the executable's parameters and results are (pjrt_executable.h):
 * results the default; each parameter its own dense layout (entry_computation_layout, else
 * the parameter's shape) or the compile options' argument layout; a parameter an output
 * aliases the default one (donated memory becomes an output buffer, which has the default
 * layout). */
static kiln_status make_entry_layouts(kiln_hlo_module_t *m, const kiln_pjrt_compile_options_t *co) {
  kiln_hlo_computation_t *e = m->entry;
  int n = e->num_parameters;
  if (co->num_argument_layouts && co->num_argument_layouts != n)
    return KILN_ERR_INVALID("compile options: %d argument layouts for %d parameters",
                            co->num_argument_layouts, n);
  kiln_shape_t **params = kiln_arena_alloc(&m->arena, sizeof(*params) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    const kiln_shape_t *given =
        m->has_entry_layout && i < m->num_entry_layout_params && m->entry_layout_params[i]
            ? m->entry_layout_params[i]
            : e->parameters[i]->shape;
    bool aliased = false;
    for (int k = 0; k < m->num_io_aliases; k++) aliased |= m->io_aliases[k].param_number == i;
    params[i] = kiln_shape_clone(&m->arena, given);
    entry_layouts(&m->arena, params[i], !aliased);
    if (i < co->num_argument_layouts && co->argument_layouts[i]) {
      KILN_RETURN_IF_ERROR_PLAIN(
          apply_argument_layout(&m->arena, params[i], i, co->argument_layouts[i]));
      if (aliased && !is_default_everywhere(params[i]))
        return kiln_status_make(KILN_UNIMPLEMENTED,
                                "compile options: argument layout %d (%s) is not the default "
                                "one, and an output aliases parameter %d (kiln donates in the "
                                "default layout only)",
                                i, co->argument_layouts[i], i);
    }
  }
  kiln_shape_t *result = kiln_shape_clone(&m->arena, e->root->shape);
  entry_layouts(&m->arena, result, false);
  m->has_entry_layout = true;
  m->num_entry_layout_params = n;
  m->entry_layout_params = params;
  m->entry_layout_result = result;
  return NULL;
}

/* ---- compile ---- */

/* The target part of a cache key: the platform and the environment the passes read. */
static void client_target(const PJRT_Client *c, char *buf, size_t n) {
  const char *disabled = getenv("KILN_DISABLE_PASSES");
  const char *gemm = getenv("KILN_GEMM_LIBRARY");
  snprintf(buf, n, "%s;disable=%s;gemm=%s", kiln_pjrt_client_target_name(c),
           disabled ? disabled : "", gemm ? gemm : "");
}

/* The disk cache key of the optimized module: the compile cache key's hash with the version. */
static void module_disk_key(const kiln_pjrt_cache_key_t *k, uint64_t out[2]) {
  kiln_hasher_t h;
  kiln_hash_init(&h, 0x6d6f64756c6573ull);
  kiln_hash_field(&h, k->hash, sizeof(k->hash));
  kiln_hash_field(&h, KILN_VERSION_STRING, strlen(KILN_VERSION_STRING));
  kiln_hash_final(&h, out);
}

/* The module of an optimized text (from the disk cache or a serialized executable), ready
 * for lowering. */
static kiln_status parse_optimized(const char *text, size_t len, kiln_hlo_module_t **out) {
  kiln_hlo_parse_options_t po = {0};
  po.filename = "<optimized module>";
  kiln_status s = kiln_hlo_parse_module(text, len, &po, out);
  if (!s) kiln_pipeline_lift_parse_limit(*out);
  return s;
}

/* The world an executable is compiled for: the options' num_replicas x num_partitions
 * participants, participant i (replica * num_partitions + partition) on the device of id
 * (*assignment)[i] (kiln_malloc'd): the options' device assignment, else for one participant
 * its device_ordinal or the first device, else XLA's default placement (replica r, partition
 * p on device r + p * num_replicas, as DefaultDeviceAssignment gives). Across processes the
 * ids are global (c->all_devices); one participant must be on a device of this process. */
static kiln_status pick_devices(const PJRT_Client *c, const kiln_pjrt_compile_options_t *co,
                                int32_t *reps, int32_t *parts, int32_t **assignment) {
  *assignment = NULL;
  if (c->num_devices < 1)
    return kiln_status_make(KILN_FAILED_PRECONDITION, "the client has no devices");
  int64_t r = co->num_replicas, p = co->num_partitions;
  if (r < 1 || p < 1 || r * p > c->num_all_devices)
    return KILN_ERR_INVALID(
        "compile options: %lld replicas x %lld partitions need %lld devices; the client has %d "
        "(host devices: the client option num_devices or $KILN_HOST_DEVICES)",
        (long long)r, (long long)p, (long long)(r * p), c->num_all_devices);
  int32_t n = (int32_t)(r * p);
  *reps = (int32_t)r;
  *parts = (int32_t)p;
  int32_t *a = kiln_try_calloc((size_t)n, sizeof(*a));
  if (!a) return KILN_ERR_EXHAUSTED("out of host memory for a device assignment of %d", n);
  kiln_status s = NULL;
  if (co->has_device_assignment && co->device_ids) {
    if (co->da_replica_count != r || co->da_computation_count != p)
      s = KILN_ERR_INVALID(
          "compile options: the device assignment is %d replicas x %d computations, the "
          "options ask for %lld replicas x %lld partitions",
          co->da_replica_count, co->da_computation_count, (long long)r, (long long)p);
    for (int32_t i = 0; i < n && !s; i++) {
      int64_t want = co->device_ids[i];
      a[i] = want >= 0 && want < c->num_all_devices ? (int32_t)want : -1;
      for (int32_t j = 0; j < i && a[i] >= 0; j++)
        if (a[j] == a[i])
          s = KILN_ERR_INVALID(
              "compile options: the device assignment puts participants %d and %d on device "
              "%lld",
              j, i, (long long)want);
      if (a[i] < 0)
        s = KILN_ERR_INVALID(
            "compile options: the device assignment's device %lld is not an addressable "
            "device of the client or one of its other processes' (%d devices)",
            (long long)want, c->num_all_devices);
    }
  } else if (n == 1 && co->device_ordinal >= 0) {
    if (co->device_ordinal < c->num_devices)
      a[0] = c->first_device_id + (int32_t)co->device_ordinal;
    else
      s = KILN_ERR_INVALID(
          "compile options: device_ordinal device %lld is not an addressable device of the "
          "client (%d devices)",
          (long long)co->device_ordinal, c->num_devices);
  } else if (n == 1) {
    a[0] = c->first_device_id;
  } else {
    for (int32_t ri = 0; ri < r; ri++)
      for (int32_t pi = 0; pi < p; pi++) a[ri * p + pi] = (int32_t)(ri + pi * r);
  }
  if (!s && n == 1 && kiln_pjrt_client_local_index(c, a[0]) < 0)
    s = KILN_ERR_INVALID(
        "compile options: the device assignment's device %d belongs to process %d, not this "
        "one (%d): a single-device program runs on an addressable device",
        a[0], c->all_devices[a[0]]->desc.process_index, c->process_index);
  if (s) {
    kiln_free(a);
    return s;
  }
  *assignment = a;
  return NULL;
}

/* The program's own config (its module's replica_count / num_partitions) must be the
 * options' world, or 1 x 1. */
static kiln_status check_program_world(int64_t reps, int64_t parts, int32_t r, int32_t p) {
  if ((reps == 1 && parts == 1) || (reps == r && parts == p)) return NULL;
  return KILN_ERR_INVALID(
      "the program's config asks for %lld replicas x %lld partitions, the compile options for "
      "%d x %d: set num_replicas / num_partitions in the compile options",
      (long long)reps, (long long)parts, r, p);
}

/* Whether `m` keeps an rng-get-and-update-state counter. Such an executable is not shared
 * through the in-memory cache: as in XLA, each compile of the program draws from its own
 * counter, starting at the seed. */
static bool has_rng_state(const kiln_hlo_module_t *m) {
  for (size_t c = 0; c < m->computations.len; c++)
    for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++)
      if (m->computations.data[c]->instructions.data[i]->opcode == KILN_OP_RNG_GET_AND_UPDATE_STATE)
        return true;
  return false;
}

/* Compiles (or finds in the cache) `program` for `client`; *out holds one reference. */
static kiln_status compile_program(PJRT_Client *client, const PJRT_Program *program,
                                   const char *options, size_t options_len, PJRT_Executable **out) {
  *out = NULL;
  if (!program) return KILN_ERR_INVALID("program is NULL");
  if (program->struct_size < offsetof(PJRT_Program, format_size) + sizeof(size_t))
    return KILN_ERR_INVALID("program->struct_size %zu is too small", program->struct_size);
  if (!program->format)
    return KILN_ERR_INVALID("program format is NULL: kiln accepts " ACCEPTED_FORMATS);
  if (!options && options_len) return KILN_ERR_INVALID("compile_options is NULL");
  char target[512];
  client_target(client, target, sizeof(target));
  kiln_pjrt_cache_key_t key;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_pjrt_cache_key_make(&key, program->format, program->format_size,
                                                      program->code, program->code_size, options,
                                                      options_len, target));
  PJRT_Executable *hit =
      client->compile_cache ? kiln_pjrt_compile_cache_get(client->compile_cache, &key) : NULL;
  if (hit) {
    kiln_pjrt_cache_key_free(&key);
    *out = hit;
    return NULL;
  }
  kiln_pjrt_compile_options_t co;
  memset(&co, 0, sizeof(co));
  kiln_status s = kiln_pjrt_compile_options_decode(options, options_len, &co);
  if (s) {
    kiln_pjrt_cache_key_free(&key);
    return kiln_status_annotate(s, "while decoding the compile options");
  }
  int32_t reps = 1, parts = 1, *assignment = NULL;
  s = pick_devices(client, &co, &reps, &parts, &assignment);
  kiln_hlo_module_t *m = NULL;
  double passes_ms = 0;
  const char *dir = kiln_pjrt_compile_cache_dir(client->compile_cache);
  uint64_t dkey[2];
  module_disk_key(&key, dkey);
  if (!s && dir) {
    void *text = NULL;
    size_t len = 0;
    if (kiln_disk_cache_get(dir, "modules", dkey, &text, &len)) {
      kiln_status ps = parse_optimized((const char *)text, len, &m);
      if (ps) {
        KILN_LOG_W("compile cache: a cached module does not parse (%s); recompiling",
                   kiln_status_message(ps));
        kiln_status_free(ps);
        m = NULL;
      }
      kiln_free(text);
    }
  }
  if (!s && !m) {
    int64_t preps = 1, pparts = 1;
    s = kiln_pjrt_program_parse(program->format, program->format_size, program->code,
                                program->code_size, &m, &preps, &pparts);
    if (!s) s = check_program_world(preps, pparts, reps, parts);
    if (!s) s = make_entry_layouts(m, &co);
    if (!s) {
      kiln_compile_options_t o;
      memset(&o, 0, sizeof(o));
      /* The passes differ per target (which dots the gemm library takes). */
      o.emit.target = client->is_cuda ? KILN_TARGET_CUDA : KILN_TARGET_HOST;
      o.emit.cublaslt = client->is_cuda && client->cublaslt;
      kiln_pass_options_t po;
      memset(&po, 0, sizeof(po));
      const char *dump = co.xla_dump_to ? co.xla_dump_to : client->options.dump_dir;
      po.dump_dir = dump && *dump ? dump : "";
      kiln_pjrt_pass_options_from_env(&po);
      kiln_pjrt_compile_options_to_passes(&co, &po);
      o.passes = &po;
      o.emit.dump_dir = po.dump_dir;
      kiln_pjrt_compile_options_from_env(&o, NULL);
      kiln_compile_stats_t st;
      memset(&st, 0, sizeof(st));
      double t0 = kiln_clock_ms();
      s = kiln_compile_module_passes(m, &o, &st);
      passes_ms = kiln_clock_ms() - t0;
    }
    if (!s && dir) {
      char *text = kiln_hlo_module_to_string(m);
      kiln_disk_cache_put(dir, "modules", dkey, text, strlen(text));
      kiln_free(text);
    }
  }
  PJRT_Executable *e = NULL;
  bool shared = !s && !has_rng_state(m);
  if (!s) {
    s = kiln_pjrt_executable_create(client, reps, parts, assignment, m, options, options_len, &co,
                                    passes_ms, &e);
    m = NULL;
  }
  kiln_free(assignment);
  kiln_hlo_module_destroy(m);
  kiln_pjrt_compile_options_free(&co);
  if (!s && shared && client->compile_cache) {
    PJRT_Executable *use = kiln_pjrt_compile_cache_put(client->compile_cache, &key, e);
    kiln_pjrt_executable_unref(e);
    e = use;
  }
  kiln_pjrt_cache_key_free(&key);
  *out = e;
  return s;
}

static PJRT_Error *client_compile(PJRT_Client_Compile_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_Compile", args, executable);
  args->executable = NULL;
  if (!args->client)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "PJRT_Client_Compile: client is NULL");
  PJRT_Executable *e = NULL;
  kiln_status s = compile_program(args->client, args->program, args->compile_options,
                                  args->compile_options_size, &e);
  PJRT_LoadedExecutable *l = NULL;
  if (!s) s = kiln_pjrt_loaded_create(e, &l);
  kiln_pjrt_executable_unref(e);
  if (s) return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in PJRT_Client_Compile"));
  args->executable = l;
  return NULL;
}

/* PJRT_Compile: an executable for a topology, to Serialize (then DeserializeAndLoad) or to
 * PJRT_Client_Load on a client. With a client (the caller's, or the topology's own) it is
 * Client_Compile's executable; without one, a client of the topology's platform and devices
 * is made for the compilation and destroyed after it (the executable outlives it, detached:
 * its metadata, optimized program and Serialize work; it runs once loaded on a client). */
static PJRT_Error *topology_compile(PJRT_Compile_Args *args) {
  KILN_PJRT_ARGS("PJRT_Compile", args, executable);
  args->executable = NULL;
  const PJRT_TopologyDescription *t = args->topology;
  if (!t) return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT, "PJRT_Compile: topology is NULL");
  PJRT_Client *client = args->client ? args->client : t->client;
  if (client && client->is_cuda != t->is_cuda)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Compile: the client's platform (%s) is not the "
                                "topology's (%s)",
                                client->is_cuda ? "cuda" : "cpu", t->is_cuda ? "cuda" : "cpu");
  const PJRT_Api *api = GetPjrtApi();
  PJRT_Client *own = NULL;
  if (!client) {
    PJRT_NamedValue o[2];
    memset(o, 0, sizeof(o));
    o[0].struct_size = o[1].struct_size = PJRT_NamedValue_STRUCT_SIZE;
    o[0].name = "platform";
    o[0].name_size = strlen("platform");
    o[0].type = PJRT_NamedValue_kString;
    o[0].string_value = t->is_cuda ? "cuda" : "cpu";
    o[0].value_size = strlen(o[0].string_value);
    o[1].name = "num_devices";
    o[1].name_size = strlen("num_devices");
    o[1].type = PJRT_NamedValue_kInt64;
    o[1].int64_value = t->num_descriptions;
    o[1].value_size = 1;
    PJRT_Client_Create_Args ca;
    memset(&ca, 0, sizeof(ca));
    ca.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
    ca.create_options = o;
    ca.num_options = t->is_cuda ? 1 : 2;
    PJRT_Error *err = api->PJRT_Client_Create(&ca);
    if (err) return err;
    own = client = ca.client;
  }
  PJRT_Executable *e = NULL;
  kiln_status s =
      compile_program(client, args->program, args->compile_options, args->compile_options_size, &e);
  if (own) {
    PJRT_Client_Destroy_Args da;
    memset(&da, 0, sizeof(da));
    da.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
    da.client = own;
    s = kiln_status_join(s, kiln_pjrt_error_take_status(api->PJRT_Client_Destroy(&da)));
  }
  if (s) {
    kiln_pjrt_executable_unref(e);
    return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in PJRT_Compile"));
  }
  args->executable = e;
  return NULL;
}

/* ---- serialization ---- */

#define BLOB_MAGIC "KILNEXE1"
#define BLOB_FORMAT 1u

typedef struct blob_header {
  char magic[8];
  uint32_t format;
  uint32_t reserved;
  char version[16];
  uint64_t options_len, text_len;
  uint64_t sum[2];
} blob_header_t;

typedef struct serialized {
  char *data;
  size_t len;
} serialized_t;

static void serialized_deleter(PJRT_SerializedExecutable *p) {
  serialized_t *s = (serialized_t *)p;
  if (!s) return;
  kiln_free(s->data);
  kiln_free(s);
}

static void blob_sum(const char *opts, size_t ol, const char *text, size_t tl, uint64_t out[2]) {
  kiln_hasher_t h;
  kiln_hash_init(&h, 0x73657269616c697aull);
  kiln_hash_field(&h, opts, ol);
  kiln_hash_field(&h, text, tl);
  kiln_hash_final(&h, out);
}

/* The parts' lengths add up to the blob's `n` bytes. */
static bool blob_lengths_ok(const blob_header_t *h, size_t n) {
  return h->options_len <= n && h->text_len <= n && sizeof(*h) + h->options_len + h->text_len == n;
}

char *kiln_pjrt_blob_make(const char *options, size_t ol, const char *text, size_t tl, size_t *n) {
  blob_header_t h;
  memset(&h, 0, sizeof(h));
  memcpy(h.magic, BLOB_MAGIC, 8);
  h.format = BLOB_FORMAT;
  snprintf(h.version, sizeof(h.version), "%s", KILN_VERSION_STRING);
  h.options_len = ol;
  h.text_len = tl;
  blob_sum(options, ol, text, tl, h.sum);
  *n = sizeof(h) + ol + tl;
  char *b = kiln_malloc(*n);
  memcpy(b, &h, sizeof(h));
  if (ol) memcpy(b + sizeof(h), options, ol);
  if (tl) memcpy(b + sizeof(h) + ol, text, tl);
  return b;
}

bool kiln_pjrt_blob_reseal(void *blob, size_t n) {
  blob_header_t h;
  if (!blob || n < sizeof(h)) return false;
  memcpy(&h, blob, sizeof(h));
  if (!blob_lengths_ok(&h, n)) return false;
  const char *opts = (const char *)blob + sizeof(h);
  blob_sum(opts, (size_t)h.options_len, opts + h.options_len, (size_t)h.text_len, h.sum);
  memcpy(blob, &h, sizeof(h));
  return true;
}

static PJRT_Error *exec_serialize(PJRT_Executable_Serialize_Args *args) {
  KILN_PJRT_ARGS("PJRT_Executable_Serialize", args, serialized_executable_deleter);
  const PJRT_Executable *e = args->executable;
  if (!e)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Executable_Serialize: executable is NULL");
  serialized_t *s = kiln_calloc(1, sizeof(*s));
  s->data = kiln_pjrt_blob_make(e->compile_options, e->compile_options_len, e->optimized_text,
                                e->optimized_text_len, &s->len);
  args->serialized_bytes = s->data;
  args->serialized_bytes_size = s->len;
  args->serialized_executable = (PJRT_SerializedExecutable *)s;
  args->serialized_executable_deleter = serialized_deleter;
  return NULL;
}

/* An executable of `client` from optimized text and serialized options. `verify`: the text
 * came from outside (a serialized executable), so the module is verified before anything
 * relies on it (shapes, structure, the entry layout against the entry). The passes are not
 * run: a module they did not make (elementwise ops outside fusions, a while loop without the
 * copies copy_insertion adds) is refused by lowering, on the first execute, with its error. */
static kiln_status load_optimized(PJRT_Client *client, const char *text, size_t text_len,
                                  const char *options, size_t options_len, bool verify,
                                  PJRT_Executable **out) {
  *out = NULL;
  kiln_pjrt_compile_options_t co;
  memset(&co, 0, sizeof(co));
  KILN_RETURN_IF_ERROR(kiln_pjrt_compile_options_decode(options, options_len, &co),
                       "while decoding the compile options");
  int32_t reps = 1, parts = 1, *assignment = NULL;
  kiln_status s = pick_devices(client, &co, &reps, &parts, &assignment);
  kiln_hlo_module_t *m = NULL;
  if (!s) s = parse_optimized(text, text_len, &m);
  if (!s && verify)
    s = kiln_status_annotate(kiln_hlo_module_verify(m), "while verifying the serialized module");
  if (s) {
    kiln_hlo_module_destroy(m);
    m = NULL;
  }
  if (!s)
    s = kiln_pjrt_executable_create(client, reps, parts, assignment, m, options, options_len, &co,
                                    0, out);
  kiln_free(assignment);
  kiln_pjrt_compile_options_free(&co);
  return s;
}

static kiln_status deserialize(PJRT_Client *client, const char *blob, size_t n,
                               const char *override_opts, size_t override_len,
                               PJRT_Executable **out) {
  *out = NULL;
  blob_header_t h;
  if (!blob || n < sizeof(h))
    return KILN_ERR_INVALID(
        "not a serialized kiln executable: %zu bytes, shorter than its "
        "%zu-byte header",
        n, sizeof(h));
  memcpy(&h, blob, sizeof(h));
  if (memcmp(h.magic, BLOB_MAGIC, 8))
    return KILN_ERR_INVALID("not a serialized kiln executable (wrong magic)");
  char version[17] = {0};
  memcpy(version, h.version, 16);
  if (h.format != BLOB_FORMAT || strcmp(version, KILN_VERSION_STRING))
    return KILN_ERR_INVALID(
        "the executable was serialized by kiln %s (format %u); this is kiln "
        "%s (format %u): compile it again",
        version, h.format, KILN_VERSION_STRING, BLOB_FORMAT);
  if (!blob_lengths_ok(&h, n))
    return KILN_ERR_INVALID(
        "serialized executable is truncated or padded: %zu bytes, its header "
        "says %llu",
        n, (unsigned long long)(sizeof(h) + h.options_len + h.text_len));
  const char *opts = blob + sizeof(h);
  const char *text = opts + h.options_len;
  uint64_t sum[2];
  blob_sum(opts, (size_t)h.options_len, text, (size_t)h.text_len, sum);
  if (sum[0] != h.sum[0] || sum[1] != h.sum[1])
    return KILN_ERR_INVALID("serialized executable is corrupt (checksum mismatch)");
  if (override_opts && override_len) {
    opts = override_opts;
    h.options_len = override_len;
  }
  return load_optimized(client, text, (size_t)h.text_len, opts, (size_t)h.options_len, true, out);
}

static PJRT_Error *deserialize_and_load(PJRT_Executable_DeserializeAndLoad_Args *args) {
  KILN_PJRT_ARGS("PJRT_Executable_DeserializeAndLoad", args, loaded_executable);
  args->loaded_executable = NULL;
  if (!args->client)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Executable_DeserializeAndLoad: client is NULL");
  const char *ov = NULL;
  size_t ovn = 0;
  if (KILN_PJRT_HAS(args, overridden_serialized_compile_options_size)) {
    ov = args->overridden_serialized_compile_options;
    ovn = args->overridden_serialized_compile_options_size;
  }
  PJRT_Executable *e = NULL;
  kiln_status s = deserialize(args->client, args->serialized_executable,
                              args->serialized_executable_size, ov, ovn, &e);
  PJRT_LoadedExecutable *l = NULL;
  if (!s) s = kiln_pjrt_loaded_create(e, &l);
  kiln_pjrt_executable_unref(e);
  if (s)
    return kiln_pjrt_error_from_status(
        kiln_status_annotate(s, "in PJRT_Executable_DeserializeAndLoad"));
  args->loaded_executable = l;
  return NULL;
}

/* Load: an executable (of this client or another) becomes a loaded one of `client`. */
static PJRT_Error *client_load(PJRT_Client_Load_Args *args) {
  KILN_PJRT_ARGS("PJRT_Client_Load", args, loaded_executable);
  args->loaded_executable = NULL;
  if (!args->client || !args->executable)
    return kiln_pjrt_error_make(KILN_INVALID_ARGUMENT,
                                "PJRT_Client_Load: client or executable is NULL");
  PJRT_Executable *src = args->executable;
  PJRT_Executable *e = NULL;
  kiln_status s = NULL;
  bool override = args->compile_options && args->compile_options_size;
  if (src->client == args->client && !override) {
    kiln_pjrt_executable_ref(src);
    e = src;
  } else {
    const char *opts = override ? args->compile_options : src->compile_options;
    size_t ol = override ? args->compile_options_size : src->compile_options_len;
    s = load_optimized(args->client, src->optimized_text, src->optimized_text_len, opts, ol, false,
                       &e);
  }
  PJRT_LoadedExecutable *l = NULL;
  if (!s) s = kiln_pjrt_loaded_create(e, &l);
  kiln_pjrt_executable_unref(e);
  if (s) return kiln_pjrt_error_from_status(kiln_status_annotate(s, "in PJRT_Client_Load"));
  args->loaded_executable = l;
  return NULL;
}

void kiln_pjrt_fill_compile(PJRT_Api *api) {
  api->PJRT_Client_Compile = client_compile;
  api->PJRT_Compile = topology_compile;
  api->PJRT_Client_Load = client_load;
  api->PJRT_Executable_Serialize = exec_serialize;
  api->PJRT_Executable_DeserializeAndLoad = deserialize_and_load;
}
