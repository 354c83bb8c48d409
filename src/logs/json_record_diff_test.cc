// Differential tests: the one-pass decoder (json_record.h) against the
// nlohmann::json decoder it replaced (json_record_reference.h) on generated,
// mutated and random lines, through the native line and the _bulk document
// paths. Same records and the same errors, but for these documented
// differences:
//   - fields keep input order and the members' text as sent, so they are
//     compared as JSON values; a non-string level, message or label value
//     is its text as sent (1.50, not 1.5), compared as JSON too;
//   - an error's echo of a non-string value ("got [1,2]") is that text;
//   - a numeric "time" string of 18+ characters without a point must be an
//     int64 (the reference threw, or took a prefix);
//   - a time beyond 64-bit nanoseconds (before 1678, after 2262) is an
//     error (the reference's conversion overflowed);
//   - `{...}` followed by a NUL byte and more is a plain line (the
//     reference stopped at the NUL and dropped the rest).
// TW_JSON_DIFF_LINES (default 20000) sets how many lines each test makes.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>

#include "logs/json_record.h"
#include "logs/json_record_reference.h"
#include "logs/shippers.h"

namespace trainwatch::logs {
namespace {

using nlohmann::json;

size_t Lines() {
  const char* s = std::getenv("TW_JSON_DIFF_LINES");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 20000;
}

// Generates JSON-ish log lines: mostly valid, with the corner cases of every
// part (escapes, UTF-8, numbers, time forms, labels, repeated names) mixed in.
class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  size_t Pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  bool Chance(int percent) { return Pick(100) < static_cast<size_t>(percent); }

  std::string Space() {
    static const char* kSpaces[] = {"", "", "", "", " ", "  ", "\t", "\n", "\r", " \n "};
    return kSpaces[Pick(std::size(kSpaces))];
  }
  std::string StringBody() {
    static const char* kPieces[] = {
        "step", " ", "loss", "CUDA error", "out of memory", "0", "x", "\\n", "\\\"", "\\\\", "\\/", "\\t", "\\b",
        "\\f", "\\r", "\\u00e9", "\\u0000", "\\u001f", "\\u007F", "\\uD83D\\uDE00", "\\ud83d\\ude00",
        "\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80", "\x7f", "'", "{", "}", ":", ",", "[", "]"};
    static const char* kBad[] = {"\\uD800", "\\uDC00", "\\uD800\\u0041", "\\uZZZZ", "\\x", "\\", "\x01", "\t",
                                 "\xc0\x80", "\xed\xa0\x80", "\xf5\x80\x80\x80", "\x80", "\xe2\x82", "\xff"};
    std::string s;
    size_t n = Pick(6);
    for (size_t i = 0; i < n; ++i) s += Chance(3) ? kBad[Pick(std::size(kBad))] : kPieces[Pick(std::size(kPieces))];
    return s;
  }
  std::string String() { return "\"" + StringBody() + "\""; }
  std::string Number() {
    static const char* kNumbers[] = {
        "0", "-0", "1", "-1", "42", "3.5", "1.50", "1e5", "1E+5", "1e-5", "-2.5e-3", "1700000000",
        "1700000000.123456", "1.7e9", "1700000000123", "1.7e12", "1700000000123456", "1700000000123456789",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "99999999999999999999", "9e18", "8.99e18", "1e19",
        "-1e19", "1e308", "1.7976931348623157e308", "1.7976931348623158e308", "1.8e308", "1e309", "-1e309",
        "1e-400", "0.0000e999", "0.5e310", "0.00005e310", "100000000000000000", "-100000000000000000",
        "99999999999999999", "1e0000000000000000002"};
    static const char* kBad[] = {"01", "1.", ".5", "-", "+1", "1e", "1e+", "--1", "0x10", "NaN", "Infinity"};
    if (Chance(2)) return kBad[Pick(std::size(kBad))];
    if (Chance(1)) return std::string(310 + Pick(3), '9');
    return kNumbers[Pick(std::size(kNumbers))];
  }
  std::string Scalar() {
    switch (Pick(6)) {
      case 0: case 1: return String();
      case 2: case 3: return Number();
      case 4: return Chance(50) ? "true" : "false";
      default: return Chance(5) ? "nul" : "null";
    }
  }
  std::string Value(int depth) {
    if (depth > 3 || Chance(70)) return Scalar();
    std::string s;
    size_t n = Pick(4);
    bool obj = Chance(50);
    s += obj ? '{' : '[';
    for (size_t i = 0; i < n; ++i) {
      if (i) s += Space() + ",";
      s += Space();
      if (obj) s += Key() + Space() + ":" + Space();
      s += Value(depth + 1);
    }
    if (n > 0 && Chance(2)) s += ",";
    s += Space() + (obj ? '}' : ']');
    return s;
  }
  std::string Key() {
    static const char* kKeys[] = {
        "time", "ts", "timestamp", "@timestamp", "level", "levelname", "severity", "message", "msg", "log",
        "log.level", "labels", "step", "loss", "project", "run", "rank", "host", "hostname", "source", "program",
        "syslogtag", "syslogseverity-text", "st\\u0065p", "", "caf\xc3\xa9", "a\\\"b", "le\\u0076el"};
    return "\"" + std::string(kKeys[Pick(std::size(kKeys))]) + "\"";
  }
  std::string Time() {
    static const char* kStrings[] = {
        "\"1700000000\"", "\"1700000000.5\"", "\"1700000000123\"", "\"1700000000123456789\"",
        "\"123456789012345678\"", "\"-123456789012345678\"", "\"1-2\"", "\"-\"", "\".\"", "\"5.\"", "\".5\"",
        "\"1.2.3\"", "\"\"", "\"2024-03-01T12:34:56Z\"", "\"2024-03-01T12:34:56.123456789+01:00\"",
        "\"2024-03-01 12:34:56,5z\"", "\"2024-03-01T12:34:56\"", "\"2024-13-01T00:00:00Z\"", "\"yesterday\"",
        "\"2024-03-01T12:34:56.\\u0035Z\""};
    switch (Pick(5)) {
      case 0: case 1: return Number();
      case 2: case 3: return kStrings[Pick(std::size(kStrings))];
      default: return Value(0);
    }
  }
  std::string Level() {
    static const char* kLevels[] = {"\"info\"", "\"warn\"", "\"WARNING\"", "\"err\"", "\"E\"", "\"fatal\"",
                                    "\"crit\"", "\"notice\"", "\"debug\"", "\"trace\"", "\"w\\u0061rn\"", "\"\""};
    return Chance(80) ? kLevels[Pick(std::size(kLevels))] : Value(0);
  }
  std::string Labels() {
    static const char* kNames[] = {"rank", "gpu", "node_1", "_x", "bad name", "1x", "", "caf\xc3\xa9", "__name__",
                                   "r\\u0061nk"};
    if (Chance(10)) return Value(0);
    std::string s = "{";
    size_t n = Pick(4);
    for (size_t i = 0; i < n; ++i) {
      if (i) s += ",";
      s += Space() + "\"" + kNames[Pick(std::size(kNames))] + "\"" + Space() + ":" + Space();
      s += Chance(85) ? (Chance(70) ? String() : Number()) : Value(0);
    }
    return s + Space() + "}";
  }
  std::string Member() {
    std::string k = Key();
    std::string v;
    if (k == "\"time\"" || k == "\"ts\"" || k == "\"timestamp\"" || k == "\"@timestamp\"") v = Time();
    else if (k == "\"level\"" || k == "\"levelname\"" || k == "\"severity\"" || k == "\"log.level\"") v = Level();
    else if (k == "\"labels\"") v = Labels();
    else if (k == "\"log\"" && Chance(50)) v = "{\"level\":" + Level() + (Chance(50) ? ",\"file\":" + Value(1) : "") + "}";
    else v = Value(0);
    return k + Space() + ":" + Space() + v;
  }
  std::string Line() {
    std::string s;
    if (Chance(3)) s += "\xEF\xBB\xBF";
    if (Chance(10)) s += Chance(50) ? " " : "\t";
    s += "{";
    size_t n = Pick(8);
    for (size_t i = 0; i < n; ++i) {
      if (i) s += Space() + ",";
      s += Space() + Member();
    }
    s += Space() + "}";
    if (Chance(5)) s += Space();
    if (Chance(2)) s += Chance(50) ? std::string(" x") : std::string("\0tail", 5);
    return s;
  }
  // A few random edits: bytes replaced, inserted, deleted, cut.
  std::string Mutate(std::string s) {
    static const char kSpecial[] = "{}[],:\"\\ 0123456789eE.-+tfnul\x00\x80\xff\xc3\xed";
    size_t edits = 1 + Pick(3);
    for (size_t e = 0; e < edits && !s.empty(); ++e) {
      size_t at = Pick(s.size());
      char c = Chance(70) ? kSpecial[Pick(sizeof kSpecial - 1)] : static_cast<char>(rng_());
      switch (Pick(4)) {
        case 0: s[at] = c; break;
        case 1: s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        case 2: s.erase(at, 1 + Pick(3)); break;
        default: s.resize(at); break;
      }
    }
    return s;
  }
  std::string Bytes() {
    std::string s = Chance(80) ? "{" : "";
    size_t n = Pick(40);
    for (size_t i = 0; i < n; ++i) s += static_cast<char>(rng_());
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

// Equal, or both JSON texts of equal values.
bool SameText(std::string_view a, std::string_view b) {
  if (a == b) return true;
  json x = json::parse(a, nullptr, false), y = json::parse(b, nullptr, false);
  return !x.is_discarded() && !y.is_discarded() && x == y;
}

std::string Lower(std::string s) {
  for (char& c : s) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
  return s;
}

// The error's echo of a non-string value may differ ("got 1e+19" / "got 1e19").
bool SameError(const std::string& mine, const std::string& ref) {
  if (mine == ref) return true;
  size_t a = mine.find(", got "), b = ref.find(", got ");
  return a != std::string::npos && a == b && mine.compare(0, a, ref, 0, a) == 0 && ref.size() > a + 6 &&
         ref[a + 6] != '"';
}

// Whether the text has no whitespace outside strings.
bool Compact(std::string_view s) {
  bool in = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (in && s[i] == '\\') ++i;
    else if (s[i] == '"') in = !in;
    else if (!in && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) return false;
  }
  return true;
}

// The value of the first of `keys.time` present, as the reference saw it.
json RefTime(std::string_view text, const KeyNames& keys) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) return nullptr;
  for (std::string_view k : keys.time) {
    auto it = doc.find(k);
    if (it != doc.end()) return *it;
  }
  return nullptr;
}

bool LongIntegerString(const json& t) {
  if (!t.is_string()) return false;
  const std::string& s = t.get_ref<const std::string&>();
  return s.size() >= 18 && s.find('.') == std::string::npos;
}

struct Outcome {
  bool threw = false, object = true;
  Status status;
  Record r;
  std::vector<model::Label> extra;
};

// Compares the two outcomes for `text`; returns the reason they differ, or "".
std::string Differ(std::string_view text, const KeyNames& keys, const Outcome& mine, const Outcome& ref) {
  size_t nul = text.find('\0');
  if (nul != std::string_view::npos && json::accept(text.substr(0, nul))) {
    // The reference stopped at the NUL; this is not one JSON object.
    Record plain;
    SetMessage(&plain, text);
    bool as_plain = &keys == &NativeKeys() ? mine.r.message == plain.message && mine.r.fields.empty() : !mine.object;
    return mine.status.ok() && as_plain ? "" : "NUL after the object: " + mine.status.ToString();
  }
  if (mine.status.message().ends_with("is out of range (years 1678 to 2262)") && RefTime(text, keys).is_primitive()) {
    return "";  // whatever the reference made of it
  }
  if (ref.threw) {
    if (mine.status.IsInvalidArgument() && LongIntegerString(RefTime(text, keys))) return "";
    return "reference threw; mine: " + mine.status.ToString();
  }
  if (mine.status.ok() != ref.status.ok()) {
    if (!mine.status.ok() && LongIntegerString(RefTime(text, keys))) return "";

    return "status: mine " + mine.status.ToString() + ", reference " + ref.status.ToString();
  }
  if (!mine.status.ok()) {
    return SameError(mine.status.message(), ref.status.message())
               ? ""
               : "error: mine " + mine.status.message() + "; reference " + ref.status.message();
  }
  if (mine.object != ref.object) return "object: mine " + std::to_string(mine.object);
  if (mine.r.fields.empty() != ref.r.fields.empty() || mine.r.time_ns != ref.r.time_ns ||
      !SameText(mine.r.message, ref.r.message)) {
    return "record: mine time " + std::to_string(mine.r.time_ns) + " message " + mine.r.message + " fields " +
           mine.r.fields + "; reference time " + std::to_string(ref.r.time_ns) + " message " + ref.r.message +
           " fields " + ref.r.fields;
  }
  // A non-string level is upper-cased JSON text: scalars compare lower-cased;
  // of an object or array (upper-cased escapes and keys) only the kind.
  bool container = !ref.r.level.empty() && (ref.r.level[0] == '{' || ref.r.level[0] == '[');
  if (container ? mine.r.level.substr(0, 1) != ref.r.level.substr(0, 1)
                : !SameText(mine.r.level, ref.r.level) && !SameText(Lower(mine.r.level), Lower(ref.r.level))) {
    return "level: " + mine.r.level + " vs " + ref.r.level;
  }
  if (!mine.r.fields.empty()) {
    if (!json::accept(mine.r.fields) || !Compact(mine.r.fields)) return "fields not compact JSON: " + mine.r.fields;
    bool a = mine.r.fields.starts_with("{\"_fields\":"), b = ref.r.fields.starts_with("{\"_fields\":");
    if (a != b) {
      if ((a ? ref : mine).r.fields.size() < kMaxMessageBytes * 3 / 4) return "_fields: " + std::to_string(a);
    } else if (!a && !SameText(mine.r.fields, ref.r.fields)) {
      return "fields: " + mine.r.fields + " vs " + ref.r.fields;
    }
    if (a == b && mine.r.truncated != ref.r.truncated) return "truncated";
  } else if (mine.r.truncated != ref.r.truncated) {
    return "truncated";
  }
  auto ml = MergeLabels(model::Labels(), mine.extra), rl = MergeLabels(model::Labels(), ref.extra);
  if (ml.ok() != rl.ok()) return "labels status";
  if (ml.ok()) {
    if (ml->size() != rl->size()) return "labels: " + ml->ToString() + " vs " + rl->ToString();
    for (size_t i = 0; i < ml->size(); ++i) {
      const model::Label &x = ml->pairs()[i], &y = rl->pairs()[i];
      if (x.name != y.name || !SameText(x.value, y.value)) return "labels: " + ml->ToString() + " vs " + rl->ToString();
    }
  }
  return "";
}

bool IsPlain(const Record& r, std::string_view text) {
  Record plain;
  SetMessage(&plain, text);
  return r.fields.empty() && r.level.empty() && r.message == plain.message;
}

// How the reference took the lines: so a test can check it covered every outcome.
struct Counts {
  size_t records = 0, with_fields = 0, plain = 0, errors = 0;
  void Add(const Outcome& ref, bool native, std::string_view text) {
    if (ref.threw || !ref.status.ok()) ++errors;
    else if (!ref.object || (native && IsPlain(ref.r, text))) ++plain;
    else ++records, with_fields += !ref.r.fields.empty();
  }
};

void CheckNative(std::string_view line, RecordDecoder& dec, Counts* counts) {
  Outcome mine, ref;
  mine.status = dec.NativeLine(line, 7, &mine.r, &mine.extra);
  try {
    ref.status = reference::ParseNativeLine(line, 7, &ref.r, &ref.extra);
  } catch (const std::exception&) {
    ref.threw = true;
  }
  counts->Add(ref, true, line);
  std::string why = Differ(line, NativeKeys(), mine, ref);
  EXPECT_EQ(why, "") << "line: " << json(std::string(line)).dump(-1, ' ', true, json::error_handler_t::replace);
}

void CheckDocument(std::string_view text, RecordDecoder& dec, Counts* counts) {
  Outcome mine, ref;
  Result<bool> m = dec.Decode(text, ElasticKeys(), 7, &mine.r, &mine.extra);
  mine.status = m.status();
  mine.object = m.ok() && *m;
  try {
    Result<bool> r = reference::DecodeDocument(text, ElasticKeys(), 7, &ref.r, &ref.extra);
    ref.status = r.status();
    ref.object = r.ok() && *r;
  } catch (const std::exception&) {
    ref.threw = true;
  }
  counts->Add(ref, false, text);
  std::string why = Differ(text, ElasticKeys(), mine, ref);
  EXPECT_EQ(why, "") << "document: " << json(std::string(text)).dump(-1, ' ', true, json::error_handler_t::replace);
}

TEST(JsonRecordDiffTest, GeneratedLinesDecodeAsBefore) {
  Gen g(1);
  RecordDecoder dec;
  Counts native, doc;
  for (size_t i = 0, n = Lines(); i < n && !HasFailure(); ++i) {
    std::string line = g.Line();
    CheckNative(line, dec, &native);
    CheckDocument(line, dec, &doc);
  }
  std::printf("native: %zu records (%zu with fields), %zu plain, %zu errors; documents: %zu, %zu, %zu, %zu\n",
              native.records, native.with_fields, native.plain, native.errors, doc.records, doc.with_fields, doc.plain,
              doc.errors);
  // Every outcome, often.
  EXPECT_GT(native.with_fields, Lines() / 10);
  EXPECT_GT(native.plain, Lines() / 20);
  EXPECT_GT(native.errors, Lines() / 20);
  EXPECT_GT(doc.errors, Lines() / 20);
}

TEST(JsonRecordDiffTest, MutatedLinesDecodeAsBefore) {
  Gen g(2);
  RecordDecoder dec;
  Counts native, doc;
  for (size_t i = 0, n = Lines(); i < n && !HasFailure(); ++i) {
    std::string line = g.Mutate(g.Line());
    CheckNative(line, dec, &native);
    CheckDocument(line, dec, &doc);
  }
  std::printf("native: %zu records (%zu with fields), %zu plain, %zu errors; documents: %zu, %zu, %zu, %zu\n",
              native.records, native.with_fields, native.plain, native.errors, doc.records, doc.with_fields, doc.plain,
              doc.errors);
  EXPECT_GT(native.records, Lines() / 40);
  EXPECT_GT(native.plain, Lines() / 4);
}

TEST(JsonRecordDiffTest, RandomBytesDecodeAsBefore) {
  Gen g(3);
  RecordDecoder dec;
  Counts native, doc;
  for (size_t i = 0, n = Lines(); i < n && !HasFailure(); ++i) {
    std::string line = g.Bytes();
    CheckNative(line, dec, &native);
    CheckDocument(line, dec, &doc);
  }
  std::printf("native: %zu records (%zu with fields), %zu plain, %zu errors; documents: %zu, %zu, %zu, %zu\n",
              native.records, native.with_fields, native.plain, native.errors, doc.records, doc.with_fields, doc.plain,
              doc.errors);
  EXPECT_GT(native.plain, Lines() / 2);
}

TEST(JsonRecordDiffTest, BulkActionLinesReadAsBefore) {
  Gen g(5);
  size_t good = 0;
  for (size_t i = 0, n = Lines() / 4; i < n && !HasFailure(); ++i) {
    static const char* kActions[] = {"\"index\"", "\"create\"", "\"delete\"", "\"update\"", "\"ind\\u0065x\"", "\"x\""};
    static const char* kMeta[] = {"\"_index\"", "\"_id\"", "\"_type\"", "\"routing\""};
    std::string meta = "{";
    for (size_t k = 0, m = g.Pick(4); k < m; ++k) {
      meta += std::string(k ? "," : "") + g.Space() + kMeta[g.Pick(std::size(kMeta))] + ":" + g.Space();
      meta += g.Chance(70) ? g.String() : g.Value(0);
    }
    meta += "}";
    std::string line = "{" + g.Space() + kActions[g.Pick(std::size(kActions))] + ":" + meta;
    if (g.Chance(10)) line += std::string(",") + kActions[g.Pick(std::size(kActions))] + ":" + (g.Chance(50) ? "{}" : "1");
    line += g.Space() + "}";
    if (g.Chance(20)) line = g.Mutate(line);
    for (char& c : line) c = c == '\n' ? ' ' : c;
    std::string action, index, id;
    bool ref_ok = reference::BulkAction(line, "def", &action, &index, &id);
    BulkRequest req;
    Status s = ParseBulk(line + "\n{\"msg\":\"m\"}\n", "def", 7, &req);
    if (!ref_ok) {
      EXPECT_NE(s.message().find("malformed action"), std::string::npos) << line << ": " << s.ToString();
      continue;
    }
    bool known = action == "index" || action == "create" || action == "update" || action == "delete";
    if (!known) {
      EXPECT_EQ(s.message(), "line 1: unknown action \"" + action + "\"") << line;
      continue;
    }
    ASSERT_TRUE(s.ok() || action == "delete") << line << ": " << s.ToString();
    ASSERT_FALSE(req.items.empty()) << line;
    EXPECT_EQ(req.items[0].action, action) << line;
    EXPECT_EQ(req.items[0].index, index) << line;
    if (!id.empty()) {
      EXPECT_EQ(req.items[0].id, id) << line;
    }
    ++good;
  }
  EXPECT_GT(good, Lines() / 40);
}

TEST(JsonRecordDiffTest, BodiesDecodeLineByLine) {
  // One decoder reused over a body gives what a fresh one gives per line,
  // and an error names its line (blank lines and CRLF counted).
  Gen g(4);
  model::Labels stream{{"project", "p"}, {"run", "r"}};
  for (size_t i = 0, n = Lines() / 20; i < n && !HasFailure(); ++i) {
    std::string body;
    std::vector<std::string> lines;
    for (size_t k = 0, m = 1 + g.Pick(30); k < m; ++k) {
      lines.push_back(g.Chance(5) ? "" : g.Chance(10) ? g.Mutate(g.Line()) : g.Line());
      for (char& c : lines.back()) c = c == '\n' || c == '\r' ? ' ' : c;  // one line each
      body += lines.back() + (g.Chance(5) ? "\r\n" : "\n");
    }
    std::vector<Record> got;
    Status s = ParseNative(body, stream, 7, &got);
    std::vector<Record> want;
    Status want_status;
    for (size_t k = 0; k < lines.size() && want_status.ok(); ++k) {
      if (lines[k].find_first_not_of(" \t") == std::string::npos) continue;
      Record r;
      std::vector<model::Label> extra;
      RecordDecoder fresh;
      Status ls = fresh.NativeLine(lines[k], 7, &r, &extra);
      std::string at = "line " + std::to_string(k + 1);
      if (!ls.ok()) {
        want_status = ls.Annotate(at);
        break;
      }
      InferMissingLevel(&r);  // as ParseNative does for a line without a level
      auto l = MergeLabels(stream, extra);
      if (!l.ok()) {
        want_status = l.error().Annotate(at + ": field \"labels\"");
        break;
      }
      r.labels = std::move(*l);
      want.push_back(std::move(r));
    }
    ASSERT_EQ(s.ToString(), want_status.ToString());
    if (!s.ok()) continue;
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].time_ns, want[k].time_ns);
      EXPECT_EQ(got[k].labels, want[k].labels);
      EXPECT_EQ(got[k].level, want[k].level);
      EXPECT_EQ(got[k].message, want[k].message);
      EXPECT_EQ(got[k].fields, want[k].fields);
      EXPECT_EQ(got[k].truncated, want[k].truncated);
    }
  }
}

}  // namespace
}  // namespace trainwatch::logs
