#pragma once
// Prometheus relabeling (relabel_configs, metric_relabel_configs) with
// Prometheus's semantics: source label values joined by `separator`, a fully
// anchored RE2 regex (default "(.*)"), Go-style "$1"/"${name}" templates in
// `replacement` and `target_label`, hashmod on the low 8 bytes of the MD5.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "model/labels.h"

namespace trainwatch::common {

enum class RelabelAction {
  kReplace, kKeep, kDrop, kKeepEqual, kDropEqual, kHashMod, kLabelMap, kLabelDrop, kLabelKeep, kLowercase, kUppercase
};

struct RelabelConfig {
  std::vector<std::string> source_labels;
  std::string separator = ";";
  std::string regex = "(.*)";  // as written, unanchored
  uint64_t modulus = 0;
  std::string target_label;
  std::string replacement = "$1";
  RelabelAction action = RelabelAction::kReplace;
  std::shared_ptr<const re2::RE2> re;  // "^(?:regex)$"

  // Compiles `regex` and checks the fields as Prometheus's Validate does.
  Status Init();
};

// Parses one relabel_config mapping; errors name `where` and the field.
Result<RelabelConfig> ParseRelabelConfig(const YAML::Node& n, const std::string& where);
// Parses a list of them (null or absent: empty).
Result<std::vector<RelabelConfig>> ParseRelabelConfigs(const YAML::Node& n, const std::string& where);

// A mutable label set kept sorted by name; empty values are absent.
class LabelSet {
 public:
  LabelSet() = default;
  explicit LabelSet(const model::Labels& l) : v_(l.pairs()) {}
  explicit LabelSet(std::vector<model::Label> v);  // sorts; later duplicates win
  std::string_view Get(std::string_view name) const;
  bool Has(std::string_view name) const { return !Get(name).empty(); }
  void Set(std::string_view name, std::string_view value);  // empty value deletes
  void Del(std::string_view name);
  const std::vector<model::Label>& pairs() const { return v_; }
  std::vector<model::Label>& mutable_pairs() { return v_; }
  model::Labels ToLabels() const { return model::Labels(v_); }
  bool operator==(const LabelSet&) const = default;

 private:
  std::vector<model::Label> v_;
};

// Applies `cfgs` in order. Returns false when a keep/drop step drops the set.
bool Relabel(const std::vector<RelabelConfig>& cfgs, LabelSet* ls);

// Go's regexp.Expand: "$1", "${1}", "$name", "${name}", "$$" in `tmpl` from
// the submatches of `re` (groups[0] is the whole match).
std::string ExpandTemplate(const re2::RE2& re, std::string_view tmpl, const std::vector<std::string_view>& groups);

std::string_view RelabelActionName(RelabelAction a);

}  // namespace trainwatch::common
