#pragma once
// CHECK(cond, msg): a broken invariant aborts with a "BUG:" message. Never use
// it for user input; that is a Status.

#include <cstdio>
#include <cstdlib>

namespace trainwatch::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const char* msg);
}  // namespace trainwatch::internal

#define CHECK(cond, msg)                                                      \
  do {                                                                        \
    if (__builtin_expect(!(cond), 0))                                         \
      ::trainwatch::internal::CheckFailed(__FILE__, __LINE__, #cond, (msg));  \
  } while (0)
