#include "app/logs_config.h"

#include <re2/re2.h>

#include "common/yaml.h"

namespace trainwatch::app {
namespace {

using common::yaml::CheckKeys;
using common::yaml::Err;

}  // namespace

Status ParseLogsConfig(const YAML::Node& n, LogsConfig* out) {
  out->patterns = logs::DefaultPatterns();
  out->files.clear();
  if (!n || n.IsNull()) return Status::OK();
  out->forward.clear();
  RETURN_IF_ERROR(CheckKeys(n, "trainwatch.logs", {"patterns", "files", "forward"}));
  if (auto fw = n["forward"]; fw && !fw.IsNull()) {
    if (!fw.IsSequence()) return Err(fw, "trainwatch.logs.forward", "expected a list");
    for (size_t i = 0; i < fw.size(); ++i) {
      const YAML::Node e = fw[i];
      std::string where = "trainwatch.logs.forward[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(CheckKeys(e, where, {"type", "url", "index"}));
      logs::ForwardTarget t;
      std::string type = e["type"] && e["type"].IsScalar() ? e["type"].Scalar() : "";
      if (type == "elasticsearch" || type == "opensearch") t.kind = logs::ForwardTarget::Kind::kElasticsearch;
      else if (type == "loki") t.kind = logs::ForwardTarget::Kind::kLoki;
      else return Err(e["type"] ? e["type"] : e, where + ".type", "expected elasticsearch, opensearch or loki");
      if (!e["url"] || !e["url"].IsScalar() || !(e["url"].Scalar().starts_with("http://") || e["url"].Scalar().starts_with("https://"))) {
        return Err(e["url"] ? e["url"] : e, where + ".url", "expected an http:// or https:// URL");
      }
      t.url = e["url"].Scalar();
      if (e["index"]) {
        if (!e["index"].IsScalar() || e["index"].Scalar().empty()) return Err(e["index"], where + ".index", "expected a name");
        t.index = e["index"].Scalar();
      }
      out->forward.push_back(std::move(t));
    }
  }
  if (auto p = n["patterns"]; p && !p.IsNull()) {
    if (!p.IsMap()) return Err(p, "trainwatch.logs.patterns", "expected a mapping of name: regex");
    for (const auto& kv : p) {
      std::string name = kv.first.as<std::string>();
      std::string field = "trainwatch.logs.patterns." + name;
      if (!kv.second.IsScalar()) return Err(kv.second, field, "expected a regex string");
      std::string re = kv.second.Scalar();
      RE2::Options o;
      o.set_log_errors(false);
      RE2 check(re, o);
      if (!check.ok()) return Err(kv.second, field, "invalid regex: " + check.error());
      auto it = std::find_if(out->patterns.begin(), out->patterns.end(), [&](auto& x) { return x.name == name; });
      if (it != out->patterns.end()) it->regex = re;
      else out->patterns.push_back({name, re});
    }
  }
  if (auto f = n["files"]; f && !f.IsNull()) {
    if (!f.IsSequence()) return Err(f, "trainwatch.logs.files", "expected a list");
    for (size_t i = 0; i < f.size(); ++i) {
      const YAML::Node e = f[i];
      std::string where = "trainwatch.logs.files[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(CheckKeys(e, where, {"paths", "labels", "json", "multiline"}));
      logs::TailInput in;
      auto paths = e["paths"];
      if (!paths || !paths.IsSequence() || paths.size() == 0) {
        return Err(paths ? paths : e, where + ".paths", "expected a non-empty list of globs");
      }
      for (const auto& p : paths) {
        if (!p.IsScalar() || p.Scalar().empty()) return Err(p, where + ".paths", "expected a glob string");
        in.paths.push_back(p.Scalar());
      }
      if (auto l = e["labels"]; l && !l.IsNull()) {
        if (!l.IsMap()) return Err(l, where + ".labels", "expected a mapping");
        std::vector<model::Label> ls;
        for (const auto& kv : l) {
          std::string k = kv.first.as<std::string>();
          if (!model::IsValidLabelName(k) || !kv.second.IsScalar()) {
            return Err(kv.second, where + ".labels." + k, "invalid label");
          }
          ls.push_back({k, kv.second.Scalar()});
        }
        auto labels = model::Labels::FromUnsorted(std::move(ls));
        if (!labels.ok()) return Err(l, where + ".labels", labels.error().message());
        in.labels = std::move(*labels);
      }
      if (auto j = e["json"]; j && !j.IsNull()) { ASSIGN_OR_RETURN(in.json, common::yaml::Bool(j, where + ".json")); }
      if (auto m = e["multiline"]; m && !m.IsNull()) {
        RETURN_IF_ERROR(CheckKeys(m, where + ".multiline", {"start"}));
        if (!m["start"] || !m["start"].IsScalar()) return Err(m, where + ".multiline.start", "expected a regex");
        in.multiline_start = m["start"].Scalar();
        RE2::Options o;
        o.set_log_errors(false);
        RE2 check(in.multiline_start, o);
        if (!check.ok()) return Err(m["start"], where + ".multiline.start", "invalid regex: " + check.error());
      }
      out->files.push_back(std::move(in));
    }
  }
  return Status::OK();
}

}  // namespace trainwatch::app
