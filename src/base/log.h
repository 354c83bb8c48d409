#pragma once
// Minimal leveled logging to stderr: `TW_LOG(Info, "cut block {} in {} ms", id, ms)`.
// Thread-safe: each line is written with one fwrite. The level is process-wide
// and set once at start-up by app/.

#include <fmt/format.h>

#include <string_view>

namespace trainwatch::log {

enum class Level { kDebug = 0, kInfo, kWarn, kError };

void SetLevel(Level level);
Level GetLevel();
// Parses "debug", "info", "warn", "error"; returns false for anything else.
bool ParseLevel(std::string_view s, Level* out);
void Write(Level level, std::string_view msg);

}  // namespace trainwatch::log

#define TW_LOG(lvl, ...)                                                          \
  do {                                                                            \
    if (::trainwatch::log::Level::k##lvl >= ::trainwatch::log::GetLevel())        \
      ::trainwatch::log::Write(::trainwatch::log::Level::k##lvl, fmt::format(__VA_ARGS__)); \
  } while (0)
