#pragma once
// Notification templates for the embedded notifier (notify/) through the Go
// text/template engine of rules/: app/ is the one module that may join them.
// Custom texts in alertmanager.yml (email html/text/headers, Slack fields,
// PagerDuty description, ...) see Alertmanager's template.Data field names:
// .Receiver, .Status, .Alerts (each .Status, .Labels, .Annotations,
// .StartsAt, .EndsAt, .GeneratorURL, .Fingerprint), .GroupLabels,
// .CommonLabels, .CommonAnnotations, .ExternalURL. Alertmanager's methods
// (.Alerts.Firing, .SortedPairs, ...) are not available; the default
// templates are rendered by notify/ itself.

#include "notify/notifier.h"

namespace trainwatch::app {

notify::TemplateFunc MakeNotifyTemplateFunc();

}  // namespace trainwatch::app
