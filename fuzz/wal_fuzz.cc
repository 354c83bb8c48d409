// The TSDB head's WAL (tsdb/wal): frames of a segment (ParseFrame, and the
// Reader over a directory holding the input as segment 0) and the series and
// samples records (records.h). Input: a mode byte, then the bytes.
//   mode bit 0 clear: the bytes are a segment; every record it frames is
//                     decoded as below;
//   mode bit 0 set:   the bytes are one record (no frame, so no CRC stands
//                     between the fuzzer and the record decoders).
// Invariants: ParseFrame and the Reader agree on the records and where
// reading stops; a corruption lies inside the segment; a decoded record
// encodes to bytes that decode to the same entries (NaN payloads included),
// and EncodeSeriesEncoded gives EncodeSeries's bytes.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/file.h"  // MmapFile, complete for the readers' unique_ptr
#include "fuzz_util.h"
#include "model/labels.h"
#include "tsdb/wal/reader.h"
#include "tsdb/wal/records.h"
#include "tsdb/wal/segment.h"

namespace {
constexpr const char* kTarget = "wal_fuzz";
namespace wal = trainwatch::wal;

bool SameSamples(const std::vector<wal::RefSample>& a, const std::vector<wal::RefSample>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i].ref != b[i].ref || a[i].t != b[i].t || std::memcmp(&a[i].v, &b[i].v, 8) != 0) return false;
  }
  return true;
}

bool SameHistogramSamples(const std::vector<wal::RefHistogramSample>& a,
                          const std::vector<wal::RefHistogramSample>& b) {
  std::string ea, eb;
  // Bit-exact comparison through the encoding (which writes every field).
  wal::EncodeHistogramSamples(a, &ea);
  wal::EncodeHistogramSamples(b, &eb);
  return ea == eb;
}

void CheckRecord(std::string_view rec) {
  std::vector<wal::RefSeries> series;
  trainwatch::Status s = wal::DecodeSeries(rec, &series);
  if (s.ok()) {
    FUZZ_CHECK(wal::Type(rec) == wal::RecordType::kSeries, "decoded a series record of another type");
    std::string enc;
    wal::EncodeSeries(series, &enc);
    std::vector<wal::RefSeries> again;
    trainwatch::Status as = wal::DecodeSeries(enc, &again);
    FUZZ_CHECK(as.ok() && again == series, "series record does not round-trip: " + as.ToString());
    std::vector<std::string> encoded(series.size());
    std::vector<std::pair<uint64_t, std::string_view>> pairs;
    for (size_t i = 0; i < series.size(); i++) {
      trainwatch::model::AppendEncodedLabels(series[i].labels, &encoded[i]);
      pairs.emplace_back(series[i].ref, encoded[i]);
    }
    std::string enc2;
    wal::EncodeSeriesEncoded(pairs, &enc2);
    FUZZ_CHECK(enc2 == enc, "EncodeSeriesEncoded differs from EncodeSeries");
  } else {
    FUZZ_CHECK_ERROR(s);
  }
  std::vector<wal::RefSample> samples;
  s = wal::DecodeSamples(rec, &samples);
  if (s.ok()) {
    FUZZ_CHECK(wal::Type(rec) == wal::RecordType::kSamples, "decoded a samples record of another type");
    std::string enc;
    wal::EncodeSamples(samples, &enc);
    std::vector<wal::RefSample> again;
    trainwatch::Status as = wal::DecodeSamples(enc, &again);
    FUZZ_CHECK(as.ok() && SameSamples(again, samples), "samples record does not round-trip: " + as.ToString());
  } else {
    FUZZ_CHECK_ERROR(s);
  }
  std::vector<wal::RefSampleST> st_samples;
  s = wal::DecodeSamplesST(rec, &st_samples);
  if (s.ok()) {
    FUZZ_CHECK(wal::Type(rec) == wal::RecordType::kSamplesST, "decoded a start-timestamp record of another type");
    std::string enc;
    wal::EncodeSamplesST(st_samples, &enc);
    std::vector<wal::RefSampleST> again;
    trainwatch::Status as = wal::DecodeSamplesST(enc, &again);
    bool same = as.ok() && again.size() == st_samples.size();
    for (size_t i = 0; same && i < again.size(); i++) {
      same = again[i].ref == st_samples[i].ref && again[i].t == st_samples[i].t && again[i].st == st_samples[i].st &&
             std::memcmp(&again[i].v, &st_samples[i].v, 8) == 0;
    }
    FUZZ_CHECK(same, "start-timestamp samples record does not round-trip: " + as.ToString());
  } else {
    FUZZ_CHECK(s.IsCorruption() && st_samples.empty(), "bad start-timestamp record not reported as corruption: " + s.ToString());
  }
  std::vector<wal::RefHistogramSample> hists;
  s = wal::DecodeHistogramSamples(rec, &hists);
  if (s.ok()) {
    FUZZ_CHECK(wal::Type(rec) == wal::RecordType::kHistogramSamples, "decoded a histogram record of another type");
    std::string enc;
    wal::EncodeHistogramSamples(hists, &enc);
    std::vector<wal::RefHistogramSample> again;
    trainwatch::Status as = wal::DecodeHistogramSamples(enc, &again);
    FUZZ_CHECK(as.ok() && SameHistogramSamples(again, hists), "histogram record does not round-trip: " + as.ToString());
  } else {
    FUZZ_CHECK(s.IsCorruption() && hists.empty(), "bad histogram record not reported as corruption: " + s.ToString());
  }
}

void CheckSegment(std::string_view seg) {
  std::vector<std::string_view> records;
  size_t off = 0;
  bool bad = false;
  while (off < seg.size()) {
    std::string_view rec;
    size_t frame_size = 0;
    std::string what;
    bool torn = false;
    if (!wal::ParseFrame(seg.substr(off), &rec, &frame_size, &what, &torn)) {
      FUZZ_CHECK(!what.empty(), "bad frame without a reason");
      bad = true;
      break;
    }
    FUZZ_CHECK(frame_size > 0 && frame_size <= seg.size() - off, "frame size outside the segment");
    FUZZ_CHECK(rec.data() >= seg.data() + off && rec.data() + rec.size() <= seg.data() + off + frame_size,
               "record outside its frame");
    records.push_back(rec);
    CheckRecord(rec);
    off += frame_size;
  }

  // The same bytes as segment 0 of a WAL directory, read by the replay reader.
  static const std::string dir = trainwatch::fuzz::ScratchDir() + "/wal";
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  trainwatch::fuzz::WriteScratchFile(dir + "/" + wal::internal::SegmentName(0), seg);
  auto r = wal::Reader::Open(dir);
  FUZZ_CHECK(r.ok(), "Reader::Open: " + r.status().ToString());
  std::string_view rec;
  size_t n = 0;
  while ((*r)->Next(&rec)) {
    FUZZ_CHECK(n < records.size() && rec == records[n], "Reader returned another record than ParseFrame");
    n++;
  }
  FUZZ_CHECK(n == records.size(), "Reader returned fewer records than ParseFrame");
  const trainwatch::Status& st = (*r)->status();
  FUZZ_CHECK(st.ok() == !bad, "Reader and ParseFrame disagree on the segment: " + st.ToString());
  if (bad) {
    FUZZ_CHECK(st.IsCorruption() && (*r)->corruption().has_value(), "bad frame not reported as corruption");
    FUZZ_CHECK((*r)->corruption()->segment == 0 && (*r)->corruption()->offset == off,
               "corruption reported at another place than the bad frame");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) != 0) {
    CheckRecord(in);
  } else {
    CheckSegment(in);
  }
  return 0;
}
