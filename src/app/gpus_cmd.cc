#include "app/gpus_cmd.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <set>

#include "app/api_client.h"
#include "app/wiring.h"
#include "base/clock.h"
#include "base/status.h"

namespace trainwatch::app {
namespace {

using json = nlohmann::json;

constexpr const char* kUtil = "DCGM_FI_DEV_GPU_UTIL";
constexpr const char* kFbUsed = "DCGM_FI_DEV_FB_USED";
constexpr const char* kFbFree = "DCGM_FI_DEV_FB_FREE";
constexpr const char* kFbTotal = "DCGM_FI_DEV_FB_TOTAL";  // not in dcgm-exporter's default set: else used + free
constexpr const char* kTemp = "DCGM_FI_DEV_GPU_TEMP";
constexpr const char* kPower = "DCGM_FI_DEV_POWER_USAGE";
constexpr const char* kProcs = "trainwatch_gpu_process_memory_used_bytes";

std::string Label(const json& metric, const char* name) {
  auto it = metric.find(name);
  return it != metric.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Which GPU a series is about: its host (dcgm-exporter's Hostname, else the
// scrape's instance) and index.
std::pair<std::string, std::string> GpuKey(const json& metric) {
  std::string host = Label(metric, "Hostname");
  if (host.empty()) host = Label(metric, "instance");
  return {host, Label(metric, "gpu")};
}

std::optional<double> Value(const json& sample) {
  const json& v = sample.value("value", json::array());
  if (!v.is_array() || v.size() != 2 || !v[1].is_string()) return std::nullopt;
  try {
    double d = std::stod(v[1].get<std::string>());
    if (std::isnan(d)) return std::nullopt;
    return d;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "12.3" style with `digits` decimals and `unit`, or "-" when unknown.
std::string Num(const std::optional<double>& v, int digits, const char* unit = "") {
  if (!v) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%s", digits, *v, unit);
  return buf;
}

std::string NoGpusMessage() {
  return std::string("no GPU series found (looked for ") + kUtil +
         " and the other DCGM_FI_DEV_* columns): start serve where NVML loads, or scrape a dcgm-exporter";
}

// One instant query per column; the rows, or the error naming the server.
Result<std::vector<GpuRow>> FetchGpuRows(httplib::Client& client, const ApiClient& api, bool watch) {
  std::map<std::string, json> results;
  for (const std::string& m : GpuQueryMetrics()) {
    if (watch && StopSignalWithin(0)) return Status::Cancelled("interrupted");
    auto res = client.Post(api.prefix + "/api/v1/query", httplib::Params{{"query", m}});
    if (!res) {
      const bool refused = res.error() == httplib::Error::Connection;
      return Status::Unavailable(api.display + ": " + httplib::to_string(res.error()) +
                                 (refused ? " (no trainwatch server answers there)" : ""));
    }
    json j = json::parse(res->body, nullptr, false);
    bool api_error = !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string();
    if (res->status != 200 || api_error) {
      std::string body = res->body.substr(0, 300);
      while (!body.empty() && body.back() == '\n') body.pop_back();
      return Status::Unavailable("HTTP " + std::to_string(res->status) + " from " + api.display +
                                 "/api/v1/query: " + (api_error ? j["error"].get<std::string>() : body));
    }
    if (!j.is_object() || j.value("status", "") != "success" || !j.contains("data") || !j["data"].is_object()) {
      return Status::InvalidArgument(api.display + "/api/v1/query: not a Prometheus query result: " +
                                     res->body.substr(0, 200));
    }
    results[m] = j["data"].value("result", json::array());
  }
  return JoinGpuRows(results);
}

}  // namespace

const std::vector<std::string>& GpuQueryMetrics() {
  static const std::vector<std::string> kMetrics = {kUtil, kFbUsed, kFbFree, kFbTotal, kTemp, kPower, kProcs};
  return kMetrics;
}

std::vector<GpuRow> JoinGpuRows(const std::map<std::string, json>& results) {
  std::map<std::pair<std::string, std::string>, GpuRow> rows;
  auto row = [&](const json& metric) -> GpuRow& {
    auto key = GpuKey(metric);
    GpuRow& r = rows[key];
    if (r.host.empty()) {
      r.host = key.first;
      r.gpu = key.second;
    }
    if (r.model.empty()) r.model = Label(metric, "modelName");
    return r;
  };
  // Per GPU: its runs and ranks (by name), then the pids of no run (by number).
  std::map<std::pair<std::string, std::string>, std::set<std::string>> runs;
  std::map<std::pair<std::string, std::string>, std::set<std::pair<size_t, std::string>>> pids;
  std::map<std::pair<std::string, std::string>, double> fb_free, fb_total;
  for (const auto& [name, result] : results) {
    if (!result.is_array()) continue;
    for (const json& s : result) {
      const json& metric = s.value("metric", json::object());
      if (!metric.is_object() || Label(metric, "gpu").empty()) continue;
      GpuRow& r = row(metric);
      std::optional<double> v = Value(s);
      if (name == kUtil) r.util = v;
      else if (name == kFbUsed) r.mem_used_mib = v;
      else if (name == kFbFree && v) fb_free[GpuKey(metric)] = *v;
      else if (name == kFbTotal && v) fb_total[GpuKey(metric)] = *v;
      else if (name == kTemp) r.temp_c = v;
      else if (name == kPower) r.power_w = v;
      else if (name == kProcs) {
        std::string run = Label(metric, "run");
        if (run.empty()) {
          std::string pid = Label(metric, "pid");
          pids[GpuKey(metric)].insert({pid.size(), "pid " + pid});
          continue;
        }
        std::string who = Label(metric, "project") + "/" + run;
        if (!Label(metric, "rank").empty()) who += " rank " + Label(metric, "rank");
        runs[GpuKey(metric)].insert(who);
      }
    }
  }
  std::vector<GpuRow> out;
  for (auto& [key, r] : rows) {
    // nvidia-smi's total is FB_TOTAL; used + free leaves out the driver's reserved memory.
    auto total_it = fb_total.find(key);
    auto free_it = fb_free.find(key);
    if (total_it != fb_total.end()) r.mem_total_mib = total_it->second;
    else if (free_it != fb_free.end() && r.mem_used_mib) r.mem_total_mib = free_it->second + *r.mem_used_mib;
    if (auto it = runs.find(key); it != runs.end()) r.users.assign(it->second.begin(), it->second.end());
    if (auto it = pids.find(key); it != pids.end()) {
      for (const auto& [len, pid] : it->second) r.users.push_back(pid);
    }
    out.push_back(std::move(r));
  }
  // Host, then GPU index as a number.
  std::stable_sort(out.begin(), out.end(), [](const GpuRow& a, const GpuRow& b) {
    if (a.host != b.host) return a.host < b.host;
    if (a.gpu.size() != b.gpu.size()) return a.gpu.size() < b.gpu.size();
    return a.gpu < b.gpu;
  });
  return out;
}

std::string FormatGpuTable(const std::vector<GpuRow>& rows, const std::string& source, int64_t at_ms) {
  std::string out;
  char buf[512];
  std::time_t t = static_cast<std::time_t>(at_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  out += "trainwatch gpus  " + source + "  " + when + "\n";
  if (rows.empty()) {
    out += NoGpusMessage() + "\n";
    return out;
  }
  size_t host_w = 4, model_w = 5;
  for (const GpuRow& r : rows) {
    host_w = std::max(host_w, r.host.size());
    model_w = std::max(model_w, r.model.size());
  }
  host_w = std::min<size_t>(host_w, 32);
  model_w = std::min<size_t>(model_w, 28);
  std::snprintf(buf, sizeof buf, "%-*s %3s  %-*s %5s %17s %6s %8s  %s\n", static_cast<int>(host_w), "HOST", "GPU",
                static_cast<int>(model_w), "MODEL", "UTIL", "MEMORY (MiB)", "TEMP", "POWER", "RUNS");
  out += buf;
  for (const GpuRow& r : rows) {
    std::string mem = r.mem_used_mib ? Num(r.mem_used_mib, 0) + " / " + Num(r.mem_total_mib, 0) : "-";
    std::string users;
    for (const std::string& u : r.users) users += (users.empty() ? "" : ", ") + u;
    std::snprintf(buf, sizeof buf, "%-*.*s %3s  %-*.*s %5s %17s %6s %8s  %s\n", static_cast<int>(host_w),
                  static_cast<int>(host_w), r.host.c_str(), r.gpu.c_str(), static_cast<int>(model_w),
                  static_cast<int>(model_w), r.model.c_str(), Num(r.util, 0, "%").c_str(), mem.c_str(),
                  Num(r.temp_c, 0, "C").c_str(), Num(r.power_w, 0, "W").c_str(), users.empty() ? "-" : users.c_str());
    out += buf;
  }
  return out;
}

int RunGpus(const GpusOptions& o) {
  if (!(o.interval_s > 0)) {
    std::cerr << "trainwatch gpus: --interval: must be positive\n";
    return 1;
  }
  if (o.once) {
    // main() blocked these for `serve`; one table must stay interruptible.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &sigs, nullptr);
  }
  auto api = NewApiClient(o.url);
  if (!api.ok()) {
    std::cerr << "trainwatch gpus: --url: " << api.error().message() << "\n";
    return 1;
  }
  httplib::Client& client = *api->http;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  for (bool first = true;; first = false) {
    auto rows = FetchGpuRows(client, *api, !o.once);
    if (!rows.ok() && rows.error().code() == StatusCode::kCancelled) return 0;
    if (!rows.ok() && (o.once || first)) {
      std::cerr << "trainwatch gpus: " << rows.error().message() << "\n";
      return 1;
    }
    if (o.once) {
      if (rows->empty()) {
        std::cerr << "trainwatch gpus: " << api->display << ": " << NoGpusMessage() << "\n";
        return 1;
      }
      std::cout << FormatGpuTable(*rows, api->display, NowMillis()) << std::flush;
      return std::cout ? 0 : 1;
    }
    if (!rows.ok()) {
      // The server went away after a first table: say so, keep the last table, try again.
      std::cerr << "trainwatch gpus: " << rows.error().message() << " (retrying every " << o.interval_s << "s)\n";
    } else {
      // In place on a terminal (home, clear to the end); elsewhere one table after another.
      if (tty) std::cout << "\x1b[H\x1b[J";
      else if (!first) std::cout << "\n";
      std::cout << FormatGpuTable(*rows, api->display, NowMillis()) << std::flush;
      if (!std::cout) return 1;  // stdout closed (`| head`): SIGPIPE is ignored, so stop here
    }
    if (StopSignalWithin(o.interval_s)) return 0;
  }
}

}  // namespace trainwatch::app
