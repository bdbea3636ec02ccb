// HZ_CHECK: programmer-error assertions that abort with file:line. Never used for bad input.
#pragma once

#include <cstdio>
#include <cstdlib>

#define HZ_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#define HZ_CHECK_MSG(cond, msg)                                                               \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, msg); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

#ifndef NDEBUG
#define HZ_DCHECK(cond) HZ_CHECK(cond)
#else
#define HZ_DCHECK(cond) \
  do {                  \
  } while (0)
#endif
