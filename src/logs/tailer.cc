#include "logs/tailer.h"

#include <fcntl.h>
#include <glob.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "logs/json_record.h"
#include "logs/shippers.h"

namespace trainwatch::logs {

using nlohmann::json;

struct Tailer::Input {
  TailInput cfg;
  std::unique_ptr<RE2> start_re;  // null: traceback joining
};

struct Tailer::File {
  std::string path;
  int fd = -1;
  uint64_t dev = 0, ino = 0;
  uint64_t offset = 0;        // bytes consumed into lines (complete lines only)
  uint64_t safe_offset = 0;   // start of the pending multi-line record: what is saved
  std::string partial;        // an incomplete last line
  std::vector<std::string> pending;  // lines of the record being joined
  int64_t pending_since_ms = 0;
  bool in_traceback = false;
  bool warned_time = false;   // a line outside the store's time bounds was logged
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

std::string ToHex(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += {kHex[c >> 4], kHex[c & 15]};
  return out;
}

std::string FromHex(std::string_view h) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(nibble(h[i]) << 4 | nibble(h[i + 1]));
  return out;
}

bool StartsIndented(const std::string& l) { return !l.empty() && (l[0] == ' ' || l[0] == '\t'); }

}  // namespace

Result<std::unique_ptr<Tailer>> Tailer::Make(TailerOptions o, LogStore* store) {
  std::unique_ptr<Tailer> t(new Tailer());
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    auto in = std::make_unique<Input>();
    in->cfg = o.inputs[i];
    if (in->cfg.paths.empty()) return Status::InvalidArgument("logs.files[" + std::to_string(i) + "]: no paths");
    if (!in->cfg.multiline_start.empty()) {
      RE2::Options ro;
      ro.set_log_errors(false);
      in->start_re = std::make_unique<RE2>(in->cfg.multiline_start, ro);
      if (!in->start_re->ok()) {
        return Status::InvalidArgument("logs.files[" + std::to_string(i) + "].multiline.start: invalid regex: " +
                                       in->start_re->error());
      }
    }
    t->inputs_.push_back(std::move(in));
  }
  t->opts_ = std::move(o);
  t->store_ = store;
  base::MutexLock l(&t->poll_mu_);  // no thread runs yet; taken for the analysis
  RETURN_IF_ERROR(t->LoadState());
  return t;
}

Tailer::~Tailer() { Stop(); }

Status Tailer::LoadState() {
  if (opts_.state_path.empty() || !file::Exists(opts_.state_path)) return Status::OK();
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(opts_.state_path, &text));
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j["files"].is_array()) return Status::Corruption(opts_.state_path + ": not a tail state file");
  for (const json& f : j["files"]) {
    if (!f.is_object()) continue;
    std::string path = f.contains("path_hex") ? FromHex(f.value("path_hex", "")) : f.value("path", "");
    saved_[path] = {f.value("inode", uint64_t{0}), f.value("offset", uint64_t{0})};
  }
  return Status::OK();
}

Status Tailer::SaveState() {
  if (opts_.state_path.empty()) return Status::OK();
  json files = json::array();
  for (auto& [path, f] : files_) {
    saved_[path] = {f->ino, f->safe_offset};
  }
  for (auto& [path, v] : saved_) {
    // JSON strings are UTF-8 (dump() throws on other bytes); a file name in
    // another encoding is saved as hex.
    if (IsValidUtf8(path)) files.push_back({{"path", path}, {"inode", v.first}, {"offset", v.second}});
    else files.push_back({{"path_hex", ToHex(path)}, {"inode", v.first}, {"offset", v.second}});
  }
  return file::WriteFileAtomic(opts_.state_path, json{{"files", files}}.dump() + "\n");
}

Status Tailer::ReadFile(Input& in, File& f, bool final_pass) {
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return Status::FromErrno("stat " + f.path, errno);
  if (static_cast<uint64_t>(st.st_size) < f.offset + f.partial.size()) {
    TW_LOG(Info, "logs: {} was truncated; reading it from the start", f.path);
    f.offset = f.safe_offset = 0;
    f.partial.clear();
    f.pending.clear();
    f.in_traceback = false;
  }
  // Restored when the store refuses the batch, so its lines are read again.
  File before;
  before.offset = f.offset, before.safe_offset = f.safe_offset, before.partial = f.partial;
  before.pending = f.pending, before.in_traceback = f.in_traceback;
  std::vector<Record> out;
  int64_t now_ns = NowMillis() * 1000000;
  RecordDecoder decoder;
  auto emit = [&](std::vector<std::string>& lines) {
    if (lines.empty()) return;
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) text += '\n';
      text += lines[i];
    }
    lines.clear();
    Record r;
    r.time_ns = now_ns;
    std::vector<model::Label> extra;
    bool decoded = false;
    if (in.cfg.json && !text.empty() && text[0] == '{') {
      Result<bool> d = decoder.Decode(text, NativeKeys(), now_ns, &r, &extra);
      decoded = d.ok() && *d;
      if (!d.ok()) TW_LOG(Warn, "logs: {}: {}; kept as a plain line", f.path, d.error().message());
    }
    if (!decoded) {
      r = Record{};
      r.time_ns = now_ns;
      SetMessage(&r, text);
      extra.clear();
    }
    InferMissingLevel(&r);
    model::LabelsBuilder b(in.cfg.labels);
    b.Set("filename", f.path);
    auto labels = MergeLabels(b.Build(), extra);
    r.labels = labels.ok() ? std::move(*labels) : b.Build();
    if (FirstNonUtf8Label(r.labels) != nullptr) {
      // A file name (or configured label) in another encoding: the store
      // refuses it, which would stall this file; U+FFFD as in messages.
      std::vector<model::Label> fixed(r.labels.begin(), r.labels.end());
      for (model::Label& l : fixed) l.value = ToValidUtf8(l.value);
      r.labels = model::Labels(std::move(fixed));
    }
    out.push_back(std::move(r));
  };
  auto on_line = [&](std::string line, uint64_t line_start, uint64_t line_end) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    bool starts;
    if (in.start_re) {
      starts = RE2::PartialMatch(line, *in.start_re);
    } else if (f.in_traceback) {
      // Inside a traceback: indented lines continue it; the first other line
      // (the exception) ends it. Chained tracebacks' headers continue too.
      starts = false;
      if (!StartsIndented(line) && !line.empty() && !line.starts_with("During handling") &&
          !line.starts_with("The above exception") && !line.starts_with("Traceback (")) {
        f.pending.push_back(std::move(line));
        emit(f.pending);
        f.in_traceback = false;
        f.safe_offset = line_end;
        return;
      }
    } else {
      starts = !StartsIndented(line);
    }
    if (starts || f.pending.empty()) {
      emit(f.pending);
      f.safe_offset = line_start;
      if (!in.start_re && line.starts_with("Traceback (most recent call last):")) f.in_traceback = true;
    }
    f.pending.push_back(std::move(line));
    f.pending_since_ms = NowMillis();
  };
  char buf[65536];
  for (;;) {
    ssize_t n = ::pread(f.fd, buf, sizeof buf, static_cast<off_t>(f.offset + f.partial.size()));
    if (n < 0) return Status::FromErrno("read " + f.path, errno);
    if (n == 0) break;
    std::string_view chunk(buf, static_cast<size_t>(n));
    size_t pos = 0;
    while (pos < chunk.size()) {
      size_t nl = chunk.find('\n', pos);
      if (nl == std::string_view::npos) {
        f.partial.append(chunk.substr(pos));
        // Guard against a file without newlines: cut it as an over-long line.
        if (f.partial.size() > kMaxLineBytes) {
          uint64_t start = f.offset;
          f.offset += f.partial.size();
          on_line(std::move(f.partial), start, f.offset);
          f.partial.clear();
        }
        break;
      }
      std::string line = std::move(f.partial);
      f.partial.clear();
      line.append(chunk.substr(pos, nl - pos));
      uint64_t start = f.offset;
      f.offset += line.size() + 1;
      on_line(std::move(line), start, f.offset);
      pos = nl + 1;
    }
    if (out.size() >= 5000) break;  // store in bounded batches
  }
  // Single-line records are complete at once; a multi-line one when the next
  // record starts, when the file has been quiet for flush_ms, or at the end
  // of a rotated file.
  bool quiet = NowMillis() - f.pending_since_ms >= opts_.flush_ms;
  if (!f.pending.empty() && (final_pass || quiet)) {
    emit(f.pending);
    f.in_traceback = false;
  }
  if (f.pending.empty()) f.safe_offset = f.offset;
  // A line outside the store's time bounds (a JSON time far in the future,
  // or older than retention) would fail the whole batch, and every retry:
  // it is dropped and counted, so the file goes on.
  TimeBounds bounds = store_->IngestBounds();
  size_t kept = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (Status s = bounds.Check(out[i].time_ns); !s.ok()) {
      store_->CountRejected(bounds.rejected);
      if (!f.warned_time) {
        TW_LOG(Warn, "logs: {}: {}; dropped (further such lines of this file are dropped silently, counted in "
               "trainwatch_logs_lines_rejected_total)", f.path, s.message());
        f.warned_time = true;
      }
      continue;
    }
    if (kept != i) out[kept] = std::move(out[i]);
    ++kept;
  }
  out.resize(kept);
  if (!out.empty()) {
    Status s = store_->Append(std::move(out));
    if (!s.ok()) {
      f.offset = before.offset, f.safe_offset = before.safe_offset, f.partial = std::move(before.partial);
      f.pending = std::move(before.pending), f.in_traceback = before.in_traceback;
      return s;
    }
  }
  return Status::OK();
}

Status Tailer::FinishRotated(Input& in, const std::string& path, uint64_t ino, uint64_t offset) {
  std::string dir = path.substr(0, path.rfind('/') + 1);
  auto names = file::ListDir(dir.empty() ? "." : dir);
  if (!names.ok()) return Status::OK();
  for (const std::string& n : *names) {
    std::string p = dir + n;
    struct stat st;
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != ino) continue;
    if (static_cast<uint64_t>(st.st_size) < offset) return Status::OK();
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::OK();
    File old;
    old.path = path;  // its lines keep the name they were written under
    old.fd = fd;
    old.ino = ino;
    old.offset = old.safe_offset = offset;
    TW_LOG(Info, "logs: {} was rotated to {}; reading its rest", path, p);
    return ReadFile(in, old, /*final_pass=*/true);
  }
  return Status::OK();
}

Status Tailer::PollOnce() {
  base::MutexLock l(&poll_mu_);
  Status first;
  bool changed = false;
  for (auto& in : inputs_) {
    for (const std::string& pattern : in->cfg.paths) {
      glob_t g{};
      if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) {
          std::string path = g.gl_pathv[i];
          auto& f = files_[path];
          struct stat st;
          if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
          if (f && f->ino != st.st_ino) {
            // Rotated: finish the old file, then start the new one from 0.
            Status s = ReadFile(*in, *f, /*final_pass=*/true);
            if (!s.ok() && first.ok()) first = s;
            f.reset();
            saved_.erase(path);
            changed = true;
          }
          if (!f) {
            auto sv = saved_.find(path);
            if (sv != saved_.end() && sv->second.first != st.st_ino) {
              // Rotated while we were not running: finish the old file under its new name.
              Status s = FinishRotated(*in, path, sv->second.first, sv->second.second);
              if (!s.ok()) {
                if (first.ok()) first = s;
                continue;
              }
              saved_.erase(sv);
              changed = true;
            }
            int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            f = std::make_unique<File>();
            f->path = path;
            f->fd = fd;
            f->dev = st.st_dev;
            f->ino = st.st_ino;
            sv = saved_.find(path);
            if (sv != saved_.end() && sv->second.first == st.st_ino && sv->second.second <= static_cast<uint64_t>(st.st_size)) {
              f->offset = f->safe_offset = sv->second.second;
            }
          }
          uint64_t before = f->safe_offset;
          Status s = ReadFile(*in, *f, false);
          if (!s.ok() && first.ok()) first = s;
          changed = changed || f->safe_offset != before;
        }
      }
      ::globfree(&g);
    }
  }
  if (changed) {
    Status s = SaveState();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

void Tailer::Start() {
  thread_ = std::thread([this] {
    base::MutexLock l(&mu_);
    while (!stop_) {
      l.Unlock();
      Status s = PollOnce();
      if (!s.ok()) TW_LOG(Error, "logs: tail: {}", s.ToString());
      l.Lock();
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.poll_ms);
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
    }
  });
}

void Tailer::Stop() {
  {
    base::MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace trainwatch::logs
