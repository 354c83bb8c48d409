#include "app/logs_cmd.h"

#include <httplib.h>
#include <signal.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "app/api_client.h"
#include "base/clock.h"
#include "http/params.h"

namespace trainwatch::app {

using nlohmann::json;

Result<std::string> FormatLogsResponse(const std::string& body, bool as_json) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || j.value("status", "") != "success" || !j.contains("data") || !j["data"].contains("lines") ||
      !j["data"]["lines"].is_array()) {
    return Status::InvalidArgument("unexpected response: " + body.substr(0, 200));
  }
  const json& lines = j["data"]["lines"];
  std::string out;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const json& l = *it;
    if (as_json) {
      out += l.dump() + "\n";
      continue;
    }
    out += l.value("time", "");
    out += ' ';
    std::string level = l.value("level", "");
    out += level.empty() ? "-" : level;
    out += " {";
    bool first = true;
    if (l.contains("labels") && l["labels"].is_object()) {
      for (auto& [k, v] : l["labels"].items()) {
        if (!first) out += ", ";
        first = false;
        out += k + "=" + v.dump();
      }
    }
    out += "} ";
    out += l.value("message", "");
    if (l.contains("fields") && l["fields"].is_object() && !l["fields"].empty()) out += " " + l["fields"].dump();
    if (l.value("truncated", false)) out += " [truncated]";
    out += '\n';
  }
  return out;
}

int RunLogs(const LogsOptions& o) {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &sigs, nullptr);
  httplib::Params params{{"query", o.query}, {"limit", std::to_string(o.limit)}};
  if (o.since != "0") {
    auto d = http::ParseDuration(o.since);
    if (!d.ok()) {
      std::cerr << "trainwatch logs: --since: " << d.error().message() << "\n";
      return 1;
    }
    params.emplace("start", std::to_string((NowMillis() - *d) / 1000));
  }
  auto api = NewApiClient(o.url);
  if (!api.ok()) {
    std::cerr << "trainwatch logs: --url: " << api.error().message() << "\n";
    return 1;
  }
  httplib::Client& client = *api->http;
  const std::string& prefix = api->prefix;
  client.set_connection_timeout(static_cast<time_t>(o.timeout_s));
  client.set_read_timeout(static_cast<time_t>(o.timeout_s));
  auto res = client.Post(prefix + "/api/v1/logs/query", params);
  if (!res) {
    std::cerr << "trainwatch logs: " << api->display << ": " << httplib::to_string(res.error()) << "\n";
    return 1;
  }
  if (res->status != 200) {
    json j = json::parse(res->body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) {
      std::cerr << "trainwatch logs: " << j["error"].get<std::string>() << "\n";
    } else {
      std::cerr << "trainwatch logs: HTTP " << res->status << ": " << res->body.substr(0, 500) << "\n";
    }
    return 1;
  }
  auto text = FormatLogsResponse(res->body, o.json);
  if (!text.ok()) {
    std::cerr << "trainwatch logs: " << text.error().message() << "\n";
    return 1;
  }
  std::cout << *text;
  std::cout.flush();
  return 0;
}

}  // namespace trainwatch::app
