#include "scrape/target.h"

#include <glob.h>

#include <algorithm>

#include "base/file.h"
#include "base/hash.h"
#include "base/strconv.h"

namespace trainwatch::scrape {

model::Labels TargetSpec::PublicLabels() const {
  std::vector<model::Label> v;
  for (const model::Label& l : labels.pairs()) {
    if (!l.name.starts_with("__")) v.push_back(l);
  }
  return model::Labels(std::move(v));
}

std::string TargetSpec::Url(const ScrapeConfig& cfg) const {
  std::map<std::string, std::vector<std::string>> params = cfg.params;
  for (const model::Label& l : labels.pairs()) {
    if (l.name.starts_with("__param_")) params[l.name.substr(8)] = {l.value};
  }
  // As Go's url.URL.String: a path without its leading '/' (relabeling can
  // set one) gets it, so host and path never run together.
  std::string_view path = labels.Get("__metrics_path__");
  std::string url = std::string(labels.Get("__scheme__")) + "://" + std::string(labels.Get("__address__")) +
                    (path.empty() || path[0] != '/' ? "/" : "") + std::string(path);
  bool first = true;
  for (const auto& [k, vs] : params) {  // sorted by key, as url.Values.Encode
    for (const std::string& v : vs) {
      url += first ? '?' : '&';
      first = false;
      url += GoQueryEscape(k) + "=" + GoQueryEscape(v);
    }
  }
  return url;
}

uint64_t TargetSpec::Hash() const {
  uint64_t h = 0x51ed27;
  for (const model::Label& l : labels.pairs()) h = HashString(l.value, HashString(l.name, h));
  return h;
}

TargetSpec PopulateLabels(const ScrapeConfig& cfg, common::LabelSet lb) {
  TargetSpec t;
  auto set_default = [&](std::string_view n, std::string_view v) {
    if (lb.Get(n).empty()) lb.Set(n, v);
  };
  set_default("job", cfg.job_name);
  set_default("__scrape_interval__", FormatDuration(cfg.scrape_interval_ms));
  set_default("__scrape_timeout__", FormatDuration(cfg.scrape_timeout_ms));
  set_default("__metrics_path__", cfg.metrics_path);
  set_default("__scheme__", cfg.scheme);
  for (const auto& [k, v] : cfg.params) {
    if (!v.empty()) lb.Set("__param_" + k, v[0]);
  }
  t.discovered = lb;
  if (!common::Relabel(cfg.relabel_configs, &lb)) {
    t.dropped = true;
    return t;
  }
  std::string addr(lb.Get("__address__"));
  if (addr.empty()) {
    t.dropped = true;
    t.error = "no address";
    return t;
  }
  // Add the scheme's default port when the address has none (Prometheus 2.42 default).
  bool has_port = false;
  if (addr.front() == '[') has_port = addr.find("]:") != std::string::npos;
  else has_port = addr.find(':') != std::string::npos;
  if (!has_port) {
    std::string_view scheme = lb.Get("__scheme__");
    addr += scheme == "https" ? ":443" : ":80";
    lb.Set("__address__", addr);
  }
  if (addr.find('/') != std::string::npos) {
    t.dropped = true;
    t.error = "\"" + addr + "\" is not a valid hostname";
    return t;
  }
  std::erase_if(lb.mutable_pairs(), [](const model::Label& l) { return l.name.starts_with("__meta_"); });
  if (lb.Get("instance").empty()) lb.Set("instance", addr);
  for (const model::Label& l : lb.pairs()) {
    if (!model::IsValidLabelName(l.name)) {
      t.dropped = true;
      t.error = "invalid label name \"" + l.name + "\"";
      return t;
    }
  }
  t.labels = std::move(lb);
  return t;
}

std::vector<TargetSpec> TargetsFromGroup(const ScrapeConfig& cfg, const TargetGroup& group) {
  std::vector<TargetSpec> out;
  for (const std::string& addr : group.targets) {
    std::vector<model::Label> v;
    for (const auto& [k, val] : group.labels) v.push_back({k, val});
    v.push_back({"__address__", addr});
    out.push_back(PopulateLabels(cfg, common::LabelSet(std::move(v))));
  }
  return out;
}

Result<std::vector<TargetGroup>> ReadFileSd(const std::string& path) {
  std::string data;
  RETURN_IF_ERROR(file::ReadFile(path, &data));
  std::vector<TargetGroup> out;
  YAML::Node root;
  try {
    root = YAML::Load(data);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("file_sd " + path + ": " + e.what());
  }
  if (!root || root.IsNull()) return out;
  if (!root.IsSequence()) return Status::InvalidArgument("file_sd " + path + ": expected a list of target groups");
  try {
    for (size_t i = 0; i < root.size(); i++) {
      std::string where = "file_sd " + path + ": group " + std::to_string(i);
      const YAML::Node& g = root[i];
      if (!g.IsMap()) return Status::InvalidArgument(where + ": expected a mapping");
      TargetGroup tg;
      tg.source = path + ":" + std::to_string(i);
      for (const auto& kv : g) {
        std::string k = kv.first.as<std::string>();
        if (k != "targets" && k != "labels") return Status::InvalidArgument(where + ": unknown field \"" + k + "\"");
      }
      if (auto t = g["targets"]; t && !t.IsNull()) {
        if (!t.IsSequence()) return Status::InvalidArgument(where + ".targets: expected a list");
        for (const auto& e : t) {
          if (!e.IsScalar()) return Status::InvalidArgument(where + ".targets: expected a string");
          if (e.Scalar().find('/') != std::string::npos) {
            return Status::InvalidArgument(where + ".targets: \"" + e.Scalar() + "\" is not a valid hostname");
          }
          tg.targets.push_back(e.Scalar());
        }
      }
      if (auto l = g["labels"]; l && !l.IsNull()) {
        if (!l.IsMap()) return Status::InvalidArgument(where + ".labels: expected a mapping");
        for (const auto& kv : l) {
          std::string k = kv.first.as<std::string>();
          if (!model::IsValidLabelName(k)) return Status::InvalidArgument(where + ".labels: invalid label name \"" + k + "\"");
          if (!kv.second.IsScalar()) return Status::InvalidArgument(where + ".labels." + k + ": expected a string");
          tg.labels.emplace_back(k, kv.second.Scalar());
        }
      }
      tg.labels.emplace_back("__meta_filepath", path);
      out.push_back(std::move(tg));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("file_sd " + path + ": " + e.what());
  }
  return out;
}

std::vector<std::string> GlobFiles(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; i++) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace trainwatch::scrape
