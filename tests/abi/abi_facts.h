/* One ABI fact (a size, an offset, an enum value) as measured by a translation unit compiled
 * against one header: kiln's (abi_facts_kiln.c) or OpenXLA's (abi_facts_upstream.c). Both
 * expand the same lists, abi_pjrt.def and abi_ffi.def, so the tables line up entry by entry
 * and test_abi_layout compares them. */
#ifndef KILN_TESTS_ABI_FACTS_H_
#define KILN_TESTS_ABI_FACTS_H_

#include <stddef.h>

typedef enum {
  KILN_ABI_TYPE_SIZE,   /* a = sizeof, b = alignment */
  KILN_ABI_MEMBER,      /* a = offsetof, b = sizeof the member */
  KILN_ABI_STRUCT_SIZE, /* a = the *_STRUCT_SIZE constant */
  KILN_ABI_VALUE,       /* a = an enumerator's or version macro's value */
  KILN_ABI_API_SLOT,    /* a = offsetof in PJRT_Api, b = sizeof, slot = index */
} kiln_abi_fact_kind;

typedef struct {
  kiln_abi_fact_kind kind;
  const char *name;
  long long a, b;
  int slot;
} kiln_abi_fact;

typedef struct {
  const kiln_abi_fact *facts;
  size_t count;
} kiln_abi_table;

/* The tables, per API and per side. The upstream ones exist only when ../shared/abi was
 * found at configure time (KILN_ABI_HAVE_UPSTREAM). */
extern const kiln_abi_table kiln_abi_pjrt_kiln, kiln_abi_ffi_kiln;
extern const kiln_abi_table kiln_abi_pjrt_upstream, kiln_abi_ffi_upstream;

#endif /* KILN_TESTS_ABI_FACTS_H_ */
