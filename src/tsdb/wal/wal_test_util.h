#pragma once
// Test-only helpers for the wal tests.

#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "base/file.h"
#include "tsdb/wal/reader.h"

namespace trainwatch::wal::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != 0 ? base : "/tmp") + "/wal_test.XXXXXX";
    CHECK(mkdtemp(tmpl.data()) != nullptr, "BUG: mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() { (void)file::RemoveAll(path_); }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct ReadResult {
  std::vector<std::string> records;
  Status status;
  std::optional<CorruptionInfo> corruption;
};

inline ReadResult ReadAll(const std::string& dir, int first_segment = 0) {
  ReadResult out;
  auto r = Reader::Open(dir, first_segment);
  if (!r.ok()) {
    out.status = r.status();
    return out;
  }
  std::string_view rec;
  while ((*r)->Next(&rec)) out.records.emplace_back(rec);
  out.status = (*r)->status();
  out.corruption = (*r)->corruption();
  return out;
}

}  // namespace trainwatch::wal::testing
