// --web.config.file (http/web_config.h ParseWebConfig): exporter-toolkit's
// format, TLS settings, bcrypt basic-auth users, headers, rate limit. A
// refused file says why. Files the config names are read relative to a
// scratch directory holding nothing; inputs naming /dev, /proc or /sys are
// skipped (reading /dev/zero never ends: a config naming it is the
// operator's doing, not a parser bug).

#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "http/web_config.h"

namespace {
constexpr const char* kTarget = "web_config_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  for (std::string_view dev : {"/dev", "/proc", "/sys"}) {
    if (yaml.find(dev) != std::string_view::npos) return -1;  // not added to the corpus
  }
  auto c = trainwatch::http::ParseWebConfig(yaml, trainwatch::fuzz::ScratchDir());
  if (!c.ok()) {
    FUZZ_CHECK_ERROR(c.error());
    return 0;
  }
  for (const auto& [user, hash] : c->users) {
    FUZZ_CHECK(hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$"),
               "accepted a password hash that is not bcrypt: " + hash);
  }
  FUZZ_CHECK(c->rate_limit_interval_ms >= 0, "negative rate-limit interval");
  return 0;
}
