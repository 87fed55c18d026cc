/* kiln/abi_macros.h: the few macros kiln's public C API headers (pjrt_c_api.h, ffi_c_api.h,
 * pjrt_ffi_extension.h) are written with. Not an API of its own. */
#ifndef KILN_ABI_MACROS_H_
#define KILN_ABI_MACROS_H_

#include <stddef.h>

/* Bytes of `type` up to and including `last_field`: what a caller that knows the struct up
 * to that member passes as `struct_size`. */
#define KILN_ABI_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* Declares the typedef of `struct sname` and the constant `sname##_STRUCT_SIZE`: the size of
 * the struct, as this header knows it, up to `last_field`. */
#define KILN_ABI_DEFINE_STRUCT_SIZE(sname, last_field) \
  typedef struct sname sname;                          \
  enum { sname##_STRUCT_SIZE = KILN_ABI_STRUCT_SIZE(sname, last_field) }

/* A member of an API table: a pointer to the function type of the same name. C++ needs the
 * type qualified, since inside the struct the member's name hides it (g++ -pedantic says so);
 * a C++ file that includes these headers inside a namespace defines KILN_ABI_SLOT(fn_type)
 * as `fn_type* fn_type` first. */
#ifndef KILN_ABI_SLOT
#ifdef __cplusplus
#define KILN_ABI_SLOT(fn_type) ::fn_type* fn_type
#else
#define KILN_ABI_SLOT(fn_type) fn_type* fn_type
#endif
#endif

/* The plugin is built with -fvisibility=hidden; its entry points are exported. */
#if defined(__GNUC__) || defined(__clang__)
#define KILN_ABI_EXPORT __attribute__((visibility("default")))
#else
#define KILN_ABI_EXPORT
#endif

#endif /* KILN_ABI_MACROS_H_ */
