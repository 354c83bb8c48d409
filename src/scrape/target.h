#pragma once
// Targets as Prometheus computes them from a scrape config and its discovered
// groups: discovered labels (__address__, __scheme__, __metrics_path__,
// __param_*, __scrape_interval__, __scrape_timeout__, job, group labels),
// then relabel_configs, a default port, __meta_* removal, instance defaulting
// to __address__; labels starting "__" are kept internally and hidden from
// the scraped series.

#include <string>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "scrape/config.h"

namespace trainwatch::scrape {

struct TargetSpec {
  common::LabelSet discovered;  // before relabeling
  common::LabelSet labels;      // after relabeling, including "__" labels; empty when dropped
  bool dropped = false;
  std::string error;    // e.g. "no address"; the target is not scraped

  // Labels without the "__" ones: what the series get.
  model::Labels PublicLabels() const;
  // scheme://address/path?params, params from the config overridden by __param_*.
  std::string Url(const ScrapeConfig& cfg) const;
  // Hash of `labels` (identity of the target within its job).
  uint64_t Hash() const;
};

// One target per address of `group` (labels of the group, then __address__).
std::vector<TargetSpec> TargetsFromGroup(const ScrapeConfig& cfg, const TargetGroup& group);
TargetSpec PopulateLabels(const ScrapeConfig& cfg, common::LabelSet discovered);

// Reads one file_sd file (JSON or YAML list of {targets, labels}); adds
// __meta_filepath to each group's labels.
Result<std::vector<TargetGroup>> ReadFileSd(const std::string& path);
// Expands a file_sd pattern (glob in the file name) to the matching paths.
std::vector<std::string> GlobFiles(const std::string& pattern);

}  // namespace trainwatch::scrape
