#include "base/snappy.h"

#include <snappy.h>

namespace trainwatch {
namespace {

constexpr size_t kMaxRatio = 22;  // > 64 / 3, snappy's largest expansion

}  // namespace

Result<std::string_view> SnappyBlockDecode(std::string_view body, std::string* buf, size_t max_bytes) {
  size_t n = 0;
  if (!snappy::GetUncompressedLength(body.data(), body.size(), &n)) {
    return Status::InvalidArgument("snappy: corrupt input (bad length header)");
  }
  if (n > max_bytes) {
    return Status::InvalidArgument("snappy: the body declares " + std::to_string(n) +
                                   " decoded bytes, more than the limit of " + std::to_string(max_bytes) +
                                   " (--web.max-request-body-bytes)");
  }
  // No snappy element yields more than 64 bytes for 3 of input (a copy with
  // a 2-byte offset): a header declaring more than 22 times the body is
  // corrupt. Checked before allocating, so 12 bytes cannot make the server
  // zero-fill 256 MiB (found by the loki_proto fuzz campaign).
  if (n / kMaxRatio > body.size()) {
    return Status::InvalidArgument("snappy: corrupt input (the header declares " + std::to_string(n) +
                                   " decoded bytes, more than " + std::to_string(body.size()) +
                                   " compressed bytes can hold)");
  }
  if (buf->size() < n) buf->resize(n);
  if (!snappy::RawUncompress(body.data(), body.size(), buf->data())) {
    return Status::InvalidArgument("snappy: corrupt input");
  }
  return std::string_view(buf->data(), n);
}

}  // namespace trainwatch
