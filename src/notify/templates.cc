#include "notify/templates.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "template/template.h"

namespace trainwatch::notify {
namespace {

using tmpl::FuncError;
using tmpl::GoType;
using tmpl::Method;
using tmpl::Param;
using tmpl::StrMap;
using tmpl::Value;
using TypePtr = std::shared_ptr<const GoType>;

// ---- Alertmanager's template types (template/template.go) ----

const TypePtr& PairType() {
  static const TypePtr t = std::make_shared<const GoType>(GoType{"template.Pair", {}});
  return t;
}

// Pairs.Names / Pairs.Values: the Name or Value field of each pair.
Value PairsColumn(const Value& pairs, std::string_view field) {
  std::vector<Value> out;
  for (const Value& p : pairs.list()) out.push_back(*p.Field(field));
  return Value::List(std::move(out), "string");
}

const TypePtr& PairsType() {
  static const TypePtr t = [] {
    GoType g{"template.Pairs", {}};
    g.methods["Names"] = Method{{}, false, Param::kAny, [](const Value& r, std::vector<Value>&) { return PairsColumn(r, "Name"); }};
    g.methods["Values"] = Method{{}, false, Param::kAny, [](const Value& r, std::vector<Value>&) { return PairsColumn(r, "Value"); }};
    return std::make_shared<const GoType>(std::move(g));
  }();
  return t;
}

// KV.SortedPairs: by name, except that alertname comes first.
Value SortedPairs(const StrMap& m) {
  std::vector<Value> pairs;
  auto add = [&](const std::string& k, const std::string& v) {
    pairs.push_back(Value::Struct(PairType(), {{"Name", Value::String(k)}, {"Value", Value::String(v)}}));
  };
  if (auto it = m.find("alertname"); it != m.end()) add(it->first, it->second);
  for (const auto& [k, v] : m) {
    if (k != "alertname") add(k, v);
  }
  return Value::List(std::move(pairs), "template.Pair").WithType(PairsType());
}

const TypePtr& KVType();

Value KV(StrMap m) { return Value::Map(std::move(m)).WithType(KVType()); }

const TypePtr& KVType() {
  static const TypePtr t = [] {
    GoType g{"template.KV", {}};
    g.methods["SortedPairs"] = Method{{}, false, Param::kAny, [](const Value& r, std::vector<Value>&) { return SortedPairs(r.strmap()); }};
    g.methods["Names"] = Method{{}, false, Param::kAny, [](const Value& r, std::vector<Value>&) {
      return PairsColumn(SortedPairs(r.strmap()), "Name");
    }};
    g.methods["Values"] = Method{{}, false, Param::kAny, [](const Value& r, std::vector<Value>&) {
      return PairsColumn(SortedPairs(r.strmap()), "Value");
    }};
    g.methods["Remove"] = Method{{Param::kStringSlice}, false, Param::kAny, [](const Value& r, std::vector<Value>& a) {
      std::set<std::string> drop;
      for (const Value& k : a[0].list()) drop.insert(k.str());
      StrMap out;
      for (const auto& [k, v] : r.strmap()) {
        if (!drop.contains(k)) out.emplace(k, v);
      }
      return KV(std::move(out));
    }};
    return std::make_shared<const GoType>(std::move(g));
  }();
  return t;
}

// Alerts.Firing / Alerts.Resolved: a plain []Alert (no methods), as 0.25.
Value AlertsWithStatus(const Value& alerts, std::string_view status) {
  std::vector<Value> out;
  for (const Value& a : alerts.list()) {
    if (a.Field("Status")->str() == status) out.push_back(a);
  }
  return Value::List(std::move(out), "template.Alert");
}

const TypePtr& AlertsType() {
  static const TypePtr t = [] {
    GoType g{"template.Alerts", {}};
    g.methods["Firing"] = Method{{}, false, Param::kAny, [](const Value& r, std::vector<Value>&) { return AlertsWithStatus(r, "firing"); }};
    g.methods["Resolved"] = Method{{}, false, Param::kAny, [](const Value& r, std::vector<Value>&) { return AlertsWithStatus(r, "resolved"); }};
    return std::make_shared<const GoType>(std::move(g));
  }();
  return t;
}

const TypePtr& AlertType() {
  static const TypePtr t = std::make_shared<const GoType>(GoType{"template.Alert", {}});
  return t;
}

const TypePtr& DataType() {
  static const TypePtr t = std::make_shared<const GoType>(GoType{"template.Data", {}});
  return t;
}

StrMap ToMap(const model::Labels& ls) {
  StrMap m;
  for (const auto& l : ls) m.emplace(l.name, l.value);
  return m;
}

// time.Time of a millisecond timestamp; 0 is Go's zero time (a firing alert's EndsAt).
Value TimeOf(int64_t ms) {
  if (ms == 0) return Value::TimeValue(Value::kGoZeroTimeSecs, 0);
  int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  return Value::TimeValue(secs, (ms - secs * 1000) * 1'000'000);
}

Value DataValue(const NotificationData& d) {
  std::vector<Value> alerts;
  alerts.reserve(d.alerts.size());
  for (const StoredAlert& a : d.alerts) {
    alerts.push_back(Value::Struct(
        AlertType(), {{"Status", Value::String(a.Resolved(d.now_ms) ? "resolved" : "firing")},
                      {"Labels", KV(ToMap(a.alert.labels))},
                      {"Annotations", KV(ToMap(a.alert.annotations))},
                      {"StartsAt", TimeOf(a.alert.starts_at_ms)},
                      {"EndsAt", TimeOf(a.alert.ends_at_ms)},
                      {"GeneratorURL", Value::String(a.alert.generator_url)},
                      {"Fingerprint", Value::String(FingerprintString(a.fingerprint))}}));
  }
  return Value::Struct(DataType(), {{"Receiver", Value::String(d.receiver)},
                                    {"Status", Value::String(d.status)},
                                    {"Alerts", Value::List(std::move(alerts), "template.Alert").WithType(AlertsType())},
                                    {"GroupLabels", KV(ToMap(d.group_labels))},
                                    {"CommonLabels", KV(ToMap(d.common_labels))},
                                    {"CommonAnnotations", KV(ToMap(d.common_annotations))},
                                    {"ExternalURL", Value::String(d.external_url)}});
}

}  // namespace

Result<std::shared_ptr<const Templates>> Templates::Parse(const std::vector<TemplateFile>& files) {
  // The defaults are parsed once; a parsed set is immutable and Extend copies.
  static const tmpl::Template* const defaults = [] {
    auto set = tmpl::Template::Parse("", DefaultTemplates(), tmpl::FuncSet::kAlertmanager);
    CHECK(set.ok(), "BUG: notify/default.tmpl does not parse");
    return new tmpl::Template(std::move(*set));
  }();
  tmpl::Template set = *defaults;
  for (const TemplateFile& f : files) {
    // As Go's ParseGlob: each file is a template named after its base name.
    ASSIGN_OR_RETURN(set, set.Extend(f.path.substr(f.path.rfind('/') + 1), f.text));
  }
  return std::shared_ptr<const Templates>(new Templates(std::move(set)));
}

Result<std::string> Templates::ExecuteText(std::string_view text, const NotificationData& d) const {
  return Run(text, d, false);
}

Result<std::string> Templates::ExecuteHtml(std::string_view text, const NotificationData& d) const {
  return Run(text, d, true);
}

// Alertmanager's template.Template: one set holding the defaults and the
// files; each text is parsed as template "" beside them (ExecuteTextString).
Result<std::string> Templates::Run(std::string_view text, const NotificationData& d, bool html) const {
  if (text.empty()) return std::string();
  ASSIGN_OR_RETURN(tmpl::Template t, set_.Extend("", text));
  tmpl::TemplateOptions o;
  o.escape_html = html;
  return t.Execute(DataValue(d), o);
}

Result<NotificationData> ParseTemplateData(std::string_view text) {
  using Json = nlohmann::json;
  Json j;
  try {
    j = Json::parse(text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("template data: ") + e.what());
  }
  if (!j.is_object()) return Status::InvalidArgument("template data: expected a JSON object");
  auto str = [](const Json& o, const char* key, const std::string& where, std::string* out) -> Status {
    if (!o.contains(key) || o[key].is_null()) return Status::OK();
    if (!o[key].is_string()) return Status::InvalidArgument("template data: " + where + key + ": expected a string");
    *out = o[key].get<std::string>();
    return Status::OK();
  };
  auto labels = [](const Json& o, const char* key, const std::string& where, model::Labels* out) -> Status {
    if (!o.contains(key) || o[key].is_null()) return Status::OK();
    if (!o[key].is_object()) return Status::InvalidArgument("template data: " + where + key + ": expected an object");
    std::vector<model::Label> ls;
    for (auto it = o[key].begin(); it != o[key].end(); ++it) {
      if (!it.value().is_string()) {
        return Status::InvalidArgument("template data: " + where + key + "." + it.key() + ": expected a string");
      }
      ls.push_back({it.key(), it.value().get<std::string>()});
    }
    *out = model::Labels(std::move(ls));
    return Status::OK();
  };
  NotificationData d;
  RETURN_IF_ERROR(str(j, "receiver", "", &d.receiver));
  RETURN_IF_ERROR(str(j, "status", "", &d.status));
  RETURN_IF_ERROR(str(j, "externalURL", "", &d.external_url));
  RETURN_IF_ERROR(labels(j, "groupLabels", "", &d.group_labels));
  RETURN_IF_ERROR(labels(j, "commonLabels", "", &d.common_labels));
  RETURN_IF_ERROR(labels(j, "commonAnnotations", "", &d.common_annotations));
  if (j.contains("alerts") && !j["alerts"].is_array()) return Status::InvalidArgument("template data: alerts: expected a list");
  // An alert is resolved when its end is at or before now_ms, so now_ms is
  // the latest end of a resolved alert and firing alerts get no end.
  for (size_t i = 0; j.contains("alerts") && i < j["alerts"].size(); i++) {
    const Json& a = j["alerts"][i];
    std::string w = "alerts[" + std::to_string(i) + "].";
    if (!a.is_object()) return Status::InvalidArgument("template data: alerts[" + std::to_string(i) + "]: expected an object");
    StoredAlert sa;
    std::string status, starts, ends, fp;
    RETURN_IF_ERROR(str(a, "status", w, &status));
    if (status != "firing" && status != "resolved") {
      return Status::InvalidArgument("template data: " + w + "status: want \"firing\" or \"resolved\", got \"" + status + "\"");
    }
    RETURN_IF_ERROR(labels(a, "labels", w, &sa.alert.labels));
    RETURN_IF_ERROR(labels(a, "annotations", w, &sa.alert.annotations));
    RETURN_IF_ERROR(str(a, "generatorURL", w, &sa.alert.generator_url));
    RETURN_IF_ERROR(str(a, "startsAt", w, &starts));
    RETURN_IF_ERROR(str(a, "endsAt", w, &ends));
    RETURN_IF_ERROR(str(a, "fingerprint", w, &fp));
    auto time = [&](const std::string& s, const char* key, int64_t* ms) -> Status {
      if (s.empty() || s.starts_with("0001-01-01T00:00:00")) return Status::OK();
      auto t = ParseTime(s);
      if (!t.ok()) return Status::InvalidArgument("template data: " + w + key + ": " + t.error().message());
      *ms = *t;
      return Status::OK();
    };
    RETURN_IF_ERROR(time(starts, "startsAt", &sa.alert.starts_at_ms));
    if (status == "resolved") {
      RETURN_IF_ERROR(time(ends, "endsAt", &sa.alert.ends_at_ms));
      if (sa.alert.ends_at_ms == 0) return Status::InvalidArgument("template data: " + w + "endsAt: a resolved alert needs an end time");
      d.now_ms = std::max(d.now_ms, sa.alert.ends_at_ms);
    }
    if (!fp.empty()) {
      size_t used = 0;
      try {
        sa.fingerprint = std::stoull(fp, &used, 16);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != fp.size()) return Status::InvalidArgument("template data: " + w + "fingerprint: want hex digits, got \"" + fp + "\"");
    }
    d.alerts.push_back(std::move(sa));
  }
  return d;
}

}  // namespace trainwatch::notify
