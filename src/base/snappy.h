#pragma once
// Snappy's block format (remote_write, Loki push): decoding with a bound on
// the decoded size that the header declares, checked before allocating.

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch {

// Decompresses a snappy block-format `body` into the front of *buf, which
// only grows (a reused buffer is not zero-filled again); the result views
// *buf. InvalidArgument on a malformed body, and, before anything is
// allocated, on one whose header declares more than `max_bytes` (the
// message names --web.max-request-body-bytes, the flag that sets it).
Result<std::string_view> SnappyBlockDecode(std::string_view body, std::string* buf, size_t max_bytes);

}  // namespace trainwatch
