/* kiln's version, as the plugin reports it and as serialized executables and cache entries
 * record it (a blob or cache entry written by another version is foreign and not loaded).
 * Bump it whenever generated code or a serialized format changes meaning. */
#ifndef KILN_BASE_VERSION_H_
#define KILN_BASE_VERSION_H_

#define KILN_VERSION_STRING "0.15.0"

#endif /* KILN_BASE_VERSION_H_ */
