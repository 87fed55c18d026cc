/* Serialized executables: a kiln_executable_desc_t as bytes, for the whole-executable cache
 * (compiler/thunks/executable_cache.h) and the plugin's Serialize / DeserializeAndLoad.
 *
 * Format (every integer little-endian, written field by field; version
 * KILN_EXEC_FORMAT_VERSION):
 *   header   "KILNEXE\0", u32 format version, u32 0, u64 payload length, u64[2] the payload's
 *            128-bit hash (base/hash.h), then kiln's version string (u32 length + bytes);
 *   payload  the name; the allocations (kind, size, parameter, donated, a constant's bytes);
 *            the parameter sizes; the output slices; the images (a cubin / PTX as bytes, or a
 *            host image: its function names, each function's object, the object files with
 *            their symbols); the thunk tree, each thunk as its kind, name and fields, child
 *            sequences nested (kernel: module index, kernel name, launch dims, arguments;
 *            copy; memset; gemm: the whole gemm description, its epilogue and its bias slice
 *            (format 2); custom call: target, the compiler's recipe, operand and result
 *            slices; while; conditional; sequential; command buffer; collective (format 2):
 *            op, reduction, phase (format 3: whole, async start or done), the world it was
 *            resolved for, each operand's slices, type and
 *            counts, and each participant's group key, rank, group size and permute source).
 * Strings and byte runs are a u32/u64 length then the bytes. Custom calls are written as
 * their target and recipe (kiln_thunk_custom_call_set_recipe): the function pointers and
 * contexts are made again by the caller's resolver when read (e.g. the FFI handler looked
 * up in the registry). Host images are written as object files: reading leaves their
 * function pointers NULL and the objects in image_objects, for the caller to link.
 *
 * Reading checks everything before it trusts it: magic, format version, kiln's version, the
 * length and the hash of the payload, every count against the bytes left, every enum, the
 * nesting depth (KILN_EXEC_MAX_DEPTH), module indices, slices against the allocations, a
 * gemm's epilogue and bias (kiln_gemm_desc_check), a collective's group table and counts
 * (kiln_coll_thunk_desc_check), and that the payload ends where it should. Any mismatch is
 * INVALID_ARGUMENT (DATA_LOSS for a hash mismatch or a truncation; FAILED_PRECONDITION for another
 * version) naming what was wrong, never a crash: callers treat it as a cache miss and compile.
 *
 * Thread-safety: thread-safe (no shared state; the description is only read). */
#ifndef KILN_RUNTIME_EXECUTABLE_SERIALIZE_H_
#define KILN_RUNTIME_EXECUTABLE_SERIALIZE_H_

#include <stddef.h>

#include "base/status.h"
#include "runtime/executable.h"

#define KILN_EXEC_FORMAT_VERSION                                 \
  4u /* 2: gemm epilogues and bias, collectives; 3: their phase; \
      4: built-in custom calls' views carry their element size */
#define KILN_EXEC_MAX_DEPTH 64

/* Serializes `d` into *out (kiln_malloc'ed; the caller frees it) / *len. UNIMPLEMENTED when
 * something cannot be written: a custom call without a recipe, a copy with a host pointer,
 * a host image without its objects. Custom calls rebuilt by the compiler's resolver get their
 * command-buffer form again (an FFI handler registered command-buffer compatible is recorded
 * inside command buffers after a read as after a compile). */
kiln_status kiln_executable_desc_serialize(const kiln_executable_desc_t *d, void **out,
                                           size_t *len);

/* Makes a custom-call thunk again from what kiln_executable_desc_serialize wrote: its name,
 * target, recipe and slices. The resolver creates the thunk (its contexts owned by `d`, the
 * description being read) in *out; an error fails the read. */
typedef kiln_status (*kiln_exec_custom_call_resolver_fn)(
    void *user, kiln_executable_desc_t *d, const char *name, const char *target, const void *recipe,
    size_t recipe_len, const kiln_slice_t *operands, int num_operands, const kiln_slice_t *results,
    int num_results, kiln_thunk_t **out);

/* Reads `len` bytes of `data` into a new description in *out (the caller owns it). Custom
 * calls go through `resolve` (NULL: a serialized custom call is UNIMPLEMENTED). Host images'
 * functions are NULL, their objects in (*out)->image_objects. */
kiln_status kiln_executable_desc_deserialize(const void *data, size_t len,
                                             kiln_exec_custom_call_resolver_fn resolve, void *user,
                                             kiln_executable_desc_t **out);

/* Recomputes the payload checksum of serialized bytes in place (nothing when the header is
 * not there): for tests and fuzzers that edit the payload so the edits reach the structure
 * checks behind the checksum. */
void kiln_executable_blob_reseal(void *data, size_t len);

#endif /* KILN_RUNTIME_EXECUTABLE_SERIALIZE_H_ */
