#include "app/notify_templates.h"

#include <nlohmann/json.hpp>

#include "rules/template.h"

namespace trainwatch::app {
namespace {

using Json = nlohmann::json;
using rules::tmpl::Value;

bool IsLabelMap(const std::string& key) {
  return key == "Labels" || key == "Annotations" || key == "GroupLabels" || key == "CommonLabels" ||
         key == "CommonAnnotations";
}

Value ToValue(const Json& j, const std::string& key) {
  if (j.is_object()) {
    if (IsLabelMap(key)) {
      rules::tmpl::StrMap m;
      for (auto it = j.begin(); it != j.end(); ++it) m[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
      return Value::Map(std::move(m));
    }
    rules::tmpl::ValueMap m;
    for (auto it = j.begin(); it != j.end(); ++it) m[it.key()] = ToValue(it.value(), it.key());
    return Value::AnyMap(std::move(m));
  }
  if (j.is_array()) {
    std::vector<Value> items;
    for (const Json& e : j) items.push_back(ToValue(e, ""));
    return Value::List(std::move(items), "template.Alert");
  }
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (key == "StartsAt" || key == "EndsAt") {
      // Go's zero time (0001-01-01, a firing alert's EndsAt) is outside
      // what nanoseconds since 1970 can hold: it stays the text as sent.
      auto t = notify::ParseTime(s);
      int64_t ns = 0;
      if (t.ok() && !__builtin_mul_overflow(*t, int64_t{1000000}, &ns)) return Value::Time(ns);
    }
    return Value::String(s);
  }
  if (j.is_boolean()) return Value::Bool(j.get<bool>());
  if (j.is_number_integer()) return Value::Int(j.get<int64_t>());
  if (j.is_number()) return Value::Float(j.get<double>());
  return Value();
}

}  // namespace

notify::TemplateFunc MakeNotifyTemplateFunc() {
  return [](std::string_view text, const std::string& data_json) -> Result<std::string> {
    auto t = rules::Template::Parse("notify", text);
    if (!t.ok()) return t.error();
    Json j;
    try {
      j = Json::parse(data_json);
    } catch (const std::exception& e) {
      return Status::InvalidArgument(std::string("BUG: notification data is not JSON: ") + e.what());
    }
    return t->Execute(ToValue(j, ""), rules::TemplateOptions{});
  };
}

}  // namespace trainwatch::app
