#pragma once
// Invariants of a decoded log record, shared by the log ingest targets
// (logs_native_fuzz, bulk_fuzz, loki_json_fuzz, loki_proto_fuzz): what the
// store and the query API rely on for every record a push accepted.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "fuzz_util.h"
#include "logs/record.h"
#include "model/labels.h"

namespace trainwatch::fuzz {

inline void CheckRecord(const char* kTarget, const logs::Record& r) {
  const auto& ls = r.labels.pairs();
  for (size_t i = 0; i < ls.size(); i++) {
    FUZZ_CHECK(model::IsValidLabelName(ls[i].name), "stream label with an invalid name: " + r.labels.ToString());
    FUZZ_CHECK(!ls[i].value.empty(), "stream label with an empty value: " + r.labels.ToString());
    FUZZ_CHECK(logs::IsValidUtf8(ls[i].value), "stream label value not UTF-8: " + r.labels.ToString());
    FUZZ_CHECK(i == 0 || ls[i - 1].name < ls[i].name, "stream labels unsorted or repeated: " + r.labels.ToString());
  }
  FUZZ_CHECK(logs::NormalizeLevel(r.level) == r.level, "level not canonical: " + r.level);
  FUZZ_CHECK(logs::IsValidUtf8(r.message), "message not UTF-8");
  FUZZ_CHECK(r.message.size() <= logs::kMaxMessageBytes, "message over kMaxMessageBytes");
  if (!r.fields.empty()) {
    FUZZ_CHECK(nlohmann::json::accept(r.fields), "fields are not JSON: " + r.fields);
    FUZZ_CHECK(r.fields.front() == '{', "fields are not an object: " + r.fields);
  }
}

inline void CheckRecords(const char* kTarget, const std::vector<logs::Record>& rs) {
  for (const logs::Record& r : rs) CheckRecord(kTarget, r);
}

}  // namespace trainwatch::fuzz
