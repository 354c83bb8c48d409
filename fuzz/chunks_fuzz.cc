// Chunk encodings (tsdb/chunkenc/chunk.h: Gorilla XOR, the blocks' dense
// codec, the head's delta chunks) and block chunk segment files
// (tsdb/index/chunks_file.h). Input: a mode byte, then the bytes.
//   mode % 4 == 0, 1, 2: the bytes are an XOR, dense or delta chunk. Decoded
//     with DecodeAll and with the Iterator (Next, AppendUntil, Seek), which
//     must agree; a chunk whose timestamps increase is encoded again with
//     every encoder (EncodeXor, EncodeDense, XorChunk, DeltaChunk) and must
//     decode to the same samples, bit for bit.
//   mode % 4 == 3: the bytes are chunk segment 000001 of a block; every
//     chunk record in it is fetched with ChunkReader::Get (CRCs verified when
//     mode bit 2 is set) and decoded as above.
//   mode bit 3 set (modes 0-2): the chunk is wrapped in a start-times chunk
//     (chunkenc/st.h) whose runs come from the first bytes; it decodes as
//     the chunk inside, and its runs and per-sample start timestamps
//     round-trip.
//   mode bit 4 set: the bytes are a Prometheus chunk of remote read
//     (remote/prom_chunks.h), XOR, HISTOGRAM or FLOAT_HISTOGRAM for mode & 3
//     = 0, 1, 2 (3 is FLOAT_HISTOGRAM too):
//     a time window keeps exactly the samples inside it, and the samples
//     encoded again as a trainwatch server streams them (PromChunkEncoder)
//     decode to the same data (histograms may gain empty buckets).

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/coding.h"
#include "base/file.h"  // MmapFile, complete for the readers' unique_ptr
#include "fuzz_util.h"
#include "remote/prom_chunks.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/st.h"
#include "tsdb/index/chunks_file.h"

namespace {
constexpr const char* kTarget = "chunks_fuzz";
namespace chunkenc = trainwatch::chunkenc;

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

void ExpectSame(chunkenc::Encoding enc, std::string_view bytes, const std::vector<int64_t>& ts,
                const std::vector<double>& vs, const char* what) {
  std::vector<int64_t> ts2;
  std::vector<double> vs2;
  trainwatch::Status s = chunkenc::DecodeAll(enc, bytes, &ts2, &vs2);
  FUZZ_CHECK(s.ok(), std::string(what) + ": re-encoded chunk does not decode: " + s.ToString());
  FUZZ_CHECK(ts2 == ts, std::string(what) + ": timestamps differ after re-encoding");
  for (size_t i = 0; i < vs.size(); i++) {
    FUZZ_CHECK(Bits(vs2[i]) == Bits(vs[i]), std::string(what) + ": value bits differ after re-encoding");
  }
}

void CheckChunk(chunkenc::Encoding enc, std::string_view bytes) {
  std::vector<int64_t> ts;
  std::vector<double> vs;
  trainwatch::Status s = chunkenc::DecodeAll(enc, bytes, &ts, &vs);
  chunkenc::Iterator it(enc, bytes);
  size_t n = 0;
  while (it.Next()) {
    FUZZ_CHECK(n < ts.size() && it.t() == ts[n] && Bits(it.v()) == Bits(vs[n]),
               "Iterator and DecodeAll disagree at sample " + std::to_string(n));
    n++;
  }
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    FUZZ_CHECK(!it.Err().ok(), "DecodeAll fails where the Iterator does not: " + s.ToString());
    return;
  }
  FUZZ_CHECK(it.Err().ok(), "the Iterator fails where DecodeAll does not: " + it.Err().ToString());
  FUZZ_CHECK(n == ts.size() && vs.size() == ts.size(), "Iterator and DecodeAll give different counts");
  if (ts.empty() || ts.size() >= 65535) return;  // chunks count samples in 16 bits
  for (size_t i = 1; i < ts.size(); i++) {
    if (ts[i] <= ts[i - 1]) return;  // the encoders require increasing timestamps
  }

  // AppendUntil from the first sample to the middle timestamp, then Seek.
  const int64_t mid = ts[ts.size() / 2];
  chunkenc::Iterator a(enc, bytes);
  FUZZ_CHECK(a.Next(), "Iterator has no first sample");
  std::vector<trainwatch::model::Sample> out;
  (void)a.AppendUntil(mid, &out);
  FUZZ_CHECK(out.size() == ts.size() / 2 + 1, "AppendUntil(mid) returned " + std::to_string(out.size()) + " samples");
  chunkenc::Iterator sk(enc, bytes);
  FUZZ_CHECK(sk.Seek(mid) && sk.t() == mid, "Seek(mid) did not land on mid");

  std::string x, d;
  chunkenc::EncodeXor(ts.data(), vs.data(), ts.size(), &x);
  ExpectSame(chunkenc::Encoding::kXor, x, ts, vs, "EncodeXor");
  chunkenc::EncodeDense(ts.data(), vs.data(), ts.size(), &d);
  ExpectSame(chunkenc::Encoding::kDense, d, ts, vs, "EncodeDense");
  chunkenc::XorChunk xc;
  chunkenc::DeltaChunk dc;
  for (size_t i = 0; i < ts.size(); i++) {
    xc.Append(ts[i], vs[i]);
    dc.Append(ts[i], vs[i]);
  }
  FUZZ_CHECK(xc.Bytes() == x, "XorChunk and EncodeXor differ");
  ExpectSame(chunkenc::Encoding::kDelta, dc.Bytes(), ts, vs, "DeltaChunk");
}

// `in`: a byte count k, k bytes of runs as the wrapper stores them, then
// the chunk inside.
void CheckWrapped(chunkenc::Encoding inner, std::string_view in) {
  if (in.empty()) return;
  const size_t k = std::min<size_t>(static_cast<uint8_t>(in[0]), in.size() - 1);
  std::string wrapped(1, static_cast<char>(inner));
  trainwatch::PutVarint64(&wrapped, k);
  wrapped.append(in.substr(1, k));
  const std::string_view chunk = in.substr(1 + k);
  wrapped.append(chunk);
  std::vector<chunkenc::STRun> runs;
  auto u = chunkenc::UnwrapST(chunkenc::Encoding::kStartTimes, wrapped, &runs);
  std::vector<int64_t> ts, sts, ts2;
  std::vector<double> vs, vs2;
  trainwatch::Status s = chunkenc::DecodeAllST(chunkenc::Encoding::kStartTimes, wrapped, &ts, &vs, &sts);
  if (!u.ok()) {
    FUZZ_CHECK_ERROR(u.status());
    FUZZ_CHECK(!s.ok(), "DecodeAllST accepts a wrapper UnwrapST refuses");
    return;
  }
  FUZZ_CHECK(u->enc == inner && u->data == chunk, "UnwrapST returns another chunk than the one inside");
  for (size_t i = 1; i < runs.size(); i++) FUZZ_CHECK(runs[i].t > runs[i - 1].t, "runs not in time order");
  std::string again;
  chunkenc::WrapST(inner, chunk, runs, &again);
  std::vector<chunkenc::STRun> runs2;
  auto u2 = chunkenc::UnwrapST(chunkenc::Encoding::kStartTimes, again, &runs2);
  FUZZ_CHECK(u2.ok() && runs2 == runs && u2->data == chunk, "runs do not round-trip");
  trainwatch::Status plain = chunkenc::DecodeAll(inner, chunk, &ts2, &vs2);
  FUZZ_CHECK(s.ok() == plain.ok(), "a wrapped chunk decodes unlike the chunk inside: " + s.ToString());
  if (!s.ok()) return;
  FUZZ_CHECK(ts == ts2 && (sts.empty() || sts.size() == ts.size()), "DecodeAllST gives other samples");
  for (size_t i = 0; i < sts.size(); i++) {
    FUZZ_CHECK(sts[i] == chunkenc::STAt(runs, ts[i]), "DecodeAllST gives another start timestamp than the runs");
  }
  CheckChunk(chunkenc::Encoding::kStartTimes, wrapped);
}

void CheckSegment(std::string_view seg, bool verify) {
  namespace index = trainwatch::index;
  static const std::string dir = trainwatch::fuzz::ScratchDir() + "/chunks";
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  trainwatch::fuzz::WriteScratchFile(dir + "/" + index::ChunkSegmentName(1), seg);
  index::ChunkReader::Options opts;
  opts.verify_checksums = verify;
  auto r = index::ChunkReader::Open(dir, opts);
  if (!r.ok()) {
    FUZZ_CHECK_ERROR(r.error());
    return;
  }
  // Walk the records as the writer lays them out: varint length, encoding
  // byte, data, CRC32C.
  uint64_t off = index::kChunksSegmentHeaderSize;
  for (int i = 0; i < 64 && off < seg.size(); i++) {
    auto v = (*r)->Get(index::MakeChunkRef(1, static_cast<uint32_t>(off)));
    if (!v.ok()) {
      FUZZ_CHECK_ERROR(v.error());
      break;
    }
    FUZZ_CHECK(v->data.size() <= seg.size(), "chunk larger than its segment");
    if ((v->encoding >= 1 && v->encoding <= 3) || v->encoding == 5) {
      CheckChunk(static_cast<chunkenc::Encoding>(v->encoding), v->data);
    }
    std::string_view rest = seg.substr(off);
    uint64_t len = 0;
    if (!trainwatch::GetVarint64(&rest, &len)) break;
    off = seg.size() - rest.size() + 1 + len + 4;
  }
  for (index::ChunkRef bad : {index::ChunkRef{0}, index::MakeChunkRef(2, 8), index::MakeChunkRef(1, 0xffffffffu)}) {
    auto v = (*r)->Get(bad);
    FUZZ_CHECK(!v.ok(), "Get of a ref outside the segments succeeded");
    FUZZ_CHECK_ERROR(v.error());
  }
}

namespace remote = trainwatch::remote;

trainwatch::Status DecodeProm(uint64_t enc, std::string_view bytes, int64_t mint,
                              std::vector<trainwatch::model::Sample>* fs,
                              std::vector<trainwatch::storage::HistogramSample>* hs) {
  return remote::DecodePromChunk(enc, bytes, mint, INT64_MAX, fs, hs);
}

bool SameHistogram(const trainwatch::model::FloatHistogram& a, const trainwatch::model::FloatHistogram& b) {
  if (trainwatch::model::IsStaleNaN(a.sum) || trainwatch::model::IsStaleNaN(b.sum)) {
    return trainwatch::model::IsStaleNaN(a.sum) && trainwatch::model::IsStaleNaN(b.sum);
  }
  if (Bits(a.zero_threshold) != Bits(b.zero_threshold)) return false;
  trainwatch::model::FloatHistogram x = a, y = b;
  x.zero_threshold = y.zero_threshold = 0;  // Equals compares it by value: NaN != NaN
  x.Compact(0);
  y.Compact(0);
  return x.Equals(y);
}

void CheckPromChunk(uint64_t enc, std::string_view bytes) {
  std::vector<trainwatch::model::Sample> fs;
  std::vector<trainwatch::storage::HistogramSample> hs;
  trainwatch::Status s = DecodeProm(enc, bytes, INT64_MIN, &fs, &hs);
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    return;
  }
  FUZZ_CHECK(enc == 1 ? hs.empty() : fs.empty(), "a chunk gave samples of the other kind");
  std::vector<int64_t> ts;
  for (const auto& f : fs) ts.push_back(f.t);
  for (const auto& h : hs) ts.push_back(h.t);
  if (ts.empty()) return;
  // The window [mid, +inf) keeps exactly the samples at or after mid.
  const int64_t mid = ts[ts.size() / 2];
  std::vector<trainwatch::model::Sample> wf;
  std::vector<trainwatch::storage::HistogramSample> wh;
  FUZZ_CHECK(DecodeProm(enc, bytes, mid, &wf, &wh).ok(), "a window fails where the whole chunk decodes");
  FUZZ_CHECK(wf.size() + wh.size() == static_cast<size_t>(std::count_if(ts.begin(), ts.end(), [&](int64_t t) { return t >= mid; })),
             "the window kept other samples than those inside it");
  for (size_t i = 1; i < ts.size(); i++) {
    if (ts[i] <= ts[i - 1]) return;  // the encoder requires increasing timestamps
  }
  remote::PromChunkEncoder e;
  for (const auto& f : fs) e.AppendFloat(f.t, f.v);
  for (const auto& h : hs) e.AppendHistogram(h.t, h.h);
  std::vector<trainwatch::model::Sample> f2;
  std::vector<trainwatch::storage::HistogramSample> h2;
  for (const remote::PromChunk& c : e.Finish()) {
    s = DecodeProm(static_cast<uint64_t>(c.encoding), c.data, INT64_MIN, &f2, &h2);
    FUZZ_CHECK(s.ok(), "a re-encoded chunk does not decode: " + s.ToString());
  }
  FUZZ_CHECK(f2.size() == fs.size() && h2.size() == hs.size(), "re-encoding changed the sample count");
  for (size_t i = 0; i < fs.size(); i++) {
    FUZZ_CHECK(f2[i].t == fs[i].t && Bits(f2[i].v) == Bits(fs[i].v), "re-encoding changed a float sample");
  }
  for (size_t i = 0; i < hs.size(); i++) {
    FUZZ_CHECK(h2[i].t == hs[i].t && SameHistogram(h2[i].h, hs[i].h), "re-encoding changed histogram " + std::to_string(i));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 0x10) != 0) {
    static constexpr uint64_t kProm[] = {1, 2, 3, 3};  // XOR, HISTOGRAM, FLOAT_HISTOGRAM
    CheckPromChunk(kProm[data[0] & 3], in);
    return 0;
  }
  if ((data[0] & 8) != 0 && data[0] % 4 != 3) {
    static constexpr chunkenc::Encoding kInner[] = {chunkenc::Encoding::kXor, chunkenc::Encoding::kDense,
                                                    chunkenc::Encoding::kDelta};
    CheckWrapped(kInner[data[0] % 4], in);
    return 0;
  }
  switch (data[0] % 4) {
    case 0: CheckChunk(chunkenc::Encoding::kXor, in); break;
    case 1: CheckChunk(chunkenc::Encoding::kDense, in); break;
    case 2: CheckChunk(chunkenc::Encoding::kDelta, in); break;
    default: CheckSegment(in, (data[0] & 4) != 0); break;
  }
  return 0;
}
