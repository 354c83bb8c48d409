#include "tsdb/chunkenc/st.h"

#include <algorithm>

#include "base/coding.h"
#include "tsdb/chunkenc/histogram.h"

namespace trainwatch::chunkenc {

void RunsOf(const int64_t* ts, const int64_t* sts, size_t n, std::vector<STRun>* out) {
  int64_t prev = 0;
  for (size_t i = 0; i < n; i++) {
    if (sts[i] != prev) out->push_back({ts[i], sts[i]});
    prev = sts[i];
  }
}

void ClipRuns(const std::vector<STRun>& runs, int64_t mint, int64_t maxt, std::vector<STRun>* out) {
  out->clear();
  auto it = std::upper_bound(runs.begin(), runs.end(), mint, [](int64_t t, const STRun& r) { return t < r.t; });
  if (it != runs.begin() && std::prev(it)->st != 0) out->push_back({mint, std::prev(it)->st});
  for (; it != runs.end() && it->t <= maxt; ++it) {
    // A run that changes nothing (after one it repeats, or a 0 first) is left out.
    const int64_t prev = out->empty() ? 0 : out->back().st;
    if (it->st != prev) out->push_back(*it);
  }
}

bool AnyST(const std::vector<STRun>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const STRun& r) { return r.st != 0; });
}

int64_t STAt(const std::vector<STRun>& runs, int64_t t) {
  auto it = std::upper_bound(runs.begin(), runs.end(), t, [](int64_t x, const STRun& r) { return x < r.t; });
  return it == runs.begin() ? 0 : std::prev(it)->st;
}

void WrapST(Encoding enc, std::string_view inner, const std::vector<STRun>& runs, std::string* out) {
  std::string section;
  PutVarint64(&section, runs.size());
  int64_t prev_t = 0, prev_d = 0;
  for (const STRun& r : runs) {
    // Wrapping arithmetic: any int64 pair round-trips.
    const int64_t d = static_cast<int64_t>(static_cast<uint64_t>(r.t) - static_cast<uint64_t>(r.st));
    PutVarsint64(&section, static_cast<int64_t>(static_cast<uint64_t>(r.t) - static_cast<uint64_t>(prev_t)));
    PutVarsint64(&section, static_cast<int64_t>(static_cast<uint64_t>(d) - static_cast<uint64_t>(prev_d)));
    prev_t = r.t;
    prev_d = d;
  }
  out->push_back(static_cast<char>(enc));
  PutVarint64(out, section.size());
  out->append(section);
  out->append(inner);
}

Result<Unwrapped> UnwrapST(Encoding enc, std::string_view data, std::vector<STRun>* runs) {
  if (runs != nullptr) runs->clear();
  if (enc != Encoding::kStartTimes) return Unwrapped{enc, data};
  if (data.empty()) return Status::Corruption("start-times chunk: empty");
  const auto inner = static_cast<Encoding>(static_cast<uint8_t>(data[0]));
  if (inner == Encoding::kStartTimes) return Status::Corruption("start-times chunk: wraps another start-times chunk");
  data.remove_prefix(1);
  uint64_t len = 0;
  if (!GetVarint64(&data, &len) || len > data.size()) {
    return Status::Corruption("start-times chunk: runs length missing or beyond the chunk");
  }
  std::string_view section = data.substr(0, len);
  data.remove_prefix(len);
  if (runs != nullptr) {
    uint64_t n = 0;
    if (!GetVarint64(&section, &n) || n > section.size()) return Status::Corruption("start-times chunk: bad run count");
    runs->reserve(n);
    int64_t t = 0, d = 0;
    for (uint64_t i = 0; i < n; i++) {
      int64_t dt = 0, dd = 0;
      if (!GetVarsint64(&section, &dt) || !GetVarsint64(&section, &dd)) {
        return Status::Corruption("start-times chunk: run " + std::to_string(i) + " truncated");
      }
      t = static_cast<int64_t>(static_cast<uint64_t>(t) + static_cast<uint64_t>(dt));
      d = static_cast<int64_t>(static_cast<uint64_t>(d) + static_cast<uint64_t>(dd));
      if (i > 0 && t <= runs->back().t) {
        return Status::Corruption("start-times chunk: run " + std::to_string(i) + " does not start after the one before");
      }
      runs->push_back({t, static_cast<int64_t>(static_cast<uint64_t>(t) - static_cast<uint64_t>(d))});
    }
    if (!section.empty()) return Status::Corruption("start-times chunk: bytes after the runs");
  }
  return Unwrapped{inner, data};
}

void AppendSTs(const std::vector<STRun>& runs, const int64_t* ts, size_t n, size_t before, std::vector<int64_t>* sts) {
  if (sts->empty() && !AnyST(runs)) return;
  sts->resize(before, 0);
  STCursor c;
  c.Reset(&runs);
  for (size_t i = 0; i < n; i++) sts->push_back(c.At(ts[i]));
}

Status DecodeAllST(Encoding enc, std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs,
                   std::vector<int64_t>* sts) {
  std::vector<STRun> runs;
  ASSIGN_OR_RETURN(Unwrapped u, UnwrapST(enc, data, &runs));
  const size_t before = ts->size();
  RETURN_IF_ERROR(DecodeAll(u.enc, u.data, ts, vs));
  AppendSTs(runs, ts->data() + before, ts->size() - before, before, sts);
  return Status::OK();
}

Status DecodeAllHistogramsST(Encoding enc, std::string_view data, std::vector<int64_t>* hts,
                             std::vector<model::FloatHistogram>* hs, std::vector<int64_t>* hsts) {
  std::vector<STRun> runs;
  ASSIGN_OR_RETURN(Unwrapped u, UnwrapST(enc, data, &runs));
  if (!IsHistogramEncoding(u.enc)) return Status::NotSupported("chunk: not a histogram chunk");
  const size_t before = hts->size();
  RETURN_IF_ERROR(DecodeAllHistograms(u.data, hts, hs));
  AppendSTs(runs, hts->data() + before, hts->size() - before, before, hsts);
  return Status::OK();
}

}  // namespace trainwatch::chunkenc
