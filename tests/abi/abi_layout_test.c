/* test_abi_layout: kiln's public headers (include/kiln/) are binary-compatible with
 * OpenXLA's PJRT C API 0.114, its FFI extension and the XLA FFI C API 0.4.
 *
 * abi_facts_kiln.c and abi_facts_upstream.c expand the same fact lists (abi_pjrt.def,
 * abi_ffi.def: every struct's size and alignment, every member's offset and size, every
 * *_STRUCT_SIZE constant, every enumerator, every PJRT_Api slot) against kiln's headers and
 * against ../shared/abi respectively; here the two tables are compared entry by entry and
 * the first difference is named. Without ../shared/abi at configure time the comparison
 * is skipped (exit 77), never passed silently. Same sizes do not mean same types:
 * abi_types_check.cc (ctest test_abi_types_cxx) compares those. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kiln/ffi_c_api.h"
#include "kiln/pjrt_c_api.h"
#include "kiln/pjrt_ffi_extension.h"
#include "tests/abi/abi_facts.h"

enum { KILN_PJRT_API_SLOTS = 138 };

#ifdef KILN_ABI_HAVE_UPSTREAM
static const char *fact_kind_name(kiln_abi_fact_kind kind) {
  switch (kind) {
    case KILN_ABI_TYPE_SIZE:
      return "sizeof/alignment";
    case KILN_ABI_MEMBER:
      return "offset/size";
    case KILN_ABI_STRUCT_SIZE:
      return "value";
    case KILN_ABI_VALUE:
      return "value";
    case KILN_ABI_API_SLOT:
      return "offset/size";
  }
  return "?";
}

/* Compares two tables built from the same list; prints every difference and fails naming
 * the first. */
static void assert_tables_agree(const char *api, const kiln_abi_table *kiln,
                                const kiln_abi_table *upstream) {
  assert_int_equal(kiln->count, upstream->count);
  size_t mismatches = 0;
  const kiln_abi_fact *first = NULL, *first_up = NULL;
  for (size_t i = 0; i < kiln->count; i++) {
    const kiln_abi_fact *k = &kiln->facts[i], *u = &upstream->facts[i];
    assert_string_equal(k->name, u->name);
    if (k->a == u->a && k->b == u->b) continue;
    if (mismatches++ == 0) first = k, first_up = u;
    fprintf(stderr, "%s ABI mismatch: %s %s: kiln %lld/%lld, upstream %lld/%lld\n", api, k->name,
            fact_kind_name(k->kind), k->a, k->b, u->a, u->b);
  }
  if (mismatches) {
    fail_msg("%zu %s ABI mismatch(es); first: %s %s kiln %lld/%lld vs upstream %lld/%lld",
             mismatches, api, first->name, fact_kind_name(first->kind), first->a, first->b,
             first_up->a, first_up->b);
  }
  printf("%s: %zu facts agree with the upstream header\n", api, kiln->count);
}

static void test_pjrt_layout_matches_upstream(void **state) {
  (void)state;
  assert_tables_agree("PJRT", &kiln_abi_pjrt_kiln, &kiln_abi_pjrt_upstream);
}

static void test_ffi_layout_matches_upstream(void **state) {
  (void)state;
  assert_tables_agree("FFI", &kiln_abi_ffi_kiln, &kiln_abi_ffi_upstream);
}
#endif /* KILN_ABI_HAVE_UPSTREAM */

/* The facts the abi README measured on x86-64, independent of the upstream header: the
 * table is 1144 bytes, its 138 slots follow the 40-byte header in order, one pointer
 * each. */
static void test_pjrt_api_table_has_138_slots_after_the_header(void **state) {
  (void)state;
  assert_int_equal(PJRT_API_MAJOR, 0);
  assert_int_equal(PJRT_API_MINOR, 114);
  assert_int_equal(offsetof(PJRT_Api, pjrt_api_version), 16);
  assert_int_equal(sizeof(PJRT_Api_Version), 24);
  int slots = 0;
  for (size_t i = 0; i < kiln_abi_pjrt_kiln.count; i++) {
    const kiln_abi_fact *f = &kiln_abi_pjrt_kiln.facts[i];
    if (f->kind != KILN_ABI_API_SLOT) continue;
    assert_int_equal(f->slot, slots);
    if (f->a != (long long)(40 + sizeof(void (*)(void)) * (size_t)slots)) {
      fail_msg("slot %d (%s) at offset %lld", slots, f->name, f->a);
    }
    assert_int_equal(f->b, sizeof(void (*)(void)));
    slots++;
  }
  assert_int_equal(slots, KILN_PJRT_API_SLOTS);
  assert_int_equal(sizeof(PJRT_Api), 40 + KILN_PJRT_API_SLOTS * sizeof(void (*)(void)));
  assert_int_equal(PJRT_Api_STRUCT_SIZE, sizeof(PJRT_Api));
  if (sizeof(void *) == 8) assert_int_equal(sizeof(PJRT_Api), 1144);
  assert_int_equal(PJRT_Extension_Type_FFI, 5);
  assert_int_equal(PJRT_API_FFI_EXTENSION_VERSION, 3);
}

static void test_ffi_api_table_is_200_bytes(void **state) {
  (void)state;
  assert_int_equal(XLA_FFI_API_MAJOR, 0);
  assert_int_equal(XLA_FFI_API_MINOR, 4);
  if (sizeof(void *) != 8) skip();
  assert_int_equal(sizeof(XLA_FFI_Api), 200);
  assert_int_equal(XLA_FFI_Api_STRUCT_SIZE, 200);
  assert_int_equal(XLA_FFI_CallFrame_STRUCT_SIZE, 168);
  assert_int_equal(XLA_FFI_DataType_BF16, 16);
  assert_int_equal(PJRT_Buffer_Type_BF16, 13);
  assert_int_equal(XLA_FFI_ExecutionStage_INSTANTIATE, 0);
  assert_int_equal(XLA_FFI_ExecutionStage_EXECUTE, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#ifdef KILN_ABI_HAVE_UPSTREAM
      cmocka_unit_test(test_pjrt_layout_matches_upstream),
      cmocka_unit_test(test_ffi_layout_matches_upstream),
#endif
      cmocka_unit_test(test_pjrt_api_table_has_138_slots_after_the_header),
      cmocka_unit_test(test_ffi_api_table_is_200_bytes),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
#ifndef KILN_ABI_HAVE_UPSTREAM
  if (!failed) {
    printf(
        "skipped: the comparison with OpenXLA's headers needs ../shared/abi, which was not "
        "found when kiln was configured\n");
    return 77;
  }
#endif
  return failed;
}
