#pragma once
// Notification templates as Alertmanager's template.Template: the default
// templates plus the `templates:` files, executed over template.Data
// (NotificationData) by ExecuteText / ExecuteHtml. notify/ holds the data
// and this interface; the Go template engine is in rules/, which notify may
// not include, so app/notify_templates.cc implements it and hands a
// TemplatesFactory to the config loader.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "notify/notifier.h"

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
  virtual ~Templates() = default;
  // Alertmanager's ExecuteTextString: `text` is parsed as a new template
  // beside the set's definitions and executed with `d` as dot; "" gives "".
  // Errors are Go's ("template: :1:3: executing ...").
  virtual Result<std::string> ExecuteText(std::string_view text, const NotificationData& d) const = 0;
  // ExecuteHTMLString: the same with html/template's escaping (email html).
  virtual Result<std::string> ExecuteHtml(std::string_view text, const NotificationData& d) const = 0;
};

// trainwatch's default templates (default.tmpl, compiled in): Alertmanager
// 0.25's names (__subject, slack.default.title, email.default.html, ...).
std::string_view DefaultTemplates();

}  // namespace trainwatch::notify
