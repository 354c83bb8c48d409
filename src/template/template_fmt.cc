// Go's fmt and strconv formatting for template values: %v printing of every
// value kind, Sprint/Sprintln/Sprintf with flags, width and precision, the
// shortest float form Go prints, strconv.Quote, and time.Time formatting.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "template/template_internal.h"

namespace trainwatch::tmpl {

namespace {

// Decimal digits of |v| (no trailing zeros): v = 0.d1d2d3... * 10^dp.
struct Digits {
  std::string d;
  int dp = 0;
  bool neg = false;
};

Digits ShortestDigits(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  Digits out;
  size_t i = 0;
  if (s[0] == '-') out.neg = true, i = 1;
  size_t e = s.find('e');
  for (size_t k = i; k < e; ++k) {
    if (s[k] != '.') out.d += s[k];
  }
  int exp = std::atoi(s.c_str() + e + 1);
  while (out.d.size() > 1 && out.d.back() == '0') out.d.pop_back();
  if (out.d == "0") {
    out.d.clear();
    out.dp = 0;
  } else {
    out.dp = exp + 1;
  }
  return out;
}

std::string FmtE(const Digits& dg, int prec, char e) {
  std::string out;
  if (dg.neg) out += '-';
  out += dg.d.empty() ? '0' : dg.d[0];
  if (prec > 0) {
    out += '.';
    for (int i = 1; i <= prec; ++i) out += i < static_cast<int>(dg.d.size()) ? dg.d[i] : '0';
  }
  out += e;
  int exp = dg.d.empty() ? 0 : dg.dp - 1;
  out += exp < 0 ? '-' : '+';
  if (exp < 0) exp = -exp;
  if (exp < 10) out += '0';
  out += std::to_string(exp);
  return out;
}

std::string FmtF(const Digits& dg, int prec) {
  std::string out;
  if (dg.neg) out += '-';
  int nd = static_cast<int>(dg.d.size());
  if (dg.dp > 0) {
    for (int i = 0; i < dg.dp; ++i) out += i < nd ? dg.d[i] : '0';
  } else {
    out += '0';
  }
  if (prec > 0) {
    out += '.';
    for (int i = 0; i < prec; ++i) {
      int j = dg.dp + i;
      out += (j >= 0 && j < nd) ? dg.d[j] : '0';
    }
  }
  return out;
}

int RuneCount(std::string_view s) {
  int n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void AppendRune(std::string* out, uint32_t r) {
  if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) r = 0xFFFD;
  if (r < 0x80) {
    *out += static_cast<char>(r);
  } else if (r < 0x800) {
    *out += static_cast<char>(0xC0 | (r >> 6));
    *out += static_cast<char>(0x80 | (r & 0x3F));
  } else if (r < 0x10000) {
    *out += static_cast<char>(0xE0 | (r >> 12));
    *out += static_cast<char>(0x80 | ((r >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (r & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (r >> 18));
    *out += static_cast<char>(0x80 | ((r >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((r >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (r & 0x3F));
  }
}

struct Flags {
  bool plus = false, minus = false, sharp = false, space = false, zero = false;
  bool plus_v = false;  // %+v: struct field names (Go clears plus for %v and sets plusV)
  int width = -1, prec = -1;
};

std::string Pad(std::string s, const Flags& f) {
  int n = RuneCount(s);
  if (f.width <= n) return s;
  std::string padding(static_cast<size_t>(f.width - n), f.zero && !f.minus ? '0' : ' ');
  return f.minus ? s + std::string(padding.size(), ' ') : padding + s;
}

std::string FmtInt(bool neg, uint64_t mag, char verb, const Flags& f) {
  std::string digits;
  int base = verb == 'x' || verb == 'X' ? 16 : verb == 'o' || verb == 'O' ? 8 : verb == 'b' ? 2 : 10;
  const char* hex = verb == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  if (mag == 0) digits = "0";
  while (mag > 0) {
    digits.insert(digits.begin(), hex[mag % base]);
    mag /= base;
  }
  if (f.prec >= 0) {
    if (f.prec == 0 && digits == "0") digits.clear();
    while (static_cast<int>(digits.size()) < f.prec) digits.insert(digits.begin(), '0');
  }
  std::string prefix;
  if (f.sharp) {
    if (base == 16) prefix = verb == 'X' ? "0X" : "0x";
    if (base == 8 && (digits.empty() || digits[0] != '0')) prefix = "0";
    if (base == 2) prefix = "0b";
  }
  if (verb == 'O') prefix = "0o";
  std::string sign = neg ? "-" : f.plus ? "+" : f.space ? " " : "";
  if (f.zero && !f.minus && f.prec < 0 && f.width > 0) {
    int total = static_cast<int>(sign.size() + prefix.size() + digits.size());
    if (total < f.width) digits.insert(0, static_cast<size_t>(f.width - total), '0');
    return sign + prefix + digits;
  }
  Flags g = f;
  g.zero = false;
  return Pad(sign + prefix + digits, g);
}

std::string FmtFloatVerb(double v, char verb, const Flags& f) {
  int prec = f.prec;
  char conv = verb;
  if (verb == 'v') conv = 'g';
  if (verb == 'F') conv = 'f';
  if ((conv == 'e' || conv == 'E' || conv == 'f') && prec < 0) prec = 6;
  std::string num;
  if (conv == 'x' || conv == 'X') {
    char buf[64];
    std::snprintf(buf, sizeof buf, conv == 'x' ? "%a" : "%A", v);
    num = buf;
  } else {
    num = FormatFloat(v, conv, prec);
  }
  if (std::isinf(v) || std::isnan(v)) {
    if (std::isnan(v) && (f.plus || f.space)) num = (f.plus ? "+" : " ") + num;
    if (!std::isnan(v) && v > 0 && f.space && !f.plus) num[0] = ' ';
    Flags g = f;
    g.zero = false;
    return Pad(num, g);
  }
  if (num[0] != '-') {
    if (f.plus) num = "+" + num;
    else if (f.space) num = " " + num;
  }
  if (f.zero && !f.minus && f.width > static_cast<int>(num.size())) {
    size_t sign = (num[0] == '-' || num[0] == '+' || num[0] == ' ') ? 1 : 0;
    num.insert(sign, static_cast<size_t>(f.width) - num.size(), '0');
    return num;
  }
  return Pad(num, f);
}

std::string QuoteWith(std::string_view s, char q) {
  std::string out(1, q);
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      continue;
    }
    if (c >= 0x80) {
      int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
      bool ok = extra > 0 && i + extra < s.size() + 0;
      for (int k = 1; ok && k <= extra; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (ok) {
        out.append(s.substr(i, static_cast<size_t>(extra) + 1));
        i += static_cast<size_t>(extra);
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
      continue;
    }
    switch (c) {
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += q;
  return out;
}

bool IsStringKind(const Value& v) { return v.kind() == Value::Kind::kString || v.kind() == Value::Kind::kHTML; }

std::string FormatArg(const Value& v, char verb, const Flags& f, int depth);

std::string BadVerb(const Value& v, char verb, const Flags& f) {
  std::string out = "%!";
  out += verb;
  out += '(';
  if (!v.valid()) {
    out += "<nil>";
  } else {
    out += v.TypeName() + "=" + FormatArg(v, 'v', f, 0);
  }
  return out + ")";
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " " : "") + parts[i];
  return out;
}

std::string SampleBody(const Sample& s, char verb, const Flags& f, int depth) {
  Flags plain = f;
  plain.width = -1;
  std::vector<std::string> parts;
  std::string labels = "map[";
  bool first = true;
  for (const auto& [k, val] : s.labels) {
    labels += (first ? "" : " ") + FormatArg(Value::String(k), verb, plain, depth + 1) + ":" +
              FormatArg(Value::String(val), verb, plain, depth + 1);
    first = false;
  }
  labels += "]";
  if (f.plus_v) labels = "Labels:" + labels;
  std::string value = FormatArg(Value::Float(s.value), verb, plain, depth + 1);
  if (f.plus_v) value = "Value:" + value;
  return "{" + labels + " " + value + "}";
}

std::string FormatArg(const Value& v, char verb, const Flags& f, int depth) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kInvalid:
      if (verb == 'v') return Pad("<nil>", f);
      return BadVerb(v, verb, f);
    case K::kBool:
      if (verb == 'v' || verb == 't') return Pad(v.boolean() ? "true" : "false", f);
      return BadVerb(v, verb, f);
    case K::kInt:
    case K::kUint: {
      bool neg = v.kind() == K::kInt && v.int_value() < 0;
      uint64_t mag = v.kind() == K::kUint ? v.uint_value()
                     : neg                 ? static_cast<uint64_t>(0) - static_cast<uint64_t>(v.int_value())
                                           : static_cast<uint64_t>(v.int_value());
      switch (verb) {
        case 'v': case 'd': return FmtInt(neg, mag, 'd', f);
        case 'b': case 'o': case 'O': case 'x': case 'X': return FmtInt(neg, mag, verb, f);
        case 'c': {
          std::string s;
          AppendRune(&s, static_cast<uint32_t>(mag));
          return Pad(s, f);
        }
        case 'q': {
          std::string s;
          AppendRune(&s, static_cast<uint32_t>(mag));
          return Pad(s == "'" ? "'\\''" : QuoteWith(s, '\''), f);
        }
        case 'U': {
          char buf[32];
          std::snprintf(buf, sizeof buf, "U+%04llX", static_cast<unsigned long long>(mag));
          return Pad(buf, f);
        }
        default: return BadVerb(v, verb, f);
      }
    }
    case K::kFloat:
      switch (verb) {
        case 'v': case 'g': case 'G': case 'e': case 'E': case 'f': case 'F': case 'x': case 'X':
          return FmtFloatVerb(v.float_value(), verb, f);
        default: return BadVerb(v, verb, f);
      }
    case K::kString:
    case K::kHTML:
    case K::kTime: {
      std::string s = v.kind() == K::kTime ? TimeString(v.time_secs(), v.time_nanos()) : v.str();
      switch (verb) {
        case 'v': case 's': {
          if (f.prec >= 0) {
            size_t i = 0;
            int n = 0;
            while (i < s.size() && n < f.prec) {
              ++i;
              while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
              ++n;
            }
            s.resize(i);
          }
          return Pad(s, f);
        }
        case 'q': return Pad(GoQuote(s), f);
        case 'x': case 'X': {
          const char* hex = verb == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
          std::string out;
          size_t n = f.prec >= 0 ? std::min(s.size(), static_cast<size_t>(f.prec)) : s.size();
          for (size_t i = 0; i < n; ++i) {
            if (i > 0 && f.space) out += ' ';
            if (f.sharp && (i == 0 || f.space)) out += verb == 'X' ? "0X" : "0x";
            out += hex[static_cast<unsigned char>(s[i]) >> 4];
            out += hex[static_cast<unsigned char>(s[i]) & 15];
          }
          return Pad(out, f);
        }
        default: return BadVerb(v, verb, f);
      }
    }
    case K::kStrMap: {
      std::vector<std::string> parts;
      for (const auto& [k, val] : v.strmap()) {
        parts.push_back(FormatArg(Value::String(k), verb, f, depth + 1) + ":" +
                        FormatArg(Value::String(val), verb, f, depth + 1));
      }
      return "map[" + Join(parts) + "]";
    }
    case K::kMap: {
      std::vector<std::string> parts;
      for (const auto& [k, val] : v.map()) {
        parts.push_back(FormatArg(Value::String(k), verb, f, depth + 1) + ":" + FormatArg(val, verb, f, depth + 1));
      }
      return "map[" + Join(parts) + "]";
    }
    case K::kList: {
      std::vector<std::string> parts;
      for (const auto& e : v.list()) parts.push_back(FormatArg(e, verb, f, depth + 1));
      return "[" + Join(parts) + "]";
    }
    case K::kSample:
      if (!v.sample()) return verb == 'v' ? "<nil>" : BadVerb(v, verb, f);
      return (depth == 0 ? "&" : "") + SampleBody(*v.sample(), verb, f, depth);
    case K::kQueryResult: {
      // Go prints the element pointers' addresses here; the contents are more useful.
      std::vector<std::string> parts;
      for (const auto& s : v.query()) parts.push_back("&" + SampleBody(*s, verb, f, depth + 1));
      return "[" + Join(parts) + "]";
    }
    case K::kStruct: {
      Flags plain = f;
      plain.width = -1;
      std::vector<std::string> parts;
      for (const auto& [name, val] : v.fields()) {
        parts.push_back((f.plus_v ? name + ":" : "") + FormatArg(val, verb, plain, depth + 1));
      }
      return "{" + Join(parts) + "}";
    }
    case K::kAlertData: {
      const AlertData& d = v.alert();
      Flags plain = f;
      plain.width = -1;
      std::string l = FormatArg(Value::Map(d.labels), verb, plain, depth + 1);
      std::string el = FormatArg(Value::Map(d.external_labels), verb, plain, depth + 1);
      std::string url = FormatArg(Value::String(d.external_url), verb, plain, depth + 1);
      std::string val = FormatArg(Value::Float(d.value), verb, plain, depth + 1);
      if (f.plus_v) {
        return "{Labels:" + l + " ExternalLabels:" + el + " ExternalURL:" + url + " Value:" + val + "}";
      }
      return "{" + l + " " + el + " " + url + " " + val + "}";
    }
  }
  return "";
}

}  // namespace

std::string FormatFloat(double v, char fmt, int prec) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (prec < 0) {
    Digits dg = ShortestDigits(v);
    int nd = static_cast<int>(dg.d.size());
    if (fmt == 'e' || fmt == 'E') return FmtE(dg, nd - 1, fmt);
    if (fmt == 'f') return FmtF(dg, std::max(nd - dg.dp, 0));
    int exp = dg.dp - 1;
    if (nd > 0 && (exp < -4 || exp >= 6)) return FmtE(dg, nd - 1, fmt == 'G' ? 'E' : 'e');
    return FmtF(dg, std::max(nd - dg.dp, 0));
  }
  char spec[16];
  char c = fmt == 'F' ? 'f' : fmt;
  std::snprintf(spec, sizeof spec, "%%.%d%c", prec, c);
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, spec, v);
  if (n < 0 || n >= static_cast<int>(sizeof buf)) {
    std::string big(static_cast<size_t>(n > 0 ? n : 0) + 1, '\0');
    std::snprintf(big.data(), big.size(), spec, v);
    big.resize(big.size() - 1);
    return big;
  }
  return std::string(buf, static_cast<size_t>(n));
}

std::string GoQuote(std::string_view s) { return QuoteWith(s, '"'); }

std::string FormatV(const Value& v) {
  // text/template prints through a pointer: a *sample prints as its struct.
  if (v.kind() == Value::Kind::kSample && v.sample()) return SampleBody(*v.sample(), 'v', Flags{}, 0);
  if (!v.valid()) return "<no value>";
  return FormatArg(v, 'v', Flags{}, 0);
}

std::string Sprint(const std::vector<Value>& args) {
  std::string out;
  bool prev_string = false;
  for (size_t i = 0; i < args.size(); ++i) {
    bool is_string = IsStringKind(args[i]);
    if (i > 0 && !is_string && !prev_string) out += ' ';
    out += FormatArg(args[i], 'v', Flags{}, 0);
    prev_string = is_string;
  }
  return out;
}

std::string Sprintln(const std::vector<Value>& args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ' ';
    out += FormatArg(args[i], 'v', Flags{}, 0);
  }
  return out + "\n";
}

std::string Sprintf(std::string_view format, const std::vector<Value>& args) {
  std::string out;
  size_t argi = 0;
  size_t i = 0;
  while (i < format.size()) {
    char c = format[i];
    if (c != '%') {
      out += c;
      ++i;
      continue;
    }
    ++i;
    Flags f;
    for (; i < format.size(); ++i) {
      char fl = format[i];
      if (fl == '+') f.plus = true;
      else if (fl == '-') f.minus = true, f.zero = false;
      else if (fl == '#') f.sharp = true;
      else if (fl == ' ') f.space = true;
      else if (fl == '0') f.zero = !f.minus;
      else break;
    }
    auto read_num = [&](int* dst) {
      if (i < format.size() && format[i] == '*') {
        ++i;
        if (argi < args.size() && args[argi].kind() == Value::Kind::kInt) {
          *dst = static_cast<int>(args[argi].int_value());
          if (*dst < 0 && dst == &f.width) f.minus = true, *dst = -*dst;
        } else {
          out += "%!(BADWIDTH)";
        }
        ++argi;
        return;
      }
      int n = -1;
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) {
        n = (n < 0 ? 0 : n) * 10 + (format[i] - '0');
        if (n > 1000000) n = 1000000;
        ++i;
      }
      *dst = n;
    };
    read_num(&f.width);
    if (i < format.size() && format[i] == '.') {
      ++i;
      read_num(&f.prec);
      if (f.prec < 0) f.prec = 0;
    }
    if (i >= format.size()) {
      out += "%!(NOVERB)";
      break;
    }
    // Decode the verb rune.
    size_t vstart = i;
    ++i;
    while (i < format.size() && (static_cast<unsigned char>(format[i]) & 0xC0) == 0x80) ++i;
    std::string_view verb_text = format.substr(vstart, i - vstart);
    char verb = verb_text.size() == 1 ? verb_text[0] : '?';
    if (verb == '%') {
      out += '%';
      continue;
    }
    if (verb == 'v' && f.plus) {
      f.plus = false;
      f.plus_v = true;
    }
    if (argi >= args.size()) {
      out += "%!" + std::string(verb_text) + "(MISSING)";
      continue;
    }
    if (verb_text.size() != 1) {
      out += "%!" + std::string(verb_text) + "(" + args[argi].TypeName() + "=" +
             FormatArg(args[argi], 'v', f, 0) + ")";
      ++argi;
      continue;
    }
    out += FormatArg(args[argi++], verb, f, 0);
  }
  if (argi < args.size()) {
    out += "%!(EXTRA ";
    for (size_t k = argi; k < args.size(); ++k) {
      if (k > argi) out += ", ";
      out += args[k].valid() ? args[k].TypeName() + "=" + FormatArg(args[k], 'v', Flags{}, 0) : "<nil>";
    }
    out += ")";
  }
  return out;
}

// ---- time ----

namespace {

struct Civil {
  int64_t year;
  int month, day, hour, minute, second, yday, wday;
  int64_t nanos;
};

Civil ToCivil(int64_t secs, int64_t ns) {
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) rem += 86400, --days;
  Civil c{};
  c.hour = static_cast<int>(rem / 3600);
  c.minute = static_cast<int>(rem / 60 % 60);
  c.second = static_cast<int>(rem % 60);
  c.nanos = ns;
  c.wday = static_cast<int>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday (4)
  // Howard Hinnant's civil_from_days.
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  c.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = c.month <= 2 ? y + 1 : y;
  bool leap = (c.year % 4 == 0 && c.year % 100 != 0) || c.year % 400 == 0;
  static const int kCum[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
  c.yday = kCum[c.month - 1] + c.day + ((leap && c.month > 2) ? 1 : 0);
  return c;
}

const char* const kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                               "July",    "August",   "September", "October", "November", "December"};
const char* const kDays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};

std::string Num(int64_t v, int width, char pad = '0') {
  std::string s = std::to_string(v < 0 ? -v : v);
  while (static_cast<int>(s.size()) < width) s.insert(s.begin(), pad);
  return (v < 0 ? "-" : "") + s;
}

}  // namespace

std::string TimeFormat(int64_t secs, int64_t nanos, std::string_view layout) {
  Civil c = ToCivil(secs, nanos);
  std::string out;
  size_t i = 0;
  auto starts = [&](std::string_view p) { return layout.substr(i, p.size()) == p; };
  while (i < layout.size()) {
    if (starts("January")) { out += kMonths[c.month - 1]; i += 7; continue; }
    if (starts("Jan")) { out += std::string(kMonths[c.month - 1]).substr(0, 3); i += 3; continue; }
    if (starts("Monday")) { out += kDays[c.wday]; i += 6; continue; }
    if (starts("Mon")) { out += std::string(kDays[c.wday]).substr(0, 3); i += 3; continue; }
    if (starts("MST")) { out += "UTC"; i += 3; continue; }
    if (starts("2006")) { out += Num(c.year, 4); i += 4; continue; }
    if (starts("002")) { out += Num(c.yday, 3); i += 3; continue; }
    if (starts("01")) { out += Num(c.month, 2); i += 2; continue; }
    if (starts("02")) { out += Num(c.day, 2); i += 2; continue; }
    if (starts("03")) { out += Num(c.hour % 12 == 0 ? 12 : c.hour % 12, 2); i += 2; continue; }
    if (starts("04")) { out += Num(c.minute, 2); i += 2; continue; }
    if (starts("05")) { out += Num(c.second, 2); i += 2; continue; }
    if (starts("06")) { out += Num(c.year % 100, 2); i += 2; continue; }
    if (starts("15")) { out += Num(c.hour, 2); i += 2; continue; }
    if (starts("_2")) { out += Num(c.day, 2, ' '); i += 2; continue; }
    if (starts("-07:00:00") || starts("Z07:00:00")) { out += layout[i] == 'Z' ? "Z" : "+00:00:00"; i += 9; continue; }
    if (starts("-0700") || starts("Z0700")) { out += layout[i] == 'Z' ? "Z" : "+0000"; i += 5; continue; }
    if (starts("-07:00") || starts("Z07:00")) { out += layout[i] == 'Z' ? "Z" : "+00:00"; i += 6; continue; }
    if (starts("-07") || starts("Z07")) { out += layout[i] == 'Z' ? "Z" : "+00"; i += 3; continue; }
    if (starts("PM")) { out += c.hour >= 12 ? "PM" : "AM"; i += 2; continue; }
    if (starts("pm")) { out += c.hour >= 12 ? "pm" : "am"; i += 2; continue; }
    if ((layout[i] == '.' || layout[i] == ',') && i + 1 < layout.size() &&
        (layout[i + 1] == '0' || layout[i + 1] == '9')) {
      char d = layout[i + 1];
      size_t j = i + 1;
      while (j < layout.size() && layout[j] == d) ++j;
      if (j >= layout.size() || !std::isdigit(static_cast<unsigned char>(layout[j]))) {
        size_t n = std::min<size_t>(j - i - 1, 9);
        std::string frac = Num(c.nanos, 9).substr(0, n);
        if (d == '9') {
          while (!frac.empty() && frac.back() == '0') frac.pop_back();
          if (!frac.empty()) out += layout[i] + frac;
        } else {
          out += layout[i] + frac;
        }
        i = j;
        continue;
      }
    }
    if (layout[i] == '1') { out += std::to_string(c.month); ++i; continue; }
    if (layout[i] == '2') { out += std::to_string(c.day); ++i; continue; }
    if (layout[i] == '3') { out += std::to_string(c.hour % 12 == 0 ? 12 : c.hour % 12); ++i; continue; }
    if (layout[i] == '4') { out += std::to_string(c.minute); ++i; continue; }
    if (layout[i] == '5') { out += std::to_string(c.second); ++i; continue; }
    out += layout[i++];
  }
  return out;
}

std::string TimeString(int64_t secs, int64_t nanos) {
  return TimeFormat(secs, nanos, "2006-01-02 15:04:05.999999999 -0700 MST");
}

std::string HtmlTextEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '\0': out += "\xEF\xBF\xBD"; break;
      case '"': out += "&#34;"; break;
      case '&': out += "&amp;"; break;
      case '\'': out += "&#39;"; break;
      case '+': out += "&#43;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out += c;
    }
  }
  return out;
}

Value Value::Time(int64_t unix_ns) {
  int64_t secs = unix_ns >= 0 ? unix_ns / 1'000'000'000 : -((-(unix_ns + 1)) / 1'000'000'000) - 1;
  Value v = TimeValue(secs, unix_ns - secs * 1'000'000'000);
  v.b_ = true;
  return v;
}

Value Value::TimeValue(int64_t secs, int64_t nanos) {
  Value v(Kind::kTime);
  v.i_ = secs;
  v.u_ = static_cast<uint64_t>(nanos);
  return v;
}

const Value* Value::Field(std::string_view name) const {
  if (kind_ != Kind::kStruct) return nullptr;
  for (const auto& [n, v] : *fields_) {
    if (n == name) return &v;
  }
  return nullptr;
}

std::string Value::TypeName() const {
  if (type_) return type_->name;
  switch (kind_) {
    case Kind::kInvalid: return "<nil>";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kUint: return "uint";
    case Kind::kFloat: return "float64";
    case Kind::kString: return "string";
    case Kind::kHTML: return "template.HTML";
    case Kind::kStrMap: return "map[string]string";
    case Kind::kMap: return "map[string]interface {}";
    case Kind::kList: return "[]" + s_;
    case Kind::kSample: return "*template.sample";
    case Kind::kQueryResult: return "template.queryResult";
    case Kind::kTime: return b_ ? "*time.Time" : "time.Time";
    case Kind::kStruct: return "struct";
    case Kind::kAlertData:
      return "struct { Labels map[string]string; ExternalLabels map[string]string; ExternalURL string; Value "
             "float64 }";
  }
  return "?";
}

}  // namespace trainwatch::tmpl
