#pragma once
// The receivers' integrations: webhook (Alertmanager's payload, version 4),
// Slack, PagerDuty (Events API v2) and email (SMTP with STARTTLS and AUTH
// PLAIN/LOGIN). Every template text (the defaults, such as
// `{{ template "slack.default.title" . }}`, and custom ones) is expanded by
// the config's Templates (notify/templates.h).
//
// A failed delivery returns Unavailable when a retry may succeed (network
// error, 5xx, 429) and InvalidArgument when it cannot (other 4xx).

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "notify/config.h"
#include "notify/notifier.h"
#include "notify/templates.h"

namespace trainwatch::notify {

// Builds the data for `alerts` (sorted as Alertmanager sorts a group; the
// receiver name regexp-quoted, as Alertmanager's template.Data has it).
NotificationData MakeNotificationData(std::string receiver, std::string group_key, model::Labels group_labels,
                                      std::vector<StoredAlert> alerts, std::string external_url, int64_t now_ms);

// The webhook body: {"receiver", "status", "alerts", "groupLabels", "commonLabels",
// "commonAnnotations", "externalURL", "version": "4", "groupKey", "truncatedAlerts"}.
std::string WebhookPayload(const NotificationData& d, uint64_t max_alerts);

// Expands a notification template text with `t` (html: with html/template's
// escaping). Without templates only a text without actions expands (to itself).
Result<std::string> Expand(std::string_view text, const NotificationData& d, const Templates* t, bool html = false);

// A *_file secret as Alertmanager reads it: the file's text, whitespace trimmed.
Result<std::string> ReadSecretFile(const std::string& path);
// RFC 2195 CRAM-MD5: "<user> <hex HMAC-MD5(secret, challenge)>" (before base64).
std::string CramMd5Response(std::string_view user, std::string_view secret, std::string_view challenge);

struct SendOptions {
  int64_t timeout_ms = 10000;
  const Templates* templates = nullptr;  // the config's compiled_templates
};

Status SendWebhook(const WebhookConfig& c, const NotificationData& d, const SendOptions& o);
Status SendSlack(const SlackConfig& c, const NotificationData& d, const SendOptions& o);
Status SendPagerduty(const PagerdutyConfig& c, const NotificationData& d, const SendOptions& o);
Status SendEmail(const EmailConfig& c, const NotificationData& d, const SendOptions& o);

// The email as sent (headers + body), for tests and `SendEmail`.
Result<std::string> BuildEmailMessage(const EmailConfig& c, const NotificationData& d, const SendOptions& o);

}  // namespace trainwatch::notify
