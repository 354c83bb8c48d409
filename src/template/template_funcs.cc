// The functions templates can call: Go text/template's builtins, and
// Prometheus's template functions (prometheus template/template.go) or
// Alertmanager's (alertmanager template/template.go DefaultFuncs, 0.25),
// with Go's semantics and error texts. None touches files, network or env.
#include <re2/re2.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "base/strconv.h"
#include "base/units.h"
#include "common/url.h"
#include "template/template_internal.h"

namespace trainwatch::tmpl {

namespace {

using K = Value::Kind;
using Args = std::vector<Value>;

[[noreturn]] void Fail(std::string msg) { throw FuncError{std::move(msg)}; }

// strconv.ParseFloat: the forms Go accepts, with its error text.
double ParseGoFloat(const std::string& s) {
  std::string clean;
  for (char c : s) {
    if (c != '_') clean += c;
  }
  std::string lower = clean;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string body = lower;
  double sign = 1;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1 : 1;
    body.erase(0, 1);
  }
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  if (body == "nan") return NAN;
  bool ok = !clean.empty() && !std::isspace(static_cast<unsigned char>(clean[0])) &&
            body.find_first_of("in") == std::string::npos;
  if (body.rfind("0x", 0) == 0 && body.find('p') == std::string::npos) ok = false;
  if (ok) {
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(clean.c_str(), &end);
    if (end == clean.c_str() + clean.size()) {
      if (errno == ERANGE && std::isinf(v)) Fail("strconv.ParseFloat: parsing " + GoQuote(s) + ": value out of range");
      return v;
    }
  }
  Fail("strconv.ParseFloat: parsing " + GoQuote(s) + ": invalid syntax");
}

// common/helpers/templates.ConvertToFloat.
double ToFloat(const Value& v) {
  switch (v.kind()) {
    case K::kFloat: return v.float_value();
    case K::kString: return ParseGoFloat(v.str());
    case K::kInt: return static_cast<double>(v.int_value());
    case K::kUint: return static_cast<double>(v.uint_value());
    default: Fail("can't convert " + v.TypeName() + " to float");
  }
}

std::string G4(double v) { return FormatFloat(v, 'g', 4); }

Value Humanize(const TemplateOptions&, Args& a) {
  double v = ToFloat(a[0]);
  if (v == 0 || std::isnan(v) || std::isinf(v)) return Value::String(G4(v));
  static const char* const kBig[] = {"k", "M", "G", "T", "P", "E", "Z", "Y"};
  static const char* const kSmall[] = {"m", "u", "n", "p", "f", "a", "z", "y"};
  std::string prefix;
  if (std::fabs(v) >= 1) {
    for (const char* p : kBig) {
      if (std::fabs(v) < 1000) break;
      prefix = p;
      v /= 1000;
    }
  } else {
    for (const char* p : kSmall) {
      if (std::fabs(v) >= 1) break;
      prefix = p;
      v *= 1000;
    }
  }
  return Value::String(G4(v) + prefix);
}

Value Humanize1024(const TemplateOptions&, Args& a) {
  double v = ToFloat(a[0]);
  if (std::fabs(v) <= 1 || std::isnan(v) || std::isinf(v)) return Value::String(G4(v));
  static const char* const kPrefixes[] = {"ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"};
  std::string prefix;
  for (const char* p : kPrefixes) {
    if (std::fabs(v) < 1024) break;
    prefix = p;
    v /= 1024;
  }
  return Value::String(G4(v) + prefix);
}

Value HumanizeDuration(const TemplateOptions&, Args& a) {
  double v = ToFloat(a[0]);
  if (std::isnan(v) || std::isinf(v)) return Value::String(G4(v));
  if (v == 0) return Value::String(G4(v) + "s");
  if (std::fabs(v) >= 1) {
    std::string sign;
    if (v < 0) sign = "-", v = -v;
    // Go converts with int64(v); values beyond int64 saturate here instead of wrapping.
    int64_t d = v >= 9.2233720368547758e18 ? INT64_MAX : static_cast<int64_t>(v);
    int64_t seconds = d % 60, minutes = (d / 60) % 60, hours = (d / 3600) % 24, days = d / 86400;
    auto s = [](int64_t x) { return std::to_string(x); };
    if (days != 0) return Value::String(sign + s(days) + "d " + s(hours) + "h " + s(minutes) + "m " + s(seconds) + "s");
    if (hours != 0) return Value::String(sign + s(hours) + "h " + s(minutes) + "m " + s(seconds) + "s");
    if (minutes != 0) return Value::String(sign + s(minutes) + "m " + s(seconds) + "s");
    return Value::String(sign + G4(v) + "s");
  }
  static const char* const kSmall[] = {"m", "u", "n", "p", "f", "a", "z", "y"};
  std::string prefix;
  for (const char* p : kSmall) {
    if (std::fabs(v) >= 1) break;
    prefix = p;
    v *= 1000;
  }
  return Value::String(G4(v) + prefix + "s");
}

Value HumanizePercentage(const TemplateOptions&, Args& a) { return Value::String(G4(ToFloat(a[0]) * 100) + "%"); }

// templates.FloatToTime: nanoseconds truncated to Prometheus's millisecond time.
int64_t FloatToTimeNs(double v) {
  double ts = v * 1e9;
  if (ts > 9.2233720368547758e18 || ts < -9.2233720368547758e18) {
    Fail(FormatFloat(v, 'g', -1) + " cannot be represented as a nanoseconds timestamp since it overflows int64");
  }
  int64_t ns = ts >= 9.2233720368547758e18 ? INT64_MAX : static_cast<int64_t>(ts);
  return ns / 1'000'000 * 1'000'000;
}

Value HumanizeTimestamp(const TemplateOptions&, Args& a) {
  double v = ToFloat(a[0]);
  if (std::isnan(v) || std::isinf(v)) return Value::String(G4(v));
  Value t = Value::Time(FloatToTimeNs(v));
  return Value::String(TimeString(t.time_secs(), t.time_nanos()));
}

Value ToTime(const TemplateOptions&, Args& a) {
  double v = ToFloat(a[0]);
  if (std::isnan(v) || std::isinf(v)) Fail("value is NaN or Inf");
  return Value::Time(FloatToTimeNs(v));
}

Value Query(const TemplateOptions& o, Args& a) {
  if (!o.query) Fail("query function not available");
  auto r = o.query(a[0].str());
  if (!r.ok()) Fail(r.error().message());
  std::vector<std::shared_ptr<const Sample>> out;
  out.reserve(r->size());
  for (auto& s : *r) out.push_back(std::make_shared<const Sample>(std::move(s)));
  return Value::Query(std::move(out));
}

Value First(const TemplateOptions&, Args& a) {
  if (a[0].kind() != K::kQueryResult || a[0].query().empty()) Fail("first() called on vector with no elements");
  return Value::SamplePtr(a[0].query()[0]);
}

const Sample& Deref(const Value& v) {
  if (v.kind() != K::kSample || !v.sample()) Fail("runtime error: invalid memory address or nil pointer dereference");
  return *v.sample();
}

Value Label(const TemplateOptions&, Args& a) {
  const Sample& s = Deref(a[1]);
  auto it = s.labels.find(a[0].str());
  return Value::String(it == s.labels.end() ? "" : it->second);
}
Value SampleValue(const TemplateOptions&, Args& a) { return Value::Float(Deref(a[0]).value); }
Value StrValue(const TemplateOptions&, Args& a) {
  const Sample& s = Deref(a[0]);
  auto it = s.labels.find("__value__");
  return Value::String(it == s.labels.end() ? "" : it->second);
}

Value ArgsFn(const TemplateOptions&, Args& a) {
  ValueMap m;
  for (size_t i = 0; i < a.size(); ++i) m["arg" + std::to_string(i)] = a[i];
  return Value::AnyMap(std::move(m));
}

Value SortByLabel(const TemplateOptions&, Args& a) {
  if (a[1].kind() != K::kQueryResult) return a[1];
  auto v = a[1].query();
  const std::string& by = a[0].str();
  auto get = [&](const std::shared_ptr<const Sample>& s) -> std::string_view {
    auto it = s->labels.find(by);
    return it == s->labels.end() ? std::string_view() : std::string_view(it->second);
  };
  std::stable_sort(v.begin(), v.end(), [&](const auto& x, const auto& y) { return get(x) < get(y); });
  return Value::Query(std::move(v));
}

std::unique_ptr<RE2> CompileRegexp(const std::string& pattern, bool must) {
  RE2::Options opts;
  opts.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, opts);
  if (!re->ok()) {
    std::string err = "error parsing regexp: " + re->error();
    if (must) {
      bool backquote = pattern.find('`') == std::string::npos;
      Fail("regexp: Compile(" + (backquote ? "`" + pattern + "`" : GoQuote(pattern)) + "): " + err);
    }
    Fail(err);
  }
  return re;
}

// regexp.Regexp.Expand of Go: $1, ${1}, $name, ${name}, $$.
void Expand(const RE2& re, std::string_view repl, const std::vector<re2::StringPiece>& groups, std::string* out) {
  const auto& names = re.NamedCapturingGroups();
  size_t i = 0;
  while (i < repl.size()) {
    size_t d = repl.find('$', i);
    if (d == std::string_view::npos) {
      out->append(repl.substr(i));
      return;
    }
    out->append(repl.substr(i, d - i));
    i = d + 1;
    if (i < repl.size() && repl[i] == '$') {
      *out += '$';
      ++i;
      continue;
    }
    bool brace = i < repl.size() && repl[i] == '{';
    size_t j = brace ? i + 1 : i;
    size_t start = j;
    while (j < repl.size() && (std::isalnum(static_cast<unsigned char>(repl[j])) || repl[j] == '_')) ++j;
    std::string_view name = repl.substr(start, j - start);
    if (name.empty() || (brace && (j >= repl.size() || repl[j] != '}'))) {
      *out += '$';
      continue;
    }
    i = brace ? j + 1 : j;
    int num = -1;
    if (std::all_of(name.begin(), name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
        name.size() < 9) {
      num = std::atoi(std::string(name).c_str());
    } else {
      auto it = names.find(std::string(name));
      if (it != names.end()) num = it->second;
    }
    if (num >= 0 && static_cast<size_t>(num) < groups.size() && groups[static_cast<size_t>(num)].data() != nullptr) {
      out->append(groups[static_cast<size_t>(num)].data(), groups[static_cast<size_t>(num)].size());
    }
  }
}

Value ReReplaceAll(const TemplateOptions&, Args& a) {
  auto re = CompileRegexp(a[0].str(), true);
  const std::string& src = a[2].str();
  std::string_view repl = a[1].str();
  int n = re->NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> groups(static_cast<size_t>(n));
  std::string out;
  size_t last_end = 0, search = 0;
  while (search <= src.size()) {
    if (!re->Match(src, search, src.size(), RE2::UNANCHORED, groups.data(), n)) break;
    size_t a0 = static_cast<size_t>(groups[0].data() - src.data());
    size_t a1 = a0 + groups[0].size();
    out.append(src, last_end, a0 - last_end);
    if (a1 > last_end || a0 == 0) Expand(*re, repl, groups, &out);
    last_end = a1;
    size_t width = 1;
    if (search < src.size()) {
      unsigned char c = static_cast<unsigned char>(src[search]);
      width = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    }
    if (search + width > a1) search += width;
    else if (search + 1 > a1) search++;
    else search = a1;
    if (out.size() > (1u << 24)) Fail("result too large");
  }
  if (last_end < src.size()) out.append(src, last_end, std::string::npos);
  return Value::String(std::move(out));
}

Value Match(const TemplateOptions&, Args& a) {
  auto re = CompileRegexp(a[0].str(), false);
  return Value::Bool(RE2::PartialMatch(a[1].str(), *re));
}

// Upper/lower case for ASCII and Latin-1 letters (UTF-8 C3 xx).
std::string MapCase(const std::string& s, bool upper, bool title_only) {
  std::string out = s;
  bool at_word_start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(out[i]);
    bool letter = std::isalnum(c) || c == '_' || c >= 0x80;
    bool apply = !title_only || at_word_start;
    if (c < 0x80) {
      if (apply && std::isalpha(c)) out[i] = static_cast<char>(upper ? std::toupper(c) : std::tolower(c));
    } else if (c == 0xC3 && i + 1 < out.size()) {
      unsigned char d = static_cast<unsigned char>(out[i + 1]);
      if (apply) {
        if (upper && d >= 0xA0 && d <= 0xBE && d != 0xB7) out[i + 1] = static_cast<char>(d - 0x20);
        if (!upper && d >= 0x80 && d <= 0x9E && d != 0x97) out[i + 1] = static_cast<char>(d + 0x20);
      }
      ++i;
    }
    // strings.Title: letters, digits and underscore continue a word; anything else separates.
    at_word_start = !letter;
  }
  return out;
}

Value ToUpper(const TemplateOptions&, Args& a) { return Value::String(MapCase(a[0].str(), true, false)); }
Value ToLower(const TemplateOptions&, Args& a) { return Value::String(MapCase(a[0].str(), false, false)); }
Value Title(const TemplateOptions&, Args& a) { return Value::String(MapCase(a[0].str(), true, true)); }

// Alertmanager 0.25's title, cases.Title(language.AmericanEnglish): the first
// letter of each word upper, the rest lower. Words follow Unicode word
// breaking: letters, digits and '_' join, and so do ' . : between letters
// ("it's", "x.y"). ASCII and Latin-1 letters are mapped, as MapCase.
std::string TitleWords(const std::string& s) {
  std::string out;
  bool in_word = false, seen_letter = false;
  auto is_word = [&](size_t i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    return std::isalnum(c) || c == '_' || c >= 0x80;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    bool joiner = (c == '\'' || c == '.' || c == ':') && in_word && i + 1 < s.size() &&
                  std::isalpha(static_cast<unsigned char>(s[i + 1])) && i > 0 &&
                  std::isalpha(static_cast<unsigned char>(s[i - 1]));
    if (!is_word(i) && !joiner) {
      in_word = seen_letter = false;
      out += static_cast<char>(c);
      continue;
    }
    in_word = true;
    size_t len = c == 0xC3 && i + 1 < s.size() ? 2 : 1;
    std::string ch = s.substr(i, len);
    bool letter = std::isalpha(c) || len == 2;
    if (letter) {
      ch = MapCase(ch, !seen_letter, false);
      seen_letter = true;
    }
    out += ch;
    i += len - 1;
  }
  return out;
}

Value AmTitle(const TemplateOptions&, Args& a) { return Value::String(TitleWords(a[0].str())); }

// join(sep string, s []string): strings.Join with the arguments swapped for pipelines.
Value Join(const TemplateOptions&, Args& a) {
  std::string out;
  const auto& items = a[1].list();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += a[0].str();
    out += items[i].str();
  }
  return Value::String(std::move(out));
}

Value StringSlice(const TemplateOptions&, Args& a) { return Value::List(a, "string"); }
Value SafeHtml(const TemplateOptions&, Args& a) { return Value::HTML(a[0].str()); }

// net.SplitHostPort; false on error.
bool SplitHostPort(const std::string& hp, std::string* host, std::string* port) {
  if (!hp.empty() && hp[0] == '[') {
    size_t end = hp.find(']');
    if (end == std::string::npos || end + 1 >= hp.size() || hp[end + 1] != ':') return false;
    if (hp.find(':', end + 2) != std::string::npos) return false;
    *host = hp.substr(1, end - 1);
    *port = hp.substr(end + 2);
    return true;
  }
  size_t i = hp.rfind(':');
  if (i == std::string::npos) return false;
  std::string h = hp.substr(0, i);
  if (h.find_first_of(":[]") != std::string::npos) return false;
  if (hp.find_first_of("[]", i) != std::string::npos) return false;
  *host = h;
  *port = hp.substr(i + 1);
  return true;
}

bool IsIP(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

Value StripPort(const TemplateOptions&, Args& a) {
  std::string host, port;
  if (!SplitHostPort(a[0].str(), &host, &port)) return a[0];
  return Value::String(host);
}

Value StripDomain(const TemplateOptions&, Args& a) {
  const std::string& hp = a[0].str();
  std::string host, port;
  if (!SplitHostPort(hp, &host, &port)) host = hp, port.clear();
  if (IsIP(host)) return a[0];
  host = host.substr(0, host.find('.'));
  if (port.empty()) return Value::String(host);
  if (host.find(':') != std::string::npos) return Value::String("[" + host + "]:" + port);
  return Value::String(host + ":" + port);
}

Value ParseDurationFn(const TemplateOptions&, Args& a) {
  // prometheus/common's model.ParseDuration, with its error text.
  auto d = ParseDurationMs(a[0].str());
  if (!d.ok()) Fail("not a valid duration string: \"" + a[0].str() + "\"");
  return Value::Float(static_cast<double>(*d) / 1000.0);
}

// Prometheus's pathPrefix: the external URL's path (Go parses a URL without
// a scheme as a path up to its query).
Value PathPrefix(const TemplateOptions& o, Args&) {
  if (o.external_url.find("://") == std::string::npos) {
    return Value::String(o.external_url.substr(0, o.external_url.find_first_of("?#")));
  }
  auto u = common::Url::Parse(o.external_url);
  return Value::String(u.ok() ? u->path : "");
}
Value ExternalURL(const TemplateOptions& o, Args&) { return Value::String(o.external_url); }


Value GraphLink(const TemplateOptions&, Args& a) {
  return Value::String("/graph?g0.expr=" + GoQueryEscape(a[0].str()) + "&g0.tab=0");
}
Value TableLink(const TemplateOptions&, Args& a) {
  return Value::String("/graph?g0.expr=" + GoQueryEscape(a[0].str()) + "&g0.tab=1");
}

// ---- Go builtins ----

std::string EvalArgs(const Args& a) {
  if (a.size() == 1 && a[0].kind() == K::kString) return a[0].str();
  return Sprint(a);
}

Value HtmlFn(const TemplateOptions&, Args& a) {
  std::string out;
  for (char c : EvalArgs(a)) {
    switch (c) {
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\0': out += "\uFFFD"; break;
      default: out += c;
    }
  }
  return Value::String(std::move(out));
}

Value JsFn(const TemplateOptions&, Args& a) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : EvalArgs(a)) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '"': out += "\\\""; break;
      case '<': out += "\\u003C"; break;
      case '>': out += "\\u003E"; break;
      case '&': out += "\\u0026"; break;
      case '=': out += "\\u003D"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return Value::String(std::move(out));
}

Value UrlQueryFn(const TemplateOptions&, Args& a) { return Value::String(GoQueryEscape(EvalArgs(a))); }
Value PrintFn(const TemplateOptions&, Args& a) { return Value::String(Sprint(a)); }
Value PrintlnFn(const TemplateOptions&, Args& a) { return Value::String(Sprintln(a)); }
Value PrintfFn(const TemplateOptions&, Args& a) {
  std::vector<Value> rest(a.begin() + 1, a.end());
  return Value::String(Sprintf(a[0].str(), rest));
}
Value NotFn(const TemplateOptions&, Args& a) { return Value::Bool(!IsTrue(a[0])); }

Value LenFn(const TemplateOptions&, Args& a) {
  const Value& v = a[0];
  switch (v.kind()) {
    case K::kString: case K::kHTML: return Value::Int(static_cast<int64_t>(v.str().size()));
    case K::kStrMap: return Value::Int(static_cast<int64_t>(v.strmap().size()));
    case K::kMap: return Value::Int(static_cast<int64_t>(v.map().size()));
    case K::kList: return Value::Int(static_cast<int64_t>(v.list().size()));
    case K::kQueryResult: return Value::Int(static_cast<int64_t>(v.query().size()));
    case K::kInvalid: Fail("len of nil pointer");
    case K::kSample: Fail("len of type template.sample");
    default: Fail("len of type " + v.TypeName());
  }
}

int64_t IndexArg(const Value& idx, size_t len) {
  int64_t x;
  if (idx.kind() == K::kInt) x = idx.int_value();
  else if (idx.kind() == K::kUint) x = static_cast<int64_t>(idx.uint_value());
  else if (!idx.valid()) Fail("cannot index slice/array with nil");
  else Fail("cannot index slice/array with type " + idx.TypeName());
  if (x < 0 || static_cast<uint64_t>(x) >= len) Fail("index out of range: " + std::to_string(x));
  return x;
}

Value IndexFn(const TemplateOptions&, Args& a) {
  Value item = a[0];
  if (!item.valid()) Fail("index of untyped nil");
  for (size_t i = 1; i < a.size(); ++i) {
    const Value& idx = a[i];
    switch (item.kind()) {
      case K::kList: item = item.list()[static_cast<size_t>(IndexArg(idx, item.list().size()))]; break;
      case K::kQueryResult:
        item = Value::SamplePtr(item.query()[static_cast<size_t>(IndexArg(idx, item.query().size()))]);
        break;
      case K::kString:
        item = Value::Uint(static_cast<unsigned char>(item.str()[static_cast<size_t>(IndexArg(idx, item.str().size()))]));
        break;
      case K::kStrMap: {
        if (idx.kind() != K::kString) {
          Fail(idx.valid() ? "value has type " + idx.TypeName() + "; should be string" : "value is nil; should be of type string");
        }
        auto it = item.strmap().find(idx.str());
        item = Value::String(it == item.strmap().end() ? "" : it->second);
        break;
      }
      case K::kMap: {
        if (idx.kind() != K::kString) {
          Fail(idx.valid() ? "value has type " + idx.TypeName() + "; should be string" : "value is nil; should be of type string");
        }
        auto it = item.map().find(idx.str());
        item = it == item.map().end() ? Value() : it->second;
        if (!item.valid() && i + 1 < a.size()) Fail("index of untyped nil");
        break;
      }
      case K::kSample: Fail("can't index item of type template.sample");
      default: Fail("can't index item of type " + item.TypeName());
    }
  }
  return item;
}

Value SliceFn(const TemplateOptions&, Args& a) {
  const Value& item = a[0];
  if (!item.valid()) Fail("slice of untyped nil");
  if (a.size() > 4) Fail("too many slice indexes: " + std::to_string(a.size() - 1));
  size_t len = item.kind() == K::kString ? item.str().size() : item.kind() == K::kList ? item.list().size() : 0;
  if (item.kind() != K::kString && item.kind() != K::kList) Fail("can't slice item of type " + item.TypeName());
  if (item.kind() == K::kString && a.size() == 4) Fail("cannot 3-index slice a string");
  std::vector<int64_t> idx = {0, static_cast<int64_t>(len)};
  for (size_t i = 1; i < a.size() && i <= 2; ++i) idx[i - 1] = IndexArg(a[i], len + 1);
  if (idx[0] > idx[1]) Fail("invalid slice index: " + std::to_string(idx[0]) + " > " + std::to_string(idx[1]));
  if (item.kind() == K::kString) {
    return Value::String(item.str().substr(static_cast<size_t>(idx[0]), static_cast<size_t>(idx[1] - idx[0])));
  }
  std::vector<Value> out(item.list().begin() + idx[0], item.list().begin() + idx[1]);
  return Value::List(std::move(out), item.str()).WithType(item.type());  // a named slice type stays named
}

Value CallFn(const TemplateOptions&, Args& a) {
  if (!a[0].valid()) Fail("call of nil");
  Fail("non-function of type " + a[0].TypeName());
}

enum class BasicKind { kInvalid, kBool, kInt, kUint, kFloat, kString };

BasicKind Basic(const Value& v) {
  switch (v.kind()) {
    case K::kBool: return BasicKind::kBool;
    case K::kInt: return BasicKind::kInt;
    case K::kUint: return BasicKind::kUint;
    case K::kFloat: return BasicKind::kFloat;
    case K::kString: case K::kHTML: return BasicKind::kString;
    default: return BasicKind::kInvalid;
  }
}

const char* kBadComparison = "incompatible types for comparison";
const char* kBadComparisonType = "invalid type for comparison";

bool Eq1(const Value& x, const Value& y) {
  BasicKind k1 = Basic(x), k2 = Basic(y);
  if (k1 != k2) {
    if (k1 == BasicKind::kInt && k2 == BasicKind::kUint) {
      return x.int_value() >= 0 && static_cast<uint64_t>(x.int_value()) == y.uint_value();
    }
    if (k1 == BasicKind::kUint && k2 == BasicKind::kInt) {
      return y.int_value() >= 0 && x.uint_value() == static_cast<uint64_t>(y.int_value());
    }
    if (x.valid() && y.valid()) Fail(kBadComparison);
    return false;
  }
  switch (k1) {
    case BasicKind::kBool: return x.boolean() == y.boolean();
    case BasicKind::kInt: return x.int_value() == y.int_value();
    case BasicKind::kUint: return x.uint_value() == y.uint_value();
    case BasicKind::kFloat: return x.float_value() == y.float_value();
    case BasicKind::kString: return x.str() == y.str();
    case BasicKind::kInvalid: break;
  }
  if (!x.valid() || !y.valid()) return x.valid() == y.valid();
  if (x.kind() != y.kind()) Fail(kBadComparison);
  if (x.kind() == K::kSample) return x.sample() == y.sample();
  Fail("non-comparable type " + FormatV(y) + ": " + y.TypeName());
}

Value EqFn(const TemplateOptions&, Args& a) {
  if (a.size() < 2) Fail("missing argument for comparison");
  for (size_t i = 1; i < a.size(); ++i) {
    if (Eq1(a[0], a[i])) return Value::Bool(true);
  }
  return Value::Bool(false);
}

Value NeFn(const TemplateOptions& o, Args& a) { return Value::Bool(!EqFn(o, a).boolean()); }

bool Lt(const Value& x, const Value& y) {
  BasicKind k1 = Basic(x);
  if (k1 == BasicKind::kInvalid) Fail(kBadComparisonType);
  BasicKind k2 = Basic(y);
  if (k2 == BasicKind::kInvalid) Fail(kBadComparisonType);
  if (k1 != k2) {
    if (k1 == BasicKind::kInt && k2 == BasicKind::kUint) {
      return x.int_value() < 0 || static_cast<uint64_t>(x.int_value()) < y.uint_value();
    }
    if (k1 == BasicKind::kUint && k2 == BasicKind::kInt) {
      return y.int_value() >= 0 && x.uint_value() < static_cast<uint64_t>(y.int_value());
    }
    Fail(kBadComparison);
  }
  switch (k1) {
    case BasicKind::kBool: Fail(kBadComparisonType);
    case BasicKind::kInt: return x.int_value() < y.int_value();
    case BasicKind::kUint: return x.uint_value() < y.uint_value();
    case BasicKind::kFloat: return x.float_value() < y.float_value();
    case BasicKind::kString: return x.str() < y.str();
    default: Fail(kBadComparisonType);
  }
}

Value LtFn(const TemplateOptions&, Args& a) { return Value::Bool(Lt(a[0], a[1])); }
Value LeFn(const TemplateOptions&, Args& a) { return Value::Bool(Lt(a[0], a[1]) || Eq1(a[0], a[1])); }
Value GtFn(const TemplateOptions&, Args& a) { return Value::Bool(!(Lt(a[0], a[1]) || Eq1(a[0], a[1]))); }
Value GeFn(const TemplateOptions&, Args& a) { return Value::Bool(!Lt(a[0], a[1])); }

using FuncTable = std::unordered_map<std::string_view, FuncDef>;

// Go's builtins plus `own`.
FuncTable WithBuiltins(std::initializer_list<FuncTable::value_type> own) {
  using P = Param;
  FuncTable t{
      {"and", {{P::kReflect}, true, P::kReflect, true, nullptr}},
      {"or", {{P::kReflect}, true, P::kReflect, true, nullptr}},
      {"not", {{P::kReflect}, false, P::kAny, false, NotFn}},
      {"len", {{P::kReflect}, false, P::kAny, false, LenFn}},
      {"index", {{P::kReflect}, true, P::kReflect, false, IndexFn}},
      {"slice", {{P::kReflect}, true, P::kReflect, false, SliceFn}},
      {"call", {{P::kReflect}, true, P::kReflect, false, CallFn}},
      {"print", {{}, true, P::kAny, false, PrintFn}},
      {"printf", {{P::kString}, true, P::kAny, false, PrintfFn}},
      {"println", {{}, true, P::kAny, false, PrintlnFn}},
      {"html", {{}, true, P::kAny, false, HtmlFn}},
      {"js", {{}, true, P::kAny, false, JsFn}},
      {"urlquery", {{}, true, P::kAny, false, UrlQueryFn}},
      {"eq", {{P::kReflect}, true, P::kReflect, false, EqFn}},
      {"ne", {{P::kReflect, P::kReflect}, false, P::kAny, false, NeFn}},
      {"lt", {{P::kReflect, P::kReflect}, false, P::kAny, false, LtFn}},
      {"le", {{P::kReflect, P::kReflect}, false, P::kAny, false, LeFn}},
      {"gt", {{P::kReflect, P::kReflect}, false, P::kAny, false, GtFn}},
      {"ge", {{P::kReflect, P::kReflect}, false, P::kAny, false, GeFn}},
  };
  t.insert(own.begin(), own.end());
  return t;
}

// Go's builtins plus the function set's own.
const FuncTable& Table(FuncSet funcs) {
  using P = Param;
  static const FuncTable* am = new FuncTable(WithBuiltins({
      // Alertmanager 0.25's DefaultFuncs.
      {"toUpper", {{P::kString}, false, P::kAny, false, ToUpper}},
      {"toLower", {{P::kString}, false, P::kAny, false, ToLower}},
      {"title", {{P::kString}, false, P::kAny, false, AmTitle}},
      {"join", {{P::kString, P::kStringSlice}, false, P::kAny, false, Join}},
      {"match", {{P::kString, P::kString}, false, P::kAny, false, Match}},
      {"safeHtml", {{P::kString}, false, P::kAny, false, SafeHtml}},
      {"reReplaceAll", {{P::kString, P::kString, P::kString}, false, P::kAny, false, ReReplaceAll}},
      {"stringSlice", {{}, true, P::kString, false, StringSlice}},
  }));
  if (funcs == FuncSet::kAlertmanager) return *am;
  static const FuncTable* table = new FuncTable(WithBuiltins({
      // Prometheus's template functions.
      {"query", {{P::kString}, false, P::kAny, false, Query}},
      {"first", {{P::kQuery}, false, P::kAny, false, First}},
      {"label", {{P::kString, P::kSample}, false, P::kAny, false, Label}},
      {"value", {{P::kSample}, false, P::kAny, false, SampleValue}},
      {"strvalue", {{P::kSample}, false, P::kAny, false, StrValue}},
      {"args", {{}, true, P::kAny, false, ArgsFn}},
      {"reReplaceAll", {{P::kString, P::kString, P::kString}, false, P::kAny, false, ReReplaceAll}},
      {"safeHtml", {{P::kString}, false, P::kAny, false, SafeHtml}},
      {"match", {{P::kString, P::kString}, false, P::kAny, false, Match}},
      {"title", {{P::kString}, false, P::kAny, false, Title}},
      {"toUpper", {{P::kString}, false, P::kAny, false, ToUpper}},
      {"toLower", {{P::kString}, false, P::kAny, false, ToLower}},
      {"graphLink", {{P::kString}, false, P::kAny, false, GraphLink}},
      {"tableLink", {{P::kString}, false, P::kAny, false, TableLink}},
      {"sortByLabel", {{P::kString, P::kQuery}, false, P::kAny, false, SortByLabel}},
      {"stripPort", {{P::kString}, false, P::kAny, false, StripPort}},
      {"stripDomain", {{P::kString}, false, P::kAny, false, StripDomain}},
      {"humanize", {{P::kAny}, false, P::kAny, false, Humanize}},
      {"humanize1024", {{P::kAny}, false, P::kAny, false, Humanize1024}},
      {"humanizeDuration", {{P::kAny}, false, P::kAny, false, HumanizeDuration}},
      {"humanizePercentage", {{P::kAny}, false, P::kAny, false, HumanizePercentage}},
      {"humanizeTimestamp", {{P::kAny}, false, P::kAny, false, HumanizeTimestamp}},
      {"toTime", {{P::kAny}, false, P::kAny, false, ToTime}},
      {"pathPrefix", {{}, false, P::kAny, false, PathPrefix}},
      {"externalURL", {{}, false, P::kAny, false, ExternalURL}},
      {"parseDuration", {{P::kString}, false, P::kAny, false, ParseDurationFn}},
  }));
  return *table;
}

}  // namespace

bool IsTrue(const Value& v) {
  switch (v.kind()) {
    case K::kInvalid: return false;
    case K::kBool: return v.boolean();
    case K::kInt: return v.int_value() != 0;
    case K::kUint: return v.uint_value() != 0;
    case K::kFloat: return v.float_value() != 0;
    case K::kString: case K::kHTML: return !v.str().empty();
    case K::kStrMap: return !v.strmap().empty();
    case K::kMap: return !v.map().empty();
    case K::kList: return !v.list().empty();
    case K::kQueryResult: return !v.query().empty();
    case K::kSample: return v.sample() != nullptr;
    case K::kTime: case K::kAlertData: case K::kStruct: return true;
  }
  return false;
}

const char* ParamTypeName(Param p) {
  switch (p) {
    case Param::kAny: return "interface {}";
    case Param::kReflect: return "reflect.Value";
    case Param::kString: return "string";
    case Param::kQuery: return "template.queryResult";
    case Param::kSample: return "*template.sample";
    case Param::kStringSlice: return "[]string";
  }
  return "?";
}

const FuncDef* FindFunction(std::string_view name, FuncSet funcs) {
  const FuncTable& t = Table(funcs);
  auto it = t.find(name);
  return it == t.end() ? nullptr : &it->second;
}

bool HasFunction(std::string_view name, FuncSet funcs) { return FindFunction(name, funcs) != nullptr; }

}  // namespace trainwatch::tmpl
