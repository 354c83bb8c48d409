// Elasticsearch _bulk (logs/shippers.h ParseBulk, BulkResponseJson): action
// and document lines as shippers send them. Accepted: every stored record
// satisfies logs_check.h, every item has an action and a status, failed items
// say why, and the response is JSON with one item per action.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>

#include "logs/shippers.h"
#include "logs_check.h"

namespace {
constexpr const char* kTarget = "bulk_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace logs = trainwatch::logs;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  logs::BulkRequest req;
  trainwatch::Status s = logs::ParseBulk(body, "fuzz-index", 1'700'000'000'000'000'000, &req);
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    (void)logs::ElasticErrorJson("illegal_argument_exception", s.message(), 400);
    return 0;
  }
  trainwatch::fuzz::CheckRecords(kTarget, req.records);
  size_t failed = 0;
  for (const logs::BulkItem& it : req.items) {
    FUZZ_CHECK(!it.action.empty(), "item without an action");
    if (it.status >= 400) {
      failed++;
      FUZZ_CHECK(!it.error_type.empty() && !it.error_reason.empty(), "failed item without a reason");
    }
  }
  FUZZ_CHECK(req.records.size() + failed <= req.items.size(), "more records than successful items");
  std::string resp = logs::BulkResponseJson(req, 1);
  nlohmann::json j = nlohmann::json::parse(resp, nullptr, false);
  FUZZ_CHECK(!j.is_discarded(), "response is not JSON: " + resp);
  FUZZ_CHECK(j.contains("items") && j["items"].is_array() && j["items"].size() == req.items.size(),
             "response items differ from the request's");
  return 0;
}
