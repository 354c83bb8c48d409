// The head chunk log's records (tsdb/chunk_log.h): chunks, out-of-order
// samples and marks. Input: one record (no frame, so no CRC stands between
// the fuzzer and the decoders).
// Invariants: a decoded record encodes to bytes that decode to the same
// entries (chunk bytes and NaN payloads included); a mark's first uncovered
// segment lies between where replay starts and the mark's segment.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tsdb/chunk_log.h"

namespace {
constexpr const char* kTarget = "chunk_log_fuzz";
namespace chunklog = trainwatch::tsdb::chunklog;

bool SameChunks(const std::vector<trainwatch::tsdb::RefChunk>& a, const std::vector<trainwatch::tsdb::RefChunk>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    const auto& x = a[i].second;
    const auto& y = b[i].second;
    if (a[i].first != b[i].first || x.mint != y.mint || x.maxt != y.maxt || x.num_samples != y.num_samples ||
        x.enc != y.enc || x.data.view() != y.data.view()) {
      return false;
    }
  }
  return true;
}

bool SameOoo(const trainwatch::tsdb::RefOoo& a, const trainwatch::tsdb::RefOoo& b) {
  if (a.first != b.first || a.second.size() != b.second.size()) return false;
  for (size_t i = 0; i < a.second.size(); i++) {
    if (a.second[i].t != b.second[i].t || std::memcmp(&a.second[i].v, &b.second[i].v, 8) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rec(reinterpret_cast<const char*>(data), size);
  std::vector<trainwatch::tsdb::RefChunk> chunks, again;
  trainwatch::Status s = chunklog::DecodeChunks(rec, &chunks);
  if (s.ok()) {
    for (const auto& [ref, c] : chunks) FUZZ_CHECK(c.maxt >= c.mint && c.num_samples > 0, "accepted a bad chunk");
    std::string enc;
    chunklog::EncodeChunks(chunks.data(), chunks.size(), &enc);
    trainwatch::Status as = chunklog::DecodeChunks(enc, &again);
    FUZZ_CHECK(as.ok() && SameChunks(chunks, again), "chunks record does not round-trip: " + as.ToString());
  } else {
    FUZZ_CHECK_ERROR(s);
  }
  trainwatch::tsdb::RefOoo ooo, ooo_again;
  std::vector<int64_t> st, st_again;
  s = chunklog::DecodeOoo(rec, &ooo, &st);
  if (s.ok()) {
    FUZZ_CHECK(st.empty() || st.size() == ooo.second.size(), "start timestamps not one per sample");
    std::string enc;
    chunklog::EncodeOoo(ooo, st, &enc);
    trainwatch::Status as = chunklog::DecodeOoo(enc, &ooo_again, &st_again);
    FUZZ_CHECK(as.ok() && SameOoo(ooo, ooo_again) && st == st_again,
               "out-of-order record does not round-trip: " + as.ToString());
  } else {
    FUZZ_CHECK_ERROR(s);
  }
  trainwatch::tsdb::RefOooHist hist, hist_again;
  s = chunklog::DecodeOooHistograms(rec, &hist);
  if (s.ok()) {
    std::string enc, enc_again;
    chunklog::EncodeOooHistograms(hist, &enc);
    trainwatch::Status as = chunklog::DecodeOooHistograms(enc, &hist_again);
    if (as.ok()) chunklog::EncodeOooHistograms(hist_again, &enc_again);
    // Compared through the encoding, which writes every field's bits.
    FUZZ_CHECK(as.ok() && enc == enc_again, "out-of-order histograms record does not round-trip: " + as.ToString());
  } else {
    FUZZ_CHECK(s.IsCorruption() && hist.second.empty(), "bad out-of-order histograms record: " + s.ToString());
  }
  chunklog::Mark mark, mark_again;
  s = chunklog::DecodeMark(rec, &mark);
  if (s.ok()) {
    std::string enc;
    chunklog::EncodeMark(mark, &enc);
    trainwatch::Status as = chunklog::DecodeMark(enc, &mark_again);
    FUZZ_CHECK(as.ok() && mark_again == mark, "mark does not round-trip: " + as.ToString());
    for (int from : {0, mark.wal_segment / 2, mark.wal_segment}) {
      const int r = mark.FirstUncoveredSegment(from);
      FUZZ_CHECK(r <= mark.wal_segment && r >= from, "first uncovered segment outside [from, P]");
    }
  } else {
    FUZZ_CHECK_ERROR(s);
  }
  return 0;
}
