#include "common/relabel.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "common/yaml.h"

namespace trainwatch::common {
namespace {

struct ActionName {
  std::string_view name;
  RelabelAction action;
};
constexpr ActionName kActions[] = {
    {"replace", RelabelAction::kReplace},     {"keep", RelabelAction::kKeep},
    {"drop", RelabelAction::kDrop},           {"keepequal", RelabelAction::kKeepEqual},
    {"dropequal", RelabelAction::kDropEqual}, {"hashmod", RelabelAction::kHashMod},
    {"labelmap", RelabelAction::kLabelMap},   {"labeldrop", RelabelAction::kLabelDrop},
    {"labelkeep", RelabelAction::kLabelKeep}, {"lowercase", RelabelAction::kLowercase},
    {"uppercase", RelabelAction::kUppercase},
};

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Prometheus's relabelTarget: ^(?:(?:[a-zA-Z_]|\$(?:\{\w+\}|\w+))+\w*)+$
bool IsValidTargetTemplate(std::string_view s) {
  static const re2::RE2 kRe(R"(^(?:(?:[a-zA-Z_]|\$(?:\{\w+\}|\w+))+\w*)+$)");
  return re2::RE2::FullMatch(re2::StringPiece(s.data(), s.size()), kRe);
}

// Go's regexp extract(): the name after '$'. Returns false when malformed.
bool Extract(std::string_view s, std::string_view* name, int* num, size_t* consumed) {
  if (s.empty()) return false;
  bool brace = s[0] == '{';
  size_t start = brace ? 1 : 0, i = start;
  while (i < s.size() && IsWordChar(s[i])) i++;
  if (i == start) return false;
  *name = s.substr(start, i - start);
  if (brace) {
    if (i >= s.size() || s[i] != '}') return false;
    i++;
  }
  int n = 0;
  for (char c : *name) {
    if (c < '0' || c > '9' || n >= 100000000) {
      n = -1;
      break;
    }
    n = n * 10 + (c - '0');
  }
  if ((*name)[0] == '0' && name->size() > 1) n = -1;
  *num = n;
  *consumed = i;
  return true;
}

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

std::string_view RelabelActionName(RelabelAction a) {
  for (const auto& an : kActions) {
    if (an.action == a) return an.name;
  }
  return "?";
}

std::string ExpandTemplate(const re2::RE2& re, std::string_view tmpl, const std::vector<std::string_view>& groups) {
  std::string dst;
  while (!tmpl.empty()) {
    size_t d = tmpl.find('$');
    if (d == std::string_view::npos) break;
    dst.append(tmpl.substr(0, d));
    tmpl.remove_prefix(d + 1);
    if (!tmpl.empty() && tmpl[0] == '$') {
      dst += '$';
      tmpl.remove_prefix(1);
      continue;
    }
    std::string_view name;
    int num = -1;
    size_t consumed = 0;
    if (!Extract(tmpl, &name, &num, &consumed)) {
      dst += '$';  // malformed: the '$' is literal text
      continue;
    }
    tmpl.remove_prefix(consumed);
    if (num >= 0) {
      if (static_cast<size_t>(num) < groups.size()) dst.append(groups[num]);
    } else {
      const auto& named = re.NamedCapturingGroups();
      auto it = named.find(std::string(name));
      if (it != named.end() && static_cast<size_t>(it->second) < groups.size()) dst.append(groups[it->second]);
    }
  }
  dst.append(tmpl);
  return dst;
}

LabelSet::LabelSet(std::vector<model::Label> v) {
  std::stable_sort(v.begin(), v.end(), [](const model::Label& a, const model::Label& b) { return a.name < b.name; });
  for (auto& l : v) {
    if (!v_.empty() && v_.back().name == l.name) v_.back().value = std::move(l.value);
    else v_.push_back(std::move(l));
  }
  std::erase_if(v_, [](const model::Label& l) { return l.value.empty(); });
}

std::string_view LabelSet::Get(std::string_view name) const {
  auto it = std::lower_bound(v_.begin(), v_.end(), name,
                             [](const model::Label& l, std::string_view n) { return l.name < n; });
  return it != v_.end() && it->name == name ? std::string_view(it->value) : std::string_view();
}

void LabelSet::Set(std::string_view name, std::string_view value) {
  if (value.empty()) return Del(name);
  auto it = std::lower_bound(v_.begin(), v_.end(), name,
                             [](const model::Label& l, std::string_view n) { return l.name < n; });
  if (it != v_.end() && it->name == name) it->value = std::string(value);
  else v_.insert(it, model::Label{std::string(name), std::string(value)});
}

void LabelSet::Del(std::string_view name) {
  auto it = std::lower_bound(v_.begin(), v_.end(), name,
                             [](const model::Label& l, std::string_view n) { return l.name < n; });
  if (it != v_.end() && it->name == name) v_.erase(it);
}

Status RelabelConfig::Init() {
  auto r = std::make_shared<re2::RE2>("^(?:" + regex + ")$", re2::RE2::Quiet);
  if (!r->ok()) return Status::InvalidArgument("regex: invalid regular expression \"" + regex + "\": " + r->error());
  re = std::move(r);
  std::string_view an = RelabelActionName(action);
  const std::string an_s(an);
  bool needs_target = action == RelabelAction::kReplace || action == RelabelAction::kHashMod ||
                      action == RelabelAction::kLowercase || action == RelabelAction::kUppercase ||
                      action == RelabelAction::kKeepEqual || action == RelabelAction::kDropEqual;
  if (action == RelabelAction::kHashMod && modulus == 0) {
    return Status::InvalidArgument("modulus: relabel configuration for hashmod requires non-zero modulus");
  }
  if (needs_target && target_label.empty()) {
    return Status::InvalidArgument("target_label: relabel configuration for " + an_s +
                                   " action requires 'target_label' value");
  }
  auto invalid_target = [&] {
    return Status::InvalidArgument("target_label: \"" + target_label + "\" is invalid 'target_label' for " + an_s +
                                   " action");
  };
  if (action == RelabelAction::kReplace) {
    bool templ = target_label.find('$') != std::string::npos;
    if (!templ && !model::IsValidLabelName(target_label)) return invalid_target();
    if (templ && !IsValidTargetTemplate(target_label)) return invalid_target();
  }
  bool simple_target = action == RelabelAction::kLowercase || action == RelabelAction::kUppercase ||
                       action == RelabelAction::kKeepEqual || action == RelabelAction::kDropEqual ||
                       action == RelabelAction::kHashMod;
  if (simple_target && !model::IsValidLabelName(target_label)) return invalid_target();
  if ((action == RelabelAction::kLowercase || action == RelabelAction::kUppercase ||
       action == RelabelAction::kKeepEqual || action == RelabelAction::kDropEqual) &&
      replacement != "$1") {
    return Status::InvalidArgument("replacement: 'replacement' can not be set for " + an_s + " action");
  }
  if (action == RelabelAction::kLabelMap && !IsValidTargetTemplate(replacement)) {
    return Status::InvalidArgument("replacement: \"" + replacement + "\" is invalid 'replacement' for " + an_s +
                                   " action");
  }
  if ((action == RelabelAction::kKeepEqual || action == RelabelAction::kDropEqual) &&
      (regex != "(.*)" || modulus != 0 || separator != ";")) {
    return Status::InvalidArgument(an_s + " action requires only 'source_labels' and `target_label`, and no other fields");
  }
  if ((action == RelabelAction::kLabelDrop || action == RelabelAction::kLabelKeep) &&
      (!source_labels.empty() || !target_label.empty() || modulus != 0 || separator != ";" || replacement != "$1")) {
    return Status::InvalidArgument(an_s + " action requires only 'regex', and no other fields");
  }
  return Status::OK();
}

Result<RelabelConfig> ParseRelabelConfig(const YAML::Node& n, const std::string& where) {
  using yaml::Err;
  RETURN_IF_ERROR(yaml::CheckKeys(n, where, {"source_labels", "separator", "regex", "modulus", "target_label",
                                             "replacement", "action"}));
  RelabelConfig c;
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    const std::string f = where + "." + key;
    if (key == "source_labels") {
      ASSIGN_OR_RETURN(c.source_labels, yaml::StrList(v, f));
      for (size_t i = 0; i < c.source_labels.size(); i++) {
        // Prometheus accepts any name here (model.LabelNames unmarshal checks validity).
        if (!model::IsValidLabelName(c.source_labels[i])) {
          return Err(v[i], f, "\"" + c.source_labels[i] + "\" is not a valid label name");
        }
      }
      continue;
    }
    if (key == "modulus") {
      ASSIGN_OR_RETURN(c.modulus, yaml::Uint(v, f));
      continue;
    }
    ASSIGN_OR_RETURN(std::string s, yaml::Str(v, f));
    if (key == "separator") c.separator = s;
    else if (key == "regex") c.regex = s;
    else if (key == "target_label") c.target_label = s;
    else if (key == "replacement") c.replacement = s;
    else if (key == "action") {
      std::string a = Lower(s);
      bool found = false;
      for (const auto& an : kActions) {
        if (an.name == a) {
          c.action = an.action;
          found = true;
        }
      }
      if (!found) return Err(v, f, "unknown relabel action \"" + s + "\"");
    }
  }
  // Prometheus's Validate, whose messages name their field ("regex: ...").
  if (Status st = c.Init(); !st.ok()) return Err(n, where, st.message());
  return c;
}

Result<std::vector<RelabelConfig>> ParseRelabelConfigs(const YAML::Node& n, const std::string& where) {
  std::vector<RelabelConfig> out;
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return yaml::Err(n, where, "expected a list");
  for (size_t i = 0; i < n.size(); i++) {
    ASSIGN_OR_RETURN(RelabelConfig c, ParseRelabelConfig(n[i], where + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

bool FullMatch(const re2::RE2& re, std::string_view s) {
  return re.Match(re2::StringPiece(s.data(), s.size()), 0, s.size(), re2::RE2::UNANCHORED, nullptr, 0);
}

bool MatchGroups(const re2::RE2& re, std::string_view s, std::vector<std::string_view>* groups) {
  int n = re.NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> sp(n);
  if (!re.Match(re2::StringPiece(s.data(), s.size()), 0, s.size(), re2::RE2::UNANCHORED, sp.data(), n)) return false;
  groups->clear();
  for (const auto& p : sp) groups->emplace_back(p.data() == nullptr ? std::string_view() : std::string_view(p.data(), p.size()));
  return true;
}

uint64_t HashModValue(std::string_view val, uint64_t modulus) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(val.data(), val.size(), md, &len, EVP_md5(), nullptr);
  uint64_t x = 0;
  for (int i = 8; i < 16; i++) x = (x << 8) | md[i];  // big-endian low 8 bytes, as Prometheus
  return x % modulus;
}

bool RelabelOne(const RelabelConfig& c, LabelSet* ls) {
  std::string val;
  for (size_t i = 0; i < c.source_labels.size(); i++) {
    if (i > 0) val += c.separator;
    val.append(ls->Get(c.source_labels[i]));
  }
  const re2::RE2& re = *c.re;
  switch (c.action) {
    case RelabelAction::kDrop:
      if (FullMatch(re, val)) return false;
      break;
    case RelabelAction::kKeep:
      if (!FullMatch(re, val)) return false;
      break;
    case RelabelAction::kDropEqual:
      if (ls->Get(c.target_label) == val) return false;
      break;
    case RelabelAction::kKeepEqual:
      if (ls->Get(c.target_label) != val) return false;
      break;
    case RelabelAction::kReplace: {
      std::vector<std::string_view> groups;
      if (!MatchGroups(re, val, &groups)) break;  // no match: no replacement
      std::string target = ExpandTemplate(re, c.target_label, groups);
      if (!model::IsValidLabelName(target)) break;
      std::string res = ExpandTemplate(re, c.replacement, groups);
      if (res.empty()) ls->Del(target);
      else ls->Set(target, res);
      break;
    }
    case RelabelAction::kLowercase: ls->Set(c.target_label, Lower(val)); break;
    case RelabelAction::kUppercase: {
      std::string u = val;
      for (char& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      ls->Set(c.target_label, u);
      break;
    }
    case RelabelAction::kHashMod: ls->Set(c.target_label, std::to_string(HashModValue(val, c.modulus))); break;
    case RelabelAction::kLabelMap: {
      std::vector<model::Label> snapshot = ls->pairs();
      std::vector<std::string_view> groups;
      for (const model::Label& l : snapshot) {
        if (MatchGroups(re, l.name, &groups)) ls->Set(ExpandTemplate(re, c.replacement, groups), l.value);
      }
      break;
    }
    case RelabelAction::kLabelDrop:
    case RelabelAction::kLabelKeep: {
      bool drop_matching = c.action == RelabelAction::kLabelDrop;
      std::erase_if(ls->mutable_pairs(), [&](const model::Label& l) { return FullMatch(re, l.name) == drop_matching; });
      break;
    }
  }
  return true;
}

}  // namespace

bool Relabel(const std::vector<RelabelConfig>& cfgs, LabelSet* ls) {
  for (const RelabelConfig& c : cfgs) {
    if (!RelabelOne(c, ls)) return false;
  }
  return true;
}

}  // namespace trainwatch::common
