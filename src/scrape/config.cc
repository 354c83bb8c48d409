#include "scrape/config.h"

#include <cctype>
#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "base/log.h"
#include "base/units.h"
#include "common/yaml.h"

namespace trainwatch::scrape {
namespace {

using common::yaml::Bool;
using common::yaml::CheckKeys;
using common::yaml::Dur;
using common::yaml::Err;
using common::yaml::Str;
using common::yaml::Uint;

Result<TargetGroup> ParseGroup(const YAML::Node& n, const std::string& where) {
  RETURN_IF_ERROR(CheckKeys(n, where, {"targets", "labels"}));
  TargetGroup g;
  if (auto t = n["targets"]; t && !t.IsNull()) {
    if (!t.IsSequence()) return Err(t, where + ".targets", "expected a list of host:port");
    for (const auto& e : t) {
      ASSIGN_OR_RETURN(std::string s, Str(e, where + ".targets"));
      if (s.find('/') != std::string::npos) return Err(e, where + ".targets", "\"" + s + "\" is not a valid hostname");
      g.targets.push_back(s);
    }
  }
  if (auto l = n["labels"]; l && !l.IsNull()) {
    if (!l.IsMap()) return Err(l, where + ".labels", "expected a mapping");
    for (const auto& kv : l) {
      std::string k = kv.first.as<std::string>();
      if (!model::IsValidLabelName(k)) return Err(kv.first, where + ".labels", "\"" + k + "\" is not a valid label name");
      ASSIGN_OR_RETURN(std::string v, Str(kv.second, where + ".labels." + k));
      g.labels.emplace_back(k, v);
    }
  }
  return g;
}

// Prometheus 3's config.ScrapeProtocolsHeaders, in its default order.
constexpr std::pair<std::string_view, std::string_view> kProtocols[] = {
    {"PrometheusProto", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"},
    {"OpenMetricsText1.0.0", "application/openmetrics-text;version=1.0.0"},
    {"OpenMetricsText0.0.1", "application/openmetrics-text;version=0.0.1"},
    {"PrometheusText1.0.0", "text/plain;version=1.0.0;escaping=underscores"},
    {"PrometheusText0.0.4", "text/plain;version=0.0.4"},
};

std::string SupportedProtocols() {
  std::string r = "[";
  for (const auto& [name, header] : kProtocols) r += (r.size() > 1 ? " " : "") + std::string(name);
  return r + "]";
}

// scrape_protocols, scrape_native_histograms, always_scrape_classic_histograms
// (and its Prometheus 2 name, scrape_classic_histograms),
// convert_classic_histograms_to_nhcb. A job's value replaces global's.
Status ParseProtocols(const YAML::Node& n, const std::string& w, ScrapeConfig* c) {
  if (auto p = n["scrape_protocols"]; p && !p.IsNull()) {
    if (!p.IsSequence()) return Err(p, w + ".scrape_protocols", "expected a list of protocol names");
    c->scrape_protocols.clear();
    for (const auto& e : p) {
      ASSIGN_OR_RETURN(std::string s, Str(e, w + ".scrape_protocols"));
      bool known = false;
      for (const auto& [name, header] : kProtocols) known = known || name == s;
      if (!known) {
        return Err(e, w + ".scrape_protocols", "unknown scrape protocol \"" + s + "\", supported: " + SupportedProtocols());
      }
      if (std::find(c->scrape_protocols.begin(), c->scrape_protocols.end(), s) != c->scrape_protocols.end()) {
        return Err(e, w + ".scrape_protocols", "duplicated protocol \"" + s + "\"");
      }
      c->scrape_protocols.push_back(s);
    }
  }
  if (n["scrape_native_histograms"]) {
    ASSIGN_OR_RETURN(c->scrape_native_histograms, Bool(n["scrape_native_histograms"], w + ".scrape_native_histograms"));
  }
  for (const char* k : {"always_scrape_classic_histograms", "scrape_classic_histograms"}) {
    if (n[k]) { ASSIGN_OR_RETURN(c->always_scrape_classic_histograms, Bool(n[k], w + "." + k)); }
  }
  if (auto v = n["convert_classic_histograms_to_nhcb"]) {
    ASSIGN_OR_RETURN(c->convert_classic_histograms_to_nhcb, Bool(v, w + ".convert_classic_histograms_to_nhcb"));
  }
  if (auto f = n["fallback_scrape_protocol"]; f && !f.IsNull()) {
    ASSIGN_OR_RETURN(std::string s, Str(f, w + ".fallback_scrape_protocol"));
    bool known = false;
    for (const auto& [name, header] : kProtocols) known = known || name == s;
    if (!known) {
      return Err(f, w + ".fallback_scrape_protocol",
                 "invalid fallback_scrape_protocol: unknown scrape protocol \"" + s + "\", supported: " + SupportedProtocols());
    }
    c->fallback_scrape_protocol = s;
  }
  return Status::OK();
}

const std::set<std::string, std::less<>>& KnownUnsupported() {
  static const std::set<std::string, std::less<>> k = {
      "oauth2", "proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header",
      "follow_redirects", "enable_http2", "azure_sd_configs", "consul_sd_configs", "digitalocean_sd_configs",
      "docker_sd_configs", "dockerswarm_sd_configs", "dns_sd_configs", "ec2_sd_configs", "eureka_sd_configs",
      "gce_sd_configs", "hetzner_sd_configs", "http_sd_configs", "ionos_sd_configs", "kubernetes_sd_configs",
      "kuma_sd_configs", "lightsail_sd_configs", "linode_sd_configs", "marathon_sd_configs", "nerve_sd_configs",
      "nomad_sd_configs", "openstack_sd_configs", "ovhcloud_sd_configs", "puppetdb_sd_configs",
      "scaleway_sd_configs", "serverset_sd_configs", "triton_sd_configs", "uyuni_sd_configs", "vultr_sd_configs"};
  return k;
}

Result<ScrapeConfig> ParseOne(const YAML::Node& n, const std::string& index_where, const GlobalDefaults& g) {
  ScrapeConfig c;
  if (!n.IsMap()) return Err(n, index_where, "expected a mapping");
  if (!n["job_name"] || !n["job_name"].IsScalar() || n["job_name"].Scalar().empty()) {
    return Err(n, index_where + ".job_name", "job_name is empty");
  }
  c.job_name = n["job_name"].Scalar();
  const std::string w = index_where + " (job \"" + c.job_name + "\")";
  static const std::set<std::string, std::less<>> kKeys = {
      "job_name", "scrape_interval", "scrape_timeout", "metrics_path", "scheme", "params", "honor_labels",
      "honor_timestamps", "sample_limit", "target_limit", "label_limit", "label_name_length_limit", "label_value_length_limit",
      "body_size_limit", "static_configs", "file_sd_configs", "relabel_configs", "metric_relabel_configs",
      "scrape_protocols", "scrape_native_histograms", "always_scrape_classic_histograms", "scrape_classic_histograms",
      "fallback_scrape_protocol", "convert_classic_histograms_to_nhcb"};
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    if (kKeys.contains(k) || common::HttpClientConfigKeys().contains(k)) continue;
    if (KnownUnsupported().contains(k)) {
      TW_LOG(Warn, "{}: field \"{}\" is not supported by trainwatch; ignored", w, k);
      continue;
    }
    return Err(kv.first, w, "unknown field \"" + k + "\"");
  }
  c.scrape_interval_ms = g.scrape_interval_ms;
  if (n["scrape_interval"]) { ASSIGN_OR_RETURN(c.scrape_interval_ms, Dur(n["scrape_interval"], w + ".scrape_interval")); }
  if (c.scrape_interval_ms <= 0) return Err(n["scrape_interval"], w + ".scrape_interval", "must be positive");
  if (n["scrape_timeout"]) {
    ASSIGN_OR_RETURN(c.scrape_timeout_ms, Dur(n["scrape_timeout"], w + ".scrape_timeout"));
  } else {
    c.scrape_timeout_ms = std::min(g.scrape_timeout_ms, c.scrape_interval_ms);
  }
  if (c.scrape_timeout_ms <= 0) return Err(n["scrape_timeout"], w + ".scrape_timeout", "must be positive");
  if (c.scrape_timeout_ms > c.scrape_interval_ms) {
    return Err(n["scrape_timeout"] ? n["scrape_timeout"] : n, w + ".scrape_timeout",
               "scrape timeout greater than scrape interval for scrape config with job name \"" + c.job_name + "\"");
  }
  if (n["metrics_path"]) {
    ASSIGN_OR_RETURN(c.metrics_path, Str(n["metrics_path"], w + ".metrics_path"));
    if (c.metrics_path.empty() || c.metrics_path[0] != '/') {
      return Err(n["metrics_path"], w + ".metrics_path", "must start with \"/\"");
    }
  }
  if (n["scheme"]) {
    ASSIGN_OR_RETURN(c.scheme, Str(n["scheme"], w + ".scheme"));
    if (c.scheme != "http" && c.scheme != "https") {
      return Err(n["scheme"], w + ".scheme", "invalid scheme \"" + c.scheme + "\" (want http or https)");
    }
  }
  if (auto p = n["params"]; p && !p.IsNull()) {
    if (!p.IsMap()) return Err(p, w + ".params", "expected a mapping of name to a list of values");
    for (const auto& kv : p) {
      std::string k = kv.first.as<std::string>();
      if (!kv.second.IsSequence()) return Err(kv.second, w + ".params." + k, "expected a list of values");
      for (const auto& e : kv.second) {
        ASSIGN_OR_RETURN(std::string v, Str(e, w + ".params." + k));
        c.params[k].push_back(v);
      }
    }
  }
  if (n["honor_labels"]) { ASSIGN_OR_RETURN(c.honor_labels, Bool(n["honor_labels"], w + ".honor_labels")); }
  if (n["honor_timestamps"]) { ASSIGN_OR_RETURN(c.honor_timestamps, Bool(n["honor_timestamps"], w + ".honor_timestamps")); }
  if (n["sample_limit"]) { ASSIGN_OR_RETURN(c.sample_limit, Uint(n["sample_limit"], w + ".sample_limit")); }
  if (n["target_limit"]) { ASSIGN_OR_RETURN(c.target_limit, Uint(n["target_limit"], w + ".target_limit")); }
  if (n["label_limit"]) { ASSIGN_OR_RETURN(c.label_limit, Uint(n["label_limit"], w + ".label_limit")); }
  if (n["label_name_length_limit"]) {
    ASSIGN_OR_RETURN(c.label_name_length_limit, Uint(n["label_name_length_limit"], w + ".label_name_length_limit"));
  }
  if (n["label_value_length_limit"]) {
    ASSIGN_OR_RETURN(c.label_value_length_limit, Uint(n["label_value_length_limit"], w + ".label_value_length_limit"));
  }
  if (n["body_size_limit"]) {
    ASSIGN_OR_RETURN(std::string s, Str(n["body_size_limit"], w + ".body_size_limit"));
    auto b = ParseByteSize(s);
    if (!b.ok()) return Err(n["body_size_limit"], w + ".body_size_limit", b.error().message());
    c.body_size_limit = *b;
  }
  c.scrape_protocols = g.scrape_protocols;
  c.scrape_native_histograms = g.scrape_native_histograms;
  c.always_scrape_classic_histograms = g.always_scrape_classic_histograms;
  c.convert_classic_histograms_to_nhcb = g.convert_classic_histograms_to_nhcb;
  c.fallback_scrape_protocol = g.fallback_scrape_protocol;
  RETURN_IF_ERROR(ParseProtocols(n, w, &c));
  if (auto sc = n["static_configs"]; sc && !sc.IsNull()) {
    if (!sc.IsSequence()) return Err(sc, w + ".static_configs", "expected a list");
    for (size_t i = 0; i < sc.size(); i++) {
      ASSIGN_OR_RETURN(TargetGroup tg, ParseGroup(sc[i], w + ".static_configs[" + std::to_string(i) + "]"));
      tg.source = std::to_string(i);
      c.static_configs.push_back(std::move(tg));
    }
  }
  if (auto fs = n["file_sd_configs"]; fs && !fs.IsNull()) {
    if (!fs.IsSequence()) return Err(fs, w + ".file_sd_configs", "expected a list");
    for (size_t i = 0; i < fs.size(); i++) {
      std::string fw = w + ".file_sd_configs[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(CheckKeys(fs[i], fw, {"files", "refresh_interval"}));
      FileSdConfig f;
      if (!fs[i]["files"] || !fs[i]["files"].IsSequence() || fs[i]["files"].size() == 0) {
        return Err(fs[i], fw + ".files", "file service discovery config must contain at least one path name");
      }
      for (const auto& e : fs[i]["files"]) {
        ASSIGN_OR_RETURN(std::string p, Str(e, fw + ".files"));
        std::string base = p.substr(p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1);
        auto ends = [&](std::string_view suf) { return base.size() >= suf.size() && base.ends_with(suf); };
        if (!ends(".json") && !ends(".yml") && !ends(".yaml")) {
          return Err(e, fw + ".files", "path name \"" + p + "\" is not valid for file discovery (want *.json, *.yml or *.yaml)");
        }
        f.files.push_back(p);
      }
      if (fs[i]["refresh_interval"]) {
        ASSIGN_OR_RETURN(f.refresh_interval_ms, Dur(fs[i]["refresh_interval"], fw + ".refresh_interval"));
      }
      c.file_sd_configs.push_back(std::move(f));
    }
  }
  ASSIGN_OR_RETURN(c.relabel_configs, common::ParseRelabelConfigs(n["relabel_configs"], w + ".relabel_configs"));
  ASSIGN_OR_RETURN(c.metric_relabel_configs, common::ParseRelabelConfigs(n["metric_relabel_configs"], w + ".metric_relabel_configs"));
  RETURN_IF_ERROR(common::ParseHttpClientConfig(n, w, &c.http));
  // The values global may set are part of it: a reload that changes only
  // global's must restart the job's loops too.
  c.fingerprint = YAML::Dump(n) + "\n#" + std::to_string(c.scrape_interval_ms) + "/" + std::to_string(c.scrape_timeout_ms);
  for (const std::string& p : c.scrape_protocols) c.fingerprint += "/" + p;
  c.fingerprint += fmt::format("/{:d}{:d}{:d}/{}", c.scrape_native_histograms, c.always_scrape_classic_histograms,
                               c.convert_classic_histograms_to_nhcb, c.fallback_scrape_protocol);
  return c;
}

}  // namespace

std::string AcceptHeaderFor(const ScrapeConfig& c) {
  if (c.scrape_protocols.empty() && !c.scrape_native_histograms) {
    return "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
           "text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
  }
  std::vector<std::string_view> names;
  if (!c.scrape_protocols.empty()) {
    names.assign(c.scrape_protocols.begin(), c.scrape_protocols.end());
  } else {
    for (const auto& [name, header] : kProtocols) names.push_back(name);
  }
  // Prometheus's acceptHeader: q from 0.<n+1> down, then */*.
  std::string r;
  int weight = static_cast<int>(std::size(kProtocols)) + 1;
  for (std::string_view name : names) {
    for (const auto& [n, header] : kProtocols) {
      if (n != name) continue;
      r += std::string(header) + ";q=0." + std::to_string(weight--) + ",";
    }
  }
  return r + "*/*;q=0." + std::to_string(weight);
}

std::string_view EffectiveContentType(const ScrapeConfig& c, std::string_view content_type) {
  if (c.fallback_scrape_protocol.empty()) return content_type;
  // Prometheus's textparse extractMediaType: the media type, trimmed and
  // case-folded, must be one trainwatch reads; anything else (blank,
  // unparsable, application/json, ...) takes the fallback.
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  std::string lower(media);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "application/openmetrics-text" || lower == "application/vnd.google.protobuf" || lower == "text/plain") {
    return content_type;
  }
  for (const auto& [name, header] : kProtocols) {
    if (name == c.fallback_scrape_protocol) return header;
  }
  return content_type;
}

std::string FormatDuration(int64_t ms) {
  if (ms == 0) return "0s";
  std::string r;
  static constexpr std::pair<char, int64_t> kUnits[] = {
      {'y', 365LL * 86400000}, {'w', 7LL * 86400000}, {'d', 86400000}, {'h', 3600000}, {'m', 60000}, {'s', 1000}};
  for (auto [u, size] : kUnits) {
    if (ms >= size) {
      r += std::to_string(ms / size);
      r += u;
      ms %= size;
    }
  }
  if (ms > 0) r += std::to_string(ms) + "ms";
  return r;
}

Result<std::vector<ScrapeConfig>> ParseScrapeConfigs(const YAML::Node& root, const GlobalDefaults& global) {
  std::vector<ScrapeConfig> out;
  if (!root || !root.IsMap()) return out;
  YAML::Node sc = root["scrape_configs"];
  if (!sc || sc.IsNull()) return out;
  if (!sc.IsSequence()) return Err(sc, "scrape_configs", "expected a list");
  std::set<std::string> names;
  try {
    // global's scrape_protocols, scrape_native_histograms,
    // always_scrape_classic_histograms, convert_classic_histograms_to_nhcb
    // and fallback_scrape_protocol are every job's defaults.
    GlobalDefaults g = global;
    if (const YAML::Node gn = root["global"]; gn && gn.IsMap()) {
      ScrapeConfig defaults;
      defaults.scrape_protocols = g.scrape_protocols;
      defaults.scrape_native_histograms = g.scrape_native_histograms;
      defaults.always_scrape_classic_histograms = g.always_scrape_classic_histograms;
      defaults.convert_classic_histograms_to_nhcb = g.convert_classic_histograms_to_nhcb;
      defaults.fallback_scrape_protocol = g.fallback_scrape_protocol;
      RETURN_IF_ERROR(ParseProtocols(gn, "global", &defaults));
      g.fallback_scrape_protocol = defaults.fallback_scrape_protocol;
      g.scrape_protocols = defaults.scrape_protocols;
      g.scrape_native_histograms = defaults.scrape_native_histograms;
      g.always_scrape_classic_histograms = defaults.always_scrape_classic_histograms;
      g.convert_classic_histograms_to_nhcb = defaults.convert_classic_histograms_to_nhcb;
    }
    for (size_t i = 0; i < sc.size(); i++) {
      ASSIGN_OR_RETURN(ScrapeConfig c, ParseOne(sc[i], "scrape_configs[" + std::to_string(i) + "]", g));
      if (!names.insert(c.job_name).second) {
        return Err(sc[i]["job_name"], "scrape_configs[" + std::to_string(i) + "]",
                   "found multiple scrape configs with job name \"" + c.job_name + "\"");
      }
      out.push_back(std::move(c));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("scrape_configs: ") + e.what());
  }
  return out;
}

}  // namespace trainwatch::scrape
