#pragma once
// A real tsdb::DB in a fresh temporary directory for handler and server
// tests, removed when the test ends.

#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/file.h"
#include "model/matcher.h"
#include "tsdb/db.h"

namespace trainwatch::http::testing {

class TempDB {
 public:
  TempDB() {
    char tmpl[] = "/tmp/tw_http_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    tsdb::Options o;
    o.dir = dir_;
    o.background = false;
    o.retention_ms = 0;
    db_ = std::move(tsdb::DB::Open(o).value());
  }
  ~TempDB() {
    db_.reset();
    (void)file::RemoveAll(dir_);
  }
  tsdb::DB* get() { return db_.get(); }
  tsdb::DB* operator->() { return db_.get(); }
  operator tsdb::DB*() { return db_.get(); }  // NOLINT: handy for ApiDeps{db, ...}

  // Samples stored in all series.
  size_t NumSamples() {
    auto q = db_->NewQuerier(model::kMinTime, model::kMaxTime);
    auto all = model::Matcher::Make(model::MatchType::kRegex, "__name__", ".*");
    auto set = (*q)->Select(false, {}, {*all});
    size_t n = 0;
    while (set->Next()) {
      auto it = set->At().Iterator();
      while (it->Next()) n++;
    }
    return n;
  }

 private:
  std::string dir_;
  std::unique_ptr<tsdb::DB> db_;
};

}  // namespace trainwatch::http::testing
