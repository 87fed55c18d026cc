/* The plugin's serialized executable (PJRT_Executable_Serialize / DeserializeAndLoad,
 * pjrt_compile.c): a header (magic "KILNEXE1", the blob format's version, kiln's version, the
 * lengths of the parts and a 128-bit checksum of them), then the serialized compile options,
 * then the optimized module's text.
 *
 * The checksum guards against accidents (a truncated or altered file), not against a hostile
 * writer: anyone can compute it. So the loader also checks the text as a module the passes
 * made (pjrt_compile.c, load_optimized); these two functions write blobs the way such a
 * writer would, for the fuzzer (fuzz/fuzz_pjrt_deserialize.c) and the tests. */
#ifndef KILN_PLUGIN_PJRT_BLOB_H_
#define KILN_PLUGIN_PJRT_BLOB_H_

#include <stdbool.h>
#include <stddef.h>

/* A sealed blob of `options` (ol bytes) and `text` (tl bytes), kiln_malloc'd (the caller
 * kiln_free's it); its size in *n. Serialize writes its blobs with this. */
char *kiln_pjrt_blob_make(const char *options, size_t ol, const char *text, size_t tl, size_t *n);

/* Recomputes the checksum of the `n`-byte blob in place when its header is whole and its
 * lengths add up to `n` (returns true); else leaves it alone and returns false. */
bool kiln_pjrt_blob_reseal(void *blob, size_t n);

#endif /* KILN_PLUGIN_PJRT_BLOB_H_ */
