#pragma once
// The receivers' integrations: webhook (Alertmanager's payload, version 4),
// Slack, PagerDuty (Events API v2) and email (SMTP with STARTTLS and AUTH
// PLAIN/LOGIN). Alertmanager's default templates (subject, Slack title,
// PagerDuty description, email body) are rendered here in C++; other
// template texts go through NotifierOptions::render when set.
//
// A failed delivery returns Unavailable when a retry may succeed (network
// error, 5xx, 429) and InvalidArgument when it cannot (other 4xx).

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "notify/config.h"
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

// Builds the data for `alerts` (sorted as Alertmanager sorts a group).
NotificationData MakeNotificationData(std::string receiver, std::string group_key, model::Labels group_labels,
                                      std::vector<StoredAlert> alerts, std::string external_url, int64_t now_ms);

// The webhook body: {"receiver", "status", "alerts", "groupLabels", "commonLabels",
// "commonAnnotations", "externalURL", "version": "4", "groupKey", "truncatedAlerts"}.
std::string WebhookPayload(const NotificationData& d, uint64_t max_alerts);
// template.Data as JSON (Go field names: Receiver, Status, Alerts, ...), for TemplateFunc.
std::string TemplateDataJson(const NotificationData& d);

// Alertmanager's "__subject" template.
std::string DefaultSubject(const NotificationData& d);
// Expands a notification template: the default templates in C++, otherwise
// `render` when set, otherwise plain {{ .Field.key }} references.
Result<std::string> Expand(std::string_view text, const NotificationData& d, const TemplateFunc& render);

struct SendOptions {
  int64_t timeout_ms = 10000;
  TemplateFunc render;
};

Status SendWebhook(const WebhookConfig& c, const NotificationData& d, const SendOptions& o);
Status SendSlack(const SlackConfig& c, const NotificationData& d, const SendOptions& o);
Status SendPagerduty(const PagerdutyConfig& c, const NotificationData& d, const SendOptions& o);
Status SendEmail(const EmailConfig& c, const NotificationData& d, const SendOptions& o);

// The email as sent (headers + body), for tests and `SendEmail`.
Result<std::string> BuildEmailMessage(const EmailConfig& c, const NotificationData& d, const SendOptions& o);

}  // namespace trainwatch::notify
