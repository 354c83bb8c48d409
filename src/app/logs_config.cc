#include "app/logs_config.h"

#include <re2/re2.h>

namespace trainwatch::app {
namespace {

Status FieldError(const std::string& field, const std::string& msg, const YAML::Node& n) {
  std::string mark = n.Mark().line >= 0 ? " (line " + std::to_string(n.Mark().line + 1) + ")" : "";
  return Status::InvalidArgument(field + ": " + msg + mark);
}

Status Keys(const YAML::Node& n, const std::string& where, std::initializer_list<std::string_view> allowed) {
  if (!n.IsMap()) return FieldError(where, "expected a mapping", n);
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      return FieldError(where, "unknown field \"" + k + "\"", kv.first);
    }
  }
  return Status::OK();
}

}  // namespace

Status ParseLogsConfig(const YAML::Node& n, LogsConfig* out) {
  out->patterns = logs::DefaultPatterns();
  out->files.clear();
  if (!n || n.IsNull()) return Status::OK();
  out->forward.clear();
  RETURN_IF_ERROR(Keys(n, "trainwatch.logs", {"patterns", "files", "forward"}));
  if (auto fw = n["forward"]; fw && !fw.IsNull()) {
    if (!fw.IsSequence()) return FieldError("trainwatch.logs.forward", "expected a list", fw);
    for (size_t i = 0; i < fw.size(); ++i) {
      const YAML::Node e = fw[i];
      std::string where = "trainwatch.logs.forward[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(Keys(e, where, {"type", "url", "index"}));
      logs::ForwardTarget t;
      std::string type = e["type"] && e["type"].IsScalar() ? e["type"].Scalar() : "";
      if (type == "elasticsearch" || type == "opensearch") t.kind = logs::ForwardTarget::Kind::kElasticsearch;
      else if (type == "loki") t.kind = logs::ForwardTarget::Kind::kLoki;
      else return FieldError(where + ".type", "expected elasticsearch, opensearch or loki", e["type"] ? e["type"] : e);
      if (!e["url"] || !e["url"].IsScalar() || !(e["url"].Scalar().starts_with("http://") || e["url"].Scalar().starts_with("https://"))) {
        return FieldError(where + ".url", "expected an http:// or https:// URL", e["url"] ? e["url"] : e);
      }
      t.url = e["url"].Scalar();
      if (e["index"]) {
        if (!e["index"].IsScalar() || e["index"].Scalar().empty()) return FieldError(where + ".index", "expected a name", e["index"]);
        t.index = e["index"].Scalar();
      }
      out->forward.push_back(std::move(t));
    }
  }
  if (auto p = n["patterns"]; p && !p.IsNull()) {
    if (!p.IsMap()) return FieldError("trainwatch.logs.patterns", "expected a mapping of name: regex", p);
    for (const auto& kv : p) {
      std::string name = kv.first.as<std::string>();
      std::string field = "trainwatch.logs.patterns." + name;
      if (!kv.second.IsScalar()) return FieldError(field, "expected a regex string", kv.second);
      std::string re = kv.second.Scalar();
      RE2::Options o;
      o.set_log_errors(false);
      RE2 check(re, o);
      if (!check.ok()) return FieldError(field, "invalid regex: " + check.error(), kv.second);
      auto it = std::find_if(out->patterns.begin(), out->patterns.end(), [&](auto& x) { return x.name == name; });
      if (it != out->patterns.end()) it->regex = re;
      else out->patterns.push_back({name, re});
    }
  }
  if (auto f = n["files"]; f && !f.IsNull()) {
    if (!f.IsSequence()) return FieldError("trainwatch.logs.files", "expected a list", f);
    for (size_t i = 0; i < f.size(); ++i) {
      const YAML::Node e = f[i];
      std::string where = "trainwatch.logs.files[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(Keys(e, where, {"paths", "labels", "json", "multiline"}));
      logs::TailInput in;
      auto paths = e["paths"];
      if (!paths || !paths.IsSequence() || paths.size() == 0) {
        return FieldError(where + ".paths", "expected a non-empty list of globs", paths ? paths : e);
      }
      for (const auto& p : paths) {
        if (!p.IsScalar() || p.Scalar().empty()) return FieldError(where + ".paths", "expected a glob string", p);
        in.paths.push_back(p.Scalar());
      }
      if (auto l = e["labels"]; l && !l.IsNull()) {
        if (!l.IsMap()) return FieldError(where + ".labels", "expected a mapping", l);
        std::vector<model::Label> ls;
        for (const auto& kv : l) {
          std::string k = kv.first.as<std::string>();
          if (!model::IsValidLabelName(k) || !kv.second.IsScalar()) {
            return FieldError(where + ".labels." + k, "invalid label", kv.second);
          }
          ls.push_back({k, kv.second.Scalar()});
        }
        auto labels = model::Labels::FromUnsorted(std::move(ls));
        if (!labels.ok()) return FieldError(where + ".labels", labels.error().message(), l);
        in.labels = std::move(*labels);
      }
      if (auto j = e["json"]; j && !j.IsNull()) {
        if (!j.IsScalar() || (j.Scalar() != "true" && j.Scalar() != "false")) {
          return FieldError(where + ".json", "expected true or false", j);
        }
        in.json = j.Scalar() == "true";
      }
      if (auto m = e["multiline"]; m && !m.IsNull()) {
        RETURN_IF_ERROR(Keys(m, where + ".multiline", {"start"}));
        if (!m["start"] || !m["start"].IsScalar()) return FieldError(where + ".multiline.start", "expected a regex", m);
        in.multiline_start = m["start"].Scalar();
        RE2::Options o;
        o.set_log_errors(false);
        RE2 check(in.multiline_start, o);
        if (!check.ok()) return FieldError(where + ".multiline.start", "invalid regex: " + check.error(), m["start"]);
      }
      out->files.push_back(std::move(in));
    }
  }
  return Status::OK();
}

}  // namespace trainwatch::app
