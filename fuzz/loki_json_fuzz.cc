// Loki push, JSON (logs/shippers.h ParseLokiJson):
// {"streams":[{"stream":{...},"values":[["<ns>","line"(,{metadata})]]}]}.
// Accepted: every record satisfies logs_check.h; refused: the error says why.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "logs/shippers.h"
#include "logs_check.h"

namespace {
constexpr const char* kTarget = "loki_json_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace logs = trainwatch::logs;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::vector<logs::Record> out;
  trainwatch::Status s = logs::ParseLokiJson(body, 1'700'000'000'000'000'000, &out);
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    return 0;
  }
  trainwatch::fuzz::CheckRecords(kTarget, out);
  return 0;
}
