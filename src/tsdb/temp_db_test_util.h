#pragma once
// Tests only: a real tsdb::DB in a fresh temporary directory, removed with
// the object, plus read-back helpers. Shared by the tests of modules above
// tsdb (ingest, http) so they run against the real store, not a fake.

#include <stdlib.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/file.h"
#include "model/matcher.h"
#include "tsdb/db.h"

namespace trainwatch::tsdb::testing {

class TempDB {
 public:
  // `tweak` may change the options (a series limit, ...) before the open.
  explicit TempDB(const std::function<void(Options*)>& tweak = {}) {
    char tmpl[] = "/tmp/tw_test_db_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Options o;
    o.dir = dir_;
    o.background = false;
    o.retention_ms = 0;
    if (tweak) tweak(&o);
    db_ = std::move(DB::Open(o).value());
  }
  ~TempDB() {
    db_.reset();
    (void)file::RemoveAll(dir_);
  }
  TempDB(const TempDB&) = delete;
  TempDB& operator=(const TempDB&) = delete;

  DB* get() { return db_.get(); }
  DB* operator->() { return db_.get(); }

  // Every stored sample, by series.
  std::map<model::Labels, std::vector<model::Sample>> Data() {
    std::map<model::Labels, std::vector<model::Sample>> out;
    auto q = db_->NewQuerier(model::kMinTime, model::kMaxTime);
    auto all = model::Matcher::Make(model::MatchType::kRegex, "__name__", ".*");
    auto set = (*q)->Select(true, {}, {*all});
    while (set->Next()) {
      auto it = set->At().Iterator();
      while (it->Next()) out[set->At().labels()].push_back(it->At());
    }
    return out;
  }

  size_t NumSamples() {
    size_t n = 0;
    for (const auto& [labels, samples] : Data()) n += samples.size();
    return n;
  }

 private:
  std::string dir_;
  std::unique_ptr<DB> db_;
};

// Maps of files under `dir` in this process (/proc/self/smaps): how many,
// and their resident kB.
struct MappedFiles {
  size_t maps = 0, rss_kb = 0;
};
inline MappedFiles MappedFilesUnder(const std::string& dir) {
  std::ifstream smaps("/proc/self/smaps");
  MappedFiles out;
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      in = line.find(dir + "/") != std::string::npos;  // a map's first line: range perms offset dev inode path
      out.maps += in;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      out.rss_kb += std::stoul(line.substr(4));
    }
  }
  return out;
}

}  // namespace trainwatch::tsdb::testing
