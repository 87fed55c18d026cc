/* Element types: PJRT_Buffer_Type's numbering <-> kiln's (pjrt_internal.h). */
#include "plugin/pjrt_internal.h"

/* X(PJRT suffix, kiln suffix): the types both sides have. */
#define KILN_PJRT_TYPES(X)        \
  X(PRED, PRED)                   \
  X(S1, S1)                       \
  X(S2, S2)                       \
  X(S4, S4)                       \
  X(S8, S8)                       \
  X(S16, S16)                     \
  X(S32, S32)                     \
  X(S64, S64)                     \
  X(U1, U1)                       \
  X(U2, U2)                       \
  X(U4, U4)                       \
  X(U8, U8)                       \
  X(U16, U16)                     \
  X(U32, U32)                     \
  X(U64, U64)                     \
  X(F16, F16)                     \
  X(BF16, BF16)                   \
  X(F32, F32)                     \
  X(F64, F64)                     \
  X(C64, C64)                     \
  X(C128, C128)                   \
  X(F8E5M2, F8E5M2)               \
  X(F8E4M3, F8E4M3)               \
  X(F8E4M3FN, F8E4M3FN)           \
  X(F8E4M3B11FNUZ, F8E4M3B11FNUZ) \
  X(F8E5M2FNUZ, F8E5M2FNUZ)       \
  X(F8E4M3FNUZ, F8E4M3FNUZ)       \
  X(F8E3M4, F8E3M4)               \
  X(F8E8M0FNU, F8E8M0FNU)         \
  X(F4E2M1FN, F4E2M1FN)           \
  X(TOKEN, TOKEN)

bool kiln_pjrt_type_to_elem(PJRT_Buffer_Type t, kiln_elem_type_t *out) {
  switch (t) {
#define X(p, k)              \
  case PJRT_Buffer_Type_##p: \
    *out = KILN_##k;         \
    return true;
    KILN_PJRT_TYPES(X)
#undef X
    default:
      return false;
  }
}

bool kiln_pjrt_type_from_elem(kiln_elem_type_t e, PJRT_Buffer_Type *out) {
  switch (e) {
#define X(p, k)                  \
  case KILN_##k:                 \
    *out = PJRT_Buffer_Type_##p; \
    return true;
    KILN_PJRT_TYPES(X)
#undef X
    default:
      return false;
  }
}

size_t kiln_pjrt_type_bytes(PJRT_Buffer_Type t) {
  kiln_elem_type_t e;
  if (!kiln_pjrt_type_to_elem(t, &e)) return 0;
  return kiln_elem_type_storage_bytes(e);
}

const char *kiln_pjrt_type_name(PJRT_Buffer_Type t) {
  kiln_elem_type_t e;
  if (!kiln_pjrt_type_to_elem(t, &e)) return "unsupported";
  return kiln_elem_type_name(e);
}
