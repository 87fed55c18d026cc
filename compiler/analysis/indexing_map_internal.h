/* Helpers shared by the indexing-map files; not part of the public API. */
#ifndef KILN_COMPILER_ANALYSIS_INDEXING_MAP_INTERNAL_H_
#define KILN_COMPILER_ANALYSIS_INDEXING_MAP_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>

/* An identifier ([A-Za-z_][A-Za-z0-9_]*) that is not a keyword of the map syntax. */
bool kiln_indexing_name_is_valid(const char *s, size_t n);

#endif /* KILN_COMPILER_ANALYSIS_INDEXING_MAP_INTERNAL_H_ */
