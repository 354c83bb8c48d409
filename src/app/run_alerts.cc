#include "app/run_alerts.h"

#include <cctype>

namespace trainwatch::app {
namespace {

// Percent-encodes everything but RFC 3986's unreserved characters (a path segment).
std::string EscapePathSegment(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

rules::OutgoingAlert RunAlertToOutgoing(const runs::Run& run, const runs::RunAlert& alert,
                                        const std::string& external_url) {
  rules::OutgoingAlert out;
  out.labels = model::Labels{
      {"alertname", alert.title}, {"project", run.project}, {"run", run.name}, {"severity", alert.level}};
  std::vector<model::Label> ann = {{"summary", alert.title}, {"run_id", run.id}};
  if (!alert.text.empty()) ann.push_back({"description", alert.text});
  out.annotations = model::Labels(std::move(ann));
  out.starts_at_ms = alert.time_ms;
  out.generator_url = external_url + "/runs/" + EscapePathSegment(run.id);
  return out;
}

}  // namespace trainwatch::app
