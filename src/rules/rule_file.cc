#include "rules/rule_file.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "model/labels.h"
#include "promql/parser/parse.h"
#include "template/template.h"

namespace trainwatch::rules {

namespace {

using tmpl::GoQuote;

// A YAML value's position, "L:C" (1-based); "0:0" for an absent one as Go prints it.
struct Pos {
  int line = 0, col = 0;
  std::string Str() const { return std::to_string(line) + ":" + std::to_string(col); }
};

Pos PosOf(const YAML::Node& n) {
  if (!n.IsDefined()) return {};
  YAML::Mark m = n.Mark();  // a default-constructed node has line -1
  if (m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

const char* TagOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "!!map";
    case YAML::NodeType::Sequence: return "!!seq";
    case YAML::NodeType::Null: return "!!null";
    default: break;
  }
  if (n.Tag() == "!") return "!!str";
  const std::string& s = n.Scalar();
  if (s == "true" || s == "false") return "!!bool";
  char* end = nullptr;
  std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == '\0') return "!!int";
  std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == '\0') return "!!float";
  return "!!str";
}

// Collects decode errors the way yaml.v3 reports unmarshal errors.
class Decoder {
 public:
  std::vector<std::string> errs;        // yaml.v3 "unmarshal errors" lines
  std::vector<std::string> plain_errs;  // errors reported on their own (durations)

  void TypeError(const YAML::Node& n, const std::string& go_type) {
    std::string shown;
    if (n.IsScalar()) shown = " `" + n.Scalar() + "`";
    errs.push_back("line " + std::to_string(PosOf(n).line) + ": cannot unmarshal " + TagOf(n) + shown + " into " +
                   go_type);
  }

  // Checks keys against `known` (and duplicates); returns the map's entries by key.
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> Fields(const YAML::Node& m,
                                                                  std::initializer_list<const char*> known,
                                                                  const std::string& go_type) {
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> out;
    for (auto it = m.begin(); it != m.end(); ++it) {
      std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      int line = PosOf(it->first).line;
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok) {
        errs.push_back("line " + std::to_string(line) + ": field " + key + " not found in type " + go_type);
        continue;
      }
      auto [pos, inserted] = out.emplace(key, std::make_pair(it->first, it->second));
      if (!inserted) {
        errs.push_back("line " + std::to_string(line) + ": mapping key " + GoQuote(key) +
                       " already defined at line " + std::to_string(PosOf(pos->second.first).line));
      }
    }
    return out;
  }

  // `node_field`: rulefmt keeps record/alert/expr as yaml.Node, so a non-scalar
  // there reads as empty rather than failing to decode.
  std::string String(const YAML::Node& n, bool node_field = false) {
    if (n.IsNull()) return "";
    if (!n.IsScalar()) {
      if (node_field) return "";
      TypeError(n, "string");
      return "";
    }
    return n.Scalar();
  }

  std::map<std::string, std::string> StringMap(const YAML::Node& n) {
    std::map<std::string, std::string> out;
    if (n.IsNull()) return out;
    if (!n.IsMap()) {
      TypeError(n, "map[string]string");
      return out;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string k = String(it->first);
      if (out.count(k)) {
        errs.push_back("line " + std::to_string(PosOf(it->first).line) + ": mapping key " + GoQuote(k) +
                       " already defined");
      }
      out[k] = String(it->second);
    }
    return out;
  }
};

bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
    if (n == 9 || i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

struct RuleNodes {
  YAML::Node record, alert, expr;
};

// The promtool checks of one rule (rulefmt's Rule.Validate); errors in order.
void ValidateRule(const Rule& r, const RuleNodes& nodes, const std::string& prefix, std::vector<std::string>* errs) {
  auto add = [&](const std::string& where, const std::string& msg) {
    errs->push_back((where.empty() ? "" : where + ": ") + prefix + msg);
  };
  Pos rec = PosOf(nodes.record), al = PosOf(nodes.alert), ex = PosOf(nodes.expr);
  if (!r.record.empty() && !r.alert.empty()) add(rec.Str() + ": " + al.Str(), "only one of 'record' and 'alert' must be set");
  if (r.record.empty() && r.alert.empty()) add(rec.Str(), "one of 'record' or 'alert' must be set");
  if (r.expr.empty()) {
    add(ex.Str(), "field 'expr' must be set in rule");
  } else {
    auto parsed = promql::parser::ParseExpr(r.expr);
    if (!parsed.ok()) add(ex.Str(), "could not parse expression: " + parsed.error().message());
  }
  if (!r.record.empty()) {
    if (!r.annotations.empty()) add(rec.Str(), "invalid field 'annotations' in recording rule");
    if (r.for_ms != 0) add(rec.Str(), "invalid field 'for' in recording rule");
    if (r.keep_firing_for_ms != 0) add(rec.Str(), "invalid field 'keep_firing_for' in recording rule");
    if (!model::IsValidMetricName(r.record)) add(rec.Str(), "invalid recording rule name: " + r.record);
  }
  for (const auto& [k, v] : r.labels) {
    if (!model::IsValidLabelName(k) || k == model::kMetricName) add("", "invalid label name: " + k);
    if (!ValidUtf8(v)) add("", "invalid label value: " + v);
  }
  for (const auto& [k, v] : r.annotations) {
    if (!model::IsValidLabelName(k)) add("", "invalid annotation name: " + k);
  }
  if (r.alert.empty()) return;
  for (const auto& [k, v] : r.labels) {
    Status st = tmpl::CheckAlertTemplate(r.alert, v);
    if (!st.ok()) add("", "label " + GoQuote(k) + ": " + st.message());
  }
  for (const auto& [k, v] : r.annotations) {
    Status st = tmpl::CheckAlertTemplate(r.alert, v);
    if (!st.ok()) add("", "annotation " + GoQuote(k) + ": " + st.message());
  }
}

int64_t Duration(Decoder* d, const YAML::Node& n) {
  std::string s = d->String(n);
  if (s.empty()) return 0;
  auto ms = promql::parser::ParseDuration(s);
  if (!ms.ok()) {
    d->plain_errs.push_back(ms.error().message());
    return 0;
  }
  return *ms;
}

}  // namespace

size_t RuleFile::RuleCount() const {
  size_t n = 0;
  for (const auto& g : groups) n += g.rules.size();
  return n;
}

RuleFile ParseRuleFile(std::string_view content, std::vector<std::string>* errors) {
  RuleFile out;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(content));
  } catch (const YAML::Exception& e) {
    errors->push_back("yaml: line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
    return out;
  }
  if (!root.IsDefined() || root.IsNull()) return out;
  Decoder d;
  std::vector<std::vector<RuleNodes>> rule_nodes;
  std::vector<YAML::Node> group_nodes;
  if (!root.IsMap()) {
    d.TypeError(root, "rulefmt.RuleGroups");
  } else {
    auto top = d.Fields(root, {"groups"}, "rulefmt.RuleGroups");
    if (top.count("groups")) {
      const YAML::Node& gs = top["groups"].second;
      if (!gs.IsNull() && !gs.IsSequence()) d.TypeError(gs, "[]rulefmt.RuleGroup");
      if (gs.IsSequence()) {
        for (const auto& gn : gs) {
          RuleGroup g;
          group_nodes.push_back(gn);
          rule_nodes.emplace_back();
          if (!gn.IsMap()) {
            d.TypeError(gn, "rulefmt.RuleGroup");
            out.groups.push_back(std::move(g));
            continue;
          }
          auto f = d.Fields(gn, {"name", "interval", "limit", "rules"}, "rulefmt.RuleGroup");
          if (f.count("name")) g.name = d.String(f["name"].second);
          if (f.count("interval")) g.interval_ms = Duration(&d, f["interval"].second);
          if (f.count("limit")) {
            const YAML::Node& ln = f["limit"].second;
            char* end = nullptr;
            std::string s = ln.IsScalar() ? ln.Scalar() : "";
            long v = std::strtol(s.c_str(), &end, 10);
            if (!ln.IsNull() && (!ln.IsScalar() || s.empty() || *end != '\0')) d.TypeError(ln, "int");
            else g.limit = static_cast<int>(v);
          }
          if (f.count("rules")) {
            const YAML::Node& rs = f["rules"].second;
            if (!rs.IsNull() && !rs.IsSequence()) d.TypeError(rs, "[]rulefmt.RuleNode");
            if (rs.IsSequence()) {
              for (const auto& rn : rs) {
                Rule r;
                RuleNodes nodes;
                r.line = PosOf(rn).line;
                if (!rn.IsMap()) {
                  d.TypeError(rn, "rulefmt.RuleNode");
                } else {
                  auto rf = d.Fields(rn, {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"},
                                     "rulefmt.RuleNode");
                  if (rf.count("record")) nodes.record = rf["record"].second, r.record = d.String(nodes.record, true);
                  if (rf.count("alert")) nodes.alert = rf["alert"].second, r.alert = d.String(nodes.alert, true);
                  if (rf.count("expr")) nodes.expr = rf["expr"].second, r.expr = d.String(nodes.expr, true);
                  if (rf.count("for")) r.for_ms = Duration(&d, rf["for"].second);
                  if (rf.count("keep_firing_for")) r.keep_firing_for_ms = Duration(&d, rf["keep_firing_for"].second);
                  if (rf.count("labels")) r.labels = d.StringMap(rf["labels"].second);
                  if (rf.count("annotations")) r.annotations = d.StringMap(rf["annotations"].second);
                }
                g.rules.push_back(std::move(r));
                rule_nodes.back().push_back(nodes);
              }
            }
          }
          out.groups.push_back(std::move(g));
        }
      }
    }
  }
  // Unmarshal errors form one block, as yaml.v3 reports them.
  std::string unmarshal;
  for (const auto& e : d.errs) unmarshal += "\n  " + e;
  if (!unmarshal.empty()) errors->push_back("yaml: unmarshal errors:" + unmarshal);
  for (const auto& e : d.plain_errs) errors->push_back(e);
  if (!errors->empty()) return out;

  std::set<std::string> seen;
  for (size_t j = 0; j < out.groups.size(); ++j) {
    const RuleGroup& g = out.groups[j];
    Pos gp = PosOf(group_nodes[j]);
    if (g.name.empty()) errors->push_back(gp.Str() + ": Groupname must not be empty");
    if (seen.count(g.name)) {
      errors->push_back(gp.Str() + ": groupname: \"" + g.name + "\" is repeated in the same file");
    }
    seen.insert(g.name);
    for (size_t i = 0; i < g.rules.size(); ++i) {
      const Rule& r = g.rules[i];
      std::string prefix = "group " + GoQuote(g.name) + ", rule " + std::to_string(i + 1) + ", " +
                           GoQuote(r.alert.empty() ? r.record : r.alert) + ": ";
      ValidateRule(r, rule_nodes[j][i], prefix, errors);
    }
  }
  return out;
}

RuleFile LoadRuleFile(const std::string& path, std::vector<std::string>* errors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors->push_back(path + ": open " + path + ": " + std::strerror(errno));
    return {};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> errs;
  RuleFile f = ParseRuleFile(ss.str(), &errs);
  for (auto& e : errs) errors->push_back(path + ": " + e);
  return f;
}

std::vector<std::string> FindDuplicateRecordingRules(const RuleFile& file) {
  std::map<std::pair<std::string, std::map<std::string, std::string>>, int> count;
  std::vector<std::string> out;
  for (const auto& g : file.groups) {
    for (const auto& r : g.rules) {
      if (r.record.empty()) continue;
      if (++count[{r.record, r.labels}] == 2) {
        std::string s = "Metric: " + r.record + "\nLabel(s):\n";
        for (const auto& [k, v] : r.labels) s += "\t" + k + ": " + v + "\n";
        out.push_back(s);
      }
    }
  }
  return out;
}

}  // namespace trainwatch::rules
