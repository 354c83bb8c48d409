#pragma once
// Values a Go text/template sees: for Prometheus's alert templates the alert
// data struct, label maps, query results, samples, numbers, strings and
// times; for other embedders (Alertmanager's notification data) structs and
// named types with methods (GoType). Each kind prints and compares as its Go
// type does, and TypeName() is the Go type name that appears in errors.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainwatch::tmpl {

using StrMap = std::map<std::string, std::string>;

// One element of a `query` result (Go: *template.sample).
struct Sample {
  StrMap labels;
  double value = 0;
};

// The data of an alert template (Go: the struct from AlertTemplateData).
struct AlertData {
  StrMap labels;
  StrMap external_labels;
  std::string external_url;
  double value = 0;
};

class Value;
using ValueMap = std::map<std::string, Value>;

// How an argument is evaluated and checked, after the Go parameter type.
enum class Param {
  kAny,          // interface{}: literals become int / float64 / string / bool
  kReflect,      // reflect.Value (Go builtins): like kAny, but nil is rejected
  kString,       // string
  kQuery,        // template.queryResult
  kSample,       // *template.sample
  kStringSlice,  // []string
};

// Thrown by a function or method body; reported as "error calling NAME: msg".
struct FuncError {
  std::string msg;
};

// A method of a named Go type, called as `.Recv.Name arg...`. REQUIRES: fn
// is set; it may throw FuncError (template_internal.h) to fail the call.
struct Method {
  std::vector<Param> params;
  bool variadic = false;
  Param variadic_param = Param::kAny;
  std::function<Value(const Value& recv, std::vector<Value>& args)> fn;
};

// A named Go type over a kind (Alertmanager's template.KV over
// map[string]string, template.Alerts over a slice, a struct type). Methods
// come before fields and map keys, as Go's method lookup.
struct GoType {
  std::string name;  // "template.KV"
  std::map<std::string, Method, std::less<>> methods;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kInvalid,      // Go: no value (nil data, missing interface map entry); prints "<no value>"
    kBool,
    kInt,          // int (literals); int64 inputs
    kUint,         // uint64 inputs
    kFloat,        // float64
    kString,
    kHTML,         // html/template.HTML from safeHtml
    kStrMap,       // map[string]string ($labels)
    kMap,          // map[string]interface {} (args)
    kList,         // a slice of values, element type in elem_type
    kSample,       // *template.sample
    kQueryResult,  // template.queryResult
    kTime,         // *time.Time or time.Time, UTC
    kAlertData,    // the alert template data struct
    kStruct,       // a struct of a GoType: named fields in declaration order
  };
  using Fields = std::vector<std::pair<std::string, Value>>;

  Value() = default;
  static Value Bool(bool b) { Value v(Kind::kBool); v.b_ = b; return v; }
  static Value Int(int64_t i) { Value v(Kind::kInt); v.i_ = i; return v; }
  static Value Uint(uint64_t u) { Value v(Kind::kUint); v.u_ = u; return v; }
  static Value Float(double f) { Value v(Kind::kFloat); v.f_ = f; return v; }
  static Value String(std::string s) { Value v(Kind::kString); v.s_ = std::move(s); return v; }
  static Value HTML(std::string s) { Value v(Kind::kHTML); v.s_ = std::move(s); return v; }
  static Value Map(StrMap m) {
    Value v(Kind::kStrMap);
    v.strmap_ = std::make_shared<const StrMap>(std::move(m));
    return v;
  }
  static Value AnyMap(ValueMap m) {
    Value v(Kind::kMap);
    v.map_ = std::make_shared<const ValueMap>(std::move(m));
    return v;
  }
  // elem_type is the Go element type name, e.g. "float64".
  static Value List(std::vector<Value> items, std::string elem_type) {
    Value v(Kind::kList);
    v.list_ = std::make_shared<const std::vector<Value>>(std::move(items));
    v.s_ = std::move(elem_type);
    return v;
  }
  static Value SamplePtr(std::shared_ptr<const Sample> s) {
    Value v(Kind::kSample);
    v.sample_ = std::move(s);
    return v;
  }
  static Value Query(std::vector<std::shared_ptr<const Sample>> r) {
    Value v(Kind::kQueryResult);
    v.query_ = std::make_shared<const std::vector<std::shared_ptr<const Sample>>>(std::move(r));
    return v;
  }
  // A *time.Time (Prometheus's toTime) at unix nanoseconds.
  static Value Time(int64_t unix_ns);
  // A time.Time value at unix seconds + nanoseconds; Go's zero time
  // (0001-01-01) is kGoZeroTimeSecs.
  static Value TimeValue(int64_t secs, int64_t nanos);
  static constexpr int64_t kGoZeroTimeSecs = -62135596800;
  static Value Alert(std::shared_ptr<const AlertData> d) {
    Value v(Kind::kAlertData);
    v.alert_ = std::move(d);
    return v;
  }

  // REQUIRES: type has no name clash with the kind's fields.
  static Value Struct(std::shared_ptr<const GoType> type, Fields fields) {
    Value v(Kind::kStruct);
    v.fields_ = std::make_shared<const Fields>(std::move(fields));
    v.type_ = std::move(type);
    return v;
  }
  // The same value as a named type (methods and type name from `type`).
  Value WithType(std::shared_ptr<const GoType> type) const {
    Value v = *this;
    v.type_ = std::move(type);
    return v;
  }

  Kind kind() const { return kind_; }
  bool valid() const { return kind_ != Kind::kInvalid; }
  bool boolean() const { return b_; }
  int64_t int_value() const { return i_; }  // kInt
  uint64_t uint_value() const { return u_; }
  double float_value() const { return f_; }
  const std::string& str() const { return s_; }  // kString, kHTML; kList: element type
  const StrMap& strmap() const { return *strmap_; }
  const ValueMap& map() const { return *map_; }
  const std::vector<Value>& list() const { return *list_; }
  const std::shared_ptr<const Sample>& sample() const { return sample_; }
  const std::vector<std::shared_ptr<const Sample>>& query() const { return *query_; }
  const AlertData& alert() const { return *alert_; }
  const Fields& fields() const { return *fields_; }          // kStruct
  const Value* Field(std::string_view name) const;           // kStruct; null if absent
  const std::shared_ptr<const GoType>& type() const { return type_; }  // null: unnamed
  int64_t time_secs() const { return i_; }    // kTime: unix seconds
  int64_t time_nanos() const { return static_cast<int64_t>(u_); }  // kTime: 0..999999999
  bool time_is_pointer() const { return b_; }  // kTime: *time.Time (Prometheus) vs time.Time

  // The Go type name, e.g. "float64", "map[string]string", "*template.sample".
  std::string TypeName() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kInvalid;
  bool b_ = false;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<const StrMap> strmap_;
  std::shared_ptr<const ValueMap> map_;
  std::shared_ptr<const std::vector<Value>> list_;
  std::shared_ptr<const Sample> sample_;
  std::shared_ptr<const std::vector<std::shared_ptr<const Sample>>> query_;
  std::shared_ptr<const AlertData> alert_;
  std::shared_ptr<const Fields> fields_;
  std::shared_ptr<const GoType> type_;
};

}  // namespace trainwatch::tmpl
