#include "tsdb/chunk_log.h"

#include <algorithm>
#include <cstring>

#include "base/coding.h"
#include "base/file.h"
#include "base/log.h"
#include "tsdb/wal/reader.h"
#include "tsdb/wal/records.h"

namespace trainwatch::tsdb::chunklog {
namespace {

Status Malformed(std::string_view kind, std::string_view what) {
  std::string m("chunk log ");
  m += kind;
  m += " record: ";
  m += what;
  return Status::Corruption(std::move(m));
}

bool ValidEncoding(uint8_t e) {
  return e == static_cast<uint8_t>(chunkenc::Encoding::kXor) || e == static_cast<uint8_t>(chunkenc::Encoding::kDense) ||
         e == static_cast<uint8_t>(chunkenc::Encoding::kDelta) || e == static_cast<uint8_t>(chunkenc::Encoding::kDelta1) ||
         e == static_cast<uint8_t>(chunkenc::Encoding::kFloatHistogram) ||
         e == static_cast<uint8_t>(chunkenc::Encoding::kStartTimes);
}

}  // namespace

void EncodeChunks(const RefChunk* chunks, size_t n, std::string* out) {
  out->clear();
  out->push_back(static_cast<char>(RecordType::kChunks));
  PutVarint64(out, n);
  for (size_t i = 0; i < n; i++) {
    const auto& [ref, c] = chunks[i];
    PutVarint64(out, ref);
    PutVarsint64(out, c.mint);
    PutVarint64(out, static_cast<uint64_t>(c.maxt) - static_cast<uint64_t>(c.mint));
    PutVarint32(out, c.num_samples);
    out->push_back(static_cast<char>(c.enc));
    PutLengthPrefixed(out, c.data.view());
  }
}

Status DecodeChunks(std::string_view rec, std::vector<RefChunk>* out, ChunkSlabs* slabs, int64_t group_ms) {
  out->clear();
  if (rec.empty() || static_cast<uint8_t>(rec[0]) != static_cast<uint8_t>(RecordType::kChunks)) {
    return Malformed("chunks", "wrong type");
  }
  rec.remove_prefix(1);
  uint64_t n;
  if (!GetVarint64(&rec, &n) || n > rec.size()) return Malformed("chunks", "bad count");
  out->reserve(n);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t ref, span;
    int64_t mint;
    uint32_t num;
    std::string_view data;
    if (!GetVarint64(&rec, &ref) || !GetVarsint64(&rec, &mint) || !GetVarint64(&rec, &span) ||
        !GetVarint32(&rec, &num) || rec.empty()) {
      return Malformed("chunks", "truncated chunk " + std::to_string(i));
    }
    const uint8_t enc = static_cast<uint8_t>(rec[0]);
    rec.remove_prefix(1);
    if (!ValidEncoding(enc)) return Malformed("chunks", "unknown encoding of chunk " + std::to_string(i));
    if (!GetLengthPrefixed(&rec, &data)) return Malformed("chunks", "truncated data of chunk " + std::to_string(i));
    const uint64_t maxt = static_cast<uint64_t>(mint) + span;
    if (span > static_cast<uint64_t>(INT64_MAX) || static_cast<int64_t>(maxt) < mint || num == 0) {
      return Malformed("chunks", "bad time range or count of chunk " + std::to_string(i));
    }
    HeadChunk c;
    c.mint = mint;
    c.maxt = static_cast<int64_t>(maxt);
    c.num_samples = num;
    c.enc = static_cast<chunkenc::Encoding>(enc);
    if (slabs == nullptr) {
      c.data = ChunkBytes::Copy(data);
    } else {
      const int64_t t = c.maxt;
      c.data = slabs->Copy(data, group_ms > 0 ? t / group_ms - (t % group_ms < 0 ? 1 : 0) : 0);  // floor
    }
    out->emplace_back(ref, std::move(c));
  }
  if (!rec.empty()) return Malformed("chunks", "trailing bytes");
  return Status::OK();
}

void EncodeOoo(const RefOoo& ooo, const std::vector<int64_t>& st, std::string* out) {
  const bool with_st = !st.empty();
  out->clear();
  out->push_back(static_cast<char>(with_st ? RecordType::kOooST : RecordType::kOoo));
  PutVarint64(out, ooo.first);
  PutVarint64(out, ooo.second.size());
  for (size_t i = 0; i < ooo.second.size(); i++) {
    const model::Sample& s = ooo.second[i];
    PutVarsint64(out, s.t);
    uint64_t bits;
    std::memcpy(&bits, &s.v, 8);
    PutFixed64(out, bits);
    if (with_st) PutVarsint64(out, static_cast<int64_t>(static_cast<uint64_t>(s.t) - static_cast<uint64_t>(st[i])));
  }
}

Status DecodeOoo(std::string_view rec, RefOoo* out, std::vector<int64_t>* st) {
  out->second.clear();
  st->clear();
  const uint8_t type = rec.empty() ? 0 : static_cast<uint8_t>(rec[0]);
  if (type != static_cast<uint8_t>(RecordType::kOoo) && type != static_cast<uint8_t>(RecordType::kOooST)) {
    return Malformed("out-of-order", "wrong type");
  }
  const bool with_st = type == static_cast<uint8_t>(RecordType::kOooST);
  rec.remove_prefix(1);
  uint64_t n;
  if (!GetVarint64(&rec, &out->first) || !GetVarint64(&rec, &n) || n > rec.size()) {
    return Malformed("out-of-order", "bad header");
  }
  out->second.reserve(n);
  for (uint64_t i = 0; i < n; i++) {
    model::Sample s;
    uint64_t bits;
    if (!GetVarsint64(&rec, &s.t) || !GetFixed64(&rec, &bits)) {
      return Malformed("out-of-order", "truncated sample " + std::to_string(i));
    }
    std::memcpy(&s.v, &bits, 8);
    if (with_st) {
      int64_t d;
      if (!GetVarsint64(&rec, &d)) return Malformed("out-of-order", "truncated sample " + std::to_string(i));
      st->push_back(static_cast<int64_t>(static_cast<uint64_t>(s.t) - static_cast<uint64_t>(d)));
    }
    if (!out->second.empty() && s.t <= out->second.back().t) {
      return Malformed("out-of-order", "samples not in time order at " + std::to_string(i));
    }
    out->second.push_back(s);
  }
  if (!rec.empty()) return Malformed("out-of-order", "trailing bytes");
  return Status::OK();
}

void EncodeOooHistograms(const RefOooHist& ooo, std::string* out) {
  const bool with_st =
      std::any_of(ooo.second.begin(), ooo.second.end(), [](const storage::HistogramSample& x) { return x.st != 0; });
  out->clear();
  out->push_back(static_cast<char>(with_st ? RecordType::kOooHistogramsST : RecordType::kOooHistograms));
  PutVarint64(out, ooo.first);
  PutVarint64(out, ooo.second.size());
  for (const auto& x : ooo.second) {
    PutVarsint64(out, x.t);
    if (with_st) PutVarsint64(out, static_cast<int64_t>(static_cast<uint64_t>(x.t) - static_cast<uint64_t>(x.st)));
    wal::PutHistogram(out, x.h);  // the WAL's histogram layout
  }
}

Status DecodeOooHistograms(std::string_view rec, RefOooHist* out) {
  out->second.clear();
  const uint8_t type = rec.empty() ? 0 : static_cast<uint8_t>(rec[0]);
  if (type != static_cast<uint8_t>(RecordType::kOooHistograms) &&
      type != static_cast<uint8_t>(RecordType::kOooHistogramsST)) {
    return Malformed("out-of-order histograms", "wrong type");
  }
  const bool with_st = type == static_cast<uint8_t>(RecordType::kOooHistogramsST);
  rec.remove_prefix(1);
  uint64_t n;
  if (!GetVarint64(&rec, &out->first) || !GetVarint64(&rec, &n) || n > rec.size() / 8) {
    return Malformed("out-of-order histograms", "bad header");
  }
  out->second.resize(n);
  for (uint64_t i = 0; i < n; i++) {
    storage::HistogramSample& x = out->second[i];
    int64_t d = 0;
    if (!GetVarsint64(&rec, &x.t) || (with_st && !GetVarsint64(&rec, &d))) {
      out->second.clear();
      return Malformed("out-of-order histograms", "truncated sample " + std::to_string(i));
    }
    x.st = with_st ? static_cast<int64_t>(static_cast<uint64_t>(x.t) - static_cast<uint64_t>(d)) : 0;
    if (std::string why = wal::GetHistogram(&rec, &x.h); !why.empty()) {
      out->second.clear();
      return Malformed("out-of-order histograms", why + " in sample " + std::to_string(i));
    }
    if (i > 0 && x.t <= out->second[i - 1].t) {
      out->second.clear();
      return Malformed("out-of-order histograms", "samples not in time order at " + std::to_string(i));
    }
  }
  if (!rec.empty()) {
    out->second.clear();
    return Malformed("out-of-order histograms", "trailing bytes");
  }
  return Status::OK();
}

void EncodeMark(const Mark& mark, std::string* out) {
  out->clear();
  out->push_back(static_cast<char>(RecordType::kMark));
  PutVarint64(out, static_cast<uint64_t>(mark.wal_segment));
  PutVarsint64(out, mark.covered_before);
  PutVarint64(out, mark.spans.size());
  for (const auto& sp : mark.spans) {
    PutVarint64(out, static_cast<uint64_t>(sp.first_segment));
    PutVarsint64(out, sp.maxt);
  }
}

int Mark::FirstUncoveredSegment(int from) const {
  int cursor = from;
  for (size_t i = 0; i < spans.size(); i++) {
    const int end = i + 1 < spans.size() ? spans[i + 1].first_segment : wal_segment;
    if (spans[i].first_segment > cursor || spans[i].maxt >= covered_before) break;  // a gap, or not covered
    cursor = std::max(cursor, end);
  }
  return std::min(cursor, wal_segment);
}

Status DecodeMark(std::string_view rec, Mark* out) {
  if (rec.empty() || static_cast<uint8_t>(rec[0]) != static_cast<uint8_t>(RecordType::kMark)) {
    return Malformed("mark", "wrong type");
  }
  rec.remove_prefix(1);
  uint64_t seg;
  if (!GetVarint64(&rec, &seg) || seg > INT32_MAX || !GetVarsint64(&rec, &out->covered_before)) {
    return Malformed("mark", "truncated");
  }
  out->wal_segment = static_cast<int>(seg);
  uint64_t n;
  if (!GetVarint64(&rec, &n) || n > rec.size()) return Malformed("mark", "bad span count");
  out->spans.clear();
  for (uint64_t i = 0; i < n; i++) {
    SegmentSpan sp;
    uint64_t first;
    if (!GetVarint64(&rec, &first) || first > INT32_MAX || !GetVarsint64(&rec, &sp.maxt)) {
      return Malformed("mark", "truncated span " + std::to_string(i));
    }
    sp.first_segment = static_cast<int>(first);
    if (sp.first_segment > out->wal_segment ||
        (!out->spans.empty() && sp.first_segment <= out->spans.back().first_segment)) {
      return Malformed("mark", "spans out of order at " + std::to_string(i));
    }
    out->spans.push_back(sp);
  }
  if (!rec.empty()) return Malformed("mark", "trailing bytes");
  return Status::OK();
}

Result<Loaded> Load(const std::string& dir, int64_t group_ms, const SpillOptions& spill) {
  Loaded out;
  ChunkSlabs slabs(memory::kLargeBlock, spill);
  ASSIGN_OR_RETURN(auto reader, wal::Reader::Open(dir));
  // Records since the last mark wait here until the next one.
  std::vector<RefChunk> pending, rec_chunks;
  std::vector<RefOoo> pending_ooo;
  std::vector<std::vector<int64_t>> pending_ooo_st;  // parallel to pending_ooo
  RefOoo rec_ooo;
  std::vector<int64_t> rec_ooo_st;
  std::vector<RefOooHist> pending_ooo_hist;
  RefOooHist rec_ooo_hist;
  // Where the records that no mark covers begin.
  std::optional<std::pair<int, uint64_t>> cut_at;
  bool want_cut_point = true;
  std::string_view rec;
  Status bad;
  while (bad.ok() && reader->Next(&rec)) {
    if (want_cut_point) {
      cut_at = {reader->segment(), reader->offset()};
      want_cut_point = false;
    }
    switch (rec.empty() ? 0 : static_cast<uint8_t>(rec[0])) {
      case static_cast<uint8_t>(RecordType::kChunks):
        bad = DecodeChunks(rec, &rec_chunks, &slabs, group_ms);
        for (auto& c : rec_chunks) pending.push_back(std::move(c));
        break;
      case static_cast<uint8_t>(RecordType::kOoo):
      case static_cast<uint8_t>(RecordType::kOooST):
        bad = DecodeOoo(rec, &rec_ooo, &rec_ooo_st);
        if (bad.ok()) {
          pending_ooo.push_back(std::move(rec_ooo));
          pending_ooo_st.push_back(std::move(rec_ooo_st));
        }
        break;
      case static_cast<uint8_t>(RecordType::kOooHistograms):
      case static_cast<uint8_t>(RecordType::kOooHistogramsST):
        bad = DecodeOooHistograms(rec, &rec_ooo_hist);
        if (bad.ok()) pending_ooo_hist.push_back(std::move(rec_ooo_hist));
        break;
      case static_cast<uint8_t>(RecordType::kMark): {
        Mark m;
        bad = DecodeMark(rec, &m);
        if (!bad.ok()) break;
        for (auto& [ref, c] : pending) {
          auto& list = out.chunks[ref];
          if (!list.empty() && c.mint <= list.back().maxt) {
            out.dropped_overlaps++;
            continue;
          }
          list.push_back(std::move(c));
          out.num_chunks++;
        }
        for (size_t i = 0; i < pending_ooo.size(); i++) {
          const uint64_t ref = pending_ooo[i].first;
          out.ooo[ref] = std::move(pending_ooo[i].second);
          // A later record of the series replaces the start timestamps too.
          if (pending_ooo_st[i].empty()) {
            out.ooo_st.erase(ref);
          } else {
            out.ooo_st[ref] = std::move(pending_ooo_st[i]);
          }
        }
        for (auto& [ref, hists] : pending_ooo_hist) out.ooo_hist[ref] = std::move(hists);
        pending.clear();
        pending_ooo.clear();
        pending_ooo_st.clear();
        pending_ooo_hist.clear();
        out.mark = m;
        cut_at.reset();
        want_cut_point = true;
        break;
      }
      default:
        bad = Malformed("unknown", "type " + std::to_string(rec.empty() ? 0 : static_cast<uint8_t>(rec[0])));
    }
    if (!bad.ok()) {
      TW_LOG(Warn, "{} segment {} offset {}: {}; the log is cut there", dir, reader->segment(), reader->offset(),
             bad.message());
    }
  }
  if (!reader->status().ok()) {
    TW_LOG(Warn, "{}: {}; the log is cut there", dir, reader->status().message());
    if (!cut_at.has_value() && reader->corruption().has_value()) {
      cut_at = {reader->corruption()->segment, reader->corruption()->offset};
    }
    if (!cut_at.has_value()) return reader->status();  // an I/O error, not damage
  }
  slabs.SpillAndDropAll();
  if (cut_at.has_value()) RETURN_IF_ERROR(wal::Repair(dir, cut_at->first, cut_at->second, /*keep_later=*/false));
  return out;
}

}  // namespace trainwatch::tsdb::chunklog
