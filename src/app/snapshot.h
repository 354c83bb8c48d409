#pragma once
// One (re)load of serve's and agent's configuration: the config file read
// once (one file read, one YAML parse) and --alertmanager.config.file read
// once, into an immutable snapshot that every component receives. A reload
// builds a whole new snapshot before any component sees it, so a file edited
// during a reload is applied either entirely or not at all.

#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "app/config.h"
#include "base/status.h"
#include "remote/config.h"
#include "rules/manager.h"
#include "scrape/config.h"

namespace trainwatch::http {
class WebSecurity;
}
namespace trainwatch::notify {
struct Config;
}

namespace trainwatch::app {

// What the command line says about the files and the derived sections.
struct SnapshotInputs {
  std::string config_file;  // empty: none (every section at its default)
  std::string listen;       // for the self-scrape job
  bool scrape_self = true;
  const http::WebSecurity* web = nullptr;  // the self-scrape's TLS and token; outlives the load
  std::vector<std::string> remote_write_urls;  // --remote-write (agent), appended as "cli-<i>"
  // serve only: rules, `alerting:` and the embedded Alertmanager.
  bool serve = true;
  bool rules_default_pack = true;  // --rules.default-pack
  std::string external_url;
  std::string alertmanager_config_file;  // empty: the built-in record-only configuration
};

// Everything the components need, from one parse. Immutable once loaded;
// shared between threads as std::shared_ptr<const ConfigSnapshot>.
struct ConfigSnapshot {
  std::string config_file;
  Config config;  // the parsed file: logs, otlp, global, the Prometheus sections
  std::vector<scrape::ScrapeConfig> scrape;  // with the self-scrape job when added
  std::vector<remote::RemoteWriteConfig> remote_write;
  std::vector<remote::RemoteReadConfig> remote_read;
  // serve only (empty otherwise):
  rules::ManagerConfig rules;  // rule files expanded, the default pack, evaluation interval, external labels
  YAML::Node alerting;  // the `alerting:` section, validated; null when absent
  std::shared_ptr<const notify::Config> alertmanager;
};

// Reads and validates everything; the first error, with the messages of the
// per-section loaders (e.g. "config file x.yml: line 3: ...",
// "alertmanager config: ..."). On an error nothing is returned, so a bad file
// changes nothing.
Result<std::shared_ptr<const ConfigSnapshot>> LoadConfigSnapshot(const SnapshotInputs& in);

// The same from the config file's text, already read: LoadConfigSnapshot is
// one file::ReadFile and this. `in.config_file` names the file in messages
// and anchors rule_files; it is not read.
Result<std::shared_ptr<const ConfigSnapshot>> ParseConfigSnapshot(const SnapshotInputs& in, std::string_view yaml);

// The same from the config file already parsed (start-up: ParseCommandLine
// read and parsed it for the storage and web settings, so start-up reads it
// once). `in.config_file` names the file in messages and anchors rule_files;
// it is not read. --alertmanager.config.file is read as by LoadConfigSnapshot.
Result<std::shared_ptr<const ConfigSnapshot>> DeriveConfigSnapshot(const SnapshotInputs& in, const Config& parsed);

// Start-up's snapshot: from `parsed` when ParseCommandLine parsed the config
// file, else LoadConfigSnapshot.
Result<std::shared_ptr<const ConfigSnapshot>> FirstConfigSnapshot(const SnapshotInputs& in,
                                                                  const std::shared_ptr<const Config>& parsed);

}  // namespace trainwatch::app
