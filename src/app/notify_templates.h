#pragma once
// Notification templates for the embedded notifier (notify/) on the Go
// text/template engine of template/.
// Templates see Alertmanager 0.25's template.Data with its types and
// methods: .Receiver, .Status, .Alerts (template.Alerts: .Firing, .Resolved;
// each alert .Status, .Labels, .Annotations, .StartsAt, .EndsAt,
// .GeneratorURL, .Fingerprint), .GroupLabels, .CommonLabels,
// .CommonAnnotations (template.KV: .SortedPairs, .Names, .Values, .Remove),
// .ExternalURL; Alertmanager's functions; notify's default templates, then
// the `templates:` files.

#include <string>
#include <string_view>

#include "base/status.h"
#include "notify/config.h"
#include "notify/templates.h"

namespace trainwatch::app {

// Parses notify::DefaultTemplates() and the files into a notify::Templates.
notify::TemplatesFactory MakeNotifyTemplates();

// template.Data as amtool's --template.data file holds it (JSON with
// receiver, status, alerts[{status, labels, annotations, startsAt, endsAt,
// generatorURL, fingerprint}], groupLabels, commonLabels, commonAnnotations,
// externalURL). Errors name the field.
Result<notify::NotificationData> ParseTemplateData(std::string_view json);

}  // namespace trainwatch::app
