// The log query language (logs/query.h Query::Parse): stream selector,
// comparisons, full-text terms, line filters, `or`. A parsed query is
// evaluated against a few records; its full-text tokens (which the store
// quotes into an FTS5 MATCH expression) are non-empty and hold no quote;
// every regex filter has its compiled RE2. A refused query says why.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "logs/query.h"

namespace {
constexpr const char* kTarget = "logs_query_fuzz";

std::vector<trainwatch::logs::Record> Records() {
  std::vector<trainwatch::logs::Record> rs(3);
  rs[0].time_ns = 1'700'000'000'000'000'000;
  rs[0].labels = trainwatch::model::Labels{{"project", "llama"}, {"run", "r1"}, {"rank", "0"}};
  rs[0].level = "ERROR";
  rs[0].message = "CUDA error: out of memory at step 1200";
  rs[0].fields = R"({"status":503,"host":"gpu-1","loss":0.25,"tags":["a","b"]})";
  rs[1].labels = trainwatch::model::Labels{{"project", "x"}};
  rs[1].level = "INFO";
  rs[1].message = "epoch 3 done \xc3\xa9t\xc3\xa9";
  rs[2].labels = trainwatch::model::Labels{{"job", "train"}, {"level", "debug"}};
  rs[2].message = "";
  rs[2].fields = R"({"message":"nested","n":null,"b":true})";
  return rs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace logs = trainwatch::logs;
  static const std::vector<logs::Record> records = Records();
  std::string_view q(reinterpret_cast<const char*>(data), size);
  auto parsed = logs::Query::Parse(q);
  if (!parsed.ok()) {
    FUZZ_CHECK_ERROR(parsed.error());
    return 0;
  }
  const logs::Query& query = *parsed;
  // Text filters become an FTS5 MATCH expression (store_query.cc): tokens
  // are quoted there, so none may hold a quote or be empty.
  for (const logs::Query* a : query.Alternatives()) {
    for (const logs::TextFilter& t : a->texts) {
      FUZZ_CHECK(!t.tokens.empty(), "text filter without tokens");
      for (const std::string& tok : t.tokens) {
        FUZZ_CHECK(!tok.empty() && tok.find('"') == std::string::npos, "FTS token empty or quoted: " + tok);
      }
    }
    for (const logs::FieldFilter& f : a->fields) {
      FUZZ_CHECK(!f.name.empty(), "comparison without a field name");
      if (f.op == logs::CmpOp::kRe || f.op == logs::CmpOp::kNre) FUZZ_CHECK(f.re != nullptr, "regex filter without RE2");
    }
    for (const logs::LineFilter& l : a->lines) FUZZ_CHECK(!l.regex || l.re != nullptr, "line regex without RE2");
  }
  (void)query.FtsTokens();
  for (const logs::Record& r : records) (void)query.Matches(r);
  std::vector<std::string> tokens;
  logs::Tokenize(q, &tokens);
  return 0;
}
