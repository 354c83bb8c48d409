// Native log push (POST /api/v1/logs, logs/shippers.h ParseNative): NDJSON
// or plain lines under stream labels, with and without time bounds. An
// accepted body yields records that satisfy logs_check.h; a refused one
// stores nothing and says why.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "logs/shippers.h"
#include "logs_check.h"

namespace {
constexpr const char* kTarget = "logs_native_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace logs = trainwatch::logs;
  if (size < 1) return 0;
  bool bounded = (data[0] & 1) != 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const trainwatch::model::Labels stream{{"project", "fuzz"}, {"run", "r1"}};
  const int64_t now_ns = 1'700'000'000'000'000'000;
  logs::TimeBounds bounds;
  bounds.now_ms = now_ns / 1'000'000;
  bounds.min_ns = now_ns - int64_t{86400} * 1'000'000'000;
  bounds.max_ns = now_ns + int64_t{600} * 1'000'000'000;
  bounds.max_future_ms = 600'000;
  bounds.retention_ms = 86'400'000;
  std::vector<logs::Record> out;
  trainwatch::Status s = logs::ParseNative(body, stream, now_ns, &out, bounded ? &bounds : nullptr);
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    return 0;
  }
  trainwatch::fuzz::CheckRecords(kTarget, out);
  for (const logs::Record& r : out) {
    if (bounded) FUZZ_CHECK(r.time_ns >= bounds.min_ns && r.time_ns <= bounds.max_ns, "record outside the bounds");
  }
  return 0;
}
