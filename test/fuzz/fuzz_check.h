// Shared by the libFuzzer targets: SPARK_FUZZ_CHECK, an invariant that must hold for every input.
// A violation prints what broke and aborts, which libFuzzer records as a crash (with the input
// saved). No dependencies (fuzz_gemma_config does not link the runtime).
#ifndef SPARK_TEST_FUZZ_FUZZ_CHECK_H_
#define SPARK_TEST_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define SPARK_FUZZ_CHECK(condition)                                                 \
  do {                                                                              \
    if (!(condition)) {                                                             \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, \
                   #condition);                                                     \
      std::abort();                                                                 \
    }                                                                               \
  } while (false)

#endif  // SPARK_TEST_FUZZ_FUZZ_CHECK_H_
