#include "logs/json_record.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace trainwatch::logs {
namespace {

struct Decoded {
  Status status;
  bool object = false;
  Record r;
  std::vector<model::Label> extra;
};

Decoded Native(std::string_view line) {
  Decoded d;
  RecordDecoder dec;
  d.status = dec.NativeLine(line, 7, &d.r, &d.extra);
  return d;
}

Decoded Doc(std::string_view text, const KeyNames& keys = ElasticKeys()) {
  Decoded d;
  RecordDecoder dec;
  Result<bool> res = dec.Decode(text, keys, 7, &d.r, &d.extra);
  if (res.ok()) d.object = *res;
  else d.status = res.error();
  return d;
}

TEST(RecordDecoderTest, FieldsKeepInputOrderWithoutSpaceAndTheLastOfARepeatedName) {
  Decoded d = Native(R"( {"time": 1700000000, "msg" : "hi", "step": 3, "loss": 1.50, "step": 4, "x": {"b": [1, 2], "a": "s p"}} )");
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.r.time_ns, 1700000000000000000LL);
  EXPECT_EQ(d.r.message, "hi");
  EXPECT_EQ(d.r.fields, R"({"loss":1.50,"step":4,"x":{"b":[1,2],"a":"s p"}})");
}

TEST(RecordDecoderTest, TimeForms) {
  auto t = [](std::string_view v) {
    Decoded d = Native("{\"time\":" + std::string(v) + "}");
    EXPECT_TRUE(d.status.ok()) << v << ": " << d.status.ToString();
    return d.r.time_ns;
  };
  EXPECT_EQ(t("1700000000.5"), 1700000000500000000LL);
  EXPECT_EQ(t("1700000000500"), 1700000000500000000LL);           // ms
  EXPECT_EQ(t("1700000000500000"), 1700000000500000000LL);        // us
  EXPECT_EQ(t("1700000000500000001"), 1700000000500000001LL);     // ns, exact
  EXPECT_EQ(t("\"1700000000.5\""), 1700000000500000000LL);
  EXPECT_EQ(t("\"1700000000500000001\""), 1700000000500000001LL);
  EXPECT_EQ(t("\"2024-03-01T12:34:56.5+00:00\""), 1709296496500000000LL);
  EXPECT_EQ(t("null"), 7);  // the receive time; "time" stays a field
  EXPECT_EQ(t("1e-400"), 0);
  // 2262 and 1677, still 64-bit ns (to a double's precision).
  EXPECT_NEAR(static_cast<double>(t("9223372035.5")), 9223372035.5e9, 2048);
  EXPECT_NEAR(static_cast<double>(t("-9223372035")), -9223372035e9, 2048);
  EXPECT_EQ(Native(R"({"time":null})").r.fields, R"({"time":null})");
  Decoded ts = Native(R"({"ts":5,"time":6})");  // the first of the names present wins
  EXPECT_EQ(ts.r.time_ns, 6000000000LL);
  EXPECT_EQ(ts.r.fields, R"({"ts":5})");
}

TEST(RecordDecoderTest, BadTimesNameTheField) {
  auto err = [](std::string_view line) {
    Decoded d = Native(line);
    EXPECT_TRUE(d.status.IsInvalidArgument()) << line;
    return d.status.message();
  };
  EXPECT_EQ(err(R"({"time":[1, 2]})"), R"(field "time": expected unix seconds or an RFC 3339 string, got [1,2])");
  EXPECT_EQ(err(R"({"ts":true})"), R"(field "ts": expected unix seconds or an RFC 3339 string, got true)");
  EXPECT_EQ(err(R"({"time":1e19})"), R"(field "time": expected unix seconds or an RFC 3339 string, got 1e19)");
  EXPECT_EQ(err(R"({"time":"1-2"})"), R"(field "time": expected unix seconds or an RFC 3339 string, got "1-2")");
  EXPECT_EQ(err(R"({"time":"yesterday"})"), R"(field "time": invalid RFC 3339 time "yesterday")");
  // Beyond 64-bit nanoseconds.
  EXPECT_EQ(err(R"({"time":17000000001234567})"), R"(field "time": 17000000001234567 is out of range (years 1678 to 2262))");
  EXPECT_EQ(err(R"({"time":9.3e9})"), R"(field "time": 9.3e9 is out of range (years 1678 to 2262))");
  EXPECT_EQ(err(R"({"ts":"-9300000000"})"), R"(field "ts": "-9300000000" is out of range (years 1678 to 2262))");
  EXPECT_EQ(err(R"({"time":"3024-01-01T00:00:00Z"})"),
            R"(field "time": RFC 3339 time "3024-01-01T00:00:00Z" is out of range (years 1678 to 2262))");
  // 18 characters or more without a point must be an int64 (this threw std::out_of_range before).
  EXPECT_EQ(err(R"({"time":"99999999999999999999"})"),
            R"(field "time": expected unix seconds or an RFC 3339 string, got "99999999999999999999")");
  EXPECT_EQ(err(R"({"time":"17000000001234-5678"})"),
            R"(field "time": expected unix seconds or an RFC 3339 string, got "17000000001234-5678")");
}

TEST(RecordDecoderTest, LevelAliasesAndMessageForms) {
  auto f = [](std::string_view line, std::string_view level, std::string_view message) {
    Decoded d = Native(line);
    ASSERT_TRUE(d.status.ok()) << line;
    EXPECT_EQ(d.r.level, level) << line;
    EXPECT_EQ(d.r.message, message) << line;
  };
  f(R"({"level":"warn","message":"a"})", "WARNING", "a");
  f(R"({"levelname":"err","msg":"b"})", "ERROR", "b");
  f(R"({"severity":"fatal","msg":"c\u00e9\n"})", "CRITICAL", "c\xc3\xa9\n");
  f(R"({"level":3,"message":{"a": [1]}})", "3", R"({"a":[1]})");
  f(R"({"level":null,"msg":null})", "NULL", "null");
  f(R"({"msg":"x","message":"y"})", "", "y");
  f(R"({"level":"info","level":"debug"})", "DEBUG", "");
}

TEST(RecordDecoderTest, LabelsObject) {
  Decoded d = Native(R"({"labels":{"rank":1,"gpu":"a","ok":true,"rank":2}})");
  ASSERT_TRUE(d.status.ok());
  ASSERT_EQ(d.extra.size(), 3u);
  EXPECT_EQ(d.extra[0].name, "gpu");
  EXPECT_EQ(d.extra[1].value, "true");
  EXPECT_EQ(d.extra[2].value, "2");
  EXPECT_TRUE(d.r.fields.empty());
  auto err = [](std::string_view line) { return Native(line).status.message(); };
  EXPECT_EQ(err(R"({"labels":[1]})"), R"(field "labels": expected an object of strings)");
  // Of several bad labels the first by name is reported.
  EXPECT_EQ(err(R"({"labels":{"z z":"1","b":null,"a a":"2"}})"), R"(field "labels": invalid label name "a a")");
  EXPECT_EQ(err(R"({"labels":{"z":{},"b":[]}})"), R"(field "labels": label "b" must be a string)");
  // A bad value replaced by a later one of the same name is no error.
  EXPECT_TRUE(Native(R"({"labels":{"b":[],"b":"ok"}})").status.ok());
}

// Issue 25: fields are stored as their JSON text and later parsed and
// dumped by recursive code (forwarding, Loki metadata): nesting past
// kMaxJsonDepth is refused with its offset, before any of that.
// (A line over kMaxLineBytes is kept whole as a plain message.)
TEST(RecordDecoderTest, DeeplyNestedFieldsAreRefusedByDepth) {
  for (char open : {'[', '{'}) {
    std::string deep = "{\"message\":\"m\",\"f\":";
    // 20,000 levels: under the line limit (a longer line is kept as text).
    for (int i = 0; i < 20000; i++) deep += open == '[' ? "[" : "{\"a\":";
    deep += "1";
    for (int i = 0; i < 20000; i++) deep += open == '[' ? ']' : '}';
    deep += "}";
    Decoded d = Native(deep);
    ASSERT_FALSE(d.status.ok());
    EXPECT_NE(d.status.message().find("nesting deeper than 128 levels"), std::string::npos) << d.status.message();
  }
  std::string ok = "{\"message\":\"m\",\"f\":" + std::string(100, '[') + "1" + std::string(100, ']') + "}";
  Decoded d = Native(ok);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.r.message, "m");
  EXPECT_FALSE(d.r.fields.empty());
}

TEST(RecordDecoderTest, NotAnObjectIsAPlainMessage) {
  using namespace std::literals;
  for (std::string_view line : {"{not json"sv, "{\"a\":1} trailing"sv, "{\"a\":1}\0junk"sv, "{\"a\":\"\xc3\"}"sv,
                                "{\"a\":\"\\uD800\"}"sv, "{\"a\":1e400}"sv, "{\"a\":01}"sv, "{\"a\":[1,]}"sv}) {
    Decoded d = Native(line);
    ASSERT_TRUE(d.status.ok());
    Record plain;
    SetMessage(&plain, line);
    EXPECT_EQ(d.r.message, plain.message) << line;
    EXPECT_EQ(d.r.time_ns, 7);
    EXPECT_TRUE(d.r.fields.empty()) << line;
  }
  Decoded bad = Native("{\"msg\":\"caf\xe9\"}");  // Latin-1 inside: a plain line, U+FFFD for the byte
  EXPECT_EQ(bad.r.message, "{\"msg\":\"caf\xEF\xBF\xBD\"}");
}

TEST(RecordDecoderTest, HugeFieldsAreKeptAsTextAndFlagged) {
  std::string line = "{\"msg\":\"m\",\"blob\":\"" + std::string(kMaxMessageBytes, 'x') + "\",\"q\":\"a\\\"b\"}";
  Decoded d = Native(line);
  ASSERT_TRUE(d.status.ok());
  EXPECT_TRUE(d.r.truncated);
  auto f = nlohmann::json::parse(d.r.fields);
  ASSERT_TRUE(f.contains("_fields"));
  EXPECT_EQ(f["_fields"].get<std::string>().size(), kMaxMessageBytes);
  EXPECT_EQ(f["_fields"].get<std::string>().substr(0, 10), "{\"blob\":\"x");
  std::string long_msg = "{\"msg\":\"" + std::string(kMaxMessageBytes - 1, 'y') + "\xc3\xa9\"}";
  Decoded m = Native(long_msg);
  EXPECT_TRUE(m.r.truncated);
  EXPECT_EQ(m.r.message, std::string(kMaxMessageBytes - 1, 'y'));  // cut before the 2-byte character
}

TEST(RecordDecoderTest, ElasticKeysNestedLevelAndLabelKeys) {
  Decoded d = Doc(R"({"@timestamp":"2024-01-01T00:00:00Z","log":{"level":"warn","file":{"path":"/x"}},)"
                  R"("message":"m","host":"n1","hostname":"n2","syslogtag":"sshd[12]: ","rank":0,"run":{"id":1}})");
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  ASSERT_TRUE(d.object);
  EXPECT_EQ(d.r.time_ns, 1704067200000000000LL);
  EXPECT_EQ(d.r.level, "WARNING");
  EXPECT_EQ(d.r.fields, R"({"log":{"file":{"path":"/x"}},"run":{"id":1}})");
  std::vector<std::pair<std::string, std::string>> labels;
  for (auto& l : d.extra) labels.emplace_back(l.name, l.value);
  EXPECT_EQ(labels, (std::vector<std::pair<std::string, std::string>>{
                        {"rank", "0"}, {"host", "n1"}, {"host", "n2"}, {"program", "sshd"}}));
  Decoded flat = Doc(R"({"log.level":"error","log":"the message"})");
  EXPECT_EQ(flat.r.level, "ERROR");
  EXPECT_EQ(flat.r.message, "the message");
  Decoded emptied = Doc(R"({"message":"m","log":{"level":"info"}})");
  EXPECT_EQ(emptied.r.fields, R"({"log":{}})");
  Decoded as_message = Doc(R"({"log":{"level":"info"}})");  // what is left of "log" is the message
  EXPECT_EQ(as_message.r.message, "{}");
  EXPECT_TRUE(as_message.r.fields.empty());
  EXPECT_FALSE(Doc("\xEF\xBB\xBF [1]").object);
  EXPECT_TRUE(Doc("\xEF\xBB\xBF {\"msg\":\"bom\"}").object);
}

}  // namespace
}  // namespace trainwatch::logs
