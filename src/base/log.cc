#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <ctime>
#include <string>

#include "base/clock.h"

namespace trainwatch::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};
const char* Name(Level l) {
  switch (l) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "?";
}
}  // namespace

void SetLevel(Level level) { g_level.store(level); }
Level GetLevel() { return g_level.load(std::memory_order_relaxed); }

bool ParseLevel(std::string_view s, Level* out) {
  if (s == "debug") *out = Level::kDebug;
  else if (s == "info") *out = Level::kInfo;
  else if (s == "warn") *out = Level::kWarn;
  else if (s == "error") *out = Level::kError;
  else return false;
  return true;
}

void Write(Level level, std::string_view msg) {
  int64_t ms = NowMillis();
  std::time_t secs = ms / 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line = fmt::format("ts={}.{:03d}Z level={} msg=\"{}\"\n", ts, static_cast<int>(ms % 1000), Name(level), msg);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace trainwatch::log
