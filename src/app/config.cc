#include "app/config.h"

#include <cctype>
#include <charconv>
#include <set>

#include "base/file.h"
#include "base/log.h"
#include "base/units.h"
#include "common/yaml.h"
#include "remote/config.h"

namespace trainwatch::app {
namespace {

// One YAML reader for every config file (common/yaml.h): "line N: <field>: <message>".
using common::yaml::Bool;
using common::yaml::CheckKeys;
using common::yaml::Dur;
using common::yaml::Err;
using common::yaml::Str;

Status ParseGlobal(const YAML::Node& g, Config* c) {
  if (!g || g.IsNull()) return Status::OK();
  if (!g.IsMap()) return Err(g, "global", "expected a mapping");
  if (g["scrape_interval"]) { ASSIGN_OR_RETURN(c->scrape_interval_ms, Dur(g["scrape_interval"], "global.scrape_interval")); }
  if (g["scrape_timeout"]) { ASSIGN_OR_RETURN(c->scrape_timeout_ms, Dur(g["scrape_timeout"], "global.scrape_timeout")); }
  if (g["evaluation_interval"]) {
    ASSIGN_OR_RETURN(c->evaluation_interval_ms, Dur(g["evaluation_interval"], "global.evaluation_interval"));
  }
  if (g["external_labels"] && !g["external_labels"].IsMap() && !g["external_labels"].IsNull()) {
    return Err(g["external_labels"], "global.external_labels", "expected a mapping");
  }
  return Status::OK();
}

// Prometheus 3's `otlp:` (config.OTLPConfig). convert_histograms_to_nhcb is
// applied; the other keys Prometheus knows are accepted with a warning
// (trainwatch translates as Prometheus's defaults do); others are errors.
Status ParseOtlp(const YAML::Node& n, ingest::OtlpOptions* o) {
  if (!n || n.IsNull()) return Status::OK();
  if (!n.IsMap()) return Err(n, "otlp", "expected a mapping");
  static const std::set<std::string, std::less<>> kIgnored = {
      "promote_all_resource_attributes", "promote_resource_attributes", "ignore_resource_attributes",
      "translation_strategy", "keep_identifying_resource_attributes", "promote_scope_metadata",
      "label_name_underscore_sanitization", "label_name_preserve_multiple_underscores"};
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    if (key == "convert_histograms_to_nhcb") {
      ASSIGN_OR_RETURN(o->convert_histograms_to_nhcb, Bool(kv.second, "otlp." + key));
    } else if (kIgnored.contains(key)) {
      TW_LOG(Warn, "otlp: field \"{}\" is not supported by trainwatch; ignored", key);
    } else {
      return Err(kv.first, "otlp", "unknown field \"" + key + "\"");
    }
  }
  return Status::OK();
}

Status ParsePrometheusSections(const YAML::Node& root, Config* c) {
  RETURN_IF_ERROR(ParseGlobal(root["global"], c));
  RETURN_IF_ERROR(ParseOtlp(root["otlp"], &c->otlp));
  if (auto sc = root["scrape_configs"]; sc && !sc.IsNull()) {
    if (!sc.IsSequence()) return Err(sc, "scrape_configs", "expected a list");
    for (size_t i = 0; i < sc.size(); i++) {
      std::string where = "scrape_configs[" + std::to_string(i) + "]";
      if (!sc[i].IsMap()) return Err(sc[i], where, "expected a mapping");
      if (!sc[i]["job_name"] || !sc[i]["job_name"].IsScalar() || sc[i]["job_name"].Scalar().empty()) {
        return Err(sc[i], where + ".job_name", "missing or empty");
      }
      where += " (job \"" + sc[i]["job_name"].Scalar() + "\")";
      for (std::string_view d : {"scrape_interval", "scrape_timeout"}) {
        if (sc[i][std::string(d)]) RETURN_IF_ERROR(Dur(sc[i][std::string(d)], where + "." + std::string(d)).status());
      }
    }
  }
  if (auto rf = root["rule_files"]; rf && !rf.IsNull()) {
    if (!rf.IsSequence()) return Err(rf, "rule_files", "expected a list");
    for (size_t i = 0; i < rf.size(); i++) {
      RETURN_IF_ERROR(Str(rf[i], "rule_files[" + std::to_string(i) + "]").status());
    }
  }
  if (auto a = root["alerting"]; a && !a.IsNull() && !a.IsMap()) return Err(a, "alerting", "expected a mapping");
  RETURN_IF_ERROR(remote::ParseRemoteWriteConfigs(root).status());
  RETURN_IF_ERROR(remote::ParseRemoteReadConfigs(root).status());
  return Status::OK();
}

Status ParseTrainwatch(const YAML::Node& t, Config* c) {
  if (!t || t.IsNull()) return Status::OK();
  RETURN_IF_ERROR(CheckKeys(t, "trainwatch", {"storage", "web", "scrape_self", "alertmanager", "logs"}));
  RETURN_IF_ERROR(ParseLogsConfig(t["logs"], &c->logs));
  if (auto am = t["alertmanager"]; am && !am.IsNull()) {
    RETURN_IF_ERROR(CheckKeys(am, "trainwatch.alertmanager", {"config_file"}));
    if (am["config_file"]) {
      ASSIGN_OR_RETURN(c->alertmanager_config_file, Str(am["config_file"], "trainwatch.alertmanager.config_file"));
    }
  }
  if (auto ss = t["scrape_self"]; ss && !ss.IsNull()) {
    ASSIGN_OR_RETURN(c->scrape_self, Bool(ss, "trainwatch.scrape_self"));
  }
  if (auto s = t["storage"]; s && !s.IsNull()) {
    RETURN_IF_ERROR(CheckKeys(s, "trainwatch.storage", {"data_dir", "retention_time", "retention_size", "wal_sync"}));
    if (s["data_dir"]) {
      ASSIGN_OR_RETURN(std::string d, Str(s["data_dir"], "trainwatch.storage.data_dir"));
      if (d.empty()) return Err(s["data_dir"], "trainwatch.storage.data_dir", "must not be empty");
      c->storage.data_dir = d;
    }
    if (s["retention_time"]) {
      ASSIGN_OR_RETURN(c->storage.retention_ms, Dur(s["retention_time"], "trainwatch.storage.retention_time"));
    }
    if (s["retention_size"]) {
      ASSIGN_OR_RETURN(std::string v, Str(s["retention_size"], "trainwatch.storage.retention_size"));
      auto b = ParseByteSize(v);
      if (!b.ok()) return Err(s["retention_size"], "trainwatch.storage.retention_size", b.error().message());
      c->storage.retention_bytes = *b;
    }
    if (s["wal_sync"]) {
      ASSIGN_OR_RETURN(std::string v, Str(s["wal_sync"], "trainwatch.storage.wal_sync"));
      auto w = ParseWalSync(v);
      if (!w.ok()) return Err(s["wal_sync"], "trainwatch.storage.wal_sync", w.error().message());
      c->storage.wal_sync = *w;
    }
  }
  if (auto w = t["web"]; w && !w.IsNull()) {
    RETURN_IF_ERROR(CheckKeys(w, "trainwatch.web", {"listen"}));
    if (w["listen"]) { ASSIGN_OR_RETURN(c->listen, Str(w["listen"], "trainwatch.web.listen")); }
  }
  return Status::OK();
}

}  // namespace

Result<int64_t> ParseConfigDuration(std::string_view s) { return ParseDurationMs(s); }

Result<uint64_t> ParseByteSize(std::string_view s) { return trainwatch::ParseByteSize(s); }

Result<tsdb::WalSync> ParseWalSync(std::string_view s) {
  if (s == "per-request") return tsdb::WalSync::kPerRequest;
  if (s == "interval") return tsdb::WalSync::kInterval;
  return Status::InvalidArgument("invalid WAL sync mode \"" + std::string(s) + "\" (want per-request or interval)");
}

Result<Config> ParseConfig(std::string_view yaml) {
  Config c;  // c.logs has the default log patterns, for a file without trainwatch.logs
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("parse yaml: " + std::string(e.what()));
  }
  if (!root || root.IsNull()) return c;
  try {
    RETURN_IF_ERROR(CheckKeys(root, "",
                              {"global", "alerting", "rule_files", "scrape_config_files", "scrape_configs", "storage",
                               "tracing", "remote_write", "remote_read", "otlp", "runtime", "trainwatch"}));
    RETURN_IF_ERROR(ParsePrometheusSections(root, &c));
    RETURN_IF_ERROR(ParseTrainwatch(root["trainwatch"], &c));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string(e.what()));
  }
  c.prometheus = YAML::Clone(root);
  c.prometheus.remove("trainwatch");
  return c;
}

Result<Config> LoadConfigFile(const std::string& path) {
  std::string data;
  RETURN_IF_ERROR(file::ReadFile(path, &data));
  auto c = ParseConfig(data);
  if (!c.ok()) return c.error().Annotate("config file " + path);
  return c;
}

}  // namespace trainwatch::app
