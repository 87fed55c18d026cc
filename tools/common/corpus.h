/* Facts about the shared HLO corpus that several tests need. */
#ifndef KILN_TOOLS_CORPUS_H_
#define KILN_TOOLS_CORPUS_H_

#include <stddef.h>

/* A module of XLA's test inputs that XLA's own verifier would reject too (the tests that
 * hold them run without it). kiln must parse and round-trip it, and its verifier must
 * reject it with a message containing `message_part`. */
typedef struct kiln_corpus_invalid {
  const char *file_suffix;
  int module; /* index of the module in a multi-module file */
  const char *message_part;
  const char *why;
} kiln_corpus_invalid_t;

const kiln_corpus_invalid_t *kiln_corpus_invalid_list(size_t *out_n);
/* The entry for module `module` of the file at `path`, or NULL. */
const kiln_corpus_invalid_t *kiln_corpus_find_invalid(const char *path, int module);

/* Sampling for slow builds: true for about one module name in kiln_corpus_sample_rate(
 * KILN_CORPUS_ASAN_SAMPLE) (chosen by a hash of the name, so the same ones every run): one in
 * KILN_CORPUS_SAMPLE=N when that is set, one in KILN_CORPUS_ASAN_SAMPLE in an ASan build,
 * otherwise every one. Keeps corpus-wide tests within CI's time budget under ASan/UBSan
 * while the normal build runs them whole. */
#include <stdbool.h>
#define KILN_CORPUS_ASAN_SAMPLE 4
bool kiln_corpus_sampled(const char *name);
/* True when kiln_corpus_sampled leaves modules out (tests then relax their count floors). */
bool kiln_corpus_sampling(void);

/* True in a build of the testing library with AddressSanitizer (a Debug build several times
 * slower than the normal one), where corpus-wide tests sample by default. */
bool kiln_corpus_under_asan(void);
/* The sampling rate a corpus-wide test uses: KILN_CORPUS_SAMPLE when set (1 = everything),
 * else `asan_rate` under AddressSanitizer, else 1. */
long kiln_corpus_sample_rate(long asan_rate);
/* True for about one module name in `rate` (the same hash as kiln_corpus_sampled). */
bool kiln_corpus_sampled_at(const char *name, long rate);

/* Every module of every file in folder `dir` (sorted by file name; .md and .tsv files are
 * skipped): calls fn(ctx, m, name, path, index) with the parsed module (the callee may keep
 * or destroy it; set *m to NULL when it took it), name = "<label>/<file>[#<index>]". A file
 * that does not parse calls fn with m = NULL and `error` set (the callee must not free it). */
#include "base/hashmap.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
typedef void (*kiln_corpus_module_fn)(void *ctx, kiln_hlo_module_t **m, const char *name,
                                      const char *path, int index, kiln_status error);
kiln_status kiln_corpus_for_each_module(const char *dir, const char *label,
                                        kiln_corpus_module_fn fn, void *ctx);
/* kiln_corpus_for_each_module over the whole-module folders of the corpus at `root` (NULL:
 * kiln_corpus_dir()): xla/ then real/, labelled "xla" and "real". */
kiln_status kiln_corpus_for_each_whole_module(const char *root, kiln_corpus_module_fn fn, void *ctx);

/* Modules seen so far, by canonical text (several corpus files hold the same module). */
typedef struct kiln_corpus_repeats {
  kiln_hashmap_t seen; /* canonical text -> first module's name (owned) */
} kiln_corpus_repeats_t;
void kiln_corpus_repeats_init(kiln_corpus_repeats_t *r);
void kiln_corpus_repeats_free(kiln_corpus_repeats_t *r);
/* The name of an earlier module with m's canonical text (kiln_hlo_module_to_string), or
 * NULL after remembering m's text under `name`. */
const char *kiln_corpus_repeat_of(kiln_corpus_repeats_t *r, const kiln_hlo_module_t *m, const char *name);

#endif /* KILN_TOOLS_CORPUS_H_ */
