#pragma once
// Start timestamps (ST) of a chunk's samples: when the counter, histogram or
// summary behind each sample last started (ms; 0 = unknown). They change
// rarely (at a restart of the counter), so a chunk keeps them as runs, not
// per sample: a run (t, st) says that the samples at or after t, up to the
// next run, have start timestamp st; those before the first run have none.
//
// Encoding::kStartTimes wraps a chunk of any other encoding with its runs
// (layout in docs/format/chunks.md):
//   u8 inner encoding | uvarint runs length | runs | inner chunk bytes
//   runs: uvarint count, then per run varsint(t - previous t) and
//         varsint((t - st) - previous (t - st)), both previous 0 at first.
// A chunk whose samples have no start timestamps is never wrapped, so the
// runs cost nothing where there are none.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"
#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::chunkenc {

struct STRun {
  int64_t t = 0;   // the first time the run covers
  int64_t st = 0;  // the start timestamp of its samples (0: none)
  bool operator==(const STRun&) const = default;
};

// Appends the runs of per-sample start timestamps (sts parallel to ts, which
// increase) to *out: one at each sample whose st differs from the previous
// one's, the first sample's only when its st is not 0.
void RunsOf(const int64_t* ts, const int64_t* sts, size_t n, std::vector<STRun>* out);

// Replaces *out with the runs that matter to samples in [mint, maxt]: the one
// in force at mint (moved to mint; left out when its st is 0) and those after
// it up to maxt.
void ClipRuns(const std::vector<STRun>& runs, int64_t mint, int64_t maxt, std::vector<STRun>* out);

// Whether any run gives a start timestamp (not 0).
bool AnyST(const std::vector<STRun>& runs);

// The start timestamp the runs give a sample at t.
int64_t STAt(const std::vector<STRun>& runs, int64_t t);

// Reads the runs for increasing times: At(t) costs O(1) amortized.
class STCursor {
 public:
  // `runs` must outlive the cursor (or the next Reset).
  void Reset(const std::vector<STRun>* runs) {
    runs_ = runs;
    i_ = 0;
  }
  // REQUIRES: t is not less than the t of the previous call since Reset.
  int64_t At(int64_t t) {
    if (runs_ == nullptr) return 0;
    const std::vector<STRun>& r = *runs_;
    while (i_ < r.size() && r[i_].t <= t) i_++;
    return i_ == 0 ? 0 : r[i_ - 1].st;
  }

 private:
  const std::vector<STRun>* runs_ = nullptr;
  size_t i_ = 0;  // runs before it start at or before the last t asked
};

// Appends a kStartTimes chunk wrapping `inner` (a chunk of encoding `enc`,
// not itself kStartTimes) with `runs` (times strictly increasing) to *out.
void WrapST(Encoding enc, std::string_view inner, const std::vector<STRun>& runs, std::string* out);

// The encoding of the chunk inside a kStartTimes chunk (of any other: its
// own), read from its first byte without checking the rest.
inline Encoding InnerEncoding(Encoding enc, std::string_view data) {
  return enc == Encoding::kStartTimes && !data.empty() ? static_cast<Encoding>(static_cast<uint8_t>(data[0])) : enc;
}

// The chunk inside a kStartTimes chunk and its runs (into *runs when not
// null); any other chunk is its own inner chunk, with no runs. Corruption
// for a malformed wrapper (the message says what is wrong).
struct Unwrapped {
  Encoding enc = Encoding::kXor;
  std::string_view data;
};
Result<Unwrapped> UnwrapST(Encoding enc, std::string_view data, std::vector<STRun>* runs);

// DecodeAll and DecodeAllHistograms that also give each sample's start
// timestamp: *sts (*hsts) is kept parallel to *ts (*hts) once any sample has
// one, padded with 0s; it stays empty while none has. Any chunk, wrapped or
// not; a histogram chunk to the float decoder (and the reverse) is
// NotSupported.
Status DecodeAllST(Encoding enc, std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs,
                   std::vector<int64_t>* sts);
Status DecodeAllHistogramsST(Encoding enc, std::string_view data, std::vector<int64_t>* hts,
                             std::vector<model::FloatHistogram>* hs, std::vector<int64_t>* hsts);

// Fills *sts (made parallel to ts[0, n), which increase) from the runs,
// keeping it empty when runs give no sample a start timestamp and *sts is
// empty. For callers that decode a chunk by other means.
void AppendSTs(const std::vector<STRun>& runs, const int64_t* ts, size_t n, size_t before, std::vector<int64_t>* sts);

}  // namespace trainwatch::chunkenc
