/* Whole-executable serialization (runtime/executable_serialize.h, compiler/thunks/
 * executable_cache.h) and the compile driver's executable cache:
 *   - every corpus module that compiles and runs on the host runs bit-identically after
 *     serialize -> deserialize (custom calls rebuilt, objects linked into a new JIT);
 *   - a hand module with every thunk kind kiln emits on the host (kernels, gemm, copies,
 *     memset, while, conditional, command buffer, rng-get-and-update-state, a built-in custom
 *     call) round-trips and prints the same thunks;
 *   - every truncation, flipped bytes, another format or kiln version, and structurally wrong
 *     payloads whose checksum was fixed up are errors, never crashes;
 *   - collective thunks round-trip whole; a damaged group table or count, or an unpaired async
 * start or done, is refused when read;
 *   - kiln_compile_module with executable_cache_dir: the second compile is a hit that runs no
 *     pass (the module is left unoptimized) and gives the same results; a corrupt entry is a
 *     miss that recompiles and rewrites it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/disk_cache.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "compiler/thunks/compile.h"
#include "compiler/thunks/executable_cache.h"
#include "runtime/collective_thunk.h"
#include "runtime/executable_serialize.h"
#include "runtime/host/host_device.h"
#include "skip_util.h"
#include "tests/temp_dir_util.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"

/* Every thunk kind the host emits: a while loop (copies, kernels, the condition's pred; 100
 * trips, more than while_loop_unroll takes), a
 * conditional on a pred, a gemm, a memset (replica-id), rng-get-and-update-state, GetRngSeed
 * (a built-in custom call), and elementwise kernels that form a command buffer at min run 2. */
static const char kAllKinds[] =
    "HloModule all_kinds\n"
    "cond {\n"
    "  p = (s32[], f32[8,8]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] constant(100)\n"
    "  ROOT lt = pred[] compare(i, n), direction=LT\n"
    "}\n"
    "body {\n"
    "  p = (s32[], f32[8,8]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  x = f32[8,8] get-tuple-element(p), index=1\n"
    "  one = s32[] constant(1)\n"
    "  j = s32[] add(i, one)\n"
    "  y = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  s = f32[] constant(0.125)\n"
    "  sb = f32[8,8] broadcast(s), dimensions={}\n"
    "  z = f32[8,8] multiply(y, sb)\n"
    "  ROOT t = (s32[], f32[8,8]) tuple(j, z)\n"
    "}\n"
    "yes {\n"
    "  a = f32[8,8] parameter(0)\n"
    "  ROOT e = f32[8,8] exponential(a)\n"
    "}\n"
    "no {\n"
    "  a = f32[8,8] parameter(0)\n"
    "  ROOT g = f32[8,8] negate(a)\n"
    "}\n"
    "ENTRY main {\n"
    "  a = f32[8,8] parameter(0)\n"
    "  b = f32[8,8] parameter(1)\n"
    "  zero = s32[] constant(0)\n"
    "  init = (s32[], f32[8,8]) tuple(zero, a)\n"
    "  w = (s32[], f32[8,8]) while(init), condition=cond, body=body\n"
    "  r = f32[8,8] get-tuple-element(w), index=1\n"
    "  c1 = f32[8,8] add(r, b)\n"
    "  c2 = f32[8,8] multiply(c1, b)\n"
    "  c3 = f32[8,8] subtract(c2, a)\n"
    "  c4 = f32[8,8] sine(c3)\n"
    "  k = f32[] constant(0)\n"
    "  k0 = f32[1,1] slice(c4), slice={[0:1], [0:1]}\n"
    "  kk = f32[] reshape(k0)\n"
    "  pr = pred[] compare(kk, k), direction=GT\n"
    "  cd = f32[8,8] conditional(pr, c4, c3), true_computation=yes, false_computation=no\n"
    "  rid = u32[] replica-id()\n"
    "  st = u64[2] rng-get-and-update-state(), delta=16\n"
    "  seed = u64[] custom-call(), custom_call_target=\"GetRngSeed\"\n"
    "  ROOT out = (f32[8,8], u32[], u64[2], u64[]) tuple(cd, rid, st, seed)\n"
    "}\n";

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) fprintf(stderr, "parse: %s\n", kiln_status_message(s));
  assert_null(s);
  return m;
}

/* Bit equality of two results (tuples element by element). */
static bool same_bits(const kiln_literal_t *a, const kiln_literal_t *b) {
  if (!a || !b) return a == b;
  if (a->num_tuple_elements != b->num_tuple_elements) return false;
  for (int i = 0; i < a->num_tuple_elements; i++)
    if (!same_bits(a->tuple_elements[i], b->tuple_elements[i])) return false;
  if (a->num_tuple_elements) return true;
  if (a->num_elements != b->num_elements || a->shape->type != b->shape->type) return false;
  size_t n = (size_t)a->num_elements * kiln_elem_type_storage_bytes(a->shape->type);
  return n == 0 || memcmp(a->data, b->data, n) == 0;
}

/* Runs `m` twice on `dev` with the same fake arguments, directly and through serialization;
 * NULL and *equal when both ran, else the direct run's error (the module does not run here).
 * When the two differ, the direct run and the round trip are repeated (up to 4 times each):
 * *nondeterministic when the direct run differs from itself or a later round trip gives the
 * direct run's bits (float atomics of split reductions add in arrival order). */
static kiln_status run_both_checked(kiln_device_t *dev, const kiln_hlo_module_t *m, size_t min_run,
                                    bool *equal, bool *nondeterministic,
                                    kiln_status *round_trip_error, size_t *bytes) {
  *equal = false;
  *nondeterministic = false;
  *round_trip_error = NULL;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_fake_args_options_t fo;
  kiln_fake_args_options_init(&fo);
  kiln_literal_t **args = NULL;
  int nargs = 0;
  kiln_status s = kiln_fake_args_make(m, &fo, &arena, &args, &nargs);
  kiln_device_run_options_t ro = {0};
  ro.device = dev;
  ro.dump_dir = "";
  ro.max_while_iterations = 100000;
  if (min_run) setenv("KILN_COMMAND_BUFFER_MIN_RUN", "2", 1);
  kiln_literal_t *want = NULL, *got = NULL;
  kiln_device_run_report_t rep;
  memset(&rep, 0, sizeof(rep));
  if (!s) s = kiln_device_run_module(m, args, nargs, &ro, &arena, &want, &rep);
  if (!s) {
    ro.serialize_round_trip = true;
    *round_trip_error = kiln_device_run_module(m, args, nargs, &ro, &arena, &got, &rep);
    *bytes = rep.serialized_bytes;
    *equal = !*round_trip_error && same_bits(want, got);
    /* Up to 4 more pairs: a direct run that differs from the first, or a round trip that
     * gives its bits, shows the variation is the module's. */
    for (int k = 0; k < 4 && !*round_trip_error && !*equal && !*nondeterministic; k++) {
      kiln_literal_t *again = NULL;
      ro.serialize_round_trip = false;
      kiln_status s2 = kiln_device_run_module(m, args, nargs, &ro, &arena, &again, &rep);
      *nondeterministic = !s2 && !same_bits(want, again);
      if (!s2 && !*nondeterministic) {
        ro.serialize_round_trip = true;
        s2 = kiln_device_run_module(m, args, nargs, &ro, &arena, &again, &rep);
        *nondeterministic = !s2 && same_bits(want, again);
      }
      bool failed = s2 != NULL; /* a rerun that fails: leave it a mismatch */
      kiln_status_free(s2);
      if (failed) break;
    }
  }
  if (min_run) unsetenv("KILN_COMMAND_BUFFER_MIN_RUN");
  kiln_arena_destroy(&arena);
  return s;
}

static kiln_status run_both(kiln_device_t *dev, const kiln_hlo_module_t *m, size_t min_run,
                            bool *equal, kiln_status *round_trip_error, size_t *bytes) {
  bool nondeterministic = false;
  return run_both_checked(dev, m, min_run, equal, &nondeterministic, round_trip_error, bytes);
}

static void test_every_thunk_kind_round_trips_bit_identically(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse(kAllKinds);
  /* The thunks, as compiled and as read back, print the same. */
  kiln_hlo_module_t *c = parse(kAllKinds);
  kiln_compile_options_t co = {0};
  co.command_buffer_min_run = 2;
  kiln_executable_desc_t *d = NULL;
  assert_null(kiln_compile_module(c, &co, &d, NULL));
  void *bytes = NULL;
  size_t len = 0;
  assert_null(kiln_executable_desc_to_bytes(d, &bytes, &len));
  kiln_executable_desc_t *back = NULL;
  assert_null(kiln_executable_desc_from_bytes(bytes, len, NULL, &back));
  kiln_strbuf_t p1 = {0}, p2 = {0};
  kiln_executable_desc_print(&p1, d);
  kiln_executable_desc_print(&p2, back);
  assert_string_equal(kiln_strbuf_cstr(&p1), kiln_strbuf_cstr(&p2));
  const char *want[] = {"while ",       "conditional ",    "gemm ",   "memset ",
                        "custom-call ", "command-buffer ", "kernel ", "copy "};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    if (!strstr(kiln_strbuf_cstr(&p1), want[i])) printf("%s", kiln_strbuf_cstr(&p1));
    assert_non_null(strstr(kiln_strbuf_cstr(&p1), want[i]));
  }
  printf("all kinds: %zu bytes serialized\n", len);
  kiln_strbuf_free(&p1);
  kiln_strbuf_free(&p2);
  kiln_executable_desc_destroy(back);
  kiln_executable_desc_destroy(d);
  kiln_free(bytes);
  kiln_hlo_module_destroy(c);

  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  bool equal = false;
  kiln_status rt = NULL;
  size_t n = 0;
  assert_null(run_both(dev, m, 2, &equal, &rt, &n));
  assert_null(rt);
  assert_true(equal);
  kiln_device_destroy(dev);
  kiln_hlo_module_destroy(m);
}

/* A CUDA executable (cubins, or PTX without a cubin tool) round-trips without a device: the
 * images byte for byte, the thunks as printed. */
static void test_cuda_images_round_trip_without_a_device(void **state) {
  (void)state;
  static const char kText[] =
      "HloModule cuda_images\n"
      "add { a = f32[] parameter(0)  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b) }\n"
      "ENTRY main {\n"
      "  x = f32[64,32] parameter(0)\n"
      "  e = f32[64,32] exponential(x)\n"
      "  z = f32[] constant(0)\n"
      "  r = f32[64] reduce(e, z), dimensions={1}, to_apply=add\n"
      "  ROOT t = (f32[64,32], f32[64]) tuple(e, r)\n"
      "}\n";
  kiln_hlo_module_t *m = parse(kText);
  kiln_compile_options_t co = {0};
  co.emit.target = KILN_TARGET_CUDA;
  co.emit.arch = "sm_90";
  co.emit.dump_dir = "";
  kiln_executable_desc_t *d = NULL;
  assert_null(kiln_compile_module(m, &co, &d, NULL));
  void *bytes = NULL;
  size_t len = 0;
  assert_null(kiln_executable_desc_to_bytes(d, &bytes, &len));
  kiln_executable_desc_t *back = NULL;
  assert_null(kiln_executable_desc_from_bytes(bytes, len, &co.emit, &back));
  assert_true(d->num_images > 0);
  assert_int_equal(back->num_images, d->num_images);
  for (int32_t i = 0; i < d->num_images; i++) {
    assert_int_equal(back->images[i].size, d->images[i].size);
    assert_memory_equal(back->images[i].data, d->images[i].data, d->images[i].size);
    assert_int_equal(back->images[i].num_functions, 0);
  }
  kiln_strbuf_t p1 = {0}, p2 = {0};
  kiln_executable_desc_print(&p1, d);
  kiln_executable_desc_print(&p2, back);
  assert_string_equal(kiln_strbuf_cstr(&p1), kiln_strbuf_cstr(&p2));
  printf("cuda: %d images, %zu bytes serialized\n", d->num_images, len);
  kiln_strbuf_free(&p1);
  kiln_strbuf_free(&p2);
  kiln_executable_desc_destroy(back);
  kiln_executable_desc_destroy(d);
  kiln_free(bytes);
  kiln_hlo_module_destroy(m);
}

/* Serialized bytes of the all-kinds module. */
static void serialized(void **bytes, size_t *len) {
  kiln_hlo_module_t *m = parse(kAllKinds);
  kiln_compile_options_t co = {0};
  co.command_buffer_min_run = 2;
  kiln_executable_desc_t *d = NULL;
  assert_null(kiln_compile_module(m, &co, &d, NULL));
  assert_null(kiln_executable_desc_to_bytes(d, bytes, len));
  kiln_executable_desc_destroy(d);
  kiln_hlo_module_destroy(m);
}

/* Reads `b` (`n` bytes); true when it was rejected with `code` (0: any code). */
static bool rejected(const void *b, size_t n, int code) {
  kiln_executable_desc_t *d = NULL;
  kiln_status s = kiln_executable_desc_from_bytes(b, n, NULL, &d);
  if (!s) {
    kiln_executable_desc_destroy(d);
    return false;
  }
  bool ok = code == 0 || (int)kiln_status_code(s) == code;
  if (!ok) printf("unexpected error: %s\n", kiln_status_message(s));
  kiln_status_free(s);
  return ok && d == NULL;
}

/* The header's size: magic, version, flags, length, checksum, the version string. */
static size_t header_size(const unsigned char *b) {
  uint32_t vlen =
      (uint32_t)b[40] | (uint32_t)b[41] << 8 | (uint32_t)b[42] << 16 | (uint32_t)b[43] << 24;
  return 44 + vlen;
}

static void test_corrupt_truncated_and_foreign_entries_are_errors(void **state) {
  (void)state;
  void *bytes = NULL;
  size_t len = 0;
  serialized(&bytes, &len);
  assert_false(rejected(bytes, len, 0));
  unsigned char *b = kiln_malloc(len);
  /* every truncation */
  for (size_t n = 0; n < len; n++) assert_true(rejected(bytes, n, 0));
  /* flipped bytes: the header's fields or the checksum catch each */
  for (size_t i = 0; i < len; i += 1 + i / 64) {
    memcpy(b, bytes, len);
    b[i] ^= 0x20;
    assert_true(rejected(b, len, 0));
  }
  /* another format version, another kiln version */
  memcpy(b, bytes, len);
  b[8] = 99;
  assert_true(rejected(b, len, KILN_FAILED_PRECONDITION));
  memcpy(b, bytes, len);
  b[44] ^= 1; /* first character of kiln's version string */
  assert_true(rejected(b, len, KILN_FAILED_PRECONDITION));
  /* structural damage behind a valid checksum: every byte of the payload changed in turn
   * (three ways), the checksum fixed up; most are caught, none crashes (ASan watches). */
  size_t h = header_size(bytes), caught = 0, tried = 0;
  for (size_t i = h; i < len; i += 1 + (len - h) / 4096) {
    static const unsigned char kEdits[] = {0xff, 0x80, 0x01};
    for (size_t e = 0; e < sizeof(kEdits); e++) {
      memcpy(b, bytes, len);
      b[i] ^= kEdits[e];
      kiln_executable_blob_reseal(b, len);
      kiln_executable_desc_t *d = NULL;
      /* unlinked: the object files are LLVM's input, not the format's */
      kiln_status s = kiln_executable_desc_from_bytes_unlinked(b, len, NULL, &d);
      tried++;
      if (s) caught++;
      kiln_status_free(s);
      kiln_executable_desc_destroy(d);
    }
  }
  printf(
      "%zu bytes; %zu truncations and flipped bytes rejected; %zu of %zu checksum-fixed edits "
      "rejected by the structure checks, the rest read (a changed size or value)\n",
      len, len, caught, tried);
  assert_true(caught > 0);
  /* a payload with trailing garbage (checksum fixed) */
  unsigned char *longer = kiln_malloc(len + 3);
  memcpy(longer, bytes, len);
  memset(longer + len, 0, 3);
  uint64_t plen = len + 3 - h;
  for (int i = 0; i < 8; i++) longer[16 + i] = (unsigned char)(plen >> (8 * i));
  kiln_executable_blob_reseal(longer, len + 3);
  assert_true(rejected(longer, len + 3, KILN_INVALID_ARGUMENT));
  assert_true(rejected("KILNEXE", 8, 0));
  kiln_free(longer);
  kiln_free(b);
  kiln_free(bytes);
}

/* A module for 4 replicas: an all-reduce in two groups of two, then a collective-permute. */
static const char kCollectives[] =
    "HloModule colls, replica_count=4\n"
    "red { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"
    "ENTRY main {\n"
    "  x = f32[16] parameter(0)\n"
    "  ar = f32[16] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=red\n"
    "  ROOT cp = f32[16] collective-permute(ar), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n"
    "}\n";

/* The collective thunks of `s` (top level), in order. */
static int collectives(const kiln_thunk_seq_t *s, kiln_coll_thunk_desc_t **out, int max) {
  int n = 0;
  for (size_t i = 0; i < s->len && n < max; i++)
    if (kiln_thunk_kind(s->items[i]) == KILN_THUNK_COLLECTIVE)
      out[n++] = (kiln_coll_thunk_desc_t *)kiln_thunk_collective_desc(s->items[i]);
  return n;
}

/* The bytes of `d`, read back: the status (NULL: read; the description is destroyed). */
static kiln_status reread(const kiln_executable_desc_t *d) {
  void *bytes = NULL;
  size_t len = 0;
  assert_null(kiln_executable_desc_to_bytes(d, &bytes, &len));
  kiln_executable_desc_t *back = NULL;
  kiln_status s = kiln_executable_desc_from_bytes_unlinked(bytes, len, NULL, &back);
  kiln_executable_desc_destroy(back);
  kiln_free(bytes);
  return s;
}

/* Collective thunks round-trip whole (the same printed thunks, running on 4 host devices is
 * test_collective_thunks'); a damaged group table or count, or a start and done that do not
 * pair, written out is refused when read (INVALID_ARGUMENT naming the collective), and every
 * payload byte changed behind a fixed-up checksum reads or fails cleanly, what reads passing or
 * failing prepare without a crash. */
static void test_collective_group_tables_are_checked_when_read(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse(kCollectives);
  kiln_compile_options_t co = {0};
  co.emit.dump_dir = "";
  kiln_executable_desc_t *d = NULL;
  assert_null(kiln_compile_module(m, &co, &d, NULL));
  /* The pipeline made both asynchronous: each a start and a done thunk. */
  kiln_coll_thunk_desc_t *c[4];
  assert_int_equal(collectives(&d->thunks, c, 4), 4);
  const kiln_coll_thunk_op_t ops[4] = {KILN_COLL_THUNK_ALL_REDUCE, KILN_COLL_THUNK_ALL_REDUCE,
                                       KILN_COLL_THUNK_PERMUTE, KILN_COLL_THUNK_PERMUTE};
  for (int k = 0; k < 4; k++) {
    assert_int_equal(c[k]->op, ops[k]);
    assert_int_equal(c[k]->phase, k % 2 ? KILN_COLL_PHASE_DONE : KILN_COLL_PHASE_START);
  }
  { /* Compiled synchronous: each pair one whole thunk, under another cache key. */
    kiln_compile_options_t so = co;
    so.emit.synchronous_collectives = true;
    kiln_executable_desc_t *sd = NULL;
    kiln_hlo_module_t *m2 = parse(kCollectives);
    assert_null(kiln_compile_module(m2, &so, &sd, NULL));
    kiln_coll_thunk_desc_t *w[4];
    assert_int_equal(collectives(&sd->thunks, w, 4), 2);
    assert_int_equal(w[0]->phase, KILN_COLL_PHASE_WHOLE);
    assert_int_equal(w[1]->phase, KILN_COLL_PHASE_WHOLE);
    uint64_t k1[2], k2[2];
    assert_null(kiln_executable_cache_key(m2, &co, false, k1));
    assert_null(kiln_executable_cache_key(m2, &so, false, k2));
    assert_true(k1[0] != k2[0] || k1[1] != k2[1]);
    kiln_executable_desc_destroy(sd);
    kiln_hlo_module_destroy(m2);
  }
  void *bytes = NULL;
  size_t len = 0;
  assert_null(kiln_executable_desc_to_bytes(d, &bytes, &len));
  kiln_executable_desc_t *back = NULL;
  assert_null(kiln_executable_desc_from_bytes(bytes, len, NULL, &back));
  kiln_strbuf_t p1 = {0}, p2 = {0};
  kiln_executable_desc_print(&p1, d);
  kiln_executable_desc_print(&p2, back);
  assert_string_equal(kiln_strbuf_cstr(&p1), kiln_strbuf_cstr(&p2));
  kiln_coll_thunk_desc_t *cb[4];
  assert_int_equal(collectives(&back->thunks, cb, 4), 4);
  for (int k = 0; k < 4; k++) {
    assert_int_equal(cb[k]->phase, c[k]->phase);
    assert_memory_equal(cb[k]->group_key, c[k]->group_key, 4 * sizeof(int64_t));
    assert_memory_equal(cb[k]->rank, c[k]->rank, 4 * sizeof(int));
    assert_memory_equal(cb[k]->group_size, c[k]->group_size, 4 * sizeof(int));
    assert_memory_equal(cb[k]->source, c[k]->source, 4 * sizeof(int));
    const kiln_coll_thunk_buffer_t *x = &cb[k]->buffers[0], *y = &c[k]->buffers[0];
    assert_int_equal(cb[k]->num_buffers, 1);
    assert_true(x->send.allocation == y->send.allocation && x->send.offset == y->send.offset &&
                x->send.size == y->send.size && x->recv.allocation == y->recv.allocation &&
                x->recv.offset == y->recv.offset && x->recv.size == y->recv.size);
    assert_true(x->dtype == y->dtype && x->count == y->count && x->outer == y->outer &&
                x->inner == y->inner && x->block_bytes == y->block_bytes);
    assert_int_equal(cb[k]->reduction, c[k]->reduction);
  }
  kiln_strbuf_free(&p1);
  kiln_strbuf_free(&p2);
  kiln_executable_desc_destroy(back);

  /* Damage, one field at a time (restored after). */
  kiln_coll_thunk_desc_t *ar = c[0], *cp = c[2];
  struct {
    int *field;
    int value;
    const char *what;
  } ints[] = {
      {&ar->rank[1], 0, "a rank twice in a group"},
      {&ar->rank[0], 2, "a rank outside its group"},
      {&ar->rank[0], -1, "a negative rank"},
      {&ar->group_size[0], 3, "members disagreeing on the size"},
      {&ar->group_size[2], 0, "a group of 0"},
      {&cp->source[1], 4, "a permute source outside the group"},
      {&cp->source[1], -2, "a permute source below -1"},
      {(int *)&ar->op, 42, "an unknown op"},
      {(int *)&ar->reduction, 9, "an unknown reduction"},
      {(int *)&ar->phase, 3, "an unknown phase"},
      {(int *)&c[1]->phase, KILN_COLL_PHASE_WHOLE, "a start without its done"},
      {(int *)&ar->phase, KILN_COLL_PHASE_WHOLE, "a done without its start"},
      {(int *)&c[1]->phase, KILN_COLL_PHASE_START, "a second start before the done"},
      {(int *)&ar->buffers[0].dtype, 77, "an unknown element type"},
      {&ar->num_buffers, 0, "no operand"},
  };
  int refused = 0;
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    int keep = *ints[i].field;
    *ints[i].field = ints[i].value;
    kiln_status s = reread(d);
    *ints[i].field = keep;
    if (!s) fail_msg("read back with %s", ints[i].what);
    printf("%s: %s\n", ints[i].what, kiln_status_message(s));
    assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
    kiln_status_free(s);
    refused++;
  }
  /* A group member moved to a group of its own; a count whose byte size overflows back to the
   * slice's (2^62 + 16 f32 elements: 2^64 + 64 bytes). */
  int64_t key = ar->group_key[1];
  ar->group_key[1] = 99;
  kiln_status s = reread(d);
  ar->group_key[1] = key;
  assert_non_null(s);
  kiln_status_free(s);
  int64_t count = ar->buffers[0].count;
  ar->buffers[0].count = ((int64_t)1 << 62) + 16;
  s = reread(d);
  ar->buffers[0].count = count;
  assert_non_null(s);
  printf("an overflowing count: %s\n", kiln_status_message(s));
  kiln_status_free(s);
  /* A done writing elsewhere than its start. */
  c[1]->buffers[0].recv.offset += 4;
  s = reread(d);
  c[1]->buffers[0].recv.offset -= 4;
  assert_non_null(s);
  printf("a done of another collective: %s\n", kiln_status_message(s));
  assert_non_null(strstr(kiln_status_message(s), "its done describes another collective"));
  kiln_status_free(s);
  assert_null(reread(d)); /* restored: reads again */
  refused += 3;

  /* Every payload byte changed (3 ways) behind a fixed-up checksum. */
  unsigned char *b = kiln_malloc(len);
  size_t h = header_size(bytes), caught = 0, tried = 0;
  for (size_t i = h; i < len; i++) {
    static const unsigned char kEdits[] = {0xff, 0x80, 0x01};
    for (size_t e = 0; e < sizeof(kEdits); e++) {
      memcpy(b, bytes, len);
      b[i] ^= kEdits[e];
      kiln_executable_blob_reseal(b, len);
      kiln_executable_desc_t *x = NULL;
      s = kiln_executable_desc_from_bytes_unlinked(b, len, NULL, &x);
      tried++;
      if (s) {
        caught++;
      } else {
        uint64_t *sizes = kiln_calloc((size_t)x->num_allocations + 1, sizeof(uint64_t));
        for (int32_t a = 0; a < x->num_allocations; a++) sizes[a] = x->allocations[a].size;
        kiln_thunk_prepare_params_t pp = {x->num_allocations, sizes};
        kiln_status_free(kiln_thunk_seq_prepare(&x->thunks, &pp));
        kiln_free(sizes);
      }
      kiln_status_free(s);
      kiln_executable_desc_destroy(x);
    }
  }
  printf(
      "collectives: %zu bytes; %d damaged tables refused; %zu of %zu checksum-fixed edits "
      "refused, the rest read\n",
      len, refused, caught, tried);
  assert_true(caught > 0);
  kiln_free(b);
  kiln_free(bytes);
  kiln_executable_desc_destroy(d);
  kiln_hlo_module_destroy(m);
}

static void test_compile_driver_hits_the_executable_cache_before_the_passes(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln_test_exe_cacheXXXXXX";
  kiln_test_temp_dir_make(dir);
  kiln_compile_options_t co = {0};
  co.executable_cache_dir = dir;
  co.emit.dump_dir = "";
  kiln_compile_stats_t st;
  kiln_hlo_module_t *m1 = parse(kAllKinds);
  kiln_executable_desc_t *d1 = NULL;
  assert_null(kiln_compile_module(m1, &co, &d1, &st));
  assert_false(st.executable_cache_hit);
  kiln_hlo_module_t *m2 = parse(kAllKinds);
  kiln_strbuf_t before = {0}, after = {0};
  kiln_hlo_module_print(&before, m2);
  kiln_executable_desc_t *d2 = NULL;
  assert_null(kiln_compile_module(m2, &co, &d2, &st));
  assert_true(st.executable_cache_hit);
  assert_true(st.passes_ms == 0 && st.emit.kernels == 0);
  kiln_hlo_module_print(&after, m2);
  assert_string_equal(kiln_strbuf_cstr(&before), kiln_strbuf_cstr(&after)); /* no pass ran */
  printf("executable cache hit: %.2f ms (key, read, custom calls, JIT link)\n", st.cache_ms);
  kiln_strbuf_t p1 = {0}, p2 = {0};
  kiln_executable_desc_print(&p1, d1);
  kiln_executable_desc_print(&p2, d2);
  assert_string_equal(kiln_strbuf_cstr(&p1), kiln_strbuf_cstr(&p2));
  kiln_strbuf_free(&p1);
  kiln_strbuf_free(&p2);
  kiln_executable_desc_destroy(d2);

  /* Another option is another entry. */
  kiln_compile_options_t other = co;
  other.emit.rng_seed = 7;
  kiln_hlo_module_t *m3 = parse(kAllKinds);
  assert_null(kiln_compile_module(m3, &other, &d2, &st));
  assert_false(st.executable_cache_hit);
  kiln_executable_desc_destroy(d2);
  kiln_hlo_module_destroy(m3);

  /* A corrupt entry: a miss, compiled again and rewritten. */
  uint64_t key[2];
  kiln_compile_options_t keyed = co;
  keyed.command_buffer_min_run = KILN_COMMAND_BUFFER_DEFAULT_MIN_RUN; /* as the driver resolves */
  assert_null(kiln_executable_cache_key(m2, &keyed, false, key));
  char *path = kiln_disk_cache_path(dir, KILN_EXECUTABLE_CACHE_KIND, key);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, -5, SEEK_END);
  fputc(0x5a, f);
  fclose(f);
  kiln_hlo_module_t *m4 = parse(kAllKinds);
  assert_null(kiln_compile_module(m4, &co, &d2, &st));
  assert_false(st.executable_cache_hit);
  kiln_executable_desc_destroy(d2);
  kiln_hlo_module_destroy(m4);
  m4 = parse(kAllKinds);
  assert_null(kiln_compile_module(m4, &co, &d2, &st));
  assert_true(st.executable_cache_hit);
  kiln_executable_desc_destroy(d2);
  kiln_hlo_module_destroy(m4);
  kiln_free(path);

  kiln_strbuf_free(&before);
  kiln_strbuf_free(&after);
  kiln_executable_desc_destroy(d1);
  kiln_hlo_module_destroy(m1);
  kiln_hlo_module_destroy(m2);
  kiln_test_temp_dir_remove(dir);
}

typedef struct corpus_ctx {
  kiln_device_t *dev;
  kiln_corpus_repeats_t repeats;
  long rate;
  int runs, equal, not_here, sampled_out, costly, repeated, nondeterministic;
  size_t bytes;
  kiln_strbuf_t failures, nondet_names;
} corpus_ctx_t;

/* CUDA programs compiled with and without cuBLASLt (bf16/f16 gemm thunks, fused epilogues)
 * differ, so the executable cache key says which: never one for the other. The host
 * ignores the flag. */
static void test_cache_key_separates_cublaslt_from_classic_cublas(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse(kAllKinds);
  kiln_compile_options_t co;
  memset(&co, 0, sizeof(co));
  uint64_t host[2], host_lt[2], cuda[2], cuda_lt[2], cuda_lt2[2];
  co.emit.target = KILN_TARGET_HOST;
  assert_null(kiln_executable_cache_key(m, &co, false, host));
  co.emit.cublaslt = true;
  assert_null(kiln_executable_cache_key(m, &co, false, host_lt));
  co.emit.target = KILN_TARGET_CUDA;
  assert_null(kiln_executable_cache_key(m, &co, false, cuda_lt));
  assert_null(kiln_executable_cache_key(m, &co, false, cuda_lt2));
  co.emit.cublaslt = false;
  assert_null(kiln_executable_cache_key(m, &co, false, cuda));
  assert_memory_equal(host, host_lt, sizeof(host));
  assert_memory_equal(cuda_lt, cuda_lt2, sizeof(cuda_lt));
  assert_memory_not_equal(cuda, cuda_lt, sizeof(cuda));
  assert_memory_not_equal(cuda, host, sizeof(cuda));
  kiln_hlo_module_destroy(m);
}

/* Collectives are emitted for the world in the options (the plugin lowers one optimized
 * module for 1, 2 or 4 participants), which the module's text does not say: the key does. */
static void test_cache_key_separates_worlds(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse(kAllKinds);
  kiln_compile_options_t co;
  memset(&co, 0, sizeof(co));
  uint64_t k[4][2], again[2];
  int worlds[4][2] = {{0, 0}, {1, 1}, {2, 1}, {1, 2}};
  for (int i = 0; i < 4; i++) {
    co.emit.num_replicas = worlds[i][0];
    co.emit.num_partitions = worlds[i][1];
    assert_null(kiln_executable_cache_key(m, &co, true, k[i]));
  }
  assert_null(kiln_executable_cache_key(m, &co, true, again));
  assert_memory_equal(k[3], again, sizeof(again));
  for (int i = 0; i < 4; i++)
    for (int j = i + 1; j < 4; j++) assert_memory_not_equal(k[i], k[j], sizeof(k[i]));
  kiln_hlo_module_destroy(m);
}

static void corpus_module(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                          int index, kiln_status error) {
  (void)path;
  (void)index;
  corpus_ctx_t *c = ctx;
  if (error || !*mp) return;
  kiln_hlo_module_t *m = *mp;
  if (!kiln_corpus_sampled_at(name, c->rate)) {
    c->sampled_out++;
    return;
  }
  if (kiln_corpus_repeat_of(&c->repeats, m, name)) {
    c->repeated++;
    return;
  }
  char why[256];
  if (kiln_corpus_eval_too_costly(m, KILN_CORPUS_MAX_COST, why, sizeof why)) {
    c->costly++;
    return;
  }
  bool equal = false, nondeterministic = false;
  kiln_status rt = NULL;
  size_t bytes = 0;
  kiln_status s = run_both_checked(c->dev, m, 0, &equal, &nondeterministic, &rt, &bytes);
  if (s) { /* does not compile or run on the host: nothing to compare */
    c->not_here++;
    kiln_status_free(s);
    return;
  }
  c->runs++;
  c->bytes += bytes;
  if (equal) {
    c->equal++;
  } else if (nondeterministic) {
    c->nondeterministic++;
    kiln_strbuf_printf(&c->nondet_names, "  %s\n", name);
  } else {
    kiln_strbuf_printf(&c->failures, "  %s: %s\n", name,
                       rt ? kiln_status_message(rt) : "results differ");
  }
  kiln_status_free(rt);
}

static void test_corpus_runs_bit_identically_after_a_round_trip(void **state) {
  (void)state;
  const char *root = kiln_corpus_dir();
  if (!root || access(root, R_OK) != 0) KILN_SKIP("no corpus at %s", root ? root : "(unset)");
  corpus_ctx_t c;
  memset(&c, 0, sizeof(c));
  assert_null(kiln_host_device_create(0, &c.dev));
  kiln_corpus_repeats_init(&c.repeats);
  c.rate = kiln_corpus_sample_rate(20);
  assert_null(kiln_corpus_for_each_whole_module(root, corpus_module, &c));
  printf(
      "corpus round trip on the host: %d of %d modules that run here run bit-identically after "
      "serialize/deserialize (%.1f MB serialized); %d do not compile or run on the host, %d "
      "too costly, %d repeats, %d sampled out (1 in %ld)\n",
      c.equal, c.runs, c.bytes / 1e6, c.not_here, c.costly, c.repeated, c.sampled_out, c.rate);
  printf("not bit-identical from one direct run to the next (float atomics), not counted: %d\n%s",
         c.nondeterministic, kiln_strbuf_cstr(&c.nondet_names));
  printf("failures:\n%s", kiln_strbuf_cstr(&c.failures));
  kiln_strbuf_free(&c.failures);
  kiln_strbuf_free(&c.nondet_names);
  kiln_corpus_repeats_free(&c.repeats);
  kiln_device_destroy(c.dev);
  assert_int_equal(c.equal + c.nondeterministic, c.runs);
  int sampled_in = c.runs + c.not_here + c.costly + c.repeated;
  assert_true(c.rate > 1 ? (sampled_in == 0 || c.runs > 0) : c.runs >= 250);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_thunk_kind_round_trips_bit_identically),
      cmocka_unit_test(test_cuda_images_round_trip_without_a_device),
      cmocka_unit_test(test_cache_key_separates_cublaslt_from_classic_cublas),
      cmocka_unit_test(test_cache_key_separates_worlds),
      cmocka_unit_test(test_corrupt_truncated_and_foreign_entries_are_errors),
      cmocka_unit_test(test_collective_group_tables_are_checked_when_read),
      cmocka_unit_test(test_compile_driver_hits_the_executable_cache_before_the_passes),
      cmocka_unit_test(test_corpus_runs_bit_identically_after_a_round_trip),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
