// What a fuzz target asserts beyond "no crash": a broken property aborts, so that libFuzzer keeps the
// input and the replay runner fails.
#pragma once

#include <cstdio>
#include <cstdlib>

#define VAPIPE_FUZZ_CHECK(condition, what)                                                  \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s (%s)\n", __FILE__, __LINE__, what, #condition);       \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)
