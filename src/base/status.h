#pragma once
// Status and Result<T>: how every module reports failure without exceptions.
// Codes start from leveldb's and add Unavailable. A Status is one pointer-free
// enum when OK; a failure carries a lowercase message, context first
// ("open segment 12: permission denied").

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/check.h"

namespace trainwatch {

enum class StatusCode : uint8_t {
  kOk = 0,
  kNotFound,
  kCorruption,
  kNotSupported,
  kInvalidArgument,
  kIOError,
  kUnavailable,
  kResourceExhausted,
  kCancelled,
  kOutOfRange,  // a value outside what is accepted, e.g. a timestamp too far in the future
  kNoSpace,     // the disk is full (ENOSPC, EDQUOT): the same write may succeed later
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status OK() { return Status(); }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status NoSpace(std::string m) { return {StatusCode::kNoSpace, std::move(m)}; }
  // IOError from errno, e.g. FromErrno("open wal/000012", errno); NoSpace
  // for ENOSPC and EDQUOT.
  static Status FromErrno(std::string_view context, int err);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return msg_; }
  bool IsNotFound() const { return code_ == StatusCode::kNotFound; }
  bool IsCorruption() const { return code_ == StatusCode::kCorruption; }
  bool IsInvalidArgument() const { return code_ == StatusCode::kInvalidArgument; }
  bool IsOutOfRange() const { return code_ == StatusCode::kOutOfRange; }
  bool IsNoSpace() const { return code_ == StatusCode::kNoSpace; }

  // "corruption: <message>", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status Annotate(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string msg_;
};

// A value or a non-OK Status. API close to std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit like expected
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    CHECK(!std::get<Status>(v_).ok(), "BUG: Result constructed from OK status");
  }

  bool has_value() const { return v_.index() == 0; }
  bool ok() const { return has_value(); }
  explicit operator bool() const { return has_value(); }

  T& value() & { CHECK(has_value(), "BUG: Result::value on error"); return std::get<T>(v_); }
  const T& value() const& { CHECK(has_value(), "BUG: Result::value on error"); return std::get<T>(v_); }
  T&& value() && { CHECK(has_value(), "BUG: Result::value on error"); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; OK when a value is held.
  Status status() const { return has_value() ? Status::OK() : std::get<Status>(v_); }
  const Status& error() const { return std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace trainwatch

#define TW_CONCAT_INNER(a, b) a##b
#define TW_CONCAT(a, b) TW_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::trainwatch::Status _tw_st = (expr);                \
    if (!_tw_st.ok()) return _tw_st;                     \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F())`: unwraps a Result or returns its Status.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(TW_CONCAT(_tw_res_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.error();          \
  lhs = std::move(tmp).value()
