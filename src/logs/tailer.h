#pragma once
// File tailing like Filebeat: globs polled every poll_ms; each file read from
// its saved offset (new files from the start); JSON lines decoded (keys at
// the root, as the native format); multi-line records joined (Python
// tracebacks by default, or lines not matching `multiline_start` appended to
// the previous one); rotation (new inode at the path: the old file is read to
// its end first) and truncation (size below the offset: read again from 0)
// handled. Offsets are saved to `state_path` (atomic rename + fsync) after
// each durable Append, and only past complete records, so a restart neither
// skips nor repeats a line (a crash between the store's commit and the
// offsets' write repeats that one batch). Thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "logs/store.h"
#include "model/labels.h"

namespace re2 {
class RE2;
}

namespace trainwatch::logs {

struct TailInput {
  std::vector<std::string> paths;  // glob patterns
  model::Labels labels;            // stream labels; `filename` is added
  bool json = false;               // decode JSON lines
  std::string multiline_start;     // RE2: a line matching it starts a record; empty: join Python tracebacks
};

struct TailerOptions {
  std::vector<TailInput> inputs;
  std::string state_path;    // offsets file
  int64_t poll_ms = 1000;
  int64_t flush_ms = 2000;   // a pending multi-line record is stored after this long without more lines
};

class Tailer {
 public:
  static Result<std::unique_ptr<Tailer>> Make(TailerOptions o, LogStore* store);
  ~Tailer();
  // Reads every file once (and stores what it read); used by Start's thread and tests.
  Status PollOnce();
  void Start();
  void Stop();

 private:
  struct File;
  struct Input;
  Tailer() = default;
  Status LoadState() TW_REQUIRES(poll_mu_);
  Status SaveState() TW_REQUIRES(poll_mu_);
  // `f` is one of files_ (or a rotated file being finished), so poll_mu_'s.
  Status ReadFile(Input& in, File& f, bool final_pass) TW_REQUIRES(poll_mu_);
  // Reads the rest of a file rotated away from `path` (found by inode in its directory).
  Status FinishRotated(Input& in, const std::string& path, uint64_t ino, uint64_t offset) TW_REQUIRES(poll_mu_);

  TailerOptions opts_;
  LogStore* store_ = nullptr;
  std::vector<std::unique_ptr<Input>> inputs_;  // set by Open, then read only
  base::Mutex poll_mu_;                         // one PollOnce at a time
  std::map<std::string, std::unique_ptr<File>> files_ TW_GUARDED_BY(poll_mu_);  // by path
  // path -> (inode, offset) from the state file
  std::map<std::string, std::pair<uint64_t, uint64_t>> saved_ TW_GUARDED_BY(poll_mu_);
  base::Mutex mu_;
  base::CondVar cv_;
  bool stop_ TW_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace trainwatch::logs
