#pragma once
// run.alert(title, text, level) of the runs API as an alert for the
// notifiers: app/ joins runs/ (which stores it) and rules/ (whose senders
// deliver it to the embedded notifier and to external Alertmanagers).

#include <string>

#include "rules/alert.h"
#include "runs/run.h"

namespace trainwatch::app {

// Labels: alertname = the title (the alert's identity, as W&B treats a
// title), project, run (the run's name, as its series are labelled),
// severity = the level (info, warning, error). Annotations: summary = the
// title, description = the text, run_id. Starts at the alert's time, no end:
// it resolves after resolve_timeout unless sent again. The generator URL is
// the run's page, <external_url>/runs/<id>.
rules::OutgoingAlert RunAlertToOutgoing(const runs::Run& run, const runs::RunAlert& alert,
                                        const std::string& external_url);

}  // namespace trainwatch::app
