#pragma once
// `scrape_configs` of a prometheus.yml, parsed and defaulted as Prometheus
// 2.42 does (global scrape_interval/scrape_timeout, metrics_path /metrics,
// scheme http, honor_timestamps true). Errors name the job and the field:
// `scrape_configs[2] (job "node").tls_config: unknown field "foo"`.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "common/http_client.h"
#include "common/relabel.h"

namespace trainwatch::scrape {

// One static_configs entry, or one group of a file_sd file.
struct TargetGroup {
  std::vector<std::string> targets;                  // host:port
  std::vector<std::pair<std::string, std::string>> labels;
  std::string source;                                // e.g. "0" for static, or the file path
};

struct FileSdConfig {
  std::vector<std::string> files;  // paths or globs (only in the last path element, as Prometheus)
  int64_t refresh_interval_ms = 5 * 60 * 1000;
};

struct ScrapeConfig {
  std::string job_name;
  int64_t scrape_interval_ms = 0;
  int64_t scrape_timeout_ms = 0;
  std::string metrics_path = "/metrics";
  std::string scheme = "http";
  std::map<std::string, std::vector<std::string>> params;
  bool honor_labels = false;
  bool honor_timestamps = true;
  uint64_t sample_limit = 0;             // 0: none
  // More targets than this after relabeling: every target of the job fails
  // with "target_limit exceeded" and is not scraped, as in Prometheus. 0: none.
  uint64_t target_limit = 0;
  uint64_t label_limit = 0;
  uint64_t label_name_length_limit = 0;
  uint64_t label_value_length_limit = 0;
  uint64_t body_size_limit = 0;          // bytes, 0: none
  std::vector<TargetGroup> static_configs;
  std::vector<FileSdConfig> file_sd_configs;
  std::vector<common::RelabelConfig> relabel_configs;
  std::vector<common::RelabelConfig> metric_relabel_configs;
  // scrape_protocols, in Prometheus 3's names (PrometheusProto,
  // OpenMetricsText1.0.0, OpenMetricsText0.0.1, PrometheusText1.0.0,
  // PrometheusText0.0.4), most preferred first, no repeats. Empty: the
  // default, which puts PrometheusProto first when scrape_native_histograms.
  std::vector<std::string> scrape_protocols;
  // Native histograms of protobuf scrapes are stored as such; when false a
  // protobuf histogram is read as its classic series.
  bool scrape_native_histograms = false;
  // Also the classic series of a histogram that is exposed as native too,
  // or that convert_classic_histograms_to_nhcb converts.
  bool always_scrape_classic_histograms = false;
  // Each classic histogram (text: a `# TYPE x histogram` family's
  // x_bucket{le}, x_count, x_sum of one label set; protobuf: a HISTOGRAM or
  // GAUGE_HISTOGRAM metric read as classic) is stored as one native
  // histogram with custom buckets (schema -53) named x, as Prometheus 3's
  // NHCB parser does; its classic series only with
  // always_scrape_classic_histograms.
  bool convert_classic_histograms_to_nhcb = false;
  // fallback_scrape_protocol (a scrape_protocols name, or empty): the parser
  // for a response whose Content-Type is missing, unparsable or not one of
  // the three media types trainwatch reads. Empty: the text format.
  std::string fallback_scrape_protocol;
  common::HttpClientConfig http;  // basic_auth, authorization / bearer_token*, tls_config
  // The job's YAML as written, to tell whether a reload changed it.
  std::string fingerprint;
};

struct GlobalDefaults {
  int64_t scrape_interval_ms = 60000;
  int64_t scrape_timeout_ms = 10000;
  // Also read by ParseScrapeConfigs from the root's `global:` section.
  std::vector<std::string> scrape_protocols;
  bool scrape_native_histograms = false;
  bool always_scrape_classic_histograms = false;
  bool convert_classic_histograms_to_nhcb = false;
  std::string fallback_scrape_protocol;
};

// Parses `root["scrape_configs"]` (root is the whole prometheus.yml). Keys
// Prometheus knows but trainwatch does not implement (other *_sd_configs,
// oauth2, proxy_url, ...) are logged and ignored; other keys are errors.
Result<std::vector<ScrapeConfig>> ParseScrapeConfigs(const YAML::Node& root, const GlobalDefaults& g);

// The Accept header a scrape of `c` sends: Prometheus 2.42's
// (kAcceptHeader of scrape_loop.h) when neither scrape_protocols nor
// scrape_native_histograms is set, else Prometheus 3's for the protocols
// ("...;q=0.6,...,*/*;q=0.1").
std::string AcceptHeaderFor(const ScrapeConfig& c);

// The Content-Type a scrape's body is parsed as: `content_type` when its
// media type is openmetrics-text, vnd.google.protobuf or text/plain, else
// the header of c.fallback_scrape_protocol when set, else `content_type`
// (which the text parser reads as the Prometheus text format).
std::string_view EffectiveContentType(const ScrapeConfig& c, std::string_view content_type);

// Prometheus's model.Duration.String(): "15s", "1m30s", "2h", "0s".
std::string FormatDuration(int64_t ms);

}  // namespace trainwatch::scrape
