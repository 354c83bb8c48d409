#pragma once
// Server time, in the units the TSDB uses (milliseconds), and monotonic time
// for measuring durations.
//
// Server time is the system clock, unless the clock is warped (serve
// --debug.clock-speed, for the soak benchmark and long-run tests): it then
// reads `start_ms` at the real instant `origin_ms` and runs `speed` times
// faster, so a month passes in an hour. Every timestamp the server takes goes
// through NowMillis, and every periodic wait (scrape, collectors, rules,
// maintenance, heartbeat checks, the notifier) through RealWait, so the
// server behaves at speed 720 as it does at speed 1, 720 times as often.
// Network timeouts, fsync intervals and retry backoffs stay in real time.

#include <chrono>
#include <cstdint>

namespace trainwatch {

// Monotonic nanoseconds, for measuring durations.
inline int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace clock_internal {
struct Warp {
  bool on = false;
  double speed = 1;
  int64_t start_ns = 0;       // server time (unix ns) at mono_origin_ns
  int64_t mono_origin_ns = 0;
};
// Written once by WarpClock before any other thread starts; read-only after.
inline Warp warp;

inline int64_t SystemNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace clock_internal

// Warps server time: it reads `start_ms` when the system clock reads
// `origin_ms` (both unix ms; two processes given the same pair agree) and
// runs `speed` (> 0) times faster than real time. Call before starting any
// thread that reads the clock.
inline void WarpClock(int64_t start_ms, int64_t origin_ms, double speed) {
  using namespace clock_internal;
  int64_t mono = MonoNanos();
  // The real instant origin_ms, on the monotonic clock.
  int64_t mono_origin = mono - (SystemNanos() - origin_ms * 1'000'000);
  warp = Warp{true, speed, start_ms * 1'000'000, mono_origin};
}

inline bool ClockWarped() { return clock_internal::warp.on; }
inline double ClockSpeed() { return clock_internal::warp.speed; }

// Server time in unix nanoseconds.
inline int64_t NowNanos() {
  using namespace clock_internal;
  if (!warp.on) return SystemNanos();
  return warp.start_ns + static_cast<int64_t>(static_cast<double>(MonoNanos() - warp.mono_origin_ns) * warp.speed);
}

// Server time in unix milliseconds.
inline int64_t NowMillis() { return NowNanos() / 1'000'000; }

// The real duration in which `server_ms` of server time pass (at least 1 ms
// when server_ms > 0, so a fast clock never turns a wait into a busy loop).
inline std::chrono::milliseconds RealWait(int64_t server_ms) {
  using namespace clock_internal;
  if (!warp.on || server_ms <= 0) return std::chrono::milliseconds(server_ms);
  auto ms = static_cast<int64_t>(static_cast<double>(server_ms) / warp.speed);
  return std::chrono::milliseconds(ms < 1 ? 1 : ms);
}

// The steady-clock instant at which server time reaches `server_ns`.
inline std::chrono::steady_clock::time_point SteadyAt(int64_t server_ns) {
  using namespace clock_internal;
  int64_t delta = server_ns - NowNanos();
  if (warp.on) delta = static_cast<int64_t>(static_cast<double>(delta) / warp.speed);
  return std::chrono::steady_clock::now() + std::chrono::nanoseconds(delta);
}

}  // namespace trainwatch
