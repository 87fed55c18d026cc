/* Corpus modules through the PJRT table, compared with the reference evaluator: the first
 * KILN_PJRT_CORPUS_MODULES (default 20) eligible modules of the corpus's whole-module folders
 * (small, evaluable, with array parameters and results of types PJRT buffers carry) are
 * compiled by the plugin (dlopen'ed with RTLD_LOCAL) — every other one as a serialized
 * HloModuleProto (format "hlo", and "hlo_with_config" for every fourth), the others as HLO
 * text — executed on fake arguments and compared leaf by leaf with kiln_eval_module under the
 * module tolerance (tools/common/compare.h). Also: compile options the plugin must honour or
 * refuse (num_replicas > 1 is UNIMPLEMENTED; xla_dump_to writes the dumps there).
 * Skips (77) without the corpus. */
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
} corpus_state_t;

static void free_buffers(PJRT_Buffer **b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!b[i]) continue;
    PJRT_Buffer_Destroy_Args d = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE,
                                  .buffer = b[i]};
    OK(api->PJRT_Buffer_Destroy(&d));
  }
}

static void run_one(corpus_state_t *st, kiln_hlo_module_t *m, const char *name) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_fake_args_options_t fo;
  kiln_fake_args_options_init(&fo);
  kiln_literal_t **args = NULL;
  int nargs = 0;
  kiln_status s = kiln_fake_args_make(m, &fo, &arena, &args, &nargs);
  kiln_literal_t *want = NULL;
  if (!s) {
    kiln_eval_options_t eo;
    memset(&eo, 0, sizeof(eo));
    eo.max_while_iterations = 1 << 20;
    s = kiln_eval_module(m, &eo, nargs, args, &arena, &want);
  }
  if (s) { /* the evaluator cannot run it here: not a plugin question */
    kiln_status_free(s);
    kiln_arena_destroy(&arena);
    return;
  }
  /* the program: proto for every other module, text for the rest */
  bool as_proto = st->ran % 2 == 1;
  bool with_config = as_proto && st->ran % 4 == 3;
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
  /* upload the argument leaves */
  lit_vec_t in = {0};
  for (int i = 0; i < nargs; i++) leaves(args[i], &in);
  PJRT_Buffer **bufs = calloc(in.len + 1, sizeof(*bufs));
  for (size_t i = 0; i < in.len; i++) {
    const kiln_literal_t *l = in.data[i];
    PJRT_Buffer_Type t;
    assert_true(kiln_pjrt_type_from_elem(l->shape->type, &t));
    PJRT_Client_BufferFromHostBuffer_Args b = {
        .struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE,
        .client = g_client,
        .data = l->data,
        .type = t,
        .dims = l->shape->dims,
        .num_dims = (size_t)l->shape->rank,
        .host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
        .device = g_dev};
    OK(api->PJRT_Client_BufferFromHostBuffer(&b));
    if (b.done_with_host_buffer) {
      PJRT_Event_Destroy_Args ed = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                    .event = b.done_with_host_buffer};
      OK(api->PJRT_Event_Destroy(&ed));
    }
    bufs[i] = b.buffer;
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
  kiln_literal_t *got = kiln_literal_make(&arena, want->shape);
  assert_non_null(got);
  lit_vec_t gl = {0};
  leaves(got, &gl);
  assert_int_equal(gl.len, outl.len);
  for (size_t j = 0; j < gl.len; j++) {
    PJRT_Buffer_ToHostBuffer_Args th = {
        .struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
        .src = outs[j],
        .dst = gl.data[j]->data,
        .dst_size = (size_t)kiln_shape_byte_size(gl.data[j]->shape)};
    OK(api->PJRT_Buffer_ToHostBuffer(&th));
    if (th.event) {
      PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE,
                                  .event = th.event};
      OK(api->PJRT_Event_Await(&aw));
      PJRT_Event_Destroy_Args ed = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                    .event = th.event};
      OK(api->PJRT_Event_Destroy(&ed));
    }
  }
  kiln_compare_report_t rep;
  memset(&rep, 0, sizeof(rep));
  bool same = kiln_compare_literals(want, got, NULL, &rep);
  printf("%-90.90s %s %s\n", name,
         as_proto ? (with_config ? "proto+config" : "proto       ") : "text        ",
         same ? "equal" : rep.first);
  if (!same) st->mismatches++;
  st->ran++;
  st->proto += as_proto;
  free_buffers(outs, outl.len);
  free_buffers(bufs, in.len);
  free(outs);
  free(bufs);
  kiln_vec_free(&in);
  kiln_vec_free(&outl);
  kiln_vec_free(&gl);
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
  for (size_t c = 0; c < m->computations.len; c++) /* rng state differs between the two */
    for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++) {
      kiln_hlo_opcode_t op = m->computations.data[c]->instructions.data[i]->opcode;
      if (op == KILN_OP_RNG || op == KILN_OP_RNG_GET_AND_UPDATE_STATE) return;
    }
  run_one(st, m, name);
}

static void test_corpus_modules_equal_the_evaluator(void **state) {
  (void)state;
  const char *dir = getenv("KILN_CORPUS_DIR");
  if (!dir || !*dir) dir = KILN_CORPUS_DIR;
  char xla[2048];
  snprintf(xla, sizeof(xla), "%s/xla", dir);
  struct stat sb;
  if (stat(xla, &sb) != 0) KILN_SKIP("no HLO corpus at %s", dir);
  corpus_state_t st = {.want = 20};
  const char *env = getenv("KILN_PJRT_CORPUS_MODULES");
  if (env && atoi(env) > 0) st.want = atoi(env);
  kiln_status s = kiln_corpus_for_each_whole_module(dir, visit, &st);
  if (s) fail_msg("corpus: %s", kiln_status_message(s));
  printf("%d modules through the plugin (%d as HloModuleProto), %d differ from the evaluator\n",
         st.ran, st.proto, st.mismatches);
  assert_true(st.ran >= (st.want < 10 ? st.want : 10));
  assert_true(st.proto >= 1);
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
  assert_int_equal(take_error(compile_with(text, &opts, &l), msg, sizeof(msg)),
                   PJRT_Error_Code_UNIMPLEMENTED);
  assert_non_null(strstr(msg, "replica"));
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_options_honoured),
      cmocka_unit_test(test_corpus_modules_equal_the_evaluator),
  };
  return kiln_run_tests(tests, setup, teardown);
}
