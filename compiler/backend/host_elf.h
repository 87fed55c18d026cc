/* kiln's own loader for the relocatable x86-64 ELF objects the host JIT compiles
 * (host_jit.h, kiln_host_jit_compile_object), without LLVM.
 *
 * Why: a cached executable (compiler/thunks/executable_cache.h) holds its kernels as object
 * files. Linking them with ORC in a fresh process costs ~2.7 ms of LLVM start-up (native
 * target initialization, an LLJIT with its target machines, the JIT linker, the first
 * lookup, each touching libLLVM's code for the first time); this loader maps the same
 * objects in microseconds.
 *
 * What it does (written from the ELF-64 object file format and the x86-64 psABI): checks the
 * ELF header (ELFCLASS64, little-endian, ET_REL, EM_X86_64) and every offset, size, index
 * and count against the bytes given; places the SHF_ALLOC sections of all objects in one
 * anonymous mapping, code first, then read-only data and a GOT, then writable data (NOBITS
 * zeroed); resolves each symbol (a section's address + value, SHN_ABS, an undefined one:
 * first the global definitions of the objects loaded together, then `resolve`, e.g. the
 * process as the ORC JIT's process-symbol generator sees it; _GLOBAL_OFFSET_TABLE_ is the
 * GOT); applies RELA relocations R_X86_64_NONE, 64, PC32, PLT32, GOTPCREL, GOTPCRELX,
 * REX_GOTPCRELX, 32, 32S, PC64, GOTOFF64, GOTPC32, GOT64, GOTPCREL64, GOTPC64 and PLTOFF64
 * (a call to a symbol outside the mapping goes through a 6-byte `jmp *GOT(%rip)` stub in the
 * mapping, so it reaches any address; the GOT holds absolute addresses, filled eagerly);
 * then makes code read+execute, read-only data and the GOT read-only, and registers each
 * object's unwind table (.eh_frame, given a zero terminator) with the unwinder through
 * __register_frame, as ORC does (deregistered when the image goes).
 *
 * What it refuses with KILN_UNIMPLEMENTED, naming it (callers then link with ORC, which
 * handles all of these; kiln's host codegen produces none of them today): another machine,
 * class or byte order, SHT_REL, other relocation types, TLS sections, section groups
 * (COMDAT), init/fini arrays, SHN_COMMON and extended section indices, alignments over
 * a page, a PC-relative 32-bit relocation that does not reach its target, unwind tables in a
 * process without __register_frame, a non-x86-64 or non-Linux host. Malformed bytes (truncated,
 * offsets or indices out of range, a relocation outside its section) are KILN_INVALID_ARGUMENT; an
 * undefined symbol nobody defines is KILN_NOT_FOUND naming it. Never a crash: every read is
 * bounds-checked, every write lands inside the mapping.
 *
 * Thread-safety: a loaded image is immutable; lookups from several threads are fine. */
#ifndef KILN_COMPILER_BACKEND_HOST_ELF_H_
#define KILN_COMPILER_BACKEND_HOST_ELF_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_host_elf kiln_host_elf_t;

/* Address of an external symbol `name`, or NULL when there is none. */
typedef void *(*kiln_host_elf_resolver_t)(void *user, const char *name);

/* The process's symbols as ORC's process-symbol generator finds them (dlsym on the handle of
 * the main program: the global scope). `user` is ignored. */
void *kiln_host_elf_process_symbol(void *user, const char *name);

/* Loads `n` objects (objects[i] of sizes[i] bytes; read, not kept) into one image. Global
 * symbols defined twice are KILN_ALREADY_EXISTS. `resolve` NULL: kiln_host_elf_process_symbol.
 * *out is the caller's (kiln_host_elf_destroy). */
kiln_status kiln_host_elf_load(const void *const *objects, const size_t *sizes, int n,
                               kiln_host_elf_resolver_t resolve, void *user, kiln_host_elf_t **out);

/* Address of the global (or weak) symbol `name` defined by the image's objects; NOT_FOUND
 * naming it otherwise. */
kiln_status kiln_host_elf_lookup(const kiln_host_elf_t *img, const char *name, void **out_addr);

/* Bytes mapped for the image (code, data, GOT and stubs, page-rounded). */
size_t kiln_host_elf_mapped_bytes(const kiln_host_elf_t *img);

/* Unmaps the image. NULL is ignored. */
void kiln_host_elf_destroy(kiln_host_elf_t *img);

#endif /* KILN_COMPILER_BACKEND_HOST_ELF_H_ */
