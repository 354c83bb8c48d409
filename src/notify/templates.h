#pragma once
// Notification templates as Alertmanager's template.Template: the default
// templates plus the `templates:` files, executed over template.Data
// (NotificationData) by ExecuteText / ExecuteHtml on the Go text/template
// engine of template/ (FuncSet::kAlertmanager). Templates see Alertmanager
// 0.25's template.Data with its types and methods: .Receiver, .Status,
// .Alerts (template.Alerts: .Firing, .Resolved; each alert .Status, .Labels,
// .Annotations, .StartsAt, .EndsAt, .GeneratorURL, .Fingerprint),
// .GroupLabels, .CommonLabels, .CommonAnnotations (template.KV: .SortedPairs,
// .Names, .Values, .Remove), .ExternalURL.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "notify/config.h"
#include "notify/notifier.h"
#include "template/template.h"

namespace trainwatch::notify {

// Alertmanager's template.Data.
struct NotificationData {
  std::string receiver;
  std::string status;  // "firing" or "resolved"
  std::vector<StoredAlert> alerts;  // firing first as given; firing ones have ends_at 0
  model::Labels group_labels, common_labels, common_annotations;
  std::string external_url;
  std::string group_key;
  int64_t now_ms = 0;
  size_t NumFiring() const;
};

// A parsed set of notification templates. Thread-safe (immutable).
class Templates {
 public:
  // Parses DefaultTemplates() and then `files` in order, each a template
  // named after its base name (Go's ParseGlob); a later non-empty definition
  // replaces an earlier one. Errors name the file and line as Go's
  // ("template: slack.tmpl:3: unexpected ...").
  static Result<std::shared_ptr<const Templates>> Parse(const std::vector<TemplateFile>& files);

  // Alertmanager's ExecuteTextString: `text` is parsed as a new template
  // beside the set's definitions and executed with `d` as dot; "" gives "".
  // Errors are Go's ("template: :1:3: executing ...").
  Result<std::string> ExecuteText(std::string_view text, const NotificationData& d) const;
  // ExecuteHTMLString: the same with html/template's escaping (email html).
  Result<std::string> ExecuteHtml(std::string_view text, const NotificationData& d) const;

 private:
  explicit Templates(tmpl::Template set) : set_(std::move(set)) {}
  Result<std::string> Run(std::string_view text, const NotificationData& d, bool html) const;

  const tmpl::Template set_;  // the defaults and the files
};

// trainwatch's default templates (default.tmpl, compiled in): Alertmanager
// 0.25's names (__subject, slack.default.title, email.default.html, ...).
std::string_view DefaultTemplates();

// template.Data as amtool's --template.data file holds it (JSON with
// receiver, status, alerts[{status, labels, annotations, startsAt, endsAt,
// generatorURL, fingerprint}], groupLabels, commonLabels, commonAnnotations,
// externalURL). Errors name the field.
Result<NotificationData> ParseTemplateData(std::string_view json);

}  // namespace trainwatch::notify
