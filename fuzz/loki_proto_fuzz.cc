// Loki push, snappy-compressed logproto.PushRequest (logs/shippers.h
// ParseLokiProto). Input: a mode byte, then the body. Mode bit 0 clear: the
// body as sent. Set: the body is the protobuf, snappy-compressed here so the
// fuzzer reaches the protobuf decoder. Accepted: every record satisfies
// logs_check.h; refused: the error says why.

#include <snappy.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "logs/shippers.h"
#include "logs_check.h"

namespace {
constexpr const char* kTarget = "loki_proto_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace logs = trainwatch::logs;
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string body;
  if ((data[0] & 1) != 0) {
    snappy::Compress(in.data(), in.size(), &body);
  } else {
    body.assign(in);
  }
  std::vector<logs::Record> out;
  trainwatch::Status s = logs::ParseLokiProto(body, 1'700'000'000'000'000'000, size_t{256} << 20, &out);
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    return 0;
  }
  trainwatch::fuzz::CheckRecords(kTarget, out);
  return 0;
}
