#pragma once
// The seam between rule evaluation and whatever delivers alerts (the
// embedded notifier, external Alertmanagers): evaluated alerts leave
// rules/ only through an AlertSender callback (Prometheus's NotifyFunc).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/labels.h"

namespace trainwatch::rules {

// One alert as Prometheus's notifier sends it to Alertmanager.
struct OutgoingAlert {
  model::Labels labels;        // incl. alertname and external labels
  model::Labels annotations;   // rendered
  int64_t starts_at_ms = 0;
  int64_t ends_at_ms = 0;      // 0 = not set; resolved alerts have it set
  std::string generator_url;
};

// Called from the rule-evaluation threads; must not block for long (queue
// and return). May be called concurrently by different groups.
using AlertSender = std::function<void(std::vector<OutgoingAlert>)>;

}  // namespace trainwatch::rules
