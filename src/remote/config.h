#pragma once
// `remote_write:` of a prometheus.yml, parsed and defaulted as Prometheus
// 2.42 does (config/config.go DefaultRemoteWriteConfig, DefaultQueueConfig).
// Errors name the entry and field: `remote_write[1].queue_config.capacity:
// invalid integer "x"`. Keys Prometheus knows but trainwatch does not
// implement (sigv4, oauth2, azuread, proxy_url, ...) are logged and ignored,
// as for scrape jobs.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "common/http_client.h"
#include "common/relabel.h"

namespace trainwatch::remote {

struct QueueConfig {
  uint64_t capacity = 2500;            // samples buffered per shard before the reader waits
  uint64_t max_shards = 200;           // concurrent requests at most
  uint64_t min_shards = 1;             // concurrent requests at start
  uint64_t max_samples_per_send = 500;
  int64_t batch_send_deadline_ms = 5000;  // a partial batch is sent after this long
  int64_t min_backoff_ms = 30;         // first retry delay; doubles per retry
  int64_t max_backoff_ms = 5000;
  bool retry_on_http_429 = false;      // Prometheus 2.42's default: a 429 drops the batch
  // How often the shard count is reconsidered (Prometheus: 10 s). Not a
  // YAML key; tests shorten it.
  int64_t reshard_window_ms = 10000;
};

struct RemoteWriteConfig {
  std::string url;   // http(s)://host[:port]/path
  std::string name;  // as given, or the first 6 hex digits of the config hash (Prometheus's)
  int64_t remote_timeout_ms = 30000;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<common::RelabelConfig> write_relabel_configs;
  common::HttpClientConfig http;
  QueueConfig queue;
  // Native histograms are sent only when set, as in Prometheus (a receiver
  // that does not know them could refuse whole batches).
  bool send_native_histograms = false;
  // global.external_labels: added to every series that lacks the label,
  // before write_relabel_configs, as Prometheus does.
  model::Labels external_labels;
  // The entry's YAML (and the external labels) as written: equal hashes mean an unchanged queue, whose
  // send position a reload keeps.
  std::string fingerprint;
  // "scheme://host:port" and the path (with query) of url.
  std::string base, path;
};

// Parses `root["remote_write"]` (root is the whole prometheus.yml; absent or
// null: none). Names are unique; a duplicate is an error, as in Prometheus.
Result<std::vector<RemoteWriteConfig>> ParseRemoteWriteConfigs(const YAML::Node& root);

// A `remote_read:` entry (Prometheus 2.42's DefaultRemoteReadConfig);
// remote/read.h reads through it.
struct RemoteReadConfig {
  std::string url;
  std::string name;  // as given, or the first 6 hex digits of the entry's hash
  int64_t remote_timeout_ms = 60000;
  std::vector<std::pair<std::string, std::string>> headers;
  common::HttpClientConfig http;
  // The store is asked only when the selector has each as an equality matcher.
  std::vector<model::Label> required_matchers;
  bool read_recent = false;            // false: only for the time before the oldest local sample
  bool filter_external_labels = true;  // match global.external_labels in the store, drop them from answers
  model::Labels external_labels;
  std::string base, path;  // "scheme://host:port" and the path (with query) of url
};

// Parses `root["remote_read"]` as ParseRemoteWriteConfigs does remote_write.
Result<std::vector<RemoteReadConfig>> ParseRemoteReadConfigs(const YAML::Node& root);

}  // namespace trainwatch::remote
