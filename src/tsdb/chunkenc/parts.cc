#include "tsdb/chunkenc/parts.h"

#include "base/check.h"
#include "base/coding.h"

namespace trainwatch::chunkenc {

void WrapParts(std::span<const Unwrapped> parts, std::string* out) {
  CHECK(!parts.empty() && parts.size() <= 255, "a parts chunk holds 1 to 255 parts");
  PutVarint64(out, parts.size());
  for (const Unwrapped& p : parts) {
    CHECK(p.enc != Encoding::kParts, "a parts chunk inside another");
    out->push_back(static_cast<char>(p.enc));
    PutVarint64(out, p.data.size());
    out->append(p.data);
  }
}

Result<Unwrapped> UnwrapPart(std::string_view data, size_t i) {
  uint64_t k = 0;
  if (!GetVarint64(&data, &k) || k == 0 || k > 255) return Status::Corruption("parts chunk: bad part count");
  if (i >= k) {
    return Status::NotFound("parts chunk: no part " + std::to_string(i) + " (it has " + std::to_string(k) + ")");
  }
  for (size_t j = 0;; ++j) {
    if (data.empty()) return Status::Corruption("parts chunk: part " + std::to_string(j) + " missing");
    const auto enc = static_cast<Encoding>(static_cast<uint8_t>(data[0]));
    data.remove_prefix(1);
    uint64_t len = 0;
    if (!GetVarint64(&data, &len) || len > data.size()) {
      return Status::Corruption("parts chunk: part " + std::to_string(j) + "'s length missing or beyond the chunk");
    }
    if (enc == Encoding::kParts) return Status::Corruption("parts chunk: part " + std::to_string(j) + " is a parts chunk");
    if (j == i) return Unwrapped{enc, data.substr(0, len)};
    data.remove_prefix(len);
  }
}

}  // namespace trainwatch::chunkenc
