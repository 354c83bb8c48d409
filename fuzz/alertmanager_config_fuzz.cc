// alertmanager.yml (notify/config.h ParseConfig) with the default
// notification templates parsed as serve does (notify::Templates), and
// the redaction GET /api/v2/status applies to it (RedactSecrets). A refused
// config says why; an accepted one routes a few label sets (MatchRoutes:
// at least the root route, each to a receiver the config defines) and checks
// its time intervals.

#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "model/labels.h"
#include "notify/config.h"

namespace {
constexpr const char* kTarget = "alertmanager_config_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace notify = trainwatch::notify;
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  (void)notify::RedactSecrets(yaml);
  auto c = notify::ParseConfig(yaml);
  if (!c.ok()) {
    FUZZ_CHECK_ERROR(c.error());
    return 0;
  }
  const notify::Config& cfg = **c;
  const trainwatch::model::Labels sets[] = {
      {{"alertname", "GpuDown"}, {"severity", "critical"}, {"team", "ml"}},
      {{"alertname", "x"}},
      {},
  };
  for (const auto& ls : sets) {
    std::vector<const notify::Route*> routes = notify::MatchRoutes(cfg.route, ls);
    FUZZ_CHECK(!routes.empty(), "an alert matched no route (the root route matches all)");
    for (const notify::Route* r : routes) {
      FUZZ_CHECK(cfg.FindReceiver(r->receiver) != nullptr, "route to an undefined receiver: " + r->receiver);
    }
  }
  for (const auto& [name, intervals] : cfg.time_intervals) {
    for (const notify::TimeInterval& ti : intervals) (void)ti.Contains(1'700'000'000'000);
  }
  return 0;
}
