/* CUDA toolkit discovery and the nvJitLink loader (PTX -> cubin without a driver).
 *
 * Nothing here needs the CUDA toolkit at build time: nvJitLink is dlopen'ed and its entry
 * points are resolved through an X-macro symbol table with prototypes declared here, so the
 * build works on machines without CUDA. A missing library is UNAVAILABLE with every path
 * that was tried. */
#ifndef KILN_COMPILER_BACKEND_NVJITLINK_H_
#define KILN_COMPILER_BACKEND_NVJITLINK_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "base/str.h"

/* ---- CUDA toolkit directories ---------------------------------------------------------- */

#define KILN_CUDA_MAX_DIRS 16

/* Where the CUDA toolkit is looked for, and where its tools work. Options only: the edges
 * (plugin/env_options.h) fill them from $KILN_CUDA_DIR, $CUDA_HOME, $CUDA_PATH, $PATH and
 * $TMPDIR. All fields optional; a zeroed struct gives the standard search. Borrowed. */
typedef struct kiln_cuda_search {
  const char *dir;       /* the toolkit root to use, alone (replaces the search) */
  const char *home;      /* searched first, when it exists ($CUDA_HOME) */
  const char *path;      /* then this, when it exists ($CUDA_PATH) */
  const char *exec_path; /* ':'-separated folders where ptxas is looked for first, unless
                            `dir` is set ($PATH); NULL: only the toolkit roots */
  const char *tmp_dir;   /* the folder for ptxas's scratch files; NULL: /tmp */
} kiln_cuda_search_t;

typedef struct kiln_cuda_dirs {
  char *dirs[KILN_CUDA_MAX_DIRS]; /* candidate toolkit roots, in search order */
  size_t count;
  /* True when the directory came from an override (kiln_cuda_search_t.dir): then only that
   * directory is searched — no PATH lookup for ptxas, no bare-soname dlopen. */
  bool explicit_dir;
} kiln_cuda_dirs_t;

/* Fills `out` with the toolkit roots to search (`search` may be NULL: the defaults).
 * search->dir replaces the search; otherwise: search->home, search->path, /usr/local/cuda,
 * /usr/local/cuda-13* and /usr/local/cuda-12* (newest first), /usr/lib/cuda — those that
 * exist, without duplicates. Free with kiln_cuda_dirs_free. */
void kiln_cuda_dirs_find(const kiln_cuda_search_t *search, kiln_cuda_dirs_t *out);
void kiln_cuda_dirs_free(kiln_cuda_dirs_t *dirs);

/* Finds `<root>/<rel>` in the first root where it is a regular file. Returns a heap path
 * (kiln_free) or NULL; each path tried is appended to `tried` (", "-separated) when given. */
char *kiln_cuda_dirs_find_file(const kiln_cuda_dirs_t *dirs, const char *rel, kiln_strbuf_t *tried);

/* ---- nvJitLink --------------------------------------------------------------------------- */

typedef struct kiln_nvjitlink kiln_nvjitlink_t;

/* Loads libnvJitLink once per process for each distinct search (cached; never unloaded).
 * Tries the sonames libnvJitLink.so.13, .so.12, .so through the dynamic loader (unless the
 * search is explicit), then `<root>/lib64/` and `<root>/lib/` of each toolkit root. On
 * failure: UNAVAILABLE listing each path with its dlerror(). */
kiln_status kiln_nvjitlink_load(const kiln_cuda_dirs_t *dirs, const kiln_nvjitlink_t **out);

/* The path the library was loaded from. Borrowed. */
const char *kiln_nvjitlink_path(const kiln_nvjitlink_t *lib);

/* Compiles PTX text for `arch` ("sm_90") into a cubin. On success *cubin (kiln_free) and
 * *cubin_size are set. *log (kiln_free, may be NULL) receives nvJitLink's error and info
 * logs whether or not it succeeded. When nvJitLink rejected the PTX itself (PTX compile
 * errors, wrong arch) the status is INVALID_ARGUMENT and *ptx_rejected is true — running
 * ptxas would not help; other failures are INTERNAL. */
kiln_status kiln_nvjitlink_ptx_to_cubin(const kiln_nvjitlink_t *lib, const char *ptx,
                                        size_t ptx_len, const char *arch, void **cubin,
                                        size_t *cubin_size, char **log, bool *ptx_rejected);

#endif /* KILN_COMPILER_BACKEND_NVJITLINK_H_ */
