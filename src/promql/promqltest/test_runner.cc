#include "promql/promqltest/test_runner.h"

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/strconv.h"
#include "model/sample.h"
#include "promql/parser/functions.h"
#include "promql/parser/parse.h"
#include "promql/promqltest/test_storage.h"

namespace trainwatch::promql::promqltest {

namespace {

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> Fields(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

bool ParseNum(const std::string& s0, double* out) {
  std::string s = s0;
  if (s.empty()) return false;
  std::string l;
  for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string body = l;
  double sign = 1;
  if (body[0] == '+' || body[0] == '-') {
    if (body[0] == '-') sign = -1;
    body = body.substr(1);
  }
  if (body == "inf") {
    *out = sign * INFINITY;
    return true;
  }
  if (body == "nan") {
    *out = NAN;
    return true;
  }
  if (body.size() > 2 && body[0] == '0' && body[1] == 'x') {
    char* e = nullptr;
    unsigned long long v = std::strtoull(body.c_str() + 2, &e, 16);
    if (*e != 0) return false;
    *out = sign * static_cast<double>(v);
    return true;
  }
  char* e = nullptr;
  double v = std::strtod(body.c_str(), &e);
  if (e == body.c_str() || *e != 0) return false;
  if (!(std::isdigit(static_cast<unsigned char>(body[0])) || body[0] == '.')) return false;
  *out = sign * v;
  return true;
}

struct Item {
  bool present;
  double v;
  // A native histogram item (v unused); hint_set: the literal states its
  // counter_reset_hint, which a comparison then checks.
  std::shared_ptr<model::FloatHistogram> h;
  bool hint_set = false;
};

// Splits a load or expectation line's values into items. A histogram
// literal `{{...}}` holds spaces and is one item, together with what follows
// it up to the next space (`xN`, `+{{...}}xN`, `-{{...}}xN`).
std::vector<std::string> SplitItems(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i >= s.size()) break;
    size_t b = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) {
      if (s.substr(i, 2) == "{{") {
        size_t e = s.find("}}", i + 2);
        i = e == std::string_view::npos ? s.size() : e + 2;
        continue;
      }
      ++i;
    }
    out.emplace_back(s.substr(b, i - b));
  }
  return out;
}

// A number in a histogram literal or list: also Inf and NaN.
bool ParseHistNum(const std::string& s, double* out) { return ParseNum(s, out); }

// Parses the inside of `{{...}}` (promqltest's series-description syntax).
// False with *err set on a syntax error or a repeated key.
bool ParseHistogramBody(std::string_view body, model::FloatHistogram* h, bool* hint_set, std::string* err) {
  *h = model::FloatHistogram();
  *hint_set = false;
  std::set<std::string> seen;
  std::vector<double> pos, neg;
  int32_t offset = 0, n_offset = 0;
  size_t i = 0;
  auto list = [&](std::vector<double>* out) {
    // At '[': numbers separated by spaces up to ']'.
    size_t e = body.find(']', i);
    if (e == std::string_view::npos) return false;
    for (const auto& f : Fields(body.substr(i + 1, e - i - 1))) {
      double v;
      if (!ParseHistNum(f, &v)) return false;
      out->push_back(v);
    }
    i = e + 1;
    return true;
  };
  while (i < body.size()) {
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    if (i >= body.size()) break;
    size_t colon = body.find(':', i);
    if (colon == std::string_view::npos) {
      *err = "histogram: expected key:value at \"" + std::string(body.substr(i)) + "\"";
      return false;
    }
    std::string key = Trim(body.substr(i, colon - i));
    if (!seen.insert(key).second) {
      *err = "histogram: duplicate key " + key;
      return false;
    }
    i = colon + 1;
    while (i < body.size() && body[i] == ' ') ++i;
    if (key == "buckets" || key == "n_buckets" || key == "custom_values") {
      std::vector<double>* dst = key == "buckets" ? &pos : key == "n_buckets" ? &neg : &h->custom_values;
      if (i >= body.size() || body[i] != '[' || !list(dst)) {
        *err = "histogram: bad list for " + key;
        return false;
      }
      continue;
    }
    size_t e = i;
    while (e < body.size() && !std::isspace(static_cast<unsigned char>(body[e]))) ++e;
    std::string val(body.substr(i, e - i));
    i = e;
    if (key == "counter_reset_hint") {
      *hint_set = true;
      if (val == "unknown") {
        h->counter_reset_hint = model::CounterResetHint::kUnknown;
      } else if (val == "reset") {
        h->counter_reset_hint = model::CounterResetHint::kCounterReset;
      } else if (val == "not_reset") {
        h->counter_reset_hint = model::CounterResetHint::kNotCounterReset;
      } else if (val == "gauge") {
        h->counter_reset_hint = model::CounterResetHint::kGauge;
      } else {
        *err = "histogram: bad counter_reset_hint " + val;
        return false;
      }
      continue;
    }
    double v;
    if (!ParseHistNum(val, &v)) {
      *err = "histogram: bad number for " + key + ": " + val;
      return false;
    }
    if (key == "schema") {
      h->schema = static_cast<int32_t>(v);
    } else if (key == "sum") {
      h->sum = v;
    } else if (key == "count") {
      h->count = v;
    } else if (key == "z_bucket") {
      h->zero_count = v;
    } else if (key == "z_bucket_w") {
      h->zero_threshold = v;
    } else if (key == "offset") {
      offset = static_cast<int32_t>(v);
    } else if (key == "n_offset") {
      n_offset = static_cast<int32_t>(v);
    } else {
      *err = "histogram: unknown key " + key;
      return false;
    }
  }
  if (!pos.empty()) {
    h->positive_spans.push_back({offset, static_cast<uint32_t>(pos.size())});
    h->positive_buckets = std::move(pos);
  }
  if (!neg.empty()) {
    h->negative_spans.push_back({n_offset, static_cast<uint32_t>(neg.size())});
    h->negative_buckets = std::move(neg);
  }
  return true;
}

// Expands a histogram item: `{{h}}`, `{{h}}xN` (N+1 copies), `{{a}}+{{b}}xN`
// and `{{a}}-{{b}}xN` (N additions or subtractions of b after a).
bool ExpandHistogramItem(const std::string& it, std::vector<Item>* out, std::string* err) {
  auto literal = [&](size_t at, model::FloatHistogram* h, bool* hint_set, size_t* end) {
    size_t e = it.find("}}", at);
    if (it.compare(at, 2, "{{") != 0 || e == std::string::npos) {
      *err = "bad histogram item " + it;
      return false;
    }
    *end = e + 2;
    return ParseHistogramBody(std::string_view(it).substr(at + 2, e - at - 2), h, hint_set, err);
  };
  model::FloatHistogram a;
  bool a_hint = false;
  size_t end = 0;
  if (!literal(0, &a, &a_hint, &end)) return false;
  if (end == it.size()) {
    out->push_back({true, 0, std::make_shared<model::FloatHistogram>(a), a_hint});
    return true;
  }
  model::FloatHistogram b;
  bool b_hint = a_hint;
  char op = 0;
  if (it[end] == '+' || it[end] == '-') {
    op = it[end];
    if (!literal(end + 1, &b, &b_hint, &end)) return false;
  }
  if (end >= it.size() || it[end] != 'x') {
    *err = "bad histogram item " + it;
    return false;
  }
  char* e = nullptr;
  long n = std::strtol(it.c_str() + end + 1, &e, 10);
  if (*e != 0 || n < 0) {
    *err = "bad histogram repeat count in " + it;
    return false;
  }
  auto cur = std::make_shared<model::FloatHistogram>(a);
  out->push_back({true, 0, cur, op == 0 ? a_hint : b_hint});
  for (long k = 1; k <= n; ++k) {
    if (op == 0) {
      out->push_back({true, 0, cur, a_hint});
      continue;
    }
    if (cur->schema > b.schema) {
      *err = "error combining histograms: cannot merge from schema " + std::to_string(b.schema) + " to " +
             std::to_string(cur->schema);
      return false;
    }
    auto next = std::make_shared<model::FloatHistogram>(*cur);
    auto r = op == '+' ? next->Add(b) : next->Sub(b);
    if (!r.ok()) {
      *err = r.error().message();
      return false;
    }
    out->push_back({true, 0, next, b_hint});
    cur = std::move(next);
  }
  return true;
}

// Expands one value item; returns false on syntax it cannot handle.
bool ExpandItem(const std::string& it, std::vector<Item>* out, std::string* err) {
  if (it.find("{{") != std::string::npos) return ExpandHistogramItem(it, out, err);
  *err = "cannot parse item " + it;
  if (it == "_") {
    out->push_back({false, 0});
    return true;
  }
  if (it == "stale") {
    out->push_back({true, model::StaleNaN()});
    return true;
  }
  size_t x = it.rfind('x');
  if (x != std::string::npos && x > 0 && x + 1 < it.size()) {
    std::string head = it.substr(0, x);
    long n = std::strtol(it.c_str() + x + 1, nullptr, 10);
    if (head == "_") {
      for (long i = 0; i < n; ++i) out->push_back({false, 0});
      return true;
    }
    // a+b or a-b (sign of a optional)
    size_t op = std::string::npos;
    for (size_t i = 1; i < head.size(); ++i) {
      if ((head[i] == '+' || head[i] == '-') && head[i - 1] != 'e' && head[i - 1] != 'E') {
        op = i;
        break;
      }
    }
    double a, b = 0;
    if (op == std::string::npos) {
      if (!ParseNum(head, &a)) return false;
    } else {
      if (!ParseNum(head.substr(0, op), &a) || !ParseNum(head.substr(op + 1), &b)) return false;
      if (head[op] == '-') b = -b;
    }
    for (long i = 0; i <= n; ++i) out->push_back({true, a + b * static_cast<double>(i)});
    return true;
  }
  double v;
  if (!ParseNum(it, &v)) return false;
  out->push_back({true, v});
  return true;
}

// Parses `name{a="b"}` (or `{__name__="x"}`), returning the rest of the line.
bool ParseSeriesDesc(const std::string& line, model::Labels* labels, std::string* rest) {
  size_t i = 0;
  std::vector<model::Label> ls;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == ':')) ++i;
  if (i > 0) ls.push_back({"__name__", line.substr(0, i)});
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
      if (i >= line.size()) return false;
      if (line[i] == '}') {
        ++i;
        break;
      }
      std::string name;
      if (line[i] == '"') {
        size_t j = i + 1;
        while (j < line.size() && line[j] != '"') j += line[j] == '\\' ? 2 : 1;
        auto u = GoUnquote(line.substr(i, j + 1 - i));
        if (!u.ok()) return false;
        name = *u;
        i = j + 1;
      } else {
        size_t j = i;
        while (j < line.size() && (std::isalnum(static_cast<unsigned char>(line[j])) || line[j] == '_')) ++j;
        name = line.substr(i, j - i);
        i = j;
      }
      while (i < line.size() && line[i] == ' ') ++i;
      if (i >= line.size() || line[i] != '=') return false;
      ++i;
      while (i < line.size() && line[i] == ' ') ++i;
      if (i >= line.size() || line[i] != '"') return false;
      size_t j = i + 1;
      while (j < line.size() && line[j] != '"') j += line[j] == '\\' ? 2 : 1;
      auto u = GoUnquote(line.substr(i, j + 1 - i));
      if (!u.ok()) return false;
      ls.push_back({name, *u});
      i = j + 1;
    }
  } else if (i == 0) {
    return false;
  }
  std::vector<model::Label> clean;
  for (auto& l : ls) {
    bool dup = false;
    for (auto& c : clean) {
      if (c.name == l.name) {
        c.value = l.value;
        dup = true;
      }
    }
    if (!dup) clean.push_back(l);
  }
  *labels = model::Labels(std::move(clean));
  *rest = line.substr(i);
  return true;
}

bool AlmostEqual(double a, double b) {
  if (model::IsStaleNaN(a) || model::IsStaleNaN(b)) return model::IsStaleNaN(a) && model::IsStaleNaN(b);
  if (std::isnan(a) && std::isnan(b)) return true;
  if (a == b) return true;
  constexpr double kMinNormal = 2.2250738585072014e-308;
  double abs_sum = std::fabs(a) + std::fabs(b);
  double diff = std::fabs(a - b);
  if (a == 0 || b == 0 || abs_sum < kMinNormal) return diff < 1e-6 * kMinNormal;
  return diff / std::fmin(abs_sum, 1.7976931348623157e308) < 1e-6;
}

std::string Fmt(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.17g", v);
  return b;
}

struct ExpectedSeries {
  model::Labels labels;
  std::vector<Item> items;
};

struct EvalCmd {
  int line = 0;
  bool range = false;
  int64_t at = 0, start = 0, end = 0, step = 0;
  std::string expr;
  bool expect_fail = false;
  std::string fail_msg, fail_regex;
  bool ordered = false;
  bool has_scalar = false;
  double scalar = 0;
  bool expect_string = false;
  std::string str;
  bool expect_matrix = false;
  int64_t m_start = 0, m_end = 0, m_step = 0;
  std::vector<ExpectedSeries> series;
  std::string bad;  // unparseable expectation
  // `expect warn|info` / `expect no_warn|no_info`: whether the query must
  // (not) give annotations of that kind, and which (msg: or regex: lines).
  struct Annotations {
    enum class Want { kUnchecked, kSome, kNone } want = Want::kUnchecked;
    std::vector<std::string> msgs, regexes;
  };
  Annotations warn, info;
};

int64_t Dur(const std::string& s) {
  auto d = parser::ParseDuration(s);
  if (!d.ok()) {
    double v;
    if (ParseNum(s, &v)) return static_cast<int64_t>(v * 1000);
    return 0;
  }
  return *d;
}

// A duration with an optional sign ("-30s", "+1m", "0"); false when malformed.
bool SignedDur(std::string s, int64_t* out) {
  int64_t sign = 1;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    if (s[0] == '-') sign = -1;
    s.erase(0, 1);
  }
  if (s.empty()) return false;
  if (s == "0") {
    *out = 0;
    return true;
  }
  auto d = parser::ParseDuration(s);
  if (!d.ok()) return false;
  *out = sign * *d;
  return true;
}

// Expands one item of a start-timestamp (`@st`) line into per-slot offsets
// from the sample time (nullopt: no start timestamp): `_`, `_xN`, `<dur>`,
// `<dur>xN` (N+1 slots), `<dur>+<dur>xN`, `<dur>-<dur>xN`. False on bad syntax.
bool ExpandStItem(const std::string& it, std::vector<std::optional<int64_t>>* out) {
  if (it == "_") {
    out->push_back(std::nullopt);
    return true;
  }
  std::string head = it;
  long n = -1;  // -1: a single slot
  if (size_t x = it.rfind('x'); x != std::string::npos && x > 0 && x + 1 < it.size()) {
    head = it.substr(0, x);
    char* e = nullptr;
    n = std::strtol(it.c_str() + x + 1, &e, 10);
    if (*e != 0 || n < 0) return false;
  }
  if (head == "_") {
    for (long i = 0; i < std::max(n, 1L); ++i) out->push_back(std::nullopt);
    return true;
  }
  size_t op = std::string::npos;
  for (size_t i = 1; i < head.size(); ++i) {
    if (head[i] == '+' || head[i] == '-') {
      op = i;
      break;
    }
  }
  int64_t a = 0, b = 0;
  if (op == std::string::npos) {
    if (!SignedDur(head, &a)) return false;
  } else {
    if (n < 0 || !SignedDur(head.substr(0, op), &a) || !SignedDur(head.substr(op + 1), &b)) return false;
    if (head[op] == '-') b = -b;
  }
  for (long i = 0; i <= std::max(n, 0L); ++i) out->push_back(a + b * i);
  return true;
}

// promqltest's load_with_nhcb: the classic histogram series of one load
// block (`<n>_bucket{le}`, `<n>_count`, `<n>_sum`) gathered per base series
// and timestamp, then written as custom-bucket native histograms `<n>`.
class ClassicToNhcb {
 public:
  void Add(const model::Labels& l, int64_t t, double v) {
    std::string_view name = l.MetricName();
    for (std::string_view suf : {"_bucket", "_count", "_sum"}) {
      if (!name.ends_with(suf)) continue;
      double le = 0;
      if (suf == "_bucket") {
        if (!l.Has("le") || !ParseNum(std::string(l.Get("le")), &le) || std::isnan(le)) return;
      }
      model::LabelsBuilder b(l);
      b.Set(model::kMetricName, std::string(name.substr(0, name.size() - suf.size())));
      b.Del("le");
      Temp& h = series_[b.Build()][t];
      if (suf == "_bucket") {
        h.buckets.try_emplace(le, v);  // a repeated bound keeps the first
      } else if (suf == "_count") {
        h.count = v;
        h.has_count = true;
      } else {
        h.sum = v;
      }
      return;
    }
  }

  // Stores every gathered histogram; the first conversion error, if any.
  std::string Write(TestStorage* db) {
    for (auto& [labels, by_t] : series_) {
      for (auto& [t, tmp] : by_t) {
        model::FloatHistogram h;
        std::string err = Convert(tmp, &h);
        if (!err.empty()) return err;
        db->AddHistogram(labels, t, std::make_shared<model::FloatHistogram>(std::move(h)));
      }
    }
    return "";
  }

 private:
  struct Temp {
    std::map<double, double> buckets;  // le -> cumulative count
    double count = 0, sum = 0;
    bool has_count = false;
  };

  static std::string Convert(const Temp& tmp, model::FloatHistogram* h) {
    std::vector<std::pair<double, double>> b(tmp.buckets.begin(), tmp.buckets.end());
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i].second < 0) return "negative bucket count";
      if (i > 0 && b[i].second < b[i - 1].second) return "count is not cumulative";
    }
    double count = tmp.has_count || b.empty() ? tmp.count : b.back().second;
    if (count < 0) return "count must be non-negative";
    if (b.empty() || b.back().first != INFINITY) b.push_back({INFINITY, count});
    bool integers = count == std::round(count);
    for (const auto& x : b) integers = integers && x.second == std::round(x.second);
    if (count != b.back().second) return "count mismatch";
    h->schema = model::kCustomBucketsSchema;
    h->count = count;
    h->sum = tmp.sum;
    h->positive_spans = {{0, static_cast<uint32_t>(b.size())}};
    double prev = 0;
    for (const auto& [le, c] : b) {
      h->positive_buckets.push_back(c - prev);
      prev = c;
      if (le != INFINITY) h->custom_values.push_back(le);
    }
    // Prometheus makes an integer histogram (compacted keeping runs of up to
    // two empty buckets) when every count is whole, a float one otherwise.
    h->Compact(integers ? 2 : 0);
    Status st = h->Validate();
    return st.ok() ? "" : st.message();
  }

  std::map<model::Labels, std::map<int64_t, Temp>> series_;
};

// Bucket indexes and counts of one side, in order; zero-length spans add nothing.
std::vector<std::pair<int32_t, double>> ExpandBuckets(const std::vector<model::Span>& spans,
                                                     const std::vector<double>& buckets) {
  std::vector<std::pair<int32_t, double>> out;
  int32_t idx = 0;
  size_t k = 0;
  for (const auto& sp : spans) {
    idx += sp.offset;
    for (uint32_t j = 0; j < sp.length && k < buckets.size(); ++j) out.push_back({idx++, buckets[k++]});
  }
  return out;
}

bool BucketsMatch(const std::vector<std::pair<int32_t, double>>& a, const std::vector<std::pair<int32_t, double>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !AlmostEqual(a[i].second, b[i].second)) return false;
  }
  return true;
}

// promqltest's comparison: both compacted; floats within the tolerance;
// the hint only when the expectation states it.
bool HistogramsMatch(const model::FloatHistogram& exp0, const model::FloatHistogram& got0, bool hint_set) {
  model::FloatHistogram exp = exp0, got = got0;
  exp.Compact(0);
  got.Compact(0);
  if (exp.schema != got.schema || !AlmostEqual(exp.count, got.count) || !AlmostEqual(exp.sum, got.sum)) return false;
  if (exp.UsesCustomBuckets() && exp.custom_values != got.custom_values) return false;
  if (exp.zero_threshold != got.zero_threshold || !AlmostEqual(exp.zero_count, got.zero_count)) return false;
  if (!BucketsMatch(ExpandBuckets(exp.negative_spans, exp.negative_buckets),
                    ExpandBuckets(got.negative_spans, got.negative_buckets))) {
    return false;
  }
  if (!BucketsMatch(ExpandBuckets(exp.positive_spans, exp.positive_buckets),
                    ExpandBuckets(got.positive_spans, got.positive_buckets))) {
    return false;
  }
  return !hint_set || exp.counter_reset_hint == got.counter_reset_hint;
}

// A value of a result or an expectation: a float, or a histogram when h is set.
struct Val {
  int64_t t = 0;
  double v = 0;
  const model::FloatHistogram* h = nullptr;
  bool hint_set = false;
};

std::string FmtVal(const Val& x) { return x.h != nullptr ? x.h->String() : Fmt(x.v); }

bool ValsMatch(const Val& want, const Val& got) {
  if ((want.h == nullptr) != (got.h == nullptr)) return false;
  if (want.h != nullptr) return HistogramsMatch(*want.h, *got.h, want.hint_set);
  return AlmostEqual(got.v, want.v);
}

std::string CheckResult(const EvalCmd& c, const QueryResult& res) {
  if (c.expect_string) {
    if (res.type != ValueType::kString) return "expected string result";
    return res.str == c.str ? "" : "expected string \"" + c.str + "\", got \"" + res.str + "\"";
  }
  if (c.has_scalar) {
    if (c.range) {
      if (res.type != ValueType::kMatrix || res.matrix.size() != 1) return "expected scalar matrix";
    } else {
      if (res.type != ValueType::kScalar) return "expected scalar result";
      return AlmostEqual(res.scalar.v, c.scalar) ? "" : "expected scalar " + Fmt(c.scalar) + ", got " + Fmt(res.scalar.v);
    }
  }
  if (c.range || c.expect_matrix) {
    if (res.type != ValueType::kMatrix) {
      if (c.series.empty() && res.type == ValueType::kVector && res.vector.empty()) return "";
      return "expected matrix result";
    }
    int64_t start = c.range ? c.start : c.m_start;
    int64_t step = c.range ? c.step : c.m_step;
    std::map<model::Labels, std::vector<Val>> want;
    for (const auto& s : c.series) {
      auto& pts = want[s.labels];
      for (size_t i = 0; i < s.items.size(); ++i) {
        const Item& it = s.items[i];
        if (it.present) pts.push_back({start + static_cast<int64_t>(i) * step, it.v, it.h.get(), it.hint_set});
      }
    }
    if (c.has_scalar) return "";  // range scalar: lenient
    for (size_t i = 1; i < res.matrix.size(); ++i) {
      if (!(res.matrix[i - 1].labels < res.matrix[i].labels)) return "matrix not sorted by labels";
    }
    size_t nonempty = 0;
    for (const auto& s : res.matrix) {
      std::vector<Val> got;
      for (const auto& p : s.points) got.push_back({p.t, p.v});
      for (const auto& p : s.hpoints) got.push_back({p.t, 0, p.h.get()});
      std::stable_sort(got.begin(), got.end(), [](const Val& a, const Val& b) { return a.t < b.t; });
      if (got.empty()) continue;
      ++nonempty;
      auto it = want.find(s.labels);
      if (it == want.end()) return "unexpected series " + s.labels.ToString();
      if (it->second.size() != got.size()) {
        return "series " + s.labels.ToString() + ": expected " + std::to_string(it->second.size()) + " points, got " +
               std::to_string(got.size());
      }
      for (size_t i = 0; i < got.size(); ++i) {
        const Val& w = it->second[i];
        if (got[i].t != w.t || !ValsMatch(w, got[i])) {
          return "series " + s.labels.ToString() + ": point " + std::to_string(i) + " expected " + FmtVal(w) + "@" +
                 std::to_string(w.t) + ", got " + FmtVal(got[i]) + "@" + std::to_string(got[i].t);
        }
      }
    }
    size_t want_nonempty = 0;
    for (const auto& [l, p] : want) want_nonempty += p.empty() ? 0 : 1;
    if (nonempty != want_nonempty) {
      return "expected " + std::to_string(want_nonempty) + " series, got " + std::to_string(nonempty);
    }
    return "";
  }
  if (res.type != ValueType::kVector) {
    if (c.series.empty() && res.type == ValueType::kMatrix && res.matrix.empty()) return "";
    return "expected instant vector result";
  }
  auto got_val = [](const VectorSample& s) { return Val{s.t, s.v, s.h.get()}; };
  if (res.vector.size() != c.series.size()) {
    std::string got;
    for (const auto& s : res.vector) got += " " + s.labels.ToString() + "=" + FmtVal(got_val(s));
    return "expected " + std::to_string(c.series.size()) + " samples, got " + std::to_string(res.vector.size()) + ":" +
           got;
  }
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& e = c.series[i];
    if (e.items.size() != 1) return "bad expectation";
    const VectorSample* found = nullptr;
    if (c.ordered) {
      if (res.vector[i].labels == e.labels) found = &res.vector[i];
      if (!found) return "order mismatch at " + std::to_string(i) + ": expected " + e.labels.ToString();
    } else {
      for (const auto& s : res.vector) {
        if (s.labels == e.labels) found = &s;
      }
    }
    if (!found) return "missing series " + e.labels.ToString();
    Val want{0, e.items[0].v, e.items[0].h.get(), e.items[0].hint_set};
    if (!ValsMatch(want, got_val(*found))) {
      return "series " + e.labels.ToString() + ": expected " + FmtVal(want) + ", got " + FmtVal(got_val(*found));
    }
  }
  return "";
}

bool CallsAny(const parser::Expr& e, std::initializer_list<std::string_view> names) {
  if (e.kind == parser::NodeKind::kCall) {
    for (auto n : names) {
      if (e.func->name == n) return true;
    }
  }
  for (const auto& a : e.args) {
    if (CallsAny(*a, names)) return true;
  }
  for (const auto* d : {e.range_expr.get(), e.step_expr.get(), e.offset_expr.get()}) {
    if (d != nullptr && CallsAny(*d, names)) return true;
  }
  return false;
}

// Sets `@ t` on every vector selector, matrix selector and outermost subquery
// without one; selectors below a subquery that has an @ are left alone (as
// Prometheus's promqltest does).
void SetAt(parser::Expr* e, int64_t t) {
  using parser::NodeKind;
  switch (e->kind) {
    case NodeKind::kVectorSelector:
      if (e->at == parser::AtKind::kNone) {
        e->at = parser::AtKind::kValue;
        e->at_ms = t;
      }
      return;
    case NodeKind::kMatrixSelector:
      SetAt(e->args[0].get(), t);
      return;
    case NodeKind::kSubquery:
      if (e->at == parser::AtKind::kNone) {
        e->at = parser::AtKind::kValue;
        e->at_ms = t;
      }
      return;
    default:
      for (auto& a : e->args) SetAt(a.get(), t);
  }
}

struct InstantCase {
  std::string expr;
  int64_t t;
};

// The instant eval itself plus its `@` re-runs.
std::vector<InstantCase> InstantCases(const std::string& expr, int64_t t) {
  std::vector<InstantCase> out{{expr, t}};
  auto parsed = parser::ParseExpr(expr);
  if (!parsed.ok()) return out;
  if (CallsAny(**parsed, {"days_in_month", "day_of_month", "day_of_week", "day_of_year", "end", "hour", "minute",
                          "month", "year", "predict_linear", "range", "start", "step", "time", "timestamp"})) {
    return out;
  }
  SetAt(parsed->get(), t);
  std::string with_at = (*parsed)->String();
  std::vector<int64_t> times = t == 0 ? std::vector<int64_t>{-1000, 0, 1000}
                                      : std::vector<int64_t>{-10 * t, 0, t / 5, t, 10 * t};
  for (int64_t et : times) out.push_back({with_at, et});
  return out;
}

std::string CheckFailure(const EvalCmd& c, const Result<QueryResult>& res) {
  if (res.ok()) return "expected error, got success";
  const std::string& msg = res.error().message();
  if (!c.fail_msg.empty() && msg != c.fail_msg) return "expected error \"" + c.fail_msg + "\", got \"" + msg + "\"";
  if (!c.fail_regex.empty() && !RE2::PartialMatch(msg, c.fail_regex)) {
    return "error \"" + msg + "\" does not match " + c.fail_regex;
  }
  return "";
}

// As promqltest: with `expect <kind>`, at least one annotation of the kind;
// every msg/regex line matches one of them and each of them matches a line.
// With `expect no_<kind>`, none.
std::string CheckAnnotationKind(const char* kind, const EvalCmd::Annotations& want, const std::vector<std::string>& got) {
  using Want = EvalCmd::Annotations::Want;
  if (want.want == Want::kUnchecked) return "";
  if (want.want == Want::kNone) return got.empty() ? "" : std::string("unexpected ") + kind + ": " + got[0];
  if (got.empty()) return std::string("expected ") + kind + ", got none";
  auto line_matches = [&](const std::string& a, size_t line) {
    return line < want.msgs.size() ? a == want.msgs[line] : RE2::PartialMatch(a, want.regexes[line - want.msgs.size()]);
  };
  const size_t lines = want.msgs.size() + want.regexes.size();
  if (lines == 0) return "";
  for (size_t l = 0; l < lines; ++l) {
    if (std::none_of(got.begin(), got.end(), [&](const std::string& a) { return line_matches(a, l); })) {
      return std::string("expected ") + kind + " \"" +
             (l < want.msgs.size() ? want.msgs[l] : want.regexes[l - want.msgs.size()]) + "\", got \"" + got[0] + "\"";
    }
  }
  for (const std::string& a : got) {
    bool matched = false;
    for (size_t l = 0; l < lines && !matched; ++l) matched = line_matches(a, l);
    if (!matched) return std::string("unexpected ") + kind + ": " + a;
  }
  return "";
}

std::string CheckAnnotations(const EvalCmd& c, const QueryResult& res) {
  std::string why = CheckAnnotationKind("warning", c.warn, res.warnings);
  return why.empty() ? CheckAnnotationKind("info", c.info, res.infos) : why;
}

std::string RunRangeEval(Engine& engine, TestStorage& db, const EvalCmd& c) {
  auto res = engine.Range(db, c.expr, c.start, c.end, c.step);
  if (c.expect_fail) return CheckFailure(c, res);
  if (!res.ok()) return "unexpected error: " + res.error().ToString();
  std::string why = CheckResult(c, *res);
  return why.empty() ? CheckAnnotations(c, *res) : why;
}

std::string RunInstantEval(Engine& engine, TestStorage& db, const EvalCmd& c) {
  bool range_check = !c.expect_matrix && !c.expect_string;
  if (range_check) {
    auto parsed = parser::ParseExpr(c.expr);
    if (parsed.ok() && CallsAny(**parsed, {"start", "end", "range", "step"})) range_check = false;
  }
  for (const auto& q : InstantCases(c.expr, c.at)) {
    std::string where = q.expr == c.expr && q.t == c.at ? "" : " [as " + q.expr + " at " + std::to_string(q.t) + "]";
    auto res = engine.Instant(db, q.expr, q.t);
    if (c.expect_fail) {
      std::string why = CheckFailure(c, res);
      if (!why.empty()) return why + where;
      continue;
    }
    if (!res.ok()) return "unexpected error: " + res.error().ToString() + where;
    std::string why = CheckResult(c, *res);
    if (why.empty() && where.empty()) why = CheckAnnotations(c, *res);
    if (!why.empty()) return why + where;
    if (!range_check) continue;
    // The same query as a range query from t-1m to t+1m: its middle step must match.
    auto rr = engine.Range(db, q.expr, q.t - 60'000, q.t + 60'000, 60'000);
    if (!rr.ok()) return "range mode: unexpected error: " + rr.error().ToString() + where;
    if (c.ordered) continue;
    for (size_t i = 1; i < rr->matrix.size(); ++i) {
      if (!(rr->matrix[i - 1].labels < rr->matrix[i].labels)) return "range mode: matrix not sorted by labels" + where;
    }
    QueryResult mid;
    if (res->type == ValueType::kScalar) {
      mid.type = ValueType::kScalar;
      bool found = false;
      for (const auto& s : rr->matrix) {
        for (const auto& p : s.points) {
          if (p.t == q.t) {
            mid.scalar = p;
            found = true;
          }
        }
      }
      if (!found) return "range mode: no scalar point at the evaluation time" + where;
    } else {
      mid.type = ValueType::kVector;
      for (const auto& s : rr->matrix) {
        for (const auto& p : s.points) {
          if (p.t == q.t) {
            mid.vector.push_back({s.labels, p.t, p.v, nullptr});
            break;
          }
        }
        for (const auto& p : s.hpoints) {
          if (p.t == q.t) {
            mid.vector.push_back({s.labels, p.t, 0, p.h});
            break;
          }
        }
      }
    }
    why = CheckResult(c, mid);
    if (!why.empty()) return "range mode: " + why + where;
  }
  return "";
}

}  // namespace

FileResult RunScript(std::string_view name, std::string_view content) {
  FileResult fr;
  fr.name = std::string(name);
  std::vector<std::string> lines;
  {
    std::istringstream in{std::string(content)};
    std::string l;
    while (std::getline(in, l)) {
      std::string t = Trim(l);
      if (!t.empty() && t[0] == '#') t.clear();
      lines.push_back(t);
    }
  }
  TestStorage db;
  EngineOptions opts;
  opts.max_samples = 10000;
  opts.timeout_ms = 100'000;
  Engine engine(opts);
  size_t i = 0;
  while (i < lines.size()) {
    if (lines[i].empty()) {
      ++i;
      continue;
    }
    int lineno = static_cast<int>(i) + 1;
    std::vector<std::string> f = Fields(lines[i]);
    std::string kw = f[0];
    for (char& ch : kw) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    size_t block_end = i + 1;
    while (block_end < lines.size() && !lines[block_end].empty()) ++block_end;
    if (kw == "clear") {
      db.Clear();
      ++i;
      continue;
    }
    if (kw.starts_with("load")) {
      int64_t step = f.size() > 1 ? Dur(f[1]) : 0;
      bool nhcb = kw == "load_with_nhcb";
      // The `name{...}@st` line just read: start-timestamp offsets for the
      // next line's samples, which must be of the same series.
      std::optional<model::Labels> st_labels;
      std::vector<std::optional<int64_t>> st_slots;
      ClassicToNhcb nhcb_parts;
      for (size_t j = i + 1; j < block_end; ++j) {
        model::Labels l;
        std::string rest;
        const std::string& line = lines[j];
        if (!ParseSeriesDesc(line, &l, &rest)) continue;
        if (rest.starts_with("@st")) {
          st_labels = l;
          st_slots.clear();
          for (const auto& it : Fields(rest.substr(3))) {
            if (!ExpandStItem(it, &st_slots)) {
              fr.failed++;
              fr.failures.push_back("line " + std::to_string(j + 1) + ": bad start-timestamp item " + it);
              break;
            }
          }
          continue;
        }
        std::vector<std::optional<int64_t>> st;
        if (st_labels.has_value()) {
          if (*st_labels == l) st = std::move(st_slots);
          st_labels.reset();
          st_slots.clear();
        }
        std::vector<Item> items;
        for (const auto& it : SplitItems(rest)) {
          std::string err;
          if (!ExpandItem(it, &items, &err)) {
            fr.failed++;
            fr.failures.push_back("line " + std::to_string(j + 1) + ": " + err);
            break;
          }
        }
        for (size_t k = 0; k < items.size(); ++k) {
          if (!items[k].present) continue;
          int64_t t = static_cast<int64_t>(k) * step;
          int64_t start = k < st.size() && st[k].has_value() ? t + *st[k] : 0;
          if (items[k].h != nullptr) {
            db.AddHistogram(l, t, items[k].h, start);
          } else {
            db.Add(l, t, items[k].v, start);
            if (nhcb) nhcb_parts.Add(l, t, items[k].v);
          }
        }
      }
      if (nhcb) {
        // load_with_nhcb also writes a custom-bucket native histogram `<n>`
        // (without le) for every classic histogram of the block.
        std::string err = nhcb_parts.Write(&db);
        if (!err.empty()) {
          fr.failed++;
          fr.failures.push_back("line " + std::to_string(lineno) + ": load_with_nhcb: " + err);
        }
      }
      i = block_end;
      continue;
    }
    if (!kw.starts_with("eval")) {
      fr.failed++;
      fr.failures.push_back("line " + std::to_string(lineno) + ": unknown command " + f[0]);
      i = block_end;
      continue;
    }
    EvalCmd c;
    c.line = lineno;
    if (kw == "eval_fail") c.expect_fail = true;
    if (kw == "eval_ordered") c.ordered = true;
    // Header: eval instant at T expr | eval range from S to E step D expr
    std::string header = lines[i];
    size_t pos = 0;
    auto next_word = [&]() {
      while (pos < header.size() && header[pos] == ' ') ++pos;
      size_t b = pos;
      while (pos < header.size() && header[pos] != ' ' && header[pos] != '\t') ++pos;
      return header.substr(b, pos - b);
    };
    next_word();
    std::string mode = next_word();
    if (mode == "instant") {
      next_word();  // at
      c.at = Dur(next_word());
    } else {
      c.range = true;
      next_word();  // from
      c.start = Dur(next_word());
      next_word();  // to
      c.end = Dur(next_word());
      next_word();  // step
      c.step = Dur(next_word());
    }
    c.expr = Trim(header.substr(pos));
    for (size_t j = i + 1; j < block_end; ++j) {
      const std::string& l = lines[j];
      if (l.starts_with("expect ")) {
        std::string r = Trim(l.substr(7));
        if (r.starts_with("fail")) {
          c.expect_fail = true;
          std::string m = Trim(r.substr(4));
          if (m.starts_with("msg:")) c.fail_msg = Trim(m.substr(4));
          if (m.starts_with("regex:")) c.fail_regex = Trim(m.substr(6));
        } else if (r.starts_with("warn") || r.starts_with("no_warn") || r.starts_with("info") ||
                   r.starts_with("no_info")) {
          const bool none = r.starts_with("no_");
          if (none) r = r.substr(3);
          EvalCmd::Annotations& a = r.starts_with("warn") ? c.warn : c.info;
          a.want = none ? EvalCmd::Annotations::Want::kNone : EvalCmd::Annotations::Want::kSome;
          std::string m = Trim(r.substr(4));
          if (m.starts_with("msg:")) a.msgs.push_back(Trim(m.substr(4)));
          if (m.starts_with("regex:")) a.regexes.push_back(Trim(m.substr(6)));
        } else if (r.starts_with("ordered")) {
          c.ordered = true;
        } else if (r.starts_with("range vector")) {
          auto w = Fields(r);
          c.expect_matrix = true;
          c.m_start = Dur(w[3]);
          c.m_end = Dur(w[5]);
          c.m_step = Dur(w[7]);
        } else if (r.starts_with("string")) {
          c.expect_string = true;
          auto u = GoUnquote(Trim(r.substr(6)));
          c.str = u.ok() ? *u : "";
        }
        continue;
      }
      if (l.starts_with("expected_fail_message")) {
        c.fail_msg = Trim(l.substr(21));
        continue;
      }
      if (l.starts_with("expected_fail_regexp")) {
        c.fail_regex = Trim(l.substr(20));
        continue;
      }
      double v;
      if (ParseNum(l, &v)) {
        c.has_scalar = true;
        c.scalar = v;
        continue;
      }
      ExpectedSeries es;
      std::string rest;
      if (!ParseSeriesDesc(l, &es.labels, &rest)) {
        c.bad = "cannot parse expectation: " + l;
        continue;
      }
      for (const auto& it : SplitItems(rest)) {
        std::string err;
        if (!ExpandItem(it, &es.items, &err)) c.bad = err;
      }
      c.series.push_back(std::move(es));
    }
    i = block_end;
    auto fail = [&](const std::string& why) {
      fr.failed++;
      fr.failures.push_back("line " + std::to_string(lineno) + ": " + c.expr + ": " + why);
    };
    if (!c.bad.empty()) {
      fail(c.bad);
      continue;
    }
    std::string why = c.range ? RunRangeEval(engine, db, c) : RunInstantEval(engine, db, c);
    if (!why.empty()) {
      fail(why);
      continue;
    }
    fr.passed++;
  }
  return fr;
}

Result<FileResult> RunFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string name = path.substr(path.find_last_of('/') + 1);
  return RunScript(name, ss.str());
}

}  // namespace trainwatch::promql::promqltest
