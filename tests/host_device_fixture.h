/* The cmocka group fixture of tests that run on one host device: `g_dev`, created by
 * host_device_setup and destroyed by host_device_teardown. */
#ifndef KILN_TESTS_HOST_DEVICE_FIXTURE_H_
#define KILN_TESTS_HOST_DEVICE_FIXTURE_H_

#include <stdio.h>

#include "runtime/device.h"

static kiln_device_t *g_dev;

static int host_device_setup(void **state) {
  (void)state;
  kiln_status s = kiln_device_create("host", &g_dev);
  if (s) {
    fprintf(stderr, "no host device: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return -1;
  }
  return 0;
}

static int host_device_teardown(void **state) {
  (void)state;
  kiln_device_destroy(g_dev);
  return 0;
}

#endif /* KILN_TESTS_HOST_DEVICE_FIXTURE_H_ */
