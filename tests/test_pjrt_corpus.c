/* Corpus modules through the PJRT table, compared with the reference evaluator: the first
 * KILN_PJRT_CORPUS_MODULES (default 20) eligible modules of the corpus's whole-module folders
 * (small, evaluable, with array parameters and results of types PJRT buffers carry) are
 * compiled by the plugin (dlopen'ed with RTLD_LOCAL) — every other one as a serialized
 * HloModuleProto (format "hlo", and "hlo_with_config" for every fourth), the others as HLO
 * text — executed on fake arguments and compared leaf by leaf with kiln_eval_module under the
 * module tolerance (tools/common/compare.h); and every eligible module with rng (the evaluator
 * draws as the plugin's expander does, from the same seed), each compiled twice; and the first
 * six with an argument of 100 KiB or more, uploaded with kImmutableUntilTransferCompletes (copied
 * on the device's transfer thread) and executed before the copies are awaited. Also: compile
 * options the plugin must honour or refuse (num_replicas > 1 is UNIMPLEMENTED; xla_dump_to writes
 * the dumps there). Parameter layouts: every evaluable corpus module whose entry parameters have
 * non-default layouts runs with its arguments in the executable's layout, as strided host data, and
 * in the default layout (relaid out by the execute); compile-option argument layouts; a donated
 * argument in another layout. Skips (77) without the corpus. */
#include <dirent.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/skip_util.h"

#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "kiln/pjrt_c_api.h"
#include "plugin/pjrt_internal.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_proto_encode.h"
#include "tools/common/proto_write.h"

static const PJRT_Api *api;
static PJRT_Client *g_client;
static PJRT_Device *g_dev;

static int take_error(PJRT_Error *e, char *msg, size_t n) {
  if (msg && n) msg[0] = 0;
  if (!e) return 0;
  PJRT_Error_GetCode_Args g = {.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_GetCode(&g);
  PJRT_Error_Message_Args m = {.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Message(&m);
  if (msg && n) snprintf(msg, n, "%.*s", (int)m.message_size, m.message);
  PJRT_Error_Destroy_Args d = {.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Destroy(&d);
  return (int)g.code;
}

#define OK(call)                                                                          \
  do {                                                                                    \
    char ok_msg_[2048];                                                                   \
    if (take_error((call), ok_msg_, sizeof(ok_msg_))) fail_msg("%s: %s", #call, ok_msg_); \
  } while (0)

static int setup(void **state) {
  (void)state;
  const char *path = getenv("KILN_PJRT_PLUGIN");
  if (!path || !*path) path = KILN_PJRT_PLUGIN;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return -1;
  }
  const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(h, "GetPjrtApi");
  if (!get) return -1;
  api = get();
  PJRT_NamedValue o[2];
  memset(o, 0, sizeof(o));
  const char *names[2] = {"platform", "cache_dir"}, *vals[2] = {"cpu", ""};
  for (int i = 0; i < 2; i++) {
    o[i].struct_size = PJRT_NamedValue_STRUCT_SIZE;
    o[i].name = names[i];
    o[i].name_size = strlen(names[i]);
    o[i].type = PJRT_NamedValue_kString;
    o[i].string_value = vals[i];
    o[i].value_size = strlen(vals[i]);
  }
  PJRT_Client_Create_Args ca = {
      .struct_size = PJRT_Client_Create_Args_STRUCT_SIZE, .create_options = o, .num_options = 2};
  if (take_error(api->PJRT_Client_Create(&ca), NULL, 0)) return -1;
  g_client = ca.client;
  PJRT_Client_AddressableDevices_Args da = {
      .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = g_client};
  if (take_error(api->PJRT_Client_AddressableDevices(&da), NULL, 0)) return -1;
  g_dev = da.addressable_devices[0];
  return 0;
}

static int teardown(void **state) {
  (void)state;
  PJRT_Client_Destroy_Args d = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE,
                                .client = g_client};
  return take_error(api->PJRT_Client_Destroy(&d), NULL, 0) ? -1 : 0;
}

/* Array leaves of types whose literal storage is what a PJRT host buffer holds. */
static bool leaf_ok(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      if (!leaf_ok(s->elements[i])) return false;
    return true;
  }
  PJRT_Buffer_Type t;
  if (!kiln_shape_is_array(s) || !kiln_pjrt_type_from_elem(s->type, &t)) return false;
  if (kiln_shape_is_dynamic(s)) return false;
  return kiln_pjrt_type_bytes(t) == kiln_elem_type_storage_bytes(s->type) &&
         kiln_elem_type_bits(s->type) >= 8;
}

typedef KILN_VEC(const kiln_literal_t *) lit_vec_t;

static void leaves(const kiln_literal_t *l, lit_vec_t *out) {
  if (l->num_tuple_elements || kiln_shape_is_tuple(l->shape)) {
    for (int i = 0; i < l->num_tuple_elements; i++) leaves(l->tuple_elements[i], out);
    return;
  }
  kiln_vec_push(out, l);
}

typedef struct corpus_state {
  int want, ran, proto, mismatches;
  int zero_copy; /* modules whose arguments aliased the caller's memory (kImmutableZeroCopy) */
  bool rng_only; /* only modules that draw from `rng` or the rng state */
  /* only modules with an argument of LARGE_UPLOAD bytes or more, every argument uploaded with
   * kImmutableUntilTransferCompletes and its done event awaited only after the run */
  bool large_only;
} corpus_state_t;

/* The size from which the plugin copies kImmutableUntilTransferCompletes uploads on a thread
 * of the device's (KILN_PJRT_ASYNC_TRANSFER_BYTES in plugin/pjrt_objects.h). */
#define LARGE_UPLOAD 102400

static void free_buffers(PJRT_Buffer **b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!b[i]) continue;
    PJRT_Buffer_Destroy_Args d = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE,
                                  .buffer = b[i]};
    OK(api->PJRT_Buffer_Destroy(&d));
  }
}

/* Awaits `e` (NULL: nothing) and destroys it. */
static void await_event(PJRT_Event *e) {
  if (!e) return;
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = e};
  OK(api->PJRT_Event_Await(&aw));
  PJRT_Event_Destroy_Args ed = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = e};
  OK(api->PJRT_Event_Destroy(&ed));
}

/* Fake arguments for `m` and the evaluator's result, in `arena`; false when the evaluator
 * cannot run it here (not a plugin question). */
static bool reference_run(kiln_hlo_module_t *m, kiln_arena_t *arena, kiln_literal_t ***args,
                          int *nargs, kiln_literal_t **want) {
  kiln_fake_args_options_t fo;
  kiln_fake_args_options_init(&fo);
  kiln_status s = kiln_fake_args_make(m, &fo, arena, args, nargs);
  if (!s) {
    kiln_eval_options_t eo;
    memset(&eo, 0, sizeof(eo));
    eo.max_while_iterations = 1 << 20;
    s = kiln_eval_module(m, &eo, *nargs, *args, arena, want);
  }
  bool ok = !s;
  kiln_status_free(s);
  return ok;
}

/* The output buffers read back into a new literal of `shape` (row-major). */
static kiln_literal_t *read_outputs(PJRT_Buffer **outs, size_t n, kiln_shape_t *shape,
                                    kiln_arena_t *arena) {
  kiln_literal_t *got = kiln_literal_make(arena, shape);
  assert_non_null(got);
  lit_vec_t gl = {0};
  leaves(got, &gl);
  assert_int_equal(gl.len, n);
  for (size_t j = 0; j < gl.len; j++) {
    PJRT_Buffer_ToHostBuffer_Args th = {
        .struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
        .src = outs[j],
        .dst = gl.data[j]->data,
        .dst_size = (size_t)kiln_shape_byte_size(gl.data[j]->shape)};
    OK(api->PJRT_Buffer_ToHostBuffer(&th));
    await_event(th.event);
  }
  kiln_vec_free(&gl);
  return got;
}

/* The corpus root, or the test skips. */
static const char *corpus_root(void) {
  const char *dir = getenv("KILN_CORPUS_DIR");
  if (!dir || !*dir) dir = KILN_CORPUS_DIR;
  char xla[2048];
  snprintf(xla, sizeof(xla), "%s/xla", dir);
  struct stat sb;
  if (stat(xla, &sb) != 0) KILN_SKIP("no HLO corpus at %s", dir);
  return dir;
}

/* Compiles `m` through the plugin (as text or a proto, by `seq`), runs it and compares it with
 * the evaluator. */
static void run_one(corpus_state_t *st, kiln_hlo_module_t *m, const char *name, int seq) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *want = NULL;
  int nargs = 0;
  if (!reference_run(m, &arena, &args, &nargs, &want)) {
    kiln_arena_destroy(&arena);
    return;
  }
  kiln_status s = NULL;
  /* the program: proto for every other module, text for the rest */
  bool as_proto = seq % 2 == 1;
  bool with_config = as_proto && seq % 4 == 3;
  uint8_t *code = NULL;
  size_t code_len = 0;
  char *text = NULL;
  if (as_proto) {
    kiln_hlo_proto_encode_options_t po = {.with_config = with_config, .packed = true};
    s = kiln_hlo_proto_encode(m, &po, &code, &code_len);
    if (s) {
      kiln_status_free(s);
      as_proto = with_config = false;
    }
  }
  if (!as_proto) {
    text = kiln_hlo_module_to_string(m);
    code = (uint8_t *)text;
    code_len = strlen(text);
  }
  PJRT_Program p = {.struct_size = PJRT_Program_STRUCT_SIZE,
                    .code = (char *)code,
                    .code_size = code_len,
                    .format = with_config ? "hlo_with_config" : "hlo",
                    .format_size = strlen(with_config ? "hlo_with_config" : "hlo")};
  PJRT_Client_Compile_Args ca = {
      .struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE, .client = g_client, .program = &p};
  char msg[2048];
  if (take_error(api->PJRT_Client_Compile(&ca), msg, sizeof(msg)))
    fail_msg("%s: compile (%s): %s", name, as_proto ? "proto" : "text", msg);
  /* upload the argument leaves; every third module's without a copy (kImmutableZeroCopy) from
   * memory aligned to 16 bytes but not to 64, the least the plugin aliases */
  const bool zero_copy = !st->large_only && seq % 3 == 2;
  lit_vec_t in = {0};
  for (int i = 0; i < nargs; i++) leaves(args[i], &in);
  PJRT_Buffer **bufs = calloc(in.len + 1, sizeof(*bufs));
  PJRT_Event **done = calloc(in.len + 1, sizeof(*done));
  char **host = calloc(in.len + 1, sizeof(*host));
  for (size_t i = 0; i < in.len; i++) {
    const kiln_literal_t *l = in.data[i];
    PJRT_Buffer_Type t;
    assert_true(kiln_pjrt_type_from_elem(l->shape->type, &t));
    const void *data = l->data;
    if (zero_copy) {
      size_t n = (size_t)l->num_elements * kiln_elem_type_storage_bytes(l->shape->type);
      host[i] = aligned_alloc(64, (n + 16 + 63) / 64 * 64);
      if (n) memcpy(host[i] + 16, l->data, n);
      data = host[i] + 16;
    }
    PJRT_Client_BufferFromHostBuffer_Args b = {
        .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
        .client = g_client,
        .data = data,
        .type = t,
        .dims = l->shape->dims,
        .num_dims = (size_t)l->shape->rank,
        .host_buffer_semantics = zero_copy ? PJRT_HostBufferSemantics_kImmutableZeroCopy
                                 : st->large_only
                                     ? PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes
                                     : PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
        .device = g_dev};
    OK(api->PJRT_Client_BufferFromHostBuffer(&b));
    done[i] = b.done_with_host_buffer;
    bufs[i] = b.buffer;
    if (zero_copy) {
      PJRT_Buffer_UnsafePointer_Args u = {.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE,
                                          .buffer = b.buffer};
      OK(api->PJRT_Buffer_UnsafePointer(&u));
      if (l->num_elements) assert_ptr_equal((void *)(uintptr_t)u.buffer_pointer, data);
    } else if (!st->large_only) {
      await_event(done[i]);
      done[i] = NULL;
    }
  }
  lit_vec_t outl = {0};
  leaves(want, &outl);
  PJRT_Buffer **outs = calloc(outl.len + 1, sizeof(*outs));
  PJRT_Buffer *const *lists[1] = {bufs};
  PJRT_Buffer **out_lists[1] = {outs};
  PJRT_LoadedExecutable_Execute_Args ea = {
      .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
      .executable = ca.executable,
      .argument_lists = lists,
      .num_devices = 1,
      .num_args = in.len,
      .output_lists = out_lists};
  if (take_error(api->PJRT_LoadedExecutable_Execute(&ea), msg, sizeof(msg)))
    fail_msg("%s: execute: %s", name, msg);
  /* read back into a literal of the result's shape and compare */
  kiln_literal_t *got = read_outputs(outs, outl.len, want->shape, &arena);
  kiln_compare_report_t rep;
  memset(&rep, 0, sizeof(rep));
  bool same = kiln_compare_literals(want, got, NULL, &rep);
  printf("%-90.90s %s%s %s\n", name,
         as_proto ? (with_config ? "proto+config" : "proto       ") : "text        ",
         zero_copy ? " zero-copy" : "", same ? "equal" : rep.first);
  if (!same) st->mismatches++;
  st->ran++;
  st->proto += as_proto;
  st->zero_copy += zero_copy;
  free_buffers(outs, outl.len);
  free_buffers(bufs, in.len);
  for (size_t i = 0; i < in.len; i++) {
    const kiln_literal_t *l = in.data[i];
    if (host[i] && l->num_elements) /* kiln only read the caller's memory */
      assert_memory_equal(host[i] + 16, l->data,
                          (size_t)l->num_elements * kiln_elem_type_storage_bytes(l->shape->type));
    await_event(done[i]); /* complete once the buffer is gone */
    free(host[i]);
  }
  free(host);
  free(done);
  free(outs);
  free(bufs);
  kiln_vec_free(&in);
  kiln_vec_free(&outl);
  PJRT_LoadedExecutable_Destroy_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = ca.executable};
  OK(api->PJRT_LoadedExecutable_Destroy(&ld));
  if (as_proto) kiln_free(code);
  kiln_free(text);
  kiln_arena_destroy(&arena);
}

static void visit(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path, int index,
                  kiln_status error) {
  (void)path;
  (void)index;
  corpus_state_t *st = ctx;
  kiln_hlo_module_t *m = mp ? *mp : NULL;
  if (error || !m || st->ran >= st->want) return;
  if (kiln_corpus_eval_ineligible_reason(m)) return;
  char why[256];
  if (kiln_corpus_eval_too_costly(m, 2.0e7, why, sizeof(why))) return;
  if (m->num_io_aliases) return; /* donation is covered by test_pjrt_execute */
  for (int i = 0; i < m->entry->num_parameters; i++)
    if (!leaf_ok(m->entry->parameters[i]->shape)) return;
  if (!leaf_ok(m->entry->root->shape)) return;
  /* The evaluator draws as the plugin's rng expander does, from the plugin's seed 0 (the
   * options' rng_seed left 0). */
  bool rng = false;
  for (size_t c = 0; c < m->computations.len; c++)
    for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++) {
      kiln_hlo_opcode_t op = m->computations.data[c]->instructions.data[i]->opcode;
      rng = rng || op == KILN_OP_RNG || op == KILN_OP_RNG_GET_AND_UPDATE_STATE;
    }
  /* Each module runs in one of the two tests, the rng ones counted apart. */
  if (rng != st->rng_only) return;
  if (st->large_only) {
    bool large = false;
    for (int i = 0; i < m->entry->num_parameters; i++) {
      const kiln_shape_t *ps = m->entry->parameters[i]->shape;
      large = large || (kiln_shape_is_array(ps) &&
                        kiln_shape_num_elements(ps) * kiln_elem_type_storage_bytes(ps->type) >=
                            LARGE_UPLOAD);
    }
    if (!large) return;
  }
  int seq = st->ran;
  run_one(st, m, name, seq);
  /* The same program compiled again has an rng state of its own: it draws what the first
   * compile's first run drew (the same bytes, so the compile cache would have shared one). */
  if (rng) run_one(st, m, name, seq);
}

static void test_corpus_modules_equal_the_evaluator(void **state) {
  (void)state;
  const char *dir = corpus_root();
  corpus_state_t st = {.want = 20};
  const char *env = getenv("KILN_PJRT_CORPUS_MODULES");
  if (env && atoi(env) > 0) st.want = atoi(env);
  kiln_status s = kiln_corpus_for_each_whole_module(dir, visit, &st);
  if (s) fail_msg("corpus: %s", kiln_status_message(s));
  printf(
      "%d modules through the plugin (%d as HloModuleProto, %d with zero-copy arguments), %d "
      "differ from the evaluator\n",
      st.ran, st.proto, st.zero_copy, st.mismatches);
  assert_true(st.ran >= (st.want < 10 ? st.want : 10));
  assert_true(st.proto >= 1);
  assert_true(st.zero_copy >= 1);
  assert_int_equal(st.mismatches, 0);
}

/* Every eligible corpus module with rng: its draws through the plugin equal the evaluator's,
 * and so do those of a second compile of the same program (an rng state of its own). */
static void test_corpus_rng_modules_equal_the_evaluator(void **state) {
  (void)state;
  corpus_state_t st = {.want = 1000, .rng_only = true};
  kiln_status s = kiln_corpus_for_each_whole_module(corpus_root(), visit, &st);
  if (s) fail_msg("corpus: %s", kiln_status_message(s));
  printf(
      "%d modules with rng through the plugin, each compiled twice: %d runs differ from the "
      "evaluator\n",
      st.ran / 2, st.mismatches);
  assert_true(st.ran >= 6);
  assert_int_equal(st.mismatches, 0);
}

/* Corpus modules with arguments of 100 KiB or more, uploaded as a frontend that keeps its
 * arrays until done_with_host_buffer does (kImmutableUntilTransferCompletes: the plugin copies
 * them on the device's transfer thread) and executed at once, before the copies are known to
 * be done: each equals the evaluator. */
static void test_corpus_modules_with_large_arguments_uploaded_asynchronously(void **state) {
  (void)state;
  corpus_state_t st = {.want = 6, .large_only = true};
  kiln_status s = kiln_corpus_for_each_whole_module(corpus_root(), visit, &st);
  if (s) fail_msg("corpus: %s", kiln_status_message(s));
  printf(
      "%d modules with arguments of 100 KiB or more uploaded asynchronously: %d differ from "
      "the evaluator\n",
      st.ran, st.mismatches);
  assert_true(st.ran >= 3);
  assert_int_equal(st.mismatches, 0);
}

static PJRT_Error *compile_with(const char *text, const kiln_pb_t *opts,
                                PJRT_LoadedExecutable **out) {
  PJRT_Program p = {.struct_size = PJRT_Program_STRUCT_SIZE,
                    .code = (char *)text,
                    .code_size = strlen(text),
                    .format = "hlo",
                    .format_size = 3};
  PJRT_Client_Compile_Args ca = {.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE,
                                 .client = g_client,
                                 .program = &p,
                                 .compile_options = (const char *)opts->data,
                                 .compile_options_size = opts->len};
  PJRT_Error *e = api->PJRT_Client_Compile(&ca);
  *out = ca.executable;
  return e;
}

/* CompileOptionsProto: executable_build_options (3) { num_replicas (4), debug_options (3) {
 * xla_dump_to (109) } }. */
static void test_compile_options_honoured(void **state) {
  (void)state;
  const char *text =
      "HloModule opts\nENTRY main {\n  x = f32[4] parameter(0)\n"
      "  ROOT y = f32[4] sine(x)\n}\n";
  kiln_pb_t build = {0}, opts = {0};
  kiln_pb_i64(&build, 4, 2);
  kiln_pb_message(&opts, 3, &build);
  PJRT_LoadedExecutable *l = NULL;
  char msg[2048];
  /* 2 replicas on a 1-device client: INVALID_ARGUMENT naming the numbers */
  assert_int_equal(take_error(compile_with(text, &opts, &l), msg, sizeof(msg)),
                   PJRT_Error_Code_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "2 replicas x 1 partitions need 2 devices; the client has 1"));
  kiln_pb_free(&build);
  kiln_pb_free(&opts);

  char dir[] = "/tmp/kiln_pjrt_dump_XXXXXX";
  assert_non_null(mkdtemp(dir));
  kiln_pb_t dbg = {0};
  kiln_pb_string(&dbg, 109, dir);
  memset(&build, 0, sizeof(build));
  memset(&opts, 0, sizeof(opts));
  kiln_pb_message(&build, 3, &dbg);
  kiln_pb_message(&opts, 3, &build);
  OK(compile_with(text, &opts, &l));
  /* the passes dumped into the folder (and kernels will when it first executes) */
  DIR *d = opendir(dir);
  assert_non_null(d);
  int files = 0;
  struct dirent *ent;
  while ((ent = readdir(d)))
    if (ent->d_name[0] != '.') files++;
  closedir(d);
  assert_true(files > 0);
  /* GetCompileOptions gives back what was compiled with */
  PJRT_LoadedExecutable_GetExecutable_Args g = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE, .loaded_executable = l};
  OK(api->PJRT_LoadedExecutable_GetExecutable(&g));
  PJRT_Executable_GetCompileOptions_Args go = {
      .struct_size = PJRT_Executable_GetCompileOptions_Args_STRUCT_SIZE,
      .executable = g.executable};
  OK(api->PJRT_Executable_GetCompileOptions(&go));
  assert_int_equal(go.serialized_bytes_size, opts.len);
  assert_memory_equal(go.serialized_bytes, opts.data, opts.len);
  go.serialized_compile_options_deleter(go.serialized_compile_options);
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = g.executable};
  OK(api->PJRT_Executable_Destroy(&ed));
  PJRT_LoadedExecutable_Destroy_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = l};
  OK(api->PJRT_LoadedExecutable_Destroy(&ld));
  kiln_pb_free(&dbg);
  kiln_pb_free(&build);
  kiln_pb_free(&opts);
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* ---- parameter layouts ---- */

/* A layout's minor_to_major counts down from rank-1 (or there is none). */
static bool layout_is_default(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      if (!layout_is_default(s->elements[i])) return false;
    return true;
  }
  if (!s->has_layout || s->layout.rank != s->rank) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->layout.minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

typedef KILN_VEC(const kiln_shape_t *) shape_vec_t;

static void shape_leaves(const kiln_shape_t *s, shape_vec_t *out) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++) shape_leaves(s->elements[i], out);
    return;
  }
  kiln_vec_push(out, s);
}

typedef enum upload_mode {
  UPLOAD_IN_EXECUTABLE_LAYOUT, /* row-major host data, device_layout = the parameter's */
  UPLOAD_STRIDED_HOST_DATA,    /* host data in the parameter's order, byte_strides + layout */
  UPLOAD_IN_DEFAULT_LAYOUT,    /* no device_layout: the execute relays it out */
  UPLOAD_MODES
} upload_mode_t;

static const char *const upload_mode_names[UPLOAD_MODES] = {
    "executable's layout", "byte strides + device layout", "default layout (relaid out)"};

/* One argument leaf `l` (row-major literal data) as a buffer; `cs` is the compiled
 * parameter leaf, whose layout the executable takes. */
static PJRT_Buffer *upload_leaf(const kiln_literal_t *l, const kiln_shape_t *cs,
                                upload_mode_t mode) {
  int rank = l->shape->rank;
  size_t elem = kiln_elem_type_storage_bytes(l->shape->type);
  PJRT_Buffer_Type t;
  assert_true(kiln_pjrt_type_from_elem(l->shape->type, &t));
  assert_true(rank <= 16 && cs->has_layout && cs->layout.rank == rank);
  PJRT_Buffer_MemoryLayout dl = {.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE,
                                 .type = PJRT_Buffer_MemoryLayout_Type_Tiled};
  dl.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  dl.tiled.minor_to_major = cs->layout.minor_to_major;
  dl.tiled.minor_to_major_size = (size_t)rank;
  int64_t strides[16];
  char *permuted = NULL;
  if (mode == UPLOAD_STRIDED_HOST_DATA) {
    /* the host copy in the parameter's element order, described by its byte strides */
    int64_t acc = (int64_t)elem;
    for (int i = 0; i < rank; i++) {
      int64_t d = cs->layout.minor_to_major[i];
      strides[d] = acc;
      acc *= l->shape->dims[d] > 0 ? l->shape->dims[d] : 1;
    }
    permuted = malloc((size_t)l->num_elements * elem + 1);
    int64_t idx[16] = {0};
    for (int64_t n = 0; n < l->num_elements; n++) {
      int64_t off = 0;
      for (int i = 0; i < rank; i++) off += idx[i] * strides[i];
      memcpy(permuted + off, (const char *)l->data + (size_t)n * elem, elem);
      for (int i = rank - 1; i >= 0 && ++idx[i] == l->shape->dims[i]; i--) idx[i] = 0;
    }
  }
  PJRT_Client_BufferFromHostBuffer_Args b = {
      .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
      .client = g_client,
      .data = permuted ? permuted : l->data,
      .type = t,
      .dims = l->shape->dims,
      .num_dims = (size_t)rank,
      .byte_strides = permuted ? strides : NULL,
      .num_byte_strides = permuted ? (size_t)rank : 0,
      .host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
      .device = g_dev,
      .device_layout = mode == UPLOAD_IN_DEFAULT_LAYOUT ? NULL : &dl};
  OK(api->PJRT_Client_BufferFromHostBuffer(&b));
  await_event(b.done_with_host_buffer);
  free(permuted);
  return b.buffer;
}

/* The executable's compiled module (OptimizedProgram), parsed. */
static kiln_hlo_module_t *compiled_module(PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_GetExecutable_Args g = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE, .loaded_executable = l};
  OK(api->PJRT_LoadedExecutable_GetExecutable(&g));
  PJRT_Program p = {.struct_size = PJRT_Program_STRUCT_SIZE};
  PJRT_Executable_OptimizedProgram_Args oa = {
      .struct_size = PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE,
      .executable = g.executable,
      .program = &p};
  OK(api->PJRT_Executable_OptimizedProgram(&oa));
  char *code = malloc(p.code_size + 1);
  p.code = code;
  OK(api->PJRT_Executable_OptimizedProgram(&oa));
  kiln_hlo_parse_options_t po = {0};
  po.filename = "<optimized>";
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(code, p.code_size, &po, &m);
  if (s) fail_msg("the optimized program does not parse: %s", kiln_status_message(s));
  free(code);
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = g.executable};
  OK(api->PJRT_Executable_Destroy(&ed));
  return m;
}

typedef struct layout_state {
  int modules, runs, mismatches, compiled_non_default;
} layout_state_t;

/* `m` through the plugin with its arguments uploaded each way, each result compared with the
 * evaluator's. */
static void run_layouts(layout_state_t *st, kiln_hlo_module_t *m, const char *name) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *want = NULL;
  int nargs = 0;
  if (!reference_run(m, &arena, &args, &nargs, &want)) {
    kiln_arena_destroy(&arena);
    return;
  }
  char *text = kiln_hlo_module_to_string(m);
  kiln_pb_t none = {0};
  PJRT_LoadedExecutable *exe = NULL;
  char msg[2048];
  if (take_error(compile_with(text, &none, &exe), msg, sizeof(msg)))
    fail_msg("%s: compile: %s", name, msg);
  kiln_hlo_module_t *cm = compiled_module(exe);
  shape_vec_t cl = {0};
  for (int i = 0; i < cm->entry->num_parameters; i++) {
    shape_leaves(cm->entry->parameters[i]->shape, &cl);
    st->compiled_non_default += !layout_is_default(cm->entry->parameters[i]->shape);
  }
  lit_vec_t in = {0}, outl = {0};
  for (int i = 0; i < nargs; i++) leaves(args[i], &in);
  leaves(want, &outl);
  assert_int_equal(in.len, cl.len);
  for (int mode = 0; mode < UPLOAD_MODES; mode++) {
    PJRT_Buffer **bufs = calloc(in.len + 1, sizeof(*bufs));
    PJRT_Buffer **outs = calloc(outl.len + 1, sizeof(*outs));
    for (size_t i = 0; i < in.len; i++)
      bufs[i] = upload_leaf(in.data[i], cl.data[i], (upload_mode_t)mode);
    PJRT_Buffer *const *lists[1] = {bufs};
    PJRT_Buffer **out_lists[1] = {outs};
    PJRT_LoadedExecutable_Execute_Args ea = {
        .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
        .executable = exe,
        .argument_lists = lists,
        .num_devices = 1,
        .num_args = in.len,
        .output_lists = out_lists};
    if (take_error(api->PJRT_LoadedExecutable_Execute(&ea), msg, sizeof(msg)))
      fail_msg("%s (%s): execute: %s", name, upload_mode_names[mode], msg);
    kiln_literal_t *got = read_outputs(outs, outl.len, want->shape, &arena);
    kiln_compare_report_t rep;
    memset(&rep, 0, sizeof(rep));
    bool same = kiln_compare_literals(want, got, NULL, &rep);
    printf("%-80.80s %-30s %s\n", name, upload_mode_names[mode], same ? "equal" : rep.first);
    st->mismatches += !same;
    st->runs++;
    free_buffers(outs, outl.len);
    free_buffers(bufs, in.len);
    free(outs);
    free(bufs);
  }
  st->modules++;
  kiln_vec_free(&in);
  kiln_vec_free(&outl);
  kiln_vec_free(&cl);
  kiln_hlo_module_destroy(cm);
  PJRT_LoadedExecutable_Destroy_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = exe};
  OK(api->PJRT_LoadedExecutable_Destroy(&ld));
  kiln_free(text);
  kiln_arena_destroy(&arena);
}

static void visit_layouts(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                          int index, kiln_status error) {
  (void)path;
  (void)index;
  kiln_hlo_module_t *m = mp ? *mp : NULL;
  if (error || !m || kiln_corpus_eval_ineligible_reason(m)) return;
  char why[256];
  if (kiln_corpus_eval_too_costly(m, 2.0e8, why, sizeof(why))) return;
  bool non_default = false;
  for (int i = 0; i < m->entry->num_parameters; i++) {
    const kiln_shape_t *ps = m->has_entry_layout && i < m->num_entry_layout_params
                                 ? m->entry_layout_params[i]
                                 : m->entry->parameters[i]->shape;
    non_default |= !layout_is_default(ps);
    if (!leaf_ok(ps)) return;
  }
  if (!non_default || !leaf_ok(m->entry->root->shape)) return;
  run_layouts(ctx, m, name);
}

/* Every evaluable corpus module whose entry parameters have non-default layouts runs through
 * the plugin with its arguments uploaded in the executable's layout (as kiln-run does), as
 * host data with byte strides in that order, and in the default layout (which the execute
 * relays out): all equal to the evaluator. */
static void test_corpus_parameter_layouts_equal_the_evaluator(void **state) {
  (void)state;
  const char *dir = corpus_root();
  layout_state_t st = {0};
  kiln_status s = kiln_corpus_for_each_whole_module(dir, visit_layouts, &st);
  if (s) fail_msg("corpus: %s", kiln_status_message(s));
  printf(
      "%d modules with non-default parameter layouts, %d runs, %d parameters compiled in a "
      "non-default layout, %d differ from the evaluator\n",
      st.modules, st.runs, st.compiled_non_default, st.mismatches);
  assert_true(st.modules >= 3);
  assert_true(st.compiled_non_default >= 3);
  assert_int_equal(st.mismatches, 0);
}

/* A ShapeProto f32[2,3] with layout minor_to_major {m0, m1} (element_type 2: F32 = 11,
 * dimensions 3, layout 5 { minor_to_major 1 }) into `opts` as CompileOptionsProto field 1
 * (argument_layouts). */
static void add_argument_layout(kiln_pb_t *opts, int64_t m0, int64_t m1) {
  kiln_pb_t shape = {0}, layout = {0};
  const int64_t dims[2] = {2, 3}, m2m[2] = {m0, m1};
  kiln_pb_i64(&shape, 2, 11);
  kiln_pb_repeated(&shape, 3, dims, 2, true);
  kiln_pb_repeated(&layout, 1, m2m, 2, true);
  kiln_pb_message(&shape, 5, &layout);
  kiln_pb_message(opts, 1, &shape);
  kiln_pb_free(&shape);
  kiln_pb_free(&layout);
}

/* x (f32[2,3], 0..5 row-major) as a buffer; column_major: device layout {0,1}. */
static PJRT_Buffer *upload_2x3(const float *x, bool column_major) {
  const int64_t dims[2] = {2, 3}, m2m[2] = {0, 1};
  PJRT_Buffer_MemoryLayout dl = {.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE,
                                 .type = PJRT_Buffer_MemoryLayout_Type_Tiled};
  dl.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  dl.tiled.minor_to_major = m2m;
  dl.tiled.minor_to_major_size = 2;
  PJRT_Client_BufferFromHostBuffer_Args b = {
      .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
      .client = g_client,
      .data = x,
      .type = PJRT_Buffer_Type_F32,
      .dims = dims,
      .num_dims = 2,
      .host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
      .device = g_dev,
      .device_layout = column_major ? &dl : NULL};
  OK(api->PJRT_Client_BufferFromHostBuffer(&b));
  await_event(b.done_with_host_buffer);
  return b.buffer;
}

/* Runs `l` on one f32[2,3] argument and reads its f32[2,3] result row-major into y. */
static void run_2x3(PJRT_LoadedExecutable *l, PJRT_Buffer *arg, float *y) {
  PJRT_Buffer *out = NULL;
  PJRT_Buffer *const *lists[1] = {&arg};
  PJRT_Buffer **out_lists[1] = {&out};
  PJRT_LoadedExecutable_Execute_Args ea = {
      .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
      .executable = l,
      .argument_lists = lists,
      .num_devices = 1,
      .num_args = 1,
      .output_lists = out_lists};
  OK(api->PJRT_LoadedExecutable_Execute(&ea));
  PJRT_Buffer_ToHostBuffer_Args th = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                      .src = out,
                                      .dst = y,
                                      .dst_size = 6 * sizeof(float)};
  OK(api->PJRT_Buffer_ToHostBuffer(&th));
  await_event(th.event);
  free_buffers(&out, 1);
}

static void destroy_loaded(PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_Destroy_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE, .executable = l};
  OK(api->PJRT_LoadedExecutable_Destroy(&ld));
}

/* The compile options' argument layout becomes the executable's parameter layout (its
 * optimized program says so); arguments in that layout and in the default one both give
 * -x; malformed argument layouts are INVALID_ARGUMENT. */
static void test_compile_options_argument_layouts(void **state) {
  (void)state;
  const char *text =
      "HloModule neg\nENTRY main {\n  x = f32[2,3] parameter(0)\n"
      "  ROOT y = f32[2,3] negate(x)\n}\n";
  const float x[6] = {0, 1, 2, 3, 4, 5};
  kiln_pb_t opts = {0};
  add_argument_layout(&opts, 0, 1);
  PJRT_LoadedExecutable *l = NULL;
  OK(compile_with(text, &opts, &l));
  kiln_hlo_module_t *cm = compiled_module(l);
  const kiln_shape_t *ps = cm->entry->parameters[0]->shape;
  assert_true(ps->has_layout);
  assert_int_equal(ps->layout.minor_to_major[0], 0);
  assert_int_equal(ps->layout.minor_to_major[1], 1);
  kiln_hlo_module_destroy(cm);
  for (int column_major = 0; column_major < 2; column_major++) {
    PJRT_Buffer *b = upload_2x3(x, column_major);
    float y[6];
    run_2x3(l, b, y);
    for (int i = 0; i < 6; i++) assert_float_equal(y[i], -x[i], 0);
    free_buffers(&b, 1);
  }
  destroy_loaded(l);
  kiln_pb_free(&opts);
  /* two layouts for one parameter; not a permutation */
  char msg[2048];
  memset(&opts, 0, sizeof(opts));
  add_argument_layout(&opts, 0, 1);
  add_argument_layout(&opts, 1, 0);
  assert_int_equal(take_error(compile_with(text, &opts, &l), msg, sizeof(msg)),
                   PJRT_Error_Code_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "2 argument layouts for 1 parameters"));
  kiln_pb_free(&opts);
  memset(&opts, 0, sizeof(opts));
  add_argument_layout(&opts, 1, 1);
  assert_int_equal(take_error(compile_with(text, &opts, &l), msg, sizeof(msg)),
                   PJRT_Error_Code_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "not a permutation"));
  kiln_pb_free(&opts);
}

/* A donated parameter (input_output_alias) takes the default layout; an argument in another
 * layout is relaid out into a copy the output takes over, and the argument stays alive. */
static void test_donated_argument_in_another_layout_is_relaid_out(void **state) {
  (void)state;
  const char *text =
      "HloModule neg, input_output_alias={ {}: (0, {}, may-alias) }\n"
      "ENTRY main {\n  x = f32[2,3]{0,1} parameter(0)\n  ROOT y = f32[2,3]{0,1} negate(x)\n}\n";
  const float x[6] = {0, 1, 2, 3, 4, 5};
  kiln_pb_t none = {0};
  PJRT_LoadedExecutable *l = NULL;
  OK(compile_with(text, &none, &l));
  kiln_hlo_module_t *cm = compiled_module(l);
  const kiln_shape_t *ps = cm->entry->parameters[0]->shape;
  assert_int_equal(ps->layout.minor_to_major[0], 1); /* aliased: the default layout */
  kiln_hlo_module_destroy(cm);
  PJRT_Buffer *b = upload_2x3(x, true);
  float y[6];
  run_2x3(l, b, y);
  for (int i = 0; i < 6; i++) assert_float_equal(y[i], -x[i], 0);
  PJRT_Buffer_IsDeleted_Args del = {.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE,
                                    .buffer = b};
  OK(api->PJRT_Buffer_IsDeleted(&del));
  assert_false(del.is_deleted);
  /* in the default layout it is donated */
  PJRT_Buffer *d = upload_2x3(x, false);
  run_2x3(l, d, y);
  for (int i = 0; i < 6; i++) assert_float_equal(y[i], -x[i], 0);
  del.buffer = d;
  OK(api->PJRT_Buffer_IsDeleted(&del));
  assert_true(del.is_deleted);
  free_buffers(&b, 1);
  free_buffers(&d, 1);
  destroy_loaded(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_options_honoured),
      cmocka_unit_test(test_corpus_modules_equal_the_evaluator),
      cmocka_unit_test(test_corpus_rng_modules_equal_the_evaluator),
      cmocka_unit_test(test_corpus_modules_with_large_arguments_uploaded_asynchronously),
      cmocka_unit_test(test_corpus_parameter_layouts_equal_the_evaluator),
      cmocka_unit_test(test_compile_options_argument_layouts),
      cmocka_unit_test(test_donated_argument_in_another_layout_is_relaid_out),
  };
  return kiln_run_tests(tests, setup, teardown);
}
