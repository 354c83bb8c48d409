#pragma once
// Helpers shared by the libFuzzer targets (fuzz/*_fuzz.cc, docs/fuzzing.md).

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch::fuzz {

// A broken invariant found by a fuzz target: prints what and aborts, which
// libFuzzer reports as a crash and saves the input.
[[noreturn]] inline void Fail(const char* target, std::string_view what) {
  std::fprintf(stderr, "%s: invariant broken: %.*s\n", target, static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, what)                                   \
  do {                                                           \
    if (!(cond)) ::trainwatch::fuzz::Fail(kTarget, (what));      \
  } while (0)

// A failed Status must explain itself.
#define FUZZ_CHECK_ERROR(status)                                                            \
  do {                                                                                      \
    const ::trainwatch::Status& fuzz_s_ = (status);                                         \
    FUZZ_CHECK(!fuzz_s_.ok(), "BUG in harness: FUZZ_CHECK_ERROR on OK");                    \
    FUZZ_CHECK(!fuzz_s_.message().empty(), "error without a message: " + fuzz_s_.ToString()); \
  } while (0)

// A private scratch directory for targets whose entry point reads files
// (created once per process under $TMPDIR, removed at exit).
const std::string& ScratchDir();
// Replaces the file `path` with `data`; aborts when it cannot (not the input's fault).
void WriteScratchFile(const std::string& path, std::string_view data);

}  // namespace trainwatch::fuzz
