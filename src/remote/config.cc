#include "remote/config.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "base/crc32c.h"
#include "base/log.h"
#include "common/url.h"
#include "common/yaml.h"

namespace trainwatch::remote {
namespace {

using common::yaml::Bool;
using common::yaml::CheckKeys;
using common::yaml::Dur;
using common::yaml::Err;
using common::yaml::Str;
using common::yaml::Uint;

// "http://host:port/path?q" as base and path (with the query); InvalidArgument otherwise.
template <typename C>
Status SplitUrl(const YAML::Node& n, const std::string& url, const std::string& where, C* c) {
  auto u = common::Url::Parse(url);
  if (!u.ok()) return Err(n, where, u.status().message());
  if (u->scheme != "http" && u->scheme != "https") {
    return Err(n, where, "unsupported scheme \"" + u->scheme + "\" (want http or https)");
  }
  c->base = u->Base();
  c->path = u->RequestUri();
  return Status::OK();
}

const std::set<std::string, std::less<>>& IgnoredKeys() {
  static const std::set<std::string, std::less<>> k = {
      "send_exemplars", "sigv4", "oauth2", "azuread", "proxy_url", "no_proxy",
      "proxy_from_environment", "proxy_connect_header", "follow_redirects", "enable_http2", "metadata_config"};
  return k;
}

Status ParseQueue(const YAML::Node& q, const std::string& w, QueueConfig* out) {
  if (!q || q.IsNull()) return Status::OK();
  RETURN_IF_ERROR(CheckKeys(q, w, {"capacity", "max_shards", "min_shards", "max_samples_per_send",
                                   "batch_send_deadline", "min_backoff", "max_backoff", "retry_on_http_429",
                                   "max_retries", "sample_age_limit"}));
  for (auto [key, dst] : {std::pair{"capacity", &out->capacity}, std::pair{"max_shards", &out->max_shards},
                          std::pair{"min_shards", &out->min_shards},
                          std::pair{"max_samples_per_send", &out->max_samples_per_send}}) {
    if (q[key]) { ASSIGN_OR_RETURN(*dst, Uint(q[key], w + "." + key)); }
  }
  for (auto [key, dst] : {std::pair{"batch_send_deadline", &out->batch_send_deadline_ms},
                          std::pair{"min_backoff", &out->min_backoff_ms}, std::pair{"max_backoff", &out->max_backoff_ms}}) {
    if (q[key]) { ASSIGN_OR_RETURN(*dst, Dur(q[key], w + "." + key)); }
  }
  if (q["retry_on_http_429"]) { ASSIGN_OR_RETURN(out->retry_on_http_429, Bool(q["retry_on_http_429"], w + ".retry_on_http_429")); }
  if (q["max_retries"] || q["sample_age_limit"]) {
    TW_LOG(Warn, "{}: max_retries and sample_age_limit are not used by trainwatch; failed sends retry until they succeed", w);
  }
  if (out->max_samples_per_send == 0) return Err(q, w + ".max_samples_per_send", "must be positive");
  if (out->capacity == 0) return Err(q, w + ".capacity", "must be positive");
  if (out->max_shards == 0) return Err(q, w + ".max_shards", "must be positive");
  if (out->min_shards == 0) out->min_shards = 1;
  if (out->min_shards > out->max_shards) return Err(q, w + ".min_shards", "must not exceed max_shards");
  if (out->batch_send_deadline_ms <= 0) return Err(q, w + ".batch_send_deadline", "must be positive");
  if (out->min_backoff_ms <= 0) return Err(q, w + ".min_backoff", "must be positive");
  if (out->max_backoff_ms < out->min_backoff_ms) return Err(q, w + ".max_backoff", "must not be below min_backoff");
  return Status::OK();
}

// `headers:` of a remote_write or remote_read entry.
Status ParseHeaders(const YAML::Node& h, const std::string& w, std::vector<std::pair<std::string, std::string>>* out) {
  if (!h || h.IsNull()) return Status::OK();
  if (!h.IsMap()) return Err(h, w + ".headers", "expected a mapping of header name to value");
  for (const auto& kv : h) {
    std::string k = kv.first.as<std::string>();
    ASSIGN_OR_RETURN(std::string v, Str(kv.second, w + ".headers." + k));
    // Prometheus refuses headers it sets itself (config.go reservedHeaders).
    static const std::set<std::string, std::less<>> kReserved = {
        "authorization", "host", "content-encoding", "content-length", "content-type", "user-agent", "connection",
        "keep-alive", "proxy-authenticate", "proxy-authorization", "www-authenticate", "accept-encoding",
        "x-prometheus-remote-write-version", "x-prometheus-remote-read-version"};
    std::string lower;
    for (char ch : k) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
    if (kReserved.contains(lower)) return Err(kv.first, w + ".headers", "\"" + k + "\" is a reserved header; it cannot be set");
    out->emplace_back(k, v);
  }
  return Status::OK();
}

// The keys an entry may have: its own, http_config's, and those logged and ignored.
Status CheckEntryKeys(const YAML::Node& n, const std::string& w, const std::set<std::string, std::less<>>& own) {
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    if (own.contains(k) || common::HttpClientConfigKeys().contains(k)) continue;
    if (IgnoredKeys().contains(k)) {
      TW_LOG(Warn, "{}: field \"{}\" is not supported by trainwatch; ignored", w, k);
      continue;
    }
    return Err(kv.first, w, "unknown field \"" + k + "\"");
  }
  return Status::OK();
}

// global.external_labels of a prometheus.yml.
Result<model::Labels> ExternalLabels(const YAML::Node& root) {
  if (const YAML::Node g = root["global"]; g && g.IsMap()) {
    if (const YAML::Node e = g["external_labels"]; e && e.IsMap()) {
      std::vector<model::Label> ls;
      for (const auto& kv : e) ls.push_back({kv.first.Scalar(), kv.second.Scalar()});
      auto l = model::Labels::FromUnsorted(std::move(ls));
      if (!l.ok()) return l.error().Annotate("global.external_labels");
      return std::move(*l);
    }
  }
  return model::Labels();
}

// The fields remote_write and remote_read entries share: url (split into
// base and path), name, remote_timeout, headers and http_config.
template <typename C>
Status ParseCommon(const YAML::Node& n, const std::string& w, C* c) {
  if (!n["url"] || n["url"].IsNull()) return Err(n, w + ".url", "missing");
  ASSIGN_OR_RETURN(c->url, Str(n["url"], w + ".url"));
  RETURN_IF_ERROR(SplitUrl(n["url"], c->url, w + ".url", c));
  if (n["name"]) { ASSIGN_OR_RETURN(c->name, Str(n["name"], w + ".name")); }
  if (n["remote_timeout"]) {
    ASSIGN_OR_RETURN(c->remote_timeout_ms, Dur(n["remote_timeout"], w + ".remote_timeout"));
    if (c->remote_timeout_ms <= 0) return Err(n["remote_timeout"], w + ".remote_timeout", "must be positive");
  }
  RETURN_IF_ERROR(ParseHeaders(n["headers"], w, &c->headers));
  return common::ParseHttpClientConfig(n, w, &c->http);
}

Result<RemoteWriteConfig> ParseOne(const YAML::Node& n, const std::string& w) {
  RemoteWriteConfig c;
  if (!n.IsMap()) return Err(n, w, "expected a mapping");
  RETURN_IF_ERROR(CheckEntryKeys(n, w, {"url", "name", "remote_timeout", "headers", "write_relabel_configs", "queue_config",
                                        "send_native_histograms"}));
  RETURN_IF_ERROR(ParseCommon(n, w, &c));
  if (n["send_native_histograms"]) {
    ASSIGN_OR_RETURN(c.send_native_histograms, Bool(n["send_native_histograms"], w + ".send_native_histograms"));
  }
  ASSIGN_OR_RETURN(c.write_relabel_configs,
                   common::ParseRelabelConfigs(n["write_relabel_configs"], w + ".write_relabel_configs"));
  RETURN_IF_ERROR(ParseQueue(n["queue_config"], w + ".queue_config", &c.queue));
  c.fingerprint = YAML::Dump(n);
  if (c.name.empty()) c.name = fmt::format("{:06x}", crc32c::Value(c.fingerprint) & 0xffffff);
  return c;
}

Result<RemoteReadConfig> ParseReadOne(const YAML::Node& n, const std::string& w) {
  RemoteReadConfig c;
  if (!n.IsMap()) return Err(n, w, "expected a mapping");
  RETURN_IF_ERROR(CheckEntryKeys(n, w, {"url", "name", "remote_timeout", "headers", "required_matchers", "read_recent",
                                        "filter_external_labels"}));
  RETURN_IF_ERROR(ParseCommon(n, w, &c));
  if (auto m = n["required_matchers"]; m && !m.IsNull()) {
    if (!m.IsMap()) return Err(m, w + ".required_matchers", "expected a mapping of label name to value");
    for (const auto& kv : m) {
      const std::string k = kv.first.as<std::string>();
      if (!model::IsValidLabelName(k)) return Err(kv.first, w + ".required_matchers", "invalid label name \"" + k + "\"");
      ASSIGN_OR_RETURN(std::string v, Str(kv.second, w + ".required_matchers." + k));
      c.required_matchers.push_back({k, v});
    }
  }
  if (n["read_recent"]) { ASSIGN_OR_RETURN(c.read_recent, Bool(n["read_recent"], w + ".read_recent")); }
  if (n["filter_external_labels"]) {
    ASSIGN_OR_RETURN(c.filter_external_labels, Bool(n["filter_external_labels"], w + ".filter_external_labels"));
  }
  if (c.name.empty()) c.name = fmt::format("{:06x}", crc32c::Value(YAML::Dump(n)) & 0xffffff);
  return c;
}

// root[key] (a list, or absent / null: none), each entry parsed by
// one(node, "key[i]", global.external_labels); names unique, as Prometheus
// requires.
template <typename C, typename One>
Result<std::vector<C>> ParseEntries(const YAML::Node& root, const std::string& key, const std::string& what, One one) {
  std::vector<C> out;
  if (!root || !root.IsMap()) return out;
  YAML::Node list = root[key];
  if (!list || list.IsNull()) return out;
  if (!list.IsSequence()) return Err(list, key, "expected a list");
  ASSIGN_OR_RETURN(model::Labels ext, ExternalLabels(root));
  std::set<std::string> names;
  try {
    for (size_t i = 0; i < list.size(); i++) {
      const std::string w = key + "[" + std::to_string(i) + "]";
      ASSIGN_OR_RETURN(C c, one(list[i], w, ext));
      if (!names.insert(c.name).second) {
        return Err(list[i]["name"] ? list[i]["name"] : list[i], w + ".name",
                   "found multiple " + what + " configs with job name \"" + c.name + "\"");
      }
      out.push_back(std::move(c));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(key + ": " + e.what());
  }
  return out;
}

}  // namespace

Result<std::vector<RemoteWriteConfig>> ParseRemoteWriteConfigs(const YAML::Node& root) {
  return ParseEntries<RemoteWriteConfig>(
      root, "remote_write", "remote write", [](const YAML::Node& n, const std::string& w, const model::Labels& ext) {
        auto c = ParseOne(n, w);
        if (c.ok()) {
          c->external_labels = ext;
          c->fingerprint += "\n# external_labels " + ext.ToString();  // a change restarts the queue's sender
        }
        return c;
      });
}

Result<std::vector<RemoteReadConfig>> ParseRemoteReadConfigs(const YAML::Node& root) {
  return ParseEntries<RemoteReadConfig>(
      root, "remote_read", "remote read", [](const YAML::Node& n, const std::string& w, const model::Labels& ext) {
        auto c = ParseReadOne(n, w);
        if (c.ok()) c->external_labels = ext;
        return c;
      });
}

}  // namespace trainwatch::remote
