// Compile-only check (C++17, run by ctest when g++ is installed): every member, table slot
// and typedef of kiln's public headers has the same type as in OpenXLA's, not just the same
// offset and size. An int where OpenXLA has a float, a lost const, or a callback with other
// parameters fails to compile, naming the member.
//
// C++ namespaces let both headers live in one translation unit: OpenXLA's in `up`, kiln's
// in `kn`. A type of `up` is translated into `kn` (up::PJRT_Buffer* -> kn::PJRT_Buffer*,
// through pointers, const and function types) and must then be exactly the `kn` type.
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

// Built without -pedantic: inside extern "C", g++ accepts OpenXLA's table members named
// like their types only then.
//
// The exported functions are extern "C": declared in two namespaces with different types
// they would clash, so each side's are renamed.
#define XLA_FFI_GetApi up_XLA_FFI_GetApi
namespace up {
#include "xla/ffi/api/c_api.h"
#include "xla/pjrt/c/pjrt_c_api.h"
#include "xla/pjrt/c/pjrt_c_api_ffi_extension.h"
}  // namespace up
#undef XLA_FFI_GetApi

#define XLA_FFI_GetApi kn_XLA_FFI_GetApi
#define GetPjrtApi kn_GetPjrtApi
#define KILN_ABI_SLOT(fn_type) fn_type* fn_type  // no `::` inside namespace kn
namespace kn {
#include "kiln/ffi_c_api.h"
#include "kiln/pjrt_c_api.h"
#include "kiln/pjrt_ffi_extension.h"
}  // namespace kn
#undef XLA_FFI_GetApi
#undef GetPjrtApi

namespace {

// up::X -> kn::X for every named struct and enum type; anything else is itself.
template <class T>
struct Named {
  using type = T;
};
#define KILN_ABI_MAP(t) \
  template <>           \
  struct Named<up::t> { \
    using type = kn::t; \
  };
#define S(t) KILN_ABI_MAP(t)
#define O(t) KILN_ABI_MAP(t)
#define F(t, m)
#define Z(t)
#define E(n)
#define SLOT(i, n)
#define T(t)
#include "tests/abi/abi_ffi.def"
#include "tests/abi/abi_pjrt.def"
#undef S
#undef O
#undef F
#undef Z
#undef E
#undef SLOT
#undef T

// Structural translation through pointers, const and function types.
template <class T>
struct Tr {
  using type = typename Named<T>::type;
};
template <class T>
struct Tr<T*> {
  using type = typename Tr<T>::type*;
};
template <class T>
struct Tr<const T> {
  using type = const typename Tr<T>::type;
};
template <class R, class... A>
struct Tr<R(A...)> {
  using type = typename Tr<R>::type(typename Tr<A>::type...);
};

template <class Up, class Kn>
constexpr bool kSameType = std::is_same<typename Tr<Up>::type, Kn>::value;

#define S(t)
#define O(t)
#define Z(t)
#define E(n)
#define F(t, m)                                                    \
  static_assert(kSameType<decltype(up::t::m), decltype(kn::t::m)>, \
                "member " #t "." #m " has another type in kiln's header");
#define SLOT(i, n)                                                               \
  static_assert(kSameType<decltype(up::PJRT_Api::n), decltype(kn::PJRT_Api::n)>, \
                "PJRT_Api slot " #i " (" #n ") has another type in kiln's header");
#define T(t) \
  static_assert(kSameType<up::t, kn::t>, "typedef " #t " is another type in kiln's header");
#include "tests/abi/abi_ffi.def"
#include "tests/abi/abi_pjrt.def"

}  // namespace
