#pragma once
// The protobuf wire format (encoding.md of protobuf) read without generated
// code: remote_write's WriteRequest (ingest/remote_write.cc) and remote
// read's ReadRequest (http/api_read.cc). Errors are InvalidArgument naming
// the byte offset: "protobuf: offset 12: truncated varint".

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// Bounds-checked protobuf wire reader over one message. Offsets in errors
// are from the start of the whole request (`base` + position), so a nested
// message's reader names the byte in what the client sent.
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view msg = {}, size_t base = 0) : msg_(msg), base_(base) {}

  bool done() const { return pos_ >= msg_.size(); }
  size_t offset() const { return base_ + pos_; }
  size_t pos() const { return pos_; }
  std::string_view rest() const { return msg_.substr(pos_); }  // what is not read yet

  [[gnu::always_inline]] Status Varint(uint64_t* v) {
    if (pos_ < msg_.size() && (static_cast<uint8_t>(msg_[pos_]) & 0x80) == 0) {  // one byte: most tags and lengths
      *v = static_cast<uint8_t>(msg_[pos_++]);
      return Status::OK();
    }
    return VarintSlow(v);
  }

  Status VarintSlow(uint64_t* v) {
    uint64_t r = 0;
    for (int i = 0; i < 10; i++) {
      if (pos_ >= msg_.size()) return Err("truncated varint");
      uint8_t b = static_cast<uint8_t>(msg_[pos_++]);
      r |= uint64_t{b & 0x7fu} << (7 * i);
      if ((b & 0x80) == 0) {
        *v = r;
        return Status::OK();
      }
    }
    return Err("varint longer than 10 bytes");
  }

  [[gnu::always_inline]] Status Tag(uint32_t* field, uint32_t* wire) {
    size_t at = pos_;
    uint64_t t = 0;
    RETURN_IF_ERROR(Varint(&t));
    if ((t >> 3) == 0 || (t >> 3) > 0x1fffffff) return ErrAt(at, "invalid field number");
    *field = static_cast<uint32_t>(t >> 3);
    *wire = static_cast<uint32_t>(t & 7);
    return Status::OK();
  }

  Status Fixed64(uint64_t* v) {
    if (msg_.size() - pos_ < 8) return Err("truncated fixed64");
    uint64_t r = 0;
    for (int i = 7; i >= 0; i--) r = (r << 8) | static_cast<uint8_t>(msg_[pos_ + i]);
    pos_ += 8;
    *v = r;
    return Status::OK();
  }

  // A length-delimited payload; `*at` is its offset in the whole request.
  [[gnu::always_inline]] Status Bytes(std::string_view* out, size_t* at = nullptr) {
    size_t start = pos_;
    uint64_t n = 0;
    RETURN_IF_ERROR(Varint(&n));
    if (n > msg_.size() - pos_) return PastEnd(start, n);
    if (at != nullptr) *at = base_ + pos_;
    *out = std::string_view(msg_.data() + pos_, n);  // in bounds: checked above
    pos_ += n;
    return Status::OK();
  }

  // Skips the value of a field whose tag was just read.
  Status Skip(uint32_t field, uint32_t wire) {
    switch (wire) {
      case kVarint: {
        uint64_t v = 0;
        return Varint(&v);
      }
      case kFixed64:
        if (msg_.size() - pos_ < 8) return Err("truncated fixed64");
        pos_ += 8;
        return Status::OK();
      case kLen: {
        std::string_view v;
        return Bytes(&v);
      }
      case kFixed32:
        if (msg_.size() - pos_ < 4) return Err("truncated fixed32");
        pos_ += 4;
        return Status::OK();
      case kStartGroup:
        return SkipGroup(field);
      default:
        return Err("unexpected wire type " + std::to_string(wire));
    }
  }

  [[gnu::always_inline]] Status Expect(uint32_t wire, uint32_t want, std::string_view what) {
    if (wire == want) return Status::OK();
    return WrongWire(wire, want, what);
  }

  // Calls fn(ProtoReader& sub) for each length-delimited field `field` (named
  // `what` in errors) to the end of the message, skipping the other fields.
  template <typename Fn>
  Status EachMessage(uint32_t field, std::string_view what, Fn&& fn) {
    while (!done()) {
      uint32_t f = 0, w = 0;
      RETURN_IF_ERROR(Tag(&f, &w));
      if (f != field) {
        RETURN_IF_ERROR(Skip(f, w));
        continue;
      }
      RETURN_IF_ERROR(Expect(w, kLen, what));
      std::string_view msg;
      size_t at = 0;
      RETURN_IF_ERROR(Bytes(&msg, &at));
      ProtoReader sub(msg, at);
      RETURN_IF_ERROR(fn(sub));
    }
    return Status::OK();
  }

  Status Err(std::string_view msg) const { return ErrAt(pos_, msg); }
  // The error paths of the inlined readers, kept out of line.
  [[gnu::noinline]] Status PastEnd(size_t start, uint64_t n) const {
    return ErrAt(start, "length " + std::to_string(n) + " past end of message");
  }
  [[gnu::noinline]] Status WrongWire(uint32_t wire, uint32_t want, std::string_view what) const {
    return Err(std::string(what) + ": wire type " + std::to_string(wire) + ", want " + std::to_string(want));
  }
  Status ErrAt(size_t pos, std::string_view msg) const {
    return Status::InvalidArgument("protobuf: offset " + std::to_string(base_ + pos) + ": " + std::string(msg));
  }

 private:
  // Groups nest; their fields are skipped iteratively up to the matching end.
  Status SkipGroup(uint32_t field) {
    std::vector<uint32_t> open{field};
    while (!open.empty()) {
      if (done()) return Err("unterminated group");
      uint32_t f = 0, w = 0;
      RETURN_IF_ERROR(Tag(&f, &w));
      if (w == kEndGroup) {
        if (f != open.back()) return Err("mismatched end group");
        open.pop_back();
      } else if (w == kStartGroup) {
        open.push_back(f);
      } else {
        RETURN_IF_ERROR(Skip(f, w));
      }
    }
    return Status::OK();
  }

  std::string_view msg_;
  size_t base_;
  size_t pos_ = 0;
};

}  // namespace trainwatch
