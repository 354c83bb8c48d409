#include "base/status.h"

#include <cerrno>
#include <cstring>

namespace trainwatch {

namespace internal {
void CheckFailed(const char* file, int line, const char* cond, const char* msg) {
  std::fprintf(stderr, "%s:%d: CHECK(%s) failed: %s\n", file, line, cond, msg);
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

Status Status::FromErrno(std::string_view context, int err) {
  std::string m(context);
  m += ": ";
  m += std::strerror(err);
  return Status(err == ENOSPC || err == EDQUOT ? StatusCode::kNoSpace : StatusCode::kIOError, std::move(m));
}

static const char* CodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kNotSupported: return "not supported";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kIOError: return "io error";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kNoSpace: return "no space";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s = CodeName(code_);
  s += ": ";
  s += msg_;
  return s;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += msg_;
  return Status(code_, std::move(m));
}

}  // namespace trainwatch
