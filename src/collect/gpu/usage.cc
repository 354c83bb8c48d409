#include "collect/gpu/usage.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace trainwatch::collect::gpu {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<double> Price(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

// One GPU of a collection: the labels that name it and its readings.
struct Reading {
  std::string model;
  double util = -1, power_w = -1, energy_mj = -1;  // < 0: not reported
  std::set<std::pair<std::string, std::string>> runs;
};

std::string GpuKey(const model::Labels& l) {
  std::string_view id = l.Get("UUID");
  if (id.empty()) id = l.Get("gpu");
  return std::string(l.Get("Hostname")) + "/" + std::string(id);
}

}  // namespace

Result<PriceTable> PriceTable::Parse(std::string_view spec) {
  PriceTable t;
  bool fallback = false;
  while (!Trim(spec).empty()) {
    size_t comma = spec.find(',');
    std::string_view item = Trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      auto p = Price(item);
      if (!p) return Status::InvalidArgument("price \"" + std::string(item) + "\": expected a number >= 0");
      if (fallback) return Status::InvalidArgument("more than one price without a model");
      t.fallback_ = *p;
      fallback = true;
      continue;
    }
    std::string_view model = Trim(item.substr(0, eq));
    auto p = Price(Trim(item.substr(eq + 1)));
    if (model.empty()) return Status::InvalidArgument("\"" + std::string(item) + "\": expected MODEL=PRICE");
    if (!p) {
      return Status::InvalidArgument("price of \"" + std::string(model) + "\": expected a number >= 0, got \"" +
                                     std::string(Trim(item.substr(eq + 1))) + "\"");
    }
    t.by_model_.emplace_back(Lower(model), *p);
  }
  return t;
}

double PriceTable::For(std::string_view model_name) const {
  std::string m = Lower(model_name);
  for (const auto& [text, price] : by_model_) {
    if (m.find(text) != std::string::npos) return price;
  }
  return fallback_;
}

std::vector<RunUsage> UsageMeter::Add(const Families& gpu, int64_t now_ms) {
  std::map<std::string, Reading> readings;  // by GPU key
  for (const Family& f : gpu) {
    double Reading::*field = nullptr;
    if (f.name == "DCGM_FI_DEV_GPU_UTIL") field = &Reading::util;
    else if (f.name == "DCGM_FI_DEV_POWER_USAGE") field = &Reading::power_w;
    else if (f.name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") field = &Reading::energy_mj;
    const bool procs = f.name == "trainwatch_gpu_process_memory_used_bytes";
    if (field == nullptr && !procs) continue;
    for (const Metric& m : f.metrics) {
      Reading& r = readings[GpuKey(m.labels)];
      if (r.model.empty()) r.model = std::string(m.labels.Get("modelName"));
      if (field != nullptr) {
        if (std::isfinite(m.value) && m.value >= 0) r.*field = m.value;
      } else if (std::string_view run = m.labels.Get("run"); !run.empty()) {
        r.runs.emplace(std::string(m.labels.Get("project")), std::string(run));
      }
    }
  }
  std::map<std::pair<std::string, std::string>, RunUsage> by_run;
  for (const auto& [key, r] : readings) {
    Last& last = last_[key];
    const int64_t prev_t = last.t;
    const double prev_mj = last.energy_mj;
    last.t = now_ms;
    last.energy_mj = r.energy_mj;
    if (prev_t == 0 || now_ms <= prev_t || now_ms - prev_t > o_.max_gap_ms || r.runs.empty()) continue;
    const double dt = static_cast<double>(now_ms - prev_t) / 1000.0;
    double joules = 0;
    if (r.energy_mj >= 0 && prev_mj >= 0 && r.energy_mj >= prev_mj) {
      joules = (r.energy_mj - prev_mj) / 1000.0;
    } else if (r.power_w >= 0) {
      joules = r.power_w * dt;  // no counter (or it went back: a driver reload)
    }
    const double share = 1.0 / static_cast<double>(r.runs.size());
    const double price = o_.prices.For(r.model);
    const bool idle = r.util >= 0 && r.util < o_.idle_util_percent;
    for (const auto& pr : r.runs) {
      RunUsage& u = by_run[pr];
      u.project = pr.first;
      u.run = pr.second;
      u.gpu_seconds += dt * share;
      u.energy_joules += joules * share;
      if (idle) u.idle_seconds += dt * share;
      u.cost += dt * share / 3600.0 * price;
    }
  }
  // GPUs no longer reported start from a new baseline when they come back.
  for (auto it = last_.begin(); it != last_.end();) {
    it = readings.contains(it->first) ? std::next(it) : last_.erase(it);
  }
  std::vector<RunUsage> out;
  out.reserve(by_run.size());
  for (auto& [k, u] : by_run) out.push_back(std::move(u));
  return out;
}

}  // namespace trainwatch::collect::gpu
