#pragma once
// Wall and monotonic clocks in the units the TSDB uses (milliseconds).

#include <chrono>
#include <cstdint>

namespace trainwatch {

// Unix time in milliseconds.
inline int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// Monotonic nanoseconds, for measuring durations.
inline int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace trainwatch
