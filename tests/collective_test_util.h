/* The collective deadline of test runs in which every participant arrives (SPMD evaluator
 * runs, host-device runs, the fake NCCL of tests/fake_nccl): 120 s. A deadline counts from
 * the first participant's arrival, so it must outlast the longest stretch between two
 * collectives on the slowest machine that runs the tests: CI's 2 cores under ASan with
 * ctest -j2, where the SPMD evaluator of the corpus's model_par_2d module takes 37 s on 8
 * participants (session 13's CI log), and where one participant descheduled for a while would
 * otherwise fail a run that is right. The tests of the deadline itself (a participant that
 * never arrives) keep their short timeouts; the ctest TIMEOUT of these executables (300-900 s)
 * still ends a real hang. */
#ifndef KILN_TESTS_COLLECTIVE_TEST_UTIL_H_
#define KILN_TESTS_COLLECTIVE_TEST_UTIL_H_

#define KILN_TEST_COLLECTIVE_TIMEOUT_MS 120000

#endif /* KILN_TESTS_COLLECTIVE_TEST_UTIL_H_ */
