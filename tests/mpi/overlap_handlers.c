/* Legacy custom-call handlers (api_version 2, status returning) for tests/mpi/overlap.sh, built
 * as a library kiln-run loads with --ffi: a gate that holds replica 1 until a flag file exists,
 * and a signal that creates it. $KILN_TEST_FLAG names the file. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct XlaCustomCallStatus_ XlaCustomCallStatus;
void XlaCustomCallStatusSetFailure(XlaCustomCallStatus *status, const char *message,
                                   size_t message_len);

#define EXPORT __attribute__((visibility("default")))

/* out = in[0] (f32[8]); on replica in[1] != 0, first waits (at most 20 s) for the flag. */
EXPORT void kiln_mpi_test_gate(void *out, const void **in, XlaCustomCallStatus *status) {
  const char *flag = getenv("KILN_TEST_FLAG");
  uint32_t id = *(const uint32_t *)in[1];
  for (int i = 0; id != 0 && flag && access(flag, F_OK) != 0; i++) {
    if (i == 20000) {
      static const char kMsg[] = "replica 0 never ran the work after its all-reduce-start";
      XlaCustomCallStatusSetFailure(status, kMsg, sizeof kMsg - 1);
      return;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  memcpy(out, in[0], 8 * sizeof(float));
}

/* out = in[0] (f32[8]); creates the flag file. */
EXPORT void kiln_mpi_test_signal(void *out, const void **in, XlaCustomCallStatus *status) {
  const char *flag = getenv("KILN_TEST_FLAG");
  FILE *f = flag ? fopen(flag, "w") : NULL;
  if (!f) {
    static const char kMsg[] = "cannot create $KILN_TEST_FLAG";
    XlaCustomCallStatusSetFailure(status, kMsg, sizeof kMsg - 1);
    return;
  }
  fclose(f);
  memcpy(out, in[0], 8 * sizeof(float));
}
