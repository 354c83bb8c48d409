#pragma once
// run.alert(title, text, level) of the runs API as an alert for the
// notifiers: app/ joins runs/ (which stores it) and rules/ (whose senders
// deliver it to the embedded notifier and to external Alertmanagers).

#include <string>

#include <vector>

#include "rules/alert.h"
#include "runs/run.h"
#include "runs/store.h"

namespace trainwatch::app {

// Labels: alertname = the title (the alert's identity, as W&B treats a
// title), project, run (the run's name, as its series are labelled),
// severity = the level (info, warning, error). Annotations: summary = the
// title, description = the text, run_id. Starts at the alert's time, no end:
// it resolves after resolve_timeout unless sent again. The generator URL is
// the run's page, <external_url>/runs/<id>.
rules::OutgoingAlert RunAlertToOutgoing(const runs::Run& run, const runs::RunAlert& alert,
                                        const std::string& external_url);

// Actions on alerts (issue 19, docs/runs-api.md "Actions"): each firing alert
// whose annotations name an `action` (one name, or several separated by
// commas) and whose labels carry `project` and `run` queues the action(s)
// for that run's clients, once per firing (keyed by the alert's labels and
// start, so resends add nothing). Alerts of unknown runs are skipped. A rules
// sender: called from rule evaluation with each batch of outgoing alerts.
// Returns the number of actions queued (or found queued already).
int QueueRunActions(runs::RunStore& store, const std::vector<rules::OutgoingAlert>& alerts, int64_t now_ms);

}  // namespace trainwatch::app
