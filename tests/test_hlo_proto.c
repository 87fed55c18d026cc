/* HloModuleProto -> kiln IR (compiler/frontend/hlo_proto): every corpus module the test
 * encoder (tools/common/hlo_proto_encode, written from the field numbers independently of
 * the decoder) covers goes text -> proto bytes -> decoder -> print and must print as the
 * parsed text does; hand-made protos check the error paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/frontend/hlo_proto.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/replica_groups.h"
#include "tests/skip_util.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_proto_encode.h"
#include "tools/common/proto_write.h"

/* Raw attributes HloModuleProto does not carry the way kiln keeps them: shardings (kiln
 * drops them), and module options that live in compile options, not the module. */
static const char *const kDropped[] = {"sharding", "outer_dimension_partitions",
                                       "allow_spmd_sharding_propagation_to_output",
                                       "allow_spmd_sharding_propagation_to_parameters", NULL};

static bool is_dropped(const char *key) {
  for (const char *const *d = kDropped; *d; d++)
    if (!strcmp(*d, key)) return true;
  return false;
}

static int cmp_raw(const void *a, const void *b) {
  return strcmp(((const kiln_raw_attr_t *)a)->key, ((const kiln_raw_attr_t *)b)->key);
}

/* Removes dropped raw attributes and sorts the rest by key (the decoder writes them in a
 * fixed order, the text in any order). */
static void normalize_raws(kiln_raw_attr_t *raws, int *n) {
  int k = 0;
  for (int i = 0; i < *n; i++)
    if (!is_dropped(raws[i].key)) raws[k++] = raws[i];
  *n = k;
  if (k > 1) qsort(raws, (size_t)k, sizeof *raws, cmp_raw);
}

/* Spelling the proto cannot keep, made canonical in place: blanks after ',' and '{' or
 * before '}' outside strings, and \' inside strings (the same character as '). */
static void canonical_spelling(char *v) {
  if (!v) return;
  char *w = v;
  bool in_string = false;
  for (char *p = v; *p; p++) {
    if (in_string) {
      if (p[0] == '\\' && p[1] == '\'') {
        *w++ = '\'';
        p++;
        continue;
      }
      if (p[0] == '\\' && p[1]) {
        *w++ = *p++;
        *w++ = *p;
        continue;
      }
      if (*p == '"') in_string = false;
      *w++ = *p;
      continue;
    }
    if (*p == '"') in_string = true;
    if (*p == ' ' && w > v && (w[-1] == ',' || w[-1] == '{' || w[-1] == ' ')) continue;
    if (*p == ' ' && p[1] == '}') continue;
    *w++ = *p;
  }
  *w = '\0';
}

/* frontend_attributes: "{...}" and {...} are the same value; metadata: fields separated
 * by ',' or ' ' alike. */
static void canonical_attr(const char *key, char *v) {
  if (!v) return;
  if (!strcmp(key, "metadata")) {
    bool in_string = false;
    for (char *p = v; *p; p++) {
      if (*p == '\\' && in_string && p[1])
        p++;
      else if (*p == '"')
        in_string = !in_string;
      else if (*p == ',' && !in_string)
        *p = ' ';
    }
  } else if (!strcmp(key, "frontend_attributes")) {
    char *w = v;
    for (char *p = v; *p;) {
      if (p[0] == '=' && p[1] == '"' && p[2] == '{') {
        char *q = p + 2;
        while (*q && *q != '"' && *q != '\\') q++;
        if (*q == '"' && q[-1] == '}') {
          *w++ = '=';
          for (char *r = p + 2; r < q; r++) *w++ = *r;
          p = q + 1;
          continue;
        }
      }
      *w++ = *p++;
    }
    *w = '\0';
  }
  canonical_spelling(v);
}

static void normalize_instruction(kiln_hlo_instruction_t *in) {
  normalize_raws(in->raw_attrs, &in->num_raw_attrs);
  for (int i = 0; i < in->num_raw_attrs; i++)
    canonical_attr(in->raw_attrs[i].key, in->raw_attrs[i].value);
  canonical_spelling(in->replica_groups);
  /* backend_config={json} and backend_config="json" hold the same bytes */
  if (in->backend_config_form == KILN_BACKEND_CONFIG_JSON)
    in->backend_config_form = KILN_BACKEND_CONFIG_STRING;
}

static char *normalized_text(kiln_hlo_module_t *m) {
  normalize_raws(m->raw_attrs, &m->num_raw_attrs);
  for (int i = 0; i < m->num_raw_attrs; i++)
    canonical_attr(m->raw_attrs[i].key, m->raw_attrs[i].value);
  for (size_t c = 0; c < m->computations.len; c++) {
    kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      normalize_instruction(comp->instructions.data[i]);
    }
  }
  return kiln_hlo_module_to_string(m);
}

static const char *corpus_dir(void) {
  const char *d = getenv("KILN_CORPUS_DIR");
  return d && *d ? d : KILN_CORPUS_DIR;
}

typedef struct stats {
  int modules, covered, matched, invalid, not_covered, parse_errors;
  kiln_strbuf_t mismatches, uncovered;
  int mismatch_lines, uncovered_lines;
  double decode_s;
  size_t bytes;
} stats_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The first differing line of two texts, for the report. */
static void first_difference(const char *a, const char *b, kiln_strbuf_t *out) {
  int line = 1;
  const char *la = a, *lb = b;
  while (*a && *a == *b) {
    if (*a == '\n') line++, la = a + 1, lb = b + 1;
    a++, b++;
  }
  const char *ea = strchr(la, '\n'), *eb = strchr(lb, '\n');
  int na = ea ? (int)(ea - la) : (int)strlen(la), nb = eb ? (int)(eb - lb) : (int)strlen(lb);
  kiln_strbuf_printf(out, "    line %d\n    text:  %.*s\n    proto: %.*s\n", line,
                     na > 300 ? 300 : na, la, nb > 300 ? 300 : nb, lb);
}

static void roundtrip_module(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                             int index, kiln_status error) {
  stats_t *st = ctx;
  if (error) {
    st->parse_errors++;
    return;
  }
  st->modules++;
  kiln_hlo_module_t *m = *mp;
  if (kiln_corpus_find_invalid(path, index)) {
    st->invalid++; /* XLA's verifier rejects it too; the decoder verifies */
    return;
  }
  bool with_config =
      kiln_hlo_instruction_raw_attr(m->entry->root, "") == NULL && (st->modules % 2 == 0);
  for (int i = 0; i < m->num_raw_attrs; i++)
    if (!strcmp(m->raw_attrs[i].key, "replica_count") ||
        !strcmp(m->raw_attrs[i].key, "num_partitions"))
      with_config = true;
  kiln_hlo_proto_encode_options_t opts = {
      .with_config = with_config,
      .packed = st->modules % 3 != 0,
      .iota_at_instruction = st->modules % 2 != 0,
      .config_payload = (kiln_proto_config_form_t)(st->modules / 2 % 3),
      .dropped = kDropped};
  uint8_t *bytes = NULL;
  size_t n = 0;
  kiln_status s = kiln_hlo_proto_encode(m, &opts, &bytes, &n);
  if (s) {
    st->not_covered++;
    if (st->uncovered_lines++ < 40)
      kiln_strbuf_printf(&st->uncovered, "  %s: %s\n", name, kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  st->covered++;
  kiln_hlo_module_t *d = NULL;
  int64_t replicas = 0, partitions = 0;
  double t0 = now_s();
  s = with_config ? kiln_hlo_module_from_proto_with_config(bytes, n, &d, &replicas, &partitions)
                  : kiln_hlo_module_from_proto(bytes, n, &d);
  st->decode_s += now_s() - t0;
  st->bytes += n;
  kiln_free(bytes);
  if (s) {
    if (st->mismatch_lines++ < 40)
      kiln_strbuf_printf(&st->mismatches, "  %s: decode failed: %s\n", name,
                         kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  char *want = normalized_text(m), *got = normalized_text(d);
  if (!strcmp(want, got)) {
    st->matched++;
  } else if (st->mismatch_lines++ < 40) {
    kiln_strbuf_printf(&st->mismatches, "  %s:\n", name);
    first_difference(want, got, &st->mismatches);
  }
  kiln_free(want);
  kiln_free(got);
  kiln_hlo_module_destroy(d);
}

static void test_corpus_modules_round_trip_through_hlo_module_proto(void **state) {
  (void)state;
  struct stat sb;
  char xla_dir[4096];
  snprintf(xla_dir, sizeof xla_dir, "%s/xla", corpus_dir());
  if (stat(xla_dir, &sb) != 0) KILN_SKIP("no corpus at %s", corpus_dir());
  stats_t st;
  memset(&st, 0, sizeof st);
  kiln_status walk = kiln_corpus_for_each_whole_module(corpus_dir(), roundtrip_module, &st);
  if (walk) fail_msg("%s", kiln_status_message(walk));
  printf(
      "hlo proto round trip: %d modules, %d encoded (%d not covered by the test encoder, "
      "%d invalid on purpose), %d / %d decoded and printed equal (%.1f%%)\n",
      st.modules, st.covered, st.not_covered, st.invalid, st.matched, st.covered,
      st.covered ? 100.0 * st.matched / st.covered : 0.0);
  printf("decoding (proto -> text -> parse -> verify): %.1f MB of protos in %.3f s, %.1f MB/s\n",
         (double)st.bytes / 1e6, st.decode_s,
         st.decode_s > 0 ? (double)st.bytes / 1e6 / st.decode_s : 0.0);
  if (st.uncovered.len) printf("not covered by the encoder:\n%s", st.uncovered.data);
  if (st.mismatches.len) printf("mismatches:\n%s", st.mismatches.data);
  fflush(stdout);
  kiln_strbuf_free(&st.mismatches);
  kiln_strbuf_free(&st.uncovered);
  assert_true(st.covered > 0);
  assert_int_equal(st.matched, st.covered);
}

/* ---- hand-made modules ---- */

static const char kSmall[] =
    "HloModule small, entry_computation_layout={(f32[4]{0}, f32[4]{0})->(f32[4]{0}, s32[])}\n"
    "\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  a = f32[4]{0} parameter(0)\n"
    "  b = f32[4]{0} parameter(1), metadata={op_name=\"jit(f)/b\" source_file=\"f.py\" "
    "source_line=7}\n"
    "  c = f32[4]{0} constant({1, -2.5, inf, nan})\n"
    "  m = f32[4]{0} multiply(a, c)\n"
    "  z = f32[] constant(0)\n"
    "  r = f32[] reduce(m, z), dimensions={0}, to_apply=add\n"
    "  i = s32[] constant(-3)\n"
    "  ROOT t = (f32[4]{0}, s32[]) tuple(b, i)\n"
    "}\n";

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) fail_msg("%s", kiln_status_message(s));
  return m;
}

static void encode(const kiln_hlo_module_t *m, bool with_config, uint8_t **bytes, size_t *n) {
  kiln_hlo_proto_encode_options_t o = {.with_config = with_config, .packed = true};
  kiln_status s = kiln_hlo_proto_encode(m, &o, bytes, n);
  if (s) fail_msg("%s", kiln_status_message(s));
}

/* Decodes `bytes` and asserts the module prints as `m` does; returns the text (kiln_free). */
static char *decodes_to(const kiln_hlo_module_t *m, const uint8_t *bytes, size_t n) {
  kiln_hlo_module_t *d = NULL;
  kiln_status s = kiln_hlo_module_from_proto(bytes, n, &d);
  if (s) fail_msg("%s", kiln_status_message(s));
  char *want = kiln_hlo_module_to_string(m), *got = kiln_hlo_module_to_string(d);
  assert_string_equal(got, want);
  kiln_free(want);
  kiln_hlo_module_destroy(d);
  return got;
}

static void test_small_module_decodes_to_the_same_module(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse(kSmall);
  uint8_t *bytes;
  size_t n;
  encode(m, false, &bytes, &n);
  assert_false(kiln_hlo_bytes_are_text(bytes, n));
  char *got = decodes_to(m, bytes, n);
  /* the literal's values, including the non-finite ones, survive */
  assert_non_null(strstr(got, "constant({1, -2.5, inf, nan})"));
  assert_non_null(strstr(got, "source_line=7"));
  kiln_free(got);

  /* every shorter prefix is either an error or a valid (smaller) message; never a crash */
  int errors = 0;
  for (size_t k = 0; k < n; k++) {
    kiln_hlo_module_t *t = NULL;
    kiln_status e = kiln_hlo_module_from_proto(bytes, k, &t);
    if (e) {
      errors++;
      assert_int_equal(kiln_status_code(e), KILN_INVALID_ARGUMENT);
      assert_null(t);
      kiln_status_free(e);
    } else {
      kiln_hlo_module_destroy(t);
    }
  }
  assert_true(errors > (int)n / 2);
  /* flipping any one byte never crashes (ASan checks the reads) */
  for (size_t k = 0; k < n; k++) {
    uint8_t saved = bytes[k];
    bytes[k] ^= 0xA5;
    kiln_hlo_module_t *t = NULL;
    kiln_status e = kiln_hlo_module_from_proto(bytes, n, &t);
    kiln_status_free(e);
    kiln_hlo_module_destroy(t);
    bytes[k] = saved;
  }
  kiln_free(bytes);
  kiln_hlo_module_destroy(m);
}

/* Sub-byte integers keep their type and values: s1 / u1 are PrimitiveType 30 / 31, their
 * literals LiteralProto's s1s / u1s (bytes, one per element). */
static void test_sub_byte_integers_round_trip(void **state) {
  (void)state;
  kiln_hlo_module_t *m = parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = s1[3]{0} parameter(0)\n"
      "  c = s1[3]{0} constant({-1, 0, -1})\n"
      "  a = s1[3]{0} add(p, c)\n"
      "  u = u1[2]{0} constant({1, 0})\n"
      "  s = s2[2]{0} constant({-2, 1})\n"
      "  ROOT t = (s1[3]{0}, u1[2]{0}, s2[2]{0}) tuple(a, u, s)\n"
      "}\n");
  uint8_t *bytes;
  size_t n;
  encode(m, false, &bytes, &n);
  char *got = decodes_to(m, bytes, n);
  assert_non_null(strstr(got, "s1[3]{0} constant({-1, 0, -1})"));
  assert_non_null(strstr(got, "u1[2]{0} constant({1, 0})"));
  kiln_free(got);
  kiln_free(bytes);
  kiln_hlo_module_destroy(m);
}

static void test_with_config_returns_replicas_and_partitions(void **state) {
  (void)state;
  char text[2048];
  snprintf(text, sizeof text, "HloModule cfg, replica_count=4, num_partitions=2%s",
           strchr(kSmall, '\n'));
  kiln_hlo_module_t *m = parse(text);
  uint8_t *bytes;
  size_t n;
  encode(m, true, &bytes, &n);
  kiln_hlo_module_t *d = NULL;
  int64_t replicas = 0, partitions = 0;
  kiln_status s = kiln_hlo_module_from_proto_with_config(bytes, n, &d, &replicas, &partitions);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(replicas, 4);
  assert_int_equal(partitions, 2);
  kiln_hlo_module_destroy(d);
  kiln_free(bytes);
  kiln_hlo_module_destroy(m);
  /* a config without counts means 1 and 1 */
  m = parse(kSmall);
  encode(m, true, &bytes, &n);
  s = kiln_hlo_module_from_proto_with_config(bytes, n, &d, &replicas, &partitions);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(replicas, 1);
  assert_int_equal(partitions, 1);
  kiln_hlo_module_destroy(d);
  kiln_free(bytes);
  kiln_hlo_module_destroy(m);
}

static void test_bytes_are_text_only_for_hlo_text(void **state) {
  (void)state;
  assert_true(kiln_hlo_bytes_are_text("HloModule m\n", 12));
  const char *c = "  // a comment\n/* block */\n\tHloModule m";
  assert_true(kiln_hlo_bytes_are_text(c, strlen(c)));
  assert_false(kiln_hlo_bytes_are_text("\x0a\x05small", 7));
  assert_false(kiln_hlo_bytes_are_text("HloModul", 8));
  assert_false(kiln_hlo_bytes_are_text("/* open HloModule", 17));
  assert_false(kiln_hlo_bytes_are_text(NULL, 0));
}

/* ---- hand-assembled protos for the error paths ---- */

/* A module with one computation "c" holding the given instructions (each already a
 * serialized HloInstructionProto). */
static void one_computation_module(kiln_pb_t *out, kiln_pb_t *instrs, int n, int64_t root_id) {
  kiln_pb_t comp = {0};
  kiln_pb_string(&comp, 1, "c");
  for (int i = 0; i < n; i++) kiln_pb_message(&comp, 2, &instrs[i]);
  kiln_pb_i64(&comp, 5, 1);
  kiln_pb_i64(&comp, 6, root_id);
  memset(out, 0, sizeof *out);
  kiln_pb_string(out, 1, "m");
  kiln_pb_message(out, 3, &comp);
  kiln_pb_free(&comp);
}

/* A ShapeProto f32[] as field 3 of an instruction. */
static void scalar_f32(kiln_pb_t *instr) {
  kiln_pb_t shape = {0};
  kiln_pb_i64(&shape, 2, 11);
  kiln_pb_message(instr, 3, &shape);
  kiln_pb_free(&shape);
}

static void param(kiln_pb_t *p, const char *name, int64_t id, int64_t number) {
  memset(p, 0, sizeof *p);
  kiln_pb_string(p, 1, name);
  kiln_pb_string(p, 2, "parameter");
  scalar_f32(p);
  kiln_pb_i64(p, 9, number);
  kiln_pb_i64(p, 35, id);
}

static void expect_decode_error(kiln_pb_t *module, const char *part1, const char *part2) {
  kiln_hlo_module_t *d = NULL;
  kiln_status s = kiln_hlo_module_from_proto(module->data, module->len, &d);
  assert_non_null(s);
  assert_null(d);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  const char *msg = kiln_status_message(s);
  if (!strstr(msg, part1) || (part2 && !strstr(msg, part2)))
    fail_msg("message '%s' lacks '%s' / '%s'", msg, part1, part2 ? part2 : "");
  kiln_status_free(s);
}

static void test_unknown_opcode_and_dangling_ids_name_the_instruction(void **state) {
  (void)state;
  kiln_pb_t ins[2], m;
  param(&ins[0], "p", 1, 0);
  memset(&ins[1], 0, sizeof ins[1]);
  kiln_pb_string(&ins[1], 1, "weird");
  kiln_pb_string(&ins[1], 2, "frobnicate");
  scalar_f32(&ins[1]);
  kiln_pb_i64(&ins[1], 35, 2);
  kiln_pb_i64(&ins[1], 36, 1);
  one_computation_module(&m, ins, 2, 2);
  expect_decode_error(&m, "unknown opcode 'frobnicate'", "instruction 'weird' of computation 'c'");
  kiln_pb_free(&m);
  kiln_pb_free(&ins[1]);

  /* negate of operand id 99, which no instruction has */
  memset(&ins[1], 0, sizeof ins[1]);
  kiln_pb_string(&ins[1], 1, "n");
  kiln_pb_string(&ins[1], 2, "negate");
  scalar_f32(&ins[1]);
  kiln_pb_i64(&ins[1], 35, 2);
  kiln_pb_i64(&ins[1], 36, 99);
  one_computation_module(&m, ins, 2, 2);
  expect_decode_error(&m, "operand_ids[0] = 99 is not an instruction of the computation",
                      "instruction 'n' of computation 'c'");
  kiln_pb_free(&m);
  /* a root id that is no instruction */
  one_computation_module(&m, ins, 1, 42);
  expect_decode_error(&m, "root_id 42 is not an instruction of computation 'c'", NULL);
  kiln_pb_free(&m);
  /* a called computation id that is no computation */
  kiln_pb_free(&ins[1]);
  memset(&ins[1], 0, sizeof ins[1]);
  kiln_pb_string(&ins[1], 1, "call");
  kiln_pb_string(&ins[1], 2, "call");
  scalar_f32(&ins[1]);
  kiln_pb_i64(&ins[1], 35, 2);
  kiln_pb_i64(&ins[1], 36, 1);
  kiln_pb_i64(&ins[1], 38, 7);
  one_computation_module(&m, ins, 2, 2);
  expect_decode_error(&m, "called_computation_ids[0] = 7 is not a computation", "'call'");
  kiln_pb_free(&m);
  kiln_pb_free(&ins[1]);
  kiln_pb_free(&ins[0]);
}

/* ---- replica groups in fields 92 and 93 ---- */

static kiln_hlo_instruction_t *find_op(kiln_hlo_module_t *m, kiln_hlo_opcode_t op) {
  for (size_t i = 0; i < m->entry->instructions.len; i++)
    if (m->entry->instructions.data[i]->opcode == op) return m->entry->instructions.data[i];
  fail_msg("no such instruction in the entry");
  return NULL;
}

/* The groups `a` and `b` resolve to, equal. */
static void expect_same_groups(const char *a, const char *b) {
  kiln_hlo_replica_groups_t ga, gb;
  kiln_status s = kiln_hlo_replica_groups_parse(a, &ga);
  if (s) fail_msg("%s: %s", a, kiln_status_message(s));
  s = kiln_hlo_replica_groups_parse(b, &gb);
  if (s) fail_msg("%s: %s", b, kiln_status_message(s));
  assert_int_equal(ga.num_groups, gb.num_groups);
  assert_memory_equal(ga.offsets, gb.offsets, sizeof(int) * (size_t)(ga.num_groups + 1));
  assert_memory_equal(ga.ids, gb.ids, sizeof(int64_t) * (size_t)ga.offsets[ga.num_groups]);
  kiln_hlo_replica_groups_free(&ga);
  kiln_hlo_replica_groups_free(&gb);
}

/* Mesh groups (device order of their own, sub-axes, several axes) and iota groups written as
 * XLA's newer writer does (mesh_axes_replica_group_list = 93, iota_collective_device_list =
 * 92) decode to the groups their text names. */
static void test_mesh_and_instruction_iota_groups_decode_to_their_groups(void **state) {
  (void)state;
  static const char *const kGroups[] = {
      "mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0) {'y':(2)2,'x'}",
      "mesh['x'=2,'y'=4] {'y'}",
      "mesh[data=2,model=2,seq=2] {seq,data}",
      "mesh['x'=8] {}",
      "[2,4]<=[2,4]T(1,0)",
      "[1,8]<=[8]",
  };
  for (size_t i = 0; i < sizeof kGroups / sizeof kGroups[0]; i++) {
    kiln_hlo_replica_groups_t g;
    kiln_status s = kiln_hlo_replica_groups_parse(kGroups[i], &g);
    if (s) fail_msg("%s", kiln_status_message(s));
    int size = g.num_groups ? g.offsets[1] : 8;
    kiln_hlo_replica_groups_free(&g);
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule g, replica_count=8\n\nENTRY e {\n  p = f32[2] parameter(0)\n"
             "  ROOT ag = f32[%d] all-gather(p), dimensions={0}, replica_groups=%s\n}\n",
             2 * size, kGroups[i]);
    kiln_hlo_module_t *m = parse(text);
    for (int at_instruction = 0; at_instruction < 2; at_instruction++) {
      kiln_hlo_proto_encode_options_t o = {
          .with_config = true, .packed = true, .iota_at_instruction = at_instruction};
      uint8_t *bytes = NULL;
      size_t n = 0;
      kiln_status e = kiln_hlo_proto_encode(m, &o, &bytes, &n);
      if (e) fail_msg("%s", kiln_status_message(e));
      /* the field the text's form belongs in, and no other */
      bool mesh = kGroups[i][0] == 'm';
      int want = mesh ? 93 : at_instruction ? 92 : 87;
      static const int kFields[3] = {87, 92, 93};
      for (int k = 0; k < 3; k++) {
        uint32_t tag = (uint32_t)kFields[k] << 3 | 2;
        uint8_t t0 = (uint8_t)((tag & 0x7F) | 0x80), t1 = (uint8_t)(tag >> 7);
        bool found = false;
        for (size_t j = 0; j + 1 < n && !found; j++) found = bytes[j] == t0 && bytes[j + 1] == t1;
        if (found != (kFields[k] == want))
          fail_msg("%s: field %d %s", kGroups[i], kFields[k], found ? "written" : "missing");
      }
      kiln_hlo_module_t *d = NULL;
      s = kiln_hlo_module_from_proto_with_config(bytes, n, &d, NULL, NULL);
      kiln_free(bytes);
      if (s) fail_msg("%s: %s", kGroups[i], kiln_status_message(s));
      expect_same_groups(kGroups[i], find_op(d, KILN_OP_ALL_GATHER)->replica_groups);
      kiln_hlo_module_destroy(d);
    }
    kiln_hlo_module_destroy(m);
  }
}

/* param p f32[2] and all-gather f32[4] of it carrying `list` as field 93 (when not NULL). */
static void mesh_all_gather_module(kiln_pb_t *out, kiln_pb_t *list) {
  kiln_pb_t ins[2], shape = {0}, pshape = {0};
  memset(ins, 0, sizeof ins);
  kiln_pb_string(&ins[0], 1, "p");
  kiln_pb_string(&ins[0], 2, "parameter");
  kiln_pb_i64(&pshape, 2, 11);
  kiln_pb_i64(&pshape, 3, 2);
  kiln_pb_message(&ins[0], 3, &pshape);
  kiln_pb_i64(&ins[0], 9, 0);
  kiln_pb_i64(&ins[0], 35, 1);
  kiln_pb_string(&ins[1], 1, "ag");
  kiln_pb_string(&ins[1], 2, "all-gather");
  kiln_pb_i64(&shape, 2, 11);
  kiln_pb_i64(&shape, 3, 4);
  kiln_pb_message(&ins[1], 3, &shape);
  kiln_pb_i64(&ins[1], 14, 0);
  kiln_pb_i64(&ins[1], 35, 2);
  kiln_pb_i64(&ins[1], 36, 1);
  kiln_pb_message(&ins[1], 93, list);
  one_computation_module(out, ins, 2, 2);
  kiln_pb_free(&shape);
  kiln_pb_free(&pshape);
  kiln_pb_free(&ins[0]);
  kiln_pb_free(&ins[1]);
}

/* MeshAxesReplicaGroupListProto with the mesh `axes` (name, size pairs; NULL name: none) and
 * one axis reference (index, and a sub-axis when pre > 0). */
static void mesh_list(kiln_pb_t *list, const char *const *names, const int64_t *sizes, int rank,
                      bool with_mesh, int64_t index, int64_t pre, int64_t size) {
  memset(list, 0, sizeof *list);
  kiln_pb_t mesh = {0}, ref = {0};
  for (int a = 0; a < rank; a++) {
    kiln_pb_t axis = {0};
    if (names[a]) kiln_pb_string(&axis, 1, names[a]);
    kiln_pb_i64(&axis, 2, sizes[a]);
    kiln_pb_message(&mesh, 1, &axis);
    kiln_pb_free(&axis);
  }
  if (rank == 0) kiln_pb_i64(&mesh, 2, 0); /* a maximal mesh: one device, no axes */
  if (with_mesh) kiln_pb_message(list, 1, &mesh);
  kiln_pb_i64(&ref, 1, index);
  if (pre > 0) {
    kiln_pb_t sub = {0};
    kiln_pb_i64(&sub, 1, pre);
    kiln_pb_i64(&sub, 2, size);
    kiln_pb_message(&ref, 2, &sub);
    kiln_pb_free(&sub);
  }
  kiln_pb_message(list, 2, &ref);
  kiln_pb_free(&mesh);
  kiln_pb_free(&ref);
}

static void expect_mesh_error(const char *const *names, const int64_t *sizes, int rank,
                              bool with_mesh, int64_t index, int64_t pre, int64_t size,
                              kiln_status_code_t code, const char *part) {
  kiln_pb_t list, m;
  mesh_list(&list, names, sizes, rank, with_mesh, index, pre, size);
  mesh_all_gather_module(&m, &list);
  kiln_hlo_module_t *d = NULL;
  kiln_status s = kiln_hlo_module_from_proto(m.data, m.len, &d);
  assert_non_null(s);
  assert_null(d);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), part))
    fail_msg("code %d, message '%s' lacks '%s'", (int)kiln_status_code(s), kiln_status_message(s),
             part);
  kiln_status_free(s);
  kiln_pb_free(&list);
  kiln_pb_free(&m);
}

static void test_malformed_mesh_groups_are_errors(void **state) {
  (void)state;
  const char *xy[] = {"x", "y"}, *quote[] = {"x", "y'z"}, *unnamed[] = {"x", NULL};
  const int64_t sizes[] = {2, 2}, big[] = {2, 4};
  /* the well-formed list decodes (the control for the cases below) */
  kiln_pb_t list, m;
  mesh_list(&list, xy, sizes, 2, true, 1, 0, 0);
  mesh_all_gather_module(&m, &list);
  kiln_hlo_module_t *d = NULL;
  kiln_status s = kiln_hlo_module_from_proto(m.data, m.len, &d);
  if (s) fail_msg("%s", kiln_status_message(s));
  expect_same_groups("{{0,1},{2,3}}", find_op(d, KILN_OP_ALL_GATHER)->replica_groups);
  kiln_hlo_module_destroy(d);
  kiln_pb_free(&list);
  kiln_pb_free(&m);

  expect_mesh_error(xy, sizes, 2, true, 2, 0, 0, KILN_INVALID_ARGUMENT,
                    "mesh_axis_index 2 of a mesh of 2 axes");
  expect_mesh_error(xy, sizes, 2, false, 0, 0, 0, KILN_INVALID_ARGUMENT,
                    "mesh_axes_replica_group_list without a mesh");
  expect_mesh_error(quote, sizes, 2, true, 0, 0, 0, KILN_INVALID_ARGUMENT, "is not a word");
  expect_mesh_error(unnamed, sizes, 2, true, 0, 0, 0, KILN_INVALID_ARGUMENT,
                    "a mesh axis without a name");
  expect_mesh_error(xy, (const int64_t[]){2, 0}, 2, true, 0, 0, 0, KILN_INVALID_ARGUMENT,
                    "mesh axis 'y' of size 0");
  expect_mesh_error(NULL, NULL, 0, true, 0, 0, 0, KILN_UNIMPLEMENTED, "a maximal mesh");
  /* a sub-axis that does not divide its axis: the replica-group parser's check */
  expect_mesh_error(xy, big, 2, true, 1, 3, 2, KILN_INVALID_ARGUMENT, "pre-size x size must");
}

/* backend_config in field 43, in backend_config_payload (99) inline, and interned in the
 * module's payloads (22) by id: the same custom call each way; an id past the payloads is
 * INVALID_ARGUMENT. */
static void test_backend_config_payloads_decode_as_the_field_does(void **state) {
  (void)state;
  static const char kText[] =
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
      "  a = f32[4] custom-call(p), custom_call_target=\"foo\", backend_config=\"first\"\n"
      "  ROOT b = f32[4] custom-call(a), custom_call_target=\"bar\", "
      "backend_config={\"k\": 2}\n}\n";
  kiln_hlo_module_t *m = parse(kText);
  for (int form = 0; form < 3; form++) {
    kiln_hlo_proto_encode_options_t o = {.packed = true,
                                         .config_payload = (kiln_proto_config_form_t)form};
    uint8_t *bytes = NULL;
    size_t n = 0;
    kiln_status s = kiln_hlo_proto_encode(m, &o, &bytes, &n);
    if (s) fail_msg("%s", kiln_status_message(s));
    kiln_hlo_module_t *d = NULL;
    s = kiln_hlo_module_from_proto(bytes, n, &d);
    if (s) fail_msg("form %d: %s", form, kiln_status_message(s));
    const kiln_hlo_computation_t *e = d->entry;
    assert_int_equal(e->instructions.len, 3);
    assert_non_null(e->instructions.data[1]->backend_config);
    assert_string_equal(e->instructions.data[1]->backend_config, "first");
    assert_non_null(e->instructions.data[2]->backend_config);
    assert_string_equal(e->instructions.data[2]->backend_config, "{\"k\": 2}");
    kiln_hlo_module_destroy(d);
    if (form == KILN_PROTO_CONFIG_PAYLOAD_ID) {
      /* drop the last payload: field 22's two tag bytes, its length 8, `{"k": 2}` */
      assert_true(n > 11 && bytes[n - 11] == 0xB2 && bytes[n - 10] == 0x01 && bytes[n - 9] == 8);
      s = kiln_hlo_module_from_proto(bytes, n - 11, &d);
      assert_non_null(s);
      assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
      if (!strstr(kiln_status_message(s), "payload id 1 of a module with 1 payloads"))
        fail_msg("%s", kiln_status_message(s));
      kiln_status_free(s);
    }
    kiln_free(bytes);
  }
  kiln_hlo_module_destroy(m);
}

static void test_malformed_fields_are_errors_and_unknown_fields_are_skipped(void **state) {
  (void)state;
  kiln_pb_t ins[1], m;
  /* unknown fields of every wire type inside the instruction are skipped */
  param(&ins[0], "p", 1, 0);
  kiln_pb_u64(&ins[0], 1000, 5);
  kiln_pb_fixed64(&ins[0], 1001, 7);
  kiln_pb_fixed32(&ins[0], 1002, 7);
  kiln_pb_string(&ins[0], 1003, "x");
  kiln_pb_tag(&ins[0], 1004, 3);
  kiln_pb_u64(&ins[0], 1, 3);
  kiln_pb_tag(&ins[0], 1004, 4);
  one_computation_module(&m, ins, 1, 1);
  kiln_hlo_module_t *d = NULL;
  kiln_status s = kiln_hlo_module_from_proto(m.data, m.len, &d);
  if (s) fail_msg("%s", kiln_status_message(s));
  char *text = kiln_hlo_module_to_string(d);
  assert_non_null(strstr(text, "ROOT p = f32[] parameter(0)"));
  kiln_free(text);
  kiln_hlo_module_destroy(d);
  kiln_pb_free(&m);
  kiln_pb_free(&ins[0]);

  /* parameter_number as a string: wrong wire type */
  memset(&ins[0], 0, sizeof ins[0]);
  kiln_pb_string(&ins[0], 1, "p");
  kiln_pb_string(&ins[0], 2, "parameter");
  scalar_f32(&ins[0]);
  kiln_pb_string(&ins[0], 9, "zero");
  one_computation_module(&m, ins, 1, 0);
  expect_decode_error(&m, "HloInstructionProto field 9", "expected a varint");
  kiln_pb_free(&m);
  kiln_pb_free(&ins[0]);

  /* an element type kiln lacks (BUFFER = 34) */
  memset(&ins[0], 0, sizeof ins[0]);
  kiln_pb_string(&ins[0], 1, "p");
  kiln_pb_string(&ins[0], 2, "parameter");
  kiln_pb_t shape = {0};
  kiln_pb_i64(&shape, 2, 34);
  kiln_pb_message(&ins[0], 3, &shape);
  kiln_pb_free(&shape);
  one_computation_module(&m, ins, 1, 0);
  expect_decode_error(&m, "element_type 34 is not a type kiln supports", "instruction 'p'");
  kiln_pb_free(&m);
  kiln_pb_free(&ins[0]);

  /* a constant whose literal holds 3 values for f32[2] */
  memset(&ins[0], 0, sizeof ins[0]);
  kiln_pb_string(&ins[0], 1, "k");
  kiln_pb_string(&ins[0], 2, "constant");
  kiln_pb_t arr = {0}, lit = {0};
  kiln_pb_i64(&arr, 2, 11);
  kiln_pb_i64(&arr, 3, 2);
  kiln_pb_message(&ins[0], 3, &arr);
  kiln_pb_message(&lit, 1, &arr);
  for (int i = 0; i < 3; i++) kiln_pb_fixed32(&lit, 8, 0x3f800000u);
  kiln_pb_message(&ins[0], 8, &lit);
  kiln_pb_free(&arr);
  kiln_pb_free(&lit);
  one_computation_module(&m, ins, 1, 0);
  expect_decode_error(&m, "3 f32 values for a shape of 2 elements", "instruction 'k'");
  kiln_pb_free(&m);
  kiln_pb_free(&ins[0]);

  /* a literal whose layout names a dimension the shape lacks, or too few: before, copying
   * the values into that layout read past its strides (fuzz_hlo_proto crash) */
  static const int64_t bad_m2m[][2] = {{5, 0}, {1, 1}, {0, -1}};
  for (int b = 0; b < 4; b++) {
    memset(&ins[0], 0, sizeof ins[0]);
    kiln_pb_string(&ins[0], 1, "k");
    kiln_pb_string(&ins[0], 2, "constant");
    kiln_pb_t sh = {0}, lay = {0}, lsh = {0}, l4 = {0};
    kiln_pb_i64(&sh, 2, 11);
    kiln_pb_i64(&sh, 3, 2);
    kiln_pb_i64(&sh, 3, 2);
    kiln_pb_message(&ins[0], 3, &sh);
    if (b < 3) {
      kiln_pb_i64(&lay, 1, bad_m2m[b][0]);
      kiln_pb_i64(&lay, 1, bad_m2m[b][1]);
    } else {
      kiln_pb_i64(&lay, 1, 0); /* one entry for rank 2 */
    }
    kiln_pb_i64(&lsh, 2, 11);
    kiln_pb_i64(&lsh, 3, 2);
    kiln_pb_i64(&lsh, 3, 2);
    kiln_pb_message(&lsh, 5, &lay);
    kiln_pb_message(&l4, 1, &lsh);
    for (int i = 0; i < 4; i++) kiln_pb_fixed32(&l4, 8, 0x3f800000u);
    kiln_pb_message(&ins[0], 8, &l4);
    kiln_pb_free(&sh);
    kiln_pb_free(&lay);
    kiln_pb_free(&lsh);
    kiln_pb_free(&l4);
    one_computation_module(&m, ins, 1, 0);
    expect_decode_error(&m,
                        b < 3 ? "not a permutation of the 2 dimensions"
                              : "1 minor_to_major entries for a shape of rank 2",
                        "instruction 'k'");
    kiln_pb_free(&m);
    kiln_pb_free(&ins[0]);
  }

  /* a huge shape with no values is an error, not an allocation */
  memset(&ins[0], 0, sizeof ins[0]);
  kiln_pb_string(&ins[0], 1, "k");
  kiln_pb_string(&ins[0], 2, "constant");
  memset(&arr, 0, sizeof arr);
  memset(&lit, 0, sizeof lit);
  kiln_pb_i64(&arr, 2, 11);
  kiln_pb_i64(&arr, 3, 1 << 30);
  kiln_pb_i64(&arr, 3, 1 << 30);
  kiln_pb_message(&ins[0], 3, &arr);
  kiln_pb_message(&lit, 1, &arr);
  kiln_pb_message(&ins[0], 8, &lit);
  kiln_pb_free(&arr);
  kiln_pb_free(&lit);
  one_computation_module(&m, ins, 1, 0);
  expect_decode_error(&m, "0 f32 values for a shape of", NULL);
  kiln_pb_free(&m);
  kiln_pb_free(&ins[0]);

  /* a tuple shape nested 150 deep */
  kiln_pb_t inner = {0};
  kiln_pb_i64(&inner, 2, 11);
  for (int i = 0; i < 150; i++) {
    kiln_pb_t outer = {0};
    kiln_pb_i64(&outer, 2, 13);
    kiln_pb_message(&outer, 4, &inner);
    kiln_pb_free(&inner);
    inner = outer;
  }
  memset(&ins[0], 0, sizeof ins[0]);
  kiln_pb_string(&ins[0], 1, "p");
  kiln_pb_string(&ins[0], 2, "parameter");
  kiln_pb_message(&ins[0], 3, &inner);
  kiln_pb_free(&inner);
  one_computation_module(&m, ins, 1, 0);
  expect_decode_error(&m, "nested deeper than 100", NULL);
  kiln_pb_free(&m);
  kiln_pb_free(&ins[0]);

  /* no computations; a length past the end */
  memset(&m, 0, sizeof m);
  kiln_pb_string(&m, 1, "m");
  expect_decode_error(&m, "module has no computations", NULL);
  kiln_pb_free(&m);
  uint8_t cut[] = {0x1a, 0x10, 0x0a, 0x01};
  kiln_hlo_module_t *t = NULL;
  kiln_status e = kiln_hlo_module_from_proto(cut, sizeof cut, &t);
  assert_non_null(e);
  assert_non_null(strstr(kiln_status_message(e), "HloModuleProto field 3 at byte 0"));
  kiln_status_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_module_decodes_to_the_same_module),
      cmocka_unit_test(test_sub_byte_integers_round_trip),
      cmocka_unit_test(test_with_config_returns_replicas_and_partitions),
      cmocka_unit_test(test_mesh_and_instruction_iota_groups_decode_to_their_groups),
      cmocka_unit_test(test_malformed_mesh_groups_are_errors),
      cmocka_unit_test(test_backend_config_payloads_decode_as_the_field_does),
      cmocka_unit_test(test_bytes_are_text_only_for_hlo_text),
      cmocka_unit_test(test_unknown_opcode_and_dangling_ids_name_the_instruction),
      cmocka_unit_test(test_malformed_fields_are_errors_and_unknown_fields_are_skipped),
      cmocka_unit_test(test_corpus_modules_round_trip_through_hlo_module_proto),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
