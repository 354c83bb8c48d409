#include "base/snappy.h"

#include <snappy.h>

namespace trainwatch {

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
  if (buf->size() < n) buf->resize(n);
  if (!snappy::RawUncompress(body.data(), body.size(), buf->data())) {
    return Status::InvalidArgument("snappy: corrupt input");
  }
  return std::string_view(buf->data(), n);
}

}  // namespace trainwatch
