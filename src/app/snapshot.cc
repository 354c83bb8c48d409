#include "app/snapshot.h"

#include "app/wiring.h"
#include "base/file.h"
#include "notify/config.h"
#include "notify/notifier.h"
#include "rules/sender.h"

namespace trainwatch::app {
namespace {

// Rules: the config's rule_files (globs relative to the config file's
// directory) plus the built-in training pack, global.evaluation_interval and
// global.external_labels; *alerting gets the `alerting:` section.
Result<rules::ManagerConfig> RulesConfigOf(const SnapshotInputs& in, const Config& cfg, YAML::Node* alerting) {
  rules::ManagerConfig rc;
  rc.external_url = in.external_url;
  if (in.rules_default_pack) {
    rc.sources.push_back({std::string(rules::kDefaultRulePackName), std::string(rules::DefaultRulePack()), true});
  }
  if (in.config_file.empty()) return rc;
  rc.evaluation_interval_ms = cfg.evaluation_interval_ms;
  const YAML::Node& p = cfg.prometheus;
  if (!p || !p.IsMap()) return rc;
  if (const YAML::Node a = p["alerting"]) *alerting = a;  // absent: a zombie node, whose assignment throws
  if (const YAML::Node g = p["global"]; g && g.IsMap()) {
    if (const YAML::Node ext = g["external_labels"]; ext && ext.IsMap()) {
      std::vector<model::Label> ls;
      for (const auto& kv : ext) ls.push_back({kv.first.Scalar(), kv.second.Scalar()});
      auto l = model::Labels::FromUnsorted(std::move(ls));
      if (!l.ok()) return l.error().Annotate("config file " + in.config_file + ": global.external_labels");
      rc.external_labels = std::move(*l);
    }
  }
  std::vector<std::string> patterns;
  if (const YAML::Node rf = p["rule_files"]; rf && rf.IsSequence()) {
    for (const auto& f : rf) patterns.push_back(f.Scalar());
  }
  size_t slash = in.config_file.rfind('/');
  std::string dir = slash == std::string::npos ? "." : in.config_file.substr(0, slash);
  ASSIGN_OR_RETURN(std::vector<std::string> files, rules::ExpandRuleFiles(patterns, dir));
  for (std::string& f : files) rc.sources.push_back({std::move(f), "", false});
  return rc;
}

// Every section of `cfg` (the parse of in.config_file), then the
// Alertmanager file: all or nothing.
Result<std::shared_ptr<const ConfigSnapshot>> Derive(const SnapshotInputs& in, Config cfg) {
  auto s = std::make_shared<ConfigSnapshot>();
  s->config_file = in.config_file;
  ASSIGN_OR_RETURN(s->scrape, ScrapeConfigsOf(cfg, in.config_file, in.listen, in.scrape_self, in.web));
  ASSIGN_OR_RETURN(s->remote_write, RemoteWriteConfigsOf(cfg, in.config_file, in.remote_write_urls));
  ASSIGN_OR_RETURN(s->remote_read, RemoteReadConfigsOf(cfg, in.config_file));
  if (in.serve) {
    auto am = in.alertmanager_config_file.empty() ? notify::ParseConfig(notify::kDefaultConfigYaml)
                                                  : notify::LoadConfigFile(in.alertmanager_config_file);
    if (!am.ok()) return am.error().Annotate("alertmanager config");
    s->alertmanager = std::move(*am);
    ASSIGN_OR_RETURN(s->rules, RulesConfigOf(in, cfg, &s->alerting));
    if (auto ac = rules::ParseAlertingConfig(s->alerting); !ac.ok()) {
      return ac.error().Annotate("config file " + in.config_file);
    }
  }
  s->config = std::move(cfg);
  return std::shared_ptr<const ConfigSnapshot>(std::move(s));
}

}  // namespace

Result<std::shared_ptr<const ConfigSnapshot>> LoadConfigSnapshot(const SnapshotInputs& in) {
  if (in.config_file.empty()) return Derive(in, Config{});  // the default log patterns included
  // The one read of the config file in this (re)load; every section comes
  // from its one parse (as LoadConfigFile: the same messages).
  std::string data;
  RETURN_IF_ERROR(file::ReadFile(in.config_file, &data));
  return ParseConfigSnapshot(in, data);
}

Result<std::shared_ptr<const ConfigSnapshot>> ParseConfigSnapshot(const SnapshotInputs& in, std::string_view yaml) {
  auto cfg = ParseConfig(yaml);
  if (!cfg.ok()) return cfg.error().Annotate("config file " + in.config_file);
  return Derive(in, std::move(*cfg));
}

Result<std::shared_ptr<const ConfigSnapshot>> DeriveConfigSnapshot(const SnapshotInputs& in, const Config& parsed) {
  return Derive(in, parsed);  // a copy: the YAML nodes are shared, never modified
}

Result<std::shared_ptr<const ConfigSnapshot>> FirstConfigSnapshot(const SnapshotInputs& in,
                                                                  const std::shared_ptr<const Config>& parsed) {
  if (parsed != nullptr && !in.config_file.empty()) return DeriveConfigSnapshot(in, *parsed);
  return LoadConfigSnapshot(in);
}

}  // namespace trainwatch::app
