// trainwatch's YAML config, a prometheus.yml plus the `trainwatch:` section
// (app/config.h ParseConfig, which also validates remote_write:), then the
// scrape_configs as serve's wiring parses them (scrape/config.h): no crash,
// no sanitizer report, and a refused config says why.

#include <cstddef>
#include <cstdint>

#include "app/config.h"
#include "fuzz_util.h"
#include "scrape/config.h"

namespace {
constexpr const char* kTarget = "config_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto c = trainwatch::app::ParseConfig(yaml);
  if (!c.ok()) {
    FUZZ_CHECK_ERROR(c.error());
    return 0;
  }
  trainwatch::scrape::GlobalDefaults g;
  g.scrape_interval_ms = c->scrape_interval_ms;
  g.scrape_timeout_ms = c->scrape_timeout_ms;
  auto jobs = trainwatch::scrape::ParseScrapeConfigs(c->prometheus, g);
  if (!jobs.ok()) FUZZ_CHECK_ERROR(jobs.error());
  return 0;
}
